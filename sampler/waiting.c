/* waiting.c — threads already off CPU when an off-CPU or wall session began watching them
 * (docs/perf-sampler.md, "Off-CPU": threads already waiting).
 *
 * offcpu.c opens a thread's interval at its switch-out sample. A thread that went off CPU
 * before the session's events existed has none: its wait was invisible until it ran again,
 * so the main thread of a server attached while it waits in join() or accept() showed
 * nothing at all. Here such a thread's stack is read the way a debugger would, without
 * stopping it: /proc/PID/task/TID/syscall gives the user stack pointer and pc of a thread
 * asleep in the kernel, process_vm_readv its stack from there; a record made of those two
 * registers and that copy is unwound by the compiled CFI like any sample (dwarf: the other
 * registers are unknown, so a frame whose rule needs one ends the walk), and its Python
 * frames are read from the interpreter's memory (interp/, cn_int_capture). Reading twice
 * (registers, stack, registers again, equal) keeps a thread that woke meanwhile out.
 *
 * Two moments:
 * - an attach (PID target, not --enable-on-exec): every sleeping thread of the process gets
 *   an interval from the session's start, closed by its switch-in as usual; a system
 *   session's start: the same for the CPython processes it registered (their threads only,
 *   a bound in all: the other processes' maps are read lazily, at their first sample);
 * - a CPython registration: the process's threads that blocked before it (their switch-out
 *   stack has no Python frames: the interpreter was not known yet) get their user stack
 *   read again, with Python frames, if they still wait where they blocked: those whose
 *   switch-out was read already at the registration, and those whose switch-out sample,
 *   older than the registration, is read after it (the ring is read in time order, and the
 *   registration is made while reading the mapping of libpython, before later records).
 * Kernel frames are not read (/proc's kernel stack has names, not addresses): an attach's
 * waiting thread starts at its user frames, a re-read one keeps its switch-out's. */
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cn_obj.h"
#include "smp_internal.h"

/* Threads of one process looked at: each costs ~0.6 ms in the loop (three /proc reads, the
 * stack copy, the unwind, the Python frames), so an attach to a process of thousands of
 * threads stalls the loop at most ~0.6 s */
#define WAITING_MAX 1024
#define PAGE        4096u

/* Whether thread tid sleeps (S, or D: uninterruptible), per its stat line. */
static bool task_sleeps(pid_t pid, pid_t tid)
{
    char path[64], *buf = NULL;
    size_t len;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    if (cn_obj_read_file(path, 4096, &buf, &len) < 0)
        return false;
    const char *rp = strrchr(buf, ')'); /* comm may hold anything, ')' included */
    bool sleeps = rp && rp[1] == ' ' && (rp[2] == 'S' || rp[2] == 'D');
    free(buf);
    return sleeps;
}

/* The user stack pointer and pc of a thread asleep in the kernel: the last two fields of
 * /proc/PID/task/TID/syscall ("NR ARG1 .. ARG6 SP PC", or "-1 SP PC" outside a system call;
 * "running" for a thread on a CPU). 0, or -EBUSY / -errno. */
static int read_regs(pid_t pid, pid_t tid, uint64_t *sp, uint64_t *pc)
{
    char path[64], *buf = NULL;
    size_t len;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
    int rc = cn_obj_read_file(path, 4096, &buf, &len);
    if (rc < 0)
        return rc;
    uint64_t v[9];
    int k = 0;
    for (char *c = buf, *end; *c && k < 9; c = end) {
        while (*c == ' ')
            c++;
        if (!*c || *c == '\n')
            break;
        v[k] = strtoull(c, &end, 0); /* "-1" reads as ~0, the hex fields as such */
        if (end == c)
            break; /* "running" */
        k++;
    }
    free(buf);
    if ((k != 3 && k != 9) || !v[k - 2] || !v[k - 1])
        return -EBUSY;
    *sp = v[k - 2];
    *pc = v[k - 1];
    return 0;
}

/* Up to cap bytes of the target's memory from sp, one page per iovec so that the copy ends
 * where the stack's mapping does (a transfer stops at the first iovec it cannot read). */
static size_t read_stack(pid_t pid, uint64_t sp, uint8_t *buf, size_t cap)
{
    struct iovec local = {buf, cap}, remote[64];
    size_t nr = 0, len = 0;
    for (uint64_t a = sp; len < cap && nr < sizeof(remote) / sizeof(remote[0]); nr++) {
        size_t chunk = PAGE - (size_t)(a % PAGE);
        chunk = chunk < cap - len ? chunk : cap - len;
        remote[nr] = (struct iovec){(void *)(uintptr_t)a, chunk};
        a += chunk;
        len += chunk;
    }
    local.iov_len = len;
    ssize_t got = process_vm_readv(pid, &local, 1, remote, nr, 0);
    return got > 0 ? (size_t)got : 0;
}

/* Thread tid of p if it waits now: its stack (user frames, Python frames spliced) into
 * s->frames, as a sample at time t would have it. The frame count, or -1 when it does not
 * wait or moved while it was read. */
static int waiting_stack(cn_smp_session *s, cn_smp__proc *p, pid_t tid, uint64_t t, uint8_t *stk,
                         size_t cap, uint32_t *nk, cn_smp_stop *stop)
{
    uint64_t sp, pc, sp2, pc2;
    if (!task_sleeps(p->pid, tid) || read_regs(p->pid, tid, &sp, &pc) < 0)
        return -1;
    size_t got = read_stack(p->pid, sp, stk, cap);
    if (!got || read_regs(p->pid, tid, &sp2, &pc2) < 0 || sp2 != sp || pc2 != pc)
        return -1;
    const cn_smp__arch *a = s->arch;
    uint64_t regs[64];
    uint32_t nregs = 0;
    for (int bit = 0; bit < 64; bit++)
        if (a->regs_mask & (1ull << bit))
            regs[nregs++] = bit == a->perf_ip ? pc : bit == a->perf_sp ? sp : 0;
    cn_smp__py_capture(s, p, tid, t); /* its record, under this time (none: native only) */
    cn_smp__rec r = {
        .type = PERF_RECORD_SAMPLE, .pid = (uint32_t)p->pid, .tid = (uint32_t)tid, .time = t};
    r.u.sample.ip = pc;
    if (s->unw) { /* else (fp) the leaf alone */
        r.u.sample.abi = PERF_SAMPLE_REGS_ABI_64;
        r.u.sample.regs = (const uint8_t *)regs;
        r.u.sample.nregs = nregs;
        r.u.sample.stack = stk;
        r.u.sample.stack_size = got;
        r.u.sample.stack_req = cap;
    }
    return (int)cn_smp__sample_frames(s, p, &r, true, nk, stop);
}

static size_t copy_size(const cn_smp_session *s)
{
    return s->stack_copy ? s->stack_copy : CN_SMP_STACK_DEFAULT;
}

/* The waiting threads of pid, from time t: at most max looked at (*looked says how many). */
static void attach_threads(cn_smp_session *s, pid_t pid, uint64_t t, int max, int *looked)
{
    char path[64];
    cn_smp__proc *p = s->off ? cn_smp__proc_for_sample(s, pid) : NULL;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = p ? opendir(path) : NULL;
    uint8_t *stk = d ? malloc(copy_size(s)) : NULL;
    struct dirent *e;
    int seen = 0;
    for (; stk && seen < max && (e = readdir(d)) != NULL; seen++) {
        pid_t tid = atoi(e->d_name);
        uint32_t nk;
        cn_smp_stop stop;
        /* from here on it is known to wait: a switch before this was of another wait */
        uint64_t seen_at = (uint64_t)cn_common_now_ns();
        int n = tid > 0 ? waiting_stack(s, p, tid, t, stk, copy_size(s), &nk, &stop) : -1;
        if (n < 0)
            continue;
        cn_smp__rec r = {.pid = (uint32_t)pid, .tid = (uint32_t)tid, .time = t};
        cn_smp__offcpu_seed(s, &r, (uint32_t)n, nk, stop, seen_at);
    }
    *looked = seen;
    free(stk);
    if (d)
        closedir(d);
}

void cn_smp__waiting_attach(cn_smp_session *s, pid_t pid, uint64_t t)
{
    int looked;
    attach_threads(s, pid, t, WAITING_MAX, &looked);
}

/* A system session's start: the threads of the CPython processes it registered (those its
 * snapshot found mapping one), WAITING_MAX in all, so the start stalls no longer than an
 * attach's. Other processes' waiting threads are left out: their maps and objects would be
 * read for them at the start, which the system session's lazy maps avoid (a process is
 * read at its first sample), for every sleeping process of the machine. */
void cn_smp__waiting_system(cn_smp_session *s, uint64_t t)
{
    int left = WAITING_MAX;
    for (size_t b = 0; s->off && b < CN_SMP__PROC_BUCKETS && left > 0; b++) {
        for (cn_smp__proc *p = s->procs[b]; p && left > 0; p = p->next) {
            int looked = 0;
            if (cn_smp__py_wanted(s, p))
                attach_threads(s, p->pid, t, left, &looked);
            left -= looked;
        }
    }
}

/* Reads tid's stack again and gives its open interval the new one (stk: copy_size bytes). */
static void restack(cn_smp_session *s, cn_smp__proc *p, pid_t tid, uint8_t *stk)
{
    uint32_t nk;
    cn_smp_stop stop;
    /* t: the key its Python record is queued under, after every sample's time */
    int n = waiting_stack(s, p, tid, (uint64_t)cn_common_now_ns(), stk, copy_size(s), &nk, &stop);
    if (n >= 0 && cn_smp__offcpu_restack(s, tid, (uint32_t)n, nk, stop))
        s->cnt.offcpu_waiting++;
}

void cn_smp__waiting_python(cn_smp_session *s, cn_smp__proc *p)
{
    pid_t tids[256];
    size_t nt = s->off ? cn_smp__offcpu_waiters(s, p->pid, tids, 256) : 0;
    uint8_t *stk = nt ? malloc(copy_size(s)) : NULL;
    for (size_t i = 0; stk && i < nt; i++)
        restack(s, p, tids[i], stk);
    free(stk);
}

void cn_smp__waiting_restack(cn_smp_session *s, cn_smp__proc *p, pid_t tid)
{
    uint8_t *stk = malloc(copy_size(s));
    if (stk)
        restack(s, p, tid, stk);
    free(stk);
}
