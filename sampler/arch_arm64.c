/* arch_arm64.c — AArch64 parts of the sampler behind cn_smp__arch: the perf user-register
 * set (x0..x30, sp, pc; DWARF numbering is the same), pointer-authentication stripping of
 * return addresses, the signal frame, and the frame-pointer prologue test. Built on every host
 * (tests drive it anywhere); cn_smp__arch_get() picks the host's descriptor. */
#include <string.h>

#include "smp_internal.h"

/* perf's arm64 user-register indices (uapi asm/perf_regs.h): x0..x30 = 0..30, sp = 31,
 * pc = 32. DWARF and libunwind number x0..x30 and sp the same way. */
enum { ARM64_X29 = 29, ARM64_LR = 30, ARM64_SP = 31, ARM64_PC = 32 };

static int arm64_unw_to_perf(int reg)
{
    if (reg >= 0 && reg <= ARM64_PC)
        return reg;
    return -1;
}

/* Return addresses signed with PAC carry the signature in the bits above the virtual
 * address size; user space uses 48-bit (or 52-bit) addresses with bit 55 clear. */
static uint64_t arm64_mask_ret(uint64_t addr)
{
    return addr & ((1ULL << 48) - 1);
}

static uint32_t insn_at(const uint8_t *code)
{
    uint32_t v;
    memcpy(&v, code, 4);
    return v; /* AArch64 Linux is little-endian */
}

/* A frame record set up within the first instructions: x29 and x30 stored as a pair at
 * the stack pointer (stp x29, x30, [sp, #-N]! for small frames; sub sp, sp, #N then
 * stp x29, x30, [sp, #M] for large ones), then x29 set from sp (mov x29, sp / add x29,
 * sp, #M). The compiler schedules unrelated instructions between the two and may open
 * with paciasp, bti c or a shrink-wrapped early exit, so a short window is searched. */
static bool arm64_fp_prologue(const uint8_t *code, size_t len)
{
    bool stored = false;
    for (size_t i = 0; i + 4 <= len && i < 8 * 4; i += 4) {
        uint32_t w = insn_at(code + i);
        if ((w & 0xffc07fff) == 0xa9807bfd /* stp x29, x30, [sp, #imm]! */ ||
            (w & 0xffc07fff) == 0xa9007bfd /* stp x29, x30, [sp, #imm] */)
            stored = true;
        else if (stored && (w & 0xffc003ff) == 0x910003fd /* add x29, sp, #imm (mov) */)
            return true;
    }
    return false;
}

const cn_smp__arch cn_smp__arch_arm64 = {
    .name = "aarch64",
    .elf_machine = 183 /* EM_AARCH64 */,
    .regs_mask = (1ULL << (ARM64_PC + 1)) - 1,
    .perf_ip = ARM64_PC,
    .perf_sp = ARM64_SP,
    .perf_fp = ARM64_X29,
    .perf_lr = ARM64_LR,
    .unw_ip = 32,
    .unw_sp = 31,
    .dw_sp = 31,
    .dw_fp = 29,
    .dw_ra = 30, /* the link register: a leaf's return address is still in it */
    .dw_x = -1,
    .perf_x = -1,
    .dw_pc = -1,
    .perf_ret = 0,        /* x0 */
    .fp_gives_sp = false, /* the frame record is anywhere in the frame: no caller's SP */
    /* The handler returns to the vDSO's __kernel_rt_sigreturn with SP at rt_sigframe:
     * siginfo (128 bytes), then the ucontext, whose uc_mcontext (struct sigcontext:
     * fault_address, x0..x30, sp, pc) is at 176 (uapi asm/ucontext.h, asm/sigcontext.h).
     * The vDSO has no CFI: the trampoline is known by its code, mov x8, #139
     * (__NR_rt_sigreturn); svc #0, as libunwind knows it. */
    .sig_pc = 128 + 176 + 8 + 32 * 8,
    .sig_sp = 128 + 176 + 8 + 31 * 8,
    .sig_fp = 128 + 176 + 8 + 29 * 8,
    .sig_lr = 128 + 176 + 8 + 30 * 8,
    .sig_code = {0xd2801168, 0xd4000001},
    .unw_to_perf = arm64_unw_to_perf,
    .mask_ret = arm64_mask_ret,
    .fp_prologue = arm64_fp_prologue,
};

#if defined(__aarch64__)
const cn_smp__arch *cn_smp__arch_get(void)
{
    return &cn_smp__arch_arm64;
}
#endif
