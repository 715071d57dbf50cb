/* export_text.c — the text tree (docs/cli.md "Text tree") and the writer options.
 *
 * A header line (title, unit, total, view, transforms), then one node per line indented
 * two spaces per level: total and self as percentages of the total and in the unit, then
 * the name, e.g. `100.0%   3     0.0%   0   A`. No recursion (stacks can be tens of
 * thousands of frames deep): a pre-order walk over parent links decides which nodes are
 * shown, one pass measures the widest value so that the columns line up, one prints.
 * The pre-order and visibility helpers of export_internal.h live here. The function list
 * prints one row per function instead of a tree. Two different funcs that print the same
 * name in one result (ld.so's and the executable's `_start`) get their library appended,
 * `_start (ld-linux-x86-64.so.2)`, and their file too when the library alone does not
 * tell them apart (docs/cli.md "Text tree"): the funcs shown are sorted by name id once,
 * so equal names are neighbours.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export_internal.h"

#define C_RESET "\033[0m"
#define C_HOT   "\033[1;31m"
#define C_WARM  "\033[33m"
#define C_DIM   "\033[2m"

/* Deeper nodes keep this indentation and show their depth instead, so that a very deep
 * tree's text stays linear in size. */
#define MAX_INDENT_DEPTH 100

void cn_fmt_write_opts_init(cn_fmt_write_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->max_depth = -1;
}

int cn_fmt__tree_preorder(const cn_agg_tree *t, int32_t **order, int32_t **depth, size_t *n)
{
    size_t cap = t->n_nodes ? t->n_nodes : 1, k = 0;
    int32_t *o = malloc(cap * sizeof(*o));
    int32_t *d = malloc(cap * sizeof(*d));
    int32_t node = t->first_root, lvl = 0;

    if (!o || !d) {
        free(o);
        free(d);
        return -ENOMEM;
    }
    /* Parent links instead of a stack; at most n_nodes visits even if links were bad. */
    while (node >= 0 && (size_t)node < t->n_nodes && k < t->n_nodes) {
        o[k] = node;
        d[k++] = lvl;
        if (t->nodes[node].first_child >= 0) {
            node = t->nodes[node].first_child;
            lvl++;
            continue;
        }
        while (node >= 0 && t->nodes[node].next_sibling < 0) {
            node = t->nodes[node].parent;
            lvl--;
        }
        if (node >= 0)
            node = t->nodes[node].next_sibling;
    }
    *order = o;
    *depth = d;
    *n = k;
    return 0;
}

int cn_fmt__tree_visible(const cn_agg_tree *t, const int32_t *order, const int32_t *depth, size_t n,
                         int max_depth, double min_percent, double denom, bool **visible)
{
    size_t cap = t->n_nodes ? t->n_nodes : 1;
    bool *vis = calloc(cap, sizeof(*vis));
    bool *kid = calloc(cap, sizeof(*kid)); /* has a shown child */

    if (!vis || !kid) {
        free(vis);
        free(kid);
        return -ENOMEM;
    }
    /* Children come after their parent in pre-order: a backward pass sees them first. */
    for (size_t i = n; i-- > 0;) {
        const cn_agg_node *nd = &t->nodes[order[i]];
        bool ok = (max_depth < 0 || depth[i] < max_depth) &&
                  (min_percent <= 0 || 100.0 * fabs(nd->total) / denom >= min_percent) &&
                  (nd->total != 0 || kid[order[i]]);
        vis[order[i]] = ok;
        if (ok && nd->parent >= 0 && (size_t)nd->parent < t->n_nodes)
            kid[nd->parent] = true;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t par = t->nodes[order[i]].parent;
        if (par >= 0 && (size_t)par < t->n_nodes && !vis[par])
            vis[order[i]] = false;
    }
    free(kid);
    *visible = vis;
    return 0;
}

/* v with `decimals` (1..3) digits after the point, as printf's "%.Nf" prints it, at buf
 * (room for 32 bytes); returns the length, or 0 when only printf can tell (negative,
 * large, or so close to a rounding tie that the scaled product could round either way). */
static size_t put_fixed(char *buf, double v, int decimals)
{
    static const double pow10[] = {1, 10, 100, 1000};
    double x = v * pow10[decimals];
    if (!(v >= 0) || signbit(v) || x >= 1e8) /* x's rounding error stays below 1e-8 */
        return 0;
    double fl = floor(x);
    if (fabs(x - fl - 0.5) < 1e-6)
        return 0;
    uint64_t r = (uint64_t)fl + (x - fl > 0.5);
    uint64_t ip = r, fp = 0, mul = 1;
    for (int i = 0; i < decimals; i++)
        mul *= 10;
    ip = r / mul;
    fp = r % mul;
    size_t n = cn_fmt__put_uint(buf, ip);
    buf[n++] = '.';
    for (uint64_t d = mul / 10; d > 0; d /= 10)
        buf[n++] = (char)('0' + (fp / d) % 10);
    return n;
}

/* A display value into buf: integral values without decimals, others with up to three. */
static void fmt_value(char *buf, size_t size, double v)
{
    size_t n;
    if (!isfinite(v)) {
        snprintf(buf, size, "?");
    } else if (v == floor(v) && fabs(v) < 1e15) {
        if (!signbit(v) && size >= 24) {
            buf[cn_fmt__put_uint(buf, (uint64_t)v)] = '\0';
            return;
        }
        snprintf(buf, size, "%.0f", v);
    } else {
        if (size >= 32 && (n = put_fixed(buf, v, 3)) > 0)
            buf[n] = '\0';
        else
            snprintf(buf, size, "%.3f", v);
        char *dot = strchr(buf, '.');
        if (dot) {
            char *end = buf + strlen(buf);
            while (end > dot + 1 && end[-1] == '0')
                *--end = '\0';
        }
    }
}

/* Appends a percentage as printf's "%5.1f%%" at buf; returns the length, 0 when it
 * does not fit in 40 bytes (the caller then uses printf). */
static size_t put_pct(char *buf, double v)
{
    char tmp[40];
    size_t n = put_fixed(tmp, v, 1);
    if (n == 0) {
        int w = snprintf(tmp, sizeof(tmp), "%.1f", v);
        if (w <= 0 || (size_t)w >= sizeof(tmp))
            return 0;
        n = (size_t)w;
    }
    size_t k = 0;
    for (; k + n < 5; k++)
        buf[k] = ' ';
    memcpy(buf + k, tmp, n);
    k += n;
    buf[k++] = '%';
    return k;
}

/* Appends s right-aligned in width columns (printf's "%*s") at buf; returns the length. */
static size_t put_right(char *buf, const char *s, int width)
{
    size_t n = strlen(s), k = 0;
    for (; (int)(k + n) < width; k++)
        buf[k] = ' ';
    memcpy(buf + k, s, n);
    return k + n;
}

/* The writer's fixed inputs. */
struct text_ctx {
    const cn_agg_profile *p;
    const cn_agg_tree *t;
    const cn_fmt_write_opts *o;
    FILE *out;
    double scale;
    bool time;     /* weights are nanoseconds of an off-CPU or wall profile: shown as time */
    double denom;  /* |total| for percentages, 1 when the tree is empty */
    int width;     /* value column width: 4, or one more than the widest value */
    uint8_t *qual; /* per func: QUAL_* bits, or NULL when no name collides (owned) */
};

#define QUAL_LIB  1 /* append the library */
#define QUAL_FILE 2 /* append the file: another func of the same name shares the library */

static int cmp_by_name(const void *a, const void *b, void *ctx)
{
    const cn_agg_profile *p = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int32_t nx = cn_agg_func_name_id(p, x), ny = cn_agg_func_name_id(p, y);
    if (nx != ny)
        return nx < ny ? -1 : 1;
    int32_t rx = cn_agg_func_resource(p, x), ry = cn_agg_func_resource(p, y);
    if (rx != ry)
        return rx < ry ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Marks in bits[] the funcs of fs[0 .. n) (sorted by name id, then library) that share
 * their name with another: QUAL_LIB, plus QUAL_FILE when another has the same library too
 * (then it is a neighbour in the order). */
static void mark_groups(const cn_agg_profile *p, const int32_t *fs, size_t n, uint8_t *bits)
{
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        int32_t name = cn_agg_func_name_id(p, fs[i]);
        while (j < n && cn_agg_func_name_id(p, fs[j]) == name)
            j++;
        for (size_t a = i; j - i > 1 && a < j; a++) {
            int32_t res = cn_agg_func_resource(p, fs[a]);
            bits[fs[a]] = QUAL_LIB;
            if ((a > i && cn_agg_func_resource(p, fs[a - 1]) == res) ||
                (a + 1 < j && cn_agg_func_resource(p, fs[a + 1]) == res))
                bits[fs[a]] |= QUAL_FILE;
        }
        i = j;
    }
}

/* Fills c->qual for the funcs the result shows (tree nodes or function rows); leaves it
 * NULL when no two of them share a name (the usual case). Returns 0 or -ENOMEM. */
static int find_collisions(struct text_ctx *c)
{
    size_t nf = cn_agg_func_count(c->p), n = 0;
    size_t m = c->t->view == CN_AGG_VIEW_FUNCTIONS ? c->t->n_functions : c->t->n_nodes;
    uint8_t *seen = calloc(nf ? nf : 1, 1);
    int32_t *fs = malloc((m ? m : 1) * sizeof(*fs));
    int rc = -ENOMEM;

    if (!seen || !fs)
        goto out;
    for (size_t i = 0; i < m; i++) {
        int32_t f;
        if (c->t->view == CN_AGG_VIEW_FUNCTIONS) {
            f = c->t->functions[i].func;
        } else {
            /* a zero node without children is never shown (docs/cli.md "JSON tree") */
            const cn_agg_node *nd = &c->t->nodes[i];
            f = nd->total == 0 && nd->first_child < 0 ? -1 : nd->func;
        }
        if (f >= 0 && (size_t)f < nf && !seen[f]) {
            seen[f] = 1;
            fs[n++] = f;
        }
    }
    if (n > 1)
        qsort_r(fs, n, sizeof(*fs), cmp_by_name, (void *)c->p);
    memset(seen, 0, nf ? nf : 1);
    mark_groups(c->p, fs, n, seen);
    rc = 0;
    for (size_t i = 0; i < n; i++)
        if (seen[fs[i]]) {
            c->qual = seen; /* ownership moves to the context */
            seen = NULL;
            break;
        }
out:
    free(seen);
    free(fs);
    return rc;
}

/* *out: " (LIB)", " (LIB, FILE)" or " (FILE)" for a func whose name collides (malloc'ed, caller
 * frees), NULL when it needs none or nothing is known to tell it apart. 0 or -ENOMEM. */
static int qualifier(const struct text_ctx *c, int32_t func, char **out)
{
    uint8_t q = c->qual && func >= 0 ? c->qual[func] : 0;
    int32_t res = q ? cn_agg_func_resource(c->p, func) : -1;
    const char *lib = res >= 0 ? cn_agg_resource_name(c->p, res) : NULL;
    const char *file = q & QUAL_FILE ? cn_agg_func_file(c->p, func) : NULL;
    int r = 0;

    *out = NULL;
    if (lib && file && !strncmp(file, lib, strlen(lib)))
        lib = NULL; /* a script's file is its URL and a position: the URL once is enough */
    if (lib && file)
        r = asprintf(out, " (%s, %s)", lib, file);
    else if (lib || file)
        r = asprintf(out, " (%s)", lib ? lib : file);
    if (r < 0) {
        *out = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* A weight as the text shows it: a time (docs/cli.md, "Modes") or a plain value. */
static void fmt_weight(const struct text_ctx *c, char *buf, size_t size, double v)
{
    if (c->time)
        cn_fmt_time(buf, size, v);
    else
        fmt_value(buf, size, v);
}

static double pct(const struct text_ctx *c, double v)
{
    return 100.0 * v / c->denom;
}

static void widen(struct text_ctx *c, double v)
{
    char buf[64];
    fmt_weight(c, buf, sizeof(buf), v * c->scale);
    if ((int)strlen(buf) + 1 > c->width) /* at least one space after the percentage */
        c->width = (int)strlen(buf) + 1;
}

/* Points *s at its terminal form (cn_term_dup, docs/cli.md "Names in text output") when it
 * is not plain, then owned by *owned (caller frees). 0 or -ENOMEM. */
static int term_text(const char **s, char **owned)
{
    size_t n = strlen(*s);
    *owned = NULL;
    if (cn_term_plain_len(*s, n) == n)
        return 0;
    if (!(*owned = cn_term_dup(*s, n)))
        return -ENOMEM;
    *s = *owned;
    return 0;
}

/* One row: total and self (percentage and value), indentation, name. The line is built
 * in a buffer and written once: printf's "%s%5.1f%%%*s%s   %5.1f%%%*s   %*s%s%s\n". */
static int print_row(const struct text_ctx *c, double total, double self, int depth, int32_t func)
{
    char tv[64], sv[64], deep[32] = "", line[768];
    const char *name = func >= 0 ? cn_agg_func_name(c->p, func) : NULL;
    double tp = pct(c, total);
    const char *col = "", *reset = "";
    size_t n = 0;
    int rc = 0;

    fmt_weight(c, tv, sizeof(tv), total * c->scale);
    fmt_weight(c, sv, sizeof(sv), self * c->scale);
    if (c->o->color) {
        col = fabs(tp) >= 50 ? C_HOT : fabs(tp) >= 10 ? C_WARM : "";
        reset = *col ? C_RESET : "";
    }
    if (depth > MAX_INDENT_DEPTH) {
        snprintf(deep, sizeof(deep), "[%d] ", depth);
        depth = MAX_INDENT_DEPTH;
    }
    if (!name)
        name = "?";
    char *qual_owned = NULL, *name_esc = NULL, *qual_esc = NULL;
    if (qualifier(c, func, &qual_owned) < 0)
        return -ENOMEM;
    const char *qual = qual_owned ? qual_owned : "";
    /* Names come from other users' binaries: no control character reaches the terminal. */
    if (term_text(&name, &name_esc) < 0 || term_text(&qual, &qual_esc) < 0) {
        rc = -ENOMEM;
        goto out;
    }
    /* Fixed parts: colors, two percentages, two values (< 64 each, padded to width),
     * indentation (<= 200), deep: well under the buffer unless width is huge. */
    char tp_s[48], sp_s[48];
    size_t tpl = put_pct(tp_s, tp), spl = put_pct(sp_s, pct(c, self));
    if (c->width > 64 || tpl == 0 || spl == 0) {
        if (fprintf(c->out, "%s%5.1f%%%*s%s   %5.1f%%%*s   %*s%s%s%s\n", col, tp, c->width, tv,
                    reset, pct(c, self), c->width, sv, 2 * depth, "", deep, name, qual) < 0)
            rc = -EIO;
        goto out;
    }
    n += put_right(line + n, col, 0);
    memcpy(line + n, tp_s, tpl);
    n += tpl;
    n += put_right(line + n, tv, c->width);
    n += put_right(line + n, reset, 0);
    n += put_right(line + n, "   ", 0);
    memcpy(line + n, sp_s, spl);
    n += spl;
    n += put_right(line + n, sv, c->width);
    n += put_right(line + n, "   ", 0);
    memset(line + n, ' ', (size_t)(2 * depth));
    n += (size_t)(2 * depth);
    n += put_right(line + n, deep, 0);
    size_t nl = strlen(name), ql = strlen(qual);
    if (n + nl + ql + 1 <= sizeof(line)) {
        memcpy(line + n, name, nl);
        n += nl;
        memcpy(line + n, qual, ql);
        n += ql;
        line[n++] = '\n';
        rc = fwrite(line, 1, n, c->out) == n ? 0 : -EIO;
        goto out;
    }
    if (fwrite(line, 1, n, c->out) != n || fputs(name, c->out) < 0 || fputs(qual, c->out) < 0 ||
        fputc('\n', c->out) == EOF)
        rc = -EIO;
out:
    free(qual_owned);
    free(name_esc);
    free(qual_esc);
    return rc;
}

/* Measures the widest value, then prints the shown nodes in pre-order. */
static int print_nodes(struct text_ctx *c)
{
    int32_t *order = NULL, *depth = NULL;
    bool *visible = NULL;
    size_t n = 0;
    int rc = cn_fmt__tree_preorder(c->t, &order, &depth, &n);

    if (rc == 0)
        rc = cn_fmt__tree_visible(c->t, order, depth, n, c->o->max_depth, c->o->min_percent,
                                  c->denom, &visible);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!visible[order[i]])
            continue;
        widen(c, c->t->nodes[order[i]].total);
        widen(c, c->t->nodes[order[i]].self);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const cn_agg_node *nd = &c->t->nodes[order[i]];
        if (visible[order[i]])
            rc = print_row(c, nd->total, nd->self, depth[i], nd->func);
    }
    free(order);
    free(depth);
    free(visible);
    return rc;
}

static const char *view_label(const cn_agg_tree *t)
{
    switch (t->view) {
    case CN_AGG_VIEW_INVERTED:
        return "inverted tree";
    case CN_AGG_VIEW_CALLEES:
        return "callees";
    case CN_AGG_VIEW_CALLERS:
        return t->callers_mode == CN_AGG_CALLERS_SELF ? "callers (self)" : "callers (total)";
    case CN_AGG_VIEW_FUNCTIONS:
        return "functions";
    case CN_AGG_VIEW_TREE:
        break;
    }
    return "call tree";
}

/* part as a percentage of whole; "<0.1%" rather than a misleading "0.0%" for a few
 * stacks. */
static int put_share(char *buf, size_t n, uint64_t part, uint64_t whole)
{
    double pct = 100.0 * (double)part / (double)whole;
    return pct < 0.05 ? snprintf(buf, n, "<0.1%%") : snprintf(buf, n, "%.1f%%", pct);
}

bool cn_fmt_unwind_summary(const cn_fmt_unwind *u, char *buf, size_t n)
{
    static const char *const names[] = {"stack copy", "no CFI", "read fault", "other"};
    uint64_t parts[4];
    uint64_t cut;
    size_t len;
    char pct[16];

    if (n)
        buf[0] = '\0';
    if (!u || !u->known || u->user_stacks == 0 || n == 0)
        return false;
    parts[0] = u->outcomes.truncated_stack;
    parts[1] = u->outcomes.no_cfi;
    parts[2] = u->outcomes.read_fault;
    parts[3] = u->outcomes.other;
    cut = parts[0] + parts[1] + parts[2] + parts[3];
    if (cut == 0)
        return false;
    put_share(pct, sizeof(pct), cut, u->user_stacks);
    len = (size_t)snprintf(buf, n, "%s of stacks truncated (", pct);
    for (size_t i = 0, shown = 0; i < 4 && len < n; i++) {
        if (!parts[i])
            continue;
        put_share(pct, sizeof(pct), parts[i], u->user_stacks);
        len += (size_t)snprintf(buf + len, n - len, "%s%s %s", shown++ ? ", " : "", names[i], pct);
    }
    if (len < n)
        snprintf(buf + len, n - len, ")");
    return true;
}

static int print_header(const struct text_ctx *c)
{
    const cn_fmt_write_opts *o = c->o;
    char tv[64], title[512], session[512], event[256], mode[64];
    FILE *out = c->out;

    /* The title, session and event are names too (docs/cli.md "Names in text output"). */
    cn_term_str(title, sizeof(title), o->title ? o->title : "profile");
    cn_term_str(session, sizeof(session), o->session);
    cn_term_str(event, sizeof(event), o->event ? o->event : "?");
    cn_term_str(mode, sizeof(mode), cn_agg_meta_get(c->p, "mode")); /* a file's, any bytes */

    fmt_weight(c, tv, sizeof(tv), c->t->total * c->scale);
    if (c->time) /* the unit is in the value; the mode says what it measures */
        fprintf(out, "%s%s: %s, total %s %s", o->color ? C_DIM : "", title, view_label(c->t), tv,
                mode);
    else
        fprintf(out, "%s%s: %s, total %s %s", o->color ? C_DIM : "", title, view_label(c->t), tv,
                cn_agg_unit_name(cn_agg_profile_unit(c->p)));
    if (c->t->view == CN_AGG_VIEW_CALLEES)
        fprintf(out, ", %lld call site%s", (long long)c->t->call_sites,
                c->t->call_sites == 1 ? "" : "s");
    if (o->session)
        fprintf(out, ", session %s, event %s, %lld samples, %lld lost", session, event,
                (long long)o->samples, (long long)o->lost);
    char cut[160];
    if (o->session && cn_fmt_unwind_summary(&o->unwind, cut, sizeof(cut)))
        fprintf(out, ", %s", cut);
    if (o->session && o->python) {
        char py[320];
        fprintf(out, ", python frames: %s", cn_term_str(py, sizeof(py), o->python));
    }
    if (o->session && o->cgroup) {
        char cg[CN_CGROUP_PATH_MAX + 64];
        fprintf(out, ", cgroup %s", cn_term_str(cg, sizeof(cg), o->cgroup));
    }
    fprintf(out, ", transforms:");
    if (o->n_transforms == 0)
        fprintf(out, " none");
    for (size_t i = 0; i < o->n_transforms; i++) {
        char *s = cn_agg_transform_format(&o->transforms[i]); /* names functions */
        char *t = s ? cn_term_dup(s, strlen(s)) : NULL;
        free(s);
        if (!t)
            return -ENOMEM;
        fprintf(out, "%s %s", i ? "," : "", t);
        free(t);
    }
    if (fprintf(out, "%s\n", o->color ? C_RESET : "") < 0)
        return -EIO;
    return 0;
}

static int print_functions(struct text_ctx *c)
{
    for (size_t i = 0; i < c->t->n_functions; i++) {
        widen(c, c->t->functions[i].total);
        widen(c, c->t->functions[i].self);
    }
    for (size_t i = 0; i < c->t->n_functions; i++) {
        const cn_agg_func_row *r = &c->t->functions[i];
        if (c->o->min_percent > 0 && fabs(pct(c, r->total)) < c->o->min_percent)
            continue;
        if (print_row(c, r->total, r->self, 0, r->func) < 0)
            return -EIO;
    }
    return 0;
}

int cn_fmt_write_text(const cn_agg_profile *p, const cn_agg_tree *t, const cn_fmt_write_opts *o,
                      FILE *out)
{
    cn_fmt_write_opts defaults;
    struct text_ctx c;
    int rc;

    if (!p || !t || !out)
        return -EINVAL;
    if (!o) {
        cn_fmt_write_opts_init(&defaults);
        o = &defaults;
    }
    c.p = p;
    c.t = t;
    c.o = o;
    c.out = out;
    c.scale = cn_agg_profile_scale(p);
    c.time = cn_fmt_is_time_profile(p);
    c.denom = t->total != 0 ? fabs(t->total) : 1.0;
    c.width = 4;
    c.qual = NULL;
    rc = find_collisions(&c);
    if (rc == 0)
        rc = print_header(&c);
    if (rc == 0)
        rc = t->view == CN_AGG_VIEW_FUNCTIONS ? print_functions(&c) : print_nodes(&c);
    free(c.qual);
    return rc;
}
