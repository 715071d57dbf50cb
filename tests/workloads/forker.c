/* forker.c — sleeps START seconds, then forks: the child spends its time in child_work,
 * the parent in parent_work, for SECONDS each. Usage: forker [SECONDS] [START], START as
 * wl_start_wait takes it (seconds, or "usr1"). */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wl_common.h"

volatile uint64_t wl_sink;

__attribute__((noinline)) uint64_t burn(uint64_t x)
{
    for (int i = 0; i < 40; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

__attribute__((noinline)) void child_work(uint64_t end)
{
    uint64_t x = wl_sink;
    while (wl_now_ns() < end)
        for (int i = 0; i < 1000; i++)
            x = burn(x);
    wl_sink = x;
}

__attribute__((noinline)) void parent_work(uint64_t end)
{
    uint64_t x = wl_sink;
    while (wl_now_ns() < end)
        for (int i = 0; i < 1000; i++)
            x = burn(x);
    wl_sink = x;
}

int main(int argc, char **argv)
{
    double secs = wl_seconds(argc, argv, 2);
    if (wl_start_wait(argc > 2 ? argv[2] : NULL, 0.5) < 0)
        return 2;
    uint64_t end = wl_now_ns() + (uint64_t)(secs * 1e9);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        child_work(end);
        _exit(0);
    }
    parent_work(end);
    waitpid(pid, NULL, 0);
    printf("child %d\n", (int)pid);
    return 0;
}
