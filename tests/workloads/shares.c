/* shares.c — a workload with a known profile. Per round: work_a 50%, work_b -> work_b_inner
 * 30%, a recursive work_c 20% (depth 4), each spending its time in the shared small leaf
 * `burn`. Usage: shares [SECONDS] or shares --rounds N. Prints the round count and the
 * loop time (ns per round) at the end. Built with and without frame pointers. */
#include <stdio.h>

#include "wl_common.h"

#define UNIT                                                                                       \
    50000 /* burn() calls per share point: a round (~25 ms) spans many sample periods, so          \
           * sampling cannot alias with the round */

volatile uint64_t wl_sink;

/* A small leaf: with -fno-omit-frame-pointer gcc still sets up a frame, but most of its
 * time is spent in few instructions; the caller must be recovered by the unwinder. */
__attribute__((noinline)) uint64_t burn(uint64_t x)
{
    for (int i = 0; i < 40; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

__attribute__((noinline)) void work_a(int units)
{
    uint64_t x = wl_sink;
    for (int i = 0; i < units * UNIT; i++)
        x = burn(x);
    wl_sink = x;
}

__attribute__((noinline)) void work_b_inner(int units)
{
    uint64_t x = wl_sink;
    for (int i = 0; i < units * UNIT; i++)
        x = burn(x);
    wl_sink = x;
}

__attribute__((noinline)) void work_b(int units)
{
    work_b_inner(units);
    __asm__ volatile("" ::: "memory"); /* no tail call */
}

__attribute__((noinline)) void work_c(int depth, int units)
{
    if (depth > 0) {
        work_c(depth - 1, units);
        __asm__ volatile("" ::: "memory");
        return;
    }
    uint64_t x = wl_sink;
    for (int i = 0; i < units * UNIT; i++)
        x = burn(x);
    wl_sink = x;
}

int main(int argc, char **argv)
{
    long rounds_max = 0;
    double secs = 2;
    if (argc > 2 && strcmp(argv[1], "--rounds") == 0)
        rounds_max = atol(argv[2]);
    else
        secs = wl_seconds(argc, argv, 2);
    uint64_t t0 = wl_now_ns(), end = t0 + (uint64_t)(secs * 1e9);
    long rounds = 0;
    while (rounds_max ? rounds < rounds_max : wl_now_ns() < end) {
        work_a(5);
        work_b(3);
        work_c(4, 2);
        rounds++;
    }
    uint64_t t1 = wl_now_ns();
    struct timespec cpu;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    /* cpu_ms: the loop's CPU time, sampling interrupts included, other processes' load not */
    printf("rounds %ld ns_per_round %.0f total_ms %.3f cpu_ms %.3f\n", rounds,
           rounds ? (double)(t1 - t0) / (double)rounds : 0.0, (double)(t1 - t0) / 1e6,
           (double)cpu.tv_sec * 1e3 + (double)cpu.tv_nsec / 1e6);
    return 0;
}
