/* churn.c — process and thread churn for canopyd's churn and soak tests (issue 22, "a
 * real, busy machine"). Runs, side by side, until SECONDS pass or MAX processes were
 * started, then stops by itself and prints what it did as one JSON line:
 *   --procs R    R fork+execs of /bin/true per second
 *   --chains R   R exec chains per second: sh -c 'exec env true' (sh -> env -> true)
 *   --dso R      R processes per second that copy LIB to a fresh name, dlopen it, run
 *                dl_work in it for ~3 ms and exit at once: the sampler meets a new object
 *                in a process that is gone by the time its samples are read
 *   --storm N    thread storms: N threads created, each spinning ~0.2 ms, and joined,
 *                --storm-rate R times a second (default 5)
 *   --seconds S  run time (default 10); --max M at most M processes in all (default 1e6)
 *   --lib LIB    the library for --dso (default libwl_dlwork.so beside this program)
 * At most 256 children at a time; a fork that fails (EAGAIN at a pid limit) is counted
 * and retried at the next tick, never fatal, and so is a child that fails (exit_bad): the
 * caller judges the counts. Usage: wl_churn [options]; the child side
 * of --dso is `wl_churn --dso-child LIB DIR`. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wl_common.h"

#define MAX_CHILDREN 256

enum { K_PROC, K_CHAIN, K_DSO, K_NKIND };
static const char *const kind_name[K_NKIND] = {"procs", "chains", "dso"};

typedef struct churn {
    double rate[K_NKIND];
    int storm;
    double storm_rate;
    uint64_t end_ns;
    long max;
    char self[PATH_MAX], lib[PATH_MAX], dir[PATH_MAX];
    atomic_long started, outstanding;
    atomic_long spawned[K_NKIND], fork_failed[K_NKIND];
    atomic_long reaped, exit_ok, exit_bad;
    atomic_long threads, thread_failed, storms;
    atomic_bool done;
} churn;

volatile uint64_t wl_sink;

__attribute__((noinline)) static uint64_t spin_ns(uint64_t ns)
{
    uint64_t x = wl_sink, end = wl_now_ns() + ns;
    while (wl_now_ns() < end)
        for (int i = 0; i < 100; i++)
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

static void sleep_until(uint64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000ULL), (long)(t % 1000000000ULL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* The child of --dso: LIB copied to DIR/churn-PID.so, dlopened, ~3 ms in its dl_work,
 * the copy unlinked, and _exit without dlclose (the mapping goes with the process). */
static int dso_child(const char *lib, const char *dir)
{
    char path[PATH_MAX], buf[65536];
    snprintf(path, sizeof(path), "%s/churn-%d.so", dir, (int)getpid());
    int in = open(lib, O_RDONLY | O_CLOEXEC), out = -1, rc = 1;
    if (in < 0 || (out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
        goto done;
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n)
            goto done;
    if (n < 0 || close(out) < 0)
        goto done;
    out = -1;
    void *h = dlopen(path, RTLD_NOW);
    if (!h)
        goto done;
    uint64_t (*fn)(double) = (uint64_t(*)(double))dlsym(h, "dl_work");
    if (!fn)
        goto done;
    wl_sink = fn(0.003);
    rc = 0;
done:
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    unlink(path);
    _exit(rc);
}

/* One child of kind k; only async-signal-safe calls between fork and exec (the parent
 * has threads). */
static int spawn(churn *c, int k)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid > 0)
        return 0;
    switch (k) {
    case K_PROC:
        execl("/bin/true", "true", (char *)NULL);
        break;
    case K_CHAIN:
        execl("/bin/sh", "sh", "-c", "exec env true", (char *)NULL);
        break;
    default:
        execl(c->self, "wl_churn", "--dso-child", c->lib, c->dir, (char *)NULL);
        break;
    }
    _exit(127);
}

typedef struct spawner {
    churn *c;
    int kind;
} spawner;

/* Starts children of one kind at its rate (each on its own tick; a late tick starts at
 * once, so a stall is made up), while under MAX_CHILDREN and the total bound. */
static void *spawn_main(void *arg)
{
    spawner *sp = arg;
    churn *c = sp->c;
    uint64_t step = (uint64_t)(1e9 / c->rate[sp->kind]), next = wl_now_ns();
    while (!atomic_load(&c->done)) {
        next += step;
        uint64_t now = wl_now_ns();
        if (now >= c->end_ns)
            break;
        if (next > now)
            sleep_until(next < c->end_ns ? next : c->end_ns);
        else if (now - next > 1000000000ULL)
            next = now; /* over a second behind (a pid limit, a stopped machine): forget it */
        if (atomic_load(&c->outstanding) >= MAX_CHILDREN)
            continue;
        if (atomic_fetch_add(&c->started, 1) >= c->max) {
            atomic_store(&c->done, true);
            break;
        }
        atomic_fetch_add(&c->outstanding, 1);
        if (spawn(c, sp->kind) < 0) {
            atomic_fetch_sub(&c->outstanding, 1);
            atomic_fetch_sub(&c->started, 1);
            atomic_fetch_add(&c->fork_failed[sp->kind], 1);
        } else {
            atomic_fetch_add(&c->spawned[sp->kind], 1);
        }
    }
    return NULL;
}

static void *storm_thread(void *arg)
{
    (void)arg;
    wl_sink = spin_ns(200000);
    return NULL;
}

/* Thread storms: storm threads started (small stacks), joined, again, until the end. */
static void *storm_main(void *arg)
{
    churn *c = arg;
    pthread_t *t = calloc((size_t)c->storm, sizeof(*t));
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 64 * 1024);
    uint64_t step = (uint64_t)(1e9 / c->storm_rate), next = wl_now_ns();
    while (t && !atomic_load(&c->done) && wl_now_ns() < c->end_ns) {
        int n = 0;
        for (int i = 0; i < c->storm; i++) {
            if (pthread_create(&t[n], &at, storm_thread, NULL) == 0)
                n++;
            else
                atomic_fetch_add(&c->thread_failed, 1);
        }
        for (int i = 0; i < n; i++)
            pthread_join(t[i], NULL);
        atomic_fetch_add(&c->threads, n);
        atomic_fetch_add(&c->storms, 1);
        next += step;
        uint64_t now = wl_now_ns();
        if (next > now)
            sleep_until(next < c->end_ns ? next : c->end_ns);
        else
            next = now; /* storms that take longer than a tick: back to back */
    }
    pthread_attr_destroy(&at);
    free(t);
    return NULL;
}

/* Reaps every child (the spawners only start them). */
static void reap(churn *c, bool block)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, block ? 0 : WNOHANG)) > 0) {
        atomic_fetch_sub(&c->outstanding, 1);
        atomic_fetch_add(&c->reaped, 1);
        atomic_fetch_add(WIFEXITED(st) && WEXITSTATUS(st) == 0 ? &c->exit_ok : &c->exit_bad, 1);
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: wl_churn [--procs R] [--chains R] [--dso R] [--storm N] "
                    "[--storm-rate R] [--seconds S] [--max M] [--lib LIB]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--dso-child"))
        return dso_child(argv[2], argv[3]);
    static churn c;
    double secs = 10;
    c.max = 1000000;
    c.storm_rate = 5;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return usage();
        i++;
        if (!strcmp(o, "--procs"))
            c.rate[K_PROC] = atof(v);
        else if (!strcmp(o, "--chains"))
            c.rate[K_CHAIN] = atof(v);
        else if (!strcmp(o, "--dso"))
            c.rate[K_DSO] = atof(v);
        else if (!strcmp(o, "--storm"))
            c.storm = atoi(v);
        else if (!strcmp(o, "--storm-rate"))
            c.storm_rate = atof(v);
        else if (!strcmp(o, "--seconds"))
            secs = atof(v);
        else if (!strcmp(o, "--max"))
            c.max = atol(v);
        else if (!strcmp(o, "--lib"))
            snprintf(c.lib, sizeof(c.lib), "%s", v);
        else
            return usage();
    }
    ssize_t n = readlink("/proc/self/exe", c.self, sizeof(c.self) - 1);
    if (n <= 0)
        return 1;
    c.self[n] = 0;
    if (!c.lib[0]) {
        char *slash = strrchr(c.self, '/');
        snprintf(c.lib, sizeof(c.lib), "%.*s/libwl_dlwork.so", (int)(slash - c.self), c.self);
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(c.dir, sizeof(c.dir), "%s/wl_churn.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (c.rate[K_DSO] > 0 && (access(c.lib, R_OK) < 0 || !mkdtemp(c.dir))) {
        fprintf(stderr, "wl_churn: %s: %s\n", c.lib, strerror(errno));
        return 1;
    }
    uint64_t t0 = wl_now_ns();
    c.end_ns = t0 + (uint64_t)(secs * 1e9);
    pthread_t th[K_NKIND + 1];
    spawner sp[K_NKIND];
    bool have[K_NKIND + 1] = {false};
    for (int k = 0; k < K_NKIND; k++) {
        sp[k] = (spawner){&c, k};
        have[k] = c.rate[k] > 0 && pthread_create(&th[k], NULL, spawn_main, &sp[k]) == 0;
    }
    have[K_NKIND] = c.storm > 0 && pthread_create(&th[K_NKIND], NULL, storm_main, &c) == 0;
    while (!atomic_load(&c.done) && wl_now_ns() < c.end_ns) {
        reap(&c, false);
        usleep(2000);
    }
    atomic_store(&c.done, true);
    for (int k = 0; k <= K_NKIND; k++)
        if (have[k])
            pthread_join(th[k], NULL);
    reap(&c, true);
    if (c.rate[K_DSO] > 0)
        rmdir(c.dir);
    double took = (double)(wl_now_ns() - t0) / 1e9;
    printf("{\"seconds\":%.2f", took);
    for (int k = 0; k < K_NKIND; k++)
        printf(",\"%s\":%ld,\"%s_fork_failed\":%ld", kind_name[k], atomic_load(&c.spawned[k]),
               kind_name[k], atomic_load(&c.fork_failed[k]));
    printf(",\"processes\":%ld,\"exit_ok\":%ld,\"exit_bad\":%ld,\"threads\":%ld,"
           "\"thread_failed\":%ld,\"storms\":%ld,\"per_minute\":%.0f}\n",
           atomic_load(&c.reaped), atomic_load(&c.exit_ok), atomic_load(&c.exit_bad),
           atomic_load(&c.threads), atomic_load(&c.thread_failed), atomic_load(&c.storms),
           (double)atomic_load(&c.reaped) * 60 / took);
    return 0;
}
