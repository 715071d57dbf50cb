/* import.c — `canopy open`'s front door: read a profile file of any supported format.
 *
 * A source is a file descriptor or a memory buffer, optionally gzip-compressed (magic
 * 1f 8b; concatenated members are read in turn), decompressed by zlib in chunks with a
 * bound on the total (CN_FMT__IMPORT_MAX) so a gzip bomb fails cleanly. The first 64 KiB
 * of content decide the format (cn_fmt__looks_*, in this order: .canopy magic line, JSON
 * object with "unit" first = canopy's JSON tree, other JSON object = .cpuprofile, pprof,
 * perf script header, folded line). The two JSON formats are fed to their streaming
 * parsers chunk by chunk, never held whole; the other formats are read into one buffer
 * and parsed from it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "import_internal.h"

#define HEAD_BYTES  (64 * 1024)
#define CHUNK_BYTES (1024 * 1024)

typedef struct src {
    int fd;                   /* -1 for a memory source */
    const unsigned char *mem; /* memory source */
    size_t mem_len, mem_pos;
    bool gz, zs_ready, gz_done, eof;
    z_stream zs;
    unsigned char *in; /* raw read buffer (fd sources) */
    size_t total;      /* content bytes produced */
    const char *name;
    cn_err *err;
} src;

/* Reads raw bytes (compressed or not) into buf. Returns the count, 0 at EOF, or
 * negative errno with err set. */
static ssize_t raw_read(src *s, unsigned char *buf, size_t cap)
{
    if (s->fd < 0) {
        size_t n = s->mem_len - s->mem_pos < cap ? s->mem_len - s->mem_pos : cap;
        memcpy(buf, s->mem + s->mem_pos, n);
        s->mem_pos += n;
        return (ssize_t)n;
    }
    for (;;) {
        ssize_t n = read(s->fd, buf, cap);
        if (n >= 0)
            return n;
        if (errno != EINTR)
            return cn_err_set(s->err, -errno, "%s: read: %s", s->name, strerror(errno));
    }
}

/* Feeds zlib more compressed input. Returns 0 or negative errno. */
static int gz_refill(src *s)
{
    if (s->fd < 0) {
        s->zs.next_in = (unsigned char *)(s->mem + s->mem_pos);
        size_t n = s->mem_len - s->mem_pos;
        s->zs.avail_in = n > UINT32_MAX ? UINT32_MAX : (uInt)n;
        s->mem_pos += s->zs.avail_in;
        s->eof = s->mem_pos == s->mem_len;
        return 0;
    }
    ssize_t n = raw_read(s, s->in, CHUNK_BYTES);
    if (n < 0)
        return (int)n;
    s->eof = n == 0;
    s->zs.next_in = s->in;
    s->zs.avail_in = (uInt)n;
    return 0;
}

/* Decompresses into buf. Returns the count, 0 at the end, or negative errno. */
static ssize_t gz_read(src *s, unsigned char *buf, size_t cap)
{
    s->zs.next_out = buf;
    s->zs.avail_out = (uInt)(cap > UINT32_MAX ? UINT32_MAX : cap);
    while (s->zs.avail_out > 0 && !s->gz_done) {
        if (s->zs.avail_in == 0) {
            if (s->eof) {
                return cn_err_set(s->err, -EINVAL, "%s: truncated gzip data", s->name);
            }
            int rc = gz_refill(s);
            if (rc < 0)
                return rc;
            if (s->zs.avail_in == 0)
                continue; /* eof now set */
        }
        int z = inflate(&s->zs, Z_NO_FLUSH);
        if (z == Z_STREAM_END) {
            if (s->zs.avail_in == 0 && !s->eof) {
                int rc = gz_refill(s);
                if (rc < 0)
                    return rc;
            }
            if (s->zs.avail_in == 0) {
                s->gz_done = true;
            } else if (s->zs.avail_in >= 2 && s->zs.next_in[0] == 0x1f &&
                       s->zs.next_in[1] == 0x8b) {
                inflateReset(&s->zs); /* another gzip member follows */
            } else {
                return cn_err_set(s->err, -EINVAL, "%s: trailing garbage after gzip data", s->name);
            }
        } else if (z != Z_OK && z != Z_BUF_ERROR) {
            return cn_err_set(s->err, -EINVAL, "%s: corrupt gzip data (%s)", s->name,
                              s->zs.msg ? s->zs.msg : "inflate failed");
        }
    }
    return (ssize_t)(cap - s->zs.avail_out);
}

/* The next content bytes. Returns the count (0 at the end) or negative errno. */
static ssize_t src_read(src *s, void *buf, size_t cap)
{
    ssize_t n = s->gz ? gz_read(s, buf, cap) : raw_read(s, buf, cap);
    if (n > 0) {
        s->total += (size_t)n;
        if (s->total > CN_FMT__IMPORT_MAX)
            return cn_err_set(s->err, -EFBIG, "%s: more than %zu bytes of content", s->name,
                              CN_FMT__IMPORT_MAX);
    }
    return n;
}

/* Looks at the first raw bytes for the gzip magic and sets the source up. */
static int src_open(src *s)
{
    unsigned char magic[2];
    size_t have = 0;
    if (s->fd < 0) {
        have = s->mem_len < 2 ? s->mem_len : 2;
        memcpy(magic, s->mem, have);
    } else {
        s->in = malloc(CHUNK_BYTES);
        if (!s->in)
            return cn_err_set(s->err, -ENOMEM, "%s: out of memory", s->name);
        while (have < 2) {
            ssize_t n = raw_read(s, s->in + have, 2 - have);
            if (n < 0)
                return (int)n;
            if (n == 0)
                break;
            have += (size_t)n;
        }
        memcpy(magic, s->in, have);
    }
    s->gz = have == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (s->gz) {
        if (inflateInit2(&s->zs, 15 + 32) != Z_OK)
            return cn_err_set(s->err, -ENOMEM, "%s: out of memory", s->name);
        s->zs_ready = true;
        if (s->fd >= 0) { /* the two magic bytes are the first input */
            s->zs.next_in = s->in;
            s->zs.avail_in = (uInt)have;
        }
    } else if (s->fd >= 0) {
        s->mem = NULL;
    }
    return (int)have;
}

static void src_close(src *s)
{
    if (s->zs_ready)
        inflateEnd(&s->zs);
    free(s->in);
}

/* Parses a whole buffer of content, whichever format it is. */
static int dispatch(const char *data, size_t len, const char *name, cn_agg_profile **out,
                    cn_err *err)
{
    size_t head = len < HEAD_BYTES ? len : HEAD_BYTES;
    if (len == 0)
        return cn_err_set(err, -EINVAL, "%s: empty file", name);
    if (cn_agg_canopy_sniff(data, head))
        return cn_agg_canopy_read(data, len, name, out, err);
    if (cn_fmt__looks_tree_json(data, head))
        return cn_fmt__import_tree_json(data, len, name, out, err);
    if (cn_fmt__looks_json(data, head))
        return cn_fmt__import_cpuprofile(data, len, name, out, err);
    if (cn_fmt__is_pprof(data, len))
        return cn_fmt__import_pprof(data, len, name, out, err);
    if (cn_fmt__looks_perf_script(data, head))
        return cn_fmt__import_perf_script(data, len, name, out, err);
    if (cn_fmt__looks_folded(data, head))
        return cn_fmt__import_folded(data, len, name, out, err);
    return cn_err_set(err, -EINVAL,
                      "%s: not a profile canopy can read (expected .canopy, folded stacks, "
                      ".cpuprofile JSON, canopy's JSON tree, perf script output or pprof)",
                      name);
}

/* A streaming JSON parser: .cpuprofile or canopy's JSON tree. */
typedef struct json_parser {
    void *(*new_)(const char *name);
    int (*feed)(void *c, const void *data, size_t len, cn_err *err);
    int (*finish)(void *c, cn_agg_profile **out, cn_err *err);
    void *(*free_)(void *c);
} json_parser;

static void *cp_new(const char *name)
{
    return cn_fmt__cpuprof_new(name);
}
static int cp_feed(void *c, const void *data, size_t len, cn_err *err)
{
    return cn_fmt__cpuprof_feed(c, data, len, err);
}
static int cp_finish(void *c, cn_agg_profile **out, cn_err *err)
{
    return cn_fmt__cpuprof_finish(c, out, err);
}
static void *cp_free(void *c)
{
    return cn_fmt__cpuprof_free(c);
}
static void *tj_new(const char *name)
{
    return cn_fmt__treejson_new(name);
}
static int tj_feed(void *c, const void *data, size_t len, cn_err *err)
{
    return cn_fmt__treejson_feed(c, data, len, err);
}
static int tj_finish(void *c, cn_agg_profile **out, cn_err *err)
{
    return cn_fmt__treejson_finish(c, out, err);
}
static void *tj_free(void *c)
{
    return cn_fmt__treejson_free(c);
}

static const json_parser cpuprofile_parser = {cp_new, cp_feed, cp_finish, cp_free};
static const json_parser tree_json_parser = {tj_new, tj_feed, tj_finish, tj_free};

/* Streams the rest of a JSON source through parser jp; head holds its first bytes. */
static int stream_json(src *s, const json_parser *jp, const char *head, size_t head_len,
                       cn_agg_profile **out, cn_err *err)
{
    void *c = jp->new_(s->name);
    char *chunk = malloc(CHUNK_BYTES);
    int rc;
    if (!c || !chunk) {
        rc = cn_err_set(err, -ENOMEM, "%s: out of memory", s->name);
        goto out;
    }
    if ((rc = jp->feed(c, head, head_len, err)) < 0)
        goto out;
    for (;;) {
        ssize_t n = src_read(s, chunk, CHUNK_BYTES);
        if (n < 0) {
            rc = (int)n;
            goto out;
        }
        if (n == 0)
            break;
        if ((rc = jp->feed(c, chunk, (size_t)n, err)) < 0)
            goto out;
    }
    rc = jp->finish(c, out, err);
out:
    free(chunk);
    jp->free_(c);
    return rc;
}

/* Parses a whole buffer with parser jp: the one-shot form of the streaming parsers. */
static int parse_json(const json_parser *jp, const char *data, size_t len, const char *name,
                      cn_agg_profile **out, cn_err *err)
{
    void *c = jp->new_(name);
    if (!c)
        return cn_err_set(err, -ENOMEM, "%s: out of memory", name);
    int rc = jp->feed(c, data, len, err);
    if (rc == 0)
        rc = jp->finish(c, out, err);
    jp->free_(c);
    return rc;
}

int cn_fmt__import_cpuprofile(const char *data, size_t len, const char *name, cn_agg_profile **out,
                              cn_err *err)
{
    return parse_json(&cpuprofile_parser, data, len, name, out, err);
}

int cn_fmt__import_tree_json(const char *data, size_t len, const char *name, cn_agg_profile **out,
                             cn_err *err)
{
    return parse_json(&tree_json_parser, data, len, name, out, err);
}

/* Reads everything a source holds into one malloc'ed buffer (caller frees). */
static int read_all(src *s, char **buf, size_t *len, size_t *cap)
{
    for (;;) {
        if (*cap - *len < CHUNK_BYTES / 4 && cn_grow((void **)buf, cap, *len + CHUNK_BYTES, 1) < 0)
            return cn_err_set(s->err, -ENOMEM, "%s: out of memory", s->name);
        ssize_t n = src_read(s, *buf + *len, *cap - *len);
        if (n < 0)
            return (int)n;
        if (n == 0)
            return 0;
        *len += (size_t)n;
    }
}

/* The common path of both entry points. */
static int import_src(src *s, cn_agg_profile **out, cn_err *err)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = src_open(s);
    if (rc < 0)
        goto out;
    if (s->fd < 0 && !s->gz) { /* plain memory: parse in place */
        rc = dispatch((const char *)s->mem, s->mem_len, s->name, out, err);
        goto out;
    }
    size_t probed = (size_t)rc;
    if ((rc = cn_grow((void **)&buf, &cap, HEAD_BYTES, 1)) < 0)
        goto nomem;
    if (!s->gz) { /* the magic probe already read these bytes */
        memcpy(buf, s->in, probed);
        len = probed;
        s->total = len;
    }
    while (len < HEAD_BYTES) {
        ssize_t n = src_read(s, buf + len, HEAD_BYTES - len);
        if (n < 0) {
            rc = (int)n;
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len > 0 && cn_fmt__looks_json(buf, len) && !cn_agg_canopy_sniff(buf, len)) {
        rc = stream_json(s,
                         cn_fmt__looks_tree_json(buf, len) ? &tree_json_parser : &cpuprofile_parser,
                         buf, len, out, err);
        goto out;
    }
    if (len == HEAD_BYTES && (rc = read_all(s, &buf, &len, &cap)) < 0)
        goto out;
    rc = dispatch(buf, len, s->name, out, err);
    goto out;
nomem:
    rc = cn_err_set(err, -ENOMEM, "%s: out of memory", s->name);
out:
    free(buf);
    src_close(s);
    return rc;
}

int cn_fmt__for_each_line(const char *data, size_t len, const char *name, size_t *lineno,
                          int (*fn)(void *ctx, const char *line, size_t len), void *ctx,
                          cn_err *err)
{
    cn_lines it;
    const char *line;
    size_t line_len;
    int rc;

    cn_lines_init(&it, data, len);
    while (cn_lines_next(&it, &line, &line_len)) {
        *lineno = it.lineno;
        if (memchr(line, '\0', line_len))
            return cn_err_set(err, -EINVAL, "%s:%zu: NUL byte in a text line", name, *lineno);
        if ((rc = fn(ctx, line, line_len)) < 0)
            return rc;
    }
    return 0;
}

int cn_fmt_import_file(const char *path, cn_agg_profile **out, cn_err *err)
{
    cn_err local;
    struct stat st;
    if (!err)
        err = &local;
    if (!path || !out)
        return cn_err_set(err, -EINVAL, "import: bad arguments");
    src s = {.fd = open(path, O_RDONLY | O_CLOEXEC), .name = path, .err = err};
    if (s.fd < 0)
        return cn_err_set(err, -errno, "%s: %s", path, strerror(errno));
    if (fstat(s.fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(s.fd);
        return cn_err_set(err, -EISDIR, "%s: is a directory", path);
    }
    int rc = import_src(&s, out, err);
    close(s.fd);
    return rc;
}

int cn_fmt_import_buffer(const void *data, size_t len, const char *name, cn_agg_profile **out,
                         cn_err *err)
{
    cn_err local;
    if (!err)
        err = &local;
    if (!name)
        name = "(buffer)";
    if ((!data && len) || !out)
        return cn_err_set(err, -EINVAL, "import: bad arguments");
    src s = {
        .fd = -1, .mem = data ? data : (const void *)"", .mem_len = len, .name = name, .err = err};
    return import_src(&s, out, err);
}

size_t cn_fmt__json_skip_blank(const char *data, size_t len, size_t i)
{
    if (i == 0 && len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3))
        i = 3;
    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r'))
        i++;
    return i;
}
