/* deep.c — a 30-frame stack: main -> deep(27) -> ... -> deep(0) -> burn, for the
 * sampler's per-sample cost benchmark. Usage: deep [SECONDS [pad]]: with "pad", the
 * recursion is deep_pad(), whose frames hold 200 bytes more each (a ~6 KiB stack, for the
 * stack-copy size tests); deep() itself stays as small as it was. */
#include <stdio.h>

#include "wl_common.h"

volatile uint64_t wl_sink;

__attribute__((noinline)) uint64_t burn(uint64_t x)
{
    for (int i = 0; i < 40; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

__attribute__((noinline)) void deep(int n, uint64_t end)
{
    if (n > 0) {
        deep(n - 1, end);
        __asm__ volatile("" ::: "memory");
        return;
    }
    uint64_t x = wl_sink;
    while (wl_now_ns() < end)
        for (int i = 0; i < 1000; i++)
            x = burn(x);
    wl_sink = x;
}

__attribute__((noinline)) void deep_pad(int n, uint64_t end)
{
    volatile char pad[200];
    pad[0] = (char)n;
    if (n > 0)
        deep_pad(n - 1, end);
    else
        deep(0, end);
    __asm__ volatile("" ::: "memory");
    pad[1] = pad[0]; /* after the call: no tail call */
}

int main(int argc, char **argv)
{
    double secs = wl_seconds(argc, argv, 2);
    uint64_t end = wl_now_ns() + (uint64_t)(secs * 1e9);
    if (argc > 2 && strcmp(argv[2], "pad") == 0)
        deep_pad(27, end);
    else
        deep(27, end);
    printf("deep done\n");
    return 0;
}
