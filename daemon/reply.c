/* reply.c — building a response and queueing its bytes on the connection.
 *
 * A response is one JSON line (docs/protocol.md "Responses"). Rendered output travels in
 * one of three ways: after the line as raw bytes (the request's "raw": true, announced by
 * "raw_bytes"), or embedded in the line — JSON trees as the member's value as rendered,
 * text as a JSON string, binary formats in base64. Embedding builds the line as
 * '{' + the object's members (jansson's JSON_EMBED) + ',"KEY":' + the rendered bytes +
 * "}\n", because re-parsing megabytes of rendered JSON into jansson only to dump them
 * again would dominate a round trip. A reply is queued all or nothing: its total size is
 * reserved in the output buffer first, so a client never reads half a response.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "d_internal.h"

void cn_d__reply_init(cn_d__reply *rp)
{
    memset(rp, 0, sizeof(*rp));
    cn_buf_init(&rp->raw, 0);
}

json_t *cn_d__reply_error(const json_t *req, int code, const cn_err *err)
{
    const char *name = "failed";
    int exit = 1;
    switch (code) {
    case -EPERM:
    case -EACCES:
        name = "permission_denied";
        break;
    case -ESRCH:
        name = "no_such_process";
        break;
    case -ENOENT:
        name = "unknown_function";
        exit = 2;
        break;
    case -EINVAL:
        name = "bad_query";
        exit = 2;
        break;
    default:
        break;
    }
    return cn_proto_error(req, name, exit, "%s", err->msg[0] ? err->msg : strerror(-code));
}

/* Text goes into the JSON string "output", written by formats/' one JSON string writer
 * (cn_fmt_json_string: invalid UTF-8 becomes U+FFFD, as in every JSON output) in one pass
 * — a text rendering of a big tree is megabytes, and jansson's per-character dump would
 * be the slow part of a round trip — and embedded like a tree; "raw_bytes" announces a
 * payload. */
int cn_d__reply_output(cn_d__reply *rp, cn_fmt_format fmt, const char *json_key, cn_buf *out,
                       bool payload)
{
    int r = 0;
    assert(rp->msg && !rp->key && !rp->payload && cn_buf_len(&rp->raw) == 0);
    json_object_set_new(rp->msg, "format", json_string(cn_fmt_format_name(fmt)));
    if (payload) {
        r = json_object_set_new(rp->msg, "raw_bytes", json_integer((json_int_t)cn_buf_len(out)));
        rp->payload = true;
        rp->raw = *out;
        cn_buf_init(out, 0);
    } else if (fmt == CN_FMT_JSON && json_key) {
        rp->key = json_key;
        rp->raw = *out;
        cn_buf_init(out, 0);
    } else if (fmt == CN_FMT_PPROF || fmt == CN_FMT_OTLP || fmt == CN_FMT_CANOPY) {
        char *b = cn_common_base64_encode(cn_buf_ptr(out), cn_buf_len(out));
        r = b ? json_object_set_new(rp->msg, "output_base64", json_string(b)) : -ENOMEM;
        free(b);
    } else {
        rp->key = "output";
        r = cn_fmt_json_string(&rp->raw, cn_buf_ptr(out), cn_buf_len(out));
    }
    return r < 0 ? -ENOMEM : 0;
}

int cn_d__reply_notes(cn_d__reply *rp, const cn_buf *notes)
{
    static const char prefix[] = "note: ";
    const char *p = cn_buf_ptr(notes), *end = p + cn_buf_len(notes);
    json_t *arr;

    if (p == end)
        return 0;
    if (!(arr = json_array()) || json_object_set_new(rp->msg, "notes", arr) < 0)
        return -ENOMEM;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *line = p;
        p += n + 1;
        if (n >= sizeof(prefix) - 1 && !memcmp(line, prefix, sizeof(prefix) - 1)) {
            line += sizeof(prefix) - 1;
            n -= sizeof(prefix) - 1;
        }
        /* A note quotes transform arguments, which may name functions of any bytes. */
        if (json_array_append_new(arr, cn_proto_string(line, n)) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* What a client gets when not even an error response can be built. */
static const char oom_line[] = "{\"v\":1,\"ok\":false,\"error\":{\"code\":\"failed\",\"message\":"
                               "\"out of memory\",\"exit\":1}}\n";

static int dump_cb(const char *buffer, size_t size, void *data)
{
    return cn_buf_append(data, buffer, size) < 0 ? -1 : 0;
}

/* Appends parts[0, n) to out, all or nothing. 0 or -ENOMEM/-EMSGSIZE. */
static int append_all(cn_buf *out, const cn_buf *const *parts, size_t n)
{
    size_t total = 0, room = 0;
    for (size_t i = 0; i < n; i++)
        total += cn_buf_len(parts[i]);
    errno = 0;
    if (!cn_buf_space(out, total, &room))
        return errno == ENOMEM ? -ENOMEM : -EMSGSIZE;
    if (room < total)
        return -EMSGSIZE;
    for (size_t i = 0; i < n; i++) {
        int r = cn_buf_append(out, cn_buf_ptr(parts[i]), cn_buf_len(parts[i]));
        assert(r == 0); /* the room was made above: these appends cannot fail */
        (void)r;
    }
    return 0;
}

/* Queues head + raw (+ tail) on out, all or nothing. When out holds nothing and raw has
 * room for the head before its bytes (answer_query leaves it, workers.c), raw's storage
 * becomes out's, so megabytes of output are not copied once more on the loop. 0 or
 * negative errno (out unchanged). */
static int queue_parts(cn_buf *out, const cn_buf *head, cn_buf *raw, const cn_buf *tail)
{
    if (cn_buf_len(out) || !cn_buf_len(raw) || raw->off < cn_buf_len(head)) {
        const cn_buf *parts[] = {head, raw, tail};
        return append_all(out, parts, tail ? 3 : 2);
    }
    int r = cn_buf_prepend(raw, cn_buf_ptr(head), cn_buf_len(head));
    if (r == 0 && tail)
        r = cn_buf_append(raw, cn_buf_ptr(tail), cn_buf_len(tail));
    if (r < 0)
        return r; /* raw may hold the head now: it is not sent */
    cn_buf empty = *out;
    *out = *raw;
    *raw = empty; /* out's storage, freed with the reply */
    return 0;
}

/* Queues rp as described at the top of this file. 0 or negative errno (out unchanged). */
static int queue_reply(cn_buf *out, cn_d__reply *rp)
{
    cn_buf head, tail;
    int r;
    cn_buf_init(&head, 0);
    cn_buf_init(&tail, 0);
    if (!rp->key) {
        /* The line; with a payload, its bytes follow as they are. */
        r = cn_proto_encode(rp->msg, &head);
        if (r == 0 && rp->payload)
            r = queue_parts(out, &head, &rp->raw, NULL);
        else if (r == 0)
            r = append_all(out, (const cn_buf *const[]){&head}, 1);
        goto done;
    }
    /* Embedded: newlines in a rendered JSON tree become spaces (whitespace between
     * tokens: JSON strings escape newlines, so none is inside a string), keeping the
     * response on one line. */
    char *raw = cn_buf_ptr(&rp->raw);
    for (size_t i = 0; i < cn_buf_len(&rp->raw); i++)
        if (raw[i] == '\n' || raw[i] == '\r')
            raw[i] = ' ';
    assert(!strpbrk(rp->key, "\"\\")); /* a member name of ours, quoted as it is */
    r = cn_buf_append(&head, "{", 1);
    if (r == 0 && json_dump_callback(rp->msg, dump_cb, &head, JSON_COMPACT | JSON_EMBED) < 0)
        r = -ENOMEM;
    if (r == 0)
        r = cn_buf_appendf(&head, "%s\"%s\":", json_object_size(rp->msg) ? "," : "", rp->key);
    if (r == 0)
        r = cn_buf_append(&tail, "}\n", 2);
    if (r == 0)
        r = queue_parts(out, &head, &rp->raw, &tail);
done:
    cn_buf_free(&head);
    cn_buf_free(&tail);
    return r;
}

void cn_d__reply_send(cn_d__conn *c, cn_d__reply *rp)
{
    int r = rp->msg ? queue_reply(&c->out, rp) : -ENOMEM;
    if (r < 0) {
        json_t *e =
            rp->msg ? cn_proto_error(rp->msg, "failed", 1, "response: %s", strerror(-r)) : NULL;
        if (!e || cn_proto_encode(e, &c->out) < 0)
            cn_buf_append(&c->out, oom_line, sizeof(oom_line) - 1);
        json_decref(e);
    }
    json_decref(rp->msg);
    cn_buf_free(&rp->raw);
    rp->msg = NULL;
    rp->key = NULL;
    rp->payload = false;
    cn_d__conn_update(c);
}
