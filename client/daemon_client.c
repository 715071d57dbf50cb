/* daemon_client.c — finding canopyd and talking to it (docs/protocol.md).
 *
 * One connection carries one request at a time: the request goes out as one JSON line,
 * the response comes back as one JSON line, read into a bounded cn_buf
 * (CN_PROTO_MAX_RESPONSE) so a broken or hostile daemon cannot make the client allocate
 * without bound. Every wait is bounded by a timeout (the daemon answers each request
 * promptly; only rendering a huge profile takes long).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cn_common.h"
#include "live.h"

#define CALL_TIMEOUT_MS 120000

struct cn_cli_conn {
    int fd;
    cn_buf in;
    int64_t next_id;
};

int cn_cli_socket_path(const char *explicit_path, char *buf, size_t n)
{
    const char *p = explicit_path;
    struct stat st;
    if (!p || !*p)
        p = getenv("CANOPY_SOCKET");
    if (!p || !*p) {
        if (stat("/run/canopy/canopy.sock", &st) == 0)
            p = "/run/canopy/canopy.sock";
    }
    if ((!p || !*p) && getenv("XDG_RUNTIME_DIR") && *getenv("XDG_RUNTIME_DIR")) {
        int w = snprintf(buf, n, "%s/canopy.sock", getenv("XDG_RUNTIME_DIR"));
        return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
    }
    if (!p || !*p) {
        snprintf(buf, n, "/run/canopy/canopy.sock");
        return -ENOENT;
    }
    int w = snprintf(buf, n, "%s", p);
    return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

int cn_cli_connect(const char *explicit_path, cn_cli_conn **out, char *path_out, size_t n)
{
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    cn_cli_conn *c = NULL;
    int fd = -1, rc;

    rc = cn_cli_socket_path(explicit_path, path, sizeof(path));
    if (path_out && n)
        snprintf(path_out, n, "%s", path);
    if (rc < 0)
        return rc;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        rc = -errno;
        goto fail;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        rc = -ENOMEM;
        goto fail;
    }
    c->fd = fd;
    c->next_id = 1;
    cn_buf_init(&c->in, CN_PROTO_MAX_RESPONSE);
    *out = c;
    return 0;
fail:
    close(fd);
    return rc;
}

cn_cli_conn *cn_cli_conn_free(cn_cli_conn *c)
{
    if (!c)
        return NULL;
    if (c->fd >= 0)
        close(c->fd);
    cn_buf_free(&c->in);
    free(c);
    return NULL;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads until a whole line is buffered. Returns 0 and the line, or negative errno. */
static int read_line(cn_cli_conn *c, char **line, size_t *len, cn_err *err)
{
    for (;;) {
        int rc = cn_proto_next_line(&c->in, CN_PROTO_MAX_RESPONSE, line, len);
        if (rc == 1)
            return 0;
        if (rc < 0) {
            cn_err_set(err, 0, "daemon response larger than %u bytes", CN_PROTO_MAX_RESPONSE);
            return rc;
        }
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        rc = poll(&pfd, 1, CALL_TIMEOUT_MS);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0) {
            cn_err_set(err, 0, "daemon did not answer within %d s", CALL_TIMEOUT_MS / 1000);
            return rc < 0 ? -errno : -ETIMEDOUT;
        }
        size_t room;
        char *space = cn_buf_space(&c->in, 65536, &room);
        if (!space) {
            cn_err_set(err, 0, "daemon response too large");
            return room ? -ENOMEM : -EMSGSIZE;
        }
        ssize_t r = recv(c->fd, space, room, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            cn_err_set(err, 0, "daemon closed the connection");
            return r < 0 ? -errno : -ECONNRESET;
        }
        cn_buf_commit(&c->in, (size_t)r);
    }
}

/* A response line: a JSON object with a boolean "ok". Not cn_proto_decode_response():
 * its nesting bound (32 levels) suits requests, but a call tree in a response nests two
 * levels per tree level; jansson's own parser bound (2048 levels) applies instead. */
static int decode_response(const char *line, size_t len, json_t **out, cn_err *err)
{
    json_error_t e;
    json_t *o = json_loadb(line, len, 0, &e);
    if (!o) {
        cn_err_set(err, 0, "malformed daemon response: %s (byte %d)", e.text, e.position);
        return -EPROTO;
    }
    if (!json_is_object(o) || !json_is_boolean(json_object_get(o, "ok"))) {
        json_decref(o);
        cn_err_set(err, 0, "malformed daemon response: no boolean \"ok\"");
        return -EPROTO;
    }
    *out = o;
    return 0;
}

/* Reads the n payload bytes that follow a response line (what c->in already holds
 * first, then straight from the socket into one allocation). Returns 0 and *out
 * (malloc'ed, NUL-terminated, caller frees), or negative errno with msg filled. */
static int read_payload(cn_cli_conn *c, size_t n, char **out, cn_err *err)
{
    char *p = malloc(n + 1);
    size_t have = cn_buf_len(&c->in) < n ? cn_buf_len(&c->in) : n;
    int rc = 0;
    if (!p) {
        cn_err_set(err, 0, "out of memory for a %zu-byte daemon answer", n);
        return -ENOMEM;
    }
    memcpy(p, cn_buf_ptr(&c->in), have);
    cn_buf_consume(&c->in, have);
    while (have < n) {
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int pr = poll(&pfd, 1, CALL_TIMEOUT_MS);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            cn_err_set(err, 0, "daemon did not send its answer within %d s",
                       CALL_TIMEOUT_MS / 1000);
            rc = pr < 0 ? -errno : -ETIMEDOUT;
            goto fail;
        }
        ssize_t r = recv(c->fd, p + have, n - have, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            cn_err_set(err, 0, "daemon closed the connection after %zu of %zu bytes", have, n);
            rc = r < 0 ? -errno : -ECONNRESET;
            goto fail;
        }
        have += (size_t)r;
    }
    p[n] = '\0';
    *out = p;
    return 0;
fail:
    free(p);
    return rc;
}

/* Sends one request; with raw, asks for a raw payload. */
static int send_request(cn_cli_conn *c, json_t *req, bool raw, cn_err *err)
{
    cn_buf out;
    int rc;

    cn_buf_init(&out, 0);
    json_object_set_new(req, "id", json_integer(c->next_id));
    json_t *had = raw ? json_incref(json_object_get(req, "raw")) : NULL;
    if (raw)
        json_object_set_new(req, "raw", json_true());
    rc = cn_proto_encode(req, &out);
    if (raw && had) /* req is borrowed: leave "raw" as it came */
        json_object_set_new(req, "raw", had);
    else if (raw)
        json_object_del(req, "raw");
    if (rc < 0) {
        cn_err_set(err, 0, "cannot encode the request: %s", strerror(-rc));
        goto out;
    }
    rc = send_all(c->fd, cn_buf_ptr(&out), cn_buf_len(&out));
    if (rc < 0)
        cn_err_set(err, 0, "cannot send to the daemon: %s", strerror(-rc));
out:
    cn_buf_free(&out);
    return rc;
}

/* Reads the response to the request sent last; with raw, its raw payload too. */
static int read_response(cn_cli_conn *c, json_t **resp, char **raw, size_t *raw_len, cn_err *err)
{
    char *line;
    size_t len;

    *resp = NULL;
    if (raw) {
        *raw = NULL;
        *raw_len = 0;
    }
    int rc = read_line(c, &line, &len, err);
    if (rc < 0)
        return rc;
    rc = decode_response(line, len, resp, err);
    cn_buf_consume(&c->in, len + 1);
    if (rc < 0)
        return rc;
    const json_t *id = json_object_get(*resp, "id");
    if (id && !(json_is_integer(id) && json_integer_value(id) == c->next_id)) {
        cn_err_set(err, 0, "daemon response out of order");
        rc = -EPROTO;
        goto fail;
    }
    c->next_id++;
    const json_t *nb = json_object_get(*resp, "raw_bytes");
    if (!nb)
        return 0; /* an error, or a daemon that does not know "raw": output in *resp */
    if (!raw || !json_is_integer(nb) || json_integer_value(nb) < 0 ||
        (uint64_t)json_integer_value(nb) > CN_PROTO_MAX_RESPONSE) {
        cn_err_set(err, 0, "malformed daemon response: bad \"raw_bytes\"");
        rc = -EPROTO;
        goto fail;
    }
    *raw_len = (size_t)json_integer_value(nb);
    rc = read_payload(c, *raw_len, raw, err);
    if (rc < 0) {
        *raw_len = 0;
        goto fail;
    }
    return 0;
fail:
    json_decref(*resp);
    *resp = NULL;
    return rc;
}

int cn_cli_call(cn_cli_conn *c, json_t *req, json_t **resp, cn_err *err)
{
    *resp = NULL;
    int rc = send_request(c, req, false, err);
    return rc < 0 ? rc : read_response(c, resp, NULL, NULL, err);
}

int cn_cli_call_raw(cn_cli_conn *c, json_t *req, json_t **resp, char **raw, size_t *raw_len,
                    cn_err *err)
{
    *resp = NULL;
    *raw = NULL;
    *raw_len = 0;
    int rc = send_request(c, req, true, err);
    return rc < 0 ? rc : read_response(c, resp, raw, raw_len, err);
}

int cn_cli_send_raw(cn_cli_conn *c, json_t *req, cn_err *err)
{
    return send_request(c, req, true, err);
}

int cn_cli_recv_raw(cn_cli_conn *c, json_t **resp, char **raw, size_t *raw_len, cn_err *err)
{
    return read_response(c, resp, raw, raw_len, err);
}

int cn_cli_conn_fd(const cn_cli_conn *c)
{
    return c->fd;
}

int cn_cli_resp_status(const char *cmd, const json_t *resp)
{
    if (json_is_true(json_object_get(resp, "ok")))
        return 0;
    const json_t *e = json_object_get(resp, "error");
    const char *m = json_string_value(json_object_get(e, "message"));
    const json_t *x = json_object_get(e, "exit");
    int status = json_is_integer(x) ? (int)json_integer_value(x) : 1;
    if (status != 1 && status != 2)
        status = 1;
    /* Messages quote names (sessions, functions): the terminal rule. */
    fprintf(stderr, "canopy %s: ", cmd);
    cn_term_fputs(m ? m : "the daemon refused the request", stderr);
    fputc('\n', stderr);
    return status;
}
