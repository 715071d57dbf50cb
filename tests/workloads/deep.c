/* deep.c — a 30-frame stack: main -> deep(27) -> ... -> deep(0) -> burn, for the
 * sampler's per-sample cost benchmark. Usage: deep [SECONDS [PAD]]: with PAD, each deep()
 * frame also holds PAD bytes of stack (so that the whole stack is ~30 * PAD bytes, for
 * the stack-copy size tests). */
#include <alloca.h>
#include <stdio.h>

#include "wl_common.h"

volatile uint64_t wl_sink;
static size_t pad;

__attribute__((noinline)) uint64_t burn(uint64_t x)
{
    for (int i = 0; i < 40; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

__attribute__((noinline)) void deep(int n, uint64_t end)
{
    if (n > 0) {
        if (pad) {
            volatile char *b = alloca(pad);
            b[0] = (char)n;
        }
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

int main(int argc, char **argv)
{
    double secs = wl_seconds(argc, argv, 2);
    pad = argc > 2 ? (size_t)atoi(argv[2]) : 0;
    deep(27, wl_now_ns() + (uint64_t)(secs * 1e9));
    printf("deep done\n");
    return 0;
}
