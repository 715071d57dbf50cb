/* wl_common.h — shared bits of the sampler's test workloads: a leaf `burn` that spins
 * for a given number of units, and a monotonic clock. Workloads print what they did on
 * stdout so tests can check the profile against it. */
#ifndef WL_COMMON_H
#define WL_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline uint64_t wl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Seconds to run, from argv[1] (default 2). */
static inline double wl_seconds(int argc, char **argv, double dflt)
{
    return argc > 1 ? atof(argv[1]) : dflt;
}

#endif
