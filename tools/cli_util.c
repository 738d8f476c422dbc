/*
 * Helpers shared by the gem subcommands: strict decimal number parsing,
 * one-line error messages with control characters escaped, output and memory
 * pre-checks, progress lines, a monotonic clock and the source tree's git
 * commit.
 */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "gem/check.h"
#include "gem/file.h"

#ifndef GEM_SOURCE_DIR
#define GEM_SOURCE_DIR "."
#endif

/* Decimal digits at *p with no leading zero (a lone "0" is fine) into *v,
 * refusing anything above max. Advances *p past them. 0 or -1. */
static int decimal(const char **p, uint64_t max, uint64_t *v)
{
    const char *s = *p;
    if (*s < '0' || *s > '9')
        return -1;
    if (s[0] == '0' && s[1] >= '0' && s[1] <= '9')
        return -1; /* "010": octal elsewhere, ambiguous here */
    uint64_t x = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        const uint64_t d = (uint64_t)(*s - '0');
        if (x > (max - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    *p = s;
    *v = x;
    return 0;
}

int cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !out)
        return -1;
    const char *p = s;
    const int neg = *p == '-';
    if (neg)
        p++;
    uint64_t mag = 0;
    if (decimal(&p, (uint64_t)INT64_MAX + (neg ? 1u : 0u), &mag) != 0)
        return -1;
    /* K / M suffixes: x1024 / x1048576 (context lengths are written 64K). */
    uint64_t mul = 1;
    if (*p == 'K' || *p == 'k')
        mul = 1024, p++;
    else if (*p == 'M' || *p == 'm')
        mul = 1024 * 1024, p++;
    if (*p != '\0')
        return -1;
    const uint64_t limit = (uint64_t)INT64_MAX + (neg ? 1u : 0u);
    if (mag > limit / mul)
        return -1;
    mag *= mul;
    int64_t v;
    if (neg)
        v = mag == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)mag;
    else
        v = (int64_t)mag;
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !out)
        return -1;
    const char *p = s;
    uint64_t v = 0;
    if (decimal(&p, UINT64_MAX, &v) != 0 || *p != '\0')
        return -1;
    *out = v;
    return 0;
}

int cli_parse_f64(const char *s, double *out)
{
    if (!s || !out)
        return -1;
    /* The grammar first, so strtod never sees hex, inf, nan or spaces. */
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    if (p[0] == '0' && p[1] >= '0' && p[1] <= '9')
        return -1;
    size_t digits = 0;
    int nonzero = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++)
        nonzero |= *p != '0';
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            nonzero |= *p != '0';
    if (digits == 0)
        return -1;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (*p < '0' || *p > '9')
            return -1;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p != '\0')
        return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (end != p || !isfinite(v))
        return -1; /* overflow */
    if (nonzero && (v == 0.0 || fabs(v) < DBL_MIN))
        return -1; /* underflow to zero or a subnormal */
    if (errno == ERANGE && v != 0.0 && fabs(v) >= DBL_MIN)
        errno = 0; /* some libcs flag exact-boundary results */
    if (errno)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_f32(const char *s, float lo, float hi, float *out)
{
    double v = 0.0;
    if (!out || cli_parse_f64(s, &v) != 0)
        return -1;
    const float f = (float)v;
    if (!isfinite(f))
        return -1; /* beyond FLT_MAX */
    if (v != 0.0 && (f == 0.0f || fabsf(f) < FLT_MIN))
        return -1; /* underflows in float */
    if (!(f >= lo && f <= hi))
        return -1;
    *out = f;
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

/* The escaped form of the character at in[0] into piece (at most 16 bytes
 * plus NUL); returns how many input bytes it takes. */
static size_t escape_one(const unsigned char *in, char piece[17])
{
    const unsigned char c = in[0];
    if (c < 0x20 || c == 0x7F) {
        if (c == '\n')
            snprintf(piece, 17, "\\n");
        else if (c == '\r')
            snprintf(piece, 17, "\\r");
        else if (c == '\t')
            snprintf(piece, 17, "\\t");
        else
            snprintf(piece, 17, "\\x%02x", c);
        return 1;
    }
    if (c < 0x80) {
        piece[0] = (char)c;
        piece[1] = '\0';
        return 1;
    }
    /* UTF-8: the length, the range of the second byte, the code point. */
    size_t len = 0;
    unsigned char lo2 = 0x80, hi2 = 0xBF;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, cp = c & 0x1Fu;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, cp = c & 0x0Fu, lo2 = c == 0xE0 ? 0xA0 : 0x80, hi2 = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, cp = c & 0x07u, lo2 = c == 0xF0 ? 0x90 : 0x80, hi2 = c == 0xF4 ? 0x8F : 0xBF;
    int ok = len > 0;
    for (size_t i = 1; ok && i < len; i++) {
        const unsigned char b = in[i];
        ok = i == 1 ? (b >= lo2 && b <= hi2) : (b >= 0x80 && b <= 0xBF);
        cp = (cp << 6) | (b & 0x3Fu);
    }
    /* C1 controls, line and paragraph separators, bidirectional overrides. */
    if (ok && ((cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 ||
               (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069)))
        ok = 0;
    if (!ok) {
        snprintf(piece, 17, "\\x%02x", c);
        return 1;
    }
    memcpy(piece, in, len);
    piece[len] = '\0';
    return len;
}

size_t cli_escape(const char *in, char *out, size_t cap)
{
    if (!out || cap == 0)
        return 0;
    if (!in)
        in = "(null)";
    const unsigned char *u = (const unsigned char *)in;
    /* Does all of it fit? Then no "..." is needed. */
    size_t need = 0;
    char piece[17];
    for (size_t i = 0; u[i];) {
        i += escape_one(u + i, piece);
        need += strlen(piece);
    }
    const size_t room = need < cap ? cap - 1 : (cap > 4 ? cap - 4 : 0);
    size_t o = 0;
    for (size_t i = 0; u[i];) {
        const size_t took = escape_one(u + i, piece);
        const size_t pl = strlen(piece);
        if (o + pl > room)
            break;
        memcpy(out + o, piece, pl);
        o += pl;
        i += took;
    }
    if (need >= cap && cap > 4) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return o;
}

void cli_error(const char *cmd, const char *fmt, ...)
{
    char msg[2048], line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_escape(msg, line, sizeof line);
    fprintf(stderr, "gem %s: %s\n", cmd ? cmd : "", line);
}

int cli_check_output(const char *cmd, const char *what, const char *path,
                     const char *const *inputs, size_t n)
{
    char why[512];
    if (!path) {
        cli_error(cmd, "%s: no path given", what ? what : "output");
        return 2;
    }
    if (gem_file_output_check(path, inputs, n, why, sizeof why) != GEM_OK) {
        cli_error(cmd, "%s '%s' %s", what ? what : "output", path, why);
        return 2;
    }
    return 0;
}

int cli_check_memory(const char *cmd, const char *what, uint64_t need)
{
    uint64_t avail = 0;
    if (gem_mem_check(need, &avail) != GEM_ERR_NOMEM)
        return 0;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    cli_error(cmd, "%s needs %.2f GiB of memory, %.2f GiB are available", what ? what : "this",
              (double)need / gib, (double)avail / gib);
    return 2;
}

int cli_parse_cache_size(const char *s, uint64_t *bytes)
{
    uint64_t n = 0;
    if (!s || !bytes || decimal(&s, UINT64_MAX, &n) != 0)
        return -1;
    const uint64_t unit = *s == 'K' ? 1024u : *s == 'M' ? 1048576u : *s == 'G' ? 1073741824u : 1u;
    s += unit != 1u;
    if ((*s != '\0' && *s != '\n') || (s[0] == '\n' && s[1] != '\0') || n > UINT64_MAX / unit)
        return -1;
    *bytes = n * unit;
    return 0;
}

uint64_t cli_host_llc_bytes(void)
{
    uint64_t best = 0;
    for (int i = 0; i < 16; i++) {
        char path[96], text[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        const int is_insn = fgets(text, sizeof text, f) && !strncmp(text, "Instruction", 11);
        fclose(f);
        if (is_insn)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r")))
            continue;
        const char *p = fgets(text, sizeof text, f) ? text : "";
        fclose(f);
        uint64_t n = 0;
        if (cli_parse_cache_size(p, &n) == 0 && n > best)
            best = n;
    }
    return best;
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
    char msg[2048], line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_escape(msg, line, sizeof line);
    fprintf(stderr, "[%7.2fs] %s\n", cli_now() - t0, line);
}

int cli_commit_ok(const char *s)
{
    if (!s)
        return 0;
    if (!strcmp(s, "unknown"))
        return 1;
    size_t n = 0;
    while ((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))
        n++;
    return n >= 7 && n <= 40 && (s[n] == '\0' || !strcmp(s + n, "-dirty"));
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
    /* Only a commit id (7 to 40 hex digits, "-dirty" allowed) is taken from the
     * environment; anything else would carry text into every receipt. */
    const char *env = getenv("GEM_GIT_COMMIT");
    snprintf(commit, sizeof commit, "%s", cli_commit_ok(env) ? env : "unknown");
    return commit;
}
