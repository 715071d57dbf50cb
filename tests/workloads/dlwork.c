/* dlwork.c — the library dlopener loads after attach: dl_work spins in dl_leaf. */
#include <stdint.h>

#include "wl_common.h"

__attribute__((noinline)) uint64_t dl_leaf(uint64_t x)
{
    for (int i = 0; i < 40; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

__attribute__((noinline)) uint64_t dl_work(double secs)
{
    uint64_t x = 1, end = wl_now_ns() + (uint64_t)(secs * 1e9);
    while (wl_now_ns() < end)
        for (int i = 0; i < 1000; i++)
            x = dl_leaf(x);
    return x;
}
