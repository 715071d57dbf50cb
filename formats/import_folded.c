/* import_folded.c — folded stacks (`f1;f2;...;fn COUNT`, root first), the format of
 * Brendan Gregg's stackcollapse scripts and of `canopy ... --format folded`.
 *
 * Each line becomes one sample of weight COUNT (time 0, no thread) on the stack of its
 * frames; a frame is its func (interned by name, no library, address -1), except a frame
 * written py-spy's way for a Python function, `NAME (FILE.py)` or `NAME (FILE.py:LINE)`
 * (frame_kind.c): the func NAME of the Python source file FILE.py. A file whose
 * first line has three columns, `STACK BASE NEW`, is a differential profile (flamegraph's
 * difffolded, `canopy diff --format folded`): every line then gives two samples, weight
 * BASE on the synthetic thread "base" (pid 1, tid 1) and weight NEW on "new" (pid 2,
 * tid 2), and the metadata says diff=1, so a diff tree is the per-thread difference.
 * Stack text may contain spaces: the count is the last space-separated token.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"

#define DIFF_BASE_PID 1
#define DIFF_NEW_PID  2

typedef struct folded {
    cn_agg_profile *p;
    const char *name;
    cn_err *err;
    size_t lineno;
    char *scratch; /* NUL-terminated copy of one frame name */
    size_t scratch_cap;
    int diff; /* -1 unknown (before the first line), 0 two columns, 1 three */
    int32_t thr_base, thr_new;
} folded;

/* Parses a non-negative decimal integer token. Returns 0, or -EINVAL with a message. */
static int parse_count(folded *f, const char *s, size_t len, double *out)
{
    uint64_t v = 0;
    if (len == 0)
        return cn_err_set(f->err, -EINVAL, "%s:%zu: missing count", f->name, f->lineno);
    if (s[0] == '-')
        return cn_err_set(f->err, -EINVAL, "%s:%zu: negative count '%.*s'", f->name, f->lineno,
                          (int)(len > 40 ? 40 : len), s);
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return cn_err_set(f->err, -EINVAL, "%s:%zu: count '%.*s' is not a non-negative integer",
                              f->name, f->lineno, (int)(len > 40 ? 40 : len), s);
        if (v > (UINT64_MAX - 9) / 10)
            return cn_err_set(f->err, -EINVAL, "%s:%zu: count too large", f->name, f->lineno);
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = (double)v;
    return 0;
}

static bool all_digits(const char *s, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* Splits "REST TOKEN" at the last blank: *tok is the last token, *rest_len the length of
 * what precedes it (trailing blanks removed). Returns false when there is no blank. */
static bool split_last(const char *s, size_t len, const char **tok, size_t *tok_len,
                       size_t *rest_len)
{
    size_t i = len;
    while (i > 0 && !cn_fmt__is_blank(s[i - 1]))
        i--;
    if (i == 0)
        return false;
    *tok = s + i;
    *tok_len = len - i;
    while (i > 0 && cn_fmt__is_blank(s[i - 1]))
        i--;
    *rest_len = i;
    return true;
}

/* Interns the stack of "f1;f2;...;fn". Returns the stack id or negative errno. */
static int32_t intern_stack(folded *f, const char *s, size_t len)
{
    int32_t stack = -1;
    size_t start = 0;
    while (start <= len) {
        const char *semi = memchr(s + start, ';', len - start);
        size_t end = semi ? (size_t)(semi - s) : len;
        size_t n = end - start;
        if (n == 0)
            return cn_err_set(f->err, -EINVAL, "%s:%zu: empty function name in stack", f->name,
                              f->lineno);
        if (CN_RESERVE(f->scratch, f->scratch_cap, n + 1) < 0)
            return -ENOMEM;
        memcpy(f->scratch, s + start, n);
        f->scratch[n] = '\0';
        int32_t res = -1, func;
        size_t name_len, file_len;
        const char *file;
        if (cn_fmt__folded_python(f->scratch, n, &name_len, &file, &file_len)) {
            /* NAME, then FILE, as two strings in the scratch copy */
            size_t at = (size_t)(file - f->scratch);
            f->scratch[name_len] = '\0';
            f->scratch[at + file_len] = '\0';
            res = cn_agg_python_resource(f->p, f->scratch + at);
        }
        func = res < -1 ? res : cn_agg_func(f->p, f->scratch, res, NULL, 0);
        int32_t frame = func < 0 ? func : cn_agg_frame(f->p, func, res, -1, 0);
        stack = frame < 0 ? frame : cn_agg_stack(f->p, stack, frame);
        if (stack < 0)
            return stack;
        start = end + 1;
    }
    return stack;
}

/* Decides two or three columns from the first line. */
static int start_columns(folded *f, const char *rest, size_t rest_len)
{
    const char *tok;
    size_t tok_len, before;
    f->diff = split_last(rest, rest_len, &tok, &tok_len, &before) && before > 0 &&
              all_digits(tok, tok_len);
    if (!f->diff)
        return 0;
    f->thr_base = cn_agg_thread(f->p, DIFF_BASE_PID, DIFF_BASE_PID, "base");
    f->thr_new = cn_agg_thread(f->p, DIFF_NEW_PID, DIFF_NEW_PID, "new");
    if (f->thr_base < 0 || f->thr_new < 0 ||
        cn_agg_process_set_name(f->p, DIFF_BASE_PID, "base") < 0 ||
        cn_agg_process_set_name(f->p, DIFF_NEW_PID, "new") < 0 ||
        cn_agg_meta_set(f->p, "diff", "1") < 0 || cn_agg_meta_set(f->p, "diff.base_tid", "1") < 0 ||
        cn_agg_meta_set(f->p, "diff.new_tid", "2") < 0)
        return -ENOMEM;
    return 0;
}

/* One line of the file (cn_fmt__for_each_line's callback; ctx is the folded state). */
static int parse_line(void *ctx, const char *s, size_t len)
{
    folded *f = ctx;

    while (len && cn_fmt__is_blank(s[len - 1]))
        len--;
    while (len && cn_fmt__is_blank(s[0]))
        s++, len--;
    if (len == 0)
        return 0;
    const char *tok;
    size_t tok_len, rest_len;
    double count, base = 0;
    if (!split_last(s, len, &tok, &tok_len, &rest_len))
        return cn_err_set(f->err, -EINVAL, "%s:%zu: no count after the stack", f->name, f->lineno);
    int rc = parse_count(f, tok, tok_len, &count);
    if (rc < 0)
        return rc;
    if (f->diff < 0 && (rc = start_columns(f, s, rest_len)) < 0)
        return rc;
    if (f->diff) {
        if (!split_last(s, rest_len, &tok, &tok_len, &rest_len) || rest_len == 0)
            return cn_err_set(f->err, -EINVAL,
                              "%s:%zu: expected 'STACK BASE NEW' (differential file)", f->name,
                              f->lineno);
        if ((rc = parse_count(f, tok, tok_len, &base)) < 0)
            return rc;
    }
    if (rest_len == 0)
        return cn_err_set(f->err, -EINVAL, "%s:%zu: empty stack", f->name, f->lineno);
    int32_t stack = intern_stack(f, s, rest_len);
    if (stack < 0)
        return stack == -ENOMEM ? cn_err_set(f->err, -ENOMEM, "%s: out of memory", f->name) : stack;
    if (!f->diff)
        rc = cn_agg_add_sample(f->p, stack, 0, count, -1);
    else if ((rc = cn_agg_add_sample(f->p, stack, 0, base, f->thr_base)) == 0)
        rc = cn_agg_add_sample(f->p, stack, 0, count, f->thr_new);
    return rc < 0 ? cn_err_set(f->err, rc, "%s: out of memory", f->name) : 0;
}

int cn_fmt__import_folded(const char *data, size_t len, const char *name, cn_agg_profile **out,
                          cn_err *err)
{
    folded f = {.name = name, .err = err, .diff = -1, .thr_base = -1, .thr_new = -1};
    int rc;

    if (err)
        err->msg[0] = '\0';
    f.p = cn_agg_profile_new();
    if (!f.p)
        return cn_err_set(err, -ENOMEM, "%s: out of memory", name);
    if ((rc = cn_fmt__for_each_line(data, len, name, &f.lineno, parse_line, &f, err)) < 0)
        goto fail;
    if (cn_agg_meta_set(f.p, "format", "folded") < 0) {
        rc = cn_err_set(err, -ENOMEM, "%s: out of memory", name);
        goto fail;
    }
    free(f.scratch);
    *out = f.p;
    return 0;
fail:
    if (err && !err->msg[0])
        cn_err_set(err, rc, "%s:%zu: %s", name, f.lineno, strerror(-rc));
    free(f.scratch);
    cn_agg_profile_free(f.p);
    return rc;
}

/* The first non-blank line ends in a count after some stack text. */
bool cn_fmt__looks_folded(const char *data, size_t len)
{
    cn_lines it;
    const char *s;
    size_t n;
    cn_lines_init(&it, data, len);
    while (cn_lines_next(&it, &s, &n)) {
        while (n && cn_fmt__is_blank(s[n - 1]))
            n--;
        while (n && cn_fmt__is_blank(s[0]))
            s++, n--;
        if (n == 0)
            continue;
        const char *tok;
        size_t tok_len, rest_len;
        if (memchr(s, '\0', n))
            return false;
        return split_last(s, n, &tok, &tok_len, &rest_len) && rest_len > 0 &&
               all_digits(tok, tok_len);
    }
    return false;
}
