/* server.c — canopyd: the listening socket, clients, the protocol's commands, the session
 * store and its persistence in the state dir.
 *
 * Everything runs on the loop thread: a request is decoded, checked against the peer's
 * credentials (taken once with SO_PEERCRED at accept), executed and answered before the
 * next event, and sampling is pumped from the ring fds' readiness and from every tick, so
 * the rings (sized by the sampler to absorb far more than one query's duration) never
 * overflow while a query runs. One response is outstanding per client: the next request
 * is read only when the previous answer has been sent, which bounds every client's
 * memory to one request and one response. Sessions are written atomically as
 * STATE_DIR/ID.canopy when they stop, when their target exits, at each checkpoint and on
 * shutdown; at start every such file is loaded back as a `saved` session.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "d_internal.h"

#define TICK_MS             50
#define MAX_LOADED_SESSIONS 4096

typedef struct entry {
    cn_live_session *s;
    cn_d_server *srv;
    cn_d__watch **watches;
    int *fds; /* watches[i] polls fds[i] */
    size_t nwatch;
    int64_t last_checkpoint;
    bool finished_saved;    /* written after leaving RUNNING */
    uint64_t errors_logged; /* the session's allocation failures already reported */
} entry;

typedef struct client {
    cn_d__conn *c;
    cn_d__cred cred;
    struct client *next, *prev;
} client;

struct cn_d_server {
    cn_d_config cfg;
    char *socket_path, *state_dir, *system_group;
    int listen_fd;
    bool own_socket;
    int sig_fd;
    cn_d__loop *loop;
    cn_d__loop_ops ops;
    cn_live_symbolizer *sym;
    cn_d__watch *sym_watch, *sig_watch;
    entry **entries;
    size_t n_entries, cap_entries;
    client *clients;
    uint64_t next_id;
    int64_t start_ns;
    uint64_t evicted;
    uint64_t rate_samples;
    int64_t rate_t;
    double samples_per_s;
    uint64_t state_dir_bytes;
    int64_t shutdown_at; /* a shutdown was asked for: stop once replies are out (<= 1 s) */
};

/* ---- session store ------------------------------------------------------------------ */

static void entry_unwatch(entry *e)
{
    for (size_t i = 0; i < e->nwatch; i++)
        cn_d__loop_unwatch(e->srv->loop, e->watches[i]);
    free(e->watches);
    free(e->fds);
    e->watches = NULL;
    e->fds = NULL;
    e->nwatch = 0;
}

static void entry_free(entry *e)
{
    if (!e)
        return;
    entry_unwatch(e);
    cn_live_session_free(e->s);
    free(e);
}

static void session_path(cn_d_server *srv, const cn_live_session *s, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s.canopy", srv->state_dir, cn_live_session_id(s));
}

static int save_entry(cn_d_server *srv, entry *e)
{
    char path[4096];
    cn_err err = {0};
    session_path(srv, e->s, path, sizeof(path));
    cn_live_session_info info;
    int r = cn_live_session_save(e->s, path, &err);
    if (r < 0)
        fprintf(stderr, "canopyd: saving session %s: %s\n", cn_live_session_id(e->s), err.msg);
    e->last_checkpoint = cn_common_now_ns();
    /* Data the session lost to allocation failures: reported once per checkpoint. */
    cn_live_session_info_get(e->s, &info);
    if (info.errors > e->errors_logged) {
        fprintf(stderr,
                "canopyd: session %s: %" PRIu64 " frames or symbols lost to allocation "
                "failures\n",
                info.id, info.errors - e->errors_logged);
        e->errors_logged = info.errors;
    }
    return r;
}

static void remove_entry(cn_d_server *srv, size_t i)
{
    entry_free(srv->entries[i]);
    memmove(srv->entries + i, srv->entries + i + 1,
            (srv->n_entries - i - 1) * sizeof(*srv->entries));
    srv->n_entries--;
}

/* The state dir's size bound: delete the oldest sessions that no longer sample. */
static void enforce_state_dir(cn_d_server *srv)
{
    for (;;) {
        uint64_t total = 0;
        size_t oldest = SIZE_MAX;
        for (size_t i = 0; i < srv->n_entries; i++) {
            cn_live_session *s = srv->entries[i]->s;
            struct stat st;
            if (!cn_live_session_path(s) || stat(cn_live_session_path(s), &st) < 0)
                continue;
            total += (uint64_t)st.st_size;
            if (cn_live_session_state(s) != CN_LIVE_RUNNING &&
                (oldest == SIZE_MAX ||
                 cn_live_session_started(s) < cn_live_session_started(srv->entries[oldest]->s)))
                oldest = i;
        }
        srv->state_dir_bytes = total;
        if (total <= srv->cfg.state_dir_max || oldest == SIZE_MAX)
            return;
        cn_live_session *s = srv->entries[oldest]->s;
        fprintf(stderr, "canopyd: state dir over %" PRIu64 " bytes: deleting session %s\n",
                srv->cfg.state_dir_max, cn_live_session_id(s));
        unlink(cn_live_session_path(s));
        remove_entry(srv, oldest);
        srv->evicted++;
    }
}

static void pump_entry(entry *e);

static void on_ring(void *arg, int fd, uint32_t revents)
{
    entry *e = arg;
    pump_entry(e);
    if ((revents & (POLLHUP | POLLERR)) && cn_live_session_state(e->s) == CN_LIVE_RUNNING) {
        /* This CPU's (or thread's) events are gone: stop polling that fd. */
        for (size_t i = 0; i < e->nwatch; i++) {
            if (e->watches[i] && e->fds[i] == fd) {
                cn_d__loop_unwatch(e->srv->loop, e->watches[i]);
                e->watches[i] = NULL;
            }
        }
    }
}

static int entry_watch(cn_d_server *srv, entry *e)
{
    const int *fds;
    size_t n = cn_live_session_fds(e->s, &fds);
    e->watches = calloc(n ? n : 1, sizeof(*e->watches));
    e->fds = calloc(n ? n : 1, sizeof(*e->fds));
    if (!e->watches || !e->fds)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        e->fds[i] = fds[i];
        e->watches[i] = cn_d__loop_watch(srv->loop, fds[i], on_ring, e);
        if (!e->watches[i])
            return -ENOMEM;
        e->nwatch = i + 1;
    }
    return 0;
}

static void pump_entry(entry *e)
{
    if (cn_live_session_state(e->s) != CN_LIVE_RUNNING)
        return;
    int r = cn_live_session_pump(e->s);
    if (r < 0)
        fprintf(stderr, "canopyd: session %s: reading samples: %s\n", cn_live_session_id(e->s),
                strerror(-r));
    if (cn_live_session_state(e->s) != CN_LIVE_RUNNING) {
        /* Unwatch before anything opens an fd that could reuse the rings' numbers. */
        entry_unwatch(e);
    }
}

/* Saves sessions that left RUNNING, checkpoints running ones. */
static void store_tick(cn_d_server *srv)
{
    int64_t now = cn_common_now_ns();
    bool saved = false;
    for (size_t i = 0; i < srv->n_entries; i++) {
        entry *e = srv->entries[i];
        cn_live_session *s = e->s;
        if (cn_live_session_state(s) == CN_LIVE_RUNNING) {
            if (srv->cfg.checkpoint_ns > 0 && now - e->last_checkpoint >= srv->cfg.checkpoint_ns &&
                cn_live_session_dirty(s)) {
                save_entry(srv, e);
                saved = true;
            }
        } else if (cn_live_session_state(s) != CN_LIVE_SAVED && !e->finished_saved) {
            entry_unwatch(e);
            cn_live_session_symbolize(s);
            save_entry(srv, e);
            e->finished_saved = true;
            saved = true;
        } else if (cn_live_session_state(s) != CN_LIVE_SAVED && cn_live_session_dirty(s) &&
                   now - e->last_checkpoint >= 2000000000LL) {
            save_entry(srv, e); /* late symbol answers */
            saved = true;
        }
    }
    if (saved)
        enforce_state_dir(srv);
}

static entry *find_session(cn_d_server *srv, const cn_d__cred *cred, const char *key, pid_t pid)
{
    entry *best = NULL;
    for (size_t i = 0; i < srv->n_entries; i++) {
        entry *e = srv->entries[i];
        cn_live_session *s = e->s;
        if (cred->uid != 0 && cn_live_session_owner(s) != cred->uid)
            continue;
        if (key && (!strcmp(cn_live_session_id(s), key) ||
                    (cn_live_session_name(s) && !strcmp(cn_live_session_name(s), key))))
            best = e; /* the newest with that name */
        else if (!key && pid > 0 && cn_live_session_pid(s) == pid &&
                 cn_live_session_kind(s) != CN_LIVE_SYSTEM)
            best = e;
    }
    return best;
}

static size_t running_count(const cn_d_server *srv)
{
    size_t n = 0;
    for (size_t i = 0; i < srv->n_entries; i++)
        n += cn_live_session_state(srv->entries[i]->s) == CN_LIVE_RUNNING;
    return n;
}

static int add_entry(cn_d_server *srv, cn_live_session *s, entry **out)
{
    if (srv->n_entries == srv->cap_entries) {
        size_t cap = srv->cap_entries ? srv->cap_entries * 2 : 16;
        entry **a = realloc(srv->entries, cap * sizeof(*a));
        if (!a)
            return -ENOMEM;
        srv->entries = a;
        srv->cap_entries = cap;
    }
    entry *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->s = s;
    e->srv = srv;
    e->last_checkpoint = cn_common_now_ns();
    e->finished_saved = cn_live_session_state(s) == CN_LIVE_SAVED;
    srv->entries[srv->n_entries++] = e;
    *out = e;
    return 0;
}

static void load_state_dir(cn_d_server *srv)
{
    DIR *d = opendir(srv->state_dir);
    struct dirent *de;
    if (!d)
        return;
    while ((de = readdir(d)) && srv->n_entries < MAX_LOADED_SESSIONS) {
        size_t len = strlen(de->d_name);
        char path[4096];
        if (len > 4 && !strcmp(de->d_name + len - 4, ".tmp")) {
            /* An interrupted write: the previous complete file (if any) is still there. */
            snprintf(path, sizeof(path), "%s/%s", srv->state_dir, de->d_name);
            unlink(path);
            continue;
        }
        if (len < 8 || strcmp(de->d_name + len - 7, ".canopy"))
            continue;
        snprintf(path, sizeof(path), "%s/%s", srv->state_dir, de->d_name);
        cn_live_session *s = NULL;
        cn_err err = {0};
        entry *e;
        cn_agg_profile *prof = NULL;
        if (cn_fmt_import_file(path, &prof, &err) < 0 ||
            cn_live_session_load(prof, path, &s, &err) < 0) {
            fprintf(stderr, "canopyd: skipping %s: %s\n", path, err.msg);
            continue;
        }
        if (cn_live_session_id(s)[0] == 's') {
            uint64_t n = strtoull(cn_live_session_id(s) + 1, NULL, 10);
            if (n >= srv->next_id)
                srv->next_id = n + 1;
        }
        if (find_session(srv, &(cn_d__cred){.uid = 0}, cn_live_session_id(s), 0) ||
            add_entry(srv, s, &e) < 0) {
            cn_live_session_free(s);
            continue;
        }
    }
    closedir(d);
    /* Oldest first, as `sessions` lists them. */
    for (size_t i = 1; i < srv->n_entries; i++) {
        entry *e = srv->entries[i];
        size_t j = i;
        for (; j > 0 &&
               cn_live_session_started(srv->entries[j - 1]->s) > cn_live_session_started(e->s);
             j--)
            srv->entries[j] = srv->entries[j - 1];
        srv->entries[j] = e;
    }
}

/* ---- replies ----------------------------------------------------------------------- */

typedef struct reply {
    json_t *msg;     /* the response object */
    const char *key; /* optional raw JSON member spliced in (a rendered tree) */
    cn_buf raw;      /* that member's bytes, or the payload when payload is set */
    bool payload;    /* "raw": true: msg's line is followed by raw's bytes as they are */
} reply;

static json_t *err_reply(const json_t *req, int code, const cn_err *err)
{
    const char *name = "failed";
    int exit = 1;
    switch (code) {
    case -EPERM:
    case -EACCES:
        name = "permission_denied";
        break;
    case -ESRCH:
        name = "no_such_process";
        break;
    case -ENOENT:
        name = "unknown_function";
        exit = 2;
        break;
    case -EINVAL:
        name = "bad_query";
        exit = 2;
        break;
    default:
        break;
    }
    return cn_proto_error(req, name, exit, "%s", err->msg[0] ? err->msg : strerror(-code));
}

/* Replaces bytes that are not valid UTF-8 with '?' (names from ELF files may be
 * anything; JSON strings must be UTF-8). */
static void utf8_sanitize(char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len > 0 && i + len <= n && !(len == 2 && c < 0xc2);
        for (size_t k = 1; ok && k < len; k++)
            ok = ((unsigned char)s[i + k] >> 6) == 2;
        if (!ok) {
            s[i++] = '?';
            continue;
        }
        i += len;
    }
}

/* Appends src as a JSON string literal (quotes included) to out, in one pass: a text
 * rendering of a big tree is megabytes, and jansson's per-character dump is the slow part
 * of a round trip. src must be valid UTF-8 (utf8_sanitize). 0 or -ENOMEM. */
static int json_quote(cn_buf *out, const char *src, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t room;
    char *o = cn_buf_space(out, n + n / 8 + 16, &room);
    if (!o || room < n + 2)
        return -ENOMEM;
    size_t w = 0;
    o[w++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        if (room - w < 8) {
            cn_buf_commit(out, w);
            o = cn_buf_space(out, (n - i) + (n - i) / 8 + 16, &room);
            if (!o)
                return -ENOMEM;
            w = 0;
        }
        if (c >= 0x20 && c != '"' && c != '\\') {
            o[w++] = (char)c;
            continue;
        }
        o[w++] = '\\';
        switch (c) {
        case '"':
        case '\\':
            o[w++] = (char)c;
            break;
        case '\n':
            o[w++] = 'n';
            break;
        case '\t':
            o[w++] = 't';
            break;
        case '\r':
            o[w++] = 'r';
            break;
        default:
            o[w++] = 'u';
            o[w++] = '0';
            o[w++] = '0';
            o[w++] = hex[c >> 4];
            o[w++] = hex[c & 15];
            break;
        }
    }
    o[w++] = '"';
    cn_buf_commit(out, w);
    return 0;
}

/* Adds rendered bytes to a reply: with payload (the request's "raw": true) as they are,
 * after the line, announced by "raw_bytes"; otherwise JSON trees spliced raw, text as a
 * string (escaped here, spliced too), binary formats in base64. */
static int attach_output(reply *rp, cn_fmt_format fmt, const char *json_key, cn_buf *out,
                         bool payload)
{
    int r = 0;
    json_object_set_new(rp->msg, "format", json_string(cn_fmt_format_name(fmt)));
    if (payload) {
        r = json_object_set_new(rp->msg, "raw_bytes", json_integer((json_int_t)cn_buf_len(out)));
        rp->payload = true;
        rp->raw = *out;
        cn_buf_init(out, 0);
    } else if (fmt == CN_FMT_JSON && json_key) {
        rp->key = json_key;
        rp->raw = *out;
        cn_buf_init(out, 0);
    } else if (fmt == CN_FMT_PPROF || fmt == CN_FMT_CANOPY) {
        char *b = cn_common_base64_encode(cn_buf_ptr(out), cn_buf_len(out));
        r = b ? json_object_set_new(rp->msg, "output_base64", json_string(b)) : -ENOMEM;
        free(b);
    } else {
        utf8_sanitize(cn_buf_ptr(out), cn_buf_len(out));
        rp->key = "output";
        r = json_quote(&rp->raw, cn_buf_ptr(out), cn_buf_len(out));
    }
    return r < 0 ? -ENOMEM : 0;
}

static void send_reply(client *cl, reply *rp)
{
    cn_buf *out = &cl->c->out;
    int r;
    if (!rp->msg) {
        static const char oom[] =
            "{\"v\":1,\"ok\":false,\"error\":{\"code\":\"failed\",\"message\":\"out of "
            "memory\",\"exit\":1}}\n";
        cn_buf_append(out, oom, sizeof(oom) - 1);
    } else if (rp->payload) {
        /* The header line, then the bytes; all or nothing (a client reads raw_bytes). */
        size_t before = cn_buf_len(out);
        r = cn_proto_encode(rp->msg, out);
        if (r == 0)
            r = cn_buf_append(out, cn_buf_ptr(&rp->raw), cn_buf_len(&rp->raw));
        if (r < 0) {
            out->len = before;
            if (out->data)
                out->data[out->off + before] = '\0';
            json_t *e = cn_proto_error(rp->msg, "failed", 1, "response: %s", strerror(-r));
            if (e)
                cn_proto_encode(e, out);
            json_decref(e);
        }
    } else if (!rp->key) {
        r = cn_proto_encode(rp->msg, out);
        if (r < 0) {
            json_t *e = cn_proto_error(rp->msg, "failed", 1, "response: %s", strerror(-r));
            if (e)
                cn_proto_encode(e, out);
            json_decref(e);
        }
    } else {
        char *head = json_dumps(rp->msg, JSON_COMPACT);
        size_t hl = head ? strlen(head) : 0;
        if (!head || hl < 2) {
            free(head);
            cn_buf_append(out, "{\"v\":1,\"ok\":false}\n", 19);
        } else {
            char *raw = cn_buf_ptr(&rp->raw);
            size_t rl = cn_buf_len(&rp->raw);
            for (size_t i = 0; i < rl; i++)
                if (raw[i] == '\n' || raw[i] == '\r')
                    raw[i] = ' '; /* whitespace between tokens: JSON strings escape newlines */
            cn_buf_append(out, head, hl - 1);
            cn_buf_appendf(out, "%s\"%s\":", hl > 2 ? "," : "", rp->key);
            cn_buf_append(out, raw, rl);
            cn_buf_append(out, "}\n", 2);
            free(head);
        }
    }
    json_decref(rp->msg);
    cn_buf_free(&rp->raw);
    rp->msg = NULL;
    cn_d__conn_update(cl->c);
}

/* ---- commands ---------------------------------------------------------------------- */

typedef void (*cmd_fn)(cn_d_server *srv, client *cl, const json_t *req, reply *rp);

static void cmd_hello(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    rp->msg = cn_proto_ok(req);
    if (rp->msg)
        json_object_update_new(rp->msg, json_pack("{s:s, s:i, s:s, s:I}", "version", CANOPY_VERSION,
                                                  "protocol", CN_PROTO_VERSION, "event_loop",
                                                  cn_d__loop_backend(srv->loop), "uid",
                                                  (json_int_t)cl->cred.uid));
}

static void cmd_status(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    uint64_t lost = 0;
    size_t n = 0;
    for (size_t i = 0; i < srv->n_entries; i++) {
        cn_live_session *s = srv->entries[i]->s;
        if (cl->cred.uid != 0 && cn_live_session_owner(s) != cl->cred.uid)
            continue;
        cn_live_session_info info;
        cn_live_session_info_get(s, &info);
        lost += info.lost;
        n++;
    }
    rp->msg = cn_proto_ok(req);
    if (rp->msg)
        json_object_update_new(
            rp->msg,
            json_pack("{s:s, s:f, s:I, s:I, s:f, s:I, s:I, s:s, s:I, s:s, s:I, s:I}", "version",
                      CANOPY_VERSION, "uptime_s",
                      (double)(cn_common_now_ns() - srv->start_ns) / 1e9, "sessions", (json_int_t)n,
                      "running", (json_int_t)running_count(srv), "samples_per_s",
                      srv->samples_per_s, "lost", (json_int_t)lost, "rss_bytes",
                      (json_int_t)cn_d__rss(), "event_loop", cn_d__loop_backend(srv->loop),
                      "clients", (json_int_t)cn_d__loop_conn_count(srv->loop), "state_dir",
                      srv->state_dir, "state_dir_bytes", (json_int_t)srv->state_dir_bytes,
                      "evicted_sessions", (json_int_t)srv->evicted));
}

static void cmd_sessions(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < srv->n_entries; i++) {
        cn_live_session *s = srv->entries[i]->s;
        if (cl->cred.uid == 0 || cn_live_session_owner(s) == cl->cred.uid)
            json_array_append_new(a, cn_live_session_json(s));
    }
    rp->msg = cn_proto_ok(req);
    if (rp->msg)
        json_object_set_new(rp->msg, "sessions", a);
    else
        json_decref(a);
}

/* Parses the sampling fields of attach/run/system into o. 0 or -EINVAL (msg in err). */
static int sampling_opts(cn_d_server *srv, const json_t *req, cn_live_session_opts *o, cn_err *err)
{
    cn_err pe;
    const char *str;
    int64_t iv;
    bool b;
    int r;
#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((r = (call)) < 0) {                                                                    \
            cn_err_set(err, 0, "%s", pe.msg);                                                      \
            return r;                                                                              \
        }                                                                                          \
    } while (0)
    str = NULL;
    CHECK(cn_proto_get_str(req, "name", &str, &pe));
    if (str && (strlen(str) > 128 || !*str)) {
        cn_err_set(err, 0, "\"name\" must have 1 to 128 bytes");
        return -EINVAL;
    }
    o->name = str;
    str = NULL;
    CHECK(cn_proto_get_str(req, "event", &str, &pe));
    if (str && strlen(str) > 64) {
        cn_err_set(err, 0, "\"event\" is too long");
        return -EINVAL;
    }
    o->event = str;
    iv = o->freq;
    CHECK(cn_proto_get_int(req, "freq", &iv, &pe));
    if (iv < 1 || iv > 100000) {
        cn_err_set(err, 0, "\"freq\" must be between 1 and 100000 Hz");
        return -EINVAL;
    }
    o->freq = (uint32_t)iv;
    str = NULL;
    CHECK(cn_proto_get_str(req, "unwind", &str, &pe));
    if (str && cn_smp_unwind_parse(str, &o->unwind) < 0) {
        cn_err_set(err, 0, "unknown unwind mode '%s' (fp, dwarf, auto)", str);
        return -EINVAL;
    }
    iv = 0;
    CHECK(cn_proto_get_int(req, "stack_size", &iv, &pe));
    if (iv < 0 || iv > 65528) {
        cn_err_set(err, 0, "\"stack_size\" must be between 0 and 65528");
        return -EINVAL;
    }
    o->stack_size = (uint32_t)iv;
    b = true;
    CHECK(cn_proto_get_bool(req, "kernel", &b, &pe));
    o->no_kernel = !b;
    str = NULL;
    CHECK(cn_proto_get_str(req, "duration", &str, &pe));
    if (str && cn_common_parse_duration(str, &o->duration_ns) < 0) {
        cn_err_set(err, 0, "bad duration '%s'", str);
        return -EINVAL;
    }
    o->retention_ns = srv->cfg.retention_ns;
    str = NULL;
    CHECK(cn_proto_get_str(req, "retention", &str, &pe));
    if (str && (cn_common_parse_duration(str, &o->retention_ns) < 0 || o->retention_ns == 0)) {
        cn_err_set(err, 0, "bad retention '%s'", str);
        return -EINVAL;
    }
#undef CHECK
    return 0;
}

static void start_session(cn_d_server *srv, client *cl, const json_t *req, reply *rp,
                          cn_live_kind kind)
{
    cn_live_session_opts o;
    cn_err err = {0};
    cn_err pe;
    char id[32];
    int64_t pid = 0;
    int r;
    cn_live_session_opts_init(&o);
    o.kind = kind;
    o.freq = kind == CN_LIVE_RUN ? 999 : 99;
    o.owner = cl->cred.uid;
    o.max_memory = srv->cfg.session_memory;
    if (kind != CN_LIVE_SYSTEM) {
        r = cn_proto_get_int(req, "pid", &pid, &pe);
        if (r != 0 || pid <= 0 || pid > INT32_MAX) {
            rp->msg =
                cn_proto_error(req, "bad_request", 2, "\"pid\" (a positive integer) is required");
            return;
        }
        o.pid = (pid_t)pid;
    }
    if ((r = sampling_opts(srv, req, &o, &err)) < 0) {
        rp->msg = cn_proto_error(req, "bad_request", 2, "%s", err.msg);
        return;
    }
    /* Access control first: a denied request changes nothing. */
    r = kind == CN_LIVE_SYSTEM ? cn_d__may_system(&cl->cred, srv->system_group, &err)
                               : cn_d__may_attach(&cl->cred, o.pid, &err);
    if (r < 0) {
        rp->msg = err_reply(req, r, &err);
        return;
    }
    if (running_count(srv) >= srv->cfg.max_sessions || srv->n_entries >= MAX_LOADED_SESSIONS) {
        rp->msg = cn_proto_error(req, "limit", 1, "too many sessions (limit %u running)",
                                 srv->cfg.max_sessions);
        return;
    }
    if (o.name && find_session(srv, &cl->cred, o.name, 0)) {
        entry *dup = find_session(srv, &cl->cred, o.name, 0);
        if (cn_live_session_state(dup->s) == CN_LIVE_RUNNING) {
            rp->msg = cn_proto_error(req, "bad_request", 2,
                                     "a running session is already named '%s'", o.name);
            return;
        }
    }
    snprintf(id, sizeof(id), "s%" PRIu64, srv->next_id);
    o.id = id;
    cn_live_session *s = NULL;
    entry *e = NULL;
    r = cn_live_session_new(&o, srv->sym, &s, &err);
    if (r < 0) {
        if (r == -ENOENT)
            r = -EINVAL; /* an unknown event is bad input */
        rp->msg = err_reply(req, r, &err);
        return;
    }
    srv->next_id++;
    if (add_entry(srv, s, &e) < 0 || entry_watch(srv, e) < 0) {
        if (e) {
            srv->n_entries--;
            entry_free(e);
        } else {
            cn_live_session_free(s);
        }
        rp->msg = cn_proto_error(req, "failed", 1, "out of memory");
        return;
    }
    rp->msg = cn_proto_ok(req);
    if (rp->msg)
        json_object_set_new(rp->msg, "session", cn_live_session_json(s));
}

static void cmd_attach(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    start_session(srv, cl, req, rp, CN_LIVE_ATTACH);
}

static void cmd_run(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    start_session(srv, cl, req, rp, CN_LIVE_RUN);
}

static void cmd_system(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    start_session(srv, cl, req, rp, CN_LIVE_SYSTEM);
}

/* The session a request names ("session" or "pid"), or NULL with rp->msg set. */
static entry *req_session(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    cn_err pe;
    const char *key = NULL;
    int64_t pid = 0;
    if (cn_proto_get_str(req, "session", &key, &pe) < 0 ||
        cn_proto_get_int(req, "pid", &pid, &pe) < 0) {
        rp->msg = cn_proto_error(req, "bad_request", 2, "%s", pe.msg);
        return NULL;
    }
    if (!key && pid <= 0) {
        rp->msg = cn_proto_error(req, "bad_request", 2, "\"session\" or \"pid\" is required");
        return NULL;
    }
    entry *e = find_session(srv, &cl->cred, key, (pid_t)pid);
    if (!e) {
        if (key)
            rp->msg = cn_proto_error(req, "unknown_session", 1, "unknown session '%s'", key);
        else
            rp->msg = cn_proto_error(req, "unknown_session", 1, "no session for pid %" PRId64, pid);
        return NULL;
    }
    pump_entry(e); /* the freshest data */
    return e;
}

static void render_cmd(cn_d_server *srv, client *cl, const json_t *req, reply *rp,
                       cn_fmt_format def, bool timeline)
{
    cn_fmt_spec q;
    cn_err err = {0};
    cn_err pe;
    cn_buf out;
    bool payload = false;
    entry *e = req_session(srv, cl, req, rp);
    if (!e)
        return;
    cn_fmt_spec_init(&q);
    q.format = def;
    q.timeline = timeline;
    cn_buf_init(&out, 0);
    if (cn_proto_get_bool(req, "raw", &payload, &pe) < 0) {
        rp->msg = cn_proto_error(req, pe.code, 2, "%s", pe.msg);
        goto out;
    }
    int r = cn_fmt_spec_from_json(req, &q, &err);
    if (r < 0) {
        rp->msg = r == -ENOMEM ? NULL : cn_proto_error(req, "bad_query", 2, "%s", err.msg);
        goto out;
    }
    r = cn_d_render(e->s, &q, &out, &err);
    if (r < 0) {
        rp->msg = err_reply(req, r, &err);
        goto out;
    }
    rp->msg = cn_proto_ok(req);
    if (rp->msg && attach_output(rp, q.format, timeline ? "timeline" : "tree", &out, payload) < 0) {
        json_decref(rp->msg);
        rp->msg = NULL;
    }
out:
    cn_buf_free(&out);
    cn_fmt_spec_clear(&q);
}

static void cmd_tree(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    render_cmd(srv, cl, req, rp, CN_FMT_JSON, false);
}

static void cmd_save(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    render_cmd(srv, cl, req, rp, CN_FMT_CANOPY, false);
}

static void cmd_timeline(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    render_cmd(srv, cl, req, rp, CN_FMT_JSON, true);
}

static void cmd_lines(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    cn_fmt_spec q;
    cn_err err = {0};
    cn_err pe;
    const char *func = NULL;
    int code = 0;
    entry *e = req_session(srv, cl, req, rp);
    if (!e)
        return;
    if (cn_proto_get_str(req, "function", &func, &pe) != 0 || !func) {
        rp->msg = cn_proto_error(req, "bad_request", 2, "\"function\" (a string) is required");
        return;
    }
    cn_fmt_spec_init(&q);
    int r = cn_fmt_spec_from_json(req, &q, &err);
    if (r < 0) {
        rp->msg = cn_proto_error(req, "bad_query", 2, "%s", err.msg);
    } else {
        json_t *l = cn_d_lines_json(e->s, &q, func, &code, &err);
        if (!l) {
            rp->msg = err_reply(req, code, &err);
        } else if ((rp->msg = cn_proto_ok(req))) {
            json_object_set_new(rp->msg, "lines", l);
        } else {
            json_decref(l);
        }
    }
    cn_fmt_spec_clear(&q);
}

static void cmd_stop(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    entry *e = req_session(srv, cl, req, rp);
    if (!e)
        return;
    if (cn_live_session_state(e->s) == CN_LIVE_RUNNING) {
        entry_unwatch(e);
        cn_live_session_stop(e->s);
    }
    if (cn_live_session_state(e->s) != CN_LIVE_SAVED && !e->finished_saved) {
        cn_live_session_symbolize(e->s);
        save_entry(srv, e);
        e->finished_saved = true;
        enforce_state_dir(srv);
    }
    rp->msg = cn_proto_ok(req);
    if (rp->msg)
        json_object_set_new(rp->msg, "session", cn_live_session_json(e->s));
}

static void cmd_rm(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    entry *e = req_session(srv, cl, req, rp);
    if (!e)
        return;
    char path[4096];
    char *id = strdup(cn_live_session_id(e->s));
    session_path(srv, e->s, path, sizeof(path));
    unlink(path);
    for (size_t i = 0; i < srv->n_entries; i++) {
        if (srv->entries[i] == e) {
            remove_entry(srv, i);
            break;
        }
    }
    rp->msg = cn_proto_ok(req);
    if (rp->msg && id)
        json_object_set_new(rp->msg, "removed", json_string(id));
    free(id);
}

static void cmd_shutdown(cn_d_server *srv, client *cl, const json_t *req, reply *rp)
{
    if (cl->cred.uid != 0 && cl->cred.uid != getuid()) {
        rp->msg = cn_proto_error(req, "permission_denied", 1,
                                 "permission denied: only root (or the daemon's user) may shut "
                                 "canopyd down");
        return;
    }
    rp->msg = cn_proto_ok(req);
    cn_d_server_shutdown(srv);
}

static const struct {
    const char *name;
    cmd_fn fn;
} commands[] = {
    {"hello", cmd_hello},   {"version", cmd_hello},
    {"status", cmd_status}, {"sessions", cmd_sessions},
    {"attach", cmd_attach}, {"run", cmd_run},
    {"system", cmd_system}, {"tree", cmd_tree},
    {"save", cmd_save},     {"timeline", cmd_timeline},
    {"lines", cmd_lines},   {"stop", cmd_stop},
    {"rm", cmd_rm},         {"shutdown", cmd_shutdown},
};

static void handle_line(cn_d_server *srv, client *cl, const char *line, size_t len)
{
    reply rp = {0};
    cn_err pe = {0};
    json_t *req = NULL;
    cn_buf_init(&rp.raw, 0);
    if (cn_proto_decode(line, len, &req, &pe) < 0) {
        rp.msg = cn_proto_error(NULL, pe.code, 2, "%s", pe.msg);
    } else {
        const char *cmd = json_string_value(json_object_get(req, "cmd"));
        size_t i = 0;
        for (; i < sizeof(commands) / sizeof(commands[0]); i++) {
            if (!strcmp(cmd, commands[i].name)) {
                commands[i].fn(srv, cl, req, &rp);
                break;
            }
        }
        if (i == sizeof(commands) / sizeof(commands[0]))
            rp.msg = cn_proto_error(req, "unknown_command", 2, "unknown command '%.64s'", cmd);
    }
    send_reply(cl, &rp);
    json_decref(req);
}

/* ---- connections ------------------------------------------------------------------- */

static int on_accept(void *ctx, cn_d__conn *c)
{
    cn_d_server *srv = ctx;
    struct ucred uc;
    socklen_t len = sizeof(uc);
    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
        return -errno;
    if (cn_d__loop_conn_count(srv->loop) > srv->cfg.max_clients) {
        json_t *e =
            cn_proto_error(NULL, "busy", 1, "too many clients (limit %u)", srv->cfg.max_clients);
        if (e)
            cn_proto_encode(e, &c->out);
        json_decref(e);
        return -EBUSY;
    }
    client *cl = calloc(1, sizeof(*cl));
    if (!cl)
        return -ENOMEM;
    cl->c = c;
    cl->cred = (cn_d__cred){.pid = uc.pid, .uid = uc.uid, .gid = uc.gid};
    c->in.limit = srv->cfg.max_request + 16384;
    c->user = cl;
    cl->next = srv->clients;
    if (srv->clients)
        srv->clients->prev = cl;
    srv->clients = cl;
    return 0;
}

/* Handles complete lines while no answer is waiting to be sent. */
static void on_data(void *ctx, cn_d__conn *c)
{
    cn_d_server *srv = ctx;
    client *cl = c->user;
    if (!cl)
        return;
    while (!c->closing && cn_buf_len(&c->out) == 0 && cn_buf_len(&c->sending) == 0) {
        char *line;
        size_t len;
        int r = cn_proto_next_line(&c->in, srv->cfg.max_request, &line, &len);
        if (r == 0)
            break;
        if (r < 0) {
            reply rp = {0};
            cn_buf_init(&rp.raw, 0);
            rp.msg = cn_proto_error(NULL, "too_large", 2, "request larger than %zu bytes",
                                    srv->cfg.max_request);
            send_reply(cl, &rp);
            cn_d__conn_close(c, true);
            return;
        }
        bool blank = strspn(line, " \t\r") == len;
        if (!blank)
            handle_line(srv, cl, line, len);
        cn_buf_consume(&c->in, len + 1);
    }
    /* A partial request must complete within the client timeout. */
    if (cn_buf_len(&c->in) > 0 && c->deadline_ns == 0)
        c->deadline_ns = cn_common_now_ns() + srv->cfg.client_timeout_ns;
    else if (cn_buf_len(&c->in) == 0)
        c->deadline_ns = 0;
    c->want_read = cn_buf_len(&c->out) == 0 && cn_buf_len(&c->sending) == 0;
    if (c->eof && !c->closing)
        cn_d__conn_close(c, false);
    else
        cn_d__conn_update(c);
}

static void on_sent(void *ctx, cn_d__conn *c)
{
    c->want_read = true;
    on_data(ctx, c);
}

static void on_closed(void *ctx, cn_d__conn *c)
{
    cn_d_server *srv = ctx;
    client *cl = c->user;
    if (!cl)
        return;
    if (cl->prev)
        cl->prev->next = cl->next;
    else
        srv->clients = cl->next;
    if (cl->next)
        cl->next->prev = cl->prev;
    free(cl);
    c->user = NULL;
}

/* True once every client's pending output has been sent. */
static bool outputs_flushed(const cn_d_server *srv)
{
    for (const client *cl = srv->clients; cl; cl = cl->next)
        if (!cl->c->eof && (cn_buf_len(&cl->c->out) || cn_buf_len(&cl->c->sending)))
            return false;
    return true;
}

static void on_tick(void *ctx)
{
    cn_d_server *srv = ctx;
    int64_t now = cn_common_now_ns();
    if (srv->shutdown_at && (outputs_flushed(srv) || now - srv->shutdown_at > 1000000000LL)) {
        cn_d__loop_stop(srv->loop);
        return;
    }
    for (size_t i = 0; i < srv->n_entries; i++)
        pump_entry(srv->entries[i]);
    if (srv->sym)
        cn_live_symbolizer_dispatch(srv->sym);
    store_tick(srv);
    for (client *cl = srv->clients; cl; cl = cl->next) {
        cn_d__conn *c = cl->c;
        if (!c->closing && c->deadline_ns && now > c->deadline_ns)
            cn_d__conn_close(c, false); /* a stalled half-sent request */
    }
    if (now - srv->rate_t >= 1000000000LL) {
        uint64_t total = 0;
        for (size_t i = 0; i < srv->n_entries; i++)
            if (cn_live_session_state(srv->entries[i]->s) == CN_LIVE_RUNNING)
                total += cn_live_session_samples(srv->entries[i]->s);
        if (srv->rate_t)
            srv->samples_per_s = total >= srv->rate_samples ? (double)(total - srv->rate_samples) *
                                                                  1e9 / (double)(now - srv->rate_t)
                                                            : 0;
        srv->rate_samples = total;
        srv->rate_t = now;
    }
}

static void on_symbols(void *arg, int fd, uint32_t revents)
{
    cn_d_server *srv = arg;
    cn_live_symbolizer_dispatch(srv->sym);
}

static void on_signal(void *arg, int fd, uint32_t revents)
{
    cn_d_server *srv = arg;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
            cn_d_server_shutdown(srv);
    }
}

/* ---- setup ------------------------------------------------------------------------- */

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[4096];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static char *default_path(bool socket)
{
    char buf[4096];
    const char *x;
    if (getuid() == 0)
        return strdup(socket ? "/run/canopy/canopy.sock" : "/var/lib/canopy");
    if (socket) {
        x = getenv("XDG_RUNTIME_DIR");
        snprintf(buf, sizeof(buf), "%s/canopy.sock", x && *x ? x : "/tmp");
    } else if ((x = getenv("XDG_STATE_HOME")) && *x) {
        snprintf(buf, sizeof(buf), "%s/canopy", x);
    } else {
        x = getenv("HOME");
        snprintf(buf, sizeof(buf), "%s/.local/state/canopy", x && *x ? x : "/tmp");
    }
    return strdup(buf);
}

static int bind_socket(cn_d_server *srv, cn_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int r;
    if (strlen(srv->socket_path) >= sizeof(sa.sun_path)) {
        cn_err_set(err, 0, "socket path too long: %s", srv->socket_path);
        return -ENAMETOOLONG;
    }
    strcpy(sa.sun_path, srv->socket_path);
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", srv->socket_path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        mkdir_p(dir, 0755);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* A live daemon on that path wins; a stale socket file is replaced. */
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        close(fd);
        cn_err_set(err, 0, "another canopyd is already listening on %s", srv->socket_path);
        return -EADDRINUSE;
    }
    close(fd);
    unlink(srv->socket_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        chmod(srv->socket_path, srv->cfg.socket_mode) < 0 || listen(fd, 128) < 0) {
        r = -errno;
        cn_err_set(err, 0, "%s: %s", srv->socket_path, strerror(errno));
        close(fd);
        return r;
    }
    srv->listen_fd = fd;
    srv->own_socket = true;
    return 0;
}

/* Each session holds a ring fd per CPU (and per thread for a PID target): raise the soft
 * fd limit to the hard one, as perf does. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int setup_signals(cn_d_server *srv)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -errno;
    srv->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (srv->sig_fd < 0)
        return -errno;
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

int cn_d_server_new(const cn_d_config *c, cn_d_server **out, cn_err *err)
{
    int r;
    cn_d_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return -ENOMEM;
    srv->cfg = *c;
    srv->listen_fd = -1;
    srv->sig_fd = -1;
    srv->next_id = 1;
    srv->start_ns = cn_common_now_ns();
    srv->socket_path = c->socket_path ? strdup(c->socket_path) : default_path(true);
    srv->state_dir = c->state_dir ? strdup(c->state_dir) : default_path(false);
    srv->system_group = c->system_group ? strdup(c->system_group) : NULL;
    srv->cfg.socket_path = srv->cfg.state_dir = srv->cfg.system_group = NULL;
    if (!srv->socket_path || !srv->state_dir || (c->system_group && !srv->system_group)) {
        r = -ENOMEM;
        goto fail;
    }
    if (!srv->cfg.socket_mode)
        srv->cfg.socket_mode = getuid() == 0 ? 0666 : 0600;
    r = mkdir_p(srv->state_dir, 0700);
    if (r < 0) {
        cn_err_set(err, 0, "state dir %s: %s", srv->state_dir, strerror(-r));
        goto fail;
    }
    srv->ops = (cn_d__loop_ops){on_accept, on_data, on_sent, on_closed, on_tick};
    r = cn_d__loop_new(c->backend, &srv->ops, srv, TICK_MS, &srv->loop, err);
    if (r < 0)
        goto fail;
    raise_nofile();
    if ((r = setup_signals(srv)) < 0) {
        cn_err_set(err, 0, "signals: %s", strerror(-r));
        goto fail;
    }
    if (c->listen_fd >= 0) {
        srv->listen_fd = c->listen_fd;
    } else if (sd_listen_fds(0) >= 1) {
        srv->listen_fd = SD_LISTEN_FDS_START; /* socket activation */
    } else if ((r = bind_socket(srv, err)) < 0) {
        goto fail;
    }
    if ((r = cn_live_symbolizer_new(0, &srv->sym, err)) < 0)
        goto fail;
    r = -ENOMEM;
    if (cn_d__loop_listen(srv->loop, srv->listen_fd) < 0 ||
        !(srv->sym_watch =
              cn_d__loop_watch(srv->loop, cn_live_symbolizer_fd(srv->sym), on_symbols, srv)) ||
        !(srv->sig_watch = cn_d__loop_watch(srv->loop, srv->sig_fd, on_signal, srv))) {
        cn_err_set(err, 0, "event loop setup failed");
        goto fail;
    }
    load_state_dir(srv);
    enforce_state_dir(srv);
    *out = srv;
    return 0;
fail:
    if (!err->msg[0])
        cn_err_set(err, 0, "%s", strerror(-r));
    cn_d_server_free(srv);
    return r;
}

int cn_d_server_run(cn_d_server *srv)
{
    /* Under systemd (Type=notify): ready once the socket listens and saved sessions are
     * loaded. A no-op without NOTIFY_SOCKET. */
    sd_notifyf(0, "READY=1\nSTATUS=canopyd %s: %zu sessions, event loop %s", CANOPY_VERSION,
               srv->n_entries, cn_d__loop_backend(srv->loop));
    int r = cn_d__loop_run(srv->loop);
    sd_notify(0, "STOPPING=1\nSTATUS=saving sessions");
    /* Shutdown: stop sampling, let late symbols land, write everything. */
    for (size_t i = 0; i < srv->n_entries; i++) {
        entry *e = srv->entries[i];
        if (cn_live_session_state(e->s) == CN_LIVE_RUNNING) {
            pump_entry(e);
            entry_unwatch(e);
            cn_live_session_stop(e->s);
        }
    }
    if (srv->sym)
        cn_live_symbolizer_flush(srv->sym, 2000);
    for (size_t i = 0; i < srv->n_entries; i++) {
        entry *e = srv->entries[i];
        if (cn_live_session_state(e->s) != CN_LIVE_SAVED &&
            (!e->finished_saved || cn_live_session_dirty(e->s)))
            save_entry(srv, e);
    }
    return r;
}

void cn_d_server_shutdown(cn_d_server *srv)
{
    /* The loop stops at the next tick, once pending replies are out (at most 1 s). */
    if (!srv->shutdown_at)
        srv->shutdown_at = cn_common_now_ns();
}

const char *cn_d_server_backend(const cn_d_server *srv)
{
    return cn_d__loop_backend(srv->loop);
}

cn_d_server *cn_d_server_free(cn_d_server *srv)
{
    if (!srv)
        return NULL;
    for (size_t i = 0; i < srv->n_entries; i++)
        entry_free(srv->entries[i]);
    free(srv->entries);
    srv->n_entries = 0;
    cn_d__loop_free(srv->loop); /* closes connections (on_closed frees clients) */
    cn_live_symbolizer_free(srv->sym);
    if (srv->listen_fd >= 0 && srv->listen_fd != srv->cfg.listen_fd)
        close(srv->listen_fd);
    if (srv->own_socket)
        unlink(srv->socket_path);
    if (srv->sig_fd >= 0)
        close(srv->sig_fd);
    free(srv->socket_path);
    free(srv->state_dir);
    free(srv->system_group);
    free(srv);
    return NULL;
}
