/* Unit tests of aggregate/'s tables: interning, the whole-callchain cache, sample order,
 * retention, and the symbolication rename map. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zlib.h>

#include "cn_agg.h"

static int setup(void **state)
{
    *state = cn_agg_profile_new();
    return *state ? 0 : -1;
}

static int teardown(void **state)
{
    cn_agg_profile_free(*state);
    return 0;
}

static void test_strings_are_interned_and_stable(void **state)
{
    cn_agg_profile *p = *state;
    int32_t a = cn_agg_cstring(p, "main");
    const char *ptr = cn_agg_string_get(p, a);
    char buf[32];
    /* many more strings force arena blocks and index growth */
    for (int i = 0; i < 20000; i++) {
        snprintf(buf, sizeof(buf), "f%d", i);
        assert_true(cn_agg_cstring(p, buf) >= 0);
    }
    assert_int_equal(cn_agg_cstring(p, "main"), a);
    assert_ptr_equal(cn_agg_string_get(p, a), ptr);
    assert_string_equal(ptr, "main");
    assert_int_equal(cn_agg_string(p, "mainx", 4), a);
    assert_int_not_equal(cn_agg_cstring(p, "f1"), cn_agg_cstring(p, "f10"));
}

static void test_funcs_frames_resources(void **state)
{
    cn_agg_profile *p = *state;
    int32_t libc = cn_agg_resource(p, "libc.so.6", "abcd", "/lib/libc.so.6", CN_AGG_RES_LIBRARY);
    int32_t libc2 = cn_agg_resource(p, "libc.so.6", "ef01", NULL, CN_AGG_RES_LIBRARY);
    assert_true(libc >= 0 && libc2 >= 0 && libc != libc2);
    assert_int_equal(cn_agg_resource(p, "other-name", "abcd", NULL, CN_AGG_RES_LIBRARY), libc);
    int32_t f1 = cn_agg_func(p, "memcpy", libc, NULL, 0);
    int32_t f2 = cn_agg_func(p, "memcpy", libc2, NULL, 0);
    assert_int_not_equal(f1, f2);
    assert_int_equal(cn_agg_func(p, "memcpy", libc, NULL, 0), f1);
    assert_int_equal(cn_agg_func_resource(p, f2), libc2);

    int32_t nf = cn_agg_native_frame(p, libc, 0x1f3);
    assert_int_equal(cn_agg_native_frame(p, libc, 0x1f3), nf);
    const int32_t *chain;
    assert_int_equal(cn_agg_frame_funcs(p, nf, &chain), 1);
    assert_string_equal(cn_agg_func_name(p, chain[0]), "libc.so.6+0x1f3");
    int32_t anon = cn_agg_native_frame(p, -1, 0x7f00dead);
    cn_agg_frame_funcs(p, anon, &chain);
    assert_string_equal(cn_agg_func_name(p, chain[0]), "0x7f00dead");
    assert_int_equal(cn_agg_func(p, "x", 99, NULL, 0), -EINVAL);
}

/* A Python source file's resource is the sampler's (interned by "[py]" + file, named by
 * its base name, "[python]" when unknown); kind markers name only Python and read back. */
static void test_python_resource_and_markers(void **state)
{
    cn_agg_profile *p = *state;
    int32_t a = cn_agg_python_resource(p, "/srv/app/wl.py");
    assert_true(a >= 0);
    assert_string_equal(cn_agg_resource_name(p, a), "wl.py");
    assert_string_equal(cn_agg_resource_identity(p, a), "[py]/srv/app/wl.py");
    assert_string_equal(cn_agg_resource_path(p, a), "/srv/app/wl.py");
    assert_int_equal(cn_agg_resource_kind_of(p, a), CN_AGG_RES_PYTHON);
    /* the live session's resource of the same file is the same one */
    assert_int_equal(
        cn_agg_resource(p, "wl.py", "[py]/srv/app/wl.py", "/srv/app/wl.py", CN_AGG_RES_PYTHON), a);
    /* another file of the same base name is another resource; a bare name has no path */
    int32_t b = cn_agg_python_resource(p, "/srv/lib/wl.py"), c = cn_agg_python_resource(p, "wl.py");
    assert_true(b >= 0 && c >= 0 && b != a && c != a && c != b);
    assert_string_equal(cn_agg_resource_name(p, c), "wl.py");
    assert_null(cn_agg_resource_path(p, c));
    /* a native library of that name stays apart */
    int32_t lib = cn_agg_resource(p, "wl.py", NULL, NULL, CN_AGG_RES_LIBRARY);
    assert_true(lib >= 0 && lib != c);
    int32_t u = cn_agg_python_resource(p, "");
    assert_int_equal(cn_agg_python_resource(p, "[python]"), u);
    assert_string_equal(cn_agg_resource_name(p, u), "[python]");
    assert_string_equal(cn_agg_resource_identity(p, u), "[py]");
    assert_int_equal(cn_agg_python_resource(p, NULL), -EINVAL);

    cn_agg_resource_kind k = CN_AGG_RES_OTHER;
    assert_string_equal(cn_agg_resource_kind_marker(CN_AGG_RES_PYTHON), "python");
    for (int i = CN_AGG_RES_LIBRARY; i < CN_AGG_RES_PYTHON; i++)
        assert_null(cn_agg_resource_kind_marker((cn_agg_resource_kind)i));
    assert_null(cn_agg_resource_kind_marker((cn_agg_resource_kind)99));
    assert_true(cn_agg_resource_kind_parse("python", 6, &k) && k == CN_AGG_RES_PYTHON);
    assert_false(cn_agg_resource_kind_parse("pytho", 5, &k));
    assert_false(cn_agg_resource_kind_parse("pythonx", 7, &k));
    assert_false(cn_agg_resource_kind_parse("", 0, &k));
}

/* The cache must give exactly the stacks that frame-by-frame interning gives. */
static void test_stack_cache_matches_interning(void **state)
{
    cn_agg_profile *p = *state;
    int32_t lib = cn_agg_resource(p, "app", NULL, NULL, CN_AGG_RES_LIBRARY);
    srand(7);
    for (int round = 0; round < 2000; round++) {
        cn_agg_frame_ref refs[40];
        size_t n = 1 + (size_t)(rand() % 40);
        for (size_t i = 0; i < n; i++) {
            refs[i].resource = rand() % 5 == 0 ? -1 : lib;
            refs[i].offset = (uint64_t)(rand() % 8) * 16;
        }
        int32_t s = cn_agg_stack_from_refs(p, refs, n);
        assert_true(s >= 0);
        assert_int_equal(cn_agg_stack_from_refs(p, refs, n), s);
        /* walk the stack back: leaf first, it must reproduce refs */
        int32_t cur = s;
        for (size_t i = 0; i < n; i++) {
            int32_t fr = cn_agg_stack_frame(p, cur);
            assert_int_equal(cn_agg_frame_resource(p, fr), refs[i].resource);
            assert_int_equal((uint64_t)cn_agg_frame_address(p, fr), refs[i].offset);
            cur = cn_agg_stack_prefix(p, cur);
        }
        assert_int_equal(cur, -1);
    }
    assert_int_equal(cn_agg_stack_from_refs(p, NULL, 0), -EINVAL);
}

/* A random callchain of 1..maxn frames over a small alphabet, so chains share prefixes
 * and repeat. */
static size_t random_chain(cn_agg_frame_ref *refs, size_t maxn, int32_t lib)
{
    size_t n = 1 + (size_t)(rand() % (int)maxn);
    for (size_t i = 0; i < n; i++) {
        refs[i].resource = rand() % 5 == 0 ? -1 : lib;
        refs[i].offset = (uint64_t)(rand() % 6) * 16;
    }
    return n;
}

/* Leaf first, stack must reproduce refs exactly. */
static void assert_stack_is(const cn_agg_profile *p, int32_t stack, const cn_agg_frame_ref *refs,
                            size_t n)
{
    int32_t cur = stack;
    for (size_t i = 0; i < n; i++) {
        int32_t fr = cn_agg_stack_frame(p, cur);
        assert_int_equal(cn_agg_frame_resource(p, fr), refs[i].resource);
        assert_int_equal((uint64_t)cn_agg_frame_address(p, fr), refs[i].offset);
        cur = cn_agg_stack_prefix(p, cur);
    }
    assert_int_equal(cur, -1);
}

enum { POOL = 3000, POOL_DEPTH = 24 };

/* The batch path must give exactly the stacks and samples of one call per sample: for
 * batches that mix chains the profile knows, new chains, chains repeated inside the
 * batch, samples without a stack, and enough distinct chains that the cache grows
 * (rehashes) in the middle of a batch. */
static void test_batch_matches_single(void **state)
{
    cn_agg_profile *p = *state;               /* batched */
    cn_agg_profile *q = cn_agg_profile_new(); /* one call per sample */
    assert_non_null(q);
    int32_t lib = cn_agg_resource(p, "app", NULL, NULL, CN_AGG_RES_LIBRARY);
    assert_int_equal(cn_agg_resource(q, "app", NULL, NULL, CN_AGG_RES_LIBRARY), lib);
    int32_t th = cn_agg_thread(p, 1, 2, NULL);
    assert_int_equal(cn_agg_thread(q, 1, 2, NULL), th);
    static cn_agg_frame_ref pool[POOL][POOL_DEPTH];
    size_t pool_n[POOL];
    srand(11);
    for (int i = 0; i < POOL; i++)
        pool_n[i] = random_chain(pool[i], POOL_DEPTH, lib);
    /* some chains known before the first batch */
    for (int i = 0; i < 50; i++) {
        int32_t s = cn_agg_stack_from_refs(p, pool[i], pool_n[i]);
        assert_int_equal(cn_agg_stack_from_refs(q, pool[i], pool_n[i]), s);
    }
    cn_agg_sample_refs batch[300];
    int64_t t = 0;
    size_t total = 0;
    for (int round = 0; round < 40; round++) {
        size_t m = (size_t)(rand() % 300); /* 0 .. 299: empty, partial and several groups */
        for (size_t j = 0; j < m; j++) {
            int pick = rand() % 4;
            /* a known chain, an earlier entry of this batch, no stack, or any chain */
            int k = pick == 0 ? rand() % 50 : rand() % POOL;
            if (pick == 1 && j > 0) {
                batch[j] = batch[(size_t)rand() % j];
            } else {
                batch[j].leaf_first = pick == 2 ? NULL : pool[k];
                batch[j].n = pick == 2 ? 0 : pool_n[k];
            }
            batch[j].time_ns = t + (rand() % 8) - 2; /* sometimes out of order */
            batch[j].weight = 1 + rand() % 3;
            batch[j].thread = rand() % 2 ? th : -1;
            t += 3;
        }
        assert_int_equal(cn_agg_add_samples_refs(p, batch, m), 0);
        for (size_t j = 0; j < m; j++) {
            const cn_agg_sample_refs *e = &batch[j];
            int32_t s = e->n ? cn_agg_stack_from_refs(q, e->leaf_first, e->n) : -1;
            assert_true(s >= -1);
            assert_int_equal(cn_agg_add_sample(q, s, e->time_ns, e->weight, e->thread), 0);
            size_t i = total + j;
            assert_int_equal(cn_agg_sample_stack(p, i), s);
            if (s >= 0)
                assert_stack_is(p, s, e->leaf_first, e->n);
        }
        total += m;
        assert_int_equal(cn_agg_sample_count(p), total);
        assert_int_equal(cn_agg_stack_count(p), cn_agg_stack_count(q));
        assert_int_equal(cn_agg_frame_count(p), cn_agg_frame_count(q));
    }
    assert_true(cn_agg_stack_count(p) > 2000); /* the cache grew past its first size */
    for (size_t i = 0; i < total; i++) {
        assert_int_equal(cn_agg_sample_stack(p, i), cn_agg_sample_stack(q, i));
        assert_int_equal(cn_agg_sample_time(p, i), cn_agg_sample_time(q, i));
        assert_true(cn_agg_sample_weight(p, i) == cn_agg_sample_weight(q, i));
        assert_int_equal(cn_agg_sample_thread(p, i), cn_agg_sample_thread(q, i));
    }
    /* single calls see the chains the batches interned */
    for (int i = 0; i < POOL; i += 7)
        assert_int_equal(cn_agg_stack_from_refs(p, pool[i], pool_n[i]),
                         cn_agg_stack_from_refs(q, pool[i], pool_n[i]));
    cn_agg_profile_free(q);
}

/* An invalid entry: the entries before it are added, it and those after are not, and the
 * error says why; in the first group of a batch and in a later one. */
static void test_batch_invalid_entries(void **state)
{
    cn_agg_profile *p = *state;
    int32_t lib = cn_agg_resource(p, "app", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t th = cn_agg_thread(p, 1, 2, NULL);
    cn_agg_frame_ref good[3] = {{lib, 0x10}, {lib, 0x20}, {-1, 0x7f00}};
    cn_agg_frame_ref bad_res[2] = {{lib, 0x10}, {lib + 7, 0x30}};
    cn_agg_frame_ref bad_neg[1] = {{-2, 0x10}};
    cn_agg_sample_refs batch[40];
    for (size_t j = 0; j < 40; j++)
        batch[j] = (cn_agg_sample_refs){good + j % 3, 3 - j % 3, (int64_t)j, 1, th};
    struct {
        size_t at;
        cn_agg_sample_refs e;
    } cases[] = {
        {0, {bad_res, 2, 0, 1, th}},   {5, {bad_neg, 1, 0, 1, th}}, {17, {NULL, 2, 0, 1, th}},
        {33, {good, 3, 0, 1, th + 1}}, {39, {good, 3, 0, 1, -2}},
    };
    size_t before = 0;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        cn_agg_sample_refs saved = batch[cases[c].at];
        batch[cases[c].at] = cases[c].e;
        assert_int_equal(cn_agg_add_samples_refs(p, batch, 40), -EINVAL);
        assert_int_equal(cn_agg_sample_count(p) - before, cases[c].at);
        before = cn_agg_sample_count(p);
        batch[cases[c].at] = saved;
    }
    /* only the good chain's frames: bad_res fails at its root, which is interned first */
    assert_int_equal(cn_agg_frame_count(p), 3);
    assert_int_equal(cn_agg_add_samples_refs(p, NULL, 0), 0);
    assert_int_equal(cn_agg_add_samples_refs(p, NULL, 1), -EINVAL);
    assert_int_equal(cn_agg_add_samples_refs(p, batch, 40), 0);
    assert_int_equal(cn_agg_sample_count(p), before + 40);
    assert_int_equal(cn_agg_sample_stack(p, before + 1), cn_agg_stack_from_refs(p, good + 1, 2));
}

static void test_samples_sorted_and_folded(void **state)
{
    cn_agg_profile *p = *state;
    int32_t f = cn_agg_func(p, "A", -1, NULL, 0);
    int32_t fr = cn_agg_frame(p, f, -1, -1, 0);
    int32_t st = cn_agg_stack(p, -1, fr);
    int32_t th = cn_agg_thread(p, 10, 11, "worker");
    assert_int_equal(cn_agg_thread(p, 10, 11, NULL), th);
    assert_string_equal(cn_agg_thread_name(p, th), "worker");
    int64_t times[] = {50, 10, 30, 20, 40};
    for (int i = 0; i < 5; i++)
        assert_int_equal(cn_agg_add_sample(p, st, times[i], i + 1, th), 0);
    assert_int_equal(cn_agg_add_sample(p, 99, 0, 1, th), -EINVAL);
    /* fold everything before t=35: samples at 10, 20, 30 (weights 2, 4, 3) */
    assert_int_equal(cn_agg_fold_before(p, 35), 3);
    assert_int_equal(cn_agg_sample_count(p), 2);
    assert_int_equal(cn_agg_sample_time(p, 0), 40);
    assert_int_equal(cn_agg_sample_time(p, 1), 50);
    assert_true(cn_agg_sample_weight(p, 0) == 5.0);
    assert_true(cn_agg_profile_memory(p) > 0);
}

/* Weights of 1 (CPU samples) take no column: 16 bytes a raw sample, not 24; the first
 * other weight makes it, the earlier samples weighing 1 in it. */
static void test_unit_weights_take_no_memory(void **state)
{
    cn_agg_profile *p = *state;
    int32_t fr = cn_agg_frame(p, cn_agg_func(p, "A", -1, NULL, 0), -1, -1, 0);
    int32_t st = cn_agg_stack(p, -1, fr), th = cn_agg_thread(p, 1, 1, NULL);
    for (int i = 0; i < 4096; i++)
        assert_int_equal(cn_agg_add_sample(p, st, 4096 - i, 1, th), 0);
    size_t before = cn_agg_profile_memory(p);
    assert_int_equal(cn_agg_add_sample(p, st, 5000, 2.5, th), 0);
    size_t after = cn_agg_profile_memory(p);
    assert_true(after - before >= 8 * 4096); /* the column, at the table's capacity */
    assert_int_equal(cn_agg_samples_sort(p), 0);
    double sum = 0;
    for (size_t i = 0; i < cn_agg_sample_count(p); i++)
        sum += cn_agg_sample_weight(p, i);
    assert_true(sum == 4096 + 2.5);
    assert_true(cn_agg_sample_weight(p, 0) == 1.0); /* time 1: sorted first */
    assert_int_equal(cn_agg_sample_set_weight(p, 1, 4), 0);
    assert_true(cn_agg_sample_weight(p, 1) == 4.0);
    /* Folded and queried: every weight counts. */
    assert_true(cn_agg_fold_before(p, 4097) == 4096);
    assert_true(cn_agg_sample_weight(p, 0) == 2.5);
    /* A profile that sets a weight of 1 explicitly still needs no column. */
    cn_agg_profile *q = cn_agg_profile_new();
    st = cn_agg_stack(q, -1, cn_agg_frame(q, cn_agg_func(q, "B", -1, NULL, 0), -1, -1, 0));
    assert_int_equal(cn_agg_add_sample(q, st, 1, 1, -1), 0);
    assert_int_equal(cn_agg_sample_set_weight(q, 0, 1), 0);
    size_t m1 = cn_agg_profile_memory(q);
    assert_int_equal(cn_agg_sample_set_weight(q, 0, 3), 0);
    assert_true(cn_agg_profile_memory(q) > m1);
    assert_true(cn_agg_sample_weight(q, 0) == 3.0);
    cn_agg_profile_free(q);
}

static void test_timeline_stack(void **state)
{
    cn_agg_profile *p = *state;
    int32_t a = cn_agg_frame(p, cn_agg_func(p, "A", -1, NULL, 0), -1, -1, 0);
    int32_t b = cn_agg_frame(p, cn_agg_func(p, "B", -1, NULL, 0), -1, -1, 0);
    int32_t sa = cn_agg_stack(p, -1, a), sb = cn_agg_stack(p, -1, b);
    cn_agg_add_sample(p, sa, 0, 1, -1);
    cn_agg_add_sample(p, sa, 1, 1, -1);
    assert_int_equal(cn_agg_sample_timeline_stack(p, 1), sa);
    assert_int_equal(cn_agg_sample_set_timeline_stack(p, 1, sb), 0);
    assert_int_equal(cn_agg_sample_timeline_stack(p, 1), sb);
    assert_int_equal(cn_agg_sample_timeline_stack(p, 0), sa);
    assert_int_equal(cn_agg_sample_set_timeline_stack(p, 5, sb), -ERANGE);
    assert_int_equal(cn_agg_sample_set_timeline_stack(p, 1, -2), -ERANGE);
    /* -1: no path on the timeline (a DevTools (program) sample), not "the sample's own" */
    assert_int_equal(cn_agg_sample_set_timeline_stack(p, 0, -1), 0);
    assert_int_equal(cn_agg_sample_timeline_stack(p, 0), -1);
    assert_int_equal(cn_agg_sample_stack(p, 0), sa);
    /* samples added later have none of their own */
    cn_agg_add_sample(p, sb, 2, 1, -1);
    assert_int_equal(cn_agg_sample_timeline_stack(p, 2), sb);
}

/* Inflates the gzip stream cn_agg_write_canopy wrote (cn_agg_canopy_read takes the text).
 * Returns a malloc'd buffer (the caller frees it) and its length in *len. */
static char *gunzip(const char *gz, size_t gz_len, size_t *len)
{
    z_stream zs = {0};
    size_t cap = 4096, n = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    assert_int_equal(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
    zs.next_in = (Bytef *)gz;
    zs.avail_in = (uInt)gz_len;
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        if (n == cap) {
            cap *= 2;
            out = realloc(out, cap);
            assert_non_null(out);
        }
        zs.next_out = (Bytef *)out + n;
        zs.avail_out = (uInt)(cap - n);
        rc = inflate(&zs, Z_NO_FLUSH);
        assert_true(rc == Z_OK || rc == Z_STREAM_END);
        n = cap - zs.avail_out;
    }
    inflateEnd(&zs);
    *len = n;
    return out;
}

/* docs/calltree.md §4.4: frames 0x10,0x14 -> main, 0x40,0x48 -> work, 0x80 -> leaf. */
static void test_regroup_renames(void **state)
{
    cn_agg_profile *p = *state;
    int32_t lib = cn_agg_resource(p, "L", NULL, NULL, CN_AGG_RES_LIBRARY);
    uint64_t addrs[] = {0x10, 0x14, 0x40, 0x48, 0x80};
    const char *names[] = {"main", "main", "work", "work", "leaf"};
    cn_agg_symbol sym[5];
    cn_agg_frame_symbols batch[5];
    for (int i = 0; i < 5; i++) {
        sym[i] = (cn_agg_symbol){names[i], "l.c", 10 + i};
        batch[i] = (cn_agg_frame_symbols){cn_agg_native_frame(p, lib, addrs[i]), &sym[i], 1, NULL};
    }
    assert_int_equal(cn_agg_regroup(p, batch, 5), 0);
    const int32_t *chain;
    cn_agg_frame_funcs(p, batch[1].frame, &chain);
    assert_string_equal(cn_agg_func_name(p, chain[0]), "main");
    assert_int_equal(cn_agg_frame_line(p, batch[1].frame), 11);

    cn_agg_transform t;
    assert_int_equal(cn_agg_transform_parse("focus:L+0x14;L+0x48;L+0x80", &t, NULL), 0);
    assert_int_equal(cn_agg_remap_transform(p, &t), 1);
    char *s = cn_agg_transform_format(&t);
    assert_string_equal(s, "focus:main;work;leaf");
    free(s);
    cn_agg_transform_clear(&t);

    /* an inline expansion later: leaf -> [outer, inl]; main renamed transitively */
    cn_agg_symbol chain2[2] = {{"outer", NULL, 3}, {"inl", NULL, 4}};
    cn_agg_frame_symbols b2 = {batch[4].frame, chain2, 2, NULL};
    assert_int_equal(cn_agg_regroup(p, &b2, 1), 0);
    assert_int_equal(cn_agg_frame_funcs(p, batch[4].frame, &chain), 2);
    assert_int_equal(cn_agg_transform_parse("merge-node:L+0x80", &t, NULL), 0);
    assert_int_equal(cn_agg_remap_transform(p, &t), 1);
    s = cn_agg_transform_format(&t);
    assert_string_equal(s, "merge-node:outer;inl");
    free(s);
    cn_agg_transform_clear(&t);

    /* the rename map survives a .canopy round trip */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    assert_int_equal(cn_agg_write_canopy(p, mem), 0);
    fclose(mem);
    size_t text_len = 0;
    char *text = gunzip(buf, len, &text_len);
    free(buf);
    cn_agg_profile *back = NULL;
    assert_int_equal(cn_agg_canopy_read(text, text_len, "mem.canopy", &back, NULL), 0);
    free(text);
    assert_int_equal(cn_agg_transform_parse("focus:L+0x10;L+0x80", &t, NULL), 0);
    assert_int_equal(cn_agg_remap_transform(back, &t), 1);
    s = cn_agg_transform_format(&t);
    assert_string_equal(s, "focus:main;outer;inl");
    free(s);
    cn_agg_transform_clear(&t);
    cn_agg_profile_free(back);

    /* bad input changes nothing */
    cn_agg_frame_symbols bad = {12345, chain2, 2, NULL};
    assert_int_equal(cn_agg_regroup(p, &bad, 1), -EINVAL);
}

/* "NAME:SELF ..." of the FUNCTIONS view (self desc, then name), with or without no_inline. */
static void functions(cn_agg_profile *p, bool no_inline, const cn_agg_transform *tf, char *out,
                      size_t size)
{
    cn_agg_query q;
    cn_agg_query_init(&q);
    q.view = CN_AGG_VIEW_FUNCTIONS;
    q.no_inline = no_inline;
    q.transforms = tf;
    q.n_transforms = tf ? 1 : 0;
    cn_agg_tree *t = NULL;
    assert_int_equal(cn_agg_query_run(p, &q, &t, NULL), 0);
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < t->n_functions; i++)
        n += (size_t)snprintf(out + n, size - n, "%s%s:%g", i ? " " : "",
                              cn_agg_func_name(p, t->functions[i].func), t->functions[i].self);
    cn_agg_tree_free(t);
}

/* The .canopy text of p (decompressed; the caller frees it). */
static char *canopy_text(const cn_agg_profile *p, size_t *len)
{
    char *buf = NULL;
    size_t gz_len = 0;
    FILE *mem = open_memstream(&buf, &gz_len);
    assert_int_equal(cn_agg_write_canopy(p, mem), 0);
    fclose(mem);
    char *text = gunzip(buf, gz_len, len);
    free(buf);
    return text;
}

/* The writer's numbers (wr_int, wr_double): negative ids and addresses, a time that goes
 * back (a negative delta), weights whole and not, large and negative, written as "%.17g"
 * writes them and read back exactly. */
static void test_canopy_numbers(void **state)
{
    cn_agg_profile *p = *state;
    int32_t lib = cn_agg_resource(p, "lib.so", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t f1 = cn_agg_native_frame(p, lib, 0x7fffffffffffULL);
    int32_t f2 = cn_agg_native_frame(p, lib, 0);
    int32_t s1 = cn_agg_stack(p, -1, f1), s2 = cn_agg_stack(p, s1, f2);
    int32_t t = cn_agg_thread(p, -7, INT32_MAX, "x");
    const double w[] = {1, 2.5, 1e17, 123456789012345678.0, -3, 0.1, 9007199254740991.0};
    const int64_t at[] = {INT64_MAX, 5, -1000, 0, INT64_MIN + 1, 42, 7};
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(cn_agg_add_sample(p, i % 2 ? s2 : s1, at[i], w[i], i % 3 ? t : -1), 0);
    size_t len = 0;
    char *text = canopy_text(p, &len);
    /* "%.17g": whole numbers below 1e17 plainly, larger ones with an exponent */
    assert_non_null(memmem(text, len, " 2.5 ", strlen(" 2.5 ")));
    assert_non_null(memmem(text, len, " 1e+17 ", strlen(" 1e+17 ")));
    assert_non_null(memmem(text, len, " 9007199254740991 ", strlen(" 9007199254740991 ")));
    assert_non_null(memmem(text, len, " -3 ", strlen(" -3 ")));
    assert_non_null(memmem(text, len, " 0.10000000000000001 ", strlen(" 0.10000000000000001 ")));
    cn_agg_profile *back = NULL;
    assert_int_equal(cn_agg_canopy_read(text, len, "mem.canopy", &back, NULL), 0);
    free(text);
    assert_int_equal(cn_agg_sample_count(back), cn_agg_sample_count(p));
    for (size_t i = 0; i < cn_agg_sample_count(p); i++) {
        assert_true(cn_agg_sample_time(back, i) == cn_agg_sample_time(p, i));
        assert_true(cn_agg_sample_weight(back, i) == cn_agg_sample_weight(p, i));
        assert_int_equal(cn_agg_sample_stack(back, i), cn_agg_sample_stack(p, i));
        assert_int_equal(cn_agg_sample_thread(back, i), cn_agg_sample_thread(p, i));
    }
    assert_int_equal(cn_agg_thread_pid(back, 0), -7);
    assert_int_equal(cn_agg_thread_tid(back, 0), INT32_MAX);
    cn_agg_profile_free(back);
}

/* docs/calltree.md §4.5: a frame's symbol func (the symbol table's name where DWARF names
 * the outer function otherwise: a clone, an alias) is what no_inline shows; the default
 * view keeps the DWARF chain; regroup replaces it; .canopy keeps it. */
/* The namer of test_frame_namer: "hot" over [0x1000, 0x2000) of resource ctx. */
static const char *test_namer(void *ctx, int32_t res, uint64_t offset)
{
    return res == *(int32_t *)ctx && offset >= 0x1000 && offset < 0x2000 ? "hot" : NULL;
}

/* A namer (cn_agg_set_frame_namer) names a new native frame as it is made: the func that
 * cn_agg_regroup() gives a frame named "hot" later, and no placeholder func for it. */
static void test_frame_namer(void **state)
{
    cn_agg_profile *p = *state;
    int32_t lib = cn_agg_resource(p, "cc1", "bid", "/usr/lib/cc1", CN_AGG_RES_LIBRARY);
    int32_t other = cn_agg_resource(p, "as", "bid2", "/usr/bin/as", CN_AGG_RES_LIBRARY);
    int32_t late = cn_agg_native_frame(p, lib, 0x1800); /* before the namer: placeholder */
    const int32_t *funcs;
    assert_int_equal(cn_agg_frame_funcs(p, late, &funcs), 1);
    assert_string_equal(cn_agg_func_name(p, funcs[0]), "cc1+0x1800");
    cn_agg_set_frame_namer(p, test_namer, &lib);
    size_t funcs_before = cn_agg_func_count(p);
    int32_t named = cn_agg_native_frame(p, lib, 0x1234);
    assert_int_equal(cn_agg_frame_funcs(p, named, &funcs), 1);
    int32_t hot = funcs[0];
    assert_string_equal(cn_agg_func_name(p, hot), "hot");
    assert_int_equal(cn_agg_func_resource(p, hot), lib);
    assert_int_equal(cn_agg_func_count(p), funcs_before + 1); /* "hot" only */
    assert_int_equal(cn_agg_frame_address(p, named), 0x1234);
    assert_int_equal(cn_agg_frame_line(p, named), 0);
    /* the same frame again is found, not named again */
    assert_int_equal(cn_agg_native_frame(p, lib, 0x1234), named);
    assert_int_equal(cn_agg_native_frame(p, lib, 0x1235) != named, 1);
    assert_int_equal(cn_agg_func_count(p), funcs_before + 1);
    /* outside the range and in another resource: placeholders */
    int32_t bare = cn_agg_native_frame(p, lib, 0x2000);
    assert_int_equal(cn_agg_frame_funcs(p, bare, &funcs), 1);
    assert_string_equal(cn_agg_func_name(p, funcs[0]), "cc1+0x2000");
    int32_t as = cn_agg_native_frame(p, other, 0x1234);
    assert_int_equal(cn_agg_frame_funcs(p, as, &funcs), 1);
    assert_string_equal(cn_agg_func_name(p, funcs[0]), "as+0x1234");
    /* the frame made before: regrouped to the name, it joins the same func */
    cn_agg_symbol sym = {"hot", NULL, 0};
    cn_agg_frame_symbols b = {late, &sym, 1, NULL};
    assert_int_equal(cn_agg_regroup(p, &b, 1), 0);
    assert_int_equal(cn_agg_frame_funcs(p, late, &funcs), 1);
    assert_int_equal(funcs[0], hot);
    cn_agg_set_frame_namer(p, NULL, NULL);
    int32_t after = cn_agg_native_frame(p, lib, 0x1900);
    assert_int_equal(cn_agg_frame_funcs(p, after, &funcs), 1);
    assert_string_equal(cn_agg_func_name(p, funcs[0]), "cc1+0x1900");
}

static void test_regroup_symbol_func(void **state)
{
    cn_agg_profile *p = *state;
    int32_t lib = cn_agg_resource(p, "libc.so.6", "bid", "/l/libc.so.6", CN_AGG_RES_LIBRARY);
    int32_t th = cn_agg_thread(p, 1, 1, "t");
    uint64_t addrs[] = {0x10, 0x80, 0x90, 0xa0};
    int32_t fr[4];
    for (int i = 0; i < 4; i++)
        fr[i] = cn_agg_native_frame(p, lib, addrs[i]);
    double w[] = {2, 1, 4}; /* main → 0x80, 0x90, 0xa0 */
    for (int i = 0; i < 3; i++)
        cn_agg_add_sample(p, cn_agg_stack(p, cn_agg_stack(p, -1, fr[0]), fr[i + 1]), i, w[i], th);
    size_t len;
    char *text = canopy_text(p, &len);
    assert_memory_equal(text, "canopy-profile 1\n", 17); /* no symbol funcs: version 1 */
    free(text);

    cn_agg_symbol mainsym = {"main", "m.c", 3};
    cn_agg_symbol msort[2] = {{"msort_with_tmp", "msort.c", 10}, {"inl", "msort.c", 20}};
    cn_agg_symbol mal = {"__libc_malloc", "malloc.c", 30};
    cn_agg_frame_symbols batch[4] = {{fr[0], &mainsym, 1, NULL},
                                     {fr[1], msort, 2, "msort_with_tmp.part.0"},
                                     {fr[2], msort, 1, "msort_with_tmp.part.0"},
                                     {fr[3], &mal, 1, "malloc"}};
    assert_int_equal(cn_agg_regroup(p, batch, 4), 0);
    char out[256];
    functions(p, false, NULL, out, sizeof(out));
    assert_string_equal(out, "__libc_malloc:4 inl:2 msort_with_tmp:1 main:0");
    functions(p, true, NULL, out, sizeof(out));
    assert_string_equal(out, "malloc:4 msort_with_tmp.part.0:3 main:0");

    /* the symbol name is a function transforms and lines know */
    cn_agg_transform tf;
    assert_int_equal(cn_agg_transform_parse("focus:main;malloc", &tf, NULL), 0);
    assert_int_equal(cn_agg_transform_check(p, &tf, NULL), 0);
    functions(p, true, &tf, out, sizeof(out));
    assert_string_equal(out, "malloc:4");
    cn_agg_transform_clear(&tf);
    cn_agg_query q;
    cn_agg_query_init(&q);
    q.no_inline = true;
    cn_agg_line_row *lines = NULL, *ad = NULL;
    size_t nl = 0, na = 0;
    assert_int_equal(cn_agg_lines(p, &q, "msort_with_tmp.part.0", &lines, &nl, &ad, &na, NULL), 0);
    assert_int_equal(na, 2);
    assert_true(ad[0].key == 0x80 && ad[0].self == 2 && ad[1].key == 0x90 && ad[1].self == 1);
    free(lines);
    free(ad);

    /* .canopy round trip: version 2, the same answers */
    text = canopy_text(p, &len);
    assert_memory_equal(text, "canopy-profile 2\n", 17);
    cn_agg_profile *back = NULL;
    assert_int_equal(cn_agg_canopy_read(text, len, "mem.canopy", &back, NULL), 0);
    free(text);
    functions(back, true, NULL, out, sizeof(out));
    assert_string_equal(out, "malloc:4 msort_with_tmp.part.0:3 main:0");
    functions(back, false, NULL, out, sizeof(out));
    assert_string_equal(out, "__libc_malloc:4 inl:2 msort_with_tmp:1 main:0");
    cn_agg_profile_free(back);

    /* re-symbolized frames replace it: none, or the same name as the outer func */
    cn_agg_frame_symbols again[2] = {{fr[3], &mal, 1, NULL}, {fr[2], msort, 1, "msort_with_tmp"}};
    assert_int_equal(cn_agg_regroup(p, again, 2), 0);
    functions(p, true, NULL, out, sizeof(out));
    assert_string_equal(out, "__libc_malloc:4 msort_with_tmp.part.0:2 msort_with_tmp:1 main:0");
}

/* "ROOT:TOTAL ..." of the roots of p's tree under q. */
static void roots(cn_agg_profile *p, const cn_agg_query *q, char *out, size_t size)
{
    cn_agg_tree *t = NULL;
    assert_int_equal(cn_agg_query_run(p, q, &t, NULL), 0);
    size_t n = 0;
    out[0] = '\0';
    for (int32_t r = t->first_root; r >= 0; r = t->nodes[r].next_sibling)
        n += (size_t)snprintf(out + n, size - n, "%s%s:%g", n ? " " : "",
                              cn_agg_func_name(p, t->nodes[r].func), t->nodes[r].total);
    cn_agg_tree_free(t);
}

/* Processes' cgroups (docs/cli-live.md "Containers and cgroups"): --group-by container,
 * cgroup, pod and service roots, --where on each key (a container by its id's prefix,
 * keys ORed within, ANDed across), totals that add up to the session's, and a .canopy
 * round trip (version 3) that keeps them. */
#define CID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
static void test_cgroup_keys(void **state)
{
    cn_agg_profile *p = *state;
    const char *pod = "/kubepods.slice/kubepods-burstable.slice/"
                      "kubepods-burstable-pod0d2b9a4e_3c1f_4f0e_9b1a_1c2d3e4f5a6b.slice/"
                      "cri-containerd-" CID ".scope";
    int32_t res = cn_agg_resource(p, "lib", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t st = cn_agg_stack(p, -1, cn_agg_native_frame(p, res, 0x10));
    int32_t t1 = cn_agg_thread(p, 10, 10, "web"), t2 = cn_agg_thread(p, 10, 11, "web");
    int32_t t3 = cn_agg_thread(p, 20, 20, "cron"), t4 = cn_agg_thread(p, 30, 30, "bare");
    assert_int_equal(cn_agg_process_set_cgroup(p, 10, pod), 0);
    assert_int_equal(cn_agg_process_set_cgroup(p, 20, "/system.slice/cron.service"), 0);
    assert_null(cn_agg_process_name(p, 10)); /* a cgroup alone gives no name */
    int32_t th[] = {t1, t2, t2, t3, t3, t3, t4};
    for (size_t i = 0; i < sizeof(th) / sizeof(th[0]); i++)
        assert_int_equal(cn_agg_add_sample(p, st, (int64_t)i, 1, th[i]), 0);
    char out[1024];
    cn_agg_query q;
    cn_agg_query_init(&q);
    q.group_by = CN_AGG_GROUP_CONTAINER;
    roots(p, &q, out, sizeof(out));
    assert_string_equal(out, "container=(none):4 container=" CID ":3");
    q.group_by = CN_AGG_GROUP_POD;
    roots(p, &q, out, sizeof(out));
    assert_string_equal(out, "pod=(none):4 pod=0d2b9a4e-3c1f-4f0e-9b1a-1c2d3e4f5a6b:3");
    q.group_by = CN_AGG_GROUP_SERVICE;
    roots(p, &q, out, sizeof(out));
    assert_string_equal(out, "service=cri-containerd-" CID ".scope:3 service=cron.service:3 "
                             "service=(none):1");
    q.group_by = CN_AGG_GROUP_CGROUP;
    roots(p, &q, out, sizeof(out));
    assert_string_equal(out, "cgroup=/kubepods.slice/kubepods-burstable.slice/"
                             "kubepods-burstable-pod0d2b9a4e_3c1f_4f0e_9b1a_1c2d3e4f5a6b.slice/"
                             "cri-containerd-" CID ".scope:3 cgroup=/system.slice/cron.service:3 "
                             "cgroup=(none):1");
    cn_agg_where w[] = {{CN_CGROUP_KEY_CONTAINER, "0123"},
                        {CN_CGROUP_KEY_SERVICE, "cron.service"},
                        {CN_CGROUP_KEY_QOS, "burstable"}};
    q.group_by = CN_AGG_GROUP_NONE;
    q.where = w;
    q.n_where = 1;
    roots(p, &q, out, sizeof(out));
    assert_string_equal(out, "lib+0x10:3");
    q.where = w + 1; /* service */
    roots(p, &q, out, sizeof(out));
    assert_string_equal(out, "lib+0x10:3");
    q.where = w; /* container AND service: nothing */
    q.n_where = 2;
    roots(p, &q, out, sizeof(out));
    assert_string_equal(out, "");
    q.where = w;
    w[1] = (cn_agg_where){CN_CGROUP_KEY_CONTAINER, "fff"}; /* two containers: ORed */
    roots(p, &q, out, sizeof(out));
    assert_string_equal(out, "lib+0x10:3");
    q.where = w + 2; /* qos */
    q.n_where = 1;
    roots(p, &q, out, sizeof(out));
    assert_string_equal(out, "lib+0x10:3");
    assert_true(cn_agg_query_keeps_thread(p, &q, t1));
    assert_false(cn_agg_query_keeps_thread(p, &q, t3));
    assert_false(cn_agg_query_keeps_thread(p, &q, -1));

    /* .canopy keeps them (version 3); without cgroups a profile stays version <= 2 */
    size_t len = 0;
    char *text = canopy_text(p, &len);
    assert_non_null(memmem(text, len, "canopy-profile 3\n", 17));
    assert_non_null(memmem(text, len, "\ncgroups 2\n", 11));
    cn_agg_profile *back = NULL;
    assert_int_equal(cn_agg_canopy_read(text, len, "mem.canopy", &back, NULL), 0);
    free(text);
    assert_string_equal(cn_agg_process_cgroup(back, 10), pod);
    assert_string_equal(cn_agg_process_cgroup(back, 20), "/system.slice/cron.service");
    assert_null(cn_agg_process_cgroup(back, 30));
    q.where = NULL;
    q.n_where = 0;
    q.group_by = CN_AGG_GROUP_CONTAINER;
    roots(back, &q, out, sizeof(out));
    assert_string_equal(out, "container=(none):4 container=" CID ":3");
    cn_agg_profile_free(back);
    cn_agg_profile *plain = cn_agg_profile_new();
    text = canopy_text(plain, &len);
    assert_non_null(memmem(text, len, "canopy-profile 1\n", 17));
    assert_null(memmem(text, len, "cgroups", 7));
    free(text);
    cn_agg_profile_free(plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_strings_are_interned_and_stable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_canopy_numbers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_funcs_frames_resources, setup, teardown),
        cmocka_unit_test_setup_teardown(test_python_resource_and_markers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stack_cache_matches_interning, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_matches_single, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_invalid_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_samples_sorted_and_folded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unit_weights_take_no_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeline_stack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_regroup_renames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_regroup_symbol_func, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frame_namer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cgroup_keys, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
