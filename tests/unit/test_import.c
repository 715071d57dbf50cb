/* test_import.c — the profile importers (folded, .cpuprofile, perf script, .canopy),
 * format detection and gzip, on hand-written inputs, on the DevTools vectors of
 * docs/calltree.md §7.5, and on real files recorded on this machine (tests/data/cpuprofile/
 * from `node --cpu-prof`, tests/data/perf/ from `perf record -g`), whose expected figures
 * are computed here independently (jansson over the same JSON; the construction of
 * tests/data/src/workload.c).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>
#include <zlib.h>

#include "cn_agg.h"
#include "cn_fmt.h"

/* ---- helpers ---------------------------------------------------------------------- */

static cn_agg_profile *import_ok(const char *text)
{
    cn_agg_profile *p = NULL;
    cn_err err = {0};
    int rc = cn_fmt_import_buffer(text, strlen(text), "t", &p, &err);
    if (rc != 0)
        fprintf(stderr, "import failed: %s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_non_null(p);
    return p;
}

/* Imports text expecting failure rc; the message must contain want. */
static void import_fails(const char *text, size_t len, int rc_want, const char *want)
{
    cn_agg_profile *p = NULL;
    cn_err err = {0};
    int rc = cn_fmt_import_buffer(text, len, "bad.txt", &p, &err);
    if (rc != rc_want || !strstr(err.msg, want))
        fprintf(stderr, "rc %d, message '%s', wanted '%s'\n", rc, err.msg, want);
    assert_int_equal(rc, rc_want);
    assert_null(p);
    assert_non_null(strstr(err.msg, want));
}

static const char *data_path(const char *rel, char *buf, size_t n)
{
    const char *dir = getenv("CANOPY_TEST_DATA");
    snprintf(buf, n, "%s/%s", dir ? dir : "tests/data", rel);
    return buf;
}

/* A query's function list as (name -> self × scale); rows of one name are summed. */
typedef struct fn_row {
    char name[128];
    double self, total;
} fn_row;

static size_t functions(cn_agg_profile *p, fn_row *rows, size_t max)
{
    cn_agg_query q;
    cn_agg_tree *t = NULL;
    cn_err err;
    cn_agg_query_init(&q);
    q.view = CN_AGG_VIEW_FUNCTIONS;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    size_t n = 0;
    double scale = cn_agg_profile_scale(p);
    for (size_t i = 0; i < t->n_functions; i++) {
        const char *name = cn_agg_func_name(p, t->functions[i].func);
        size_t k = 0;
        while (k < n && strcmp(rows[k].name, name))
            k++;
        if (k == n) {
            assert_true(n < max);
            snprintf(rows[n].name, sizeof(rows[n].name), "%s", name);
            rows[n].self = rows[n].total = 0;
            n++;
        }
        rows[k].self += t->functions[i].self * scale;
        rows[k].total += t->functions[i].total * scale;
    }
    cn_agg_tree_free(t);
    return n;
}

static const fn_row *find_fn(const fn_row *rows, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].name, name))
            return &rows[i];
    return NULL;
}

static double total_weight(cn_agg_profile *p)
{
    cn_agg_query q;
    cn_agg_tree *t = NULL;
    cn_err err;
    cn_agg_query_init(&q);
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    double total = t->total;
    cn_agg_tree_free(t);
    return total;
}

/* The stack of sample i as "a;b;c" (root first). */
static void stack_text(cn_agg_profile *p, int32_t stack, char *buf, size_t n)
{
    int32_t frames[256];
    size_t depth = 0;
    for (int32_t s = stack; s >= 0 && depth < 256; s = cn_agg_stack_prefix(p, s))
        frames[depth++] = cn_agg_stack_frame(p, s);
    buf[0] = '\0';
    for (size_t i = depth; i-- > 0;) {
        const int32_t *funcs;
        size_t nf = cn_agg_frame_funcs(p, frames[i], &funcs);
        for (size_t k = 0; k < nf; k++) {
            size_t len = strlen(buf);
            snprintf(buf + len, n - len, "%s%s", len ? ";" : "", cn_agg_func_name(p, funcs[k]));
        }
    }
}

static void gzip_buf(const char *in, size_t len, unsigned char **out, size_t *out_len)
{
    z_stream zs = {0};
    size_t cap = compressBound(len) + 64;
    *out = malloc(cap);
    assert_non_null(*out);
    assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
    zs.next_in = (unsigned char *)in;
    zs.avail_in = (uInt)len;
    zs.next_out = *out;
    zs.avail_out = (uInt)cap;
    assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
    *out_len = cap - zs.avail_out;
    deflateEnd(&zs);
}

/* ---- detection, gzip, empty input ------------------------------------------------- */

static void test_detection_errors(void **state)
{
    (void)state;
    import_fails("", 0, -EINVAL, "bad.txt: empty file");
    import_fails("hello world\n", 12, -EINVAL, "bad.txt: not a profile");
    import_fails("\n\n  \n", 5, -EINVAL, "not a profile");
    cn_agg_profile *p = NULL;
    cn_err err;
    assert_int_equal(cn_fmt_import_file("/nonexistent/x.folded", &p, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/x.folded"));
    assert_int_equal(cn_fmt_import_file("/tmp", &p, &err), -EISDIR);
}

static void test_gzip(void **state)
{
    (void)state;
    const char *text = "main;a 3\nmain;b 2\n";
    unsigned char *gz;
    size_t gz_len;
    gzip_buf(text, strlen(text), &gz, &gz_len);
    cn_agg_profile *p = NULL;
    cn_err err;
    assert_int_equal(cn_fmt_import_buffer(gz, gz_len, "x.gz", &p, &err), 0);
    assert_int_equal(cn_agg_sample_count(p), 2);
    assert_true(total_weight(p) == 5.0);
    cn_agg_profile_free(p);
    /* the same through a file: the streaming reader */
    char path[] = "/tmp/test_import_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    fwrite(gz, 1, gz_len, f);
    fclose(f);
    assert_int_equal(cn_fmt_import_file(path, &p, &err), 0);
    assert_true(total_weight(p) == 5.0);
    cn_agg_profile_free(p);
    /* truncated and corrupted */
    assert_int_equal(cn_fmt_import_buffer(gz, gz_len - 6, "x.gz", &p, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "x.gz: truncated gzip data"));
    gz[gz_len / 2] ^= 0xff;
    gz[gz_len / 2 + 1] ^= 0x55;
    assert_int_equal(cn_fmt_import_buffer(gz, gz_len, "x.gz", &p, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "x.gz:"));
    unlink(path);
    free(gz);
}

/* ---- folded ----------------------------------------------------------------------- */

static void test_folded(void **state)
{
    (void)state;
    cn_agg_profile *p = import_ok("A;B;C 3\r\n\nA;B 2\n  \nA;D 1\nstd::vector<int, x> a;A 0\n");
    assert_int_equal(cn_agg_sample_count(p), 4);
    assert_int_equal(cn_agg_profile_unit(p), CN_AGG_UNIT_SAMPLES);
    fn_row rows[16];
    size_t n = functions(p, rows, 16);
    assert_true(find_fn(rows, n, "A")->total == 6.0);
    assert_true(find_fn(rows, n, "C")->self == 3.0);
    assert_true(find_fn(rows, n, "B")->self == 2.0);
    char text[128];
    stack_text(p, cn_agg_sample_stack(p, 3), text, sizeof(text));
    assert_string_equal(text, "std::vector<int, x> a;A");
    assert_true(cn_agg_sample_weight(p, 3) == 0.0);
    for (size_t f = 0; f < cn_agg_frame_count(p); f++) {
        assert_int_equal(cn_agg_frame_resource(p, (int32_t)f), -1);
        assert_int_equal(cn_agg_frame_address(p, (int32_t)f), -1);
    }
    char buf[256];
    stack_text(p, cn_agg_sample_stack(p, 0), buf, sizeof(buf));
    assert_string_equal(buf, "A;B;C");
    assert_string_equal(cn_agg_meta_get(p, "format"), "folded");
    cn_agg_profile_free(p);
}

static void test_folded_errors(void **state)
{
    (void)state;
    const char *no_count = "A;B 1\nA;C\n";
    import_fails(no_count, strlen(no_count), -EINVAL, "bad.txt:2: no count");
    const char *neg = "A;B 1\n\nA;C -4\n";
    import_fails(neg, strlen(neg), -EINVAL, "bad.txt:3: negative count");
    const char *nonnum = "A;B 1\nA;C 4x\n";
    import_fails(nonnum, strlen(nonnum), -EINVAL, "bad.txt:2: count '4x' is not");
    const char *empty_frame = "A;;B 1\n";
    import_fails(empty_frame, strlen(empty_frame), -EINVAL, "bad.txt:1: empty function name");
    const char *diff_short = "A;B 1 2\nA;C 3\n";
    import_fails(diff_short, strlen(diff_short), -EINVAL, "bad.txt:2: expected 'STACK BASE NEW'");
}

static void test_folded_diff(void **state)
{
    (void)state;
    cn_agg_profile *p = import_ok("A;B 1 3\nA;C 2 0\n");
    assert_string_equal(cn_agg_meta_get(p, "diff"), "1");
    assert_int_equal(cn_agg_sample_count(p), 4);
    assert_int_equal(cn_agg_thread_count(p), 2);
    double base = 0, new_ = 0;
    for (size_t i = 0; i < cn_agg_sample_count(p); i++) {
        const char *t = cn_agg_thread_name(p, cn_agg_sample_thread(p, i));
        if (!strcmp(t, "base"))
            base += cn_agg_sample_weight(p, i);
        else if (!strcmp(t, "new"))
            new_ += cn_agg_sample_weight(p, i);
        else
            fail();
    }
    assert_true(base == 3.0 && new_ == 3.0);
    /* per-thread queries give each side */
    cn_agg_query q;
    cn_agg_tree *t;
    cn_err err;
    cn_agg_query_init(&q);
    q.tid = 2;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    assert_true(t->total == 3.0);
    cn_agg_tree_free(t);
    cn_agg_profile_free(p);
}

/* ---- perf script ------------------------------------------------------------------ */

static const char perf_text[] =
    "# a comment line\n"
    "my prog 100/101 [002] 10.000100:   250000 cpu-clock:ppp: \n"
    "\tffffffff81000001 do_syscall_64+0x21 ([kernel.kallsyms])\n"
    "\t    7f0000001234 __libc_read+0x14 (/usr/lib/libc.so.6)\n"
    "\t    55550000abcd [unknown] (/opt/app/bin/app (deleted))\n"
    "\t    5555000000ff main+0x1f (/opt/app/bin/app (deleted))\n"
    "\n"
    "worker 100/102 [003] 10.000350:   250000 cpu-clock:ppp: \n"
    "\t    5555000000aa compute(int, char const*)+0x0 (/opt/app/bin/app (deleted))\n"
    "\t    deadbeef [unknown] ([unknown])\n"
    "\n"
    "worker 100/102 [003] 10.000600:   500000 cpu-clock:ppp: \n"
    "\n";

static void test_perf_script(void **state)
{
    (void)state;
    cn_agg_profile *p = import_ok(perf_text);
    assert_int_equal(cn_agg_profile_unit(p), CN_AGG_UNIT_NS);
    assert_string_equal(cn_agg_meta_get(p, "event"), "cpu-clock");
    assert_int_equal(cn_agg_sample_count(p), 3);
    assert_int_equal(cn_agg_sample_time(p, 0), 0);
    assert_int_equal(cn_agg_sample_time(p, 1), 250000);
    assert_int_equal(cn_agg_sample_time(p, 2), 500000);
    assert_true(cn_agg_sample_weight(p, 2) == 500000.0);
    assert_int_equal(cn_agg_sample_stack(p, 2), -1);
    char buf[512];
    stack_text(p, cn_agg_sample_stack(p, 0), buf, sizeof(buf));
    assert_string_equal(buf, "main;app (deleted)+0x55550000abcd;__libc_read;do_syscall_64");
    stack_text(p, cn_agg_sample_stack(p, 1), buf, sizeof(buf));
    assert_string_equal(buf, "0xdeadbeef;compute(int, char const*)");
    /* libraries */
    int32_t leaf = cn_agg_stack_frame(p, cn_agg_sample_stack(p, 0));
    int32_t kres = cn_agg_frame_resource(p, leaf);
    assert_string_equal(cn_agg_resource_name(p, kres), "[kernel]");
    assert_int_equal(cn_agg_resource_kind_of(p, kres), CN_AGG_RES_KERNEL);
    assert_int_equal(cn_agg_frame_address(p, leaf), (int64_t)0xffffffff81000001LL);
    int32_t libc = cn_agg_frame_resource(
        p, cn_agg_stack_frame(p, cn_agg_stack_prefix(p, cn_agg_sample_stack(p, 0))));
    assert_string_equal(cn_agg_resource_name(p, libc), "libc.so.6");
    assert_string_equal(cn_agg_resource_path(p, libc), "/usr/lib/libc.so.6");
    /* threads: comm with a blank, pid/tid */
    int32_t t0 = cn_agg_sample_thread(p, 0), t1 = cn_agg_sample_thread(p, 1);
    assert_string_equal(cn_agg_thread_name(p, t0), "my prog");
    assert_int_equal(cn_agg_thread_pid(p, t0), 100);
    assert_int_equal(cn_agg_thread_tid(p, t1), 102);
    assert_string_equal(cn_agg_thread_name(p, t1), "worker");
    assert_string_equal(cn_agg_process_name(p, 100), "my prog");
    cn_agg_profile_free(p);

    /* tid only, no cpu, no period (events counted as samples); an inline ip without -g */
    p = import_ok("app 7 1.5: cycles: \n\t1 f+0x1 (/x/liba.so)\n\n"
                  "app 7 2.5: cycles:  2 g+0x2 (/x/liba.so)\n");
    assert_int_equal(cn_agg_profile_unit(p), CN_AGG_UNIT_SAMPLES);
    assert_int_equal(cn_agg_thread_pid(p, cn_agg_sample_thread(p, 0)), 7);
    assert_int_equal(cn_agg_sample_time(p, 1), 1000000000);
    stack_text(p, cn_agg_sample_stack(p, 1), buf, sizeof(buf));
    assert_string_equal(buf, "g");
    cn_agg_profile_free(p);

    p = import_ok("app 7/7 1.5: 3 cycles:u: \n\t1 f+0x1 (/x/liba.so)\n");
    assert_int_equal(cn_agg_profile_unit(p), CN_AGG_UNIT_EVENTS);
    assert_true(total_weight(p) == 3.0);
    cn_agg_profile_free(p);

    const char *bad = "app 7 1.5: 1 cpu-clock: \n\tzzz f (/x)\n";
    import_fails(bad, strlen(bad), -EINVAL, "bad.txt:2: expected a callchain line");
    bad = "app 7 1.5: 1 cpu-clock: \n\t1 f (/x)\nnot a header\n";
    import_fails(bad, strlen(bad), -EINVAL, "bad.txt:3: expected a sample header");
}

/* The real recording of tests/data/src/workload.c: work_a, work_b and work_c get 5, 3
 * and 2 units of the same loop, so about 50%, 30% and 20% of the self time. */
static void test_perf_real(void **state)
{
    (void)state;
    char path[512];
    cn_agg_profile *p = NULL;
    cn_err err;
    int rc =
        cn_fmt_import_file(data_path("perf/workload.perf.txt.gz", path, sizeof(path)), &p, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_int_equal(cn_agg_profile_unit(p), CN_AGG_UNIT_NS);
    assert_true(cn_agg_sample_count(p) > 1000);
    fn_row rows[256];
    size_t n = functions(p, rows, 256);
    double total = total_weight(p);
    /* the three hottest functions by self, in order */
    const char *top[3] = {NULL, NULL, NULL};
    double top_self[3] = {-1, -1, -1};
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 3; k++) {
            if (rows[i].self > top_self[k]) {
                for (int j = 2; j > k; j--) {
                    top[j] = top[j - 1];
                    top_self[j] = top_self[j - 1];
                }
                top[k] = rows[i].name;
                top_self[k] = rows[i].self;
                break;
            }
        }
    }
    assert_string_equal(top[0], "work_a");
    assert_string_equal(top[1], "work_b");
    assert_string_equal(top[2], "work_c");
    assert_true(fabs(top_self[0] / total - 0.50) < 0.06);
    assert_true(fabs(top_self[1] / total - 0.30) < 0.06);
    assert_true(fabs(top_self[2] / total - 0.20) < 0.06);
    assert_true(find_fn(rows, n, "run_round")->total / total > 0.95);
    assert_true(find_fn(rows, n, "main")->total / total > 0.95);
    /* the command name is a thread, not a frame */
    assert_null(find_fn(rows, n, "workload"));
    assert_string_equal(cn_agg_thread_name(p, cn_agg_sample_thread(p, 0)), "workload");
    /* weights are periods: 1 ms at -F 1000 */
    assert_true(cn_agg_sample_weight(p, 0) > 0);
    cn_agg_profile_free(p);
}

/* ---- .cpuprofile ------------------------------------------------------------------ */

/* docs/calltree.md §7.5.1 */
static const char cpu_basic[] =
    "{\"nodes\":["
    "{\"id\":1,\"callFrame\":{\"functionName\":\"(root)\",\"scriptId\":\"0\",\"url\":\"\","
    "\"lineNumber\":-1,\"columnNumber\":-1},\"hitCount\":0,\"children\":[2,3]},"
    "{\"id\":2,\"callFrame\":{\"functionName\":\"a\",\"scriptId\":\"1\",\"url\":\"s.js\","
    "\"lineNumber\":0,\"columnNumber\":0},\"hitCount\":3,\"children\":[4,5]},"
    "{\"id\":3,\"callFrame\":{\"functionName\":\"b\",\"scriptId\":\"1\",\"url\":\"s.js\","
    "\"lineNumber\":5,\"columnNumber\":2},\"hitCount\":3,\"children\":[6]},"
    "{\"id\":4,\"callFrame\":{\"functionName\":\"c\",\"scriptId\":\"1\",\"url\":\"s.js\","
    "\"lineNumber\":9,\"columnNumber\":0},\"hitCount\":2,\"deoptReason\":\"\"},"
    "{\"id\":5,\"callFrame\":{\"functionName\":\"d\",\"scriptId\":\"1\",\"url\":\"s.js\","
    "\"lineNumber\":12,\"columnNumber\":0},\"hitCount\":1,\"positionTicks\":[{\"line\":1,"
    "\"ticks\":1}]},"
    "{\"id\":6,\"callFrame\":{\"functionName\":\"e\",\"scriptId\":\"1\",\"url\":\"s.js\","
    "\"lineNumber\":20,\"columnNumber\":0},\"hitCount\":2,\"children\":[7]},"
    "{\"id\":7,\"callFrame\":{\"functionName\":\"\",\"scriptId\":\"1\",\"url\":\"s.js\","
    "\"lineNumber\":30,\"columnNumber\":4},\"hitCount\":2}],"
    "\"startTime\":1000,\"endTime\":3000,"
    "\"samples\":[2,2,4,5,4,2,3,6,6,7,7,3,3],"
    "\"timeDeltas\":[100,100,100,100,100,100,100,100,100,100,100,100,100]}";

static void test_cpuprofile_basic(void **state)
{
    (void)state;
    cn_agg_profile *p = import_ok(cpu_basic);
    assert_int_equal(cn_agg_profile_unit(p), CN_AGG_UNIT_MS);
    assert_true(fabs(cn_agg_profile_scale(p) - 2.0 / 13) < 1e-12);
    assert_int_equal(cn_agg_sample_count(p), 13);
    assert_int_equal(cn_agg_sample_time(p, 0), 100000);
    assert_int_equal(cn_agg_sample_time(p, 12), 1300000);
    fn_row rows[16];
    size_t n = functions(p, rows, 16);
    assert_true(fabs(find_fn(rows, n, "a")->self - 0.4615) < 1e-4);
    assert_true(fabs(find_fn(rows, n, "a")->total - 0.9231) < 1e-4);
    assert_true(fabs(find_fn(rows, n, "b")->total - 1.0769) < 1e-4);
    assert_true(fabs(find_fn(rows, n, "d")->self - 0.1538) < 1e-4);
    assert_true(fabs(find_fn(rows, n, "(anonymous)")->self - 0.3077) < 1e-4);
    assert_null(find_fn(rows, n, "(root)"));
    /* the func carries url and position; the frame the column */
    int32_t leaf = cn_agg_stack_frame(p, cn_agg_sample_stack(p, 9));
    const int32_t *funcs;
    assert_int_equal(cn_agg_frame_funcs(p, leaf, &funcs), 1);
    assert_string_equal(cn_agg_resource_name(p, cn_agg_func_resource(p, funcs[0])), "s.js");
    assert_int_equal(cn_agg_resource_kind_of(p, cn_agg_func_resource(p, funcs[0])), CN_AGG_RES_URL);
    assert_int_equal(cn_agg_func_line(p, funcs[0]), 31);
    assert_int_equal(cn_agg_frame_line(p, leaf), 31);
    assert_int_equal(cn_agg_frame_address(p, leaf), 4);
    char buf[256];
    stack_text(p, cn_agg_sample_stack(p, 9), buf, sizeof(buf));
    assert_string_equal(buf, "b;e;(anonymous)");
    cn_agg_profile_free(p);
}

/* Same profile with `parent` links instead of children, timeDeltas before samples, and
 * no hitCount (counted from the samples). */
static void test_cpuprofile_variants(void **state)
{
    (void)state;
    cn_agg_profile *p =
        import_ok("{\"timeDeltas\":[5,5,-2,5],\"startTime\":0,\"endTime\":40,"
                  "\"samples\":[3,2,3,1],\"nodes\":["
                  "{\"id\":1,\"callFrame\":{\"functionName\":\"(root)\",\"url\":\"\"}},"
                  "{\"id\":2,\"parent\":1,\"callFrame\":{\"functionName\":\"f\",\"url\":\"\"}},"
                  "{\"id\":3,\"parent\":2,\"callFrame\":{\"functionName\":\"g\",\"url\":\"u\","
                  "\"lineNumber\":3}}],\"extra\":{\"a\":[1,{\"b\":null}]}}");
    assert_int_equal(cn_agg_sample_count(p), 4);
    /* times 5, 10, 8, 13 us: sorted stably by time */
    assert_true(fabs(cn_agg_profile_scale(p) - 0.04 / 4) < 1e-12);
    fn_row rows[8];
    size_t n = functions(p, rows, 8);
    assert_true(fabs(find_fn(rows, n, "g")->self - 2 * 0.01) < 1e-12);
    assert_true(fabs(find_fn(rows, n, "f")->total - 3 * 0.01) < 1e-12);
    cn_agg_profile_free(p);

    /* nodes first, then timeDeltas, then samples (direct mode with stored times); and two
     * sibling nodes with one callFrame (one stack: node ids kept per sample) */
    const char *orders[2] = {
        "{\"nodes\":[{\"id\":1,\"callFrame\":{\"functionName\":\"(root)\"},\"children\":[2]},"
        "{\"id\":2,\"callFrame\":{\"functionName\":\"f\"},\"children\":[3]},"
        "{\"id\":3,\"callFrame\":{\"functionName\":\"g\"}}],\"startTime\":0,\"endTime\":40,"
        "\"timeDeltas\":[5,5,-2,5],\"samples\":[3,2,3,1]}",
        "{\"nodes\":[{\"id\":1,\"callFrame\":{\"functionName\":\"(root)\"},\"children\":[2]},"
        "{\"id\":2,\"callFrame\":{\"functionName\":\"f\"},\"children\":[3,4]},"
        "{\"id\":3,\"callFrame\":{\"functionName\":\"g\"}},{\"id\":4,\"callFrame\":"
        "{\"functionName\":\"g\"}}],\"startTime\":0,\"endTime\":40,"
        "\"samples\":[3,2,4,1],\"timeDeltas\":[5,5,-2,5]}"};
    for (int k = 0; k < 2; k++) {
        p = import_ok(orders[k]);
        assert_int_equal(cn_agg_sample_count(p), 4);
        n = functions(p, rows, 8);
        assert_true(fabs(find_fn(rows, n, "g")->self - 2 * 0.01) < 1e-12);
        assert_true(fabs(find_fn(rows, n, "f")->total - 3 * 0.01) < 1e-12);
        /* sorted by time: 5, 8, 10, 13 us */
        assert_int_equal(cn_agg_sample_time(p, 1), 8000);
        cn_agg_profile_free(p);
    }

    /* a valid file with no samples is an empty profile */
    p = import_ok("{\"nodes\":[{\"id\":1,\"callFrame\":{\"functionName\":\"(root)\"}}],"
                  "\"startTime\":1,\"endTime\":1,\"samples\":[],\"timeDeltas\":[]}");
    assert_int_equal(cn_agg_sample_count(p), 0);
    assert_true(total_weight(p) == 0.0);
    cn_agg_profile_free(p);
}

/* docs/calltree.md §7.5.3: fixMissingSamples replaces samples 2, 4 and 11 — in the timeline
 * stacks only. */
static void test_cpuprofile_fix_missing(void **state)
{
    (void)state;
    const char *text =
        "{\"nodes\":["
        "{\"id\":1,\"callFrame\":{\"functionName\":\"(root)\"},\"children\":[2,3,4,5]},"
        "{\"id\":2,\"callFrame\":{\"functionName\":\"(garbage collector)\"}},"
        "{\"id\":3,\"callFrame\":{\"functionName\":\"(program)\"}},"
        "{\"id\":4,\"callFrame\":{\"functionName\":\"bar\"},\"children\":[6]},"
        "{\"id\":5,\"callFrame\":{\"functionName\":\"baz\"}},"
        "{\"id\":6,\"callFrame\":{\"functionName\":\"foo\"}}],"
        "\"startTime\":1000,\"endTime\":17000,"
        "\"samples\":[3,4,3,4,3,6,2,2,3,6,6,3,6,5,3,6],"
        "\"timeDeltas\":[1000,1000,1000,1000,1000,1000,1000,1000,1000,1000,1000,1000,1000,"
        "1000,1000,1000]}";
    cn_agg_profile *p = import_ok(text);
    assert_int_equal(cn_agg_sample_count(p), 16);
    /* and, as DevTools' SamplesIntegrator (§5.5), (program) samples have no path and GC
     * samples take the last non-GC sample's stack (5 for 6 and 7) */
    const char *want[16] = {"",        "bar",     "bar", "bar",     "bar",     "bar;foo",
                            "bar;foo", "bar;foo", "",    "bar;foo", "bar;foo", "bar;foo",
                            "bar;foo", "baz",     "",    "bar;foo"};
    const char *raw[16] = {"(program)",
                           "bar",
                           "(program)",
                           "bar",
                           "(program)",
                           "bar;foo",
                           "(garbage collector)",
                           "(garbage collector)",
                           "(program)",
                           "bar;foo",
                           "bar;foo",
                           "(program)",
                           "bar;foo",
                           "baz",
                           "(program)",
                           "bar;foo"};
    char buf[256];
    for (size_t i = 0; i < 16; i++) {
        stack_text(p, cn_agg_sample_timeline_stack(p, i), buf, sizeof(buf));
        assert_string_equal(buf, want[i]);
        stack_text(p, cn_agg_sample_stack(p, i), buf, sizeof(buf));
        assert_string_equal(buf, raw[i]);
    }
    /* self/total are untouched: (program) keeps its 6 samples (hit counts from samples;
     * the average interval is 16 ms / 16 samples) */
    fn_row rows[8];
    size_t n = functions(p, rows, 8);
    assert_true(fabs(find_fn(rows, n, "(program)")->self - 6 * 1.0) < 1e-9);
    assert_string_equal(cn_agg_meta_get(p, "timeline.end_ns"), "17000000");
    cn_agg_profile_free(p);
}

static void test_cpuprofile_errors(void **state)
{
    (void)state;
    char buf[4096];
    size_t len = strlen(cpu_basic) - 40;
    import_fails(cpu_basic, len, -EINVAL, "bad.txt: byte ");
    import_fails(cpu_basic, len, -EINVAL, "truncated JSON");
    const char *t;
    t = "{\"nodes\":[{\"id\":1,\"callFrame\":{}}],\"startTime\":0,\"endTime\":1,"
        "\"samples\":\"x\"}";
    import_fails(t, strlen(t), -EINVAL, "'samples' must be an array");
    t = "{\"nodes\":[{\"id\":1,\"callFrame\":{\"functionName\":7}}]}";
    import_fails(t, strlen(t), -EINVAL, "'functionName' must be a string");
    t = "{\"nodes\":[{\"id\":1,\"callFrame\":{}}],\"startTime\":0,\"endTime\":1,"
        "\"samples\":[1,9],\"timeDeltas\":[1,1]}";
    import_fails(t, strlen(t), -EINVAL, "samples[1] references unknown node id 9");
    t = "{\"nodes\":[{\"id\":1,\"callFrame\":{}},{\"id\":1,\"callFrame\":{}}]}";
    import_fails(t, strlen(t), -EINVAL, "byte 34: repeated node id 1");
    t = "{\"nodes\":[{\"id\":1,\"callFrame\":{},\"children\":[2]},"
        "{\"id\":2,\"callFrame\":{},\"children\":[3]},{\"id\":3,\"callFrame\":{},"
        "\"children\":[2]}]}";
    import_fails(t, strlen(t), -EINVAL, "already has a parent or is the root (a cycle)");
    t = "{\"nodes\":[{\"id\":1,\"callFrame\":{}},"
        "{\"id\":2,\"callFrame\":{},\"children\":[3]},{\"id\":3,\"callFrame\":{},"
        "\"children\":[2]}]}";
    import_fails(t, strlen(t), -EINVAL, "not reachable from the root");
    t = "{\"nodes\":[{\"id\":1,\"callFrame\":{},\"children\":[1]}]}";
    import_fails(t, strlen(t), -EINVAL, "(a cycle)");
    t = "{\"nodes\":[{\"id\":1,\"callFrame\":{}}],\"startTime\":0,\"endTime\":1,"
        "\"samples\":[1,1],\"timeDeltas\":[1]}";
    import_fails(t, strlen(t), -EINVAL, "samples has 2 entries but timeDeltas 1");
    t = "{\"nodes\":[{\"id\":1,\"callFrame\":{}}]}";
    import_fails(t, strlen(t), -EINVAL, "missing 'startTime'");
    t = "{\"traceEvents\":[]}";
    import_fails(t, strlen(t), -EINVAL, "no 'nodes' array");
    t = "{\"nodes\":[{\"id\":1,\"callFrame\":{}}] x";
    import_fails(t, strlen(t), -EINVAL, "invalid JSON");
    snprintf(buf, sizeof(buf), "%s", "[1,2]");
    import_fails(buf, strlen(buf), -EINVAL, "not a profile");
}

/* The streaming JSON importers name the byte of an error in the whole input, not in the
 * chunk being parsed: a gzipped input is decompressed and fed in chunks (1 MiB after a
 * 64 KiB head), so an error after 1.5 MB of blanks is reported at the same offset as when
 * the plain buffer is parsed in one piece, and that offset is where the bad value ends. */
static void test_json_error_offsets(void **state)
{
    (void)state;
    static const struct {
        const char *head, *tail, *bad, *want;
    } cases[] = {
        {"{\"unit\":\"samples\",\"roots\":[", "{\"name\":\"a\",\"self\":\"x\"}]}", "\"x\"",
         "'self' must be a number"},
        {"{\"nodes\":[", "{\"id\":\"x\",\"callFrame\":{}}]}", "\"x\"", "'id' must be"},
        {"{\"unit\":\"samples\",\"roots\":[", "{\"name\":\"a\",\"self\":1}] @", NULL,
         "invalid JSON"},
        {"{\"nodes\":[", "{\"id\":1,\"callFrame\":{}}", NULL, "truncated JSON"},
    };
    size_t pad = 1500000;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t hl = strlen(cases[i].head), tl = strlen(cases[i].tail), len = hl + pad + tl;
        char *text = malloc(len + 1);
        assert_non_null(text);
        memcpy(text, cases[i].head, hl);
        memset(text + hl, ' ', pad);
        memcpy(text + hl + pad, cases[i].tail, tl + 1);
        unsigned char *gz;
        size_t gz_len;
        gzip_buf(text, len, &gz, &gz_len);
        cn_agg_profile *p = NULL;
        cn_err e_plain = {0}, e_gz = {0};
        assert_int_equal(cn_fmt_import_buffer(text, len, "x", &p, &e_plain), -EINVAL);
        assert_int_equal(cn_fmt_import_buffer(gz, gz_len, "x", &p, &e_gz), -EINVAL);
        assert_null(p);
        if (strcmp(e_plain.msg, e_gz.msg) != 0 || !strstr(e_gz.msg, cases[i].want))
            fprintf(stderr, "plain '%s', gzip '%s'\n", e_plain.msg, e_gz.msg);
        assert_string_equal(e_plain.msg, e_gz.msg);
        assert_non_null(strstr(e_gz.msg, cases[i].want));
        unsigned long long off = 0;
        assert_int_equal(sscanf(e_gz.msg, "x: byte %llu:", &off), 1);
        assert_true(off > 1024 * 1024);
        if (cases[i].bad) {
            const char *b = strstr(text + hl + pad, cases[i].bad);
            assert_non_null(b);
            assert_int_equal(off, (size_t)(b - text) + strlen(cases[i].bad));
        }
        free(gz);
        free(text);
    }
}

/* ---- canopy's JSON tree read back (docs/cli.md "JSON tree") -------------------------- */

/* Each node's path weighted by its self; libraries and units carried; unknown fields of
 * any type skipped; the text of the imported tree is the original's. */
static void test_tree_json(void **state)
{
    (void)state;
    const char *t =
        "{\"unit\":\"ms\",\"total\":4.5,\"view\":\"tree\",\"transforms\":[\"merge:x\"],"
        "\"roots\":[{\"name\":\"main\",\"lib\":\"app\",\"total\":4.5,\"self\":0.5,"
        "\"extra\":{\"k\":[1,{\"z\":null}]},\"children\":["
        "{\"name\":\"read\",\"lib\":\"[kernel]\",\"total\":3,\"self\":3,\"children\":[]},"
        "{\"name\":\"f\",\"lib\":\"https://x/a.js\",\"total\":1,\"self\":1,"
        "\"children\":[{\"name\":\"zero\",\"total\":0,\"self\":0,\"children\":[]}]}]}],"
        "\"session\":\"s1\",\"samples\":9,\"diff\":false}";
    cn_agg_profile *p = import_ok(t);
    assert_int_equal(cn_agg_profile_unit(p), CN_AGG_UNIT_MS);
    assert_true(cn_agg_profile_scale(p) == 1);
    cn_agg_query q;
    cn_agg_query_init(&q);
    cn_agg_tree *tree = NULL;
    cn_err err = {0};
    assert_int_equal(cn_agg_query_run(p, &q, &tree, &err), 0);
    assert_true(tree->total == 4.5);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_int_equal(cn_fmt_write_text(p, tree, NULL, m), 0);
    fclose(m);
    assert_string_equal(buf, "profile: call tree, total 4.5 ms, transforms: none\n"
                             "100.0% 4.5    11.1% 0.5   main\n"
                             " 66.7%   3    66.7%   3     read\n"
                             " 22.2%   1    22.2%   1     f\n");
    free(buf);
    cn_agg_tree_free(tree);
    bool kernel = false, url = false;
    for (size_t r = 0; r < cn_agg_resource_count(p); r++) {
        const char *name = cn_agg_resource_name(p, (int32_t)r);
        kernel |= !strcmp(name, "[kernel]") &&
                  cn_agg_resource_kind_of(p, (int32_t)r) == CN_AGG_RES_KERNEL;
        url |= !strcmp(name, "https://x/a.js") &&
               cn_agg_resource_kind_of(p, (int32_t)r) == CN_AGG_RES_URL;
    }
    assert_true(kernel && url);
    cn_agg_profile_free(p);
    /* an empty tree is a profile without samples */
    p = import_ok("  {\"unit\":\"samples\",\"total\":0,\"view\":\"tree\",\"roots\":[]}\n");
    assert_int_equal(cn_agg_sample_count(p), 0);
    cn_agg_profile_free(p);
}

static void test_tree_json_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"{\"unit\":\"samples\",\"view\":\"functions\",\"functions\":[]}",
         "a JSON 'functions' view cannot be read back"},
        {"{\"unit\":\"samples\",\"functions\":[]}", "a JSON function list cannot be read back"},
        {"{\"unit\":\"samples\",\"view\":\"callers\",\"roots\":[]}", "'callers' view cannot"},
        {"{\"unit\":\"samples\",\"diff\":true,\"roots\":[]}", "a differential JSON tree"},
        {"{\"unit\":\"parsecs\",\"roots\":[]}", "unknown unit 'parsecs'"},
        {"{\"unit\":\"samples\"}", "without 'roots'"},
        {"{\"unit\":\"samples\",\"roots\":{}}", "'roots' must be an array"},
        {"{\"unit\":\"samples\",\"roots\":[1]}", "elements must be objects"},
        {"{\"unit\":\"samples\",\"roots\":[{\"name\":\"a\",\"children\":[null]}]}",
         "elements must be objects"},
        {"{\"unit\":\"samples\",\"roots\":[{\"self\":1}]}", "a node without 'name'"},
        {"{\"unit\":\"samples\",\"roots\":[{\"children\":[],\"name\":\"a\"}]}",
         "a node without 'name' (or 'name' after 'children')"},
        {"{\"unit\":\"samples\",\"roots\":[{\"name\":1}]}", "'name' must be a string"},
        {"{\"unit\":\"samples\",\"roots\":[{\"name\":\"a\",\"kind\":1}]}",
         "'kind' must be a string"},
        {"{\"unit\":\"samples\",\"roots\":[{\"name\":\"a\",\"lib\":\"a.py\",\"children\":[],"
         "\"kind\":\"python\"}]}",
         "'kind' after 'children'"},
        {"{\"unit\":\"samples\",\"roots\":[{\"name\":\"a\",\"self\":\"1\"}]}",
         "'self' must be a number"},
        {"{\"unit\":\"samples\",\"roots\":[{\"name\":\"a\",\"self\":1e999}]}",
         "'self' out of range"},
        {"{\"unit\":\"samples\",\"roots\":[{\"name\":\"a\",\"children\":7}]}",
         "'children' must be an array"},
        {"{\"unit\":\"samples\",\"roots\":[{\"name\":\"a\",\"self\":1", "truncated JSON"},
        {"{\"unit\":\"samples\",\"roots\":[]} x", "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        import_fails(bad[i].text, strlen(bad[i].text), -EINVAL, bad[i].want);
        import_fails(bad[i].text, strlen(bad[i].text), -EINVAL, "bad.txt: byte ");
    }
    /* A tree as deep as the bound allows fails cleanly beyond it (no recursion). */
    size_t depth = 100001, n = 0;
    char *deep = malloc(depth * 40 + 64);
    assert_non_null(deep);
    n += (size_t)sprintf(deep, "{\"unit\":\"samples\",\"roots\":[");
    for (size_t d = 0; d < depth; d++)
        n += (size_t)sprintf(deep + n, "{\"name\":\"f\",\"self\":1,\"children\":[");
    for (size_t d = 0; d < depth; d++)
        n += (size_t)sprintf(deep + n, "]}");
    n += (size_t)sprintf(deep + n, "]}");
    import_fails(deep, n, -EINVAL, "tree deeper than 100000 levels");
    /* 3000 levels (6000 nested JSON values, beyond a recursive parser's bound) import */
    n = (size_t)sprintf(deep, "{\"unit\":\"samples\",\"roots\":[");
    for (size_t d = 0; d < 3000; d++)
        n += (size_t)sprintf(deep + n, "{\"name\":\"f%zu\",\"self\":1,\"children\":[", d % 7);
    for (size_t d = 0; d < 3000; d++)
        n += (size_t)sprintf(deep + n, "]}");
    n += (size_t)sprintf(deep + n, "]}");
    cn_agg_profile *p = NULL;
    cn_err err = {0};
    assert_int_equal(cn_fmt_import_buffer(deep, n, "deep.json", &p, &err), 0);
    assert_int_equal(cn_agg_sample_count(p), 3000);
    assert_int_equal(cn_agg_stack_count(p), 3000);
    cn_agg_profile_free(p);
    free(deep);
}

/* Reads the real node --cpu-prof file with jansson and computes DevTools' self per
 * function name: hitCount × (endTime − startTime) / 1000 / Σ hitCount. */
static void test_cpuprofile_real(void **state)
{
    (void)state;
    char path[512];
    data_path("cpuprofile/workload.cpuprofile", path, sizeof(path));
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    assert_non_null(root);
    json_t *nodes = json_object_get(root, "nodes");
    double span_ms = (json_number_value(json_object_get(root, "endTime")) -
                      json_number_value(json_object_get(root, "startTime"))) /
                     1000.0;
    double hits = 0;
    size_t i;
    json_t *node;
    json_array_foreach(nodes, i, node) hits +=
        (double)json_integer_value(json_object_get(node, "hitCount"));
    fn_row want[128];
    size_t nw = 0;
    json_array_foreach(nodes, i, node)
    {
        const char *name =
            json_string_value(json_object_get(json_object_get(node, "callFrame"), "functionName"));
        if (!strcmp(name, "(root)"))
            continue;
        if (!*name)
            name = "(anonymous)";
        size_t k = 0;
        while (k < nw && strcmp(want[k].name, name))
            k++;
        if (k == nw) {
            assert_true(nw < 128);
            snprintf(want[nw].name, sizeof(want[nw].name), "%s", name);
            want[nw++].self = 0;
        }
        want[k].self +=
            (double)json_integer_value(json_object_get(node, "hitCount")) * span_ms / hits;
    }
    json_int_t delta_sum = 0;
    json_t *d;
    json_array_foreach(json_object_get(root, "timeDeltas"), i, d) delta_sum +=
        json_integer_value(d);
    size_t n_samples = json_array_size(json_object_get(root, "samples"));
    json_decref(root);

    cn_agg_profile *p = NULL;
    cn_err err;
    assert_int_equal(cn_fmt_import_file(path, &p, &err), 0);
    assert_int_equal(cn_agg_sample_count(p), n_samples);
    assert_int_equal(cn_agg_sample_time(p, n_samples - 1), delta_sum * 1000);
    assert_true(fabs(total_weight(p) * cn_agg_profile_scale(p) - span_ms) < 1e-6);
    fn_row rows[128];
    size_t n = functions(p, rows, 128);
    for (size_t k = 0; k < nw; k++) {
        const fn_row *got = find_fn(rows, n, want[k].name);
        double self = got ? got->self : 0.0;
        if (fabs(self - want[k].self) > 1e-6)
            fprintf(stderr, "%s: got %f want %f\n", want[k].name, self, want[k].self);
        assert_true(fabs(self - want[k].self) < 1e-6);
    }
    assert_true(find_fn(rows, n, "hotA")->self > find_fn(rows, n, "hotB")->self);
    assert_true(find_fn(rows, n, "mix")->total > 0.5 * span_ms);
    cn_agg_profile_free(p);
}

/* ---- .canopy round trip ----------------------------------------------------------- */

static void compare_trees(cn_agg_profile *a, cn_agg_profile *b, cn_agg_view view)
{
    cn_agg_query q;
    cn_agg_tree *ta, *tb;
    cn_err err;
    cn_agg_query_init(&q);
    q.view = view;
    assert_int_equal(cn_agg_query_run(a, &q, &ta, &err), 0);
    assert_int_equal(cn_agg_query_run(b, &q, &tb, &err), 0);
    assert_true(ta->total == tb->total);
    assert_int_equal(ta->n_nodes, tb->n_nodes);
    assert_int_equal(ta->first_root, tb->first_root);
    assert_memory_equal(ta->nodes, tb->nodes, ta->n_nodes * sizeof(*ta->nodes));
    assert_int_equal(ta->n_functions, tb->n_functions);
    if (ta->n_functions)
        assert_memory_equal(ta->functions, tb->functions, ta->n_functions * sizeof(*ta->functions));
    cn_agg_tree_free(ta);
    cn_agg_tree_free(tb);
}

static void compare_profiles(cn_agg_profile *a, cn_agg_profile *b)
{
    for (int32_t i = 0;; i++) {
        const char *sa = cn_agg_string_get(a, i), *sb = cn_agg_string_get(b, i);
        if (!sa || !sb) {
            assert_true(!sa && !sb);
            break;
        }
        assert_string_equal(sa, sb);
    }
    assert_int_equal(cn_agg_profile_unit(a), cn_agg_profile_unit(b));
    assert_true(cn_agg_profile_scale(a) == cn_agg_profile_scale(b));
    assert_int_equal(cn_agg_resource_count(a), cn_agg_resource_count(b));
    for (int32_t i = 0; i < (int32_t)cn_agg_resource_count(a); i++) {
        assert_string_equal(cn_agg_resource_name(a, i), cn_agg_resource_name(b, i));
        assert_int_equal(cn_agg_resource_kind_of(a, i), cn_agg_resource_kind_of(b, i));
    }
    assert_int_equal(cn_agg_func_count(a), cn_agg_func_count(b));
    for (int32_t i = 0; i < (int32_t)cn_agg_func_count(a); i++) {
        assert_int_equal(cn_agg_func_name_id(a, i), cn_agg_func_name_id(b, i));
        assert_int_equal(cn_agg_func_resource(a, i), cn_agg_func_resource(b, i));
        assert_int_equal(cn_agg_func_line(a, i), cn_agg_func_line(b, i));
    }
    assert_int_equal(cn_agg_frame_count(a), cn_agg_frame_count(b));
    for (int32_t i = 0; i < (int32_t)cn_agg_frame_count(a); i++) {
        const int32_t *fa, *fb;
        size_t na = cn_agg_frame_funcs(a, i, &fa), nb = cn_agg_frame_funcs(b, i, &fb);
        assert_int_equal(na, nb);
        assert_memory_equal(fa, fb, na * sizeof(*fa));
        assert_int_equal(cn_agg_frame_address(a, i), cn_agg_frame_address(b, i));
        assert_int_equal(cn_agg_frame_line(a, i), cn_agg_frame_line(b, i));
        assert_int_equal(cn_agg_frame_resource(a, i), cn_agg_frame_resource(b, i));
    }
    assert_int_equal(cn_agg_stack_count(a), cn_agg_stack_count(b));
    for (int32_t i = 0; i < (int32_t)cn_agg_stack_count(a); i++) {
        assert_int_equal(cn_agg_stack_prefix(a, i), cn_agg_stack_prefix(b, i));
        assert_int_equal(cn_agg_stack_frame(a, i), cn_agg_stack_frame(b, i));
    }
    assert_int_equal(cn_agg_thread_count(a), cn_agg_thread_count(b));
    for (int32_t i = 0; i < (int32_t)cn_agg_thread_count(a); i++) {
        assert_int_equal(cn_agg_thread_tid(a, i), cn_agg_thread_tid(b, i));
        const char *pa = cn_agg_process_name(a, cn_agg_thread_pid(a, i));
        const char *pb = cn_agg_process_name(b, cn_agg_thread_pid(b, i));
        assert_true((!pa && !pb) || (pa && pb && !strcmp(pa, pb)));
    }
    assert_int_equal(cn_agg_meta_count(a), cn_agg_meta_count(b));
    for (size_t i = 0; i < cn_agg_meta_count(a); i++) {
        const char *k = cn_agg_meta_key(a, i);
        assert_string_equal(cn_agg_meta_get(a, k), cn_agg_meta_get(b, k));
    }
    assert_int_equal(cn_agg_sample_count(a), cn_agg_sample_count(b));
    for (size_t i = 0; i < cn_agg_sample_count(a); i++) {
        assert_int_equal(cn_agg_sample_stack(a, i), cn_agg_sample_stack(b, i));
        assert_int_equal(cn_agg_sample_timeline_stack(a, i), cn_agg_sample_timeline_stack(b, i));
        assert_int_equal(cn_agg_sample_time(a, i), cn_agg_sample_time(b, i));
        assert_true(cn_agg_sample_weight(a, i) == cn_agg_sample_weight(b, i));
        assert_int_equal(cn_agg_sample_thread(a, i), cn_agg_sample_thread(b, i));
    }
    compare_trees(a, b, CN_AGG_VIEW_TREE);
    compare_trees(a, b, CN_AGG_VIEW_FUNCTIONS);
    compare_trees(a, b, CN_AGG_VIEW_INVERTED);
}

/* Writes p as .canopy into memory, reads it back, compares; returns the bytes. */
static char *round_trip(cn_agg_profile *p, size_t *len_out)
{
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    assert_non_null(f);
    assert_int_equal(cn_agg_write_canopy(p, f), 0);
    fclose(f);
    cn_agg_profile *q = NULL;
    cn_err err;
    int rc = cn_fmt_import_buffer(mem, len, "rt.canopy", &q, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    compare_profiles(p, q);
    cn_agg_profile_free(q);
    *len_out = len;
    return mem;
}

static void test_canopy_round_trip(void **state)
{
    (void)state;
    size_t len;
    cn_agg_profile *p = import_ok(cpu_basic);
    free(round_trip(p, &len));
    cn_agg_profile_free(p);
    p = import_ok(perf_text);
    free(round_trip(p, &len));
    cn_agg_profile_free(p);
    p = import_ok("A;B 1 3\nA;C 2 0\n");
    free(round_trip(p, &len));
    cn_agg_profile_free(p);

    /* a live-session-like profile: native frames, symbolication with an inline chain
     * (rename map), retention (accumulator), timeline stacks, odd strings */
    p = cn_agg_profile_new();
    int32_t lib = cn_agg_resource(p, "app", "build-id:abc", "/bin/app", CN_AGG_RES_LIBRARY);
    int32_t th = cn_agg_thread(p, 10, 11, "w\\ork\ner\r");
    assert_int_equal(cn_agg_process_set_name(p, 10, "app"), 0);
    cn_agg_frame_ref refs[3] = {{lib, 0x30}, {lib, 0x20}, {lib, 0x10}};
    int32_t s1 = cn_agg_stack_from_refs(p, refs, 3);
    int32_t s2 = cn_agg_stack_from_refs(p, refs + 1, 2);
    for (int i = 0; i < 20; i++)
        assert_int_equal(cn_agg_add_sample(p, i % 3 ? s1 : s2, i * 1000 - (i == 7) * 5000, i * 0.5,
                                           i % 2 ? th : -1),
                         0);
    assert_int_equal(cn_agg_sample_set_timeline_stack(p, 3, s2), 0);
    assert_int_equal(cn_agg_sample_set_timeline_stack(p, 12, -1), 0); /* no timeline path */
    cn_agg_symbol chain[2] = {{"outer", "a.c", 3}, {"inl", "b.h", 9}};
    cn_agg_frame_symbols fs = {cn_agg_stack_frame(p, s1), chain, 2, NULL};
    assert_int_equal(cn_agg_regroup(p, &fs, 1), 0);
    assert_true(cn_agg_fold_before(p, 5000) > 0);
    cn_agg_profile_set_unit(p, CN_AGG_UNIT_NS);
    cn_agg_profile_set_scale(p, 0.1);
    assert_int_equal(cn_agg_meta_set(p, "event", "cpu-clock"), 0);
    char *mem = round_trip(p, &len);
    /* damaged copies fail cleanly */
    cn_agg_profile *q = NULL;
    cn_err err;
    assert_int_equal(cn_fmt_import_buffer(mem, len - 20, "rt.canopy", &q, &err), -EINVAL);
    assert_null(q);
    free(mem);
    cn_agg_profile_free(p);

    const char *t = "canopy-profile 4\n";
    import_fails(t, strlen(t), -EINVAL, "bad.txt:1: .canopy version 4 is not supported");
    t = "canopy-profile 1\nunit 0\nscale 1\nstrings 1\nx\nresources 0\nfuncs 1\n0 -1 5 0\n";
    import_fails(t, strlen(t), -EINVAL, "bad.txt:8: value 5 out of range");
    t = "canopy-profile 1\nunit 0\nscale 1\nstrings 2\nx\nx\n";
    import_fails(t, strlen(t), -EINVAL, "bad.txt:6: string 1 repeats string 0");
    t = "canopy-profile 1\nunit 0\nscale 1\nstrings 0\nresources 0\nfuncs 0\nframes 0\n"
        "stacks 0\nthreads 0\nprocesses 0\nmeta 0\nrenames 0\nsamples 0\naccumulator 0\n";
    import_fails(t, strlen(t), -EINVAL, "truncated .canopy");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detection_errors),
        cmocka_unit_test(test_gzip),
        cmocka_unit_test(test_folded),
        cmocka_unit_test(test_folded_errors),
        cmocka_unit_test(test_folded_diff),
        cmocka_unit_test(test_perf_script),
        cmocka_unit_test(test_perf_real),
        cmocka_unit_test(test_cpuprofile_basic),
        cmocka_unit_test(test_cpuprofile_variants),
        cmocka_unit_test(test_cpuprofile_fix_missing),
        cmocka_unit_test(test_cpuprofile_errors),
        cmocka_unit_test(test_json_error_offsets),
        cmocka_unit_test(test_cpuprofile_real),
        cmocka_unit_test(test_canopy_round_trip),
        cmocka_unit_test(test_tree_json),
        cmocka_unit_test(test_tree_json_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
