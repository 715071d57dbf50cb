/* Placeholder for issue 6's formats until they land: each reports it is not built. */
#include <errno.h>

#include "agg_internal.h"

int cn_agg_write_pprof(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_agg_err *err)
{
    return cn_agg_err_set(err, -ENOTSUP, "pprof output is not implemented yet");
}

int cn_agg_write_speedscope(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_agg_err *err)
{
    return cn_agg_err_set(err, -ENOTSUP, "speedscope output is not implemented yet");
}

int cn_agg_write_svg(cn_agg_profile *p, const cn_agg_query *q, const cn_agg_write_opts *o,
                     FILE *out, cn_agg_err *err)
{
    return cn_agg_err_set(err, -ENOTSUP, "SVG output is not implemented yet");
}

int cn_agg__import_pprof(const void *data, size_t len, const char *name, cn_agg_profile **out,
                         cn_agg_err *err)
{
    return cn_agg_err_set(err, -ENOTSUP, "%s: pprof input is not implemented yet", name);
}

bool cn_agg__is_pprof(const void *data, size_t len)
{
    return false;
}
