/* wl_common.h — shared bits of the sampler's test workloads: a leaf `burn` that spins
 * for a given number of units, and a monotonic clock. Workloads print what they did on
 * stdout so tests can check the profile against it. */
#ifndef WL_COMMON_H
#define WL_COMMON_H

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* Waits before the part a test must see from its start: START seconds (a number), or with
 * "usr1" until SIGUSR1 comes (at most 10 s; -1 then), as a test that attached sends it: a
 * fixed delay raced the attach (test_sampler under ASan). The test spawns the workload with
 * SIGUSR1 blocked, so that it cannot arrive before this waits for it. */
static inline int wl_start_wait(const char *start, double dflt)
{
    if (start && strcmp(start, "usr1") == 0) {
        sigset_t usr1;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        sigprocmask(SIG_BLOCK, &usr1, NULL);
        struct timespec limit = {.tv_sec = 10};
        return sigtimedwait(&usr1, NULL, &limit) == SIGUSR1 ? 0 : -1;
    }
    usleep((useconds_t)((start ? atof(start) : dflt) * 1e6));
    return 0;
}

#endif
