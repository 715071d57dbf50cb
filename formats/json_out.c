/* json_out.c — JSON strings and numbers for every writer of formats/ (json_out.h), and
 * the same string policy into a cn_buf for canopyd's replies (cn_fmt_json_string).
 *
 * Both are on the writers' hot path (a tree or a speedscope file holds hundreds of
 * thousands of names and numbers): runs of plain bytes go out in one fwrite, and
 * integers are formatted by hand rather than through printf.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cn_fmt.h"
#include "json_out.h"

/* The policy of json_out.h for the byte(s) at p, one of which is not plain: writes their
 * JSON form (at most CN_FMT__JSON_ESC_MAX bytes) at esc and returns its length; *used
 * receives how many input bytes it stands for. */
#define CN_FMT__JSON_ESC_MAX 6
static size_t escape_at(const unsigned char *p, const unsigned char *end, char *esc, size_t *used)
{
    static const char hex[] = "0123456789abcdef";
    unsigned c = *p;
    size_t len;

    *used = 1;
    if (c == '"' || c == '\\') {
        esc[0] = '\\';
        esc[1] = (char)c;
        return 2;
    }
    if (c == '\n' || c == '\t' || c == '\r') { /* short forms: text is full of newlines */
        esc[0] = '\\';
        esc[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
        return 2;
    }
    if (c < 0x20) {
        memcpy(esc, "\\u00", 4);
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 15];
        return 6;
    }
    len = cn_utf8_seq(p, (size_t)(end - p)); /* common's UTF-8 rule (cn_common.h) */
    if (len == 0) {
        memcpy(esc, "\xef\xbf\xbd", 3); /* U+FFFD for a byte that is not UTF-8 */
        return 3;
    }
    memcpy(esc, p, len);
    *used = len;
    return len;
}

int cn_fmt__json_strn(FILE *out, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    const unsigned char *end = p + (s ? n : 0);
    char esc[CN_FMT__JSON_ESC_MAX];

    if (fputc('"', out) == EOF)
        return -EIO;
    while (p < end) {
        /* Runs of plain bytes (nearly every name) in one write. */
        const unsigned char *run = p;
        while (p < end && cn_fmt__json_plain(*p))
            p++;
        if (p > run && fwrite(run, 1, (size_t)(p - run), out) != (size_t)(p - run))
            return -EIO;
        if (p == end)
            break;
        size_t used, len = escape_at(p, end, esc, &used);
        if (fwrite(esc, 1, len, out) != len)
            return -EIO;
        p += used;
    }
    return fputc('"', out) == EOF ? -EIO : 0;
}

int cn_fmt_json_string(cn_buf *out, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    const unsigned char *end = p + (s ? n : 0);
    /* Room for the longest escape and the closing quote, checked once per input byte. */
    const size_t slack = CN_FMT__JSON_ESC_MAX + 2;
    size_t room, w = 0;
    char *o;

    /* Most text needs few escapes: reserve its length and a little more, then grow by what
     * is left whenever the room runs short. */
    errno = 0;
    o = cn_buf_space(out, n + n / 8 + slack, &room);
    if (!o || room < slack)
        return errno == ENOMEM ? -ENOMEM : -EMSGSIZE;
    o[w++] = '"';
    while (p < end) {
        if (room - w < slack) {
            size_t left = (size_t)(end - p);
            cn_buf_commit(out, w);
            errno = 0;
            o = cn_buf_space(out, left + left / 8 + slack, &room);
            if (!o || room < slack)
                return errno == ENOMEM ? -ENOMEM : -EMSGSIZE;
            w = 0;
        }
        if (cn_fmt__json_plain(*p)) {
            o[w++] = (char)*p++;
            continue;
        }
        size_t used;
        w += escape_at(p, end, o + w, &used);
        p += used;
    }
    o[w++] = '"';
    cn_buf_commit(out, w);
    return 0;
}

int cn_fmt__json_str(FILE *out, const char *s)
{
    return cn_fmt__json_strn(out, s, s ? strlen(s) : 0);
}

size_t cn_fmt__put_uint(char *buf, uint64_t u)
{
    char tmp[24];
    size_t n = 0, k = 0;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (n)
        buf[k++] = tmp[--n];
    return k;
}

size_t cn_fmt__json_num_fmt(char *buf, double v)
{
    if (!isfinite(v))
        v = 0;
    if (fabs(v) < 9007199254740992.0 && v == floor(v)) {
        long long i = (long long)v;
        size_t k = 0;
        if (i < 0)
            buf[k++] = '-';
        return k + cn_fmt__put_uint(buf + k, i < 0 ? 0ULL - (uint64_t)i : (uint64_t)i);
    }
    int n = snprintf(buf, CN_FMT__JSON_NUM_MAX, "%.12g", v);
    return n > 0 && n < CN_FMT__JSON_NUM_MAX ? (size_t)n : 0;
}

int cn_fmt__json_num(FILE *out, double v)
{
    char buf[CN_FMT__JSON_NUM_MAX];
    size_t n = cn_fmt__json_num_fmt(buf, v);
    return fwrite(buf, 1, n, out) == n ? 0 : -EIO;
}

int cn_fmt__json_us(FILE *out, int64_t ns)
{
    char buf[CN_FMT__JSON_NUM_MAX];
    size_t k = 0;
    uint64_t u = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    if (ns < 0)
        buf[k++] = '-';
    k += cn_fmt__put_uint(buf + k, u / 1000);
    if (u % 1000) {
        unsigned frac = (unsigned)(u % 1000);
        buf[k++] = '.';
        buf[k++] = (char)('0' + frac / 100);
        buf[k++] = (char)('0' + frac / 10 % 10);
        buf[k++] = (char)('0' + frac % 10);
    }
    return fwrite(buf, 1, k, out) == k ? 0 : -EIO;
}
