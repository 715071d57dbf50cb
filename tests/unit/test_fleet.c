/* Unit tests of fleet/ (cn_fleet.h): labels, stack hashes, TabSeparated round trips,
 * collecting a profile's window into rows (merging, hold-back for symbols, stack
 * definitions written once), filter SQL, and the pusher's spool surviving a restart.
 * ClickHouse itself is exercised by tests/integration/test_fleet*.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "cn_fleet.h"
#include "fleet_internal.h"
#include "push.pb-c.h"

static void test_labels(void **state)
{
    cn_fleet_labels l = {0};
    cn_err err = {0};
    (void)state;
    assert_int_equal(cn_fleet_labels_parse(&l, "env=prod,dc=x-1,version=", &err), 0);
    assert_int_equal(l.n, 3);
    assert_string_equal(cn_fleet_labels_get(&l, "dc"), "x-1");
    assert_string_equal(cn_fleet_labels_get(&l, "version"), "");
    assert_int_equal(cn_fleet_labels_parse(&l, "env=dev", &err), 0); /* replaces */
    assert_int_equal(l.n, 3);
    assert_string_equal(cn_fleet_labels_get(&l, "env"), "dev");
    assert_int_equal(cn_fleet_labels_parse(&l, "novalue", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "novalue"));
    assert_int_equal(cn_fleet_labels_parse(&l, "1x=y", &err), -EINVAL);
    assert_int_equal(cn_fleet_labels_parse(&l, "a b=y", &err), -EINVAL);
    assert_int_equal(cn_fleet_label_check("k", "tab\there", &err), -EINVAL);
    assert_int_equal(cn_fleet_label_check("k", "a,b", &err), -EINVAL);
    cn_fleet_labels_clear(&l);
    for (int i = 0; i < CN_FLEET_MAX_LABELS; i++) {
        char k[16];
        snprintf(k, sizeof(k), "k%d", i);
        assert_int_equal(cn_fleet_labels_set(&l, k, "v", &err), 0);
    }
    assert_int_equal(cn_fleet_labels_set(&l, "one_more", "v", &err), -EINVAL);
    assert_int_equal(cn_fleet_labels_set(&l, "k0", "w", &err), 0); /* replacing is fine */
    cn_fleet_labels_clear(&l);
}

static void test_hash(void **state)
{
    const char *f[] = {"main", "work"}, *lib[] = {"app", "libc.so.6"};
    const char *f2[] = {"work", "main"}, *lib2[] = {"app", "app"};
    (void)state;
    /* The streaming hash is the one-shot XXH3 of "func\0lib\0" per frame, root first. */
    const char flat[] = "main\0app\0work\0libc.so.6\0";
    uint64_t h = cn_fleet_stack_hash(f, lib, 2);
    assert_true(h == XXH3_64bits(flat, sizeof(flat) - 1));
    assert_true(h != cn_fleet_stack_hash(f2, lib, 2));
    assert_true(h != cn_fleet_stack_hash(f, lib2, 2));
    assert_true(h != cn_fleet_stack_hash(f, lib, 1));
}

static void test_tsv_round_trip(void **state)
{
    const char *s[] = {"plain", "tab\there", "line\nbreak", "back\\slash", "it's", ""};
    (void)state;
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
        cn_buf b;
        char *fields[3];
        cn_buf_init(&b, 0);
        assert_int_equal(cn_buf_append(&b, "x\t", 2), 0);
        assert_int_equal(cn_fleet__tsv(&b, s[i], false), 0);
        assert_int_equal(cn_buf_append(&b, "\ty", 2), 0);
        assert_null(memchr(cn_buf_ptr(&b), '\n', cn_buf_len(&b)));
        assert_int_equal(cn_fleet__tsv_split(cn_buf_ptr(&b), cn_buf_len(&b), fields, 3), 3);
        assert_string_equal(fields[0], "x");
        assert_string_equal(fields[1], s[i]);
        assert_string_equal(fields[2], "y");
        cn_buf_free(&b);
    }
}

/* A profile: app's frames at 0x10 and 0x20 are both in `work` (called from `main` at
 * 0x100); libx's frame at 0x30 has no symbol yet. */
static cn_agg_profile *make_profile(int32_t *res_x)
{
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    int32_t app = cn_agg_resource(p, "app", "id-app", NULL, CN_AGG_RES_LIBRARY);
    *res_x = cn_agg_resource(p, "libx.so", "buildid-x", NULL, CN_AGG_RES_LIBRARY);
    cn_agg_frame_ref a[2] = {{app, 0x10}, {app, 0x100}}, b[2] = {{app, 0x20}, {app, 0x100}};
    cn_agg_frame_ref c[2] = {{*res_x, 0x30}, {app, 0x100}};
    cn_agg_sample_refs batch[] = {
        {a, 2, 1000, 1, -1}, {b, 2, 2000, 1, -1}, {a, 2, 3000, 1, -1},
        {c, 2, 4000, 1, -1}, {a, 2, 9000, 1, -1},
    };
    assert_int_equal(cn_agg_add_samples_refs(p, batch, 5), 0);
    cn_agg_symbol work = {"work", NULL, 0}, mn = {"main", NULL, 0};
    int32_t fa = cn_agg_native_frame(p, app, 0x10), fb = cn_agg_native_frame(p, app, 0x20);
    int32_t fm = cn_agg_native_frame(p, app, 0x100);
    cn_agg_frame_symbols syms[] = {{fa, &work, 1, NULL}, {fb, &work, 1, NULL}, {fm, &mn, 1, NULL}};
    assert_int_equal(cn_agg_regroup(p, syms, 3), 0);
    return p;
}

static size_t count_lines(const cn_buf *b)
{
    size_t n = 0;
    for (size_t i = 0; i < cn_buf_len(b); i++)
        n += cn_buf_ptr(b)[i] == '\n';
    return n;
}

static void test_collect(void **state)
{
    int32_t res_x;
    cn_agg_profile *p = make_profile(&res_x);
    cn_fleet_seen *seen = cn_fleet_seen_new(0);
    cn_fleet_labels l = {0};
    uint64_t n = 0;
    (void)state;
    assert_int_equal(cn_fleet_labels_parse(&l, "env=prod", NULL), 0);
    cn_fleet_source src = {1700000000, "h1", "svc", "s1", &l};
    cn_fleet_batch *b = cn_fleet_batch_new();

    /* [0, 3500): three samples in work via two addresses → one row of 3. */
    cn_fleet_window w = {0, 3500, false};
    assert_int_equal(cn_fleet_collect(b, p, &w, &src, seen, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(b->sample_rows, 1);
    assert_int_equal(b->stack_rows, 1);
    assert_int_equal(count_lines(&b->samples), 1);
    char *fields[9];
    char *line = strdup(cn_buf_ptr(&b->samples));
    assert_int_equal(cn_fleet__tsv_split(line, strcspn(line, "\n"), fields, 9), 9);
    assert_string_equal(fields[0], "1700000000");
    assert_string_equal(fields[1], "h1");
    assert_string_equal(fields[4], "['env']");
    assert_string_equal(fields[5], "['prod']");
    const char *fn[] = {"main", "work"}, *lib[] = {"app", "app"};
    char want[32];
    snprintf(want, sizeof(want), "%llu", (unsigned long long)cn_fleet_stack_hash(fn, lib, 2));
    assert_string_equal(fields[6], want);
    assert_string_equal(fields[7], "3");
    free(line);
    assert_non_null(strstr(cn_buf_ptr(&b->stacks), "['main','work']\t['app','app']"));

    /* [3500, 5000) holds libx's unsymbolized frame: held back, then sent as lib+0xOFF
     * with its build-id. */
    w = (cn_fleet_window){3500, 5000, false};
    size_t before = cn_buf_len(&b->samples);
    assert_int_equal(cn_fleet_collect(b, p, &w, &src, seen, &n), -EAGAIN);
    assert_int_equal(cn_buf_len(&b->samples), before);
    w.allow_unresolved = true;
    assert_int_equal(cn_fleet_collect(b, p, &w, &src, seen, &n), 0);
    assert_int_equal(n, 1);
    assert_non_null(strstr(cn_buf_ptr(&b->stacks), "libx.so+0x30"));
    assert_non_null(strstr(cn_buf_ptr(&b->stacks), "buildid-x"));
    assert_int_equal(b->stack_rows, 2);

    /* [5000, 10000): work again: its definition is not written twice. */
    w = (cn_fleet_window){5000, 10000, false};
    assert_int_equal(cn_fleet_collect(b, p, &w, &src, seen, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(b->stack_rows, 2);
    assert_int_equal(b->sample_rows, 3);
    assert_int_equal(b->weight_samples, 5);
    assert_int_equal(cn_fleet_seen_count(seen), 2);
    /* An empty window adds nothing. */
    w = (cn_fleet_window){20000, 30000, false};
    assert_int_equal(cn_fleet_collect(b, p, &w, &src, seen, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(b->sample_rows, 3);

    cn_fleet_batch_free(b);
    cn_fleet_seen_free(seen);
    cn_fleet_labels_clear(&l);
    cn_agg_profile_free(p);
}

/* A Python function's frame (docs/python.md) is marked "python" in its definition's kinds
 * column, root first like funcs and libs; the hash is the one of funcs and libs alone. */
static void test_collect_python(void **state)
{
    (void)state;
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    int32_t app = cn_agg_resource(p, "python3", "id-py", NULL, CN_AGG_RES_LIBRARY);
    int32_t py = cn_agg_python_resource(p, "/srv/wl.py");
    int32_t fm = cn_agg_frame(p, cn_agg_func(p, "main", app, NULL, 0), app, 0x10, 0);
    int32_t fw = cn_agg_frame(p, cn_agg_func(p, "work", py, "/srv/wl.py", 3), py, 0x20, 5);
    int32_t frames[2] = {fm, fw};
    int32_t st = cn_agg_stack_from_frames(p, frames, 2);
    assert_int_equal(cn_agg_add_sample(p, st, 1000, 1, -1), 0);
    cn_fleet_seen *seen = cn_fleet_seen_new(0);
    cn_fleet_batch *b = cn_fleet_batch_new();
    cn_fleet_source src = {1700000000, "h1", "svc", "s1", NULL};
    cn_fleet_window w = {0, 5000, false};
    assert_int_equal(cn_fleet_collect(b, p, &w, &src, seen, NULL), 0);
    assert_int_equal(b->stack_rows, 1);
    char *fields[8];
    char *line = strdup(cn_buf_ptr(&b->stacks));
    assert_int_equal(cn_fleet__tsv_split(line, strcspn(line, "\n"), fields, 8), 7);
    const char *fn[] = {"main", "work"}, *lib[] = {"python3", "wl.py"};
    char want[32];
    snprintf(want, sizeof(want), "%llu", (unsigned long long)cn_fleet_stack_hash(fn, lib, 2));
    assert_string_equal(fields[0], want);
    assert_string_equal(fields[3], "['main','work']");
    assert_string_equal(fields[4], "['python3','wl.py']");
    assert_string_equal(fields[5], "['','']");
    assert_string_equal(fields[6], "['','python']");
    free(line);
    cn_fleet_batch_free(b);
    cn_fleet_seen_free(seen);
    cn_agg_profile_free(p);
}

static void test_filter_sql(void **state)
{
    cn_fleet_filter f;
    cn_buf sql;
    cn_err err = {0};
    (void)state;
    cn_fleet_filter_init(&f);
    cn_buf_init(&sql, 0);
    assert_int_equal(cn_fleet_filter_sql(&f, &sql), 0);
    assert_int_equal(cn_buf_len(&sql), 0);
    assert_int_equal(cn_fleet_filter_add(&f, "host=a,env=prod", &err), 0);
    assert_int_equal(cn_fleet_filter_add(&f, "host=b'c", &err), 0);
    assert_int_equal(cn_fleet_filter_add(&f, "bad", &err), -EINVAL);
    f.from_s = 100;
    assert_int_equal(cn_fleet_filter_sql(&f, &sql), 0);
    assert_string_equal(cn_buf_ptr(&sql),
                        " WHERE (host = 'a' OR host = 'b\\'c') AND (label_values[indexOf("
                        "label_keys, 'env')] = 'prod') AND time >= toDateTime(100)");
    cn_buf_free(&sql);
    cn_fleet_filter_clear(&f);
}

/* The rows of a window: whole hours from the hourly rollup, whole 10-minute blocks of the
 * rest from the 10-minute rollup, the remaining edges from the raw rows; an open end needs
 * no edge; a window inside one 10-minute block and --raw read raw rows only. */
static void test_source_sql(void **state)
{
    cn_fleet_schema s = {.version = CN_FLEET_SCHEMA_VERSION};
    cn_fleet_filter f;
    cn_buf sql;
    cn_err err = {0};
    (void)state;
    snprintf(s.samples, sizeof(s.samples), "d.samples");
    snprintf(s.hourly, sizeof(s.hourly), "d.samples_hourly");
    snprintf(s.ten_min, sizeof(s.ten_min), "d.samples_10m");
    cn_fleet_filter_init(&f);
    cn_buf_init(&sql, 0);
    assert_int_equal(cn_fleet_filter_add(&f, "host=a", &err), 0);
    f.from_s = 10 * 3600 + 5;
    f.to_s = 13 * 3600 + 7;
    assert_int_equal(cn_fleet_source_sql(&s, &f, "stack", "x = 1", &sql), 0);
    assert_string_equal(cn_buf_ptr(&sql),
                        "(SELECT stack FROM d.samples_hourly WHERE (host = 'a') AND time >= "
                        "toDateTime(39600) AND time < toDateTime(46800) AND x = 1"
                        " UNION ALL SELECT stack FROM d.samples_10m WHERE (host = 'a') AND time >= "
                        "toDateTime(36600) AND time < toDateTime(39600) AND x = 1"
                        " UNION ALL SELECT stack FROM d.samples WHERE (host = 'a') AND time >= "
                        "toDateTime(36005) AND time < toDateTime(36600) AND x = 1"
                        " UNION ALL SELECT stack FROM d.samples WHERE (host = 'a') AND time >= "
                        "toDateTime(46800) AND time < toDateTime(46807) AND x = 1)");
    cn_buf_reset(&sql);
    f.from_s = 10 * 3600; /* aligned start, open end: the rollup alone */
    f.to_s = INT64_MAX;
    assert_int_equal(cn_fleet_source_sql(&s, &f, "stack", NULL, &sql), 0);
    assert_string_equal(cn_buf_ptr(&sql), "(SELECT stack FROM d.samples_hourly WHERE (host = "
                                          "'a') AND time >= toDateTime(36000))");
    cn_buf_reset(&sql);
    f.from_s = 10 * 3600 + 5; /* inside one hour: 10-minute blocks and a raw edge */
    f.to_s = 10 * 3600 + 3000;
    assert_int_equal(cn_fleet_source_sql(&s, &f, "stack", NULL, &sql), 0);
    assert_string_equal(cn_buf_ptr(&sql), "(SELECT stack FROM d.samples_10m WHERE (host = 'a') "
                                          "AND time >= toDateTime(36600) AND time < "
                                          "toDateTime(39000) UNION ALL SELECT stack FROM "
                                          "d.samples WHERE (host = 'a') AND time >= "
                                          "toDateTime(36005) AND time < toDateTime(36600))");
    cn_buf_reset(&sql);
    f.to_s = 10 * 3600 + 599; /* inside one 10-minute block: raw rows only */
    assert_int_equal(cn_fleet_source_sql(&s, &f, "stack", NULL, &sql), 0);
    assert_string_equal(cn_buf_ptr(&sql), "(SELECT stack FROM d.samples WHERE (host = 'a') AND "
                                          "time >= toDateTime(36005) AND time < "
                                          "toDateTime(36599))");
    cn_buf_reset(&sql);
    f.from_s = -1000; /* before 1970: rounding goes down, not toward zero */
    f.to_s = 700;
    assert_int_equal(cn_fleet_source_sql(&s, &f, "stack", NULL, &sql), 0);
    assert_string_equal(cn_buf_ptr(&sql), "(SELECT stack FROM d.samples_10m WHERE (host = 'a') "
                                          "AND time >= toDateTime(-600) AND time < "
                                          "toDateTime(600) UNION ALL SELECT stack FROM "
                                          "d.samples WHERE (host = 'a') AND time >= "
                                          "toDateTime(-1000) AND time < toDateTime(-600) UNION "
                                          "ALL SELECT stack FROM d.samples WHERE (host = 'a') "
                                          "AND time >= toDateTime(600) AND time < "
                                          "toDateTime(700))");
    f.from_s = 10 * 3600 + 5;
    cn_buf_reset(&sql);
    f.to_s = INT64_MAX;
    f.raw = true;
    assert_int_equal(cn_fleet_source_sql(&s, &f, "stack", NULL, &sql), 0);
    assert_string_equal(cn_buf_ptr(&sql), "(SELECT stack FROM d.samples WHERE (host = 'a') AND "
                                          "time >= toDateTime(36005))");
    cn_buf_free(&sql);
    cn_fleet_filter_clear(&f);
}

static void test_pusher_spool(void **state)
{
    char dir[] = "/tmp/test_fleet_XXXXXX", spool[64];
    cn_fleet_pusher *p = NULL;
    cn_fleet_push_stats st;
    cn_err err = {0};
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(spool, sizeof(spool), "%s/spool", dir);
    /* Port 1 on loopback refuses: every batch stays spooled. */
    cn_fleet_pusher_opts o = {.url = "http://127.0.0.1:1/", .spool_dir = spool};
    assert_int_equal(cn_fleet_pusher_new(&o, &p, &err), 0);
    for (int i = 0; i < 3; i++) {
        cn_fleet_batch *b = cn_fleet_batch_new();
        assert_int_equal(cn_buf_appendf(&b->samples, "%d\th\ts\ts1\t[]\t[]\t1\t1\t1\n", i), 0);
        b->sample_rows = 1;
        b->time_s = i;
        assert_int_equal(cn_fleet_pusher_submit(p, b), 0);
    }
    assert_int_equal(cn_fleet_pusher_flush(p, 300), -ETIMEDOUT);
    cn_fleet_pusher_stats(p, &st);
    assert_int_equal(st.rows_queued, 3);
    /* Batches queued together may share a spool file. */
    assert_true(st.batches_queued >= 1 && st.batches_queued <= 3);
    uint64_t files = st.batches_queued;
    assert_true(st.failures >= 1);
    assert_non_null(strstr(st.last_error, "127.0.0.1:1"));
    p = cn_fleet_pusher_free(p);
    /* A new pusher adopts them, oldest first. */
    assert_int_equal(cn_fleet_pusher_new(&o, &p, &err), 0);
    cn_fleet_pusher_stats(p, &st);
    assert_int_equal(st.batches_queued, files);
    assert_int_equal(st.rows_queued, 3);
    p = cn_fleet_pusher_free(p);
    /* A bound below one batch drops them all, counted. */
    o.spool_max = 10;
    assert_int_equal(cn_fleet_pusher_new(&o, &p, &err), 0);
    cn_fleet_pusher_stats(p, &st);
    assert_int_equal(st.batches_queued, 0);
    assert_int_equal(st.rows_dropped, 3);
    p = cn_fleet_pusher_free(p);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* OTLP requests: one per batch, never two in one batch, and batches queued together stay
 * one spool file (one request) each (two requests' dictionaries cannot be merged). */
static void test_otlp_batches(void **state)
{
    char dir[] = "/tmp/test_fleet_XXXXXX", spool[64];
    cn_fleet_pusher *p = NULL;
    cn_fleet_push_stats st;
    cn_err err = {0};
    const uint8_t req[] = {0x0a, 0x00, 0x12, 0x00}; /* resource_profiles {}, dictionary {} */
    (void)state;
    cn_fleet_batch *b = cn_fleet_batch_new();
    assert_int_equal(cn_fleet_otlp_set(b, req, 0, 0), -EINVAL);
    assert_int_equal(cn_fleet_otlp_set(b, req, sizeof(req), 7), 0);
    assert_int_equal(cn_fleet_otlp_set(b, req, sizeof(req), 7), -EINVAL);
    assert_int_equal(b->sample_rows, 1);
    assert_int_equal(b->time_s, 7);
    cn_fleet_batch_free(b);

    assert_non_null(mkdtemp(dir));
    snprintf(spool, sizeof(spool), "%s/spool", dir);
    cn_fleet_pusher_opts o = {
        .sink = CN_FLEET_SINK_OTLP, .url = "http://127.0.0.1:1/", .spool_dir = spool};
    assert_int_equal(cn_fleet_pusher_new(&o, &p, &err), 0);
    for (int i = 0; i < 5; i++) {
        b = cn_fleet_batch_new();
        assert_int_equal(cn_fleet_otlp_set(b, req, sizeof(req), i), 0);
        assert_int_equal(cn_fleet_pusher_submit(p, b), 0);
    }
    assert_int_equal(cn_fleet_pusher_flush(p, 300), -ETIMEDOUT);
    cn_fleet_pusher_stats(p, &st);
    assert_int_equal(st.rows_queued, 5);
    assert_int_equal(st.batches_queued, 5);
    assert_true(st.failures >= 1);
    p = cn_fleet_pusher_free(p);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* Two series appended to one batch decode as one PushRequest with both, in order; label
 * names are made Prometheus names, deduplicated (first wins), sorted and capped. */
static void test_pyroscope(void **state)
{
    (void)state;
    cn_fleet_batch *b = cn_fleet_batch_new();
    assert_non_null(b);
    cn_fleet_label l1[] = {{"__name__", "process_cpu"}, {"service_name", "web"}, {"host", "h1"},
                           {"dc.zone-x", "z"},          {"dc_zone_x", "later"},  {"1bad", "v"}};
    static const uint8_t prof1[] = {0x1f, 0x8b, 1, 2, 3}, prof2[] = {0x1f, 0x8b, 9};
    assert_int_equal(cn_fleet_pyroscope_add(b, l1, 6, prof1, sizeof(prof1), "id-1", 100), 0);
    cn_fleet_label many[40];
    char keys[40][8];
    for (int i = 0; i < 40; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%02d", i);
        many[i] = (cn_fleet_label){keys[i], "v"};
    }
    assert_int_equal(cn_fleet_pyroscope_add(b, many, 40, prof2, sizeof(prof2), NULL, 50), 0);
    assert_int_equal(b->sample_rows, 2);
    assert_int_equal(b->time_s, 50);
    Push__V1__PushRequest *req = push__v1__push_request__unpack(
        NULL, cn_buf_len(&b->samples), (const uint8_t *)cn_buf_ptr(&b->samples));
    assert_non_null(req);
    assert_int_equal(req->n_series, 2);
    Push__V1__RawProfileSeries *s = req->series[0];
    /* "1bad" became "_bad"; "dc_zone_x" lost to "dc.zone-x" (same name, first wins). */
    static const char *const names[] = {"__name__", "_bad", "dc_zone_x", "host", "service_name"};
    assert_int_equal(s->n_labels, 5);
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(s->labels[i]->name, names[i]);
    assert_string_equal(s->labels[2]->value, "z");
    assert_int_equal(s->n_samples, 1);
    assert_int_equal(s->samples[0]->raw_profile.len, sizeof(prof1));
    assert_memory_equal(s->samples[0]->raw_profile.data, prof1, sizeof(prof1));
    assert_string_equal(s->samples[0]->id, "id-1");
    s = req->series[1];
    assert_int_equal(s->n_labels, CN_FLEET_PYROSCOPE_MAX_LABELS);
    assert_string_equal(s->labels[0]->name, "k00");
    assert_string_equal(s->labels[CN_FLEET_PYROSCOPE_MAX_LABELS - 1]->name, "k29");
    assert_memory_equal(s->samples[0]->raw_profile.data, prof2, sizeof(prof2));
    push__v1__push_request__free_unpacked(req, NULL);
    /* No profile, no usable label. */
    assert_int_equal(cn_fleet_pyroscope_add(b, l1, 6, prof1, 0, NULL, 0), -EINVAL);
    cn_fleet_label empty[] = {{"", "x"}};
    assert_int_equal(cn_fleet_pyroscope_add(b, empty, 1, prof1, sizeof(prof1), NULL, 0), -EINVAL);
    assert_int_equal(b->sample_rows, 2);
    cn_fleet_batch_free(b);
}

static void test_bad_args(void **state)
{
    cn_fleet_conn *c = NULL;
    cn_err err = {0};
    cn_fleet_pusher *p = NULL;
    (void)state;
    assert_int_equal(cn_fleet_conn_new("ftp://x/", NULL, NULL, 0, &c, &err), -EINVAL);
    cn_fleet_pusher_opts o = {.url = "http://x/", .database = "a;drop", .spool_dir = "/tmp"};
    assert_int_equal(cn_fleet_pusher_new(&o, &p, &err), -EINVAL);
    assert_int_equal(cn_fleet_init(NULL, 0, "bad name", NULL, &err), -EINVAL);
    assert_null(cn_fleet_pusher_free(NULL));
    assert_null(cn_fleet_conn_free(NULL));
    assert_null(cn_fleet_batch_free(NULL));
    assert_null(cn_fleet_seen_free(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels),         cmocka_unit_test(test_hash),
        cmocka_unit_test(test_tsv_round_trip), cmocka_unit_test(test_collect),
        cmocka_unit_test(test_collect_python), cmocka_unit_test(test_filter_sql),
        cmocka_unit_test(test_source_sql),     cmocka_unit_test(test_pusher_spool),
        cmocka_unit_test(test_bad_args),       cmocka_unit_test(test_pyroscope),
        cmocka_unit_test(test_otlp_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
