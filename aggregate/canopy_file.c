/* canopy_file.c — the lossless `.canopy` session file (docs/canopy-format.md).
 *
 * A .canopy file is a gzip stream of a line-oriented text: a magic line with the format
 * version, then one section per table in id order (strings, resources, funcs, frames with
 * their func chains, stacks, threads, processes, metadata, the rename map, samples with
 * times, weights, threads and timeline stacks, the retention accumulator), then `end`.
 * Every row refers to earlier rows by id only, so the reader rebuilds the profile through
 * the same interning calls that built it and checks that each call returns the id the file
 * names: the result is the same profile, id for id, and every query gives the same answer.
 * What no public call can express (inline chains after symbolication, the rename map, the
 * accumulator) is written into the tables directly, after the same checks.
 * Numbers are decimal; doubles are printed with 17 significant digits (exact round trip);
 * sample times are deltas from the previous sample.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "agg_internal.h"

/* The first line of a .canopy file, followed by " VERSION\n". */
#define CANOPY_MAGIC "canopy-profile"

/* Version 2 adds each frame's symbol func (§4.5 --no-inline); version 3 the processes'
 * cgroup paths (a `cgroups` section after `processes`). A profile is written in the
 * lowest version that holds it (no cgroups: 2; nor symbol funcs: 1), so older readers
 * still read what they can represent; all three are read. */
#define CANOPY_FILE_VERSION 3
#define OUT_CHUNK           (256 * 1024)
#define MAX_CHAIN           65535 /* frame_depth is a uint16_t */

/* ---- writer ----------------------------------------------------------------------- */

typedef struct wr {
    FILE *out;
    z_stream zs;
    char *buf;
    size_t len;
    unsigned char *zbuf;
    int rc;
} wr;

/* Compresses buf[0..len) (and finishes the stream when finish) into out. */
static void wr_flush(wr *w, bool finish)
{
    if (w->rc < 0)
        return;
    w->zs.next_in = (unsigned char *)w->buf;
    w->zs.avail_in = (uInt)w->len;
    int z;
    do {
        w->zs.next_out = w->zbuf;
        w->zs.avail_out = OUT_CHUNK;
        z = deflate(&w->zs, finish ? Z_FINISH : Z_NO_FLUSH);
        size_t n = OUT_CHUNK - w->zs.avail_out;
        if (z == Z_STREAM_ERROR) {
            w->rc = -EIO;
            return;
        }
        if (n && fwrite(w->zbuf, 1, n, w->out) != n) {
            w->rc = errno ? -errno : -EIO; /* ENOSPC says more than EIO */
            return;
        }
    } while (w->zs.avail_out == 0 || (finish && z != Z_STREAM_END));
    w->len = 0;
}

__attribute__((format(printf, 2, 3))) static void wr_printf(wr *w, const char *fmt, ...)
{
    if (w->rc < 0)
        return;
    for (int attempt = 0; attempt < 2; attempt++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(w->buf + w->len, OUT_CHUNK - w->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            w->rc = -EINVAL;
            return;
        }
        if ((size_t)n < OUT_CHUNK - w->len) {
            w->len += (size_t)n;
            return;
        }
        wr_flush(w, false);
    }
    w->rc = -EOVERFLOW; /* one line longer than the buffer: only strings are, see below */
}

/* Writes v in decimal, then sep (' ' or '\n'): the tables' numbers, without vsnprintf,
 * whose reading of the format was half of a checkpoint writer's own CPU during a build
 * (docs/perf-daemon.md, fourteenth session). The same bytes as "%" PRId64. */
static void wr_int(wr *w, int64_t v, char sep)
{
    if (w->rc < 0)
        return;
    if (OUT_CHUNK - w->len < 24) {
        wr_flush(w, false);
        if (w->rc < 0)
            return;
    }
    char digits[20];
    size_t n = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        w->buf[w->len++] = '-';
    while (n)
        w->buf[w->len++] = digits[--n];
    w->buf[w->len++] = sep;
}

/* Writes x as "%.17g" does, then sep: a whole number below 1e17 (every CPU sample's
 * weight) through wr_int, which gives the same digits. */
static void wr_double(wr *w, double x, char sep)
{
    if (fabs(x) < 1e17 && x == (double)(int64_t)x && !(x == 0 && signbit(x)))
        wr_int(w, (int64_t)x, sep);
    else
        wr_printf(w, "%.17g%c", x, sep);
}

/* Writes one string, escaped (\\, \n, \r, \0), as its own line. */
static void wr_string(wr *w, const char *s, size_t n)
{
    for (size_t i = 0; i < n && w->rc == 0; i++) {
        if (OUT_CHUNK - w->len < 4)
            wr_flush(w, false);
        char c = s[i];
        if (c == '\\' || c == '\n' || c == '\r' || c == '\0') {
            w->buf[w->len++] = '\\';
            w->buf[w->len++] = c == '\\' ? '\\' : c == '\n' ? 'n' : c == '\r' ? 'r' : '0';
        } else {
            w->buf[w->len++] = c;
        }
    }
    wr_printf(w, "\n");
}

static void write_tables(wr *w, const cn_agg_profile *p)
{
    bool sym_funcs = false;
    size_t named = 0, cgroups = 0;
    for (size_t i = 0; i < p->n_frame && !sym_funcs; i++)
        sym_funcs = p->frame_sym_func[i] >= 0;
    for (size_t i = 0; i < p->n_proc; i++) {
        named += p->proc_name[i] >= 0;
        cgroups += p->proc_cgroup[i] >= 0;
    }
    int version = cgroups ? 3 : sym_funcs ? 2 : 1;
    sym_funcs = version >= 2; /* versions 2 and 3 give every frame its column (-1: none) */
    wr_printf(w, "%s %d\nunit %d\nscale %.17g\n", CANOPY_MAGIC, version, (int)p->unit, p->scale);
    wr_printf(w, "strings %zu\n", p->n_str);
    for (size_t i = 0; i < p->n_str; i++)
        wr_string(w, p->str[i], p->str_len[i]);
    wr_printf(w, "resources %zu\n", p->n_res);
    for (size_t i = 0; i < p->n_res; i++) {
        wr_int(w, p->res_name[i], ' ');
        wr_int(w, p->res_identity[i], ' ');
        wr_int(w, p->res_path[i], ' ');
        wr_int(w, p->res_kind[i], '\n');
    }
    wr_printf(w, "funcs %zu\n", p->n_func);
    for (size_t i = 0; i < p->n_func; i++) {
        wr_int(w, p->func_name[i], ' ');
        wr_int(w, p->func_res[i], ' ');
        wr_int(w, p->func_file[i], ' ');
        wr_int(w, p->func_line[i], '\n');
    }
    wr_printf(w, "frames %zu\n", p->n_frame);
    for (size_t i = 0; i < p->n_frame; i++) {
        wr_int(w, p->frame_key_func[i], ' ');
        wr_int(w, p->frame_res[i], ' ');
        wr_int(w, p->frame_addr[i], ' ');
        wr_int(w, p->frame_line[i], ' ');
        unsigned depth = p->frame_depth[i];
        wr_int(w, depth, depth || sym_funcs ? ' ' : '\n');
        for (unsigned d = 0; d < depth; d++)
            wr_int(w, p->chain_pool[p->frame_chain[i] + d],
                   d + 1 < depth || sym_funcs ? ' ' : '\n');
        if (sym_funcs)
            wr_int(w, p->frame_sym_func[i], '\n');
    }
    wr_printf(w, "stacks %zu\n", p->n_stack);
    for (size_t i = 0; i < p->n_stack; i++) {
        wr_int(w, p->stack_prefix[i], ' ');
        wr_int(w, p->stack_frame[i], '\n');
    }
    wr_printf(w, "threads %zu\n", p->n_thr);
    for (size_t i = 0; i < p->n_thr; i++) {
        wr_int(w, p->thr_pid[i], ' ');
        wr_int(w, p->thr_tid[i], ' ');
        wr_int(w, p->thr_name[i], '\n');
    }
    wr_printf(w, "processes %zu\n", named);
    for (size_t i = 0; i < p->n_proc; i++)
        if (p->proc_name[i] >= 0)
            wr_printf(w, "%" PRId32 " %" PRId32 "\n", p->proc_pid[i], p->proc_name[i]);
    if (version >= 3)
        wr_printf(w, "cgroups %zu\n", cgroups);
    for (size_t i = 0; version >= 3 && i < p->n_proc; i++)
        if (p->proc_cgroup[i] >= 0)
            wr_printf(w, "%" PRId32 " %" PRId32 "\n", p->proc_pid[i], p->proc_cgroup[i]);
    wr_printf(w, "meta %zu\n", p->n_meta);
    for (size_t i = 0; i < p->n_meta; i++)
        wr_printf(w, "%" PRId32 " %" PRId32 "\n", p->meta_key[i], p->meta_val[i]);
    wr_printf(w, "renames %zu\n", p->n_rename);
    for (size_t i = 0; i < p->n_rename; i++) {
        int32_t cnt = p->rename_cnt[i];
        wr_int(w, p->rename_old[i], ' ');
        wr_int(w, cnt, cnt > 0 ? ' ' : '\n');
        for (int32_t k = 0; k < cnt; k++)
            wr_int(w, p->rename_pool[p->rename_off[i] + k], k + 1 < cnt ? ' ' : '\n');
    }
}

static void write_samples(wr *w, const cn_agg_profile *p)
{
    int64_t prev = 0;
    wr_printf(w, "samples %zu\n", p->n_sample);
    for (size_t i = 0; i < p->n_sample; i++) {
        /* the delta is computed in unsigned arithmetic: it wraps, and so does the sum */
        int64_t dt = (int64_t)((uint64_t)p->s_time[i] - (uint64_t)prev);
        prev = p->s_time[i];
        int32_t tl = cn_agg_sample_timeline_stack(p, i); /* -1: no path on the timeline */
        wr_int(w, p->s_stack[i], ' ');
        wr_int(w, dt, ' ');
        wr_double(w, cn_agg__weight(p, i), ' ');
        wr_int(w, p->s_thread[i], tl != p->s_stack[i] ? ' ' : '\n');
        if (tl != p->s_stack[i])
            wr_int(w, tl, '\n');
    }
    wr_printf(w, "accumulator %zu\n", p->n_acc);
    for (size_t i = 0; i < p->n_acc; i++) {
        wr_int(w, p->acc_stack[i], ' ');
        wr_int(w, p->acc_thread[i], ' ');
        wr_double(w, p->acc_weight[i], '\n');
    }
    wr_printf(w, "end\n");
}

int cn_agg_write_canopy(const cn_agg_profile *p, FILE *out)
{
    wr w = {.out = out};
    if (!p || !out)
        return -EINVAL;
    w.buf = malloc(OUT_CHUNK);
    w.zbuf = malloc(OUT_CHUNK);
    if (!w.buf || !w.zbuf) {
        w.rc = -ENOMEM;
        goto out;
    }
    /* gzip wrapper (windowBits 16 + 15), fastest level: sessions can be large */
    if (deflateInit2(&w.zs, Z_BEST_SPEED, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        w.rc = -ENOMEM;
        goto out;
    }
    write_tables(&w, p);
    write_samples(&w, p);
    wr_flush(&w, true);
    deflateEnd(&w.zs);
    if (w.rc == 0 && fflush(out) != 0)
        w.rc = errno ? -errno : -EIO;
out:
    free(w.buf);
    free(w.zbuf);
    return w.rc;
}

/* ---- reader ----------------------------------------------------------------------- */

typedef struct rd {
    cn_agg_profile *p;
    const char *name;
    cn_err *err;
    cn_lines it;
    const char *line; /* current line and the parse position in it */
    size_t len, pos;
    char *sbuf; /* unescaped string */
    size_t sbuf_cap;
    int32_t *ints;
    size_t ints_cap;
    int version; /* of the file */
} rd;

__attribute__((format(printf, 2, 3))) static int bad(rd *r, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return cn_err_set(r->err, -EINVAL, "%s:%zu: %s", r->name, r->it.lineno, msg);
}

static int next_line(rd *r)
{
    if (!cn_lines_next(&r->it, &r->line, &r->len))
        return bad(r, "unexpected end of file (truncated .canopy)");
    r->pos = 0;
    return 0;
}

/* Parses the next blank-separated integer of the line in [lo, hi]. */
static int get_int(rd *r, int64_t lo, int64_t hi, int64_t *out)
{
    while (r->pos < r->len && r->line[r->pos] == ' ')
        r->pos++;
    size_t start = r->pos;
    bool neg = r->pos < r->len && r->line[r->pos] == '-';
    if (neg)
        r->pos++;
    uint64_t v = 0;
    size_t digits = 0;
    while (r->pos < r->len && r->line[r->pos] >= '0' && r->line[r->pos] <= '9') {
        if (v > (UINT64_MAX - 9) / 10)
            return bad(r, "number too large");
        v = v * 10 + (uint64_t)(r->line[r->pos++] - '0');
        digits++;
    }
    if (!digits || (r->pos < r->len && r->line[r->pos] != ' '))
        return bad(r, "expected an integer at column %zu", start + 1);
    if ((!neg && v > (uint64_t)INT64_MAX) || (neg && v > (uint64_t)INT64_MAX + 1))
        return bad(r, "number out of range");
    int64_t x = neg ? (int64_t)(0 - v) : (int64_t)v;
    if (x < lo || x > hi)
        return bad(r, "value %" PRId64 " out of range [%" PRId64 ", %" PRId64 "]", x, lo, hi);
    *out = x;
    return 0;
}

static int get_i32(rd *r, int64_t lo, int64_t hi, int32_t *out)
{
    int64_t v;
    int rc = get_int(r, lo, hi, &v);
    if (rc == 0)
        *out = (int32_t)v;
    return rc;
}

static int get_double(rd *r, double *out)
{
    while (r->pos < r->len && r->line[r->pos] == ' ')
        r->pos++;
    char tmp[64];
    size_t n = 0;
    while (r->pos < r->len && r->line[r->pos] != ' ' && n < sizeof(tmp) - 1)
        tmp[n++] = r->line[r->pos++];
    tmp[n] = '\0';
    char *end;
    double v = n ? strtod(tmp, &end) : 0;
    if (!n || *end || !isfinite(v))
        return bad(r, "expected a finite number");
    *out = v;
    return 0;
}

static int end_of_line(rd *r)
{
    while (r->pos < r->len && r->line[r->pos] == ' ')
        r->pos++;
    return r->pos == r->len ? 0 : bad(r, "unexpected text at the end of the line");
}

/* Reads "NAME COUNT" and returns the count (at most max). */
static int section(rd *r, const char *name, size_t max, size_t *count)
{
    int64_t v;
    size_t n = strlen(name);
    int rc = next_line(r);
    if (rc < 0)
        return rc;
    if (r->len <= n || memcmp(r->line, name, n) || r->line[n] != ' ')
        return bad(r, "expected section '%s'", name);
    r->pos = n;
    if ((rc = get_int(r, 0, (int64_t)(max < INT32_MAX ? max : INT32_MAX), &v)) < 0 ||
        (rc = end_of_line(r)) < 0)
        return rc;
    *count = (size_t)v;
    return 0;
}

/* A string id that must exist (or -1 when none_ok). */
static int get_str(rd *r, bool none_ok, int32_t *out)
{
    return get_i32(r, none_ok ? -1 : 0, (int64_t)r->p->n_str - 1, out);
}

static int read_strings(rd *r)
{
    size_t n;
    int rc = section(r, "strings", SIZE_MAX, &n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if ((rc = next_line(r)) < 0)
            return rc;
        if (CN_RESERVE(r->sbuf, r->sbuf_cap, r->len + 1) < 0)
            return -ENOMEM;
        size_t k = 0;
        for (size_t j = 0; j < r->len; j++) {
            char c = r->line[j];
            if (c == '\\') {
                char e = ++j < r->len ? r->line[j] : '?';
                if (e != '\\' && e != 'n' && e != 'r' && e != '0')
                    return bad(r, "bad escape in a string");
                c = e == '\\' ? '\\' : e == 'n' ? '\n' : e == 'r' ? '\r' : '\0';
            }
            r->sbuf[k++] = c;
        }
        int32_t id = cn_agg_string(r->p, r->sbuf, k);
        if (id < 0)
            return id;
        if ((size_t)id != i)
            return bad(r, "string %zu repeats string %d", i, id);
    }
    return rc;
}

static int read_resources(rd *r)
{
    size_t n;
    int rc = section(r, "resources", SIZE_MAX, &n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int32_t name = 0, ident = 0, path = 0, kind = 0;
        if ((rc = next_line(r)) < 0 || (rc = get_str(r, false, &name)) < 0 ||
            (rc = get_str(r, true, &ident)) < 0 || (rc = get_str(r, true, &path)) < 0 ||
            (rc = get_i32(r, 0, CN_AGG_RES_PYTHON, &kind)) < 0 || (rc = end_of_line(r)) < 0)
            return rc;
        int32_t id = cn_agg_resource(r->p, r->p->str[name], cn_agg_string_get(r->p, ident),
                                     cn_agg_string_get(r->p, path), (cn_agg_resource_kind)kind);
        if (id < 0)
            return id;
        if ((size_t)id != i || r->p->res_name[id] != name || r->p->res_identity[id] != ident)
            return bad(r, "resource %zu repeats resource %d", i, id);
    }
    return rc;
}

static int read_funcs(rd *r)
{
    size_t n;
    int rc = section(r, "funcs", SIZE_MAX, &n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int32_t name = 0, res = 0, file = 0, line = 0;
        if ((rc = next_line(r)) < 0 || (rc = get_str(r, false, &name)) < 0 ||
            (rc = get_i32(r, -1, (int64_t)r->p->n_res - 1, &res)) < 0 ||
            (rc = get_str(r, true, &file)) < 0 ||
            (rc = get_i32(r, INT32_MIN, INT32_MAX, &line)) < 0 || (rc = end_of_line(r)) < 0)
            return rc;
        int32_t id = cn_agg_func(r->p, r->p->str[name], res, cn_agg_string_get(r->p, file), line);
        if (id < 0)
            return id;
        if ((size_t)id != i || r->p->func_name[id] != name || r->p->func_file[id] != file)
            return bad(r, "func %zu repeats func %d", i, id);
    }
    return rc;
}

/* Replaces frame f's chain (direct write: symbolication results have no public setter). */
static int set_chain(rd *r, int32_t f, const int32_t *chain, size_t depth)
{
    cn_agg_profile *p = r->p;
    const int32_t *cur = p->chain_pool + p->frame_chain[f];
    if (depth == p->frame_depth[f] && !memcmp(cur, chain, depth * sizeof(*chain)))
        return 0;
    if (p->chain_len + depth > INT32_MAX)
        return -ENOSPC;
    if (CN_RESERVE(p->chain_pool, p->chain_cap, p->chain_len + depth) < 0)
        return -ENOMEM;
    memcpy(p->chain_pool + p->chain_len, chain, depth * sizeof(*chain));
    cn_agg__chain_uses(p, p->frame_chain[f], p->frame_depth[f], -1);
    p->frame_chain[f] = (int32_t)p->chain_len;
    p->frame_depth[f] = (uint16_t)depth;
    p->chain_len += depth;
    cn_agg__chain_uses(p, p->frame_chain[f], depth, 1);
    p->func_generation++;
    return 0;
}

static int read_frames(rd *r)
{
    size_t n;
    int rc = section(r, "frames", SIZE_MAX, &n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int32_t key_func = 0, res = 0, line = 0, depth = 0, id = 0;
        int64_t addr = 0;
        size_t funcs_before = r->p->n_func;
        if ((rc = next_line(r)) < 0 ||
            (rc = get_i32(r, -1, (int64_t)r->p->n_func - 1, &key_func)) < 0 ||
            (rc = get_i32(r, -1, (int64_t)r->p->n_res - 1, &res)) < 0 ||
            (rc = get_int(r, INT64_MIN, INT64_MAX, &addr)) < 0 ||
            (rc = get_i32(r, INT32_MIN, INT32_MAX, &line)) < 0 ||
            (rc = get_i32(r, 1, MAX_CHAIN, &depth)) < 0)
            return rc;
        if (CN_RESERVE(r->ints, r->ints_cap, (size_t)depth) < 0)
            return -ENOMEM;
        for (int32_t d = 0; d < depth; d++)
            if ((rc = get_i32(r, 0, (int64_t)r->p->n_func - 1, &r->ints[d])) < 0)
                return rc;
        int32_t sym = -1;
        if (r->version >= 2 && (rc = get_i32(r, -1, (int64_t)r->p->n_func - 1, &sym)) < 0)
            return rc;
        if ((rc = end_of_line(r)) < 0)
            return rc;
        /* A native frame is made with its chain's outer func, not a placeholder: a frame
         * named as it was made (cn_agg_set_frame_namer) never had one. */
        if (key_func < 0)
            id = cn_agg__native_frame_as(r->p, res, (uint64_t)addr, r->ints[0]);
        else
            id = cn_agg_frame(r->p, key_func, res, addr, line);
        if (id < 0)
            return id;
        if ((size_t)id != i || r->p->n_func != funcs_before) /* both only find funcs */
            return bad(r, "frame %zu repeats frame %d", i, id);
        if (key_func < 0)
            r->p->frame_line[id] = line; /* set by symbolication; not part of the key */
        if ((rc = set_chain(r, id, r->ints, (size_t)depth)) < 0)
            return rc;
        if (sym >= 0) {
            r->p->frame_sym_func[id] = sym;
            r->p->func_generation++;
        }
    }
    return rc;
}

static int read_stacks(rd *r)
{
    size_t n;
    int rc = section(r, "stacks", SIZE_MAX, &n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int32_t prefix = 0, frame = 0;
        if ((rc = next_line(r)) < 0 || (rc = get_i32(r, -1, (int64_t)i - 1, &prefix)) < 0 ||
            (rc = get_i32(r, 0, (int64_t)r->p->n_frame - 1, &frame)) < 0 ||
            (rc = end_of_line(r)) < 0)
            return rc;
        int32_t id = cn_agg_stack(r->p, prefix, frame);
        if (id < 0)
            return id;
        if ((size_t)id != i)
            return bad(r, "stack %zu repeats stack %d", i, id);
    }
    return rc;
}

static int read_threads(rd *r)
{
    size_t n;
    int rc = section(r, "threads", SIZE_MAX, &n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int32_t pid = 0, tid = 0, name = 0;
        if ((rc = next_line(r)) < 0 || (rc = get_i32(r, INT32_MIN, INT32_MAX, &pid)) < 0 ||
            (rc = get_i32(r, INT32_MIN, INT32_MAX, &tid)) < 0 ||
            (rc = get_str(r, true, &name)) < 0 || (rc = end_of_line(r)) < 0)
            return rc;
        int32_t id = cn_agg_thread(r->p, pid, tid, cn_agg_string_get(r->p, name));
        if (id < 0)
            return id;
        if ((size_t)id != i)
            return bad(r, "thread %zu repeats thread %d", i, id);
    }
    if (rc < 0 || (rc = section(r, "processes", SIZE_MAX, &n)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        int32_t pid = 0, name = 0;
        if ((rc = next_line(r)) < 0 || (rc = get_i32(r, INT32_MIN, INT32_MAX, &pid)) < 0 ||
            (rc = get_str(r, false, &name)) < 0 || (rc = end_of_line(r)) < 0)
            return rc;
        if (cn_agg_process_name(r->p, pid))
            return bad(r, "process %d appears twice", pid);
        if ((rc = cn_agg_process_set_name(r->p, pid, r->p->str[name])) < 0)
            return rc;
    }
    if (r->version < 3 || (rc = section(r, "cgroups", SIZE_MAX, &n)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        int32_t pid = 0, path = 0;
        if ((rc = next_line(r)) < 0 || (rc = get_i32(r, INT32_MIN, INT32_MAX, &pid)) < 0 ||
            (rc = get_str(r, false, &path)) < 0 || (rc = end_of_line(r)) < 0)
            return rc;
        if (cn_agg_process_cgroup(r->p, pid))
            return bad(r, "process %d's cgroup appears twice", pid);
        if ((rc = cn_agg_process_set_cgroup(r->p, pid, r->p->str[path])) < 0)
            return rc;
    }
    return 0;
}

static int read_meta(rd *r)
{
    size_t n;
    int rc = section(r, "meta", SIZE_MAX, &n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int32_t k = 0, v = 0;
        if ((rc = next_line(r)) < 0 || (rc = get_str(r, false, &k)) < 0 ||
            (rc = get_str(r, false, &v)) < 0 || (rc = end_of_line(r)) < 0)
            return rc;
        if (cn_agg_meta_get(r->p, r->p->str[k]))
            return bad(r, "metadata key appears twice");
        if ((rc = cn_agg_meta_set(r->p, r->p->str[k], r->p->str[v])) < 0)
            return rc;
    }
    return rc;
}

static int read_renames(rd *r)
{
    cn_agg_profile *p = r->p;
    size_t n;
    int rc = section(r, "renames", SIZE_MAX, &n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int32_t old = 0, cnt = 0, v = 0;
        if ((rc = next_line(r)) < 0 || (rc = get_str(r, false, &old)) < 0 ||
            (rc = get_i32(r, 0, 1 << 20, &cnt)) < 0)
            return rc;
        size_t c1 = p->cap_rename, c2 = p->cap_rename, c3 = p->cap_rename;
        if (CN_RESERVE(p->rename_old, c1, i + 1) < 0 || CN_RESERVE(p->rename_off, c2, i + 1) < 0 ||
            CN_RESERVE(p->rename_cnt, c3, i + 1) < 0 ||
            CN_RESERVE(p->rename_pool, p->rename_pool_cap, p->rename_pool_len + (size_t)cnt) < 0)
            return -ENOMEM;
        p->cap_rename = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
        if (p->rename_pool_len + (size_t)cnt > INT32_MAX)
            return bad(r, "rename map too large");
        p->rename_old[i] = old;
        p->rename_off[i] = (int32_t)p->rename_pool_len;
        p->rename_cnt[i] = cnt;
        for (int32_t k = 0; k < cnt; k++) {
            if ((rc = get_str(r, false, &v)) < 0)
                return rc;
            p->rename_pool[p->rename_pool_len++] = v;
        }
        p->n_rename = i + 1;
        if ((rc = end_of_line(r)) < 0)
            return rc;
    }
    if (rc == 0 && (rc = cn_agg__rename_reindex(p)) == -EINVAL)
        return bad(r, "rename map names an old function twice");
    return rc;
}

static int read_samples(rd *r)
{
    cn_agg_profile *p = r->p;
    size_t n;
    uint64_t t = 0;
    int rc = section(r, "samples", SIZE_MAX, &n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int32_t stack = -1, thread = -1, tl = -2; /* -2: no timeline stack of its own */
        int64_t dt = 0;
        double weight = 0;
        if ((rc = next_line(r)) < 0 || (rc = get_i32(r, -1, (int64_t)p->n_stack - 1, &stack)) < 0 ||
            (rc = get_int(r, INT64_MIN, INT64_MAX, &dt)) < 0 || (rc = get_double(r, &weight)) < 0 ||
            (rc = get_i32(r, -1, (int64_t)p->n_thr - 1, &thread)) < 0)
            return rc;
        if (r->pos < r->len && (rc = get_i32(r, -1, (int64_t)p->n_stack - 1, &tl)) < 0)
            return rc;
        if ((rc = end_of_line(r)) < 0)
            return rc;
        t += (uint64_t)dt;
        if ((rc = cn_agg_add_sample(p, stack, (int64_t)t, weight, thread)) < 0)
            return rc;
        if (tl >= -1 && (rc = cn_agg_sample_set_timeline_stack(p, i, tl)) < 0)
            return rc;
    }
    if (rc < 0 || (rc = section(r, "accumulator", SIZE_MAX, &n)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        int32_t stack = -1, thread = -1;
        double weight = 0;
        if ((rc = next_line(r)) < 0 || (rc = get_i32(r, 0, (int64_t)p->n_stack - 1, &stack)) < 0 ||
            (rc = get_i32(r, -1, (int64_t)p->n_thr - 1, &thread)) < 0 ||
            (rc = get_double(r, &weight)) < 0 || (rc = end_of_line(r)) < 0)
            return rc;
        uint64_t key = cn_pair(stack, thread);
        if (cn_u64map_get(&p->acc_index, key) >= 0)
            return bad(r, "accumulator row for stack %d thread %d appears twice", stack, thread);
        size_t c1 = p->cap_acc, c2 = p->cap_acc, c3 = p->cap_acc;
        if (CN_RESERVE(p->acc_stack, c1, i + 1) < 0 || CN_RESERVE(p->acc_thread, c2, i + 1) < 0 ||
            CN_RESERVE(p->acc_weight, c3, i + 1) < 0 ||
            cn_u64map_put(&p->acc_index, key, (int32_t)i) < 0)
            return -ENOMEM;
        p->cap_acc = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
        p->acc_stack[i] = stack;
        p->acc_thread[i] = thread;
        p->acc_weight[i] = weight;
        p->n_acc = i + 1;
    }
    if ((rc = next_line(r)) < 0)
        return rc;
    if (r->len != 3 || memcmp(r->line, "end", 3))
        return bad(r, "expected 'end'");
    return 0;
}

static int read_header(rd *r)
{
    int64_t v;
    double scale;
    size_t n = strlen(CANOPY_MAGIC);
    int rc = next_line(r);
    if (rc < 0)
        return rc;
    if (r->len <= n || memcmp(r->line, CANOPY_MAGIC, n) || r->line[n] != ' ')
        return bad(r, "not a .canopy file");
    r->pos = n;
    if ((rc = get_int(r, 0, INT32_MAX, &v)) < 0)
        return rc;
    if (v < 1 || v > CANOPY_FILE_VERSION)
        return bad(r, ".canopy version %" PRId64 " is not supported (this canopy reads 1 to %d)", v,
                   CANOPY_FILE_VERSION);
    r->version = (int)v;
    if ((rc = next_line(r)) < 0)
        return rc;
    if (r->len < 5 || memcmp(r->line, "unit ", 5))
        return bad(r, "expected 'unit'");
    r->pos = 5;
    if ((rc = get_int(r, 0, CN_AGG_UNIT_EVENTS, &v)) < 0 || (rc = end_of_line(r)) < 0)
        return rc;
    cn_agg_profile_set_unit(r->p, (cn_agg_unit)v);
    if ((rc = next_line(r)) < 0)
        return rc;
    if (r->len < 6 || memcmp(r->line, "scale ", 6))
        return bad(r, "expected 'scale'");
    r->pos = 6;
    if ((rc = get_double(r, &scale)) < 0 || (rc = end_of_line(r)) < 0)
        return rc;
    cn_agg_profile_set_scale(r->p, scale);
    return 0;
}

int cn_agg_canopy_read(const char *data, size_t len, const char *name, cn_agg_profile **out,
                       cn_err *err)
{
    rd r = {.name = name, .err = err};
    int rc;
    cn_lines_init(&r.it, data, len);
    r.p = cn_agg_profile_new();
    if (!r.p) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = read_header(&r)) < 0 || (rc = read_strings(&r)) < 0 ||
        (rc = read_resources(&r)) < 0 || (rc = read_funcs(&r)) < 0 || (rc = read_frames(&r)) < 0 ||
        (rc = read_stacks(&r)) < 0 || (rc = read_threads(&r)) < 0 || (rc = read_meta(&r)) < 0 ||
        (rc = read_renames(&r)) < 0 || (rc = read_samples(&r)) < 0)
        goto fail;
    free(r.sbuf);
    free(r.ints);
    *out = r.p;
    return 0;
fail:
    if (rc != -EINVAL) /* errors of the tables themselves (memory, limits) */
        cn_err_set(err, rc, "%s:%zu: %s", name, r.it.lineno,
                   rc == -ENOMEM ? "out of memory" : strerror(-rc));
    free(r.sbuf);
    free(r.ints);
    cn_agg_profile_free(r.p);
    return rc;
}

bool cn_agg_canopy_sniff(const char *data, size_t len)
{
    size_t n = strlen(CANOPY_MAGIC);
    return len > n && !memcmp(data, CANOPY_MAGIC, n) && data[n] == ' ';
}
