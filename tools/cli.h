/*
 * gem command line: the subcommands and the small helpers they share
 * (strict number parsing, progress lines, provenance for receipts).
 */
#ifndef GEM_CLI_H
#define GEM_CLI_H

#include <stddef.h>
#include <stdint.h>

/* Subcommands. Each takes argv with argv[0] = the subcommand's name and
 * returns a process exit status: 0 success, 1 a check or gate failed,
 * 2 bad usage or input. Each prints its own help for -h / --help. */
int gem_cmd_run(int argc, char **argv);          /* the main job: one decode step */
int gem_cmd_merge_check(int argc, char **argv);  /* gem-online-merge-check */
int gem_cmd_analyze(int argc, char **argv);      /* fail-closed analyzers */
int gem_cmd_diff(int argc, char **argv);         /* operator differentials */
int gem_cmd_bench(int argc, char **argv);        /* ABBA timing */
int gem_cmd_resources(int argc, char **argv);    /* CUDA resource receipt */

/* Strict parsers: the whole string must be a number in [lo, hi].
 * Return 0 on success, -1 otherwise (nothing written). */
int cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_u64(const char *s, uint64_t *out);
int cli_parse_f64(const char *s, double *out);
/* Comma-separated list of integers in [lo, hi] into out (cap entries);
 * *n = how many. "8191,8192" or "64K" / "128K" suffixes (x1024) allowed. */
int cli_parse_i64_list(const char *s, int64_t lo, int64_t hi, int64_t *out, size_t cap,
                       size_t *n);

/* Prints "gem <cmd>: <message>" plus newline on stderr; for usage/input errors. */
void cli_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Progress on stderr: one line per call, prefixed with the elapsed seconds
 * since the first call. Silent when GEM_QUIET is set in the environment. */
void cli_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Monotonic clock in seconds. */
double cli_now(void);

/* The source tree's git commit ("<40 hex>", "<40 hex>-dirty"), the value of
 * the GEM_GIT_COMMIT environment variable when git is not available, or
 * "unknown". Static storage. */
const char *cli_git_commit(void);

#endif /* GEM_CLI_H */
