/* test_query_opts.c — QUERY option parsing (client/query_opts.c) into a cn_fmt_spec: every
 * option, the --opt=VALUE form, formats from -o extensions (cn_fmt_format_from_path),
 * durations (cn_common_parse_duration, the one parser), and the time range resolved
 * against a profile's last sample (cn_fmt_spec_resolve); the same parser reporting into a
 * cn_err (cn_cli_query_opt) and `canopy web`'s page queries (cn_cli_web_query). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "client.h"
#include "web.h"

/* Parses every argument of argv as a query option; returns the last result. */
static int parse_all(cn_cli_query *q, int argc, char **argv)
{
    int r = 0;
    for (int i = 0; i < argc; i++) {
        r = cn_cli_parse_query_opt(q, argc, argv, &i);
        if (r <= 0)
            return r;
    }
    return cn_cli_query_finish(q) < 0 ? -1 : 1;
}

static void test_all_options(void **state)
{
    (void)state;
    char *argv[] = {"-t",
                    "merge:malloc",
                    "--transform=focus:main;run",
                    "--callers",
                    "F",
                    "--callers-mode",
                    "self",
                    "--group-by",
                    "thread",
                    "--from",
                    "1.5",
                    "--to=3",
                    "--tid",
                    "42",
                    "--only-pid",
                    "7",
                    "--depth",
                    "4",
                    "--min-percent",
                    "0.5",
                    "--no-inline",
                    "-o",
                    "x.svg"};
    cn_cli_query q;
    cn_cli_query_init(&q);
    assert_int_equal(parse_all(&q, (int)(sizeof(argv) / sizeof(argv[0])), argv), 1);
    assert_int_equal(q.spec.n_transforms, 2);
    assert_int_equal(q.spec.transforms[0].kind, CN_AGG_TF_MERGE);
    assert_int_equal(q.spec.transforms[1].kind, CN_AGG_TF_FOCUS);
    assert_int_equal(q.spec.transforms[1].path_len, 2);
    assert_ptr_equal(q.spec.query.transforms, q.spec.transforms);
    assert_int_equal(q.spec.query.view, CN_AGG_VIEW_CALLERS);
    assert_string_equal(q.spec.query.view_func, "F");
    assert_int_equal(q.spec.query.callers_mode, CN_AGG_CALLERS_SELF);
    assert_int_equal(q.spec.query.group_by, CN_AGG_GROUP_THREAD);
    assert_true(q.spec.from_s == 1.5 && q.spec.to_s == 3.0);
    assert_int_equal(q.spec.query.tid, 42);
    assert_int_equal(q.spec.query.pid, 7);
    assert_int_equal(q.spec.depth, 4);
    assert_true(q.spec.min_percent == 0.5);
    assert_true(q.spec.query.no_inline);
    assert_int_equal(q.spec.format, CN_FMT_SVG);
    assert_string_equal(q.output, "x.svg");
    cn_cli_query_clear(&q);
}

static void test_rejects(void **state)
{
    (void)state;
    struct {
        int argc;
        char *argv[4];
    } bad[] = {
        {2, {"--format", "xml"}},
        {2, {"--depth", "0"}},
        {2, {"--group-by", "cpu"}},
        {2, {"--last", "5 parsecs"}},
        {2, {"--callers-mode", "all"}},
        {2, {"-t", "nosuch:X"}},
        {1, {"--callees"}},
        {3, {"--invert", "--callees", "F"}},
        {2, {"--min-percent", "101"}},
        {2, {"--tid", "-3"}},
        {4, {"--last", "1s", "--from", "0"}},
        {4, {"--from", "5", "--to", "1"}},
        {2, {"--callers-mode", "self"}}, /* without --callers */
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        cn_cli_query q;
        cn_cli_query_init(&q);
        assert_int_equal(parse_all(&q, bad[k].argc, bad[k].argv), -1);
        cn_cli_query_clear(&q);
    }
    /* Not a query option: left to the command. */
    char *other[] = {"--bogus"};
    cn_cli_query q;
    cn_cli_query_init(&q);
    int i = 0;
    assert_int_equal(cn_cli_parse_query_opt(&q, 1, other, &i), 0);
    cn_cli_query_clear(&q);
}

static void test_formats_from_extension(void **state)
{
    (void)state;
    struct {
        const char *path;
        cn_fmt_format f;
    } cases[] = {
        {"a.json", CN_FMT_JSON},
        {"a.speedscope.json", CN_FMT_SPEEDSCOPE},
        {"a.firefox.json", CN_FMT_FIREFOX},
        {"a.trace.json", CN_FMT_CHROME_TRACE},
        {"a.folded", CN_FMT_FOLDED},
        {"a.pb.gz", CN_FMT_PPROF},
        {"a.pb", CN_FMT_PPROF},
        {"a.otlp.pb", CN_FMT_OTLP},
        {"a.svg", CN_FMT_SVG},
        {"a.canopy", CN_FMT_CANOPY},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        cn_fmt_format f;
        assert_int_equal(cn_fmt_format_from_path(cases[k].path, &f), 0);
        assert_int_equal(f, cases[k].f);
    }
    cn_fmt_format f;
    assert_true(cn_fmt_format_from_path("a.txt.bak", &f) < 0);
    /* --format wins over the extension */
    char *argv[] = {"--format", "folded", "-o", "x.json"};
    cn_cli_query q;
    cn_cli_query_init(&q);
    assert_int_equal(parse_all(&q, 4, argv), 1);
    assert_int_equal(q.spec.format, CN_FMT_FOLDED);
    cn_cli_query_clear(&q);
}

static void test_durations(void **state)
{
    (void)state;
    int64_t ns;
    assert_int_equal(cn_common_parse_duration("30s", &ns), 0);
    assert_true(ns == 30000000000LL);
    assert_int_equal(cn_common_parse_duration("5m", &ns), 0);
    assert_true(ns == 300000000000LL);
    assert_int_equal(cn_common_parse_duration("1.5", &ns), 0);
    assert_true(ns == 1500000000LL);
    assert_int_equal(cn_common_parse_duration("250us", &ns), 0);
    assert_true(ns == 250000);
    assert_int_equal(cn_common_parse_duration("2h", &ns), 0);
    assert_true(ns == 7200000000000LL);
    assert_true(cn_common_parse_duration("", &ns) < 0);
    assert_true(cn_common_parse_duration("-1s", &ns) < 0);
    assert_true(cn_common_parse_duration("3 s", &ns) < 0);
    assert_true(cn_common_parse_duration("1e300h", &ns) < 0);
}

static void test_last_is_relative_to_the_last_sample(void **state)
{
    (void)state;
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    assert_int_equal(cn_agg_add_sample(p, -1, 1000000000LL, 1, -1), 0);
    assert_int_equal(cn_agg_add_sample(p, -1, 9000000000LL, 1, -1), 0);
    char *argv[] = {"--last", "2s"};
    cn_cli_query q;
    cn_cli_query_init(&q);
    assert_int_equal(parse_all(&q, 2, argv), 1);
    cn_agg_query r;
    cn_fmt_spec_resolve(p, &q.spec, NULL, &r);
    assert_true(r.from_ns == 7000000000LL);
    assert_true(r.to_ns == INT64_MAX);
    cn_cli_query_clear(&q);

    char *argv2[] = {"--from", "0.5", "--to", "2"};
    cn_cli_query_init(&q);
    assert_int_equal(parse_all(&q, 4, argv2), 1);
    cn_fmt_spec_resolve(p, &q.spec, NULL, &r);
    assert_true(r.from_ns == 500000000LL);
    assert_true(r.to_ns == 2000000000LL);
    cn_cli_query_clear(&q);
    cn_agg_profile_free(p);
}

/* The parser's errors land in a cn_err, not on stderr, for callers that report them. */
static void test_error_into_err(void **state)
{
    (void)state;
    cn_cli_query q;
    cn_err err = {0};
    char *argv[] = {"--depth", "zero"};
    int i = 0;

    cn_cli_query_init(&q);
    assert_int_equal(cn_cli_query_opt(&q, 2, argv, &i, &err), -1);
    assert_string_equal(err.msg, "--depth 'zero': expected a positive integer");
    char *last[] = {"--last", "5s", "--from", "1"};
    cn_cli_query_clear(&q);
    memset(&err, 0, sizeof(err));
    for (i = 0; i < 4; i++)
        assert_int_equal(cn_cli_query_opt(&q, 4, last, &i, &err), 1);
    assert_int_equal(cn_cli_query_check(&q, &err), -1);
    assert_string_equal(err.msg, "--last cannot be combined with --from/--to");
    cn_cli_query_clear(&q);
}

/* Page queries: QUERY options as `canopy tree` takes them, always JSON; -o, other formats,
 * stray words and bad options refused with the parser's message. */
static void test_web_query(void **state)
{
    (void)state;
    static const struct {
        char *args[4];
        int n;
        const char *error;  /* NULL: accepted */
        const char *format; /* /api/export's format parameter, or NULL */
    } cases[] = {
        {{"-t", "merge:burn", "--invert"}, 3, NULL, NULL},
        {{"-t", "search:BURN"}, 2, NULL, "svg"},
        {{"--tid", "7"}, 2, NULL, "firefox"},
        {{"--invert"}, 1, "format 'png': unknown", "png"},
        {{"--format", "svg"}, 2, "canopy web answers in JSON only", "svg"},
        {{"--transform=focus:a;b", "--last", "2s"}, 3, NULL, NULL},
        {{"--format", "json"}, 2, NULL, NULL},
        {{"-o", "/tmp/x"}, 2, "-o is not available in canopy web", NULL},
        {{"--format", "svg"}, 2, "canopy web answers in JSON only", NULL},
        {{"main"}, 1, "unexpected argument 'main'", NULL},
        {{"-t"}, 1, "option '-t' needs a value", NULL},
        {{"--invert", "--functions"},
         2,
         "--functions: only one of --invert, --callees, --callers, --functions",
         NULL},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        cn_cli_query q;
        cn_err err = {0};
        char *args[4];
        memcpy(args, cases[k].args, sizeof(args));
        cn_cli_query_init(&q);
        int rc = cn_cli_web_query(args, cases[k].n, cases[k].format, &q, &err);
        cn_fmt_format want = CN_FMT_JSON;
        if (cases[k].error) {
            assert_int_equal(rc, -EINVAL);
            assert_string_equal(err.msg, cases[k].error);
        } else {
            assert_int_equal(rc, 0);
            assert_true(!cases[k].format || cn_fmt_format_parse(cases[k].format, &want) == 0);
            assert_int_equal(q.spec.format, want);
        }
        cn_cli_query_clear(&q);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_options),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_formats_from_extension),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_last_is_relative_to_the_last_sample),
        cmocka_unit_test(test_error_into_err),
        cmocka_unit_test(test_web_query),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
