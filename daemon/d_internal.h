/* d_internal.h — what daemon/'s files share and nobody else sees.
 *
 * The event loop (loop.c) hides two backends behind one interface: io_uring (multishot
 * accept, recv and send on the client sockets, multishot poll on watched fds, a timeout
 * op for the tick) and epoll (non-blocking sockets, level-triggered readiness). Upper
 * layers see connections with an input and an output cn_buf, watched fds, and a tick.
 * Access control (access.c), the session store and persistence (store.c) and the request
 * handlers (server.c) sit on top. Names carry the cn_d__ prefix.
 */
#ifndef CN_D_INTERNAL_H
#define CN_D_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cn_d.h"
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
    int op_recv, op_send; /* their addresses tag io_uring and epoll events */
    int64_t deadline_ns;  /* server: a request must complete before this (0 = none) */
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
    /* Every tick_ms. */
    void (*tick)(void *ctx);
} cn_d__loop_ops;

/* A watched fd's callback: revents are poll bits (POLLIN, POLLHUP, POLLERR). */
typedef void (*cn_d__watch_fn)(void *arg, int fd, uint32_t revents);

int cn_d__loop_new(cn_d_backend backend, const cn_d__loop_ops *ops, void *ctx, int tick_ms,
                   cn_d__loop **out, cn_err *err);
cn_d__loop *cn_d__loop_free(cn_d__loop *l);
const char *cn_d__loop_backend(const cn_d__loop *l);
/* Accepts connections on a listening socket (not owned). */
int cn_d__loop_listen(cn_d__loop *l, int fd);
/* Watches fd for POLLIN (not owned). The watch stays until _unwatch (call it before
 * closing fd). Returns NULL on ENOMEM. */
cn_d__watch *cn_d__loop_watch(cn_d__loop *l, int fd, cn_d__watch_fn fn, void *arg);
void cn_d__loop_unwatch(cn_d__loop *l, cn_d__watch *w);
/* Starts sending c->out / re-evaluates want_read. Call after changing either. */
void cn_d__conn_update(cn_d__conn *c);
/* Closes after pending output is flushed (flush = true) or at once. */
void cn_d__conn_close(cn_d__conn *c, bool flush);
size_t cn_d__loop_conn_count(const cn_d__loop *l);
/* Runs until _stop. Returns 0 or negative errno. */
int cn_d__loop_run(cn_d__loop *l);
void cn_d__loop_stop(cn_d__loop *l);

/* ---- sessions (session.c) and the shared symbolizer (symbolizer.c) ---------------- */

#define CN_D__PEND_SAMPLES 64   /* samples queued per session before a batched add */
#define CN_D__PEND_REFS    8192 /* frames queued: room for 32 chains of CN_SMP_MAX_FRAMES */

struct cn_d_session {
    char *id, *name, *event, *path; /* owned; path: the state-dir file, NULL if none */
    cn_d_kind kind;
    cn_d_state state;
    cn_d_state saved_state; /* SAVED: the state it had when written */
    pid_t pid;
    char comm[32];
    uid_t owner;
    uint32_t freq;
    char unwind[8];
    int64_t started_unix;
    int64_t start_mono;     /* CLOCK_MONOTONIC ns at start: the profile's time 0 */
    int64_t end_ns;         /* session time when sampling ended */
    int64_t duration_limit; /* > 0: stop after */
    int64_t retention_ns;
    int64_t last_fold_ns;
    int64_t last_sample_ns;
    size_t max_memory;
    bool memory_limited;   /* samples are being refused */
    bool hit_memory_bound; /* the bound was reached at least once */
    bool dirty;            /* changed since the last save */
    uint64_t samples, dropped, lost_saved, threads_saved;
    cn_smp_session *smp;
    cn_agg_profile *p;
    int32_t *obj_res; /* sampler object id -> resource (-1 anonymous, INT32_MIN unknown) */
    size_t n_obj_res;
    const cn_smp_object **res_obj; /* resource -> sampler object */
    size_t n_res_obj;
    pid_t last_tid;
    int32_t last_thread;
    /* symbolization */
    cn_d_symbolizer *sym;
    uint64_t tag;      /* this session's tag in the symbolizer */
    size_t next_frame; /* frames [0, next_frame) were submitted (or need none) */
    uint64_t sym_pending, sym_failed;
    cn_d_session *sym_next;
    /* Samples delivered by the sampler but not yet in the profile: on_sample queues them
     * here and session.c flushes them with cn_agg_add_samples_refs() when the queue fills
     * and at the end of every read, so the queue is empty whenever the owner's code runs
     * (queries, save, info). pend[i].leaf_first points into pend_refs. */
    size_t npend, npend_refs;
    cn_agg_sample_refs pend[CN_D__PEND_SAMPLES];
    cn_agg_frame_ref pend_refs[CN_D__PEND_REFS];
};

/* Registers s for answers (sets s->sym, s->tag); detach cancels its requests. */
void cn_d__symbolizer_attach(cn_d_symbolizer *y, cn_d_session *s);
void cn_d__symbolizer_detach(cn_d_symbolizer *y, cn_d_session *s);
/* Submits s's frames created since the last call. */
void cn_d__symbolizer_submit(cn_d_symbolizer *y, cn_d_session *s);

/* ---- access control (access.c) ---------------------------------------------------- */

typedef struct cn_d__cred {
    pid_t pid;
    uid_t uid;
    gid_t gid;
} cn_d__cred;

/* May cred attach to pid? 0, -EPERM with err explaining, or -ESRCH. */
int cn_d__may_attach(const cn_d__cred *cred, pid_t pid, cn_err *err);
/* May cred start a system session (root, CAP_PERFMON/CAP_SYS_ADMIN, or member of
 * group, which may be NULL)? 0 or -EPERM. */
int cn_d__may_system(const cn_d__cred *cred, const char *group, cn_err *err);
/* The process's comm ("" when gone). */
void cn_d__comm(pid_t pid, char *buf, size_t size);
/* Resident set size of this process in bytes. */
size_t cn_d__rss(void);

#endif /* CN_D_INTERNAL_H */
