/* test_seed.c — canopyd-test's CANOPYD_TEST_SEED hook (test_seed.h). */
#include <errno.h>
#include <stdio.h>

#include "bench_callgraph.h"
#include "test_seed.h"

int cn_d_test_seed(cn_agg_profile *p, const void *arg)
{
    long nstacks = 0, nsamples = 0;
    if (sscanf((const char *)arg, "%ld:%ld", &nstacks, &nsamples) != 2 || nstacks <= 0 ||
        nsamples <= 0)
        return -EINVAL;
    /* 1 ns apart from time 0: all before the session's first real sample, so the samples
     * stay in time order. */
    int32_t th[2] = {cn_agg_thread(p, 1, 1, "seed-main"), cn_agg_thread(p, 1, 2, "seed-worker")};
    long made = bg_fill_profile(p, nstacks, nsamples, th, 0, 1, NULL);
    fprintf(stderr, "canopyd-test: seeded a session with %ld samples over %ld stacks\n", nsamples,
            made);
    return made < 0 ? -ENOMEM : 0;
}
