/* cn_fmt.h — canopy's file formats: the whole public API of formats/.
 *
 * formats/ moves profiles between the call-tree engine (aggregate/, cn_agg.h) and files.
 * Data flows two ways, always through the engine's public API:
 * - in: cn_fmt_import_file() / _buffer() read a file (gzip undone first), detect its
 *   format by content (.canopy, Chrome/V8 .cpuprofile, pprof profile.proto, `perf script`
 *   text, folded stacks) and build a new cn_agg_profile with the engine's interning calls
 *   (.canopy itself is the engine's own snapshot: cn_agg_canopy_read()).
 * - out: writers render what the engine computed: a query's tree (text, JSON, SVG flame
 *   graph), a query's stacks (folded, pprof, speedscope), an estimated timeline
 *   (cn_agg_timeline: JSON, text, Chrome trace, speedscope) or a differential result
 *   (cn_agg_diff_run: text, JSON, SVG, three-column folded).
 * Importers own nothing after they return: the profile is the caller's (free it with
 * cn_agg_profile_free). Writers never keep a pointer and never close `out`. Errors are
 * negative errno values; parsers fill a cn_err naming the file and line or byte offset.
 * Names from binaries and scripts may be invalid UTF-8: every JSON writer replaces bad
 * bytes with U+FFFD, so its output is always valid JSON.
 */
#ifndef CN_FMT_H
#define CN_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cn_agg.h"
#include "cn_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Files in
 */

/* Reads a profile file of any supported format (detected by content; gzip first).
 * Returns 0 and *out, or negative errno with err naming the file and line or offset
 * (-EINVAL for bad content, -ENOENT/-EACCES… for I/O). */
int cn_fmt_import_file(const char *path, cn_agg_profile **out, cn_err *err);
/* The same for a buffer already in memory (fuzzing); name is used in messages. */
int cn_fmt_import_buffer(const void *data, size_t len, const char *name, cn_agg_profile **out,
                         cn_err *err);

/* ---------------------------------------------------------------------------------------
 * Files out
 */

/* Output formats (what `--format` names; docs/cli.md). */
typedef enum cn_fmt_format {
    CN_FMT_TEXT = 0,
    CN_FMT_JSON,
    CN_FMT_FOLDED,
    CN_FMT_CANOPY, /* the engine's snapshot: cn_agg_write_canopy() */
    CN_FMT_PPROF,
    CN_FMT_SPEEDSCOPE,
    CN_FMT_CHROME_TRACE,
    CN_FMT_SVG,
} cn_fmt_format;

/* Options shared by the tree writers. Nothing is owned. */
typedef struct cn_fmt_write_opts {
    const char *title;                  /* header: session or file name */
    int max_depth;                      /* text: -1 = unlimited */
    double min_percent;                 /* text: hide nodes below this % of the total */
    bool color;                         /* text: ANSI colours */
    const cn_agg_transform *transforms; /* echoed in headers and JSON */
    size_t n_transforms;
    /* Live sessions add these JSON fields when session is not NULL. */
    const char *session;
    const char *event;
    int64_t samples;
    int64_t lost;
} cn_fmt_write_opts;

void cn_fmt_write_opts_init(cn_fmt_write_opts *o);

/* A query's tree as text (indented, docs/cli.md) or as the JSON tree. Return 0 or
 * negative errno. */
int cn_fmt_write_text(const cn_agg_profile *p, const cn_agg_tree *t, const cn_fmt_write_opts *o,
                      FILE *out);
int cn_fmt_write_json(const cn_agg_profile *p, const cn_agg_tree *t, const cn_fmt_write_opts *o,
                      FILE *out);
/* Folded stacks of the query's samples after transforms: one line per distinct stack,
 * sorted by the stack text. Takes the query, not a tree, because a tree loses stacks. */
int cn_fmt_write_folded(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *err);
/* Timeline outputs (see cn_agg_timeline). */
int cn_fmt_write_timeline_json(const cn_agg_profile *p, const cn_agg_call *calls, size_t n,
                               FILE *out);
int cn_fmt_write_timeline_text(const cn_agg_profile *p, const cn_agg_call *calls, size_t n,
                               FILE *out);
int cn_fmt_write_chrome_trace(const cn_agg_profile *p, const cn_agg_call *calls, size_t n,
                              FILE *out);
/* speedscope's evented profiles for an estimated timeline (one profile per tid, balanced
 * open/close events in ns). Returns 0 or negative errno with err set. */
int cn_fmt_write_timeline_speedscope(cn_agg_profile *p, const cn_agg_call *calls, size_t n,
                                     FILE *out, cn_err *err);

/* pprof (gzipped profile.proto), speedscope JSON and SVG flame graphs of a query. They
 * take the query, not a tree, where they need whole stacks (an untransformed query keeps
 * frames, addresses and sample order). Return 0 or negative errno with err set. */
int cn_fmt_write_pprof(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *err);
int cn_fmt_write_speedscope(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *err);
int cn_fmt_write_svg(cn_agg_profile *p, const cn_agg_query *q, const cn_fmt_write_opts *o,
                     FILE *out, cn_err *err);

/* Writers of a differential result (cn_agg_diff_run). Text: one line per node with the
 * change, its share of NEW's total, BASE and NEW. JSON: the tree format with "base" and
 * "new" (totals) and "base_self"/"new_self" on every node, plus "diff", "base_total",
 * "new_total", "factor", "normalized" at the top. SVG: a differential flame graph (width
 * (BASE + NEW) / 2, red for growth, blue for shrinkage). Return 0 or negative errno. */
int cn_fmt_write_diff_text(const cn_agg_profile *d, const cn_agg_diff *r,
                           const cn_fmt_write_opts *o, FILE *out);
int cn_fmt_write_diff_json(const cn_agg_profile *d, const cn_agg_diff *r,
                           const cn_fmt_write_opts *o, FILE *out);
int cn_fmt_write_diff_svg(const cn_agg_profile *d, const cn_agg_diff *r, const cn_fmt_write_opts *o,
                          FILE *out, cn_err *err);
/* Three-column folded `STACK BASE NEW` of differential profile d after q's transforms:
 * raw (unnormalized) weights, one line per stack, sorted by the stack text; reads back as
 * the same d. */
int cn_fmt_write_diff_folded(cn_agg_profile *d, const cn_agg_query *q, FILE *out, cn_err *err);

#ifdef __cplusplus
}
#endif
#endif /* CN_FMT_H */
