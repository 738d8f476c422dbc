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

/* Fills dst[0, n) with stream `seed` mapped to [lo, hi). dst (n). */
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
 *   correlation  Pearson correlation (1 when both are constant and equal)
 *   nmse         sum (got - ref)^2 / sum ref^2   (sum (got-ref)^2 if ref is all zero)
 *   max_abs      max |got - ref|
 *   nonfinite    elements of got that are NaN or infinite (figures are then NaN)
 */
typedef struct gem_compare {
    size_t n;
    size_t nonfinite;
    double correlation;
    double nmse;
    double max_abs;
} gem_compare;

/* got (n) floats, ref (n) doubles. GEM_ERR_NULL / GEM_ERR_PARAM (n = 0). */
gem_status gem_compare_f32_f64(const float *got, const double *ref, size_t n, gem_compare *out);
/* got (n) floats, ref (n) floats. */
gem_status gem_compare_f32_f32(const float *got, const float *ref, size_t n, gem_compare *out);

/* ---- digests ---------------------------------------------------------------- */

/* Lower-case hex SHA-256 of data[0, bytes) into hex (65 bytes, NUL-terminated).
 * GEM_ERR_NULL for NULL arguments (data may be NULL only when bytes = 0). */
gem_status gem_sha256_hex(const void *data, size_t bytes, char hex[65]);
/* SHA-256 of a whole file. GEM_ERR_IO if it cannot be read. */
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
/* Re-poisons the n floats and the guard of a buffer from gem_guard_alloc. */
void gem_guard_poison(float *p, size_t n);
/* *unwritten = elements still poisoned; *guard_ok = 1 when the guard is intact. */
void gem_guard_check(const float *p, size_t n, size_t *unwritten, int *guard_ok);
void gem_guard_free(float *p);

#ifdef __cplusplus
}
#endif

#endif /* GEM_CHECK_H */
