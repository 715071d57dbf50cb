/* d_internal.h — what daemon/'s files share and nobody else sees.
 *
 * The event loop (loop.c) hides two backends behind one interface: io_uring (multishot
 * accept, recv and send on the client sockets, multishot poll on watched fds, a timeout
 * op for the tick) and epoll (non-blocking sockets, level-triggered readiness). Upper
 * layers see connections with an input and an output cn_buf, watched fds, and a tick.
 * On top: server.c (the listening socket, connections and their credentials, the
 * dispatch table, the tick, setup and shutdown), access.c (access control), store.c (the
 * sessions in memory and in the state dir: loading, checkpoints, eviction), handlers.c
 * (one function per protocol command), reply.c (building a response and queueing its
 * bytes), session_json.c (a session's description in replies), query.c (the QUERY object
 * and rendering), workers.c (queries and saves in forked children) and quota.c (per-user
 * quotas, connection timeouts). The sessions themselves are live/'s (cn_live.h). Names
 * carry the cn_d__ prefix; config.c holds cn_d_config.
 */
#ifndef CN_D_INTERNAL_H
#define CN_D_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <stdio.h>

#include <jansson.h>

#include "cn_d.h"
#include "cn_fleet.h"
#include "cn_smp.h"

/* ---- event loop ------------------------------------------------------------------- */

typedef struct cn_d__loop cn_d__loop;
typedef struct cn_d__conn cn_d__conn;
typedef struct cn_d__watch cn_d__watch;

/* A client connection. The loop owns it; the server hangs its state on `user`. */
struct cn_d__conn {
    int fd;
    cn_buf in;      /* received bytes not yet consumed by the server */
    cn_buf out;     /* bytes the server queued; the loop sends them */
    void *user;     /* server state */
    bool want_read; /* the server wants more input (default true) */
    bool closing;   /* close requested: no more callbacks */
    bool eof;       /* the peer closed its side or an error occurred */
    /* backend state */
    cn_buf sending; /* bytes handed to an in-flight send (io_uring) */
    char *rbuf;     /* recv scratch (io_uring) */
    int pending;    /* in-flight io_uring ops */
    bool recv_armed, send_armed;
    uint32_t ep_events; /* epoll: registered events */
    cn_d__loop *loop;
    cn_d__conn *next, *prev;
    int op_recv, op_send;    /* their addresses tag io_uring and epoll events */
    int64_t deadline_ns;     /* server: a request must complete before this (0 = none) */
    int64_t out_progress_ns; /* output waits: when it last moved (0 = nothing waits) */
};

typedef struct cn_d__loop_ops {
    /* A new connection; return 0 to keep it (set c->user), negative to refuse (the loop
     * closes it after flushing c->out, so a refusal message may be queued). */
    int (*accept)(void *ctx, cn_d__conn *c);
    /* New bytes in c->in, or c->eof became true. */
    void (*data)(void *ctx, cn_d__conn *c);
    /* c->out (and everything in flight) has been sent. */
    void (*sent)(void *ctx, cn_d__conn *c);
    /* The connection is going away (after close or error); free c->user here. */
    void (*closed)(void *ctx, cn_d__conn *c);
    /* Every tick (cn_d__loop_set_tick). */
    void (*tick)(void *ctx);
    /* After each batch of events (may be NULL). */
    void (*batch)(void *ctx);
} cn_d__loop_ops;

/* A watched fd's callback: revents are poll bits (POLLIN, POLLHUP, POLLERR). */
typedef void (*cn_d__watch_fn)(void *arg, int fd, uint32_t revents);

int cn_d__loop_new(cn_d_backend backend, const cn_d__loop_ops *ops, void *ctx, int tick_ms,
                   cn_d__loop **out, cn_err *err);
cn_d__loop *cn_d__loop_free(cn_d__loop *l);
const char *cn_d__loop_backend(const cn_d__loop *l);
/* Accepts connections on a listening socket (not owned). */
int cn_d__loop_listen(cn_d__loop *l, int fd);
/* Watches fd for POLLIN (not owned). The watch stays until _unwatch; fd may be closed
 * before that (a session closes its rings when its target exits). Returns NULL on ENOMEM or when
 * out of fds (epoll keeps a duplicate of fd). */
cn_d__watch *cn_d__loop_watch(cn_d__loop *l, int fd, cn_d__watch_fn fn, void *arg);
void cn_d__loop_unwatch(cn_d__loop *l, cn_d__watch *w);
/* Starts sending c->out / re-evaluates want_read. Call after changing either. */
void cn_d__conn_update(cn_d__conn *c);
/* Closes after pending output is flushed (flush = true) or at once. */
void cn_d__conn_close(cn_d__conn *c, bool flush);
/* Open connections: those not closing (the client limit counts them). */
size_t cn_d__loop_conn_count(const cn_d__loop *l);
/* Connections refused because the daemon was out of fds (EMFILE, ENFILE). */
uint64_t cn_d__loop_shed_count(const cn_d__loop *l);
/* Runs until _stop. Returns 0 or negative errno. */
int cn_d__loop_run(cn_d__loop *l);
void cn_d__loop_stop(cn_d__loop *l);
/* Sets the tick's interval (ms > 0), the next tick ms from now: a wakeup costs canopyd
 * ~35 us of kernel time on a loaded VM, so an idle daemon ticks rarely. A shorter interval
 * takes effect at once (io_uring: the pending timer is cancelled); ask for a longer one
 * from the tick itself. */
void cn_d__loop_set_tick(cn_d__loop *l, int ms);

/* ---- access control (access.c) ---------------------------------------------------- */

/* A client's credentials, all captured when its connection is accepted and never read
 * again by pid number (a later read could see what the peer exec'ed since: a setuid
 * program, another process that reused the pid). docs/security.md explains the rules. */
typedef struct cn_d__cred {
    pid_t pid;            /* the connecting process (SO_PEERCRED, at connect) */
    uid_t uid;            /* its effective uid at connect (SO_PEERCRED) */
    gid_t gid;            /* its effective gid at connect (SO_PEERCRED) */
    uint64_t cap_eff;     /* effective and permitted capabilities read at accept, 0 when */
    uint64_t cap_prm;     /* the process no longer ran as uid/gid by then (it exec'ed) */
    bool in_system_group; /* the configured system group is among its groups at connect
                             (SO_PEERGROUPS) or is its gid */
} cn_d__cred;

/* Captures the credentials of the peer of connected socket fd into *out: SO_PEERCRED,
 * SO_PEERGROUPS (membership of system_group, which may be NULL), and the capability sets
 * from /proc/PID/status, kept only when the status still shows the connect-time uid and
 * gid and the process (held through a pidfd) is still the one that connected. Returns 0 or
 * negative errno (getsockopt failed). */
int cn_d__cred_capture(int fd, const char *system_group, cn_d__cred *out);

/* May cred attach to pid? 0, -EPERM with err explaining, or -ESRCH. */
int cn_d__may_attach(const cn_d__cred *cred, pid_t pid, cn_err *err);
/* May cred start a system session (root, CAP_PERFMON/CAP_SYS_ADMIN, or member of
 * the system group, which is named in the message and may be NULL)? 0 or -EPERM. */
int cn_d__may_system(const cn_d__cred *cred, const char *group, cn_err *err);
/* A cgroup session (docs/cli-live.md "Containers"): path must be a cgroup directory; then
 * allowed where a system session is, else where the caller owns the cgroup's cgroup.procs
 * (only it or root can add tasks later) and may profile (cn_d__may_attach) every process
 * now in the cgroup and its descendants. 0, -EINVAL (not a cgroup) or -EPERM, err says why. */
int cn_d__may_cgroup(const cn_d__cred *cred, const char *group, const char *path, cn_err *err);
/* May cred get kernel frames? Only where it could get them and their addresses itself:
 * kernel samples (perf_event_paranoid <= 1, or CAP_PERFMON) and kernel addresses (what
 * kptr_restrict shows it: 0 with paranoid <= 1, or CAP_SYSLOG with kptr_restrict <= 1).
 * Root and CAP_SYS_ADMIN always may. Otherwise a session drops kernel frames
 * (docs/security.md, docs/cli-live.md). */
bool cn_d__may_see_kernel(const cn_d__cred *cred);
/* Resident set size of this process in bytes. */
size_t cn_d__rss(void);

/* ---- the server's state (server.c) ------------------------------------------------- */

/* A hosted session and what the server keeps beside it. Owned by the store. */
typedef struct cn_d__entry {
    cn_live_session *s; /* owned */
    cn_d_server *srv;
    cn_d__watch **watches; /* one per ring fd while running; NULL once that fd hung up */
    int *fds;              /* watches[i] polls fds[i] */
    size_t nwatch;
    int64_t last_checkpoint;
    bool finished_saved;        /* written after leaving RUNNING */
    uint64_t errors_logged;     /* the session's allocation failures already reported */
    int64_t save_backoff;       /* after failed saves (ENOSPC…): the next try waits this long
                                   (doubling up to 5 min); 0 after a success */
    struct cn_d__job *save_job; /* a forked writer saving this session, or NULL */
    int64_t save_cpu_ns;        /* the CPU time of the last writer that succeeded */
    uint64_t saves;             /* writes that succeeded */
    bool lazy; /* a saved session known by its metadata only: queries read its file */
    /* owned: the session's fleet push state (fleet_push.c), or NULL */
    struct cn_d__fleet_src *fleet;
} cn_d__entry;

/* A connected client: its credentials are taken once, at accept (SO_PEERCRED). */
typedef struct cn_d__client {
    cn_d__conn *c;
    cn_d__cred cred;
    struct cn_d__job *job;  /* the request being answered by a worker, or NULL */
    int64_t last_active_ns; /* the last request or answer (idle timeout) */
    struct cn_d__client *next, *prev;
} cn_d__client;

/* Counters `status` reports (docs/cli-live.md "Daemon limits"). */
typedef struct cn_d__stats {
    uint64_t jobs_done;           /* queries and saves answered by a worker */
    uint64_t query_too_expensive; /* refused or stopped by a query bound */
    uint64_t jobs_failed;         /* workers that died without an answer */
    uint64_t quota_refused;       /* requests refused by a per-user quota */
    uint64_t quota_evicted;       /* saved sessions deleted for their owner's quota */
    uint64_t emfile;              /* connections shed because the daemon was out of fds */
    uint64_t timeouts;            /* connections closed by the idle or send timeout */
} cn_d__stats;

#define CN_D__MAX_LOADED_SESSIONS 4096 /* sessions held at once, saved ones included */
/* Unwind tables no live process has mapped for this long are dropped (the tick's
 * cn_smp_cache_expire; as the symbol tables' idle expiry): after a build, its compilers'. */
#define CN_D_UNWIND_IDLE_NS (30LL * 1000000000)

struct cn_d_server {
    cn_d_config cfg;
    char *socket_path, *state_dir, *system_group; /* owned */
    int listen_fd;
    bool own_socket;
    int sig_fd;
    cn_d__loop *loop;
    cn_d__loop_ops ops;
    cn_live_symbolizer *sym; /* shared by every session; freed after them */
    cn_smp_cache *unwind;    /* objects' unwind tables, shared likewise */
    int64_t trim_t;          /* the tick's last malloc_trim */
    cn_d__watch *sym_watch, *sig_watch;
    cn_d__entry **entries; /* the store: oldest first */
    size_t n_entries, cap_entries;
    cn_d__client *clients;
    uint64_t next_id; /* the next session is "s<next_id>" */
    int64_t start_ns;
    uint64_t evicted;
    uint64_t rate_samples;
    int64_t rate_t;
    double samples_per_s;
    uint64_t state_dir_bytes;
    int64_t shutdown_at;    /* a shutdown was asked for: stop once replies are out (<= 1 s) */
    struct cn_d__job *jobs; /* workers.c: queued and running jobs, oldest first */
    size_t jobs_running;
    cn_d__stats stats;
    int64_t quota_fd_check; /* quota.c: when targets' threads were last counted */
    /* owned: the fleet push (fleet_push.c), NULL when off */
    struct cn_d__fleet *fleet;
};

/* ---- the session store (store.c) --------------------------------------------------- */

/* Loads every STATE_DIR/ *.canopy as a SAVED session (removing interrupted .tmp writes),
 * oldest first, then applies the state dir's size bound. */
void cn_d__store_load(cn_d_server *srv);
/* Adds a new session (the entry takes ownership of s) and watches its ring fds. Returns
 * 0 and *out, or -ENOMEM (then s was freed and the store is unchanged). */
int cn_d__store_add(cn_d_server *srv, cn_live_session *s, cn_d__entry **out);
/* Removes e (and frees its session); with unlink, its state-dir file too. */
void cn_d__store_remove(cn_d_server *srv, cn_d__entry *e, bool unlink_file);
/* The session named key (id, or the newest with that name) or, without key, the newest
 * non-system session of pid, among those cred may see. NULL if none. */
cn_d__entry *cn_d__store_find(cn_d_server *srv, const cn_d__cred *cred, const char *key, pid_t pid);
size_t cn_d__store_running(const cn_d_server *srv);
/* Drains e's rings into its session (running sessions only); unwatches the rings once it
 * stops running. */
void cn_d__store_pump(cn_d__entry *e);
/* Stops e's sampling if it runs, and writes it to the state dir once it no longer does. */
void cn_d__store_stop(cn_d_server *srv, cn_d__entry *e);
/* The delay between a running session's checkpoints: the configured interval, or longer
 * when writing the session costs more than CHECKPOINT_CPU_SHARE of it (store.c). */
int64_t cn_d__checkpoint_delay(const cn_d_server *srv, const cn_d__entry *e);

/* Every tick: saves sessions that left RUNNING, checkpoints running ones, re-saves those
 * that late symbol answers changed, and applies the state dir's bound. */
void cn_d__store_tick(cn_d_server *srv);
/* Shutdown: stops every session, waits (bounded) for their symbols, saves what changed. */
void cn_d__store_shutdown(cn_d_server *srv);
/* Frees every entry and its session (no saving). */
void cn_d__store_free(cn_d_server *srv);

/* ---- workers (workers.c) ----------------------------------------------------------- */

typedef enum cn_d__job_kind {
    CN_D__JOB_QUERY, /* tree, save, timeline: rendered bytes */
    CN_D__JOB_LINES, /* lines: a JSON object */
    CN_D__JOB_SAVE,  /* write a session to the state dir (checkpoint, stop, late symbols) */
} cn_d__job_kind;

/* A job runs in a forked child: a copy-on-write snapshot of the daemon at fork time, so
 * the loop goes on draining rings while it runs (docs/security.md "Queries and saves off
 * the sampling path"). Built by a handler or the store, owned by the server once
 * submitted. */
typedef struct cn_d__job {
    cn_d__job_kind kind;
    uid_t uid;            /* whose work it is (fairness, root for saves) */
    cn_d__client *cl;     /* QUERY/LINES: who waits for the answer; NULL once it left */
    cn_d__entry *e;       /* the session; NULL once it was removed */
    json_t *req;          /* QUERY/LINES: the request (a reference) */
    cn_fmt_spec spec;     /* QUERY/LINES */
    char *func;           /* LINES: F (owned) */
    bool payload;         /* QUERY: "raw": true */
    char *path;           /* SAVE: the file written (owned) */
    uint64_t changes;     /* SAVE: the session's change counter at fork */
    cn_agg_profile *prof; /* the profile to query (taken before fork), NULL = read path */
    pid_t pid;            /* running: the child */
    int pidfd, memfd;
    cn_d__watch *watch;
    int64_t started_ns;
    /* Set when the tick killed the child at the wall-clock bound: its CPU time and what it
     * waited in then (a query starved of CPU and one stuck on a lock read differently). */
    char wall_kill[96];
    cn_d_server *srv;
    struct cn_d__job *next, *prev;
} cn_d__job;

/* A new job of kind for the session of e (NULL on ENOMEM). */
cn_d__job *cn_d__job_new(cn_d__job_kind kind, cn_d__entry *e, uid_t uid);
/* Frees a job that was never submitted; accepts NULL. */
void cn_d__job_free(cn_d__job *j);
/* Queues j (the server takes it) and starts what the bounds allow. */
void cn_d__job_submit(cn_d_server *srv, cn_d__job *j);
/* The client left: a queued job is dropped, a running one killed (its answer dropped). */
void cn_d__job_cancel(cn_d_server *srv, cn_d__job *j);
/* Session e goes away: its jobs forget it (a save in flight is killed and its file
 * removed when it ends). */
void cn_d__jobs_forget_entry(cn_d_server *srv, cn_d__entry *e);
/* Every tick: kills jobs past their wall-clock bound, starts queued ones. */
void cn_d__jobs_tick(cn_d_server *srv);
/* After each batch of loop events: starts queued jobs. Jobs are not started when they are
 * submitted, so a client that left within the same batch costs no fork. */
void cn_d__jobs_start(cn_d_server *srv);
/* Shutdown: kills queries, waits (bounded) for saves. */
void cn_d__jobs_shutdown(cn_d_server *srv);
/* Checks a query's static bounds (transform count) before anything runs: 0, or -E2BIG
 * with err set (answered as query_too_expensive). */
int cn_d__query_check(const cn_d_server *srv, const cn_fmt_spec *q, cn_err *err);

/* Renders spec on profile p (the session s's profile or a snapshot read from its file) to
 * f; notes as cn_d_render. 0 or negative errno with err set. */
int cn_d__render_to(cn_live_session *s, cn_agg_profile *p, const cn_fmt_spec *spec, FILE *f,
                    cn_buf *notes, cn_err *err);
/* cn_d_lines_json on profile p. */
json_t *cn_d__lines_json(cn_live_session *s, cn_agg_profile *p, const cn_fmt_spec *spec,
                         const char *func, int *code, cn_err *err);

/* ---- per-user quotas (quota.c) ------------------------------------------------------ */

/* May cred open one more connection? 0 or -EUSERS with err set (root: the global bound
 * only). Counts the clients already accepted. */
int cn_d__quota_client(const cn_d_server *srv, const cn_d__cred *cred, cn_err *err);
/* May cred start a session sampling pid (0 = system)? Running sessions and perf fds
 * (the target's threads x CPUs) within the user's quota; kept sessions over the quota
 * make room by deleting the user's oldest stopped one. 0 or -EUSERS with err set. */
int cn_d__quota_session(cn_d_server *srv, const cn_d__cred *cred, pid_t pid, cn_err *err);
/* After saves: each user's kept bytes within quota (their oldest stopped sessions go
 * first), then the state dir's global bound, taken from users over quota first. */
void cn_d__quota_enforce_state_dir(cn_d_server *srv);
/* Every tick: running sessions whose targets grew past the user's perf fd quota are
 * stopped; idle and stalled connections are closed. */
void cn_d__quota_tick(cn_d_server *srv, int64_t now);

/* ---- saved-session metadata (store.c) ------------------------------------------------ */

/* Writes the metadata of profile p (a session's, just saved to path) beside that file
 * (PATH minus ".canopy" plus ".meta"), atomically. 0 or negative errno. */
int cn_d__meta_write(const cn_agg_profile *p, const char *path);
/* Removes path and its metadata file. */
void cn_d__unlink_session_files(const char *path);
/* A save of e failed (err says why): logged once per streak, retried with back-off. */
void cn_d__store_save_failed(cn_d_server *srv, cn_d__entry *e, const cn_err *err);
/* Removes the store's entry at index i (freeing the session). */
void cn_d__store_remove_at(cn_d_server *srv, size_t i);
/* ---- the fleet push (fleet_push.c, docs/fleet.md) ---------------------------------- */

/* Starts the fleet push when the config has a fleet_url, fleet_pyroscope_url or fleet_otlp_url
 * (else nothing). 0 or negative errno with err set (a bad setting, an unreadable password file). */
int cn_d__fleet_new(cn_d_server *srv, cn_err *err);
/* Every tick: once per fleet_interval, collects each pushed session's new samples into
 * one batch and hands it to the pusher thread. */
void cn_d__fleet_tick(cn_d_server *srv);
/* Starts pushing e's session with these labels (cleared) unless off or the push is off. */
void cn_d__fleet_track(cn_d_server *srv, cn_d__entry *e, cn_fleet_labels *labels, bool off);
/* e is going away: its samples not sent yet are collected now. */
void cn_d__fleet_forget(cn_d_server *srv, cn_d__entry *e);
/* Frees an entry's push state (store.c's entry_free). Accepts NULL. */
void cn_d__fleet_src_free(struct cn_d__fleet_src *src);
/* Shutdown: collects what every session has left and waits (bounded) for the pusher. */
void cn_d__fleet_shutdown(cn_d_server *srv);
void cn_d__fleet_free(cn_d_server *srv);
/* The `fleet` member of the status answer (new reference), NULL when the push is off. */
json_t *cn_d__fleet_status(cn_d_server *srv);

/* ---- replies (reply.c) ------------------------------------------------------------- */

/* A response being built: the JSON object, and optionally rendered bytes that follow it
 * or are embedded into it (docs/protocol.md "Responses"). */
typedef struct cn_d__reply {
    json_t *msg;     /* the response object (owned); NULL = out of memory */
    const char *key; /* set: raw is the JSON value of msg's member `key` (a rendered tree) */
    cn_buf raw;      /* that value's bytes, or the payload when payload is set */
    bool payload;    /* "raw": true: msg's line is followed by raw's bytes as they are */
    bool deferred;   /* a worker answers later (workers.c): nothing to send now */
} cn_d__reply;

void cn_d__reply_init(cn_d__reply *rp);
/* An error response for a negative errno from a session or a query: the protocol's code
 * name and exit status for it, err's message (or strerror). New reference or NULL. */
json_t *cn_d__reply_error(const json_t *req, int code, const cn_err *err);
/* Adds rendered bytes in format fmt to rp (whose msg is set): with payload as they are
 * after the line; otherwise JSON trees embedded as the member json_key, text as the
 * string "output", binary formats as base64 "output_base64". Takes out's bytes. 0 or
 * -ENOMEM. */
int cn_d__reply_output(cn_d__reply *rp, cn_fmt_format fmt, const char *json_key, cn_buf *out,
                       bool payload);
/* Adds the renderer's notes ("note: …\n" lines, cn_fmt_render_opts.notes) to rp's msg as
 * the array of strings "notes", without the "note: " prefix (docs/protocol.md `tree`);
 * nothing when there are none. 0 or -ENOMEM. */
int cn_d__reply_notes(cn_d__reply *rp, const cn_buf *notes);
/* Queues rp's bytes on c's output, all or nothing (an error response replaces a reply
 * that cannot be queued), and releases rp. */
void cn_d__reply_send(cn_d__conn *c, cn_d__reply *rp);

/* ---- request handlers (handlers.c) ------------------------------------------------- */

/* One protocol command: reads req, acts as cl (whose credentials were checked at accept
 * only for identity: each handler checks access), sets rp->msg (NULL = out of memory). */
typedef void (*cn_d__handler)(cn_d_server *srv, cn_d__client *cl, const json_t *req,
                              cn_d__reply *rp);

void cn_d__cmd_hello(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp);
void cn_d__cmd_status(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp);
void cn_d__cmd_sessions(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp);
void cn_d__cmd_attach(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp);
void cn_d__cmd_run(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp);
void cn_d__cmd_system(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp);
void cn_d__cmd_tree(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp);
void cn_d__cmd_save(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp);
void cn_d__cmd_timeline(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp);
void cn_d__cmd_lines(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp);
void cn_d__cmd_stop(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp);
void cn_d__cmd_rm(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp);
void cn_d__cmd_shutdown(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp);

#endif /* CN_D_INTERNAL_H */
