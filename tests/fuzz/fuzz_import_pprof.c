/* fuzz_import_pprof.c — the pprof importer (import_pprof.c) on arbitrary bytes, and, when
 * a profile comes out, every exporter on it (pprof, speedscope, SVG), so a
 * hostile profile can neither crash the parser nor the writers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cn_fmt.h"
#include "import_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cn_agg_profile *p = NULL;
    cn_err err = {0};
    (void)cn_fmt__is_pprof(data, size);
    if (cn_fmt__import_pprof(data, size, "fuzz", &p, &err) < 0)
        return 0;
    cn_agg_query q;
    cn_agg_query_init(&q);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (out) {
        cn_fmt_write_pprof(p, &q, out, &err);
        cn_fmt_write_speedscope(p, &q, out, &err);
        cn_fmt_write_svg(p, &q, NULL, out, &err);
        fclose(out);
    }
    free(buf);
    cn_agg_profile_free(p);
    return 0;
}
