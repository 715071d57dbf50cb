/* threads.c — multi-threaded workload: waits START seconds, or for SIGUSR1 with "usr1" (so
 * a profiler can attach first; wl_start_wait), then starts two threads: "wl-alpha" spends all its
 * time in alpha_work, "wl-beta" 70% in beta_x and 30% in beta_y; both through burn. Usage: threads
 * [SECONDS] [START]. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "wl_common.h"

volatile uint64_t wl_sink;
static double run_secs;

__attribute__((noinline)) uint64_t burn(uint64_t x)
{
    for (int i = 0; i < 40; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

__attribute__((noinline)) void spin(int n)
{
    uint64_t x = wl_sink;
    for (int i = 0; i < n; i++)
        x = burn(x);
    wl_sink = x;
}

__attribute__((noinline)) void alpha_work(void)
{
    spin(1000);
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) void beta_x(void)
{
    spin(700);
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) void beta_y(void)
{
    spin(300);
    __asm__ volatile("" ::: "memory");
}

static void *alpha(void *arg)
{
    pthread_setname_np(pthread_self(), "wl-alpha");
    uint64_t end = wl_now_ns() + (uint64_t)(run_secs * 1e9);
    while (wl_now_ns() < end)
        alpha_work();
    return arg;
}

static void *beta(void *arg)
{
    pthread_setname_np(pthread_self(), "wl-beta");
    uint64_t end = wl_now_ns() + (uint64_t)(run_secs * 1e9);
    while (wl_now_ns() < end) {
        beta_x();
        beta_y();
    }
    return arg;
}

int main(int argc, char **argv)
{
    run_secs = wl_seconds(argc, argv, 2);
    /* the threads start after argv[2] seconds, or with "usr1" once a test has attached */
    if (wl_start_wait(argc > 2 ? argv[2] : NULL, 0.5) < 0)
        return 1;
    pthread_t a, b;
    if (pthread_create(&a, NULL, alpha, NULL) || pthread_create(&b, NULL, beta, NULL))
        return 1;
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("threads done\n");
    return 0;
}
