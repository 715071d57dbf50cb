/* fuzz_elf_file.c — libFuzzer target for the mapped-file path: the input is written to a
 * file and loaded from there by the code canopyd runs on a target's objects. The sampler
 * reads the file (maps.c: the pread image, ELF facts, frame-pointer detection), compiles
 * CFI rules at addresses of its executable segments and unwinds a synthetic sample there
 * (compiled CFI, then libunwind, and the two compared); the symbolizer loads it as a user
 * object (ELF_C_READ, symbols, FDE ranges, DWARF lines and inlines) and resolves file
 * offsets in every segment. Never crashes, leaks or reads outside what it owns. */
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cn_sym.h"
#include "smp_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BASE 0x10000000ULL
#define SP   0x7ff000000000ULL

/* Writes the input to a temporary file of this process (removed after each input). */
static const char *input_file(char *path, size_t n, const uint8_t *data, size_t size)
{
    snprintf(path, n, "/tmp/fuzz_elf_file.%d", (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return NULL;
    bool ok = !size || pwrite(fd, data, size, 0) == (ssize_t)size;
    close(fd);
    if (!ok)
        unlink(path);
    return ok ? path : NULL;
}

/* One synthetic sample at pc: registers from the input's bytes, the input as stack copy. */
static void unwind_at(cn_smp__unwinder *u, const cn_smp__proc *p, uint64_t pc, const uint8_t *data,
                      size_t size)
{
    const cn_smp__arch *arch = cn_smp__arch_get();
    uint64_t regs[64] = {0};
    uint32_t nregs = (uint32_t)__builtin_popcountll(arch->regs_mask);
    if (nregs > 64)
        return;
    for (uint32_t i = 0; i < nregs; i++)
        regs[i] = SP + 8 * i;
    regs[cn_smp__reg_index(arch->regs_mask, arch->perf_ip)] = pc;
    regs[cn_smp__reg_index(arch->regs_mask, arch->perf_sp)] = SP;
    cn_smp__rec r;
    memset(&r, 0, sizeof(r));
    r.type = PERF_RECORD_SAMPLE;
    r.pid = r.tid = 1;
    r.u.sample.abi = PERF_SAMPLE_REGS_ABI_64;
    r.u.sample.regs = (const uint8_t *)regs;
    r.u.sample.nregs = nregs;
    r.u.sample.stack = data;
    r.u.sample.stack_size = size < 4096 ? size & ~7ULL : 4096;
    uint64_t pcs[64];
    cn_smp_stop stop;
    (void)cn_smp__unwind_dwarf(u, p, &r, pcs, 64, NULL, &stop);
}

static void sampler_side(const char *path, const uint8_t *data, size_t size)
{
    cn_smp__obj obj;
    memset(&obj, 0, sizeof(obj));
    obj.pub.kind = CN_SMP_OBJ_USER;
    obj.open_path = (char *)path;
    if (cn_smp__elf_load(&obj) == 0) {
        uint64_t top = 0;
        for (uint32_t i = 0; i < obj.elf->nload; i++)
            if (obj.elf->load[i].vaddr + obj.elf->load[i].memsz > top)
                top = obj.elf->load[i].vaddr + obj.elf->load[i].memsz;
        cn_smp__proc p = {.pid = 1};
        cn_smp__unwinder *u = cn_smp__unwinder_new(CN_SMP__UNWIND_CHECK);
        if (u && top > 0 && top < (1ULL << 32) &&
            cn_smp__proc_map(&p, BASE, BASE + top, 0, &obj) == 0) {
            for (uint32_t i = 0; i < obj.elf->nload; i++) {
                const typeof(obj.elf->load[0]) *l = &obj.elf->load[i];
                if (!l->exec || !l->filesz)
                    continue;
                uint64_t at[3] = {l->vaddr, l->vaddr + l->filesz / 2, l->vaddr + l->filesz - 1};
                for (int k = 0; k < 3; k++)
                    unwind_at(u, &p, BASE + at[k], data, size);
            }
        }
        cn_smp__unwinder_free(u);
        cn_smp__proc_clear(&p);
    }
    cn_smp__obj_release(&obj);
}

static void symbolizer_side(const char *path, const uint8_t *data, size_t size)
{
    cn_sym_config cfg;
    cn_sym_config_init(&cfg);
    cfg.debuginfod = false;
    cfg.debug_dirs = "/nonexistent"; /* only the input itself */
    cn_sym_cache *c = cn_sym_cache_new(&cfg);
    if (!c)
        return;
    cn_sym_object o = {.kind = CN_SYM_USER, .path = path, .identity = "fuzz"};
    uint64_t seed = 0;
    memcpy(&seed, data + (size >= 8 ? size - 8 : 0), size >= 8 ? 8 : 0);
    uint64_t probes[] = {0, size / 2, size ? size - 1 : 0, seed % (size + 1), 0x1000, 0x1100};
    for (size_t k = 0; k < sizeof(probes) / sizeof(probes[0]); k++) {
        cn_sym_result r;
        if (cn_sym_lookup(c, &o, probes[k], &r) == 0)
            cn_sym_result_clear(&r);
    }
    cn_sym_cache_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char buf[64];
    const char *path = input_file(buf, sizeof(buf), data, size);
    if (!path)
        return 0;
    sampler_side(path, data, size);
    symbolizer_side(path, data, size);
    unlink(path);
    return 0;
}
