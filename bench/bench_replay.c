/* bench_replay.c — the unwind modes compared on IDENTICAL samples (docs/perf-sampler.md,
 * "Real programs"). A run of a command is captured once in auto's record layout (kernel
 * callchain + user registers + user stack copy: a superset of what dwarf and fp use), raw
 * records as the rings deliver them (cn_smp_callbacks.record), into a file; the file is
 * then fed (cn_smp_session_feed with cn_smp_session_replay) into feed-only sessions
 * unwinding with auto, dwarf and fp, and the three stacks of every sample are compared.
 * Separate runs differ by their samples (0.3–0.5 points of reach-start between two runs of
 * one mode); here only the unwinders differ.
 *
 *   bench_replay [-F HZ] [--stack-size BYTES] [-o FILE] [--show N] -- CMD ARGS...
 *       captures CMD (user space only) to FILE (default: a temporary file, removed), then
 *       replays it; the objects the command mapped must still be on disk.
 *   bench_replay --replay FILE [--show N]
 *       replays a capture again (e.g. after changing the unwinder: same samples).
 *   --folded PREFIX (either form) also writes PREFIX.auto.folded, PREFIX.dwarf.folded and
 *       PREFIX.fp.folded: the capture replayed into live sessions (live/: sampler, shared
 *       symbolizer, aggregate, as `canopy run` hosts them) and rendered as `canopy run
 *       --no-inline --format folded` renders them, so that every per-stack figure of
 *       bench/real_programs.sh (roots, unnamed leaves, self shares) is computed on identical
 *       samples in the three modes.
 *   --check (either form) also replays into dwarf with check_unwind: every compiled-CFI
 *       stack redone with libunwind and compared ("check_dwarf checked= mismatches=").
 *
 * Prints "key value" lines: samples; reach_auto / reach_dwarf / reach_fp (samples whose
 * stack's outermost function is a program or thread start: _start, the frame above
 * __libc_start_main* in a stripped executable, clone/clone3/start_thread, Go's
 * runtime.goexit/mstart/rt0_go); dwarf_not_auto (dwarf reaches the start, auto does not)
 * and auto_not_dwarf; fp_not_auto; same_auto_dwarf (identical user frames);
 * auto_longer_unrooted (auto's stack is dwarf's with more frames outward, and still does
 * not reach the start: a deeper truncation point, so possibly a root dwarf lacks); and
 * pid_command (the command's process id, printed before it execs);
 * live_same_auto (the capture run's own auto stacks equal to the replayed auto's: a check
 * that replaying is faithful). --show N prints up to N samples of each kind: dwarf reaches
 * the start and auto does not; fp does and auto does not; auto and dwarf differ otherwise
 * (both stacks named).
 *
 * File: "CNREPLAY" magic, the u64 sample_type, then the records; each sample's stack copy
 * is cut to the bytes the kernel filled (its dyn_size), which keeps a 16 KiB-copy capture
 * a few times smaller. The comparison's names come from the symbolizer's symbol tables (no
 * inlines); the folded files' names are canopy's own (--no-inline). */
#include <errno.h>
#include <linux/perf_event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cn_fmt.h"
#include "cn_live.h"
#include "cn_smp.h"
#include "cn_sym.h"

#define MAGIC "CNREPLAY"

/* One mode's samples: frames of every sample, back to back. */
typedef struct frame {
    const cn_smp_object *obj;
    uint64_t offset;
} frame;

typedef struct run {
    frame *fr;
    size_t nfr, capfr;
    size_t *start; /* sample i's frames: fr[start[i] .. start[i + 1]) */
    uint64_t *time;
    size_t n, cap;
    bool oom;
} run;

static void on_sample(void *arg, const cn_smp_sample *s)
{
    run *r = arg;
    if (r->oom)
        return;
    if (r->n + 2 > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 4096;
        size_t *st = realloc(r->start, cap * sizeof(*st));
        uint64_t *t = st ? realloc(r->time, cap * sizeof(*t)) : NULL;
        if (st)
            r->start = st;
        if (!t) {
            r->oom = true;
            return;
        }
        r->time = t;
        r->cap = cap;
    }
    uint32_t nu = s->nframes - s->nkernel; /* user frames, leaf first */
    while (r->nfr + nu > r->capfr) {
        size_t cap = r->capfr ? r->capfr * 2 : 65536;
        frame *f = realloc(r->fr, cap * sizeof(*f));
        if (!f) {
            r->oom = true;
            return;
        }
        r->fr = f;
        r->capfr = cap;
    }
    r->start[r->n] = r->nfr;
    r->time[r->n++] = s->time_ns;
    for (uint32_t i = s->nkernel; i < s->nframes; i++)
        r->fr[r->nfr++] = (frame){s->frames[i].obj, s->frames[i].offset};
    r->start[r->n] = r->nfr;
}

static void run_free(run *r)
{
    free(r->fr);
    free(r->start);
    free(r->time);
}

static size_t nframes(const run *r, size_t i)
{
    return r->start[i + 1] - r->start[i];
}

/* ---------------------------------------------------------------------------------------
 * Capture
 */

typedef struct capture {
    FILE *f;
    int err;                 /* first write error (negative errno) */
    const cn_smp_session *s; /* the capture's session: its parser finds the stack copy */
} capture;

/* A SAMPLE record's stack copy cut to its dyn_size, the record rewritten in buf: the
 * copy's size field, located by the session's own parser (cn_smp_session_record_stack),
 * becomes the bytes kept (dyn_size rounded up to 8), what follows the copy (dyn_size, the
 * cgroup id) moves up behind them. Returns the new length, or len when nothing was cut.
 * (It was found by scanning for the first u64 whose value matched the record's end: in an
 * xz capture a second word matched in hundreds of samples, after the field, and a register
 * holding that number before it would have cut the record in the wrong place.) */
static size_t cut_stack(const capture *c, const uint8_t *rec, size_t len, uint8_t *buf)
{
    size_t at;
    uint64_t size, dyn;
    if (cn_smp_session_record_stack(c->s, rec, len, &at, &size, &dyn) < 0)
        return len;
    uint64_t keep = (dyn + 7) & ~7ull;
    if (keep >= size)
        return len;
    size_t after = at + 8 + size; /* dyn_size and the rest */
    memcpy(buf, rec, at);
    memcpy(buf + at, &keep, 8);
    memcpy(buf + at + 8, rec + at + 8, keep);
    memcpy(buf + at + 8 + keep, rec + after, len - after);
    size_t n = at + 8 + keep + (len - after);
    uint16_t n16 = (uint16_t)n;
    memcpy(buf + 6, &n16, 2); /* perf_event_header.size */
    return n;
}

static void on_record(void *arg, const void *rec, size_t len)
{
    capture *c = arg;
    static const uint16_t sample_type = 9; /* PERF_RECORD_SAMPLE */
    uint8_t buf[65536];
    uint32_t type;
    memcpy(&type, rec, 4);
    const void *out = rec;
    if ((type & 0xffff) == sample_type && len <= sizeof(buf)) {
        size_t n = cut_stack(c, rec, len, buf);
        if (n != len) {
            out = buf;
            len = n;
        }
    }
    if (!c->err && fwrite(out, 1, len, c->f) != len)
        c->err = -EIO;
}

typedef struct live {
    capture cap;
    run *auto_run;
} live;

static void live_record(void *arg, const void *rec, size_t len)
{
    on_record(&((live *)arg)->cap, rec, len);
}

static void live_sample(void *arg, const cn_smp_sample *s)
{
    on_sample(((live *)arg)->auto_run, s);
}

/* Runs argv under an auto session (stack copy stack_size) writing every record to path;
 * the session's own stacks go to out, and the session (which owns their objects) to
 * *ret_s, also on failure (NULL or a session to free). Returns 0 or negative errno. */
static int capture_run(char **argv, uint32_t freq, uint32_t stack_size, const char *path, run *out,
                       cn_smp_session **ret_s)
{
    live lv = {{fopen(path, "we"), 0, NULL}, out};
    if (!lv.cap.f)
        return -errno;
    cn_smp_child child;
    int ret = cn_smp_spawn(argv, (uid_t)-1, (gid_t)-1, &child);
    if (ret < 0) {
        fclose(lv.cap.f);
        return ret;
    }
    cn_smp_config cfg = {.target = CN_SMP_TARGET_PID,
                         .pid = child.pid,
                         .freq = freq,
                         .unwind = CN_SMP_UNWIND_AUTO,
                         .no_kernel = true,
                         .enable_on_exec = true,
                         .stack_size = stack_size,
                         /* native stacks only: a replay has no interpreter records to
                          * splice, and the comparison is of unwinders */
                         .no_python = true};
    cn_smp_callbacks cb = {.sample = live_sample, .record = live_record};
    cn_smp_session *s = NULL;
    cn_err err = {0};
    ret = cn_smp_session_new(&cfg, &cb, &lv, &s);
    lv.cap.s = s;
    if (ret == 0)
        ret = cn_smp_session_start(s, &err);
    if (ret < 0) {
        fprintf(stderr, "bench_replay: %s\n", err.msg[0] ? err.msg : strerror(-ret));
        cn_smp_child_abort(&child);
        goto out;
    }
    uint64_t st = cn_smp_session_sample_type(s);
    if (fwrite(MAGIC, 1, 8, lv.cap.f) != 8 || fwrite(&st, 8, 1, lv.cap.f) != 1)
        lv.cap.err = -EIO;
    /* the command's pid, before it runs: bench/real_programs.sh attaches perf to it */
    printf("pid_command %d\n", (int)child.pid);
    fflush(stdout);
    cn_smp_child_release(&child);
    while (!cn_smp_session_ended(s))
        if (cn_smp_session_wait(s, 100) < 0)
            break;
    cn_smp_session_stop(s);
    waitpid(child.pid, NULL, 0);
    cn_smp_counters c;
    cn_smp_session_counters(s, &c);
    if (c.lost)
        fprintf(stderr, "bench_replay: %" PRIu64 " records lost\n", c.lost);
    ret = lv.cap.err;
out:
    *ret_s = s;
    if (fclose(lv.cap.f) != 0 && ret == 0)
        ret = -EIO;
    return ret;
}

/* Reads the whole capture at path into *ret_data (the caller frees it). 0 or -errno. */
static int read_capture(const char *path, uint8_t **ret_data, size_t *ret_len)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    uint8_t *data = NULL;
    size_t len = 0, cap = 0, got;
    int ret = 0;
    do {
        if (len == cap) {
            cap = cap ? cap * 2 : 1 << 24;
            uint8_t *d = realloc(data, cap);
            if (!d) {
                ret = -ENOMEM;
                break;
            }
            data = d;
        }
        got = fread(data + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    if (ret == 0 && ferror(f))
        ret = -EIO;
    fclose(f);
    if (ret == 0 && (len < 16 || memcmp(data, MAGIC, 8) != 0))
        ret = -EINVAL;
    if (ret < 0) {
        free(data);
        return ret;
    }
    *ret_data = data;
    *ret_len = len;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Folded stacks, named as canopy names them
 */

/* Replays data[0, len) through a live session of mode (live/: the sampler, the shared
 * symbolizer, the aggregate engine, exactly as `canopy run` hosts them), waits for every
 * symbol, and writes the profile to path as `canopy run --no-inline --format folded`
 * renders it (cn_fmt_render). Returns 0 or negative errno (message on stderr). */
static int write_folded(cn_live_symbolizer *sym, const uint8_t *data, size_t len,
                        cn_smp_unwind mode, const char *path)
{
    uint64_t st;
    memcpy(&st, data + 8, 8);
    cn_live_session_opts o;
    cn_live_session_opts_init(&o);
    o.unwind = mode;
    o.no_kernel = true;
    o.retention_ns = -1; /* keep every sample */
    o.replay_sample_type = st;
    cn_live_session *ls = NULL;
    cn_fmt_spec spec;
    cn_fmt_spec_init(&spec);
    spec.format = CN_FMT_FOLDED;
    spec.query.no_inline = true;
    cn_err err = {0};
    FILE *out = NULL;
    int ret = cn_live_session_new(&o, sym, &ls, &err);
    if (ret == 0 && (ret = cn_live_session_feed(ls, data + 16, len - 16)) > 0)
        ret = 0;
    if (ret == 0)
        ret = cn_live_session_stop(ls);
    if (ret == 0 && (ret = cn_live_symbolizer_flush(sym, -1)) < 0)
        cn_err_set(&err, 0, "symbolizer: %s", strerror(-ret));
    if (ret == 0 && !(out = fopen(path, "we")))
        ret = -errno;
    if (ret == 0) {
        cn_fmt_render_opts ro;
        cn_fmt_render_opts_init(&ro);
        ret = cn_fmt_render(cn_live_session_profile(ls), &spec, &ro, out, &err);
    }
    if (out && fclose(out) != 0 && ret == 0)
        ret = -EIO;
    if (ret < 0)
        fprintf(stderr, "bench_replay: %s (%s): %s\n", path, cn_smp_unwind_name(mode),
                err.msg[0] ? err.msg : strerror(-ret));
    cn_fmt_spec_clear(&spec);
    cn_live_session_free(ls);
    return ret;
}

/* PREFIX.auto.folded, PREFIX.dwarf.folded, PREFIX.fp.folded from one capture. */
static int write_all_folded(const uint8_t *data, size_t len, const char *prefix)
{
    static const cn_smp_unwind modes[3] = {CN_SMP_UNWIND_AUTO, CN_SMP_UNWIND_DWARF,
                                           CN_SMP_UNWIND_FP};
    cn_live_symbolizer *sym = NULL;
    cn_err err = {0};
    char path[4096];
    int ret = cn_live_symbolizer_new(0, 0, &sym, &err);
    if (ret < 0)
        fprintf(stderr, "bench_replay: symbolizer: %s\n", err.msg[0] ? err.msg : strerror(-ret));
    for (int m = 0; m < 3 && ret == 0; m++) {
        if (snprintf(path, sizeof(path), "%s.%s.folded", prefix, cn_smp_unwind_name(modes[m])) >=
            (int)sizeof(path))
            ret = -ENAMETOOLONG;
        else
            ret = write_folded(sym, data, len, modes[m], path);
    }
    cn_live_symbolizer_free(sym);
    return ret;
}

/* ---------------------------------------------------------------------------------------
 * Replay and comparison
 */

/* Feeds the capture's records into a new feed-only session of mode; its samples go to
 * out. *ret_s: the session (owns the objects out's frames point to). */
static int replay(const uint8_t *data, size_t len, cn_smp_unwind mode, bool check, run *out,
                  cn_smp_session **ret_s)
{
    uint64_t st;
    if (len < 16 || memcmp(data, MAGIC, 8) != 0)
        return -EINVAL;
    memcpy(&st, data + 8, 8);
    cn_smp_config cfg = {
        .target = CN_SMP_TARGET_NONE, .unwind = mode, .no_kernel = true, .check_unwind = check};
    cn_smp_callbacks cb = {.sample = on_sample};
    cn_smp_session *s = NULL;
    int ret = cn_smp_session_new(&cfg, &cb, out, &s);
    if (ret == 0)
        ret = cn_smp_session_start(s, NULL);
    if (ret == 0)
        ret = cn_smp_session_replay(s, st);
    if (ret == 0)
        ret = cn_smp_session_feed(s, data + 16, len - 16);
    if (ret >= 0 && out->oom)
        ret = -ENOMEM;
    if (ret < 0) {
        cn_smp_session_free(s);
        return ret;
    }
    cn_smp_session_stop(s);
    *ret_s = s;
    return 0;
}

typedef struct namer {
    cn_sym_cache *cache;
    char buf[512];
} namer;

/* The frame's function name (symbol tables), else "LIB+0xOFF"; valid until the next call. */
static const char *name_of(namer *nm, const frame *f)
{
    const cn_smp_object *o = f->obj;
    cn_sym_object so = {.kind = CN_SYM_USER, .path = o->path, .identity = o->identity};
    if (o->kind == CN_SMP_OBJ_USER && !o->path && strncmp(o->identity, "[vdso", 5) == 0)
        so.kind = CN_SYM_VDSO;
    else if (o->kind == CN_SMP_OBJ_JIT)
        so = (cn_sym_object){.kind = CN_SYM_JIT, .pid = o->pid};
    cn_sym_result r = {0};
    if (cn_sym_object_valid(&so) && cn_sym_lookup(nm->cache, &so, f->offset, &r) == 0 &&
        r.status == 0)
        snprintf(nm->buf, sizeof(nm->buf), "%s", r.chain[0].name);
    else
        snprintf(nm->buf, sizeof(nm->buf), "%s+0x%" PRIx64, o->name, f->offset);
    cn_sym_result_clear(&r);
    return nm->buf;
}

static bool is_root_name(const char *n)
{
    static const char *const roots[] = {"_start",
                                        "clone3",
                                        "__clone3",
                                        "start_thread",
                                        "clone",
                                        "__clone",
                                        "runtime.goexit",
                                        "runtime.goexit.abi0",
                                        "runtime.mstart",
                                        "runtime.rt0_go",
                                        "runtime.rt0_go.abi0",
                                        "runtime.mstart.abi0"};
    for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++)
        if (strcmp(n, roots[i]) == 0)
            return true;
    return false;
}

/* Whether sample i's stack reaches a program or thread start (the rule of
 * bench/real_programs.sh). */
static bool reaches(namer *nm, const run *r, size_t i)
{
    size_t n = nframes(r, i);
    const frame *f = r->fr + r->start[i];
    if (n == 0)
        return false;
    if (is_root_name(name_of(nm, &f[n - 1])))
        return true;
    return n > 1 && strncmp(name_of(nm, &f[n - 2]), "__libc_start_main", 17) == 0;
}

/* Whether b's sample j's frames are the leaf-side start of a's sample i's (or equal). */
static bool stack_prefix(const run *a, size_t i, const run *b, size_t j)
{
    size_t n = nframes(b, j);
    if (n > nframes(a, i))
        return false;
    for (size_t k = 0; k < n; k++) {
        const frame *x = a->fr + a->start[i] + k, *y = b->fr + b->start[j] + k;
        if (x->offset != y->offset || strcmp(x->obj->identity, y->obj->identity) != 0)
            return false;
    }
    return true;
}

static bool same_stack(const run *a, size_t i, const run *b, size_t j)
{
    return nframes(a, i) == nframes(b, j) && stack_prefix(a, i, b, j);
}

static void print_stack(namer *nm, const char *label, const run *r, size_t i)
{
    printf("  %-5s %2zu:", label, nframes(r, i));
    for (size_t k = nframes(r, i); k-- > 0;)
        printf("%s%s", k + 1 == nframes(r, i) ? " " : ";", name_of(nm, r->fr + r->start[i] + k));
    printf("\n");
}

static double pct(size_t a, size_t n)
{
    return n ? 100.0 * (double)a / (double)n : 0.0;
}

/* Replays the capture data[0, len) into auto, dwarf and fp and prints the comparison; liverun
 * (may be NULL): the capture session's own auto stacks. Returns 0 or negative errno. */
/* The thread's CPU time in ns. */
static uint64_t thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --check: the capture replayed into dwarf with every compiled-CFI stack redone with
 * libunwind and compared (cn_smp_config.check_unwind). Prints check_dwarf. */
static int check_dwarf(const uint8_t *data, size_t len)
{
    run r = {0};
    cn_smp_session *s = NULL;
    int ret = replay(data, len, CN_SMP_UNWIND_DWARF, true, &r, &s);
    if (ret == 0) {
        cn_smp_counters c;
        cn_smp_session_counters(s, &c);
        printf("check_dwarf checked=%" PRIu64 " mismatches=%" PRIu64 " libunwind=%" PRIu64 "\n",
               c.unwind_checked, c.unwind_mismatches, c.libunwind_unwinds);
    }
    cn_smp_session_free(s);
    run_free(&r);
    return ret;
}

static int compare(const uint8_t *data, size_t len, const run *liverun, int show)
{
    int ret = 0;
    run r[3] = {{0}};
    cn_smp_session *s[3] = {NULL, NULL, NULL};
    static const cn_smp_unwind modes[3] = {CN_SMP_UNWIND_AUTO, CN_SMP_UNWIND_DWARF,
                                           CN_SMP_UNWIND_FP};
    uint64_t cpu_ns[3] = {0};
    for (int m = 0; m < 3 && ret == 0; m++) {
        uint64_t t0 = thread_ns();
        ret = replay(data, len, modes[m], false, &r[m], &s[m]);
        cpu_ns[m] = thread_ns() - t0;
    }
    namer nm = {.cache = NULL};
    cn_sym_config sc;
    cn_sym_config_init(&sc);
    sc.lines = false;
    sc.debuginfod = false;
    if (ret == 0 && !(nm.cache = cn_sym_cache_new(&sc)))
        ret = -ENOMEM;
    if (ret == 0 && (r[1].n != r[0].n || r[2].n != r[0].n))
        ret = -EPROTO; /* the same records give the same samples in every mode */
    if (ret < 0)
        goto out;
    size_t n = r[0].n, reach[3] = {0}, dwarf_not_auto = 0, auto_not_dwarf = 0, fp_not_auto = 0;
    size_t same = 0, live_same = 0, longer_unrooted = 0, shown[3] = {0};
    for (size_t i = 0; i < n; i++) {
        bool ra = reaches(&nm, &r[0], i), rd = reaches(&nm, &r[1], i), rf = reaches(&nm, &r[2], i);
        reach[0] += ra;
        reach[1] += rd;
        reach[2] += rf;
        dwarf_not_auto += rd && !ra;
        auto_not_dwarf += ra && !rd;
        fp_not_auto += rf && !ra;
        bool eq = same_stack(&r[0], i, &r[1], i);
        same += eq;
        /* auto unwound further than dwarf without reaching the start: its root is a
         * different (deeper) truncation point, which may be a root dwarf does not have */
        longer_unrooted += !eq && !ra && stack_prefix(&r[0], i, &r[1], i);
        if (liverun && i < liverun->n && liverun->time[i] == r[0].time[i])
            live_same += same_stack(liverun, i, &r[0], i);
        /* What to show: dwarf (or fp) reaches the start and auto does not, or auto and
         * dwarf differ otherwise. */
        int kind = rd && !ra ? 0 : rf && !ra ? 1 : !eq ? 2 : -1;
        static const char *const why[] = {"dwarf reaches the start, auto does not",
                                          "fp reaches the start, auto does not",
                                          "auto and dwarf differ"};
        if (kind >= 0 && shown[kind] < (size_t)show) {
            printf("sample %zu (t=%" PRIu64 "): %s\n", i, r[0].time[i], why[kind]);
            print_stack(&nm, "auto", &r[0], i);
            print_stack(&nm, kind == 1 ? "fp" : "dwarf", &r[kind == 1 ? 2 : 1], i);
            shown[kind]++;
        }
    }
    printf("samples %zu\n", n);
    printf("reach_auto %zu %.2f%%\nreach_dwarf %zu %.2f%%\nreach_fp %zu %.2f%%\n", reach[0],
           pct(reach[0], n), reach[1], pct(reach[1], n), reach[2], pct(reach[2], n));
    printf("dwarf_not_auto %zu\nauto_not_dwarf %zu\nfp_not_auto %zu\n", dwarf_not_auto,
           auto_not_dwarf, fp_not_auto);
    printf("same_auto_dwarf %zu %.2f%%\n", same, pct(same, n));
    printf("auto_longer_unrooted %zu\n", longer_unrooted);
    static const char *const mname[3] = {"auto", "dwarf", "fp"};
    for (int m = 0; m < 3; m++) {
        cn_smp_counters c;
        cn_smp_session_counters(s[m], &c);
        printf("stops_%s", mname[m]);
        for (int k = 0; k < CN_SMP_STOP__COUNT; k++)
            printf(" %s=%" PRIu64, cn_smp_stop_name((cn_smp_stop)k), c.unwind_stop[k]);
        printf(" libunwind=%" PRIu64, c.libunwind_unwinds);
        for (int k = 0; k < CN_SMP_FB__COUNT; k++)
            if (c.libunwind_why[k])
                printf(" libunwind:%s=%" PRIu64, cn_smp_fallback_name((cn_smp_fallback)k),
                       c.libunwind_why[k]);
        /* the replay's own CPU (parsing, object loads, unwinding; no ring reads): for
         * comparing unwinders on the same capture, not a sampler figure */
        printf(" replay_us_per_sample=%.2f\n", n ? (double)cpu_ns[m] / 1e3 / (double)n : 0.0);
    }
    if (liverun)
        printf("live_same_auto %zu of %zu\n", live_same, liverun->n);
out:
    cn_sym_cache_free(nm.cache);
    for (int m = 0; m < 3; m++) {
        cn_smp_session_free(s[m]);
        run_free(&r[m]);
    }
    return ret;
}

/* Compares the capture at path (and writes the folded files when folded != NULL). */
static int compare_file(const char *path, const run *liverun, int show, const char *folded,
                        bool check)
{
    uint8_t *data = NULL;
    size_t len = 0;
    int ret = read_capture(path, &data, &len);
    if (ret == 0)
        ret = compare(data, len, liverun, show);
    if (ret == 0 && check)
        ret = check_dwarf(data, len);
    if (ret == 0 && folded)
        ret = write_all_folded(data, len, folded);
    free(data);
    return ret;
}

int main(int argc, char **argv)
{
    uint32_t freq = 999, stack_size = 16384;
    const char *out = NULL, *in = NULL, *folded = NULL;
    int show = 0, i = 1;
    bool check = false;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (strcmp(argv[i], "-F") == 0 && i + 1 < argc) {
            freq = (uint32_t)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--stack-size") == 0 && i + 1 < argc) {
            stack_size = (uint32_t)atoi(argv[++i]);
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--replay") == 0 && i + 1 < argc) {
            in = argv[++i];
        } else if (strcmp(argv[i], "--show") == 0 && i + 1 < argc) {
            show = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--check") == 0) {
            check = true;
        } else if (strcmp(argv[i], "--folded") == 0 && i + 1 < argc) {
            folded = argv[++i];
        } else {
            fprintf(stderr, "bench_replay: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (in) {
        int ret = compare_file(in, NULL, show, folded, check);
        if (ret < 0)
            fprintf(stderr, "bench_replay: %s: %s\n", in, strerror(-ret));
        return ret < 0;
    }
    if (i >= argc) {
        fprintf(stderr, "usage: bench_replay [-F HZ] [--stack-size B] [-o FILE] [--show N] "
                        "[--folded PREFIX] [--check] -- CMD...\n"
                        "       bench_replay --replay FILE [--show N] [--folded PREFIX] "
                        "[--check]\n");
        return 2;
    }
    char tmp[] = "/tmp/canopy-replay-XXXXXX";
    if (!out) {
        int fd = mkstemp(tmp);
        if (fd < 0)
            return 1;
        close(fd);
    }
    run liverun = {0};
    cn_smp_session *live_s = NULL;
    int ret = capture_run(&argv[i], freq, stack_size, out ? out : tmp, &liverun, &live_s);
    if (ret == 0 && liverun.oom)
        ret = -ENOMEM;
    if (ret == 0)
        ret = compare_file(out ? out : tmp, &liverun, show, folded, check);
    if (ret < 0)
        fprintf(stderr, "bench_replay: %s\n", strerror(-ret));
    run_free(&liverun);
    cn_smp_session_free(live_s);
    if (!out)
        unlink(tmp);
    return ret < 0;
}
