/* canopy: the client CLI. Dispatches to one function per command (client.h). */
#include <stdio.h>
#include <string.h>

#include "client.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"open", cn_cmd_open, "FILE [QUERY]              analyse a profile file offline"},
    {"run", cn_cmd_run, "[SAMPLING] [QUERY] -- CMD   profile a command from its first instruction"},
    {"attach", cn_cmd_attach, "PID|--container ID [SAMPLING] a process or a container"},
    {"system", cn_cmd_system, "[--cgroup PATH] [SAMPLING] the whole system, or a cgroup"},
    {"sessions", cn_cmd_sessions, "[--format text|json]     list sessions"},
    {"tree", cn_cmd_tree, "SESSION|--pid PID [QUERY]   query a live session"},
    {"top", cn_cmd_top, "SESSION|--pid PID            full-screen live view"},
    {"web", cn_cmd_web, "SESSION|FILE|--pid PID       the profile in a browser (loopback)"},
    {"lines", cn_cmd_lines, "SESSION|FILE F             self weight per source line and address"},
    {"timeline", cn_cmd_timeline, "SESSION|FILE [--tid T]   estimated calls from samples"},
    {"diff", cn_cmd_diff, "BASE NEW [QUERY]             differential tree"},
    {"stop", cn_cmd_stop, "SESSION                      stop sampling"},
    {"rm", cn_cmd_rm, "SESSION                        forget a session"},
    {"save", cn_cmd_save, "SESSION -o FILE              write the session"},
    {"status", cn_cmd_status, "[--format text|json]       daemon health"},
    {"fleet", cn_cmd_fleet, "init|tree|labels|diff|prune  the fleet's profiles in ClickHouse"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: canopy COMMAND [ARGS]   (canopy COMMAND --help for details)\n\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  canopy %-9s%s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CN_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CN_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("canopy %s\n", CANOPY_VERSION);
        return CN_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "canopy: unknown command '%s' (see canopy --help)\n", argv[1]);
    return CN_EXIT_USAGE;
}
