/* samples.c — the sample table, its time order, and retention.
 *
 * Samples are appended as they arrive. Queries need them sorted by time (a time range is
 * then a binary search), so an out-of-order append only marks the table unsorted and the
 * next query sorts it once, stably. Retention folds old samples into an all-time
 * accumulator keyed by (stack, thread), so all-time totals never lose a sample while the
 * raw table stays bounded.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agg_internal.h"

/* s_tl_stack's value for "no timeline stack of its own: the sample's stack" (-1 is taken:
 * "no path on the timeline"). */
#define TL_SAME (-2)

static int reserve_samples(cn_agg_profile *p, size_t n)
{
    if (n <= p->cap_sample)
        return 0;
    size_t c[5] = {p->cap_sample, p->cap_sample, p->cap_sample, p->cap_sample, p->cap_sample};
    if (CN_RESERVE(p->s_stack, c[0], n) < 0 || CN_RESERVE(p->s_thread, c[1], n) < 0 ||
        CN_RESERVE(p->s_time, c[2], n) < 0)
        return -ENOMEM;
    if (p->s_weight && CN_RESERVE(p->s_weight, c[3], n) < 0)
        return -ENOMEM;
    if (p->s_tl_stack && CN_RESERVE(p->s_tl_stack, c[4], n) < 0)
        return -ENOMEM;
    size_t m = c[0];
    for (int i = 1; i < 3; i++)
        m = c[i] < m ? c[i] : m;
    if (p->s_weight && c[3] < m)
        m = c[3];
    if (p->s_tl_stack && c[4] < m)
        m = c[4];
    p->cap_sample = m;
    return 0;
}

/* The weight column, made when the first weight other than 1 arrives. 0 or -ENOMEM. */
static int weights_make(cn_agg_profile *p)
{
    if (p->s_weight)
        return 0;
    p->s_weight = malloc((p->cap_sample ? p->cap_sample : 1) * sizeof(*p->s_weight));
    if (!p->s_weight)
        return -ENOMEM;
    for (size_t k = 0; k < p->n_sample; k++)
        p->s_weight[k] = 1.0;
    return 0;
}

int cn_agg_add_sample(cn_agg_profile *p, int32_t stack, int64_t time_ns, double weight,
                      int32_t thread)
{
    if (stack < -1 || (stack >= 0 && (size_t)stack >= p->n_stack) || thread < -1 ||
        (thread >= 0 && (size_t)thread >= p->n_thr))
        return -EINVAL;
    if (p->n_sample == p->cap_sample && reserve_samples(p, p->n_sample + 1) < 0)
        return -ENOMEM;
    if (weight != 1.0 && weights_make(p) < 0)
        return -ENOMEM;
    size_t i = p->n_sample;
    if (i > 0 && time_ns < p->s_time[i - 1])
        p->unsorted = true;
    p->s_stack[i] = stack;
    p->s_time[i] = time_ns;
    if (p->s_weight)
        p->s_weight[i] = weight;
    p->s_thread[i] = thread;
    if (p->s_tl_stack)
        p->s_tl_stack[i] = TL_SAME;
    p->n_sample++;
    return 0;
}

int cn_agg_sample_set_timeline_stack(cn_agg_profile *p, size_t i, int32_t stack)
{
    if (i >= p->n_sample || stack < -1 || (stack >= 0 && (size_t)stack >= p->n_stack))
        return -ERANGE;
    if (!p->s_tl_stack) {
        p->s_tl_stack = malloc((p->cap_sample ? p->cap_sample : 1) * sizeof(*p->s_tl_stack));
        if (!p->s_tl_stack)
            return -ENOMEM;
        for (size_t k = 0; k < p->n_sample; k++)
            p->s_tl_stack[k] = TL_SAME;
    }
    p->s_tl_stack[i] = stack;
    return 0;
}

int32_t cn_agg_sample_timeline_stack(const cn_agg_profile *p, size_t i)
{
    if (i >= p->n_sample)
        return -1;
    if (p->s_tl_stack && p->s_tl_stack[i] != TL_SAME)
        return p->s_tl_stack[i];
    return p->s_stack[i];
}

size_t cn_agg_sample_count(const cn_agg_profile *p)
{
    return p->n_sample;
}

int32_t cn_agg_sample_stack(const cn_agg_profile *p, size_t i)
{
    return i < p->n_sample ? p->s_stack[i] : -1;
}

int64_t cn_agg_sample_time(const cn_agg_profile *p, size_t i)
{
    return i < p->n_sample ? p->s_time[i] : 0;
}

double cn_agg_sample_weight(const cn_agg_profile *p, size_t i)
{
    return i < p->n_sample ? cn_agg__weight(p, i) : 0.0;
}

int32_t cn_agg_sample_thread(const cn_agg_profile *p, size_t i)
{
    return i < p->n_sample ? p->s_thread[i] : -1;
}

int cn_agg_sample_set_time(cn_agg_profile *p, size_t i, int64_t time_ns)
{
    if (i >= p->n_sample)
        return -ERANGE;
    p->s_time[i] = time_ns;
    /* Only a neighbour can tell: the sort re-checks the whole table before sorting. */
    if ((i > 0 && time_ns < p->s_time[i - 1]) ||
        (i + 1 < p->n_sample && time_ns > p->s_time[i + 1]))
        p->unsorted = true;
    return 0;
}

int cn_agg_sample_set_weight(cn_agg_profile *p, size_t i, double weight)
{
    if (i >= p->n_sample)
        return -ERANGE;
    if (weight != 1.0 && weights_make(p) < 0)
        return -ENOMEM;
    if (p->s_weight)
        p->s_weight[i] = weight;
    return 0;
}

#ifndef NDEBUG
/* True when the sample table is in time order (cn_agg.h: kept sorted for range queries). */
static bool samples_in_order(const cn_agg_profile *p)
{
    for (size_t i = 1; i < p->n_sample; i++)
        if (p->s_time[i - 1] > p->s_time[i])
            return false;
    return true;
}
#endif

/* ---- sorting ---------------------------------------------------------------------- */

struct order {
    int64_t time;
    size_t index;
};

static int order_cmp(const void *a, const void *b)
{
    const struct order *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Applies the permutation ord to one column of elem-sized values, through tmp. */
static void permute(void *col, const struct order *ord, size_t n, size_t elem, void *tmp)
{
    char *src = col, *dst = tmp;
    for (size_t i = 0; i < n; i++)
        memcpy(dst + i * elem, src + ord[i].index * elem, elem);
    memcpy(col, tmp, n * elem);
}

void cn_agg__samples_sort(cn_agg_profile *p)
{
    if (!p->unsorted)
        return;
    size_t n = p->n_sample, k = 1;
    while (k < n && p->s_time[k - 1] <= p->s_time[k])
        k++;
    if (k >= n) { /* a rewrite (cn_agg_sample_set_time) left it in order after all */
        p->unsorted = false;
        return;
    }
    struct order *ord = malloc(n * sizeof(*ord));
    void *tmp = malloc(n * sizeof(int64_t));
    if (!ord || !tmp)
        goto out; /* stays unsorted; queries fall back to a full scan */
    for (size_t i = 0; i < n; i++) {
        ord[i].time = p->s_time[i];
        ord[i].index = i;
    }
    qsort(ord, n, sizeof(*ord), order_cmp);
    permute(p->s_stack, ord, n, sizeof(*p->s_stack), tmp);
    permute(p->s_thread, ord, n, sizeof(*p->s_thread), tmp);
    permute(p->s_time, ord, n, sizeof(*p->s_time), tmp);
    if (p->s_weight)
        permute(p->s_weight, ord, n, sizeof(*p->s_weight), tmp);
    if (p->s_tl_stack)
        permute(p->s_tl_stack, ord, n, sizeof(*p->s_tl_stack), tmp);
    p->unsorted = false;
    assert(samples_in_order(p)); /* O(n) after an O(n log n) sort: debug builds only */
out:
    free(ord);
    free(tmp);
}

int cn_agg_samples_sort(cn_agg_profile *p)
{
    cn_agg__samples_sort(p);
    return p->unsorted ? -ENOMEM : 0;
}

/* ---- raw iteration ---------------------------------------------------------------- */

static bool thread_matches(const cn_agg_profile *p, const cn_agg_query *q, int32_t thread)
{
    return cn_agg_query_keeps_thread(p, q, thread);
}

int cn_agg_for_each_sample(cn_agg_profile *p, const cn_agg_query *q, cn_agg_sample_fn fn, void *ctx)
{
    cn_agg__samples_sort(p);
    for (size_t i = 0; i < p->n_sample; i++) {
        int64_t t = p->s_time[i];
        if (t < q->from_ns || t >= q->to_ns || p->s_stack[i] < 0)
            continue;
        if (!thread_matches(p, q, p->s_thread[i]))
            continue;
        int rc = fn(ctx, p->s_stack[i], p->s_thread[i], t, cn_agg__weight(p, i), 1);
        if (rc < 0)
            return rc;
    }
    if (q->from_ns != INT64_MIN || q->to_ns != INT64_MAX)
        return 0; /* ranged queries cannot count folded samples */
    for (size_t i = 0; i < p->n_acc; i++) {
        if (!thread_matches(p, q, p->acc_thread[i]))
            continue;
        int rc = fn(ctx, p->acc_stack[i], p->acc_thread[i], -1, p->acc_weight[i], 0);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- retention -------------------------------------------------------------------- */

static int acc_add(cn_agg_profile *p, int32_t stack, int32_t thread, double weight)
{
    uint64_t key = cn_pair(stack, thread);
    int32_t row = cn_u64map_get(&p->acc_index, key);
    if (row >= 0) {
        p->acc_weight[row] += weight;
        return 0;
    }
    size_t c1 = p->cap_acc, c2 = p->cap_acc, c3 = p->cap_acc;
    if (CN_RESERVE(p->acc_stack, c1, p->n_acc + 1) < 0 ||
        CN_RESERVE(p->acc_thread, c2, p->n_acc + 1) < 0 ||
        CN_RESERVE(p->acc_weight, c3, p->n_acc + 1) < 0)
        return -ENOMEM;
    p->cap_acc = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
    row = (int32_t)p->n_acc;
    if (cn_u64map_put(&p->acc_index, key, row) < 0)
        return -ENOMEM;
    p->acc_stack[row] = stack;
    p->acc_thread[row] = thread;
    p->acc_weight[row] = weight;
    p->n_acc++;
    return 0;
}

int64_t cn_agg_fold_before(cn_agg_profile *p, int64_t before_ns)
{
    cn_agg__samples_sort(p);
    if (p->unsorted)
        return -ENOMEM;
    size_t lo = 0, hi = p->n_sample;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->s_time[mid] < before_ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t k = lo;
    /* Reserve for the worst case first, so folding cannot fail half-way. */
    size_t c1 = p->cap_acc, c2 = p->cap_acc, c3 = p->cap_acc;
    if (CN_RESERVE(p->acc_stack, c1, p->n_acc + k) < 0 ||
        CN_RESERVE(p->acc_thread, c2, p->n_acc + k) < 0 ||
        CN_RESERVE(p->acc_weight, c3, p->n_acc + k) < 0 ||
        cn_u64map_reserve(&p->acc_index, p->n_acc + k) < 0)
        return -ENOMEM;
    p->cap_acc = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
    for (size_t i = 0; i < k; i++)
        if (p->s_stack[i] >= 0)
            acc_add(p, p->s_stack[i], p->s_thread[i], cn_agg__weight(p, i));
    if (k == 0)
        return 0; /* nothing to fold (and the columns may still be NULL) */
    size_t rest = p->n_sample - k;
    memmove(p->s_stack, p->s_stack + k, rest * sizeof(*p->s_stack));
    memmove(p->s_thread, p->s_thread + k, rest * sizeof(*p->s_thread));
    memmove(p->s_time, p->s_time + k, rest * sizeof(*p->s_time));
    if (p->s_weight)
        memmove(p->s_weight, p->s_weight + k, rest * sizeof(*p->s_weight));
    if (p->s_tl_stack)
        memmove(p->s_tl_stack, p->s_tl_stack + k, rest * sizeof(*p->s_tl_stack));
    p->n_sample = rest;
    return (int64_t)k;
}

size_t cn_agg_folded_rows(const cn_agg_profile *p)
{
    return p->n_acc;
}

size_t cn_agg_profile_memory(const cn_agg_profile *p)
{
    /* the arena as a running count: a walk of its blocks (64 KiB each since the last
     * compaction) was 0.7% of canopyd's CPU during a build at 999 Hz, as the memory bound
     * asks at every ring read */
    size_t bytes = sizeof(*p) + p->arena_bytes;
#ifndef NDEBUG
    size_t walked = 0;
    for (const cn_agg__block *b = p->arena; b; b = b->next)
        walked += sizeof(*b) + b->cap;
    assert(walked == p->arena_bytes);
#endif
    bytes += p->cap_str * (sizeof(char *) + sizeof(uint32_t));
    bytes += (p->str_index.mask + 1) * 8 + (p->res_index.mask + 1) * 8;
    bytes += p->cap_res * 13 + p->cap_func * 20 + (p->func_index.mask + 1) * 8;
    bytes += p->cap_frame * 30 + p->chain_cap * 4 + (p->frame_index.mask + 1) * 8;
    bytes += (p->native_frame_index.mask + 1) * 8;
    bytes += p->cap_stack * 8 + (p->stack_index.mask + 1) * 8;
    bytes += cn_agg__cache_bytes(&p->cache);
    bytes += p->cap_sample * (16 + (p->s_weight ? 8 : 0) + (p->s_tl_stack ? 4 : 0));
    bytes += p->cap_acc * 16 + (p->acc_index.mask + 1) * 12;
    bytes += p->cap_thr * 12 + (p->thr_index.mask + 1) * 12;
    bytes += p->cap_proc * 12 + (p->proc_index.mask + 1) * 12;
    /* the rename map: a row per symbolized placeholder name, kept for held paths */
    bytes += p->cap_rename * 12 + p->rename_pool_cap * 4;
    bytes += (p->rename_index.mask + 1) * 12 + (p->rename_targets.mask + 1) * 12;
    bytes += cn_agg__qcache_memory(p->qcache); /* derived, but memory all the same */
    return bytes;
}
