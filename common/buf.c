/* buf.c — the bounded dynamic byte buffer (cn_buf). A consumed prefix is kept until the
 * next growth so that consuming a line costs nothing; growth compacts first and doubles. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cn_common.h"

/* The layout cn_common.h states for a cn_buf: no storage means no content; otherwise the
 * content and the NUL after it fit in the storage, and the content within the limit. The
 * NUL itself is checked where a function restores it (cn_buf_space hands out the bytes
 * from data[off + len] on, the NUL's included, until the next commit). */
static void buf_assert(const cn_buf *b)
{
    assert(b->data || (b->len == 0 && b->off == 0 && b->cap == 0));
    assert(!b->data || b->off + b->len < b->cap);
    assert(b->len <= b->limit);
    (void)b;
}

/* buf_assert, and the NUL after the content. */
static void buf_assert_nul(const cn_buf *b)
{
    buf_assert(b);
    assert(!b->data || b->data[b->off + b->len] == '\0');
    (void)b;
}

void cn_buf_init(cn_buf *b, size_t limit)
{
    memset(b, 0, sizeof(*b));
    b->limit = limit ? limit : SIZE_MAX - 1;
}

/* Releases the storage, allocated or mapped. */
static void storage_free(cn_buf *b)
{
    if (b->mapped)
        munmap(b->data, b->cap);
    else
        free(b->data);
    b->mapped = false;
}

void cn_buf_free(cn_buf *b)
{
    size_t limit = b->limit;
    storage_free(b);
    memset(b, 0, sizeof(*b));
    b->limit = limit;
}

void cn_buf_reset(cn_buf *b)
{
    b->len = 0;
    b->off = 0;
    if (b->data)
        b->data[0] = '\0';
}

/* Ensures storage for n more bytes plus the NUL, whatever the limit. 0 or -ENOMEM. */
static int buf_room(cn_buf *b, size_t n)
{
    buf_assert(b);
    size_t need = b->len + n + 1;
    if (b->data && b->off + need <= b->cap)
        return 0;
    if (b->data && b->off && need <= b->cap) {
        memmove(b->data, b->data + b->off, b->len + 1);
        b->off = 0;
        return 0;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *d = malloc(cap);
    if (!d)
        return -ENOMEM;
    if (b->data)
        memcpy(d, b->data + b->off, b->len);
    d[b->len] = '\0';
    storage_free(b);
    b->data = d;
    b->off = 0;
    b->cap = cap;
    return 0;
}

/* Ensures room for n more bytes plus the NUL. 0, -EMSGSIZE or -ENOMEM. */
static int buf_reserve(cn_buf *b, size_t n)
{
    buf_assert(b);
    if (n > b->limit - b->len)
        return -EMSGSIZE;
    return buf_room(b, n);
}

int cn_buf_append(cn_buf *b, const void *p, size_t n)
{
    int r = buf_reserve(b, n);
    if (r < 0)
        return r;
    if (n)
        memcpy(b->data + b->off + b->len, p, n);
    b->len += n;
    b->data[b->off + b->len] = '\0';
    buf_assert_nul(b);
    return 0;
}

int cn_buf_appendf(cn_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n < sizeof(small))
        return cn_buf_append(b, small, (size_t)n);
    int r = buf_reserve(b, (size_t)n);
    if (r < 0)
        return r;
    va_start(ap, fmt);
    vsnprintf(b->data + b->off + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    buf_assert_nul(b);
    return 0;
}

char *cn_buf_space(cn_buf *b, size_t n, size_t *room)
{
    *room = 0;
    if (b->len >= b->limit)
        return NULL;
    if (n > b->limit - b->len)
        n = b->limit - b->len;
    if (n == 0)
        n = 1;
    int r = buf_reserve(b, n);
    if (r < 0) {
        errno = -r;
        return NULL;
    }
    size_t avail = b->cap - b->off - b->len - 1;
    if (avail > b->limit - b->len)
        avail = b->limit - b->len;
    *room = avail;
    assert(avail >= 1); /* cn_common.h: a non-NULL answer has room for at least 1 byte */
    return b->data + b->off + b->len;
}

void cn_buf_commit(cn_buf *b, size_t n)
{
    /* Only bytes cn_buf_space made room for: within the storage (the NUL too) and the
     * limit. */
    assert(b->data && n < b->cap - b->off - b->len && n <= b->limit - b->len);
    b->len += n;
    b->data[b->off + b->len] = '\0';
    buf_assert_nul(b);
}

void cn_buf_consume(cn_buf *b, size_t n)
{
    buf_assert(b);
    if (n >= b->len) {
        cn_buf_reset(b);
        return;
    }
    b->off += n;
    b->len -= n;
}

int cn_buf_prepend(cn_buf *b, const void *p, size_t n)
{
    if (n > b->limit - b->len)
        return -EMSGSIZE;
    if (n <= b->off) {
        b->off -= n;
    } else {
        int r = buf_reserve(b, n);
        if (r < 0)
            return r;
        memmove(b->data + b->off + n, b->data + b->off, b->len + 1);
    }
    if (n)
        memcpy(b->data + b->off, p, n);
    b->len += n;
    buf_assert_nul(b);
    return 0;
}

int cn_buf_adopt_map(cn_buf *b, char *map, size_t cap, size_t off, size_t len)
{
    assert(b->len == 0 && map && off + len < cap && map[off + len] == '\0');
    if (len > b->limit)
        return -EMSGSIZE;
    storage_free(b);
    b->data = map;
    b->cap = cap;
    b->off = off;
    b->len = len;
    b->mapped = true;
    buf_assert_nul(b);
    return 0;
}

char *cn_buf_steal(cn_buf *b, size_t *len)
{
    char *s;
    if (b->mapped) { /* the caller frees with free(): a copy, and the mapping goes */
        s = malloc(b->len + 1);
        if (!s)
            return NULL;
        memcpy(s, cn_buf_ptr(b), b->len + 1);
        if (len)
            *len = b->len;
        cn_buf_free(b);
        return s;
    }
    if (!b->data) {
        s = strdup("");
        if (len)
            *len = 0;
        return s;
    }
    if (b->off)
        memmove(b->data, b->data + b->off, b->len + 1);
    s = b->data;
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->off = b->cap = 0;
    return s;
}
