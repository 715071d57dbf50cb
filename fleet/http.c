/* http.c — ClickHouse's HTTP interface over libcurl, and gzip with zlib.
 *
 * One easy handle per connection, reused (keep-alive), on its owner's thread. A query
 * without data is the POST body; an INSERT's SQL goes in the `query` URL parameter and
 * its rows in the body, gzip'd with `Content-Encoding: gzip` (ClickHouse 18.16 inflates
 * request bodies itself). ClickHouse reports errors with a non-200 status and a text
 * body ("Code: 60, e.displayText() = DB::Exception: …"), whose first line becomes the
 * cn_err message. cn_fleet_post is the plain POST of other endpoints (Pyroscope's push).
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cn_fleet.h"

struct cn_fleet_conn {
    CURL *curl;
    char *url, *user, *password; /* owned */
    long timeout_ms;
};

int cn_fleet_conn_new(const char *url, const char *user, const char *password, long timeout_ms,
                      cn_fleet_conn **out, cn_err *err)
{
    if (!url || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)))
        return cn_err_set(err, -EINVAL, "fleet URL '%s' is not an http:// or https:// URL",
                          url ? url : "");
    /* Thread-safe on this libcurl (7.84+ initialises lazily and safely); a no-op after the
     * first call. */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    cn_fleet_conn *c = calloc(1, sizeof(*c));
    if (!c || !(c->curl = curl_easy_init()) || !(c->url = strdup(url)) ||
        (user && !(c->user = strdup(user))) || (password && !(c->password = strdup(password)))) {
        cn_fleet_conn_free(c);
        return cn_err_set(err, -ENOMEM, "out of memory");
    }
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 60000;
    *out = c;
    return 0;
}

cn_fleet_conn *cn_fleet_conn_free(cn_fleet_conn *c)
{
    if (!c)
        return NULL;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->url);
    free(c->user);
    if (c->password) {
        explicit_bzero(c->password, strlen(c->password));
        free(c->password);
    }
    free(c);
    return NULL;
}

const char *cn_fleet_conn_url(const cn_fleet_conn *c)
{
    return c->url;
}

typedef struct sink {
    cn_buf *out;
    bool over;
} sink;

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    sink *s = ud;
    size_t n = size * nmemb;
    if (cn_buf_append(s->out, ptr, n) < 0) {
        s->over = true;
        return 0;
    }
    return n;
}

static int curl_errno(CURLcode cc)
{
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_COULDNT_RESOLVE_HOST:
        return -EHOSTUNREACH;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    default:
        return -EIO;
    }
}

/* Common easy-handle options of a request to c. */
static void set_common(cn_fleet_conn *c, sink *s)
{
    CURL *h = c->curl;
    if (c->user) {
        curl_easy_setopt(h, CURLOPT_USERNAME, c->user);
        curl_easy_setopt(h, CURLOPT_PASSWORD, c->password ? c->password : "");
    }
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->timeout_ms < 5000 ? c->timeout_ms : 5000L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
}

int cn_fleet_exec(cn_fleet_conn *c, const char *sql, const void *body, size_t len, bool gzipped,
                  cn_buf *out, cn_err *err)
{
    CURL *h = c->curl;
    struct curl_slist *hdr = NULL;
    char *url = NULL, *esc = NULL;
    cn_buf ebuf;
    sink s = {NULL, false};
    long status = 0;
    int r = 0;

    cn_buf_init(&ebuf, 64 * 1024);
    s.out = out ? out : &ebuf; /* an error's text is read even when the caller wants none */
    curl_easy_reset(h);
    if (body) {
        esc = curl_easy_escape(h, sql, 0);
        size_t n = strlen(c->url) + (esc ? strlen(esc) : 0) + 16;
        if (!esc || !(url = malloc(n))) {
            r = cn_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        snprintf(url, n, "%s%squery=%s", c->url, strchr(c->url, '?') ? "&" : "?", esc);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        /* libcurl sends a request again by itself when a reused connection closes before
         * any answer (it takes it for a stale keep-alive), which would insert the rows
         * twice before the pusher could ask whether the first attempt landed; on a fresh
         * connection it reports the loss instead (docs/fleet.md "Failures"). */
        curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
        if (gzipped)
            hdr = curl_slist_append(hdr, "Content-Encoding: gzip");
    } else {
        curl_easy_setopt(h, CURLOPT_URL, c->url);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, sql);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(sql));
    }
    hdr = curl_slist_append(hdr, "Content-Type: text/plain; charset=utf-8");
    hdr = curl_slist_append(hdr, "Expect:"); /* no 100-continue round trip */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    set_common(c, &s);
    CURLcode cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (cc == CURLE_WRITE_ERROR && s.over) {
        r = cn_err_set(err, -EFBIG, "ClickHouse's answer exceeds %zu bytes", s.out->limit);
        goto out;
    }
    if (cc != CURLE_OK) {
        r = cn_err_set(err, curl_errno(cc), "ClickHouse at %s: %s", c->url, curl_easy_strerror(cc));
        goto out;
    }
    if (status != 200) {
        /* The error text went to out: take its first line. */
        const char *msg = cn_buf_ptr(s.out) ? cn_buf_ptr(s.out) : "";
        size_t n = strcspn(msg, "\n");
        r = cn_err_set(err, -EIO, "ClickHouse at %s: HTTP %ld: %.*s", c->url, status,
                       (int)(n > 300 ? 300 : n), msg);
        if (out)
            cn_buf_reset(out);
    }
out:
    curl_slist_free_all(hdr);
    curl_free(esc);
    free(url);
    cn_buf_free(&ebuf);
    return r;
}

int cn_fleet_post(cn_fleet_conn *c, const char *path, const char *content_type,
                  const char *const *headers, const void *body, size_t len, cn_err *err)
{
    CURL *h = c->curl;
    struct curl_slist *hdr = NULL;
    char *url = NULL, ct[256];
    cn_buf ans;
    sink s = {&ans, false};
    long status = 0;
    int r = 0;
    /* The answer is only read for an error's first line. */
    cn_buf_init(&ans, 64 * 1024);
    size_t ulen = strlen(c->url);
    while (ulen > 0 && c->url[ulen - 1] == '/' && path[0] == '/')
        ulen--; /* "http://h:4040/" + "/push…" */
    if (!(url = malloc(ulen + strlen(path) + 1))) {
        r = cn_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    memcpy(url, c->url, ulen);
    strcpy(url + ulen, path);
    snprintf(ct, sizeof(ct), "Content-Type: %s", content_type);
    hdr = curl_slist_append(hdr, ct);
    hdr = curl_slist_append(hdr, "Expect:");
    for (size_t i = 0; headers && headers[i]; i++)
        hdr = curl_slist_append(hdr, headers[i]);
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    set_common(c, &s);
    CURLcode cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && s.over)) {
        r = cn_err_set(err, curl_errno(cc), "%s: %s", url, curl_easy_strerror(cc));
        goto out;
    }
    if (status < 200 || status > 299) {
        const char *msg = cn_buf_ptr(&ans) && cn_buf_len(&ans) ? cn_buf_ptr(&ans) : "";
        size_t n = strcspn(msg, "\n");
        bool refused = status >= 400 && status < 500 && status != 408 && status != 429;
        r = cn_err_set(err, refused ? -EBADMSG : -EIO, "%s: HTTP %ld: %.*s", url, status,
                       (int)(n > 300 ? 300 : n), msg);
    }
out:
    curl_slist_free_all(hdr);
    free(url);
    cn_buf_free(&ans);
    return r;
}

int cn_fleet_gzip(const void *in, size_t len, int level, cn_buf *out)
{
    z_stream z = {0};
    if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)len;
    int zr = Z_OK, r = 0;
    while (zr != Z_STREAM_END) {
        size_t room;
        char *p = cn_buf_space(out, 64 * 1024, &room);
        if (!p) {
            r = -ENOMEM;
            break;
        }
        z.next_out = (Bytef *)p;
        z.avail_out = (uInt)room;
        zr = deflate(&z, Z_FINISH);
        if (zr == Z_STREAM_ERROR) {
            r = -EIO;
            break;
        }
        cn_buf_commit(out, room - z.avail_out);
    }
    deflateEnd(&z);
    return r;
}

int cn_fleet_sql_quote(cn_buf *out, const char *s)
{
    int r = cn_buf_append(out, "'", 1);
    for (; *s && r == 0; s++) {
        if (*s == '\'' || *s == '\\')
            r = cn_buf_append(out, "\\", 1);
        r = r ? r : cn_buf_append(out, s, 1);
    }
    return r ? r : cn_buf_append(out, "'", 1);
}
