/* complete.c — `canopy __complete WORD...`, the hidden command behind the bash completion
 * (client/canopy.bash): given the words after "canopy" up to the one being completed, it
 * prints the candidates for that last word, one per line, from the same tables --help
 * prints (commands.c and the parsers' option tables): commands, a command's options, an
 * option's values (its placeholder's choices, output formats, PIDs), canopyd's session ids
 * and names (asked over the usual socket; nothing when no daemon answers), and "@files" or
 * "@commands" for the script to expand with compgen.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "live.h"

static const char *const fleet_subs[] = {"init", "tree", "labels", "diff", "prune"};

static bool has_prefix(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

static void put(const char *before, const char *cand, const char *prefix)
{
    if (has_prefix(cand, prefix))
        printf("%s%s\n", before, cand);
}

/* The fleet subcommand's flag bits (cmd_fleet.c's F_*: the order of fleet_subs). */
static unsigned fleet_flags(const char *sub)
{
    for (unsigned k = 0; k < 5; k++)
        if (sub && !strcmp(sub, fleet_subs[k]))
            return 1u << k;
    return ~0u;
}

/* Whether the QUERY options apply: the command takes them (fleet: tree and diff only). */
static bool query_on(const cn_cli_command *c, unsigned own_flags)
{
    if (!strcmp(c->name, "fleet"))
        return own_flags == fleet_flags("tree") || own_flags == fleet_flags("diff");
    return c->tables & CN_LIVE_QUERY;
}

/* The option tables cmd matches against, in the parsers' order (own first), each with the
 * flags its rows' `when` is tested against and whether the command takes it at all. */
enum { N_TABLES = 4 };
typedef struct opt_tables {
    const cn_opt *tab[N_TABLES];
    unsigned flags[N_TABLES];
    bool on[N_TABLES];
} opt_tables;

static opt_tables tables_of(const cn_cli_command *c, unsigned own_flags)
{
    return (opt_tables){
        .tab = {c->own, cn_cli_sampling_opts, cn_cli_query_opts, cn_cli_live_opts},
        .flags = {own_flags, c->tables, 0, c->tables},
        .on = {c->own != NULL, (c->tables & (CN_LIVE_SAMPLING | CN_LIVE_NAME)) != 0,
               query_on(c, own_flags), true},
    };
}

/* Whether row o of table t applies under its flags. */
static bool row_on(const opt_tables *ts, int t, const cn_opt *o)
{
    return o->when == 0 || (o->when & ts->flags[t]);
}

/* The row named name among cmd's options (own first, as the parsers match). */
static const cn_opt *find_row(const cn_cli_command *c, unsigned own_flags, const char *name)
{
    opt_tables ts = tables_of(c, own_flags);
    for (int t = 0; t < N_TABLES; t++) {
        if (!ts.on[t])
            continue;
        for (const cn_opt *o = ts.tab[t]; o->lng; o++)
            if (row_on(&ts, t, o) && (!strcmp(o->lng, name) || (o->shrt && !strcmp(o->shrt, name))))
                return o;
    }
    return NULL;
}

static void put_options(const cn_cli_command *c, unsigned own_flags, const char *prefix)
{
    opt_tables ts = tables_of(c, own_flags);
    for (int t = 0; t < N_TABLES; t++) {
        if (!ts.on[t])
            continue;
        for (const cn_opt *o = ts.tab[t]; o->lng; o++)
            if (row_on(&ts, t, o) &&
                (t == 0 || !c->own || !cn_opt_find(c->own, o->lng))) /* not shadowed */
                put("", o->lng, prefix);
    }
}

static void put_pids(const char *prefix)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d)))
        if (isdigit((unsigned char)e->d_name[0]))
            put("", e->d_name, prefix);
    closedir(d);
}

/* The session ids and names of the daemon at socket (NULL: the usual search). */
static void put_sessions(const char *socket, const char *prefix)
{
    cn_cli_conn *c = NULL;
    json_t *req = NULL, *resp = NULL;
    cn_err err = {0};
    if (cn_cli_connect(socket, &c, NULL, 0) < 0)
        return;
    req = cn_proto_request("sessions");
    if (req && cn_cli_call(c, req, &resp, &err) == 0) {
        size_t i;
        json_t *s;
        json_array_foreach(json_object_get(resp, "sessions"), i, s)
        {
            const char *id = json_string_value(json_object_get(s, "id"));
            const char *name = json_string_value(json_object_get(s, "name"));
            /* A name is another user's choice: only printable words go to the shell. */
            if (id)
                put("", id, prefix);
            bool plain = name && *name;
            for (const char *p = name; plain && *p; p++)
                plain = isgraph((unsigned char)*p);
            if (plain)
                put("", name, prefix);
        }
    }
    json_decref(resp);
    json_decref(req);
    cn_cli_conn_free(c);
}

/* The values of option row o: its placeholder's choices (a|b|c), output formats, PIDs,
 * or files. before is printed before each value ("--opt=", "=" or ""). */
static void put_values(const cn_opt *o, const char *before, const char *prefix)
{
    const char *a = o->arg;
    if (!strcmp(a, "PID")) {
        put_pids(prefix); /* "--pid=" is rare: PIDs alone */
    } else if (!strcmp(a, "FMT")) {
        char names[256], *save = NULL;
        cn_fmt_format_names(names, sizeof(names));
        for (char *w = strtok_r(names, ", ", &save); w; w = strtok_r(NULL, ", ", &save))
            if (strcmp(w, "or"))
                put(before, w, prefix);
    } else if (strchr(a, '|')) {
        char buf[128], *save = NULL;
        snprintf(buf, sizeof(buf), "%s", a);
        for (char *w = strtok_r(buf, "|", &save); w; w = strtok_r(NULL, "|", &save))
            if (!isupper((unsigned char)w[0]))
                put(before, w, prefix);
    } else if (!strcmp(a, "FILE") || !strcmp(a, "PATH") || !strcmp(a, "DIR")) {
        printf("@files\n");
    }
}

/* A command's positional argument: run's command, attach's PID, open's file, a session
 * (stop, rm, save), or a session or a file (tree, top, web, lines, timeline, diff). */
static void put_positional(const cn_cli_command *c, const char *socket, const char *cur)
{
    const char *n = c->name;
    if (!strcmp(n, "run")) {
        printf("@commands\n");
    } else if (!strcmp(n, "attach")) {
        put_pids(cur);
    } else if (!strcmp(n, "open")) {
        printf("@files\n");
    } else if (!strcmp(n, "stop") || !strcmp(n, "rm") || !strcmp(n, "save")) {
        put_sessions(socket, cur);
    } else if (strcmp(n, "fleet") && strcmp(n, "sessions") && strcmp(n, "status") &&
               strcmp(n, "system")) {
        put_sessions(socket, cur);
        printf("@files\n");
    }
}

int cn_cmd_complete(int argc, char **argv)
{
    char **w = argv + 1; /* the words after "canopy", the last being completed */
    int n = argc - 1;
    if (n < 1)
        return CN_EXIT_OK;
    const char *cur = w[n - 1], *prev = n >= 2 ? w[n - 2] : NULL;
    if (n == 1) {
        for (const cn_cli_command *c = cn_cli_commands; c->name; c++)
            put("", c->name, cur);
        put("", "--help", cur);
        put("", "--version", cur);
        return CN_EXIT_OK;
    }
    const cn_cli_command *c = cn_cli_command_find(w[0]);
    if (!c)
        return CN_EXIT_OK;
    bool fleet = !strcmp(c->name, "fleet");
    if (fleet && n == 2) {
        for (size_t k = 0; k < 5; k++)
            put("", fleet_subs[k], cur);
        return CN_EXIT_OK;
    }
    const char *socket = NULL;
    for (int k = 1; k + 1 < n; k++)
        if (!strcmp(w[k], "--socket"))
            socket = w[k + 1];
    /* After "--": run's command and its arguments, or positionals. */
    for (int k = 1; k + 1 < n; k++) {
        if (strcmp(w[k], "--"))
            continue;
        if (!strcmp(c->name, "run"))
            printf(k + 2 == n ? "@commands\n" : "@files\n");
        else if (strcmp(c->name, "open") && !fleet)
            put_sessions(socket, cur);
        if (strcmp(c->name, "run"))
            printf("@files\n");
        return CN_EXIT_OK;
    }
    unsigned own_flags = fleet ? fleet_flags(w[1]) : c->own_flags;

    /* An option's value: "--opt V", "--opt=V" as one word, or split at '=' by bash's
     * COMP_WORDBREAKS ("--opt" "=" "V"). */
    const char *opt = NULL, *prefix = cur;
    char head[64], pre[80] = ""; /* pre: what each value is printed after */
    if (!strcmp(cur, "=") && prev) {
        opt = prev, prefix = "";
        snprintf(pre, sizeof(pre), "=");
    } else if (prev && !strcmp(prev, "=") && n >= 3) {
        opt = w[n - 3];
    } else if (has_prefix(cur, "--") && strchr(cur, '=')) {
        snprintf(head, sizeof(head), "%.*s", (int)(strchr(cur, '=') - cur), cur);
        opt = head, prefix = strchr(cur, '=') + 1;
        snprintf(pre, sizeof(pre), "%s=", head);
    } else if (prev && prev[0] == '-') {
        const cn_opt *o = find_row(c, own_flags, prev);
        if (o && o->arg)
            opt = prev;
    }
    if (opt) {
        const cn_opt *o = find_row(c, own_flags, opt);
        if (o && o->arg)
            put_values(o, pre, prefix);
        return CN_EXIT_OK;
    }
    if (cur[0] == '-') {
        put_options(c, own_flags, cur);
        return CN_EXIT_OK;
    }
    put_positional(c, socket, cur);
    return CN_EXIT_OK;
}
