/* export_pprof.c — a query's result as a gzipped pprof profile.proto.
 *
 * Two sources of stacks (formats_internal.h):
 * - raw (untransformed query): one pprof Sample per distinct (frame stack, thread) with
 *   the sample count and the weight; one Location per frame with its address, its mapping
 *   and one Line per func of its inline chain, innermost first; frames still named by
 *   their placeholder get no Line, and their mapping has_functions = false, so pprof (or
 *   canopy) can symbolize them later from the mapping's file name and build-id.
 * - tree (transforms or --group-by): one Sample per call node with self != 0, whose
 *   locations are the node's path leaf first; one Location per func.
 * A Python function's system_name is `py::NAME:FILE` (frame_kind.c, docs/python.md), any
 * other function's its name.
 * Output is streamed through zlib (level 1) in field order: sample_type packed by
 * protobuf-c; then the samples, encoded here straight from the rows (the bulk of the
 * file: no per-sample structs) with the rows of one stack adjacent, so deflate sees each
 * repeated location_id array as one long match; then the tables and scalars, built with
 * protobuf-c over pooled arrays (every struct of one kind in one allocation, ids dense
 * from 1). The bytes are what protobuf-c would pack for the whole message, but for the
 * order of the samples (and of thread names in the string table).
 * docs/perf-formats.md has the figures.
 * Strings: the pprof string table points into the profile's interned strings (found
 * again by address: an interned string has one address for the profile's lifetime) and a
 * few literals; nothing is copied.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "formats_internal.h"
#include "pb_dict.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__ValueType pb_value_type;

/* One output sample before it becomes a pb_sample: `leaf` is a stack id (raw) or a node
 * index (tree). count < 0: unknown. */
typedef struct row {
    int32_t leaf;
    int32_t thread;
    double weight;
    int64_t count;
} row;

/* The writer's state; every pointer is owned here and freed by writer_free(). */
typedef struct writer {
    cn_agg_profile *p;
    bool raw;
    int64_t cpu_period;      /* > 0: a samples profile also written as cpu/nanoseconds */
    const cn_agg_tree *tree; /* tree path only */

    /* rows; raw rows are found again by (stack, thread) */
    row *rows;
    size_t n_rows, cap_rows;
    cn_u64map row_index;
    bool counts_known;

    cn_fmt__dict d;     /* the string table and location/function/mapping ids (pb_dict.h) */
    int32_t *first_row; /* raw: stack -> its first row (-1 none), for row_order() */

    /* output: the gzip stream and the Sample encoder's buffers */
    FILE *out;
    z_stream z;
    bool z_open;
    uint8_t *zbuf; /* deflate's output chunk */
    uint8_t *enc;  /* encoded Sample messages waiting for deflate */
    size_t n_enc;
    uint64_t *ids; /* one row's location ids */
    size_t cap_ids;
    uint8_t *locbuf; /* the packed location_id payload of the current stack */
    size_t cap_locbuf, n_locbuf;

    /* the message's pools (everything but the samples, which are encoded by hand) */
    pb_location *locs;
    pb_location **loc_ptrs;
    pb_line *lines;
    pb_line **line_ptrs;
    pb_function *fns;
    pb_function **fn_ptrs;
    pb_mapping *maps;
    pb_mapping **map_ptrs;
    pb_value_type types[2];
    pb_value_type *type_ptrs[2];
    pb_value_type period_type;
    int64_t *comments;
    size_t n_comments;
    char **comment_strs; /* owned copies (transform specs) */
    char **sys_names;    /* owned: Python functions' system names (fn_func order) */
} writer;

static void writer_free(writer *w)
{
    free(w->rows);
    free(w->first_row);
    cn_u64map_clear(&w->row_index);
    if (w->z_open)
        deflateEnd(&w->z);
    free(w->zbuf);
    free(w->enc);
    free(w->ids);
    free(w->locbuf);
    free(w->locs);
    free(w->loc_ptrs);
    free(w->lines);
    free(w->line_ptrs);
    free(w->fns);
    free(w->fn_ptrs);
    free(w->maps);
    free(w->map_ptrs);
    free(w->comments);
    for (size_t i = 0; w->comment_strs && i < w->n_comments; i++)
        free(w->comment_strs[i]);
    free(w->comment_strs);
    for (size_t i = 0; w->sys_names && i < w->d.n_fns; i++)
        free(w->sys_names[i]);
    free(w->sys_names);
    cn_fmt__dict_clear(&w->d); /* after sys_names: n_fns counts them */
}

/* ---- rows ------------------------------------------------------------------------- */

static int push_row(writer *w, int32_t leaf, int32_t thread, double weight, int64_t count)
{
    if (w->n_rows == w->cap_rows && CN_RESERVE(w->rows, w->cap_rows, w->n_rows + 1) < 0)
        return -ENOMEM;
    w->rows[w->n_rows++] = (row){leaf, thread, weight, count};
    return 0;
}

static int raw_sample(void *ctx, int32_t stack, int32_t thread, int64_t time_ns, double weight,
                      int64_t count)
{
    writer *w = ctx;
    uint64_t key = cn_pair(stack, thread);
    int32_t r = cn_u64map_get(&w->row_index, key);
    if (r >= 0) {
        w->rows[r].weight += weight;
        w->rows[r].count += count;
        return 0;
    }
    if (count == 0)
        w->counts_known = false; /* a retention row: its count was not kept */
    if (cn_u64map_put(&w->row_index, key, (int32_t)w->n_rows) < 0)
        return -ENOMEM;
    return push_row(w, stack, thread, weight, count);
}

/* The location ids of a row, leaf first, into w->ids (grown as needed); giving each
 * location its id on first use. Returns the count or -ENOMEM. */
static ssize_t row_path(writer *w, const row *r)
{
    size_t n = 0;
    if (w->raw) {
        for (int32_t s = r->leaf; s >= 0; s = cn_agg_stack_prefix(w->p, s), n++) {
            if (n == w->cap_ids && CN_RESERVE(w->ids, w->cap_ids, n + 1) < 0)
                return -ENOMEM;
            int32_t f = cn_agg_stack_frame(w->p, s);
            cn_fmt__dict_use_location(&w->d, f);
            w->ids[n] = w->d.loc_of[f];
        }
    } else {
        for (int32_t nd = r->leaf; nd >= 0; nd = w->tree->nodes[nd].parent, n++) {
            if (n == w->cap_ids && CN_RESERVE(w->ids, w->cap_ids, n + 1) < 0)
                return -ENOMEM;
            int32_t f = w->tree->nodes[nd].func;
            cn_fmt__dict_use_location(&w->d, f);
            w->ids[n] = w->d.loc_of[f];
        }
    }
    return (ssize_t)n;
}

/* ---- building the message --------------------------------------------------------- */

static int build_value_types(writer *w, pb_profile *m, size_t *n_values)
{
    const cn_agg_profile *p = w->p;
    cn_agg_unit unit = cn_agg_profile_unit(p);
    int64_t samples = cn_fmt__dict_lit(&w->d, "samples"), count = cn_fmt__dict_lit(&w->d, "count");
    if (samples < 0 || count < 0)
        return -ENOMEM;
    size_t n = 0;
    if (unit == CN_AGG_UNIT_SAMPLES && w->cpu_period > 0) {
        /* Every sample stands for one period of CPU time: samples/count, then
         * cpu/nanoseconds = samples × period, the default and period type (what
         * Pyroscope's and Go's CPU profiles carry). */
        int64_t cpu = cn_fmt__dict_lit(&w->d, "cpu"), ns = cn_fmt__dict_lit(&w->d, "nanoseconds");
        if (cpu < 0 || ns < 0)
            return -ENOMEM;
        perftools__profiles__value_type__init(&w->types[n]);
        w->types[n].type = samples;
        w->types[n++].unit = count;
        perftools__profiles__value_type__init(&w->types[n]);
        w->types[n].type = cpu;
        w->types[n++].unit = ns;
    } else if (unit == CN_AGG_UNIT_SAMPLES || w->counts_known) {
        perftools__profiles__value_type__init(&w->types[n]);
        w->types[n].type = samples;
        w->types[n++].unit = count;
    }
    if (unit != CN_AGG_UNIT_SAMPLES) {
        const char *type = "cpu", *unit_name = "nanoseconds";
        const char *mode = cn_agg_meta_get(p, "mode");
        if (unit == CN_AGG_UNIT_NS && mode && !strcmp(mode, "off-cpu"))
            type = "off_cpu"; /* docs/cli.md, "Modes" */
        else if (unit == CN_AGG_UNIT_NS && mode && !strcmp(mode, "wall"))
            type = "wall";
        if (unit == CN_AGG_UNIT_EVENTS) {
            const char *ev = cn_agg_meta_get(p, "event");
            type = ev && *ev ? ev : "events";
            unit_name = "count";
        }
        int64_t t = cn_fmt__dict_lit(&w->d, type), u = cn_fmt__dict_lit(&w->d, unit_name);
        if (t < 0 || u < 0)
            return -ENOMEM;
        perftools__profiles__value_type__init(&w->types[n]);
        w->types[n].type = t;
        w->types[n++].unit = u;
    }
    for (size_t i = 0; i < n; i++)
        w->type_ptrs[i] = &w->types[i];
    m->n_sample_type = n;
    m->sample_type = w->type_ptrs;
    m->default_sample_type = w->types[n - 1].type;
    perftools__profiles__value_type__init(&w->period_type);
    w->period_type = w->types[n - 1];
    m->period_type = &w->period_type;
    *n_values = n;
    return 0;
}

/* ---- the gzip stream and the hand-encoded Samples ------------------------------------ */

#define ZCHUNK    (1u << 16)
#define ENC_FLUSH (1u << 16) /* encoded bytes handed to deflate at a time */

static int z_open(writer *w)
{
    if (!(w->zbuf = malloc(ZCHUNK)) || !(w->enc = malloc(ENC_FLUSH * 2)))
        return -ENOMEM;
    if (deflateInit2(&w->z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    w->z_open = true;
    return 0;
}

/* Compresses len bytes (finish: and ends the stream). Returns 0 or -EIO. */
static int z_put(writer *w, const uint8_t *buf, size_t len, bool finish)
{
    int zr;
    w->z.next_in = (Bytef *)buf;
    do {
        size_t step = len > (1u << 30) ? (1u << 30) : len;
        w->z.avail_in = (uInt)step;
        len -= step;
        do {
            w->z.next_out = w->zbuf;
            w->z.avail_out = ZCHUNK;
            zr = deflate(&w->z, len || !finish ? Z_NO_FLUSH : Z_FINISH);
            size_t have = ZCHUNK - w->z.avail_out;
            if (zr == Z_STREAM_ERROR || (have && fwrite(w->zbuf, 1, have, w->out) != have))
                return -EIO;
        } while (w->z.avail_out == 0);
    } while (len);
    return finish && zr != Z_STREAM_END ? -EIO : 0;
}

static int enc_flush(writer *w)
{
    int rc = z_put(w, w->enc, w->n_enc, false);
    w->n_enc = 0;
    return rc;
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    for (; v >= 0x80; v >>= 7)
        n++;
    return n;
}

static uint8_t *put_varint(uint8_t *o, uint64_t v)
{
    for (; v >= 0x80; v >>= 7)
        *o++ = (uint8_t)(v | 0x80);
    *o++ = (uint8_t)v;
    return o;
}

/* A proto3 int64 field: omitted when 0, negative values as 10-byte varints. */
static size_t int_field_len(int64_t v)
{
    return v ? 1 + varint_len((uint64_t)v) : 0;
}

static uint8_t *put_int_field(uint8_t *o, uint8_t tag, int64_t v)
{
    if (!v)
        return o;
    *o++ = tag;
    return put_varint(o, (uint64_t)v);
}

/* Makes room for n more encoded bytes (flushing to deflate when the buffer is full). */
static uint8_t *enc_reserve(writer *w, size_t n)
{
    if (w->n_enc + n > ENC_FLUSH * 2) {
        if (enc_flush(w) < 0)
            return NULL;
        if (n > ENC_FLUSH * 2) {
            uint8_t *big = realloc(w->enc, n);
            if (!big)
                return NULL;
            w->enc = big;
        }
    }
    return w->enc + w->n_enc;
}

/* The packed location_id payload of the current row into w->locbuf. */
static int encode_locations(writer *w, const row *r)
{
    ssize_t n = row_path(w, r);
    if (n < 0)
        return (int)n;
    size_t need = (size_t)n * 10;
    if (need > w->cap_locbuf && CN_RESERVE(w->locbuf, w->cap_locbuf, need) < 0)
        return -ENOMEM;
    uint8_t *o = w->locbuf;
    for (ssize_t i = 0; i < n; i++)
        o = put_varint(o, w->ids[i]);
    w->n_locbuf = (size_t)(o - w->locbuf);
    return 0;
}

/* Writes one Sample (Profile field 2) exactly as protobuf-c would pack it: fields in
 * number order, packed location_id and value, labels {key, str, num} without zeros. */
static int encode_sample(writer *w, const int64_t *values, size_t n_values, const int64_t *lab_key,
                         const int64_t *lab_str, const int64_t *lab_num, size_t n_labels)
{
    size_t vals = 0, lab_len[3], body = 0;
    for (size_t i = 0; i < n_values; i++)
        vals += varint_len((uint64_t)values[i]);
    if (w->n_locbuf)
        body += 1 + varint_len(w->n_locbuf) + w->n_locbuf;
    if (vals)
        body += 1 + varint_len(vals) + vals;
    for (size_t j = 0; j < n_labels; j++) {
        lab_len[j] =
            int_field_len(lab_key[j]) + int_field_len(lab_str[j]) + int_field_len(lab_num[j]);
        body += 1 + varint_len(lab_len[j]) + lab_len[j];
    }
    uint8_t *o = enc_reserve(w, 1 + 10 + body);
    if (!o)
        return -ENOMEM;
    uint8_t *start = o;
    *o++ = 0x12; /* Profile.sample */
    o = put_varint(o, body);
    if (w->n_locbuf) {
        *o++ = 0x0a;
        o = put_varint(o, w->n_locbuf);
        memcpy(o, w->locbuf, w->n_locbuf);
        o += w->n_locbuf;
    }
    if (vals) {
        *o++ = 0x12;
        o = put_varint(o, vals);
        for (size_t i = 0; i < n_values; i++)
            o = put_varint(o, (uint64_t)values[i]);
    }
    for (size_t j = 0; j < n_labels; j++) {
        *o++ = 0x1a;
        o = put_varint(o, lab_len[j]);
        o = put_int_field(o, 0x08, lab_key[j]);
        o = put_int_field(o, 0x10, lab_str[j]);
        o = put_int_field(o, 0x18, lab_num[j]);
    }
    w->n_enc += (size_t)(o - start);
    return 0;
}

/* Output order of the rows: raw rows of one stack (one per thread) next to each other,
 * stacks in order of first appearance, so deflate finds each repeated location_id
 * array as one long match. Returns an array owned by the caller, or NULL. */
static int32_t *row_order(writer *w)
{
    size_t n = w->n_rows;
    int32_t *order = cn_fmt__alloc_n(n, sizeof(*order)),
            *start = cn_fmt__alloc_n(n + 1, sizeof(*start));
    if (!order || !start)
        goto fail;
    if (!w->raw) {
        for (size_t i = 0; i < n; i++)
            order[i] = (int32_t)i;
        free(start);
        return order;
    }
    size_t n_stacks = cn_agg_stack_count(w->p);
    if (!CN_FMT_ALLOC_N(w->first_row, n_stacks))
        goto fail;
    memset(w->first_row, 0xff, n_stacks * sizeof(*w->first_row));
    for (size_t i = 0; i < n; i++) { /* counting sort by the stack's first row */
        int32_t *f = &w->first_row[w->rows[i].leaf];
        if (*f < 0)
            *f = (int32_t)i;
        start[*f + 1]++;
    }
    for (size_t i = 0; i < n; i++)
        start[i + 1] += start[i];
    for (size_t i = 0; i < n; i++)
        order[start[w->first_row[w->rows[i].leaf]]++] = (int32_t)i;
    free(start);
    return order;
fail:
    free(order);
    free(start);
    return NULL;
}

/* Encodes every row as a Sample into the gzip stream (after sample_type, before the
 * rest of the message, so the fields stay in protobuf-c's order). */
static int write_samples(writer *w, pb_profile *m, size_t n_values)
{
    const cn_agg_profile *p = w->p;
    double factor = cn_fmt__dict_unit_factor(p);
    int64_t k_thread = cn_fmt__dict_lit(&w->d, "thread"), k_tid = cn_fmt__dict_lit(&w->d, "tid"),
            k_pid = cn_fmt__dict_lit(&w->d, "pid");
    if (k_thread < 0 || k_tid < 0 || k_pid < 0)
        return -ENOMEM;
    int32_t *order = row_order(w);
    if (!order)
        return -ENOMEM;
    int rc = 0;
    int64_t period_sum = 0, count_sum = 0;
    int32_t last_leaf = -1;
    for (size_t k = 0; k < w->n_rows; k++) {
        const row *r = &w->rows[order[k]];
        if (k == 0 || r->leaf != last_leaf) { /* rows of one stack are adjacent (raw) */
            if ((rc = encode_locations(w, r)) < 0)
                goto out;
            last_leaf = r->leaf;
        }
        int64_t values[2], v = llround(r->weight * factor);
        if (w->cpu_period > 0 && cn_agg_profile_unit(p) == CN_AGG_UNIT_SAMPLES) {
            values[0] = v;
            v *= w->cpu_period;
        } else if (n_values == 2) {
            values[0] = r->count;
        }
        values[n_values - 1] = v;
        period_sum += v;
        count_sum += r->count > 0 ? r->count : 0;
        int64_t key[3] = {k_tid, k_pid, k_thread}, str[3] = {0, 0, 0}, num[3] = {0, 0, 0};
        size_t n_labels = 0;
        if (r->thread >= 0) {
            const char *name = cn_agg_thread_name(p, r->thread);
            num[0] = cn_agg_thread_tid(p, r->thread);
            num[1] = cn_agg_thread_pid(p, r->thread);
            n_labels = 2;
            if (name) {
                if ((str[2] = cn_fmt__dict_str(&w->d, name)) < 0) {
                    rc = -ENOMEM;
                    goto out;
                }
                n_labels = 3;
            }
        }
        if ((rc = encode_sample(w, values, n_values, key, str, num, n_labels)) < 0)
            goto out;
    }
    rc = enc_flush(w);
    m->period =
        count_sum > 0 && cn_agg_profile_unit(p) != CN_AGG_UNIT_SAMPLES ? period_sum / count_sum : 1;
    const char *period = cn_agg_meta_get(p, "period");
    if (period && atoll(period) > 0)
        m->period = atoll(period);
    if (w->cpu_period > 0 && cn_agg_profile_unit(p) == CN_AGG_UNIT_SAMPLES)
        m->period = w->cpu_period;
out:
    free(order);
    return rc;
}

/* A Python function's system_name is `py::NAME:FILE`, CPython's own name for it in perf
 * maps (frame_kind.c); every other function's is its name. */
static int build_functions(writer *w, pb_profile *m)
{
    const cn_agg_profile *p = w->p;
    if (!CN_FMT_ALLOC_N(w->fns, w->d.n_fns) || !CN_FMT_ALLOC_N(w->fn_ptrs, w->d.n_fns) ||
        !CN_FMT_ALLOC_N(w->sys_names, w->d.n_fns))
        return -ENOMEM;
    for (size_t i = 0; i < w->d.n_fns; i++) {
        int32_t f = w->d.fn_func[i];
        pb_function *fn = &w->fns[i];
        perftools__profiles__function__init(fn);
        fn->id = i + 1;
        if ((fn->name = cn_fmt__dict_str(&w->d, cn_agg_func_name(p, f))) < 0 ||
            (fn->filename = cn_fmt__dict_str(&w->d, cn_agg_func_file(p, f))) < 0 ||
            cn_fmt__py_system_name(p, f, &w->sys_names[i]) < 0)
            return -ENOMEM;
        fn->system_name = w->sys_names[i] ? cn_fmt__dict_add(&w->d, w->sys_names[i]) : fn->name;
        if (fn->system_name < 0)
            return -ENOMEM;
        fn->start_line = cn_agg_func_line(p, f);
        w->fn_ptrs[i] = fn;
    }
    m->n_function = w->d.n_fns;
    m->function = w->fn_ptrs;
    return 0;
}

static int build_locations(writer *w, pb_profile *m)
{
    const cn_agg_profile *p = w->p;
    if (!CN_FMT_ALLOC_N(w->locs, w->d.n_locs) || !CN_FMT_ALLOC_N(w->loc_ptrs, w->d.n_locs) ||
        !CN_FMT_ALLOC_N(w->lines, w->d.n_lines) || !CN_FMT_ALLOC_N(w->line_ptrs, w->d.n_lines))
        return -ENOMEM;
    size_t ln = 0;
    for (size_t i = 0; i < w->d.n_locs; i++) {
        int32_t key = w->d.loc_key[i];
        pb_location *l = &w->locs[i];
        perftools__profiles__location__init(l);
        l->id = i + 1;
        l->line = w->line_ptrs + ln;
        if (!w->raw) {
            int32_t res = cn_agg_func_resource(p, key);
            l->mapping_id = res >= 0 ? w->d.map_of[res] : 0;
            pb_line *line = &w->lines[ln];
            perftools__profiles__line__init(line);
            line->function_id = w->d.fn_of[key];
            line->line = cn_agg_func_line(p, key);
            w->line_ptrs[ln++] = line;
            l->n_line = 1;
        } else {
            int32_t res = cn_agg_frame_resource(p, key);
            int64_t addr = cn_agg_frame_address(p, key);
            l->mapping_id = res >= 0 ? w->d.map_of[res] : 0;
            l->address = addr >= 0 ? (uint64_t)addr : 0;
            if (!cn_agg_frame_is_placeholder(p, key)) {
                const int32_t *chain;
                size_t d = cn_agg_frame_funcs(p, key, &chain);
                for (size_t j = 0; j < d; j++) { /* innermost first */
                    pb_line *line = &w->lines[ln];
                    perftools__profiles__line__init(line);
                    line->function_id = w->d.fn_of[chain[d - 1 - j]];
                    line->line = j == 0 ? cn_agg_frame_line(p, key) : 0;
                    w->line_ptrs[ln++] = line;
                    l->n_line++;
                }
            }
        }
        w->loc_ptrs[i] = l;
    }
    m->n_location = w->d.n_locs;
    m->location = w->loc_ptrs;
    return 0;
}

static int build_mappings(writer *w, pb_profile *m)
{
    const cn_agg_profile *p = w->p;
    if (!CN_FMT_ALLOC_N(w->maps, w->d.n_maps) || !CN_FMT_ALLOC_N(w->map_ptrs, w->d.n_maps))
        return -ENOMEM;
    for (size_t i = 0; i < w->d.n_maps; i++) {
        int32_t res = w->d.map_res[i];
        pb_mapping *mp = &w->maps[i];
        perftools__profiles__mapping__init(mp);
        mp->id = i + 1;
        const char *file = cn_agg_resource_path(p, res);
        if ((mp->filename = cn_fmt__dict_str(&w->d, file ? file : cn_agg_resource_name(p, res))) <
            0)
            return -ENOMEM;
        const char *ident = cn_agg_resource_identity(p, res);
        if (cn_fmt__is_build_id(ident) && (mp->build_id = cn_fmt__dict_str(&w->d, ident)) < 0)
            return -ENOMEM;
        mp->has_functions = true;
        mp->memory_start = UINT64_MAX;
        w->map_ptrs[i] = mp;
    }
    /* Address ranges and capabilities from the locations that use each mapping:
     * start = file_offset = the lowest address, so address - start + file_offset is the
     * file offset canopy recorded. */
    for (size_t i = 0; i < w->d.n_locs; i++) {
        const pb_location *l = &w->locs[i];
        if (!l->mapping_id)
            continue;
        pb_mapping *mp = &w->maps[l->mapping_id - 1];
        if (w->raw && cn_agg_frame_address(p, w->d.loc_key[i]) >= 0) {
            mp->memory_start = l->address < mp->memory_start ? l->address : mp->memory_start;
            mp->memory_limit =
                l->address + 1 > mp->memory_limit ? l->address + 1 : mp->memory_limit;
        }
        if (l->n_line == 0)
            mp->has_functions = false;
        if (l->n_line > 1)
            mp->has_inline_frames = true;
        for (size_t j = 0; j < l->n_line; j++) {
            if (l->line[j]->line > 0)
                mp->has_line_numbers = true;
            if (w->fns[l->line[j]->function_id - 1].filename)
                mp->has_filenames = true;
        }
    }
    for (size_t i = 0; i < w->d.n_maps; i++) {
        pb_mapping *mp = &w->maps[i];
        if (mp->memory_start == UINT64_MAX)
            mp->memory_start = mp->memory_limit = 0;
        mp->file_offset = mp->memory_start;
    }
    m->n_mapping = w->d.n_maps;
    m->mapping = w->map_ptrs;
    return 0;
}

static int build_comments(writer *w, pb_profile *m, const cn_agg_query *q)
{
    if (!CN_FMT_ALLOC_N(w->comments, q->n_transforms + 1) ||
        !CN_FMT_ALLOC_N(w->comment_strs, q->n_transforms + 1))
        return -ENOMEM;
    for (size_t i = 0; i < q->n_transforms; i++) {
        char *spec = cn_agg_transform_format(&q->transforms[i]);
        char *c = NULL;
        if (!spec || asprintf(&c, "canopy transform %s", spec) < 0)
            c = NULL;
        free(spec);
        if (!c)
            return -ENOMEM;
        w->comment_strs[w->n_comments] = c;
        int64_t x = cn_fmt__dict_add(&w->d, c);
        if (x < 0)
            return -ENOMEM;
        w->comments[w->n_comments++] = x;
    }
    m->n_comment = w->n_comments;
    m->comment = w->comments;
    return 0;
}

static int collect_rows(writer *w, const cn_agg_query *q, cn_agg_tree **tree, cn_err *err)
{
    if (w->raw) {
        w->counts_known = true;
        return cn_agg_for_each_sample(w->p, q, raw_sample, w);
    }
    int rc = cn_fmt__run_view(w->p, q, CN_AGG_VIEW_TREE, tree, err);
    if (rc < 0)
        return rc;
    w->tree = *tree;
    for (size_t i = 0; i < (*tree)->n_nodes; i++)
        if ((*tree)->nodes[i].self != 0 &&
            push_row(w, (int32_t)i, -1, (*tree)->nodes[i].self, -1) < 0)
            return -ENOMEM;
    return 0;
}

/* Packs m with protobuf-c into the gzip stream. */
static int put_message(writer *w, const pb_profile *m, bool finish)
{
    size_t len = perftools__profiles__profile__get_packed_size(m);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return -ENOMEM;
    perftools__profiles__profile__pack(m, buf);
    int rc = z_put(w, buf, len, finish);
    free(buf);
    return rc;
}

/* The message goes out in three parts, in field order: sample_type (protobuf-c), the
 * samples (encoded here, row by row), then the tables and scalars (protobuf-c). */
int cn_fmt_write_pprof(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *err)
{
    return cn_fmt_write_pprof_cpu(p, q, 0, out, err);
}

int cn_fmt_write_pprof_cpu(cn_agg_profile *p, const cn_agg_query *q, int64_t period_ns, FILE *out,
                           cn_err *err)
{
    writer w = {.p = p, .raw = cn_fmt__query_is_raw(q), .out = out, .cpu_period = period_ns};
    cn_agg_tree *tree = NULL;
    pb_profile m, head;
    perftools__profiles__profile__init(&m);
    perftools__profiles__profile__init(&head);
    size_t n_values = 0;
    int rc = collect_rows(&w, q, &tree, err);
    if (rc < 0)
        goto out;
    rc = -ENOMEM;
    if (cn_fmt__dict_init(&w.d, p, w.raw) < 0 || z_open(&w) < 0 ||
        build_value_types(&w, &m, &n_values) < 0)
        goto nomem;
    head.n_sample_type = m.n_sample_type;
    head.sample_type = m.sample_type;
    m.n_sample_type = 0;
    m.sample_type = NULL;
    if ((rc = put_message(&w, &head, false)) < 0 || (rc = write_samples(&w, &m, n_values)) < 0)
        goto fail;
    if (build_functions(&w, &m) < 0 || build_locations(&w, &m) < 0 || build_mappings(&w, &m) < 0 ||
        build_comments(&w, &m, q) < 0)
        goto nomem;
    size_t n_samples = cn_agg_sample_count(p);
    if (w.raw && n_samples > 0) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (size_t i = 0; i < n_samples; i++) {
            int64_t t = cn_agg_sample_time(p, i);
            if (t >= q->from_ns && t < q->to_ns) {
                lo = t < lo ? t : lo;
                hi = t > hi ? t : hi;
            }
        }
        m.duration_nanos = hi >= lo ? hi - lo : 0;
    }
    m.n_string_table = w.d.n_strs;
    m.string_table = w.d.strs;
    if ((rc = put_message(&w, &m, true)) < 0)
        goto fail;
    rc = cn_fmt__finish_output(out, "pprof", err);
    goto out;
fail:
    if (rc == -ENOMEM)
        goto nomem;
    rc = cn_err_set(err, rc, "writing pprof output: %s", strerror(-rc));
    goto out;
nomem:
    rc = cn_err_set(err, -ENOMEM, "pprof output: out of memory");
out:
    cn_agg_tree_free(tree);
    writer_free(&w);
    return rc;
}
