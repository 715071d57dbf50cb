/* test_callchain_cache.c — the whole-callchain cache of aggregate/ingest.c is bounded by
 * two generations: what is used stays, what is not goes, memory does not grow with the
 * callchains a session has seen, and a callchain that fell out of the cache is interned
 * again to the same stack.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "agg_internal.h"

enum { GEN = 64, PUTS = 1000, HOT = 100000 };

/* One generation holds GEN entries: after PUTS others, the first key is gone, the last
 * GEN are there, and a key looked up every few puts survived every rotation. */
static void test_generations_keep_what_is_used(void **state)
{
    (void)state;
    cn_agg__stack_cache c = {.max_entries = GEN};
    cn_agg__cache_put(&c, HOT, 7, 1);
    for (int32_t i = 1; i <= PUTS; i++) {
        cn_agg__cache_put(&c, (uint64_t)i + HOT, 0, i);
        if (i % 16 == 0)
            assert_int_equal(cn_agg__cache_get(&c, HOT, 7), 1);
    }
    assert_int_equal(cn_agg__cache_get(&c, HOT, 7), 1);
    assert_int_equal(cn_agg__cache_get(&c, HOT, 8), -1); /* hi is part of the key */
    assert_int_equal(cn_agg__cache_get(&c, 1 + HOT, 0), -1);
    for (int32_t i = PUTS - GEN + 1; i <= PUTS; i++)
        assert_int_equal(cn_agg__cache_get(&c, (uint64_t)i + HOT, 0), i);
    assert_true(cn_agg__cache_count(&c) <= 2 * GEN + 1);
    size_t bytes = cn_agg__cache_bytes(&c);
    for (int32_t i = PUTS + 1; i <= 4 * PUTS; i++)
        cn_agg__cache_put(&c, (uint64_t)i + HOT, 0, i);
    assert_int_equal(cn_agg__cache_bytes(&c), bytes); /* bounded: no growth */
    cn_agg__cache_clear(&c);
    assert_int_equal(cn_agg__cache_count(&c), 0);
    assert_int_equal(cn_agg__cache_get(&c, 4 * PUTS + HOT, 0), -1);
}

enum { CHAINS = 2000, DEPTH = 12 };

static void chain(cn_agg_frame_ref *refs, int k)
{
    for (int d = 0; d < DEPTH; d++) /* leaf first; chains share their outer frames */
        refs[d] = (cn_agg_frame_ref){0, d == 0 ? 0x1000u + (uint64_t)k
                                               : 0x100u * (uint64_t)d + (uint64_t)(k % 7)};
}

/* A profile whose cache holds far fewer callchains than it has seen gives every one of
 * them its stack again, before and after a compaction, without new stack rows. */
static void test_profile_with_a_small_cache(void **state)
{
    (void)state;
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    p->cache.max_entries = GEN;
    assert_int_equal(cn_agg_resource(p, "lib.so", NULL, NULL, CN_AGG_RES_LIBRARY), 0);
    int32_t thr = cn_agg_thread(p, 1, 1, "t");
    static int32_t stack[CHAINS];
    cn_agg_frame_ref refs[DEPTH];
    for (int k = 0; k < CHAINS; k++) {
        chain(refs, k);
        stack[k] = cn_agg_stack_from_refs(p, refs, DEPTH);
        assert_true(stack[k] >= 0);
        assert_int_equal(cn_agg_add_sample(p, stack[k], k, 1, thr), 0);
    }
    size_t rows = cn_agg_stack_count(p);
    assert_true(cn_agg__cache_count(&p->cache) <= 2 * GEN);
    for (int pass = 0; pass < 2; pass++) {
        for (int k = CHAINS; k-- > 0;) {
            chain(refs, k);
            assert_int_equal(cn_agg_stack_from_refs(p, refs, DEPTH), stack[k]);
        }
        assert_int_equal(cn_agg_stack_count(p), rows);
        cn_agg_compact_stats st;
        assert_int_equal(cn_agg_compact(p, 0, &st), 0); /* every stack is a raw sample's */
        assert_int_equal(st.stacks_after, rows);
        assert_true(st.cached_after <= 2 * GEN);
        assert_int_equal(p->cache.max_entries, GEN);
    }
    cn_agg_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generations_keep_what_is_used),
        cmocka_unit_test(test_profile_with_a_small_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
