/* web_server.c — the HTTP side of `canopy web` (web.h, docs/web.md).
 *
 * HTTP parsing is libmicrohttpd's (requests are untrusted; no parser of our own), run in
 * its external epoll mode on the caller's thread: cn_cli_web_run() polls MHD's epoll fd
 * and a stop fd, so requests and the source's pump never run at the same time and the
 * source needs no lock. MHD bounds what a client can make us hold (connections, per
 * connection memory, idle time); the query is bounded here (CN_WEB_MAX_ARGS, _ARG_LEN).
 * Every response carries a Content-Security-Policy that allows only this origin's own
 * scripts and styles: the page never writes names as HTML (web/app.js sets textContent),
 * and the policy stops inline handlers should that rule ever be broken.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <jansson.h>
#include <microhttpd.h>
#include <xxhash.h>

#include "cn_common.h"
#include "web.h"

#define PUMP_EVERY_NS        100000000LL
#define MAX_CONNECTIONS      32
#define CONNECTION_TIMEOUT_S 30
#define FIREFOX_PROFILER     "https://profiler.firefox.com" /* reads the firefox export (CORS) */
#define MAX_RUNNING          4 /* queries of an asynchronous source at once (poll's fds) */

/* A query of an asynchronous source (src->start): its request is suspended (MHD) from
 * when the query is started until its answer is read, so that other requests — the same
 * refresh's other query — are taken meanwhile. */
typedef struct pending {
    struct pending *next; /* in the server's waiting or running list */
    struct MHD_Connection *c;
    int kind; /* enum query_kind */
    cn_cli_query q;
    const char *func; /* a lines request's function (MHD's, valid while the request is) */
    void *job;        /* the source's, while running */
    int fd;
    bool done; /* answered: rc, out, len, err */
    int rc;
    char *out;
    size_t len;
    cn_err err;
} pending;

struct cn_cli_web {
    struct MHD_Daemon *d;
    const cn_cli_web_source *src;
    pending *waiting; /* started when the source takes them, oldest first */
    pending *running;
    bool resumed; /* a request resumed inside MHD_run: run it again without waiting */
    char token[CN_WEB_TOKEN_HEX + 1];
    char url[96];
};

static const char csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                          "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                          "form-action 'none'; frame-ancestors 'none'";

/* ---------------------------------------------------------------------------------------
 * Token
 */

static int make_token(char *hex, cn_err *err)
{
    unsigned char raw[CN_WEB_TOKEN_HEX / 2];
    size_t got = 0;

    while (got < sizeof(raw)) {
        ssize_t r = getrandom(raw + got, sizeof(raw) - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return cn_err_set(err, -errno, "getrandom: %s", strerror(errno));
        got += (size_t)r;
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

bool cn_cli_web_token_ok(const cn_cli_web *w, const char *a)
{
    unsigned char diff = 0;

    if (!a || strlen(a) != CN_WEB_TOKEN_HEX)
        return false;
    for (size_t i = 0; i < CN_WEB_TOKEN_HEX; i++)
        diff |= (unsigned char)(a[i] ^ w->token[i]);
    return diff == 0;
}

/* ---------------------------------------------------------------------------------------
 * Responses
 */

/* The headers of every response: no caching, the policy, no sniffing, no referrer. */
static void common_headers(struct MHD_Response *r)
{
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "Content-Security-Policy", csp);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
}

/* Queues a response owning buf (malloc'ed, freed by MHD; NULL with len 0 for none), with
 * disposition (an attachment's Content-Disposition, or NULL) and cors (an origin allowed
 * to read it, or NULL). */
static enum MHD_Result reply_with(struct MHD_Connection *c, unsigned status, const char *type,
                                  char *buf, size_t len, const char *disposition, const char *cors)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(buf);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    common_headers(r);
    if (disposition)
        MHD_add_response_header(r, "Content-Disposition", disposition);
    if (cors)
        MHD_add_response_header(r, "Access-Control-Allow-Origin", cors);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, char *buf,
                             size_t len)
{
    return reply_with(c, status, type, buf, len, NULL, NULL);
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *msg)
{
    char *copy = strdup(msg);
    return copy ? reply(c, status, "text/plain; charset=utf-8", copy, strlen(copy)) : MHD_NO;
}

/* {"error": msg}: the page shows msg as text. */
static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
    json_t *doc = json_pack("{s:s}", "error", msg);
    char *s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!s)
        return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    return reply(c, status, "application/json", s, strlen(s));
}

/* The embedded file at url, or NULL. "/" is index.html. */
static const cn_cli_web_asset *find_asset(const char *url)
{
    if (!strcmp(url, "/"))
        url = "/index.html";
    for (size_t i = 0; i < cn_cli_web_n_assets; i++)
        if (!strcmp(url, cn_cli_web_assets[i].path))
            return &cn_cli_web_assets[i];
    return NULL;
}

/* A copy of the asset with every "%TOKEN%" replaced by the token (hex: nothing to
 * escape), so that index.html's links carry it. */
static char *with_token(const cn_cli_web *w, const cn_cli_web_asset *a, size_t *len)
{
    static const char mark[] = "%TOKEN%";
    const char *p = (const char *)a->data, *end = p + a->len;
    size_t cap = a->len * 2 + 64, n = 0; /* the token is 32 bytes for a 7-byte mark */
    char *out = malloc(cap);

    if (!out)
        return NULL;
    while (p < end) {
        const char *m = memmem(p, (size_t)(end - p), mark, sizeof(mark) - 1);
        size_t lit = m ? (size_t)(m - p) : (size_t)(end - p);
        if (n + lit + CN_WEB_TOKEN_HEX >= cap) {
            free(out);
            return NULL;
        }
        memcpy(out + n, p, lit);
        n += lit;
        p += lit;
        if (m) {
            memcpy(out + n, w->token, CN_WEB_TOKEN_HEX);
            n += CN_WEB_TOKEN_HEX;
            p += sizeof(mark) - 1;
        }
    }
    *len = n;
    return out;
}

static enum MHD_Result serve_asset(cn_cli_web *w, struct MHD_Connection *c,
                                   const cn_cli_web_asset *a)
{
    size_t len = 0;
    char *body = with_token(w, a, &len);
    if (!body)
        return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    return reply(c, MHD_HTTP_OK, a->type, body, len);
}

/* Whether the source answers /api/lines (an asynchronous one always does). */
static bool has_lines(const cn_cli_web_source *src)
{
    return src->lines || src->start;
}

static enum MHD_Result serve_info(cn_cli_web *w, struct MHD_Connection *c)
{
    json_t *args = w->src->start_args ? json_deep_copy(w->src->start_args) : json_array();
    json_t *doc = json_pack("{s:s,s:b,s:b,s:b,s:o}", "title", w->src->title, "live", w->src->live,
                            "diff", w->src->diff, "lines", has_lines(w->src), "args", args);
    char *s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!s)
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    return reply(c, MHD_HTTP_OK, "application/json", s, strlen(s));
}

/* ---------------------------------------------------------------------------------------
 * /api/tree
 */

/* The `arg` parameters of a request, in order, bounded. */
typedef struct query_args {
    char *v[CN_WEB_MAX_ARGS];
    int n;
    const char *error; /* static */
} query_args;

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    query_args *a = cls;
    (void)kind;
    if (strcmp(key, "arg"))
        return MHD_YES;
    if (a->n == CN_WEB_MAX_ARGS) {
        a->error = "too many arg parameters";
        return MHD_NO;
    }
    if (!value || strnlen(value, CN_WEB_MAX_ARG_LEN + 1) > CN_WEB_MAX_ARG_LEN) {
        a->error = value ? "an arg parameter is too long" : "an arg parameter has no value";
        return MHD_NO;
    }
    a->v[a->n++] = (char *)value; /* MHD's, valid while the request is */
    return MHD_YES;
}

/* The file name extension of a download in format f. */
static const char *export_ext(cn_fmt_format f)
{
    switch (f) {
    case CN_FMT_TEXT:
        return "txt";
    case CN_FMT_JSON:
    case CN_FMT_ACTIVITY:
        return "json";
    case CN_FMT_FOLDED:
        return "folded";
    case CN_FMT_PPROF:
        return "pb.gz";
    case CN_FMT_SPEEDSCOPE:
        return "speedscope.json";
    case CN_FMT_CHROME_TRACE:
        return "trace.json";
    case CN_FMT_SVG:
        return "svg";
    case CN_FMT_FIREFOX:
        return "firefox.json";
    case CN_FMT_OTLP:
        return "otlp.pb";
    case CN_FMT_CANOPY:
        return "canopy";
    }
    return "out";
}

/* A JSON answer with its ETag (a hash of the bytes). A live page asks again every second
 * with If-None-Match: when the answer has not changed (a paused or idle process, a
 * finished session) it gets 304 without a body and keeps what it drew, instead of
 * receiving, parsing and drawing the same megabytes again. */
static enum MHD_Result reply_json(struct MHD_Connection *c, char *out, size_t len)
{
    char etag[24];
    snprintf(etag, sizeof(etag), "\"%016llx\"", (unsigned long long)XXH3_64bits(out, len));
    const char *inm =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
    bool same = inm && strcmp(inm, etag) == 0;
    if (same) {
        free(out);
        out = NULL;
        len = 0;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, out, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(out);
        return MHD_NO;
    }
    if (!same)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    common_headers(r);
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
    enum MHD_Result ret = MHD_queue_response(c, same ? MHD_HTTP_NOT_MODIFIED : MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* The answer of an accepted query: JSON for the page, or a download (/api/export).
 * Nothing but JSON is served with a type a browser renders: a download is an attachment
 * of type application/octet-stream, so an SVG with hostile names is never opened as a
 * document of this origin. The Firefox Profiler fetches its format from another origin
 * (profiler.firefox.com/from-url/…): that one response allows it by CORS; the token is in
 * the URL the user gave it. */
static enum MHD_Result reply_query(struct MHD_Connection *c, const cn_cli_query *q, bool download,
                                   char *out, size_t len)
{
    char disp[64];
    if (!download)
        return reply_json(c, out, len);
    snprintf(disp, sizeof(disp), "attachment; filename=\"canopy-view.%s\"",
             export_ext(q->spec.format));
    return reply_with(c, MHD_HTTP_OK, "application/octet-stream", out, len, disp,
                      q->spec.format == CN_FMT_FIREFOX ? FIREFOX_PROFILER : NULL);
}

/* A parameter other than arg (format, func): bounded like an arg; NULL when absent. */
static const char *param(struct MHD_Connection *c, const char *key, const char **error)
{
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
    if (v && strnlen(v, CN_WEB_MAX_ARG_LEN + 1) > CN_WEB_MAX_ARG_LEN)
        *error = "a parameter is too long";
    return v;
}

/* A CORS preflight for /api/export (token checked): Chrome's private network access asks
 * one before profiler.firefox.com may fetch from this loopback server. */
static enum MHD_Result reply_preflight(struct MHD_Connection *c)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    common_headers(r);
    MHD_add_response_header(r, "Access-Control-Allow-Origin", FIREFOX_PROFILER);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET");
    MHD_add_response_header(r, "Access-Control-Allow-Private-Network", "true");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r);
    MHD_destroy_response(r);
    return ret;
}

enum query_kind { Q_TREE, Q_EXPORT, Q_LINES };

/* The reply to a query the source answered (rc, out, len, err), q being its query. */
static enum MHD_Result reply_answer(struct MHD_Connection *c, enum query_kind kind,
                                    const cn_cli_query *q, int rc, char *out, size_t len,
                                    const cn_err *err)
{
    if (rc < 0) {
        bool bad = rc == -EINVAL || rc == -ENOENT || rc == -1;
        return reply_error(c, bad ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_BAD_GATEWAY,
                           err->msg[0] ? err->msg : strerror(-rc));
    }
    return reply_query(c, q, kind == Q_EXPORT, out, len);
}

/* Appends p to *list. */
static void list_append(pending **list, pending *p)
{
    while (*list)
        list = &(*list)->next;
    p->next = NULL;
    *list = p;
}

/* Takes p out of *list; false when it is not there. */
static bool list_remove(pending **list, pending *p)
{
    for (; *list; list = &(*list)->next) {
        if (*list == p) {
            *list = p->next;
            p->next = NULL;
            return true;
        }
    }
    return false;
}

/* Marks p answered and lets MHD take its request up again (the handler then replies). */
static void pending_done(cn_cli_web *w, pending *p, int rc)
{
    p->rc = rc;
    p->done = true;
    MHD_resume_connection(p->c);
    w->resumed = true;
}

/* Starts p's query on the source: into the running list, or answered at once (an error),
 * or -EBUSY (the caller keeps it waiting). */
static int pending_start(cn_cli_web *w, pending *p)
{
    int running = 0;
    for (const pending *r = w->running; r; r = r->next)
        running++;
    if (running == MAX_RUNNING)
        return -EBUSY;
    int rc = w->src->start(w->src->ctx, &p->q, p->kind == Q_LINES ? p->func : NULL, &p->job, &p->fd,
                           &p->err);
    if (rc == -EBUSY)
        return rc;
    if (rc < 0)
        pending_done(w, p, rc);
    else
        list_append(&w->running, p);
    return 0;
}

/* Starts the waiting queries the source takes now, oldest first. */
static void start_waiting(cn_cli_web *w)
{
    while (w->waiting) {
        pending *p = w->waiting;
        w->waiting = p->next;
        if (pending_start(w, p) == -EBUSY) {
            p->next = w->waiting;
            w->waiting = p;
            return;
        }
    }
}

/* An accepted query of an asynchronous source: started (or queued), its request
 * suspended until the answer is in (finish_ready). Called again once resumed. */
static enum MHD_Result serve_async(cn_cli_web *w, struct MHD_Connection *c, pending *p)
{
    if (p->done) {
        char *out = p->out; /* the reply owns it */
        p->out = NULL;
        return reply_answer(c, p->kind, &p->q, p->rc, out, p->len, &p->err);
    }
    MHD_suspend_connection(c);
    if (!p->job && !list_remove(&w->waiting, p) && pending_start(w, p) == 0)
        return MHD_YES;
    if (!p->job && !p->done) /* the source is busy: after the ones waiting already */
        list_append(&w->waiting, p);
    return MHD_YES;
}

/* /api/tree, /api/export and /api/lines: the args through the one parser, then the source.
 * An asynchronous source's query lives in *req_cls (a pending, freed by on_completed). */
static enum MHD_Result serve_query(cn_cli_web *w, struct MHD_Connection *c, enum query_kind kind,
                                   void **req_cls)
{
    query_args a = {.n = 0};
    cn_cli_query q;
    cn_err err = {0};
    char *out = NULL;
    size_t len = 0;
    const char *format = NULL, *func = NULL;

    if (*req_cls)
        return serve_async(w, c, *req_cls);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &a);
    if (kind == Q_EXPORT && !(format = param(c, "format", &a.error)) && !a.error)
        a.error = "/api/export needs a format parameter";
    if (kind == Q_LINES && !(func = param(c, "func", &a.error)) && !a.error)
        a.error = "/api/lines needs a func parameter";
    if (kind == Q_LINES && !has_lines(w->src) && !a.error)
        a.error = "per-line costs are not available for this profile";
    if (a.error)
        return reply_error(c, MHD_HTTP_BAD_REQUEST, a.error);
    cn_cli_query_init(&q);
    int rc = cn_cli_web_query(a.v, a.n, format, &q, &err);
    if (rc == 0 && w->src->start) {
        pending *p = calloc(1, sizeof(*p));
        if (!p) {
            cn_cli_query_clear(&q);
            return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        }
        *p = (pending){.c = c, .kind = kind, .q = q, .func = func, .fd = -1};
        *req_cls = p;
        return serve_async(w, c, p);
    }
    if (rc == 0 && kind == Q_LINES)
        rc = w->src->lines(w->src->ctx, &q, func, &out, &len, &err);
    else if (rc == 0)
        rc = w->src->tree(w->src->ctx, &q, &out, &len, &err);
    enum MHD_Result ret = reply_answer(c, kind, &q, rc, out, len, &err);
    cn_cli_query_clear(&q);
    return ret;
}

/* MHD is done with a request: frees its pending query, ending a job still running (the
 * server stopping). */
static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    cn_cli_web *w = cls;
    pending *p = *req_cls;
    (void)c;
    (void)toe;
    if (!p)
        return;
    list_remove(&w->waiting, p);
    if (list_remove(&w->running, p))
        w->src->cancel(w->src->ctx, p->job);
    cn_cli_query_clear(&p->q);
    free(p->out); /* NULL once MHD owns it */
    free(p);
    *req_cls = NULL;
}

int cn_cli_web_query(char **args, int n, const char *format, cn_cli_query *q, cn_err *err)
{
    for (int i = 0; i < n; i++) {
        int r = cn_cli_query_opt(q, n, args, &i, err);
        if (r < 0)
            return -EINVAL;
        if (r == 0)
            return cn_err_set(err, -EINVAL, "unexpected argument '%s'", args[i]);
    }
    if (cn_cli_query_check(q, err) < 0)
        return -EINVAL;
    if (q->output)
        return cn_err_set(err, -EINVAL, "-o is not available in canopy web");
    /* activity is JSON too: the page's activity graph and thread picker */
    if (q->format_given && q->spec.format != CN_FMT_JSON && q->spec.format != CN_FMT_ACTIVITY)
        return cn_err_set(err, -EINVAL, "canopy web answers in JSON only");
    if (!q->format_given)
        q->spec.format = CN_FMT_JSON;
    if (format && cn_fmt_format_parse(format, &q->spec.format) < 0)
        return cn_err_set(err, -EINVAL, "format '%s': unknown", format);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Requests
 */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    cn_cli_web *w = cls;
    (void)version;
    (void)upload_data;

    if (!cn_cli_web_token_ok(w, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token")))
        return reply_text(c, MHD_HTTP_FORBIDDEN, "forbidden: this URL needs its token\n");
    if (!strcmp(method, MHD_HTTP_METHOD_OPTIONS) && !strcmp(url, "/api/export"))
        return reply_preflight(c);
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
        return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n");
    if (*upload_data_size)
        return reply_text(c, MHD_HTTP_BAD_REQUEST, "a GET has no body\n");
    if (!strcmp(url, "/api/tree"))
        return serve_query(w, c, Q_TREE, req_cls);
    if (!strcmp(url, "/api/export"))
        return serve_query(w, c, Q_EXPORT, req_cls);
    if (!strcmp(url, "/api/lines"))
        return serve_query(w, c, Q_LINES, req_cls);
    if (!strcmp(url, "/api/info"))
        return serve_info(w, c);
    const cn_cli_web_asset *a = find_asset(url);
    if (a)
        return serve_asset(w, c, a);
    return reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* ---------------------------------------------------------------------------------------
 * Life cycle
 */

static int listen_addr(const cn_cli_web_config *cfg, struct sockaddr_in *sa, cn_err *err)
{
    const char *bind = cfg->bind ? cfg->bind : "127.0.0.1";

    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons(cfg->port);
    if (inet_pton(AF_INET, bind, &sa->sin_addr) != 1)
        return cn_err_set(err, -EINVAL, "--bind '%s': expected an IPv4 address", bind);
    return 0;
}

int cn_cli_web_new(const cn_cli_web_config *cfg, const cn_cli_web_source *src, cn_cli_web **out,
                   cn_err *err)
{
    struct sockaddr_in sa;
    char host[INET_ADDRSTRLEN];
    int rc = listen_addr(cfg, &sa, err);

    if (rc < 0)
        return rc;
    cn_cli_web *w = calloc(1, sizeof(*w));
    if (!w)
        return cn_err_set(err, -ENOMEM, "out of memory");
    w->src = src;
    rc = make_token(w->token, err);
    if (rc < 0)
        goto fail;
    errno = 0;
    w->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, cfg->port, NULL, NULL,
                            on_request, w, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, w, MHD_OPTION_END);
    if (!w->d) {
        rc = errno ? -errno : -EIO;
        inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
        cn_err_set(err, rc, "cannot listen on %s:%u: %s", host, (unsigned)cfg->port,
                   errno ? strerror(errno) : "libmicrohttpd refused");
        goto fail;
    }
    const union MHD_DaemonInfo *port = MHD_get_daemon_info(w->d, MHD_DAEMON_INFO_BIND_PORT);
    inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
    snprintf(w->url, sizeof(w->url), "http://%s:%u/?token=%s", host,
             port ? (unsigned)port->port : (unsigned)cfg->port, w->token);
    *out = w;
    return 0;
fail:
    cn_cli_web_free(w);
    return rc;
}

const char *cn_cli_web_url(const cn_cli_web *w)
{
    return w->url;
}

/* How long to wait in poll: MHD's own timeout, capped at 100 ms when the source pumps. */
static int poll_timeout(const cn_cli_web *w)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;
    int cap = w->src->pump ? 100 : 1000;

    if (MHD_get_timeout(w->d, &ms) != MHD_YES || ms > (MHD_UNSIGNED_LONG_LONG)cap)
        return cap;
    return (int)ms;
}

/* Reads the answer of p, whose fd is readable, and lets its request reply; then starts
 * the queries that waited for the source. */
static void finish_ready(cn_cli_web *w, pending *p)
{
    list_remove(&w->running, p);
    int rc = w->src->finish(w->src->ctx, p->job, &p->out, &p->len, &p->err);
    p->job = NULL;
    pending_done(w, p, rc);
    start_waiting(w);
}

int cn_cli_web_run(cn_cli_web *w, int stop_fd, cn_err *err)
{
    const union MHD_DaemonInfo *ep = MHD_get_daemon_info(w->d, MHD_DAEMON_INFO_EPOLL_FD);
    int64_t last_pump = 0;

    if (!ep)
        return cn_err_set(err, -EIO, "libmicrohttpd has no epoll fd");
    for (;;) {
        struct pollfd p[2 + MAX_RUNNING] = {{.fd = ep->epoll_fd, .events = POLLIN},
                                            {.fd = stop_fd, .events = POLLIN}};
        pending *polled[MAX_RUNNING];
        nfds_t n = 2;
        for (pending *r = w->running; r && n < 2 + MAX_RUNNING; r = r->next) {
            polled[n - 2] = r;
            p[n++] = (struct pollfd){.fd = r->fd, .events = POLLIN};
        }
        int timeout = w->resumed ? 0 : poll_timeout(w);
        w->resumed = false;
        if (poll(p, n, timeout) < 0 && errno != EINTR)
            return cn_err_set(err, -errno, "poll: %s", strerror(errno));
        if (p[1].revents)
            return 0;
        for (nfds_t k = 2; k < n; k++)
            if (p[k].revents)
                finish_ready(w, polled[k - 2]);
        if (MHD_run(w->d) != MHD_YES)
            return cn_err_set(err, -EIO, "libmicrohttpd failed");
        int64_t now = cn_common_now_ns();
        if (w->src->pump && now - last_pump >= PUMP_EVERY_NS) {
            int rc = w->src->pump(w->src->ctx, err);
            if (rc < 0)
                return rc;
            last_pump = now;
        }
    }
}

cn_cli_web *cn_cli_web_free(cn_cli_web *w)
{
    if (!w)
        return NULL;
    /* MHD must not stop with a request suspended: end the queries, resume them all (MHD
     * then closes them, and on_completed frees them). */
    while (w->running) {
        pending *p = w->running;
        w->running = p->next;
        w->src->cancel(w->src->ctx, p->job);
        p->job = NULL;
        pending_done(w, p, cn_err_set(&p->err, -ECANCELED, "canopy web is stopping"));
    }
    while (w->waiting) {
        pending *p = w->waiting;
        w->waiting = p->next;
        pending_done(w, p, cn_err_set(&p->err, -ECANCELED, "canopy web is stopping"));
    }
    if (w->d)
        MHD_stop_daemon(w->d);
    free(w);
    return NULL;
}
