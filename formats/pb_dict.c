/* pb_dict.c — the pprof-shaped writers' dictionary (pb_dict.h). */
#include "pb_dict.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void *cn_fmt__alloc_n(size_t n, size_t size)
{
    return calloc(n > 0 ? n : 1, size);
}

int cn_fmt__dict_init(cn_fmt__dict *d, const cn_agg_profile *p, bool raw)
{
    memset(d, 0, sizeof(*d));
    d->p = p;
    d->raw = raw;
    size_t n_func = cn_agg_func_count(p), n_res = cn_agg_resource_count(p);
    size_t nkeys = raw ? cn_agg_frame_count(p) : n_func;
    if (!CN_FMT_ALLOC_N(d->loc_of, nkeys) || !CN_FMT_ALLOC_N(d->loc_key, nkeys) ||
        !CN_FMT_ALLOC_N(d->fn_of, n_func) || !CN_FMT_ALLOC_N(d->fn_func, n_func) ||
        !CN_FMT_ALLOC_N(d->map_of, n_res) || !CN_FMT_ALLOC_N(d->map_res, n_res) ||
        cn_fmt__dict_add(d, "") < 0)
        return -ENOMEM;
    return 0;
}

void cn_fmt__dict_clear(cn_fmt__dict *d)
{
    cn_u64map_clear(&d->str_index);
    free(d->strs);
    free(d->loc_of);
    free(d->loc_key);
    free(d->fn_of);
    free(d->fn_func);
    free(d->map_of);
    free(d->map_res);
    memset(d, 0, sizeof(*d));
}

int64_t cn_fmt__dict_add(cn_fmt__dict *d, const char *s)
{
    if (d->n_strs >= INT32_MAX ||
        (d->n_strs == d->cap_strs && CN_RESERVE(d->strs, d->cap_strs, d->n_strs + 1) < 0))
        return -ENOMEM;
    d->strs[d->n_strs] = (char *)s; /* protobuf-c only reads it */
    return (int64_t)d->n_strs++;
}

int64_t cn_fmt__dict_str(cn_fmt__dict *d, const char *s)
{
    if (!s)
        return 0;
    uint64_t key = (uint64_t)(uintptr_t)s;
    int32_t x = cn_u64map_get(&d->str_index, key);
    if (x >= 0)
        return x;
    int64_t id = cn_fmt__dict_add(d, s);
    if (id < 0 || cn_u64map_put(&d->str_index, key, (int32_t)id) < 0)
        return -ENOMEM;
    return id;
}

int64_t cn_fmt__dict_lit(cn_fmt__dict *d, const char *s)
{
    for (size_t i = 0; i < d->n_strs; i++)
        if (strcmp(d->strs[i], s) == 0)
            return (int64_t)i;
    return cn_fmt__dict_add(d, s);
}

static void use_mapping(cn_fmt__dict *d, int32_t res)
{
    if (res < 0 || d->map_of[res])
        return;
    d->map_res[d->n_maps] = res;
    d->map_of[res] = (uint32_t)++d->n_maps;
}

static void use_function(cn_fmt__dict *d, int32_t func)
{
    if (d->fn_of[func])
        return;
    d->fn_func[d->n_fns] = func;
    d->fn_of[func] = (uint32_t)++d->n_fns;
    use_mapping(d, cn_agg_func_resource(d->p, func));
}

void cn_fmt__dict_use_location(cn_fmt__dict *d, int32_t key)
{
    if (d->loc_of[key])
        return;
    d->loc_key[d->n_locs] = key;
    d->loc_of[key] = (uint32_t)++d->n_locs;
    const cn_agg_profile *p = d->p;
    if (!d->raw) {
        use_function(d, key);
        d->n_lines++;
        return;
    }
    use_mapping(d, cn_agg_frame_resource(p, key));
    if (cn_agg_frame_is_placeholder(p, key))
        return; /* no function: a location with an address only */
    const int32_t *chain;
    size_t depth = cn_agg_frame_funcs(p, key, &chain);
    for (size_t i = 0; i < depth; i++)
        use_function(d, chain[i]);
    d->n_lines += depth;
}

double cn_fmt__dict_unit_factor(const cn_agg_profile *p)
{
    double scale = cn_agg_profile_scale(p);
    switch (cn_agg_profile_unit(p)) {
    case CN_AGG_UNIT_MS:
        return scale * 1e6;
    case CN_AGG_UNIT_US:
        return scale * 1e3;
    default:
        return scale;
    }
}
