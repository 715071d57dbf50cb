/* handlers.c — one function per protocol command (docs/protocol.md "Commands").
 *
 * Each handler reads its request, checks what the client may do (access.c, and
 * ownership: a non-root client sees only its own sessions), acts on the store, and sets
 * the response object; reply.c turns it into bytes. Handlers run on the loop thread, one
 * request at a time; a session named by a request is pumped first so the answer carries
 * the freshest samples.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "d_internal.h"

void cn_d__cmd_hello(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    rp->msg = cn_proto_ok(req);
    if (rp->msg)
        json_object_update_new(rp->msg, json_pack("{s:s, s:i, s:s, s:I}", "version", CANOPY_VERSION,
                                                  "protocol", CN_PROTO_VERSION, "event_loop",
                                                  cn_d__loop_backend(srv->loop), "uid",
                                                  (json_int_t)cl->cred.uid));
}

/* Resident memory apart (docs/cli-live.md, "Daemon memory"): anonymous pages are canopyd's
 * own (profiles, caches), file-backed ones are mostly the ELF files the symbolizer maps,
 * which the kernel can drop and reread. From /proc/self/status's RssAnon and RssFile
 * (kB); both 0 when it cannot be read. */
static void rss_split(size_t *anon, size_t *file)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    unsigned long kb;

    *anon = *file = 0;
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "RssAnon: %lu kB", &kb) == 1)
            *anon = (size_t)kb * 1024;
        else if (sscanf(line, "RssFile: %lu kB", &kb) == 1)
            *file = (size_t)kb * 1024;
    }
    fclose(f);
}

void cn_d__cmd_status(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    uint64_t lost = 0, user_stacks = 0, unsymbolized = 0;
    cn_live_unwind_outcomes u = {0};
    size_t n = 0;
    for (size_t i = 0; i < srv->n_entries; i++) {
        cn_live_session *s = srv->entries[i]->s;
        if (cl->cred.uid != 0 && cn_live_session_owner(s) != cl->cred.uid)
            continue;
        cn_live_session_info info;
        cn_live_session_info_get(s, &info);
        lost += info.lost;
        user_stacks += info.user_stacks;
        unsymbolized += info.unsymbolized;
        u.complete += info.unwind_outcomes.complete;
        u.truncated_stack += info.unwind_outcomes.truncated_stack;
        u.no_cfi += info.unwind_outcomes.no_cfi;
        u.read_fault += info.unwind_outcomes.read_fault;
        u.other += info.unwind_outcomes.other;
        n++;
    }
    size_t rss_anon, rss_file;
    rss_split(&rss_anon, &rss_file);
    rp->msg = cn_proto_ok(req);
    if (rp->msg)
        json_object_update_new(
            rp->msg,
            json_pack("{s:s, s:f, s:I, s:I, s:f, s:I, s:I, s:s, s:I, s:s, s:I, s:I}", "version",
                      CANOPY_VERSION, "uptime_s",
                      (double)(cn_common_now_ns() - srv->start_ns) / 1e9, "sessions", (json_int_t)n,
                      "running", (json_int_t)cn_d__store_running(srv), "samples_per_s",
                      srv->samples_per_s, "lost", (json_int_t)lost, "rss_bytes",
                      (json_int_t)cn_d__rss(), "event_loop", cn_d__loop_backend(srv->loop),
                      "clients", (json_int_t)cn_d__loop_conn_count(srv->loop), "state_dir",
                      srv->state_dir, "state_dir_bytes", (json_int_t)srv->state_dir_bytes,
                      "evicted_sessions", (json_int_t)srv->evicted));
    if (rp->msg)
        json_object_update_new(rp->msg,
                               json_pack("{s:I, s:I}", "rss_anon_bytes", (json_int_t)rss_anon,
                                         "rss_file_bytes", (json_int_t)rss_file));
    json_t *fleet = cn_d__fleet_status(srv); /* docs/fleet.md "Status" */
    if (rp->msg && fleet)
        json_object_set_new(rp->msg, "fleet", fleet);
    else
        json_decref(fleet);
    /* The sessions' unwind outcomes and unnamed frames, summed (docs/cli-live.md,
     * "Session counters"). */
    if (rp->msg)
        json_object_update_new(
            rp->msg,
            json_pack("{s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:I}", "user_stacks",
                      (json_int_t)user_stacks, "unwind_outcomes", "complete",
                      (json_int_t)u.complete, "truncated_stack", (json_int_t)u.truncated_stack,
                      "no_cfi", (json_int_t)u.no_cfi, "read_fault", (json_int_t)u.read_fault,
                      "other", (json_int_t)u.other, "unsymbolized", (json_int_t)unsymbolized));
}

void cn_d__cmd_sessions(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
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
    if (str && str[0] == 's' && str[1] && strspn(str + 1, "0123456789") == strlen(str + 1)) {
        /* Ids are s<number>: a name spelled like one would shadow that session. */
        cn_err_set(err, 0, "\"name\" '%s' looks like a session id (s<number>)", str);
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

static void start_session(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp,
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
    cn_fleet_labels labels = {0};
    bool no_fleet = false;
    if ((r = cn_d__fleet_request(req, &labels, &no_fleet, &err)) < 0) {
        rp->msg = r == -ENOMEM ? cn_proto_error(req, "failed", 1, "out of memory")
                               : cn_proto_error(req, "bad_request", 2, "%s", err.msg);
        cn_fleet_labels_clear(&labels);
        return;
    }
    /* Access control first: a denied request changes nothing. */
    r = kind == CN_LIVE_SYSTEM ? cn_d__may_system(&cl->cred, srv->system_group, &err)
                               : cn_d__may_attach(&cl->cred, o.pid, &err);
    if (r < 0) {
        rp->msg = cn_d__reply_error(req, r, &err);
        cn_fleet_labels_clear(&labels);
        return;
    }
    if (!cn_d__may_see_kernel(&cl->cred))
        o.no_kernel = true; /* no kernel addresses for who could not read them itself */
    if (cn_d__store_running(srv) >= srv->cfg.max_sessions ||
        srv->n_entries >= CN_D__MAX_LOADED_SESSIONS) {
        rp->msg = cn_proto_error(req, "limit", 1, "too many sessions (limit %u running)",
                                 srv->cfg.max_sessions);
        cn_fleet_labels_clear(&labels);
        return;
    }
    if (o.name && cn_d__store_find(srv, &cl->cred, o.name, 0)) {
        cn_d__entry *dup = cn_d__store_find(srv, &cl->cred, o.name, 0);
        if (cn_live_session_state(dup->s) == CN_LIVE_RUNNING) {
            rp->msg = cn_proto_error(req, "bad_request", 2,
                                     "a running session is already named '%s'", o.name);
            cn_fleet_labels_clear(&labels);
            return;
        }
    }
    snprintf(id, sizeof(id), "s%" PRIu64, srv->next_id);
    o.id = id;
    cn_live_session *s = NULL;
    cn_d__entry *e = NULL;
    r = cn_live_session_new(&o, srv->sym, &s, &err);
    if (r < 0) {
        if (r == -ENOENT)
            r = -EINVAL; /* an unknown event is bad input */
        rp->msg = cn_d__reply_error(req, r, &err);
        cn_fleet_labels_clear(&labels);
        return;
    }
    srv->next_id++;
    if (cn_d__store_add(srv, s, &e) < 0) { /* s is freed */
        rp->msg = cn_proto_error(req, "failed", 1, "out of memory");
        cn_fleet_labels_clear(&labels);
        return;
    }
    cn_d__fleet_track(srv, e, &labels, no_fleet); /* clears labels */
    rp->msg = cn_proto_ok(req);
    if (rp->msg)
        json_object_set_new(rp->msg, "session", cn_live_session_json(e->s));
}

void cn_d__cmd_attach(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    start_session(srv, cl, req, rp, CN_LIVE_ATTACH);
}

void cn_d__cmd_run(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    start_session(srv, cl, req, rp, CN_LIVE_RUN);
}

void cn_d__cmd_system(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    start_session(srv, cl, req, rp, CN_LIVE_SYSTEM);
}

/* The session a request names ("session" or "pid"), or NULL with rp->msg set. */
static cn_d__entry *req_session(cn_d_server *srv, cn_d__client *cl, const json_t *req,
                                cn_d__reply *rp)
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
    cn_d__entry *e = cn_d__store_find(srv, &cl->cred, key, (pid_t)pid);
    if (!e) {
        if (key)
            rp->msg = cn_proto_error(req, "unknown_session", 1, "unknown session '%s'", key);
        else
            rp->msg = cn_proto_error(req, "unknown_session", 1, "no session for pid %" PRId64, pid);
        return NULL;
    }
    cn_d__store_pump(e); /* the freshest data */
    return e;
}

static void render_cmd(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp,
                       cn_fmt_format def, bool timeline)
{
    cn_fmt_spec q;
    cn_err err = {0};
    cn_err pe;
    cn_buf out, notes;
    bool payload = false;
    cn_d__entry *e = req_session(srv, cl, req, rp);
    if (!e)
        return;
    cn_fmt_spec_init(&q);
    q.format = def;
    q.timeline = timeline;
    cn_buf_init(&out, 0);
    cn_buf_init(&notes, 0); /* one line per transform at most: bounded by the request */
    if (cn_proto_get_bool(req, "raw", &payload, &pe) < 0) {
        rp->msg = cn_proto_error(req, pe.code, 2, "%s", pe.msg);
        goto out;
    }
    int r = cn_fmt_spec_from_json(req, &q, &err);
    if (r < 0) {
        rp->msg = r == -ENOMEM ? NULL : cn_proto_error(req, "bad_query", 2, "%s", err.msg);
        goto out;
    }
    r = cn_d_render(e->s, &q, &out, &notes, &err);
    if (r < 0) {
        rp->msg = cn_d__reply_error(req, r, &err);
        goto out;
    }
    rp->msg = cn_proto_ok(req);
    if (rp->msg &&
        (cn_d__reply_notes(rp, &notes) < 0 ||
         cn_d__reply_output(rp, q.format, timeline ? "timeline" : "tree", &out, payload) < 0)) {
        json_decref(rp->msg);
        rp->msg = NULL;
    }
out:
    cn_buf_free(&notes);
    cn_buf_free(&out);
    cn_fmt_spec_clear(&q);
}

void cn_d__cmd_tree(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    render_cmd(srv, cl, req, rp, CN_FMT_JSON, false);
}

void cn_d__cmd_save(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    render_cmd(srv, cl, req, rp, CN_FMT_CANOPY, false);
}

void cn_d__cmd_timeline(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    render_cmd(srv, cl, req, rp, CN_FMT_JSON, true);
}

void cn_d__cmd_lines(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    cn_fmt_spec q;
    cn_err err = {0};
    cn_err pe;
    const char *func = NULL;
    int code = 0;
    cn_d__entry *e = req_session(srv, cl, req, rp);
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
            rp->msg = cn_d__reply_error(req, code, &err);
        } else if ((rp->msg = cn_proto_ok(req))) {
            json_object_set_new(rp->msg, "lines", l);
        } else {
            json_decref(l);
        }
    }
    cn_fmt_spec_clear(&q);
}

void cn_d__cmd_stop(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    cn_d__entry *e = req_session(srv, cl, req, rp);
    if (!e)
        return;
    cn_d__store_stop(srv, e);
    rp->msg = cn_proto_ok(req);
    if (rp->msg)
        json_object_set_new(rp->msg, "session", cn_live_session_json(e->s));
}

void cn_d__cmd_rm(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    cn_d__entry *e = req_session(srv, cl, req, rp);
    if (!e)
        return;
    char *id = strdup(cn_live_session_id(e->s));
    cn_d__store_remove(srv, e, true);
    rp->msg = cn_proto_ok(req);
    if (rp->msg && id)
        json_object_set_new(rp->msg, "removed", json_string(id));
    free(id);
}

void cn_d__cmd_shutdown(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
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
