/* Test workload for the symbolizer: built -O2 -g so that gcc inlines the static helpers
 * (inline chains), in PIE, non-PIE and stripped + .gnu_debuglink variants. It spins for
 * argv[1] seconds (default 0: one pass) so it can also be profiled. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static inline uint64_t step(uint64_t x, int k)
{
    for (int i = 0; i < k; i++)
        x = mix(x + (uint64_t)i);
    return x;
}

static inline uint64_t leaf_sum(const uint64_t *v, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += step(v[i], 3);
    return s;
}

__attribute__((noinline)) uint64_t work_a(uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = mix(v[i] + i);
    return leaf_sum(v, n);
}

__attribute__((noinline)) uint64_t work_b(uint64_t *v, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i + 1 < n; i += 2)
        s += step(v[i] ^ v[i + 1], 5);
    return s + work_a(v, n / 2);
}

__attribute__((noinline)) static uint64_t recurse(uint64_t x, int depth)
{
    if (depth == 0)
        return mix(x);
    return recurse(step(x, 2), depth - 1) + 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

__attribute__((noinline)) uint64_t work_sort(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 0;
    size_t n = 4096;
    uint64_t *v = malloc(n * sizeof(*v));
    if (!v)
        return 1;
    for (size_t i = 0; i < n; i++)
        v[i] = i * 2654435761u;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t acc = 0;
    do {
        acc += work_a(v, n) + work_b(v, n) + recurse(acc, 8) + work_sort(v, n);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
    printf("%llu\n", (unsigned long long)(acc & 0xff));
    free(v);
    return 0;
}
