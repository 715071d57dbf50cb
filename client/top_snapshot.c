/* top_snapshot.c — what `canopy top` draws, independent of where it comes from.
 *
 * A cn_top_snapshot is a small copy of one query result: the call tree (nodes in arrays,
 * linked parent / first child / next sibling, in display order) and the function list,
 * with names copied so the snapshot outlives the profile or JSON it came from. It is built
 * either from engine results (a saved profile, an in-process session) or from the
 * interface JSON a daemon sends back; cn_top_profile_fetch is the source over a profile.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "live.h"

/* JSON trees deeper than this are refused rather than recursed into. */
#define JSON_MAX_DEPTH 4096

void cn_top_snapshot_clear(cn_top_snapshot *s)
{
    for (size_t i = 0; i < s->n_nodes; i++) {
        free(s->nodes[i].name);
        free(s->nodes[i].lib);
    }
    for (size_t i = 0; i < s->n_funcs; i++) {
        free(s->funcs[i].name);
        free(s->funcs[i].lib);
    }
    free(s->nodes);
    free(s->funcs);
    memset(s, 0, sizeof(*s));
    s->first_root = -1;
    s->last_root = -1;
    s->samples = -1;
    s->lost = -1;
    strcpy(s->unit, "samples");
}

/* Copies name ("?" when NULL) and lib (may be NULL) into *n and *l, both owned by the
 * caller. Returns 0, or -ENOMEM with nothing allocated. */
static int dup_name_lib(const char *name, const char *lib, char **n, char **l)
{
    *n = strdup(name ? name : "?");
    *l = lib ? strdup(lib) : NULL;
    if (!*n || (lib && !*l)) {
        free(*n);
        free(*l);
        return -ENOMEM;
    }
    return 0;
}

int32_t cn_top_snapshot_add(cn_top_snapshot *s, int32_t parent, const char *name, const char *lib,
                            double total, double self)
{
    if (s->n_nodes >= INT32_MAX - 1 || CN_RESERVE(s->nodes, s->cap_nodes, s->n_nodes + 1) < 0)
        return -ENOMEM;
    char *n, *l;
    if (dup_name_lib(name, lib, &n, &l) < 0)
        return -ENOMEM;
    int32_t id = (int32_t)s->n_nodes++;
    s->nodes[id] = (cn_top_node){.name = n,
                                 .lib = l,
                                 .total = total,
                                 .self = self,
                                 .parent = parent,
                                 .first_child = -1,
                                 .next_sibling = -1,
                                 .last_child = -1};
    if (parent < 0) {
        if (s->last_root < 0)
            s->first_root = id;
        else
            s->nodes[s->last_root].next_sibling = id;
        s->last_root = id;
    } else {
        cn_top_node *p = &s->nodes[parent];
        if (p->last_child < 0)
            p->first_child = id;
        else
            s->nodes[p->last_child].next_sibling = id;
        p->last_child = id;
    }
    return id;
}

int cn_top_snapshot_add_func(cn_top_snapshot *s, const char *name, const char *lib, double self,
                             double total)
{
    if (CN_RESERVE(s->funcs, s->cap_funcs, s->n_funcs + 1) < 0)
        return -ENOMEM;
    char *n, *l;
    if (dup_name_lib(name, lib, &n, &l) < 0)
        return -ENOMEM;
    s->funcs[s->n_funcs++] = (cn_top_func){.name = n, .lib = l, .self = self, .total = total};
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * From JSON (docs/cli.md "JSON tree")
 */

static int json_nodes(cn_top_snapshot *s, int32_t parent, const json_t *arr, int depth, cn_err *err)
{
    size_t i;
    const json_t *n;

    if (!json_is_array(arr)) {
        cn_err_set(err, 0, "tree: \"children\" is not an array");
        return -EINVAL;
    }
    if (depth > JSON_MAX_DEPTH) {
        cn_err_set(err, 0, "tree: deeper than %d levels", JSON_MAX_DEPTH);
        return -EINVAL;
    }
    json_array_foreach(arr, i, n)
    {
        const char *name = json_string_value(json_object_get(n, "name"));
        const char *lib = json_string_value(json_object_get(n, "lib"));
        const json_t *tot = json_object_get(n, "total"), *self = json_object_get(n, "self");
        if (!name || !json_is_number(tot)) {
            cn_err_set(err, 0, "tree: a node without a name or a total");
            return -EINVAL;
        }
        int32_t id = cn_top_snapshot_add(s, parent, name, lib, json_number_value(tot),
                                         json_is_number(self) ? json_number_value(self) : 0);
        if (id < 0) {
            cn_err_set(err, 0, "out of memory");
            return id;
        }
        const json_t *ch = json_object_get(n, "children");
        if (ch) {
            int rc = json_nodes(s, id, ch, depth + 1, err);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

int cn_top_snapshot_from_json(cn_top_snapshot *s, const json_t *tree, const json_t *funcs,
                              cn_err *err)
{
    if (!json_is_object(tree)) {
        cn_err_set(err, 0, "tree: not a JSON object");
        return -EINVAL;
    }
    const char *unit = json_string_value(json_object_get(tree, "unit"));
    if (unit)
        snprintf(s->unit, sizeof(s->unit), "%s", unit);
    s->total = json_number_value(json_object_get(tree, "total"));
    const json_t *v;
    if (json_is_integer(v = json_object_get(tree, "samples")))
        s->samples = json_integer_value(v);
    if (json_is_integer(v = json_object_get(tree, "lost")))
        s->lost = json_integer_value(v);
    /* A live session's "unwind" object (docs/cli.md, JSON tree): all six counts or none. */
    if (json_is_object(v = json_object_get(tree, "unwind"))) {
        static const char *const keys[] = {"user_stacks", "complete",   "truncated_stack",
                                           "no_cfi",      "read_fault", "other"};
        cn_unwind_outcomes *o = &s->unwind.outcomes;
        uint64_t *dst[] = {&s->unwind.user_stacks, &o->complete, &o->truncated_stack, &o->no_cfi,
                           &o->read_fault,         &o->other};
        s->unwind.known = true;
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
            const json_t *n = json_object_get(v, keys[i]);
            if (!json_is_integer(n) || json_integer_value(n) < 0) {
                s->unwind.known = false;
                break;
            }
            *dst[i] = (uint64_t)json_integer_value(n);
        }
    }
    const json_t *roots = json_object_get(tree, "roots");
    if (roots) {
        int rc = json_nodes(s, -1, roots, 0, err);
        if (rc < 0)
            return rc;
    }
    if (!funcs)
        return 0;
    const json_t *arr = json_object_get(funcs, "functions");
    size_t i;
    const json_t *f;
    if (!json_is_array(arr)) {
        cn_err_set(err, 0, "functions: no \"functions\" array");
        return -EINVAL;
    }
    json_array_foreach(arr, i, f)
    {
        const char *name = json_string_value(json_object_get(f, "name"));
        if (!name) {
            cn_err_set(err, 0, "functions: an entry without a name");
            return -EINVAL;
        }
        if (cn_top_snapshot_add_func(s, name, json_string_value(json_object_get(f, "lib")),
                                     json_number_value(json_object_get(f, "self")),
                                     json_number_value(json_object_get(f, "total"))) < 0) {
            cn_err_set(err, 0, "out of memory");
            return -ENOMEM;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * From engine results
 */

static const char *func_lib(const cn_agg_profile *p, int32_t func)
{
    int32_t res = cn_agg_func_resource(p, func);
    return res >= 0 ? cn_agg_resource_name(p, res) : NULL;
}

int cn_top_snapshot_from_agg(cn_top_snapshot *s, const cn_agg_profile *p, const cn_agg_tree *tree,
                             const cn_agg_tree *funcs)
{
    double scale = cn_agg_profile_scale(p);
    int32_t *map = NULL;

    snprintf(s->unit, sizeof(s->unit), "%s", cn_agg_unit_name(cn_agg_profile_unit(p)));
    s->total = tree->total * scale;
    if (tree->n_nodes) {
        /* Nodes are visited in display order, depth first, so parents come first. */
        map = malloc(tree->n_nodes * sizeof(*map));
        int32_t *stack = malloc(tree->n_nodes * sizeof(*stack));
        if (!map || !stack) {
            free(stack);
            free(map);
            return -ENOMEM;
        }
        size_t sp = 0;
        /* Push roots in reverse order so the first root pops first. */
        size_t n_roots = 0;
        for (int32_t r = tree->first_root; r >= 0; r = tree->nodes[r].next_sibling)
            stack[sp++] = r, n_roots++;
        for (size_t a = 0, b = n_roots; b > a + 1; a++, b--) {
            int32_t t = stack[a];
            stack[a] = stack[b - 1];
            stack[b - 1] = t;
        }
        while (sp) {
            int32_t id = stack[--sp];
            const cn_agg_node *n = &tree->nodes[id];
            int32_t parent = n->parent >= 0 ? map[n->parent] : -1;
            int32_t nid =
                cn_top_snapshot_add(s, parent, cn_agg_func_name(p, n->func), func_lib(p, n->func),
                                    n->total * scale, n->self * scale);
            if (nid < 0) {
                free(stack);
                free(map);
                return nid;
            }
            map[id] = nid;
            size_t base = sp;
            for (int32_t c = n->first_child; c >= 0; c = tree->nodes[c].next_sibling)
                stack[sp++] = c;
            for (size_t a = base, b = sp; b > a + 1; a++, b--) {
                int32_t t = stack[a];
                stack[a] = stack[b - 1];
                stack[b - 1] = t;
            }
        }
        free(stack);
        free(map);
    }
    if (funcs) {
        for (size_t i = 0; i < funcs->n_functions; i++) {
            const cn_agg_func_row *r = &funcs->functions[i];
            if (cn_top_snapshot_add_func(s, cn_agg_func_name(p, r->func), func_lib(p, r->func),
                                         r->self * scale, r->total * scale) < 0)
                return -ENOMEM;
        }
    }
    return 0;
}

/* The time just past the profile's last sample (the span a file covers). */
static int64_t profile_end_ns(const cn_agg_profile *p)
{
    int64_t end = 0;
    size_t n = cn_agg_sample_count(p);
    for (size_t i = 0; i < n; i++) {
        int64_t t = cn_agg_sample_time(p, i);
        if (t >= end)
            end = t + 1;
    }
    return end;
}

int cn_top_profile_fetch(void *ctx, const cn_top_request *req, cn_top_snapshot *out, cn_err *err)
{
    cn_top_profile_source *ps = ctx;
    cn_agg_tree *tree = NULL, *funcs = NULL;
    cn_fmt_spec spec; /* borrows req's transforms through spec.query; owns nothing */
    cn_fmt_render_opts o;
    cn_agg_query q;
    int rc;

    cn_fmt_spec_init(&spec);
    spec.query.transforms = req->transforms;
    spec.query.n_transforms = req->n_transforms;
    spec.query.view = req->inverted ? CN_AGG_VIEW_INVERTED : CN_AGG_VIEW_TREE;
    spec.query.group_by = req->group_by;
    if (req->window_ns > 0)
        spec.last_ns = req->window_ns;
    if (ps->session)
        cn_live_session_render_opts(ps->session, NULL, &o);
    else
        cn_fmt_render_opts_init(&o);
    if ((rc = cn_fmt_spec_check(ps->profile, &spec, err)) < 0)
        goto fail;
    cn_fmt_spec_resolve(ps->profile, &spec, &o, &q);
    rc = cn_agg_query_run(ps->profile, &q, &tree, err);
    if (rc < 0)
        goto fail;
    q.view = CN_AGG_VIEW_FUNCTIONS;
    rc = cn_agg_query_run(ps->profile, &q, &funcs, err);
    if (rc < 0)
        goto fail;
    rc = cn_top_snapshot_from_agg(out, ps->profile, tree, funcs);
    if (rc < 0) {
        cn_err_set(err, 0, "out of memory");
        goto fail;
    }
    out->samples = ps->session ? o.samples : -1;
    out->lost = ps->session ? o.lost : -1;
    out->unwind = o.unwind; /* known only for a session */
    out->span_s = (double)(ps->session ? o.now_ns : profile_end_ns(ps->profile)) / 1e9;
    cn_agg_tree_free(funcs);
    cn_agg_tree_free(tree);
    return 0;
fail:
    if (err && !err->msg[0])
        cn_err_set(err, 0, "query failed");
    cn_agg_tree_free(funcs);
    cn_agg_tree_free(tree);
    return rc;
}
