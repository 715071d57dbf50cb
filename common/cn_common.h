/* cn_common.h — canopy's wire protocol and small shared utilities: the whole API of common/.
 *
 * The daemon (canopyd) and the client (canopy) talk over a Unix stream socket in
 * newline-delimited JSON (docs/protocol.md): each request is one JSON object on one line,
 * each response one JSON object on one line, in order. Bytes flow like this:
 *   socket → cn_buf (bounded) → cn_proto_next_line() → cn_proto_decode() → json_t request
 *   json_t response → cn_proto_encode() → cn_buf → socket
 * A request longer than the limit (CN_PROTO_MAX_REQUEST by default) without a newline is
 * an error the caller answers and then drops the connection; nothing here allocates
 * beyond the bounds a cn_buf was given. Messages are jansson objects; whoever builds or
 * decodes one owns the reference (json_decref).
 *
 * Utilities: a bounded dynamic byte buffer (cn_buf), the atomic file writer (cn_afile),
 * duration parsing ("30s", "5m", "250ms"), base64 (binary outputs travel in JSON strings),
 * errno names, and the two text rules: valid UTF-8 for every string sent, escaped controls
 * for text shown on a terminal. Nothing here logs, exits, or keeps global state.
 */
#ifndef CN_COMMON_H
#define CN_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Errors: every module returns a negative errno and, where a person needs to know more,
 * fills a cn_err the caller passed (it may be NULL). One convention for the whole tree.
 */

typedef struct cn_err {
    const char *code; /* a stable name for protocol errors ("bad_request" …; static string),
                         NULL when the producer gave none */
    char msg[512];    /* one line, no trailing newline */
} cn_err;

/* Formats a one-line message into err (when not NULL) and returns code, so that
 * `return cn_err_set(err, -EINVAL, "…")` both reports and fails. */
int cn_err_set(cn_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same with a va_list. A message longer than msg is cut on a character boundary. */
int cn_err_vset(cn_err *err, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* The same, also setting err->code to name (a static string). */
int cn_err_setc(cn_err *err, int code, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- growable arrays -------------------------------------------------------------- */

/* Makes room for `need` elements of size `elem` in *data (capacity *cap, doubling; by half
 * from 65 536 elements, so the capacity depends on the count only).
 * Returns 0 or -ENOMEM (then *data is unchanged). */
int cn_grow(void **data, size_t *cap, size_t need, size_t elem);

#define CN_RESERVE(arr, cap, need) cn_grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

typedef struct cn_u64map {
    uint64_t *keys;
    int32_t *vals; /* -1 = empty slot */
    size_t mask;   /* capacity - 1 (power of two), 0 when unallocated */
    size_t count;
} cn_u64map;

static inline uint64_t cn_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* Binary search: of n elements sorted by a u64 field (first: that field of element 0, or
 * NULL when n is 0; stride: the elements' size), how many have it <= key, which is the
 * index of the first greater one. */
static inline size_t cn_count_le_u64(const void *first, size_t n, size_t stride, uint64_t key)
{
    const char *b = first;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t v;
        memcpy(&v, b + mid * stride, sizeof(v));
        if (v <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static inline uint64_t cn_pair(int32_t a, int32_t b)
{
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

/* Returns the value for key, or -1. */
static inline int32_t cn_u64map_get(const cn_u64map *m, uint64_t key)
{
    if (!m->mask)
        return -1;
    size_t i = cn_mix64(key) & m->mask;
    for (;;) {
        int32_t v = m->vals[i];
        if (v < 0 || m->keys[i] == key)
            return v;
        i = (i + 1) & m->mask;
    }
}

/* Inserts (key, val >= 0); key must be absent. Returns 0 or -ENOMEM. */
int cn_u64map_put(cn_u64map *m, uint64_t key, int32_t val);
/* Pre-sizes for n entries. Returns 0 or -ENOMEM. */
int cn_u64map_reserve(cn_u64map *m, size_t n);
void cn_u64map_clear(cn_u64map *m); /* frees */

/* ---------------------------------------------------------------------------------------
 * Line iteration over a text buffer (the .canopy reader and the text importers)
 */

typedef struct cn_lines {
    const char *pos, *end;
    size_t lineno; /* 1-based number of the line last returned */
} cn_lines;

static inline void cn_lines_init(cn_lines *it, const char *data, size_t len)
{
    it->pos = data;
    it->end = data + len;
    it->lineno = 0;
}

/* The next line without its "\n" or "\r\n". Returns false at the end. */
static inline bool cn_lines_next(cn_lines *it, const char **line, size_t *len)
{
    if (it->pos >= it->end)
        return false;
    const char *nl = memchr(it->pos, '\n', (size_t)(it->end - it->pos));
    const char *stop = nl ? nl : it->end;
    *line = it->pos;
    *len = (size_t)(stop - it->pos);
    if (*len && (*line)[*len - 1] == '\r')
        (*len)--;
    it->pos = nl ? nl + 1 : it->end;
    it->lineno++;
    return true;
}

/* ---------------------------------------------------------------------------------------
 * Bounded dynamic buffer (after curl's dynbuf)
 */

/* Invariants (asserted in buf.c): data == NULL means len == off == cap == 0; otherwise
 * off + len < cap (the content and its NUL fit) and len <= limit. */
typedef struct cn_buf {
    char *data;   /* owned; always NUL-terminated after data[off + len] when data != NULL */
    size_t len;   /* bytes in use, starting at data[off] */
    size_t off;   /* consumed prefix (cn_buf_consume advances it; compacted lazily) */
    size_t cap;   /* allocated bytes */
    size_t limit; /* the buffer never holds more than this many bytes (0 = SIZE_MAX) */
    bool mapped;  /* data is a private mapping of cap bytes (cn_buf_adopt_map): unmapped */
} cn_buf;

/* An empty buffer that will refuse to grow past limit bytes (0 = no bound). */
void cn_buf_init(cn_buf *b, size_t limit);
/* Frees the storage; the buffer is empty and reusable (same limit) afterwards. */
void cn_buf_free(cn_buf *b);
/* Forgets the content, keeps the storage. */
void cn_buf_reset(cn_buf *b);
/* The unconsumed bytes (NUL-terminated) and their length. */
static inline char *cn_buf_ptr(const cn_buf *b)
{
    return b->data ? b->data + b->off : (char *)"";
}
static inline size_t cn_buf_len(const cn_buf *b)
{
    return b->len;
}
/* Appends n bytes. Returns 0, -EMSGSIZE past the limit, or -ENOMEM (then nothing changed). */
int cn_buf_append(cn_buf *b, const void *p, size_t n);
int cn_buf_appendf(cn_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Makes room for at least n more bytes and returns where they go (*room receives how many
 * fit before the limit or the allocation end, >= 1) — for recv() straight into the buffer;
 * then cn_buf_commit(n) the bytes written (n <= *room: committing more is a bug, asserted).
 * NULL with *room = 0 when the limit is reached,
 * NULL with errno ENOMEM on allocation failure. */
char *cn_buf_space(cn_buf *b, size_t n, size_t *room);
void cn_buf_commit(cn_buf *b, size_t n);
/* Drops the first n unconsumed bytes. */
void cn_buf_consume(cn_buf *b, size_t n);
/* Puts n bytes before the content: into the room in front when it is enough, else by
 * moving the content. 0, -EMSGSIZE or -ENOMEM (then nothing changed). */
int cn_buf_prepend(cn_buf *b, const void *p, size_t n);
/* Takes a private writable mapping (mmap MAP_PRIVATE, PROT_READ | PROT_WRITE) of cap bytes
 * as an empty buffer's storage, its content the len bytes at off with a NUL after them
 * (off + len < cap): a file's bytes used where they are mapped, without a copy, with up to
 * off bytes of room in front (cn_buf_prepend). Only the pages written are copied (by the
 * kernel); the storage is unmapped, not freed, and growing past it moves the content into
 * allocated storage. 0, or -EMSGSIZE past the limit (nothing taken: the caller unmaps). */
int cn_buf_adopt_map(cn_buf *b, char *map, size_t cap, size_t off, size_t len);
/* Hands the content to the caller as a malloc'ed NUL-terminated string (caller frees);
 * the buffer is empty afterwards. Returns NULL on ENOMEM (an empty buffer gives ""). */
char *cn_buf_steal(cn_buf *b, size_t *len);

/* ---------------------------------------------------------------------------------------
 * Protocol framing and messages (docs/protocol.md)
 */

/* Messages are jansson values. Only the type is named here, so that the modules that
 * never touch a message (aggregate, sampler, symbolizer, fleet) do not compile against
 * jansson; those that build or read messages include <jansson.h> themselves (the same
 * typedef: C11 allows repeating it). */
typedef struct json_t json_t;

#define CN_PROTO_VERSION 1
/* Default bound on one request line (bytes, newline included). */
#define CN_PROTO_MAX_REQUEST (64 * 1024)
/* Default bound on one response line as a client accepts it. */
#define CN_PROTO_MAX_RESPONSE (512u * 1024 * 1024)

/* Finds the next complete line in b. Returns 1 and sets *line and *len (the line without
 * its '\n', NUL-terminated in place, valid until the buffer changes; consume *len + 1
 * bytes when done; a '\r' before the '\n' stays, JSON treats it as whitespace), 0 when no
 * complete line is there yet, or -EMSGSIZE when max bytes have arrived without a newline
 * or the line is longer than max. */
int cn_proto_next_line(cn_buf *b, size_t max, char **line, size_t *len);

/* Decodes one request line: a JSON object with a string "cmd", an optional "v" that must
 * be an integer <= CN_PROTO_VERSION, an optional "id" (any JSON value, echoed in the reply).
 * Embedded NULs, nesting deeper than 32 levels and non-object messages are refused.
 * Returns 0 and *out (a new reference; caller json_decref's), or -EINVAL/-EPROTO with err
 * filled. */
int cn_proto_decode(const char *line, size_t len, json_t **out, cn_err *err);
/* The same for a response line (an object with a boolean "ok"; nesting up to 1500 levels:
 * trees are deep). */
int cn_proto_decode_response(const char *line, size_t len, json_t **out, cn_err *err);

/* Appends msg as one compact line + '\n' to out. Returns 0, -EMSGSIZE or -ENOMEM. */
int cn_proto_encode(const json_t *msg, cn_buf *out);

/* A new request {"v":1,"cmd":cmd}; add arguments with json_object_set_new. NULL on ENOMEM. */
json_t *cn_proto_request(const char *cmd);
/* A success response {"v":1,"ok":true,"id":<req id>} (id copied from req if present). */
json_t *cn_proto_ok(const json_t *req);
/* A failure {"v":1,"ok":false,"id":…,"error":{"code":code,"message":msg,"exit":exit}}.
 * exit is the client's exit status for it (1 runtime failure, 2 bad usage or input). */
json_t *cn_proto_error(const json_t *req, const char *code, int exit, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Typed getters for request arguments. Each returns 0 and writes *out, 1 when the key is
 * absent or null (then *out keeps its value: set the default first), or -EINVAL with err
 * naming the key when the type is wrong. */
int cn_proto_get_str(const json_t *o, const char *key, const char **out, cn_err *err);
int cn_proto_get_int(const json_t *o, const char *key, int64_t *out, cn_err *err);
int cn_proto_get_num(const json_t *o, const char *key, double *out, cn_err *err);
int cn_proto_get_bool(const json_t *o, const char *key, bool *out, cn_err *err);

/* ---------------------------------------------------------------------------------------
 * Text policies (common/text.c). Names come from binaries, /proc and other users' requests
 * and may hold any bytes. Two rules, each implemented once:
 *
 * UTF-8, for every string canopy sends (protocol replies, JSON): a byte that does not start
 * a valid UTF-8 sequence (a stray continuation byte, a cut or broken sequence, an overlong
 * form, a surrogate, a code point above U+10FFFF) becomes U+FFFD; a string cut to a bound
 * is cut on a character boundary (cn_utf8_cut). The protocol also turns NUL into U+FFFD
 * (decoders refuse \u0000). formats/' JSON writer follows the same rule (json_out.h).
 *
 * Terminal, for text shown to a person (tables, text trees, messages; docs/cli.md "Names in
 * text output"): the UTF-8 rule, and control characters spelled out so that a name cannot
 * drive the terminal: C0 controls and DEL as \x1b, C1 controls (U+0080..U+009F, valid
 * UTF-8) as \u0085. Everything else, a backslash included, is shown as it is. Lossless
 * formats (JSON, folded, pprof, .canopy) never apply it.
 */

/* Length (1..4) of the valid UTF-8 sequence at s, reading at most avail bytes, or 0 when
 * the bytes there are not one (or avail is 0). NUL counts as a valid 1-byte sequence. */
size_t cn_utf8_seq(const void *s, size_t avail);
/* Where to cut the n bytes at s so that at most max remain: n when n <= max, else the
 * largest m <= max that does not split a valid sequence (invalid bytes count as one
 * character each). */
size_t cn_utf8_cut(const char *s, size_t n, size_t max);
/* The n bytes at s under the UTF-8 rule (NUL too becomes U+FFFD), into dst, which has room
 * for 3 * n + 1 bytes (each input byte gives at most 3). Returns the length written; dst is
 * NUL-terminated. */
size_t cn_utf8_clean(char *dst, const char *s, size_t n);

/* A JSON string of the n bytes at s (NULL as "") under the UTF-8 rule: never fails on
 * content. New reference, or NULL on ENOMEM only. */
json_t *cn_proto_string(const char *s, size_t n);
/* The same for a NUL-terminated s. */
json_t *cn_proto_str(const char *s);

/* Length of the prefix of the n bytes at s that the terminal rule leaves unchanged (n when
 * the whole string is plain: writers test this before escaping). */
size_t cn_term_plain_len(const char *s, size_t n);
/* The n bytes at s (NULL as "") under the terminal rule into dst (cap bytes, NUL included;
 * cap 0 writes nothing). When the result does not fit it ends before the first character
 * or escape that would not fit whole. Returns the length written. An input byte gives at
 * most 6 output bytes. */
size_t cn_term_escape(char *dst, size_t cap, const char *s, size_t n);
/* cn_term_escape of the NUL-terminated s into buf; returns buf (for printf arguments). */
const char *cn_term_str(char *buf, size_t cap, const char *s);
/* The whole of the n bytes at s under the terminal rule, malloc'ed (caller frees); NULL on
 * ENOMEM. */
char *cn_term_dup(const char *s, size_t n);
/* Writes s (NULL as "") under the terminal rule to out. 0, -EIO or -ENOMEM. */
int cn_term_fputs(const char *s, FILE *out);
/* s in the terminal's form, in a buffer that lives until the end of the enclosing block:
 * for printf arguments, e.g. a cn_err message (512 bytes, 6 per byte at most, fit). */
#define CN_TERM_BUF    3072
#define CN_TERM_STR(s) cn_term_str((char[CN_TERM_BUF]){0}, CN_TERM_BUF, (s))

/* ---------------------------------------------------------------------------------------
 * Session counters shared across layers
 */

/* How the user-space unwinds of a live session's samples ended (docs/cli-live.md,
 * "Session counters": the `unwind_outcomes` object). Defined here, below both live/ (which
 * counts them) and formats/ (which shows them in the tree header and the JSON tree), so
 * that a session's counts reach the renderer as one value. */
typedef struct cn_unwind_outcomes {
    uint64_t complete;        /* reached the outermost frame (or the stack's end) */
    uint64_t truncated_stack; /* the copied stack was too small (--stack-size) */
    uint64_t no_cfi;          /* an address without unwind information, or unmapped */
    uint64_t read_fault;      /* a memory read outside the stack copy failed */
    uint64_t other;           /* deeper than the frame limit, another unwinder error */
} cn_unwind_outcomes;

/* Adds x's counts to sum's (canopyd's status sums its sessions'). */
void cn_unwind_outcomes_add(cn_unwind_outcomes *sum, const cn_unwind_outcomes *x);

/* ---------------------------------------------------------------------------------------
 * Atomic file replacement (file.c): the one way canopy writes a file that must survive a
 * crash whole (saved sessions, their .meta, the fleet spool). The content goes to
 * "<path>.XXXXXX.tmp" (created with O_EXCL, never following a symlink), which commit
 * fsyncs, renames over path and makes durable by fsyncing the directory. Directory scans
 * may delete files ending in ".tmp": they are what a crash left.
 */

typedef struct cn_afile {
    int fd;     /* the temporary file, -1 when none */
    char *tmp;  /* owned: its name */
    char *path; /* owned: the target */
} cn_afile;

/* Creates the temporary file for path with the given mode (as open()'s, before umask).
 * Returns 0, or a negative errno with err filled (then f holds nothing). */
int cn_afile_open(cn_afile *f, const char *path, unsigned mode, cn_err *err);
/* Writes all len bytes (retrying short writes and EINTR). 0 or -errno with err filled;
 * then abort. */
int cn_afile_write(cn_afile *f, const void *data, size_t len, cn_err *err);
/* A stdio stream whose writes go through cn_afile_write, for writers that take a FILE *;
 * fclose it (and check that) before the commit. NULL with errno on ENOMEM. */
FILE *cn_afile_stream(cn_afile *f);
/* fsync, close, rename over the target, fsync its directory. Returns 0 or a negative
 * errno with err filled; f is released either way (a failure before the rename removes
 * the temporary file and leaves the old target; -errno after it means the new content is
 * in place but the directory could not be synced). */
int cn_afile_commit(cn_afile *f, cn_err *err);
/* Closes and removes the temporary file, frees f. Accepts a released or zeroed f. */
void cn_afile_abort(cn_afile *f);
/* open + write + commit of one buffer. 0 or a negative errno with err filled. */
int cn_common_write_file_atomic(const char *path, unsigned mode, const void *data, size_t len,
                                cn_err *err);

/* ---------------------------------------------------------------------------------------
 * Utilities
 */

/* Parses a duration, the one syntax of the CLI, the protocol and canopyd's config
 * (docs/cli.md "Durations"): digits with at most one '.', no sign, exponent or spaces,
 * then ns, us, ms, s, m or min, h; no unit means seconds ("30s", "5m", "5min", "250ms",
 * "1.5", "2h"). Returns 0 and *ns, or -EINVAL (empty, bad number such as "1e2s", unknown
 * unit, overflow). */
int cn_common_parse_duration(const char *s, int64_t *ns);
/* Parses a size: a non-negative integer with an optional K, M, G suffix (binary: KiB…,
 * "KB"/"KiB" also accepted). Returns 0 and *bytes or -EINVAL. */
int cn_common_parse_size(const char *s, uint64_t *bytes);

/* Base64 (RFC 4648, with padding). Both return a malloc'ed result (caller frees) or NULL
 * (ENOMEM, or EINVAL for bad input to _decode). */
char *cn_common_base64_encode(const void *data, size_t len);
void *cn_common_base64_decode(const char *s, size_t slen, size_t *len);

/* Monotonic clock in nanoseconds. */
int64_t cn_common_now_ns(void);
/* The time on clock clk ns (< 0: 0) from now, normalized: the deadline of a timed wait
 * (CLOCK_MONOTONIC for a condition variable set to it, CLOCK_REALTIME for
 * pthread_timedjoin_np and default condition variables). */
struct timespec cn_common_deadline(clockid_t clk, int64_t ns);
/* "EPERM"-style name for a positive errno value ("E?" when unknown). */
const char *cn_common_errno_name(int err);

/* Gives the calling thread an alternate signal stack (sigaltstack(2)), so that a
 * fatal-signal handler installed with SA_ONSTACK (canopyd's crash report) still runs when
 * the thread's own stack overflowed. Each thread needs its own: a new thread does not
 * inherit one. Returns the stack, to hand to cn_common_altstack_free() before the thread
 * ends, or NULL when the thread already has one (AddressSanitizer gives every thread its
 * own; it is kept) or none could be mapped (the thread then runs without: a stack
 * overflow in it dies with the default action, unreported). */
void *cn_common_altstack_new(void);
/* Disables and unmaps a stack from cn_common_altstack_new() on the calling thread (the
 * one that made it). Accepts NULL. */
void cn_common_altstack_free(void *stack);

/* ---- cgroups and containers (cgroup.c) ------------------------------------------------
 * A process's cgroup path (/proc/PID/cgroup) and what it names: the container (docker,
 * containerd, CRI-O, podman), the Kubernetes pod and QoS class, the systemd unit. One
 * parser for the sampler, the engine's --group-by/--where and fleet's labels. */
#define CN_CGROUP_PATH_MAX 1024
typedef struct cn_cgroup_info {
    char container_id[65];  /* 64 lowercase hex digits, "" when the path names none */
    char runtime[16];       /* "docker", "containerd", "cri-o", "podman", or "" */
    char pod_uid[37];       /* Kubernetes pod UID with dashes, or "" */
    char k8s_qos[16];       /* "guaranteed", "burstable", "besteffort", or "" */
    char systemd_unit[128]; /* the innermost .service or .scope component, or "" */
} cn_cgroup_info;

/* The keys a cgroup path gives (--group-by, --where; fleet labels under label names). */
typedef enum cn_cgroup_key {
    CN_CGROUP_KEY_CONTAINER = 0,
    CN_CGROUP_KEY_CGROUP,
    CN_CGROUP_KEY_POD,
    CN_CGROUP_KEY_QOS,
    CN_CGROUP_KEY_SERVICE,
} cn_cgroup_key;
#define CN_CGROUP_N_KEYS 5

/* From /proc/PID/cgroup's text (len bytes, untrusted): the unified hierarchy's path
 * (line 0::PATH), else the perf_event controller's, else name=systemd's, copied into out.
 * Returns 0, -ENOENT (no such line), -EINVAL (a path that is empty, relative, has a NUL or
 * does not fit in size). */
int cn_cgroup_from_proc(const char *text, size_t len, char *out, size_t size);
/* The same read from /proc/PID/cgroup (4 KiB at most). Returns 0 or negative errno. */
int cn_cgroup_read(int pid, char *out, size_t size);
/* Fills *out from a cgroup path (NULL: all empty). Shapes not recognised leave fields empty. */
void cn_cgroup_identify(const char *path, cn_cgroup_info *out);
/* The value of key for a path and its identity ("" when none; never NULL). */
const char *cn_cgroup_key_value(const cn_cgroup_info *info, const char *path, cn_cgroup_key key);
const char *cn_cgroup_key_name(cn_cgroup_key key);   /* "container", "cgroup", "pod", ... */
const char *cn_cgroup_label_name(cn_cgroup_key key); /* "container_id", "cgroup", "pod_uid", ... */
/* Accepts either name. Returns 0 or -EINVAL. */
int cn_cgroup_key_parse(const char *name, cn_cgroup_key *out);
/* The mount point of the cgroup v2 hierarchy (/sys/fs/cgroup, or /sys/fs/cgroup/unified
 * on a hybrid machine), from /proc/self/mountinfo. 0, -ENOENT or negative errno. */
int cn_cgroup_v2_root(char *out, size_t size);
/* The cgroup of the container whose id starts with prefix (hex, 1..64 digits), found by
 * reading every /proc/PID/cgroup: the path (as /proc shows it, cut after the component
 * that names the container) into path, the whole id into id[65]. 0, -ENOENT (no such
 * container), -EEXIST (the prefix names two), -EINVAL (not hex), negative errno. */
int cn_cgroup_find_container(const char *prefix, char *path, size_t size, char *id);
/* Whether value matches a --where condition's want (a container id also by its prefix). */
bool cn_cgroup_value_match(cn_cgroup_key key, const char *value, const char *want);

/* ---------------------------------------------------------------------------------------
 * Documented options (opt.c)
 *
 * One table per parser: the parser matches argv against the table's rows (cn_opt_match),
 * and `--help`, the manual pages (man/mangen.c), the shell completion (`canopy
 * __complete`) and the tests that compare them with docs/cli.md read the same rows. A
 * table ends with a row whose lng is NULL. Adding an option is one row plus the parser's
 * case for its id.
 */

typedef struct cn_opt {
    const char *lng;  /* "--freq" (for canopyd.conf: the key, "retention") */
    const char *shrt; /* "-F", or NULL */
    const char *arg;  /* the value's placeholder ("HZ", "fp|dwarf|auto"); NULL: a flag */
    const char *dflt; /* the default as shown by --help and the manual; NULL: none */
    const char *help; /* what it does, one or two sentences */
    int id;           /* the parser's tag for this row */
    unsigned when;    /* the parser's flags that enable the row (0: always) */
} cn_opt;

/* Finds the row of tab (enabled by flags: row.when == 0 or row.when & flags) that
 * argv[*i] names: "--opt", "--opt=VALUE" or "-s" (a flag's "--opt=VALUE" does not match).
 * For an option with a value, *val is the inline value or argv[*i + 1] (then *i advances),
 * or NULL when it is missing; a flag sets *val to NULL. Returns the row or NULL. */
const cn_opt *cn_opt_match(const cn_opt *tab, unsigned flags, int argc, char **argv, int *i,
                           const char **val);
/* The row named lng (or shrt) in tab, whatever its flags, or NULL. */
const cn_opt *cn_opt_find(const cn_opt *tab, const char *name);
/* Prints the rows enabled by flags as aligned columns: "  -F, --freq HZ   help (default
 * X)", the help wrapped to width; rows whose name shadow (may be NULL) has too are left out
 * (a command's own option of the same name is the one its parser takes). */
void cn_opt_print(FILE *out, const cn_opt *tab, unsigned flags, int width, const cn_opt *shadow);
/* Edit distance between a and b: insertions, deletions, substitutions and adjacent
 * transpositions each count 1. */
size_t cn_text_distance(const char *a, const char *b);
/* The candidate nearest to word when close enough to be a typo (distance at most 2, and
 * less than half of word's length), or NULL. */
const char *cn_text_nearest(const char *word, const char *const *cands, size_t n);
/* The GNU build id of the running executable, as hex, into buf (size n); "unknown" when it
 * has none. Returns buf. */
const char *cn_common_build_id(char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* CN_COMMON_H */
