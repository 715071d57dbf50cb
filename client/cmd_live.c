/* Placeholder until its issue lands: every command here reports it is not built yet. */
#include <stdio.h>

#include "client.h"

int cn_cmd_run(int argc, char **argv)
{
    fprintf(stderr, "canopy run: not implemented yet\n");
    return CN_EXIT_FAIL;
}

int cn_cmd_attach(int argc, char **argv)
{
    fprintf(stderr, "canopy attach: not implemented yet\n");
    return CN_EXIT_FAIL;
}

int cn_cmd_system(int argc, char **argv)
{
    fprintf(stderr, "canopy system: not implemented yet\n");
    return CN_EXIT_FAIL;
}

int cn_cmd_sessions(int argc, char **argv)
{
    fprintf(stderr, "canopy sessions: not implemented yet\n");
    return CN_EXIT_FAIL;
}

int cn_cmd_tree(int argc, char **argv)
{
    fprintf(stderr, "canopy tree: not implemented yet\n");
    return CN_EXIT_FAIL;
}

int cn_cmd_top(int argc, char **argv)
{
    fprintf(stderr, "canopy top: not implemented yet\n");
    return CN_EXIT_FAIL;
}

int cn_cmd_lines(int argc, char **argv)
{
    fprintf(stderr, "canopy lines: not implemented yet\n");
    return CN_EXIT_FAIL;
}

int cn_cmd_stop(int argc, char **argv)
{
    fprintf(stderr, "canopy stop: not implemented yet\n");
    return CN_EXIT_FAIL;
}

int cn_cmd_rm(int argc, char **argv)
{
    fprintf(stderr, "canopy rm: not implemented yet\n");
    return CN_EXIT_FAIL;
}

int cn_cmd_save(int argc, char **argv)
{
    fprintf(stderr, "canopy save: not implemented yet\n");
    return CN_EXIT_FAIL;
}

int cn_cmd_status(int argc, char **argv)
{
    fprintf(stderr, "canopy status: not implemented yet\n");
    return CN_EXIT_FAIL;
}

