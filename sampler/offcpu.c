/* offcpu.c — off-CPU intervals (modes OFFCPU and WALL, docs/perf-sampler.md "Off-CPU").
 *
 * A software PERF_COUNT_SW_CONTEXT_SWITCHES event with sample_period 1 samples every
 * switch-out with the session's usual callchain / registers / stack copy, so the thread's
 * stack where it went off CPU is unwound like any sample. The same event asks for
 * PERF_RECORD_SWITCH records (SWITCH_CPU_WIDE for a system target): the switch-in closes
 * the interval, and the switch-out's PREEMPT flag tells a thread that was still runnable
 * from one that blocked. Records come here in the merged time order of all CPUs.
 *
 * Data structure: the threads switched out right now, one entry each (pid, times, state,
 * a copy of the unwound frames), in a dense array indexed by an open-addressing table
 * tid -> entry index (linear probing, tombstones, rebuilt when half full); a removal moves
 * the last entry into the hole, so the array stays dense for the pending walk. Frames
 * point at the session's objects, which live as long as the session.
 *
 * Cost bound: an interval is delivered as one weighted sample at its switch-in, plus one
 * per _read while it lasts (the part not yet delivered, so live trees show waits in
 * progress), never one per nanosecond or tick: a thread blocked for an hour costs one
 * sample per read. Threads that exit are forgotten; a switch-out after the thread's exit
 * (a system target sees the dead task's last switch) is ignored. */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>

#include "smp_internal.h"

typedef struct blocked {
    pid_t pid, tid;
    uint32_t cpu;
    uint64_t out_time; /* switch-out */
    uint64_t done_to;  /* delivered up to here */
    uint64_t seen_at;  /* a seeded wait (waiting.c): when its stack was read (its start,
                          out_time, is the session's) */
    cn_smp_state state;
    cn_smp_stop stop;
    uint32_t n, nk;
    cn_smp_frame *frames; /* owned, capacity cap */
    uint32_t cap;
} blocked;

typedef struct cn_smp__offcpu {
    blocked *ent; /* dense; entries past nent keep their frame buffers for reuse */
    size_t nent, capent;
    int32_t *slots; /* tid -> index + 1; 0 empty, -1 tombstone */
    size_t nslots, used;
    uint64_t *ids; /* WALL: the context-switch events' ids, sorted */
    size_t nids, capids;
    cn_smp__tidset dead; /* exited threads (until a fork reuses the tid) */
} cn_smp__offcpu;

/* A bound on the exited-thread set of a long system session: past it the set restarts
 * (a dead task's last switch-out may then open an interval that its tid's next user
 * closes; counted as unmatched). */
#define DEAD_MAX 65536

int cn_smp__offcpu_new(cn_smp_session *s)
{
    if (s->cfg.mode == CN_SMP_MODE_CPU)
        return 0;
    s->off = calloc(1, sizeof(*s->off));
    return s->off ? 0 : -ENOMEM;
}

void cn_smp__offcpu_free(cn_smp_session *s)
{
    cn_smp__offcpu *o = s->off;
    if (!o)
        return;
    for (size_t i = 0; i < o->capent; i++)
        free(o->ent[i].frames);
    free(o->ent);
    free(o->slots);
    free(o->ids);
    free(o->dead.slots);
    free(o);
    s->off = NULL;
}

void cn_smp__offcpu_attr(const cn_smp_session *s, struct perf_event_attr *a, bool sideband)
{
    /* A context switch happens in the kernel: with exclude_kernel the kernel drops every
     * one of them. Kernel frames are left out of the callchain instead (--no-kernel);
     * where kernel sampling is not permitted, opening fails (perf_open.c says why). */
    a->exclude_kernel = 0;
    a->exclude_callchain_kernel = !s->kernel;
    a->type = PERF_TYPE_SOFTWARE;
    a->config = PERF_COUNT_SW_CONTEXT_SWITCHES;
    a->freq = 0;
    a->sample_period = 1;
    a->context_switch = 1;
    a->watermark = 1;
    if (!sideband)
        a->mmap = a->mmap2 = a->comm = a->comm_exec = a->task = 0;
}

/* ---- ids --------------------------------------------------------------------------- */

int cn_smp__offcpu_add_id(cn_smp_session *s, uint64_t id)
{
    cn_smp__offcpu *o = s->off;
    if (!o)
        return -EINVAL;
    if (CN_RESERVE(o->ids, o->capids, o->nids + 1) < 0)
        return -ENOMEM;
    /* The kernel hands out increasing ids: this is an append but for odd cases. */
    size_t i = o->nids;
    while (i > 0 && o->ids[i - 1] > id) {
        o->ids[i] = o->ids[i - 1];
        i--;
    }
    o->ids[i] = id;
    o->nids++;
    return 0;
}

bool cn_smp__offcpu_is_switch(const cn_smp_session *s, const cn_smp__rec *r)
{
    const cn_smp__offcpu *o = s->off;
    if (!o)
        return false;
    if (s->cfg.mode == CN_SMP_MODE_OFFCPU)
        return true; /* the only event */
    /* WALL: inherited events report their parent's id, one of ours. */
    size_t lo = 0, hi = o->nids;
    uint64_t id = r->u.sample.id;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < o->nids && o->ids[lo] == id;
}

/* ---- the tid table ----------------------------------------------------------------- */

static size_t slot_of(const cn_smp__offcpu *o, pid_t tid)
{
    return ((uint32_t)tid * 2654435761u) & (o->nslots - 1);
}

/* The entry index of tid, or -1. */
static ssize_t find(const cn_smp__offcpu *o, pid_t tid, size_t *slot)
{
    if (!o->nslots)
        return -1;
    for (size_t i = slot_of(o, tid), k = 0; k < o->nslots; i = (i + 1) & (o->nslots - 1), k++) {
        int32_t v = o->slots[i];
        if (v == 0)
            return -1;
        if (v > 0 && o->ent[v - 1].tid == tid) {
            if (slot)
                *slot = i;
            return v - 1;
        }
    }
    return -1;
}

static void slot_put(cn_smp__offcpu *o, pid_t tid, int32_t val)
{
    size_t i = slot_of(o, tid);
    while (o->slots[i] > 0)
        i = (i + 1) & (o->nslots - 1);
    if (o->slots[i] == 0)
        o->used++;
    o->slots[i] = val;
}

static int rehash(cn_smp__offcpu *o)
{
    size_t n = o->nslots ? o->nslots : 64;
    while (o->nent * 4 >= n)
        n *= 2;
    int32_t *slots = calloc(n, sizeof(*slots));
    if (!slots)
        return -ENOMEM;
    free(o->slots);
    o->slots = slots;
    o->nslots = n;
    o->used = 0;
    for (size_t i = 0; i < o->nent; i++)
        slot_put(o, o->ent[i].tid, (int32_t)i + 1);
    return 0;
}

/* A new entry for tid (not present). NULL on allocation failure. */
static blocked *insert(cn_smp__offcpu *o, pid_t tid)
{
    if ((o->used + 1) * 2 > o->nslots && rehash(o) < 0)
        return NULL;
    if (o->nent == o->capent) {
        size_t old = o->capent;
        if (CN_RESERVE(o->ent, o->capent, o->nent + 1) < 0)
            return NULL;
        memset(o->ent + old, 0, (o->capent - old) * sizeof(*o->ent));
    }
    blocked *b = &o->ent[o->nent++];
    b->tid = tid;
    slot_put(o, tid, (int32_t)o->nent);
    return b;
}

/* Removes entry idx found at slot; the last entry moves into its place (frame buffers
 * are swapped, not freed). */
static void erase(cn_smp__offcpu *o, size_t idx, size_t slot)
{
    o->slots[slot] = -1;
    size_t last = o->nent - 1;
    if (idx != last) {
        size_t ls = slot_of(o, o->ent[last].tid);
        while (o->slots[ls] != (int32_t)last + 1)
            ls = (ls + 1) & (o->nslots - 1);
        o->slots[ls] = (int32_t)idx + 1;
        blocked tmp = o->ent[idx];
        o->ent[idx] = o->ent[last];
        o->ent[last] = tmp;
    }
    o->nent--;
}

/* ---- delivery ---------------------------------------------------------------------- */

/* Delivers what b's interval holds from done_to to end (stamped at end: delivery stays
 * in time order with the records). */
static void deliver(cn_smp_session *s, blocked *b, uint64_t end)
{
    if (end <= b->done_to)
        return;
    uint64_t w = end - b->done_to;
    b->done_to = end;
    s->cnt.offcpu_ns += w;
    if (!s->cb.sample)
        return;
    cn_smp_sample out = {.pid = b->pid,
                         .tid = b->tid,
                         .cpu = b->cpu,
                         .time_ns = end,
                         .period = w,
                         .frames = b->frames,
                         .nframes = b->n,
                         .nkernel = b->nk,
                         .stop = b->stop,
                         .weight_ns = w,
                         .state = b->state};
    s->cb.sample(s->arg, &out);
}

/* Whether b is a seeded wait (waiting.c) that ended at t, before its stack was read: the
 * thread ran since the session began, and the stack read is of a later wait, not of this
 * one. Nothing was delivered yet: the records before the read are read before any pending
 * delivery reaches them, but for the last HOLD_NS before it. */
static bool seed_stale(const blocked *b, uint64_t t)
{
    return t < b->seen_at && b->done_to == b->out_time;
}

/* Closes b's interval at t (its switch-in). */
static void close_at(cn_smp_session *s, blocked *b, uint64_t t)
{
    s->cnt.offcpu_intervals++;
    if (seed_stale(b, t)) { /* not delivered: a wait whose stack is unknown */
        s->cnt.offcpu_unmatched++;
        s->cnt.offcpu_waiting--;
        return;
    }
    if (t < b->out_time || t - b->out_time < s->cfg.min_block_ns) {
        s->cnt.offcpu_short++;
        return; /* nothing was delivered: pending only delivers past min_block_ns */
    }
    deliver(s, b, t);
}

void cn_smp__offcpu_in(cn_smp_session *s, pid_t tid, uint64_t t, bool from_switch)
{
    cn_smp__offcpu *o = s->off;
    size_t slot;
    ssize_t i = o && tid > 0 ? find(o, tid, &slot) : -1;
    if (i < 0) {
        /* A thread that went off CPU before we started, or whose switch-out was lost. */
        if (o && from_switch && tid > 0)
            s->cnt.offcpu_unmatched++;
        return;
    }
    close_at(s, &o->ent[i], t);
    erase(o, (size_t)i, slot);
}

static bool reserve_frames(blocked *b, uint32_t n)
{
    if (b->cap >= n)
        return true;
    cn_smp_frame *f = realloc(b->frames, (n ? n : 1) * sizeof(*f));
    if (!f)
        return false;
    b->frames = f;
    b->cap = n;
    return true;
}

/* Opens r->tid's interval at r->time with the stack s->frames[0, n) (its first nk kernel
 * frames). false when out of memory: this interval is not measured. */
static bool open_at(cn_smp_session *s, const cn_smp__rec *r, uint32_t n, uint32_t nk,
                    cn_smp_stop stop)
{
    cn_smp__offcpu *o = s->off;
    pid_t tid = (pid_t)r->tid;
    blocked *b = insert(o, tid);
    if (!b)
        return false;
    if (!reserve_frames(b, n)) {
        size_t slot;
        ssize_t j = find(o, tid, &slot); /* just inserted: found */
        if (j >= 0)
            erase(o, (size_t)j, slot);
        return false;
    }
    if (n)
        memcpy(b->frames, s->frames, n * sizeof(*b->frames));
    b->pid = (pid_t)r->pid;
    b->cpu = r->cpu;
    b->out_time = b->done_to = r->time;
    b->seen_at = 0;
    b->state = CN_SMP_STATE_BLOCKED;
    b->stop = stop;
    b->n = n;
    b->nk = nk;
    return true;
}

void cn_smp__offcpu_out(cn_smp_session *s, const cn_smp__rec *r, uint32_t n, uint32_t nk,
                        cn_smp_stop stop)
{
    cn_smp__offcpu *o = s->off;
    pid_t tid = (pid_t)r->tid;
    s->cnt.switches++;
    if (!o || tid <= 0 || cn_smp__tidset_has(&o->dead, tid))
        return; /* the idle task, or a thread's last switch after its exit */
    size_t slot;
    ssize_t i = find(o, tid, &slot);
    if (i >= 0) {
        /* Its switch-in was lost: what we know ends here (close_at counts a stale seed). */
        if (!seed_stale(&o->ent[i], r->time))
            s->cnt.offcpu_unmatched++;
        close_at(s, &o->ent[i], r->time);
        erase(o, (size_t)i, slot);
    }
    open_at(s, r, n, nk, stop);
}

void cn_smp__offcpu_seed(cn_smp_session *s, const cn_smp__rec *r, uint32_t n, uint32_t nk,
                         cn_smp_stop stop, uint64_t seen_at)
{
    cn_smp__offcpu *o = s->off;
    pid_t tid = (pid_t)r->tid;
    if (!o || tid <= 0 || find(o, tid, NULL) >= 0)
        return; /* a switch-out seen already: its own stack, from the kernel */
    if (open_at(s, r, n, nk, stop)) {
        s->cnt.offcpu_waiting++;
        o->ent[find(o, tid, NULL)].seen_at = seen_at;
    }
}

size_t cn_smp__offcpu_waiters(const cn_smp_session *s, pid_t pid, pid_t *tids, size_t max)
{
    const cn_smp__offcpu *o = s->off;
    size_t k = 0;
    for (size_t i = 0; o && i < o->nent && k < max; i++)
        if (o->ent[i].pid == pid)
            tids[k++] = o->ent[i].tid;
    return k;
}

bool cn_smp__offcpu_restack(cn_smp_session *s, pid_t tid, uint32_t n, uint32_t nk, cn_smp_stop stop)
{
    cn_smp__offcpu *o = s->off;
    ssize_t i = o && tid > 0 ? find(o, tid, NULL) : -1;
    if (i < 0)
        return false;
    blocked *b = &o->ent[i];
    /* The same wait: the thread blocked where it was seen blocking (the innermost user frame,
     * a return address into the same instruction). Else it ran meanwhile and its records, not
     * read yet, will say so: the entry is left as it is. */
    if (n <= nk || b->n <= b->nk || b->frames[b->nk].obj != s->frames[nk].obj ||
        b->frames[b->nk].offset != s->frames[nk].offset || !reserve_frames(b, b->nk + n - nk))
        return false;
    /* the kernel frames of its switch-out stay: /proc gives user registers only */
    memcpy(b->frames + b->nk, s->frames + nk, (n - nk) * sizeof(*b->frames));
    b->n = b->nk + n - nk;
    b->stop = stop;
    return true;
}

void cn_smp__offcpu_switch(cn_smp_session *s, const cn_smp__rec *r)
{
    cn_smp__offcpu *o = s->off;
    if (!o)
        return;
    pid_t tid = (pid_t)r->tid;
    if (!(r->misc & PERF_RECORD_MISC_SWITCH_OUT)) {
        cn_smp__offcpu_in(s, tid, r->time, true);
        return;
    }
    /* The switch-out record follows the context-switch sample of the same switch. */
    ssize_t i = tid > 0 ? find(o, tid, NULL) : -1;
    if (i >= 0 && (r->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT))
        o->ent[i].state = CN_SMP_STATE_PREEMPTED;
}

void cn_smp__offcpu_fork(cn_smp_session *s, pid_t tid)
{
    if (s->off)
        cn_smp__tidset_del(&s->off->dead, tid);
}

void cn_smp__offcpu_exit(cn_smp_session *s, pid_t tid, uint64_t t)
{
    cn_smp__offcpu *o = s->off;
    if (!o || tid <= 0)
        return;
    size_t slot;
    ssize_t i = find(o, tid, &slot);
    if (i >= 0) {
        close_at(s, &o->ent[i], t);
        erase(o, (size_t)i, slot);
    }
    if (o->dead.live >= DEAD_MAX) {
        free(o->dead.slots);
        o->dead = (cn_smp__tidset){0};
    }
    cn_smp__tidset_add(&o->dead, tid);
}

uint64_t cn_smp__offcpu_cpu_weight(const cn_smp_session *s, const cn_smp__rec *r)
{
    /* The clock events count nanoseconds: their period is the time the sample stands for;
     * any other event's samples stand for one sampling interval. */
    bool clock = s->perf_type == PERF_TYPE_SOFTWARE && (s->perf_config == PERF_COUNT_SW_CPU_CLOCK ||
                                                        s->perf_config == PERF_COUNT_SW_TASK_CLOCK);
    if (clock && r->u.sample.period)
        return r->u.sample.period;
    return 1000000000ull / (s->cfg.freq ? s->cfg.freq : 99);
}

int cn_smp_session_pending(cn_smp_session *s, uint64_t now_ns)
{
    if (!s)
        return -EINVAL;
    cn_smp__offcpu *o = s->off;
    int got = 0;
    for (size_t i = 0; o && i < o->nent; i++) {
        blocked *b = &o->ent[i];
        if (now_ns <= b->done_to || now_ns - b->out_time < s->cfg.min_block_ns)
            continue;
        deliver(s, b, now_ns);
        got++;
    }
    return got;
}

/* ---- names ------------------------------------------------------------------------- */

const char *cn_smp_mode_name(cn_smp_mode m)
{
    switch (m) {
    case CN_SMP_MODE_CPU:
        return "cpu";
    case CN_SMP_MODE_OFFCPU:
        return "off-cpu";
    case CN_SMP_MODE_WALL:
        return "wall";
    }
    return "?";
}

int cn_smp_mode_parse(const char *name, cn_smp_mode *ret)
{
    if (!name || !ret)
        return -EINVAL;
    for (int m = CN_SMP_MODE_CPU; m <= CN_SMP_MODE_WALL; m++)
        if (strcmp(name, cn_smp_mode_name((cn_smp_mode)m)) == 0) {
            *ret = (cn_smp_mode)m;
            return 0;
        }
    return -EINVAL;
}

const char *cn_smp_state_name(cn_smp_state st)
{
    switch (st) {
    case CN_SMP_STATE_RUNNING:
        return "running";
    case CN_SMP_STATE_BLOCKED:
        return "blocked";
    case CN_SMP_STATE_PREEMPTED:
        return "preempted";
    }
    return "?";
}
