/* ingest.c — native callchains into stacks: the whole-callchain cache and the batched
 * sample entry (the ingest hot path, docs/perf-aggregate.md).
 *
 * A callchain is looked up by a 96-bit key of its XXH3-128 hash in a bounded cache of two
 * generations (p->cache, agg_internal.h) in front of the frame-by-frame interning of
 * profile.c (cn_agg_stack_from_refs), so a stack seen before costs one hash and one probe
 * instead of one interning step per frame; the batch entry (cn_agg_add_samples_refs)
 * hashes a group of callchains and prefetches their slots before probing, so the probes'
 * cache misses overlap.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL /* the hash is on the ingest hot path */
#include <xxhash.h>

#include "agg_internal.h"

/* ---- the whole-callchain cache ---------------------------------------------------- */

/* The cache key of a callchain: 96 bits of its XXH3-128 hash, lo never 0. */
typedef struct refs_key {
    uint64_t lo;
    uint32_t hi;
} refs_key;

static refs_key refs_hash(const cn_agg_frame_ref *refs, size_t n)
{
    _Static_assert(sizeof(cn_agg_frame_ref) == 16, "cn_agg_frame_ref must have no padding");
    _Static_assert(sizeof(cn_agg__cache_slot) == 16, "a cache slot is a quarter cache line");
    XXH128_hash_t h = XXH3_128bits(refs, n * sizeof(*refs));
    refs_key k = {h.low64 ? h.low64 : 1, (uint32_t)h.high64}; /* lo 0 marks an empty slot */
    return k;
}

enum { TABLE_MIN_SLOTS = 1024 };

static size_t gen_entries(const cn_agg__stack_cache *c)
{
    return c->max_entries ? c->max_entries : CN_AGG__CACHE_GEN_ENTRIES;
}

/* Puts sl into t, which has a free slot. */
static void table_insert(cn_agg__cache_table *t, cn_agg__cache_slot sl)
{
    size_t i = sl.lo & t->mask;
    while (t->slots[i].lo)
        i = (i + 1) & t->mask;
    t->slots[i] = sl;
    t->count++;
}

static int table_rehash(cn_agg__cache_table *t, size_t ncap)
{
    cn_agg__cache_table n = {aligned_alloc(64, ncap * sizeof(cn_agg__cache_slot)), ncap - 1, 0};
    if (!n.slots)
        return -ENOMEM;
    memset(n.slots, 0, ncap * sizeof(*n.slots));
    for (size_t i = 0; t->mask && i <= t->mask; i++)
        if (t->slots[i].lo)
            table_insert(&n, t->slots[i]);
    free(t->slots);
    *t = n;
    return 0;
}

static inline int32_t table_get(const cn_agg__cache_table *t, uint64_t lo, uint32_t hi)
{
    if (!t->mask)
        return -1;
    for (size_t i = lo & t->mask;; i = (i + 1) & t->mask) {
        const cn_agg__cache_slot *sl = &t->slots[i];
        if (sl->lo == lo && sl->hi == hi)
            return sl->stack;
        if (!sl->lo)
            return -1;
    }
}

/* Puts sl into t (absent), growing t past half full; 0 or -ENOMEM. */
static int table_put(cn_agg__cache_table *t, cn_agg__cache_slot sl)
{
    size_t cap = t->mask ? t->mask + 1 : 0;
    if ((t->count + 1) * 2 > cap && table_rehash(t, cap ? cap * 2 : TABLE_MIN_SLOTS) < 0)
        return -ENOMEM;
    table_insert(t, sl);
    return 0;
}

void cn_agg__cache_put(cn_agg__stack_cache *c, uint64_t lo, uint32_t hi, int32_t stack)
{
    assert(lo != 0 && stack >= 0);
    if (c->cur.count >= gen_entries(c)) { /* the current generation becomes the old one */
        size_t cap = c->cur.mask + 1;
        free(c->old.slots);
        c->old = c->cur;
        memset(&c->cur, 0, sizeof(c->cur));
        (void)table_rehash(&c->cur, cap); /* at the size it will fill: no regrowth; or grows */
    }
    (void)table_put(&c->cur, (cn_agg__cache_slot){lo, hi, stack});
}

int32_t cn_agg__cache_get(cn_agg__stack_cache *c, uint64_t lo, uint32_t hi)
{
    int32_t stack = table_get(&c->cur, lo, hi);
    if (stack >= 0 || !c->old.mask)
        return stack;
    stack = table_get(&c->old, lo, hi);
    if (stack >= 0)
        cn_agg__cache_put(c, lo, hi, stack); /* still in use: it stays */
    return stack;
}

size_t cn_agg__cache_count(const cn_agg__stack_cache *c)
{
    return c->cur.count + c->old.count;
}

size_t cn_agg__cache_bytes(const cn_agg__stack_cache *c)
{
    size_t slots = (c->cur.mask ? c->cur.mask + 1 : 0) + (c->old.mask ? c->old.mask + 1 : 0);
    return slots * sizeof(cn_agg__cache_slot);
}

void cn_agg__cache_clear(cn_agg__stack_cache *c)
{
    free(c->cur.slots);
    free(c->old.slots);
    memset(&c->cur, 0, sizeof(c->cur));
    memset(&c->old, 0, sizeof(c->old));
}

/* The entries of from whose stack s has (keep[s] & bit), renumbered by map (NULL:
 * unchanged), into the empty table out; 0 or -ENOMEM. */
static int table_filter(const cn_agg__cache_table *from, const uint8_t *keep, uint8_t bit,
                        const int32_t *map, cn_agg__cache_table *out)
{
    for (size_t i = 0; from->mask && i <= from->mask; i++) {
        cn_agg__cache_slot sl = from->slots[i];
        if (!sl.lo || !(keep[sl.stack] & bit))
            continue;
        if (map)
            sl.stack = map[sl.stack];
        if (table_put(out, sl) < 0)
            return -ENOMEM;
    }
    return 0;
}

int cn_agg__cache_filter(const cn_agg__stack_cache *from, const uint8_t *keep, uint8_t bit,
                         const int32_t *map, cn_agg__stack_cache *out)
{
    memset(out, 0, sizeof(*out));
    out->max_entries = from->max_entries;
    if (table_filter(&from->cur, keep, bit, map, &out->cur) < 0 ||
        table_filter(&from->old, keep, bit, map, &out->old) < 0) {
        cn_agg__cache_clear(out);
        return -ENOMEM;
    }
    return 0;
}

/* Interns the callchain frame by frame, root first. */
static int32_t intern_refs(cn_agg_profile *p, const cn_agg_frame_ref *leaf_first, size_t n)
{
    int32_t stack = -1;
    for (size_t i = n; i-- > 0;) {
        int64_t res = leaf_first[i].resource;
        if (res < -1 || res > INT32_MAX)
            return -EINVAL;
        int32_t frame = cn_agg_native_frame(p, (int32_t)res, leaf_first[i].offset);
        if (frame < 0)
            return frame;
        stack = cn_agg_stack(p, stack, frame);
        if (stack < 0)
            return stack;
    }
    return stack;
}

/* The stack of a callchain whose key is k: from the cache, or interned and cached. */
static inline int32_t stack_of_key(cn_agg_profile *p, refs_key k,
                                   const cn_agg_frame_ref *leaf_first, size_t n)
{
    int32_t stack = cn_agg__cache_get(&p->cache, k.lo, k.hi);
    if (stack >= 0)
        return stack;
    stack = intern_refs(p, leaf_first, n);
    if (stack >= 0)
        cn_agg__cache_put(&p->cache, k.lo, k.hi, stack);
    return stack;
}

int32_t cn_agg_stack_from_refs(cn_agg_profile *p, const cn_agg_frame_ref *leaf_first, size_t n)
{
    if (n == 0 || n > UINT32_MAX || !leaf_first)
        return -EINVAL;
    return stack_of_key(p, refs_hash(leaf_first, n), leaf_first, n);
}

/* Entries hashed (and their slots prefetched) ahead of probing: enough misses in flight
 * to cover memory latency, few enough that the group's slots stay in L1. */
#define BATCH_GROUP 16

/* Entries ahead whose callchains are prefetched while hashing, and at most how many
 * cache lines of each: the refs are read once, by the hash, as a stream. */
#define BATCH_REFS_AHEAD 2
#define BATCH_REFS_LINES 16

static inline void prefetch_refs(const cn_agg_sample_refs *e)
{
    const char *b = (const char *)e->leaf_first;
    size_t bytes = e->n * sizeof(cn_agg_frame_ref);
    if (bytes > BATCH_REFS_LINES * 64)
        bytes = BATCH_REFS_LINES * 64;
    for (size_t off = 0; off < bytes; off += 64)
        __builtin_prefetch(b + off);
}

/* 0 if e can be added, else -EINVAL (resources are checked while interning). */
static int sample_refs_check(const cn_agg_profile *p, const cn_agg_sample_refs *e)
{
    if ((e->n && !e->leaf_first) || e->n > UINT32_MAX || e->thread < -1 ||
        (e->thread >= 0 && (size_t)e->thread >= p->n_thr))
        return -EINVAL;
    return 0;
}

int cn_agg_add_samples_refs(cn_agg_profile *p, const cn_agg_sample_refs *batch, size_t n)
{
    if (n && !batch)
        return -EINVAL;
    refs_key keys[BATCH_GROUP];
    for (size_t g = 0; g < n; g += BATCH_GROUP) {
        const cn_agg_sample_refs *grp = batch + g;
        size_t m = n - g < BATCH_GROUP ? n - g : BATCH_GROUP, ok = m;
        int err = 0;
        for (size_t j = 0; j < m; j++) {
            if ((err = sample_refs_check(p, &grp[j])) < 0) {
                ok = j; /* add the entries before it, then fail */
                break;
            }
            if (g + j + BATCH_REFS_AHEAD < n)
                prefetch_refs(&grp[j + BATCH_REFS_AHEAD]);
            if (!grp[j].n)
                continue;
            keys[j] = refs_hash(grp[j].leaf_first, grp[j].n);
            if (p->cache.cur.mask)
                __builtin_prefetch(&p->cache.cur.slots[keys[j].lo & p->cache.cur.mask]);
        }
        for (size_t j = 0; j < ok; j++) {
            const cn_agg_sample_refs *e = &grp[j];
            int32_t stack = -1;
            if (e->n && (stack = stack_of_key(p, keys[j], e->leaf_first, e->n)) < 0)
                return stack;
            int r = cn_agg_add_sample(p, stack, e->time_ns, e->weight, e->thread);
            if (r < 0)
                return r;
        }
        if (err < 0)
            return err;
    }
    return 0;
}
