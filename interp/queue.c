/* queue.c — the records drained from the ring, waiting for the sampler's join.
 *
 * An array of record headers, oldest first, with a head index, and the frames in a parallel
 * pool. The sampler takes records in time order, so a take scans a few entries from the head;
 * taken entries are marked and the head moves past them; the array is compacted once the head
 * passed half of it. Bounded: past CN_INT__QUEUE_MAX records the oldest is dropped. */
#include <errno.h>
#include <string.h>

#include "int_internal.h"

#define KTIME_WINDOW 1000000 /* ns before a sample a ktime-stamped record may be */

static void compact(cn_int__queue *q)
{
    if (q->head < 1024 || q->head * 2 < q->len)
        return;
    size_t pfirst = q->head < q->len ? q->q[q->head].first : q->plen;
    memmove(q->q, q->q + q->head, (q->len - q->head) * sizeof(*q->q));
    q->len -= q->head;
    q->head = 0;
    if (q->plen > pfirst)
        memmove(q->pool, q->pool + pfirst, (q->plen - pfirst) * sizeof(*q->pool));
    q->plen -= pfirst;
    for (size_t i = 0; i < q->len; i++)
        q->q[i].first -= (uint32_t)pfirst;
}

static void advance(cn_int__queue *q)
{
    while (q->head < q->len && q->q[q->head].taken)
        q->head++;
}

int cn_int__queue_push(cn_int__queue *q, const void *data, size_t size, const cn_int__names *names)
{
    const struct cn_int_abi_record *r = data;
    if (size < CN_INT_ABI_HEADER_SIZE)
        return -EINVAL;
    uint32_t n = r->nframes;
    if (n > CN_INT_MAX_FRAMES || CN_INT_ABI_HEADER_SIZE + n * sizeof(r->frames[0]) > size)
        return -EINVAL;
    if (q->len - q->head >= CN_INT__QUEUE_MAX) {
        q->q[q->head].taken = true; /* the oldest goes */
        advance(q);
    }
    compact(q);
    if (CN_RESERVE(q->q, q->cap, q->len + 1) < 0 || CN_RESERVE(q->pool, q->pcap, q->plen + n) < 0)
        return -ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        cn_int_frame *f = &q->pool[q->plen + i];
        f->code = r->frames[i].code;
        f->instr = names ? cn_int__instr_index(names, r->frames[i].instr) : -1;
        f->entry = (r->frames[i].flags & CN_INT_ABI_F_ENTRY) != 0;
    }
    q->q[q->len++] = (cn_int__qrec){.pid = r->pid,
                                    .tid = r->tid,
                                    .cpu = r->cpu,
                                    .nframes = n,
                                    .first = (uint32_t)q->plen,
                                    .time = r->time,
                                    .sample_time = r->time_src == CN_INT_ABI_T_SAMPLE,
                                    .status = r->status,
                                    .multi = (r->rflags & CN_INT_ABI_R_MULTI) != 0,
                                    .sub = (r->rflags & CN_INT_ABI_R_SUB) != 0,
                                    .interp = r->interp,
                                    .nsub = r->nsub < n ? r->nsub : n};
    q->plen += n;
    return 0;
}

static void copy_out(const cn_int__queue *q, const cn_int__qrec *e, cn_int_record *out)
{
    out->pid = e->pid;
    out->tid = e->tid;
    out->cpu = e->cpu;
    out->time = e->time;
    out->sample_time = e->sample_time;
    out->status = e->status;
    out->multi = e->multi;
    out->sub = e->sub;
    out->interp = e->interp;
    out->nsub = e->nsub;
    out->nframes = e->nframes;
    if (e->nframes) /* the pool is NULL while every record so far had no frame */
        memcpy(out->frames, q->pool + e->first, e->nframes * sizeof(*out->frames));
}

int cn_int__queue_take(cn_int__queue *q, uint32_t pid, uint32_t tid, uint64_t time,
                       cn_int_record *out)
{
    cn_int__qrec *best = NULL;
    for (size_t i = q->head; i < q->len; i++) {
        cn_int__qrec *e = &q->q[i];
        if (e->taken || e->pid != pid || e->tid != tid)
            continue;
        if (e->sample_time) {
            if (e->time != time)
                continue;
            best = e;
            break;
        }
        /* A ktime record (kernels before 6.2/6.3): the program ran in the overflow handler
         * before perf_prepare_sample() took the sample's time, so its sample's record is the
         * thread's last one at or before time. A thread's records are queued in time order
         * (its program runs follow one another into the one ring): the first later one ends
         * the search, and a record of a lost sample is passed over by the closer one. */
        if (e->time > time)
            break;
        if (time - e->time <= KTIME_WINDOW)
            best = e;
    }
    if (!best)
        return 0;
    copy_out(q, best, out);
    best->taken = true;
    advance(q);
    return 1;
}

size_t cn_int__queue_expire(cn_int__queue *q, uint64_t time)
{
    size_t n = 0;
    for (size_t i = q->head; i < q->len; i++) {
        if (!q->q[i].taken && q->q[i].time < time) {
            q->q[i].taken = true;
            n++;
        }
    }
    advance(q);
    return n;
}

int cn_int__queue_next(cn_int__queue *q, cn_int_record *out)
{
    advance(q);
    if (q->head >= q->len)
        return 0;
    copy_out(q, &q->q[q->head], out);
    q->q[q->head].taken = true;
    advance(q);
    return 1;
}

size_t cn_int__queue_len(const cn_int__queue *q)
{
    size_t n = 0;
    for (size_t i = q->head; i < q->len; i++)
        n += !q->q[i].taken;
    return n;
}

void cn_int__queue_free(cn_int__queue *q)
{
    free(q->q);
    free(q->pool);
    memset(q, 0, sizeof(*q));
}
