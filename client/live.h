/* live.h — internals of canopy's live commands (run, attach, system, sessions, tree, top,
 * lines, timeline on sessions, stop, rm, save, status). Not a library API.
 *
 * A live command either talks to canopyd over its Unix socket (daemon_client.c: socket
 * discovery, one newline-delimited JSON request and response at a time, docs/protocol.md)
 * or, where it needs sampling and no daemon answers, hosts the same engine in-process
 * (inproc.c). `canopy top` (top.c) draws whatever a cn_top_source hands it: a saved
 * profile, an in-process session or a daemon session, so its UI does not depend on where
 * samples come from. sampling_opts.c parses the SAMPLING options; progress.c draws the
 * one-line progress display on stderr.
 */
#ifndef CN_CLIENT_LIVE_H
#define CN_CLIENT_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "client.h"
#include "cn_agg.h"
#include "cn_live.h"

/* ---------------------------------------------------------------------------------------
 * SAMPLING options (docs/cli.md)
 */

typedef struct cn_cli_conn cn_cli_conn;

/* Parses one SAMPLING option at argv[*i] (advancing *i past its value) into the session
 * spec s (strings borrow argv), checked with live/'s rules (cn_live_session_opts_validate).
 * allow_name says whether the session options --name, --label, --no-fleet are accepted.
 * Returns 1 if consumed, 0 if argv[*i] is not a sampling option, or -1 after printing a
 * one-line usage error naming cmd. */
int cn_cli_parse_sampling_opt(cn_live_session_opts *s, const char *cmd, bool allow_name, int argc,
                              char **argv, int *i);

/* ---------------------------------------------------------------------------------------
 * Arguments of the live commands (live_common.c)
 */

enum {
    CN_LIVE_SAMPLING = 1u << 0,      /* SAMPLING options and --no-daemon */
    CN_LIVE_NAME = 1u << 1,          /* --name */
    CN_LIVE_QUERY = 1u << 2,         /* QUERY and output options */
    CN_LIVE_PID = 1u << 3,           /* --pid PID */
    CN_LIVE_COMMAND = 1u << 4,       /* run: CMD ARGS after -- or the first word */
    CN_LIVE_SIMPLE_FORMAT = 1u << 5, /* --format text|json */
    CN_LIVE_CONNECT = 1u << 6,       /* --socket (cn_cli_live_parse always accepts it) */
};

/* The option tables (cn_opt, common/) of the live commands: SAMPLING and session options
 * (sampling_opts.c; rows enabled by CN_LIVE_SAMPLING or CN_LIVE_NAME) and the ones
 * cn_cli_live_parse handles itself (live_common.c: --pid, --rm, --format text|json,
 * --no-daemon, --socket, --help). */
extern const cn_opt cn_cli_sampling_opts[];
extern const cn_opt cn_cli_live_opts[];
#define CN_LIVE_MAX_POS 3

typedef struct cn_cli_live_args {
    const char *cmd;
    const char *socket;       /* --socket, NULL if absent */
    bool no_daemon;           /* --no-daemon: in-process even when a daemon answers */
    bool rm;                  /* run --rm: remove the daemon's session once its tree is printed */
    int pid;                  /* --pid, -1 if absent */
    bool json;                /* --format json (CN_LIVE_SIMPLE_FORMAT) */
    cn_live_session_opts smp; /* SAMPLING options: the session's spec (freq: the command's
                                 default until -F) */
    cn_cli_query q;
    const char *pos[CN_LIVE_MAX_POS];
    int n_pos;
    char **cmd_argv; /* run: NULL-terminated (argv's own terminator) */
    int cmd_argc;
} cn_cli_live_args;

void cn_cli_live_args_init(cn_cli_live_args *a, const char *cmd);
void cn_cli_live_args_clear(cn_cli_live_args *a);
/* Parses argv[1..] with the options flags allow. Returns -1 to go on, or an exit status
 * (0 after --help, 2 after a one-line usage error). */
int cn_cli_live_parse(cn_cli_live_args *a, int argc, char **argv, unsigned flags,
                      void (*help)(void));
/* Writes doc compactly on one line, "\n"-terminated, to output (NULL = stdout); the
 * caller keeps doc. Returns an exit status after printing any error. */
int cn_cli_emit_json(const char *cmd, const json_t *doc, const char *output);
/* Writes a rendered daemon answer (resp[key] as a JSON document, "output" or
 * "output_base64") to output (NULL = stdout). Returns an exit status. */
int cn_cli_emit_rendered(const char *cmd, const json_t *resp, const char *key, const char *output);
/* Connects unless --no-daemon. *out NULL afterwards means "no daemon": an error exit
 * status was returned and printed when required, else 0 (go in-process). */
int cn_cli_live_connect(cn_cli_live_args *a, bool required, cn_cli_conn **out);
/* The one stderr line that says the engine runs in-process. */
void cn_cli_say_in_process(const char *cmd, const cn_cli_live_args *a);
/* Sends req (borrowed; NULL means ENOMEM) and checks the answer: returns 0 and *resp, or
 * an exit status after printing the error. */
int cn_cli_request(const char *cmd, cn_cli_conn *c, json_t *req, json_t **resp);
/* Sends a rendering request (tree, save, timeline; req borrowed, NULL means ENOMEM) asking
 * for a raw payload, and writes the rendered output to output (NULL = stdout) without
 * parsing it: the payload's bytes, or with an older daemon resp[key] / "output" /
 * "output_base64" as cn_cli_emit_rendered does. The reply's notes (an unmatched transform
 * PATH) go to stderr first, as `canopy open` prints them. Returns an exit status after
 * printing any error. */
int cn_cli_request_emit(const char *cmd, cn_cli_conn *c, json_t *req, const char *key,
                        const char *output);

/* Fetches session's whole lossless profile over c (the protocol's `save` request with
 * format "canopy", answered as output_base64) and imports it: the same tables `canopy
 * save SESSION -o F.canopy` would write, sample times in ns since the session's start.
 * Returns 0 and *out (caller frees with cn_agg_profile_free), or an exit status after
 * printing one line naming cmd (unknown session: the daemon's exit, 1). */
int cn_cli_fetch_session(const char *cmd, cn_cli_conn *c, const char *session,
                         cn_agg_profile **out);

/* session's entry of a `sessions` answer over c, by id or name (a new reference), or NULL
 * (no such session, or the request failed). */
json_t *cn_cli_session_entry(cn_cli_conn *c, const char *session);

/* `canopy timeline SESSION …` (cmd_admin.c): cmd_open.c's cn_cmd_timeline handles files
 * and calls this when its argument is not an existing file. Returns an exit status. */
int cn_cli_live_timeline(int argc, char **argv);

/* ---------------------------------------------------------------------------------------
 * The daemon connection (daemon_client.c)
 */

/* Where the daemon's socket is: explicit (--socket), else $CANOPY_SOCKET, else
 * /run/canopy/canopy.sock if it exists, else $XDG_RUNTIME_DIR/canopy.sock. Writes the
 * path into buf (size n). Returns 0, or -ENOENT when no candidate exists to try. */
int cn_cli_socket_path(const char *explicit_path, char *buf, size_t n);
/* Connects to the daemon. Returns 0 and *out, -ENOENT/-ECONNREFUSED/… when nothing
 * answers there (then the caller may go in-process), other negative errno otherwise.
 * path_out (may be NULL, size n) receives the path that was tried. */
int cn_cli_connect(const char *explicit_path, cn_cli_conn **out, char *path_out, size_t n);
cn_cli_conn *cn_cli_conn_free(cn_cli_conn *c);
/* Sends req (borrowed) and waits for its response. Returns 0 and *resp (a new reference,
 * caller json_decref's) whatever "ok" says; negative errno when the connection fails or
 * the response is malformed (msg filled). */
int cn_cli_call(cn_cli_conn *c, json_t *req, json_t **resp, cn_err *err);
/* The same for tree/save/timeline, asking for the rendered output as a raw payload
 * ("raw": true, docs/protocol.md): when the answer announces "raw_bytes": N, the N bytes
 * that follow its line are read into *raw (malloc'ed, NUL-terminated, caller frees) and
 * *raw_len; otherwise (an error, or an older daemon) *raw is NULL and any output is in
 * *resp as with cn_cli_call. */
int cn_cli_call_raw(cn_cli_conn *c, json_t *req, json_t **resp, char **raw, size_t *raw_len,
                    cn_err *err);
/* cn_cli_call_raw in two halves, for a caller that waits for several connections at
 * once (canopy web asks for a refresh's tree and activity data together, over two):
 * cn_cli_send_raw sends req (borrowed), and once cn_cli_conn_fd is readable,
 * cn_cli_recv_raw reads its response as cn_cli_call_raw would (it may then still wait
 * for the rest of it). One request at a time per connection, as ever. */
int cn_cli_send_raw(cn_cli_conn *c, json_t *req, cn_err *err);
int cn_cli_recv_raw(cn_cli_conn *c, json_t **resp, char **raw, size_t *raw_len, cn_err *err);
int cn_cli_conn_fd(const cn_cli_conn *c);
/* For a response with "ok": false, prints "canopy CMD: MESSAGE" and returns its "exit"
 * (1 when absent). For ok responses returns 0. */
int cn_cli_resp_status(const char *cmd, const json_t *resp);

/* ---------------------------------------------------------------------------------------
 * The engine in-process (inproc.c): a symbolizer and one session, owned by the caller.
 */

typedef struct cn_cli_local cn_cli_local;

/* Starts sampling the session spec o (its kind and pid set; owner becomes getuid()),
 * after live/'s checks. For CN_LIVE_RUN the child must be held before exec; release it
 * after this returns. Returns 0 and *out, or negative errno with msg set. */
int cn_cli_local_start(const cn_live_session_opts *o, cn_cli_local **out, cn_err *err);
cn_cli_local *cn_cli_local_free(cn_cli_local *l);
cn_live_session *cn_cli_local_session(cn_cli_local *l);
/* Waits up to timeout_ms for ring data or symbols (0: no wait), then pumps the session
 * and dispatches symbol answers. Returns 0 or negative errno with msg set. */
int cn_cli_local_pump(cn_cli_local *l, int timeout_ms, cn_err *err);
/* Stops sampling and waits up to timeout_ms for the symbolizer to resolve what it was
 * given. Returns 0 or negative errno with msg set. */
int cn_cli_local_finish(cn_cli_local *l, int timeout_ms, cn_err *err);

/* ---------------------------------------------------------------------------------------
 * Progress line (progress.c): elapsed, samples, lost; only when stderr is a terminal.
 */

typedef struct cn_cli_progress {
    bool enabled; /* stderr is a terminal and $CANOPY_NO_PROGRESS unset */
    bool color;
    bool drawn;
    int64_t start_ns;
    int64_t last_draw_ns;
} cn_cli_progress;

void cn_cli_progress_init(cn_cli_progress *pr);
/* Redraws at most 4 times a second (force: now). */
void cn_cli_progress_update(cn_cli_progress *pr, int64_t samples, int64_t lost, bool force);
/* Erases the line (if drawn). */
void cn_cli_progress_end(cn_cli_progress *pr);

/* ---------------------------------------------------------------------------------------
 * `canopy top` (top.c)
 */

/* One node of what top shows, built from an engine tree or from the JSON tree. */
typedef struct cn_top_node {
    char *name; /* owned */
    char *lib;  /* owned, NULL when unknown */
    double total, self;
    int32_t parent, first_child, next_sibling;
    int32_t last_child; /* for appending in order */
} cn_top_node;

typedef struct cn_top_func {
    char *name; /* owned */
    char *lib;  /* owned, may be NULL */
    double self, total;
} cn_top_func;

/* A snapshot: the (transformed) tree and the function list, in display units. */
typedef struct cn_top_snapshot {
    cn_top_node *nodes;
    size_t n_nodes, cap_nodes;
    int32_t first_root, last_root;
    cn_top_func *funcs;
    size_t n_funcs, cap_funcs;
    double total;         /* display units */
    char unit[16];        /* "samples", "ms", … */
    int64_t samples;      /* -1 unknown */
    int64_t lost;         /* -1 unknown */
    double span_s;        /* seconds the source covers so far */
    cn_fmt_unwind unwind; /* a live source's unwind outcomes (known false otherwise) */
    char note[160];       /* a source's one-line remark (e.g. "target exited") */
} cn_top_snapshot;

void cn_top_snapshot_clear(cn_top_snapshot *s);
/* Appends a node (copies name and lib) under parent (-1 = root), as the last child.
 * Returns its index or -ENOMEM. */
int32_t cn_top_snapshot_add(cn_top_snapshot *s, int32_t parent, const char *name, const char *lib,
                            double total, double self);
int cn_top_snapshot_add_func(cn_top_snapshot *s, const char *name, const char *lib, double self,
                             double total);
/* Fills s from the interface JSON of a tree (view tree or inverted) and a function list
 * (view functions; may be NULL). Returns 0 or -EINVAL with msg set. */
int cn_top_snapshot_from_json(cn_top_snapshot *s, const json_t *tree, const json_t *funcs,
                              cn_err *err);
/* Fills s from engine results (scale: display units per weight unit). 0 or -ENOMEM. */
int cn_top_snapshot_from_agg(cn_top_snapshot *s, const cn_agg_profile *p, const cn_agg_tree *tree,
                             const cn_agg_tree *funcs);

/* What top asks a source for. */
typedef struct cn_top_request {
    const cn_agg_transform *transforms;
    size_t n_transforms;
    bool inverted;
    int64_t window_ns;        /* 0 = everything; else the last window_ns of the source */
    cn_agg_group_by group_by; /* the tree pane's roots (key g): none, process, container, … */
} cn_top_request;

typedef struct cn_top_source {
    void *ctx;
    const char *title;
    bool live; /* refresh every second */
    /* Fills *out (already cleared). Returns 0, or negative errno with msg set (shown on the
     * status line; top keeps going). -ENOENT on a transform naming an unknown function. */
    int (*fetch)(void *ctx, const cn_top_request *req, cn_top_snapshot *out, cn_err *err);
    /* Called between key presses (about every 100 ms) so an in-process source can read its
     * rings; may be NULL. Returns 0 or negative errno (then top ends with msg shown). */
    int (*pump)(void *ctx, cn_err *err);
} cn_top_source;

/* Runs the full-screen UI until q, SIGINT or SIGTERM. The terminal is restored whatever
 * happens. Returns an exit status. */
int cn_top_run(const cn_top_source *src);

/* A source over a loaded profile: a saved file's, or an in-process session's (borrowed;
 * it must outlive the source). For a session, the window ends at its clock and the
 * counters come from its render header (cn_live_session_render_opts); for a file, at the
 * last sample, as `canopy open --last` counts. */
typedef struct cn_top_profile_source {
    cn_agg_profile *profile;
    const cn_live_session *session; /* NULL for files */
} cn_top_profile_source;
int cn_top_profile_fetch(void *ctx, const cn_top_request *req, cn_top_snapshot *out, cn_err *err);

#endif /* CN_CLIENT_LIVE_H */
