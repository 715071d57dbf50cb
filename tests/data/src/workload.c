/* workload.c — a CPU-bound program with known hot spots, profiled with
 * `perf record -e cpu-clock -g` to produce tests/data/perf/workload.perf.txt.gz.
 *
 * Each round calls work_a, work_b and work_c with 5, 3 and 2 units of the same loop
 * (different constants only, so the compiler neither folds nor specialises them): by
 * construction work_a holds ~50% of the self time, work_b ~30%, work_c ~20%. All three
 * are called from run_round(), itself called from main().
 * Build: cc -O2 -fno-omit-frame-pointer -o workload workload.c
 * Usage: workload [SECONDS]   (default 2)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define UNIT 200000u

/* Called once per work_* call so that the work functions are not leaves: a leaf gets no
 * frame pointer and its caller would vanish from frame-pointer callchains. */
__attribute__((noinline)) void publish(uint64_t *x)
{
    __asm__ volatile("" : : "r"(x) : "memory");
}

__attribute__((noinline)) uint64_t work_a(uint64_t n, uint64_t x)
{
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x));
    }
    publish(&x);
    return x;
}

__attribute__((noinline)) uint64_t work_b(uint64_t n, uint64_t x)
{
    for (uint64_t i = 0; i < n; i++) {
        x = x * 2862933555777941757ull + 3037000493ull;
        __asm__ volatile("" : "+r"(x));
    }
    publish(&x);
    return x;
}

__attribute__((noinline)) uint64_t work_c(uint64_t n, uint64_t x)
{
    for (uint64_t i = 0; i < n; i++) {
        x = x * 3935559000370003845ull + 2691343689449507681ull;
        __asm__ volatile("" : "+r"(x));
    }
    publish(&x);
    return x;
}

__attribute__((noinline)) uint64_t run_round(uint64_t x)
{
    x = work_a(5 * UNIT, x);
    x = work_b(3 * UNIT, x);
    x = work_c(2 * UNIT, x);
    return x ^ 1; /* not a tail call: run_round stays on every stack */
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    double start = now();
    uint64_t x = 1;
    while (now() - start < seconds)
        x = run_round(x);
    printf("%llu\n", (unsigned long long)(x & 0xff));
    return 0;
}
