/* fuzz_import_tree_json.c — libFuzzer target for the importer of canopy's JSON tree (the streaming
 * yajl parser fed in one chunk). On success a plain query runs over the profile; everything is
 * freed. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cn_agg_profile *p = NULL;
    cn_err err;
    if (cn_fmt__import_tree_json((const char *)data, size, "fuzz.json", &p, &err) != 0)
        return 0;
    return cn_fuzz_query_and_free(p);
}
