/* arch_x86_64.c — x86-64 parts of the sampler behind cn_smp__arch: the perf user-register
 * set, DWARF (libunwind) register numbering, and the frame-pointer prologue test. */
#if defined(__x86_64__)
#include <string.h>

#include <asm/perf_regs.h>

#include "smp_internal.h"

/* DWARF numbering (= libunwind's UNW_X86_64_*): rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip */
static const int dwarf_to_perf[17] = {
    PERF_REG_X86_AX,  PERF_REG_X86_DX,  PERF_REG_X86_CX,  PERF_REG_X86_BX,  PERF_REG_X86_SI,
    PERF_REG_X86_DI,  PERF_REG_X86_BP,  PERF_REG_X86_SP,  PERF_REG_X86_R8,  PERF_REG_X86_R9,
    PERF_REG_X86_R10, PERF_REG_X86_R11, PERF_REG_X86_R12, PERF_REG_X86_R13, PERF_REG_X86_R14,
    PERF_REG_X86_R15, PERF_REG_X86_IP,
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

static const cn_smp__arch x86_64_arch = {
    .name = "x86_64",
    /* ax..ss and r8..r15; ds/es/fs/gs are refused for 64-bit tasks. */
    .regs_mask = ((1ULL << (PERF_REG_X86_SS + 1)) - 1) |
                 (((1ULL << (PERF_REG_X86_R15 + 1)) - 1) & ~((1ULL << PERF_REG_X86_R8) - 1)),
    .perf_ip = PERF_REG_X86_IP,
    .perf_sp = PERF_REG_X86_SP,
    .perf_fp = PERF_REG_X86_BP,
    .unw_ip = 16,
    .unw_sp = 7,
    .unw_to_perf = x86_unw_to_perf,
    .mask_ret = x86_mask_ret,
    .fp_prologue = x86_fp_prologue,
};

const cn_smp__arch *cn_smp__arch_get(void)
{
    return &x86_64_arch;
}
#endif
