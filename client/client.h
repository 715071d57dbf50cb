/* client.h — internals of the canopy CLI (not a library API).
 *
 * main.c dispatches argv[1] to one cn_cmd_* function per command; each returns the
 * process exit status (0 success, 1 runtime failure, 2 bad usage or input: interface.md)
 * and prints its own one-line errors. QUERY and output options are parsed once, by
 * cn_cli_parse_query(), for files and live sessions alike.
 */
#ifndef CN_CLIENT_H
#define CN_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cn_agg.h"
#include "cn_fmt.h"

#define CN_EXIT_OK    0
#define CN_EXIT_FAIL  1
#define CN_EXIT_USAGE 2

/* Everything QUERY and output options (interface.md) can say. */
typedef struct cn_cli_query {
    cn_agg_transform *transforms; /* owned */
    size_t n_transforms;
    cn_agg_query query; /* points into transforms / view_func */
    char *view_func;    /* owned */
    cn_fmt_format format;
    bool format_given;
    char *output; /* -o FILE, owned, NULL = stdout */
    int depth;    /* --depth, -1 unlimited */
    double min_percent;
    char *last;      /* --last DURATION as given (owned) */
    double from_s;   /* --from, NAN if absent */
    double to_s;     /* --to, NAN if absent */
    int64_t last_ns; /* --last parsed, -1 if absent */
    bool view_given; /* a view option was seen (they exclude each other) */
    bool callers_mode_given;
} cn_cli_query;

void cn_cli_query_init(cn_cli_query *q);
void cn_cli_query_clear(cn_cli_query *q);

/* Parses one QUERY/output option at argv[*i] (advancing *i past its value). Returns 1 if
 * consumed, 0 if argv[*i] is not a query option, or -1 after printing a usage error. */
int cn_cli_parse_query_opt(cn_cli_query *q, int argc, char **argv, int *i);
/* After parsing: the format from -o's extension if none was given; the view_func and
 * transform pointers wired into q->query. Returns 0 or -1 after printing an error. */
int cn_cli_query_finish(cn_cli_query *q);

/* Sets q->query.from_ns/to_ns from --last (relative to the profile's last sample) or
 * --from/--to (seconds since the profile's start). Call before running the query;
 * cn_cli_render() does. Returns 0. */
int cn_cli_query_resolve_range(const cn_agg_profile *p, cn_cli_query *q);

/* Durations such as "30s", "5m", "500ms", "2h", "1.5" (seconds). 0 or -EINVAL/-ERANGE. */
int cn_cli_parse_duration(const char *s, int64_t *ns);
/* Output format names ("text", "json", …) and the default from an -o file name's
 * extension (.json .folded .pb.gz .pb .speedscope.json .trace.json .svg .canopy .txt).
 * The parsers return 0 or a negative errno (unknown name / extension). */
int cn_cli_format_parse(const char *s, cn_fmt_format *out);
const char *cn_cli_format_name(cn_fmt_format f);
int cn_cli_format_from_path(const char *path, cn_fmt_format *out);

/* Writes len bytes to path (or stdout when path is NULL), all or nothing as far as the
 * file system allows. Returns an exit status after printing a one-line error. */
int cn_cli_emit(const char *path, const char *data, size_t len);

/* Calls write(ctx, mem) on a memory stream and, when it returned CN_EXIT_OK, writes what it
 * wrote to output (NULL = stdout) with cn_cli_emit: an error leaves the output untouched.
 * write returns an exit status after printing its own error. Returns an exit status. */
int cn_cli_emit_buffered(const char *output, int (*write)(void *ctx, FILE *out), void *ctx);

/* Checks q's transform arguments against p (unknown function or library). Returns
 * CN_EXIT_OK, or CN_EXIT_USAGE after printing the error. */
int cn_cli_check_transforms(cn_agg_profile *p, const cn_cli_query *q);

/* Whether text output to stdout gets colours (no -o, text, a terminal, no NO_COLOR). */
bool cn_cli_want_color(const cn_cli_query *q);

/* Runs q on a loaded profile and writes the result in q's format. title names the
 * file or session in headers; extra (may be NULL) supplies live-session fields.
 * Returns an exit status. */
int cn_cli_render(cn_agg_profile *p, cn_cli_query *q, const char *title,
                  const cn_fmt_write_opts *extra);

/* Runs the estimated call timeline of q on p and writes it as q->format (json,
 * chrome-trace, speedscope — evented, one profile per thread —, else text) into out.
 * Returns an exit status after printing any error. */
int cn_cli_write_timeline(cn_agg_profile *p, const cn_cli_query *q, FILE *out);
/* Whether q can ask for a timeline (format text, json, chrome-trace or speedscope; no
 * view, no --group-by). Returns CN_EXIT_OK or CN_EXIT_USAGE after printing the error. */
int cn_cli_timeline_check(const cn_cli_query *q);
/* `canopy timeline` on a loaded profile (a file, or a session fetched whole): resolves
 * q's range against p, checks the transforms, writes the timeline to q->output (NULL =
 * stdout) only when everything succeeded. Returns an exit status. */
int cn_cli_timeline_emit(cn_agg_profile *p, cn_cli_query *q);

/* Writes a differential profile d (cn_agg_is_diff) after q, NEW − BASE with BASE scaled to
 * NEW's total when normalize. Used by `diff`, and by `open` on a three-column folded or
 * differential .canopy file. Returns an exit status after printing any error. */
int cn_cli_write_diff(cn_agg_profile *d, const cn_cli_query *q, bool normalize, const char *title,
                      FILE *out);

/* Commands. */
int cn_cmd_open(int argc, char **argv);
int cn_cmd_timeline(int argc, char **argv);
int cn_cmd_run(int argc, char **argv);
int cn_cmd_attach(int argc, char **argv);
int cn_cmd_system(int argc, char **argv);
int cn_cmd_sessions(int argc, char **argv);
int cn_cmd_tree(int argc, char **argv);
int cn_cmd_top(int argc, char **argv);
int cn_cmd_lines(int argc, char **argv);
int cn_cmd_diff(int argc, char **argv);
int cn_cmd_stop(int argc, char **argv);
int cn_cmd_rm(int argc, char **argv);
int cn_cmd_save(int argc, char **argv);
int cn_cmd_status(int argc, char **argv);

#endif /* CN_CLIENT_H */
