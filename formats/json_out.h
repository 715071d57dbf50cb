/* json_out.h — the one JSON string writer and the one JSON number writer every
 * JSON-producing writer of formats/ uses (tree JSON, diff JSON, speedscope, Chrome trace,
 * timeline JSON); json_out.c implements them.
 *
 * Strings: names come from binaries and scripts and may be any bytes. One policy, common's
 * UTF-8 rule (cn_common.h, cn_utf8_seq): a byte that does not start a valid UTF-8 sequence
 * (overlong forms, surrogates and code points above U+10FFFF are invalid too) becomes U+FFFD; '"'
 * and '\\' are escaped with a backslash, newline, tab and carriage return as \n, \t, \r (rendered
 * text embedded in canopyd's replies is full of newlines) and other control characters (< 0x20) as
 * \u00XX; everything else is copied. The output is therefore always valid JSON (RFC
 * 8259) whatever the input.
 * Numbers: integral values below 2^53 in magnitude are written as JSON integers (sample
 * counts read as `3`, not `3.0`), others with 12 significant digits (display precision,
 * not bits: "%.12g"); NaN and infinities, which JSON cannot spell, as 0.
 * Writers never recurse and never allocate. Names carry the cn_fmt__ prefix. The public
 * cn_fmt_json_string (cn_fmt.h) writes strings with the same policy into a cn_buf.
 */
#ifndef CN_FMT_JSON_OUT_H
#define CN_FMT_JSON_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Room cn_fmt__json_num_fmt needs (sign, 17 digits, exponent, NUL). */
#define CN_FMT__JSON_NUM_MAX 32

/* Writes s as a JSON string literal, quotes included (NULL as ""). 0 or -EIO. */
int cn_fmt__json_str(FILE *out, const char *s);
/* The same for the n bytes at s (NUL bytes included, as \u0000). 0 or -EIO. */
int cn_fmt__json_strn(FILE *out, const char *s, size_t n);
/* True when byte c goes out as it is and alone: printable ASCII other than '"' and '\\'.
 * (Writers with a fast path copy runs of such bytes themselves.) */
static inline bool cn_fmt__json_plain(unsigned char c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* Formats v as a JSON number at buf (CN_FMT__JSON_NUM_MAX bytes); returns the length
 * (no NUL is written). */
size_t cn_fmt__json_num_fmt(char *buf, double v);
/* Writes u in decimal at buf (at least 20 bytes of room; no NUL) and returns the length:
 * printf by hand, since writers print hundreds of thousands of numbers and vfprintf was
 * their top cost. */
size_t cn_fmt__put_uint(char *buf, uint64_t u);
/* Writes v as a JSON number. 0 or -EIO. */
int cn_fmt__json_num(FILE *out, double v);
/* Writes nanoseconds as microseconds, exactly: an integer when ns is a multiple of 1000,
 * else with three decimals (Chrome trace and timeline JSON times). 0 or -EIO. */
int cn_fmt__json_us(FILE *out, int64_t ns);

#endif /* CN_FMT_JSON_OUT_H */
