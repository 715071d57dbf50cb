/* live_internal.h — what live/'s files say to each other, and nobody else sees.
 *
 * struct cn_live_session is defined here for the files that make up a session:
 * session.c (lifecycle, pump, info, accessors), ingest.c (samples into the profile),
 * symbols.c (frames to the symbolizer and answers back) and persist.c (.canopy save and
 * load). symbolizer.c never reads or writes its fields: it owns struct
 * cn_live_symbolizer and its registry of attached sessions (tag → session). A session
 * builds its own symbol requests and hands them over with cn_live__symbolizer_submit();
 * the symbolizer routes each answer back to its session's
 * cn_live__session_apply_symbols(). Names carry the cn_live__ prefix.
 */
#ifndef CN_LIVE_INTERNAL_H
#define CN_LIVE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cn_live.h"
#include "cn_sym.h"

/* ---- struct cn_live_session: read and written by session.c, ingest.c, symbols.c and
 * persist.c (never by symbolizer.c) ------------------------------------------------- */

#define PEND_SAMPLES 64   /* samples queued before a batched add */
#define PEND_REFS    8192 /* frames queued: room for 32 chains of CN_SMP_MAX_FRAMES */

/* What the symbolizer needs to know of a resource's object. */
/* A function range of a resource whose every address has one name (cn_sym_result's
 * range_lo): a new frame inside it is named without a lookup (symbols.c). */
typedef struct sym_range {
    uint64_t lo, hi; /* [lo, hi) in the resource's addresses (frame offsets) */
    char *name;      /* owned */
} sym_range;

typedef struct res_src {
    const cn_smp_object *obj; /* the sampler's object (owned by the sampler session) */
    sym_range *ranges;        /* sorted by lo, disjoint; owned (symbols.c) */
    size_t n_ranges, cap_ranges;
    char *jit_path; /* JIT: the perf map's path when the process shares our root
                       (owned; still readable after it exits), else NULL */
    bool has_owner; /* JIT: owner_uid is the process's uid, read when seen */
    uint32_t owner_uid;
    uint64_t jit_pass;    /* JIT: the retry pass that last measured its map (0: none) */
    int64_t jit_size;     /* JIT: the map's size then, or -1 */
    int64_t jit_mtime_ns; /* JIT: its modification time then */
} res_src;

/* A JIT frame whose perf map did not name it yet (docs/cli-live.md, "Symbols"). */
typedef struct jit_retry {
    int32_t frame;
    uint64_t map_bytes;   /* map size and modification time the last lookup used: retried */
    int64_t map_mtime_ns; /* once either differs (grown; or rewritten: a map left by an
                             earlier process of the same pid, which its successor rewrites
                             as it exits, to the same size when it wrote the same line) */
} jit_retry;

struct cn_live_session {
    char *id, *name, *event, *path; /* owned; path: the file last saved or loaded, or NULL */
    cn_live_kind kind;
    cn_live_state state;
    cn_live_state saved_state; /* SAVED: the state it had when written */
    pid_t pid;
    char comm[32];
    char *cgroup; /* SYSTEM in cgroup mode: its directory, or NULL */
    uid_t owner;
    uint32_t freq;
    char unwind[8];
    cn_smp_mode mode;  /* CPU: weights count samples; OFFCPU, WALL: nanoseconds */
    int64_t state_res; /* OFFCPU/WALL: the "[state]" pseudo-resource, else -1 */
    int64_t stop_res;  /* the "[unwind]" pseudo-resource once a stack needed it, else -1
                          (-2: it could not be made) */
    int64_t started_unix;
    char host[256];         /* this host's name: OTLP exports' host.name ("" unknown) */
    cn_fmt_otlp_opts otlp;  /* OTLP exports' resource attributes (opts.c) */
    int64_t start_mono;     /* CLOCK_MONOTONIC ns at start: the profile's time 0 */
    int64_t end_ns;         /* session time when sampling ended */
    int64_t duration_limit; /* > 0: stop after */
    int64_t retention_ns;
    int64_t last_fold_ns;      /* the last trim and compaction check (FOLD_EVERY_NS) */
    int64_t last_retention_ns; /* the last retention fold (retention_fold_due) */
    int64_t last_sample_ns;
    size_t max_memory;
    bool memory_limited;   /* samples are being refused (over the bound at the highest share) */
    bool hit_memory_bound; /* the bound was reached at least once */
    bool dirty;            /* changed since the last save */
    uint64_t changes;      /* bumped with dirty: a save made elsewhere (a forked writer) knows
                              whether the session changed since its snapshot */
    uint64_t samples, dropped, lost_saved, threads_saved;
    uint64_t compactions; /* cn_agg_compact passes run (cn_live_session_info) */
    double trim_share;    /* cn_agg_trim_folded's share; 0: never */
    int64_t trim_res;     /* the "[trim]" pseudo-resource once made, else -1 (-2: failed) */
    size_t trim_rows;     /* folded rows after the last trim: the next is due at twice */
    uint64_t trims;       /* trims that moved rows */
    uint64_t trim_raises; /* trim_share raised at the memory bound (cn_live__enforce_memory) */
    /* Threads that exited, by thread id (on_task): cn_live__trim folds their rows once
     * none is raw (cn_agg_fold_threads). gone_cap entries, false beyond. */
    bool *gone;
    size_t gone_cap;
    uint64_t gone_rows;   /* accumulator rows merged away by those folds */
    bool frames_due;      /* a trim left frames no stack uses: cn_live__compact_frames */
    int64_t last_trim_ns; /* CLOCK_MONOTONIC of the last trim pass (cn_live__trim) */
    uint64_t frames_removed, funcs_removed, strings_removed; /* by cn_live__compact_frames */
    double trimmed_weight; /* the folded weight under "[trimmed]" after the last one */
    uint64_t errors;       /* allocation failures that lost data (cn_live_session_info) */
    uint64_t user_stacks;  /* samples with user frames (cn_live_session_info) */
    cn_unwind_outcomes unwind_outcomes; /* how their unwinds ended */
    /* SAVED: the Python frames' state ("on", "off (why)") and counters when written, as
     * cn_live_session_info has them (docs/python.md); python_saved NULL: none recorded */
    char *python_saved;
    uint64_t py_saved[6]; /* registered, refused, samples, joined, no_record, mismatch */
    cn_smp_session *smp;
    cn_agg_profile *p;
    int32_t *obj_res; /* sampler object id -> resource, NO_RESOURCE or OBJ_UNMAPPED */
    size_t n_obj_res;
    res_src *res_obj; /* resource -> sampler object (and its perf map) */
    size_t n_res_obj;
    pid_t last_tid;
    int32_t last_thread;
    bool idle_named; /* pid 0's process name was set */
    bool replay;     /* records come from cn_live_session_feed (opts.replay_sample_type) */
    /* symbolization */
    cn_live_symbolizer *sym;   /* NULL: none (or it went away first) */
    uint64_t tag;              /* this session's tag in the symbolizer */
    size_t next_frame;         /* frames [0, next_frame) were submitted (or need none) */
    size_t next_py_frame;      /* frames [0, next_py_frame) were looked at for Python names */
    uint64_t sym_pending;      /* submitted, not answered yet */
    uint64_t sym_failed;       /* answered without a symbol (includes waiting JIT frames) */
    uint64_t sym_unresolvable; /* frames the symbolizer cannot take (no file to read) */
    cn_sym_request *reqs;      /* symbol requests being built (SUBMIT_BATCH, made on first
                                  use: on the heap, so canopyd's own stacks stay short) */
    size_t *req_idx;           /* their indexes into retry (retry_jit) */
    /* Frames named from their resource's ranges (res_src.ranges) in one symbolize pass,
     * and their names (SUBMIT_BATCH each, made with reqs) */
    cn_agg_frame_symbols *range_batch;
    cn_agg_symbol *range_syms;
    size_t range_bytes;    /* what every resource's ranges hold (bounded: symbols.c) */
    uint64_t sym_by_range; /* frames named from a range, without a lookup */
    jit_retry *retry;      /* unresolved JIT frames, retried when their map grows */
    size_t n_retry, cap_retry;
    int64_t last_retry_ns;
    uint64_t retry_pass; /* retry passes run (retry_jit), for res_src.jit_pass */
    bool retry_added;    /* JIT frames were queued for retry since the last pass */
    /* Samples delivered by the sampler but not yet in the profile: on_sample (ingest.c)
     * queues them here and cn_live__flush_samples() adds them with cn_agg_add_samples_refs()
     * when the queue fills and at the end of every read, so the queue is empty whenever the
     * owner's code runs (queries, save, info). pend[i].leaf_first points into pend_refs. */
    size_t npend, npend_refs;
    cn_agg_sample_refs pend[PEND_SAMPLES];
    cn_agg_frame_ref pend_refs[PEND_REFS];
};

/* ---- symbolizer.c, called by session.c --------------------------------------------- */

/* Registers s for answers: *tag is the session's tag in every request it submits.
 * Returns 0 or -ENOMEM. */
int cn_live__symbolizer_attach(cn_live_symbolizer *y, cn_live_session *s, uint64_t *tag);
/* Cancels tag's requests and forgets the session: later answers for it are dropped. */
void cn_live__symbolizer_detach(cn_live_symbolizer *y, uint64_t tag);
/* Queues n requests (copied) for the worker. 0, or negative errno when the worker's
 * queue is full or out of memory (nothing was queued: the caller retries later). */
int cn_live__symbolizer_submit(cn_live_symbolizer *y, const cn_sym_request *reqs, size_t n);
/* cn_sym_perfmap_size through y's symbol cache (its mount tables: no mountinfo read). */
int cn_live__symbolizer_perfmap_size(cn_live_symbolizer *y, const cn_sym_object *obj,
                                     uint64_t *size, int64_t *mtime_ns);

/* ---- symbols.c, called by symbolizer.c --------------------------------------------- */

/* Applies n answers (all for s, as tagged) to s's profile with as few cn_agg_regroup()
 * calls as memory allows. Answers that cannot be applied are counted (unsymbolized and
 * errors). Returns the number of frames that got symbols (>= 0). */
int cn_live__session_apply_symbols(cn_live_session *s, const cn_sym_answer *a, size_t n);
/* The symbolizer is going away before s (a host that broke the order of cn_live.h):
 * s stops submitting. */
void cn_live__session_detached(cn_live_session *s);

/* ---- session.c, called by persist.c --------------------------------------------------- */

/* A session with its id ("local" when NULL), its name (none when NULL or ""), an empty
 * profile and nothing else: cn_live_session_new() and cn_live_session_load() fill in the
 * rest. NULL on ENOMEM. Freed with cn_live_session_free(). */
cn_live_session *cn_live__session_alloc(const char *id, const char *name);
/* Sets s->host and s->otlp, what OTLP exports say of the host (opts.c). */
void cn_live__otlp_init(cn_live_session *s);

/* ---- ingest.c, called by session.c ---------------------------------------------------- */

/* The sampler's callbacks (arg: the session): samples, tasks, objects. */
extern const cn_smp_callbacks cn_live__smp_callbacks;
/* Adds the queued samples to the profile; empties the queue. */
void cn_live__flush_samples(cn_live_session *s);
/* OFFCPU/WALL: makes the state pseudo-frames. 0 or negative errno. */
int cn_live__state_frames(cn_live_session *s);
/* Applies the memory bound after samples were added. */
void cn_live__enforce_memory(cn_live_session *s);
/* Compacts the profile's tables (cn_agg_compact with flags) and counts it; a failure
 * (out of memory) changes nothing. */
void cn_live__compact(cn_live_session *s, unsigned flags);
/* Removes the frames and funcs no stack uses (cn_agg_compact_frames) when no symbol
 * request is in flight, renumbering the session's frame ids (watermarks, JIT retries);
 * otherwise frames_due stays set and the pump calls it again. */
void cn_live__compact_frames(cn_live_session *s);
/* Trims the folded rows' long tail when they doubled since the last trim (or force), then
 * compacts (stacks, then frames); true when rows moved. */
bool cn_live__trim(cn_live_session *s, bool force);

/* ---- symbols.c, called by session.c --------------------------------------------------- */

/* Resubmits the waiting JIT frames whose perf map has grown (at most every so often
 * unless force). */
void cn_live__retry_jit(cn_live_session *s, bool force);
/* Frees every resource's function ranges (res_src.ranges). */
void cn_live__ranges_clear(cn_live_session *s);
/* The profile's namer (cn_agg_frame_namer; ctx: the session): the name of the range of
 * res holding offset, or NULL. */
const char *cn_live__frame_namer(void *ctx, int32_t res, uint64_t offset);

#endif /* CN_LIVE_INTERNAL_H */
