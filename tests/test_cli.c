/*
 * The command line's shared helpers: decimal-only number parsing (no octal,
 * hex, spaces, signs where none belong, overflow or underflow), escaping for
 * one terminal line, one-line error messages, output and memory pre-checks,
 * and the commit ids receipts may carry.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tcheck.h"

static void test_i64(void)
{
    int64_t v = 0;
    struct {
        const char *s;
        int64_t want;
    } good[] = {{"0", 0},           {"8191", 8191},  {"-5", -5},
                {"64K", 65536},     {"128k", 131072}, {"1M", 1048576},
                {"9223372036854775807", INT64_MAX}, {"-9223372036854775808", INT64_MIN},
                {"-0", 0}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        v = 123;
        if (!TCHECK(cli_parse_i64(good[i].s, INT64_MIN, INT64_MAX, &v) == 0 && v == good[i].want))
            fprintf(stderr, "     '%s'\n", good[i].s);
    }
    /* Every other way of writing a number is refused: octal-looking, hex,
     * spaces, '+', junk, empty, overflow (with and without a suffix). */
    static const char *const bad[] = {"010",  "0x10", "0X10", " 5",  "5 ",  "+5",  "5x", "",
                                      "-",    "K",    "5KK",  "1e3", "5.0", "--5", "0010",
                                      "9223372036854775808", "-9223372036854775809",
                                      "9007199254740992K", "8796093022208M", "\t7", "7\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 77;
        if (!TCHECK(cli_parse_i64(bad[i], INT64_MIN, INT64_MAX, &v) == -1 && v == 77))
            fprintf(stderr, "     accepted '%s'\n", bad[i]);
    }
    TCHECK(cli_parse_i64("5", 6, 10, &v) == -1);
    TCHECK(cli_parse_i64("11", 6, 10, &v) == -1);
    TCHECK(cli_parse_i64("8K", 1, 8192, &v) == 0 && v == 8192);
    TCHECK(cli_parse_i64("8K", 1, 8191, &v) == -1);
    TCHECK(cli_parse_i64(NULL, 0, 1, &v) == -1);
    TCHECK(cli_parse_i64("1", 0, 1, NULL) == -1);

    int64_t list[4];
    size_t n = 0;
    TCHECK(cli_parse_i64_list("8191,64K,1", 1, 1 << 20, list, 4, &n) == 0 && n == 3 &&
           list[1] == 65536);
    static const char *const bad_lists[] = {"", ",", "1,", ",1", "1,,2", "1,010", "1,0x2",
                                            "1,2,3,4,5", "1, 2"};
    for (size_t i = 0; i < sizeof bad_lists / sizeof bad_lists[0]; i++)
        TCHECK(cli_parse_i64_list(bad_lists[i], 1, 1 << 20, list, 4, &n) == -1);
}

static void test_u64(void)
{
    uint64_t v = 0;
    TCHECK(cli_parse_u64("0", &v) == 0 && v == 0);
    TCHECK(cli_parse_u64("20260501", &v) == 0 && v == 20260501);
    TCHECK(cli_parse_u64("18446744073709551615", &v) == 0 && v == UINT64_MAX);
    static const char *const bad[] = {"010", "0x10", "-1", "+1", " 1", "1 ", "",
                                      "18446744073709551616", "99999999999999999999", "1e3",
                                      "1K", "00"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 9;
        if (!TCHECK(cli_parse_u64(bad[i], &v) == -1 && v == 9))
            fprintf(stderr, "     accepted '%s'\n", bad[i]);
    }
}

static void test_cache_size(void)
{
    static const struct {
        const char *s;
        uint64_t want;
    } good[] = {{"32K\n", 32768}, {"1024K", 1048576}, {"300M\n", 314572800},
                {"1G", 1073741824}, {"4096", 4096}, {"0K", 0}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        uint64_t v = 7;
        if (!TCHECK(cli_parse_cache_size(good[i].s, &v) == 0 && v == good[i].want))
            fprintf(stderr, "     '%s'\n", good[i].s);
    }
    static const char *bad[] = {"", "\n", "K", "32KK", "32 K", "32k", "-1K", "32K\n\n",
                                "032K", "18014398509481984K", "18446744073709551616"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint64_t v = 9;
        if (!TCHECK(cli_parse_cache_size(bad[i], &v) == -1 && v == 9))
            fprintf(stderr, "     '%s'\n", bad[i]);
    }
    uint64_t v = 0;
    TCHECK(cli_parse_cache_size(NULL, &v) == -1 && cli_parse_cache_size("1K", NULL) == -1);
    /* this machine's answer is 0 (not known) or a cache of at least 1 KiB */
    const uint64_t llc = cli_host_llc_bytes();
    TCHECK(llc == 0 || llc >= 1024);
}

static void test_floats(void)
{
    double d = 0;
    struct {
        const char *s;
        double want;
    } good[] = {{"0", 0.0},       {"0.25", 0.25}, {"-1.5", -1.5}, {"1e-3", 1e-3},
                {"2.5E+2", 250.0}, {".5", 0.5},    {"5.", 5.0},    {"+3", 3.0},
                {"0.0", 0.0},     {"1e-300", 1e-300}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        d = 123;
        if (!TCHECK(cli_parse_f64(good[i].s, &d) == 0 && d == good[i].want))
            fprintf(stderr, "     '%s'\n", good[i].s);
    }
    /* Hex floats, inf/nan, spaces, junk, overflow and underflow are refused. */
    static const char *const bad[] = {"0x1p3", "inf", "-inf", "nan", "infinity", " 1", "1 ",
                                      "",      ".",   "e3",   "1e",  "1e+",      "1.2.3", "1e400",
                                      "1e-400", "2e-310", "01.5", "1,5", "--1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        d = 7;
        if (!TCHECK(cli_parse_f64(bad[i], &d) == -1 && d == 7))
            fprintf(stderr, "     accepted '%s'\n", bad[i]);
    }
    float f = 0;
    TCHECK(cli_parse_f32("0.0441941738", 0.0f, FLT_MAX, &f) == 0 && f == 0.0441941738f);
    TCHECK(cli_parse_f32("1.0", 0.0f, FLT_MAX, &f) == 0 && f == 1.0f);
    /* Underflow and overflow in float, though fine as doubles. */
    f = 5;
    TCHECK(cli_parse_f32("1e-50", 0.0f, FLT_MAX, &f) == -1 && f == 5);
    TCHECK(cli_parse_f32("1e-40", 0.0f, FLT_MAX, &f) == -1); /* a float subnormal */
    TCHECK(cli_parse_f32("1e39", 0.0f, FLT_MAX, &f) == -1);
    TCHECK(cli_parse_f32("3.5e38", 0.0f, FLT_MAX, &f) == -1);
    TCHECK(cli_parse_f32("0", 0.0f, FLT_MAX, &f) == 0 && f == 0.0f);
    TCHECK(cli_parse_f32("-1", 0.0f, FLT_MAX, &f) == -1); /* range */
    TCHECK(cli_parse_f32("2", 0.0f, 1.0f, &f) == -1);
    TCHECK(cli_parse_f32("0x1p3", 0.0f, FLT_MAX, &f) == -1);
}

static void test_escape(void)
{
    char out[256];
    /* Every ASCII control character and DEL is escaped; printable ASCII is not. */
    int all_escaped = 1;
    for (int c = 1; c < 0x80; c++) {
        char in[2] = {(char)c, 0};
        cli_escape(in, out, sizeof out);
        const int control = c < 0x20 || c == 0x7F;
        for (const char *p = out; *p; p++)
            all_escaped &= (unsigned char)*p >= 0x20 && *p != 0x7F;
        all_escaped &= control ? out[0] == '\\' && strlen(out) >= 2 : !strcmp(out, in);
    }
    TCHECK(all_escaped);
    cli_escape("a\nb\rc\td\x1b[31m", out, sizeof out);
    TCHECK(!strcmp(out, "a\\nb\\rc\\td\\x1b[31m"));
    /* UTF-8: kept when valid and not a control or a direction override. */
    cli_escape("caf\xc3\xa9 \xe2\x86\x92", out, sizeof out);
    TCHECK(!strcmp(out, "caf\xc3\xa9 \xe2\x86\x92"));
    static const struct {
        const char *in, *want;
    } esc[] = {
        {"\xc2\x9b" "31m", "\\xc2\\x9b31m"}, /* C1 CSI */
        {"\xc2\x85", "\\xc2\\x85"},          /* C1 NEL */
        {"\x9b", "\\x9b"},                   /* a lone continuation byte */
        {"\xc0\xaf", "\\xc0\\xaf"},          /* overlong */
        {"\xed\xa0\x80", "\\xed\\xa0\\x80"}, /* a surrogate */
        {"\xe2\x80\xae", "\\xe2\\x80\\xae"}, /* right-to-left override */
        {"\xe2\x80\xa8", "\\xe2\\x80\\xa8"}, /* line separator */
        {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"}, /* beyond U+10FFFF */
        {"\xe2\x86", "\\xe2\\x86"},          /* truncated */
        {"\xff", "\\xff"},
    };
    for (size_t i = 0; i < sizeof esc / sizeof esc[0]; i++) {
        cli_escape(esc[i].in, out, sizeof out);
        if (!TCHECK(!strcmp(out, esc[i].want)))
            fprintf(stderr, "     case %zu gave '%s'\n", i, out);
    }
    /* Truncation: never longer than the buffer, never a split escape. */
    char small[8];
    size_t n = cli_escape("\n\n\n\n\n\n", small, sizeof small);
    TCHECK(n == strlen(small) && n < sizeof small && !strcmp(small, "\\n\\n..."));
    n = cli_escape("abcdefg", small, sizeof small);
    TCHECK(!strcmp(small, "abcdefg") && n == 7);
    n = cli_escape("abcdefgh", small, sizeof small);
    TCHECK(!strcmp(small, "abcd..."));
    cli_escape(NULL, out, sizeof out);
    TCHECK(!strcmp(out, "(null)"));
    TCHECK(cli_escape("x", out, 0) == 0);
}

/* Runs fn with stderr sent to a file; returns what it wrote (static). */
static const char *captured(void (*fn)(void))
{
    static char buf[8192];
    char path[] = "/tmp/gem_cli_err_XXXXXX";
    int fd = mkstemp(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t got = read(fd, buf, sizeof buf - 1);
    buf[got > 0 ? got : 0] = '\0';
    close(fd);
    unlink(path);
    return buf;
}

static void say_hostile(void) { cli_error("test", "bad value '%s'", "x\ny\x1b]0;title\x07z"); }

static char tmpdir[64];

static void check_dev_null(void)
{
    const char *in[1] = {NULL};
    cli_check_output("test", "--out", "/dev/null", in, 1);
}

static void check_memory(void) { cli_check_memory("test", "1048576 tokens", UINT64_MAX); }

static void test_error_lines(void)
{
    const char *e = captured(say_hostile);
    /* One line, nothing a terminal would act on. */
    TCHECK(!strcmp(e, "gem test: bad value 'x\\ny\\x1b]0;title\\x07z'\n"));
    e = captured(check_dev_null);
    TCHECK(strstr(e, "gem test: --out '/dev/null' is a character device") == e &&
           strchr(e, '\n') == e + strlen(e) - 1);
    e = captured(check_memory);
    TCHECK(strstr(e, "gem test: 1048576 tokens needs ") == e && strstr(e, "GiB are available") &&
           strchr(e, '\n') == e + strlen(e) - 1);

    snprintf(tmpdir, sizeof tmpdir, "/tmp/gem_cli_XXXXXX");
    TCHECK(mkdtemp(tmpdir) != NULL);
    char in[128], out[128];
    snprintf(in, sizeof in, "%s/in.json", tmpdir);
    snprintf(out, sizeof out, "%s/out.json", tmpdir);
    FILE *f = fopen(in, "w");
    if (f)
        fclose(f);
    const char *inputs[1] = {in};
    TCHECK(cli_check_output("test", "--out", out, inputs, 1) == 0);
    TCHECK(cli_check_output("test", "--out", in, inputs, 1) == 2);
    TCHECK(cli_check_output("test", "--out", tmpdir, inputs, 1) == 2);
    TCHECK(cli_check_memory("test", "a little", 1) == 0);
    TCHECK(cli_check_memory("test", "everything", UINT64_MAX) == 2);
    unlink(in);
    rmdir(tmpdir);
}

static void test_commits(void)
{
    static const char *const good[] = {"unknown", "cc7d09c",
                                       "0d0335debcb56968ed40b21686f4e2e5f9f12535",
                                       "0d0335debcb56968ed40b21686f4e2e5f9f12535-dirty"};
    static const char *const bad[] = {"",        "HEAD\nunknown", "cc7d09",  "CC7D09C",
                                      "abcdefg", "cc7d09c-clean", "cc7d09c ",
                                      "0d0335debcb56968ed40b21686f4e2e5f9f125350", NULL};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        TCHECK(cli_commit_ok(good[i]));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TCHECK(!cli_commit_ok(bad[i]));
    setenv("GEM_GIT_COMMIT", "HEAD\nunknown", 1);
    TCHECK(cli_commit_ok(cli_git_commit()));
}

int main(void)
{
    test_i64();
    test_u64();
    test_floats();
    test_cache_size();
    test_escape();
    test_error_lines();
    test_commits();
    return tcheck_summary("test_cli");
}
