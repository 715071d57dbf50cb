/* fuzz_protocol.c — libFuzzer target for canopyd's protocol decoder: the bytes arrive as a
 * client would send them (split into lines by the bounded framing), each line is decoded
 * as a request, its QUERY fields are decoded into a cn_fmt_spec and encoded back, and an
 * error reply is built and encoded for it, as the daemon does. */
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cn_common.h"
#include "cn_fmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one_line(const char *line, size_t len)
{
    json_t *req = NULL;
    cn_err pe;
    cn_buf out;
    cn_buf_init(&out, 1 << 20);
    if (cn_proto_decode(line, len, &req, &pe) < 0) {
        json_t *e = cn_proto_error(NULL, pe.code, 2, "%s", pe.msg);
        if (e)
            cn_proto_encode(e, &out);
        json_decref(e);
        cn_buf_free(&out);
        return;
    }
    cn_fmt_spec q;
    cn_err err = {0};
    cn_fmt_spec_init(&q);
    if (cn_fmt_spec_from_json(req, &q, &err) == 0) {
        json_t *back = cn_proto_request("tree");
        if (back && cn_fmt_spec_to_json(&q, back) == 0) {
            cn_fmt_spec q2;
            cn_fmt_spec_init(&q2);
            cn_fmt_spec_from_json(back, &q2, &err); /* what we encode must decode */
            cn_fmt_spec_clear(&q2);
            cn_proto_encode(back, &out);
        }
        json_decref(back);
    }
    cn_fmt_spec_clear(&q);
    json_t *ok = cn_proto_ok(req);
    if (ok)
        cn_proto_encode(ok, &out);
    json_decref(ok);
    json_decref(req);
    cn_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cn_buf in;
    cn_buf_init(&in, 4096 + 64);
    size_t pos = 0;
    /* Feed in chunks of varying size, as recv() would. */
    while (pos < size) {
        size_t chunk = 1 + (data[pos] % 97);
        if (chunk > size - pos)
            chunk = size - pos;
        if (cn_buf_append(&in, data + pos, chunk) < 0)
            break; /* over the bound: the daemon answers too_large and closes */
        pos += chunk;
        for (;;) {
            char *line;
            size_t len;
            int r = cn_proto_next_line(&in, 4096, &line, &len);
            if (r <= 0) {
                if (r < 0)
                    pos = size;
                break;
            }
            one_line(line, len);
            cn_buf_consume(&in, len + 1);
        }
    }
    cn_buf_free(&in);
    return 0;
}
