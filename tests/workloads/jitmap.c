/* jitmap.c — JIT code whose perf map comes late, for the symbolizer's tests:
 *   jitmap SECONDS [DELAY]
 * copies a tiny counting loop into an anonymous executable mapping (as a JIT compiler
 * does), calls it until SECONDS have passed, and writes /tmp/perf-PID.map naming it
 * `jitted_spin` only at the end — as a JVM run with -XX:+DumpPerfMapAtExit does — or,
 * with DELAY, after DELAY seconds while it still runs. Prints the map's path. */
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

__attribute__((noinline)) static void jit_driver(spin_fn fn, uint64_t end, uint64_t map_at,
                                                 const void *code)
{
    bool mapped = false;
    while (wl_now_ns() < end) {
        fn(200000);
        if (!mapped && map_at && wl_now_ns() >= map_at) {
            write_map(code, sizeof(spin_code));
            mapped = true;
        }
    }
    if (!mapped)
        write_map(code, sizeof(spin_code));
}

int main(int argc, char **argv)
{
    double secs = wl_seconds(argc, argv, 2);
    double delay = argc > 2 ? atof(argv[2]) : 0;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *code = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED)
        return 1;
    memcpy(code, spin_code, sizeof(spin_code));
    __builtin___clear_cache((char *)code, (char *)code + sizeof(spin_code));
    if (mprotect(code, page, PROT_READ | PROT_EXEC) < 0)
        return 1;
    uint64_t start = wl_now_ns();
    spin_fn fn;
    memcpy(&fn, &code, sizeof(fn));
    jit_driver(fn, start + (uint64_t)(secs * 1e9), delay > 0 ? start + (uint64_t)(delay * 1e9) : 0,
               code);
    return 0;
}
