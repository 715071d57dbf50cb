/* A second compilation unit beside inlines.c for the symbolizer's tests (the two_cu
 * binary): its function's DWARF is in a unit of its own, so a lookup in it needs a unit
 * the index may not hold yet (symbolizer/dwarf.c). Never called. */
#include <stdint.h>

uint64_t second_cu_work(const uint64_t *v, int n);

uint64_t second_cu_work(const uint64_t *v, int n)
{
    uint64_t s = 0;
    for (int i = 0; i < n; i++)
        s = (s ^ v[i]) * 0x100000001b3ull;
    return s;
}
