/* push.c — the pusher: a thread that spools batches on disk and inserts them in order.
 *
 * Every batch goes through the spool, so order and restarts need no second path: the
 * caller's thread only links the batch into a memory queue (cn_fleet_pusher_submit); the
 * pusher's thread gzips its two bodies, writes them as one file SPOOL/<seq>.batch
 * (tmp + rename), and sends spooled files oldest first: the stack definitions, then the
 * sample rows, deleting the file once both were accepted. A failure keeps the file and
 * retries after a backoff (doubling from 250 ms up to backoff_max). The spool is bounded
 * in bytes: past the bound the oldest files are deleted and their rows counted as
 * dropped, and the caller is told to write stack definitions again (a dropped file may
 * have held some that later rows use). The spool index is a FIFO array of (seq, rows,
 * bytes, time); only the thread touches files. A retried insert whose first attempt
 * reached ClickHouse duplicates its rows (MergeTree has no insert deduplication in
 * 18.16 outside replicated tables): docs/fleet.md says so.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cn_fleet.h"

#define QUEUE_MAX      256 /* batches in memory before the oldest is dropped */
#define BACKOFF_MIN_NS 250000000LL
#define SPOOL_MAGIC    "CNFLEET1"

typedef struct qitem {
    cn_fleet_batch *b;
    struct qitem *next;
} qitem;

typedef struct spooled {
    uint64_t seq, rows, bytes;
    int64_t time_s;
} spooled;

struct cn_fleet_pusher {
    char *dir, *db;
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

static int write_all(int fd, const void *data, size_t len)
{
    const char *d = data;
    while (len) {
        ssize_t w = write(fd, d, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        d += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Compresses and writes b as the next spool file (mu not held). Returns 0 and *out. */
static int spool_write(cn_fleet_pusher *p, const cn_fleet_batch *b, uint64_t seq, spooled *out)
{
    cn_buf zs, zk;
    char path[4096], tmp[4200], head[160];
    int r, fd = -1;
    cn_buf_init(&zs, 0);
    cn_buf_init(&zk, 0);
    if ((r = cn_fleet_gzip(cn_buf_ptr(&b->samples), cn_buf_len(&b->samples), 3, &zs)) < 0 ||
        (r = cn_fleet_gzip(cn_buf_ptr(&b->stacks), cn_buf_len(&b->stacks), 3, &zk)) < 0)
        goto out;
    int hn = snprintf(head, sizeof(head), SPOOL_MAGIC " %llu %llu %zu %zu %lld\n",
                      (unsigned long long)b->sample_rows, (unsigned long long)b->stack_rows,
                      cn_buf_len(&zs), cn_buf_len(&zk), (long long)b->time_s);
    spool_path(p, seq, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        r = -errno;
        goto out;
    }
    if ((r = write_all(fd, head, (size_t)hn)) < 0 ||
        (r = write_all(fd, cn_buf_ptr(&zs), cn_buf_len(&zs))) < 0 ||
        (r = write_all(fd, cn_buf_ptr(&zk), cn_buf_len(&zk))) < 0)
        goto out;
    if (close(fd) < 0) {
        fd = -1;
        r = -errno;
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) < 0) {
        r = -errno;
        goto out;
    }
    *out = (spooled){seq, b->sample_rows, (uint64_t)hn + cn_buf_len(&zs) + cn_buf_len(&zk),
                     b->time_s == INT64_MAX ? 0 : b->time_s};
out:
    if (fd >= 0)
        close(fd);
    if (r < 0)
        unlink(tmp);
    cn_buf_free(&zs);
    cn_buf_free(&zk);
    return r;
}

/* Reads a spool file: its header fields and the two gzip'd bodies (into data). */
typedef struct spool_file {
    unsigned long long rows, stack_rows;
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
        strcmp(magic, SPOOL_MAGIC) || fgetc(in) != '\n' || f->zs > (1u << 30) || f->zk > (1u << 30))
        goto out;
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

/* Sends spooled batch s (mu not held). 0, or negative errno with err set. */
static int spool_send(cn_fleet_pusher *p, const spooled *s, cn_err *err)
{
    char path[4096], sql[512];
    spool_file f;
    spool_path(p, s->seq, path, sizeof(path));
    int r = spool_read(path, &f);
    if (r < 0)
        return cn_err_set(err, r == -ENOMEM ? r : -EBADMSG, "%s: unreadable spool file", path);
    if (f.stack_rows) {
        snprintf(sql, sizeof(sql),
                 "INSERT INTO %s.stacks (stack, host, time, funcs, libs, build_ids) FORMAT "
                 "TabSeparated",
                 p->db);
        r = cn_fleet_exec(p->conn, sql, f.data + f.zs, f.zk, true, NULL, err);
    }
    if (r == 0 && f.rows) {
        snprintf(sql, sizeof(sql),
                 "INSERT INTO %s.samples (time, host, service, session, label_keys, label_values, "
                 "stack, samples, weight) FORMAT TabSeparated",
                 p->db);
        r = cn_fleet_exec(p->conn, sql, f.data, f.zs, true, NULL, err);
    }
    free(f.data);
    return r;
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
        if (!strcmp(end, ".batch.tmp")) {
            unlinkat(dirfd(d), de->d_name, 0); /* an interrupted write */
            continue;
        }
        if (strcmp(end, ".batch") || CN_RESERVE(seqs, cap, n + 1) < 0)
            continue;
        seqs[n++] = seq;
    }
    closedir(d);
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
        p->sp[p->n_sp++] = (spooled){seqs[i], f.rows, (uint64_t)stt.st_size, f.time_s};
        p->st.rows_queued += f.rows;
        p->st.batches_queued++;
        p->st.spool_bytes += (uint64_t)stt.st_size;
        p->next_seq = seqs[i] + 1;
    }
    free(seqs);
    return 0;
}

/* ---- the thread -------------------------------------------------------------------- */

static void *run(void *arg)
{
    cn_fleet_pusher *p = arg;
    int64_t backoff = 0, next_try = 0;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        if (p->head) {
            qitem *it = p->head;
            p->head = it->next;
            if (!p->head)
                p->tail = NULL;
            p->queued--;
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
            spooled s = p->sp[0];
            p->busy = true;
            pthread_mutex_unlock(&p->mu);
            cn_err err = {0};
            int r = spool_send(p, &s, &err);
            pthread_mutex_lock(&p->mu);
            p->busy = false;
            if (r == 0 || r == -EBADMSG) {
                drop_front(p, r == 0);
                if (r == 0) {
                    p->st.last_success_s = time(NULL);
                    p->st.last_error[0] = '\0';
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
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t wait = next_try - now;
            ts.tv_sec += wait / 1000000000LL;
            ts.tv_nsec += wait % 1000000000LL;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        } else {
            pthread_cond_wait(&p->cv, &p->mu);
        }
    }
    pthread_mutex_unlock(&p->mu);
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
    p->backoff_max = o->backoff_max_ns > 0 ? o->backoff_max_ns : 8000000000LL;
    if (!db_name_ok(db)) {
        r = cn_err_set(err, -EINVAL, "bad fleet database name '%s' (letters, digits, '_')", db);
        goto fail;
    }
    if (!o->spool_dir || !(p->dir = strdup(o->spool_dir)) || !(p->db = strdup(db))) {
        r = cn_err_set(err, o->spool_dir ? -ENOMEM : -EINVAL, "no spool directory");
        goto fail;
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

int cn_fleet_pusher_flush(cn_fleet_pusher *p, int timeout_ms)
{
    struct timespec ts;
    int r = 0;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
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
    pthread_cond_destroy(&p->cv);
    pthread_cond_destroy(&p->idle_cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return NULL;
}
