/* lines.c — instruction → line, over the three line-table formats of CPython 3.8–3.13
 * (Objects/lnotab_notes.txt and Objects/locations.md of each version). Pure functions over a
 * byte string copied from the target: every read is bounded by its length, corrupt input gives
 * 0 ("no line"), never a read past the end. */
#include <stdint.h>

#include "int_internal.h"

/* 3.8, 3.9: (byte delta, signed line delta) pairs; the line of byte offset addr is the line
 * after every pair whose running offset is ≤ addr. */
static int line_lnotab(const uint8_t *p, size_t n, int first, int64_t addr)
{
    int64_t a = 0;
    int line = first;
    for (size_t i = 0; i + 1 < n; i += 2) {
        a += p[i];
        if (a > addr)
            break;
        line += (int8_t)p[i + 1];
    }
    return line > 0 ? line : 0;
}

/* 3.10: pairs of (byte delta, signed line delta, -128 = no line) describing consecutive ranges
 * [start, end) of byte offsets. */
static int line_310(const uint8_t *p, size_t n, int first, int64_t addr)
{
    int64_t start, end = 0;
    int computed = first, line = -1;
    for (size_t i = 0; i + 1 < n; i += 2) {
        start = end;
        end += p[i];
        int8_t ld = (int8_t)p[i + 1];
        if (ld == -128) {
            line = -1;
        } else {
            computed += ld;
            line = computed;
        }
        if (start <= addr && addr < end)
            return line > 0 ? line : 0;
    }
    return 0;
}

/* An unsigned varint of the location table: 6 bits a byte, bit 6 = more. -1 past the end. */
static int64_t varint(const uint8_t *p, size_t n, size_t *i)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 36; shift += 6) {
        if (*i >= n)
            return -1;
        uint8_t b = p[(*i)++];
        v |= (uint64_t)(b & 63) << shift;
        if (!(b & 64))
            return (int64_t)v;
    }
    return -1;
}

static int svarint(const uint8_t *p, size_t n, size_t *i, int *out)
{
    int64_t u = varint(p, n, i);
    if (u < 0)
        return -1;
    *out = (u & 1) ? -(int)(u >> 1) : (int)(u >> 1);
    return 0;
}

/* 3.11+: entries of one start byte (bit 7 set, code in bits 3–6, length − 1 code units in
 * bits 0–2) and the code's operands; the line moves by a delta per entry. */
static int line_311(const uint8_t *p, size_t n, int first, int64_t instr)
{
    int64_t addr = 0;
    int line = first;
    size_t i = 0;
    while (i < n) {
        uint8_t b = p[i++];
        if (!(b & 0x80))
            return 0;
        int code = (b >> 3) & 15, len = (b & 7) + 1, ld = 0;
        bool has_line = true;
        switch (code) {
        case 15: /* no location */
            has_line = false;
            break;
        case 14: /* long form: line delta, end line delta, column + 1, end column + 1 */
            if (svarint(p, n, &i, &ld) < 0 || varint(p, n, &i) < 0 || varint(p, n, &i) < 0 ||
                varint(p, n, &i) < 0)
                return 0;
            break;
        case 13: /* no column */
            if (svarint(p, n, &i, &ld) < 0)
                return 0;
            break;
        case 10:
        case 11:
        case 12: /* one line, line delta = code − 10, two column bytes */
            ld = code - 10;
            i += 2;
            break;
        default: /* short form: same line, one column byte */
            i += 1;
            break;
        }
        if (i > n)
            return 0;
        if (has_line)
            line += ld;
        if (addr <= instr && instr < addr + len)
            return has_line && line > 0 ? line : 0;
        addr += len;
    }
    return 0;
}

int cn_int__line(int format, const uint8_t *p, size_t n, int first, int32_t instr)
{
    if (!p || instr < 0)
        return 0;
    switch (format) {
    case CN_INT__LNOTAB:
        return line_lnotab(p, n, first, (int64_t)instr * 2);
    case CN_INT__LT310:
        return line_310(p, n, first, (int64_t)instr * 2);
    case CN_INT__LOC311:
        return line_311(p, n, first, instr);
    default:
        return 0;
    }
}
