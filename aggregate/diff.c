/* diff.c — differential profiles: NEW − BASE per call path (issue 6).
 *
 * A differential profile is an ordinary profile with two synthetic threads, "base"
 * (pid 1, tid 1) and "new" (pid 2, tid 2), and metadata diff=1 — the same tables the
 * three-column folded importer builds — so every transform and view works on it
 * unchanged. cn_agg_diff_run() runs the query once per side (thread filter), merges the
 * two trees by call path with a (parent, func) hash, scales BASE by NEW's total over
 * BASE's (normalizing) and orders children by |NEW − BASE| (calltree.md §1.1 on negative
 * weights, interface.md on ordering). Writers for text, JSON, three-column folded and a
 * differential flame graph sit at the end.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

#define BASE_PID 1
#define NEW_PID  2

/* ---- building a differential profile --------------------------------------------- */

typedef struct builder {
    cn_agg_profile *src;
    cn_agg_profile *d;
    const cn_agg_tree *t;
    int32_t *res_map;  /* src resource -> d resource (-2 = not yet) */
    int32_t *func_map; /* src func -> d frame (-2 = not yet) */
    int32_t thread;
    double factor; /* src weight -> d weight */
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

/* Copies the subtree list starting at `first` under d stack `prefix`. */
static int copy_nodes(builder *b, int32_t first, int32_t prefix)
{
    for (int32_t n = first; n >= 0; n = b->t->nodes[n].next_sibling) {
        const cn_agg_node *nd = &b->t->nodes[n];
        int32_t frame = map_func(b, nd->func);
        if (frame < 0)
            return frame;
        int32_t stack = cn_agg_stack(b->d, prefix, frame);
        if (stack < 0)
            return stack;
        int rc;
        if (nd->self != 0 &&
            (rc = cn_agg_add_sample(b->d, stack, 0, nd->self * b->factor, b->thread)) < 0)
            return rc;
        if ((rc = copy_nodes(b, nd->first_child, stack)) < 0)
            return rc;
    }
    return 0;
}

static int copy_side(cn_agg_profile *src, const cn_agg_query *q, cn_agg_profile *d, int32_t thread,
                     double factor, cn_err *err)
{
    builder b = {.src = src, .d = d, .thread = thread, .factor = factor};
    cn_agg_tree *t = NULL;
    int rc = cn_agg__run_view(src, q, CN_AGG_VIEW_TREE, &t, err);
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
    rc = copy_nodes(&b, t->first_root, -1);
out:
    if (rc < 0)
        rc = cn_err_set(err, rc, "diff: %s", strerror(-rc));
    free(b.res_map);
    free(b.func_map);
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

/* The thread ids of the two sides, from the metadata (default 1 and 2). */
static void side_tids(const cn_agg_profile *p, int32_t *base, int32_t *newt)
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
    side_tids(p, &b, &n);
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
    cn_agg__u64map index; /* (parent + 1, func) -> node */
} merger;

static int32_t merge_node(merger *m, int32_t parent, int32_t func)
{
    uint64_t key = cn_agg__pair(parent + 1, func);
    int32_t n = cn_agg__u64map_get(&m->index, key);
    if (n >= 0)
        return n;
    if (CN_AGG__RESERVE(m->nodes, m->cap, m->n + 1) < 0 ||
        CN_AGG__RESERVE(m->vals, m->cap_vals, m->n + 1) < 0)
        return -ENOMEM;
    n = (int32_t)m->n++;
    m->nodes[n] =
        (cn_agg_node){.func = func, .parent = parent, .first_child = -1, .next_sibling = -1};
    memset(&m->vals[n], 0, sizeof(m->vals[n]));
    if (cn_agg__u64map_put(&m->index, key, n) < 0)
        return -ENOMEM;
    return n;
}

static int merge_tree(merger *m, const cn_agg_tree *t, int32_t first, int32_t parent, bool is_base,
                      double factor)
{
    for (int32_t c = first; c >= 0; c = t->nodes[c].next_sibling) {
        int32_t n = merge_node(m, parent, t->nodes[c].func);
        if (n < 0)
            return n;
        cn_agg_diff_vals *v = &m->vals[n];
        if (is_base) {
            v->base_total += t->nodes[c].total * factor;
            v->base_self += t->nodes[c].self * factor;
        } else {
            v->new_total += t->nodes[c].total;
            v->new_self += t->nodes[c].self;
        }
        int rc = merge_tree(m, t, t->nodes[c].first_child, n, is_base, factor);
        if (rc < 0)
            return rc;
    }
    return 0;
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
    side_tids(d, &tid_b, &tid_n);
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
    if (merge_tree(&m, tb, tb->first_root, -1, true, r->factor) < 0 ||
        merge_tree(&m, tn, tn->first_root, -1, false, 1) < 0)
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
    cn_agg__u64map_clear(&m.index);
    cn_agg_tree_free(tb);
    cn_agg_tree_free(tn);
    cn_agg_diff_free(r);
    return rc;
}

/* ---- writers ---------------------------------------------------------------------- */

/* shown[n]: total != 0 or a shown child (interface.md: a differential tree keeps a zero
 * node that has shown children). */
static bool mark_shown(const cn_agg_tree *t, int32_t n, uint8_t *shown)
{
    bool any = false;
    for (int32_t c = t->nodes[n].first_child; c >= 0; c = t->nodes[c].next_sibling)
        any |= mark_shown(t, c, shown);
    shown[n] = any || t->nodes[n].total != 0;
    return shown[n];
}

static uint8_t *shown_nodes(const cn_agg_tree *t)
{
    uint8_t *shown = calloc(t->n_nodes ? t->n_nodes : 1, 1);
    if (shown)
        for (int32_t r = t->first_root; r >= 0; r = t->nodes[r].next_sibling)
            mark_shown(t, r, shown);
    return shown;
}

static void json_node(FILE *out, const cn_agg_profile *p, const cn_agg_diff *r,
                      const uint8_t *shown, int32_t n, double scale)
{
    const cn_agg_node *nd = &r->tree->nodes[n];
    const cn_agg_diff_vals *v = &r->nodes[n];
    fputs("{\"name\":", out);
    cn_agg__json_string(out, cn_agg_func_name(p, nd->func));
    int32_t res = cn_agg_func_resource(p, nd->func);
    if (res >= 0) {
        fputs(",\"lib\":", out);
        cn_agg__json_string(out, cn_agg_resource_name(p, res));
    }
    double f[6] = {nd->total, nd->self, v->base_total, v->new_total, v->base_self, v->new_self};
    const char *k[6] = {"total", "self", "base", "new", "base_self", "new_self"};
    for (int i = 0; i < 6; i++) {
        fprintf(out, ",\"%s\":", k[i]);
        cn_agg__json_number(out, f[i] * scale);
    }
    fputs(",\"children\":[", out);
    bool first = true;
    for (int32_t c = nd->first_child; c >= 0; c = r->tree->nodes[c].next_sibling) {
        if (!shown[c])
            continue;
        if (!first)
            putc(',', out);
        first = false;
        json_node(out, p, r, shown, c, scale);
    }
    fputs("]}", out);
}

int cn_agg_write_diff_json(const cn_agg_profile *d, const cn_agg_diff *r,
                           const cn_agg_write_opts *o, FILE *out)
{
    double scale = cn_agg_profile_scale(d);
    uint8_t *shown = shown_nodes(r->tree);
    if (!shown)
        return -ENOMEM;
    fprintf(out, "{\"unit\":\"%s\",\"diff\":true,\"normalized\":%s,\"factor\":",
            cn_agg_unit_name(cn_agg_profile_unit(d)), r->normalized ? "true" : "false");
    cn_agg__json_number(out, r->factor);
    fputs(",\"total\":", out);
    cn_agg__json_number(out, r->tree->total * scale);
    fputs(",\"base_total\":", out);
    cn_agg__json_number(out, r->base_sum * scale);
    fputs(",\"new_total\":", out);
    cn_agg__json_number(out, r->new_sum * scale);
    fprintf(out, ",\"view\":\"%s\",\"transforms\":[", cn_agg_view_name(r->tree->view));
    for (size_t i = 0; o && i < o->n_transforms; i++) {
        char *spec = cn_agg_transform_format(&o->transforms[i]);
        if (i)
            putc(',', out);
        cn_agg__json_string(out, spec ? spec : "");
        free(spec);
    }
    putc(']', out);
    if (r->tree->view == CN_AGG_VIEW_FUNCTIONS) {
        fputs(",\"functions\":[", out);
        for (size_t i = 0; i < r->tree->n_functions; i++) {
            const cn_agg_func_row *row = &r->tree->functions[i];
            const cn_agg_diff_vals *v = &r->functions[i];
            fputs(i ? ",\n{\"name\":" : "\n{\"name\":", out);
            cn_agg__json_string(out, cn_agg_func_name(d, row->func));
            int32_t res = cn_agg_func_resource(d, row->func);
            if (res >= 0) {
                fputs(",\"lib\":", out);
                cn_agg__json_string(out, cn_agg_resource_name(d, res));
            }
            double f[6] = {row->self,   row->total,    v->base_self,
                           v->new_self, v->base_total, v->new_total};
            const char *k[6] = {"self", "total", "base_self", "new_self", "base", "new"};
            for (int j = 0; j < 6; j++) {
                fprintf(out, ",\"%s\":", k[j]);
                cn_agg__json_number(out, f[j] * scale);
            }
            putc('}', out);
        }
        fputs("]}\n", out);
    } else {
        fputs(",\"roots\":[", out);
        bool first = true;
        for (int32_t n = r->tree->first_root; n >= 0; n = r->tree->nodes[n].next_sibling) {
            if (!shown[n])
                continue;
            fputs(first ? "\n" : ",\n", out);
            first = false;
            json_node(out, d, r, shown, n, scale);
        }
        fputs("]}\n", out);
    }
    free(shown);
    return ferror(out) ? -EIO : 0;
}

static void text_value(FILE *out, double v, bool sign)
{
    if (v == floor(v) && fabs(v) < 1e15)
        fprintf(out, sign ? "%+10.0f" : "%10.0f", v);
    else
        fprintf(out, sign ? "%+10.4g" : "%10.4g", v);
}

static void text_line(FILE *out, const cn_agg_profile *d, int32_t func, double delta, double base,
                      double nv, double denom, double scale, int depth)
{
    fprintf(out, "%+7.1f%% ", denom > 0 ? 100 * delta / denom : 0);
    text_value(out, delta * scale, true);
    fputs("  ", out);
    text_value(out, base * scale, false);
    fputs(" -> ", out);
    text_value(out, nv * scale, false);
    fprintf(out, "  %*s%s", depth * 2, "", cn_agg_func_name(d, func));
    int32_t res = cn_agg_func_resource(d, func);
    if (res >= 0)
        fprintf(out, "  [%s]", cn_agg_resource_name(d, res));
    putc('\n', out);
}

static void text_nodes(FILE *out, const cn_agg_profile *d, const cn_agg_diff *r,
                       const uint8_t *shown, int32_t first, int depth, double denom, double scale,
                       const cn_agg_write_opts *o)
{
    if (o && o->max_depth >= 0 && depth >= o->max_depth)
        return;
    for (int32_t n = first; n >= 0; n = r->tree->nodes[n].next_sibling) {
        const cn_agg_node *nd = &r->tree->nodes[n];
        if (!shown[n])
            continue;
        if (o && o->min_percent > 0 && denom > 0 &&
            100 * fabs(nd->total) / denom < o->min_percent && nd->total != 0)
            continue;
        text_line(out, d, nd->func, nd->total, r->nodes[n].base_total, r->nodes[n].new_total, denom,
                  scale, depth);
        text_nodes(out, d, r, shown, nd->first_child, depth + 1, denom, scale, o);
    }
}

int cn_agg_write_diff_text(const cn_agg_profile *d, const cn_agg_diff *r,
                           const cn_agg_write_opts *o, FILE *out)
{
    double scale = cn_agg_profile_scale(d);
    const char *unit = cn_agg_unit_name(cn_agg_profile_unit(d));
    fprintf(out, "# diff%s%s  unit %s  base ", o && o->title ? " " : "",
            o && o->title ? o->title : "", unit);
    text_value(out, r->base_sum * scale, false);
    fputs("  new ", out);
    text_value(out, r->new_sum * scale, false);
    if (r->normalized)
        fprintf(out, "  (base normalized x%.4g)", r->factor);
    for (size_t i = 0; o && i < o->n_transforms; i++) {
        char *spec = cn_agg_transform_format(&o->transforms[i]);
        fprintf(out, "%s%s", i ? ", " : "  transforms: ", spec ? spec : "?");
        free(spec);
    }
    fputs("\n#  change%     change        base ->        new  name\n", out);
    double denom = fabs(r->new_sum);
    if (r->tree->view == CN_AGG_VIEW_FUNCTIONS) {
        for (size_t i = 0; i < r->tree->n_functions; i++) {
            const cn_agg_func_row *row = &r->tree->functions[i];
            if (row->self == 0 && row->total == 0)
                continue;
            text_line(out, d, row->func, row->self, r->functions[i].base_self,
                      r->functions[i].new_self, denom, scale, 0);
        }
        return ferror(out) ? -EIO : 0;
    }
    uint8_t *shown = shown_nodes(r->tree);
    if (!shown)
        return -ENOMEM;
    text_nodes(out, d, r, shown, r->tree->first_root, 0, denom, scale, o);
    free(shown);
    return ferror(out) ? -EIO : 0;
}

int cn_agg_write_diff_svg(const cn_agg_profile *d, const cn_agg_diff *r, const cn_agg_write_opts *o,
                          FILE *out, cn_err *err)
{
    size_t n = r->tree->n_nodes;
    double *base = malloc((n ? n : 1) * sizeof(*base));
    double *nv = malloc((n ? n : 1) * sizeof(*nv));
    char sub[256];
    int rc;
    if (!base || !nv) {
        rc = cn_err_set(err, -ENOMEM, "SVG output: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        base[i] = r->nodes[i].base_total;
        nv[i] = r->nodes[i].new_total;
    }
    double scale = cn_agg_profile_scale(d);
    snprintf(sub, sizeof(sub),
             "base %.6g -> new %.6g %s%s \xc2\xb7 red: grew, blue: shrank \xc2\xb7 width: "
             "(base + new) / 2",
             r->base_sum * r->factor * scale, r->new_sum * scale,
             cn_agg_unit_name(cn_agg_profile_unit(d)), r->normalized ? " (base normalized)" : "");
    cn_agg__flame f = {
        .p = d,
        .t = r->tree,
        .base = base,
        .newv = nv,
        .icicle = r->tree->view == CN_AGG_VIEW_INVERTED || r->tree->view == CN_AGG_VIEW_CALLERS,
        .title = o && o->title ? o->title : "Differential flame graph",
        .subtitle = sub,
    };
    rc = cn_agg__write_flame(&f, out, err);
out:
    free(base);
    free(nv);
    return rc;
}

/* ---- three-column folded ---------------------------------------------------------- */

typedef struct fline {
    char *text;
    double base, newv;
} fline;

typedef struct fold_ctx {
    const cn_agg_profile *p;
    const cn_agg_tree *t;
    fline *lines;
    size_t n, cap;
    char *path;
    size_t path_cap;
    bool is_base;
} fold_ctx;

static int fold_collect(fold_ctx *c, int32_t first, size_t len)
{
    for (int32_t n = first; n >= 0; n = c->t->nodes[n].next_sibling) {
        const cn_agg_node *nd = &c->t->nodes[n];
        const char *name = cn_agg_func_name(c->p, nd->func);
        size_t nl = strlen(name);
        if (CN_AGG__RESERVE(c->path, c->path_cap, len + nl + 2) < 0)
            return -ENOMEM;
        size_t l = len;
        if (l)
            c->path[l++] = ';';
        for (size_t i = 0; i < nl; i++)
            c->path[l++] = name[i] == '\n' || name[i] == '\r' ? ' ' : name[i];
        c->path[l] = '\0';
        if (nd->self != 0) {
            if (CN_AGG__RESERVE(c->lines, c->cap, c->n + 1) < 0)
                return -ENOMEM;
            char *text = strdup(c->path);
            if (!text)
                return -ENOMEM;
            c->lines[c->n++] = (fline){text, c->is_base ? nd->self : 0, c->is_base ? 0 : nd->self};
        }
        int rc = fold_collect(c, nd->first_child, l);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int cmp_fline(const void *a, const void *b)
{
    return strcmp(((const fline *)a)->text, ((const fline *)b)->text);
}

int cn_agg_write_diff_folded(cn_agg_profile *d, const cn_agg_query *q, FILE *out, cn_err *err)
{
    if (!cn_agg_is_diff(d))
        return cn_err_set(err, -EINVAL, "diff: not a differential profile");
    int32_t tids[2];
    side_tids(d, &tids[0], &tids[1]);
    fold_ctx c = {.p = d};
    int rc = 0;
    for (int side = 0; side < 2 && rc == 0; side++) {
        cn_agg_query qs = *q;
        qs.tid = tids[side];
        qs.pid = -1;
        cn_agg_tree *t = NULL;
        if ((rc = cn_agg__run_view(d, &qs, CN_AGG_VIEW_TREE, &t, err)) < 0)
            break;
        c.t = t;
        c.is_base = side == 0;
        if (fold_collect(&c, t->first_root, 0) < 0)
            rc = cn_err_set(err, -ENOMEM, "diff: out of memory");
        cn_agg_tree_free(t);
    }
    if (rc == 0) {
        if (c.n > 1)
            qsort(c.lines, c.n, sizeof(*c.lines), cmp_fline);
        for (size_t i = 0; i < c.n;) {
            double b = 0, nv = 0;
            size_t j = i;
            while (j < c.n && strcmp(c.lines[j].text, c.lines[i].text) == 0) {
                b += c.lines[j].base;
                nv += c.lines[j++].newv;
            }
            /* the format's counts are non-negative integers */
            fprintf(out, "%s %.0f %.0f\n", c.lines[i].text, b > 0 ? round(b) : 0,
                    nv > 0 ? round(nv) : 0);
            i = j;
        }
        rc = cn_agg__finish_output(out, "folded", err);
    }
    for (size_t i = 0; i < c.n; i++)
        free(c.lines[i].text);
    free(c.lines);
    free(c.path);
    return rc;
}
