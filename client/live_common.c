/* live_common.c — what the live commands share: argument parsing (SAMPLING, QUERY, the
 * connection options and positionals in one pass; the QUERY options travel as protocol
 * fields through cn_fmt_spec_to_json), writing a daemon's rendered answer, connecting with
 * the in-process fallback, and fetching a session's lossless profile to work on it
 * locally (diff).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "cn_common.h"
#include "live.h"

void cn_cli_live_args_init(cn_cli_live_args *a, const char *cmd)
{
    memset(a, 0, sizeof(*a));
    a->cmd = cmd;
    a->pid = -1;
    cn_live_session_opts_init(&a->smp);
    a->smp.freq = CN_LIVE_FREQ_RUN; /* attach and system set CN_LIVE_FREQ_DEFAULT */
    cn_cli_query_init(&a->q);
}

void cn_cli_live_args_clear(cn_cli_live_args *a)
{
    cn_live_session_opts_clear(&a->smp);
    cn_cli_query_clear(&a->q);
}

static int parse_pid(const char *cmd, const char *v, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x <= 0 || x > 4194304) {
        fprintf(stderr, "canopy %s: bad PID '%s'\n", cmd, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* The options cn_cli_live_parse handles itself, enabled by the command's flags; the
 * SAMPLING and QUERY options are sampling_opts.c's and query_opts.c's tables. */
enum { L_HELP, L_SOCKET, L_NO_DAEMON, L_RM, L_PID, L_FORMAT };

const cn_opt cn_cli_live_opts[] = {
    {"--pid", NULL, "PID", NULL, "the process PID: its session, else a temporary one", L_PID,
     CN_LIVE_PID},
    {"--rm", NULL, NULL, NULL, "remove canopyd's session once the tree is printed", L_RM,
     CN_LIVE_COMMAND},
    {"--format", NULL, "text|json", "text", "output format", L_FORMAT, CN_LIVE_SIMPLE_FORMAT},
    {"--no-daemon", NULL, NULL, NULL, "sample in-process even when a daemon answers", L_NO_DAEMON,
     CN_LIVE_SAMPLING},
    {"--socket", NULL, "PATH",
     "$CANOPY_SOCKET, /run/canopy/canopy.sock, $XDG_RUNTIME_DIR/canopy.sock", "canopyd's socket",
     L_SOCKET, CN_LIVE_CONNECT},
    {"--help", "-h", NULL, NULL, "print this help", L_HELP, 0},
    {NULL, NULL, NULL, NULL, NULL, 0, 0},
};

/* One of cn_cli_live_opts at argv[*i]. Returns 1 consumed, 0 not one, -1 after an error
 * (printed), or 2 after --help. */
static int live_opt(cn_cli_live_args *a, int argc, char **argv, int *i, unsigned flags)
{
    const char *v;
    const cn_opt *o = cn_opt_match(cn_cli_live_opts, flags | CN_LIVE_CONNECT, argc, argv, i, &v);
    if (!o)
        return 0;
    if (o->arg && !v) {
        fprintf(stderr, "canopy %s: %s needs a value\n", a->cmd, o->lng);
        return -1;
    }
    switch (o->id) {
    case L_HELP:
        return 2;
    case L_SOCKET:
        a->socket = v;
        return 1;
    case L_NO_DAEMON:
        a->no_daemon = true;
        return 1;
    case L_RM:
        a->rm = true;
        return 1;
    case L_PID:
        return parse_pid(a->cmd, v, &a->pid) < 0 ? -1 : 1;
    case L_FORMAT:
        if (strcmp(v, "text") && strcmp(v, "json")) {
            fprintf(stderr, "canopy %s: --format expects text or json\n", a->cmd);
            return -1;
        }
        a->json = !strcmp(v, "json");
        return 1;
    }
    return 0;
}

int cn_cli_live_parse(cn_cli_live_args *a, int argc, char **argv, unsigned flags,
                      void (*help)(void))
{
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        int r = live_opt(a, argc, argv, &i, flags);
        if (r < 0)
            return CN_EXIT_USAGE;
        if (r == 2) {
            help();
            return CN_EXIT_OK;
        }
        if (r > 0)
            continue;
        if (flags & CN_LIVE_SAMPLING) {
            r = cn_cli_parse_sampling_opt(&a->smp, a->cmd, flags & CN_LIVE_NAME, argc, argv, &i);
            if (r < 0)
                return CN_EXIT_USAGE;
            if (r > 0)
                continue;
        }
        if (flags & CN_LIVE_QUERY) {
            r = cn_cli_parse_query_opt(&a->q, argc, argv, &i);
            if (r < 0)
                return CN_EXIT_USAGE;
            if (r > 0)
                continue;
        }
        if (!strcmp(s, "--")) {
            if (flags & CN_LIVE_COMMAND) {
                a->cmd_argv = argv + i + 1;
                a->cmd_argc = argc - i - 1;
                break;
            }
            /* Everything after -- is positional. */
            for (i++; i < argc; i++) {
                if (a->n_pos == CN_LIVE_MAX_POS) {
                    fprintf(stderr, "canopy %s: unexpected argument '%s'\n", a->cmd, argv[i]);
                    return CN_EXIT_USAGE;
                }
                a->pos[a->n_pos++] = argv[i];
            }
            break;
        }
        if (s[0] == '-' && s[1]) {
            cn_cli_unknown_option(a->cmd, s);
            return CN_EXIT_USAGE;
        }
        if (flags & CN_LIVE_COMMAND) {
            /* `canopy run ./prog args`: the first word starts the command. */
            a->cmd_argv = argv + i;
            a->cmd_argc = argc - i;
            break;
        }
        if (a->n_pos == CN_LIVE_MAX_POS) {
            fprintf(stderr, "canopy %s: unexpected argument '%s' (see canopy %s --help)\n", a->cmd,
                    s, a->cmd);
            return CN_EXIT_USAGE;
        }
        a->pos[a->n_pos++] = s;
    }
    if ((flags & CN_LIVE_QUERY) && cn_cli_query_finish(&a->q) < 0)
        return CN_EXIT_USAGE;
    return -1;
}

int cn_cli_emit_json(const char *cmd, const json_t *doc, const char *output)
{
    char *s = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(12));
    if (!s) {
        fprintf(stderr, "canopy %s: out of memory\n", cmd);
        return CN_EXIT_FAIL;
    }
    size_t n = strlen(s);
    char *line = realloc(s, n + 2); /* room for the "\n" the document ends with */
    if (!line) {
        free(s);
        fprintf(stderr, "canopy %s: out of memory\n", cmd);
        return CN_EXIT_FAIL;
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    int status = cn_cli_emit(output, line, n + 1);
    free(line);
    return status;
}

int cn_cli_emit_rendered(const char *cmd, const json_t *resp, const char *key, const char *output)
{
    const json_t *v;
    if ((v = json_object_get(resp, key)) && json_is_object(v))
        return cn_cli_emit_json(cmd, v, output);
    if ((v = json_object_get(resp, "output")) && json_is_string(v))
        return cn_cli_emit(output, json_string_value(v), json_string_length(v));
    if ((v = json_object_get(resp, "output_base64")) && json_is_string(v)) {
        size_t n;
        void *data = cn_common_base64_decode(json_string_value(v), json_string_length(v), &n);
        if (!data) {
            fprintf(stderr, "canopy %s: the daemon sent malformed base64 output\n", cmd);
            return CN_EXIT_FAIL;
        }
        int status = cn_cli_emit(output, data, n);
        free(data);
        return status;
    }
    fprintf(stderr, "canopy %s: the daemon's answer has no output\n", cmd);
    return CN_EXIT_FAIL;
}

/* ---------------------------------------------------------------------------------------
 * Connecting
 */

static bool nobody_there(int rc)
{
    return rc == -ENOENT || rc == -ECONNREFUSED || rc == -ENOTDIR || rc == -ENOTSOCK ||
           rc == -EACCES || rc == -ENAMETOOLONG;
}

int cn_cli_live_connect(cn_cli_live_args *a, bool required, cn_cli_conn **out)
{
    char path[256];
    *out = NULL;
    if (a->no_daemon)
        return 0;
    int rc = cn_cli_connect(a->socket, out, path, sizeof(path));
    if (rc == 0)
        return 0;
    if (!required && nobody_there(rc))
        return 0;
    if (nobody_there(rc))
        fprintf(stderr, "canopy %s: no daemon answers at %s (%s); start canopyd\n", a->cmd, path,
                strerror(-rc));
    else
        fprintf(stderr, "canopy %s: cannot connect to %s: %s\n", a->cmd, path, strerror(-rc));
    return CN_EXIT_FAIL;
}

void cn_cli_say_in_process(const char *cmd, const cn_cli_live_args *a)
{
    char path[256];
    if (a->no_daemon) {
        fprintf(stderr, "canopy %s: sampling in-process (--no-daemon)\n", cmd);
        return;
    }
    cn_cli_socket_path(a->socket, path, sizeof(path));
    fprintf(stderr, "canopy %s: no daemon at %s; sampling in-process\n", cmd, path);
}

int cn_cli_request(const char *cmd, cn_cli_conn *c, json_t *req, json_t **resp)
{
    cn_err err = {0};
    *resp = NULL;
    if (!req) {
        fprintf(stderr, "canopy %s: out of memory\n", cmd);
        return CN_EXIT_FAIL;
    }
    int rc = cn_cli_call(c, req, resp, &err);
    if (rc < 0) {
        fprintf(stderr, "canopy %s: %s\n", cmd, CN_TERM_STR(err.msg[0] ? err.msg : strerror(-rc)));
        return CN_EXIT_FAIL;
    }
    int status = cn_cli_resp_status(cmd, *resp);
    if (status) {
        json_decref(*resp);
        *resp = NULL;
    }
    return status;
}

/* Prints the reply's "notes" (docs/protocol.md `tree`) on stderr exactly as the in-process
 * renderer's notes are printed (client/render.c): "canopy: note: …". */
static void print_reply_notes(const json_t *resp)
{
    const json_t *v;
    size_t i;
    json_array_foreach(json_object_get(resp, "notes"), i, v)
    {
        if (json_is_string(v)) { /* quotes function names: the terminal rule */
            fputs("canopy: note: ", stderr);
            cn_term_fputs(json_string_value(v), stderr);
            fputc('\n', stderr);
        }
    }
}

int cn_cli_request_emit(const char *cmd, cn_cli_conn *c, json_t *req, const char *key,
                        const char *output)
{
    cn_err err = {0};
    char *raw = NULL;
    size_t raw_len = 0;
    json_t *resp = NULL;
    if (!req) {
        fprintf(stderr, "canopy %s: out of memory\n", cmd);
        return CN_EXIT_FAIL;
    }
    int rc = cn_cli_call_raw(c, req, &resp, &raw, &raw_len, &err);
    if (rc < 0) {
        fprintf(stderr, "canopy %s: %s\n", cmd, CN_TERM_STR(err.msg[0] ? err.msg : strerror(-rc)));
        return CN_EXIT_FAIL;
    }
    int status = cn_cli_resp_status(cmd, resp);
    if (status == 0)
        print_reply_notes(resp);
    if (status == 0)
        status =
            raw ? cn_cli_emit(output, raw, raw_len) : cn_cli_emit_rendered(cmd, resp, key, output);
    free(raw);
    json_decref(resp);
    return status;
}

json_t *cn_cli_session_entry(cn_cli_conn *c, const char *session)
{
    json_t *req = cn_proto_request("sessions"), *resp = NULL, *found = NULL;
    cn_err err = {0};
    if (req && cn_cli_call(c, req, &resp, &err) == 0 && json_is_true(json_object_get(resp, "ok"))) {
        size_t i;
        json_t *s;
        json_array_foreach(json_object_get(resp, "sessions"), i, s)
        {
            const char *id = json_string_value(json_object_get(s, "id"));
            const char *name = json_string_value(json_object_get(s, "name"));
            if ((id && !strcmp(id, session)) || (name && !strcmp(name, session))) {
                found = json_incref(s);
                break;
            }
        }
    }
    json_decref(resp);
    json_decref(req);
    return found;
}

int cn_cli_fetch_session(const char *cmd, cn_cli_conn *c, const char *session, cn_agg_profile **out)
{
    json_t *req = cn_proto_request("save"), *resp = NULL;
    void *data = NULL;
    size_t len = 0;
    cn_err err = {0};
    int status;

    *out = NULL;
    if (req && (json_object_set_new(req, "session", json_string(session)) ||
                json_object_set_new(req, "format", json_string("canopy")))) {
        json_decref(req);
        req = NULL; /* cn_cli_request reports NULL as out of memory */
    }
    status = cn_cli_request(cmd, c, req, &resp);
    if (status)
        goto out;
    status = CN_EXIT_FAIL;
    const json_t *b64 = json_object_get(resp, "output_base64");
    if (!json_is_string(b64)) {
        fprintf(stderr, "canopy %s: the daemon's answer for session '%s' has no output_base64\n",
                cmd, session);
        goto out;
    }
    data = cn_common_base64_decode(json_string_value(b64), json_string_length(b64), &len);
    if (!data) {
        fprintf(stderr, "canopy %s: the daemon sent malformed base64 for session '%s'\n", cmd,
                session);
        goto out;
    }
    int rc = cn_fmt_import_buffer(data, len, session, out, &err);
    if (rc < 0) {
        /* The daemon's own bytes do not load: a runtime failure, not bad user input. */
        fprintf(stderr, "canopy %s: session '%s': %s\n", cmd, session,
                err.msg[0] ? err.msg : strerror(-rc));
        goto out;
    }
    status = CN_EXIT_OK;
out:
    free(data);
    json_decref(resp);
    json_decref(req);
    return status;
}
