/* export_json.c — the JSON tree (docs/cli.md "JSON tree") of a query result. Strings and
 * numbers are json_out.c's (one UTF-8 policy, one number format for every JSON writer).
 *
 * Streamed without recursion: a pre-order walk opens `{"name":…,"children":[` for each
 * shown node and closes `]}` as the walk climbs back, so a tree as deep as the deepest
 * stack costs no C stack. Values are weight × the profile's scale; integral values are
 * written as JSON integers so that sample counts read as `3`, not `3.0`. A node whose
 * total is 0 and that has no shown child is left out (docs/cli.md), whatever the engine
 * kept.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export_internal.h"

/* `"name":…` and, when the func has a resource, `,"lib":…`, and its kind's marker,
 * `,"kind":"python"` for a Python source file (frame_kind.c, docs/python.md). */
static int put_func(const cn_agg_profile *p, int32_t func, FILE *out)
{
    const char *name = func >= 0 ? cn_agg_func_name(p, func) : NULL;
    int32_t res = func >= 0 ? cn_agg_func_resource(p, func) : -1;
    const char *lib = res >= 0 ? cn_agg_resource_name(p, res) : NULL;

    if (fputs("\"name\":", out) < 0 || cn_fmt__json_str(out, name ? name : "?") < 0)
        return -EIO;
    if (lib && (fputs(",\"lib\":", out) < 0 || cn_fmt__json_str(out, lib) < 0))
        return -EIO;
    return cn_fmt__json_kind(out, p, func);
}

/* `,"KEY":VALUE` for a number (key is a short literal), in one write. */
static int put_num(FILE *out, const char *key, double v)
{
    char buf[96];
    size_t kl = strlen(key), n = 0;
    if (kl > sizeof(buf) - 40)
        return -EINVAL;
    buf[n++] = ',';
    buf[n++] = '"';
    memcpy(buf + n, key, kl);
    n += kl;
    buf[n++] = '"';
    buf[n++] = ':';
    n += cn_fmt__json_num_fmt(buf + n, v);
    return fwrite(buf, 1, n, out) == n ? 0 : -EIO;
}

/* Appends `"s"` at buf (room bytes) when s is all plain bytes and fits; returns the
 * length, 0 otherwise (then the stream path escapes it). */
static size_t buf_plain_str(char *buf, size_t room, const char *s)
{
    size_t n = 0;
    if (room < 2)
        return 0;
    buf[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (!cn_fmt__json_plain(*p) || n + 2 > room)
            return 0;
        buf[n++] = (char)*p;
    }
    buf[n++] = '"';
    return n;
}

/* Appends `,"key":number` at buf (key a short literal; room for 64 + strlen(key) bytes). */
static size_t buf_num(char *buf, const char *key, double v)
{
    size_t kl = strlen(key), n = 0;
    buf[n++] = ',';
    buf[n++] = '"';
    memcpy(buf + n, key, kl);
    n += kl;
    buf[n++] = '"';
    buf[n++] = ':';
    return n + cn_fmt__json_num_fmt(buf + n, v);
}

/* Node n's fields in one write when its names need no escaping (nearly always): the
 * stdio calls per field were most of the writer's time. Returns 0, 1 when the caller
 * must use the field-by-field path, or -EIO. */
static int open_node_fast(const cn_agg_profile *p, const cn_agg_tree *t, int32_t n, double scale,
                          FILE *out)
{
    const cn_agg_node *nd = &t->nodes[n];
    const char *name = nd->func >= 0 ? cn_agg_func_name(p, nd->func) : NULL;
    int32_t res = nd->func >= 0 ? cn_agg_func_resource(p, nd->func) : -1;
    const char *lib = res >= 0 ? cn_agg_resource_name(p, res) : NULL;
    char buf[1024];
    size_t k = 0, w;
    const size_t nums = 4 * 64 + 64; /* room kept for the numbers and "children" */

    memcpy(buf, "{\"name\":", 8);
    k = 8;
    if (!(w = buf_plain_str(buf + k, sizeof(buf) - k - nums, name ? name : "?")))
        return 1;
    k += w;
    if (lib) {
        memcpy(buf + k, ",\"lib\":", 7);
        k += 7;
        if (!(w = buf_plain_str(buf + k, sizeof(buf) - k - nums, lib)))
            return 1;
        k += w;
    }
    const char *kind = cn_fmt__func_kind(p, nd->func);
    if (kind) {
        memcpy(buf + k, ",\"kind\":", 8);
        k += 8;
        if (!(w = buf_plain_str(buf + k, sizeof(buf) - k - nums, kind)))
            return 1;
        k += w;
    }
    k += buf_num(buf + k, "total", nd->total * scale);
    k += buf_num(buf + k, "self", nd->self * scale);
    if (t->has_recursion_counts) {
        k += buf_num(buf + k, "merged_stacks", nd->merged_stacks);
        k += buf_num(buf + k, "recursions", nd->recursions);
    }
    memcpy(buf + k, ",\"children\":[", 13);
    k += 13;
    return fwrite(buf, 1, k, out) == k ? 0 : -EIO;
}

/* Opens node n: every field, then `"children":[`. */
static int open_node(const cn_agg_profile *p, const cn_agg_tree *t, int32_t n, double scale,
                     FILE *out)
{
    const cn_agg_node *nd = &t->nodes[n];
    int fast = open_node_fast(p, t, n, scale, out);

    if (fast <= 0)
        return fast;
    if (fputc('{', out) == EOF || put_func(p, nd->func, out) < 0 ||
        put_num(out, "total", nd->total * scale) < 0 || put_num(out, "self", nd->self * scale) < 0)
        return -EIO;
    if (t->has_recursion_counts && (put_num(out, "merged_stacks", nd->merged_stacks) < 0 ||
                                    put_num(out, "recursions", nd->recursions) < 0))
        return -EIO;
    return fputs(",\"children\":[", out) < 0 ? -EIO : 0;
}

/* min_percent > 0 (--min-percent): nodes below that share of |total| are left out, with
 * their subtrees, as in the text tree; canopy web keeps its answers to what it can draw. */
static int write_nodes(const cn_agg_profile *p, const cn_agg_tree *t, double scale,
                       double min_percent, FILE *out)
{
    int32_t *order = NULL, *depth = NULL;
    bool *visible = NULL;
    size_t n = 0;
    int32_t open = 0; /* nodes opened and not yet closed */
    bool comma = false;
    int rc;

    rc = cn_fmt__tree_preorder(t, &order, &depth, &n);
    if (rc == 0)
        rc = cn_fmt__tree_visible(t, order, depth, n, -1, min_percent,
                                  t->total != 0 ? fabs(t->total) : 1.0, &visible);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int32_t node = order[i];
        if (!visible[node])
            continue;
        for (; open > depth[i]; open--, comma = true)
            if (fputs("]}", out) < 0)
                rc = -EIO;
        /* Pre-order, and a shown node's parent is shown (cn_fmt__tree_visible): the node
         * opens right inside its parent, the last node opened at depth - 1. */
        assert(open == depth[i]);
        if (comma && fputc(',', out) == EOF)
            rc = -EIO;
        if (rc == 0)
            rc = open_node(p, t, node, scale, out);
        open++;
        comma = false;
    }
    for (; rc == 0 && open > 0; open--)
        if (fputs("]}", out) < 0)
            rc = -EIO;
    free(order);
    free(depth);
    free(visible);
    return rc;
}

static int write_functions(const cn_agg_profile *p, const cn_agg_tree *t, double scale, FILE *out)
{
    for (size_t i = 0; i < t->n_functions; i++) {
        const cn_agg_func_row *r = &t->functions[i];
        if ((i && fputc(',', out) == EOF) || fputc('{', out) == EOF ||
            put_func(p, r->func, out) < 0 || put_num(out, "self", r->self * scale) < 0 ||
            put_num(out, "total", r->total * scale) < 0 || fputc('}', out) == EOF)
            return -EIO;
    }
    return 0;
}

/* The top-level fields before roots/functions, from `{` to the last field. */
static int write_header(const cn_agg_profile *p, const cn_agg_tree *t, const cn_fmt_write_opts *o,
                        double scale, FILE *out)
{
    if (fputs("{\"unit\":", out) < 0 ||
        cn_fmt__json_str(out, cn_agg_unit_name(cn_agg_profile_unit(p))) < 0 ||
        put_num(out, "total", t->total * scale) < 0 || fputs(",\"view\":", out) < 0 ||
        cn_fmt__json_str(out, cn_agg_view_name(t->view)) < 0)
        return -EIO;
    if (t->view == CN_AGG_VIEW_CALLEES && put_num(out, "call_sites", (double)t->call_sites) < 0)
        return -EIO;
    if (t->view == CN_AGG_VIEW_CALLERS &&
        fprintf(out, ",\"mode\":\"%s\"",
                t->callers_mode == CN_AGG_CALLERS_SELF ? "self" : "total") < 0)
        return -EIO;
    if (fputs(",\"transforms\":[", out) < 0)
        return -EIO;
    for (size_t i = 0; o && i < o->n_transforms; i++) {
        char *s = cn_agg_transform_format(&o->transforms[i]);
        if (!s)
            return -ENOMEM;
        int rc = (i && fputc(',', out) == EOF) ? -EIO : cn_fmt__json_str(out, s);
        free(s);
        if (rc < 0)
            return rc;
    }
    if (fputc(']', out) == EOF)
        return -EIO;
    if (o && o->session) {
        if (fputs(",\"session\":", out) < 0 || cn_fmt__json_str(out, o->session) < 0 ||
            fputs(",\"event\":", out) < 0 || cn_fmt__json_str(out, o->event ? o->event : "") < 0 ||
            put_num(out, "samples", (double)o->samples) < 0 ||
            put_num(out, "lost", (double)o->lost) < 0)
            return -EIO;
        if (o->python && (fputs(",\"python\":", out) < 0 || cn_fmt__json_str(out, o->python) < 0))
            return -EIO;
        if (o->cgroup && (fputs(",\"cgroup\":", out) < 0 || cn_fmt__json_str(out, o->cgroup) < 0))
            return -EIO;
        /* How the session's unwinds ended (docs/cli-live.md, "Truncated stacks"). */
        const cn_fmt_unwind *u = &o->unwind;
        if (u->known &&
            (fputs(",\"unwind\":{\"user_stacks\":", out) < 0 ||
             fprintf(out,
                     "%" PRIu64 ",\"complete\":%" PRIu64 ",\"truncated_stack\":%" PRIu64
                     ",\"no_cfi\":%" PRIu64 ",\"read_fault\":%" PRIu64 ",\"other\":%" PRIu64 "}",
                     u->user_stacks, u->outcomes.complete, u->outcomes.truncated_stack,
                     u->outcomes.no_cfi, u->outcomes.read_fault, u->outcomes.other) < 0))
            return -EIO;
    }
    return 0;
}

int cn_fmt_write_json(const cn_agg_profile *p, const cn_agg_tree *t, const cn_fmt_write_opts *o,
                      FILE *out)
{
    double scale;
    int rc;

    if (!p || !t || !out)
        return -EINVAL;
    scale = cn_agg_profile_scale(p);
    rc = write_header(p, t, o, scale, out);
    if (rc < 0)
        return rc;
    if (t->view == CN_AGG_VIEW_FUNCTIONS) {
        if (fputs(",\"functions\":[", out) < 0)
            return -EIO;
        rc = write_functions(p, t, scale, out);
    } else {
        if (fputs(",\"roots\":[", out) < 0)
            return -EIO;
        rc = write_nodes(p, t, scale, o ? o->min_percent : 0, out);
    }
    if (rc < 0)
        return rc;
    return fputs("]}\n", out) < 0 ? -EIO : 0;
}
