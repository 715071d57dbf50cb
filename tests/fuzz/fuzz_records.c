/* fuzz_records.c — perf records (as the rings deliver them) into a feed-only sampler
 * session, in each unwind mode's record layout. The first byte picks the layout; the rest
 * is the record stream. Whatever the bytes, the sampler must count and skip what is
 * malformed, never crash or read out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cn_smp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_sample(void *arg, const cn_smp_sample *s)
{
    uint64_t *acc = arg;
    for (uint32_t i = 0; i < s->nframes; i++)
        *acc += s->frames[i].offset + s->frames[i].obj->id + strlen(s->frames[i].obj->name);
}

static void on_task(void *arg, const cn_smp_task_event *ev)
{
    uint64_t *acc = arg;
    if (ev->comm)
        *acc += strlen(ev->comm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint64_t acc = 0;
    cn_smp_config cfg = {.target = CN_SMP_TARGET_NONE,
                         .unwind = (cn_smp_unwind)(data[0] % 3),
                         .no_kernel = (data[0] >> 2) & 1,
                         .stack_size = 512};
    cn_smp_callbacks cb = {.sample = on_sample, .task = on_task};
    cn_smp_session *s = NULL;
    if (cn_smp_session_new(&cfg, &cb, &acc, &s) < 0)
        return 0;
    cn_smp_session_start(s, NULL);
    /* Feed in an aligned copy and at an odd offset: records may sit anywhere. */
    cn_smp_session_feed(s, data + 1, size - 1);
    cn_smp_counters c;
    cn_smp_session_counters(s, &c);
    cn_smp_session_stop(s);
    cn_smp_session_free(s);
    return (int)(acc & 0);
}
