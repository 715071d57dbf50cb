/* canopy: the client CLI. Dispatches to one function per command (commands.c's table). */
#include <stdio.h>
#include <string.h>

#include "client.h"

/* "canopy: unknown command 'atach'; did you mean `attach`?" */
static void unknown_command(const char *word)
{
    const char *names[64];
    size_t n = 0;
    char shown[256];
    for (const cn_cli_command *c = cn_cli_commands; c->name && n < 64; c++)
        names[n++] = c->name;
    const char *near = cn_text_nearest(word, names, n);
    cn_term_str(shown, sizeof(shown), word);
    if (near)
        fprintf(stderr, "canopy: unknown command '%s'; did you mean `%s`? (see canopy --help)\n",
                shown, near);
    else
        fprintf(stderr, "canopy: unknown command '%s' (see canopy --help)\n", shown);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        cn_cli_usage(stderr);
        return CN_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "help") && argc > 2 && cn_cli_command_find(argv[2])) {
        cn_cli_help(argv[2]); /* canopy help tree */
        return CN_EXIT_OK;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        cn_cli_usage(stdout);
        return CN_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        char id[80];
        printf("canopy %s (build %s)\n", CANOPY_VERSION, cn_common_build_id(id, sizeof(id)));
        return CN_EXIT_OK;
    }
    if (!strcmp(argv[1], "__complete"))
        return cn_cmd_complete(argc - 1, argv + 1);
    const cn_cli_command *c = cn_cli_command_find(argv[1]);
    if (c)
        return c->run(argc - 1, argv + 1);
    unknown_command(argv[1]);
    return CN_EXIT_USAGE;
}
