/* perf_open.c — opening the perf events: the events we know by name, the perf_event_attr
 * this session asks for (its sample layout follows the unwind mode), perf_event_open with
 * the fallbacks the kernel may require (cycles -> cpu-clock where there is no hardware
 * event, kernel frames dropped on EACCES/EPERM, the frequency lowered to
 * kernel.perf_event_max_sample_rate on EINVAL, offline CPUs skipped on ENODEV,
 * RLIMIT_NOFILE raised on EMFILE), and enabling, disabling and closing what was opened.
 *
 * One ring per online CPU (ring.c maps it). A SYSTEM target has one event per CPU. A PID
 * target has one inherited event per thread per CPU (the threads and processes it creates
 * later inherit them), each redirected into its CPU's ring with PERF_EVENT_IOC_SET_OUTPUT;
 * /proc/PID/task is re-listed until no new thread appears. Every fd, the rings' included,
 * is kept in one growing array on the session, so that all are enabled, disabled and
 * closed together. */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "smp_internal.h"

static const struct {
    const char *name;
    uint32_t type;
    uint64_t config;
} events[] = {
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
    {"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK},
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
};

static int lookup_event(const char *name, uint32_t *type, uint64_t *config)
{
    for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++)
        if (strcmp(events[i].name, name) == 0) {
            *type = events[i].type;
            *config = events[i].config;
            return 0;
        }
    return -ENOENT;
}

void cn_smp__compute_layout(cn_smp_session *s)
{
    cn_smp_unwind u = s->cfg.unwind;
    s->want_callchain = u != CN_SMP_UNWIND_DWARF || s->kernel;
    s->want_stack = u != CN_SMP_UNWIND_FP;
    /* The same copy in auto as in dwarf: auto unwinds through CFI wherever frame pointers
     * cannot be trusted, and must reach as far as dwarf does (docs/perf-sampler.md). */
    uint32_t ss = s->cfg.stack_size ? s->cfg.stack_size : CN_SMP_STACK_DEFAULT;
    s->stack_copy = (ss + 7) & ~7u;
    /* perf wants a multiple of 8 that fits the record's 16-bit size (stack_size <= 65528 is
     * checked by cn_smp_session_new). */
    assert(s->stack_copy % 8 == 0 && s->stack_copy <= 65528);
    s->lay.sample_type =
        PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD;
    if (s->want_callchain)
        s->lay.sample_type |= PERF_SAMPLE_CALLCHAIN;
    if (s->want_stack)
        s->lay.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    if (s->cfg.mode == CN_SMP_MODE_WALL) /* two events in one ring: which one sampled */
        s->lay.sample_type |= PERF_SAMPLE_IDENTIFIER;
    if (s->cgroup_ids)
        s->lay.sample_type |= PERF_SAMPLE_CGROUP;
    s->lay.regs_mask = s->want_stack ? s->arch->regs_mask : 0;
    s->lay.sample_id_all = true;
}

/* How long the room left in a ring after its wakeup mark must last at the session's
 * sampling rate: the reader's delays on canopyd's loop (a query's fork, a burst of symbol
 * answers) are a few ms; a system session's start reads every process for longer, and
 * what it loses is counted. */
#define RING_ROOM_PER_S 20 /* 1/20 s = 50 ms */

/* The wakeup mark of a ring of `pages` data pages: the bytes written before the reader is
 * woken. Each wakeup costs the reader far more than its syscall (~35 us of kernel time,
 * and on this VM up to ~0.7 ms of cold caches: docs/perf-daemon.md, "Twenty-third
 * session"), so CPU samples with stack copies (16 KiB records: 16 MiB a second per CPU at
 * 999 Hz) wake it when the ring has 50 ms of records' room left, never less than a quarter
 * of the ring nor more than half (the kernel's default, and 32 ms at 4 kHz): three
 * quarters up to ~1.2 kHz with 16 KiB copies, half above ~2.4 kHz. Other records are
 * small or, for context switches (off-cpu, wall), come in bursts: a quarter. */
static uint32_t ring_mark(const cn_smp_session *s, uint32_t pages)
{
    uint64_t ring = (uint64_t)pages * (uint64_t)getpagesize();
    if (!(s->want_stack && s->cfg.mode == CN_SMP_MODE_CPU))
        return (uint32_t)(ring / 4);
    uint64_t record = (uint64_t)s->stack_copy + 1024; /* header, registers, callchain */
    uint64_t room = record * s->cfg.freq / RING_ROOM_PER_S;
    room = room < ring / 4 ? ring / 4 : room > ring / 2 ? ring / 2 : room;
    return (uint32_t)(ring - room);
}

static void fill_attr(const cn_smp_session *s, struct perf_event_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->size = sizeof(*a);
    a->type = s->perf_type;
    a->config = s->perf_config;
    a->freq = 1;
    a->sample_freq = s->cfg.freq;
    a->sample_type = s->lay.sample_type;
    a->read_format = s->read_lost ? PERF_FORMAT_LOST : 0;
    a->sample_regs_user = s->lay.regs_mask;
    a->sample_stack_user = s->want_stack ? s->stack_copy : 0;
    a->disabled = 1;
    a->inherit = s->cfg.target == CN_SMP_TARGET_PID;
    a->enable_on_exec = s->cfg.enable_on_exec && s->cfg.target == CN_SMP_TARGET_PID;
    a->mmap = 1;
    a->mmap2 = 1;
    a->comm = 1;
    a->comm_exec = 1;
    a->task = 1;
    a->sample_id_all = 1;
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC;
    a->exclude_hv = 1;
    a->exclude_kernel = !s->kernel;
    a->exclude_callchain_kernel = !s->kernel;
    a->exclude_callchain_user = s->cfg.unwind == CN_SMP_UNWIND_DWARF || s->user_chain_off;
    a->watermark = 1;
    a->wakeup_watermark = ring_mark(s, s->ring_pages);
    if (s->cfg.mode == CN_SMP_MODE_OFFCPU)
        cn_smp__offcpu_attr(s, a, true);
}

/* A system session's "every task" (pid -1) is its cgroup's tasks in cgroup mode. */
static int perf_open(const cn_smp_session *s, struct perf_event_attr *a, pid_t pid, int cpu)
{
    unsigned long flags = PERF_FLAG_FD_CLOEXEC;
    if (pid == -1 && s->cgroup_fd >= 0) {
        pid = s->cgroup_fd;
        flags |= PERF_FLAG_PID_CGROUP;
    }
    long fd = syscall(SYS_perf_event_open, a, pid, cpu, -1, flags);
    return fd < 0 ? -errno : (int)fd;
}

static int add_fd(cn_smp_session *s, int fd)
{
    if (CN_RESERVE(s->fds, s->capfds, s->nfds + 1) < 0)
        return -ENOMEM;
    s->fds[s->nfds++] = fd;
    cn_smp__py_attach(s, fd); /* every event runs the Python frames' program (python.c) */
    return 0;
}

/* WALL: the context-switch event of task tid on ring rg, into that ring. */
static int open_switch_event(cn_smp_session *s, const struct perf_event_attr *cpu_attr, pid_t tid,
                             cn_smp__ring *rg)
{
    struct perf_event_attr a = *cpu_attr;
    cn_smp__offcpu_attr(s, &a, false);
    int fd = perf_open(s, &a, tid, rg->cpu);
    if (fd < 0)
        return fd;
    uint64_t id = 0;
    int ret = add_fd(s, fd);
    if (ret < 0) {
        close(fd);
        return ret;
    }
    if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, rg->fd) < 0 || ioctl(fd, PERF_EVENT_IOC_ID, &id) < 0)
        return -errno;
    return cn_smp__offcpu_add_id(s, id);
}

static int read_cpus(int *cpus, int max)
{
    FILE *f = fopen("/sys/devices/system/cpu/online", "re");
    int n = 0;
    if (f) {
        int a, b;
        char sep;
        while (n < max && fscanf(f, "%d", &a) == 1) {
            b = a;
            if (fscanf(f, "%c", &sep) == 1 && sep == '-') {
                if (fscanf(f, "%d", &b) != 1)
                    break;
                if (fscanf(f, "%c", &sep) != 1)
                    sep = 0;
            }
            for (int c = a; c <= b && n < max; c++)
                cpus[n++] = c;
            if (sep != ',')
                break;
        }
        fclose(f);
    }
    if (n == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        for (n = 0; n < c && n < max; n++)
            cpus[n] = n;
    }
    return n;
}

/* Maps ring rg from *fd, the ring's first event: the ring takes its owner's wakeup mark.
 * The kernel clamps a mark to the ring it maps, so where it mapped fewer pages than planned
 * (a user's perf_event_mlock_kb and RLIMIT_MEMLOCK) a mark past half of them could leave
 * the reader asleep until the ring is full: the owner is then opened again with the
 * kernel's default mark, half of what it maps. Returns 0 or negative errno; *fd is the
 * owner's, the caller's to close on failure. */
static int map_owner(cn_smp_session *s, const struct perf_event_attr *a, pid_t tid,
                     cn_smp__ring *rg, int *fd)
{
    int ret = cn_smp__ring_map(s, rg, *fd);
    size_t planned = (size_t)s->ring_pages * (size_t)getpagesize();
    if (ret < 0 || rg->data_size == planned || a->wakeup_watermark <= rg->data_size / 2)
        return ret;
    cn_smp__ring_unmap(rg);
    struct perf_event_attr b = *a;
    b.wakeup_watermark = 0;
    int again = perf_open(s, &b, tid, rg->cpu);
    if (again < 0)
        return again;
    close(*fd);
    *fd = again;
    return cn_smp__ring_map(s, rg, again);
}

/* Opens the events of one task (or of every task with tid -1) on every CPU. */
static int open_task(cn_smp_session *s, struct perf_event_attr *a, pid_t tid)
{
    int opened = 0;
    for (size_t i = 0; i < s->nrings; i++) {
        cn_smp__ring *rg = &s->rings[i];
        int fd = perf_open(s, a, tid, rg->cpu);
        if (fd == -ENODEV)
            continue; /* CPU went offline */
        if (fd < 0)
            return fd;
        bool owner = rg->fd < 0;
        int ret = owner ? map_owner(s, a, tid, rg, &fd) : 0;
        if (ret == 0 && add_fd(s, fd) < 0) {
            ret = -ENOMEM;
            if (owner)
                cn_smp__ring_unmap(rg);
        }
        if (ret < 0) {
            close(fd);
            return ret;
        }
        if (owner) {
            rg->fd = fd;
            s->ring_fds[i] = fd;
        } else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, rg->fd) < 0) {
            return -errno;
        }
        if (s->cfg.mode == CN_SMP_MODE_WALL && (ret = open_switch_event(s, a, tid, rg)) < 0)
            return ret;
        opened++;
    }
    return opened ? 0 : -ENODEV;
}

/* kernel.perf_event_max_sample_rate, or 0 when it cannot be read. */
static uint32_t max_sample_rate(void)
{
    FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "re");
    unsigned long v = 0;
    if (f) {
        if (fscanf(f, "%lu", &v) != 1 || v > UINT32_MAX)
            v = 0;
        fclose(f);
    }
    return (uint32_t)v;
}

/* Picks the event and opens a first probe to settle kernel-frame permission and the
 * frequency. */
static int choose_event(cn_smp_session *s, pid_t probe_pid, int probe_cpu, cn_err *err)
{
    const char *want = s->event_req;
    bool autoev = !want;
    if (autoev) /* WALL weighs CPU samples in time: a clock event's period is exact ns */
        want = s->cfg.mode == CN_SMP_MODE_WALL ? "cpu-clock" : "cycles";
    if (s->cfg.mode == CN_SMP_MODE_OFFCPU && !autoev && strcmp(want, "context-switches") != 0)
        return cn_err_set(err, -EINVAL,
                          "event '%s' does not apply to off-cpu mode (it samples context "
                          "switches; wall mode takes a CPU event)",
                          want);
    if (s->cfg.mode == CN_SMP_MODE_OFFCPU)
        want = "context-switches";
    if (lookup_event(want, &s->perf_type, &s->perf_config) < 0)
        return cn_err_set(err, -ENOENT, "unknown event '%s'", want);
    for (int attempt = 0; attempt < 8; attempt++) {
        struct perf_event_attr a;
        fill_attr(s, &a);
        int fd = perf_open(s, &a, probe_pid, probe_cpu);
        if (fd >= 0 && s->cfg.mode == CN_SMP_MODE_WALL) {
            /* The context-switch event needs kernel sampling: probe it too. */
            close(fd);
            cn_smp__offcpu_attr(s, &a, false);
            fd = perf_open(s, &a, probe_pid, probe_cpu);
        }
        if (fd >= 0) {
            close(fd);
            snprintf(s->event_name, sizeof(s->event_name), "%s", want);
            return 0;
        }
        if ((fd == -ENOENT || fd == -EOPNOTSUPP || fd == -ENODEV) && autoev &&
            s->perf_type == PERF_TYPE_HARDWARE) {
            want = "cpu-clock";
            lookup_event(want, &s->perf_type, &s->perf_config);
            continue;
        }
        if ((fd == -EACCES || fd == -EPERM) && s->kernel) {
            s->kernel = false; /* kernel frames not permitted: user only */
            cn_smp__compute_layout(s);
            continue;
        }
        if (fd == -ESRCH)
            return cn_err_set(err, fd, "no such process %d", (int)probe_pid);
        if ((fd == -EACCES || fd == -EPERM) && s->cfg.mode != CN_SMP_MODE_CPU)
            return cn_err_set(err, fd,
                              "perf_event_open not permitted: %s mode samples context switches "
                              "in the kernel (kernel.perf_event_paranoid <= 1, or root or "
                              "CAP_PERFMON)",
                              cn_smp_mode_name(s->cfg.mode));
        if (fd == -EACCES || fd == -EPERM)
            return cn_err_set(err, fd,
                              "perf_event_open not permitted (kernel.perf_event_paranoid; "
                              "need root or CAP_PERFMON)");
        if (fd == -EINVAL && s->read_lost) {
            s->read_lost = false; /* before Linux 6.0: no PERF_FORMAT_LOST */
            continue;
        }
        if (fd == -EINVAL && s->cgroup_ids) {
            s->cgroup_ids = false; /* before Linux 5.7: no PERF_SAMPLE_CGROUP */
            cn_smp__compute_layout(s);
            continue;
        }
        if (fd == -EINVAL) {
            /* The kernel lowers its limit at run time when sampling interrupts take too
             * long (a loaded or emulated machine: docs/perf-sampler.md "arm64"), below the
             * 999 Hz `canopy run` asks for; like `perf record`, sample at the limit. */
            uint32_t max = max_sample_rate();
            if (max > 0 && s->cfg.freq > max) {
                s->cfg.freq = max;
                continue;
            }
        }
        if (fd == -EINVAL && s->cfg.freq > 1000)
            return cn_err_set(err, fd,
                              "perf_event_open: invalid argument (frequency %u above "
                              "kernel.perf_event_max_sample_rate?)",
                              s->cfg.freq);
        return cn_err_set(err, fd, "perf_event_open(%s): %s", want, strerror(-fd));
    }
    return cn_err_set(err, -EINVAL, "perf_event_open: no usable configuration");
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Attaches every thread of the target, re-listing /proc/PID/task until stable. */
static int attach_threads(cn_smp_session *s, struct perf_event_attr *a, cn_err *err)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)s->cfg.pid);
    for (int pass = 0; pass < 100; pass++) {
        DIR *d = opendir(path);
        if (!d)
            return pass == 0 ? cn_err_set(err, -ESRCH, "no such process %d", (int)s->cfg.pid) : 0;
        int added = 0, ret = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            int tid = atoi(e->d_name);
            if (tid <= 0 || cn_smp__tidset_has(&s->attached, tid))
                continue;
            ret = open_task(s, a, tid);
            if (ret == -ESRCH) {
                ret = 0; /* exited meanwhile */
                continue;
            }
            if (ret == -EMFILE) {
                raise_nofile();
                ret = open_task(s, a, tid);
            }
            if (ret < 0)
                break;
            cn_smp__tidset_add(&s->attached, tid);
            if (cn_smp__tidset_add(&s->live, tid) > 0)
                s->had_live = true;
            added++;
        }
        closedir(d);
        if (ret < 0)
            return cn_err_set(err, ret, "perf_event_open(pid %d): %s", (int)s->cfg.pid,
                              strerror(-ret));
        if (!added)
            return s->attached.live
                       ? 0
                       : cn_err_set(err, -ESRCH, "process %d has no threads", (int)s->cfg.pid);
    }
    return 0;
}

int cn_smp__perf_open(cn_smp_session *s, cn_err *err)
{
    int cpus[CN_SMP__MAX_RINGS];
    int ncpu = read_cpus(cpus, CN_SMP__MAX_RINGS);
    if (cn_smp__rings_new(s, cpus, ncpu) < 0)
        return cn_err_set(err, -ENOMEM, "out of memory");
    bool pid_target = s->cfg.target == CN_SMP_TARGET_PID;
    if (!pid_target && s->cfg.cgroup && s->cgroup_fd < 0) {
        s->cgroup_fd = open(s->cfg.cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->cgroup_fd < 0)
            return cn_err_set(err, -errno, "cgroup %s: %s", s->cfg.cgroup, strerror(errno));
    }
    int ret = choose_event(s, pid_target ? s->cfg.pid : -1, pid_target ? -1 : cpus[0], err);
    if (ret < 0)
        return ret;
    struct perf_event_attr a;
    fill_attr(s, &a);
    if (pid_target)
        return attach_threads(s, &a, err);
    ret = open_task(s, &a, -1);
    if (ret < 0)
        return cn_err_set(err, ret, "perf_event_open(%s%s): %s",
                          s->cfg.cgroup ? "cgroup " : "system", s->cfg.cgroup ? s->cfg.cgroup : "",
                          strerror(-ret));
    return 0;
}

static int recheck(cn_smp_session *s, bool policy, cn_err *err);

/* Whether a task the session follows belongs to another process than the target (a child
 * it started) and still runs. */
static bool other_process_alive(const cn_smp_session *s)
{
    char path[64];
    for (size_t i = 0; i < s->live.cap; i++) {
        int32_t tid = s->live.slots[i];
        if (tid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)s->cfg.pid, (int)tid);
        if (access(path, F_OK) == 0)
            continue; /* one of the target's threads */
        snprintf(path, sizeof(path), "/proc/%d", (int)tid);
        if (access(path, F_OK) == 0)
            return true;
    }
    return false;
}

/* auto's adaptive copy: opens the events of every task of a PID target again with attr a
 * (the tasks known alive, then /proc/PID/task re-listed until no new thread appears, as
 * attach_threads does), appending the fds. Returns 0 or negative errno. */
static int reopen_tasks(cn_smp_session *s, struct perf_event_attr *a)
{
    cn_smp__tidset done = {0};
    int ret = 0;
    /* Re-checked sessions (canopyd: docs/security.md) reopen on the target's own threads
     * only: cn_smp__perf_reopen refuses when other processes are followed. */
    for (size_t i = 0; i < s->live.cap && ret == 0 && !cn_smp__recheck_wanted(s); i++) {
        int32_t tid = s->live.slots[i];
        if (tid <= 0 || cn_smp__tidset_has(&done, tid))
            continue;
        ret = open_task(s, a, tid);
        if (ret == -EMFILE) {
            raise_nofile();
            ret = open_task(s, a, tid);
        }
        if (ret == -ESRCH)
            ret = 0; /* exited meanwhile */
        else if (ret == 0 && cn_smp__tidset_add(&done, tid) < 0)
            ret = -ENOMEM;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)s->cfg.pid);
    for (int pass = 0; pass < 100 && ret == 0; pass++) {
        DIR *d = opendir(path);
        if (!d)
            break; /* the process is gone: its events end with it */
        int added = 0;
        struct dirent *e;
        while (ret == 0 && (e = readdir(d)) != NULL) {
            int tid = atoi(e->d_name);
            if (tid <= 0 || cn_smp__tidset_has(&done, tid))
                continue;
            ret = open_task(s, a, tid);
            if (ret == -ESRCH) {
                ret = 0;
                continue;
            }
            if (ret == 0 && cn_smp__tidset_add(&done, tid) < 0)
                ret = -ENOMEM;
            added++;
        }
        closedir(d);
        if (!added)
            break;
    }
    free(done.slots);
    return ret;
}

static bool is_ring_fd(const cn_smp_session *s, int fd)
{
    for (size_t i = 0; i < s->nrings; i++)
        if (s->rings[i].fd == fd)
            return true;
    return false;
}

int cn_smp__perf_reopen(cn_smp_session *s, uint32_t copy, bool user_chain, uint64_t *t_enabled)
{
    assert(s->cfg.mode == CN_SMP_MODE_CPU && copy % 8 == 0 && copy <= 65528);
    uint32_t old = s->stack_copy;
    bool old_off = s->user_chain_off;
    size_t nold = s->nfds;
    s->stack_copy = copy;
    s->user_chain_off = !user_chain;
    struct perf_event_attr a;
    fill_attr(s, &a);
    a.enable_on_exec = 0; /* the target has exec'ed long ago: enabled below */
    bool guarded = s->cfg.target == CN_SMP_TARGET_PID && cn_smp__recheck_wanted(s);
    int ret = 0;
    cn_err err = {0};
    /* As at _start (docs/security.md): the target must still be the image that was checked
     * (a pidfd first, the new events opened disabled, the image read after them), or an
     * exec'ed setuid program would get events the kernel took away at its exec. The
     * access rule itself (may_profile) is only asked during _start; the image unchanged,
     * the process is the one it allowed. Children cannot be re-checked: no reopen then. */
    if (guarded && other_process_alive(s))
        ret = -EPERM;
    if (guarded && ret == 0)
        ret = cn_smp__pidfd_open(s, &err);
    if (ret == 0)
        ret = s->cfg.target == CN_SMP_TARGET_PID ? reopen_tasks(s, &a) : open_task(s, &a, -1);
    if (guarded && ret == 0)
        ret = recheck(s, false, &err);
    if (s->pidfd >= 0)
        close(s->pidfd);
    s->pidfd = -1;
    for (size_t i = nold; ret == 0 && i < s->nfds; i++)
        if (ioctl(s->fds[i], PERF_EVENT_IOC_ENABLE, 0) < 0)
            ret = -errno;
    if (ret < 0) {
        for (size_t i = nold; i < s->nfds; i++)
            close(s->fds[i]);
        s->nfds = nold;
        s->stack_copy = old;
        s->user_chain_off = old_off;
        return ret;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *t_enabled = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    /* The old events stop only now: no gap, at worst a few samples twice (adapt.c drops
     * the old ones' after *t_enabled). A ring's owner stays open, disabled: the ring is its
     * mapping, and the new events write into it. Closing an inherited event also ends the
     * events its tasks' children inherited from it (they have new events of their own). */
    size_t k = 0;
    for (size_t i = 0; i < s->nfds; i++) {
        int fd = s->fds[i];
        if (i < nold) {
            ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
            if (!is_ring_fd(s, fd)) {
                close(fd);
                continue;
            }
        }
        s->fds[k++] = fd;
    }
    s->nfds = k;
    return 0;
}

int cn_smp__perf_enable(cn_smp_session *s, cn_err *err)
{
    if (s->cfg.enable_on_exec && s->cfg.target == CN_SMP_TARGET_PID)
        return 0; /* the kernel enables them at the target's next exec */
    for (size_t i = 0; i < s->nfds; i++)
        if (ioctl(s->fds[i], PERF_EVENT_IOC_ENABLE, 0) < 0)
            return cn_err_set(err, -errno, "PERF_EVENT_IOC_ENABLE: %s", strerror(errno));
    return 0;
}

void cn_smp__perf_disable(cn_smp_session *s)
{
    for (size_t i = 0; i < s->nfds; i++)
        ioctl(s->fds[i], PERF_EVENT_IOC_DISABLE, 0);
}

void cn_smp__perf_close(cn_smp_session *s)
{
    for (size_t i = 0; i < s->nfds; i++)
        close(s->fds[i]);
    free(s->fds);
    s->fds = NULL;
    s->nfds = s->capfds = 0;
}

/* ---------------------------------------------------------------------------------------
 * The re-check before enabling (docs/security.md): the caller's access check and our
 * perf_event_open both name the process by pid, and it may exec a setuid program between
 * them. The events are opened disabled, so nothing is sampled until the process is shown
 * to be the image that was checked and still allowed.
 */

int cn_smp_image_read(pid_t pid, cn_smp_image *out)
{
    char path[64], buf[1024];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -ESRCH;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -ESRCH;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
    if (!p)
        return -ESRCH;
    cn_smp_image im = {0};
    p++;
    for (int field = 3; field <= 28 && *p; field++) {
        while (*p == ' ')
            p++;
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (field == 22)
            im.start_time = v;
        else if (field == 26)
            im.start_code = v;
        else if (field == 28)
            im.start_stack = v;
        p = end;
        while (*p && *p != ' ')
            p++;
    }
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
    if (stat(path, &st) == 0) {
        im.exe_dev = (uint64_t)st.st_dev;
        im.exe_ino = (uint64_t)st.st_ino;
    }
    if (!im.start_time)
        return -ESRCH;
    *out = im;
    return 0;
}

bool cn_smp_image_equal(const cn_smp_image *a, const cn_smp_image *b)
{
    return a->start_time == b->start_time && a->start_code == b->start_code &&
           a->start_stack == b->start_stack && a->exe_dev == b->exe_dev && a->exe_ino == b->exe_ino;
}

bool cn_smp__recheck_wanted(const cn_smp_session *s)
{
    return s->cfg.target == CN_SMP_TARGET_PID && (s->cfg.image.start_time || s->cfg.may_profile);
}

int cn_smp__pidfd_open(cn_smp_session *s, cn_err *err)
{
    s->pidfd = -1;
    if (!cn_smp__recheck_wanted(s))
        return 0;
    int fd = (int)syscall(SYS_pidfd_open, s->cfg.pid, 0);
    if (fd < 0 && errno == ESRCH)
        return cn_err_set(err, -ESRCH, "no such process %d", (int)s->cfg.pid);
    s->pidfd = fd; /* -1 without pidfd_open (ENOSYS): the start time still tells reuse */
    return 0;
}

/* policy: also ask may_profile (only during _start: its argument lives that long). */
static int recheck(cn_smp_session *s, bool policy, cn_err *err)
{
    pid_t pid = s->cfg.pid;
    if (!cn_smp__recheck_wanted(s))
        return 0;
    if (s->cfg.image.start_time) {
        cn_smp_image now;
        if (cn_smp_image_read(pid, &now) < 0)
            return cn_err_set(err, -ESRCH, "no such process %d", (int)pid);
        if (!cn_smp_image_equal(&now, &s->cfg.image))
            return cn_err_set(err, -EPERM,
                              "permission denied: process %d exec'ed (or its pid was reused) "
                              "since the access check; not profiled",
                              (int)pid);
    }
    if (policy && s->cfg.may_profile) {
        int r = s->cfg.may_profile(s->cfg.may_profile_arg, pid, err);
        if (r < 0)
            return r;
    }
    /* Alive after the reads: they described the process the pidfd holds, not a successor
     * under the same pid. */
    if (s->pidfd >= 0 && syscall(SYS_pidfd_send_signal, s->pidfd, 0, NULL, 0) < 0)
        return cn_err_set(err, -ESRCH, "process %d exited", (int)pid);
    return 0;
}

int cn_smp__recheck(cn_smp_session *s, cn_err *err)
{
    return recheck(s, true, err);
}
