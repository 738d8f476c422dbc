/*
 * gem analyzers: fail-closed validation of receipts and records, and the
 * strict JSON field checks they share. Each analyzer returns 0 when the
 * input passes, 1 on the first defect (ctx->msg then holds ONE line naming
 * the file, the field and the defect), 2 on a usage or I/O problem of the
 * analyzer itself. docs/gates.md lists what each one checks.
 */
#ifndef GEM_ANALYZE_H
#define GEM_ANALYZE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Defect classes, named in every message so a reader (and a test) can tell
 * which rule fired. */
#define AN_MISSING "missing field"
#define AN_EXTRA "unexpected field"
#define AN_TYPE "wrong type"
#define AN_GEOMETRY "wrong geometry"
#define AN_NONFINITE "non-finite figure"
#define AN_THRESHOLD "threshold not met"
#define AN_DIGEST "digest mismatch"
#define AN_SWAPPED "file swapped"
#define AN_VERDICT "verdict disagrees with the figures"
#define AN_VALUE "wrong value"

typedef struct an_ctx {
    const char *file; /* label of the document being checked (its path) */
    char msg[1024];   /* the first defect, one line, no newline */
    int failed;
} an_ctx;

/* Records the first defect: "<file>: <path>: <class>: <detail>". Returns -1. */
int an_fail(an_ctx *c, const char *path, const char *cls, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Loads a JSON file (object at the top). 0, or -1 with ctx->msg set. */
int an_load(an_ctx *c, const char *path, json_t **out);

/* SHA-256 of the file at `path` into sha (65 bytes). 0, or -1 with ctx->msg
 * set ("unreadable") when the file cannot be read. */
int an_digest(an_ctx *c, const char *path, char sha[65]);

/* `o` (at `path`) must be an object with exactly the n keys given. */
int an_keys(an_ctx *c, const json_t *o, const char *path, const char *const *keys, size_t n);

/* Typed getters of field `key` of object `o` at `path`. Each fails (-1) for a
 * missing field or a wrong JSON type; an_real also for null / non-finite. */
int an_int(an_ctx *c, const json_t *o, const char *path, const char *key, int64_t *out);
int an_real(an_ctx *c, const json_t *o, const char *path, const char *key, double *out);
int an_bool(an_ctx *c, const json_t *o, const char *path, const char *key, int *out);
int an_str(an_ctx *c, const json_t *o, const char *path, const char *key, const char **out);
/* A 64-character lower-case hex SHA-256. */
int an_sha(an_ctx *c, const json_t *o, const char *path, const char *key, const char **out);
/* A u64 seed written as a decimal string (gem_receipt_u64). */
int an_u64(an_ctx *c, const json_t *o, const char *path, const char *key, uint64_t *out);
/* An object / array field. */
int an_obj(an_ctx *c, const json_t *o, const char *path, const char *key, const json_t **out);
int an_arr(an_ctx *c, const json_t *o, const char *path, const char *key, const json_t **out);

/* Exact-value helpers: the field must equal the given value, else AN_GEOMETRY
 * (or `cls` when given) naming both values. */
int an_int_eq(an_ctx *c, const json_t *o, const char *path, const char *key, int64_t want,
              const char *cls);
int an_str_eq(an_ctx *c, const json_t *o, const char *path, const char *key, const char *want,
              const char *cls);

/* Checks the tool object {"name","version","git_commit"}; name must be `name`. */
int an_tool(an_ctx *c, const json_t *doc, const char *name);
/* The schema field must equal `schema`; otherwise AN_SWAPPED. */
int an_schema(an_ctx *c, const json_t *doc, const char *schema);

/* ---- analyzers ------------------------------------------------------------- */

typedef struct an_opts {
    int recompute_digests; /* 1: regenerate inputs from seeds and compare digests */
    const char *root;      /* directory that relative source/binary paths are under */
} an_opts;

/* Merge-check receipt (gem.merge_check.v1). On pass, *analysis (may be NULL)
 * receives the analysis document (gem.analysis.merge_boundary.v1). */
int an_merge_boundary_doc(an_ctx *c, const json_t *doc, const an_opts *o);
int an_merge_boundary(an_ctx *c, const char *path, const an_opts *o, json_t **analysis);

/* Resource receipt (gem.resources.v1). */
int an_resources_doc(an_ctx *c, const json_t *doc, const an_opts *o);
int an_resources(an_ctx *c, const char *path, const an_opts *o, json_t **analysis);

/* One operator differential record (gem.diff.v1) expected at `live` tokens. */
int an_diff_doc(an_ctx *c, const json_t *doc, int64_t live, const an_opts *o);
/* One model differential record (gem.model_diff.v1) expected at `context` tokens. */
int an_model_doc(an_ctx *c, const json_t *doc, int64_t context);

/* Correctness analyzer inputs. */
typedef struct an_correctness_in {
    const char *merge_receipt, *merge_analysis;
    const char *resources_receipt, *resources_analysis;
    const char *diffs[8];
    size_t n_diffs;
    const char *models[8];
    size_t n_models;
} an_correctness_in;
int an_correctness(an_ctx *c, const an_correctness_in *in, const an_opts *o,
                   json_t **analysis);

/* Stage profile (gem.stage_profile.v1) and the ceiling attribution. */
int an_profile_doc(an_ctx *c, const json_t *doc, int64_t context);
int an_ceiling(an_ctx *c, const char *const *profiles, size_t n, const an_opts *o,
               json_t **analysis);

#endif /* GEM_ANALYZE_H */
