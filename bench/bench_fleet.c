/* bench_fleet.c — a simulated fleet through the real push path (docs/perf-fleet.md).
 *
 * HOSTS hosts × MINUTES of samples at 99 Hz × 8 threads: the fleet runs the same
 * binaries, so its call stacks come from one pool (POOL = 4 × STACKS paths of 8–28 frames
 * through a call graph of 3000 functions in 24 libraries); each host samples its own
 * STACKS of them (a random subset), drawn with a Zipf-like skew in a host-specific order
 * (a few hot stacks, a long tail). Every
 * fleet interval, a host's new samples are appended to its profile and collected into a
 * batch by cn_fleet_collect (the daemon's per-interval work, timed as thread CPU), and the
 * batch goes to one cn_fleet_pusher (spool, gzip, HTTP to ClickHouse).
 *   bench_fleet URL SPOOL_DIR [HOSTS [MINUTES [INTERVAL_S [STACKS]]]]
 * Prints: samples, rows, collect CPU per interval, insert throughput. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cn_fleet.h"

#define THREADS 8
#define HZ      99
#define FUNCS   3000
#define LIBS    24

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double now_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The fleet's pool of stacks: each a depth and the seed of its path through the call
 * graph (function f calls one of its 6 callees f*7+k mod FUNCS). */
typedef struct pooled {
    int depth;
    uint64_t seed;
} pooled;

/* A host's stacks as stack ids of its profile: n_stacks of the pool, chosen at random. */
static int32_t *host_stacks(cn_agg_profile *p, const pooled *pool, int n_pool, int n_stacks)
{
    int32_t *stacks = malloc((size_t)n_stacks * sizeof(*stacks)), frames[32];
    int32_t fid[FUNCS];
    for (int f = 0; f < FUNCS; f++) {
        char name[64], lib[32];
        snprintf(name, sizeof(name), "ns%d::Class%d::method_%d", f % 40, f % 300, f);
        snprintf(lib, sizeof(lib), "lib%d.so", f % LIBS);
        int32_t res = cn_agg_resource(p, lib, NULL, NULL, CN_AGG_RES_LIBRARY);
        fid[f] = cn_agg_frame(p, cn_agg_func(p, name, res, NULL, 0), res, -1, 0);
    }
    for (int s = 0; s < n_stacks; s++) {
        const pooled *ps = &pool[next_rand() % (uint64_t)n_pool];
        uint64_t x = ps->seed;
        int f = (int)(x % 16);
        for (int d = 0; d < ps->depth; d++) {
            frames[d] = fid[f];
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            f = (int)((f * 7 + 1 + (x >> 33) % 6) % FUNCS);
        }
        stacks[s] = cn_agg_stack_from_frames(p, frames, (size_t)ps->depth);
    }
    return stacks;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: bench_fleet URL SPOOL_DIR [HOSTS [MINUTES [INTERVAL_S [STACKS]]]]\n");
        return 2;
    }
    int hosts = argc > 3 ? atoi(argv[3]) : 100, minutes = argc > 4 ? atoi(argv[4]) : 60;
    int interval = argc > 5 ? atoi(argv[5]) : 10, n_stacks = argc > 6 ? atoi(argv[6]) : 6000;
    cn_fleet_pusher *pusher;
    cn_err err = {0};
    cn_fleet_pusher_opts o = {.url = argv[1],
                              .spool_dir = argv[2],
                              .spool_max = (uint64_t)64 << 30,
                              .timeout_ms = 600000};
    if (cn_fleet_pusher_new(&o, &pusher, &err) < 0) {
        fprintf(stderr, "bench_fleet: %s\n", err.msg);
        return 1;
    }
    int n_pool = 4 * n_stacks;
    pooled *pool = malloc((size_t)n_pool * sizeof(*pool));
    for (int i = 0; i < n_pool; i++)
        pool[i] = (pooled){8 + (int)(next_rand() % 21), next_rand()};
    /* Zipf-like weights over a host's stacks: P(i) ∝ 1/(i+1). */
    double *cdf = malloc((size_t)n_stacks * sizeof(*cdf)), sum = 0;
    for (int i = 0; i < n_stacks; i++)
        cdf[i] = (sum += 1.0 / (i + 1));
    int per_interval = HZ * THREADS * interval, intervals = minutes * 60 / interval;
    double t0 = now_s(CLOCK_MONOTONIC), collect_cpu = 0, collect_max = 0;
    uint64_t rows = 0, samples = 0, defs = 0;
    int64_t base = (int64_t)time(NULL) - (int64_t)minutes * 60;
    size_t distinct_max = 0;
    for (int h = 0; h < hosts; h++) {
        char host[32];
        snprintf(host, sizeof(host), "host%03d", h);
        cn_agg_profile *p = cn_agg_profile_new();
        int32_t *stacks = host_stacks(p, pool, n_pool, n_stacks);
        int32_t th[THREADS];
        for (int t = 0; t < THREADS; t++)
            th[t] = cn_agg_thread(p, 1000, 1000 + t, "worker");
        cn_fleet_seen *seen = cn_fleet_seen_new(0);
        cn_fleet_labels labels = {0};
        cn_fleet_labels_parse(&labels, "env=bench,dc=dc1", NULL);
        char *seen_stack = calloc((size_t)n_stacks, 1);
        for (int iv = 0; iv < intervals; iv++) {
            int64_t t_ns = (int64_t)iv * interval * 1000000000LL;
            for (int k = 0; k < per_interval; k++) {
                double u = (double)(next_rand() >> 11) / 9007199254740992.0 * sum;
                int lo = 0, hi = n_stacks - 1;
                while (lo < hi) {
                    int mid = (lo + hi) / 2;
                    if (cdf[mid] < u)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                seen_stack[lo] = 1;
                cn_agg_add_sample(p, stacks[lo],
                                  t_ns + (int64_t)k * 1000000000LL * interval / per_interval, 1,
                                  th[k % THREADS]);
            }
            cn_fleet_batch *b = cn_fleet_batch_new();
            cn_fleet_window w = {t_ns, t_ns + (int64_t)interval * 1000000000LL, true};
            cn_fleet_source src = {base + (int64_t)iv * interval, host, "web", "s1", &labels};
            double c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
            if (cn_fleet_collect(b, p, &w, &src, seen, NULL) < 0) {
                fprintf(stderr, "bench_fleet: collect failed\n");
                return 1;
            }
            double c = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
            collect_cpu += c;
            if (c > collect_max)
                collect_max = c;
            rows += b->sample_rows;
            defs += b->stack_rows;
            samples += b->weight_samples;
            if (b->sample_rows > distinct_max)
                distinct_max = b->sample_rows;
            cn_fleet_pusher_submit(pusher, b);
            /* One pusher takes all hosts' batches: wait rather than overflow its memory
             * queue (a canopyd submits one batch per interval). */
            while (cn_fleet_pusher_backlog(pusher) > 64)
                nanosleep(&(struct timespec){0, 10000000}, NULL);
            /* The daemon's retention folds old samples; here a new profile per hour is
             * not needed: memory stays bounded by dropping old samples. */
            if (iv % 30 == 29)
                cn_agg_fold_before(p, t_ns);
        }
        size_t used = 0;
        for (int i = 0; i < n_stacks; i++)
            used += seen_stack[i];
        if (h == 0) {
            printf("host000: %zu distinct stacks sampled in the hour\n", used);
            fflush(stdout);
        }
        free(seen_stack);
        cn_fleet_labels_clear(&labels);
        cn_fleet_seen_free(seen);
        free(stacks);
        cn_agg_profile_free(p);
    }
    double gen = now_s(CLOCK_MONOTONIC) - t0;
    int r = cn_fleet_pusher_flush(pusher, 3600 * 1000);
    double total = now_s(CLOCK_MONOTONIC) - t0;
    cn_fleet_push_stats st;
    cn_fleet_pusher_stats(pusher, &st);
    printf("hosts %d x %d min, interval %d s: %llu samples, %llu rows, %llu stack rows, "
           "max %zu rows per interval\n",
           hosts, minutes, interval, (unsigned long long)samples, (unsigned long long)rows,
           (unsigned long long)defs, distinct_max);
    printf("collect CPU per interval: mean %.2f ms, max %.2f ms = %.3f%% of one core at a "
           "%d s interval\n",
           collect_cpu * 1e3 / (hosts * intervals), collect_max * 1e3,
           100.0 * collect_cpu / (hosts * intervals) / interval, interval);
    printf("generated in %.1f s; all inserted after %.1f s: %.0f rows/s (%s); sent %llu, "
           "dropped %llu, failures %llu\n",
           gen, total, (double)rows / total, r == 0 ? "flushed" : "NOT flushed",
           (unsigned long long)st.rows_sent, (unsigned long long)st.rows_dropped,
           (unsigned long long)st.failures);
    free(cdf);
    free(pool);
    cn_fleet_pusher_free(pusher);
    return r == 0 && st.rows_dropped == 0 ? 0 : 1;
}
