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
/* Resident set size of this process in bytes. */
size_t cn_d__rss(void);

#endif /* CN_D_INTERNAL_H */
