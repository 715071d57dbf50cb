/* test_interp_real.c — interp/ against real interpreters (needs root: perf_event_open, BPF).
 *
 * For Debian's /usr/bin/python3 and every pyenv CPython 3.8–3.13 on the machine: start
 * tests/data/python/work_split.py (work_a / work_b / Runner.work_c sharing the CPU 50/30/20 and
 * measuring their own CPU time over the sampled window: the truth), open a 999 Hz cpu-clock
 * sampling event on it (CLOCK_MONOTONIC, PERF_SAMPLE_TID|TIME|CPU, as the sampler opens them),
 * attach the program, register the process, sample for 3 s, then join every perf sample to its
 * record with cn_int_take (pid, tid, time) and resolve names and lines. Checks: the samples
 * found their records (by the sample's exact time), ≥ 95 % carry Python frames, the shares are
 * the workload's measured shares ± 3 points, the names are right (qualname from 3.11), the
 * lines are in the functions' loops, the outermost frame is an entry frame. Prints the figures
 * and the program's run time per sample (BPF_ENABLE_STATS) for docs/python.md. Then two
 * threads (events per thread, and inherited events opened before the threads were born) and
 * off-CPU samples (a context-switch event): see each test's comment.
 *
 * CANOPY_INTERP_ONLY=path limits the run to one interpreter; CANOPY_INTERP_DEPTH=N makes the
 * workload call its functions N frames deep (the cost of a deep stack). */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <bpf/bpf.h>

#include "cn_int.h"

#define RING_PAGES 64

static bool under_ci(void)
{
    const char *ci = getenv("CI");
    return ci && strcmp(ci, "true") == 0;
}

/* The next non-empty line the workload printed (NUL-terminated, without its newline). */
static bool read_line(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        char ch;
        if (read(fd, &ch, 1) != 1)
            break;
        if (ch == '\n') {
            if (n == 0)
                continue;
            break;
        }
        buf[n++] = ch;
    }
    buf[n] = '\0';
    return n > 0;
}

static pid_t start_python(const char *python, const char *name, const char *arg, int *out_fd,
                          char *ready, size_t ready_cap)
{
    int pfd[2];
    if (pipe(pfd) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        char script[512];
        const char *data = getenv("CANOPY_TEST_DATA");
        snprintf(script, sizeof(script), "%s/python/%s", data ? data : "tests/data", name);
        execl(python, python, script, "30", arg, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    *out_fd = pfd[0];
    if (!read_line(pfd[0], ready, ready_cap) ||
        (strncmp(ready, "ready", 5) != 0 && strcmp(ready, "waiting") != 0)) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return pid;
}

static int open_event_attr(struct perf_event_attr *a, pid_t pid, int cpu)
{
    return (int)syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static int open_event(pid_t pid, int cpu, bool inherit)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof(a));
    a.size = sizeof(a);
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.freq = 1;
    a.sample_freq = 999;
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC;
    a.disabled = 1;
    a.exclude_kernel = 1;
    a.inherit = inherit;
    return (int)syscall(SYS_perf_event_open, &a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* Maps event fd's ring (map_len bytes) and attaches the program to the event. */
static void *attach_ring(cn_int_ctx *c, int fd, size_t map_len)
{
    cn_err err = {0};
    assert_true(fd >= 0);
    void *ring = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(ring != MAP_FAILED);
    if (cn_int_attach(c, fd, &err) < 0)
        fail_msg("attach: %s", err.msg);
    return ring;
}

/* A started Python process, one perf event of it with its ring mapped, and the program
 * attached to that event (still disabled): what the single-event tests here share. */
typedef struct traced {
    cn_int_ctx *c;
    pid_t pid;
    int out_fd; /* the workload's output ("ready ...", then its own lines) */
    int fd;
    void *ring;
    size_t map_len;
} traced;

/* Starts python on script (arg may be NULL) and sets t up around it; attr NULL: the
 * default cpu-clock event. Fails the test on any error; skips without root outside CI. */
static void traced_start(traced *t, const char *python, const char *script, const char *arg,
                         struct perf_event_attr *attr)
{
    cn_err err = {0};
    char ready[64];
    memset(t, 0, sizeof(*t));
    int r = cn_int_new(&t->c, &err);
    if (r == -EPERM && !under_ci()) {
        print_message("[ skip     ] needs root: %s\n", err.msg);
        skip();
    }
    if (r < 0)
        fail_msg("cn_int_new: %s", err.msg);
    t->out_fd = -1;
    t->pid = start_python(python, script, arg, &t->out_fd, ready, sizeof(ready));
    assert_true(t->pid > 0);
    t->fd = attr ? open_event_attr(attr, t->pid, -1) : open_event(t->pid, -1, false);
    t->map_len = (RING_PAGES + 1) * (size_t)sysconf(_SC_PAGESIZE);
    t->ring = attach_ring(t->c, t->fd, t->map_len);
}

/* Undoes traced_start but for the process and its output (each test ends those itself). */
static void traced_stop(traced *t)
{
    munmap(t->ring, t->map_len);
    close(t->fd);
    cn_int_free(t->c);
}

typedef struct sample {
    uint64_t ip;
    uint32_t pid, tid, cpu;
    uint64_t time;
} sample;

/* Every PERF_RECORD_SAMPLE in the ring (TID, TIME, CPU). */
static size_t read_ring(void *base, sample *out, size_t max)
{
    struct perf_event_mmap_page *mp = base;
    uint8_t *data = (uint8_t *)base + mp->data_offset;
    uint64_t size = mp->data_size, head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = mp->data_tail;
    size_t n = 0;
    while (tail < head) {
        struct perf_event_header h;
        uint8_t rec[256];
        for (size_t i = 0; i < sizeof(h); i++)
            ((uint8_t *)&h)[i] = data[(tail + i) % size];
        if (h.size < sizeof(h) || h.size > sizeof(rec))
            break;
        for (size_t i = 0; i < h.size; i++)
            rec[i] = data[(tail + i) % size];
        if (h.type == PERF_RECORD_SAMPLE && n < max) {
            const uint8_t *p = rec + sizeof(h);
            memcpy(&out[n].ip, p, 8);
            memcpy(&out[n].pid, p + 8, 4);
            memcpy(&out[n].tid, p + 12, 4);
            memcpy(&out[n].time, p + 16, 8);
            memcpy(&out[n].cpu, p + 24, 4);
            n++;
        }
        tail += h.size;
    }
    __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
    return n;
}

typedef struct result {
    size_t samples, in_eval, joined, sample_time, max_depth, with_python, a, b, c, entry_ok,
        lines_ok, lines_checked;
    int major, minor;
} result;

/* Which of the three functions a record's innermost Python frames are in (its first frame
 * named work_*), checking names, lines and the outermost entry flag on the way. */
static int classify(cn_int_ctx *c, const cn_int_record *r, result *res)
{
    if (r->nframes == 0)
        return -1;
    res->with_python++;
    if (r->frames[r->nframes - 1].entry)
        res->entry_ok++;
    for (uint32_t i = 0; i < r->nframes; i++) {
        cn_int_func f;
        if (cn_int_func_of(c, r->pid, r->frames[i].code, &f) < 0 || !f.readable)
            continue;
        const char *n = f.name;
        int which = strcmp(n, "work_a") == 0                                        ? 0
                    : strcmp(n, "work_b") == 0                                      ? 1
                    : strcmp(n, res->minor >= 11 ? "Runner.work_c" : "work_c") == 0 ? 2
                                                                                    : -1;
        if (which < 0)
            continue;
        int line = cn_int_line(c, r->pid, r->frames[i].code, r->frames[i].instr);
        res->lines_checked++;
        /* the loop: "for i in range(n):" and its body, 2 and 3 lines below the def (a
         * wrong instruction offset gives the def line, RESUME's, or another line) */
        if ((line == f.first_line + 2 || line == f.first_line + 3) &&
            strstr(f.filename, "work_split.py"))
            res->lines_ok++;
        return which;
    }
    return -1;
}

static void run_one(const char *python)
{
    if (access(python, X_OK) < 0) {
        print_message("[ skip     ] %s: not installed\n", python);
        return;
    }
    cn_err err = {0};
    traced t;
    traced_start(&t, python, "work_split.py", NULL, NULL);
    cn_int_ctx *c = t.c;
    pid_t pid = t.pid;
    int out_fd = t.out_fd, fd = t.fd;
    void *ring = t.ring;
    /* attaching leaves the event disabled: no sample before the process is registered */
    assert_int_equal(((struct perf_event_mmap_page *)ring)->data_head, 0);
    cn_int_proc info;
    if (cn_int_register(c, pid, &info, &err) < 0)
        fail_msg("register %s: %s", python, err.msg);
    /* the eval loop's range, as the splice will use it: inside the object, its address ours */
    assert_true(info.eval_end > info.eval_start && info.eval_end - info.eval_start < (1u << 20));
    assert_true(cn_int_is_eval(c, pid, info.eval_start));
    assert_false(cn_int_is_eval(c, pid, info.eval_end));
    assert_false(cn_int_is_eval(c, pid + 1, info.eval_start));
    int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
    result res = {.major = info.major, .minor = info.minor};
    size_t cap = 8192;
    sample *s = calloc(cap, sizeof(*s));
    assert_non_null(s);
    kill(pid, SIGUSR1); /* the workload's measured window starts */
    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    /* Read the perf ring as a sampler would, every 100 ms, taking each sample's record. */
    for (int round = 0; round < 30; round++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        size_t n = read_ring(ring, s, cap);
        cn_int_new_epoch(c); /* as a pump will: cached code objects checked again */
        for (size_t i = 0; i < n; i++) {
            cn_int_record rec;
            res.samples++;
            res.in_eval += cn_int_is_eval(c, s[i].pid, s[i].ip);
            if (cn_int_take(c, s[i].pid, s[i].tid, s[i].time, &rec) != 1) {
                print_message(
                    "[ unjoined ] pid %u tid %u cpu %u time %llu (sample %zu of round %d)\n",
                    s[i].pid, s[i].tid, s[i].cpu, (unsigned long long)s[i].time, i, round);
                continue;
            }
            res.joined++;
            res.sample_time += rec.sample_time;
            if (rec.nframes > res.max_depth)
                res.max_depth = rec.nframes;
            int w = classify(c, &rec, &res);
            res.a += w == 0;
            res.b += w == 1;
            res.c += w == 2;
        }
    }
    ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    kill(pid, SIGUSR2);
    int truth[3] = {0};
    char line[128];
    bool got = read_line(out_fd, line, sizeof(line));
    assert_true(got && sscanf(line, "shares %d %d %d", &truth[0], &truth[1], &truth[2]) == 3);
    struct bpf_prog_info pi;
    uint32_t pil = sizeof(pi);
    memset(&pi, 0, sizeof(pi));
    int pfd = bpf_prog_get_fd_by_id(cn_int_prog_id(c));
    if (pfd >= 0)
        bpf_obj_get_info_by_fd(pfd, &pi, &pil);
    cn_int_stats st;
    assert_int_equal(cn_int_stats_get(c, &st), 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(out_fd);
    size_t named = res.a + res.b + res.c;
    double pa = named ? 100.0 * res.a / named : 0, pb = named ? 100.0 * res.b / named : 0,
           pc = named ? 100.0 * res.c / named : 0;
    print_message(
        "[ interp   ] %s (%d.%d%s, %s): %zu samples (%zu in the eval loop), joined %zu (by the "
        "sample's time %zu), "
        "deepest %zu frames, python %zu (%.1f%%), "
        "work_a/b/c %.1f/%.1f/%.1f%% (measured %.1f/%.1f/%.1f), lines ok %zu/%zu, outermost entry "
        "%zu, "
        "bpf %.0f ns/run over %llu runs, thread-state cache %llu/%llu, unregistered %llu\n",
        python, info.major, info.minor, info.debug_offsets ? ", _Py_DebugOffsets" : "", info.object,
        res.samples, res.in_eval, res.joined, res.sample_time, res.max_depth, res.with_python,
        res.samples ? 100.0 * res.with_python / res.samples : 0, pa, pb, pc, truth[0] / 10.0,
        truth[1] / 10.0, truth[2] / 10.0, res.lines_ok, res.lines_checked, res.entry_ok,
        pi.run_cnt ? (double)pi.run_time_ns / pi.run_cnt : 0, (unsigned long long)pi.run_cnt,
        (unsigned long long)st.cache_hits, (unsigned long long)st.runs,
        (unsigned long long)st.other);
    if (pfd >= 0)
        close(pfd);
    if (stats_fd >= 0)
        close(stats_fd);
    traced_stop(&t);
    free(s);
    /* 3 s at 999 Hz, on a shared 2-core machine */
    assert_true(res.samples >= 500);
    /* Every sample has its record (the program is attached without enabling the event, and
     * the process registered before the test enables it). */
    assert_int_equal(res.joined, res.samples);
    assert_int_equal(res.sample_time, res.joined); /* this kernel: the exact key, never ktime */
    assert_true(res.with_python * 100 >= res.samples * 95);
    /* the eval loop's range is where it is: a pure-Python loop spends a good part of its
     * time in _PyEval_EvalFrameDefault itself (the rest in the int and range code) */
    assert_true(res.in_eval * 100 >= res.samples * 10);
    assert_true(fabs(pa - truth[0] / 10.0) <= 3);
    assert_true(fabs(pb - truth[1] / 10.0) <= 3);
    assert_true(fabs(pc - truth[2] / 10.0) <= 3);
    assert_true(res.lines_ok * 100 >= res.lines_checked * 97);
    assert_int_equal(res.entry_ok, res.with_python);
}

/* Two Python threads, each in its own function, one perf event per thread (as an attach by
 * PID opens them): every record must name its own thread's function (the thread state is
 * found per thread, whichever holds the GIL). late: inherited events, one per CPU as the
 * sampler opens them (the kernel maps no inherited per-task ring), opened on the main thread
 * before the two threads exist (threads born after an attach, `run --`): the program must run
 * under the events the new threads inherit. */
static void run_threads(const char *python, bool late)
{
    if (access(python, X_OK) < 0)
        return;
    cn_err err = {0};
    cn_int_ctx *c = NULL;
    if (cn_int_new(&c, &err) < 0)
        fail_msg("cn_int_new: %s", err.msg);
    int out_fd = -1;
    char ready[64];
    pid_t pid = start_python(python, "work_threads.py", late ? "late" : NULL, &out_fd, ready,
                             sizeof(ready));
    assert_true(pid > 0);
    int tid[2] = {0, 0}, fd[8], nev = 2;
    void *ring[8];
    if (late) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        nev = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (int)ncpu;
    }
    size_t map_len = (RING_PAGES + 1) * (size_t)sysconf(_SC_PAGESIZE);
    if (!late)
        assert_int_equal(sscanf(ready, "ready %d %d", &tid[0], &tid[1]), 2);
    for (int k = 0; k < nev; k++) {
        fd[k] = late ? open_event(pid, k, true) : open_event(tid[k], -1, false);
        ring[k] = attach_ring(c, fd[k], map_len);
    }
    if (cn_int_register(c, pid, NULL, &err) < 0)
        fail_msg("register %s: %s", python, err.msg);
    for (int k = 0; k < nev; k++)
        ioctl(fd[k], PERF_EVENT_IOC_ENABLE, 0);
    if (late) {
        kill(pid, SIGUSR1);
        assert_true(read_line(out_fd, ready, sizeof(ready)));
        assert_int_equal(sscanf(ready, "ready %d %d", &tid[0], &tid[1]), 2);
    }
    size_t samples[2] = {0}, right[2] = {0}, joined = 0;
    sample *s = calloc(8192, sizeof(*s));
    assert_non_null(s);
    const char *want[2] = {"work_a", "work_b"};
    for (int round = 0; round < 20; round++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        for (int e = 0; e < nev; e++) {
            size_t n = read_ring(ring[e], s, 8192);
            for (size_t i = 0; i < n; i++) {
                cn_int_record rec;
                int k = (int)s[i].tid == tid[0] ? 0 : (int)s[i].tid == tid[1] ? 1 : -1;
                if (k < 0)
                    continue; /* the main thread, waiting */
                samples[k]++;
                if (cn_int_take(c, s[i].pid, s[i].tid, s[i].time, &rec) != 1)
                    continue;
                joined++;
                cn_int_func f;
                if (rec.nframes > 0 && cn_int_func_of(c, rec.pid, rec.frames[0].code, &f) == 0 &&
                    strcmp(f.name, want[k]) == 0)
                    right[k]++;
            }
        }
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(out_fd);
    for (int k = 0; k < nev; k++) {
        munmap(ring[k], map_len);
        close(fd[k]);
    }
    cn_int_free(c);
    free(s);
    print_message(
        "[ threads  ] %s%s: thread A %zu samples, %zu in work_a; thread B %zu samples, %zu "
        "in work_b; joined %zu\n",
        python, late ? " (born after the event, inherited)" : "", samples[0], right[0], samples[1],
        right[1], joined);
    assert_true(samples[0] >= 200 && samples[1] >= 200);
    assert_int_equal(joined, samples[0] + samples[1]);
    assert_true(right[0] * 100 >= samples[0] * 95);
    assert_true(right[1] * 100 >= samples[1] * 95);
}

/* Off-CPU (modes off-cpu and wall): the program on a context-switch event (sample_period 1,
 * as sampler/offcpu.c opens it) runs at the switch-out, in the thread going to sleep: the
 * records name the Python function that called time.sleep. */
static void run_offcpu(const char *python)
{
    cn_err err = {0};
    struct perf_event_attr a;
    memset(&a, 0, sizeof(a));
    a.size = sizeof(a);
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CONTEXT_SWITCHES;
    a.sample_period = 1;
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC;
    a.disabled = 1;
    traced t;
    traced_start(&t, python, "work_sleep.py", NULL, &a);
    cn_int_ctx *c = t.c;
    pid_t pid = t.pid;
    int out_fd = t.out_fd, fd = t.fd;
    void *ring = t.ring;
    if (cn_int_register(c, pid, NULL, &err) < 0)
        fail_msg("register %s: %s", python, err.msg);
    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    size_t samples = 0, joined = 0, in_nap = 0;
    sample *s = calloc(8192, sizeof(*s));
    assert_non_null(s);
    for (int round = 0; round < 10; round++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        size_t n = read_ring(ring, s, 8192);
        for (size_t i = 0; i < n; i++) {
            cn_int_record rec;
            cn_int_func f;
            samples++;
            if (cn_int_take(c, s[i].pid, s[i].tid, s[i].time, &rec) != 1)
                continue;
            joined++;
            if (rec.nframes > 0 && cn_int_func_of(c, rec.pid, rec.frames[0].code, &f) == 0 &&
                strcmp(f.name, "nap") == 0)
                in_nap++;
        }
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(out_fd);
    traced_stop(&t);
    free(s);
    print_message("[ off-cpu  ] %s: %zu switch-outs, joined %zu, in nap %zu\n", python, samples,
                  joined, in_nap);
    assert_true(samples >= 200);
    assert_int_equal(joined, samples);
    assert_true(in_nap * 100 >= samples * 95);
}

/* Code objects freed and others allocated at their address (tests/data/python/work_regen.py:
 * a new function gen_NNN every 0.3 s, the one before dropped): each sample's innermost name,
 * resolved as the sampler does (an epoch every 100 ms, names cached per code object), must
 * be the function the workload ran at the sample's time, but within 250 ms after a switch
 * (a cached name is checked once per epoch, by the program at its next sample: until the
 * answer a reused address keeps the old name, docs/python.md "Naming code objects"), and
 * ≥ 50 % of them right (without any check: ~25 %). The test needs reuse to mean anything: at
 * least one function must have had the code address of one before it. */
typedef struct regen_sample {
    uint64_t time, code;
    char name[16];
} regen_sample;

static void run_regen(const char *python)
{
    cn_err err = {0};
    traced t;
    traced_start(&t, python, "work_regen.py", NULL, NULL);
    cn_int_ctx *c = t.c;
    pid_t pid = t.pid;
    int out_fd = t.out_fd, fd = t.fd;
    void *ring = t.ring;
    if (cn_int_register(c, pid, NULL, &err) < 0)
        fail_msg("register %s: %s", python, err.msg);
    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    size_t cap = 8192, ns = 0;
    sample *s = calloc(cap, sizeof(*s));
    regen_sample *rs = calloc(cap, sizeof(*rs));
    assert_true(s && rs);
    for (int round = 0; round < 25; round++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        cn_int_new_epoch(c);
        size_t n = read_ring(ring, s, cap);
        for (size_t i = 0; i < n && ns < cap; i++) {
            cn_int_record rec;
            cn_int_func f;
            if (cn_int_take(c, s[i].pid, s[i].tid, s[i].time, &rec) != 1 || rec.nframes == 0 ||
                cn_int_func_of(c, rec.pid, rec.frames[0].code, &f) < 0 || !f.readable ||
                strncmp(f.name, "gen_", 4) != 0)
                continue;
            rs[ns].time = s[i].time;
            rs[ns].code = rec.frames[0].code;
            snprintf(rs[ns].name, sizeof(rs[ns].name), "%s", f.name);
            ns++;
        }
    }
    ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    cn_int_stats st;
    assert_int_equal(cn_int_stats_get(c, &st), 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* the timeline: "switch TIME NAME" lines, in order */
    uint64_t sw_t[256];
    char sw_name[256][16];
    size_t nsw = 0;
    char line[128];
    while (nsw < 256 && read_line(out_fd, line, sizeof(line))) {
        unsigned long long at;
        if (sscanf(line, "switch %llu %15s", &at, sw_name[nsw]) == 2)
            sw_t[nsw++] = at;
    }
    close(out_fd);
    traced_stop(&t);
    size_t right = 0, near = 0, wrong = 0, reused = 0, nseen = 0;
    uint64_t seen[256];
    size_t cur_sw = SIZE_MAX;
    for (size_t i = 0; i < ns; i++) {
        size_t k = SIZE_MAX;
        for (size_t j = 0; j < nsw && sw_t[j] <= rs[i].time; j++)
            k = j;
        if (k == SIZE_MAX)
            continue;                     /* before the first switch line: the first function */
        if (k != cur_sw && nseen < 256) { /* a function's first sample: its code address */
            for (size_t j = 0; j < nseen; j++)
                if (seen[j] == rs[i].code) {
                    reused++;
                    break;
                }
            seen[nseen++] = rs[i].code;
            cur_sw = k;
        }
        if (strcmp(rs[i].name, sw_name[k]) == 0)
            right++;
        else if (rs[i].time - sw_t[k] < 250000000ull)
            near++;
        else {
            wrong++;
            print_message("[ wrong    ] %s at %llu: %s (running %s since %llu)\n", python,
                          (unsigned long long)rs[i].time, rs[i].name, sw_name[k],
                          (unsigned long long)sw_t[k]);
        }
    }
    free(s);
    free(rs);
    print_message("[ regen    ] %s: %zu functions, %zu at the address of one before; %zu "
                  "samples named: %zu right, %zu wrong within 250 ms after a switch, %zu wrong; "
                  "checks by the program %llu, changed %llu\n",
                  python, nsw, reused, ns, right, near, wrong, (unsigned long long)st.checks,
                  (unsigned long long)st.checks_changed);
    assert_true(nsw >= 5);
    assert_true(reused >= 1);
    assert_int_equal(wrong, 0);
    /* Without any check ~25 % are right; the share above that follows how fast epochs come,
     * and this test's epochs stretch with the machine's load (a CI run under load: 69.6 %,
     * 88-99 % on a quiet one), so the bound says that checks happen, not how fast. */
    assert_true(right * 100 >= ns * 50);
}

/* Sub-interpreters (3.12+, tests/data/python/work_subinterp.py): the main thread spins in
 * main_spin, a worker thread in sub_spin inside a sub-interpreter, one perf event per thread.
 * mode "own": the worker created its interpreter; "borrowed": the main thread did. Every
 * record must say the process runs several interpreters; no record may name the other
 * thread's function (a wrong stack); with "own", and with "borrowed" on 3.13 (whose
 * run_string makes the worker a state of its own), ≥ 90 % of each thread's records must name
 * its function, the worker's marked with its sub-interpreter's id and followed by its own
 * frames in the main interpreter (main.<locals>.worker, which called run_string). 3.12's run_string
 * runs a borrowed interpreter on the creator's first thread state (thread_id the main thread's):
 * there the main thread's records may be AMBIGUOUS (no frames), never sub_spin. */
static void run_subinterp(const char *python, const char *mode, int minor)
{
    cn_err err = {0};
    cn_int_ctx *c = NULL;
    if (cn_int_new(&c, &err) < 0)
        fail_msg("cn_int_new: %s", err.msg);
    int out_fd = -1;
    char ready[64];
    pid_t pid = start_python(python, "work_subinterp.py", mode, &out_fd, ready, sizeof(ready));
    assert_true(pid > 0);
    int tid[2] = {0, 0}, fd[2];
    void *ring[2];
    size_t map_len = (RING_PAGES + 1) * (size_t)sysconf(_SC_PAGESIZE);
    assert_int_equal(sscanf(ready, "ready %d %d", &tid[0], &tid[1]), 2);
    for (int k = 0; k < 2; k++) {
        fd[k] = open_event(tid[k], -1, false);
        ring[k] = attach_ring(c, fd[k], map_len);
    }
    if (cn_int_register(c, pid, NULL, &err) < 0)
        fail_msg("register %s: %s", python, err.msg);
    for (int k = 0; k < 2; k++)
        ioctl(fd[k], PERF_EVENT_IOC_ENABLE, 0);
    /* per thread: samples, joined, multi, right function, wrong (the other's), sub-marked
     * with an id > 0, ambiguous */
    size_t n_s[2] = {0}, n_j[2] = {0}, n_multi[2] = {0}, n_right[2] = {0}, n_wrong[2] = {0},
           n_sub[2] = {0}, n_amb[2] = {0}, n_outer[2] = {0};
    const char *want[2] = {"main_spin", "sub_spin"};
    sample *s = calloc(8192, sizeof(*s));
    assert_non_null(s);
    for (int round = 0; round < 20; round++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        cn_int_new_epoch(c);
        for (int e = 0; e < 2; e++) {
            size_t n = read_ring(ring[e], s, 8192);
            for (size_t i = 0; i < n; i++) {
                cn_int_record rec;
                int k = (int)s[i].tid == tid[0] ? 0 : (int)s[i].tid == tid[1] ? 1 : -1;
                if (k < 0)
                    continue;
                n_s[k]++;
                if (cn_int_take(c, s[i].pid, s[i].tid, s[i].time, &rec) != 1)
                    continue;
                n_j[k]++;
                n_multi[k] += rec.multi;
                n_amb[k] += rec.status == CN_INT_AMBIGUOUS;
                n_sub[k] += rec.sub && rec.interp > 0;
                cn_int_func f;
                /* the caller's frames below the sub-interpreter's: the worker function first */
                if (rec.sub && rec.nsub < rec.nframes &&
                    cn_int_func_of(c, rec.pid, rec.frames[rec.nsub].code, &f) == 0 &&
                    strcmp(f.name, "main.<locals>.worker") == 0)
                    n_outer[k]++;
                if (rec.nframes == 0 || cn_int_func_of(c, rec.pid, rec.frames[0].code, &f) < 0)
                    continue;
                if (strcmp(f.name, want[k]) == 0)
                    n_right[k]++;
                else if (strcmp(f.name, want[1 - k]) == 0)
                    n_wrong[k]++;
            }
        }
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(out_fd);
    for (int k = 0; k < 2; k++) {
        munmap(ring[k], map_len);
        close(fd[k]);
    }
    cn_int_free(c);
    free(s);
    print_message("[ subinterp] %s %s: main thread %zu samples (joined %zu, multi %zu), %zu in "
                  "main_spin, %zu wrong, %zu sub-marked, %zu ambiguous; worker %zu samples "
                  "(joined %zu, multi %zu), %zu in sub_spin, %zu wrong, %zu sub-marked (%zu "
                  "with the worker's own frames below), %zu ambiguous\n",
                  python, mode, n_s[0], n_j[0], n_multi[0], n_right[0], n_wrong[0], n_sub[0],
                  n_amb[0], n_s[1], n_j[1], n_multi[1], n_right[1], n_wrong[1], n_sub[1],
                  n_outer[1], n_amb[1]);
    for (int k = 0; k < 2; k++) {
        assert_true(n_s[k] >= 200);
        assert_int_equal(n_j[k], n_s[k]);
        assert_int_equal(n_multi[k], n_j[k]); /* the sub-interpreter exists all along */
        assert_int_equal(n_wrong[k], 0);      /* never the other thread's stack */
    }
    assert_int_equal(n_sub[0], 0);       /* the main thread is never marked a sub-interpreter's */
    assert_true(n_sub[1] >= n_right[1]); /* every sub_spin record carries its interpreter */
    if (strcmp(mode, "own") == 0 || minor >= 13) {
        assert_true(n_right[0] * 100 >= n_s[0] * 90);
        assert_true(n_right[1] * 100 >= n_s[1] * 90);
        assert_true(n_outer[1] * 100 >= n_s[1] * 90);
    }
}

static void each(void **state, const char *python)
{
    const char *only = getenv("CANOPY_INTERP_ONLY");
    if (only && strcmp(only, python) != 0)
        return;
    if (geteuid() != 0) {
        if (under_ci())
            fail_msg("needs root under CI=true");
        skip();
    }
    run_one(python);
    run_threads(python, false);
    run_threads(python, true);
    run_offcpu(python);
    run_regen(python);
}

static void subinterp(void **state, const char *python, int minor)
{
    const char *only = getenv("CANOPY_INTERP_ONLY");
    if (only && strcmp(only, python) != 0)
        return;
    if (geteuid() != 0) {
        if (under_ci())
            fail_msg("needs root under CI=true");
        skip();
    }
    if (access(python, X_OK) < 0) {
        if (under_ci())
            fail_msg("%s: not installed", python);
        print_message("[ skip     ] %s: not installed\n", python);
        return;
    }
    run_subinterp(python, "own", minor);
    run_subinterp(python, "borrowed", minor);
}

static void subinterp_312(void **state)
{
    subinterp(state, "/root/.pyenv/versions/3.12.1/bin/python3.12", 12);
}
static void subinterp_313(void **state)
{
    subinterp(state, "/root/.pyenv/versions/3.13.0/bin/python3.13", 13);
}

static void debian_python3(void **state)
{
    each(state, "/usr/bin/python3");
}
static void pyenv_38(void **state)
{
    each(state, "/root/.pyenv/versions/3.8.18/bin/python3.8");
}
static void pyenv_39(void **state)
{
    each(state, "/root/.pyenv/versions/3.9.18/bin/python3.9");
}
static void pyenv_310(void **state)
{
    each(state, "/root/.pyenv/versions/3.10.13/bin/python3.10");
}
static void pyenv_311(void **state)
{
    each(state, "/root/.pyenv/versions/3.11.7/bin/python3.11");
}
static void pyenv_312(void **state)
{
    each(state, "/root/.pyenv/versions/3.12.1/bin/python3.12");
}
static void pyenv_313(void **state)
{
    each(state, "/root/.pyenv/versions/3.13.0/bin/python3.13");
}

/* What registering refuses, and why (the session's "python frames: off (…)"): a process that
 * is not CPython, a process gone, CPython versions without a layout (pyenv 3.7, 2.7). */
static pid_t start_plain(const char *prog, const char *arg)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl(prog, prog, arg, (char *)NULL);
        _exit(127);
    }
    struct timespec ts = {0, 300 * 1000 * 1000}; /* let it map its objects */
    nanosleep(&ts, NULL);
    return pid;
}

static void refusals(void **state)
{
    if (geteuid() != 0) {
        if (under_ci())
            fail_msg("needs root under CI=true");
        skip();
    }
    cn_err err = {0};
    cn_int_ctx *c = NULL;
    if (cn_int_new(&c, &err) < 0)
        fail_msg("cn_int_new: %s", err.msg);
    pid_t pid = start_plain("/bin/sleep", "30");
    assert_int_equal(cn_int_register(c, pid, NULL, &err), -ENOENT);
    print_message("[ refused  ] /bin/sleep: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "not CPython"));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_int_equal(cn_int_register(c, pid, NULL, &err), -ESRCH);
    print_message("[ refused  ] a pid gone: %s\n", err.msg);
    static const struct {
        const char *python;
        int ret;
        const char *why;
    } old[] = {
        {"/root/.pyenv/versions/3.7.16/bin/python3.7", -ENOTSUP, "CPython 3.7: no frame layout"},
        {"/root/.pyenv/versions/2.7.18/bin/python2.7", -ENOENT, "not CPython"},
    };
    for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++) {
        if (access(old[i].python, X_OK) < 0)
            continue;
        pid = start_plain(old[i].python, "-cimport time; time.sleep(30)");
        int r = cn_int_register(c, pid, NULL, &err);
        print_message("[ refused  ] %s: %s\n", old[i].python, err.msg);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        assert_int_equal(r, old[i].ret);
        assert_non_null(strstr(err.msg, old[i].why));
    }
    cn_int_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(debian_python3), cmocka_unit_test(pyenv_38),
        cmocka_unit_test(pyenv_39),       cmocka_unit_test(pyenv_310),
        cmocka_unit_test(pyenv_311),      cmocka_unit_test(pyenv_312),
        cmocka_unit_test(pyenv_313),      cmocka_unit_test(subinterp_312),
        cmocka_unit_test(subinterp_313),  cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
