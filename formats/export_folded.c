/* export_folded.c — folded stacks (`f1;f2;...;fn COUNT`, root first) after transforms.
 *
 * The query is run as a plain call tree (whatever view it asks for): every node with
 * self weight is one stack, its path of displayed names joined by ';' (a Python function
 * marked py-spy's way, `NAME (FILE)`: frame_kind.c). Two funcs may
 * share a displayed name (same symbol in two libraries), so equal stack texts are merged
 * after sorting. Counts are the profile's raw weights (sample counts for sampled and
 * .cpuprofile input, periods for perf script input), not the scaled display values, so
 * that the output reads back as the same profile.
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "export_internal.h"

struct folded_line {
    char *text; /* owned */
    double weight;
};

struct folded_ctx {
    const cn_agg_profile *p;
    const cn_agg_tree *t;
    struct folded_line *lines;
    size_t n, cap;
    char *path; /* the current path text, grown as needed */
    size_t path_cap;
};

/* One line per node with self weight, its path text built from the parent's: plen[d] is
 * the length of the current path above depth d. Iterative (deep stacks). */
static int collect(struct folded_ctx *c)
{
    int32_t *order = NULL, *depth = NULL;
    size_t n = 0, *plen = NULL;
    int rc = cn_fmt__tree_preorder(c->t, &order, &depth, &n);

    if (rc == 0 && !(plen = calloc(n + 2, sizeof(*plen))))
        rc = -ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const cn_agg_node *nd = &c->t->nodes[order[i]];
        /* Pre-order: a node is at most one deeper than the one before (a root first), so
         * plen[depth[i]] is its parent's path, set by the latest node above it. */
        assert(depth[i] >= 0 && depth[i] <= (i ? depth[i - 1] + 1 : 0));
        long nlen = cn_fmt__folded_frame(c->p, nd->func, &c->path, &c->path_cap, plen[depth[i]]);
        if (nlen < 0) {
            rc = -ENOMEM;
            break;
        }
        plen[depth[i] + 1] = (size_t)nlen;
        if (nd->self == 0)
            continue;
        if (CN_RESERVE(c->lines, c->cap, c->n + 1) < 0 ||
            !(c->lines[c->n].text = strdup(c->path))) {
            rc = -ENOMEM;
            break;
        }
        c->lines[c->n++].weight = nd->self;
    }
    free(order);
    free(depth);
    free(plen);
    return rc;
}

static int cmp_line(const void *a, const void *b)
{
    return strcmp(((const struct folded_line *)a)->text, ((const struct folded_line *)b)->text);
}

static int print_lines(struct folded_ctx *c, FILE *out)
{
    if (c->n > 1)
        qsort(c->lines, c->n, sizeof(*c->lines), cmp_line);
    for (size_t i = 0; i < c->n;) {
        double w = c->lines[i].weight;
        size_t j = i + 1;
        while (j < c->n && !strcmp(c->lines[j].text, c->lines[i].text))
            w += c->lines[j++].weight;
        int r;
        if (w == floor(w) && fabs(w) < 1e15)
            r = fprintf(out, "%s %.0f\n", c->lines[i].text, w);
        else
            r = fprintf(out, "%s %.17g\n", c->lines[i].text, w);
        if (r < 0)
            return -EIO;
        i = j;
    }
    return 0;
}

int cn_fmt_write_folded(cn_agg_profile *p, const cn_agg_query *q, FILE *out, cn_err *err)
{
    cn_agg_query tq;
    cn_agg_tree *tree = NULL;
    struct folded_ctx c = {0};
    int rc;

    if (!p || !q || !out)
        return cn_err_set(err, -EINVAL, "folded output: bad arguments");
    tq = *q;
    tq.view = CN_AGG_VIEW_TREE;
    tq.view_func = NULL;
    rc = cn_agg_query_run(p, &tq, &tree, err);
    if (rc < 0)
        return rc;
    c.p = p;
    c.t = tree;
    rc = collect(&c);
    if (rc == 0)
        rc = print_lines(&c, out);
    if (rc < 0)
        cn_err_set(err, rc, "folded output: %s", rc == -ENOMEM ? "out of memory" : "write error");
    for (size_t i = 0; i < c.n; i++)
        free(c.lines[i].text);
    free(c.lines);
    free(c.path);
    cn_agg_tree_free(tree);
    return rc;
}
