/* query.c — running a query: base table, sample selection, transforms, self weights.
 *
 * Data structures: cn_agg__qtable is the func-level prefix tree (struct of arrays plus a
 * (prefix, func) hash), built once per query from the frame stack table in index order
 * (prefix < id, so a stack's parent row is always known: one pass, no recursion). Inline
 * chains expand into one row per func, outer first. --group-by grafts each (row, group)
 * pair used by a sample under a synthetic root func, memoized in a hash. Transforms then
 * rewrite the table (transform.c) and their row maps are composed over the base rows, so
 * samples are mapped exactly once, in the final pass that sums self weights.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "q_engine.h"

/* ---- the func-level table ----------------------------------------------------------- */

int32_t cn_agg__q_name_id(const cn_agg_profile *p, const char *name)
{
    for (size_t f = 0; f < p->n_func; f++) {
        int32_t id = p->func_name[f];
        if (strcmp(p->str[id], name) == 0)
            return id;
    }
    return -2;
}

/* ---- query defaults ------------------------------------------------------------------ */

void cn_agg_query_init(cn_agg_query *q)
{
    memset(q, 0, sizeof(*q));
    q->view = CN_AGG_VIEW_TREE;
    q->callers_mode = CN_AGG_CALLERS_TOTAL;
    q->group_by = CN_AGG_GROUP_NONE;
    q->from_ns = INT64_MIN;
    q->to_ns = INT64_MAX;
    q->tid = -1;
    q->pid = -1;
}

/* ---- base table ---------------------------------------------------------------------- */

/* Maps frame stacks [from, to) to their rows in t, expanding inline chains (when
 * no_inline, only each frame's outer func, named by the symbol table: its symbol func
 * when it has one, §4.5); fnode holds the rows of earlier stacks. Returns 0 or -ENOMEM. */
static int map_stacks(const cn_agg_profile *p, cn_agg__qtable *t, int32_t *fnode, size_t from,
                      size_t to, bool no_inline)
{
    if (cn_agg__qt_reserve(t, t->n + (to - from) / 4 + 16) < 0)
        return -ENOMEM;
    for (size_t s = from; s < to; s++) {
        int32_t pre = p->stack_prefix[s];
        assert(pre < (int32_t)s); /* cn_agg.h: prefix < id, so fnode[pre] is known */
        int32_t row = pre < 0 ? -1 : fnode[pre];
        int32_t fr = p->stack_frame[s];
        const int32_t *chain = p->chain_pool + p->frame_chain[fr];
        uint16_t depth = p->frame_depth[fr];
        if (no_inline) {
            chain = p->frame_sym_func[fr] >= 0 ? &p->frame_sym_func[fr] : chain;
            depth = 1;
        }
        for (uint16_t d = 0; d < depth; d++) {
            row = cn_agg__qt_intern(t, row, chain[d]);
            if (row < 0)
                return row;
        }
        fnode[s] = row;
    }
    return 0;
}

/* ---- the query cache: the ungrouped base table, kept across queries ---------------- */

/* Valid while the profile's func_generation is unchanged (regroup and file loads bump
 * it); stacks appended since the last query are mapped incrementally. */
struct cn_agg__qcache {
    uint64_t generation;
    bool valid;
    cn_agg__qtable t;
    int32_t *fnode;
    size_t n_fnode, cap_fnode;
    /* Per sample base row (fnode[s_stack[i]], -1 for no stack), so that the sample pass
     * of a query reads sequentially instead of one random fnode read per sample. Kept in
     * chunks of QC_CHUNK samples, each valid while the XXH3-64 hash and length of its
     * s_stack slice are unchanged (samples are appended, but also re-sorted by time and
     * folded out by retention, which shift them): a changed chunk is recomputed. */
    int32_t *srow;
    size_t cap_srow;
    uint64_t *chash;
    uint32_t *clen;
    size_t n_chunk, cap_chash, cap_clen;
};

#define QC_CHUNK 4096

struct cn_agg__qcache *cn_agg__qcache_free(struct cn_agg__qcache *c)
{
    if (c) {
        cn_agg__qt_clear(&c->t);
        free(c->fnode);
        free(c->srow);
        free(c->chash);
        free(c->clen);
        free(c);
    }
    return NULL;
}

size_t cn_agg__qcache_memory(const struct cn_agg__qcache *c)
{
    if (!c)
        return 0;
    return sizeof(*c) + c->cap_fnode * sizeof(*c->fnode) +
           c->t.cap * (2 * sizeof(int32_t) + sizeof(cn_agg__qlink) + sizeof(cn_agg__qhead)) +
           (c->t.big.mask ? (c->t.big.mask + 1) * (sizeof(uint64_t) + sizeof(int32_t)) : 0) +
           c->cap_srow * sizeof(*c->srow) + c->cap_chash * sizeof(*c->chash) +
           c->cap_clen * sizeof(*c->clen);
}

static int qcache_update(struct cn_agg__qcache **slot, const cn_agg_profile *p)
{
    struct cn_agg__qcache *c = *slot;
    if (!c) {
        c = calloc(1, sizeof(*c));
        if (!c)
            return -ENOMEM;
        cn_agg__qt_init(&c->t);
        *slot = c;
    }
    if (!c->valid || c->generation != p->func_generation || c->n_fnode > p->n_stack) {
        cn_agg__qt_clear(&c->t);
        c->n_fnode = 0;
        c->n_chunk = 0;
        c->generation = p->func_generation;
        c->valid = true;
    }
    if (c->n_fnode == p->n_stack)
        return 0;
    size_t cap = c->cap_fnode;
    if (CN_RESERVE(c->fnode, c->cap_fnode, p->n_stack) < 0) {
        c->valid = false;
        return -ENOMEM;
    }
    if (c->cap_fnode != cap)
        cn_agg__q_hugepages(c->fnode, c->cap_fnode * sizeof(*c->fnode));
    if (map_stacks(p, &c->t, c->fnode, c->n_fnode, p->n_stack, false) < 0) {
        c->valid = false;
        return -ENOMEM;
    }
    c->n_fnode = p->n_stack;
    return 0;
}

/* Makes c->srow valid for the samples [lo, hi) (whole chunks around them) and returns it,
 * or NULL when out of memory (the caller then reads fnode per sample). c is up to date
 * (qcache_update), so every sample's stack has its fnode entry. */
static const int32_t *qcache_sample_rows(struct cn_agg__qcache *c, const cn_agg_profile *p,
                                         size_t lo, size_t hi)
{
    size_t n = p->n_sample;
    if (hi <= lo)
        return c->srow;
    size_t nchunk = (n + QC_CHUNK - 1) / QC_CHUNK;
    size_t cap = c->cap_srow;
    if (CN_RESERVE(c->srow, c->cap_srow, n) < 0 || CN_RESERVE(c->chash, c->cap_chash, nchunk) < 0 ||
        CN_RESERVE(c->clen, c->cap_clen, nchunk) < 0)
        return NULL;
    if (c->cap_srow != cap)
        cn_agg__q_hugepages(c->srow, c->cap_srow * sizeof(*c->srow));
    for (size_t k = c->n_chunk; k < nchunk; k++)
        c->clen[k] = 0; /* never valid: a chunk has at least one sample */
    if (nchunk > c->n_chunk)
        c->n_chunk = nchunk;
    const int32_t *stk = p->s_stack, *fnode = c->fnode;
    int32_t *srow = c->srow;
    for (size_t k = lo / QC_CHUNK; k * QC_CHUNK < hi; k++) {
        size_t b = k * QC_CHUNK, e = b + QC_CHUNK < n ? b + QC_CHUNK : n;
        uint64_t h = XXH3_64bits(stk + b, (e - b) * sizeof(*stk));
        if (c->clen[k] == e - b && c->chash[k] == h)
            continue;
        size_t i = b;
#ifndef NDEBUG
        for (size_t j = b; j < e; j++) /* up to date: every sample's stack has its row */
            assert(stk[j] < (int32_t)c->n_fnode);
#endif
        for (; i + 32 < e; i++) {
            int32_t ahead = stk[i + 32];
            if (ahead >= 0)
                __builtin_prefetch(&fnode[ahead]);
            srow[i] = stk[i] < 0 ? -1 : fnode[stk[i]];
        }
        for (; i < e; i++)
            srow[i] = stk[i] < 0 ? -1 : fnode[stk[i]];
        c->chash[k] = h;
        c->clen[k] = (uint32_t)(e - b);
    }
    return srow;
}

/* Sets run->fnode and run->plain: from the cache, or built for this run. The cache holds
 * the table with inline chains expanded; a --no-inline query builds its own (one pass
 * over the stacks, the same cost as a cache miss). */
static int base_rows(cn_agg__qrun *run, struct cn_agg__qcache **cache)
{
    const cn_agg_profile *p = run->p;
    if (cache && !run->q->no_inline) {
        int rc = qcache_update(cache, p);
        if (rc < 0)
            return rc;
        run->fnode = (*cache)->fnode;
        run->n_fnode = (*cache)->n_fnode;
        run->plain = &(*cache)->t;
        if (run->q->group_by == CN_AGG_GROUP_NONE)
            run->srow = qcache_sample_rows(*cache, p, run->lo, run->hi);
        return 0;
    }
    size_t n = p->n_stack;
    run->own_fnode = malloc((n ? n : 1) * sizeof(*run->own_fnode));
    if (!run->own_fnode)
        return -ENOMEM;
    cn_agg__q_hugepages(run->own_fnode, n * sizeof(*run->own_fnode));
    int rc = map_stacks(p, &run->own_plain, run->own_fnode, 0, n, run->q->no_inline);
    run->fnode = run->own_fnode;
    run->n_fnode = n;
    run->plain = &run->own_plain;
    return rc;
}

/* "name [id]", or "name [exited]" for the folded threads of exited processes
 * (cn_agg_fold_threads: every cc1 a build ran under one root). */
static void group_label(char *label, size_t len, const char *name, int32_t id)
{
    if (id >= CN_AGG_GONE_PID_BASE)
        snprintf(label, len, "%s [exited]", name ? name : "?");
    else
        snprintf(label, len, "%s [%d]", name ? name : "?", (int)id);
}

/* The synthetic root func of a --group-by group. */
static int32_t group_func(cn_agg_profile *p, cn_agg_group_by by, int32_t thread)
{
    char label[CN_CGROUP_PATH_MAX + 32]; /* "cgroup=" and a whole path */
    if (thread < 0) {
        snprintf(label, sizeof(label), "[unknown]");
    } else if (by >= CN_AGG_GROUP_CONTAINER) {
        static const cn_cgroup_key keys[] = {
            [CN_AGG_GROUP_CONTAINER - CN_AGG_GROUP_CONTAINER] = CN_CGROUP_KEY_CONTAINER,
            [CN_AGG_GROUP_CGROUP - CN_AGG_GROUP_CONTAINER] = CN_CGROUP_KEY_CGROUP,
            [CN_AGG_GROUP_POD - CN_AGG_GROUP_CONTAINER] = CN_CGROUP_KEY_POD,
            [CN_AGG_GROUP_SERVICE - CN_AGG_GROUP_CONTAINER] = CN_CGROUP_KEY_SERVICE};
        cn_cgroup_key key = keys[by - CN_AGG_GROUP_CONTAINER];
        const char *path = cn_agg_process_cgroup(p, p->thr_pid[thread]);
        cn_cgroup_info info;
        cn_cgroup_identify(path, &info);
        const char *v = path ? cn_cgroup_key_value(&info, path, key) : "";
        snprintf(label, sizeof(label), "%s=%s", cn_cgroup_key_name(key), v[0] ? v : "(none)");
    } else if (by == CN_AGG_GROUP_PROCESS) {
        int32_t pid = p->thr_pid[thread];
        const char *name = cn_agg_process_name(p, pid);
        for (size_t i = 0; !name && i < p->n_thr; i++)
            if (p->thr_pid[i] == pid && p->thr_tid[i] == pid && p->thr_name[i] >= 0)
                name = p->str[p->thr_name[i]];
        group_label(label, sizeof(label), name, pid);
    } else {
        group_label(label, sizeof(label), cn_agg_thread_name(p, thread), p->thr_tid[thread]);
    }
    return cn_agg_func(p, label, -1, NULL, 0);
}

/* --group-by state (docs/cli.md, "Modes"): an off-CPU stack ends in a pseudo-frame named
 * after the thread's state; that state becomes the sample's root and the pseudo-frame
 * goes (the root says it). Every other stack ran on a CPU. The group roots take the
 * pseudo-frames' names, so `-t 'drop:[preempted]'` drops the same samples either way. */
static const char *const state_names[CN_AGG__N_STATES] = {
    CN_AGG_STATE_RUNNING, CN_AGG_STATE_BLOCKED, CN_AGG_STATE_PREEMPTED};

/* The group func of a sample on stack by thread, and in *row the ungrouped row grafted
 * under it. */
static int32_t sample_group(const cn_agg__qrun *run, int32_t stack, int32_t thread, int32_t *row)
{
    int32_t r = run->fnode[stack];
    *row = r;
    if (run->q->group_by != CN_AGG_GROUP_STATE)
        return thread >= 0 ? run->thr_group[thread] : run->unknown_group;
    const cn_agg_profile *p = run->p;
    int32_t name = r >= 0 ? p->func_name[run->plain->func[r]] : -1;
    for (int k = CN_AGG__BLOCKED; k < CN_AGG__N_STATES; k++) {
        if (name == p->func_name[run->state_group[k]]) {
            *row = run->plain->prefix[r];
            return run->state_group[k];
        }
    }
    return run->state_group[CN_AGG__RUNNING];
}

/* Row of the ungrouped row r (-1: none, the group's root itself) grafted under group func
 * g (memoized under (r + 1, g); iterative). */
static int32_t graft(cn_agg__qrun *run, cn_agg__ivec *tmp, int32_t r, int32_t g)
{
    tmp->n = 0;
    int32_t at = -1;
    for (int32_t x = r;; x = run->plain->prefix[x]) {
        at = cn_u64map_get(&run->gmemo, cn_pair(x + 1, g));
        if (at < 0 && x < 0) {
            at = cn_agg__qt_intern(&run->t, -1, g);
            if (at < 0 || cn_u64map_put(&run->gmemo, cn_pair(0, g), at) < 0)
                return -ENOMEM;
        }
        if (at >= 0 || x < 0)
            break;
        if (cn_agg__ivec_push(tmp, x) < 0)
            return -ENOMEM;
    }
    if (at < 0)
        return at;
    while (tmp->n > 0) {
        int32_t x = tmp->v[--tmp->n];
        at = cn_agg__qt_intern(&run->t, at, run->plain->func[x]);
        if (at < 0 || cn_u64map_put(&run->gmemo, cn_pair(x + 1, g), at) < 0)
            return -ENOMEM;
    }
    return at;
}

int32_t cn_agg__qrun_base(const cn_agg__qrun *run, int32_t stack, int32_t thread)
{
    if (stack < 0 || (size_t)stack >= run->n_fnode)
        return -1;
    if (!run->grouped)
        return run->fnode[stack];
    int32_t r, g = sample_group(run, stack, thread, &r);
    return cn_u64map_get(&run->gmemo, cn_pair(r + 1, g));
}

static size_t lower_bound(const int64_t *t, size_t n, int64_t v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Whether process pid's cgroup meets every --where key (one of its values each). */
static bool where_keeps(const cn_agg_profile *p, const cn_agg_query *q, int32_t pid)
{
    if (q->n_where == 0)
        return true;
    const char *path = cn_agg_process_cgroup(p, pid);
    cn_cgroup_info info;
    cn_cgroup_identify(path, &info);
    for (int k = 0; k < CN_CGROUP_N_KEYS; k++) {
        bool asked = false, met = false;
        for (size_t i = 0; i < q->n_where; i++) {
            if (q->where[i].key != (cn_cgroup_key)k)
                continue;
            asked = true;
            const char *v = path ? cn_cgroup_key_value(&info, path, q->where[i].key) : "";
            met = met || cn_cgroup_value_match(q->where[i].key, v, q->where[i].value);
        }
        if (asked && !met)
            return false;
    }
    return true;
}

bool cn_agg_query_keeps_thread(const cn_agg_profile *p, const cn_agg_query *q, int32_t thread)
{
    if (q->tid < 0 && q->pid < 0 && q->n_where == 0)
        return true;
    if (thread < 0 || (size_t)thread >= p->n_thr)
        return false;
    return (q->tid < 0 || p->thr_tid[thread] == q->tid) &&
           (q->pid < 0 || p->thr_pid[thread] == q->pid) && where_keeps(p, q, p->thr_pid[thread]);
}

static int select_samples(cn_agg__qrun *run)
{
    cn_agg_profile *p = run->p;
    const cn_agg_query *q = run->q;
    cn_agg__samples_sort(p);
    if (p->unsorted)
        return -ENOMEM;
    run->lo = q->from_ns == INT64_MIN ? 0 : lower_bound(p->s_time, p->n_sample, q->from_ns);
    run->hi = q->to_ns == INT64_MAX ? p->n_sample : lower_bound(p->s_time, p->n_sample, q->to_ns);
    if (run->hi < run->lo)
        run->hi = run->lo;
    /* the table is sorted by time (cn_agg.h), so [lo, hi) is exactly the range */
    assert(run->lo == 0 || p->s_time[run->lo - 1] < q->from_ns);
    assert(run->hi == p->n_sample || p->s_time[run->hi] >= q->to_ns);
    run->with_acc = q->from_ns == INT64_MIN && q->to_ns == INT64_MAX;
    run->filtered = q->tid >= 0 || q->pid >= 0 || q->n_where > 0;
    if (run->filtered) {
        run->thr_keep = calloc(p->n_thr ? p->n_thr : 1, 1);
        if (!run->thr_keep)
            return -ENOMEM;
        for (size_t i = 0; i < p->n_thr; i++)
            run->thr_keep[i] = cn_agg_query_keeps_thread(p, q, (int32_t)i);
    }
    return 0;
}

/* Grafts every (stack, thread) pair the selected samples use. */
static int build_grouped(cn_agg__qrun *run)
{
    cn_agg_profile *p = run->p;
    cn_agg__ivec tmp = {0};
    int rc = -ENOMEM;
    int32_t r, g;
    if (run->q->group_by == CN_AGG_GROUP_STATE) {
        for (int k = 0; k < CN_AGG__N_STATES; k++)
            if ((run->state_group[k] = cn_agg_func(p, state_names[k], -1, NULL, 0)) < 0)
                goto out;
    } else {
        run->thr_group = malloc((p->n_thr ? p->n_thr : 1) * sizeof(*run->thr_group));
        if (!run->thr_group)
            goto out;
        for (size_t i = 0; i < p->n_thr; i++) {
            run->thr_group[i] = group_func(p, run->q->group_by, (int32_t)i);
            if (run->thr_group[i] < 0)
                goto out;
        }
        run->unknown_group = group_func(p, run->q->group_by, -1);
        if (run->unknown_group < 0)
            goto out;
    }
    for (size_t i = run->lo; i < run->hi; i++) {
        int32_t s = p->s_stack[i], th = p->s_thread[i];
        if (s < 0 || !cn_agg__qrun_keep(run, th))
            continue;
        g = sample_group(run, s, th, &r);
        if (graft(run, &tmp, r, g) < 0)
            goto out;
        int32_t tl = p->s_tl_stack ? p->s_tl_stack[i] : -1;
        if (tl >= 0) {
            g = sample_group(run, tl, th, &r);
            if (graft(run, &tmp, r, g) < 0)
                goto out;
        }
    }
    for (size_t i = 0; run->with_acc && i < p->n_acc; i++) {
        int32_t s = p->acc_stack[i], th = p->acc_thread[i];
        if (s < 0 || !cn_agg__qrun_keep(run, th))
            continue;
        g = sample_group(run, s, th, &r);
        if (graft(run, &tmp, r, g) < 0)
            goto out;
    }
    rc = 0;
out:
    free(tmp.v);
    return rc;
}

int cn_agg__qrun_init(cn_agg__qrun *run, cn_agg_profile *p, const cn_agg_query *q,
                      struct cn_agg__qcache **cache, cn_err *err)
{
    memset(run, 0, sizeof(*run));
    cn_agg__qt_init(&run->t);
    cn_agg__qt_init(&run->own_plain);
    run->p = p;
    run->q = q;
    int rc = select_samples(run);
    if (rc == 0)
        rc = base_rows(run, cache);
    run->grouped = q->group_by != CN_AGG_GROUP_NONE;
    if (rc == 0 && run->grouped)
        rc = build_grouped(run);
    if (rc < 0)
        return cn_err_set(err, rc, "query: out of memory");
    if (!run->grouped) {
        /* The ungrouped table is the base: a shallow copy, read-only. */
        run->t = *run->plain;
        run->t_borrowed = true;
    }
    run->n_base = run->t.n;
    run->rmap = malloc((run->n_base ? run->n_base : 1) * sizeof(*run->rmap));
    if (!run->rmap)
        return cn_err_set(err, -ENOMEM, "query: out of memory");
    for (size_t i = 0; i < run->n_base; i++)
        run->rmap[i] = (int32_t)i;
    run->rmap_identity = true;
    return 0;
}

void cn_agg__qrun_free(cn_agg__qrun *run)
{
    if (!run->t_borrowed)
        cn_agg__qt_clear(&run->t);
    cn_agg__qt_clear(&run->own_plain);
    cn_u64map_clear(&run->gmemo);
    free(run->rmap);
    free(run->own_fnode);
    free(run->thr_group);
    free(run->thr_keep);
    free(run->merged);
    free(run->recur);
    free(run->sb);
    memset(run, 0, sizeof(*run));
}

/* ---- self weights ---------------------------------------------------------------------- */

/* Sums the selected samples' weights per base row into run->sb, once per run. */
static int base_weights(cn_agg__qrun *run)
{
    const cn_agg_profile *p = run->p;
    double *sb = calloc(run->n_base ? run->n_base : 1, sizeof(*sb));
    if (!sb)
        return -ENOMEM;
    cn_agg__q_hugepages(sb, run->n_base * sizeof(*sb));
    size_t lo = run->lo, hi = run->hi;
    const double *w = p->s_weight;
    if (run->srow) {
        /* The hot loop of every cached query: sequential reads of the per-sample rows and
         * weights; the adds land in the (much smaller) base table, prefetched. */
        const int32_t *srow = run->srow;
        const int32_t *thr = p->s_thread;
        bool filtered = run->filtered;
        size_t i = lo;
        for (; i + 16 < hi; i++) {
            int32_t ahead = srow[i + 16];
            if (ahead >= 0)
                __builtin_prefetch(&sb[ahead], 1);
            int32_t b = srow[i];
            assert(b < (int32_t)run->n_base);
            if (b >= 0 && (!filtered || cn_agg__qrun_keep(run, thr[i])))
                sb[b] += w ? w[i] : 1.0;
        }
        for (; i < hi; i++) {
            int32_t b = srow[i];
            if (b >= 0 && (!filtered || cn_agg__qrun_keep(run, thr[i])))
                sb[b] += w ? w[i] : 1.0;
        }
    } else if (!run->grouped && !run->filtered) {
        /* Without the cache: the scattered fnode reads are prefetched. */
        const int32_t *stk = p->s_stack, *fnode = run->fnode;
        size_t i = lo;
        for (; i + 64 < hi; i++) {
            int32_t ahead = stk[i + 64], near = stk[i + 16];
            if (ahead >= 0)
                __builtin_prefetch(&fnode[ahead]);
            if (near >= 0)
                __builtin_prefetch(&sb[fnode[near]], 1);
            int32_t s = stk[i];
            if (s >= 0)
                sb[fnode[s]] += w ? w[i] : 1.0;
        }
        for (; i < hi; i++)
            if (stk[i] >= 0)
                sb[fnode[stk[i]]] += w ? w[i] : 1.0;
    } else {
        for (size_t i = lo; i < hi; i++) {
            int32_t th = p->s_thread[i];
            if (!cn_agg__qrun_keep(run, th))
                continue;
            int32_t b = cn_agg__qrun_base(run, p->s_stack[i], th);
            if (b >= 0)
                sb[b] += w ? w[i] : 1.0;
        }
    }
    for (size_t i = 0; run->with_acc && i < p->n_acc; i++) {
        int32_t th = p->acc_thread[i];
        if (!cn_agg__qrun_keep(run, th))
            continue;
        int32_t b = cn_agg__qrun_base(run, p->acc_stack[i], th);
        if (b >= 0)
            sb[b] += p->acc_weight[i];
    }
    run->sb = sb;
    return 0;
}

int cn_agg__qrun_self(cn_agg__qrun *run, double **out)
{
    if (!run->sb && base_weights(run) < 0)
        return -ENOMEM;
    double *self = calloc(run->t.n ? run->t.n : 1, sizeof(*self));
    if (!self)
        return -ENOMEM;
    const double *sb = run->sb;
    for (size_t b = 0; b < run->n_base; b++) {
        assert(run->rmap[b] >= -1 && run->rmap[b] < (int32_t)run->t.n);
        if (sb[b] != 0 && run->rmap[b] >= 0)
            self[run->rmap[b]] += sb[b];
    }
    *out = self;
    return 0;
}

/* ---- transforms -------------------------------------------------------------------- */

/* Self weight per current row for a transform that needs it: run->sb itself while no
 * transform has run yet (rmap is the identity: no copy), else mapped through rmap.
 * *owned is set when the caller must free *self. */
static int current_self(cn_agg__qrun *run, double **self, bool *owned)
{
    if (run->rmap_identity) {
        assert(run->t.n == run->n_base); /* current rows are the base rows */
        if (!run->sb && base_weights(run) < 0)
            return -ENOMEM;
        *self = run->sb;
        *owned = false;
        return 0;
    }
    *owned = true;
    return cn_agg__qrun_self(run, self);
}

static int apply_one(cn_agg__qrun *run, const cn_agg_transform *tf, cn_err *err)
{
    cn_agg__tfout o = {0};
    double *self = NULL;
    bool self_owned = false;
    int rc = 0;
    if (cn_agg__tf_needs_self(tf)) {
        rc = current_self(run, &self, &self_owned);
        if (rc < 0)
            goto out;
    }
    rc = cn_agg__tf_apply(run->p, &run->t, tf, self, run->merged, run->recur, &o);
    if (rc < 0)
        goto out;
    run->rmap_identity = false;
    for (size_t b = 0; b < run->n_base; b++)
        if (run->rmap[b] >= 0)
            run->rmap[b] = o.map[run->rmap[b]];
    if (!o.same) {
        if (!run->t_borrowed)
            cn_agg__qt_clear(&run->t);
        run->t_borrowed = false;
        run->t = o.t;
        memset(&o.t, 0, sizeof(o.t));
    }
    if (o.merged || !o.same) {
        free(run->merged);
        free(run->recur);
        run->merged = o.merged;
        run->recur = o.recur;
        o.merged = o.recur = NULL;
    }
out:
    if (self_owned)
        free(self);
    cn_agg__tfout_free(&o);
    if (rc < 0) {
        char *spec = cn_agg_transform_format(tf);
        cn_err_set(err, rc, "transform '%s': %s", spec ? spec : "?", strerror(-rc));
        free(spec);
    }
    return rc;
}

int cn_agg__qrun_transform_all(cn_agg__qrun *run, cn_err *err)
{
    for (size_t i = 0; i < run->q->n_transforms; i++) {
        int rc = apply_one(run, &run->q->transforms[i], err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- the public entry points ------------------------------------------------------- */

int cn_agg_query_run(cn_agg_profile *p, const cn_agg_query *q, cn_agg_tree **out, cn_err *err)
{
    return cn_agg__query_run_cached(p, p ? CN_AGG__QCACHE(p) : NULL, q, out, err);
}

int cn_agg__query_run_cached(cn_agg_profile *p, struct cn_agg__qcache **cache,
                             const cn_agg_query *q, cn_agg_tree **out, cn_err *err)
{
    if (!p || !q || !out)
        return cn_err_set(err, -EINVAL, "query: missing argument");
    if ((q->view == CN_AGG_VIEW_CALLEES || q->view == CN_AGG_VIEW_CALLERS) && !q->view_func)
        return cn_err_set(err, -EINVAL, "query: the %s view needs a function",
                          q->view == CN_AGG_VIEW_CALLEES ? "callees" : "callers");
    cn_agg__qrun run;
    double *self = NULL;
    int rc = cn_agg__qrun_init(&run, p, q, cache, err);
    if (rc == 0)
        rc = cn_agg__qrun_transform_all(&run, err);
    if (rc == 0) {
        rc = cn_agg__qrun_self(&run, &self);
        if (rc < 0)
            cn_err_set(err, rc, "query: out of memory");
    }
    if (rc == 0)
        rc = cn_agg__view_build(p, q, &run.t, self, run.merged, run.recur, out, err);
    free(self);
    cn_agg__qrun_free(&run);
    return rc;
}
