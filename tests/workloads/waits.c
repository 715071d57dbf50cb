/* waits.c — where a thread waits, for the off-CPU and wall-clock modes' tests:
 *   waits SECONDS [--wait-signal]
 * Per round, the main thread spends ~40 ms computing (compute), ~30 ms blocked in read()
 * on a pipe that the writer thread answers after 30 ms (wait_answer), and ~30 ms in
 * nanosleep (nap): a wall profile of main is 40/30/30, an off-CPU one 0/50/50. The writer
 * waits in read() for the request (wait_request), then sleeps 30 ms (delay) and answers.
 * On a loaded machine the split drifts (compute overshoots when preempted near its end,
 * wake-ups come late), so at exit it prints the wall time it measured in each activity:
 *   waits rounds N main_compute NS main_read NS main_sleep NS writer_read NS writer_sleep NS
 * With --wait-signal the rounds start at SIGUSR1 (after a profiler attached: then its
 * window and these figures cover the same rounds). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "wl_common.h"

volatile uint64_t wl_sink;
static int req_pipe[2], resp_pipe[2];
/* Wall time per activity (ns): main's compute, read, sleep; the writer's read, sleep. */
static uint64_t t_compute, t_read, t_sleep, t_wread, t_wsleep;
/* When main's rounds began (after --wait-signal's wait): the writer's first read starts
 * before it, and its wait for the signal is no round's (as main's own sigwait is not). */
static _Atomic uint64_t rounds_start;

__attribute__((noinline)) static void compute(uint64_t ns)
{
    uint64_t end = wl_now_ns() + ns, n = 0;
    while (wl_now_ns() < end)
        for (int i = 0; i < 1000; i++)
            n += (uint64_t)i * n + 1;
    wl_sink = n;
}

__attribute__((noinline)) static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* The sink writes keep the calls from becoming tail calls: nap and delay stay frames. */
__attribute__((noinline)) static void nap(void)
{
    sleep_ns(30000000);
    wl_sink++;
}

__attribute__((noinline)) static int wait_answer(void)
{
    char c = 1;
    if (write(req_pipe[1], &c, 1) != 1)
        return -1;
    return read(resp_pipe[0], &c, 1) == 1 ? 0 : -1;
}

__attribute__((noinline)) static int wait_request(char *c)
{
    return read(req_pipe[0], c, 1) == 1 ? 0 : -1;
}

__attribute__((noinline)) static void delay(void)
{
    sleep_ns(30000000);
    wl_sink++;
}

static void *writer(void *arg)
{
    (void)arg;
    char c;
    for (;;) {
        uint64_t t0 = wl_now_ns();
        if (wait_request(&c) != 0 || !c)
            break;
        uint64_t t1 = wl_now_ns(), start = atomic_load(&rounds_start);
        if (t0 < start)
            t0 = start;
        delay();
        t_wread += t1 - t0;
        t_wsleep += wl_now_ns() - t1;
        if (write(resp_pipe[1], &c, 1) != 1)
            break;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    double secs = wl_seconds(argc, argv, 2);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL); /* the writer inherits the mask */
    if (pipe(req_pipe) < 0 || pipe(resp_pipe) < 0)
        return 1;
    pthread_t th;
    if (pthread_create(&th, NULL, writer, NULL) != 0)
        return 1;
    pthread_setname_np(th, "writer");
    int sig;
    if (argc > 2 && !strcmp(argv[2], "--wait-signal") && sigwait(&usr1, &sig) != 0)
        return 1;
    uint64_t start = wl_now_ns();
    atomic_store(&rounds_start, start);
    uint64_t end = start + (uint64_t)(secs * 1e9);
    int rounds = 0;
    while (wl_now_ns() < end) {
        uint64_t t0 = wl_now_ns();
        compute(40000000);
        uint64_t t1 = wl_now_ns();
        if (wait_answer() < 0)
            return 1;
        uint64_t t2 = wl_now_ns();
        nap();
        t_compute += t1 - t0;
        t_read += t2 - t1;
        t_sleep += wl_now_ns() - t2;
        rounds++;
    }
    char stop = 0;
    if (write(req_pipe[1], &stop, 1) != 1)
        return 1;
    pthread_join(th, NULL);
    printf("waits rounds %d main_compute %llu main_read %llu main_sleep %llu writer_read %llu "
           "writer_sleep %llu\n",
           rounds, (unsigned long long)t_compute, (unsigned long long)t_read,
           (unsigned long long)t_sleep, (unsigned long long)t_wread, (unsigned long long)t_wsleep);
    return 0;
}
