/* symtab.c — one object's symbol table: a sorted array of entries plus one string pool.
 *
 * Symbols are appended in any order with their names copied into the pool (offsets,
 * never pointers, so the pool may grow). _finish sorts by start, keeps one entry per
 * start (the best alias), gives sizeless symbols the gap up to the next symbol, and
 * rebuilds the pool with only the kept names (demangled when looked up:
 * cn_sym__table_name). Lookup is a binary search for
 * the largest start <= address, which must also lie before start + size. */
#include "sym_internal.h"

#include <assert.h>
#include <demangle.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SEQ_MASK 0x3fffffffu

static uint32_t seq_of(const cn_sym__entry *e)
{
    return e->seq_bind & SEQ_MASK;
}

static int bind_of(const cn_sym__entry *e)
{
    return (int)(e->seq_bind >> 30);
}

int cn_sym__table_add(cn_sym__table *t, uint64_t start, uint64_t size, uint64_t limit,
                      const char *name, size_t len, int bind)
{
    if (t->n >= CN_SYM__MAX_SYMBOLS)
        return -E2BIG;
    if (len > CN_SYM__MAX_NAME)
        len = CN_SYM__MAX_NAME;
    if (t->pool_len + len + 1 > CN_SYM__MAX_POOL)
        return -E2BIG;
    if (CN_RESERVE(t->e, t->cap, t->n + 1) < 0 ||
        CN_RESERVE(t->pool, t->pool_cap, t->pool_len + len + 1) < 0)
        return -ENOMEM;
    memcpy(t->pool + t->pool_len, name, len);
    t->pool[t->pool_len + len] = '\0';
    cn_sym__entry *e = &t->e[t->n];
    e->start = start;
    e->size = size;
    e->limit = limit;
    e->name = (uint32_t)t->pool_len;
    e->seq_bind = ((uint32_t)(bind & 3) << 30) | ((uint32_t)t->n & SEQ_MASK);
    t->pool_len += len + 1;
    t->n++;
    return 0;
}

static size_t leading_underscores(const char *s)
{
    size_t n = 0;
    while (s[n] == '_')
        n++;
    return n;
}

typedef struct sort_ctx {
    const char *pool;
    int later_wins;
} sort_ctx;

/* perf's order among aliases (choose_best_symbol): a non-weak symbol beats a weak one,
 * then a global one beats a local one. */
static int bind_rank(const cn_sym__entry *e)
{
    switch (bind_of(e)) {
    case CN_SYM__BIND_GLOBAL:
        return 2;
    case CN_SYM__BIND_LOCAL:
        return 1;
    default:
        return 0;
    }
}

/* Orders by start, then best alias first, by perf's rules, so that an address gets the
 * name perf users know: sized, non-weak, global, fewer leading underscores, the longer
 * name; names of one length (libc's `__memmove_avx512_unaligned_erms` and
 * `__memcpy_avx512_unaligned_erms`) go to the one first in the table. */
static int entry_cmp(const void *a, const void *b, void *arg)
{
    const cn_sym__entry *x = a, *y = b;
    const sort_ctx *ctx = arg;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (ctx->later_wins)
        return seq_of(x) > seq_of(y) ? -1 : 1;
    if ((x->size != 0) != (y->size != 0))
        return x->size ? -1 : 1;
    if (bind_rank(x) != bind_rank(y))
        return bind_rank(x) > bind_rank(y) ? -1 : 1;
    const char *nx = ctx->pool + x->name, *ny = ctx->pool + y->name;
    size_t ux = leading_underscores(nx), uy = leading_underscores(ny);
    if (ux != uy)
        return ux < uy ? -1 : 1;
    size_t lx = strlen(nx), ly = strlen(ny);
    if (lx != ly)
        return lx > ly ? -1 : 1;
    return seq_of(x) < seq_of(y) ? -1 : (seq_of(x) > seq_of(y));
}

char *cn_sym_demangle(const char *name)
{
    if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
        return NULL;
    return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_VERBOSE);
}

const char *cn_sym__table_name(const cn_sym__table *t, const cn_sym__entry *e, char **owned)
{
    const char *raw = t->pool + e->name;
    *owned = cn_sym_demangle(raw);
    if (*owned && strlen(*owned) > CN_SYM__MAX_NAME)
        (*owned)[CN_SYM__MAX_NAME] = '\0';
    return *owned ? *owned : raw;
}

int cn_sym__table_finish(cn_sym__table *t, uint64_t max_gap, int later_wins)
{
    if (t->n == 0)
        return 0;
    sort_ctx ctx = {t->pool, later_wins};
    qsort_r(t->e, t->n, sizeof(*t->e), entry_cmp, &ctx);
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (k > 0 && t->e[k - 1].start == t->e[i].start)
            continue; /* a worse alias */
        t->e[k++] = t->e[i];
    }
    t->n = k;
    for (size_t i = 0; i < k; i++) {
        assert(i == 0 || t->e[i - 1].start < t->e[i].start); /* sorted, one per start */
        cn_sym__entry *e = &t->e[i];
        if (e->size != 0) {
            e->limit = 0; /* from here on: "size inferred" (sym_internal.h) */
            continue;
        }
        uint64_t end = i + 1 < k ? t->e[i + 1].start : UINT64_MAX;
        if (e->limit < end && e->limit > e->start)
            end = e->limit;
        if (end == UINT64_MAX || (max_gap && end - e->start > max_gap))
            end = max_gap ? e->start + max_gap : e->start;
        e->size = end - e->start;
        e->limit = 1;
    }
    /* Rebuild the pool with the kept names only. They stay as the object spells them:
     * demangling every symbol of a large C++ program (chromium, clang, cc1plus) at load
     * was a third of canopyd's CPU on a busy machine, for the few dozen names a profile
     * ever shows; cn_sym__table_name demangles those when they are looked up. */
    size_t cap = 0;
    for (size_t i = 0; i < k; i++)
        cap += strnlen(t->pool + t->e[i].name, CN_SYM__MAX_NAME) + 1;
    char *pool = malloc(cap ? cap : 1);
    if (!pool)
        return -ENOMEM;
    size_t len = 0;
    for (size_t i = 0; i < k; i++) {
        const char *name = t->pool + t->e[i].name;
        size_t n = strnlen(name, CN_SYM__MAX_NAME);
        memcpy(pool + len, name, n);
        pool[len + n] = '\0';
        t->e[i].name = (uint32_t)len;
        len += n + 1;
    }
    assert(len <= cap); /* each name was counted above */
    free(t->pool);
    t->pool = pool;
    t->pool_len = t->pool_cap = len;
    /* Shrink to fit: the bound on memory counts what we keep. */
    cn_sym__entry *e = realloc(t->e, k * sizeof(*e));
    if (e) {
        t->e = e;
        t->cap = k;
    }
    char *p = realloc(t->pool, len ? len : 1);
    if (p)
        t->pool = p;
    free(t->starts);
    t->starts = malloc(k * sizeof(*t->starts));
    if (!t->starts)
        return -ENOMEM;
    for (size_t i = 0; i < k; i++)
        t->starts[i] = t->e[i].start;
    return 0;
}

const cn_sym__entry *cn_sym__table_find(const cn_sym__table *t, uint64_t addr)
{
    if (!t->starts || t->n == 0)
        return NULL;
    /* Branch-free search for the number of starts <= addr. */
    const uint64_t *base = t->starts;
    size_t n = t->n;
    while (n > 1) {
        size_t half = n / 2;
        base = base[half] <= addr ? base + half : base;
        n -= half;
    }
    size_t lo = (size_t)(base - t->starts) + (*base <= addr);
    if (lo == 0)
        return NULL;
    const cn_sym__entry *e = &t->e[lo - 1];
    assert(lo <= t->n && e->start <= addr); /* the largest start <= addr */
    return addr - e->start < e->size ? e : NULL;
}

void cn_sym__narrow_region(uint64_t addr, const uint64_t *starts, size_t n, size_t i,
                           uint64_t end_prev, uint64_t *lo, uint64_t *hi)
{
    assert(i <= n && (i == 0 || starts[i - 1] <= addr) && (i == n || addr < starts[i]));
    assert(*lo <= addr && addr < *hi);
    uint64_t from = 0, to = i < n ? starts[i] : UINT64_MAX;
    if (i > 0) {
        if (addr < end_prev) /* covered: up to its end or the next start */
            from = starts[i - 1], to = end_prev < to ? end_prev : to;
        else /* in the gap after it */
            from = end_prev > starts[i - 1] ? end_prev : starts[i - 1];
    }
    *lo = from > *lo ? from : *lo;
    *hi = to < *hi ? to : *hi;
}

void cn_sym__table_region(const cn_sym__table *t, uint64_t addr, uint64_t *lo, uint64_t *hi)
{
    if (!t->starts || t->n == 0)
        return; /* cn_sym__table_find answers NULL everywhere */
    size_t a = cn_count_le_u64(t->starts, t->n, sizeof(*t->starts), addr);
    const cn_sym__entry *e = a ? &t->e[a - 1] : NULL;
    uint64_t end = e ? (e->size > UINT64_MAX - e->start ? UINT64_MAX : e->start + e->size) : 0;
    cn_sym__narrow_region(addr, t->starts, t->n, a, end, lo, hi);
}

void cn_sym__table_clear(cn_sym__table *t)
{
    free(t->e);
    free(t->pool);
    free(t->starts);
    memset(t, 0, sizeof(*t));
}

size_t cn_sym__table_memory(const cn_sym__table *t)
{
    return t->cap * sizeof(*t->e) + t->pool_cap + (t->starts ? t->n * sizeof(uint64_t) : 0);
}

uint32_t cn_sym__crc32(uint32_t crc, const void *buf, size_t len)
{
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
        table[i] = c;
    }
    const uint8_t *p = buf;
    crc = ~crc;
    while (len--)
        crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
