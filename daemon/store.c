/* store.c — canopyd's sessions: in memory (an array of entries, oldest first, each a
 * live/ session plus the loop watches of its ring fds) and on disk, as
 * STATE_DIR/ID.canopy written atomically (cn_live_session_save) when a session stops,
 * when its target exits, at each checkpoint of a running session, when late symbol
 * answers change a stopped one, and on shutdown. At start every such file is loaded back
 * as a `saved` session. The state dir is bounded in bytes: the oldest sessions that no
 * longer sample are deleted first (docs/protocol.md "Configuration").
 *
 * Sampling is pumped from the ring fds' readiness (on_ring) and from every tick, on the
 * loop thread, so the rings never overflow while a query runs.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
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

/* Writes e to the state dir; a failure is logged (the previous file stays). Reports the
 * session's allocation failures since the last save. Returns 0 or negative errno. */
static int save_entry(cn_d_server *srv, cn_d__entry *e)
{
    char path[4096];
    cn_err err = {0};
    session_path(srv, e->s, path, sizeof(path));
    cn_live_session_info info;
    int r = cn_live_session_save(e->s, path, &err);
    e->last_checkpoint = cn_common_now_ns();
    if (r < 0) {
        /* A full disk does not empty itself in 2 s: back off (doubling) instead of
         * serializing the whole session again at every tick; say so once per streak. */
        if (!e->save_backoff)
            fprintf(stderr, "canopyd: saving session %s: %s (retrying with back-off)\n",
                    cn_live_session_id(e->s), err.msg);
        e->save_backoff = e->save_backoff ? e->save_backoff * 2 : LATE_SYMBOLS_NS;
        if (e->save_backoff > SAVE_BACKOFF_MAX_NS)
            e->save_backoff = SAVE_BACKOFF_MAX_NS;
        e->last_checkpoint += e->save_backoff; /* the tick's intervals count from here */
    } else if (e->save_backoff) {
        fprintf(stderr, "canopyd: saving session %s: written again\n", cn_live_session_id(e->s));
        e->save_backoff = 0;
    }
    /* Data the session lost to allocation failures: reported once per checkpoint. */
    cn_live_session_info_get(e->s, &info);
    if (info.errors > e->errors_logged) {
        fprintf(stderr,
                "canopyd: session %s: %" PRIu64 " frames or symbols lost to allocation "
                "failures\n",
                info.id, info.errors - e->errors_logged);
        e->errors_logged = info.errors;
    }
    return r;
}

static void remove_entry(cn_d_server *srv, size_t i)
{
    assert(i < srv->n_entries);
    entry_free(srv->entries[i]);
    memmove(srv->entries + i, srv->entries + i + 1,
            (srv->n_entries - i - 1) * sizeof(*srv->entries));
    srv->n_entries--;
}

/* The state dir's size bound: delete the oldest sessions that no longer sample. */
static void enforce_state_dir(cn_d_server *srv)
{
    for (;;) {
        uint64_t total = 0;
        size_t oldest = SIZE_MAX;
        for (size_t i = 0; i < srv->n_entries; i++) {
            cn_live_session *s = srv->entries[i]->s;
            struct stat st;
            if (!cn_live_session_path(s) || stat(cn_live_session_path(s), &st) < 0)
                continue;
            total += (uint64_t)st.st_size;
            if (cn_live_session_state(s) != CN_LIVE_RUNNING &&
                (oldest == SIZE_MAX ||
                 cn_live_session_started(s) < cn_live_session_started(srv->entries[oldest]->s)))
                oldest = i;
        }
        srv->state_dir_bytes = total;
        if (total <= srv->cfg.state_dir_max || oldest == SIZE_MAX)
            return;
        cn_live_session *s = srv->entries[oldest]->s;
        fprintf(stderr, "canopyd: state dir over %" PRIu64 " bytes: deleting session %s\n",
                srv->cfg.state_dir_max, cn_live_session_id(s));
        unlink(cn_live_session_path(s));
        remove_entry(srv, oldest);
        srv->evicted++;
    }
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

void cn_d__store_tick(cn_d_server *srv)
{
    int64_t now = cn_common_now_ns();
    bool saved = false;
    for (size_t i = 0; i < srv->n_entries; i++) {
        cn_d__entry *e = srv->entries[i];
        cn_live_session *s = e->s;
        if (cn_live_session_state(s) == CN_LIVE_RUNNING) {
            if (srv->cfg.checkpoint_ns > 0 && now - e->last_checkpoint >= srv->cfg.checkpoint_ns &&
                cn_live_session_dirty(s)) {
                save_entry(srv, e);
                saved = true;
            }
        } else if (cn_live_session_state(s) != CN_LIVE_SAVED && !e->finished_saved) {
            entry_unwatch(e);
            cn_live_session_symbolize(s);
            save_entry(srv, e);
            e->finished_saved = true;
            saved = true;
        } else if (cn_live_session_state(s) != CN_LIVE_SAVED && cn_live_session_dirty(s) &&
                   now - e->last_checkpoint >= LATE_SYMBOLS_NS) {
            save_entry(srv, e); /* late symbol answers */
            saved = true;
        }
    }
    if (saved)
        enforce_state_dir(srv);
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
    if (srv->n_entries == srv->cap_entries) {
        size_t cap = srv->cap_entries ? srv->cap_entries * 2 : 16;
        cn_d__entry **a = realloc(srv->entries, cap * sizeof(*a));
        if (!a)
            return -ENOMEM;
        srv->entries = a;
        srv->cap_entries = cap;
    }
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
        cn_agg_profile *prof = NULL;
        if (cn_fmt_import_file(path, &prof, &err) < 0 ||
            cn_live_session_load(prof, path, &s, &err) < 0) {
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
    }
    closedir(d);
    /* Oldest first, as `sessions` lists them. */
    for (size_t i = 1; i < srv->n_entries; i++) {
        cn_d__entry *e = srv->entries[i];
        size_t j = i;
        for (; j > 0 &&
               cn_live_session_started(srv->entries[j - 1]->s) > cn_live_session_started(e->s);
             j--)
            srv->entries[j] = srv->entries[j - 1];
        srv->entries[j] = e;
    }
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
    *out = e;
    return 0;
}

void cn_d__store_remove(cn_d_server *srv, cn_d__entry *e, bool unlink_file)
{
    cn_d__fleet_forget(srv, e); /* its last samples still go out */
    if (unlink_file) {
        char path[4096];
        session_path(srv, e->s, path, sizeof(path));
        unlink(path);
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
        save_entry(srv, e);
        e->finished_saved = true;
        enforce_state_dir(srv);
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
        cn_live_symbolizer_flush(srv->sym, 2000);
    for (size_t i = 0; i < srv->n_entries; i++) {
        cn_d__entry *e = srv->entries[i];
        if (cn_live_session_state(e->s) != CN_LIVE_SAVED &&
            (!e->finished_saved || cn_live_session_dirty(e->s)))
            save_entry(srv, e);
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
