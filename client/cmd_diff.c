/* cmd_diff.c — `canopy diff BASE NEW [QUERY] [--no-normalize]`: a differential tree.
 *
 * BASE and NEW are profile files or live sessions, optionally restricted to a time window
 * with `FILE@FROM..TO` / `SESSION@FROM..TO` (seconds since the profile's or session's
 * start; either end may be omitted). An existing path wins over the window syntax and over
 * a session of the same name; an argument that names no existing file and has no '/' is a
 * session, whose whole lossless profile is fetched from canopyd (live.h's
 * cn_cli_fetch_session: the protocol's `save` with format canopy) and then treated exactly
 * like a file. A single argument that is already a differential profile (a three-column
 * folded file, or `--format canopy` output of this command) is accepted as well. The
 * engine builds one differential profile (aggregate's cn_agg_diff_profile), then runs
 * QUERY's transforms and view on both sides at once (cn_agg_diff_run): weights are
 * NEW − BASE after scaling BASE to NEW's total, unless --no-normalize. Outputs: text,
 * json, folded (three columns, readable back), svg, and
 * canopy (the differential profile itself).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client.h"
#include "live.h"

/* diff's own options: the parser in cn_cmd_diff matches argv against them before the
 * QUERY options; --help, the manual and the completion print them. */
enum { D_NO_NORMALIZE, D_NORMALIZE, D_SOCKET };

const cn_opt cn_cli_diff_opts[] = {
    {"--no-normalize", NULL, NULL, NULL, "raw weights: BASE is not scaled to NEW's total",
     D_NO_NORMALIZE, 0},
    {"--normalize", NULL, NULL, "on", "scale BASE to NEW's total", D_NORMALIZE, 0},
    {"--socket", NULL, "PATH",
     "$CANOPY_SOCKET, /run/canopy/canopy.sock, $XDG_RUNTIME_DIR/canopy.sock",
     "canopyd's socket, for session arguments", D_SOCKET, 0},
    {NULL, NULL, NULL, NULL, NULL, 0, 0},
};

/* One side: the file or session and its window. */
typedef struct side {
    char *path;          /* owned: the file, or the session's id or name */
    bool session;        /* path names a canopyd session */
    double from_s, to_s; /* NAN = open */
} side;

static int parse_seconds(const char *s, size_t len, double *out)
{
    char buf[64];
    if (len == 0) {
        *out = NAN;
        return 0;
    }
    if (len >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if (*end || !isfinite(v) || v < 0)
        return -EINVAL;
    *out = v;
    return 0;
}

/* Whether path (a file or session argument without its window) names a session: no
 * existing file there, and no '/' (a missing file path stays a file, so that its error is
 * the importer's "no such file", exit 2). */
static bool is_session(const char *path)
{
    struct stat st;
    return path[0] && stat(path, &st) != 0 && !strchr(path, '/');
}

/* Splits ARG into a file or session and a window. Returns 0 or an exit status after an
 * error. */
static int parse_side(const char *arg, side *s)
{
    struct stat st;
    s->from_s = s->to_s = NAN;
    const char *at = strrchr(arg, '@');
    if (stat(arg, &st) == 0 || !at) {
        s->path = strdup(arg);
        s->session = s->path && is_session(s->path);
        return s->path ? 0 : CN_EXIT_FAIL;
    }
    const char *dots = strstr(at + 1, "..");
    if (!dots || parse_seconds(at + 1, (size_t)(dots - at - 1), &s->from_s) < 0 ||
        parse_seconds(dots + 2, strlen(dots + 2), &s->to_s) < 0 ||
        (!isnan(s->from_s) && !isnan(s->to_s) && s->to_s <= s->from_s)) {
        fprintf(stderr,
                "canopy diff: bad time window in '%s' (expected FILE@FROM..TO or "
                "SESSION@FROM..TO, seconds)\n",
                arg);
        return CN_EXIT_USAGE;
    }
    s->path = strndup(arg, (size_t)(at - arg));
    s->session = s->path && is_session(s->path);
    return s->path ? 0 : CN_EXIT_FAIL;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

/* Connects to canopyd once, for the first session side (*c stays for the second).
 * Returns an exit status after printing one line. */
static int connect_once(const char *socket, const char *session, cn_cli_conn **c)
{
    char path[256];
    if (*c)
        return CN_EXIT_OK;
    int rc = cn_cli_connect(socket, c, path, sizeof(path));
    if (rc < 0) {
        fprintf(stderr,
                "canopy diff: '%s' is no file, and no daemon answers at %s to look up a "
                "session (%s)\n",
                session, path, strerror(-rc));
        return CN_EXIT_FAIL;
    }
    return CN_EXIT_OK;
}

/* Loads one side: a file, or a session's lossless profile from canopyd over *c
 * (connected on first use; the caller frees it). Returns an exit status. */
static int load(const side *s, const char *socket, cn_cli_conn **c, cn_agg_profile **out)
{
    if (s->session) {
        int status = connect_once(socket, s->path, c);
        return status ? status : cn_cli_fetch_session("diff", *c, s->path, out);
    }
    cn_err err = {0};
    int rc = cn_fmt_import_file(s->path, out, &err);
    if (rc < 0) {
        fprintf(stderr, "canopy: %s\n", CN_TERM_STR(err.msg[0] ? err.msg : strerror(-rc)));
        return rc == -ENOMEM ? CN_EXIT_FAIL : CN_EXIT_USAGE;
    }
    return CN_EXIT_OK;
}

/* The side's query: the window (or QUERY's range), QUERY's thread filters, no transforms
 * (they run on the differential profile). */
static void side_query(const cn_agg_profile *p, const cn_cli_query *q, const side *s,
                       cn_agg_query *out)
{
    cn_agg_query r;
    cn_fmt_spec_resolve(p, &q->spec, NULL, &r);
    cn_agg_query_init(out);
    out->from_ns = r.from_ns;
    out->to_ns = r.to_ns;
    if (!isnan(s->from_s))
        out->from_ns = (int64_t)llround(s->from_s * 1e9);
    if (!isnan(s->to_s))
        out->to_ns = (int64_t)llround(s->to_s * 1e9);
    out->tid = r.tid;
    out->pid = r.pid;
}

/* Whether a session side still samples (state running), asked over c. */
static bool side_running(cn_cli_conn *c, const side *s)
{
    json_t *e = s->session && c ? cn_cli_session_entry(c, s->path) : NULL;
    bool running = e && !strcmp(json_string_value(json_object_get(e, "state")) ?: "", "running");
    json_decref(e);
    return running;
}

/* Builds (or loads) the differential profile. Returns an exit status; *out on success, and
 * *live (may be NULL) as cn_cli_diff_profile says. */
static int make_diff(side *sides, int n_sides, cn_cli_query *q, const char *socket,
                     cn_agg_profile **out, bool *live)
{
    cn_agg_profile *p[2] = {NULL, NULL};
    cn_cli_conn *c = NULL;
    int status;
    for (int i = 0; i < n_sides; i++)
        if ((status = load(&sides[i], socket, &c, &p[i])) != CN_EXIT_OK)
            goto out;
    if (live) {
        *live = false;
        for (int i = 0; i < n_sides; i++)
            *live = *live || side_running(c, &sides[i]);
    }
    if (n_sides == 1) {
        if (!cn_agg_is_diff(p[0])) {
            fprintf(stderr, "canopy diff: %s is not a differential profile (give BASE and NEW)\n",
                    sides[0].path);
            status = CN_EXIT_USAGE;
            goto out;
        }
        *out = p[0];
        p[0] = NULL;
        status = CN_EXIT_OK;
        goto out;
    }
    cn_agg_query qs[2];
    for (int i = 0; i < 2; i++)
        side_query(p[i], q, &sides[i], &qs[i]);
    cn_err err = {0};
    int rc = cn_agg_diff_profile(p[0], &qs[0], p[1], &qs[1], out, &err);
    if (rc < 0) {
        fprintf(stderr, "canopy: %s\n", CN_TERM_STR(err.msg[0] ? err.msg : strerror(-rc)));
        status = rc == -ENOMEM ? CN_EXIT_FAIL : CN_EXIT_USAGE;
        goto out;
    }
    status = CN_EXIT_OK;
out:
    cn_cli_conn_free(c);
    cn_agg_profile_free(p[0]);
    cn_agg_profile_free(p[1]);
    return status;
}

static void diff_title(const side *sides, int n_sides, char *title, size_t size)
{
    if (n_sides == 2)
        snprintf(title, size, "%s -> %s", base_name(sides[0].path), base_name(sides[1].path));
    else
        snprintf(title, size, "%s", base_name(sides[0].path));
}

int cn_cli_diff_profile(const char *const *args, int n_args, cn_cli_query *q, const char *socket,
                        cn_agg_profile **out, char *title, size_t title_size, bool *live)
{
    side sides[2] = {{0}};
    int n_sides = 0, status = CN_EXIT_USAGE;

    if (n_args < 1 || n_args > 2) {
        fprintf(stderr, "canopy: a differential profile needs BASE and NEW\n");
        return CN_EXIT_USAGE;
    }
    for (; n_sides < n_args; n_sides++)
        if ((status = parse_side(args[n_sides], &sides[n_sides])) != CN_EXIT_OK)
            goto out;
    if ((status = make_diff(sides, n_sides, q, socket, out, live)) == CN_EXIT_OK)
        diff_title(sides, n_sides, title, title_size);
out:
    free(sides[0].path);
    free(sides[1].path);
    return status;
}

int cn_cmd_diff(int argc, char **argv)
{
    cn_cli_query q;
    side sides[2] = {{0}};
    int n_sides = 0, status = CN_EXIT_USAGE;
    bool normalize = true;
    const char *socket = NULL; /* --socket, borrowed from argv */
    cn_agg_profile *d = NULL;

    cn_cli_query_init(&q);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cn_cli_help("diff");
            status = CN_EXIT_OK;
            goto out;
        }
        const char *v;
        const cn_opt *o = cn_opt_match(cn_cli_diff_opts, 0, argc, argv, &i, &v);
        if (o && o->arg && !v) {
            fprintf(stderr, "canopy diff: %s needs a value\n", o->lng);
            goto out;
        }
        if (o) {
            if (o->id == D_SOCKET)
                socket = v;
            else
                normalize = o->id == D_NORMALIZE;
            continue;
        }
        int r = cn_cli_parse_query_opt(&q, argc, argv, &i);
        if (r < 0)
            goto out;
        if (r > 0)
            continue;
        if (a[0] == '-' && a[1]) {
            cn_cli_unknown_option("diff", a);
            goto out;
        }
        if (n_sides == 2) {
            fprintf(stderr, "canopy diff: unexpected argument '%s' (BASE and NEW only)\n", a);
            goto out;
        }
        if ((status = parse_side(a, &sides[n_sides++])) != CN_EXIT_OK)
            goto out;
        status = CN_EXIT_USAGE;
    }
    if (n_sides == 0) {
        fprintf(stderr, "canopy diff: missing BASE and NEW (see canopy diff --help)\n");
        goto out;
    }
    if (cn_cli_query_finish(&q) < 0)
        goto out;
    if ((status = make_diff(sides, n_sides, &q, socket, &d, NULL)) != CN_EXIT_OK)
        goto out;
    char title[512];
    diff_title(sides, n_sides, title, sizeof(title));
    cn_fmt_render_opts o;
    cn_fmt_render_opts_init(&o);
    o.title = title;
    o.normalize = normalize;
    status = cn_cli_render(d, &q, &o);
out:
    cn_agg_profile_free(d);
    free(sides[0].path);
    free(sides[1].path);
    cn_cli_query_clear(&q);
    return status;
}
