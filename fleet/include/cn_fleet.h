/* cn_fleet.h — canopy's fleet store: the whole public API of fleet/.
 *
 * Every canopyd of a fleet pushes its sessions' samples to ClickHouse, and `canopy fleet`
 * queries them back into the aggregate engine (docs/fleet.md). This module is both ends
 * of that pipe, with no daemon or CLI in it:
 *   - labels: `key=value` sets validated once (cn_fleet_labels);
 *   - rows: a window of a profile's samples becomes one row per symbolized stack with
 *     summed weight (cn_fleet_collect), the stack named by a stable 64-bit hash of its
 *     function path (functions with their libraries, cn_fleet_stack_hash), its definition
 *     written once per pusher (cn_fleet_seen), all encoded as ClickHouse TabSeparated
 *     bodies (cn_fleet_batch);
 *   - the pusher: a thread that gzips each batch, keeps it in an on-disk spool (bounded,
 *     oldest dropped and counted), and inserts spooled batches in order over HTTP with
 *     libcurl, backing off while ClickHouse is unreachable (cn_fleet_pusher);
 *   - Pyroscope: a pusher can instead send each batch to Grafana Pyroscope's push API,
 *     the batch body being a PushRequest of gzip'd pprof profiles (cn_fleet_pyroscope_add;
 *     the pprof bytes come from the caller);
 *   - the reader: the schema (cn_fleet_init, versioned and migrated), the WHERE clause of
 *     label filters, the rows a filter selects (the hourly rollup for whole hours, the
 *     10-minute rollup for whole 10-minute blocks, raw rows for the rest:
 *     cn_fleet_source_sql), and a `GROUP BY stack` query loaded
 *     into a cn_agg_profile (cn_fleet_load), plus labels and retention
 *     (cn_fleet_labels_query, cn_fleet_prune).
 * Only ClickHouse's HTTP interface is used, and only features ClickHouse 18.16 has.
 *
 * Ownership: every object is owned by its creator and freed with its _free (NULL
 * accepted). A pusher owns its thread; everything else runs on the caller's thread and
 * is owned by one thread at a time. Errors are negative errno values with a one-line
 * message in a cn_err. Nothing here prints or exits.
 */
#ifndef CN_FLEET_H
#define CN_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cn_agg.h"
#include "cn_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: samples.batch, the samples_hourly rollup; 3: the samples_10m rollup; 4: stacks.kinds */
#define CN_FLEET_SCHEMA_VERSION 4
#define CN_FLEET_MAX_LABELS     30  /* per row, configured and per-session together */
#define CN_FLEET_MAX_KEY        64  /* bytes of a label key */
#define CN_FLEET_MAX_VALUE      256 /* bytes of a label value */

/* ---------------------------------------------------------------------------------------
 * Labels
 */

typedef struct cn_fleet_label {
    char *key, *value; /* owned */
} cn_fleet_label;

typedef struct cn_fleet_labels {
    cn_fleet_label *v; /* owned; keys unique, in insertion order */
    size_t n, cap;
} cn_fleet_labels;

/* Checks one label: a key of [A-Za-z_][A-Za-z0-9_.-]* up to CN_FLEET_MAX_KEY bytes, a
 * value of printable bytes (no ',', control characters) up to CN_FLEET_MAX_VALUE.
 * Returns 0 or -EINVAL with err naming the label. */
int cn_fleet_label_check(const char *key, const char *value, cn_err *err);
/* Sets key to value (replacing an existing value), after cn_fleet_label_check and the
 * CN_FLEET_MAX_LABELS bound. Returns 0, -EINVAL or -ENOMEM with err set. */
int cn_fleet_labels_set(cn_fleet_labels *l, const char *key, const char *value, cn_err *err);
/* Adds every `k=v` of a comma-separated list ("env=prod,dc=x"; "" is none). Returns 0 or
 * negative errno with err naming the bad item. */
int cn_fleet_labels_parse(cn_fleet_labels *l, const char *list, cn_err *err);
/* The value of key, or NULL. */
const char *cn_fleet_labels_get(const cn_fleet_labels *l, const char *key);
/* Copies every label of src into dst (src wins on equal keys). 0 or negative errno. */
int cn_fleet_labels_merge(cn_fleet_labels *dst, const cn_fleet_labels *src, cn_err *err);
void cn_fleet_labels_clear(cn_fleet_labels *l);
/* The container labels a process's cgroup path gives its rows (docs/fleet.md "Container
 * labels"): container_id, cgroup, pod_uid, k8s_qos, systemd_unit (common/cgroup.c), each
 * where the path names one, the session does not set that key itself and the value is a
 * valid label value; added to out. path NULL or "/" (the root cgroup, where a machine
 * without cgroups keeps every process) adds nothing. 0 or -ENOMEM. */
int cn_fleet_cgroup_labels(const char *path, const cn_fleet_labels *session, cn_fleet_labels *out);
/* The cgroup paths of the processes with samples in [from_ns, to_ns) of p: *out (malloc'ed
 * array, the caller frees it; the paths point into p) holds NULL first when some sample
 * has no cgroup (or there is no sample), then each distinct path; *n their number. 0 or
 * -ENOMEM. */
int cn_fleet_window_cgroups(cn_agg_profile *p, int64_t from_ns, int64_t to_ns, const char ***out,
                            size_t *n);

/* ---------------------------------------------------------------------------------------
 * Rows: what one interval of one or more sessions sends
 */

/* The stable hash of a function path, root first: XXH3-64 of each frame's function
 * name, a 0 byte, its library name, a 0 byte. Equal paths hash equally on every host. */
uint64_t cn_fleet_stack_hash(const char *const *funcs, const char *const *libs, size_t n);

/* Stack hashes whose definitions this pusher already wrote (or queued), so each is
 * written once. Bounded: past max entries it is cleared (definitions are then written
 * again, which the ReplacingMergeTree table absorbs). */
typedef struct cn_fleet_seen cn_fleet_seen;
cn_fleet_seen *cn_fleet_seen_new(size_t max);
cn_fleet_seen *cn_fleet_seen_free(cn_fleet_seen *s);
void cn_fleet_seen_reset(cn_fleet_seen *s);
size_t cn_fleet_seen_count(const cn_fleet_seen *s);

/* A batch: the TabSeparated bodies of the `samples` and `stacks` inserts of one
 * interval, with their row counts and the wall time of the interval (seconds). */
typedef struct cn_fleet_batch {
    cn_buf samples, stacks; /* owned */
    uint64_t sample_rows, stack_rows;
    uint64_t weight_samples; /* samples the rows sum */
    int64_t time_s;          /* the earliest row's time */
} cn_fleet_batch;

cn_fleet_batch *cn_fleet_batch_new(void);
cn_fleet_batch *cn_fleet_batch_free(cn_fleet_batch *b);

/* Where a collected window's rows come from. Strings are borrowed. */
typedef struct cn_fleet_source {
    int64_t time_s;                /* wall-clock seconds of the window (the rows' time) */
    const char *host, *service;    /* host name, service (the target's name by default) */
    const char *session;           /* the session's id on that host */
    const cn_fleet_labels *labels; /* merged labels (config and session), may be NULL */
} cn_fleet_source;

/* Collection options: the window [from_ns, to_ns) of session time, and whether stacks
 * with frames still waiting for symbols may go out now (as `lib+0xOFF`, with the
 * library's build-id) or the window must wait. */
typedef struct cn_fleet_window {
    int64_t from_ns, to_ns;
    bool allow_unresolved;
} cn_fleet_window;

/* Adds to b one row per distinct symbolized stack among p's samples in the window (the
 * retention accumulator is not a window's), with the sum of their weights and their
 * count, and a stack definition row for each hash not in seen (then added to it): the
 * frames' functions, libraries, build-ids and kind markers (cn_agg_resource_kind_marker:
 * "python" for a Python function, which the reader gives back as one; the hash does not
 * include them). Frames are named as the profile names them now; a frame still without symbols
 * (cn_agg_frame_is_placeholder) makes the window unresolved. When w->allow_unresolved is
 * false and the window is unresolved, nothing is added and -EAGAIN is returned.
 * *n_samples (may be NULL) gets the number of samples collected. Returns 0 or negative
 * errno (-ENOMEM; then b may hold part of the rows and should be dropped). */
int cn_fleet_collect(cn_fleet_batch *b, cn_agg_profile *p, const cn_fleet_window *w,
                     const cn_fleet_source *src, cn_fleet_seen *seen, uint64_t *n_samples);

/* ---------------------------------------------------------------------------------------
 * HTTP: one ClickHouse endpoint
 */

typedef struct cn_fleet_conn cn_fleet_conn;

/* A connection to the ClickHouse HTTP endpoint url ("http://host:8123/"), with
 * credentials (both may be NULL). timeout_ms bounds each request (0 = 60 s). Returns 0
 * and *out, or -EINVAL (not an http(s) URL) / -ENOMEM with err set. */
int cn_fleet_conn_new(const char *url, const char *user, const char *password, long timeout_ms,
                      cn_fleet_conn **out, cn_err *err);
cn_fleet_conn *cn_fleet_conn_free(cn_fleet_conn *c);
const char *cn_fleet_conn_url(const cn_fleet_conn *c);

/* Runs sql. Without a body, sql is the POST body; with one, sql goes in the URL's query
 * parameter and body (gzip-compressed when gzipped) is the data of an INSERT. The
 * response body goes to out (may be NULL), bounded by out's limit. Returns 0, or
 * -ECONNREFUSED/-ETIMEDOUT/-EHOSTUNREACH (unreachable), -EIO (ClickHouse answered with
 * an error: err holds its first line), -EFBIG (response over out's limit), -ENOMEM. */
int cn_fleet_exec(cn_fleet_conn *c, const char *sql, const void *body, size_t len, bool gzipped,
                  cn_buf *out, cn_err *err);

/* POSTs body (len bytes of content_type) to the connection's URL with path appended
 * ("/push.v1.PusherService/Push"), plus the extra header lines of headers (NULL-terminated
 * array, may be NULL). Returns 0 for a 2xx answer, -EBADMSG when the server refused the
 * request itself (4xx other than 408 and 429: sending it again cannot help), -EIO for
 * other answers (err holds the status and the body's first line), or the connection
 * errors of cn_fleet_exec. */
int cn_fleet_post(cn_fleet_conn *c, const char *path, const char *content_type,
                  const char *const *headers, const void *body, size_t len, cn_err *err);

/* gzip-compresses in into out (appended). 0 or -ENOMEM. */
int cn_fleet_gzip(const void *in, size_t len, int level, cn_buf *out);

/* Quotes s as a ClickHouse string literal ('…' with backslash escapes) onto out. */
int cn_fleet_sql_quote(cn_buf *out, const char *s);

/* ---------------------------------------------------------------------------------------
 * The pusher: spool and send, off the caller's thread
 */

/* Where a pusher sends its batches. */
typedef enum cn_fleet_sink {
    CN_FLEET_SINK_CLICKHOUSE = 0, /* rows (cn_fleet_collect): INSERTs into database */
    CN_FLEET_SINK_PYROSCOPE,      /* PushRequests (cn_fleet_pyroscope_add): one POST per
                                     spool file to URL/push.v1.PusherService/Push */
    CN_FLEET_SINK_OTLP,           /* OTLP export requests (cn_fleet_otlp_set): one POST per
                                     spool file to URL/v1development/profiles, never merged */
} cn_fleet_sink;

typedef struct cn_fleet_pusher_opts {
    cn_fleet_sink sink;
    const char *url, *user, *password; /* copied */
    const char *org_id;                /* copied; Pyroscope's X-Scope-OrgID, NULL = none */
    const char *database;              /* copied; NULL = "canopy" */
    const char *spool_dir;             /* copied; created (0700) when missing */
    uint64_t spool_max;                /* bytes of spooled batches; 0 = 256 MiB */
    int64_t backoff_max_ns;            /* 0 = 8 s */
    long timeout_ms;                   /* per request; 0 = 30 s */
} cn_fleet_pusher_opts;

/* For a Pyroscope pusher, "rows" are profiles (series) and a refused request (HTTP 4xx)
 * is dropped and counted rather than retried. */
typedef struct cn_fleet_push_stats {
    uint64_t rows_sent;    /* sample rows ClickHouse accepted */
    uint64_t rows_queued;  /* sample rows waiting (memory queue and spool) */
    uint64_t rows_dropped; /* sample rows of batches dropped (spool bound, bad files) */
    uint64_t batches_sent, batches_queued, batches_dropped;
    uint64_t spool_bytes;   /* bytes in the spool dir */
    uint64_t failures;      /* failed requests */
    int64_t last_success_s; /* wall-clock seconds of the last accepted batch, 0 = never */
    int64_t lag_s;          /* now minus the oldest waiting batch's time, 0 when none */
    char last_error[512];   /* "" when the last request succeeded */
} cn_fleet_push_stats;

typedef struct cn_fleet_pusher cn_fleet_pusher;

/* Creates the spool dir, adopts the batches a previous run left in it (they go first),
 * and starts the thread. Returns 0 and *out or negative errno with err set. */
int cn_fleet_pusher_new(const cn_fleet_pusher_opts *o, cn_fleet_pusher **out, cn_err *err);
/* Hands b to the thread (which compresses it, spools it, then sends it after every batch
 * submitted before it). Takes b in every case. Never blocks on the network. Returns 0, or
 * -ENOMEM (b dropped and counted). */
int cn_fleet_pusher_submit(cn_fleet_pusher *p, cn_fleet_batch *b);
/* True once after the thread dropped a batch whose stack definitions later rows may
 * need: the caller should reset its cn_fleet_seen. */
bool cn_fleet_pusher_take_reset(cn_fleet_pusher *p);
void cn_fleet_pusher_stats(cn_fleet_pusher *p, cn_fleet_push_stats *out);
/* Batches submitted and not yet written to the spool. The memory queue holds at most 256
 * (then the oldest is dropped): a producer faster than one batch per interval (a
 * benchmark) waits while this is high. */
size_t cn_fleet_pusher_backlog(cn_fleet_pusher *p);
/* Waits until every batch was sent or timeout_ms passed (retrying at once, not after the
 * backoff). Returns 0 when nothing is left, -ETIMEDOUT otherwise. */
int cn_fleet_pusher_flush(cn_fleet_pusher *p, int timeout_ms);
/* Stops the thread (what is not sent stays in the spool for the next run) and frees.
 * Accepts NULL; returns NULL. */
cn_fleet_pusher *cn_fleet_pusher_free(cn_fleet_pusher *p);

/* ---------------------------------------------------------------------------------------
 * Pyroscope (docs/fleet.md, "Pushing to Pyroscope")
 */

#define CN_FLEET_PYROSCOPE_PATH       "/push.v1.PusherService/Push"
#define CN_FLEET_PYROSCOPE_MAX_LABELS 30 /* Pyroscope's default limit per series */

/* Appends to b's samples body one PushRequest of one series: the labels (names made
 * Prometheus label names, '.' and '-' becoming '_'; the first of a repeated name kept;
 * sent sorted; the first CN_FLEET_PYROSCOPE_MAX_LABELS only) and one RawSample with
 * raw_profile = pprof_gz (a gzip'd pprof profile, copied) and ID = id (may be NULL).
 * Concatenated PushRequests are one PushRequest with every series, so a batch holds any
 * number of them. b->sample_rows counts the series; time_s lowers b->time_s. Returns 0,
 * -EINVAL (no profile, no usable label) or -ENOMEM. */
int cn_fleet_pyroscope_add(cn_fleet_batch *b, const cn_fleet_label *labels, size_t n,
                           const void *pprof_gz, size_t len, const char *id, int64_t time_s);

/* ---------------------------------------------------------------------------------------
 * OTLP profiles (docs/fleet.md, "Pushing OTLP profiles")
 */

#define CN_FLEET_OTLP_PATH "/v1development/profiles"

/* Makes b the body of one OTLP/HTTP export request: req (len bytes, copied) is a
 * serialized ExportProfilesServiceRequest (formats/' cn_fmt_write_otlp writes one). Two
 * requests do not concatenate into one (their dictionaries would merge), so a batch holds
 * exactly one and the pusher never merges OTLP batches. b->sample_rows counts it as one
 * profile; time_s lowers b->time_s. Returns 0, -EINVAL (empty request, or b not empty)
 * or -ENOMEM. */
int cn_fleet_otlp_set(cn_fleet_batch *b, const void *req, size_t len, int64_t time_s);

/* ---------------------------------------------------------------------------------------
 * The reader side (canopy fleet)
 */

/* The schema: creates the database and tables when missing (idempotent) and records
 * CN_FLEET_SCHEMA_VERSION. cluster NULL: MergeTree tables on this server; otherwise the
 * same tables on every node of that ClickHouse cluster (urls: one HTTP URL per node,
 * in the order of system.clusters; the caller finds them) plus Distributed tables
 * `samples_all`/`samples_hourly_all`/`samples_10m_all`/`stacks_all` over them on every
 * node. Migrates a database of version 1 or 2 (docs/fleet.md "Upgrading"). Returns 0 or negative
 * errno with err set (-EPROTO: an existing schema of another version). */
int cn_fleet_init(cn_fleet_conn *const *nodes, size_t n_nodes, const char *db, const char *cluster,
                  cn_err *err);

/* What a reader needs to know of the schema: its version and the tables to query
 * (`samples`/`samples_hourly`/`samples_10m`/`stacks`, or their Distributed `…_all`
 * tables). */
typedef struct cn_fleet_schema {
    int version;
    char cluster[128]; /* "" for a single server */
    /* db.table names to read: raw rows, hourly and 10-minute rollups, definitions */
    char samples[160], hourly[160], ten_min[160], stacks[160];
} cn_fleet_schema;

/* Reads and checks the schema: -ENOENT (no schema: run `canopy fleet init`), -EPROTO (a
 * version this canopy does not read; an older one is migrated by cn_fleet_init), or a
 * connection error, with err set. */
int cn_fleet_schema_get(cn_fleet_conn *c, const char *db, cn_fleet_schema *out, cn_err *err);

/* A filter on rows: label conditions (key=value; host and service are columns, other
 * keys labels; each key's values are ORed, different keys ANDed) and a time window. */
typedef struct cn_fleet_filter {
    char **keys, **values; /* the conditions (owned, parallel arrays) */
    size_t n;
    int64_t from_s, to_s; /* unix seconds; INT64_MIN / INT64_MAX = open */
    bool raw;             /* read the raw rows only, not the rollups (to check them) */
} cn_fleet_filter;

void cn_fleet_filter_init(cn_fleet_filter *f);
/* Adds the conditions of "k=v[,k=v]". 0 or -EINVAL/-ENOMEM with err set. */
int cn_fleet_filter_add(cn_fleet_filter *f, const char *list, cn_err *err);
void cn_fleet_filter_clear(cn_fleet_filter *f);
/* Appends " WHERE …" (or nothing) for f to sql. 0 or -ENOMEM. */
int cn_fleet_filter_sql(const cn_fleet_filter *f, cn_buf *sql);
/* Appends "(SELECT cols FROM … WHERE …)": the rows f selects with the columns cols (a
 * SELECT list over the columns all sample tables have), read from the hourly rollup for
 * the whole UTC hours of f's window, from the 10-minute rollup for the whole 10-minute
 * blocks of the rest and from the raw rows for what remains (< 10 minutes at each edge;
 * UNION ALL), or from the raw rows only when f->raw; extra (may be NULL) is one more condition
 * ANDed to f's. Sums over it equal the raw rows' sums. 0 or -ENOMEM. */
int cn_fleet_source_sql(const cn_fleet_schema *s, const cn_fleet_filter *f, const char *cols,
                        const char *extra, cn_buf *sql);

/* Loads the fleet's samples that pass f into a new profile: per distinct stack (and
 * group) the summed weight, as one sample at time 0, frames named `func` in resource
 * `lib`. group_by NULL: no grouping; "host", "service" or a label key: a root node
 * "KEY=VALUE" per value. Metadata: source=fleet, samples (their count). Returns 0 and
 * *out (free with cn_agg_profile_free) or negative errno with err set. */
int cn_fleet_load(cn_fleet_conn *c, const cn_fleet_schema *s, const cn_fleet_filter *f,
                  const char *group_by, cn_agg_profile **out, cn_err *err);

/* `canopy fleet labels`: without key, one line "KEY\tVALUES\tSAMPLES" per key (host and
 * service included); with key, "VALUE\tSAMPLES" per value, most samples first. The
 * TabSeparated text is appended to out. 0 or negative errno with err set. */
int cn_fleet_labels_query(cn_fleet_conn *c, const cn_fleet_schema *s, const cn_fleet_filter *f,
                          const char *key, cn_buf *out, cn_err *err);

/* Drops the daily partitions of the samples table older than before_s (on every node of
 * a cluster: nodes as for cn_fleet_init). *dropped gets their number. 0 or negative
 * errno with err set. */
int cn_fleet_prune(cn_fleet_conn *const *nodes, size_t n_nodes, const char *db, int64_t before_s,
                   int *dropped, cn_err *err);

#ifdef __cplusplus
}
#endif
#endif /* CN_FLEET_H */
