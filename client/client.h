/* client.h — internals of the canopy CLI (not a library API).
 *
 * main.c dispatches argv[1] to one cn_cmd_* function per command; each returns the
 * process exit status (0 success, 1 runtime failure, 2 bad usage or input: docs/cli.md)
 * and prints its own one-line errors. QUERY and output options are parsed once, by
 * cn_cli_parse_query_opt(), into a cn_fmt_spec for files and live sessions alike; every
 * output is rendered by formats/' cn_fmt_render, here or in canopyd.
 */
#ifndef CN_CLIENT_H
#define CN_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cn_agg.h"
#include "cn_common.h"
#include "cn_fmt.h"

#define CN_EXIT_OK    0
#define CN_EXIT_FAIL  1
#define CN_EXIT_USAGE 2

/* What the QUERY and output options (docs/cli.md) say: the spec every side renders
 * (formats/cn_fmt.h), plus what stays on the client: the output path and what the user
 * wrote explicitly (to check combinations and pick defaults). */
typedef struct cn_cli_query {
    cn_fmt_spec spec;
    char *output; /* -o FILE, owned, NULL = stdout */
    bool format_given;
    bool view_given; /* a view option was seen (they exclude each other) */
    bool callers_mode_given;
} cn_cli_query;

/* The QUERY and output options' table (query_opts.c): what cn_cli_query_opt matches. */
extern const cn_opt cn_cli_query_opts[];

void cn_cli_query_init(cn_cli_query *q);
void cn_cli_query_clear(cn_cli_query *q);

/* Parses one QUERY/output option at argv[*i] (advancing *i past its value). Returns 1 if
 * consumed, 0 if argv[*i] is not a query option, or -1 after printing a usage error. */
int cn_cli_parse_query_opt(cn_cli_query *q, int argc, char **argv, int *i);
/* The same, for callers that report errors themselves (`canopy web`): the error goes to
 * err (one line, not printed). Returns 1, 0, or -1 with err set. */
int cn_cli_query_opt(cn_cli_query *q, int argc, char **argv, int *i, cn_err *err);
/* The rules between options (--last with --from/--to, --callers-mode without --callers).
 * Returns 0 or -1 with err set; nothing printed. */
int cn_cli_query_check(cn_cli_query *q, cn_err *err);
/* After parsing: checks the combination; the format from -o's extension if none was
 * given; colours when text goes to a terminal. Returns 0 or -1 after printing an error. */
int cn_cli_query_finish(cn_cli_query *q);

/* Writes len bytes to path (or stdout when path is NULL), all or nothing as far as the
 * file system allows. Returns an exit status after printing a one-line error. */
int cn_cli_emit(const char *path, const char *data, size_t len);

/* Calls write(ctx, mem) on a memory stream and, when it returned CN_EXIT_OK, writes what it
 * wrote to output (NULL = stdout) with cn_cli_emit: an error leaves the output untouched.
 * write returns an exit status after printing its own error. Returns an exit status. */
int cn_cli_emit_buffered(const char *output, int (*write)(void *ctx, FILE *out), void *ctx);

/* Whether text output to stdout gets colours (no -o, text, a terminal, no NO_COLOR). */
bool cn_cli_want_color(const cn_cli_query *q);

/* The exit status for a negative errno from the libraries: resource exhaustion is a
 * runtime failure (1), anything else (bad query, unknown function, unsupported
 * combination) bad usage or input (2). */
int cn_cli_status_of(int rc);

/* Renders q->spec on p with the one renderer (cn_fmt_render) and writes it to q->output
 * (NULL = stdout) only when everything succeeded; notes (an unmatched transform PATH) go
 * to stderr first. opts (may be NULL) gives the title, live fields and normalization;
 * its notes field is ignored. Returns an exit status after printing any error. */
int cn_cli_render(cn_agg_profile *p, const cn_cli_query *q, const cn_fmt_render_opts *opts);

/* Renders spec on p with the one renderer (cn_fmt_render) into memory: *out (malloc'ed,
 * the caller frees) and *len, only on success. opts as for cn_fmt_render (its notes, when
 * set, are filled). Returns 0 or negative errno with err set. */
int cn_cli_render_mem(cn_agg_profile *p, const cn_fmt_spec *spec, const cn_fmt_render_opts *opts,
                      char **out, size_t *len, cn_err *err);

/* `canopy diff`'s differential profile of args[0] (BASE) and args[1] (NEW), each a file or
 * canopyd session with an optional @FROM..TO window, or of one differential file (n_args
 * 1); q's range and thread options select each side's samples (cmd_diff.c). Sets *out and
 * title ("base -> new"), and *live (may be NULL): whether a side is a running session, whose
 * profile will differ when fetched again. Returns an exit status after printing any error. */
int cn_cli_diff_profile(const char *const *args, int n_args, cn_cli_query *q, const char *socket,
                        cn_agg_profile **out, char *title, size_t title_size, bool *live);

/* Whether q can ask for a timeline (cn_fmt_timeline_check). Returns CN_EXIT_OK or
 * CN_EXIT_USAGE after printing the error. */
int cn_cli_timeline_check(const cn_cli_query *q);

/* ---------------------------------------------------------------------------------------
 * The commands (commands.c): one row per command, read by main() to dispatch, by --help,
 * by the manual's generator (man/mangen.c) and by the completion (`canopy __complete`).
 * A command's options are the shared tables its `tables` bits select (CN_LIVE_* of live.h:
 * SAMPLING, QUERY, ...) plus its own table.
 */
typedef struct cn_cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *args;    /* what follows "canopy NAME" in the usage line */
    const char *summary; /* one line for canopy --help */
    const char *about;   /* paragraphs of its --help and manual section */
    unsigned tables;     /* CN_LIVE_* bits: the shared option tables that apply */
    const cn_opt *own;   /* its own options, or NULL */
    unsigned own_flags;  /* the flags own's rows are printed with */
} cn_cli_command;

/* The commands' own option tables (cmd_diff.c, cmd_web.c, cmd_fleet.c; fleet's rows are
 * enabled per subcommand). */
extern const cn_opt cn_cli_diff_opts[];
/* attach --container ID, system --cgroup PATH (cmd_live.c; docs/cli-live.md "Containers
 * and cgroups"). */
extern const cn_opt cn_cli_attach_opts[];
extern const cn_opt cn_cli_system_opts[];
extern const cn_opt cn_cli_web_opts[];
extern const cn_opt cn_cli_fleet_opts[];

/* Every command, ending with a row whose name is NULL. */
extern const cn_cli_command cn_cli_commands[];
/* The command named name, or NULL. */
const cn_cli_command *cn_cli_command_find(const char *name);
/* Prints command cmd's --help on stdout: usage, about, then every option it accepts with
 * its default, in aligned columns. */
void cn_cli_help(const char *cmd);
/* Prints "  FMT is text, json, ... or canopy." (formats/' names) on out. */
void cn_cli_print_formats(FILE *out);
/* Prints canopy --help (the command list, aligned) on out. */
void cn_cli_usage(FILE *out);
/* Prints "canopy CMD: unknown option 'ARG'", with "did you mean `--X`?" when one of
 * the command's options is near. */
void cn_cli_unknown_option(const char *cmd, const char *arg);
/* The hidden `canopy __complete WORD...` (complete.c): the candidates for the last word
 * of a command line, one per line, for the bash completion. */
int cn_cmd_complete(int argc, char **argv);

/* Commands. */
int cn_cmd_open(int argc, char **argv);
int cn_cmd_timeline(int argc, char **argv);
int cn_cmd_run(int argc, char **argv);
int cn_cmd_attach(int argc, char **argv);
int cn_cmd_system(int argc, char **argv);
int cn_cmd_sessions(int argc, char **argv);
int cn_cmd_tree(int argc, char **argv);
int cn_cmd_top(int argc, char **argv);
int cn_cmd_web(int argc, char **argv);
int cn_cmd_lines(int argc, char **argv);
int cn_cmd_diff(int argc, char **argv);
int cn_cmd_stop(int argc, char **argv);
int cn_cmd_rm(int argc, char **argv);
int cn_cmd_save(int argc, char **argv);
int cn_cmd_status(int argc, char **argv);
int cn_cmd_fleet(int argc, char **argv);

#endif /* CN_CLIENT_H */
