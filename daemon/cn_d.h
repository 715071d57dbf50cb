/* cn_d.h — canopy's daemon side: the whole public API of daemon/.
 *
 * Two layers, both usable outside canopyd:
 *
 * 1. Sessions (what the client's in-process mode reuses). A cn_d_session samples one
 *    target (a PID with all its threads and future children, a held child for `run`, or
 *    the whole system) into one cn_agg_profile:
 *      perf rings → cn_smp (read, unwind) → callbacks here → cn_agg (intern frames and
 *      stacks, add samples) → new native frames → the shared cn_d_symbolizer (a cn_sym
 *      worker thread) → answers routed back by session → cn_agg_regroup().
 *    The owner polls cn_d_session_fds() (POLLIN) and the symbolizer's fd, and calls
 *    cn_d_session_pump() / cn_d_symbolizer_dispatch() when they are readable (or on a
 *    timer: pump is cheap when nothing is there). Pump also applies the live window:
 *    raw samples older than the retention are folded into the all-time tree
 *    (cn_agg_fold_before), and the memory bound (reaching it is reported in the info's
 *    `memory_limited`, and further samples are counted as dropped, never a crash).
 *    Queries (cn_d_render) run on the owner's thread between pumps.
 *
 * 2. The server (canopyd): cn_d_server owns the listening socket, the event loop
 *    (io_uring, or epoll where io_uring is unavailable), the sessions of every client,
 *    access control from SO_PEERCRED, persistence in the state dir, and the protocol of
 *    docs/protocol.md. main.c only parses flags into a cn_d_config and runs it.
 *
 * Ownership: a session owns its profile and its sampler; the symbolizer must outlive every
 * session attached to it. Everything is single-threaded except the symbolizer's worker.
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
#include "cn_smp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * The shared symbolizer: one cn_sym cache + worker for every session.
 */

typedef struct cn_d_symbolizer cn_d_symbolizer;

/* Starts the worker. max_memory: the object cache bound (0 = cn_sym's default).
 * Returns 0 and *out, or negative errno. */
int cn_d_symbolizer_new(size_t max_memory, cn_d_symbolizer **out, cn_err *err);
/* Stops the worker and frees the cache; every session using it must be freed first.
 * Accepts NULL; returns NULL. */
cn_d_symbolizer *cn_d_symbolizer_free(cn_d_symbolizer *s);
/* The fd to poll for POLLIN: answers are waiting. */
int cn_d_symbolizer_fd(const cn_d_symbolizer *s);
/* Takes every waiting answer and applies it to its session (cn_agg_regroup). Answers for
 * sessions that are gone are dropped. Returns the number of frames applied or -errno. */
int cn_d_symbolizer_dispatch(cn_d_symbolizer *s);
/* Blocks until every submitted frame is answered, then dispatches (end of `run`, tests).
 * timeout_ms < 0 = forever. Returns 0 or -ETIMEDOUT. */
int cn_d_symbolizer_flush(cn_d_symbolizer *s, int timeout_ms);

/* ---------------------------------------------------------------------------------------
 * Sessions
 */

typedef enum cn_d_kind {
    CN_D_ATTACH = 0, /* a running process */
    CN_D_RUN,        /* a child held before exec: sampling starts at exec (enable_on_exec) */
    CN_D_SYSTEM,     /* every CPU */
} cn_d_kind;

typedef enum cn_d_state {
    CN_D_RUNNING = 0,
    CN_D_EXITED,  /* the target exited; data kept */
    CN_D_STOPPED, /* stopped by a request (or the duration elapsed) */
    CN_D_SAVED,   /* loaded from the state dir; queryable, not sampling */
} cn_d_state;

const char *cn_d_kind_name(cn_d_kind k);   /* "attach", "run", "system" */
const char *cn_d_state_name(cn_d_state s); /* "running", "exited", "stopped", "saved" */

typedef struct cn_d_session_opts {
    cn_d_kind kind;
    pid_t pid;         /* ATTACH / RUN */
    const char *name;  /* optional display name (copied) */
    const char *id;    /* session id (copied); NULL = "local" */
    const char *event; /* NULL = auto */
    uint32_t freq;     /* 0 = 99 */
    cn_smp_unwind unwind;
    uint32_t stack_size; /* 0 = sampler default */
    bool no_kernel;
    int64_t duration_ns;  /* > 0: stop after this long */
    int64_t retention_ns; /* raw-sample window; 0 = default 10 min; < 0 = keep everything */
    size_t max_memory;    /* bytes of profile tables; 0 = default 256 MiB */
    uid_t owner;          /* who may see it (daemon); informative in-process */
    uint32_t ring_pages;  /* 0 = sampler default */
} cn_d_session_opts;

void cn_d_session_opts_init(cn_d_session_opts *o);

typedef struct cn_d_session cn_d_session;

/* Creates and starts a session: opens the perf events (for RUN with enable_on_exec; the
 * caller releases the held child afterwards). sym may be NULL (no symbolization: frames
 * stay `LIB+0xOFFSET`). Returns 0 and *out, or negative errno with err set
 * (-ESRCH no such process, -EACCES/-EPERM, -ENOENT unknown event, ...). */
int cn_d_session_new(const cn_d_session_opts *o, cn_d_symbolizer *sym, cn_d_session **out,
                     cn_err *err);
/* A SAVED session from a .canopy file (meta keys written by cn_d_session_save restore
 * the id, name, owner, target, counters). Returns 0 and *out, or negative errno. */
int cn_d_session_load(const char *path, cn_d_session **out, cn_err *err);
/* Stops sampling (if running) and frees everything; accepts NULL; returns NULL. */
cn_d_session *cn_d_session_free(cn_d_session *s);

/* The ring fds (POLLIN) while running; 0 otherwise. The array belongs to the session. */
size_t cn_d_session_fds(const cn_d_session *s, const int **fds);
/* Drains the rings into the profile, submits new frames to the symbolizer, applies the
 * retention window, the memory bound and the duration, and notices target exit (state
 * EXITED). Never blocks. Returns the number of samples added (>= 0) or negative errno. */
int cn_d_session_pump(cn_d_session *s);
/* Stops sampling (delivers what the rings still hold); state STOPPED unless it was
 * EXITED. Idempotent. Returns 0 or negative errno. */
int cn_d_session_stop(cn_d_session *s);

typedef struct cn_d_session_info {
    const char *id, *name; /* owned by the session */
    cn_d_kind kind;
    cn_d_state state;
    pid_t pid;     /* 0 for SYSTEM */
    char comm[32]; /* the target's name at attach */
    uid_t owner;
    const char *event; /* "cpu-clock", … (owned by the session) */
    uint32_t freq;
    const char *unwind;    /* "fp", "dwarf", "auto" */
    int64_t started_unix;  /* wall-clock seconds at start */
    int64_t duration_ns;   /* time sampled so far (or in total when not running) */
    uint64_t samples;      /* samples added to the profile (all time) */
    uint64_t lost;         /* records the kernel dropped */
    uint64_t dropped;      /* samples dropped because the memory bound was reached */
    uint64_t threads;      /* threads seen */
    uint64_t unsymbolized; /* frames submitted and not yet resolved, plus unresolvable */
    size_t memory;         /* profile bytes */
    bool memory_limited;   /* the memory bound was reached */
} cn_d_session_info;

void cn_d_session_info_get(const cn_d_session *s, cn_d_session_info *out);
/* The session's profile (owned by the session; only touch it on the owner's thread). */
cn_agg_profile *cn_d_session_profile(cn_d_session *s);
/* Nanoseconds of session time now (the profile's time base: samples carry
 * time since start); for `--last`. */
int64_t cn_d_session_now(const cn_d_session *s);

/* Writes the session as a lossless .canopy file atomically: path.tmp, fsync, rename,
 * fsync of the directory. The session's identity and counters go into the file's
 * metadata. Returns 0 or negative errno with err set. */
int cn_d_session_save(cn_d_session *s, const char *path, cn_err *err);
/* Sets whether the state dir copy is current (the server's checkpointing). */
bool cn_d_session_dirty(const cn_d_session *s);
void cn_d_session_mark_clean(cn_d_session *s);

/* A session's description as in `canopy sessions --format json` (new reference). */
json_t *cn_d_session_json(const cn_d_session *s);

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
int cn_d_render(cn_d_session *s, const cn_d_query *q, cn_buf *out, cn_err *err);
/* `lines` for function F: the interface's lines JSON object (new reference) or NULL with
 * err set and *code = negative errno. */
json_t *cn_d_lines_json(cn_d_session *s, const cn_d_query *q, const char *func, int *code,
                        cn_err *err);
/* `timeline` in format json|text|chrome-trace into out. 0 or negative errno. */
int cn_d_render_timeline(cn_d_session *s, const cn_d_query *q, cn_buf *out, cn_err *err);

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
