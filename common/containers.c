/* containers.c — the two containers every table-building module needs: a growable array
 * that doubles (grows by half once large), and a uint64 → int32 open-addressing map (linear
 * probing, load factor at most 1/2, no deletion; the lookup is inline in cn_common.h). One copy for
 * aggregate/ and formats/. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cn_common.h"

/* Arrays of at least this many elements grow by half, not double: a whole-system
 * session's sample and stack columns (tens of MiB) then hold at most half more than their
 * rows, not twice, and glibc moves a large block with mremap, so the extra reallocations
 * copy little. A count, not bytes: parallel columns grown from one capacity (a table's
 * rows) must come out with the same capacity whatever their element sizes. */
#define GROW_BY_HALF_FROM 65536

int cn_grow(void **data, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / elem)
            return -ENOMEM;
        ncap += ncap >= GROW_BY_HALF_FROM ? ncap / 2 : ncap;
    }
    void *p = realloc(*data, ncap * elem);
    if (!p)
        return -ENOMEM;
    *data = p;
    *cap = ncap;
    return 0;
}

/* ---- uint64 -> int32 map ---------------------------------------------------------- */

static int u64map_rehash(cn_u64map *m, size_t ncap)
{
    uint64_t *keys = malloc(ncap * sizeof(*keys));
    int32_t *vals = malloc(ncap * sizeof(*vals));
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -ENOMEM;
    }
    memset(vals, 0xff, ncap * sizeof(*vals));
    size_t nmask = ncap - 1;
    for (size_t i = 0; m->mask && i <= m->mask; i++) {
        if (m->vals[i] < 0)
            continue;
        size_t j = cn_mix64(m->keys[i]) & nmask;
        while (vals[j] >= 0)
            j = (j + 1) & nmask;
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->mask = nmask;
    return 0;
}

int cn_u64map_reserve(cn_u64map *m, size_t n)
{
    size_t cap = m->mask ? m->mask + 1 : 0;
    if (n * 2 < cap)
        return 0;
    size_t ncap = cap ? cap : 64;
    while (ncap <= n * 2)
        ncap *= 2;
    return u64map_rehash(m, ncap);
}

int cn_u64map_put(cn_u64map *m, uint64_t key, int32_t val)
{
    int rc = cn_u64map_reserve(m, m->count + 1);
    if (rc < 0)
        return rc;
    size_t i = cn_mix64(key) & m->mask;
    while (m->vals[i] >= 0)
        i = (i + 1) & m->mask;
    m->keys[i] = key;
    m->vals[i] = val;
    m->count++;
    return 0;
}

void cn_u64map_clear(cn_u64map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

/* ---- id set ----------------------------------------------------------------------- */
