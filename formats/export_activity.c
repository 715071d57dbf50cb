/* export_activity.c — `--format activity`: weight per time bucket and per thread, the data
 * of an activity graph (canopy web's time-range selection; docs/cli.md "Output formats").
 *
 *   {"unit", "end": S, "bucket": S, "buckets": [W, ...],
 *    "threads": [{"pid", "tid", "name"?, "weight"}, ...]}
 *
 * The buckets cover [0, end) in seconds since the profile's start, where end is just past
 * the last timed sample; they hold the weight (display units) of the samples that pass the
 * query's tid/pid filters and survive its transforms (a search drops samples as in the
 * tree: cn_agg_activity), whatever its time range (the graph shows the whole profile and
 * the range is drawn over it) and view. Rows of the retention accumulator have no time and
 * are counted in no bucket. "threads" lists every thread with timed or untimed samples
 * in the query's time range, whatever its tid/pid filters (a picker must offer the
 * others), heaviest first.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "export_internal.h"
#include "json_out.h"

#define N_BUCKETS 200

typedef struct activity {
    int64_t end_ns;
    double *w; /* N_BUCKETS, or per thread id */
    size_t n;
} activity;

static int last_time(void *ctx, int32_t stack, int32_t thread, int64_t t, double w, int64_t cnt)
{
    activity *a = ctx;
    (void)stack, (void)thread, (void)w, (void)cnt;
    if (t > 0 && t >= a->end_ns) /* a profile whose samples are all at 0 has no timeline */
        a->end_ns = t + 1;
    return 0;
}

static int per_thread(void *ctx, int32_t stack, int32_t thread, int64_t t, double w, int64_t cnt)
{
    activity *a = ctx;
    (void)stack, (void)t, (void)cnt;
    if (thread >= 0 && (size_t)thread < a->n)
        a->w[thread] += w;
    return 0;
}

static int by_weight(const void *x, const void *y, void *ctx)
{
    const double *w = ctx;
    double a = w[*(const int32_t *)x], b = w[*(const int32_t *)y];
    return a < b ? 1 : a > b ? -1 : *(const int32_t *)x - *(const int32_t *)y;
}

static int write_threads(cn_agg_profile *p, const cn_agg_query *q, double scale, FILE *out)
{
    cn_agg_query all = *q;
    activity a = {.n = cn_agg_thread_count(p)};
    int32_t *order = NULL;
    size_t n = 0;
    int rc = -ENOMEM;

    all.tid = all.pid = -1;
    a.w = calloc(a.n ? a.n : 1, sizeof(double));
    order = calloc(a.n ? a.n : 1, sizeof(int32_t));
    if (!a.w || !order)
        goto out;
    if ((rc = cn_agg_for_each_sample(p, &all, per_thread, &a)) < 0)
        goto out;
    for (size_t i = 0; i < a.n; i++)
        if (a.w[i] != 0)
            order[n++] = (int32_t)i;
    qsort_r(order, n, sizeof(*order), by_weight, a.w);
    fputs("],\"threads\":[", out);
    for (size_t i = 0; i < n; i++) {
        int32_t th = order[i];
        const char *name = cn_agg_thread_name(p, th);
        fprintf(out, "%s{\"pid\":%d,\"tid\":%d,", i ? "," : "", (int)cn_agg_thread_pid(p, th),
                (int)cn_agg_thread_tid(p, th));
        if (name) {
            fputs("\"name\":", out);
            cn_fmt__json_str(out, name);
            fputc(',', out);
        }
        fputs("\"weight\":", out);
        cn_fmt__json_num(out, a.w[th] * scale);
        fputc('}', out);
    }
    rc = 0;
out:
    free(order);
    free(a.w);
    return rc;
}

int cn_fmt_write_activity(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *err)
{
    cn_agg_query whole = *q;
    activity a = {.end_ns = 0};
    double scale = cn_agg_profile_scale(p);
    int rc;

    whole.from_ns = INT64_MIN;
    whole.to_ns = INT64_MAX;
    if ((rc = cn_agg_for_each_sample(p, &whole, last_time, &a)) < 0)
        return cn_err_set(err, rc, "activity: %s", strerror(-rc));
    a.w = calloc(N_BUCKETS, sizeof(double));
    if (!a.w)
        return cn_err_set(err, -ENOMEM, "out of memory");
    if (a.end_ns > 0 && (rc = cn_agg_activity(p, &whole, a.end_ns, a.w, N_BUCKETS, err)) < 0)
        goto out;
    fputs("{\"unit\":", out);
    cn_fmt__json_str(out, cn_agg_unit_name(cn_agg_profile_unit(p)));
    fputs(",\"end\":", out);
    cn_fmt__json_num(out, (double)a.end_ns / 1e9);
    fputs(",\"bucket\":", out);
    cn_fmt__json_num(out, (double)a.end_ns / 1e9 / N_BUCKETS);
    fputs(",\"buckets\":[", out);
    for (size_t i = 0; a.end_ns > 0 && i < N_BUCKETS; i++) {
        if (i)
            fputc(',', out);
        cn_fmt__json_num(out, a.w[i] * scale);
    }
    if ((rc = write_threads(p, q, scale, out)) < 0)
        goto out;
    fputs("]}\n", out);
    rc = cn_fmt__finish_output(out, "activity", err);
out:
    free(a.w);
    if (rc < 0 && err && !err->msg[0])
        cn_err_set(err, rc, "activity: %s", strerror(-rc));
    return rc;
}
