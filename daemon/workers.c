/* workers.c — queries, renders, saves and checkpoints off the loop thread.
 *
 * A job (a `tree`, `save`, `timeline` or `lines` request, or the writing of a session to
 * the state dir) runs in a forked child. fork() is the snapshot: the child sees the
 * daemon's memory — the session's profile among it — exactly as it was between two pumps,
 * copy-on-write, while the loop goes on draining rings into its own copy. A child can be
 * bounded as a thread cannot: it runs at a lower priority than the loop (nice 0, the
 * loop's thread being at -5: main.c), so that sampling wins, but not below the users'
 * own nice-0 work, so that an interactive query (canopy web's live refresh) is not starved
 * on a busy machine; its
 * CPU time is bounded by a CPU-clock timer (SIGXCPU) and RLIMIT_CPU, its memory by
 * RLIMIT_AS, its output by the writer below, its wall time by the tick, and killing it
 * frees everything it allocated. Nothing it does can stall or crash the loop. The answer
 * comes back in a memfd (header, output, notes) read when the child's pidfd says it
 * exited. docs/security.md "Queries and saves off the sampling path".
 *
 * Fairness: at most query_workers children run at once, and queries of one uid take at
 * most query_workers - 1 of them (saves are not counted per user), so a user flooding
 * queries leaves a worker free for everyone else; queued jobs start oldest first among
 * the users that are under that share. Each client has at most one request outstanding
 * (server.c), so the queue is bounded by the connections.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "d_internal.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define JOB_FD     3 /* the memfd's number in the child (every other fd is closed) */
#define QUERY_NICE 0 /* a query's child: below the loop (-5), level with the users' work */
#define SAVE_NICE  5 /* a save's or checkpoint's: background work */
/* Where a query's output starts in the memfd: the header before it, and room for the
 * reply's line, put there when the loop maps the output (answer_query); the line holds
 * the notes (a few, short) and the request's members; a longer one is copied. OUT_TAIL
 * zero bytes follow the output (its NUL, and room for the "}\n" that closes a reply that
 * embeds it: reply.c), then the notes. */
#define OUT_OFF  4096
#define OUT_TAIL 3
/* job_start's "not now": j stays queued (not an errno: fork's EAGAIN is answered) */
#define JOB_LATER 1

/* What a child writes at offset 0 of its memfd; output (at OUT_OFF) then notes follow. */
typedef struct job_hdr {
    int32_t done;      /* 1 once written */
    int32_t code;      /* 0 or negative errno */
    int32_t expensive; /* a query bound was hit */
    int32_t pad;
    uint64_t out_len, notes_len;
    uint64_t cpu_ns; /* the child's CPU time (a save's sets the next checkpoint's delay) */
    char msg[sizeof(((cn_err *)0)->msg)];
} job_hdr;
_Static_assert(sizeof(job_hdr) <= OUT_OFF, "the header fits before the output");

/* ---- jobs ------------------------------------------------------------------------- */

cn_d__job *cn_d__job_new(cn_d__job_kind kind, cn_d__entry *e, uid_t uid)
{
    cn_d__job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->kind = kind;
    j->e = e;
    j->uid = uid;
    j->pid = -1;
    j->pidfd = j->memfd = -1;
    cn_fmt_spec_init(&j->spec);
    return j;
}

void cn_d__job_free(cn_d__job *j)
{
    if (!j)
        return;
    if (j->pidfd >= 0)
        close(j->pidfd);
    if (j->memfd >= 0)
        close(j->memfd);
    json_decref(j->req);
    cn_fmt_spec_clear(&j->spec);
    free(j->func);
    free(j->path);
    free(j);
}

static void unlink_job(cn_d_server *srv, cn_d__job *j)
{
    if (j->prev)
        j->prev->next = j->next;
    else
        srv->jobs = j->next;
    if (j->next)
        j->next->prev = j->prev;
    j->next = j->prev = NULL;
}

int cn_d__query_check(const cn_d_server *srv, const cn_fmt_spec *q, cn_err *err)
{
    if (q->n_transforms > srv->cfg.query_max_transforms)
        return cn_err_set(err, -E2BIG, "query too expensive: %zu transforms (limit %u)",
                          q->n_transforms, srv->cfg.query_max_transforms);
    return 0;
}

/* ---- the child -------------------------------------------------------------------- */

/* The output writer: appends to JOB_FD after the header, refusing past the bound. */
typedef struct bounded_out {
    uint64_t len, max;
    bool over;
} bounded_out;

static ssize_t bounded_write(void *cookie, const char *buf, size_t n)
{
    bounded_out *o = cookie;
    if (o->len + n > o->max) {
        o->over = true;
        errno = EFBIG;
        return -1;
    }
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(JOB_FD, buf + done, n - done, (off_t)(OUT_OFF + o->len + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return done ? (ssize_t)done : -1;
        done += (size_t)w;
    }
    o->len += n;
    return (ssize_t)n;
}

/* The child's bounds: priority below the loop, CPU time, memory. */
static void child_limits(const cn_d_server *srv)
{
    struct rlimit rl;
    int64_t ns = srv->cfg.query_cpu_ns;
    setpriority(PRIO_PROCESS, 0, QUERY_NICE);
    /* Sub-second precision from a CPU-clock timer; RLIMIT_CPU (whole seconds, SIGKILL at
     * the hard limit) backs it up. SIGXCPU's default action ends the child. */
    signal(SIGXCPU, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGXCPU);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    timer_t t;
    struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGXCPU};
    if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &sev, &t) == 0) {
        struct itimerspec its = {.it_value = {ns / 1000000000, ns % 1000000000}};
        timer_settime(t, 0, &its, NULL);
    }
    rl.rlim_cur = (rlim_t)(ns / 1000000000 + 1);
    rl.rlim_max = rl.rlim_cur + 1;
    setrlimit(RLIMIT_CPU, &rl);
    /* Memory: what the daemon maps already plus the query's share. */
    FILE *f = fopen("/proc/self/statm", "re");
    unsigned long pages = 0;
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    if (pages) {
        rl.rlim_cur = rl.rlim_max =
            (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (rlim_t)srv->cfg.query_memory;
        setrlimit(RLIMIT_AS, &rl);
    }
}

static int child_query(cn_d_server *srv, cn_d__job *j, job_hdr *h, cn_buf *notes)
{
    cn_err err = {0};
    cn_agg_profile *p = j->prof;
    int r = 0;
    if (!p && (r = cn_fmt_import_file(j->path, &p, &err)) < 0)
        goto out;
    if (j->kind == CN_D__JOB_LINES) {
        int code = 0;
        json_t *l = cn_d__lines_json(j->e->s, p, &j->spec, j->func, &code, &err);
        char *text = l ? json_dumps(l, JSON_COMPACT) : NULL;
        if (!l) {
            r = code;
        } else if (!text) {
            r = cn_err_set(&err, -ENOMEM, "out of memory");
        } else {
            bounded_out o = {.max = srv->cfg.query_max_output};
            if (bounded_write(&o, text, strlen(text)) < 0)
                r = cn_err_set(&err, o.over ? -EFBIG : -EIO, "writing the answer failed");
            h->out_len = o.len;
        }
        free(text);
        json_decref(l);
        goto out;
    }
    bounded_out o = {.max = srv->cfg.query_max_output};
    cookie_io_functions_t io = {.write = bounded_write};
    FILE *f = fopencookie(&o, "w", io);
    if (!f) {
        r = cn_err_set(&err, -ENOMEM, "out of memory");
        goto out;
    }
    r = cn_d__render_to(j->e->s, p, &j->spec, f, notes, &err);
    if (fclose(f) != 0 && r == 0)
        r = cn_err_set(&err, -EIO, "writing the answer failed");
    if (o.over)
        r = cn_err_set(&err, -EFBIG, "query too expensive: output over %zu bytes (limit)",
                       srv->cfg.query_max_output);
    h->out_len = o.len;
out:
    h->code = r;
    if (r == -EFBIG || r == -ENOMEM) {
        h->expensive = 1;
        if (r == -ENOMEM)
            snprintf(err.msg, sizeof(err.msg),
                     "query too expensive: it needs more than %zu bytes of memory",
                     srv->cfg.query_memory);
    }
    snprintf(h->msg, sizeof(h->msg), "%s", err.msg);
    return r;
}

static int child_save(cn_d__job *j, job_hdr *h)
{
    cn_err err = {0};
    int r = cn_live_session_save(j->e->s, j->path, &err);
    if (r == 0)
        r = cn_d__meta_write(j->prof, j->path);
    h->code = r;
    snprintf(h->msg, sizeof(h->msg), "%s", err.msg[0] ? err.msg : strerror(-r));
    return r;
}

/* The child: never returns. Every fd but the memfd (as JOB_FD) and stdio is closed, so
 * it holds no client socket open and cannot touch the rings. It dies with canopyd
 * (daemon_pid, the parent it was forked from): an answer nobody will read is not worth its
 * CPU, and a child outliving a killed canopyd would keep its work going under a restarted
 * one. */
static void child_main(cn_d_server *srv, cn_d__job *j, pid_t daemon_pid)
{
    job_hdr h = {0};
    cn_buf notes;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != daemon_pid)
        _exit(122); /* canopyd already gone: the death signal was set too late */
    if (dup2(j->memfd, JOB_FD) < 0)
        _exit(120);
    syscall(SYS_close_range, JOB_FD + 1, ~0U, 0);
    if (j->kind != CN_D__JOB_SAVE)
        child_limits(srv);
    else
        setpriority(PRIO_PROCESS, 0, SAVE_NICE);
    cn_buf_init(&notes, 0);
    if (j->kind == CN_D__JOB_SAVE)
        child_save(j, &h);
    else
        child_query(srv, j, &h, &notes);
    /* A query's output is followed by OUT_TAIL zero bytes (a save has none), then notes. */
    static const char tail[OUT_TAIL];
    if (j->kind != CN_D__JOB_SAVE &&
        pwrite(JOB_FD, tail, OUT_TAIL, (off_t)(OUT_OFF + h.out_len)) != OUT_TAIL)
        _exit(121);
    if (cn_buf_len(&notes) &&
        pwrite(JOB_FD, cn_buf_ptr(&notes), cn_buf_len(&notes),
               (off_t)(OUT_OFF + h.out_len + OUT_TAIL)) == (ssize_t)cn_buf_len(&notes))
        h.notes_len = cn_buf_len(&notes);
    struct timespec cpu;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu) == 0) /* since the fork */
        h.cpu_ns = (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec;
    h.done = 1;
    if (pwrite(JOB_FD, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
        _exit(121);
    _exit(0); /* no atexit handlers, no stdio flush of the daemon's buffers */
}

/* ---- completion ------------------------------------------------------------------- */

static int read_exact(int fd, void *buf, size_t n, off_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (char *)buf + done, n - done, off + (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -EIO;
        done += (size_t)r;
    }
    return 0;
}

/* The worker's output into out, where it lies in the memfd: mapped, not read (a copy and
 * the fresh pages it fills were ~7% of the loop's CPU at 99 Hz with a tree query every
 * 5 s), with the room before it for the reply's line. 0 or negative errno. */
static int map_output(int memfd, uint64_t out_len, cn_buf *out)
{
    struct stat st;
    if (fstat(memfd, &st) < 0)
        return -errno;
    /* The worker wrote the bytes after the output: every page mapped holds some of the
     * file, so no access of the buffer is past its end (SIGBUS). */
    if (out_len > SIZE_MAX - OUT_OFF - OUT_TAIL ||
        (uint64_t)st.st_size < OUT_OFF + out_len + OUT_TAIL)
        return -EIO;
    size_t len = OUT_OFF + (size_t)out_len + OUT_TAIL;
    char *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, memfd, 0);
    if (map == MAP_FAILED)
        return -errno;
    if (map[OUT_OFF + out_len] != '\0') {
        munmap(map, len);
        return -EIO;
    }
    int r = cn_buf_adopt_map(out, map, len, OUT_OFF, (size_t)out_len);
    if (r < 0)
        munmap(map, len);
    return r;
}

/* The answer to a query job: the same response render_cmd built on the loop before. */
static void answer_query(cn_d_server *srv, cn_d__job *j, const job_hdr *h)
{
    cn_d__reply rp;
    cn_buf out, notes;
    cn_d__reply_init(&rp);
    cn_buf_init(&out, 0);
    cn_buf_init(&notes, 0);
    size_t room;
    if (h->out_len && map_output(j->memfd, h->out_len, &out) < 0)
        goto oom;
    if (h->notes_len && (!cn_buf_space(&notes, h->notes_len, &room) || room < h->notes_len))
        goto oom;
    if (h->notes_len && read_exact(j->memfd, cn_buf_ptr(&notes), h->notes_len,
                                   (off_t)(OUT_OFF + h->out_len + OUT_TAIL)) < 0)
        goto oom;
    if (h->notes_len)
        cn_buf_commit(&notes, h->notes_len);
    if (j->kind == CN_D__JOB_LINES) {
        json_t *l = json_loadb(cn_buf_ptr(&out), cn_buf_len(&out), 0, NULL);
        if (l && (rp.msg = cn_proto_ok(j->req)))
            json_object_set_new(rp.msg, "lines", l);
        else
            json_decref(l);
    } else if ((rp.msg = cn_proto_ok(j->req)) &&
               (cn_d__reply_notes(&rp, &notes) < 0 ||
                cn_d__reply_output(&rp, j->spec.format, j->spec.timeline ? "timeline" : "tree",
                                   &out, j->payload) < 0)) {
        json_decref(rp.msg);
        rp.msg = NULL;
    }
oom:
    cn_d__reply_send(j->cl->c, &rp);
    cn_buf_free(&out);
    cn_buf_free(&notes);
}

static void answer_error(cn_d__job *j, const char *code, int exit, const char *msg)
{
    cn_d__reply rp;
    cn_d__reply_init(&rp);
    rp.msg = cn_proto_error(j->req, code, exit, "%s", msg);
    cn_d__reply_send(j->cl->c, &rp);
}

/* A query that did not finish by itself goes to the log as well as to the client that
 * asked: to an operator a query killed for its cost, or a worker that crashed, is news.
 * (A worker whose client left was killed for that reason, and is not logged.) */
static void log_query_end(const cn_d__job *j, const char *why)
{
    const char *cmd = json_string_value(json_object_get(j->req, "cmd"));
    fprintf(stderr, "canopyd: %s of uid %u on session %s: %s\n", cmd ? cmd : "query",
            (unsigned)j->uid, j->e ? cn_live_session_id(j->e->s) : "(removed)", why);
}

static void save_done(cn_d_server *srv, cn_d__job *j, const job_hdr *h, bool ok)
{
    cn_err err = {0};
    if (!j->e) {
        /* Removed while it was written: what the child wrote must not come back. */
        cn_d__unlink_session_files(j->path);
        return;
    }
    j->e->save_job = NULL;
    if (ok && h->code == 0) {
        cn_live_session_mark_saved(j->e->s, j->path, j->changes);
        j->e->save_cpu_ns = (int64_t)h->cpu_ns;
        j->e->saves++;
        if (j->e->save_backoff)
            fprintf(stderr, "canopyd: saving session %s: written again\n",
                    cn_live_session_id(j->e->s));
        j->e->save_backoff = 0;
    } else {
        snprintf(err.msg, sizeof(err.msg), "%s", ok ? h->msg : "the writer died");
        cn_d__store_save_failed(srv, j->e, &err);
    }
    cn_d__quota_enforce_state_dir(srv);
}

static void start_queued(cn_d_server *srv);

/* The child of j exited (or was killed): answer, account, free. */
static void job_done(cn_d_server *srv, cn_d__job *j)
{
    siginfo_t si = {0};
    job_hdr h = {0};
    char msg[sizeof(((cn_err *)0)->msg) + 64];
    waitid(P_PIDFD, (id_t)j->pidfd, &si, WEXITED);
    cn_d__loop_unwatch(srv->loop, j->watch);
    j->watch = NULL;
    bool ok = si.si_code == CLD_EXITED && si.si_status == 0 &&
              read_exact(j->memfd, &h, sizeof(h), 0) == 0 && h.done == 1;
    bool killed = si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED;
    bool cpu = killed && (si.si_status == SIGXCPU || si.si_status == SIGKILL);
    if (!ok)
        h.msg[sizeof(h.msg) - 1] = '\0';
    if (j->kind == CN_D__JOB_SAVE) {
        save_done(srv, j, &h, ok);
    } else if (j->cl) {
        j->cl->job = NULL;
        j->cl->last_active_ns = cn_common_now_ns();
        if (ok && h.expensive) {
            srv->stats.query_too_expensive++;
            answer_error(j, "query_too_expensive", 1, h.msg);
        } else if (ok && h.code < 0) {
            cn_d__reply rp;
            cn_err err = {0};
            snprintf(err.msg, sizeof(err.msg), "%s", h.msg);
            cn_d__reply_init(&rp);
            rp.msg = cn_d__reply_error(j->req, h.code, &err);
            cn_d__reply_send(j->cl->c, &rp);
        } else if (ok) {
            answer_query(srv, j, &h);
        } else if (cpu) {
            srv->stats.query_too_expensive++;
            if (j->wall_kill[0])
                snprintf(msg, sizeof(msg),
                         "query too expensive: stopped after %.3g s in all (limit), %s",
                         4 * (double)srv->cfg.query_cpu_ns / 1e9, j->wall_kill);
            else
                snprintf(msg, sizeof(msg),
                         "query too expensive: stopped after %.3g s of CPU time (limit)",
                         (double)srv->cfg.query_cpu_ns / 1e9);
            answer_error(j, "query_too_expensive", 1, msg);
            log_query_end(j, msg);
        } else {
            srv->stats.jobs_failed++;
            snprintf(msg, sizeof(msg), "the query worker died (%s %d)",
                     killed ? "signal" : "status", si.si_status);
            answer_error(j, "failed", 1, msg);
            log_query_end(j, msg);
        }
    }
    srv->stats.jobs_done++;
    srv->jobs_running--;
    unlink_job(srv, j);
    cn_d__job_free(j);
    start_queued(srv);
}

static void on_job_exit(void *arg, int fd, uint32_t revents)
{
    cn_d__job *j = arg;
    job_done(j->srv, j);
}

/* ---- scheduling ------------------------------------------------------------------- */

static size_t running_of(const cn_d_server *srv, uid_t uid)
{
    size_t n = 0;
    for (const cn_d__job *j = srv->jobs; j; j = j->next)
        n += j->pid > 0 && j->kind != CN_D__JOB_SAVE && j->uid == uid;
    return n;
}

/* AddressSanitizer's allocator (GCC 12's libsanitizer) is not locked across fork(): a
 * child forked while another thread holds one of the allocator's locks waits forever on
 * it at its next malloc or free (seen: the query killed at its wall-time bound, its stack
 * in SizeClassAllocator64's Refill or Drain). Under ASan the symbolizer's thread is held
 * where it allocates nothing while we fork (or, when it is inside a lookup, the fork waits
 * for the loop's next round, never the loop for the lookup), and the threads of its
 * finished loads, which free their caches as they exit, are joined first. Not covered: a load that
 * outlasted its wait, and the fleet pusher's thread (its HTTP requests allocate throughout, and
 * holding the loop for one is worse than the risk, in a sanitized build, of a query that ends at
 * its wall-time bound with the lock named in the log). glibc's malloc locks itself across
 * fork, so other builds do not wait for a lookup in progress. */
#if defined(__SANITIZE_ADDRESS__)
#define CN_D__QUIESCE_FORK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CN_D__QUIESCE_FORK 1
#endif
#endif

/* Holds (hold) or releases the threads above; false when the symbolizer's thread is
 * inside a lookup: the job then waits for the loop's next round (the thread signals its fd
 * when it has stepped out), so that the loop never waits for a lookup. */
static bool quiesce_threads(cn_d_server *srv, bool hold)
{
#ifdef CN_D__QUIESCE_FORK
    if (hold)
        return cn_live_symbolizer_try_pause(srv->sym);
    cn_live_symbolizer_resume(srv->sym);
#else
    (void)srv;
    (void)hold;
#endif
    return true;
}

/* Forks j's child. 0, JOB_LATER (not now: j stays queued), or negative errno (j is then
 * answered with the error; fork's EAGAIN at a pid limit among them). The rings are drained
 * first: a fork holds the loop for as long as copying the daemon's page tables takes (6 to
 * 46 ms measured for a sanitized canopyd under load, several forks a round when queries
 * queue), and a ring is only read once its wakeup mark leaves a quarter of it free
 * (sampler/perf_open.c ring_mark: ~60 ms of 16 KiB records at 999 Hz), so a fork at that
 * moment lost records; from an empty ring it has the whole ring's time. */
static int job_start(cn_d_server *srv, cn_d__job *j)
{
    for (size_t i = 0; i < srv->n_entries; i++)
        cn_d__store_pump(srv->entries[i]);
    if (!quiesce_threads(srv, true))
        return JOB_LATER;
    j->memfd = memfd_create("canopyd-job", MFD_CLOEXEC);
    if (j->memfd < 0) {
        int r = -errno;
        quiesce_threads(srv, false);
        return r;
    }
    if (j->kind == CN_D__JOB_SAVE)
        j->changes = cn_live_session_changes(j->e->s);
    /* cn_live_session_profile() may hand frames to the symbolizer (a lock its thread may
     * hold at fork): here, never in the child. */
    if (!j->e->lazy)
        j->prof = cn_live_session_profile(j->e->s);
    fflush(NULL);
    pid_t daemon_pid = getpid();
    pid_t pid = fork();
    int fork_errno = errno;
    if (pid == 0)
        child_main(srv, j, daemon_pid);
    quiesce_threads(srv, false);
    if (pid < 0)
        return -fork_errno;
    j->pid = pid;
    j->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    j->started_ns = cn_common_now_ns();
    j->srv = srv;
    if (j->pidfd < 0 || !(j->watch = cn_d__loop_watch(srv->loop, j->pidfd, on_job_exit, j))) {
        /* Cannot hear about its end: wait for it here (it is bounded). */
        int st;
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return -EMFILE;
    }
    srv->jobs_running++;
    return 0;
}

static void start_queued(cn_d_server *srv)
{
    unsigned per_user = srv->cfg.query_workers > 1 ? srv->cfg.query_workers - 1 : 1;
    for (cn_d__job *j = srv->jobs, *next; j && srv->jobs_running < srv->cfg.query_workers;
         j = next) {
        next = j->next;
        if (j->pid > 0 || (j->kind != CN_D__JOB_SAVE && running_of(srv, j->uid) >= per_user))
            continue;
        int r = job_start(srv, j);
        if (r == 0)
            continue;
        if (r == JOB_LATER)
            break; /* the threads are busy: the next round starts it (quiesce_threads) */
        /* Could not fork: answer now, as the loop would have. */
        if (j->kind == CN_D__JOB_SAVE && j->e) {
            cn_err err = {0};
            cn_err_set(&err, r, "starting the writer: %s", strerror(-r));
            j->e->save_job = NULL;
            cn_d__store_save_failed(srv, j->e, &err);
        } else if (j->kind != CN_D__JOB_SAVE && j->cl) {
            char msg[128];
            snprintf(msg, sizeof(msg), "starting the query worker: %s", strerror(-r));
            j->cl->job = NULL;
            answer_error(j, "failed", 1, msg);
        }
        unlink_job(srv, j);
        cn_d__job_free(j);
    }
}

void cn_d__job_submit(cn_d_server *srv, cn_d__job *j)
{
    cn_d__job **tail = &srv->jobs, *prev = NULL;
    while (*tail) {
        prev = *tail;
        tail = &(*tail)->next;
    }
    *tail = j;
    j->prev = prev;
    j->srv = srv;
    if (j->kind == CN_D__JOB_SAVE)
        j->e->save_job = j;
    else
        j->cl->job = j;
}

void cn_d__jobs_start(cn_d_server *srv)
{
    if (srv->jobs && srv->jobs_running < srv->cfg.query_workers)
        start_queued(srv);
}

void cn_d__job_cancel(cn_d_server *srv, cn_d__job *j)
{
    j->cl = NULL;
    if (j->pid > 0) {
        syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0); /* job_done frees it */
        return;
    }
    unlink_job(srv, j);
    cn_d__job_free(j);
}

void cn_d__jobs_forget_entry(cn_d_server *srv, cn_d__entry *e)
{
    for (cn_d__job *j = srv->jobs, *next; j; j = next) {
        next = j->next;
        if (j->e != e)
            continue;
        j->e = NULL;
        if (j->kind == CN_D__JOB_SAVE && j->pid <= 0) {
            unlink_job(srv, j);
            cn_d__job_free(j);
        } else if (j->kind == CN_D__JOB_SAVE) {
            syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
        } else if (j->pid <= 0) {
            /* A queued query of a session that is gone. */
            if (j->cl) {
                j->cl->job = NULL;
                answer_error(j, "unknown_session", 1, "the session was removed");
            }
            unlink_job(srv, j);
            cn_d__job_free(j);
        }
        /* A running query keeps its snapshot: the child needs nothing from e any more. */
    }
}

/* Fills j->wall_kill from /proc/PID/stat and wchan: "with 0.02 s of CPU time, in state S
 * (futex_wait_queue)". Read before the kill, while the child still is what timed out. */
static void describe_stuck_child(cn_d__job *j)
{
    char path[64], stat[1024] = "", wchan[64] = "";
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)j->pid);
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(stat, 1, sizeof(stat) - 1, f) : 0;
    if (f)
        fclose(f);
    stat[n] = '\0';
    snprintf(path, sizeof(path), "/proc/%d/wchan", (int)j->pid);
    if ((f = fopen(path, "re"))) {
        if (!fgets(wchan, sizeof(wchan), f))
            wchan[0] = '\0';
        fclose(f);
    }
    /* After the command's closing parenthesis: state (field 3) ... utime stime (14, 15). */
    const char *rest = strrchr(stat, ')');
    char state = '?';
    unsigned long long utime = 0, stime = 0;
    if (!rest || sscanf(rest + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu", &state,
                        &utime, &stime) != 3) {
        snprintf(j->wall_kill, sizeof(j->wall_kill), "its state unknown");
        return;
    }
    double cpu_s = (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
    int len = snprintf(j->wall_kill, sizeof(j->wall_kill), "with %.2f s of CPU time, in state %c",
                       cpu_s, state);
    if (wchan[0] && strcmp(wchan, "0") != 0 && len > 0 && (size_t)len < sizeof(j->wall_kill))
        snprintf(j->wall_kill + len, sizeof(j->wall_kill) - (size_t)len, " (%s)", wchan);
}

void cn_d__jobs_tick(cn_d_server *srv)
{
    int64_t now = cn_common_now_ns();
    for (cn_d__job *j = srv->jobs; j; j = j->next) {
        /* Wall clock: a query starved of CPU or blocked still ends. */
        if (j->pid > 0 && j->kind != CN_D__JOB_SAVE && !j->wall_kill[0] &&
            now - j->started_ns > 4 * srv->cfg.query_cpu_ns) {
            describe_stuck_child(j);
            syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
        }
    }
    start_queued(srv);
}

void cn_d__jobs_shutdown(cn_d_server *srv)
{
    for (cn_d__job *j = srv->jobs, *next; j; j = next) {
        next = j->next;
        if (j->pid > 0)
            continue;
        if (j->kind == CN_D__JOB_SAVE && j->e)
            j->e->save_job = NULL;
        else if (j->cl)
            j->cl->job = NULL;
        unlink_job(srv, j);
        cn_d__job_free(j);
    }
    for (cn_d__job *j = srv->jobs, *next; j; j = next) {
        next = j->next;
        if (j->kind != CN_D__JOB_SAVE)
            syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
        /* Saves finish (they are what shutdown is for); queries were just killed. */
        struct pollfd pfd = {.fd = j->pidfd, .events = POLLIN};
        if (poll(&pfd, 1, 10000) <= 0)
            syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
        if (j->cl) {
            j->cl->job = NULL;
            j->cl = NULL;
        }
        job_done(srv, j);
    }
}
