/* handlers.c — one function per protocol command (docs/protocol.md "Commands").
 *
 * Each handler reads its request, checks what the client may do (access.c, and
 * ownership: a non-root client sees only its own sessions), acts on the store, and sets
 * the response object; reply.c turns it into bytes. Handlers run on the loop thread, one
 * request at a time; a session named by a request is pumped first so the answer carries
 * the freshest samples. Queries are only decoded and checked here: a forked worker
 * renders them (workers.c) and answers later (rp->deferred).
 */
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#if defined(__SANITIZE_ADDRESS__) /* the sanitizer runtime's allocator statistics (gcc ships       \
                                      no header for them: clang's allocator_interface.h) */
size_t __sanitizer_get_current_allocated_bytes(void);
size_t __sanitizer_get_free_bytes(void);
size_t __sanitizer_get_heap_size(void);
#endif
#include <sys/resource.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "d_internal.h"

/* What a reply that cannot be built says: an error, never a reply missing a part. */
static json_t *reply_oom(const json_t *req)
{
    return cn_proto_error(req, "failed", 1, "out of memory building the reply");
}

void cn_d__cmd_hello(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    char build_id[129]; /* up to 64 bytes of id as hex */
    rp->msg = cn_proto_ok(req);
    if (rp->msg)
        json_object_update_new(
            rp->msg, json_pack("{s:s, s:s, s:i, s:s, s:I}", "version", CANOPY_VERSION, "build_id",
                               cn_common_build_id(build_id, sizeof(build_id)), "protocol",
                               CN_PROTO_VERSION, "event_loop", cn_d__loop_backend(srv->loop), "uid",
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

/* What malloc holds (docs/cli-live.md, "Daemon memory"): the bytes in use, the free bytes
 * kept in its heaps (resident only where they were touched and not yet trimmed), and the
 * blocks with pages of their own. Resident memory the caches and profiles do not account
 * for is either free here or allocated by the libraries canopyd uses (libdw's own). */
static json_t *malloc_json(void)
{
#if defined(__SANITIZE_ADDRESS__) /* ASan's allocator replaces glibc's: mallinfo2 is zeros */
    size_t in_use = __sanitizer_get_current_allocated_bytes(),
           free_bytes = __sanitizer_get_free_bytes(), heap = __sanitizer_get_heap_size(),
           mmapped = 0;
#else
    struct mallinfo2 mi = mallinfo2();
    size_t in_use = mi.uordblks + mi.hblkhd, free_bytes = mi.fordblks, heap = mi.arena,
           mmapped = mi.hblkhd;
#endif
    return json_pack("{s:I, s:I, s:I, s:I}", "in_use_bytes", (json_int_t)in_use, "free_bytes",
                     (json_int_t)free_bytes, "heap_bytes", (json_int_t)heap, "mmapped_bytes",
                     (json_int_t)mmapped);
}

/* Open fds and their soft limit (RLIMIT_NOFILE). */
static void fd_use(size_t *open_fds, size_t *limit)
{
    struct rlimit rl;
    DIR *d = opendir("/proc/self/fd");
    *open_fds = 0;
    if (d) {
        for (struct dirent *de; (de = readdir(d));)
            *open_fds += de->d_name[0] != '.';
        closedir(d);
        (*open_fds)--; /* the directory's own fd */
    }
    *limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (size_t)rl.rlim_cur : 0;
}

/* The workers, the bounds' counters and fd use (docs/cli-live.md "Daemon limits"). */
static int status_limits(cn_d_server *srv, json_t *msg)
{
    size_t queued = 0, open_fds, fd_limit;
    for (const cn_d__job *j = srv->jobs; j; j = j->next)
        queued += j->pid <= 0;
    fd_use(&open_fds, &fd_limit);
    return json_object_update_new(
        msg, json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "workers_running",
                       (json_int_t)srv->jobs_running, "workers_queued", (json_int_t)queued,
                       "worker_jobs", (json_int_t)srv->stats.jobs_done, "worker_failures",
                       (json_int_t)srv->stats.jobs_failed, "query_too_expensive",
                       (json_int_t)srv->stats.query_too_expensive, "quota_refused",
                       (json_int_t)srv->stats.quota_refused, "quota_evicted",
                       (json_int_t)srv->stats.quota_evicted, "connection_timeouts",
                       (json_int_t)srv->stats.timeouts, "emfile_refused",
                       (json_int_t)cn_d__loop_shed_count(srv->loop), "fds_open",
                       (json_int_t)open_fds, "fd_limit", (json_int_t)fd_limit));
}

void cn_d__cmd_status(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    uint64_t lost = 0, user_stacks = 0, unsymbolized = 0;
    cn_unwind_outcomes u = {0};
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
        cn_unwind_outcomes_add(&u, &info.unwind_outcomes);
        n++;
    }
    size_t rss_anon, rss_file;
    int r = 0;
    rss_split(&rss_anon, &rss_file);
    rp->msg = cn_proto_ok(req);
    if (!rp->msg)
        r = -1;
    if (r == 0) /* state_dir is the administrator's path: any bytes (cn_proto_str) */
        r = json_object_update_new(
            rp->msg,
            json_pack(
                "{s:s, s:f, s:I, s:I, s:f, s:I, s:I, s:s, s:I, s:o, s:I, s:I}", "version",
                CANOPY_VERSION, "uptime_s", (double)(cn_common_now_ns() - srv->start_ns) / 1e9,
                "sessions", (json_int_t)n, "running", (json_int_t)cn_d__store_running(srv),
                "samples_per_s", srv->samples_per_s, "lost", (json_int_t)lost, "rss_bytes",
                (json_int_t)cn_d__rss(), "event_loop", cn_d__loop_backend(srv->loop), "clients",
                (json_int_t)cn_d__loop_conn_count(srv->loop), "state_dir",
                cn_proto_str(srv->state_dir), "state_dir_bytes", (json_int_t)srv->state_dir_bytes,
                "evicted_sessions", (json_int_t)srv->evicted));
    cn_live_symbolizer_stats sym;
    cn_live_symbolizer_stats_get(srv->sym, &sym);
    if (r == 0)
        r = json_object_update_new(
            rp->msg,
            json_pack("{s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f}}",
                      "rss_anon_bytes", (json_int_t)rss_anon, "rss_file_bytes",
                      (json_int_t)rss_file, "symbol_cache", "objects", (json_int_t)sym.objects,
                      "heap_bytes", (json_int_t)sym.heap_bytes, "mapped_bytes",
                      (json_int_t)sym.mapped_bytes, "evictions", (json_int_t)sym.evictions,
                      "max_heap_bytes", (json_int_t)sym.max_heap_bytes, "max_mapped_bytes",
                      (json_int_t)sym.max_mapped_bytes, "debug_releases",
                      (json_int_t)sym.debug_releases, "debug_opens", (json_int_t)sym.debug_opens,
                      "debug_units", (json_int_t)sym.debug_units, "debug_idle_s",
                      (double)sym.debug_idle_ns / 1e9, "idle_s",
                      (double)sym.symbols_idle_ns / 1e9));
    cn_smp_cache_stats uc;
    cn_smp_cache_stats_get(srv->unwind, &uc);
    if (r == 0) /* docs/cli-live.md "Status" */
        r = json_object_update_new(
            rp->msg,
            json_pack("{s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}}", "unwind_cache",
                      "files", (json_int_t)uc.files, "open_files", (json_int_t)uc.open_files,
                      "in_use", (json_int_t)uc.in_use, "bytes", (json_int_t)uc.bytes,
                      "unused_bytes", (json_int_t)uc.lru_bytes, "max_unused_bytes",
                      (json_int_t)uc.max_bytes, "loads", (json_int_t)uc.loads, "hits",
                      (json_int_t)uc.hits, "evictions", (json_int_t)uc.evictions, "expired",
                      (json_int_t)uc.expired, "idle_s", (double)CN_D_UNWIND_IDLE_NS / 1e9));
    if (r == 0)
        r = json_object_set_new(rp->msg, "malloc", malloc_json());
    if (r == 0)
        r = status_limits(srv, rp->msg);
    json_t *fleet = cn_d__fleet_status(srv); /* docs/fleet.md "Status" */
    if (r == 0 && fleet)
        json_object_set_new(rp->msg, "fleet", fleet);
    else
        json_decref(fleet);
    /* The sessions' unwind outcomes and unnamed frames, summed (docs/cli-live.md,
     * "Session counters"). */
    if (r == 0)
        r = json_object_update_new(
            rp->msg,
            json_pack("{s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:I}", "user_stacks",
                      (json_int_t)user_stacks, "unwind_outcomes", "complete",
                      (json_int_t)u.complete, "truncated_stack", (json_int_t)u.truncated_stack,
                      "no_cfi", (json_int_t)u.no_cfi, "read_fault", (json_int_t)u.read_fault,
                      "other", (json_int_t)u.other, "unsymbolized", (json_int_t)unsymbolized));
    if (r < 0) {
        json_decref(rp->msg);
        rp->msg = reply_oom(req);
    }
}

/* A session's entry in `sessions`: cn_d_session_json, and what canopyd keeps beside it
 * (docs/cli-live.md, "Session counters": checkpoint). NULL without memory. */
static json_t *entry_json(const cn_d_server *srv, const cn_d__entry *e)
{
    json_t *o = cn_d_session_json(e->s);
    if (o && srv->cfg.checkpoint_ns > 0 && cn_live_session_state(e->s) == CN_LIVE_RUNNING &&
        json_object_set_new(o, "checkpoint",
                            json_pack("{s:I, s:f, s:f}", "writes", (json_int_t)e->saves,
                                      "last_cpu_s", (double)e->save_cpu_ns / 1e9, "delay_s",
                                      (double)cn_d__checkpoint_delay(srv, e) / 1e9)) < 0) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

void cn_d__cmd_sessions(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    json_t *a = json_array();
    int r = a ? 0 : -1;
    for (size_t i = 0; r == 0 && i < srv->n_entries; i++) {
        const cn_d__entry *e = srv->entries[i];
        if (cl->cred.uid == 0 || cn_live_session_owner(e->s) == cl->cred.uid)
            r = json_array_append_new(a, entry_json(srv, e)); /* -1 for NULL */
    }
    rp->msg = r == 0 ? cn_proto_ok(req) : NULL;
    if (!rp->msg || json_object_set_new(rp->msg, "sessions", a) < 0) {
        if (!rp->msg)
            json_decref(a);
        json_decref(rp->msg);
        rp->msg = reply_oom(req);
    }
}

/* ok with the session's entry as "session", or an error when it cannot be built. */
static void reply_session(const json_t *req, cn_d__reply *rp, const cn_live_session *s)
{
    rp->msg = cn_proto_ok(req);
    if (!rp->msg || json_object_set_new(rp->msg, "session", cn_d_session_json(s)) < 0) {
        json_decref(rp->msg);
        rp->msg = reply_oom(req);
    }
}

/* cn_smp_may_profile_fn over the connection's credentials (arg: a cn_d__cred valid for
 * the duration of cn_live_session_new, which is when the sampler calls it). */
static int may_profile(void *arg, pid_t pid, cn_err *err)
{
    return cn_d__may_attach(arg, pid, err);
}

/* The access check of an attach or run, tied to one process image: the image read before
 * and after the check must agree (the check's reads describe that image, not one an exec
 * put in place meanwhile), and both it and the rule go to the sampler, which re-applies
 * them before enabling the events it opened disabled (docs/security.md). */
static int attach_check(const cn_d__cred *cred, cn_live_session_opts *o, cn_err *err)
{
    cn_smp_image after;
    if (cn_smp_image_read(o->pid, &o->image) < 0)
        return cn_err_set(err, -ESRCH, "no such process: %d", (int)o->pid);
    int r = cn_d__may_attach(cred, o->pid, err);
    if (r < 0)
        return r;
    if (cn_smp_image_read(o->pid, &after) < 0)
        return cn_err_set(err, -ESRCH, "no such process: %d", (int)o->pid);
    if (!cn_smp_image_equal(&o->image, &after))
        return cn_err_set(err, -EPERM,
                          "permission denied: process %d exec'ed during the access check",
                          (int)o->pid);
    o->may_profile = may_profile;
    o->may_profile_arg = (void *)cred;
    return 0;
}

/* The session spec of an attach/run/system request: the host's defaults (frequency by
 * kind, owner, memory bound, retention), then the request's fields, decoded and checked by
 * live/ (cn_live_session_opts_from_json). 0, or rp->msg set (o owns what was decoded). */
static int session_spec(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp,
                        cn_live_kind kind, cn_live_session_opts *o)
{
    cn_err err = {0};
    o->kind = kind;
    o->freq = kind == CN_LIVE_RUN ? CN_LIVE_FREQ_RUN : CN_LIVE_FREQ_DEFAULT;
    o->owner = cl->cred.uid;
    o->max_memory = srv->cfg.session_memory;
    o->retention_ns = srv->cfg.retention_ns;
    o->trim_share = srv->cfg.fold_trim > 0 ? srv->cfg.fold_trim : -1; /* 0 in the file: never */
    int r = cn_live_session_opts_from_json(req, o, &err);
    if (r < 0)
        rp->msg = r == -ENOMEM ? cn_proto_error(req, "failed", 1, "out of memory")
                               : cn_proto_error(req, "bad_request", 2, "%s", err.msg);
    return r;
}

/* Whether the request may start a session now: access (a denied request changes nothing),
 * the caller's quota, the session bounds and the name's uniqueness. 0, or rp->msg set. */
static int may_start(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp,
                     cn_live_session_opts *o)
{
    cn_err err = {0};
    int r = o->kind == CN_LIVE_SYSTEM && o->cgroup
                ? cn_d__may_cgroup(&cl->cred, srv->system_group, o->cgroup, &err)
            : o->kind == CN_LIVE_SYSTEM ? cn_d__may_system(&cl->cred, srv->system_group, &err)
                                        : attach_check(&cl->cred, o, &err);
    if (r < 0) {
        rp->msg = cn_d__reply_error(req, r, &err);
        return r;
    }
    if (srv->cfg.test_attach_delay_ns > 0) /* only canopyd-test sets it */
        nanosleep(&(struct timespec){srv->cfg.test_attach_delay_ns / 1000000000,
                                     srv->cfg.test_attach_delay_ns % 1000000000},
                  NULL);
    if (!cn_d__may_see_kernel(&cl->cred))
        o->no_kernel = true; /* no kernel addresses for who could not read them itself */
    if (cn_d__quota_session(srv, &cl->cred, o->kind == CN_LIVE_SYSTEM ? 0 : o->pid, &err) < 0) {
        srv->stats.quota_refused++;
        rp->msg = cn_proto_error(req, "limit", 1, "%s", err.msg);
        return -EAGAIN;
    }
    if (cn_d__store_running(srv) >= srv->cfg.max_sessions ||
        srv->n_entries >= CN_D__MAX_LOADED_SESSIONS) {
        rp->msg = cn_proto_error(req, "limit", 1, "too many sessions (limit %u running)",
                                 srv->cfg.max_sessions);
        return -EAGAIN;
    }
    cn_d__entry *dup = o->name ? cn_d__store_find(srv, &cl->cred, o->name, 0) : NULL;
    if (dup && cn_live_session_state(dup->s) == CN_LIVE_RUNNING) {
        rp->msg = cn_proto_error(req, "bad_request", 2, "a running session is already named '%s'",
                                 o->name);
        return -EEXIST;
    }
    return 0;
}

static void start_session(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp,
                          cn_live_kind kind)
{
    cn_live_session_opts o;
    cn_err err = {0};
    char id[32];
    int r;
    cn_live_session_opts_init(&o);
    if (session_spec(srv, cl, req, rp, kind, &o) < 0 || may_start(srv, cl, req, rp, &o) < 0)
        goto out;
    o.unwind_cache = srv->unwind;
    snprintf(id, sizeof(id), "s%" PRIu64, srv->next_id);
    o.id = id;
    cn_live_session *s = NULL;
    cn_d__entry *e = NULL;
    r = cn_live_session_new(&o, srv->sym, &s, &err);
    if (r < 0) {
        if (r == -ENOENT)
            r = -EINVAL; /* an unknown event is bad input */
        rp->msg = cn_d__reply_error(req, r, &err);
        goto out;
    }
    srv->next_id++;
    if (srv->cfg.test_session_seed && /* only canopyd-test sets it */
        srv->cfg.test_session_seed(cn_live_session_profile(s), srv->cfg.test_seed_arg) < 0) {
        cn_live_session_free(s);
        rp->msg = cn_proto_error(req, "failed", 1, "test seed failed");
        goto out;
    }
    if (cn_d__store_add(srv, s, &e) < 0) { /* s is freed */
        rp->msg = cn_proto_error(req, "failed", 1, "out of memory");
        goto out;
    }
    cn_d__fleet_track(srv, e, &o.labels, o.no_fleet); /* clears the labels */
    reply_session(req, rp, e->s);
out:
    cn_live_session_opts_clear(&o);
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

/* Hands a decoded query to a worker (workers.c): the answer is sent when it is done
 * (docs/security.md "Queries and saves off the sampling path"). Takes q's contents and
 * func (LINES' F, or NULL) in every case. */
static void submit_query(cn_d_server *srv, cn_d__client *cl, cn_d__entry *e, const json_t *req,
                         cn_d__reply *rp, cn_d__job_kind kind, cn_fmt_spec *q, bool payload,
                         char *func)
{
    cn_err err = {0};
    cn_d__job *j;
    if (cn_d__query_check(srv, q, &err) < 0) {
        srv->stats.query_too_expensive++;
        rp->msg = cn_proto_error(req, "query_too_expensive", 1, "%s", err.msg);
        free(func);
        return;
    }
    if (!(j = cn_d__job_new(kind, e, cl->cred.uid))) {
        free(func);
        return; /* rp->msg NULL: out of memory */
    }
    j->spec = *q;
    cn_fmt_spec_init(q);
    j->req = json_incref((json_t *)req);
    j->cl = cl;
    j->payload = payload;
    j->func = func;
    if (e->lazy && !(j->path = strdup(cn_live_session_path(e->s)))) {
        cn_d__job_free(j);
        return;
    }
    cn_d__job_submit(srv, j);
    rp->deferred = true;
}

static void render_cmd(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp,
                       cn_fmt_format def, bool timeline)
{
    cn_fmt_spec q;
    cn_err err = {0};
    cn_err pe;
    bool payload = false;
    cn_d__entry *e = req_session(srv, cl, req, rp);
    if (!e)
        return;
    cn_fmt_spec_init(&q);
    q.format = def;
    q.timeline = timeline;
    if (cn_proto_get_bool(req, "raw", &payload, &pe) < 0) {
        rp->msg = cn_proto_error(req, pe.code, 2, "%s", pe.msg);
        goto out;
    }
    int r = cn_fmt_spec_from_json(req, &q, &err);
    if (r < 0) {
        rp->msg = r == -ENOMEM ? NULL : cn_proto_error(req, "bad_query", 2, "%s", err.msg);
        goto out;
    }
    submit_query(srv, cl, e, req, rp, CN_D__JOB_QUERY, &q, payload, NULL);
out:
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
        char *f = strdup(func);
        if (f)
            submit_query(srv, cl, e, req, rp, CN_D__JOB_LINES, &q, false, f);
    }
    cn_fmt_spec_clear(&q);
}

void cn_d__cmd_stop(cn_d_server *srv, cn_d__client *cl, const json_t *req, cn_d__reply *rp)
{
    cn_d__entry *e = req_session(srv, cl, req, rp);
    if (!e)
        return;
    cn_d__store_stop(srv, e);
    reply_session(req, rp, e->s);
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
        json_object_set_new(rp->msg, "removed", cn_proto_str(id));
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
