/* util.c — small shared utilities: durations, sizes, base64, clock, errno names, a thread's
 * alternate signal stack. */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "cn_common.h"

int cn_common_parse_duration(const char *s, int64_t *ns)
{
    if (!s || !*s)
        return -EINVAL;
    /* Digits and at most one '.', then the unit: strtod alone would accept "inf", hex,
     * exponents and signs, which the one syntax (docs/cli.md "Durations") leaves out. */
    size_t i = 0, digits = 0, dots = 0;
    for (; s[i] && (s[i] == '.' || (s[i] >= '0' && s[i] <= '9')); i++) {
        if (s[i] == '.')
            dots++;
        else
            digits++;
    }
    if (digits == 0 || dots > 1 || i > 40)
        return -EINVAL;
    char num[48];
    memcpy(num, s, i);
    num[i] = '\0';
    double v = strtod(num, NULL);
    const char *u = s + i;
    double mul;
    if (!*u || !strcmp(u, "s"))
        mul = 1e9;
    else if (!strcmp(u, "ms"))
        mul = 1e6;
    else if (!strcmp(u, "us"))
        mul = 1e3;
    else if (!strcmp(u, "ns"))
        mul = 1;
    else if (!strcmp(u, "m") || !strcmp(u, "min"))
        mul = 60e9;
    else if (!strcmp(u, "h"))
        mul = 3600e9;
    else
        return -EINVAL;
    double r = v * mul;
    if (!isfinite(r) || r >= 9.2e18)
        return -EINVAL;
    *ns = (int64_t)llround(r);
    return 0;
}

int cn_common_parse_size(const char *s, uint64_t *bytes)
{
    if (!s || *s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -EINVAL;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    else if (*end)
        return -EINVAL;
    if (shift) {
        end++;
        if (!strcmp(end, "iB") || !strcmp(end, "B"))
            end += strlen(end);
        if (*end)
            return -EINVAL;
    }
    if (shift && v > (UINT64_MAX >> shift))
        return -EINVAL;
    *bytes = (uint64_t)v << shift;
    return 0;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *cn_common_base64_encode(const void *data, size_t len)
{
    const unsigned char *p = data;
    if (len > (SIZE_MAX - 1) / 4 * 3 - 3)
        return NULL;
    char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = b64[v >> 18];
        *o++ = b64[(v >> 12) & 63];
        *o++ = b64[(v >> 6) & 63];
        *o++ = b64[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);
        *o++ = b64[v >> 18];
        *o++ = b64[(v >> 12) & 63];
        *o++ = i + 1 < len ? b64[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    assert((size_t)(o - out) == (len + 2) / 3 * 4); /* exactly what was allocated */
    *o = '\0';
    return out;
}

static int b64_val(char c)
{
    const char *p = c ? strchr(b64, c) : NULL;
    return p ? (int)(p - b64) : -1;
}

void *cn_common_base64_decode(const char *s, size_t slen, size_t *len)
{
    if (slen % 4) {
        errno = EINVAL;
        return NULL;
    }
    unsigned char *out = malloc(slen / 4 * 3 + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < slen; i += 4) {
        int a = b64_val(s[i]), b = b64_val(s[i + 1]);
        bool last = i + 4 == slen;
        int c = (last && s[i + 2] == '=') ? -2 : b64_val(s[i + 2]);
        int d = (last && s[i + 3] == '=') ? -2 : b64_val(s[i + 3]);
        if (a < 0 || b < 0 || c == -1 || d == -1 || (c == -2 && d != -2))
            goto bad;
        *o++ = (unsigned char)(a << 2 | b >> 4);
        if (c >= 0)
            *o++ = (unsigned char)((b & 15) << 4 | c >> 2);
        if (d >= 0)
            *o++ = (unsigned char)((c & 3) << 6 | d);
    }
    assert((size_t)(o - out) <= slen / 4 * 3); /* within the allocation */
    *len = (size_t)(o - out);
    return out;
bad:
    free(out);
    errno = EINVAL;
    return NULL;
}

int64_t cn_common_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct timespec cn_common_deadline(clockid_t clk, int64_t ns)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    ns = ns > 0 ? ns : 0;
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec += (long)(ns % 1000000000);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

const char *cn_common_errno_name(int err)
{
    const char *n = strerrorname_np(err);
    return n ? n : "E?";
}

void cn_unwind_outcomes_add(cn_unwind_outcomes *sum, const cn_unwind_outcomes *x)
{
    sum->complete += x->complete;
    sum->truncated_stack += x->truncated_stack;
    sum->no_cfi += x->no_cfi;
    sum->read_fault += x->read_fault;
    sum->other += x->other;
}

/* 64 KiB: room for backtrace() and dladdr() (backtrace_symbols_fd) in the handler, well
 * above MINSIGSTKSZ. */
#define ALTSTACK_SIZE (64 * 1024)

void *cn_common_altstack_new(void)
{
    stack_t old;
    if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE))
        return NULL;
    void *p = mmap(NULL, ALTSTACK_SIZE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    stack_t ss = {.ss_sp = p, .ss_size = ALTSTACK_SIZE};
    if (sigaltstack(&ss, NULL) < 0) {
        munmap(p, ALTSTACK_SIZE);
        return NULL;
    }
    return p;
}

void cn_common_altstack_free(void *stack)
{
    if (!stack)
        return;
    stack_t cur, off = {.ss_flags = SS_DISABLE};
    /* Only the stack this thread still uses is disabled; a stack is unmapped either way. */
    if (sigaltstack(NULL, &cur) == 0 && cur.ss_sp == stack)
        sigaltstack(&off, NULL);
    munmap(stack, ALTSTACK_SIZE);
}
