/*
 * gem check support: seeded inputs, comparison metrics, SHA-256 digests and
 * poisoned, guarded output buffers. Everything a check tool needs to produce
 * evidence that can be recomputed from its receipt.
 */
#ifndef GEM_CHECK_H
#define GEM_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "gem/attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- seeded inputs ---------------------------------------------------------
 * The generator is SplitMix64; element i of a stream with seed s is
 *   u = (splitmix64(s + (i+1) * 0x9E3779B97F4A7C15) >> 40) * 2^-24   in [0, 1)
 *   x = lo + (hi - lo) * u                                          (in float)
 * so any element can be recomputed on its own and the stream does not depend
 * on how it is chunked or threaded. */

/* Fills dst[0, n) with stream `seed` mapped to [lo, hi). dst (n); a NULL dst
 * writes nothing (there is no status to return). */
void gem_fill_uniform(uint64_t seed, float lo, float hi, float *dst, size_t n);

/* Seeds of the three input tensors derived from one run seed:
 * q = seed ^ 0x51, k = seed ^ 0x4B, v = seed ^ 0x56 (ASCII 'Q', 'K', 'V'). */
typedef struct gem_input_seeds {
    uint64_t q, k, v;
} gem_input_seeds;
gem_input_seeds gem_input_seeds_from(uint64_t seed);

/* Owned, generated inputs for a shape: q, k, v uniform in [-1, 1), k and v
 * rows [live, capacity) included. Free with gem_inputs_free. */
typedef struct gem_owned_inputs {
    gem_attn_inputs in; /* views of the three buffers below */
    float *q;           /* (n_q_heads, dk) */
    float *k;           /* (n_kv_heads, capacity, dk) */
    float *v;           /* (n_kv_heads, capacity, dv) */
    gem_input_seeds seeds;
} gem_owned_inputs;

/* Allocates (64-byte aligned) and fills inputs for `shape` from `seed`.
 * On error nothing is allocated and *out is zeroed. */
gem_status gem_inputs_make(const gem_attn_shape *shape, uint64_t seed, gem_owned_inputs *out);
/* SHA-256 (lower-case hex) of the q, k and v buffers of `in`, whole
 * (capacity rows included): the raw-input digests receipts bind.
 * hex[0] q, hex[1] k, hex[2] v. */
gem_status gem_inputs_sha256(const gem_owned_inputs *in, char hex[3][65]);

/* Releases what gem_inputs_make allocated; NULL or a zeroed struct is fine. */
void gem_inputs_free(gem_owned_inputs *in);

/* ---- comparison -------------------------------------------------------------
 * Figures of `got` against `ref` over n elements, all in double:
 *   correlation  Pearson correlation, clamped to [-1, 1] (1 when both are
 *                constant and equal, 0 when one is constant and they differ)
 *   nmse         sum (got - ref)^2 / sum ref^2   (sum (got-ref)^2 if ref is all zero)
 *   max_abs      max |got - ref|
 *   ref_var      population variance of ref
 *   ref_mean_square  mean of ref^2
 *   nonfinite    elements of got or ref that are NaN or infinite (every figure
 *                is then NaN)
 */
typedef struct gem_compare {
    size_t n;
    size_t nonfinite;
    double correlation;
    double nmse;
    double max_abs;
    double ref_var;
    double ref_mean_square;
} gem_compare;

/* got (n) floats, ref (n) doubles. GEM_ERR_NULL / GEM_ERR_PARAM (n = 0). */
gem_status gem_compare_f32_f64(const float *got, const double *ref, size_t n, gem_compare *out);
/* got (n) floats, ref (n) floats. */
gem_status gem_compare_f32_f32(const float *got, const float *ref, size_t n, gem_compare *out);

/* ---- the comparison gate ------------------------------------------------------
 * Correlation measures whether the pattern of an output is right; it says
 * nothing when the reference has (almost) no pattern: when the reference is
 * nearly constant, a correct route's rounding error (1e-7 relative in F32) is
 * as large as the reference's spread, and the correlation of the two is noise
 * (e.g. -0.07 at NMSE 1.6e-14). The gate therefore reads:
 *
 *   any non-finite element or figure          -> fail
 *   nmse <= max_nmse                           always
 *   correlation >= min_correlation             when the reference varies:
 *                                              ref_var > GEM_GATE_NEAR_CONSTANT * ref_mean_square
 *   max_abs <= sqrt(1 - min_correlation) * sqrt(ref_mean_square)
 *                                              otherwise (nearly constant reference:
 *                                              relative error instead of correlation)
 *
 * GEM_GATE_NEAR_CONSTANT = 1e-6: the reference's standard deviation is below
 * 0.1% of its RMS value. */
#define GEM_GATE_NEAR_CONSTANT 1e-6

typedef struct gem_gate {
    int pass;           /* every rule below holds */
    int finite;         /* no non-finite element or figure */
    int near_constant;  /* the reference is nearly constant: relative error replaces correlation */
    int shape_ok;       /* the correlation rule, or the relative-error rule when near_constant */
    int nmse_ok;        /* nmse <= max_nmse */
} gem_gate;

/* Applies the gate above to figures from gem_compare_*. GEM_ERR_NULL for NULL
 * pointers, GEM_ERR_PARAM for min_correlation outside [-1, 1] or max_nmse
 * negative or non-finite (then *out is not written). */
gem_status gem_gate_compare(const gem_compare *c, double min_correlation, double max_nmse,
                            gem_gate *out);

/* ---- digests ---------------------------------------------------------------- */

/* Lower-case hex SHA-256 of data[0, bytes) into hex (65 bytes, NUL-terminated).
 * GEM_ERR_NULL for NULL arguments (data may be NULL only when bytes = 0). */
gem_status gem_sha256_hex(const void *data, size_t bytes, char hex[65]);
/* SHA-256 of a whole regular file (symlinks followed), streamed: at most
 * GEM_FILE_MAX_DIGEST_BYTES (include/gem/file.h). GEM_ERR_IO if it cannot be
 * read, is not a regular file (a FIFO or a device is never opened) or is
 * larger; GEM_ERR_NULL for NULL arguments. */
gem_status gem_sha256_file_hex(const char *path, char hex[65]);

/* ---- poisoned, guarded outputs ----------------------------------------------
 * A guarded buffer holds n floats followed by GEM_GUARD_BYTES guard bytes.
 * The floats are poisoned with GEM_POISON_BITS (a quiet NaN no arithmetic
 * produces), the guard with 0xA5. After a run gem_guard_check reports how many
 * elements still hold the poison and whether any guard byte changed. */
#define GEM_POISON_BITS 0x7FC0DEADu
#define GEM_GUARD_BYTES 256u

/* Allocates (64-byte aligned) and poisons; NULL on overflow or no memory. */
float *gem_guard_alloc(size_t n);
/* Re-poisons the n floats and the guard of a buffer from gem_guard_alloc;
 * a NULL p writes nothing. */
void gem_guard_poison(float *p, size_t n);
/* *unwritten = elements still poisoned; *guard_ok = 1 when the guard is intact.
 * Either output may be NULL. A NULL p reports every element unwritten and the
 * guard damaged (there is no buffer to vouch for). */
void gem_guard_check(const float *p, size_t n, size_t *unwritten, int *guard_ok);
void gem_guard_free(float *p);

/* ---- memory ---------------------------------------------------------------------
 * How much memory this process may still allocate: MemAvailable from
 * /proc/meminfo, lowered to the room left under the cgroup memory limit
 * (v2 memory.max - memory.current, or v1 limit_in_bytes - usage_in_bytes)
 * when one is set. */

/* *bytes = the memory available now. GEM_ERR_NULL for NULL, GEM_ERR_UNSUPPORTED
 * when the system does not say (no /proc/meminfo). */
gem_status gem_mem_available(uint64_t *bytes);

/* GEM_OK when `need` bytes fit in what gem_mem_available reports,
 * GEM_ERR_NOMEM when they do not, GEM_ERR_UNSUPPORTED when the amount is not
 * known (the caller decides whether to go on). *available (may be NULL)
 * receives the amount when it is known. Call it before allocation-heavy work
 * so that a context that does not fit is refused with both figures instead
 * of being killed by the kernel. */
gem_status gem_mem_check(uint64_t need, uint64_t *available);

#ifdef __cplusplus
}
#endif

#endif /* GEM_CHECK_H */
