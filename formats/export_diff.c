/* export_diff.c — the writers of a differential result (cn_agg_diff_run): text, JSON, a
 * differential flame graph and three-column folded (cn_fmt.h). The computation (two
 * sides merged by call path, BASE normalized to NEW) is aggregate's (cn_agg.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

/* ---- walking a tree ----------------------------------------------------------------- */

/* Walks the sibling list starting at `first` and everything under it in preorder, without
 * recursion (a tree is as deep as the deepest stack: tens of thousands of levels), going
 * back up by the parent links. enter(ctx, n, depth) returns 1 to walk n's children, 0 to
 * skip n's subtree, or a negative errno that stops the walk and is returned; leave(ctx, n,
 * depth), when not NULL, runs after the children of a node entered with 1. */
typedef int (*walk_enter)(void *ctx, int32_t n, int depth);
typedef void (*walk_leave)(void *ctx, int32_t n, int depth);

static int walk(const cn_agg_tree *t, int32_t first, walk_enter enter, walk_leave leave, void *ctx)
{
    if (first < 0)
        return 0;
    int32_t top = t->nodes[first].parent, n = first;
    int depth = 0;
    for (;;) {
        int r = enter(ctx, n, depth);
        if (r < 0)
            return r;
        if (r > 0 && t->nodes[n].first_child >= 0) {
            n = t->nodes[n].first_child;
            depth++;
            continue;
        }
        if (r > 0 && leave)
            leave(ctx, n, depth);
        /* n is done: its next sibling, else that of the nearest ancestor that has one
         * (every ancestor was entered with 1: it is left on the way up). */
        while (t->nodes[n].next_sibling < 0) {
            n = t->nodes[n].parent;
            depth--;
            if (n == top)
                return 0;
            if (leave)
                leave(ctx, n, depth);
        }
        n = t->nodes[n].next_sibling;
    }
}

/* ---- writers ---------------------------------------------------------------------- */

typedef struct shown_ctx {
    const cn_agg_tree *t;
    uint8_t *shown;
} shown_ctx;

static int shown_enter(void *ctx, int32_t n, int depth)
{
    (void)ctx, (void)n, (void)depth;
    return 1;
}

/* Children are left before their parent: a shown node marks its parent shown. */
static void shown_leave(void *ctx, int32_t n, int depth)
{
    shown_ctx *c = ctx;
    (void)depth;
    if (c->t->nodes[n].total != 0)
        c->shown[n] = 1;
    if (c->shown[n] && c->t->nodes[n].parent >= 0)
        c->shown[c->t->nodes[n].parent] = 1;
}

/* shown[n]: total != 0 or a shown child (docs/cli.md: a differential tree keeps a zero
 * node that has shown children). A new array (the caller frees it) or NULL. */
static uint8_t *shown_nodes(const cn_agg_tree *t)
{
    shown_ctx c = {t, calloc(t->n_nodes ? t->n_nodes : 1, 1)};
    if (c.shown)
        walk(t, t->first_root, shown_enter, shown_leave, &c);
    return c.shown;
}

typedef struct json_ctx {
    FILE *out;
    const cn_agg_profile *p;
    const cn_agg_diff *r;
    const uint8_t *shown;
    double scale;
    bool sibling_before; /* a node was written before this one in its list */
} json_ctx;

/* Opens shown node n (its fields and "children":[); json_leave closes it. */
static int json_enter(void *ctx, int32_t n, int depth)
{
    json_ctx *c = ctx;
    FILE *out = c->out;
    const cn_agg_profile *p = c->p;
    const cn_agg_node *nd = &c->r->tree->nodes[n];
    const cn_agg_diff_vals *v = &c->r->nodes[n];
    if (!c->shown[n])
        return 0;
    if (depth == 0)
        fputs(c->sibling_before ? ",\n" : "\n", out); /* one root per line */
    else if (c->sibling_before)
        putc(',', out);
    fputs("{\"name\":", out);
    cn_fmt__json_str(out, cn_agg_func_name(p, nd->func));
    int32_t res = cn_agg_func_resource(p, nd->func);
    if (res >= 0) {
        fputs(",\"lib\":", out);
        cn_fmt__json_str(out, cn_agg_resource_name(p, res));
    }
    cn_fmt__json_kind(out, p, nd->func);
    double f[6] = {nd->total, nd->self, v->base_total, v->new_total, v->base_self, v->new_self};
    const char *k[6] = {"total", "self", "base", "new", "base_self", "new_self"};
    for (int i = 0; i < 6; i++) {
        fprintf(out, ",\"%s\":", k[i]);
        cn_fmt__json_num(out, f[i] * c->scale);
    }
    fputs(",\"children\":[", out);
    c->sibling_before = false;
    return 1;
}

static void json_leave(void *ctx, int32_t n, int depth)
{
    json_ctx *c = ctx;
    (void)n, (void)depth;
    fputs("]}", c->out);
    c->sibling_before = true;
}

int cn_fmt_write_diff_json(const cn_agg_profile *d, const cn_agg_diff *r,
                           const cn_fmt_write_opts *o, FILE *out)
{
    double scale = cn_agg_profile_scale(d);
    uint8_t *shown = shown_nodes(r->tree);
    if (!shown)
        return -ENOMEM;
    fprintf(out, "{\"unit\":\"%s\",\"diff\":true,\"normalized\":%s,\"factor\":",
            cn_agg_unit_name(cn_agg_profile_unit(d)), r->normalized ? "true" : "false");
    cn_fmt__json_num(out, r->factor);
    fputs(",\"total\":", out);
    cn_fmt__json_num(out, r->tree->total * scale);
    fputs(",\"base_total\":", out);
    cn_fmt__json_num(out, r->base_sum * scale);
    fputs(",\"new_total\":", out);
    cn_fmt__json_num(out, r->new_sum * scale);
    fprintf(out, ",\"view\":\"%s\",\"transforms\":[", cn_agg_view_name(r->tree->view));
    for (size_t i = 0; o && i < o->n_transforms; i++) {
        char *spec = cn_agg_transform_format(&o->transforms[i]);
        if (i)
            putc(',', out);
        cn_fmt__json_str(out, spec ? spec : "");
        free(spec);
    }
    putc(']', out);
    if (r->tree->view == CN_AGG_VIEW_FUNCTIONS) {
        fputs(",\"functions\":[", out);
        for (size_t i = 0; i < r->tree->n_functions; i++) {
            const cn_agg_func_row *row = &r->tree->functions[i];
            const cn_agg_diff_vals *v = &r->functions[i];
            fputs(i ? ",\n{\"name\":" : "\n{\"name\":", out);
            cn_fmt__json_str(out, cn_agg_func_name(d, row->func));
            int32_t res = cn_agg_func_resource(d, row->func);
            if (res >= 0) {
                fputs(",\"lib\":", out);
                cn_fmt__json_str(out, cn_agg_resource_name(d, res));
            }
            cn_fmt__json_kind(out, d, row->func);
            double f[6] = {row->self,   row->total,    v->base_self,
                           v->new_self, v->base_total, v->new_total};
            const char *k[6] = {"self", "total", "base_self", "new_self", "base", "new"};
            for (int j = 0; j < 6; j++) {
                fprintf(out, ",\"%s\":", k[j]);
                cn_fmt__json_num(out, f[j] * scale);
            }
            putc('}', out);
        }
        fputs("]}\n", out);
    } else {
        json_ctx c = {.out = out, .p = d, .r = r, .shown = shown, .scale = scale};
        fputs(",\"roots\":[", out);
        walk(r->tree, r->tree->first_root, json_enter, json_leave, &c);
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
    /* Names of any bytes: the terminal rule (docs/cli.md "Names in text output"). */
    fprintf(out, "  %*s", depth * 2, "");
    cn_term_fputs(cn_agg_func_name(d, func), out);
    int32_t res = cn_agg_func_resource(d, func);
    if (res >= 0) {
        fputs("  [", out);
        cn_term_fputs(cn_agg_resource_name(d, res), out);
        putc(']', out);
    }
    putc('\n', out);
}

typedef struct text_ctx {
    FILE *out;
    const cn_agg_profile *d;
    const cn_agg_diff *r;
    const uint8_t *shown;
    double denom, scale;
    const cn_fmt_write_opts *o;
} text_ctx;

/* One line per shown node within --depth and --min-percent (a node cut off hides its
 * subtree). */
static int text_enter(void *ctx, int32_t n, int depth)
{
    const text_ctx *c = ctx;
    const cn_agg_node *nd = &c->r->tree->nodes[n];
    const cn_fmt_write_opts *o = c->o;
    if (o && o->max_depth >= 0 && depth >= o->max_depth)
        return 0;
    if (!c->shown[n])
        return 0;
    if (o && o->min_percent > 0 && c->denom > 0 &&
        100 * fabs(nd->total) / c->denom < o->min_percent && nd->total != 0)
        return 0;
    text_line(c->out, c->d, nd->func, nd->total, c->r->nodes[n].base_total,
              c->r->nodes[n].new_total, c->denom, c->scale, depth);
    return 1;
}

int cn_fmt_write_diff_text(const cn_agg_profile *d, const cn_agg_diff *r,
                           const cn_fmt_write_opts *o, FILE *out)
{
    double scale = cn_agg_profile_scale(d);
    const char *unit = cn_agg_unit_name(cn_agg_profile_unit(d));
    fprintf(out, "# diff%s", o && o->title ? " " : "");
    cn_term_fputs(o ? o->title : NULL, out);
    fprintf(out, "  unit %s  base ", unit);
    text_value(out, r->base_sum * scale, false);
    fputs("  new ", out);
    text_value(out, r->new_sum * scale, false);
    if (r->normalized)
        fprintf(out, "  (base normalized x%.4g)", r->factor);
    for (size_t i = 0; o && i < o->n_transforms; i++) {
        char *spec = cn_agg_transform_format(&o->transforms[i]);
        fputs(i ? ", " : "  transforms: ", out);
        cn_term_fputs(spec ? spec : "?", out);
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
    text_ctx c = {out, d, r, shown, denom, scale, o};
    walk(r->tree, r->tree->first_root, text_enter, NULL, &c);
    free(shown);
    return ferror(out) ? -EIO : 0;
}

int cn_fmt_write_diff_svg(const cn_agg_profile *d, const cn_agg_diff *r, const cn_fmt_write_opts *o,
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
    cn_fmt__flame f = {
        .p = d,
        .t = r->tree,
        .base = base,
        .newv = nv,
        .icicle = r->tree->view == CN_AGG_VIEW_INVERTED || r->tree->view == CN_AGG_VIEW_CALLERS,
        .title = o && o->title ? o->title : "Differential flame graph",
        .subtitle = sub,
    };
    rc = cn_fmt__write_flame(&f, out, err);
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
    char *path; /* the current node's path, root first, ';'-separated */
    size_t path_cap;
    size_t *ends; /* ends[k]: length of path up to the node at depth k */
    size_t ends_cap;
    bool is_base;
} fold_ctx;

/* Appends node n's name to the path of its parent (depth - 1) and collects a line when n
 * has self weight. 1, or -ENOMEM. */
static int fold_enter(void *ctx, int32_t n, int depth)
{
    fold_ctx *c = ctx;
    const cn_agg_node *nd = &c->t->nodes[n];
    size_t len = depth ? c->ends[depth - 1] : 0;
    if (CN_RESERVE(c->ends, c->ends_cap, (size_t)depth + 1) < 0)
        return -ENOMEM;
    long l = cn_fmt__folded_frame(c->p, nd->func, &c->path, &c->path_cap, len);
    if (l < 0)
        return -ENOMEM;
    c->ends[depth] = (size_t)l;
    if (nd->self != 0) {
        if (CN_RESERVE(c->lines, c->cap, c->n + 1) < 0)
            return -ENOMEM;
        char *text = strdup(c->path);
        if (!text)
            return -ENOMEM;
        c->lines[c->n++] = (fline){text, c->is_base ? nd->self : 0, c->is_base ? 0 : nd->self};
    }
    return 1;
}

static int cmp_fline(const void *a, const void *b)
{
    return strcmp(((const fline *)a)->text, ((const fline *)b)->text);
}

int cn_fmt_write_diff_folded(cn_agg_profile *d, const cn_agg_query *q, FILE *out, cn_err *err)
{
    if (!cn_agg_is_diff(d))
        return cn_err_set(err, -EINVAL, "diff: not a differential profile");
    int32_t tids[2];
    cn_agg_diff_sides(d, &tids[0], &tids[1]);
    fold_ctx c = {.p = d};
    int rc = 0;
    for (int side = 0; side < 2 && rc == 0; side++) {
        cn_agg_query qs = *q;
        qs.tid = tids[side];
        qs.pid = -1;
        cn_agg_tree *t = NULL;
        if ((rc = cn_fmt__run_view(d, &qs, CN_AGG_VIEW_TREE, &t, err)) < 0)
            break;
        c.t = t;
        c.is_base = side == 0;
        if (walk(t, t->first_root, fold_enter, NULL, &c) < 0)
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
        rc = cn_fmt__finish_output(out, "folded", err);
    }
    for (size_t i = 0; i < c.n; i++)
        free(c.lines[i].text);
    free(c.lines);
    free(c.path);
    free(c.ends);
    return rc;
}
