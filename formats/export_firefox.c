/* export_firefox.c — a query's samples as the Firefox Profiler's processed profile format
 * (profiler.firefox.com, "Load a profile from file"; docs/cli.md "Firefox Profiler").
 *
 * The version written is pinned (FF_VERSION): the profiler refuses a file newer than
 * itself and upgrades an older one step by step, so a fixed older version loads in every
 * profiler since it and in the newest. 61 is the first version whose tables are all shared
 * by the threads (strings, stacks, frames, funcs, resources, native symbols) and whose
 * sources table has its present columns; versions 62–70 changed nothing this writer
 * writes but the stack table's prefix column (into offsets) and the library's place (from
 * the resource to the frame), which the profiler's upgraders convert.
 *
 * The file is column tables shared by every thread, plus one samples table per thread.
 * The writer first maps every sample's stack into those tables, interning each row by a
 * key into dense indexes as the engine does (cn_u64map), and keeps the samples; then the
 * tables are complete and the JSON is streamed in one pass with json_out.h's writers.
 * Two sources of stacks (formats_internal.h):
 * - raw (untransformed query): frame stacks; a frame with an inline chain becomes one
 *   frame per func of the chain, outer first, with inlineDepth 0, 1, … and the frame's
 *   address and native symbol, as the profiler models inlining; every sample keeps its
 *   time (retention rows, which have none, at time 0);
 * - tree (transforms, --group-by, --no-inline): one query per thread
 *   (cn_fmt__thread_trees); each call node with self weight is one sample at time 0, as
 *   a tree keeps no times; one frame per func, without address.
 * Weights: sample and event counts are weightType "samples"; time units (off-CPU and wall
 * sessions, imported periods and .cpuprofile milliseconds) "tracing-ms", converted to ms.
 */
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

/* The processed profile format version written, the Gecko format version of the same
 * release (meta.version), and the bound below which addresses are exact as JavaScript
 * numbers. */
#define FF_VERSION       61
#define FF_GECKO_VERSION 34
#define FF_MAX_ADDRESS   (INT64_C(1) << 53)

/* meta.categories; a frame's category colours its stack in the profiler. Other comes
 * first: the profiler's default category is the first grey one. */
enum { CAT_OTHER, CAT_USER, CAT_KERNEL, CAT_JIT, CAT_PYTHON, CAT_OFFCPU, N_CAT };
enum { SUB_BLOCKED = 1, SUB_PREEMPTED = 2 }; /* Off-CPU's subcategories; 0 is "Other" */

static const struct {
    const char *name, *color, *subs; /* subs: the JSON array's contents */
} categories[N_CAT] = {
    [CAT_OTHER] = {"Other", "grey", "\"Other\""},
    [CAT_USER] = {"User", "yellow", "\"Other\""},
    [CAT_KERNEL] = {"Kernel", "orange", "\"Other\""},
    [CAT_JIT] = {"JIT", "green", "\"Other\""},
    [CAT_PYTHON] = {"Python", "blue", "\"Other\""},
    /* transparent: the profiler's colour for a thread that is not running */
    [CAT_OFFCPU] = {"Off-CPU", "transparent", "\"Other\",\"Blocked\",\"Preempted\""},
};

/* Rows of the shared tables; -1 is JSON null (or the format's -1 sentinel). */
typedef struct ff_res {
    int32_t src, name, lib; /* canopy resource, string, lib */
} ff_res;
typedef struct ff_func {
    int32_t name, res, source, line;
} ff_func;
typedef struct ff_sym {
    int32_t lib, name;
    int64_t addr; /* the lowest address sampled in it: canopy keeps no symbol start */
} ff_sym;
typedef struct ff_frame {
    int64_t addr;
    int32_t func, sym, line, depth;
    uint8_t cat, sub;
} ff_frame;
typedef struct ff_stack {
    int32_t frame, prefix;
} ff_stack;
typedef struct ff_sample {
    int64_t time; /* ns; -1: a retention row */
    double weight;
    int32_t stack, thread; /* thread: a profile thread, -1 none */
    size_t seq;            /* arrival: keeps the sort stable */
} ff_sample;

/* A growable table of rows and the map from each row's key to its index. */
#define FF_TABLE(type, name)                                                                       \
    type *name;                                                                                    \
    size_t n_##name, cap_##name;                                                                   \
    cn_u64map name##_index

typedef struct ff_writer {
    cn_agg_profile *p;
    bool raw;
    FF_TABLE(const char *, strs); /* key: the interned string's address */
    FF_TABLE(ff_res, res);        /* key: canopy resource */
    FF_TABLE(int32_t, srcs);      /* file name string per source; key: its address */
    FF_TABLE(ff_func, funcs);     /* key: canopy func */
    FF_TABLE(ff_sym, syms);       /* key: (lib, name string) */
    FF_TABLE(ff_frame, frames);   /* key: (canopy frame, inline depth) raw, func tree */
    FF_TABLE(ff_stack, stacks);   /* key: (prefix, frame) */
    int32_t *libs;                /* canopy resource per lib (found through its resource row) */
    size_t n_libs, cap_libs;
    ff_sample *samples;
    size_t n_samples, cap_samples;
    int32_t *memo; /* raw: canopy stack -> stack; tree: node -> stack; -1 unknown */
    size_t cap_memo;
    int32_t *path; /* scratch: stacks or nodes on the way to a mapped one */
    size_t cap_path;
} ff_writer;

#define FF_FREE(w, name)                                                                           \
    do {                                                                                           \
        free((w)->name);                                                                           \
        cn_u64map_clear(&(w)->name##_index);                                                       \
    } while (0)

static void writer_free(ff_writer *w)
{
    FF_FREE(w, strs);
    FF_FREE(w, res);
    FF_FREE(w, srcs);
    FF_FREE(w, funcs);
    FF_FREE(w, syms);
    FF_FREE(w, frames);
    FF_FREE(w, stacks);
    free(w->libs);
    free(w->samples);
    free(w->memo);
    free(w->path);
}

/* Appends row to a table and maps key to it. Returns the index or -ENOMEM. */
#define FF_PUSH(w, name, key, row)                                                                 \
    (CN_RESERVE((w)->name, (w)->cap_##name, (w)->n_##name + 1) < 0 ||                              \
             cn_u64map_put(&(w)->name##_index, (key), (int32_t)(w)->n_##name) < 0                  \
         ? -ENOMEM                                                                                 \
         : ((w)->name[(w)->n_##name] = (row), (int32_t)(w)->n_##name++))

/* ---- interning ------------------------------------------------------------------- */

/* The string index of s, an interned profile string (one address per content for the
 * profile's lifetime, so the address is the key). NULL: -1. */
static int32_t use_str(ff_writer *w, const char *s)
{
    if (!s)
        return -1;
    uint64_t key = (uint64_t)(uintptr_t)s;
    int32_t x = cn_u64map_get(&w->strs_index, key);
    return x >= 0 ? x : FF_PUSH(w, strs, key, s);
}

/* The source row of a function's file name (NULL: -1). */
static int32_t use_source(ff_writer *w, const char *file)
{
    if (!file)
        return -1;
    uint64_t key = (uint64_t)(uintptr_t)file;
    int32_t x = cn_u64map_get(&w->srcs_index, key), name;
    if (x >= 0)
        return x;
    if ((name = use_str(w, file)) < 0)
        return name;
    return FF_PUSH(w, srcs, key, name);
}

/* The resource row of canopy resource res (-1: -1), with a lib for native code in a file
 * (libraries and the kernel), which is what the profiler symbolicates against. */
static int32_t use_resource(ff_writer *w, int32_t res)
{
    if (res < 0)
        return -1;
    int32_t x = cn_u64map_get(&w->res_index, (uint64_t)res);
    if (x >= 0)
        return x;
    ff_res row = {res, use_str(w, cn_agg_resource_name(w->p, res)), -1};
    cn_agg_resource_kind kind = cn_agg_resource_kind_of(w->p, res);
    if (row.name < 0)
        return -ENOMEM;
    if (kind == CN_AGG_RES_LIBRARY || kind == CN_AGG_RES_KERNEL) {
        if (CN_RESERVE(w->libs, w->cap_libs, w->n_libs + 1) < 0)
            return -ENOMEM;
        row.lib = (int32_t)w->n_libs;
        w->libs[w->n_libs++] = res;
    }
    return FF_PUSH(w, res, (uint64_t)res, row);
}

static int32_t use_func(ff_writer *w, int32_t func)
{
    int32_t x = cn_u64map_get(&w->funcs_index, (uint64_t)func);
    if (x >= 0)
        return x;
    const cn_agg_profile *p = w->p;
    ff_func row = {use_str(w, cn_agg_func_name(p, func)),
                   use_resource(w, cn_agg_func_resource(p, func)),
                   use_source(w, cn_agg_func_file(p, func)), cn_agg_func_line(p, func)};
    if (row.name < 0 || row.res < -1 || row.source < -1)
        return -ENOMEM;
    row.line = row.line > 0 ? row.line : -1;
    return FF_PUSH(w, funcs, (uint64_t)func, row);
}

/* The native symbol of outer function `name` (a string row) in lib, which covers addr. */
static int32_t use_symbol(ff_writer *w, int32_t lib, int32_t name, int64_t addr)
{
    uint64_t key = cn_pair(lib, name);
    int32_t x = cn_u64map_get(&w->syms_index, key);
    if (x < 0)
        return FF_PUSH(w, syms, key, ((ff_sym){lib, name, addr}));
    if (addr < w->syms[x].addr)
        w->syms[x].addr = addr;
    return x;
}

/* Category and subcategory of a func: its resource's kind, or for the thread-state
 * pseudo-frames that end off-CPU stacks (docs/cli.md "Modes"), Off-CPU. */
static uint8_t category_of(const cn_agg_profile *p, int32_t func, uint8_t *sub)
{
    const char *name = cn_agg_func_name(p, func);
    int32_t res = cn_agg_func_resource(p, func);
    *sub = 0;
    if (name && (!strcmp(name, CN_AGG_STATE_BLOCKED) || !strcmp(name, CN_AGG_STATE_PREEMPTED))) {
        *sub = !strcmp(name, CN_AGG_STATE_BLOCKED) ? SUB_BLOCKED : SUB_PREEMPTED;
        return CAT_OFFCPU;
    }
    switch (res >= 0 ? cn_agg_resource_kind_of(p, res) : CN_AGG_RES_OTHER) {
    case CN_AGG_RES_LIBRARY:
    case CN_AGG_RES_URL:
        return CAT_USER;
    case CN_AGG_RES_KERNEL:
        return CAT_KERNEL;
    case CN_AGG_RES_JIT:
        return CAT_JIT;
    case CN_AGG_RES_PYTHON:
        return CAT_PYTHON;
    default:
        return CAT_OTHER; /* no known resource (folded input, anonymous code), pseudo-frames */
    }
}

/* A frame row for canopy func `func` (the rest of row filled by the caller), interned
 * under key. */
static int32_t use_frame(ff_writer *w, uint64_t key, int32_t func, ff_frame row)
{
    int32_t x = cn_u64map_get(&w->frames_index, key);
    if (x >= 0)
        return x;
    if ((row.func = use_func(w, func)) < 0)
        return row.func;
    row.cat = category_of(w->p, func, &row.sub);
    return FF_PUSH(w, frames, key, row);
}

static int32_t use_stack(ff_writer *w, int32_t prefix, int32_t frame)
{
    uint64_t key = cn_pair(prefix, frame);
    int32_t x = cn_u64map_get(&w->stacks_index, key);
    return x >= 0 ? x : FF_PUSH(w, stacks, key, ((ff_stack){frame, prefix}));
}

/* ---- stacks from the profile's frames (raw) ------------------------------------------ */

/* Frame k of canopy frame `frame`'s inline chain (length d): the chain's address and
 * native symbol (the outer function's) on every depth, the frame's line on the innermost
 * (the line is where the innermost function was). */
static int32_t raw_frame(ff_writer *w, int32_t frame, const int32_t *chain, size_t d, size_t k)
{
    const cn_agg_profile *p = w->p;
    uint64_t key = cn_pair(frame, (int32_t)k);
    int32_t x = cn_u64map_get(&w->frames_index, key);
    if (x >= 0)
        return x;
    ff_frame row = {.addr = -1, .sym = -1, .line = -1, .depth = (int32_t)k};
    int32_t res = use_resource(w, cn_agg_frame_resource(p, frame));
    if (res < -1)
        return res;
    int32_t lib = res >= 0 ? w->res[res].lib : -1;
    int64_t addr = cn_agg_frame_address(p, frame);
    /* An address means something only relative to a lib, and must be a JSON number the
     * profiler reads exactly, below 2^53 (kernel addresses are not). */
    if (lib >= 0 && addr >= 0 && addr < FF_MAX_ADDRESS)
        row.addr = addr;
    if (row.addr >= 0 && !cn_agg_frame_is_placeholder(p, frame)) {
        int32_t name = use_str(w, cn_agg_func_name(p, chain[0]));
        if (name < 0 || (row.sym = use_symbol(w, lib, name, row.addr)) < 0)
            return -ENOMEM;
    }
    if (k + 1 == d && cn_agg_frame_line(p, frame) > 0)
        row.line = cn_agg_frame_line(p, frame);
    return use_frame(w, key, chain[k], row);
}

/* The stack of canopy frame `frame` on top of stack prefix (-1: a root): one node per
 * func of its inline chain, outer first. */
static int32_t raw_frame_stack(ff_writer *w, int32_t prefix, int32_t frame)
{
    const int32_t *chain;
    size_t d = cn_agg_frame_funcs(w->p, frame, &chain);
    for (size_t k = 0; k < d; k++) {
        int32_t f = raw_frame(w, frame, chain, d, k);
        if (f < 0 || (prefix = use_stack(w, prefix, f)) < 0)
            return f < 0 ? f : prefix;
    }
    return prefix;
}

static int path_push(ff_writer *w, size_t n, int32_t x)
{
    if (n >= w->cap_path && CN_RESERVE(w->path, w->cap_path, n + 1) < 0)
        return -ENOMEM;
    w->path[n] = x;
    return 0;
}

/* The stack of canopy stack `stack` (memoized; no recursion: stacks are as deep as the
 * unwinder went). */
static int32_t raw_stack(ff_writer *w, int32_t stack)
{
    size_t n = 0;
    int32_t s = stack;
    for (; s >= 0 && w->memo[s] < 0; s = cn_agg_stack_prefix(w->p, s))
        if (path_push(w, n++, s) < 0)
            return -ENOMEM;
    int32_t at = s >= 0 ? w->memo[s] : -1;
    while (n-- > 0) {
        int32_t cs = w->path[n];
        if ((at = raw_frame_stack(w, at, cn_agg_stack_frame(w->p, cs))) < 0)
            return at;
        w->memo[cs] = at;
    }
    return at;
}

static int push_sample(ff_writer *w, int32_t thread, int32_t stack, int64_t time, double weight)
{
    if (CN_RESERVE(w->samples, w->cap_samples, w->n_samples + 1) < 0)
        return -ENOMEM;
    w->samples[w->n_samples] = (ff_sample){time, weight, stack, thread, w->n_samples};
    w->n_samples++;
    return 0;
}

static int raw_sample(void *ctx, int32_t stack, int32_t thread, int64_t time_ns, double weight,
                      int64_t count)
{
    ff_writer *w = ctx;
    (void)count;
    if (weight == 0)
        return 0; /* weighs nothing in any view */
    int32_t st = raw_stack(w, stack);
    return st < 0 ? st : push_sample(w, thread, st, time_ns, weight);
}

/* ---- stacks from call nodes (tree) ------------------------------------------------- */

/* The stack of node `node` of t (memoized in w->memo, sized for t). */
static int32_t node_stack(ff_writer *w, const cn_agg_tree *t, int32_t node)
{
    size_t n = 0;
    int32_t nd = node;
    for (; nd >= 0 && w->memo[nd] < 0; nd = t->nodes[nd].parent)
        if (path_push(w, n++, nd) < 0)
            return -ENOMEM;
    int32_t at = nd >= 0 ? w->memo[nd] : -1;
    while (n-- > 0) {
        int32_t x = w->path[n], func = t->nodes[x].func;
        ff_frame row = {.addr = -1, .sym = -1, .line = -1, .depth = 0};
        int32_t f = use_frame(w, (uint64_t)(uint32_t)func, func, row);
        if (f < 0 || (at = use_stack(w, at, f)) < 0)
            return f < 0 ? f : at;
        w->memo[x] = at;
    }
    return at;
}

/* cn_fmt__thread_trees' callback: a sample per call node with self weight. */
static int tree_samples(void *ctx, int32_t thread, const cn_agg_tree *t)
{
    ff_writer *w = ctx;
    if (t->n_nodes > w->cap_memo && CN_RESERVE(w->memo, w->cap_memo, t->n_nodes) < 0)
        return -ENOMEM;
    memset(w->memo, 0xff, t->n_nodes * sizeof(*w->memo));
    for (size_t i = 0; i < t->n_nodes; i++) {
        if (t->nodes[i].self == 0)
            continue;
        int32_t st = node_stack(w, t, (int32_t)i);
        int rc = st < 0 ? st : push_sample(w, thread, st, 0, t->nodes[i].self);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- samples in thread and time order ---------------------------------------------- */

static int cmp_sample(const void *a, const void *b)
{
    const ff_sample *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1; /* retention rows (-1) first: they are older */
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Orders the samples by (thread, time, arrival) (cmp_sample). */
static int sort_samples(ff_writer *w)
{
    void *v = w->samples;
    int rc =
        cn_fmt__sort_by_thread(&v, w->n_samples, sizeof(*w->samples), offsetof(ff_sample, thread),
                               cn_agg_thread_count(w->p) + 1, cmp_sample);
    if (rc == 0) {
        w->samples = v; /* a new array of exactly n (at least 1) */
        w->cap_samples = w->n_samples ? w->n_samples : 1;
    } else if (rc == -ERANGE) { /* not a thread row: sort it all */
        qsort(w->samples, w->n_samples, sizeof(*w->samples), cmp_sample);
        rc = 0;
    }
    return rc;
}

static int collect(ff_writer *w, const cn_agg_query *q, cn_err *err)
{
    if (!w->raw)
        return cn_fmt__thread_trees(w->p, q, tree_samples, w, err);
    size_t n = cn_agg_stack_count(w->p);
    if (CN_RESERVE(w->memo, w->cap_memo, n ? n : 1) < 0)
        return -ENOMEM;
    memset(w->memo, 0xff, w->cap_memo * sizeof(*w->memo));
    return cn_agg_for_each_sample(w->p, q, raw_sample, w);
}

/* ---- JSON ------------------------------------------------------------------------ */

/* A JSON array of numbers streamed through a buffer: the sample columns hold a value per
 * sample, and a stdio call per value was the cost of the other writers (docs/perf-formats.md). */
typedef struct ff_arr {
    FILE *out;
    size_t n;
    bool first;
    char buf[4096];
} ff_arr;

static void arr_open(ff_arr *a, FILE *out, const char *key)
{
    a->out = out;
    a->n = 0;
    a->first = true;
    fprintf(out, "\"%s\":[", key);
}

static void arr_flush(ff_arr *a)
{
    fwrite(a->buf, 1, a->n, a->out);
    a->n = 0;
}

/* Room for one more value (a comma and CN_FMT__JSON_NUM_MAX bytes); returns where it goes. */
static char *arr_slot(ff_arr *a)
{
    if (a->n + CN_FMT__JSON_NUM_MAX + 1 > sizeof(a->buf))
        arr_flush(a);
    if (!a->first)
        a->buf[a->n++] = ',';
    a->first = false;
    return a->buf + a->n;
}

/* v, or null when v < 0 and null_neg (the format's nullable index columns). */
static void arr_int(ff_arr *a, int64_t v, bool null_neg)
{
    char *o = arr_slot(a);
    if (v < 0 && null_neg) {
        memcpy(o, "null", 4);
        a->n += 4;
        return;
    }
    size_t k = 0;
    if (v < 0)
        o[k++] = '-';
    a->n += k + cn_fmt__put_uint(o + k, v < 0 ? 0ULL - (uint64_t)v : (uint64_t)v);
}

static void arr_num(ff_arr *a, double v)
{
    char *o = arr_slot(a);
    a->n += cn_fmt__json_num_fmt(o, v);
}

static void arr_close(ff_arr *a)
{
    arr_flush(a);
    fputc(']', a->out);
}

/* `"key":[lit,lit,…]`: n copies of a literal (the format's columns canopy has nothing for). */
static void put_repeat(FILE *out, const char *key, const char *lit, size_t n)
{
    fprintf(out, "\"%s\":[", key);
    for (size_t i = 0; i < n; i++)
        fprintf(out, i ? ",%s" : "%s", lit);
    fputc(']', out);
}

/* One int column of a table of rows: `"key":[row[0].field,…]`. */
#define PUT_COLUMN(out, key, rows, n, field, null_neg)                                             \
    do {                                                                                           \
        ff_arr a_;                                                                                 \
        arr_open(&a_, (out), (key));                                                               \
        for (size_t i_ = 0; i_ < (n); i_++)                                                        \
            arr_int(&a_, (rows)[i_].field, (null_neg));                                            \
        arr_close(&a_);                                                                            \
    } while (0)

/* A GNU build-id as a Breakpad id: its first 16 bytes as a GUID (the first three fields
 * byte-swapped, as Breakpad's dump_syms reads them on a little-endian machine), upper-case,
 * and age 0. buf holds 34 bytes. */
static void breakpad_id(const char *build_id, char *buf)
{
    static const int order[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
    size_t len = strlen(build_id) / 2;
    for (int i = 0; i < 16; i++) {
        size_t b = (size_t)order[i];
        const char *h = b < len ? build_id + 2 * b : "00";
        buf[2 * i] = (char)(h[0] >= 'a' ? h[0] - 'a' + 'A' : h[0]);
        buf[2 * i + 1] = (char)(h[1] >= 'a' ? h[1] - 'a' + 'A' : h[1]);
    }
    memcpy(buf + 32, "0", 2);
}

static void write_lib(const cn_agg_profile *p, int32_t res, FILE *out)
{
    const char *name = cn_agg_resource_name(p, res), *path = cn_agg_resource_path(p, res);
    const char *id = cn_agg_resource_identity(p, res);
    char bp[34] = "";
    path = path ? path : name;
    if (cn_fmt__is_build_id(id))
        breakpad_id(id, bp);
    fputs("{\"arch\":\"\",\"name\":", out); /* arch: a profile does not record it */
    cn_fmt__json_str(out, name);
    fputs(",\"path\":", out);
    cn_fmt__json_str(out, path);
    fputs(",\"debugName\":", out);
    cn_fmt__json_str(out, name);
    fputs(",\"debugPath\":", out);
    cn_fmt__json_str(out, path);
    fprintf(out, ",\"breakpadId\":\"%s\",\"codeId\":", bp);
    if (bp[0])
        cn_fmt__json_str(out, id); /* the whole GNU build-id, as the format asks on Linux */
    else
        fputs("null", out);
    fputc('}', out);
}

static void write_categories(FILE *out)
{
    fputs("\"categories\":[", out);
    for (int c = 0; c < N_CAT; c++)
        fprintf(out, "%s{\"name\":\"%s\",\"color\":\"%s\",\"subcategories\":[%s]}", c ? "," : "",
                categories[c].name, categories[c].color, categories[c].subs);
    fputc(']', out);
}

/* A meta value as a number (0 when absent or not a number). */
static double meta_num(const cn_agg_profile *p, const char *key)
{
    const char *v = cn_agg_meta_get(p, key);
    char *end;
    double x = v && *v ? strtod(v, &end) : 0;
    return v && *v && !*end ? x : 0;
}

/* meta: the session's start (live/ records it to the second) and sampling interval (from
 * its frequency; 1 ms where the profile has none, e.g. imported files). */
static void write_meta(const ff_writer *w, FILE *out)
{
    double freq = meta_num(w->p, "freq");
    fputs("\"meta\":{\"interval\":", out);
    cn_fmt__json_num(out, freq > 0 ? 1000.0 / freq : 1.0);
    fputs(",\"startTime\":", out);
    cn_fmt__json_num(out, meta_num(w->p, "canopy.session.started") * 1000.0);
    fprintf(out,
            ",\"processType\":0,\"product\":\"canopy\",\"stackwalk\":1,\"version\":%d,"
            "\"preprocessedProfileVersion\":%d,\"symbolicated\":true,"
            "\"usesOnlyOneStackType\":true,\"sourceCodeIsNotOnSearchfox\":true,"
            "\"markerSchema\":[],",
            FF_GECKO_VERSION, FF_VERSION);
    write_categories(out);
    fputc('}', out);
}

/* The weight type of the profile's unit, and the factor from weights to it. */
static const char *weight_type(const cn_agg_profile *p, double *factor)
{
    double scale = cn_agg_profile_scale(p);
    switch (cn_agg_profile_unit(p)) {
    case CN_AGG_UNIT_NS:
        *factor = scale / 1e6;
        return "tracing-ms";
    case CN_AGG_UNIT_US:
        *factor = scale / 1e3;
        return "tracing-ms";
    case CN_AGG_UNIT_MS:
        *factor = scale;
        return "tracing-ms";
    default: /* samples, events: counts */
        *factor = scale;
        return "samples";
    }
}

/* The thread's identity and the tables a thread must have, up to its samples. */
static void write_thread_head(const ff_writer *w, int32_t thread, FILE *out)
{
    const cn_agg_profile *p = w->p;
    int32_t pid = thread >= 0 ? cn_agg_thread_pid(p, thread) : 0;
    int32_t tid = thread >= 0 ? cn_agg_thread_tid(p, thread) : 0;
    const char *name = thread >= 0 ? cn_agg_thread_name(p, thread) : NULL;
    const char *process = thread >= 0 ? cn_agg_process_name(p, pid) : NULL;
    /* A thread without a name shows as in --group-by thread; -1: samples of no known
     * thread, or the tree path's one query for all threads. */
    if (!name)
        name = thread >= 0 ? "?" : w->raw ? "unknown thread" : "all threads";
    fputs("{\"processType\":\"default\",\"processStartupTime\":0,\"processShutdownTime\":null,"
          "\"registerTime\":0,\"unregisterTime\":null,\"pausedRanges\":[],\"name\":",
          out);
    cn_fmt__json_str(out, name);
    if (process) {
        fputs(",\"processName\":", out);
        cn_fmt__json_str(out, process);
    }
    fprintf(out, ",\"isMainThread\":%s,\"pid\":\"%d\",\"tid\":%d,", pid == tid ? "true" : "false",
            (int)pid, (int)tid);
    fputs("\"markers\":{\"data\":[],\"name\":[],\"startTime\":[],\"endTime\":[],\"phase\":[],"
          "\"category\":[],\"length\":0},",
          out);
}

/* One thread of samples [i, j): times in ms since the profile's start. */
static void write_thread(const ff_writer *w, size_t i, size_t j, FILE *out)
{
    double factor;
    const char *type = weight_type(w->p, &factor);
    ff_arr a;
    write_thread_head(w, w->samples[i].thread, out);
    fputs("\"samples\":{", out);
    arr_open(&a, out, "stack");
    for (size_t k = i; k < j; k++)
        arr_int(&a, w->samples[k].stack, false);
    arr_close(&a);
    fputc(',', out);
    arr_open(&a, out, "time");
    for (size_t k = i; k < j; k++)
        arr_num(&a, w->samples[k].time > 0 ? (double)w->samples[k].time / 1e6 : 0);
    arr_close(&a);
    fputc(',', out);
    arr_open(&a, out, "weight");
    for (size_t k = i; k < j; k++)
        arr_num(&a, w->samples[k].weight * factor);
    arr_close(&a);
    fprintf(out, ",\"weightType\":\"%s\",\"length\":%zu}}", type, j - i);
}

static void write_threads(const ff_writer *w, FILE *out)
{
    fputs("\"threads\":[", out);
    for (size_t i = 0, j; i < w->n_samples; i = j) {
        for (j = i + 1; j < w->n_samples && w->samples[j].thread == w->samples[i].thread; j++)
            ;
        if (i)
            fputs(",\n", out);
        write_thread(w, i, j, out);
    }
    fputc(']', out);
}

static void write_strings(const ff_writer *w, FILE *out)
{
    fputs("\"stringArray\":[", out);
    for (size_t i = 0; i < w->n_strs; i++) {
        if (i)
            fputc(',', out);
        cn_fmt__json_str(out, w->strs[i]);
    }
    fputc(']', out);
}

static void write_frames(const ff_writer *w, FILE *out)
{
    size_t n = w->n_frames;
    fputs("\"frameTable\":{", out);
    PUT_COLUMN(out, "address", w->frames, n, addr, false);
    fputc(',', out);
    PUT_COLUMN(out, "inlineDepth", w->frames, n, depth, false);
    fputc(',', out);
    PUT_COLUMN(out, "category", w->frames, n, cat, false);
    fputc(',', out);
    PUT_COLUMN(out, "subcategory", w->frames, n, sub, false);
    fputc(',', out);
    PUT_COLUMN(out, "func", w->frames, n, func, false);
    fputc(',', out);
    PUT_COLUMN(out, "nativeSymbol", w->frames, n, sym, true);
    fputc(',', out);
    put_repeat(out, "innerWindowID", "0", n); /* 0: not a JavaScript frame of a page */
    fputc(',', out);
    PUT_COLUMN(out, "line", w->frames, n, line, true);
    fputc(',', out);
    put_repeat(out, "column", "null", n);
    fprintf(out, ",\"length\":%zu}", n);
}

static void write_funcs(const ff_writer *w, FILE *out)
{
    size_t n = w->n_funcs;
    fputs("\"funcTable\":{", out);
    PUT_COLUMN(out, "name", w->funcs, n, name, false);
    fputc(',', out);
    put_repeat(out, "isJS", "false", n);
    fputc(',', out);
    put_repeat(out, "relevantForJS", "false", n);
    fputc(',', out);
    PUT_COLUMN(out, "resource", w->funcs, n, res, false); /* -1: none, as the format says */
    fputc(',', out);
    PUT_COLUMN(out, "source", w->funcs, n, source, true);
    fputc(',', out);
    PUT_COLUMN(out, "lineNumber", w->funcs, n, line, true);
    fputc(',', out);
    put_repeat(out, "columnNumber", "null", n);
    fprintf(out, ",\"length\":%zu}", n);
}

/* The profiler's resource types: 1 a native library, 5 a URL, 0 anything else. */
static int resource_type(const cn_agg_profile *p, int32_t res)
{
    switch (cn_agg_resource_kind_of(p, res)) {
    case CN_AGG_RES_LIBRARY:
    case CN_AGG_RES_KERNEL:
        return 1;
    case CN_AGG_RES_URL:
        return 5;
    default:
        return 0;
    }
}

static void write_resources(const ff_writer *w, FILE *out)
{
    size_t n = w->n_res;
    ff_arr a;
    fputs("\"resourceTable\":{", out);
    PUT_COLUMN(out, "lib", w->res, n, lib, true);
    fputc(',', out);
    PUT_COLUMN(out, "name", w->res, n, name, false);
    fputc(',', out);
    put_repeat(out, "host", "null", n);
    fputc(',', out);
    arr_open(&a, out, "type");
    for (size_t i = 0; i < n; i++)
        arr_int(&a, resource_type(w->p, w->res[i].src), false);
    arr_close(&a);
    fprintf(out, ",\"length\":%zu}", n);
}

static void write_symbols(const ff_writer *w, FILE *out)
{
    size_t n = w->n_syms;
    fputs("\"nativeSymbols\":{", out);
    PUT_COLUMN(out, "libIndex", w->syms, n, lib, false);
    fputc(',', out);
    PUT_COLUMN(out, "address", w->syms, n, addr, false);
    fputc(',', out);
    PUT_COLUMN(out, "name", w->syms, n, name, false);
    fputc(',', out);
    put_repeat(out, "functionSize", "null", n); /* unknown: the profiler bounds it itself */
    fprintf(out, ",\"length\":%zu}", n);
}

static void write_sources(const ff_writer *w, FILE *out)
{
    size_t n = w->n_srcs;
    ff_arr a;
    fputs("\"sources\":{", out);
    put_repeat(out, "id", "null", n);
    fputc(',', out);
    arr_open(&a, out, "filename");
    for (size_t i = 0; i < n; i++)
        arr_int(&a, w->srcs[i], false);
    arr_close(&a);
    fputc(',', out);
    put_repeat(out, "startLine", "1", n); /* a source is a whole file */
    fputc(',', out);
    put_repeat(out, "startColumn", "1", n);
    fputc(',', out);
    put_repeat(out, "sourceMapURL", "null", n);
    fprintf(out, ",\"length\":%zu}", n);
}

static void write_shared(const ff_writer *w, FILE *out)
{
    fputs("\"shared\":{", out);
    write_strings(w, out);
    fputs(",\n\"stackTable\":{", out);
    PUT_COLUMN(out, "frame", w->stacks, w->n_stacks, frame, false);
    fputc(',', out);
    PUT_COLUMN(out, "prefix", w->stacks, w->n_stacks, prefix, true);
    fprintf(out, ",\"length\":%zu},\n", w->n_stacks);
    write_frames(w, out);
    fputs(",\n", out);
    write_funcs(w, out);
    fputs(",\n", out);
    write_resources(w, out);
    fputs(",\n", out);
    write_symbols(w, out);
    fputs(",\n", out);
    write_sources(w, out);
    fputc('}', out);
}

static void write_file(const ff_writer *w, FILE *out)
{
    fputc('{', out);
    write_meta(w, out);
    fputs(",\n\"libs\":[", out);
    for (size_t i = 0; i < w->n_libs; i++) {
        if (i)
            fputc(',', out);
        write_lib(w->p, w->libs[i], out);
    }
    fputs("],\n", out);
    write_threads(w, out);
    fputs(",\n", out);
    write_shared(w, out);
    fputs("}\n", out);
}

int cn_fmt_write_firefox(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *err)
{
    if (!p || !q || !out)
        return cn_err_set(err, -EINVAL, "firefox output: bad arguments");
    ff_writer w = {.p = p, .raw = cn_fmt__query_is_raw(q)};
    int rc = collect(&w, q, err); /* a failed query has set err */
    if (rc == 0)
        rc = sort_samples(&w);
    if (rc == 0) {
        write_file(&w, out);
        rc = cn_fmt__finish_output(out, "firefox", err);
    } else if (rc == -ENOMEM) {
        rc = cn_err_set(err, rc, "firefox output: out of memory");
    }
    writer_free(&w);
    return rc;
}
