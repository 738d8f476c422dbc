/*
 * Files (include/gem/file.h): inputs read once and only when regular,
 * digests confined to a root, outputs checked up front and written
 * atomically only over regular files.
 */
#define _XOPEN_SOURCE 700 /* realpath, S_ISSOCK */

#include "gem/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

/* One line into why (may be NULL). */
static void say(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t cap, const char *fmt, ...)
{
    if (!why || cap == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
}

/* What a file is, in words, for a refusal. */
static const char *kind_of(mode_t m)
{
    if (S_ISREG(m))
        return "regular file";
    if (S_ISDIR(m))
        return "directory";
    if (S_ISCHR(m))
        return "character device";
    if (S_ISBLK(m))
        return "block device";
    if (S_ISFIFO(m))
        return "FIFO";
    if (S_ISSOCK(m))
        return "socket";
    if (S_ISLNK(m))
        return "symlink";
    return "special file";
}

/* Opens a regular file for reading without blocking on it and without
 * following a link in its last component when nofollow is set; dirfd is
 * AT_FDCWD or a directory. The type is checked before the open (so a device
 * is never opened) and again on the descriptor (so a file swapped in between
 * is caught). Returns the descriptor, or -1 after filling why. */
static int open_regular(int dirfd, const char *name, int nofollow, char *why, size_t cap)
{
    struct stat before, after;
    if (fstatat(dirfd, name, &before, nofollow ? AT_SYMLINK_NOFOLLOW : 0) != 0) {
        say(why, cap, "cannot open: %s", strerror(errno));
        return -1;
    }
    if (!S_ISREG(before.st_mode)) {
        say(why, cap, "is a %s, not a regular file", kind_of(before.st_mode));
        return -1;
    }
    int fd = openat(dirfd, name,
                    O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0) {
        say(why, cap, "cannot open: %s", strerror(errno));
        return -1;
    }
    if (fstat(fd, &after) != 0 || !S_ISREG(after.st_mode) || after.st_dev != before.st_dev ||
        after.st_ino != before.st_ino) {
        say(why, cap, "changed while it was opened");
        close(fd);
        return -1;
    }
    return fd;
}

gem_status gem_file_read(const char *path, size_t max_bytes, char **data, size_t *len, char *why,
                         size_t why_cap)
{
    if (data)
        *data = NULL;
    if (len)
        *len = 0;
    if (!path || !data || !len) {
        say(why, why_cap, "a required pointer is NULL");
        return GEM_ERR_NULL;
    }
    int fd = open_regular(AT_FDCWD, path, 0, why, why_cap);
    if (fd < 0)
        return GEM_ERR_IO;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 0) {
        say(why, why_cap, "cannot stat: %s", strerror(errno));
        close(fd);
        return GEM_ERR_IO;
    }
    if ((uint64_t)st.st_size > (uint64_t)max_bytes) {
        say(why, why_cap, "holds %lld bytes, more than the limit of %zu", (long long)st.st_size,
            max_bytes);
        close(fd);
        return GEM_ERR_IO;
    }
    /* Room for the size seen now, one more byte to notice growth, and the NUL. */
    size_t cap = (size_t)st.st_size + 2, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        say(why, why_cap, "out of memory");
        close(fd);
        return GEM_ERR_NOMEM;
    }
    gem_status rc = GEM_OK;
    for (;;) {
        if (n + 1 == cap) { /* full: the file grew; allow up to max_bytes + 1 */
            if (n > max_bytes) {
                say(why, why_cap, "grew past the limit of %zu bytes while it was read",
                    max_bytes);
                rc = GEM_ERR_IO;
                break;
            }
            /* Room for up to max_bytes + 1 bytes and the NUL: one byte past the
             * limit is how a file over it is noticed. */
            const size_t room = max_bytes - n;
            const size_t grow = (cap < room ? cap : room) + 1;
            char *nb = cap <= SIZE_MAX - grow ? realloc(buf, cap + grow) : NULL;
            if (!nb) {
                say(why, why_cap, "out of memory");
                rc = GEM_ERR_NOMEM;
                break;
            }
            buf = nb;
            cap += grow;
        }
        ssize_t got = read(fd, buf + n, cap - 1 - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            say(why, why_cap, "read failed: %s", strerror(errno));
            rc = GEM_ERR_IO;
            break;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    if (rc == GEM_OK && n > max_bytes) {
        say(why, why_cap, "holds more than the limit of %zu bytes", max_bytes);
        rc = GEM_ERR_IO;
    }
    if (rc != GEM_OK) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return GEM_OK;
}

static void to_hex(const unsigned char *md, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = '\0';
}

/* Streams an open regular file through SHA-256; closes fd. */
static gem_status digest_fd(int fd, uint64_t max_bytes, gem_file_digest *out, char *why,
                            size_t cap)
{
    gem_file_digest d;
    memset(&d, 0, sizeof d);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx) {
        close(fd);
        say(why, cap, "out of memory");
        return GEM_ERR_NOMEM;
    }
    unsigned char buf[1 << 16], md[32];
    unsigned int mdlen = 0;
    gem_status rc = GEM_OK;
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        say(why, cap, "SHA-256 is not available");
        rc = GEM_ERR_IO;
    }
    while (rc == GEM_OK) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            say(why, cap, "read failed: %s", strerror(errno));
            rc = GEM_ERR_IO;
            break;
        }
        if (got == 0)
            break;
        if ((uint64_t)got > max_bytes - d.bytes) {
            say(why, cap, "holds more than the limit of %llu bytes",
                (unsigned long long)max_bytes);
            rc = GEM_ERR_IO;
            break;
        }
        if (d.head_len < sizeof d.head) {
            size_t take = sizeof d.head - d.head_len;
            if (take > (size_t)got)
                take = (size_t)got;
            memcpy(d.head + d.head_len, buf, take);
            d.head_len += take;
        }
        d.bytes += (uint64_t)got;
        if (EVP_DigestUpdate(ctx, buf, (size_t)got) != 1) {
            say(why, cap, "SHA-256 failed");
            rc = GEM_ERR_IO;
        }
    }
    if (rc == GEM_OK && (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != 32)) {
        say(why, cap, "SHA-256 failed");
        rc = GEM_ERR_IO;
    }
    EVP_MD_CTX_free(ctx);
    close(fd);
    if (rc != GEM_OK)
        return rc;
    to_hex(md, d.sha256);
    *out = d;
    return GEM_OK;
}

gem_status gem_file_digest_path(const char *path, uint64_t max_bytes, gem_file_digest *out,
                                char *why, size_t why_cap)
{
    if (!path || !out) {
        say(why, why_cap, "a required pointer is NULL");
        return GEM_ERR_NULL;
    }
    int fd = open_regular(AT_FDCWD, path, 0, why, why_cap);
    if (fd < 0)
        return GEM_ERR_IO;
    return digest_fd(fd, max_bytes, out, why, why_cap);
}

/* A relative path with no empty, "." or ".." component. */
static int plain_relative(const char *p)
{
    if (!p[0] || p[0] == '/')
        return 0;
    for (const char *s = p;;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        if (!e)
            return 1;
        s = e + 1;
    }
}

gem_status gem_file_digest_under(const char *root, const char *rel, uint64_t max_bytes,
                                 gem_file_digest *out, char *why, size_t why_cap)
{
    if (!root || !rel || !out) {
        say(why, why_cap, "a required pointer is NULL");
        return GEM_ERR_NULL;
    }
    if (!plain_relative(rel)) {
        say(why, why_cap, "is not a relative path without '.', '..' or empty components");
        return GEM_ERR_PARAM;
    }
    char rroot[PATH_MAX], full[PATH_MAX], real[PATH_MAX];
    if (!realpath(root, rroot)) {
        say(why, why_cap, "the root cannot be resolved: %s", strerror(errno));
        return GEM_ERR_IO;
    }
    if ((size_t)snprintf(full, sizeof full, "%s/%s", rroot, rel) >= sizeof full) {
        say(why, why_cap, "the path is too long");
        return GEM_ERR_PARAM;
    }
    if (!realpath(full, real)) {
        say(why, why_cap, "cannot be resolved under the root: %s", strerror(errno));
        return GEM_ERR_IO;
    }
    size_t rl = strlen(rroot);
    int inside = rl == 1 ? real[0] == '/' && real[1] != '\0'
                         : strncmp(real, rroot, rl) == 0 && real[rl] == '/';
    if (!inside) {
        say(why, why_cap, "leaves the root through a symlink (it resolves to '%.300s')", real);
        return GEM_ERR_PARAM;
    }
    /* Walk the resolved path one component at a time, never following a link:
     * it has none now, so one that appears in between is refused. */
    int dfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        say(why, why_cap, "cannot open '/': %s", strerror(errno));
        return GEM_ERR_IO;
    }
    char *s = real + 1;
    for (;;) {
        char *slash = strchr(s, '/');
        if (!slash)
            break;
        *slash = '\0';
        int nfd = openat(dfd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        *slash = '/';
        close(dfd);
        if (nfd < 0) {
            say(why, why_cap, "a directory on its path changed: %s", strerror(errno));
            return GEM_ERR_IO;
        }
        dfd = nfd;
        s = slash + 1;
    }
    int fd = open_regular(dfd, s, 1, why, why_cap);
    close(dfd);
    if (fd < 0)
        return GEM_ERR_IO;
    return digest_fd(fd, max_bytes, out, why, why_cap);
}

/* The directory part of path into dir ("." when there is none). */
static int dir_of(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return (size_t)snprintf(dir, cap, ".") >= cap ? -1 : 0;
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n + 1 > cap)
        return -1;
    memcpy(dir, path, n);
    dir[n] = '\0';
    return 0;
}

static gem_status dir_writable(const char *path, char *why, size_t cap)
{
    char dir[PATH_MAX];
    struct stat st;
    if (dir_of(path, dir, sizeof dir) != 0) {
        say(why, cap, "the path is too long");
        return GEM_ERR_IO;
    }
    if (stat(dir, &st) != 0) {
        say(why, cap, "its directory '%.300s' cannot be used: %s", dir, strerror(errno));
        return GEM_ERR_IO;
    }
    if (!S_ISDIR(st.st_mode)) {
        say(why, cap, "'%.300s' is a %s, not a directory", dir, kind_of(st.st_mode));
        return GEM_ERR_IO;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        say(why, cap, "its directory '%.300s' is not writable: %s", dir, strerror(errno));
        return GEM_ERR_IO;
    }
    return GEM_OK;
}

/* The file an output at `path` replaces: *exists, its status in *st, and in
 * target the path to write (the link's target for a symlink to a regular
 * file). GEM_OK, or GEM_ERR_IO / GEM_ERR_PARAM with why. */
static gem_status output_target(const char *path, int *exists, struct stat *st, char *target,
                                size_t tcap, char *why, size_t cap)
{
    struct stat lst;
    *exists = 0;
    if (!path[0]) {
        say(why, cap, "the output path is empty");
        return GEM_ERR_PARAM;
    }
    size_t n = strlen(path);
    if (path[n - 1] == '/') {
        say(why, cap, "names a directory");
        return GEM_ERR_IO;
    }
    if (lstat(path, &lst) != 0) {
        if (errno != ENOENT) {
            say(why, cap, "cannot be used: %s", strerror(errno));
            return GEM_ERR_IO;
        }
        if ((size_t)snprintf(target, tcap, "%s", path) >= tcap) {
            say(why, cap, "the path is too long");
            return GEM_ERR_IO;
        }
        return dir_writable(target, why, cap);
    }
    if (S_ISLNK(lst.st_mode)) {
        if (stat(path, st) != 0) {
            say(why, cap, "is a symlink to nothing (%s)", strerror(errno));
            return GEM_ERR_IO;
        }
        if (!S_ISREG(st->st_mode)) {
            say(why, cap, "is a symlink to a %s", kind_of(st->st_mode));
            return GEM_ERR_IO;
        }
        char real[PATH_MAX];
        if (!realpath(path, real) || (size_t)snprintf(target, tcap, "%s", real) >= tcap) {
            say(why, cap, "its symlink cannot be resolved: %s", strerror(errno));
            return GEM_ERR_IO;
        }
    } else {
        *st = lst;
        if (!S_ISREG(st->st_mode)) {
            say(why, cap, "is a %s, not a regular file", kind_of(st->st_mode));
            return GEM_ERR_IO;
        }
        if ((size_t)snprintf(target, tcap, "%s", path) >= tcap) {
            say(why, cap, "the path is too long");
            return GEM_ERR_IO;
        }
    }
    *exists = 1;
    return dir_writable(target, why, cap);
}

gem_status gem_file_output_check(const char *path, const char *const *inputs, size_t n_inputs,
                                 char *why, size_t why_cap)
{
    if (!path || (!inputs && n_inputs > 0)) {
        say(why, why_cap, "a required pointer is NULL");
        return GEM_ERR_NULL;
    }
    int exists = 0;
    struct stat st;
    char target[PATH_MAX];
    gem_status rc = output_target(path, &exists, &st, target, sizeof target, why, why_cap);
    if (rc != GEM_OK || !exists)
        return rc;
    for (size_t i = 0; i < n_inputs; i++) {
        struct stat in;
        if (!inputs[i] || stat(inputs[i], &in) != 0)
            continue;
        if (in.st_dev == st.st_dev && in.st_ino == st.st_ino) {
            say(why, why_cap, "is the same file as the input '%.300s'", inputs[i]);
            return GEM_ERR_IO;
        }
    }
    return GEM_OK;
}

gem_status gem_file_write_atomic(const char *path, const void *data, size_t len, char *why,
                                 size_t why_cap)
{
    if (!path || (!data && len > 0)) {
        say(why, why_cap, "a required pointer is NULL");
        return GEM_ERR_NULL;
    }
    int exists = 0;
    struct stat st;
    char target[PATH_MAX], dir[PATH_MAX], tmp[PATH_MAX];
    gem_status rc = output_target(path, &exists, &st, target, sizeof target, why, why_cap);
    if (rc != GEM_OK)
        return rc == GEM_ERR_PARAM ? GEM_ERR_PARAM : GEM_ERR_IO;
    const char *slash = strrchr(target, '/');
    const char *base = slash ? slash + 1 : target;
    if (dir_of(target, dir, sizeof dir) != 0 ||
        (size_t)snprintf(tmp, sizeof tmp, "%s/.%s.tmp.XXXXXX", dir, base) >= sizeof tmp) {
        say(why, why_cap, "the path is too long");
        return GEM_ERR_IO;
    }
    mode_t mode;
    if (exists) {
        mode = st.st_mode & 07777;
    } else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        say(why, why_cap, "cannot create a temporary file in '%.300s': %s", dir, strerror(errno));
        return GEM_ERR_IO;
    }
    const char *p = data;
    size_t left = len;
    int ok = fchmod(fd, mode) == 0;
    while (ok && left > 0) {
        ssize_t put = write(fd, p, left);
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0) {
            ok = 0;
            break;
        }
        p += put;
        left -= (size_t)put;
    }
    int err = errno;
    if (ok && fsync(fd) != 0) {
        ok = 0;
        err = errno;
    }
    if (close(fd) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    if (!ok) {
        unlink(tmp);
        say(why, why_cap, "writing failed: %s", strerror(err));
        return GEM_ERR_IO;
    }
    if (rename(tmp, target) != 0) {
        err = errno;
        unlink(tmp);
        say(why, why_cap, "cannot rename the temporary file over it: %s", strerror(err));
        return GEM_ERR_IO;
    }
    /* Make the rename durable; the data is already complete either way. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return GEM_OK;
}
