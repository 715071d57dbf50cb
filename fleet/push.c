/* push.c — the pusher: a thread that spools batches on disk and inserts them in order.
 *
 * Every batch goes through the spool, so order and restarts need no second path: the
 * caller's thread only links the batch into a memory queue (cn_fleet_pusher_submit); the
 * pusher's thread writes its two bodies as one file SPOOL/<seq>.batch (tmp + rename), and
 * sends spooled files oldest first, as many as fit in SEND_MAX bytes in one request per
 * table (ClickHouse makes a part per insert: few large inserts, not many small ones),
 * gzip'd: the stack definitions, then the sample rows, deleting the files once both were
 * accepted. A failure keeps the file and
 * retries after a backoff (doubling from 250 ms up to backoff_max). The spool is bounded
 * in bytes: past the bound the oldest files are deleted and their rows counted as
 * dropped, and the caller is told to write stack definitions again (a dropped file may
 * have held some that later rows use). The spool index is a FIFO array of (seq, rows,
 * bytes, time, batch id); only the thread touches files.
 * Retries are idempotent: every spool file has a 64-bit batch id (the pusher's random
 * nonce plus its sequence number, kept in the file's header), written into the `batch`
 * column of each of its rows at send time. An insert of fewer than max_insert_block_size
 * rows is atomic in a MergeTree table, so after a samples insert that failed in any way
 * (the answer may have been lost after ClickHouse took the rows), and for every file a
 * restart adopts, the pusher first asks ClickHouse which of those batch ids are in the
 * table, and sends only the others (ClickHouse 18.16 deduplicates inserts only into
 * replicated tables; docs/fleet.md "Failures").
 * A Pyroscope pusher (CN_FLEET_SINK_PYROSCOPE) is the same queue, spool and backoff with
 * another send: a file's body is a PushRequest, POSTed alone (one file per request, so
 * that a request Pyroscope refuses — HTTP 4xx, which no retry can fix — drops one file,
 * counted, and not its neighbours).
 * An OTLP pusher (CN_FLEET_SINK_OTLP) is the same again, POSTing each file's body, one
 * ExportProfilesServiceRequest, to URL/v1development/profiles; its batches are never
 * merged in the queue (two requests' dictionaries would merge into one wrong one).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cn_fleet.h"

#define QUEUE_MAX      256                  /* batches in memory before the oldest is dropped */
#define MERGE_MAX      ((size_t)32 << 20)   /* bytes of queued rows merged into one spool file */
#define SEND_MAX       ((uint64_t)32 << 20) /* bytes of spool files sent in one request */
#define BACKOFF_MIN_NS 250000000LL
/* "CNFLEET2": stack rows without kinds (sent with `[]`), "CNFLEET1": also without the
 * batch id */
#define SPOOL_MAGIC "CNFLEET3"
/* Sample rows per insert: under ClickHouse's max_insert_block_size (1 048 576), so that
 * one insert is one block, written atomically. */
#define INSERT_ROWS_MAX 1000000

typedef struct qitem {
    cn_fleet_batch *b;
    struct qitem *next;
} qitem;

typedef struct spooled {
    uint64_t seq, rows, bytes;
    int64_t time_s;
    uint64_t batch;  /* the rows' batch id */
    bool maybe_sent; /* an insert of it may have landed: ask before sending it again */
} spooled;

struct cn_fleet_pusher {
    cn_fleet_sink sink;
    char *dir, *db;
    char *org_hdr; /* "X-Scope-OrgID: …" or NULL */
    uint64_t spool_max;
    int64_t backoff_max;
    cn_fleet_conn *conn; /* the thread's */
    pthread_t thread;
    bool thread_ok;
    pthread_mutex_t mu;
    pthread_cond_t cv, idle_cv;
    /* under mu: */
    qitem *head, *tail;
    size_t queued;
    uint64_t queued_rows;
    spooled *sp; /* FIFO: sp[0 .. n_sp) oldest first */
    size_t n_sp, cap_sp;
    uint64_t next_seq;
    uint64_t nonce; /* random per pusher: batch id = nonce + seq */
    bool stop, reset, flushing, busy;
    cn_fleet_push_stats st;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void spool_path(const cn_fleet_pusher *p, uint64_t seq, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%020llu.batch", p->dir, (unsigned long long)seq);
}

/* Never 0: the rows written before batch ids existed have 0. */
static uint64_t batch_id(const cn_fleet_pusher *p, uint64_t seq)
{
    uint64_t id = p->nonce + seq;
    return id ? id : 1;
}

/* ---- the spool (thread side; mu held only where said) ------------------------------ */

/* Deletes the oldest spooled batch; mu held. */
static void drop_front(cn_fleet_pusher *p, bool sent)
{
    char path[4096];
    spooled s = p->sp[0];
    spool_path(p, s.seq, path, sizeof(path));
    unlink(path);
    memmove(p->sp, p->sp + 1, (p->n_sp - 1) * sizeof(*p->sp));
    p->n_sp--;
    p->st.spool_bytes -= s.bytes;
    p->st.rows_queued -= s.rows;
    p->st.batches_queued--;
    if (sent) {
        p->st.rows_sent += s.rows;
        p->st.batches_sent++;
    } else {
        p->st.rows_dropped += s.rows;
        p->st.batches_dropped++;
        p->reset = true;
    }
}

/* Keeps the spool under its bound; mu held. */
static void enforce_bound(cn_fleet_pusher *p)
{
    while (p->n_sp > 0 && p->st.spool_bytes > p->spool_max)
        drop_front(p, false);
}

/* Writes b as the next spool file (mu not held): the header line, then the two
 * TabSeparated bodies as they are. They are compressed when sent, several files to one
 * request. Returns 0 and *out. */
static int spool_write(cn_fleet_pusher *p, const cn_fleet_batch *b, uint64_t seq, spooled *out)
{
    char path[4096], head[192];
    cn_afile af;
    size_t ns = cn_buf_len(&b->samples), nk = cn_buf_len(&b->stacks);
    uint64_t batch = batch_id(p, seq);
    int hn = snprintf(head, sizeof(head), SPOOL_MAGIC " %llu %llu %zu %zu %lld %llu\n",
                      (unsigned long long)b->sample_rows, (unsigned long long)b->stack_rows, ns, nk,
                      (long long)b->time_s, (unsigned long long)batch);
    spool_path(p, seq, path, sizeof(path));
    int r = cn_afile_open(&af, path, 0600, NULL);
    if (r < 0)
        return r;
    if ((r = cn_afile_write(&af, head, (size_t)hn, NULL)) < 0 ||
        (r = cn_afile_write(&af, cn_buf_ptr(&b->samples), ns, NULL)) < 0 ||
        (r = cn_afile_write(&af, cn_buf_ptr(&b->stacks), nk, NULL)) < 0) {
        cn_afile_abort(&af);
        return r;
    }
    r = cn_afile_commit(&af, NULL);
    if (r == 0)
        *out = (spooled){.seq = seq,
                         .rows = b->sample_rows,
                         .bytes = (uint64_t)hn + ns + nk,
                         .time_s = b->time_s == INT64_MAX ? 0 : b->time_s,
                         .batch = batch};
    return r;
}

/* Reads a spool file: its header fields and the two gzip'd bodies (into data). */
typedef struct spool_file {
    unsigned long long rows, stack_rows, batch; /* batch 0: a CNFLEET1 file */
    bool kinds;                                 /* stack rows end in kinds (CNFLEET3) */
    size_t zs, zk;
    long long time_s;
    char *data; /* owned: zs + zk bytes */
} spool_file;

static int spool_read(const char *path, spool_file *f)
{
    FILE *in = fopen(path, "re");
    char magic[16];
    int r = -EINVAL;
    memset(f, 0, sizeof(*f));
    if (!in)
        return -errno;
    if (fscanf(in, "%15s %llu %llu %zu %zu %lld", magic, &f->rows, &f->stack_rows, &f->zs, &f->zk,
               &f->time_s) != 6 ||
        (strcmp(magic, SPOOL_MAGIC) && strcmp(magic, "CNFLEET2") && strcmp(magic, "CNFLEET1")) ||
        (strcmp(magic, "CNFLEET1") && fscanf(in, " %llu", &f->batch) != 1) || fgetc(in) != '\n' ||
        f->zs > (1u << 30) || f->zk > (1u << 30))
        goto out;
    f->kinds = !strcmp(magic, SPOOL_MAGIC);
    if (!(f->data = malloc(f->zs + f->zk + 1))) {
        r = -ENOMEM;
        goto out;
    }
    if (fread(f->data, 1, f->zs + f->zk, in) != f->zs + f->zk)
        goto out;
    r = 0;
out:
    fclose(in);
    if (r < 0) {
        free(f->data);
        f->data = NULL;
    }
    return r;
}

/* Sends one spooled request alone to Pyroscope or an OTLP endpoint (mu not held); an OTLP
 * request gzip'd (Content-Encoding: gzip; Pyroscope's profiles are gzip'd inside). 1, or
 * negative errno with err set (-EBADMSG: unreadable or refused; it is dropped). */
static int spool_send_post(cn_fleet_pusher *p, const spooled *s, cn_err *err)
{
    bool otlp = p->sink == CN_FLEET_SINK_OTLP;
    char path[4096];
    const char *hdrs[2] = {otlp ? "Content-Encoding: gzip" : p->org_hdr, NULL};
    spool_file f;
    cn_buf z;
    cn_buf_init(&z, 0);
    spool_path(p, s->seq, path, sizeof(path));
    int r = spool_read(path, &f);
    if (r < 0)
        return cn_err_set(err, r == -ENOMEM ? r : -EBADMSG, "%s: unreadable spool file", path);
    if (otlp && (r = cn_fleet_gzip(f.data, f.zs, 1, &z)) < 0)
        r = cn_err_set(err, r, "compressing %s: %s", path, strerror(-r));
    else if (otlp)
        r = cn_fleet_post(p->conn, CN_FLEET_OTLP_PATH, "application/x-protobuf", hdrs,
                          cn_buf_ptr(&z), cn_buf_len(&z), err);
    else
        r = cn_fleet_post(p->conn, CN_FLEET_PYROSCOPE_PATH, "application/proto", hdrs, f.data, f.zs,
                          err);
    free(f.data);
    cn_buf_free(&z);
    return r < 0 ? r : 1;
}

/* Appends the TabSeparated rows data (len bytes, whole lines) to out, each with one more
 * field, suffix (with its tab). 0 or -ENOMEM. */
static int append_with_field(cn_buf *out, const char *data, size_t len, const char *suffix)
{
    size_t sn = strlen(suffix);
    const char *end = data + len;
    while (data < end) {
        const char *nl = memchr(data, '\n', (size_t)(end - data));
        size_t n = nl ? (size_t)(nl - data) : (size_t)(end - data);
        if (cn_buf_append(out, data, n) < 0 || cn_buf_append(out, suffix, sn) < 0 ||
            cn_buf_append(out, "\n", 1) < 0)
            return -ENOMEM;
        data += n + 1;
    }
    return 0;
}

/* Sets landed[i] for each s[i] (of n) that may have been inserted already and whose batch
 * id is in the samples table. 0 or negative errno with err set. */
static int spool_landed(cn_fleet_pusher *p, const spooled *s, size_t n, bool *landed, cn_err *err)
{
    cn_buf sql, ans;
    int64_t since = INT64_MAX;
    int r = 0;
    cn_buf_init(&sql, 0);
    cn_buf_init(&ans, 1 << 20);
    r = cn_buf_appendf(&sql, "SELECT DISTINCT batch FROM %s.samples WHERE batch IN (", p->db);
    const char *comma = "";
    for (size_t i = 0; i < n && r == 0; i++) {
        if (!s[i].maybe_sent || !s[i].rows)
            continue;
        r = cn_buf_appendf(&sql, "%s%llu", comma, (unsigned long long)s[i].batch);
        comma = ",";
        if (s[i].time_s < since)
            since = s[i].time_s;
    }
    if (r == 0 && !*comma)
        goto out; /* nothing to ask */
    /* The rows' times bound the partitions read (a batch's time is its earliest row's). */
    r = r ? r
          : cn_buf_appendf(&sql, ") AND time >= toDateTime(%lld) FORMAT TabSeparated",
                           (long long)(since > 0 ? since : 0));
    if (r < 0) {
        r = cn_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if ((r = cn_fleet_exec(p->conn, cn_buf_ptr(&sql), NULL, 0, false, &ans, err)) < 0)
        goto out;
    cn_lines it;
    const char *line;
    size_t len;
    cn_lines_init(&it, cn_buf_ptr(&ans), cn_buf_len(&ans));
    while (cn_lines_next(&it, &line, &len)) {
        uint64_t id = strtoull(line, NULL, 10);
        for (size_t i = 0; i < n; i++)
            if (s[i].maybe_sent && s[i].batch == id)
                landed[i] = true;
    }
out:
    cn_buf_free(&sql);
    cn_buf_free(&ans);
    return r;
}

/* Sends spooled batches s[0 .. n) (mu not held) as one insert per table: their bodies
 * concatenated in order, gzip'd, each sample row with its file's batch id; files whose
 * rows an earlier attempt inserted (spool_landed) are left out. *attempted is set once
 * the samples insert was started (its outcome is then unknown on failure). Returns the
 * number of files dealt with, or negative errno with err set (-EBADMSG: s[0] is
 * unreadable; it is dropped and the rest retried). */
static int spool_send(cn_fleet_pusher *p, const spooled *s, size_t n, bool *attempted, cn_err *err)
{
    char path[4096], sql[512];
    cn_buf raw_s, raw_k, z;
    uint64_t stack_rows = 0, rows = 0;
    bool *landed = calloc(n, sizeof(*landed));
    int r = landed ? 0 : cn_err_set(err, -ENOMEM, "out of memory");
    cn_buf_init(&raw_s, 0);
    cn_buf_init(&raw_k, 0);
    cn_buf_init(&z, 0);
    for (size_t i = 0; i < n && r == 0; i++)
        if (s[i].maybe_sent) {
            r = spool_landed(p, s, n, landed, err);
            break;
        }
    for (size_t i = 0; i < n && r == 0; i++) {
        spool_file f;
        if (landed[i])
            continue; /* its stacks went in before its rows */
        spool_path(p, s[i].seq, path, sizeof(path));
        r = spool_read(path, &f);
        if (r < 0) {
            if (i > 0) { /* send what came before it; it is dealt with next time */
                n = i;
                r = 0;
                break;
            }
            r = cn_err_set(err, r == -ENOMEM ? r : -EBADMSG, "%s: unreadable spool file", path);
            break;
        }
        /* Each sample row gets its file's batch id; the stack rows of a file written
         * before kinds existed get none (`[]`: every frame unmarked). */
        char batch[32];
        snprintf(batch, sizeof(batch), "\t%llu", (unsigned long long)s[i].batch);
        if (append_with_field(&raw_s, f.data, f.zs, batch) < 0 ||
            (f.kinds ? cn_buf_append(&raw_k, f.data + f.zs, f.zk)
                     : append_with_field(&raw_k, f.data + f.zs, f.zk, "\t[]")) < 0)
            r = cn_err_set(err, -ENOMEM, "out of memory");
        stack_rows += f.stack_rows;
        rows += f.rows;
        free(f.data);
    }
    if (r == 0 && stack_rows) {
        snprintf(sql, sizeof(sql),
                 "INSERT INTO %s.stacks (stack, host, time, funcs, libs, build_ids, kinds) "
                 "FORMAT TabSeparated",
                 p->db);
        if (cn_fleet_gzip(cn_buf_ptr(&raw_k), cn_buf_len(&raw_k), 1, &z) < 0)
            r = cn_err_set(err, -ENOMEM, "out of memory");
        else
            r = cn_fleet_exec(p->conn, sql, cn_buf_ptr(&z), cn_buf_len(&z), true, NULL, err);
    }
    if (r == 0 && rows) {
        snprintf(sql, sizeof(sql),
                 "INSERT INTO %s.samples (time, host, service, session, label_keys, label_values, "
                 "stack, samples, weight, batch) FORMAT TabSeparated",
                 p->db);
        cn_buf_reset(&z);
        if (cn_fleet_gzip(cn_buf_ptr(&raw_s), cn_buf_len(&raw_s), 1, &z) < 0) {
            r = cn_err_set(err, -ENOMEM, "out of memory");
        } else {
            *attempted = true;
            r = cn_fleet_exec(p->conn, sql, cn_buf_ptr(&z), cn_buf_len(&z), true, NULL, err);
        }
    }
    free(landed);
    cn_buf_free(&raw_s);
    cn_buf_free(&raw_k);
    cn_buf_free(&z);
    return r < 0 ? r : (int)n;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Adopts the batches a previous run left (before the thread starts). */
static int spool_load(cn_fleet_pusher *p)
{
    DIR *d = opendir(p->dir);
    uint64_t *seqs = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    if (!d)
        return -errno;
    while ((de = readdir(d))) {
        char *end;
        unsigned long long seq = strtoull(de->d_name, &end, 10);
        if (end == de->d_name)
            continue;
        size_t len = strlen(end);
        if (!strncmp(end, ".batch.", 7) && len >= 10 && !strcmp(end + len - 4, ".tmp")) {
            unlinkat(dirfd(d), de->d_name, 0); /* an interrupted write (cn_afile) */
            continue;
        }
        if (strcmp(end, ".batch") || CN_RESERVE(seqs, cap, n + 1) < 0)
            continue;
        seqs[n++] = seq;
    }
    closedir(d);
    if (n)
        qsort(seqs, n, sizeof(*seqs), cmp_u64);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        struct stat stt;
        spool_file f;
        spool_path(p, seqs[i], path, sizeof(path));
        if (spool_read(path, &f) < 0 || stat(path, &stt) < 0 ||
            CN_RESERVE(p->sp, p->cap_sp, p->n_sp + 1) < 0) {
            unlink(path);
            p->st.batches_dropped++;
            continue;
        }
        free(f.data);
        /* A previous run may have inserted it and stopped before deleting the file. */
        p->sp[p->n_sp++] = (spooled){.seq = seqs[i],
                                     .rows = f.rows,
                                     .bytes = (uint64_t)stt.st_size,
                                     .time_s = f.time_s,
                                     .batch = f.batch ? f.batch : batch_id(p, seqs[i]),
                                     .maybe_sent = true};
        p->st.rows_queued += f.rows;
        p->st.batches_queued++;
        p->st.spool_bytes += (uint64_t)stt.st_size;
        p->next_seq = seqs[i] + 1;
    }
    free(seqs);
    return 0;
}

/* ---- the thread -------------------------------------------------------------------- */

/* Appends b's rows to into (in order). 0 or -ENOMEM (then into is unchanged). */
static int merge_batch(cn_fleet_batch *into, const cn_fleet_batch *b)
{
    size_t ns = cn_buf_len(&b->samples), nk = cn_buf_len(&b->stacks), room;
    /* Room in both first, so that the appends below cannot fail half-way. */
    if ((ns && !cn_buf_space(&into->samples, ns, &room)) ||
        (nk && !cn_buf_space(&into->stacks, nk, &room)))
        return -ENOMEM;
    if ((ns && cn_buf_append(&into->samples, cn_buf_ptr(&b->samples), ns) < 0) ||
        (nk && cn_buf_append(&into->stacks, cn_buf_ptr(&b->stacks), nk) < 0))
        return -ENOMEM; /* not reached: the room was made */
    into->sample_rows += b->sample_rows;
    into->stack_rows += b->stack_rows;
    into->weight_samples += b->weight_samples;
    if (b->time_s < into->time_s)
        into->time_s = b->time_s;
    return 0;
}

static void *run(void *arg)
{
    cn_fleet_pusher *p = arg;
    int64_t backoff = 0, next_try = 0;
    pthread_setname_np(pthread_self(), "cn-fleet"); /* its CPU shows apart in /proc and top */
    void *altstack = cn_common_altstack_new();      /* a crash here is reported, overflow or not */
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        if (p->head) {
            qitem *it = p->head;
            p->head = it->next;
            p->queued--;
            /* Batches that queued up while the thread was busy become one spool file
             * and one insert per table (ClickHouse prefers few large inserts), in order. */
            while (p->sink != CN_FLEET_SINK_OTLP && p->head &&
                   cn_buf_len(&it->b->samples) < MERGE_MAX && merge_batch(it->b, p->head->b) == 0) {
                qitem *next = p->head;
                p->head = next->next;
                p->queued--;
                cn_fleet_batch_free(next->b);
                free(next);
            }
            if (!p->head)
                p->tail = NULL;
            uint64_t seq = p->next_seq++;
            p->busy = true;
            pthread_mutex_unlock(&p->mu);
            spooled s;
            int r = spool_write(p, it->b, seq, &s);
            pthread_mutex_lock(&p->mu);
            p->busy = false;
            p->queued_rows -= it->b->sample_rows;
            if (r == 0 && CN_RESERVE(p->sp, p->cap_sp, p->n_sp + 1) == 0) {
                p->sp[p->n_sp++] = s;
                p->st.batches_queued++;
                p->st.spool_bytes += s.bytes;
                enforce_bound(p);
            } else {
                char path[4096];
                spool_path(p, seq, path, sizeof(path));
                if (r == 0)
                    unlink(path);
                p->st.rows_queued -= it->b->sample_rows;
                p->st.rows_dropped += it->b->sample_rows;
                p->st.batches_dropped++;
                p->reset = true;
                snprintf(p->st.last_error, sizeof(p->st.last_error), "spool %.300s: %s", p->dir,
                         strerror(r < 0 ? -r : ENOMEM));
            }
            cn_fleet_batch_free(it->b);
            free(it);
            continue;
        }
        int64_t now = now_ns();
        if (p->n_sp > 0 && now >= next_try) {
            /* The oldest files, up to SEND_MAX bytes, in one request per table. */
            size_t n = 1;
            uint64_t bytes = p->sp[0].bytes;
            uint64_t rows = p->sp[0].rows;
            while (p->sink == CN_FLEET_SINK_CLICKHOUSE && n < p->n_sp && n < 4096 &&
                   bytes + p->sp[n].bytes <= SEND_MAX && rows + p->sp[n].rows <= INSERT_ROWS_MAX) {
                rows += p->sp[n].rows;
                bytes += p->sp[n++].bytes;
            }
            spooled *batch = malloc(n * sizeof(*batch));
            if (!batch)
                n = 0; /* retried after the backoff */
            else
                memcpy(batch, p->sp, n * sizeof(*batch));
            p->busy = true;
            pthread_mutex_unlock(&p->mu);
            cn_err err = {0};
            bool attempted = false;
            int r = !batch ? cn_err_set(&err, -ENOMEM, "out of memory")
                    : p->sink != CN_FLEET_SINK_CLICKHOUSE
                        ? spool_send_post(p, batch, &err)
                        : spool_send(p, batch, n, &attempted, &err);
            free(batch);
            pthread_mutex_lock(&p->mu);
            p->busy = false;
            /* Only this thread removes spool entries: the first n ones are still these. */
            for (size_t k = 0; r < 0 && attempted && k < n; k++)
                p->sp[k].maybe_sent = true;
            if (r >= 0 || r == -EBADMSG) {
                for (int k = 0; k < (r >= 0 ? r : 1); k++)
                    drop_front(p, r >= 0);
                if (r >= 0) {
                    p->st.last_success_s = time(NULL);
                    p->st.last_error[0] = '\0';
                } else {
                    p->st.failures++;
                    snprintf(p->st.last_error, sizeof(p->st.last_error), "%s", err.msg);
                }
                backoff = 0;
                next_try = 0;
            } else {
                p->st.failures++;
                snprintf(p->st.last_error, sizeof(p->st.last_error), "%s", err.msg);
                backoff = backoff ? backoff * 2 : BACKOFF_MIN_NS;
                if (backoff > p->backoff_max)
                    backoff = p->backoff_max;
                next_try = now_ns() + (p->flushing ? BACKOFF_MIN_NS : backoff);
            }
            continue;
        }
        if (!p->head && p->n_sp == 0)
            pthread_cond_broadcast(&p->idle_cv);
        if (p->n_sp > 0) {
            if (p->flushing && next_try > now + BACKOFF_MIN_NS)
                next_try = now + BACKOFF_MIN_NS;
            struct timespec ts = cn_common_deadline(CLOCK_MONOTONIC, next_try - now);
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        } else {
            pthread_cond_wait(&p->cv, &p->mu);
        }
    }
    pthread_mutex_unlock(&p->mu);
    cn_common_altstack_free(altstack);
    return NULL;
}

/* ---- public ------------------------------------------------------------------------ */

static bool db_name_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

int cn_fleet_pusher_new(const cn_fleet_pusher_opts *o, cn_fleet_pusher **out, cn_err *err)
{
    cn_fleet_pusher *p = calloc(1, sizeof(*p));
    pthread_condattr_t ca;
    int r;
    const char *db = o->database ? o->database : "canopy";
    if (!p)
        return cn_err_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_cond_init(&p->idle_cv, &ca);
    pthread_condattr_destroy(&ca);
    p->spool_max = o->spool_max ? o->spool_max : (uint64_t)256 << 20;
    if (getrandom(&p->nonce, sizeof(p->nonce), 0) != sizeof(p->nonce)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts); /* no entropy yet: unique enough per host */
        p->nonce = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 48);
    }
    p->backoff_max = o->backoff_max_ns > 0 ? o->backoff_max_ns : 8000000000LL;
    if (!db_name_ok(db)) {
        r = cn_err_set(err, -EINVAL, "bad fleet database name '%s' (letters, digits, '_')", db);
        goto fail;
    }
    if (!o->spool_dir || !(p->dir = strdup(o->spool_dir)) || !(p->db = strdup(db))) {
        r = cn_err_set(err, o->spool_dir ? -ENOMEM : -EINVAL, "no spool directory");
        goto fail;
    }
    p->sink = o->sink;
    if (o->org_id && *o->org_id) {
        /* A header line: no control bytes (a newline would add headers). */
        for (const char *c = o->org_id; *c; c++) {
            if ((unsigned char)*c < 0x20 || *c == 0x7f) {
                r = cn_err_set(err, -EINVAL, "bad Pyroscope org id (control characters)");
                goto fail;
            }
        }
        size_t n = strlen(o->org_id) + 32;
        if (!(p->org_hdr = malloc(n))) {
            r = cn_err_set(err, -ENOMEM, "out of memory");
            goto fail;
        }
        snprintf(p->org_hdr, n, "X-Scope-OrgID: %s", o->org_id);
    }
    if ((r = cn_fleet_conn_new(o->url, o->user, o->password, o->timeout_ms ? o->timeout_ms : 30000,
                               &p->conn, err)) < 0)
        goto fail;
    if (mkdir(p->dir, 0700) < 0 && errno != EEXIST) {
        r = cn_err_set(err, -errno, "fleet spool %s: %s", p->dir, strerror(errno));
        goto fail;
    }
    if ((r = spool_load(p)) < 0) {
        cn_err_set(err, r, "fleet spool %s: %s", p->dir, strerror(-r));
        goto fail;
    }
    pthread_mutex_lock(&p->mu);
    enforce_bound(p);
    p->reset = false; /* nothing was sent by this run yet */
    pthread_mutex_unlock(&p->mu);
    if ((r = -pthread_create(&p->thread, NULL, run, p)) < 0) {
        cn_err_set(err, r, "fleet pusher thread: %s", strerror(-r));
        goto fail;
    }
    p->thread_ok = true;
    *out = p;
    return 0;
fail:
    cn_fleet_pusher_free(p);
    return r;
}

int cn_fleet_pusher_submit(cn_fleet_pusher *p, cn_fleet_batch *b)
{
    qitem *it = calloc(1, sizeof(*it));
    pthread_mutex_lock(&p->mu);
    if (!it) {
        p->st.rows_dropped += b->sample_rows;
        p->st.batches_dropped++;
        p->reset = true;
        pthread_mutex_unlock(&p->mu);
        cn_fleet_batch_free(b);
        return -ENOMEM;
    }
    it->b = b;
    if (p->tail)
        p->tail->next = it;
    else
        p->head = it;
    p->tail = it;
    p->queued++;
    p->queued_rows += b->sample_rows;
    p->st.rows_queued += b->sample_rows;
    while (p->queued > QUEUE_MAX) { /* the thread is stuck on the disk: drop the oldest */
        qitem *old = p->head;
        p->head = old->next;
        p->queued--;
        p->queued_rows -= old->b->sample_rows;
        p->st.rows_queued -= old->b->sample_rows;
        p->st.rows_dropped += old->b->sample_rows;
        p->st.batches_dropped++;
        p->reset = true;
        cn_fleet_batch_free(old->b);
        free(old);
    }
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

bool cn_fleet_pusher_take_reset(cn_fleet_pusher *p)
{
    pthread_mutex_lock(&p->mu);
    bool r = p->reset;
    p->reset = false;
    pthread_mutex_unlock(&p->mu);
    return r;
}

void cn_fleet_pusher_stats(cn_fleet_pusher *p, cn_fleet_push_stats *out)
{
    pthread_mutex_lock(&p->mu);
    *out = p->st;
    int64_t oldest = INT64_MAX;
    if (p->n_sp)
        oldest = p->sp[0].time_s;
    else if (p->head && p->head->b->time_s != INT64_MAX)
        oldest = p->head->b->time_s;
    out->batches_queued += p->queued;
    pthread_mutex_unlock(&p->mu);
    int64_t now = time(NULL);
    out->lag_s = oldest != INT64_MAX && oldest < now ? now - oldest : 0;
}

size_t cn_fleet_pusher_backlog(cn_fleet_pusher *p)
{
    pthread_mutex_lock(&p->mu);
    size_t n = p->queued;
    pthread_mutex_unlock(&p->mu);
    return n;
}

int cn_fleet_pusher_flush(cn_fleet_pusher *p, int timeout_ms)
{
    struct timespec ts = cn_common_deadline(CLOCK_MONOTONIC, (int64_t)timeout_ms * 1000000);
    int r = 0;
    pthread_mutex_lock(&p->mu);
    p->flushing = true;
    pthread_cond_signal(&p->cv);
    while ((p->head || p->n_sp || p->busy) && r == 0)
        if (pthread_cond_timedwait(&p->idle_cv, &p->mu, &ts) == ETIMEDOUT)
            r = -ETIMEDOUT;
    p->flushing = false;
    pthread_mutex_unlock(&p->mu);
    return r;
}

cn_fleet_pusher *cn_fleet_pusher_free(cn_fleet_pusher *p)
{
    if (!p)
        return NULL;
    if (p->thread_ok) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->thread, NULL);
    }
    /* Batches still in memory are written to the spool for the next run. */
    while (p->head) {
        qitem *it = p->head;
        spooled s;
        p->head = it->next;
        if (p->dir)
            spool_write(p, it->b, p->next_seq++, &s);
        cn_fleet_batch_free(it->b);
        free(it);
    }
    cn_fleet_conn_free(p->conn);
    free(p->sp);
    free(p->dir);
    free(p->db);
    free(p->org_hdr);
    pthread_cond_destroy(&p->cv);
    pthread_cond_destroy(&p->idle_cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return NULL;
}
