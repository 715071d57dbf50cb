/* bench_ingest.c — sample ingest, one sample at a time (cn_agg_stack_from_refs +
 * cn_agg_add_sample) and batched (cn_agg_add_samples_refs).
 *
 * Workload (bench_callgraph.h): 100,000 distinct native callchains 30–60 frames deep
 * (leaf first, as an unwinder produces them), made distinct with a scratch profile. Then
 * BENCH_SAMPLES (default 10,000,000) samples, each picking a chain with a skew (index =
 * N·u², hot stacks repeat as in real profiles), interned into a fresh profile with its
 * time and thread. The picked chains are laid out one after another in a 65,536-sample
 * stream that the timed loop reads in order (wrapping), as the sampler reads callchains
 * from the perf ring: the chain being interned was just written, not fetched from a
 * random place in memory. Reports the first pass (every chain new: per-frame interning)
 * and the steady state (every chain known: the whole-callchain cache), for each mode;
 * each mode uses its own fresh profile. Batched mode hands BENCH_BATCH (default 64)
 * samples per call, as a daemon draining a ring would. BENCH_MODE=single or batched runs
 * one mode only (for perf). Target: ≥ 5 million samples/s on one core. Build in Release.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_callgraph.h"

enum { RING = 65536 };

typedef struct workload {
    long nstacks, nsamples, batch;
    cn_agg_frame_ref *refs; /* chain k at refs + k * BG_MAXDEPTH */
    uint8_t *len;
    cn_agg_frame_ref *ring; /* the sample stream: chain i at ring + ring_off[i] */
    size_t *ring_off;
    uint8_t *ring_len;
} workload;

static long env_long(const char *name, long def)
{
    const char *s = getenv(name);
    return s && *s ? atol(s) : def;
}

static cn_agg_profile *profile_with_libs(void)
{
    cn_agg_profile *p = cn_agg_profile_new();
    for (int i = 0; p && i < BG_NLIB; i++) {
        char name[32];
        snprintf(name, sizeof(name), "lib%d.so", i);
        if (cn_agg_resource(p, name, NULL, NULL, CN_AGG_RES_LIBRARY) != i)
            return cn_agg_profile_free(p);
    }
    return p;
}

/* Fills w with nstacks distinct chains and the sample stream. Returns 0 or -1. */
static int workload_init(workload *w)
{
    static bg_graph g;
    bg_graph_init(&g, 7);
    cn_agg_profile *scratch = profile_with_libs();
    int32_t res[BG_NLIB];
    for (int i = 0; i < BG_NLIB; i++)
        res[i] = i;
    w->refs = malloc((size_t)w->nstacks * BG_MAXDEPTH * sizeof(*w->refs));
    w->len = malloc((size_t)w->nstacks);
    uint8_t *seen = calloc(1 << 26, 1);
    w->ring_off = malloc(RING * sizeof(*w->ring_off));
    w->ring_len = malloc(RING);
    w->ring = malloc((size_t)RING * BG_MAXDEPTH * sizeof(*w->ring));
    if (!scratch || !w->refs || !w->len || !seen || !w->ring_off || !w->ring_len || !w->ring)
        return -1;
    long have = 0;
    while (have < w->nstacks) {
        cn_agg_frame_ref *r = w->refs + (size_t)have * BG_MAXDEPTH;
        size_t n = bg_walk(&g, res, 30, 60, r);
        int32_t s = cn_agg_stack_from_refs(scratch, r, n);
        if (s < 0 || s >= (1 << 26))
            return -1;
        if (!seen[s]) {
            seen[s] = 1;
            w->len[have++] = (uint8_t)n;
        }
    }
    cn_agg_profile_free(scratch);
    free(seen);
    size_t used = 0;
    for (long i = 0; i < RING; i++) {
        double u = (double)(bg_rand(&g) % 1000000) / 1e6;
        long k = (long)((double)w->nstacks * u * u);
        memcpy(w->ring + used, w->refs + (size_t)k * BG_MAXDEPTH, w->len[k] * sizeof(*w->ring));
        w->ring_off[i] = used;
        w->ring_len[i] = w->len[k];
        used += w->len[k];
    }
    return 0;
}

static void workload_free(workload *w)
{
    free(w->refs);
    free(w->len);
    free(w->ring);
    free(w->ring_off);
    free(w->ring_len);
}

/* Adds samples [first, first + count) of a source to p, one call per sample or in
 * batches. Sample i is chain i of the distinct set when from_ring is false (first pass),
 * else entry i mod RING of the stream; its time is base + i. Returns 0 or -1. */
static int feed(const workload *w, cn_agg_profile *p, int32_t th, bool batched, bool from_ring,
                long count, int64_t base)
{
    cn_agg_sample_refs b[1024];
    long bs = w->batch < 1 ? 1 : w->batch > 1024 ? 1024 : w->batch;
    for (long i = 0; i < count;) {
        long m = batched ? (count - i < bs ? count - i : bs) : 1;
        for (long j = 0; j < m; j++, i++) {
            long k = from_ring ? (i & (RING - 1)) : i;
            b[j].leaf_first = from_ring ? w->ring + w->ring_off[k] : w->refs + k * BG_MAXDEPTH;
            b[j].n = from_ring ? w->ring_len[k] : w->len[k];
            b[j].time_ns = base + i;
            b[j].weight = 1;
            b[j].thread = th;
        }
        if (batched) {
            if (cn_agg_add_samples_refs(p, b, (size_t)m) < 0)
                return -1;
            continue;
        }
        int32_t s = cn_agg_stack_from_refs(p, b[0].leaf_first, b[0].n);
        if (s < 0 || cn_agg_add_sample(p, s, b[0].time_ns, 1, th) < 0)
            return -1;
    }
    return 0;
}

/* Runs one mode on a fresh profile and prints its figures. Returns 0 or -1. */
static int run_mode(const workload *w, bool batched, int32_t *stacks_out)
{
    cn_agg_profile *p = profile_with_libs();
    int32_t th = p ? cn_agg_thread(p, 100, 100, "worker") : -1;
    if (th < 0)
        return -1;
    double t0 = bg_now();
    if (feed(w, p, th, batched, false, w->nstacks, 0) < 0)
        return -1;
    double first = bg_now() - t0;
    t0 = bg_now();
    double c0 = bg_cpu();
    if (feed(w, p, th, batched, true, w->nsamples, w->nstacks) < 0)
        return -1;
    double steady = bg_now() - t0, steady_cpu = bg_cpu() - c0;
    const char *mode = batched ? "batched" : "single ";
    printf("%s: profile: %zu stack rows, %zu frames, %zu samples, %.1f MB\n", mode,
           cn_agg_stack_count(p), cn_agg_frame_count(p), cn_agg_sample_count(p),
           (double)cn_agg_profile_memory(p) / 1e6);
    printf("%s: first pass (all chains new):  %8.0f samples/s  (%.1f ms for %ld)\n", mode,
           (double)w->nstacks / first, first * 1e3, w->nstacks);
    printf("%s: steady state (chains known):  %8.0f samples/s  (%.1f ms for %ld)\n", mode,
           (double)w->nsamples / steady, steady * 1e3, w->nsamples);
    printf("%s: steady state per CPU second:  %8.0f samples/s  (%.1f ms of CPU)\n", mode,
           (double)w->nsamples / steady_cpu, steady_cpu * 1e3);
    /* the two modes must agree: the same stack for the same sample */
    for (size_t i = 0; i < (size_t)w->nstacks + RING && i < cn_agg_sample_count(p); i++) {
        int32_t s = cn_agg_sample_stack(p, i);
        if (stacks_out[i] == INT32_MIN)
            stacks_out[i] = s;
        else if (stacks_out[i] != s) {
            fprintf(stderr, "sample %zu: stack %d in one mode, %d in the other\n", i, stacks_out[i],
                    s);
            return -1;
        }
    }
    cn_agg_profile_free(p);
    return 0;
}

int main(void)
{
    workload w = {.nstacks = env_long("BENCH_STACKS", 100000),
                  .nsamples = env_long("BENCH_SAMPLES", 10000000),
                  .batch = env_long("BENCH_BATCH", 64)};
    const char *mode = getenv("BENCH_MODE");
    if (w.nstacks < 1 || w.nsamples < 0 || workload_init(&w) < 0) {
        fprintf(stderr, "bench_ingest: setup failed\n");
        return 1;
    }
    double frames = 0;
    for (long k = 0; k < w.nstacks; k++)
        frames += w.len[k];
    printf("chains: %ld distinct, %.1f frames on average; batch size %ld\n", w.nstacks,
           frames / (double)w.nstacks, w.batch);
    size_t ncheck = (size_t)w.nstacks + RING;
    int32_t *stacks = malloc(ncheck * sizeof(*stacks));
    if (!stacks)
        return 1;
    for (size_t i = 0; i < ncheck; i++)
        stacks[i] = INT32_MIN;
    int rc = 0;
    if (!mode || !strcmp(mode, "single"))
        rc |= run_mode(&w, false, stacks);
    if (!mode || !strcmp(mode, "batched"))
        rc |= run_mode(&w, true, stacks);
    free(stacks);
    workload_free(&w);
    if (rc)
        fprintf(stderr, "bench_ingest: a run failed\n");
    return rc ? 1 : 0;
}
