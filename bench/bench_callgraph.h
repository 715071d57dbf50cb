/* bench_callgraph.h — the synthetic workload of bench_tree and bench_ingest.
 *
 * A call graph of NFUNC functions spread over NLIB libraries. Function f calls 1–3
 * random functions (so recursion happens) from 1–6 call sites (site s calls callee
 * s mod ncallees: a function often calls the same callee from several places, as loops
 * and branches do); a call site is a return address inside f (f's base + 16·site + 5).
 * A stack is a random walk from function 0 ("main"): at each step the walk takes call
 * site 0 with probability HOT_P (the usual path) and another site otherwise, until its
 * target depth (uniform in [min, max]) is reached; the leaf is an instruction pointer
 * inside the last function (one of LEAF_IPS offsets, as samples land anywhere in a hot
 * loop). The hot-site bias gives real profiles' shape: long shared prefixes, stacks
 * diverging at a few points, and many distinct frame stacks that are the same call path
 * at the function level (other return addresses, other leaf IPs). Each stack is stored
 * leaf first, as an unwinder produces it.
 * Deterministic (a fixed-seed LCG).
 */
#ifndef BENCH_CALLGRAPH_H
#define BENCH_CALLGRAPH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cn_agg.h"

#define BG_NFUNC    20000
#define BG_NLIB     16
#define BG_HOT_P    0.90
#define BG_LEAF_IPS 32
#define BG_MAXDEPTH 64

typedef struct bg_graph {
    int32_t nsites[BG_NFUNC];
    int32_t target[BG_NFUNC][6];
    uint64_t base[BG_NFUNC];
    int32_t lib[BG_NFUNC];
    uint64_t rng;
} bg_graph;

static inline uint64_t bg_rand(bg_graph *g)
{
    g->rng = g->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return g->rng >> 17;
}

static inline double bg_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* This thread's CPU time: on a shared machine it measures the work, not the waiting. */
static inline double bg_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void bg_graph_init(bg_graph *g, uint64_t seed)
{
    g->rng = seed;
    for (int f = 0; f < BG_NFUNC; f++) {
        g->nsites[f] = 1 + (int32_t)(bg_rand(g) % 6);
        int32_t callee[3], ncallee = 1 + (int32_t)(bg_rand(g) % 3);
        for (int c = 0; c < ncallee; c++)
            callee[c] = (int32_t)(bg_rand(g) % BG_NFUNC);
        for (int s = 0; s < g->nsites[f]; s++)
            g->target[f][s] = callee[s % ncallee];
        g->lib[f] = f % BG_NLIB;
        g->base[f] = 0x1000 + (uint64_t)(f / BG_NLIB) * 0x200;
    }
}

/* One walk of depth in [dmin, dmax], leaf first into refs (lib ids mapped through res).
 * Returns the depth. */
static inline size_t bg_walk(bg_graph *g, const int32_t *res, int dmin, int dmax,
                             cn_agg_frame_ref *refs)
{
    int depth = dmin + (int)(bg_rand(g) % (uint64_t)(dmax - dmin + 1));
    cn_agg_frame_ref tmp[BG_MAXDEPTH];
    int32_t f = 0;
    for (int d = 0; d < depth - 1; d++) {
        int s = 0;
        if ((double)(bg_rand(g) % 10000) >= BG_HOT_P * 10000 && g->nsites[f] > 1)
            s = 1 + (int)(bg_rand(g) % (uint64_t)(g->nsites[f] - 1));
        tmp[d] = (cn_agg_frame_ref){res[g->lib[f]], g->base[f] + 16 * (uint64_t)s + 5};
        f = g->target[f][s];
    }
    tmp[depth - 1] =
        (cn_agg_frame_ref){res[g->lib[f]], g->base[f] + 1 + 4 * (bg_rand(g) % BG_LEAF_IPS)};
    for (int d = 0; d < depth; d++)
        refs[d] = tmp[depth - 1 - d];
    return (size_t)depth;
}

/* The same walk as frames of known funcs (already symbolized: fnN, one frame per call
 * site or leaf IP), root first, through a per-(func, site) frame cache. Returns depth. */
typedef struct bg_frames {
    int32_t site[BG_NFUNC][6];
    int32_t leaf[BG_NFUNC][BG_LEAF_IPS];
    int32_t func[BG_NFUNC];
} bg_frames;

static inline int32_t bg_frame(cn_agg_profile *p, bg_frames *fc, const int32_t *res, int32_t *slot,
                               int32_t f, uint64_t off)
{
    if (*slot >= 0)
        return *slot;
    if (fc->func[f] < 0) {
        char name[16];
        snprintf(name, sizeof(name), "fn%d", f);
        fc->func[f] = cn_agg_func(p, name, res[f % BG_NLIB], NULL, 0);
    }
    *slot = cn_agg_frame(p, fc->func[f], res[f % BG_NLIB], (int64_t)off, (int32_t)(off & 0xff));
    return *slot;
}

static inline size_t bg_walk_frames(bg_graph *g, cn_agg_profile *p, bg_frames *fc,
                                    const int32_t *res, int dmin, int dmax, int32_t *frames)
{
    int depth = dmin + (int)(bg_rand(g) % (uint64_t)(dmax - dmin + 1));
    int32_t f = 0;
    for (int d = 0; d < depth - 1; d++) {
        int s = 0;
        if ((double)(bg_rand(g) % 10000) >= BG_HOT_P * 10000 && g->nsites[f] > 1)
            s = 1 + (int)(bg_rand(g) % (uint64_t)(g->nsites[f] - 1));
        frames[d] = bg_frame(p, fc, res, &fc->site[f][s], f, g->base[f] + 16 * (uint64_t)s + 5);
        f = g->target[f][s];
    }
    int ip = (int)(bg_rand(g) % BG_LEAF_IPS);
    frames[depth - 1] =
        bg_frame(p, fc, res, &fc->leaf[f][ip], f, g->base[f] + 1 + 4 * (uint64_t)ip);
    return (size_t)depth;
}

/* bench_tree's session, shared with canopyd-test's CANOPYD_TEST_SEED hook (the live
 * session of bench/web_speed.sh): into p, nstacks distinct symbolized stacks of depth
 * 8-40 (fnN in libN.so, seed 42) and nsamples samples over them with a quadratic skew,
 * alternating between threads th[0] and th[1], sample i at time t0 + i * step. The first
 * two funcs of the hot path go to hot[0] (main's first callee's callee) and hot[1] (main's
 * first callee). Returns the distinct stacks made, or -1 (out of memory). */
static inline long bg_fill_profile(cn_agg_profile *p, long nstacks, long nsamples,
                                   const int32_t th[2], int64_t t0, int64_t step, int32_t hot[2])
{
    bg_graph *g = malloc(sizeof(*g));
    bg_frames *fc = malloc(sizeof(*fc));
    int32_t *stacks = malloc((size_t)(nstacks > 0 ? nstacks : 1) * sizeof(*stacks));
    long made = -1;
    if (!g || !fc || !stacks)
        goto out;
    bg_graph_init(g, 42);
    memset(fc, 0xff, sizeof(*fc));
    int32_t res[BG_NLIB];
    for (int i = 0; i < BG_NLIB; i++) {
        char name[32];
        snprintf(name, sizeof(name), "lib%d.so", i);
        res[i] = cn_agg_resource(p, name, NULL, NULL, CN_AGG_RES_LIBRARY);
    }
    int32_t frames[BG_MAXDEPTH];
    made = 0;
    for (long tries = 0; made < nstacks && tries < nstacks * 4; tries++) {
        size_t before = cn_agg_stack_count(p);
        size_t d = bg_walk_frames(g, p, fc, res, 8, 40, frames);
        int32_t s = cn_agg_stack_from_frames(p, frames, d);
        if (s >= 0 && cn_agg_stack_count(p) > before)
            stacks[made++] = s;
    }
    for (long i = 0; made > 0 && i < nsamples; i++) {
        double u = (double)(bg_rand(g) % 1000000) / 1e6;
        if (cn_agg_add_sample(p, stacks[(long)((double)made * u * u)], t0 + i * step, 1.0,
                              th[i & 1]) < 0) {
            made = -1;
            goto out;
        }
    }
    if (hot) {
        hot[1] = g->target[0][0];
        hot[0] = g->target[hot[1]][0];
    }
out:
    free(stacks);
    free(fc);
    free(g);
    return made;
}

#endif /* BENCH_CALLGRAPH_H */
