/* hash.c — the containers every interning step in aggregate/ uses.
 *
 * The id set indexes a table's rows by a 32-bit hash kept in each 8-byte slot: open
 * addressing, linear probing, at most 3/4 full (8 slots a cache line, and a slot whose
 * hash differs is passed without reading the row, so a probe usually touches one or two
 * lines; at 1/2 the largest index, the stack index of a whole-system session, held twice
 * the bytes of its rows for the same answers). No deletion: the tables it indexes are
 * append-only, and compaction (compact.c) builds a new set.
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
        const cn_agg__idslot *sl = &s->slots[i];
        if (sl->id < 0)
            return -1;
        if (sl->hash == hash && eq(ctx, sl->id, key))
            return sl->id;
        i = (i + 1) & s->mask;
    }
}

static int idset_rehash(cn_agg__idset *s, size_t ncap)
{
    cn_agg__idslot *slots = malloc(ncap * sizeof(*slots));
    if (!slots)
        return -ENOMEM;
    memset(slots, 0xff, ncap * sizeof(*slots)); /* id -1: empty */
    size_t nmask = ncap - 1;
    for (size_t i = 0; s->mask && i <= s->mask; i++) {
        if (s->slots[i].id < 0)
            continue;
        size_t j = s->slots[i].hash & nmask;
        while (slots[j].id >= 0)
            j = (j + 1) & nmask;
        slots[j] = s->slots[i];
    }
    free(s->slots);
    s->slots = slots;
    s->mask = nmask;
    return 0;
}

int cn_agg__idset_reserve(cn_agg__idset *s, size_t n)
{
    size_t cap = s->mask ? s->mask + 1 : 0, ncap = cap ? cap : 64;
    while (n * 4 > ncap * 3) /* as idset_add grows */
        ncap *= 2;
    return ncap > cap ? idset_rehash(s, ncap) : 0;
}

int cn_agg__idset_add(cn_agg__idset *s, uint32_t hash, int32_t id)
{
    size_t cap = s->mask ? s->mask + 1 : 0;
    if ((s->count + 1) * 4 > cap * 3) {
        int rc = idset_rehash(s, cap ? cap * 2 : 64);
        if (rc < 0)
            return rc;
    }
    size_t i = hash & s->mask;
    while (s->slots[i].id >= 0)
        i = (i + 1) & s->mask;
    s->slots[i] = (cn_agg__idslot){hash, id};
    s->count++;
    return 0;
}

void cn_agg__idset_clear(cn_agg__idset *s)
{
    free(s->slots);
    memset(s, 0, sizeof(*s));
}
