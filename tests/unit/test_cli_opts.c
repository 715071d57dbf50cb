/* test_cli_opts — the option tables (cn_opt, common/) and the parsers that use them:
 * matching ("--opt V", "--opt=V", "-s", a flag's "--flag=V" refused, rows off by flags),
 * the aligned --help columns, the edit distance and nearest-name rule behind "did you
 * mean", every row of the QUERY and SAMPLING tables accepted by its parser in both
 * spellings, and every canopyd.conf key of cn_d_config_keys loaded by cn_d_config_load
 * (which refuses any other key).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "client.h"
#include "cn_d.h"
#include "live.h"

static const cn_opt tab[] = {
    {"--freq", "-F", "HZ", "99", "samples per second", 1, 0},
    {"--kernel", NULL, NULL, NULL, "kernel frames", 2, 0},
    {"--name", NULL, "NAME", NULL, "a name", 3, 4},
    {NULL, NULL, NULL, NULL, NULL, 0, 0},
};

static const cn_opt *match(const char **words, int n, unsigned flags, int *i, const char **v)
{
    *i = 0;
    return cn_opt_match(tab, flags, n, (char **)words, i, v);
}

static void test_match(void **state)
{
    const char *v;
    int i;
    const char *a[] = {"--freq", "99"};
    assert_int_equal(match(a, 2, 0, &i, &v)->id, 1);
    assert_string_equal(v, "99");
    assert_int_equal(i, 1);
    const char *b[] = {"--freq=7"};
    assert_int_equal(match(b, 1, 0, &i, &v)->id, 1);
    assert_string_equal(v, "7");
    assert_int_equal(i, 0);
    const char *c[] = {"-F", "5"};
    assert_int_equal(match(c, 2, 0, &i, &v)->id, 1);
    assert_string_equal(v, "5");
    const char *d[] = {"--freq"}; /* the value is missing */
    assert_int_equal(match(d, 1, 0, &i, &v)->id, 1);
    assert_null(v);
    const char *e[] = {"--kernel=yes"}; /* a flag takes no value */
    assert_null(match(e, 1, 0, &i, &v));
    const char *f[] = {"--kernel"};
    assert_int_equal(match(f, 1, 0, &i, &v)->id, 2);
    assert_null(v);
    const char *g[] = {"--name", "x"}; /* enabled by flag 4 only */
    assert_null(match(g, 2, 0, &i, &v));
    assert_int_equal(match(g, 2, 4, &i, &v)->id, 3);
    const char *h[] = {"--freqx", "1"}; /* a prefix is not a match */
    assert_null(match(h, 2, 0, &i, &v));
    assert_non_null(cn_opt_find(tab, "-F"));
    assert_null(cn_opt_find(tab, "--nope"));
    (void)state;
}

static void test_print_aligned(void **state)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    cn_opt_print(m, tab, 4, 80, NULL);
    fclose(m);
    /* Every help text starts in column 30, defaults shown. */
    char want[3][128];
    snprintf(want[0], sizeof(want[0]), "%-30s%s\n", "  -F, --freq HZ",
             "samples per second (default: 99)");
    snprintf(want[1], sizeof(want[1]), "%-30s%s\n", "  --kernel", "kernel frames");
    snprintf(want[2], sizeof(want[2]), "%-30s%s\n", "  --name NAME", "a name");
    for (int k = 0; k < 3; k++)
        if (!strstr(buf, want[k]))
            fail_msg("no '%s' in:\n%s", want[k], buf);
    free(buf);
    /* Narrower: the help wraps, continuing in column 30. */
    m = open_memstream(&buf, &len);
    cn_opt_print(m, tab, 0, 50, NULL);
    fclose(m);
    snprintf(want[0], sizeof(want[0]), "%-30s%s\n%30s%s\n", "  -F, --freq HZ", "samples per second",
             "", "(default: 99)");
    if (strncmp(buf, want[0], strlen(want[0])))
        fail_msg("not wrapped at 50:\n%s", buf);
    free(buf);
    (void)state;
}

static void test_distance(void **state)
{
    assert_int_equal(cn_text_distance("attach", "attach"), 0);
    assert_int_equal(cn_text_distance("atach", "attach"), 1);
    assert_int_equal(cn_text_distance("fromat", "format"), 1); /* a swap counts 1 */
    assert_int_equal(cn_text_distance("", "abc"), 3);
    assert_int_equal(cn_text_distance("kitten", "sitting"), 3);
    static const char *const cands[] = {"open", "run", "attach", "tree", "top", "timeline"};
    assert_string_equal(cn_text_nearest("atach", cands, 6), "attach");
    assert_string_equal(cn_text_nearest("timelien", cands, 6), "timeline");
    assert_null(cn_text_nearest("frobnicate", cands, 6));
    assert_null(cn_text_nearest("xy", cands, 6)); /* too short to guess */
    (void)state;
}

/* A value each placeholder's parser accepts. */
static const char *sample(const char *ph)
{
    static const struct {
        const char *ph, *v;
    } s[] = {
        {"SPEC", "merge:f"},  {"F", "main"},
        {"DURATION", "5s"},   {"SECONDS", "1"},
        {"TID", "1"},         {"PID", "1"},
        {"N", "3"},           {"P", "1"},
        {"FMT", "json"},      {"FILE", "out.svg"},
        {"HZ", "99"},         {"EVENT", "cpu-clock"},
        {"BYTES", "4096"},    {"NAME", "web"},
        {"K=V", "service=x"}, {"KEY=VALUE[,KEY=VALUE]", "container=0123"},
    };
    for (size_t k = 0; k < sizeof(s) / sizeof(s[0]); k++)
        if (!strcmp(ph, s[k].ph))
            return s[k].v;
    static char first[32];
    snprintf(first, sizeof(first), "%.*s", (int)strcspn(ph, "|"), ph);
    return first; /* a|b|c: a */
}

/* Every QUERY row, as "--opt V", "--opt=V" and its short name, is taken by
 * cn_cli_query_opt: the parser accepts what the table (and so --help) lists. */
static void test_query_rows_parse(void **state)
{
    for (const cn_opt *o = cn_cli_query_opts; o->lng; o++) {
        const char *names[] = {o->lng, o->shrt};
        for (int k = 0; k < 2 && names[k]; k++) {
            cn_cli_query q;
            cn_err err = {0};
            char joined[96];
            int i = 0;
            cn_cli_query_init(&q);
            const char *argv[] = {names[k], o->arg ? sample(o->arg) : NULL};
            int r = cn_cli_query_opt(&q, o->arg ? 2 : 1, (char **)argv, &i, &err);
            if (r != 1)
                fail_msg("%s: %d %s", names[k], r, err.msg);
            assert_int_equal(i, o->arg ? 1 : 0);
            cn_cli_query_clear(&q);
            if (!o->arg || k == 1)
                continue;
            snprintf(joined, sizeof(joined), "%s=%s", o->lng, sample(o->arg));
            const char *argv2[] = {joined};
            i = 0;
            cn_cli_query_init(&q);
            assert_int_equal(cn_cli_query_opt(&q, 1, (char **)argv2, &i, &err), 1);
            cn_cli_query_clear(&q);
        }
    }
    (void)state;
}

static void test_sampling_rows_parse(void **state)
{
    for (const cn_opt *o = cn_cli_sampling_opts; o->lng; o++) {
        const char *names[] = {o->lng, o->shrt};
        for (int k = 0; k < 2 && names[k]; k++) {
            cn_live_session_opts s;
            int i = 0;
            cn_live_session_opts_init(&s);
            s.freq = CN_LIVE_FREQ_RUN;
            const char *argv[] = {names[k], o->arg ? sample(o->arg) : NULL};
            int r = cn_cli_parse_sampling_opt(&s, "test", true, o->arg ? 2 : 1, (char **)argv, &i);
            if (r != 1)
                fail_msg("%s: %d", names[k], r);
            /* The session options only where the command takes them. */
            if (o->when == CN_LIVE_NAME) {
                i = 0;
                assert_int_equal(
                    cn_cli_parse_sampling_opt(&s, "test", false, o->arg ? 2 : 1, (char **)argv, &i),
                    0);
            }
            cn_live_session_opts_clear(&s);
        }
    }
    (void)state;
}

/* Every canopyd.conf key in the table loads; a key not in it is refused. */
static void test_config_keys(void **state)
{
    char path[] = "/tmp/test_cli_opts.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    size_t n = 0;
    for (const cn_opt *o = cn_d_config_keys; o->lng; o++, n++) {
        static const struct {
            const char *ph, *v;
        } s[] = {{"PATH", "/tmp/x.sock"}, {"DIR", "/tmp/x"},    {"FILE", "/tmp/x"},
                 {"COUNT", "2"},          {"SIZE", "1M"},       {"DURATION", "1s"},
                 {"GROUP", "canopy"},     {"OCTAL", "0660"},    {"URL", "http://127.0.0.1:1/"},
                 {"NAME", "x"},           {"K=V[,K=V]", "a=b"}, {"io_uring|epoll", "epoll"},
                 {"SHARE", "0.05%"}};
        const char *v = NULL;
        for (size_t k = 0; k < sizeof(s) / sizeof(s[0]); k++)
            if (!strcmp(o->arg, s[k].ph))
                v = s[k].v;
        if (!v)
            fail_msg("no sample for %s %s", o->lng, o->arg);
        FILE *f = fopen(path, "w");
        fprintf(f, "%s = %s\n", o->lng, v);
        fclose(f);
        cn_d_config c;
        cn_err err = {0};
        cn_d_config_init(&c);
        if (cn_d_config_load(&c, path, &err) != 0)
            fail_msg("%s = %s: %s", o->lng, v, err.msg);
        cn_d_config_clear(&c);
    }
    assert_true(n >= 30);
    /* fold_trim: a share, as a fraction or a percentage, below 10 % */
    static const struct {
        const char *v;
        double want; /* < 0: refused */
    } shares[] = {{"0.05%", 0.0005}, {"0.0002", 0.0002}, {"0", 0},    {"0.2", -1},
                  {"10%", -1},       {"-1%", -1},        {"1%%", -1}, {"x", -1}};
    for (size_t k = 0; k < sizeof(shares) / sizeof(shares[0]); k++) {
        FILE *sf = fopen(path, "w");
        fprintf(sf, "fold_trim = %s\n", shares[k].v);
        fclose(sf);
        cn_d_config c;
        cn_err err = {0};
        cn_d_config_init(&c);
        int rc = cn_d_config_load(&c, path, &err);
        if (shares[k].want < 0) {
            assert_int_not_equal(rc, 0);
        } else {
            assert_int_equal(rc, 0);
            assert_true(c.fold_trim > shares[k].want - 1e-12 &&
                        c.fold_trim < shares[k].want + 1e-12);
        }
        cn_d_config_clear(&c);
    }
    FILE *f = fopen(path, "w");
    fprintf(f, "no_such_key = 1\n");
    fclose(f);
    cn_d_config c;
    cn_err err = {0};
    cn_d_config_init(&c);
    assert_int_not_equal(cn_d_config_load(&c, path, &err), 0);
    assert_non_null(strstr(err.msg, "unknown setting 'no_such_key'"));
    cn_d_config_clear(&c);
    unlink(path);
    (void)state;
}

/* Every command has a usage, a summary and an about text; names are unique. */
static void test_commands(void **state)
{
    size_t n = 0;
    for (const cn_cli_command *c = cn_cli_commands; c->name; c++, n++) {
        assert_non_null(c->run);
        assert_true(c->args && c->summary && c->about && c->about[0]);
        assert_ptr_equal(cn_cli_command_find(c->name), c);
    }
    assert_true(n >= 16);
    assert_null(cn_cli_command_find("nope"));
    (void)state;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_print_aligned),
        cmocka_unit_test(test_distance),
        cmocka_unit_test(test_query_rows_parse),
        cmocka_unit_test(test_sampling_rows_parse),
        cmocka_unit_test(test_config_keys),
        cmocka_unit_test(test_commands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
