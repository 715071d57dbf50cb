/* jitmap.c — JIT code whose perf map comes late, for the symbolizer's tests:
 *   jitmap SECONDS [DELAY [badfp|spslot]]
 * copies a tiny counting loop into an anonymous executable mapping (as a JIT compiler
 * does), calls it until SECONDS have passed, and writes /tmp/perf-PID.map naming it
 * `jitted_spin` only at the end — as a JVM run with -XX:+DumpPerfMapAtExit does — or,
 * with DELAY (> 0), after DELAY seconds while it still runs. Prints the map's path.
 * With "badfp" (x86-64) the JIT code calls a C loop (spin_c) with %rbp pointing at a fake
 * frame record whose return address is mapped nowhere, as JIT code that uses %rbp for
 * something else leaves it: a frame-chain guess through the JIT frame must not produce a
 * frame. */
#include <stdbool.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "wl_common.h"

/* spin(n): counts n down to 0 and returns. */
#if defined(__x86_64__)
static const unsigned char spin_code[] = {
    0x48, 0x89, 0xf8, /* mov %rdi, %rax */
    0x48, 0xff, 0xc8, /* 1: dec %rax */
    0x75, 0xfb,       /* jnz 1b */
    0xc3,             /* ret */
};
/* badfp(n, spin): calls spin(n) under a fake frame record, %rbp pointing at
 * [rsp] = 0, [rsp + 8] = 0x100000000123 (mapped nowhere) */
static const unsigned char badfp_code[] = {
    0x55,                                                       /* push %rbp */
    0x48, 0x83, 0xec, 0x10,                                     /* sub $16, %rsp */
    0x48, 0xb8, 0x23, 0x01, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, /* movabs $0x100000000123, %rax */
    0x48, 0x89, 0x44, 0x24, 0x08,                               /* mov %rax, 8(%rsp) */
    0x48, 0xc7, 0x04, 0x24, 0x00, 0x00, 0x00, 0x00,             /* movq $0, (%rsp) */
    0x48, 0x89, 0xe5,                                           /* mov %rsp, %rbp */
    0xff, 0xd6,                                                 /* call *%rsi */
    0x48, 0x83, 0xc4, 0x10,                                     /* add $16, %rsp */
    0x5d,                                                       /* pop %rbp */
    0xc3,                                                       /* ret */
};
/* spslot(n): a frame record, then n counted down with a stack address at (%rsp) */
static const unsigned char spslot_code[] = {
    0x55,             /* push %rbp */
    0x48, 0x89, 0xe5, /* mov %rsp, %rbp */
    0x55,             /* push %rbp: (%rsp) holds a stack address */
    0x48, 0x89, 0xf8, /* mov %rdi, %rax */
    0x48, 0xff, 0xc8, /* 1: dec %rax */
    0x75, 0xfb,       /* jnz 1b */
    0x58,             /* pop %rax */
    0x5d,             /* pop %rbp */
    0xc3,             /* ret */
};
#define HAVE_BADFP 1
#elif defined(__aarch64__)
static const unsigned int spin_code[] = {
    0xf1000400, /* 1: subs x0, x0, #1 */
    0x54ffffe1, /* b.ne 1b */
    0xd65f03c0, /* ret */
};
#else
#error "jitmap: no machine code for this architecture"
#endif

typedef void (*spin_fn)(uint64_t);
typedef void (*badfp_fn)(uint64_t, spin_fn);

/* The loop badfp's JIT code calls: a C function, with unwind tables. */
__attribute__((noinline)) static void spin_c(uint64_t n)
{
    while (n--)
        __asm__ volatile("");
}

#ifndef HAVE_BADFP
static const unsigned char badfp_code[1];
static const unsigned char spslot_code[1];
#endif

static void write_map(const void *code, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "%lx %zx jitted_spin\n", (unsigned long)(uintptr_t)code, size);
    fclose(f);
    printf("%s\n", path);
    fflush(stdout);
}

__attribute__((noinline)) static void jit_driver(const void *code, size_t size, bool badfp,
                                                 uint64_t end, uint64_t map_at)
{
    spin_fn fn;
    badfp_fn bfn;
    memcpy(&fn, &code, sizeof(fn));
    memcpy(&bfn, &code, sizeof(bfn));
    bool mapped = false;
    while (wl_now_ns() < end) {
        if (badfp)
            bfn(200000, spin_c);
        else
            fn(200000);
        if (!mapped && map_at && wl_now_ns() >= map_at) {
            write_map(code, size);
            mapped = true;
        }
    }
    if (!mapped)
        write_map(code, size);
}

int main(int argc, char **argv)
{
    double secs = wl_seconds(argc, argv, 2);
    double delay = argc > 2 ? atof(argv[2]) : 0;
    const char *shape = argc > 3 ? argv[3] : "";
    bool badfp = strcmp(shape, "badfp") == 0, spslot = strcmp(shape, "spslot") == 0;
    const void *src = badfp    ? (const void *)badfp_code
                      : spslot ? (const void *)spslot_code
                               : (const void *)spin_code;
    size_t size = badfp ? sizeof(badfp_code) : spslot ? sizeof(spslot_code) : sizeof(spin_code);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
#ifndef HAVE_BADFP
    if (badfp || spslot)
        return 2;
#endif
    void *code = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED)
        return 1;
    memcpy(code, src, size);
    __builtin___clear_cache((char *)code, (char *)code + size);
    if (mprotect(code, page, PROT_READ | PROT_EXEC) < 0)
        return 1;
    uint64_t start = wl_now_ns();
    jit_driver(code, size, badfp, start + (uint64_t)(secs * 1e9),
               delay > 0 ? start + (uint64_t)(delay * 1e9) : 0);
    return 0;
}
