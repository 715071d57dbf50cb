/* python.c — Python functions in the session's stacks (docs/python.md, "Phase 2").
 *
 * interp/ captures a registered CPython process's frame chain in each sample (a BPF program
 * attached to the session's perf events) and queues one record per sample; this file owns
 * the session's interp context and does the rest:
 * - starting: cn_int_new() before the events are opened, cn_int_attach() on every perf fd
 *   (perf_open.c's add_fd, so auto's reopen and WALL's switch events too); a failure leaves
 *   the session native-only with a one-line reason ("python frames: off (...)");
 * - registering: a process that maps an object named python3... or libpython3... (MMAP2),
 *   an attach target and the processes of a system session's start that already map one, a
 *   fork of a registered process; unregistered at exec and exit;
 * - the join and the splice: a sample of a registered process takes its record
 *   (cn_int_take by pid, tid and the sample's time) and each native frame in
 *   _PyEval_EvalFrameDefault is replaced by the Python frames that eval call ran;
 * - frames: one object of kind CN_SMP_OBJ_PYTHON per .py file, the frame's offset a hash of
 *   (pid, code object, instruction), whose names (qualname, file, line) are read once, when
 *   the frame is first met, and answered by cn_smp_python_frame() for live/.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "cn_int.h"
#include "smp_internal.h"

#define PY_TRIES       3          /* registrations tried per process image */
#define PY_MAX_FRAMES  (1u << 20) /* distinct (pid, code, instruction) frames named */
#define PY_EXPIRE_NS   200000000  /* queued records this much older than a sample are stale */
#define PY_EXPIRE_EACH 1024       /* samples between two expiries */
#define PY_INSTR_NONE  0xfffffu   /* a frame offset's instruction bits: none, or too big */
#define PY_SALTS       16         /* hashes tried per (pid, code object) */
#define PY_EPOCH_NS    100000000  /* at most one epoch (code objects checked again) per 100 ms */
#define PY_RECENT      1024       /* frames remembered by (pid, code, instr); a power of two */

typedef struct py_ent {
    uint64_t offset; /* the frame's offset in its object: hash of (pid, code), instr */
    uint32_t pid;
    uint64_t code;
    int32_t instr;
    const cn_smp__obj *obj;
    char *name; /* qualname, or CN_INT_UNREADABLE */
    int line, first_line;
    uint32_t epoch; /* the interp epoch it was last checked in (cn_int_new_epoch) */
    bool stale;     /* its code object was freed and the address reused: never again */
    bool marker;    /* not a code object's: "[python: sub-interpreter N]" */
} py_ent;

struct cn_smp__py {
    cn_int_ctx *ctx;
    bool off;        /* the program could not be loaded or attached: native only */
    char why[200];   /* off: why; else the last refusal ("pid N: …") */
    char state[240]; /* cn_smp_session_python() */
    cn_int_record rec;
    cn_u64map index; /* offset → ents[i] */
    py_ent *ents;
    size_t nents, cap;
    uint64_t since_expire;
    uint32_t epoch;    /* bumped with cn_int_new_epoch: at a read, PY_EPOCH_NS after the last */
    uint64_t epoch_ns; /* (uint64_t)cn_common_now_ns() of the last epoch */
    uint64_t changes;  /* cn_int_changes() when the epoch last moved */
    /* The frames met lately, by (pid, code object, instruction): consecutive samples of a
     * thread share most of their frames, and this small table, in cache, answers them
     * without the salted hash and the index lookup (a cache miss each, per frame). */
    struct {
        uint64_t code, key; /* key: pid << 32 | instruction bits */
        int32_t ent;
    } recent[PY_RECENT];
    uint32_t multi_pid; /* the first process seen running sub-interpreters (0 none) */
    bool ambiguous;     /* a sample's interpreter could not be told */
};

static void update_state(cn_smp_session *s)
{
    cn_smp__py *py = s->py;
    if (!py)
        snprintf(s->py_state, sizeof(s->py_state), "off (--no-python)");
    else if (py->off)
        snprintf(s->py_state, sizeof(s->py_state), "off (%.200s)", py->why);
    else if (s->cnt.py_refused && !s->cnt.py_registered)
        snprintf(s->py_state, sizeof(s->py_state), "off (%.200s)", py->why);
    else if (py->multi_pid)
        snprintf(s->py_state, sizeof(s->py_state), "on (pid %u runs sub-interpreters%s)",
                 py->multi_pid, py->ambiguous ? "; some threads' interpreter unknown" : "");
    else
        snprintf(s->py_state, sizeof(s->py_state), "on");
}

int cn_smp__py_start(cn_smp_session *s)
{
    if (s->cfg.no_python || s->cfg.target == CN_SMP_TARGET_NONE) {
        update_state(s);
        return 0;
    }
    cn_smp__py *py = calloc(1, sizeof(*py));
    if (!py)
        return -ENOMEM;
    s->py = py;
    cn_err err = {0};
    int r = cn_int_new(&py->ctx, &err);
    if (r < 0) {
        py->off = true;
        snprintf(py->why, sizeof(py->why), "BPF load: %.150s", err.msg[0] ? err.msg : strerror(-r));
    }
    update_state(s);
    return 0;
}

void cn_smp__py_attach(cn_smp_session *s, int fd)
{
    cn_smp__py *py = s->py;
    if (!py || py->off || !py->ctx)
        return;
    cn_err err = {0};
    int r = cn_int_attach(py->ctx, fd, &err);
    if (r < 0) {
        /* Some events would run the program and others not: none are joined from now. */
        py->off = true;
        snprintf(py->why, sizeof(py->why), "%.180s", err.msg[0] ? err.msg : strerror(-r));
        update_state(s);
    }
}

void cn_smp__py_stop(cn_smp_session *s)
{
    /* A stopped session stays queryable for long: its frames' names are in the table, the
     * program, its maps and its 4 MiB ring go now. */
    if (s->py)
        s->py->ctx = cn_int_free(s->py->ctx); /* after close_all: the events held it */
}

void cn_smp__py_free(cn_smp_session *s)
{
    cn_smp__py *py = s->py;
    if (!py)
        return;
    cn_int_free(py->ctx); /* after close_all: the events held the program */
    for (size_t i = 0; i < py->nents; i++)
        free(py->ents[i].name);
    free(py->ents);
    cn_u64map_clear(&py->index);
    free(py);
    s->py = NULL;
}

/* ---------------------------------------------------------------------------------------
 * Registering
 */

/* Whether an object's file name is CPython's: python3…, libpython3…. */
static bool python_name(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    return !strncmp(b, "python3", 7) || !strncmp(b, "libpython3", 10);
}

static void try_register(cn_smp_session *s, cn_smp__proc *p)
{
    cn_smp__py *py = s->py;
    if (!py || py->off || !py->ctx || !p || p->py_registered || p->py_tries >= PY_TRIES)
        return;
    p->py_tries++;
    cn_err err = {0};
    int r = cn_int_register(py->ctx, p->pid, NULL, &err);
    if (r == 0) {
        p->py_registered = true;
        /* Records start when the registration ends (the program's map entry is written
         * last), not when it starts: reading the interpreter's symbols and layout takes tens
         * of milliseconds, and the samples of that time have no record. */
        p->py_since = (uint64_t)cn_common_now_ns();
        s->cnt.py_registered++;
        cn_smp__waiting_python(s, p); /* its threads waiting since before: their frames now */
    } else if (r != -ESRCH) {
        s->cnt.py_refused++;
        snprintf(py->why, sizeof(py->why), "pid %d: %.150s", (int)p->pid,
                 err.msg[0] ? err.msg : strerror(-r));
    }
    update_state(s);
}

void cn_smp__py_mapped(cn_smp_session *s, cn_smp__proc *p, const char *path)
{
    if (s->py && p && !p->py_registered && python_name(path))
        try_register(s, p);
}

void cn_smp__py_scan(cn_smp_session *s, cn_smp__proc *p)
{
    if (!s->py || !p)
        return;
    for (size_t i = 0; i < p->nmaps && !p->py_registered; i++) {
        const char *path = p->maps[i].obj->pub.path;
        if (path && python_name(path)) {
            try_register(s, p);
            return;
        }
    }
}

void cn_smp__py_scan_text(cn_smp_session *s, cn_smp__proc *p, const char *maps)
{
    if (!s->py || !p || !maps)
        return;
    for (const char *l = maps; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        const char *slash = memchr(l, '/', len);
        if (slash) {
            char path[512];
            size_t n = len - (size_t)(slash - l);
            n = n < sizeof(path) - 1 ? n : sizeof(path) - 1;
            memcpy(path, slash, n);
            path[n] = 0;
            if (python_name(path)) {
                try_register(s, p);
                return;
            }
        }
        l = nl ? nl + 1 : NULL;
    }
}

void cn_smp__py_fork(cn_smp_session *s, const cn_smp__proc *parent, cn_smp__proc *child)
{
    if (parent && child && parent->py_registered)
        try_register(s, child);
}

void cn_smp__py_forget(cn_smp_session *s, cn_smp__proc *p)
{
    if (!p)
        return;
    if (s->py && s->py->ctx && p->py_registered && !s->py->off)
        cn_int_unregister(s->py->ctx, p->pid);
    p->py_registered = false;
    p->py_tries = 0;
}

/* ---------------------------------------------------------------------------------------
 * Frames
 */

static py_ent *find_ent(const cn_smp__py *py, uint64_t offset)
{
    int32_t i = cn_u64map_get(&py->index, offset);
    return i >= 0 ? &py->ents[i] : NULL;
}

/* Whether entry e (of its pid and code object) still names that code object: checked once
 * per epoch, through cn_int_func_of (which reads the object again when interp's own check
 * finds it changed). */
static bool still_valid(cn_smp_session *s, py_ent *e)
{
    cn_smp__py *py = s->py;
    if (e->epoch == py->epoch)
        return true;
    cn_int_func fn;
    bool same;
    if (cn_int_func_of(py->ctx, e->pid, e->code, &fn) != 0)
        same = true; /* no longer registered (exit, exec): nothing to compare with */
    else if (fn.readable)
        same = !strcmp(fn.name, e->name) &&
               !strcmp(fn.filename, e->obj->pub.path ? e->obj->pub.path : "");
    else
        same = !strcmp(e->name, CN_INT_UNREADABLE);
    if (!same) {
        e->stale = true;
        s->cnt.py_replaced++;
        return false;
    }
    e->epoch = py->epoch;
    return true;
}

/* A new epoch at the first read PY_EPOCH_NS after the last one, not at every read: each code
 * object used in an epoch is checked with a read of the target (a process_vm_readv of ~6 µs
 * on the project's VM), and reads come at every ring wakeup and tick (~50 a second at 999
 * Hz): that was ~0.8 µs per sample (docs/python.md, "Cost"). A code object freed and another
 * allocated at its address is seen up to ~100 ms later instead of ~20–50. */
void cn_smp__py_epoch(cn_smp_session *s)
{
    cn_smp__py *py = s->py;
    if (!py || !py->ctx)
        return;
    uint64_t now = (uint64_t)cn_common_now_ns();
    if (py->epoch_ns && now - py->epoch_ns < PY_EPOCH_NS)
        return;
    py->epoch_ns = now;
    cn_int_new_epoch(py->ctx);
    py->epoch++;
}

/* The frame of (pid, code, instr), named when first met (and again, as a new frame, when
 * its code object was replaced by another at the same address). NULL on ENOMEM. */
static const py_ent *frame_of(cn_smp_session *s, uint32_t pid, uint64_t code, int32_t instr)
{
    cn_smp__py *py = s->py;
    if (py->nents >= PY_MAX_FRAMES) { /* past the bound: one frame per function */
        s->cnt.py_frames_bound++;
        instr = -1;
    }
    /* The offset: 42 bits of a hash of (pid, code object) above the instruction's 20 bits
     * (all ones: no instruction), so `canopy lines` shows instructions in its offsets; a
     * hash shared by two functions, or by a code object and the one freed before it at its
     * address, takes the next salt. */
    uint64_t ins = instr >= 0 && (uint32_t)instr < PY_INSTR_NONE ? (uint64_t)instr : PY_INSTR_NONE;
    uint64_t rkey = (uint64_t)pid << 32 | ins;
    size_t slot = (size_t)(((code ^ rkey * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull) >> 54) &
                  (PY_RECENT - 1);
    if (py->recent[slot].code == code && py->recent[slot].key == rkey &&
        (size_t)py->recent[slot].ent < py->nents) {
        py_ent *r = &py->ents[py->recent[slot].ent];
        if (r->pid == pid && r->code == code && !r->stale && !r->marker && still_valid(s, r))
            return r;
    }
    uint64_t off = 0;
    py_ent *e = NULL;
    for (uint32_t salt = 0; salt < PY_SALTS; salt++) {
        uint64_t key[2] = {code, (uint64_t)pid | (uint64_t)salt << 32};
        off = (XXH3_64bits(key, sizeof(key)) & ((1ULL << 42) - 1)) << 20 | ins;
        e = find_ent(py, off);
        if (!e)
            break;
        if (e->pid == pid && e->code == code && !e->stale && !e->marker && still_valid(s, e)) {
            py->recent[slot].code = code;
            py->recent[slot].key = rkey;
            py->recent[slot].ent = (int32_t)(e - py->ents);
            return e;
        }
        if (e->pid != pid || e->code != code || e->marker)
            s->cnt.py_collisions++; /* another function on this hash; else a replaced one */
    }
    if (e)
        return NULL; /* every salt taken: counted as an error by the caller */
    instr = (int32_t)(ins == PY_INSTR_NONE ? -1 : (int32_t)ins);
    if (CN_RESERVE(py->ents, py->cap, py->nents + 1) < 0)
        return NULL;
    cn_int_func fn;
    const char *file = "";
    const char *name = CN_INT_UNREADABLE;
    int first = 0, line = 0;
    if (cn_int_func_of(py->ctx, pid, code, &fn) == 0 && fn.readable) {
        name = fn.name;
        file = fn.filename;
        first = fn.first_line;
        line = instr >= 0 ? cn_int_line(py->ctx, pid, code, instr) : 0;
    }
    const cn_smp__obj *o = cn_smp__obj_python(s, file);
    char *nm = strdup(name);
    if (!o || !nm || cn_u64map_put(&py->index, off, (int32_t)py->nents) < 0) {
        free(nm);
        return NULL;
    }
    py->ents[py->nents] =
        (py_ent){off, pid, code, instr, o, nm, line ? line : first, first, py->epoch, false, false};
    s->cnt.py_frames++;
    py->recent[slot].code = code;
    py->recent[slot].key = rkey;
    py->recent[slot].ent = (int32_t)py->nents;
    return &py->ents[py->nents++];
}

/* The frame "[python: sub-interpreter ID]" (id < 0: "?", the interpreter unknown) of process
 * pid: an entry of no code object, in the file-less Python object. NULL on ENOMEM or when
 * every salt is taken. */
static const py_ent *marker_of(cn_smp_session *s, uint32_t pid, int64_t id)
{
    cn_smp__py *py = s->py;
    char name[64];
    if (id < 0)
        snprintf(name, sizeof(name), "[python: sub-interpreter ?]");
    else
        snprintf(name, sizeof(name), "[python: sub-interpreter %lld]", (long long)id);
    /* keyed apart from code objects: no user-space address has the top bit set */
    uint64_t code = (1ull << 63) | (uint64_t)(id < 0 ? 0xffffffffu : (uint32_t)id);
    for (uint32_t salt = 0; salt < PY_SALTS; salt++) {
        uint64_t key[2] = {code, (uint64_t)pid | (uint64_t)salt << 32};
        uint64_t off = (XXH3_64bits(key, sizeof(key)) & ((1ULL << 42) - 1)) << 20 | PY_INSTR_NONE;
        py_ent *e = find_ent(py, off);
        if (e && e->marker && e->pid == pid && e->code == code)
            return e;
        if (e)
            continue;
        const cn_smp__obj *o = cn_smp__obj_python(s, "");
        char *nm = strdup(name);
        if (!o || !nm || CN_RESERVE(py->ents, py->cap, py->nents + 1) < 0 ||
            cn_u64map_put(&py->index, off, (int32_t)py->nents) < 0) {
            free(nm);
            return NULL;
        }
        py->ents[py->nents] = (py_ent){off, pid, code, -1, o, nm, 0, 0, py->epoch, false, true};
        s->cnt.py_frames++;
        return &py->ents[py->nents++];
    }
    return NULL;
}

static void add_marker(cn_smp_session *s, uint32_t pid, int64_t id, uint32_t *n)
{
    if (*n >= CN_SMP_MAX_FRAMES)
        return;
    const py_ent *e = marker_of(s, pid, id);
    if (e)
        s->frames[(*n)++] = (cn_smp_frame){&e->obj->pub, e->offset};
    else
        s->cnt.py_errors++;
}

/* Appends the Python frames [from, to) of the record (innermost first) to s->frames. */
static void add_segment(cn_smp_session *s, uint32_t from, uint32_t to, uint32_t *n)
{
    const cn_int_record *rec = &s->py->rec;
    for (uint32_t i = from; i < to && *n < CN_SMP_MAX_FRAMES; i++) {
        const py_ent *e = frame_of(s, rec->pid, rec->frames[i].code, rec->frames[i].instr);
        if (e)
            s->frames[(*n)++] = (cn_smp_frame){&e->obj->pub, e->offset};
        else
            s->cnt.py_errors++;
    }
}

int cn_smp__py_capture(cn_smp_session *s, const cn_smp__proc *p, pid_t tid, uint64_t time)
{
    if (!cn_smp__py_wanted(s, p))
        return -ENOENT;
    return cn_int_capture(s->py->ctx, (uint32_t)p->pid, (uint32_t)tid, time);
}

bool cn_smp__py_wanted(const cn_smp_session *s, const cn_smp__proc *p)
{
    return s->py && !s->py->off && s->py->ctx && p && p->py_registered;
}

uint32_t cn_smp__py_segments(const cn_int_frame *f, uint32_t nf, uint32_t *seg_end)
{
    uint32_t nseg = 0;
    for (uint32_t i = 0; i < nf; i++)
        if (f[i].entry || i == nf - 1)
            seg_end[nseg++] = i + 1;
    return nseg;
}

uint32_t cn_smp__py_plan(const uint8_t *kind, int nuser, uint32_t nseg, bool whole, int32_t *steps,
                         bool *matched)
{
    uint32_t n = 0, seg = 0, neval = 0;
    for (int i = 0; i < nuser; i++)
        neval += kind[i] == CN_SMP__PY_EVAL;
    /* A whole chain with fewer segments than eval frames: a call entering the eval loop
     * (its native frame runs before its frame is in the chain: 3.11 and 3.12 publish its
     * _PyCFrame first, 3.13 makes the frame current last) or returning from it (the
     * caller's state restored while its native frame runs on) has no frames of its own in
     * the chain; the segments are the outer calls'. Shifted inward, each would sit one call
     * too deep (the module's frames under the C function that called the key function:
     * 1.7% of a sort-with-key loop's samples on 3.12, 3.5% on 3.13). */
    uint32_t skip = whole && neval > nseg ? neval - nseg : 0;
    for (int i = 0; i < nuser; i++) {
        bool eval = kind[i] == CN_SMP__PY_EVAL;
        if (eval && skip > 0) {
            skip--;
            steps[n++] = i;
        } else if (eval && seg < nseg) {
            steps[n++] = -(int32_t)++seg; /* segment seg - 1 in place of the eval frame */
            if (i + 1 < nuser && kind[i + 1] == CN_SMP__PY_TRAMPOLINE)
                i++; /* -X perf: the trampoline that called it goes with it */
        } else {
            steps[n++] = i;
        }
    }
    /* More segments than eval frames (a native unwind cut short, an eval loop without its
     * symbol, -X perf trampolines where the unwind stops): the outer ones go above the
     * outermost native frame. */
    while (seg < nseg)
        steps[n++] = -(int32_t)++seg;
    *matched = neval == nseg;
    return n;
}

/* The splice (docs/python.md, "Phase 2: the splice"). The user frames s->pcs[0, nuser) (leaf
 * first, raw) go to s->frames from *n on, as add_user does, except that each native frame in
 * the eval loop is replaced by the Python frames that eval call ran. Returns false, nothing
 * written, when the sample has no record with frames (the caller adds the native frames). */
bool cn_smp__py_splice(cn_smp_session *s, const cn_smp__proc *p, const cn_smp__rec *r, int nuser,
                       uint32_t *n, cn_smp__add_user_fn add_user, const cn_smp__map **last)
{
    cn_smp__py *py = s->py;
    s->cnt.py_samples++;
    if (++py->since_expire >= PY_EXPIRE_EACH && r->time > PY_EXPIRE_NS) {
        py->since_expire = 0;
        cn_int_expire(py->ctx, r->time - PY_EXPIRE_NS);
    }
    if (cn_int_take(py->ctx, r->pid, r->tid, r->time, &py->rec) != 1) {
        if (r->time < p->py_since)
            s->cnt.py_before++; /* taken before the process was registered */
        else
            s->cnt.py_no_record++;
        return false;
    }
    const cn_int_record *rec = &py->rec;
    if (rec->multi && !py->multi_pid) {
        py->multi_pid = rec->pid;
        update_state(s);
    }
    bool ambiguous = rec->status == CN_INT_AMBIGUOUS;
    if (ambiguous && !py->ambiguous) {
        py->ambiguous = true;
        update_state(s);
    }
    if (rec->nframes == 0 && !ambiguous) {
        s->cnt.py_no_frames++;
        return false;
    }
    uint64_t changes = cn_int_changes(py->ctx);
    if (changes != py->changes) {
        /* interp's checks found code objects replaced: every frame is checked again (a
         * lookup in interp's cache for those unchanged) rather than at the next epoch */
        py->changes = changes;
        py->epoch++;
    }
    s->cnt.py_joined++;
    s->cnt.py_subinterp += rec->sub;
    s->cnt.py_ambiguous += ambiguous;
    uint32_t seg_end[CN_INT_MAX_FRAMES];
    uint32_t nf = rec->nframes < CN_INT_MAX_FRAMES ? rec->nframes : CN_INT_MAX_FRAMES;
    /* an ambiguous record: one segment, the marker, in place of the innermost eval frame */
    uint32_t nseg = ambiguous ? 1 : cn_smp__py_segments(rec->frames, nf, seg_end);
    uint8_t kind[CN_SMP_MAX_FRAMES];
    uint64_t addr[CN_SMP_MAX_FRAMES];
    const cn_smp__map *m = NULL;
    for (int i = 0; i < nuser; i++) {
        addr[i] = i > 0 ? s->arch->mask_ret(s->pcs[i]) - 1 : s->pcs[i]; /* into the call */
        kind[i] = CN_SMP__PY_NATIVE;
        if (cn_int_is_eval(py->ctx, r->pid, addr[i])) {
            kind[i] = CN_SMP__PY_EVAL;
        } else if (i > 0 && kind[i - 1] == CN_SMP__PY_EVAL) {
            /* 3.12+'s -X perf: a trampoline in anonymous executable memory calls each eval */
            m = m && addr[i] >= m->start && addr[i] < m->end ? m : cn_smp__proc_find(p, addr[i]);
            if (m && m->obj->pub.kind == CN_SMP_OBJ_JIT)
                kind[i] = CN_SMP__PY_TRAMPOLINE;
        }
    }
    int32_t steps[CN_SMP_MAX_FRAMES + CN_INT_MAX_FRAMES];
    bool matched;
    bool whole = rec->status == CN_INT_OK && !rec->sub;
    uint32_t nsteps = cn_smp__py_plan(kind, nuser, nseg, whole, steps, &matched);
    if (!matched)
        s->cnt.py_mismatch++;
    for (uint32_t k = 0; k < nsteps; k++) {
        if (steps[k] >= 0) {
            add_user(s, p, n, addr[steps[k]], last);
        } else {
            uint32_t seg = (uint32_t)(-steps[k] - 1);
            if (rec->status == CN_INT_AMBIGUOUS) {
                add_marker(s, rec->pid, -1, n); /* its one "segment": no frames of its own */
                continue;
            }
            add_segment(s, seg ? seg_end[seg - 1] : 0, seg_end[seg], n);
            uint32_t from = seg ? seg_end[seg - 1] : 0;
            if (rec->sub && from < rec->nsub && seg_end[seg] >= rec->nsub)
                add_marker(s, rec->pid, rec->interp, n); /* above the interpreter's frames */
        }
    }
    return true;
}

/* ---------------------------------------------------------------------------------------
 * Public
 */

const char *cn_smp_session_python(const cn_smp_session *s)
{
    return s ? s->py_state : "off";
}

int cn_smp_python_frame(const cn_smp_session *s, const cn_smp_object *obj, uint64_t offset,
                        cn_smp_python_info *out)
{
    if (!s || !obj || !out || obj->kind != CN_SMP_OBJ_PYTHON || !s->py)
        return -ENOENT;
    const py_ent *e = find_ent(s->py, offset);
    if (!e || &e->obj->pub != obj)
        return -ENOENT;
    out->name = e->name;
    out->file = obj->path ? obj->path : "";
    out->line = e->line;
    out->first_line = e->first_line;
    return 0;
}
