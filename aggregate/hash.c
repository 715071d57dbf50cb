/* hash.c — the containers every interning step in aggregate/ uses.
 *
 * Growable arrays double their capacity. Both hash tables use open addressing with
 * linear probing at a load factor of at most 1/2, so a probe usually touches one or two
 * cache lines; neither supports deletion (the tables they index are append-only).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_internal.h"

int32_t cn_agg__idset_find(const cn_agg__idset *s, uint32_t hash, cn_agg__eq_fn eq, const void *ctx,
                           const void *key)
{
    if (!s->mask)
        return -1;
    size_t i = hash & s->mask;
    for (;;) {
        int32_t id = s->ids[i];
        if (id < 0)
            return -1;
        if (s->hashes[i] == hash && eq(ctx, id, key))
            return id;
        i = (i + 1) & s->mask;
    }
}

static int idset_rehash(cn_agg__idset *s, size_t ncap)
{
    uint32_t *hashes = malloc(ncap * sizeof(*hashes));
    int32_t *ids = malloc(ncap * sizeof(*ids));
    if (!hashes || !ids) {
        free(hashes);
        free(ids);
        return -ENOMEM;
    }
    memset(ids, 0xff, ncap * sizeof(*ids));
    size_t nmask = ncap - 1;
    for (size_t i = 0; s->mask && i <= s->mask; i++) {
        if (s->ids[i] < 0)
            continue;
        size_t j = s->hashes[i] & nmask;
        while (ids[j] >= 0)
            j = (j + 1) & nmask;
        hashes[j] = s->hashes[i];
        ids[j] = s->ids[i];
    }
    free(s->hashes);
    free(s->ids);
    s->hashes = hashes;
    s->ids = ids;
    s->mask = nmask;
    return 0;
}

int cn_agg__idset_reserve(cn_agg__idset *s, size_t n)
{
    size_t cap = s->mask ? s->mask + 1 : 0, ncap = cap ? cap : 64;
    while (n * 2 > ncap)
        ncap *= 2;
    return ncap > cap ? idset_rehash(s, ncap) : 0;
}

int cn_agg__idset_add(cn_agg__idset *s, uint32_t hash, int32_t id)
{
    size_t cap = s->mask ? s->mask + 1 : 0;
    if ((s->count + 1) * 2 > cap) {
        int rc = idset_rehash(s, cap ? cap * 2 : 64);
        if (rc < 0)
            return rc;
    }
    size_t i = hash & s->mask;
    while (s->ids[i] >= 0)
        i = (i + 1) & s->mask;
    s->hashes[i] = hash;
    s->ids[i] = id;
    s->count++;
    return 0;
}

void cn_agg__idset_clear(cn_agg__idset *s)
{
    free(s->hashes);
    free(s->ids);
    memset(s, 0, sizeof(*s));
}
