/* agg_internal.h — what aggregate/'s files share and nobody else sees.
 *
 * The profile's layout (struct of arrays, dense int32 ids), the two hash tables every
 * interning step uses (a uint64 → int32 map for numeric keys such as (prefix, frame), and
 * an id set whose keys live in the tables themselves, for strings and funcs), and growable
 * arrays. Names carry the cn_agg__ prefix.
 */
#ifndef CN_AGG_INTERNAL_H
#define CN_AGG_INTERNAL_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cn_agg.h"

/* ---- id set with keys stored elsewhere -------------------------------------------- */

/* Slots hold (hash, id); equality is asked of the caller through eq(ctx, id, key). A slot's
 * hash and id sit side by side: a probe is one cache miss, where two arrays made it two
 * (the stack index's probes were 9.5% of canopyd's CPU during a build). */
typedef struct cn_agg__idslot {
    uint32_t hash;
    int32_t id; /* -1 = empty */
} cn_agg__idslot;

typedef struct cn_agg__idset {
    cn_agg__idslot *slots;
    size_t mask;
    size_t count;
} cn_agg__idset;

typedef bool (*cn_agg__eq_fn)(const void *ctx, int32_t id, const void *key);

int32_t cn_agg__idset_find(const cn_agg__idset *s, uint32_t hash, cn_agg__eq_fn eq, const void *ctx,
                           const void *key);
/* Adds id under hash (caller checked absence). Returns 0 or -ENOMEM. */
int cn_agg__idset_add(cn_agg__idset *s, uint32_t hash, int32_t id);
/* Makes room for n ids without growing on the way. Returns 0 or -ENOMEM. */
int cn_agg__idset_reserve(cn_agg__idset *s, size_t n);
void cn_agg__idset_clear(cn_agg__idset *s);

/* ---- the profile ------------------------------------------------------------------ */

/* A block of the string arena; strings never move once written. */
typedef struct cn_agg__block {
    struct cn_agg__block *next;
    size_t used, cap;
    char data[];
} cn_agg__block;

/* The whole-callchain cache in front of per-frame interning (ingest hot path): a
 * callchain is identified by 96 bits of the XXH3-128 hash of its (resource, offset)
 * sequence (the hash covers the length: it hashes n * 16 bytes). Sequences are not
 * stored: with N distinct stacks a false match has probability about N^2 / 2^97
 * (~1e-15 for 10 M stacks). Slots are 16 bytes in a 64-byte aligned array, so a probe
 * touches one cache line and linear probing mostly stays inside it. */
typedef struct cn_agg__cache_slot {
    uint64_t lo;   /* low 64 bits of the hash (never 0); 0 marks an empty slot */
    uint32_t hi;   /* 32 bits of the high half */
    int32_t stack; /* leaf stack id */
} cn_agg__cache_slot;

typedef struct cn_agg__cache_table {
    cn_agg__cache_slot *slots; /* aligned_alloc(64); mask + 1 slots, at most half full */
    size_t mask;               /* 0 while unallocated */
    size_t count;
} cn_agg__cache_table;

/* The whole-callchain cache (ingest.c): two generations of open-addressing tables. New
 * callchains go into cur; when cur holds max_entries, it becomes old and old is dropped;
 * a callchain found in old is put into cur again. So what is used stays and memory is
 * bounded by two tables (4 MiB at the default bound) however many distinct callchains a
 * session's retention holds. An accelerator only: a callchain not found is interned frame
 * by frame, with the same result. */
#define CN_AGG__CACHE_GEN_ENTRIES 65536
typedef struct cn_agg__stack_cache {
    cn_agg__cache_table cur, old;
    size_t max_entries; /* of a generation; 0 = CN_AGG__CACHE_GEN_ENTRIES (tests set less) */
} cn_agg__stack_cache;

/* The stack cached under (lo, hi), or -1; one found in the old generation moves into
 * the current one. */
int32_t cn_agg__cache_get(cn_agg__stack_cache *c, uint64_t lo, uint32_t hi);
/* Caches stack under (lo, hi), absent from the current generation. The cache is an
 * accelerator: when it cannot grow, the stack is simply not cached. */
void cn_agg__cache_put(cn_agg__stack_cache *c, uint64_t lo, uint32_t hi, int32_t stack);
/* The entries of both generations, and the bytes their tables hold. */
size_t cn_agg__cache_count(const cn_agg__stack_cache *c);
size_t cn_agg__cache_bytes(const cn_agg__stack_cache *c);
void cn_agg__cache_clear(cn_agg__stack_cache *c);
/* A cache (out, overwritten) of from's entries whose stack s has (keep[s] & bit), in the
 * same generations, renumbered by map (NULL: unchanged); 0 or -ENOMEM (out empty). */
int cn_agg__cache_filter(const cn_agg__stack_cache *from, const uint8_t *keep, uint8_t bit,
                         const int32_t *map, cn_agg__stack_cache *out);

struct cn_agg_profile {
    /* strings */
    cn_agg__block *arena;
    size_t arena_bytes; /* the arena's blocks, headers included (cn_agg_profile_memory) */
    const char **str;
    uint32_t *str_len;
    size_t n_str, cap_str;
    cn_agg__idset str_index;

    /* resources */
    int32_t *res_name, *res_identity, *res_path; /* string ids; identity/path may be -1 */
    uint8_t *res_kind;
    size_t n_res, cap_res;
    cn_agg__idset res_index; /* by identity, or by name when identity is -1 */

    /* funcs */
    int32_t *func_name, *func_res, *func_file, *func_line;
    uint32_t *func_uses; /* chain slots of frames naming each func (commit_renames asks
                            whether a func is still used without walking every frame) */
    size_t n_func, cap_func;
    cn_agg__idset func_index; /* by (name, res, file) */

    /* frames: the func chain of frame f is chain_pool[frame_chain[f] ..
     * frame_chain[f] + frame_depth[f]) (outer first) */
    int32_t *frame_res, *frame_line, *frame_chain;
    int64_t *frame_addr;
    uint16_t *frame_depth;
    int32_t *frame_key_func; /* the func the frame was interned with (-1 for native) */
    /* the func the symbol table names at the frame's address when it differs from the
     * chain's outer func (clones, aliases; -1 = none): a no_inline query's func for the
     * frame (docs/calltree.md §4.5) */
    int32_t *frame_sym_func;
    size_t n_frame, cap_frame;
    int32_t *chain_pool;
    size_t chain_len, chain_cap;
    cn_agg__idset frame_index;        /* frames of known funcs by (func, res, addr, line) */
    cn_agg__idset native_frame_index; /* native frames by (res, offset): the key is the row */

    /* stacks */
    int32_t *stack_prefix, *stack_frame;
    size_t n_stack, cap_stack;
    cn_agg__idset stack_index; /* by (prefix, frame): 8 bytes a slot, the key is the row */
    cn_agg__stack_cache cache;
    cn_agg_frame_namer namer; /* names for new native frames, or NULL (cn_agg.h) */
    void *namer_ctx;

    /* samples, kept sorted by time (sorted_upto marks the sorted prefix) */
    int32_t *s_stack, *s_thread;
    int64_t *s_time;
    double *s_weight;    /* NULL while every weight is 1 (CPU samples): a third less memory
                            per raw sample; read with cn_agg__weight() */
    int32_t *s_tl_stack; /* NULL until a timeline stack is set; -2 = same as s_stack, -1 = none */
    size_t n_sample, cap_sample;
    bool unsorted;

    /* all-time accumulator for samples folded out of the table (retention) */
    int32_t *acc_stack, *acc_thread;
    double *acc_weight;
    size_t n_acc, cap_acc;
    cn_u64map acc_index; /* (stack, thread) */

    /* threads and processes */
    int32_t *thr_pid, *thr_tid, *thr_name; /* name: string id or -1 */
    size_t n_thr, cap_thr;
    cn_u64map thr_index;                         /* (pid, tid) */
    int32_t *proc_pid, *proc_name, *proc_cgroup; /* name, cgroup: string ids or -1 */
    size_t n_proc, cap_proc;
    cn_u64map proc_index; /* pid -> row */

    /* metadata */
    cn_agg_unit unit;
    double scale;
    int32_t *meta_key, *meta_val; /* string ids */
    size_t n_meta, cap_meta;

    /* symbolication: old func name -> new names (consensus map, §4.2 step 4); names are
     * string ids; rename_new[rename_off[i] .. rename_off[i] + rename_cnt[i]) */
    int32_t *rename_old, *rename_off, *rename_cnt;
    size_t n_rename, cap_rename;
    int32_t *rename_pool;
    size_t rename_pool_len, rename_pool_cap;
    cn_u64map rename_index;   /* old name -> row */
    cn_u64map rename_targets; /* names that occur in some row's new names -> 1 */

    /* bumped by every change that invalidates derived data (regroup, compaction) */
    uint64_t func_generation;

    /* callchain cache entries kept by the last compaction (cn_agg_compact_due) */
    size_t compact_cached;

    /* the query engine's cache of the func-level base table (query.c); owned */
    struct cn_agg__qcache *qcache;
};

/* Rebuilds the rename map's indexes after its rows were loaded directly (.canopy files).
 * Returns 0, -EINVAL for two rows of one old name, or -ENOMEM. */
int cn_agg__rename_reindex(cn_agg_profile *p);
/* The rename map row for name s (exact bytes), or -1. */
int32_t cn_agg__rename_row(const cn_agg_profile *p, const char *s);
/* The func index's hash of (name, res, file) and the resource index's of its key string
 * (the identity's id, or the name's when by_identity is false): compaction rebuilds both
 * when string ids move. */
uint32_t cn_agg__func_hash(int32_t name, int32_t res, int32_t file);
uint32_t cn_agg__res_hash(int32_t key_str, bool by_identity);
/* The placeholder func of the native frame (res, offset) (docs/cli.md "Names": the func
 * cn_agg_native_frame made with it), or -1 when there is none (never interns). */
int32_t cn_agg__placeholder_find(const cn_agg_profile *p, int32_t res, uint64_t offset);
/* The id of string s if it is interned, else -1 (never interns). */
int32_t cn_agg__string_find(const cn_agg_profile *p, const char *s, size_t len);

/* Sorts samples by time (stable) if appends arrived out of order. */
void cn_agg__samples_sort(cn_agg_profile *p);

/* ---- query engine ---- */
/* (implemented in query.c) The query cache keeps the ungrouped func-level base table
 * across queries (rebuilt after a regroup, extended for new stacks); the profile holds it
 * in p->qcache and frees it with cn_agg__qcache_free. */
struct cn_agg__qcache;
struct cn_agg__qcache *cn_agg__qcache_free(struct cn_agg__qcache *c);
/* Bytes the cache holds (for cn_agg_profile_memory); 0 for NULL. */
size_t cn_agg__qcache_memory(const struct cn_agg__qcache *c);
/* cn_agg_query_run with an explicit cache slot (NULL = no cache). */
int cn_agg__query_run_cached(cn_agg_profile *p, struct cn_agg__qcache **cache,
                             const cn_agg_query *q, cn_agg_tree **out, cn_err *err);

/* The stack index's hash of (prefix, frame). */
static inline uint32_t cn_agg__stack_hash(int32_t prefix, int32_t frame)
{
    return (uint32_t)cn_mix64(cn_pair(prefix, frame));
}
/* The stack row (prefix, frame), or -1. */
int32_t cn_agg__stack_find(const cn_agg_profile *p, int32_t prefix, int32_t frame);
/* cn_agg_native_frame, but a new frame is made with func (no namer, no placeholder): the
 * .canopy reader, which then sets the frame's chain from the file. */
int32_t cn_agg__native_frame_as(cn_agg_profile *p, int32_t resource, uint64_t offset, int32_t func);

/* Sample i's weight (s_weight is NULL while all are 1). */
static inline double cn_agg__weight(const cn_agg_profile *p, size_t i)
{
    return p->s_weight ? p->s_weight[i] : 1.0;
}

/* Counts the funcs of chain_pool[off, off + len) as used (delta 1) or no longer (-1). */
static inline void cn_agg__chain_uses(cn_agg_profile *p, int32_t off, size_t len, int delta)
{
    for (size_t d = 0; d < len; d++) {
        int32_t f = p->chain_pool[(size_t)off + d];
        assert(delta > 0 || p->func_uses[f] > 0); /* every slot was counted when set */
        p->func_uses[f] += (uint32_t)delta;
    }
}

#endif /* CN_AGG_INTERNAL_H */
