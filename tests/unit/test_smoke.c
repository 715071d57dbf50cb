/* Smoke test: the build links and the engine header is usable. Replaced by module tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cn_agg.h"

static void test_unit_names(void **state)
{
    (void)state;
    assert_int_equal(CN_AGG_UNIT_SAMPLES, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_unit_names)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
