/* formats_internal.h — what formats/'s files share; private to formats/ (only the
 * importers' fuzz targets reach it, through import_internal.h: tests/CMakeLists.txt).
 *
 * formats/ sits on aggregate's public API (cn_agg.h) only. Two ways to get a query's
 * weighted stacks out of the engine:
 * - the tree path: run the query's transforms with the TREE view (cn_agg_query_run);
 *   every call node with self != 0 is one func-level stack (walk node.parent to the root).
 *   This is what every transformed query uses, since transforms work on funcs.
 * - the raw path: an untransformed query (no transforms, no --group-by) can read the
 *   profile's own frame stacks (cn_agg_for_each_sample), which keep addresses, resources
 *   and inline chains (pprof locations that can be symbolized later; speedscope samples
 *   in time order).
 * The containers (a doubling array, a uint64 → int32 map) are common/'s. Names carry the cn_fmt__
 * prefix.
 */
#ifndef CN_FMT_FORMATS_INTERNAL_H
#define CN_FMT_FORMATS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "cn_agg.h"
#include "cn_fmt.h"
#include "json_out.h"

/* ---- queries (formats_common.c) ------------------------------------------------------ */

/* True when q has no transforms, no --group-by and keeps inline frames: frame stacks are
 * the answer. */
bool cn_fmt__query_is_raw(const cn_agg_query *q);

/* True when sample thread `thread` (-1 = unknown) passes q's tid/pid filters. */
bool cn_fmt__thread_matches(const cn_agg_profile *p, const cn_agg_query *q, int32_t thread);

/* True when q has no time range (retention's all-time accumulator then counts too). */
bool cn_fmt__query_all_time(const cn_agg_query *q);

/* Runs q with its view replaced by `view` (transforms, range, filters kept).
 * Returns 0 and *out (caller frees with cn_agg_tree_free) or negative errno, err set. */
int cn_fmt__run_view(cn_agg_profile *p, const cn_agg_query *q, cn_agg_view view, cn_agg_tree **out,
                     cn_err *err);

/* Sorts n samples of elem bytes each, kept in *samples (malloc'ed; replaced), by the
 * int32_t thread at byte thread_off of each: threads -1 (none) then 0 .. nthreads - 1,
 * stable (a counting sort: the engine hands samples in time order). Then each thread's run
 * not already in order by cmp is qsorted with cmp. -ENOMEM; -ERANGE (nothing done) when
 * a sample's thread is outside that range. */
int cn_fmt__sort_by_thread(void **samples, size_t n, size_t elem, size_t thread_off,
                           size_t nthreads, int (*cmp)(const void *, const void *));

/* Threads a transformed query runs for separately (cn_fmt__thread_trees); past it, one
 * query for all. */
#define CN_FMT__MAX_THREAD_QUERIES 64

/* A thread's tree: thread -1 for the whole query's. A negative return stops the walk. */
typedef int (*cn_fmt__tree_fn)(void *ctx, int32_t thread, const cn_agg_tree *t);

/* The tree path per thread (speedscope's profiles, the Firefox Profiler's threads): runs
 * q's TREE view once per thread that q selects (tid and pid set to the thread's) and calls
 * fn with each non-empty tree; or, when such queries would miss samples (samples of no
 * thread, retention rows of no thread) or there are more than CN_FMT__MAX_THREAD_QUERIES
 * threads, calls fn once with thread -1 and the whole query's tree, empty or not. Each
 * tree is freed after fn returns. Returns 0, fn's negative result, or the query's
 * negative errno with err set. */
int cn_fmt__thread_trees(cn_agg_profile *p, const cn_agg_query *q, cn_fmt__tree_fn fn, void *ctx,
                         cn_err *err);

/* True when a resource identity is a build-id: an even number (8 or more) of hex digits
 * (live/'s identities are build-ids or "dev:inode:mtime"; pprof's carry build-ids). */
bool cn_fmt__is_build_id(const char *identity);

/* Writes s escaped for XML text and attribute values. At most max_chars characters
 * (UTF-8 aware) are written, followed by "…" when truncated; max_chars < 0 = all. */
void cn_fmt__xml_text(FILE *out, const char *s, long max_chars);

/* A flame graph to draw: a tree plus, for differential trees, per-node base and new
 * totals (then widths are (base + new) / 2 and colours red for growth, blue for
 * shrinkage). icicle draws roots at the top (inverted and callers views). */
typedef struct cn_fmt__flame {
    const cn_agg_profile *p;
    const cn_agg_tree *t;
    const double *base, *newv; /* per node, or NULL */
    bool icicle;
    const char *title;    /* may be NULL */
    const char *subtitle; /* may be NULL */
} cn_fmt__flame;

/* Writes f as one self-contained SVG. Returns 0 or negative errno with err set. */
int cn_fmt__write_flame(const cn_fmt__flame *f, FILE *out, cn_err *err);

/* Flushes out and turns a write error into -EIO with err set. */
int cn_fmt__finish_output(FILE *out, const char *what, cn_err *err);

/* ---- a function's kind in each format (frame_kind.c, docs/python.md) ----------------- */

/* func's kind marker ("python"), or NULL when its kind goes unmarked (or func < 0). */
const char *cn_fmt__func_kind(const cn_agg_profile *p, int32_t func);
/* Writes `,"kind":"MARKER"` for a marked func, nothing otherwise. 0 or -EIO. */
int cn_fmt__json_kind(FILE *out, const cn_agg_profile *p, int32_t func);
/* Appends func's folded frame text at *buf + len (a ';' first when len > 0; *buf grown
 * with CN_RESERVE, NUL-terminated): its name, and ` (LIB)` for a Python function (py-spy's
 * form); line breaks become blanks. Returns the new length or -ENOMEM. */
long cn_fmt__folded_frame(const cn_agg_profile *p, int32_t func, char **buf, size_t *cap,
                          size_t len);
/* True when the folded frame s[0 .. n) is a Python function, `NAME (FILE)` or `NAME
 * (FILE:LINE)` with FILE a `.py` file's name or "[python]": then NAME is s[0 ..
 * *name_len) and FILE is *file[0 .. *file_len). */
bool cn_fmt__folded_python(const char *s, size_t n, size_t *name_len, const char **file,
                           size_t *file_len);
/* pprof's Function.system_name for a Python function, `py::NAME:FILE` (CPython's perf-map
 * name): 0 with *out malloc'ed (caller frees), 0 with *out NULL for any other function, or
 * -ENOMEM. */
int cn_fmt__py_system_name(const cn_agg_profile *p, int32_t func, char **out);
/* FILE when system_name is `py::NAME:FILE` for this name (a Python function), else NULL. */
const char *cn_fmt__py_system_file(const char *system_name, const char *name);

#endif /* CN_FMT_FORMATS_INTERNAL_H */
