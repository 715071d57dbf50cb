/* fuzz_canopy_file.c — libFuzzer target for the .canopy loader with hostile sizes, along
 * the path canopyd takes for a saved session (daemon/store.c): the file is read with
 * cn_fmt_import_file (gzip bound, cn_agg_canopy_read) and restored with
 * cn_live_session_load (its meta keys), then queried and freed.
 *
 * Input: one byte F (bit 0: gzip the file; F >> 1: the number of patches, at most 127),
 * then F >> 1 patches of 3 bytes (line, field, value), then the text of a .canopy file.
 * A patch replaces field `field` (blank-separated; one past the last appends) of line
 * `line` (modulo the line count) by a hostile number from the table below (value's low
 * 4 bits) — counts, ids, depths, string lengths, deltas and weights at and around every
 * limit — or, for value >= 0xf0, duplicates or drops the line. Seeds are real .canopy
 * texts; the patches let the fuzzer reach sizes that byte mutations rarely produce. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "cn_agg.h"
#include "cn_fmt.h"
#include "cn_live.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const hostile[16] = {
    "0",
    "-1",
    "1",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "-2147483648",
    "4294967295",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "99999999999999999999999",
    "1e308",
    "nan",
    "-0",
};

/* The text with the patches applied, in a malloc'ed buffer (*len bytes), or NULL. */
static char *patched(const uint8_t *patches, size_t npatch, const char *text, size_t tlen,
                     size_t *len)
{
    /* Lines as (start, length) into a working copy rebuilt per patch: small inputs. */
    char *cur = malloc(tlen + 1);
    if (!cur)
        return NULL;
    memcpy(cur, text, tlen);
    size_t clen = tlen;
    /* Duplicating a last line without its newline doubles it: a bound keeps the harness,
     * not the loader, from being what is slow. */
    for (size_t k = 0; k < npatch && clen < (64u << 10); k++) {
        size_t nlines = 1;
        for (size_t i = 0; i < clen; i++)
            nlines += cur[i] == '\n';
        size_t want = patches[3 * k] % nlines, line = 0, ls = 0;
        for (size_t i = 0; i < clen && line < want; i++)
            if (cur[i] == '\n')
                line++, ls = i + 1;
        size_t le = ls;
        while (le < clen && cur[le] != '\n')
            le++;
        uint8_t field = patches[3 * k + 1], v = patches[3 * k + 2];
        size_t fs = ls, fe;
        for (uint8_t f = 0; f < field && fs < le; f++) { /* to the start of field `field` */
            while (fs < le && cur[fs] != ' ')
                fs++;
            if (fs < le)
                fs++;
        }
        fe = fs;
        while (fe < le && cur[fe] != ' ')
            fe++;
        const char *rep = hostile[v & 15];
        size_t rlen = strlen(rep);
        if (v >= 0xf8) { /* drop the line */
            fs = ls, fe = le < clen ? le + 1 : le, rep = "", rlen = 0;
        } else if (v >= 0xf0) { /* duplicate it */
            fs = fe = ls, rep = cur + ls, rlen = le < clen ? le - ls + 1 : le - ls;
        } else if (fs >= le && fs > ls) { /* append a field */
            fs = fe = le;
        }
        char *next = malloc(clen - (fe - fs) + rlen + 2);
        if (!next) {
            free(cur);
            return NULL;
        }
        memcpy(next, cur, fs);
        size_t n = fs;
        if (fs == le && fe == le && fs > ls && v < 0xf0)
            next[n++] = ' ';
        memcpy(next + n, rep, rlen);
        n += rlen;
        memcpy(next + n, cur + fe, clen - fe);
        n += clen - fe;
        free(cur);
        cur = next;
        clen = n;
    }
    *len = clen;
    return cur;
}

/* Writes buf to path, gzip-compressed when gz. 0 or -1. */
static int write_file(const char *path, const char *buf, size_t len, bool gz)
{
    if (!gz) {
        FILE *f = fopen(path, "wbe");
        if (!f)
            return -1;
        size_t w = len ? fwrite(buf, 1, len, f) : 0;
        return fclose(f) == 0 && w == len ? 0 : -1;
    }
    gzFile g = gzopen(path, "wb");
    if (!g)
        return -1;
    int w = len ? gzwrite(g, buf, (unsigned)len) : 0;
    return gzclose(g) == Z_OK && (size_t)w == len ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t npatch = data[0] >> 1;
    if (size < 1 + 3 * npatch)
        return 0;
    const char *text = (const char *)data + 1 + 3 * npatch;
    size_t len = 0;
    char *buf = patched(data + 1, npatch, text, size - 1 - 3 * npatch, &len);
    if (!buf)
        return 0;
    char path[64];
    snprintf(path, sizeof(path), "/tmp/fuzz_canopy_file.%d.canopy", (int)getpid());
    if (write_file(path, buf, len, data[0] & 1) == 0) {
        cn_agg_profile *p = NULL;
        cn_live_session *s = NULL;
        cn_err err;
        if (cn_fmt_import_file(path, &p, &err) == 0 &&
            cn_live_session_load(p, path, &s, &err) == 0) { /* takes p */
            cn_live_session_info info;
            cn_live_session_info_get(s, &info);
            cn_fmt_spec spec;
            cn_fmt_spec_init(&spec);
            FILE *null = fopen("/dev/null", "we");
            if (null) {
                (void)cn_fmt_render(cn_live_session_profile(s), &spec, NULL, null, &err);
                fclose(null);
            }
            cn_fmt_spec_clear(&spec);
        }
        cn_live_session_free(s);
    }
    unlink(path);
    free(buf);
    return 0;
}
