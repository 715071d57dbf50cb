/* arch_x86_64.c — x86-64 parts of the sampler behind cn_smp__arch: the perf user-register
 * set, DWARF (libunwind) register numbering, and the frame-pointer prologue test. Built on
 * every host (tests drive it anywhere); cn_smp__arch_get() picks the host's descriptor. */
#include <string.h>

#include "smp_internal.h"

/* perf's x86 user-register indices (uapi asm/perf_regs.h; an ABI, spelled out so that
 * this file builds on any host). */
enum {
    X86_AX = 0,
    X86_BX,
    X86_CX,
    X86_DX,
    X86_SI,
    X86_DI,
    X86_BP,
    X86_SP,
    X86_IP,
    X86_FLAGS,
    X86_CS,
    X86_SS,
    X86_DS,
    X86_ES,
    X86_FS,
    X86_GS,
    X86_R8,
    X86_R9,
    X86_R10,
    X86_R11,
    X86_R12,
    X86_R13,
    X86_R14,
    X86_R15,
};

/* DWARF numbering (= libunwind's UNW_X86_64_*): rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip */
static const int dwarf_to_perf[17] = {
    X86_AX, X86_DX,  X86_CX,  X86_BX,  X86_SI,  X86_DI,  X86_BP,  X86_SP, X86_R8,
    X86_R9, X86_R10, X86_R11, X86_R12, X86_R13, X86_R14, X86_R15, X86_IP,
};

static int x86_unw_to_perf(int reg)
{
    if (reg < 0 || reg >= (int)(sizeof(dwarf_to_perf) / sizeof(dwarf_to_perf[0])))
        return -1;
    return dwarf_to_perf[reg];
}

static uint64_t x86_mask_ret(uint64_t addr)
{
    return addr;
}

/* push %rbp; mov %rsp,%rbp within the function's first bytes: gcc's shrink-wrapping may
 * place the frame setup after an early test, so the sequence is searched, not anchored. */
static bool x86_fp_prologue(const uint8_t *code, size_t len)
{
    static const uint8_t push_mov[4] = {0x55, 0x48, 0x89, 0xe5};
    for (size_t i = 0; i + 4 <= len; i++)
        if (memcmp(code + i, push_mov, 4) == 0)
            return true;
    return false;
}

const cn_smp__arch cn_smp__arch_x86_64 = {
    .name = "x86_64",
    .elf_machine = 62 /* EM_X86_64 */,
    /* ax..ss and r8..r15; ds/es/fs/gs are refused for 64-bit tasks. */
    .regs_mask =
        ((1ULL << (X86_SS + 1)) - 1) | (((1ULL << (X86_R15 + 1)) - 1) & ~((1ULL << X86_R8) - 1)),
    .perf_ip = X86_IP,
    .perf_sp = X86_SP,
    .perf_fp = X86_BP,
    .perf_lr = -1,
    .unw_ip = 16,
    .unw_sp = 7,
    .dw_sp = 7,
    .dw_fp = 6,
    .dw_ra = 16, /* a column of its own: the return address is always in memory */
    .dw_x = 3,   /* %rbx */
    .perf_x = X86_BX,
    .dw_pc = 16,
    .perf_ret = X86_AX,
    .fp_gives_sp = true, /* push %rbp; mov %rsp,%rbp: the CFA is %rbp + 16 */
    /* __restore_rt runs with %rsp at rt_sigframe.uc: uc_mcontext is at 40, and in it
     * (struct sigcontext) %rbp, %rsp, %rip are words 10, 15, 16 (uapi asm/sigcontext.h;
     * glibc's CFI for __restore_rt reads the same slots). */
    .sig_pc = 40 + 16 * 8,
    .sig_sp = 40 + 15 * 8,
    .sig_fp = 40 + 10 * 8,
    .unw_to_perf = x86_unw_to_perf,
    .mask_ret = x86_mask_ret,
    .fp_prologue = x86_fp_prologue,
};

#if defined(__x86_64__)
const cn_smp__arch *cn_smp__arch_get(void)
{
    return &cn_smp__arch_x86_64;
}
#endif
