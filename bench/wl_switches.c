/* wl_switches.c — a fixed amount of work done through context switches, for
 * bench/offcpu_overhead.sh: two threads ping-pong a byte over two pipes ROUNDS times and
 * each computes WORK_NS between the exchanges, so each round switches each thread out
 * once (blocked in read) and the switch rate is about 1 / (WORK_NS + a pipe round trip).
 *   wl_switches ROUNDS WORK_NS
 * Prints its wall time for the whole work, its own CPU time (user + system: the kernel's
 * sampling at each switch is charged here), its context switches (getrusage) and their
 * rate. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int ab[2], ba[2];
static long rounds;
static uint64_t work_ns;
static volatile uint64_t sink;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void work(void)
{
    uint64_t end = now_ns() + work_ns, n = 0;
    while (now_ns() < end)
        n++;
    sink = n;
}

static void *peer(void *arg)
{
    (void)arg;
    char c;
    for (long i = 0; i < rounds; i++) {
        if (read(ab[0], &c, 1) != 1)
            break;
        work();
        if (write(ba[1], &c, 1) != 1)
            break;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    rounds = atol(argv[1]);
    work_ns = (uint64_t)atoll(argv[2]);
    if (pipe(ab) < 0 || pipe(ba) < 0)
        return 1;
    pthread_t th;
    if (pthread_create(&th, NULL, peer, NULL) != 0)
        return 1;
    uint64_t t0 = now_ns();
    char c = 1;
    for (long i = 0; i < rounds; i++) {
        if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
            return 1;
        work();
    }
    pthread_join(th, NULL);
    double ms = (double)(now_ns() - t0) / 1e6;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
    long sw = ru.ru_nvcsw + ru.ru_nivcsw;
    printf("elapsed_ms %.1f cpu_ms %.1f switches %ld switches_per_s %.0f\n", ms, cpu_ms, sw,
           (double)sw / (ms / 1e3));
    return 0;
}
