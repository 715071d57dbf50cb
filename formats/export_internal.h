/* export_internal.h — the pre-order and visibility helpers (export_text.c) that the tree
 * writers (text, JSON, folded) share.
 *
 * Trees can be as deep as the stacks the importers and the sampler accept (tens of
 * thousands of frames), so writers never recurse: they walk a pre-order computed with
 * the nodes' parent links, and JSON is streamed by hand rather than built as a nested
 * jansson document (whose dumper recurses), with json_out.h's string and number writers.
 */
#ifndef CN_FMT_EXPORT_INTERNAL_H
#define CN_FMT_EXPORT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "formats_internal.h"

/* The tree's nodes in pre-order (each root, then its subtree, in sibling order) and
 * each one's depth (roots 0). *order and *depth are malloc'ed (caller frees both);
 * *n is the number of nodes reached. Returns 0 or -ENOMEM. */
int cn_fmt__tree_preorder(const cn_agg_tree *t, int32_t **order, int32_t **depth, size_t *n);

/* Which nodes to show (indexed by node id, malloc'ed into *visible, caller frees): a node
 * is shown when its depth is below max_depth (-1: any), its |total| is at least
 * min_percent of denom (0: any), its total is not 0 or it has a shown child, and its
 * parent is shown. Returns 0 or -ENOMEM. */
int cn_fmt__tree_visible(const cn_agg_tree *t, const int32_t *order, const int32_t *depth, size_t n,
                         int max_depth, double min_percent, double denom, bool **visible);

#endif /* CN_FMT_EXPORT_INTERNAL_H */
