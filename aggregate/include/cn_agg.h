/* cn_agg.h — canopy's call-tree engine: the whole public API of aggregate/.
 *
 * aggregate turns samples into call trees by *function*. Data flows one way:
 * producers (the sampler through the daemon, or a file importer) intern strings,
 * resources (libraries), funcs and frames, build stacks as an append-only prefix tree of
 * frames, and append samples {stack, time, weight, thread}. A query (time range, thread
 * filter, ordered transform stack, view) is then run over those tables: frames are grouped
 * into funcs, the transforms rewrite the func-level stack table (docs/calltree.md §2), and the
 * view builds a cn_agg_tree with self and total weights (docs/calltree.md §1.4, §3, §6).
 * Symbolication arrives later through cn_agg_regroup(), which changes which func (or
 * inline chain of funcs) each frame belongs to; trees and held paths are re-derived and
 * remapped (docs/calltree.md §4). File formats (importers and writers: folded, .cpuprofile,
 * perf script, pprof, JSON, text, SVG …) live in formats/ (cn_fmt.h) and use only this
 * header; the engine's own lossless snapshot, .canopy, is here (cn_agg_write_canopy).
 *
 * aggregate knows nothing of perf, ELF, sockets or threads: a frame is (resource, offset)
 * or a func, a func is a name. Every table is struct-of-arrays with dense int32 ids,
 * -1 meaning "none". A cn_agg_profile is owned by one thread at a time; nothing here
 * locks. Errors are negative errno values; parsers also fill a cn_err with a one-line
 * message naming the file and line or byte offset.
 */
#ifndef CN_AGG_H
#define CN_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cn_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Profile tables (docs/calltree.md §1.1)
 */

typedef struct cn_agg_profile cn_agg_profile;

/* What a sample's weight counts. Display values are weight × cn_agg_profile_scale(). */
typedef enum cn_agg_unit {
    CN_AGG_UNIT_SAMPLES = 0,
    CN_AGG_UNIT_MS,
    CN_AGG_UNIT_US,
    CN_AGG_UNIT_NS,
    CN_AGG_UNIT_EVENTS,
} cn_agg_unit;

typedef enum cn_agg_resource_kind {
    CN_AGG_RES_LIBRARY = 0, /* an ELF object (shared library or executable) */
    CN_AGG_RES_KERNEL,      /* [kernel] or a [module] */
    CN_AGG_RES_JIT,         /* [jit]: code named by a perf map */
    CN_AGG_RES_URL,         /* a script URL (JavaScript) */
    CN_AGG_RES_OTHER,
    CN_AGG_RES_PYTHON, /* a Python source file: its functions' frames (docs/python.md) */
} cn_agg_resource_kind;

/* A new, empty profile (unit samples, scale 1). NULL on ENOMEM. Free with _free. */
cn_agg_profile *cn_agg_profile_new(void);
/* Frees everything the profile owns; accepts NULL; returns NULL. */
cn_agg_profile *cn_agg_profile_free(cn_agg_profile *p);

/* Strings are interned: equal bytes, equal id. Returns id >= 0 or -ENOMEM. The pointer
 * returned by _get stays valid until the profile is freed or cn_agg_compact_frames() runs
 * (which removes the strings no table names and moves the rest). */
int32_t cn_agg_string(cn_agg_profile *p, const char *s, size_t len);
int32_t cn_agg_cstring(cn_agg_profile *p, const char *s);
const char *cn_agg_string_get(const cn_agg_profile *p, int32_t id);

/* Resources (libraries). Interned by identity key (a build-id, or path+inode+mtime;
 * NULL = by name). name is the display name (file name, `[kernel]`, a URL); path, when
 * known, the file the symbolizer should read. Returns id >= 0 or negative errno. */
int32_t cn_agg_resource(cn_agg_profile *p, const char *name, const char *identity, const char *path,
                        cn_agg_resource_kind kind);
size_t cn_agg_resource_count(const cn_agg_profile *p);
const char *cn_agg_resource_name(const cn_agg_profile *p, int32_t res);
const char *cn_agg_resource_identity(const cn_agg_profile *p, int32_t res); /* or NULL */
const char *cn_agg_resource_path(const cn_agg_profile *p, int32_t res);     /* or NULL */
cn_agg_resource_kind cn_agg_resource_kind_of(const cn_agg_profile *p, int32_t res);
/* The marker a kind is written with where a format carries one (the JSON outputs'
 * "kind", the fleet's kinds column): "python" for CN_AGG_RES_PYTHON; NULL for the other
 * kinds, which go unmarked (a library's name tells them apart, docs/cli.md "Names").
 * _parse is its inverse over n bytes of s: true and *out for a known marker. */
const char *cn_agg_resource_kind_marker(cn_agg_resource_kind kind);
bool cn_agg_resource_kind_parse(const char *s, size_t n, cn_agg_resource_kind *out);
/* The resource of a Python source file, named as the sampler names it (docs/python.md):
 * interned by "[py]" + file, named by file's base name, path file when it holds a '/';
 * an empty file (or "[python]") is the unknown file "[python]". For importers that meet
 * a Python function by its file. Returns id >= 0 or negative errno. */
int32_t cn_agg_python_resource(cn_agg_profile *p, const char *file);

/* Funcs: interned by (name, resource, file). file may be NULL, line 0 = unknown
 * (1-based start line of the function, when known). Returns id >= 0 or negative errno. */
int32_t cn_agg_func(cn_agg_profile *p, const char *name, int32_t resource, const char *file,
                    int32_t line);
size_t cn_agg_func_count(const cn_agg_profile *p);
const char *cn_agg_func_name(const cn_agg_profile *p, int32_t func);
int32_t cn_agg_func_name_id(const cn_agg_profile *p, int32_t func);
int32_t cn_agg_func_resource(const cn_agg_profile *p, int32_t func);
const char *cn_agg_func_file(const cn_agg_profile *p, int32_t func); /* or NULL */
int32_t cn_agg_func_line(const cn_agg_profile *p, int32_t func);

/* Frames. A frame is a distinct code location seen on a stack.
 * - cn_agg_frame(): a frame of a known func (imported profiles): interned by
 *   (func, resource, address, line); address -1 when there is none.
 * - cn_agg_native_frame(): a native frame by (resource, file offset) before symbols: gets
 *   a placeholder func named `LIB+0xOFFSET` (or `0xADDRESS` when resource is -1) until
 *   cn_agg_regroup() assigns real funcs. Interned by (resource, offset).
 * Returns the frame id >= 0 or negative errno. */
int32_t cn_agg_frame(cn_agg_profile *p, int32_t func, int32_t resource, int64_t address,
                     int32_t line);
int32_t cn_agg_native_frame(cn_agg_profile *p, int32_t resource, uint64_t offset);
/* A name already known for a new native frame (the owner's cache of function ranges,
 * live/): returns the function's name for (resource, offset), or NULL for the
 * placeholder. The name is copied before the next call. When set, cn_agg_native_frame
 * (and the batched ingest) asks it for each frame it makes, and a named frame gets the
 * func cn_agg_regroup() would give it for that name, with no placeholder made. */
typedef const char *(*cn_agg_frame_namer)(void *ctx, int32_t resource, uint64_t offset);
void cn_agg_set_frame_namer(cn_agg_profile *p, cn_agg_frame_namer namer, void *ctx);
size_t cn_agg_frame_count(const cn_agg_profile *p);
int32_t cn_agg_frame_resource(const cn_agg_profile *p, int32_t frame);
int64_t cn_agg_frame_address(const cn_agg_profile *p, int32_t frame); /* -1 if none */
int32_t cn_agg_frame_line(const cn_agg_profile *p, int32_t frame);    /* 0 if unknown */
/* The frame's func chain, outer first (length 1 unless symbolication found inlines).
 * Returns the chain length and sets *funcs to an array owned by the profile, valid until
 * the next cn_agg_regroup(). */
size_t cn_agg_frame_funcs(const cn_agg_profile *p, int32_t frame, const int32_t **funcs);

/* Stacks: an append-only prefix tree, interned by (prefix, frame); prefix -1 for a root.
 * Invariant: prefix < id. Returns id >= 0 or negative errno. */
int32_t cn_agg_stack(cn_agg_profile *p, int32_t prefix, int32_t frame);
size_t cn_agg_stack_count(const cn_agg_profile *p);
int32_t cn_agg_stack_prefix(const cn_agg_profile *p, int32_t stack);
int32_t cn_agg_stack_frame(const cn_agg_profile *p, int32_t stack);
/* The funcs of a whole stack, LEAF FIRST, each frame's inline chain expanded innermost
 * first (what a leaf-first func path shows). Writes min(length, cap) funcs to out and
 * returns the length (call again with a larger buffer when it exceeds cap); 0 for a
 * stack that is not an id. One call instead of three accessors per frame (writers). */
size_t cn_agg_stack_funcs(const cn_agg_profile *p, int32_t stack, int32_t *out, size_t cap);

/* A native frame reference as the sampler produces it. */
typedef struct cn_agg_frame_ref {
    int64_t resource; /* a resource id; -1: no file mapping (anonymous memory). 64 bits so
                         the struct has no padding and is hashed as it is */
    uint64_t offset;  /* file offset, or the absolute address when resource is -1 */
} cn_agg_frame_ref;

/* The stack for a whole native callchain, LEAF FIRST (as unwinders produce them).
 * A cache keyed by the whole sequence sits in front of per-frame interning, so a
 * repeated stack costs one hash and one compare. Returns the leaf stack id (>= 0), or
 * negative errno; n == 0 is -EINVAL. */
int32_t cn_agg_stack_from_refs(cn_agg_profile *p, const cn_agg_frame_ref *leaf_first, size_t n);

/* One sample of a batch: its native callchain (leaf first, as for _stack_from_refs) and
 * what cn_agg_add_sample() takes. n == 0 is a sample without a stack (stack -1); refs
 * may then be NULL. The batch does not keep the pointers. */
typedef struct cn_agg_sample_refs {
    const cn_agg_frame_ref *leaf_first;
    size_t n;
    int64_t time_ns;
    double weight;
    int32_t thread; /* -1 = unknown */
} cn_agg_sample_refs;

/* Adds the samples of batch[0 .. n) in order, each as cn_agg_stack_from_refs() +
 * cn_agg_add_sample() would (same stack ids), but faster: the callchains of a group of
 * entries are hashed first and their cache slots prefetched, so the cache misses of a
 * group overlap instead of following one another. For a daemon draining a ring.
 * Returns 0 when all were added, or negative errno: -EINVAL for an invalid entry (refs
 * NULL with n > 0, n > UINT32_MAX, a resource that is not -1 or a resource id, a thread
 * that is not -1 or a thread id), -ENOMEM, -ENOSPC. On error the samples added are
 * exactly batch[0 .. k) and batch[k] is the entry that failed (batch[k + 1 ..) were not
 * looked at), where k = cn_agg_sample_count() after the call minus before it; frames and
 * stacks of batch[k]'s callchain may have been interned. */
int cn_agg_add_samples_refs(cn_agg_profile *p, const cn_agg_sample_refs *batch, size_t n);
/* The same for frame ids, ROOT FIRST (importers). */
int32_t cn_agg_stack_from_frames(cn_agg_profile *p, const int32_t *root_first, size_t n);

/* Threads: interned by (pid, tid). name is the thread's comm (may be NULL, and may be
 * renamed later with _set_name). Returns id >= 0 or negative errno. */
int32_t cn_agg_thread(cn_agg_profile *p, int32_t pid, int32_t tid, const char *name);
int cn_agg_thread_set_name(cn_agg_profile *p, int32_t thread, const char *name);
/* The thread (pid, tid) if it is interned, else -1 (never interns). */
int32_t cn_agg_thread_find(const cn_agg_profile *p, int32_t pid, int32_t tid);
/* The process name (pid's comm) for --group-by process. */
int cn_agg_process_set_name(cn_agg_profile *p, int32_t pid, const char *name);
size_t cn_agg_thread_count(const cn_agg_profile *p);
int32_t cn_agg_thread_pid(const cn_agg_profile *p, int32_t thread);
int32_t cn_agg_thread_tid(const cn_agg_profile *p, int32_t thread);
const char *cn_agg_thread_name(const cn_agg_profile *p, int32_t thread); /* or NULL */
const char *cn_agg_process_name(const cn_agg_profile *p, int32_t pid);   /* or NULL */
/* A process's cgroup path (/proc/PID/cgroup's, common/cgroup.c), the last one set: what
 * --group-by container|cgroup|pod|service and --where read for its threads' samples. */
int cn_agg_process_set_cgroup(cn_agg_profile *p, int32_t pid, const char *path);
const char *cn_agg_process_cgroup(const cn_agg_profile *p, int32_t pid); /* or NULL */

/* Samples. time_ns: nanoseconds since the profile's start (non-decreasing per thread;
 * the table is kept sorted by time for range queries: an out-of-order append is
 * accepted and sorted lazily). stack -1 = no stack (occupies time, weighs nothing in
 * trees). thread -1 = unknown. Weight may be negative (differential profiles).
 * Returns 0 or -ENOMEM. */
int cn_agg_add_sample(cn_agg_profile *p, int32_t stack, int64_t time_ns, double weight,
                      int32_t thread);
/* An alternative stack for sample i used only by the timeline (the .cpuprofile
 * missing-sample fix, docs/calltree.md §5.2 step 6, and DevTools' GC, (program) and (idle)
 * samples, §5.5, change calls but not self/total). stack -1: the sample has no path on the
 * timeline (it ends every open call). Returns 0, -ERANGE or -ENOMEM. _timeline_stack
 * returns the sample's stack if none was set. */
int cn_agg_sample_set_timeline_stack(cn_agg_profile *p, size_t i, int32_t stack);
int32_t cn_agg_sample_timeline_stack(const cn_agg_profile *p, size_t i);
size_t cn_agg_sample_count(const cn_agg_profile *p);
int32_t cn_agg_sample_stack(const cn_agg_profile *p, size_t i);
int64_t cn_agg_sample_time(const cn_agg_profile *p, size_t i);
double cn_agg_sample_weight(const cn_agg_profile *p, size_t i);
int32_t cn_agg_sample_thread(const cn_agg_profile *p, size_t i);

/* Retention (live sessions): samples with time < before_ns are folded into the profile's
 * all-time accumulator (per stack and thread) and removed from the sample table.
 * All-time queries (no time range) still count them; ranged queries cannot.
 * Returns the number of samples folded, or negative errno. */
int64_t cn_agg_fold_before(cn_agg_profile *p, int64_t before_ns);
/* Rows of the all-time accumulator (one per folded stack and thread). */
size_t cn_agg_folded_rows(const cn_agg_profile *p);
/* Bytes the profile's tables hold (for memory bounds and `status`). */
size_t cn_agg_profile_memory(const cn_agg_profile *p);

/* Compaction (live sessions, after a retention fold): the tables shrunk to what a query
 * can reach, without changing any answer. Removes stack rows that no sample, timeline
 * stack or accumulator row reaches (the rest are renumbered in order, prefix < id still
 * holding, and every stack id the profile holds is rewritten), the whole-callchain
 * cache's entries for stacks no raw sample uses (all of them with
 * CN_AGG_COMPACT_FINAL: no sample will be added again), the holes regroup leaves in the
 * frames' chain pool, and the spare capacity of columns and indexes grown for an
 * earlier peak. Frames, funcs, strings, resources and threads keep their ids. STACK IDS
 * (and the pointers of cn_agg_frame_funcs) from before the call are void after it.
 * Returns 0, or -ENOMEM with nothing changed; fills *st when st is not NULL. */
#define CN_AGG_COMPACT_FINAL 1u
typedef struct cn_agg_compact_stats {
    size_t stacks_before, stacks_after;
    size_t cached_before, cached_after; /* whole-callchain cache entries */
    size_t bytes_before, bytes_after;   /* cn_agg_profile_memory() */
    size_t frames_before, frames_after, funcs_before, funcs_after; /* _compact_frames */
    size_t strings_removed;                                        /* _compact_frames */
} cn_agg_compact_stats;
int cn_agg_compact(cn_agg_profile *p, unsigned flags, cn_agg_compact_stats *st);
/* The frames no stack uses (after cn_agg_compact removed the stacks nothing reaches; a
 * trim leaves many) and the funcs only they named, removed; so are the rename rows from
 * the placeholder names of removed frames, and then every string no table names any
 * more. Kept: every frame a stack uses, every pseudo-frame (resource kind OTHER), and each
 * kept native frame's placeholder func. Survivors keep their order, but FRAME, FUNC AND
 * STRING IDS from before the call are void after it (and the pointers of
 * cn_agg_frame_funcs and cn_agg_string_get and the names built on them); a caller holding
 * frame ids (a live session's symbol requests) calls it only when none is in flight, and
 * renumbers its own through *frame_map (when not NULL: malloc'd, the old frame count's
 * entries, new id or -1; NULL when no frame was removed). Resources, stacks and threads
 * keep their ids. Returns 0, or -ENOMEM with nothing changed (the strings' pass, last, is
 * skipped alone when its memory cannot be had); fills *st (frames, funcs, strings, bytes)
 * when not NULL. */
int cn_agg_compact_frames(cn_agg_profile *p, int32_t **frame_map, cn_agg_compact_stats *st);
/* True when cn_agg_compact() is worth its pass (O(stacks + samples + accumulator)): the
 * callchain cache has doubled since the last compaction, or the sample columns hold four
 * times the rows left after a fold. Cheap: a live session asks after every fold. */
bool cn_agg_compact_due(const cn_agg_profile *p);

/* Trimming (live sessions, before a compaction): the folded (all-time) rows' long tail
 * moved into its callers, marked (aggregate/trim.c, docs/calltree.md §4.7). With sub(s) the
 * folded weight of stack s and all below it, an accumulator row whose stack's sub is below
 * share x the folded total moves to (a, frame): a is its deepest ancestor at or above that
 * (-1: none), frame the caller's marker frame; rows meeting on one (stack, thread) merge.
 * Folded nodes at or above the threshold keep their running weight, threads their totals;
 * raw samples are untouched. Stacks left unreached are for cn_agg_compact. share <= 0
 * trims nothing. STACK IDS of the accumulator change. Returns 0, -EINVAL (frame not a
 * frame, share >= 1) or -ENOMEM with the accumulator unchanged; fills *st when not NULL. */
typedef struct cn_agg_trim_stats {
    size_t rows_before, rows_after, rows_moved;
    double weight_moved; /* absolute, of the rows moved by this trim */
    double weight_under; /* absolute, of every row under the marker after it */
    double limit;        /* the sub weight a stack needed to stay */
} cn_agg_trim_stats;
int cn_agg_trim_folded(cn_agg_profile *p, double share, int32_t frame, cn_agg_trim_stats *st);

/* Folding exited threads (live sessions, aggregate/trim.c): the accumulator rows of every
 * thread t < n_gone with gone[t] set and no raw sample left move to one thread per
 * (process name, cgroup) of such threads, pid = tid = CN_AGG_GONE_PID_BASE + k (above any
 * kernel pid: pid_max <= 2^22), named after the process and with its cgroup; rows meeting
 * on one (stack, thread) merge. The folded threads are reused by later folds. THREAD IDS
 * of the accumulator change; raw samples and the thread table's rows stay. Returns 0 or
 * -ENOMEM/-ENOSPC with the accumulator unchanged; *rows_folded (may be NULL): the rows
 * merged away. */
#define CN_AGG_GONE_PID_BASE 0x40000000
int cn_agg_fold_threads(cn_agg_profile *p, const bool *gone, size_t n_gone, size_t *rows_folded);

/* Metadata. */
void cn_agg_profile_set_unit(cn_agg_profile *p, cn_agg_unit unit);
cn_agg_unit cn_agg_profile_unit(const cn_agg_profile *p);
const char *cn_agg_unit_name(cn_agg_unit unit); /* "samples", "ms", … */
/* Display values are weight × scale (e.g. a .cpuprofile's average interval in ms). */
void cn_agg_profile_set_scale(cn_agg_profile *p, double scale);
double cn_agg_profile_scale(const cn_agg_profile *p);
/* Free-form string metadata (event, freq, command, start wall time, …). Copies both. */
int cn_agg_meta_set(cn_agg_profile *p, const char *key, const char *value);
const char *cn_agg_meta_get(const cn_agg_profile *p, const char *key); /* or NULL */
size_t cn_agg_meta_count(const cn_agg_profile *p);
const char *cn_agg_meta_key(const cn_agg_profile *p, size_t i);

/* ---------------------------------------------------------------------------------------
 * Symbolication reshapes the tree (docs/calltree.md §4)
 */

/* One element of an inline chain, outer first. file may be NULL, line 0 = unknown. */
typedef struct cn_agg_symbol {
    const char *name;
    const char *file;
    int32_t line; /* source line of this frame's location inside this function */
} cn_agg_symbol;

/* Symbol results for one frame: its new func chain (outer function first, then the
 * functions inlined into it; depth >= 1), and optionally the symbol table's name for the
 * address when it differs from chain[0].name (a clone such as foo.part.0, an alias): the
 * frame's "symbol func", which `no_inline` queries show instead of chain[0]
 * (docs/calltree.md §4.5). NULL: chain[0] is the symbol table's name. */
typedef struct cn_agg_frame_symbols {
    int32_t frame;
    const cn_agg_symbol *chain;
    size_t depth;
    const char *symbol;
} cn_agg_frame_symbols;

/* Applies a batch of symbol results: each frame's func chain (and symbol func: set, or
 * none when symbol is NULL) is replaced; funcs are found or created by (name, frame's
 * resource, file; a symbol func takes chain[0]'s file). Old funcs whose frames all agree
 * get an entry in the profile's rename map (old func name → new names, the §4.2 step 4
 * consensus map), which cn_agg_remap_transform() uses on held paths and transform
 * parameters. Totals never change. Returns 0 or negative errno (then nothing changed). */
int cn_agg_regroup(cn_agg_profile *p, const cn_agg_frame_symbols *batch, size_t n);

/* ---------------------------------------------------------------------------------------
 * Transforms (docs/calltree.md §2, "Canopy's operations")
 */

typedef enum cn_agg_tf_kind {
    CN_AGG_TF_FOCUS = 0,           /* focus:PATH */
    CN_AGG_TF_FOCUS_INVERTED,      /* focus-inverted:PATH (leaf first) */
    CN_AGG_TF_FOCUS_FUNC,          /* focus-func:F */
    CN_AGG_TF_FOCUS_SELF,          /* focus-self:F */
    CN_AGG_TF_FOCUS_LIB,           /* focus-lib:LIB */
    CN_AGG_TF_MERGE_NODE,          /* merge-node:PATH */
    CN_AGG_TF_MERGE,               /* merge:F */
    CN_AGG_TF_DROP,                /* drop:F */
    CN_AGG_TF_HIDE,                /* hide:PATH */
    CN_AGG_TF_PRUNE,               /* prune:PATH */
    CN_AGG_TF_COLLAPSE,            /* collapse:F */
    CN_AGG_TF_COLLAPSE_DIRECT_REC, /* collapse-direct-rec:F */
    CN_AGG_TF_COLLAPSE_REC,        /* collapse-rec:F */
    CN_AGG_TF_COLLAPSE_LIB,        /* collapse-lib:LIB */
    CN_AGG_TF_COLLAPSE_ALL_REC,    /* collapse-all-rec (no argument) */
    CN_AGG_TF_SEARCH,              /* search:TEXT (samples with a matching function) */
    CN_AGG_TF__COUNT
} cn_agg_tf_kind;

/* A transform as the user wrote it. Function names and path elements are matched by
 * displayed name (a name matches every func shown with it). */
typedef struct cn_agg_transform {
    cn_agg_tf_kind kind;
    char *arg;   /* owned: the ARG after the first ':' (F, LIB or PATH), "" if none */
    char **path; /* owned: arg split at ';' (PATH kinds; also 1 element for F/LIB) */
    size_t path_len;
} cn_agg_transform;

/* Parses "NAME:ARG" (split at the first ':'; ARG byte for byte, no trimming).
 * Returns 0, or -EINVAL with err naming the SPEC. Release with _transform_clear. */
int cn_agg_transform_parse(const char *spec, cn_agg_transform *out, cn_err *err);
void cn_agg_transform_clear(cn_agg_transform *t);
/* Deep copy. 0 or -ENOMEM. */
int cn_agg_transform_copy(const cn_agg_transform *src, cn_agg_transform *dst);
/* "NAME:ARG" (malloc'ed; caller frees) or NULL on ENOMEM. */
char *cn_agg_transform_format(const cn_agg_transform *t);
const char *cn_agg_tf_name(cn_agg_tf_kind kind);
bool cn_agg_tf_takes_path(cn_agg_tf_kind kind);

/* Checks that a function or library argument occurs somewhere in the untransformed
 * profile (docs/cli.md: otherwise exit 2). PATH arguments are never an error here.
 * Returns 0 or -ENOENT with err naming the SPEC. */
int cn_agg_transform_check(const cn_agg_profile *p, const cn_agg_transform *t, cn_err *err);

/* Rewrites names in a held transform (or path) after symbolication: each name that
 * the rename map knows is replaced by its new name(s) (§4.3). Returns 1 if something
 * changed, 0 if not, negative errno on failure. */
int cn_agg_remap_transform(const cn_agg_profile *p, cn_agg_transform *t);
/* Entries of the rename map (0: symbolication renamed nothing, no held name can change). */
size_t cn_agg_rename_count(const cn_agg_profile *p);

/* Maps a held call node path (names, root first) through one pushed transform, per the
 * transform's path mapping (§2). *out is malloc'ed (caller frees each and the array);
 * *out_len 0 means "gone". Returns 0 or negative errno. */
int cn_agg_map_path(const cn_agg_transform *t, char *const *path, size_t len, char ***out,
                    size_t *out_len);

/* ---------------------------------------------------------------------------------------
 * Queries and views
 */

typedef enum cn_agg_view {
    CN_AGG_VIEW_TREE = 0,
    CN_AGG_VIEW_INVERTED,
    CN_AGG_VIEW_CALLEES,
    CN_AGG_VIEW_CALLERS,
    CN_AGG_VIEW_FUNCTIONS,
} cn_agg_view;

typedef enum cn_agg_callers_mode {
    CN_AGG_CALLERS_TOTAL = 0,
    CN_AGG_CALLERS_SELF,
} cn_agg_callers_mode;

typedef enum cn_agg_group_by {
    CN_AGG_GROUP_NONE = 0,
    CN_AGG_GROUP_PROCESS,
    CN_AGG_GROUP_THREAD,
    CN_AGG_GROUP_STATE, /* [running], [blocked], [preempted]: the thread's state, from the
                           pseudo-frame ending off-CPU stacks (docs/cli.md, "Modes") */
    /* From the process's cgroup (cn_agg_process_cgroup, common/cgroup.c): a root
     * "KEY=VALUE", "KEY=(none)" for processes without one */
    CN_AGG_GROUP_CONTAINER,
    CN_AGG_GROUP_CGROUP,
    CN_AGG_GROUP_POD,
    CN_AGG_GROUP_SERVICE,
} cn_agg_group_by;

/* A --where condition on a cgroup key (container=ID prefix, cgroup=PATH, pod=UID,
 * qos=CLASS, service=UNIT): conditions on one key are ORed, on different keys ANDed. */
typedef struct cn_agg_where {
    cn_cgroup_key key;
    const char *value;
} cn_agg_where;

/* The thread-state pseudo-frames' names, one spelling for the tree: live/ ends off-CPU
 * stacks with BLOCKED or PREEMPTED, and --group-by state makes them its group roots, the
 * stacks without one going under RUNNING. */
#define CN_AGG_STATE_RUNNING   "[running]"
#define CN_AGG_STATE_BLOCKED   "[blocked]"
#define CN_AGG_STATE_PREEMPTED "[preempted]"

/* Everything a query asks for. Initialise with cn_agg_query_init(). Nothing is owned. */
typedef struct cn_agg_query {
    const cn_agg_transform *transforms; /* applied in order */
    size_t n_transforms;
    cn_agg_view view;
    const char *view_func; /* F for CALLEES / CALLERS */
    cn_agg_callers_mode callers_mode;
    cn_agg_group_by group_by;
    int64_t from_ns;           /* inclusive; INT64_MIN = from the start */
    int64_t to_ns;             /* exclusive; INT64_MAX = to the end */
    int32_t tid;               /* -1 = every thread */
    int32_t pid;               /* -1 = every process */
    const cn_agg_where *where; /* n_where conditions on the processes' cgroups */
    size_t n_where;
    bool no_inline; /* inline frames fold into their outer function: each frame counts as
                       the first func of its chain, the symbol table's (docs/calltree.md
                       §4.5); false keeps the chain's inline funcs as call nodes */
} cn_agg_query;

void cn_agg_query_init(cn_agg_query *q);
/* Whether q's thread filters (tid, pid, where) keep a thread's samples (-1: unknown
 * thread, kept only when there is no filter). */
bool cn_agg_query_keeps_thread(const cn_agg_profile *p, const cn_agg_query *q, int32_t thread);

/* One node of a result tree. Children are linked in output order (|total| descending,
 * ties by name ascending). */
typedef struct cn_agg_node {
    int32_t func;   /* func id in the profile */
    int32_t parent; /* node index or -1 */
    int32_t first_child;
    int32_t next_sibling;
    double total; /* in weight units (multiply by the scale to display) */
    double self;
    int32_t merged_stacks; /* collapse-all-rec only, else 0 */
    int32_t recursions;    /* collapse-all-rec only, else 0 */
} cn_agg_node;

/* One row of the function list (§1.7). */
typedef struct cn_agg_func_row {
    int32_t func;
    double self;
    double total;
} cn_agg_func_row;

/* A query's result. Owns its arrays; refers to the profile's funcs by id (the profile
 * must outlive it). */
typedef struct cn_agg_tree {
    cn_agg_view view;
    cn_agg_callers_mode callers_mode;
    double total;       /* weight of the samples remaining after transforms */
    int32_t first_root; /* first root node (linked through next_sibling), -1 if empty */
    cn_agg_node *nodes;
    size_t n_nodes;
    cn_agg_func_row *functions; /* FUNCTIONS view only, sorted by self desc, then name */
    size_t n_functions;
    int64_t call_sites;        /* CALLEES view: distinct call sites of F */
    bool has_recursion_counts; /* collapse-all-rec was applied */
} cn_agg_tree;

/* Runs a query. The profile is not const: --group-by interns synthetic funcs
 * ("comm [pid]", "name [tid]"). Unknown function/library names in transforms are NOT
 * checked here (see cn_agg_transform_check). Returns 0 and *out (free with
 * cn_agg_tree_free), or negative errno with err set. */
int cn_agg_query_run(cn_agg_profile *p, const cn_agg_query *q, cn_agg_tree **out, cn_err *err);
cn_agg_tree *cn_agg_tree_free(cn_agg_tree *t);

/* Per-line and per-address self weight inside function F (`canopy lines`, §4.5): the
 * samples (after the query) whose innermost func is named F, grouped by their leaf
 * frame's source line and by its address. Arrays malloc'ed (caller frees), sorted by key.
 * Returns 0, -ENOENT if F occurs nowhere, or negative errno. */
typedef struct cn_agg_line_row {
    int64_t key; /* line number, or address (file offset) */
    double self;
} cn_agg_line_row;
int cn_agg_lines(cn_agg_profile *p, const cn_agg_query *q, const char *func,
                 cn_agg_line_row **lines, size_t *n_lines, cn_agg_line_row **addrs, size_t *n_addrs,
                 cn_err *err);

/* ---------------------------------------------------------------------------------------
 * Estimated call timeline (docs/calltree.md §5.5 without trace events)
 */

typedef struct cn_agg_call {
    int32_t func;
    int32_t tid;
    int32_t depth;
    int64_t start_ns;
    int64_t dur_ns;
} cn_agg_call;

/* From one thread's (or, tid -1, each thread's) time-ordered samples, after the query's
 * transforms and range: a call starts at the first sample that shows it and ends at the
 * first that no longer does; calls open after the last sample end at its time.
 * *calls is malloc'ed (caller frees). Returns 0 or negative errno. */
int cn_agg_timeline(cn_agg_profile *p, const cn_agg_query *q, cn_agg_call **calls, size_t *n_calls,
                    cn_err *err);

/* An activity graph (canopy web): adds to w[0..n) the weight of q's samples that survive
 * its transforms (and its range and thread filters), in n equal time buckets over
 * [0, end_ns); samples without a time are not counted. Returns 0 or negative errno. */
int cn_agg_activity(cn_agg_profile *p, const cn_agg_query *q, int64_t end_ns, double *w, size_t n,
                    cn_err *err);

/* A view's name as the JSON tree and the protocol spell it ("tree", "inverted", "callees",
 * "callers", "functions"); "tree" for an unknown value. A static string. */
const char *cn_agg_view_name(cn_agg_view v);

/* ---------------------------------------------------------------------------------------
 * Raw samples of a query (for writers that need frame stacks: pprof, speedscope)
 */

/* One visited sample: its frame stack (>= 0), thread (-1 = unknown), time (-1 for a row
 * of the all-time accumulator), weight, and count (1 for a sample; 0 for an accumulator
 * row, whose sample count is not kept). A negative return stops the walk. */
typedef int (*cn_agg_sample_fn)(void *ctx, int32_t stack, int32_t thread, int64_t time_ns,
                                double weight, int64_t count);

/* Visits, in time order (arrival order if sorting ran out of memory), every sample with a
 * stack that passes q's time range and tid/pid filters (q's transforms, view and
 * --group-by are NOT applied), then, when q has no time range, every row of the retention
 * accumulator that passes the filters. Sorts the sample table first. Returns 0 or the
 * callback's first negative result. */
int cn_agg_for_each_sample(cn_agg_profile *p, const cn_agg_query *q, cn_agg_sample_fn fn,
                           void *ctx);

/* True when native frame `frame` still carries its placeholder func (`LIB+0xOFFSET`,
 * see cn_agg_native_frame): no symbol is known for it yet. */
bool cn_agg_frame_is_placeholder(const cn_agg_profile *p, int32_t frame);

/* ---------------------------------------------------------------------------------------
 * Bulk loading (importers that learn a sample's time or weight after adding it)
 */

/* Rewrites sample i's time or weight (i indexes the table as it is now: appends keep
 * their order until the table is sorted). A time change may leave the table unsorted;
 * the next query (or cn_agg_samples_sort) re-sorts it. Returns 0 or -ERANGE. */
int cn_agg_sample_set_time(cn_agg_profile *p, size_t i, int64_t time_ns);
int cn_agg_sample_set_weight(cn_agg_profile *p, size_t i, double weight);
/* Sorts the sample table by time now (stable: equal times keep their order), so that
 * sample index order is time order. Returns 0 or -ENOMEM (then the order is unchanged). */
int cn_agg_samples_sort(cn_agg_profile *p);

/* ---------------------------------------------------------------------------------------
 * The lossless .canopy snapshot (canopy_file.c, docs/canopy-format.md)
 */

/* Writes the whole profile (tables, samples, metadata, rename map, accumulator) as a
 * gzipped .canopy file. Returns 0 or negative errno (-EIO, -ENOMEM). */
int cn_agg_write_canopy(const cn_agg_profile *p, FILE *out);
/* True when data (already decompressed) starts with the .canopy magic line. */
bool cn_agg_canopy_sniff(const char *data, size_t len);
/* Reads a decompressed .canopy text into a new profile, id for id the one written.
 * name is used in messages. Returns 0 and *out (free with cn_agg_profile_free), or
 * negative errno with err "NAME:LINE: what" (-EINVAL for bad content). */
int cn_agg_canopy_read(const char *data, size_t len, const char *name, cn_agg_profile **out,
                       cn_err *err);

/* ---------------------------------------------------------------------------------------
 * Differential profiles (diff.c; their writers are in formats/, cn_fmt.h)
 */

/* A differential profile holds two sides in one set of tables, the representation the
 * three-column folded importer also produces: metadata "diff" = "1", BASE's samples on
 * thread "base" (pid 1, tid 1) and NEW's on thread "new" (pid 2, tid 2), raw weights.
 * cn_agg_diff_profile() builds one from two profiles: each side's query is run (its
 * range and thread filters; transforms too, though the usual way is to pass none and
 * give the transforms to cn_agg_diff_run) and each call node with self weight becomes
 * one stack of funcs, matched across sides by (name, library, file). Both sides must
 * have the same unit (-EINVAL otherwise); weights are converted to NEW's scale.
 * Returns 0 and *out (free with cn_agg_profile_free) or negative errno with err set. */
int cn_agg_diff_profile(cn_agg_profile *base, const cn_agg_query *qbase, cn_agg_profile *newp,
                        const cn_agg_query *qnew, cn_agg_profile **out, cn_err *err);
/* True when p is a differential profile (metadata diff=1 and both threads present). */
bool cn_agg_is_diff(const cn_agg_profile *p);
/* The tids of the two sides' threads (metadata diff.base_tid / diff.new_tid; 1 and 2 when
 * absent). */
void cn_agg_diff_sides(const cn_agg_profile *p, int32_t *base_tid, int32_t *new_tid);

/* Per node (or function row) values of a differential result: the BASE side already
 * multiplied by the normalizing factor. */
typedef struct cn_agg_diff_vals {
    double base_total, base_self;
    double new_total, new_self;
} cn_agg_diff_vals;

/* A differential result. tree->nodes[i].total/self are NEW − BASE (normalized); children
 * are ordered by |total| descending, ties by name; every merged call path is present
 * (writers omit zero nodes without shown children, docs/cli.md). Owns everything. */
typedef struct cn_agg_diff {
    cn_agg_tree *tree;
    cn_agg_diff_vals *nodes;     /* tree->n_nodes entries */
    cn_agg_diff_vals *functions; /* tree->n_functions entries (FUNCTIONS view) */
    double base_sum, new_sum;    /* sides' totals after transforms, before normalizing */
    double factor;               /* new_sum / base_sum when normalizing (1 if base_sum 0) */
    bool normalized;
} cn_agg_diff;

/* Runs q (transforms, view, range) on both sides of differential profile d and merges the
 * two results by call path (by func for the FUNCTIONS view). q's tid/pid are ignored.
 * normalize scales BASE to NEW's total (docs/calltree.md §1.1: weights may be negative).
 * Returns 0 and *out (free with cn_agg_diff_free) or negative errno with err set
 * (-EINVAL if d is not differential). */
int cn_agg_diff_run(cn_agg_profile *d, const cn_agg_query *q, bool normalize, cn_agg_diff **out,
                    cn_err *err);
cn_agg_diff *cn_agg_diff_free(cn_agg_diff *r);

#ifdef __cplusplus
}
#endif
#endif /* CN_AGG_H */
