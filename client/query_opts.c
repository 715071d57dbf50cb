/* query_opts.c — parsing of the QUERY and output options (docs/cli.md "QUERY options")
 * into a cn_fmt_spec.
 *
 * One option at a time (cn_cli_parse_query_opt), so that every command can mix them with
 * its own flags; cn_cli_query_finish() then checks the combination. Names (formats,
 * views, group-by, callers modes) and durations are parsed by the same functions canopyd
 * uses (formats/cn_fmt.h, cn_common_parse_duration). Nothing here touches a profile: time
 * options that depend on the profile (--last, --from, --to) are resolved by the renderer.
 * Every error is one line in a cn_err (cn_cli_query_opt, cn_cli_query_check): the
 * command-line wrappers print it on stderr, `canopy web` sends it to the page.
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
    cn_fmt_spec_init(&q->spec);
}

void cn_cli_query_clear(cn_cli_query *q)
{
    if (!q)
        return;
    cn_fmt_spec_clear(&q->spec);
    free(q->output);
    cn_cli_query_init(q);
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

/* The value of the option at argv[*i]: "--opt=VALUE" (inline) or the next argument.
 * Returns NULL after printing an error when it is missing. */
static const char *opt_value(int argc, char **argv, int *i, const char *inline_val, cn_err *err)
{
    if (inline_val)
        return inline_val;
    if (*i + 1 >= argc) {
        cn_err_set(err, -EINVAL, "option '%s' needs a value", argv[*i]);
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

static int set_view(cn_cli_query *q, cn_agg_view view, const char *func, const char *opt,
                    cn_err *err)
{
    if (q->view_given && q->spec.query.view != view) {
        cn_err_set(err, -EINVAL, "%s: only one of --invert, --callees, --callers, --functions",
                   opt);
        return -1;
    }
    q->view_given = true;
    if (cn_fmt_spec_set_view(&q->spec, view, func) < 0) {
        cn_err_set(err, -ENOMEM, "out of memory");
        return -1;
    }
    return 1;
}

static int add_transform(cn_cli_query *q, const char *text, cn_err *err)
{
    int r = cn_fmt_spec_add_transform(&q->spec, text, err);
    if (r < 0) {
        if (err && !err->msg[0])
            cn_err_set(err, r, "bad transform");
        return -1;
    }
    return 1;
}

static int replace_string(char **dst, const char *s, cn_err *err)
{
    char *copy = strdup(s);
    if (!copy) {
        cn_err_set(err, -ENOMEM, "out of memory");
        return -1;
    }
    free(*dst);
    *dst = copy;
    return 1;
}

static int bad_value(const char *opt, const char *val, const char *what, cn_err *err)
{
    cn_err_set(err, -EINVAL, "%s '%s': %s", opt, val, what);
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
    O_WHERE,
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
    {"--where", NULL, O_WHERE},
    {"--depth", NULL, O_DEPTH},
    {"--min-percent", NULL, O_MIN_PERCENT},
    {"--format", NULL, O_FORMAT},
    {"--output", "-o", O_OUTPUT},
};

static int apply_valued(cn_cli_query *q, int id, const char *opt, const char *val, cn_err *err)
{
    switch (id) {
    case O_TRANSFORM:
        return add_transform(q, val, err);
    case O_CALLEES:
        return set_view(q, CN_AGG_VIEW_CALLEES, val, opt, err);
    case O_CALLERS:
        return set_view(q, CN_AGG_VIEW_CALLERS, val, opt, err);
    case O_CALLERS_MODE:
        if (cn_fmt_callers_mode_parse(val, &q->spec.query.callers_mode) < 0)
            return bad_value(opt, val, "expected total or self", err);
        q->callers_mode_given = true;
        return 1;
    case O_GROUP_BY:
        if (cn_fmt_group_by_parse(val, &q->spec.query.group_by) < 0)
            return bad_value(opt, val,
                             "expected none, process, thread, state, container, cgroup, pod or "
                             "service",
                             err);
        return 1;
    case O_LAST: {
        int r = cn_fmt_spec_set_last(&q->spec, val);
        if (r == -ENOMEM) {
            cn_err_set(err, -ENOMEM, "out of memory");
            return -1;
        }
        if (r < 0)
            return bad_value(opt, val, "expected a duration such as 30s, 5m, 500ms", err);
        return 1;
    }
    case O_FROM:
        if (parse_seconds(val, &q->spec.from_s) < 0)
            return bad_value(opt, val, "expected seconds since the start (>= 0)", err);
        return 1;
    case O_TO:
        if (parse_seconds(val, &q->spec.to_s) < 0)
            return bad_value(opt, val, "expected seconds since the start (>= 0)", err);
        return 1;
    case O_TID:
        if (parse_int32(val, 0, &q->spec.query.tid) < 0)
            return bad_value(opt, val, "expected a thread id", err);
        return 1;
    case O_ONLY_PID:
        if (parse_int32(val, 0, &q->spec.query.pid) < 0)
            return bad_value(opt, val, "expected a process id", err);
        return 1;
    case O_WHERE:
        return cn_fmt_spec_add_where(&q->spec, val, err) < 0 ? -1 : 1;
    case O_DEPTH:
        if (parse_int32(val, 1, &q->spec.depth) < 0)
            return bad_value(opt, val, "expected a positive integer", err);
        return 1;
    case O_MIN_PERCENT: {
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (errno || end == val || *end || !isfinite(v) || v < 0 || v > 100)
            return bad_value(opt, val, "expected a percentage between 0 and 100", err);
        q->spec.min_percent = v;
        return 1;
    }
    case O_FORMAT:
        if (cn_fmt_format_parse(val, &q->spec.format) < 0) {
            char names[160], what[180];
            cn_fmt_format_names(names, sizeof(names));
            snprintf(what, sizeof(what), "expected %s", names);
            return bad_value(opt, val, what, err);
        }
        q->format_given = true;
        return 1;
    case O_OUTPUT:
        if (!*val)
            return bad_value(opt, val, "expected a file name", err);
        return replace_string(&q->output, val, err);
    }
    return 0;
}

int cn_cli_query_opt(cn_cli_query *q, int argc, char **argv, int *i, cn_err *err)
{
    const char *arg = argv[*i];

    if (!strcmp(arg, "--invert"))
        return set_view(q, CN_AGG_VIEW_INVERTED, NULL, arg, err);
    if (!strcmp(arg, "--functions"))
        return set_view(q, CN_AGG_VIEW_FUNCTIONS, NULL, arg, err);
    if (!strcmp(arg, "--no-inline")) {
        q->spec.query.no_inline = true;
        return 1;
    }

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
        const char *val = opt_value(argc, argv, i, inline_val, err);
        if (!val)
            return -1;
        return apply_valued(q, valued[k].id, name, val, err);
    }
    return 0;
}

int cn_cli_parse_query_opt(cn_cli_query *q, int argc, char **argv, int *i)
{
    cn_err err = {0};
    int r = cn_cli_query_opt(q, argc, argv, i, &err);

    if (r < 0)
        fprintf(stderr, "canopy: %s\n", CN_TERM_STR(err.msg));
    return r;
}

int cn_cli_query_check(cn_cli_query *q, cn_err *err)
{
    cn_fmt_spec *s = &q->spec;

    if (!q->format_given && q->output) {
        cn_fmt_format f;
        if (cn_fmt_format_from_path(q->output, &f) == 0)
            s->format = f;
    }
    if (s->last && (!isnan(s->from_s) || !isnan(s->to_s)))
        return cn_err_set(err, -1, "--last cannot be combined with --from/--to");
    if (!isnan(s->from_s) && !isnan(s->to_s) && s->to_s < s->from_s)
        return cn_err_set(err, -1, "--to %g is before --from %g", s->to_s, s->from_s);
    if (q->callers_mode_given && s->query.view != CN_AGG_VIEW_CALLERS)
        return cn_err_set(err, -1, "--callers-mode needs --callers F");
    return 0;
}

int cn_cli_query_finish(cn_cli_query *q)
{
    cn_err err = {0};

    if (cn_cli_query_check(q, &err) < 0) {
        fprintf(stderr, "canopy: %s\n", CN_TERM_STR(err.msg));
        return -1;
    }
    q->spec.color = cn_cli_want_color(q);
    return 0;
}
