/* cn_d.h — canopy's daemon side: the whole public API of daemon/.
 *
 * canopyd hosts live sessions (live/cn_live.h: sampler + symbolizer + aggregate) for its
 * clients. cn_d_server owns the listening socket, the event loop (io_uring, or epoll
 * where io_uring is unavailable), the sessions of every client and their persistence in
 * the state dir, access control from SO_PEERCRED, and the protocol of docs/protocol.md.
 * main.c only parses flags into a cn_d_config and runs it. Queries decode the protocol's
 * QUERY object (cn_d_query) and render it on a session's profile (cn_d_render), on the
 * loop thread between pumps.
 *
 * Ownership: the server owns its sessions and the one symbolizer they share; sessions are
 * freed before it. Everything runs on the loop thread except the symbolizer's worker.
 * Errors are negative errno values with a one-line message in a cn_err.
 */
#ifndef CN_D_H
#define CN_D_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "cn_agg.h"
#include "cn_fmt.h"
#include "cn_common.h"
#include "cn_live.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Queries: the protocol's QUERY object, decoded and rendered (same semantics as files)
 */

/* A decoded query: owns its transforms and strings. */
typedef struct cn_d_query {
    cn_agg_query q;               /* points into the fields below */
    cn_agg_transform *transforms; /* owned */
    size_t n_transforms;
    char *view_func;     /* owned */
    char *last;          /* "--last" as given; applied at render time */
    int64_t last_ns;     /* -1 = none */
    double from_s, to_s; /* NAN = none */
    cn_fmt_format format;
    int depth; /* -1 = unlimited */
    double min_percent;
    bool color;
} cn_d_query;

void cn_d_query_init(cn_d_query *q);
void cn_d_query_clear(cn_d_query *q);
/* Decodes the query fields of a request (docs/protocol.md "Queries"): transforms, view,
 * callers/callees, callers_mode, group_by, last, from, to, tid, only_pid, depth,
 * min_percent, format. Returns 0, or -EINVAL with err naming the bad field or SPEC. */
int cn_d_query_from_json(const json_t *req, cn_d_query *q, cn_err *err);
/* The reverse, for clients: adds q's fields to req. 0 or -ENOMEM. */
int cn_d_query_to_json(const cn_d_query *q, json_t *req);
/* Format names: "text", "json", "folded", "pprof", "speedscope", "chrome-trace", "svg",
 * "canopy". Parse returns -EINVAL for others. */
const char *cn_d_format_name(cn_fmt_format f);
int cn_d_format_parse(const char *name, cn_fmt_format *out);

/* Runs q on the session and renders it in q->format into out (bytes; binary formats
 * too). The time range comes from last/from/to relative to the session's start.
 * Transform arguments are checked against the profile first (-ENOENT, exit 2).
 * Returns 0 or negative errno with err set. */
int cn_d_render(cn_live_session *s, const cn_d_query *q, cn_buf *out, cn_err *err);
/* `lines` for function F: the interface's lines JSON object (new reference) or NULL with
 * err set and *code = negative errno. */
json_t *cn_d_lines_json(cn_live_session *s, const cn_d_query *q, const char *func, int *code,
                        cn_err *err);
/* `timeline` in format json|text|chrome-trace into out. 0 or negative errno. */
int cn_d_render_timeline(cn_live_session *s, const cn_d_query *q, cn_buf *out, cn_err *err);

/* ---------------------------------------------------------------------------------------
 * The server (canopyd)
 */

typedef enum cn_d_backend {
    CN_D_LOOP_AUTO = 0,
    CN_D_LOOP_IO_URING,
    CN_D_LOOP_EPOLL,
} cn_d_backend;

typedef struct cn_d_config {
    const char *socket_path; /* NULL = default for the uid (interface.md) */
    const char *state_dir;   /* NULL = default for the uid */
    cn_d_backend backend;
    int listen_fd;             /* >= 0: an already-listening socket (systemd activation) */
    unsigned max_sessions;     /* default 64 */
    unsigned max_clients;      /* default 128 */
    size_t max_request;        /* default CN_PROTO_MAX_REQUEST */
    size_t session_memory;     /* per-session profile bound, default 256 MiB */
    int64_t retention_ns;      /* default 10 min */
    int64_t checkpoint_ns;     /* default 60 s; 0 disables */
    uint64_t state_dir_max;    /* bytes of saved sessions; default 1 GiB */
    int64_t client_timeout_ns; /* a request must complete within this; default 30 s */
    const char *system_group;  /* members may start system sessions; NULL = none */
    unsigned socket_mode;      /* default 0666 for root, 0600 otherwise */
    unsigned owned;            /* which strings _load allocated (internal) */
} cn_d_config;

/* Defaults; then cn_d_config_load() for a config file (key = value lines, see
 * docs/protocol.md "Configuration"). Strings set by _load are owned by the config
 * (release with cn_d_config_clear). */
void cn_d_config_init(cn_d_config *c);
int cn_d_config_load(cn_d_config *c, const char *path, cn_err *err);
void cn_d_config_clear(cn_d_config *c);

typedef struct cn_d_server cn_d_server;

/* Binds the socket, creates the state dir, loads saved sessions, sets up the loop.
 * Returns 0 and *out or negative errno with err set. */
int cn_d_server_new(const cn_d_config *c, cn_d_server **out, cn_err *err);
/* Runs until cn_d_server_shutdown(), a `shutdown` request, or SIGTERM/SIGINT (blocked by
 * cn_d_server_new and read through a signalfd). Stops sampling and saves every session on
 * the way out. Returns 0 or negative errno. */
int cn_d_server_run(cn_d_server *s);
/* Asks the loop to stop at its next tick, once pending replies are sent (at most 1 s). */
void cn_d_server_shutdown(cn_d_server *s);
/* "io_uring" or "epoll" (after _new). */
const char *cn_d_server_backend(const cn_d_server *s);
cn_d_server *cn_d_server_free(cn_d_server *s);

#ifdef __cplusplus
}
#endif
#endif /* CN_D_H */
