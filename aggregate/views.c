/* views.c — from the final func-level table and per-row self weights to a cn_agg_tree.
 *
 * tree:      running = self + Σ running(children), one reverse sweep (rows are in prefix <
 *            row order); a row is shown when running != 0 or it has a shown child.
 * inverted:  the reversed-path trie of every row with self != 0 (§3.2's simple form);
 *            only roots carry self.
 * callees F: focus-func F on the final table (§6.2), plus the number of call sites.
 * callers F: total mode inserts, per outermost-F row, the reversed path from it to the
 *            root with the weight of everything below it (§6.3); self mode inserts the
 *            reversed path of each row whose func is F with its self weight (§3.3).
 *            Every self is 0.
 * functions: per func self and running, recursion counted once (§1.7) via a DFS with a
 *            per-func "on the path" counter.
 * Output: nodes numbered in table row order (a parent before its children), linked in
 * output order: children sorted by |total| descending, then name, then func id.
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "q_engine.h"

typedef struct sortctx {
    const cn_agg_profile *p;
    const int32_t *func;
    const double *run;
} sortctx;

static int row_cmp(const void *a, const void *b, void *arg)
{
    const sortctx *s = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    double ax = fabs(s->run[x]), ay = fabs(s->run[y]);
    if (ax != ay)
        return ax > ay ? -1 : 1;
    int32_t fx = s->func[x], fy = s->func[y];
    if (fx == fy)
        return x < y ? -1 : x > y;
    int c = strcmp(s->p->str[s->p->func_name[fx]], s->p->str[s->p->func_name[fy]]);
    if (c)
        return c;
    return fx < fy ? -1 : 1;
}

/* Children lists in CSR form over the rows of t that pass keep[] (NULL = all). Slot 0
 * holds the roots; the children of row r are kids[off[r + 1] .. off[r + 2]). */
typedef struct csr {
    int32_t *off;
    int32_t *kids;
} csr;

static void csr_free(csr *g)
{
    free(g->off);
    free(g->kids);
}

static int csr_build(const cn_agg__qtable *t, const uint8_t *keep, csr *g)
{
    size_t n = t->n;
    g->off = calloc(n + 3, sizeof(*g->off));
    g->kids = malloc((n ? n : 1) * sizeof(*g->kids));
    if (!g->off || !g->kids)
        return -ENOMEM;
    /* Slot of row r's children: r + 1; roots: slot 0. Count slot s at off[s + 2]. */
    for (size_t r = 0; r < n; r++)
        if (!keep || keep[r])
            g->off[t->prefix[r] + 3]++;
    for (size_t i = 1; i < n + 3; i++)
        g->off[i] += g->off[i - 1];
    /* off[s + 1] is now the start of slot s; filling advances it to the slot's end. */
    for (size_t r = 0; r < n; r++)
        if (!keep || keep[r])
            g->kids[g->off[t->prefix[r] + 2]++] = (int32_t)r;
    return 0;
}

/* Emits the shown rows of t as tree nodes. run/self per row; shown[] rows only. */
static int emit(const cn_agg_profile *p, const cn_agg__qtable *t, const double *run,
                const double *self, const uint8_t *shown, const int32_t *merged,
                const int32_t *recur, cn_agg_tree *tree)
{
    csr g = {0};
    int32_t *node_of = NULL;
    int rc = csr_build(t, shown, &g);
    if (rc < 0)
        goto out;
    size_t n = t->n;
    size_t nshown = (size_t)g.off[n + 1];
    rc = -ENOMEM;
    tree->nodes = malloc((nshown ? nshown : 1) * sizeof(*tree->nodes));
    node_of = malloc((n ? n : 1) * sizeof(*node_of));
    if (!tree->nodes || !node_of)
        goto out;
    sortctx sc = {p, t->func, run};
    for (size_t s = 0; s < n + 1; s++) {
        int32_t b = g.off[s], e = g.off[s + 1];
        if (e - b > 1)
            qsort_r(g.kids + b, (size_t)(e - b), sizeof(int32_t), row_cmp, &sc);
    }
    /* Nodes are numbered in row order (parent < child, sequential reads and writes);
     * the sorted order lives in the sibling links. */
    size_t next = 0;
    tree->first_root = -1;
    for (size_t r = 0; r < n; r++) {
        if (!shown[r])
            continue;
        int32_t id = (int32_t)next++;
        node_of[r] = id;
        cn_agg_node *nd = &tree->nodes[id];
        /* A shown row's parent is shown (the sweeps), and numbered before it. */
        assert(t->prefix[r] < (int32_t)r && (t->prefix[r] < 0 || shown[t->prefix[r]]));
        nd->func = t->func[r];
        nd->parent = t->prefix[r] < 0 ? -1 : node_of[t->prefix[r]];
        nd->first_child = -1;
        nd->next_sibling = -1;
        nd->total = run[r];
        nd->self = self ? self[r] : 0;
        nd->merged_stacks = merged ? merged[r] : 0;
        nd->recursions = recur ? recur[r] : 0;
    }
    tree->n_nodes = next;
    assert(next == nshown);
    /* Sibling links: siblings are consecutive in the sorted CSR slots. */
    for (size_t s = 0; s < n + 1; s++) {
        int32_t b = g.off[s], e = g.off[s + 1];
        int32_t prev = -1;
        for (int32_t i = b; i < e; i++) {
            int32_t id = node_of[g.kids[i]];
            if (prev < 0) {
                if (s == 0)
                    tree->first_root = id;
                else
                    tree->nodes[node_of[s - 1]].first_child = id;
            } else {
                tree->nodes[prev].next_sibling = id;
            }
            prev = id;
        }
    }
    rc = 0;
out:
    csr_free(&g);
    free(node_of);
    return rc;
}

/* running[] from self[] and the shown set (§1.4's sweep). */
static int sweep(const cn_agg__qtable *t, const double *self, double **run_out, uint8_t **shown_out)
{
    size_t n = t->n ? t->n : 1;
    double *run = malloc(n * sizeof(*run));
    uint8_t *shown = calloc(n, 1);
    if (!run || !shown) {
        free(run);
        free(shown);
        return -ENOMEM;
    }
    if (t->n)
        memcpy(run, self, t->n * sizeof(*run));
    for (size_t r = t->n; r-- > 0;) {
        if (run[r] != 0)
            shown[r] = 1;
        int32_t pre = t->prefix[r];
        assert(pre < (int32_t)r); /* the children were all summed before r is read */
        if (shown[r] && pre >= 0) {
            run[pre] += run[r];
            shown[pre] = 1;
        }
    }
#ifndef NDEBUG
    /* running = self + Σ running(children): with no negative weight, self <= running
     * exactly (adding a non-negative double never rounds below the sum so far). */
    bool nonneg = true;
    for (size_t r = 0; r < t->n && nonneg; r++)
        nonneg = self[r] >= 0;
    for (size_t r = 0; nonneg && r < t->n; r++)
        assert(self[r] <= run[r]);
#endif
    *run_out = run;
    *shown_out = shown;
    return 0;
}

/* The plain tree of (t, self). */
static int view_tree(const cn_agg_profile *p, const cn_agg__qtable *t, const double *self,
                     const int32_t *merged, const int32_t *recur, cn_agg_tree *tree)
{
    double *run = NULL;
    uint8_t *shown = NULL;
    int rc = sweep(t, self, &run, &shown);
    if (rc == 0)
        rc = emit(p, t, run, self, shown, merged, recur, tree);
    free(run);
    free(shown);
    return rc;
}

/* A trie of reversed paths with a value per node. */
typedef struct trie {
    cn_agg__qtable t;
    double *val;
    size_t cap;
} trie;

static int trie_add(trie *tr, int32_t pre, int32_t func, double w, int32_t *row)
{
    int32_t r = cn_agg__qt_intern(&tr->t, pre, func);
    if (r < 0)
        return r;
    if ((size_t)r >= tr->cap) {
        size_t old = tr->cap;
        if (CN_RESERVE(tr->val, tr->cap, (size_t)r + 1) < 0)
            return -ENOMEM;
        memset(tr->val + old, 0, (tr->cap - old) * sizeof(*tr->val));
    }
    tr->val[r] += w;
    *row = r;
    return 0;
}

/* Inserts the reversed path of row x of t (x, its caller, …, root) with weight w. */
static int trie_insert_reversed(trie *tr, const cn_agg__qtable *t, int32_t x, double w)
{
    int32_t at = -1;
    for (; x >= 0; x = t->prefix[x]) {
        int rc = trie_add(tr, at, t->func[x], w, &at);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Emits a trie; roots carry self = value when roots_self. */
static int trie_emit(const cn_agg_profile *p, trie *tr, bool roots_self, cn_agg_tree *tree)
{
    size_t n = tr->t.n ? tr->t.n : 1;
    if (CN_RESERVE(tr->val, tr->cap, n) < 0)
        return -ENOMEM;
    double *self = calloc(n, sizeof(*self));
    uint8_t *shown = calloc(n, 1);
    int rc = -ENOMEM;
    if (!self || !shown)
        goto out;
    for (size_t r = tr->t.n; r-- > 0;) {
        if (tr->val[r] != 0)
            shown[r] = 1;
        if (shown[r] && tr->t.prefix[r] >= 0)
            shown[tr->t.prefix[r]] = 1;
        if (roots_self && tr->t.prefix[r] < 0)
            self[r] = tr->val[r];
    }
    rc = emit(p, &tr->t, tr->val, self, shown, NULL, NULL, tree);
out:
    free(self);
    free(shown);
    return rc;
}

static int view_inverted(const cn_agg_profile *p, const cn_agg__qtable *t, const double *self,
                         cn_agg_tree *tree)
{
    trie tr = {0};
    int rc = 0;
    cn_agg__qt_init(&tr.t);
    for (size_t r = 0; r < t->n && rc == 0; r++)
        if (self[r] != 0)
            rc = trie_insert_reversed(&tr, t, (int32_t)r, self[r]);
    if (rc == 0)
        rc = trie_emit(p, &tr, true, tree);
    cn_agg__qt_clear(&tr.t);
    free(tr.val);
    return rc;
}

static int view_callers(const cn_agg_profile *p, const cn_agg__qtable *t, const double *self,
                        int32_t F, cn_agg_callers_mode mode, cn_agg_tree *tree)
{
    trie tr = {0};
    cn_agg__qt_init(&tr.t);
    size_t n = t->n ? t->n : 1;
    int32_t *first = malloc(n * sizeof(*first));
    double *acc = calloc(n, sizeof(*acc));
    int rc = -ENOMEM;
    if (!first || !acc)
        goto out;
    for (size_t r = 0; r < t->n; r++) {
        int32_t pre = t->prefix[r];
        bool is = p->func_name[t->func[r]] == F;
        if (mode == CN_AGG_CALLERS_SELF) {
            if (is)
                acc[r] += self[r];
            continue;
        }
        first[r] = pre >= 0 && first[pre] >= 0 ? first[pre] : (is ? (int32_t)r : -1);
        assert(first[r] <= (int32_t)r); /* r itself or an ancestor */
        if (first[r] >= 0)
            acc[first[r]] += self[r];
    }
    rc = 0;
    for (size_t r = 0; r < t->n && rc == 0; r++)
        if (acc[r] != 0)
            rc = trie_insert_reversed(&tr, t, (int32_t)r, acc[r]);
    if (rc == 0)
        rc = trie_emit(p, &tr, false, tree);
out:
    free(first);
    free(acc);
    cn_agg__qt_clear(&tr.t);
    free(tr.val);
    return rc;
}

static int view_callees(cn_agg_profile *p, const cn_agg__qtable *t, const double *self,
                        const char *fname, cn_agg_tree *tree)
{
    cn_agg__tfout o = {0};
    double *run = NULL, *self2 = NULL;
    uint8_t *shown = NULL;
    char *path[1] = {(char *)fname};
    cn_agg_transform tf = {
        .kind = CN_AGG_TF_FOCUS_FUNC, .arg = (char *)fname, .path = path, .path_len = 1};
    int rc = sweep(t, self, &run, &shown);
    if (rc < 0)
        goto out;
    /* Call sites: outermost F rows that the tree shows. */
    int32_t F = cn_agg__q_name_id(p, fname);
    for (size_t r = 0; r < t->n; r++) {
        int32_t pre = t->prefix[r];
        bool is = p->func_name[t->func[r]] == F;
        bool below = pre >= 0 && (shown[pre] & 2);
        if (is || below)
            shown[r] |= 2; /* bit 1: F on the path */
        if (is && !below && (shown[r] & 1))
            tree->call_sites++;
    }
    rc = cn_agg__tf_apply(p, t, &tf, NULL, NULL, NULL, &o);
    if (rc < 0)
        goto out;
    rc = -ENOMEM;
    self2 = calloc(o.t.n ? o.t.n : 1, sizeof(*self2));
    if (!self2)
        goto out;
    for (size_t r = 0; r < t->n; r++)
        if (o.map[r] >= 0)
            self2[o.map[r]] += self[r];
    rc = view_tree(p, &o.t, self2, NULL, NULL, tree);
out:
    cn_agg__tfout_free(&o);
    free(run);
    free(shown);
    free(self2);
    return rc;
}

typedef struct fsortctx {
    const cn_agg_profile *p;
} fsortctx;

static int func_row_cmp(const void *a, const void *b, void *arg)
{
    const cn_agg_profile *p = ((const fsortctx *)arg)->p;
    const cn_agg_func_row *x = a, *y = b;
    if (x->self != y->self)
        return x->self > y->self ? -1 : 1;
    int c = strcmp(p->str[p->func_name[x->func]], p->str[p->func_name[y->func]]);
    if (c)
        return c;
    return x->func < y->func ? -1 : x->func > y->func;
}

static int view_functions(const cn_agg_profile *p, const cn_agg__qtable *t, const double *self,
                          cn_agg_tree *tree)
{
    size_t nf = p->n_func ? p->n_func : 1;
    double *run = NULL;
    uint8_t *shown = NULL;
    double *fself = calloc(nf, sizeof(*fself)), *frun = calloc(nf, sizeof(*frun));
    int32_t *onpath = calloc(nf, sizeof(*onpath));
    int32_t *stack = malloc((t->n + 1) * 2 * sizeof(*stack));
    csr g = {0};
    int rc = -ENOMEM;
    if (!fself || !frun || !onpath || !stack)
        goto out;
    rc = sweep(t, self, &run, &shown);
    if (rc == 0)
        rc = csr_build(t, NULL, &g);
    if (rc < 0)
        goto out;
    /* DFS: an entry r >= 0 enters row r, ~r leaves it. */
    size_t sp = 0;
    for (int32_t i = g.off[1] - 1; i >= 0; i--)
        stack[sp++] = g.kids[i];
    while (sp > 0) {
        int32_t e = stack[--sp];
        if (e < 0) {
            onpath[t->func[~e]]--;
            continue;
        }
        int32_t f = t->func[e];
        fself[f] += self[e];
        if (onpath[f]++ == 0)
            frun[f] += run[e];
        stack[sp++] = ~e;
        for (int32_t i = g.off[e + 2] - 1; i >= g.off[e + 1]; i--)
            stack[sp++] = g.kids[i];
        assert(sp <= (t->n + 1) * 2); /* each row is pushed once to enter, once to leave */
    }
    size_t cnt = 0;
    for (size_t f = 0; f < p->n_func; f++)
        cnt += fself[f] != 0 || frun[f] != 0;
    tree->functions = calloc(cnt ? cnt : 1, sizeof(*tree->functions));
    if (!tree->functions) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t f = 0; f < p->n_func; f++)
        if (fself[f] != 0 || frun[f] != 0)
            tree->functions[tree->n_functions++] =
                (cn_agg_func_row){.func = (int32_t)f, .self = fself[f], .total = frun[f]};
    fsortctx fc = {p};
    qsort_r(tree->functions, tree->n_functions, sizeof(*tree->functions), func_row_cmp, &fc);
    tree->first_root = -1;
    rc = 0;
out:
    free(run);
    free(shown);
    free(fself);
    free(frun);
    free(onpath);
    free(stack);
    csr_free(&g);
    return rc;
}

int cn_agg__view_build(cn_agg_profile *p, const cn_agg_query *q, const cn_agg__qtable *t,
                       const double *self, const int32_t *merged, const int32_t *recur,
                       cn_agg_tree **out, cn_err *err)
{
    cn_agg_tree *tree = calloc(1, sizeof(*tree));
    if (!tree)
        return cn_err_set(err, -ENOMEM, "query: out of memory");
    tree->view = q->view;
    tree->callers_mode = q->callers_mode;
    tree->first_root = -1;
    for (size_t r = 0; r < t->n; r++)
        tree->total += self[r];
    int rc;
    switch (q->view) {
    case CN_AGG_VIEW_TREE:
        tree->has_recursion_counts = merged != NULL;
        rc = view_tree(p, t, self, merged, recur, tree);
        break;
    case CN_AGG_VIEW_INVERTED:
        rc = view_inverted(p, t, self, tree);
        break;
    case CN_AGG_VIEW_CALLEES:
        rc = view_callees(p, t, self, q->view_func, tree);
        break;
    case CN_AGG_VIEW_CALLERS:
        rc = view_callers(p, t, self, cn_agg__q_name_id(p, q->view_func), q->callers_mode, tree);
        break;
    case CN_AGG_VIEW_FUNCTIONS:
        rc = view_functions(p, t, self, tree);
        break;
    default:
        rc = -EINVAL;
    }
    if (rc < 0) {
        cn_agg_tree_free(tree);
        return cn_err_set(err, rc, rc == -EINVAL ? "query: unknown view" : "query: out of memory");
    }
    *out = tree;
    return 0;
}

cn_agg_tree *cn_agg_tree_free(cn_agg_tree *t)
{
    if (t) {
        free(t->nodes);
        free(t->functions);
        free(t);
    }
    return NULL;
}

const char *cn_agg_view_name(cn_agg_view v)
{
    switch (v) {
    case CN_AGG_VIEW_TREE:
        return "tree";
    case CN_AGG_VIEW_INVERTED:
        return "inverted";
    case CN_AGG_VIEW_CALLEES:
        return "callees";
    case CN_AGG_VIEW_CALLERS:
        return "callers";
    case CN_AGG_VIEW_FUNCTIONS:
        return "functions";
    }
    return "tree";
}
