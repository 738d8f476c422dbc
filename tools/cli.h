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

/* Strict decimal parsers: the whole string must be the number, written in
 * decimal digits, with no leading or trailing space, no leading zeros ("0"
 * itself is fine; "010" could be read as octal elsewhere, so it is refused)
 * and no hexadecimal, octal, "inf" or "nan" form. Each returns 0 on success,
 * -1 otherwise (nothing written). */

/* An integer in [lo, hi], optionally negative and optionally followed by K
 * (x1024) or M (x1048576): "8191", "64K". */
int cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* An unsigned 64-bit integer: digits only, no sign, at most 18446744073709551615. */
int cli_parse_u64(const char *s, uint64_t *out);
/* A finite double: [-+]digits[.digits][(e|E)[-+]digits] (or .digits). Refused:
 * a value too large for a double, and a non-zero value that underflows (to
 * zero or a subnormal). */
int cli_parse_f64(const char *s, double *out);
/* A float in [lo, hi], parsed as cli_parse_f64 and then rounded to float:
 * refused when the float overflows, or when a non-zero value underflows to
 * zero or a subnormal in float (so --scale 1e-50 is an error, not 0). */
int cli_parse_f32(const char *s, float lo, float hi, float *out);
/* Comma-separated list of integers in [lo, hi] into out (cap entries);
 * *n = how many. "8191,8192" or "64K" / "128K" suffixes (x1024) allowed;
 * each item as cli_parse_i64. */
int cli_parse_i64_list(const char *s, int64_t lo, int64_t hi, int64_t *out, size_t cap,
                       size_t *n);

/* Escapes `in` for one line on a terminal into out (cap >= 1 bytes, always
 * NUL-terminated; cut with "..." when it does not fit): ASCII control
 * characters and DEL become \n, \r, \t or \xNN, C1 control characters
 * (U+0080..U+009F) and bytes that are not valid UTF-8 become \xNN, and other
 * characters (printable ASCII, valid UTF-8 from U+00A0 on) are kept. A NULL
 * in gives "(null)". Returns the length written. */
size_t cli_escape(const char *in, char *out, size_t cap);

/* Prints "gem <cmd>: <message>" plus newline on stderr, one line whatever the
 * message holds (control characters escaped with cli_escape); for usage,
 * input and I/O errors. */
void cli_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Checks an output path before any work (gem_file_output_check): returns 0
 * when `path` may be written, else prints one line
 * "gem <cmd>: <what> '<path>' <why>" and returns 2. `inputs` (n entries, NULL
 * entries skipped) are the files the command reads; the output must not be
 * one of them. `what` names the option, e.g. "--out". */
int cli_check_output(const char *cmd, const char *what, const char *path,
                     const char *const *inputs, size_t n);

/* Checks, before allocation-heavy work, that `need` bytes fit in the memory
 * available (gem_mem_check): returns 0 when they do (or when the system does
 * not say how much is available), else prints one line
 * "gem <cmd>: <what> needs X GiB of memory, Y GiB are available" and
 * returns 2. */
int cli_check_memory(const char *cmd, const char *what, uint64_t need);

/* A cache size as Linux sysfs writes it ("32K", "1024K", "300M", "1G", bytes without a suffix,
 * one trailing newline allowed) into *bytes. 0, or -1 (and *bytes unchanged) for anything else
 * or a size above UINT64_MAX. */
int cli_parse_cache_size(const char *s, uint64_t *bytes);

/* Bytes of the largest data or unified cache of this machine's first CPU, its last level
 * (Linux sysfs, /sys/devices/system/cpu/cpu0/cache/index<N>/{type,size}); 0 when not known. */
uint64_t cli_host_llc_bytes(void);

/* Progress on stderr: one line per call, prefixed with the elapsed seconds
 * since the first call. Silent when GEM_QUIET is set in the environment. */
void cli_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Monotonic clock in seconds. */
double cli_now(void);

/* 1 when s is a commit as receipts record it: 7 to 40 lower-case hex digits,
 * optionally followed by "-dirty", or "unknown". */
int cli_commit_ok(const char *s);

/* The source tree's git commit ("<40 hex>", "<40 hex>-dirty"), the value of
 * the GEM_GIT_COMMIT environment variable when git is not available and it
 * passes cli_commit_ok, or "unknown". Static storage. */
const char *cli_git_commit(void);

#endif /* GEM_CLI_H */
