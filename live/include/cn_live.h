/* cn_live.h — canopy's live sessions: the whole public API of live/.
 *
 * A live session is the sampler, the symbolizer and the aggregate engine wired together,
 * with no sockets and no event loop: canopyd (daemon/) hosts one per client request and
 * the CLI's in-process mode (client/inproc.c) hosts one for itself. A cn_live_session
 * samples one target (a PID with all its threads and future children, a child held
 * before exec for `run`, or the whole system) into one cn_agg_profile:
 *   perf rings → cn_smp (read records, unwind) → the session's callbacks → cn_agg (intern
 *   frames and stacks, add samples in batches) → new native frames → the shared
 *   cn_live_symbolizer (one cn_sym cache and worker thread for every session) → answers
 *   routed back to their session → cn_agg_regroup() (docs/calltree.md §4).
 * The owner polls cn_live_session_fds() (POLLIN) and cn_live_symbolizer_fd(), and calls
 * cn_live_session_pump() / cn_live_symbolizer_dispatch() when they are readable (or on a
 * timer: pump is cheap when nothing is there). Pump also applies the live window (raw
 * samples older than the retention are folded into the all-time tree with
 * cn_agg_fold_before; the tables are compacted when that left much spare, cn_agg_compact,
 * and once more when sampling ends), trims the all-time tree (its rare paths into
 * "[trimmed]", exited threads' rows into "NAME [exited]", then the frames, funcs and names
 * nothing uses any more: cn_agg_trim_folded, cn_agg_fold_threads, cn_agg_compact_frames),
 * the memory bound (reaching it folds and trims, raising the trim share while the tables do
 * not fit; reported in the info's `memory_limited`; only tables over it at the highest
 * share count further samples as dropped, never a crash), the duration, and notices the
 * target's exit. Queries run on the owner's thread between
 * pumps, on cn_live_session_profile().
 *
 * Ownership and threads: a session owns its profile, its sampler and its strings; the
 * symbolizer must outlive every session attached to it (free sessions first). Everything
 * here runs on the owner's thread except the symbolizer's worker, which never touches a
 * session: it receives copies of (object, address) requests and hands answers back
 * through a queue and an eventfd. Errors are negative errno values with a one-line
 * message in a cn_err. Allocation failures that lose data on the way (an object that
 * could not be mapped, symbol answers that could not be applied) are retried where that
 * makes sense and counted in the info's `errors` otherwise: never lost silently.
 */
#ifndef CN_LIVE_H
#define CN_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "cn_agg.h"
#include "cn_common.h"
#include "cn_fleet.h"
#include "cn_fmt.h"
#include "cn_smp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * The shared symbolizer: one cn_sym cache + worker for every session.
 */

typedef struct cn_live_symbolizer cn_live_symbolizer;

/* Starts the worker. max_memory, max_debug: the object cache's bounds on symbol tables and
 * on the debug data it reads (0 = cn_sym's defaults).
 * Returns 0 and *out, or negative errno with err set. */
int cn_live_symbolizer_new(size_t max_memory, size_t max_debug, cn_live_symbolizer **out,
                           cn_err *err);
/* Stops the worker and frees the cache; every session using it must be freed first.
 * Accepts NULL; returns NULL. */
cn_live_symbolizer *cn_live_symbolizer_free(cn_live_symbolizer *y);
/* Tests only: the worker pauses ns before each batch it resolves (0 = off). */
void cn_live_symbolizer_set_test_delay(cn_live_symbolizer *y, int64_t ns);
/* The fd to poll for POLLIN: answers are waiting. */
int cn_live_symbolizer_fd(const cn_live_symbolizer *y);
/* Holds the symbolizer's thread where it allocates nothing, until _resume, or false at
 * once when it is inside a lookup (try again when the fd is readable or at the next
 * tick): for a fork() under AddressSanitizer, whose allocator is not locked across fork
 * (cn_sym_worker_try_pause). Both accept NULL (true). */
bool cn_live_symbolizer_try_pause(cn_live_symbolizer *y);
void cn_live_symbolizer_resume(cn_live_symbolizer *y);
/* The object cache's figures (docs/cli-live.md, "Daemon memory"): objects loaded, their
 * heap bytes, the bytes of debug data they hold, evictions so far, debug data released,
 * libdw opened, compilation units indexed; the bounds on the first two, and the idle times
 * after which an object's libdw, then the whole object, is released. */
typedef struct cn_live_symbolizer_stats {
    size_t objects, heap_bytes, mapped_bytes;
    uint64_t evictions, debug_releases, debug_opens, debug_units;
    size_t max_heap_bytes, max_mapped_bytes;
    int64_t debug_idle_ns, symbols_idle_ns;
} cn_live_symbolizer_stats;
void cn_live_symbolizer_stats_get(const cn_live_symbolizer *y, cn_live_symbolizer_stats *out);
/* Takes every waiting answer and applies it to its session (cn_agg_regroup). Answers for
 * sessions that are gone are dropped. Returns the number of frames applied or -errno. */
int cn_live_symbolizer_dispatch(cn_live_symbolizer *y);
/* Submits what every session has not submitted yet, blocks until every submitted frame
 * is answered, then dispatches (end of `run`, shutdown, tests). timeout_ms < 0 = forever.
 * Returns 0 or -ETIMEDOUT. */
int cn_live_symbolizer_flush(cn_live_symbolizer *y, int timeout_ms);

/* ---------------------------------------------------------------------------------------
 * Sessions
 */

typedef enum cn_live_kind {
    CN_LIVE_ATTACH = 0, /* a running process */
    CN_LIVE_RUN,        /* a child held before exec: sampling starts at exec (enable_on_exec) */
    CN_LIVE_SYSTEM,     /* every CPU */
} cn_live_kind;

typedef enum cn_live_state {
    CN_LIVE_RUNNING = 0,
    CN_LIVE_EXITED,  /* the target exited; data kept */
    CN_LIVE_STOPPED, /* stopped by a request (or the duration elapsed) */
    CN_LIVE_SAVED,   /* loaded from a file; queryable, not sampling */
} cn_live_state;

const char *cn_live_kind_name(cn_live_kind k);   /* "attach", "run", "system" */
const char *cn_live_state_name(cn_live_state s); /* "running", "exited", "stopped", "saved" */

/* ---------------------------------------------------------------------------------------
 * A session's spec: everything that says what a session samples and how.
 *
 * One struct for every host and client, as cn_fmt_spec is for queries: the CLI fills it
 * from argv (client/sampling_opts.c), sends it to canopyd with cn_live_session_opts_to_json,
 * canopyd decodes it with cn_live_session_opts_from_json (docs/protocol.md "attach, run,
 * system"), and both canopyd and the CLI's in-process host hand it to cn_live_session_new.
 * The one rule set is cn_live_session_opts_validate (docs/cli.md "SAMPLING options"): the
 * decoder applies it, the CLI applies it once argv is parsed. A new option is a field here,
 * a line in each of opts.c's codec and validator, and its argv spelling.
 */

#define CN_LIVE_FREQ_DEFAULT     99     /* Hz, attach and system */
#define CN_LIVE_FREQ_RUN         999    /* Hz, run and temporary sessions */
#define CN_LIVE_FREQ_MAX         100000 /* Hz */
#define CN_LIVE_STACK_SIZE_MIN   8      /* bytes of user stack per sample */
#define CN_LIVE_STACK_SIZE_MAX   65528  /* perf_event_attr.sample_stack_user's limit */
#define CN_LIVE_STACK_SIZE_ALIGN 8      /* the kernel wants a multiple of 8 */
#define CN_LIVE_NAME_MAX         64     /* bytes of a session name */
#define CN_LIVE_EVENT_MAX        64     /* bytes of an event name */
/* Characters of an event name. */
#define CN_LIVE_EVENT_CHARS "abcdefghijklmnopqrstuvwxyz0123456789-_:/=,"

typedef struct cn_live_session_opts {
    /* The target. */
    cn_live_kind kind;
    pid_t pid; /* ATTACH / RUN: > 0 */
    /* SYSTEM: a cgroup directory (absolute path under a cgroup v2 mount, or a v1
     * perf_event one): only its tasks and its descendants' are sampled (perf's cgroup
     * mode), also tasks that join later; NULL = every task. Borrowed like the strings
     * below. */
    const char *cgroup;
    /* Strings are borrowed (argv, the request's JSON) and copied by cn_live_session_new. */
    const char *name;  /* optional display name; see _validate for its rules */
    const char *id;    /* session id (the host's, never on the wire); NULL = "local" */
    const char *event; /* NULL = auto */
    uint32_t freq;     /* Hz, 1..CN_LIVE_FREQ_MAX (init: CN_LIVE_FREQ_DEFAULT) */
    cn_smp_unwind unwind;
    uint32_t stack_size; /* 0 = sampler default (adaptive in auto) */
    bool no_kernel;
    bool no_python;        /* no Python frames (docs/python.md): the native view */
    int64_t duration_ns;   /* > 0: stop after this long; 0 = no limit */
    int64_t retention_ns;  /* raw-sample window; 0 = default 10 min; < 0 = keep everything */
    cn_smp_mode mode;      /* CPU (default), OFFCPU or WALL: then weights are ns */
    uint64_t min_block_ns; /* OFFCPU/WALL: shorter off-CPU intervals are dropped */
    /* canopyd's fleet push (docs/fleet.md): the session's labels (owned: validated by
     * cn_fleet_labels_set, freed by _clear) and whether it stays out of the push. */
    cn_fleet_labels labels;
    bool no_fleet;
    /* Set by the host, never from a request. */
    size_t max_memory; /* bytes of profile tables; 0 = default 256 MiB */
    /* Folded rows below this share of the folded total are trimmed into "[trimmed]"
     * (cn_agg_trim_folded, docs/calltree.md §4.6); 0 = default CN_LIVE_TRIM_DEFAULT, < 0 =
     * never. */
    double trim_share;
    uid_t owner;         /* who may see it (daemon); informative in-process */
    uint32_t ring_pages; /* 0 = sampler default */
    /* ATTACH/RUN for a caller that checked access first (canopyd): the image it checked
     * and its rule, re-applied before sampling is enabled (cn_smp_config.image and
     * may_profile; docs/security.md). Zero/NULL: no re-check. */
    cn_smp_image image;
    cn_smp_may_profile_fn may_profile;
    void *may_profile_arg;
    /* Unwind tables shared with the host's other sessions (cn_smp_config.cache; must
     * outlive the session), or NULL: the session's own. */
    cn_smp_cache *unwind_cache;
    /* Nonzero: a replay (bench/bench_replay.c), no perf events: records in this
     * sample_type's layout (a capture taken with cn_smp_callbacks.record on this machine)
     * come from cn_live_session_feed() instead (cn_smp_session_replay). kind and pid are
     * then informative only, and the samples' times (the capture's clock, before this
     * session's start) all count as the session's start: for trees, not timelines. */
    uint64_t replay_sample_type;
} cn_live_session_opts;

#define CN_LIVE_TRIM_DEFAULT 1e-4 /* 0.01 % of the folded samples */
/* The share a session at its memory bound raises its trim to, at most: beyond it, samples
 * are refused (dropped) instead. */
#define CN_LIVE_TRIM_MAX 1e-2
void cn_live_session_opts_init(cn_live_session_opts *o);
/* Frees what o owns (its labels) and re-initialises it. Accepts NULL. */
void cn_live_session_opts_clear(cn_live_session_opts *o);
/* The one rule set (the target apart: its pid is the host's to check): freq 1..CN_LIVE_FREQ_MAX;
 * event 1.. CN_LIVE_EVENT_MAX bytes of CN_LIVE_EVENT_CHARS; stack_size 0 or a multiple of
 * CN_LIVE_STACK_SIZE_ALIGN from CN_LIVE_STACK_SIZE_MIN to _MAX; duration_ns, min_block_ns
 * >= 0; a name of 1..CN_LIVE_NAME_MAX printable bytes, without '/', not starting with '-',
 * not all digits (a PID) and not spelled like a session id (s<digits>: it would shadow
 * that session, docs/security.md); no label "host" (canopyd sets it). Returns 0 or
 * -EINVAL with err naming the field ("freq", "name", ...) and the rule. */
int cn_live_session_opts_validate(const cn_live_session_opts *o, cn_err *err);
/* Adds o's request fields to req (docs/protocol.md "attach, run, system"): "pid" when >
 * 0, "freq", then every field that differs from the default; durations as integer ns
 * ("duration_ns", "min_block_ns", "retention_ns"). 0 or -ENOMEM. */
int cn_live_session_opts_to_json(const cn_live_session_opts *o, json_t *req);
/* Decodes req's request fields into o (initialised by the caller, whose values stay where
 * req says nothing: the host's defaults), requires "pid" (> 0) unless o->kind is SYSTEM,
 * then validates. Strings borrow from req. The duration text fields that older clients
 * send ("duration", "min_block", "retention": "30s") are still read; a request giving
 * both forms of one field is refused. Returns 0, -EINVAL with err set (what was decoded
 * stays owned by o), or -ENOMEM. */
int cn_live_session_opts_from_json(const json_t *req, cn_live_session_opts *o, cn_err *err);

typedef struct cn_live_session cn_live_session;

/* Creates and starts a session: opens the perf events (for RUN with enable_on_exec; the
 * caller releases the held child afterwards). sym may be NULL (no symbolization: frames
 * stay `LIB+0xOFFSET`). Returns 0 and *out, or negative errno with err set
 * (-ESRCH no such process, -EACCES/-EPERM, -ENOENT unknown event, ...). */
int cn_live_session_new(const cn_live_session_opts *o, cn_live_symbolizer *sym,
                        cn_live_session **out, cn_err *err);
/* A SAVED session from the profile of a .canopy file at path (read by the caller, e.g.
 * with cn_fmt_import_file: live/ reads no files): meta keys written by
 * cn_live_session_save restore the id, name, owner, target, counters. Takes p in every
 * case (freed on failure). Returns 0 and *out, or negative errno with err set. */
int cn_live_session_load(cn_agg_profile *p, const char *path, cn_live_session **out, cn_err *err);
/* Stops sampling (if running) and frees everything; accepts NULL; returns NULL. */
cn_live_session *cn_live_session_free(cn_live_session *s);

/* The ring fds (POLLIN) while running; 0 otherwise. The array belongs to the session. */
size_t cn_live_session_fds(const cn_live_session *s, const int **fds);
/* Drains the rings into the profile, submits new frames to the symbolizer, applies the
 * retention window, the memory bound and the duration, and notices target exit (state
 * EXITED). Never blocks. Returns the number of samples added (>= 0) or negative errno. */
int cn_live_session_pump(cn_live_session *s);
/* Nanoseconds until a running session's duration ends (0: due now), or -1 when it has no
 * limit or is not running: when the owner must pump it next at the latest. */
int64_t cn_live_session_due_ns(const cn_live_session *s);
/* A replay session (opts.replay_sample_type): feeds len bytes of captured records
 * (whole records) through the sampler into the profile and hands new frames to the
 * symbolizer, as pump does for records read from the rings. Returns the samples added
 * (>= 0), or -EINVAL (not a replay session or not running), or another negative errno. */
int cn_live_session_feed(cn_live_session *s, const void *buf, size_t len);
/* Stops sampling (delivers what the rings still hold); state STOPPED unless it was
 * EXITED. Idempotent. Returns 0 or negative errno. */
int cn_live_session_stop(cn_live_session *s);
/* Hands the symbolizer the frames it has not been given yet (pump and stop do it; this
 * retries after the worker's queue was full, e.g. before a final save). No-op without a
 * symbolizer. */
void cn_live_session_symbolize(cn_live_session *s);
/* Frames not handed to the symbolizer yet (its queue was full): 0 once every frame was
 * submitted, always 0 without a symbolizer. */
size_t cn_live_session_unsubmitted(const cn_live_session *s);

typedef struct cn_live_session_info {
    const char *id, *name; /* owned by the session */
    cn_live_kind kind;
    cn_live_state state;
    pid_t pid;          /* 0 for SYSTEM */
    char comm[32];      /* the target's name at attach */
    const char *cgroup; /* SYSTEM in cgroup mode: the directory (owned by the session), or NULL */
    uid_t owner;
    const char *event; /* "cpu-clock", … (owned by the session) */
    uint32_t freq;
    const char *unwind;   /* "fp", "dwarf", "auto" */
    const char *mode;     /* "cpu", "off-cpu", "wall" */
    int64_t started_unix; /* wall-clock seconds at start */
    int64_t duration_ns;  /* time sampled so far (or in total when not running) */
    uint64_t samples;     /* samples added to the profile (all time) */
    uint64_t lost;        /* records the kernel dropped */
    /* Records by cause (the sampler's; 0 for a saved session): LOST records the kernel
     * wrote (each carries a count of lost), times it throttled an event for sampling too
     * often, malformed records skipped, samples dropped as twins while auto's reopened
     * events overlapped the old ones. */
    uint64_t lost_events, throttles, bad_records, twins_dropped;
    uint64_t dropped;      /* samples dropped because the memory bound was reached */
    uint64_t threads;      /* threads seen */
    uint64_t unsymbolized; /* frames without a name yet: sym_pending + unresolved +
                              unresolvable (anonymous-memory frames are not counted) */
    uint64_t sym_pending;  /* frames waiting for the symbolizer: submitted and not answered
                              yet, or not submitted yet (its queue was full) */
    uint64_t unresolved;   /* frames answered without a symbol (no symbol covers the
                              address, the file could not be read; JIT frames waiting for
                              their perf map to name them) */
    uint64_t unresolvable; /* frames the symbolizer cannot take at all (their mapping's
                              file could not be found): never submitted */
    uint64_t sym_by_range; /* frames named without a lookup, inside a function an earlier
                              answer named whole (an object without DWARF) */
    uint64_t errors;       /* data lost to allocation failures after retrying: frames
                              whose object could not be mapped (they stay bare
                              addresses), symbol answers not applied (also counted in
                              unsymbolized) */
    uint64_t user_stacks;  /* samples delivered with user-space frames */
    /* How the user-space unwinds of these samples ended (docs/cli-live.md, "Session
     * counters"); they sum to user_stacks. common/'s struct, so that formats/ renders it
     * as it is (cn_fmt_unwind). */
    cn_unwind_outcomes unwind_outcomes;
    /* The sampler's unwinder counters (0 for a saved session): stacks unwound from their
     * copy (dwarf, auto's fallback), of those wholly through compiled CFI rules or with
     * libunwind, and user addresses outside every known mapping. */
    uint64_t dwarf_unwinds, cfi_unwinds, libunwind_unwinds, unmapped;
    uint64_t libunwind_why[CN_SMP_FB__COUNT]; /* libunwind_unwinds by cause (cn_smp_fallback) */
    /* The stack copy the sampler asks for now (bytes; 0 without copies or for a saved
     * session), whether it adapts (auto without --stack-size: docs/perf-sampler.md), and
     * how often it shrank and grew back; stack_chain_off: the copy alone finishes the
     * stacks, the kernel's user frame-pointer chain is not asked for. */
    uint64_t stack_copy, stack_shrinks, stack_grows;
    bool stack_adaptive, stack_chain_off;
    /* cgroup ids the sampler looked up (each new one the samples carried) and the
     * /proc/PID/cgroup reads it made (without ids: each new process and every 10 s). */
    uint64_t cgroup_lookups, cgroup_reads;
    /* OFFCPU/WALL (0 otherwise): context switches sampled, switch-ins or -outs without
     * their other half (lost records, threads waiting since before the start), intervals
     * under min_block_ns. */
    uint64_t switches, offcpu_unmatched, offcpu_short, offcpu_waiting;
    /* Python frames (docs/python.md): "on" or "off (why)" (cn_smp_session_python), NULL for
     * a saved session; CPython processes registered and refused, samples of registered
     * processes, of those joined with their interpreter record, without one, and joined
     * samples whose eval-loop frames and Python segments differed in number. */
    const char *python;
    uint64_t py_registered, py_refused, py_samples, py_joined, py_no_record, py_mismatch;
    size_t memory;        /* profile bytes */
    uint64_t compactions; /* compaction passes over the profile's tables (cn_agg_compact) */
    /* Trims of the folded rows (cn_agg_trim_folded) and the weight now under "[trimmed]"
     * (samples, or ns in OFFCPU/WALL); the share they use (0: never), raised trim_raises
     * times at the memory bound (from the configured share up to CN_LIVE_TRIM_MAX). */
    uint64_t trims, trim_raises;
    uint64_t exited_rows; /* folded rows of exited threads merged into "NAME [exited]" ones */
    /* frames and funcs removed once the trims left no stack using them, and the strings
     * no table named any more */
    uint64_t frames_removed, funcs_removed, strings_removed;
    double trimmed_weight, trim_share;
    bool memory_limited; /* the memory bound was reached */
    bool refusing;       /* over the bound at CN_LIVE_TRIM_MAX: samples are being dropped */
} cn_live_session_info;

/* Fills *out (strings borrow from s). Hosts build their descriptions from it (canopyd's
 * JSON: cn_d_session_json, daemon/session_json.c). */
void cn_live_session_info_get(const cn_live_session *s, cn_live_session_info *out);

/* Cheap accessors, for hosts that scan many sessions (the info above costs a sampler
 * counter read). Strings are owned by the session and live as long as it does. */
const char *cn_live_session_id(const cn_live_session *s);
const char *cn_live_session_name(const cn_live_session *s); /* NULL when unnamed */
cn_live_kind cn_live_session_kind(const cn_live_session *s);
cn_live_state cn_live_session_state(const cn_live_session *s);
pid_t cn_live_session_pid(const cn_live_session *s); /* 0 for SYSTEM */
uid_t cn_live_session_owner(const cn_live_session *s);
int64_t cn_live_session_started(const cn_live_session *s);  /* wall-clock seconds */
uint64_t cn_live_session_samples(const cn_live_session *s); /* as in the info */
/* The file it was last saved to or loaded from; NULL if none. */
const char *cn_live_session_path(const cn_live_session *s);
/* Whether the session changed since it was last saved (a host's checkpointing). */
bool cn_live_session_dirty(const cn_live_session *s);

/* The session's profile (owned by the session; only touch it on the owner's thread,
 * between pumps). */
cn_agg_profile *cn_live_session_profile(cn_live_session *s);
/* Nanoseconds of session time now (the profile's time base: samples carry time since
 * start); for `--last`. */
int64_t cn_live_session_now(const cn_live_session *s);
/* The renderer's header for s (the one place a session becomes a cn_fmt_render_opts, for
 * canopyd's queries and the CLI's in-process tree and top): title (NULL: the name, else
 * the id), session id, event, samples, lost, unwind outcomes, and the one rule for
 * `--last` (docs/cli.md): it counts back from the session's clock, cn_live_session_now —
 * now while it samples, the end of sampling once stopped, exited or saved. Strings
 * borrow from s (and title). Initialises *o first. */
void cn_live_session_render_opts(const cn_live_session *s, const char *title,
                                 cn_fmt_render_opts *o);

/* Writes the session as a lossless .canopy file atomically: path.tmp, fsync, rename,
 * fsync of the directory. The session's identity and counters go into the file's
 * metadata; path becomes cn_live_session_path() and the session is clean unless it is
 * still running. Returns 0 or negative errno with err set. */
int cn_live_session_save(cn_live_session *s, const char *path, cn_err *err);

/* Saving elsewhere: a host that writes the session from a snapshot (canopyd forks a
 * writer, docs/security.md "Queries and saves off the sampling path") reads the change
 * counter when it takes the snapshot, and once that copy is written to path calls
 * _mark_saved(path, counter): path becomes cn_live_session_path() and the session is
 * clean unless it is running or changed since the snapshot. 0 or -ENOMEM. */
uint64_t cn_live_session_changes(const cn_live_session *s);
int cn_live_session_mark_saved(cn_live_session *s, const char *path, uint64_t changes);

#ifdef __cplusplus
}
#endif
#endif /* CN_LIVE_H */
