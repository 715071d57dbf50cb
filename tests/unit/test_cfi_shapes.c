/* test_cfi_shapes.c — compiled CFI (sampler/cfi.c) on hand-made stacks of the frame shapes
 * that used to send whole samples to libunwind (docs/perf-sampler.md, "Compiled CFI: what
 * falls back"): a CFA based on %rbx (ld.so's lazy-binding trampoline), the lazy PLT entries'
 * CFA expression, a return address kept in a register (vfork), a CFA based on a register
 * only the sample knows (gcc's stack realignment), the first instruction of a thread after
 * clone3, and an epilogue after DW_CFA_restore_state (where libdw reports a stale row start).
 *
 * The code with that CFI is assembled into this test (x86-64), so the frames' addresses are
 * known here; a feed-only session that opens mapped files (cn_smp_session_replay) gets
 * MMAP2 records of this executable's mappings and SAMPLE records with hand-made registers
 * and stack copies, unwinds them in dwarf mode with check_unwind (libunwind redoes each
 * compiled-CFI stack and the two are compared), and the test checks the frames against the
 * return addresses it laid out, that compiled CFI took the sample, and that libunwind
 * agrees. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <setjmp.h>

#include <cmocka.h>
#include <linux/perf_event.h>

#include "cn_smp.h"
#include "perf_records.h"
#include "smp_internal.h"

#if defined(__x86_64__)

/* The frames. Nothing here is ever called: only the addresses and their CFI matter.
 *   t_start: the outermost frame (.cfi_undefined %rip), calls t_caller;
 *   t_caller: an ordinary frame (CFA = rsp + 16), calls the frame under test;
 *   t_rbx, t_rbx_inner: ld.so's _dl_runtime_resolve shape: CFA = rbx + 16 after the stack
 *     is realigned, and a callee that saves %rbx and reuses it;
 *   t_plt: two 16-byte lazy PLT entries with binutils' CFA expression;
 *   t_vfork: glibc's vfork shape: the return address popped into %rdi, CFA = rsp;
 *   t_drap: CFA = r10 (gcc's stack realignment keeps the entry SP in %r10 for a moment);
 *   t_clone_child: no CFI, 4 bytes before t_thread (RA undefined): glibc's clone3;
 *   t_epi: a body (CFA = rsp + 64) with an early epilogue between remember/restore_state. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl t_start, t_start_ret\n"
        ".hidden t_start, t_start_ret\n"
        "t_start:\n"
        ".cfi_startproc\n"
        ".cfi_undefined %rip\n"
        "  call t_caller\n"
        "t_start_ret:\n"
        "  ud2\n"
        ".cfi_endproc\n"

        ".p2align 4\n"
        ".globl t_caller, t_caller_ret\n"
        ".hidden t_caller, t_caller_ret\n"
        "t_caller:\n"
        ".cfi_startproc\n"
        "  sub $8, %rsp\n"
        ".cfi_def_cfa_offset 16\n"
        "  call t_rbx\n"
        "t_caller_ret:\n"
        "  add $8, %rsp\n"
        ".cfi_def_cfa_offset 8\n"
        "  ret\n"
        ".cfi_endproc\n"

        ".p2align 4\n"
        ".globl t_rbx, t_rbx_body, t_rbx_ret\n"
        ".hidden t_rbx, t_rbx_body, t_rbx_ret\n"
        "t_rbx:\n"
        ".cfi_startproc\n"
        "  push %rbx\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbx, -16\n"
        "  mov %rsp, %rbx\n"
        ".cfi_def_cfa_register %rbx\n"
        "  and $-64, %rsp\n"
        "  sub $64, %rsp\n"
        "t_rbx_body:\n"
        "  call t_rbx_inner\n"
        "t_rbx_ret:\n"
        "  mov %rbx, %rsp\n"
        ".cfi_def_cfa_register %rsp\n"
        "  pop %rbx\n"
        ".cfi_def_cfa_offset 8\n"
        ".cfi_restore %rbx\n"
        "  ret\n"
        ".cfi_endproc\n"

        ".p2align 4\n"
        ".globl t_rbx_inner, t_rbx_inner_body\n"
        ".hidden t_rbx_inner, t_rbx_inner_body\n"
        "t_rbx_inner:\n"
        ".cfi_startproc\n"
        "  push %rbx\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbx, -16\n"
        "  xor %ebx, %ebx\n"
        "t_rbx_inner_body:\n"
        "  nop\n"
        "  pop %rbx\n"
        ".cfi_def_cfa_offset 8\n"
        ".cfi_restore %rbx\n"
        "  ret\n"
        ".cfi_endproc\n"

        ".p2align 4\n"
        ".globl t_plt\n"
        ".hidden t_plt\n"
        "t_plt:\n"
        ".cfi_startproc\n"
        /* DW_CFA_def_cfa_expression, 11 bytes: DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15;
         * DW_OP_and; DW_OP_lit11; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus */
        ".cfi_escape 0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, "
        "0x24, 0x22\n"
        "  .fill 32, 1, 0x90\n"
        ".cfi_endproc\n"

        /* The same expression with DW_OP_gt in place of DW_OP_ge: no known pattern
         * (compiled CFI must leave it to libunwind). */
        ".p2align 4\n"
        ".globl t_plt_odd\n"
        ".hidden t_plt_odd\n"
        "t_plt_odd:\n"
        ".cfi_startproc\n"
        ".cfi_escape 0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2b, 0x33, "
        "0x24, 0x22\n"
        "  .fill 16, 1, 0x90\n"
        ".cfi_endproc\n"

        ".p2align 4\n"
        ".globl t_vfork, t_vfork_body\n"
        ".hidden t_vfork, t_vfork_body\n"
        "t_vfork:\n"
        ".cfi_startproc\n"
        "  pop %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        ".cfi_register %rip, %rdi\n"
        "t_vfork_body:\n"
        "  nop\n"
        "  push %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  ret\n"
        ".cfi_endproc\n"

        ".p2align 4\n"
        ".globl t_drap, t_drap_body\n"
        ".hidden t_drap, t_drap_body\n"
        "t_drap:\n"
        ".cfi_startproc\n"
        "  lea 8(%rsp), %r10\n"
        ".cfi_def_cfa %r10, 0\n"
        "  and $-32, %rsp\n"
        "t_drap_body:\n"
        "  nop\n"
        "  lea -8(%r10), %rsp\n"
        ".cfi_def_cfa %rsp, 8\n"
        "  ret\n"
        ".cfi_endproc\n"

        ".p2align 4\n"
        ".globl t_clone, t_clone_child, t_thread\n"
        ".hidden t_clone, t_clone_child, t_thread\n"
        "t_clone:\n"
        ".cfi_startproc\n"
        "  nop\n"
        "  syscall\n"
        ".cfi_endproc\n"
        "t_clone_child:\n"
        "  test %eax, %eax\n"
        "  jz t_thread\n"
        "  ret\n"
        "  nop\n"
        "t_thread:\n"
        ".cfi_startproc\n"
        ".cfi_undefined %rip\n"
        "  xor %ebp, %ebp\n"
        "  ud2\n"
        ".cfi_endproc\n"

        ".p2align 4\n"
        ".globl t_epi, t_epi_ret, t_epi_body\n"
        ".hidden t_epi, t_epi_ret, t_epi_body\n"
        "t_epi:\n"
        ".cfi_startproc\n"
        "  push %rbx\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbx, -16\n"
        "  sub $48, %rsp\n"
        ".cfi_def_cfa_offset 64\n"
        "  test %eax, %eax\n"
        "  jz 1f\n"
        ".cfi_remember_state\n"
        "  add $48, %rsp\n"
        ".cfi_def_cfa_offset 16\n"
        "  pop %rbx\n"
        ".cfi_def_cfa_offset 8\n"
        "t_epi_ret:\n"
        "  ret\n"
        "1:\n"
        ".cfi_restore_state\n"
        "t_epi_body:\n"
        "  nop\n"
        "  nop\n"
        "  add $48, %rsp\n"
        ".cfi_def_cfa_offset 16\n"
        "  pop %rbx\n"
        ".cfi_def_cfa_offset 8\n"
        "  ret\n"
        ".cfi_endproc\n");

/* This executable's .init code (glibc's crti.o and crtn.o: no CFI). */
extern const char _init[];

extern const char t_start_ret[], t_caller_ret[], t_rbx_body[], t_rbx_ret[], t_rbx_inner_body[],
    t_plt[], t_plt_odd[], t_vfork_body[], t_drap_body[], t_clone_child[], t_epi_ret[], t_epi_body[];

/* perf's x86 user-register indices (uapi asm/perf_regs.h) */
enum { AX = 0, BX = 1, DI = 5, BP = 6, SP = 7, IP = 8, R10 = 18 };

#define PID    4242
#define SP0    0x7ffd00100000ULL /* the hand-made stack's address */
#define NWORDS 64

typedef struct got {
    int n;
    uint32_t nframes;
    uint64_t pc[16]; /* the frames as addresses of this process */
    cn_smp_stop stop;
} got;

/* The mapping of this executable that holds addr: start, end, pgoff, device, inode. */
typedef struct mapping {
    uint64_t start, end, pgoff, ino;
    uint32_t maj, min;
    char path[4096];
} mapping;

static int find_mapping(uint64_t addr, mapping *m)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4352];
    int found = -1;
    while (f && found < 0 && fgets(line, sizeof(line), f)) {
        unsigned long s, e, off, ino;
        unsigned maj, min;
        char perm[5];
        int pos = 0;
        if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &s, &e, perm, &off, &maj, &min, &ino,
                   &pos) < 7 ||
            addr < s || addr >= e)
            continue;
        *m = (mapping){.start = s, .end = e, .pgoff = off, .ino = ino, .maj = maj, .min = min};
        snprintf(m->path, sizeof(m->path), "%s", line + pos);
        m->path[strcspn(m->path, "\n")] = 0;
        found = 0;
    }
    if (f)
        fclose(f);
    return found;
}

static void on_sample(void *arg, const cn_smp_sample *s)
{
    got *g = arg;
    g->n++;
    g->nframes = s->nframes < 16 ? s->nframes : 16;
    g->stop = s->stop;
    /* frames are (object, file offset): back to this process's addresses */
    mapping m;
    assert_int_equal(find_mapping((uint64_t)(uintptr_t)t_start_ret, &m), 0);
    for (uint32_t i = 0; i < g->nframes; i++)
        g->pc[i] = s->frames[i].offset - m.pgoff + m.start;
}

typedef struct fixture {
    cn_smp_session *s;
    got g;
} fixture;

/* An MMAP2 record of this executable's mapping holding the hand-made code. */
static size_t put_mmap(uint8_t *buf)
{
    mapping m;
    assert_int_equal(find_mapping((uint64_t)(uintptr_t)t_start_ret, &m), 0);
    const test_mmap2 mm = {.pid = PID,
                           .tid = PID,
                           .addr = m.start,
                           .len = m.end - m.start,
                           .pgoff = m.pgoff,
                           .maj = m.maj,
                           .min = m.min,
                           .ino = m.ino,
                           .prot = 5 /* r-x */,
                           .flags = 2 /* private */,
                           .path = m.path,
                           .time = 1};
    return test_put_mmap2(buf, 0, &mm);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    cn_smp_config cfg = {.target = CN_SMP_TARGET_NONE,
                         .unwind = CN_SMP_UNWIND_DWARF,
                         .no_kernel = true,
                         .check_unwind = true};
    cn_smp_callbacks cb = {.sample = on_sample};
    assert_int_equal(cn_smp_session_new(&cfg, &cb, &f->g, &f->s), 0);
    assert_int_equal(cn_smp_session_start(f->s, NULL), 0);
    assert_int_equal(cn_smp_session_replay(f->s, cn_smp_session_sample_type(f->s)), 0);
    uint8_t buf[8192];
    cn_smp_session_feed(f->s, buf, put_mmap(buf));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    cn_smp_session_free(f->s);
    free(f);
    return 0;
}

/* Feeds a sample with registers regs (perf indices; the rest 0) and the stack copy stk
 * (NWORDS words at SP0, SP0 also the sampled SP), and returns what came out. */
static got feed(fixture *f, const uint64_t regs[24], const uint64_t stk[NWORDS])
{
    uint64_t st = cn_smp_session_sample_type(f->s);
    assert_true(st & PERF_SAMPLE_REGS_USER);
    assert_true(st & PERF_SAMPLE_STACK_USER);
    static uint8_t buf[16384];
    size_t n = sizeof(struct perf_event_header);
    uint64_t zero = 0, time = 100, period = 1000;
    uint32_t ids[2] = {PID, PID};
    if (st & PERF_SAMPLE_IDENTIFIER)
        n = test_put(buf, n, &zero, 8);
    if (st & PERF_SAMPLE_IP)
        n = test_put(buf, n, &regs[IP], 8);
    if (st & PERF_SAMPLE_TID)
        n = test_put(buf, n, ids, 8);
    if (st & PERF_SAMPLE_TIME)
        n = test_put(buf, n, &time, 8);
    if (st & PERF_SAMPLE_CPU)
        n = test_put(buf, n, &zero, 8);
    if (st & PERF_SAMPLE_PERIOD)
        n = test_put(buf, n, &period, 8);
    if (st & PERF_SAMPLE_CALLCHAIN)
        n = test_put(buf, n, &zero, 8); /* nr = 0 */
    uint64_t abi = PERF_SAMPLE_REGS_ABI_64;
    n = test_put(buf, n, &abi, 8);
    const cn_smp__arch *arch = cn_smp__arch_get();
    for (int r = 0; r < 64; r++)
        if (arch->regs_mask & (1ULL << r))
            n = test_put(buf, n, &regs[r < 24 ? r : 0], 8);
    uint64_t size = NWORDS * 8;
    n = test_put(buf, n, &size, 8);
    n = test_put(buf, n, stk, size);
    n = test_put(buf, n, &size, 8); /* dyn_size */
    struct perf_event_header h = {PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, (uint16_t)n};
    memcpy(buf, &h, sizeof(h));
    memset(&f->g, 0, sizeof(f->g));
    assert_int_equal(cn_smp_session_feed(f->s, buf, n), 1);
    return f->g;
}

static uint64_t a(const char *p)
{
    return (uint64_t)(uintptr_t)p;
}

/* Counters: compiled CFI took every sample so far (or libunwind `lu` of them), and
 * libunwind agreed with each. */
static void check_counters(fixture *f, uint64_t samples, uint64_t lu)
{
    cn_smp_counters c;
    cn_smp_session_counters(f->s, &c);
    assert_int_equal(c.samples, samples);
    assert_int_equal(c.libunwind_unwinds, lu);
    assert_int_equal(c.cfi_unwinds, samples - lu);
    assert_int_equal(c.unwind_checked, samples - lu);
    assert_int_equal(c.unwind_mismatches, 0);
}

/* Expects frames want[0..n) and a complete stack. */
static void expect(const got *g, const uint64_t *want, uint32_t n)
{
    assert_int_equal(g->n, 1);
    assert_int_equal(g->stop, CN_SMP_STOP_NONE);
    assert_int_equal(g->nframes, n);
    for (uint32_t i = 0; i < n; i++) {
        if (g->pc[i] != want[i] - (i ? 1 : 0))
            fail_msg("frame %u: %#lx, expected %#lx", i, (unsigned long)g->pc[i],
                     (unsigned long)(want[i] - (i ? 1 : 0)));
    }
}

/* Expects leaf, then t_caller's and t_start's frames: a complete stack through the caller. */
static void expect_via_caller(const got *g, uint64_t leaf)
{
    expect(g, (uint64_t[]){leaf, a(t_caller_ret), a(t_start_ret)}, 3);
}

/* Expects exactly one libunwind fallback for reason why. */
static void check_one_fallback(fixture *f, cn_smp_fallback why)
{
    cn_smp_counters c;
    cn_smp_session_counters(f->s, &c);
    assert_int_equal(c.libunwind_why[why], 1);
}

/* Lays out t_caller's frame (its return address to t_start) at word w: the caller's SP is
 * SP0 + 8 * w, its CFA 16 above. */
static void caller_frame(uint64_t *stk, int w)
{
    stk[w + 1] = a(t_start_ret);
}

/* ld.so's lazy-binding trampoline shape, sampled in it (CFA = the sample's rbx + 16) and in
 * its callee, where rbx was reused and the trampoline's value is the callee's saved slot. */
static void test_rbx_cfa(void **state)
{
    fixture *f = *state;
    uint64_t regs[24] = {0}, stk[NWORDS] = {0};
    /* The trampoline's entry SP after `push %rbx`: word 20; its CFA = rbx + 16. */
    uint64_t rbx = SP0 + 8 * 20;
    stk[20] = 0x1234;          /* its caller's rbx */
    stk[21] = a(t_caller_ret); /* its return address */
    caller_frame(stk, 22);
    /* Sampled in the trampoline, at the call: SP realigned below. */
    regs[IP] = a(t_rbx_body);
    regs[SP] = SP0;
    regs[BX] = rbx;
    got g = feed(f, regs, stk);
    expect_via_caller(&g, a(t_rbx_body));
    check_counters(f, 1, 0);
    /* Sampled in its callee, which saved rbx at its CFA - 16 and cleared it. */
    stk[0] = rbx;
    stk[1] = a(t_rbx_ret);
    regs[IP] = a(t_rbx_inner_body);
    regs[BX] = 0;
    g = feed(f, regs, stk);
    expect(&g, (uint64_t[]){a(t_rbx_inner_body), a(t_rbx_ret), a(t_caller_ret), a(t_start_ret)}, 4);
    check_counters(f, 2, 0);
}

/* A lazy PLT entry, before and after its `push` of the relocation index (offset 11). */
static void test_plt_expression(void **state)
{
    fixture *f = *state;
    uint64_t regs[24] = {0}, stk[NWORDS] = {0};
    regs[SP] = SP0;
    /* Entry 0 at offset 4 (the GOT jump): CFA = SP + 8, return address at SP. */
    stk[0] = a(t_caller_ret);
    caller_frame(stk, 1);
    regs[IP] = a(t_plt) + 4;
    got g = feed(f, regs, stk);
    expect_via_caller(&g, a(t_plt) + 4);
    /* Entry 1 at offset 12 (after the push): CFA = SP + 16. */
    memset(stk, 0, sizeof(stk));
    stk[0] = 7; /* the pushed index */
    stk[1] = a(t_caller_ret);
    caller_frame(stk, 2);
    regs[IP] = a(t_plt) + 16 + 12;
    g = feed(f, regs, stk);
    expect_via_caller(&g, a(t_plt) + 28);
    check_counters(f, 2, 0);
    /* Another expression (one operator differs): libunwind's, with the same frames. */
    memset(stk, 0, sizeof(stk));
    stk[0] = a(t_caller_ret);
    caller_frame(stk, 1);
    regs[IP] = a(t_plt_odd) + 4;
    g = feed(f, regs, stk);
    expect_via_caller(&g, a(t_plt_odd) + 4);
    check_counters(f, 3, 1);
    check_one_fallback(f, CN_SMP_FB_CFA_EXPR);
}

/* vfork's return address in %rdi (a register rule), in the sampled frame. */
static void test_register_rule(void **state)
{
    fixture *f = *state;
    uint64_t regs[24] = {0}, stk[NWORDS] = {0};
    caller_frame(stk, 0); /* CFA = SP: the caller's frame starts at SP */
    regs[IP] = a(t_vfork_body);
    regs[SP] = SP0;
    regs[DI] = a(t_caller_ret);
    got g = feed(f, regs, stk);
    expect_via_caller(&g, a(t_vfork_body));
    check_counters(f, 1, 0);
}

/* CFA = r10: known in the sampled frame only. */
static void test_sampled_register_cfa(void **state)
{
    fixture *f = *state;
    uint64_t regs[24] = {0}, stk[NWORDS] = {0};
    stk[10] = a(t_caller_ret); /* CFA = r10 = SP0 + 88, return address at CFA - 8 */
    caller_frame(stk, 11);
    regs[IP] = a(t_drap_body);
    regs[SP] = SP0;
    regs[R10] = SP0 + 88;
    got g = feed(f, regs, stk);
    expect_via_caller(&g, a(t_drap_body));
    check_counters(f, 1, 0);
}

/* The instructions after clone3's system call have no CFI: in the child (rax 0) the
 * thread's first frame, in the parent libunwind's. */
static void test_thread_start(void **state)
{
    fixture *f = *state;
    uint64_t regs[24] = {0}, stk[NWORDS] = {0};
    regs[IP] = a(t_clone_child);
    regs[SP] = SP0;
    regs[BP] = SP0 + 8 * 40; /* the parent's, inherited */
    got g = feed(f, regs, stk);
    expect(&g, (uint64_t[]){a(t_clone_child)}, 1);
    check_counters(f, 1, 0);
    regs[AX] = 4321; /* the parent: the child's tid */
    g = feed(f, regs, stk);
    assert_int_equal(g.n, 1);
    check_counters(f, 2, 1);
    check_one_fallback(f, CN_SMP_FB_NO_CFI);
}

/* An early epilogue between DW_CFA_remember_state and DW_CFA_restore_state: the restored
 * row (the body after it) looked up first must not cover the epilogue (libdw reports the
 * restored row's start as the remembered one's). */
static void test_epilogue_after_restore_state(void **state)
{
    fixture *f = *state;
    uint64_t regs[24] = {0}, stk[NWORDS] = {0};
    /* In the body: CFA = SP + 64, return address at SP + 56. */
    stk[7] = a(t_caller_ret);
    caller_frame(stk, 8);
    regs[IP] = a(t_epi_body);
    regs[SP] = SP0;
    got g = feed(f, regs, stk);
    expect_via_caller(&g, a(t_epi_body));
    /* At the early epilogue's `ret`: CFA = SP + 8. Word 7 still holds a plausible return
     * address (what the stale rule would read). */
    memset(stk, 0, sizeof(stk));
    stk[0] = a(t_caller_ret);
    caller_frame(stk, 1);
    stk[7] = a(t_rbx_ret);
    regs[IP] = a(t_epi_ret);
    g = feed(f, regs, stk);
    expect_via_caller(&g, a(t_epi_ret));
    check_counters(f, 2, 0);
}

/* crti's _init (no CFI; compiled CFI knows its shape): at its entry, in its body (after
 * `sub $N,%rsp`) and at its `ret`. libunwind cannot walk it: those stacks are not
 * compared. The shape is read from this executable's own _init, as linked here. */
static void test_init_code(void **state)
{
    fixture *f = *state;
    const uint8_t *b = (const uint8_t *)_init;
    size_t sub = memcmp(b, "\xf3\x0f\x1e\xfa", 4) == 0 ? 4 : 0; /* endbr64 */
    assert_memory_equal(b + sub, "\x48\x83\xec", 3);            /* sub $N,%rsp */
    uint8_t frame = b[sub + 3];
    size_t ret = sub + 4;
    while (ret < 64 && !(b[ret] == 0xc3 && b[ret - 4] == 0x48 && b[ret - 1] == frame))
        ret++;
    assert_true(ret < 64);
    uint64_t regs[24] = {0}, stk[NWORDS] = {0};
    regs[SP] = SP0;
    regs[BP] = SP0 + 8 * 40; /* its caller's: nothing to follow */
    /* At the entry and at the `ret`: the return address at SP. */
    stk[0] = a(t_caller_ret);
    caller_frame(stk, 1);
    const uint64_t at_sp[] = {a(_init), a(_init) + ret};
    for (size_t i = 0; i < 2; i++) {
        regs[IP] = at_sp[i];
        got g = feed(f, regs, stk);
        expect_via_caller(&g, at_sp[i]);
    }
    /* In the body: N bytes above SP. The word at SP holds a plausible return address
     * (what a rule without the frame would take). */
    memset(stk, 0, sizeof(stk));
    stk[0] = a(t_rbx_ret);
    stk[frame / 8] = a(t_caller_ret);
    caller_frame(stk, frame / 8 + 1);
    regs[IP] = a(_init) + sub + 4;
    got g = feed(f, regs, stk);
    expect_via_caller(&g, regs[IP]);
    /* As a caller's frame: a callee (t_caller's shape) returning into the body. */
    uint64_t call_ret = a(_init) + ret - 4; /* the `add` after the last call */
    memset(stk, 0, sizeof(stk));
    stk[0] = call_ret;                    /* t_vfork's frame: CFA = SP + 8 from its body */
    stk[1 + frame / 8] = a(t_caller_ret); /* _init's CFA = its SP (word 1) + N + 8 */
    caller_frame(stk, 2 + frame / 8);
    regs[IP] = a(t_plt) + 4; /* a PLT entry: CFA = SP + 8 */
    g = feed(f, regs, stk);
    expect(&g, (uint64_t[]){a(t_plt) + 4, call_ret, a(t_caller_ret), a(t_start_ret)}, 4);
    cn_smp_counters c;
    cn_smp_session_counters(f->s, &c);
    assert_int_equal(c.samples, 4);
    assert_int_equal(c.cfi_unwinds, 4);
    assert_int_equal(c.libunwind_unwinds, 0);
    assert_int_equal(c.unwind_checked, 0);
}

/* The entry addresses of this executable's functions (.symtab), but the test's own shapes
 * (t_*) and crt's code: up to max into out; returns the count. */
static size_t function_entries(uint64_t *out, size_t max)
{
    mapping m;
    assert_int_equal(find_mapping((uint64_t)(uintptr_t)t_start_ret, &m), 0);
    assert_int_not_equal(elf_version(EV_CURRENT), EV_NONE);
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    assert_non_null(elf);
    /* This executable's load bias: where t_start_ret is against its symbol's value. */
    uint64_t bias = 0, ret_sym = 0;
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
            GElf_Shdr sh;
            Elf_Data *d;
            if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB ||
                !(d = elf_getdata(scn, NULL)))
                continue;
            for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
                GElf_Sym sym;
                const char *name;
                if (!gelf_getsym(d, (int)i, &sym) ||
                    !(name = elf_strptr(elf, sh.sh_link, sym.st_name)))
                    continue;
                if (pass == 0 && strcmp(name, "t_start_ret") == 0)
                    ret_sym = sym.st_value;
                uint64_t at = sym.st_value + bias;
                if (pass == 1 && GELF_ST_TYPE(sym.st_info) == STT_FUNC && sym.st_size > 0 &&
                    strncmp(name, "t_", 2) != 0 && name[0] != '_' && at >= m.start && at < m.end &&
                    n < max)
                    out[n++] = at;
            }
        }
        assert_int_not_equal(ret_sym, 0);
        bias = (uint64_t)(uintptr_t)t_start_ret - ret_sym;
    }
    elf_end(elf);
    close(fd);
    return n;
}

/* Hundreds of rules in one object's table, compiled in a random order: sampled at each
 * function's entry (CFA = SP + 8, the return address at SP), every stack comes out whole
 * and as libunwind finds it, again when looked up a second time (the table splits its
 * blocks of 64 rules as it grows: cfi.c, rule_block). */
static void test_many_rules(void **state)
{
    fixture *f = *state;
    static uint64_t fn[4096];
    size_t n = function_entries(fn, sizeof(fn) / sizeof(fn[0]));
    fprintf(stderr, "  %zu functions of this executable\n", n);
    assert_true(n >= 300);
    srand(7);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)rand() % (i + 1);
        uint64_t t = fn[i];
        fn[i] = fn[j];
        fn[j] = t;
    }
    uint64_t regs[24] = {0}, stk[NWORDS] = {0};
    stk[0] = a(t_caller_ret);
    caller_frame(stk, 1);
    regs[SP] = SP0;
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < n; i++) {
            regs[IP] = fn[i];
            got g = feed(f, regs, stk);
            expect_via_caller(&g, fn[i]);
        }
    }
    check_counters(f, 2 * n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_many_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_init_code, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rbx_cfa, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plt_expression, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sampled_register_cfa, setup, teardown),
        cmocka_unit_test_setup_teardown(test_thread_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epilogue_after_restore_state, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else

int main(void)
{
    printf("test_cfi_shapes: x86-64 only (hand-made x86-64 CFI); skipped\n");
    return 0;
}

#endif
