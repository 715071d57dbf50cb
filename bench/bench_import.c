/* bench_import.c — import speed and peak memory of a large `.cpuprofile`.
 *
 * Generates a V8-shaped profile of about SIZE_MB megabytes in /tmp (a random call tree
 * of 20 000 nodes with script URLs and positions, then samples and timeDeltas at ~1 ms
 * as `node --cpu-prof` writes them, hit counts consistent with the samples), then times
 * cn_fmt_import_file() on it and a plain query, and reports the peak RSS of the process
 * (getrusage) against the file size. The generator streams with a seeded PRNG (run twice:
 * once to count hits, once to write), so it adds almost nothing to the peak.
 * Usage: bench_import [SIZE_MB (default 100)] [--keep]
 * Target: 100 MB in <= 2 s, peak RSS <= 3x the file size (Release build).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cn_agg.h"
#include "cn_fmt.h"

#define NODES 20000

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A sample's leaf node: skewed towards a few hot nodes, like real profiles. */
static int pick_node(uint64_t *s)
{
    uint64_t r = rng_next(s);
    if (r % 4 == 0)
        return 2 + (int)((r >> 8) % 64);
    return 2 + (int)((r >> 8) % (NODES - 1));
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Writes the profile; returns the number of samples or -1. */
static long generate(const char *path, double size_mb)
{
    static int parent[NODES + 1], hits[NODES + 1], nkids[NODES + 1], kid_off[NODES + 2];
    static int kids[NODES];
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    for (int i = 2; i <= NODES; i++) {
        parent[i] = 1 + (int)(rng_next(&seed) % (uint64_t)(i - 1));
        nkids[parent[i]]++;
    }
    for (int i = 1; i <= NODES; i++)
        kid_off[i + 1] = kid_off[i] + nkids[i];
    memset(nkids, 0, sizeof(nkids));
    for (int i = 2; i <= NODES; i++)
        kids[kid_off[parent[i]] + nkids[parent[i]]++] = i;
    /* ~9.5 bytes per sample (id and delta with commas) once the nodes are written */
    long n_samples = (long)((size_mb * 1e6 - NODES * 190.0) / 9.5);
    uint64_t s = 42;
    for (long k = 0; k < n_samples; k++)
        hits[pick_node(&s)]++;

    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof(buf));
    fputs("{\"nodes\":[", f);
    for (int i = 1; i <= NODES; i++) {
        if (i == 1)
            fputs("{\"id\":1,\"callFrame\":{\"functionName\":\"(root)\",\"scriptId\":\"0\","
                  "\"url\":\"\",\"lineNumber\":-1,\"columnNumber\":-1},\"hitCount\":0",
                  f);
        else
            fprintf(f,
                    ",{\"id\":%d,\"callFrame\":{\"functionName\":\"fn_%d\",\"scriptId\":\"%d\","
                    "\"url\":\"file:///srv/app/src/module_%d.js\",\"lineNumber\":%d,"
                    "\"columnNumber\":%d},\"hitCount\":%d",
                    i, i % 5000, 10 + i % 300, i % 300, i % 2000, i % 80, hits[i]);
        if (nkids[i]) {
            fputs(",\"children\":[", f);
            for (int k = 0; k < nkids[i]; k++)
                fprintf(f, "%s%d", k ? "," : "", kids[kid_off[i] + k]);
            fputc(']', f);
        }
        fputc('}', f);
    }
    fputs("],\"startTime\":1000000000,", f);
    uint64_t d = 7;
    int64_t span = 0;
    for (long k = 0; k < n_samples; k++)
        span += 900 + (int64_t)(rng_next(&d) % 400);
    fprintf(f, "\"endTime\":%lld,\"samples\":[", (long long)(1000000000 + span + 1000));
    s = 42;
    for (long k = 0; k < n_samples; k++)
        fprintf(f, k ? ",%d" : "%d", pick_node(&s));
    fputs("],\"timeDeltas\":[", f);
    d = 7;
    for (long k = 0; k < n_samples; k++)
        fprintf(f, k ? ",%d" : "%d", 900 + (int)(rng_next(&d) % 400));
    fputs("]}", f);
    return fclose(f) == 0 ? n_samples : -1;
}

int main(int argc, char **argv)
{
    double size_mb = argc > 1 && argv[1][0] != '-' ? atof(argv[1]) : 100.0;
    bool keep = argc > 1 && !strcmp(argv[argc - 1], "--keep");
    char path[64];
    snprintf(path, sizeof(path), "/tmp/bench_import_%d.cpuprofile", (int)getpid());
    long n = generate(path, size_mb);
    if (n < 0) {
        perror(path);
        return 1;
    }
    struct stat st;
    stat(path, &st);
    long rss_before = max_rss_kb();

    cn_agg_profile *p = NULL;
    cn_err err;
    double c0 = cpu_seconds(), t0 = now();
    int rc = cn_fmt_import_file(path, &p, &err);
    double t1 = now(), c1 = cpu_seconds();
    long rss_after = max_rss_kb();
    if (rc) {
        fprintf(stderr, "import failed: %s\n", err.msg);
        unlink(path);
        return 1;
    }
    cn_agg_query q;
    cn_agg_tree *t = NULL;
    cn_agg_query_init(&q);
    double t2 = now();
    rc = cn_agg_query_run(p, &q, &t, &err);
    double t3 = now();
    if (rc)
        fprintf(stderr, "query failed: %s\n", err.msg);

    double mb = (double)st.st_size / 1e6;
    printf("file:        %s, %.1f MB, %ld samples, %d nodes\n", path, mb, n, NODES);
    printf("import:      %.3f s (%.0f MB/s, %.1f M samples/s)\n", t1 - t0, mb / (t1 - t0),
           (double)n / 1e6 / (t1 - t0));
    printf("import CPU:  %.3f s user+sys (wall time includes waiting when the machine is "
           "loaded)\n",
           c1 - c0);
    printf("query:       %.3f s (tree of %zu nodes)\n", t3 - t2, t ? t->n_nodes : 0);
    printf("peak RSS:    %.1f MB after import (%.1f MB before) = %.2fx the file size\n",
           (double)rss_after / 1024.0, (double)rss_before / 1024.0,
           (double)rss_after * 1024.0 / (double)st.st_size);
    printf("profile:     %.1f MB of tables\n", (double)cn_agg_profile_memory(p) / 1e6);
    cn_agg_tree_free(t);
    cn_agg_profile_free(p);
    if (!keep)
        unlink(path);
    return 0;
}
