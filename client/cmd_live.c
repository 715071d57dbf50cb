/* cmd_live.c — the sampling commands: `canopy run`, `tree`, `top`, `attach`, `system`.
 *
 * Each talks to canopyd when one answers (daemon_client.c) and, where docs/cli.md allows
 * it (run, tree --pid, top --pid), hosts the engine in-process otherwise (inproc.c),
 * saying so in one line on stderr. Rendering reuses the offline CLI's code: in-process
 * profiles go through cn_cli_render() exactly like `canopy open`; the daemon renders with
 * the same writers and the client prints its bytes.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "cn_common.h"
#include "live.h"

#define TEMP_DURATION_NS 5000000000LL
#define SYMBOLS_WAIT_MS  30000 /* at most, the end of a run waits for symbols */
#define DAEMON_SETTLE_MS 10000 /* how long a client waits for a session to stop sampling */
#define DAEMON_STALL_MS  30000 /* how long it waits for symbols without any progress */

/* Is path an existing regular file (then it wins over a session name)? */
static bool is_file(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Status of a waited-for child as a shell reports it. */
static int child_status(int ws)
{
    if (WIFEXITED(ws))
        return WEXITSTATUS(ws);
    if (WIFSIGNALED(ws))
        return 128 + WTERMSIG(ws);
    return CN_EXIT_FAIL;
}

static int64_t jint(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : 0;
}

/* symbols.pending of a `sessions` entry: frames waiting for the symbolizer. */
static int64_t sym_pending(const json_t *s)
{
    return jint(json_object_get(s, "symbols"), "pending");
}

/* Waits until the daemon's session id is no longer running (stopping it after 2 s if
 * stop_if_running), then until the symbolizer has answered every frame it waits on
 * (symbols.pending reaches 0, docs/cli-live.md "Session counters"): a loaded machine or a
 * cold cache (a large debug file) can take seconds, so the wait is bounded by the lack of
 * progress — DAEMON_STALL_MS without pending shrinking — not by a fixed time. */
static void daemon_settle(cn_cli_conn *c, const char *id, bool stop_if_running)
{
    int64_t start = cn_common_now_ns(), progress = start;
    int64_t last_pending = -1;
    bool stopped = false;
    for (;;) {
        json_t *s = cn_cli_session_entry(c, id);
        if (!s)
            return;
        const char *state = json_string_value(json_object_get(s, "state"));
        bool running = state && !strcmp(state, "running");
        int64_t pending = sym_pending(s), now = cn_common_now_ns();
        json_decref(s);
        if (running) {
            if (now - start > DAEMON_SETTLE_MS * 1000000LL)
                return; /* still sampling: print what is there */
            if (stop_if_running && !stopped && now - start > 2000 * 1000000LL) {
                json_t *req = cn_proto_request("stop"), *resp = NULL;
                cn_err err = {0};
                if (req && !json_object_set_new(req, "session", json_string(id)))
                    cn_cli_call(c, req, &resp, &err);
                json_decref(resp);
                json_decref(req);
                stopped = true;
            }
            progress = now;
        } else if (pending <= 0) {
            return;
        } else if (last_pending < 0 || pending < last_pending) {
            last_pending = pending;
            progress = now;
        } else if (now - progress > DAEMON_STALL_MS * 1000000LL) {
            return; /* what is not resolved stays LIB+0xOFFSET */
        }
        usleep(running ? 100000 : 20000);
    }
}

/* Asks the daemon for session id's tree with the user's query and prints it. */
static int daemon_tree(cn_cli_conn *c, const char *cmd, const char *id, int pid,
                       const cn_cli_query *q)
{
    json_t *req = cn_proto_request("tree");
    int status = CN_EXIT_FAIL;
    if (req && (id ? json_object_set_new(req, "session", json_string(id))
                   : json_object_set_new(req, "pid", json_integer(pid))))
        goto out;
    if (req && cn_fmt_spec_to_json(&q->spec, req) < 0)
        goto out;
    status = cn_cli_request_emit(cmd, c, req, "tree", q->output);
out:
    json_decref(req);
    return status;
}

/* Starts a daemon session (cmd attach/run/system) on pid (0: system) with the spec smp and
 * returns its id (malloc'ed) in *id. */
static int daemon_start(cn_cli_conn *c, const char *cmd, const char *proto_cmd, int pid,
                        cn_live_session_opts *smp, char **id)
{
    json_t *req = cn_proto_request(proto_cmd), *resp = NULL;
    int status = CN_EXIT_FAIL;
    smp->pid = pid;
    if (!req || cn_live_session_opts_to_json(smp, req) < 0) {
        fprintf(stderr, "canopy %s: out of memory\n", cmd);
        goto out;
    }
    status = cn_cli_request(cmd, c, req, &resp);
    if (status)
        goto out;
    const char *sid = json_string_value(json_object_get(json_object_get(resp, "session"), "id"));
    if (!sid || !(*id = strdup(sid))) {
        fprintf(stderr, "canopy %s: the daemon's answer has no session id\n", cmd);
        status = CN_EXIT_FAIL;
    }
out:
    json_decref(resp);
    json_decref(req);
    return status;
}

static void daemon_rm(cn_cli_conn *c, const char *id)
{
    json_t *req = cn_proto_request("rm"), *resp = NULL;
    cn_err err = {0};
    if (req && !json_object_set_new(req, "session", json_string(id)))
        cn_cli_call(c, req, &resp, &err);
    json_decref(resp);
    json_decref(req);
}

/* Renders an in-process session's profile like `canopy open` does, with the live fields. */
static int local_render(cn_cli_local *l, cn_cli_query *q, const char *title)
{
    cn_live_session *s = cn_cli_local_session(l);
    cn_fmt_render_opts o;

    cn_live_session_render_opts(s, title, &o);
    return cn_cli_render(cn_live_session_profile(s), q, &o);
}

/* ---------------------------------------------------------------------------------------
 * canopy run
 */

static void run_help(void)
{
    cn_cli_help("run");
}

typedef struct run_ctx {
    cn_cli_live_args *a;
    cn_smp_child child;
    bool child_live;
    int child_ws;
    bool child_done;
    cn_cli_progress pr;
} run_ctx;

static void run_reap(run_ctx *r)
{
    if (r->child_done)
        return;
    pid_t w = waitpid(r->child.pid, &r->child_ws, WNOHANG);
    if (w == r->child.pid) {
        r->child_done = true;
    } else if (w < 0 && errno == ECHILD) {
        /* Someone else reaped it: its status is lost. */
        r->child_done = true;
        r->child_ws = 0;
    }
}

static int run_in_process(run_ctx *r)
{
    cn_cli_live_args *a = r->a;
    cn_cli_local *l = NULL;
    cn_err err = {0};
    int status;

    cn_cli_say_in_process(a->cmd, a);
    a->smp.kind = CN_LIVE_RUN;
    a->smp.pid = r->child.pid;
    if (cn_cli_local_start(&a->smp, &l, &err) < 0) {
        fprintf(stderr, "canopy run: %s\n", CN_TERM_STR(err.msg));
        cn_smp_child_abort(&r->child);
        return CN_EXIT_FAIL;
    }
    cn_smp_child_release(&r->child);
    while (!r->child_done) {
        if (cn_cli_local_pump(l, 100, &err) < 0) {
            cn_cli_progress_end(&r->pr);
            fprintf(stderr, "canopy run: %s (the command keeps running)\n", CN_TERM_STR(err.msg));
            while (!r->child_done && waitpid(r->child.pid, &r->child_ws, 0) == r->child.pid)
                r->child_done = true;
            cn_cli_local_free(l);
            return CN_EXIT_FAIL;
        }
        cn_live_session_info info;
        cn_live_session_info_get(cn_cli_local_session(l), &info);
        cn_cli_progress_update(&r->pr, (int64_t)info.samples, (int64_t)info.lost, false);
        run_reap(r);
    }
    cn_cli_local_pump(l, 0, &err);
    cn_cli_progress_end(&r->pr);
    if (cn_cli_local_finish(l, SYMBOLS_WAIT_MS, &err) < 0)
        fprintf(stderr, "canopy run: %s\n", CN_TERM_STR(err.msg));
    char title[256];
    snprintf(title, sizeof(title), "run: %s", a->cmd_argv[0]);
    status = local_render(l, &a->q, title);
    cn_cli_local_free(l);
    return status;
}

static int run_with_daemon(run_ctx *r, cn_cli_conn *c)
{
    cn_cli_live_args *a = r->a;
    char *id = NULL;
    int status = daemon_start(c, a->cmd, "run", r->child.pid, &a->smp, &id);
    if (status) {
        cn_smp_child_abort(&r->child);
        return status;
    }
    cn_smp_child_release(&r->child);
    int64_t last = 0;
    while (!r->child_done) {
        usleep(50000);
        run_reap(r);
        if (r->pr.enabled && cn_common_now_ns() - last > 250000000) {
            json_t *s = cn_cli_session_entry(c, id);
            if (s)
                cn_cli_progress_update(&r->pr, jint(s, "samples"), jint(s, "lost"), false);
            json_decref(s);
            last = cn_common_now_ns();
        }
    }
    cn_cli_progress_end(&r->pr);
    daemon_settle(c, id, true);
    status = daemon_tree(c, a->cmd, id, 0, &a->q);
    if (a->rm)
        daemon_rm(c, id);
    else if (status == 0)
        fprintf(stderr, "canopy run: session %s stays in canopyd (canopy rm %s, or run --rm)\n", id,
                id);
    free(id);
    return status;
}

int cn_cmd_run(int argc, char **argv)
{
    cn_cli_live_args a;
    cn_cli_conn *c = NULL;
    run_ctx r;
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_quit;
    int status;

    memset(&r, 0, sizeof(r));
    cn_cli_live_args_init(&a, "run");
    status = cn_cli_live_parse(&a, argc, argv,
                               CN_LIVE_SAMPLING | CN_LIVE_NAME | CN_LIVE_QUERY | CN_LIVE_COMMAND,
                               run_help);
    if (status >= 0)
        goto out;
    if (!a.cmd_argc) {
        fprintf(stderr, "canopy run: missing command (canopy run [OPTIONS] -- CMD ARGS)\n");
        status = CN_EXIT_USAGE;
        goto out;
    }
    if (a.n_pos) {
        fprintf(stderr, "canopy run: unexpected argument '%s'\n", a.pos[0]);
        status = CN_EXIT_USAGE;
        goto out;
    }
    status = cn_cli_live_connect(&a, false, &c);
    if (status)
        goto out;
    r.a = &a;
    int rc = cn_smp_spawn(a.cmd_argv, (uid_t)-1, (gid_t)-1, &r.child);
    if (rc < 0) {
        fprintf(stderr, "canopy run: cannot start %s: %s\n", a.cmd_argv[0], strerror(-rc));
        status = CN_EXIT_FAIL;
        goto out;
    }
    /* Like time(1): the terminal's ^C and ^\ are for the command; canopy stays to print
     * the tree after it. */
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    cn_cli_progress_init(&r.pr);
    status = c ? run_with_daemon(&r, c) : run_in_process(&r);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    /* canopy's own failure after the command ran wins (nothing was printed); otherwise the
     * command's status. */
    if (status == 0 && r.child_done)
        status = child_status(r.child_ws);
out:
    cn_cli_conn_free(c);
    cn_cli_live_args_clear(&a);
    return status;
}

/* ---------------------------------------------------------------------------------------
 * canopy attach / system
 */

static void attach_help(void)
{
    cn_cli_help("attach");
}

static void system_help(void)
{
    cn_cli_help("system");
}

const cn_opt cn_cli_attach_opts[] = {
    {"--container", NULL, "ID", NULL,
     "instead of PID: the cgroup of the container whose id starts with ID (found in "
     "/proc/*/cgroup), as system --cgroup samples it",
     0, 0},
    {NULL, NULL, NULL, NULL, NULL, 0, 0},
};

const cn_opt cn_cli_system_opts[] = {
    {"--cgroup", NULL, "PATH", "every task",
     "only the tasks of this cgroup v2 directory and its descendants, also those that join "
     "later (perf's cgroup mode); a directory under the cgroup v2 mount or a path as "
     "/proc/PID/cgroup shows it",
     0, 0},
    {NULL, NULL, NULL, NULL, NULL, 0, 0},
};

/* Takes "--cgroup PATH" (system) and "--container ID" (attach) out of argv (compacted in
 * place) into *val. 1 when one was taken, 0 when none, -1 after a usage message. */
static int take_target_opt(int *argc, char **argv, const char *cmd, const char **val)
{
    const char *opt = (!strcmp(cmd, "system") ? cn_cli_system_opts : cn_cli_attach_opts)[0].lng;
    size_t n = strlen(opt);
    int out = 0, found = 0;
    for (int i = 0; i < *argc; i++) {
        const char *a = argv[i];
        if (i > 0 && !strcmp(a, "--")) {
            while (i < *argc)
                argv[out++] = argv[i++];
            break;
        }
        if (i > 0 && !strncmp(a, opt, n) && (a[n] == '\0' || a[n] == '=')) {
            if (found++ || (a[n] == '\0' && i + 1 >= *argc)) {
                fprintf(stderr, "canopy %s: %s %s\n", cmd, opt,
                        found > 1 ? "given twice" : "needs a value");
                return -1;
            }
            *val = a[n] == '=' ? a + n + 1 : argv[++i];
            continue;
        }
        argv[out++] = argv[i];
    }
    *argc = out;
    return found ? 1 : 0;
}

/* The directory a --cgroup or --container names: dir (PATH_MAX) under the cgroup v2
 * mount. 0, or CN_EXIT_USAGE/CN_EXIT_FAIL after a message. */
static int cgroup_dir(const char *cmd, const char *cgroup, const char *container, char *dir)
{
    char v2[1024], cg[CN_CGROUP_PATH_MAX], id[65];
    if (cn_cgroup_v2_root(v2, sizeof(v2)) < 0) {
        fprintf(stderr, "canopy %s: no cgroup v2 hierarchy is mounted\n", cmd);
        return CN_EXIT_FAIL;
    }
    if (container) {
        int r = cn_cgroup_find_container(container, cg, sizeof(cg), id);
        if (r < 0) {
            fprintf(stderr, "canopy %s: container '%s': %s\n", cmd, container,
                    r == -EINVAL   ? "expected hexadecimal digits of a container id"
                    : r == -EEXIST ? "the prefix names more than one container"
                    : r == -ENOENT ? "no process runs in such a container"
                                   : strerror(-r));
            return r == -EINVAL ? CN_EXIT_USAGE : CN_EXIT_FAIL;
        }
        cgroup = cg;
    }
    size_t n = strlen(v2);
    char joined[PATH_MAX + 1024];
    if (!strncmp(cgroup, v2, n) && (cgroup[n] == '/' || cgroup[n] == '\0'))
        snprintf(joined, sizeof(joined), "%s", cgroup);
    else
        snprintf(joined, sizeof(joined), "%s/%s", v2, cgroup + (cgroup[0] == '/'));
    if (!realpath(joined, dir)) {
        fprintf(stderr, "canopy %s: cgroup %s: %s\n", cmd, joined, strerror(errno));
        return CN_EXIT_FAIL;
    }
    if (container)
        fprintf(stderr, "canopy %s: container %.12s: cgroup %s\n", cmd, id, dir);
    return 0;
}

static int start_session(int argc, char **argv, const char *cmd, void (*help)(void))
{
    cn_cli_live_args a;
    cn_cli_conn *c = NULL;
    char *id = NULL, dir[PATH_MAX];
    const char *target = NULL, *proto = cmd;
    int pid = 0, status;

    cn_cli_live_args_init(&a, cmd);
    a.smp.freq = CN_LIVE_FREQ_DEFAULT; /* meant to stay on */
    a.smp.kind = !strcmp(cmd, "system") ? CN_LIVE_SYSTEM : CN_LIVE_ATTACH;
    int took = take_target_opt(&argc, argv, cmd, &target);
    status = took < 0 ? CN_EXIT_USAGE
                      : cn_cli_live_parse(&a, argc, argv, CN_LIVE_SAMPLING | CN_LIVE_NAME, help);
    if (status >= 0)
        goto out;
    status = CN_EXIT_USAGE;
    if (took) {
        if (a.n_pos) {
            fprintf(stderr, "canopy %s: unexpected argument '%s'\n", cmd, a.pos[0]);
            goto out;
        }
        bool sys = !strcmp(cmd, "system");
        if ((status = cgroup_dir(cmd, sys ? target : NULL, sys ? NULL : target, dir)) != 0)
            goto out;
        a.smp.kind = CN_LIVE_SYSTEM;
        a.smp.cgroup = dir;
        proto = "system";
    } else if (!strcmp(cmd, "attach")) {
        char *end;
        long v = a.n_pos == 1 ? strtol(a.pos[0], &end, 10) : 0;
        if (a.n_pos != 1 || *end || v <= 0 || v > 4194304) {
            fprintf(stderr, "canopy attach: expected one PID (canopy attach PID)\n");
            goto out;
        }
        pid = (int)v;
    } else if (a.n_pos) {
        fprintf(stderr, "canopy system: unexpected argument '%s'\n", a.pos[0]);
        goto out;
    }
    if (a.no_daemon) {
        fprintf(stderr,
                "canopy %s: a session lives in canopyd; --no-daemon does not apply "
                "(use canopy tree --pid or top --pid)\n",
                cmd);
        goto out;
    }
    status = cn_cli_live_connect(&a, true, &c);
    if (status)
        goto out;
    status = daemon_start(c, cmd, proto, pid, &a.smp, &id);
    if (status == 0)
        printf("%s\n", id);
out:
    free(id);
    cn_cli_conn_free(c);
    cn_cli_live_args_clear(&a);
    return status;
}

int cn_cmd_attach(int argc, char **argv)
{
    return start_session(argc, argv, "attach", attach_help);
}

int cn_cmd_system(int argc, char **argv)
{
    return start_session(argc, argv, "system", system_help);
}

/* ---------------------------------------------------------------------------------------
 * canopy tree
 */

static void tree_help(void)
{
    cn_cli_help("tree");
}

/* Does canopyd hold a session for pid? 1 yes, 0 no, or minus an exit status (printed). */
static int daemon_has_pid(cn_cli_conn *c, const char *cmd, int pid)
{
    json_t *req = cn_proto_request("sessions"), *resp = NULL;
    cn_err err = {0};
    int found = 0;
    if (!req || cn_cli_call(c, req, &resp, &err) < 0) {
        fprintf(stderr, "canopy %s: %s\n", cmd,
                CN_TERM_STR(err.msg[0] ? err.msg : "out of memory"));
        found = -CN_EXIT_FAIL;
    } else if (!json_is_true(json_object_get(resp, "ok"))) {
        found = -cn_cli_resp_status(cmd, resp);
    } else {
        size_t i;
        json_t *s;
        json_array_foreach(json_object_get(resp, "sessions"), i, s)
        {
            if (jint(json_object_get(s, "target"), "pid") == pid)
                found = 1;
        }
    }
    json_decref(resp);
    json_decref(req);
    return found;
}

/* Samples pid in-process for the duration, then renders. */
static int tree_in_process(cn_cli_live_args *a)
{
    cn_cli_local *l = NULL;
    cn_cli_progress pr;
    cn_err err = {0};
    int status = CN_EXIT_FAIL;

    if (!a->smp.duration_ns)
        a->smp.duration_ns = TEMP_DURATION_NS;
    cn_cli_say_in_process(a->cmd, a);
    a->smp.pid = a->pid;
    if (cn_cli_local_start(&a->smp, &l, &err) < 0) {
        fprintf(stderr, "canopy tree: %s\n", CN_TERM_STR(err.msg));
        return CN_EXIT_FAIL;
    }
    cn_cli_progress_init(&pr);
    for (;;) {
        if (cn_cli_local_pump(l, 100, &err) < 0) {
            cn_cli_progress_end(&pr);
            fprintf(stderr, "canopy tree: %s\n", CN_TERM_STR(err.msg));
            goto out;
        }
        cn_live_session_info info;
        cn_live_session_info_get(cn_cli_local_session(l), &info);
        cn_cli_progress_update(&pr, (int64_t)info.samples, (int64_t)info.lost, false);
        if (info.state != CN_LIVE_RUNNING)
            break;
    }
    cn_cli_progress_end(&pr);
    if (cn_cli_local_finish(l, SYMBOLS_WAIT_MS, &err) < 0)
        fprintf(stderr, "canopy tree: %s\n", CN_TERM_STR(err.msg));
    char title[64];
    snprintf(title, sizeof(title), "pid %d", a->pid);
    status = local_render(l, &a->q, title);
out:
    cn_cli_local_free(l);
    return status;
}

/* A temporary daemon session on pid for the duration, printed, then removed. */
static int tree_temp_daemon(cn_cli_live_args *a, cn_cli_conn *c)
{
    char *id = NULL;
    cn_cli_progress pr;
    if (!a->smp.duration_ns)
        a->smp.duration_ns = TEMP_DURATION_NS;
    int status = daemon_start(c, a->cmd, "attach", a->pid, &a->smp, &id);
    if (status)
        return status;
    cn_cli_progress_init(&pr);
    int64_t end = cn_common_now_ns() + a->smp.duration_ns;
    for (;;) {
        json_t *s = cn_cli_session_entry(c, id);
        const char *state = s ? json_string_value(json_object_get(s, "state")) : NULL;
        bool running = state && !strcmp(state, "running");
        if (s)
            cn_cli_progress_update(&pr, jint(s, "samples"), jint(s, "lost"), false);
        json_decref(s);
        if (!running || cn_common_now_ns() > end + 5000000000LL)
            break;
        usleep(100000);
    }
    cn_cli_progress_end(&pr);
    daemon_settle(c, id, true);
    status = daemon_tree(c, a->cmd, id, 0, &a->q);
    daemon_rm(c, id);
    free(id);
    return status;
}

int cn_cmd_tree(int argc, char **argv)
{
    cn_cli_live_args a;
    cn_cli_conn *c = NULL;
    cn_agg_profile *p = NULL;
    int status;

    cn_cli_live_args_init(&a, "tree");
    status = cn_cli_live_parse(&a, argc, argv, CN_LIVE_SAMPLING | CN_LIVE_QUERY | CN_LIVE_PID,
                               tree_help);
    if (status >= 0)
        goto out;
    status = CN_EXIT_USAGE;
    if ((a.pid > 0) == (a.n_pos == 1) || a.n_pos > 1) {
        fprintf(stderr, "canopy tree: expected SESSION or --pid PID (see canopy tree --help)\n");
        goto out;
    }
    if (a.n_pos == 1 && is_file(a.pos[0])) {
        cn_err err = {0};
        int rc = cn_fmt_import_file(a.pos[0], &p, &err);
        if (rc < 0) {
            fprintf(stderr, "canopy tree: %s\n", CN_TERM_STR(err.msg[0] ? err.msg : strerror(-rc)));
            status = rc == -ENOMEM ? CN_EXIT_FAIL : CN_EXIT_USAGE;
            goto out;
        }
        cn_fmt_render_opts o;
        cn_fmt_render_opts_init(&o);
        o.title = a.pos[0];
        status = cn_cli_render(p, &a.q, &o);
        goto out;
    }
    status = cn_cli_live_connect(&a, a.pid < 0, &c);
    if (status)
        goto out;
    if (!c) {
        status = tree_in_process(&a);
        goto out;
    }
    if (a.pid < 0) {
        status = daemon_tree(c, a.cmd, a.pos[0], 0, &a.q);
        goto out;
    }
    int has = daemon_has_pid(c, a.cmd, a.pid);
    if (has < 0)
        status = -has;
    else if (has)
        status = daemon_tree(c, a.cmd, NULL, a.pid, &a.q);
    else
        status = tree_temp_daemon(&a, c);
out:
    cn_agg_profile_free(p);
    cn_cli_conn_free(c);
    cn_cli_live_args_clear(&a);
    return status;
}

/* ---------------------------------------------------------------------------------------
 * canopy top
 */

static void top_help(void)
{
    cn_cli_help("top");
}

/* The in-process source: the profile source plus pumping. */
typedef struct local_top {
    cn_cli_local *l;
    cn_top_profile_source ps;
} local_top;

static int local_top_fetch(void *ctx, const cn_top_request *req, cn_top_snapshot *out, cn_err *err)
{
    local_top *t = ctx;
    cn_live_state state = cn_live_session_state(cn_cli_local_session(t->l));
    int rc = cn_top_profile_fetch(&t->ps, req, out, err);
    if (rc == 0 && state != CN_LIVE_RUNNING)
        snprintf(out->note, sizeof(out->note), "[%s]", cn_live_state_name(state));
    return rc;
}

static int local_top_pump(void *ctx, cn_err *err)
{
    local_top *t = ctx;
    return cn_cli_local_pump(t->l, 0, err);
}

/* The daemon source: two `tree` queries per refresh (the tree and the function list). */
typedef struct daemon_top {
    cn_cli_conn *c;
    const char *session; /* or NULL with pid */
    int pid;
} daemon_top;

static json_t *daemon_top_query(daemon_top *t, const cn_top_request *req, cn_agg_view view,
                                cn_err *err)
{
    json_t *r = cn_proto_request("tree"), *resp = NULL, *tree = NULL;
    cn_fmt_spec spec; /* borrows req's transforms through spec.query */
    char last[32];
    int rc = !r;

    cn_fmt_spec_init(&spec);
    spec.query.transforms = req->transforms;
    spec.query.n_transforms = req->n_transforms;
    spec.query.view = view;
    if (view != CN_AGG_VIEW_FUNCTIONS)
        spec.query.group_by = req->group_by;
    spec.format = CN_FMT_JSON;
    if (req->window_ns > 0) {
        snprintf(last, sizeof(last), "%lldms", (long long)(req->window_ns / 1000000));
        rc |= cn_fmt_spec_set_last(&spec, last) < 0;
    }
    if (!rc) {
        rc |= t->session ? json_object_set_new(r, "session", json_string(t->session))
                         : json_object_set_new(r, "pid", json_integer(t->pid));
        rc |= cn_fmt_spec_to_json(&spec, r) < 0;
    }
    if (rc) {
        cn_err_set(err, 0, "out of memory");
    } else if (cn_cli_call(t->c, r, &resp, err) == 0) {
        if (json_is_true(json_object_get(resp, "ok"))) {
            tree = json_incref(json_object_get(resp, "tree"));
            if (!tree)
                cn_err_set(err, 0, "the daemon's answer has no tree");
        } else {
            const char *m =
                json_string_value(json_object_get(json_object_get(resp, "error"), "message"));
            cn_err_set(err, 0, "%s", m ? m : "the daemon refused the query");
        }
    }
    json_decref(resp);
    json_decref(r);
    cn_fmt_spec_clear(&spec);
    return tree;
}

static int daemon_top_fetch(void *ctx, const cn_top_request *req, cn_top_snapshot *out, cn_err *err)
{
    daemon_top *t = ctx;
    json_t *tree =
        daemon_top_query(t, req, req->inverted ? CN_AGG_VIEW_INVERTED : CN_AGG_VIEW_TREE, err);
    if (!tree)
        return -EIO;
    json_t *funcs = daemon_top_query(t, req, CN_AGG_VIEW_FUNCTIONS, err);
    int rc = funcs ? cn_top_snapshot_from_json(out, tree, funcs, err) : -EIO;
    json_decref(funcs);
    json_decref(tree);
    return rc;
}

static int top_file(const char *path)
{
    cn_agg_profile *p = NULL;
    cn_err err = {0};
    int rc = cn_fmt_import_file(path, &p, &err);
    if (rc < 0) {
        fprintf(stderr, "canopy top: %s\n", CN_TERM_STR(err.msg[0] ? err.msg : strerror(-rc)));
        return rc == -ENOMEM ? CN_EXIT_FAIL : CN_EXIT_USAGE;
    }
    cn_top_profile_source ps = {.profile = p};
    cn_top_source src = {.ctx = &ps, .title = path, .live = false, .fetch = cn_top_profile_fetch};
    int status = cn_top_run(&src);
    cn_agg_profile_free(p);
    return status;
}

static int top_in_process(cn_cli_live_args *a)
{
    local_top t;
    cn_err err = {0};
    char title[64];
    memset(&t, 0, sizeof(t));
    cn_cli_say_in_process(a->cmd, a);
    a->smp.pid = a->pid;
    if (cn_cli_local_start(&a->smp, &t.l, &err) < 0) {
        fprintf(stderr, "canopy top: %s\n", CN_TERM_STR(err.msg));
        return CN_EXIT_FAIL;
    }
    t.ps.profile = cn_live_session_profile(cn_cli_local_session(t.l));
    t.ps.session = cn_cli_local_session(t.l);
    snprintf(title, sizeof(title), "pid %d (in-process)", a->pid);
    cn_top_source src = {
        .ctx = &t, .title = title, .live = true, .fetch = local_top_fetch, .pump = local_top_pump};
    int status = cn_top_run(&src);
    cn_cli_local_free(t.l);
    return status;
}

int cn_cmd_top(int argc, char **argv)
{
    cn_cli_live_args a;
    cn_cli_conn *c = NULL;
    char *temp = NULL, title[128];
    int status;

    cn_cli_live_args_init(&a, "top");
    status = cn_cli_live_parse(&a, argc, argv, CN_LIVE_SAMPLING | CN_LIVE_PID, top_help);
    if (status >= 0)
        goto out;
    status = CN_EXIT_USAGE;
    if ((a.pid > 0) == (a.n_pos == 1) || a.n_pos > 1) {
        fprintf(stderr, "canopy top: expected SESSION, --pid PID or FILE\n");
        goto out;
    }
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "canopy top: needs a terminal (canopy tree prints text)\n");
        goto out;
    }
    if (a.n_pos == 1 && is_file(a.pos[0])) {
        status = top_file(a.pos[0]);
        goto out;
    }
    status = cn_cli_live_connect(&a, a.pid < 0, &c);
    if (status)
        goto out;
    if (!c) {
        status = top_in_process(&a);
        goto out;
    }
    daemon_top t = {.c = c, .session = a.n_pos ? a.pos[0] : NULL, .pid = a.pid};
    if (a.pid > 0) {
        int has = daemon_has_pid(c, a.cmd, a.pid);
        if (has < 0) {
            status = -has;
            goto out;
        }
        if (!has) {
            status = daemon_start(c, a.cmd, "attach", a.pid, &a.smp, &temp);
            if (status)
                goto out;
            t.session = temp;
        }
    }
    if (!temp && t.session) {
        /* An unknown session is an error before the screen is taken over. */
        json_t *req = cn_proto_request("tree"), *resp = NULL;
        if (req && (json_object_set_new(req, "session", json_string(t.session)) ||
                    json_object_set_new(req, "view", json_string("functions")))) {
            json_decref(req);
            req = NULL;
        }
        status = cn_cli_request(a.cmd, c, req, &resp);
        json_decref(resp);
        json_decref(req);
        if (status)
            goto out;
    }
    if (t.session)
        snprintf(title, sizeof(title), "%s%s", t.session, temp ? " (temporary)" : "");
    else
        snprintf(title, sizeof(title), "pid %d", a.pid);
    cn_top_source src = {.ctx = &t, .title = title, .live = true, .fetch = daemon_top_fetch};
    status = cn_top_run(&src);
    if (temp)
        daemon_rm(c, temp);
out:
    free(temp);
    cn_cli_conn_free(c);
    cn_cli_live_args_clear(&a);
    return status;
}
