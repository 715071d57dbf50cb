/* err.c — canopy's one error convention: a negative errno for the program, and beside it
 * a one-line message (and, for protocol errors, a stable code name) for the person. */
#include <stdarg.h>
#include <stdio.h>

#include "cn_common.h"

/* The format attribute lets -Wformat-nonliteral (clang's -Wformat=2) check the callers'
 * formats instead of refusing this vsnprintf. */
__attribute__((format(printf, 2, 0))) static void err_vformat(cn_err *err, const char *fmt,
                                                              va_list ap)
{
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
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
