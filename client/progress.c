/* progress.c — the one-line progress display on stderr while `run` or `tree --duration`
 * samples: elapsed time, samples, lost samples. Drawn only when stderr is a terminal (and
 * $CANOPY_NO_PROGRESS is unset), redrawn in place with '\r', at most 4 times a second,
 * and erased before anything else is printed. Colours only on a terminal, never with
 * $NO_COLOR.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cn_common.h"
#include "live.h"

void cn_cli_progress_init(cn_cli_progress *pr)
{
    pr->enabled = isatty(STDERR_FILENO) && !getenv("CANOPY_NO_PROGRESS");
    pr->color = pr->enabled && !getenv("NO_COLOR");
    pr->drawn = false;
    pr->start_ns = cn_common_now_ns();
    pr->last_draw_ns = 0;
}

void cn_cli_progress_update(cn_cli_progress *pr, int64_t samples, int64_t lost, bool force)
{
    if (!pr->enabled)
        return;
    int64_t now = cn_common_now_ns();
    if (!force && pr->drawn && now - pr->last_draw_ns < 250000000)
        return;
    double elapsed = (double)(now - pr->start_ns) / 1e9;
    const char *dim = pr->color ? "\033[2m" : "", *bold = pr->color ? "\033[1m" : "";
    const char *red = pr->color && lost > 0 ? "\033[31m" : "", *off = pr->color ? "\033[0m" : "";
    fprintf(stderr, "\r\033[K%scanopy:%s %s%.1fs%s  %s%lld%s samples  %s%lld lost%s", dim, off,
            bold, elapsed, off, bold, (long long)samples, off, red, (long long)lost, off);
    fflush(stderr);
    pr->drawn = true;
    pr->last_draw_ns = now;
}

void cn_cli_progress_end(cn_cli_progress *pr)
{
    if (pr->enabled && pr->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    pr->drawn = false;
}
