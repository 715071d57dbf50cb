/* fuzz_import_folded.c — libFuzzer target for the importer of folded stacks.
 * On success a plain query runs over the profile; everything is freed. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cn_agg_profile *p = NULL;
    cn_err err;
    if (cn_fmt__import_folded((const char *)data, size, "fuzz.folded", &p, &err) != 0)
        return 0;
    return cn_fuzz_query_and_free(p);
}
