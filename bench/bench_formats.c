/* bench_formats.c — export speed of pprof, speedscope, SVG and OTLP (docs/perf-formats.md).
 *
 * Builds a synthetic profile of N samples over S distinct native stacks (depth 8..40,
 * 64 functions per library over 4 libraries, 4 threads, ns weights), then times
 * pprof (raw path: untransformed, per-frame locations), pprof after a transform (tree
 * path), SVG, speedscope and OTLP (both paths) export into memory. Usage: bench_formats [N [S]]
 * (default 1000000 samples, 100000 stacks) [FORMAT-PREFIX]. Prints one line per format.
 * With BENCH_FORMATS_DUMP=DIR set, each output is also written to DIR (to compare the
 * output of two versions of an exporter). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cn_agg.h"
#include "cn_fmt.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static cn_agg_profile *make_profile(size_t n_samples, size_t n_stacks)
{
    cn_agg_profile *p = cn_agg_profile_new();
    if (!p)
        return NULL;
    cn_agg_profile_set_unit(p, CN_AGG_UNIT_NS);
    int32_t res[4], thr[4];
    const char *libs[4] = {"app", "libc.so.6", "libm.so.6", "[kernel]"};
    for (int i = 0; i < 4; i++) {
        res[i] = cn_agg_resource(p, libs[i], NULL, NULL,
                                 i == 3 ? CN_AGG_RES_KERNEL : CN_AGG_RES_LIBRARY);
        thr[i] = cn_agg_thread(p, 100, 100 + i, "worker");
    }
    /* functions are symbolized frames: func "fL_K" at offset K*0x40 + small jitter */
    int32_t funcs[4][64];
    char name[32];
    for (int l = 0; l < 4; l++)
        for (int k = 0; k < 64; k++) {
            snprintf(name, sizeof(name), "f%d_%d", l, k);
            funcs[l][k] = cn_agg_func(p, name, res[l], NULL, 0);
        }
    int32_t *leaves = malloc(n_stacks * sizeof(*leaves));
    int32_t path[64];
    uint64_t s = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < n_stacks; i++) {
        size_t depth = 8 + rng(&s) % 33;
        for (size_t d = 0; d < depth; d++) {
            int l = d < 4 ? 0 : (int)(rng(&s) % 4);
            int k = d < 4 ? (int)d : (int)(rng(&s) % 64);
            int64_t addr = k * 0x40 + (int64_t)(rng(&s) % 4);
            path[d] = cn_agg_frame(p, funcs[l][k], res[l], addr, 0);
        }
        leaves[i] = cn_agg_stack_from_frames(p, path, depth);
    }
    for (size_t i = 0; i < n_samples; i++)
        cn_agg_add_sample(p, leaves[rng(&s) % n_stacks], (int64_t)i * 1000, 1000000, thr[i % 4]);
    free(leaves);
    return p;
}

typedef int (*writer_fn)(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *e);

static int svg_writer(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *e)
{
    return cn_fmt_write_svg(p, q, NULL, out, e);
}

static const char *only;     /* argv[3]: only formats whose label starts with it */
static const char *dump_dir; /* $BENCH_FORMATS_DUMP: also write each output there */

/* Writes an output to dump_dir/<label with spaces as '_'>, for comparing runs. */
static void dump(const char *what, const char *buf, size_t len)
{
    char path[512];
    int n = snprintf(path, sizeof(path), "%s/", dump_dir);
    for (const char *c = what; *c && n < (int)sizeof(path) - 1; c++)
        path[n++] = strchr(" ():", *c) ? '_' : *c;
    path[n] = 0;
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len)
        fprintf(stderr, "bench_formats: cannot write %s\n", path);
    if (f)
        fclose(f);
}

static int otlp_writer(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *err)
{
    return cn_fmt_write_otlp(p, q, NULL, out, err);
}

static void run(const char *what, writer_fn fn, cn_agg_profile *p, const cn_agg_query *q)
{
    if (only && strncmp(what, only, strlen(only)) != 0)
        return;
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    cn_err err = {0};
    double t0 = now();
    int rc = fn(p, q, out, &err);
    fclose(out);
    double t = now() - t0;
    printf("%-28s %8.3f s  %10zu bytes%s%s\n", what, t, len, rc < 0 ? "  ERROR: " : "",
           rc < 0 ? err.msg : "");
    if (dump_dir && rc >= 0)
        dump(what, buf, len);
    free(buf);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    size_t stacks = argc > 2 ? strtoull(argv[2], NULL, 10) : 100000;
    only = argc > 3 ? argv[3] : NULL;
    dump_dir = getenv("BENCH_FORMATS_DUMP");
    double t0 = now();
    cn_agg_profile *p = make_profile(n, stacks);
    if (!p)
        return 1;
    printf("profile: %zu samples, %zu stacks, %zu frames (built in %.2f s)\n",
           cn_agg_sample_count(p), cn_agg_stack_count(p), cn_agg_frame_count(p), now() - t0);
    cn_agg_query q;
    cn_agg_query_init(&q);
    run("pprof (untransformed)", cn_fmt_write_pprof, p, &q);
    run("svg", svg_writer, p, &q);
    run("speedscope (untransformed)", cn_fmt_write_speedscope, p, &q);
    run("otlp (untransformed)", otlp_writer, p, &q);
    cn_agg_transform t;
    cn_err err = {0};
    if (cn_agg_transform_parse("merge:f0_1", &t, &err) == 0) {
        q.transforms = &t;
        q.n_transforms = 1;
        run("pprof (merge:f0_1)", cn_fmt_write_pprof, p, &q);
        run("svg (merge:f0_1)", svg_writer, p, &q);
        run("otlp (merge:f0_1)", otlp_writer, p, &q);
        cn_agg_transform_clear(&t);
    }
    cn_agg_profile_free(p);
    return 0;
}
