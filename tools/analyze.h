/*
 * gem analyzers: fail-closed validation of receipts and records, and the
 * strict JSON field checks they share. Each analyzer returns 0 when the
 * input passes, 1 on the first defect (ctx->msg then holds ONE line naming
 * the file, the field and the defect), and sets ctx->io when the problem is
 * the analyzer's own usage, input or I/O (a missing or unreadable file, a
 * wrong number of inputs): the command then exits 2 instead of 1.
 * docs/gates.md lists what each one checks.
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
#define AN_RANGE "figure out of range"          /* outside its mathematical or physical range */
#define AN_INCONSISTENT "figures disagree"      /* two figures that cannot both hold */
#define AN_REPRODUCE "not reproduced"           /* differs from the analyzer's recomputation */
#define AN_PATH "unsafe path"                   /* a bound file outside --root, or not regular */
#define AN_MALFORMED "malformed document"       /* not JSON, or not an object at the top */

typedef struct an_ctx {
    const char *file; /* label of the document being checked (its path) */
    char msg[1024];   /* the first defect, one line, control characters escaped */
    int failed;
    int io;           /* the failure is usage / input / I/O: exit 2, not 1 */
} an_ctx;

/* Records the first defect: "<file>: <path>: <class>: <detail>", escaped
 * for one terminal line. Returns -1. */
int an_fail(an_ctx *c, const char *path, const char *cls, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Records a usage, input or I/O problem ("<file>: <detail>"); sets c->io so
 * the command exits 2. Returns -1. */
int an_io(an_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Loads a JSON file once (at most GEM_FILE_MAX_JSON_BYTES, regular files
 * only) and digests the same bytes: *out (an object) and sha (65 bytes, may
 * be NULL). A file that cannot be read is an_io; one that is not JSON or not
 * an object is AN_MALFORMED. 0, or -1 with ctx set. */
int an_load(an_ctx *c, const char *path, json_t **out, char sha[65]);

/* `o` (at `path`) must be an object with exactly the n keys given. */
int an_keys(an_ctx *c, const json_t *o, const char *path, const char *const *keys, size_t n);

/* Typed getters of field `key` of object `o` at `path`. Each fails (-1) for a
 * missing field or a wrong JSON type; an_real also for null / non-finite;
 * an_str also for a string holding NUL or an ASCII control character. */
int an_int(an_ctx *c, const json_t *o, const char *path, const char *key, int64_t *out);
int an_real(an_ctx *c, const json_t *o, const char *path, const char *key, double *out);
int an_bool(an_ctx *c, const json_t *o, const char *path, const char *key, int *out);
int an_str(an_ctx *c, const json_t *o, const char *path, const char *key, const char **out);
/* an_int within [lo, hi], else AN_RANGE naming the bounds. */
int an_int_in(an_ctx *c, const json_t *o, const char *path, const char *key, int64_t lo,
              int64_t hi, int64_t *out);
/* an_real within [lo, hi], else AN_RANGE naming the bounds. */
int an_real_in(an_ctx *c, const json_t *o, const char *path, const char *key, double lo,
               double hi, double *out);
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

/* Checks the tool object {"name","version","git_commit"}: name must be
 * `name` (else AN_SWAPPED), version "MAJOR.MINOR.PATCH" in decimal, git_commit
 * a commit id (cli_commit_ok: 7-40 hex digits, "-dirty" allowed, or
 * "unknown"). */
int an_tool(an_ctx *c, const json_t *doc, const char *name);
/* The schema field must equal `schema`; otherwise AN_SWAPPED. */
int an_schema(an_ctx *c, const json_t *doc, const char *schema);

/* An analysis `given` must be exactly the one the analyzer derives now
 * (`want`, built for the same receipt path): the same fields, the same
 * values, except tool.version and tool.git_commit, which must only be well
 * formed. A different receipt digest is AN_SWAPPED, any other difference
 * AN_VALUE; so a hand-written or edited analysis never passes. */
int an_analysis_matches(an_ctx *c, const json_t *given, const json_t *want);

/* ---- analyzers ------------------------------------------------------------- */

typedef struct an_opts {
    int recompute;      /* 1: recompute what is bound (inputs from seeds, outputs and
                           figures of the merge check, files under root) */
    const char *root;   /* directory that relative source/binary paths are under */
    int64_t threads;    /* worker threads for recomputation (>= 1) */
    const char *kv_dtype; /* ceiling: the KV cache type the stage profiles must record
                             ("f32", "bf16" or "f16"); NULL is the design's "f32" */
} an_opts;

/* Merge-check receipt (gem.merge_check.v1): structure, geometry, ranges,
 * consistency, gates and verdicts, then (o->recompute) every case rerun from
 * its seed with exact comparison of input and output digests and figures. */
int an_merge_boundary_doc(an_ctx *c, const json_t *doc, const an_opts *o);
/* Loads path and checks it; on pass, *analysis (may be NULL) receives the
 * analysis document (gem.analysis.merge_boundary.v1). sha (may be NULL)
 * receives the receipt's digest. */
int an_merge_boundary(an_ctx *c, const char *path, const an_opts *o, json_t **analysis);
/* The gem.analysis.merge_boundary.v1 document of a receipt that passed:
 * `doc` at `path` with digest `sha`, written by the analyzer at `commit`
 * (NULL: "unknown"). NULL when out of memory. */
json_t *an_merge_analysis_build(const json_t *doc, const char *path, const char *sha,
                                const char *commit);

/* Resource receipt (gem.resources.v1). */
int an_resources_doc(an_ctx *c, const json_t *doc, const an_opts *o);
int an_resources(an_ctx *c, const char *path, const an_opts *o, json_t **analysis);
/* The gem.analysis.resources.v1 document of a receipt that passed (as above). */
json_t *an_resources_analysis_build(const json_t *doc, const char *path, const char *sha,
                                    const char *commit);

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

/* Stages of the optional whole-token breakdown of a stage profile. */
#define AN_WHOLE_STAGES 7

/* The attribution of one stage profile (docs/receipts-records.md). */
typedef struct an_ceiling_fig {
    int64_t context, reps, per_rep, calls;
    double stage_ms[4];     /* medians of score, normalize, value, reduce */
    double attention_ms, whole_ms; /* medians of the attention total and the whole token */
    double share_pct, score_share_pct, required_pct;
    int has_whole_stages;   /* 1: the profile has whole_token_stages_ms */
    double whole_stage_ms[AN_WHOLE_STAGES]; /* their medians (embedding, norms, projections,
                                               sliding_attention, full_attention, mlp,
                                               logits); 0 without them */
} an_ceiling_fig;

/* Checks one stage profile expected at `context` tokens whose KV cache type is kv_dtype
 * (NULL: "f32"); every rule of the ceiling screen applies. fig (may be NULL) receives
 * its attribution on a pass. 0, or -1 with c set. */
int an_profile_doc(an_ctx *c, const json_t *doc, int64_t context, const char *kv_dtype,
                   an_ceiling_fig *fig);
/* The ceiling screen on n stage profiles (one at 65,536 and one at 131,072 tokens, KV
 * type o->kv_dtype); on a pass *analysis (may be NULL) receives gem.ceiling.v1. */
int an_ceiling(an_ctx *c, const char *const *profiles, size_t n, const an_opts *o,
               json_t **analysis);
/* The samples digest of a stage profile (the canonical text of docs/receipts-records.md)
 * into hex (65 bytes): the six series, then the seven of whole_token_stages_ms when the
 * profile has it. The series must be arrays of numbers (the other fields are not read).
 * 0, or -1 when out of memory or a size does not fit. */
int an_stage_profile_samples_sha256(const json_t *doc, char hex[65]);

/* Promotion decision on whole-token time (gem.model_profile.v1 records ->
 * gem.promotion.v1, docs/receipts-records.md and docs/gates.md section 10). */

/* Records one decision may read: two long contexts and up to 14 short ones. */
#define AN_PROMOTION_MAX_FILES 16

/* The whole-token figures of one record; index 0 is the baseline route, 1 the fused
 * route. The arrays hold `reps` entries each, in f->owned (an_promotion_fig_free). */
typedef struct an_promotion_fig {
    int64_t context, reps, per_rep; /* context.positions, repetitions, samples_per_repetition */
    double median_ms[2];            /* M: median of all samples of the route */
    double *rep_median_ms[2];       /* m_r: median of repetition r */
    double spread[2];               /* (max_r m_r - min_r m_r) / M */
    double *rep_gain;               /* g_r = 1 - m_r(fused) / m_r(baseline) */
    double gain;                    /* G = 1 - M(fused) / M(baseline) */
    double min_rep_gain, gain_range; /* min_r g_r, max_r g_r - min_r g_r */
    double *owned;                  /* the one allocation the three arrays lie in */
} an_promotion_fig;

/* Checks one gem.model_profile.v1 record on its own (the rules of docs/gates.md
 * section 10) and computes its figures into *fig. 0 (the caller then frees fig), or
 * -1 with c set and nothing to free. */
int an_promotion_record_doc(an_ctx *c, const json_t *doc, an_promotion_fig *fig);
/* Frees the arrays of fig (NULL or already freed: nothing). */
void an_promotion_fig_free(an_promotion_fig *fig);

/* One input of the decision: the record's path, its role, and (for a re-check) the
 * digest the file must have. */
typedef struct an_promotion_file {
    const char *path;
    int is_long;        /* 1: a long context (--long), 0: a short one (--short) */
    const char *sha256; /* NULL, or the SHA-256 the file's bytes must have */
} an_promotion_file;

typedef struct an_promotion_in {
    an_promotion_file files[AN_PROMOTION_MAX_FILES];
    size_t n;
    int any_long_contexts; /* 0: the long contexts must be 65536 and 131072 */
} an_promotion_in;

/* Reads and checks every record (each file once, its digest bound), across records
 * too, and decides. 0 with *promote (1: promote, 0: keep-baseline) and *receipt (may
 * be NULL) the gem.promotion.v1 receipt; 1 with c set on any defect (c->io for a
 * usage or I/O problem: not exactly two long records, a file that cannot be read). */
int an_promotion(an_ctx *c, const an_promotion_in *in, json_t **receipt, int *promote);
/* Re-derives the receipt at `path` from the files it binds, which must still have
 * the digests it records, and requires the re-derived receipt to equal it (only
 * tool.version and tool.git_commit may differ). 0 with *promote the decision and
 * *receipt (may be NULL) the re-derived receipt; 1 with c set otherwise. */
int an_promotion_check(an_ctx *c, const char *path, json_t **receipt, int *promote);

#endif /* GEM_ANALYZE_H */
