/* test_qcache_samples.c — the query cache's per-sample base rows (query.c) stay exact when
 * the sample table changes under them: samples appended, re-sorted by time (out-of-order
 * adds), folded out by retention, and time ranges / thread filters over several chunks.
 * Every cached query is compared node by node with the same query run without a cache.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "agg_internal.h"

#define NFUNC 12

static uint64_t rng = 88172645463325252ULL;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* A random stack of 1..6 frames over NFUNC funcs. */
static int32_t rand_stack(cn_agg_profile *p, const int32_t *frames)
{
    int32_t fr[6];
    size_t d = 1 + rnd(6);
    for (size_t i = 0; i < d; i++)
        fr[i] = frames[rnd(NFUNC)];
    int32_t s = cn_agg_stack_from_frames(p, fr, d);
    assert_true(s >= 0);
    return s;
}

/* Runs q with and without the cache and asserts identical trees. */
static void check(cn_agg_profile *p, struct cn_agg__qcache **cache, const cn_agg_query *q)
{
    cn_agg_tree *a = NULL, *b = NULL;
    cn_err err;
    assert_int_equal(cn_agg__query_run_cached(p, cache, q, &a, &err), 0);
    assert_int_equal(cn_agg__query_run_cached(p, NULL, q, &b, &err), 0);
    assert_true(a->total == b->total);
    assert_int_equal(a->n_nodes, b->n_nodes);
    assert_int_equal(a->first_root, b->first_root);
    for (size_t i = 0; i < a->n_nodes; i++) {
        assert_int_equal(a->nodes[i].func, b->nodes[i].func);
        assert_int_equal(a->nodes[i].parent, b->nodes[i].parent);
        assert_int_equal(a->nodes[i].first_child, b->nodes[i].first_child);
        assert_int_equal(a->nodes[i].next_sibling, b->nodes[i].next_sibling);
        assert_true(a->nodes[i].total == b->nodes[i].total);
        assert_true(a->nodes[i].self == b->nodes[i].self);
    }
    cn_agg_tree_free(a);
    cn_agg_tree_free(b);
}

static void check_all(cn_agg_profile *p, struct cn_agg__qcache **cache, int64_t tmax)
{
    cn_agg_query q;
    cn_agg_query_init(&q);
    check(p, cache, &q);
    q.from_ns = tmax / 3;
    q.to_ns = tmax / 3 * 2;
    check(p, cache, &q);
    cn_agg_query_init(&q);
    q.tid = 11;
    check(p, cache, &q);
}

static void test_cache_follows_samples(void **state)
{
    (void)state;
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    struct cn_agg__qcache *cache = NULL;
    int32_t res = cn_agg_resource(p, "lib", NULL, NULL, CN_AGG_RES_LIBRARY);
    int32_t th[2] = {cn_agg_thread(p, 10, 10, "a"), cn_agg_thread(p, 10, 11, "b")};
    int32_t frames[NFUNC];
    for (int i = 0; i < NFUNC; i++) {
        char name[16];
        snprintf(name, sizeof(name), "f%d", i % 9); /* some names shared by two funcs */
        int32_t f = cn_agg_func(p, name, i < 9 ? res : -1, NULL, 0);
        frames[i] = cn_agg_frame(p, f, res, i, 0);
        assert_true(frames[i] >= 0);
    }
    /* Several chunks' worth of samples, in time order. */
    int64_t t = 0;
    for (int i = 0; i < 20000; i++, t += 10)
        assert_int_equal(cn_agg_add_sample(p, rand_stack(p, frames), t, 1 + rnd(3), th[i & 1]), 0);
    check_all(p, &cache, t);
    /* Appended samples, some new stacks; a partial last chunk grows. */
    for (int i = 0; i < 3000; i++, t += 10)
        assert_int_equal(cn_agg_add_sample(p, rand_stack(p, frames), t, 2, th[i & 1]), 0);
    check_all(p, &cache, t);
    /* Out-of-order samples: the next query re-sorts, moving samples between chunks. */
    for (int i = 0; i < 500; i++)
        assert_int_equal(
            cn_agg_add_sample(p, rand_stack(p, frames), (int64_t)rnd((uint32_t)t), 5, th[0]), 0);
    check_all(p, &cache, t);
    /* Retention folds the oldest samples out: everything shifts down. */
    assert_true(cn_agg_fold_before(p, t / 4) > 0);
    check_all(p, &cache, t);
    /* Samples without a stack. */
    for (int i = 0; i < 100; i++, t += 10)
        assert_int_equal(cn_agg_add_sample(p, -1, t, 1, th[1]), 0);
    check_all(p, &cache, t);
    cn_agg__qcache_free(cache);
    cn_agg_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_follows_samples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
