/* fuzz_common.h — what the importer fuzz targets share: after an importer accepted the
 * input, a plain query runs over the profile (so a hostile profile cannot crash the query
 * engine either) and everything is freed. Header-only: each target is its own binary.
 */
#ifndef CN_FUZZ_COMMON_H
#define CN_FUZZ_COMMON_H

#include "cn_fmt.h"
#include "import_internal.h"

/* Runs the default query (whole tree, no transforms) on p, ignoring its result, then frees
 * p. Takes ownership of p (NULL is accepted). Returns 0, libFuzzer's "input processed". */
static inline int cn_fuzz_query_and_free(cn_agg_profile *p)
{
    cn_agg_query q;
    cn_agg_tree *t = NULL;
    cn_err err;

    if (p) {
        cn_agg_query_init(&q);
        if (cn_agg_query_run(p, &q, &t, &err) == 0)
            cn_agg_tree_free(t);
    }
    cn_agg_profile_free(p);
    return 0;
}

#endif /* CN_FUZZ_COMMON_H */
