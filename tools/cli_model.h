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
int gem_cmd_model_check(int argc, char **argv); /* the decoder against a reference file */

#endif /* GEM_CLI_MODEL_H */

/* ---- helpers shared by the model subcommands (tools/cli_model.c) ---- */
#include <stddef.h>
#include <stdint.h>

#include "gem/model.h"

/* The ten largest logits: ids (10) in descending logit order, ties to the lower id.
 * logits (n), n >= 10. */
void cli_top10(const float *logits, int64_t n, int32_t ids[10]);

/* Parses "1,2,3" into a new array (*ids, *n); every id in [0, n_vocab).
 * Returns 0, or -1 with a message printed for `cmd`. */
int cli_parse_tokens(const char *cmd, const char *s, int64_t n_vocab, int32_t **ids, int64_t *n);

/* Parses --attn baseline|fused. 0 or -1 (message printed). */
int cli_parse_attn(const char *cmd, const char *s, gem_route *out);

/* Loads the model at `path`; prints "gem <cmd>: <path>: <why>" and returns -1 on
 * error. */
int cli_load_model(const char *cmd, const char *path, gem_model **out);

/* Parses --backend cpu|cuda of the model commands. 0 or -1 (message printed). */
int cli_parse_model_backend(const char *cmd, const char *s, gem_backend *out);

/* Parses --random-weights S (an integer >= 1). 0 or -1 (message printed). */
int cli_parse_random_weights(const char *cmd, const char *s, uint64_t *out);

/* Puts the model's weights where the backend runs: nothing on the CPU; on CUDA
 * gem_model_upload(m, random_seed) with progress and the bytes held. A random_seed
 * other than 0 is refused on the CPU (it generates device weights). 0, or -1 with a
 * message printed for `cmd`. */
int cli_model_to_backend(const char *cmd, gem_model *m, gem_backend backend,
                         uint64_t random_seed);

/* Model files are digested up to this size (the receipts' own limit is 4 GiB; a
 * Gemma 4 31B file holds some 17-62 GB). */
#define CLI_MODEL_MAX_DIGEST_BYTES ((uint64_t)1 << 40)

/* The SHA-256 of a model file (at most CLI_MODEL_MAX_DIGEST_BYTES) into hex (65).
 * 0, or -1 when it cannot be read. */
int cli_model_file_sha256(const char *path, char hex[65]);

/* The digest of the weights a run used into hex (65): the file's SHA-256, or with
 * random_seed != 0 (weights generated on the GPU) the SHA-256 of
 * "gem-device-random-weights:<file sha256>:seed=<seed>", which binds the file's vectors
 * and the seed of its matrices. 0, or -1 when the file cannot be read. */
int cli_weights_sha256(const char *path, uint64_t random_seed, char hex[65]);

/* Checks the route of the full layers against --k-from-v (which needs the fused route):
 * 0, or -1 with a message printed for `cmd`. */
int cli_check_k_from_v(const char *cmd, int k_from_v, gem_route route);

/* One line (no newline) into buf (cap) on the session's KV cache memory:
 * "KV caches 12.3 MB" and, where layers store V alone, " (K rebuilt from V in N full
 * layers: 4.5 MB saved, half of their caches; 16.8 MB with K stored)". */
void cli_kv_memory_line(const gem_session *s, char *buf, size_t cap);

/* "quantized matrices repacked for the CPU's integer products (ISA): N MB ..." into buf (cap) when the
 * model holds such a copy (gem_model_cpu_packed_bytes); 0 then, -1 (buf empty) when not. */
int cli_packed_line(const gem_model *m, char *buf, size_t cap);

/* Evaluates ids (n) from the session's current position; logits (n_vocab)
 * receives the last position's logits. Progress every `every` tokens on stderr
 * (0 = none). Returns a gem_status (message printed for `cmd` on error). */
gem_status cli_prefill(const char *cmd, gem_session *s, const int32_t *ids, int64_t n,
                       float *logits, int64_t every);
