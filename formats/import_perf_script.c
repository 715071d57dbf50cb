/* import_perf_script.c — the text `perf script` prints for `perf record -g` (default
 * fields), one sample per block:
 *
 *   COMM PID[/TID] [CPU] SECONDS.FRACTION: [PERIOD] EVENT[:MODIFIERS]: [IP SYM (DSO)]
 *   <TAB> ADDRESS SYMBOL+0xOFFSET (DSO)      leaf first, one line per frame
 *   <blank line>
 *
 * The header is parsed from the time token (the first `DIGITS.DIGITS:`), since COMM may
 * contain blanks: the token before it is the CPU (`[NNN]`, optional), before that PID or
 * PID/TID, and everything before that is COMM. A frame's func is its symbol without the
 * `+0x..` offset, its library the DSO's file name (`[kernel.kallsyms]` is `[kernel]`, kind
 * KERNEL); `[unknown]` symbols are named `LIB+0xADDRESS` with the address perf printed
 * (`0xADDRESS` when the DSO is unknown too). Frames are interned by (func, library,
 * address), so `lines` can split a function by address. Weights are the periods (unit ns
 * for cpu-clock/task-clock, events otherwise; samples of weight 1 when no period is
 * printed); times are nanoseconds after the first sample; COMM/PID/TID go to the thread
 * table, never into stacks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"

/* Frames deeper than this are an error (perf's own limit is 127 by default, at most
 * a few thousand with kernel.perf_event_max_stack). */
#define MAX_FRAMES 65536

typedef struct perf_in {
    cn_agg_profile *p;
    const char *name;
    cn_err *err;
    size_t lineno;
    int32_t *frames; /* the current sample's frames, leaf first */
    size_t n_frames, cap_frames;
    char *scratch;
    size_t scratch_cap;
    bool in_sample;  /* a header was read and its sample not yet added */
    int32_t thread;  /* of the current sample */
    int64_t time_ns; /* absolute, of the current sample */
    double weight;
    bool have_first;
    int64_t first_ns;
    bool unit_set;
} perf_in;

typedef struct perf_hdr {
    const char *comm;
    size_t comm_len;
    int64_t pid, tid;
    int64_t time_ns;
    bool has_period;
    double period;
    const char *event;
    size_t event_len;
    const char *rest; /* what follows the event (an inline frame without -g), trimmed */
    size_t rest_len;
} perf_hdr;

typedef struct tok {
    const char *s;
    size_t n;
} tok;

static bool digits(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* Parses up to 18 decimal digits. */
static bool parse_dec(const char *s, size_t n, int64_t *out)
{
    if (!digits(s, n) || n > 18)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    *out = v;
    return true;
}

/* "SECONDS.FRACTION:" -> nanoseconds. */
static bool parse_time(const tok *t, int64_t *ns)
{
    if (t->n < 4 || t->s[t->n - 1] != ':')
        return false;
    const char *dot = memchr(t->s, '.', t->n - 1);
    if (!dot)
        return false;
    size_t int_len = (size_t)(dot - t->s), frac_len = t->n - 2 - int_len;
    int64_t sec, frac;
    if (int_len > 10 || frac_len == 0 || frac_len > 9 || !parse_dec(t->s, int_len, &sec) ||
        !parse_dec(dot + 1, frac_len, &frac))
        return false;
    for (size_t i = frac_len; i < 9; i++)
        frac *= 10;
    *ns = sec * 1000000000 + frac;
    return true;
}

/* "PID" or "PID/TID". */
static bool parse_pid(const tok *t, int64_t *pid, int64_t *tid)
{
    const char *slash = memchr(t->s, '/', t->n);
    if (!slash) {
        if (!parse_dec(t->s, t->n, tid) || *tid > INT32_MAX)
            return false;
        *pid = *tid;
        return true;
    }
    size_t a = (size_t)(slash - t->s);
    return parse_dec(t->s, a, pid) && parse_dec(slash + 1, t->n - a - 1, tid) &&
           *pid <= INT32_MAX && *tid <= INT32_MAX;
}

static bool is_cpu(const tok *t)
{
    return t->n >= 3 && t->s[0] == '[' && t->s[t->n - 1] == ']' && digits(t->s + 1, t->n - 2);
}

/* Parses a header line. Returns false when it is not one. */
static bool parse_header(const char *s, size_t len, perf_hdr *h)
{
    tok toks[24];
    size_t nt = 0, i = 0, ti;
    while (i < len && nt < sizeof(toks) / sizeof(toks[0])) {
        while (i < len && cn_fmt__is_blank(s[i]))
            i++;
        if (i == len)
            break;
        size_t start = i;
        while (i < len && !cn_fmt__is_blank(s[i]))
            i++;
        toks[nt].s = s + start;
        toks[nt].n = i - start;
        nt++;
    }
    for (ti = 2; ti < nt; ti++)
        if (parse_time(&toks[ti], &h->time_ns))
            break;
    if (ti >= nt)
        return false;
    size_t pi = ti - 1;
    if (is_cpu(&toks[pi]))
        pi--;
    if (pi < 1 || !parse_pid(&toks[pi], &h->pid, &h->tid))
        return false;
    h->comm = s;
    h->comm_len = (size_t)(toks[pi].s - s);
    while (h->comm_len && cn_fmt__is_blank(s[h->comm_len - 1]))
        h->comm_len--;
    size_t k = ti + 1;
    int64_t period;
    h->has_period = k < nt && parse_dec(toks[k].s, toks[k].n, &period);
    if (h->has_period) {
        h->period = (double)period;
        k++;
    }
    h->event = NULL;
    h->event_len = 0;
    h->rest = NULL;
    h->rest_len = 0;
    if (k < nt && toks[k].s[toks[k].n - 1] == ':') {
        const char *colon = memchr(toks[k].s, ':', toks[k].n);
        h->event = toks[k].s;
        h->event_len = (size_t)(colon - toks[k].s);
        const char *after = toks[k].s + toks[k].n;
        size_t rest = len - (size_t)(after - s);
        while (rest && cn_fmt__is_blank(*after))
            after++, rest--;
        h->rest = after;
        h->rest_len = rest;
    } else if (k < nt) {
        return false;
    }
    return true;
}

/* A NUL-terminated copy of s in the scratch buffer (valid until the next call). */
static char *scratch(perf_in *in, const char *s, size_t n)
{
    if (CN_RESERVE(in->scratch, in->scratch_cap, n + 1) < 0)
        return NULL;
    memcpy(in->scratch, s, n);
    in->scratch[n] = '\0';
    return in->scratch;
}

/* The resource of a DSO as perf prints it; -1 for [unknown]. */
static int32_t dso_resource(perf_in *in, const char *dso, size_t n)
{
    if (n == 9 && !memcmp(dso, "[unknown]", 9))
        return -1;
    if (n == 17 && !memcmp(dso, "[kernel.kallsyms]", 17))
        return cn_agg_resource(in->p, "[kernel]", NULL, NULL, CN_AGG_RES_KERNEL);
    char *copy = scratch(in, dso, n);
    if (!copy)
        return -ENOMEM;
    if (copy[0] == '[') {
        static const char *const other[] = {"[vdso]",  "[vsyscall]", "[heap]",
                                            "[stack]", "[vvar]",     "[anon]"};
        cn_agg_resource_kind kind = CN_AGG_RES_KERNEL; /* a kernel module */
        for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
            if (!strncmp(copy, other[i], strlen(other[i]) - 1))
                kind = CN_AGG_RES_OTHER;
        return cn_agg_resource(in->p, copy, NULL, NULL, kind);
    }
    const char *base = strrchr(copy, '/');
    base = base ? base + 1 : copy;
    cn_agg_resource_kind kind = CN_AGG_RES_LIBRARY;
    if ((!strncmp(base, "perf-", 5) && strstr(base, ".map")) || !strncmp(base, "jitted-", 7))
        kind = CN_AGG_RES_JIT;
    return cn_agg_resource(in->p, base, copy, copy, kind);
}

/* Parses "ADDRESS SYMBOL[+0xOFF] (DSO)" into a frame and appends it to the sample. */
static int parse_frame(perf_in *in, const char *s, size_t len)
{
    while (len && cn_fmt__is_blank(s[len - 1]))
        len--;
    while (len && cn_fmt__is_blank(s[0]))
        s++, len--;
    size_t i = 0;
    uint64_t addr = 0;
    while (i < len && !cn_fmt__is_blank(s[i])) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0 || i >= 16)
            return cn_err_set(in->err, -EINVAL,
                              "%s:%zu: expected a callchain line 'ADDRESS SYMBOL (DSO)'", in->name,
                              in->lineno);
        addr = addr << 4 | (uint64_t)d;
        i++;
    }
    if (i == 0)
        return cn_err_set(in->err, -EINVAL, "%s:%zu: missing address", in->name, in->lineno);
    const char *sym = s + i, *dso = "[unknown]";
    size_t sym_len = len - i, dso_len = 9;
    if (sym_len && sym[sym_len - 1] == ')') {
        /* the DSO is the last balanced parenthesised group: "(/x (deleted))" */
        size_t j = sym_len - 1;
        int depth = 0;
        for (;; j--) {
            depth += sym[j] == ')' ? 1 : sym[j] == '(' ? -1 : 0;
            if (depth == 0 || j == 0)
                break;
        }
        if (depth == 0) {
            dso = sym + j + 1;
            dso_len = sym_len - j - 2;
            sym_len = j;
        }
    }
    while (sym_len && cn_fmt__is_blank(sym[0]))
        sym++, sym_len--;
    while (sym_len && cn_fmt__is_blank(sym[sym_len - 1]))
        sym_len--;
    int32_t res = dso_resource(in, dso, dso_len);
    if (res < -1)
        return res;
    char *name;
    if (sym_len == 0 || (sym_len == 9 && !memcmp(sym, "[unknown]", 9))) {
        char buf[64];
        if (res >= 0) {
            const char *lib = cn_agg_resource_name(in->p, res);
            if (CN_RESERVE(in->scratch, in->scratch_cap, strlen(lib) + 24) < 0)
                return -ENOMEM;
            sprintf(in->scratch, "%s+0x%" PRIx64, lib, addr);
            name = in->scratch;
        } else {
            snprintf(buf, sizeof(buf), "0x%" PRIx64, addr);
            name = scratch(in, buf, strlen(buf));
        }
    } else {
        /* strip a trailing "+0xHEX" */
        for (size_t j = sym_len; j-- > 0;) {
            char c = sym[j];
            if (c == '+') {
                if (j + 2 < sym_len && sym[j + 1] == '0' && sym[j + 2] == 'x' && j > 0)
                    sym_len = j;
                break;
            }
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
                  c == 'x'))
                break;
        }
        name = scratch(in, sym, sym_len);
    }
    if (!name)
        return -ENOMEM;
    int32_t func = cn_agg_func(in->p, name, res, NULL, 0);
    int32_t frame = func < 0 ? func : cn_agg_frame(in->p, func, res, (int64_t)addr, 0);
    if (frame < 0)
        return frame;
    if (in->n_frames >= MAX_FRAMES)
        return cn_err_set(in->err, -EINVAL, "%s:%zu: callchain deeper than %d frames", in->name,
                          in->lineno, MAX_FRAMES);
    if (CN_RESERVE(in->frames, in->cap_frames, in->n_frames + 1) < 0)
        return -ENOMEM;
    in->frames[in->n_frames++] = frame;
    return 0;
}

/* Adds the sample being read (its frames are leaf first). */
static int end_sample(perf_in *in)
{
    if (!in->in_sample)
        return 0;
    in->in_sample = false;
    int32_t stack = -1;
    for (size_t i = in->n_frames; i-- > 0;) {
        stack = cn_agg_stack(in->p, stack, in->frames[i]);
        if (stack < 0)
            return stack;
    }
    in->n_frames = 0;
    return cn_agg_add_sample(in->p, stack, in->time_ns - in->first_ns, in->weight, in->thread);
}

static int start_sample(perf_in *in, const perf_hdr *h)
{
    int rc;
    char *comm = scratch(in, h->comm, h->comm_len);
    if (!comm)
        return -ENOMEM;
    in->thread = cn_agg_thread(in->p, (int32_t)h->pid, (int32_t)h->tid, comm);
    if (in->thread < 0)
        return in->thread;
    if ((h->pid == h->tid || !cn_agg_process_name(in->p, (int32_t)h->pid)) &&
        (rc = cn_agg_process_set_name(in->p, (int32_t)h->pid, comm)) < 0)
        return rc;
    if (!in->have_first) {
        in->have_first = true;
        in->first_ns = h->time_ns;
    }
    in->time_ns = h->time_ns;
    in->weight = h->has_period ? h->period : 1.0;
    if (!in->unit_set) {
        in->unit_set = true;
        char *ev = scratch(in, h->event ? h->event : "", h->event ? h->event_len : 0);
        if (!ev)
            return -ENOMEM;
        cn_agg_unit unit = !h->has_period ? CN_AGG_UNIT_SAMPLES
                           : !strcmp(ev, "cpu-clock") || !strcmp(ev, "task-clock")
                               ? CN_AGG_UNIT_NS
                               : CN_AGG_UNIT_EVENTS;
        cn_agg_profile_set_unit(in->p, unit);
        if (*ev && (rc = cn_agg_meta_set(in->p, "event", ev)) < 0)
            return rc;
    }
    in->in_sample = true;
    in->n_frames = 0;
    if (h->rest_len) /* no callchain: the sample's own ip sym (dso) */
        return parse_frame(in, h->rest, h->rest_len);
    return 0;
}

/* One line of the file (cn_fmt__for_each_line's callback; ctx is the perf_in state). */
static int parse_line(void *ctx, const char *s, size_t len)
{
    perf_in *in = ctx;
    size_t i = 0;
    while (i < len && cn_fmt__is_blank(s[i]))
        i++;
    if (i == len)
        return end_sample(in);
    if (i == 0 && s[0] == '#')
        return 0;
    if (i > 0) {
        if (!in->in_sample)
            return cn_err_set(in->err, -EINVAL, "%s:%zu: callchain line outside a sample", in->name,
                              in->lineno);
        return parse_frame(in, s, len);
    }
    perf_hdr h;
    if (!parse_header(s, len, &h))
        return cn_err_set(in->err, -EINVAL,
                          "%s:%zu: expected a sample header 'COMM PID/TID [CPU] "
                          "SECONDS: PERIOD EVENT:'",
                          in->name, in->lineno);
    int rc = end_sample(in);
    return rc < 0 ? rc : start_sample(in, &h);
}

int cn_fmt__import_perf_script(const char *data, size_t len, const char *name, cn_agg_profile **out,
                               cn_err *err)
{
    perf_in in = {.name = name, .err = err};
    int rc = 0;

    if (err)
        err->msg[0] = '\0';
    in.p = cn_agg_profile_new();
    if (!in.p) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = cn_fmt__for_each_line(data, len, name, &in.lineno, parse_line, &in, err)) < 0)
        goto fail;
    if ((rc = end_sample(&in)) < 0 || (rc = cn_agg_meta_set(in.p, "format", "perf-script")) < 0)
        goto fail;
    free(in.frames);
    free(in.scratch);
    *out = in.p;
    return 0;
fail:
    if (err && (!err->msg[0] || rc == -ENOMEM))
        cn_err_set(err, rc, "%s:%zu: %s", name, in.lineno,
                   rc == -ENOMEM ? "out of memory" : "cannot add the sample");
    free(in.frames);
    free(in.scratch);
    cn_agg_profile_free(in.p);
    return rc;
}

/* The first line that is neither blank nor a '#' comment is a sample header. */
bool cn_fmt__looks_perf_script(const char *data, size_t len)
{
    cn_lines it;
    const char *s;
    size_t n;
    cn_lines_init(&it, data, len);
    while (cn_lines_next(&it, &s, &n)) {
        size_t i = 0;
        while (i < n && cn_fmt__is_blank(s[i]))
            i++;
        if (i == n || (i == 0 && s[0] == '#'))
            continue;
        perf_hdr h;
        return i == 0 && !memchr(s, '\0', n) && parse_header(s, n, &h);
    }
    return false;
}
