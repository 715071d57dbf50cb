/* text.c — the two text policies of cn_common.h: the UTF-8 rule every string canopy sends
 * follows (protocol replies, JSON documents), and the terminal rule for text shown to a
 * person (tables, text trees, messages).
 *
 * Names come from places an attacker controls: a process's comm, a session's name, a
 * function name in someone's binary. Neither policy ever fails on them: the protocol rule
 * turns whatever is not UTF-8 into U+FFFD, so a reply can always be built; the terminal rule
 * also spells control characters out, so a name can neither move the cursor, retitle the
 * window, clear the screen nor print a fake row. Both read one character at a time through
 * cn_utf8_seq, so they agree on what a character is.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cn_common.h"

/* U+FFFD REPLACEMENT CHARACTER in UTF-8. */
static const char fffd[] = "\xef\xbf\xbd";

size_t cn_utf8_seq(const void *s, size_t avail)
{
    const unsigned char *p = s;
    unsigned c, cp, min;
    size_t len;

    if (avail == 0)
        return 0;
    c = p[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, min = 0x10000;
    else
        return 0; /* a continuation byte, 0xc0/0xc1 (always overlong) or 0xf5..0xff */
    if (len > avail)
        return 0;
    cp = c & (0x3fu >> (len - 1));
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

size_t cn_utf8_cut(const char *s, size_t n, size_t max)
{
    if (n <= max)
        return n;
    /* A character crosses max only if its lead byte is among the 3 bytes before it. */
    for (size_t back = 1; back <= 3 && back <= max; back++) {
        size_t at = max - back;
        if (((unsigned char)s[at] & 0xc0) == 0x80)
            continue; /* a continuation byte: look further back */
        size_t len = cn_utf8_seq(s + at, n - at);
        return len > back ? at : max;
    }
    return max;
}

size_t cn_utf8_clean(char *dst, const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        size_t len = s[i] ? cn_utf8_seq(s + i, n - i) : 0;
        if (len == 0) {
            memcpy(dst + w, fffd, 3);
            w += 3;
            i++;
            continue;
        }
        memcpy(dst + w, s + i, len);
        w += len;
        i += len;
    }
    dst[w] = '\0';
    return w;
}

/* ---- the terminal rule ---------------------------------------------------------------- */

/* The terminal form of the character at p (before end): writes it at out (at most
 * CN_TERM_ESC_MAX bytes, no NUL) and returns its length; *used receives the input bytes it
 * stands for. */
#define CN_TERM_ESC_MAX 6
static size_t term_char(const unsigned char *p, const unsigned char *end, char *out, size_t *used)
{
    static const char hex[] = "0123456789abcdef";
    unsigned c = p[0];
    size_t len;

    *used = 1;
    if (c < 0x20 || c == 0x7f) { /* C0 and DEL: \x1b */
        out[0] = '\\';
        out[1] = 'x';
        out[2] = hex[c >> 4];
        out[3] = hex[c & 15];
        return 4;
    }
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    len = cn_utf8_seq(p, (size_t)(end - p));
    if (len == 0) {
        memcpy(out, fffd, 3);
        return 3;
    }
    *used = len;
    if (len == 2 && c == 0xc2 && p[1] < 0xa0) { /* C1, U+0080..U+009F: \u0085 */
        memcpy(out, "\\u00", 4);
        out[4] = hex[p[1] >> 4];
        out[5] = hex[p[1] & 15];
        return 6;
    }
    memcpy(out, p, len);
    return len;
}

size_t cn_term_plain_len(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] >= 0x20 && p[i] < 0x7f) {
            i++;
            continue;
        }
        size_t len = p[i] >= 0x80 ? cn_utf8_seq(p + i, n - i) : 0;
        if (len == 0 || (len == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0))
            break;
        i += len;
    }
    return i;
}

size_t cn_term_escape(char *dst, size_t cap, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    const unsigned char *end = p + (s ? n : 0);
    char one[CN_TERM_ESC_MAX];
    size_t w = 0;

    if (cap == 0)
        return 0;
    while (p < end) {
        size_t used, len = term_char(p, end, one, &used);
        if (w + len >= cap) /* never half a character or half an escape */
            break;
        memcpy(dst + w, one, len);
        w += len;
        p += used;
    }
    dst[w] = '\0';
    return w;
}

const char *cn_term_str(char *buf, size_t cap, const char *s)
{
    cn_term_escape(buf, cap, s, s ? strlen(s) : 0);
    return buf;
}

char *cn_term_dup(const char *s, size_t n)
{
    size_t cap;
    char *out;

    if (!s)
        s = "", n = 0;
    cap = CN_TERM_ESC_MAX * n + 1; /* the longest form of each byte, and the NUL */
    if (n > (SIZE_MAX - 1) / CN_TERM_ESC_MAX || !(out = malloc(cap))) {
        errno = ENOMEM;
        return NULL;
    }
    cn_term_escape(out, cap, s, n);
    return out;
}

int cn_term_fputs(const char *s, FILE *out)
{
    size_t n = s ? strlen(s) : 0;
    if (cn_term_plain_len(s, n) == n)
        return n && fwrite(s, 1, n, out) != n ? -EIO : 0;
    char *t = cn_term_dup(s, n);
    if (!t)
        return -ENOMEM;
    int r = fputs(t, out) < 0 ? -EIO : 0;
    free(t);
    return r;
}
