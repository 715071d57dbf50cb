/* ring.c — the per-CPU perf rings: mapping them, reading them in place, and delivering
 * their records in time order (docs/architecture.md, "Decisions in sampler/").
 *
 * One CPU writes each ring, so a ring is in time order, and a read is a k-way merge of the
 * rings' current records and the held queue, picking the oldest head by a linear scan (one
 * cursor per ring: a few dozen at most, cheaper than a heap). A cursor walks its ring in
 * place: acquire data_head, parse each record where it lies (a record that wraps the
 * ring's end is first made contiguous in the ring's 64 KiB wrap buffer), dispatch it, and
 * release data_tail at the end, so the kernel never rewrites bytes still being read and no
 * read is torn. A record newer than HOLD_NS before the read may still be overtaken by one
 * being written on another CPU: it waits for a later read, in its ring while the ring is at
 * most a quarter full, else copied out into the held queue. The held queue is an arena of
 * record bytes plus an index sorted by (time, arrival); a second arena takes what is kept
 * when the delivered prefix is dropped (one copy, then the two swap). */
#include <assert.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "smp_internal.h"

/* Records this much older than a read are delivered by it; newer ones wait for a later
 * read (records are written within microseconds of their time stamp). */
#define HOLD_NS CN_SMP__HOLD_NS

/* A held record: its bytes are at arena[off, off + len). */
typedef cn_smp__held pend;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int cn_smp__ring_map(cn_smp_session *s, cn_smp__ring *rg, int fd)
{
    size_t page = (size_t)getpagesize();
    /* A power of two (cn_smp_session_new checks it), so data_size is one too. */
    assert(s->ring_pages && (s->ring_pages & (s->ring_pages - 1)) == 0);
    for (uint32_t pages = s->ring_pages; pages >= 1; pages /= 2) {
        size_t len = (pages + 1) * page;
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) {
            rg->wrap = malloc(1u << 16); /* header.size is 16 bits */
            if (!rg->wrap) {
                munmap(m, len);
                return -ENOMEM;
            }
            rg->base = m;
            rg->map_len = len;
            rg->data_size = pages * page;
            return 0;
        }
        if (errno != EPERM && errno != ENOMEM)
            return -errno;
    }
    return -ENOMEM;
}

void cn_smp__ring_unmap(cn_smp__ring *rg)
{
    if (rg->base)
        munmap(rg->base, rg->map_len);
    free(rg->wrap);
    rg->base = rg->wrap = NULL;
    rg->data_size = rg->map_len = 0;
}

/* Copies a record (contiguous) into the held queue. */
static int arena_push(cn_smp_session *s, const uint8_t *rec, size_t len, uint64_t time)
{
    if (s->arena_len + len > s->arena_cap) {
        size_t cap = s->arena_cap ? s->arena_cap : 1 << 20;
        while (cap < s->arena_len + len)
            cap *= 2;
        uint8_t *n = realloc(s->arena, cap);
        if (!n)
            return -ENOMEM;
        s->arena = n;
        s->arena_cap = cap;
    }
    if (CN_RESERVE(s->held.v, s->held.cap, s->held.n + 1) < 0)
        return -ENOMEM;
    memcpy(s->arena + s->arena_len, rec, len);
    s->held.v[s->held.n++] = (pend){time, s->seq++, s->arena_len, (uint32_t)len};
    s->arena_len += len;
    assert(s->arena_len <= s->arena_cap && s->held.n <= s->held.cap);
    return 0;
}

/* A ring's unread records, walked in place by the merge. */
typedef struct cn_smp__cursor {
    cn_smp__ring *rg;
    const uint8_t *data;
    uint64_t head, tail, size;
    const uint8_t *rec; /* the current record: in the ring, or rg->wrap when it wraps */
    size_t len;         /* 0 when the ring has nothing more */
    uint64_t time;      /* 0 when the record does not parse (delivered at once, counted) */
    cn_smp__rec parsed; /* rec parsed (pointers into rec), when parse_ret == 0 */
    int parse_ret;
} cursor;

/* Points c at the record at its tail (len 0 when none). A malformed header discards the
 * rest of what the ring holds now, counted. */
static void cursor_peek(cn_smp_session *s, cursor *c)
{
    c->len = 0;
    if (c->tail >= c->head)
        return;
    struct perf_event_header h;
    uint64_t avail = c->head - c->tail, off = c->tail & (c->size - 1);
    size_t first = (size_t)(c->size - off);
    if (avail < sizeof(h) || avail > c->size)
        goto bad;
    if (first >= sizeof(h)) {
        memcpy(&h, c->data + off, sizeof(h));
    } else {
        memcpy(&h, c->data + off, first);
        memcpy((uint8_t *)&h + first, c->data, sizeof(h) - first);
    }
    if (h.size < sizeof(h) || h.size > avail)
        goto bad;
    c->rec = c->data + off;
    if (first < h.size) { /* wraps the end of the ring: make it contiguous */
        memcpy(c->rg->wrap, c->data + off, first);
        memcpy(c->rg->wrap + first, c->data, h.size - first);
        c->rec = c->rg->wrap;
    }
    c->len = h.size;
    assert(c->len <= c->head - c->tail); /* never past what the kernel has published */
    c->parse_ret = cn_smp__parse(&s->lay, c->rec, c->len, &c->parsed);
    c->time = c->parse_ret == 0 ? c->parsed.time : 0;
    return;
bad:
    s->cnt.bad_records++;
    c->tail = c->head;
}

static void cursor_open(cn_smp_session *s, cursor *c, cn_smp__ring *rg)
{
    struct perf_event_mmap_page *pg = (void *)rg->base;
    c->rg = rg;
    /* Acquire: the records up to data_head are completely written. */
    c->head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
    c->tail = pg->data_tail;
    c->data = rg->base + (pg->data_offset ? pg->data_offset : (uint64_t)getpagesize());
    c->size = rg->data_size;
    assert(c->size && (c->size & (c->size - 1)) == 0); /* offsets are masked with size - 1 */
    cursor_peek(s, c);
}

/* Hands the ring's space up to the cursor back to the kernel. */
static void cursor_close(cursor *c)
{
    struct perf_event_mmap_page *pg = (void *)c->rg->base;
    /* Release: our reads of the records are done before the kernel may overwrite them. */
    __atomic_store_n(&pg->data_tail, c->tail, __ATOMIC_RELEASE);
}

static int pend_cmp(const void *a, const void *b)
{
    const pend *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

#ifndef NDEBUG
/* Between reads the held queue is sorted by (time, seq). */
static bool held_sorted(const cn_smp_session *s)
{
    for (size_t i = 1; i < s->held.n; i++)
        if (pend_cmp(&s->held.v[i - 1], &s->held.v[i]) > 0)
            return false;
    return true;
}
#endif

/* Keeps the held records from index `from` on (dropping those delivered), compacted. */
static int held_compact(cn_smp_session *s, size_t from)
{
    assert(from <= s->held.n);
    if (from == 0)
        return 0; /* nothing delivered: nothing to drop */
    size_t need = 0;
    for (size_t j = from; j < s->held.n; j++)
        need += s->held.v[j].len;
    if (need > s->arena2_cap) {
        uint8_t *n = realloc(s->arena2, need);
        if (!n)
            return -ENOMEM;
        s->arena2 = n;
        s->arena2_cap = need;
    }
    size_t off = 0;
    for (size_t j = from; j < s->held.n; j++) {
        memcpy(s->arena2 + off, s->arena + s->held.v[j].off, s->held.v[j].len);
        s->held.v[j - from] = s->held.v[j];
        s->held.v[j - from].off = off;
        off += s->held.v[j].len;
    }
    s->held.n -= from;
    uint8_t *t = s->arena;
    size_t tc = s->arena_cap;
    s->arena = s->arena2;
    s->arena_cap = s->arena2_cap;
    s->arena2 = t;
    s->arena2_cap = tc;
    s->arena_len = off;
    assert(s->arena_len <= s->arena_cap);
    return 0;
}

/* Sorts the held queue, which is nruns sorted runs starting at runs[0] = 0 < runs[1] < ...
 * (the records held before, then each ring's newer ones): adjacent runs merged pairwise,
 * ceil(log2(nruns)) passes over a spare kept between reads. A read used to qsort it all:
 * 9% of canopyd's CPU in a system session during a build, with its scratch malloc'ed and
 * faulted in at each read. A run found unsorted (a record that does not parse has time 0
 * wherever it lies), or no memory for the spare: qsort in place. */
void cn_smp__held_sort(cn_smp__held_queue *q, size_t *runs, size_t nruns)
{
    if (q->n < 2 || nruns < 2)
        return;
    bool runs_sorted = true;
    for (size_t r = 0; r < nruns && runs_sorted; r++)
        for (size_t i = runs[r] + 1; i < (r + 1 < nruns ? runs[r + 1] : q->n); i++)
            if (pend_cmp(&q->v[i - 1], &q->v[i]) > 0) {
                runs_sorted = false;
                break;
            }
    if (!runs_sorted || CN_RESERVE(q->tmp, q->tmp_cap, q->n) < 0) {
        qsort(q->v, q->n, sizeof(*q->v), pend_cmp);
        return;
    }
    while (nruns > 1) {
        size_t k = 0;
        for (size_t r = 0; r < nruns; r += 2) {
            size_t a = runs[r], am = r + 1 < nruns ? runs[r + 1] : q->n;
            size_t b = am, bm = r + 2 < nruns ? runs[r + 2] : q->n;
            size_t o = a;
            runs[k++] = a;
            while (a < am && b < bm)
                q->tmp[o++] = pend_cmp(&q->v[b], &q->v[a]) < 0 ? q->v[b++] : q->v[a++];
            while (a < am)
                q->tmp[o++] = q->v[a++];
            while (b < bm)
                q->tmp[o++] = q->v[b++];
        }
        nruns = k;
        pend *t = q->v;
        size_t tc = q->cap;
        q->v = q->tmp;
        q->cap = q->tmp_cap;
        q->tmp = t;
        q->tmp_cap = tc;
        if (nruns > 1 && CN_RESERVE(q->tmp, q->tmp_cap, q->n) < 0) {
            qsort(q->v, q->n, sizeof(*q->v), pend_cmp);
            return;
        }
    }
}

/* Merges the rings' records and the held ones in time order, processing every record with
 * time <= bound where it lies (no copy: a dwarf sample carries kilobytes of stack). What is
 * newer waits for the next call, in the ring, or copied into the held queue when the ring
 * is filling up. Each ring is in time order (one CPU writes it), so a k-way merge of the
 * rings' heads and the held queue orders everything. */
static int merge(cn_smp_session *s, uint64_t bound)
{
    uint64_t before = s->cnt.samples;
    cursor *cur = s->cursors;
    size_t hi = 0;
    int ret = 0;
    assert(held_sorted(s));
    if (!s->runs && !(s->runs = calloc(s->nrings + 1, sizeof(*s->runs))))
        return -ENOMEM; /* the rings are fixed once the session reads */
    for (size_t i = 0; i < s->nrings; i++)
        cursor_open(s, &cur[i], &s->rings[i]);
    for (;;) {
        cursor *best = NULL;
        uint64_t t = hi < s->held.n ? s->held.v[hi].time : UINT64_MAX;
        for (size_t i = 0; i < s->nrings; i++)
            if (cur[i].len && cur[i].time < t) {
                best = &cur[i];
                t = cur[i].time;
            }
        if (t > bound || (!best && hi >= s->held.n))
            break;
        if (best) {
            cn_smp__tap(s, best->rec, best->len);
            cn_smp__dispatch(s, best->parse_ret, &best->parsed);
            best->tail += best->len;
            cursor_peek(s, best);
        } else {
            const uint8_t *rec = s->arena + s->held.v[hi].off;
            cn_smp__rec r;
            cn_smp__tap(s, rec, s->held.v[hi].len);
            cn_smp__dispatch(s, cn_smp__parse(&s->lay, rec, s->held.v[hi].len, &r), &r);
            hi++;
        }
    }
    ret = held_compact(s, hi);
    /* The held queue after the pushes below: what it held (sorted), then one sorted run per
     * ring (a ring is in time order). s->runs[0] = 0. */
    size_t nruns = 0;
    s->runs[nruns++] = 0;
    for (size_t i = 0; i < s->nrings; i++) {
        if (s->held.n > s->runs[nruns - 1])
            s->runs[nruns++] = s->held.n;
        /* What is newer stays in the ring while the ring has room to spare (no copy); only
         * when it holds more than a quarter of its size is it moved out. */
        cursor *c = &cur[i];
        if (bound != UINT64_MAX && c->head - c->tail <= c->size / 4) {
            cursor_close(c);
            continue;
        }
        for (; ret == 0 && c->len; cursor_peek(s, c)) {
            ret = arena_push(s, c->rec, c->len, c->time);
            c->tail += c->len;
        }
        cursor_close(&cur[i]);
    }
    assert(nruns <= s->nrings + 1);
    /* Sorted even after a failed push: the next read merges what was held. */
    cn_smp__held_sort(&s->held, s->runs, nruns);
    assert(held_sorted(s));
    if (ret < 0)
        return ret;
    uint64_t got = s->cnt.samples - before;
    return got > INT32_MAX ? INT32_MAX : (int)got;
}

int cn_smp__drain(cn_smp_session *s, bool all)
{
    if (all)
        return merge(s, UINT64_MAX);
    uint64_t now = now_ns();
    return merge(s, now > HOLD_NS ? now - HOLD_NS : 0);
}

int cn_smp__rings_new(cn_smp_session *s, const int *cpus, int ncpu)
{
    s->rings = calloc((size_t)ncpu, sizeof(*s->rings));
    s->ring_fds = calloc((size_t)ncpu, sizeof(int));
    if (!s->rings || !s->ring_fds)
        return -ENOMEM;
    s->nrings = (size_t)ncpu;
    for (int i = 0; i < ncpu; i++) {
        s->rings[i] = (cn_smp__ring){.fd = -1, .cpu = cpus[i]};
        s->ring_fds[i] = -1;
    }
    return 0;
}

int cn_smp__rings_ready(cn_smp_session *s)
{
    /* Compact the ring arrays: drop CPUs that could not be opened. */
    size_t k = 0;
    for (size_t i = 0; i < s->nrings; i++)
        if (s->rings[i].fd >= 0) {
            s->rings[k] = s->rings[i];
            s->ring_fds[k++] = s->rings[i].fd;
        }
    s->nrings = k;
    s->cursors = calloc(k ? k : 1, sizeof(*s->cursors));
    return s->cursors ? 0 : -ENOMEM;
}

void cn_smp__rings_free(cn_smp_session *s)
{
    for (size_t i = 0; i < s->nrings; i++)
        cn_smp__ring_unmap(&s->rings[i]);
    free(s->cursors);
    free(s->runs);
    free(s->held.tmp);
    free(s->rings);
    free(s->ring_fds);
    free(s->arena);
    free(s->arena2);
    free(s->held.v);
    s->cursors = NULL;
    s->runs = NULL;
    s->held.tmp = NULL;
    s->held.tmp_cap = 0;
    s->rings = NULL;
    s->ring_fds = NULL;
    s->nrings = 0;
    s->arena = s->arena2 = NULL;
    s->arena_len = s->arena_cap = s->arena2_cap = 0;
    s->held.v = NULL;
    s->held.n = s->held.cap = 0;
}
