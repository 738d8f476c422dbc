/*
 * gem command line: the model subcommands (GGUF, tokenizer, Gemma 4 decoder).
 * Same conventions as cli.h: argv[0] is the subcommand's name; the return value
 * is the exit status (0 success, 1 a check failed, 2 bad usage or input).
 */
#ifndef GEM_CLI_MODEL_H
#define GEM_CLI_MODEL_H

int gem_cmd_synth(int argc, char **argv);      /* seeded synthetic Gemma 4 GGUF writer */
int gem_cmd_generate(int argc, char **argv);   /* greedy generation, streaming */
int gem_cmd_model_diff(int argc, char **argv); /* baseline vs fused in the whole model */
int gem_cmd_profile(int argc, char **argv);    /* whole-token stage profile */
int gem_cmd_gguf(int argc, char **argv);       /* metadata and tensor listing */

#endif /* GEM_CLI_MODEL_H */
