/* records.c — perf record parsing. Pure: a record's bytes in, a cn_smp__rec out. Every
 * size read from the record is checked against the record's length before use; nothing
 * is assumed aligned (records fed through cn_smp_session_feed() may sit anywhere). */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include <linux/perf_event.h>

#include "smp_internal.h"

typedef struct cursor {
    const uint8_t *p, *end;
    bool bad;
} cursor;

static uint64_t rd64(cursor *c)
{
    uint64_t v = 0;
    assert(c->p <= c->end);
    if ((size_t)(c->end - c->p) < 8) {
        c->bad = true;
        c->p = c->end;
        return 0;
    }
    memcpy(&v, c->p, 8);
    c->p += 8;
    return v;
}

static void rd32x2(cursor *c, uint32_t *a, uint32_t *b)
{
    uint64_t v = rd64(c);
    *a = (uint32_t)v; /* little- and big-endian alike: two u32 in memory order */
    *b = (uint32_t)(v >> 32);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    uint32_t t = *a;
    *a = *b;
    *b = t;
#endif
}

/* Advances over n bytes; returns the start or NULL (and marks bad). */
static const uint8_t *skip(cursor *c, uint64_t n)
{
    assert(c->p <= c->end);
    if ((uint64_t)(c->end - c->p) < n) {
        c->bad = true;
        c->p = c->end;
        return NULL;
    }
    const uint8_t *s = c->p;
    c->p += n;
    return s;
}

/* The sample_id_all trailer: TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER at the end. */
static void parse_sample_id(const cn_smp__layout *lay, const uint8_t *rec, size_t len,
                            cn_smp__rec *out)
{
    uint64_t st = lay->sample_type;
    size_t n = 0;
    n += (st & PERF_SAMPLE_TID) ? 8 : 0;
    n += (st & PERF_SAMPLE_TIME) ? 8 : 0;
    n += (st & PERF_SAMPLE_ID) ? 8 : 0;
    n += (st & PERF_SAMPLE_STREAM_ID) ? 8 : 0;
    n += (st & PERF_SAMPLE_CPU) ? 8 : 0;
    n += (st & PERF_SAMPLE_IDENTIFIER) ? 8 : 0;
    if (!lay->sample_id_all || n == 0 || len < sizeof(struct perf_event_header) + n)
        return;
    cursor c = {rec + len - n, rec + len, false};
    if (st & PERF_SAMPLE_TID)
        rd32x2(&c, &out->pid, &out->tid);
    if (st & PERF_SAMPLE_TIME)
        out->time = rd64(&c);
    if (st & PERF_SAMPLE_ID)
        rd64(&c);
    if (st & PERF_SAMPLE_STREAM_ID)
        rd64(&c);
    if (st & PERF_SAMPLE_CPU) {
        uint32_t res;
        rd32x2(&c, &out->cpu, &res);
    }
}

static int parse_sample(const cn_smp__layout *lay, cursor *c, cn_smp__rec *out)
{
    uint64_t st = lay->sample_type;
    /* never requested; nor anything between STACK_USER and CGROUP, read in that order */
    if (st & (PERF_SAMPLE_READ | PERF_SAMPLE_RAW | PERF_SAMPLE_BRANCH_STACK | PERF_SAMPLE_WEIGHT |
              PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_TRANSACTION | PERF_SAMPLE_REGS_INTR |
              PERF_SAMPLE_PHYS_ADDR | PERF_SAMPLE_WEIGHT_STRUCT))
        return -ENOTSUP;
    if (st & PERF_SAMPLE_IDENTIFIER)
        out->u.sample.id = rd64(c);
    if (st & PERF_SAMPLE_IP)
        out->u.sample.ip = rd64(c);
    if (st & PERF_SAMPLE_TID)
        rd32x2(c, &out->pid, &out->tid);
    if (st & PERF_SAMPLE_TIME)
        out->time = rd64(c);
    if (st & PERF_SAMPLE_ADDR)
        rd64(c);
    if (st & PERF_SAMPLE_ID)
        rd64(c);
    if (st & PERF_SAMPLE_STREAM_ID)
        rd64(c);
    if (st & PERF_SAMPLE_CPU) {
        uint32_t res;
        rd32x2(c, &out->cpu, &res);
    }
    if (st & PERF_SAMPLE_PERIOD)
        out->u.sample.period = rd64(c);
    if (st & PERF_SAMPLE_CALLCHAIN) {
        uint64_t nr = rd64(c);
        if (c->bad || nr > (uint64_t)(c->end - c->p) / 8)
            return -EINVAL;
        out->u.sample.nr = nr;
        out->u.sample.chain = (const uint64_t *)(const void *)skip(c, nr * 8);
    }
    if (st & PERF_SAMPLE_REGS_USER) {
        uint64_t abi = rd64(c);
        out->u.sample.abi = abi;
        if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
            uint32_t n = (uint32_t)__builtin_popcountll(lay->regs_mask);
            out->u.sample.nregs = n;
            out->u.sample.regs = skip(c, (uint64_t)n * 8);
        }
    }
    if (st & PERF_SAMPLE_STACK_USER) {
        uint64_t size = rd64(c);
        if (c->bad || size > (uint64_t)(c->end - c->p))
            return -EINVAL;
        const uint8_t *data = skip(c, size);
        uint64_t dyn = size ? rd64(c) : 0;
        if (dyn > size)
            return -EINVAL;
        out->u.sample.stack = data;
        out->u.sample.stack_size = dyn;
        out->u.sample.stack_req = size;
    }
    if (st & PERF_SAMPLE_CGROUP)
        out->u.sample.cgroup = rd64(c);
    return c->bad ? -EINVAL : 0;
}

/* A NUL-terminated string starting at p within [p, end). */
static const char *str_in(const uint8_t *p, const uint8_t *end)
{
    if (p >= end || !memchr(p, 0, (size_t)(end - p)))
        return NULL;
    return (const char *)p;
}

int cn_smp__parse(const cn_smp__layout *lay, const void *recp, size_t len, cn_smp__rec *out)
{
    const uint8_t *rec = recp;
    struct perf_event_header h;
    if (!lay || !rec || !out || len < sizeof(h))
        return -EINVAL;
    memcpy(&h, rec, sizeof(h));
    if (h.size != len || h.size < sizeof(h))
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    out->type = h.type;
    out->misc = h.misc;
    cursor c = {rec + sizeof(h), rec + len, false};
    if (h.type == PERF_RECORD_SAMPLE)
        return parse_sample(lay, &c, out);

    parse_sample_id(lay, rec, len, out);
    switch (h.type) {
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2: {
        rd32x2(&c, &out->u.mmap.pid, &out->u.mmap.tid);
        out->u.mmap.addr = rd64(&c);
        out->u.mmap.len = rd64(&c);
        out->u.mmap.pgoff = rd64(&c);
        if (h.type == PERF_RECORD_MMAP2) {
            if (h.misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
                out->u.mmap.has_build_id = true;
                skip(&c, 24); /* build_id_size, reserved, build_id[20] */
            } else {
                rd32x2(&c, &out->u.mmap.maj, &out->u.mmap.min);
                out->u.mmap.ino = rd64(&c);
                out->u.mmap.ino_gen = rd64(&c);
            }
            rd32x2(&c, &out->u.mmap.prot, &out->u.mmap.flags);
        } else {
            /* MMAP records only come for executable mappings. */
            out->u.mmap.prot = 4; /* PROT_EXEC */
        }
        if (c.bad)
            return -EINVAL;
        out->u.mmap.filename = str_in(c.p, c.end);
        if (!out->u.mmap.filename || out->u.mmap.addr + out->u.mmap.len < out->u.mmap.addr)
            return -EINVAL;
        return 0;
    }
    case PERF_RECORD_COMM:
        rd32x2(&c, &out->u.comm.pid, &out->u.comm.tid);
        if (c.bad)
            return -EINVAL;
        out->u.comm.comm = str_in(c.p, c.end);
        return out->u.comm.comm ? 0 : -EINVAL;
    case PERF_RECORD_FORK:
    case PERF_RECORD_EXIT:
        rd32x2(&c, &out->u.task.pid, &out->u.task.ppid);
        rd32x2(&c, &out->u.task.tid, &out->u.task.ptid);
        out->u.task.time = rd64(&c);
        if (!out->time)
            out->time = out->u.task.time;
        return c.bad ? -EINVAL : 0;
    case PERF_RECORD_LOST:
        out->u.lost.id = rd64(&c);
        out->u.lost.lost = rd64(&c);
        return c.bad ? -EINVAL : 0;
    case PERF_RECORD_SWITCH:
        return 0; /* all in the header's misc and the sample_id trailer */
    case PERF_RECORD_SWITCH_CPU_WIDE:
        rd32x2(&c, &out->u.sw.next_prev_pid, &out->u.sw.next_prev_tid);
        return c.bad ? -EINVAL : 0;
    case PERF_RECORD_THROTTLE:
    case PERF_RECORD_UNTHROTTLE: {
        uint64_t t = rd64(&c);
        if (!out->time)
            out->time = t;
        return c.bad ? -EINVAL : 0;
    }
    default:
        return -ENOTSUP;
    }
}

uint64_t cn_smp__chain_at(const cn_smp__rec *r, uint64_t i)
{
    assert(i < r->u.sample.nr);
    uint64_t v;
    memcpy(&v, (const uint8_t *)r->u.sample.chain + i * 8, 8);
    return v;
}

int cn_smp__user_chain(const cn_smp__rec *r, uint64_t from, uint64_t *out, int max)
{
    int n = 0;
    for (uint64_t i = from; i < r->u.sample.nr && n < max; i++) {
        uint64_t v = cn_smp__chain_at(r, i);
        if (v == (uint64_t)PERF_CONTEXT_USER)
            continue;
        if (v >= (uint64_t)PERF_CONTEXT_MAX)
            break;
        out[n++] = v;
    }
    return n;
}

uint64_t cn_smp__reg_at(const cn_smp__rec *r, uint32_t i)
{
    assert(r->u.sample.regs && i < r->u.sample.nregs);
    uint64_t v;
    memcpy(&v, r->u.sample.regs + (size_t)i * 8, 8);
    return v;
}

int cn_smp__reg_index(uint64_t mask, int reg)
{
    if (reg < 0 || reg >= 64 || !(mask & (1ULL << reg)))
        return -1;
    return __builtin_popcountll(mask & ((1ULL << reg) - 1));
}
