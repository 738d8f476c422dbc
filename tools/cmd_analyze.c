/* PLACEHOLDER until the subcommand lands; replaced by its real implementation. */
#include <stdio.h>
#include "cli.h"
int gem_cmd_analyze(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "gem %s: not available in this build yet\n", argv[0]);
    return 2;
}
