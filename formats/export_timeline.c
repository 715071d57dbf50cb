/* export_timeline.c — writers for estimated calls (cn_agg_timeline()'s output).
 *
 * Three forms: canopy's JSON (`{"unit": "us", "calls": [...]}`, docs/cli.md), a text
 * listing indented by depth, and Chrome trace events (one complete "X" event per call,
 * ts/dur in µs, plus a thread_name metadata event per named thread), which
 * chrome://tracing and Perfetto load. Calls are written in the order given
 * (cn_agg_timeline returns them by thread and start), streamed one at a time.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "export_internal.h"

static const char *call_name(const cn_agg_profile *p, int32_t func)
{
    const char *n = func >= 0 ? cn_agg_func_name(p, func) : NULL;
    return n ? n : "?";
}

static const char *call_lib(const cn_agg_profile *p, int32_t func)
{
    int32_t res = func >= 0 ? cn_agg_func_resource(p, func) : -1;
    return res >= 0 ? cn_agg_resource_name(p, res) : NULL;
}

/* The process of a thread id, from the profile's thread table; 0 when unknown. */
static int32_t pid_of(const cn_agg_profile *p, int32_t tid)
{
    size_t n = cn_agg_thread_count(p);
    for (size_t i = 0; i < n; i++)
        if (cn_agg_thread_tid(p, (int32_t)i) == tid)
            return cn_agg_thread_pid(p, (int32_t)i);
    return 0;
}

int cn_fmt_write_timeline_json(const cn_agg_profile *p, const cn_agg_call *calls, size_t n,
                               FILE *out)
{
    if (!p || (!calls && n) || !out)
        return -EINVAL;
    if (fputs("{\"unit\":\"us\",\"calls\":[", out) < 0)
        return -EIO;
    for (size_t i = 0; i < n; i++) {
        const cn_agg_call *c = &calls[i];
        const char *lib = call_lib(p, c->func);
        if (fputs(i ? ",\n{\"name\":" : "\n{\"name\":", out) < 0 ||
            cn_fmt__json_str(out, call_name(p, c->func)) < 0 ||
            (lib && (fputs(",\"lib\":", out) < 0 || cn_fmt__json_str(out, lib) < 0)) ||
            cn_fmt__json_kind(out, p, c->func) < 0 ||
            fprintf(out, ",\"tid\":%d,\"depth\":%d,\"start\":", c->tid, c->depth) < 0 ||
            cn_fmt__json_us(out, c->start_ns) < 0 || fputs(",\"dur\":", out) < 0 ||
            cn_fmt__json_us(out, c->dur_ns) < 0 || fputc('}', out) == EOF)
            return -EIO;
    }
    return fputs("]}\n", out) < 0 ? -EIO : 0;
}

int cn_fmt_write_timeline_text(const cn_agg_profile *p, const cn_agg_call *calls, size_t n,
                               FILE *out)
{
    if (!p || (!calls && n) || !out)
        return -EINVAL;
    if (fprintf(out, "%14s %12s %8s   %s\n", "start(us)", "dur(us)", "tid", "call") < 0)
        return -EIO;
    for (size_t i = 0; i < n; i++) {
        const cn_agg_call *c = &calls[i];
        const char *lib = call_lib(p, c->func);
        int depth = c->depth > 0 ? c->depth : 0;
        char deep[32] = "";
        if (depth > 100) { /* keep the listing linear in size for very deep stacks */
            snprintf(deep, sizeof(deep), "[%d] ", depth);
            depth = 100;
        }
        /* Names of any bytes: the terminal rule (docs/cli.md "Names in text output"). */
        if (fprintf(out, "%14.3f %12.3f %8d   %*s%s", (double)c->start_ns / 1000.0,
                    (double)c->dur_ns / 1000.0, c->tid, 2 * depth, "", deep) < 0 ||
            cn_term_fputs(call_name(p, c->func), out) < 0 || fputs(lib ? "  [" : "", out) < 0 ||
            cn_term_fputs(lib, out) < 0 || fputs(lib ? "]\n" : "\n", out) < 0)
            return -EIO;
    }
    return 0;
}

/* A thread_name metadata event for each named thread that has calls. */
static int thread_names(const cn_agg_profile *p, const cn_agg_call *calls, size_t n, FILE *out,
                        bool *first)
{
    size_t nt = cn_agg_thread_count(p);
    for (size_t t = 0; t < nt; t++) {
        const char *name = cn_agg_thread_name(p, (int32_t)t);
        int32_t tid = cn_agg_thread_tid(p, (int32_t)t);
        bool used = false;
        for (size_t i = 0; i < n && !used; i++)
            used = calls[i].tid == tid;
        if (!name || !used)
            continue;
        if (fputs(*first ? "\n" : ",\n", out) < 0 ||
            fprintf(out,
                    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                    "\"args\":{\"name\":",
                    cn_agg_thread_pid(p, (int32_t)t), tid) < 0 ||
            cn_fmt__json_str(out, name) < 0 || fputs("}}", out) < 0)
            return -EIO;
        *first = false;
    }
    return 0;
}

int cn_fmt_write_chrome_trace(const cn_agg_profile *p, const cn_agg_call *calls, size_t n,
                              FILE *out)
{
    bool first = true;
    int32_t last_tid = INT32_MIN, pid = 0;
    int rc;

    if (!p || (!calls && n) || !out)
        return -EINVAL;
    if (fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", out) < 0)
        return -EIO;
    rc = thread_names(p, calls, n, out, &first);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        const cn_agg_call *c = &calls[i];
        const char *lib = call_lib(p, c->func);
        if (c->tid != last_tid) {
            last_tid = c->tid;
            pid = pid_of(p, c->tid);
        }
        if (fputs(first ? "\n{\"name\":" : ",\n{\"name\":", out) < 0 ||
            cn_fmt__json_str(out, call_name(p, c->func)) < 0 || fputs(",\"cat\":", out) < 0 ||
            cn_fmt__json_str(out, lib ? lib : "canopy") < 0 ||
            fputs(",\"ph\":\"X\",\"ts\":", out) < 0 || cn_fmt__json_us(out, c->start_ns) < 0 ||
            fputs(",\"dur\":", out) < 0 || cn_fmt__json_us(out, c->dur_ns) < 0 ||
            fprintf(out, ",\"pid\":%d,\"tid\":%d,\"args\":{\"depth\":%d", pid,
                    c->tid >= 0 ? c->tid : 0, c->depth) < 0 ||
            (lib && (fputs(",\"lib\":", out) < 0 || cn_fmt__json_str(out, lib) < 0)) ||
            cn_fmt__json_kind(out, p, c->func) < 0 || fputs("}}", out) < 0)
            return -EIO;
        first = false;
    }
    return fputs("]}\n", out) < 0 ? -EIO : 0;
}
