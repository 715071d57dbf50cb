/* server.c — canopyd's front: the listening socket, client connections, the dispatch of
 * requests to their handlers, the tick, setup and shutdown.
 *
 * The loop thread decodes a request, dispatches it (handlers.c), checks it against the
 * peer's credentials (taken once with SO_PEERCRED at accept) and answers it (reply.c)
 * before the next event — except queries, which a forked worker renders on a snapshot
 * (workers.c) while sampling goes on being pumped from the ring fds' readiness and from
 * every tick (store.c). One response is outstanding per client: the next request is read
 * only when the previous answer has been sent, which bounds every client's memory to one
 * request and one response, and the worker queue to one job per connection. Per-user
 * quotas and the idle and send timeouts are quota.c's.
 */
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "d_internal.h"

/* The loop's tick: the daemon's timed work (checkpoints, retention, ring reads below the
 * rings' wakeup mark, job bounds, client deadlines, shutdown). Short while someone waits
 * on it; otherwise once a second, sessions sampling or not: their rings wake the loop as
 * they fill and every query reads them first, so a longer tick delays only what nobody
 * is looking at yet. A wakeup is dear on this VM (~35 us of kernel time, more with the
 * cold caches of the work it does): at 99 Hz the 200 ms tick this replaced was a quarter
 * of canopyd's CPU during a build (docs/perf-daemon.md, "Twenty-third session"). */
#define TICK_MS   50
#define TICK_IDLE 1000

/* ---- requests ---------------------------------------------------------------------- */

/* The dispatch table: command name → handler (docs/protocol.md "Commands"). */
static const struct {
    const char *name;
    cn_d__handler fn;
} commands[] = {
    {"hello", cn_d__cmd_hello},   {"version", cn_d__cmd_hello},
    {"status", cn_d__cmd_status}, {"sessions", cn_d__cmd_sessions},
    {"attach", cn_d__cmd_attach}, {"run", cn_d__cmd_run},
    {"system", cn_d__cmd_system}, {"tree", cn_d__cmd_tree},
    {"save", cn_d__cmd_save},     {"timeline", cn_d__cmd_timeline},
    {"lines", cn_d__cmd_lines},   {"stop", cn_d__cmd_stop},
    {"rm", cn_d__cmd_rm},         {"shutdown", cn_d__cmd_shutdown},
};

static void handle_line(cn_d_server *srv, cn_d__client *cl, const char *line, size_t len)
{
    cn_d__reply rp;
    cn_err pe = {0};
    json_t *req = NULL;
    cn_d__reply_init(&rp);
    if (cn_proto_decode(line, len, &req, &pe) < 0) {
        rp.msg = cn_proto_error(NULL, pe.code, 2, "%s", pe.msg);
    } else {
        const char *cmd = json_string_value(json_object_get(req, "cmd"));
        size_t i = 0;
        for (; i < sizeof(commands) / sizeof(commands[0]); i++) {
            if (!strcmp(cmd, commands[i].name)) {
                commands[i].fn(srv, cl, req, &rp);
                break;
            }
        }
        if (i == sizeof(commands) / sizeof(commands[0]))
            rp.msg = cn_proto_error(req, "unknown_command", 2, "unknown command '%.64s'", cmd);
    }
    if (!rp.deferred)
        cn_d__reply_send(cl->c, &rp);
    json_decref(req);
}

/* ---- connections ------------------------------------------------------------------- */

static int on_accept(void *ctx, cn_d__conn *c)
{
    cn_d_server *srv = ctx;
    cn_d__cred cred;
    cn_d__loop_set_tick(srv->loop, TICK_MS); /* a client waits on the loop from now on */
    int r = cn_d__cred_capture(c->fd, srv->system_group, &cred);
    if (r < 0)
        return r;
    cn_err qe = {0};
    if (cn_d__loop_conn_count(srv->loop) > srv->cfg.max_clients ||
        cn_d__quota_client(srv, &cred, &qe) < 0) {
        json_t *e = qe.msg[0] ? cn_proto_error(NULL, "busy", 1, "%s", qe.msg)
                              : cn_proto_error(NULL, "busy", 1, "too many clients (limit %u)",
                                               srv->cfg.max_clients);
        if (e)
            cn_proto_encode(e, &c->out);
        json_decref(e);
        return -EBUSY;
    }
    cn_d__client *cl = calloc(1, sizeof(*cl));
    if (!cl)
        return -ENOMEM;
    cl->c = c;
    cl->cred = cred;
    cl->last_active_ns = cn_common_now_ns();
    c->in.limit = srv->cfg.max_request + 16384;
    c->user = cl;
    cl->next = srv->clients;
    if (srv->clients)
        srv->clients->prev = cl;
    srv->clients = cl;
    return 0;
}

/* Handles complete lines while no answer is waiting to be sent. */
static void on_data(void *ctx, cn_d__conn *c)
{
    cn_d_server *srv = ctx;
    cn_d__client *cl = c->user;
    if (!cl)
        return;
    while (!c->closing && !cl->job && cn_buf_len(&c->out) == 0 && cn_buf_len(&c->sending) == 0) {
        char *line;
        size_t len;
        int r = cn_proto_next_line(&c->in, srv->cfg.max_request, &line, &len);
        if (r == 0)
            break;
        if (r < 0) {
            cn_d__reply rp;
            cn_d__reply_init(&rp);
            rp.msg = cn_proto_error(NULL, "too_large", 2, "request larger than %zu bytes",
                                    srv->cfg.max_request);
            cn_d__reply_send(cl->c, &rp);
            cn_d__conn_close(c, true);
            return;
        }
        bool blank = strspn(line, " \t\r") == len;
        if (!blank) {
            cl->last_active_ns = cn_common_now_ns();
            handle_line(srv, cl, line, len);
        }
        cn_buf_consume(&c->in, len + 1);
    }
    /* A partial request must complete within the client timeout. */
    if (cn_buf_len(&c->in) > 0 && c->deadline_ns == 0)
        c->deadline_ns = cn_common_now_ns() + srv->cfg.client_timeout_ns;
    else if (cn_buf_len(&c->in) == 0)
        c->deadline_ns = 0;
    /* Reading goes on while a worker answers, so a peer that leaves is noticed (and its
     * job killed); the next request waits in c->in, bounded by its limit. */
    c->want_read = cn_buf_len(&c->out) == 0 && cn_buf_len(&c->sending) == 0;
    if (c->eof && !c->closing)
        cn_d__conn_close(c, false);
    else
        cn_d__conn_update(c);
}

static void on_sent(void *ctx, cn_d__conn *c)
{
    c->want_read = true;
    on_data(ctx, c);
}

static void on_closed(void *ctx, cn_d__conn *c)
{
    cn_d_server *srv = ctx;
    cn_d__client *cl = c->user;
    if (!cl)
        return;
    if (cl->job)
        cn_d__job_cancel(srv, cl->job); /* nobody will read its answer */
    if (cl->prev)
        cl->prev->next = cl->next;
    else
        srv->clients = cl->next;
    if (cl->next)
        cl->next->prev = cl->prev;
    free(cl);
    c->user = NULL;
}

/* True once every client's pending output has been sent. */
static bool outputs_flushed(const cn_d_server *srv)
{
    for (const cn_d__client *cl = srv->clients; cl; cl = cl->next)
        if (!cl->c->eof && (cn_buf_len(&cl->c->out) || cn_buf_len(&cl->c->sending)))
            return false;
    return true;
}

/* How often the tick returns freed heap memory to the system (malloc_trim: a few ms over
 * a heap of ~100 MiB, measured in docs/perf-daemon.md). */
#define TRIM_INTERVAL_NS (5LL * 1000000000)

/* The next ticks' interval (TICK_MS above): short with a client connected, a job in
 * flight or a shutdown under way; never past a session's end of duration. */
static int next_tick_ms(const cn_d_server *srv)
{
    if (srv->shutdown_at || srv->clients || srv->jobs)
        return TICK_MS;
    int ms = TICK_IDLE;
    for (size_t i = 0; i < srv->n_entries; i++) {
        const cn_live_session *s = srv->entries[i]->s;
        int64_t due = cn_live_session_due_ns(s); /* -1: no end, or not running */
        if (due >= 0 && due / 1000000 + 1 < ms)
            ms = (int)(due / 1000000) + 1;
    }
    return ms < TICK_MS ? TICK_MS : ms;
}

static void on_tick(void *ctx)
{
    cn_d_server *srv = ctx;
    int64_t now = cn_common_now_ns();
    if (srv->shutdown_at && (outputs_flushed(srv) || now - srv->shutdown_at > 1000000000LL)) {
        cn_d__loop_stop(srv->loop);
        return;
    }
    for (size_t i = 0; i < srv->n_entries; i++)
        cn_d__store_pump(srv->entries[i]);
    if (srv->sym)
        cn_live_symbolizer_dispatch(srv->sym);
    cn_d__store_tick(srv);
    cn_d__jobs_tick(srv);
    cn_d__quota_tick(srv, now);
    cn_d__fleet_tick(srv);
    for (cn_d__client *cl = srv->clients; cl; cl = cl->next) {
        cn_d__conn *c = cl->c;
        if (!c->closing && c->deadline_ns && now > c->deadline_ns)
            cn_d__conn_close(c, false); /* a stalled half-sent request */
    }
    if (now - srv->trim_t >= TRIM_INTERVAL_NS) {
        cn_smp_cache_expire(srv->unwind, now, CN_D_UNWIND_IDLE_NS);
        /* Freed memory goes back to the system: symbol tables evicted, ranges folded,
         * loaders' temporary buffers would otherwise stay resident in malloc's heaps. */
        malloc_trim(0);
        srv->trim_t = now;
    }
    cn_d__loop_set_tick(srv->loop, next_tick_ms(srv));
    if (now - srv->rate_t >= 1000000000LL) {
        uint64_t total = 0;
        for (size_t i = 0; i < srv->n_entries; i++)
            if (cn_live_session_state(srv->entries[i]->s) == CN_LIVE_RUNNING)
                total += cn_live_session_samples(srv->entries[i]->s);
        if (srv->rate_t)
            srv->samples_per_s = total >= srv->rate_samples ? (double)(total - srv->rate_samples) *
                                                                  1e9 / (double)(now - srv->rate_t)
                                                            : 0;
        srv->rate_samples = total;
        srv->rate_t = now;
    }
}

static void on_batch(void *ctx)
{
    cn_d__jobs_start(ctx);
}

static void on_symbols(void *arg, int fd, uint32_t revents)
{
    cn_d_server *srv = arg;
    cn_live_symbolizer_dispatch(srv->sym);
}

static void on_signal(void *arg, int fd, uint32_t revents)
{
    cn_d_server *srv = arg;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
            cn_d_server_shutdown(srv);
        else if (si.ssi_signo == SIGHUP) /* a daemon's SIGHUP must not kill every session */
            fprintf(stderr, "canopyd: SIGHUP ignored (the configuration is read at start; "
                            "restart canopyd to change it)\n");
    }
}

/* ---- setup ------------------------------------------------------------------------- */

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[4096];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static char *default_path(bool socket)
{
    char buf[4096];
    const char *x;
    if (getuid() == 0)
        return strdup(socket ? "/run/canopy/canopy.sock" : "/var/lib/canopy");
    if (socket) {
        x = getenv("XDG_RUNTIME_DIR");
        snprintf(buf, sizeof(buf), "%s/canopy.sock", x && *x ? x : "/tmp");
    } else if ((x = getenv("XDG_STATE_HOME")) && *x) {
        snprintf(buf, sizeof(buf), "%s/canopy", x);
    } else {
        x = getenv("HOME");
        snprintf(buf, sizeof(buf), "%s/.local/state/canopy", x && *x ? x : "/tmp");
    }
    return strdup(buf);
}

/* Whether the daemon behind connected socket fd answers a hello within 2 s. connect()
 * alone is not proof of life: the kernel queues a connection on a listening socket that
 * any process still holds, such as a child forked an instant before its canopyd was
 * killed, and such a socket never answers. */
static bool socket_answers(int fd)
{
    static const char hello[] = "{\"cmd\":\"hello\"}\n";
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c;
    if (send(fd, hello, sizeof(hello) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(hello) - 1))
        return false;
    return poll(&p, 1, 2000) == 1 && recv(fd, &c, 1, MSG_DONTWAIT) == 1;
}

static int bind_socket(cn_d_server *srv, cn_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int r;
    if (strlen(srv->socket_path) >= sizeof(sa.sun_path)) {
        cn_err_set(err, 0, "socket path too long: %s", srv->socket_path);
        return -ENAMETOOLONG;
    }
    strcpy(sa.sun_path, srv->socket_path);
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", srv->socket_path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        mkdir_p(dir, 0755);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* A live daemon on that path wins; a stale socket file is replaced. */
    bool live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && socket_answers(fd);
    close(fd);
    if (live) {
        cn_err_set(err, 0, "another canopyd is already listening on %s", srv->socket_path);
        return -EADDRINUSE;
    }
    unlink(srv->socket_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        chmod(srv->socket_path, srv->cfg.socket_mode) < 0 || listen(fd, 128) < 0) {
        r = -errno;
        cn_err_set(err, 0, "%s: %s", srv->socket_path, strerror(errno));
        close(fd);
        return r;
    }
    srv->listen_fd = fd;
    srv->own_socket = true;
    return 0;
}

/* Each session holds a ring fd per CPU (and per thread for a PID target): raise the soft
 * fd limit to the hard one, as perf does. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int setup_signals(cn_d_server *srv)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    /* SIGHUP too: its default action ends the process, and the kernel sends it to a
     * session leader whose controlling terminal hangs up. canopyd never takes one (every
     * file opened for a target is opened O_NOCTTY, objfile/), and a stray or
     * administrator's SIGHUP is logged and ignored, never the end of every session. */
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -errno;
    srv->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (srv->sig_fd < 0)
        return -errno;
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

int cn_d_server_new(const cn_d_config *c, cn_d_server **out, cn_err *err)
{
    int r;
    cn_d_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return -ENOMEM;
    srv->cfg = *c;
    srv->listen_fd = -1;
    srv->sig_fd = -1;
    srv->next_id = 1;
    srv->start_ns = cn_common_now_ns();
    srv->socket_path = c->socket_path ? strdup(c->socket_path) : default_path(true);
    srv->state_dir = c->state_dir ? strdup(c->state_dir) : default_path(false);
    srv->system_group = c->system_group ? strdup(c->system_group) : NULL;
    srv->cfg.socket_path = srv->cfg.state_dir = srv->cfg.system_group = NULL;
    if (!srv->socket_path || !srv->state_dir || (c->system_group && !srv->system_group)) {
        r = -ENOMEM;
        goto fail;
    }
    if (!srv->cfg.socket_mode)
        srv->cfg.socket_mode = getuid() == 0 ? 0666 : 0600;
    r = mkdir_p(srv->state_dir, 0700);
    if (r < 0) {
        cn_err_set(err, 0, "state dir %s: %s", srv->state_dir, strerror(-r));
        goto fail;
    }
    srv->ops = (cn_d__loop_ops){on_accept, on_data, on_sent, on_closed, on_tick, on_batch};
    r = cn_d__loop_new(c->backend, &srv->ops, srv, TICK_MS, &srv->loop, err);
    if (r < 0)
        goto fail;
    raise_nofile();
    if ((r = setup_signals(srv)) < 0) {
        cn_err_set(err, 0, "signals: %s", strerror(-r));
        goto fail;
    }
    if (c->listen_fd >= 0) {
        srv->listen_fd = c->listen_fd;
    } else if (sd_listen_fds(0) >= 1) {
        srv->listen_fd = SD_LISTEN_FDS_START; /* socket activation */
    } else if ((r = bind_socket(srv, err)) < 0) {
        goto fail;
    }
    if ((r = cn_live_symbolizer_new(c->symbol_cache, c->debug_cache, &srv->sym, err)) < 0)
        goto fail;
    if (!(srv->unwind = cn_smp_cache_new(c->unwind_cache))) {
        r = -ENOMEM;
        goto fail;
    }
    if (c->test_symbol_delay_ns > 0)
        cn_live_symbolizer_set_test_delay(srv->sym, c->test_symbol_delay_ns);
    r = -ENOMEM;
    if (cn_d__loop_listen(srv->loop, srv->listen_fd) < 0 ||
        !(srv->sym_watch =
              cn_d__loop_watch(srv->loop, cn_live_symbolizer_fd(srv->sym), on_symbols, srv)) ||
        !(srv->sig_watch = cn_d__loop_watch(srv->loop, srv->sig_fd, on_signal, srv))) {
        cn_err_set(err, 0, "event loop setup failed");
        goto fail;
    }
    cn_d__store_load(srv);
    if ((r = cn_d__fleet_new(srv, err)) < 0)
        goto fail;
    *out = srv;
    return 0;
fail:
    if (!err->msg[0])
        cn_err_set(err, 0, "%s", strerror(-r));
    cn_d_server_free(srv);
    return r;
}

int cn_d_server_run(cn_d_server *srv)
{
    /* Under systemd (Type=notify): ready once the socket listens and saved sessions are
     * loaded. A no-op without NOTIFY_SOCKET. */
    sd_notifyf(0, "READY=1\nSTATUS=canopyd %s: %zu sessions, event loop %s", CANOPY_VERSION,
               srv->n_entries, cn_d__loop_backend(srv->loop));
    int r = cn_d__loop_run(srv->loop);
    sd_notify(0, "STOPPING=1\nSTATUS=saving sessions");
    cn_d__jobs_shutdown(srv);
    cn_d__store_shutdown(srv);
    cn_d__fleet_shutdown(srv);
    return r;
}

void cn_d_server_shutdown(cn_d_server *srv)
{
    /* The loop stops at the next tick, once pending replies are out (at most 1 s). */
    if (!srv->shutdown_at)
        srv->shutdown_at = cn_common_now_ns();
    if (srv->loop)
        cn_d__loop_set_tick(srv->loop, TICK_MS);
}

const char *cn_d_server_backend(const cn_d_server *srv)
{
    return cn_d__loop_backend(srv->loop);
}

cn_d_server *cn_d_server_free(cn_d_server *srv)
{
    if (!srv)
        return NULL;
    cn_d__fleet_free(srv);
    cn_d__store_free(srv);
    cn_d__loop_free(srv->loop); /* closes connections (on_closed frees clients) */
    cn_live_symbolizer_free(srv->sym);
    cn_smp_cache_free(srv->unwind); /* after the sessions (store_free) */
    if (srv->listen_fd >= 0 && srv->listen_fd != srv->cfg.listen_fd)
        close(srv->listen_fd);
    if (srv->own_socket)
        unlink(srv->socket_path);
    if (srv->sig_fd >= 0)
        close(srv->sig_fd);
    free(srv->socket_path);
    free(srv->state_dir);
    free(srv->system_group);
    free(srv);
    return NULL;
}
