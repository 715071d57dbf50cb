/* compact.c — a live profile's tables shrunk to what queries can reach (cn_agg_compact).
 *
 * A live session's profile only grows: raw samples older than the retention are folded
 * into the accumulator (samples.c), but the tables and indexes around them keep the size
 * of their largest moment. Compaction removes what no answer can depend on:
 * - stack rows no sample, timeline stack or accumulator row reaches (with their
 *   prefixes). Survivors are renumbered in their old order, so prefix < id still holds,
 *   and every stack id the profile holds is rewritten: samples, timeline stacks, the
 *   accumulator and its index, the stack index, the callchain cache;
 * - callchain cache entries (ingest.c) for stacks no raw sample uses: the cache serves
 *   the callchains being sampled now; one seen again later costs one interning walk;
 * - the frames' chain pool repacked (a regroup that lengthens a chain leaves a hole);
 * - spare capacity: columns doubled for a peak (a build's raw window) and the indexes
 *   sized for their entries again (large blocks are mmapped, so this is returned).
 * Frames, funcs, strings, resources and threads keep their ids there. A second pass,
 * cn_agg_compact_frames, removes the frames no stack uses any more (a trim leaves many:
 * the rare paths of every program a machine ran) and the funcs and rename rows only they
 * needed, renumbering frames and funcs in order; its caller must hold no frame id across
 * it (a live session runs it when no symbol request is in flight, and renumbers its own
 * watermarks through the map). Strings stay (their pointers are valid for the profile's
 * life), resources and threads too; names are what clients hold (docs/calltree.md §4.3);
 * each kept native frame keeps its placeholder func when it has one (a frame named as it
 * was made, cn_agg_set_frame_namer, never had one).
 * Everything that can fail is allocated before the first table changes.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agg_internal.h"

#define REACHED 1u /* some sample, timeline stack or accumulator row reaches the stack */
#define RAW     2u /* a raw sample's (leaf) stack: its callchain stays cached */

#define DUE_CACHE_MIN   16384 /* entries before the cache's growth is worth a pass */
#define DUE_SAMPLES_MIN 65536 /* sample rows of capacity before spare is worth a pass */
#define MIN_COLUMN      16
#define SPARE_NUM       5 /* a column keeps up to a quarter more than its rows */
#define SPARE_DEN       4

bool cn_agg_compact_due(const cn_agg_profile *p)
{
    size_t cached = cn_agg__cache_count(&p->cache);
    if (cached >= DUE_CACHE_MIN && cached >= 2 * p->compact_cached)
        return true;
    return p->cap_sample >= DUE_SAMPLES_MIN && p->cap_sample > 4 * p->n_sample;
}

/* Marks the stacks reached from the sample table and the accumulator, then their
 * prefixes (one pass down, since prefix < id). Returns how many are reached. */
static size_t mark_stacks(const cn_agg_profile *p, uint8_t *mark)
{
    for (size_t i = 0; i < p->n_sample; i++) {
        if (p->s_stack[i] >= 0)
            mark[p->s_stack[i]] |= REACHED | RAW;
        if (p->s_tl_stack && p->s_tl_stack[i] >= 0)
            mark[p->s_tl_stack[i]] |= REACHED;
    }
    for (size_t i = 0; i < p->n_acc; i++)
        mark[p->acc_stack[i]] |= REACHED;
    size_t live = 0;
    for (size_t s = p->n_stack; s-- > 0;) {
        if (!(mark[s] & REACHED))
            continue;
        live++;
        if (p->stack_prefix[s] >= 0)
            mark[p->stack_prefix[s]] |= REACHED;
    }
    return live;
}

/* The new id of every stack (-1: removed), in order. */
static void number_stacks(const cn_agg_profile *p, const uint8_t *mark, int32_t *map)
{
    int32_t next = 0;
    for (size_t s = 0; s < p->n_stack; s++)
        map[s] = mark[s] & REACHED ? next++ : -1;
}

/* The stack index and the accumulator's index over the renumbered rows, built into
 * fresh maps. 0 or -ENOMEM. */
static int build_indexes(const cn_agg_profile *p, const int32_t *map, size_t live,
                         cn_agg__idset *stacks, cn_u64map *acc)
{
    if (cn_agg__idset_reserve(stacks, live) < 0 ||
        (p->n_acc && cn_u64map_reserve(acc, p->n_acc) < 0))
        return -ENOMEM;
    for (size_t s = 0; s < p->n_stack; s++) {
        if (map[s] < 0)
            continue;
        int32_t pre = p->stack_prefix[s];
        uint32_t h = cn_agg__stack_hash(pre >= 0 ? map[pre] : -1, p->stack_frame[s]);
        if (cn_agg__idset_add(stacks, h, map[s]) < 0)
            return -ENOMEM;
    }
    for (size_t i = 0; i < p->n_acc; i++)
        if (cn_u64map_put(acc, cn_pair(map[p->acc_stack[i]], p->acc_thread[i]), (int32_t)i) < 0)
            return -ENOMEM;
    return 0;
}

/* A new callchain cache holding the entries whose stack a raw sample uses (none when
 * final), their stacks renumbered by map (NULL: unchanged). Sets *same instead when the
 * cache would come out as it is (every entry kept, no renumbering). 0 or -ENOMEM. */
static int build_cache(const cn_agg_profile *p, const uint8_t *mark, const int32_t *map, bool final,
                       cn_agg__stack_cache *out, bool *same)
{
    memset(out, 0, sizeof(*out));
    out->max_entries = p->cache.max_entries;
    size_t keep = 0;
    const cn_agg__cache_table *gen[] = {&p->cache.cur, &p->cache.old};
    for (int g = 0; g < 2 && !final; g++)
        for (size_t i = 0; gen[g]->mask && i <= gen[g]->mask; i++)
            keep += gen[g]->slots[i].lo && (mark[gen[g]->slots[i].stack] & RAW);
    *same = keep == cn_agg__cache_count(&p->cache) && !map;
    if (!keep || *same)
        return 0;
    return cn_agg__cache_filter(&p->cache, mark, RAW, map, out);
}

/* A pool of exactly the frames' chains' length, when the pool has holes or a quarter
 * spare; NULL when it has not, or on ENOMEM (the pool stays as it is: it is only
 * repacked). */
static int32_t *repack_chains(const cn_agg_profile *p, size_t *len)
{
    size_t n = 0;
    for (size_t f = 0; f < p->n_frame; f++)
        n += p->frame_depth[f];
    if (n == p->chain_len && p->chain_cap * SPARE_DEN <= n * SPARE_NUM)
        return NULL;
    int32_t *pool = malloc((n ? n : 1) * sizeof(*pool));
    if (!pool)
        return NULL;
    *len = n;
    return pool;
}

/* Renumbers the stack rows in place (new id <= old id, so a row is read before any row
 * is written over it) and every stack id held by samples and the accumulator. */
static void apply_stack_map(cn_agg_profile *p, const int32_t *map, size_t live)
{
    for (size_t s = 0; s < p->n_stack; s++) {
        int32_t k = map[s];
        if (k < 0)
            continue;
        int32_t pre = p->stack_prefix[s];
        p->stack_prefix[k] = pre >= 0 ? map[pre] : -1;
        p->stack_frame[k] = p->stack_frame[s];
    }
    p->n_stack = live;
    for (size_t i = 0; i < p->n_sample; i++) {
        if (p->s_stack[i] >= 0)
            p->s_stack[i] = map[p->s_stack[i]];
        if (p->s_tl_stack && p->s_tl_stack[i] >= 0)
            p->s_tl_stack[i] = map[p->s_tl_stack[i]];
    }
    for (size_t i = 0; i < p->n_acc; i++)
        p->acc_stack[i] = map[p->acc_stack[i]];
}

/* Shrinks a column of elem-sized values to want rows when it holds more than a quarter
 * spare. A failed realloc keeps the larger block, so want stays a valid capacity. */
static void shrink_column(void **col, size_t cap, size_t want, size_t elem)
{
    if (!*col || cap <= want)
        return;
    void *smaller = realloc(*col, want * elem);
    if (smaller)
        *col = smaller;
}

/* The capacity a column of n rows keeps (n plus a quarter; at least MIN_COLUMN), or cap
 * when it is within that already. */
static size_t column_target(size_t n, size_t cap)
{
    size_t want = n + n / 4 > MIN_COLUMN ? n + n / 4 : MIN_COLUMN;
    return cap * SPARE_DEN > want * SPARE_NUM ? want : cap;
}

/* Shrinks the n columns of one table (each of elem[i]-sized values) to its rows plus the
 * spare column_target keeps, and its capacity with them. */
static void shrink_table(void **const *cols, const size_t *elem, size_t n, size_t rows, size_t *cap)
{
    size_t want = column_target(rows, *cap);
    if (want >= *cap)
        return;
    for (size_t i = 0; i < n; i++)
        shrink_column(cols[i], *cap, want, elem[i]);
    *cap = want;
}

static void shrink_columns(cn_agg_profile *p)
{
    void **const stacks[] = {(void **)&p->stack_prefix, (void **)&p->stack_frame};
    static const size_t stack_elem[] = {sizeof(int32_t), sizeof(int32_t)};
    shrink_table(stacks, stack_elem, 2, p->n_stack, &p->cap_stack);
    void **const samples[] = {(void **)&p->s_stack, (void **)&p->s_thread, (void **)&p->s_time,
                              (void **)&p->s_weight, (void **)&p->s_tl_stack};
    static const size_t sample_elem[] = {sizeof(int32_t), sizeof(int32_t), sizeof(int64_t),
                                         sizeof(double), sizeof(int32_t)};
    shrink_table(samples, sample_elem, 5, p->n_sample, &p->cap_sample);
    void **const acc[] = {(void **)&p->acc_stack, (void **)&p->acc_thread, (void **)&p->acc_weight};
    static const size_t acc_elem[] = {sizeof(int32_t), sizeof(int32_t), sizeof(double)};
    shrink_table(acc, acc_elem, 3, p->n_acc, &p->cap_acc);
}

int cn_agg_compact(cn_agg_profile *p, unsigned flags, cn_agg_compact_stats *st)
{
    bool final = flags & CN_AGG_COMPACT_FINAL;
    size_t bytes_before = cn_agg_profile_memory(p), stacks_before = p->n_stack;
    size_t cached_before = cn_agg__cache_count(&p->cache), chain_len = 0;
    uint8_t *mark = calloc(p->n_stack ? p->n_stack : 1, 1);
    int32_t *map = NULL, *pool = NULL;
    cn_agg__idset stacks = {0};
    cn_u64map acc = {0};
    cn_agg__stack_cache cache = {0};
    int rc = -ENOMEM;
    if (!mark)
        goto out;
    size_t live = mark_stacks(p, mark);
    bool renumber = live < p->n_stack;
    if (renumber) {
        map = malloc(p->n_stack * sizeof(*map));
        if (!map)
            goto out;
        number_stacks(p, mark, map);
        if (build_indexes(p, map, live, &stacks, &acc) < 0)
            goto out;
    }
    bool same_cache;
    if (build_cache(p, mark, map, final, &cache, &same_cache) < 0)
        goto out;
    pool = repack_chains(p, &chain_len); /* optional: NULL keeps the pool as it is */

    /* Nothing fails from here on. */
    if (renumber) {
        apply_stack_map(p, map, live);
        cn_agg__idset_clear(&p->stack_index);
        p->stack_index = stacks;
        cn_u64map_clear(&p->acc_index);
        p->acc_index = acc;
        memset(&stacks, 0, sizeof(stacks));
        memset(&acc, 0, sizeof(acc));
    }
    if (!same_cache) {
        cn_agg__cache_clear(&p->cache);
        p->cache = cache;
    }
    p->compact_cached = cn_agg__cache_count(&p->cache);
    if (pool) {
        size_t off = 0;
        for (size_t f = 0; f < p->n_frame; f++) {
            memcpy(pool + off, p->chain_pool + p->frame_chain[f],
                   p->frame_depth[f] * sizeof(*pool));
            p->frame_chain[f] = (int32_t)off;
            off += p->frame_depth[f];
        }
        free(p->chain_pool);
        p->chain_pool = pool;
        p->chain_len = chain_len;
        p->chain_cap = chain_len ? chain_len : 1;
    }
    shrink_columns(p);
    if (renumber) { /* the query cache is by stack id: rebuilt by the next query */
        p->qcache = cn_agg__qcache_free(p->qcache);
        p->func_generation++;
    }
    rc = 0;
    if (st) {
        st->stacks_before = stacks_before;
        st->stacks_after = p->n_stack;
        st->cached_before = cached_before;
        st->cached_after = cn_agg__cache_count(&p->cache);
        st->bytes_before = bytes_before;
        st->bytes_after = cn_agg_profile_memory(p);
    }
out:
    if (rc < 0)
        cn_agg__cache_clear(&cache);
    cn_agg__idset_clear(&stacks);
    cn_u64map_clear(&acc);
    free(mark);
    free(map);
    return rc;
}

/* ---- frames and funcs no stack reaches (cn_agg_compact_frames) ----------------------- */

/* What one pass keeps and where it goes: the new id of every old frame and func (-1:
 * removed) and the rebuilt indexes and pool, all made before the profile changes. */
struct frame_pass {
    int32_t *fmap, *gmap;
    uint8_t *gone_name; /* by string id: the placeholder name of a removed native frame */
    size_t n_frame, n_func;
    cn_agg__idset frames, natives, funcs, stacks;
    int32_t *pool;
    size_t pool_len;
};

static void frame_pass_free(struct frame_pass *fp)
{
    free(fp->fmap);
    free(fp->gmap);
    free(fp->gone_name);
    cn_agg__idset_clear(&fp->frames);
    cn_agg__idset_clear(&fp->natives);
    cn_agg__idset_clear(&fp->funcs);
    cn_agg__idset_clear(&fp->stacks);
    free(fp->pool);
}

/* Frames kept: those a stack uses, and every pseudo-frame (resources of kind OTHER: a live
 * session's markers and thread states keep their ids and names while no stack uses them).
 * Funcs kept: those a kept frame's chain, key or symbol names, and the placeholder func
 * of every kept native frame that has one (the name a client may hold for it). Fills
 * fmap and gmap with the new ids, in order. */
static void mark_frames(const cn_agg_profile *p, struct frame_pass *fp)
{
    for (size_t f = 0; f < p->n_frame; f++) {
        int32_t res = p->frame_res[f];
        fp->fmap[f] = res >= 0 && p->res_kind[res] == CN_AGG_RES_OTHER ? 0 : -1;
    }
    for (size_t s = 0; s < p->n_stack; s++)
        fp->fmap[p->stack_frame[s]] = 0;
    for (size_t g = 0; g < p->n_func; g++)
        fp->gmap[g] = -1;
    for (size_t f = 0; f < p->n_frame; f++) {
        if (fp->fmap[f] < 0)
            continue;
        fp->fmap[f] = (int32_t)fp->n_frame++;
        for (uint16_t d = 0; d < p->frame_depth[f]; d++)
            fp->gmap[p->chain_pool[p->frame_chain[f] + d]] = 0;
        if (p->frame_key_func[f] >= 0)
            fp->gmap[p->frame_key_func[f]] = 0;
        if (p->frame_sym_func[f] >= 0)
            fp->gmap[p->frame_sym_func[f]] = 0;
        if (p->frame_key_func[f] < 0) {
            int32_t ph = cn_agg__placeholder_find(p, p->frame_res[f], (uint64_t)p->frame_addr[f]);
            if (ph >= 0)
                fp->gmap[ph] = 0;
        }
    }
    for (size_t g = 0; g < p->n_func; g++)
        if (fp->gmap[g] == 0)
            fp->gmap[g] = (int32_t)fp->n_func++;
}

/* A copy of id set `from` holding only the ids map keeps, renumbered (same hashes). */
static int idset_remap(const cn_agg__idset *from, const int32_t *map, size_t kept,
                       cn_agg__idset *to)
{
    if (cn_agg__idset_reserve(to, kept) < 0)
        return -ENOMEM;
    for (size_t i = 0; from->mask && i <= from->mask; i++) {
        int32_t id = from->slots[i].id;
        if (id >= 0 && map[id] >= 0 && cn_agg__idset_add(to, from->slots[i].hash, map[id]) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* The placeholder names of the removed native frames whose placeholder func goes too:
 * the rename rows from those names lead from a frame that is no longer there. */
static void mark_gone_names(const cn_agg_profile *p, struct frame_pass *fp)
{
    for (size_t f = 0; f < p->n_frame; f++) {
        if (fp->fmap[f] >= 0 || p->frame_key_func[f] >= 0)
            continue;
        int32_t ph = cn_agg__placeholder_find(p, p->frame_res[f], (uint64_t)p->frame_addr[f]);
        if (ph >= 0 && fp->gmap[ph] < 0)
            fp->gone_name[p->func_name[ph]] = 1;
    }
}

/* The indexes and chain pool of the kept rows, and the names that left. 0 or -ENOMEM. */
static int build_frame_pass(const cn_agg_profile *p, struct frame_pass *fp)
{
    fp->gone_name = calloc(p->n_str ? p->n_str : 1, 1);
    if (!fp->gone_name)
        return -ENOMEM;
    mark_gone_names(p, fp);
    if (idset_remap(&p->frame_index, fp->fmap, fp->n_frame, &fp->frames) < 0 ||
        idset_remap(&p->native_frame_index, fp->fmap, fp->n_frame, &fp->natives) < 0 ||
        idset_remap(&p->func_index, fp->gmap, fp->n_func, &fp->funcs) < 0 ||
        cn_agg__idset_reserve(&fp->stacks, p->n_stack) < 0)
        return -ENOMEM;
    for (size_t s = 0; s < p->n_stack; s++) {
        uint32_t h = cn_agg__stack_hash(p->stack_prefix[s], fp->fmap[p->stack_frame[s]]);
        if (cn_agg__idset_add(&fp->stacks, h, (int32_t)s) < 0)
            return -ENOMEM;
    }
    for (size_t f = 0; f < p->n_frame; f++)
        fp->pool_len += fp->fmap[f] >= 0 ? p->frame_depth[f] : 0;
    fp->pool = malloc((fp->pool_len ? fp->pool_len : 1) * sizeof(*fp->pool));
    return fp->pool ? 0 : -ENOMEM;
}

/* The frame and func columns' spare capacity, as shrink_columns does for the others. */
static void shrink_frame_columns(cn_agg_profile *p)
{
    void **const frames[] = {(void **)&p->frame_res,     (void **)&p->frame_line,
                             (void **)&p->frame_chain,   (void **)&p->frame_addr,
                             (void **)&p->frame_depth,   (void **)&p->frame_key_func,
                             (void **)&p->frame_sym_func};
    static const size_t frame_elem[] = {sizeof(int32_t), sizeof(int32_t),  sizeof(int32_t),
                                        sizeof(int64_t), sizeof(uint16_t), sizeof(int32_t),
                                        sizeof(int32_t)};
    shrink_table(frames, frame_elem, 7, p->n_frame, &p->cap_frame);
    void **const funcs[] = {(void **)&p->func_name, (void **)&p->func_res, (void **)&p->func_file,
                            (void **)&p->func_line, (void **)&p->func_uses};
    static const size_t func_elem[] = {sizeof(int32_t), sizeof(int32_t), sizeof(int32_t),
                                       sizeof(int32_t), sizeof(uint32_t)};
    shrink_table(funcs, func_elem, 5, p->n_func, &p->cap_func);
}

/* Moves the kept frames down to their new ids (new <= old) with their chains in the new
 * pool, funcs renumbered; recounts the funcs' uses. */
static void apply_frame_map(cn_agg_profile *p, struct frame_pass *fp)
{
    size_t off = 0;
    for (size_t f = 0; f < p->n_frame; f++) {
        int32_t k = fp->fmap[f];
        if (k < 0)
            continue;
        for (uint16_t d = 0; d < p->frame_depth[f]; d++)
            fp->pool[off + d] = fp->gmap[p->chain_pool[p->frame_chain[f] + d]];
        p->frame_res[k] = p->frame_res[f];
        p->frame_line[k] = p->frame_line[f];
        p->frame_addr[k] = p->frame_addr[f];
        p->frame_depth[k] = p->frame_depth[f];
        p->frame_chain[k] = (int32_t)off;
        p->frame_key_func[k] = p->frame_key_func[f] >= 0 ? fp->gmap[p->frame_key_func[f]] : -1;
        p->frame_sym_func[k] = p->frame_sym_func[f] >= 0 ? fp->gmap[p->frame_sym_func[f]] : -1;
        off += p->frame_depth[f];
    }
    assert(off == fp->pool_len);
    for (size_t g = 0; g < p->n_func; g++) {
        int32_t k = fp->gmap[g];
        if (k < 0)
            continue;
        p->func_name[k] = p->func_name[g];
        p->func_res[k] = p->func_res[g];
        p->func_file[k] = p->func_file[g];
        p->func_line[k] = p->func_line[g];
        p->func_uses[k] = 0;
    }
    for (size_t i = 0; i < off; i++)
        p->func_uses[fp->pool[i]]++;
    for (size_t s = 0; s < p->n_stack; s++)
        p->stack_frame[s] = fp->fmap[p->stack_frame[s]];
    free(p->chain_pool);
    p->chain_pool = fp->pool;
    p->chain_len = fp->pool_len;
    p->chain_cap = fp->pool_len ? fp->pool_len : 1;
    fp->pool = NULL;
#define SWAP_INDEX(field, from)                                                                    \
    do {                                                                                           \
        cn_agg__idset_clear(&p->field);                                                            \
        p->field = fp->from;                                                                       \
        memset(&fp->from, 0, sizeof(fp->from));                                                    \
    } while (0)
    SWAP_INDEX(frame_index, frames);
    SWAP_INDEX(native_frame_index, natives);
    SWAP_INDEX(func_index, funcs);
    SWAP_INDEX(stack_index, stacks);
#undef SWAP_INDEX
    p->n_frame = fp->n_frame;
    p->n_func = fp->n_func;
    shrink_frame_columns(p);
}

/* Drops the rename rows from the placeholder names of removed frames (a client's path
 * through such a frame can lead nowhere now), into a pool of its own (a row's slice may
 * lie anywhere in the old one: a rename of a rename appends), with the indexes rebuilt.
 * Rows from names still in the profile, and from names renamed again (a symbol changed
 * twice), stay. Out of memory, the map stays as it was: right, only larger. Returns
 * whether rows went (the caller rebuilds the indexes: rename_reindex). */
static bool compact_renames(cn_agg_profile *p, const uint8_t *gone_name)
{
    size_t keep = 0, len = 0;
    for (size_t i = 0; i < p->n_rename; i++)
        if (!gone_name[p->rename_old[i]]) {
            keep++;
            len += (size_t)p->rename_cnt[i];
        }
    if (keep == p->n_rename)
        return false;
    int32_t *pool = malloc((len ? len : 1) * sizeof(*pool));
    if (!pool)
        return false;
    size_t k = 0, at = 0;
    for (size_t i = 0; i < p->n_rename; i++) {
        if (gone_name[p->rename_old[i]])
            continue;
        int32_t cnt = p->rename_cnt[i];
        memcpy(pool + at, p->rename_pool + p->rename_off[i], (size_t)cnt * sizeof(*pool));
        p->rename_old[k] = p->rename_old[i];
        p->rename_off[k] = (int32_t)at;
        p->rename_cnt[k] = cnt;
        at += (size_t)cnt;
        k++;
    }
    free(p->rename_pool);
    p->rename_pool = pool;
    p->rename_pool_len = len;
    p->rename_pool_cap = len ? len : 1;
    p->n_rename = k;
    return true;
}

/* The rename map's indexes over its rows, after its rows or their string ids changed. The
 * rows are valid whatever happens; an index that cannot be rebuilt would not be, so a
 * failure empties the map (held paths then keep their old names). */
static void rename_reindex(cn_agg_profile *p)
{
    if (cn_agg__rename_reindex(p) < 0) {
        p->n_rename = 0;
        p->rename_pool_len = 0;
        cn_u64map_clear(&p->rename_index);
        cn_u64map_clear(&p->rename_targets);
    }
}

/* ---- strings no table names (the end of cn_agg_compact_frames) ----------------------- */

/* A string id column's ids marked used (-1 entries skipped). */
static void mark_ids(uint8_t *used, const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0)
            used[ids[i]] = 1;
}

/* A string id column rewritten through smap (-1 entries stay). */
static void remap_ids(int32_t *ids, size_t n, const int32_t *smap)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0)
            ids[i] = smap[ids[i]];
}

/* Every string id column the profile has: what names a string. */
#define STRING_COLUMNS(X)                                                                          \
    X(p->res_name, p->n_res)                                                                       \
    X(p->res_identity, p->n_res)                                                                   \
    X(p->res_path, p->n_res)                                                                       \
    X(p->func_name, p->n_func)                                                                     \
    X(p->func_file, p->n_func)                                                                     \
    X(p->thr_name, p->n_thr)                                                                       \
    X(p->proc_name, p->n_proc)                                                                     \
    X(p->proc_cgroup, p->n_proc)                                                                   \
    X(p->meta_key, p->n_meta)                                                                      \
    X(p->meta_val, p->n_meta)                                                                      \
    X(p->rename_old, p->n_rename)                                                                  \
    X(p->rename_pool, p->rename_pool_len)

/* The new string table, made before anything changes. */
struct string_pass {
    int32_t *smap; /* old id -> new id, -1: removed */
    size_t n;      /* strings kept */
    cn_agg__block *arena;
    const char **str;
    uint32_t *len;
    cn_agg__idset strs, funcs, res;
};

static void string_pass_free(struct string_pass *sp)
{
    free(sp->smap);
    free(sp->arena);
    free(sp->str);
    free(sp->len);
    cn_agg__idset_clear(&sp->strs);
    cn_agg__idset_clear(&sp->funcs);
    cn_agg__idset_clear(&sp->res);
}

/* The kept strings copied into one arena block, in order; the indexes over the new ids
 * (the string index keeps its content hashes; funcs and resources hash ids). 0 or -ENOMEM. */
static int build_string_pass(const cn_agg_profile *p, const uint8_t *used, struct string_pass *sp)
{
    size_t bytes = 0;
    for (size_t i = 0; i < p->n_str; i++) {
        sp->smap[i] = used[i] ? (int32_t)sp->n++ : -1;
        bytes += used[i] ? p->str_len[i] + 1 : 0;
    }
    if (sp->n == p->n_str)
        return 0; /* every string is named: nothing to build */
    sp->arena = malloc(sizeof(*sp->arena) + (bytes ? bytes : 1));
    sp->str = malloc((sp->n ? sp->n : 1) * sizeof(*sp->str));
    sp->len = malloc((sp->n ? sp->n : 1) * sizeof(*sp->len));
    if (!sp->arena || !sp->str || !sp->len ||
        idset_remap(&p->str_index, sp->smap, sp->n, &sp->strs) < 0 ||
        cn_agg__idset_reserve(&sp->funcs, p->n_func) < 0 ||
        cn_agg__idset_reserve(&sp->res, p->n_res) < 0)
        return -ENOMEM;
    sp->arena->next = NULL;
    sp->arena->cap = bytes ? bytes : 1;
    sp->arena->used = 0;
    for (size_t i = 0; i < p->n_str; i++) {
        if (sp->smap[i] < 0)
            continue;
        char *dst = sp->arena->data + sp->arena->used;
        memcpy(dst, p->str[i], p->str_len[i] + 1);
        sp->arena->used += p->str_len[i] + 1;
        sp->str[sp->smap[i]] = dst;
        sp->len[sp->smap[i]] = p->str_len[i];
    }
    const int32_t *m = sp->smap;
    for (size_t g = 0; g < p->n_func; g++) {
        int32_t file = p->func_file[g] >= 0 ? m[p->func_file[g]] : -1;
        if (cn_agg__idset_add(&sp->funcs,
                              cn_agg__func_hash(m[p->func_name[g]], p->func_res[g], file),
                              (int32_t)g) < 0)
            return -ENOMEM;
    }
    for (size_t r = 0; r < p->n_res; r++) {
        bool by_identity = p->res_identity[r] >= 0;
        int32_t key = m[by_identity ? p->res_identity[r] : p->res_name[r]];
        if (cn_agg__idset_add(&sp->res, cn_agg__res_hash(key, by_identity), (int32_t)r) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* Removes the strings no table names (after the frames and funcs that named most of
 * them went): a new arena of exactly the kept ones, ids renumbered in order in every
 * column, the indexes swapped in (but the rename map's, keyed by string ids: the caller
 * rebuilds it, rename_reindex). Out of memory, nothing changes (the strings are right,
 * only more). Returns the strings removed. */
static size_t compact_strings(cn_agg_profile *p)
{
    struct string_pass sp = {0};
    size_t removed = 0;
    uint8_t *used = calloc(p->n_str ? p->n_str : 1, 1);
    sp.smap = malloc((p->n_str ? p->n_str : 1) * sizeof(*sp.smap));
    if (!used || !sp.smap)
        goto out;
#define MARK(col, n) mark_ids(used, col, n);
    STRING_COLUMNS(MARK)
#undef MARK
    if (build_string_pass(p, used, &sp) < 0 || sp.n == p->n_str)
        goto out;
    /* Nothing fails from here on. */
    removed = p->n_str - sp.n;
#define REMAP(col, n) remap_ids(col, n, sp.smap);
    STRING_COLUMNS(REMAP)
#undef REMAP
    for (cn_agg__block *b = p->arena, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    p->arena = sp.arena;
    p->arena_bytes = sizeof(*sp.arena) + sp.arena->cap;
    free(p->str);
    free(p->str_len);
    p->str = sp.str;
    p->str_len = sp.len;
    p->n_str = p->cap_str = sp.n;
    cn_agg__idset_clear(&p->str_index);
    cn_agg__idset_clear(&p->func_index);
    cn_agg__idset_clear(&p->res_index);
    p->str_index = sp.strs;
    p->func_index = sp.funcs;
    p->res_index = sp.res;
    /* the profile owns these now; string_pass_free frees only the map */
    sp.arena = NULL;
    sp.str = NULL;
    sp.len = NULL;
    memset(&sp.strs, 0, sizeof(sp.strs));
    memset(&sp.funcs, 0, sizeof(sp.funcs));
    memset(&sp.res, 0, sizeof(sp.res));
out:
    free(used);
    string_pass_free(&sp);
    return removed;
}

int cn_agg_compact_frames(cn_agg_profile *p, int32_t **frame_map, cn_agg_compact_stats *st)
{
    struct frame_pass fp = {0};
    size_t frames_before = p->n_frame, funcs_before = p->n_func, bytes_before, strings_removed = 0;
    int rc = -ENOMEM;
    if (frame_map)
        *frame_map = NULL;
    bytes_before = cn_agg_profile_memory(p);
    fp.fmap = malloc((p->n_frame ? p->n_frame : 1) * sizeof(*fp.fmap));
    fp.gmap = malloc((p->n_func ? p->n_func : 1) * sizeof(*fp.gmap));
    if (!fp.fmap || !fp.gmap)
        goto out;
    mark_frames(p, &fp);
    rc = 0;
    if (fp.n_frame == p->n_frame && fp.n_func == p->n_func)
        goto out; /* nothing to remove */
    if ((rc = build_frame_pass(p, &fp)) < 0)
        goto out;
    /* Nothing fails from here on. */
    apply_frame_map(p, &fp);
    bool renames_changed = compact_renames(p, fp.gone_name);
    strings_removed = compact_strings(p);
    if (renames_changed || strings_removed)
        rename_reindex(p); /* once for both passes */
    /* the query cache is by func: rebuilt by the next query */
    p->qcache = cn_agg__qcache_free(p->qcache);
    p->func_generation++;
    if (frame_map) {
        *frame_map = fp.fmap;
        fp.fmap = NULL;
    }
out:
    if (st) {
        *st = (cn_agg_compact_stats){.stacks_before = p->n_stack,
                                     .stacks_after = p->n_stack,
                                     .frames_before = frames_before,
                                     .frames_after = p->n_frame,
                                     .funcs_before = funcs_before,
                                     .funcs_after = p->n_func,
                                     .strings_removed = strings_removed,
                                     .bytes_before = bytes_before,
                                     .bytes_after = cn_agg_profile_memory(p)};
    }
    frame_pass_free(&fp);
    return rc;
}
