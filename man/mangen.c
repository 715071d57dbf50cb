/* mangen — writes the manual pages canopy(1), canopyd(8) and canopyd.conf(5) in roff from
 * the tables the programs parse with: client/commands.c's commands and the option tables
 * of query_opts.c, sampling_opts.c, live_common.c and the commands' own; daemon/config.c's
 * cn_d_options and cn_d_config_keys. A build tool (man/CMakeLists.txt runs it), never
 * installed. usage: canopy-mangen canopy.1|canopyd.8|canopyd.conf.5 OUT DATE
 */
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "cn_d.h"
#include "live.h"

/* Text for roff: backslashes and hyphens escaped, no line starting with a control
 * character. */
static void roff(FILE *f, const char *s)
{
    bool bol = true;
    for (; *s; s++) {
        if (bol && (*s == '.' || *s == '\''))
            fputs("\\&", f);
        bol = false;
        if (*s == '\\')
            fputs("\\e", f);
        else if (*s == '-')
            fputs("\\-", f);
        else
            fputc(*s, f);
        if (*s == '\n')
            bol = true;
    }
}

/* Paragraphs ("\n\n": .PP) and kept line breaks ("\n": .br) of an about text. */
static void paragraphs(FILE *f, const char *text)
{
    const char *p = text;
    while (*p) {
        size_t n = strcspn(p, "\n");
        char line[2048];
        snprintf(line, sizeof(line), "%.*s", (int)n, p);
        roff(f, line);
        fputc('\n', f);
        p += n;
        if (!strncmp(p, "\n\n", 2)) {
            fputs(".PP\n", f);
            p += 2;
        } else if (*p == '\n') {
            fputs(".br\n", f);
            p++;
        }
    }
}

static bool enabled(const cn_opt *o, unsigned flags)
{
    return o->when == 0 || (o->when & flags);
}

/* One .TP entry per row enabled by flags; sep goes between a name and its value. */
static void rows_sep(FILE *f, const cn_opt *tab, unsigned flags, const char *sep,
                     const cn_opt *shadow)
{
    for (const cn_opt *o = tab; o->lng; o++) {
        if (!enabled(o, flags) || (shadow && cn_opt_find(shadow, o->lng)))
            continue;
        fputs(".TP\n", f);
        if (o->shrt) {
            fputs("\\fB", f);
            roff(f, o->shrt);
            fputs("\\fR, ", f);
        }
        fputs("\\fB", f);
        roff(f, o->lng);
        fputs("\\fR", f);
        if (o->arg) {
            fprintf(f, "%s\\fI", sep);
            roff(f, o->arg);
            fputs("\\fR", f);
        }
        fputc('\n', f);
        roff(f, o->help);
        if (o->dflt) {
            fputs(" (default: ", f);
            roff(f, o->dflt);
            fputs(")", f);
        }
        fputs(".\n", f);
    }
}

static void rows(FILE *f, const cn_opt *tab, unsigned flags)
{
    rows_sep(f, tab, flags, " ", NULL);
}

/* "\fB--a\fR, \fB--b\fR": the names of the rows, for a command's section. */
static void names(FILE *f, const cn_opt *tab, unsigned flags, const cn_opt *shadow)
{
    bool first = true;
    for (const cn_opt *o = tab; o->lng; o++) {
        if (!enabled(o, flags) || (shadow && cn_opt_find(shadow, o->lng)))
            continue;
        fputs(first ? "\\fB" : ", \\fB", f);
        roff(f, o->lng);
        fputs("\\fR", f);
        first = false;
    }
    fputs(".\n", f);
}

static void canopy_1(FILE *f, const char *date)
{
    fprintf(f, ".TH CANOPY 1 \"%s\" \"canopy %s\" \"canopy manual\"\n", date, CANOPY_VERSION);
    fputs(".SH NAME\ncanopy \\- a live sampling profiler: call trees of commands, processes "
          "and the whole system\n.SH SYNOPSIS\n",
          f);
    for (const cn_cli_command *c = cn_cli_commands; c->name; c++) {
        fprintf(f, "%s\\fBcanopy %s\\fR ", c == cn_cli_commands ? "" : ".br\n", c->name);
        roff(f, c->args);
        fputc('\n', f);
    }
    fputs(".SH DESCRIPTION\n"
          "canopy samples programs with perf_event_open(2) and shows where they spend their "
          "time as call trees, flame graphs and timelines. Live sessions run in canopyd(8), "
          "which serves every local user under the kernel's access rules; commands that "
          "need only a short burst of sampling (run, tree \\-\\-pid, top \\-\\-pid) run the "
          "same engine in the client when no daemon answers.\n"
          ".PP\n"
          "Every option that takes a value also accepts \\fB\\-\\-option=VALUE\\fR. "
          "SAMPLING and QUERY options are described once, in their own sections below. "
          "SESSION is a session id (s3) or the \\fB\\-\\-name\\fR given to it; where an "
          "argument may be a session or a FILE, an existing file wins.\n"
          ".SH COMMANDS\n",
          f);
    for (const cn_cli_command *c = cn_cli_commands; c->name; c++) {
        fprintf(f, ".SS \"canopy %s\"\n\\fBcanopy %s\\fR ", c->name, c->name);
        roff(f, c->args);
        fputs("\n.PP\n", f);
        paragraphs(f, c->about);
        if (c->own) {
            fputs(".PP\nOptions:\n", f);
            rows(f, c->own, c->own_flags);
        }
        if (c->tables & (CN_LIVE_SAMPLING | CN_LIVE_NAME)) {
            fputs(".PP\nSAMPLING options (see \\fBSAMPLING OPTIONS\\fR): ", f);
            names(f, cn_cli_sampling_opts, c->tables, c->own);
        }
        if (c->tables & CN_LIVE_QUERY) {
            fputs(".PP\nQUERY options (see \\fBQUERY OPTIONS\\fR): ", f);
            names(f, cn_cli_query_opts, 0, c->own);
        }
        fputs(".PP\nOther options:\n", f);
        rows_sep(f, cn_cli_live_opts, c->tables, " ", c->own);
    }
    fputs(".SH SAMPLING OPTIONS\n"
          "Options of run, attach, system, and of tree \\-\\-pid, top \\-\\-pid and web "
          "\\-\\-pid when they start a temporary session. \\fB\\-\\-name\\fR, "
          "\\fB\\-\\-label\\fR and \\fB\\-\\-no\\-fleet\\fR are for run, attach and system.\n",
          f);
    rows(f, cn_cli_sampling_opts, ~0u);
    fputs(".SH QUERY OPTIONS\n"
          "Shared by every command that prints a tree (open, run, tree, diff, save, web, "
          "fleet tree and fleet diff), and in part by lines and timeline. Only one view "
          "(\\fB\\-\\-invert\\fR, \\fB\\-\\-callees\\fR, \\fB\\-\\-callers\\fR, "
          "\\fB\\-\\-functions\\fR) may be given. A DURATION is a number with an optional "
          "unit: ns, us, ms, s (the default), m or min, h (30s, 5m, 1.5).\n",
          f);
    rows(f, cn_cli_query_opts, 0);
    char fmts[256];
    cn_fmt_format_names(fmts, sizeof(fmts));
    fputs(".PP\nFMT is ", f);
    roff(f, fmts);
    fputs(".\n.SH ENVIRONMENT\n"
          ".TP\n\\fBCANOPY_SOCKET\\fR\ncanopyd's socket when \\fB\\-\\-socket\\fR is not "
          "given.\n"
          ".TP\n\\fBXDG_RUNTIME_DIR\\fR\nwhere a user's own canopyd listens "
          "($XDG_RUNTIME_DIR/canopy.sock).\n"
          ".TP\n\\fBCANOPY_FLEET_URL\\fR\nClickHouse's URL for canopy fleet when "
          "\\fB\\-\\-url\\fR is not given.\n"
          ".TP\n\\fBNO_COLOR\\fR\nno colours in text output.\n"
          ".TP\n\\fBCANOPY_NO_PROGRESS\\fR\nno progress line on stderr.\n"
          ".SH EXIT STATUS\n"
          "0 on success; 1 on a runtime failure (no daemon where one is required, permission "
          "denied, the target is gone, unknown session, an output file that cannot be "
          "written); 2 on bad usage or bad input (an unknown option or format, a malformed "
          "transform, a bad file). canopy run exits with the command's status (128+N when "
          "signal N killed it). Every error is one line on stderr; nothing is written to "
          "stdout on error.\n"
          ".SH FILES\n"
          ".TP\n\\fI/run/canopy/canopy.sock\\fR\nthe system canopyd's socket.\n"
          ".TP\n\\fI/etc/canopy/canopyd.conf\\fR\ncanopyd's settings, read by canopy fleet "
          "for fleet_url.\n"
          ".SH SEE ALSO\n\\fBcanopyd\\fR(8), \\fBcanopyd.conf\\fR(5), \\fBperf\\fR(1); "
          "docs/cli.md and docs/cli-live.md in canopy's documentation.\n",
          f);
}

static void canopyd_8(FILE *f, const char *date)
{
    fprintf(f, ".TH CANOPYD 8 \"%s\" \"canopy %s\" \"canopy manual\"\n", date, CANOPY_VERSION);
    fputs(".SH NAME\ncanopyd \\- the canopy profiling daemon\n"
          ".SH SYNOPSIS\n\\fBcanopyd\\fR [\\fIOPTIONS\\fR]\n"
          ".SH DESCRIPTION\n"
          "canopyd samples processes and the whole system for canopy(1) clients: it holds "
          "live sessions (their call trees by address, symbolized asynchronously), answers "
          "queries in forked workers, saves sessions in its state directory and may push "
          "them to a fleet store. Clients talk to it over a Unix socket in newline-delimited "
          "JSON. The root daemon's socket is open to every local user; what a peer may do is "
          "decided per request from its credentials (SO_PEERCRED).\n"
          ".PP\n"
          "canopyd stays in the foreground: systemd supervises it (canopyd.service, "
          "Type=notify), and canopyd.socket can pass it its listening socket. SIGTERM and "
          "SIGINT stop it cleanly, saving running sessions.\n"
          ".SH OPTIONS\n",
          f);
    rows(f, cn_d_options, 0);
    fputs(".SH FILES\n"
          ".TP\n\\fI/run/canopy/canopy.sock\\fR\nthe socket of the root daemon "
          "(a user's own: $XDG_RUNTIME_DIR/canopy.sock).\n"
          ".TP\n\\fI/var/lib/canopy\\fR\nsaved sessions (a user's own: "
          "$XDG_STATE_HOME/canopy or ~/.local/state/canopy).\n"
          ".TP\n\\fI/etc/canopy/canopyd.conf\\fR\nsettings, with \\fB\\-\\-config\\fR "
          "(canopyd.conf(5)).\n"
          ".SH EXIT STATUS\n0 after a clean shutdown, 1 on a runtime failure (socket busy, "
          "state directory unusable), 2 on bad usage or a bad config file.\n"
          ".SH SEE ALSO\n\\fBcanopy\\fR(1), \\fBcanopyd.conf\\fR(5), "
          "\\fBsystemd.socket\\fR(5); docs/cli-live.md and docs/security.md in canopy's "
          "documentation.\n",
          f);
}

static void canopyd_conf_5(FILE *f, const char *date)
{
    fprintf(f, ".TH CANOPYD.CONF 5 \"%s\" \"canopy %s\" \"canopy manual\"\n", date, CANOPY_VERSION);
    fputs(".SH NAME\ncanopyd.conf \\- settings of the canopy daemon\n"
          ".SH SYNOPSIS\n\\fI/etc/canopy/canopyd.conf\\fR\n"
          ".SH DESCRIPTION\n"
          "canopyd(8) reads this file when started with \\fB\\-\\-config\\fR \\fIFILE\\fR. "
          "Each line is \\fIkey\\fR = \\fIvalue\\fR; blanks around both are ignored, "
          "\\fB#\\fR starts a comment, and every key is optional. An unknown key or a bad "
          "value stops canopyd with the file's name and line (exit 2). Command-line options "
          "win over the file.\n"
          ".PP\n"
          "A SIZE is a whole number of bytes with an optional K, M or G suffix (binary). A "
          "DURATION is a number with an optional unit: ns, us, ms, s (the default), m or "
          "min, h (30s, 10m, 1.5). A COUNT is a positive integer.\n"
          ".SH SETTINGS\n",
          f);
    rows_sep(f, cn_d_config_keys, 0, " = ", NULL);
    fputs(".SH EXAMPLE\n.nf\n"
          "retention = 30m\n"
          "max_sessions = 32\n"
          "system_group = perf\n"
          "fleet_url = http://clickhouse.example:8123/\n"
          "fleet_labels = env=prod,dc=fra1\n"
          ".fi\n"
          ".SH SEE ALSO\n\\fBcanopyd\\fR(8), \\fBcanopy\\fR(1); docs/cli-live.md and "
          "docs/fleet.md in canopy's documentation.\n",
          f);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: canopy-mangen canopy.1|canopyd.8|canopyd.conf.5 OUT DATE\n");
        return 2;
    }
    int bad = 0;
    FILE *f = fopen(argv[2], "w");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    if (!strcmp(argv[1], "canopy.1"))
        canopy_1(f, argv[3]);
    else if (!strcmp(argv[1], "canopyd.8"))
        canopyd_8(f, argv[3]);
    else if (!strcmp(argv[1], "canopyd.conf.5"))
        canopyd_conf_5(f, argv[3]);
    else
        bad = fprintf(stderr, "canopy-mangen: unknown page '%s'\n", argv[1]);
    bad |= ferror(f) | fclose(f);
    return bad ? 1 : 0;
}
