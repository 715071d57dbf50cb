/* trim.c — the all-time tree's long tail folded into its callers (cn_agg_trim_folded).
 *
 * A live session folds raw samples older than its retention into the accumulator
 * (samples.c), one row per (stack, thread), and compaction (compact.c) keeps every stack
 * row such a row reaches: nothing there is garbage, so on a machine that keeps starting
 * new programs the tables grow with every call path any of them ever took
 * (docs/perf-daemon.md, "The profile's tables"): 97 % of a build's folded rows weigh one
 * sample. Trimming bounds it the way pprof's node fraction and a flame graph's minimum
 * width do, but in the data, and marked:
 *
 *   sub(s)  = the folded weight (absolute values) of stack s and every stack below it;
 *   a row whose sub(stack) is below share x the folded total moves to the stack
 *   (a, frame) where a is its stack's deepest ancestor whose sub is not below it (-1: no
 *   such ancestor, a root) and frame the caller's marker ("(trimmed)"); rows that meet
 *   on one (stack, thread) are merged.
 *
 * So every node of the folded tree at or above the threshold keeps its running weight
 * exactly, a thread keeps its total, and what was cut shows as one marker child per
 * kept node, never as the node's own self time. Raw samples are never touched. Stacks no
 * row reaches any more are left for cn_agg_compact to remove. O(stacks + rows).
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agg_internal.h"

/* sub[] of every stack: each row's weight at its stack, then added to the prefixes in
 * one pass up (prefix < id). Returns the folded total. */
static double subtree_weights(const cn_agg_profile *p, double *sub)
{
    double total = 0;
    for (size_t i = 0; i < p->n_acc; i++) {
        double w = fabs(p->acc_weight[i]);
        sub[p->acc_stack[i]] += w;
        total += w;
    }
    for (size_t s = p->n_stack; s-- > 0;)
        if (p->stack_prefix[s] >= 0)
            sub[p->stack_prefix[s]] += sub[s];
    return total;
}

/* The stack row i moves to (its own when it stays), interning (ancestor, frame) where it
 * is new. n_old: the stacks sub[] covers (rows interned meanwhile are markers). Returns
 * the stack, or negative errno. */
static int32_t trimmed_stack(cn_agg_profile *p, const double *sub, size_t n_old, double limit,
                             int32_t stack, int32_t frame)
{
    if ((size_t)stack >= n_old || sub[stack] >= limit)
        return stack;
    int32_t a = p->stack_prefix[stack];
    while (a >= 0 && sub[a] < limit)
        a = p->stack_prefix[a];
    return cn_agg_stack(p, a, frame);
}

/* Rewrites the accumulator with the rows' new stacks, merging rows that meet, into the
 * fresh index idx (reserved for every row, so nothing fails). Returns the rows left. */
static size_t merge_rows(cn_agg_profile *p, const int32_t *to, cn_u64map *idx)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n_acc; i++) {
        uint64_t key = cn_pair(to[i], p->acc_thread[i]);
        int32_t row = cn_u64map_get(idx, key);
        if (row >= 0) {
            p->acc_weight[row] += p->acc_weight[i];
            continue;
        }
        int rc = cn_u64map_put(idx, key, (int32_t)k);
        assert(rc == 0); /* reserved for n_acc entries */
        (void)rc;
        p->acc_stack[k] = to[i];
        p->acc_thread[k] = p->acc_thread[i];
        p->acc_weight[k] = p->acc_weight[i];
        k++;
    }
    return k;
}

int cn_agg_trim_folded(cn_agg_profile *p, double share, int32_t frame, cn_agg_trim_stats *st)
{
    size_t rows_before = p->n_acc, n_old = p->n_stack, moved = 0;
    double *sub = NULL;
    int32_t *to = NULL;
    cn_u64map idx = {0};
    int rc = 0;
    if (st)
        *st = (cn_agg_trim_stats){.rows_before = rows_before, .rows_after = rows_before};
    if (!(share > 0) || p->n_acc == 0)
        return 0;
    if (frame < 0 || (size_t)frame >= p->n_frame || share >= 1)
        return -EINVAL;
    rc = -ENOMEM;
    sub = calloc(n_old, sizeof(*sub));
    to = malloc(p->n_acc * sizeof(*to));
    if (!sub || !to || cn_u64map_reserve(&idx, p->n_acc) < 0)
        goto out;
    double limit = share * subtree_weights(p, sub);
    double weight_moved = 0;
    for (size_t i = 0; i < p->n_acc; i++) {
        int32_t s = trimmed_stack(p, sub, n_old, limit, p->acc_stack[i], frame);
        if (s < 0) {
            rc = s; /* the accumulator is unchanged; a marker stack interned is harmless */
            goto out;
        }
        to[i] = s;
        if (s != p->acc_stack[i]) {
            moved++;
            weight_moved += fabs(p->acc_weight[i]);
        }
    }
    rc = 0;
    if (moved == 0)
        goto out;
    /* Nothing fails from here on. */
    p->n_acc = merge_rows(p, to, &idx);
    cn_u64map_clear(&p->acc_index);
    p->acc_index = idx;
    memset(&idx, 0, sizeof(idx));
    /* the query cache is by stack: rebuilt by the next query */
    p->qcache = cn_agg__qcache_free(p->qcache);
    p->func_generation++;
    if (st) {
        st->rows_after = p->n_acc;
        st->rows_moved = moved;
        st->weight_moved = weight_moved;
        st->limit = limit;
        for (size_t i = 0; i < p->n_acc; i++)
            if (p->stack_frame[p->acc_stack[i]] == frame)
                st->weight_under += fabs(p->acc_weight[i]);
    }
out:
    cn_u64map_clear(&idx);
    free(sub);
    free(to);
    return rc;
}
