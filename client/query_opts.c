/* query_opts.c — parsing of the QUERY and output options (interface.md "QUERY options").
 *
 * One option at a time (cn_cli_parse_query_opt), so that every command can mix them with
 * its own flags; cn_cli_query_finish() then checks the combination and wires the owned
 * strings into the engine's cn_agg_query. Nothing here touches a profile: time options
 * that depend on the profile (--last, --from, --to) are resolved by cn_cli_render().
 * Every error is printed here as one line on stderr and reported as -1.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

void cn_cli_query_init(cn_cli_query *q)
{
    memset(q, 0, sizeof(*q));
    cn_agg_query_init(&q->query);
    q->format = CN_FMT_TEXT;
    q->depth = -1;
    q->min_percent = 0.0;
    q->from_s = NAN;
    q->to_s = NAN;
    q->last_ns = -1;
}

void cn_cli_query_clear(cn_cli_query *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->n_transforms; i++)
        cn_agg_transform_clear(&q->transforms[i]);
    free(q->transforms);
    free(q->view_func);
    free(q->output);
    free(q->last);
    cn_cli_query_init(q);
}

int cn_cli_parse_duration(const char *s, int64_t *ns)
{
    static const struct {
        const char *suffix;
        double ns;
    } units[] = {{"ns", 1},   {"us", 1e3},   {"ms", 1e6}, {"s", 1e9},
                 {"m", 60e9}, {"h", 3600e9}, {"", 1e9}};
    char *end;

    if (!s || !*s)
        return -EINVAL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return -EINVAL;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].suffix))
            continue;
        double r = v * units[i].ns;
        if (r >= 9.2e18)
            return -ERANGE;
        *ns = (int64_t)llround(r);
        return 0;
    }
    return -EINVAL;
}

/* Parses a non-negative number of seconds (--from/--to). */
static int parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 0)
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_int32(const char *s, int32_t min, int32_t *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > INT32_MAX)
        return -EINVAL;
    *out = (int32_t)v;
    return 0;
}

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
    {"canopy", CN_FMT_CANOPY},
};

int cn_cli_format_parse(const char *s, cn_fmt_format *out)
{
    for (size_t i = 0; i < sizeof(format_names) / sizeof(format_names[0]); i++) {
        if (!strcmp(s, format_names[i].name)) {
            *out = format_names[i].format;
            return 0;
        }
    }
    return -EINVAL;
}

const char *cn_cli_format_name(cn_fmt_format f)
{
    for (size_t i = 0; i < sizeof(format_names) / sizeof(format_names[0]); i++)
        if (format_names[i].format == f)
            return format_names[i].name;
    return "?";
}

int cn_cli_format_from_path(const char *path, cn_fmt_format *out)
{
    /* Longest suffixes first: ".speedscope.json" and ".trace.json" end in ".json". */
    static const struct {
        const char *ext;
        cn_fmt_format format;
    } exts[] = {
        {".speedscope.json", CN_FMT_SPEEDSCOPE},
        {".trace.json", CN_FMT_CHROME_TRACE},
        {".json", CN_FMT_JSON},
        {".folded", CN_FMT_FOLDED},
        {".pb.gz", CN_FMT_PPROF},
        {".pb", CN_FMT_PPROF},
        {".svg", CN_FMT_SVG},
        {".canopy", CN_FMT_CANOPY},
        {".txt", CN_FMT_TEXT},
    };
    size_t len = strlen(path);

    for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
        size_t el = strlen(exts[i].ext);
        if (len > el && !strcmp(path + len - el, exts[i].ext)) {
            *out = exts[i].format;
            return 0;
        }
    }
    return -ENOENT;
}

/* The value of the option at argv[*i]: "--opt=VALUE" (inline) or the next argument.
 * Returns NULL after printing an error when it is missing. */
static const char *opt_value(int argc, char **argv, int *i, const char *inline_val)
{
    if (inline_val)
        return inline_val;
    if (*i + 1 >= argc) {
        fprintf(stderr, "canopy: option '%s' needs a value\n", argv[*i]);
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

static int set_view(cn_cli_query *q, cn_agg_view view, const char *func, const char *opt)
{
    if (q->view_given && q->query.view != view) {
        fprintf(stderr, "canopy: %s: only one of --invert, --callees, --callers, --functions\n",
                opt);
        return -1;
    }
    q->view_given = true;
    q->query.view = view;
    if (func) {
        char *copy = strdup(func);
        if (!copy) {
            fprintf(stderr, "canopy: out of memory\n");
            return -1;
        }
        free(q->view_func);
        q->view_func = copy;
    }
    return 1;
}

static int add_transform(cn_cli_query *q, const char *spec)
{
    cn_err err = {0};
    cn_agg_transform t;

    if (cn_agg_transform_parse(spec, &t, &err) < 0) {
        fprintf(stderr, "canopy: %s\n", err.msg[0] ? err.msg : "bad transform");
        return -1;
    }
    cn_agg_transform *grown = realloc(q->transforms, (q->n_transforms + 1) * sizeof(*grown));
    if (!grown) {
        cn_agg_transform_clear(&t);
        fprintf(stderr, "canopy: out of memory\n");
        return -1;
    }
    q->transforms = grown;
    q->transforms[q->n_transforms++] = t;
    return 1;
}

static int replace_string(char **dst, const char *s)
{
    char *copy = strdup(s);
    if (!copy) {
        fprintf(stderr, "canopy: out of memory\n");
        return -1;
    }
    free(*dst);
    *dst = copy;
    return 1;
}

static int bad_value(const char *opt, const char *val, const char *what)
{
    fprintf(stderr, "canopy: %s '%s': %s\n", opt, val, what);
    return -1;
}

/* Options that take a value: name (long, and short or NULL) and an id for the switch. */
enum {
    O_TRANSFORM,
    O_CALLEES,
    O_CALLERS,
    O_CALLERS_MODE,
    O_GROUP_BY,
    O_LAST,
    O_FROM,
    O_TO,
    O_TID,
    O_ONLY_PID,
    O_DEPTH,
    O_MIN_PERCENT,
    O_FORMAT,
    O_OUTPUT,
};

static const struct {
    const char *lng;
    const char *shrt;
    int id;
} valued[] = {
    {"--transform", "-t", O_TRANSFORM},
    {"--callees", NULL, O_CALLEES},
    {"--callers", NULL, O_CALLERS},
    {"--callers-mode", NULL, O_CALLERS_MODE},
    {"--group-by", NULL, O_GROUP_BY},
    {"--last", NULL, O_LAST},
    {"--from", NULL, O_FROM},
    {"--to", NULL, O_TO},
    {"--tid", NULL, O_TID},
    {"--only-pid", NULL, O_ONLY_PID},
    {"--depth", NULL, O_DEPTH},
    {"--min-percent", NULL, O_MIN_PERCENT},
    {"--format", NULL, O_FORMAT},
    {"--output", "-o", O_OUTPUT},
};

static int apply_valued(cn_cli_query *q, int id, const char *opt, const char *val)
{
    switch (id) {
    case O_TRANSFORM:
        return add_transform(q, val);
    case O_CALLEES:
        return set_view(q, CN_AGG_VIEW_CALLEES, val, opt);
    case O_CALLERS:
        return set_view(q, CN_AGG_VIEW_CALLERS, val, opt);
    case O_CALLERS_MODE:
        if (!strcmp(val, "total"))
            q->query.callers_mode = CN_AGG_CALLERS_TOTAL;
        else if (!strcmp(val, "self"))
            q->query.callers_mode = CN_AGG_CALLERS_SELF;
        else
            return bad_value(opt, val, "expected total or self");
        q->callers_mode_given = true;
        return 1;
    case O_GROUP_BY:
        if (!strcmp(val, "none"))
            q->query.group_by = CN_AGG_GROUP_NONE;
        else if (!strcmp(val, "process"))
            q->query.group_by = CN_AGG_GROUP_PROCESS;
        else if (!strcmp(val, "thread"))
            q->query.group_by = CN_AGG_GROUP_THREAD;
        else
            return bad_value(opt, val, "expected none, process or thread");
        return 1;
    case O_LAST:
        if (cn_cli_parse_duration(val, &q->last_ns) < 0)
            return bad_value(opt, val, "expected a duration such as 30s, 5m, 500ms");
        return replace_string(&q->last, val);
    case O_FROM:
        if (parse_seconds(val, &q->from_s) < 0)
            return bad_value(opt, val, "expected seconds since the start (>= 0)");
        return 1;
    case O_TO:
        if (parse_seconds(val, &q->to_s) < 0)
            return bad_value(opt, val, "expected seconds since the start (>= 0)");
        return 1;
    case O_TID:
        if (parse_int32(val, 0, &q->query.tid) < 0)
            return bad_value(opt, val, "expected a thread id");
        return 1;
    case O_ONLY_PID:
        if (parse_int32(val, 0, &q->query.pid) < 0)
            return bad_value(opt, val, "expected a process id");
        return 1;
    case O_DEPTH:
        if (parse_int32(val, 1, &q->depth) < 0)
            return bad_value(opt, val, "expected a positive integer");
        return 1;
    case O_MIN_PERCENT: {
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (errno || end == val || *end || !isfinite(v) || v < 0 || v > 100)
            return bad_value(opt, val, "expected a percentage between 0 and 100");
        q->min_percent = v;
        return 1;
    }
    case O_FORMAT:
        if (cn_cli_format_parse(val, &q->format) < 0)
            return bad_value(opt, val,
                             "expected text, json, folded, pprof, speedscope, chrome-trace, "
                             "svg or canopy");
        q->format_given = true;
        return 1;
    case O_OUTPUT:
        if (!*val)
            return bad_value(opt, val, "expected a file name");
        return replace_string(&q->output, val);
    }
    return 0;
}

int cn_cli_parse_query_opt(cn_cli_query *q, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];

    if (!strcmp(arg, "--invert"))
        return set_view(q, CN_AGG_VIEW_INVERTED, NULL, arg);
    if (!strcmp(arg, "--functions"))
        return set_view(q, CN_AGG_VIEW_FUNCTIONS, NULL, arg);

    for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++) {
        size_t ll = strlen(valued[k].lng);
        const char *inline_val = NULL;
        const char *name = valued[k].lng;

        if (!strcmp(arg, valued[k].lng)) {
            /* --opt VALUE */
        } else if (!strncmp(arg, valued[k].lng, ll) && arg[ll] == '=') {
            inline_val = arg + ll + 1;
        } else if (valued[k].shrt && !strcmp(arg, valued[k].shrt)) {
            name = valued[k].shrt;
        } else {
            continue;
        }
        const char *val = opt_value(argc, argv, i, inline_val);
        if (!val)
            return -1;
        return apply_valued(q, valued[k].id, name, val);
    }
    return 0;
}

int cn_cli_query_finish(cn_cli_query *q)
{
    if (!q->format_given && q->output) {
        cn_fmt_format f;
        if (cn_cli_format_from_path(q->output, &f) == 0)
            q->format = f;
    }
    if (q->last && (!isnan(q->from_s) || !isnan(q->to_s))) {
        fprintf(stderr, "canopy: --last cannot be combined with --from/--to\n");
        return -1;
    }
    if (!isnan(q->from_s) && !isnan(q->to_s) && q->to_s < q->from_s) {
        fprintf(stderr, "canopy: --to %g is before --from %g\n", q->to_s, q->from_s);
        return -1;
    }
    if (q->callers_mode_given && q->query.view != CN_AGG_VIEW_CALLERS) {
        fprintf(stderr, "canopy: --callers-mode needs --callers F\n");
        return -1;
    }
    q->query.transforms = q->transforms;
    q->query.n_transforms = q->n_transforms;
    q->query.view_func = q->view_func;
    return 0;
}

int cn_cli_query_resolve_range(const cn_agg_profile *p, cn_cli_query *q)
{
    q->query.from_ns = INT64_MIN;
    q->query.to_ns = INT64_MAX;
    if (q->last) {
        size_t n = cn_agg_sample_count(p);
        int64_t end = INT64_MIN;
        for (size_t i = 0; i < n; i++) {
            int64_t t = cn_agg_sample_time(p, i);
            if (t > end)
                end = t;
        }
        /* The window [end - DURATION, end]: relative to the last sample, not to now. */
        if (n > 0)
            q->query.from_ns = end >= INT64_MIN + q->last_ns ? end - q->last_ns : INT64_MIN;
        return 0;
    }
    if (!isnan(q->from_s))
        q->query.from_ns = (int64_t)llround(q->from_s * 1e9);
    if (!isnan(q->to_s))
        q->query.to_ns = (int64_t)llround(q->to_s * 1e9);
    return 0;
}
