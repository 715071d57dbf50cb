/* store.c — canopyd's sessions: in memory (an array of entries, oldest first, each a
 * live/ session plus the loop watches of its ring fds) and on disk, as
 * STATE_DIR/ID.canopy written atomically (cn_live_session_save) when a session stops,
 * when its target exits, at each checkpoint of a running session, when late symbol
 * answers change a stopped one, and on shutdown. At start every such file is loaded back
 * as a `saved` session. The state dir is bounded in bytes, globally and per user
 * (quota.c): the oldest sessions that no longer sample are deleted first.
 *
 * Writes run in a forked writer (workers.c) on a copy-on-write snapshot, never on the
 * loop thread, except at shutdown. Beside each ID.canopy, ID.meta holds the session's
 * metadata as `KEY<TAB>VALUE` lines (escaped), so a restart reads only those small files:
 * saved sessions are known by their metadata, and their profiles are read by the query
 * worker, from the file, when a query asks (docs/security.md "Startup"). A .canopy file
 * without a current .meta (an older daemon's, or a crash between the two renames) is read
 * whole once and gets its .meta.
 *
 * Sampling is pumped from the ring fds' readiness (on_ring) and from every tick, on the
 * loop thread, so the rings never overflow while a query runs.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "d_internal.h"

#define LATE_SYMBOLS_NS     2000000000LL   /* a stopped session changed by symbols: re-save after */
#define SAVE_BACKOFF_MAX_NS 300000000000LL /* failed saves are retried at most this rarely */

static void entry_unwatch(cn_d__entry *e)
{
    for (size_t i = 0; i < e->nwatch; i++)
        cn_d__loop_unwatch(e->srv->loop, e->watches[i]);
    free(e->watches);
    free(e->fds);
    e->watches = NULL;
    e->fds = NULL;
    e->nwatch = 0;
}

static void entry_free(cn_d__entry *e)
{
    if (!e)
        return;
    entry_unwatch(e);
    cn_d__fleet_src_free(e->fleet);
    cn_live_session_free(e->s);
    free(e);
}

static void session_path(cn_d_server *srv, const cn_live_session *s, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s.canopy", srv->state_dir, cn_live_session_id(s));
}

/* Logs the session's allocation failures since the last save, once. */
static void report_errors(cn_d__entry *e)
{
    cn_live_session_info info;
    cn_live_session_info_get(e->s, &info);
    if (info.errors > e->errors_logged) {
        fprintf(stderr,
                "canopyd: session %s: %" PRIu64 " frames or symbols lost to allocation "
                "failures\n",
                info.id, info.errors - e->errors_logged);
        e->errors_logged = info.errors;
    }
}

void cn_d__store_save_failed(cn_d_server *srv, cn_d__entry *e, const cn_err *err)
{
    /* A full disk does not empty itself in 2 s: back off (doubling) instead of
     * serializing the whole session again at every tick; say so once per streak. */
    if (!e->save_backoff)
        fprintf(stderr, "canopyd: saving session %s: %s (retrying with back-off)\n",
                cn_live_session_id(e->s), err->msg);
    e->save_backoff = e->save_backoff ? e->save_backoff * 2 : LATE_SYMBOLS_NS;
    if (e->save_backoff > SAVE_BACKOFF_MAX_NS)
        e->save_backoff = SAVE_BACKOFF_MAX_NS;
    e->last_checkpoint = cn_common_now_ns() + e->save_backoff; /* intervals count from here */
}

/* Writes e to the state dir in a forked writer (workers.c), or at once (shutdown); a
 * failure is logged and retried later (the previous file stays). */
static void save_entry(cn_d_server *srv, cn_d__entry *e, bool now)
{
    char path[4096];
    session_path(srv, e->s, path, sizeof(path));
    e->last_checkpoint = cn_common_now_ns();
    report_errors(e);
    if (e->save_job)
        return; /* one writer per session; the tick tries again */
    if (now) {
        cn_err err = {0};
        int r = cn_live_session_save(e->s, path, &err);
        if (r == 0)
            r = cn_d__meta_write(cn_live_session_profile(e->s), path);
        if (r < 0) {
            if (!err.msg[0])
                cn_err_set(&err, r, "%s: %s", path, strerror(-r));
            cn_d__store_save_failed(srv, e, &err);
        } else if (e->save_backoff) {
            e->save_backoff = 0;
        }
        return;
    }
    cn_d__job *j = cn_d__job_new(CN_D__JOB_SAVE, e, 0);
    if (!j || !(j->path = strdup(path))) {
        cn_d__job_free(j);
        cn_err err;
        cn_err_set(&err, -ENOMEM, "out of memory");
        cn_d__store_save_failed(srv, e, &err);
        return;
    }
    cn_d__job_submit(srv, j);
}

static void remove_entry(cn_d_server *srv, size_t i)
{
    assert(i < srv->n_entries);
    cn_d__jobs_forget_entry(srv, srv->entries[i]);
    entry_free(srv->entries[i]);
    memmove(srv->entries + i, srv->entries + i + 1,
            (srv->n_entries - i - 1) * sizeof(*srv->entries));
    srv->n_entries--;
}

void cn_d__store_remove_at(cn_d_server *srv, size_t i)
{
    remove_entry(srv, i);
}

static void enforce_state_dir(cn_d_server *srv)
{
    cn_d__quota_enforce_state_dir(srv);
}

static void on_ring(void *arg, int fd, uint32_t revents)
{
    cn_d__entry *e = arg;
    cn_d__store_pump(e);
    if ((revents & (POLLHUP | POLLERR)) && cn_live_session_state(e->s) == CN_LIVE_RUNNING) {
        /* This CPU's (or thread's) events are gone: stop polling that fd. */
        for (size_t i = 0; i < e->nwatch; i++) {
            if (e->watches[i] && e->fds[i] == fd) {
                cn_d__loop_unwatch(e->srv->loop, e->watches[i]);
                e->watches[i] = NULL;
            }
        }
    }
}

static int entry_watch(cn_d_server *srv, cn_d__entry *e)
{
    const int *fds;
    size_t n = cn_live_session_fds(e->s, &fds);
    e->watches = calloc(n ? n : 1, sizeof(*e->watches));
    e->fds = calloc(n ? n : 1, sizeof(*e->fds));
    if (!e->watches || !e->fds)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        e->fds[i] = fds[i];
        e->watches[i] = cn_d__loop_watch(srv->loop, fds[i], on_ring, e);
        if (!e->watches[i])
            return -ENOMEM;
        e->nwatch = i + 1;
    }
    return 0;
}

void cn_d__store_pump(cn_d__entry *e)
{
    if (cn_live_session_state(e->s) != CN_LIVE_RUNNING)
        return;
    int r = cn_live_session_pump(e->s);
    if (r < 0)
        fprintf(stderr, "canopyd: session %s: reading samples: %s\n", cn_live_session_id(e->s),
                strerror(-r));
    if (cn_live_session_state(e->s) != CN_LIVE_RUNNING) {
        /* Unwatch before anything opens an fd that could reuse the rings' numbers. */
        entry_unwatch(e);
    }
}

/* A running session's checkpoint writer may take at most 1/CHECKPOINT_CPU_SHARE of a core:
 * a writer serializes and compresses the whole session, so a whole-system session at
 * 999 Hz holding ten minutes of raw samples cost ~1.5 s of CPU a write (docs/perf-daemon.md),
 * 2.5% of a core at the default 60 s. The delay grows with the last write's CPU time
 * instead (a crash then loses at most that much more of the session). */
#define CHECKPOINT_CPU_SHARE 200

int64_t cn_d__checkpoint_delay(const cn_d_server *srv, const cn_d__entry *e)
{
    int64_t by_cost = e->save_cpu_ns > INT64_MAX / CHECKPOINT_CPU_SHARE
                          ? INT64_MAX
                          : e->save_cpu_ns * CHECKPOINT_CPU_SHARE;
    return by_cost > srv->cfg.checkpoint_ns ? by_cost : srv->cfg.checkpoint_ns;
}

void cn_d__store_tick(cn_d_server *srv)
{
    int64_t now = cn_common_now_ns();
    bool saved = false;
    for (size_t i = 0; i < srv->n_entries; i++) {
        cn_d__entry *e = srv->entries[i];
        cn_live_session *s = e->s;
        if (cn_live_session_state(s) == CN_LIVE_RUNNING) {
            if (srv->cfg.checkpoint_ns > 0 &&
                now - e->last_checkpoint >= cn_d__checkpoint_delay(srv, e) &&
                cn_live_session_dirty(s) && !e->save_job) {
                save_entry(srv, e, false);
                saved = true;
            }
        } else if (cn_live_session_state(s) != CN_LIVE_SAVED && !e->finished_saved) {
            entry_unwatch(e);
            cn_live_session_symbolize(s);
            save_entry(srv, e, false);
            e->finished_saved = true;
            saved = true;
        } else if (cn_live_session_state(s) != CN_LIVE_SAVED && cn_live_session_dirty(s) &&
                   !e->save_job && now - e->last_checkpoint >= LATE_SYMBOLS_NS) {
            save_entry(srv, e, false); /* late symbol answers */
            saved = true;
        }
        /* A stopped session is not pumped: frames a full symbolizer queue held back (they
         * count as symbols.pending, which clients wait on) go now. */
        if (cn_live_session_state(s) != CN_LIVE_RUNNING &&
            cn_live_session_state(s) != CN_LIVE_SAVED && cn_live_session_unsubmitted(s) > 0)
            cn_live_session_symbolize(s);
    }
    if (saved)
        enforce_state_dir(srv);
}

/* Oldest first; equal starts by id number (qsort is not stable). */
static int by_start(const void *a, const void *b)
{
    const cn_live_session *x = (*(cn_d__entry *const *)a)->s, *y = (*(cn_d__entry *const *)b)->s;
    int64_t sx = cn_live_session_started(x), sy = cn_live_session_started(y);
    if (sx != sy)
        return sx < sy ? -1 : 1;
    uint64_t ix = strtoull(cn_live_session_id(x) + 1, NULL, 10);
    uint64_t iy = strtoull(cn_live_session_id(y) + 1, NULL, 10);
    return ix < iy ? -1 : ix > iy;
}

/* Whether a session with this id is loaded. By id only: another session's *name* must
 * never make a saved session look like a duplicate and hide it. */
static bool store_has_id(const cn_d_server *srv, const char *id)
{
    for (size_t i = 0; i < srv->n_entries; i++)
        if (!strcmp(cn_live_session_id(srv->entries[i]->s), id))
            return true;
    return false;
}

cn_d__entry *cn_d__store_find(cn_d_server *srv, const cn_d__cred *cred, const char *key, pid_t pid)
{
    cn_d__entry *best = NULL;
    for (size_t i = 0; i < srv->n_entries; i++) {
        cn_d__entry *e = srv->entries[i];
        cn_live_session *s = e->s;
        if (cred->uid != 0 && cn_live_session_owner(s) != cred->uid)
            continue;
        if (key && (!strcmp(cn_live_session_id(s), key) ||
                    (cn_live_session_name(s) && !strcmp(cn_live_session_name(s), key))))
            best = e; /* the newest with that name */
        else if (!key && pid > 0 && cn_live_session_pid(s) == pid &&
                 cn_live_session_kind(s) != CN_LIVE_SYSTEM)
            best = e;
    }
    return best;
}

size_t cn_d__store_running(const cn_d_server *srv)
{
    size_t n = 0;
    for (size_t i = 0; i < srv->n_entries; i++)
        n += cn_live_session_state(srv->entries[i]->s) == CN_LIVE_RUNNING;
    return n;
}

static int add_entry(cn_d_server *srv, cn_live_session *s, cn_d__entry **out)
{
    if (CN_RESERVE(srv->entries, srv->cap_entries, srv->n_entries + 1) < 0)
        return -ENOMEM;
    cn_d__entry *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->s = s;
    e->srv = srv;
    e->last_checkpoint = cn_common_now_ns();
    e->finished_saved = cn_live_session_state(s) == CN_LIVE_SAVED;
    srv->entries[srv->n_entries++] = e;
    *out = e;
    return 0;
}

/* ---- metadata files ------------------------------------------------------------- */

#define META_MAGIC "canopy-session-meta 1\n"
#define META_MAX   (64 * 1024) /* a session's metadata is ~1 KiB: anything larger is not ours */

/* ID.canopy → ID.meta (n bytes at out). 0 or -ENAMETOOLONG. */
static int meta_path(const char *path, char *out, size_t n)
{
    size_t len = strlen(path);
    if (len < 7 || strcmp(path + len - 7, ".canopy") || len + 1 > n)
        return -ENAMETOOLONG;
    snprintf(out, n, "%.*s.meta", (int)(len - 7), path);
    return 0;
}

/* Appends s with \\, \t and \n escaped. */
static int put_escaped(cn_buf *b, const char *s)
{
    int r = 0;
    for (; *s && r == 0; s++) {
        if (*s == '\\')
            r = cn_buf_append(b, "\\\\", 2);
        else if (*s == '\t')
            r = cn_buf_append(b, "\\t", 2);
        else if (*s == '\n')
            r = cn_buf_append(b, "\\n", 2);
        else
            r = cn_buf_append(b, s, 1);
    }
    return r;
}

int cn_d__meta_write(const cn_agg_profile *p, const char *path)
{
    char mp[4096];
    cn_buf b;
    int r = meta_path(path, mp, sizeof(mp));
    if (r < 0)
        return r;
    cn_buf_init(&b, META_MAX);
    r = cn_buf_append(&b, META_MAGIC, sizeof(META_MAGIC) - 1);
    for (size_t i = 0; r == 0 && i < cn_agg_meta_count(p); i++) {
        const char *k = cn_agg_meta_key(p, i), *v = cn_agg_meta_get(p, k);
        if (!v)
            continue;
        r = put_escaped(&b, k);
        if (r == 0)
            r = cn_buf_append(&b, "\t", 1);
        if (r == 0)
            r = put_escaped(&b, v);
        if (r == 0)
            r = cn_buf_append(&b, "\n", 1);
    }
    if (r == 0)
        r = cn_common_write_file_atomic(mp, 0600, cn_buf_ptr(&b), cn_buf_len(&b), NULL);
    cn_buf_free(&b);
    return r;
}

void cn_d__unlink_session_files(const char *path)
{
    char mp[4096];
    unlink(path);
    if (meta_path(path, mp, sizeof(mp)) == 0)
        unlink(mp);
}

/* Unescapes s in place (the inverse of put_escaped). */
static void unescape(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (*s == '\\' && s[1]) {
            s++;
            *o++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
}

/* A profile holding only the metadata of the session saved at path, from its .meta when
 * that is at least as new as the file. NULL when there is none (or it is unusable). */
static cn_agg_profile *meta_read(const char *path, const struct stat *st)
{
    char mp[4096], *buf = NULL;
    struct stat ms;
    cn_agg_profile *p = NULL;
    int fd = -1;
    if (meta_path(path, mp, sizeof(mp)) < 0 ||
        (fd = open(mp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0 || fstat(fd, &ms) < 0 ||
        !S_ISREG(ms.st_mode) || ms.st_size > META_MAX ||
        (ms.st_mtim.tv_sec < st->st_mtim.tv_sec ||
         (ms.st_mtim.tv_sec == st->st_mtim.tv_sec && ms.st_mtim.tv_nsec < st->st_mtim.tv_nsec)))
        goto out;
    if (!(buf = malloc((size_t)ms.st_size + 1)) ||
        read(fd, buf, (size_t)ms.st_size) != (ssize_t)ms.st_size)
        goto out;
    buf[ms.st_size] = '\0';
    if (strncmp(buf, META_MAGIC, sizeof(META_MAGIC) - 1) || !(p = cn_agg_profile_new()))
        goto out;
    for (char *line = buf + sizeof(META_MAGIC) - 1, *next; *line; line = next) {
        next = strchr(line, '\n');
        next = next ? (*next = '\0', next + 1) : line + strlen(line);
        char *tab = strchr(line, '\t');
        if (!tab)
            continue;
        *tab = '\0';
        unescape(line);
        unescape(tab + 1);
        if (cn_agg_meta_set(p, line, tab + 1) < 0) {
            p = cn_agg_profile_free(p);
            break;
        }
    }
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    return p;
}

/* The saved session at path, known by its metadata: from its .meta, or (no current .meta)
 * by reading the whole file once and writing the .meta. 0 and *out, or -errno with err. */
static int load_saved(const char *path, cn_live_session **out, cn_err *err)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return cn_err_set(err, -errno, "%s", strerror(errno));
    cn_agg_profile *p = meta_read(path, &st);
    if (!p) {
        cn_agg_profile *full = NULL;
        int r = cn_fmt_import_file(path, &full, err);
        if (r < 0)
            return r;
        r = cn_d__meta_write(full, path);
        cn_agg_profile_free(full);
        if (r < 0)
            return cn_err_set(err, r, "writing its metadata: %s", strerror(-r));
        if (stat(path, &st) < 0 || !(p = meta_read(path, &st)))
            return cn_err_set(err, -EIO, "its metadata could not be read back");
    }
    return cn_live_session_load(p, path, out, err);
}

void cn_d__store_load(cn_d_server *srv)
{
    DIR *d = opendir(srv->state_dir);
    struct dirent *de;
    if (!d) {
        enforce_state_dir(srv);
        return;
    }
    while ((de = readdir(d)) && srv->n_entries < CN_D__MAX_LOADED_SESSIONS) {
        size_t len = strlen(de->d_name);
        char path[4096];
        if (len > 4 && !strcmp(de->d_name + len - 4, ".tmp")) {
            /* An interrupted write: the previous complete file (if any) is still there. */
            snprintf(path, sizeof(path), "%s/%s", srv->state_dir, de->d_name);
            unlink(path);
            continue;
        }
        if (len < 8 || strcmp(de->d_name + len - 7, ".canopy"))
            continue;
        snprintf(path, sizeof(path), "%s/%s", srv->state_dir, de->d_name);
        cn_live_session *s = NULL;
        cn_err err = {0};
        cn_d__entry *e;
        if (load_saved(path, &s, &err) < 0) {
            fprintf(stderr, "canopyd: skipping %s: %s\n", path, err.msg);
            continue;
        }
        if (cn_live_session_id(s)[0] == 's') {
            uint64_t n = strtoull(cn_live_session_id(s) + 1, NULL, 10);
            if (n >= srv->next_id)
                srv->next_id = n + 1;
        }
        if (store_has_id(srv, cn_live_session_id(s)) || add_entry(srv, s, &e) < 0) {
            cn_live_session_free(s);
            continue;
        }
        e->lazy = true;
    }
    closedir(d);
    /* Oldest first, as `sessions` lists them. */
    if (srv->n_entries > 1)
        qsort(srv->entries, srv->n_entries, sizeof(*srv->entries), by_start);
    enforce_state_dir(srv);
}

int cn_d__store_add(cn_d_server *srv, cn_live_session *s, cn_d__entry **out)
{
    cn_d__entry *e = NULL;
    if (add_entry(srv, s, &e) < 0) {
        cn_live_session_free(s);
        return -ENOMEM;
    }
    if (entry_watch(srv, e) < 0) {
        assert(srv->entries[srv->n_entries - 1] == e);
        remove_entry(srv, srv->n_entries - 1);
        return -ENOMEM;
    }
    /* On disk at once, not at its first checkpoint: that one's writer waits for a worker
     * behind the clients' queries, and a crash before it ran lost the session (seen in the
     * soak: a SIGKILL 16 s after the start, three checkpoints due, none written). Its
     * profile is nearly empty now: a small file, written here on the loop. */
    save_entry(srv, e, true);
    enforce_state_dir(srv);
    *out = e;
    return 0;
}

void cn_d__store_remove(cn_d_server *srv, cn_d__entry *e, bool unlink_file)
{
    cn_d__fleet_forget(srv, e); /* its last samples still go out */
    if (unlink_file) {
        char path[4096];
        session_path(srv, e->s, path, sizeof(path));
        cn_d__unlink_session_files(path);
    }
    for (size_t i = 0; i < srv->n_entries; i++) {
        if (srv->entries[i] == e) {
            remove_entry(srv, i);
            return;
        }
    }
    assert(!"removing an entry that is not in the store");
}

void cn_d__store_stop(cn_d_server *srv, cn_d__entry *e)
{
    if (cn_live_session_state(e->s) == CN_LIVE_RUNNING) {
        entry_unwatch(e);
        cn_live_session_stop(e->s);
    }
    if (cn_live_session_state(e->s) != CN_LIVE_SAVED && !e->finished_saved) {
        cn_live_session_symbolize(e->s);
        save_entry(srv, e, false);
        e->finished_saved = true;
    }
}

void cn_d__store_shutdown(cn_d_server *srv)
{
    /* Stop sampling, let late symbols land, write everything. */
    for (size_t i = 0; i < srv->n_entries; i++) {
        cn_d__entry *e = srv->entries[i];
        if (cn_live_session_state(e->s) == CN_LIVE_RUNNING) {
            cn_d__store_pump(e);
            entry_unwatch(e);
            cn_live_session_stop(e->s);
        }
    }
    if (srv->sym)
        cn_live_symbolizer_flush(srv->sym, 1000); /* within SIGTERM's 2 s (security.md) */
    for (size_t i = 0; i < srv->n_entries; i++) {
        cn_d__entry *e = srv->entries[i];
        if (cn_live_session_state(e->s) != CN_LIVE_SAVED &&
            (!e->finished_saved || cn_live_session_dirty(e->s)))
            save_entry(srv, e, true);
    }
}

void cn_d__store_free(cn_d_server *srv)
{
    for (size_t i = 0; i < srv->n_entries; i++)
        entry_free(srv->entries[i]);
    free(srv->entries);
    srv->entries = NULL;
    srv->n_entries = srv->cap_entries = 0;
}
