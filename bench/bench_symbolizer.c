/* bench_symbolizer — the symbolizer's hot paths, figures for docs/performance.md.
 *   bench_symbolizer [ELF] [N]     (default: this machine's libc, N = 20000)
 * 1. cold load of the object's symbol tables (no DWARF), median of 15 fresh caches;
 *    memory held vs the symbol and string sections it was built from;
 * 2. warm symbol-table lookups (cn_sym_handle_symbol) on random offsets, addresses/s;
 * 3. lines + inline chains for N random addresses inside functions, cold (object load
 *    included), side by side with `addr2line -f -i` and `eu-addr2line -f -i` on the same
 *    addresses (wall time of each process, output discarded). */
#include "cn_sym.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

typedef struct seg {
    uint64_t off, va, sz;
    int exec;
} seg;

static size_t segments(const char *path, seg *s, size_t max)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    size_t n = 0, k = 0;
    if (elf && elf_getphdrnum(elf, &n) == 0) {
        for (size_t i = 0; i < n && k < max; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
                s[k++] = (seg){ph.p_offset, ph.p_vaddr, ph.p_filesz, (ph.p_flags & PF_X) != 0};
        }
    }
    elf_end(elf);
    close(fd);
    return k;
}

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double run_tool(const char *cmd)
{
    double t0 = now();
    int rc = system(cmd);
    double t = now() - t0;
    return rc == 0 ? t : -1;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/lib/x86_64-linux-gnu/libc.so.6";
    size_t n_lines = argc > 2 ? (size_t)atol(argv[2]) : 20000;
    cn_sym_object obj = {.kind = CN_SYM_USER, .path = path};
    cn_sym_config cfg;
    cn_sym_config_init(&cfg);
    cfg.lines = false;

    /* 1. cold loads */
    double t[15];
    cn_sym_object_info info = {0};
    for (int i = 0; i < 15; i++) {
        cn_sym_cache *c = cn_sym_cache_new(&cfg);
        cn_sym_handle *h;
        double t0 = now();
        if (cn_sym_handle_get(c, &obj, &h) < 0) {
            fprintf(stderr, "bench_symbolizer: cannot load %s\n", path);
            return 1;
        }
        t[i] = now() - t0;
        cn_sym_handle_info(h, &info);
        cn_sym_handle_put(c, h);
        cn_sym_cache_free(c);
    }
    qsort(t, 15, sizeof(t[0]), cmp_double);
    printf("object          %s\n", path);
    printf("symbols         %zu (from %s)\n", info.symbols, info.source);
    printf("cold load       %.2f ms (median of 15; min %.2f)\n", t[7] * 1e3, t[0] * 1e3);
    printf("memory          %zu bytes = %.2f x the %zu bytes of symbol+string sections\n",
           info.memory, (double)info.memory / (double)(info.section_bytes ? info.section_bytes : 1),
           info.section_bytes);

    /* 2. warm lookups on random offsets of the executable segment */
    seg s[16];
    size_t ns = segments(path, s, 16);
    seg *text = NULL;
    for (size_t i = 0; i < ns; i++)
        if (s[i].exec)
            text = &s[i];
    if (!text)
        return 1;
    cn_sym_cache *c = cn_sym_cache_new(&cfg);
    cn_sym_handle *h;
    if (cn_sym_handle_get(c, &obj, &h) < 0)
        return 1;
    enum { NADDR = 1 << 16 };
    uint64_t *offs = malloc(NADDR * sizeof(*offs));
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < NADDR; i++)
        offs[i] = text->off + rnd(&x) % text->sz;
    size_t found = 0, total = 0;
    double t0 = now();
    for (int round = 0; round < 80; round++) {
        for (size_t i = 0; i < NADDR; i++) {
            const char *name;
            found += cn_sym_handle_symbol(h, offs[i], &name, NULL, NULL) == 0;
        }
        total += NADDR;
    }
    double dt = now() - t0;
    printf("warm lookups    %.1f M addresses/s (%zu lookups, %.1f%% inside a symbol)\n",
           (double)total / dt / 1e6, total, 100.0 * (double)found / (double)total);

    /* 3. lines + inlines vs addr2line and eu-addr2line */
    size_t k = 0;
    char file[] = "/tmp/bench_sym_XXXXXX";
    int fd = mkstemp(file);
    FILE *f = fdopen(fd, "w");
    uint64_t *sel = malloc(n_lines * sizeof(*sel));
    while (k < n_lines) {
        uint64_t off = text->off + rnd(&x) % text->sz;
        if (cn_sym_handle_symbol(h, off, NULL, NULL, NULL) == 0) {
            sel[k++] = off;
            fprintf(f, "%llx\n", (unsigned long long)(off - text->off + text->va));
        }
    }
    fclose(f);
    cn_sym_handle_put(c, h);
    cn_sym_cache_free(c);
    cfg.lines = true;
    c = cn_sym_cache_new(&cfg);
    size_t with_inline = 0;
    t0 = now();
    for (size_t i = 0; i < k; i++) {
        cn_sym_result r;
        if (cn_sym_lookup(c, &obj, sel[i], &r) == 0 && r.depth > 1)
            with_inline++;
        cn_sym_result_clear(&r);
    }
    double ours = now() - t0;
    cn_sym_cache_free(c);
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "addr2line -f -i -e %s < %s > /dev/null", path, file);
    double a2l = run_tool(cmd);
    snprintf(cmd, sizeof(cmd), "eu-addr2line -f -i -e %s < %s > /dev/null", path, file);
    double eu = run_tool(cmd);
    unlink(file);
    printf("lines+inlines   %zu addresses (%.1f%% with inlined frames), cold:\n", k,
           100.0 * (double)with_inline / (double)k);
    printf("  canopy        %8.3f s  %10.0f addresses/s\n", ours, (double)k / ours);
    printf("  addr2line     %8.3f s  %10.0f addresses/s\n", a2l, a2l > 0 ? (double)k / a2l : 0);
    printf("  eu-addr2line  %8.3f s  %10.0f addresses/s\n", eu, eu > 0 ? (double)k / eu : 0);
    free(sel);
    free(offs);
    return 0;
}
