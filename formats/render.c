/* render.c — the one renderer from (profile, spec) to bytes: cn_fmt_render.
 *
 * `canopy open`, the CLI's in-process sessions and canopyd all call it, so the same spec
 * on the same profile gives the same bytes whichever side renders it. The steps, in order:
 * resolve the time range (docs/cli.md "QUERY options": --last measured back from the
 * profile's last sample, or from a live session's "now"); check transform arguments
 * against the untransformed profile (unknown function or library: -ENOENT, exit 2); look
 * for transform PATHs that name no call node path (a note, not an error: docs/cli.md
 * "Transforms"); then one switch over the formats, with two branches before it: a
 * differential profile (cn_agg_is_diff) has its own writers, and a timeline (spec's flag,
 * or chrome-trace) runs cn_agg_timeline instead of a query.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cn_fmt.h"

void cn_fmt_render_opts_init(cn_fmt_render_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->normalize = true;
}

/* ---- range and checks ------------------------------------------------------------- */

/* The time --last counts back from: a live "now", else the profile's last sample
 * (INT64_MIN for a profile without samples: then --last keeps everything). */
static int64_t range_end(const cn_agg_profile *p, const cn_fmt_render_opts *opts)
{
    if (opts && opts->has_now)
        return opts->now_ns;
    int64_t end = INT64_MIN;
    for (size_t i = 0, n = cn_agg_sample_count(p); i < n; i++) {
        int64_t t = cn_agg_sample_time(p, i);
        if (t > end)
            end = t;
    }
    return end;
}

void cn_fmt_spec_resolve(const cn_agg_profile *p, const cn_fmt_spec *spec,
                         const cn_fmt_render_opts *opts, cn_agg_query *out)
{
    *out = spec->query;
    out->from_ns = INT64_MIN;
    out->to_ns = INT64_MAX;
    if (spec->last_ns >= 0) {
        int64_t end = range_end(p, opts);
        /* The window [end - DURATION, end]; saturating at the start of time. */
        if (end != INT64_MIN)
            out->from_ns = end >= INT64_MIN + spec->last_ns ? end - spec->last_ns : INT64_MIN;
    }
    /* --from/--to win over --last: the CLI refuses both together, the protocol does not. */
    if (!isnan(spec->from_s))
        out->from_ns = (int64_t)llround(spec->from_s * 1e9);
    if (!isnan(spec->to_s))
        out->to_ns = (int64_t)llround(spec->to_s * 1e9);
}

static void free_transforms(cn_agg_transform *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++)
        cn_agg_transform_clear(&t[i]);
    free(t);
}

int cn_fmt_spec_check(cn_agg_profile *p, const cn_fmt_spec *spec, cn_err *err)
{
    for (size_t i = 0; i < spec->query.n_transforms; i++) {
        int r = cn_agg_transform_check(p, &spec->query.transforms[i], err);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Held transforms after symbolication (docs/calltree.md §4.3): a transform written while a
 * frame was still `LIB+0xOFFSET` names its function once symbols arrived. *copy is spec
 * with its transforms replaced by remapped copies (*owned, n of them; NULL when the
 * profile renamed nothing and spec is used as it is): the JSON tree echoes them, which is
 * how `canopy web` learns where its held call node paths went. 0 or -ENOMEM. */
static int remap_spec(const cn_agg_profile *p, const cn_fmt_spec *spec, cn_fmt_spec *copy,
                      cn_agg_transform **owned, cn_err *err)
{
    size_t n = spec->query.n_transforms;
    *copy = *spec;
    *owned = NULL;
    if (!n || !cn_agg_rename_count(p))
        return 0;
    cn_agg_transform *t = calloc(n, sizeof(*t));
    if (!t)
        return cn_err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (cn_agg_transform_copy(&spec->query.transforms[i], &t[i]) < 0 ||
            cn_agg_remap_transform(p, &t[i]) < 0) {
            free_transforms(t, i + 1);
            return cn_err_set(err, -ENOMEM, "out of memory");
        }
    }
    copy->query.transforms = t;
    *owned = t;
    return 0;
}

int cn_fmt_timeline_check(const cn_fmt_spec *spec, cn_err *err)
{
    cn_fmt_format f = spec->format;
    if (f != CN_FMT_TEXT && f != CN_FMT_JSON && f != CN_FMT_CHROME_TRACE && f != CN_FMT_SPEEDSCOPE)
        return cn_err_set(err, -EINVAL,
                          "--format %s: expected text, json, chrome-trace or speedscope",
                          cn_fmt_format_name(f));
    if (spec->query.view != CN_AGG_VIEW_TREE || spec->query.group_by != CN_AGG_GROUP_NONE)
        return cn_err_set(err, -EINVAL, "views and --group-by do not apply to a timeline");
    return 0;
}

/* True when some chain of nodes from a root, named path[0], path[1], …, exists below
 * `first` (siblings linked through next_sibling). Several funcs may share a name, so
 * every matching sibling is tried. */
static bool path_exists(const cn_agg_profile *p, const cn_agg_tree *t, int32_t first,
                        char *const *path, size_t len)
{
    if (len == 0)
        return true;
    for (int32_t n = first; n >= 0; n = t->nodes[n].next_sibling) {
        const char *name = cn_agg_func_name(p, t->nodes[n].func);
        if (name && !strcmp(name, path[0]) &&
            path_exists(p, t, t->nodes[n].first_child, path + 1, len - 1))
            return true;
    }
    return false;
}

/* Appends a note to notes when transform i's PATH is no call node path of the tree it
 * applies to (the tree after transforms 0..i-1; the inverted tree for focus-inverted).
 * Returns 0 or negative errno with err set. */
static int note_unmatched_path(cn_agg_profile *p, const cn_agg_query *q, size_t i, cn_buf *notes,
                               cn_err *err)
{
    const cn_agg_transform *t = &q->transforms[i];
    cn_agg_query sub = *q;
    cn_agg_tree *tree = NULL;

    sub.n_transforms = i;
    sub.view = t->kind == CN_AGG_TF_FOCUS_INVERTED ? CN_AGG_VIEW_INVERTED : CN_AGG_VIEW_TREE;
    sub.view_func = NULL;
    sub.group_by = CN_AGG_GROUP_NONE;
    int r = cn_agg_query_run(p, &sub, &tree, err);
    if (r < 0)
        return r;
    if (!path_exists(p, tree, tree->first_root, t->path, t->path_len)) {
        char *text = cn_agg_transform_format(t);
        r = cn_buf_appendf(
            notes, "note: '%s': '%s' is not a call node path%s; applied as written\n",
            text ? text : t->arg, t->arg, i ? " after the transforms before it" : "");
        free(text);
        if (r < 0)
            cn_err_set(err, r, "out of memory");
    }
    cn_agg_tree_free(tree);
    return r < 0 ? r : 0;
}

/* ---- writers ---------------------------------------------------------------------- */

/* A writer failed without saying why: name the format and the errno. */
static int write_failed(int r, cn_fmt_format f, cn_err *err)
{
    if (err && !err->msg[0])
        cn_err_set(err, r, "writing %s output: %s", cn_fmt_format_name(f), strerror(-r));
    return r;
}

static void write_opts(const cn_fmt_spec *spec, const cn_fmt_render_opts *opts,
                       cn_fmt_write_opts *o)
{
    cn_fmt_write_opts_init(o);
    if (opts) {
        o->title = opts->title;
        o->session = opts->session;
        o->event = opts->event;
        o->samples = opts->samples;
        o->lost = opts->lost;
        o->unwind = opts->unwind;
        o->python = opts->python;
        o->cgroup = opts->cgroup;
    }
    o->max_depth = spec->depth;
    o->min_percent = spec->min_percent;
    o->color = spec->color;
    o->transforms = spec->query.transforms;
    o->n_transforms = spec->query.n_transforms;
}

/* A differential profile d: the sides' ranges and thread filters were applied when d was
 * built, so only the transforms and the view apply here. */
static int render_diff(cn_agg_profile *d, const cn_fmt_spec *spec, const cn_agg_query *q,
                       const cn_fmt_render_opts *opts, FILE *out, cn_err *err)
{
    cn_agg_query dq = *q;
    cn_fmt_write_opts o;
    cn_agg_diff *r = NULL;
    int rc;

    dq.from_ns = INT64_MIN;
    dq.to_ns = INT64_MAX;
    dq.tid = dq.pid = -1;
    write_opts(spec, opts, &o);
    o.color = false; /* the differential writers colour by change, not by terminal */
    switch (spec->format) {
    case CN_FMT_FOLDED:
        return cn_fmt_write_diff_folded(d, &dq, out, err);
    case CN_FMT_CANOPY:
        return write_failed(cn_agg_write_canopy(d, out), spec->format, err);
    case CN_FMT_TEXT:
    case CN_FMT_JSON:
    case CN_FMT_SVG:
        break;
    default:
        return cn_err_set(err, -EINVAL,
                          "--format %s is not available for differential profiles "
                          "(text, json, folded, svg, canopy)",
                          cn_fmt_format_name(spec->format));
    }
    if ((rc = cn_agg_diff_run(d, &dq, !opts || opts->normalize, &r, err)) < 0)
        return rc;
    if (spec->format == CN_FMT_JSON)
        rc = cn_fmt_write_diff_json(d, r, &o, out);
    else if (spec->format == CN_FMT_SVG)
        rc = cn_fmt_write_diff_svg(d, r, &o, out, err);
    else
        rc = cn_fmt_write_diff_text(d, r, &o, out);
    cn_agg_diff_free(r);
    return rc < 0 ? write_failed(rc, spec->format, err) : 0;
}

/* The estimated call timeline in text, JSON, Chrome trace or speedscope. */
static int render_timeline(cn_agg_profile *p, const cn_fmt_spec *spec, const cn_agg_query *q,
                           FILE *out, cn_err *err)
{
    cn_agg_call *calls = NULL;
    size_t n = 0;
    /* chrome-trace is a timeline whatever the view: only an explicit timeline is checked. */
    int r = spec->timeline ? cn_fmt_timeline_check(spec, err) : 0;

    if (r == 0)
        r = cn_agg_timeline(p, q, &calls, &n, err);
    if (r < 0)
        return r;
    if (spec->format == CN_FMT_JSON)
        r = cn_fmt_write_timeline_json(p, calls, n, out);
    else if (spec->format == CN_FMT_CHROME_TRACE)
        r = cn_fmt_write_chrome_trace(p, calls, n, out);
    else if (spec->format == CN_FMT_SPEEDSCOPE)
        r = cn_fmt_write_timeline_speedscope(p, calls, n, out, err);
    else
        r = cn_fmt_write_timeline_text(p, calls, n, out);
    free(calls);
    return r < 0 ? write_failed(r, spec->format, err) : 0;
}

/* A tree in text or JSON. */
static int render_tree(cn_agg_profile *p, const cn_fmt_spec *spec, const cn_agg_query *q,
                       const cn_fmt_write_opts *o, FILE *out, cn_err *err)
{
    cn_agg_tree *tree = NULL;
    int r = cn_agg_query_run(p, q, &tree, err);

    if (r < 0)
        return r;
    r = spec->format == CN_FMT_JSON ? cn_fmt_write_json(p, tree, o, out)
                                    : cn_fmt_write_text(p, tree, o, out);
    cn_agg_tree_free(tree);
    return r < 0 ? write_failed(r, spec->format, err) : 0;
}

/* cn_fmt_render after remap_spec: spec's transforms already remapped. */
static int render_remapped(cn_agg_profile *p, const cn_fmt_spec *spec,
                           const cn_fmt_render_opts *opts, FILE *out, cn_err *err)
{
    cn_agg_query q;
    cn_fmt_write_opts o;
    int r;

    cn_fmt_spec_resolve(p, spec, opts, &q);
    if ((r = cn_fmt_spec_check(p, spec, err)) < 0)
        return r;
    for (size_t i = 0; opts && opts->notes && i < q.n_transforms; i++) {
        if (cn_agg_tf_takes_path(q.transforms[i].kind) &&
            (r = note_unmatched_path(p, &q, i, opts->notes, err)) < 0)
            return r;
    }
    if (cn_agg_is_diff(p))
        return render_diff(p, spec, &q, opts, out, err);
    if (spec->timeline || spec->format == CN_FMT_CHROME_TRACE)
        return render_timeline(p, spec, &q, out, err);
    write_opts(spec, opts, &o);
    switch (spec->format) {
    case CN_FMT_TEXT:
    case CN_FMT_JSON:
        return render_tree(p, spec, &q, &o, out, err);
    case CN_FMT_FOLDED:
        r = cn_fmt_write_folded(p, &q, out, err);
        break;
    case CN_FMT_PPROF:
        r = cn_fmt_write_pprof(p, &q, out, err);
        break;
    case CN_FMT_SPEEDSCOPE:
        r = cn_fmt_write_speedscope(p, &q, out, err);
        break;
    case CN_FMT_OTLP:
        r = cn_fmt_write_otlp(p, &q, opts ? opts->otlp : NULL, out, err);
        break;
    case CN_FMT_FIREFOX:
        r = cn_fmt_write_firefox(p, &q, out, err);
        break;
    case CN_FMT_ACTIVITY:
        r = cn_fmt_write_activity(p, &q, out, err);
        break;
    case CN_FMT_SVG:
        r = cn_fmt_write_svg(p, &q, &o, out, err);
        break;
    case CN_FMT_CANOPY:
        r = cn_agg_write_canopy(p, out);
        break;
    default:
        return cn_err_set(err, -EINVAL, "unknown format %d", (int)spec->format);
    }
    return r < 0 ? write_failed(r, spec->format, err) : 0;
}

int cn_fmt_render(cn_agg_profile *p, const cn_fmt_spec *spec, const cn_fmt_render_opts *opts,
                  FILE *out, cn_err *err)
{
    cn_fmt_spec s;
    cn_agg_transform *owned = NULL;

    if (err)
        err->msg[0] = '\0';
    int r = remap_spec(p, spec, &s, &owned, err);
    if (r == 0)
        r = render_remapped(p, &s, opts, out, err);
    free_transforms(owned, spec->query.n_transforms);
    return r;
}

/* ---- lines ------------------------------------------------------------------------ */

int cn_fmt_lines_json(cn_agg_profile *p, const cn_fmt_spec *spec, const cn_fmt_render_opts *opts,
                      const char *func, json_t **out, cn_err *err)
{
    cn_agg_line_row *lines = NULL, *addrs = NULL;
    size_t n_lines = 0, n_addrs = 0;
    json_t *o = NULL, *la = NULL, *aa = NULL;
    cn_agg_query q;

    cn_fmt_spec s;
    cn_agg_transform *owned = NULL;

    *out = NULL;
    if (err)
        err->msg[0] = '\0';
    int rc = remap_spec(p, spec, &s, &owned, err);
    if (rc < 0)
        return rc;
    cn_fmt_spec_resolve(p, &s, opts, &q);
    rc = cn_fmt_spec_check(p, &s, err);
    if (rc == 0)
        rc = cn_agg_lines(p, &q, func, &lines, &n_lines, &addrs, &n_addrs, err);
    if (rc < 0) {
        if (rc == -ENOENT && err && !err->msg[0])
            cn_err_set(err, rc, "function '%s' occurs nowhere in the profile", func);
        goto out;
    }
    double scale = cn_agg_profile_scale(p);
    const char *lib = NULL, *file = NULL, *kind = NULL;
    for (size_t f = 0; f < cn_agg_func_count(p); f++) {
        if (strcmp(cn_agg_func_name(p, (int32_t)f), func))
            continue;
        int32_t res = cn_agg_func_resource(p, (int32_t)f);
        lib = res >= 0 ? cn_agg_resource_name(p, res) : NULL;
        file = cn_agg_func_file(p, (int32_t)f);
        kind = res >= 0 ? cn_agg_resource_kind_marker(cn_agg_resource_kind_of(p, res)) : NULL;
        break;
    }
    /* docs/cli.md "Other JSON outputs": lib, kind and file are left out when unknown. */
    int bad = !(o = json_object()) || !(la = json_array()) || !(aa = json_array());
    if (!bad) {
        /* Names of any bytes: the one UTF-8 rule (cn_proto_string), never a NULL here. */
        bad |= json_object_set_new(o, "function", cn_proto_str(func));
        if (lib)
            bad |= json_object_set_new(o, "lib", cn_proto_str(lib));
        if (kind)
            bad |= json_object_set_new(o, "kind", json_string(kind));
        if (file)
            bad |= json_object_set_new(o, "file", cn_proto_str(file));
        bad |=
            json_object_set_new(o, "unit", json_string(cn_agg_unit_name(cn_agg_profile_unit(p))));
        for (size_t i = 0; i < n_lines && !bad; i++)
            bad |= json_array_append_new(la, json_pack("{sI sf}", "line", (json_int_t)lines[i].key,
                                                       "self", lines[i].self * scale));
        for (size_t i = 0; i < n_addrs && !bad; i++)
            bad |=
                json_array_append_new(aa, json_pack("{sI sf}", "offset", (json_int_t)addrs[i].key,
                                                    "self", addrs[i].self * scale));
        bad |= json_object_set(o, "lines", la);
        bad |= json_object_set(o, "addresses", aa);
    }
    if (bad) {
        json_decref(o);
        rc = cn_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    *out = o;
out:
    json_decref(la);
    json_decref(aa);
    free(lines);
    free(addrs);
    free_transforms(owned, spec->query.n_transforms);
    return rc;
}
