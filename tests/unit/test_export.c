/* test_export.c — the tree and timeline writers (export_text.c, export_json.c,
 * export_timeline.c) on hand-built trees, independent of the query engine. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cn_agg.h"
#include "cn_fmt.h"

struct fixture {
    cn_agg_profile *p;
    int32_t fa, fb, fc, fz; /* A, B, C (no lib) and Z in libz.so */
    cn_agg_tree tree;
    cn_agg_node nodes[5];
};

/* Tree: A (4,1) -> { B (2,2), C (1,1), Z (0,0) hidden }, root Z (1,1). Total 5. */
static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->p = cn_agg_profile_new();
    assert_non_null(f->p);
    int32_t lib = cn_agg_resource(f->p, "libz.so", NULL, NULL, CN_AGG_RES_LIBRARY);
    assert_true(lib >= 0);
    f->fa = cn_agg_func(f->p, "A", -1, NULL, 0);
    f->fb = cn_agg_func(f->p, "B", -1, NULL, 0);
    f->fc = cn_agg_func(f->p, "C", -1, NULL, 0);
    f->fz = cn_agg_func(f->p, "Z", lib, NULL, 0);
    cn_agg_node *n = f->nodes;
    n[0] = (cn_agg_node){f->fa, -1, 1, 4, 4, 1, 0, 0};
    n[1] = (cn_agg_node){f->fb, 0, -1, 2, 2, 2, 0, 0};
    n[2] = (cn_agg_node){f->fc, 0, -1, 3, 1, 1, 0, 0};
    n[3] = (cn_agg_node){f->fz, 0, -1, -1, 0, 0, 0, 0};
    n[4] = (cn_agg_node){f->fz, -1, -1, -1, 1, 1, 0, 0};
    f->tree.view = CN_AGG_VIEW_TREE;
    f->tree.total = 5;
    f->tree.first_root = 0;
    f->tree.nodes = n;
    f->tree.n_nodes = 5;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    cn_agg_profile_free(f->p);
    free(f);
    return 0;
}

/* Runs a writer into a malloc'ed string. */
static char *capture_text(const cn_agg_profile *p, const cn_agg_tree *t, const cn_fmt_write_opts *o,
                          int json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_non_null(m);
    int rc = json ? cn_fmt_write_json(p, t, o, m) : cn_fmt_write_text(p, t, o, m);
    assert_int_equal(rc, 0);
    fclose(m);
    return buf;
}

static void test_text_layout(void **state)
{
    struct fixture *f = *state;
    cn_fmt_write_opts o;
    cn_fmt_write_opts_init(&o);
    o.title = "t.folded";
    char *s = capture_text(f->p, &f->tree, &o, 0);
    const char *want = "t.folded: call tree, total 5 samples, transforms: none\n"
                       " 80.0%   4    20.0%   1   A\n"
                       " 40.0%   2    40.0%   2     B\n"
                       " 20.0%   1    20.0%   1     C\n"
                       " 20.0%   1    20.0%   1   Z\n";
    assert_string_equal(s, want);
    free(s);
}

/* Two funcs printing the same name get their library (and file, when the library does not
 * tell them apart) in the text tree and the function list; unique names stay bare. */
static void test_text_colliding_names(void **state)
{
    (void)state;
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    int32_t py = cn_agg_resource(p, "python3", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t ld = cn_agg_resource(p, "ld-linux-x86-64.so.2", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t f_py = cn_agg_func(p, "_start", py, NULL, 0);
    int32_t f_ld = cn_agg_func(p, "_start", ld, NULL, 0);
    int32_t f_main = cn_agg_func(p, "main", py, NULL, 0);
    int32_t f_h1 = cn_agg_func(p, "helper", py, "a.c", 0);
    int32_t f_h2 = cn_agg_func(p, "helper", py, "b.c", 0);
    int32_t fr[5];
    int32_t fs[5] = {f_py, f_ld, f_main, f_h1, f_h2};
    for (int i = 0; i < 5; i++)
        assert_true((fr[i] = cn_agg_frame(p, fs[i], cn_agg_func_resource(p, fs[i]), -1, 0)) >= 0);
    int32_t s1[] = {fr[0], fr[2], fr[3]}, s2[] = {fr[1]}, s3[] = {fr[0], fr[2], fr[4]};
    assert_int_equal(cn_agg_add_sample(p, cn_agg_stack_from_frames(p, s1, 3), 0, 2, -1), 0);
    assert_int_equal(cn_agg_add_sample(p, cn_agg_stack_from_frames(p, s2, 1), 1, 1, -1), 0);
    assert_int_equal(cn_agg_add_sample(p, cn_agg_stack_from_frames(p, s3, 3), 2, 1, -1), 0);
    cn_agg_query q;
    cn_agg_query_init(&q);
    cn_agg_tree *t = NULL;
    cn_err err = {0};
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    char *s = capture_text(p, t, NULL, 0);
    const char *want = "profile: call tree, total 4 samples, transforms: none\n"
                       " 75.0%   3     0.0%   0   _start (python3)\n"
                       " 75.0%   3     0.0%   0     main\n"
                       " 50.0%   2    50.0%   2       helper (python3, a.c)\n"
                       " 25.0%   1    25.0%   1       helper (python3, b.c)\n"
                       " 25.0%   1    25.0%   1   _start (ld-linux-x86-64.so.2)\n";
    assert_string_equal(s, want);
    free(s);
    t = cn_agg_tree_free(t);
    /* The functions view; and a result without a collision prints bare names. */
    q.view = CN_AGG_VIEW_FUNCTIONS;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    s = capture_text(p, t, NULL, 0);
    assert_non_null(strstr(s, "   _start (ld-linux-x86-64.so.2)\n"));
    assert_non_null(strstr(s, "   _start (python3)\n"));
    assert_non_null(strstr(s, "   main\n"));
    free(s);
    t = cn_agg_tree_free(t);
    q.view = CN_AGG_VIEW_TREE;
    q.from_ns = 0; /* only the first sample: no name collides in the result */
    q.to_ns = 1;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    s = capture_text(p, t, NULL, 0);
    assert_non_null(strstr(s, "   _start\n"));
    assert_non_null(strstr(s, "   helper\n"));
    free(s);
    t = cn_agg_tree_free(t);
    /* Script functions: the file is the URL and a position, so it is shown alone. */
    int32_t js = cn_agg_resource(p, "https://x/a.js", NULL, NULL, CN_AGG_RES_URL);
    int32_t f_a1 = cn_agg_func(p, "(anonymous)", js, "https://x/a.js:3:1", 3);
    int32_t f_a2 = cn_agg_func(p, "(anonymous)", js, "https://x/a.js:9:1", 9);
    int32_t fa1 = cn_agg_frame(p, f_a1, js, -1, 0), fa2 = cn_agg_frame(p, f_a2, js, -1, 0);
    assert_int_equal(cn_agg_add_sample(p, cn_agg_stack_from_frames(p, &fa1, 1), 3, 1, -1), 0);
    assert_int_equal(cn_agg_add_sample(p, cn_agg_stack_from_frames(p, &fa2, 1), 4, 1, -1), 0);
    q.from_ns = 3;
    q.to_ns = 5;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    s = capture_text(p, t, NULL, 0);
    assert_non_null(strstr(s, "   (anonymous) (https://x/a.js:3:1)\n"));
    assert_non_null(strstr(s, "   (anonymous) (https://x/a.js:9:1)\n"));
    free(s);
    cn_agg_tree_free(t);
    cn_agg_profile_free(p);
}

static void test_text_depth_and_min_percent(void **state)
{
    struct fixture *f = *state;
    cn_fmt_write_opts o;
    cn_fmt_write_opts_init(&o);
    o.max_depth = 1;
    char *s = capture_text(f->p, &f->tree, &o, 0);
    assert_null(strstr(s, " B\n"));
    assert_non_null(strstr(s, "   A\n"));
    assert_non_null(strstr(s, "   Z\n"));
    free(s);
    cn_fmt_write_opts_init(&o);
    o.min_percent = 30;
    s = capture_text(f->p, &f->tree, &o, 0);
    assert_non_null(strstr(s, "   A\n"));
    assert_non_null(strstr(s, "     B\n"));
    assert_null(strstr(s, " C\n"));
    assert_null(strstr(s, " Z\n"));
    free(s);
}

static void test_text_scaled_values(void **state)
{
    struct fixture *f = *state;
    cn_fmt_write_opts o;
    cn_fmt_write_opts_init(&o);
    cn_agg_profile_set_scale(f->p, 0.5);
    char *s = capture_text(f->p, &f->tree, &o, 0);
    assert_non_null(strstr(s, "total 2.5 samples"));
    assert_non_null(strstr(s, " 80.0%   2    20.0% 0.5   A\n"));
    free(s);
    /* wide values keep a space after the percentage */
    cn_agg_profile_set_scale(f->p, 1e9);
    s = capture_text(f->p, &f->tree, &o, 0);
    assert_non_null(strstr(s, " 80.0% 4000000000    20.0% 1000000000   A\n"));
    free(s);
}

static void test_json_tree(void **state)
{
    struct fixture *f = *state;
    cn_fmt_write_opts o;
    cn_agg_transform tf;
    cn_err err;
    cn_fmt_write_opts_init(&o);
    assert_int_equal(cn_agg_transform_parse("merge:C", &tf, &err), 0);
    o.transforms = &tf;
    o.n_transforms = 1;
    char *s = capture_text(f->p, &f->tree, &o, 1);
    cn_agg_transform_clear(&tf);
    json_error_t je;
    json_t *doc = json_loads(s, 0, &je);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "unit")), "samples");
    assert_string_equal(json_string_value(json_object_get(doc, "view")), "tree");
    assert_true(json_is_integer(json_object_get(doc, "total")));
    assert_int_equal(json_integer_value(json_object_get(doc, "total")), 5);
    assert_string_equal(json_string_value(json_array_get(json_object_get(doc, "transforms"), 0)),
                        "merge:C");
    assert_null(json_object_get(doc, "session"));
    json_t *roots = json_object_get(doc, "roots");
    assert_int_equal(json_array_size(roots), 2);
    json_t *a = json_array_get(roots, 0);
    assert_null(json_object_get(a, "lib")); /* no resource */
    assert_int_equal(json_integer_value(json_object_get(a, "self")), 1);
    /* the zero node Z under A is omitted */
    assert_int_equal(json_array_size(json_object_get(a, "children")), 2);
    json_t *z = json_array_get(roots, 1);
    assert_string_equal(json_string_value(json_object_get(z, "lib")), "libz.so");
    json_decref(doc);
    free(s);
}

static void test_json_views(void **state)
{
    struct fixture *f = *state;
    cn_fmt_write_opts o;
    cn_agg_func_row rows[2] = {{f->fb, 2, 2}, {f->fa, 1, 4}};
    cn_fmt_write_opts_init(&o);
    o.session = "s1";
    o.event = "cpu-clock";
    o.samples = 7;
    o.lost = 1;
    f->tree.view = CN_AGG_VIEW_FUNCTIONS;
    f->tree.functions = rows;
    f->tree.n_functions = 2;
    char *s = capture_text(f->p, &f->tree, &o, 1);
    json_t *doc = json_loads(s, 0, NULL);
    assert_non_null(doc);
    assert_null(json_object_get(doc, "roots"));
    json_t *fn = json_object_get(doc, "functions");
    assert_int_equal(json_array_size(fn), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(fn, 0), "name")), "B");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(fn, 1), "total")), 4);
    assert_string_equal(json_string_value(json_object_get(doc, "session")), "s1");
    assert_int_equal(json_integer_value(json_object_get(doc, "lost")), 1);
    json_decref(doc);
    free(s);

    cn_fmt_write_opts_init(&o);
    f->tree.view = CN_AGG_VIEW_CALLEES;
    f->tree.call_sites = 3;
    f->tree.has_recursion_counts = true;
    f->nodes[0].merged_stacks = 2;
    s = capture_text(f->p, &f->tree, &o, 1);
    doc = json_loads(s, 0, NULL);
    assert_non_null(doc);
    assert_int_equal(json_integer_value(json_object_get(doc, "call_sites")), 3);
    json_t *a = json_array_get(json_object_get(doc, "roots"), 0);
    assert_int_equal(json_integer_value(json_object_get(a, "merged_stacks")), 2);
    assert_int_equal(json_integer_value(json_object_get(a, "recursions")), 0);
    json_decref(doc);
    free(s);

    f->tree.view = CN_AGG_VIEW_CALLERS;
    f->tree.callers_mode = CN_AGG_CALLERS_SELF;
    s = capture_text(f->p, &f->tree, &o, 1);
    doc = json_loads(s, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(doc, "mode")), "self");
    json_decref(doc);
    free(s);
}

static void test_json_empty_tree(void **state)
{
    struct fixture *f = *state;
    cn_agg_tree empty = {0};
    empty.first_root = -1;
    char *s = capture_text(f->p, &empty, NULL, 1);
    assert_string_equal(s, "{\"unit\":\"samples\",\"total\":0,\"view\":\"tree\",\"transforms\":[],"
                           "\"roots\":[]}\n");
    free(s);
}

/* Python functions (docs/python.md): their resource's kind shows as "kind": "python" beside
 * "lib", on both the fast and the escaped path; other resources have no "kind". */
static void test_json_python_kind(void **state)
{
    (void)state;
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    int32_t py = cn_agg_resource(p, "wl.py", "[py]/tmp/wl.py", "/tmp/wl.py", CN_AGG_RES_PYTHON);
    int32_t py2 = cn_agg_resource(p, "w\"l.py", "[py]/tmp/w\"l.py", NULL, CN_AGG_RES_PYTHON);
    int32_t lib = cn_agg_resource(p, "libz.so.1", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t fs[3] = {cn_agg_func(p, "work_a", py, "/tmp/wl.py", 11),
                     cn_agg_func(p, "work_b", py2, NULL, 0),
                     cn_agg_func(p, "deflate", lib, NULL, 0)};
    int32_t fr[3];
    for (int i = 0; i < 3; i++)
        assert_true((fr[i] = cn_agg_frame(p, fs[i], cn_agg_func_resource(p, fs[i]), -1, 0)) >= 0);
    assert_int_equal(cn_agg_add_sample(p, cn_agg_stack_from_frames(p, fr, 3), 0, 1, -1), 0);
    cn_agg_query q;
    cn_agg_query_init(&q);
    cn_agg_tree *t = NULL;
    cn_err err = {0};
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    char *s = capture_text(p, t, NULL, 1);
    assert_non_null(strstr(s, "{\"name\":\"work_a\",\"lib\":\"wl.py\",\"kind\":\"python\","));
    assert_non_null(strstr(s, "\"lib\":\"w\\\"l.py\",\"kind\":\"python\","));
    assert_non_null(strstr(s, "\"lib\":\"libz.so.1\",\"total\""));
    free(s);
    cn_agg_tree_free(t);
    cn_agg_profile_free(p);
}

/* Names come from binaries: bytes that are not UTF-8 must still give valid JSON. */
static void test_json_bad_utf8_and_escapes(void **state)
{
    struct fixture *f = *state;
    int32_t bad = cn_agg_func(f->p, "bad\xff\xc3(\"q\"\\\n)\xc3\xa9", -1, NULL, 0);
    assert_true(bad >= 0);
    f->nodes[4].func = bad;
    char *s = capture_text(f->p, &f->tree, NULL, 1);
    json_error_t je;
    json_t *doc = json_loads(s, 0, &je);
    assert_non_null(doc);
    json_t *z = json_array_get(json_object_get(doc, "roots"), 1);
    assert_string_equal(json_string_value(json_object_get(z, "name")),
                        "bad\xef\xbf\xbd\xef\xbf\xbd(\"q\"\\\n)\xc3\xa9");
    json_decref(doc);
    free(s);
}

/* cn_fmt_json_string (canopyd's replies) follows the one string policy of the file writers:
 * for random bytes (invalid UTF-8, controls, quotes, long runs that make the buffer grow)
 * its literal is exactly the one the tree JSON writer prints, and it always parses. */
static void test_json_string_buf(void **state)
{
    struct fixture *f = *state;
    static const char pick[] =
        "ab\"\\\n\x01\x7f\xc3\xa9\xe2\x82\xac\xff\xf0\x9f\x98\x80\xed\xa0\x80";
    unsigned seed = 7;
    for (int round = 0; round < 40; round++) {
        size_t n = (size_t)(round * round * 7) % 5000 + 1;
        char *name = malloc(n + 1);
        assert_non_null(name);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            name[i] = pick[(seed >> 16) % (sizeof(pick) - 1)];
            if (name[i] == '\0')
                name[i] = 'z';
        }
        name[n] = '\0';
        cn_buf b;
        cn_buf_init(&b, 0);
        assert_int_equal(cn_fmt_json_string(&b, name, n), 0);
        json_error_t je;
        json_t *v = json_loadb(cn_buf_ptr(&b), cn_buf_len(&b), JSON_DECODE_ANY, &je);
        assert_non_null(v);
        assert_true(json_is_string(v));
        json_decref(v);
        f->nodes[4].func = cn_agg_func(f->p, name, -1, NULL, 0);
        char *doc = capture_text(f->p, &f->tree, NULL, 1);
        assert_non_null(strstr(doc, cn_buf_ptr(&b)));
        free(doc);
        cn_buf_free(&b);
        free(name);
    }
    /* A bounded buffer fails cleanly when full. */
    cn_buf b;
    cn_buf_init(&b, 16);
    assert_int_equal(cn_fmt_json_string(&b, "\x01\x01\x01\x01", 4), -EMSGSIZE);
    cn_buf_free(&b);
    cn_buf_init(&b, 0);
    assert_int_equal(cn_fmt_json_string(&b, NULL, 0), 0);
    assert_string_equal(cn_buf_ptr(&b), "\"\"");
    cn_buf_free(&b);
}

/* A chain as deep as the deepest stack the importers accept: no recursion, no crash. */
static void test_deep_tree(void **state)
{
    struct fixture *f = *state;
    enum { DEPTH = 200000 };
    cn_agg_tree t = {0};
    cn_agg_node *nodes = calloc(DEPTH, sizeof(*nodes));
    assert_non_null(nodes);
    for (int i = 0; i < DEPTH; i++)
        nodes[i] = (cn_agg_node){
            i % 2 ? f->fa : f->fb, i - 1, i + 1 < DEPTH ? i + 1 : -1, -1, 1, i + 1 == DEPTH, 0, 0};
    t.total = 1;
    t.first_root = 0;
    t.nodes = nodes;
    t.n_nodes = DEPTH;
    char *s = capture_text(f->p, &t, NULL, 1);
    json_error_t je;
    size_t nb = 0;
    for (const char *q = s; *q; q++)
        nb += *q == '{';
    assert_int_equal(nb, DEPTH + 1);
    free(s);
    s = capture_text(f->p, &t, NULL, 0);
    size_t lines = 0;
    for (const char *q = s; *q; q++)
        lines += *q == '\n';
    assert_int_equal(lines, DEPTH + 1);
    assert_non_null(strstr(s, "[199999] A\n"));
    free(s);
    (void)je;
    free(nodes);
}

static void test_timeline_writers(void **state)
{
    struct fixture *f = *state;
    cn_agg_call calls[2] = {{f->fa, 42, 0, 1000000, 2000500}, {f->fz, 42, 1, 1500000, 0}};
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_int_equal(cn_fmt_write_timeline_json(f->p, calls, 2, m), 0);
    fclose(m);
    json_t *doc = json_loads(buf, 0, NULL);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "unit")), "us");
    json_t *c0 = json_array_get(json_object_get(doc, "calls"), 0);
    assert_int_equal(json_integer_value(json_object_get(c0, "start")), 1000);
    assert_true(json_real_value(json_object_get(c0, "dur")) == 2000.5);
    assert_int_equal(json_integer_value(json_object_get(c0, "tid")), 42);
    assert_null(json_object_get(c0, "lib"));
    json_t *c1 = json_array_get(json_object_get(doc, "calls"), 1);
    assert_string_equal(json_string_value(json_object_get(c1, "lib")), "libz.so");
    json_decref(doc);
    free(buf);

    int32_t th = cn_agg_thread(f->p, 7, 42, "worker");
    assert_true(th >= 0);
    m = open_memstream(&buf, &len);
    assert_int_equal(cn_fmt_write_chrome_trace(f->p, calls, 2, m), 0);
    fclose(m);
    doc = json_loads(buf, 0, NULL);
    assert_non_null(doc);
    json_t *ev = json_object_get(doc, "traceEvents");
    size_t nx = 0, nm = 0, i;
    json_t *e;
    json_array_foreach(ev, i, e)
    {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        if (!strcmp(ph, "X")) {
            nx++;
            assert_int_equal(json_integer_value(json_object_get(e, "pid")), 7);
            assert_int_equal(json_integer_value(json_object_get(e, "tid")), 42);
        } else if (!strcmp(ph, "M")) {
            nm++;
        }
    }
    assert_int_equal(nx, 2);
    assert_int_equal(nm, 1);
    json_decref(doc);
    free(buf);

    m = open_memstream(&buf, &len);
    assert_int_equal(cn_fmt_write_timeline_text(f->p, calls, 2, m), 0);
    fclose(m);
    assert_non_null(strstr(buf, "      1000.000     2000.500       42   A\n"));
    assert_non_null(strstr(buf, "      1500.000        0.000       42     Z  [libz.so]\n"));
    free(buf);
}

/* Off-CPU and wall weights as times (docs/cli.md, "Modes"): three significant digits,
 * rounding deciding the unit's decimals, and only ns-unit profiles of those modes. */
static void test_time_units(void **state)
{
    (void)state;
    static const struct {
        double ns;
        const char *want;
    } cases[] = {
        {0, "0"},           {850, "850 ns"},       {1500, "1.50 us"},    {12345678, "12.3 ms"},
        {4.56e9, "4.56 s"}, {999.96e6, "1000 ms"}, {99.996e6, "100 ms"}, {-2.5e6, "-2.50 ms"},
        {125e9, "125 s"}};
    char buf[32];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cn_fmt_time(buf, sizeof(buf), cases[i].ns);
        assert_string_equal(buf, cases[i].want);
    }
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    assert_false(cn_fmt_is_time_profile(p));
    cn_agg_profile_set_unit(p, CN_AGG_UNIT_NS);
    assert_false(cn_fmt_is_time_profile(p)); /* ns of another kind (a perf script import) */
    cn_agg_meta_set(p, "mode", "off-cpu");
    assert_true(cn_fmt_is_time_profile(p));
    cn_agg_meta_set(p, "mode", "cpu");
    assert_false(cn_fmt_is_time_profile(p));
    cn_agg_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_text_layout, setup, teardown),
        cmocka_unit_test(test_text_colliding_names),
        cmocka_unit_test_setup_teardown(test_text_depth_and_min_percent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_scaled_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_tree, setup, teardown),
        cmocka_unit_test(test_json_python_kind),
        cmocka_unit_test_setup_teardown(test_json_views, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_empty_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_bad_utf8_and_escapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_string_buf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deep_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeline_writers, setup, teardown),
        cmocka_unit_test(test_time_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
