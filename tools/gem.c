/*
 * gem: the command-line entry point. `gem` alone runs the main job (one
 * decode step on the CPU); `gem <subcommand> --help` explains each tool.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_model.h"
#include "gem/attn.h"

typedef struct subcommand {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"run", gem_cmd_run, "one decode step at long context, checked and timed (the default)"},
    {"merge-check", gem_cmd_merge_check,
     "online-softmax merge audit against the double reference (gem-online-merge-check)"},
    {"diff", gem_cmd_diff, "operator differential of two routes on seeded inputs"},
    {"bench", gem_cmd_bench, "ABBA timing of two routes against measured read bandwidth"},
    {"resources", gem_cmd_resources, "CUDA kernel resource receipt"},
    {"analyze", gem_cmd_analyze, "fail-closed analyzers of receipts"},
    {"synth", gem_cmd_synth, "write a seeded random-weight Gemma 4 GGUF"},
    {"generate", gem_cmd_generate, "greedy text generation with the Gemma 4 decoder"},
    {"model-check", gem_cmd_model_check, "hold the decoder to a transformers reference file"},
    {"model-diff", gem_cmd_model_diff, "baseline vs fused attention in the whole model"},
    {"profile", gem_cmd_profile, "whole-token stage profile and speed against the memory floor"},
};

static void usage(FILE *f)
{
    fprintf(f,
            "gem %s: exact long-context decode attention\n\n"
            "usage: gem [subcommand] [options]    (no subcommand: gem run)\n\n"
            "subcommands:\n",
            GEM_VERSION);
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(f, "  %-12s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(f, "\n`gem <subcommand> --help` describes its options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            usage(stdout);
            return 0;
        }
        if (argc >= 2 && !strcmp(argv[1], "--version")) {
            printf("gem %s\n", GEM_VERSION);
            return 0;
        }
        /* Options without a subcommand belong to the main job. */
        argv[0] = (char *)"run";
        return gem_cmd_run(argc, argv);
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(argv[1], subcommands[i].name))
            return subcommands[i].fn(argc - 1, argv + 1);
    if (!strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "gem: unknown subcommand '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
