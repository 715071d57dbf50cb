/* commands.c — the table of canopy's commands (client.h's cn_cli_command) and what is
 * printed from it: `canopy --help`, every `canopy COMMAND --help`, and the one-line error
 * for an unknown option with the nearest option suggested. The option rows themselves
 * are the parsers' own tables (query_opts.c, sampling_opts.c, live_common.c, and the
 * commands' own: cmd_diff.c, cmd_web.c, cmd_fleet.c); man/mangen.c writes the manual
 * pages from the same rows, and tests/integration/test_cli_face.sh compares --help, the
 * manual, the parsers and docs/cli.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "live.h"

#define HELP_WIDTH 80

/* The about texts: paragraphs separated by "\n\n", lines joined by the printer. */
const cn_cli_command cn_cli_commands[] = {
    {"open", cn_cmd_open, "FILE [QUERY]", "analyse a profile file offline",
     "Read a profile file (.canopy, folded stacks, .cpuprofile, perf script, pprof, canopy's "
     "JSON tree; gzip-compressed files are decompressed first) and print its call tree. The "
     "format is recognised from the content, not the name.",
     CN_LIVE_QUERY, NULL, 0},
    {"run", cn_cmd_run, "[SAMPLING] [QUERY] [--rm] -- CMD [ARGS...]",
     "profile a command from its first instruction",
     "Profile CMD from its first instruction: canopy starts it as you, held before exec until "
     "sampling is attached (through canopyd's session when a daemon answers, else "
     "in-process), lets it run with the terminal, and prints the call tree when it exits (or "
     "writes it to -o FILE). canopy exits with CMD's status (128+N when a signal N killed "
     "it); before CMD starts, canopy's own failures exit 1 (runtime) or 2 (usage). While it "
     "samples, a progress line shows on stderr when stderr is a terminal. Through canopyd the "
     "session stays there for later queries; --rm removes it once the tree is printed.",
     CN_LIVE_SAMPLING | CN_LIVE_NAME | CN_LIVE_QUERY | CN_LIVE_COMMAND | CN_LIVE_CONNECT, NULL, 0},
    {"attach", cn_cmd_attach, "PID|--container ID [SAMPLING] [--name N]",
     "start a live session on a running process or container",
     "Start a live session in canopyd on a running process (all its threads, present and "
     "future) and print the session id. Query it with canopy tree, top or lines; end it with "
     "canopy stop or canopy rm. With --container ID (a prefix of the id is enough) the "
     "session samples that container's cgroup, as system --cgroup does.",
     CN_LIVE_SAMPLING | CN_LIVE_NAME | CN_LIVE_CONNECT, cn_cli_attach_opts, 0},
    {"system", cn_cmd_system, "[--cgroup PATH] [SAMPLING] [--name N]",
     "start a whole-system or cgroup live session",
     "Start a whole-system live session in canopyd (root, CAP_PERFMON, or the configured "
     "system group) and print the session id. With --cgroup PATH only the tasks of that "
     "cgroup and its descendants are sampled; allowed also to a user who owns the cgroup's "
     "cgroup.procs and may profile every process in it (docs/cli-live.md, \"Containers and "
     "cgroups\").",
     CN_LIVE_SAMPLING | CN_LIVE_NAME | CN_LIVE_CONNECT, cn_cli_system_opts, 0},
    {"sessions", cn_cmd_sessions, "[--format text|json]", "list canopyd's sessions",
     "List canopyd's sessions (yours, or all of them for root).",
     CN_LIVE_SIMPLE_FORMAT | CN_LIVE_CONNECT, NULL, 0},
    {"tree", cn_cmd_tree, "SESSION|FILE|--pid PID [QUERY] [SAMPLING]", "print a session's tree",
     "Print the call tree of a live session (its id or --name; a saved profile file works "
     "too, and an existing file wins). With --pid: that process's session if canopyd has "
     "one, else a temporary session that samples for --duration (default 5s, at 999 Hz), in "
     "canopyd when it answers, else in-process, and then prints.",
     CN_LIVE_SAMPLING | CN_LIVE_QUERY | CN_LIVE_PID | CN_LIVE_CONNECT, NULL, 0},
    {"top", cn_cmd_top, "SESSION|FILE|--pid PID [SAMPLING]", "full-screen live view",
     "Full-screen view, refreshed every second: the hottest functions by self weight and the "
     "call tree. With --pid and no session for it, a temporary session (999 Hz) samples until "
     "you quit, in canopyd when it answers, else in-process. A profile FILE is shown without "
     "refreshing.\n\n"
     "Keys: arrows or j/k move; Enter or -> expands, <- collapses; i invert; f focus on the "
     "selected node; F focus on its function; m merge its function; M merge the node; d drop "
     "its function; u pop the last transform; w cycle the window (all, 60 s, 10 s); c cycle "
     "the tree's roots (none, process, container, pod, service, cgroup); p pause; "
     "/ search (n next); q quits.",
     CN_LIVE_SAMPLING | CN_LIVE_PID | CN_LIVE_CONNECT, NULL, 0},
    {"web", cn_cmd_web, "SESSION|FILE|BASE NEW|--pid PID [QUERY] [SAMPLING]",
     "the profile in a browser (loopback HTTP server)",
     "Serve an interactive view of a profile (flame graph, call tree, transforms) to a "
     "browser on this machine. The server runs as you, in this process; it prints the page's "
     "URL, with its secret token, as the first line of stdout, and serves until Ctrl-C. "
     "Requests without the token get 403.\n\n"
     "SESSION is a canopyd session (id or --name), asked over your own connection and "
     "refreshed every second; FILE a profile file; --pid PID samples that process in-process "
     "until Ctrl-C. BASE NEW (files or sessions, with canopy diff's @FROM..TO windows) serves "
     "canopy diff's differential tree, red where NEW grew, blue where it shrank. QUERY options "
     "give the page's starting query (docs/web.md).",
     CN_LIVE_SAMPLING | CN_LIVE_QUERY | CN_LIVE_PID | CN_LIVE_CONNECT, cn_cli_web_opts, 0},
    {"lines", cn_cmd_lines, "SESSION|FILE F [QUERY]", "self weight per source line and address",
     "Self weight per source line and per address (file offset) inside function F, for a live "
     "session or a profile file (an existing file wins). Lines are known once symbols with "
     "debug information arrive; addresses are always there for native code. --format is "
     "text or json.",
     CN_LIVE_QUERY | CN_LIVE_CONNECT, NULL, 0},
    {"timeline", cn_cmd_timeline, "SESSION|FILE [QUERY]", "estimated calls from samples",
     "Estimated calls from consecutive samples: a call starts at the first sample that shows "
     "it and ends at the first sample that no longer does; calls still open at the last "
     "sample end at its time. --format is text, json, chrome-trace (chrome://tracing, "
     "ui.perfetto.dev) or speedscope (also chosen by -o FILE.speedscope.json). Times are in "
     "microseconds (speedscope: nanoseconds). An existing file wins over a session name.",
     CN_LIVE_QUERY | CN_LIVE_CONNECT, NULL, 0},
    {"diff", cn_cmd_diff, "BASE NEW [QUERY] | DIFF-FILE [QUERY]", "differential tree",
     "Differential call tree: every node weighs NEW - BASE, after BASE is scaled to NEW's "
     "total. BASE and NEW are profile files or canopyd sessions (id or --name), optionally "
     "with a time window FILE@FROM..TO or SESSION@FROM..TO in seconds since the start "
     "(s3@10..20, base.folded@..5, s3@30..). An existing file wins; an argument that is no "
     "file and has no '/' is a session. DIFF-FILE is a three-column folded file (STACK BASE "
     "NEW) or a differential .canopy file.\n\n"
     "Formats: text (default), json (nodes carry base and new), folded (STACK BASE NEW, raw "
     "weights), svg (red: grew, blue: shrank), canopy (the differential profile).",
     CN_LIVE_QUERY | CN_LIVE_CONNECT, cn_cli_diff_opts, 0},
    {"stop", cn_cmd_stop, "SESSION", "stop sampling; the session stays queryable",
     "Stop sampling; the session stays queryable and is saved in canopyd's state directory.",
     CN_LIVE_CONNECT, NULL, 0},
    {"rm", cn_cmd_rm, "SESSION", "forget a session and delete its saved file",
     "Forget a session (stopping it first) and delete its saved file.", CN_LIVE_CONNECT, NULL, 0},
    {"save", cn_cmd_save, "SESSION -o FILE [QUERY]", "write a session to a file",
     "Write the session to FILE, as you (canopyd never writes to your paths). The format "
     "comes from --format or FILE's extension; default the lossless .canopy, which canopy "
     "open reads back.",
     CN_LIVE_QUERY | CN_LIVE_CONNECT, NULL, 0},
    {"status", cn_cmd_status, "[--format text|json]", "canopyd's health",
     "canopyd's health: version, uptime, sessions, samples per second, lost samples, memory, "
     "event loop. Exit 1 when no daemon answers.",
     CN_LIVE_SIMPLE_FORMAT | CN_LIVE_CONNECT, NULL, 0},
    {"fleet", cn_cmd_fleet, "init|tree|labels|diff|prune [OPTIONS]",
     "the fleet's profiles in ClickHouse",
     "canopy fleet init [--url URL]... [--cluster NAME]\n"
     "canopy fleet tree [WHERE] [--group-by host|service|LABEL] [QUERY]\n"
     "canopy fleet labels [WHERE] [KEY]\n"
     "canopy fleet diff --base K=V[,K=V] --new K=V[,K=V] [WHERE] [QUERY]\n"
     "canopy fleet prune --older DURATION [--url URL]...\n\n"
     "The fleet's profiles in ClickHouse, pushed by every canopyd with a fleet_url "
     "(docs/fleet.md). WHERE is any of --where, --last, --from, --to, --raw. The URL comes "
     "from --url, else $CANOPY_FLEET_URL, else fleet_url in canopyd's config file. QUERY "
     "options (tree and diff) are those of canopy open, but --group-by, --last, --from and "
     "--to, which are fleet's own.",
     CN_LIVE_QUERY, cn_cli_fleet_opts, ~0u},
    {NULL, NULL, NULL, NULL, NULL, 0, NULL, 0},
};

const cn_cli_command *cn_cli_command_find(const char *name)
{
    for (const cn_cli_command *c = cn_cli_commands; c->name; c++)
        if (!strcmp(c->name, name))
            return c;
    return NULL;
}

void cn_cli_usage(FILE *out)
{
    int col = 0;
    for (const cn_cli_command *c = cn_cli_commands; c->name; c++) {
        int w = (int)(strlen(c->name) + 1 + strlen(c->args));
        if (w > col && w <= 44)
            col = w;
    }
    fprintf(out, "usage: canopy COMMAND [ARGS]    (canopy COMMAND --help for its options)\n"
                 "       canopy --help | --version\n\n");
    for (const cn_cli_command *c = cn_cli_commands; c->name; c++) {
        char left[160];
        int w = snprintf(left, sizeof(left), "%s %s", c->name, c->args);
        if (w > col)
            fprintf(out, "  %s\n  %-*s  %s\n", left, col, "", c->summary);
        else
            fprintf(out, "  %-*s  %s\n", col, left, c->summary);
    }
    fprintf(out, "\nExit status: 0 success, 1 runtime failure, 2 bad usage or bad input.\n"
                 "Manual: man canopy; reference: docs/cli.md.\n");
}

/* Prints text's paragraphs, each wrapped at HELP_WIDTH; a line of its own ("\n" not
 * followed by "\n") stays one. */
static void print_about(const char *text)
{
    const char *p = text;
    int pos = 0;
    while (*p) {
        if (*p == '\n') {
            fputc('\n', stdout);
            pos = 0;
            p++;
            continue;
        }
        size_t w = strcspn(p, " \n");
        if (pos && pos + 1 + (int)w > HELP_WIDTH) {
            fputc('\n', stdout);
            pos = 0;
        } else if (pos) {
            fputc(' ', stdout);
            pos++;
        }
        fwrite(p, 1, w, stdout);
        pos += (int)w;
        p += w;
        while (*p == ' ')
            p++;
    }
    fputc('\n', stdout);
}

void cn_cli_help(const char *cmd)
{
    const cn_cli_command *c = cn_cli_command_find(cmd);
    if (!c)
        return;
    printf("usage: canopy %s %s\n\n", c->name, c->args);
    print_about(c->about);
    if (c->own) {
        printf("\nOptions:\n");
        cn_opt_print(stdout, c->own, c->own_flags, HELP_WIDTH, NULL);
    }
    if (c->tables & (CN_LIVE_SAMPLING | CN_LIVE_NAME)) {
        printf("\nSAMPLING options:\n");
        cn_opt_print(stdout, cn_cli_sampling_opts, c->tables, HELP_WIDTH, c->own);
    }
    if (c->tables & CN_LIVE_QUERY) {
        printf("\nQUERY and output options:\n");
        cn_opt_print(stdout, cn_cli_query_opts, 0, HELP_WIDTH, c->own);
        cn_cli_print_formats(stdout);
    }
    printf("\nOther options:\n");
    cn_opt_print(stdout, cn_cli_live_opts, c->tables, HELP_WIDTH, c->own);
    printf("\nExit status: 0 success, 1 runtime failure, 2 bad usage or bad input.\n");
}

void cn_cli_print_formats(FILE *out)
{
    char names[256];
    cn_fmt_format_names(names, sizeof(names));
    fprintf(out, "  FMT is %s.\n", names);
}

/* Collects the names of the rows of tab enabled by flags into names (at most cap). */
static size_t collect(const cn_opt *tab, unsigned flags, const char **names, size_t n, size_t cap)
{
    for (const cn_opt *o = tab; o && o->lng && n < cap; o++)
        if (o->when == 0 || (o->when & flags))
            names[n++] = o->lng;
    return n;
}

void cn_cli_unknown_option(const char *cmd, const char *arg)
{
    const cn_cli_command *c = cn_cli_command_find(cmd);
    const char *names[256];
    size_t n = 0;
    char word[64];
    if (c) {
        n = collect(c->own, c->own_flags, names, n, 256);
        if (c->tables & (CN_LIVE_SAMPLING | CN_LIVE_NAME))
            n = collect(cn_cli_sampling_opts, c->tables, names, n, 256);
        if (c->tables & CN_LIVE_QUERY)
            n = collect(cn_cli_query_opts, 0, names, n, 256);
        n = collect(cn_cli_live_opts, c->tables, names, n, 256);
    }
    snprintf(word, sizeof(word), "%.*s", (int)strcspn(arg, "="), arg);
    const char *near = cn_text_nearest(word, names, n);
    char shown[256];
    cn_term_str(shown, sizeof(shown), arg);
    if (near && !strcmp(near, word))
        fprintf(stderr, "canopy %s: option '%s' does not apply here (see canopy %s --help)\n", cmd,
                shown, cmd);
    else if (near)
        fprintf(stderr,
                "canopy %s: unknown option '%s'; did you mean `%s`? (see canopy %s --help)\n", cmd,
                shown, near, cmd);
    else
        fprintf(stderr, "canopy %s: unknown option '%s' (see canopy %s --help)\n", cmd, shown, cmd);
}
