/* loop.c — canopyd's event loop, on io_uring or epoll behind one interface.
 *
 * io_uring: one multishot accept on the listening socket; per connection one recv (into a
 * fixed scratch buffer, appended to c->in on completion, so the server may consume c->in
 * while a recv is in flight) and one send (from c->sending, a buffer swapped in from
 * c->out, so the server may queue more output while a send is in flight); a multishot
 * poll per watched fd; a timeout op for the tick. Every op's user_data is the address of
 * an int tag inside its owner; owners are freed only when no op is in flight.
 * epoll: non-blocking sockets, level-triggered readiness, the tick as epoll_wait's
 * timeout. A watch registers the loop's own duplicate of the fd (w->efd): EPOLL_CTL_DEL
 * needs an open fd, and a session closes its ring fds when it sees its target exit, before
 * its owner can unwatch them; if the file were still open elsewhere (a forked worker's copy
 * before its close_range), the registration of the closed fd would outlive the watch and
 * its next event would read freed memory (issue 22). It costs one fd per watch, on this
 * backend only: an io_uring poll holds its own reference to the file and is removed by
 * user_data. In both, connections and watches are destroyed in a reap phase after each
 * batch of events, so no event can refer to freed memory.
 * Out of fds (EMFILE, ENFILE), a pending connection would make accept fail at once, again
 * and again: the loop keeps one spare fd, and then closes it, accepts that connection,
 * tells it `busy` and closes it, and takes the spare back (shed_one), so every failure
 * consumes a connection instead of spinning; if even that fails, accepting pauses until
 * the next tick. The count is in `status` (docs/security.md).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "d_internal.h"

#define RBUF_SIZE     (16 * 1024)
#define SEND_CHUNK    (1024 * 1024)
#define CONN_IN_SLACK (16 * 1024)

enum { OP_ACCEPT = 1, OP_RECV, OP_SEND, OP_WATCH, OP_TIMER, OP_TIMER_CANCEL };

struct cn_d__watch {
    int op; /* OP_WATCH */
    int fd;
    int efd; /* epoll: the loop's duplicate of fd, the one registered; -1 when removed */
    cn_d__watch_fn fn;
    void *arg;
    bool dead;
    bool armed; /* io_uring: a multishot poll is in flight */
    cn_d__watch *next;
};

struct cn_d__loop {
    cn_d_backend backend;
    const cn_d__loop_ops *ops;
    void *ctx;
    int tick_ms;
    struct io_uring ring;
    bool ring_ok;
    int epfd;
    int listen_fd;
    int op_accept;
    bool accept_armed;
    bool accept_backoff; /* accept failed (EMFILE…): re-arm at the next tick, not at once */
    int op_timer;
    int op_timer_cancel;
    bool timer_armed;
    struct __kernel_timespec ts;
    int64_t next_tick;
    cn_d__conn *conns;
    cn_d__watch *watches;
    bool stop;
    int reserve_fd; /* held for the EMFILE case: see shed_one() */
    uint64_t shed;  /* connections refused because fds ran out */
};

#define container_of(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))

static int64_t now_ms(void)
{
    return cn_common_now_ns() / 1000000;
}

/* ---- running out of fds ------------------------------------------------------------ */

static const char shed_line[] = "{\"v\":1,\"ok\":false,\"error\":{\"code\":\"busy\",\"message\":"
                                "\"canopyd is out of file descriptors\",\"exit\":1}}\n";

/* Accepting failed with err: on EMFILE/ENFILE, refuses one pending connection using the
 * spare fd. Returns true if a connection was consumed (accepting may go on). */
static bool shed_one(cn_d__loop *l, int err)
{
    if (err != EMFILE && err != ENFILE)
        return false;
    if (l->reserve_fd >= 0) {
        close(l->reserve_fd);
        l->reserve_fd = -1;
    }
    int fd = accept4(l->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
        ssize_t w = send(fd, shed_line, sizeof(shed_line) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w; /* best effort: the peer learns why, or sees the close */
        close(fd);
        l->shed++;
    }
    l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd >= 0;
}

/* ---- io_uring submission helpers --------------------------------------------------- */

static struct io_uring_sqe *get_sqe(cn_d__loop *l)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
    if (!sqe) {
        io_uring_submit(&l->ring);
        sqe = io_uring_get_sqe(&l->ring);
    }
    return sqe;
}

static void arm_accept(cn_d__loop *l)
{
    struct io_uring_sqe *sqe;
    if (l->accept_armed || l->accept_backoff || l->listen_fd < 0 || !(sqe = get_sqe(l)))
        return;
    io_uring_prep_multishot_accept(sqe, l->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data(sqe, &l->op_accept);
    l->accept_armed = true;
}

static void arm_timer(cn_d__loop *l)
{
    struct io_uring_sqe *sqe;
    if (l->timer_armed || !(sqe = get_sqe(l)))
        return;
    l->ts.tv_sec = l->tick_ms / 1000;
    l->ts.tv_nsec = (long long)(l->tick_ms % 1000) * 1000000;
    io_uring_prep_timeout(sqe, &l->ts, 0, 0);
    io_uring_sqe_set_data(sqe, &l->op_timer);
    l->timer_armed = true;
}

static void arm_watch(cn_d__loop *l, cn_d__watch *w)
{
    struct io_uring_sqe *sqe;
    if (w->armed || w->dead || !(sqe = get_sqe(l)))
        return;
    io_uring_prep_poll_multishot(sqe, w->fd, POLLIN);
    io_uring_sqe_set_data(sqe, &w->op);
    w->armed = true;
}

static void cancel_op(cn_d__loop *l, void *tag)
{
    struct io_uring_sqe *sqe = get_sqe(l);
    if (!sqe)
        return;
    io_uring_prep_cancel(sqe, tag, 0);
    io_uring_sqe_set_data(sqe, NULL);
}

/* ---- connections ------------------------------------------------------------------ */

static bool conn_output_empty(const cn_d__conn *c)
{
    return cn_buf_len(&c->out) == 0 && cn_buf_len(&c->sending) == 0;
}

static void uring_conn_update(cn_d__conn *c)
{
    cn_d__loop *l = c->loop;
    if (!c->send_armed && !c->eof) {
        if (cn_buf_len(&c->sending) == 0 && cn_buf_len(&c->out) > 0) {
            cn_buf t = c->sending;
            c->sending = c->out;
            c->out = t;
        }
        size_t n = cn_buf_len(&c->sending);
        struct io_uring_sqe *sqe;
        if (n > 0 && (sqe = get_sqe(l))) {
            io_uring_prep_send(sqe, c->fd, cn_buf_ptr(&c->sending), n < SEND_CHUNK ? n : SEND_CHUNK,
                               MSG_NOSIGNAL);
            io_uring_sqe_set_data(sqe, &c->op_send);
            c->send_armed = true;
            c->pending++;
        }
    }
    bool room = cn_buf_len(&c->in) < c->in.limit;
    if (c->want_read && room && !c->recv_armed && !c->eof && !c->closing) {
        struct io_uring_sqe *sqe = get_sqe(l);
        if (sqe) {
            io_uring_prep_recv(sqe, c->fd, c->rbuf, RBUF_SIZE, 0);
            io_uring_sqe_set_data(sqe, &c->op_recv);
            c->recv_armed = true;
            c->pending++;
        }
    }
}

static void epoll_conn_update(cn_d__conn *c)
{
    uint32_t ev = 0;
    bool room = cn_buf_len(&c->in) < c->in.limit;
    if (c->want_read && room && !c->eof && !c->closing)
        ev |= EPOLLIN;
    if (!conn_output_empty(c) && !c->eof)
        ev |= EPOLLOUT;
    if (ev == c->ep_events)
        return;
    struct epoll_event e = {.events = ev, .data.ptr = &c->op_recv};
    epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &e);
    c->ep_events = ev;
}

void cn_d__conn_update(cn_d__conn *c)
{
    /* The send timeout counts from the last progress while output waits. */
    if (conn_output_empty(c))
        c->out_progress_ns = 0;
    else if (!c->out_progress_ns)
        c->out_progress_ns = cn_common_now_ns();
    if (c->loop->backend == CN_D_LOOP_IO_URING)
        uring_conn_update(c);
    else
        epoll_conn_update(c);
}

void cn_d__conn_close(cn_d__conn *c, bool flush)
{
    c->closing = true;
    c->want_read = false;
    if (!flush) {
        c->eof = true;
        cn_buf_reset(&c->out);
    }
    if (c->loop->backend == CN_D_LOOP_IO_URING) {
        /* SHUT_RD completes a pending recv; a pending send finishes or fails. */
        shutdown(c->fd, c->eof ? SHUT_RDWR : SHUT_RD);
        if (c->recv_armed)
            cancel_op(c->loop, &c->op_recv);
        if (c->eof && c->send_armed)
            cancel_op(c->loop, &c->op_send);
    }
    cn_d__conn_update(c);
}

static cn_d__conn *conn_new(cn_d__loop *l, int fd)
{
    cn_d__conn *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    if (l->backend == CN_D_LOOP_IO_URING && !(c->rbuf = malloc(RBUF_SIZE))) {
        free(c);
        return NULL;
    }
    c->fd = fd;
    c->loop = l;
    c->op_recv = OP_RECV;
    c->op_send = OP_SEND;
    c->want_read = true;
    cn_buf_init(&c->in, CN_PROTO_MAX_REQUEST + CONN_IN_SLACK);
    cn_buf_init(&c->out, 0);
    cn_buf_init(&c->sending, 0);
    c->next = l->conns;
    if (l->conns)
        l->conns->prev = c;
    l->conns = c;
    return c;
}

static void conn_destroy(cn_d__loop *l, cn_d__conn *c)
{
    if (l->ops->closed)
        l->ops->closed(l->ctx, c);
    if (c->prev)
        c->prev->next = c->next;
    else
        l->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (l->backend == CN_D_LOOP_EPOLL)
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    cn_buf_free(&c->in);
    cn_buf_free(&c->out);
    cn_buf_free(&c->sending);
    free(c->rbuf);
    free(c);
}

static void conn_accepted(cn_d__loop *l, int fd)
{
    cn_d__conn *c = conn_new(l, fd);
    if (!c) {
        close(fd);
        return;
    }
    if (l->backend == CN_D_LOOP_EPOLL) {
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = &c->op_recv};
        c->ep_events = EPOLLIN;
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
            c->eof = c->closing = true;
            return;
        }
    }
    if (l->ops->accept(l->ctx, c) < 0)
        cn_d__conn_close(c, true);
    else
        cn_d__conn_update(c);
}

/* Destroys connections and watches nobody can hear from any more. */
static void reap(cn_d__loop *l)
{
    for (cn_d__conn *c = l->conns, *next; c; c = next) {
        next = c->next;
        if (!c->closing)
            continue;
        if (conn_output_empty(c) && !c->eof) {
            c->eof = true; /* flushed: now close for real */
            if (l->backend == CN_D_LOOP_IO_URING) {
                shutdown(c->fd, SHUT_RDWR);
                if (c->recv_armed)
                    cancel_op(l, &c->op_recv);
            }
        }
        if (c->eof && c->pending == 0)
            conn_destroy(l, c);
    }
    for (cn_d__watch **pw = &l->watches; *pw;) {
        cn_d__watch *w = *pw;
        if (w->dead && !w->armed) {
            *pw = w->next;
            free(w);
        } else {
            pw = &w->next;
        }
    }
}

/* ---- io_uring completions ---------------------------------------------------------- */

static void uring_complete(cn_d__loop *l, struct io_uring_cqe *cqe)
{
    int *tag = io_uring_cqe_get_data(cqe);
    if (!tag)
        return; /* a cancel */
    bool more = cqe->flags & IORING_CQE_F_MORE;
    switch (*tag) {
    case OP_ACCEPT:
        if (!more)
            l->accept_armed = false; /* re-armed after the batch */
        if (cqe->res >= 0) {
            conn_accepted(l, cqe->res);
        } else if (cqe->res != -ECANCELED && cqe->res != -EINTR) {
            /* EMFILE…: refuse one, then resume at the next tick, never spin on it. */
            shed_one(l, -cqe->res);
            l->accept_backoff = true;
        }
        break;
    case OP_TIMER:
        l->timer_armed = false;
        break;
    case OP_TIMER_CANCEL: /* its timer completes on its own (-ECANCELED, or it had fired) */
        break;
    case OP_WATCH: {
        cn_d__watch *w = container_of(tag, cn_d__watch, op);
        if (!more)
            w->armed = false;
        if (!w->dead && cqe->res > 0)
            w->fn(w->arg, w->fd, (uint32_t)cqe->res);
        else if (!w->dead && cqe->res < 0 && cqe->res != -ECANCELED)
            w->fn(w->arg, w->fd, POLLERR);
        break;
    }
    case OP_RECV: {
        cn_d__conn *c = container_of(tag, cn_d__conn, op_recv);
        c->recv_armed = false;
        c->pending--;
        if (cqe->res > 0 && !c->closing) {
            if (cn_buf_append(&c->in, c->rbuf, (size_t)cqe->res) < 0)
                c->eof = true;
        } else if (cqe->res <= 0 && cqe->res != -ECANCELED) {
            c->eof = true;
        }
        if (!c->closing)
            l->ops->data(l->ctx, c);
        if (!c->closing)
            cn_d__conn_update(c);
        break;
    }
    case OP_SEND: {
        cn_d__conn *c = container_of(tag, cn_d__conn, op_send);
        c->send_armed = false;
        c->pending--;
        if (cqe->res < 0) {
            c->eof = true;
            cn_buf_reset(&c->sending);
            cn_buf_reset(&c->out);
            if (!c->closing)
                l->ops->data(l->ctx, c);
            break;
        }
        cn_buf_consume(&c->sending, (size_t)cqe->res);
        if (cqe->res > 0)
            c->out_progress_ns = cn_common_now_ns();
        cn_d__conn_update(c);
        if (conn_output_empty(c) && !c->closing)
            l->ops->sent(l->ctx, c);
        break;
    }
    default:
        break;
    }
}

static int uring_run(cn_d__loop *l)
{
    l->next_tick = now_ms() + l->tick_ms;
    while (!l->stop) {
        arm_accept(l);
        arm_timer(l);
        for (cn_d__watch *w = l->watches; w; w = w->next)
            arm_watch(l, w);
        int r = io_uring_submit_and_wait(&l->ring, 1);
        if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY)
            return r;
        struct io_uring_cqe *cqe;
        unsigned head, n = 0;
        io_uring_for_each_cqe(&l->ring, head, cqe)
        {
            uring_complete(l, cqe);
            n++;
        }
        io_uring_cq_advance(&l->ring, n);
        if (now_ms() >= l->next_tick) {
            l->next_tick = now_ms() + l->tick_ms;
            l->accept_backoff = false;
            l->ops->tick(l->ctx);
        }
        if (l->ops->batch)
            l->ops->batch(l->ctx);
        reap(l);
    }
    return 0;
}

/* ---- epoll ------------------------------------------------------------------------- */

static void epoll_conn_event(cn_d__loop *l, cn_d__conn *c, uint32_t ev)
{
    if (c->eof)
        return;
    if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        for (int i = 0; i < 4 && c->want_read && !c->eof; i++) {
            size_t room;
            char *p = cn_buf_space(&c->in, RBUF_SIZE, &room);
            if (!p)
                break;
            ssize_t n = recv(c->fd, p, room, 0);
            if (n > 0) {
                cn_buf_commit(&c->in, (size_t)n);
                continue;
            }
            if (n == 0 || (errno != EAGAIN && errno != EINTR))
                c->eof = true;
            break;
        }
        if (ev & (EPOLLHUP | EPOLLERR))
            c->eof = true; /* both directions are gone: nothing more will come */
        if (!c->closing)
            l->ops->data(l->ctx, c);
    }
    if ((ev & EPOLLOUT) && !c->eof) {
        while (cn_buf_len(&c->out) > 0) {
            ssize_t n = send(c->fd, cn_buf_ptr(&c->out), cn_buf_len(&c->out), MSG_NOSIGNAL);
            if (n > 0) {
                cn_buf_consume(&c->out, (size_t)n);
                c->out_progress_ns = cn_common_now_ns();
                continue;
            }
            if (n < 0 && errno != EAGAIN && errno != EINTR) {
                c->eof = true;
                cn_buf_reset(&c->out);
                if (!c->closing)
                    l->ops->data(l->ctx, c);
            }
            break;
        }
        if (conn_output_empty(c) && !c->closing && !c->eof)
            l->ops->sent(l->ctx, c);
    }
    if (!c->eof)
        cn_d__conn_update(c);
}

static void epoll_listen_events(cn_d__loop *l, uint32_t ev)
{
    struct epoll_event e = {.events = ev, .data.ptr = &l->op_accept};
    epoll_ctl(l->epfd, EPOLL_CTL_MOD, l->listen_fd, &e);
}

static void epoll_accept(cn_d__loop *l)
{
    for (int i = 0; i < 64; i++) {
        int fd = accept4(l->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            conn_accepted(l, fd);
            continue;
        }
        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
            return;
        if (!shed_one(l, errno)) {
            /* Level-triggered: a pending connection we cannot take would wake us at once,
             * forever. Stop listening until the next tick. */
            epoll_listen_events(l, 0);
            l->accept_backoff = true;
            return;
        }
    }
}

static int epoll_run(cn_d__loop *l)
{
    struct epoll_event evs[64];
    l->next_tick = now_ms() + l->tick_ms;
    while (!l->stop) {
        int64_t wait = l->next_tick - now_ms();
        int n = epoll_wait(l->epfd, evs, 64, wait < 0 ? 0 : (int)wait);
        if (n < 0 && errno != EINTR)
            return -errno;
        for (int i = 0; i < n; i++) {
            int *tag = evs[i].data.ptr;
            if (*tag == OP_ACCEPT) {
                epoll_accept(l);
            } else if (*tag == OP_WATCH) {
                cn_d__watch *w = container_of(tag, cn_d__watch, op);
                if (!w->dead)
                    w->fn(w->arg, w->fd, evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR));
            } else if (*tag == OP_RECV) {
                epoll_conn_event(l, container_of(tag, cn_d__conn, op_recv), evs[i].events);
            }
        }
        if (now_ms() >= l->next_tick) {
            l->next_tick = now_ms() + l->tick_ms;
            if (l->accept_backoff) {
                l->accept_backoff = false;
                epoll_listen_events(l, EPOLLIN);
            }
            l->ops->tick(l->ctx);
        }
        if (l->ops->batch)
            l->ops->batch(l->ctx);
        reap(l);
    }
    return 0;
}

/* ---- public ------------------------------------------------------------------------ */

void cn_d__loop_set_tick(cn_d__loop *l, int ms)
{
    assert(ms > 0);
    int64_t due = now_ms() + ms;
    bool sooner = due < l->next_tick;
    l->tick_ms = ms;
    l->next_tick = due;
    if (!sooner)
        return; /* an armed timer fires later, then is re-armed with ms */
    struct io_uring_sqe *sqe;
    if (l->backend == CN_D_LOOP_IO_URING && l->timer_armed && (sqe = get_sqe(l))) {
        /* The pending timeout is cancelled; its completion re-arms it with ms. */
        io_uring_prep_timeout_remove(sqe, (uint64_t)(uintptr_t)&l->op_timer, 0);
        io_uring_sqe_set_data(sqe, &l->op_timer_cancel);
    }
}

int cn_d__loop_new(cn_d_backend backend, const cn_d__loop_ops *ops, void *ctx, int tick_ms,
                   cn_d__loop **out, cn_err *err)
{
    cn_d__loop *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->ops = ops;
    l->ctx = ctx;
    l->tick_ms = tick_ms > 0 ? tick_ms : 100;
    l->listen_fd = -1;
    l->epfd = -1;
    l->op_accept = OP_ACCEPT;
    l->op_timer = OP_TIMER;
    l->op_timer_cancel = OP_TIMER_CANCEL;
    l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int r = -ENOSYS;
    if (backend != CN_D_LOOP_EPOLL) {
        struct io_uring_params p = {0};
        p.flags = IORING_SETUP_CLAMP;
        r = io_uring_queue_init_params(512, &l->ring, &p);
        if (r == 0 && !(p.features & IORING_FEAT_FAST_POLL)) {
            io_uring_queue_exit(&l->ring);
            r = -ENOTSUP;
        }
        if (r == 0) {
            l->ring_ok = true;
            l->backend = CN_D_LOOP_IO_URING;
        } else if (backend == CN_D_LOOP_IO_URING) {
            snprintf(err->msg, sizeof(err->msg), "io_uring is unavailable: %s", strerror(-r));
            if (l->reserve_fd >= 0)
                close(l->reserve_fd);
            free(l);
            return r;
        }
    }
    if (!l->ring_ok) {
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (l->epfd < 0) {
            r = -errno;
            snprintf(err->msg, sizeof(err->msg), "epoll_create1: %s", strerror(errno));
            if (l->reserve_fd >= 0)
                close(l->reserve_fd);
            free(l);
            return r;
        }
        l->backend = CN_D_LOOP_EPOLL;
    }
    *out = l;
    return 0;
}

cn_d__loop *cn_d__loop_free(cn_d__loop *l)
{
    if (!l)
        return NULL;
    while (l->conns)
        conn_destroy(l, l->conns);
    while (l->watches) {
        cn_d__watch *w = l->watches;
        l->watches = w->next;
        if (w->efd >= 0)
            close(w->efd);
        free(w);
    }
    if (l->ring_ok)
        io_uring_queue_exit(&l->ring);
    if (l->epfd >= 0)
        close(l->epfd);
    if (l->reserve_fd >= 0)
        close(l->reserve_fd);
    free(l);
    return NULL;
}

const char *cn_d__loop_backend(const cn_d__loop *l)
{
    return l->backend == CN_D_LOOP_IO_URING ? "io_uring" : "epoll";
}

int cn_d__loop_listen(cn_d__loop *l, int fd)
{
    l->listen_fd = fd;
    /* Non-blocking in both backends: shed_one() accepts synchronously. */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    if (l->backend == CN_D_LOOP_EPOLL) {
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = &l->op_accept};
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &e) < 0)
            return -errno;
    }
    return 0;
}

cn_d__watch *cn_d__loop_watch(cn_d__loop *l, int fd, cn_d__watch_fn fn, void *arg)
{
    cn_d__watch *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->op = OP_WATCH;
    w->fd = fd;
    w->efd = -1;
    w->fn = fn;
    w->arg = arg;
    if (l->backend == CN_D_LOOP_EPOLL) {
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = &w->op};
        w->efd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (w->efd < 0 || epoll_ctl(l->epfd, EPOLL_CTL_ADD, w->efd, &e) < 0) {
            if (w->efd >= 0)
                close(w->efd);
            free(w);
            return NULL;
        }
    } else {
        arm_watch(l, w);
    }
    w->next = l->watches;
    l->watches = w;
    return w;
}

void cn_d__loop_unwatch(cn_d__loop *l, cn_d__watch *w)
{
    if (!w || w->dead)
        return;
    w->dead = true;
    if (l->backend == CN_D_LOOP_EPOLL) {
        /* Removed while our duplicate is open, however the owner's fd fares. */
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->efd, NULL);
        close(w->efd);
        w->efd = -1;
    } else if (w->armed) {
        /* Remove the poll now: the caller closes the fd right after. The final CQE
         * (no F_MORE) clears `armed`; reap() frees the watch after that. */
        struct io_uring_sqe *sqe = get_sqe(l);
        if (sqe) {
            io_uring_prep_poll_remove(sqe, (__u64)(uintptr_t)&w->op);
            io_uring_sqe_set_data(sqe, NULL);
            io_uring_submit(&l->ring);
        }
    }
}

size_t cn_d__loop_conn_count(const cn_d__loop *l)
{
    /* A closing connection reads no more requests: it only waits for its last answer to
     * go out or for its in-flight io_uring ops to be cancelled (a batch or two, more while
     * the loop lags behind a flood). Counting it would refuse clients for peers that have
     * already left. */
    size_t n = 0;
    for (const cn_d__conn *c = l->conns; c; c = c->next)
        n += !c->closing;
    return n;
}

uint64_t cn_d__loop_shed_count(const cn_d__loop *l)
{
    return l->shed;
}

int cn_d__loop_run(cn_d__loop *l)
{
    l->stop = false;
    return l->backend == CN_D_LOOP_IO_URING ? uring_run(l) : epoll_run(l);
}

void cn_d__loop_stop(cn_d__loop *l)
{
    l->stop = true;
}
