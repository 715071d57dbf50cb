/* test_sampler.c — the sampler against workloads with known profiles (tests/workloads,
 * built by tests/cmake/sampler.cmake), plus its parsers on crafted input.
 *
 * Frames come back as (object, file offset); to compare shares by function the test
 * resolves offsets itself with libelf (the workloads keep their .symtab), so it does not
 * depend on the symbolizer. Live tests sample for ~1.5 s each at 999 Hz. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <elfutils/libdw.h>
#include <linux/perf_event.h>

#include "cn_smp.h"
#include "perf_records.h"
#include "smp_internal.h"

extern char **environ;

/* ---------------------------------------------------------------------------------------
 * Test-only symbol resolution: file offset -> function name, per ELF file.
 */
typedef struct tsym {
    uint64_t start, end;
    char *name;
} tsym;

typedef struct tsymtab {
    char *path;
    char build_id[129]; /* hex of the GNU build-id note, "" when none */
    tsym *syms;
    size_t n;
    struct {
        uint64_t off, vaddr, filesz;
    } load[8];
    int nload;
} tsymtab;

/* The build-id from a note section, read with libelf's note iterator (not the sampler's
 * own parser, which is what the tests check). */
static void tsym_build_id(tsymtab *t, Elf_Data *d)
{
    GElf_Nhdr nh;
    size_t off = 0, name_off, desc_off;
    while (d && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
        if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
            memcmp((char *)d->d_buf + name_off, "GNU", 4) != 0 || nh.n_descsz > 64)
            continue;
        for (size_t i = 0; i < nh.n_descsz; i++)
            snprintf(t->build_id + 2 * i, 3, "%02x", ((unsigned char *)d->d_buf)[desc_off + i]);
    }
}

static void tsymtab_load(tsymtab *t, const char *path)
{
    memset(t, 0, sizeof(*t));
    t->path = strdup(path);
    elf_version(EV_CURRENT);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t nph = 0;
    if (e && elf_getphdrnum(e, &nph) == 0) {
        for (size_t i = 0; i < nph && t->nload < 8; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
                t->load[t->nload].off = ph.p_offset;
                t->load[t->nload].vaddr = ph.p_vaddr;
                t->load[t->nload].filesz = ph.p_filesz;
                t->nload++;
            }
        }
    }
    Elf_Scn *scn = NULL;
    while (e && (scn = elf_nextscn(e, scn)) != NULL) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_NOTE)
            tsym_build_id(t, elf_getdata(scn, NULL));
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t cnt = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
        t->syms = calloc(cnt + 1, sizeof(*t->syms));
        for (size_t i = 0; i < cnt; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
                !sym.st_value)
                continue;
            const char *nm = elf_strptr(e, sh.sh_link, sym.st_name);
            t->syms[t->n++] =
                (tsym){sym.st_value, sym.st_value + (sym.st_size ? sym.st_size : 1), strdup(nm)};
        }
    }
    if (e)
        elf_end(e);
    close(fd);
}

static void tsymtab_free(tsymtab *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->syms[i].name);
    free(t->syms);
    free(t->path);
}

static const char *tsymtab_name(const tsymtab *t, uint64_t off)
{
    for (int i = 0; i < t->nload; i++) {
        if (off < t->load[i].off || off >= t->load[i].off + t->load[i].filesz)
            continue;
        uint64_t va = off - t->load[i].off + t->load[i].vaddr;
        for (size_t k = 0; k < t->n; k++)
            if (va >= t->syms[k].start && va < t->syms[k].end)
                return t->syms[k].name;
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------------
 * Collector: folded stacks (root first) per thread, by function name.
 */
#define MAX_STACKS 4096

typedef struct collector {
    tsymtab syms[2]; /* the workload binary, and optionally a library */
    int nsyms;
    struct {
        char *stack;
        pid_t pid, tid;
        long count;
        uint64_t weight; /* sum of periods (ns for cpu-clock) */
    } stacks[MAX_STACKS];
    int nstacks;
    long samples, kernel_samples;
    char comm[64][32];
    pid_t comm_tid[64];
    int ncomm;
    int forks, exits;
    bool saw_exec;
    char wl_identity[160], wl_build_id[160]; /* the workload's object, as the sampler named it */
} collector;

static const char *frame_name(collector *c, const cn_smp_frame *f, char *buf, size_t len)
{
    if (f->obj->kind == CN_SMP_OBJ_KERNEL || f->obj->kind == CN_SMP_OBJ_MODULE)
        return "[k]";
    for (int i = 0; i < c->nsyms; i++) {
        const char *base = strrchr(c->syms[i].path, '/');
        if (f->obj->kind == CN_SMP_OBJ_USER && strcmp(f->obj->name, base ? base + 1 : "") == 0) {
            const char *n = tsymtab_name(&c->syms[i], f->offset);
            if (n)
                return n;
        }
    }
    snprintf(buf, len, "%s", f->obj->name);
    return buf;
}

static void on_sample(void *arg, const cn_smp_sample *s)
{
    collector *c = arg;
    char stack[4096] = "", buf[256];
    size_t used = 0;
    c->samples++;
    if (s->nkernel)
        c->kernel_samples++;
    for (int i = (int)s->nframes - 1; i >= (int)s->nkernel; i--) {
        assert_non_null(s->frames[i].obj);
        const char *n = frame_name(c, &s->frames[i], buf, sizeof(buf));
        int w = snprintf(stack + used, sizeof(stack) - used, "%s%s", used ? ";" : "", n);
        if (w < 0 || (size_t)w >= sizeof(stack) - used)
            break;
        used += (size_t)w;
    }
    for (int i = 0; i < c->nstacks; i++)
        if (c->stacks[i].tid == s->tid && strcmp(c->stacks[i].stack, stack) == 0) {
            c->stacks[i].count++;
            c->stacks[i].weight += s->period;
            return;
        }
    if (c->nstacks < MAX_STACKS) {
        c->stacks[c->nstacks].stack = strdup(stack);
        c->stacks[c->nstacks].pid = s->pid;
        c->stacks[c->nstacks].tid = s->tid;
        c->stacks[c->nstacks].count = 1;
        c->stacks[c->nstacks].weight = s->period;
        c->nstacks++;
    }
}

static void on_object(void *arg, const cn_smp_object *o)
{
    collector *c = arg;
    const char *base = c->nsyms ? strrchr(c->syms[0].path, '/') : NULL;
    if (base && o->kind == CN_SMP_OBJ_USER && strcmp(o->name, base + 1) == 0) {
        snprintf(c->wl_identity, sizeof(c->wl_identity), "%s", o->identity);
        snprintf(c->wl_build_id, sizeof(c->wl_build_id), "%s", o->build_id ? o->build_id : "");
    }
}

static void on_task(void *arg, const cn_smp_task_event *ev)
{
    collector *c = arg;
    if (ev->kind == CN_SMP_TASK_COMM && c->ncomm < 64) {
        snprintf(c->comm[c->ncomm], sizeof(c->comm[0]), "%s", ev->comm);
        c->comm_tid[c->ncomm++] = ev->tid;
        if (ev->exec)
            c->saw_exec = true;
    } else if (ev->kind == CN_SMP_TASK_FORK) {
        c->forks++;
    } else if (ev->kind == CN_SMP_TASK_EXIT) {
        c->exits++;
    }
}

static void collector_free(collector *c)
{
    for (int i = 0; i < c->nsyms; i++)
        tsymtab_free(&c->syms[i]);
    for (int i = 0; i < c->nstacks; i++)
        free(c->stacks[i].stack);
    free(c);
}

/* Samples (of tid, or all when tid is 0) whose stack contains needle; and the total. */
static long count_with(const collector *c, const char *needle, pid_t tid, bool prefix)
{
    long n = 0;
    for (int i = 0; i < c->nstacks; i++) {
        if (tid && c->stacks[i].tid != tid)
            continue;
        if (!needle || (prefix ? strncmp(c->stacks[i].stack, needle, strlen(needle)) == 0
                               : strstr(c->stacks[i].stack, needle) != NULL))
            n += c->stacks[i].count;
    }
    return n;
}

static void dump(const collector *c, const char *why)
{
    fprintf(stderr, "--- %s: %ld samples\n", why, c->samples);
    for (int i = 0; i < c->nstacks; i++)
        if (c->stacks[i].count * 100 >= c->samples)
            fprintf(stderr, "  %6ld tid %d %s\n", c->stacks[i].count, (int)c->stacks[i].tid,
                    c->stacks[i].stack);
}

/* Whether a stack (root first) reaches the process's start: the executable's _start, or
 * the dynamic loader's entry (a sample in ld.so before the program runs: the test's names
 * come from the workload's symbols alone, so such a stack shows the loader's file name
 * only, every frame of it; a stack cut in ld.so below the program's frames is not one).
 * Under a loaded machine the loader's start-up takes longer and those samples, 2-4 of
 * 6 000 on an idle one, grow. */
static bool reaches_start(const char *stack)
{
    if (strncmp(stack, "_start;", 7) == 0)
        return true;
    bool loader = *stack != '\0';
    for (const char *f = stack; f && loader; f = strchr(f, ';'), f = f ? f + 1 : NULL)
        loader = strncmp(f, "ld-linux-", 9) == 0;
    return loader;
}

/* Samples whose stack reaches the process's start (reaches_start). */
static long reach_start(const collector *c)
{
    long n = 0;
    for (int i = 0; i < c->nstacks; i++)
        n += reaches_start(c->stacks[i].stack) ? c->stacks[i].count : 0;
    return n;
}

/* The stop reasons, and up to 8 of the stacks that do not reach the start (which dump()
 * leaves out when each is under 1%): printed when too few reach it, before the assert
 * fails. */
static void dump_unrooted(const collector *c, const cn_smp_counters *cnt)
{
    fprintf(stderr, "--- stops:");
    for (int s = 0; s < CN_SMP_STOP__COUNT; s++)
        fprintf(stderr, " %s %lu", cn_smp_stop_name((cn_smp_stop)s),
                (unsigned long)cnt->unwind_stop[s]);
    fprintf(stderr, "\n--- stacks that do not reach the start:\n");
    for (int i = 0, shown = 0; i < c->nstacks && shown < 8; i++)
        if (!reaches_start(c->stacks[i].stack)) {
            fprintf(stderr, "  %6ld tid %d %s\n", c->stacks[i].count, (int)c->stacks[i].tid,
                    c->stacks[i].stack);
            shown++;
        }
}

static uint64_t weight_with(const collector *c, const char *needle, pid_t tid)
{
    uint64_t w = 0;
    for (int i = 0; i < c->nstacks; i++)
        if ((!tid || c->stacks[i].tid == tid) && (!needle || strstr(c->stacks[i].stack, needle)))
            w += c->stacks[i].weight;
    return w;
}

/* Period-weighted share (in %) of the stacks containing needle among those containing
 * base (frequency mode varies the period from sample to sample, as perf report weighs). */
static double share(const collector *c, const char *needle, pid_t tid, long total)
{
    (void)total;
    uint64_t all = weight_with(c, tid ? NULL : "main", tid);
    return all ? 100.0 * (double)weight_with(c, needle, tid) / (double)all : 0;
}

static void wl_path(char *out, size_t len, const char *name)
{
    const char *dir = getenv("CANOPY_WORKLOADS");
    snprintf(out, len, "%s/%s", dir ? dir : "tests/workloads", name);
}

static bool perf_allowed(void)
{
    struct perf_event_attr a = {.size = sizeof(a),
                                .type = PERF_TYPE_SOFTWARE,
                                .config = PERF_COUNT_SW_CPU_CLOCK,
                                .exclude_kernel = 1};
    long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (fd < 0)
        return false;
    close((int)fd);
    return true;
}

#define REQUIRE_PERF()                                                                             \
    do {                                                                                           \
        if (!perf_allowed()) {                                                                     \
            if (getenv("CI") && strcmp(getenv("CI"), "true") == 0)                                 \
                fail_msg("perf_event_open not permitted under CI=true");                           \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* Runs the session until the target ends (or timeout_ms), then stops it. */
static void drive(cn_smp_session *s, int timeout_ms)
{
    uint64_t t0 = (uint64_t)time(NULL);
    while (!cn_smp_session_ended(s) && (uint64_t)time(NULL) - t0 < (uint64_t)timeout_ms / 1000)
        assert_true(cn_smp_session_wait(s, 100) >= 0);
    assert_int_equal(cn_smp_session_stop(s), 0);
}

/* `canopy run` path: spawn held, attach with enable_on_exec, release, sample to the end.
 * base gives the sampling settings (unwind mode, stack size, check_unwind ...). */
static collector *run_workload_cfg(const char *bin, char *const args[], const cn_smp_config *base,
                                   cn_smp_counters *cnt)
{
    collector *c = calloc(1, sizeof(*c));
    char path[512];
    wl_path(path, sizeof(path), bin);
    tsymtab_load(&c->syms[c->nsyms++], path);
    char *argv[8] = {path};
    for (int i = 0; args && args[i] && i < 6; i++)
        argv[i + 1] = args[i];
    cn_smp_child child;
    assert_int_equal(cn_smp_spawn(argv, (uid_t)-1, (gid_t)-1, &child), 0);
    cn_smp_config cfg = *base;
    cfg.target = CN_SMP_TARGET_PID;
    cfg.pid = child.pid;
    cfg.freq = base->freq ? base->freq : 999;
    cfg.enable_on_exec = true;
    cn_smp_callbacks cb = {.sample = on_sample, .task = on_task, .object = on_object};
    cn_smp_session *s = NULL;
    assert_int_equal(cn_smp_session_new(&cfg, &cb, c, &s), 0);
    cn_err err = {0};
    int ret = cn_smp_session_start(s, &err);
    if (ret < 0)
        fail_msg("start: %s", err.msg);
    assert_string_equal(cn_smp_session_event(s), "cpu-clock");
    assert_int_equal(cn_smp_child_release(&child), 0);
    drive(s, 30000);
    int status;
    assert_int_equal(waitpid(child.pid, &status, 0), child.pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cn_smp_session_counters(s, cnt);
    cn_smp_session_free(s);
    return c;
}

/* check: every compiled-CFI unwind is redone with libunwind and compared. */
static collector *run_workload(const char *bin, char *const args[], cn_smp_unwind mode, bool check,
                               cn_smp_counters *cnt)
{
    cn_smp_config base = {.unwind = mode, .check_unwind = check};
    return run_workload_cfg(bin, args, &base, cnt);
}

static void check_shares(const char *bin, cn_smp_unwind mode, bool expect_work_a)
{
    char *args[] = {"2", NULL};
    cn_smp_counters cnt;
    collector *c = run_workload(bin, args, mode, true, &cnt);
    long total = count_with(c, "main", 0, false);
    char what[128];
    snprintf(what, sizeof(what), "%s --unwind %s", bin, cn_smp_unwind_name(mode));
    dump(c, what);
    fprintf(stderr, "  early stops %lu (no-info %lu short %lu bad-read %lu), leaf fixups %lu\n",
            (unsigned long)cnt.unwind_early, (unsigned long)cnt.unwind_stop[CN_SMP_STOP_NO_INFO],
            (unsigned long)cnt.unwind_stop[CN_SMP_STOP_STACK_SHORT],
            (unsigned long)cnt.unwind_stop[CN_SMP_STOP_BAD_READ], (unsigned long)cnt.leaf_fixups);
    fprintf(stderr,
            "  dwarf unwinds %lu; compiled CFI %lu, libunwind %lu; checked %lu, mismatches %lu\n",
            (unsigned long)cnt.dwarf_unwinds, (unsigned long)cnt.cfi_unwinds,
            (unsigned long)cnt.libunwind_unwinds, (unsigned long)cnt.unwind_checked,
            (unsigned long)cnt.unwind_mismatches);
    /* Compiled CFI takes (nearly) every stack and agrees with libunwind on each. */
    assert_int_equal(cnt.unwind_mismatches, 0);
    assert_int_equal(cnt.unwind_checked, cnt.cfi_unwinds);
    assert_true(cnt.cfi_unwinds * 100 >= (cnt.cfi_unwinds + cnt.libunwind_unwinds) * 95);
    assert_true(c->samples > 150); /* fewer on a loaded machine: cpu-clock */
    assert_true(c->saw_exec);
    /* Objects are identified by their build-id (read here with libelf). */
    assert_true(c->syms[0].build_id[0] != 0);
    assert_string_equal(c->wl_build_id, c->syms[0].build_id);
    assert_string_equal(c->wl_identity, c->syms[0].build_id);
    assert_int_equal(cnt.lost, 0);
    assert_int_equal(cnt.bad_records, 0);
    /* Nearly every sample of the workload reaches main, and through the same root: the
     * frames above main (libc's, unwound through CFI: libc has no frame pointers) are
     * the same whatever unwound the frames below (auto once stopped at libc on
     * frame-pointer stacks and reached _start on the others: two roots for one thread). */
    assert_true(total * 100 >= c->samples * 90);
    long rooted = count_with(c, "_start;libc.so.6;libc.so.6;main;", 0, true);
    fprintf(stderr, "  rooted at _start: %ld of %ld reaching main\n", rooted, total);
    assert_true(rooted * 100 >= total * 99);
    double b = share(c, "main;work_b;work_b_inner;burn", 0, total);
    double cc = share(c, "main;work_c;work_c;work_c;work_c;work_c;burn", 0, total);
    double a = share(c, "main;work_a;burn", 0, total);
    fprintf(stderr, "  shares: work_a %.1f work_b %.1f work_c %.1f\n", a, b, cc);
    /* Most samples are in burn (the leaf), the rest in the loops of the work functions. */
    double b_all = share(c, "main;work_b;work_b_inner", 0, total);
    double c_all = share(c, "main;work_c", 0, total);
    assert_true(b_all > 25 && b_all < 35);
    assert_true(c_all > 15 && c_all < 25);
    assert_true(b > 15);
    assert_true(cc > 10);
    if (expect_work_a) {
        double a_all = share(c, "main;work_a", 0, total);
        assert_true(a_all > 45 && a_all < 55);
        assert_true(a > 25);
    }
    collector_free(c);
}

static void test_shares_fp_mode(void **st)
{
    REQUIRE_PERF();
    /* Plain frame pointers: burn sets up no frame, so its caller is lost from every stack
     * (work_a, work_b_inner, the innermost work_c), exactly as `perf record -g` shows it.
     * The shares of what remains are still right. */
    char *args[] = {"2", NULL};
    cn_smp_counters cnt;
    collector *c = run_workload("wl_shares_fp", args, CN_SMP_UNWIND_FP, true, &cnt);
    dump(c, "wl_shares_fp --unwind fp");
    long total = count_with(c, "main", 0, false);
    assert_true(c->samples > 150 && total * 100 >= c->samples * 90);
    double b = share(c, "main;work_b;", 0, total), cc = share(c, "main;work_c;", 0, total);
    double a = share(c, "main;burn", 0, total) + share(c, "main;work_a", 0, total);
    fprintf(stderr, "  fp shares: (work_a) %.1f work_b %.1f work_c %.1f\n", a, b, cc);
    assert_true(a > 45 && a < 55);
    assert_true(b > 25 && b < 35);
    assert_true(cc > 15 && cc < 25);
    assert_int_equal(cnt.dwarf_unwinds, 0);
    collector_free(c);
}

static void test_shares_auto_fp_binary(void **st)
{
    REQUIRE_PERF();
    check_shares("wl_shares_fp", CN_SMP_UNWIND_AUTO, true);
}

static void test_shares_auto_nofp_binary(void **st)
{
    REQUIRE_PERF();
    check_shares("wl_shares_nofp", CN_SMP_UNWIND_AUTO, true);
}

static void test_shares_dwarf_fp_binary(void **st)
{
    REQUIRE_PERF();
    check_shares("wl_shares_fp", CN_SMP_UNWIND_DWARF, true);
}

static void test_shares_dwarf_nofp_binary(void **st)
{
    REQUIRE_PERF();
    check_shares("wl_shares_nofp", CN_SMP_UNWIND_DWARF, true);
}

/* A binary whose own functions have unwind tables only in .debug_frame (built with
 * -fno-asynchronous-unwind-tables): libunwind's .eh_frame_hdr search finds nothing for
 * them, compiled CFI reads .debug_frame. Full paths and shares as with .eh_frame. */
static void test_shares_dwarf_debug_frame(void **st)
{
    REQUIRE_PERF();
    char *args[] = {"2", NULL};
    cn_smp_counters cnt;
    collector *c = run_workload("wl_shares_dbgframe", args, CN_SMP_UNWIND_DWARF, false, &cnt);
    dump(c, "wl_shares_dbgframe --unwind dwarf");
    long total = count_with(c, "main", 0, false);
    double a = share(c, "main;work_a;burn", 0, total);
    double b = share(c, "main;work_b;work_b_inner;burn", 0, total);
    double cc = share(c, "main;work_c;work_c;work_c;work_c;work_c;burn", 0, total);
    fprintf(stderr, "  shares: work_a %.1f work_b %.1f work_c %.1f; CFI %lu libunwind %lu\n", a, b,
            cc, (unsigned long)cnt.cfi_unwinds, (unsigned long)cnt.libunwind_unwinds);
    assert_true(c->samples > 150);
    assert_true(total * 100 >= c->samples * 90);
    assert_true(share(c, "main;work_a", 0, total) > 45 && share(c, "main;work_a", 0, total) < 55);
    assert_true(share(c, "main;work_b;work_b_inner", 0, total) > 25);
    assert_true(share(c, "main;work_b;work_b_inner", 0, total) < 35);
    assert_true(share(c, "main;work_c", 0, total) > 15 && share(c, "main;work_c", 0, total) < 25);
    assert_true(a > 25 && b > 15 && cc > 10);
    collector_free(c);
}

/* Samples whose root-first stack contains needle and whose leaf (last) frame is leaf. */
static long count_leaf(const collector *c, const char *needle, const char *leaf)
{
    long n = 0;
    size_t ll = strlen(leaf);
    for (int i = 0; i < c->nstacks; i++) {
        const char *st = c->stacks[i].stack;
        size_t sl = strlen(st);
        if (strstr(st, needle) && sl >= ll && strcmp(st + sl - ll, leaf) == 0)
            n += c->stacks[i].count;
    }
    return n;
}

/* A loop on clock_gettime: its leaf is in the vDSO, which has no file; the sampler reads
 * the kernel's image to unwind it, and both unwinders agree. The workload has no build-id:
 * its identity is device:inode:mtime. */
static void test_vdso_and_identity(void **st)
{
    REQUIRE_PERF();
    char *args[] = {"1", "clock", NULL};
    cn_smp_counters cnt;
    collector *c = run_workload("wl_clockread", args, CN_SMP_UNWIND_DWARF, true, &cnt);
    dump(c, "wl_clockread clock --unwind dwarf");
    long total = count_with(c, "main;clock_loop", 0, false);
    long in_vdso = count_leaf(c, "main;clock_loop;", "[vdso]");
    fprintf(stderr, "  %ld samples, %ld reach main;clock_loop, %ld of them in the vDSO\n",
            c->samples, total, in_vdso);
    assert_true(c->samples > 150);
    assert_true(total * 100 >= c->samples * 90);
    assert_true(in_vdso * 100 >= c->samples * 20);
    assert_int_equal(cnt.unwind_mismatches, 0);

    char path[512], want[160];
    struct stat sb;
    wl_path(path, sizeof(path), "wl_clockread");
    assert_int_equal(stat(path, &sb), 0);
    assert_string_equal(c->syms[0].build_id, "");
    snprintf(want, sizeof(want), "%x:%x:%llu:%lld", major(sb.st_dev), minor(sb.st_dev),
             (unsigned long long)sb.st_ino, (long long)sb.st_mtime);
    assert_string_equal(c->wl_identity, want);
    assert_string_equal(c->wl_build_id, "");
    collector_free(c);
}

/* Kernel frames by default (a loop of 1 MiB reads of /dev/zero spends its time in the
 * kernel, and the user part of those samples reaches main); with no_kernel no kernel
 * frame, and the samples taken in the kernel are not recorded at all (like perf's :u). */
static void test_kernel_frames_on_off(void **st)
{
    REQUIRE_PERF();
    char *args[] = {"1", "kernel", NULL};
    long with_kernel = 0;
    for (int off = 0; off <= 1; off++) {
        cn_smp_config base = {.unwind = CN_SMP_UNWIND_AUTO, .no_kernel = off};
        cn_smp_counters cnt;
        collector *c = run_workload_cfg("wl_clockread", args, &base, &cnt);
        long user = count_with(c, "main;zero_loop", 0, false);
        fprintf(stderr, "  no_kernel %d: %ld samples, %ld with kernel frames, %ld reach main\n",
                off, c->samples, c->kernel_samples, user);
        if (off) {
            assert_int_equal(c->kernel_samples, 0);
            assert_true(c->samples * 4 < with_kernel);
        } else {
            with_kernel = c->samples;
            assert_true(c->samples > 150);
            assert_true(c->kernel_samples * 100 >= c->samples * 50);
            assert_true(user * 100 >= c->samples * 80);
        }
        collector_free(c);
    }
}

/* A ring of 16 pages (64 KiB) for 8 KiB DWARF samples: records wrap the ring's end all the
 * time and reads happen every two records; nothing malformed, every stack right (the
 * kernel may drop records, counted). */
static void test_small_ring_wraps(void **st)
{
    REQUIRE_PERF();
    char *args[] = {"1", NULL};
    cn_smp_config base = {.unwind = CN_SMP_UNWIND_DWARF, .ring_pages = 16, .check_unwind = true};
    cn_smp_counters cnt;
    collector *c = run_workload_cfg("wl_shares_nofp", args, &base, &cnt);
    long total = count_with(c, "main", 0, false);
    fprintf(stderr, "  16-page ring: %ld samples (%lu lost), %ld reach main, mismatches %lu\n",
            c->samples, (unsigned long)cnt.lost, total, (unsigned long)cnt.unwind_mismatches);
    assert_true(c->samples > 100);
    assert_int_equal(cnt.bad_records, 0);
    assert_int_equal(cnt.unwind_mismatches, 0);
    assert_true(total * 100 >= c->samples * 90);
    collector_free(c);
}

/* A 30-frame stack unwound through compiled CFI, checked against libunwind sample by
 * sample, with a full stack copy and with one too small for the whole stack (both
 * unwinders must stop at the same frame, for the same reason). pad: the recursion with
 * 200 more bytes per frame (deep.c). stack_size 0: the default copy. */
static void deep_checked(const char *bin, cn_smp_unwind mode, uint32_t stack_size, bool pad,
                         bool expect_full)
{
    char *args[] = {"1", pad ? "pad" : NULL, NULL};
    cn_smp_config base = {.unwind = mode, .stack_size = stack_size, .check_unwind = true};
    cn_smp_counters cnt;
    collector *c = run_workload_cfg(bin, args, &base, &cnt);
    long total = count_with(c, "main", 0, false);
    /* main, deep(27) .. deep(0) (or deep_pad(27) .. deep_pad(0), deep(0)), burn */
    char path[512] = "main;";
    for (int i = 0; i < 28; i++)
        strcat(path, pad ? "deep_pad;" : "deep;");
    strcat(path, pad ? "deep;burn" : "burn");
    double full = share(c, path, 0, total);
    fprintf(stderr,
            "  %s --unwind %s stack %u pad %d: samples %lu, to main %ld, full 30-frame path "
            "%.1f%%, short %lu; CFI %lu libunwind %lu checked %lu mismatches %lu; fp frames %lu "
            "chain joins %lu\n",
            bin, cn_smp_unwind_name(mode), stack_size, (int)pad, (unsigned long)c->samples, total,
            full, (unsigned long)cnt.unwind_stop[CN_SMP_STOP_STACK_SHORT],
            (unsigned long)cnt.cfi_unwinds, (unsigned long)cnt.libunwind_unwinds,
            (unsigned long)cnt.unwind_checked, (unsigned long)cnt.unwind_mismatches,
            (unsigned long)cnt.fp_frames, (unsigned long)cnt.chain_joins);
    assert_true(c->samples > 100); /* 1 s of cpu-clock at 999 Hz: fewer on a loaded machine */
    assert_int_equal(cnt.unwind_mismatches, 0);
    assert_int_equal(cnt.unwind_checked, cnt.cfi_unwinds);
    assert_true(cnt.cfi_unwinds * 100 >= (cnt.cfi_unwinds + cnt.libunwind_unwinds) * 95);
    if (expect_full) {
        assert_true(total * 100 >= (long)c->samples * 90);
        assert_true(full > 80);
    } else {
        /* The copy holds a few frames of deep(): the stack is cut short, never wrong. */
        assert_true(total * 100 <= (long)c->samples * 2);
        assert_true(cnt.unwind_stop[CN_SMP_STOP_STACK_SHORT] * 100 >= (uint64_t)c->samples * 90);
    }
    collector_free(c);
}

static void test_deep_dwarf_checked(void **st)
{
    REQUIRE_PERF();
    deep_checked("wl_deep_nofp", CN_SMP_UNWIND_DWARF, 8192, false, true);
    deep_checked("wl_deep_fp", CN_SMP_UNWIND_DWARF, 512, false, false);
}

/* --stack-size is honoured in auto mode too, and the default copy holds a ~7 KiB stack:
 * 28 frames of ~250 bytes in a binary without frame pointers (auto unwinds it from the
 * copy). Auto once copied at most 2 KiB whatever was asked. */
static void test_stack_size_auto(void **st)
{
    REQUIRE_PERF();
    deep_checked("wl_deep_nofp", CN_SMP_UNWIND_AUTO, 0, true, true);
    deep_checked("wl_deep_nofp", CN_SMP_UNWIND_AUTO, 1024, true, false);
    deep_checked("wl_deep_nofp", CN_SMP_UNWIND_DWARF, 1024, true, false);
}

/* auto on a 30-frame recursion built with frame pointers: frame-pointer steps from the
 * leaf's caller on, and with a 512-byte copy (a few frames) the kernel's frame-pointer
 * chain finishes each stack, aligned by frame pointer (the same return address repeats
 * 27 times): the full path still, in every sample that reaches main. */
static void test_auto_fp_and_chain_join(void **st)
{
    REQUIRE_PERF();
    deep_checked("wl_deep_fp", CN_SMP_UNWIND_AUTO, 0, false, true);
    deep_checked("wl_deep_fp", CN_SMP_UNWIND_AUTO, 512, false, true);
}

/* auto's adaptive stack copy (docs/perf-sampler.md): bin args at 3999 Hz (learning takes
 * 2 000 samples), checked against libunwind sample by sample; prints what happened and
 * returns the collector (the caller frees it). */
static collector *adaptive_run(const char *bin, char *const args[], cn_smp_counters *cnt)
{
    cn_smp_config base = {.unwind = CN_SMP_UNWIND_AUTO, .freq = 3999, .check_unwind = true};
    collector *c = run_workload_cfg(bin, args, &base, cnt);
    long start = reach_start(c);
    dump(c, bin);
    fprintf(stderr,
            "  %s: samples %ld (lost %lu), reach _start %ld, short %lu; copy %lu (adaptive "
            "%lu%s) shrinks %lu grows %lu twins dropped %lu; mismatches %lu\n",
            bin, c->samples, (unsigned long)cnt->lost, start,
            (unsigned long)cnt->unwind_stop[CN_SMP_STOP_STACK_SHORT],
            (unsigned long)cnt->stack_copy, (unsigned long)cnt->stack_adaptive,
            cnt->stack_chain_off ? ", alone" : "", (unsigned long)cnt->stack_shrinks,
            (unsigned long)cnt->stack_grows, (unsigned long)cnt->stack_switch_dropped,
            (unsigned long)cnt->unwind_mismatches);
    assert_int_equal(cnt->stack_adaptive, 1);
    assert_int_equal(cnt->unwind_mismatches, 0);
    /* 16 KiB records at 4 kHz fill the ring in 64 ms: a starved reader loses some */
    assert_true(cnt->lost * 20 <= (uint64_t)c->samples);
    assert_true(cnt->stack_switch_dropped <= 50); /* a few ms of overlap at most */
    return c;
}

/* Frame pointers throughout (phases.c's first phase alone): the copy shrinks after
 * learning, and every stack still reaches _start (through libc's start frames, which keep
 * no frame pointer: their learned tail) with the whole path, as with the full copy. */
static void test_adaptive_copy_shrinks(void **st)
{
    REQUIRE_PERF();
    char *args[] = {"1.5", "0", NULL};
    cn_smp_counters cnt;
    collector *c = adaptive_run("wl_phases_fp", args, &cnt);
    char path[512] = "_start;libc.so.6;libc.so.6;main;shallow;";
    for (int i = 0; i < 21; i++)
        strcat(path, "deep;");
    strcat(path, "spin;burn");
    long full = count_with(c, path, 0, true), start = reach_start(c);
    assert_true(c->samples > 3500); /* 1.5 s of CPU at 4 kHz (6 000), some lost */
    assert_int_equal(cnt.stack_shrinks, 1);
    assert_int_equal(cnt.stack_grows, 0);
    assert_true(cnt.stack_copy <= 2048);
    assert_true(start * 100 >= c->samples * 99);
    assert_true(full * 100 >= c->samples * 80); /* the rest: in spin's clock read */
    collector_free(c);
}

/* phases.c's 21 padded frames (arg "pad" or "bigpad"), bin built with or without frame
 * pointers: the copy ends at want bytes after want_shrinks shrinks, with the kernel's user
 * chain or without it (chain_off), and the stacks complete. */
static void adaptive_padded(const char *bin, const char *pad, uint32_t want, uint64_t want_shrinks,
                            bool chain_off)
{
    char *args[] = {"1.5", "0", (char *)pad, NULL};
    cn_smp_counters cnt;
    collector *c = adaptive_run(bin, args, &cnt);
    long start = reach_start(c);
    assert_true(c->samples > 3500);
    assert_int_equal(cnt.stack_shrinks, want_shrinks);
    assert_int_equal(cnt.stack_grows, 0);
    assert_int_equal(cnt.stack_copy, want);
    assert_int_equal(cnt.stack_chain_off, chain_off);
    if (start * 100 < c->samples * 99)
        dump_unrooted(c, &cnt);
    assert_true(start * 100 >= c->samples * 99);
    collector_free(c);
}

/* ~250-byte frames, ~5.5 KiB: neither 1, 2 nor 4 KiB give the same stacks, 8 KiB does: the
 * copy shrinks to it (a CFI-unwound program whose stacks are shallower than the full copy,
 * as CPython's), and the events stop asking for the kernel's user chain, which code
 * without frame pointers never lets finish a stack. */
static void test_adaptive_copy_cfi_shrinks(void **st)
{
    REQUIRE_PERF();
    adaptive_padded("wl_phases_nofp", "pad", 8192, 1, true);
}

/* The same frames with frame pointers: the chain finishes every stack from a 1 KiB copy,
 * where the copy alone would need 8 KiB: the copy shrinks to 1 KiB and the chain stays. */
static void test_adaptive_copy_keeps_chain(void **st)
{
    REQUIRE_PERF();
    adaptive_padded("wl_phases_fp", "pad", 1024, 1, false);
}

/* ~550-byte frames, ~11.5 KiB: no smaller copy gives the same stacks, the copy stays full. */
static void test_adaptive_copy_stays_full(void **st)
{
    REQUIRE_PERF();
    adaptive_padded("wl_phases_nofp", "bigpad", CN_SMP_STACK_DEFAULT, 0, false);
}

/* Frame-pointer stacks, then stacks through libc's qsort (phases.c): the copy shrinks,
 * then grows back when samples start being cut short; those cut short are the ones taken
 * between the change and the reopen (one read of the rings: ~3% of the samples on an idle
 * machine, bounded at 25% for a starved reader), and every other stack reaches _start. */
static void test_adaptive_copy_grows_back(void **st)
{
    REQUIRE_PERF();
    char *args[] = {"1.5", "1.5", NULL};
    cn_smp_counters cnt;
    collector *c = adaptive_run("wl_phases_fp", args, &cnt);
    long start = reach_start(c);
    long phase2 = count_with(c, ";nested;", 0, false);
    long phase2_start = count_with(c, "_start;libc.so.6;libc.so.6;main;nested;", 0, true);
    fprintf(stderr, "  phase 2: %ld samples, %ld reach _start\n", phase2, phase2_start);
    assert_true(c->samples > 7000);
    assert_int_equal(cnt.stack_shrinks, 1);
    assert_int_equal(cnt.stack_grows, 1);
    assert_int_equal(cnt.stack_copy, CN_SMP_STACK_DEFAULT);
    assert_int_equal(cnt.stack_chain_off, 0); /* the full copy asks for the chain again */
    assert_true(cnt.unwind_stop[CN_SMP_STOP_STACK_SHORT] * 100 <= (uint64_t)c->samples * 25);
    assert_true(start + (long)cnt.unwind_stop[CN_SMP_STOP_STACK_SHORT] + 10 >= c->samples);
    assert_true(phase2 * 3 >= c->samples); /* the second phase was sampled */
    collector_free(c);
}

/* Samples in a function's epilogue (epilogue.c: after `pop %rbp` in a tiny leaf called in
 * a tight loop, the CFI says the caller's %rbp is saved below the sampled stack pointer,
 * where the copy does not reach): the register still holds the popped value, and the
 * unwind goes on to main. Once ~1/3 of these samples stopped at the leaf. */
static void epilogue_checked(const char *bin, cn_smp_unwind mode)
{
    char *args[] = {"1", NULL};
    cn_smp_counters cnt;
    collector *c = run_workload(bin, args, mode, true, &cnt);
    long total = count_with(c, "main", 0, false);
    long leaf = count_with(c, "main;spin;tiny", 0, false);
    fprintf(stderr,
            "  %s --unwind %s: samples %lu, to main %ld, main;spin;tiny %ld; early %lu; CFI %lu "
            "libunwind %lu checked %lu mismatches %lu\n",
            bin, cn_smp_unwind_name(mode), (unsigned long)c->samples, total, leaf,
            (unsigned long)cnt.unwind_early, (unsigned long)cnt.cfi_unwinds,
            (unsigned long)cnt.libunwind_unwinds, (unsigned long)cnt.unwind_checked,
            (unsigned long)cnt.unwind_mismatches);
    assert_true(c->samples > 150); /* 1 s at 999 Hz; fewer under load */
    assert_int_equal(cnt.unwind_mismatches, 0);
    assert_true(total * 100 >= (long)c->samples * 99);
    /* The leaf's share is the CPU's, not the unwinder's: 48-52% on a later VM's Xeon,
     * where a bound of 50% failed as often as not. A third is plenty of epilogue samples;
     * the unwind (every sample to main, no mismatch) is what is tested. */
    assert_true(leaf * 100 >= (long)c->samples * 33);
    collector_free(c);
}

static void test_epilogue_unwind(void **st)
{
    REQUIRE_PERF();
    epilogue_checked("wl_epilogue_nofp", CN_SMP_UNWIND_DWARF);
    epilogue_checked("wl_epilogue_nofp", CN_SMP_UNWIND_AUTO);
    epilogue_checked("wl_epilogue_fp", CN_SMP_UNWIND_DWARF);
    epilogue_checked("wl_epilogue_fp", CN_SMP_UNWIND_AUTO);
}

/* Samples inside a signal handler (sigprof.c: a SIGPROF handler spins ~1 ms every 2 ms of
 * CPU time, while main spins in main_work): the unwind goes through __restore_rt's signal
 * frame into the interrupted code, so handler samples reach main too. Once they stopped
 * at __restore_rt. */
static void sigprof_checked(cn_smp_unwind mode)
{
    char *args[] = {"1", NULL};
    cn_smp_counters cnt;
    collector *c = run_workload("wl_sigprof", args, mode, true, &cnt);
    long handler = count_with(c, "spin_handler", 0, false);
    long through = count_with(c, "main;main_work;", 0, false);
    long both = 0;
    for (int i = 0; i < c->nstacks; i++)
        if (strstr(c->stacks[i].stack, "main;main_work;") &&
            strstr(c->stacks[i].stack, "on_prof;spin_handler"))
            both += c->stacks[i].count;
    dump(c, mode == CN_SMP_UNWIND_AUTO ? "wl_sigprof auto" : "wl_sigprof dwarf");
    fprintf(stderr,
            "  samples %lu, in spin_handler %ld (through main_work: %ld), main;main_work %ld; "
            "CFI %lu libunwind %lu checked %lu mismatches %lu\n",
            (unsigned long)c->samples, handler, both, through, (unsigned long)cnt.cfi_unwinds,
            (unsigned long)cnt.libunwind_unwinds, (unsigned long)cnt.unwind_checked,
            (unsigned long)cnt.unwind_mismatches);
    assert_true(c->samples > 150); /* 1 s at 999 Hz; fewer under load */
    assert_true(handler * 100 >= (long)c->samples * 20);
    assert_true(both * 100 >= handler * 95);
    assert_true(through * 100 >= (long)c->samples * 95);
    assert_int_equal(cnt.unwind_mismatches, 0);
    collector_free(c);
}

static void test_signal_frames(void **st)
{
    REQUIRE_PERF();
    sigprof_checked(CN_SMP_UNWIND_DWARF);
    sigprof_checked(CN_SMP_UNWIND_AUTO);
}

/* Attach to an already running process (not through spawn). */
static collector *attach_workload(const char *bin, char *const args[], const char *lib,
                                  cn_smp_unwind mode, cn_smp_counters *cnt, pid_t *pid_out)
{
    collector *c = calloc(1, sizeof(*c));
    char path[512], libpath[512];
    wl_path(path, sizeof(path), bin);
    tsymtab_load(&c->syms[c->nsyms++], path);
    char *argv[8] = {path};
    int k = 1;
    if (lib) {
        wl_path(libpath, sizeof(libpath), lib);
        tsymtab_load(&c->syms[c->nsyms++], libpath);
        argv[k++] = libpath;
    }
    for (int i = 0; args && args[i] && k < 7; i++)
        argv[k++] = args[i];
    /* Spawned with SIGUSR1 blocked, sent once attached: a workload that waits for it (forker
     * usr1) starts its part only then; the others never see it. */
    pid_t pid;
    posix_spawnattr_t attr;
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    assert_int_equal(posix_spawnattr_init(&attr), 0);
    assert_int_equal(posix_spawnattr_setsigmask(&attr, &usr1), 0);
    assert_int_equal(posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK), 0);
    assert_int_equal(posix_spawn(&pid, path, NULL, &attr, argv, environ), 0);
    posix_spawnattr_destroy(&attr);
    usleep(100000);
    cn_smp_config cfg = {.target = CN_SMP_TARGET_PID, .pid = pid, .freq = 999, .unwind = mode};
    cn_smp_callbacks cb = {.sample = on_sample, .task = on_task};
    cn_smp_session *s = NULL;
    assert_int_equal(cn_smp_session_new(&cfg, &cb, c, &s), 0);
    cn_err err = {0};
    if (cn_smp_session_start(s, &err) < 0)
        fail_msg("start: %s", err.msg);
    const int *fds;
    assert_true(cn_smp_session_fds(s, &fds) >= 1);
    kill(pid, SIGUSR1);
    drive(s, 30000);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cn_smp_session_counters(s, cnt);
    cn_smp_session_free(s);
    *pid_out = pid;
    return c;
}

static pid_t tid_named(const collector *c, const char *name)
{
    for (int i = c->ncomm - 1; i >= 0; i--)
        if (strcmp(c->comm[i], name) == 0)
            return c->comm_tid[i];
    return 0;
}

static void test_threads_after_attach(void **st)
{
    REQUIRE_PERF();
    char *args[] = {"1.5", "usr1", NULL}; /* the threads start once attached */
    cn_smp_counters cnt;
    pid_t pid;
    collector *c = attach_workload("wl_threads_fp", args, NULL, CN_SMP_UNWIND_AUTO, &cnt, &pid);
    dump(c, "threads");
    pid_t ta = tid_named(c, "wl-alpha"), tb = tid_named(c, "wl-beta");
    assert_true(ta > 0 && tb > 0 && ta != pid && tb != pid);
    assert_true(c->forks >= 2);
    long na = count_with(c, NULL, ta, false), nb = count_with(c, NULL, tb, false);
    fprintf(stderr, "  alpha %ld samples, beta %ld\n", na, nb);
    assert_true(na > 200 && nb > 200);
    assert_true(share(c, "alpha_work;spin", ta, na) > 90);
    double x = share(c, "beta_x;spin", tb, nb), y = share(c, "beta_y;spin", tb, nb);
    fprintf(stderr, "  beta_x %.1f beta_y %.1f\n", x, y);
    assert_true(x > 65 && x < 75);
    assert_true(y > 25 && y < 35);
    assert_int_equal(cnt.lost, 0);
    assert_int_equal(cnt.live_threads, 0);
    collector_free(c);
}

static void test_fork_followed(void **st)
{
    REQUIRE_PERF();
    char *args[] = {"1.0", "usr1", NULL};
    cn_smp_counters cnt;
    pid_t pid;
    collector *c = attach_workload("wl_forker_fp", args, NULL, CN_SMP_UNWIND_AUTO, &cnt, &pid);
    dump(c, "forker");
    long child = 0, parent = 0;
    for (int i = 0; i < c->nstacks; i++) {
        if (c->stacks[i].pid != pid && strstr(c->stacks[i].stack, "main;child_work"))
            child += c->stacks[i].count;
        if (c->stacks[i].pid == pid && strstr(c->stacks[i].stack, "main;parent_work"))
            parent += c->stacks[i].count;
    }
    assert_true(child > 100);
    assert_true(parent > 100);
    assert_true(cnt.processes >= 2);
    collector_free(c);
}

static void test_dlopen_after_attach(void **st)
{
    REQUIRE_PERF();
    char *args[] = {"1.0", "usr1", NULL};
    cn_smp_counters cnt;
    pid_t pid;
    collector *c =
        attach_workload("wl_dlopener_fp", args, "libwl_dlwork.so", CN_SMP_UNWIND_AUTO, &cnt, &pid);
    dump(c, "dlopen");
    long total = count_with(c, "main", 0, false);
    assert_true(total > 200);
    assert_true(share(c, "main;dl_work", 0, total) > 90);
    collector_free(c);
}

/* A target that exits mid-session (killed) ends the session cleanly, data kept. */
static void test_target_exit_mid_session(void **st)
{
    REQUIRE_PERF();
    collector *c = calloc(1, sizeof(*c));
    char path[512];
    wl_path(path, sizeof(path), "wl_shares_fp");
    char *argv[] = {path, "30", NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, path, NULL, NULL, argv, environ), 0);
    cn_smp_config cfg = {
        .target = CN_SMP_TARGET_PID, .pid = pid, .freq = 999, .unwind = CN_SMP_UNWIND_FP};
    cn_smp_callbacks cb = {.sample = on_sample, .task = on_task};
    cn_smp_session *s = NULL;
    assert_int_equal(cn_smp_session_new(&cfg, &cb, c, &s), 0);
    assert_int_equal(cn_smp_session_start(s, NULL), 0);
    for (int i = 0; i < 5; i++)
        assert_true(cn_smp_session_wait(s, 100) >= 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    for (int i = 0; i < 100 && !cn_smp_session_ended(s); i++)
        assert_true(cn_smp_session_wait(s, 50) >= 0);
    assert_true(cn_smp_session_ended(s));
    assert_int_equal(cn_smp_session_stop(s), 0);
    assert_int_equal(cn_smp_session_stop(s), 0); /* idempotent */
    assert_true(c->samples > 100);
    assert_true(c->exits >= 1);
    cn_smp_session_free(s);
    collector_free(c);
}

static void test_attach_errors(void **st)
{
    cn_smp_session *s = NULL;
    cn_smp_config bad = {.target = CN_SMP_TARGET_PID, .pid = 0};
    assert_int_equal(cn_smp_session_new(&bad, NULL, NULL, &s), -EINVAL);
    cn_smp_config cfg = {.target = CN_SMP_TARGET_PID, .pid = 0x3ffffff0};
    assert_int_equal(cn_smp_session_new(&cfg, NULL, NULL, &s), 0);
    cn_err err = {0};
    assert_int_equal(cn_smp_session_start(s, &err), -ESRCH);
    assert_true(strlen(err.msg) > 0);
    s = cn_smp_session_free(s);
    cn_smp_config ev = {.target = CN_SMP_TARGET_PID, .pid = getpid(), .event = "no-such"};
    assert_int_equal(cn_smp_session_new(&ev, NULL, NULL, &s), 0);
    assert_int_equal(cn_smp_session_start(s, NULL), -ENOENT);
    s = cn_smp_session_free(s);
    cn_smp_unwind u;
    assert_int_equal(cn_smp_unwind_parse("dwarf", &u), 0);
    assert_int_equal(u, CN_SMP_UNWIND_DWARF);
    assert_int_equal(cn_smp_unwind_parse("fpx", &u), -EINVAL);
}

static void test_system_session(void **st)
{
    REQUIRE_PERF();
    collector *c = calloc(1, sizeof(*c));
    char path[512];
    wl_path(path, sizeof(path), "wl_shares_fp");
    tsymtab_load(&c->syms[c->nsyms++], path);
    cn_smp_config cfg = {.target = CN_SMP_TARGET_SYSTEM, .freq = 999, .unwind = CN_SMP_UNWIND_FP};
    cn_smp_callbacks cb = {.sample = on_sample, .task = on_task};
    cn_smp_session *s = NULL;
    assert_int_equal(cn_smp_session_new(&cfg, &cb, c, &s), 0);
    cn_err err = {0};
    int ret = cn_smp_session_start(s, &err);
    if (ret < 0)
        fail_msg("system: %s", err.msg);
    char *argv[] = {path, "1.0", NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, path, NULL, NULL, argv, environ), 0);
    int status;
    struct rusage ru = {0};
    while (wait4(pid, &status, WNOHANG, &ru) == 0)
        assert_true(cn_smp_session_wait(s, 100) >= 0);
    assert_int_equal(cn_smp_session_stop(s), 0);
    long mine = 0;
    for (int i = 0; i < c->nstacks; i++)
        if (c->stacks[i].pid == pid && strstr(c->stacks[i].stack, "main;work_"))
            mine += c->stacks[i].count;
    /* Expected from the CPU the workload actually got (the machine may be busy): 999 Hz
     * of cpu-clock, of which plain fp sees half under main;work_* (work_a's frame-less
     * leaf `burn` loses its caller). Ask for two thirds of that CPU-derived count. */
    double cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
                   (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    long expect = (long)(cpu_s * 999 * 0.5);
    fprintf(stderr,
            "system: %ld samples, %ld of the workload in main;work_* (%.2f s CPU, ~%ld expected)\n",
            c->samples, mine, cpu_s, expect);
    assert_true(expect > 30);
    assert_true(mine * 3 > expect * 2);
    assert_false(cn_smp_session_ended(s));
    cn_smp_session_free(s);
    collector_free(c);
}

/* ---------------------------------------------------------------------------------------
 * Parsers on crafted input
 */

static void test_maps_line(void **st)
{
    char l1[] = "55d0c8a00000-55d0c8a02000 r-xp 00001000 fd:01 1234567    /usr/bin/true\n";
    cn_obj_maps_line m;
    assert_int_equal(cn_obj_maps_parse_line(l1, &m), 0);
    assert_true(m.start == 0x55d0c8a00000ULL && m.end == 0x55d0c8a02000ULL);
    assert_true(m.exec && !m.deleted);
    assert_true(m.pgoff == 0x1000 && m.maj == 0xfd && m.min == 1 && m.ino == 1234567);
    assert_string_equal(m.path, "/usr/bin/true");
    char l2[] = "7f00-8f00 r-xp 00000000 00:05 77 /tmp/my lib.so (deleted)\n";
    assert_int_equal(cn_obj_maps_parse_line(l2, &m), 0);
    assert_true(m.deleted);
    assert_string_equal(m.path, "/tmp/my lib.so");
    char l3[] = "7ffd1000-7ffd3000 r-xp 00000000 00:00 0                          [vdso]";
    assert_int_equal(cn_obj_maps_parse_line(l3, &m), 0);
    assert_string_equal(m.path, "[vdso]");
    char l4[] = "7f00-7e00 r-xp 0 00:00 0";
    assert_int_equal(cn_obj_maps_parse_line(l4, &m), -EINVAL);
    char l5[] = "zz";
    assert_int_equal(cn_obj_maps_parse_line(l5, &m), -EINVAL);
    char l6[] = "1000-2000 r-xp 0 00:00";
    assert_int_equal(cn_obj_maps_parse_line(l6, &m), -EINVAL);
}

static void test_address_space_overlaps(void **st)
{
    cn_smp__proc p = {.pid = 1};
    cn_smp__obj a = {0}, b = {0}, c = {0};
    assert_int_equal(cn_smp__proc_map(&p, 0x1000, 0x5000, 0, &a), 0);
    assert_int_equal(cn_smp__proc_map(&p, 0x8000, 0x9000, 0, &c), 0);
    /* dlopen over the middle of a: split into three. */
    assert_int_equal(cn_smp__proc_map(&p, 0x2000, 0x3000, 0x100000, &b), 0);
    assert_int_equal(p.nmaps, 4);
    assert_ptr_equal(cn_smp__proc_find(&p, 0x1fff)->obj, &a);
    assert_ptr_equal(cn_smp__proc_find(&p, 0x2000)->obj, &b);
    const cn_smp__map *tail = cn_smp__proc_find(&p, 0x3000);
    assert_ptr_equal(tail->obj, &a);
    assert_true(tail->pgoff == 0x2000); /* file offset follows the split */
    assert_null(cn_smp__proc_find(&p, 0x6000));
    /* A mapping covering several replaces them all. */
    assert_int_equal(cn_smp__proc_map(&p, 0x0, 0x8800, 0, &c), 0);
    assert_int_equal(p.nmaps, 2);
    assert_ptr_equal(cn_smp__proc_find(&p, 0x4000)->obj, &c);
    assert_true(cn_smp__proc_find(&p, 0x8900)->pgoff == 0x800); /* trimmed head */
    cn_smp__proc_clear(&p);
}

/* Appends the MMAP2 record of /bin/x (pid 42, executable, inode 99) at 0x400000 for
 * 0x2000 bytes from file offset pgoff, at time t; returns the new length. */
static size_t put_mmap_bin_x(uint8_t *buf, size_t len, uint64_t pgoff, uint64_t t)
{
    const test_mmap2 m = {.pid = 42,
                          .tid = 42,
                          .addr = 0x400000,
                          .len = 0x2000,
                          .pgoff = pgoff,
                          .ino = 99,
                          .prot = 5 /* r-x */,
                          .flags = 2 /* private */,
                          .path = "/bin/x",
                          .time = t};
    return test_put_mmap2(buf, len, &m);
}

typedef struct feed_ctx {
    int samples, comms, forks;
    uint64_t last_offset;
    const char *last_obj;
    uint32_t nframes, nkernel;
} feed_ctx;

static void feed_sample(void *arg, const cn_smp_sample *s)
{
    feed_ctx *f = arg;
    f->samples++;
    f->nframes = s->nframes;
    f->nkernel = s->nkernel;
    if (s->nframes) {
        f->last_offset = s->frames[s->nframes - 1].offset;
        f->last_obj = s->frames[s->nframes - 1].obj->name;
    }
}

static void feed_task(void *arg, const cn_smp_task_event *ev)
{
    feed_ctx *f = arg;
    f->comms += ev->kind == CN_SMP_TASK_COMM;
    f->forks += ev->kind == CN_SMP_TASK_FORK;
}

/* cn_smp_session_replay: a capture in auto's layout (callchain + registers + stack) fed
 * into a dwarf session without kernel frames, whose own layout has no callchain: parsed as
 * the capture's layout, not the session's. Only supersets, only feed-only sessions. */
static void test_replay_layout(void **st)
{
    cn_smp_config cfg = {
        .target = CN_SMP_TARGET_NONE, .unwind = CN_SMP_UNWIND_DWARF, .no_kernel = true};
    feed_ctx f = {0};
    cn_smp_callbacks cb = {.sample = feed_sample};
    cn_smp_session *s = NULL;
    assert_int_equal(cn_smp_session_new(&cfg, &cb, &f, &s), 0);
    assert_int_equal(cn_smp_session_start(s, NULL), 0);
    uint64_t own = cn_smp_session_sample_type(s);
    assert_false(own & PERF_SAMPLE_CALLCHAIN);
    uint64_t cap = own | PERF_SAMPLE_CALLCHAIN;
    assert_int_equal(cn_smp_session_replay(s, own & ~(uint64_t)PERF_SAMPLE_TIME), -EINVAL);
    assert_int_equal(cn_smp_session_replay(s, cap | PERF_SAMPLE_ADDR), -EINVAL);
    assert_int_equal(cn_smp_session_replay(NULL, cap), -EINVAL);
    /* The auto-layout sample: chain [USER, u0, u1], no registers (ABI_NONE), empty copy. */
    struct {
        struct perf_event_header h;
        uint64_t ip;
        uint32_t pid, tid;
        uint64_t time;
        uint32_t cpu, res;
        uint64_t period, nr, chain[3], abi, stack_size;
    } sm = {{PERF_RECORD_SAMPLE, 0, sizeof(sm)},
            0x400010,
            42,
            42,
            20,
            0,
            0,
            1000,
            3,
            {(uint64_t)PERF_CONTEXT_USER, 0x400010, 0x401000},
            PERF_SAMPLE_REGS_ABI_NONE,
            0};
    /* In the session's own layout the chain's count is read as the registers' ABI. */
    cn_smp_counters cnt;
    cn_smp_session_feed(s, &sm, sizeof(sm));
    assert_int_equal(f.samples, 0);
    assert_int_equal(cn_smp_session_replay(s, cap), 0);
    assert_int_equal(cn_smp_session_feed(s, &sm, sizeof(sm)), 1);
    assert_int_equal(f.nframes, 2); /* no registers to unwind from: the chain's frames */
    assert_int_equal(f.nkernel, 0);
    cn_smp_session_counters(s, &cnt);
    assert_int_equal(cnt.samples, 1);
    s = cn_smp_session_free(s);
    /* Not a feed-only session. */
    cfg = (cn_smp_config){.target = CN_SMP_TARGET_PID, .pid = getpid()};
    assert_int_equal(cn_smp_session_new(&cfg, NULL, NULL, &s), 0);
    assert_int_equal(cn_smp_session_replay(s, cn_smp_session_sample_type(s)), -EINVAL);
    cn_smp_session_free(s);
}

/* cn_smp_session_record_stack finds a sample's stack copy by the session's layout, even
 * where an earlier field holds the number a scan for "the u64 that matches the record's
 * end" would take for the copy's size (bench_replay's old cut). */
static void test_record_stack(void **st)
{
    cn_smp_config cfg = {
        .target = CN_SMP_TARGET_NONE, .unwind = CN_SMP_UNWIND_DWARF, .no_kernel = true};
    cn_smp_session *s = NULL;
    assert_int_equal(cn_smp_session_new(&cfg, NULL, NULL, &s), 0);
    assert_int_equal(cn_smp_session_start(s, NULL), 0);
    uint64_t own = cn_smp_session_sample_type(s),
             known = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                     PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_REGS_USER |
                     PERF_SAMPLE_STACK_USER | PERF_SAMPLE_CGROUP;
    assert_int_equal(own & ~known, 0); /* the record below writes these fields only */
    assert_true(own & PERF_SAMPLE_STACK_USER);
    uint8_t rec[512] = {0};
    size_t at = 8, period_at = 0, size_at = 0;
    enum { COPY = 64, DYN = 24 };
    if (own & PERF_SAMPLE_IDENTIFIER)
        at = test_put(rec, at, &(uint64_t){1}, 8);
    if (own & PERF_SAMPLE_IP)
        at = test_put(rec, at, &(uint64_t){0x400010}, 8);
    if (own & PERF_SAMPLE_TID)
        at = test_put(rec, at, &(uint64_t){42 | (uint64_t)42 << 32}, 8);
    if (own & PERF_SAMPLE_TIME)
        at = test_put(rec, at, &(uint64_t){20}, 8);
    if (own & PERF_SAMPLE_CPU)
        at = test_put(rec, at, &(uint64_t){0}, 8);
    if (own & PERF_SAMPLE_PERIOD) {
        period_at = at;
        at = test_put(rec, at, &(uint64_t){0}, 8); /* set below */
    }
    if (own & PERF_SAMPLE_REGS_USER)
        at = test_put(rec, at, &(uint64_t){PERF_SAMPLE_REGS_ABI_NONE}, 8);
    size_at = at;
    at = test_put(rec, at, &(uint64_t){COPY}, 8);
    at += COPY;
    at = test_put(rec, at, &(uint64_t){DYN}, 8);
    if (own & PERF_SAMPLE_CGROUP)
        at = test_put(rec, at, &(uint64_t){7}, 8);
    size_t len = at, tail = own & PERF_SAMPLE_CGROUP ? 8 : 0;
    struct perf_event_header h = {PERF_RECORD_SAMPLE, 0, (uint16_t)len};
    memcpy(rec, &h, sizeof(h));
    assert_true(period_at > 0);
    uint64_t decoy = len - period_at - 16 - tail; /* what the old scan matched first */
    memcpy(rec + period_at, &decoy, 8);

    size_t got_at = 0;
    uint64_t size = 0, dyn = 0;
    assert_int_equal(cn_smp_session_record_stack(s, rec, len, &got_at, &size, &dyn), 0);
    assert_int_equal(got_at, size_at);
    assert_int_equal(size, COPY);
    assert_int_equal(dyn, DYN);
    /* cut short: does not parse */
    assert_int_equal(cn_smp_session_record_stack(s, rec, len - 16, &got_at, &size, &dyn), -EINVAL);
    /* another record type */
    uint8_t mm[256];
    assert_int_equal(
        cn_smp_session_record_stack(s, mm, put_mmap_bin_x(mm, 0, 0x1000, 10), &got_at, &size, &dyn),
        -ENOENT);
    cn_smp_session_free(s);
}

static void test_feed_records(void **st)
{
    cn_smp_config cfg = {.target = CN_SMP_TARGET_NONE, .unwind = CN_SMP_UNWIND_FP};
    feed_ctx f = {0};
    cn_smp_callbacks cb = {.sample = feed_sample, .task = feed_task};
    cn_smp_session *s = NULL;
    assert_int_equal(cn_smp_session_new(&cfg, &cb, &f, &s), 0);
    assert_int_equal(cn_smp_session_start(s, NULL), 0);
    uint64_t st_bits = cn_smp_session_sample_type(s);
    assert_true(st_bits & PERF_SAMPLE_CALLCHAIN);
    uint8_t buf[4096];
    size_t len = 0;
    /* MMAP2 of /bin/x at 0x400000 (pgoff 0x1000), exec. */
    len = put_mmap_bin_x(buf, len, 0x1000, 10);
    /* SAMPLE: ip, pid/tid, time, cpu, period, callchain [KERNEL, k1, k2, USER, u0, u1]. */
    struct {
        struct perf_event_header h;
        uint64_t ip;
        uint32_t pid, tid;
        uint64_t time;
        uint32_t cpu, res;
        uint64_t period, nr, chain[6];
    } sm = {{PERF_RECORD_SAMPLE, 0, sizeof(sm)},
            0xffffffff81000010ULL,
            42,
            43,
            20,
            1,
            0,
            1000,
            6,
            {(uint64_t)PERF_CONTEXT_KERNEL, 0xffffffff81000010ULL, 0xffffffff81000100ULL,
             (uint64_t)PERF_CONTEXT_USER, 0x400010, 0x401000}};
    len = test_put(buf, len, &sm, sizeof(sm));
    /* LOST record with sample_id trailer. */
    struct {
        struct perf_event_header h;
        uint64_t id, lost;
        uint32_t pid, tid;
        uint64_t time;
        uint32_t cpu, res;
    } lost = {{PERF_RECORD_LOST, 0, sizeof(lost)}, 1, 7, 42, 42, 30, 0, 0};
    len = test_put(buf, len, &lost, sizeof(lost));
    /* A truncated record: size claims more than what remains. */
    struct perf_event_header trunc = {PERF_RECORD_SAMPLE, 0, 200};
    len = test_put(buf, len, &trunc, sizeof(trunc));
    assert_int_equal(cn_smp_session_feed(s, buf, len), 1);
    assert_int_equal(f.samples, 1);
    assert_int_equal(f.nkernel, 2);
    assert_int_equal(f.nframes, 4);
    /* Outermost user frame: return address 0x401000 - 1 -> file offset 0x1fff. */
    assert_string_equal(f.last_obj, "x");
    assert_true(f.last_offset == 0x401000 - 1 - 0x400000 + 0x1000);
    cn_smp_counters cnt;
    cn_smp_session_counters(s, &cnt);
    assert_int_equal(cnt.lost, 7);
    assert_int_equal(cnt.lost_events, 1);
    assert_true(cnt.bad_records >= 1);
    /* A sample with a callchain count larger than the record: counted, not crashed. */
    sm.nr = 1000;
    assert_int_equal(cn_smp_session_feed(s, &sm, sizeof(sm)), 0);
    cn_smp_session_counters(s, &cnt);
    assert_true(cnt.bad_records >= 2);
    cn_smp_session_free(s);
}

/* ---- off-CPU interval accounting (offcpu.c), on synthetic records ---------------------- */

typedef struct off_ctx {
    int n;
    struct {
        pid_t tid;
        uint64_t time, weight;
        cn_smp_state state;
        uint32_t nframes;
        uint64_t leaf;
    } s[32];
} off_ctx;

static void off_sample(void *arg, const cn_smp_sample *smp)
{
    off_ctx *o = arg;
    assert_true(o->n < 32);
    o->s[o->n].tid = smp->tid;
    o->s[o->n].time = smp->time_ns;
    o->s[o->n].weight = smp->weight_ns;
    o->s[o->n].state = smp->state;
    o->s[o->n].nframes = smp->nframes;
    o->s[o->n].leaf = smp->nframes ? smp->frames[0].offset : 0;
    o->n++;
}

/* A session fed by hand in mode m; its first record maps /bin/x at 0x400000. */
static cn_smp_session *off_session(cn_smp_mode m, uint64_t min_block, off_ctx *o)
{
    cn_smp_config cfg = {.target = CN_SMP_TARGET_NONE,
                         .unwind = CN_SMP_UNWIND_FP,
                         .freq = 100,
                         .mode = m,
                         .min_block_ns = min_block};
    cn_smp_callbacks cb = {.sample = off_sample};
    cn_smp_session *s = NULL;
    assert_int_equal(cn_smp_session_new(&cfg, &cb, o, &s), 0);
    assert_int_equal(cn_smp_session_start(s, NULL), 0);
    uint8_t buf[256];
    cn_smp_session_feed(s, buf, put_mmap_bin_x(buf, 0, 0, 1));
    return s;
}

/* A sample of tid at time t with user frames leaf..0x401000 (id for WALL's layout). */
static void off_feed_sample(cn_smp_session *s, bool with_id, uint64_t id, pid_t tid, uint64_t t,
                            uint64_t leaf, uint64_t period)
{
    struct {
        uint64_t ip;
        uint32_t pid, tid;
        uint64_t time;
        uint32_t cpu, res;
        uint64_t period, nr, chain[3];
    } body = {
        leaf, 42, (uint32_t)tid, t, 0, 0, period, 3, {(uint64_t)PERF_CONTEXT_USER, leaf, 0x401000}};
    uint8_t buf[256];
    struct perf_event_header h = {PERF_RECORD_SAMPLE, 0,
                                  (uint16_t)(sizeof(h) + sizeof(body) + (with_id ? 8 : 0))};
    size_t n = test_put(buf, 0, &h, sizeof(h));
    if (with_id)
        n = test_put(buf, n, &id, 8);
    n = test_put(buf, n, &body, sizeof(body));
    assert_int_equal(cn_smp_session_feed(s, buf, n), 1);
}

/* A PERF_RECORD_SWITCH of tid at t: out (with PREEMPT when preempt) or in. The sample_id
 * trailer ends with the identifier where the layout has one (WALL). */
static void off_feed_switch(cn_smp_session *s, pid_t tid, uint64_t t, bool out, bool preempt)
{
    bool with_id = cn_smp_session_sample_type(s) & PERF_SAMPLE_IDENTIFIER;
    struct {
        uint32_t pid, tid;
        uint64_t time;
        uint32_t cpu, res;
        uint64_t id;
    } trailer = {42, (uint32_t)tid, t, 0, 0, 3};
    size_t tl = sizeof(trailer) - (with_id ? 0 : 8);
    struct perf_event_header h = {PERF_RECORD_SWITCH,
                                  (uint16_t)((out ? PERF_RECORD_MISC_SWITCH_OUT : 0) |
                                             (preempt ? PERF_RECORD_MISC_SWITCH_OUT_PREEMPT : 0)),
                                  (uint16_t)(sizeof(h) + tl)};
    uint8_t buf[64];
    size_t n = test_put(buf, 0, &h, sizeof(h));
    n = test_put(buf, n, &trailer, tl);
    assert_int_equal(cn_smp_session_feed(s, buf, n), 0);
}

static void off_feed_exit(cn_smp_session *s, pid_t tid, uint64_t t)
{
    struct {
        struct perf_event_header h;
        uint32_t pid, ppid, tid, ptid;
        uint64_t time;
        uint32_t spid, stid;
        uint64_t stime;
        uint32_t cpu, res;
    } ex = {
        {PERF_RECORD_EXIT, 0, sizeof(ex)}, 42, 1, (uint32_t)tid, 1, t, 42, (uint32_t)tid, t, 0, 0};
    cn_smp_session_feed(s, &ex, sizeof(ex));
}

static void test_offcpu_intervals(void **st)
{
    (void)st;
    off_ctx o = {0};
    cn_smp_session *s = off_session(CN_SMP_MODE_OFFCPU, 0, &o);
    cn_smp_counters c;
    /* Out at 1000 (blocked), in at 5000: one sample of 4000 ns at the switch-out stack. */
    off_feed_sample(s, false, 0, 43, 1000, 0x400010, 1);
    off_feed_switch(s, 43, 1000, true, false);
    assert_int_equal(o.n, 0); /* nothing until the interval ends */
    off_feed_switch(s, 43, 5000, false, false);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.s[0].tid, 43);
    assert_int_equal(o.s[0].weight, 4000);
    assert_int_equal(o.s[0].time, 5000);
    assert_int_equal(o.s[0].state, CN_SMP_STATE_BLOCKED);
    assert_int_equal(o.s[0].nframes, 2);
    assert_true(o.s[0].leaf == 0x10);
    /* Preempted: the switch-out record's flag. Two threads interleaved. */
    off_feed_sample(s, false, 0, 44, 6000, 0x400020, 1);
    off_feed_switch(s, 44, 6000, true, true);
    off_feed_sample(s, false, 0, 43, 6500, 0x400030, 1);
    off_feed_switch(s, 43, 6500, true, false);
    off_feed_switch(s, 44, 7000, false, false);
    off_feed_switch(s, 43, 9500, false, false);
    assert_int_equal(o.n, 3);
    assert_int_equal(o.s[1].tid, 44);
    assert_int_equal(o.s[1].weight, 1000);
    assert_int_equal(o.s[1].state, CN_SMP_STATE_PREEMPTED);
    assert_int_equal(o.s[2].tid, 43);
    assert_int_equal(o.s[2].weight, 3000);
    assert_true(o.s[2].leaf == 0x30);
    /* A wait in progress: pending delivers up to now, the switch-in the rest. */
    off_feed_sample(s, false, 0, 43, 10000, 0x400010, 1);
    assert_int_equal(cn_smp_session_pending(s, 15000), 1);
    assert_int_equal(o.n, 4);
    assert_int_equal(o.s[3].weight, 5000);
    assert_int_equal(cn_smp_session_pending(s, 15000), 0); /* nothing new */
    off_feed_switch(s, 43, 18000, false, false);
    assert_int_equal(o.n, 5);
    assert_int_equal(o.s[4].weight, 3000);
    /* A switch-in without its switch-out (before the start, or lost): counted only. */
    off_feed_switch(s, 45, 19000, false, false);
    assert_int_equal(o.n, 5);
    /* A lost switch-in: the next switch-out of the thread ends what we know. */
    off_feed_sample(s, false, 0, 46, 20000, 0x400010, 1);
    off_feed_sample(s, false, 0, 46, 26000, 0x400010, 1);
    assert_int_equal(o.n, 6);
    assert_int_equal(o.s[5].weight, 6000);
    /* Exit while switched out closes it; the dead task's last switch-out opens nothing. */
    off_feed_exit(s, 46, 27000);
    assert_int_equal(o.n, 7);
    assert_int_equal(o.s[6].weight, 1000);
    off_feed_sample(s, false, 0, 46, 27100, 0x400010, 1);
    assert_int_equal(cn_smp_session_pending(s, 99000), 0);
    cn_smp_session_counters(s, &c);
    assert_int_equal(c.switches, 7);
    assert_int_equal(c.offcpu_unmatched, 2);
    assert_int_equal(c.offcpu_ns, 4000 + 1000 + 3000 + 8000 + 6000 + 1000);
    assert_int_equal(c.offcpu_short, 0);
    cn_smp_session_free(s);
}

/* Threads found waiting (waiting.c's seeds): the interval starts at the session's start
 * (1000) under the stack read later (its read began at 4000). A thread whose first switch
 * comes after the read waited all along: delivered from 1000. One whose switch-in (or a
 * switch-out: it was running at the start) predates the read ran meanwhile, the stack read
 * is of a later wait: nothing delivered, counted unmatched, not waiting; its next
 * switch-out opens its real wait. */
static void test_offcpu_seed_stale(void **st)
{
    (void)st;
    off_ctx o = {0};
    cn_smp_session *s = off_session(CN_SMP_MODE_OFFCPU, 0, &o);
    cn_smp_counters c;
    s->frames[0] = (cn_smp_frame){NULL, 0x10};
    for (pid_t tid = 43; tid <= 45; tid++) {
        cn_smp__rec r = {.pid = 42, .tid = (uint32_t)tid, .time = 1000};
        cn_smp__offcpu_seed(s, &r, 1, 0, CN_SMP_STOP_NONE, 4000);
    }
    cn_smp_session_counters(s, &c);
    assert_int_equal(c.offcpu_waiting, 3);
    off_feed_switch(s, 43, 6000, false, false); /* after its read: 1000..6000 */
    assert_int_equal(o.n, 1);
    assert_int_equal(o.s[0].tid, 43);
    assert_int_equal(o.s[0].weight, 5000);
    off_feed_switch(s, 44, 2000, false, false); /* ran before its read: dropped */
    assert_int_equal(o.n, 1);
    off_feed_sample(s, false, 0, 45, 3000, 0x400020, 1); /* running at the start */
    assert_int_equal(o.n, 1);
    off_feed_switch(s, 45, 7000, false, false); /* its real wait, 3000..7000 */
    assert_int_equal(o.n, 2);
    assert_int_equal(o.s[1].tid, 45);
    assert_int_equal(o.s[1].weight, 4000);
    assert_true(o.s[1].leaf == 0x20);
    cn_smp_session_counters(s, &c);
    assert_int_equal(c.offcpu_waiting, 1);
    assert_int_equal(c.offcpu_unmatched, 2);
    assert_int_equal(c.offcpu_ns, 5000 + 4000);
    cn_smp_session_free(s);
}

static void test_offcpu_min_block(void **st)
{
    (void)st;
    off_ctx o = {0};
    cn_smp_session *s = off_session(CN_SMP_MODE_OFFCPU, 2000, &o);
    off_feed_sample(s, false, 0, 43, 1000, 0x400010, 1);
    off_feed_switch(s, 43, 2500, false, false); /* 1500 < 2000: dropped */
    assert_int_equal(o.n, 0);
    off_feed_sample(s, false, 0, 43, 3000, 0x400010, 1);
    assert_int_equal(cn_smp_session_pending(s, 4000), 0); /* too short so far */
    assert_int_equal(cn_smp_session_pending(s, 5000), 1); /* now it counts: 2000 */
    off_feed_switch(s, 43, 6000, false, false);
    assert_int_equal(o.n, 2);
    assert_int_equal(o.s[0].weight + o.s[1].weight, 3000);
    cn_smp_counters c;
    cn_smp_session_counters(s, &c);
    assert_int_equal(c.offcpu_short, 1);
    assert_int_equal(c.offcpu_intervals, 2);
    cn_smp_session_free(s);
}

static void test_offcpu_wall_ids(void **st)
{
    (void)st;
    off_ctx o = {0};
    cn_smp_session *s = off_session(CN_SMP_MODE_WALL, 0, &o);
    assert_true(cn_smp_session_sample_type(s) & PERF_SAMPLE_IDENTIFIER);
    assert_int_equal(cn_smp__offcpu_add_id(s, 7), 0);
    assert_int_equal(cn_smp__offcpu_add_id(s, 3), 0);
    /* A CPU sample (id 5): its sampling interval in time, 1e9 / 100 Hz. */
    off_feed_sample(s, true, 5, 43, 1000, 0x400010, 12345);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.s[0].weight, 10000000);
    assert_int_equal(o.s[0].state, CN_SMP_STATE_RUNNING);
    /* A context switch (id 3, then 7): an interval, closed by the thread's next CPU sample
     * when no switch-in record came. */
    off_feed_sample(s, true, 3, 43, 2000, 0x400020, 1);
    assert_int_equal(o.n, 1);
    off_feed_sample(s, true, 5, 43, 9000, 0x400010, 12345);
    assert_int_equal(o.n, 3);
    assert_int_equal(o.s[1].weight, 7000);
    assert_true(o.s[1].leaf == 0x20);
    off_feed_sample(s, true, 7, 43, 10000, 0x400020, 1);
    off_feed_switch(s, 43, 10500, false, false);
    assert_int_equal(o.n, 4);
    assert_int_equal(o.s[3].weight, 500);
    cn_smp_session_free(s);
}

/* `test_sampler --record MODE CMD ARGS...`: runs CMD under the sampler (as `canopy run`
 * would) and prints folded stacks (root first, by function for CMD's own binary, by
 * object name elsewhere) weighted by period (ns); used by tests/integration/test_sampler_perf.sh
 * to compare with `perf record` on the same workload. */
static int record_main(int argc, char **argv)
{
    cn_smp_unwind mode;
    if (argc < 4 || cn_smp_unwind_parse(argv[2], &mode) < 0) {
        fprintf(stderr, "usage: test_sampler --record fp|dwarf|auto CMD ARGS...\n");
        return 2;
    }
    collector *c = calloc(1, sizeof(*c));
    tsymtab_load(&c->syms[c->nsyms++], argv[3]);
    cn_smp_child child;
    if (cn_smp_spawn(&argv[3], (uid_t)-1, (gid_t)-1, &child) < 0)
        return 1;
    cn_smp_config cfg = {.target = CN_SMP_TARGET_PID,
                         .pid = child.pid,
                         .freq = 999,
                         .unwind = mode,
                         .enable_on_exec = true,
                         .no_kernel = true};
    cn_smp_callbacks cb = {.sample = on_sample, .task = on_task};
    cn_smp_session *s = NULL;
    cn_err err = {.msg = "setup failed"};
    if (cn_smp_session_new(&cfg, &cb, c, &s) < 0 || cn_smp_session_start(s, &err) < 0) {
        fprintf(stderr, "sampler: %s\n", err.msg);
        cn_smp_child_abort(&child);
        return 1;
    }
    cn_smp_child_release(&child);
    while (!cn_smp_session_ended(s))
        if (cn_smp_session_wait(s, 100) < 0)
            break;
    cn_smp_session_stop(s);
    waitpid(child.pid, NULL, 0);
    for (int i = 0; i < c->nstacks; i++)
        printf("%s %llu\n", c->stacks[i].stack, (unsigned long long)c->stacks[i].weight);
    cn_smp_counters cnt;
    cn_smp_session_counters(s, &cnt);
    fprintf(stderr, "samples %lu lost %lu early-stops %lu\n", (unsigned long)cnt.samples,
            (unsigned long)cnt.lost, (unsigned long)cnt.unwind_early);
    cn_smp_session_free(s);
    collector_free(c);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Unwind tables: what an image keeps, and the cache shared by file identity (cache.c)
 */

/* An identity for tests: distinct per n, never a real file's. */
static cn_obj_ident test_ident(uint64_t n)
{
    return (cn_obj_ident){.dev = 0xfff0, .ino = n, .size = 1000 + (int64_t)n, .mtime_ns = 7};
}

/* A library of the host's multiarch directory under prefix ("" or "/usr"): the test
 * runs on the machine it was built for. */
#if defined(__aarch64__)
#define HOST_LIB(prefix, name) prefix "/lib/aarch64-linux-gnu/" name
#else
#define HOST_LIB(prefix, name) prefix "/lib/x86_64-linux-gnu/" name
#endif

static cn_smp__elf *read_tables(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    cn_smp__elf *e = NULL;
    assert_int_equal(cn_smp__elf_read_fd(fd, &e), 0);
    close(fd);
    return e;
}

/* libc's tables: its CFI is there, its code is not (not read, and refused to readers). */
static void test_tables_keep_no_code(void **state)
{
    (void)state;
    const char *libc = HOST_LIB("", "libc.so.6");
    cn_smp__elf *e = read_tables(libc);
    struct stat st;
    assert_int_equal(stat(libc, &st), 0);
    uint64_t code = 0, code_vaddr = 0;
    for (uint32_t i = 0; i < e->nload; i++)
        if (e->load[i].exec) {
            code += e->load[i].filesz;
            code_vaddr = e->load[i].vaddr + e->load[i].filesz / 2;
        }
    fprintf(stderr, "  libc: %jd bytes, code %ju, read %ju in %u parts\n", (intmax_t)st.st_size,
            (uintmax_t)code, (uintmax_t)e->read_bytes, e->nparts);
    assert_true(code > 0 && e->read_bytes < (uint64_t)st.st_size - code);
    assert_null(cn_smp__elf_ptr(e, code_vaddr, 8));
    cn_obj_ehhdr h;
    assert_non_null(cn_smp__elf_ehhdr(e, &h));
    assert_true(h.count > 1000);
    assert_true(e->has_fp == 0 || e->has_fp == 1); /* prologues read from the file at load */
    cn_smp__elf_free(e);
}

/* libdw's frame at addr in an image's .eh_frame, as a comparable summary: its range and
 * CFA rule ("start end nops atom:number ..."); "none" where libdw finds none. */
static void frame_summary(Dwarf_CFI *cfi, uint64_t addr, char *out, size_t size)
{
    Dwarf_Frame *f = NULL;
    Dwarf_Addr start, end;
    bool signal;
    Dwarf_Op *ops;
    size_t nops;
    snprintf(out, size, "none");
    if (dwarf_cfi_addrframe(cfi, addr, &f) == 0 &&
        dwarf_frame_info(f, &start, &end, &signal) >= 0 && dwarf_frame_cfa(f, &ops, &nops) == 0) {
        int n = snprintf(out, size, "%jx %jx %zu", (uintmax_t)start, (uintmax_t)end, nops);
        for (size_t i = 0; i < nops && n > 0 && (size_t)n < size; i++)
            n += snprintf(out + n, size - (size_t)n, " %u:%jx", ops[i].atom,
                          (uintmax_t)ops[i].number);
    }
    free(f);
}

/* A large .eh_frame is read on demand (image.c, "lazy"): it is not read at load, a lookup
 * reads a page or three (the FDE's and its CIE's), and libdw then finds in it the same
 * frames as in an image that holds the whole section, at function starts and inside
 * functions, over the whole search table. */
static void eh_frame_on_demand(const char *path)
{
    cn_smp__elf *lazy = read_tables(path), *whole = read_tables(path);
    assert_true(cn_smp__elf_lazy(lazy));
    uint64_t at_load = cn_smp__elf_bytes(lazy);
    cn_smp__elf_fill_all(whole);
    assert_false(cn_smp__elf_lazy(whole));
    uint64_t eh_frame = cn_smp__elf_bytes(whole) - at_load;
    fprintf(stderr, "  %s: %ju bytes held at load, %ju more with all of .eh_frame\n", path,
            (uintmax_t)at_load, (uintmax_t)eh_frame);
    assert_true(eh_frame >= 64 * 1024);
    Elf *el = elf_memory((char *)lazy->data, lazy->size),
        *ew = elf_memory((char *)whole->data, whole->size);
    Dwarf_CFI *cl = dwarf_getcfi_elf(el), *cw = dwarf_getcfi_elf(ew);
    assert_non_null(cl);
    assert_non_null(cw);
    cn_obj_ehhdr h;
    const uint8_t *hdr = cn_smp__elf_ehhdr(lazy, &h);
    assert_non_null(hdr);
    /* One lookup far from .eh_frame's start (where the first CIE is): what it read is all
     * libdw needs there. */
    int64_t loc, fde;
    cn_obj_ehhdr_entry(hdr, h.count - 2, false, &loc, &fde);
    uint64_t far = lazy->eh_frame_hdr_vaddr + (uint64_t)loc + 1;
    char a[512], b[512];
    cn_smp__elf_fill_fde(lazy, far);
    uint64_t one = cn_smp__elf_bytes(lazy) - at_load;
    frame_summary(cl, far, a, sizeof(a));
    frame_summary(cw, far, b, sizeof(b));
    fprintf(stderr, "  one lookup read %ju bytes: %s\n", (uintmax_t)one, a);
    assert_true(one > 0 && one <= 3 * 4096);
    assert_string_not_equal(b, "none");
    assert_string_equal(a, b);
    unsigned compared = 0, found = 0;
    for (uint64_t i = 0; i < h.count; i += 1 + h.count / 700) {
        cn_obj_ehhdr_entry(hdr, i, false, &loc, &fde);
        uint64_t start = lazy->eh_frame_hdr_vaddr + (uint64_t)loc;
        for (uint64_t addr = start; addr < start + 24; addr += 7) {
            cn_smp__elf_fill_fde(lazy, addr);
            frame_summary(cl, addr, a, sizeof(a));
            frame_summary(cw, addr, b, sizeof(b));
            assert_string_equal(a, b);
            compared++;
            found += strcmp(b, "none") != 0;
        }
    }
    fprintf(stderr, "  %u addresses compared, %u with a frame; %ju of %ju bytes read\n", compared,
            found, (uintmax_t)(cn_smp__elf_bytes(lazy) - at_load), (uintmax_t)eh_frame);
    assert_true(compared > 1000 && found * 10 > compared * 9);
    dwarf_cfi_end(cl);
    dwarf_cfi_end(cw);
    elf_end(el);
    elf_end(ew);
    cn_smp__elf_free(lazy);
    cn_smp__elf_free(whole);
}

static void test_tables_eh_frame_on_demand(void **state)
{
    (void)state;
    eh_frame_on_demand(HOST_LIB("", "libc.so.6"));
}

/* The same in a library clang linked (scripts/setup installs clang, and with it LLVM's
 * library): its .eh_frame_hdr's section header comes after .eh_frame's, which libdw 0.188
 * took for no search table (image.c eh_frame_hdr_first). */
static void test_tables_eh_frame_on_demand_clang(void **state)
{
    (void)state;
    const char *llvm = HOST_LIB("/usr", "libLLVM-14.so.1");
    if (access(llvm, R_OK) != 0) {
        assert_false(getenv("CI") && strcmp(getenv("CI"), "true") == 0);
        skip();
    }
    eh_frame_on_demand(llvm);
}

static int held_cmp(const void *a, const void *b)
{
    const cn_smp__held *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The held queue after a read: the records held before (sorted), then one sorted run per
 * ring. Merged by runs, it equals a full sort, for any number and size of runs (empty held
 * part, one run, equal times told apart by seq), and for a run that is not sorted (a record
 * that does not parse has time 0): then it is sorted anyway. */
static void test_held_sort_runs(void **state)
{
    (void)state;
    uint64_t rnd = 42;
    for (int round = 0; round < 400; round++) {
        size_t nruns = 1 + (size_t)(round % 9), runs[10], n = 0;
        cn_smp__held_queue q = {0};
        assert_int_equal(CN_RESERVE(q.v, q.cap, 4096), 0);
        uint64_t seq = 0;
        for (size_t r = 0; r < nruns; r++) {
            runs[r] = n;
            rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
            size_t len = (r == 0 && round % 3 == 0) ? 0 : 1 + (size_t)(rnd >> 33) % 300;
            uint64_t t = (rnd >> 20) % 50;
            for (size_t i = 0; i < len; i++) {
                rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
                t += (rnd >> 60) % 3; /* equal times are common */
                q.v[n++] = (cn_smp__held){t, seq++, i, (uint32_t)r};
            }
        }
        if (round % 10 == 7 && n > 2)
            q.v[n / 2].time = 0; /* an unparsed record inside a run */
        q.n = n;
        cn_smp__held *want = malloc((n ? n : 1) * sizeof(*want));
        assert_non_null(want);
        memcpy(want, q.v, n * sizeof(*want));
        qsort(want, n, sizeof(*want), held_cmp);
        /* runs[0] must be 0; empty runs (an empty held part) are merged away */
        size_t k = 0;
        for (size_t r = 0; r < nruns; r++)
            if (r == 0 || runs[r] > runs[k - 1])
                runs[k++] = runs[r];
        cn_smp__held_sort(&q, runs, k);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(q.v[i].time, want[i].time);
            assert_int_equal(q.v[i].seq, want[i].seq);
        }
        free(want);
        free(q.v);
        free(q.tmp);
    }
}

static void test_cache_shares_and_bounds(void **state)
{
    (void)state;
    const char *exe = "/proc/self/exe";
    cn_smp__elf *first = read_tables(exe);
    uint64_t one = cn_smp__elf_bytes(first);
    /* Room for two unused files' tables, not three. */
    cn_smp_cache *c = cn_smp_cache_new(2 * one + one / 2);
    assert_non_null(c);
    cn_smp_cache_stats st;
    cn_obj_ident id[3] = {test_ident(1), test_ident(2), test_ident(3)};
    cn_smp__cache_add(c, first, &id[0]);
    assert_null(cn_smp__cache_get(c, &id[1]));
    /* A second holder of the same file shares the entry. */
    assert_ptr_equal(cn_smp__cache_get(c, &id[0]), first);
    cn_smp_cache_stats_get(c, &st);
    assert_int_equal(st.files, 1);
    assert_int_equal(st.in_use, 1);
    assert_int_equal(st.hits, 1);
    cn_smp__elf_put(first);
    cn_smp__elf_put(first);
    cn_smp_cache_stats_get(c, &st);
    assert_int_equal(st.in_use, 0);
    assert_int_equal(st.lru_bytes, st.bytes);
    /* Released, then mapped again: found without a read. */
    assert_ptr_equal(cn_smp__cache_get(c, &id[0]), first);
    cn_smp__elf_put(first);
    for (int i = 1; i < 3; i++) {
        cn_smp__elf *e = read_tables(exe);
        cn_smp__cache_add(c, e, &id[i]);
        cn_smp__elf_put(e);
    }
    /* Three unused files exceed the bound: the least recently released went. */
    cn_smp_cache_stats_get(c, &st);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(st.files, 2);
    assert_true(st.lru_bytes <= st.max_bytes);
    assert_null(cn_smp__cache_get(c, &id[0]));
    cn_smp__elf *held = cn_smp__cache_get(c, &id[1]);
    assert_non_null(held);
    /* A held file is never evicted, whatever the bound; unused, it goes at once. */
    cn_smp_cache *tiny = cn_smp_cache_new(1);
    cn_smp__elf *big = read_tables(exe);
    cn_smp__cache_add(tiny, big, &id[0]);
    cn_smp_cache_stats_get(tiny, &st);
    assert_int_equal(st.files, 1);
    cn_smp__elf_put(big);
    cn_smp_cache_stats_get(tiny, &st);
    assert_int_equal(st.files, 0);
    assert_int_equal(st.evictions, 1);
    /* Unused for the idle time: expired, the held one stays; not yet: nothing goes. */
    int64_t now = cn_common_now_ns();
    assert_int_equal(cn_smp_cache_expire(c, now, 60LL * 1000000000), 0);
    assert_int_equal(cn_smp_cache_expire(c, now + 61LL * 1000000000, 60LL * 1000000000), 1);
    cn_smp_cache_stats_get(c, &st);
    assert_int_equal(st.expired, 1);
    assert_int_equal(st.files, 1);
    assert_int_equal(st.lru_bytes, 0);
    assert_ptr_equal(cn_smp__cache_get(c, &id[1]), held);
    cn_smp__elf_put(held);
    cn_smp__elf_put(held);
    assert_int_equal(
        cn_smp_cache_expire(c, cn_common_now_ns() + 61LL * 1000000000, 60LL * 1000000000), 1);
    cn_smp_cache_stats_get(c, &st);
    assert_int_equal(st.files, 0);
    assert_int_equal(cn_smp_cache_expire(NULL, 0, 0), 0);
    /* libc's .eh_frame is read as lookups need it: its file stays open while its tables are
     * held, and says so; read whole, it is closed and no longer counted. */
    cn_smp__elf *lc = read_tables(HOST_LIB("", "libc.so.6"));
    assert_true(cn_smp__elf_lazy(lc));
    cn_smp__cache_add(c, lc, &id[2]);
    cn_smp_cache_stats_get(c, &st);
    assert_int_equal(st.files, 1);
    assert_int_equal(st.open_files, 1);
    cn_smp__elf_fill_all(lc);
    cn_smp_cache_stats_get(c, &st);
    assert_int_equal(st.open_files, cn_smp__elf_lazy(lc) ? 1 : 0);
    cn_smp__elf_put(lc);
    cn_smp_cache_free(tiny);
    cn_smp_cache_free(c);
}

/* Objects hold their tables while an address space maps them, and give them back to the
 * cache with the last mapping. */
static void test_objects_release_tables(void **state)
{
    (void)state;
    cn_smp_cache *c = cn_smp_cache_new(0);
    cn_smp__obj o;
    memset(&o, 0, sizeof(o));
    o.pub.kind = CN_SMP_OBJ_USER;
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    assert_true(len > 0);
    exe[len] = 0; /* the file itself: cn_obj_open() follows no symlink */
    o.open_path = exe;
    o.cache = c;
    struct stat st;
    assert_int_equal(stat(exe, &st), 0);
    o.pub.file = (cn_obj_ident){.dev = st.st_dev,
                                .ino = st.st_ino,
                                .size = st.st_size,
                                .mtime_ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec};
    cn_smp__proc a = {.pid = 1}, b = {.pid = 2};
    assert_int_equal(cn_smp__proc_map(&a, 0x1000, 0x2000, 0, &o), 0);
    assert_int_equal(cn_smp__elf_load(&o), 0);
    assert_int_equal(cn_smp__proc_map(&b, 0x1000, 0x2000, 0, &o), 0);
    /* Split by a mapping in its middle: three mappings of it in a, one in b. */
    assert_int_equal(cn_smp__proc_map(&a, 0x1400, 0x1800, 0x400, &o), 0);
    assert_int_equal(o.nmapped, 4);
    cn_smp_cache_stats cs;
    cn_smp__proc_clear(&a);
    cn_smp_cache_stats_get(c, &cs);
    assert_int_equal(cs.in_use, 1);
    assert_non_null(o.elf);
    cn_smp__proc_clear(&b);
    cn_smp_cache_stats_get(c, &cs);
    assert_int_equal(o.nmapped, 0);
    assert_null(o.elf);
    assert_int_equal(cs.in_use, 0);
    assert_int_equal(cs.files, 1);
    /* Mapped again: the cache has it. */
    assert_int_equal(cn_smp__elf_load(&o), 0);
    cn_smp_cache_stats_get(c, &cs);
    assert_int_equal(cs.loads, 1);
    assert_int_equal(cs.hits, 1);
    cn_smp__obj_release(&o);
    cn_smp_cache_free(c);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--record") == 0)
        return record_main(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maps_line),
        cmocka_unit_test(test_tables_keep_no_code),
        cmocka_unit_test(test_tables_eh_frame_on_demand),
        cmocka_unit_test(test_tables_eh_frame_on_demand_clang),
        cmocka_unit_test(test_cache_shares_and_bounds),
        cmocka_unit_test(test_held_sort_runs),
        cmocka_unit_test(test_objects_release_tables),
        cmocka_unit_test(test_address_space_overlaps),
        cmocka_unit_test(test_feed_records),
        cmocka_unit_test(test_replay_layout),
        cmocka_unit_test(test_record_stack),
        cmocka_unit_test(test_offcpu_intervals),
        cmocka_unit_test(test_offcpu_seed_stale),
        cmocka_unit_test(test_offcpu_min_block),
        cmocka_unit_test(test_offcpu_wall_ids),
        cmocka_unit_test(test_attach_errors),
        cmocka_unit_test(test_shares_fp_mode),
        cmocka_unit_test(test_shares_auto_fp_binary),
        cmocka_unit_test(test_shares_auto_nofp_binary),
        cmocka_unit_test(test_shares_dwarf_fp_binary),
        cmocka_unit_test(test_shares_dwarf_nofp_binary),
        cmocka_unit_test(test_deep_dwarf_checked),
        cmocka_unit_test(test_stack_size_auto),
        cmocka_unit_test(test_auto_fp_and_chain_join),
        cmocka_unit_test(test_adaptive_copy_shrinks),
        cmocka_unit_test(test_adaptive_copy_cfi_shrinks),
        cmocka_unit_test(test_adaptive_copy_keeps_chain),
        cmocka_unit_test(test_adaptive_copy_stays_full),
        cmocka_unit_test(test_adaptive_copy_grows_back),
        cmocka_unit_test(test_epilogue_unwind),
        cmocka_unit_test(test_signal_frames),
        cmocka_unit_test(test_shares_dwarf_debug_frame),
        cmocka_unit_test(test_vdso_and_identity),
        cmocka_unit_test(test_kernel_frames_on_off),
        cmocka_unit_test(test_small_ring_wraps),
        cmocka_unit_test(test_threads_after_attach),
        cmocka_unit_test(test_fork_followed),
        cmocka_unit_test(test_dlopen_after_attach),
        cmocka_unit_test(test_target_exit_mid_session),
        cmocka_unit_test(test_system_session),
    };
    if (getenv("CN_TEST_FILTER"))
        cmocka_set_test_filter(getenv("CN_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
