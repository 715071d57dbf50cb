/* proto.c — newline-delimited JSON framing and message helpers (docs/protocol.md).
 * Decoding is defensive: a depth pre-scan bounds recursion before jansson sees the bytes,
 * and every message must be an object with the fields the protocol requires. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cn_common.h"

#define PROTO_MAX_DEPTH    32   /* requests: nothing in the protocol nests deeper than 3 */
#define RESPONSE_MAX_DEPTH 1500 /* responses: trees nest 2 levels per frame (256 frames max) */

int cn_proto_next_line(cn_buf *b, size_t max, char **line, size_t *len)
{
    char *p = cn_buf_ptr(b);
    size_t n = cn_buf_len(b);
    char *nl = n ? memchr(p, '\n', n) : NULL;
    if (!nl)
        return n >= max ? -EMSGSIZE : 0;
    size_t l = (size_t)(nl - p);
    if (l + 1 > max)
        return -EMSGSIZE;
    *nl = '\0';
    *line = p;
    *len = l;
    return 1;
}

/* Maximum bracket nesting outside strings; -1 on a raw NUL byte. */
static int scan_depth(const char *s, size_t len)
{
    int depth = 0, max = 0;
    bool in_str = false, esc = false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '\0')
            return -1;
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
            continue;
        }
        if (c == '"')
            in_str = true;
        else if (c == '{' || c == '[') {
            if (++depth > max)
                max = depth;
        } else if (c == '}' || c == ']')
            depth--;
    }
    return max;
}

static int decode_object(const char *line, size_t len, int max_depth, json_t **out, cn_err *err)
{
    int depth = scan_depth(line, len);
    if (depth < 0)
        return cn_err_setc(err, -EINVAL, "bad_request", "message contains a NUL byte");
    if (depth > max_depth)
        return cn_err_setc(err, -EINVAL, "bad_request", "message nests deeper than %d levels",
                           max_depth);
    json_error_t je;
    json_t *msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (!msg)
        return cn_err_setc(err, -EINVAL, "bad_request", "malformed JSON at byte %d: %s",
                           je.position, je.text);
    if (!json_is_object(msg)) {
        json_decref(msg);
        return cn_err_setc(err, -EINVAL, "bad_request", "a message must be a JSON object");
    }
    json_t *v = json_object_get(msg, "v");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            json_decref(msg);
            return cn_err_setc(err, -EINVAL, "bad_request", "\"v\" must be a positive integer");
        }
        if (json_integer_value(v) > CN_PROTO_VERSION) {
            long long got = (long long)json_integer_value(v);
            json_decref(msg);
            return cn_err_setc(err, -EPROTO, "bad_version",
                               "protocol version %lld is not supported (this side speaks %d)", got,
                               CN_PROTO_VERSION);
        }
    }
    *out = msg;
    return 0;
}

int cn_proto_decode(const char *line, size_t len, json_t **out, cn_err *err)
{
    json_t *msg = NULL;
    int r = decode_object(line, len, PROTO_MAX_DEPTH, &msg, err);
    if (r < 0)
        return r;
    json_t *cmd = json_object_get(msg, "cmd");
    if (!json_is_string(cmd) || json_string_length(cmd) == 0) {
        json_decref(msg);
        return cn_err_setc(err, -EINVAL, "bad_request",
                           "a request needs a non-empty string \"cmd\"");
    }
    *out = msg;
    return 0;
}

int cn_proto_decode_response(const char *line, size_t len, json_t **out, cn_err *err)
{
    json_t *msg = NULL;
    int r = decode_object(line, len, RESPONSE_MAX_DEPTH, &msg, err);
    if (r < 0)
        return r;
    if (!json_is_boolean(json_object_get(msg, "ok"))) {
        json_decref(msg);
        return cn_err_setc(err, -EINVAL, "bad_response", "a response needs a boolean \"ok\"");
    }
    *out = msg;
    return 0;
}

struct dump_ctx {
    cn_buf *out;
    int err;
};

static int dump_cb(const char *buffer, size_t size, void *data)
{
    struct dump_ctx *c = data;
    c->err = cn_buf_append(c->out, buffer, size);
    return c->err < 0 ? -1 : 0;
}

int cn_proto_encode(const json_t *msg, cn_buf *out)
{
    size_t before = cn_buf_len(out);
    struct dump_ctx c = {out, 0};
    if (json_dump_callback(msg, dump_cb, &c, JSON_COMPACT) < 0 && c.err == 0)
        c.err = -ENOMEM;
    if (c.err == 0)
        c.err = cn_buf_append(out, "\n", 1);
    if (c.err < 0) {
        assert(cn_buf_len(out) >= before); /* appends only ever grew it */
        out->len = before;                 /* drop the partial message */
        if (out->data)
            out->data[out->off + before] = '\0';
    }
    return c.err;
}

json_t *cn_proto_request(const char *cmd)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    if (json_object_set_new(o, "v", json_integer(CN_PROTO_VERSION)) < 0 ||
        json_object_set_new(o, "cmd", json_string(cmd)) < 0)
        goto fail;
    return o;
fail:
    json_decref(o);
    return NULL;
}

static json_t *reply_base(const json_t *req, bool ok)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    if (json_object_set_new(o, "v", json_integer(CN_PROTO_VERSION)) < 0 ||
        json_object_set_new(o, "ok", json_boolean(ok)) < 0)
        goto fail;
    json_t *id = req ? json_object_get(req, "id") : NULL;
    if (id && json_object_set(o, "id", id) < 0)
        goto fail;
    return o;
fail:
    json_decref(o);
    return NULL;
}

json_t *cn_proto_ok(const json_t *req)
{
    return reply_base(req, true);
}

json_t *cn_proto_error(const json_t *req, const char *code, int exit, const char *fmt, ...)
{
    cn_err m;
    va_list ap;
    va_start(ap, fmt);
    /* cn_err's formatting cuts on a character boundary; cn_proto_string makes the rest
     * valid UTF-8 (messages quote names of any bytes). */
    cn_err_vset(&m, 0, fmt, ap);
    va_end(ap);
    json_t *o = reply_base(req, false);
    if (!o)
        return NULL;
    json_t *e =
        json_pack("{s:s, s:o, s:i}", "code", code, "message", cn_proto_str(m.msg), "exit", exit);
    if (!e || json_object_set_new(o, "error", e) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int cn_proto_get_str(const json_t *o, const char *key, const char **out, cn_err *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 1;
    if (!json_is_string(v))
        return cn_err_setc(err, -EINVAL, "bad_request", "\"%s\" must be a string", key);
    *out = json_string_value(v);
    return 0;
}

int cn_proto_get_int(const json_t *o, const char *key, int64_t *out, cn_err *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 1;
    if (!json_is_integer(v))
        return cn_err_setc(err, -EINVAL, "bad_request", "\"%s\" must be an integer", key);
    *out = (int64_t)json_integer_value(v);
    return 0;
}

int cn_proto_get_num(const json_t *o, const char *key, double *out, cn_err *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 1;
    if (!json_is_number(v))
        return cn_err_setc(err, -EINVAL, "bad_request", "\"%s\" must be a number", key);
    *out = json_number_value(v);
    return 0;
}

int cn_proto_get_bool(const json_t *o, const char *key, bool *out, cn_err *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 1;
    if (!json_is_boolean(v))
        return cn_err_setc(err, -EINVAL, "bad_request", "\"%s\" must be true or false", key);
    *out = json_is_true(v);
    return 0;
}

/* ---- strings under the UTF-8 rule (common/text.c) ------------------------------------ */

json_t *cn_proto_string(const char *s, size_t n)
{
    char stack[256];
    char *buf = stack;
    json_t *v;

    if (!s)
        s = "", n = 0;
    if (n > (sizeof(stack) - 1) / 3 && !(buf = malloc(3 * n + 1)))
        return NULL;
    size_t len = cn_utf8_clean(buf, s, n);
    v = json_stringn_nocheck(buf, len);
    if (buf != stack)
        free(buf);
    return v;
}

json_t *cn_proto_str(const char *s)
{
    return cn_proto_string(s, s ? strlen(s) : 0);
}
