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
 *
 * The other dimension that grows with a busy machine is the thread: every process a build
 * starts adds its threads' rows. cn_agg_fold_threads moves the rows of exited threads with
 * no raw sample left (the caller says which exited) to one thread per (process name,
 * cgroup), whose pid is CN_AGG_GONE_PID_BASE + k: "cc1 [exited]" in a tree grouped by
 * process, every cc1 the build ran. Totals by stack, by name and by cgroup stay exact.
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

/* Rewrites the accumulator with the rows' new stacks (to_stack) or threads (to_thread;
 * NULL: unchanged), merging rows that meet, into the fresh index idx (reserved for every
 * row, so nothing fails). Returns the rows left. */
static size_t merge_rows(cn_agg_profile *p, const int32_t *to_stack, const int32_t *to_thread,
                         cn_u64map *idx)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n_acc; i++) {
        int32_t stack = to_stack ? to_stack[i] : p->acc_stack[i];
        int32_t thread = to_thread ? to_thread[p->acc_thread[i]] : p->acc_thread[i];
        uint64_t key = cn_pair(stack, thread);
        int32_t row = cn_u64map_get(idx, key);
        if (row >= 0) {
            p->acc_weight[row] += p->acc_weight[i];
            continue;
        }
        int rc = cn_u64map_put(idx, key, (int32_t)k);
        assert(rc == 0); /* reserved for n_acc entries */
        (void)rc;
        p->acc_stack[k] = stack;
        p->acc_thread[k] = thread;
        p->acc_weight[k] = p->acc_weight[i];
        k++;
    }
    return k;
}

/* Replaces the accumulator's index with idx (which it takes) after a merge_rows; the
 * query cache, by stack and thread, is rebuilt by the next query. */
static void rows_changed(cn_agg_profile *p, cn_u64map *idx)
{
    cn_u64map_clear(&p->acc_index);
    p->acc_index = *idx;
    memset(idx, 0, sizeof(*idx));
    p->qcache = cn_agg__qcache_free(p->qcache);
    p->func_generation++;
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
    p->n_acc = merge_rows(p, to, NULL, &idx);
    rows_changed(p, &idx);
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

/* ---- exited threads --------------------------------------------------------------- */

/* The name an exited thread's rows go under: its process's, else its own ("?" if none). */
static int32_t gone_name(const cn_agg_profile *p, int32_t thread)
{
    int32_t row = cn_u64map_get(&p->proc_index, (uint64_t)(uint32_t)p->thr_pid[thread]);
    if (row >= 0 && p->proc_name[row] >= 0)
        return p->proc_name[row];
    return p->thr_name[thread];
}

static int32_t proc_cgroup_of(const cn_agg_profile *p, int32_t pid)
{
    int32_t row = cn_u64map_get(&p->proc_index, (uint64_t)(uint32_t)pid);
    return row >= 0 ? p->proc_cgroup[row] : -1;
}

/* The folded thread for (name, cgroup) string ids (-1: none): found in groups (keyed by
 * the pair, valued by thread), else made with the next free pid from CN_AGG_GONE_PID_BASE
 * (*next). Returns the thread or negative errno. */
static int32_t gone_thread(cn_agg_profile *p, cn_u64map *groups, int32_t name, int32_t cgroup,
                           int32_t *next)
{
    uint64_t key = cn_pair(name, cgroup);
    int32_t t = cn_u64map_get(groups, key);
    if (t >= 0)
        return t;
    if (*next == INT32_MAX)
        return -ENOSPC;
    int32_t pid = (*next)++;
    t = cn_agg_thread(p, pid, pid, name >= 0 ? p->str[name] : "?");
    if (t < 0)
        return t;
    int rc = cn_agg_process_set_name(p, pid, name >= 0 ? p->str[name] : "?");
    if (rc == 0 && cgroup >= 0)
        rc = cn_agg_process_set_cgroup(p, pid, p->str[cgroup]);
    if (rc == 0)
        rc = cn_u64map_put(groups, key, t);
    return rc < 0 ? rc : t;
}

/* The folded threads already made, by (name, cgroup), and the next free pid. */
static int known_groups(const cn_agg_profile *p, cn_u64map *groups, int32_t *next)
{
    *next = CN_AGG_GONE_PID_BASE;
    for (size_t t = 0; t < p->n_thr; t++) {
        int32_t pid = p->thr_pid[t];
        if (pid < CN_AGG_GONE_PID_BASE)
            continue;
        int rc = cn_u64map_put(groups, cn_pair(gone_name(p, (int32_t)t), proc_cgroup_of(p, pid)),
                               (int32_t)t);
        if (rc < 0)
            return rc;
        if (pid >= *next)
            *next = pid == INT32_MAX ? INT32_MAX : pid + 1;
    }
    return 0;
}

int cn_agg_fold_threads(cn_agg_profile *p, const bool *gone, size_t n_gone, size_t *rows_folded)
{
    int32_t *to = NULL;
    uint8_t *raw = NULL;
    cn_u64map groups = {0}, idx = {0};
    int32_t next;
    size_t n_thr = p->n_thr, moved = 0;
    int rc = -ENOMEM;
    if (rows_folded)
        *rows_folded = 0;
    if (p->n_acc == 0)
        return 0;
    to = malloc(n_thr * sizeof(*to));
    raw = calloc(n_thr, 1);
    if (!to || !raw || cn_u64map_reserve(&idx, p->n_acc) < 0)
        goto out;
    for (size_t i = 0; i < p->n_sample; i++)
        if (p->s_thread[i] >= 0)
            raw[p->s_thread[i]] = 1; /* its rows stay: it still has raw samples */
    if ((rc = known_groups(p, &groups, &next)) < 0)
        goto out;
    for (size_t t = 0; t < n_thr; t++) {
        to[t] = (int32_t)t;
        if (t >= n_gone || !gone[t] || raw[t] || p->thr_pid[t] >= CN_AGG_GONE_PID_BASE)
            continue;
        int32_t g = gone_thread(p, &groups, gone_name(p, (int32_t)t),
                                proc_cgroup_of(p, p->thr_pid[t]), &next);
        if (g < 0) {
            rc = g; /* the accumulator is unchanged; a folded thread made is harmless */
            goto out;
        }
        to[t] = g;
    }
    for (size_t i = 0; i < p->n_acc; i++)
        moved += to[p->acc_thread[i]] != p->acc_thread[i];
    rc = 0;
    if (moved == 0)
        goto out;
    /* Nothing fails from here on. */
    size_t before = p->n_acc;
    p->n_acc = merge_rows(p, NULL, to, &idx);
    rows_changed(p, &idx);
    if (rows_folded)
        *rows_folded = before - p->n_acc;
out:
    cn_u64map_clear(&idx);
    cn_u64map_clear(&groups);
    free(to);
    free(raw);
    return rc;
}
