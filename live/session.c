/* session.c — one live (or saved) profiling session: its lifecycle and its accessors.
 *
 * A session is made (cn_live_session_new: the sampler with ingest.c's callbacks, the
 * symbolizer's tag) or loaded (persist.c), pumped (the rings drained into the profile,
 * the retention window, the memory bound, new frames to the symbolizer, the duration, the
 * target's exit), stopped and freed here. The work is in the files beside it: ingest.c
 * (samples into the profile), symbols.c (frames to the symbolizer and its answers back),
 * persist.c (.canopy files); struct cn_live_session is in live_internal.h. canopyd's JSON
 * description of a session is the daemon's (daemon/session_json.c), built from
 * cn_live_session_info.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "live_internal.h"

#define DEFAULT_RETENTION_NS (600LL * 1000000000)
#define DEFAULT_MAX_MEMORY   ((size_t)256 << 20)
#define FOLD_EVERY_NS        1000000000LL
/* Raw samples older than the retention are folded at most every retention / this (the
 * pump looks at most every FOLD_EVERY_NS): a fold moves the window's samples down their
 * columns, 19 MB for a busy machine's 10-minute window at 999 Hz (~1.2 ms here); the
 * window holds up to 1/64 more than its retention in between. */
#define RETENTION_FOLD_DIV 64

const char *cn_live_kind_name(cn_live_kind k)
{
    switch (k) {
    case CN_LIVE_ATTACH:
        return "attach";
    case CN_LIVE_RUN:
        return "run";
    case CN_LIVE_SYSTEM:
        return "system";
    }
    return "?";
}

const char *cn_live_state_name(cn_live_state s)
{
    switch (s) {
    case CN_LIVE_RUNNING:
        return "running";
    case CN_LIVE_EXITED:
        return "exited";
    case CN_LIVE_STOPPED:
        return "stopped";
    case CN_LIVE_SAVED:
        return "saved";
    }
    return "?";
}

/* ---- lifecycle --------------------------------------------------------------------- */

/* The process's comm ("" when it is gone). */
static void read_comm(pid_t pid, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    buf[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    if (fgets(buf, (int)size, f))
        buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

cn_live_session *cn_live__session_alloc(const char *id, const char *name)
{
    cn_live_session *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->id = strdup(id ? id : "local");
    s->name = name && *name ? strdup(name) : NULL;
    s->p = cn_agg_profile_new();
    s->last_tid = -1;
    s->last_thread = -1;
    s->state_res = -1;
    s->stop_res = -1;
    s->trim_res = -1;
    cn_live__otlp_init(s);
    if (!s->id || (name && *name && !s->name) || !s->p)
        return cn_live_session_free(s);
    return s;
}

int cn_live_session_new(const cn_live_session_opts *o, cn_live_symbolizer *sym,
                        cn_live_session **out, cn_err *err)
{
    int r;
    cn_live_session *s = cn_live__session_alloc(o->id, o->name);
    if (!s)
        return -ENOMEM;
    cn_agg_set_frame_namer(s->p, cn_live__frame_namer, s);
    s->kind = o->kind;
    s->pid = o->kind == CN_LIVE_SYSTEM ? 0 : o->pid;
    s->owner = o->owner;
    s->freq = o->freq ? o->freq : CN_LIVE_FREQ_DEFAULT;
    s->mode = o->mode;
    s->duration_limit = o->duration_ns;
    s->retention_ns = o->retention_ns ? o->retention_ns : DEFAULT_RETENTION_NS;
    s->max_memory = o->max_memory ? o->max_memory : DEFAULT_MAX_MEMORY;
    s->trim_share = o->trim_share < 0 ? 0 : o->trim_share ? o->trim_share : CN_LIVE_TRIM_DEFAULT;
    if (s->pid)
        read_comm(s->pid, s->comm, sizeof(s->comm));
    if (o->kind == CN_LIVE_SYSTEM && o->cgroup && !(s->cgroup = strdup(o->cgroup))) {
        r = cn_err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }

    cn_smp_config cfg = {
        .target = o->replay_sample_type       ? CN_SMP_TARGET_NONE
                  : o->kind == CN_LIVE_SYSTEM ? CN_SMP_TARGET_SYSTEM
                                              : CN_SMP_TARGET_PID,
        .pid = s->pid,
        .cgroup = s->cgroup,
        .event = o->event,
        .freq = s->freq,
        .unwind = o->unwind,
        .stack_size = o->stack_size,
        .no_kernel = o->no_kernel,
        .no_python = o->no_python,
        .enable_on_exec = o->kind == CN_LIVE_RUN,
        .ring_pages = o->ring_pages,
        .mode = o->mode,
        .min_block_ns = o->min_block_ns,
        .image = o->image,
        .may_profile = o->may_profile,
        .may_profile_arg = o->may_profile_arg,
        .cache = o->unwind_cache,
    };
    r = cn_smp_session_new(&cfg, &cn_live__smp_callbacks, s, &s->smp);
    if (r < 0) {
        cn_err_set(err, 0, "sampler: %s", strerror(-r));
        goto fail;
    }
    s->start_mono = cn_common_now_ns();
    s->started_unix = (int64_t)time(NULL);
    r = cn_smp_session_start(s->smp, err);
    if (r < 0)
        goto fail;
    s->replay = o->replay_sample_type != 0;
    if (s->replay && (r = cn_smp_session_replay(s->smp, o->replay_sample_type)) < 0) {
        cn_err_set(err, r, "sampler: cannot replay records of sample_type 0x%" PRIx64,
                   o->replay_sample_type);
        goto fail;
    }
    /* A feed-only sampler opened no event: the replayed capture's is not recorded. */
    const char *event = cn_smp_session_event(s->smp);
    s->event = strdup(event ? event : "replay");
    if (!s->event) {
        r = -ENOMEM;
        goto fail;
    }
    snprintf(s->unwind, sizeof(s->unwind), "%s", cn_smp_unwind_name(cn_smp_session_unwind(s->smp)));
    /* Off-CPU and wall weights are nanoseconds (docs/cli.md, "Modes"). */
    cn_agg_profile_set_unit(s->p,
                            s->mode == CN_SMP_MODE_CPU ? CN_AGG_UNIT_SAMPLES : CN_AGG_UNIT_NS);
    cn_agg_meta_set(s->p, "event", s->event);
    cn_agg_meta_set(s->p, "mode", cn_smp_mode_name(s->mode));
    /* The canopy that recorded it (a saved session keeps it when a later canopy loads it). */
    cn_agg_meta_set(s->p, "canopy.version", CANOPY_VERSION);
    /* The start and the frequency go with the profile from the start, as persist.c saves
     * them, so every export of a live session has them (the Firefox Profiler's startTime
     * and interval), not only a saved one. */
    char num[32];
    snprintf(num, sizeof(num), "%" PRId64, s->started_unix);
    cn_agg_meta_set(s->p, "canopy.session.started", num);
    snprintf(num, sizeof(num), "%d", (int)s->freq);
    cn_agg_meta_set(s->p, "freq", num);
    if (s->mode != CN_SMP_MODE_CPU && (r = cn_live__state_frames(s)) < 0) {
        cn_err_set(err, r, "out of memory");
        goto fail;
    }
    s->state = CN_LIVE_RUNNING;
    s->dirty = true;
    s->changes++;
    if (sym) {
        r = cn_live__symbolizer_attach(sym, s, &s->tag);
        if (r < 0) {
            cn_err_set(err, r, "symbolizer: out of memory");
            goto fail;
        }
        s->sym = sym;
    }
    *out = s;
    return 0;
fail:
    cn_live_session_free(s);
    return r;
}

cn_live_session *cn_live_session_free(cn_live_session *s)
{
    if (!s)
        return NULL;
    if (s->sym)
        cn_live__symbolizer_detach(s->sym, s->tag);
    if (s->smp) {
        cn_smp_session_stop(s->smp);
        cn_smp_session_free(s->smp);
    }
    cn_agg_profile_free(s->p);
    free(s->obj_res);
    cn_live__ranges_clear(s);
    for (size_t i = 0; i < s->n_res_obj; i++)
        free(s->res_obj[i].jit_path);
    free(s->res_obj);
    free(s->range_batch);
    free(s->range_syms);
    free(s->retry);
    free(s->gone);
    free(s->reqs);
    free(s->req_idx);
    free(s->id);
    free(s->name);
    free(s->cgroup);
    free(s->event);
    free(s->path);
    free(s->python_saved);
    free(s);
    return NULL;
}

size_t cn_live_session_fds(const cn_live_session *s, const int **fds)
{
    if (s->state != CN_LIVE_RUNNING || !s->smp) {
        *fds = NULL;
        return 0;
    }
    return cn_smp_session_fds(s->smp, fds);
}

int64_t cn_live_session_now(const cn_live_session *s)
{
    if (s->state == CN_LIVE_RUNNING)
        return cn_common_now_ns() - s->start_mono;
    return s->end_ns;
}

static void finish(cn_live_session *s, cn_live_state state)
{
    if (s->state != CN_LIVE_RUNNING)
        return;
    if (s->smp)
        cn_smp_session_stop(s->smp); /* delivers what the rings still held */
    cn_live__flush_samples(s);
    cn_live__compact(s, CN_AGG_COMPACT_FINAL); /* no sample comes after: the cache goes */
    s->end_ns = cn_common_now_ns() - s->start_mono;
    s->state = state;
    s->dirty = true;
    s->changes++;
    cn_live_session_symbolize(s);
    cn_live__retry_jit(s, true);
}

/* Whether the samples older than the retention are to be folded now (session time now;
 * asked at most every FOLD_EVERY_NS). */
static bool retention_fold_due(const cn_live_session *s, int64_t now)
{
    return s->retention_ns > 0 && now > s->retention_ns && cn_agg_sample_count(s->p) > 0 &&
           now - s->last_retention_ns >= s->retention_ns / RETENTION_FOLD_DIV;
}

int cn_live_session_pump(cn_live_session *s)
{
    if (s->state != CN_LIVE_RUNNING || !s->smp)
        return 0;
    uint64_t before = s->samples;
    int r = cn_smp_session_read(s->smp);
    cn_live__flush_samples(s); /* even after an error: what was delivered is queued */
    if (r < 0)
        return r;
    int64_t now = cn_common_now_ns() - s->start_mono;
    if (s->samples != before)
        s->dirty = true;
    s->changes++;
    if (now - s->last_fold_ns >= FOLD_EVERY_NS) {
        s->last_fold_ns = now;
        if (retention_fold_due(s, now)) {
            s->last_retention_ns = now;
            cn_agg_fold_before(s->p, now - s->retention_ns);
        }
        if (!cn_live__trim(s, false) && cn_agg_compact_due(s->p))
            cn_live__compact(s, 0);
    }
    cn_live__enforce_memory(s);
    if (s->frames_due)
        cn_live__compact_frames(s);
    cn_live_session_symbolize(s);
    if (cn_smp_session_ended(s->smp))
        finish(s, CN_LIVE_EXITED);
    else if (s->duration_limit > 0 && now >= s->duration_limit)
        finish(s, CN_LIVE_STOPPED);
    return (int)(s->samples - before);
}

int64_t cn_live_session_due_ns(const cn_live_session *s)
{
    if (s->state != CN_LIVE_RUNNING || s->duration_limit <= 0)
        return -1;
    int64_t left = s->duration_limit - (cn_common_now_ns() - s->start_mono);
    return left > 0 ? left : 0;
}

int cn_live_session_feed(cn_live_session *s, const void *buf, size_t len)
{
    if (!s->replay || s->state != CN_LIVE_RUNNING)
        return -EINVAL;
    uint64_t before = s->samples;
    int r = cn_smp_session_feed(s->smp, buf, len);
    cn_live__flush_samples(s); /* even after an error: what was delivered is queued */
    if (r < 0)
        return r;
    s->dirty = true;
    s->changes++;
    cn_live__enforce_memory(s);
    cn_live_session_symbolize(s);
    return (int)(s->samples - before);
}

int cn_live_session_stop(cn_live_session *s)
{
    finish(s, CN_LIVE_STOPPED);
    return 0;
}

void cn_live_session_info_get(const cn_live_session *s, cn_live_session_info *out)
{
    assert(s->npend == 0); /* the counters include every queued sample */
    memset(out, 0, sizeof(*out));
    out->id = s->id;
    out->name = s->name;
    out->kind = s->kind;
    out->state = s->state;
    out->pid = s->pid;
    snprintf(out->comm, sizeof(out->comm), "%s", s->comm);
    out->cgroup = s->cgroup;
    out->owner = s->owner;
    out->event = s->event ? s->event : "";
    out->freq = s->freq;
    out->unwind = s->unwind;
    out->mode = cn_smp_mode_name(s->mode);
    out->started_unix = s->started_unix;
    out->duration_ns = cn_live_session_now(s);
    out->samples = s->samples;
    out->dropped = s->dropped;
    out->lost = s->lost_saved;
    out->threads = s->threads_saved;
    if (s->smp) {
        cn_smp_counters c;
        cn_smp_session_counters(s->smp, &c);
        out->lost = c.lost;
        out->threads = c.threads;
        out->lost_events = c.lost_events;
        out->throttles = c.throttles;
        out->bad_records = c.bad_records;
        out->twins_dropped = c.stack_switch_dropped;
    }
    /* Frames not submitted yet (the symbolizer's queue was full) wait for symbols too: a
     * client that waits for pending to reach 0 must wait for them (docs/cli-live.md,
     * "Session counters"). */
    out->sym_pending = s->sym_pending + cn_live_session_unsubmitted(s);
    out->unsymbolized = out->sym_pending + s->sym_failed + s->sym_unresolvable;
    out->unresolved = s->sym_failed;
    out->unresolvable = s->sym_unresolvable;
    out->sym_by_range = s->sym_by_range;
    out->errors = s->errors;
    out->user_stacks = s->user_stacks;
    out->unwind_outcomes = s->unwind_outcomes;
    if (s->smp) {
        cn_smp_counters c;
        cn_smp_session_counters(s->smp, &c);
        out->dwarf_unwinds = c.dwarf_unwinds;
        out->cfi_unwinds = c.cfi_unwinds;
        out->libunwind_unwinds = c.libunwind_unwinds;
        memcpy(out->libunwind_why, c.libunwind_why, sizeof(out->libunwind_why));
        out->unmapped = c.unmapped;
        out->stack_copy = c.stack_copy;
        out->stack_adaptive = c.stack_adaptive != 0;
        out->stack_chain_off = c.stack_chain_off != 0;
        out->cgroup_lookups = c.cgroup_lookups;
        out->cgroup_reads = c.cgroup_reads;
        out->stack_shrinks = c.stack_shrinks;
        out->stack_grows = c.stack_grows;
        out->switches = c.switches;
        out->offcpu_unmatched = c.offcpu_unmatched;
        out->offcpu_short = c.offcpu_short;
        out->offcpu_waiting = c.offcpu_waiting;
        out->python = cn_smp_session_python(s->smp);
        out->py_registered = c.py_registered;
        out->py_refused = c.py_refused;
        out->py_samples = c.py_samples;
        out->py_joined = c.py_joined;
        out->py_no_record = c.py_no_record + c.py_before + c.py_no_frames;
        out->py_mismatch = c.py_mismatch;
    } else if (s->python_saved) { /* a saved session: what its file recorded */
        out->python = s->python_saved;
        out->py_registered = s->py_saved[0];
        out->py_refused = s->py_saved[1];
        out->py_samples = s->py_saved[2];
        out->py_joined = s->py_saved[3];
        out->py_no_record = s->py_saved[4];
        out->py_mismatch = s->py_saved[5];
    }
    out->memory = cn_agg_profile_memory(s->p);
    out->compactions = s->compactions;
    out->trims = s->trims;
    out->trimmed_weight = s->trimmed_weight;
    out->trim_share = s->trim_share;
    out->trim_raises = s->trim_raises;
    out->exited_rows = s->gone_rows;
    out->frames_removed = s->frames_removed;
    out->funcs_removed = s->funcs_removed;
    out->strings_removed = s->strings_removed;
    out->memory_limited = s->hit_memory_bound;
    out->refusing = s->memory_limited;
}

cn_agg_profile *cn_live_session_profile(cn_live_session *s)
{
    /* The queue is empty outside pump and finish, which flush it before they return. */
    assert(s->npend == 0);
    /* A session that stopped sampling is not pumped any more: a perf map that appears
     * later (written at exit) is found when someone looks at the profile. */
    if (s->state != CN_LIVE_RUNNING)
        cn_live_session_symbolize(s);
    return s->p;
}

bool cn_live_session_dirty(const cn_live_session *s)
{
    return s->dirty;
}

const char *cn_live_session_id(const cn_live_session *s)
{
    return s->id;
}

const char *cn_live_session_name(const cn_live_session *s)
{
    return s->name;
}

cn_live_kind cn_live_session_kind(const cn_live_session *s)
{
    return s->kind;
}

cn_live_state cn_live_session_state(const cn_live_session *s)
{
    return s->state;
}

pid_t cn_live_session_pid(const cn_live_session *s)
{
    return s->pid;
}

uid_t cn_live_session_owner(const cn_live_session *s)
{
    return s->owner;
}

int64_t cn_live_session_started(const cn_live_session *s)
{
    return s->started_unix;
}

uint64_t cn_live_session_samples(const cn_live_session *s)
{
    return s->samples;
}

const char *cn_live_session_path(const cn_live_session *s)
{
    return s->path;
}
