/* textmaps.c — symbol tables from text: /proc/kallsyms and JIT perf maps.
 *
 * kallsyms: "ADDR TYPE NAME [MODULE]" per line; text symbols (t, T, w, W) are kept and
 * extend to the next symbol (kallsyms has no sizes), at most 1 MiB.
 * perf maps (/tmp/perf-PID.map, written by node --perf-basic-prof, the JVM's agents…):
 * "START SIZE NAME" in hex, NAME the rest of the line; when two entries start at the same
 * address the later line wins (code was replaced). Lines that do not parse are skipped;
 * the input is untrusted and bounded by the caller. A perf map is the target's file: it is
 * opened without following its links out of the target's root, refused on a file system
 * its user could make stall (FUSE), and read within a byte and time budget per load, the
 * rest on the next load, so one target cannot hold up symbolization for the others
 * (docs/security.md). */
#include "sym_fuzz.h"
#include "sym_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

/* Per load of a perf map: at most this many bytes, and no new chunk after this long. */
#define PERFMAP_LOAD_BYTES (4u << 20)
#define PERFMAP_CHUNK      (1u << 20)
#define PERFMAP_LOAD_NS    (50 * 1000000LL)
#define PERFMAP_TAIL       256u /* bytes before the end of what was parsed, hashed */

static int parse_hex(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    if (end - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    uint64_t v = 0;
    int digits = 0;
    while (s < end) {
        int c = (unsigned char)*s, d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            break;
        if (++digits > 16)
            return -EINVAL;
        v = v << 4 | (uint64_t)d;
        s++;
    }
    if (digits == 0)
        return -EINVAL;
    *p = s;
    *out = v;
    return 0;
}

static const char *skip_blanks(const char *s, const char *end)
{
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    return s;
}

int cn_sym__kallsyms_parse(cn_sym__table *t, const char *buf, size_t len)
{
    const char *p = buf, *end = buf + len;
    size_t nonzero = 0, total = 0;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        const char *s = p;
        p = eol + 1;
        uint64_t addr;
        if (parse_hex(&s, eol, &addr) < 0 || s >= eol || (*s != ' ' && *s != '\t'))
            continue;
        s = skip_blanks(s, eol);
        if (s >= eol)
            continue;
        char type = *s++;
        if (type != 't' && type != 'T' && type != 'w' && type != 'W')
            continue;
        s = skip_blanks(s, eol);
        const char *name = s;
        while (s < eol && *s != ' ' && *s != '\t' && *s != '\r')
            s++;
        if (s == name)
            continue;
        total++;
        if (addr == 0)
            continue; /* hidden by kptr_restrict */
        nonzero++;
        int rc = cn_sym__table_add(t, addr, 0, UINT64_MAX, name, (size_t)(s - name),
                                   type == 'T'                  ? CN_SYM__BIND_GLOBAL
                                   : type == 'W' || type == 'w' ? CN_SYM__BIND_WEAK
                                                                : CN_SYM__BIND_LOCAL);
        if (rc < 0)
            return rc;
    }
    t->section_bytes += len;
    if (total > 0 && nonzero == 0)
        return -EACCES; /* every address zeroed: not allowed to see them */
    return cn_sym__table_finish(t, 1u << 20, 0);
}

/* Adds the entries of buf's lines to t (not finished). */
static int perfmap_add(cn_sym__table *t, const char *buf, size_t len)
{
    const char *p = buf, *end = buf + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        const char *s = p;
        p = eol + 1;
        uint64_t start, size;
        if (parse_hex(&s, eol, &start) < 0 || s >= eol || (*s != ' ' && *s != '\t'))
            continue;
        s = skip_blanks(s, eol);
        if (parse_hex(&s, eol, &size) < 0 || s >= eol || (*s != ' ' && *s != '\t'))
            continue;
        s = skip_blanks(s, eol);
        const char *name_end = eol;
        while (name_end > s && (name_end[-1] == '\r' || name_end[-1] == ' '))
            name_end--;
        if (name_end == s || size == 0 || start + size < start)
            continue;
        int rc = cn_sym__table_add(t, start, size, UINT64_MAX, s, (size_t)(name_end - s),
                                   CN_SYM__BIND_GLOBAL);
        if (rc < 0)
            return rc;
    }
    t->section_bytes += len;
    return 0;
}

int cn_sym__perfmap_parse(cn_sym__table *t, const char *buf, size_t len)
{
    int rc = perfmap_add(t, buf, len);
    return rc < 0 ? rc : cn_sym__table_finish(t, 0, 1);
}

/* Copies prev's entries (already finished: sorted, aliases resolved) into t, in order,
 * so that lines appended later still win over them. */
static int perfmap_copy(cn_sym__table *t, const cn_sym__table *prev)
{
    for (size_t i = 0; i < prev->n; i++) {
        const cn_sym__entry *e = &prev->e[i];
        const char *name = prev->pool + e->name;
        int rc = cn_sym__table_add(t, e->start, e->size, UINT64_MAX, name, strlen(name),
                                   CN_SYM__BIND_GLOBAL);
        if (rc < 0)
            return rc;
    }
    t->section_bytes = prev->section_bytes;
    return 0;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Reads [from, to) of fd into a malloc'ed buffer (caller frees), in chunks, stopping early
 * once PERFMAP_LOAD_NS have passed: *len may be less than to - from. */
static int read_range(int fd, uint64_t from, uint64_t to, char **out, size_t *len)
{
    size_t want = (size_t)(to - from), got = 0;
    int64_t deadline = mono_ns() + PERFMAP_LOAD_NS;
    char *buf = malloc(want + 1);
    if (!buf)
        return -ENOMEM;
    while (got < want) {
        size_t n = want - got < PERFMAP_CHUNK ? want - got : PERFMAP_CHUNK;
        ssize_t r = pread(fd, buf + got, n, (off_t)(from + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = -errno;
            free(buf);
            return e;
        }
        if (r == 0)
            break; /* truncated meanwhile: what was read is all there is */
        got += (size_t)r;
        if (mono_ns() > deadline)
            break; /* a slow file: the rest at the next load */
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return 0;
}

int cn_sym__perfmap_open(cn_obj_mounts *m, const char *path, cn_obj_ident *got)
{
    /* The identity-checked open of objfile/ (cn_obj.h): no symlink on the way (inside a
     * container's root for /proc/PID/root/...), nothing on FUSE, and a FIFO or a device
     * at the map's path is refused before it is opened. */
    return cn_obj_open_in(m, path, 0, NULL, got);
}

/* The hash of the PERFMAP_TAIL bytes (fewer at the file's start) before offset end; 0 when
 * they cannot be read. */
static uint64_t tail_hash(int fd, uint64_t end)
{
    char b[PERFMAP_TAIL];
    size_t k = end < PERFMAP_TAIL ? (size_t)end : PERFMAP_TAIL;
    if (k == 0 || pread(fd, b, k, (off_t)(end - k)) != (ssize_t)k)
        return 0;
    return XXH3_64bits(b, k);
}

int cn_sym__perfmap_load(cn_sym__obj *o, const cn_sym__obj *prev, const char *path, uint32_t owner,
                         cn_obj_mounts *mounts)
{
    cn_obj_ident st; /* a regular file: cn_obj_open refuses anything else */
    char *buf = NULL;
    size_t len = 0;
    int rc;
    o->jit_file_size = -1;
    o->jit_mtime_ns = 0;
    int fd = cn_sym__perfmap_open(mounts, path, &st);
    if (fd < 0)
        return fd;
    o->jit_file_size = st.size;
    o->jit_mtime_ns = st.mtime_ns;
    o->jit_dev = st.dev;
    o->jit_ino = st.ino;
    if (st.uid != owner) { /* written by someone else than the target: not its names */
        rc = -EPERM;
        goto out;
    }
    uint64_t from = 0, to = (uint64_t)st.size;
    if (to > CN_SYM__MAX_TEXT_FILE)
        to = CN_SYM__MAX_TEXT_FILE;
    /* Appended to, not rewritten: the same file, at least as long, ending where it ended */
    bool grown = prev && prev->status == 0 && prev->jit_dev == o->jit_dev &&
                 prev->jit_ino == o->jit_ino && (uint64_t)prev->jit_size <= to &&
                 tail_hash(fd, (uint64_t)prev->jit_size) == prev->jit_tail;
    if (grown) {
        rc = perfmap_copy(&o->syms, &prev->syms);
        if (rc < 0)
            goto out;
        from = (uint64_t)prev->jit_size;
    }
    if (to - from > PERFMAP_LOAD_BYTES)
        to = from + PERFMAP_LOAD_BYTES;
    rc = read_range(fd, from, to, &buf, &len);
    if (rc < 0)
        goto out;
    /* Only complete lines: a line being written now is read once it is finished. */
    const char *nl = len ? memrchr(buf, '\n', len) : NULL;
    size_t whole = nl ? (size_t)(nl - buf) + 1 : 0;
    if (from + len < (uint64_t)st.size && (uint64_t)st.size <= CN_SYM__MAX_TEXT_FILE) {
        /* Stopped by the budget: the size recorded is what was read, so the next lookup
         * sees a different size and reads on (cache.c reloads on a size change). */
        o->jit_file_size = (int64_t)(from + len);
        if (!whole)
            whole = len; /* a "line" longer than a load's budget is no perf map line */
    }
    rc = perfmap_add(&o->syms, buf, whole);
    if (rc == 0)
        rc = cn_sym__table_finish(&o->syms, 0, 1);
    o->jit_size = (int64_t)(from + whole);
    o->jit_tail = tail_hash(fd, (uint64_t)o->jit_size);
out:
    free(buf);
    close(fd);
    return rc;
}

int cn_sym_fuzz_perfmap(const uint8_t *data, size_t size)
{
    cn_sym__table t = {0};
    int rc = cn_sym__perfmap_parse(&t, (const char *)data, size);
    if (rc == 0) {
        for (size_t i = 0; i < t.n; i++)
            (void)cn_sym__table_find(&t, t.e[i].start + t.e[i].size - 1);
        rc = (int)t.n;
    }
    cn_sym__table_clear(&t);
    return rc;
}

int cn_sym_fuzz_kallsyms(const uint8_t *data, size_t size)
{
    cn_sym__table t = {0};
    int rc = cn_sym__kallsyms_parse(&t, (const char *)data, size);
    if (rc == 0) {
        for (size_t i = 0; i < t.n; i++)
            (void)cn_sym__table_find(&t, t.e[i].start + t.e[i].size / 2);
        rc = (int)t.n;
    }
    cn_sym__table_clear(&t);
    return rc;
}
