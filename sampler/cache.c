/* cache.c — object files' unwind tables, shared by file identity (cn_smp_cache, cn_smp.h).
 *
 * Entries (cn_smp__elf, read by image.c) are keyed by the file's (device, inode, size,
 * mtime) in a chained hash table. An entry with holders (objects of sessions whose live
 * address spaces map the file) is never dropped; one without waits in a least-recently-
 * used list whose bytes are bounded: the oldest are freed first; and those unused for a
 * while go too (cn_smp_cache_expire, the host's timer). Its bytes are counted when it
 * enters the list, as the rules compiled while it was used only grow then. One
 * thread at a time uses a cache (the sessions' owner), so nothing here locks. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "smp_internal.h"

#define CACHE_BUCKETS 1024

struct cn_smp_cache {
    cn_smp__elf *buckets[CACHE_BUCKETS];
    cn_smp__elf *lru_head, *lru_tail; /* unheld entries: head most recently released */
    cn_smp_cache_stats st;
    cn_obj_mounts *mounts; /* the FUSE check's mount tables, for every open of a mapped file */
};

static uint32_t ident_hash(const cn_obj_ident *id)
{
    uint64_t h = id->dev * 0x9e3779b97f4a7c15ULL ^ id->ino;
    h ^= (uint64_t)id->size * 0xbf58476d1ce4e5b9ULL ^ (uint64_t)id->mtime_ns;
    h ^= h >> 31;
    return (uint32_t)(h % CACHE_BUCKETS);
}

static bool ident_equal(const cn_obj_ident *a, const cn_obj_ident *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns;
}

cn_smp_cache *cn_smp_cache_new(uint64_t max_bytes)
{
    cn_smp_cache *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->st.max_bytes = max_bytes ? max_bytes : CN_SMP_CACHE_DEFAULT_BYTES;
    c->mounts = cn_obj_mounts_new();
    if (!c->mounts) {
        free(c);
        return NULL;
    }
    return c;
}

static void lru_unlink(cn_smp_cache *c, cn_smp__elf *e)
{
    if (e->lru_prev)
        e->lru_prev->lru_next = e->lru_next;
    else
        c->lru_head = e->lru_next;
    if (e->lru_next)
        e->lru_next->lru_prev = e->lru_prev;
    else
        c->lru_tail = e->lru_prev;
    e->lru_prev = e->lru_next = NULL;
    c->st.lru_bytes -= e->bytes;
}

static void hash_unlink(cn_smp_cache *c, cn_smp__elf *e)
{
    cn_smp__elf **pp = &c->buckets[ident_hash(&e->id)];
    while (*pp && *pp != e)
        pp = &(*pp)->hnext;
    assert(*pp == e); /* every entry of the cache is in its bucket */
    *pp = e->hnext;
}

/* Frees an unheld entry (in the LRU list). */
static void drop(cn_smp_cache *c, cn_smp__elf *e)
{
    assert(e->refs == 0);
    lru_unlink(c, e);
    hash_unlink(c, e);
    c->st.files--;
    c->st.bytes -= e->bytes;
    cn_smp__elf_free(e);
}

cn_smp_cache *cn_smp_cache_free(cn_smp_cache *c)
{
    if (!c)
        return NULL;
    /* Sessions are freed first: only unheld entries remain. */
    assert(c->st.in_use == 0);
    while (c->lru_tail)
        drop(c, c->lru_tail);
    cn_obj_mounts_unref(c->mounts);
    free(c);
    return NULL;
}

cn_obj_mounts *cn_smp__cache_mounts(cn_smp_cache *c)
{
    return c ? c->mounts : NULL;
}

void cn_smp_cache_stats_get(const cn_smp_cache *c, cn_smp_cache_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!c)
        return;
    *out = c->st;
    /* Counted here rather than kept: a table read whole (cn_smp__elf_fill_all) closes its
     * file without the cache knowing. A few hundred entries, at each `status`. */
    for (size_t b = 0; b < CACHE_BUCKETS; b++)
        for (const cn_smp__elf *e = c->buckets[b]; e; e = e->hnext)
            out->open_files += cn_smp__elf_lazy(e);
}

size_t cn_smp_cache_expire(cn_smp_cache *c, int64_t now_ns, int64_t idle_ns)
{
    size_t n = 0;
    /* The list runs from the most recently released (head) to the oldest (tail). */
    while (c && c->lru_tail && now_ns - c->lru_tail->released_ns >= idle_ns) {
        drop(c, c->lru_tail);
        c->st.expired++;
        n++;
    }
    return n;
}

cn_smp__elf *cn_smp__cache_get(cn_smp_cache *c, const cn_obj_ident *id)
{
    for (cn_smp__elf *e = c->buckets[ident_hash(id)]; e; e = e->hnext) {
        if (!ident_equal(&e->id, id))
            continue;
        if (e->refs++ == 0) {
            lru_unlink(c, e);
            c->st.in_use++;
        }
        c->st.hits++;
        return e;
    }
    return NULL;
}

void cn_smp__cache_add(cn_smp_cache *c, cn_smp__elf *e, const cn_obj_ident *id)
{
    assert(!e->cache && e->refs == 0);
    e->cache = c;
    e->id = *id;
    e->refs = 1;
    e->bytes = cn_smp__elf_bytes(e);
    uint32_t b = ident_hash(id);
    e->hnext = c->buckets[b];
    c->buckets[b] = e;
    c->st.files++;
    c->st.in_use++;
    c->st.loads++;
    c->st.bytes += e->bytes;
}

void cn_smp__elf_put(cn_smp__elf *e)
{
    if (!e)
        return;
    cn_smp_cache *c = e->cache;
    if (!c) {
        cn_smp__elf_free(e); /* unshared: the holder was its only one */
        return;
    }
    assert(e->refs > 0);
    if (--e->refs > 0)
        return;
    c->st.in_use--;
    e->released_ns = cn_common_now_ns();
    uint64_t now = cn_smp__elf_bytes(e); /* rules compiled since it was counted */
    c->st.bytes += now - e->bytes;
    e->bytes = now;
    e->lru_next = c->lru_head;
    if (c->lru_head)
        c->lru_head->lru_prev = e;
    c->lru_head = e;
    if (!c->lru_tail)
        c->lru_tail = e;
    c->st.lru_bytes += e->bytes;
    while (c->st.lru_bytes > c->st.max_bytes && c->lru_tail) {
        drop(c, c->lru_tail);
        c->st.evictions++;
    }
}
