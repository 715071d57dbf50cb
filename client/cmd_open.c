/* Placeholder until its issue lands: every command here reports it is not built yet. */
#include <stdio.h>

#include "client.h"

int cn_cmd_open(int argc, char **argv)
{
    fprintf(stderr, "canopy open: not implemented yet\n");
    return CN_EXIT_FAIL;
}

int cn_cmd_timeline(int argc, char **argv)
{
    fprintf(stderr, "canopy timeline: not implemented yet\n");
    return CN_EXIT_FAIL;
}

void cn_cli_query_init(cn_cli_query *q)
{
    (void)q;
}
