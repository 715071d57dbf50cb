/* libwork.c — the library of test_container_names.sh, built twice with different
 * VARIANTs (alpha, beta) and installed at the same path, /usr/lib/libwork.so, in two
 * container images: the same path and entry point, different function names. The burn
 * function is static, so only the symbol table (or a separate debug file) names it. */
#define CAT_(a, b) a##b
#define CAT(a, b)  CAT_(a, b)
#define BURN       CAT(VARIANT, _burn)

static volatile unsigned long sink;

__attribute__((noinline)) static void BURN(void)
{
    for (unsigned long i = 0; i < 2000000; i++)
        sink += i ^ (sink >> 3);
}

void work_entry(void)
{
    BURN();
}
