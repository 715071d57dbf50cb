/* arch_arm64.c — AArch64 parts of the sampler behind cn_smp__arch: the perf user-register
 * set (x0..x30, sp, pc; DWARF numbering is the same), pointer-authentication stripping of
 * return addresses, and the frame-pointer prologue test. Built on every host (tests drive
 * it anywhere); cn_smp__arch_get() picks the host's descriptor. */
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

/* stp x29, x30, [sp, #-N]! then mov x29, sp — optionally after paciasp / bti c. */
static bool arm64_fp_prologue(const uint8_t *code, size_t len)
{
    size_t i = 0;
    while (i + 4 <= len && i < 8) {
        uint32_t w = insn_at(code + i);
        if (w == 0xd503233f /* paciasp */ || w == 0xd503245f /* bti c */)
            i += 4;
        else
            break;
    }
    if (i + 8 > len)
        return false;
    uint32_t stp = insn_at(code + i), mov = insn_at(code + i + 4);
    /* stp x29, x30, [sp, #imm]! : 0xa9800000 | imm7<<15 | x30<<10 | sp<<5 | x29 */
    bool is_stp = (stp & 0xffc07fff) == 0xa9807bfd;
    bool is_mov = mov == 0x910003fd; /* mov x29, sp (add x29, sp, #0) */
    return is_stp && is_mov;
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
