/* err.c — canopy's one error convention: a negative errno for the program, and beside it
 * a one-line message (and, for protocol errors, a stable code name) for the person. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cn_common.h"

/* The format attribute lets -Wformat-nonliteral (clang's -Wformat=2) check the callers'
 * formats instead of refusing this vsnprintf. */
__attribute__((format(printf, 2, 0))) static void err_vformat(cn_err *err, const char *fmt,
                                                              va_list ap)
{
    va_list again;
    char *full = NULL;

    va_copy(again, ap);
    int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    /* A message cut to the buffer is cut on a character boundary (cn_common.h, the UTF-8
     * rule): messages quote names, and half a character would reach the reply. */
    if (n >= (int)sizeof(err->msg) && vasprintf(&full, fmt, again) == n) {
        size_t keep = cn_utf8_cut(full, (size_t)n, sizeof(err->msg) - 1);
        memcpy(err->msg, full, keep);
        err->msg[keep] = '\0';
    }
    free(full);
    va_end(again);
}

int cn_err_vset(cn_err *err, int code, const char *fmt, va_list ap)
{
    if (err)
        err_vformat(err, fmt, ap);
    return code;
}

int cn_err_set(cn_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err_vformat(err, fmt, ap);
        va_end(ap);
    }
    return code;
}

int cn_err_setc(cn_err *err, int code, const char *name, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->code = name;
        va_start(ap, fmt);
        err_vformat(err, fmt, ap);
        va_end(ap);
    }
    return code;
}
