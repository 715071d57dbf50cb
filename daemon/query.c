/* query.c — the protocol's QUERY fields (docs/protocol.md "Queries") decoded into
 * aggregate's cn_agg_query, and rendered with aggregate's writers into a byte buffer, so
 * a daemon session answers exactly what `canopy open` prints for the same profile. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "d_internal.h"

static const char *const format_names[] = {
    [CN_FMT_TEXT] = "text",
    [CN_FMT_JSON] = "json",
    [CN_FMT_FOLDED] = "folded",
    [CN_FMT_CANOPY] = "canopy",
    [CN_FMT_PPROF] = "pprof",
    [CN_FMT_SPEEDSCOPE] = "speedscope",
    [CN_FMT_CHROME_TRACE] = "chrome-trace",
    [CN_FMT_SVG] = "svg",
};

const char *cn_d_format_name(cn_fmt_format f)
{
    return (size_t)f < sizeof(format_names) / sizeof(format_names[0]) ? format_names[f] : "?";
}

int cn_d_format_parse(const char *name, cn_fmt_format *out)
{
    for (size_t i = 0; i < sizeof(format_names) / sizeof(format_names[0]); i++) {
        if (format_names[i] && !strcmp(name, format_names[i])) {
            *out = (cn_fmt_format)i;
            return 0;
        }
    }
    return -EINVAL;
}

void cn_d_query_init(cn_d_query *q)
{
    memset(q, 0, sizeof(*q));
    cn_agg_query_init(&q->q);
    q->last_ns = -1;
    q->from_s = NAN;
    q->to_s = NAN;
    q->format = CN_FMT_JSON;
    q->depth = -1;
}

void cn_d_query_clear(cn_d_query *q)
{
    for (size_t i = 0; i < q->n_transforms; i++)
        cn_agg_transform_clear(&q->transforms[i]);
    free(q->transforms);
    free(q->view_func);
    free(q->last);
    cn_d_query_init(q);
}

static const char *const view_names[] = {"tree", "inverted", "callees", "callers", "functions"};

static int pick(const char *v, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v, names[i]))
            return (int)i;
    return -1;
}

static int decode_transforms(const json_t *req, cn_d_query *q, cn_err *err)
{
    json_t *a = json_object_get(req, "transforms");
    if (!a || json_is_null(a))
        return 0;
    if (!json_is_array(a))
        return cn_err_set(err, -EINVAL, "\"transforms\" must be an array of SPEC strings");
    size_t n = json_array_size(a);
    if (n > 1024)
        return cn_err_set(err, -EINVAL, "too many transforms (%zu, at most 1024)", n);
    q->transforms = calloc(n ? n : 1, sizeof(*q->transforms));
    if (!q->transforms)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(a, i);
        if (!json_is_string(t))
            return cn_err_set(err, -EINVAL, "\"transforms\"[%zu] must be a string", i);
        cn_err aerr = {0};
        int r = cn_agg_transform_parse(json_string_value(t), &q->transforms[i], &aerr);
        if (r < 0)
            return cn_err_set(err, r, "%s", aerr.msg);
        q->n_transforms++;
    }
    return 0;
}

int cn_d_query_from_json(const json_t *req, cn_d_query *q, cn_err *err)
{
    cn_err pe;
    const char *s = NULL;
    int64_t iv;
    double dv;
    int r = decode_transforms(req, q, err);
    if (r < 0)
        return r;
    q->q.transforms = q->transforms;
    q->q.n_transforms = q->n_transforms;

#define GET(kind, key, var)                                                                        \
    do {                                                                                           \
        r = cn_proto_get_##kind(req, key, &var, &pe);                                              \
        if (r < 0)                                                                                 \
            return cn_err_set(err, r, "%s", pe.msg);                                               \
    } while (0)

    s = NULL;
    GET(str, "view", s);
    if (s) {
        int v = pick(s, view_names, 5);
        if (v < 0)
            return cn_err_set(err, -EINVAL,
                              "unknown view '%s' (tree, inverted, callees, callers, "
                              "functions)",
                              s);
        q->q.view = (cn_agg_view)v;
    }
    s = NULL;
    GET(str, "view_func", s);
    if (s && !(q->view_func = strdup(s)))
        return -ENOMEM;
    q->q.view_func = q->view_func;
    if ((q->q.view == CN_AGG_VIEW_CALLEES || q->q.view == CN_AGG_VIEW_CALLERS) && !q->view_func)
        return cn_err_set(err, -EINVAL, "view '%s' needs \"view_func\"", view_names[q->q.view]);
    s = NULL;
    GET(str, "callers_mode", s);
    if (s) {
        static const char *const modes[] = {"total", "self"};
        int v = pick(s, modes, 2);
        if (v < 0)
            return cn_err_set(err, -EINVAL, "unknown callers_mode '%s' (total, self)", s);
        q->q.callers_mode = (cn_agg_callers_mode)v;
    }
    s = NULL;
    GET(str, "group_by", s);
    if (s) {
        static const char *const groups[] = {"none", "process", "thread"};
        int v = pick(s, groups, 3);
        if (v < 0)
            return cn_err_set(err, -EINVAL, "unknown group_by '%s' (none, process, thread)", s);
        q->q.group_by = (cn_agg_group_by)v;
    }
    s = NULL;
    GET(str, "last", s);
    if (s) {
        if (cn_common_parse_duration(s, &q->last_ns) < 0)
            return cn_err_set(err, -EINVAL, "bad duration for \"last\": '%s'", s);
        if (!(q->last = strdup(s)))
            return -ENOMEM;
    }
    dv = NAN;
    GET(num, "from", dv);
    q->from_s = dv;
    dv = NAN;
    GET(num, "to", dv);
    q->to_s = dv;
    if ((!isnan(q->from_s) && (q->from_s < 0 || q->from_s > 9e9)) ||
        (!isnan(q->to_s) && (q->to_s < 0 || q->to_s > 9e9)))
        return cn_err_set(err, -EINVAL, "\"from\" and \"to\" are seconds since the session start");
    iv = -1;
    GET(int, "tid", iv);
    if (iv < -1 || iv > INT32_MAX)
        return cn_err_set(err, -EINVAL, "bad \"tid\"");
    q->q.tid = (int32_t)iv;
    iv = -1;
    GET(int, "only_pid", iv);
    if (iv < -1 || iv > INT32_MAX)
        return cn_err_set(err, -EINVAL, "bad \"only_pid\"");
    q->q.pid = (int32_t)iv;
    iv = -1;
    GET(int, "depth", iv);
    if (iv < -1 || iv > 1000000)
        return cn_err_set(err, -EINVAL, "bad \"depth\"");
    q->depth = (int)iv;
    dv = 0;
    GET(num, "min_percent", dv);
    if (dv < 0 || dv > 100)
        return cn_err_set(err, -EINVAL, "\"min_percent\" must be between 0 and 100");
    q->min_percent = dv;
    GET(bool, "color", q->color);
    s = NULL;
    GET(str, "format", s);
    if (s && cn_d_format_parse(s, &q->format) < 0)
        return cn_err_set(err, -EINVAL, "unknown format '%s'", s);
#undef GET
    return 0;
}

int cn_d_query_to_json(const cn_d_query *q, json_t *req)
{
    int r = 0;
    if (q->n_transforms) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < q->n_transforms; i++) {
            char *spec = cn_agg_transform_format(&q->transforms[i]);
            r |= spec ? json_array_append_new(a, json_string(spec)) : -1;
            free(spec);
        }
        r |= json_object_set_new(req, "transforms", a);
    }
    if (q->q.view != CN_AGG_VIEW_TREE)
        r |= json_object_set_new(req, "view", json_string(view_names[q->q.view]));
    if (q->view_func)
        r |= json_object_set_new(req, "view_func", json_string(q->view_func));
    if (q->q.callers_mode == CN_AGG_CALLERS_SELF)
        r |= json_object_set_new(req, "callers_mode", json_string("self"));
    if (q->q.group_by != CN_AGG_GROUP_NONE)
        r |= json_object_set_new(
            req, "group_by",
            json_string(q->q.group_by == CN_AGG_GROUP_PROCESS ? "process" : "thread"));
    if (q->last)
        r |= json_object_set_new(req, "last", json_string(q->last));
    if (!isnan(q->from_s))
        r |= json_object_set_new(req, "from", json_real(q->from_s));
    if (!isnan(q->to_s))
        r |= json_object_set_new(req, "to", json_real(q->to_s));
    if (q->q.tid >= 0)
        r |= json_object_set_new(req, "tid", json_integer(q->q.tid));
    if (q->q.pid >= 0)
        r |= json_object_set_new(req, "only_pid", json_integer(q->q.pid));
    if (q->depth >= 0)
        r |= json_object_set_new(req, "depth", json_integer(q->depth));
    if (q->min_percent > 0)
        r |= json_object_set_new(req, "min_percent", json_real(q->min_percent));
    if (q->color)
        r |= json_object_set_new(req, "color", json_true());
    r |= json_object_set_new(req, "format", json_string(cn_d_format_name(q->format)));
    return r ? -ENOMEM : 0;
}

/* ---- rendering --------------------------------------------------------------------- */

/* The engine query with the time range resolved against the session's clock. */
static void resolve_range(const cn_live_session *s, const cn_d_query *q, cn_agg_query *out)
{
    *out = q->q;
    if (q->last_ns >= 0) {
        int64_t now = cn_live_session_now(s);
        out->from_ns = now - q->last_ns;
        out->to_ns = INT64_MAX;
    }
    if (!isnan(q->from_s))
        out->from_ns = (int64_t)(q->from_s * 1e9);
    if (!isnan(q->to_s))
        out->to_ns = (int64_t)(q->to_s * 1e9);
}

static int check_transforms(cn_live_session *s, const cn_d_query *q, cn_err *err)
{
    for (size_t i = 0; i < q->n_transforms; i++) {
        cn_err aerr = {0};
        int r = cn_agg_transform_check(cn_live_session_profile(s), &q->transforms[i], &aerr);
        if (r < 0)
            return cn_err_set(err, r, "%s", aerr.msg);
    }
    return 0;
}

static int render_to(cn_live_session *s, const cn_d_query *q, const cn_agg_query *aq, FILE *f,
                     cn_err *err)
{
    cn_err aerr = {0};
    cn_agg_tree *tree = NULL;
    cn_agg_call *calls = NULL;
    size_t ncalls = 0;
    int r;
    cn_fmt_write_opts o;
    cn_fmt_write_opts_init(&o);
    cn_live_session_info info;
    cn_live_session_info_get(s, &info);
    o.title = cn_live_session_name(s) ? cn_live_session_name(s) : cn_live_session_id(s);
    o.max_depth = q->depth;
    o.min_percent = q->min_percent;
    o.color = q->color;
    o.transforms = q->transforms;
    o.n_transforms = q->n_transforms;
    o.session = cn_live_session_id(s);
    o.event = info.event;
    o.samples = (int64_t)info.samples;
    o.lost = (int64_t)info.lost;
    switch (q->format) {
    case CN_FMT_TEXT:
    case CN_FMT_JSON:
        r = cn_agg_query_run(cn_live_session_profile(s), aq, &tree, &aerr);
        if (r == 0)
            r = q->format == CN_FMT_TEXT
                    ? cn_fmt_write_text(cn_live_session_profile(s), tree, &o, f)
                    : cn_fmt_write_json(cn_live_session_profile(s), tree, &o, f);
        break;
    case CN_FMT_FOLDED:
        r = cn_fmt_write_folded(cn_live_session_profile(s), aq, f, &aerr);
        break;
    case CN_FMT_CANOPY:
        r = cn_agg_write_canopy(cn_live_session_profile(s), f);
        break;
    case CN_FMT_PPROF:
        r = cn_fmt_write_pprof(cn_live_session_profile(s), aq, f, &aerr);
        break;
    case CN_FMT_SPEEDSCOPE:
        r = cn_fmt_write_speedscope(cn_live_session_profile(s), aq, f, &aerr);
        break;
    case CN_FMT_SVG:
        r = cn_fmt_write_svg(cn_live_session_profile(s), aq, &o, f, &aerr);
        break;
    case CN_FMT_CHROME_TRACE:
        r = cn_agg_timeline(cn_live_session_profile(s), aq, &calls, &ncalls, &aerr);
        if (r == 0)
            r = cn_fmt_write_chrome_trace(cn_live_session_profile(s), calls, ncalls, f);
        break;
    default:
        r = -EINVAL;
        break;
    }
    if (r < 0)
        cn_err_set(err, r, "%s", aerr.msg[0] ? aerr.msg : strerror(-r));
    cn_agg_tree_free(tree);
    free(calls);
    return r;
}

/* Runs fn into a memory stream and appends the bytes to out. */
static int to_buf(cn_live_session *s, const cn_d_query *q, cn_buf *out, cn_err *err, bool timeline)
{
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    if (!f)
        return cn_err_set(err, -ENOMEM, "out of memory");
    cn_agg_query aq;
    resolve_range(s, q, &aq);
    int r = check_transforms(s, q, err);
    if (r == 0 && timeline) {
        cn_err aerr = {0};
        cn_agg_call *calls = NULL;
        size_t n = 0;
        r = cn_agg_timeline(cn_live_session_profile(s), &aq, &calls, &n, &aerr);
        if (r == 0) {
            if (q->format == CN_FMT_TEXT)
                r = cn_fmt_write_timeline_text(cn_live_session_profile(s), calls, n, f);
            else if (q->format == CN_FMT_CHROME_TRACE)
                r = cn_fmt_write_chrome_trace(cn_live_session_profile(s), calls, n, f);
            else
                r = cn_fmt_write_timeline_json(cn_live_session_profile(s), calls, n, f);
        } else {
            cn_err_set(err, r, "%s", aerr.msg);
        }
        free(calls);
    } else if (r == 0) {
        r = render_to(s, q, &aq, f, err);
    }
    if (fclose(f) != 0 && r == 0)
        r = cn_err_set(err, -ENOMEM, "out of memory");
    if (r == 0 && (r = cn_buf_append(out, mem, len)) < 0)
        cn_err_set(err, r, "output too large");
    free(mem);
    return r;
}

int cn_d_render(cn_live_session *s, const cn_d_query *q, cn_buf *out, cn_err *err)
{
    return to_buf(s, q, out, err, false);
}

int cn_d_render_timeline(cn_live_session *s, const cn_d_query *q, cn_buf *out, cn_err *err)
{
    return to_buf(s, q, out, err, true);
}

json_t *cn_d_lines_json(cn_live_session *s, const cn_d_query *q, const char *func, int *code,
                        cn_err *err)
{
    cn_agg_query aq;
    cn_err aerr = {0};
    cn_agg_line_row *lines = NULL, *addrs = NULL;
    size_t nl = 0, na = 0;
    json_t *o = NULL;
    resolve_range(s, q, &aq);
    *code = check_transforms(s, q, err);
    if (*code < 0)
        return NULL;
    *code = cn_agg_lines(cn_live_session_profile(s), &aq, func, &lines, &nl, &addrs, &na, &aerr);
    if (*code < 0) {
        cn_err_set(err, *code, "%s", aerr.msg[0] ? aerr.msg : "no such function");
        return NULL;
    }
    const char *lib = NULL, *file = NULL;
    for (size_t i = 0; i < cn_agg_func_count(cn_live_session_profile(s)); i++) {
        if (!strcmp(cn_agg_func_name(cn_live_session_profile(s), (int32_t)i), func)) {
            int32_t res = cn_agg_func_resource(cn_live_session_profile(s), (int32_t)i);
            lib = res >= 0 ? cn_agg_resource_name(cn_live_session_profile(s), res) : NULL;
            file = cn_agg_func_file(cn_live_session_profile(s), (int32_t)i);
            break;
        }
    }
    double scale = cn_agg_profile_scale(cn_live_session_profile(s));
    json_t *jl = json_array(), *ja = json_array();
    for (size_t i = 0; jl && i < nl; i++)
        json_array_append_new(jl, json_pack("{s:I, s:f}", "line", (json_int_t)lines[i].key, "self",
                                            lines[i].self * scale));
    for (size_t i = 0; ja && i < na; i++)
        json_array_append_new(ja, json_pack("{s:I, s:f}", "offset", (json_int_t)addrs[i].key,
                                            "self", addrs[i].self * scale));
    o = json_pack("{s:s, s:s?, s:s?, s:s, s:o, s:o}", "function", func, "lib", lib, "file", file,
                  "unit", cn_agg_unit_name(cn_agg_profile_unit(cn_live_session_profile(s))),
                  "lines", jl, "addresses", ja);
    if (!o) {
        *code = -ENOMEM;
        cn_err_set(err, -ENOMEM, "out of memory");
    }
    free(lines);
    free(addrs);
    return o;
}
