/* perf_records.h — perf ring records made by hand for the sampler's feed tests
 * (cn_smp_session_feed: test_sampler.c, test_cfi_shapes.c), in perf_event_open(2)'s
 * layouts, each with sample_id_all's trailer (pid, tid, time, cpu). Header-only, tests
 * only. */
#ifndef CN_TEST_PERF_RECORDS_H
#define CN_TEST_PERF_RECORDS_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Appends n bytes of rec to buf at len; returns the new length. */
static inline size_t test_put(uint8_t *buf, size_t len, const void *rec, size_t n)
{
    memcpy(buf + len, rec, n);
    return len + n;
}

/* One mapping, as PERF_RECORD_MMAP2 tells it; time is the trailer's. */
typedef struct test_mmap2 {
    uint32_t pid, tid;
    uint64_t addr, len, pgoff;
    uint32_t maj, min;
    uint64_t ino;
    uint32_t prot, flags;
    const char *path;
    uint64_t time;
} test_mmap2;

/* Appends m's MMAP2 record to buf at len (the caller gives the room); returns the new
 * length. The path is NUL-padded to 8 bytes, as the kernel writes it. */
static inline size_t test_put_mmap2(uint8_t *buf, size_t len, const test_mmap2 *m)
{
    struct {
        struct perf_event_header h;
        uint32_t pid, tid;
        uint64_t addr, len, pgoff;
        uint32_t maj, min;
        uint64_t ino, gen;
        uint32_t prot, flags;
    } head = {{PERF_RECORD_MMAP2, 0, 0},
              m->pid,
              m->tid,
              m->addr,
              m->len,
              m->pgoff,
              m->maj,
              m->min,
              m->ino,
              0,
              m->prot,
              m->flags};
    struct {
        uint32_t pid, tid;
        uint64_t time;
        uint32_t cpu, res;
    } id = {m->pid, m->tid, m->time, 0, 0};
    size_t plen = strlen(m->path), name = (plen + 1 + 7) & ~(size_t)7;
    head.h.size = (uint16_t)(sizeof(head) + name + sizeof(id));
    len = test_put(buf, len, &head, sizeof(head));
    memset(buf + len, 0, name);
    memcpy(buf + len, m->path, plen);
    return test_put(buf, len + name, &id, sizeof(id));
}

#endif
