// SPDX-License-Identifier: GPL-2.0
/* python.bpf.c — CPython's frame chain, captured in the perf event's overflow handler.
 *
 * Attached to a session's sampling perf events (BPF_PROG_TYPE_PERF_EVENT). The kernel runs it
 * on every overflow, on the sampled CPU, after perf_prepare_sample() filled the sample (so its
 * time is known; before 6.3 the program runs first: the join's ktime fallback, queue.c) and
 * before the sample is written into the perf ring. For a process user space
 * registered (map "procs"), it finds the current thread's PyThreadState (a per-thread cache,
 * checked, else a bounded search of _PyRuntime's interpreters and threads by pthread_self(),
 * which thread_self() computes from the thread pointer), walks at most CN_INT_ABI_MAX_FRAMES
 * frames and writes one record (code object, instruction offset, entry flag per frame) into the
 * ring buffer "ring". Every read of the target is bpf_probe_read_user (a fault ends the walk, never
 * the program). It always returns 1: the perf sample is written as if no program were attached.
 *
 * The GPL licence is the kernel's condition for the probe-read helpers. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "python_abi.h"

/* The kernel types read, by name: CO-RE relocates their offsets against the running kernel's
 * BTF (/sys/kernel/btf/vmlinux), so no vmlinux.h is generated at build time. */
/* The thread pointer: x86-64's fs base, arm64's TPIDR_EL0 as saved for the task (thread.uw, an
 * unnamed struct there: a member struct of any name matches it). Each kernel has one of the two
 * fields; bpf_core_field_exists picks it at load time and the other read is dead code. */
struct thread_uw {
    unsigned long tp_value;
} __attribute__((preserve_access_index));
struct thread_struct {
    unsigned long fsbase;
    struct thread_uw uw;
} __attribute__((preserve_access_index));
struct task_struct {
    struct thread_struct thread;
} __attribute__((preserve_access_index));
struct perf_sample_data {
    __u64 time;
} __attribute__((preserve_access_index));
struct bpf_perf_event_data_kern {
    struct perf_sample_data *data;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *) __ksym __weak;

/* The pid namespace of the process that loads the program (set before loading): pids and tids
 * are taken in it, as the perf samples of the events it opens report them and as it names
 * the processes it registers (canopyd in the initial namespace, canopy in a container). */
const volatile __u64 pidns_dev = 0;
const volatile __u64 pidns_ino = 0;
/* Set when that namespace is the initial one: every task's pid there is its kernel pid,
 * which bpf_get_current_pid_tgid() gives without the namespace helper's lookups (the
 * helper: 0.09 of the program's ~1.1 µs a run, docs/python.md "Eighteenth session"). */
const volatile __u32 pidns_initial = 0;

#define FRAME_OWNED_BY_CSTACK 3

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, struct cn_int_abi_proc);
} procs SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, CN_INT_ABI_CHECK_SLOTS);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, struct cn_int_abi_check);
} checks SEC(".maps");

/* A thread's PyThreadState, or (tstate 0) the time a search found none: a native thread of a
 * Python process (a BLAS pool's, say) is searched again at most every NEG_NS, not on every
 * sample (a search reads two words per thread state of the process). */
struct tcache {
    __u64 tstate;
    __u64 miss_time;
};
#define NEG_NS 50000000ull
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 16384);
    __type(key, __u32); /* tid */
    __type(value, struct tcache);
} tstates SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 4 << 20);
} ring SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct cn_int_abi_record);
} scratch SEC(".maps");

/* The bytes of the last read of the frame chain: one frame's (a read costs ~70 ns; four of them
 * per frame made a 100-frame stack cost 30 µs) or, 3.11+, a window of up to
 * CN_INT_ABI_WINDOW bytes ending at a frame's end, which often holds its callers too. Fields
 * are taken at masked offsets, so the verifier sees every access inside the buffer. */
struct fbuf {
    __u8 b[2 * CN_INT_ABI_WINDOW + 128]; /* the verifier's bound on a read's size: < 2 windows */
};
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct fbuf);
} fbufs SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, CN_INT_ABI_S_NSTATS);
    __type(key, __u32);
    __type(value, __u64);
} stats SEC(".maps");

static __always_inline void count(__u32 which)
{
    __u64 *v = bpf_map_lookup_elem(&stats, &which);
    if (v)
        *v += 1;
}

static __always_inline __u64 rd64(__u64 addr)
{
    __u64 v = 0;
    if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr) < 0)
        return 0;
    return v;
}

/* The walk's state, on the program's stack, handed to the bpf_loop callbacks (bpf_loop: each
 * callback is verified once, where an open-coded loop of this size is not verifiable). */
struct walk {
    struct cn_int_abi_layout l;
    __u64 self;             /* the thread's pthread_self(), which CPython stores as thread_id */
    __u64 interp, t, found; /* thread-state search */
    __u64 found_interp;     /* the interpreter found's */
    __u32 multi;            /* the process has several interpreters: every match counted */
    __u32 nmatch_interps;   /* multi: interpreters holding a state of the thread */
    __u32 nactive;          /* multi: of the matches, states marked active (3.12+) */
    __u32 nmatch;           /* multi: states of the thread */
    __u64 last_match_interp, active, active_interp, inactive;
    __u64 outer;          /* the frames to walk once the chain ends (0: none) */
    __u32 nsub, nsub_set; /* frames written when the walk moved to outer */
    __u64 frame0;         /* the cached thread state's frame word, read with its thread_id */
    __u32 have_frame0;
    __u64 f;      /* frame walk: the next frame */
    __u64 expect; /* check_entry: the caller's current frame (entry_checked) */
    __u32 check_entry;
    __u64 win_lo; /* the target's bytes [win_lo, win_lo + win_len) are in fb */
    __u32 win_len;
    __u32 n, status;
    struct cn_int_abi_record *r; /* the per-CPU scratch record and frame buffer, looked up */
    struct fbuf *fb;             /* once per sample rather than once per frame */
};

/* The walk's state starts as a copy of this (zero), made by a helper. Its fields then hold
 * values the verifier does not know. Kernels that verify a bpf_loop callback once, in the state
 * of the call (Debian 12's 6.1: found on the arm64 machine, docs/python.md "arm64"), would take
 * the zeros of an initializer as constants inside the callbacks and drop as dead the branches
 * taken once they change: the search then never looked at a thread (w->t "is" 0), the window
 * was read for every frame, the 3.12+ entry flags were lost. Kernels that verify callbacks for
 * any number of iterations (this host's 6.18) run the same code either way. */
static struct walk walk_zero;

/* One step of the search for the thread state whose thread_id is self: the next thread of
 * the current interpreter, or the next interpreter's first thread. */
static long search_step(__u32 i, struct walk *w)
{
    if (!w->t) {
        if (i > 0)
            w->interp = rd64(w->interp + w->l.is_next);
        if (!w->interp)
            return 1;
        w->t = rd64(w->interp + w->l.is_threads_head);
        return 0;
    }
    if (rd64(w->t + w->l.ts_thread_id) == w->self) {
        if (!w->multi) {
            w->found = w->t;
            w->found_interp = w->interp;
            return 1;
        }
        /* several interpreters: a thread can have a state in each (3.13's run_string makes
         * one), or run another thread's (3.12's run_string borrows the interpreter's first
         * state, thread_id and all): count them all, and which are active */
        if (w->last_match_interp != w->interp)
            w->nmatch_interps++;
        w->nmatch++;
        w->last_match_interp = w->interp;
        if (!w->found) {
            w->found = w->t;
            w->found_interp = w->interp;
        }
        __u32 st = 0;
        if (w->l.ts_status != CN_INT_ABI_NONE &&
            bpf_probe_read_user(&st, sizeof(st), (const void *)(w->t + w->l.ts_status)) == 0 &&
            (st & CN_INT_ABI_TS_ACTIVE)) {
            w->nactive++;
            w->active = w->t;
            w->active_interp = w->interp;
        } else {
            w->inactive = w->t;
        }
    }
    w->t = rd64(w->t + w->l.ts_next);
    return 0;
}

/* The thread state whose thread_id is self: the cached one if it still says so, else a
 * bounded search of every interpreter's threads. 0 when none. */
/* A process with several interpreters (multi) is searched on every sample, without the cache
 * (a thread moves between its states as it enters and leaves sub-interpreters): the thread's
 * state when it has states in one interpreter only; else its one active state; else none
 * (AMBIGUOUS). One search call site for both cases: each bpf_loop call site has its callback
 * verified again (the program's load time). */
static __always_inline __u64 find_tstate(struct walk *w, __u32 tid, __u64 now, __u64 head)
{
    struct tcache *cached = w->multi ? NULL : bpf_map_lookup_elem(&tstates, &tid);
    if (cached && cached->tstate) {
        /* thread_id and the frame word in one read of the span they lie in (≤ 160 bytes in
         * every layout), else two */
        __u32 a = w->l.ts_thread_id, b = w->l.ts_frame;
        __u32 lo = a < b ? a : b, span = (a < b ? b : a) - lo + 8;
        __u64 tid_word = 0;
        __u32 n = span & 0x1ff;
        asm volatile("" : "+r"(n)); /* the masked value is the one passed (the verifier) */
        if (span <= 256 && w->fb &&
            bpf_probe_read_user(w->fb->b, n, (const void *)(cached->tstate + lo)) == 0) {
            tid_word = *(__u64 *)(w->fb->b + ((a - lo) & 0xf8));
            w->frame0 = *(__u64 *)(w->fb->b + ((b - lo) & 0xf8));
            w->have_frame0 = 1;
        } else {
            tid_word = rd64(cached->tstate + a);
        }
        if (tid_word == w->self) {
            count(CN_INT_ABI_S_CACHE_HIT);
            return cached->tstate;
        }
        w->have_frame0 = 0;
    }
    if (cached && !cached->tstate && now - cached->miss_time < NEG_NS) {
        count(CN_INT_ABI_S_NEG_HIT);
        return 0;
    }
    count(CN_INT_ABI_S_WALKS);
    w->interp = w->multi ? head : rd64(w->l.runtime + w->l.rt_interp_head);
    /* w->t and w->found: 0 from walk_zero (a store of 0 here would be a constant again) */
    bpf_loop(CN_INT_ABI_MAX_INTERPS * (CN_INT_ABI_MAX_THREADS + 1), search_step, w, 0);
    if (w->multi) {
        if (w->nmatch_interps <= 1)
            return w->found;
        if (w->nactive == 1) {
            w->found = w->active;
            w->found_interp = w->active_interp;
            return w->found;
        }
        return 0;
    }
    struct tcache v = {.tstate = w->found, .miss_time = w->found ? 0 : now};
    bpf_map_update_elem(&tstates, &tid, &v, BPF_ANY);
    return w->found;
}

/* The walk's first segment seen whole: the frame that entered the innermost eval-loop call
 * (3.11: is_entry; 3.12: the C-stack shim) must lead to the current frame of the caller's
 * _PyCFrame, as CPython asserts when that call returns. An eval-loop call publishes its
 * _PyCFrame (a local on the C stack) in tstate->cframe some instructions before it writes
 * that cframe's current_frame and previous: a sample in between read what an earlier call
 * left in those stack slots, a frame since popped whose memory holds other calls' frames, or
 * garbage (docs/python.md, "The entry window"). user space's walk (code.c) does the same. */
static __always_inline void stale(struct walk *w)
{
    w->status = CN_INT_ABI_STALE;
    w->n = 0;
    w->check_entry = 0;
    count(CN_INT_ABI_S_STALE);
}

/* Whether the walk goes on after the entry frame whose previous is prev. */
static __always_inline int entry_checked(struct walk *w, __u64 prev)
{
    if (!w->check_entry)
        return 1;
    w->check_entry = 0;
    if (prev == w->expect)
        return 1;
    stale(w);
    return 0;
}

/* One frame: written into the scratch record, or skipped (a 3.12+ C-stack shim). Stops at
 * the end of the chain, a fault, or CN_INT_ABI_MAX_FRAMES frames. */
static long frame_step(__u32 i, struct walk *w)
{
    struct cn_int_abi_record *r = w->r;
    struct fbuf *fb = w->fb;
    if (!w->f && w->outer) { /* the first chain ended: the outer state's frames */
        w->f = w->outer;
        w->outer = 0;
        w->nsub = w->n;
        w->nsub_set = 1;
    }
    __u64 f = w->f, code, prev, ip;
    __u32 len = w->l.fr_len, base = w->l.fr_base;
    if (!r || !fb || !f || len == 0 || len > CN_INT_ABI_FRAME_READ_MAX)
        return 1;
    __u64 a = f + base;
    if (a < f || a + len < a) { /* a forged pointer whose a + len wraps (code.c: the same) */
        w->status = CN_INT_ABI_FAULT;
        return 1;
    }
    if (!w->win_len || a < w->win_lo || a + len > w->win_lo + w->win_len) {
        __u64 lo = a;
        if (w->l.kind == CN_INT_ABI_IFRAME) {
            lo = a + len > CN_INT_ABI_WINDOW ? a + len - CN_INT_ABI_WINDOW : 0;
            if (lo < (a & ~4095ull))
                lo = a & ~4095ull;
        }
        __u32 wlen = (__u32)(a + len - lo);
        if (wlen > CN_INT_ABI_WINDOW)
            wlen = 0; /* cannot be: the mask below is for the verifier, which lost the bound */
        wlen &= 2 * CN_INT_ABI_WINDOW - 1;
        if (!wlen || bpf_probe_read_user(fb->b, wlen, (const void *)lo) < 0) {
            lo = a;
            wlen = len;
            if (bpf_probe_read_user(fb->b, len, (const void *)a) < 0) {
                w->status = CN_INT_ABI_FAULT;
                return 1;
            }
        }
        w->win_lo = lo;
        w->win_len = wlen;
    }
    /* o + (field - base) + 8 <= win_len <= CN_INT_ABI_WINDOW: the masks change nothing */
    __u32 o = (__u32)(a - w->win_lo);
#define FB(field, m) (fb->b + ((o + ((w->l.field - base) & (m))) & (CN_INT_ABI_WINDOW - 1)))
    code = *(__u64 *)FB(fr_code, 0x78);
    prev = *(__u64 *)FB(fr_previous, 0x78);
    w->f = prev;
    __u32 flags = 0, instr = 0, n = w->n;
    if (w->l.kind == CN_INT_ABI_FRAMEOBJ) {
        instr = *(__u32 *)FB(fr_instr, 0x7c);
        flags = CN_INT_ABI_F_ENTRY; /* ≤3.10: one eval-loop call per frame */
    } else {
        if (w->l.fr_owner != CN_INT_ABI_NONE && *FB(fr_owner, 0x7f) == FRAME_OWNED_BY_CSTACK) {
            /* 3.12+: the shim an eval-loop call pushes; the frame above it (the one written
             * last) is the first one that call ran. */
            if (n > 0 && n <= CN_INT_ABI_MAX_FRAMES)
                r->frames[(n - 1) & (CN_INT_ABI_MAX_FRAMES - 1)].flags |= CN_INT_ABI_F_ENTRY;
            return entry_checked(w, prev) ? 0 : 1;
        }
        if (w->l.fr_is_entry != CN_INT_ABI_NONE && *FB(fr_is_entry, 0x7f)) {
            flags = CN_INT_ABI_F_ENTRY;
            if (!entry_checked(w, prev))
                return 1;
        }
        ip = *(__u64 *)FB(fr_instr, 0x78);
#undef FB
        instr = (__u32)(ip - (code + w->l.co_code_adaptive));
    }
    if (n >= CN_INT_ABI_MAX_FRAMES) {
        w->status = CN_INT_ABI_TRUNCATED;
        return 1;
    }
    struct cn_int_abi_frame *fr = &r->frames[n & (CN_INT_ABI_MAX_FRAMES - 1)];
    fr->code = code;
    fr->instr = instr;
    fr->flags = flags;
    w->n = n + 1;
    return 0;
}

/* One code object of a check request: its three words against the ones wanted. */
struct check_walk {
    struct cn_int_abi_check *c;
    __u64 changed;
};
static long check_step(__u32 i, struct check_walk *cw)
{
    struct cn_int_abi_check *c = cw->c;
    if (i >= c->n || i >= CN_INT_ABI_CHECK_MAX)
        return 1;
    __u32 k = i;
    asm volatile("" : "+r"(k)); /* keep the mask below: the verifier needs it, clang drops it */
    k &= CN_INT_ABI_CHECK_MAX - 1;
    __u64 a = c->addr[k];
    if (rd64(a + c->off[0]) != c->want[k][0] || rd64(a + c->off[1]) != c->want[k][1] ||
        rd64(a + c->off[2]) != c->want[k][2])
        cw->changed |= 1ull << k;
    return 0;
}

/* The process's pending check, if any: done once (the first sample after the request) and
 * answered in the ring ahead of the sample's own record; not answered when user space wrote
 * the slot meanwhile (seq moved: the next sample checks the new request). */
static __always_inline void check_codes(const struct cn_int_abi_proc *p, __u32 pid)
{
    __u32 slot = p->check_slot;
    if (slot >= CN_INT_ABI_CHECK_SLOTS)
        return;
    struct cn_int_abi_check *c = bpf_map_lookup_elem(&checks, &slot);
    if (!c)
        return;
    __u64 seq = *(volatile __u64 *)&c->seq;
    if (!seq || (seq & 1) || *(volatile __u64 *)&c->done == seq)
        return;
    struct check_walk cw = {.c = c};
    bpf_loop(CN_INT_ABI_CHECK_MAX, check_step, &cw, 0);
    if (*(volatile __u64 *)&c->seq != seq)
        return;
    struct cn_int_abi_checked out = {.seq = seq, .changed = cw.changed, .pid = pid, .n = c->n};
    c->done = seq;
    count(CN_INT_ABI_S_CHECKS);
    bpf_ringbuf_output(&ring, &out, sizeof(out), BPF_RB_NO_WAKEUP);
}

/* The current thread's pthread_self(), 0 when unknown. x86-64 (TLS variant II): the thread
 * pointer itself. arm64 (variant I): the thread pointer points past glibc's struct pthread,
 * whose size user space found in the process's libc (self_off, cn_int_register). */
static __always_inline __u64 thread_self(const struct cn_int_abi_proc *pr)
{
    struct task_struct *task = (struct task_struct *)bpf_get_current_task();
    __u64 tp = 0;
    if (bpf_core_field_exists(task->thread.fsbase))
        tp = BPF_CORE_READ(task, thread.fsbase);
    else if (bpf_core_field_exists(task->thread.uw.tp_value))
        tp = BPF_CORE_READ(task, thread.uw.tp_value);
    return tp > pr->self_off ? tp - pr->self_off : 0;
}

SEC("perf_event")
int cn_int_sample(struct bpf_perf_event_data *ctx)
{
    __u32 pid, tid, zero = 0;
    if (pidns_initial) {
        __u64 id = bpf_get_current_pid_tgid();
        pid = (__u32)(id >> 32);
        tid = (__u32)id;
    } else {
        struct bpf_pidns_info ns = {0};
        if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns, sizeof(ns)) < 0)
            return 1; /* a task outside that namespace: not one of ours */
        pid = ns.tgid;
        tid = ns.pid;
    }
    struct cn_int_abi_proc *pr = bpf_map_lookup_elem(&procs, &pid);
    if (!pr) {
        count(CN_INT_ABI_S_OTHER);
        return 1;
    }
    check_codes(pr, pid);
    const struct cn_int_abi_layout *l = &pr->l;
    struct cn_int_abi_record *r = bpf_map_lookup_elem(&scratch, &zero);
    if (!r)
        return 1;
    count(CN_INT_ABI_S_RUNS);
    r->ktime = bpf_ktime_get_ns();
    r->time = r->ktime;
    r->time_src = CN_INT_ABI_T_KTIME;
    if (bpf_cast_to_kern_ctx) {
        struct bpf_perf_event_data_kern *k = bpf_cast_to_kern_ctx(ctx);
        __u64 t = BPF_CORE_READ(k, data, time);
        if (t) {
            r->time = t;
            r->time_src = CN_INT_ABI_T_SAMPLE;
        }
    }
    r->pid = pid;
    r->tid = tid;
    r->cpu = bpf_get_smp_processor_id();
    r->status = CN_INT_ABI_OK;

    struct walk w;
    bpf_probe_read_kernel(&w, sizeof(w), &walk_zero);
    w.l = *l;
    w.r = r;
    w.fb = bpf_map_lookup_elem(&fbufs, &zero);
    w.self = thread_self(pr);
    /* _PyRuntime.interpreters.head and .main: one interpreter, or several (sub-interpreters),
     * read again every CN_INT_ABI_MULTI_NS (a read per sample cost every Python process ~0.1
     * µs; a sub-interpreter created meanwhile is seen that much later) */
    if (!pr->multi_ns || r->ktime - pr->multi_ns > CN_INT_ABI_MULTI_NS) {
        __u64 hm[2] = {0, 0};
        bpf_probe_read_user(hm, sizeof(hm), (const void *)(w.l.runtime + w.l.rt_interp_head));
        pr->head = hm[0];
        pr->main = hm[1];
        pr->multi = hm[0] && hm[0] != hm[1];
        pr->multi_ns = r->ktime;
    }
    __u64 head = pr->head, main = pr->main;
    r->interp = 0;
    r->rflags = 0;
    r->nsub = 0;
    __u64 ts = 0;
    w.multi = pr->multi;
    if (w.self)
        ts = find_tstate(&w, tid, r->ktime, head);
    if (w.multi) {
        r->rflags = CN_INT_ABI_R_MULTI;
        if (ts && w.found_interp != main) {
            __u64 id = rd64(w.found_interp + w.l.is_id);
            r->rflags |= CN_INT_ABI_R_SUB;
            r->interp = id > 0xffffffffull ? 0xffffffffu : (__u32)id;
            r->nsub = 0xffff; /* all its frames, unless its caller's are added below */
        }
    }
    r->tstate = ts;
    if (!ts) {
        r->status = w.multi && w.nmatch_interps > 1 ? CN_INT_ABI_AMBIGUOUS : CN_INT_ABI_NO_THREAD;
    } else {
        __u64 f = w.have_frame0 ? w.frame0 : rd64(ts + w.l.ts_frame);
        if (w.l.cf_current_frame != CN_INT_ABI_NONE && f) {
            __u64 cf[2] = {0, 0}; /* the _PyCFrame's current_frame and previous */
            if (bpf_probe_read_user(cf, sizeof(cf), (const void *)(f + w.l.cf_current_frame)) < 0)
                cf[0] = 0;
            f = cf[0];
            if (f && cf[1]) {
                w.expect = rd64(cf[1] + w.l.cf_current_frame);
                w.check_entry = 1;
            }
        }
        w.f = f;
        /* A thread in a sub-interpreter with one other state, inactive, in the interpreter it
         * called run_string from: that state's frames are the outer ones (3.12+), walked on
         * by frame_step when the first chain ends (one call site: load time). */
        if ((r->rflags & CN_INT_ABI_R_SUB) && w.nmatch == 2 && w.nmatch_interps == 2 &&
            w.nactive == 1 && w.inactive) {
            __u64 o = rd64(w.inactive + w.l.ts_frame);
            if (w.l.cf_current_frame != CN_INT_ABI_NONE && o)
                o = rd64(o + w.l.cf_current_frame);
            w.outer = o;
        }
        /* CN_INT_ABI_MAX_FRAMES frames written, C-stack shims skipped on the way (twice that
         * many steps for two chains). */
        bpf_loop(4 * CN_INT_ABI_MAX_FRAMES + 2, frame_step, &w, 0);
        if (w.check_entry && w.status != CN_INT_ABI_TRUNCATED) /* no entry frame reached */
            stale(&w);
        r->status = w.status;
        if (w.nsub_set)
            r->nsub = (__u16)w.nsub;
    }
    __u32 n = w.n;
    if (n > CN_INT_ABI_MAX_FRAMES)
        n = CN_INT_ABI_MAX_FRAMES;
    r->nframes = n;
    __u64 size = CN_INT_ABI_HEADER_SIZE + (__u64)n * sizeof(struct cn_int_abi_frame);
    if (size > sizeof(*r))
        size = sizeof(*r);
    /* Wake the reader only once the ring is a quarter full: the sampler drains it when it
     * reads the perf samples (cn_int_take), so a wakeup per record would only cost an
     * irq_work and a wake_up per sample. */
    __u64 flags = bpf_ringbuf_query(&ring, BPF_RB_AVAIL_DATA) > (1 << 20) ? BPF_RB_FORCE_WAKEUP
                                                                          : BPF_RB_NO_WAKEUP;
    if (bpf_ringbuf_output(&ring, r, size, flags) < 0)
        count(CN_INT_ABI_S_RING_FULL);
    else
        count(CN_INT_ABI_S_RECORDS);
    return 1;
}

char LICENSE[] SEC("license") = "GPL";
