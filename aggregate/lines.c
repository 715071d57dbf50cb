/* lines.c — self weight per source line and per address inside one function
 * (`canopy lines`, docs/calltree.md §4.5).
 *
 * A sample counts when, after the query, its innermost func is named F. Its weight goes
 * to the line and the address of the innermost frame of its stack whose func chain holds
 * F (the leaf frame unless a transform merged frames below F). Lines and addresses are
 * accumulated in two hash maps, then sorted by key.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "q_engine.h"

typedef struct acc {
    cn_u64map index;
    cn_agg_line_row *rows;
    size_t n, cap;
} acc;

static int acc_add(acc *a, int64_t key, double w)
{
    int32_t r = cn_u64map_get(&a->index, (uint64_t)key);
    if (r < 0) {
        if (CN_RESERVE(a->rows, a->cap, a->n + 1) < 0)
            return -ENOMEM;
        r = (int32_t)a->n;
        if (cn_u64map_put(&a->index, (uint64_t)key, r) < 0)
            return -ENOMEM;
        a->rows[a->n++] = (cn_agg_line_row){.key = key, .self = 0};
    }
    a->rows[r].self += w;
    return 0;
}

static int row_cmp(const void *x, const void *y)
{
    int64_t a = ((const cn_agg_line_row *)x)->key, b = ((const cn_agg_line_row *)y)->key;
    return a < b ? -1 : a > b;
}

/* The innermost frame on stack s whose chain holds a func named F (whose outer func, by
 * its symbol func when it has one, is named F, no_inline), or -1. */
static int32_t frame_of(const cn_agg_profile *p, int32_t s, int32_t F, bool no_inline)
{
    for (; s >= 0; s = p->stack_prefix[s]) {
        int32_t fr = p->stack_frame[s];
        const int32_t *chain = p->chain_pool + p->frame_chain[fr];
        uint16_t depth = p->frame_depth[fr];
        if (no_inline) {
            chain = p->frame_sym_func[fr] >= 0 ? &p->frame_sym_func[fr] : chain;
            depth = 1;
        }
        for (uint16_t d = 0; d < depth; d++)
            if (p->func_name[chain[d]] == F)
                return fr;
    }
    return -1;
}

static int add_sample(const cn_agg__qrun *run, int32_t F, int32_t stack, int32_t thread, double w,
                      acc *lines, acc *addrs)
{
    const cn_agg_profile *p = run->p;
    if (!cn_agg__qrun_keep(run, thread))
        return 0;
    int32_t b = cn_agg__qrun_base(run, stack, thread);
    int32_t r = b >= 0 ? run->rmap[b] : -1;
    if (r < 0 || p->func_name[run->t.func[r]] != F)
        return 0;
    int32_t fr = frame_of(p, stack, F, run->q->no_inline);
    if (fr < 0)
        return 0;
    if (p->frame_line[fr] > 0 && acc_add(lines, p->frame_line[fr], w) < 0)
        return -ENOMEM;
    if (p->frame_addr[fr] >= 0 && acc_add(addrs, p->frame_addr[fr], w) < 0)
        return -ENOMEM;
    return 0;
}

int cn_agg_lines(cn_agg_profile *p, const cn_agg_query *q, const char *func,
                 cn_agg_line_row **lines, size_t *n_lines, cn_agg_line_row **addrs, size_t *n_addrs,
                 cn_err *err)
{
    acc la = {0}, aa = {0};
    cn_agg__qrun run;
    int rc;
    int32_t F = cn_agg__q_name_id(p, func);
    memset(&run, 0, sizeof(run));
    if (F < 0) {
        rc = cn_err_set(err, -ENOENT, "lines: no function '%s' in the profile", func);
        goto out;
    }
    rc = cn_agg__qrun_init(&run, p, q, CN_AGG__QCACHE(p), err);
    if (rc == 0)
        rc = cn_agg__qrun_transform_all(&run, err);
    if (rc < 0)
        goto out;
    for (size_t i = run.lo; i < run.hi && rc == 0; i++)
        rc = add_sample(&run, F, p->s_stack[i], p->s_thread[i], cn_agg__weight(p, i), &la, &aa);
    for (size_t i = 0; run.with_acc && i < p->n_acc && rc == 0; i++)
        rc = add_sample(&run, F, p->acc_stack[i], p->acc_thread[i], p->acc_weight[i], &la, &aa);
    if (rc < 0) {
        rc = cn_err_set(err, rc, "lines: out of memory");
        goto out;
    }
    if (la.n > 1) /* an empty array may be NULL, which qsort must not see */
        qsort(la.rows, la.n, sizeof(*la.rows), row_cmp);
    if (aa.n > 1)
        qsort(aa.rows, aa.n, sizeof(*aa.rows), row_cmp);
    *lines = la.rows;
    *n_lines = la.n;
    *addrs = aa.rows;
    *n_addrs = aa.n;
    la.rows = aa.rows = NULL;
out:
    free(la.rows);
    free(aa.rows);
    cn_u64map_clear(&la.index);
    cn_u64map_clear(&aa.index);
    cn_agg__qrun_free(&run);
    return rc;
}
