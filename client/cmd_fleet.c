/* cmd_fleet.c — `canopy fleet init|tree|labels|diff|prune`: the fleet in ClickHouse
 * (docs/fleet.md).
 *
 * The rows every canopyd pushed are grouped by stack in ClickHouse and loaded into the
 * aggregate engine by fleet/ (cn_fleet_load); from there everything is `canopy open`'s
 * path: the QUERY options parse into the same spec and the one renderer prints it, and
 * `fleet diff` builds the differential profile of two label sets exactly as `canopy
 * diff` does for two files. The ClickHouse URL comes from --url, else
 * $CANOPY_FLEET_URL, else canopyd's config file (fleet_url) when it is readable.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "cn_fleet.h"

#define DEFAULT_CONFIG "/etc/canopy/canopyd.conf"
#define MAX_URLS       16

static void fleet_help(FILE *out)
{
    if (out == stdout)
        cn_cli_help("fleet");
    else
        fprintf(out, "canopy fleet: missing subcommand: init, tree, labels, diff or prune (see "
                     "canopy fleet --help)\n");
}

typedef struct fleet_args {
    const char *sub;
    const char *urls[MAX_URLS];
    size_t n_urls;
    const char *config, *db, *cluster, *group_by, *older, *key;
    const char *base, *newer;
    bool normalize;
    cn_fleet_filter filter;
    cn_cli_query q;
    char *cfg_url, *cfg_db, *cfg_user, *cfg_pwfile; /* owned: from the config file */
    char *password;                                 /* owned */
} fleet_args;

static int usage_err(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int usage_err(const char *sub, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "canopy fleet%s%s: ", sub ? " " : "", sub ? sub : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CN_EXIT_USAGE;
}

/* A duration in seconds: canopy's durations (30s, 5m, 1h) or whole days (30d). */
static int parse_span(const char *s, int64_t *secs)
{
    size_t n = strlen(s);
    int64_t ns;
    if (n > 1 && n < 8 && s[n - 1] == 'd' && strspn(s, "0123456789") == n - 1) {
        *secs = strtoll(s, NULL, 10) * 86400;
        return *secs > 0 ? 0 : -EINVAL;
    }
    if (cn_common_parse_duration(s, &ns) < 0 || ns < 1000000000LL)
        return -EINVAL;
    *secs = ns / 1000000000LL;
    return 0;
}

/* "unix seconds" or YYYY-MM-DD[( |T)HH:MM[:SS]] in UTC. */
static int parse_time(const char *s, int64_t *out)
{
    struct tm tm = {0};
    char *end;
    if (*s && strspn(s, "0123456789") == strlen(s)) {
        *out = strtoll(s, &end, 10);
        return 0;
    }
    const char *rest = strptime(s, "%Y-%m-%d", &tm);
    if (rest && (*rest == 'T' || *rest == ' ')) {
        const char *r2 = strptime(rest + 1, "%H:%M:%S", &tm);
        rest = r2 ? r2 : strptime(rest + 1, "%H:%M", &tm);
    }
    if (!rest || *rest)
        return -EINVAL;
    *out = (int64_t)timegm(&tm);
    return 0;
}

/* Reads fleet_url, fleet_database, fleet_user, fleet_password_file from canopyd's config
 * (silently nothing when it cannot be read). */
static void read_config(fleet_args *a)
{
    FILE *f = fopen(a->config ? a->config : DEFAULT_CONFIG, "re");
    char line[1024];
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        char *eq = strchr(line, '='), *k = line, *v;
        if (!eq || line[0] == '#')
            continue;
        *eq = '\0';
        v = eq + 1;
        while (isspace((unsigned char)*k))
            k++;
        for (char *e = eq; e > k && isspace((unsigned char)e[-1]);)
            *--e = '\0';
        while (isspace((unsigned char)*v))
            v++;
        v[strcspn(v, "#\r\n")] = '\0';
        for (size_t n = strlen(v); n && isspace((unsigned char)v[n - 1]);)
            v[--n] = '\0';
        char **dst = !strcmp(k, "fleet_url")             ? &a->cfg_url
                     : !strcmp(k, "fleet_database")      ? &a->cfg_db
                     : !strcmp(k, "fleet_user")          ? &a->cfg_user
                     : !strcmp(k, "fleet_password_file") ? &a->cfg_pwfile
                                                         : NULL;
        if (dst) {
            free(*dst);
            *dst = strdup(v);
        }
    }
    fclose(f);
}

/* fleet's own options, per subcommand (the rows' `when`): the parser below matches argv
 * against them before the QUERY options, and --help, the manual and the completion print
 * them. A new option is one row here and one case in parse(). */
enum { F_INIT = 1, F_TREE = 2, F_LABELS = 4, F_DIFF = 8, F_PRUNE = 16 };
#define F_WHERE (F_TREE | F_LABELS | F_DIFF)
enum {
    FO_URL,
    FO_CONFIG,
    FO_DATABASE,
    FO_CLUSTER,
    FO_OLDER,
    FO_WHERE,
    FO_LAST,
    FO_FROM,
    FO_TO,
    FO_RAW,
    FO_GROUP_BY,
    FO_BASE,
    FO_NEW,
    FO_NO_NORMALIZE,
};

const cn_opt cn_cli_fleet_opts[] = {
    {"--url", NULL, "URL", "$CANOPY_FLEET_URL, else fleet_url in canopyd's config",
     "ClickHouse's HTTP URL; init --cluster takes one per node", FO_URL, 0},
    {"--config", NULL, "FILE", DEFAULT_CONFIG, "canopyd's config file, for fleet_url", FO_CONFIG,
     0},
    {"--database", NULL, "DB", "canopy", "the ClickHouse database", FO_DATABASE, 0},
    {"--cluster", NULL, "NAME", NULL, "init: create the tables on this ClickHouse cluster",
     FO_CLUSTER, F_INIT},
    {"--older", NULL, "DURATION", NULL, "prune: delete rows older than DURATION (30d)", FO_OLDER,
     F_PRUNE},
    {"--where", NULL, "K=V[,K=V]", "all rows",
     "rows with these labels (host, service, "
     "session or a label; repeated keys are ORed, different keys ANDed)",
     FO_WHERE, F_WHERE},
    {"--last", NULL, "DURATION", "all", "rows of the last DURATION (30m, 1h, 7d)", FO_LAST,
     F_WHERE},
    {"--from", NULL, "TIME", "the first row",
     "rows from TIME (unix seconds or YYYY-MM-DD[THH:MM[:SS]], UTC)", FO_FROM, F_WHERE},
    {"--to", NULL, "TIME", "now", "rows before TIME", FO_TO, F_WHERE},
    {"--raw", NULL, NULL, NULL, "read the raw 10 s rows only, not the rollups", FO_RAW, F_WHERE},
    {"--group-by", NULL, "host|service|LABEL", "none", "a root level per value of the label",
     FO_GROUP_BY, F_TREE | F_DIFF},
    {"--base", NULL, "K=V[,K=V]", NULL, "diff: the base side's labels", FO_BASE, F_DIFF},
    {"--new", NULL, "K=V[,K=V]", NULL, "diff: the new side's labels", FO_NEW, F_DIFF},
    {"--no-normalize", NULL, NULL, NULL, "diff: raw weights, BASE not scaled to NEW's total",
     FO_NO_NORMALIZE, F_DIFF},
    {NULL, NULL, NULL, NULL, NULL, 0, 0},
};

/* Parses argv[2..]; returns -1 to go on or an exit status. */
static int parse(fleet_args *a, int argc, char **argv)
{
    const char *sub = a->sub;
    unsigned flags = !strcmp(sub, "init")     ? F_INIT
                     : !strcmp(sub, "tree")   ? F_TREE
                     : !strcmp(sub, "labels") ? F_LABELS
                     : !strcmp(sub, "diff")   ? F_DIFF
                                              : F_PRUNE;
    bool tree_like = flags & (F_TREE | F_DIFF);
    cn_err err = {0};
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i], *v;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            fleet_help(stdout);
            return CN_EXIT_OK;
        }
        const cn_opt *row = cn_opt_match(cn_cli_fleet_opts, flags, argc, argv, &i, &v);
        if (row && row->arg && !v)
            return usage_err(sub, "%s needs a value", row->lng);
        if (!row) {
            int r = tree_like ? cn_cli_parse_query_opt(&a->q, argc, argv, &i) : 0;
            if (r < 0)
                return CN_EXIT_USAGE;
            if (r > 0)
                continue;
            if (o[0] == '-' && o[1]) {
                cn_cli_unknown_option("fleet", o);
                return CN_EXIT_USAGE;
            }
            if (flags == F_LABELS && !a->key)
                a->key = o;
            else
                return usage_err(sub, "unexpected argument '%s'", o);
            continue;
        }
        switch (row->id) {
        case FO_URL:
            if (a->n_urls == MAX_URLS)
                return usage_err(sub, "too many --url (at most %d)", MAX_URLS);
            a->urls[a->n_urls++] = v;
            break;
        case FO_CONFIG:
            a->config = v;
            break;
        case FO_DATABASE:
            a->db = v;
            break;
        case FO_CLUSTER:
            a->cluster = v;
            break;
        case FO_OLDER:
            a->older = v;
            break;
        case FO_WHERE:
            if (cn_fleet_filter_add(&a->filter, v, &err) < 0)
                return usage_err(sub, "%s", err.msg);
            break;
        case FO_LAST: {
            int64_t secs;
            if (parse_span(v, &secs) < 0)
                return usage_err(sub, "bad --last '%s' (a duration: 30m, 1h, 7d)", v);
            a->filter.from_s = (int64_t)time(NULL) - secs;
            break;
        }
        case FO_RAW:
            a->filter.raw = true;
            break;
        case FO_FROM:
        case FO_TO: {
            int64_t t;
            if (parse_time(v, &t) < 0)
                return usage_err(sub, "bad time '%s' (unix seconds or YYYY-MM-DD[THH:MM[:SS]])", v);
            *(row->id == FO_FROM ? &a->filter.from_s : &a->filter.to_s) = t;
            break;
        }
        case FO_GROUP_BY:
            a->group_by = strcmp(v, "none") ? v : NULL;
            break;
        case FO_BASE:
            a->base = v;
            break;
        case FO_NEW:
            a->newer = v;
            break;
        case FO_NO_NORMALIZE:
            a->normalize = false;
            break;
        }
    }
    if (a->filter.from_s != INT64_MIN && a->filter.to_s != INT64_MAX &&
        a->filter.from_s >= a->filter.to_s)
        return usage_err(sub, "%s", "--from must be before --to");
    if (tree_like && cn_cli_query_finish(&a->q) < 0)
        return CN_EXIT_USAGE;
    if (a->group_by && cn_fleet_label_check(a->group_by, "", &err) < 0)
        return usage_err(sub, "bad --group-by: %s", err.msg);
    return -1;
}

/* Connects to every URL (or the one from the environment or config). */
static int connect_all(fleet_args *a, cn_fleet_conn **conns, size_t *n)
{
    cn_err err = {0};
    const char *env = getenv("CANOPY_FLEET_URL");
    read_config(a);
    if (a->n_urls == 0) {
        const char *u = env && *env ? env : a->cfg_url;
        if (!u || !*u) {
            fprintf(stderr,
                    "canopy fleet %s: no ClickHouse URL (--url, $CANOPY_FLEET_URL or "
                    "fleet_url in canopyd's config)\n",
                    a->sub);
            return CN_EXIT_USAGE;
        }
        a->urls[a->n_urls++] = u;
    }
    if (!a->db)
        a->db = a->cfg_db && *a->cfg_db ? a->cfg_db : "canopy";
    const char *user = getenv("CANOPY_FLEET_USER");
    const char *pwfile = getenv("CANOPY_FLEET_PASSWORD_FILE");
    if (!user || !*user)
        user = a->cfg_user, pwfile = a->cfg_pwfile;
    if (user && pwfile && *pwfile) {
        FILE *f = fopen(pwfile, "re");
        char buf[1024];
        if (!f || !fgets(buf, sizeof(buf), f)) {
            fprintf(stderr, "canopy fleet %s: cannot read the password file %s\n", a->sub, pwfile);
            if (f)
                fclose(f);
            return CN_EXIT_FAIL;
        }
        fclose(f);
        buf[strcspn(buf, "\r\n")] = '\0';
        a->password = strdup(buf);
    }
    for (*n = 0; *n < a->n_urls; (*n)++) {
        if (cn_fleet_conn_new(a->urls[*n], user, a->password, 0, &conns[*n], &err) < 0) {
            fprintf(stderr, "canopy fleet %s: %s\n", a->sub, CN_TERM_STR(err.msg));
            return CN_EXIT_USAGE;
        }
    }
    return CN_EXIT_OK;
}

static int fail(const fleet_args *a, int rc, const cn_err *err)
{
    fprintf(stderr, "canopy fleet %s: %s\n", a->sub,
            CN_TERM_STR(err->msg[0] ? err->msg : strerror(-rc)));
    return rc == -EINVAL ? CN_EXIT_USAGE : CN_EXIT_FAIL;
}

/* A filter: the common one plus the conditions of extra ("k=v,k=v"). */
static int side_filter(const fleet_args *a, const char *extra, cn_fleet_filter *f, cn_err *err)
{
    cn_fleet_filter_init(f);
    f->from_s = a->filter.from_s;
    f->to_s = a->filter.to_s;
    f->raw = a->filter.raw;
    for (size_t i = 0; i < a->filter.n; i++) {
        char kv[CN_FLEET_MAX_KEY + CN_FLEET_MAX_VALUE + 2];
        snprintf(kv, sizeof(kv), "%s=%s", a->filter.keys[i], a->filter.values[i]);
        int r = cn_fleet_filter_add(f, kv, err);
        if (r < 0)
            return r;
    }
    return extra ? cn_fleet_filter_add(f, extra, err) : 0;
}

static int run_tree(fleet_args *a, cn_fleet_conn *c, const cn_fleet_schema *s)
{
    cn_err err = {0};
    cn_agg_profile *p = NULL, *sides[2] = {NULL, NULL}, *d = NULL;
    int status, rc;
    char title[256];
    cn_fmt_render_opts o;
    cn_fmt_render_opts_init(&o);
    if (!strcmp(a->sub, "tree")) {
        if ((rc = cn_fleet_load(c, s, &a->filter, a->group_by, &p, &err)) < 0)
            return fail(a, rc, &err);
        snprintf(title, sizeof(title), "fleet %s", cn_fleet_conn_url(c));
        o.title = title;
        status = cn_cli_render(p, &a->q, &o);
        cn_agg_profile_free(p);
        return status;
    }
    const char *which[2] = {a->base, a->newer};
    if (!a->base || !a->newer)
        return usage_err(a->sub, "%s", "--base K=V and --new K=V are both required");
    for (int i = 0; i < 2; i++) {
        cn_fleet_filter f;
        rc = side_filter(a, which[i], &f, &err);
        if (rc < 0) {
            cn_fleet_filter_clear(&f);
            status = usage_err(a->sub, "%s", err.msg);
            goto out;
        }
        rc = cn_fleet_load(c, s, &f, a->group_by, &sides[i], &err);
        cn_fleet_filter_clear(&f);
        if (rc < 0) {
            status = fail(a, rc, &err);
            goto out;
        }
    }
    cn_agg_query qs[2];
    cn_agg_query_init(&qs[0]);
    cn_agg_query_init(&qs[1]);
    if ((rc = cn_agg_diff_profile(sides[0], &qs[0], sides[1], &qs[1], &d, &err)) < 0) {
        status = fail(a, rc, &err);
        goto out;
    }
    snprintf(title, sizeof(title), "%s -> %s", a->base, a->newer);
    o.title = title;
    o.normalize = a->normalize;
    status = cn_cli_render(d, &a->q, &o);
out:
    cn_agg_profile_free(sides[0]);
    cn_agg_profile_free(sides[1]);
    cn_agg_profile_free(d);
    return status;
}

static int run_labels(fleet_args *a, cn_fleet_conn *c, const cn_fleet_schema *s)
{
    cn_err err = {0};
    cn_buf out;
    cn_buf_init(&out, (size_t)256 << 20);
    int rc = cn_fleet_labels_query(c, s, &a->filter, a->key, &out, &err);
    int status = rc < 0 ? fail(a, rc, &err) : CN_EXIT_OK;
    if (rc == 0) {
        /* KEY VALUES SAMPLES / VALUE SAMPLES, as ClickHouse's TabSeparated lines. */
        if (!a->key)
            printf("%-24s %10s %14s\n", "KEY", "VALUES", "SAMPLES");
        else
            printf("%-40s %14s\n", "VALUE", "SAMPLES");
        cn_lines it;
        const char *line;
        size_t len;
        cn_lines_init(&it, cn_buf_ptr(&out), cn_buf_len(&out));
        while (cn_lines_next(&it, &line, &len)) {
            char *f[3], *l = strndup(line, len);
            if (!l)
                break;
            size_t n = 0;
            for (char *t = strtok(l, "\t"); t && n < 3; t = strtok(NULL, "\t"))
                f[n++] = t;
            /* Label values are any user's words; ClickHouse's escaping leaves ESC and C1
             * as they are: the terminal rule (docs/cli.md "Names in text output"). */
            char t0[1024], t1[64], t2[64];
            if (!a->key && n == 3)
                printf("%-24s %10s %14s\n", cn_term_str(t0, sizeof(t0), f[0]),
                       cn_term_str(t1, sizeof(t1), f[1]), cn_term_str(t2, sizeof(t2), f[2]));
            else if (a->key && n == 2)
                printf("%-40s %14s\n", cn_term_str(t0, sizeof(t0), f[0]),
                       cn_term_str(t1, sizeof(t1), f[1]));
            free(l);
        }
    }
    cn_buf_free(&out);
    return status;
}

int cn_cmd_fleet(int argc, char **argv)
{
    fleet_args a = {0};
    cn_fleet_conn *conns[MAX_URLS] = {0};
    size_t n = 0;
    cn_err err = {0};
    int status, rc;

    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fleet_help(argc < 2 ? stderr : stdout);
        return argc < 2 ? CN_EXIT_USAGE : CN_EXIT_OK;
    }
    a.sub = argv[1];
    a.normalize = true;
    cn_fleet_filter_init(&a.filter);
    cn_cli_query_init(&a.q);
    if (strcmp(a.sub, "init") && strcmp(a.sub, "tree") && strcmp(a.sub, "labels") &&
        strcmp(a.sub, "diff") && strcmp(a.sub, "prune")) {
        static const char *const subs[] = {"init", "tree", "labels", "diff", "prune"};
        const char *near = cn_text_nearest(a.sub, subs, 5);
        char shown[256];
        cn_term_str(shown, sizeof(shown), a.sub);
        if (near)
            status = usage_err(NULL, "unknown subcommand '%s'; did you mean `%s`?", shown, near);
        else
            status =
                usage_err(NULL, "unknown subcommand '%s' (init, tree, labels, diff, prune)", shown);
        goto out;
    }
    if ((status = parse(&a, argc, argv)) >= 0)
        goto out;
    if (!strcmp(a.sub, "prune") && !a.older) {
        status = usage_err(a.sub, "%s", "--older DURATION is required");
        goto out;
    }
    if ((status = connect_all(&a, conns, &n)) != CN_EXIT_OK)
        goto out;
    if (!strcmp(a.sub, "init")) {
        if (!a.cluster && n > 1) {
            status = usage_err(a.sub, "%s", "several --url need --cluster NAME");
            goto out;
        }
        rc = cn_fleet_init(conns, n, a.db, a.cluster, &err);
        status = rc < 0 ? fail(&a, rc, &err) : CN_EXIT_OK;
        if (rc == 0)
            printf("fleet schema %d ready in database %s (%s)\n", CN_FLEET_SCHEMA_VERSION, a.db,
                   a.cluster ? a.cluster : "single server");
        goto out;
    }
    if (!strcmp(a.sub, "prune")) {
        int64_t secs;
        int dropped = 0;
        if (parse_span(a.older, &secs) < 0) {
            status = usage_err(a.sub, "bad --older '%s' (a duration: 30d, 12h)", a.older);
            goto out;
        }
        rc = cn_fleet_prune(conns, n, a.db, (int64_t)time(NULL) - secs, &dropped, &err);
        status = rc < 0 ? fail(&a, rc, &err) : CN_EXIT_OK;
        if (rc == 0)
            printf("dropped %d daily partitions\n", dropped);
        goto out;
    }
    if (n > 1) {
        status = usage_err(a.sub, "%s", "one --url only (a cluster is read through any node)");
        goto out;
    }
    cn_fleet_schema s;
    if ((rc = cn_fleet_schema_get(conns[0], a.db, &s, &err)) < 0) {
        status = fail(&a, rc, &err);
        goto out;
    }
    status = !strcmp(a.sub, "labels") ? run_labels(&a, conns[0], &s) : run_tree(&a, conns[0], &s);
out:
    for (size_t i = 0; i < n; i++)
        cn_fleet_conn_free(conns[i]);
    cn_fleet_filter_clear(&a.filter);
    cn_cli_query_clear(&a.q);
    free(a.cfg_url);
    free(a.cfg_db);
    free(a.cfg_user);
    free(a.cfg_pwfile);
    free(a.password);
    return status;
}
