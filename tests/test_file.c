/*
 * Files: inputs read once and only when regular and within their limit,
 * digests confined to a root, outputs refused up front over anything that is
 * not a regular file (or is an input), atomic writes that keep links and
 * permissions, and JSON receipts loaded from the bytes they are digested from.
 */
#define _XOPEN_SOURCE 700 /* symlink, mkdtemp, mkfifo */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gem/check.h"
#include "gem/file.h"
#include "gem/receipt.h"
#include "tcheck.h"

static char dir[64];

static const char *at(const char *name)
{
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int is_regular(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The non-regular things a path can name, made once under dir. */
static const char *specials[8];
static size_t n_specials;

static void add_special(const char *path) { specials[n_specials++] = strdup(path); }

static size_t make_specials(const char *names[8])
{
    if (!n_specials) {
        TCHECK(mkdir(at("a-dir"), 0755) == 0);
        add_special(at("a-dir"));
        if (mkfifo(at("a-fifo"), 0644) == 0)
            add_special(at("a-fifo"));
        if (symlink("/dev/null", at("link-to-dev")) == 0)
            add_special(at("link-to-dev"));
        if (symlink(at("a-dir"), at("link-to-dir")) == 0)
            add_special(at("link-to-dir"));
        if (symlink(at("nothing-here"), at("link-to-nothing")) == 0)
            add_special(at("link-to-nothing"));
        add_special("/dev/null");
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa;
        memset(&sa, 0, sizeof sa);
        sa.sun_family = AF_UNIX;
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", at("a-socket"));
        if (s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof sa) == 0)
            add_special(at("a-socket"));
        if (s >= 0)
            close(s);
    }
    memcpy(names, specials, sizeof specials);
    return n_specials;
}

static void test_read(void)
{
    char *data = NULL, why[256];
    size_t len = 0;
    put(at("r.json"), "{\"a\": 1}\n");
    TCHECK_STATUS(gem_file_read(at("r.json"), 100, &data, &len, why, sizeof why), GEM_OK);
    TCHECK(len == 9 && data && !strcmp(data, "{\"a\": 1}\n"));
    free(data);
    /* The limit is exact: 9 bytes fit in 9, not in 8. */
    TCHECK_STATUS(gem_file_read(at("r.json"), 9, &data, &len, why, sizeof why), GEM_OK);
    free(data);
    TCHECK_STATUS(gem_file_read(at("r.json"), 8, &data, &len, why, sizeof why), GEM_ERR_IO);
    TCHECK(data == NULL && len == 0 && strstr(why, "limit"));
    put(at("empty"), "");
    TCHECK_STATUS(gem_file_read(at("empty"), 8, &data, &len, why, sizeof why), GEM_OK);
    TCHECK(len == 0 && data && data[0] == '\0');
    free(data);
    TCHECK_STATUS(gem_file_read(at("missing"), 8, &data, &len, why, sizeof why), GEM_ERR_IO);
    TCHECK(strstr(why, "No such file") != NULL);
    TCHECK_STATUS(gem_file_read(NULL, 8, &data, &len, why, sizeof why), GEM_ERR_NULL);
    TCHECK_STATUS(gem_file_read(at("r.json"), 8, NULL, &len, why, sizeof why), GEM_ERR_NULL);
    /* A symlink to a regular file is read through. */
    TCHECK(symlink(at("r.json"), at("link-to-r")) == 0);
    TCHECK_STATUS(gem_file_read(at("link-to-r"), 100, &data, &len, NULL, 0), GEM_OK);
    TCHECK(len == 9);
    free(data);

    /* Every kind of non-regular input is refused, and none blocks (a FIFO
     * with no writer would hang a plain open or read). */
    const char *sp[8];
    size_t n = make_specials(sp);
    TCHECK(n >= 6);
    for (size_t i = 0; i < n; i++) {
        gem_status st = gem_file_read(sp[i], 1 << 20, &data, &len, why, sizeof why);
        if (!TCHECK(st == GEM_ERR_IO && data == NULL))
            fprintf(stderr, "     read %s: %s\n", sp[i], gem_status_name(st));
        gem_file_digest d;
        TCHECK_STATUS(gem_file_digest_path(sp[i], 1 << 20, &d, why, sizeof why), GEM_ERR_IO);
        char hex[65];
        TCHECK_STATUS(gem_sha256_file_hex(sp[i], hex), GEM_ERR_IO);
    }
    char hex[65];
    TCHECK_STATUS(gem_sha256_file_hex("/dev/zero", hex), GEM_ERR_IO);
}

static void test_digest(void)
{
    gem_file_digest d;
    char why[256];
    put(at("abc"), "abc");
    TCHECK_STATUS(gem_file_digest_path(at("abc"), 3, &d, why, sizeof why), GEM_OK);
    TCHECK(!strcmp(d.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    TCHECK(d.bytes == 3 && d.head_len == 3 && !memcmp(d.head, "abc", 3));
    TCHECK_STATUS(gem_file_digest_path(at("abc"), 2, &d, why, sizeof why), GEM_ERR_IO);
    char hex[65];
    TCHECK_STATUS(gem_sha256_file_hex(at("abc"), hex), GEM_OK);
    TCHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));

    /* Under a root: inside passes, every way out is refused. */
    TCHECK(mkdir(at("root"), 0755) == 0);
    TCHECK(mkdir(at("root/src"), 0755) == 0);
    put(at("root/src/a.cu"), "abc");
    put(at("outside.cu"), "abc");
    TCHECK(symlink("a.cu", at("root/src/inner-link.cu")) == 0);
    TCHECK(symlink(at("outside.cu"), at("root/src/leaves.cu")) == 0);
    TCHECK(symlink(dir, at("root/up")) == 0);
    const char *root = at("root");
    TCHECK_STATUS(gem_file_digest_under(root, "src/a.cu", 100, &d, why, sizeof why), GEM_OK);
    TCHECK(!strcmp(d.sha256, hex));
    TCHECK_STATUS(gem_file_digest_under(root, "src/inner-link.cu", 100, &d, why, sizeof why),
                  GEM_OK);
    TCHECK_STATUS(gem_file_digest_under(root, "src/leaves.cu", 100, &d, why, sizeof why),
                  GEM_ERR_PARAM);
    TCHECK(strstr(why, "leaves the root") != NULL);
    TCHECK_STATUS(gem_file_digest_under(root, "up/outside.cu", 100, &d, why, sizeof why),
                  GEM_ERR_PARAM);
    static const char *const bad_rel[] = {"/etc/passwd", "../outside.cu", "src/../src/a.cu",
                                          "./src/a.cu", "src//a.cu", "src/a.cu/", ""};
    for (size_t i = 0; i < sizeof bad_rel / sizeof bad_rel[0]; i++)
        TCHECK_STATUS(gem_file_digest_under(root, bad_rel[i], 100, &d, why, sizeof why),
                      GEM_ERR_PARAM);
    TCHECK_STATUS(gem_file_digest_under(root, "src/missing.cu", 100, &d, why, sizeof why),
                  GEM_ERR_IO);
    TCHECK(symlink("/dev/zero", at("root/src/zero.cu")) == 0);
    TCHECK(mkfifo(at("root/src/fifo.cu"), 0644) == 0);
    TCHECK(mkdir(at("root/src/dir.cu"), 0755) == 0);
    TCHECK_STATUS(gem_file_digest_under(root, "src/fifo.cu", 100, &d, why, sizeof why),
                  GEM_ERR_IO);
    TCHECK_STATUS(gem_file_digest_under(root, "src/dir.cu", 100, &d, why, sizeof why),
                  GEM_ERR_IO);
    /* /dev/zero is outside the root; a root of "/" would still refuse a device. */
    TCHECK_STATUS(gem_file_digest_under(root, "src/zero.cu", 100, &d, why, sizeof why),
                  GEM_ERR_PARAM);
    TCHECK_STATUS(gem_file_digest_under("/", "dev/zero", 100, &d, why, sizeof why), GEM_ERR_IO);
    TCHECK_STATUS(gem_file_digest_under(NULL, "src/a.cu", 100, &d, why, sizeof why),
                  GEM_ERR_NULL);
}

static void test_output_check(void)
{
    char why[512];
    put(at("in.json"), "{}");
    put(at("old.json"), "{}");
    TCHECK(link(at("in.json"), at("hard-in.json")) == 0);
    TCHECK(symlink(at("in.json"), at("link-in.json")) == 0);
    TCHECK(symlink(at("old.json"), at("link-old.json")) == 0);
    const char *inputs[2] = {at("in.json"), NULL};

    TCHECK_STATUS(gem_file_output_check(at("new.json"), inputs, 2, why, sizeof why), GEM_OK);
    TCHECK_STATUS(gem_file_output_check(at("old.json"), inputs, 2, why, sizeof why), GEM_OK);
    TCHECK_STATUS(gem_file_output_check(at("link-old.json"), inputs, 2, why, sizeof why),
                  GEM_OK);
    /* The input itself, by name, through a hard link and through a symlink. */
    const char *same[3] = {at("in.json"), at("hard-in.json"), at("link-in.json")};
    for (int i = 0; i < 3; i++) {
        TCHECK_STATUS(gem_file_output_check(same[i], inputs, 2, why, sizeof why), GEM_ERR_IO);
        TCHECK(strstr(why, "same file as the input") != NULL);
    }
    /* Everything that is not a regular file. */
    const char *sp[8];
    size_t n = make_specials(sp);
    for (size_t i = 0; i < n; i++) {
        gem_status st = gem_file_output_check(sp[i], NULL, 0, why, sizeof why);
        if (!TCHECK(st == GEM_ERR_IO && !strchr(why, '\n')))
            fprintf(stderr, "     output %s: %s\n", sp[i], gem_status_name(st));
    }
    TCHECK_STATUS(gem_file_output_check(at("no-dir/x.json"), NULL, 0, why, sizeof why),
                  GEM_ERR_IO);
    TCHECK_STATUS(gem_file_output_check(at("in.json/x.json"), NULL, 0, why, sizeof why),
                  GEM_ERR_IO);
    TCHECK_STATUS(gem_file_output_check(at("a-dir/"), NULL, 0, why, sizeof why), GEM_ERR_IO);
    TCHECK_STATUS(gem_file_output_check("", NULL, 0, why, sizeof why), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_file_output_check(NULL, NULL, 0, why, sizeof why), GEM_ERR_NULL);
    TCHECK_STATUS(gem_file_output_check(at("x"), NULL, 1, why, sizeof why), GEM_ERR_NULL);
}

static void test_write(void)
{
    char why[512];
    /* New file, then over a regular file: content replaced, mode kept. */
    TCHECK_STATUS(gem_file_write_atomic(at("w.txt"), "one", 3, why, sizeof why), GEM_OK);
    chmod(at("w.txt"), 0640);
    TCHECK_STATUS(gem_file_write_atomic(at("w.txt"), "two!", 4, why, sizeof why), GEM_OK);
    char *data = NULL;
    size_t len = 0;
    gem_file_read(at("w.txt"), 100, &data, &len, NULL, 0);
    TCHECK(data && len == 4 && !memcmp(data, "two!", 4));
    free(data);
    struct stat st;
    TCHECK(stat(at("w.txt"), &st) == 0 && (st.st_mode & 0777) == 0640);
    /* Through a symlink to a regular file: the target changes, the link stays. */
    TCHECK(symlink(at("w.txt"), at("w-link")) == 0);
    TCHECK_STATUS(gem_file_write_atomic(at("w-link"), "three", 5, why, sizeof why), GEM_OK);
    struct stat lst;
    TCHECK(lstat(at("w-link"), &lst) == 0 && S_ISLNK(lst.st_mode));
    gem_file_read(at("w.txt"), 100, &data, &len, NULL, 0);
    TCHECK(data && len == 5);
    free(data);
    /* Never over a device, a directory or a link to either; nothing is left behind. */
    const char *sp[8];
    size_t n = make_specials(sp);
    for (size_t i = 0; i < n; i++)
        TCHECK_STATUS(gem_file_write_atomic(sp[i], "x", 1, why, sizeof why), GEM_ERR_IO);
    struct stat dn;
    TCHECK(stat("/dev/null", &dn) == 0 && S_ISCHR(dn.st_mode));
    TCHECK(lstat(at("link-to-dev"), &lst) == 0 && S_ISLNK(lst.st_mode));
    /* No temporary file survives a failure. */
    chmod(at("a-dir"), 0555);
    int root_user = access(at("a-dir"), W_OK) == 0; /* root writes anyway */
    gem_status st2 = gem_file_write_atomic(at("a-dir/x"), "x", 1, why, sizeof why);
    TCHECK(root_user ? st2 == GEM_OK : st2 == GEM_ERR_IO);
    chmod(at("a-dir"), 0755);
    unlink(at("a-dir/x"));
    TCHECK(rmdir(at("a-dir")) == 0 || errno == ENOENT);
    TCHECK_STATUS(gem_file_write_atomic(NULL, "x", 1, why, sizeof why), GEM_ERR_NULL);
    TCHECK_STATUS(gem_file_write_atomic(at("w.txt"), NULL, 1, why, sizeof why), GEM_ERR_NULL);
}

static void test_receipt_load_save(void)
{
    char why[512], sha[65];
    json_t *doc = NULL;
    put(at("good.json"), "{\"schema\": \"x\", \"n\": 1}\n");
    TCHECK_STATUS(gem_receipt_load(at("good.json"), 1000, &doc, sha, why, sizeof why), GEM_OK);
    /* The digest is of the very bytes parsed. */
    char want[65];
    const char *text = "{\"schema\": \"x\", \"n\": 1}\n";
    gem_sha256_hex(text, strlen(text), want);
    TCHECK(doc && !strcmp(sha, want));
    json_decref(doc);
    put(at("trunc.json"), "{\"schema\": ");
    TCHECK_STATUS(gem_receipt_load(at("trunc.json"), 1000, &doc, sha, why, sizeof why),
                  GEM_ERR_FORMAT);
    TCHECK(doc == NULL && strstr(why, "line") != NULL);
    put(at("array.json"), "[1, 2]");
    TCHECK_STATUS(gem_receipt_load(at("array.json"), 1000, &doc, sha, why, sizeof why),
                  GEM_ERR_FORMAT);
    put(at("dup.json"), "{\"a\": 1, \"a\": 2}");
    TCHECK_STATUS(gem_receipt_load(at("dup.json"), 1000, &doc, sha, why, sizeof why),
                  GEM_ERR_FORMAT);
    put(at("nul.json"), "{\"a\": 1}");
    FILE *f = fopen(at("nul.json"), "ab");
    if (f) {
        fputc(0, f);
        fclose(f);
    }
    TCHECK_STATUS(gem_receipt_load(at("nul.json"), 1000, &doc, sha, why, sizeof why),
                  GEM_ERR_FORMAT);
    TCHECK_STATUS(gem_receipt_load(at("good.json"), 10, &doc, sha, why, sizeof why), GEM_ERR_IO);
    TCHECK_STATUS(gem_receipt_load("/dev/zero", 1000, &doc, sha, why, sizeof why), GEM_ERR_IO);

    json_t *d = json_pack("{s:s}", "schema", "x");
    TCHECK_STATUS(gem_receipt_save("/dev/null", d, why, sizeof why), GEM_ERR_IO);
    TCHECK(strstr(why, "character device") != NULL);
    TCHECK_STATUS(gem_receipt_save(at("saved.json"), d, why, sizeof why), GEM_OK);
    TCHECK(is_regular(at("saved.json")));
    json_decref(d);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/gem_file_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_read();
    test_digest();
    test_output_check();
    test_write();
    test_receipt_load_save();
    int rc = tcheck_summary("test_file");
    for (size_t i = 0; i < n_specials; i++)
        free((void *)specials[i]);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "test_file: could not remove %s\n", dir);
    return rc;
}
