/* regroup.c — symbolication reshapes the tree (docs/calltree.md §4).
 *
 * A frame's func chain (outer first; longer than one when inlines were found) is
 * replaced by what the symbolizer found. Nothing else is rewritten: call nodes are derived
 * from frames at query time, so stacks whose frames now share a func merge on the next
 * query, and totals cannot change. What clients hold — paths and transform arguments,
 * by displayed name — is carried over by the rename map: old func name → new names, kept
 * only where every frame of the old func agreed (the §4.2 step 4 consensus) and kept
 * transitively closed, so a name renamed twice maps straight to its latest names.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agg_internal.h"

#define MAX_INLINE_DEPTH 64

/* A proposed rename of one old func, gathered while applying the batch. */
struct candidate {
    int32_t old_func;
    int32_t off, len; /* new funcs in the scratch pool */
    bool divergent;
};

struct scratch {
    int32_t *pool; /* new chains, then candidate chains */
    size_t len, cap;
    struct candidate *cand;
    size_t n_cand, cap_cand;
    cn_u64map cand_index; /* old func -> candidate */
};

static void scratch_free(struct scratch *s)
{
    free(s->pool);
    free(s->cand);
    cn_u64map_clear(&s->cand_index);
}

static int pool_push(struct scratch *s, int32_t v)
{
    if (CN_RESERVE(s->pool, s->cap, s->len + 1) < 0)
        return -ENOMEM;
    s->pool[s->len++] = v;
    return 0;
}

/* Resolves every entry's chain to func ids (creating funcs) into s->pool; entry i's
 * chain starts at offs[i], its symbol func (-1: none) is symf[i]. Creates funcs only:
 * frames are not touched. */
static int resolve_chains(cn_agg_profile *p, const cn_agg_frame_symbols *batch, size_t n,
                          size_t *offs, int32_t *symf, struct scratch *s)
{
    for (size_t i = 0; i < n; i++) {
        const cn_agg_frame_symbols *e = &batch[i];
        if (e->frame < 0 || (size_t)e->frame >= p->n_frame || e->depth == 0 ||
            e->depth > MAX_INLINE_DEPTH || !e->chain)
            return -EINVAL;
        offs[i] = s->len;
        for (size_t d = 0; d < e->depth; d++) {
            if (!e->chain[d].name)
                return -EINVAL;
            int32_t f =
                cn_agg_func(p, e->chain[d].name, p->frame_res[e->frame], e->chain[d].file, 0);
            if (f < 0)
                return f;
            if (pool_push(s, f) < 0)
                return -ENOMEM;
        }
        symf[i] = -1;
        if (e->symbol) {
            /* the outer function's file: the symbol names the same code */
            int32_t f = cn_agg_func(p, e->symbol, p->frame_res[e->frame], e->chain[0].file, 0);
            if (f < 0)
                return f;
            symf[i] = f == s->pool[offs[i]] ? -1 : f; /* the same name: no symbol func */
        }
    }
    return 0;
}

static bool same_chain(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && memcmp(a, b, na * sizeof(*a)) == 0;
}

/* Records that old func `old` (a frame's whole old chain, when it had depth 1) now
 * maps to chain[0..len): a second, different mapping makes the old func divergent. */
static int propose(struct scratch *s, int32_t old, const int32_t *chain, size_t len)
{
    int32_t ci = cn_u64map_get(&s->cand_index, (uint64_t)(uint32_t)old);
    if (ci >= 0) {
        struct candidate *c = &s->cand[ci];
        if (!same_chain(s->pool + c->off, (size_t)c->len, chain, len))
            c->divergent = true;
        return 0;
    }
    if (CN_RESERVE(s->cand, s->cap_cand, s->n_cand + 1) < 0)
        return -ENOMEM;
    /* chain may point into s->pool: copy by index, since pushing can move the pool */
    size_t src = (size_t)(chain - s->pool), off = s->len;
    for (size_t d = 0; d < len; d++)
        if (pool_push(s, s->pool[src + d]) < 0)
            return -ENOMEM;
    s->cand[s->n_cand] = (struct candidate){old, (int32_t)off, (int32_t)len, false};
    if (cn_u64map_put(&s->cand_index, (uint64_t)(uint32_t)old, (int32_t)s->n_cand) < 0)
        return -ENOMEM;
    s->n_cand++;
    return 0;
}

/* Replaces frame f's chain with chain[0..len), in place when it fits. The pool has
 * been reserved by the caller, so this cannot fail. */
static void set_chain(cn_agg_profile *p, int32_t f, const int32_t *chain, size_t len)
{
    assert(len >= 1 && len <= MAX_INLINE_DEPTH); /* resolve_chains checked it */
    cn_agg__chain_uses(p, p->frame_chain[f], p->frame_depth[f], -1);
    if (len > p->frame_depth[f]) {
        assert(p->chain_len + len <= p->chain_cap); /* reserved by cn_agg_regroup */
        p->frame_chain[f] = (int32_t)p->chain_len;
        p->chain_len += len;
    }
    memcpy(p->chain_pool + p->frame_chain[f], chain, len * sizeof(*chain));
    p->frame_depth[f] = (uint16_t)len;
    cn_agg__chain_uses(p, p->frame_chain[f], len, 1);
}

/* ---- the rename map ---------------------------------------------------------------- */

static int rename_pool_push(cn_agg_profile *p, int32_t v)
{
    if (CN_RESERVE(p->rename_pool, p->rename_pool_cap, p->rename_pool_len + 1) < 0)
        return -ENOMEM;
    p->rename_pool[p->rename_pool_len++] = v;
    return 0;
}

/* Rewrites existing entries whose new names contain old_name, so the map stays closed. */
static int rename_substitute(cn_agg_profile *p, int32_t old_name, const int32_t *names, size_t n)
{
    for (size_t i = 0; i < p->n_rename; i++) {
        int32_t off = p->rename_off[i], cnt = p->rename_cnt[i];
        bool hit = false;
        for (int32_t k = 0; k < cnt; k++)
            hit |= p->rename_pool[off + k] == old_name;
        if (!hit)
            continue;
        size_t new_off = p->rename_pool_len;
        for (int32_t k = 0; k < cnt; k++) {
            int32_t v = p->rename_pool[off + k];
            if (v != old_name) {
                if (rename_pool_push(p, v) < 0)
                    return -ENOMEM;
                continue;
            }
            for (size_t j = 0; j < n; j++)
                if (rename_pool_push(p, names[j]) < 0)
                    return -ENOMEM;
        }
        p->rename_off[i] = (int32_t)new_off;
        p->rename_cnt[i] = (int32_t)(p->rename_pool_len - new_off);
    }
    return 0;
}

static int rename_add(cn_agg_profile *p, int32_t old_name, const int32_t *names, size_t n)
{
    /* Only a name that is some row's target needs the scan that keeps the map closed:
     * the usual old names (`LIB+0x…` placeholders) never are, so the usual add is O(1). */
    if (cn_u64map_get(&p->rename_targets, (uint64_t)(uint32_t)old_name) >= 0 &&
        rename_substitute(p, old_name, names, n) < 0)
        return -ENOMEM;
    for (size_t j = 0; j < n; j++)
        if (cn_u64map_get(&p->rename_targets, (uint64_t)(uint32_t)names[j]) < 0 &&
            cn_u64map_put(&p->rename_targets, (uint64_t)(uint32_t)names[j], 1) < 0)
            return -ENOMEM;
    int32_t found = cn_u64map_get(&p->rename_index, (uint64_t)(uint32_t)old_name);
    assert(found < 0 || p->rename_old[found] == old_name); /* one row per old name */
    size_t row = found >= 0 ? (size_t)found : p->n_rename;
    if (row == p->n_rename) {
        size_t c1 = p->cap_rename, c2 = p->cap_rename, c3 = p->cap_rename;
        if (CN_RESERVE(p->rename_old, c1, row + 1) < 0 ||
            CN_RESERVE(p->rename_off, c2, row + 1) < 0 ||
            CN_RESERVE(p->rename_cnt, c3, row + 1) < 0)
            return -ENOMEM;
        p->cap_rename = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
        if (cn_u64map_put(&p->rename_index, (uint64_t)(uint32_t)old_name, (int32_t)row) < 0)
            return -ENOMEM;
        p->n_rename++;
    }
    size_t off = p->rename_pool_len;
    for (size_t j = 0; j < n; j++)
        if (rename_pool_push(p, names[j]) < 0)
            return -ENOMEM;
    p->rename_old[row] = old_name;
    p->rename_off[row] = (int32_t)off;
    p->rename_cnt[row] = (int32_t)n;
    return 0;
}

/* Adds the consensus entries: old funcs that no frame uses any more, whose frames all
 * agreed, and whose name actually changed. */
static int commit_renames(cn_agg_profile *p, struct scratch *s)
{
    int32_t *names = NULL;
    int rc = -ENOMEM;
    names = malloc(MAX_INLINE_DEPTH * sizeof(*names));
    if (!names)
        goto out;
    for (size_t i = 0; i < s->n_cand; i++) {
        const struct candidate *c = &s->cand[i];
        if (c->divergent || p->func_uses[c->old_func] > 0)
            continue;
        assert(c->len >= 1 && c->len <= MAX_INLINE_DEPTH); /* fits names[] */
        for (int32_t d = 0; d < c->len; d++)
            names[d] = p->func_name[s->pool[c->off + d]];
        int32_t old_name = p->func_name[c->old_func];
        if (c->len == 1 && names[0] == old_name)
            continue;
        if (rename_add(p, old_name, names, (size_t)c->len) < 0)
            goto out;
    }
    rc = 0;
out:
    free(names);
    return rc;
}

int cn_agg__rename_reindex(cn_agg_profile *p)
{
    cn_u64map_clear(&p->rename_index);
    cn_u64map_clear(&p->rename_targets);
    for (size_t i = 0; i < p->n_rename; i++) {
        uint64_t old = (uint64_t)(uint32_t)p->rename_old[i];
        if (cn_u64map_get(&p->rename_index, old) >= 0)
            return -EINVAL; /* one row per old name */
        if (cn_u64map_put(&p->rename_index, old, (int32_t)i) < 0)
            return -ENOMEM;
        for (int32_t k = 0; k < p->rename_cnt[i]; k++) {
            uint64_t name = (uint64_t)(uint32_t)p->rename_pool[p->rename_off[i] + k];
            if (cn_u64map_get(&p->rename_targets, name) < 0 &&
                cn_u64map_put(&p->rename_targets, name, 1) < 0)
                return -ENOMEM;
        }
    }
    return 0;
}

size_t cn_agg_rename_count(const cn_agg_profile *p)
{
    return p->n_rename;
}

int32_t cn_agg__rename_row(const cn_agg_profile *p, const char *s)
{
    int32_t name = cn_agg__string_find(p, s, strlen(s));
    return name < 0 ? -1 : cn_u64map_get(&p->rename_index, (uint64_t)(uint32_t)name);
}

int cn_agg_regroup(cn_agg_profile *p, const cn_agg_frame_symbols *batch, size_t n)
{
    struct scratch s = {0};
    size_t *offs = calloc(n ? n : 1, sizeof(*offs));
    int32_t *symf = calloc(n ? n : 1, sizeof(*symf));
    int rc = -ENOMEM;
    if (!offs || !symf)
        goto out;
    rc = resolve_chains(p, batch, n, offs, symf, &s);
    if (rc < 0)
        goto out;
    /* Reserve the frames' pool for the worst case so applying cannot fail half-way. */
    size_t extra = s.len;
    rc = -ENOMEM;
    if (p->chain_len + extra > INT32_MAX ||
        CN_RESERVE(p->chain_pool, p->chain_cap, p->chain_len + extra) < 0)
        goto out;
    /* First gather the renames (reads the old chains), then apply: only the first
     * step can fail, so a failure leaves every frame as it was. */
    for (size_t i = 0; i < n; i++) {
        int32_t f = batch[i].frame;
        if (p->frame_depth[f] != 1)
            continue;
        rc = propose(&s, p->chain_pool[p->frame_chain[f]], s.pool + offs[i], batch[i].depth);
        if (rc < 0)
            goto out;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t f = batch[i].frame;
        set_chain(p, f, s.pool + offs[i], batch[i].depth);
        p->frame_sym_func[f] = symf[i];
        p->frame_line[f] = batch[i].chain[batch[i].depth - 1].line;
    }
    p->func_generation++;
    rc = commit_renames(p, &s);
out:
    free(offs);
    free(symf);
    scratch_free(&s);
    return rc;
}
