/* formats_common.c — helpers shared by formats/'s writers (formats_internal.h): what kind
 * of query it is, running a query under another view or once per thread, build-ids, and
 * XML escaping (JSON is json_out.c's). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

bool cn_fmt__query_is_raw(const cn_agg_query *q)
{
    /* --where, like --tid and --only-pid, selects threads: raw writers honour it through
     * cn_agg_for_each_sample */
    return q->n_transforms == 0 && q->group_by == CN_AGG_GROUP_NONE && !q->no_inline;
}

bool cn_fmt__query_all_time(const cn_agg_query *q)
{
    return q->from_ns == INT64_MIN && q->to_ns == INT64_MAX;
}

bool cn_fmt__thread_matches(const cn_agg_profile *p, const cn_agg_query *q, int32_t thread)
{
    return cn_agg_query_keeps_thread(p, q, thread);
}

int cn_fmt__run_view(cn_agg_profile *p, const cn_agg_query *q, cn_agg_view view, cn_agg_tree **out,
                     cn_err *err)
{
    cn_agg_query copy = *q;
    copy.view = view;
    if (view != q->view)
        copy.view_func = NULL;
    return cn_agg_query_run(p, &copy, out, err);
}

/* Stops the walk at a folded (accumulator) row without a thread. */
static int threadless_folded(void *ctx, int32_t stack, int32_t thread, int64_t time_ns,
                             double weight, int64_t count)
{
    (void)ctx, (void)stack, (void)weight, (void)count;
    return time_ns < 0 && thread < 0 ? -ECANCELED : 0;
}

/* True when retention folded samples of no known thread into the all-time accumulator. */
static bool has_threadless_folded(cn_agg_profile *p)
{
    cn_agg_query all;
    cn_agg_query_init(&all);
    return cn_agg_for_each_sample(p, &all, threadless_folded, NULL) == -ECANCELED;
}

/* Whether one query per thread sees every sample q sees. */
static bool per_thread_possible(cn_agg_profile *p)
{
    size_t n_thr = cn_agg_thread_count(p);
    if (n_thr == 0 || n_thr > CN_FMT__MAX_THREAD_QUERIES)
        return false;
    for (size_t i = 0, n = cn_agg_sample_count(p); i < n; i++)
        if (cn_agg_sample_thread(p, i) < 0)
            return false; /* samples no thread query would select */
    return !has_threadless_folded(p);
}

int cn_fmt__thread_trees(cn_agg_profile *p, const cn_agg_query *q, cn_fmt__tree_fn fn, void *ctx,
                         cn_err *err)
{
    cn_agg_tree *t = NULL;
    int rc;
    if (!per_thread_possible(p)) {
        if ((rc = cn_fmt__run_view(p, q, CN_AGG_VIEW_TREE, &t, err)) < 0)
            return rc;
        rc = fn(ctx, -1, t);
        cn_agg_tree_free(t);
        return rc;
    }
    for (size_t th = 0, n_thr = cn_agg_thread_count(p); th < n_thr; th++) {
        if (!cn_fmt__thread_matches(p, q, (int32_t)th))
            continue;
        cn_agg_query tq = *q;
        tq.tid = cn_agg_thread_tid(p, (int32_t)th);
        tq.pid = cn_agg_thread_pid(p, (int32_t)th);
        if ((rc = cn_fmt__run_view(p, &tq, CN_AGG_VIEW_TREE, &t, err)) < 0)
            return rc;
        rc = t->n_nodes > 0 ? fn(ctx, (int32_t)th, t) : 0;
        t = cn_agg_tree_free(t);
        if (rc < 0)
            return rc;
    }
    return 0;
}

bool cn_fmt__is_build_id(const char *identity)
{
    size_t n = identity ? strlen(identity) : 0;
    if (n < 8 || n % 2)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789abcdefABCDEF", identity[i]))
            return false;
    return true;
}

void cn_fmt__xml_text(FILE *out, const char *s, long max_chars)
{
    long chars = 0;
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        bool starts_char = (*c & 0xc0) != 0x80;
        if (starts_char) {
            if (max_chars >= 0 && chars == max_chars) {
                fputs("\xe2\x80\xa6", out); /* … */
                return;
            }
            chars++;
        }
        switch (*c) {
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '&':
            fputs("&amp;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&apos;", out);
            break;
        default:
            if (*c >= 0x80) {
                /* Invalid UTF-8, and U+FFFE/U+FFFF, are not XML characters: U+FFFD. */
                size_t len = cn_utf8_seq(c, 4); /* stops at the NUL: never a continuation */
                if (len == 0 || (len == 3 && c[0] == 0xef && c[1] == 0xbf && c[2] >= 0xbe)) {
                    fputs("\xef\xbf\xbd", out);
                } else {
                    fwrite(c, 1, len, out);
                    c += len - 1;
                }
                break;
            }
            /* XML 1.0 forbids most control characters even as references. */
            putc(*c < 0x20 && *c != '\t' && *c != '\n' ? '?' : *c, out);
        }
    }
}

int cn_fmt__finish_output(FILE *out, const char *what, cn_err *err)
{
    if (fflush(out) != 0 || ferror(out))
        return cn_err_set(err, -EIO, "writing %s output: %s", what, strerror(errno));
    return 0;
}

bool cn_fmt_is_time_profile(const cn_agg_profile *p)
{
    const char *mode = p ? cn_agg_meta_get(p, "mode") : NULL;
    return mode && cn_agg_profile_unit(p) == CN_AGG_UNIT_NS &&
           (!strcmp(mode, "off-cpu") || !strcmp(mode, "wall"));
}

void cn_fmt_time(char *buf, size_t n, double ns)
{
    static const struct {
        double div;
        const char *unit;
    } units[] = {{1e9, "s"}, {1e6, "ms"}, {1e3, "us"}, {1, "ns"}};
    size_t i = 0;
    if (ns == 0) {
        snprintf(buf, n, "0");
        return;
    }
    while (i + 1 < sizeof(units) / sizeof(units[0]) && fabs(ns) < units[i].div)
        i++;
    double v = ns / units[i].div, av = fabs(v);
    /* 999.96 ms must not print as "1000.0 ms": rounding decides the decimals. */
    int dec = i == 3 || av >= 99.95 ? 0 : av >= 9.995 ? 1 : 2;
    snprintf(buf, n, "%.*f %s", dec, v, units[i].unit);
}

static int32_t thread_at(const uint8_t *base, size_t i, size_t elem, size_t thread_off)
{
    int32_t t;
    memcpy(&t, base + i * elem + thread_off, sizeof(t));
    return t;
}

int cn_fmt__sort_by_thread(void **samples, size_t n, size_t elem, size_t thread_off,
                           size_t nthreads, int (*cmp)(const void *, const void *))
{
    const uint8_t *in = *samples;
    for (size_t i = 0; i < n; i++) {
        int32_t t = thread_at(in, i, elem, thread_off);
        if (t < -1 || (size_t)(t + 1) > nthreads)
            return -ERANGE;
    }
    size_t nb = nthreads + 1; /* bucket 0: thread -1 */
    size_t *start = calloc(nb + 1, sizeof(*start));
    uint8_t *out = malloc((n ? n : 1) * elem);
    if (!start || !out) {
        free(start);
        free(out);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        start[thread_at(in, i, elem, thread_off) + 2]++;
    for (size_t b = 1; b <= nb; b++)
        start[b] += start[b - 1];
    for (size_t i = 0; i < n; i++)
        memcpy(out + start[thread_at(in, i, elem, thread_off) + 1]++ * elem, in + i * elem, elem);
    free(start);
    free(*samples);
    *samples = out;
    for (size_t i = 0, j; i < n; i = j) {
        bool in_order = true;
        int32_t t = thread_at(out, i, elem, thread_off);
        for (j = i + 1; j < n && thread_at(out, j, elem, thread_off) == t; j++)
            in_order = in_order && cmp(out + (j - 1) * elem, out + j * elem) <= 0;
        if (!in_order)
            qsort(out + i * elem, j - i, elem, cmp);
    }
    return 0;
}
