/* formats_common.c — helpers shared by formats/'s writers (formats_internal.h): what kind
 * of query it is, running a query under another view, and the JSON/XML escaping every
 * text writer needs. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

bool cn_fmt__query_is_raw(const cn_agg_query *q)
{
    return q->n_transforms == 0 && q->group_by == CN_AGG_GROUP_NONE;
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

void cn_fmt__json_string(FILE *out, const char *s)
{
    putc('"', out);
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        const unsigned char *run = c; /* bytes that need no escape, in one write */
        while (*c >= 0x20 && *c != '"' && *c != '\\')
            c++;
        if (c > run)
            fwrite(run, 1, (size_t)(c - run), out);
        if (!*c)
            break;
        switch (*c) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\r':
            fputs("\\r", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        default:
            if (*c < 0x20)
                fprintf(out, "\\u%04x", *c);
            else
                putc(*c, out);
        }
    }
    putc('"', out);
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
            /* XML 1.0 forbids most control characters even as references. */
            putc(*c < 0x20 && *c != '\t' && *c != '\n' ? '?' : *c, out);
        }
    }
}

void cn_fmt__json_number(FILE *out, double v)
{
    if (!isfinite(v))
        v = 0;
    if (fabs(v) < 9e15 && v == (double)(int64_t)v) {
        /* printf's %lld by hand: the writers print hundreds of thousands of numbers. */
        char buf[24];
        size_t n = sizeof(buf);
        int64_t i = (int64_t)v;
        uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
        do {
            buf[--n] = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (i < 0)
            buf[--n] = '-';
        fwrite(buf + n, 1, sizeof(buf) - n, out);
    } else {
        fprintf(out, "%.12g", v); /* as export_json.c: display precision, not bits */
    }
}

int cn_fmt__finish_output(FILE *out, const char *what, cn_err *err)
{
    if (fflush(out) != 0 || ferror(out))
        return cn_err_set(err, -EIO, "writing %s output: %s", what, strerror(errno));
    return 0;
}
