/* cn_fmt.h — canopy's file formats: the whole public API of formats/.
 *
 * formats/ moves profiles between the call-tree engine (aggregate/, cn_agg.h) and files.
 * Data flows two ways, always through the engine's public API:
 * - in: cn_fmt_import_file() / _buffer() read a file (gzip undone first), detect its
 *   format by content (.canopy, Chrome/V8 .cpuprofile, pprof profile.proto, `perf script`
 *   text, folded stacks) and build a new cn_agg_profile with the engine's interning calls
 *   (.canopy itself is the engine's own snapshot: cn_agg_canopy_read()).
 * - out: writers render what the engine computed: a query's tree (text, JSON, SVG flame
 *   graph), a query's stacks (folded, pprof, speedscope, the Firefox Profiler's format),
 *   an estimated timeline (cn_agg_timeline: JSON, text, Chrome trace, speedscope) or a
 *   differential result (cn_agg_diff_run: text, JSON, SVG, three-column folded).
 * - queries: a cn_fmt_spec holds everything the QUERY and output options say; it travels
 *   between the CLI and canopyd as JSON (cn_fmt_spec_to_json / _from_json) and
 *   cn_fmt_render() turns (profile, spec) into bytes for every format, view, timeline and
 *   differential profile, for files and live sessions alike.
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
    CN_FMT_FIREFOX,  /* the Firefox Profiler's processed profile (export_firefox.c) */
    CN_FMT_ACTIVITY, /* weight per time bucket and per thread (export_activity.c) */
    CN_FMT_OTLP,     /* OpenTelemetry profiles, protobuf ProfilesData (export_otlp.c) */
} cn_fmt_format;

/* How a live session's user-space unwinds ended (docs/cli-live.md, "Session counters"),
 * for the tree header's truncation summary and the JSON tree's "unwind" object: a live
 * session's user_stacks and unwind_outcomes (cn_live_session_info) as they are. */
typedef struct cn_fmt_unwind {
    bool known; /* false: not shown (files, sources without the counters) */
    uint64_t user_stacks;
    cn_unwind_outcomes outcomes; /* sum: user_stacks */
} cn_fmt_unwind;

/* The one-line summary of u's stacks cut short (docs/cli-live.md, "Truncated stacks"), e.g.
 * "12.3% of stacks truncated (stack copy 9.1%, no CFI 2.0%, read fault 1.2%)", written to
 * buf (NUL-terminated, clipped to n). Returns false, buf empty, when u is not known or no
 * stack was cut short: the tree header and `canopy top` show it only when true. */
bool cn_fmt_unwind_summary(const cn_fmt_unwind *u, char *buf, size_t n);

/* Off-CPU and wall profiles (meta "mode" "off-cpu" or "wall", unit ns: docs/cli.md,
 * "Modes") show their weights as times. cn_fmt_time writes ns with three significant
 * digits and a unit: "850 ns", "12.3 us", "4.56 s". */
bool cn_fmt_is_time_profile(const cn_agg_profile *p);
void cn_fmt_time(char *buf, size_t n, double ns);

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
    cn_fmt_unwind unwind; /* with session: text summary, JSON "unwind" when known */
    const char *python;   /* with session: "on" / "off (why)" (docs/python.md), or NULL */
    const char *cgroup;   /* with session: a cgroup session's directory, or NULL */
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
/* cn_fmt_write_pprof for a profile counted in samples, each standing for period_ns of CPU
 * time (a CPU session: 1e9 / frequency): the values are samples/count and cpu/nanoseconds
 * (= samples × period_ns, the default sample type and period type), period = period_ns,
 * as Grafana's agents send CPU profiles to Pyroscope (docs/fleet.md). period_ns <= 0, or
 * a profile in time units: exactly cn_fmt_write_pprof. */
int cn_fmt_write_pprof_cpu(cn_agg_profile *p, const cn_agg_query *q, int64_t period_ns, FILE *out,
                           cn_err *err);
int cn_fmt_write_speedscope(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *err);

/* What an OTLP profile's resources say beyond the profile itself (docs/cli.md "OTLP
 * profiles"). Nothing is owned. */
typedef struct cn_fmt_otlp_opts {
    const char *host; /* host.name; NULL: left out */
    /* More string attributes of every resource (canopyd's push: service.name, labels),
     * after the profile's own; a key given twice is written once (the first). */
    const char *const *attr_keys;
    const char *const *attr_values;
    size_t n_attrs;
} cn_fmt_otlp_opts;

/* The query as an OpenTelemetry profiles message (the "v1development" signal at the
 * version docs/cli.md pins; serialized ProfilesData, also the body of an OTLP/HTTP export
 * request): one resource per process with host.name, process.pid,
 * process.executable.name, container.id and k8s.pod.uid where known (o may be NULL).
 * Returns 0 or
 * negative errno with err set. */
int cn_fmt_write_otlp(cn_agg_profile *p, const cn_agg_query *q, const cn_fmt_otlp_opts *o,
                      FILE *out, cn_err *err);
/* The Firefox Profiler's processed profile format at a pinned version (docs/cli.md
 * "Firefox Profiler"): one thread per thread of the profile, libraries, functions, frames
 * with addresses and inline depths, categories, and the samples with their times and
 * weights (untransformed queries), or one weighted sample per call node with self weight
 * (transformed queries). Returns 0 or negative errno with err set. */
int cn_fmt_write_firefox(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *err);
/* An activity graph's data: the weight of q's thread's samples that its transforms keep,
 * in 200 time buckets over the whole profile (q's range and view ignored), and every
 * thread's weight in q's range (docs/cli.md "Output formats"). 0 or negative errno with
 * err set. */
int cn_fmt_write_activity(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *err);
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

/* Appends the n bytes at s (NULL as "") to out as one JSON string literal, quotes
 * included, with the one policy of every JSON writer here: bytes that are not valid UTF-8
 * become U+FFFD, '"' and '\\' are backslash-escaped, control characters are \n, \t, \r
 * or \u00XX, so the result is valid JSON whatever s holds (canopyd embeds rendered text in
 * replies with it, docs/protocol.md "Responses"). Returns 0, or -EMSGSIZE past out's
 * limit / -ENOMEM; then out holds a partial literal (callers drop the buffer). */
int cn_fmt_json_string(cn_buf *out, const char *s, size_t n);

/* ---------------------------------------------------------------------------------------
 * Queries: one spec, one codec, one renderer (spec.c, render.c)
 *
 * A cn_fmt_spec is everything the QUERY and output options (docs/cli.md "QUERY options")
 * and the protocol's query fields (docs/protocol.md "Queries") can say. The CLI fills one
 * from argv, sends it to canopyd with cn_fmt_spec_to_json(); canopyd decodes it with
 * cn_fmt_spec_from_json(); both then hand (profile, spec) to cn_fmt_render(), so a file
 * opened by `canopy open` and the same profile served by canopyd print the same bytes.
 */

/* Everything a query and its output options say. Initialise with cn_fmt_spec_init();
 * release with cn_fmt_spec_clear(). `query` is the engine's view of the spec: the setters
 * below keep query.transforms / query.view_func pointing into the owned fields. The
 * range fields of `query` (from_ns, to_ns) are resolved by cn_fmt_render from last /
 * from_s / to_s against the profile, never set by hand. */
typedef struct cn_fmt_spec {
    cn_agg_query query;           /* view, callers_mode, group_by, tid, pid (only_pid) */
    cn_agg_transform *transforms; /* owned, n_transforms of them (at most
                                     CN_FMT_MAX_TRANSFORMS) */
    size_t n_transforms;
    char *view_func;     /* owned; F of callees/callers */
    char *last;          /* owned; --last as given, NULL = none */
    int64_t last_ns;     /* --last parsed, -1 = none */
    double from_s, to_s; /* --from / --to, seconds since the start; NAN = none */
    cn_fmt_format format;
    int depth;           /* text: levels shown, -1 = unlimited */
    double min_percent;  /* text: hide nodes below this % of the total */
    bool color;          /* text: ANSI colours */
    bool timeline;       /* render the estimated call timeline (docs/cli.md `timeline`) */
    cn_agg_where *where; /* owned: --where conditions (values owned), n_where of them (at
                            most CN_FMT_MAX_WHERE); query.where points here */
    size_t n_where;
} cn_fmt_spec;

#define CN_FMT_MAX_TRANSFORMS 1024
#define CN_FMT_MAX_WHERE      16

/* Defaults: no transforms, tree view, everything in range, format text, depth -1. */
void cn_fmt_spec_init(cn_fmt_spec *s);
/* Frees what s owns and re-initialises it. Accepts NULL. */
void cn_fmt_spec_clear(cn_fmt_spec *s);
/* Parses a transform SPEC ("focus:main;run") and appends it. Returns 0, -EINVAL (bad
 * SPEC, or more than CN_FMT_MAX_TRANSFORMS) with err set, or -ENOMEM. */
int cn_fmt_spec_add_transform(cn_fmt_spec *s, const char *text, cn_err *err);
/* Adds --where conditions "KEY=VALUE[,KEY=VALUE]" (keys: container, cgroup, pod, qos,
 * service, or their fleet label names). 0, -EINVAL with err set, or -ENOMEM. */
int cn_fmt_spec_add_where(cn_fmt_spec *s, const char *text, cn_err *err);
/* Sets the view and (func may be NULL: keep the current one) its F. 0 or -ENOMEM. */
int cn_fmt_spec_set_view(cn_fmt_spec *s, cn_agg_view view, const char *func);
/* Sets --last from its text (cn_common_parse_duration syntax). 0, -EINVAL or -ENOMEM. */
int cn_fmt_spec_set_last(cn_fmt_spec *s, const char *text);

/* Adds s's fields to a protocol request (docs/protocol.md "Queries"): the transforms as
 * SPEC strings, then every field that differs from the default, and "format" always. The
 * engine fields are read from s->query (transforms may be borrowed there). 0 or -ENOMEM. */
int cn_fmt_spec_to_json(const cn_fmt_spec *s, json_t *req);
/* Decodes the query fields of req into s (initialised by the caller, whose values stay
 * where req says nothing, e.g. the request's default format). Bounds: at most
 * CN_FMT_MAX_TRANSFORMS transforms, from/to in [0, 9e9] s, depth <= 1000000, min_percent
 * in [0, 100]. Returns 0, -EINVAL with err naming the bad field or SPEC, or -ENOMEM. */
int cn_fmt_spec_from_json(const json_t *req, cn_fmt_spec *s, cn_err *err);

/* The name tables (one each, for argv and the protocol alike). The parsers return 0 or
 * -EINVAL for an unknown name; the name functions return a static string ("?" for an
 * unknown value). Views use aggregate's names (cn_agg_view_name). */
int cn_fmt_format_parse(const char *name, cn_fmt_format *out);
const char *cn_fmt_format_name(cn_fmt_format f);
/* Every format name, for messages: "text, json, …, svg or canopy" into buf (always
 * NUL-terminated when size > 0, truncated if small). Returns the length the whole list
 * needs, as snprintf does. */
size_t cn_fmt_format_names(char *buf, size_t size);
/* The format an output file name implies (.json .folded .pb.gz .pb .speedscope.json
 * .firefox.json .trace.json .svg .canopy .txt). 0, or -ENOENT for any other extension. */
int cn_fmt_format_from_path(const char *path, cn_fmt_format *out);
int cn_fmt_view_parse(const char *name, cn_agg_view *out);
int cn_fmt_callers_mode_parse(const char *name, cn_agg_callers_mode *out);
const char *cn_fmt_callers_mode_name(cn_agg_callers_mode m);
int cn_fmt_group_by_parse(const char *name, cn_agg_group_by *out);
const char *cn_fmt_group_by_name(cn_agg_group_by g);

/* What the renderer needs besides the profile and the spec. Nothing is owned. */
typedef struct cn_fmt_render_opts {
    const char *title; /* headers: the file or session name */
    /* Live sessions add these header fields (text header, JSON) when session != NULL. */
    const char *session;
    const char *event;
    int64_t samples;
    int64_t lost;
    cn_fmt_unwind unwind; /* with session: the header's truncation summary, JSON "unwind" */
    const char *python;   /* with session: Python frames, "on" / "off (why)", or NULL */
    const char *cgroup;   /* with session: a cgroup session's directory (docs/cli-live.md
                             "Containers and cgroups"), or NULL */
    /* --last ends at now_ns when has_now (a live session's clock), else at the profile's
     * last sample. */
    bool has_now;
    int64_t now_ns;
    bool normalize; /* differential profiles: scale BASE to NEW's total (default true) */
    /* When not NULL, one line per note ("note: …\n", no prefix) is appended: a transform
     * PATH that names no call node path (docs/cli.md "Transforms"). NULL: not looked for. */
    cn_buf *notes;
    const cn_fmt_otlp_opts *otlp; /* --format otlp's resource attributes; NULL: none */
} cn_fmt_render_opts;

void cn_fmt_render_opts_init(cn_fmt_render_opts *o);

/* The one renderer: resolves spec's range against p (--last from opts' now or the last
 * sample; --from/--to from the start), checks the transform arguments against the
 * untransformed profile, runs the query and writes spec->format to out — a tree (text,
 * JSON, SVG), stacks (folded, pprof, speedscope, firefox), the lossless .canopy, the
 * estimated call timeline (spec->timeline, or chrome-trace: JSON, text, Chrome trace,
 * speedscope), or for a differential profile (cn_agg_is_diff) the differential tree (text,
 * JSON, SVG, folded, canopy). out receives partial bytes on error: callers buffer.
 * Returns 0, or negative errno with err set: -ENOENT for a function or library absent from
 * the profile, -EINVAL for a combination the format cannot show, -ENOMEM/-EIO for
 * resources (exit 1 rather than 2). */
int cn_fmt_render(cn_agg_profile *p, const cn_fmt_spec *spec, const cn_fmt_render_opts *opts,
                  FILE *out, cn_err *err);
/* The engine query of spec with its range resolved as cn_fmt_render does (for callers
 * that run other engine calls, e.g. lines). Pointers in *out borrow from spec. */
void cn_fmt_spec_resolve(const cn_agg_profile *p, const cn_fmt_spec *spec,
                         const cn_fmt_render_opts *opts, cn_agg_query *out);
/* `lines` for function F (docs/cli.md "canopy lines"): self weight per source line and
 * per address inside F after spec's range and transforms, as the lines JSON object
 * {"function", "lib"?, "kind"?, "file"?, "unit", "lines", "addresses"}. Returns 0 and *out (a new
 * reference), or negative errno with err set (-ENOENT: unknown transform argument or F). */
int cn_fmt_lines_json(cn_agg_profile *p, const cn_fmt_spec *spec, const cn_fmt_render_opts *opts,
                      const char *func, json_t **out, cn_err *err);
/* Whether spec can ask for a timeline: format text, json, chrome-trace or speedscope; no
 * view, no group-by. 0 or -EINVAL with err set (cn_fmt_render checks it too). */
int cn_fmt_timeline_check(const cn_fmt_spec *spec, cn_err *err);
/* Checks spec's transform arguments against p (unknown function or library: -ENOENT with
 * err set). */
int cn_fmt_spec_check(cn_agg_profile *p, const cn_fmt_spec *spec, cn_err *err);

#ifdef __cplusplus
}
#endif
#endif /* CN_FMT_H */
