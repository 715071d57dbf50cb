/* timeline.c — estimated calls from consecutive samples (docs/calltree.md §5.5 without trace
 * events).
 *
 * Per thread, in time order: each sample's path (after the query's transforms, from its
 * timeline stack) is compared func by func with the stack of open calls; calls below the
 * first difference end at this sample's time, the sample's remaining funcs open at it.
 * A sample without a path (no stack, or dropped by a transform) ends every open call.
 * Calls still open after a thread's last sample end at that sample's time. Samples are
 * first grouped by thread with a counting sort (stable, so time order is kept).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "q_engine.h"

typedef struct open_call {
    int32_t func;
    int64_t start;
} open_call;

typedef struct tl {
    cn_agg_call *calls;
    size_t n, cap;
    open_call *open;
    size_t n_open, cap_open;
    int32_t *path;
    size_t cap_path;
} tl;

static int close_to(tl *s, size_t depth, int64_t t, int32_t tid)
{
    while (s->n_open > depth) {
        open_call *c = &s->open[--s->n_open];
        if (CN_RESERVE(s->calls, s->cap, s->n + 1) < 0)
            return -ENOMEM;
        s->calls[s->n++] = (cn_agg_call){.func = c->func,
                                         .tid = tid,
                                         .depth = (int32_t)s->n_open,
                                         .start_ns = c->start,
                                         .dur_ns = t - c->start};
    }
    return 0;
}

/* Feeds one sample whose final row is r (or -1). */
static int feed(tl *s, const cn_agg__qtable *t, int32_t r, int64_t time, int32_t tid)
{
    size_t depth = 0;
    for (int32_t x = r; x >= 0; x = t->prefix[x])
        depth++;
    if (CN_RESERVE(s->path, s->cap_path, depth + 1) < 0 ||
        CN_RESERVE(s->open, s->cap_open, depth + 1) < 0)
        return -ENOMEM;
    size_t i = depth;
    for (int32_t x = r; x >= 0; x = t->prefix[x])
        s->path[--i] = t->func[x];
    size_t same = 0;
    while (same < depth && same < s->n_open && s->open[same].func == s->path[same])
        same++;
    if (close_to(s, same, time, tid) < 0)
        return -ENOMEM;
    for (size_t d = same; d < depth; d++)
        s->open[s->n_open++] = (open_call){.func = s->path[d], .start = time};
    return 0;
}

/* Thread slot of sample i: 0 for no (or an unknown) thread, else thread + 1. */
static size_t slot_of(const cn_agg_profile *p, size_t i)
{
    int32_t th = p->s_thread[i];
    return th >= 0 && (size_t)th < p->n_thr ? (size_t)th + 1 : 0;
}

static int call_cmp(const void *a, const void *b)
{
    const cn_agg_call *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns ? -1 : 1;
    return x->depth < y->depth ? -1 : x->depth > y->depth;
}

int cn_agg_timeline(cn_agg_profile *p, const cn_agg_query *q, cn_agg_call **calls, size_t *n_calls,
                    cn_err *err)
{
    cn_agg__qrun run;
    tl s = {0};
    size_t *order = NULL, *start = NULL;
    int rc = cn_agg__qrun_init(&run, p, q, CN_AGG__QCACHE(p), err);
    if (rc == 0)
        rc = cn_agg__qrun_transform_all(&run, err);
    if (rc < 0)
        goto out;
    rc = -ENOMEM;
    size_t nt = p->n_thr + 1; /* slot 0: samples without a thread */
    size_t ns = run.hi - run.lo;
    order = malloc((ns ? ns : 1) * sizeof(*order));
    start = calloc(nt + 1, sizeof(*start));
    if (!order || !start)
        goto nomem;
    for (size_t i = run.lo; i < run.hi; i++)
        start[slot_of(p, i) + 1]++;
    for (size_t k = 1; k <= nt; k++)
        start[k] += start[k - 1];
    for (size_t i = run.lo; i < run.hi; i++)
        order[start[slot_of(p, i)]++] = i;
    /* start[k] is now the end of thread slot k. */
    size_t b = 0;
    for (size_t k = 0; k < nt; k++) {
        size_t e = start[k];
        int32_t th = (int32_t)k - 1;
        int32_t tid = th >= 0 ? p->thr_tid[th] : -1;
        if (b == e || !cn_agg__qrun_keep(&run, th)) {
            b = e;
            continue;
        }
        int64_t last = 0;
        for (size_t j = b; j < e; j++) {
            size_t i = order[j];
            int32_t stack = cn_agg_sample_timeline_stack(p, i);
            int32_t base = cn_agg__qrun_base(&run, stack, th);
            int32_t r = base >= 0 ? run.rmap[base] : -1;
            last = p->s_time[i];
            if (feed(&s, &run.t, r, last, tid) < 0)
                goto nomem;
        }
        if (close_to(&s, 0, last, tid) < 0)
            goto nomem;
        b = e;
    }
    if (s.n > 1) /* an empty array may be NULL, which qsort must not see */
        qsort(s.calls, s.n, sizeof(*s.calls), call_cmp);
    *calls = s.calls;
    *n_calls = s.n;
    s.calls = NULL;
    rc = 0;
    goto out;
nomem:
    rc = cn_err_set(err, -ENOMEM, "timeline: out of memory");
out:
    free(s.calls);
    free(s.open);
    free(s.path);
    free(order);
    free(start);
    cn_agg__qrun_free(&run);
    return rc;
}

/* ---- activity ------------------------------------------------------------------------- */

int cn_agg_activity(cn_agg_profile *p, const cn_agg_query *q, int64_t end_ns, double *w, size_t n,
                    cn_err *err)
{
    cn_agg__qrun run;
    int rc = cn_agg__qrun_init(&run, p, q, CN_AGG__QCACHE(p), err);
    if (rc == 0)
        rc = cn_agg__qrun_transform_all(&run, err);
    for (size_t i = run.lo; rc == 0 && end_ns > 0 && i < run.hi; i++) {
        int32_t th = p->s_thread[i];
        int64_t t = p->s_time[i];
        if (t < 0 || t >= end_ns || p->s_stack[i] < 0 || !cn_agg__qrun_keep(&run, th))
            continue;
        int32_t base = cn_agg__qrun_base(&run, p->s_stack[i], th);
        if (base < 0 || run.rmap[base] < 0) /* dropped by a transform (or the search) */
            continue;
        size_t b = (size_t)((double)t / (double)end_ns * (double)n);
        w[b < n ? b : n - 1] += cn_agg__weight(p, i);
    }
    cn_agg__qrun_free(&run);
    return rc;
}
