/* test_formats.c — properties every writer or importer of formats/ shares:
 * - every JSON format is valid JSON whatever bytes a name holds (invalid UTF-8, control
 *   characters, quotes), and prints one number the same way (json_out.c);
 * - the Firefox Profiler's format holds together (tables, indexes, prefixes, strings,
 *   categories, inline frames) on a small model with every kind of frame;
 * - the .cpuprofile importer stays linear on hostile trees (long chains, wide stars,
 *   unreachable nodes);
 * - speedscope with --group-by on a profile never grouped before (the query grows the
 *   func table under the writer);
 * - differential trees 100000 levels deep are computed and written without recursion;
 * - every text writer shows names under the terminal rule, and SVG stays valid XML text;
 * - a Python function stays one through every format that can say so (docs/python.md):
 *   JSON's "kind", pprof's `py::NAME:FILE` system name, folded's `NAME (FILE)`, written
 *   and read back, and what other producers write that looks alike but is not.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <zlib.h>

#include "cn_agg.h"
#include "cn_fmt.h"

/* A name with an invalid byte, a truncated sequence, an overlong NUL, a surrogate, a
 * control character, a quote and a backslash. */
#define BAD_NAME                                                                                   \
    "bad\xff"                                                                                      \
    "na\xc3"                                                                                       \
    "me\xc0\x80"                                                                                   \
    "\xed\xa0\x80"                                                                                 \
    "\x01\"\\"

/* Two stacks main;BAD (weight 1/3) and main;big (weight 2^53 - 1 - 2: integral, above
 * 9e15), on one thread, one sample each, unit samples. */
static cn_agg_profile *make_profile(void)
{
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    int32_t lib = cn_agg_resource(p, "lib\xfe.so", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t fm = cn_agg_func(p, "main", -1, NULL, 0);
    int32_t fb = cn_agg_func(p, BAD_NAME, lib, "file\xff.c", 3);
    int32_t fg = cn_agg_func(p, "big", -1, NULL, 0);
    int32_t th = cn_agg_thread(p, 10, 11, "thr\xff");
    assert_true(lib >= 0 && fm >= 0 && fb >= 0 && fg >= 0 && th >= 0);
    int32_t m = cn_agg_stack(p, -1, cn_agg_frame(p, fm, -1, -1, 0));
    int32_t b = cn_agg_stack(p, m, cn_agg_frame(p, fb, lib, 0x10, 7));
    int32_t g = cn_agg_stack(p, m, cn_agg_frame(p, fg, -1, -1, 0));
    assert_true(m >= 0 && b >= 0 && g >= 0);
    assert_int_equal(cn_agg_add_sample(p, b, 1000, 1.0 / 3.0, th), 0);
    assert_int_equal(cn_agg_add_sample(p, g, 2500, 9007199254740989.0, th), 0);
    return p;
}

typedef struct capture {
    char *buf;
    size_t len;
    FILE *f;
} capture;

static FILE *cap_open(capture *c)
{
    memset(c, 0, sizeof(*c));
    c->f = open_memstream(&c->buf, &c->len);
    assert_non_null(c->f);
    return c->f;
}

/* Closes the capture, checks the bytes parse as JSON; returns the text (caller frees). */
static char *cap_json(capture *c, const char *what)
{
    assert_int_equal(fclose(c->f), 0);
    json_error_t e;
    json_t *doc = json_loadb(c->buf, c->len, 0, &e);
    if (!doc)
        fail_msg("%s: invalid JSON: %s at %d", what, e.text, e.position);
    json_decref(doc);
    return c->buf;
}

/* Every JSON format is valid and shows the bad name with U+FFFD. */
static void test_json_formats_bad_utf8(void **state)
{
    (void)state;
    cn_agg_profile *p = make_profile();
    cn_agg_query q;
    cn_agg_query_init(&q);
    cn_err err;
    capture c;
    char *s;

    cn_agg_tree *t = NULL;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    assert_int_equal(cn_fmt_write_json(p, t, NULL, cap_open(&c)), 0);
    s = cap_json(&c, "tree JSON");
    assert_non_null(strstr(s, "bad\xef\xbf\xbdna"));
    free(s);
    cn_agg_tree_free(t);

    assert_int_equal(cn_fmt_write_speedscope(p, &q, cap_open(&c), &err), 0);
    s = cap_json(&c, "speedscope");
    assert_non_null(strstr(s, "bad\xef\xbf\xbdna"));
    free(s);

    cn_agg_transform tf;
    assert_int_equal(cn_agg_transform_parse("merge:main", &tf, &err), 0);
    cn_agg_query qt = q;
    qt.transforms = &tf;
    qt.n_transforms = 1;
    assert_int_equal(cn_fmt_write_speedscope(p, &qt, cap_open(&c), &err), 0);
    free(cap_json(&c, "speedscope (transformed)"));
    assert_int_equal(cn_fmt_write_firefox(p, &q, cap_open(&c), &err), 0);
    s = cap_json(&c, "firefox");
    assert_non_null(strstr(s, "bad\xef\xbf\xbdna"));
    assert_non_null(strstr(s, "\"thr\xef\xbf\xbd\""));
    free(s);
    assert_int_equal(cn_fmt_write_firefox(p, &qt, cap_open(&c), &err), 0);
    free(cap_json(&c, "firefox (transformed)"));
    cn_agg_transform_clear(&tf);

    cn_agg_call *calls = NULL;
    size_t n = 0;
    assert_int_equal(cn_agg_timeline(p, &q, &calls, &n, &err), 0);
    assert_true(n > 0);
    assert_int_equal(cn_fmt_write_timeline_json(p, calls, n, cap_open(&c)), 0);
    free(cap_json(&c, "timeline JSON"));
    assert_int_equal(cn_fmt_write_chrome_trace(p, calls, n, cap_open(&c)), 0);
    s = cap_json(&c, "chrome trace");
    assert_non_null(strstr(s, "thr\xef\xbf\xbd"));
    free(s);
    assert_int_equal(cn_fmt_write_timeline_speedscope(p, calls, n, cap_open(&c), &err), 0);
    free(cap_json(&c, "timeline speedscope"));
    free(calls);

    cn_agg_profile *d = NULL;
    cn_agg_query qbase = q; /* BASE without the sample of BAD: it shows as a change */
    qbase.from_ns = 2000;
    assert_int_equal(cn_agg_diff_profile(p, &qbase, p, &q, &d, &err), 0);
    cn_agg_diff *r = NULL;
    assert_int_equal(cn_agg_diff_run(d, &q, true, &r, &err), 0);
    assert_int_equal(cn_fmt_write_diff_json(d, r, NULL, cap_open(&c)), 0);
    s = cap_json(&c, "diff JSON");
    assert_non_null(strstr(s, "bad\xef\xbf\xbdna"));
    free(s);
    cn_agg_diff_free(r);
    cn_agg_profile_free(d);
    cn_agg_profile_free(p);
}

/* Text for a terminal (docs/cli.md "Names in text output"): valid UTF-8, no control
 * character but newline, no C1. */
static void assert_terminal_clean(const char *s, size_t n, const char *what)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = cn_utf8_seq(s + i, n - i);
        if (len == 0 || (c < 0x20 && c != '\n') || c == 0x7f ||
            (c == 0xc2 && (unsigned char)s[i + 1] < 0xa0))
            fail_msg("%s: byte 0x%02x at %zu is not shown escaped", what, c, i);
        i += len;
    }
}

/* Every text writer escapes names (ESC, C1, invalid UTF-8); SVG is valid UTF-8 (XML). */
static void test_text_formats_terminal(void **state)
{
    (void)state;
    cn_agg_profile *p = make_profile();
    int32_t lib = cn_agg_resource(p, "lib\x1b]0;x\a.so", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t fe = cn_agg_func(p, "evil\x1b[2J\xc2\x9bname\r\nfake", lib, NULL, 0);
    int32_t fm = cn_agg_func(p, "main", -1, NULL, 0);
    int32_t th = cn_agg_thread(p, 10, 11, "thr\xff");
    int32_t m = cn_agg_stack(p, -1, cn_agg_frame(p, fm, -1, -1, 0));
    int32_t e = cn_agg_stack(p, m, cn_agg_frame(p, fe, lib, 0x20, 0));
    assert_true(e >= 0 && th >= 0);
    assert_int_equal(cn_agg_add_sample(p, e, 1500, 1, th), 0); /* before BASE: a change */
    cn_agg_query q;
    cn_agg_query_init(&q);
    cn_err err;
    capture c;

    cn_agg_tree *t = NULL;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    cn_fmt_write_opts o;
    cn_fmt_write_opts_init(&o);
    o.title = "title\x1b[2J";
    assert_int_equal(cn_fmt_write_text(p, t, &o, cap_open(&c)), 0);
    fclose(c.f);
    assert_terminal_clean(c.buf, c.len, "text tree");
    assert_non_null(strstr(c.buf, "evil\\x1b[2J\\u009bname\\x0d\\x0afake"));
    assert_non_null(strstr(c.buf, "bad\xef\xbf\xbdna"));
    assert_non_null(strstr(c.buf, "title\\x1b[2J"));
    free(c.buf);
    cn_agg_tree_free(t);

    cn_agg_call *calls = NULL;
    size_t n = 0;
    assert_int_equal(cn_agg_timeline(p, &q, &calls, &n, &err), 0);
    assert_int_equal(cn_fmt_write_timeline_text(p, calls, n, cap_open(&c)), 0);
    fclose(c.f);
    assert_terminal_clean(c.buf, c.len, "timeline text");
    assert_non_null(strstr(c.buf, "[lib\\x1b]0;x\\x07.so]"));
    free(c.buf);
    free(calls);

    cn_agg_profile *d = NULL;
    cn_agg_query qbase = q;
    qbase.from_ns = 2000;
    assert_int_equal(cn_agg_diff_profile(p, &qbase, p, &q, &d, &err), 0);
    cn_agg_diff *r = NULL;
    assert_int_equal(cn_agg_diff_run(d, &q, true, &r, &err), 0);
    assert_int_equal(cn_fmt_write_diff_text(d, r, &o, cap_open(&c)), 0);
    fclose(c.f);
    assert_terminal_clean(c.buf, c.len, "diff text");
    assert_non_null(strstr(c.buf, "evil\\x1b[2J"));
    free(c.buf);
    cn_agg_diff_free(r);
    cn_agg_profile_free(d);

    /* SVG: XML 1.0 allows neither invalid UTF-8 nor these controls. */
    assert_int_equal(cn_fmt_write_svg(p, &q, NULL, cap_open(&c), &err), 0);
    fclose(c.f);
    for (size_t i = 0; i < c.len;) {
        size_t len = cn_utf8_seq(c.buf + i, c.len - i);
        unsigned char ch = (unsigned char)c.buf[i];
        if (len == 0 || (ch < 0x20 && ch != '\n' && ch != '\t' && ch != '\r'))
            fail_msg("svg: byte 0x%02x at %zu is not an XML character", ch, i);
        i += len;
    }
    free(c.buf);
    cn_agg_profile_free(p);
}

/* 1/3 and an integral value above 9e15 print the same in every JSON format that shows
 * weights: 12 significant digits, and an integer. */
static void test_json_numbers_agree(void **state)
{
    (void)state;
    cn_agg_profile *p = make_profile();
    cn_agg_query q;
    cn_agg_query_init(&q);
    cn_err err;
    capture c;
    char *s[3];

    cn_agg_tree *t = NULL;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    assert_int_equal(cn_fmt_write_json(p, t, NULL, cap_open(&c)), 0);
    s[0] = cap_json(&c, "tree JSON");
    cn_agg_tree_free(t);
    assert_int_equal(cn_fmt_write_speedscope(p, &q, cap_open(&c), &err), 0);
    s[1] = cap_json(&c, "speedscope");
    cn_agg_profile *d = NULL;
    cn_agg_diff *r = NULL;
    cn_agg_query qbase = q; /* BASE: only 1/3 (main's base), so big's change is all NEW */
    qbase.to_ns = 2000;
    assert_int_equal(cn_agg_diff_profile(p, &qbase, p, &q, &d, &err), 0);
    assert_int_equal(cn_agg_diff_run(d, &q, false, &r, &err), 0);
    assert_int_equal(cn_fmt_write_diff_json(d, r, NULL, cap_open(&c)), 0);
    s[2] = cap_json(&c, "diff JSON");
    for (int i = 0; i < 3; i++) {
        assert_non_null(strstr(s[i], "0.333333333333"));
        assert_null(strstr(s[i], "0.3333333333333"));
        assert_non_null(strstr(s[i], "9007199254740989"));
        free(s[i]);
    }
    cn_agg_diff_free(r);
    cn_agg_profile_free(d);
    cn_agg_profile_free(p);
}

/* ---- .cpuprofile on hostile trees -------------------------------------------------- */

#define HOSTILE_NODES 200000

/* A .cpuprofile of HOSTILE_NODES nodes: the root, then shape "star" (every node a child
 * of the root), "chain" (each node the child of the one before) or "star+loop" (the
 * star, then one node that lists itself as its child: unreachable from the root). One
 * sample on the last node. Returns the malloc'ed text and its length. */
static char *hostile_cpuprofile(const char *shape, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    assert_non_null(f);
    bool star = strncmp(shape, "star", 4) == 0, loop = strcmp(shape, "star+loop") == 0;
    int n = HOSTILE_NODES;
    fputs("{\"nodes\":[{\"id\":1,\"callFrame\":{\"functionName\":\"(root)\"}", f);
    if (star) {
        fputs(",\"children\":[", f);
        for (int id = 2; id <= n - (loop ? 1 : 0); id++)
            fprintf(f, "%s%d", id > 2 ? "," : "", id);
        fputs("]", f);
    } else {
        fputs(",\"children\":[2]", f);
    }
    fputs("}", f);
    for (int id = 2; id <= n; id++) {
        fprintf(f, ",{\"id\":%d,\"callFrame\":{\"functionName\":\"f%d\"}", id, id);
        if (loop && id == n)
            fprintf(f, ",\"children\":[%d]", id);
        else if (!star && id < n)
            fprintf(f, ",\"children\":[%d]", id + 1);
        fputs("}", f);
    }
    fprintf(f, "],\"startTime\":0,\"endTime\":1000,\"samples\":[%d],\"timeDeltas\":[1]}", n);
    assert_int_equal(fclose(f), 0);
    return buf;
}

/* The checks of the tree are linear: a 200k-node star or chain imports, and a node the
 * root cannot reach after 200k reachable ones is found without a quadratic search. */
static void test_cpuprofile_hostile_trees(void **state)
{
    (void)state;
    static const char *const shapes[] = {"star", "chain", "star+loop"};
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        size_t len;
        char *text = hostile_cpuprofile(shapes[k], &len);
        cn_agg_profile *p = NULL;
        cn_err err = {0};
        int rc = cn_fmt_import_buffer(text, len, "hostile.cpuprofile", &p, &err);
        if (strcmp(shapes[k], "star+loop") == 0) {
            assert_int_equal(rc, -EINVAL);
            assert_non_null(strstr(err.msg, "node 200000 is not reachable"));
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(cn_agg_sample_count(p), 1);
            /* the chain's one sample sits 199999 frames deep */
            assert_int_equal(cn_agg_stack_count(p), HOSTILE_NODES - 1);
        }
        cn_agg_profile_free(p);
        free(text);
    }
}

/* speedscope with --group-by on a freshly imported profile: the query interns one group
 * func per thread while the writer runs, past the funcs the profile had when the writer
 * started (its frame map must grow: ASan caught the overflow). Every thread gets a
 * frame named after it, and every frame index a sample uses names a frame. */
#define GROUP_THREADS 12
static void test_speedscope_group_by_fresh(void **state)
{
    (void)state;
    char text[8192];
    size_t len = 0;
    for (int t = 0; t < GROUP_THREADS; t++)
        len += (size_t)snprintf(text + len, sizeof(text) - len,
                                "app 100/%d 10.%06d: 1000 cpu-clock: \n"
                                "\t10 leaf+0x1 (/bin/app)\n\t20 main+0x1 (/bin/app)\n\n",
                                200 + t, t);
    const cn_agg_group_by groups[] = {CN_AGG_GROUP_THREAD, CN_AGG_GROUP_PROCESS};
    for (size_t g = 0; g < 2; g++) {
        for (int via_render = 0; via_render < 2; via_render++) {
            cn_agg_profile *p = NULL;
            cn_err err = {0};
            capture c;
            assert_int_equal(cn_fmt_import_buffer(text, len, "t.perf", &p, &err), 0);
            size_t funcs_before = cn_agg_func_count(p);
            if (via_render) {
                cn_fmt_spec spec;
                cn_fmt_spec_init(&spec);
                spec.format = CN_FMT_SPEEDSCOPE;
                spec.query.group_by = groups[g];
                assert_int_equal(cn_fmt_render(p, &spec, NULL, cap_open(&c), &err), 0);
                cn_fmt_spec_clear(&spec);
            } else {
                cn_agg_query q;
                cn_agg_query_init(&q);
                q.group_by = groups[g];
                assert_int_equal(cn_fmt_write_speedscope(p, &q, cap_open(&c), &err), 0);
            }
            assert_true(cn_agg_func_count(p) > funcs_before); /* the query interned groups */
            char *out = cap_json(&c, "speedscope --group-by");
            json_error_t je;
            json_t *doc = json_loads(out, 0, &je);
            json_t *frames = json_object_get(json_object_get(doc, "shared"), "frames");
            size_t n_frames = json_array_size(frames), n_groups = 0;
            for (size_t k = 0; k < n_frames; k++) {
                const char *name =
                    json_string_value(json_object_get(json_array_get(frames, k), "name"));
                assert_non_null(name);
                n_groups += strstr(name, "[") != NULL;
            }
            assert_int_equal(n_groups, groups[g] == CN_AGG_GROUP_THREAD ? GROUP_THREADS : 1);
            json_t *profiles = json_object_get(doc, "profiles"), *prof, *st, *fi;
            size_t k, m, x;
            json_array_foreach(profiles, k, prof)
            {
                json_array_foreach(json_object_get(prof, "samples"), m, st)
                {
                    json_array_foreach(st, x, fi)
                    {
                        assert_true(json_integer_value(fi) < (json_int_t)n_frames);
                    }
                }
            }
            json_decref(doc);
            free(out);
            cn_agg_profile_free(p);
        }
    }
}

/* A differential tree 100000 levels deep (a deep recursion on both sides, one level
 * deeper in NEW): computing it (aggregate/diff.c) and writing it as JSON, three-column
 * folded and text (export_diff.c) walk it without recursion. */
#define DIFF_DEPTH 100000
static cn_agg_profile *deep_profile(size_t depth)
{
    cn_agg_profile *p = cn_agg_profile_new();
    int32_t *frames = malloc(depth * sizeof(*frames));
    assert_true(p && frames);
    int32_t fr[2] = {cn_agg_frame(p, cn_agg_func(p, "even", -1, NULL, 0), -1, 0x10, 0),
                     cn_agg_frame(p, cn_agg_func(p, "odd", -1, NULL, 0), -1, 0x20, 0)};
    for (size_t i = 0; i < depth; i++)
        frames[i] = fr[i & 1];
    int32_t st = cn_agg_stack_from_frames(p, frames, depth);
    int32_t th = cn_agg_thread(p, 1, 1, "t");
    assert_true(st >= 0 && th >= 0);
    assert_int_equal(cn_agg_add_sample(p, st, 1000, 1, th), 0);
    free(frames);
    return p;
}

static void *diff_deep(void *arg)
{
    (void)arg;
    cn_agg_profile *base = deep_profile(DIFF_DEPTH - 1), *newp = deep_profile(DIFF_DEPTH);
    cn_agg_profile *d = NULL;
    cn_agg_diff *r = NULL;
    cn_agg_query q;
    cn_err err = {0};
    capture c;
    cn_agg_query_init(&q);
    assert_int_equal(cn_agg_diff_profile(base, &q, newp, &q, &d, &err), 0);
    assert_int_equal(cn_agg_diff_run(d, &q, true, &r, &err), 0);
    assert_int_equal(r->tree->n_nodes, DIFF_DEPTH);

    /* JSON: one object per level (jansson's parser stops at 2048 levels: count them). */
    assert_int_equal(cn_fmt_write_diff_json(d, r, NULL, cap_open(&c)), 0);
    assert_int_equal(fclose(c.f), 0);
    size_t objects = 0, open = 0, close = 0;
    for (size_t i = 0; i < c.len; i++) {
        open += c.buf[i] == '[';
        close += c.buf[i] == ']';
        objects += !strncmp(c.buf + i, "{\"name\":", 8);
    }
    assert_int_equal(objects, DIFF_DEPTH);
    assert_int_equal(open, close);
    free(c.buf);

    /* Folded: the two leaves' stacks, BASE's one level shorter. */
    assert_int_equal(cn_fmt_write_diff_folded(d, &q, cap_open(&c), &err), 0);
    assert_int_equal(fclose(c.f), 0);
    size_t lines = 0, semis = 0;
    for (size_t i = 0; i < c.len; i++) {
        lines += c.buf[i] == '\n';
        semis += c.buf[i] == ';';
    }
    assert_int_equal(lines, 2);
    assert_int_equal(semis, (DIFF_DEPTH - 2) + (DIFF_DEPTH - 1));
    assert_non_null(strstr(c.buf, "odd 0 1\n"));
    free(c.buf);

    /* Text indents by depth (quadratic at this depth): --depth cuts it, after a walk down
     * and back up the whole chain. */
    cn_fmt_write_opts o;
    cn_fmt_write_opts_init(&o);
    o.max_depth = 50;
    assert_int_equal(cn_fmt_write_diff_text(d, r, &o, cap_open(&c)), 0);
    assert_int_equal(fclose(c.f), 0);
    lines = 0;
    for (size_t i = 0; i < c.len; i++)
        lines += c.buf[i] == '\n';
    assert_int_equal(lines, 2 + 50); /* two header lines */
    free(c.buf);

    cn_agg_diff_free(r);
    cn_agg_profile_free(d);
    cn_agg_profile_free(base);
    cn_agg_profile_free(newp);
    return NULL;
}

/* On a thread with a 1 MiB stack: 10 bytes per level, so any recursion over the depth
 * overflows it (the default 8 MiB hides a small recursive frame at this depth). */
static void test_diff_deep(void **state)
{
    (void)state;
    pthread_attr_t attr;
    pthread_t t;
    assert_int_equal(pthread_attr_init(&attr), 0);
    assert_int_equal(pthread_attr_setstacksize(&attr, 1 << 20), 0);
    assert_int_equal(pthread_create(&t, &attr, diff_deep, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    pthread_attr_destroy(&attr);
}

/* The truncation summary of live tree headers and top (docs/cli-live.md, "Truncated
 * stacks"): nothing when all completed, causes in a fixed order, tiny shares not "0.0%". */
static void test_unwind_summary(void **state)
{
    (void)state;
    char buf[160];
    cn_fmt_unwind u = {.known = true, .user_stacks = 1000, .outcomes.complete = 1000};
    assert_false(cn_fmt_unwind_summary(&u, buf, sizeof(buf)));
    assert_string_equal(buf, "");
    u.outcomes.complete = 877;
    u.outcomes.truncated_stack = 91;
    u.outcomes.no_cfi = 20;
    u.outcomes.read_fault = 12;
    assert_true(cn_fmt_unwind_summary(&u, buf, sizeof(buf)));
    assert_string_equal(
        buf, "12.3% of stacks truncated (stack copy 9.1%, no CFI 2.0%, read fault 1.2%)");
    u = (cn_fmt_unwind){
        .known = true, .user_stacks = 10000, .outcomes.complete = 9999, .outcomes.other = 1};
    assert_true(cn_fmt_unwind_summary(&u, buf, sizeof(buf)));
    assert_string_equal(buf, "<0.1% of stacks truncated (other <0.1%)");
    /* Clipped, still NUL-terminated. */
    assert_true(cn_fmt_unwind_summary(&u, buf, 8));
    assert_string_equal(buf, "<0.1% o");
    /* Not known (files) or no user stacks: nothing. */
    u.known = false;
    assert_false(cn_fmt_unwind_summary(&u, buf, sizeof(buf)));
    u = (cn_fmt_unwind){.known = true};
    assert_false(cn_fmt_unwind_summary(&u, buf, sizeof(buf)));
}

/* ---- Python functions through the formats (frame_kind.c) --------------------------- */

/* <module> → Runner.work → deflate (libz), twice, and <module> → the unknown file's
 * function, once: the Python functions of /src/wl.py (first lines 1 and 4, sampled at
 * lines 9 and 6) and of no known file, as a live session names them. */
static cn_agg_profile *python_profile(void)
{
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    int32_t py = cn_agg_python_resource(p, "/src/wl.py"), unk = cn_agg_python_resource(p, "");
    int32_t lib = cn_agg_resource(p, "libz.so.1", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t fm = cn_agg_func(p, "<module>", py, "/src/wl.py", 1);
    int32_t fw = cn_agg_func(p, "Runner.work", py, "/src/wl.py", 4);
    int32_t fu = cn_agg_func(p, "[python: unreadable]", unk, NULL, 0);
    int32_t fz = cn_agg_func(p, "deflate", lib, NULL, 0);
    int32_t a[3] = {cn_agg_frame(p, fm, py, 0x100, 9), cn_agg_frame(p, fw, py, 0x200, 6),
                    cn_agg_frame(p, fz, lib, 0x30, 0)};
    int32_t b[2] = {a[0], cn_agg_frame(p, fu, unk, 0x10, 0)};
    int32_t sa = cn_agg_stack_from_frames(p, a, 3), sb = cn_agg_stack_from_frames(p, b, 2);
    int32_t th = cn_agg_thread(p, 7, 7, "python3");
    assert_true(sa >= 0 && sb >= 0 && th >= 0);
    assert_int_equal(cn_agg_add_sample(p, sa, 1000, 1, th), 0);
    assert_int_equal(cn_agg_add_sample(p, sa, 2000, 1, th), 0);
    assert_int_equal(cn_agg_add_sample(p, sb, 3000, 1, th), 0);
    return p;
}

/* The func named name in p (the first of that name), or -1. */
static int32_t func_named(const cn_agg_profile *p, const char *name)
{
    for (size_t f = 0; f < cn_agg_func_count(p); f++)
        if (!strcmp(cn_agg_func_name(p, (int32_t)f), name))
            return (int32_t)f;
    return -1;
}

/* name in p is a Python function of library lib (and of file, when not NULL), with
 * self weight self; deflate is not one. */
static void check_python(cn_agg_profile *p, const char *name, const char *lib, const char *file,
                         double self)
{
    int32_t f = func_named(p, name);
    if (f < 0)
        fail_msg("no function %s", name);
    int32_t res = cn_agg_func_resource(p, f);
    assert_int_equal(cn_agg_resource_kind_of(p, res), CN_AGG_RES_PYTHON);
    assert_string_equal(cn_agg_resource_name(p, res), lib);
    if (file)
        assert_string_equal(cn_agg_func_file(p, f), file);
    cn_agg_query q;
    cn_agg_tree *t = NULL;
    cn_err err = {0};
    cn_agg_query_init(&q);
    q.view = CN_AGG_VIEW_FUNCTIONS;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    double got = -1;
    for (size_t i = 0; i < t->n_functions; i++)
        if (!strcmp(cn_agg_func_name(p, t->functions[i].func), name))
            got = t->functions[i].self;
    assert_true(got == self);
    cn_agg_tree_free(t);
    int32_t z = func_named(p, "deflate");
    assert_true(z >= 0);
    assert_int_not_equal(cn_agg_resource_kind_of(p, cn_agg_func_resource(p, z)), CN_AGG_RES_PYTHON);
}

static cn_agg_profile *import_text(const char *buf, size_t len, const char *name)
{
    cn_agg_profile *p = NULL;
    cn_err err = {0};
    if (cn_fmt_import_buffer(buf, len, name, &p, &err) < 0)
        fail_msg("%s: %s", name, err.msg);
    return p;
}

/* The decompressed bytes of a gzip stream (pprof's). */
static char *inflate_all(const char *gz, size_t gz_len, size_t *len)
{
    z_stream zs = {0};
    size_t cap = 1 << 16;
    char *out = malloc(cap);
    assert_non_null(out);
    assert_int_equal(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
    zs.next_in = (Bytef *)gz;
    zs.avail_in = (uInt)gz_len;
    zs.next_out = (Bytef *)out;
    zs.avail_out = (uInt)cap;
    assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
    *len = cap - zs.avail_out;
    inflateEnd(&zs);
    return out;
}

static bool has_bytes(const char *buf, size_t len, const char *s)
{
    return memmem(buf, len, s, strlen(s)) != NULL;
}

static void test_python_kind_formats(void **state)
{
    (void)state;
    cn_agg_profile *p = python_profile(), *r;
    cn_agg_query q;
    cn_agg_tree *t = NULL;
    cn_err err = {0};
    capture c;
    cn_agg_query_init(&q);

    /* JSON tree: the marker on every Python node (the unknown file's too), read back. */
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    assert_int_equal(cn_fmt_write_json(p, t, NULL, cap_open(&c)), 0);
    char *out = cap_json(&c, "json");
    assert_non_null(strstr(out, "\"name\":\"Runner.work\",\"lib\":\"wl.py\",\"kind\":\"python\""));
    assert_non_null(strstr(out, "\"lib\":\"[python]\",\"kind\":\"python\""));
    assert_non_null(strstr(out, "\"name\":\"deflate\",\"lib\":\"libz.so.1\",\"total\""));
    r = import_text(out, strlen(out), "t.json");
    check_python(r, "Runner.work", "wl.py", NULL, 0);
    check_python(r, "[python: unreadable]", "[python]", NULL, 1);
    cn_agg_profile_free(r);
    free(out);
    cn_agg_tree_free(t);

    /* The function list, the timeline and `canopy lines` say it too. */
    q.view = CN_AGG_VIEW_FUNCTIONS;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    assert_int_equal(cn_fmt_write_json(p, t, NULL, cap_open(&c)), 0);
    out = cap_json(&c, "json functions");
    assert_non_null(strstr(out, "\"name\":\"<module>\",\"lib\":\"wl.py\",\"kind\":\"python\""));
    free(out);
    cn_agg_tree_free(t);
    q.view = CN_AGG_VIEW_TREE;
    cn_agg_call *calls = NULL;
    size_t n_calls = 0;
    assert_int_equal(cn_agg_timeline(p, &q, &calls, &n_calls, &err), 0);
    assert_int_equal(cn_fmt_write_timeline_json(p, calls, n_calls, cap_open(&c)), 0);
    out = cap_json(&c, "timeline json");
    assert_non_null(strstr(out, "\"name\":\"Runner.work\",\"lib\":\"wl.py\",\"kind\":\"python\""));
    assert_null(strstr(out, "\"lib\":\"libz.so.1\",\"kind\""));
    free(out);
    assert_int_equal(cn_fmt_write_chrome_trace(p, calls, n_calls, cap_open(&c)), 0);
    out = cap_json(&c, "chrome trace");
    assert_non_null(strstr(out, "\"lib\":\"wl.py\",\"kind\":\"python\"}"));
    free(out);
    free(calls);
    cn_fmt_spec spec;
    cn_fmt_spec_init(&spec);
    json_t *lines = NULL;
    assert_int_equal(cn_fmt_lines_json(p, &spec, NULL, "Runner.work", &lines, &err), 0);
    assert_string_equal(json_string_value(json_object_get(lines, "kind")), "python");
    assert_string_equal(json_string_value(json_object_get(lines, "file")), "/src/wl.py");
    json_decref(lines);
    assert_int_equal(cn_fmt_lines_json(p, &spec, NULL, "deflate", &lines, &err), 0);
    assert_null(json_object_get(lines, "kind"));
    json_decref(lines);
    cn_fmt_spec_clear(&spec);

    /* pprof, raw and through a transform (one location per function): the system name
     * `py::NAME:FILE` on Python functions only; read back with file, first line and (raw)
     * the frame's line. */
    for (int transformed = 0; transformed < 2; transformed++) {
        cn_agg_transform tf;
        cn_agg_query_init(&q);
        if (transformed) {
            assert_int_equal(cn_agg_transform_parse("merge:nothing", &tf, &err), 0);
            q.transforms = &tf;
            q.n_transforms = 1;
        }
        assert_int_equal(cn_fmt_write_pprof(p, &q, cap_open(&c), &err), 0);
        assert_int_equal(fclose(c.f), 0);
        size_t raw_len;
        char *raw = inflate_all(c.buf, c.len, &raw_len);
        assert_true(has_bytes(raw, raw_len, "py::Runner.work:/src/wl.py"));
        assert_true(has_bytes(raw, raw_len, "py::<module>:/src/wl.py"));
        assert_true(has_bytes(raw, raw_len, "py::[python: unreadable]:[python]"));
        assert_false(has_bytes(raw, raw_len, "py::deflate"));
        free(raw);
        r = import_text(c.buf, c.len, "t.pb.gz");
        free(c.buf);
        check_python(r, "Runner.work", "wl.py", "/src/wl.py", 0);
        check_python(r, "<module>", "wl.py", "/src/wl.py", 0);
        check_python(r, "[python: unreadable]", "[python]", NULL, 1);
        int32_t w = func_named(r, "Runner.work");
        assert_int_equal(cn_agg_func_line(r, w), 4);
        assert_string_equal(cn_agg_resource_path(r, cn_agg_func_resource(r, w)), "/src/wl.py");
        for (size_t f = 0; !transformed && f < cn_agg_frame_count(r); f++) {
            const int32_t *chain;
            if (cn_agg_frame_funcs(r, (int32_t)f, &chain) == 1 && chain[0] == w)
                assert_int_equal(cn_agg_frame_line(r, (int32_t)f), 6);
        }
        cn_agg_profile_free(r);
        if (transformed)
            cn_agg_transform_clear(&tf);
    }

    /* folded: py-spy's `NAME (FILE)` on Python frames only, read back. */
    cn_agg_query_init(&q);
    assert_int_equal(cn_fmt_write_folded(p, &q, cap_open(&c), &err), 0);
    assert_int_equal(fclose(c.f), 0);
    assert_string_equal(c.buf, "<module> (wl.py);Runner.work (wl.py);deflate 2\n"
                               "<module> (wl.py);[python: unreadable] ([python]) 1\n");
    r = import_text(c.buf, c.len, "t.folded");
    free(c.buf);
    check_python(r, "Runner.work", "wl.py", NULL, 0);
    check_python(r, "[python: unreadable]", "[python]", NULL, 1);
    cn_agg_profile_free(r);

    /* A diff of the profile's first sample against all of it: JSON and three-column
     * folded mark it too. */
    cn_agg_profile *d = NULL;
    cn_agg_diff *dr = NULL;
    cn_agg_query qb = q;
    qb.to_ns = 1500;
    assert_int_equal(cn_agg_diff_profile(p, &qb, p, &q, &d, &err), 0);
    assert_int_equal(cn_agg_diff_run(d, &q, false, &dr, &err), 0);
    assert_int_equal(cn_fmt_write_diff_json(d, dr, NULL, cap_open(&c)), 0);
    out = cap_json(&c, "diff json");
    assert_non_null(strstr(out, "\"name\":\"Runner.work\",\"lib\":\"wl.py\",\"kind\":\"python\""));
    free(out);
    assert_int_equal(cn_fmt_write_diff_folded(d, &q, cap_open(&c), &err), 0);
    assert_int_equal(fclose(c.f), 0);
    assert_non_null(strstr(c.buf, "<module> (wl.py);Runner.work (wl.py);deflate 1 2\n"));
    free(c.buf);
    cn_agg_diff_free(dr);
    cn_agg_profile_free(d);
    cn_agg_profile_free(p);
}

/* What is not a Python function stays what it was: folded frames in parentheses that do
 * not name a .py file, JSON kinds this version does not know, pprof system names that are
 * not `py::` + the function's own name and file. */
static void test_python_kind_lookalikes(void **state)
{
    (void)state;
    const char *folded = "a (x.py:12);b (libz.so);c (a.py:12:3);(d.py) 1\n"
                         "a (x.py);e (q.py) 2\n";
    cn_agg_profile *p = import_text(folded, strlen(folded), "t.folded");
    static const char *const natives[] = {"b (libz.so)", "c (a.py:12:3)", "(d.py)"};
    for (size_t i = 0; i < 3; i++) {
        int32_t f = func_named(p, natives[i]);
        if (f < 0)
            fail_msg("no function %s", natives[i]);
        assert_int_equal(cn_agg_func_resource(p, f), -1);
    }
    int32_t a = func_named(p, "a"), e = func_named(p, "e");
    assert_true(a >= 0 && e >= 0);
    assert_int_equal(cn_agg_resource_kind_of(p, cn_agg_func_resource(p, a)), CN_AGG_RES_PYTHON);
    assert_string_equal(cn_agg_resource_name(p, cn_agg_func_resource(p, e)), "q.py");
    /* `a (x.py:12)` and `a (x.py)` are one function: lines are per frame */
    size_t n_a = 0;
    for (size_t f = 0; f < cn_agg_func_count(p); f++)
        n_a += !strcmp(cn_agg_func_name(p, (int32_t)f), "a");
    assert_int_equal(n_a, 1);
    cn_agg_profile_free(p);

    const char *json = "{\"unit\":\"samples\",\"roots\":[{\"name\":\"m\",\"lib\":\"x.py\","
                       "\"kind\":\"ruby\",\"self\":1,\"children\":[{\"name\":\"n\",\"lib\":"
                       "\"[python]\",\"kind\":\"python\",\"self\":2,\"children\":[]}]}]}";
    p = import_text(json, strlen(json), "t.json");
    int32_t m = func_named(p, "m"), n = func_named(p, "n");
    assert_int_equal(cn_agg_resource_kind_of(p, cn_agg_func_resource(p, m)), CN_AGG_RES_LIBRARY);
    assert_int_equal(cn_agg_resource_kind_of(p, cn_agg_func_resource(p, n)), CN_AGG_RES_PYTHON);
    cn_agg_profile_free(p);

    /* pprof by hand: functions 1 `w` (py::w:/x/wl.py, no filename, no mapping: Python), 2
     * `b` (py::other:/x/wl.py), 3 `c` (py::c:/x/c.py but filename /y/c.py); one sample on
     * the three locations. */
    static const char *const strs[] = {
        "",  "samples",       "count",  "w", "py::w:/x/wl.py", "b", "py::other:/x/wl.py",
        "c", "py::c:/x/c.py", "/y/c.py"};
    static const int fn[3][4] = {{1, 3, 4, 0}, {2, 5, 6, 0}, {3, 7, 8, 9}};
    unsigned char pb[512];
    size_t n_pb = 0;
#define PUT(b) (pb[n_pb++] = (unsigned char)(b))
    PUT(0x0a), PUT(4), PUT(0x08), PUT(1), PUT(0x10), PUT(2); /* sample_type {1, 2} */
    /* sample: location_id [1, 2, 3] packed, value [1] packed */
    PUT(0x12), PUT(8), PUT(0x0a), PUT(3), PUT(1), PUT(2), PUT(3), PUT(0x12), PUT(1), PUT(1);
    for (int i = 0; i < 3; i++) { /* location {id i+1, line {function_id i+1}} */
        PUT(0x22), PUT(6), PUT(0x08), PUT(i + 1), PUT(0x22), PUT(2), PUT(0x08), PUT(i + 1);
    }
    for (int i = 0; i < 3; i++) { /* function {id, name, system_name, filename} */
        PUT(0x2a), PUT(fn[i][3] ? 8 : 6), PUT(0x08), PUT(fn[i][0]), PUT(0x10), PUT(fn[i][1]);
        PUT(0x18), PUT(fn[i][2]);
        if (fn[i][3])
            PUT(0x20), PUT(fn[i][3]);
    }
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) { /* string_table */
        PUT(0x32), PUT(strlen(strs[i]));
        memcpy(pb + n_pb, strs[i], strlen(strs[i]));
        n_pb += strlen(strs[i]);
    }
#undef PUT
    p = import_text((const char *)pb, n_pb, "t.pb");
    int32_t w = func_named(p, "w"), b = func_named(p, "b"), cf = func_named(p, "c");
    assert_true(w >= 0 && b >= 0 && cf >= 0);
    int32_t wres = cn_agg_func_resource(p, w);
    assert_int_equal(cn_agg_resource_kind_of(p, wres), CN_AGG_RES_PYTHON);
    assert_string_equal(cn_agg_resource_path(p, wres), "/x/wl.py");
    assert_int_equal(cn_agg_func_resource(p, b), -1);
    assert_int_equal(cn_agg_func_resource(p, cf), -1);
    cn_agg_profile_free(p);
}

/* ---- the Firefox Profiler's processed profile format ------------------------------ */

/* The version export_firefox.c writes; its tables and columns below are those of the
 * profiler's src/types/profile.ts at that version. */
#define FF_VERSION 61

static json_t *ff_get(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        fail_msg("no \"%s\"", key);
    return v;
}

/* A shared table: its length, and each of cols (NULL-terminated) an array that long; no
 * other column. */
static size_t ff_table(json_t *shared, const char *name, const char *const *cols)
{
    json_t *t = ff_get(shared, name);
    assert_true(json_is_integer(ff_get(t, "length")));
    size_t n = (size_t)json_integer_value(ff_get(t, "length")), k = 0;
    for (; cols[k]; k++) {
        json_t *c = ff_get(t, cols[k]);
        if (!json_is_array(c) || json_array_size(c) != n)
            fail_msg("%s.%s: not an array of %zu", name, cols[k], n);
    }
    if (json_object_size(t) != k + 1)
        fail_msg("%s: %zu keys, want %zu", name, json_object_size(t), k + 1);
    return n;
}

/* Element i of table.col: an index below n, or -1 for null or -1 where `none` allows. */
static json_int_t ff_idx(json_t *shared, const char *table, const char *col, size_t i, size_t n,
                         bool none)
{
    json_t *v = json_array_get(ff_get(ff_get(shared, table), col), i);
    if (none && (json_is_null(v) || (json_is_integer(v) && json_integer_value(v) == -1)))
        return -1;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (size_t)json_integer_value(v) >= n)
        fail_msg("%s.%s[%zu]: not an index below %zu", table, col, i, n);
    return json_integer_value(v);
}

static json_int_t ff_int(json_t *shared, const char *table, const char *col, size_t i)
{
    json_t *v = json_array_get(ff_get(ff_get(shared, table), col), i);
    if (!json_is_integer(v))
        fail_msg("%s.%s[%zu]: not an integer", table, col, i);
    return json_integer_value(v);
}

/* The table sizes of a checked document. */
typedef struct ff_sizes {
    size_t str, lib, stack, frame, func, res, sym, src, cat;
} ff_sizes;

static void ff_check_meta(json_t *doc, ff_sizes *n)
{
    json_t *meta = ff_get(doc, "meta"), *cats = ff_get(meta, "categories"), *c;
    size_t i;
    assert_int_equal(json_integer_value(ff_get(meta, "preprocessedProfileVersion")), FF_VERSION);
    assert_true(json_number_value(ff_get(meta, "interval")) > 0);
    assert_true(json_is_array(ff_get(meta, "markerSchema")));
    n->cat = json_array_size(cats);
    /* The first grey category is the default; subcategory 0 is every category's "Other". */
    assert_string_equal(json_string_value(ff_get(json_array_get(cats, 0), "color")), "grey");
    json_array_foreach(cats, i, c)
    {
        assert_non_null(json_string_value(ff_get(c, "name")));
        assert_string_equal(json_string_value(json_array_get(ff_get(c, "subcategories"), 0)),
                            "Other");
    }
    n->lib = json_array_size(ff_get(doc, "libs"));
}

static void ff_check_stacks(json_t *sh, const ff_sizes *n)
{
    for (size_t i = 0; i < n->stack; i++) {
        json_int_t f = ff_idx(sh, "stackTable", "frame", i, n->frame, false);
        json_int_t pre = ff_idx(sh, "stackTable", "prefix", i, i, true); /* before it */
        json_int_t d = ff_int(sh, "frameTable", "inlineDepth", (size_t)f);
        if (d == 0)
            continue;
        /* An inlined frame sits on the frame of depth d - 1 at the same address, with the
         * same native symbol. */
        assert_true(pre >= 0);
        json_int_t g = ff_int(sh, "stackTable", "frame", (size_t)pre);
        assert_int_equal(ff_int(sh, "frameTable", "inlineDepth", (size_t)g), d - 1);
        assert_int_equal(ff_int(sh, "frameTable", "address", (size_t)g),
                         ff_int(sh, "frameTable", "address", (size_t)f));
        assert_int_equal(ff_idx(sh, "frameTable", "nativeSymbol", (size_t)g, n->sym, true),
                         ff_idx(sh, "frameTable", "nativeSymbol", (size_t)f, n->sym, true));
    }
}

static void ff_check_rows(json_t *doc, json_t *sh, const ff_sizes *n)
{
    json_t *cats = ff_get(ff_get(doc, "meta"), "categories");
    for (size_t i = 0; i < n->frame; i++) {
        json_int_t c = ff_idx(sh, "frameTable", "category", i, n->cat, false);
        size_t n_sub = json_array_size(ff_get(json_array_get(cats, (size_t)c), "subcategories"));
        ff_idx(sh, "frameTable", "subcategory", i, n_sub, false);
        ff_idx(sh, "frameTable", "func", i, n->func, false);
        ff_idx(sh, "frameTable", "nativeSymbol", i, n->sym, true);
        assert_true(ff_int(sh, "frameTable", "address", i) >= -1);
    }
    for (size_t i = 0; i < n->func; i++) {
        ff_idx(sh, "funcTable", "name", i, n->str, false);
        ff_idx(sh, "funcTable", "resource", i, n->res, true);
        ff_idx(sh, "funcTable", "source", i, n->src, true);
    }
    for (size_t i = 0; i < n->res; i++) {
        ff_idx(sh, "resourceTable", "name", i, n->str, false);
        ff_idx(sh, "resourceTable", "lib", i, n->lib, true);
    }
    for (size_t i = 0; i < n->sym; i++) {
        ff_idx(sh, "nativeSymbols", "libIndex", i, n->lib, false);
        ff_idx(sh, "nativeSymbols", "name", i, n->str, false);
    }
    for (size_t i = 0; i < n->src; i++)
        ff_idx(sh, "sources", "filename", i, n->str, false);
}

static void ff_check_threads(json_t *doc, const ff_sizes *n)
{
    json_t *t;
    size_t i;
    json_array_foreach(ff_get(doc, "threads"), i, t)
    {
        json_t *s = ff_get(t, "samples"), *time = ff_get(s, "time");
        size_t len = (size_t)json_integer_value(ff_get(s, "length"));
        assert_non_null(json_string_value(ff_get(t, "name")));
        assert_non_null(json_string_value(ff_get(t, "pid")));
        assert_true(json_is_integer(ff_get(t, "tid")));
        assert_int_equal(json_integer_value(ff_get(ff_get(t, "markers"), "length")), 0);
        assert_int_equal(json_array_size(ff_get(s, "stack")), len);
        assert_int_equal(json_array_size(time), len);
        assert_int_equal(json_array_size(ff_get(s, "weight")), len);
        const char *wt = json_string_value(ff_get(s, "weightType"));
        assert_true(!strcmp(wt, "samples") || !strcmp(wt, "tracing-ms"));
        for (size_t k = 0; k < len; k++) {
            json_t *st = json_array_get(ff_get(s, "stack"), k);
            assert_true(json_is_integer(st) && json_integer_value(st) >= 0 &&
                        (size_t)json_integer_value(st) < n->stack);
            assert_true(k == 0 || json_number_value(json_array_get(time, k - 1)) <=
                                      json_number_value(json_array_get(time, k)));
        }
    }
}

/* Checks doc against the format (see test_firefox_structure) and returns its sizes. */
static ff_sizes ff_check(json_t *doc)
{
    static const char *const stack_cols[] = {"frame", "prefix", NULL};
    static const char *const frame_cols[] = {
        "address",      "inlineDepth",   "category", "subcategory", "func",
        "nativeSymbol", "innerWindowID", "line",     "column",      NULL};
    static const char *const func_cols[] = {"name",   "isJS",       "relevantForJS", "resource",
                                            "source", "lineNumber", "columnNumber",  NULL};
    static const char *const res_cols[] = {"lib", "name", "host", "type", NULL};
    static const char *const sym_cols[] = {"libIndex", "address", "name", "functionSize", NULL};
    static const char *const src_cols[] = {"id",          "filename",     "startLine",
                                           "startColumn", "sourceMapURL", NULL};
    ff_sizes n = {0};
    json_t *sh = ff_get(doc, "shared"), *s;
    size_t i;
    assert_int_equal(json_object_size(doc), 4); /* meta, libs, threads, shared */
    ff_check_meta(doc, &n);
    assert_int_equal(json_object_size(sh), 7);
    json_array_foreach(ff_get(sh, "stringArray"), i, s) assert_true(json_is_string(s));
    n.str = json_array_size(ff_get(sh, "stringArray"));
    n.stack = ff_table(sh, "stackTable", stack_cols);
    n.frame = ff_table(sh, "frameTable", frame_cols);
    n.func = ff_table(sh, "funcTable", func_cols);
    n.res = ff_table(sh, "resourceTable", res_cols);
    n.sym = ff_table(sh, "nativeSymbols", sym_cols);
    n.src = ff_table(sh, "sources", src_cols);
    ff_check_rows(doc, sh, &n);
    ff_check_stacks(sh, &n);
    ff_check_threads(doc, &n);
    return n;
}

/* Resources, frames and samples of every kind the writer tells apart: an executable with
 * a build id, a frame with two inlined functions, one still unsymbolized, the kernel, JIT
 * code, a Python function, the [blocked] state frame; two threads, and with `threadless`
 * a sample of no thread. */
typedef struct ff_model {
    cn_agg_profile *p;
    int32_t f_hot; /* the frame with the inline chain outer <- inl1 <- inl2 */
} ff_model;

#define FF_BUILD_ID "0123456789abcdef0123456789abcdef01234567"

static int32_t ff_stack(cn_agg_profile *p, const int32_t *frames, size_t n)
{
    int32_t st = cn_agg_stack_from_frames(p, frames, n);
    assert_true(st >= 0);
    return st;
}

static ff_model ff_model_new(cn_agg_unit unit, bool threadless)
{
    ff_model m = {cn_agg_profile_new(), -1};
    cn_agg_profile *p = m.p;
    assert_non_null(p);
    cn_agg_profile_set_unit(p, unit);
    int32_t app = cn_agg_resource(p, "app", FF_BUILD_ID, "/usr/bin/app", CN_AGG_RES_LIBRARY);
    int32_t kern = cn_agg_resource(p, "[kernel]", NULL, NULL, CN_AGG_RES_KERNEL);
    int32_t jit = cn_agg_resource(p, "[jit]", NULL, NULL, CN_AGG_RES_JIT);
    int32_t py = cn_agg_resource(p, "work.py", NULL, "/srv/work.py", CN_AGG_RES_PYTHON);
    int32_t state = cn_agg_resource(p, "[state]", "[canopy:state]", NULL, CN_AGG_RES_OTHER);
    int32_t f_main = cn_agg_native_frame(p, app, 0x1000);
    m.f_hot = cn_agg_native_frame(p, app, 0x2345);
    int32_t f_cold = cn_agg_native_frame(p, app, 0x3000); /* stays LIB+0xOFFSET */
    cn_agg_symbol mainsym = {"main", "main.c", 4};
    cn_agg_symbol chain[] = {{"outer", "hot.c", 10}, {"inl1", "inl.h", 20}, {"inl2", "inl.h", 30}};
    cn_agg_frame_symbols batch[] = {{f_main, &mainsym, 1, NULL}, {m.f_hot, chain, 3, NULL}};
    assert_int_equal(cn_agg_regroup(p, batch, 2), 0);
    int32_t f_k = cn_agg_frame(p, cn_agg_func(p, "schedule", kern, NULL, 0), kern, -1, 0);
    int32_t f_j = cn_agg_frame(p, cn_agg_func(p, "jitted", jit, NULL, 0), jit, 0x7f00, 0);
    int32_t f_py = cn_agg_frame(p, cn_agg_func(p, "handler", py, "/srv/work.py", 3), py, -1, 7);
    int32_t f_bl =
        cn_agg_frame(p, cn_agg_func(p, CN_AGG_STATE_BLOCKED, state, NULL, 0), state, -1, 0);
    int32_t t_main = cn_agg_thread(p, 10, 10, "main"), t_w = cn_agg_thread(p, 10, 11, "worker");
    assert_true(f_cold >= 0 && f_k >= 0 && f_j >= 0 && f_py >= 0 && f_bl >= 0 && t_w >= 0);
    int32_t s_hot = ff_stack(p, (int32_t[]){f_main, m.f_hot}, 2);
    int32_t s_cold = ff_stack(p, (int32_t[]){f_main, f_cold}, 2);
    int32_t s_py = ff_stack(p, (int32_t[]){f_main, f_py, f_j}, 3);
    int32_t s_wait = ff_stack(p, (int32_t[]){f_main, f_k, f_bl}, 3);
    /* Arrival out of time order within a thread: the writer must order them. */
    assert_int_equal(cn_agg_add_sample(p, s_wait, 4000000, 4, t_w), 0);
    assert_int_equal(cn_agg_add_sample(p, s_hot, 1000000, 1, t_main), 0);
    assert_int_equal(cn_agg_add_sample(p, s_cold, 2500000, 2, t_w), 0);
    assert_int_equal(cn_agg_add_sample(p, s_py, 1500000, 1, t_main), 0);
    if (threadless)
        assert_int_equal(cn_agg_add_sample(p, s_hot, 3000000, 3, -1), 0);
    return m;
}

static json_t *ff_export(cn_agg_profile *p, const cn_agg_query *q)
{
    capture c;
    cn_err err = {0};
    assert_int_equal(cn_fmt_write_firefox(p, q, cap_open(&c), &err), 0);
    char *text = cap_json(&c, "firefox");
    json_t *doc = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(doc);
    return doc;
}

/* The names of frame f's func and of its category (and subcategory). */
static const char *ff_frame_func(json_t *doc, size_t f)
{
    json_t *sh = ff_get(doc, "shared");
    json_int_t fn = ff_int(sh, "frameTable", "func", f);
    json_int_t name = ff_int(sh, "funcTable", "name", (size_t)fn);
    return json_string_value(json_array_get(ff_get(sh, "stringArray"), (size_t)name));
}

static const char *ff_frame_cat(json_t *doc, size_t f, const char **sub)
{
    json_t *sh = ff_get(doc, "shared");
    json_t *c = json_array_get(ff_get(ff_get(doc, "meta"), "categories"),
                               (size_t)ff_int(sh, "frameTable", "category", f));
    *sub = json_string_value(json_array_get(ff_get(c, "subcategories"),
                                            (size_t)ff_int(sh, "frameTable", "subcategory", f)));
    return json_string_value(ff_get(c, "name"));
}

/* The frame whose func is named `name` (the first), or fails. */
static size_t ff_find(json_t *doc, const char *name, size_t n_frames)
{
    for (size_t f = 0; f < n_frames; f++)
        if (!strcmp(ff_frame_func(doc, f), name))
            return f;
    fail_msg("no frame of %s", name);
    return 0;
}

/* The known model exported raw: the structure holds, each kind of frame is in its
 * category, the inline chain is three frames at one address under one native symbol, the
 * unsymbolized frame keeps its address without a symbol, the library carries its build
 * id, and each thread's samples come in time order with their weights. */
static void test_firefox_structure(void **state)
{
    (void)state;
    ff_model m = ff_model_new(CN_AGG_UNIT_SAMPLES, true);
    cn_agg_query q;
    cn_agg_query_init(&q);
    json_t *doc = ff_export(m.p, &q), *sh = ff_get(doc, "shared");
    ff_sizes n = ff_check(doc);
    static const struct {
        const char *func, *cat, *sub;
    } cats[] = {{"main", "User", "Other"},       {"inl2", "User", "Other"},
                {"schedule", "Kernel", "Other"}, {"jitted", "JIT", "Other"},
                {"handler", "Python", "Other"},  {CN_AGG_STATE_BLOCKED, "Off-CPU", "Blocked"},
                {"app+0x3000", "User", "Other"}};
    for (size_t i = 0; i < sizeof(cats) / sizeof(cats[0]); i++) {
        const char *sub, *cat = ff_frame_cat(doc, ff_find(doc, cats[i].func, n.frame), &sub);
        assert_string_equal(cat, cats[i].cat);
        assert_string_equal(sub, cats[i].sub);
    }
    /* Inlining: outer (depth 0) <- inl1 (1) <- inl2 (2), stacked in that order. */
    const char *names[] = {"outer", "inl1", "inl2"};
    size_t fr[3];
    for (int k = 0; k < 3; k++) {
        fr[k] = ff_find(doc, names[k], n.frame);
        assert_int_equal(ff_int(sh, "frameTable", "inlineDepth", fr[k]), k);
        assert_int_equal(ff_int(sh, "frameTable", "address", fr[k]), 0x2345);
    }
    json_int_t sym = ff_idx(sh, "frameTable", "nativeSymbol", fr[0], n.sym, false);
    assert_int_equal(ff_idx(sh, "frameTable", "nativeSymbol", fr[2], n.sym, false), sym);
    assert_int_equal(ff_int(sh, "nativeSymbols", "address", (size_t)sym), 0x2345);
    assert_int_equal(ff_int(sh, "frameTable", "line", fr[2]), cn_agg_frame_line(m.p, m.f_hot));
    size_t cold = ff_find(doc, "app+0x3000", n.frame);
    assert_int_equal(ff_int(sh, "frameTable", "address", cold), 0x3000);
    assert_true(
        json_is_null(json_array_get(ff_get(ff_get(sh, "frameTable"), "nativeSymbol"), cold)));
    assert_int_equal(ff_int(sh, "frameTable", "address", ff_find(doc, "jitted", n.frame)), -1);
    /* The library: its build id as codeId, and as Breakpad's id (GUID byte order, age 0). */
    json_t *lib = json_array_get(ff_get(doc, "libs"), 0);
    assert_string_equal(json_string_value(ff_get(lib, "name")), "app");
    assert_string_equal(json_string_value(ff_get(lib, "codeId")), FF_BUILD_ID);
    assert_string_equal(json_string_value(ff_get(lib, "breakpadId")),
                        "67452301AB89EFCD0123456789ABCDEF0");
    assert_string_equal(json_string_value(ff_get(lib, "debugPath")), "/usr/bin/app");
    /* Threads: samples of no thread first, then main and worker; times in ms, in order. */
    json_t *threads = ff_get(doc, "threads");
    assert_int_equal(json_array_size(threads), 3);
    json_t *w = ff_get(json_array_get(threads, 2), "samples");
    assert_string_equal(json_string_value(ff_get(json_array_get(threads, 2), "name")), "worker");
    assert_string_equal(json_string_value(ff_get(json_array_get(threads, 2), "pid")), "10");
    assert_string_equal(json_string_value(ff_get(w, "weightType")), "samples");
    assert_true(json_number_value(json_array_get(ff_get(w, "time"), 0)) == 2.5);
    assert_true(json_number_value(json_array_get(ff_get(w, "weight"), 1)) == 4);
    json_decref(doc);
    cn_agg_profile_free(m.p);
}

/* The transformed query's export of m: the structure holds, one sample per call node at
 * time 0, frames without addresses or symbols, no frame of the merged function; returns
 * each thread's total weight into sums (at most 4 threads), and the thread count. */
static size_t ff_tree_totals(ff_model m, const cn_agg_transform *tf, double *sums)
{
    cn_agg_query q;
    cn_agg_query_init(&q);
    q.transforms = tf;
    q.n_transforms = 1;
    json_t *doc = ff_export(m.p, &q), *sh = ff_get(doc, "shared"), *t, *v;
    ff_sizes n = ff_check(doc);
    size_t i, k;
    assert_int_equal(n.sym, 0);
    for (size_t f = 0; f < n.frame; f++) {
        assert_int_equal(ff_int(sh, "frameTable", "address", f), -1);
        assert_string_not_equal(ff_frame_func(doc, f), "outer");
    }
    size_t n_thr = json_array_size(ff_get(doc, "threads"));
    assert_true(n_thr <= 4);
    json_array_foreach(ff_get(doc, "threads"), i, t)
    {
        json_t *smp = ff_get(t, "samples");
        sums[i] = 0;
        json_array_foreach(ff_get(smp, "weight"), k, v) sums[i] += json_number_value(v);
        json_array_foreach(ff_get(smp, "time"), k, v) assert_true(json_number_value(v) == 0);
    }
    json_decref(doc);
    return n_thr;
}

/* A time unit is weighted in ms ("tracing-ms"). A transformed query runs per thread, or
 * once for all when samples of no thread exist (no thread query would see them), and
 * keeps the weights. */
static void test_firefox_time_and_tree(void **state)
{
    (void)state;
    ff_model m = ff_model_new(CN_AGG_UNIT_NS, false);
    cn_agg_query q;
    cn_agg_query_init(&q);
    json_t *doc = ff_export(m.p, &q);
    ff_check(doc);
    json_t *s = ff_get(json_array_get(ff_get(doc, "threads"), 1), "samples");
    assert_string_equal(json_string_value(ff_get(s, "weightType")), "tracing-ms");
    assert_true(json_number_value(json_array_get(ff_get(s, "weight"), 1)) == 4e-6);
    json_decref(doc);

    cn_agg_transform tf;
    cn_err err;
    double sums[4];
    assert_int_equal(cn_agg_transform_parse("merge:outer", &tf, &err), 0);
    assert_int_equal(ff_tree_totals(m, &tf, sums), 2); /* main, worker */
    assert_true(fabs(sums[0] - 2e-6) < 1e-15 && fabs(sums[1] - 6e-6) < 1e-15);
    cn_agg_profile_free(m.p);
    m = ff_model_new(CN_AGG_UNIT_NS, true);
    assert_int_equal(ff_tree_totals(m, &tf, sums), 1); /* all threads */
    assert_true(fabs(sums[0] - 11e-6) < 1e-15);
    cn_agg_transform_clear(&tf);
    cn_agg_profile_free(m.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_formats_bad_utf8),
        cmocka_unit_test(test_json_numbers_agree),
        cmocka_unit_test(test_cpuprofile_hostile_trees),
        cmocka_unit_test(test_speedscope_group_by_fresh),
        cmocka_unit_test(test_diff_deep),
        cmocka_unit_test(test_unwind_summary),
        cmocka_unit_test(test_text_formats_terminal),
        cmocka_unit_test(test_python_kind_formats),
        cmocka_unit_test(test_python_kind_lookalikes),
        cmocka_unit_test(test_firefox_structure),
        cmocka_unit_test(test_firefox_time_and_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
