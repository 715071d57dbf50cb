/* fuzz_import_folded.c — libFuzzer target for the importer of folded stacks.
 * On success a plain query runs over the profile; everything is freed. */
#include <stddef.h>
#include <stdint.h>

#include "agg_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cn_agg_profile *p = NULL;
    cn_agg_err err;
    if (cn_agg__import_folded((const char *)data, size, "fuzz.folded", &p, &err) != 0)
        return 0;
    cn_agg_query q;
    cn_agg_tree *t = NULL;
    cn_agg_query_init(&q);
    if (cn_agg_query_run(p, &q, &t, &err) == 0)
        cn_agg_tree_free(t);
    cn_agg_profile_free(p);
    return 0;
}
