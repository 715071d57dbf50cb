/* cmd_admin.c — the session commands that only talk to canopyd (sessions, stop, rm, save,
 * status), and those that read a session or a file alike (lines, timeline on sessions).
 * Output shapes are docs/cli.md's; the daemon's JSON is passed through with the protocol
 * envelope (v, ok, id) removed.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "client.h"
#include "cn_common.h"
#include "live.h"

static bool is_file(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The answer without the protocol envelope (a new reference). */
static json_t *strip_envelope(const json_t *resp)
{
    json_t *o = json_deep_copy(resp);
    if (o) {
        json_object_del(o, "v");
        json_object_del(o, "ok");
        json_object_del(o, "id");
    }
    return o;
}

/* Parses, connects (a daemon is required) and sends one request built by the caller. */
typedef struct simple_cmd {
    cn_cli_live_args a;
    cn_cli_conn *c;
    json_t *req, *resp;
} simple_cmd;

/* Writes the daemon's answer s->resp, envelope removed, as one JSON line on stdout.
 * Returns an exit status. */
static int emit_answer(const simple_cmd *s)
{
    json_t *doc = strip_envelope(s->resp);
    int status = doc ? cn_cli_emit_json(s->a.cmd, doc, NULL) : CN_EXIT_FAIL;
    json_decref(doc);
    return status;
}

static void simple_clear(simple_cmd *s)
{
    json_decref(s->resp);
    json_decref(s->req);
    cn_cli_conn_free(s->c);
    cn_cli_live_args_clear(&s->a);
}

/* Parses argv with flags; expects n_pos positionals; connects. Returns -1 to go on or an
 * exit status. */
static int simple_begin(simple_cmd *s, const char *cmd, int argc, char **argv, unsigned flags,
                        int n_pos, const char *usage, void (*help)(void))
{
    memset(s, 0, sizeof(*s));
    cn_cli_live_args_init(&s->a, cmd);
    int status = cn_cli_live_parse(&s->a, argc, argv, flags, help);
    if (status >= 0)
        return status;
    if (s->a.n_pos != n_pos) {
        fprintf(stderr, "canopy %s: usage: canopy %s %s\n", cmd, cmd, usage);
        return CN_EXIT_USAGE;
    }
    status = cn_cli_live_connect(&s->a, true, &s->c);
    return status ? status : -1;
}

/* Sends request a.cmd on session a.pos[0] with the QUERY fields of a.q and writes the
 * rendered answer (resp[key] or its output) to a.q.output. Returns an exit status. */
static int query_session(simple_cmd *s, const char *key)
{
    s->req = cn_proto_request(s->a.cmd);
    if (!s->req || json_object_set_new(s->req, "session", json_string(s->a.pos[0])) ||
        cn_fmt_spec_to_json(&s->a.q.spec, s->req) < 0) {
        fprintf(stderr, "canopy %s: out of memory\n", s->a.cmd);
        return CN_EXIT_FAIL;
    }
    /* A raw payload: the rendered bytes are written through, never parsed as JSON. */
    return cn_cli_request_emit(s->a.cmd, s->c, s->req, key, s->a.q.output);
}

/* ---------------------------------------------------------------------------------------
 * sessions
 */

static void sessions_help(void)
{
    cn_cli_help("sessions");
}

/* "97%": the share of stacks with user frames whose unwind completed; "-" without any. */
static void unwound_share(const json_t *s, char *buf, size_t size)
{
    json_int_t all = json_integer_value(json_object_get(s, "user_stacks"));
    json_int_t done =
        json_integer_value(json_object_get(json_object_get(s, "unwind_outcomes"), "complete"));
    if (all > 0)
        snprintf(buf, size, "%.0f%%", 100.0 * (double)done / (double)all);
    else
        snprintf(buf, size, "-");
}

/* "16384", "1024 adaptive" (auto's adaptive copy: docs/perf-sampler.md), "-" without
 * stack copies or for a reloaded session. */
static void stack_copy(const json_t *s, char *buf, size_t size)
{
    const json_t *c = json_object_get(s, "stack_copy");
    json_int_t bytes = json_integer_value(json_object_get(c, "bytes"));
    if (bytes > 0)
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT "%s", bytes,
                 json_is_true(json_object_get(c, "adaptive")) ? " adaptive" : "");
    else
        snprintf(buf, size, "-");
}

/* The string o[key] (dflt when absent) in the terminal's form (cn_term_str): names and
 * comms are other users' choices (docs/cli.md "Names in text output"). Returns buf. */
static const char *jterm(char *buf, size_t cap, const json_t *o, const char *key, const char *dflt)
{
    const char *v = json_string_value(json_object_get(o, key));
    return cn_term_str(buf, cap, v ? v : dflt);
}

static void print_session_row(const json_t *s)
{
    const json_t *target = json_object_get(s, "target");
    char tgt[160], started[32] = "-", unwound[16], copy[40];
    char id[64], name[800], comm[128], state[32], mode[32], event[400], python[320];
    unwound_share(s, unwound, sizeof(unwound));
    stack_copy(s, copy, sizeof(copy));
    const char *cg = json_string_value(json_object_get(s, "cgroup"));
    const char *ctr = json_string_value(json_object_get(s, "container"));
    if (ctr)
        snprintf(tgt, sizeof(tgt), "container %.12s", ctr);
    else if (cg)
        cn_term_str(tgt, sizeof(tgt), cg); /* names chosen by whoever made the cgroup */
    else if (json_is_string(target))
        cn_term_str(tgt, sizeof(tgt), json_string_value(target));
    else
        snprintf(tgt, sizeof(tgt), "%" JSON_INTEGER_FORMAT " %s",
                 json_integer_value(json_object_get(target, "pid")),
                 jterm(comm, sizeof(comm), target, "comm", "?"));
    time_t t = (time_t)json_integer_value(json_object_get(s, "started"));
    struct tm tm;
    if (t && localtime_r(&t, &tm))
        strftime(started, sizeof(started), "%Y-%m-%d %H:%M:%S", &tm);
    printf("%-6s %-12s %-22s %-8s %-7s %-16s %5" JSON_INTEGER_FORMAT " %9" JSON_INTEGER_FORMAT
           " %6" JSON_INTEGER_FORMAT " %7" JSON_INTEGER_FORMAT " %7s %6" JSON_INTEGER_FORMAT
           " %-14s %-19s %s\n",
           jterm(id, sizeof(id), s, "id", "?"), jterm(name, sizeof(name), s, "name", "-"), tgt,
           jterm(state, sizeof(state), s, "state", "?"),
           jterm(mode, sizeof(mode), s, "mode", "cpu"),
           jterm(event, sizeof(event), s, "event", "?"),
           json_integer_value(json_object_get(s, "freq")),
           json_integer_value(json_object_get(s, "samples")),
           json_integer_value(json_object_get(s, "lost")),
           json_integer_value(json_object_get(s, "threads")), unwound,
           json_integer_value(json_object_get(s, "unsymbolized")), copy, started,
           jterm(python, sizeof(python), json_object_get(s, "python"), "state", "-"));
}

int cn_cmd_sessions(int argc, char **argv)
{
    simple_cmd s;
    int status =
        simple_begin(&s, "sessions", argc, argv, CN_LIVE_SIMPLE_FORMAT, 0, "", sessions_help);
    if (status >= 0)
        goto out;
    status = cn_cli_request(s.a.cmd, s.c, s.req = cn_proto_request("sessions"), &s.resp);
    if (status)
        goto out;
    const json_t *list = json_object_get(s.resp, "sessions");
    if (!json_is_array(list)) {
        fprintf(stderr, "canopy sessions: the daemon's answer has no session list\n");
        status = CN_EXIT_FAIL;
        goto out;
    }
    if (s.a.json) {
        status = emit_answer(&s);
        goto out;
    }
    printf("%-6s %-12s %-22s %-8s %-7s %-16s %5s %9s %6s %7s %7s %6s %-14s %-19s %s\n", "ID",
           "NAME", "TARGET", "STATE", "MODE", "EVENT", "FREQ", "SAMPLES", "LOST", "THREADS",
           "UNWOUND", "UNSYM", "STACK COPY", "STARTED", "PYTHON FRAMES");
    size_t i;
    const json_t *e;
    json_array_foreach(list, i, e) print_session_row(e);
out:
    simple_clear(&s);
    return status;
}

/* ---------------------------------------------------------------------------------------
 * status
 */

static void status_help(void)
{
    cn_cli_help("status");
}
/* One line of `canopy status` for a push target (docs/fleet.md "Status"): its URL, the
 * host it writes as (NULL: not shown), the UNITs (rows, profiles) sent, queued and
 * dropped, the lag and the last error. */
static void print_push_status(const char *label, const json_t *o, const char *unit,
                              const char *host)
{
    char key[32];
    json_int_t n[3];
    static const char *const what[] = {"sent", "queued", "dropped"};
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "%s_%s", unit, what[i]);
        n[i] = json_integer_value(json_object_get(o, key));
    }
    /* The last error quotes a server's answer: the terminal rule (cn_term_str). */
    const char *e = json_string_value(json_object_get(o, "last_error"));
    char url[1024], hst[512], err[1024];
    printf("%s: %s%s%s, %" JSON_INTEGER_FORMAT " %s sent, %" JSON_INTEGER_FORMAT
           " queued, %" JSON_INTEGER_FORMAT " dropped, lag %" JSON_INTEGER_FORMAT " s%s%s\n",
           label, jterm(url, sizeof(url), o, "url", "?"), host ? " as " : "",
           cn_term_str(hst, sizeof(hst), host), n[0], unit, n[1], n[2],
           json_integer_value(json_object_get(o, "lag_s")), e ? "; last error: " : "",
           cn_term_str(err, sizeof(err), e));
}

int cn_cmd_status(int argc, char **argv)
{
    simple_cmd s;
    int status = simple_begin(&s, "status", argc, argv, CN_LIVE_SIMPLE_FORMAT, 0, "", status_help);
    if (status >= 0)
        goto out;
    status = cn_cli_request(s.a.cmd, s.c, s.req = cn_proto_request("status"), &s.resp);
    if (status)
        goto out;
    if (s.a.json) {
        status = emit_answer(&s);
        goto out;
    }
    const json_t *r = s.resp;
    char version[64], loop[64];
    printf("canopyd %s: up %.1f s, %" JSON_INTEGER_FORMAT " sessions, %.0f samples/s, "
           "%" JSON_INTEGER_FORMAT " lost, %.1f MiB resident (%.1f MiB anonymous, %.1f MiB "
           "file-backed), event loop %s\n",
           jterm(version, sizeof(version), r, "version", "?"),
           json_number_value(json_object_get(r, "uptime_s")),
           json_integer_value(json_object_get(r, "sessions")),
           json_number_value(json_object_get(r, "samples_per_s")),
           json_integer_value(json_object_get(r, "lost")),
           json_number_value(json_object_get(r, "rss_bytes")) / (1024.0 * 1024.0),
           json_number_value(json_object_get(r, "rss_anon_bytes")) / (1024.0 * 1024.0),
           json_number_value(json_object_get(r, "rss_file_bytes")) / (1024.0 * 1024.0),
           jterm(loop, sizeof(loop), r, "event_loop", "?"));
    char unwound[16];
    unwound_share(r, unwound, sizeof(unwound));
    printf("stacks: %" JSON_INTEGER_FORMAT " with user frames, %s unwound completely; "
           "%" JSON_INTEGER_FORMAT " frames unsymbolized\n",
           json_integer_value(json_object_get(r, "user_stacks")), unwound,
           json_integer_value(json_object_get(r, "unsymbolized")));
    const json_t *sc = json_object_get(r, "symbol_cache");
    if (json_is_object(sc))
        printf("symbol cache: %" JSON_INTEGER_FORMAT " objects, %.1f of %.1f MiB heap, %.1f of "
               "%.1f MiB of debug data read (released after %.0f s idle: %" JSON_INTEGER_FORMAT
               "; libdw opened %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
               " units indexed), %" JSON_INTEGER_FORMAT " evicted\n",
               json_integer_value(json_object_get(sc, "objects")),
               json_number_value(json_object_get(sc, "heap_bytes")) / (1024.0 * 1024.0),
               json_number_value(json_object_get(sc, "max_heap_bytes")) / (1024.0 * 1024.0),
               json_number_value(json_object_get(sc, "mapped_bytes")) / (1024.0 * 1024.0),
               json_number_value(json_object_get(sc, "max_mapped_bytes")) / (1024.0 * 1024.0),
               json_number_value(json_object_get(sc, "debug_idle_s")),
               json_integer_value(json_object_get(sc, "debug_releases")),
               json_integer_value(json_object_get(sc, "debug_opens")),
               json_integer_value(json_object_get(sc, "debug_units")),
               json_integer_value(json_object_get(sc, "evictions")));
    const json_t *uc = json_object_get(r, "unwind_cache");
    if (json_is_object(uc))
        printf("unwind tables: %" JSON_INTEGER_FORMAT " files (%" JSON_INTEGER_FORMAT
               " mapped now), %.1f MiB; unmapped %.1f of %.1f MiB kept, %" JSON_INTEGER_FORMAT
               " loads, %" JSON_INTEGER_FORMAT " hits, %" JSON_INTEGER_FORMAT " evicted\n",
               json_integer_value(json_object_get(uc, "files")),
               json_integer_value(json_object_get(uc, "in_use")),
               json_number_value(json_object_get(uc, "bytes")) / (1024.0 * 1024.0),
               json_number_value(json_object_get(uc, "unused_bytes")) / (1024.0 * 1024.0),
               json_number_value(json_object_get(uc, "max_unused_bytes")) / (1024.0 * 1024.0),
               json_integer_value(json_object_get(uc, "loads")),
               json_integer_value(json_object_get(uc, "hits")),
               json_integer_value(json_object_get(uc, "evictions")));
    const json_t *ma = json_object_get(r, "malloc");
    if (json_is_object(ma))
        printf("malloc: %.1f MiB in use (%.1f MiB in blocks of their own), %.1f MiB free in "
               "its heaps of %.1f MiB\n",
               json_number_value(json_object_get(ma, "in_use_bytes")) / (1024.0 * 1024.0),
               json_number_value(json_object_get(ma, "mmapped_bytes")) / (1024.0 * 1024.0),
               json_number_value(json_object_get(ma, "free_bytes")) / (1024.0 * 1024.0),
               json_number_value(json_object_get(ma, "heap_bytes")) / (1024.0 * 1024.0));
    const json_t *fl = json_object_get(r, "fleet"); /* docs/fleet.md "Status" */
    if (json_string_value(json_object_get(fl, "url")))
        print_push_status("fleet", fl, "rows",
                          json_string_value(json_object_get(fl, "host")) ?: "?");
    const json_t *py = json_object_get(fl, "pyroscope");
    if (py)
        print_push_status("pyroscope", py, "profiles", NULL);
    const json_t *ot = json_object_get(fl, "otlp");
    if (ot)
        print_push_status("otlp", ot, "profiles", NULL);
out:
    simple_clear(&s);
    return status;
}

/* ---------------------------------------------------------------------------------------
 * stop, rm
 */

static void stop_help(void)
{
    cn_cli_help("stop");
}

static void rm_help(void)
{
    cn_cli_help("rm");
}

static int session_cmd(int argc, char **argv, const char *cmd, void (*help)(void))
{
    simple_cmd s;
    int status = simple_begin(&s, cmd, argc, argv, 0, 1, "SESSION", help);
    if (status >= 0)
        goto out;
    s.req = cn_proto_request(cmd);
    if (s.req && json_object_set_new(s.req, "session", json_string(s.a.pos[0]))) {
        json_decref(s.req);
        s.req = NULL;
    }
    status = cn_cli_request(cmd, s.c, s.req, &s.resp);
    if (status)
        goto out;
    if (!strcmp(cmd, "stop")) {
        const json_t *sess = json_object_get(s.resp, "session");
        char id[128], state[64];
        printf("%s: %s\n", jterm(id, sizeof(id), sess, "id", s.a.pos[0]),
               jterm(state, sizeof(state), sess, "state", "stopped"));
    }
out:
    simple_clear(&s);
    return status;
}

int cn_cmd_stop(int argc, char **argv)
{
    return session_cmd(argc, argv, "stop", stop_help);
}

int cn_cmd_rm(int argc, char **argv)
{
    return session_cmd(argc, argv, "rm", rm_help);
}

/* ---------------------------------------------------------------------------------------
 * save
 */

static void save_help(void)
{
    cn_cli_help("save");
}

int cn_cmd_save(int argc, char **argv)
{
    simple_cmd s;
    int status =
        simple_begin(&s, "save", argc, argv, CN_LIVE_QUERY, 1, "SESSION -o FILE", save_help);
    if (status >= 0)
        goto out;
    cn_cli_query *q = &s.a.q;
    cn_fmt_format f;
    if (!q->output) {
        fprintf(stderr, "canopy save: missing -o FILE\n");
        status = CN_EXIT_USAGE;
        goto out;
    }
    if (!q->format_given && cn_fmt_format_from_path(q->output, &f) < 0)
        q->spec.format = CN_FMT_CANOPY;
    status = query_session(&s, "tree");
out:
    simple_clear(&s);
    return status;
}

/* ---------------------------------------------------------------------------------------
 * lines
 */

static void lines_help(void)
{
    cn_cli_help("lines");
}

/* Text form of the lines JSON, into a malloc'ed buffer. */
static char *lines_text(const json_t *o, size_t *len)
{
    char *buf = NULL;
    FILE *m = open_memstream(&buf, len);
    if (!m)
        return NULL;
    /* Names from binaries: the terminal rule (docs/cli.md "Names in text output"). */
    char lib_t[1024], file_t[1024], func_t[2048], unit_t[64];
    const char *lib = json_string_value(json_object_get(o, "lib"));
    const char *file = json_string_value(json_object_get(o, "file"));
    const char *unit = jterm(unit_t, sizeof(unit_t), o, "unit", "samples");
    lib = lib ? cn_term_str(lib_t, sizeof(lib_t), lib) : NULL;
    file = file ? cn_term_str(file_t, sizeof(file_t), file) : NULL;
    double total = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(o, "addresses"), i, e) total +=
        json_number_value(json_object_get(e, "self"));
    const char *func = jterm(func_t, sizeof(func_t), o, "function", "?");
    size_t n_lines = json_array_size(json_object_get(o, "lines"));
    size_t n_addrs = json_array_size(json_object_get(o, "addresses"));
    fprintf(m, "%s%s%s%s%s  (self, %s)\n", func, lib ? "  " : "", lib ? lib : "", file ? "  " : "",
            file ? file : "", unit);
    /* Say why a table would be empty instead of printing its bare header (docs/cli.md
     * "canopy lines"). */
    if (n_lines == 0 && n_addrs > 0)
        fprintf(m,
                "no line info for %s: no debug info for %s (or a profile format without "
                "lines); per-address costs only\n",
                func, lib ? lib : "its library");
    else if (n_lines == 0)
        fprintf(m,
                "no line or address info for %s: no sample has it innermost at a known "
                "address (folded stacks have none)\n",
                func);
    if (n_lines > 0)
        fprintf(m, "  %8s %8s %7s\n", "LINE", "SELF", "SELF%");
    json_array_foreach(json_object_get(o, "lines"), i, e)
    {
        double self = json_number_value(json_object_get(e, "self"));
        fprintf(m, "  %8" JSON_INTEGER_FORMAT " %8.6g %6.1f%%\n",
                json_integer_value(json_object_get(e, "line")), self,
                total ? 100 * self / total : 0);
    }
    if (n_addrs > 0)
        fprintf(m, "  %8s %8s %7s\n", "OFFSET", "SELF", "SELF%");
    json_array_foreach(json_object_get(o, "addresses"), i, e)
    {
        double self = json_number_value(json_object_get(e, "self"));
        fprintf(m, "  %#8llx %8.6g %6.1f%%\n",
                (unsigned long long)json_integer_value(json_object_get(e, "offset")), self,
                total ? 100 * self / total : 0);
    }
    if (fclose(m) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

int cn_cmd_lines(int argc, char **argv)
{
    cn_cli_live_args a;
    cn_cli_conn *c = NULL;
    cn_agg_profile *p = NULL;
    json_t *req = NULL, *resp = NULL, *doc = NULL;
    int status;

    cn_cli_live_args_init(&a, "lines");
    status = cn_cli_live_parse(&a, argc, argv, CN_LIVE_QUERY, lines_help);
    if (status >= 0)
        goto out;
    status = CN_EXIT_USAGE;
    if (a.n_pos != 2) {
        fprintf(stderr, "canopy lines: usage: canopy lines SESSION|FILE F\n");
        goto out;
    }
    if (a.q.spec.format != CN_FMT_TEXT && a.q.spec.format != CN_FMT_JSON) {
        fprintf(stderr, "canopy lines: --format expects text or json\n");
        goto out;
    }
    if (is_file(a.pos[0])) {
        cn_err err = {0};
        int rc = cn_fmt_import_file(a.pos[0], &p, &err);
        if (rc < 0) {
            fprintf(stderr, "canopy lines: %s\n",
                    CN_TERM_STR(err.msg[0] ? err.msg : strerror(-rc)));
            status = rc == -ENOMEM ? CN_EXIT_FAIL : CN_EXIT_USAGE;
            goto out;
        }
        cn_fmt_render_opts o;
        cn_fmt_render_opts_init(&o);
        rc = cn_fmt_lines_json(p, &a.q.spec, &o, a.pos[1], &doc, &err);
        if (rc < 0) {
            fprintf(stderr, "canopy: %s\n", CN_TERM_STR(err.msg[0] ? err.msg : strerror(-rc)));
            status = cn_cli_status_of(rc);
            goto out;
        }
    } else {
        status = cn_cli_live_connect(&a, true, &c);
        if (status)
            goto out;
        req = cn_proto_request("lines");
        if (!req || json_object_set_new(req, "session", json_string(a.pos[0])) ||
            json_object_set_new(req, "function", json_string(a.pos[1])) ||
            cn_fmt_spec_to_json(&a.q.spec, req) < 0) {
            fprintf(stderr, "canopy lines: out of memory\n");
            status = CN_EXIT_FAIL;
            goto out;
        }
        /* The daemon answers JSON; the text form is made here. */
        json_object_set_new(req, "format", json_string("json"));
        status = cn_cli_request(a.cmd, c, req, &resp);
        if (status)
            goto out;
        doc = json_incref(json_object_get(resp, "lines"));
        if (!json_is_object(doc)) {
            fprintf(stderr, "canopy lines: the daemon's answer has no lines\n");
            status = CN_EXIT_FAIL;
            goto out;
        }
    }
    if (a.q.spec.format == CN_FMT_JSON) {
        status = cn_cli_emit_json(a.cmd, doc, a.q.output);
    } else {
        size_t len;
        char *text = lines_text(doc, &len);
        status = text ? cn_cli_emit(a.q.output, text, len) : CN_EXIT_FAIL;
        free(text);
    }
out:
    json_decref(doc);
    json_decref(resp);
    json_decref(req);
    cn_agg_profile_free(p);
    cn_cli_conn_free(c);
    cn_cli_live_args_clear(&a);
    return status;
}

/* ---------------------------------------------------------------------------------------
 * timeline on a session (cmd_open.c handles files)
 */

static void timeline_help(void)
{
    cn_cli_help("timeline");
}

int cn_cli_live_timeline(int argc, char **argv)
{
    simple_cmd s;
    int status =
        simple_begin(&s, "timeline", argc, argv, CN_LIVE_QUERY, 1, "SESSION|FILE", timeline_help);
    if (status >= 0)
        goto out;
    if ((status = cn_cli_timeline_check(&s.a.q)) != CN_EXIT_OK)
        goto out;
    /* canopyd renders every timeline format (speedscope too) with the one renderer. */
    status = query_session(&s, "timeline");
out:
    simple_clear(&s);
    return status;
}
