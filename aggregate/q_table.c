/* q_table.c — the query engine's func-level prefix tree (cn_agg__qtable).
 *
 * Rows (prefix, func) are unique and appended, so prefix < row. Finding the child of a
 * row with a given func is the hot operation of every query (the base table has one
 * lookup per frame stack, each rebuilding transform one per row), and most rows have no
 * or very few children: a lookup scans the row's child list (newest first) and only rows
 * with more than QT_SCAN children go through a (prefix, func) hash. A fresh row (no
 * children yet) costs no hashing at all, and the arrays written are the ones just
 * appended, which keeps cache misses to about one per lookup.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "q_engine.h"

#define QT_SCAN 8

void cn_agg__q_hugepages(void *ptr, size_t bytes)
{
    /* Randomly indexed arrays of tens of MB: one TLB entry per 2 MB instead of per 4 KB.
     * Advice only; errors (no THP) are harmless. */
    if (bytes < (4u << 20))
        return;
    uintptr_t b = ((uintptr_t)ptr + 4095) & ~(uintptr_t)4095;
    uintptr_t e = ((uintptr_t)ptr + bytes) & ~(uintptr_t)4095;
    if (e > b)
        (void)madvise((void *)b, e - b, MADV_HUGEPAGE);
}

int cn_agg__qt_reserve(cn_agg__qtable *t, size_t n)
{
    if (n <= t->cap)
        return 0;
    size_t c[4] = {t->cap, t->cap, t->cap, t->cap};
    if (CN_RESERVE(t->prefix, c[0], n) < 0 || CN_RESERVE(t->func, c[1], n) < 0 ||
        CN_RESERVE(t->link, c[2], n) < 0 || CN_RESERVE(t->head, c[3], n) < 0)
        return -ENOMEM;
    size_t m = c[0];
    for (int i = 1; i < 4; i++)
        m = c[i] < m ? c[i] : m;
    t->cap = m;
    cn_agg__q_hugepages(t->link, m * sizeof(*t->link));
    cn_agg__q_hugepages(t->head, m * sizeof(*t->head));
    return 0;
}

/* Moves the children of prefix into the hash once it has too many to scan. */
static int qt_promote(cn_agg__qtable *t, int32_t prefix, int32_t first)
{
    for (int32_t c = first; c >= 0; c = t->link[c].sib)
        if (cn_u64map_put(&t->big, cn_pair(prefix, t->link[c].func), c) < 0)
            return -ENOMEM;
    return 0;
}

int32_t cn_agg__qt_intern(cn_agg__qtable *t, int32_t prefix, int32_t func)
{
    assert(prefix >= -1 && prefix < (int32_t)t->n); /* so the new row's prefix < row */
    cn_agg__qhead *h = prefix < 0 ? &t->roots : &t->head[prefix];
    if (h->nkids > QT_SCAN) {
        int32_t r = cn_u64map_get(&t->big, cn_pair(prefix, func));
        if (r >= 0)
            return r;
    } else {
        for (int32_t c = h->child; c >= 0; c = t->link[c].sib)
            if (t->link[c].func == func)
                return c;
    }
    if (t->n >= INT32_MAX)
        return -ENOMEM;
    if (t->n == t->cap) {
        if (cn_agg__qt_reserve(t, t->n < 64 ? 64 : t->n * 2) < 0)
            return -ENOMEM;
        h = prefix < 0 ? &t->roots : &t->head[prefix]; /* the arrays may have moved */
    }
    int32_t r = (int32_t)t->n++;
    t->prefix[r] = prefix;
    t->func[r] = func;
    t->link[r] = (cn_agg__qlink){.func = func, .sib = h->child};
    t->head[r] = (cn_agg__qhead){.child = -1, .nkids = 0};
    h->child = r;
    h->nkids++;
    if (h->nkids == QT_SCAN + 1)
        return qt_promote(t, prefix, r) < 0 ? -ENOMEM : r;
    if (h->nkids > QT_SCAN + 1 && cn_u64map_put(&t->big, cn_pair(prefix, func), r) < 0)
        return -ENOMEM;
    return r;
}

void cn_agg__qt_init(cn_agg__qtable *t)
{
    memset(t, 0, sizeof(*t));
    t->roots.child = -1;
}

void cn_agg__qt_clear(cn_agg__qtable *t)
{
    free(t->prefix);
    free(t->func);
    free(t->link);
    free(t->head);
    cn_u64map_clear(&t->big);
    cn_agg__qt_init(t);
}
