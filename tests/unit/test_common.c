/* test_common.c — common/: the bounded buffer, protocol framing and decoding, message
 * builders, durations, sizes, base64, the UTF-8 and terminal text rules, the atomic file
 * writer. (The QUERY fields' codec, cn_fmt_spec, is formats/' and tested in test_spec.c.) */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "cn_common.h"

static void test_buf_bounded(void **state)
{
    (void)state;
    cn_buf b;
    cn_buf_init(&b, 10);
    assert_int_equal(cn_buf_append(&b, "hello", 5), 0);
    assert_int_equal(cn_buf_appendf(&b, "%d", 1234), 0);
    assert_string_equal(cn_buf_ptr(&b), "hello1234");
    assert_int_equal(cn_buf_append(&b, "xy", 2), -EMSGSIZE); /* 11 > 10 */
    assert_int_equal(cn_buf_len(&b), 9);                     /* unchanged */
    assert_int_equal(cn_buf_appendf(&b, "%s", "long string"), -EMSGSIZE);
    cn_buf_consume(&b, 5);
    assert_string_equal(cn_buf_ptr(&b), "1234");
    assert_int_equal(cn_buf_append(&b, "abcdef", 6), 0); /* the consumed prefix is reused */
    assert_string_equal(cn_buf_ptr(&b), "1234abcdef");
    size_t room;
    assert_null(cn_buf_space(&b, 4, &room));
    assert_int_equal(room, 0);
    size_t len;
    char *s = cn_buf_steal(&b, &len);
    assert_string_equal(s, "1234abcdef");
    assert_int_equal(len, 10);
    free(s);
    assert_int_equal(cn_buf_len(&b), 0);
    cn_buf_free(&b);
}

static void test_buf_space(void **state)
{
    (void)state;
    cn_buf b;
    cn_buf_init(&b, 0);
    size_t room;
    char *p = cn_buf_space(&b, 100, &room);
    assert_non_null(p);
    assert_true(room >= 100);
    memcpy(p, "abc\n", 4);
    cn_buf_commit(&b, 4);
    char *line;
    size_t len;
    assert_int_equal(cn_proto_next_line(&b, 1000, &line, &len), 1);
    assert_int_equal(len, 3);
    assert_string_equal(line, "abc");
    cn_buf_consume(&b, len + 1);
    assert_int_equal(cn_buf_len(&b), 0);
    cn_buf_free(&b);
}

/* A reply's line put before output read after it: the output is written where it stays,
 * and a prepend larger than the room in front moves it once. */
static void test_buf_front(void **state)
{
    (void)state;
    /* A file's bytes as a buffer, where they are mapped (a query worker's answer, read by
     * canopyd's loop): 16 bytes of room, the output, its NUL and 2 bytes to spare. */
    static const char file[] = "................output\0\0";
    int fd = memfd_create("test_buf_front", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, file, sizeof(file), 0), (ssize_t)sizeof(file));
    char *map = mmap(NULL, sizeof(file), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    assert_true(map != MAP_FAILED);
    cn_buf b;
    cn_buf_init(&b, 5);
    assert_int_equal(cn_buf_adopt_map(&b, map, sizeof(file), 16, 6), -EMSGSIZE); /* > 5 */
    cn_buf_init(&b, 10);
    assert_int_equal(cn_buf_adopt_map(&b, map, sizeof(file), 16, 6), 0);
    const char *p = map + 16;
    assert_ptr_equal(cn_buf_ptr(&b), p);
    assert_int_equal(cn_buf_prepend(&b, "L:", 2), 0);
    assert_ptr_equal(cn_buf_ptr(&b) + 2, p); /* written in front: the output did not move */
    assert_int_equal(cn_buf_append(&b, "}\n", 2), 0);
    assert_ptr_equal(cn_buf_ptr(&b) + 2, p); /* nor for the 2 bytes after it */
    assert_string_equal(cn_buf_ptr(&b), "L:output}\n");
    assert_int_equal(cn_buf_prepend(&b, "x", 1), -EMSGSIZE); /* 11 > the limit of 10 */
    char back[sizeof(file)];
    assert_int_equal(pread(fd, back, sizeof(back), 0), (ssize_t)sizeof(back));
    assert_memory_equal(back, file, sizeof(file)); /* a private mapping: the file is as written */
    cn_buf_consume(&b, 2);
    size_t len;
    char *s = cn_buf_steal(&b, &len); /* a malloc'ed copy; the mapping goes */
    assert_string_equal(s, "output}\n");
    assert_int_equal(len, 8);
    assert_null(b.data);
    free(s);
    cn_buf_init(&b, 0);
    assert_int_equal(
        cn_buf_adopt_map(&b, mmap(NULL, sizeof(file), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0),
                         sizeof(file), 16, 6),
        0);
    assert_int_equal(cn_buf_append(&b, ", and more than the mapping holds", 33), 0);
    assert_false(b.mapped); /* moved into allocated storage */
    assert_string_equal(cn_buf_ptr(&b), "output, and more than the mapping holds");
    cn_buf_free(&b);
    close(fd);

    cn_buf_init(&b, 0);
    assert_int_equal(cn_buf_append(&b, "tail", 4), 0);
    assert_int_equal(cn_buf_prepend(&b, "a longer head than any room, ", 29), 0);
    assert_string_equal(cn_buf_ptr(&b), "a longer head than any room, tail");
    cn_buf_consume(&b, 2);
    assert_int_equal(cn_buf_prepend(&b, "A ", 2), 0); /* into the consumed prefix */
    assert_string_equal(cn_buf_ptr(&b), "A longer head than any room, tail");
    cn_buf_free(&b);
}

static void test_framing(void **state)
{
    (void)state;
    cn_buf b;
    char *line;
    size_t len;
    cn_buf_init(&b, 0);
    assert_int_equal(cn_proto_next_line(&b, 16, &line, &len), 0);
    cn_buf_append(&b, "{\"cmd\":", 7);
    assert_int_equal(cn_proto_next_line(&b, 16, &line, &len), 0); /* half a request */
    cn_buf_append(&b, "\"a\"}\r\n{}\n", 9);
    assert_int_equal(cn_proto_next_line(&b, 16, &line, &len), 1);
    assert_int_equal(len, 12); /* the \r stays: JSON whitespace */
    json_t *req;
    cn_err pe;
    assert_int_equal(cn_proto_decode(line, len, &req, &pe), 0);
    assert_string_equal(json_string_value(json_object_get(req, "cmd")), "a");
    json_decref(req);
    cn_buf_consume(&b, len + 1);
    assert_int_equal(cn_proto_next_line(&b, 16, &line, &len), 1);
    assert_int_equal(len, 2);
    cn_buf_consume(&b, len + 1);
    /* Too long without a newline, and a complete line over the limit. */
    cn_buf_append(&b, "0123456789abcdefXYZ", 19);
    assert_int_equal(cn_proto_next_line(&b, 16, &line, &len), -EMSGSIZE);
    cn_buf_reset(&b);
    cn_buf_append(&b, "0123456789abcdefXYZ\n", 20);
    assert_int_equal(cn_proto_next_line(&b, 16, &line, &len), -EMSGSIZE);
    cn_buf_free(&b);
}

static void expect_bad(const char *msg, const char *code)
{
    json_t *req = NULL;
    cn_err pe = {0};
    int r = cn_proto_decode(msg, strlen(msg), &req, &pe);
    assert_true(r < 0);
    assert_null(req);
    assert_string_equal(pe.code, code);
    assert_true(strlen(pe.msg) > 0);
}

static void test_decode_errors(void **state)
{
    (void)state;
    expect_bad("", "bad_request");
    expect_bad("garbage", "bad_request");
    expect_bad("[1,2]", "bad_request");
    expect_bad("{\"cmd\": 3}", "bad_request");
    expect_bad("{\"cmd\": \"\"}", "bad_request");
    expect_bad("{\"v\": \"1\", \"cmd\": \"a\"}", "bad_request");
    expect_bad("{\"v\": 99, \"cmd\": \"a\"}", "bad_version");
    expect_bad("{\"cmd\":\"a\",\"cmd\":\"b\"}", "bad_request"); /* duplicate key */
    expect_bad("{\"cmd\":\"a\\u0000b\"}", "bad_request");
    char deep[200] = "{\"cmd\":\"a\",\"x\":";
    for (int i = 0; i < 40; i++)
        strcat(deep, "[");
    expect_bad(deep, "bad_request");
    const char nul[] = "{\"cmd\":\"a\"}\0";
    json_t *req = NULL;
    cn_err pe;
    assert_true(cn_proto_decode(nul, sizeof(nul) - 1, &req, &pe) < 0);
}

static void test_messages(void **state)
{
    (void)state;
    json_t *req = cn_proto_request("tree");
    json_object_set_new(req, "id", json_integer(42));
    cn_buf out;
    cn_buf_init(&out, 0);
    assert_int_equal(cn_proto_encode(req, &out), 0);
    assert_non_null(strstr(cn_buf_ptr(&out), "\"cmd\":\"tree\""));
    assert_int_equal(cn_buf_ptr(&out)[cn_buf_len(&out) - 1], '\n');
    assert_null(memchr(cn_buf_ptr(&out), '\n', cn_buf_len(&out) - 1));

    json_t *ok = cn_proto_ok(req);
    assert_true(json_is_true(json_object_get(ok, "ok")));
    assert_int_equal(json_integer_value(json_object_get(ok, "id")), 42);
    json_t *err = cn_proto_error(req, "unknown_session", 1, "unknown session '%s'", "s9");
    json_t *e = json_object_get(err, "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "unknown_session");
    assert_string_equal(json_string_value(json_object_get(e, "message")), "unknown session 's9'");
    assert_int_equal(json_integer_value(json_object_get(e, "exit")), 1);

    /* Round trip through the response decoder. */
    cn_buf_reset(&out);
    assert_int_equal(cn_proto_encode(err, &out), 0);
    json_t *back = NULL;
    cn_err pe;
    assert_int_equal(cn_proto_decode_response(cn_buf_ptr(&out), cn_buf_len(&out) - 1, &back, &pe),
                     0);
    assert_true(json_is_false(json_object_get(back, "ok")));
    assert_true(cn_proto_decode_response("{\"x\":1}", 7, &back, &pe) < 0 || (json_decref(back), 0));

    /* A bounded output buffer refuses a message that does not fit and stays unchanged. */
    cn_buf small;
    cn_buf_init(&small, 8);
    assert_int_equal(cn_proto_encode(req, &small), -EMSGSIZE);
    assert_int_equal(cn_buf_len(&small), 0);
    cn_buf_free(&small);

    /* Typed getters. */
    json_t *o = json_pack("{s:s, s:i, s:f, s:b, s:n}", "s", "x", "i", 5, "f", 1.5, "b", 1, "n");
    const char *s = NULL;
    int64_t i = -1;
    double d = 0;
    bool bo = false;
    assert_int_equal(cn_proto_get_str(o, "s", &s, &pe), 0);
    assert_string_equal(s, "x");
    assert_int_equal(cn_proto_get_int(o, "i", &i, &pe), 0);
    assert_int_equal(i, 5);
    assert_int_equal(cn_proto_get_num(o, "f", &d, &pe), 0);
    assert_true(d == 1.5);
    assert_int_equal(cn_proto_get_num(o, "i", &d, &pe), 0);
    assert_true(d == 5);
    assert_int_equal(cn_proto_get_bool(o, "b", &bo, &pe), 0);
    assert_true(bo);
    assert_int_equal(cn_proto_get_int(o, "n", &i, &pe), 1); /* null = absent */
    assert_int_equal(cn_proto_get_int(o, "zz", &i, &pe), 1);
    assert_int_equal(cn_proto_get_int(o, "s", &i, &pe), -EINVAL);
    assert_non_null(strstr(pe.msg, "\"s\""));
    assert_int_equal(cn_proto_get_str(o, "i", &s, &pe), -EINVAL);
    assert_int_equal(cn_proto_get_bool(o, "i", &bo, &pe), -EINVAL);
    json_decref(o);
    json_decref(back);
    json_decref(ok);
    json_decref(err);
    json_decref(req);
    cn_buf_free(&out);
}

static void test_duration(void **state)
{
    (void)state;
    int64_t ns;
    assert_int_equal(cn_common_parse_duration("30s", &ns), 0);
    assert_true(ns == 30000000000LL);
    assert_int_equal(cn_common_parse_duration("5m", &ns), 0);
    assert_true(ns == 300000000000LL);
    assert_int_equal(cn_common_parse_duration("250ms", &ns), 0);
    assert_true(ns == 250000000LL);
    assert_int_equal(cn_common_parse_duration("1.5", &ns), 0);
    assert_true(ns == 1500000000LL);
    assert_int_equal(cn_common_parse_duration("2h", &ns), 0);
    assert_true(ns == 7200000000000LL);
    assert_int_equal(cn_common_parse_duration("10us", &ns), 0);
    assert_true(ns == 10000);
    assert_int_equal(cn_common_parse_duration("7ns", &ns), 0);
    assert_true(ns == 7);
    assert_int_equal(cn_common_parse_duration("0", &ns), 0);
    assert_true(ns == 0);
    const char *bad[] = {"",    "s",   "-1s",  "1x",   "1.2.3s",
                         "inf", "nan", "0x10", "1e3s", "99999999999999h",
                         " 1s", "1s ", "."};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(cn_common_parse_duration(bad[i], &ns), -EINVAL);
    assert_int_equal(cn_common_parse_duration(NULL, &ns), -EINVAL);
}

static void test_size(void **state)
{
    (void)state;
    uint64_t b;
    assert_int_equal(cn_common_parse_size("64K", &b), 0);
    assert_true(b == 65536);
    assert_int_equal(cn_common_parse_size("1MiB", &b), 0);
    assert_true(b == 1048576);
    assert_int_equal(cn_common_parse_size("2G", &b), 0);
    assert_true(b == 2147483648ULL);
    assert_int_equal(cn_common_parse_size("17", &b), 0);
    assert_true(b == 17);
    assert_int_equal(cn_common_parse_size("1T", &b), -EINVAL);
    assert_int_equal(cn_common_parse_size("-1", &b), -EINVAL);
    assert_int_equal(cn_common_parse_size("K", &b), -EINVAL);
    assert_int_equal(cn_common_parse_size("99999999999999999999", &b), -EINVAL);
}

static void test_base64(void **state)
{
    (void)state;
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < 7; i++) {
        char *e = cn_common_base64_encode(in[i], strlen(in[i]));
        assert_string_equal(e, want[i]);
        size_t len;
        char *d = cn_common_base64_decode(e, strlen(e), &len);
        assert_non_null(d);
        assert_int_equal(len, strlen(in[i]));
        assert_memory_equal(d, in[i], len);
        free(d);
        free(e);
    }
    unsigned char bin[256];
    for (int i = 0; i < 256; i++)
        bin[i] = (unsigned char)i;
    char *e = cn_common_base64_encode(bin, sizeof(bin));
    size_t len;
    unsigned char *d = cn_common_base64_decode(e, strlen(e), &len);
    assert_int_equal(len, 256);
    assert_memory_equal(d, bin, 256);
    free(d);
    free(e);
    assert_null(cn_common_base64_decode("Zm9", 3, &len));
    assert_null(cn_common_base64_decode("Zm!v", 4, &len));
    assert_null(cn_common_base64_decode("Z=9v", 4, &len));
    assert_null(cn_common_base64_decode("Zg==Zg==", 8, &len));
}

static void test_errno_name(void **state)
{
    (void)state;
    assert_string_equal(cn_common_errno_name(EPERM), "EPERM");
    assert_string_equal(cn_common_errno_name(ENOENT), "ENOENT");
}

/* cn_utf8_seq: what one valid character is, at every boundary of the rule. */
static void test_utf8_seq(void **state)
{
    (void)state;
    assert_int_equal(cn_utf8_seq("a", 1), 1);
    assert_int_equal(cn_utf8_seq("", 1), 1); /* NUL is a character (the protocol replaces it) */
    assert_int_equal(cn_utf8_seq("a", 0), 0);
    assert_int_equal(cn_utf8_seq("\xc3\xa9", 2), 2);         /* é */
    assert_int_equal(cn_utf8_seq("\xc3\xa9", 1), 0);         /* cut */
    assert_int_equal(cn_utf8_seq("\xc2\x85", 2), 2);         /* U+0085 (C1) is valid UTF-8 */
    assert_int_equal(cn_utf8_seq("\x85", 1), 0);             /* a raw 0x85 is not */
    assert_int_equal(cn_utf8_seq("\xc0\xaf", 2), 0);         /* overlong '/' */
    assert_int_equal(cn_utf8_seq("\xc1\xbf", 2), 0);         /* overlong */
    assert_int_equal(cn_utf8_seq("\xe0\x80\xaf", 3), 0);     /* overlong, 3 bytes */
    assert_int_equal(cn_utf8_seq("\xf0\x80\x80\xaf", 4), 0); /* overlong, 4 bytes */
    assert_int_equal(cn_utf8_seq("\xe0\xa0\x80", 3), 3);     /* U+0800, the smallest */
    assert_int_equal(cn_utf8_seq("\xed\x9f\xbf", 3), 3);     /* U+D7FF */
    assert_int_equal(cn_utf8_seq("\xed\xa0\x80", 3), 0);     /* U+D800, a surrogate */
    assert_int_equal(cn_utf8_seq("\xed\xbf\xbf", 3), 0);     /* U+DFFF */
    assert_int_equal(cn_utf8_seq("\xf4\x8f\xbf\xbf", 4), 4); /* U+10FFFF */
    assert_int_equal(cn_utf8_seq("\xf4\x90\x80\x80", 4), 0); /* U+110000 */
    assert_int_equal(cn_utf8_seq("\xf5\x80\x80\x80", 4), 0);
    assert_int_equal(cn_utf8_seq("\xff", 1), 0);
    assert_int_equal(cn_utf8_seq("\xe2\x82", 3), 0); /* a NUL where a continuation belongs */
    assert_int_equal(cn_utf8_seq("\xe2\x28\xa1", 3), 0);
}

/* cn_utf8_cut: a bound never splits a character. */
static void test_utf8_cut(void **state)
{
    (void)state;
    const char *s = "ab\xc3\xa9"
                    "c\xe2\x82\xac"
                    "d\xf0\x9f\x98\x80"; /* ab é c € d 😀 */
    size_t n = strlen(s);
    assert_int_equal(cn_utf8_cut(s, n, n + 5), n);
    assert_int_equal(cn_utf8_cut(s, n, 2), 2);
    assert_int_equal(cn_utf8_cut(s, n, 3), 2); /* inside é */
    assert_int_equal(cn_utf8_cut(s, n, 4), 4);
    assert_int_equal(cn_utf8_cut(s, n, 6), 5); /* inside € */
    assert_int_equal(cn_utf8_cut(s, n, 7), 5);
    assert_int_equal(cn_utf8_cut(s, n, 8), 8);
    assert_int_equal(cn_utf8_cut(s, n, 10), 9); /* inside 😀 */
    assert_int_equal(cn_utf8_cut(s, n, 11), 9);
    assert_int_equal(cn_utf8_cut(s, n, 12), 9);
    assert_int_equal(cn_utf8_cut(s, n, 0), 0);
    /* Invalid bytes are characters of their own: cut right after one. */
    assert_int_equal(cn_utf8_cut("a\xff\xfe"
                                 "b",
                                 4, 2),
                     2);
    assert_int_equal(cn_utf8_cut("a\x80\x80\x80\x80", 5, 3), 3);
    /* A broken sequence that max would "split" is not a character: cut at max. */
    assert_int_equal(cn_utf8_cut("a\xe2\x28\xa1", 4, 2), 2);

    /* cn_err: a message longer than its buffer ends on a character boundary. */
    cn_err e;
    char big[600];
    memset(big, 'x', 510);
    memcpy(big + 510, "\xc3\xa9\xc3\xa9", 5);
    cn_err_set(&e, -EINVAL, "%s", big);
    assert_int_equal(strlen(e.msg), 510); /* é would need bytes 510 and 511 */
    memset(big, 'x', 509);
    memcpy(big + 509, "\xc3\xa9\xc3\xa9", 5);
    cn_err_set(&e, -EINVAL, "%s", big);
    assert_int_equal(strlen(e.msg), 511);
}

/* cn_proto_string: the UTF-8 rule makes a JSON string of anything; the reply decodes. */
static void test_proto_string(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t n;
        const char *out;
    } cases[] = {
        {"plain", 5, "plain"},
        {"bad\xff\xfeutf", 8, "bad\xef\xbf\xbd\xef\xbf\xbdutf"},
        {"abcdefghijklmn\xc3", 15, "abcdefghijklmn\xef\xbf\xbd"},    /* a comm cut mid-character */
        {"\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd"},                 /* overlong */
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* surrogate */
        {"a\0b", 3,
         "a\xef\xbf\xbd"
         "b"},                               /* NUL */
        {"\x1b]0;PWN\a", 8, "\x1b]0;PWN\a"}, /* controls stay: JSON escapes them */
        {"\xc2\x85", 2, "\xc2\x85"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *v = cn_proto_string(cases[i].in, cases[i].n);
        assert_non_null(v);
        assert_string_equal(json_string_value(v), cases[i].out);
        /* In a reply, through the encoder and the client's decoder. */
        json_t *r = cn_proto_ok(NULL);
        json_object_set_new(r, "s", v);
        cn_buf out;
        cn_buf_init(&out, 0);
        assert_int_equal(cn_proto_encode(r, &out), 0);
        json_t *back = NULL;
        cn_err pe;
        assert_int_equal(
            cn_proto_decode_response(cn_buf_ptr(&out), cn_buf_len(&out) - 1, &back, &pe), 0);
        assert_string_equal(json_string_value(json_object_get(back, "s")), cases[i].out);
        json_decref(back);
        json_decref(r);
        cn_buf_free(&out);
    }
    json_t *v = cn_proto_str(NULL);
    assert_string_equal(json_string_value(v), "");
    json_decref(v);
    /* A long string (the heap path). */
    char big[2000];
    memset(big, '\xff', sizeof(big));
    v = cn_proto_string(big, sizeof(big));
    assert_int_equal(json_string_length(v), 3 * sizeof(big));
    json_decref(v);

    /* Errors: a message of invalid bytes still makes an error reply, valid UTF-8. */
    json_t *err = cn_proto_error(NULL, "failed", 1, "no session '%s'", "x\xff\xfe");
    assert_non_null(err);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(err, "error"), "message")),
        "no session 'x\xef\xbf\xbd\xef\xbf\xbd'");
    json_decref(err);
    /* A long one is cut on a character boundary, not into U+FFFD. */
    char name[1200];
    for (size_t i = 0; i + 2 < sizeof(name); i += 2)
        memcpy(name + i, "\xc3\xa9", 2);
    name[sizeof(name) - 2] = '\0';
    err = cn_proto_error(NULL, "failed", 1, "x%s", name);
    const char *m = json_string_value(json_object_get(json_object_get(err, "error"), "message"));
    assert_int_equal(strlen(m), 511);
    assert_null(strstr(m, "\xef\xbf\xbd"));
    json_decref(err);
}

/* The terminal rule: controls spelled out, UTF-8 rule, nothing else touched. */
static void test_term_escape(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t n;
        const char *out;
    } cases[] = {
        {"main", 4, "main"},
        {"\x1b]0;PWN\a\x1b[2J", 12, "\\x1b]0;PWN\\x07\\x1b[2J"},
        {"\x1b[31mx\r\nfake line", 17, "\\x1b[31mx\\x0d\\x0afake line"},
        {"a\tb\x7f", 4, "a\\x09b\\x7f"},
        {"a\0b", 3, "a\\x00b"},
        {"\xc2\x85\xc2\x9b\xc2\xa0", 6, "\\u0085\\u009b\xc2\xa0"}, /* C1; U+00A0 is not */
        {"\x85\x9b", 2, "\xef\xbf\xbd\xef\xbf\xbd"},               /* raw C1 bytes: invalid */
        {"bad\xff\xfeutf", 8, "bad\xef\xbf\xbd\xef\xbf\xbdutf"},
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"caf\xc3\xa9 \xe2\x82\xac \\x1b", 14, "caf\xc3\xa9 \xe2\x82\xac \\x1b"},
    };
    char buf[256];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len = cn_term_escape(buf, sizeof(buf), cases[i].in, cases[i].n);
        assert_string_equal(buf, cases[i].out);
        assert_int_equal(len, strlen(cases[i].out));
        /* The rule is idempotent: its output is plain. */
        assert_int_equal(cn_term_plain_len(buf, len), len);
        char *d = cn_term_dup(cases[i].in, cases[i].n);
        assert_string_equal(d, cases[i].out);
        free(d);
        bool plain = !strcmp(cases[i].in, cases[i].out) && strlen(cases[i].in) == cases[i].n;
        assert_int_equal(cn_term_plain_len(cases[i].in, cases[i].n) == cases[i].n, plain);
    }
    assert_int_equal(cn_term_plain_len("ab\x1b"
                                       "c",
                                       4),
                     2);
    /* A small buffer ends before an escape or a character that does not fit whole. */
    assert_int_equal(cn_term_escape(buf, 4, "ab\x1b", 3), 2);
    assert_string_equal(buf, "ab");
    assert_int_equal(cn_term_escape(buf, 4, "a\xc3\xa9", 3), 3);
    assert_string_equal(buf, "a\xc3\xa9");
    assert_int_equal(cn_term_escape(buf, 3, "a\xc3\xa9", 3), 1);
    assert_string_equal(buf, "a");
    assert_int_equal(cn_term_escape(buf, 0, "a", 1), 0);
    assert_string_equal(cn_term_str(buf, sizeof(buf), NULL), "");
    /* The worst case, 6 bytes per input byte, fits cn_term_dup's buffer. */
    char *d = cn_term_dup("\xc2\x85\xc2\x85", 4);
    assert_string_equal(d, "\\u0085\\u0085");
    free(d);
    d = cn_term_dup("\x01\x02", 2);
    assert_string_equal(d, "\\x01\\x02");
    free(d);
}

/* ---- the atomic file writer ---------------------------------------------------------- */

/* Waits for the writer's child pid, which exits 0 when it saw what it expected. */
static void expect_child_ok(pid_t pid)
{
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* The names in dir (flat), space-separated and sorted by readdir order, in out. */
static int dir_names(const char *dir, char *out, size_t n)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int count = 0;
    out[0] = 0;
    assert_non_null(d);
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(out + strlen(out), n - strlen(out), "%s%s", count ? " " : "", de->d_name);
        count++;
    }
    closedir(d);
    return count;
}

static void rm_tree(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 20);
    *len = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    return buf;
}

static void test_afile_content_mode(void **state)
{
    (void)state;
    char dir[] = "/tmp/cn_afile_XXXXXX", path[256], names[512];
    struct stat st;
    size_t len;
    cn_err e = {0};
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/x", dir);
    mode_t old = umask(0);
    assert_int_equal(cn_common_write_file_atomic(path, 0640, "first", 5, &e), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    /* Replacing: the new content and the new mode, nothing else left in the directory. */
    assert_int_equal(cn_common_write_file_atomic(path, 0604, "second!", 7, &e), 0);
    umask(old);
    char *got = read_all(path, &len);
    assert_int_equal(len, 7);
    assert_memory_equal(got, "second!", 7);
    free(got);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0604);
    assert_int_equal(dir_names(dir, names, sizeof(names)), 1);
    assert_string_equal(names, "x");

    /* Through a stream, more than one stdio buffer's worth. */
    cn_afile af;
    assert_int_equal(cn_afile_open(&af, path, 0600, &e), 0);
    assert_int_equal(dir_names(dir, names, sizeof(names)), 2); /* x and x.XXXXXX.tmp */
    FILE *f = cn_afile_stream(&af);
    assert_non_null(f);
    for (int i = 0; i < 20000; i++)
        fprintf(f, "%05d\n", i);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(cn_afile_commit(&af, &e), 0);
    got = read_all(path, &len);
    assert_int_equal(len, 20000 * 6);
    assert_memory_equal(got + 19999 * 6, "19999\n", 6);
    free(got);
    assert_int_equal(dir_names(dir, names, sizeof(names)), 1);

    /* Abort: the temporary file goes, the target stays as it was. */
    assert_int_equal(cn_afile_open(&af, path, 0600, &e), 0);
    assert_int_equal(cn_afile_write(&af, "zz", 2, &e), 0);
    cn_afile_abort(&af);
    cn_afile_abort(&af); /* released: a no-op */
    assert_int_equal(dir_names(dir, names, sizeof(names)), 1);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 20000 * 6);
    rm_tree(dir);
}

static void test_afile_failures(void **state)
{
    (void)state;
    char dir[] = "/tmp/cn_afile_XXXXXX", path[256], names[512];
    cn_err e = {0};
    assert_non_null(mkdtemp(dir));
    /* Renaming onto a directory fails at the commit: nothing left behind. */
    snprintf(path, sizeof(path), "%s/d", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(cn_common_write_file_atomic(path, 0600, "abc", 3, &e), -EISDIR);
    assert_non_null(strstr(e.msg, "/d."));
    assert_int_equal(dir_names(dir, names, sizeof(names)), 1);
    assert_string_equal(names, "d");
    /* A missing directory fails at the open, with the reason. */
    snprintf(path, sizeof(path), "%s/missing/x", dir);
    assert_int_equal(cn_common_write_file_atomic(path, 0600, "abc", 3, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "No such file"));
    /* A read-only directory, as an unprivileged user (root would write anyway). */
    snprintf(path, sizeof(path), "%s/ro", dir);
    assert_int_equal(mkdir(path, 0555), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char target[300];
        snprintf(target, sizeof(target), "%s/x", path);
        if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
            _exit(3);
        _exit(cn_common_write_file_atomic(target, 0600, "abc", 3, NULL) == -EACCES ? 0 : 1);
    }
    expect_child_ok(pid);
    assert_int_equal(dir_names(path, names, sizeof(names)), 0);
    rm_tree(dir);
}

/* Short writes: under RLIMIT_FSIZE the first write() stops at the limit and returns what
 * fit; the writer must go on (a single write would report success or -EIO) and so reach the
 * limit's EFBIG, then remove its temporary file. */
static void test_afile_short_write(void **state)
{
    (void)state;
    char dir[] = "/tmp/cn_afile_XXXXXX", path[256], names[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/x", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        static char data[300];
        struct rlimit rl = {100, 100};
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
            _exit(3);
        memset(data, 'a', sizeof(data));
        _exit(cn_common_write_file_atomic(path, 0600, data, sizeof(data), NULL) == -EFBIG ? 0 : 1);
    }
    expect_child_ok(pid);
    assert_int_equal(dir_names(dir, names, sizeof(names)), 0);
    rm_tree(dir);
}

/* A deadline is the clock's time plus the interval, normalized; a negative one is now. */
static void test_deadline(void **state)
{
    (void)state;
    struct timespec before, after;
    clock_gettime(CLOCK_MONOTONIC, &before);
    struct timespec d = cn_common_deadline(CLOCK_MONOTONIC, 1999999999);
    clock_gettime(CLOCK_MONOTONIC, &after);
    int64_t b = (int64_t)before.tv_sec * 1000000000 + before.tv_nsec;
    int64_t a = (int64_t)after.tv_sec * 1000000000 + after.tv_nsec;
    int64_t t = (int64_t)d.tv_sec * 1000000000 + d.tv_nsec;
    assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
    assert_true(t >= b + 1999999999 && t <= a + 1999999999);
    d = cn_common_deadline(CLOCK_MONOTONIC, -5000000000LL);
    t = (int64_t)d.tv_sec * 1000000000 + d.tv_nsec;
    assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
    assert_true(t >= a);
}

/* The cgroup parser over paths as the runtimes write them (docker and podman on this kind
 * of host, kubelet's systemd and cgroupfs drivers, a user's systemd), and the
 * /proc/PID/cgroup shapes of a hybrid, a pure v2 and a pure v1 machine. */
#define ID64  "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ID64B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
static void test_cgroup_paths(void **state)
{
    (void)state;
    static const struct {
        const char *path, *id, *runtime, *pod, *qos, *unit;
    } cases[] = {
        {"/system.slice/docker-" ID64 ".scope", ID64, "docker", "", "", "docker-" ID64 ".scope"},
        {"/docker/" ID64, ID64, "docker", "", "", ""},
        {"/libpod_parent/libpod-" ID64, ID64, "podman", "", "", ""},
        {"/machine.slice/libpod-" ID64 ".scope", ID64, "podman", "", "", "libpod-" ID64 ".scope"},
        {"/machine.slice/libpod-conmon-" ID64 ".scope", "", "", "", "",
         "libpod-conmon-" ID64 ".scope"},
        {"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID64 ".scope/container",
         ID64, "podman", "", "", "libpod-" ID64 ".scope"},
        {"/kubepods.slice/kubepods-burstable.slice/"
         "kubepods-burstable-pod0d2b9a4e_3c1f_4f0e_9b1a_1c2d3e4f5a6b.slice/cri-containerd-" ID64
         ".scope",
         ID64, "containerd", "0d2b9a4e-3c1f-4f0e-9b1a-1c2d3e4f5a6b", "burstable",
         "cri-containerd-" ID64 ".scope"},
        {"/kubepods.slice/kubepods-besteffort.slice/"
         "kubepods-besteffort-pod11111111_2222_3333_4444_555555555555.slice/crio-" ID64 ".scope",
         ID64, "cri-o", "11111111-2222-3333-4444-555555555555", "besteffort",
         "crio-" ID64 ".scope"},
        {"/kubepods.slice/kubepods-podaaaaaaaa_bbbb_cccc_dddd_eeeeeeeeeeee.slice/crio-" ID64
         ".scope",
         ID64, "cri-o", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "guaranteed",
         "crio-" ID64 ".scope"},
        {"/kubepods.slice/kubepods-besteffort.slice/"
         "kubepods-besteffort-pod11111111_2222_3333_4444_555555555555.slice/crio-conmon-" ID64
         ".scope",
         "", "", "11111111-2222-3333-4444-555555555555", "besteffort",
         "crio-conmon-" ID64 ".scope"},
        {"/kubepods/burstable/pod0d2b9a4e-3c1f-4f0e-9b1a-1c2d3e4f5a6b/" ID64, ID64, "",
         "0d2b9a4e-3c1f-4f0e-9b1a-1c2d3e4f5a6b", "burstable", ""},
        {"/kubepods/pod0d2b9a4e-3c1f-4f0e-9b1a-1c2d3e4f5a6b/" ID64B, ID64B, "",
         "0d2b9a4e-3c1f-4f0e-9b1a-1c2d3e4f5a6b", "", ""},
        {"/system.slice/nginx.service", "", "", "", "", "nginx.service"},
        {"/user.slice/user-1000.slice/session-3.scope", "", "", "", "", "session-3.scope"},
        {"/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service", "", "", "", "",
         "foo.service"},
        {"/", "", "", "", "", ""},
        {"", "", "", "", "", ""},
        /* shapes that must not pass for an id or a pod */
        {"/docker/" ID64 "0", "", "", "", "", ""},
        {"/docker-0123.scope", "", "", "", "", "docker-0123.scope"},
        {"/system.slice/docker-"
         "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"
         ".scope",
         "", "", "", "",
         "docker-0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef.scope"},
        {"/kubepods.slice/kubepods-burstable-podnot_a_uid.slice", "", "", "", "burstable", ""},
        {"//docker//" ID64 "//", ID64, "docker", "", "", ""},
        {"/.scope/.service", "", "", "", "", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cn_cgroup_info o;
        cn_cgroup_identify(cases[i].path, &o);
        print_message("%s\n", cases[i].path);
        assert_string_equal(o.container_id, cases[i].id);
        assert_string_equal(o.runtime, cases[i].runtime);
        assert_string_equal(o.pod_uid, cases[i].pod);
        assert_string_equal(o.k8s_qos, cases[i].qos);
        assert_string_equal(o.systemd_unit, cases[i].unit);
    }
    cn_cgroup_info o;
    cn_cgroup_identify(NULL, &o);
    assert_string_equal(o.container_id, "");
    cn_cgroup_key k;
    assert_int_equal(cn_cgroup_key_parse("pod_uid", &k), 0);
    assert_int_equal(k, CN_CGROUP_KEY_POD);
    assert_int_equal(cn_cgroup_key_parse("container", &k), 0);
    assert_int_equal(k, CN_CGROUP_KEY_CONTAINER);
    assert_int_equal(cn_cgroup_key_parse("nope", &k), -EINVAL);
    assert_true(cn_cgroup_value_match(CN_CGROUP_KEY_CONTAINER, ID64, "0123"));
    assert_false(cn_cgroup_value_match(CN_CGROUP_KEY_CONTAINER, ID64, "1123"));
    assert_false(cn_cgroup_value_match(CN_CGROUP_KEY_CGROUP, "/a/b", "/a"));
}

static void test_cgroup_proc(void **state)
{
    (void)state;
    char out[CN_CGROUP_PATH_MAX];
    static const char hybrid[] = "9:name=systemd:/\n8:pids:/\n4:memory:/x/y\n1:cpu:/\n"
                                 "0::/libpod_parent/libpod-" ID64 "\n";
    assert_int_equal(cn_cgroup_from_proc(hybrid, strlen(hybrid), out, sizeof(out)), 0);
    assert_string_equal(out, "/libpod_parent/libpod-" ID64);
    static const char v2[] = "0::/system.slice/nginx.service\n";
    assert_int_equal(cn_cgroup_from_proc(v2, strlen(v2), out, sizeof(out)), 0);
    assert_string_equal(out, "/system.slice/nginx.service");
    /* no trailing newline */
    assert_int_equal(cn_cgroup_from_proc(v2, strlen(v2) - 1, out, sizeof(out)), 0);
    assert_string_equal(out, "/system.slice/nginx.service");
    static const char v1[] = "12:perf_event:/docker/" ID64 "\n1:name=systemd:/docker/x\n";
    assert_int_equal(cn_cgroup_from_proc(v1, strlen(v1), out, sizeof(out)), 0);
    assert_string_equal(out, "/docker/" ID64);
    static const char sysd[] = "3:cpu:/a\n1:name=systemd:/user.slice\n";
    assert_int_equal(cn_cgroup_from_proc(sysd, strlen(sysd), out, sizeof(out)), 0);
    assert_string_equal(out, "/user.slice");
    static const char none[] = "3:cpu:/a\ngarbage\n::\n";
    assert_int_equal(cn_cgroup_from_proc(none, strlen(none), out, sizeof(out)), -ENOENT);
    static const char rel[] = "0::relative\n";
    assert_int_equal(cn_cgroup_from_proc(rel, strlen(rel), out, sizeof(out)), -EINVAL);
    static const char nul[] = "0::/a\0b\n";
    assert_int_equal(cn_cgroup_from_proc(nul, sizeof(nul) - 1, out, sizeof(out)), -EINVAL);
    assert_int_equal(cn_cgroup_from_proc(v2, strlen(v2), out, 5), -EINVAL);
    /* a v0 line that is not the unified one: "10::/x" is not "0::" */
    static const char ten[] = "10::/x\n";
    assert_int_equal(cn_cgroup_from_proc(ten, strlen(ten), out, sizeof(out)), -ENOENT);
    /* our own, read from /proc */
    assert_int_equal(cn_cgroup_read((int)getpid(), out, sizeof(out)), 0);
    assert_true(out[0] == '/');
    assert_int_equal(cn_cgroup_read(-5, out, sizeof(out)), -ENOENT);
}

/* cn_count_le_u64 over a plain array (with repeats) and over a field of structs. */
static void test_count_le(void **state)
{
    (void)state;
    const uint64_t a[] = {10, 20, 20, 30};
    assert_int_equal(cn_count_le_u64(NULL, 0, sizeof(uint64_t), 5), 0);
    assert_int_equal(cn_count_le_u64(a, 4, sizeof(a[0]), 9), 0);
    assert_int_equal(cn_count_le_u64(a, 4, sizeof(a[0]), 10), 1);
    assert_int_equal(cn_count_le_u64(a, 4, sizeof(a[0]), 20), 3);
    assert_int_equal(cn_count_le_u64(a, 4, sizeof(a[0]), 29), 3);
    assert_int_equal(cn_count_le_u64(a, 4, sizeof(a[0]), UINT64_MAX), 4);
    struct {
        uint32_t tag;
        uint64_t lo, hi;
    } r[] = {{1, 100, 200}, {2, 300, 400}, {3, 500, 600}};
    for (uint64_t k = 0; k < 700; k += 50) {
        size_t want = 0;
        while (want < 3 && r[want].lo <= k)
            want++;
        assert_int_equal(cn_count_le_u64(&r[0].lo, 3, sizeof(r[0]), k), want);
    }
    assert_int_equal(cn_count_le_u64(&r[0].hi, 3, sizeof(r[0]), 400), 2);
}

/* Growable arrays double, then grow by half from 65 536 elements; two columns of one
 * table grown from the same capacity get the same one whatever their element sizes, and
 * keep their contents. */
static void test_grow(void **state)
{
    (void)state;
    uint8_t *small = NULL;
    uint64_t *wide = NULL;
    size_t cs = 0, cw = 0, prev = 0;
    for (size_t need = 1; need <= 300000; need++) {
        size_t a = cs, b = cw;
        assert_int_equal(CN_RESERVE(small, a, need), 0);
        assert_int_equal(CN_RESERVE(wide, b, need), 0);
        assert_int_equal(a, b);
        assert_true(a >= need);
        if (a != prev && prev) /* grew: double below 65 536, by half from there */
            assert_int_equal(a, prev >= 65536 ? prev + prev / 2 : 2 * prev);
        small[need - 1] = (uint8_t)need;
        wide[need - 1] = need;
        cs = cw = prev = a;
    }
    for (size_t i = 0; i < 300000; i++)
        assert_true(small[i] == (uint8_t)(i + 1) && wide[i] == i + 1);
    size_t c = cs;
    assert_int_equal(CN_RESERVE(small, c, 10), 0); /* room already: unchanged */
    assert_int_equal(c, cs);
    free(small);
    free(wide);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grow),           cmocka_unit_test(test_buf_bounded),
        cmocka_unit_test(test_buf_space),      cmocka_unit_test(test_buf_front),
        cmocka_unit_test(test_framing),        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_messages),       cmocka_unit_test(test_duration),
        cmocka_unit_test(test_size),           cmocka_unit_test(test_base64),
        cmocka_unit_test(test_errno_name),     cmocka_unit_test(test_utf8_seq),
        cmocka_unit_test(test_utf8_cut),       cmocka_unit_test(test_proto_string),
        cmocka_unit_test(test_term_escape),    cmocka_unit_test(test_afile_content_mode),
        cmocka_unit_test(test_afile_failures), cmocka_unit_test(test_afile_short_write),
        cmocka_unit_test(test_deadline),       cmocka_unit_test(test_cgroup_paths),
        cmocka_unit_test(test_cgroup_proc),    cmocka_unit_test(test_count_le),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
