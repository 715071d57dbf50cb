/* pb_dict.h — the dictionary both pprof-shaped writers build (export_pprof.c and
 * export_otlp.c, pb_dict.c): a string table and the ids their samples' locations,
 * functions and mappings get on first use.
 *
 * The string table holds borrowed pointers (protobuf-c only reads them): a profile string
 * is interned by its address (the profile interns its strings, so one address is one
 * text), a literal ("samples", "nanoseconds") by its text; index 0 is "". A location's key
 * is a frame when the writer takes raw samples (its functions: the frame's inline chain)
 * or a func when it takes a tree's nodes (one function). Ids start at 1 (0: unused), in
 * order of first use; *_key/_func/_res map id - 1 back.
 */
#ifndef CN_FMT_PB_DICT_H
#define CN_FMT_PB_DICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cn_agg.h"
#include "cn_common.h"

typedef struct cn_fmt__dict {
    const cn_agg_profile *p;
    bool raw; /* keys are frames (raw samples), else funcs (tree nodes) */

    cn_u64map str_index; /* a profile string's address -> its index */
    char **strs;
    size_t n_strs, cap_strs;

    uint32_t *loc_of; /* key -> location id */
    int32_t *loc_key; /* location id - 1 -> key */
    size_t n_locs;
    size_t n_lines;   /* lines over all locations (raw: inline chains) */
    uint32_t *fn_of;  /* func -> function id */
    int32_t *fn_func; /* function id - 1 -> func */
    size_t n_fns;
    uint32_t *map_of; /* resource -> mapping id */
    int32_t *map_res; /* mapping id - 1 -> resource */
    size_t n_maps;
} cn_fmt__dict;

/* Sizes the tables for p (every frame or func, func and resource) and puts "" at index 0.
 * 0 or -ENOMEM (then cn_fmt__dict_clear still frees what was made). */
int cn_fmt__dict_init(cn_fmt__dict *d, const cn_agg_profile *p, bool raw);
void cn_fmt__dict_clear(cn_fmt__dict *d);

/* Appends s to the string table (no lookup; the caller keeps s alive): its index, or
 * -ENOMEM past INT32_MAX entries or out of memory. */
int64_t cn_fmt__dict_add(cn_fmt__dict *d, const char *s);
/* The index of profile string s, interned by address (NULL: 0), or -ENOMEM. */
int64_t cn_fmt__dict_str(cn_fmt__dict *d, const char *s);
/* The index of literal s, found by text (there are few: linearly), or -ENOMEM. */
int64_t cn_fmt__dict_lit(cn_fmt__dict *d, const char *s);

/* Gives key a location id on first use, with its functions and their mappings. */
void cn_fmt__dict_use_location(cn_fmt__dict *d, int32_t key);

/* Weight in nanoseconds for time units (ms, us; scaled by the profile's scale), as is
 * for counts. */
double cn_fmt__dict_unit_factor(const cn_agg_profile *p);

/* calloc that never returns NULL for 0 elements (NULL then means ENOMEM). */
void *cn_fmt__alloc_n(size_t n, size_t size);
#define CN_FMT_ALLOC_N(ptr, n) ((ptr) = cn_fmt__alloc_n((n), sizeof(*(ptr))))

#endif /* CN_FMT_PB_DICT_H */
