/* Placeholder until its issue lands: every command here reports it is not built yet. */
#include <stdio.h>

#include "client.h"

int cn_cmd_diff(int argc, char **argv)
{
    fprintf(stderr, "canopy diff: not implemented yet\n");
    return CN_EXIT_FAIL;
}

