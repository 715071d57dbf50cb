/* reader.c — the reading side: schema, filters, `GROUP BY stack` into the engine, labels
 * and retention.
 *
 * A tree is two queries: the rows grouped by (group value, stack hash) with their sums,
 * then the definitions of exactly those stacks (`stack GLOBAL IN (…the same filter…)`,
 * which also works over Distributed tables, where a plain IN would be refused). The
 * answers are TabSeparated; arrays come back joined with \x1e, so a line splits with one
 * pass. Each definition is interned once (a map from hash to its parsed frames), frames
 * through a map from XXH3(func, lib) to the profile's frame id, so loading is linear in
 * the answer's size.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "cn_fleet.h"
#include "fleet_internal.h"

#define ANSWER_MAX ((size_t)2 << 30)
#define SEP        '\x1e'

/* ---- TSV decoding ------------------------------------------------------------------ */

size_t cn_fleet__tsv_split(char *line, size_t len, char **fields, size_t max)
{
    size_t n = 0;
    char *w = line, *end = line + len;
    if (max == 0)
        return 0;
    fields[n++] = w;
    for (char *r = line; r < end; r++) {
        char c = *r;
        if (c == '\t') {
            *w++ = '\0';
            if (n == max)
                return n;
            fields[n++] = w;
            continue;
        }
        if (c == '\\' && r + 1 < end) {
            char e = *++r;
            switch (e) {
            case 't':
                c = '\t';
                break;
            case 'n':
                c = '\n';
                break;
            case 'r':
                c = '\r';
                break;
            case '0':
                c = '\0';
                break;
            case 'b':
                c = '\b';
                break;
            case 'f':
                c = '\f';
                break;
            default:
                c = e;
                break;
            }
            if (c == '\0')
                c = '?'; /* names are C strings */
        }
        *w++ = c;
    }
    *w = '\0';
    return n;
}

/* ---- schema ------------------------------------------------------------------------ */

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

static int exec_sql(cn_fleet_conn *c, const char *sql, cn_err *err)
{
    return cn_fleet_exec(c, sql, NULL, 0, false, NULL, err);
}

static const char samples_cols[] =
    "(time DateTime, host String, service String, session String, label_keys Array(String), "
    "label_values Array(String), stack UInt64, samples UInt64, weight Float64)";
static const char stacks_cols[] = "(stack UInt64, host String, time DateTime, funcs Array(String), "
                                  "libs Array(String), build_ids Array(String))";

/* Creates db's tables on one node. */
static int init_node(cn_fleet_conn *c, const char *db, const char *cluster, cn_err *err)
{
    char sql[1024];
    cn_buf ans;
    int r;
    snprintf(sql, sizeof(sql), "CREATE DATABASE IF NOT EXISTS %s", db);
    if ((r = exec_sql(c, sql, err)) < 0)
        return r;
    snprintf(sql, sizeof(sql),
             "CREATE TABLE IF NOT EXISTS %s.schema (version UInt32, cluster String, created "
             "DateTime) ENGINE = TinyLog",
             db);
    if ((r = exec_sql(c, sql, err)) < 0)
        return r;
    cn_buf_init(&ans, 1 << 16);
    snprintf(sql, sizeof(sql), "SELECT version, cluster FROM %s.schema FORMAT TabSeparated", db);
    if ((r = cn_fleet_exec(c, sql, NULL, 0, false, &ans, err)) < 0)
        goto out;
    if (cn_buf_len(&ans)) {
        int v = atoi(cn_buf_ptr(&ans));
        if (v != CN_FLEET_SCHEMA_VERSION) {
            r = cn_err_set(err, -EPROTO,
                           "%s: fleet schema version %d, this canopy writes version %d", db, v,
                           CN_FLEET_SCHEMA_VERSION);
            goto out;
        }
    }
    /* MergeTree with daily partitions (retention drops whole days: cn_fleet_prune); the
     * sort key serves filters by service and host, then time. */
    snprintf(sql, sizeof(sql),
             "CREATE TABLE IF NOT EXISTS %s.samples %s ENGINE = MergeTree() PARTITION BY "
             "toYYYYMMDD(time) ORDER BY (service, host, time, stack)",
             db, samples_cols);
    if ((r = exec_sql(c, sql, err)) < 0)
        goto out;
    /* Definitions are written again now and then (restarts, dropped spool files):
     * ReplacingMergeTree folds the copies in the background, readers use any(). */
    snprintf(sql, sizeof(sql),
             "CREATE TABLE IF NOT EXISTS %s.stacks %s ENGINE = ReplacingMergeTree() ORDER BY stack",
             db, stacks_cols);
    if ((r = exec_sql(c, sql, err)) < 0)
        goto out;
    if (cluster) {
        snprintf(sql, sizeof(sql),
                 "CREATE TABLE IF NOT EXISTS %s.samples_all %s ENGINE = Distributed(%s, %s, "
                 "samples, rand())",
                 db, samples_cols, cluster, db);
        if ((r = exec_sql(c, sql, err)) < 0)
            goto out;
        snprintf(sql, sizeof(sql),
                 "CREATE TABLE IF NOT EXISTS %s.stacks_all %s ENGINE = Distributed(%s, %s, "
                 "stacks, rand())",
                 db, stacks_cols, cluster, db);
        if ((r = exec_sql(c, sql, err)) < 0)
            goto out;
    }
    if (!cn_buf_len(&ans)) {
        snprintf(sql, sizeof(sql), "INSERT INTO %s.schema VALUES (%d, '%s', now())", db,
                 CN_FLEET_SCHEMA_VERSION, cluster ? cluster : "");
        r = exec_sql(c, sql, err);
    }
out:
    cn_buf_free(&ans);
    return r;
}

int cn_fleet_init(cn_fleet_conn *const *nodes, size_t n_nodes, const char *db, const char *cluster,
                  cn_err *err)
{
    if (!name_ok(db))
        return cn_err_set(err, -EINVAL, "bad database name '%s' (letters, digits, '_')", db);
    if (cluster && !name_ok(cluster))
        return cn_err_set(err, -EINVAL, "bad cluster name '%s' (letters, digits, '_')", cluster);
    if (n_nodes == 0)
        return cn_err_set(err, -EINVAL, "no ClickHouse URL");
    for (size_t i = 0; i < n_nodes; i++) {
        int r = init_node(nodes[i], db, cluster, err);
        if (r < 0)
            return r;
    }
    return 0;
}

int cn_fleet_schema_get(cn_fleet_conn *c, const char *db, cn_fleet_schema *out, cn_err *err)
{
    char sql[256];
    cn_buf ans;
    int r;
    if (!name_ok(db))
        return cn_err_set(err, -EINVAL, "bad database name '%s' (letters, digits, '_')", db);
    cn_buf_init(&ans, 1 << 16);
    snprintf(sql, sizeof(sql),
             "SELECT version, cluster FROM %s.schema ORDER BY created DESC LIMIT 1 FORMAT "
             "TabSeparated",
             db);
    r = cn_fleet_exec(c, sql, NULL, 0, false, &ans, err);
    if (r == -EIO && (strstr(err->msg, "Code: 60,") || strstr(err->msg, "Code: 81,"))) {
        r = cn_err_set(err, -ENOENT,
                       "no fleet schema in database '%s' at %s (run canopy fleet init)", db,
                       cn_fleet_conn_url(c));
        goto out;
    }
    if (r < 0)
        goto out;
    char *f[2];
    size_t n = cn_fleet__tsv_split(cn_buf_ptr(&ans) ? cn_buf_ptr(&ans) : (char *)"",
                                   strcspn(cn_buf_ptr(&ans) ? cn_buf_ptr(&ans) : "", "\n"), f, 2);
    memset(out, 0, sizeof(*out));
    out->version = n >= 1 ? atoi(f[0]) : 0;
    if (out->version != CN_FLEET_SCHEMA_VERSION) {
        r = out->version == 0
                ? cn_err_set(err, -ENOENT,
                             "no fleet schema in database '%s' (run canopy fleet init)", db)
                : cn_err_set(err, -EPROTO,
                             "fleet schema version %d in '%s'; this canopy reads version %d",
                             out->version, db, CN_FLEET_SCHEMA_VERSION);
        goto out;
    }
    snprintf(out->cluster, sizeof(out->cluster), "%s", n == 2 ? f[1] : "");
    const char *suffix = out->cluster[0] ? "_all" : "";
    snprintf(out->samples, sizeof(out->samples), "%s.samples%s", db, suffix);
    snprintf(out->stacks, sizeof(out->stacks), "%s.stacks%s", db, suffix);
out:
    cn_buf_free(&ans);
    return r;
}

/* ---- filters ----------------------------------------------------------------------- */

void cn_fleet_filter_init(cn_fleet_filter *f)
{
    memset(f, 0, sizeof(*f));
    f->from_s = INT64_MIN;
    f->to_s = INT64_MAX;
}

void cn_fleet_filter_clear(cn_fleet_filter *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->keys[i]);
        free(f->values[i]);
    }
    free(f->keys);
    free(f->values);
    cn_fleet_filter_init(f);
}

int cn_fleet_filter_add(cn_fleet_filter *f, const char *list, cn_err *err)
{
    cn_fleet_labels l = {0};
    int r = cn_fleet_labels_parse(&l, list, err);
    if (r == 0 && l.n == 0)
        r = cn_err_set(err, -EINVAL, "empty label condition (KEY=VALUE expected)");
    for (size_t i = 0; i < l.n && r == 0; i++) {
        char **k = realloc(f->keys, (f->n + 1) * sizeof(*k));
        if (k)
            f->keys = k;
        char **v = realloc(f->values, (f->n + 1) * sizeof(*v));
        if (v)
            f->values = v;
        if (!k || !v) {
            r = cn_err_set(err, -ENOMEM, "out of memory");
            break;
        }
        f->keys[f->n] = l.v[i].key;
        f->values[f->n] = l.v[i].value;
        l.v[i].key = l.v[i].value = NULL;
        f->n++;
    }
    cn_fleet_labels_clear(&l);
    return r;
}

/* The SQL expression for key's value in a row. */
static int key_expr(cn_buf *sql, const char *key)
{
    if (!strcmp(key, "host") || !strcmp(key, "service") || !strcmp(key, "session"))
        return cn_buf_appendf(sql, "%s", key);
    int r = cn_buf_appendf(sql, "label_values[indexOf(label_keys, ");
    r = r ? r : cn_fleet_sql_quote(sql, key);
    return r ? r : cn_buf_appendf(sql, ")]");
}

int cn_fleet_filter_sql(const cn_fleet_filter *f, cn_buf *sql)
{
    const char *glue = " WHERE ";
    int r = 0;
    /* Conditions on one key are ORed, in the order first seen; keys are ANDed. */
    for (size_t i = 0; i < f->n && r == 0; i++) {
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = strcmp(f->keys[j], f->keys[i]) != 0;
        if (!first)
            continue;
        r = cn_buf_appendf(sql, "%s(", glue);
        glue = " AND ";
        const char * or = "";
        for (size_t j = i; j < f->n && r == 0; j++) {
            if (strcmp(f->keys[j], f->keys[i]))
                continue;
            r = cn_buf_appendf(sql, "%s", or);
            r = r ? r : key_expr(sql, f->keys[i]);
            r = r ? r : cn_buf_appendf(sql, " = ");
            r = r ? r : cn_fleet_sql_quote(sql, f->values[j]);
            or = " OR ";
        }
        r = r ? r : cn_buf_appendf(sql, ")");
    }
    if (r == 0 && f->from_s != INT64_MIN) {
        r = cn_buf_appendf(sql, "%stime >= toDateTime(%lld)", glue, (long long)f->from_s);
        glue = " AND ";
    }
    if (r == 0 && f->to_s != INT64_MAX)
        r = cn_buf_appendf(sql, "%stime < toDateTime(%lld)", glue, (long long)f->to_s);
    return r;
}

/* ---- loading a tree ---------------------------------------------------------------- */

typedef struct loader {
    cn_agg_profile *p;
    cn_u64map frames; /* XXH3(func, lib) → frame id */
    cn_u64map defs;   /* stack hash → index in def_off */
    size_t *def_off;  /* into path: each definition's first frame id */
    size_t *def_len;
    size_t n_defs, cap_defs, cap_len;
    int32_t *path; /* frame ids of every definition, root first */
    size_t n_path, cap_path;
    int32_t *scratch;
    size_t cap_scratch;
} loader;

static int32_t intern_frame(loader *L, const char *func, const char *lib)
{
    uint64_t h = XXH3_64bits_withSeed(func, strlen(func), XXH3_64bits(lib, strlen(lib)));
    int32_t id = cn_u64map_get(&L->frames, h);
    if (id >= 0)
        return id;
    int32_t res = -1;
    if (*lib) {
        cn_agg_resource_kind kind = lib[0] == '[' ? CN_AGG_RES_KERNEL : CN_AGG_RES_LIBRARY;
        if ((res = cn_agg_resource(L->p, lib, NULL, NULL, kind)) < 0)
            return res;
    }
    int32_t fn = cn_agg_func(L->p, func, res, NULL, 0);
    if (fn < 0)
        return fn;
    id = cn_agg_frame(L->p, fn, res, -1, 0);
    if (id >= 0 && cn_u64map_put(&L->frames, h, id) < 0)
        return -ENOMEM;
    return id;
}

/* One definition line: stack, funcs, libs (joined with SEP). */
static int add_def(loader *L, char *line, size_t len)
{
    char *f[3];
    if (cn_fleet__tsv_split(line, len, f, 3) != 3)
        return -EBADMSG;
    uint64_t h = strtoull(f[0], NULL, 10);
    if (cn_u64map_get(&L->defs, h) >= 0)
        return 0;
    size_t start = L->n_path;
    char *fs = f[1], *ls = f[2];
    while (*fs) {
        char *fe = strchr(fs, SEP), *le = strchr(ls, SEP);
        if (fe)
            *fe = '\0';
        if (le)
            *le = '\0';
        int32_t id = intern_frame(L, fs, ls);
        if (id < 0)
            return id;
        if (CN_RESERVE(L->path, L->cap_path, L->n_path + 1) < 0)
            return -ENOMEM;
        L->path[L->n_path++] = id;
        if (!fe)
            break;
        fs = fe + 1;
        ls = le ? le + 1 : ls + strlen(ls); /* fewer libs than funcs: the rest get "" */
    }
    if (L->n_defs >= INT32_MAX || CN_RESERVE(L->def_off, L->cap_defs, L->n_defs + 1) < 0 ||
        CN_RESERVE(L->def_len, L->cap_len, L->n_defs + 1) < 0 ||
        cn_u64map_put(&L->defs, h, (int32_t)L->n_defs) < 0)
        return -ENOMEM;
    L->def_off[L->n_defs] = start;
    L->def_len[L->n_defs++] = L->n_path - start;
    return 0;
}

/* One row: [group,] stack, samples, weight. */
static int add_row(loader *L, char *line, size_t len, bool grouped, const char *group_key,
                   double *samples)
{
    char *f[4];
    size_t want = grouped ? 4 : 3;
    if (cn_fleet__tsv_split(line, len, f, want) != want)
        return -EBADMSG;
    char **v = grouped ? f + 1 : f;
    uint64_t h = strtoull(v[0], NULL, 10);
    double n = strtod(v[1], NULL), w = strtod(v[2], NULL);
    int32_t d = cn_u64map_get(&L->defs, h);
    size_t depth = (d >= 0 ? L->def_len[d] : 1) + (grouped ? 1 : 0), k = 0;
    if (CN_RESERVE(L->scratch, L->cap_scratch, depth) < 0)
        return -ENOMEM;
    if (grouped) {
        char name[CN_FLEET_MAX_KEY + CN_FLEET_MAX_VALUE + 8];
        snprintf(name, sizeof(name), "%s=%s", group_key, f[0]);
        int32_t id = intern_frame(L, name, "");
        if (id < 0)
            return id;
        L->scratch[k++] = id;
    }
    if (d >= 0) {
        memcpy(L->scratch + k, L->path + L->def_off[d], L->def_len[d] * sizeof(int32_t));
        k += L->def_len[d];
    } else {
        /* Rows whose definition was lost (a dropped spool file) stay counted. */
        int32_t id = intern_frame(L, "[unknown stack]", "");
        if (id < 0)
            return id;
        L->scratch[k++] = id;
    }
    int32_t stack = k ? cn_agg_stack_from_frames(L->p, L->scratch, k) : -1;
    if (stack < 0 && k)
        return stack;
    *samples += n;
    return cn_agg_add_sample(L->p, stack, 0, w, -1);
}

static int group_expr(cn_buf *sql, const char *group_by)
{
    return group_by ? key_expr(sql, group_by) : cn_buf_appendf(sql, "''");
}

int cn_fleet_load(cn_fleet_conn *c, const cn_fleet_schema *s, const cn_fleet_filter *f,
                  const char *group_by, cn_agg_profile **out, cn_err *err)
{
    loader L = {0};
    cn_buf sql, where, ans;
    double samples = 0;
    int r;
    const char *line;
    size_t len;
    cn_lines it;

    cn_buf_init(&sql, 0);
    cn_buf_init(&where, 0);
    cn_buf_init(&ans, ANSWER_MAX);
    if (group_by && cn_fleet_label_check(group_by, "", err) < 0) {
        r = -EINVAL;
        goto out;
    }
    if (!(L.p = cn_agg_profile_new()) || cn_fleet_filter_sql(f, &where) < 0) {
        r = cn_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    /* The definitions of the stacks the filter selects. */
    r = cn_buf_appendf(&sql,
                       "SELECT stack, arrayStringConcat(any(funcs), '\\x1e'), "
                       "arrayStringConcat(any(libs), '\\x1e') FROM %s WHERE stack GLOBAL IN "
                       "(SELECT stack FROM %s%s) GROUP BY stack FORMAT TabSeparated",
                       s->stacks, s->samples, cn_buf_ptr(&where) ? cn_buf_ptr(&where) : "");
    if (r < 0 || (r = cn_fleet_exec(c, cn_buf_ptr(&sql), NULL, 0, false, &ans, err)) < 0)
        goto out;
    cn_lines_init(&it, cn_buf_ptr(&ans), cn_buf_len(&ans));
    while (cn_lines_next(&it, &line, &len))
        if (len && (r = add_def(&L, (char *)line, len)) < 0)
            goto bad;
    /* The rows, summed per (group, stack) in ClickHouse. */
    cn_buf_reset(&ans);
    cn_buf_reset(&sql);
    r = cn_buf_appendf(&sql, "SELECT ");
    if (group_by)
        r = r ? r : group_expr(&sql, group_by);
    r = r ? r
          : cn_buf_appendf(&sql, "%sstack, sum(samples), sum(weight) FROM %s%s",
                           group_by ? " AS g, " : "", s->samples,
                           cn_buf_ptr(&where) ? cn_buf_ptr(&where) : "");
    if (group_by && !strcmp(group_by, "host") + !strcmp(group_by, "service") == 0)
        r = r ? r
              : cn_buf_appendf(&sql, "%shas(label_keys, '%s')",
                               cn_buf_len(&where) ? " AND " : " WHERE ", group_by);
    r = r ? r
          : cn_buf_appendf(&sql, " GROUP BY %sstack FORMAT TabSeparated", group_by ? "g, " : "");
    if (r < 0 || (r = cn_fleet_exec(c, cn_buf_ptr(&sql), NULL, 0, false, &ans, err)) < 0)
        goto out;
    cn_lines_init(&it, cn_buf_ptr(&ans), cn_buf_len(&ans));
    while (cn_lines_next(&it, &line, &len))
        if (len && (r = add_row(&L, (char *)line, len, group_by != NULL, group_by, &samples)) < 0)
            goto bad;
    char num[32];
    snprintf(num, sizeof(num), "%.0f", samples);
    if (cn_agg_meta_set(L.p, "source", "fleet") < 0 || cn_agg_meta_set(L.p, "samples", num) < 0) {
        r = cn_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    *out = L.p;
    L.p = NULL;
    goto out;
bad:
    if (r == -EBADMSG)
        cn_err_set(err, -EBADMSG, "unexpected answer from ClickHouse at %s", cn_fleet_conn_url(c));
    else
        cn_err_set(err, r, "loading the fleet tree: %s", strerror(-r));
out:
    cn_agg_profile_free(L.p);
    cn_u64map_clear(&L.frames);
    cn_u64map_clear(&L.defs);
    free(L.def_off);
    free(L.def_len);
    free(L.path);
    free(L.scratch);
    cn_buf_free(&sql);
    cn_buf_free(&where);
    cn_buf_free(&ans);
    return r;
}

/* ---- labels and retention ---------------------------------------------------------- */

int cn_fleet_labels_query(cn_fleet_conn *c, const cn_fleet_schema *s, const cn_fleet_filter *f,
                          const char *key, cn_buf *out, cn_err *err)
{
    cn_buf sql, where;
    int r;
    cn_buf_init(&sql, 0);
    cn_buf_init(&where, 0);
    if (key && (r = cn_fleet_label_check(key, "", err)) < 0)
        goto out;
    if ((r = cn_fleet_filter_sql(f, &where)) < 0)
        goto oom;
    const char *w = cn_buf_ptr(&where) ? cn_buf_ptr(&where) : "";
    const char *and = *w ? " AND " : " WHERE ";
    if (!key) {
        r = cn_buf_appendf(&sql,
                           "SELECT k, uniqExact(v), sum(n) FROM (SELECT 'host' AS k, host AS v, "
                           "samples AS n FROM %s%s UNION ALL SELECT 'service' AS k, service AS v, "
                           "samples AS n FROM %s%s UNION ALL SELECT k, v, samples AS n FROM %s "
                           "ARRAY JOIN label_keys AS k, label_values AS v%s) GROUP BY k ORDER BY "
                           "k FORMAT TabSeparated",
                           s->samples, w, s->samples, w, s->samples, w);
    } else {
        r = cn_buf_appendf(&sql, "SELECT ");
        r = r ? r : key_expr(&sql, key);
        r = r ? r : cn_buf_appendf(&sql, " AS v, sum(samples) AS n FROM %s%s", s->samples, w);
        if (r == 0 && strcmp(key, "host") && strcmp(key, "service") && strcmp(key, "session")) {
            r = cn_buf_appendf(&sql, "%shas(label_keys, ", and);
            r = r ? r : cn_fleet_sql_quote(&sql, key);
            r = r ? r : cn_buf_appendf(&sql, ")");
        }
        r = r ? r : cn_buf_appendf(&sql, " GROUP BY v ORDER BY n DESC, v FORMAT TabSeparated");
    }
    if (r < 0)
        goto oom;
    r = cn_fleet_exec(c, cn_buf_ptr(&sql), NULL, 0, false, out, err);
    goto out;
oom:
    r = cn_err_set(err, -ENOMEM, "out of memory");
out:
    cn_buf_free(&sql);
    cn_buf_free(&where);
    return r;
}

int cn_fleet_prune(cn_fleet_conn *const *nodes, size_t n_nodes, const char *db, int64_t before_s,
                   int *dropped, cn_err *err)
{
    char sql[512];
    cn_buf ans;
    int r = 0, n = 0;
    if (!name_ok(db))
        return cn_err_set(err, -EINVAL, "bad database name '%s' (letters, digits, '_')", db);
    cn_buf_init(&ans, 1 << 20);
    for (size_t i = 0; i < n_nodes && r == 0; i++) {
        cn_buf_reset(&ans);
        snprintf(sql, sizeof(sql),
                 "SELECT DISTINCT partition FROM system.parts WHERE database = '%s' AND table = "
                 "'samples' AND active AND toUInt32(partition) < toYYYYMMDD(toDateTime(%lld)) "
                 "ORDER BY partition FORMAT TabSeparated",
                 db, (long long)before_s);
        if ((r = cn_fleet_exec(nodes[i], sql, NULL, 0, false, &ans, err)) < 0)
            break;
        cn_lines it;
        const char *line;
        size_t len;
        cn_lines_init(&it, cn_buf_ptr(&ans), cn_buf_len(&ans));
        while (r == 0 && cn_lines_next(&it, &line, &len)) {
            if (len == 0 || len > 8 || strspn(line, "0123456789") < len)
                continue;
            snprintf(sql, sizeof(sql), "ALTER TABLE %s.samples DROP PARTITION %.*s", db, (int)len,
                     line);
            if ((r = exec_sql(nodes[i], sql, err)) == 0)
                n++;
        }
    }
    cn_buf_free(&ans);
    *dropped = n;
    return r;
}
