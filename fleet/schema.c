/* schema.c — the fleet store's tables in ClickHouse (docs/fleet.md "Schema"): creating
 * them, migrating older versions, checking the version a reader finds, and retention
 * (dropping whole days' partitions).
 *
 * The raw rows go to `samples`; materialized views sum them into one rollup table per
 * tier (cn_fleet__tiers, which reader.c reads from); stack definitions go to `stacks`.
 * With a cluster each table also gets a Distributed `_all` table. The version is a row
 * in `schema`; a migration adds one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cn_fleet.h"
#include "fleet_internal.h"

bool cn_fleet__name_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

static int exec_sql(cn_fleet_conn *c, const char *sql, cn_err *err)
{
    return cn_fleet_exec(c, sql, NULL, 0, false, NULL, err);
}

/* The columns both sample tables share; `samples` adds `batch` (the insert's id, which
 * makes a retried insert idempotent: docs/fleet.md "Failures"). */
#define COMMON_COLS                                                                                \
    "time DateTime, host String, service String, session String, label_keys Array(String), "       \
    "label_values Array(String), stack UInt64, samples UInt64, weight Float64"
static const char samples_cols[] = "(" COMMON_COLS ", batch UInt64)";
static const char rollup_cols[] = "(" COMMON_COLS ")";
/* kinds (version 4): each frame's kind marker, "python" or "" (docs/python.md). */
static const char stacks_cols[] = "(stack UInt64, host String, time DateTime, funcs Array(String), "
                                  "libs Array(String), build_ids Array(String), kinds "
                                  "Array(String))";

/* The rollup tiers (fleet_internal.h), coarsest first. */
const cn_fleet__tier cn_fleet__tiers[] = {{"samples_hourly", 3600}, {"samples_10m", 600}};
_Static_assert(sizeof(cn_fleet__tiers) / sizeof(cn_fleet__tiers[0]) == CN_FLEET__N_TIERS,
               "CN_FLEET__N_TIERS counts cn_fleet__tiers");

int64_t cn_fleet__floor_to(int64_t t, int secs)
{
    if (t == INT64_MIN || t == INT64_MAX)
        return t;
    return (t / secs - (t % secs < 0)) * secs;
}

int64_t cn_fleet__ceil_to(int64_t t, int secs)
{
    int64_t f = cn_fleet__floor_to(t, secs);
    return f < t ? f + secs : f;
}

/* The rollup of the raw rows: (bucket, labels, stack) with summed counts; the bucket in
 * UTC whatever the server's time zone (toStartOfHour is local time). Arguments: bucket
 * seconds twice, then what follows FROM. The alias `time` hides the column in a WHERE
 * here, so a backfill's conditions go in a subquery (ROLLUP_OF). */
#define ROLLUP_SELECT(from)                                                                        \
    "SELECT toDateTime(intDiv(toUInt32(time), %d) * %d) AS time, host, service, session, "         \
    "label_keys, label_values, stack, sum(samples) AS samples, sum(weight) AS weight FROM " from   \
    " GROUP BY time, host, service, session, label_keys, label_values, stack"
/* Of the raw rows of db (the first argument) that pass a WHERE clause (the second). */
#define ROLLUP_OF ROLLUP_SELECT("(SELECT * FROM %s.samples%s)")

/* The highest schema version recorded in db (0: none). */
static int node_version(cn_fleet_conn *c, const char *db, int *version, cn_err *err)
{
    char sql[256];
    cn_buf ans;
    cn_buf_init(&ans, 1 << 16);
    snprintf(sql, sizeof(sql), "SELECT max(version) FROM %s.schema FORMAT TabSeparated", db);
    int r = cn_fleet_exec(c, sql, NULL, 0, false, &ans, err);
    if (r == 0)
        *version = cn_buf_len(&ans) ? atoi(cn_buf_ptr(&ans)) : 0;
    cn_buf_free(&ans);
    return r;
}

/* The number of rows of system.columns (what = "columns", cond names the column) or
 * system.tables (what = "tables") matching db, table and cond. */
static int count_sys(cn_fleet_conn *c, const char *what, const char *db, const char *table,
                     const char *cond, long *n, cn_err *err)
{
    char sql[512];
    cn_buf ans;
    cn_buf_init(&ans, 1 << 16);
    snprintf(sql, sizeof(sql),
             "SELECT count() FROM system.%s WHERE database = '%s' AND %s = '%s'%s FORMAT "
             "TabSeparated",
             what, db, strcmp(what, "tables") ? "table" : "name", table, cond);
    int r = cn_fleet_exec(c, sql, NULL, 0, false, &ans, err);
    if (r == 0)
        *n = cn_buf_len(&ans) ? atol(cn_buf_ptr(&ans)) : 0;
    cn_buf_free(&ans);
    return r;
}

/* Fills the rollups of cn_fleet__tiers[k0..] from the raw rows of [from, to) (INT64_MIN/MAX: open)
 * that pass cond (NULL: all), one 10-minute block per INSERT … SELECT: a single GROUP BY
 * over a fleet's hour of raw rows exceeds ClickHouse's default memory limit per query
 * (docs/perf-fleet.md), a block's does not. A rollup row per block is no error: the
 * SummingMergeTree sums them, readers sum() anyway. */
static int backfill(cn_fleet_conn *c, const char *db, size_t k0, const char *cond, int64_t from,
                    int64_t to, cn_err *err)
{
    char sql[1024], where[256];
    cn_buf ans;
    cn_lines it;
    const char *line;
    size_t len;
    int n = snprintf(where, sizeof(where), " WHERE 1");
    if (from != INT64_MIN)
        n += snprintf(where + n, sizeof(where) - n, " AND time >= toDateTime(%lld)",
                      (long long)from);
    if (to != INT64_MAX)
        n += snprintf(where + n, sizeof(where) - n, " AND time < toDateTime(%lld)", (long long)to);
    if (cond)
        snprintf(where + n, sizeof(where) - n, " AND %s", cond);
    cn_buf_init(&ans, (size_t)1 << 28);
    snprintf(sql, sizeof(sql),
             "SELECT DISTINCT intDiv(toUInt32(time), 600) * 600 AS b FROM %s.samples%s ORDER BY b "
             "FORMAT TabSeparated",
             db, where);
    int r = cn_fleet_exec(c, sql, NULL, 0, false, &ans, err);
    cn_lines_init(&it, r == 0 ? cn_buf_ptr(&ans) : "", r == 0 ? cn_buf_len(&ans) : 0);
    while (r == 0 && cn_lines_next(&it, &line, &len)) {
        long long b = len ? strtoll(line, NULL, 10) : 0;
        char block[512];
        if (len == 0)
            continue;
        snprintf(block, sizeof(block),
                 "%s AND time >= toDateTime(%lld) AND time < toDateTime(%lld)", where, b, b + 600);
        for (size_t k = k0; k < CN_FLEET__N_TIERS && r == 0; k++) {
            snprintf(sql, sizeof(sql), "INSERT INTO %s.%s " ROLLUP_OF, db, cn_fleet__tiers[k].table,
                     cn_fleet__tiers[k].secs, cn_fleet__tiers[k].secs, db, block);
            r = exec_sql(c, sql, err);
        }
    }
    cn_buf_free(&ans);
    return r;
}

/* Version 1 → 3 on one node (the rollup tables and views were just created): the raw
 * table gets its `batch` column, then the rollups are filled from the rows written
 * before them (batch 0). The views feed the rollups from the moment they exist, so the
 * rows a version 1 canopyd inserts between their creation and the backfill would count
 * twice: canopyds are upgraded first (their inserts fail, spooled, until the column
 * exists), docs/fleet.md "Upgrading". */
static int migrate_v1(cn_fleet_conn *c, const char *db, cn_err *err)
{
    char sql[256];
    long n = 0;
    int r = count_sys(c, "columns", db, "samples", " AND name = 'batch'", &n, err);
    if (r < 0 || n > 0)
        return r;
    snprintf(sql, sizeof(sql), "ALTER TABLE %s.samples ADD COLUMN batch UInt64", db);
    if ((r = exec_sql(c, sql, err)) < 0)
        return r;
    return backfill(c, db, 0, "batch = 0", INT64_MIN, INT64_MAX, err);
}

/* Version 3 → 4: table (the stack definitions, or their Distributed table) gets its kinds
 * column; an empty array, every frame unmarked, in the rows written before. Idempotent. */
static int add_kinds(cn_fleet_conn *c, const char *db, const char *table, cn_err *err)
{
    char sql[256];
    long n = 0;
    int r = count_sys(c, "columns", db, table, " AND name = 'kinds'", &n, err);
    if (r < 0 || n > 0)
        return r;
    snprintf(sql, sizeof(sql), "ALTER TABLE %s.%s ADD COLUMN kinds Array(String)", db, table);
    return exec_sql(c, sql, err);
}

/* Creates db's tables on one node, or migrates them from version 1, 2 or 3. */
static int init_node(cn_fleet_conn *c, const char *db, const char *cluster, cn_err *err)
{
    char sql[1024];
    int r, v = 0;
    long had_10m = 0;
    snprintf(sql, sizeof(sql), "CREATE DATABASE IF NOT EXISTS %s", db);
    if ((r = exec_sql(c, sql, err)) < 0)
        return r;
    snprintf(sql, sizeof(sql),
             "CREATE TABLE IF NOT EXISTS %s.schema (version UInt32, cluster String, created "
             "DateTime) ENGINE = TinyLog",
             db);
    if ((r = exec_sql(c, sql, err)) < 0 || (r = node_version(c, db, &v, err)) < 0)
        return r;
    if (v > CN_FLEET_SCHEMA_VERSION)
        return cn_err_set(err, -EPROTO,
                          "%s: fleet schema version %d, this canopy writes version %d", db, v,
                          CN_FLEET_SCHEMA_VERSION);
    /* A migration from 2 that stopped after creating the 10-minute rollup: its rows are
     * unknown (the view's, part of a backfill?), so it is not filled a second time. */
    if (v == 2 && (r = count_sys(c, "tables", db, "samples_10m", "", &had_10m, err)) < 0)
        return r;
    if (had_10m)
        return cn_err_set(
            err, -EEXIST,
            "database %s: an earlier migration to fleet schema %d did not finish; drop "
            "%s.samples_10m_mv and %s.samples_10m, then run canopy fleet init again",
            db, CN_FLEET_SCHEMA_VERSION, db, db);
    /* MergeTree with daily partitions (retention drops whole days: cn_fleet_prune); the
     * sort key serves filters by service and host, then time. */
    snprintf(sql, sizeof(sql),
             "CREATE TABLE IF NOT EXISTS %s.samples %s ENGINE = MergeTree() PARTITION BY "
             "toYYYYMMDD(time) ORDER BY (service, host, time, stack)",
             db, samples_cols);
    if ((r = exec_sql(c, sql, err)) < 0)
        return r;
    /* The rollups: rows of one (bucket, labels, stack) are summed as parts merge;
     * readers sum() again, so unmerged parts read the same. */
    /* Version 2 → 3 fills the 10-minute rollup from the rows written before its view:
     * the rows older than the last 10 to 20 minutes before the view exists (block by
     * block, while canopyds go on pushing newer ones), the rest in one query right after
     * its creation. A batch committed in the instant between the view's creation and
     * that query's start would count twice, one with rows older than that (a spool
     * drained during the migration) would be missing from the 10-minute rollup:
     * docs/fleet.md "Upgrading". */
    int64_t recent = cn_fleet__floor_to((int64_t)time(NULL), 600) - 600;
    for (size_t i = 0; i < CN_FLEET__N_TIERS; i++) {
        bool fill = v == 2 && cn_fleet__tiers[i].secs == 600;
        snprintf(sql, sizeof(sql),
                 "CREATE TABLE IF NOT EXISTS %s.%s %s ENGINE = SummingMergeTree((samples, "
                 "weight)) PARTITION BY toYYYYMMDD(time) ORDER BY (service, host, time, stack, "
                 "session, label_keys, label_values)",
                 db, cn_fleet__tiers[i].table, rollup_cols);
        if ((r = exec_sql(c, sql, err)) < 0)
            return r;
        if (fill && (r = backfill(c, db, i, NULL, INT64_MIN, recent, err)) < 0)
            return r;
        snprintf(sql, sizeof(sql),
                 "CREATE MATERIALIZED VIEW IF NOT EXISTS %s.%s_mv TO %s.%s AS " ROLLUP_SELECT(
                     "%s.samples"),
                 db, cn_fleet__tiers[i].table, db, cn_fleet__tiers[i].table,
                 cn_fleet__tiers[i].secs, cn_fleet__tiers[i].secs, db);
        if ((r = exec_sql(c, sql, err)) < 0)
            return r;
        if (fill) {
            char where[64];
            snprintf(where, sizeof(where), " WHERE time >= toDateTime(%lld)", (long long)recent);
            snprintf(sql, sizeof(sql), "INSERT INTO %s.%s " ROLLUP_OF, db, cn_fleet__tiers[i].table,
                     cn_fleet__tiers[i].secs, cn_fleet__tiers[i].secs, db, where);
            if ((r = exec_sql(c, sql, err)) < 0)
                return r;
        }
    }
    if (v == 1 && (r = migrate_v1(c, db, err)) < 0)
        return r;
    /* Definitions are written again now and then (restarts, dropped spool files):
     * ReplacingMergeTree folds the copies in the background, readers use any(). */
    snprintf(sql, sizeof(sql),
             "CREATE TABLE IF NOT EXISTS %s.stacks %s ENGINE = ReplacingMergeTree() ORDER BY stack",
             db, stacks_cols);
    if ((r = exec_sql(c, sql, err)) < 0 || (r = add_kinds(c, db, "stacks", err)) < 0)
        return r;
    static const char *const dist[][2] = {{"samples", samples_cols},
                                          {"samples_hourly", rollup_cols},
                                          {"samples_10m", rollup_cols},
                                          {"stacks", stacks_cols}};
    for (size_t i = 0; cluster && i < sizeof(dist) / sizeof(dist[0]); i++) {
        snprintf(sql, sizeof(sql),
                 "CREATE TABLE IF NOT EXISTS %s.%s_all %s ENGINE = Distributed(%s, %s, %s, "
                 "rand())",
                 db, dist[i][0], dist[i][1], cluster, db, dist[i][0]);
        if ((r = exec_sql(c, sql, err)) < 0)
            return r;
    }
    if (cluster && (r = add_kinds(c, db, "stacks_all", err)) < 0)
        return r;
    if (v != CN_FLEET_SCHEMA_VERSION) {
        snprintf(sql, sizeof(sql), "INSERT INTO %s.schema VALUES (%d, '%s', now())", db,
                 CN_FLEET_SCHEMA_VERSION, cluster ? cluster : "");
        r = exec_sql(c, sql, err);
    }
    return r;
}

int cn_fleet_init(cn_fleet_conn *const *nodes, size_t n_nodes, const char *db, const char *cluster,
                  cn_err *err)
{
    if (!cn_fleet__name_ok(db))
        return cn_err_set(err, -EINVAL, "bad database name '%s' (letters, digits, '_')", db);
    if (cluster && !cn_fleet__name_ok(cluster))
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
    if (!cn_fleet__name_ok(db))
        return cn_err_set(err, -EINVAL, "bad database name '%s' (letters, digits, '_')", db);
    cn_buf_init(&ans, 1 << 16);
    /* The newest version recorded: a migration adds a row. */
    snprintf(sql, sizeof(sql),
             "SELECT version, cluster FROM %s.schema ORDER BY version DESC, created DESC LIMIT 1 "
             "FORMAT TabSeparated",
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
    if (out->version == 0)
        r = cn_err_set(err, -ENOENT, "no fleet schema in database '%s' (run canopy fleet init)",
                       db);
    else if (out->version < CN_FLEET_SCHEMA_VERSION)
        r = cn_err_set(err, -EPROTO,
                       "fleet schema version %d in '%s'; this canopy reads version %d (run "
                       "canopy fleet init to migrate it)",
                       out->version, db, CN_FLEET_SCHEMA_VERSION);
    else if (out->version != CN_FLEET_SCHEMA_VERSION)
        r = cn_err_set(err, -EPROTO,
                       "fleet schema version %d in '%s'; this canopy reads version %d",
                       out->version, db, CN_FLEET_SCHEMA_VERSION);
    if (r < 0)
        goto out;
    snprintf(out->cluster, sizeof(out->cluster), "%s", n == 2 ? f[1] : "");
    const char *suffix = out->cluster[0] ? "_all" : "";
    snprintf(out->samples, sizeof(out->samples), "%s.samples%s", db, suffix);
    snprintf(out->hourly, sizeof(out->hourly), "%s.samples_hourly%s", db, suffix);
    snprintf(out->ten_min, sizeof(out->ten_min), "%s.samples_10m%s", db, suffix);
    snprintf(out->stacks, sizeof(out->stacks), "%s.stacks%s", db, suffix);
out:
    cn_buf_free(&ans);
    return r;
}

/* ---- retention ---------------------------------------------------------------------- */

int cn_fleet_prune(cn_fleet_conn *const *nodes, size_t n_nodes, const char *db, int64_t before_s,
                   int *dropped, cn_err *err)
{
    char sql[512];
    cn_buf ans;
    int r = 0, n = 0;
    if (!cn_fleet__name_ok(db))
        return cn_err_set(err, -EINVAL, "bad database name '%s' (letters, digits, '_')", db);
    cn_buf_init(&ans, 1 << 20);
    /* The rollups' partitions are the same days: dropped with the raw rows. */
    static const char *const tables[] = {"samples", "samples_hourly", "samples_10m"};
    const size_t n_tables = sizeof(tables) / sizeof(tables[0]);
    for (size_t i = 0; i < n_tables * n_nodes && r == 0; i++) {
        const char *table = tables[i % n_tables];
        cn_buf_reset(&ans);
        snprintf(sql, sizeof(sql),
                 "SELECT DISTINCT partition FROM system.parts WHERE database = '%s' AND table = "
                 "'%s' AND active AND toUInt32(partition) < toYYYYMMDD(toDateTime(%lld)) "
                 "ORDER BY partition FORMAT TabSeparated",
                 db, table, (long long)before_s);
        if ((r = cn_fleet_exec(nodes[i / n_tables], sql, NULL, 0, false, &ans, err)) < 0)
            break;
        cn_lines it;
        const char *line;
        size_t len;
        cn_lines_init(&it, cn_buf_ptr(&ans), cn_buf_len(&ans));
        while (r == 0 && cn_lines_next(&it, &line, &len)) {
            if (len == 0 || len > 8 || strspn(line, "0123456789") < len)
                continue;
            snprintf(sql, sizeof(sql), "ALTER TABLE %s.%s DROP PARTITION %.*s", db, table, (int)len,
                     line);
            if ((r = exec_sql(nodes[i / n_tables], sql, err)) == 0 && i % n_tables == 0)
                n++;
        }
    }
    cn_buf_free(&ans);
    *dropped = n;
    return r;
}
