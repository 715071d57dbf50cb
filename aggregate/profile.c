/* profile.c — the profile's tables: strings, resources, funcs, frames, stacks, threads,
 * samples and metadata (docs/calltree.md §1.1).
 *
 * Every table is append-only struct-of-arrays with dense int32 ids, interned through the
 * hash tables of hash.c. Strings live in an arena of blocks that never move, so a name
 * pointer stays valid for the profile's life. Native callchains enter through the
 * whole-callchain cache of ingest.c.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL /* string interning is on the import hot path */
#include <xxhash.h>

#include "agg_internal.h"

#define ARENA_BLOCK (64 * 1024)

cn_agg_profile *cn_agg_profile_new(void)
{
    cn_agg_profile *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->unit = CN_AGG_UNIT_SAMPLES;
    p->scale = 1.0;
    return p;
}

cn_agg_profile *cn_agg_profile_free(cn_agg_profile *p)
{
    if (!p)
        return NULL;
    for (cn_agg__block *b = p->arena, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(p->str);
    free(p->str_len);
    cn_agg__idset_clear(&p->str_index);
    free(p->res_name);
    free(p->res_identity);
    free(p->res_path);
    free(p->res_kind);
    cn_agg__idset_clear(&p->res_index);
    free(p->func_name);
    free(p->func_res);
    free(p->func_file);
    free(p->func_line);
    free(p->func_uses);
    cn_agg__idset_clear(&p->func_index);
    free(p->frame_res);
    free(p->frame_line);
    free(p->frame_chain);
    free(p->frame_addr);
    free(p->frame_depth);
    free(p->frame_key_func);
    free(p->frame_sym_func);
    free(p->chain_pool);
    cn_agg__idset_clear(&p->frame_index);
    cn_agg__idset_clear(&p->native_frame_index);
    free(p->stack_prefix);
    free(p->stack_frame);
    cn_agg__idset_clear(&p->stack_index);
    cn_agg__cache_clear(&p->cache);
    free(p->s_stack);
    free(p->s_thread);
    free(p->s_time);
    free(p->s_weight);
    free(p->s_tl_stack);
    free(p->acc_stack);
    free(p->acc_thread);
    free(p->acc_weight);
    cn_u64map_clear(&p->acc_index);
    free(p->thr_pid);
    free(p->thr_tid);
    free(p->thr_name);
    cn_u64map_clear(&p->thr_index);
    free(p->proc_pid);
    free(p->proc_name);
    free(p->proc_cgroup);
    cn_u64map_clear(&p->proc_index);
    free(p->meta_key);
    free(p->meta_val);
    free(p->rename_old);
    free(p->rename_off);
    free(p->rename_cnt);
    free(p->rename_pool);
    cn_u64map_clear(&p->rename_index);
    cn_u64map_clear(&p->rename_targets);
    cn_agg__qcache_free(p->qcache);
    free(p);
    return NULL;
}

/* ---- strings ---------------------------------------------------------------------- */

struct str_key {
    const char *s;
    size_t len;
};

static bool str_eq(const void *ctx, int32_t id, const void *key)
{
    const cn_agg_profile *p = ctx;
    const struct str_key *k = key;
    return p->str_len[id] == k->len && memcmp(p->str[id], k->s, k->len) == 0;
}

/* Copies len bytes plus a NUL into the arena; returns the stable copy or NULL. */
static char *arena_copy(cn_agg_profile *p, const char *s, size_t len)
{
    cn_agg__block *b = p->arena;
    if (!b || b->cap - b->used < len + 1) {
        size_t cap = len + 1 > ARENA_BLOCK ? len + 1 : ARENA_BLOCK;
        b = malloc(sizeof(*b) + cap);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = p->arena;
        p->arena = b;
        p->arena_bytes += sizeof(*b) + cap;
    }
    char *dst = b->data + b->used;
    memcpy(dst, s, len);
    dst[len] = '\0';
    b->used += len + 1;
    return dst;
}

int32_t cn_agg_string(cn_agg_profile *p, const char *s, size_t len)
{
    if (len > UINT32_MAX)
        return -EINVAL;
    struct str_key key = {s, len};
    uint32_t h = (uint32_t)XXH3_64bits(s, len);
    int32_t id = cn_agg__idset_find(&p->str_index, h, str_eq, p, &key);
    if (id >= 0)
        return id;
    if (p->n_str >= INT32_MAX)
        return -ENOSPC;
    size_t cap_len = p->cap_str;
    if (CN_RESERVE(p->str, p->cap_str, p->n_str + 1) < 0 ||
        CN_RESERVE(p->str_len, cap_len, p->n_str + 1) < 0)
        return -ENOMEM;
    p->cap_str = cap_len < p->cap_str ? cap_len : p->cap_str;
    char *copy = arena_copy(p, s, len);
    if (!copy)
        return -ENOMEM;
    id = (int32_t)p->n_str;
    if (cn_agg__idset_add(&p->str_index, h, id) < 0)
        return -ENOMEM;
    p->str[id] = copy;
    p->str_len[id] = (uint32_t)len;
    p->n_str++;
    return id;
}

int32_t cn_agg__string_find(const cn_agg_profile *p, const char *s, size_t len)
{
    struct str_key key = {s, len};
    return cn_agg__idset_find(&p->str_index, (uint32_t)XXH3_64bits(s, len), str_eq, p, &key);
}

int32_t cn_agg_cstring(cn_agg_profile *p, const char *s)
{
    return cn_agg_string(p, s, strlen(s));
}

const char *cn_agg_string_get(const cn_agg_profile *p, int32_t id)
{
    if (id < 0 || (size_t)id >= p->n_str)
        return NULL;
    return p->str[id];
}

/* Interns s, or returns -1 for NULL. Negative errno other than -1 is impossible since
 * errors are at most -ENOMEM; callers check < -1. */
static int32_t string_or_none(cn_agg_profile *p, const char *s)
{
    return s ? cn_agg_cstring(p, s) : -1;
}

/* ---- resources -------------------------------------------------------------------- */

struct res_key {
    int32_t key_str; /* identity, or the name when there is no identity */
    bool by_identity;
};

static bool res_eq(const void *ctx, int32_t id, const void *key)
{
    const cn_agg_profile *p = ctx;
    const struct res_key *k = key;
    if (k->by_identity)
        return p->res_identity[id] == k->key_str;
    return p->res_identity[id] < 0 && p->res_name[id] == k->key_str;
}

static int reserve_resources(cn_agg_profile *p, size_t n)
{
    size_t c1 = p->cap_res, c2 = p->cap_res, c3 = p->cap_res, c4 = p->cap_res;
    if (CN_RESERVE(p->res_name, c1, n) < 0 || CN_RESERVE(p->res_identity, c2, n) < 0 ||
        CN_RESERVE(p->res_path, c3, n) < 0 || CN_RESERVE(p->res_kind, c4, n) < 0)
        return -ENOMEM;
    p->cap_res = c1;
    if (c2 < p->cap_res)
        p->cap_res = c2;
    if (c3 < p->cap_res)
        p->cap_res = c3;
    if (c4 < p->cap_res)
        p->cap_res = c4;
    return 0;
}

uint32_t cn_agg__res_hash(int32_t key_str, bool by_identity)
{
    return (uint32_t)cn_mix64(cn_pair(key_str, by_identity));
}

int32_t cn_agg_resource(cn_agg_profile *p, const char *name, const char *identity, const char *path,
                        cn_agg_resource_kind kind)
{
    if (!name)
        return -EINVAL;
    int32_t name_id = cn_agg_cstring(p, name);
    int32_t ident_id = string_or_none(p, identity);
    int32_t path_id = string_or_none(p, path);
    if (name_id < 0 || ident_id < -1 || path_id < -1)
        return -ENOMEM;
    struct res_key key = {ident_id >= 0 ? ident_id : name_id, ident_id >= 0};
    uint32_t h = cn_agg__res_hash(key.key_str, key.by_identity);
    int32_t id = cn_agg__idset_find(&p->res_index, h, res_eq, p, &key);
    if (id >= 0)
        return id;
    if (reserve_resources(p, p->n_res + 1) < 0)
        return -ENOMEM;
    id = (int32_t)p->n_res;
    if (cn_agg__idset_add(&p->res_index, h, id) < 0)
        return -ENOMEM;
    p->res_name[id] = name_id;
    p->res_identity[id] = ident_id;
    p->res_path[id] = path_id;
    p->res_kind[id] = (uint8_t)kind;
    p->n_res++;
    return id;
}

size_t cn_agg_resource_count(const cn_agg_profile *p)
{
    return p->n_res;
}

static bool res_ok(const cn_agg_profile *p, int32_t res)
{
    return res >= 0 && (size_t)res < p->n_res;
}

const char *cn_agg_resource_name(const cn_agg_profile *p, int32_t res)
{
    return res_ok(p, res) ? p->str[p->res_name[res]] : NULL;
}

const char *cn_agg_resource_identity(const cn_agg_profile *p, int32_t res)
{
    return res_ok(p, res) ? cn_agg_string_get(p, p->res_identity[res]) : NULL;
}

const char *cn_agg_resource_path(const cn_agg_profile *p, int32_t res)
{
    return res_ok(p, res) ? cn_agg_string_get(p, p->res_path[res]) : NULL;
}

cn_agg_resource_kind cn_agg_resource_kind_of(const cn_agg_profile *p, int32_t res)
{
    return res_ok(p, res) ? (cn_agg_resource_kind)p->res_kind[res] : CN_AGG_RES_OTHER;
}

/* The marker of each kind that formats write; NULL for the kinds a library's name already
 * tells apart (docs/cli.md "Names"). */
static const char *const kind_markers[] = {
    [CN_AGG_RES_PYTHON] = "python",
};

const char *cn_agg_resource_kind_marker(cn_agg_resource_kind kind)
{
    size_t k = (size_t)kind;
    return k < sizeof(kind_markers) / sizeof(kind_markers[0]) ? kind_markers[k] : NULL;
}

bool cn_agg_resource_kind_parse(const char *s, size_t n, cn_agg_resource_kind *out)
{
    for (size_t k = 0; k < sizeof(kind_markers) / sizeof(kind_markers[0]); k++)
        if (kind_markers[k] && strlen(kind_markers[k]) == n && !memcmp(kind_markers[k], s, n)) {
            *out = (cn_agg_resource_kind)k;
            return true;
        }
    return false;
}

int32_t cn_agg_python_resource(cn_agg_profile *p, const char *file)
{
    if (!file)
        return -EINVAL;
    bool known = file[0] && strcmp(file, "[python]") != 0;
    const char *base = strrchr(file, '/');
    base = base && base[1] ? base + 1 : file;
    size_t n = known ? strlen(file) : 0;
    char *ident = malloc(n + 5);
    if (!ident)
        return -ENOMEM;
    memcpy(ident, "[py]", 4);
    memcpy(ident + 4, file, n);
    ident[4 + n] = '\0';
    int32_t res = cn_agg_resource(p, known ? base : "[python]", ident,
                                  known && strchr(file, '/') ? file : NULL, CN_AGG_RES_PYTHON);
    free(ident);
    return res;
}

/* ---- funcs ------------------------------------------------------------------------ */

struct func_key {
    int32_t name, res, file;
};

static bool func_eq(const void *ctx, int32_t id, const void *key)
{
    const cn_agg_profile *p = ctx;
    const struct func_key *k = key;
    return p->func_name[id] == k->name && p->func_res[id] == k->res && p->func_file[id] == k->file;
}

static uint32_t func_hash(const struct func_key *k)
{
    return cn_agg__func_hash(k->name, k->res, k->file);
}

uint32_t cn_agg__func_hash(int32_t name, int32_t res, int32_t file)
{
    return (uint32_t)cn_mix64(cn_pair(name, res) ^
                              ((uint64_t)(uint32_t)file * 0x9e3779b97f4a7c15ULL));
}

static int reserve_funcs(cn_agg_profile *p, size_t n)
{
    size_t c1 = p->cap_func, c2 = p->cap_func, c3 = p->cap_func, c4 = p->cap_func, c5 = p->cap_func;
    if (CN_RESERVE(p->func_name, c1, n) < 0 || CN_RESERVE(p->func_res, c2, n) < 0 ||
        CN_RESERVE(p->func_file, c3, n) < 0 || CN_RESERVE(p->func_line, c4, n) < 0 ||
        CN_RESERVE(p->func_uses, c5, n) < 0)
        return -ENOMEM;
    p->cap_func = c1 < c2 ? c1 : c2;
    p->cap_func = p->cap_func < c3 ? p->cap_func : c3;
    p->cap_func = p->cap_func < c4 ? p->cap_func : c4;
    p->cap_func = p->cap_func < c5 ? p->cap_func : c5;
    return 0;
}

/* Interns a func by string ids. */
static int32_t func_by_ids(cn_agg_profile *p, int32_t name, int32_t res, int32_t file, int32_t line)
{
    struct func_key key = {name, res, file};
    uint32_t h = func_hash(&key);
    int32_t id = cn_agg__idset_find(&p->func_index, h, func_eq, p, &key);
    if (id >= 0)
        return id;
    if (p->n_func >= INT32_MAX || reserve_funcs(p, p->n_func + 1) < 0)
        return -ENOMEM;
    id = (int32_t)p->n_func;
    if (cn_agg__idset_add(&p->func_index, h, id) < 0)
        return -ENOMEM;
    p->func_name[id] = name;
    p->func_res[id] = res;
    p->func_file[id] = file;
    p->func_line[id] = line;
    p->func_uses[id] = 0;
    p->n_func++;
    return id;
}

int32_t cn_agg_func(cn_agg_profile *p, const char *name, int32_t resource, const char *file,
                    int32_t line)
{
    if (!name || (resource >= 0 && !res_ok(p, resource)))
        return -EINVAL;
    int32_t name_id = cn_agg_cstring(p, name);
    int32_t file_id = string_or_none(p, file);
    if (name_id < 0 || file_id < -1)
        return -ENOMEM;
    return func_by_ids(p, name_id, resource < 0 ? -1 : resource, file_id, line);
}

size_t cn_agg_func_count(const cn_agg_profile *p)
{
    return p->n_func;
}

static bool func_ok(const cn_agg_profile *p, int32_t f)
{
    return f >= 0 && (size_t)f < p->n_func;
}

const char *cn_agg_func_name(const cn_agg_profile *p, int32_t func)
{
    return func_ok(p, func) ? p->str[p->func_name[func]] : NULL;
}

int32_t cn_agg_func_name_id(const cn_agg_profile *p, int32_t func)
{
    return func_ok(p, func) ? p->func_name[func] : -1;
}

int32_t cn_agg_func_resource(const cn_agg_profile *p, int32_t func)
{
    return func_ok(p, func) ? p->func_res[func] : -1;
}

const char *cn_agg_func_file(const cn_agg_profile *p, int32_t func)
{
    return func_ok(p, func) ? cn_agg_string_get(p, p->func_file[func]) : NULL;
}

int32_t cn_agg_func_line(const cn_agg_profile *p, int32_t func)
{
    return func_ok(p, func) ? p->func_line[func] : 0;
}

/* ---- frames ----------------------------------------------------------------------- */

struct frame_key {
    int32_t func, res, line;
    int64_t addr;
};

static bool frame_eq(const void *ctx, int32_t id, const void *key)
{
    const cn_agg_profile *p = ctx;
    const struct frame_key *k = key;
    return p->frame_key_func[id] == k->func && p->frame_res[id] == k->res &&
           p->frame_addr[id] == k->addr && p->frame_line[id] == k->line;
}

static int reserve_frames(cn_agg_profile *p, size_t n)
{
    size_t c[7] = {p->cap_frame, p->cap_frame, p->cap_frame, p->cap_frame,
                   p->cap_frame, p->cap_frame, p->cap_frame};
    if (CN_RESERVE(p->frame_res, c[0], n) < 0 || CN_RESERVE(p->frame_line, c[1], n) < 0 ||
        CN_RESERVE(p->frame_chain, c[2], n) < 0 || CN_RESERVE(p->frame_addr, c[3], n) < 0 ||
        CN_RESERVE(p->frame_depth, c[4], n) < 0 || CN_RESERVE(p->frame_key_func, c[5], n) < 0 ||
        CN_RESERVE(p->frame_sym_func, c[6], n) < 0)
        return -ENOMEM;
    size_t m = c[0];
    for (int i = 1; i < 7; i++)
        m = c[i] < m ? c[i] : m;
    p->cap_frame = m;
    return 0;
}

/* Appends a chain of funcs to the pool; returns its offset or negative errno. */
static int64_t chain_append(cn_agg_profile *p, const int32_t *funcs, size_t n)
{
    if (p->chain_len + n > INT32_MAX)
        return -ENOSPC;
    if (CN_RESERVE(p->chain_pool, p->chain_cap, p->chain_len + n) < 0)
        return -ENOMEM;
    memcpy(p->chain_pool + p->chain_len, funcs, n * sizeof(*funcs));
    int64_t off = (int64_t)p->chain_len;
    p->chain_len += n;
    return off;
}

/* Appends a frame row with a one-func chain. */
static int32_t frame_append(cn_agg_profile *p, int32_t key_func, int32_t func, int32_t res,
                            int64_t addr, int32_t line)
{
    if (p->n_frame >= INT32_MAX || reserve_frames(p, p->n_frame + 1) < 0)
        return -ENOMEM;
    int64_t off = chain_append(p, &func, 1);
    if (off < 0)
        return (int32_t)off;
    int32_t id = (int32_t)p->n_frame++;
    p->frame_key_func[id] = key_func;
    p->frame_sym_func[id] = -1;
    p->frame_res[id] = res;
    p->frame_addr[id] = addr;
    p->frame_line[id] = line;
    p->frame_chain[id] = (int32_t)off;
    p->frame_depth[id] = 1;
    p->func_uses[func]++;
    return id;
}

int32_t cn_agg_frame(cn_agg_profile *p, int32_t func, int32_t resource, int64_t address,
                     int32_t line)
{
    if (!func_ok(p, func) || (resource >= 0 && !res_ok(p, resource)))
        return -EINVAL;
    struct frame_key key = {func, resource < 0 ? -1 : resource, line, address};
    uint32_t h = (uint32_t)cn_mix64(cn_pair(func, key.res) ^
                                    cn_mix64((uint64_t)address ^ (uint64_t)line << 48));
    int32_t id = cn_agg__idset_find(&p->frame_index, h, frame_eq, p, &key);
    if (id >= 0)
        return id;
    id = frame_append(p, func, func, key.res, address, line);
    if (id < 0)
        return id;
    if (cn_agg__idset_add(&p->frame_index, h, id) < 0)
        return -ENOMEM;
    return id;
}

/* Native frames are interned by (resource, offset) in an id set whose keys are the frame
 * rows themselves (8 bytes a slot). */
struct native_key {
    int32_t res;
    int64_t addr;
};

static bool native_eq(const void *ctx, int32_t id, const void *key)
{
    const cn_agg_profile *p = ctx;
    const struct native_key *k = key;
    return p->frame_addr[id] == k->addr && p->frame_res[id] == k->res;
}

static uint32_t native_hash(int32_t res, uint64_t offset)
{
    return (uint32_t)cn_mix64(offset ^ cn_mix64((uint64_t)(uint32_t)res + 1));
}

/* The placeholder name of an unsymbolized native frame (docs/cli.md "Names") into
 * name[PLACEHOLDER_MAX]. */
#define PLACEHOLDER_MAX 320
static void placeholder_name(const cn_agg_profile *p, int32_t res, uint64_t offset, char *name)
{
    if (res >= 0)
        snprintf(name, PLACEHOLDER_MAX, "%s+0x%" PRIx64, p->str[p->res_name[res]], offset);
    else
        snprintf(name, PLACEHOLDER_MAX, "0x%" PRIx64, offset);
}

static int32_t placeholder_func(cn_agg_profile *p, int32_t res, uint64_t offset)
{
    char name[PLACEHOLDER_MAX];
    placeholder_name(p, res, offset, name);
    return cn_agg_func(p, name, res, NULL, 0);
}

/* The native frame (res, offset), made with func when new: the func the namer gives it,
 * else its placeholder, when func is -1. */
static int32_t native_frame(cn_agg_profile *p, int32_t resource, uint64_t offset, int32_t func)
{
    if (resource >= 0 && !res_ok(p, resource))
        return -EINVAL;
    int32_t res = resource < 0 ? -1 : resource;
    struct native_key key = {res, (int64_t)offset};
    uint32_t h = native_hash(res, offset);
    int32_t id = cn_agg__idset_find(&p->native_frame_index, h, native_eq, p, &key);
    if (id >= 0)
        return id;
    if (func < 0) {
        const char *name = p->namer && res >= 0 ? p->namer(p->namer_ctx, res, offset) : NULL;
        /* a named frame's func is the one cn_agg_regroup() gives a one-function chain */
        func = name ? cn_agg_func(p, name, res, NULL, 0) : placeholder_func(p, res, offset);
    }
    if (func < 0)
        return func;
    id = frame_append(p, -1, func, res, (int64_t)offset, 0);
    if (id < 0)
        return id;
    if (cn_agg__idset_add(&p->native_frame_index, h, id) < 0)
        return -ENOMEM;
    return id;
}

void cn_agg_set_frame_namer(cn_agg_profile *p, cn_agg_frame_namer namer, void *ctx)
{
    p->namer = namer;
    p->namer_ctx = ctx;
}

int32_t cn_agg_native_frame(cn_agg_profile *p, int32_t resource, uint64_t offset)
{
    return native_frame(p, resource, offset, -1);
}

int32_t cn_agg__native_frame_as(cn_agg_profile *p, int32_t resource, uint64_t offset, int32_t func)
{
    return func_ok(p, func) ? native_frame(p, resource, offset, func) : -EINVAL;
}

size_t cn_agg_frame_count(const cn_agg_profile *p)
{
    return p->n_frame;
}

static bool frame_ok(const cn_agg_profile *p, int32_t f)
{
    return f >= 0 && (size_t)f < p->n_frame;
}

int32_t cn_agg_frame_resource(const cn_agg_profile *p, int32_t frame)
{
    return frame_ok(p, frame) ? p->frame_res[frame] : -1;
}

int64_t cn_agg_frame_address(const cn_agg_profile *p, int32_t frame)
{
    return frame_ok(p, frame) ? p->frame_addr[frame] : -1;
}

int32_t cn_agg_frame_line(const cn_agg_profile *p, int32_t frame)
{
    return frame_ok(p, frame) ? p->frame_line[frame] : 0;
}

int32_t cn_agg__placeholder_find(const cn_agg_profile *p, int32_t res, uint64_t offset)
{
    char name[PLACEHOLDER_MAX];
    placeholder_name(p, res, offset, name);
    int32_t s = cn_agg__string_find(p, name, strlen(name));
    if (s < 0)
        return -1;
    struct func_key key = {s, res, -1};
    return cn_agg__idset_find(&p->func_index, func_hash(&key), func_eq, p, &key);
}

bool cn_agg_frame_is_placeholder(const cn_agg_profile *p, int32_t frame)
{
    if (frame < 0 || (size_t)frame >= p->n_frame || p->frame_key_func[frame] >= 0 ||
        p->frame_depth[frame] != 1)
        return false;
    int32_t func = p->chain_pool[p->frame_chain[frame]];
    char name[PLACEHOLDER_MAX];
    placeholder_name(p, p->frame_res[frame], (uint64_t)p->frame_addr[frame], name);
    return strcmp(p->str[p->func_name[func]], name) == 0;
}

size_t cn_agg_frame_funcs(const cn_agg_profile *p, int32_t frame, const int32_t **funcs)
{
    if (!frame_ok(p, frame)) {
        *funcs = NULL;
        return 0;
    }
    *funcs = p->chain_pool + p->frame_chain[frame];
    return p->frame_depth[frame];
}

/* ---- stacks ----------------------------------------------------------------------- */

/* The id set's probe written out for stacks (the interning hot path of a new callchain:
 * no call through an equality function). */
int32_t cn_agg__stack_find(const cn_agg_profile *p, int32_t prefix, int32_t frame)
{
    const cn_agg__idset *ix = &p->stack_index;
    uint32_t h = cn_agg__stack_hash(prefix, frame);
    if (!ix->mask)
        return -1;
    for (size_t i = h & ix->mask;; i = (i + 1) & ix->mask) {
        const cn_agg__idslot *sl = &ix->slots[i];
        if (sl->id < 0)
            return -1;
        if (sl->hash == h && p->stack_frame[sl->id] == frame && p->stack_prefix[sl->id] == prefix)
            return sl->id;
    }
}

int32_t cn_agg_stack(cn_agg_profile *p, int32_t prefix, int32_t frame)
{
    if (!frame_ok(p, frame) || prefix < -1 || (prefix >= 0 && (size_t)prefix >= p->n_stack))
        return -EINVAL;
    int32_t id = cn_agg__stack_find(p, prefix, frame);
    if (id >= 0)
        return id;
    if (p->n_stack >= INT32_MAX)
        return -ENOSPC;
    size_t c1 = p->cap_stack, c2 = p->cap_stack;
    if (CN_RESERVE(p->stack_prefix, c1, p->n_stack + 1) < 0 ||
        CN_RESERVE(p->stack_frame, c2, p->n_stack + 1) < 0)
        return -ENOMEM;
    p->cap_stack = c1 < c2 ? c1 : c2;
    id = (int32_t)p->n_stack;
    if (cn_agg__idset_add(&p->stack_index, cn_agg__stack_hash(prefix, frame), id) < 0)
        return -ENOMEM;
    assert(prefix < id); /* cn_agg.h: prefix < id (one pass in id order sees parents first) */
    p->stack_prefix[id] = prefix;
    p->stack_frame[id] = frame;
    p->n_stack++;
    return id;
}

size_t cn_agg_stack_count(const cn_agg_profile *p)
{
    return p->n_stack;
}

int32_t cn_agg_stack_prefix(const cn_agg_profile *p, int32_t stack)
{
    if (stack < 0 || (size_t)stack >= p->n_stack)
        return -1;
    assert(p->stack_prefix[stack] < stack); /* cn_agg.h: prefix < id */
    return p->stack_prefix[stack];
}

int32_t cn_agg_stack_frame(const cn_agg_profile *p, int32_t stack)
{
    return stack >= 0 && (size_t)stack < p->n_stack ? p->stack_frame[stack] : -1;
}

size_t cn_agg_stack_funcs(const cn_agg_profile *p, int32_t stack, int32_t *out, size_t cap)
{
    size_t n = 0;
    if (stack < 0 || (size_t)stack >= p->n_stack)
        return 0;
    for (int32_t s = stack; s >= 0; s = p->stack_prefix[s]) {
        assert(p->stack_prefix[s] < s); /* cn_agg.h: prefix < id */
        int32_t f = p->stack_frame[s];
        const int32_t *chain = p->chain_pool + p->frame_chain[f];
        for (size_t i = p->frame_depth[f]; i-- > 0; n++)
            if (n < cap)
                out[n] = chain[i];
    }
    return n;
}

int32_t cn_agg_stack_from_frames(cn_agg_profile *p, const int32_t *root_first, size_t n)
{
    if (n == 0)
        return -EINVAL;
    int32_t stack = -1;
    for (size_t i = 0; i < n; i++) {
        stack = cn_agg_stack(p, stack, root_first[i]);
        if (stack < 0)
            return stack;
    }
    return stack;
}

/* ---- threads and processes -------------------------------------------------------- */

int32_t cn_agg_thread(cn_agg_profile *p, int32_t pid, int32_t tid, const char *name)
{
    uint64_t key = cn_pair(pid, tid);
    int32_t id = cn_u64map_get(&p->thr_index, key);
    if (id >= 0) {
        if (name && p->thr_name[id] < 0)
            return cn_agg_thread_set_name(p, id, name) < 0 ? -ENOMEM : id;
        return id;
    }
    int32_t name_id = string_or_none(p, name);
    if (name_id < -1)
        return -ENOMEM;
    size_t c1 = p->cap_thr, c2 = p->cap_thr, c3 = p->cap_thr;
    if (CN_RESERVE(p->thr_pid, c1, p->n_thr + 1) < 0 ||
        CN_RESERVE(p->thr_tid, c2, p->n_thr + 1) < 0 ||
        CN_RESERVE(p->thr_name, c3, p->n_thr + 1) < 0)
        return -ENOMEM;
    p->cap_thr = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
    id = (int32_t)p->n_thr;
    if (cn_u64map_put(&p->thr_index, key, id) < 0)
        return -ENOMEM;
    p->thr_pid[id] = pid;
    p->thr_tid[id] = tid;
    p->thr_name[id] = name_id;
    p->n_thr++;
    return id;
}

int32_t cn_agg_thread_find(const cn_agg_profile *p, int32_t pid, int32_t tid)
{
    return cn_u64map_get(&p->thr_index, cn_pair(pid, tid));
}

int cn_agg_thread_set_name(cn_agg_profile *p, int32_t thread, const char *name)
{
    if (thread < 0 || (size_t)thread >= p->n_thr || !name)
        return -EINVAL;
    int32_t id = cn_agg_cstring(p, name);
    if (id < 0)
        return id;
    p->thr_name[thread] = id;
    return 0;
}

/* The process table's row of pid, made (with no name and no cgroup) when absent. */
static int32_t proc_row(cn_agg_profile *p, int32_t pid)
{
    int32_t row = cn_u64map_get(&p->proc_index, (uint64_t)(uint32_t)pid);
    if (row >= 0)
        return row;
    size_t c1 = p->cap_proc, c2 = p->cap_proc, c3 = p->cap_proc;
    if (CN_RESERVE(p->proc_pid, c1, p->n_proc + 1) < 0 ||
        CN_RESERVE(p->proc_name, c2, p->n_proc + 1) < 0 ||
        CN_RESERVE(p->proc_cgroup, c3, p->n_proc + 1) < 0)
        return -ENOMEM;
    p->cap_proc = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
    row = (int32_t)p->n_proc;
    if (cn_u64map_put(&p->proc_index, (uint64_t)(uint32_t)pid, row) < 0)
        return -ENOMEM;
    p->proc_pid[row] = pid;
    p->proc_name[row] = -1;
    p->proc_cgroup[row] = -1;
    p->n_proc++;
    return row;
}

/* Sets pid's name (cgroup false) or cgroup path (cgroup true) to str, interned. */
static int process_set_string(cn_agg_profile *p, int32_t pid, bool cgroup, const char *str)
{
    if (!str)
        return -EINVAL;
    int32_t id = cn_agg_cstring(p, str);
    if (id < 0)
        return id;
    int32_t row = proc_row(p, pid); /* may grow the columns: index them after it */
    if (row < 0)
        return row;
    (cgroup ? p->proc_cgroup : p->proc_name)[row] = id;
    return 0;
}

int cn_agg_process_set_name(cn_agg_profile *p, int32_t pid, const char *name)
{
    return process_set_string(p, pid, false, name);
}

int cn_agg_process_set_cgroup(cn_agg_profile *p, int32_t pid, const char *path)
{
    return process_set_string(p, pid, true, path);
}

const char *cn_agg_process_cgroup(const cn_agg_profile *p, int32_t pid)
{
    int32_t row = cn_u64map_get(&p->proc_index, (uint64_t)(uint32_t)pid);
    return row >= 0 && p->proc_cgroup[row] >= 0 ? p->str[p->proc_cgroup[row]] : NULL;
}

size_t cn_agg_thread_count(const cn_agg_profile *p)
{
    return p->n_thr;
}

int32_t cn_agg_thread_pid(const cn_agg_profile *p, int32_t thread)
{
    return thread >= 0 && (size_t)thread < p->n_thr ? p->thr_pid[thread] : -1;
}

int32_t cn_agg_thread_tid(const cn_agg_profile *p, int32_t thread)
{
    return thread >= 0 && (size_t)thread < p->n_thr ? p->thr_tid[thread] : -1;
}

const char *cn_agg_thread_name(const cn_agg_profile *p, int32_t thread)
{
    if (thread < 0 || (size_t)thread >= p->n_thr)
        return NULL;
    return cn_agg_string_get(p, p->thr_name[thread]);
}

const char *cn_agg_process_name(const cn_agg_profile *p, int32_t pid)
{
    int32_t row = cn_u64map_get(&p->proc_index, (uint64_t)(uint32_t)pid);
    return row >= 0 && p->proc_name[row] >= 0 ? p->str[p->proc_name[row]] : NULL;
}

/* ---- metadata --------------------------------------------------------------------- */

void cn_agg_profile_set_unit(cn_agg_profile *p, cn_agg_unit unit)
{
    p->unit = unit;
}

cn_agg_unit cn_agg_profile_unit(const cn_agg_profile *p)
{
    return p->unit;
}

const char *cn_agg_unit_name(cn_agg_unit unit)
{
    static const char *const names[] = {"samples", "ms", "us", "ns", "events"};
    return (unsigned)unit < sizeof(names) / sizeof(names[0]) ? names[unit] : "samples";
}

void cn_agg_profile_set_scale(cn_agg_profile *p, double scale)
{
    p->scale = scale;
}

double cn_agg_profile_scale(const cn_agg_profile *p)
{
    return p->scale;
}

int cn_agg_meta_set(cn_agg_profile *p, const char *key, const char *value)
{
    if (!key || !value)
        return -EINVAL;
    int32_t k = cn_agg_cstring(p, key), v = cn_agg_cstring(p, value);
    if (k < 0 || v < 0)
        return -ENOMEM;
    for (size_t i = 0; i < p->n_meta; i++) {
        if (p->meta_key[i] == k) {
            p->meta_val[i] = v;
            return 0;
        }
    }
    size_t c1 = p->cap_meta, c2 = p->cap_meta;
    if (CN_RESERVE(p->meta_key, c1, p->n_meta + 1) < 0 ||
        CN_RESERVE(p->meta_val, c2, p->n_meta + 1) < 0)
        return -ENOMEM;
    p->cap_meta = c1 < c2 ? c1 : c2;
    p->meta_key[p->n_meta] = k;
    p->meta_val[p->n_meta] = v;
    p->n_meta++;
    return 0;
}

const char *cn_agg_meta_get(const cn_agg_profile *p, const char *key)
{
    for (size_t i = 0; i < p->n_meta; i++)
        if (!strcmp(p->str[p->meta_key[i]], key))
            return p->str[p->meta_val[i]];
    return NULL;
}

size_t cn_agg_meta_count(const cn_agg_profile *p)
{
    return p->n_meta;
}

const char *cn_agg_meta_key(const cn_agg_profile *p, size_t i)
{
    return i < p->n_meta ? p->str[p->meta_key[i]] : NULL;
}
