/* spec.c — the query spec (cn_fmt_spec): its setters, the one set of name tables
 * (formats, callers modes, group-by; views are aggregate's cn_agg_view_name), and the one
 * JSON codec of docs/protocol.md "Queries" that the CLI encodes and canopyd decodes.
 *
 * Tables are small arrays searched linearly: a handful of names, parsed once per query.
 * The decoder fills the caller's spec field by field and stops at the first bad one; what
 * it allocated so far stays owned by the spec (cn_fmt_spec_clear frees it).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cn_fmt.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- spec ------------------------------------------------------------------------- */

void cn_fmt_spec_init(cn_fmt_spec *s)
{
    memset(s, 0, sizeof(*s));
    cn_agg_query_init(&s->query);
    s->last_ns = -1;
    s->from_s = NAN;
    s->to_s = NAN;
    s->format = CN_FMT_TEXT;
    s->depth = -1;
}

void cn_fmt_spec_clear(cn_fmt_spec *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_transforms; i++)
        cn_agg_transform_clear(&s->transforms[i]);
    free(s->transforms);
    free(s->view_func);
    free(s->last);
    for (size_t i = 0; i < s->n_where; i++)
        free((char *)s->where[i].value);
    free(s->where);
    cn_fmt_spec_init(s);
}

int cn_fmt_spec_add_where(cn_fmt_spec *s, const char *text, cn_err *err)
{
    for (const char *p = text;;) {
        size_t n = strcspn(p, ","), k = strcspn(p, "=");
        if (k >= n)
            return cn_err_set(err, -EINVAL, "--where %s: expected KEY=VALUE[,KEY=VALUE]", text);
        char key[32];
        snprintf(key, sizeof(key), "%.*s", (int)(k < sizeof(key) - 1 ? k : sizeof(key) - 1), p);
        cn_cgroup_key ck;
        if (k >= sizeof(key) || cn_cgroup_key_parse(key, &ck) < 0)
            return cn_err_set(err, -EINVAL,
                              "--where: unknown key '%.*s' (container, cgroup, pod, qos, service)",
                              (int)(k < 64 ? k : 64), p);
        if (s->n_where >= CN_FMT_MAX_WHERE)
            return cn_err_set(err, -EINVAL, "too many --where conditions (at most %d)",
                              CN_FMT_MAX_WHERE);
        if (!s->where && !(s->where = calloc(CN_FMT_MAX_WHERE, sizeof(*s->where))))
            return cn_err_set(err, -ENOMEM, "out of memory");
        char *v = strndup(p + k + 1, n - k - 1);
        if (!v)
            return cn_err_set(err, -ENOMEM, "out of memory");
        s->where[s->n_where].key = ck;
        s->where[s->n_where++].value = v;
        s->query.where = s->where;
        s->query.n_where = s->n_where;
        if (!p[n])
            return 0;
        p += n + 1;
    }
}

int cn_fmt_spec_add_transform(cn_fmt_spec *s, const char *text, cn_err *err)
{
    cn_agg_transform t;

    if (s->n_transforms >= CN_FMT_MAX_TRANSFORMS)
        return cn_err_set(err, -EINVAL, "too many transforms (at most %d)", CN_FMT_MAX_TRANSFORMS);
    int r = cn_agg_transform_parse(text, &t, err);
    if (r < 0)
        return r;
    cn_agg_transform *grown = realloc(s->transforms, (s->n_transforms + 1) * sizeof(*grown));
    if (!grown) {
        cn_agg_transform_clear(&t);
        return cn_err_set(err, -ENOMEM, "out of memory");
    }
    s->transforms = grown;
    s->transforms[s->n_transforms++] = t;
    s->query.transforms = s->transforms;
    s->query.n_transforms = s->n_transforms;
    return 0;
}

int cn_fmt_spec_set_view(cn_fmt_spec *s, cn_agg_view view, const char *func)
{
    if (func) {
        char *copy = strdup(func);
        if (!copy)
            return -ENOMEM;
        free(s->view_func);
        s->view_func = copy;
        s->query.view_func = copy;
    }
    s->query.view = view;
    return 0;
}

int cn_fmt_spec_set_last(cn_fmt_spec *s, const char *text)
{
    int64_t ns;
    if (cn_common_parse_duration(text, &ns) < 0)
        return -EINVAL;
    char *copy = strdup(text);
    if (!copy)
        return -ENOMEM;
    free(s->last);
    s->last = copy;
    s->last_ns = ns;
    return 0;
}

/* ---- name tables ------------------------------------------------------------------ */

static const struct {
    const char *name;
    cn_fmt_format format;
} format_names[] = {
    {"text", CN_FMT_TEXT},
    {"json", CN_FMT_JSON},
    {"folded", CN_FMT_FOLDED},
    {"pprof", CN_FMT_PPROF},
    {"speedscope", CN_FMT_SPEEDSCOPE},
    {"chrome-trace", CN_FMT_CHROME_TRACE},
    {"svg", CN_FMT_SVG},
    {"firefox", CN_FMT_FIREFOX},
    {"otlp", CN_FMT_OTLP},
    {"canopy", CN_FMT_CANOPY},
    {"activity", CN_FMT_ACTIVITY},
};

int cn_fmt_format_parse(const char *name, cn_fmt_format *out)
{
    for (size_t i = 0; name && i < N_OF(format_names); i++) {
        if (!strcmp(name, format_names[i].name)) {
            *out = format_names[i].format;
            return 0;
        }
    }
    return -EINVAL;
}

size_t cn_fmt_format_names(char *buf, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < N_OF(format_names); i++) {
        const char *sep = i == 0 ? "" : i + 1 == N_OF(format_names) ? " or " : ", ";
        int w = snprintf(buf && n < size ? buf + n : NULL, buf && n < size ? size - n : 0, "%s%s",
                         sep, format_names[i].name);
        n += w > 0 ? (size_t)w : 0;
    }
    if (buf && size > 0 && n == 0)
        buf[0] = '\0';
    return n;
}

const char *cn_fmt_format_name(cn_fmt_format f)
{
    for (size_t i = 0; i < N_OF(format_names); i++)
        if (format_names[i].format == f)
            return format_names[i].name;
    return "?";
}

int cn_fmt_format_from_path(const char *path, cn_fmt_format *out)
{
    /* Longest suffixes first: ".speedscope.json", ".firefox.json" and ".trace.json" end in
     * ".json", ".otlp.pb" in ".pb". */
    static const struct {
        const char *ext;
        cn_fmt_format format;
    } exts[] = {
        {".speedscope.json", CN_FMT_SPEEDSCOPE},
        {".firefox.json", CN_FMT_FIREFOX},
        {".trace.json", CN_FMT_CHROME_TRACE},
        {".json", CN_FMT_JSON},
        {".folded", CN_FMT_FOLDED},
        {".otlp.pb", CN_FMT_OTLP},
        {".pb.gz", CN_FMT_PPROF},
        {".pb", CN_FMT_PPROF},
        {".svg", CN_FMT_SVG},
        {".canopy", CN_FMT_CANOPY},
        {".txt", CN_FMT_TEXT},
    };
    size_t len = strlen(path);

    for (size_t i = 0; i < N_OF(exts); i++) {
        size_t el = strlen(exts[i].ext);
        if (len > el && !strcmp(path + len - el, exts[i].ext)) {
            *out = exts[i].format;
            return 0;
        }
    }
    return -ENOENT;
}

int cn_fmt_view_parse(const char *name, cn_agg_view *out)
{
    static const cn_agg_view views[] = {CN_AGG_VIEW_TREE, CN_AGG_VIEW_INVERTED, CN_AGG_VIEW_CALLEES,
                                        CN_AGG_VIEW_CALLERS, CN_AGG_VIEW_FUNCTIONS};
    for (size_t i = 0; name && i < N_OF(views); i++) {
        if (!strcmp(name, cn_agg_view_name(views[i]))) {
            *out = views[i];
            return 0;
        }
    }
    return -EINVAL;
}

static const char *const callers_mode_names[] = {
    [CN_AGG_CALLERS_TOTAL] = "total",
    [CN_AGG_CALLERS_SELF] = "self",
};

int cn_fmt_callers_mode_parse(const char *name, cn_agg_callers_mode *out)
{
    for (size_t i = 0; name && i < N_OF(callers_mode_names); i++) {
        if (!strcmp(name, callers_mode_names[i])) {
            *out = (cn_agg_callers_mode)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *cn_fmt_callers_mode_name(cn_agg_callers_mode m)
{
    return (size_t)m < N_OF(callers_mode_names) ? callers_mode_names[m] : "?";
}

static const char *const group_by_names[] = {
    [CN_AGG_GROUP_NONE] = "none",
    [CN_AGG_GROUP_PROCESS] = "process",
    [CN_AGG_GROUP_THREAD] = "thread",
    [CN_AGG_GROUP_STATE] = "state",
    [CN_AGG_GROUP_CONTAINER] = "container",
    [CN_AGG_GROUP_CGROUP] = "cgroup",
    [CN_AGG_GROUP_POD] = "pod",
    [CN_AGG_GROUP_SERVICE] = "service",
};

int cn_fmt_group_by_parse(const char *name, cn_agg_group_by *out)
{
    for (size_t i = 0; name && i < N_OF(group_by_names); i++) {
        if (!strcmp(name, group_by_names[i])) {
            *out = (cn_agg_group_by)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *cn_fmt_group_by_name(cn_agg_group_by g)
{
    return (size_t)g < N_OF(group_by_names) ? group_by_names[g] : "?";
}

/* ---- JSON codec ------------------------------------------------------------------- */

static int decode_where(const json_t *req, cn_fmt_spec *s, cn_err *err)
{
    json_t *a = json_object_get(req, "where");
    if (!a || json_is_null(a))
        return 0;
    if (!json_is_array(a) || json_array_size(a) > CN_FMT_MAX_WHERE)
        return cn_err_set(err, -EINVAL,
                          "\"where\" must be an array of at most %d KEY=VALUE strings",
                          CN_FMT_MAX_WHERE);
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *t = json_array_get(a, i);
        if (!json_is_string(t) || strchr(json_string_value(t), ','))
            return cn_err_set(err, -EINVAL, "\"where\"[%zu] must be a KEY=VALUE string", i);
        int r = cn_fmt_spec_add_where(s, json_string_value(t), err);
        if (r < 0)
            return r;
    }
    return 0;
}

static int decode_transforms(const json_t *req, cn_fmt_spec *s, cn_err *err)
{
    json_t *a = json_object_get(req, "transforms");
    if (!a || json_is_null(a))
        return 0;
    if (!json_is_array(a))
        return cn_err_set(err, -EINVAL, "\"transforms\" must be an array of SPEC strings");
    size_t n = json_array_size(a);
    if (n > CN_FMT_MAX_TRANSFORMS)
        return cn_err_set(err, -EINVAL, "too many transforms (%zu, at most %d)", n,
                          CN_FMT_MAX_TRANSFORMS);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(a, i);
        if (!json_is_string(t))
            return cn_err_set(err, -EINVAL, "\"transforms\"[%zu] must be a string", i);
        int r = cn_fmt_spec_add_transform(s, json_string_value(t), err);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The enumerated fields: view (+ view_func), callers_mode, group_by, format. */
static int decode_names(const json_t *req, cn_fmt_spec *s, cn_err *err)
{
    const char *v;
    int r;

    v = NULL;
    if ((r = cn_proto_get_str(req, "view", &v, err)) < 0)
        return r;
    if (v && cn_fmt_view_parse(v, &s->query.view) < 0)
        return cn_err_set(err, -EINVAL,
                          "unknown view '%s' (tree, inverted, callees, callers, functions)", v);
    v = NULL;
    if ((r = cn_proto_get_str(req, "view_func", &v, err)) < 0)
        return r;
    if (v && cn_fmt_spec_set_view(s, s->query.view, v) < 0)
        return cn_err_set(err, -ENOMEM, "out of memory");
    if ((s->query.view == CN_AGG_VIEW_CALLEES || s->query.view == CN_AGG_VIEW_CALLERS) &&
        !s->view_func)
        return cn_err_set(err, -EINVAL, "view '%s' needs \"view_func\"",
                          cn_agg_view_name(s->query.view));
    v = NULL;
    if ((r = cn_proto_get_str(req, "callers_mode", &v, err)) < 0)
        return r;
    if (v && cn_fmt_callers_mode_parse(v, &s->query.callers_mode) < 0)
        return cn_err_set(err, -EINVAL, "unknown callers_mode '%s' (total, self)", v);
    v = NULL;
    if ((r = cn_proto_get_str(req, "group_by", &v, err)) < 0)
        return r;
    if (v && cn_fmt_group_by_parse(v, &s->query.group_by) < 0)
        return cn_err_set(err, -EINVAL,
                          "unknown group_by '%s' (none, process, thread, state, container, "
                          "cgroup, pod, service)",
                          v);
    return 0;
}

/* An optional integer field in [-1, max] (-1 = none) into *out. */
static int decode_int(const json_t *req, const char *key, int64_t max, int64_t *out, cn_err *err)
{
    int64_t v = -1;
    int r = cn_proto_get_int(req, key, &v, err);
    if (r < 0)
        return r;
    if (v < -1 || v > max)
        return cn_err_set(err, -EINVAL, "bad \"%s\"", key);
    *out = v;
    return 0;
}

/* The range (last, from, to), the filters (tid, only_pid) and the text options. */
static int decode_values(const json_t *req, cn_fmt_spec *s, cn_err *err)
{
    const char *v = NULL;
    int64_t iv = -1;
    double dv;
    int r;

    if ((r = cn_proto_get_str(req, "last", &v, err)) < 0)
        return r;
    if (v && (r = cn_fmt_spec_set_last(s, v)) < 0)
        return r == -ENOMEM ? cn_err_set(err, r, "out of memory")
                            : cn_err_set(err, r, "bad duration for \"last\": '%s'", v);
    dv = NAN;
    if ((r = cn_proto_get_num(req, "from", &dv, err)) < 0)
        return r;
    s->from_s = dv;
    dv = NAN;
    if ((r = cn_proto_get_num(req, "to", &dv, err)) < 0)
        return r;
    s->to_s = dv;
    if ((!isnan(s->from_s) && (s->from_s < 0 || s->from_s > 9e9)) ||
        (!isnan(s->to_s) && (s->to_s < 0 || s->to_s > 9e9)))
        return cn_err_set(err, -EINVAL, "\"from\" and \"to\" are seconds since the session start");
    if ((r = decode_int(req, "tid", INT32_MAX, &iv, err)) < 0)
        return r;
    s->query.tid = (int32_t)iv;
    if ((r = decode_int(req, "only_pid", INT32_MAX, &iv, err)) < 0)
        return r;
    s->query.pid = (int32_t)iv;
    if ((r = decode_int(req, "depth", 1000000, &iv, err)) < 0)
        return r;
    s->depth = (int)iv;
    dv = 0;
    if ((r = cn_proto_get_num(req, "min_percent", &dv, err)) < 0)
        return r;
    if (dv < 0 || dv > 100)
        return cn_err_set(err, -EINVAL, "\"min_percent\" must be between 0 and 100");
    s->min_percent = dv;
    if ((r = cn_proto_get_bool(req, "color", &s->color, err)) < 0)
        return r;
    if ((r = cn_proto_get_bool(req, "no_inline", &s->query.no_inline, err)) < 0)
        return r;
    v = NULL;
    if ((r = cn_proto_get_str(req, "format", &v, err)) < 0)
        return r;
    if (v && cn_fmt_format_parse(v, &s->format) < 0) {
        char names[160];
        cn_fmt_format_names(names, sizeof(names));
        return cn_err_set(err, -EINVAL, "unknown format '%s' (%s)", v, names);
    }
    return 0;
}

int cn_fmt_spec_from_json(const json_t *req, cn_fmt_spec *s, cn_err *err)
{
    int r = decode_transforms(req, s, err);
    if (r == 0)
        r = decode_names(req, s, err);
    if (r == 0)
        r = decode_values(req, s, err);
    if (r == 0)
        r = decode_where(req, s, err);
    return r;
}

int cn_fmt_spec_to_json(const cn_fmt_spec *s, json_t *req)
{
    const cn_agg_query *q = &s->query;
    int r = 0;

    if (q->n_transforms) {
        json_t *a = json_array();
        r |= a ? 0 : -1;
        for (size_t i = 0; a && i < q->n_transforms; i++) {
            char *text = cn_agg_transform_format(&q->transforms[i]);
            r |= text ? json_array_append_new(a, json_string(text)) : -1;
            free(text);
        }
        r |= json_object_set_new(req, "transforms", a);
    }
    if (q->view != CN_AGG_VIEW_TREE)
        r |= json_object_set_new(req, "view", json_string(cn_agg_view_name(q->view)));
    if (q->view_func)
        r |= json_object_set_new(req, "view_func", json_string(q->view_func));
    if (q->callers_mode != CN_AGG_CALLERS_TOTAL)
        r |= json_object_set_new(req, "callers_mode",
                                 json_string(cn_fmt_callers_mode_name(q->callers_mode)));
    if (q->group_by != CN_AGG_GROUP_NONE)
        r |= json_object_set_new(req, "group_by", json_string(cn_fmt_group_by_name(q->group_by)));
    if (s->last)
        r |= json_object_set_new(req, "last", json_string(s->last));
    if (!isnan(s->from_s))
        r |= json_object_set_new(req, "from", json_real(s->from_s));
    if (!isnan(s->to_s))
        r |= json_object_set_new(req, "to", json_real(s->to_s));
    if (q->tid >= 0)
        r |= json_object_set_new(req, "tid", json_integer(q->tid));
    if (q->pid >= 0)
        r |= json_object_set_new(req, "only_pid", json_integer(q->pid));
    if (q->n_where > 0) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < q->n_where; i++) {
            char *kv = NULL;
            if (asprintf(&kv, "%s=%s", cn_cgroup_key_name(q->where[i].key), q->where[i].value) < 0)
                kv = NULL;
            r |= !kv || json_array_append_new(a, json_string(kv));
            free(kv);
        }
        r |= !a || json_object_set_new(req, "where", a);
    }
    if (s->depth >= 0)
        r |= json_object_set_new(req, "depth", json_integer(s->depth));
    if (s->min_percent > 0)
        r |= json_object_set_new(req, "min_percent", json_real(s->min_percent));
    if (s->color)
        r |= json_object_set_new(req, "color", json_true());
    if (q->no_inline)
        r |= json_object_set_new(req, "no_inline", json_true());
    r |= json_object_set_new(req, "format", json_string(cn_fmt_format_name(s->format)));
    return r ? -ENOMEM : 0;
}
