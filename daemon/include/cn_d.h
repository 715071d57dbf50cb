/* cn_d.h — canopy's daemon side: the whole public API of daemon/.
 *
 * canopyd hosts live sessions (live/cn_live.h: sampler + symbolizer + aggregate) for its
 * clients. cn_d_server owns the listening socket, the event loop (io_uring, or epoll
 * where io_uring is unavailable), the sessions of every client and their persistence in
 * the state dir, access control from SO_PEERCRED, and the protocol of docs/protocol.md.
 * main.c only parses flags into a cn_d_config and runs it. Queries decode the protocol's
 * QUERY object into a cn_fmt_spec (formats/cn_fmt.h) and render it on a session's profile
 * (cn_d_render) in a forked worker: a copy-on-write snapshot taken between pumps.
 *
 * Ownership: the server owns its sessions and the one symbolizer they share; sessions are
 * freed before it. Everything runs on the loop thread except the symbolizer's worker and
 * the forked query and save workers (daemon/workers.c), which share no memory with it.
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
#include "cn_common.h"
#include "cn_fmt.h"
#include "cn_live.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Queries: the protocol's QUERY fields are a cn_fmt_spec (cn_fmt_spec_from_json), rendered
 * on a session's profile by formats/' one renderer, so files and sessions print alike
 */

/* Renders spec on the session's profile (cn_fmt_render) into out (bytes; binary formats
 * too; spec->timeline for the `timeline` request). Headers name the session (its name,
 * else its id) with its event, samples and lost; --last counts back from the session's
 * clock (cn_live_session_now). Transform arguments are checked against the profile first
 * (-ENOENT, exit 2). When notes is not NULL, the renderer's notes are appended to it, one
 * "note: …\n" line each (cn_fmt_render_opts.notes). Returns 0 or negative errno with err
 * set. */
int cn_d_render(cn_live_session *s, const cn_fmt_spec *spec, cn_buf *out, cn_buf *notes,
                cn_err *err);
/* `lines` for function F: the interface's lines JSON object (new reference) or NULL with
 * err set and *code = negative errno. */
json_t *cn_d_lines_json(cn_live_session *s, const cn_fmt_spec *spec, const char *func, int *code,
                        cn_err *err);

/* ---------------------------------------------------------------------------------------
 * Sessions in replies
 */

/* A session's description in the replies (docs/protocol.md: the entries of `sessions`, the
 * "session" of attach, run, system and stop; `canopy sessions --format json`), from its
 * cn_live_session_info. Strings a target or a user chose go through the protocol's UTF-8
 * rule (cn_proto_str). New reference, NULL on ENOMEM. */
json_t *cn_d_session_json(const cn_live_session *s);

/* ---------------------------------------------------------------------------------------
 * The server (canopyd)
 */

typedef enum cn_d_backend {
    CN_D_LOOP_AUTO = 0,
    CN_D_LOOP_IO_URING,
    CN_D_LOOP_EPOLL,
} cn_d_backend;

typedef struct cn_d_config {
    const char *socket_path; /* NULL = default for the uid (docs/cli.md) */
    const char *state_dir;   /* NULL = default for the uid */
    cn_d_backend backend;
    int listen_fd;             /* >= 0: an already-listening socket (systemd activation) */
    unsigned max_sessions;     /* default 64 */
    unsigned max_clients;      /* default 128 */
    size_t max_request;        /* default CN_PROTO_MAX_REQUEST */
    size_t session_memory;     /* per-session profile bound, default 256 MiB */
    uint64_t unwind_cache;     /* bytes of unwind tables kept for files no live process
                                  maps (cn_smp_cache); default 16 MiB */
    uint64_t symbol_cache;     /* the symbolizer's bound on symbol tables; default 32 MiB */
    uint64_t debug_cache;      /* … and on the debug data it reads; default 64 MiB */
    int64_t retention_ns;      /* default 10 min */
    double fold_trim;          /* cn_live_session_opts.trim_share; 0: never */
    int64_t checkpoint_ns;     /* default 60 s; 0 disables */
    uint64_t state_dir_max;    /* bytes of saved sessions; default 1 GiB */
    int64_t client_timeout_ns; /* a request must complete within this; default 30 s */
    const char *system_group;  /* members may start system sessions; NULL = none */
    unsigned socket_mode;      /* default 0666 for root, 0600 otherwise */
    /* Queries off the loop (docs/cli-live.md "Daemon limits"): forked workers and the
     * bounds of one query. */
    unsigned query_workers;        /* jobs running at once; default 4 */
    unsigned query_max_transforms; /* default 64 */
    size_t query_max_output;       /* rendered bytes; default 64 MiB */
    int64_t query_cpu_ns;          /* CPU time of one query; default 10 s */
    size_t query_memory;           /* a worker's memory beyond the daemon's; default 1 GiB */
    /* Per-user quotas (root: the global bounds above only). */
    unsigned user_max_clients;    /* connections; default 32 */
    unsigned user_max_sessions;   /* running sessions; default 16 */
    unsigned user_max_kept;       /* sessions held, saved ones included; default 512 */
    uint64_t user_max_kept_bytes; /* state-dir bytes; default 256 MiB */
    unsigned user_max_fds;        /* perf fds of running sessions; default 8192 */
    int64_t idle_timeout_ns;      /* a connection without requests; default 10 min */
    int64_t send_timeout_ns;      /* an answer the peer does not read; default 30 s */
    /* Test hooks: only canopyd-test (built with CANOPY_TEST_HOOKS for the tests) sets them,
     * from its environment; 0 in the installed canopyd. */
    int64_t test_attach_delay_ns; /* CANOPYD_TEST_ATTACH_DELAY_MS: a pause between
                                     the access check and opening the events, widening the race
                                     the re-check before enabling closes; 0 in production */
    int64_t test_symbol_delay_ns; /* CANOPYD_TEST_SYMBOL_DELAY_MS: the symbolizer
                                     pauses this long before each batch (a slow symbolizer,
                                     deterministic); 0 in production */
    /* CANOPYD_TEST_SEED: called with each new session's profile before it samples (a live
     * session that starts with bench_tree's 1 M samples, for bench/web_speed.sh); NULL in
     * production. A negative return fails the session's start. */
    int (*test_session_seed)(cn_agg_profile *p, const void *arg);
    const void *test_seed_arg;
    /* The fleet push to ClickHouse (docs/fleet.md): off without fleet_url. */
    const char *fleet_url, *fleet_database, *fleet_host, *fleet_labels, *fleet_user,
        *fleet_password_file;
    /* Also pushing to Grafana Pyroscope (docs/fleet.md): off without fleet_pyroscope_url;
     * fleet_pyroscope_org is sent as X-Scope-OrgID. */
    const char *fleet_pyroscope_url, *fleet_pyroscope_org;
    /* Also pushing OpenTelemetry profiles to an OTLP/HTTP endpoint (docs/fleet.md "Pushing
     * OTLP profiles"): off without fleet_otlp_url. */
    const char *fleet_otlp_url;
    int64_t fleet_interval_ns; /* default 10 s */
    uint64_t fleet_spool_max;  /* bytes of spooled batches; default 256 MiB */
    unsigned owned;            /* which strings _load allocated (internal) */
} cn_d_config;

/* Defaults; then cn_d_config_load() for a config file (key = value lines, see
 * docs/protocol.md "Configuration"). Strings set by _load are owned by the config
 * (release with cn_d_config_clear). */
void cn_d_config_init(cn_d_config *c);
/* canopyd's command-line options and its config file's keys (cn_opt rows, common/):
 * main.c's getopt table and cn_d_config_load() accept exactly these, and --help and the
 * manual pages canopyd(8) and canopyd.conf(5) (man/mangen.c) print them. A new key is one
 * row in config.c's table and its case in apply(). */
extern const cn_opt cn_d_options[];
extern const cn_opt cn_d_config_keys[];
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

/* Installs canopyd's fatal-signal report (crash.c): on SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGABRT or SIGSYS, a line naming the signal, its origin and the thread, then a
 * backtrace, on stderr; then the process dies of that signal (its exit status and core
 * dump are the real ones). Keeps a sanitizer's own handlers. Call once from main(),
 * before any thread starts. */
void cn_d_crash_install(void);

#ifdef __cplusplus
}
#endif
#endif /* CN_D_H */
