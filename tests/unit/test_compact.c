/* test_compact.c — cn_agg_compact: the tables shrink, and no answer changes.
 *
 * Two profiles are fed the same random native callchains (shared prefixes, five threads,
 * weights, timeline stacks), symbolized by the same regroups (inline chains, symbol
 * funcs, frames collapsing into one func) and folded by the same retention steps; one is
 * compacted along the way. Every answer a client can get — trees by function (tree,
 * inverted, functions, callers, no_inline, grouped by thread and process, filtered by
 * thread, ranged), timelines, activity, lines and addresses, the raw sample walk by
 * function path — is rendered to text and must be byte for byte the same in both, and in
 * the compacted profile after a .canopy round trip. Stacks no sample reaches (made the way
 * importers make them) must go, and the callchain cache must keep only raw samples'.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <math.h>

#include <cmocka.h>
#include <zlib.h>

#include "cn_agg.h"

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

#define N_RES     3
#define N_ADDR    40
#define N_THREADS 5
#define MAX_DEPTH 12

/* Both profiles get the same calls: a twin pair. */
typedef struct twins {
    cn_agg_profile *p[2];
    int32_t res[N_RES], thr[N_THREADS];
    int64_t now;
} twins;

static void twins_init(twins *t)
{
    static const char *const names[N_RES] = {"app", "libc.so.6", "libm.so.6"};
    memset(t, 0, sizeof(*t));
    for (int k = 0; k < 2; k++) {
        t->p[k] = cn_agg_profile_new();
        assert_non_null(t->p[k]);
        for (int r = 0; r < N_RES; r++)
            assert_int_equal(
                (t->res[r] = cn_agg_resource(t->p[k], names[r], NULL, NULL, CN_AGG_RES_LIBRARY)),
                r);
        for (int i = 0; i < N_THREADS; i++) {
            char comm[16];
            snprintf(comm, sizeof(comm), "w%d", i);
            t->thr[i] = cn_agg_thread(t->p[k], 100 + i / 2, 100 + i, comm);
            assert_int_equal(cn_agg_process_set_name(t->p[k], 100 + i / 2, "proc"), 0);
        }
    }
}

/* n samples of random callchains (prefixes shared: callchains start at a few roots). */
static void feed(twins *t, int n)
{
    cn_agg_frame_ref refs[64][MAX_DEPTH];
    cn_agg_sample_refs batch[64];
    while (n > 0) {
        int m = n < 64 ? n : 64;
        for (int i = 0; i < m; i++) {
            uint32_t depth = 1 + rnd(MAX_DEPTH);
            for (uint32_t d = 0; d < depth; d++) { /* leaf first: the root is refs[depth-1] */
                uint32_t outer = depth - 1 - d;    /* 0 at the root */
                uint32_t addr = outer < 2 ? outer : 2 + rnd(N_ADDR);
                refs[i][d] = (cn_agg_frame_ref){t->res[addr % N_RES], 0x1000 + 16 * addr};
            }
            t->now += 1000000 + rnd(3) * 100000;
            batch[i] = (cn_agg_sample_refs){refs[i], depth, t->now, rnd(8) ? 1.0 : 2.0,
                                            t->thr[rnd(N_THREADS)]};
        }
        for (int k = 0; k < 2; k++)
            assert_int_equal(cn_agg_add_samples_refs(t->p[k], batch, (size_t)m), 0);
        n -= m;
    }
}

/* Symbols for every frame not named yet, and renames of some named ones: names from a
 * small set, so frames collapse into one func; some inline chains and symbol funcs. */
static void regroup(twins *t)
{
    static const char *const fn[] = {"main", "run", "parse", "eval", "hash", "memcpy", "sqrt"};
    size_t nf = cn_agg_frame_count(t->p[0]);
    cn_agg_frame_symbols *b = calloc(nf, sizeof(*b));
    cn_agg_symbol *s = calloc(nf * 3, sizeof(*s));
    assert_true(b && s);
    size_t n = 0;
    for (size_t f = 0; f < nf; f++) {
        if (!cn_agg_frame_is_placeholder(t->p[0], (int32_t)f) && rnd(4))
            continue;
        size_t depth = 1 + (rnd(5) == 0) + (rnd(9) == 0);
        for (size_t d = 0; d < depth; d++)
            s[3 * n + d] = (cn_agg_symbol){fn[rnd(7)], d ? "x.h" : "x.c", (int32_t)(1 + rnd(30))};
        b[n] = (cn_agg_frame_symbols){(int32_t)f, &s[3 * n], depth, rnd(6) ? NULL : "clone.part.0"};
        n++;
    }
    for (int k = 0; k < 2; k++)
        assert_int_equal(cn_agg_regroup(t->p[k], b, n), 0);
    free(b);
    free(s);
}

/* Stacks no sample uses (as an importer may leave them), and timeline stacks. */
static void extra_stacks(twins *t)
{
    int32_t frames[6];
    size_t nf = cn_agg_frame_count(t->p[0]);
    for (int i = 0; i < 20; i++) {
        size_t n = 1 + rnd(6);
        for (size_t d = 0; d < n; d++)
            frames[d] = (int32_t)rnd((uint32_t)nf);
        int32_t st[2];
        for (int k = 0; k < 2; k++) /* ids differ once p[1] was compacted */
            assert_true((st[k] = cn_agg_stack_from_frames(t->p[k], frames, n)) >= 0);
        size_t ns = cn_agg_sample_count(t->p[0]);
        if (i % 4 == 0 && ns) { /* a timeline stack of its own for a raw sample */
            size_t at = rnd((uint32_t)ns);
            for (int k = 0; k < 2; k++)
                assert_int_equal(cn_agg_sample_set_timeline_stack(t->p[k], at, st[k]), 0);
        }
    }
}

static void fold(twins *t, int64_t before)
{
    for (int k = 0; k < 2; k++)
        assert_true(cn_agg_fold_before(t->p[k], before) >= 0);
}

/* ---- answers as text ------------------------------------------------------------------ */

static void dump_node(FILE *f, const cn_agg_profile *p, const cn_agg_tree *tr, int32_t n, int depth)
{
    for (; n >= 0; n = tr->nodes[n].next_sibling) {
        const cn_agg_node *x = &tr->nodes[n];
        fprintf(f, "%*s%s %g %g %d %d\n", 2 * depth, "", cn_agg_func_name(p, x->func), x->total,
                x->self, x->merged_stacks, x->recursions);
        dump_node(f, p, tr, x->first_child, depth + 1);
    }
}

static void dump_query(FILE *f, cn_agg_profile *p, const cn_agg_query *q, const char *what)
{
    cn_agg_tree *tr = NULL;
    cn_err err = {0};
    assert_int_equal(cn_agg_query_run(p, q, &tr, &err), 0);
    fprintf(f, "== %s total %g\n", what, tr->total);
    dump_node(f, p, tr, tr->first_root, 0);
    for (size_t i = 0; i < tr->n_functions; i++)
        fprintf(f, "fn %s %g %g\n", cn_agg_func_name(p, tr->functions[i].func),
                tr->functions[i].self, tr->functions[i].total);
    cn_agg_tree_free(tr);
}

/* The raw walk summed by function path (frame stacks are the profile's own numbering). */
struct walk {
    FILE *f;
    cn_agg_profile *p;
};

static int walk_one(void *ctx, int32_t stack, int32_t thread, int64_t time_ns, double weight,
                    int64_t count)
{
    struct walk *w = ctx;
    int32_t funcs[256];
    size_t n = cn_agg_stack_funcs(w->p, stack, funcs, 256);
    fprintf(w->f, "s %d %lld %g %lld:", thread, (long long)time_ns, weight, (long long)count);
    for (size_t i = 0; i < n && i < 256; i++)
        fprintf(w->f, " %s", cn_agg_func_name(w->p, funcs[i]));
    fputc('\n', w->f);
    return 0;
}

static char *answers(cn_agg_profile *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    cn_agg_query q;
    cn_agg_transform tf;
    cn_err err = {0};
    static const cn_agg_view views[] = {CN_AGG_VIEW_TREE, CN_AGG_VIEW_INVERTED,
                                        CN_AGG_VIEW_FUNCTIONS};
    for (size_t v = 0; v < 3; v++) {
        for (int ni = 0; ni < 2; ni++) {
            cn_agg_query_init(&q);
            q.view = views[v];
            q.no_inline = ni;
            dump_query(f, p, &q, "view");
        }
    }
    cn_agg_query_init(&q);
    q.view = CN_AGG_VIEW_CALLERS;
    q.view_func = "hash";
    dump_query(f, p, &q, "callers hash");
    cn_agg_query_init(&q);
    q.group_by = CN_AGG_GROUP_THREAD;
    dump_query(f, p, &q, "by thread");
    cn_agg_query_init(&q);
    q.group_by = CN_AGG_GROUP_PROCESS;
    dump_query(f, p, &q, "by process");
    cn_agg_query_init(&q);
    q.tid = 102;
    dump_query(f, p, &q, "tid 102");
    cn_agg_query_init(&q);
    q.from_ns = 30000000;
    q.to_ns = 400000000;
    dump_query(f, p, &q, "range");
    assert_int_equal(cn_agg_transform_parse("merge:parse", &tf, &err), 0);
    cn_agg_query_init(&q);
    q.transforms = &tf;
    q.n_transforms = 1;
    dump_query(f, p, &q, "merge parse");
    cn_agg_transform_clear(&tf);

    cn_agg_call *calls = NULL;
    size_t n_calls = 0;
    cn_agg_query_init(&q);
    assert_int_equal(cn_agg_timeline(p, &q, &calls, &n_calls, &err), 0);
    for (size_t i = 0; i < n_calls; i++)
        fprintf(f, "call %s %d %d %lld %lld\n", cn_agg_func_name(p, calls[i].func), calls[i].tid,
                calls[i].depth, (long long)calls[i].start_ns, (long long)calls[i].dur_ns);
    free(calls);

    double w[32] = {0};
    assert_int_equal(cn_agg_activity(p, &q, 2000000000, w, 32, &err), 0);
    for (int i = 0; i < 32; i++)
        fprintf(f, "act %g\n", w[i]);

    static const char *const fn[] = {"hash", "memcpy", "eval"};
    for (int i = 0; i < 3; i++) {
        cn_agg_line_row *lines = NULL, *addrs = NULL;
        size_t nl = 0, na = 0;
        int r = cn_agg_lines(p, &q, fn[i], &lines, &nl, &addrs, &na, &err);
        fprintf(f, "lines %s %d\n", fn[i], r);
        for (size_t k = 0; k < nl; k++)
            fprintf(f, " l %lld %g\n", (long long)lines[k].key, lines[k].self);
        for (size_t k = 0; k < na; k++)
            fprintf(f, " a %lld %g\n", (long long)addrs[k].key, addrs[k].self);
        free(lines);
        free(addrs);
    }
    struct walk wk = {f, p};
    assert_int_equal(cn_agg_for_each_sample(p, &q, walk_one, &wk), 0);
    for (size_t i = 0; i < cn_agg_sample_count(p); i++) { /* timeline stacks too */
        int32_t funcs[256];
        size_t n = cn_agg_stack_funcs(p, cn_agg_sample_timeline_stack(p, i), funcs, 256);
        fprintf(f, "tl %zu:", i);
        for (size_t k = 0; k < n && k < 256; k++)
            fprintf(f, " %s", cn_agg_func_name(p, funcs[k]));
        fputc('\n', f);
    }
    fclose(f);
    return text;
}

static void assert_same_answers(twins *t)
{
    char *a = answers(t->p[0]), *b = answers(t->p[1]);
    assert_true(strlen(a) > 1000);
    assert_string_equal(a, b);
    free(a);
    free(b);
}

/* The profile written as .canopy (a gzip stream) and read back. */
static cn_agg_profile *round_trip(const cn_agg_profile *p)
{
    char *gz = NULL;
    size_t gz_len = 0, cap = 1 << 16, n = 0;
    FILE *f = open_memstream(&gz, &gz_len);
    assert_non_null(f);
    assert_int_equal(cn_agg_write_canopy(p, f), 0);
    fclose(f);
    char *text = malloc(cap);
    assert_non_null(text);
    z_stream zs = {0};
    assert_int_equal(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
    zs.next_in = (Bytef *)gz;
    zs.avail_in = (uInt)gz_len;
    for (int rc = Z_OK; rc != Z_STREAM_END;) {
        if (n == cap) {
            cap *= 2;
            text = realloc(text, cap);
            assert_non_null(text);
        }
        zs.next_out = (Bytef *)text + n;
        zs.avail_out = (uInt)(cap - n);
        rc = inflate(&zs, Z_NO_FLUSH);
        assert_true(rc == Z_OK || rc == Z_STREAM_END);
        n = cap - zs.avail_out;
    }
    inflateEnd(&zs);
    free(gz);
    cn_agg_profile *q = NULL;
    cn_err err = {0};
    assert_int_equal(cn_agg_canopy_read(text, n, "compacted.canopy", &q, &err), 0);
    free(text);
    return q;
}

/* Feeds, symbolizes, folds and compacts p[1] at every step; the answers never differ. */
static void test_compact_same_answers(void **state)
{
    (void)state;
    twins t;
    rng_state = 0x9e3779b97f4a7c15ULL;
    twins_init(&t);
    feed(&t, 300);
    regroup(&t);
    extra_stacks(&t);
    cn_agg_compact_stats st;
    for (int round = 0; round < 6; round++) {
        feed(&t, 400);
        if (round % 2)
            regroup(&t);
        extra_stacks(&t);
        fold(&t, t.now - 250000000); /* a retention of 250 ms of sample time */
        size_t stacks = cn_agg_stack_count(t.p[1]);
        assert_int_equal(cn_agg_compact(t.p[1], 0, &st), 0);
        assert_int_equal(st.stacks_before, stacks);
        assert_true(st.stacks_after < st.stacks_before); /* the extra stacks went */
        assert_int_equal(st.stacks_after, cn_agg_stack_count(t.p[1]));
        assert_true(st.cached_after < st.cached_before); /* folded callchains left the cache */
        assert_true(st.bytes_after < st.bytes_before);
        assert_int_equal(cn_agg_frame_count(t.p[1]), cn_agg_frame_count(t.p[0]));
        assert_int_equal(cn_agg_func_count(t.p[1]), cn_agg_func_count(t.p[0]));
        assert_int_equal(cn_agg_thread_count(t.p[1]), cn_agg_thread_count(t.p[0]));
        assert_same_answers(&t);
        /* A second pass finds nothing more to remove. */
        assert_int_equal(cn_agg_compact(t.p[1], 0, &st), 0);
        assert_int_equal(st.stacks_after, st.stacks_before);
        assert_same_answers(&t);
    }
    /* Sampling ends: the cache goes entirely; more symbols still apply. */
    assert_int_equal(cn_agg_compact(t.p[1], CN_AGG_COMPACT_FINAL, &st), 0);
    assert_int_equal(st.cached_after, 0);
    regroup(&t);
    assert_same_answers(&t);
    /* Everything folded (the memory bound's fold), then compacted. */
    fold(&t, INT64_MAX);
    assert_int_equal(cn_agg_compact(t.p[1], 0, &st), 0);
    assert_same_answers(&t);
    /* A saved compacted session reads back with the same answers. */
    cn_agg_profile *back = round_trip(t.p[1]);
    char *a = answers(t.p[0]), *b = answers(back);
    assert_string_equal(a, b);
    free(a);
    free(b);
    cn_agg_profile_free(back);
    cn_agg_profile_free(t.p[0]);
    cn_agg_profile_free(t.p[1]);
}

/* Compaction between ingests: callchains seen before (cached or not) and new ones get the
 * same stacks as in the profile never compacted, whatever was folded and removed. */
static void test_compact_then_ingest(void **state)
{
    (void)state;
    twins t;
    rng_state = 12345;
    twins_init(&t);
    cn_agg_compact_stats st;
    for (int round = 0; round < 12; round++) {
        feed(&t, 200 + (int)rnd(200));
        if (round % 3 == 0)
            regroup(&t);
        if (round % 2)
            extra_stacks(&t);
        fold(&t, t.now - 100000000);
        assert_int_equal(cn_agg_compact(t.p[1], 0, &st), 0);
    }
    regroup(&t);
    assert_same_answers(&t);
    /* The same raw walk in both, sample for sample, after all of that. */
    assert_int_equal(cn_agg_sample_count(t.p[0]), cn_agg_sample_count(t.p[1]));
    cn_agg_profile_free(t.p[0]);
    cn_agg_profile_free(t.p[1]);
}

/* What a live session asks after each fold: due once the cache has doubled since the last
 * compaction, or when a fold left the sample columns mostly empty. */
static void test_compact_due(void **state)
{
    (void)state;
    twins t;
    rng_state = 777;
    twins_init(&t);
    assert_false(cn_agg_compact_due(t.p[0]));
    feed(&t, 100000);
    assert_true(cn_agg_compact_due(t.p[0])); /* > 16384 cached callchains, none compacted */
    assert_int_equal(cn_agg_compact(t.p[0], 0, NULL), 0);
    assert_false(cn_agg_compact_due(t.p[0]));
    fold(&t, t.now - 1000000000); /* keeps ~1 000 of 100 000 raw samples */
    assert_true(cn_agg_compact_due(t.p[0]));
    size_t before = cn_agg_profile_memory(t.p[0]);
    assert_int_equal(cn_agg_compact(t.p[0], 0, NULL), 0);
    assert_true(cn_agg_profile_memory(t.p[0]) < before - 100000 * 16 / 2);
    assert_false(cn_agg_compact_due(t.p[0]));
    cn_agg_profile_free(t.p[0]);
    cn_agg_profile_free(t.p[1]);
}

/* ---- trimming the folded rows (cn_agg_trim_folded) ------------------------------------ */

/* Every stack path's subtree weight, as sorted (path, weight) rows: a path is a string of
 * one letter per frame, root first ('A' + the address index; '#' the trim marker). */
typedef struct sub_row {
    char path[MAX_DEPTH + 3];
    double w;
} sub_row;

typedef struct subs {
    const cn_agg_profile *p;
    int32_t marker_res; /* -1: none */
    sub_row *rows;
    size_t n, cap;
    double total, by_thread[N_THREADS];
} subs;

static int sub_one(void *ctx, int32_t stack, int32_t thread, int64_t time_ns, double weight,
                   int64_t count)
{
    (void)time_ns, (void)count;
    subs *u = ctx;
    int32_t chain[MAX_DEPTH + 2];
    int n = 0;
    for (int32_t x = stack; x >= 0; x = cn_agg_stack_prefix(u->p, x)) {
        assert_true(n < MAX_DEPTH + 2);
        chain[n++] = x;
    }
    char path[MAX_DEPTH + 3];
    for (int k = n - 1, d = 0; k >= 0; k--, d++) {
        int32_t f = cn_agg_stack_frame(u->p, chain[k]);
        path[d] = cn_agg_frame_resource(u->p, f) == u->marker_res
                      ? '#'
                      : (char)('A' + (cn_agg_frame_address(u->p, f) - 0x1000) / 16);
        path[d + 1] = '\0';
        if (u->n == u->cap) {
            u->cap = u->cap ? 2 * u->cap : 4096;
            u->rows = realloc(u->rows, u->cap * sizeof(*u->rows));
            assert_non_null(u->rows);
        }
        u->rows[u->n] = (sub_row){.w = weight};
        memcpy(u->rows[u->n].path, path, (size_t)d + 2);
        u->n++;
    }
    u->total += weight;
    assert_true(thread >= 0 && thread < N_THREADS);
    u->by_thread[thread] += weight;
    return 0;
}

static int sub_cmp(const void *a, const void *b)
{
    return strcmp(((const sub_row *)a)->path, ((const sub_row *)b)->path);
}

static void subs_of(cn_agg_profile *p, int32_t marker_res, subs *u)
{
    memset(u, 0, sizeof(*u));
    u->p = p;
    u->marker_res = marker_res;
    cn_agg_query q;
    cn_agg_query_init(&q);
    assert_int_equal(cn_agg_for_each_sample(p, &q, sub_one, u), 0);
    qsort(u->rows, u->n, sizeof(*u->rows), sub_cmp);
    size_t k = 0;
    for (size_t i = 0; i < u->n; i++) {
        if (k && !strcmp(u->rows[k - 1].path, u->rows[i].path))
            u->rows[k - 1].w += u->rows[i].w;
        else
            u->rows[k++] = u->rows[i];
    }
    u->n = k;
}

static double sub_get(const subs *u, const char *path)
{
    sub_row key;
    snprintf(key.path, sizeof(key.path), "%s", path);
    const sub_row *r = bsearch(&key, u->rows, u->n, sizeof(*u->rows), sub_cmp);
    return r ? r->w : -1;
}

/* The "[trimmed]" marker frame as a live session makes it (live/ingest.c's pseudo_frames):
 * its resource in *res when res is not NULL. */
static int32_t trim_marker(cn_agg_profile *p, int32_t *res)
{
    int32_t mres = cn_agg_resource(p, "[trim]", "[canopy:trim]", NULL, CN_AGG_RES_OTHER);
    int32_t mark = cn_agg_native_frame(p, mres, 0);
    assert_true(mres >= 0 && mark >= 0);
    cn_agg_symbol sym = {"[trimmed]", NULL, 0};
    cn_agg_frame_symbols fs = {mark, &sym, 1, NULL};
    assert_int_equal(cn_agg_regroup(p, &fs, 1), 0);
    if (res)
        *res = mres;
    return mark;
}

/* Everything folded, then trimmed at 1 %: every path at or above the limit keeps its
 * subtree weight exactly, every thread its total; every other weight sits in a "[trimmed]"
 * child of the deepest kept path; compaction then removes the rows only the moved rows
 * reached. A second trim moves nothing; the profile's answers and a .canopy round trip
 * work with the marker. */
static void test_trim_folded(void **state)
{
    (void)state;
    twins t;
    rng_state = 4242;
    twins_init(&t);
    feed(&t, 20000);
    regroup(&t);
    fold(&t, INT64_MAX);
    cn_agg_profile *p = t.p[1];
    int32_t mres;
    int32_t mark = trim_marker(p, &mres);
    assert_int_equal(cn_agg_compact(p, 0, NULL), 0);
    size_t stacks_before = cn_agg_stack_count(p);

    cn_agg_trim_stats st;
    assert_int_equal(cn_agg_trim_folded(p, 0, mark, &st), 0); /* share 0: nothing */
    assert_int_equal(st.rows_after, st.rows_before);
    assert_int_equal(cn_agg_trim_folded(p, 0.01, -1, &st), -EINVAL);
    assert_int_equal(cn_agg_trim_folded(p, 0.01, mark, &st), 0);
    fprintf(stderr, "  trim at 1%%: rows %zu -> %zu (%zu moved, weight %g), limit %g\n",
            st.rows_before, st.rows_after, st.rows_moved, st.weight_moved, st.limit);
    assert_true(st.rows_moved > 0 && st.rows_after < st.rows_before / 2);
    assert_int_equal(st.rows_after, cn_agg_folded_rows(p));

    subs a, b;
    subs_of(t.p[0], -1, &a);
    subs_of(p, mres, &b);
    assert_true(a.total > 0);
    assert_true(fabs(a.total - b.total) < 1e-6);
    for (int i = 0; i < N_THREADS; i++)
        assert_true(fabs(a.by_thread[i] - b.by_thread[i]) < 1e-6);
    double limit = st.limit, moved = 0;
    size_t kept = 0;
    for (size_t i = 0; i < a.n; i++)
        if (a.rows[i].w >= limit) {
            assert_true(fabs(sub_get(&b, a.rows[i].path) - a.rows[i].w) < 1e-6);
            kept++;
        }
    for (size_t i = 0; i < b.n; i++) {
        const char *path = b.rows[i].path;
        size_t len = strlen(path);
        if (path[len - 1] != '#') {
            assert_true(sub_get(&a, path) >= limit); /* only kept paths, unchanged */
            continue;
        }
        char parent[sizeof(b.rows[i].path)];
        memcpy(parent, path, len - 1);
        parent[len - 1] = '\0';
        assert_true(len == 1 || sub_get(&a, parent) >= limit); /* under a kept path */
        assert_null(strchr(parent, '#'));                      /* one marker, a leaf */
        moved += b.rows[i].w;
    }
    assert_true(fabs(moved - st.weight_moved) < 1e-6);
    assert_true(fabs(moved - st.weight_under) < 1e-6); /* no marker before this trim */
    assert_true(kept > 10);

    cn_agg_compact_stats cs;
    assert_int_equal(cn_agg_compact(p, 0, &cs), 0);
    fprintf(stderr, "  stacks %zu -> %zu after compaction\n", stacks_before, cs.stacks_after);
    assert_true(cs.stacks_after < stacks_before / 2);
    assert_int_equal(cn_agg_trim_folded(p, 0.01, mark, &st), 0);
    assert_int_equal(st.rows_moved, 0); /* what is left is at or above the limit */

    char *text = answers(p);
    cn_agg_profile *back = round_trip(p);
    char *again = answers(back);
    assert_non_null(strstr(text, "[trimmed]"));
    assert_string_equal(text, again);
    free(text);
    free(again);
    cn_agg_profile_free(back);
    free(a.rows);
    free(b.rows);
    cn_agg_profile_free(t.p[0]);
    cn_agg_profile_free(t.p[1]);
}

/* The roots of the folded tree grouped by process: "NAME WEIGHT" lines, in tree order. */
static char *process_roots(cn_agg_profile *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    cn_agg_query q;
    cn_agg_query_init(&q);
    q.group_by = CN_AGG_GROUP_PROCESS;
    cn_agg_tree *tr = NULL;
    cn_err err = {0};
    assert_int_equal(cn_agg_query_run(p, &q, &tr, &err), 0);
    for (int32_t n = tr->first_root; n >= 0; n = tr->nodes[n].next_sibling)
        fprintf(f, "%s %g\n", cn_agg_func_name(p, tr->nodes[n].func), tr->nodes[n].total);
    cn_agg_tree_free(tr);
    fclose(f);
    return text;
}

/* cn_agg_fold_threads: the folded rows of exited threads with no raw sample left go to one
 * thread per (process name, cgroup), rows meeting on a stack merge, totals by stack and by
 * name stay, a thread with raw samples keeps its own rows, a later fold reuses the folded
 * thread, and the result survives a .canopy round trip. */
static void test_fold_threads(void **state)
{
    (void)state;
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    int32_t res = cn_agg_resource(p, "cc1", "cc1-id", NULL, CN_AGG_RES_LIBRARY);
    int32_t s1 = cn_agg_stack(p, -1, cn_agg_native_frame(p, res, 0x10));
    int32_t s2 = cn_agg_stack(p, s1, cn_agg_native_frame(p, res, 0x20));
    assert_true(res >= 0 && s1 >= 0 && s2 >= 0);
    /* pids 100, 101 (cc1 in cgroup A), 102 (cc1 in B), 103 (make), 104 (cc1 in A, still
     * sampled), 105 (cc1 in A, exits later) */
    static const struct {
        int pid;
        const char *name, *cgroup;
    } procs[] = {{100, "cc1", "/a"},  {101, "cc1", "/a"}, {102, "cc1", "/b"},
                 {103, "make", "/a"}, {104, "cc1", "/a"}, {105, "cc1", "/a"}};
    int32_t th[6];
    for (int i = 0; i < 6; i++) {
        th[i] = cn_agg_thread(p, procs[i].pid, procs[i].pid, procs[i].name);
        assert_int_equal(th[i], i);
        assert_int_equal(cn_agg_process_set_name(p, procs[i].pid, procs[i].name), 0);
        assert_int_equal(cn_agg_process_set_cgroup(p, procs[i].pid, procs[i].cgroup), 0);
    }
    for (int i = 0; i < 6; i++)
        for (int k = 0; k <= i; k++)
            assert_int_equal(cn_agg_add_sample(p, k % 2 ? s2 : s1, 10 * i + k, 1, th[i]), 0);
    cn_agg_fold_before(p, 1000);
    assert_int_equal(cn_agg_add_sample(p, s1, 2000, 1, th[4]), 0); /* 104 is raw */
    size_t rows = cn_agg_folded_rows(p);
    assert_int_equal(rows, 11); /* 1 + 2 + 2 + 2 + 2 + 2 (stacks per thread) */

    bool gone[6] = {true, true, true, true, true, false};
    size_t folded = 99;
    assert_int_equal(cn_agg_fold_threads(p, gone, 6, &folded), 0);
    /* 100+101 -> cc1 /a (2 rows), 102 -> cc1 /b (2), 103 -> make /a (2), 104, 105 own */
    assert_int_equal(folded, 1);
    assert_int_equal(cn_agg_folded_rows(p), 10);
    char *roots = process_roots(p);
    fprintf(stderr, "%s", roots);
    /* cc1 [exited] holds 100, 101 and 102 (two groups, one label: 1 + 2 + 3 samples) */
    assert_non_null(strstr(roots, "cc1 [exited] 6\n"));
    assert_non_null(strstr(roots, "make [exited] 4\n"));
    assert_non_null(strstr(roots, "cc1 [104] 6\n")); /* 5 folded + 1 raw, its own */
    assert_non_null(strstr(roots, "cc1 [105] 6\n"));
    assert_null(strstr(roots, "[100]"));
    size_t n_thr = cn_agg_thread_count(p);
    assert_int_equal(n_thr, 6 + 3);
    for (size_t t = 6; t < n_thr; t++)
        assert_true(cn_agg_thread_pid(p, (int32_t)t) >= CN_AGG_GONE_PID_BASE);

    /* 105 exits too: into the same cc1 /a thread, no new one */
    bool gone2[9] = {true, true, true, true, true, true, false, false, false};
    assert_int_equal(cn_agg_fold_threads(p, gone2, 9, &folded), 0);
    assert_int_equal(folded, 2);
    assert_int_equal(cn_agg_thread_count(p), n_thr);
    free(roots);
    roots = process_roots(p);
    assert_non_null(strstr(roots, "cc1 [exited] 12\n"));
    cn_agg_query q;
    cn_agg_query_init(&q);
    q.pid = cn_agg_thread_pid(p, 6); /* --only-pid of the folded cc1 /a thread */
    cn_agg_tree *tr = NULL;
    cn_err err = {0};
    assert_int_equal(cn_agg_query_run(p, &q, &tr, &err), 0);
    assert_true(fabs(tr->total - 9) < 1e-9); /* 100, 101, 105: 1 + 2 + 6 */
    cn_agg_tree_free(tr);

    cn_agg_profile *back = round_trip(p);
    char *again = process_roots(back);
    assert_string_equal(roots, again);
    free(again);
    free(roots);
    cn_agg_profile_free(back);
    cn_agg_profile_free(p);
}

/* One sample on a rare path in both twins: main's two roots, then a frame of its own
 * (app+0x9000 + 16 i), then a libc leaf. */
static void feed_rare(twins *t, int i)
{
    cn_agg_frame_ref refs[4] = {{t->res[1], 0x1000 + 16 * (uint64_t)(i % 7)},
                                {t->res[0], 0x9000 + 16 * (uint64_t)i},
                                {t->res[1], 0x1010},
                                {t->res[0], 0x1000}};
    t->now += 1000000;
    cn_agg_sample_refs b = {refs, 4, t->now, 1.0, t->thr[i % N_THREADS]};
    for (int k = 0; k < 2; k++)
        assert_int_equal(cn_agg_add_samples_refs(t->p[k], &b, 1), 0);
}

/* cn_agg_compact_frames after a trim: the frames only trimmed paths used (300 rare ones,
 * symbolized), their funcs and rename rows go; every answer stays byte for byte what the
 * twin that kept them gives, also after a .canopy round trip and after more samples; the
 * map says where each kept frame went. */
static void test_compact_frames(void **state)
{
    (void)state;
    twins t;
    rng_state = 777;
    twins_init(&t);
    feed(&t, 8000);
    regroup(&t);
    size_t before_rare = cn_agg_frame_count(t.p[0]);
    for (int i = 0; i < 300; i++)
        feed_rare(&t, i); /* new frames: named below, each by a name of its own */
    cn_agg_symbol rare[300];
    cn_agg_frame_symbols fs[300];
    char names[300][16];
    size_t nf = 0;
    for (size_t f = before_rare; f < cn_agg_frame_count(t.p[0]); f++) {
        if (cn_agg_frame_address(t.p[0], (int32_t)f) < 0x9000)
            continue;
        snprintf(names[nf], sizeof(names[nf]), "rare%zu", nf);
        rare[nf] = (cn_agg_symbol){names[nf], "rare.c", 1};
        fs[nf] = (cn_agg_frame_symbols){(int32_t)f, &rare[nf], 1, NULL};
        nf++;
    }
    assert_int_equal(nf, 300);
    int32_t mark[2];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(cn_agg_regroup(t.p[k], fs, nf), 0);
        mark[k] = trim_marker(t.p[k], NULL);
        assert_true(cn_agg_fold_before(t.p[k], INT64_MAX) >= 0);
        assert_int_equal(cn_agg_trim_folded(t.p[k], 0.01, mark[k], NULL), 0);
        assert_int_equal(cn_agg_compact(t.p[k], 0, NULL), 0);
    }
    char *text = answers(t.p[0]);
    assert_null(strstr(text, "rare1 ")); /* the rare paths were trimmed */
    size_t n_before = cn_agg_frame_count(t.p[1]);
    int64_t *addr = malloc(n_before * sizeof(*addr));
    assert_non_null(addr);
    for (size_t f = 0; f < n_before; f++)
        addr[f] = cn_agg_frame_address(t.p[1], (int32_t)f);

    int32_t *map = NULL;
    cn_agg_compact_stats st;
    assert_int_equal(cn_agg_compact_frames(t.p[1], &map, &st), 0);
    fprintf(stderr,
            "  frames %zu -> %zu, funcs %zu -> %zu, renames %zu -> %zu, strings -%zu, bytes %zu "
            "-> %zu\n",
            st.frames_before, st.frames_after, st.funcs_before, st.funcs_after,
            cn_agg_rename_count(t.p[0]), cn_agg_rename_count(t.p[1]), st.strings_removed,
            st.bytes_before, st.bytes_after);
    assert_true(st.strings_removed >= 600); /* the rare frames' names and placeholders */
    assert_non_null(map);
    assert_true(st.frames_after + 300 <= st.frames_before);
    assert_true(st.funcs_after + 300 <= st.funcs_before); /* rare names and placeholders */
    assert_true(cn_agg_rename_count(t.p[1]) + 300 <= cn_agg_rename_count(t.p[0]));
    assert_true(st.bytes_after < st.bytes_before);
    size_t kept = 0, rare_gone = 0;
    for (size_t f = 0; f < n_before; f++) {
        if (map[f] < 0) {
            rare_gone += addr[f] >= 0x9000;
            continue;
        }
        assert_int_equal(map[f], kept++); /* in order */
        assert_int_equal(cn_agg_frame_address(t.p[1], map[f]), addr[f]);
    }
    assert_int_equal(kept, st.frames_after);
    assert_int_equal(rare_gone, 300);
    assert_true(map[mark[1]] >= 0); /* a pseudo-frame stays */
    char *again = answers(t.p[1]);
    assert_string_equal(text, again);
    free(again);
    cn_agg_profile *back = round_trip(t.p[1]);
    again = answers(back);
    assert_string_equal(text, again);
    free(again);
    cn_agg_profile_free(back);
    assert_int_equal(cn_agg_compact_frames(t.p[1], NULL, &st), 0); /* nothing left to do */
    assert_int_equal(st.frames_after, st.frames_before);

    feed(&t, 3000); /* interning goes on over the renumbered frames */
    for (int i = 0; i < 50; i++)
        feed_rare(&t, 1000 + i); /* new placeholder frames in both */
    free(text);
    text = answers(t.p[0]);
    again = answers(t.p[1]);
    assert_string_equal(text, again);
    free(text);
    free(again);
    free(addr);
    free(map);
    cn_agg_profile_free(t.p[0]);
    cn_agg_profile_free(t.p[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compact_same_answers), cmocka_unit_test(test_compact_then_ingest),
        cmocka_unit_test(test_compact_due),          cmocka_unit_test(test_trim_folded),
        cmocka_unit_test(test_fold_threads),         cmocka_unit_test(test_compact_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
