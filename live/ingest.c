/* ingest.c — samples from the sampler into the session's profile.
 *
 * The sampler's callbacks queue each sample's leaf-first (resource, offset) frames and
 * {time since start, thread} in a per-session batch (pend, pend_refs), which goes to
 * aggregate in one cn_agg_add_samples_refs() call (callchains hashed a group at a time,
 * cache slots prefetched) when it fills and at the end of every read, so the profile is
 * complete whenever the owner looks at it. Objects map to aggregate resources by the
 * sampler's dense object id (obj_res) and back (res_obj, so a frame's resource tells the
 * symbolizer which file to read). After each read the memory bound folds raw samples
 * into the all-time tree (cn_agg_fold_before), compacts the tables (cn_agg_compact) and,
 * if that is not enough, refuses more.
 *
 * Pseudo-frames (docs/calltree.md §4.6) are frames canopy adds to a sample's stack to say
 * something its real frames cannot; each kind is a resource of its own with no sampler
 * object (so the symbolizer never sees them), whose frames are named once by a regroup
 * (pseudo_frames()), and they are then ordinary frames of the profile: saved, loaded,
 * exported and transformed like any other.
 * - Off-CPU samples (modes off-cpu and wall) end, below the frame where the thread went
 *   off CPU, in a frame naming its state, "[blocked]" or "[preempted]" (docs/cli.md,
 *   "Modes"): resource "[state]", offset the cn_smp_state, made at the start.
 * - A stack whose unwind stopped in JIT code without unwind info, where the frame-pointer
 *   chain could not be followed, gets an outermost frame saying so, "[unwind stopped: JIT
 *   code without frame pointers]" (docs/perf-sampler.md, "Interpreters and JITs"), so the
 *   JIT frame is not taken for a root: resource "[unwind]", made at the first such stack.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "live_internal.h"

/* obj_res's values besides resource ids: anonymous memory (cn_agg_frame_ref's "no
 * file mapping", so frames keep their absolute address), and not mapped yet. */
#define NO_RESOURCE  (-1)
#define OBJ_UNMAPPED INT32_MIN

/* Whether two /proc paths name the same file (same device and inode). */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* Records, while process pid is alive, what its perf map needs later: its uid (the map
 * must belong to it) and, when it shares our mount namespace and root, the plain
 * /tmp/perf-PID.map path, which stays readable after it exits (a JVM run with
 * -XX:+DumpPerfMapAtExit writes its map then). Otherwise the symbolizer reads
 * /proc/PID/root/tmp/perf-NSPID.map. Failures leave the defaults. */
static void jit_source(res_src *src, pid_t pid)
{
    char a[64], b[64], root[8];
    struct stat st;
    snprintf(a, sizeof(a), "/proc/%d", (int)pid);
    if (pid <= 0 || stat(a, &st) < 0)
        return;
    src->has_owner = true;
    src->owner_uid = (uint32_t)st.st_uid;
    snprintf(a, sizeof(a), "/proc/%d/ns/mnt", (int)pid);
    snprintf(b, sizeof(b), "/proc/%d/root", (int)pid);
    ssize_t n = readlink(b, root, sizeof(root));
    if (n == 1 && root[0] == '/' && same_file(a, "/proc/self/ns/mnt")) {
        char path[64];
        snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)pid);
        free(src->jit_path);
        src->jit_path = strdup(path); /* NULL on ENOMEM: the /proc path is used */
    }
}

/* Maps a sampler object to an aggregate resource and records both directions. Returns 0
 * and *out (the resource, or NO_RESOURCE for anonymous memory), or -ENOMEM (nothing
 * recorded: the object stays unknown and the next frame that uses it tries again). */
static int map_object(cn_live_session *s, const cn_smp_object *obj, int32_t *out)
{
    cn_agg_resource_kind kind;
    if (obj->id >= s->n_obj_res) {
        size_t n = (size_t)obj->id + 64;
        int32_t *a = realloc(s->obj_res, n * sizeof(*a));
        if (!a)
            return -ENOMEM;
        for (size_t i = s->n_obj_res; i < n; i++)
            a[i] = OBJ_UNMAPPED;
        s->obj_res = a;
        s->n_obj_res = n;
    }
    switch (obj->kind) {
    case CN_SMP_OBJ_USER:
        kind = CN_AGG_RES_LIBRARY;
        break;
    case CN_SMP_OBJ_KERNEL:
    case CN_SMP_OBJ_MODULE:
        kind = CN_AGG_RES_KERNEL;
        break;
    case CN_SMP_OBJ_JIT:
        kind = CN_AGG_RES_JIT;
        break;
    case CN_SMP_OBJ_PYTHON: /* named by the sampler (symbols.c: python_frames) */
        kind = CN_AGG_RES_PYTHON;
        break;
    default:
        s->obj_res[obj->id] = NO_RESOURCE; /* anonymous memory: frames are bare addresses */
        *out = NO_RESOURCE;
        return 0;
    }
    const char *name = obj->kind == CN_SMP_OBJ_JIT ? "[jit]" : obj->name;
    /* A profile names a file as its process did, not as canopyd opened it (through
     * /proc/PID/root or /proc/PID/map_files): that is what exports' mappings show. */
    const char *path = obj->mapped_path ? obj->mapped_path : obj->path;
    int32_t res = cn_agg_resource(s->p, name, obj->identity, path, kind);
    if (res < 0)
        return -ENOMEM;
    if ((size_t)res >= s->n_res_obj) {
        size_t n = (size_t)res + 64;
        res_src *a = realloc(s->res_obj, n * sizeof(*a));
        if (!a)
            return -ENOMEM;
        memset(a + s->n_res_obj, 0, (n - s->n_res_obj) * sizeof(*a));
        s->res_obj = a;
        s->n_res_obj = n;
    }
    if (s->res_obj[res].obj != obj && obj->kind == CN_SMP_OBJ_JIT)
        jit_source(&s->res_obj[res], obj->pid);
    s->res_obj[res].obj = obj;
    s->obj_res[obj->id] = res;
    *out = res;
    return 0;
}

/* A new object, before the first sample that uses it. A failure is retried by
 * obj_resource() when a frame needs the object. */
static void on_object(void *arg, const cn_smp_object *obj)
{
    int32_t res;
    (void)map_object(arg, obj, &res);
}

/* The resource of a frame's object; NO_RESOURCE for anonymous memory, and for an object
 * that could not be mapped even now (counted in errors: its frames stay bare addresses). */
static int64_t obj_resource(cn_live_session *s, const cn_smp_object *obj)
{
    int32_t res;
    if (obj->id < s->n_obj_res && s->obj_res[obj->id] != OBJ_UNMAPPED)
        return s->obj_res[obj->id];
    if (map_object(s, obj, &res) < 0) {
        s->errors++;
        return NO_RESOURCE;
    }
    return res;
}

/* The idle task: pid 0 has no COMM record and no /proc entry; perf calls it swapper. */
#define IDLE_NAME "swapper"

static int32_t thread_of(cn_live_session *s, pid_t pid, pid_t tid)
{
    if (tid == s->last_tid && s->last_thread >= 0)
        return s->last_thread;
    int32_t t = cn_agg_thread(s->p, pid, tid, pid == 0 ? IDLE_NAME : NULL);
    if (t >= 0 && pid == 0 && !s->idle_named)
        s->idle_named = cn_agg_process_set_name(s->p, 0, IDLE_NAME) >= 0;
    /* A thread started after the session began has no COMM record until it renames
     * itself: until then it carries its process's name, as the kernel gave it its
     * creator's (an attach session's new threads read "? [tid]" before). Copied: the
     * name lives in the string arena that naming the thread may grow. */
    const char *pname;
    if (t >= 0 && pid != 0 && !cn_agg_thread_name(s->p, t) &&
        (pname = cn_agg_process_name(s->p, pid))) {
        char name[64];
        snprintf(name, sizeof(name), "%s", pname);
        cn_agg_thread_set_name(s->p, t, name); /* out of memory: stays unnamed */
    }
    if (t >= 0) {
        s->last_tid = tid;
        s->last_thread = t;
    }
    return t;
}

_Static_assert(PEND_REFS >= CN_SMP_MAX_FRAMES, "pend_refs must hold a max-depth chain");

/* Adds the queued samples to the profile with one batched call (cn_agg_add_samples_refs
 * hashes the callchains of a group together and prefetches their cache slots). An entry
 * that fails is counted as dropped, as cn_agg_add_sample's failure was, and the rest of
 * the queue is still added. Counters move exactly as if each sample had been added on
 * its own: samples and last_sample_ns for every entry added, dropped for every failure.
 * Empties the queue. */
void cn_live__flush_samples(cn_live_session *s)
{
    size_t i = 0;
    while (i < s->npend) {
        size_t before = cn_agg_sample_count(s->p);
        int r = cn_agg_add_samples_refs(s->p, s->pend + i, s->npend - i);
        size_t k = cn_agg_sample_count(s->p) - before;
        assert(k <= s->npend - i); /* the profile only grows here */
        for (size_t j = i; j < i + k; j++) {
            s->samples++;
            if (s->pend[j].time_ns > s->last_sample_ns)
                s->last_sample_ns = s->pend[j].time_ns;
        }
        i += k;
        if (r >= 0)
            break;
        if (i < s->npend) {
            s->dropped++; /* pend[i] failed */
            i++;
        }
    }
    s->npend = 0;
    s->npend_refs = 0;
}

/* Makes the pseudo-frames of one kind (see the top of this file): resource res_name
 * and identity, frames at offsets base .. base + n - 1 named names[0 .. n - 1] (static
 * strings: the profile copies them). Returns the resource, or negative errno. */
static int32_t pseudo_frames(cn_live_session *s, const char *res_name, const char *identity,
                             uint64_t base, const char *const *names, int n)
{
    enum { MAX_PSEUDO = 4 };
    cn_agg_symbol syms[MAX_PSEUDO];
    cn_agg_frame_symbols batch[MAX_PSEUDO];
    assert(n > 0 && n <= MAX_PSEUDO);
    int32_t res = cn_agg_resource(s->p, res_name, identity, NULL, CN_AGG_RES_OTHER);
    if (res < 0)
        return res;
    for (int i = 0; i < n; i++) {
        int32_t f = cn_agg_native_frame(s->p, res, base + (uint64_t)i);
        if (f < 0)
            return f;
        syms[i] = (cn_agg_symbol){names[i], NULL, 0};
        batch[i] = (cn_agg_frame_symbols){f, &syms[i], 1, NULL};
    }
    int r = cn_agg_regroup(s->p, batch, (size_t)n);
    return r < 0 ? r : res;
}

/* A pseudo-resource of one frame named name, made the first time it is needed: *slot
 * holds it once made, -1 before, -2 when making it failed (counted once in errors, never
 * tried again). Returns the resource, or -1. */
static int32_t pseudo_once(cn_live_session *s, int64_t *slot, const char *res_name,
                           const char *identity, const char *name)
{
    if (*slot == -1) {
        const char *const names[] = {name};
        int32_t res = pseudo_frames(s, res_name, identity, 0, names, 1);
        if (res < 0)
            s->errors++;
        *slot = res < 0 ? -2 : res;
    }
    return *slot >= 0 ? (int32_t)*slot : -1;
}

/* OFFCPU/WALL: the state pseudo-frames. 0 or negative errno. */
int cn_live__state_frames(cn_live_session *s)
{
    static const char *const names[] = {CN_AGG_STATE_BLOCKED, CN_AGG_STATE_PREEMPTED};
    int32_t res =
        pseudo_frames(s, "[state]", "[canopy:state]", (uint64_t)CN_SMP_STATE_BLOCKED, names, 2);
    if (res < 0)
        return res;
    s->state_res = res;
    return 0;
}

/* Counts how the unwind of a sample with user frames ended. The sampler's reasons map to
 * what a user can act on (docs/cli-live.md, "Session counters"). */
static void count_unwind(cn_live_session *s, const cn_smp_sample *smp)
{
    if (smp->nframes <= smp->nkernel)
        return; /* no user frames: nothing was unwound */
    s->user_stacks++;
    switch (smp->stop) {
    case CN_SMP_STOP_NONE:
        s->unwind_outcomes.complete++;
        break;
    case CN_SMP_STOP_STACK_SHORT:
        s->unwind_outcomes.truncated_stack++;
        break;
    case CN_SMP_STOP_NO_INFO:
        s->unwind_outcomes.no_cfi++;
        break;
    case CN_SMP_STOP_BAD_READ:
        s->unwind_outcomes.read_fault++;
        break;
    default: /* MAX_DEPTH, OTHER */
        s->unwind_outcomes.other++;
        break;
    }
}

/* The "[unwind]" pseudo-resource when smp's unwind stopped in JIT code: no unwind info
 * for its outermost frame, which is in anonymous executable memory (libunwind's
 * frame-chain guess there failed or gave an address mapped nowhere: the runtime keeps no
 * frame pointers). Else, or when it cannot be made, -1. Only stopped unwinds are marked:
 * stacks cut short for other reasons (stack copy, read fault) keep their outermost frame
 * as the root, as perf, pprof and the Firefox Profiler show them (docs/calltree.md §4.6);
 * the session's unwind outcomes count them. */
static int32_t stop_frame_res(cn_live_session *s, const cn_smp_sample *smp)
{
    if (smp->stop != CN_SMP_STOP_NO_INFO || smp->nframes <= smp->nkernel ||
        smp->nframes > CN_SMP_MAX_FRAMES - 2 || /* no room left for it (rare) */
        smp->frames[smp->nframes - 1].obj->kind != CN_SMP_OBJ_JIT)
        return -1;
    return pseudo_once(s, &s->stop_res, "[unwind]", "[canopy:unwind]",
                       "[unwind stopped: JIT code without frame pointers]");
}

/* Queues one sample (its frames copied into pend_refs); flushes when the queue is full
 * or could not take another chain of CN_SMP_MAX_FRAMES. */
static void on_sample(void *arg, const cn_smp_sample *smp)
{
    cn_live_session *s = arg;
    count_unwind(s, smp);
    if (s->memory_limited) {
        s->dropped++;
        return;
    }
    bool state = smp->state != CN_SMP_STATE_RUNNING && s->state_res >= 0;
    int32_t stop_res = stop_frame_res(s, smp);
    uint32_t max = CN_SMP_MAX_FRAMES - state;
    uint32_t n = smp->nframes < max ? smp->nframes : max;
    cn_agg_frame_ref *refs = s->pend_refs + s->npend_refs;
    if (state)
        *refs++ = (cn_agg_frame_ref){s->state_res, (uint64_t)smp->state};
    for (uint32_t i = 0; i < n; i++) {
        const cn_smp_frame *f = &smp->frames[i];
        refs[i].resource = obj_resource(s, f->obj);
        refs[i].offset = f->offset;
    }
    if (stop_res >= 0)
        refs[n++] = (cn_agg_frame_ref){stop_res, 0};
    if (state) {
        refs--;
        n++;
    }
    int64_t t = (int64_t)smp->time_ns - s->start_mono;
    if (t < 0)
        t = 0;
    s->pend[s->npend++] = (cn_agg_sample_refs){
        .leaf_first = n ? refs : NULL,
        .n = n,
        .time_ns = t,
        .weight = s->mode == CN_SMP_MODE_CPU ? 1.0 : (double)smp->weight_ns,
        .thread = thread_of(s, smp->pid, smp->tid),
    };
    s->npend_refs += n;
    if (s->npend == PEND_SAMPLES || s->npend_refs > PEND_REFS - CN_SMP_MAX_FRAMES)
        cn_live__flush_samples(s);
}

/* Marks thread (pid, tid), if the profile has it, as exited (gone) or alive again (a pid
 * reused: its new samples are its own). Out of memory, an exit is forgotten: its rows stay
 * its own, which loses nothing. */
static void mark_gone(cn_live_session *s, pid_t pid, pid_t tid, bool gone)
{
    int32_t t = cn_agg_thread_find(s->p, pid, tid);
    if (t < 0 || (!gone && (size_t)t >= s->gone_cap))
        return;
    if ((size_t)t >= s->gone_cap) {
        size_t cap = s->gone_cap ? s->gone_cap : 1024;
        while (cap <= (size_t)t)
            cap *= 2;
        bool *g = realloc(s->gone, cap * sizeof(*g));
        if (!g)
            return;
        memset(g + s->gone_cap, 0, (cap - s->gone_cap) * sizeof(*g));
        s->gone = g;
        s->gone_cap = cap;
    }
    s->gone[t] = gone;
}

static void on_task(void *arg, const cn_smp_task_event *ev)
{
    cn_live_session *s = arg;
    if (ev->kind == CN_SMP_TASK_EXIT || ev->kind == CN_SMP_TASK_FORK) {
        mark_gone(s, ev->pid, ev->tid, ev->kind == CN_SMP_TASK_EXIT);
        return;
    }
    if (ev->kind == CN_SMP_TASK_CGROUP && ev->cgroup) {
        cn_agg_process_set_cgroup(s->p, ev->pid, ev->cgroup);
        return;
    }
    if (ev->kind != CN_SMP_TASK_COMM || !ev->comm)
        return;
    int32_t t = cn_agg_thread(s->p, ev->pid, ev->tid, ev->comm);
    if (t >= 0)
        cn_agg_thread_set_name(s->p, t, ev->comm);
    if (ev->pid == ev->tid)
        cn_agg_process_set_name(s->p, ev->pid, ev->comm);
    if (ev->pid == s->pid && ev->tid == s->pid && ev->exec)
        snprintf(s->comm, sizeof(s->comm), "%s", ev->comm); /* `run`: the command's name */
}

/* The memory bound. Over it: every raw sample is folded and the folded tree's tail trimmed
 * at the session's share; while the tables are still over, the share is raised (x4, up to
 * CN_LIVE_TRIM_MAX; it stays raised, so later trims keep the tables where they fit) and
 * the tree trimmed again. Only tables over the bound at the highest share refuse further
 * samples (counted as dropped), and are not worked on again until they fit (nothing is
 * added to them meanwhile). */
void cn_live__enforce_memory(cn_live_session *s)
{
    if (cn_agg_profile_memory(s->p) <= s->max_memory) {
        s->memory_limited = false;
        return;
    }
    if (s->memory_limited)
        return;
    s->hit_memory_bound = true;
    if (cn_agg_sample_count(s->p) > 0)
        cn_agg_fold_before(s->p, INT64_MAX);
    if (!cn_live__trim(s, true))
        cn_live__compact(s, 0); /* the raw columns and callchain cache of what was folded */
    while (cn_agg_profile_memory(s->p) > s->max_memory && s->trim_share > 0 &&
           s->trim_share < CN_LIVE_TRIM_MAX) {
        s->trim_share = s->trim_share * 4 < CN_LIVE_TRIM_MAX ? s->trim_share * 4 : CN_LIVE_TRIM_MAX;
        s->trim_raises++;
        cn_live__trim(s, true);
    }
    s->memory_limited = cn_agg_profile_memory(s->p) > s->max_memory;
}

void cn_live__compact(cn_live_session *s, unsigned flags)
{
    if (cn_agg_compact(s->p, flags, NULL) == 0)
        s->compactions++;
}

/* The new frame watermark for `mark` (frames [0, mark) were handled): the kept frames
 * below it, which keep their order. */
static size_t remap_watermark(const int32_t *map, size_t n_map, size_t mark)
{
    size_t kept = 0;
    for (size_t f = 0; f < mark && f < n_map; f++)
        kept += map[f] >= 0;
    return kept;
}

void cn_live__compact_frames(cn_live_session *s)
{
    if (s->sym_pending > 0)
        return; /* answers name frames by id: at a later pump, when none is in flight */
    size_t n_before = cn_agg_frame_count(s->p);
    int32_t *map = NULL;
    cn_agg_compact_stats st;
    if (cn_agg_compact_frames(s->p, &map, &st) < 0)
        return; /* out of memory: nothing changed; tried again at the next trim */
    s->frames_due = false;
    s->strings_removed += st.strings_removed;
    if (!map)
        return;
    s->next_frame = remap_watermark(map, n_before, s->next_frame);
    s->next_py_frame = remap_watermark(map, n_before, s->next_py_frame);
    size_t keep = 0;
    for (size_t i = 0; i < s->n_retry; i++) {
        int32_t f = s->retry[i].frame;
        if (f >= 0 && (size_t)f < n_before && map[f] >= 0) {
            s->retry[keep] = s->retry[i];
            s->retry[keep++].frame = map[f];
        }
    }
    s->n_retry = keep;
    s->frames_removed += st.frames_before - st.frames_after;
    s->funcs_removed += st.funcs_before - st.funcs_after;
    free(map);
}

/* The "[trimmed]" pseudo-frame (docs/calltree.md §4.6), made once; -1 when it cannot be. */
static int32_t trim_frame(cn_live_session *s)
{
    int32_t res = pseudo_once(s, &s->trim_res, "[trim]", "[canopy:trim]", "[trimmed]");
    if (res < 0)
        return -1;
    int32_t f = cn_agg_native_frame(s->p, res, 0); /* found, not made */
    return f >= 0 ? f : -1;
}

/* Below this many folded rows a trim is not worth its pass (a process's own session
 * rarely gets there: its paths repeat). */
#define TRIM_MIN_ROWS 16384
/* Nor sooner than this after the last one unless forced (the memory bound): a system
 * session's fold adds its window's rows every second, and with exited threads folded the
 * rows left after a trim are few, so "doubled" alone came every few seconds (86 passes in
 * 8 minutes of builds, 11 % of canopyd's CPU there). */
#define TRIM_EVERY_NS (30 * 1000000000LL)

bool cn_live__trim(cn_live_session *s, bool force)
{
    size_t rows = cn_agg_folded_rows(s->p);
    if (!(s->trim_share > 0) || rows == 0)
        return false;
    int64_t now = cn_common_now_ns();
    if (!force && (rows < TRIM_MIN_ROWS || rows < 2 * s->trim_rows ||
                   (s->last_trim_ns && now - s->last_trim_ns < TRIM_EVERY_NS)))
        return false;
    s->last_trim_ns = now;
    /* Exited threads' rows first: one set per command name (cc1 [exited]) leaves fewer
     * rows to trim, and their paths' weights add up before the share is applied. */
    size_t folded = 0;
    if (s->gone && cn_agg_fold_threads(s->p, s->gone, s->gone_cap, &folded) == 0)
        s->gone_rows += folded;
    int32_t f = trim_frame(s);
    cn_agg_trim_stats st = {0};
    bool trimmed = f >= 0 && cn_agg_trim_folded(s->p, s->trim_share, f, &st) == 0;
    if (!trimmed && folded == 0)
        return false; /* -ENOMEM: the folded rows stay as they were; tried again when due */
    s->trim_rows = trimmed ? st.rows_after : cn_agg_folded_rows(s->p);
    if (st.rows_moved == 0 && folded == 0)
        return false;
    if (st.rows_moved) {
        s->trims++;
        s->trimmed_weight = st.weight_under;
    }
    s->changes++;
    s->dirty = true;
    cn_live__compact(s, 0); /* the stacks only the moved rows reached */
    s->frames_due = true;   /* and the frames only those stacks used */
    cn_live__compact_frames(s);
    return true;
}

const cn_smp_callbacks cn_live__smp_callbacks = {
    .sample = on_sample, .task = on_task, .object = on_object};
