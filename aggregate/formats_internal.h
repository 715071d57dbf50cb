/* formats_internal.h — what the issue-6 format files (export_pprof.c, import_pprof.c,
 * export_speedscope.c, export_svg.c, diff.c) share; formats_common.c implements it.
 *
 * Two ways to get a query's weighted stacks out of the engine:
 * - the tree path: run the query's transforms with the TREE view (cn_agg_query_run);
 *   every call node with self != 0 is one func-level stack (walk node.parent to the root).
 *   This is what every transformed query uses, since transforms work on funcs.
 * - the raw path: an untransformed query (no transforms, no --group-by) can read the
 *   profile's own frame stacks, which keep addresses, resources and inline chains (pprof
 *   locations that can be symbolized later; speedscope samples in time order).
 * Nothing here is public; names carry the cn_agg__ prefix.
 */
#ifndef CN_AGG_FORMATS_INTERNAL_H
#define CN_AGG_FORMATS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "agg_internal.h"

/* True when q has no transforms and no --group-by: frame stacks are the answer. */
bool cn_agg__query_is_raw(const cn_agg_query *q);

/* True when sample thread `thread` (-1 = unknown) passes q's tid/pid filters. */
bool cn_agg__thread_matches(const cn_agg_profile *p, const cn_agg_query *q, int32_t thread);

/* True when q has no time range (retention's all-time accumulator then counts too). */
bool cn_agg__query_all_time(const cn_agg_query *q);

/* Visits every sample of q (raw path: range and thread filters only, stack >= 0), then,
 * for all-time queries, every accumulator row (time = -1, count = 0: its sample count is
 * not kept). Stops early and returns the callback's negative result if it fails.
 * Returns 0 or that result. */
typedef int (*cn_agg__sample_fn)(void *ctx, int32_t stack, int32_t thread, int64_t time_ns,
                                 double weight, int64_t count);
int cn_agg__for_each_sample(cn_agg_profile *p, const cn_agg_query *q, cn_agg__sample_fn fn,
                            void *ctx);

/* Runs q with its view replaced by `view` (transforms, range, filters kept).
 * Returns 0 and *out (caller frees with cn_agg_tree_free) or negative errno, err set. */
int cn_agg__run_view(cn_agg_profile *p, const cn_agg_query *q, cn_agg_view view, cn_agg_tree **out,
                     cn_err *err);

/* True when native frame `frame` still carries its placeholder func (`LIB+0xOFF`). */
bool cn_agg__frame_unsymbolized(const cn_agg_profile *p, int32_t frame);

/* Writes s as a JSON string literal (quotes included; control bytes escaped; invalid
 * UTF-8 passed through byte for byte). */
void cn_agg__json_string(FILE *out, const char *s);
/* Writes s escaped for XML text and attribute values. At most max_chars characters
 * (UTF-8 aware) are written, followed by "…" when truncated; max_chars < 0 = all. */
void cn_agg__xml_text(FILE *out, const char *s, long max_chars);
/* A double as JSON: integers without a fraction, else up to 17 significant digits;
 * non-finite values as 0. */
void cn_agg__json_number(FILE *out, double v);

/* A flame graph to draw: a tree plus, for differential trees, per-node base and new
 * totals (then widths are (base + new) / 2 and colours red for growth, blue for
 * shrinkage). icicle draws roots at the top (inverted and callers views). */
typedef struct cn_agg__flame {
    const cn_agg_profile *p;
    const cn_agg_tree *t;
    const double *base, *newv; /* per node, or NULL */
    bool icicle;
    const char *title;    /* may be NULL */
    const char *subtitle; /* may be NULL */
} cn_agg__flame;

/* Writes f as one self-contained SVG. Returns 0 or negative errno with err set. */
int cn_agg__write_flame(const cn_agg__flame *f, FILE *out, cn_err *err);

/* Flushes out and turns a write error into -EIO with err set. */
int cn_agg__finish_output(FILE *out, const char *what, cn_err *err);

#endif /* CN_AGG_FORMATS_INTERNAL_H */
