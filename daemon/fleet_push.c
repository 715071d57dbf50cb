/* fleet_push.c — canopyd's side of the fleet (docs/fleet.md): once per fleet_interval,
 * each pushed session's samples since the last push become rows (fleet/'s
 * cn_fleet_collect), all sessions' rows one batch, handed to fleet/'s pusher thread,
 * which spools, compresses and inserts it. Only the collection runs on the loop thread
 * (a pass over the interval's samples and one path walk per distinct stack); nothing
 * here waits on the network, so the sampler is never slowed by it.
 *
 * Each session keeps a cursor in session time: a push covers [cursor, now − 200 ms) (the
 * margin lets records still in flight land), and a stopped or exited session's last push
 * covers everything left. A window whose stacks still wait for symbols is held back
 * while the symbolizer has pending frames, at most HOLDBACK_NS; after that it goes out
 * with `lib+0xOFF` names and build-ids. Saved sessions loaded at startup are not pushed
 * again.
 *
 * With fleet_pyroscope_url, each collected window also becomes one pprof profile (the
 * one pprof encoder, formats/' cn_fmt_write_pprof_cpu, over the same window) sent to
 * Pyroscope by a second pusher with its own spool and backoff, so that one sink's outage
 * never holds the other back. The ClickHouse rows are still collected without fleet_url
 * (they decide whether a window waits for symbols) and then dropped.
 * With fleet_otlp_url, each window also becomes one OTLP export request (formats/'
 * cn_fmt_write_otlp over the same window: a resource per process with host.name, the
 * process and its container, service.name and the labels) for a third pusher, one
 * request per batch.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cn_fmt.h"
#include "d_internal.h"

#define GUARD_NS    200000000LL   /* samples younger than this wait for the next push */
#define HOLDBACK_NS 30000000000LL /* longest wait for symbols */

struct cn_d__fleet {
    cn_fleet_pusher *pusher; /* ClickHouse; NULL without fleet_url */
    cn_fleet_pusher *pyro;   /* Pyroscope; NULL without fleet_pyroscope_url */
    char pyro_url[512];
    uint64_t pyro_errors;  /* windows whose profile could not be written */
    cn_fleet_pusher *otlp; /* OTLP/HTTP; NULL without fleet_otlp_url */
    char otlp_url[512];
    uint64_t otlp_errors; /* windows whose OTLP request could not be written */
    cn_fleet_seen *seen;
    cn_fleet_labels labels; /* fleet_labels */
    char host[256];
    char url[512];
    int64_t interval_ns, next_ns;
    uint64_t collect_ns_last, collect_ns_total, pushes, sessions_done;
    uint64_t rows_collected;
};

struct cn_d__fleet_src {
    cn_fleet_labels labels; /* the config's and the session's (which win) */
    char *service;          /* owned */
    int64_t cursor_ns;      /* session time pushed so far */
    int64_t held_since;     /* monotonic ns the current window started waiting; 0 = not */
    bool done;
};

static int read_password(const char *path, char **out, cn_err *err)
{
    char buf[1024];
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cn_err_set(err, -errno, "fleet_password_file %s: %s", path, strerror(errno));
    if (fstat(fd, &st) < 0 || (st.st_mode & 077)) {
        close(fd);
        return cn_err_set(err, -EPERM,
                          "fleet_password_file %s: readable by group or others (chmod 600)", path);
    }
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0)
        return cn_err_set(err, -errno, "fleet_password_file %s: %s", path, strerror(errno));
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    *out = strdup(buf);
    explicit_bzero(buf, sizeof(buf));
    return *out ? 0 : cn_err_set(err, -ENOMEM, "out of memory");
}

int cn_d__fleet_new(cn_d_server *srv, cn_err *err)
{
    const cn_d_config *c = &srv->cfg;
    char *password = NULL, spool[4200];
    int r;
    bool ch = c->fleet_url && *c->fleet_url;
    bool pyro = c->fleet_pyroscope_url && *c->fleet_pyroscope_url;
    bool otlp = c->fleet_otlp_url && *c->fleet_otlp_url;
    if (!ch && !pyro && !otlp)
        return 0;
    struct cn_d__fleet *f = calloc(1, sizeof(*f));
    if (!f)
        return cn_err_set(err, -ENOMEM, "out of memory");
    if ((r = cn_fleet_labels_parse(&f->labels, c->fleet_labels ? c->fleet_labels : "", err)) < 0)
        goto fail;
    if (c->fleet_host)
        snprintf(f->host, sizeof(f->host), "%s", c->fleet_host);
    else if (gethostname(f->host, sizeof(f->host) - 1) < 0)
        snprintf(f->host, sizeof(f->host), "unknown");
    if ((r = cn_fleet_label_check("host", f->host, err)) < 0)
        goto fail;
    if (c->fleet_password_file && (r = read_password(c->fleet_password_file, &password, err)) < 0)
        goto fail;
    snprintf(f->url, sizeof(f->url), "%s", ch ? c->fleet_url : "");
    snprintf(spool, sizeof(spool), "%s/fleet-spool", srv->state_dir);
    cn_fleet_pusher_opts o = {
        .url = c->fleet_url,
        .user = c->fleet_user,
        .password = password,
        .database = c->fleet_database,
        .spool_dir = spool,
        .spool_max = c->fleet_spool_max,
        /* Bounds how long shutdown can wait for a request in flight. */
        .timeout_ms = 15000,
    };
    if (ch && (r = cn_fleet_pusher_new(&o, &f->pusher, err)) < 0)
        goto fail;
    if (pyro) {
        /* Its own spool and queue: one sink's outage does not hold the other back. */
        snprintf(spool, sizeof(spool), "%s/fleet-pyroscope-spool", srv->state_dir);
        snprintf(f->pyro_url, sizeof(f->pyro_url), "%s", c->fleet_pyroscope_url);
        cn_fleet_pusher_opts po = {
            .sink = CN_FLEET_SINK_PYROSCOPE,
            .url = c->fleet_pyroscope_url,
            .org_id = c->fleet_pyroscope_org,
            .spool_dir = spool,
            .spool_max = c->fleet_spool_max,
            .timeout_ms = 15000,
        };
        if ((r = cn_fleet_pusher_new(&po, &f->pyro, err)) < 0)
            goto fail;
    }
    if (otlp) {
        snprintf(spool, sizeof(spool), "%s/fleet-otlp-spool", srv->state_dir);
        snprintf(f->otlp_url, sizeof(f->otlp_url), "%s", c->fleet_otlp_url);
        cn_fleet_pusher_opts oo = {
            .sink = CN_FLEET_SINK_OTLP,
            .url = c->fleet_otlp_url,
            .spool_dir = spool,
            .spool_max = c->fleet_spool_max,
            .timeout_ms = 15000,
        };
        if ((r = cn_fleet_pusher_new(&oo, &f->otlp, err)) < 0)
            goto fail;
    }
    if (!(f->seen = cn_fleet_seen_new(0))) {
        r = cn_err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    f->interval_ns = c->fleet_interval_ns > 0 ? c->fleet_interval_ns : 10000000000LL;
    f->next_ns = cn_common_now_ns() + f->interval_ns;
    srv->fleet = f;
    free(password);
    return 0;
fail:
    if (password) {
        explicit_bzero(password, strlen(password));
        free(password);
    }
    cn_fleet_pusher_free(f->pusher);
    cn_fleet_pusher_free(f->pyro);
    cn_fleet_pusher_free(f->otlp);
    cn_fleet_labels_clear(&f->labels);
    free(f);
    return r;
}

void cn_d__fleet_src_free(struct cn_d__fleet_src *src)
{
    if (!src)
        return;
    cn_fleet_labels_clear(&src->labels);
    free(src->service);
    free(src);
}

void cn_d__fleet_track(cn_d_server *srv, cn_d__entry *e, cn_fleet_labels *labels, bool off)
{
    struct cn_d__fleet *f = srv->fleet;
    struct cn_d__fleet_src *src = NULL;
    cn_live_session_info info;
    if (!f || off)
        goto out;
    if (!(src = calloc(1, sizeof(*src))) || cn_fleet_labels_merge(&src->labels, &f->labels, NULL) ||
        cn_fleet_labels_merge(&src->labels, labels, NULL))
        goto fail;
    /* `service` is a column: the session's label, else the configured one, else the
     * target's name. */
    cn_live_session_info_get(e->s, &info);
    const char *svc = cn_fleet_labels_get(&src->labels, "service");
    if (!svc)
        svc = info.kind == CN_LIVE_SYSTEM ? "system" : info.comm[0] ? info.comm : "unknown";
    if (!(src->service = strdup(svc)))
        goto fail;
    for (size_t i = 0; i < src->labels.n; i++) {
        if (!strcmp(src->labels.v[i].key, "service")) {
            free(src->labels.v[i].key);
            free(src->labels.v[i].value);
            src->labels.v[i] = src->labels.v[--src->labels.n];
            break;
        }
    }
    e->fleet = src;
    src = NULL;
    goto out;
fail:
    fprintf(stderr, "canopyd: fleet: session %s: out of memory, not pushed\n",
            cn_live_session_id(e->s));
out:
    cn_d__fleet_src_free(src);
    cn_fleet_labels_clear(labels);
}

/* Pyroscope's name of a session's profile type (docs/fleet.md). */
static const char *pyro_name(const char *mode)
{
    if (mode && !strcmp(mode, "off-cpu"))
        return "off_cpu";
    if (mode && !strcmp(mode, "wall"))
        return "wall";
    return "process_cpu";
}

/* Adds the window [from, to) of e's profile to pb as one Pyroscope series per cgroup with
 * samples in it (docs/fleet.md "Container labels"): its pprof (CPU sessions as
 * cpu/nanoseconds, period 1e9 / frequency) with the labels __name__, service_name, host,
 * the session's and the cgroup's (path NULL: the processes without one). Failures are
 * counted (the window is then missing from Pyroscope only). */
static void pyro_add_group(struct cn_d__fleet *f, cn_d__entry *e, const cn_live_session_info *info,
                           int64_t from, int64_t to, int64_t time_s, cn_fleet_batch *pb,
                           const char *path, size_t group)
{
    struct cn_d__fleet_src *src = e->fleet;
    cn_fleet_label l[CN_FLEET_PYROSCOPE_MAX_LABELS];
    cn_fleet_labels cg = {0};
    size_t n = 0;
    char *mem = NULL, id[512];
    size_t len = 0;
    cn_err err = {0};
    cn_agg_query q;
    cn_agg_where w = {CN_CGROUP_KEY_CGROUP, path ? path : ""};
    cn_agg_query_init(&q);
    q.from_ns = from;
    q.to_ns = to;
    q.where = &w;
    q.n_where = 1;
    l[n++] = (cn_fleet_label){(char *)"__name__", (char *)pyro_name(info->mode)};
    l[n++] = (cn_fleet_label){(char *)"service_name", src->service};
    l[n++] = (cn_fleet_label){(char *)"host", f->host};
    for (size_t i = 0; i < src->labels.n && n < CN_FLEET_PYROSCOPE_MAX_LABELS; i++)
        l[n++] = src->labels.v[i];
    int r = cn_fleet_cgroup_labels(path, &src->labels, &cg);
    for (size_t i = 0; r == 0 && i < cg.n && n < CN_FLEET_PYROSCOPE_MAX_LABELS; i++)
        l[n++] = cg.v[i];
    int64_t period =
        info->mode && strcmp(info->mode, "cpu") ? 0 : 1000000000LL / (info->freq ? info->freq : 99);
    FILE *out = r == 0 ? open_memstream(&mem, &len) : NULL;
    r = out ? cn_fmt_write_pprof_cpu(cn_live_session_profile(e->s), &q, period, out, &err)
            : -ENOMEM;
    if (out && fclose(out) != 0 && r == 0)
        r = -ENOMEM;
    /* Unique per host, session run, window and cgroup: HOST-STARTED-SESSION-FROM[-GROUP]
     * (the group's index in the window: the first series keeps the older id). */
    int k = snprintf(id, sizeof(id), "%s-%lld-%s-%lld", f->host, (long long)info->started_unix,
                     info->id, (long long)from);
    if (group && k > 0 && (size_t)k < sizeof(id))
        snprintf(id + k, sizeof(id) - (size_t)k, "-%zu", group);
    if (r == 0)
        r = cn_fleet_pyroscope_add(pb, l, n, mem, len, id, time_s);
    if (r < 0) {
        f->pyro_errors++;
        fprintf(stderr, "canopyd: fleet: Pyroscope profile of session %s: %s\n", info->id,
                err.msg[0] ? err.msg : strerror(-r));
    }
    free(mem);
    cn_fleet_labels_clear(&cg);
}

static void pyro_add(struct cn_d__fleet *f, cn_d__entry *e, const cn_live_session_info *info,
                     int64_t from, int64_t to, int64_t time_s, cn_fleet_batch *pb)
{
    const char **paths = NULL;
    size_t n = 0;
    if (cn_fleet_window_cgroups(cn_live_session_profile(e->s), from, to, &paths, &n) < 0) {
        f->pyro_errors++;
        return;
    }
    /* A window without samples still sends its (empty) series, as before cgroups. */
    for (size_t g = 0; g < n; g++)
        pyro_add_group(f, e, info, from, to, time_s, pb, paths[g], g);
    free(paths);
}

#define OTLP_MAX_ATTRS (1 + CN_FLEET_MAX_LABELS)

/* Submits the window [from, to) of e's profile as one OTLP export request: the session's
 * resources (cn_live_session_render_opts: processes, containers) with host.name =
 * fleet_host, service.name and the session's labels. Failures are counted (the window is
 * then missing from the OTLP endpoint only). */
static void otlp_add(struct cn_d__fleet *f, cn_d__entry *e, const cn_live_session_info *info,
                     int64_t from, int64_t to, int64_t time_s)
{
    struct cn_d__fleet_src *src = e->fleet;
    const char *keys[OTLP_MAX_ATTRS], *vals[OTLP_MAX_ATTRS];
    size_t n = 0;
    char *mem = NULL;
    size_t len = 0;
    cn_err err = {0};
    cn_agg_query q;
    cn_fmt_render_opts ro;
    cn_agg_query_init(&q);
    q.from_ns = from;
    q.to_ns = to;
    cn_live_session_render_opts(e->s, NULL, &ro);
    cn_fmt_otlp_opts oo = *ro.otlp;
    oo.host = f->host;
    keys[n] = "service.name";
    vals[n++] = src->service;
    for (size_t i = 0; i < src->labels.n && n < OTLP_MAX_ATTRS; i++, n++) {
        keys[n] = src->labels.v[i].key;
        vals[n] = src->labels.v[i].value;
    }
    oo.attr_keys = keys;
    oo.attr_values = vals;
    oo.n_attrs = n;
    cn_fleet_batch *b = cn_fleet_batch_new();
    FILE *out = open_memstream(&mem, &len);
    int r =
        !b || !out ? -ENOMEM : cn_fmt_write_otlp(cn_live_session_profile(e->s), &q, &oo, out, &err);
    if (out && fclose(out) != 0 && r == 0)
        r = -ENOMEM;
    if (r == 0)
        r = cn_fleet_otlp_set(b, mem, len, time_s);
    free(mem);
    if (r < 0) {
        f->otlp_errors++;
        fprintf(stderr, "canopyd: fleet: OTLP profile of session %s: %s\n", info->id,
                err.msg[0] ? err.msg : strerror(-r));
        cn_fleet_batch_free(b);
        return;
    }
    cn_fleet_pusher_submit(f->otlp, b);
}

/* Collects e's window into b, and into pb (may be NULL) as a Pyroscope profile (final:
 * everything left, whatever the symbols). */
static void collect_one(struct cn_d__fleet *f, cn_d__entry *e, cn_fleet_batch *b,
                        cn_fleet_batch *pb, bool final)
{
    struct cn_d__fleet_src *src = e->fleet;
    if (!src || src->done)
        return;
    cn_live_session *s = e->s;
    bool running = cn_live_session_state(s) == CN_LIVE_RUNNING && !final;
    int64_t end = running ? cn_live_session_now(s) - GUARD_NS : INT64_MAX;
    if (end <= src->cursor_ns)
        return;
    cn_live_session_info info;
    cn_live_session_info_get(s, &info);
    int64_t mono = cn_common_now_ns();
    bool allow = final || info.sym_pending == 0 ||
                 (src->held_since && mono - src->held_since >= HOLDBACK_NS);
    cn_fleet_window w = {src->cursor_ns, end, allow};
    cn_fleet_source so = {
        .time_s = info.started_unix + src->cursor_ns / 1000000000LL,
        .host = f->host,
        .service = src->service,
        .session = info.id,
        .labels = &src->labels,
    };
    uint64_t n_samples = 0;
    int r = cn_fleet_collect(b, cn_live_session_profile(s), &w, &so, f->seen, &n_samples);
    if (r == -EAGAIN) {
        if (!src->held_since)
            src->held_since = mono;
        return;
    }
    if (r < 0) {
        /* Out of memory: the window is retried next interval (rows it appended before
         * failing, if any, are then sent twice). */
        fprintf(stderr, "canopyd: fleet: session %s: %s\n", info.id, strerror(-r));
        return;
    }
    src->held_since = 0;
    if (pb && n_samples > 0)
        pyro_add(f, e, &info, src->cursor_ns, end, so.time_s, pb);
    if (f->otlp && n_samples > 0)
        otlp_add(f, e, &info, src->cursor_ns, end, so.time_s);
    src->cursor_ns = end;
    if (end == INT64_MAX) {
        src->done = true;
        f->sessions_done++;
    }
}

/* Hands the batches to their pushers (each takes its batch; empty ones are freed). */
static void submit(struct cn_d__fleet *f, cn_fleet_batch *b, cn_fleet_batch *pb)
{
    if (f->pusher && (b->sample_rows || b->stack_rows))
        cn_fleet_pusher_submit(f->pusher, b);
    else
        cn_fleet_batch_free(b);
    if (pb && pb->sample_rows)
        cn_fleet_pusher_submit(f->pyro, pb);
    else
        cn_fleet_batch_free(pb);
}

/* An interval's batches: *b for ClickHouse, *pb for Pyroscope (NULL when that push is off).
 * 0, or -ENOMEM with nothing allocated. */
static int new_batches(struct cn_d__fleet *f, cn_fleet_batch **b, cn_fleet_batch **pb)
{
    *b = cn_fleet_batch_new();
    *pb = f->pyro ? cn_fleet_batch_new() : NULL;
    if (*b && (!f->pyro || *pb))
        return 0;
    cn_fleet_batch_free(*b);
    cn_fleet_batch_free(*pb);
    *b = *pb = NULL;
    return -ENOMEM;
}

static void push(cn_d_server *srv, bool final)
{
    struct cn_d__fleet *f = srv->fleet;
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    if (f->pusher && cn_fleet_pusher_take_reset(f->pusher))
        cn_fleet_seen_reset(f->seen); /* definitions may have been dropped: write again */
    cn_fleet_batch *b, *pb;
    if (new_batches(f, &b, &pb) < 0)
        return;
    for (size_t i = 0; i < srv->n_entries; i++)
        collect_one(f, srv->entries[i], b, pb, final);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    f->collect_ns_last =
        (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000LL + t1.tv_nsec - t0.tv_nsec);
    f->collect_ns_total += f->collect_ns_last;
    f->pushes++;
    f->rows_collected += b->sample_rows;
    submit(f, b, pb);
}

void cn_d__fleet_tick(cn_d_server *srv)
{
    struct cn_d__fleet *f = srv->fleet;
    if (!f)
        return;
    int64_t now = cn_common_now_ns();
    if (now < f->next_ns)
        return;
    f->next_ns = now + f->interval_ns;
    push(srv, false);
}

void cn_d__fleet_forget(cn_d_server *srv, cn_d__entry *e)
{
    struct cn_d__fleet *f = srv->fleet;
    if (!f || !e->fleet || e->fleet->done)
        return;
    cn_fleet_batch *b, *pb;
    if (new_batches(f, &b, &pb) < 0)
        return;
    collect_one(f, e, b, pb, true);
    submit(f, b, pb);
}

void cn_d__fleet_shutdown(cn_d_server *srv)
{
    if (!srv->fleet)
        return;
    push(srv, true);
    /* What cannot be sent quickly stays in the spool for the next start. */
    if (srv->fleet->pusher)
        cn_fleet_pusher_flush(srv->fleet->pusher, 3000);
    if (srv->fleet->pyro)
        cn_fleet_pusher_flush(srv->fleet->pyro, 3000);
    if (srv->fleet->otlp)
        cn_fleet_pusher_flush(srv->fleet->otlp, 3000);
}

void cn_d__fleet_free(cn_d_server *srv)
{
    struct cn_d__fleet *f = srv->fleet;
    if (!f)
        return;
    cn_fleet_pusher_free(f->pusher);
    cn_fleet_pusher_free(f->pyro);
    cn_fleet_pusher_free(f->otlp);
    cn_fleet_seen_free(f->seen);
    cn_fleet_labels_clear(&f->labels);
    free(f);
    srv->fleet = NULL;
}

/* The Pyroscope pusher's counters (docs/fleet.md "Status"): profiles, not rows. */
static json_t *pyro_status(struct cn_d__fleet *f)
{
    cn_fleet_push_stats st;
    cn_fleet_pusher_stats(f->pyro, &st);
    return json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o?, s:I, s:I}", "url",
                     cn_proto_str(f->pyro_url), "profiles_sent", (json_int_t)st.rows_sent,
                     "profiles_queued", (json_int_t)st.rows_queued, "profiles_dropped",
                     (json_int_t)st.rows_dropped, "spool_bytes", (json_int_t)st.spool_bytes,
                     "failures", (json_int_t)st.failures, "encode_errors",
                     (json_int_t)f->pyro_errors, "lag_s", (json_int_t)st.lag_s, "last_error",
                     st.last_error[0] ? cn_proto_str(st.last_error) : NULL, "last_success",
                     (json_int_t)st.last_success_s, "batches_sent", (json_int_t)st.batches_sent);
}

/* The OTLP pusher's counters (docs/fleet.md "Status"): requests, not rows. */
static json_t *otlp_status(struct cn_d__fleet *f)
{
    cn_fleet_push_stats st;
    cn_fleet_pusher_stats(f->otlp, &st);
    return json_pack(
        "{s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o?, s:I}", "url", cn_proto_str(f->otlp_url),
        "profiles_sent", (json_int_t)st.rows_sent, "profiles_queued", (json_int_t)st.rows_queued,
        "profiles_dropped", (json_int_t)st.rows_dropped, "spool_bytes", (json_int_t)st.spool_bytes,
        "failures", (json_int_t)st.failures, "encode_errors", (json_int_t)f->otlp_errors, "lag_s",
        (json_int_t)st.lag_s, "last_error", st.last_error[0] ? cn_proto_str(st.last_error) : NULL,
        "last_success", (json_int_t)st.last_success_s);
}

json_t *cn_d__fleet_status(cn_d_server *srv)
{
    struct cn_d__fleet *f = srv->fleet;
    cn_fleet_push_stats st = {0};
    size_t pushed = 0;
    if (!f)
        return NULL;
    for (size_t i = 0; i < srv->n_entries; i++)
        if (srv->entries[i]->fleet && !srv->entries[i]->fleet->done)
            pushed++;
    if (f->pusher)
        cn_fleet_pusher_stats(f->pusher, &st);
    json_t *j =
        json_pack("{s:o?, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o?, s:f, "
                  "s:f, s:I}",
                  "url", f->pusher ? cn_proto_str(f->url) : NULL, "host", cn_proto_str(f->host),
                  "sessions", (json_int_t)pushed, "rows_sent", (json_int_t)st.rows_sent,
                  "rows_queued", (json_int_t)st.rows_queued, "rows_dropped",
                  (json_int_t)st.rows_dropped, "batches_sent", (json_int_t)st.batches_sent,
                  "batches_queued", (json_int_t)st.batches_queued, "batches_dropped",
                  (json_int_t)st.batches_dropped, "spool_bytes", (json_int_t)st.spool_bytes,
                  "failures", (json_int_t)st.failures, "lag_s", (json_int_t)st.lag_s, "last_error",
                  st.last_error[0] ? cn_proto_str(st.last_error) : NULL, /* a server's words */
                  "collect_ms_last", (double)f->collect_ns_last / 1e6, "collect_ms_total",
                  (double)f->collect_ns_total / 1e6, "last_success", (json_int_t)st.last_success_s);
    if (j && f->pyro)
        json_object_set_new(j, "pyroscope", pyro_status(f));
    if (j && f->otlp)
        json_object_set_new(j, "otlp", otlp_status(f));
    return j;
}
