/* test_spec.c — formats/' query spec (cn_fmt_spec): the JSON codec round trip (spec →
 * JSON → spec, every field), the bounds the decoder enforces, the name tables, the one
 * duration parser both sides use (cn_common_parse_duration), and the renderer's range
 * resolution, checks and notes. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cn_fmt.h"

/* A spec with every field away from its default. */
static void full_spec(cn_fmt_spec *s)
{
    cn_err err = {0};
    cn_fmt_spec_init(s);
    assert_int_equal(cn_fmt_spec_add_transform(s, "focus:main;run", &err), 0);
    assert_int_equal(cn_fmt_spec_add_transform(s, "merge:malloc", &err), 0);
    assert_int_equal(cn_fmt_spec_add_transform(s, "collapse-all-rec", &err), 0);
    assert_int_equal(cn_fmt_spec_set_view(s, CN_AGG_VIEW_CALLERS, "f"), 0);
    s->query.callers_mode = CN_AGG_CALLERS_SELF;
    s->query.group_by = CN_AGG_GROUP_THREAD;
    assert_int_equal(cn_fmt_spec_set_last(s, "5min"), 0);
    s->from_s = 1.25;
    s->to_s = 7.5;
    s->query.tid = 7;
    s->query.pid = 9;
    s->depth = 3;
    s->min_percent = 1.5;
    s->color = true;
    s->query.no_inline = true;
    s->format = CN_FMT_SVG;
    assert_int_equal(cn_fmt_spec_add_where(s, "container=0123,service=a.service", NULL), 0);
    assert_int_equal(cn_fmt_spec_add_where(s, "pod_uid=x", NULL), 0);
}

static void assert_same(const cn_fmt_spec *a, const cn_fmt_spec *b)
{
    assert_int_equal(a->n_transforms, b->n_transforms);
    assert_ptr_equal(b->query.transforms, b->transforms);
    for (size_t i = 0; i < a->n_transforms; i++) {
        char *x = cn_agg_transform_format(&a->transforms[i]);
        char *y = cn_agg_transform_format(&b->transforms[i]);
        assert_string_equal(x, y);
        free(x);
        free(y);
    }
    assert_int_equal(a->query.view, b->query.view);
    if (a->view_func)
        assert_string_equal(a->view_func, b->query.view_func);
    assert_int_equal(a->query.callers_mode, b->query.callers_mode);
    assert_int_equal(a->query.group_by, b->query.group_by);
    assert_true(a->last_ns == b->last_ns);
    if (a->last)
        assert_string_equal(a->last, b->last);
    assert_true((isnan(a->from_s) && isnan(b->from_s)) || a->from_s == b->from_s);
    assert_true((isnan(a->to_s) && isnan(b->to_s)) || a->to_s == b->to_s);
    assert_int_equal(a->query.tid, b->query.tid);
    assert_int_equal(a->query.pid, b->query.pid);
    assert_int_equal(a->depth, b->depth);
    assert_true(a->min_percent == b->min_percent);
    assert_int_equal(a->color, b->color);
    assert_int_equal(a->query.no_inline, b->query.no_inline);
    assert_int_equal(a->format, b->format);
    assert_int_equal(a->n_where, b->n_where);
    assert_int_equal(b->query.n_where, b->n_where);
    assert_ptr_equal(b->query.where, b->where);
    for (size_t i = 0; i < a->n_where; i++) {
        assert_int_equal(a->where[i].key, b->where[i].key);
        assert_string_equal(a->where[i].value, b->where[i].value);
    }
}

static void round_trip(const cn_fmt_spec *s)
{
    cn_fmt_spec back;
    cn_err err = {0};
    json_t *req = json_object();
    assert_int_equal(cn_fmt_spec_to_json(s, req), 0);
    cn_fmt_spec_init(&back);
    back.format = CN_FMT_JSON; /* the request's default must not win over "format" */
    assert_int_equal(cn_fmt_spec_from_json(req, &back, &err), 0);
    assert_same(s, &back);
    cn_fmt_spec_clear(&back);
    json_decref(req);
}

static void test_round_trip(void **state)
{
    (void)state;
    cn_fmt_spec s;
    full_spec(&s);
    round_trip(&s);
    json_t *full = json_object();
    assert_int_equal(cn_fmt_spec_to_json(&s, full), 0);
    assert_true(json_is_true(json_object_get(full, "no_inline")));
    json_decref(full);
    cn_fmt_spec_clear(&s);
    cn_fmt_spec_clear(NULL);

    /* Defaults travel as nothing but the format. */
    cn_fmt_spec_init(&s);
    json_t *req = json_object();
    assert_int_equal(cn_fmt_spec_to_json(&s, req), 0);
    assert_int_equal(json_object_size(req), 1);
    assert_string_equal(json_string_value(json_object_get(req, "format")), "text");
    json_decref(req);
    round_trip(&s);

    /* Every format, view, group-by and callers mode by name. */
    for (int f = CN_FMT_TEXT; f <= CN_FMT_OTLP; f++) {
        s.format = (cn_fmt_format)f;
        round_trip(&s);
    }
    const char *views[] = {"tree", "inverted", "callees", "callers", "functions"};
    for (size_t i = 0; i < 5; i++) {
        cn_agg_view v;
        assert_int_equal(cn_fmt_view_parse(views[i], &v), 0);
        assert_string_equal(cn_agg_view_name(v), views[i]);
        assert_int_equal(cn_fmt_spec_set_view(&s, v, "g"), 0);
        round_trip(&s);
    }
    for (int g = CN_AGG_GROUP_NONE; g <= CN_AGG_GROUP_SERVICE; g++) {
        cn_agg_group_by back;
        assert_int_equal(cn_fmt_group_by_parse(cn_fmt_group_by_name(g), &back), 0);
        assert_int_equal(back, g);
    }
    cn_agg_callers_mode m;
    assert_int_equal(cn_fmt_callers_mode_parse("self", &m), 0);
    assert_string_equal(cn_fmt_callers_mode_name(m), "self");
    cn_fmt_format f;
    assert_int_equal(cn_fmt_format_parse("chrome-trace", &f), 0);
    assert_string_equal(cn_fmt_format_name(f), "chrome-trace");
    assert_true(cn_fmt_format_parse("png", &f) < 0);
    /* The list of names for messages holds every format's name once, parsable back. */
    char names[256], small[6];
    size_t need = cn_fmt_format_names(names, sizeof(names));
    assert_int_equal(need, strlen(names));
    int n_names = 0;
    for (char *tok = strtok(names, ", "); tok; tok = strtok(NULL, ", ")) {
        if (!strcmp(tok, "or"))
            continue;
        assert_int_equal(cn_fmt_format_parse(tok, &f), 0);
        assert_string_equal(cn_fmt_format_name(f), tok);
        n_names++;
    }
    assert_int_equal(n_names, CN_FMT_OTLP + 1);
    assert_int_equal(cn_fmt_format_names(small, sizeof(small)), need);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_true(cn_fmt_view_parse("sideways", &(cn_agg_view){0}) < 0);
    assert_true(cn_fmt_group_by_parse("cpu", &(cn_agg_group_by){0}) < 0);
    /* --where: KEY=VALUE lists; unknown keys, missing '=' and too many are refused */
    cn_err err = {0};
    assert_int_equal(cn_fmt_spec_add_where(&s, "qos=burstable,cgroup=/a/b", &err), 0);
    assert_int_equal(s.where[s.n_where - 1].key, CN_CGROUP_KEY_CGROUP);
    assert_string_equal(s.where[s.n_where - 1].value, "/a/b");
    assert_int_equal(cn_fmt_spec_add_where(&s, "host=a", &err), -EINVAL);
    assert_int_equal(cn_fmt_spec_add_where(&s, "container", &err), -EINVAL);
    while (s.n_where < CN_FMT_MAX_WHERE)
        assert_int_equal(cn_fmt_spec_add_where(&s, "pod=p", &err), 0);
    assert_int_equal(cn_fmt_spec_add_where(&s, "pod=p", &err), -EINVAL);
    json_t *bad = json_pack("{s:[s]}", "where", "container=a,pod=b");
    cn_fmt_spec back;
    cn_fmt_spec_init(&back);
    assert_int_equal(cn_fmt_spec_from_json(bad, &back, &err), -EINVAL);
    cn_fmt_spec_clear(&back);
    json_decref(bad);
    cn_fmt_spec_clear(&s);
}

static void test_decoder_bounds(void **state)
{
    (void)state;
    /* 1024 transforms pass, 1025 do not. */
    for (size_t n = 1024; n <= 1025; n++) {
        json_t *req = json_object(), *a = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(a, json_string("merge:x"));
        json_object_set_new(req, "transforms", a);
        cn_fmt_spec s;
        cn_err err = {0};
        cn_fmt_spec_init(&s);
        int r = cn_fmt_spec_from_json(req, &s, &err);
        if (n == 1024) {
            assert_int_equal(r, 0);
            assert_int_equal(s.n_transforms, 1024);
            cn_err e2 = {0};
            assert_int_equal(cn_fmt_spec_add_transform(&s, "merge:y", &e2), -EINVAL);
        } else {
            assert_int_equal(r, -EINVAL);
            assert_non_null(strstr(err.msg, "too many transforms"));
        }
        cn_fmt_spec_clear(&s);
        json_decref(req);
    }
    const char *bad[] = {
        "{\"transforms\":\"x\"}",
        "{\"transforms\":[\"nope:x\"]}",
        "{\"transforms\":[1]}",
        "{\"view\":\"sideways\"}",
        "{\"view\":\"callers\"}",
        "{\"group_by\":\"cpu\"}",
        "{\"last\":\"soon\"}",
        "{\"last\":\"1e2s\"}",
        "{\"from\":-1}",
        "{\"to\":1e10}",
        "{\"tid\":\"1\"}",
        "{\"tid\":-2}",
        "{\"only_pid\":3e9}",
        "{\"depth\":1000001}",
        "{\"format\":\"png\"}",
        "{\"min_percent\":101}",
        "{\"callers_mode\":\"all\"}",
        "{\"color\":1}",
        "{\"no_inline\":\"yes\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *req = json_loads(bad[i], 0, NULL);
        assert_non_null(req);
        cn_fmt_spec s;
        cn_err err = {0};
        cn_fmt_spec_init(&s);
        assert_true(cn_fmt_spec_from_json(req, &s, &err) < 0);
        assert_true(strlen(err.msg) > 0);
        cn_fmt_spec_clear(&s);
        json_decref(req);
    }
}

/* The one duration syntax (docs/cli.md "Durations"): what the client and canopyd used to
 * disagree on. */
static void test_durations(void **state)
{
    (void)state;
    int64_t ns;
    assert_int_equal(cn_common_parse_duration("5min", &ns), 0);
    assert_true(ns == 300000000000LL);
    assert_int_equal(cn_common_parse_duration("5m", &ns), 0);
    assert_true(ns == 300000000000LL);
    assert_int_equal(cn_common_parse_duration("500ms", &ns), 0);
    assert_true(ns == 500000000LL);
    assert_int_equal(cn_common_parse_duration("1.5", &ns), 0);
    assert_true(ns == 1500000000LL);
    assert_int_equal(cn_common_parse_duration(".5s", &ns), 0);
    assert_true(ns == 500000000LL);
    assert_int_equal(cn_common_parse_duration("2.h", &ns), 0);
    assert_true(ns == 7200000000000LL);
    const char *bad[] = {"1e2s", "1E2", "+1s", "-1s", "5 min", "5mins", "inf", "0x1p3", "1,5s", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(cn_common_parse_duration(bad[i], &ns), -EINVAL);
    /* The spec's setter uses it and keeps the text. */
    cn_fmt_spec s;
    cn_fmt_spec_init(&s);
    assert_int_equal(cn_fmt_spec_set_last(&s, "1e2s"), -EINVAL);
    assert_null(s.last);
    assert_int_equal(cn_fmt_spec_set_last(&s, "250us"), 0);
    assert_string_equal(s.last, "250us");
    assert_true(s.last_ns == 250000);
    cn_fmt_spec_clear(&s);
}

/* A profile: main;a (t = 1 s), main;b (t = 9 s). */
static cn_agg_profile *two_samples(void)
{
    cn_agg_profile *p = NULL;
    cn_err err = {0};
    const char *text = "main;a 1\nmain;b 1\n";
    assert_int_equal(cn_fmt_import_buffer(text, strlen(text), "t.folded", &p, &err), 0);
    return p;
}

static void test_render_checks_and_notes(void **state)
{
    (void)state;
    cn_agg_profile *p = two_samples();
    cn_fmt_spec s;
    cn_fmt_render_opts o;
    cn_err err = {0};
    cn_buf notes;
    char *mem = NULL;
    size_t len = 0;

    cn_fmt_spec_init(&s);
    cn_fmt_render_opts_init(&o);
    cn_buf_init(&notes, 0);
    o.notes = &notes;
    o.title = "T";
    /* An unknown function: -ENOENT, nothing written. */
    assert_int_equal(cn_fmt_spec_add_transform(&s, "merge:nosuch", &err), 0);
    FILE *f = open_memstream(&mem, &len);
    assert_int_equal(cn_fmt_render(p, &s, &o, f, &err), -ENOENT);
    fclose(f);
    assert_int_equal(len, 0);
    assert_true(strlen(err.msg) > 0);
    free(mem);
    cn_fmt_spec_clear(&s);

    /* A PATH that is no call node path: a note, and the rule applies. */
    assert_int_equal(cn_fmt_spec_add_transform(&s, "focus:a;main", &err), 0);
    s.format = CN_FMT_JSON;
    f = open_memstream(&mem, &len);
    assert_int_equal(cn_fmt_render(p, &s, &o, f, &err), 0);
    fclose(f);
    assert_non_null(strstr(cn_buf_ptr(&notes), "note: 'focus:a;main'"));
    assert_non_null(strstr(mem, "\"roots\":[]"));
    free(mem);

    /* A timeline takes no view; chrome-trace is a timeline. */
    cn_fmt_spec_clear(&s);
    s.timeline = true;
    s.format = CN_FMT_FOLDED;
    assert_int_equal(cn_fmt_timeline_check(&s, &err), -EINVAL);
    s.format = CN_FMT_SPEEDSCOPE;
    assert_int_equal(cn_fmt_timeline_check(&s, &err), 0);
    f = open_memstream(&mem, &len);
    assert_int_equal(cn_fmt_render(p, &s, &o, f, &err), 0);
    fclose(f);
    assert_non_null(strstr(mem, "\"evented\""));
    free(mem);

    cn_buf_free(&notes);
    cn_fmt_spec_clear(&s);
    cn_agg_profile_free(p);
}

/* docs/calltree.md §4.3: held transforms written with a frame's address name its function
 * once the symbols arrived. The renderer remaps them through the rename map before the
 * check (merge:L+0x48 would be "no function" otherwise) and the JSON tree echoes them;
 * the spec itself is left as it was (callers hold it). */
static void test_render_remaps_held_transforms(void **state)
{
    (void)state;
    cn_agg_profile *p = cn_agg_profile_new();
    int32_t L = cn_agg_resource(p, "L", "build-id-1", "/x/L", CN_AGG_RES_LIBRARY);
    int32_t th = cn_agg_thread(p, 1, 1, "t");
    cn_agg_frame_ref a[2] = {{.resource = L, .offset = 0x48}, {.resource = L, .offset = 0x10}};
    cn_agg_frame_ref b[2] = {{.resource = L, .offset = 0x40}, {.resource = L, .offset = 0x14}};
    cn_agg_add_sample(p, cn_agg_stack_from_refs(p, a, 2), 0, 1, th);
    cn_agg_add_sample(p, cn_agg_stack_from_refs(p, b, 2), 1, 1, th);
    cn_fmt_spec s;
    cn_fmt_render_opts o;
    cn_err err = {0};
    char *mem = NULL;
    size_t len = 0;
    cn_fmt_spec_init(&s);
    cn_fmt_render_opts_init(&o);
    s.format = CN_FMT_JSON;
    assert_int_equal(cn_fmt_spec_add_transform(&s, "merge:L+0x48", &err), 0);
    assert_int_equal(cn_fmt_spec_add_transform(&s, "focus:L+0x10", &err), 0);
    FILE *f = open_memstream(&mem, &len);
    assert_int_equal(cn_fmt_render(p, &s, &o, f, &err), 0); /* before: as written */
    fclose(f);
    assert_non_null(strstr(mem, "\"transforms\":[\"merge:L+0x48\",\"focus:L+0x10\"]"));
    free(mem);

    cn_agg_symbol mainsym = {"main", "m.c", 1}, work = {"work", "m.c", 5};
    cn_agg_frame_symbols batch[4];
    assert_int_equal(cn_agg_frame_count(p), 4);
    for (int32_t i = 0; i < 4; i++)
        batch[i] = (cn_agg_frame_symbols){
            .frame = i, .chain = cn_agg_frame_address(p, i) >= 0x40 ? &work : &mainsym, .depth = 1};
    assert_int_equal(cn_agg_regroup(p, batch, 4), 0);
    f = open_memstream(&mem, &len);
    assert_int_equal(cn_fmt_render(p, &s, &o, f, &err), 0);
    fclose(f);
    assert_non_null(strstr(mem, "\"transforms\":[\"merge:work\",\"focus:main\"]"));
    /* focus on main, work merged: main with both samples as self */
    assert_non_null(strstr(mem, "\"name\":\"main\""));
    assert_null(strstr(mem, "\"name\":\"work\""));
    assert_string_equal(s.transforms[0].arg, "L+0x48");
    free(mem);
    cn_fmt_spec_clear(&s);
    cn_agg_profile_free(p);
}

static void test_range(void **state)
{
    (void)state;
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    assert_int_equal(cn_agg_add_sample(p, -1, 1000000000LL, 1, -1), 0);
    assert_int_equal(cn_agg_add_sample(p, -1, 9000000000LL, 1, -1), 0);
    cn_fmt_spec s;
    cn_fmt_render_opts o;
    cn_agg_query q;
    cn_fmt_spec_init(&s);
    cn_fmt_render_opts_init(&o);
    assert_int_equal(cn_fmt_spec_set_last(&s, "2s"), 0);
    cn_fmt_spec_resolve(p, &s, NULL, &q); /* from the last sample */
    assert_true(q.from_ns == 7000000000LL && q.to_ns == INT64_MAX);
    o.has_now = true;
    o.now_ns = 20000000000LL; /* from a live "now" */
    cn_fmt_spec_resolve(p, &s, &o, &q);
    assert_true(q.from_ns == 18000000000LL);
    s.from_s = 0.5; /* --from wins (the protocol allows both) */
    cn_fmt_spec_resolve(p, &s, &o, &q);
    assert_true(q.from_ns == 500000000LL);
    cn_fmt_spec_clear(&s);
    cn_agg_profile_free(p);
}

/* The query fields of a request as canopyd receives it, decoded and encoded back; and
 * requests the decoder must refuse with a message. */
static void test_query_json(void **state)
{
    (void)state;
    const char *txt = "{\"cmd\":\"tree\",\"transforms\":[\"focus:main;run\",\"merge:malloc\"],"
                      "\"view\":\"callers\",\"view_func\":\"f\",\"callers_mode\":\"self\","
                      "\"group_by\":\"thread\",\"last\":\"30s\",\"tid\":7,\"only_pid\":9,"
                      "\"depth\":3,\"min_percent\":1.5,\"format\":\"folded\"}";
    json_error_t je;
    json_t *req = json_loads(txt, 0, &je);
    cn_fmt_spec q;
    cn_err err = {0};
    cn_fmt_spec_init(&q);
    assert_int_equal(cn_fmt_spec_from_json(req, &q, &err), 0);
    assert_int_equal(q.n_transforms, 2);
    assert_int_equal(q.transforms[0].kind, CN_AGG_TF_FOCUS);
    assert_int_equal(q.transforms[0].path_len, 2);
    assert_int_equal(q.query.view, CN_AGG_VIEW_CALLERS);
    assert_string_equal(q.query.view_func, "f");
    assert_int_equal(q.query.callers_mode, CN_AGG_CALLERS_SELF);
    assert_int_equal(q.query.group_by, CN_AGG_GROUP_THREAD);
    assert_true(q.last_ns == 30000000000LL);
    assert_int_equal(q.query.tid, 7);
    assert_int_equal(q.query.pid, 9);
    assert_int_equal(q.depth, 3);
    assert_true(q.min_percent == 1.5);
    assert_int_equal(q.format, CN_FMT_FOLDED);

    json_t *back = json_object();
    assert_int_equal(cn_fmt_spec_to_json(&q, back), 0);
    cn_fmt_spec q2;
    cn_fmt_spec_init(&q2);
    assert_int_equal(cn_fmt_spec_from_json(back, &q2, &err), 0);
    assert_int_equal(q2.n_transforms, 2);
    assert_int_equal(q2.transforms[1].kind, CN_AGG_TF_MERGE);
    assert_string_equal(q2.transforms[1].arg, "malloc");
    assert_int_equal(q2.query.view, CN_AGG_VIEW_CALLERS);
    assert_true(q2.last_ns == q.last_ns);
    assert_int_equal(q2.format, CN_FMT_FOLDED);
    cn_fmt_spec_clear(&q2);
    cn_fmt_spec_clear(&q);
    json_decref(back);
    json_decref(req);

    const char *bad[] = {
        "{\"transforms\":\"x\"}", "{\"transforms\":[\"nope:x\"]}",
        "{\"transforms\":[1]}",   "{\"view\":\"sideways\"}",
        "{\"view\":\"callers\"}", "{\"group_by\":\"cpu\"}",
        "{\"last\":\"soon\"}",    "{\"from\":-1}",
        "{\"tid\":\"1\"}",        "{\"format\":\"png\"}",
        "{\"min_percent\":101}",  "{\"callers_mode\":\"all\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        req = json_loads(bad[i], 0, &je);
        assert_non_null(req);
        cn_fmt_spec_init(&q);
        err.msg[0] = '\0';
        assert_true(cn_fmt_spec_from_json(req, &q, &err) < 0);
        assert_true(strlen(err.msg) > 0);
        cn_fmt_spec_clear(&q);
        json_decref(req);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_decoder_bounds),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_render_checks_and_notes),
        cmocka_unit_test(test_range),
        cmocka_unit_test(test_query_json),
        cmocka_unit_test(test_render_remaps_held_transforms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
