/*
 * gem receipts: small jansson helpers shared by every tool that writes a JSON
 * receipt, so that all receipts spell provenance, geometry, comparison figures
 * and non-finite numbers the same way, and are written atomically.
 *
 * Conventions
 *   - Every function that returns a json_t * returns a new reference the
 *     caller owns (json_decref), or NULL when out of memory / on bad input.
 *   - Real numbers that are NaN or infinite are written as JSON null; an
 *     analyzer treats null where a number belongs as a non-finite figure.
 *   - 64-bit seeds are written as decimal strings (JSON numbers lose
 *     precision above 2^53 in many readers); see gem_receipt_u64.
 */
#ifndef GEM_RECEIPT_H
#define GEM_RECEIPT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "gem/attn.h"
#include "gem/check.h"
#include "gem/file.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A new receipt object:
 *   {"schema": schema, "tool": {"name": tool_name, "version": GEM_VERSION,
 *                               "git_commit": git_commit}}
 * All three strings are required (NULL returns NULL); git_commit is what
 * cli_git_commit() gives, "unknown" when not known. */
json_t *gem_receipt_new(const char *schema, const char *tool_name, const char *git_commit);

/* The geometry object of a shape:
 *   {"n_q_heads", "n_kv_heads", "dk", "dv", "live", "capacity", "scale",
 *    "dtype": "f32", "window": 0}
 * scale is a real (null when not finite). NULL for a NULL shape. */
json_t *gem_receipt_geometry(const gem_attn_shape *shape);

/* The figures of a comparison:
 *   {"n", "nonfinite", "correlation", "nmse", "max_abs"}
 * with non-finite reals as null. NULL for a NULL argument. */
json_t *gem_receipt_compare(const gem_compare *c);

/* A JSON real, or JSON null when x is NaN or infinite. */
json_t *gem_receipt_real(double x);

/* A 64-bit unsigned value as a decimal string ("18446744073709551615"). */
json_t *gem_receipt_u64(uint64_t x);

/* Parses a string made by gem_receipt_u64 (decimal digits only, no sign, no
 * leading zeros except "0", at most UINT64_MAX). Returns 0 on success, -1 for
 * anything else (a non-string, empty, junk, overflow); *out untouched then. */
int gem_receipt_parse_u64(const json_t *j, uint64_t *out);

/* Writes doc to path as indented JSON (two spaces, keys in insertion order,
 * reals with 17 significant digits) with a trailing newline, atomically with
 * gem_file_write_atomic (include/gem/file.h): a reader sees the old file or
 * the whole new one, and only a regular file (or a symlink to one, or nothing)
 * is ever replaced; a device, a directory or a symlink to either is refused.
 * GEM_ERR_NULL for NULL arguments, GEM_ERR_FORMAT when the document cannot be
 * serialized, GEM_ERR_IO when the file cannot be written (nothing is left
 * behind). `why` (may be NULL, why_cap bytes) receives one line saying why. */
gem_status gem_receipt_save(const char *path, const json_t *doc, char *why, size_t why_cap);

/* gem_receipt_save without the reason. */
gem_status gem_receipt_write(const char *path, const json_t *doc);

/* Reads a JSON document from the regular file at `path` once (gem_file_read,
 * at most max_bytes bytes) and, from those same bytes, parses it (duplicate
 * keys rejected) and digests it: *doc (a new reference; an object) and sha256
 * (65 bytes, lower-case hex; may be NULL). The parse and the digest can never
 * see different bytes. GEM_ERR_IO when the file cannot be read (missing, not
 * regular, too large), GEM_ERR_FORMAT when it is not JSON or its top level is
 * not an object, GEM_ERR_NULL for NULL path or doc. On error *doc = NULL and
 * `why` (may be NULL) says why in one line (with the JSON line for syntax
 * errors). */
gem_status gem_receipt_load(const char *path, size_t max_bytes, json_t **doc, char sha256[65],
                            char *why, size_t why_cap);

#ifdef __cplusplus
}
#endif

#endif /* GEM_RECEIPT_H */
