/* test_live_opts.c — a session's spec (live/'s cn_live_session_opts): every SAMPLING option
 * through argv (the CLI's parser) -> spec -> JSON (cn_live_session_opts_to_json) -> spec
 * (canopyd's decoder), compared field by field; durations as exact integer ns (500us is
 * 500000 ns, not "0ms"); the text durations of protocol 1 clients; one rule set, the same
 * through argv and JSON; and a real canopyd's session against the in-process host's for the
 * same spec (their `sessions` descriptions agree on every field the spec sets); canopyd's
 * description of a saved session (cn_d_session_json). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "cn_d.h"
#include "cn_live.h"
#include "live.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Parses argv[0..n) as SAMPLING options into o (with --name and --label); every word must
 * be consumed. Returns 0, or -1 at the first refused option. */
static int parse_argv(cn_live_session_opts *o, char **argv, int n)
{
    for (int i = 0; i < n; i++)
        if (cn_cli_parse_sampling_opt(o, "test", true, n, argv, &i) != 1)
            return -1;
    return 0;
}

static void assert_str_same(const char *a, const char *b)
{
    if (!a || !b)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

static void assert_spec_equal(const cn_live_session_opts *a, const cn_live_session_opts *b)
{
    assert_int_equal(a->pid, b->pid);
    assert_int_equal(a->freq, b->freq);
    assert_str_same(a->event, b->event);
    assert_int_equal(a->unwind, b->unwind);
    assert_int_equal(a->stack_size, b->stack_size);
    assert_int_equal(a->no_kernel, b->no_kernel);
    assert_int_equal(a->no_python, b->no_python);
    assert_int_equal(a->duration_ns, b->duration_ns);
    assert_int_equal(a->retention_ns, b->retention_ns);
    assert_str_same(a->name, b->name);
    assert_int_equal(a->mode, b->mode);
    assert_int_equal(a->min_block_ns, b->min_block_ns);
    assert_int_equal(a->labels.n, b->labels.n);
    for (size_t i = 0; i < a->labels.n; i++) {
        assert_string_equal(a->labels.v[i].key, b->labels.v[i].key);
        assert_string_equal(a->labels.v[i].value, b->labels.v[i].value);
    }
    assert_int_equal(a->no_fleet, b->no_fleet);
}

/* spec -> JSON -> a fresh spec (kind ATTACH, the decoder's defaults), compared. */
static void round_trip(const cn_live_session_opts *o)
{
    cn_live_session_opts back;
    cn_err err = {0};
    json_t *req = json_object();
    assert_non_null(req);
    assert_int_equal(cn_live_session_opts_to_json(o, req), 0);
    cn_live_session_opts_init(&back);
    int r = cn_live_session_opts_from_json(req, &back, &err);
    if (r < 0)
        fail_msg("from_json: %s", err.msg);
    assert_spec_equal(o, &back);
    cn_live_session_opts_clear(&back);
    json_decref(req);
}

static void test_every_option(void **state)
{
    (void)state;
    char *argv[] = {"-F",         "4321",         "--event", "cpu-clock",   "--unwind",
                    "dwarf",      "--stack-size", "4K",      "--no-kernel", "--duration",
                    "1500us",     "--mode",       "off-cpu", "--min-block", "250us",
                    "--name",     "web-1",        "--label", "env=prod",    "--label=service=api",
                    "--no-fleet", "--no-python"};
    cn_live_session_opts o;
    cn_live_session_opts_init(&o);
    assert_int_equal(parse_argv(&o, argv, (int)N_OF(argv)), 0);
    /* What argv said, exactly. */
    assert_int_equal(o.freq, 4321);
    assert_string_equal(o.event, "cpu-clock");
    assert_int_equal(o.unwind, CN_SMP_UNWIND_DWARF);
    assert_int_equal(o.stack_size, 4096);
    assert_true(o.no_kernel);
    assert_true(o.no_python);
    assert_int_equal(o.duration_ns, 1500000);
    assert_int_equal(o.mode, CN_SMP_MODE_OFFCPU);
    assert_int_equal(o.min_block_ns, 250000);
    assert_string_equal(o.name, "web-1");
    assert_string_equal(cn_fleet_labels_get(&o.labels, "env"), "prod");
    assert_string_equal(cn_fleet_labels_get(&o.labels, "service"), "api");
    assert_true(o.no_fleet);
    /* The target and the retention have no argv spelling: set as a host would. */
    o.pid = 1234;
    o.retention_ns = 90LL * 1000000000;
    round_trip(&o);
    /* --kernel and the other unwinders and modes come back too. */
    char *argv2[] = {"--kernel", "--unwind", "fp", "--mode", "wall", "--freq=1", "--python"};
    assert_int_equal(parse_argv(&o, argv2, (int)N_OF(argv2)), 0);
    assert_false(o.no_kernel);
    assert_false(o.no_python);
    round_trip(&o);
    cn_live_session_opts_clear(&o);
    /* Nothing given: the defaults survive the trip. */
    cn_live_session_opts_init(&o);
    o.pid = 1;
    round_trip(&o);
}

static void test_duration_exact(void **state)
{
    (void)state;
    char *argv[] = {"--duration", "500us", "--min-block", "1us"};
    cn_live_session_opts o, back;
    cn_err err = {0};
    json_t *req = json_object();
    cn_live_session_opts_init(&o);
    assert_int_equal(parse_argv(&o, argv, (int)N_OF(argv)), 0);
    o.pid = 1;
    assert_int_equal(cn_live_session_opts_to_json(&o, req), 0);
    assert_int_equal(json_integer_value(json_object_get(req, "duration_ns")), 500000);
    assert_int_equal(json_integer_value(json_object_get(req, "min_block_ns")), 1000);
    cn_live_session_opts_init(&back);
    assert_int_equal(cn_live_session_opts_from_json(req, &back, &err), 0);
    assert_int_equal(back.duration_ns, 500000); /* a limit, not none */
    assert_int_equal(back.min_block_ns, 1000);
    json_decref(req);
}

static void test_protocol1_text(void **state)
{
    (void)state;
    cn_live_session_opts o;
    cn_err err = {0};
    json_t *req = json_pack("{s:i, s:s, s:s, s:s}", "pid", 7, "duration", "2s", "min_block",
                            "100us", "retention", "5m");
    cn_live_session_opts_init(&o);
    assert_int_equal(cn_live_session_opts_from_json(req, &o, &err), 0);
    assert_int_equal(o.duration_ns, 2000000000LL);
    assert_int_equal(o.min_block_ns, 100000);
    assert_int_equal(o.retention_ns, 300LL * 1000000000);
    json_decref(req);
    /* Both forms of one field: refused, not guessed. */
    req = json_pack("{s:i, s:s, s:I}", "pid", 7, "duration", "2s", "duration_ns", (json_int_t)5);
    cn_live_session_opts_init(&o);
    assert_int_equal(cn_live_session_opts_from_json(req, &o, &err), -EINVAL);
    json_decref(req);
    /* attach without a pid. */
    req = json_pack("{s:i}", "freq", 99);
    cn_live_session_opts_init(&o);
    assert_int_equal(cn_live_session_opts_from_json(req, &o, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "pid"));
    o.kind = CN_LIVE_SYSTEM;
    assert_int_equal(cn_live_session_opts_from_json(req, &o, &err), 0);
    json_decref(req);
}

/* One option's value through argv and through JSON: both accept it or both refuse it. */
static void same_rule(const char *opt, const char *value, const char *key, json_t *jv, bool ok)
{
    char *argv[] = {(char *)opt, (char *)value};
    cn_live_session_opts o;
    cn_err err = {0};
    cn_live_session_opts_init(&o);
    int by_argv = parse_argv(&o, argv, 2);
    cn_live_session_opts_clear(&o);
    json_t *req = json_pack("{s:i}", "pid", 1);
    if (!strcmp(key, "labels"))
        json_object_set_new(req, "labels", jv);
    else
        json_object_set_new(req, key, jv);
    cn_live_session_opts_init(&o);
    int by_json = cn_live_session_opts_from_json(req, &o, &err);
    cn_live_session_opts_clear(&o);
    json_decref(req);
    if ((by_argv == 0) != ok || (by_json == 0) != ok)
        fail_msg("%s %s: argv %d, json %d (%s), expected %s", opt, value, by_argv, by_json, err.msg,
                 ok ? "accepted" : "refused");
}

static void test_one_rule_set(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        bool ok;
    } names[] = {
        {"web", true},
        {"s", true},
        {"s1x", true},
        {"x1", true},
        {"s12", false},
        {"123", false},
        {"a/b", false},
        {"-x", false},
        {"", false},
        {"tab\there", false},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", true},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
    };
    for (size_t i = 0; i < N_OF(names); i++)
        same_rule("--name", names[i].name, "name", json_string(names[i].name), names[i].ok);
    same_rule("--freq", "0", "freq", json_integer(0), false);
    same_rule("--freq", "100000", "freq", json_integer(CN_LIVE_FREQ_MAX), true);
    same_rule("--freq", "100001", "freq", json_integer(CN_LIVE_FREQ_MAX + 1), false);
    same_rule("--stack-size", "8", "stack_size", json_integer(CN_LIVE_STACK_SIZE_MIN), true);
    same_rule("--stack-size", "12", "stack_size", json_integer(12), false);
    same_rule("--stack-size", "65528", "stack_size", json_integer(CN_LIVE_STACK_SIZE_MAX), true);
    same_rule("--stack-size", "65536", "stack_size", json_integer(65536), false);
    same_rule("--event", "cpu-clock", "event", json_string("cpu-clock"), true);
    same_rule("--event", "CPU;rm", "event", json_string("CPU;rm"), false);
    same_rule("--unwind", "frames", "unwind", json_string("frames"), false);
    same_rule("--mode", "io", "mode", json_string("io"), false);
    same_rule("--label", "host=x", "labels", json_pack("{s:s}", "host", "x"), false);
    same_rule("--label", "1bad=x", "labels", json_pack("{s:s}", "1bad", "x"), false);
    same_rule("--label", "env=prod", "labels", json_pack("{s:s}", "env", "prod"), true);
}

/* ---- canopyd's session vs the in-process one ----------------------------------------- */

static void *srv_main(void *arg)
{
    cn_d_server_run(arg);
    return NULL;
}

/* The fields of a `sessions` entry that the spec decides. */
static void assert_same_description(const json_t *d, const json_t *l)
{
    static const char *const keys[] = {"name",   "kind", "event", "freq",
                                       "unwind", "mode", "owner", "state"};
    for (size_t i = 0; i < N_OF(keys); i++) {
        const json_t *a = json_object_get(d, keys[i]), *b = json_object_get(l, keys[i]);
        if (!a || !b || !json_equal((json_t *)a, (json_t *)b))
            fail_msg("%s: canopyd %s, in-process %s", keys[i], json_dumps(a, JSON_ENCODE_ANY),
                     json_dumps(b, JSON_ENCODE_ANY));
    }
    assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "target"), "pid")),
                     json_integer_value(json_object_get(json_object_get(l, "target"), "pid")));
    const json_t *ds = json_object_get(d, "stack_copy"), *ls = json_object_get(l, "stack_copy");
    assert_non_null(ds);
    assert_non_null(ls);
    assert_true(json_equal(json_object_get(ds, "bytes"), json_object_get(ls, "bytes")));
    assert_true(json_equal(json_object_get(ds, "adaptive"), json_object_get(ls, "adaptive")));
    assert_int_equal(json_integer_value(json_object_get(ds, "bytes")), 2048);
    assert_non_null(json_object_get(d, "offcpu")); /* wall mode on both */
    assert_non_null(json_object_get(l, "offcpu"));
}

static void test_daemon_and_inproc_agree(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_live_opts.XXXXXX", sock[64];
    char *argv[] = {"-F",         "777",  "--unwind",    "dwarf",     "--stack-size", "2K",
                    "--mode",     "wall", "--min-block", "1ms",       "--name",       "same",
                    "--duration", "30s",  "--event",     "cpu-clock", "--label",      "env=t"};
    cn_live_session_opts o;
    cn_d_config cfg;
    cn_d_server *srv = NULL;
    cn_cli_conn *c = NULL;
    cn_cli_local *l = NULL;
    cn_err err = {0};
    pthread_t th;

    pid_t target = fork();
    assert_true(target >= 0);
    if (target == 0) {
        for (;;)
            pause();
    }
    assert_non_null(mkdtemp(dir));
    snprintf(sock, sizeof(sock), "%s/d.sock", dir);
    cn_d_config_init(&cfg);
    cfg.backend = CN_D_LOOP_EPOLL;
    cfg.socket_path = sock;
    cfg.state_dir = dir;
    cfg.checkpoint_ns = 0;
    assert_int_equal(cn_d_server_new(&cfg, &srv, &err), 0);
    assert_int_equal(pthread_create(&th, NULL, srv_main, srv), 0);
    assert_int_equal(cn_cli_connect(sock, &c, NULL, 0), 0);

    cn_live_session_opts_init(&o);
    assert_int_equal(parse_argv(&o, argv, (int)N_OF(argv)), 0);
    o.kind = CN_LIVE_ATTACH;
    o.pid = target;
    /* canopyd: the request the CLI sends. */
    json_t *req = cn_proto_request("attach"), *resp = NULL;
    assert_int_equal(cn_live_session_opts_to_json(&o, req), 0);
    assert_int_equal(cn_cli_call(c, req, &resp, &err), 0);
    if (!json_is_true(json_object_get(resp, "ok")))
        fail_msg("attach: %s", json_dumps(resp, 0));
    json_t *d = json_incref(json_object_get(resp, "session"));
    json_decref(resp);
    json_decref(req);
    /* In-process: the same spec. */
    if (cn_cli_local_start(&o, &l, &err) < 0)
        fail_msg("in-process: %s", err.msg);
    json_t *lj = cn_d_session_json(cn_cli_local_session(l));
    assert_non_null(lj);
    assert_same_description(d, lj);
    json_decref(lj);
    json_decref(d);

    cn_cli_local_free(l);
    cn_live_session_opts_clear(&o);
    req = cn_proto_request("shutdown");
    assert_int_equal(cn_cli_call(c, req, &resp, &err), 0);
    json_decref(resp);
    json_decref(req);
    cn_cli_conn_free(c);
    pthread_join(th, NULL);
    cn_d_server_free(srv);
    kill(target, SIGKILL);
    waitpid(target, NULL, 0);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* canopyd's description of a saved session (cn_d_session_json, daemon/session_json.c),
 * built from cn_live_session_info alone: its state and mode come from the file, it has no
 * sampler so no "offcpu" counters even in wall mode, and a comm that is not UTF-8 (the
 * kernel cuts it at 15 bytes, maybe inside a character) still makes a valid entry. */
static void test_saved_description(void **state)
{
    (void)state;
    cn_live_session *s = NULL;
    cn_err err = {0};
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    cn_agg_profile_set_unit(p, CN_AGG_UNIT_NS);
    assert_int_equal(cn_agg_meta_set(p, "canopy.session.id", "s7"), 0);
    assert_int_equal(cn_agg_meta_set(p, "canopy.session.kind", "attach"), 0);
    assert_int_equal(cn_agg_meta_set(p, "canopy.session.comm", "caf\xc3"), 0);
    assert_int_equal(cn_agg_meta_set(p, "canopy.session.pid", "42"), 0);
    assert_int_equal(cn_agg_meta_set(p, "mode", "wall"), 0);
    assert_int_equal(cn_live_session_load(p, "/nonexistent/s7.canopy", &s, &err), 0);
    json_t *d = cn_d_session_json(s);
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "id")), "s7");
    assert_string_equal(json_string_value(json_object_get(d, "state")), "saved");
    assert_string_equal(json_string_value(json_object_get(d, "mode")), "wall");
    assert_null(json_object_get(d, "offcpu"));
    json_t *target = json_object_get(d, "target");
    assert_int_equal(json_integer_value(json_object_get(target, "pid")), 42);
    const char *comm = json_string_value(json_object_get(target, "comm"));
    assert_non_null(comm);
    assert_int_equal(strncmp(comm, "caf", 3), 0);
    char *text = json_dumps(d, JSON_ENSURE_ASCII);
    assert_non_null(text); /* jansson refuses to encode a string that is not UTF-8 */
    free(text);
    json_decref(d);
    cn_live_session_free(s);
}

/* The cgroup of a system session (docs/protocol.md): JSON both ways, and the rules — an
 * absolute path without '..' components, for system sessions only. */
static void test_cgroup_field(void **state)
{
    (void)state;
    static const struct {
        const char *path;
        bool ok;
    } paths[] = {
        {"/sys/fs/cgroup/unified/x", true},
        {"/x/..", false},
        {"/x/../y", false},
        {"relative", false},
        {"/a\nb", false},
        {"/a/..b", true},
    };
    for (size_t i = 0; i < N_OF(paths); i++) {
        cn_live_session_opts o, back;
        cn_err err = {0};
        cn_live_session_opts_init(&o);
        o.kind = CN_LIVE_SYSTEM;
        o.cgroup = paths[i].path;
        assert_int_equal(cn_live_session_opts_validate(&o, &err) == 0, paths[i].ok);
        json_t *req = json_object();
        assert_int_equal(cn_live_session_opts_to_json(&o, req), 0);
        cn_live_session_opts_init(&back);
        back.kind = CN_LIVE_SYSTEM;
        assert_int_equal(cn_live_session_opts_from_json(req, &back, &err) == 0, paths[i].ok);
        if (paths[i].ok)
            assert_string_equal(back.cgroup, paths[i].path);
        back.kind = CN_LIVE_ATTACH; /* never for attach or run */
        back.pid = 1;
        assert_true(cn_live_session_opts_validate(&back, &err) < 0);
        cn_live_session_opts_clear(&back);
        json_decref(req);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_option),
        cmocka_unit_test(test_duration_exact),
        cmocka_unit_test(test_protocol1_text),
        cmocka_unit_test(test_one_rule_set),
        cmocka_unit_test(test_daemon_and_inproc_agree),
        cmocka_unit_test(test_saved_description),
        cmocka_unit_test(test_cgroup_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
