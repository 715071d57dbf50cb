/* sigprof.c — time inside a signal handler: main -> main_work spins in spin_main, and a
 * SIGPROF handler (every 2 ms of CPU time) spins ~1 ms in spin_handler, so about a third of
 * the samples are in spin_handler, under __restore_rt's signal frame, above whatever
 * main_work was doing. Usage: sigprof [SECONDS]. */
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>

#include "wl_common.h"

volatile uint64_t wl_sink;

__attribute__((noinline)) uint64_t spin_handler(uint64_t x)
{
    uint64_t end = wl_now_ns() + 1000000;
    while (wl_now_ns() < end)
        for (int i = 0; i < 200; i++)
            x = x * 6364136223846793005ULL + 1;
    return x;
}

static void on_prof(int sig)
{
    (void)sig;
    wl_sink = spin_handler(wl_sink);
}

__attribute__((noinline)) uint64_t spin_main(uint64_t x)
{
    for (int i = 0; i < 1000; i++)
        x = x * 2862933555777941757ULL + 3037000493ULL;
    return x;
}

__attribute__((noinline)) void main_work(uint64_t end)
{
    uint64_t x = wl_sink;
    while (wl_now_ns() < end)
        x = spin_main(x);
    wl_sink = x;
}

int main(int argc, char **argv)
{
    double secs = wl_seconds(argc, argv, 2);
    struct sigaction sa = {.sa_handler = on_prof};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGPROF, &sa, NULL) < 0)
        return 1;
    struct itimerval it = {{0, 2000}, {0, 2000}};
    if (setitimer(ITIMER_PROF, &it, NULL) < 0)
        return 1;
    main_work(wl_now_ns() + (uint64_t)(secs * 1e9));
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    printf("sigprof done\n");
    return 0;
}
