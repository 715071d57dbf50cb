/* test_sampler_python.c — the splice's plan (sampler/python.c, docs/python.md "Phase 2"):
 * a record's Python frames cut into one segment per eval-loop call, and the stack that
 * results from native frames (some in the eval loop) and those segments, leaf first. The
 * join itself needs a BPF program and a real interpreter: integration.test_python_frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "smp_internal.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Frames from a string, innermost first: 'E' an entry frame, '.' another. */
static uint32_t frames_of(const char *spec, cn_int_frame *f)
{
    uint32_t n = 0;
    for (const char *c = spec; *c; c++, n++)
        f[n] = (cn_int_frame){.code = 0x1000 + n, .instr = (int32_t)n, .entry = *c == 'E'};
    return n;
}

static void test_segments(void **state)
{
    (void)state;
    cn_int_frame f[CN_INT_MAX_FRAMES];
    uint32_t end[CN_INT_MAX_FRAMES];
    /* 3.11+: inlined Python calls share one eval call; the outermost frame of each call is
     * flagged. */
    uint32_t n = frames_of("..E.E", f);
    assert_int_equal(cn_smp__py_segments(f, n, end), 2);
    assert_int_equal(end[0], 3);
    assert_int_equal(end[1], 5);
    /* 3.8-3.10: every frame is its own eval call. */
    n = frames_of("EEE", f);
    assert_int_equal(cn_smp__py_segments(f, n, end), 3);
    assert_int_equal(end[2], 3);
    /* A truncated record: the frames past the last flagged one are one more segment. */
    n = frames_of(".E..", f);
    assert_int_equal(cn_smp__py_segments(f, n, end), 2);
    assert_int_equal(end[0], 2);
    assert_int_equal(end[1], 4);
    /* None flagged (a record whose walk faulted early): one segment. */
    n = frames_of("...", f);
    assert_int_equal(cn_smp__py_segments(f, n, end), 1);
    assert_int_equal(end[0], 3);
    assert_int_equal(cn_smp__py_segments(f, 0, end), 0);
}

/* The plan of natives (a string, leaf first: 'e' an eval-loop frame, 't' a -X perf
 * trampoline, 'n' another) and nseg segments, written as "n0 S0 n2 ..." (native index,
 * segment index). */
static void plan_as(const char *natives, uint32_t nseg, bool whole, const char *want,
                    bool want_matched)
{
    uint8_t kind[64];
    int32_t steps[128];
    char got[512] = "";
    int nuser = (int)strlen(natives);
    for (int i = 0; i < nuser; i++)
        kind[i] = natives[i] == 'e'   ? CN_SMP__PY_EVAL
                  : natives[i] == 't' ? CN_SMP__PY_TRAMPOLINE
                                      : CN_SMP__PY_NATIVE;
    bool matched;
    uint32_t n = cn_smp__py_plan(kind, nuser, nseg, whole, steps, &matched);
    for (uint32_t k = 0; k < n; k++) {
        size_t len = strlen(got);
        snprintf(got + len, sizeof(got) - len, "%s%c%d", k ? " " : "", steps[k] >= 0 ? 'n' : 'S',
                 steps[k] >= 0 ? steps[k] : -steps[k] - 1);
    }
    if (strcmp(got, want) != 0)
        fail_msg("natives %s, %u segments: got \"%s\", want \"%s\"", natives, nseg, got, want);
    assert_int_equal(matched, want_matched);
}

static void plan(const char *natives, uint32_t nseg, const char *want, bool want_matched)
{
    plan_as(natives, nseg, false, want, want_matched);
}

static void test_plan(void **state)
{
    (void)state;
    /* A C function (n0: deflate) called from the innermost Python function stays under it;
     * the native frames between two eval calls (n2: PyObject_Vectorcall) stay between them;
     * the interpreter's start (n4, n5) stays outermost. */
    plan("nenenn", 2, "n0 S0 n2 S1 n4 n5", true);
    /* More segments than eval frames (the native unwind stopped short): the outer segments
     * above the outermost native frame, nothing lost. */
    plan("nen", 3, "n0 S0 n2 S1 S2", false);
    /* No eval frame found (an eval loop without its symbol): every segment on top. */
    plan("nn", 2, "n0 n1 S0 S1", false);
    /* More eval frames than segments (a truncated record): the outer ones stay native. */
    plan("eene", 2, "S0 S1 n2 n3", false);
    /* Leaf in the eval loop itself (a pure-Python loop). */
    plan("enn", 1, "S0 n1 n2", true);
    /* No segment: the native stack as it is. */
    plan("nen", 0, "n0 n1 n2", false);
    plan("", 2, "S0 S1", false);
    /* 3.12's -X perf: the unwind stops at the trampoline that called the innermost eval
     * call; the trampoline goes with its eval frame, the outer segments above. */
    plan("nnet", 3, "n0 n1 S0 S1 S2", false);
    /* A trampoline whose eval frame stays native (no segment left) stays too. */
    plan("netent", 1, "n0 S0 n3 n4 n5", false);
    /* A whole chain, one eval frame more: the innermost call is entering or leaving the eval
     * loop, its frames not in the chain; the segments are the outer calls' (the key function
     * of a sort: the module's frames stay outermost, the sort's frames above them). */
    plan_as("enenn", 1, true, "n0 n1 S0 n3 n4", false);
    plan_as("eneenn", 2, true, "n0 n1 S0 S1 n4 n5", false);
    /* Whole and matched: the same as ever. */
    plan_as("nenenn", 2, true, "n0 S0 n2 S1 n4 n5", true);
    /* Whole with more segments than eval frames (the native unwind cut short): as ever. */
    plan_as("nen", 3, true, "n0 S0 n2 S1 S2", false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segments),
        cmocka_unit_test(test_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
