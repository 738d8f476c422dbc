/*
 * gem files: how every gem tool reads its inputs and writes its outputs.
 *
 *   - An input is read once: the bytes that are parsed are the bytes that are
 *     digested (gem_file_read), so a file that changes while it is read cannot
 *     pass with the digest of other bytes.
 *   - Only regular files are read or digested (after following symlinks): a
 *     FIFO, a device, a directory or a socket is refused before it is opened
 *     for reading, so /dev/zero cannot hang a digest and a FIFO cannot feed
 *     two readers different bytes. Every read has a stated size limit.
 *   - A file named relative to a root (gem_file_digest_under) must stay inside
 *     that root: a relative path without "..", whose resolved location, after
 *     every symlink, is under the resolved root.
 *   - An output is written atomically and only over a regular file (or where
 *     nothing exists yet); a device, a directory, a FIFO, a socket, a symlink
 *     to any of them, or one of the command's own inputs is refused up front
 *     (gem_file_output_check), before any work.
 *
 * Every function that can fail fills `why` (when not NULL, `why_cap` bytes,
 * always NUL-terminated) with one line naming the problem, without the path.
 */
#ifndef GEM_FILE_H
#define GEM_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "gem/attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest JSON document (receipt, record, analysis) gem reads: 64 MiB. */
#define GEM_FILE_MAX_JSON_BYTES ((size_t)64 << 20)
/* The largest file gem digests (a kernel source, a binary): 4 GiB. */
#define GEM_FILE_MAX_DIGEST_BYTES ((uint64_t)4 << 30)

/* Reads the whole regular file at `path` (symlinks followed) once into a new
 * buffer: *data holds *len bytes plus a terminating NUL that is not counted;
 * the caller frees *data. Refuses a file that is not regular, or holds more
 * than max_bytes bytes (checked before and while reading), with GEM_ERR_IO
 * and nothing allocated (*data = NULL, *len = 0). GEM_ERR_NULL for a NULL
 * path, data or len; GEM_ERR_NOMEM when the buffer cannot be allocated. */
gem_status gem_file_read(const char *path, size_t max_bytes, char **data, size_t *len, char *why,
                         size_t why_cap);

/* What gem_file_digest_* report about a file. */
typedef struct gem_file_digest {
    char sha256[65];         /* lower-case hex SHA-256 of the whole file */
    uint64_t bytes;          /* its size */
    unsigned char head[16];  /* its first head_len bytes (to check a magic number) */
    size_t head_len;         /* min(16, bytes) */
} gem_file_digest;

/* Streams the regular file at `path` (symlinks followed) through SHA-256.
 * GEM_ERR_IO for a file that cannot be opened, is not regular, holds more than
 * max_bytes bytes or fails while being read; GEM_ERR_NULL for NULL pointers.
 * *out is written only on success. */
gem_status gem_file_digest_path(const char *path, uint64_t max_bytes, gem_file_digest *out,
                                char *why, size_t why_cap);

/* The same for `rel` under the directory `root`: rel must be relative, with
 * no empty, "." or ".." component (GEM_ERR_PARAM); the file it names, with
 * every symlink resolved, must be inside the resolved root (GEM_ERR_PARAM
 * for a symlink that leaves it); then it is opened component by component
 * without following any further link, so what is digested is what was
 * checked. Other errors as gem_file_digest_path. */
gem_status gem_file_digest_under(const char *root, const char *rel, uint64_t max_bytes,
                                 gem_file_digest *out, char *why, size_t why_cap);

/* Checks, before any work, that `path` may receive an output written with
 * gem_file_write_atomic: it does not exist yet (and its directory exists and
 * is writable), or it is a regular file or a symlink to one. Refused, with
 * GEM_ERR_IO and one line in `why`: an empty path (GEM_ERR_PARAM), a
 * directory, a character or block device, a FIFO, a socket, a symlink to any
 * of these or to nothing, a missing or read-only directory, and the same file
 * (device and inode, so also through a link) as any of the n_inputs paths in
 * `inputs` (NULL entries and inputs that do not exist are skipped).
 * GEM_ERR_NULL for a NULL path, or NULL inputs with n_inputs > 0. */
gem_status gem_file_output_check(const char *path, const char *const *inputs, size_t n_inputs,
                                 char *why, size_t why_cap);

/* Writes data[0, len) to `path` atomically: into a new temporary file
 * (mkstemp) in the directory of the final file, flushed and fsynced, then
 * renamed over it, so a reader sees the old file or the whole new one. A
 * symlink to a regular file is followed: the file it names is replaced and
 * the link kept. Everything gem_file_output_check refuses is refused here too
 * (without the input check), before the temporary file is created; an
 * existing file keeps its permission bits, a new one gets 0666 less the
 * umask. GEM_ERR_IO on any failure (the temporary file is removed), with
 * `why` saying which step failed; GEM_ERR_NULL for NULL path or data with
 * len > 0. */
gem_status gem_file_write_atomic(const char *path, const void *data, size_t len, char *why,
                                 size_t why_cap);

#ifdef __cplusplus
}
#endif

#endif /* GEM_FILE_H */
