/* gem-online-merge-check: the design's name for `gem merge-check`. */
#include "cli.h"

int main(int argc, char **argv)
{
    argv[0] = (char *)"gem-online-merge-check";
    return gem_cmd_merge_check(argc, argv);
}
