/* diff.c — differential profiles: NEW − BASE per call path.
 *
 * A differential profile is an ordinary profile with two synthetic threads, "base"
 * (pid 1, tid 1) and "new" (pid 2, tid 2), and metadata diff=1 — the same tables the
 * three-column folded importer builds — so every transform and view works on it
 * unchanged. cn_agg_diff_run() runs the query once per side (thread filter), merges the
 * two trees by call path with a (parent, func) hash, scales BASE by NEW's total over
 * BASE's (normalizing) and orders children by |NEW − BASE| (docs/calltree.md §1.1 on negative
 * weights, docs/cli.md on ordering). The writers (text, JSON, three-column folded, a
 * differential flame graph) live in formats/ (cn_fmt.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agg_internal.h"

#define BASE_PID 1
#define NEW_PID  2

/* ---- walking a tree ----------------------------------------------------------------- */

/* Walks the sibling list starting at `first` and everything under it in preorder, without
 * recursion (a tree is as deep as the deepest stack: tens of thousands of levels), going
 * back up by the parent links. visit(ctx, n, depth) returns 0 to go on or a negative
 * errno that stops the walk and is returned. */
static int walk(const cn_agg_tree *t, int32_t first, int (*visit)(void *ctx, int32_t n, int depth),
                void *ctx)
{
    if (first < 0)
        return 0;
    int32_t top = t->nodes[first].parent, n = first;
    int depth = 0;
    for (;;) {
        int r = visit(ctx, n, depth);
        if (r < 0)
            return r;
        if (t->nodes[n].first_child >= 0) {
            n = t->nodes[n].first_child;
            depth++;
            continue;
        }
        while (t->nodes[n].next_sibling < 0) {
            n = t->nodes[n].parent;
            depth--;
            if (n == top)
                return 0;
        }
        n = t->nodes[n].next_sibling;
    }
}

/* ids[depth]: a per-depth id (the d stack or merged node of the node being walked at each
 * depth), grown as the walk goes deeper. */
typedef struct depth_ids {
    int32_t *ids;
    size_t cap;
} depth_ids;

/* The id recorded for depth - 1 (the parent of a node at depth), or `none` at depth 0. */
static int32_t parent_id(const depth_ids *d, int depth, int32_t none)
{
    return depth ? d->ids[depth - 1] : none;
}

static int set_id(depth_ids *d, int depth, int32_t id)
{
    if (CN_RESERVE(d->ids, d->cap, (size_t)depth + 1) < 0)
        return -ENOMEM;
    d->ids[depth] = id;
    return 0;
}

/* ---- building a differential profile --------------------------------------------- */

typedef struct builder {
    cn_agg_profile *src;
    cn_agg_profile *d;
    const cn_agg_tree *t;
    int32_t *res_map;  /* src resource -> d resource (-2 = not yet) */
    int32_t *func_map; /* src func -> d frame (-2 = not yet) */
    int32_t thread;
    double factor;      /* src weight -> d weight */
    depth_ids stack_at; /* the d stack of the node walked at each depth */
} builder;

static int32_t map_resource(builder *b, int32_t res)
{
    if (res < 0)
        return -1;
    if (b->res_map[res] == -2)
        b->res_map[res] = cn_agg_resource(
            b->d, cn_agg_resource_name(b->src, res), cn_agg_resource_identity(b->src, res),
            cn_agg_resource_path(b->src, res), cn_agg_resource_kind_of(b->src, res));
    return b->res_map[res];
}

/* The d frame standing for src func f (a frame of the copied func, no address). */
static int32_t map_func(builder *b, int32_t f)
{
    if (b->func_map[f] != -2)
        return b->func_map[f];
    int32_t res = map_resource(b, cn_agg_func_resource(b->src, f));
    if (res < -1)
        return res;
    int32_t func = cn_agg_func(b->d, cn_agg_func_name(b->src, f), res, cn_agg_func_file(b->src, f),
                               cn_agg_func_line(b->src, f));
    if (func < 0)
        return func;
    int32_t frame = cn_agg_frame(b->d, func, res, -1, 0);
    if (frame >= 0)
        b->func_map[f] = frame;
    return frame;
}

/* Copies node n (at depth, under the d stack of its parent) into d: its stack, and a
 * sample of its self weight. 0 or negative errno. */
static int copy_node(void *ctx, int32_t n, int depth)
{
    builder *b = ctx;
    const cn_agg_node *nd = &b->t->nodes[n];
    int32_t frame = map_func(b, nd->func);
    if (frame < 0)
        return frame;
    int32_t stack = cn_agg_stack(b->d, parent_id(&b->stack_at, depth, -1), frame);
    if (stack < 0)
        return stack;
    int rc = set_id(&b->stack_at, depth, stack);
    if (rc == 0 && nd->self != 0)
        rc = cn_agg_add_sample(b->d, stack, 0, nd->self * b->factor, b->thread);
    return rc < 0 ? rc : 0;
}

/* Runs q with its view replaced by the plain tree (transforms, range and filters kept). */
static int run_tree(cn_agg_profile *p, const cn_agg_query *q, cn_agg_tree **out, cn_err *err)
{
    cn_agg_query copy = *q;
    copy.view = CN_AGG_VIEW_TREE;
    if (q->view != CN_AGG_VIEW_TREE)
        copy.view_func = NULL;
    return cn_agg_query_run(p, &copy, out, err);
}

static int copy_side(cn_agg_profile *src, const cn_agg_query *q, cn_agg_profile *d, int32_t thread,
                     double factor, cn_err *err)
{
    builder b = {.src = src, .d = d, .thread = thread, .factor = factor};
    cn_agg_tree *t = NULL;
    int rc = run_tree(src, q, &t, err);
    if (rc < 0)
        return rc;
    b.t = t;
    b.res_map = malloc((src->n_res ? src->n_res : 1) * sizeof(*b.res_map));
    b.func_map = malloc((src->n_func ? src->n_func : 1) * sizeof(*b.func_map));
    if (!b.res_map || !b.func_map) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < src->n_res; i++)
        b.res_map[i] = -2;
    for (size_t i = 0; i < src->n_func; i++)
        b.func_map[i] = -2;
    rc = walk(t, t->first_root, copy_node, &b);
out:
    if (rc < 0)
        rc = cn_err_set(err, rc, "diff: %s", strerror(-rc));
    free(b.res_map);
    free(b.func_map);
    free(b.stack_at.ids);
    cn_agg_tree_free(t);
    return rc;
}

int cn_agg_diff_profile(cn_agg_profile *base, const cn_agg_query *qbase, cn_agg_profile *newp,
                        const cn_agg_query *qnew, cn_agg_profile **out, cn_err *err)
{
    if (cn_agg_profile_unit(base) != cn_agg_profile_unit(newp))
        return cn_err_set(err, -EINVAL, "diff: BASE is in %s but NEW is in %s",
                          cn_agg_unit_name(cn_agg_profile_unit(base)),
                          cn_agg_unit_name(cn_agg_profile_unit(newp)));
    if (cn_agg_is_diff(base) || cn_agg_is_diff(newp))
        return cn_err_set(err, -EINVAL, "diff: an input is already a differential profile");
    cn_agg_profile *d = cn_agg_profile_new();
    if (!d)
        return cn_err_set(err, -ENOMEM, "diff: out of memory");
    int rc = -ENOMEM;
    cn_agg_profile_set_unit(d, cn_agg_profile_unit(newp));
    cn_agg_profile_set_scale(d, cn_agg_profile_scale(newp));
    int32_t tb = cn_agg_thread(d, BASE_PID, BASE_PID, "base");
    int32_t tn = cn_agg_thread(d, NEW_PID, NEW_PID, "new");
    if (tb < 0 || tn < 0 || cn_agg_process_set_name(d, BASE_PID, "base") < 0 ||
        cn_agg_process_set_name(d, NEW_PID, "new") < 0 || cn_agg_meta_set(d, "diff", "1") < 0 ||
        cn_agg_meta_set(d, "diff.base_tid", "1") < 0 ||
        cn_agg_meta_set(d, "diff.new_tid", "2") < 0) {
        rc = cn_err_set(err, -ENOMEM, "diff: out of memory");
        goto fail;
    }
    double conv = cn_agg_profile_scale(base) / cn_agg_profile_scale(newp);
    if ((rc = copy_side(base, qbase, d, tb, isfinite(conv) ? conv : 1, err)) < 0 ||
        (rc = copy_side(newp, qnew, d, tn, 1, err)) < 0)
        goto fail;
    *out = d;
    return 0;
fail:
    cn_agg_profile_free(d);
    return rc;
}

void cn_agg_diff_sides(const cn_agg_profile *p, int32_t *base, int32_t *newt)
{
    const char *b = cn_agg_meta_get(p, "diff.base_tid"), *n = cn_agg_meta_get(p, "diff.new_tid");
    *base = b ? (int32_t)atoi(b) : BASE_PID;
    *newt = n ? (int32_t)atoi(n) : NEW_PID;
}

bool cn_agg_is_diff(const cn_agg_profile *p)
{
    const char *m = cn_agg_meta_get(p, "diff");
    if (!m || strcmp(m, "1") != 0)
        return false;
    int32_t b, n;
    cn_agg_diff_sides(p, &b, &n);
    bool hb = false, hn = false;
    for (size_t i = 0; i < cn_agg_thread_count(p); i++) {
        hb |= cn_agg_thread_tid(p, (int32_t)i) == b;
        hn |= cn_agg_thread_tid(p, (int32_t)i) == n;
    }
    return hb && hn;
}

/* ---- merging the two sides -------------------------------------------------------- */

typedef struct merger {
    const cn_agg_profile *p;
    cn_agg_node *nodes;
    cn_agg_diff_vals *vals;
    size_t n, cap, cap_vals;
    cn_u64map index; /* (parent + 1, func) -> node */
    /* merge_tree's walk: the side's tree and weights, the merged node at each depth */
    const cn_agg_tree *t;
    bool is_base;
    double factor;
    depth_ids node_at;
} merger;

static int32_t merge_node(merger *m, int32_t parent, int32_t func)
{
    uint64_t key = cn_pair(parent + 1, func);
    int32_t n = cn_u64map_get(&m->index, key);
    if (n >= 0)
        return n;
    if (CN_RESERVE(m->nodes, m->cap, m->n + 1) < 0 ||
        CN_RESERVE(m->vals, m->cap_vals, m->n + 1) < 0)
        return -ENOMEM;
    n = (int32_t)m->n++;
    m->nodes[n] =
        (cn_agg_node){.func = func, .parent = parent, .first_child = -1, .next_sibling = -1};
    memset(&m->vals[n], 0, sizeof(m->vals[n]));
    if (cn_u64map_put(&m->index, key, n) < 0)
        return -ENOMEM;
    return n;
}

/* Adds node c of one side's tree (m->t) to the merged node of its call path. Parents are
 * walked before their children, so merged nodes are created parents first (link_children
 * relies on it). 0 or -ENOMEM. */
static int merge_visit(void *ctx, int32_t c, int depth)
{
    merger *m = ctx;
    const cn_agg_node *nd = &m->t->nodes[c];
    int32_t n = merge_node(m, parent_id(&m->node_at, depth, -1), nd->func);
    if (n < 0 || set_id(&m->node_at, depth, n) < 0)
        return -ENOMEM;
    cn_agg_diff_vals *v = &m->vals[n];
    if (m->is_base) {
        v->base_total += nd->total * m->factor;
        v->base_self += nd->self * m->factor;
    } else {
        v->new_total += nd->total;
        v->new_self += nd->self;
    }
    return 0;
}

/* Merges the whole tree t of one side (BASE weights scaled by factor) into m. */
static int merge_tree(merger *m, const cn_agg_tree *t, bool is_base, double factor)
{
    m->t = t;
    m->is_base = is_base;
    m->factor = factor;
    return walk(t, t->first_root, merge_visit, m);
}

/* Sibling order: |total| descending, then name ascending. */
typedef struct sort_ctx {
    const cn_agg_profile *p;
    const cn_agg_node *nodes;
} sort_ctx;

static int cmp_nodes(const void *a, const void *b, void *ctx)
{
    const sort_ctx *s = ctx;
    const cn_agg_node *x = &s->nodes[*(const int32_t *)a], *y = &s->nodes[*(const int32_t *)b];
    double ax = fabs(x->total), ay = fabs(y->total);
    if (ax != ay)
        return ax > ay ? -1 : 1;
    int c = strcmp(cn_agg_func_name(s->p, x->func), cn_agg_func_name(s->p, y->func));
    if (c)
        return c;
    return (x->func > y->func) - (x->func < y->func);
}

/* Links children in order. Nodes were created parents first, so one pass over the
 * node list sorted by (parent, order) does it. */
static int link_children(merger *m, cn_agg_tree *t)
{
    size_t n = m->n;
    int32_t *order = malloc((n ? n : 1) * sizeof(*order));
    int32_t *count = calloc(n + 1, sizeof(*count));
    if (!order || !count) {
        free(order);
        free(count);
        return -ENOMEM;
    }
    /* bucket by parent (+1), then sort each bucket */
    for (size_t i = 0; i < n; i++)
        count[m->nodes[i].parent + 1]++;
    for (size_t i = 1; i <= n; i++)
        count[i] += count[i - 1];
    for (size_t i = n; i-- > 0;)
        order[--count[m->nodes[i].parent + 1]] = (int32_t)i;
    sort_ctx sc = {m->p, m->nodes};
    for (size_t b = 0; b <= n; b++) {
        size_t lo = (size_t)count[b], hi = b < n ? (size_t)count[b + 1] : n;
        if (hi <= lo)
            continue;
        qsort_r(order + lo, hi - lo, sizeof(*order), cmp_nodes, &sc);
        int32_t parent = (int32_t)b - 1;
        for (size_t k = lo; k < hi; k++)
            m->nodes[order[k]].next_sibling = k + 1 < hi ? order[k + 1] : -1;
        if (parent < 0)
            t->first_root = order[lo];
        else
            m->nodes[parent].first_child = order[lo];
    }
    free(order);
    free(count);
    return 0;
}

typedef struct rows_ctx {
    const cn_agg_profile *p;
    const cn_agg_func_row *rows;
} rows_ctx;

/* Function rows: |self| descending, then |total|, then name. */
static int cmp_rows(const void *a, const void *b, void *ctx)
{
    const rows_ctx *c = ctx;
    const cn_agg_func_row *x = &c->rows[*(const int32_t *)a], *y = &c->rows[*(const int32_t *)b];
    double ax = fabs(x->self), ay = fabs(y->self);
    if (ax != ay)
        return ax > ay ? -1 : 1;
    if (fabs(x->total) != fabs(y->total))
        return fabs(x->total) > fabs(y->total) ? -1 : 1;
    return strcmp(cn_agg_func_name(c->p, x->func), cn_agg_func_name(c->p, y->func));
}

/* FUNCTIONS view: the two sides' rows merged by func, then sorted. */
static int merge_functions(cn_agg_diff *r, const cn_agg_profile *p, const cn_agg_tree *tb,
                           const cn_agg_tree *tn, double factor)
{
    size_t cap = tb->n_functions + tn->n_functions + 1, nf = p->n_func ? p->n_func : 1;
    cn_agg_func_row *rows = calloc(cap, sizeof(*rows)), *out_rows = calloc(cap, sizeof(*rows));
    cn_agg_diff_vals *vals = calloc(cap, sizeof(*vals)), *out_vals = calloc(cap, sizeof(*vals));
    int32_t *row_of = malloc(nf * sizeof(*row_of)), *idx = malloc(cap * sizeof(*idx));
    int rc = -ENOMEM;
    if (!rows || !out_rows || !vals || !out_vals || !row_of || !idx)
        goto out;
    memset(row_of, 0xff, nf * sizeof(*row_of));
    size_t n = 0;
    for (int side = 0; side < 2; side++) {
        const cn_agg_tree *t = side == 0 ? tb : tn;
        double k = side == 0 ? factor : 1;
        for (size_t i = 0; i < t->n_functions; i++) {
            int32_t f = t->functions[i].func;
            if (row_of[f] < 0) {
                row_of[f] = (int32_t)n;
                rows[n++].func = f;
            }
            cn_agg_diff_vals *v = &vals[row_of[f]];
            double *self = side == 0 ? &v->base_self : &v->new_self;
            double *total = side == 0 ? &v->base_total : &v->new_total;
            *self += t->functions[i].self * k;
            *total += t->functions[i].total * k;
        }
    }
    for (size_t i = 0; i < n; i++) {
        rows[i].self = vals[i].new_self - vals[i].base_self;
        rows[i].total = vals[i].new_total - vals[i].base_total;
        idx[i] = (int32_t)i;
    }
    rows_ctx c = {p, rows};
    qsort_r(idx, n, sizeof(*idx), cmp_rows, &c);
    for (size_t i = 0; i < n; i++) {
        out_rows[i] = rows[idx[i]];
        out_vals[i] = vals[idx[i]];
    }
    r->tree->functions = out_rows;
    r->tree->n_functions = n;
    r->functions = out_vals;
    out_rows = NULL;
    out_vals = NULL;
    rc = 0;
out:
    free(rows);
    free(out_rows);
    free(vals);
    free(out_vals);
    free(row_of);
    free(idx);
    return rc;
}

cn_agg_diff *cn_agg_diff_free(cn_agg_diff *r)
{
    if (r) {
        cn_agg_tree_free(r->tree);
        free(r->nodes);
        free(r->functions);
        free(r);
    }
    return NULL;
}

int cn_agg_diff_run(cn_agg_profile *d, const cn_agg_query *q, bool normalize, cn_agg_diff **out,
                    cn_err *err)
{
    if (!cn_agg_is_diff(d))
        return cn_err_set(err, -EINVAL, "diff: not a differential profile");
    int32_t tid_b, tid_n;
    cn_agg_diff_sides(d, &tid_b, &tid_n);
    cn_agg_tree *tb = NULL, *tn = NULL;
    merger m = {.p = d};
    cn_agg_diff *r = calloc(1, sizeof(*r));
    cn_agg_query qs = *q;
    qs.pid = -1;
    qs.tid = tid_b;
    int rc = r ? cn_agg_query_run(d, &qs, &tb, err) : -ENOMEM;
    if (rc < 0)
        goto fail;
    qs.tid = tid_n;
    if ((rc = cn_agg_query_run(d, &qs, &tn, err)) < 0)
        goto fail;
    r->base_sum = tb->total;
    r->new_sum = tn->total;
    r->normalized = normalize;
    r->factor = normalize && tb->total != 0 ? tn->total / tb->total : 1;
    rc = -ENOMEM;
    if (!(r->tree = calloc(1, sizeof(*r->tree))))
        goto fail;
    r->tree->view = tn->view;
    r->tree->callers_mode = tn->callers_mode;
    r->tree->call_sites = tn->call_sites;
    r->tree->first_root = -1;
    r->tree->total = tn->total - tb->total * r->factor;
    if (merge_tree(&m, tb, true, r->factor) < 0 || merge_tree(&m, tn, false, 1) < 0)
        goto fail;
    for (size_t i = 0; i < m.n; i++) {
        m.nodes[i].total = m.vals[i].new_total - m.vals[i].base_total;
        m.nodes[i].self = m.vals[i].new_self - m.vals[i].base_self;
    }
    if (link_children(&m, r->tree) < 0)
        goto fail;
    r->tree->nodes = m.nodes;
    r->tree->n_nodes = m.n;
    r->nodes = m.vals;
    m.nodes = NULL;
    m.vals = NULL;
    if (q->view == CN_AGG_VIEW_FUNCTIONS && merge_functions(r, d, tb, tn, r->factor) < 0)
        goto fail;
    rc = 0;
    *out = r;
    r = NULL;
fail:
    if (rc == -ENOMEM)
        cn_err_set(err, rc, "diff: out of memory");
    free(m.nodes);
    free(m.vals);
    free(m.node_at.ids);
    cn_u64map_clear(&m.index);
    cn_agg_tree_free(tb);
    cn_agg_tree_free(tn);
    cn_agg_diff_free(r);
    return rc;
}
