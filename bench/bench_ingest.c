/* bench_ingest.c — sample ingest: cn_agg_stack_from_refs + cn_agg_add_sample.
 *
 * Workload (bench_callgraph.h): 100,000 distinct native callchains 30–60 frames deep
 * (leaf first, as an unwinder produces them), made distinct with a scratch profile. Then
 * BENCH_SAMPLES (default 10,000,000) samples, each picking a chain with a skew (index =
 * N·u², hot stacks repeat as in real profiles), interned into a fresh profile with its
 * time and thread. The picked chains are laid out one after another in a 65,536-sample
 * stream that the timed loop reads in order (wrapping), as the sampler reads callchains
 * from the perf ring: the chain being interned was just written, not fetched from a
 * random place in memory. Reports the first pass (every chain new: per-frame interning)
 * and the steady state (every chain known: the whole-callchain cache). Target: ≥ 5 million
 * samples/s on one core. Build in Release.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_callgraph.h"

static long env_long(const char *name, long def)
{
    const char *s = getenv(name);
    return s && *s ? atol(s) : def;
}

int main(void)
{
    long nstacks = env_long("BENCH_STACKS", 100000);
    long nsamples = env_long("BENCH_SAMPLES", 10000000);
    static bg_graph g;
    bg_graph_init(&g, 7);

    /* Distinct chains, found with a scratch profile. */
    cn_agg_profile *scratch = cn_agg_profile_new();
    int32_t res[BG_NLIB];
    for (int i = 0; i < BG_NLIB; i++) {
        char name[32];
        snprintf(name, sizeof(name), "lib%d.so", i);
        res[i] = cn_agg_resource(scratch, name, NULL, NULL, CN_AGG_RES_LIBRARY);
    }
    cn_agg_frame_ref *refs = malloc((size_t)nstacks * BG_MAXDEPTH * sizeof(*refs));
    uint8_t *len = malloc((size_t)nstacks);
    uint8_t *seen = calloc(1 << 26, 1);
    long have = 0;
    while (have < nstacks) {
        cn_agg_frame_ref *r = refs + (size_t)have * BG_MAXDEPTH;
        size_t n = bg_walk(&g, res, 30, 60, r);
        int32_t s = cn_agg_stack_from_refs(scratch, r, n);
        if (s < 0 || s >= (1 << 26))
            return 1;
        if (!seen[s]) {
            seen[s] = 1;
            len[have++] = (uint8_t)n;
        }
    }
    cn_agg_profile_free(scratch);
    free(seen);
    enum { RING = 65536 };
    size_t *ring_off = malloc(RING * sizeof(*ring_off));
    uint8_t *ring_len = malloc(RING);
    cn_agg_frame_ref *ring = malloc((size_t)RING * BG_MAXDEPTH * sizeof(*ring));
    size_t used = 0;
    for (long i = 0; i < RING; i++) {
        double u = (double)(bg_rand(&g) % 1000000) / 1e6;
        long k = (long)((double)nstacks * u * u);
        memcpy(ring + used, refs + (size_t)k * BG_MAXDEPTH, len[k] * sizeof(*ring));
        ring_off[i] = used;
        ring_len[i] = len[k];
        used += len[k];
    }
    cn_agg_profile *p = cn_agg_profile_new();
    for (int i = 0; i < BG_NLIB; i++) {
        char name[32];
        snprintf(name, sizeof(name), "lib%d.so", i);
        cn_agg_resource(p, name, NULL, NULL, CN_AGG_RES_LIBRARY);
    }
    int32_t th = cn_agg_thread(p, 100, 100, "worker");
    /* First pass: every distinct chain once (all new). */
    double t0 = bg_now();
    for (long k = 0; k < nstacks; k++) {
        int32_t s = cn_agg_stack_from_refs(p, refs + (size_t)k * BG_MAXDEPTH, len[k]);
        if (s < 0 || cn_agg_add_sample(p, s, k, 1, th) < 0)
            return 1;
    }
    double first = bg_now() - t0;
    /* Steady state: skewed picks of known chains. */
    t0 = bg_now();
    double c0 = bg_cpu();
    for (long i = 0; i < nsamples; i++) {
        long k = i & (RING - 1);
        int32_t s = cn_agg_stack_from_refs(p, ring + ring_off[k], ring_len[k]);
        if (s < 0 || cn_agg_add_sample(p, s, nstacks + i, 1, th) < 0)
            return 1;
    }
    double steady = bg_now() - t0, steady_cpu = bg_cpu() - c0;
    double frames = 0;
    for (long k = 0; k < nstacks; k++)
        frames += len[k];
    printf("chains: %ld distinct, %.1f frames on average; profile: %zu stack rows, %zu frames\n",
           nstacks, frames / (double)nstacks, cn_agg_stack_count(p), cn_agg_frame_count(p));
    printf("first pass (all chains new):  %8.0f samples/s  (%.1f ms for %ld)\n",
           (double)nstacks / first, first * 1e3, nstacks);
    printf("steady state (chains known):  %8.0f samples/s  (%.1f ms for %ld)\n",
           (double)nsamples / steady, steady * 1e3, nsamples);
    printf("steady state per CPU second:  %8.0f samples/s  (%.1f ms of CPU)\n",
           (double)nsamples / steady_cpu, steady_cpu * 1e3);
    printf("memory: %.1f MB\n", (double)cn_agg_profile_memory(p) / 1e6);
    cn_agg_profile_free(p);
    free(refs);
    free(len);
    free(ring);
    free(ring_off);
    free(ring_len);
    return 0;
}
