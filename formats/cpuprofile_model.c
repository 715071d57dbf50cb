/* cpuprofile_model.c — the DevTools model of a parsed .cpuprofile (cpuprofile.h): the
 * node tree checked and turned into stacks, and samples turned into weighted,
 * timed profile samples.
 *
 * The tree (docs/calltree.md §5.1): parents come from children lists (and `parent`
 * fields); a node listed twice, or the root listed at all, is a cycle; then one
 * breadth-first walk from nodes[0] orders the nodes, and a node it never reached is
 * reported (a cycle away from the root). Every step is linear in the nodes: hostile files
 * of millions of nodes cost their size. (root) is no frame; its children ((program),
 * (idle), (garbage collector) and JS entry points) are roots.
 *
 * Weights reproduce DevTools' CPUProfileDataModel (docs/calltree.md §5.2): one sample per
 * entry of `samples`, at the prefix sum of timeDeltas (ns after startTime), weighing
 * hitCount(node) / (samples of node) — 1 when the file's hit counts agree with its
 * samples, 0 for V8's first `(program)` sample that no hit count covers; hit counts are
 * counted from the samples when nodes[0] has none. The profile's unit is ms and its
 * scale the average interval (endTime − startTime) / 1000 / Σ hitCount, so self(node) =
 * hitCount × the average interval, exactly DevTools' figure. fixMissingSamples (§5.2
 * step 6) and the SamplesIntegrator's GC, (program) and (idle) rules (§5.5) only change
 * timeline stacks (cn_agg_sample_set_timeline_stack).
 *
 * Memory: when the nodes come first (as V8 writes them) and no two nodes share a stack,
 * each `samples` entry goes straight into the profile ("direct mode": at time 0, its time
 * set with cn_agg_sample_set_time as timeDeltas stream by), so the import holds nothing
 * per sample beyond the profile's own table; otherwise node ids (4 bytes per sample) and
 * times (8) are kept until the end.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpuprofile.h"

/* ---- building the tree when the nodes array closes --------------------------------- */

int32_t cn_fmt__cpuprof_node(const cn_fmt__cpuprof *c, int64_t id)
{
    return cn_u64map_get(&c->id_index, (uint64_t)id);
}

/* Interns the func and frame of node i. Returns the frame id or negative errno. */
static int32_t node_frame(cn_fmt__cpuprof *c, size_t i)
{
    const char *name = cn_agg_string_get(c->p, c->n_name[i]);
    const char *url = c->n_url[i] >= 0 ? cn_agg_string_get(c->p, c->n_url[i]) : "";
    int32_t line = c->n_line[i] >= 0 ? c->n_line[i] + 1 : 0;
    int32_t col = c->n_col[i];
    int32_t res = -1;
    char *file = NULL;
    if (!name || !*name)
        name = "(anonymous)";
    if (*url) {
        res = cn_agg_resource(c->p, url, NULL, url, CN_AGG_RES_URL);
        if (res < 0)
            return res;
    }
    /* The func key is (name, resource, file): the position goes into file, so two
     * functions of one name in one script stay apart (a func is (name, url, line, col)). */
    if (*url || line > 0) {
        size_t n = strlen(url) + 32;
        file = malloc(n);
        if (!file)
            return -ENOMEM;
        snprintf(file, n, "%s:%d:%d", url, line, col >= 0 ? col + 1 : 0);
    }
    int32_t func = cn_agg_func(c->p, name, res, file, line);
    free(file);
    if (func < 0)
        return func;
    return cn_agg_frame(c->p, func, res, col >= 0 ? col : -1, line);
}

static bool is_meta_name(const char *s, const char *want)
{
    return s && !strcmp(s, want);
}

/* Parents from children lists (and `parent` fields), reachability from nodes[0], then
 * per node its stack, bottom node and the meta nodes. Returns 1 or 0 (error set). */
int cn_fmt__cpuprof_build_tree(cn_fmt__cpuprof *c)
{
    size_t n = c->n_nodes;
    int32_t *par = NULL, *order = NULL, *kid_off = NULL, *kids = NULL;
    int ok = 0;
    if (n == 0)
        return CN_FMT__CP_FAIL(c, "the nodes array is empty");
    par = malloc(n * sizeof(*par));
    order = malloc(n * sizeof(*order));
    kid_off = calloc(n + 1, sizeof(*kid_off));
    kids = malloc(n * sizeof(*kids));
    c->stack = malloc(n * sizeof(*c->stack));
    c->bottom = malloc(n * sizeof(*c->bottom));
    c->count = calloc(n, sizeof(*c->count));
    c->weight = malloc(n * sizeof(*c->weight));
    if (!par || !order || !kid_off || !kids || !c->stack || !c->bottom || !c->count || !c->weight) {
        CN_FMT__CP_NOMEM(c);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        par[i] = -1;
    for (size_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < c->n_child_cnt[i]; k++) {
            int32_t cid = c->child_ids[c->n_child_off[i] + k];
            int32_t j = cn_fmt__cpuprof_node(c, cid);
            if (j < 0) {
                cn_fmt__jstream_fail_at(&c->js, -EINVAL, c->n_offset[i],
                                        "node %d lists unknown child id %d", c->n_id[i], cid);
                goto out;
            }
            if (par[j] >= 0 || j == 0) {
                cn_fmt__jstream_fail_at(
                    &c->js, -EINVAL, c->n_offset[i],
                    "node %d lists node %d as a child, but it already has a parent "
                    "or is the root (a cycle)",
                    c->n_id[i], cid);
                goto out;
            }
            par[j] = (int32_t)i;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (c->n_parent_id[i] == INT32_MIN)
            continue;
        int32_t j = cn_fmt__cpuprof_node(c, c->n_parent_id[i]);
        if (j < 0 || (par[i] >= 0 && par[i] != j) || i == 0) {
            cn_fmt__jstream_fail_at(&c->js, -EINVAL, c->n_offset[i], "node %d has a bad parent %d",
                                    c->n_id[i], c->n_parent_id[i]);
            goto out;
        }
        par[i] = j;
    }
    /* children lists from par[] (counting sort), then breadth first from the root */
    for (size_t i = 1; i < n; i++)
        if (par[i] >= 0)
            kid_off[par[i] + 1]++;
    for (size_t i = 0; i < n; i++)
        kid_off[i + 1] += kid_off[i];
    for (size_t i = 1; i < n; i++)
        if (par[i] >= 0)
            kids[kid_off[par[i]]++] = (int32_t)i;
    for (size_t i = n; i > 0; i--)
        kid_off[i] = kid_off[i - 1];
    kid_off[0] = 0;
    size_t head = 0, tail = 0;
    order[tail++] = 0;
    while (head < tail) {
        int32_t v = order[head++];
        for (int32_t k = kid_off[v]; k < kid_off[v + 1]; k++)
            order[tail++] = kids[k];
    }
    if (tail < n) { /* report the first node the walk missed: mark the reached ones */
        unsigned char *seen = calloc(n, 1);
        if (!seen) {
            CN_FMT__CP_NOMEM(c);
            goto out;
        }
        for (size_t k = 0; k < tail; k++)
            seen[order[k]] = 1;
        size_t i = 0;
        while (seen[i])
            i++; /* tail < n: some node is unseen */
        free(seen);
        cn_fmt__jstream_fail_at(&c->js, -EINVAL, c->n_offset[i],
                                "node %d is not reachable from the root node (a cycle?)",
                                c->n_id[i]);
        goto out;
    }
    c->program = c->idle = c->gc = -1;
    c->stack[0] = -1;
    c->bottom[0] = -1;
    for (size_t k = 1; k < n; k++) {
        int32_t v = order[k], pv = par[v];
        int32_t frame = node_frame(c, (size_t)v);
        int32_t st = frame < 0 ? frame : cn_agg_stack(c->p, c->stack[pv], frame);
        if (st < 0) {
            CN_FMT__CP_NOMEM(c);
            goto out;
        }
        c->stack[v] = st;
        c->bottom[v] = pv == 0 ? v : c->bottom[pv];
        if (pv == 0) {
            const char *nm = cn_agg_string_get(c->p, c->n_name[v]);
            if (c->program < 0 && is_meta_name(nm, "(program)"))
                c->program = v;
            if (c->idle < 0 && is_meta_name(nm, "(idle)"))
                c->idle = v;
            if (c->gc < 0 && is_meta_name(nm, "(garbage collector)"))
                c->gc = v;
        }
    }
    c->node_of_stack = malloc((cn_agg_stack_count(c->p) + 1) * sizeof(*c->node_of_stack));
    if (!c->node_of_stack) {
        CN_FMT__CP_NOMEM(c);
        goto out;
    }
    memset(c->node_of_stack, 0xff, (cn_agg_stack_count(c->p) + 1) * sizeof(*c->node_of_stack));
    c->injective = true;
    for (size_t v = 1; v < n; v++) {
        if (c->node_of_stack[c->stack[v]] >= 0)
            c->injective = false;
        c->node_of_stack[c->stack[v]] = (int32_t)v;
    }
    c->parent = par;
    par = NULL;
    c->nodes_done = true;
    ok = 1;
out:
    free(par);
    free(order);
    free(kid_off);
    free(kids);
    return ok;
}

static void compute_weights(cn_fmt__cpuprof *c);

/* Turns sample ids into node indices and fixes per-node weights. 1, or 0 with error. */
int cn_fmt__cpuprof_resolve(cn_fmt__cpuprof *c)
{
    if (c->resolved)
        return 1;
    for (size_t k = 0; k < c->n_smp; k++) {
        int32_t j = cn_fmt__cpuprof_node(c, c->smp[k]);
        if (j < 0)
            return cn_fmt__jstream_fail_at(&c->js, -EINVAL, c->samples_offset,
                                           "samples[%zu] references unknown node id %d", k,
                                           c->smp[k]);
        c->smp[k] = j;
        c->count[j]++;
    }
    c->resolved = true;
    compute_weights(c);
    return 1;
}

/* Per-node sample weight hitCount / samples (1 when they agree) and Σ hitCount. */
static void compute_weights(cn_fmt__cpuprof *c)
{
    c->hits_from_file = c->n_hit[0] >= 0;
    c->total_hits = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        double hit =
            c->hits_from_file ? (double)(c->n_hit[i] > 0 ? c->n_hit[i] : 0) : (double)c->count[i];
        c->total_hits += hit;
        c->weight[i] = c->count[i] ? hit / (double)c->count[i] : 0.0;
    }
}

/* Adds sample k at time t (ns after startTime). 1, or 0 with error. */
int cn_fmt__cpuprof_add_sample(cn_fmt__cpuprof *c, size_t k, int64_t t)
{
    int32_t node = c->smp[k];
    if (!c->unsorted && k > 0) {
        int64_t prev = c->times ? c->times[k - 1] : cn_agg_sample_time(c->p, k - 1);
        if (t < prev) {
            c->unsorted = true;
            if (!c->times) { /* keep every time from now on, for the stable re-order */
                c->times = malloc(c->n_smp * sizeof(*c->times));
                if (!c->times)
                    return CN_FMT__CP_NOMEM(c);
                for (size_t i = 0; i < k; i++)
                    c->times[i] = cn_agg_sample_time(c->p, i);
            }
        }
    }
    if (c->times)
        c->times[k] = t;
    if (cn_agg_add_sample(c->p, c->stack[node], t, c->weight[node], -1) < 0)
        return CN_FMT__CP_NOMEM(c);
    return 1;
}

/* Adds samples that could not stream (timeDeltas before samples, or nodes last). */
static int add_remaining(cn_fmt__cpuprof *c)
{
    if (!cn_fmt__cpuprof_resolve(c))
        return 0;
    if (c->have_deltas && c->n_deltas != c->n_smp)
        return cn_fmt__jstream_fail_at(&c->js, -EINVAL, c->samples_offset,
                                       "samples has %zu entries but timeDeltas %zu", c->n_smp,
                                       c->n_deltas);
    if (!c->have_deltas && c->n_smp) { /* no times: spread the samples evenly */
        c->times = malloc(c->n_smp * sizeof(*c->times));
        if (!c->times)
            return CN_FMT__CP_NOMEM(c);
        double step = (c->end_us - c->start_us) * 1000.0 / (double)c->n_smp;
        for (size_t k = 0; k < c->n_smp; k++)
            c->times[k] = (int64_t)llround(step * (double)k);
    }
    for (size_t k = 0; k < c->n_smp; k++)
        if (!cn_fmt__cpuprof_add_sample(c, k, c->times[k]))
            return 0;
    if (!c->have_samples) { /* hit counts only: one sample per node */
        for (size_t i = 1; i < c->n_nodes; i++) {
            if (c->n_hit[i] <= 0)
                continue;
            c->total_hits += (double)c->n_hit[i];
            if (cn_agg_add_sample(c->p, c->stack[i], 0, (double)c->n_hit[i], -1) < 0)
                return CN_FMT__CP_NOMEM(c);
        }
    }
    return 1;
}

static int cmp_order(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* (time, index) pairs */
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* fixMissingSamples (docs/calltree.md §5.2 step 6) on the time-ordered samples, written as
 * timeline stacks. 1, or 0 with error. */
static int fix_missing(cn_fmt__cpuprof *c)
{
    size_t n = c->direct ? c->n_added : c->n_smp;
    int32_t *seq = c->smp;
    int64_t *ord = NULL;
    int ok = 0;
    if (c->program < 0 || n < 3)
        return 1;
    if (c->direct) { /* the profile is the sequence: sort it, read nodes off stacks */
        seq = malloc(n * sizeof(*seq));
        if (!seq || cn_agg_samples_sort(c->p) < 0) {
            CN_FMT__CP_NOMEM(c);
            goto out;
        }
        for (size_t k = 0; k < n; k++) {
            int32_t st = cn_agg_sample_stack(c->p, k);
            seq[k] = st < 0 ? 0 : c->node_of_stack[st];
        }
    } else if (c->unsorted) {
        ord = malloc(n * 2 * sizeof(*ord));
        seq = malloc(n * sizeof(*seq));
        if (!ord || !seq) {
            CN_FMT__CP_NOMEM(c);
            goto out;
        }
        for (size_t k = 0; k < n; k++) {
            ord[2 * k] = c->times[k];
            ord[2 * k + 1] = (int64_t)k;
        }
        qsort(ord, n, 2 * sizeof(*ord), cmp_order);
        for (size_t k = 0; k < n; k++)
            seq[k] = c->smp[ord[2 * k + 1]];
        if (cn_agg_samples_sort(c->p) < 0) {
            CN_FMT__CP_NOMEM(c);
            goto out;
        }
    }
    int32_t prev = seq[0], cur = seq[1];
    for (size_t i = 1; i + 1 < n; i++) {
        int32_t next = seq[i + 1];
        bool sys_prev = prev == c->program || prev == c->gc || prev == c->idle;
        bool sys_next = next == c->program || next == c->gc || next == c->idle;
        if (cur == c->program && !sys_prev && !sys_next && prev != 0 && next != 0 &&
            c->bottom[prev] == c->bottom[next] &&
            cn_agg_sample_set_timeline_stack(c->p, i, c->stack[prev]) < 0) {
            CN_FMT__CP_NOMEM(c);
            goto out;
        }
        prev = cur;
        cur = next;
    }
    ok = 1;
out:
    free(ord);
    if (seq != c->smp)
        free(seq);
    return ok;
}

/* DevTools' SamplesIntegrator (docs/calltree.md §5.5 steps 1 and 7), as timeline stacks
 * on the time-ordered samples after fix_missing: a `(garbage collector)` sample takes the
 * stack of the last sample before it that is not GC (so the calls around it go on), and a
 * `(program)` or `(idle)` sample has no path (it ends every call and is no call itself).
 * Trees are untouched. 1, or 0 with error. */
static int meta_timeline(cn_fmt__cpuprof *c)
{
    const int32_t none = -3; /* matches no stack */
    int32_t gc = c->gc >= 0 ? c->stack[c->gc] : none;
    int32_t program = c->program >= 0 ? c->stack[c->program] : none;
    int32_t idle = c->idle >= 0 ? c->stack[c->idle] : none;
    int32_t prev = -1; /* the timeline stack of the last sample that is not GC */
    size_t n = cn_agg_sample_count(c->p);
    if (gc == none && program == none && idle == none)
        return 1;
    if (cn_agg_samples_sort(c->p) < 0)
        return CN_FMT__CP_NOMEM(c);
    for (size_t i = 0; i < n; i++) {
        int32_t st = cn_agg_sample_timeline_stack(c->p, i), tl;
        if (st == gc)
            tl = prev;
        else
            tl = prev = st == program || st == idle ? -1 : st;
        if (tl != st && cn_agg_sample_set_timeline_stack(c->p, i, tl) < 0)
            return CN_FMT__CP_NOMEM(c);
    }
    return 1;
}

static int set_meta(cn_fmt__cpuprof *c)
{
    char buf[64];
    size_t n = cn_agg_sample_count(c->p);
    double span_ms = (c->end_us - c->start_us) / 1000.0;
    cn_agg_profile_set_unit(c->p, CN_AGG_UNIT_MS);
    cn_agg_profile_set_scale(c->p,
                             c->total_hits > 0 && span_ms > 0 ? span_ms / c->total_hits : 1.0);
    if (cn_agg_meta_set(c->p, "format", "cpuprofile") < 0)
        return CN_FMT__CP_NOMEM(c);
    snprintf(buf, sizeof(buf), "%.17g", c->start_us);
    if (cn_agg_meta_set(c->p, "cpuprofile.start_us", buf) < 0)
        return CN_FMT__CP_NOMEM(c);
    /* DevTools' end of the last sample: last + (last - first) / (n - 1) (§5.2 step 4) */
    if (n > 0) {
        if (cn_agg_samples_sort(c->p) < 0)
            return CN_FMT__CP_NOMEM(c);
        int64_t first = cn_agg_sample_time(c->p, 0), last = cn_agg_sample_time(c->p, n - 1);
        int64_t end =
            n > 1 ? last + (last - first) / (int64_t)(n - 1) : (int64_t)llround(span_ms * 1e6);
        snprintf(buf, sizeof(buf), "%lld", (long long)end);
        if (cn_agg_meta_set(c->p, "timeline.end_ns", buf) < 0)
            return CN_FMT__CP_NOMEM(c);
    }
    return 1;
}

/* Direct mode's end: lengths, times without timeDeltas, weights, the unsorted mark. */
static int finish_direct(cn_fmt__cpuprof *c)
{
    cn_agg_profile *p = c->p;
    size_t n = c->n_added;
    if (c->have_deltas && c->n_deltas != n)
        return cn_fmt__jstream_fail_at(&c->js, -EINVAL, c->samples_offset,
                                       "samples has %zu entries but timeDeltas %zu", n,
                                       c->n_deltas);
    if (!c->have_deltas) { /* no times: spread the samples evenly */
        double step = (c->end_us - c->start_us) * 1000.0 / (double)(n ? n : 1);
        for (size_t k = 0; k < n; k++)
            cn_agg_sample_set_time(p, k, (int64_t)llround(step * (double)k)); /* k < n */
    }
    compute_weights(c);
    bool all_one = true;
    for (size_t i = 0; i < c->n_nodes && all_one; i++)
        all_one = !c->count[i] || c->weight[i] == 1.0;
    for (size_t k = 0; k < n && !all_one; k++) {
        int32_t st = cn_agg_sample_stack(p, k);
        cn_agg_sample_set_weight(p, k, c->weight[st < 0 ? 0 : c->node_of_stack[st]]); /* k < n */
    }
    return 1;
}

int cn_fmt__cpuprof_complete(cn_fmt__cpuprof *c)
{
    if (c->direct) {
        if (!finish_direct(c))
            return c->js.rc;
    } else if (!c->streaming && !add_remaining(c)) {
        return c->js.rc;
    }
    if (c->streaming && !c->direct && c->n_deltas != c->n_smp)
        return cn_err_set(c->js.err, -EINVAL, "%s: samples has %zu entries but timeDeltas %zu",
                          c->js.name, c->n_smp, c->n_deltas);
    if (!fix_missing(c) || !meta_timeline(c) || !set_meta(c))
        return c->js.rc;
    return 0;
}
