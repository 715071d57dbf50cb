/* formats_common.c — helpers shared by formats/'s writers (formats_internal.h): what kind
 * of query it is, running a query under another view, and XML escaping (JSON is json_out.c's). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

bool cn_fmt__query_is_raw(const cn_agg_query *q)
{
    return q->n_transforms == 0 && q->group_by == CN_AGG_GROUP_NONE && !q->no_inline;
}

bool cn_fmt__query_all_time(const cn_agg_query *q)
{
    return q->from_ns == INT64_MIN && q->to_ns == INT64_MAX;
}

bool cn_fmt__thread_matches(const cn_agg_profile *p, const cn_agg_query *q, int32_t thread)
{
    if (q->tid < 0 && q->pid < 0)
        return true;
    if (thread < 0 || (size_t)thread >= cn_agg_thread_count(p))
        return false;
    if (q->tid >= 0 && cn_agg_thread_tid(p, thread) != q->tid)
        return false;
    if (q->pid >= 0 && cn_agg_thread_pid(p, thread) != q->pid)
        return false;
    return true;
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
