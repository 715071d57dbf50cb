/* export_speedscope.c — speedscope's JSON file format (speedscope.app
 * file-format-schema.json): one sampled profile per thread for trees, one evented profile
 * per thread for timelines.
 *
 * Frames are shared across profiles, one per func (an inline chain becomes one frame per
 * func, outer first). Stacks are written root first, as speedscope reads them.
 * Untransformed queries write every thread's samples in time order (consecutive samples
 * on the same stack merged into one weighted sample), so speedscope's "Time Order" view
 * is meaningful; transformed queries run the query once per thread and write each call
 * node with self weight as one weighted stack (a tree keeps no time order). Weights are
 * display values (weight × scale); the unit is nanoseconds/microseconds/milliseconds for
 * time units, "none" for samples and events.
 */
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

typedef struct ss_sample {
    int32_t thread;
    int32_t stack;
    int64_t time;
    double weight;
    size_t seq; /* arrival order: makes the sort stable */
} ss_sample;

typedef struct ss_writer {
    cn_agg_profile *p;
    FILE *out;
    /* func -> shared frame index, -1 unused. Grows on demand: a --group-by query interns
     * its group funcs into the profile while the writer runs (transformed_profile). */
    int32_t *frame_of;
    size_t cap_frame_of;
    int32_t *frames; /* shared frame index -> func */
    size_t n_frames, cap_frames;
    ss_sample *samples; /* raw path */
    size_t n_samples, cap_samples;
    int32_t *path; /* scratch: one stack's funcs, leaf first */
    size_t path_cap;
    bool first_profile;
    /* raw path: each distinct stack's JSON array text, made once (stack_text()) */
    cn_u64map text_index; /* stack -> index into text_off */
    size_t *text_off;     /* [index, index + 1) -> range in text */
    size_t n_text_off, cap_text_off;
    char *text;
    size_t n_text, cap_text;
} ss_writer;

static const char *ss_unit(const cn_agg_profile *p)
{
    switch (cn_agg_profile_unit(p)) {
    case CN_AGG_UNIT_NS:
        return "nanoseconds";
    case CN_AGG_UNIT_US:
        return "microseconds";
    case CN_AGG_UNIT_MS:
        return "milliseconds";
    default:
        return "none";
    }
}

/* The shared frame index of func (a func of w->p), numbered on first use. -ENOMEM. */
static int32_t frame_index(ss_writer *w, int32_t func)
{
    size_t f = (size_t)func, old = w->cap_frame_of;
    if (f >= old) {
        if (CN_RESERVE(w->frame_of, w->cap_frame_of, f + 1) < 0)
            return -ENOMEM;
        memset(w->frame_of + old, 0xff, (w->cap_frame_of - old) * sizeof(*w->frame_of));
    }
    if (w->frame_of[f] < 0) {
        if (CN_RESERVE(w->frames, w->cap_frames, w->n_frames + 1) < 0)
            return -ENOMEM;
        w->frames[w->n_frames] = func;
        w->frame_of[f] = (int32_t)w->n_frames++;
    }
    return w->frame_of[f];
}

static int path_push(ss_writer *w, size_t n, int32_t func)
{
    if (n >= w->path_cap && CN_RESERVE(w->path, w->path_cap, n + 1) < 0)
        return -ENOMEM;
    w->path[n] = func;
    return 0;
}

/* The text of frame stack `stack` as a root-first JSON array of frame indexes, made on
 * first use (which numbers its frames, as writing it would) and kept in w->text.
 * Returns the index of its range in w->text_off, or -ENOMEM. */
static int32_t stack_text(ss_writer *w, int32_t stack)
{
    int32_t x = cn_u64map_get(&w->text_index, (uint64_t)(uint32_t)stack);
    if (x >= 0)
        return x;
    size_t n = cn_agg_stack_funcs(w->p, stack, w->path, w->path_cap); /* leaf first */
    if (n > w->path_cap) {
        if (CN_RESERVE(w->path, w->path_cap, n) < 0)
            return -ENOMEM;
        cn_agg_stack_funcs(w->p, stack, w->path, w->path_cap);
    }
    size_t need = w->n_text + 2 + n * 11; /* "[" "]" and up to 10 digits and "," each */
    if (need > w->cap_text && CN_RESERVE(w->text, w->cap_text, need) < 0)
        return -ENOMEM;
    if (w->n_text_off + 2 > w->cap_text_off &&
        CN_RESERVE(w->text_off, w->cap_text_off, w->n_text_off + 2) < 0)
        return -ENOMEM;
    if (w->n_text_off == 0)
        w->text_off[w->n_text_off++] = 0;
    char *o = w->text + w->n_text;
    *o++ = '[';
    for (size_t i = n; i-- > 0;) {
        int32_t fi = frame_index(w, w->path[i]);
        if (fi < 0)
            return fi;
        if (i + 1 != n)
            *o++ = ',';
        o += cn_fmt__put_uint(o, (uint64_t)fi);
    }
    *o++ = ']';
    w->n_text = (size_t)(o - w->text);
    x = (int32_t)(w->n_text_off - 1);
    w->text_off[w->n_text_off++] = w->n_text;
    if (cn_u64map_put(&w->text_index, (uint64_t)(uint32_t)stack, x) < 0)
        return -ENOMEM;
    return x;
}

static int put_node_stack(ss_writer *w, const cn_agg_tree *t, int32_t node)
{
    size_t n = 0;
    for (int32_t nd = node; nd >= 0; nd = t->nodes[nd].parent)
        if (path_push(w, n++, t->nodes[nd].func) < 0)
            return -ENOMEM;
    putc('[', w->out);
    for (size_t i = n; i-- > 0;) {
        int32_t fi = frame_index(w, w->path[i]);
        if (fi < 0)
            return fi;
        fprintf(w->out, "%s%d", i + 1 == n ? "" : ",", (int)fi);
    }
    putc(']', w->out);
    return 0;
}

static void profile_name(const cn_agg_profile *p, int32_t thread, char *buf, size_t len)
{
    if (thread < 0) {
        snprintf(buf, len, "all threads");
        return;
    }
    const char *name = cn_agg_thread_name(p, thread);
    snprintf(buf, len, "%s [%d]", name ? name : "thread", (int)cn_agg_thread_tid(p, thread));
}

static void open_profile(ss_writer *w, const char *type, const char *name, double end)
{
    fputs(w->first_profile ? "\n" : ",\n", w->out);
    w->first_profile = false;
    fprintf(w->out, "{\"type\":\"%s\",\"name\":", type);
    cn_fmt__json_str(w->out, name);
    fprintf(w->out, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":", ss_unit(w->p));
    cn_fmt__json_num(w->out, end);
}

/* ---- raw path: samples in time order ---------------------------------------------- */

static int collect_sample(void *ctx, int32_t stack, int32_t thread, int64_t time_ns, double weight,
                          int64_t count)
{
    ss_writer *w = ctx;
    if (weight == 0)
        return 0; /* weighs nothing in any view */
    if (w->n_samples == w->cap_samples &&
        CN_RESERVE(w->samples, w->cap_samples, w->n_samples + 1) < 0)
        return -ENOMEM;
    w->samples[w->n_samples] = (ss_sample){thread, stack, time_ns, weight, w->n_samples};
    w->n_samples++;
    return 0;
}

/* Sort key of a sample within its thread: retention rows (time -1) after timed ones. */
static int64_t time_key(const ss_sample *x)
{
    return x->time < 0 ? INT64_MAX : x->time;
}

static int cmp_thread(const void *a, const void *b)
{
    const ss_sample *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    int64_t tx = time_key(x), ty = time_key(y);
    if (tx != ty)
        return tx < ty ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Orders the samples by (thread, time, arrival) as cmp_thread. */
static int sort_samples(ss_writer *w)
{
    void *v = w->samples;
    int rc =
        cn_fmt__sort_by_thread(&v, w->n_samples, sizeof(*w->samples), offsetof(ss_sample, thread),
                               cn_agg_thread_count(w->p) + 1, cmp_thread);
    if (rc == 0) {
        w->samples = v; /* a new array of exactly n (at least 1) */
        w->cap_samples = w->n_samples ? w->n_samples : 1;
    } else if (rc == -ERANGE) { /* not a thread row: sort it all */
        qsort(w->samples, w->n_samples, sizeof(*w->samples), cmp_thread);
        rc = 0;
    }
    return rc;
}

/* Raw path, first pass: collects and sorts the samples, merges runs of one stack into
 * one weighted sample, and makes each stack's text in output order (which numbers the
 * frames). The merged samples are left at the start of w->samples (stack = the text's
 * index, seq = index of the thread's profile), with thread totals in *totals (owned by
 * the caller). */
static int prepare_raw(ss_writer *w, const cn_agg_query *q, double **totals, size_t *n_profiles)
{
    int rc = cn_agg_for_each_sample(w->p, q, collect_sample, w);
    if (rc < 0)
        return rc;
    if (w->n_samples > 1 && (rc = sort_samples(w)) < 0)
        return rc;
    size_t n_out = 0, n_prof = 0;
    for (size_t i = 0; i < w->n_samples;) { /* count the threads' profiles */
        size_t j = i;
        while (j < w->n_samples && w->samples[j].thread == w->samples[i].thread)
            j++;
        n_prof++;
        i = j;
    }
    if (!(*totals = calloc(n_prof ? n_prof : 1, sizeof(**totals))))
        return -ENOMEM;
    n_prof = 0;
    for (size_t i = 0; i < w->n_samples;) {
        size_t j = i;
        double total = 0;
        while (j < w->n_samples && w->samples[j].thread == w->samples[i].thread)
            total += w->samples[j++].weight;
        (*totals)[n_prof] = total;
        for (size_t k = i; k < j;) {
            size_t e = k + 1;
            double wsum = w->samples[k].weight;
            while (e < j && w->samples[e].stack == w->samples[k].stack)
                wsum += w->samples[e++].weight;
            int32_t x = stack_text(w, w->samples[k].stack);
            if (x < 0)
                return x;
            /* n_out <= k: the merged samples overwrite only samples already read */
            w->samples[n_out++] = (ss_sample){w->samples[k].thread, x, 0, wsum, n_prof};
            k = e;
        }
        n_prof++;
        i = j;
    }
    w->n_samples = n_out;
    *n_profiles = n_prof;
    return 0;
}

/* Raw path, second pass: one sampled profile per thread, straight to w->out. */
static void write_raw(ss_writer *w, const double *totals)
{
    double scale = cn_agg_profile_scale(w->p);
    char name[320];
    for (size_t i = 0; i < w->n_samples;) {
        size_t j = i;
        while (j < w->n_samples && w->samples[j].seq == w->samples[i].seq)
            j++;
        profile_name(w->p, w->samples[i].thread, name, sizeof(name));
        open_profile(w, "sampled", name, totals[w->samples[i].seq] * scale);
        fputs(",\"samples\":[", w->out);
        for (size_t k = i; k < j; k++) {
            if (k > i)
                putc(',', w->out);
            int32_t x = w->samples[k].stack;
            fwrite(w->text + w->text_off[x], 1, w->text_off[x + 1] - w->text_off[x], w->out);
        }
        fputs("],\"weights\":[", w->out);
        for (size_t k = i; k < j; k++) {
            if (k > i)
                putc(',', w->out);
            cn_fmt__json_num(w->out, w->samples[k].weight * scale);
        }
        fputs("]}", w->out);
        i = j;
    }
}

/* ---- tree path: one query per thread ---------------------------------------------- */

static int write_tree_profile(ss_writer *w, const cn_agg_tree *t, const char *name)
{
    double scale = cn_agg_profile_scale(w->p);
    double total = 0;
    for (size_t i = 0; i < t->n_nodes; i++)
        total += t->nodes[i].self;
    open_profile(w, "sampled", name, total * scale);
    fputs(",\"samples\":[", w->out);
    size_t n = 0;
    for (size_t i = 0; i < t->n_nodes; i++) {
        if (t->nodes[i].self == 0)
            continue;
        if (n++)
            putc(',', w->out);
        int rc = put_node_stack(w, t, (int32_t)i);
        if (rc < 0)
            return rc;
    }
    fputs("],\"weights\":[", w->out);
    n = 0;
    for (size_t i = 0; i < t->n_nodes; i++) {
        if (t->nodes[i].self == 0)
            continue;
        if (n++)
            putc(',', w->out);
        cn_fmt__json_num(w->out, t->nodes[i].self * scale);
    }
    fputs("]}", w->out);
    return 0;
}

/* cn_fmt__thread_trees' callback: one sampled profile per thread (or "all threads"). */
static int transformed_profile(void *ctx, int32_t thread, const cn_agg_tree *t)
{
    ss_writer *w = ctx;
    char name[320];
    profile_name(w->p, thread, name, sizeof(name));
    return write_tree_profile(w, t, name);
}

/* ---- shared frames and the file --------------------------------------------------- */

static void write_frames(ss_writer *w)
{
    const cn_agg_profile *p = w->p;
    fputs("\"shared\":{\"frames\":[", w->out);
    for (size_t i = 0; i < w->n_frames; i++) {
        int32_t f = w->frames[i];
        fputs(i ? ",\n{\"name\":" : "\n{\"name\":", w->out);
        cn_fmt__json_str(w->out, cn_agg_func_name(p, f));
        const char *file = cn_agg_func_file(p, f);
        int32_t res = cn_agg_func_resource(p, f);
        if (!file && res >= 0)
            file = cn_agg_resource_name(p, res);
        if (file) {
            fputs(",\"file\":", w->out);
            cn_fmt__json_str(w->out, file);
        }
        if (cn_agg_func_line(p, f) > 0)
            fprintf(w->out, ",\"line\":%d", (int)cn_agg_func_line(p, f));
        putc('}', w->out);
    }
    fputs("]}", w->out);
}

static int writer_init(ss_writer *w, cn_agg_profile *p, FILE *out)
{
    memset(w, 0, sizeof(*w));
    w->p = p;
    w->out = out;
    w->first_profile = true;
    /* Sized for the funcs the profile has now; frame_index grows the map for the ones a
     * query adds. */
    size_t n = cn_agg_func_count(p) ? cn_agg_func_count(p) : 1;
    if (CN_RESERVE(w->frame_of, w->cap_frame_of, n) < 0)
        return -ENOMEM;
    memset(w->frame_of, 0xff, w->cap_frame_of * sizeof(*w->frame_of));
    return 0;
}

static void writer_free(ss_writer *w)
{
    cn_u64map_clear(&w->text_index);
    free(w->text_off);
    free(w->text);
    free(w->frame_of);
    free(w->frames);
    free(w->samples);
    free(w->path);
}

static void write_head(ss_writer *w)
{
    fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n", w->out);
    write_frames(w);
    fputs(",\n\"profiles\":[", w->out);
}

/* Closes the file; a sampled file without profiles gets an empty one (`fill`). */
static void write_tail(ss_writer *w, const char *name, bool fill)
{
    if (fill && w->first_profile) { /* no samples: one empty profile for the viewers */
        open_profile(w, "sampled", "empty", 0);
        fputs(",\"samples\":[],\"weights\":[]}", w->out);
    }
    fputs("],\n\"name\":", w->out);
    cn_fmt__json_str(w->out, name);
    fputs(",\"activeProfileIndex\":0,\"exporter\":\"canopy " CANOPY_VERSION "\"}\n", w->out);
}

/* The shared frame list precedes the profiles in the file but is only known once every
 * stack has been seen: the raw path makes every stack's text first (prepare_raw) and
 * then writes straight to out; the other paths write the profiles to a memory stream
 * first. */
static int write_file(ss_writer *w, const char *body, size_t len, const char *name, bool fill)
{
    write_head(w);
    fwrite(body, 1, len, w->out);
    write_tail(w, name, fill);
    return 0;
}

int cn_fmt_write_speedscope(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *err)
{
    if (!p || !q || !out)
        return cn_err_set(err, -EINVAL, "speedscope output: bad arguments");
    ss_writer w;
    char *body = NULL;
    size_t len = 0;
    FILE *mem = NULL;
    double *totals = NULL;
    const char *name = cn_agg_meta_get(p, "name");
    name = name ? name : "canopy profile";
    int rc = writer_init(&w, p, out);
    if (rc < 0)
        goto nomem;
    if (cn_fmt__query_is_raw(q)) {
        size_t n_profiles = 0;
        if ((rc = prepare_raw(&w, q, &totals, &n_profiles)) < 0)
            goto fail;
        write_head(&w);
        write_raw(&w, totals);
        write_tail(&w, name, true);
        rc = cn_fmt__finish_output(out, "speedscope", err);
        goto out;
    }
    if (!(mem = open_memstream(&body, &len)))
        goto nomem;
    w.out = mem;
    rc = cn_fmt__thread_trees(w.p, q, transformed_profile, &w, err);
    if (fclose(mem) != 0 && rc == 0)
        rc = -ENOMEM;
    mem = NULL;
    if (rc < 0)
        goto fail;
    w.out = out;
    write_file(&w, body, len, name, true);
    rc = cn_fmt__finish_output(out, "speedscope", err);
    goto out;
fail:
    if (rc != -ENOMEM)
        goto out; /* err set by the query */
nomem:
    rc = cn_err_set(err, -ENOMEM, "speedscope output: out of memory");
out:
    if (mem)
        fclose(mem);
    free(body);
    free(totals);
    writer_free(&w);
    return rc;
}

/* ---- evented profiles from an estimated timeline ---------------------------------- */

static int cmp_call(const void *a, const void *b)
{
    const cn_agg_call *x = *(const cn_agg_call *const *)a, *y = *(const cn_agg_call *const *)b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns ? -1 : 1;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return 0;
}

/* Writes the calls of one tid (sorted) as balanced open/close events with
 * non-decreasing times: a call closes when a call at its depth or above starts, at
 * the latest at its own end. */
static int write_events(ss_writer *w, const cn_agg_call **calls, size_t n, int64_t t0,
                        const cn_agg_call **open)
{
    size_t depth = 0;
    int64_t last = 0;
    bool first = true;
#define EMIT(kind, call, at)                                                                       \
    do {                                                                                           \
        int64_t at_ = (at)-t0 < last ? last : (at)-t0;                                             \
        int32_t fi_ = frame_index(w, (call)->func);                                                \
        if (fi_ < 0)                                                                               \
            return fi_;                                                                            \
        last = at_;                                                                                \
        fprintf(w->out, "%s{\"type\":\"%s\",\"frame\":%d,\"at\":%" PRId64 "}", first ? "" : ",",   \
                kind, (int)fi_, at_);                                                              \
        first = false;                                                                             \
    } while (0)
    for (size_t i = 0; i < n; i++) {
        const cn_agg_call *c = calls[i];
        while (depth > 0 && (open[depth - 1]->depth >= c->depth ||
                             open[depth - 1]->start_ns + open[depth - 1]->dur_ns <= c->start_ns)) {
            const cn_agg_call *o = open[--depth];
            EMIT("C", o, o->start_ns + o->dur_ns);
        }
        EMIT("O", c, c->start_ns);
        open[depth++] = c;
    }
    while (depth > 0) {
        const cn_agg_call *o = open[--depth];
        EMIT("C", o, o->start_ns + o->dur_ns);
    }
#undef EMIT
    return 0;
}

int cn_fmt_write_timeline_speedscope(cn_agg_profile *p, const cn_agg_call *calls, size_t n,
                                     FILE *out, cn_err *err)
{
    ss_writer w;
    char *body = NULL;
    size_t len = 0;
    FILE *mem = NULL;
    const cn_agg_call **sorted = NULL, **open = NULL;
    int rc = writer_init(&w, p, out);
    if (rc < 0 || !(mem = open_memstream(&body, &len)))
        goto nomem;
    if (!(sorted = malloc((n ? n : 1) * sizeof(*sorted))) ||
        !(open = malloc((n ? n : 1) * sizeof(*open))))
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        if (calls[i].func < 0 || (size_t)calls[i].func >= cn_agg_func_count(p)) {
            rc = cn_err_set(err, -EINVAL, "speedscope output: call %zu has no func", i);
            goto out;
        }
        sorted[i] = &calls[i];
    }
    if (n > 1)
        qsort(sorted, n, sizeof(*sorted), cmp_call);
    w.out = mem;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        int64_t t0 = sorted[i]->start_ns, t1 = t0;
        while (j < n && sorted[j]->tid == sorted[i]->tid) {
            int64_t e = sorted[j]->start_ns + sorted[j]->dur_ns;
            t1 = e > t1 ? e : t1;
            j++;
        }
        char name[64];
        snprintf(name, sizeof(name), "tid %d", (int)sorted[i]->tid);
        fputs(w.first_profile ? "\n" : ",\n", w.out);
        w.first_profile = false;
        fputs("{\"type\":\"evented\",\"name\":", w.out);
        cn_fmt__json_str(w.out, name);
        fprintf(w.out,
                ",\"unit\":\"nanoseconds\",\"startValue\":0,\"endValue\":%" PRId64 ",\"events\":[",
                t1 - t0);
        if ((rc = write_events(&w, sorted + i, j - i, t0, open)) < 0)
            goto nomem;
        fputs("]}", w.out);
        i = j;
    }
    if (fclose(mem) != 0) {
        mem = NULL;
        goto nomem;
    }
    mem = NULL;
    w.out = out;
    write_file(&w, body, len, "canopy timeline", false);
    rc = cn_fmt__finish_output(out, "speedscope", err);
    goto out;
nomem:
    rc = cn_err_set(err, -ENOMEM, "speedscope output: out of memory");
out:
    if (mem)
        fclose(mem);
    free(body);
    free(sorted);
    free(open);
    writer_free(&w);
    return rc;
}
