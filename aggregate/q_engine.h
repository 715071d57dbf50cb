/* q_engine.h — private to the query engine's files (query.c, transform.c, views.c,
 * timeline.c, lines.c, transform_spec.c).
 *
 * A query works on func-level stack tables (cn_agg__qtable: rows keyed by (prefix, func),
 * prefix < row, so each row is one call node). The engine builds a *base* table from the
 * profile's frame stacks (expanding inline chains, adding --group-by roots), then each
 * transform maps the current table to a new one (or keeps it) with an old row -> new row
 * map (-1 = dropped). The maps are composed into rmap[base row] as they come, and samples
 * are mapped once at the end: sample -> base row -> rmap -> final row.
 */
#ifndef CN_AGG_Q_ENGINE_H
#define CN_AGG_Q_ENGINE_H

#include <errno.h>

#include "agg_internal.h"

/* The func-level prefix tree of a query (q_table.c): rows (prefix, func), unique, with
 * prefix < row; child lists for lookups. Initialise with cn_agg__qt_init. */
/* A row's lookup data, kept together so that a child-list scan costs one cache line
 * per visited child, and the parent's list head and count another. */
typedef struct cn_agg__qlink {
    int32_t func; /* copy of func[row] */
    int32_t sib;  /* next sibling, -1 = none */
} cn_agg__qlink;

typedef struct cn_agg__qhead {
    int32_t child; /* first (newest) child, -1 = none */
    uint32_t nkids;
} cn_agg__qhead;

typedef struct cn_agg__qtable {
    int32_t *prefix, *func;
    cn_agg__qlink *link;
    cn_agg__qhead *head;
    size_t n, cap;
    cn_agg__qhead roots;
    cn_u64map big; /* (prefix, func) -> row, children of rows with many children */
} cn_agg__qtable;

void cn_agg__qt_init(cn_agg__qtable *t);
/* Advises transparent huge pages for a large, randomly indexed array (no-op if small). */
void cn_agg__q_hugepages(void *ptr, size_t bytes);
/* The row (prefix, func), appended if new. Returns row >= 0 or -ENOMEM. */
int32_t cn_agg__qt_intern(cn_agg__qtable *t, int32_t prefix, int32_t func);
/* Pre-sizes for n rows. 0 or -ENOMEM. */
int cn_agg__qt_reserve(cn_agg__qtable *t, size_t n);
void cn_agg__qt_clear(cn_agg__qtable *t); /* frees; the table is then empty and usable */

/* --group-by state's groups, in the order of cn_agg__state_names (query.c). */
enum { CN_AGG__RUNNING, CN_AGG__BLOCKED, CN_AGG__PREEMPTED, CN_AGG__N_STATES };

/* The state of one query run. Owns every array in it. */
typedef struct cn_agg__qrun {
    cn_agg_profile *p;
    const cn_agg_query *q;
    cn_agg__qtable t;   /* the current (transformed) table */
    bool t_borrowed;    /* t is a shallow copy of the cache's table: never freed here */
    int32_t *rmap;      /* base row -> current row, -1 = dropped; n_base entries */
    bool rmap_identity; /* no transform applied yet: rmap[b] == b, current rows = base rows */
    size_t n_base;
    /* base rows: the ungrouped table and frame stack -> its row, owned by the run
     * (own_*) or by the profile's query cache */
    const int32_t *fnode; /* n_fnode entries */
    size_t n_fnode;
    const cn_agg__qtable *plain;
    int32_t *own_fnode;
    cn_agg__qtable own_plain;
    bool grouped;
    cn_u64map gmemo;       /* (ungrouped row + 1, group func) -> base row (grouped) */
    int32_t *thr_group;    /* thread -> group func (grouped); n_thr entries */
    int32_t unknown_group; /* group func of samples without thread */
    int32_t state_group[CN_AGG__N_STATES]; /* --group-by state: state -> group func */
    /* sample selection */
    size_t lo, hi;       /* sample index range [lo, hi) after the time range */
    bool with_acc;       /* the retention accumulator counts (no time range) */
    bool filtered;       /* tid/pid filter active */
    uint8_t *thr_keep;   /* thread -> kept (filtered only) */
    double *sb;          /* selected weight per base row (computed once, by cn_agg__qrun_self) */
    const int32_t *srow; /* per sample base row (ungrouped, from the query cache) or NULL */
    /* collapse-all-rec counters per current row, NULL unless applied */
    int32_t *merged, *recur;
} cn_agg__qrun;

/* Builds the base table and the sample selection of query q. cache: the profile's query
 * cache slot (created on first use, kept up to date), or NULL to build everything for
 * this run. Returns 0 or negative errno (err set). Always call cn_agg__qrun_free, even on
 * failure. */
int cn_agg__qrun_init(cn_agg__qrun *run, cn_agg_profile *p, const cn_agg_query *q,
                      struct cn_agg__qcache **cache, cn_err *err);

/* The profile's query cache slot (agg_internal.h). */
#define CN_AGG__QCACHE(p) (&(p)->qcache)
void cn_agg__qrun_free(cn_agg__qrun *run);
/* Applies q's transforms in order. Returns 0 or negative errno. */
int cn_agg__qrun_transform_all(cn_agg__qrun *run, cn_err *err);
/* The base row of a sample (stack, thread) or -1; grouped runs look the pair up. */
int32_t cn_agg__qrun_base(const cn_agg__qrun *run, int32_t stack, int32_t thread);
/* True when the thread passes the tid/pid filter. */
static inline bool cn_agg__qrun_keep(const cn_agg__qrun *run, int32_t thread)
{
    if (!run->filtered)
        return true;
    return thread >= 0 && run->thr_keep[thread];
}
/* Per current row self weight of the selected samples: *self (calloc'ed, caller frees,
 * run->t.n entries). The samples are read once per run (weights per base row), later
 * calls only map those through rmap. Returns 0 or -ENOMEM. */
int cn_agg__qrun_self(cn_agg__qrun *run, double **self);

/* One transform on a table: fills *out (a new table, or left empty when *same is set:
 * then rows are unchanged) and map[in->n] (old row -> new row, -1 = dropped).
 * merged/recur: collapse-all-rec counters of the input rows (may be NULL), carried
 * through other rebuilding transforms; for collapse-all-rec, self[] (self weight per
 * input row; NULL = all 0) must be given and o->merged and o->recur receive the new
 * counters (malloc'ed), computed over the input tree only (docs/calltree.md §6.1). */
typedef struct cn_agg__tfout {
    cn_agg__qtable t;
    int32_t *map;
    bool same;
    int32_t *merged, *recur; /* collapse-all-rec counters for the output rows, or NULL */
} cn_agg__tfout;

int cn_agg__tf_apply(cn_agg_profile *p, const cn_agg__qtable *in, const cn_agg_transform *tf,
                     const double *self, const int32_t *merged_in, const int32_t *recur_in,
                     cn_agg__tfout *o);
void cn_agg__tfout_free(cn_agg__tfout *o);
/* True for collapse-all-rec (it needs the input rows' self weights). */
bool cn_agg__tf_needs_self(const cn_agg_transform *tf);

/* The string id of a displayed func name, or -2 when no func carries it. */
int32_t cn_agg__q_name_id(const cn_agg_profile *p, const char *name);

/* Builds the view of q over the final table t with per-row self weights. */
int cn_agg__view_build(cn_agg_profile *p, const cn_agg_query *q, const cn_agg__qtable *t,
                       const double *self, const int32_t *merged, const int32_t *recur,
                       cn_agg_tree **out, cn_err *err);

/* Small growable int32 vector used by several passes. */
typedef struct cn_agg__ivec {
    int32_t *v;
    size_t n, cap;
} cn_agg__ivec;

static inline int cn_agg__ivec_push(cn_agg__ivec *v, int32_t x)
{
    if (v->n == v->cap && CN_RESERVE(v->v, v->cap, v->n + 1) < 0)
        return -ENOMEM;
    v->v[v->n++] = x;
    return 0;
}

#endif /* CN_AGG_Q_ENGINE_H */
