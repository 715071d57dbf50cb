/* cmd_web.c — `canopy web SESSION|FILE|--pid PID [QUERY]` (docs/web.md).
 *
 * Picks the source the page's queries go to — a profile file loaded once, a canopyd
 * session asked over the user's own connection (the protocol's `tree`, rendered by
 * canopyd with the one renderer), or a process sampled in-process until Ctrl-C — starts
 * the server (web_server.c), prints its URL as the first line of stdout and serves until
 * SIGINT or SIGTERM. QUERY options on the command line are checked here with the same
 * parser and handed to the page as its starting query (/api/info "args").
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cn_common.h"
#include "live.h"
#include "web.h"

static void web_help(void)
{
    cn_cli_help("web");
}

/* web's own options: split_args matches argv against them first; --help, the manual and
 * the completion print them. */
enum { W_PORT, W_BIND };

const cn_opt cn_cli_web_opts[] = {
    {"--port", NULL, "N", "0: a free port", "the port to listen on", W_PORT, 0},
    {"--bind", NULL, "ADDR", "127.0.0.1",
     "the IPv4 address to listen on (anything but loopback exposes the profile)", W_BIND, 0},
    {NULL, NULL, NULL, NULL, NULL, 0, 0},
};

/* ---------------------------------------------------------------------------------------
 * Sources
 */

typedef struct file_source {
    cn_agg_profile *p;
    const char *path;
} file_source;

static int file_tree(void *ctx, const cn_cli_query *q, char **out, size_t *len, cn_err *err)
{
    file_source *f = ctx;
    cn_fmt_render_opts o;

    cn_fmt_render_opts_init(&o);
    o.title = f->path;
    o.normalize = true; /* a differential profile: as canopy diff shows it by default */
    return cn_cli_render_mem(f->p, &q->spec, &o, out, len, err);
}

/* `canopy lines` on an in-memory profile, serialised for the page. */
static int profile_lines(cn_agg_profile *p, const cn_fmt_render_opts *o, const cn_cli_query *q,
                         const char *func, char **out, size_t *len, cn_err *err)
{
    json_t *doc = NULL;
    int rc = cn_fmt_lines_json(p, &q->spec, o, func, &doc, err);
    if (rc < 0)
        return rc;
    *out = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(doc);
    if (!*out)
        return cn_err_set(err, -ENOMEM, "out of memory");
    *len = strlen(*out);
    return 0;
}

static int file_lines(void *ctx, const cn_cli_query *q, const char *func, char **out, size_t *len,
                      cn_err *err)
{
    file_source *f = ctx;
    cn_fmt_render_opts o;

    cn_fmt_render_opts_init(&o);
    return profile_lines(f->p, &o, q, func, out, len, err);
}

/* canopyd runs at most query_workers - 1 (3 by default) queries of one user at once: a
 * connection each (one request at a time per connection, docs/protocol.md). */
#define SESSION_CONNS 3

/* One connection to canopyd; the job of a query running on it. */
typedef struct session_conn {
    cn_cli_conn *c; /* opened when first needed; NULL again after a failure */
    bool busy;
    bool lines; /* the query running is a lines request */
} session_conn;

typedef struct session_source {
    session_conn conn[SESSION_CONNS];
    char socket[256]; /* where the first connection went: the others go there too */
    const char *session;
} session_source;

/* The daemon's refusal as an errno: its exit 2 is a bad query (HTTP 400). */
static int daemon_refusal(const json_t *resp, cn_err *err)
{
    const json_t *e = json_object_get(resp, "error");
    const char *m = json_string_value(json_object_get(e, "message"));
    json_int_t exit = json_integer_value(json_object_get(e, "exit")); /* protocol.md: error.exit */

    cn_err_set(err, 0, "%s", m ? m : "the daemon refused the query");
    return exit == CN_EXIT_USAGE ? -EINVAL : -EIO;
}

/* The reply's tree: the raw payload, or (an older daemon) resp["tree"] serialised. */
static int daemon_payload(json_t *resp, char **raw, size_t raw_len, char **out, size_t *len,
                          cn_err *err)
{
    if (*raw) {
        *out = *raw;
        *len = raw_len;
        *raw = NULL;
        return 0;
    }
    const json_t *tree = json_object_get(resp, "tree");
    char *s = tree ? json_dumps(tree, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    if (!s)
        return cn_err_set(err, -EIO, "the daemon's answer has no tree");
    *out = s;
    *len = strlen(s);
    return 0;
}

/* The reply's lines object, serialised. */
static int daemon_lines(const json_t *resp, char **out, size_t *len, cn_err *err)
{
    const json_t *doc = json_object_get(resp, "lines");
    *out = json_is_object(doc) ? json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    if (!*out)
        return cn_err_set(err, -EIO, "the daemon's answer has no lines");
    *len = strlen(*out);
    return 0;
}

/* Sends q as the protocol's `tree` request (func NULL) or `lines` request on a free
 * connection (web.h: cn_cli_web_source.start). */
static int session_start(void *ctx, const cn_cli_query *q, const char *func, void **job, int *fd,
                         cn_err *err)
{
    session_source *s = ctx;
    session_conn *sc = NULL;
    json_t *req = NULL;
    int rc;

    for (int k = 0; k < SESSION_CONNS && !sc; k++)
        sc = s->conn[k].busy ? NULL : &s->conn[k];
    if (!sc)
        return -EBUSY;
    if (!sc->c && (rc = cn_cli_connect(s->socket, &sc->c, NULL, 0)) < 0)
        return cn_err_set(err, rc, "cannot connect to canopyd at %s: %s", s->socket, strerror(-rc));
    req = cn_proto_request(func ? "lines" : "tree");
    if (!req || json_object_set_new(req, "session", json_string(s->session)) ||
        (func && json_object_set_new(req, "function", json_string(func))) ||
        cn_fmt_spec_to_json(&q->spec, req) < 0) {
        rc = cn_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    rc = cn_cli_send_raw(sc->c, req, err);
    if (rc < 0) {
        sc->c = cn_cli_conn_free(sc->c);
        goto out;
    }
    sc->busy = true;
    sc->lines = func != NULL;
    *job = sc;
    *fd = cn_cli_conn_fd(sc->c);
out:
    json_decref(req);
    return rc;
}

/* Reads the answer of a query session_start sent. */
static int session_finish(void *ctx, void *job, char **out, size_t *len, cn_err *err)
{
    session_conn *sc = job;
    json_t *resp = NULL;
    char *raw = NULL;
    size_t raw_len = 0;
    (void)ctx;

    int rc = cn_cli_recv_raw(sc->c, &resp, &raw, &raw_len, err);
    if (rc < 0)
        sc->c = cn_cli_conn_free(sc->c); /* where the next answer starts is unknown */
    else if (!json_is_true(json_object_get(resp, "ok")))
        rc = daemon_refusal(resp, err);
    else if (sc->lines)
        rc = daemon_lines(resp, out, len, err);
    else
        rc = daemon_payload(resp, &raw, raw_len, out, len, err);
    sc->busy = false;
    free(raw);
    json_decref(resp);
    return rc;
}

/* A query nobody waits for: its connection is closed (canopyd drops the answer). */
static void session_cancel(void *ctx, void *job)
{
    session_conn *sc = job;
    (void)ctx;
    sc->c = cn_cli_conn_free(sc->c);
    sc->busy = false;
}

typedef struct pid_source {
    cn_cli_local *l;
    char title[64];
} pid_source;

static int pid_tree(void *ctx, const cn_cli_query *q, char **out, size_t *len, cn_err *err)
{
    pid_source *ps = ctx;
    cn_live_session *s = cn_cli_local_session(ps->l);
    cn_fmt_render_opts o;

    cn_live_session_render_opts(s, ps->title, &o);
    return cn_cli_render_mem(cn_live_session_profile(s), &q->spec, &o, out, len, err);
}

static int pid_lines(void *ctx, const cn_cli_query *q, const char *func, char **out, size_t *len,
                     cn_err *err)
{
    pid_source *ps = ctx;
    cn_live_session *s = cn_cli_local_session(ps->l);
    cn_fmt_render_opts o;

    cn_live_session_render_opts(s, ps->title, &o);
    return profile_lines(cn_live_session_profile(s), &o, q, func, out, len, err);
}

static int pid_pump(void *ctx, cn_err *err)
{
    pid_source *ps = ctx;
    return cn_cli_local_pump(ps->l, 0, err);
}

/* ---------------------------------------------------------------------------------------
 * Arguments
 */

typedef struct web_args {
    cn_cli_live_args a;
    cn_cli_web_config cfg;
    char **rest; /* argv without the web and QUERY options, for cn_cli_live_parse */
    int n_rest;
    json_t *query; /* the QUERY options as given: the page's starting args */
    int stop_fd;   /* signalfd: SIGINT, SIGTERM */
} web_args;

static int parse_port(const char *v, uint16_t *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < 0 || x > 65535)
        return -1;
    *out = (uint16_t)x;
    return 0;
}

/* --port and --bind, as "--opt V" or "--opt=V". Returns 1 consumed, 0 not ours, -1 error
 * (printed). */
static int web_opt(web_args *w, int argc, char **argv, int *i)
{
    const char *v;
    const cn_opt *o = cn_opt_match(cn_cli_web_opts, 0, argc, argv, i, &v);

    if (!o)
        return 0;
    if (!v) {
        fprintf(stderr, "canopy web: %s needs a value\n", o->lng);
        return -1;
    }
    if (o->id == W_BIND) {
        w->cfg.bind = v;
        return 1;
    }
    if (parse_port(v, &w->cfg.port) < 0) {
        fprintf(stderr, "canopy web: --port '%s': expected 0 to 65535\n", v);
        return -1;
    }
    return 1;
}

/* Checks the QUERY words as the page will send them (cn_cli_web_query: no -o, JSON only). */
static int check_query_words(const json_t *words)
{
    size_t n = json_array_size(words);
    char **v = calloc(n + 1, sizeof(char *));
    cn_cli_query q;
    cn_err err = {0};

    if (!v) {
        fprintf(stderr, "canopy web: out of memory\n");
        return CN_EXIT_FAIL;
    }
    for (size_t k = 0; k < n; k++)
        v[k] = (char *)json_string_value(json_array_get(words, k));
    cn_cli_query_init(&q);
    int rc = cn_cli_web_query(v, (int)n, NULL, &q, &err);
    cn_cli_query_clear(&q);
    free(v);
    if (rc < 0) {
        fprintf(stderr, "canopy web: %s\n", CN_TERM_STR(err.msg));
        return CN_EXIT_USAGE;
    }
    return -1;
}

/* Takes --port/--bind and the QUERY options out of argv (the latter checked by the one
 * parser, their words kept in w->query for the page); the rest, in order, is left in
 * w->rest for cn_cli_live_parse. Returns -1 to go on, or an exit status (printed). */
static int split_args(web_args *w, int argc, char **argv)
{
    w->rest = calloc((size_t)argc + 1, sizeof(char *));
    w->query = json_array();
    if (!w->rest || !w->query) {
        fprintf(stderr, "canopy web: out of memory\n");
        return CN_EXIT_FAIL;
    }
    w->rest[w->n_rest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        int start = i, r = web_opt(w, argc, argv, &i);
        if (r < 0)
            return CN_EXIT_USAGE;
        if (r > 0)
            continue;
        if (!strcmp(argv[i], "--")) { /* the rest is positional */
            while (i < argc)
                w->rest[w->n_rest++] = argv[i++];
            break;
        }
        r = cn_cli_parse_query_opt(&w->a.q, argc, argv, &i);
        if (r < 0)
            return CN_EXIT_USAGE;
        if (r == 0)
            w->rest[w->n_rest++] = argv[i];
        for (int k = start; r > 0 && k <= i; k++) {
            json_t *word = json_string(argv[k]); /* NULL: not UTF-8, or out of memory */
            if (json_array_append_new(w->query, word) < 0) {
                fprintf(stderr, "canopy web: QUERY option '%s': not valid UTF-8\n",
                        CN_TERM_STR(argv[k]));
                return CN_EXIT_USAGE;
            }
        }
    }
    return check_query_words(w->query);
}

/* ---------------------------------------------------------------------------------------
 * Serving
 */

/* A signalfd for SIGINT and SIGTERM, blocked in every thread: called before any thread is
 * started (the in-process symbolizer's would otherwise take them and die of them). Returns
 * the fd, or -1 after printing an error. */
static int stop_fd(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) {
        fprintf(stderr, "canopy web: sigprocmask: %s\n", strerror(errno));
        return -1;
    }
    int fd = signalfd(-1, &set, SFD_CLOEXEC);
    if (fd < 0)
        fprintf(stderr, "canopy web: signalfd: %s\n", strerror(errno));
    return fd;
}

/* Starts the server on src, prints the URL first on stdout, serves until Ctrl-C. */
static int serve(web_args *w, cn_cli_web_source *src)
{
    cn_cli_web *srv = NULL;
    cn_err err = {0};
    int status = CN_EXIT_FAIL;

    src->start_args = w->query;
    int rc = cn_cli_web_new(&w->cfg, src, &srv, &err);
    if (rc < 0) {
        fprintf(stderr, "canopy web: %s\n", CN_TERM_STR(err.msg));
        status = rc == -EINVAL ? CN_EXIT_USAGE : CN_EXIT_FAIL;
        goto out;
    }
    printf("%s\n", cn_cli_web_url(srv));
    fflush(stdout);
    fprintf(stderr, "canopy web: serving %s; Ctrl-C stops\n", CN_TERM_STR(src->title));
    if (w->cfg.bind && strcmp(w->cfg.bind, "127.0.0.1"))
        fprintf(stderr,
                "canopy web: listening on %s: anyone who can reach it and learns the URL "
                "sees this profile\n",
                w->cfg.bind);
    rc = cn_cli_web_run(srv, w->stop_fd, &err);
    if (rc < 0)
        fprintf(stderr, "canopy web: %s\n", CN_TERM_STR(err.msg));
    status = rc < 0 ? CN_EXIT_FAIL : CN_EXIT_OK;
out:
    cn_cli_web_free(srv);
    return status;
}

static int web_file(web_args *w, const char *path)
{
    cn_err err = {0};
    file_source f = {.path = path};
    int rc = cn_fmt_import_file(path, &f.p, &err);
    if (rc < 0) {
        fprintf(stderr, "canopy web: %s\n", CN_TERM_STR(err.msg[0] ? err.msg : strerror(-rc)));
        return rc == -ENOMEM ? CN_EXIT_FAIL : CN_EXIT_USAGE;
    }
    cn_cli_web_source src = {.ctx = &f,
                             .title = path,
                             .live = false,
                             .diff = cn_agg_is_diff(f.p),
                             .tree = file_tree,
                             .lines = cn_agg_is_diff(f.p) ? NULL : file_lines};
    int status = serve(w, &src);
    cn_agg_profile_free(f.p);
    return status;
}

/* canopy web BASE NEW: canopy diff's differential profile (files or sessions), served like
 * a file; when a side is a running session, the page is live and the profile is built again
 * from both sides' current profiles at most every DIFF_REFRESH_NS, at a tree request. */
#define DIFF_REFRESH_NS 1000000000LL

typedef struct diff_source {
    file_source f; /* the current differential profile (f.p), f.path its title */
    web_args *w;
    bool live;
    int64_t built_ns; /* CLOCK_MONOTONIC of f.p's build */
    char title[512];
} diff_source;

static int diff_tree(void *ctx, const cn_cli_query *q, char **out, size_t *len, cn_err *err)
{
    diff_source *d = ctx;
    int64_t now = cn_common_now_ns();
    if (d->live && now - d->built_ns >= DIFF_REFRESH_NS) {
        cn_agg_profile *p = NULL;
        char title[sizeof(d->title)];
        bool live = false;
        if (cn_cli_diff_profile(d->w->a.pos, d->w->a.n_pos, &d->w->a.q, d->w->a.socket, &p, title,
                                sizeof(title), &live) != CN_EXIT_OK)
            return cn_err_set(err, -EIO,
                              "building the differential profile again failed "
                              "(canopy web's standard error says why)");
        cn_agg_profile_free(d->f.p);
        d->f.p = p;
        d->live = live; /* both sides stopped: this one is the last */
        d->built_ns = now;
    }
    return file_tree(&d->f, q, out, len, err);
}

static int web_diff(web_args *w)
{
    diff_source d = {.w = w};
    d.f.path = d.title;
    int status = cn_cli_diff_profile(w->a.pos, w->a.n_pos, &w->a.q, w->a.socket, &d.f.p, d.title,
                                     sizeof(d.title), &d.live);
    if (status != CN_EXIT_OK)
        return status;
    d.built_ns = cn_common_now_ns();
    cn_cli_web_source src = {
        .ctx = &d, .title = d.title, .live = d.live, .diff = true, .tree = diff_tree};
    status = serve(w, &src);
    cn_agg_profile_free(d.f.p);
    return status;
}

/* An unknown session is an error before the URL is printed. */
static int check_session(cn_cli_conn *c, const char *session)
{
    json_t *req = cn_proto_request("tree"), *resp = NULL;
    if (req && (json_object_set_new(req, "session", json_string(session)) ||
                json_object_set_new(req, "view", json_string("functions")))) {
        json_decref(req);
        req = NULL;
    }
    int status = cn_cli_request("web", c, req, &resp);
    json_decref(resp);
    json_decref(req);
    return status;
}

static int web_session(web_args *w, const char *session)
{
    cn_cli_conn *c = NULL;
    int status = cn_cli_live_connect(&w->a, true, &c);
    if (status == 0)
        status = check_session(c, session);
    if (status == 0) {
        session_source s = {.conn[0].c = c, .session = session};
        c = NULL;
        cn_cli_socket_path(w->a.socket, s.socket, sizeof(s.socket));
        cn_cli_web_source src = {.ctx = &s,
                                 .title = session,
                                 .live = true,
                                 .start = session_start,
                                 .finish = session_finish,
                                 .cancel = session_cancel};
        status = serve(w, &src);
        for (int k = 0; k < SESSION_CONNS; k++)
            cn_cli_conn_free(s.conn[k].c);
    }
    cn_cli_conn_free(c);
    return status;
}

static int web_pid(web_args *w)
{
    pid_source ps = {.l = NULL};
    cn_err err = {0};

    w->a.smp.pid = w->a.pid;
    if (cn_cli_local_start(&w->a.smp, &ps.l, &err) < 0) {
        fprintf(stderr, "canopy web: %s\n", CN_TERM_STR(err.msg));
        return CN_EXIT_FAIL;
    }
    snprintf(ps.title, sizeof(ps.title), "pid %d (in-process)", w->a.pid);
    cn_cli_web_source src = {.ctx = &ps,
                             .title = ps.title,
                             .live = true,
                             .tree = pid_tree,
                             .lines = pid_lines,
                             .pump = pid_pump};
    int status = serve(w, &src);
    cn_cli_local_free(ps.l);
    return status;
}

int cn_cmd_web(int argc, char **argv)
{
    web_args w;
    struct stat st;
    int status;

    memset(&w, 0, sizeof(w));
    w.stop_fd = -1;
    /* --help before the QUERY words are checked as a whole (as the other commands, which
     * check them after the loop that sees --help). */
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            web_help();
            return CN_EXIT_OK;
        }
    }
    cn_cli_live_args_init(&w.a, "web");
    status = split_args(&w, argc, argv);
    if (status < 0)
        status =
            cn_cli_live_parse(&w.a, w.n_rest, w.rest, CN_LIVE_SAMPLING | CN_LIVE_PID, web_help);
    if (status >= 0)
        goto out;
    status = CN_EXIT_USAGE;
    if ((w.a.pid > 0) == (w.a.n_pos >= 1) || w.a.n_pos > 2) {
        fprintf(stderr, "canopy web: expected SESSION, FILE, BASE NEW or --pid PID (see canopy "
                        "web --help)\n");
        goto out;
    }
    status = CN_EXIT_FAIL;
    w.stop_fd = stop_fd();
    if (w.stop_fd < 0)
        goto out;
    if (w.a.pid > 0)
        status = web_pid(&w);
    else if (w.a.n_pos == 2)
        status = web_diff(&w);
    else if (stat(w.a.pos[0], &st) == 0 && S_ISREG(st.st_mode))
        status = web_file(&w, w.a.pos[0]);
    else
        status = web_session(&w, w.a.pos[0]);
out:
    if (w.stop_fd >= 0)
        close(w.stop_fd);
    json_decref(w.query);
    free(w.rest);
    cn_cli_live_args_clear(&w.a);
    return status;
}
