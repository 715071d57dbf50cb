/* yajl_stream.c — the yajl streaming driver shared by the .cpuprofile and JSON tree
 * importers (yajl_stream.h): setup, feeding, completion, and the error bookkeeping that
 * names the file and the byte offset. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yajl_stream.h"

int cn_fmt__jstream_init(cn_fmt__jstream *s, const char *name, const yajl_callbacks *cb, void *ctx)
{
    *s = (cn_fmt__jstream){0};
    s->name = strdup(name ? name : "(buffer)");
    s->h = yajl_alloc(cb, NULL, ctx);
    if (!s->name || !s->h) {
        cn_fmt__jstream_fini(s);
        return -ENOMEM;
    }
    return 0;
}

void cn_fmt__jstream_fini(cn_fmt__jstream *s)
{
    if (s->h)
        yajl_free(s->h);
    free(s->name);
    s->h = NULL;
    s->name = NULL;
}

uint64_t cn_fmt__jstream_offset(const cn_fmt__jstream *s)
{
    return s->base + (s->h ? yajl_get_bytes_consumed(s->h) : 0);
}

__attribute__((format(printf, 4, 0))) static int vfail(cn_fmt__jstream *s, int code, uint64_t off,
                                                       const char *fmt, va_list ap)
{
    char msg[320];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    s->rc = cn_err_set(s->err, code, "%s: byte %llu: %s", s->name, (unsigned long long)off, msg);
    return 0; /* stops yajl */
}

int cn_fmt__jstream_fail_at(cn_fmt__jstream *s, int code, uint64_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(s, code, off, fmt, ap);
    va_end(ap);
    return 0;
}

int cn_fmt__jstream_fail(cn_fmt__jstream *s, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(s, code, cn_fmt__jstream_offset(s), fmt, ap);
    va_end(ap);
    return 0;
}

/* A yajl error (not one raised by a callback, which comes first) as the error of s:
 * "truncated JSON (yajl's words)" or "invalid JSON (…)" at the offset reached. chunk is
 * NULL at completion. */
static int yajl_fail(cn_fmt__jstream *s, const unsigned char *chunk, size_t len)
{
    if (s->rc < 0)
        return s->rc;
    unsigned char *msg = yajl_get_error(s->h, 0, chunk, len);
    const char *m = msg ? (const char *)msg : "parse error";
    size_t ml = strlen(m);
    while (ml && (m[ml - 1] == '\n' || m[ml - 1] == ' '))
        ml--;
    cn_fmt__jstream_fail(s, -EINVAL, "%s (%.*s)",
                         strstr(m, "premature EOF") ? "truncated JSON" : "invalid JSON", (int)ml,
                         m);
    if (msg)
        yajl_free_error(s->h, msg);
    return s->rc;
}

int cn_fmt__jstream_feed(cn_fmt__jstream *s, const void *data, size_t len, cn_err *err)
{
    s->err = err;
    if (s->rc < 0)
        return s->rc;
    if (yajl_parse(s->h, data, len) != yajl_status_ok)
        return yajl_fail(s, data, len);
    s->base += len;
    return 0;
}

int cn_fmt__jstream_finish(cn_fmt__jstream *s, cn_err *err)
{
    s->err = err;
    if (s->rc < 0)
        return s->rc;
    if (yajl_complete_parse(s->h) != yajl_status_ok)
        return yajl_fail(s, NULL, 0);
    return 0;
}
