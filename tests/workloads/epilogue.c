/* epilogue.c — most samples in a function's epilogue: main -> spin -> tiny, where tiny is
 * a frame-pointer leaf of a few instructions called in a tight loop, so that ~1/3 of the
 * samples land after its `pop %rbp` (x86-64), where the CFI still says the caller's frame
 * pointer is saved below the sampled stack pointer.
 * Usage: epilogue [SECONDS]. */
#include <stdio.h>

#include "wl_common.h"

volatile uint64_t wl_sink;

#if defined(__x86_64__)
/* tiny as gcc -fno-omit-frame-pointer emits it, CFI included, whatever this file is built
 * with (gcc sets up no frame in a leaf otherwise): after `pop %rbp` the CFA is %rsp + 8
 * and %rbp's rule still reads "saved at CFA - 16", a slot below the stack pointer. */
uint64_t tiny(uint64_t x);
__asm__(".text\n"
        ".globl tiny\n"
        ".type tiny, @function\n"
        "tiny:\n"
        ".cfi_startproc\n"
        "push %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset 6, -16\n"
        "mov %rsp, %rbp\n"
        ".cfi_def_cfa_register 6\n"
        "lea 1(%rdi,%rdi,2), %rax\n"
        "pop %rbp\n"
        ".cfi_def_cfa 7, 8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size tiny, .-tiny\n");
#else
__attribute__((noinline)) uint64_t tiny(uint64_t x)
{
    __asm__ volatile("" : "+r"(x));
    return x * 3 + 1;
}
#endif

__attribute__((noinline)) uint64_t spin(uint64_t x, uint64_t end)
{
    while (wl_now_ns() < end)
        for (int i = 0; i < 100000; i++)
            x = tiny(x);
    return x;
}

int main(int argc, char **argv)
{
    double secs = wl_seconds(argc, argv, 2);
    wl_sink = spin(wl_sink, wl_now_ns() + (uint64_t)(secs * 1e9));
    printf("epilogue done\n");
    return 0;
}
