/* otlp.c — an OTLP/HTTP export request as a pusher batch (docs/fleet.md, "Pushing OTLP
 * profiles"). The request's bytes come from the caller (canopyd writes them with formats/'
 * one OTLP encoder); nothing here knows the profiles signal. */
#include <errno.h>

#include "cn_fleet.h"

int cn_fleet_otlp_set(cn_fleet_batch *b, const void *req, size_t len, int64_t time_s)
{
    if (!b || !req || len == 0 || cn_buf_len(&b->samples) || b->sample_rows)
        return -EINVAL;
    if (cn_buf_append(&b->samples, req, len) < 0)
        return -ENOMEM;
    b->sample_rows = 1;
    b->weight_samples = 1;
    if (time_s < b->time_s)
        b->time_s = time_s;
    return 0;
}
