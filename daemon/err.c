/* err.c — the daemon's one error-message helper, shared by the server, sessions and
 * query decoding. */
#include <stdarg.h>
#include <stdio.h>

#include "d_internal.h"

int cn_d__err(cn_d_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return code;
}
