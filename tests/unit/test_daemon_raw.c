/* test_daemon_raw.c — the protocol's opt-in raw payload (docs/protocol.md, "raw": true):
 * a real cn_d_server on a thread serves a small saved session; the client library's
 * cn_cli_call_raw must get exactly the bytes the default JSON-embedded reply carries (text,
 * JSON tree, base64 binary), errors must come without a payload, the connection must stay
 * in step afterwards, and a daemon announcing a bad or truncated payload must be refused
 * cleanly. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "cn_agg.h"
#include "cn_common.h"
#include "cn_d.h"
#include "live.h"

typedef struct fixture {
    char dir[64];
    char sock[108];
    char file[128];
    char file2[128];
    cn_d_server *srv;
    pthread_t thread;
    cn_cli_conn *c;
} fixture;

static void *srv_main(void *arg)
{
    cn_d_server_run(arg);
    return NULL;
}

/* A session file (session id) with a few named stacks, 2 threads; odd names a leaf. */
static void write_session(const char *path, const char *id, const char *odd)
{
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    int32_t lib = cn_agg_resource(p, "libx.so", NULL, NULL, CN_AGG_RES_LIBRARY);
    const char *names[] = {"main", "run", "work_a", "work_b", odd, "leaf"};
    int32_t fr[6];
    for (int i = 0; i < 6; i++)
        fr[i] = cn_agg_frame(p, cn_agg_func(p, names[i], lib, NULL, 0), lib, 0x100 + i, 0);
    int32_t th[2] = {cn_agg_thread(p, 10, 10, "main"), cn_agg_thread(p, 10, 11, "worker")};
    int32_t s1[] = {fr[0], fr[1], fr[2]}, s2[] = {fr[0], fr[1], fr[3], fr[5]},
            s3[] = {fr[0], fr[4]};
    int32_t st[3] = {cn_agg_stack_from_frames(p, s1, 3), cn_agg_stack_from_frames(p, s2, 4),
                     cn_agg_stack_from_frames(p, s3, 2)};
    for (int i = 0; i < 300; i++)
        assert_int_equal(cn_agg_add_sample(p, st[i % 3 == 2 ? 2 : (i % 7 == 0 ? 1 : 0)],
                                           (int64_t)i * 1000000, 1.0, th[i & 1]),
                         0);
    cn_agg_meta_set(p, "canopy.session.id", id);
    cn_agg_meta_set(p, "canopy.session.kind", "attach");
    cn_agg_meta_set(p, "canopy.session.state", "exited");
    cn_agg_meta_set(p, "event", "cpu-clock");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(cn_agg_write_canopy(p, f), 0);
    assert_int_equal(fclose(f), 0);
    cn_agg_profile_free(p);
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof(*fx));
    cn_d_config cfg;
    cn_err err = {0};
    assert_non_null(fx);
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/test_daemon_raw.XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->sock, sizeof(fx->sock), "%s/d.sock", fx->dir);
    snprintf(fx->file, sizeof(fx->file), "%s/s1.canopy", fx->dir);
    write_session(fx->file, "s1", "odd \"name\"\\tab");
    /* Names from ELF files may be any bytes: an invalid UTF-8 byte and a control one. */
    snprintf(fx->file2, sizeof(fx->file2), "%s/s2.canopy", fx->dir);
    write_session(fx->file2, "s2", "bad\xffname\x01");
    cn_d_config_init(&cfg);
    cfg.backend = CN_D_LOOP_EPOLL;
    cfg.socket_path = fx->sock;
    cfg.state_dir = fx->dir;
    cfg.checkpoint_ns = 0;
    assert_int_equal(cn_d_server_new(&cfg, &fx->srv, &err), 0);
    assert_int_equal(pthread_create(&fx->thread, NULL, srv_main, fx->srv), 0);
    assert_int_equal(cn_cli_connect(fx->sock, &fx->c, NULL, 0), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    json_t *req = cn_proto_request("shutdown"), *resp = NULL;
    cn_err msg = {0};
    assert_int_equal(cn_cli_call(fx->c, req, &resp, &msg), 0);
    json_decref(resp);
    json_decref(req);
    cn_cli_conn_free(fx->c);
    pthread_join(fx->thread, NULL);
    cn_d_server_free(fx->srv);
    unlink(fx->file);
    unlink(fx->file2);
    unlink(fx->sock);
    /* The .meta files canopyd wrote beside the saved sessions at start. */
    char meta[sizeof(fx->dir) + 16];
    snprintf(meta, sizeof(meta), "%s/s1.meta", fx->dir);
    unlink(meta);
    snprintf(meta, sizeof(meta), "%s/s2.meta", fx->dir);
    unlink(meta);
    rmdir(fx->dir);
    free(fx);
    return 0;
}

static json_t *session_tree_req(const char *session, const char *format, const char *transform)
{
    json_t *r = cn_proto_request("tree");
    assert_non_null(r);
    json_object_set_new(r, "session", json_string(session));
    json_object_set_new(r, "format", json_string(format));
    if (transform)
        json_object_set_new(r, "transforms", json_pack("[s]", transform));
    return r;
}

static json_t *tree_req(const char *format, const char *transform)
{
    return session_tree_req("s1", format, transform);
}

/* Raw payload == the embedded reply's content, for every kind of format. */
static void test_raw_equals_embedded(void **state)
{
    fixture *fx = *state;
    const char *formats[] = {"text", "json", "folded", "speedscope", "canopy"};
    cn_err msg = {0};
    for (size_t k = 0; k < sizeof(formats) / sizeof(formats[0]); k++) {
        json_t *req = tree_req(formats[k], k % 2 ? "merge:run" : NULL), *plain = NULL, *resp = NULL;
        char *raw = NULL;
        size_t raw_len = 0;
        assert_int_equal(cn_cli_call(fx->c, req, &plain, &msg), 0);
        assert_true(json_is_true(json_object_get(plain, "ok")));
        assert_null(json_object_get(plain, "raw_bytes"));
        assert_int_equal(cn_cli_call_raw(fx->c, req, &resp, &raw, &raw_len, &msg), 0);
        assert_null(json_object_get(req, "raw")); /* the caller's request is left as it was */
        assert_true(json_is_true(json_object_get(resp, "ok")));
        assert_string_equal(json_string_value(json_object_get(resp, "format")), formats[k]);
        assert_non_null(raw);
        assert_int_equal(json_integer_value(json_object_get(resp, "raw_bytes")), raw_len);
        assert_null(json_object_get(resp, "output"));
        assert_null(json_object_get(resp, "tree"));
        const json_t *o = json_object_get(plain, "output");
        const json_t *b = json_object_get(plain, "output_base64");
        if (o) {
            assert_int_equal(json_string_length(o), raw_len);
            assert_memory_equal(json_string_value(o), raw, raw_len);
        } else if (b) {
            size_t n = 0;
            void *d = cn_common_base64_decode(json_string_value(b), json_string_length(b), &n);
            assert_non_null(d);
            assert_int_equal(n, raw_len);
            assert_memory_equal(d, raw, raw_len);
            free(d);
        } else {
            json_error_t je;
            json_t *t = json_loadb(raw, raw_len, 0, &je);
            assert_non_null(t);
            assert_true(json_equal(t, json_object_get(plain, "tree")));
            assert_int_equal(json_integer_value(json_object_get(t, "total")), 300);
            json_decref(t);
        }
        if (!strcmp(formats[k], "text"))
            assert_non_null(strstr(raw, "odd \"name\"\\tab")); /* unescaped, as printed */
        free(raw);
        json_decref(resp);
        json_decref(plain);
        json_decref(req);
    }
}

/* Rendered text embedded in a reply goes through formats/' one JSON string policy: the
 * line is valid JSON (cn_cli_call parses it with jansson, which refuses invalid UTF-8), a
 * byte that is not UTF-8 reads as U+FFFD and a control byte survives as its escape; the
 * raw payload keeps the bytes as the writer printed them (docs/protocol.md). folded keeps
 * names as they are; the text tree shows them under the terminal rule (docs/cli.md "Names
 * in text output"), in both forms. */
static void test_embedded_text_utf8(void **state)
{
    fixture *fx = *state;
    cn_err msg = {0};
    char *raw = NULL;
    size_t raw_len = 0;
    json_t *req = session_tree_req("s2", "folded", NULL), *resp = NULL;
    assert_int_equal(cn_cli_call(fx->c, req, &resp, &msg), 0);
    assert_true(json_is_true(json_object_get(resp, "ok")));
    const char *out = json_string_value(json_object_get(resp, "output"));
    assert_non_null(out);
    assert_non_null(strstr(out, "bad\xef\xbf\xbdname\x01"));
    assert_null(strchr(out, '\xff'));
    json_decref(resp);

    assert_int_equal(cn_cli_call_raw(fx->c, req, &resp, &raw, &raw_len, &msg), 0);
    assert_non_null(raw);
    assert_non_null(memmem(raw, raw_len, "bad\xffname\x01", 9));
    free(raw);
    json_decref(resp);
    json_decref(req);

    req = session_tree_req("s2", "text", NULL);
    assert_int_equal(cn_cli_call(fx->c, req, &resp, &msg), 0);
    out = json_string_value(json_object_get(resp, "output"));
    assert_non_null(out);
    assert_non_null(strstr(out, "bad\xef\xbf\xbdname\\x01"));
    json_decref(resp);
    assert_int_equal(cn_cli_call_raw(fx->c, req, &resp, &raw, &raw_len, &msg), 0);
    assert_non_null(memmem(raw, raw_len, "bad\xef\xbf\xbdname\\x01", 13));
    assert_null(memchr(raw, '\x01', raw_len));
    free(raw);
    json_decref(resp);
    json_decref(req);
}

/* Errors carry no payload; a mistyped "raw" is bad_request; the connection stays usable. */
static void test_raw_errors(void **state)
{
    fixture *fx = *state;
    cn_err msg = {0};
    char *raw = (char *)"x";
    size_t raw_len = 7;
    json_t *req = tree_req("text", "focus-func:no_such_function"), *resp = NULL;
    assert_int_equal(cn_cli_call_raw(fx->c, req, &resp, &raw, &raw_len, &msg), 0);
    assert_null(raw);
    assert_int_equal(raw_len, 0);
    assert_true(json_is_false(json_object_get(resp, "ok")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(resp, "error"), "code")),
                        "unknown_function");
    json_decref(resp);
    json_decref(req);

    req = tree_req("text", NULL);
    json_object_set_new(req, "raw", json_string("yes"));
    assert_int_equal(cn_cli_call(fx->c, req, &resp, &msg), 0);
    assert_true(json_is_false(json_object_get(resp, "ok")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(resp, "error"), "code")),
                        "bad_request");
    json_decref(resp);
    json_decref(req);

    /* Still in step: a raw answer, then a plain one on the same connection. */
    req = tree_req("folded", NULL);
    assert_int_equal(cn_cli_call_raw(fx->c, req, &resp, &raw, &raw_len, &msg), 0);
    assert_non_null(raw);
    assert_true(raw_len > 0);
    free(raw);
    json_decref(resp);
    json_decref(req);
    req = cn_proto_request("hello");
    assert_int_equal(cn_cli_call(fx->c, req, &resp, &msg), 0);
    assert_true(json_is_true(json_object_get(resp, "ok")));
    json_decref(resp);
    json_decref(req);
}

/* A fake daemon that answers one request with canned bytes, then closes. */
typedef struct fake {
    int lfd;
    const char *answer;
} fake;

static void *fake_main(void *arg)
{
    fake *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    char buf[4096];
    if (fd >= 0) {
        if (recv(fd, buf, sizeof(buf), 0) > 0)
            (void)!send(fd, f->answer, strlen(f->answer), MSG_NOSIGNAL);
        shutdown(fd, SHUT_WR);
        while (recv(fd, buf, sizeof(buf), 0) > 0)
            ;
        close(fd);
    }
    return NULL;
}

static int fake_call(const char *answer, cn_err *msg)
{
    char dir[64], path[108];
    snprintf(dir, sizeof(dir), "/tmp/test_daemon_raw.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/f.sock", dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    fake f = {socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), answer};
    assert_true(f.lfd >= 0);
    assert_int_equal(bind(f.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(f.lfd, 1), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fake_main, &f), 0);
    cn_cli_conn *c = NULL;
    assert_int_equal(cn_cli_connect(path, &c, NULL, 0), 0);
    json_t *req = tree_req("text", NULL), *resp = NULL;
    char *raw = NULL;
    size_t raw_len = 0;
    int rc = cn_cli_call_raw(c, req, &resp, &raw, &raw_len, msg);
    if (rc == 0) {
        assert_non_null(raw);
        assert_int_equal(raw_len, 5);
        assert_memory_equal(raw, "hello", 5);
    } else {
        assert_null(resp);
        assert_null(raw);
    }
    free(raw);
    json_decref(resp);
    json_decref(req);
    cn_cli_conn_free(c);
    pthread_join(t, NULL);
    close(f.lfd);
    unlink(path);
    rmdir(dir);
    return rc;
}

static void test_raw_bad_daemon(void **state)
{
    (void)state;
    cn_err msg = {0};
    assert_int_equal(fake_call("{\"v\":1,\"id\":1,\"ok\":true,\"raw_bytes\":5}\nhello", &msg), 0);
    msg.msg[0] = '\0';
    assert_int_equal(fake_call("{\"v\":1,\"id\":1,\"ok\":true,\"raw_bytes\":10}\nhello", &msg),
                     -ECONNRESET);
    assert_non_null(strstr(msg.msg, "5 of 10 bytes"));
    assert_int_equal(fake_call("{\"v\":1,\"id\":1,\"ok\":true,\"raw_bytes\":-1}\n", &msg), -EPROTO);
    assert_int_equal(fake_call("{\"v\":1,\"id\":1,\"ok\":true,\"raw_bytes\":\"5\"}\nhello", &msg),
                     -EPROTO);
    assert_int_equal(
        fake_call("{\"v\":1,\"id\":1,\"ok\":true,\"raw_bytes\":99999999999999}\n", &msg), -EPROTO);
    assert_non_null(strstr(msg.msg, "raw_bytes"));
}

/* Writes text to a temporary config file and loads it into *c (defaults first). */
static int load_config(const char *text, cn_d_config *c, cn_err *err)
{
    char path[] = "/tmp/test_daemon_conf.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    cn_d_config_init(c);
    int r = cn_d_config_load(c, path, err);
    unlink(path);
    return r;
}

/* The query bounds and per-user quotas (docs/security.md): defaults, keys, bad values. */
static void test_config_limits(void **state)
{
    cn_d_config c;
    cn_err err = {0};
    (void)state;
    cn_d_config_init(&c);
    assert_int_equal(c.query_workers, 4);
    assert_int_equal(c.query_max_transforms, 64);
    assert_int_equal(c.user_max_clients, 32);
    assert_true(c.user_max_kept_bytes == (uint64_t)256 << 20);
    assert_int_equal(load_config("query_workers = 2\nquery_max_transforms = 8\n"
                                 "query_max_output = 1M\nquery_cpu = 250ms\nquery_memory = 2G\n"
                                 "user_max_clients = 3\nuser_max_sessions = 1\n"
                                 "user_max_kept = 7\nuser_max_kept_bytes = 10M\n"
                                 "user_max_fds = 99\nidle_timeout = 5s\nsend_timeout = 2s\n",
                                 &c, &err),
                     0);
    assert_int_equal(c.query_workers, 2);
    assert_int_equal(c.query_max_transforms, 8);
    assert_true(c.query_max_output == (size_t)1 << 20);
    assert_true(c.query_cpu_ns == 250000000LL);
    assert_true(c.query_memory == (size_t)2 << 30);
    assert_int_equal(c.user_max_clients, 3);
    assert_int_equal(c.user_max_sessions, 1);
    assert_int_equal(c.user_max_kept, 7);
    assert_true(c.user_max_kept_bytes == (uint64_t)10 << 20);
    assert_int_equal(c.user_max_fds, 99);
    assert_true(c.idle_timeout_ns == 5000000000LL);
    assert_true(c.send_timeout_ns == 2000000000LL);
    static const char *const bad[] = {
        "query_workers = 0\n",       "query_workers = 65\n",   "query_max_transforms = 2000\n",
        "user_max_clients = many\n", "user_max_kept = 5000\n", "query_cpu = 0\n",
        "idle_timeout = soon\n",     "query_max_output = 0\n", "user_max_fds = -1\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0, sizeof(err));
        assert_int_equal(load_config(bad[i], &c, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "bad value"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_raw_equals_embedded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embedded_text_utf8, setup, teardown),
        cmocka_unit_test(test_raw_bad_daemon),
        cmocka_unit_test(test_config_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
