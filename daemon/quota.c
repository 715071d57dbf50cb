/* quota.c — per-user quotas and connection timeouts: what keeps one local user from
 * filling canopyd's shared bounds for everyone (docs/security.md "Per-user limits").
 *
 * Every bound the daemon has globally (clients, running sessions, sessions held, state-dir
 * bytes, fds) also exists per uid, smaller, so no single user reaches the global one:
 * connections (counted at accept), running sessions and the perf fds their targets need
 * (a PID target costs one event per thread per CPU: counted from /proc/PID/task before
 * attaching, and re-counted every second as targets grow), sessions held (a new one
 * makes room by deleting the user's own oldest stopped session) and state-dir bytes
 * (the user's oldest stopped sessions go first). When the state dir's global bound is
 * reached anyway, sessions are taken from the user holding the most bytes, so nobody's
 * flood deletes another user's sessions while the flooder still has some. Root is bound
 * by the global limits only. Connections idle longer than idle_timeout, or whose answer
 * has not moved for send_timeout, are closed. Nothing here allocates: the counts are
 * recomputed by scanning the store (at most 4096 entries) when asked.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "d_internal.h"

#define FD_RECHECK_NS 1000000000LL /* targets' thread counts are re-read this often */

int cn_d__quota_client(const cn_d_server *srv, const cn_d__cred *cred, cn_err *err)
{
    unsigned n = 0;
    if (cred->uid == 0)
        return 0;
    for (const cn_d__client *cl = srv->clients; cl; cl = cl->next)
        n += cl->cred.uid == cred->uid && !cl->c->closing;
    if (n >= srv->cfg.user_max_clients)
        return cn_err_set(err, -EUSERS, "too many connections for uid %u (limit %u per user)",
                          (unsigned)cred->uid, srv->cfg.user_max_clients);
    return 0;
}

static unsigned online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

/* The perf fds a session on pid costs: one per thread per CPU (0 = system: one per CPU).
 * A process that is gone costs nothing. */
static uint64_t target_fds(pid_t pid)
{
    char path[64];
    uint64_t threads = 0;
    if (pid <= 0)
        return online_cpus();
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    for (struct dirent *de; (de = readdir(d));)
        threads += de->d_name[0] != '.';
    closedir(d);
    return threads * online_cpus();
}

static uint64_t running_fds(const cn_d_server *srv, uid_t uid, size_t *running)
{
    uint64_t fds = 0;
    *running = 0;
    for (size_t i = 0; i < srv->n_entries; i++) {
        cn_live_session *s = srv->entries[i]->s;
        if (cn_live_session_owner(s) != uid || cn_live_session_state(s) != CN_LIVE_RUNNING)
            continue;
        (*running)++;
        fds += target_fds(cn_live_session_kind(s) == CN_LIVE_SYSTEM ? 0 : cn_live_session_pid(s));
    }
    return fds;
}

/* The index of uid's oldest session that no longer samples, or SIZE_MAX. */
static size_t oldest_stopped(const cn_d_server *srv, uid_t uid)
{
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < srv->n_entries; i++) {
        cn_live_session *s = srv->entries[i]->s;
        if (cn_live_session_owner(s) != uid || cn_live_session_state(s) == CN_LIVE_RUNNING)
            continue;
        if (best == SIZE_MAX ||
            cn_live_session_started(s) < cn_live_session_started(srv->entries[best]->s))
            best = i;
    }
    return best;
}

static void evict(cn_d_server *srv, size_t i, const char *why)
{
    cn_live_session *s = srv->entries[i]->s;
    fprintf(stderr, "canopyd: %s: deleting session %s of uid %u\n", why, cn_live_session_id(s),
            (unsigned)cn_live_session_owner(s));
    if (cn_live_session_path(s))
        cn_d__unlink_session_files(cn_live_session_path(s));
    cn_d__store_remove_at(srv, i);
    srv->evicted++;
}

int cn_d__quota_session(cn_d_server *srv, const cn_d__cred *cred, pid_t pid, cn_err *err)
{
    size_t running, kept = 0;
    if (cred->uid == 0)
        return 0;
    uint64_t fds = running_fds(srv, cred->uid, &running);
    if (running >= srv->cfg.user_max_sessions)
        return cn_err_set(err, -EUSERS, "too many running sessions for uid %u (limit %u per user)",
                          (unsigned)cred->uid, srv->cfg.user_max_sessions);
    uint64_t need = target_fds(pid);
    if (fds + need > srv->cfg.user_max_fds)
        return cn_err_set(err, -EUSERS,
                          "the target needs %" PRIu64
                          " perf fds (threads x CPUs); uid %u has %" PRIu64
                          " of %u in use (limit per user)",
                          need, (unsigned)cred->uid, fds, srv->cfg.user_max_fds);
    for (size_t i = 0; i < srv->n_entries; i++)
        kept += cn_live_session_owner(srv->entries[i]->s) == cred->uid;
    while (kept >= srv->cfg.user_max_kept) {
        size_t i = oldest_stopped(srv, cred->uid);
        if (i == SIZE_MAX)
            return cn_err_set(err, -EUSERS, "too many sessions for uid %u (limit %u per user)",
                              (unsigned)cred->uid, srv->cfg.user_max_kept);
        evict(srv, i, "sessions over the user's quota");
        srv->stats.quota_evicted++;
        kept--;
    }
    return 0;
}

/* ---- the state dir ------------------------------------------------------------------ */

/* Per-uid sums of the saved files' sizes (a few users: linear lookup). */
typedef struct uid_sums {
    uid_t *uid;
    uint64_t *bytes;
    size_t n;
} uid_sums;

static uint64_t sums_build(const cn_d_server *srv, const uint64_t *bytes, uid_sums *u)
{
    uint64_t total = 0;
    u->n = 0;
    for (size_t i = 0; i < srv->n_entries; i++) {
        uid_t uid = cn_live_session_owner(srv->entries[i]->s);
        size_t k = 0;
        while (k < u->n && u->uid[k] != uid)
            k++;
        if (k == u->n) {
            u->uid[k] = uid;
            u->bytes[k] = 0;
            u->n++;
        }
        u->bytes[k] += bytes[i];
        total += bytes[i];
    }
    return total;
}

/* uid's oldest stopped session whose file holds bytes, or SIZE_MAX. */
static size_t oldest_saved(const cn_d_server *srv, const uint64_t *bytes, uid_t uid)
{
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < srv->n_entries; i++) {
        cn_live_session *s = srv->entries[i]->s;
        if (cn_live_session_owner(s) != uid || cn_live_session_state(s) == CN_LIVE_RUNNING ||
            !bytes[i])
            continue;
        if (best == SIZE_MAX ||
            cn_live_session_started(s) < cn_live_session_started(srv->entries[best]->s))
            best = i;
    }
    return best;
}

/* The next session to delete, or SIZE_MAX: a user over their own quota loses their
 * oldest first; over the global bound, the user holding the most does. */
static size_t pick_victim(const cn_d_server *srv, const uint64_t *bytes, const uid_sums *u,
                          uint64_t total, const char **why)
{
    for (size_t k = 0; k < u->n; k++) {
        size_t v;
        if (u->uid[k] != 0 && u->bytes[k] > srv->cfg.user_max_kept_bytes &&
            (v = oldest_saved(srv, bytes, u->uid[k])) != SIZE_MAX) {
            *why = "state dir over the user's quota";
            return v;
        }
    }
    if (total <= srv->cfg.state_dir_max)
        return SIZE_MAX;
    size_t best = SIZE_MAX;
    uint64_t most = 0;
    for (size_t k = 0; k < u->n; k++) {
        size_t v = oldest_saved(srv, bytes, u->uid[k]);
        if (v != SIZE_MAX && (best == SIZE_MAX || u->bytes[k] > most)) {
            best = v;
            most = u->bytes[k];
        }
    }
    *why = "state dir over its bound";
    return best;
}

void cn_d__quota_enforce_state_dir(cn_d_server *srv)
{
    size_t n = srv->n_entries;
    uint64_t *bytes = calloc(n ? n : 1, sizeof(*bytes));
    uid_sums u = {calloc(n ? n : 1, sizeof(uid_t)), calloc(n ? n : 1, sizeof(uint64_t)), 0};
    const char *why = NULL;
    if (!bytes || !u.uid || !u.bytes)
        goto out; /* out of memory: the next save tries again */
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        const char *p = cn_live_session_path(srv->entries[i]->s);
        bytes[i] = p && stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
    }
    for (;;) {
        uint64_t total = sums_build(srv, bytes, &u);
        srv->state_dir_bytes = total;
        size_t v = pick_victim(srv, bytes, &u, total, &why);
        if (v == SIZE_MAX)
            break;
        if (strstr(why, "user"))
            srv->stats.quota_evicted++;
        evict(srv, v, why);
        memmove(bytes + v, bytes + v + 1, (srv->n_entries - v) * sizeof(*bytes));
    }
out:
    free(bytes);
    free(u.uid);
    free(u.bytes);
}

/* ---- every tick ---------------------------------------------------------------------- */

/* Running sessions of users over their fd quota (their targets grew): the newest stop. */
static void enforce_fds(cn_d_server *srv)
{
    for (size_t i = srv->n_entries; i-- > 0;) {
        cn_d__entry *e = srv->entries[i];
        uid_t uid = cn_live_session_owner(e->s);
        size_t running;
        if (uid == 0 || cn_live_session_state(e->s) != CN_LIVE_RUNNING)
            continue;
        uint64_t fds = running_fds(srv, uid, &running);
        if (fds <= srv->cfg.user_max_fds)
            continue;
        fprintf(stderr,
                "canopyd: uid %u needs %" PRIu64 " perf fds (limit %u per user): stopping "
                "session %s\n",
                (unsigned)uid, fds, srv->cfg.user_max_fds, cn_live_session_id(e->s));
        srv->stats.quota_refused++;
        cn_d__store_stop(srv, e);
    }
}

void cn_d__quota_tick(cn_d_server *srv, int64_t now)
{
    for (cn_d__client *cl = srv->clients; cl; cl = cl->next) {
        cn_d__conn *c = cl->c;
        if (c->closing)
            continue;
        bool waiting = cl->job || c->out_progress_ns;
        if (!waiting && now - cl->last_active_ns > srv->cfg.idle_timeout_ns) {
            srv->stats.timeouts++;
            cn_d__conn_close(c, false);
        } else if (c->out_progress_ns && now - c->out_progress_ns > srv->cfg.send_timeout_ns) {
            srv->stats.timeouts++; /* the peer does not read its answer */
            cn_d__conn_close(c, false);
        }
    }
    if (now - srv->quota_fd_check >= FD_RECHECK_NS) {
        srv->quota_fd_check = now;
        enforce_fds(srv);
    }
}
