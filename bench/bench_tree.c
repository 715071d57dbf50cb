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
 * BENCH_REPS (default 5; median and minimum of thread CPU and wall time: CPU time is what
 * compares across runs on a shared machine). BENCH_SKIP_COLD=1 skips the cold builds,
 * BENCH_TREE_ONLY=1 stops after the tree, BENCH_VIEWS=0 skips the views, BENCH_TRANSFORM=PREFIX
 * runs only the transforms whose spec starts with PREFIX. Build in Release: cmake
 * -DCMAKE_BUILD_TYPE=Release -DCANOPY_SANITIZE=OFF.
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

/* One query's figures over reps runs: medians and minima of wall and thread CPU time.
 * CPU time is what compares across runs on a shared machine; wall time includes waiting
 * for the CPU when other processes run. */
typedef struct timing {
    double wall_med, wall_min, cpu_med, cpu_min;
} timing;

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), dbl_cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define MAX_REPS 64

static timing run_query_with(cn_agg_profile *p, struct cn_agg__qcache **cache,
                             const cn_agg_query *q, int reps, size_t *nodes)
{
    double wall[MAX_REPS], cpu[MAX_REPS];
    if (reps > MAX_REPS)
        reps = MAX_REPS;
    for (int i = 0; i < reps; i++) {
        cn_agg_tree *t = NULL;
        cn_err err;
        double t0 = bg_now(), c0 = bg_cpu();
        if (cn_agg__query_run_cached(p, cache, q, &t, &err) < 0) {
            fprintf(stderr, "query failed: %s\n", err.msg);
            exit(1);
        }
        cpu[i] = bg_cpu() - c0;
        wall[i] = bg_now() - t0;
        *nodes = t->view == CN_AGG_VIEW_FUNCTIONS ? t->n_functions : t->n_nodes;
        cn_agg_tree_free(t);
    }
    timing r;
    r.wall_med = median(wall, reps);
    r.wall_min = wall[0];
    r.cpu_med = median(cpu, reps);
    r.cpu_min = cpu[0];
    return r;
}

static timing run_query(cn_agg_profile *p, const cn_agg_query *q, int reps, size_t *nodes)
{
    return run_query_with(p, &g_cache, q, reps, nodes);
}

/* "label  cpu med (min)  wall med (min)" */
static void print_timing(const char *label, timing t)
{
    printf("%-28s cpu %7.1f (%7.1f) wall %7.1f (%7.1f) ms", label, t.cpu_med * 1e3, t.cpu_min * 1e3,
           t.wall_med * 1e3, t.wall_min * 1e3);
}

static double loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

int main(void)
{
    long nstacks = env_long("BENCH_STACKS", 1000000);
    long nsamples = env_long("BENCH_SAMPLES", 10000000);
    int reps = (int)env_long("BENCH_REPS", 5);
    if (reps < 1)
        reps = 1;
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
    printf("times: median (min) of %d runs, thread CPU and wall; load average %.2f\n", reps,
           loadavg());
    if (!getenv("BENCH_SKIP_COLD")) {
        timing cold = run_query_with(p, NULL, &q, reps, &nodes);
        print_timing("tree, cold", cold);
        printf("  (%zu nodes; no query cache: base table built)\n", nodes);
    }
    double t0c = bg_now(), c0c = bg_cpu();
    run_query(p, &q, 1, &nodes);
    printf("%-28s cpu %7.1f wall %7.1f ms  (first query fills the cache)\n",
           "tree, filling the cache", (bg_cpu() - c0c) * 1e3, (bg_now() - t0c) * 1e3);
    timing tree = run_query(p, &q, reps, &nodes);
    print_timing("tree", tree);
    printf("  (%zu nodes)\n", nodes);
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
    size_t nviews = sizeof(views) / sizeof(*views);
    if (getenv("BENCH_VIEWS") && atoi(getenv("BENCH_VIEWS")) == 0)
        nviews = 0;
    for (size_t i = 0; i < nviews; i++) {
        cn_agg_query_init(&q);
        q.view = views[i].view;
        q.view_func = views[i].func;
        q.callers_mode = views[i].mode;
        timing dt = run_query(p, &q, reps, &nodes);
        print_timing(views[i].label, dt);
        printf("  (%zu nodes)\n", nodes);
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
    int worst_spec = -1;
    for (int i = 0; i < ns; i++) {
        const char *only = getenv("BENCH_TRANSFORM");
        if (only && strcmp(only, specs[i]) != 0 && strncmp(specs[i], only, strlen(only)) != 0)
            continue;
        cn_agg_transform tf;
        cn_err err;
        if (cn_agg_transform_parse(specs[i], &tf, &err) < 0) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        cn_agg_query_init(&q);
        q.transforms = &tf;
        q.n_transforms = 1;
        timing dt = run_query(p, &q, reps, &nodes);
        char label[40];
        snprintf(label, sizeof(label), "%.27s", specs[i]);
        print_timing(label, dt);
        double extra = dt.cpu_med - tree.cpu_med;
        printf("  (%zu nodes; extra cpu %+.1f ms)\n", nodes, extra * 1e3);
        if (extra > worst) {
            worst = extra;
            worst_spec = i;
        }
        cn_agg_transform_clear(&tf);
    }
    printf("slowest transform (%s) costs %.1f ms CPU on top of the %.1f ms CPU tree build; "
           "load average %.2f\n",
           worst_spec >= 0 ? specs[worst_spec] : "none", worst * 1e3, tree.cpu_med * 1e3,
           loadavg());
done:
    free(full);
    free(seen);
    cn_agg__qcache_free(g_cache);
    cn_agg_profile_free(p);
    return 0;
}
