/* phases.c — a program whose stacks change kind halfway, for auto's adaptive stack copy
 * (docs/perf-sampler.md): phases [SECONDS1 [SECONDS2 [pad]]], in seconds of CPU time (so
 * that a loaded machine gives as many samples, only later).
 *   phase 1: main -> shallow -> deep(20) .. deep(0) -> burn (built with frame pointers:
 *            where auto's copy shrinks to 1 or 2 KiB); with "pad", deep's frames hold 200
 *            bytes more each (~5 KiB: built without frame pointers, where it shrinks only
 *            to 8 KiB), with "bigpad" 500 (~11 KiB: where it must not shrink);
 *   phase 2: main -> nested -> 12 times (qsort -> libc's sort frames -> cmp) -> burn: the
 *            frames of Debian's libc keep no frame pointer, so the kernel's chain cannot
 *            cross them and only a full copy unwinds them (where the copy must grow back).
 * Prints each phase's end. */
#include <stdbool.h>
#include <stdio.h>

#include "wl_common.h"

volatile uint64_t wl_sink;
static uint64_t phase_end;
static int nest_left;
static int pad; /* bytes more in each deep frame: 0, 200 or 500 */

static uint64_t cpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) uint64_t burn(uint64_t x)
{
    for (int i = 0; i < 40; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

static void spin(void)
{
    uint64_t x = wl_sink;
    while (cpu_now_ns() < phase_end)
        for (int i = 0; i < 1000; i++)
            x = burn(x);
    wl_sink = x;
}

/* deep's frames with ROOM bytes more: one function per size, each recursing on itself (a
 * variable-length array would give it a frame pointer). */
#define PADDED_DEEP(name, room_bytes)                                                              \
    __attribute__((noinline)) void name(int n)                                                     \
    {                                                                                              \
        volatile char room[room_bytes];                                                            \
        room[0] = (char)n;                                                                         \
        if (n > 0)                                                                                 \
            name(n - 1);                                                                           \
        else                                                                                       \
            spin();                                                                                \
        room[1] = room[0]; /* after the call: no tail call */                                      \
    }
PADDED_DEEP(deep200, 200)
PADDED_DEEP(deep500, 500)

__attribute__((noinline)) void deep(int n)
{
    if (pad) {
        (pad == 500 ? deep500 : deep200)(n);
        __asm__ volatile("" ::: "memory");
        return;
    }
    if (n > 0)
        deep(n - 1);
    else
        spin();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void shallow(void)
{
    deep(20);
    __asm__ volatile("" ::: "memory");
}

/* Sorting two ints calls cmp once: each call nests one more qsort until nest_left runs
 * out, and the innermost spins. */
__attribute__((noinline)) int cmp(const void *a, const void *b)
{
    if (nest_left-- > 0) {
        int v[2] = {2, 1};
        qsort(v, 2, sizeof(v[0]), cmp);
    } else {
        spin();
    }
    __asm__ volatile("" ::: "memory");
    return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) void nested(void)
{
    int v[2] = {2, 1};
    nest_left = 11;
    qsort(v, 2, sizeof(v[0]), cmp);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
    double s1 = wl_seconds(argc, argv, 2), s2 = argc > 2 ? atof(argv[2]) : s1;
    if (argc > 3)
        pad = strcmp(argv[3], "bigpad") == 0 ? 500 : strcmp(argv[3], "pad") == 0 ? 200 : 0;
    phase_end = cpu_now_ns() + (uint64_t)(s1 * 1e9);
    shallow();
    printf("phase 1 done\n");
    phase_end = cpu_now_ns() + (uint64_t)(s2 * 1e9);
    nested();
    printf("phase 2 done\n");
    return 0;
}
