/* bench_daemon.c — canopyd's performance figures (docs/perf-daemon.md).
 *
 *   bench_daemon tree    `canopy tree` round trip through a real canopyd server (in this
 *                        process, on its own thread, io_uring or epoll) on a session of
 *                        1,000,000 samples over 100,000 distinct stacks (bench_callgraph.h,
 *                        symbolized), with two transforms: median over BENCH_REPS requests,
 *                        text and json, both as `canopy tree` makes them (the client's
 *                        cn_cli_request_emit: raw payload written to /dev/null) and with
 *                        the default JSON-embedded reply parsed by jansson (what a generic
 *                        client pays). Target: <= 50 ms. BENCH_KEEP=1 keeps the session
 *                        file (its path is printed).
 *   bench_daemon cpu     daemon CPU per sample, all-in (sampling, unwinding, symbolizing,
 *                        aggregating, the loop): a server in this process attaches in fp mode
 *                        at 999 Hz to wl_threads_fp (2 busy threads) for BENCH_SECONDS; the
 *                        process CPU time (every thread: loop and symbolizer) / samples.
 *                        Target: <= 10 us per sample.
 *   bench_daemon memory  one hour at 99 Hz on 8 busy threads, simulated: 2,851,200 samples
 *                        fed to the engine with their times, the 10-minute retention
 *                        folding as a session does every second, over a realistic 20,000
 *                        distinct stacks; RSS and the profile's bytes at the end.
 *                        Target: RSS <= 64 MB.
 * Build in Release for figures: cmake -DCMAKE_BUILD_TYPE=Release -DCANOPY_SANITIZE=OFF.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_callgraph.h"
#include "cn_common.h"
#include "cn_d.h"
#include "live.h"

static long env_long(const char *name, long def)
{
    const char *s = getenv(name);
    return s && *s ? atol(s) : def;
}

static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    unsigned long size = 0, res = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &res) != 2)
        res = 0;
    fclose(f);
    return res * (size_t)sysconf(_SC_PAGESIZE);
}

/* ---- a server on a thread, and a blocking client ------------------------------------- */

typedef struct bench_srv {
    cn_d_server *srv;
    pthread_t thread;
    char sock[108];
    char dir[64];
} bench_srv;

static void *srv_main(void *arg)
{
    cn_d_server_run(((bench_srv *)arg)->srv);
    return NULL;
}

static int srv_start(bench_srv *b, cn_d_backend backend)
{
    cn_d_config cfg;
    cn_err err = {0};
    cn_d_config_init(&cfg);
    cfg.backend = backend;
    cfg.socket_path = b->sock;
    cfg.state_dir = b->dir;
    cfg.checkpoint_ns = 0;
    snprintf(b->sock, sizeof(b->sock), "%s/d.sock", b->dir);
    if (cn_d_server_new(&cfg, &b->srv, &err) < 0) {
        fprintf(stderr, "server: %s\n", err.msg);
        return -1;
    }
    return pthread_create(&b->thread, NULL, srv_main, b) ? -1 : 0;
}

static int connect_to(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        perror("connect");
        exit(1);
    }
    return fd;
}

/* When the last byte of the latest response arrived (before parsing it). */
static double g_received;

/* Sends one request line and reads the response line; returns it parsed (or NULL). */
static json_t *roundtrip(int fd, const char *req, size_t *resp_len)
{
    size_t n = strlen(req);
    if (send(fd, req, n, MSG_NOSIGNAL) != (ssize_t)n)
        return NULL;
    cn_buf in;
    cn_buf_init(&in, CN_PROTO_MAX_RESPONSE);
    char *line;
    size_t len;
    json_t *out = NULL;
    cn_err pe;
    while (cn_proto_next_line(&in, CN_PROTO_MAX_RESPONSE, &line, &len) == 0) {
        size_t room;
        char *p = cn_buf_space(&in, 1 << 20, &room);
        ssize_t r = p ? recv(fd, p, room, 0) : -1;
        if (r <= 0)
            goto out;
        cn_buf_commit(&in, (size_t)r);
    }
    *resp_len = len;
    g_received = bg_now();
    if (cn_proto_decode_response(line, len, &out, &pe) < 0)
        fprintf(stderr, "bad response (%zu bytes): %s\n", len, pe.msg);
out:
    cn_buf_free(&in);
    return out;
}

static void srv_stop(bench_srv *b)
{
    int fd = connect_to(b->sock);
    size_t len;
    json_decref(roundtrip(fd, "{\"cmd\":\"shutdown\"}\n", &len));
    close(fd);
    pthread_join(b->thread, NULL);
    cn_d_server_free(b->srv);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- tree ---------------------------------------------------------------------------- */

static int bench_tree(cn_d_backend backend)
{
    long nstacks = env_long("BENCH_STACKS", 100000), nsamples = env_long("BENCH_SAMPLES", 1000000);
    int reps = (int)env_long("BENCH_REPS", 21);
    bench_srv b = {0};
    snprintf(b.dir, sizeof(b.dir), "/tmp/bench_daemon.XXXXXX");
    if (!mkdtemp(b.dir))
        return 1;
    /* The session file: symbolized stacks, samples spread over 10 minutes, 2 threads. */
    cn_agg_profile *p = cn_agg_profile_new();
    int32_t th[2] = {cn_agg_thread(p, 100, 100, "main"), cn_agg_thread(p, 100, 101, "worker")};
    int32_t hot[2];
    long made = bg_fill_profile(p, nstacks, nsamples, th, 0, 600000, hot);
    if (made < 0)
        return 1;
    cn_agg_meta_set(p, "canopy.session.id", "s1");
    cn_agg_meta_set(p, "canopy.session.kind", "attach");
    cn_agg_meta_set(p, "canopy.session.state", "exited");
    cn_agg_meta_set(p, "event", "cpu-clock");
    char path[128];
    snprintf(path, sizeof(path), "%s/s1.canopy", b.dir);
    FILE *f = fopen(path, "w");
    if (!f || cn_agg_write_canopy(p, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "writing %s failed\n", path);
        return 1;
    }
    /* Two transforms on the hot path. */
    int32_t f1 = hot[1], f2 = hot[0];
    printf("session: %zu samples, %ld distinct stacks, %zu frames; transforms merge:fn%d, "
           "focus-func:fn%d\n",
           cn_agg_sample_count(p), made, cn_agg_frame_count(p), (int)f2, (int)f1);
    cn_agg_profile_free(p);

    const char *formats[] = {"text", "json"};
    int rc = 0;
    /* The same queries in process (cn_d_render: engine + writers, no socket), to split
     * the round trip into its parts. */
    cn_live_session *ls = NULL;
    cn_err lerr = {0};
    cn_agg_profile *lp = NULL;
    if (cn_fmt_import_file(path, &lp, &lerr) == 0 &&
        cn_live_session_load(lp, path, &ls, &lerr) == 0) {
        for (int k = 0; k < 2; k++) {
            char req[256];
            snprintf(req, sizeof(req),
                     "{\"format\":\"%s\",\"transforms\":[\"merge:fn%d\",\"focus-func:fn%d\"]}",
                     formats[k], (int)f2, (int)f1);
            json_t *jq = json_loads(req, 0, NULL);
            cn_fmt_spec q;
            cn_fmt_spec_init(&q);
            cn_fmt_spec_from_json(jq, &q, &lerr);
            double *t = calloc((size_t)reps, sizeof(*t));
            for (int i = 0; i < reps; i++) {
                cn_buf out;
                cn_buf_init(&out, 0);
                double t0 = bg_now();
                cn_d_render(ls, &q, &out, NULL, &lerr);
                t[i] = (bg_now() - t0) * 1e3;
                cn_buf_free(&out);
            }
            qsort(t, (size_t)reps, sizeof(*t), cmp_double);
            printf("in process (cn_d_render, %s): median %.1f ms\n", formats[k], t[reps / 2]);
            free(t);
            cn_fmt_spec_clear(&q);
            json_decref(jq);
        }
        cn_live_session_free(ls);
    }
    if (srv_start(&b, backend) < 0)
        return 1;
    int fd = connect_to(b.sock);
    for (int k = 0; k < 2; k++) {
        char req[256];
        snprintf(req, sizeof(req),
                 "{\"cmd\":\"tree\",\"session\":\"s1\",\"format\":\"%s\",\"transforms\":"
                 "[\"merge:fn%d\",\"focus-func:fn%d\"]}\n",
                 formats[k], (int)f2, (int)f1);
        double *t = calloc((size_t)reps, sizeof(*t)), *tr = calloc((size_t)reps, sizeof(*tr));
        size_t len = 0;
        for (int i = 0; i < reps; i++) {
            double t0 = bg_now();
            json_t *r = roundtrip(fd, req, &len);
            t[i] = (bg_now() - t0) * 1e3;
            tr[i] = (g_received - t0) * 1e3;
            if (!r || !json_is_true(json_object_get(r, "ok"))) {
                char *e = r ? json_dumps(r, 0) : NULL;
                fprintf(stderr, "tree request failed: %.300s\n", e ? e : "no response");
                free(e);
                rc = 1;
            }
            json_decref(r);
        }
        qsort(t, (size_t)reps, sizeof(*t), cmp_double);
        qsort(tr, (size_t)reps, sizeof(*tr), cmp_double);
        printf("tree round trip (%s, 2 transforms, %s): median %.1f ms (response received "
               "after %.1f ms, the rest is parsing it), min %.1f ms, max %.1f ms, response %zu "
               "bytes\n",
               backend == CN_D_LOOP_EPOLL ? "epoll" : "io_uring", formats[k], t[reps / 2],
               tr[reps / 2], t[0], t[reps - 1], len);
        free(t);
        free(tr);
    }
    close(fd);
    /* What `canopy tree SESSION` does: the client library asks for a raw payload and
     * writes it out unparsed. The payload must be the bytes the embedded reply carries. */
    cn_cli_conn *cc = NULL;
    if (cn_cli_connect(b.sock, &cc, NULL, 0) < 0) {
        fprintf(stderr, "client connect failed\n");
        rc = 1;
    }
    for (int k = 0; cc && k < 2; k++) {
        char req[256];
        snprintf(req, sizeof(req),
                 "{\"cmd\":\"tree\",\"session\":\"s1\",\"format\":\"%s\",\"transforms\":"
                 "[\"merge:fn%d\",\"focus-func:fn%d\"]}",
                 formats[k], (int)f2, (int)f1);
        json_t *jr = json_loads(req, 0, NULL);
        double *t = calloc((size_t)reps, sizeof(*t));
        for (int i = 0; i < reps; i++) {
            double t0 = bg_now();
            int st = cn_cli_request_emit("tree", cc, jr, "tree", "/dev/null");
            t[i] = (bg_now() - t0) * 1e3;
            if (st != 0)
                rc = 1;
        }
        /* Check once: raw payload == the default reply's content. */
        json_t *resp = NULL, *plain = NULL;
        cn_err msg = {0};
        char *raw = NULL;
        size_t raw_len = 0;
        bool same = false;
        if (cn_cli_call_raw(cc, jr, &resp, &raw, &raw_len, &msg) == 0 && raw &&
            cn_cli_call(cc, jr, &plain, &msg) == 0) {
            const json_t *o = json_object_get(plain, "output");
            if (o)
                same =
                    json_string_length(o) == raw_len && !memcmp(json_string_value(o), raw, raw_len);
            else {
                json_t *tr = json_loadb(raw, raw_len, 0, NULL);
                same = tr && json_equal(tr, json_object_get(plain, "tree"));
                json_decref(tr);
            }
        }
        if (!same) {
            fprintf(stderr, "raw payload differs from the embedded reply (%s)\n", formats[k]);
            rc = 1;
        }
        qsort(t, (size_t)reps, sizeof(*t), cmp_double);
        printf("canopy tree round trip (%s, raw payload, %s): median %.1f ms, min %.1f ms, max "
               "%.1f ms, payload %zu bytes, same as embedded: %s\n",
               backend == CN_D_LOOP_EPOLL ? "epoll" : "io_uring", formats[k], t[reps / 2], t[0],
               t[reps - 1], raw_len, same ? "yes" : "NO");
        free(raw);
        json_decref(resp);
        json_decref(plain);
        json_decref(jr);
        free(t);
    }
    cn_cli_conn_free(cc);
    srv_stop(&b);
    if (getenv("BENCH_KEEP") && *getenv("BENCH_KEEP")) {
        printf("session file kept: %s\n", path);
        return rc;
    }
    unlink(path);
    rmdir(b.dir);
    return rc;
}

/* ---- cpu ----------------------------------------------------------------------------- */

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bench_cpu(const char *workload)
{
    long secs = env_long("BENCH_SECONDS", 5);
    bench_srv b = {0};
    snprintf(b.dir, sizeof(b.dir), "/tmp/bench_daemon.XXXXXX");
    if (!mkdtemp(b.dir) || srv_start(&b, CN_D_LOOP_AUTO) < 0)
        return 1;
    char arg[32];
    snprintf(arg, sizeof(arg), "%ld", secs + 1);
    pid_t pid = fork();
    if (pid == 0) {
        execl(workload, workload, arg, "0", (char *)NULL);
        _exit(127);
    }
    usleep(100000);
    int fd = connect_to(b.sock);
    char req[256];
    size_t len;
    snprintf(req, sizeof(req), "{\"cmd\":\"attach\",\"pid\":%d,\"freq\":999,\"unwind\":\"fp\"}\n",
             (int)pid);
    double c0 = cpu_seconds(), w0 = bg_now();
    json_t *r = roundtrip(fd, req, &len);
    if (!r || !json_is_true(json_object_get(r, "ok"))) {
        fprintf(stderr, "attach failed (is %s built?)\n", workload);
        return 1;
    }
    json_decref(r);
    /* Steady state: from 1 s after attach (start-up costs such as reading the maps and
     * loading symbols are one-time) to the end. */
    sleep(1);
    r = roundtrip(fd, "{\"cmd\":\"sessions\"}\n", &len);
    long samples0 = (long)json_integer_value(
        json_object_get(json_array_get(json_object_get(r, "sessions"), 0), "samples"));
    json_decref(r);
    double c_start = cpu_seconds(), w_start = bg_now();
    double all0 = c0;
    c0 = c_start;
    sleep((unsigned)(secs > 1 ? secs - 1 : 1));
    r = roundtrip(fd, "{\"cmd\":\"sessions\"}\n", &len);
    double c1 = cpu_seconds(), w1 = bg_now();
    json_t *s = json_array_get(json_object_get(r, "sessions"), 0);
    long samples = (long)json_integer_value(json_object_get(s, "samples")) - samples0;
    long lost = (long)json_integer_value(json_object_get(s, "lost"));
    json_decref(r);
    r = roundtrip(fd, "{\"cmd\":\"stop\",\"session\":\"s1\"}\n", &len);
    s = json_object_get(r, "session");
    long total = (long)json_integer_value(json_object_get(s, "samples"));
    double call = cpu_seconds();
    printf("whole session including attach and the final save: %ld samples, %.3f s CPU = %.2f "
           "us per sample\n",
           total, call - all0, total ? (call - all0) * 1e6 / (double)total : 0);
    json_decref(r);
    w0 = w_start;
    close(fd);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    printf("steady state, fp mode, 999 Hz, 2 busy threads, %.1f s: %ld samples (%ld lost), daemon "
           "CPU %.3f s "
           "= %.2f us per sample, %.2f%% of a core per 1000 samples/s\n",
           w1 - w0, samples, lost, c1 - c0, samples ? (c1 - c0) * 1e6 / (double)samples : 0,
           samples ? (c1 - c0) / (double)samples * 1000 * 100 : 0);
    srv_stop(&b);
    char path[128];
    snprintf(path, sizeof(path), "%s/s1.canopy", b.dir);
    unlink(path);
    rmdir(b.dir);
    return samples > 0 ? 0 : 1;
}

/* ---- memory -------------------------------------------------------------------------- */

static int bench_memory(void)
{
    long hz = 99, threads = 8, secs = env_long("BENCH_SECONDS", 3600);
    long distinct = env_long("BENCH_STACKS", 20000);
    int64_t retention = 600LL * 1000000000;
    static bg_graph g;
    bg_graph_init(&g, 7);
    size_t rss0 = rss_bytes();
    cn_agg_profile *p = cn_agg_profile_new();
    int32_t res[BG_NLIB];
    for (int i = 0; i < BG_NLIB; i++) {
        char name[32];
        snprintf(name, sizeof(name), "lib%d.so", i);
        res[i] = cn_agg_resource(p, name, NULL, NULL, CN_AGG_RES_LIBRARY);
    }
    /* The stack population: `distinct` native walks, replayed with a skew. */
    cn_agg_frame_ref(*pop)[BG_MAXDEPTH] = malloc((size_t)distinct * sizeof(*pop));
    size_t *depth = malloc((size_t)distinct * sizeof(*depth));
    for (long i = 0; i < distinct; i++)
        depth[i] = bg_walk(&g, res, 10, 40, pop[i]);
    int32_t th[8];
    for (int t = 0; t < threads; t++)
        th[t] = cn_agg_thread(p, 100, 100 + t, "busy");
    double t0 = bg_now();
    long n = 0;
    for (long s = 0; s < secs; s++) {
        for (long k = 0; k < hz * threads; k++, n++) {
            double u = (double)(bg_rand(&g) % 1000000) / 1e6;
            long i = (long)((double)distinct * u * u);
            int32_t st = cn_agg_stack_from_refs(p, pop[i], depth[i]);
            int64_t t = s * 1000000000LL + k * (1000000000LL / (hz * threads));
            if (st < 0 || cn_agg_add_sample(p, st, t, 1.0, th[k % threads]) < 0)
                return 1;
        }
        int64_t now = (s + 1) * 1000000000LL;
        if (now > retention)
            cn_agg_fold_before(p, now - retention);
    }
    double dt = bg_now() - t0;
    free(pop);
    free(depth);
    size_t rss = rss_bytes();
    printf("simulated %ld s at %ld Hz x %ld threads: %ld samples in %.1f s (%.2f us/sample "
           "ingest), %zu raw samples held, %zu stacks, profile %.1f MB, RSS %.1f MB (%.1f MB "
           "before)\n",
           secs, hz, threads, n, dt, dt * 1e6 / (double)n, cn_agg_sample_count(p),
           cn_agg_stack_count(p), (double)cn_agg_profile_memory(p) / 1048576.0,
           (double)rss / 1048576.0, (double)rss0 / 1048576.0);
    cn_agg_profile_free(p);
    return 0;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    int rc = 0;
    char wl[4096];
    if (argc > 2) {
        snprintf(wl, sizeof(wl), "%s", argv[2]);
    } else {
        ssize_t n = readlink("/proc/self/exe", wl, sizeof(wl) - 64);
        wl[n > 0 ? n : 0] = '\0';
        char *slash = strrchr(wl, '/');
        snprintf(slash ? slash : wl, 64, "/../tests/workloads/wl_threads_fp");
    }
    if (!strcmp(what, "tree") || !strcmp(what, "all")) {
        rc |= bench_tree(CN_D_LOOP_IO_URING);
        rc |= bench_tree(CN_D_LOOP_EPOLL);
    }
    if (!strcmp(what, "cpu") || !strcmp(what, "all"))
        rc |= bench_cpu(wl);
    if (!strcmp(what, "memory") || !strcmp(what, "all"))
        rc |= bench_memory();
    return rc;
}
