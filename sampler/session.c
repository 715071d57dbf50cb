/* session.c — the sampler session: its lifecycle (new, start, read/wait, stop, free), the
 * public cn_smp_session_* entry points, and record dispatch. Records arrive in time order
 * (ring.c merges the per-CPU rings; _feed takes a caller's bytes); each one either updates
 * what we know of the tasks (procs.c: address spaces, threads) or is a sample, whose user
 * frames come from the kernel's frame-pointer chain, that chain with its leaf's caller
 * recovered from CFI, or a DWARF unwind of the copied stack (unwind.c), and which goes to
 * the callbacks as (object, offset) frames, leaf first.
 *
 * The session (struct cn_smp_session, smp_internal.h) is the one context the files of
 * sampler/ share. A sample's frames are built in fixed arrays on it (no allocation per
 * sample); perf_open.c opens the events, ring.c owns the rings and the held records. */
#include <assert.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "smp_internal.h"

void cn_smp__emit_task(cn_smp_session *s, cn_smp_task_kind kind, pid_t pid, pid_t tid, pid_t ppid,
                       pid_t ptid, uint64_t time, const char *comm, bool exec)
{
    if (!s->cb.task)
        return;
    cn_smp_task_event ev = {kind, pid, tid, ppid, ptid, time, comm, exec, NULL};
    s->cb.task(s->arg, &ev);
}

/* ---------------------------------------------------------------------------------------
 * Samples
 */

static void add_kernel_frame(cn_smp_session *s, uint32_t *n, uint64_t addr)
{
    if (*n >= CN_SMP_MAX_FRAMES)
        return;
    const cn_smp_object *o = cn_smp__kernel_obj(s, addr);
    if (!o)
        return;
    s->frames[(*n)++] = (cn_smp_frame){o, addr};
}

/* *last: the mapping of the previous frame of this stack (NULL at its start): consecutive
 * frames mostly lie in one object, and a binary search per frame was a quarter of fp's
 * cost per sample (docs/perf-sampler.md). */
static void add_user_frame(cn_smp_session *s, const cn_smp__proc *p, uint32_t *n, uint64_t addr,
                           const cn_smp__map **last)
{
    if (*n >= CN_SMP_MAX_FRAMES)
        return;
    const cn_smp__map *m = *last && addr >= (*last)->start && addr < (*last)->end ? *last
                           : p ? cn_smp__proc_find(p, addr)
                               : NULL;
    *last = m;
    /* Every mapped object is one of the session's, its id its index in objs. */
    assert(!m || (m->obj->pub.id < s->nobjs && s->objs[m->obj->pub.id] == m->obj));
    if (m && m->obj->pub.kind == CN_SMP_OBJ_USER) {
        s->frames[(*n)++] = (cn_smp_frame){&m->obj->pub, addr - m->start + m->pgoff};
    } else if (m) {
        s->frames[(*n)++] = (cn_smp_frame){&m->obj->pub, addr};
    } else if (s->unknown_obj) {
        s->cnt.unmapped++;
        s->frames[(*n)++] = (cn_smp_frame){&s->unknown_obj->pub, addr};
    }
}

/* Splits the kernel's callchain into kernel and raw user addresses (user into s->pcs).
 * kernel_only: stops at the user part, whose index is returned (r's nr when none), for a
 * caller that reads it only if needed (auto: cn_smp__fpwalk). */
static uint64_t split_chain(cn_smp_session *s, const cn_smp__rec *r, uint32_t *nk, int *nuser,
                            bool kernel_only)
{
    uint64_t ctx = PERF_CONTEXT_USER;
    bool first_kernel = true;
    *nuser = 0;
    for (uint64_t i = 0; i < r->u.sample.nr; i++) {
        uint64_t v = cn_smp__chain_at(r, i);
        if (v >= (uint64_t)PERF_CONTEXT_MAX) {
            ctx = v;
            if (kernel_only && ctx == PERF_CONTEXT_USER)
                return i + 1;
            continue;
        }
        if (ctx == PERF_CONTEXT_KERNEL && s->kernel) {
            add_kernel_frame(s, nk, first_kernel ? v : v - 1);
            first_kernel = false;
        } else if (ctx == PERF_CONTEXT_USER && *nuser < CN_SMP_MAX_FRAMES) {
            s->pcs[(*nuser)++] = v;
        }
    }
    return r->u.sample.nr;
}

static void count_stop(cn_smp_session *s, cn_smp_stop stop)
{
    assert(stop < CN_SMP_STOP__COUNT);
    s->cnt.unwind_stop[stop]++;
    if (stop != CN_SMP_STOP_NONE)
        s->cnt.unwind_early++;
}

/* auto with a stack copy (docs/perf-sampler.md): the copy is walked from the sampled
 * registers, by frame pointer through objects built with them and by CFI elsewhere, so a
 * stack gives the same frames as dwarf whatever its objects; where the copy ends inside
 * frame-pointer code, the kernel's chain (r's user entries from index chain_from, read only
 * then) finishes it. Returns the user frame count in s->pcs. */
static int unwind_auto(cn_smp_session *s, const cn_smp__proc *p, const cn_smp__rec *r,
                       uint64_t chain_from, cn_smp_stop *stop)
{
    cn_smp__fpwalk fw = {.chain = s->kpcs,
                         .nchain = -1,
                         .chain_from = chain_from,
                         .chain_first = cn_smp__adapt_small(s, r)};
    int got = cn_smp__unwind_dwarf(s->unw, p, r, s->pcs, CN_SMP_MAX_FRAMES, &fw, stop);
    int n = got > 0 ? got : 0;
    if (s->ad)
        cn_smp__adapt_sample(s, p, r, chain_from, &n, stop, fw.joined_at);
    s->cnt.fp_frames += fw.fp_steps;
    if (fw.joined_at >= 0)
        s->cnt.chain_joins++;
    /* The kernel's chain missed the leaf's caller (no frame set up): the walk added it. */
    uint64_t k[2];
    int nk = n >= 2 ? cn_smp__user_chain(r, chain_from, k, 2) : 0;
    if (nk >= 1 && k[0] == s->pcs[0] && (nk < 2 || k[1] != s->pcs[1]))
        s->cnt.leaf_fixups++;
    return n;
}

uint32_t cn_smp__sample_frames(cn_smp_session *s, cn_smp__proc *p, const cn_smp__rec *r,
                               bool synthetic, uint32_t *nk_out, cn_smp_stop *stop_out)
{
    uint32_t n = 0;
    int nuser = 0;
    cn_smp_stop stop = CN_SMP_STOP_NONE;
    bool have_regs = r->u.sample.regs && r->u.sample.abi != PERF_SAMPLE_REGS_ABI_NONE;
    cn_smp_unwind mode = s->cfg.unwind;
    bool walk_auto = have_regs && s->unw && p && mode == CN_SMP_UNWIND_AUTO && !synthetic;
    bool walk_dwarf = have_regs && s->unw && p && (mode == CN_SMP_UNWIND_DWARF || synthetic);
    uint64_t chain_from = 0;
    if (r->u.sample.chain)
        chain_from = split_chain(s, r, &n, &nuser, walk_auto);
    else if (s->kernel && r->u.sample.ip && (int64_t)r->u.sample.ip < 0)
        add_kernel_frame(s, &n, r->u.sample.ip);
    uint32_t nk = n;

    if (!r->u.sample.chain && !have_regs && r->u.sample.ip && (int64_t)r->u.sample.ip >= 0)
        s->pcs[nuser++] = r->u.sample.ip; /* no unwinding data at all: the leaf only */
    if (walk_dwarf) {
        int got = cn_smp__unwind_dwarf(s->unw, p, r, s->pcs, CN_SMP_MAX_FRAMES, NULL, &stop);
        s->cnt.dwarf_unwinds++;
        nuser = got > 0 ? got : 0;
        count_stop(s, stop);
    } else if (walk_auto) {
        nuser = unwind_auto(s, p, r, chain_from, &stop);
        s->cnt.dwarf_unwinds++;
        count_stop(s, stop);
    } else {
        stop = nuser >= CN_SMP_MAX_FRAMES ? CN_SMP_STOP_MAX_DEPTH : CN_SMP_STOP_NONE;
    }
    assert(nuser >= 0 && nuser <= CN_SMP_MAX_FRAMES && nk <= CN_SMP_MAX_FRAMES);
    const cn_smp__map *last = NULL;
    bool spliced =
        cn_smp__py_wanted(s, p) && cn_smp__py_splice(s, p, r, nuser, &n, add_user_frame, &last);
    for (int i = 0; i < nuser && !spliced; i++) {
        uint64_t a = s->pcs[i];
        if (i > 0)
            a = s->arch->mask_ret(a) - 1; /* into the call instruction */
        add_user_frame(s, p, &n, a, &last);
    }
    if (!walk_dwarf && !walk_auto) {
        /* The kernel's frame-pointer chain (fp) ends where a frame pointer could not be
         * followed. Ending in JIT code (anonymous executable memory) means the runtime
         * keeps no frame pointers there: cut short for want of unwind info, as dwarf says
         * it (a runtime that keeps them is walked through to the thread's start; see
         * docs/perf-sampler.md, "Interpreters and JITs"). */
        if (stop == CN_SMP_STOP_NONE && r->u.sample.chain && nuser > 0 && !spliced &&
            n == nk + (uint32_t)nuser && last && last->obj->pub.kind == CN_SMP_OBJ_JIT)
            stop = CN_SMP_STOP_NO_INFO;
        count_stop(s, stop);
    }
    assert(nk <= n && n <= CN_SMP_MAX_FRAMES);
    *nk_out = nk;
    *stop_out = stop;
    return n;
}

static void handle_sample(cn_smp_session *s, const cn_smp__rec *r)
{
    if (s->ad && cn_smp__adapt_drop(s, r))
        return;
    cn_smp__proc *p = r->pid > 0 ? cn_smp__proc_for_sample(s, (pid_t)r->pid) : NULL;
    cn_smp__ensure_comm(s, (pid_t)r->pid, (pid_t)r->tid, r->time);
    cn_smp__proc_cgroup(s, p, r->time, r->u.sample.cgroup);
    s->cnt.samples++;
    uint32_t nk;
    cn_smp_stop stop;
    uint32_t n = cn_smp__sample_frames(s, p, r, false, &nk, &stop);
    uint64_t weight_ns = 0;
    if (s->off) {
        if (cn_smp__offcpu_is_switch(s, r)) {
            cn_smp__offcpu_out(s, r, n, nk, stop); /* delivered when it ends */
            /* blocked before its process was registered: no Python frames in this stack */
            if (p && p->py_registered && r->time < p->py_since && cn_smp__py_wanted(s, p))
                cn_smp__waiting_restack(s, p, (pid_t)r->tid);
            return;
        }
        cn_smp__offcpu_in(s, (pid_t)r->tid, r->time, false); /* it runs: not off CPU */
        weight_ns = cn_smp__offcpu_cpu_weight(s, r);
    }
    if (!s->cb.sample)
        return;
    cn_smp_sample out = {(pid_t)r->pid,
                         (pid_t)r->tid,
                         r->cpu,
                         r->time,
                         r->u.sample.period,
                         s->frames,
                         n,
                         nk,
                         stop,
                         weight_ns,
                         CN_SMP_STATE_RUNNING};
    s->cb.sample(s->arg, &out);
}

static void handle_record(cn_smp_session *s, const cn_smp__rec *r)
{
    switch (r->type) {
    case PERF_RECORD_SAMPLE:
        handle_sample(s, r);
        break;
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2:
        cn_smp__proc_mmap(s, r);
        break;
    case PERF_RECORD_COMM: {
        bool exec = r->misc & PERF_RECORD_MISC_COMM_EXEC;
        if (exec && r->u.comm.pid == r->u.comm.tid) {
            cn_smp__proc_exec(s, (pid_t)r->u.comm.pid);
            cn_smp__adapt_forget(s, (pid_t)r->u.comm.pid);
        }
        if (cn_smp__tidset_add(&s->seen, (int32_t)r->u.comm.tid) > 0)
            s->cnt.threads++;
        cn_smp__emit_task(s, CN_SMP_TASK_COMM, (pid_t)r->u.comm.pid, (pid_t)r->u.comm.tid, 0, 0,
                          r->time, r->u.comm.comm, exec);
        break;
    }
    case PERF_RECORD_FORK: {
        const typeof(r->u.task) *t = &r->u.task;
        if (t->pid != t->ppid) { /* a new process, not a thread */
            cn_smp__proc_fork(s, (pid_t)t->ppid, (pid_t)t->pid);
            cn_smp__adapt_fork(s, (pid_t)t->ppid, (pid_t)t->pid);
        }
        if (s->cfg.target == CN_SMP_TARGET_PID && cn_smp__tidset_add(&s->live, (int32_t)t->tid) > 0)
            s->had_live = true;
        cn_smp__offcpu_fork(s, (pid_t)t->tid);
        cn_smp__emit_task(s, CN_SMP_TASK_FORK, (pid_t)t->pid, (pid_t)t->tid, (pid_t)t->ppid,
                          (pid_t)t->ptid, r->time, NULL, false);
        break;
    }
    case PERF_RECORD_EXIT: {
        const typeof(r->u.task) *t = &r->u.task;
        cn_smp__tidset_del(&s->live, (int32_t)t->tid);
        cn_smp__offcpu_exit(s, (pid_t)t->tid, r->time);
        cn_smp__emit_task(s, CN_SMP_TASK_EXIT, (pid_t)t->pid, (pid_t)t->tid, (pid_t)t->ppid,
                          (pid_t)t->ptid, r->time, NULL, false);
        /* No sample of the process follows its exit (records come in time order): its
         * address space goes, and with it its holds on objects' unwind tables. */
        if (t->pid == t->tid && (s->cfg.target != CN_SMP_TARGET_NONE || s->replay))
            cn_smp__proc_drop(s, (pid_t)t->pid);
        if (t->pid == t->tid)
            cn_smp__adapt_forget(s, (pid_t)t->pid);
        break;
    }
    case PERF_RECORD_SWITCH:
    case PERF_RECORD_SWITCH_CPU_WIDE:
        cn_smp__offcpu_switch(s, r);
        break;
    case PERF_RECORD_LOST:
        s->cnt.lost += r->u.lost.lost;
        s->cnt.lost_events++;
        break;
    case PERF_RECORD_THROTTLE:
        s->cnt.throttles++;
        break;
    case PERF_RECORD_UNTHROTTLE:
        s->cnt.unthrottles++;
        break;
    default:
        break;
    }
}

/* Handles a record that parsed (parse_ret 0); counts the malformed ones. */
void cn_smp__dispatch(cn_smp_session *s, int parse_ret, const cn_smp__rec *r)
{
    if (parse_ret == 0)
        handle_record(s, r);
    else if (parse_ret != -ENOTSUP) /* a type we do not use */
        s->cnt.bad_records++;
}

static void process_one(cn_smp_session *s, const uint8_t *rec, size_t len)
{
    cn_smp__rec r;
    cn_smp__dispatch(s, cn_smp__parse(&s->lay, rec, len, &r), &r);
}

/* ---------------------------------------------------------------------------------------
 * Lifecycle
 */

int cn_smp_session_new(const cn_smp_config *cfg, const cn_smp_callbacks *cb, void *arg,
                       cn_smp_session **ret)
{
    if (!cfg || !ret || cfg->target > CN_SMP_TARGET_NONE || cfg->unwind > CN_SMP_UNWIND_DWARF ||
        (cfg->target == CN_SMP_TARGET_PID && cfg->pid <= 0) || cfg->stack_size > 65528 ||
        (cfg->ring_pages & (cfg->ring_pages - 1)) || cfg->mode > CN_SMP_MODE_WALL)
        return -EINVAL;
    cn_smp_session *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cfg = *cfg;
    s->pidfd = -1;
    s->cache = cfg->cache;
    if (!s->cache && !(s->cache = s->own_cache = cn_smp_cache_new(0)))
        goto nomem;
    s->cfg.freq = cfg->freq ? cfg->freq : 99;
    if (cfg->event && strcmp(cfg->event, "auto") != 0) {
        s->event_req = strdup(cfg->event);
        if (!s->event_req)
            goto nomem;
    }
    s->cfg.event = s->event_req;
    s->cgroup_fd = -1;
    if (cfg->cgroup && !(s->cgroup_path = strdup(cfg->cgroup)))
        goto nomem;
    s->cfg.cgroup = s->cgroup_path;
    if (cb)
        s->cb = *cb;
    s->arg = arg;
    s->arch = cn_smp__arch_get();
    s->kernel = !cfg->no_kernel;
    s->read_lost = true;
    s->cgroup_ids = s->cfg.target != CN_SMP_TARGET_NONE;
    snprintf(s->py_state, sizeof(s->py_state), "%s",
             cfg->no_python ? "off (--no-python)" : "off (not started)");
    cn_smp__compute_layout(s);
    /* Every context switch copies a stack in off-cpu and wall modes: at tens of thousands
     * of switches per second a 4 MiB ring overflows between two reads
     * (docs/perf-sampler.md, "Off-CPU overhead"). ring.c halves what the kernel refuses. */
    uint32_t stack_pages = cfg->mode == CN_SMP_MODE_CPU ? 1024 : 4096;
    s->ring_pages = cfg->ring_pages ? cfg->ring_pages : (s->want_stack ? stack_pages : 256);
    if (cn_smp__offcpu_new(s) < 0)
        goto nomem;
    s->kernel_obj = cn_smp__obj_special(s, "[kernel]", "[kernel]", CN_SMP_OBJ_KERNEL, 0);
    s->unknown_obj = cn_smp__obj_special(s, "[unknown]", "[unknown]", CN_SMP_OBJ_ANON, 0);
    if (!s->kernel_obj || !s->unknown_obj)
        goto nomem;
    if (cn_smp__adapt_new(s) < 0)
        goto nomem;
    s->cnt.stack_copy = s->want_stack ? s->stack_copy : 0;
    s->cnt.stack_adaptive = s->ad != NULL;
    if (s->want_stack) {
        s->unw = cn_smp__unwinder_new(cfg->check_unwind     ? CN_SMP__UNWIND_CHECK
                                      : cfg->libunwind_only ? CN_SMP__UNWIND_LIBUNWIND
                                                            : CN_SMP__UNWIND_CFI_FIRST);
        if (!s->unw)
            goto nomem;
    }
    *ret = s;
    return 0;
nomem:
    cn_smp_session_free(s);
    return -ENOMEM;
}

int cn_smp_session_start(cn_smp_session *s, cn_err *err)
{
    if (!s || s->started)
        return cn_err_set(err, -EINVAL, "sampler session %s", s ? "already started" : "missing");
    if (s->cfg.target == CN_SMP_TARGET_NONE) {
        s->started = true;
        return 0;
    }
    /* Before the events are opened: each one gets the Python frames' program. */
    int ret = cn_smp__py_start(s);
    if (ret < 0)
        return cn_err_set(err, ret, "out of memory");
    /* The pidfd first: the re-check below knows its reads describe this process. */
    ret = cn_smp__pidfd_open(s, err);
    if (ret < 0)
        return ret;
    ret = cn_smp__perf_open(s, err);
    if (ret < 0)
        return ret;
    if (s->kernel) /* settled by perf_open: kernel frames may not be permitted */
        cn_smp__load_modules(s);
    /* After the threads are attached, so that MMAP2 records cover whatever changes after
     * /proc/PID/maps is read. */
    if (s->cfg.target == CN_SMP_TARGET_PID)
        cn_smp__procs_attach(s);
    if (cn_smp__rings_ready(s) < 0)
        return cn_err_set(err, -ENOMEM, "out of memory");
    /* Opened disabled: nothing is sampled unless the process is still the one checked. */
    ret = cn_smp__recheck(s, err);
    if (s->pidfd >= 0)
        close(s->pidfd);
    s->pidfd = -1;
    if (ret < 0)
        return ret;
    /* An attach to a running interpreter: registered once the re-check allowed the process
     * (registering reads its memory), before its samples start. */
    if (s->cfg.target == CN_SMP_TARGET_PID)
        cn_smp__py_scan(s, cn_smp__proc_for_sample(s, s->cfg.pid));
    uint64_t t_enable = (uint64_t)cn_common_now_ns();
    ret = cn_smp__perf_enable(s, err);
    if (ret < 0)
        return ret;
    /* After the events are enabled, so that records cover whatever changes after it. */
    if (s->cfg.target == CN_SMP_TARGET_SYSTEM)
        cn_smp__procs_snapshot(s);
    /* Its threads waiting already: their waits from the start on (a switch-in closes them,
     * and comes after t_enable). */
    if (s->off && s->cfg.target == CN_SMP_TARGET_PID && !s->cfg.enable_on_exec)
        cn_smp__waiting_attach(s, s->cfg.pid, t_enable);
    else if (s->off && s->cfg.target == CN_SMP_TARGET_SYSTEM)
        cn_smp__waiting_system(s, t_enable);
    s->started = true;
    return 0;
}

size_t cn_smp_session_fds(const cn_smp_session *s, const int **fds)
{
    if (!s || !s->started || s->stopped) {
        if (fds)
            *fds = NULL;
        return 0;
    }
    if (fds)
        *fds = s->ring_fds;
    return s->nrings;
}

int cn_smp_session_read(cn_smp_session *s)
{
    if (!s)
        return -EINVAL;
    if (!s->started || s->stopped)
        return 0;
    /* Taken before the drain: every record older than now - HOLD is delivered by it, so
     * waits in progress can be delivered up to there without a switch-in overtaking. */
    uint64_t now = (uint64_t)cn_common_now_ns();
    int ret = cn_smp__drain(s, false);
    if (ret >= 0)
        cn_smp__adapt_apply(s); /* between drains: the rings are not being read */
    cn_smp__py_epoch(s);
    if (ret >= 0 && s->off && now > CN_SMP__HOLD_NS)
        cn_smp_session_pending(s, now - CN_SMP__HOLD_NS);
    return ret;
}

int cn_smp_session_wait(cn_smp_session *s, int timeout_ms)
{
    if (!s)
        return -EINVAL;
    if (!s->started || s->stopped)
        return 0;
    struct pollfd pfd[CN_SMP__MAX_RINGS];
    nfds_t n = 0;
    for (size_t i = 0; i < s->nrings && n < CN_SMP__MAX_RINGS; i++)
        if (!s->rings[i].hup)
            pfd[n++] = (struct pollfd){s->rings[i].fd, POLLIN, 0};
    int wait = timeout_ms;
    if (n < s->nrings && (wait < 0 || wait > 20))
        wait = 20; /* a hung-up ring still gets records from inherited events: poll it by time */
    if (cn_smp_session_ended(s))
        wait = 0;
    int r = poll(pfd, n, wait);
    if (r < 0 && errno != EINTR)
        return -errno;
    for (nfds_t i = 0; r > 0 && i < n; i++)
        if (pfd[i].revents & (POLLHUP | POLLERR))
            for (size_t k = 0; k < s->nrings; k++)
                if (s->rings[k].fd == pfd[i].fd)
                    s->rings[k].hup = true;
    return cn_smp_session_read(s);
}

bool cn_smp_session_ended(const cn_smp_session *s)
{
    return s && s->cfg.target == CN_SMP_TARGET_PID && s->started && s->had_live &&
           s->live.live == 0;
}

int cn_smp_session_feed(cn_smp_session *s, const void *buf, size_t len)
{
    if (!s || (!buf && len))
        return -EINVAL;
    uint64_t before = s->cnt.samples;
    const uint8_t *p = buf;
    size_t off = 0;
    while (len - off >= sizeof(struct perf_event_header)) {
        struct perf_event_header h;
        memcpy(&h, p + off, sizeof(h));
        if (h.size < sizeof(h) || h.size > len - off) {
            s->cnt.bad_records++;
            break;
        }
        process_one(s, p + off, h.size);
        off += h.size;
    }
    if (off < len && len - off < sizeof(struct perf_event_header))
        s->cnt.bad_records++;
    uint64_t got = s->cnt.samples - before;
    return got > INT32_MAX ? INT32_MAX : (int)got;
}

static void close_all(cn_smp_session *s)
{
    if (s->pidfd >= 0)
        close(s->pidfd);
    s->pidfd = -1;
    cn_smp__rings_free(s);
    cn_smp__perf_close(s);
}

int cn_smp_session_stop(cn_smp_session *s)
{
    if (!s)
        return -EINVAL;
    if (s->stopped || !s->started)
        return 0;
    cn_smp__perf_disable(s);
    int ret = cn_smp__drain(s, true);
    if (ret >= 0 && s->off) /* threads still waiting: up to now */
        cn_smp_session_pending(s, (uint64_t)cn_common_now_ns());
    close_all(s);
    cn_smp__py_stop(s); /* the frames' names stay */
    s->stopped = true;
    return ret < 0 ? ret : 0;
}

cn_smp_session *cn_smp_session_free(cn_smp_session *s)
{
    if (!s)
        return NULL;
    close_all(s);
    cn_smp__py_free(s); /* after the events that held its program */
    cn_smp__procs_free(s);
    cn_smp_cache_free(s->own_cache); /* after the objects released their tables */
    cn_smp__unwinder_free(s->unw);
    cn_smp__adapt_free(s);
    cn_smp__offcpu_free(s);
    free(s->event_req);
    free(s->cgroup_path);
    if (s->cgroup_fd >= 0)
        close(s->cgroup_fd);
    free(s);
    return NULL;
}

/* ---------------------------------------------------------------------------------------
 * Queries and names
 */

const char *cn_smp_session_event(const cn_smp_session *s)
{
    return s && s->event_name[0] ? s->event_name : NULL;
}

cn_smp_unwind cn_smp_session_unwind(const cn_smp_session *s)
{
    return s ? s->cfg.unwind : CN_SMP_UNWIND_AUTO;
}

bool cn_smp_session_kernel(const cn_smp_session *s)
{
    return s && s->kernel;
}

void cn_smp_session_counters(const cn_smp_session *s, cn_smp_counters *out)
{
    if (!s || !out)
        return;
    *out = s->cnt;
    out->live_threads = s->live.live;
    if (s->unw) {
        cn_smp__unwind_stats us;
        cn_smp__unwinder_stats(s->unw, &us);
        out->cfi_unwinds = us.cfi;
        out->libunwind_unwinds = us.libunwind;
        memcpy(out->libunwind_why, us.why, sizeof(out->libunwind_why));
        out->unwind_checked = us.checked;
        out->unwind_mismatches = us.mismatches;
    }
}

uint64_t cn_smp_session_sample_type(const cn_smp_session *s)
{
    return s ? s->lay.sample_type : 0;
}

int cn_smp_session_record_stack(const cn_smp_session *s, const void *rec, size_t len,
                                size_t *size_at, uint64_t *size, uint64_t *dyn)
{
    cn_smp__rec r;
    int ret = cn_smp__parse(&s->lay, rec, len, &r);
    if (ret == -ENOTSUP)
        return -ENOENT;
    if (ret < 0)
        return -EINVAL;
    if (r.type != PERF_RECORD_SAMPLE || !r.u.sample.stack || !r.u.sample.stack_req)
        return -ENOENT;
    const uint8_t *data = r.u.sample.stack, *base = rec;
    assert(data >= base + 8 && data + r.u.sample.stack_req <= base + len);
    *size_at = (size_t)(data - base) - 8;
    *size = r.u.sample.stack_req;
    *dyn = r.u.sample.stack_size;
    return 0;
}

int cn_smp_session_replay(cn_smp_session *s, uint64_t sample_type)
{
    const uint64_t extra =
        PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER | PERF_SAMPLE_CGROUP;
    if (!s || s->cfg.target != CN_SMP_TARGET_NONE ||
        (sample_type & s->lay.sample_type) != s->lay.sample_type ||
        (sample_type & ~s->lay.sample_type & ~extra))
        return -EINVAL;
    s->lay.sample_type = sample_type;
    s->lay.regs_mask = (sample_type & PERF_SAMPLE_REGS_USER) ? s->arch->regs_mask : 0;
    s->replay = true;
    return 0;
}

const char *cn_smp_unwind_name(cn_smp_unwind u)
{
    switch (u) {
    case CN_SMP_UNWIND_FP:
        return "fp";
    case CN_SMP_UNWIND_DWARF:
        return "dwarf";
    case CN_SMP_UNWIND_AUTO:
        return "auto";
    }
    return "?";
}

int cn_smp_unwind_parse(const char *name, cn_smp_unwind *ret)
{
    if (!name || !ret)
        return -EINVAL;
    for (int u = CN_SMP_UNWIND_AUTO; u <= CN_SMP_UNWIND_DWARF; u++)
        if (strcmp(name, cn_smp_unwind_name((cn_smp_unwind)u)) == 0) {
            *ret = (cn_smp_unwind)u;
            return 0;
        }
    return -EINVAL;
}

const char *cn_smp_fallback_name(cn_smp_fallback fb)
{
    static const char *const names[] = {"no-map",   "no-cfi",      "cfa-expr",   "cfa-reg",
                                        "reg-rule", "reg-unknown", "not-upward", "other"};
    _Static_assert(sizeof(names) / sizeof(names[0]) == CN_SMP_FB__COUNT, "a name per cause");
    return fb < CN_SMP_FB__COUNT ? names[fb] : "?";
}

const char *cn_smp_stop_name(cn_smp_stop stop)
{
    static const char *const names[] = {"complete",        "no-unwind-info", "stack-too-small",
                                        "bad-memory-read", "max-depth",      "other"};
    return stop < CN_SMP_STOP__COUNT ? names[stop] : "?";
}
