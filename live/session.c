/* session.c — one live (or saved) profiling session: sampler → aggregate ← symbolizer.
 *
 * The sampler's callbacks queue each sample's leaf-first (resource, offset) frames and
 * {time since start, thread} in a per-session batch (pend, pend_refs), which goes to
 * aggregate in one cn_agg_add_samples_refs() call (callchains hashed a group at a time,
 * cache slots prefetched) when it fills and at the end of every read, so the profile is
 * complete whenever the owner looks at it. Objects map to aggregate resources by the
 * sampler's dense object id (obj_res) and back (res_obj, so a frame's resource tells the
 * symbolizer which file to read). Frames are handed to the symbolizer in order of
 * creation: frames [0, next_frame) have been submitted. Saved sessions have no sampler:
 * their counters come from the file's metadata.
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
 *
 * struct cn_live_session is defined here and nowhere else: the symbolizer (symbolizer.c)
 * and every host (daemon/, client/) go through the functions of cn_live.h and
 * live_internal.h.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "live_internal.h"

#define DEFAULT_RETENTION_NS (600LL * 1000000000)
#define DEFAULT_MAX_MEMORY   ((size_t)256 << 20)
#define FOLD_EVERY_NS        1000000000LL
#define SUBMIT_BATCH         1024 /* symbol requests built on the stack per submit */
#define APPLY_FRAMES         256  /* answers per regroup when the heap batch cannot be had */
#define APPLY_SYMBOLS        2048 /* their chains' symbols */
#define PEND_SAMPLES         64   /* samples queued before a batched add */
#define PEND_REFS            8192 /* frames queued: room for 32 chains of CN_SMP_MAX_FRAMES */
#define JIT_RECHECK_NS       250000000LL /* how often unresolved JIT frames look for a map */

/* What the symbolizer needs to know of a resource's object. */
typedef struct res_src {
    const cn_smp_object *obj; /* the sampler's object (owned by the sampler session) */
    char *jit_path;           /* JIT: the perf map's path when the process shares our root
                                 (owned; still readable after it exits), else NULL */
    bool has_owner;           /* JIT: owner_uid is the process's uid, read when seen */
    uint32_t owner_uid;
} res_src;

/* A JIT frame whose perf map did not name it yet (docs/cli-live.md, "Symbols"). */
typedef struct jit_retry {
    int32_t frame;
    uint64_t map_bytes; /* map size the last lookup used: retried once the map is bigger */
} jit_retry;

/* obj_res's values besides resource ids: anonymous memory (cn_agg_frame_ref's "no
 * file mapping", so frames keep their absolute address), and not mapped yet. */
#define NO_RESOURCE  (-1)
#define OBJ_UNMAPPED INT32_MIN

struct cn_live_session {
    char *id, *name, *event, *path; /* owned; path: the file last saved or loaded, or NULL */
    cn_live_kind kind;
    cn_live_state state;
    cn_live_state saved_state; /* SAVED: the state it had when written */
    pid_t pid;
    char comm[32];
    uid_t owner;
    uint32_t freq;
    char unwind[8];
    cn_smp_mode mode;  /* CPU: weights count samples; OFFCPU, WALL: nanoseconds */
    int64_t state_res; /* OFFCPU/WALL: the "[state]" pseudo-resource, else -1 */
    int64_t stop_res;  /* the "[unwind]" pseudo-resource once a stack needed it, else -1
                          (-2: it could not be made) */
    int64_t started_unix;
    int64_t start_mono;     /* CLOCK_MONOTONIC ns at start: the profile's time 0 */
    int64_t end_ns;         /* session time when sampling ended */
    int64_t duration_limit; /* > 0: stop after */
    int64_t retention_ns;
    int64_t last_fold_ns;
    int64_t last_sample_ns;
    size_t max_memory;
    bool memory_limited;   /* samples are being refused */
    bool hit_memory_bound; /* the bound was reached at least once */
    bool dirty;            /* changed since the last save */
    uint64_t changes;      /* bumped with dirty: a save made elsewhere (a forked writer) knows
                              whether the session changed since its snapshot */
    uint64_t samples, dropped, lost_saved, threads_saved;
    uint64_t errors;      /* allocation failures that lost data (cn_live_session_info) */
    uint64_t user_stacks; /* samples with user frames (cn_live_session_info) */
    cn_unwind_outcomes unwind_outcomes; /* how their unwinds ended */
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
    uint64_t sym_pending;      /* submitted, not answered yet */
    uint64_t sym_failed;       /* answered without a symbol (includes waiting JIT frames) */
    uint64_t sym_unresolvable; /* frames the symbolizer cannot take (no file to read) */
    jit_retry *retry;          /* unresolved JIT frames, retried when their map grows */
    size_t n_retry, cap_retry;
    int64_t last_retry_ns;
    /* Samples delivered by the sampler but not yet in the profile: on_sample queues them
     * here and flush_samples() adds them with cn_agg_add_samples_refs() when the queue
     * fills and at the end of every read, so the queue is empty whenever the owner's code
     * runs (queries, save, info). pend[i].leaf_first points into pend_refs. */
    size_t npend, npend_refs;
    cn_agg_sample_refs pend[PEND_SAMPLES];
    cn_agg_frame_ref pend_refs[PEND_REFS];
};

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

/* ---- sampler callbacks ------------------------------------------------------------- */

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
    default:
        s->obj_res[obj->id] = NO_RESOURCE; /* anonymous memory: frames are bare addresses */
        *out = NO_RESOURCE;
        return 0;
    }
    const char *name = obj->kind == CN_SMP_OBJ_JIT ? "[jit]" : obj->name;
    int32_t res = cn_agg_resource(s->p, name, obj->identity, obj->path, kind);
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
static void flush_samples(cn_live_session *s)
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

/* OFFCPU/WALL: the state pseudo-frames. 0 or negative errno. */
static int state_frames(cn_live_session *s)
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
    static const char *const names[] = {"[unwind stopped: JIT code without frame pointers]"};
    if (smp->stop != CN_SMP_STOP_NO_INFO || smp->nframes <= smp->nkernel ||
        smp->nframes > CN_SMP_MAX_FRAMES - 2 || /* no room left for it (rare) */
        smp->frames[smp->nframes - 1].obj->kind != CN_SMP_OBJ_JIT || s->stop_res == -2)
        return -1;
    if (s->stop_res == -1) {
        int32_t res = pseudo_frames(s, "[unwind]", "[canopy:unwind]", 0, names, 1);
        if (res < 0) {
            s->errors++;
            s->stop_res = -2;
            return -1;
        }
        s->stop_res = res;
    }
    return (int32_t)s->stop_res;
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
        flush_samples(s);
}

static void on_task(void *arg, const cn_smp_task_event *ev)
{
    cn_live_session *s = arg;
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

/* ---- symbolization ----------------------------------------------------------------- */

/* The source of frame f's resource, or NULL (anonymous memory, or a saved profile). */
static const res_src *frame_src(const cn_live_session *s, int32_t f)
{
    int32_t res = cn_agg_frame_resource(s->p, f);
    if (res < 0 || (size_t)res >= s->n_res_obj || !s->res_obj[res].obj)
        return NULL;
    return &s->res_obj[res];
}

/* Fills q for frame f of s. Returns false when the frame is not to be submitted:
 * anonymous memory needs no symbols (it stays 0xADDRESS), and an object the symbolizer
 * cannot read (a mapping whose file could not be found, [vsyscall]) is counted as
 * unresolvable here rather than sent: one such frame must never hold back the others
 * (docs/cli-live.md, "Symbols"). */
static bool frame_request(cn_live_session *s, size_t f, cn_sym_request *q)
{
    const res_src *src = frame_src(s, (int32_t)f);
    const cn_smp_object *obj = src ? src->obj : NULL;
    if (!obj)
        return false;
    memset(q, 0, sizeof(*q));
    q->tag = s->tag;
    q->cookie = f;
    q->addr = (uint64_t)cn_agg_frame_address(s->p, (int32_t)f);
    q->obj.pid = obj->pid;
    /* The symbolizer's cache is shared by every user's sessions: key it by the file read,
     * not by a build-id its owner could have forged (docs/security.md). */
    q->obj.identity = obj->file_key;
    q->obj.path = obj->path;
    switch (obj->kind) {
    case CN_SMP_OBJ_KERNEL:
    case CN_SMP_OBJ_MODULE:
        q->obj.kind = CN_SYM_KERNEL;
        q->obj.path = NULL;
        q->obj.identity = NULL;
        break;
    case CN_SMP_OBJ_JIT:
        q->obj.kind = CN_SYM_JIT;
        q->obj.path = src->jit_path;
        q->obj.identity = NULL;
        q->obj.has_owner = src->has_owner;
        q->obj.owner_uid = src->owner_uid;
        break;
    default:
        /* The vDSO has no file; the symbolizer reads the kernel's image (the sampler
         * names it by its maps name "[vdso]"). */
        q->obj.kind = !obj->path && obj->identity && !strcmp(obj->identity, "[vdso]") ? CN_SYM_VDSO
                                                                                      : CN_SYM_USER;
        break;
    }
    if (!cn_sym_object_valid(&q->obj)) {
        s->sym_unresolvable++;
        return false;
    }
    return true;
}

/* Resubmits the waiting JIT frames whose perf map has grown past what their last lookup
 * saw (or appeared), at most every JIT_RECHECK_NS unless force. Frames stay waiting when
 * the symbolizer's queue is full. */
static void retry_jit(cn_live_session *s, bool force)
{
    cn_sym_request reqs[SUBMIT_BATCH];
    size_t idx[SUBMIT_BATCH];
    int64_t now = cn_common_now_ns();
    if (!s->sym || !s->n_retry || (!force && now - s->last_retry_ns < JIT_RECHECK_NS))
        return;
    s->last_retry_ns = now;
    const res_src *last_src = NULL;
    int64_t last_size = -1;
    size_t n = 0, keep = 0;
    for (size_t i = 0; i <= s->n_retry; i++) {
        if (i < s->n_retry) {
            const res_src *src = frame_src(s, s->retry[i].frame);
            if (src && src != last_src) {
                cn_sym_request q;
                uint64_t size;
                last_src = src;
                last_size = frame_request(s, (size_t)s->retry[i].frame, &q) &&
                                    cn_sym_perfmap_size(&q.obj, &size) == 0
                                ? (int64_t)size
                                : -1;
            }
            if (src && last_size > (int64_t)s->retry[i].map_bytes &&
                frame_request(s, (size_t)s->retry[i].frame, &reqs[n])) {
                idx[n++] = i;
                continue;
            }
            if (!src)
                continue; /* cannot happen for a frame that was submitted; forget it */
            s->retry[keep++] = s->retry[i];
        }
        if (n == SUBMIT_BATCH || (i == s->n_retry && n)) {
            if (cn_live__symbolizer_submit(s->sym, reqs, n) < 0) {
                for (size_t k = 0; k < n; k++) /* full: they wait for the next check */
                    s->retry[keep++] = s->retry[idx[k]];
            } else {
                s->sym_pending += n;
                s->sym_failed -= s->sym_failed >= n ? n : s->sym_failed;
            }
            n = 0;
        }
    }
    s->n_retry = keep;
}

/* Remembers an unresolved JIT frame for retry_jit. Returns false on ENOMEM. */
static bool add_retry(cn_live_session *s, int32_t frame, uint64_t map_bytes)
{
    if (CN_RESERVE(s->retry, s->cap_retry, s->n_retry + 1) < 0)
        return false;
    s->retry[s->n_retry++] = (jit_retry){.frame = frame, .map_bytes = map_bytes};
    return true;
}

void cn_live_session_symbolize(cn_live_session *s)
{
    cn_sym_request reqs[SUBMIT_BATCH];
    size_t total;
    if (!s->sym)
        return;
    total = cn_agg_frame_count(s->p);
    while (s->next_frame < total) {
        size_t n = 0, f = s->next_frame;
        uint64_t unresolvable = s->sym_unresolvable;
        for (; f < total && n < SUBMIT_BATCH; f++)
            n += frame_request(s, f, &reqs[n]);
        int r = cn_live__symbolizer_submit(s->sym, reqs, n);
        if (r == -EAGAIN) {
            s->sym_unresolvable = unresolvable; /* counted again on the next pump */
            break;                              /* full: these frames go again then */
        }
        if (r < 0) { /* out of memory: these frames' symbols are lost, and counted */
            s->sym_failed += n;
            s->errors += n;
        } else {
            s->sym_pending += n;
        }
        s->next_frame = f;
    }
    retry_jit(s, false);
}

size_t cn_live_session_unsubmitted(const cn_live_session *s)
{
    size_t frames = cn_agg_frame_count(s->p);
    return s->sym && frames > s->next_frame ? frames - s->next_frame : 0;
}

/* Applies answers a[0, n) to at most `cap` frames' worth of batch/chains, starting at
 * *next; advances *next past what it consumed. Returns frames applied, or negative errno
 * from cn_agg_regroup (then nothing changed and the consumed answers were not applied). */
static int apply_some(cn_live_session *s, const cn_sym_answer *a, size_t n, size_t *next,
                      cn_agg_frame_symbols *batch, size_t cap, cn_agg_symbol *chains,
                      size_t cap_syms)
{
    size_t nb = 0, k = 0, i = *next;
    for (; i < n && nb < cap; i++) {
        const cn_sym_result *res = &a[i].result;
        if (res->status == 0 && res->depth > 0 && k + res->depth > cap_syms && nb > 0)
            break; /* the chain does not fit this round: the next one takes it */
        s->sym_pending -= s->sym_pending ? 1 : 0;
        if (a[i].cookie >= cn_agg_frame_count(s->p)) {
            s->sym_failed++;
            continue;
        }
        if (res->status == -EINVAL) { /* an object the symbolizer cannot read */
            s->sym_unresolvable++;
            continue;
        }
        if (res->status < 0 || res->depth == 0 || res->depth > cap_syms) {
            const res_src *src = frame_src(s, (int32_t)a[i].cookie);
            s->sym_failed++;
            if (res->status < 0 && src && src->obj->kind == CN_SMP_OBJ_JIT &&
                !add_retry(s, (int32_t)a[i].cookie, res->map_bytes))
                s->errors++; /* it will not be retried */
            continue;
        }
        batch[nb].frame = (int32_t)a[i].cookie;
        batch[nb].chain = chains + k;
        batch[nb].depth = res->depth;
        batch[nb].symbol = res->symbol; /* owned by the answer, which outlives the regroup */
        for (size_t d = 0; d < res->depth; d++, k++) {
            chains[k].name = res->chain[d].name;
            chains[k].file = res->chain[d].file;
            chains[k].line = res->chain[d].line;
        }
        nb++;
    }
    *next = i;
    int r = nb ? cn_agg_regroup(s->p, batch, nb) : 0;
    if (r < 0) {
        /* The symbols are lost for these frames (the worker answers each request once):
         * say so in the counters rather than dropping them silently. */
        s->sym_failed += nb;
        s->errors += nb;
        return r;
    }
    return (int)nb;
}

int cn_live__session_apply_symbols(cn_live_session *s, const cn_sym_answer *a, size_t n)
{
    size_t depth = 0, next = 0;
    int applied = 0;
    for (size_t i = 0; i < n; i++)
        depth += a[i].result.status == 0 ? a[i].result.depth : 0;
    /* One regroup for the whole run when the memory is there (a regroup re-derives held
     * paths: fewer is cheaper); otherwise fixed-size rounds on the stack. */
    cn_agg_frame_symbols *batch = calloc(n ? n : 1, sizeof(*batch));
    cn_agg_symbol *chains = calloc(depth ? depth : 1, sizeof(*chains));
    if (batch && chains) {
        int r = apply_some(s, a, n, &next, batch, n, chains, depth ? depth : 1);
        applied = r > 0 ? r : 0;
        assert(next == n);
    } else {
        cn_agg_frame_symbols sbatch[APPLY_FRAMES];
        cn_agg_symbol schains[APPLY_SYMBOLS];
        while (next < n) {
            int r = apply_some(s, a, n, &next, sbatch, APPLY_FRAMES, schains, APPLY_SYMBOLS);
            applied += r > 0 ? r : 0;
        }
    }
    free(batch);
    free(chains);
    s->dirty = true;
    s->changes++;
    /* A map that grew while these were looked up is read again now, not at the next
     * check: a process that writes its map as it exits leaves no later chance to. */
    retry_jit(s, true);
    return applied;
}

void cn_live__session_detached(cn_live_session *s)
{
    s->sym = NULL;
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

static cn_live_session *session_alloc(const char *id, const char *name)
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
    if (!s->id || (name && *name && !s->name) || !s->p)
        return cn_live_session_free(s);
    return s;
}

int cn_live_session_new(const cn_live_session_opts *o, cn_live_symbolizer *sym,
                        cn_live_session **out, cn_err *err)
{
    int r;
    cn_live_session *s = session_alloc(o->id, o->name);
    if (!s)
        return -ENOMEM;
    s->kind = o->kind;
    s->pid = o->kind == CN_LIVE_SYSTEM ? 0 : o->pid;
    s->owner = o->owner;
    s->freq = o->freq ? o->freq : CN_LIVE_FREQ_DEFAULT;
    s->mode = o->mode;
    s->duration_limit = o->duration_ns;
    s->retention_ns = o->retention_ns ? o->retention_ns : DEFAULT_RETENTION_NS;
    s->max_memory = o->max_memory ? o->max_memory : DEFAULT_MAX_MEMORY;
    if (s->pid)
        read_comm(s->pid, s->comm, sizeof(s->comm));

    cn_smp_config cfg = {
        .target = o->replay_sample_type       ? CN_SMP_TARGET_NONE
                  : o->kind == CN_LIVE_SYSTEM ? CN_SMP_TARGET_SYSTEM
                                              : CN_SMP_TARGET_PID,
        .pid = s->pid,
        .event = o->event,
        .freq = s->freq,
        .unwind = o->unwind,
        .stack_size = o->stack_size,
        .no_kernel = o->no_kernel,
        .enable_on_exec = o->kind == CN_LIVE_RUN,
        .ring_pages = o->ring_pages,
        .mode = o->mode,
        .min_block_ns = o->min_block_ns,
        .image = o->image,
        .may_profile = o->may_profile,
        .may_profile_arg = o->may_profile_arg,
    };
    static const cn_smp_callbacks cbs = {.sample = on_sample, .task = on_task, .object = on_object};
    r = cn_smp_session_new(&cfg, &cbs, s, &s->smp);
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
    if (s->mode != CN_SMP_MODE_CPU && (r = state_frames(s)) < 0) {
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
    for (size_t i = 0; i < s->n_res_obj; i++)
        free(s->res_obj[i].jit_path);
    free(s->res_obj);
    free(s->retry);
    free(s->id);
    free(s->name);
    free(s->event);
    free(s->path);
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

/* The memory bound: fold every raw sample first; if the tables are still over, refuse
 * further samples (counted as dropped) and say so. */
static void enforce_memory(cn_live_session *s)
{
    if (cn_agg_profile_memory(s->p) <= s->max_memory)
        return;
    if (cn_agg_sample_count(s->p) > 0)
        cn_agg_fold_before(s->p, INT64_MAX);
    if (cn_agg_profile_memory(s->p) > s->max_memory)
        s->memory_limited = true;
    s->hit_memory_bound = true;
}

static void finish(cn_live_session *s, cn_live_state state)
{
    if (s->state != CN_LIVE_RUNNING)
        return;
    if (s->smp)
        cn_smp_session_stop(s->smp); /* delivers what the rings still held */
    flush_samples(s);
    s->end_ns = cn_common_now_ns() - s->start_mono;
    s->state = state;
    s->dirty = true;
    s->changes++;
    cn_live_session_symbolize(s);
    retry_jit(s, true);
}

int cn_live_session_pump(cn_live_session *s)
{
    if (s->state != CN_LIVE_RUNNING || !s->smp)
        return 0;
    uint64_t before = s->samples;
    int r = cn_smp_session_read(s->smp);
    flush_samples(s); /* even after an error: what was delivered is queued */
    if (r < 0)
        return r;
    int64_t now = cn_common_now_ns() - s->start_mono;
    if (s->samples != before)
        s->dirty = true;
    s->changes++;
    if (s->retention_ns > 0 && now - s->last_fold_ns >= FOLD_EVERY_NS) {
        s->last_fold_ns = now;
        if (now > s->retention_ns && cn_agg_sample_count(s->p) > 0)
            cn_agg_fold_before(s->p, now - s->retention_ns);
    }
    enforce_memory(s);
    cn_live_session_symbolize(s);
    if (cn_smp_session_ended(s->smp))
        finish(s, CN_LIVE_EXITED);
    else if (s->duration_limit > 0 && now >= s->duration_limit)
        finish(s, CN_LIVE_STOPPED);
    return (int)(s->samples - before);
}

int cn_live_session_feed(cn_live_session *s, const void *buf, size_t len)
{
    if (!s->replay || s->state != CN_LIVE_RUNNING)
        return -EINVAL;
    uint64_t before = s->samples;
    int r = cn_smp_session_feed(s->smp, buf, len);
    flush_samples(s); /* even after an error: what was delivered is queued */
    if (r < 0)
        return r;
    s->dirty = true;
    s->changes++;
    enforce_memory(s);
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
    }
    /* Frames not submitted yet (the symbolizer's queue was full) wait for symbols too: a
     * client that waits for pending to reach 0 must wait for them (docs/cli-live.md,
     * "Session counters"). */
    out->sym_pending = s->sym_pending + cn_live_session_unsubmitted(s);
    out->unsymbolized = out->sym_pending + s->sym_failed + s->sym_unresolvable;
    out->unresolved = s->sym_failed;
    out->unresolvable = s->sym_unresolvable;
    out->errors = s->errors;
    out->user_stacks = s->user_stacks;
    out->unwind_outcomes = s->unwind_outcomes;
    if (s->smp) {
        cn_smp_counters c;
        cn_smp_session_counters(s->smp, &c);
        out->dwarf_unwinds = c.dwarf_unwinds;
        out->cfi_unwinds = c.cfi_unwinds;
        out->libunwind_unwinds = c.libunwind_unwinds;
        out->unmapped = c.unmapped;
        out->stack_copy = c.stack_copy;
        out->stack_adaptive = c.stack_adaptive != 0;
        out->stack_shrinks = c.stack_shrinks;
        out->stack_grows = c.stack_grows;
        out->switches = c.switches;
        out->offcpu_unmatched = c.offcpu_unmatched;
        out->offcpu_short = c.offcpu_short;
    }
    out->memory = cn_agg_profile_memory(s->p);
    out->memory_limited = s->hit_memory_bound;
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

/* ---- persistence ------------------------------------------------------------------- */

static int meta_seti(cn_agg_profile *p, const char *key, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    return cn_agg_meta_set(p, key, buf);
}

static int64_t meta_geti(const cn_agg_profile *p, const char *key, int64_t def)
{
    const char *v = cn_agg_meta_get(p, key);
    if (!v || !*v)
        return def;
    char *end;
    long long x = strtoll(v, &end, 10);
    return *end ? def : (int64_t)x;
}

static int write_meta(cn_live_session *s)
{
    cn_live_session_info i;
    cn_live_session_info_get(s, &i);
    cn_agg_profile *p = s->p;
    int r = 0;
    r |= cn_agg_meta_set(p, "canopy.session.id", s->id);
    r |= cn_agg_meta_set(p, "canopy.session.name", s->name ? s->name : "");
    r |= cn_agg_meta_set(p, "canopy.session.kind", cn_live_kind_name(s->kind));
    r |= cn_agg_meta_set(p, "canopy.session.state",
                         cn_live_state_name(s->state == CN_LIVE_SAVED ? s->saved_state : s->state));
    r |= cn_agg_meta_set(p, "canopy.session.comm", s->comm);
    r |= cn_agg_meta_set(p, "canopy.session.unwind", s->unwind);
    r |= cn_agg_meta_set(p, "mode", cn_smp_mode_name(s->mode));
    r |= cn_agg_meta_set(p, "event", i.event);
    r |= meta_seti(p, "freq", i.freq);
    r |= meta_seti(p, "canopy.session.pid", i.pid);
    r |= meta_seti(p, "canopy.session.owner", i.owner);
    r |= meta_seti(p, "canopy.session.started", i.started_unix);
    r |= meta_seti(p, "canopy.session.duration_ns", i.duration_ns);
    r |= meta_seti(p, "canopy.session.samples", (int64_t)i.samples);
    r |= meta_seti(p, "canopy.session.lost", (int64_t)i.lost);
    r |= meta_seti(p, "canopy.session.dropped", (int64_t)i.dropped);
    r |= meta_seti(p, "canopy.session.threads", (int64_t)i.threads);
    r |= meta_seti(p, "canopy.session.memory_limited", i.memory_limited);
    r |= meta_seti(p, "canopy.session.user_stacks", (int64_t)i.user_stacks);
    r |= meta_seti(p, "canopy.session.unwind.complete", (int64_t)i.unwind_outcomes.complete);
    r |= meta_seti(p, "canopy.session.unwind.truncated_stack",
                   (int64_t)i.unwind_outcomes.truncated_stack);
    r |= meta_seti(p, "canopy.session.unwind.no_cfi", (int64_t)i.unwind_outcomes.no_cfi);
    r |= meta_seti(p, "canopy.session.unwind.read_fault", (int64_t)i.unwind_outcomes.read_fault);
    r |= meta_seti(p, "canopy.session.unwind.other", (int64_t)i.unwind_outcomes.other);
    return r < 0 ? -ENOMEM : 0;
}

int cn_live_session_save(cn_live_session *s, const char *path, cn_err *err)
{
    cn_afile af;
    FILE *f = NULL;
    assert(s->npend == 0); /* pump and finish flush the queue before they return */
    int r = write_meta(s);
    if (r < 0)
        return cn_err_set(err, r, "%s: out of memory", path);
    r = cn_afile_open(&af, path, 0600, err);
    if (r < 0)
        return r;
    if (!(f = cn_afile_stream(&af))) {
        r = cn_err_set(err, -ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    r = cn_agg_write_canopy(s->p, f);
    if (fclose(f) != 0 && r == 0)
        r = -errno;
    if (r < 0) {
        cn_err_set(err, r, "%s: %s", af.tmp, strerror(-r));
        goto fail;
    }
    r = cn_afile_commit(&af, err);
    if (r < 0)
        return r;
    free(s->path);
    s->path = strdup(path);
    s->dirty = s->state == CN_LIVE_RUNNING ? s->dirty : false;
    return 0;
fail:
    cn_afile_abort(&af);
    return r;
}

static cn_live_kind kind_parse(const char *k)
{
    if (k && !strcmp(k, "system"))
        return CN_LIVE_SYSTEM;
    if (k && !strcmp(k, "run"))
        return CN_LIVE_RUN;
    return CN_LIVE_ATTACH;
}

static cn_live_state state_parse(const char *k)
{
    if (k && !strcmp(k, "exited"))
        return CN_LIVE_EXITED;
    return CN_LIVE_STOPPED;
}

int cn_live_session_load(cn_agg_profile *p, const char *path, cn_live_session **out, cn_err *err)
{
    const char *id = cn_agg_meta_get(p, "canopy.session.id");
    if (!id || !*id) {
        cn_err_set(err, 0, "%s: not a canopyd session (no canopy.session.id)", path);
        cn_agg_profile_free(p);
        return -EINVAL;
    }
    cn_live_session *s = session_alloc(id, cn_agg_meta_get(p, "canopy.session.name"));
    if (!s) {
        cn_agg_profile_free(p);
        return -ENOMEM;
    }
    cn_agg_profile_free(s->p);
    s->p = p;
    s->kind = kind_parse(cn_agg_meta_get(p, "canopy.session.kind"));
    s->saved_state = state_parse(cn_agg_meta_get(p, "canopy.session.state"));
    s->state = CN_LIVE_SAVED;
    snprintf(s->comm, sizeof(s->comm), "%s",
             cn_agg_meta_get(p, "canopy.session.comm") ? cn_agg_meta_get(p, "canopy.session.comm")
                                                       : "");
    const char *uw = cn_agg_meta_get(p, "canopy.session.unwind");
    snprintf(s->unwind, sizeof(s->unwind), "%s", uw ? uw : "");
    const char *ev = cn_agg_meta_get(p, "event");
    s->event = strdup(ev ? ev : "");
    if (cn_smp_mode_parse(cn_agg_meta_get(p, "mode"), &s->mode) < 0)
        s->mode = cn_agg_profile_unit(p) == CN_AGG_UNIT_NS ? CN_SMP_MODE_WALL : CN_SMP_MODE_CPU;
    s->path = strdup(path);
    s->freq = (uint32_t)meta_geti(p, "freq", 0);
    s->pid = (pid_t)meta_geti(p, "canopy.session.pid", 0);
    s->owner = (uid_t)meta_geti(p, "canopy.session.owner", 0);
    s->started_unix = meta_geti(p, "canopy.session.started", 0);
    s->end_ns = meta_geti(p, "canopy.session.duration_ns", 0);
    s->samples = (uint64_t)meta_geti(p, "canopy.session.samples", 0);
    s->lost_saved = (uint64_t)meta_geti(p, "canopy.session.lost", 0);
    s->dropped = (uint64_t)meta_geti(p, "canopy.session.dropped", 0);
    s->threads_saved = (uint64_t)meta_geti(p, "canopy.session.threads", 0);
    s->hit_memory_bound = meta_geti(p, "canopy.session.memory_limited", 0) != 0;
    s->user_stacks = (uint64_t)meta_geti(p, "canopy.session.user_stacks", 0);
    s->unwind_outcomes.complete = (uint64_t)meta_geti(p, "canopy.session.unwind.complete", 0);
    s->unwind_outcomes.truncated_stack =
        (uint64_t)meta_geti(p, "canopy.session.unwind.truncated_stack", 0);
    s->unwind_outcomes.no_cfi = (uint64_t)meta_geti(p, "canopy.session.unwind.no_cfi", 0);
    s->unwind_outcomes.read_fault = (uint64_t)meta_geti(p, "canopy.session.unwind.read_fault", 0);
    s->unwind_outcomes.other = (uint64_t)meta_geti(p, "canopy.session.unwind.other", 0);
    if (!s->event || !s->path) {
        cn_live_session_free(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

uint64_t cn_live_session_changes(const cn_live_session *s)
{
    return s->changes;
}

int cn_live_session_mark_saved(cn_live_session *s, const char *path, uint64_t changes)
{
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    free(s->path);
    s->path = p;
    if (s->state != CN_LIVE_RUNNING && s->changes == changes)
        s->dirty = false;
    return 0;
}
