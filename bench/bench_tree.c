/* bench_tree.c — call-tree build and transforms over a large profile.
 *
 * Workload (bench_callgraph.h): 1,000,000 distinct full stacks 30–60 frames deep, random
 * walks down a 20,000-function call graph over 16 libraries, symbolized (frames grouped
 * into functions: frames are created as frames of known funcs, as an importer does);
 * 10,000,000 samples drawn from them with a skew (stack index = N·u²).
 * Measures queries for the plain tree (cold: building the func-level base table; warm:
 * with the profile's query cache holding it, as a live session's repeated queries do),
 * each view, and each transform (query = transform + tree, warm). Target: tree ≤ 200 ms, each
 * transform no slower than a tree build. Sizes: BENCH_STACKS, BENCH_SAMPLES; repetitions:
 * BENCH_REPS (best of). Build in Release: cmake -DCMAKE_BUILD_TYPE=Release -DCANOPY_SANITIZE=OFF.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_internal.h"
#include "bench_callgraph.h"

static long env_long(const char *name, long def)
{
    const char *s = getenv(name);
    return s && *s ? atol(s) : def;
}

/* The profile's query cache (agg_internal.h); NULL runs measure cold builds. */
static struct cn_agg__qcache *g_cache;

static double run_query_with(cn_agg_profile *p, struct cn_agg__qcache **cache,
                             const cn_agg_query *q, int reps, size_t *nodes)
{
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        cn_agg_tree *t = NULL;
        cn_agg_err err;
        double t0 = bg_now();
        if (cn_agg__query_run_cached(p, cache, q, &t, &err) < 0) {
            fprintf(stderr, "query failed: %s\n", err.msg);
            exit(1);
        }
        double dt = bg_now() - t0;
        if (dt < best)
            best = dt;
        *nodes = t->view == CN_AGG_VIEW_FUNCTIONS ? t->n_functions : t->n_nodes;
        cn_agg_tree_free(t);
    }
    return best;
}

static double run_query(cn_agg_profile *p, const cn_agg_query *q, int reps, size_t *nodes)
{
    return run_query_with(p, &g_cache, q, reps, nodes);
}

int main(void)
{
    long nstacks = env_long("BENCH_STACKS", 1000000);
    long nsamples = env_long("BENCH_SAMPLES", 10000000);
    int reps = (int)env_long("BENCH_REPS", 3);
    static bg_graph g;
    bg_graph_init(&g, 42);
    cn_agg_profile *p = cn_agg_profile_new();
    int32_t res[BG_NLIB];
    for (int i = 0; i < BG_NLIB; i++) {
        char name[32];
        snprintf(name, sizeof(name), "lib%d.so", i);
        res[i] = cn_agg_resource(p, name, NULL, NULL, CN_AGG_RES_LIBRARY);
    }
    int32_t th[4];
    for (int i = 0; i < 4; i++)
        th[i] = cn_agg_thread(p, 100, 100 + i, "worker");

    double t0 = bg_now();
    int32_t *full = malloc((size_t)nstacks * sizeof(*full));
    uint8_t *seen = NULL;
    size_t seen_cap = 0;
    long have = 0;
    static bg_frames fc;
    memset(&fc, 0xff, sizeof(fc));
    int32_t frames[BG_MAXDEPTH];
    while (have < nstacks) {
        size_t n = bg_walk_frames(&g, p, &fc, res, 30, 60, frames);
        int32_t s = cn_agg_stack_from_frames(p, frames, n);
        if (s < 0)
            return 1;
        if ((size_t)s >= seen_cap) {
            size_t nc = seen_cap ? seen_cap * 2 : 1 << 20;
            while (nc <= (size_t)s)
                nc *= 2;
            seen = realloc(seen, nc);
            memset(seen + seen_cap, 0, nc - seen_cap);
            seen_cap = nc;
        }
        if (!seen[s]) {
            seen[s] = 1;
            full[have++] = s;
        }
    }
    for (long i = 0; i < nsamples; i++) {
        double u = (double)(bg_rand(&g) % 1000000) / 1e6;
        long k = (long)((double)nstacks * u * u);
        cn_agg_add_sample(p, full[k], i * 1000, 1, th[i & 3]);
    }
    double gen = bg_now() - t0;
    printf("profile: %ld samples, %ld distinct full stacks, %zu stack rows, %zu frames, "
           "%zu funcs (generated in %.1f s)\n",
           nsamples, nstacks, cn_agg_stack_count(p), cn_agg_frame_count(p), cn_agg_func_count(p),
           gen);

    /* Arguments: functions on the hot path main -> site 0 -> ... */
    char hot[8][16], path3[64], path6[128], inv[64];
    int32_t f = 0;
    for (int d = 0; d < 8; d++) {
        snprintf(hot[d], sizeof(hot[d]), "fn%d", f);
        f = g.target[f][0];
    }
    snprintf(path3, sizeof(path3), "%s;%s;%s", hot[0], hot[1], hot[2]);
    snprintf(path6, sizeof(path6), "%s;%s;%s;%s;%s;%s", hot[0], hot[1], hot[2], hot[3], hot[4],
             hot[5]);
    snprintf(inv, sizeof(inv), "%s", hot[7]);

    cn_agg_query q;
    cn_agg_query_init(&q);
    size_t nodes = 0;
    double cold = run_query_with(p, NULL, &q, reps, &nodes);
    printf("%-28s %8.1f ms  (%zu nodes; no query cache: base table built)\n", "tree, cold",
           cold * 1e3, nodes);
    double t0c = bg_now();
    run_query(p, &q, 1, &nodes);
    printf("%-28s %8.1f ms  (first query fills the cache)\n", "tree, filling the cache",
           (bg_now() - t0c) * 1e3);
    double tree = run_query(p, &q, reps, &nodes);
    printf("%-28s %8.1f ms  (%zu nodes)\n", "tree", tree * 1e3, nodes);
    if (getenv("BENCH_TREE_ONLY"))
        goto done;

    struct {
        const char *label;
        cn_agg_view view;
        const char *func;
        cn_agg_callers_mode mode;
    } views[] = {
        {"view inverted", CN_AGG_VIEW_INVERTED, NULL, 0},
        {"view functions", CN_AGG_VIEW_FUNCTIONS, NULL, 0},
        {"view callees F", CN_AGG_VIEW_CALLEES, hot[5], 0},
        {"view callers F (total)", CN_AGG_VIEW_CALLERS, hot[5], CN_AGG_CALLERS_TOTAL},
        {"view callers F (self)", CN_AGG_VIEW_CALLERS, hot[5], CN_AGG_CALLERS_SELF},
    };
    for (size_t i = 0; i < sizeof(views) / sizeof(*views); i++) {
        cn_agg_query_init(&q);
        q.view = views[i].view;
        q.view_func = views[i].func;
        q.callers_mode = views[i].mode;
        double dt = run_query(p, &q, reps, &nodes);
        printf("%-28s %8.1f ms  (%zu nodes)\n", views[i].label, dt * 1e3, nodes);
    }

    char specs[16][160];
    int ns = 0;
    snprintf(specs[ns++], 160, "focus:%s", path6);
    snprintf(specs[ns++], 160, "focus-inverted:%s", inv);
    snprintf(specs[ns++], 160, "focus-func:%s", hot[5]);
    snprintf(specs[ns++], 160, "focus-self:%s", hot[5]);
    snprintf(specs[ns++], 160, "focus-lib:lib3.so");
    snprintf(specs[ns++], 160, "merge-node:%s", path3);
    snprintf(specs[ns++], 160, "merge:%s", hot[3]);
    snprintf(specs[ns++], 160, "drop:%s", hot[6]);
    snprintf(specs[ns++], 160, "hide:%s", path6);
    snprintf(specs[ns++], 160, "prune:%s", path3);
    snprintf(specs[ns++], 160, "collapse:%s", hot[4]);
    snprintf(specs[ns++], 160, "collapse-direct-rec:%s", hot[2]);
    snprintf(specs[ns++], 160, "collapse-rec:%s", hot[2]);
    snprintf(specs[ns++], 160, "collapse-lib:lib3.so");
    snprintf(specs[ns++], 160, "collapse-all-rec");
    double worst = 0;
    for (int i = 0; i < ns; i++) {
        cn_agg_transform tf;
        cn_agg_err err;
        if (cn_agg_transform_parse(specs[i], &tf, &err) < 0) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        cn_agg_query_init(&q);
        q.transforms = &tf;
        q.n_transforms = 1;
        double dt = run_query(p, &q, reps, &nodes);
        char label[40];
        snprintf(label, sizeof(label), "%.27s", specs[i]);
        printf("%-28s %8.1f ms  (%zu nodes; transform ≈ %.1f ms over the tree)\n", label, dt * 1e3,
               nodes, (dt - tree) * 1e3);
        if (dt - tree > worst)
            worst = dt - tree;
        cn_agg_transform_clear(&tf);
    }
    printf("slowest transform costs %.1f ms on top of the %.1f ms tree build\n", worst * 1e3,
           tree * 1e3);
done:
    free(full);
    free(seen);
    cn_agg__qcache_free(g_cache);
    cn_agg_profile_free(p);
    return 0;
}
