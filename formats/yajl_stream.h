/* yajl_stream.h — the yajl streaming driver that formats/' two streaming JSON importers
 * (cpuprofile_parse.c for .cpuprofile, import_tree_json.c for canopy's JSON tree) embed
 * in their parser state. Private to formats/.
 *
 * It owns the yajl handle and the file name, and keeps the bookkeeping both parsers need
 * to report an error at the byte where it happened: the bytes fed before the current
 * chunk (base), the caller's cn_err of the current feed/finish call, and the first error
 * raised (rc; once set, feed and finish return it). Every message reads
 * "NAME: byte OFFSET: what" (import_internal.h's contract for the importers). The parser
 * keeps its own state machine and profile; its yajl callbacks get the parser as context.
 */
#ifndef CN_FMT_YAJL_STREAM_H
#define CN_FMT_YAJL_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_parse.h>

#include "cn_common.h"

typedef struct cn_fmt__jstream {
    char *name;    /* owned: the file name for messages */
    yajl_handle h; /* owned */
    cn_err *err;   /* of the current feed/finish call (not owned) */
    int rc;        /* the first error raised, 0 = none */
    uint64_t base; /* bytes fed before the current chunk */
} cn_fmt__jstream;

/* Sets up s (any previous content is ignored) with a copy of name ("(buffer)" when NULL)
 * and a yajl handle calling cb with ctx. Returns 0, or -ENOMEM with s safe to pass to
 * cn_fmt__jstream_fini. */
int cn_fmt__jstream_init(cn_fmt__jstream *s, const char *name, const yajl_callbacks *cb, void *ctx);
/* Frees what s owns; accepts a zeroed or half-initialised s. */
void cn_fmt__jstream_fini(cn_fmt__jstream *s);

/* The byte offset the parser has reached (for messages). */
uint64_t cn_fmt__jstream_offset(const cn_fmt__jstream *s);
/* Records an error "NAME: byte OFF: what" in s->err and s->rc (code, negative errno).
 * Returns 0, what a yajl callback returns to stop the parse. _fail reports at the
 * current offset. */
__attribute__((format(printf, 4, 5))) int
cn_fmt__jstream_fail_at(cn_fmt__jstream *s, int code, uint64_t off, const char *fmt, ...);
__attribute__((format(printf, 3, 4))) int cn_fmt__jstream_fail(cn_fmt__jstream *s, int code,
                                                               const char *fmt, ...);

/* Parses the next chunk. Returns 0, or the negative errno of the first error (err set). */
int cn_fmt__jstream_feed(cn_fmt__jstream *s, const void *data, size_t len, cn_err *err);
/* Ends the input (yajl's checks of a complete document). Returns 0, or the negative errno
 * of the first error (err set); the parser then checks its own state. */
int cn_fmt__jstream_finish(cn_fmt__jstream *s, cn_err *err);

#endif /* CN_FMT_YAJL_STREAM_H */
