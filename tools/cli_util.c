/*
 * Helpers shared by the gem subcommands: strict number parsing, error and
 * progress lines, a monotonic clock and the source tree's git commit.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#ifndef GEM_SOURCE_DIR
#define GEM_SOURCE_DIR "."
#endif

int cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s)
        return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s)
        return -1;
    /* K / M suffixes: x1024 / x1048576 (context lengths are written 64K). */
    long long mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1024, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1024 * 1024, end++;
    if (*end != '\0')
        return -1;
    if (mul != 1 && (v > INT64_MAX / mul || v < INT64_MIN / mul))
        return -1;
    v *= mul;
    if (v < lo || v > hi)
        return -1;
    *out = (int64_t)v;
    return 0;
}

int cli_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end != '\0')
        return -1;
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_f64(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || v != v || v - v != 0.0)
        return -1; /* also rejects NaN and infinities */
    *out = v;
    return 0;
}

int cli_parse_i64_list(const char *s, int64_t lo, int64_t hi, int64_t *out, size_t cap,
                       size_t *n)
{
    if (!s || !*s || !out || !n)
        return -1;
    size_t count = 0;
    const char *p = s;
    char item[64];
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len >= sizeof item || count == cap)
            return -1;
        memcpy(item, p, len);
        item[len] = '\0';
        if (cli_parse_i64(item, lo, hi, &out[count]) != 0)
            return -1;
        count++;
        if (!comma)
            break;
        p = comma + 1;
    }
    *n = count;
    return 0;
}

void cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gem %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_progress(const char *fmt, ...)
{
    static double t0 = -1.0;
    if (getenv("GEM_QUIET"))
        return;
    if (t0 < 0)
        t0 = cli_now();
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%7.2fs] ", cli_now() - t0);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* First line of a command's output into buf; 0 on success. */
static int read_command(const char *cmd, char *buf, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    int ok = fgets(buf, (int)cap, p) != NULL;
    char drain[256];
    while (fgets(drain, sizeof drain, p)) /* let the command finish writing */
        ;
    int rc = pclose(p);
    if (!ok || rc != 0)
        return -1;
    buf[strcspn(buf, "\r\n")] = '\0';
    return 0;
}

const char *cli_git_commit(void)
{
    static char commit[96];
    if (commit[0])
        return commit;
    char head[64] = "", dirty[8] = "";
    if (read_command("git -C '" GEM_SOURCE_DIR "' rev-parse HEAD 2>/dev/null", head,
                     sizeof head) == 0 &&
        strlen(head) == 40) {
        int is_dirty = read_command("git -C '" GEM_SOURCE_DIR
                                    "' status --porcelain --untracked-files=no 2>/dev/null",
                                    dirty, sizeof dirty) == 0 &&
                       dirty[0] != '\0';
        snprintf(commit, sizeof commit, "%s%s", head, is_dirty ? "-dirty" : "");
        return commit;
    }
    const char *env = getenv("GEM_GIT_COMMIT");
    snprintf(commit, sizeof commit, "%s", env && *env ? env : "unknown");
    return commit;
}
