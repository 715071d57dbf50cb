/* test_calltree.c — the query engine against the worked vectors of docs/calltree.md §7, the
 * edge cases of §2, path mapping, transform specs, views, timeline, lines, and the
 * symbolication reshaping of §4.4/§4.5.
 *
 * Trees are compared as strings: `NAME(total,self)` per node in output order, children
 * in brackets, e.g. "A(3,0)[B(3,0)[C(2,2) H(1,0)]]"; with collapse-all-rec counters
 * `NAME(total,self|merged,recursions)`.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cn_agg.h"

/* ---- helpers ------------------------------------------------------------------------ */

/* Builds a profile from folded lines "A;B;C W" (one sample per line, time = line index,
 * thread 0 of pid 1). libs: "C=libX,D=libX" gives those funcs a resource; others "app". */
static cn_agg_profile *mk(const char *folded, const char *libs)
{
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    int32_t app = cn_agg_resource(p, "app", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t th = cn_agg_thread(p, 1, 1, "main");
    assert_true(app >= 0 && th >= 0);
    char *text = strdup(folded), *save = NULL;
    int64_t t = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *sp = strrchr(line, ' ');
        assert_non_null(sp);
        *sp = 0;
        double w = atof(sp + 1);
        int32_t frames[64];
        size_t n = 0;
        char *s2 = NULL;
        for (char *f = strtok_r(line, ";", &s2); f; f = strtok_r(NULL, ";", &s2)) {
            int32_t res = app;
            char key[80];
            snprintf(key, sizeof(key), "%s=", f);
            const char *hit = libs ? strstr(libs, key) : NULL;
            if (hit && (hit == libs || hit[-1] == ',')) {
                char lib[64];
                sscanf(hit + strlen(key), "%63[^,]", lib);
                res = cn_agg_resource(p, lib, NULL, NULL, CN_AGG_RES_LIBRARY);
            }
            int32_t fn = cn_agg_func(p, f, res, NULL, 0);
            assert_true(fn >= 0);
            frames[n] = cn_agg_frame(p, fn, res, -1, 0);
            assert_true(frames[n] >= 0);
            n++;
        }
        int32_t st = cn_agg_stack_from_frames(p, frames, n);
        assert_true(st >= 0);
        assert_int_equal(cn_agg_add_sample(p, st, t++, w, th), 0);
    }
    free(text);
    return p;
}

static void fmt_num(char *buf, size_t len, double v)
{
    if (v == (double)(int64_t)v)
        snprintf(buf, len, "%lld", (long long)v);
    else
        snprintf(buf, len, "%g", v);
}

static void render(const cn_agg_profile *p, const cn_agg_tree *t, int32_t first, char *out,
                   size_t len)
{
    for (int32_t n = first; n >= 0; n = t->nodes[n].next_sibling) {
        const cn_agg_node *nd = &t->nodes[n];
        char a[32], b[32], buf[256];
        fmt_num(a, sizeof(a), nd->total);
        fmt_num(b, sizeof(b), nd->self);
        if (t->has_recursion_counts)
            snprintf(buf, sizeof(buf), "%s%s(%s,%s|%d,%d)", n == first ? "" : " ",
                     cn_agg_func_name(p, nd->func), a, b, nd->merged_stacks, nd->recursions);
        else
            snprintf(buf, sizeof(buf), "%s%s(%s,%s)", n == first ? "" : " ",
                     cn_agg_func_name(p, nd->func), a, b);
        strncat(out, buf, len - strlen(out) - 1);
        assert_int_equal(nd->parent >= 0 ? t->nodes[nd->parent].first_child >= 0 : 1, 1);
        if (nd->first_child >= 0) {
            strncat(out, "[", len - strlen(out) - 1);
            render(p, t, nd->first_child, out, len);
            strncat(out, "]", len - strlen(out) - 1);
        }
    }
}

typedef struct qopts {
    cn_agg_view view;
    const char *func;
    cn_agg_callers_mode mode;
} qopts;

/* Runs specs (NULL-terminated) with a view; returns the rendered tree (static buffer). */
static const char *runq(cn_agg_profile *p, const qopts *o, const char *const *specs,
                        cn_agg_tree **keep)
{
    static char out[8192];
    cn_agg_transform tf[16];
    size_t n = 0;
    cn_err err = {0};
    for (; specs && specs[n]; n++)
        assert_int_equal(cn_agg_transform_parse(specs[n], &tf[n], &err), 0);
    cn_agg_query q;
    cn_agg_query_init(&q);
    q.transforms = tf;
    q.n_transforms = n;
    if (o) {
        q.view = o->view;
        q.view_func = o->func;
        q.callers_mode = o->mode;
    }
    cn_agg_tree *t = NULL;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    out[0] = 0;
    if (t->view == CN_AGG_VIEW_FUNCTIONS) {
        for (size_t i = 0; i < t->n_functions; i++) {
            char a[32], b[32], buf[128];
            fmt_num(a, sizeof(a), t->functions[i].self);
            fmt_num(b, sizeof(b), t->functions[i].total);
            snprintf(buf, sizeof(buf), "%s%s:%s/%s", i ? " " : "",
                     cn_agg_func_name(p, t->functions[i].func), a, b);
            strncat(out, buf, sizeof(out) - strlen(out) - 1);
        }
    } else {
        render(p, t, t->first_root, out, sizeof(out));
    }
    for (size_t i = 0; i < n; i++)
        cn_agg_transform_clear(&tf[i]);
    if (keep)
        *keep = t;
    else
        cn_agg_tree_free(t);
    return out;
}

#define TF(...)        ((const char *const[]){__VA_ARGS__, NULL})
#define TREE(p, specs) runq((p), NULL, (specs), NULL)

static const char *const ABC = "A;B;C;D;E 1\nA;B;C;F;G 1\nA;B;H;F;G 1\n";
static const char *const RSET = "A;B;A;B;C 1\nA;B;A;D 1\nA;B;D 1\n";
static const char *const DSET = "A;B;B;C 1\nA;B;B;B;C 1\nA;B;D 1\n";

#define BASE71    "A(3,0)[B(3,0)[C(2,0)[D(1,0)[E(1,1)] F(1,0)[G(1,1)]] H(1,0)[F(1,0)[G(1,1)]]]]"
#define FOCUS_ABC "C(2,0)[D(1,0)[E(1,1)] F(1,0)[G(1,1)]]"

/* ---- §7.1 ---------------------------------------------------------------------------- */

static void test_71_base_and_focus(void **state)
{
    cn_agg_profile *p = mk(ABC, NULL);
    assert_string_equal(TREE(p, NULL), BASE71);
    qopts fl = {.view = CN_AGG_VIEW_FUNCTIONS};
    assert_string_equal(runq(p, &fl, NULL, NULL),
                        "G:2/2 E:1/1 A:0/3 B:0/3 C:0/2 D:0/1 F:0/2 H:0/1");
    assert_string_equal(TREE(p, TF("focus:A;B;C")), FOCUS_ABC);
    assert_string_equal(TREE(p, TF("focus:A;B")),
                        "B(3,0)[C(2,0)[D(1,0)[E(1,1)] F(1,0)[G(1,1)]] H(1,0)[F(1,0)[G(1,1)]]]");
    assert_string_equal(TREE(p, TF("focus:A;B;H;F")), "F(1,0)[G(1,1)]");
    assert_string_equal(TREE(p, TF("focus:B")), "");
    /* 7.1.2 */
    assert_string_equal(TREE(p, TF("focus-inverted:G;F")),
                        "A(2,0)[B(2,0)[C(1,0)[F(1,1)] H(1,0)[F(1,1)]]]");
    qopts inv = {.view = CN_AGG_VIEW_INVERTED};
    assert_string_equal(runq(p, &inv, TF("focus-inverted:G;F"), NULL),
                        "F(2,2)[C(1,0)[B(1,0)[A(1,0)]] H(1,0)[B(1,0)[A(1,0)]]]");
    assert_string_equal(TREE(p, TF("focus-inverted:E")), "A(1,0)[B(1,0)[C(1,0)[D(1,0)[E(1,1)]]]]");
    /* 7.1.3, 7.1.4 */
    assert_string_equal(TREE(p, TF("focus-func:F")), "F(2,0)[G(2,2)]");
    assert_string_equal(TREE(p, TF("focus-func:C")), FOCUS_ABC);
    assert_string_equal(TREE(p, TF("focus-self:F")), "");
    assert_string_equal(TREE(p, TF("focus-self:G")), "G(2,2)");
    assert_string_equal(TREE(p, TF("focus-self:E")), "E(1,1)");
    cn_agg_profile_free(p);
}

static void test_71_merge_drop_collapse(void **state)
{
    cn_agg_profile *p = mk(ABC, NULL);
    /* 7.1.5, 7.1.6 */
    assert_string_equal(TREE(p, TF("merge-node:A;B;C")),
                        "A(3,0)[B(3,0)[D(1,0)[E(1,1)] F(1,0)[G(1,1)] H(1,0)[F(1,0)[G(1,1)]]]]");
    assert_string_equal(TREE(p, TF("merge-node:A;B;C;D;E")),
                        "A(3,0)[B(3,0)[C(2,0)[D(1,1) F(1,0)[G(1,1)]] H(1,0)[F(1,0)[G(1,1)]]]]");
    assert_string_equal(TREE(p, TF("merge-node:A")),
                        "B(3,0)[C(2,0)[D(1,0)[E(1,1)] F(1,0)[G(1,1)]] H(1,0)[F(1,0)[G(1,1)]]]");
    assert_string_equal(TREE(p, TF("merge-node:A;B;H;F")),
                        "A(3,0)[B(3,0)[C(2,0)[D(1,0)[E(1,1)] F(1,0)[G(1,1)]] H(1,0)[G(1,1)]]]");
    /* 7.1.7 */
    assert_string_equal(TREE(p, TF("merge:F")),
                        "A(3,0)[B(3,0)[C(2,0)[D(1,0)[E(1,1)] G(1,1)] H(1,0)[G(1,1)]]]");
    assert_string_equal(TREE(p, TF("merge:G")),
                        "A(3,0)[B(3,0)[C(2,0)[D(1,0)[E(1,1)] F(1,1)] H(1,0)[F(1,1)]]]");
    assert_string_equal(TREE(p, TF("merge:B")),
                        "A(3,0)[C(2,0)[D(1,0)[E(1,1)] F(1,0)[G(1,1)]] H(1,0)[F(1,0)[G(1,1)]]]");
    /* 7.1.8 */
    assert_string_equal(TREE(p, TF("drop:F")), "A(1,0)[B(1,0)[C(1,0)[D(1,0)[E(1,1)]]]]");
    assert_string_equal(TREE(p, TF("drop:H")),
                        "A(2,0)[B(2,0)[C(2,0)[D(1,0)[E(1,1)] F(1,0)[G(1,1)]]]]");
    /* 7.1.9, 7.1.10 */
    assert_string_equal(TREE(p, TF("collapse:C")), "A(3,0)[B(3,0)[C(2,2) H(1,0)[F(1,0)[G(1,1)]]]]");
    assert_string_equal(TREE(p, TF("collapse:F")),
                        "A(3,0)[B(3,0)[C(2,0)[D(1,0)[E(1,1)] F(1,1)] H(1,0)[F(1,1)]]]");
    assert_string_equal(TREE(p, TF("collapse-direct-rec:B")), BASE71);
    assert_string_equal(TREE(p, TF("collapse-rec:F")), BASE71);
    /* The seed operations. */
    assert_string_equal(TREE(p, TF("prune:A;B;C")), "A(3,0)[B(3,2)[H(1,0)[F(1,0)[G(1,1)]]]]");
    assert_string_equal(TREE(p, TF("hide:A;B;C")), "A(1,0)[B(1,0)[H(1,0)[F(1,0)[G(1,1)]]]]");
    assert_string_equal(TREE(p, TF("prune:A")), "");
    assert_string_equal(TREE(p, TF("prune:X;Y")), BASE71);
    /* 7.1.15: collapse-all-rec changes nothing; every node merged 1, recursions 0. */
    assert_string_equal(
        TREE(p, TF("collapse-all-rec")),
        "A(3,0|1,0)[B(3,0|1,0)[C(2,0|1,0)[D(1,0|1,0)[E(1,1|1,0)] F(1,0|1,0)[G(1,1|1,0)]] "
        "H(1,0|1,0)[F(1,0|1,0)[G(1,1|1,0)]]]]");
    /* Order matters: transforms compose. */
    assert_string_equal(TREE(p, TF("merge:F", "focus-func:G")), "G(2,2)");
    assert_string_equal(TREE(p, TF("focus-func:F", "merge:F")), "G(2,2)");
    assert_string_equal(TREE(p, TF("merge:C", "merge-node:A;B;D")),
                        "A(3,0)[B(3,0)[E(1,1) F(1,0)[G(1,1)] H(1,0)[F(1,0)[G(1,1)]]]]");
    cn_agg_profile_free(p);
}

static void test_71_libs(void **state)
{
    cn_agg_profile *p = mk(ABC, "A=other,B=other,H=other,C=js,D=js,F=js,E=gc,G=gc");
    assert_string_equal(TREE(p, TF("focus-lib:js")), "C(2,0)[D(1,1) F(1,1)] F(1,1)");
    assert_string_equal(TREE(p, TF("focus-lib:other")), "A(3,0)[B(3,2)[H(1,1)]]");
    assert_string_equal(TREE(p, TF("focus-lib:nothing")), "");
    cn_agg_profile_free(p);
    p = mk(ABC, "C=libX,D=libX");
    assert_string_equal(TREE(p, TF("collapse-lib:libX")),
                        "A(3,0)[B(3,0)[libX(2,0)[E(1,1) F(1,0)[G(1,1)]] H(1,0)[F(1,0)[G(1,1)]]]]");
    /* The synthetic func is named after the library: later transforms can use it. */
    assert_string_equal(TREE(p, TF("collapse-lib:libX", "merge:libX")),
                        "A(3,0)[B(3,0)[E(1,1) F(1,0)[G(1,1)] H(1,0)[F(1,0)[G(1,1)]]]]");
    cn_agg_profile_free(p);
    p = mk(ABC, "C=libX,F=libX,G=libX");
    assert_string_equal(TREE(p, TF("collapse-lib:libX")),
                        "A(3,0)[B(3,0)[libX(2,1)[D(1,0)[E(1,1)]] H(1,0)[libX(1,1)]]]");
    cn_agg_profile_free(p);
}

static void test_71_views(void **state)
{
    cn_agg_profile *p = mk(ABC, NULL);
    cn_agg_tree *t = NULL;
    qopts inv = {.view = CN_AGG_VIEW_INVERTED};
    assert_string_equal(runq(p, &inv, NULL, NULL),
                        "G(2,2)[F(2,0)[C(1,0)[B(1,0)[A(1,0)]] H(1,0)[B(1,0)[A(1,0)]]]] "
                        "E(1,1)[D(1,0)[C(1,0)[B(1,0)[A(1,0)]]]]");
    qopts ce = {.view = CN_AGG_VIEW_CALLEES, .func = "F"};
    assert_string_equal(runq(p, &ce, NULL, &t), "F(2,0)[G(2,2)]");
    assert_int_equal(t->call_sites, 2);
    assert_true(t->total == 3);
    t = cn_agg_tree_free(t);
    ce.func = "C";
    assert_string_equal(runq(p, &ce, NULL, &t), FOCUS_ABC);
    assert_int_equal(t->call_sites, 1);
    t = cn_agg_tree_free(t);
    qopts ca = {.view = CN_AGG_VIEW_CALLERS, .func = "F"};
    assert_string_equal(runq(p, &ca, NULL, NULL),
                        "F(2,0)[C(1,0)[B(1,0)[A(1,0)]] H(1,0)[B(1,0)[A(1,0)]]]");
    ca.mode = CN_AGG_CALLERS_SELF;
    assert_string_equal(runq(p, &ca, NULL, NULL), "");
    ca.func = "G";
    assert_string_equal(runq(p, &ca, NULL, NULL),
                        "G(2,0)[F(2,0)[C(1,0)[B(1,0)[A(1,0)]] H(1,0)[B(1,0)[A(1,0)]]]]");
    ca.mode = CN_AGG_CALLERS_TOTAL;
    assert_string_equal(runq(p, &ca, NULL, NULL),
                        "G(2,0)[F(2,0)[C(1,0)[B(1,0)[A(1,0)]] H(1,0)[B(1,0)[A(1,0)]]]]");
    ca.func = "nosuch";
    assert_string_equal(runq(p, &ca, NULL, &t), "");
    assert_true(t->total == 3); /* total is the same whatever the view */
    cn_agg_tree_free(t);
    cn_agg_profile_free(p);
}

/* ---- §7.2 and §7.3 ---------------------------------------------------------------------- */

static void test_72_recursion(void **state)
{
    cn_agg_profile *p = mk(RSET, NULL);
    const char *base = "A(3,0)[B(3,0)[A(2,0)[B(1,0)[C(1,1)] D(1,1)] D(1,1)]]";
    assert_string_equal(TREE(p, NULL), base);
    qopts fl = {.view = CN_AGG_VIEW_FUNCTIONS};
    assert_string_equal(runq(p, &fl, NULL, NULL), "D:2/2 C:1/1 A:0/3 B:0/3");
    assert_string_equal(TREE(p, TF("collapse-rec:A")), "A(3,0)[B(2,0)[C(1,1) D(1,1)] D(1,1)]");
    assert_string_equal(TREE(p, TF("collapse-rec:B")),
                        "A(3,0)[B(3,0)[A(1,0)[D(1,1)] C(1,1) D(1,1)]]");
    assert_string_equal(TREE(p, TF("collapse-direct-rec:A")), base);
    assert_string_equal(TREE(p, TF("collapse-direct-rec:B")), base);
    assert_string_equal(TREE(p, TF("focus-func:A")), base);
    const char *fb = "B(3,0)[A(2,0)[B(1,0)[C(1,1)] D(1,1)] D(1,1)]";
    assert_string_equal(TREE(p, TF("focus-func:B")), fb);
    assert_string_equal(TREE(p, TF("merge:A")), "B(3,0)[D(2,2) B(1,0)[C(1,1)]]");
    assert_string_equal(TREE(p, TF("merge-node:A;B;A")), "A(3,0)[B(3,0)[D(2,2) B(1,0)[C(1,1)]]]");
    assert_string_equal(TREE(p, TF("collapse:B")), "A(3,0)[B(3,3)]");
    assert_string_equal(TREE(p, TF("focus-self:D")), "D(2,2)");
    assert_string_equal(TREE(p, TF("drop:C")), "A(2,0)[B(2,0)[A(1,0)[D(1,1)] D(1,1)]]");
    qopts inv = {.view = CN_AGG_VIEW_INVERTED};
    assert_string_equal(runq(p, &inv, NULL, NULL), "D(2,2)[A(1,0)[B(1,0)[A(1,0)]] B(1,0)[A(1,0)]] "
                                                   "C(1,1)[B(1,0)[A(1,0)[B(1,0)[A(1,0)]]]]");
    /* 7.2.8 JProfiler */
    assert_string_equal(TREE(p, TF("collapse-all-rec")),
                        "A(3,0|2,1)[B(2,0|2,1)[C(1,1|1,0) D(1,1|1,0)] D(1,1|1,0)]");
    cn_agg_tree *t = NULL;
    qopts ce = {.view = CN_AGG_VIEW_CALLEES, .func = "B"};
    assert_string_equal(runq(p, &ce, NULL, &t), fb);
    assert_int_equal(t->call_sites, 1);
    t = cn_agg_tree_free(t);
    qopts ca = {.view = CN_AGG_VIEW_CALLERS, .func = "B"};
    assert_string_equal(runq(p, &ca, NULL, NULL), "B(3,0)[A(3,0)]");
    ca.func = "D";
    const char *cd = "D(2,0)[A(1,0)[B(1,0)[A(1,0)]] B(1,0)[A(1,0)]]";
    assert_string_equal(runq(p, &ca, NULL, NULL), cd);
    ca.mode = CN_AGG_CALLERS_SELF;
    assert_string_equal(runq(p, &ca, NULL, NULL), cd);
    ca.mode = CN_AGG_CALLERS_TOTAL;
    ca.func = "A";
    assert_string_equal(runq(p, &ca, NULL, NULL), "A(3,0)");
    cn_agg_profile_free(p);
}

static void test_73_direct_recursion(void **state)
{
    cn_agg_profile *p = mk(DSET, NULL);
    assert_string_equal(TREE(p, NULL), "A(3,0)[B(3,0)[B(2,0)[B(1,0)[C(1,1)] C(1,1)] D(1,1)]]");
    assert_string_equal(TREE(p, TF("collapse-direct-rec:B")), "A(3,0)[B(3,0)[C(2,2) D(1,1)]]");
    assert_string_equal(TREE(p, TF("collapse-rec:B")), "A(3,0)[B(3,0)[C(2,2) D(1,1)]]");
    assert_string_equal(TREE(p, TF("merge-node:A;B;B")),
                        "A(3,0)[B(3,0)[B(1,0)[C(1,1)] C(1,1) D(1,1)]]");
    assert_string_equal(TREE(p, TF("merge:B")), "A(3,0)[C(2,2) D(1,1)]");
    assert_string_equal(TREE(p, TF("focus-func:B")),
                        "B(3,0)[B(2,0)[B(1,0)[C(1,1)] C(1,1)] D(1,1)]");
    assert_string_equal(TREE(p, TF("focus:A;B;B")), "B(2,0)[B(1,0)[C(1,1)] C(1,1)]");
    assert_string_equal(TREE(p, TF("collapse:B")), "A(3,0)[B(3,3)]");
    qopts inv = {.view = CN_AGG_VIEW_INVERTED};
    assert_string_equal(runq(p, &inv, NULL, NULL),
                        "C(2,2)[B(2,0)[B(2,0)[A(1,0) B(1,0)[A(1,0)]]]] D(1,1)[B(1,0)[A(1,0)]]");
    assert_string_equal(TREE(p, TF("collapse-all-rec")),
                        "A(3,0|1,0)[B(3,0|3,2)[C(2,2|2,0) D(1,1|1,0)]]");
    qopts fl = {.view = CN_AGG_VIEW_FUNCTIONS};
    assert_string_equal(runq(p, &fl, NULL, NULL), "C:2/2 D:1/1 A:0/3 B:0/3");
    cn_agg_profile_free(p);
    /* §1.7's example: recursion counted once per sample. */
    p = mk("A;B;A 1\nA;B 1\nB;B 1\n", NULL);
    assert_string_equal(runq(p, &fl, NULL, NULL), "B:2/3 A:1/2");
    cn_agg_profile_free(p);
}

/* ---- §2 edge cases ------------------------------------------------------------------- */

static void test_edge_cases(void **state)
{
    /* Empty profile. */
    cn_agg_profile *p = cn_agg_profile_new();
    cn_agg_tree *t = NULL;
    assert_string_equal(runq(p, NULL, TF("merge:X", "collapse-all-rec"), &t), "");
    assert_int_equal(t->first_root, -1);
    assert_true(t->total == 0);
    t = cn_agg_tree_free(t);
    qopts views[] = {{.view = CN_AGG_VIEW_INVERTED},
                     {.view = CN_AGG_VIEW_CALLEES, .func = "X"},
                     {.view = CN_AGG_VIEW_CALLERS, .func = "X"},
                     {.view = CN_AGG_VIEW_FUNCTIONS}};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(runq(p, &views[i], NULL, NULL), "");
    cn_agg_profile_free(p);
    /* One sample; merging the only (root) node drops it; merging a leaf charges its
     * caller. */
    p = mk("A;B 1\n", NULL);
    assert_string_equal(TREE(p, NULL), "A(1,0)[B(1,1)]");
    assert_string_equal(TREE(p, TF("merge-node:A;B")), "A(1,1)");
    assert_string_equal(TREE(p, TF("merge-node:A", "merge-node:B")), "");
    assert_string_equal(TREE(p, TF("merge:A", "merge:B")), "");
    cn_agg_profile_free(p);
    /* A root whose samples have their leaf at the root: merging it drops them. */
    p = mk("F 2\nF;F 1\nF;G 1\n", NULL);
    assert_string_equal(TREE(p, TF("merge:F")), "G(1,1)");
    assert_string_equal(TREE(p, TF("merge-node:F")), "F(1,1) G(1,1)");
    cn_agg_profile_free(p);
    /* Weighted and negative (differential) weights. A node whose total is 0 but has shown
     * children is kept; zero leaves are not. */
    p = mk("A;B 2.5\nA;C -2.5\nA;D 0\nE 1.5\n", NULL);
    assert_string_equal(TREE(p, NULL), "E(1.5,1.5) A(0,0)[B(2.5,2.5) C(-2.5,-2.5)]");
    qopts inv = {.view = CN_AGG_VIEW_INVERTED};
    assert_string_equal(runq(p, &inv, NULL, NULL),
                        "B(2.5,2.5)[A(2.5,0)] C(-2.5,-2.5)[A(-2.5,0)] E(1.5,1.5)");
    cn_agg_profile_free(p);
    /* A function at several depths; collapse-rec with indirect recursion in between. */
    p = mk("A;B;C;A;C;D 1\n", NULL);
    assert_string_equal(TREE(p, TF("collapse-rec:C")), "A(1,0)[B(1,0)[C(1,0)[D(1,1)]]]");
    assert_string_equal(TREE(p, TF("collapse-rec:A")), "A(1,0)[C(1,0)[D(1,1)]]");
    assert_string_equal(TREE(p, TF("collapse-all-rec")), "A(1,0|2,1)[C(1,0|1,1)[D(1,1|1,0)]]");
    /* A second collapse counts over its own input (no recursion left): 1 and 0 (§6.1). */
    assert_string_equal(TREE(p, TF("collapse-all-rec", "collapse-all-rec")),
                        "A(1,0|1,0)[C(1,0|1,0)[D(1,1|1,0)]]");
    cn_agg_profile_free(p);
    /* Two funcs sharing a displayed name (different libraries) are separate nodes but one
     * transform argument matches both. */
    p = cn_agg_profile_new();
    int32_t l1 = cn_agg_resource(p, "l1", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t l2 = cn_agg_resource(p, "l2", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t fa = cn_agg_func(p, "main", l1, NULL, 0), f1 = cn_agg_func(p, "f", l1, NULL, 0);
    int32_t f2 = cn_agg_func(p, "f", l2, NULL, 0), g = cn_agg_func(p, "g", l2, NULL, 0);
    int32_t fr[4] = {cn_agg_frame(p, fa, l1, -1, 0), cn_agg_frame(p, f1, l1, -1, 0),
                     cn_agg_frame(p, f2, l2, -1, 0), cn_agg_frame(p, g, l2, -1, 0)};
    int32_t s1 = cn_agg_stack_from_frames(p, (int32_t[]){fr[0], fr[1], fr[3]}, 3);
    int32_t s2 = cn_agg_stack_from_frames(p, (int32_t[]){fr[0], fr[2], fr[3]}, 3);
    cn_agg_add_sample(p, s1, 0, 1, -1);
    cn_agg_add_sample(p, s2, 1, 1, -1);
    assert_string_equal(TREE(p, NULL), "main(2,0)[f(1,0)[g(1,1)] f(1,0)[g(1,1)]]");
    assert_string_equal(TREE(p, TF("merge:f")), "main(2,0)[g(2,2)]");
    cn_agg_profile_free(p);
}

/* ---- query features: time range, threads, group-by, retention -------------------------- */

static void test_query_filters(void **state)
{
    cn_agg_profile *p = cn_agg_profile_new();
    int32_t res = cn_agg_resource(p, "app", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t fa = cn_agg_func(p, "A", res, NULL, 0), fb = cn_agg_func(p, "B", res, NULL, 0);
    int32_t sa = cn_agg_stack(p, -1, cn_agg_frame(p, fa, res, -1, 0));
    int32_t sb = cn_agg_stack(p, sa, cn_agg_frame(p, fb, res, -1, 0));
    int32_t t1 = cn_agg_thread(p, 10, 10, "app"), t2 = cn_agg_thread(p, 10, 11, "worker");
    int32_t t3 = cn_agg_thread(p, 20, 20, "other");
    assert_int_equal(cn_agg_process_set_name(p, 10, "app"), 0);
    /* Appended out of order: the engine sorts. */
    cn_agg_add_sample(p, sb, 300, 1, t2);
    cn_agg_add_sample(p, sa, 100, 1, t1);
    cn_agg_add_sample(p, sb, 200, 1, t1);
    cn_agg_add_sample(p, sb, 400, 1, t3);
    cn_agg_add_sample(p, -1, 450, 1, t3); /* no stack: weighs nothing */
    cn_agg_query q;
    cn_agg_query_init(&q);
    cn_err err;
    cn_agg_tree *t = NULL;
    char out[512];
#define RUN(expect)                                                                                \
    do {                                                                                           \
        assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);                                    \
        out[0] = 0;                                                                                \
        render(p, t, t->first_root, out, sizeof(out));                                             \
        assert_string_equal(out, expect);                                                          \
        t = cn_agg_tree_free(t);                                                                   \
    } while (0)
    RUN("A(4,1)[B(3,3)]");
    q.from_ns = 200;
    q.to_ns = 400;
    RUN("A(2,0)[B(2,2)]");
    q.from_ns = 100;
    q.to_ns = 101;
    RUN("A(1,1)");
    q.from_ns = 500;
    q.to_ns = INT64_MAX;
    RUN("");
    cn_agg_query_init(&q);
    q.tid = 10;
    RUN("A(2,1)[B(1,1)]");
    q.tid = -1;
    q.pid = 20;
    RUN("A(1,0)[B(1,1)]");
    q.pid = -1;
    q.group_by = CN_AGG_GROUP_THREAD;
    RUN("app [10](2,0)[A(2,1)[B(1,1)]] other [20](1,0)[A(1,0)[B(1,1)]] "
        "worker [11](1,0)[A(1,0)[B(1,1)]]");
    q.group_by = CN_AGG_GROUP_PROCESS;
    RUN("app [10](3,0)[A(3,1)[B(2,2)]] other [20](1,0)[A(1,0)[B(1,1)]]");
    /* Group roots behave like funcs for transforms. */
    cn_agg_transform tf;
    assert_int_equal(cn_agg_transform_parse("focus:app [10];A", &tf, &err), 0);
    q.transforms = &tf;
    q.n_transforms = 1;
    RUN("A(3,1)[B(2,2)]");
    cn_agg_transform_clear(&tf);
    cn_agg_query_init(&q);
    /* Retention: folded samples count in all-time queries only. */
    assert_int_equal(cn_agg_fold_before(p, 250), 2);
    RUN("A(4,1)[B(3,3)]");
    q.from_ns = 0;
    RUN("A(2,0)[B(2,2)]");
    cn_agg_query_init(&q);
    q.tid = 10;
    RUN("A(2,1)[B(1,1)]");
#undef RUN
    cn_agg_profile_free(p);
}

/* --group-by state (docs/cli.md, "Modes"): a leaf [blocked] or [preempted] pseudo-frame
 * names the sample's root and goes; everything else (a pseudo-frame name inside a stack
 * included) is [running]; a stack of the pseudo-frame alone weighs on its root. */
static void test_group_by_state(void **state)
{
    cn_agg_profile *p = mk("A;B;[blocked] 30\nA;[preempted] 5\nA;B 10\n[blocked] 2\n"
                           "X;[blocked];Y 1\n",
                           NULL);
    cn_agg_query q;
    cn_agg_query_init(&q);
    q.group_by = CN_AGG_GROUP_STATE;
    cn_err err;
    cn_agg_tree *t = NULL;
    char out[512];
    const char *want = "[blocked](32,2)[A(30,0)[B(30,30)]] [running](11,0)[A(10,0)[B(10,10)] "
                       "X(1,0)[[blocked](1,0)[Y(1,1)]]] [preempted](5,0)[A(5,5)]";
#define RUN(expect)                                                                                \
    do {                                                                                           \
        assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);                                    \
        out[0] = 0;                                                                                \
        render(p, t, t->first_root, out, sizeof(out));                                             \
        assert_string_equal(out, expect);                                                          \
        t = cn_agg_tree_free(t);                                                                   \
    } while (0)
    RUN(want);
    /* The roots carry the pseudo-frames' names: dropping one drops its state. */
    cn_agg_transform tf;
    assert_int_equal(cn_agg_transform_parse("drop:[preempted]", &tf, &err), 0);
    q.transforms = &tf;
    q.n_transforms = 1;
    RUN("[blocked](32,2)[A(30,0)[B(30,30)]] [running](11,0)[A(10,0)[B(10,10)] "
        "X(1,0)[[blocked](1,0)[Y(1,1)]]]");
    cn_agg_transform_clear(&tf);
    q.transforms = NULL;
    q.n_transforms = 0;
    /* Samples folded by retention group the same way; a time range sees the rest only. */
    assert_int_equal(cn_agg_fold_before(p, 3), 3);
    RUN(want);
    q.from_ns = 3;
    RUN("[blocked](2,2) [running](1,0)[X(1,0)[[blocked](1,0)[Y(1,1)]]]");
#undef RUN
    cn_agg_profile_free(p);
}

/* ---- specs, checks and path mapping ------------------------------------------------- */

static void test_transform_specs(void **state)
{
    cn_agg_transform t;
    cn_err err;
    assert_int_equal(cn_agg_transform_parse("focus:main;run;step", &t, &err), 0);
    assert_int_equal(t.kind, CN_AGG_TF_FOCUS);
    assert_int_equal(t.path_len, 3);
    assert_string_equal(t.path[2], "step");
    char *s = cn_agg_transform_format(&t);
    assert_string_equal(s, "focus:main;run;step");
    free(s);
    cn_agg_transform c;
    assert_int_equal(cn_agg_transform_copy(&t, &c), 0);
    cn_agg_transform_clear(&t);
    assert_string_equal(c.path[1], "run");
    cn_agg_transform_clear(&c);
    /* F arguments are not split; ARG is byte for byte (split at the first ':'). */
    assert_int_equal(cn_agg_transform_parse("merge:ns::f(a;b) ", &t, &err), 0);
    assert_int_equal(t.path_len, 1);
    assert_string_equal(t.arg, "ns::f(a;b) ");
    cn_agg_transform_clear(&t);
    assert_int_equal(cn_agg_transform_parse("collapse-all-rec", &t, &err), 0);
    s = cn_agg_transform_format(&t);
    assert_string_equal(s, "collapse-all-rec");
    free(s);
    cn_agg_transform_clear(&t);
    const char *bad[] = {"nosuch:x", "merge", "merge:", "focus:a;;b", "collapse-all-rec:x", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        err.msg[0] = 0;
        assert_int_equal(cn_agg_transform_parse(bad[i], &t, &err), -EINVAL);
        assert_non_null(strstr(err.msg, bad[i]));
    }
    for (int k = 0; k < CN_AGG_TF__COUNT; k++) {
        assert_non_null(cn_agg_tf_name((cn_agg_tf_kind)k));
        char spec[64];
        snprintf(spec, sizeof(spec), "%s%s", cn_agg_tf_name((cn_agg_tf_kind)k),
                 k == CN_AGG_TF_COLLAPSE_ALL_REC ? "" : ":x");
        assert_int_equal(cn_agg_transform_parse(spec, &t, &err), 0);
        assert_int_equal(t.kind, k);
        cn_agg_transform_clear(&t);
    }
    assert_true(cn_agg_tf_takes_path(CN_AGG_TF_PRUNE));
    assert_false(cn_agg_tf_takes_path(CN_AGG_TF_MERGE));
    /* Checks against the untransformed profile. */
    cn_agg_profile *p = mk(ABC, "C=libX");
    const char *ok[] = {"merge:F", "focus-lib:libX", "focus:X;Y", "collapse-all-rec"};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(cn_agg_transform_parse(ok[i], &t, &err), 0);
        assert_int_equal(cn_agg_transform_check(p, &t, &err), 0);
        cn_agg_transform_clear(&t);
    }
    const char *unknown[] = {"merge:Q", "collapse-lib:libY", "drop:libX"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(cn_agg_transform_parse(unknown[i], &t, &err), 0);
        assert_int_equal(cn_agg_transform_check(p, &t, &err), -ENOENT);
        assert_non_null(strstr(err.msg, unknown[i]));
        cn_agg_transform_clear(&t);
    }
    cn_agg_profile_free(p);
}

/* Maps "A;B;C" through spec and returns the result joined with ';'. */
static const char *mp(const char *spec, const char *path)
{
    static char out[256];
    cn_agg_transform t;
    cn_err err;
    assert_int_equal(cn_agg_transform_parse(spec, &t, &err), 0);
    char *copy = strdup(path), *v[32], *save = NULL;
    size_t n = 0;
    for (char *s = strtok_r(copy, ";", &save); s; s = strtok_r(NULL, ";", &save))
        v[n++] = s;
    char **o = NULL;
    size_t on = 0;
    assert_int_equal(cn_agg_map_path(&t, v, n, &o, &on), 0);
    out[0] = 0;
    for (size_t i = 0; i < on; i++) {
        if (i)
            strcat(out, ";");
        strcat(out, o[i]);
        free(o[i]);
    }
    free(o);
    free(copy);
    cn_agg_transform_clear(&t);
    return out;
}

static void test_map_path(void **state)
{
    assert_string_equal(mp("focus:A;B;C", "A;B;C;D;E"), "C;D;E");
    assert_string_equal(mp("focus:A;B;C", "A;B;H"), "");
    assert_string_equal(mp("focus:A;B;C", "A;B"), "");
    assert_string_equal(mp("focus-inverted:G;F", "G;F;C"), "F;C");
    assert_string_equal(mp("focus-func:F", "A;B;H;F;G"), "F;G");
    assert_string_equal(mp("focus-func:F", "A;B;C;D"), "");
    assert_string_equal(mp("focus-self:F", "A;F;G"), "F");
    assert_string_equal(mp("focus-self:F", "A;G"), "");
    assert_string_equal(mp("merge-node:A;B;C", "A;B;C;D;E"), "A;B;D;E");
    assert_string_equal(mp("merge-node:A;B;C", "A;B;H"), "A;B;H");
    assert_string_equal(mp("merge:F", "A;F;B;F;C"), "A;B;C");
    assert_string_equal(mp("drop:F", "A;B;C;F"), "");
    assert_string_equal(mp("drop:F", "A;B;C;D"), "A;B;C;D");
    assert_string_equal(mp("hide:A;B", "A;B;C"), "");
    assert_string_equal(mp("hide:A;B", "A;C"), "A;C");
    assert_string_equal(mp("prune:A;B;C", "A;B;C;D"), "A;B");
    assert_string_equal(mp("prune:A", "A;B"), "");
    assert_string_equal(mp("prune:A;B;C", "A;B;H"), "A;B;H");
    assert_string_equal(mp("collapse:C", "A;B;C;D;E"), "A;B;C");
    assert_string_equal(mp("collapse-direct-rec:B", "A;B;B;B;C"), "A;B;C");
    assert_string_equal(mp("collapse-rec:A", "A;B;A;B;C"), "A;B;C");
    assert_string_equal(mp("collapse-rec:A", "A;B;A;D"), "A;D");
    assert_string_equal(mp("collapse-all-rec", "A;B;C;A;C;D"), "A;C;D");
    assert_string_equal(mp("collapse-all-rec", "A;B;A;B;C"), "A;B;C");
}

/* ---- symbolication (§4.4, §4.5) -------------------------------------------------------- */

static int32_t native_stack(cn_agg_profile *p, int32_t res, const uint64_t *root_first, size_t n)
{
    cn_agg_frame_ref refs[16];
    for (size_t i = 0; i < n; i++)
        refs[n - 1 - i] = (cn_agg_frame_ref){.resource = res, .offset = root_first[i]};
    return cn_agg_stack_from_refs(p, refs, n);
}

static void test_symbolication_44(void **state)
{
    cn_agg_profile *p = cn_agg_profile_new();
    int32_t L = cn_agg_resource(p, "L", "build-id-1", "/x/L", CN_AGG_RES_LIBRARY);
    int32_t th = cn_agg_thread(p, 1, 1, "t");
    cn_agg_add_sample(p, native_stack(p, L, (uint64_t[]){0x10, 0x40, 0x80}, 3), 0, 1, th);
    cn_agg_add_sample(p, native_stack(p, L, (uint64_t[]){0x14, 0x48, 0x80}, 3), 1, 1, th);
    cn_agg_add_sample(p, native_stack(p, L, (uint64_t[]){0x10, 0x48}, 2), 2, 1, th);
    assert_string_equal(TREE(p, NULL), "L+0x10(2,0)[L+0x40(1,0)[L+0x80(1,1)] L+0x48(1,1)] "
                                       "L+0x14(1,0)[L+0x48(1,0)[L+0x80(1,1)]]");
    cn_agg_transform held;
    cn_err err;
    assert_int_equal(cn_agg_transform_parse("focus:L+0x14;L+0x48;L+0x80", &held, &err), 0);
    cn_agg_symbol mainsym = {"main", "m.c", 1}, work = {"work", "m.c", 5},
                  leaf = {"leaf", "m.c", 9};
    cn_agg_frame_symbols batch[5];
    assert_int_equal(cn_agg_frame_count(p), 5);
    for (int32_t f = 0; f < 5; f++) {
        int64_t a = cn_agg_frame_address(p, f);
        const cn_agg_symbol *sym = a >= 0x80 ? &leaf : a >= 0x40 ? &work : &mainsym;
        batch[f] = (cn_agg_frame_symbols){.frame = f, .chain = sym, .depth = 1};
    }
    assert_int_equal(cn_agg_regroup(p, batch, 5), 0);
    assert_string_equal(TREE(p, NULL), "main(3,0)[work(3,1)[leaf(2,2)]]");
    assert_int_equal(cn_agg_remap_transform(p, &held), 1);
    assert_string_equal(held.arg, "main;work;leaf");
    assert_int_equal(cn_agg_remap_transform(p, &held), 0);
    cn_agg_query q;
    cn_agg_query_init(&q);
    q.transforms = &held;
    q.n_transforms = 1;
    cn_agg_tree *t = NULL;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    char out[256] = "";
    render(p, t, t->first_root, out, sizeof(out));
    assert_string_equal(out, "leaf(2,2)");
    cn_agg_tree_free(t);
    cn_agg_transform_clear(&held);
    cn_agg_profile_free(p);
}

static void test_symbolication_45(void **state)
{
    cn_agg_profile *p = cn_agg_profile_new();
    int32_t L = cn_agg_resource(p, "app", "bid", "/bin/app", CN_AGG_RES_LIBRARY);
    int32_t th = cn_agg_thread(p, 1, 1, "t");
    const uint64_t st[5][2] = {{0x02}, {0x03, 0x11}, {0x06, 0x15}, {0x08}, {0x09, 0x11}};
    const size_t len[5] = {1, 2, 2, 1, 2};
    for (int i = 0; i < 5; i++)
        cn_agg_add_sample(p, native_stack(p, L, st[i], len[i]), i, 1, th);
    assert_string_equal(TREE(p, NULL), "app+0x2(1,1) app+0x3(1,0)[app+0x11(1,1)] "
                                       "app+0x6(1,0)[app+0x15(1,1)] app+0x8(1,1) "
                                       "app+0x9(1,0)[app+0x11(1,1)]");
    cn_agg_transform held;
    cn_err err;
    assert_int_equal(cn_agg_transform_parse("focus:app+0x9;app+0x11", &held, &err), 0);
    /* A frame belongs to the func with the highest start <= its address. */
    cn_agg_symbol m = {"main", "p.c", 3}, d = {"doSomething", "p.c", 20},
                  s = {"someInterlude", "p.c", 30};
    cn_agg_frame_symbols batch[8];
    size_t n = 0;
    for (int32_t f = 0; f < (int32_t)cn_agg_frame_count(p); f++) {
        int64_t a = cn_agg_frame_address(p, f);
        const cn_agg_symbol *sym = a >= 0x14 ? &s : a >= 0x0f ? &d : &m;
        batch[n++] = (cn_agg_frame_symbols){.frame = f, .chain = sym, .depth = 1};
    }
    assert_int_equal(cn_agg_regroup(p, batch, n), 0);
    assert_string_equal(TREE(p, NULL), "main(5,2)[doSomething(2,2) someInterlude(1,1)]");
    assert_int_equal(cn_agg_remap_transform(p, &held), 1);
    assert_string_equal(held.arg, "main;doSomething");
    cn_agg_transform_clear(&held);
    /* Per-address self weight inside main: 0x02 and 0x08. */
    cn_agg_query q;
    cn_agg_query_init(&q);
    cn_agg_line_row *lines = NULL, *addrs = NULL;
    size_t nl = 0, na = 0;
    assert_int_equal(cn_agg_lines(p, &q, "main", &lines, &nl, &addrs, &na, &err), 0);
    assert_int_equal(na, 2);
    assert_int_equal(addrs[0].key, 0x02);
    assert_int_equal(addrs[1].key, 0x08);
    assert_true(addrs[0].self == 1 && addrs[1].self == 1);
    assert_int_equal(nl, 1); /* every frame of main got line 3 */
    assert_true(lines[0].key == 3 && lines[0].self == 2);
    free(lines);
    free(addrs);
    assert_int_equal(cn_agg_lines(p, &q, "nosuch", &lines, &nl, &addrs, &na, &err), -ENOENT);
    cn_agg_profile_free(p);
}

/* --no-inline (§4.5): a frame whose chain is [outer, inl1, inl2] is the call nodes outer →
 * inl1 → inl2 by default and outer alone with no_inline, in every view, with transforms,
 * for lines, and the cached and uncached tables do not mix. */
static void test_no_inline(void **state)
{
    cn_agg_profile *p = cn_agg_profile_new();
    int32_t L = cn_agg_resource(p, "libm.so.6", "bid-m", "/x/libm.so.6", CN_AGG_RES_LIBRARY);
    int32_t th = cn_agg_thread(p, 1, 1, "t");
    cn_agg_add_sample(p, native_stack(p, L, (uint64_t[]){0x10, 0x80}, 2), 0, 2, th);
    cn_agg_add_sample(p, native_stack(p, L, (uint64_t[]){0x10, 0x90}, 2), 1, 1, th);
    cn_agg_symbol mainsym = {"main", "m.c", 3};
    cn_agg_symbol chain[3] = {{"outer", "s.c", 10}, {"inl1", "s.c", 20}, {"inl2", "s.c", 30}};
    cn_agg_frame_symbols batch[3];
    for (int32_t f = 0; f < 3; f++) {
        int64_t a = cn_agg_frame_address(p, f);
        batch[f] = a == 0x80   ? (cn_agg_frame_symbols){f, chain, 3, NULL}
                   : a == 0x90 ? (cn_agg_frame_symbols){f, chain, 1, NULL}
                               : (cn_agg_frame_symbols){f, &mainsym, 1, NULL};
    }
    assert_int_equal(cn_agg_regroup(p, batch, 3), 0);
    assert_string_equal(TREE(p, NULL), "main(3,0)[outer(3,1)[inl1(2,0)[inl2(2,2)]]]");
    cn_agg_query q;
    cn_agg_query_init(&q);
    q.no_inline = true;
    cn_agg_tree *t = NULL;
    cn_err err = {0};
    char out[512];
    for (int round = 0; round < 2; round++) { /* twice: the cache must not serve it */
        assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
        out[0] = 0;
        render(p, t, t->first_root, out, sizeof(out));
        assert_string_equal(out, "main(3,0)[outer(3,3)]");
        t = cn_agg_tree_free(t);
        assert_string_equal(TREE(p, NULL), "main(3,0)[outer(3,1)[inl1(2,0)[inl2(2,2)]]]");
    }
    q.view = CN_AGG_VIEW_FUNCTIONS;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    assert_int_equal(t->n_functions, 2);
    assert_string_equal(cn_agg_func_name(p, t->functions[0].func), "outer");
    assert_true(t->functions[0].self == 3);
    t = cn_agg_tree_free(t);
    q.view = CN_AGG_VIEW_INVERTED;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    out[0] = 0;
    render(p, t, t->first_root, out, sizeof(out));
    assert_string_equal(out, "outer(3,3)[main(3,0)]");
    t = cn_agg_tree_free(t);
    /* a transform on the folded table */
    cn_agg_transform tf;
    assert_int_equal(cn_agg_transform_parse("merge:main", &tf, &err), 0);
    q.view = CN_AGG_VIEW_TREE;
    q.transforms = &tf;
    q.n_transforms = 1;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    out[0] = 0;
    render(p, t, t->first_root, out, sizeof(out));
    assert_string_equal(out, "outer(3,3)");
    t = cn_agg_tree_free(t);
    cn_agg_transform_clear(&tf);
    q.transforms = NULL;
    q.n_transforms = 0;
    /* lines: outer's samples include the inlined ones with no_inline, not without */
    cn_agg_line_row *lines = NULL, *addrs = NULL;
    size_t nl = 0, na = 0;
    assert_int_equal(cn_agg_lines(p, &q, "outer", &lines, &nl, &addrs, &na, &err), 0);
    assert_int_equal(na, 2);
    assert_true(addrs[0].key == 0x80 && addrs[0].self == 2);
    assert_true(addrs[1].key == 0x90 && addrs[1].self == 1);
    free(lines);
    free(addrs);
    q.no_inline = false;
    assert_int_equal(cn_agg_lines(p, &q, "outer", &lines, &nl, &addrs, &na, &err), 0);
    assert_int_equal(na, 1);
    assert_true(addrs[0].key == 0x90 && addrs[0].self == 1);
    free(lines);
    free(addrs);
    q.no_inline = true;
    assert_int_equal(cn_agg_lines(p, &q, "inl2", &lines, &nl, &addrs, &na, &err), 0);
    assert_int_equal(na, 0);
    free(lines);
    free(addrs);
    cn_agg_profile_free(p);
}

/* ---- timeline ---------------------------------------------------------------------------- */

static void test_timeline(void **state)
{
    /* §7.5.4-like: samples a, a, b(under a), b at 100..400; then the 7.1.16 shape. */
    cn_agg_profile *p = mk(ABC, NULL);
    cn_agg_query q;
    cn_agg_query_init(&q);
    cn_agg_call *calls = NULL;
    size_t n = 0;
    cn_err err;
    assert_int_equal(cn_agg_timeline(p, &q, &calls, &n, &err), 0);
    /* Samples at t = 0, 1, 2 (7.1.16 without trace events, shifted by -1 ms): A [0,2),
     * B [0,2), C [0,2), D [0,1), E [0,1), F [1,2), G [1,2), H [2,2), F, G at 2. */
    const char *expect[] = {"A 0 0 2", "B 1 0 2", "C 2 0 2", "D 3 0 1", "E 4 0 1",
                            "F 3 1 1", "G 4 1 1", "H 2 2 0", "F 3 2 0", "G 4 2 0"};
    assert_int_equal(n, 10);
    for (size_t i = 0; i < n; i++) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%s %d %lld %lld", cn_agg_func_name(p, calls[i].func),
                 calls[i].depth, (long long)calls[i].start_ns, (long long)calls[i].dur_ns);
        assert_string_equal(buf, expect[i]);
        assert_int_equal(calls[i].tid, 1);
    }
    free(calls);
    /* With focus-func:F the sample at 0 is dropped; F and G open at 1 and are still shown
     * by the last sample (2), so they end there. */
    cn_agg_transform tf;
    assert_int_equal(cn_agg_transform_parse("focus-func:F", &tf, &err), 0);
    q.transforms = &tf;
    q.n_transforms = 1;
    assert_int_equal(cn_agg_timeline(p, &q, &calls, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_true(calls[0].start_ns == 1 && calls[0].dur_ns == 1 && calls[0].depth == 0);
    assert_true(calls[1].start_ns == 1 && calls[1].dur_ns == 1 && calls[1].depth == 1);
    free(calls);
    cn_agg_transform_clear(&tf);
    cn_agg_profile_free(p);

    /* Two interleaved threads are estimated separately; a sample without a stack ends
     * every open call of its thread; --tid keeps one thread. */
    p = cn_agg_profile_new();
    int32_t res = cn_agg_resource(p, "app", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t fa = cn_agg_func(p, "A", res, NULL, 0), fb = cn_agg_func(p, "B", res, NULL, 0);
    int32_t sa = cn_agg_stack(p, -1, cn_agg_frame(p, fa, res, -1, 0));
    int32_t sb = cn_agg_stack(p, sa, cn_agg_frame(p, fb, res, -1, 0));
    int32_t t1 = cn_agg_thread(p, 5, 5, "one"), t2 = cn_agg_thread(p, 5, 6, "two");
    cn_agg_add_sample(p, sa, 10, 1, t1);
    cn_agg_add_sample(p, sb, 15, 1, t2);
    cn_agg_add_sample(p, sb, 20, 1, t1);
    cn_agg_add_sample(p, -1, 25, 1, t2);
    cn_agg_add_sample(p, sb, 30, 1, t1);
    cn_agg_add_sample(p, sa, 40, 1, t1);
    cn_agg_query_init(&q);
    assert_int_equal(cn_agg_timeline(p, &q, &calls, &n, &err), 0);
    /* tid 5: A [10,40), B [20,40) (ends when the sample at 40 no longer shows it);
     * tid 6: A [15,25), B [15,25). */
    assert_int_equal(n, 4);
    char got[256] = "";
    for (size_t i = 0; i < n; i++) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%s%d:%s@%lld+%lld", i ? " " : "", calls[i].tid,
                 cn_agg_func_name(p, calls[i].func), (long long)calls[i].start_ns,
                 (long long)calls[i].dur_ns);
        strcat(got, buf);
    }
    assert_string_equal(got, "5:A@10+30 5:B@20+20 6:A@15+10 6:B@15+10");
    free(calls);
    q.tid = 6;
    q.from_ns = 0;
    q.to_ns = 20;
    assert_int_equal(cn_agg_timeline(p, &q, &calls, &n, &err), 0);
    /* Only the sample at 15 remains: calls open at its time end there (duration 0). */
    assert_int_equal(n, 2);
    assert_true(calls[0].tid == 6 && calls[0].start_ns == 15 && calls[0].dur_ns == 0);
    free(calls);
    cn_agg_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_71_base_and_focus), cmocka_unit_test(test_71_merge_drop_collapse),
        cmocka_unit_test(test_71_libs),           cmocka_unit_test(test_71_views),
        cmocka_unit_test(test_72_recursion),      cmocka_unit_test(test_73_direct_recursion),
        cmocka_unit_test(test_edge_cases),        cmocka_unit_test(test_query_filters),
        cmocka_unit_test(test_group_by_state),    cmocka_unit_test(test_transform_specs),
        cmocka_unit_test(test_map_path),          cmocka_unit_test(test_symbolication_44),
        cmocka_unit_test(test_symbolication_45),  cmocka_unit_test(test_timeline),
        cmocka_unit_test(test_no_inline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
