/*
 * gem: exact long-context decode attention.
 *
 * Public C API of the core library: status codes, the attention shape and
 * buffer description, the double-precision reference, the float online-softmax
 * oracle (partial / merge / finalize) and the fused scratch byte contract.
 *
 * Conventions
 *   - Sizes and counts are int64_t, byte sizes are size_t; every product and
 *     sum of sizes is overflow-checked and reports GEM_ERR_OVERFLOW.
 *   - Tensors are dense, row-major F32:
 *       q   (n_q_heads, dk)
 *       k   (n_kv_heads, capacity, dk)   element (h, t, i) at (h*capacity + t)*dk + i
 *       v   (n_kv_heads, capacity, dv)
 *       out (n_q_heads, dv)
 *     `capacity` is the number of token rows each KV head owns in the cache;
 *     only rows [0, live) take part, so a cache may hold more rows than live.
 *   - Query head h reads KV head h / (n_q_heads / n_kv_heads) (GQA).
 *   - Functions never write an output when they return an error, unless their
 *     contract says otherwise.
 */
#ifndef GEM_ATTN_H
#define GEM_ATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GEM_VERSION "0.1.0"

typedef enum gem_status {
    GEM_OK = 0,
    GEM_ERR_NULL,        /* a required pointer is NULL */
    GEM_ERR_SHAPE,       /* zero or negative size, heads not divisible, live < 1 */
    GEM_ERR_RANGE,       /* a range or live length beyond what the buffers hold */
    GEM_ERR_OVERFLOW,    /* size arithmetic would overflow */
    GEM_ERR_STATE,       /* an invalid online-softmax state (see gem_online_state_check) */
    GEM_ERR_NONFINITE,   /* NaN or infinity in an input */
    GEM_ERR_ALIGN,       /* a buffer is not aligned as the route requires */
    GEM_ERR_NOMEM,       /* an allocation failed */
    GEM_ERR_PARAM,       /* a bad route parameter (partitions, tile, threads) */
    GEM_ERR_UNSUPPORTED, /* a valid shape the chosen route or backend does not cover */
    GEM_ERR_NO_DEVICE,   /* the CUDA backend was asked for but no GPU (or no CUDA build) */
    GEM_ERR_DEVICE,      /* a CUDA runtime call failed */
    GEM_ERR_IO,          /* a file could not be read or written */
    GEM_ERR_FORMAT,      /* a receipt or input file is malformed */
    GEM_ERR_OVERLAP,     /* an output overlaps an input, the cache or the workspace */
    GEM_ERR_MEMSPACE,    /* a pointer is not in the backend's memory (host vs device) */
    GEM_ERR_SCORE,       /* a score scale * q.k overflows float although every input is finite */
    GEM_STATUS_COUNT
} gem_status;

/* One line, no trailing newline, describing `s`; never NULL (unknown codes get
 * a generic message). The string is static. */
const char *gem_status_str(gem_status s);

/* Short stable identifier of `s` ("ok", "shape", "overflow", ...), for receipts. */
const char *gem_status_name(gem_status s);

/* The geometry of one decode-attention call. */
typedef struct gem_attn_shape {
    int64_t n_q_heads;  /* query heads, >= 1 */
    int64_t n_kv_heads; /* KV heads, >= 1, divides n_q_heads */
    int64_t dk;         /* key/query head dimension, >= 1 */
    int64_t dv;         /* value/output head dimension, >= 1 */
    int64_t live;       /* tokens attended, 1 <= live <= capacity */
    int64_t capacity;   /* token rows per KV head in k and v, >= live */
    float scale;        /* score = scale * dot(q, k); finite, given by the caller */
} gem_attn_shape;

/* Element types of a KV cache. Queries, outputs and accumulation are F32.
 * GEM_DTYPE_FP8_E4M3 is OCP FP8 E4M3 ("E4M3FN": 1 sign, 4 exponent bits of bias 7, 3
 * mantissa bits; no infinities, S.1111.111 is NaN, the largest magnitude 448, subnormals
 * m * 2^-9) with a scale per KV head: element (g, t, i) stands for its E4M3 value times the
 * view's scale of head g (gem_kv_view.k_scale / v_scale). */
typedef enum gem_dtype {
    GEM_DTYPE_F32 = 0,
    GEM_DTYPE_BF16,
    GEM_DTYPE_F16,
    GEM_DTYPE_FP8_E4M3,
    GEM_DTYPE_COUNT
} gem_dtype;

/* "f32", "bf16", "f16", "fp8_e4m3"; NULL for an out-of-range value. */
const char *gem_dtype_name(gem_dtype t);
/* Bytes per element (4, 2, 2, 1); 0 for an out-of-range value. */
size_t gem_dtype_size(gem_dtype t);
/* Parses a name as printed by gem_dtype_name. GEM_ERR_NULL / GEM_ERR_PARAM. */
gem_status gem_dtype_parse(const char *name, gem_dtype *out);

/* The head geometry of one attention layer; the live length is the KV view's. */
typedef struct gem_decode_shape {
    int64_t n_q_heads;  /* query heads, >= 1 */
    int64_t n_kv_heads; /* KV heads, >= 1, divides n_q_heads */
    int64_t dk;         /* query/key head dimension, >= 1 */
    int64_t dv;         /* value/output head dimension, >= 1 */
    float scale;        /* score = scale * dot(q, k); finite (1.0 for Gemma 4) */
} gem_decode_shape;

/* GEM_OK for a valid head geometry (sizes >= 1, n_kv_heads divides n_q_heads,
 * finite scale), GEM_ERR_NULL / GEM_ERR_SHAPE otherwise. */
gem_status gem_decode_shape_check(const gem_decode_shape *shape);

/* Gemma 4's full-attention layers take keys and values from one projection
 * (K = V before the norms): with k = k_proj(x), V = v_norm(k) and
 * K = RoPE_pos(k_norm(k)) = RoPE_pos(w_k * V), since both norms divide by the same
 * rms(k) and k_norm only adds the weight w_k. A cache can then hold V alone and
 * rebuild K from it; this describes how (docs/k-from-v.md derives it):
 *
 *   a = k_weight[i] * V(g, t, i)                       for every i < dk
 *   K(g, t, i) = a                                     unless i rotates
 *   theta_j = (pos0 + t) * inv_freq[j]                 for j < n_pairs
 *   K(g, t, j)        = a_j cos theta_j - a_{j+half} sin theta_j
 *   K(g, t, j + half) = a_j sin theta_j + a_{j+half} cos theta_j
 *
 * (NeoX pairing: element j rotates with j + half; pairs j in [n_pairs, half) and
 * elements past 2*half pass through). Row t of the view holds the token at
 * position pos0 + t. Routes compute K in F32 from the stored V (the reference in
 * double), so the cache's rounding applies to V only. */
typedef struct gem_k_from_v {
    const float *k_weight;  /* (dk) F32 in the backend's memory (device memory on CUDA):
                               the k_norm weight; finite */
    const double *inv_freq; /* (n_pairs) host memory: finite, >= 0; read during the call
                               (the CUDA route copies them into the launch) */
    int64_t n_pairs;        /* rotated pairs, 0 <= n_pairs <= half */
    int64_t half;           /* pair offset, 1 <= half, 2 * half <= dk */
    int64_t pos0;           /* position of row 0: 0 <= pos0, pos0 + capacity <= 2^40 */
} gem_k_from_v;

/* The largest position a gem_k_from_v may describe (pos0 + capacity): angles stay exact
 * as doubles. */
#define GEM_K_FROM_V_MAX_POS ((int64_t)1 << 40)

/* A KV cache in place, in any layout whose rows do not overlap:
 *   K element (g, t, i) at ((const T *)k)[g * k_head_stride + t * k_token_stride + i]
 *   V element (g, t, i) at ((const T *)v)[g * v_head_stride + t * v_token_stride + i]
 * with strides in elements of the tensor's dtype, g < n_kv_heads, t < capacity, i < dk
 * (dv for V). Head-major (n_kv_heads, capacity, d): head stride capacity*d, token
 * stride d (or more: padded rows). Token-major (capacity, n_kv_heads, d), as a
 * projection writes rows: head stride d, token stride n_kv_heads*d. Only rows
 * [0, live) are read. k and v may be the same pointer (a cache holding one tensor
 * for both).
 *
 * K rebuilt from V (k_from_v not NULL, see gem_k_from_v): the view holds V alone;
 * k must be NULL, k_head_stride and k_token_stride 0, k_dtype equal to v_dtype, and
 * dk equal to dv. K is never read from memory.
 *
 * FP8 (GEM_DTYPE_FP8_E4M3) tensors carry a scale per KV head: k_scale (n_kv_heads) when
 * k_dtype is FP8, v_scale (n_kv_heads) when v_dtype is FP8, in host memory, read during the
 * call; each > 0 and at most FLT_MAX / 448 (gem_kv_view_scales_check). Element (g, t, i) stands for e * scale[g], e its E4M3 value.
 * Tensors of other types take no scale (NULL). With k_from_v, K is rebuilt from V's values
 * e * v_scale[g] and k_scale is NULL. Routes compute with the exact E4M3 values and apply
 * the scales per head: the scores' factor is (float)(scale * k_scale[g]) (v_scale[g] with
 * k_from_v) and each output row is multiplied by v_scale[g] after the softmax's division;
 * the double reference multiplies the values exactly. */
typedef struct gem_kv_view {
    const void *k;
    const void *v;
    gem_dtype k_dtype;
    gem_dtype v_dtype;
    int64_t k_head_stride, k_token_stride; /* elements */
    int64_t v_head_stride, v_token_stride; /* elements */
    int64_t live;     /* rows that take part, 1 <= live <= capacity */
    int64_t capacity; /* rows per KV head the buffers hold */
    const gem_k_from_v *k_from_v; /* NULL: K is read from k; else K is rebuilt from V */
    const float *k_scale; /* (n_kv_heads) host memory when k_dtype is FP8, else NULL */
    const float *v_scale; /* (n_kv_heads) host memory when v_dtype is FP8, else NULL */
} gem_kv_view;

/* Validates a view for n_kv_heads heads of dk / dv elements: non-NULL k and v,
 * known dtypes, 1 <= live <= capacity, non-negative strides arranged head-major
 * (token stride >= d, head stride >= capacity * token stride) or token-major
 * (head stride >= d, token stride >= n_kv_heads * head stride), so no two rows
 * overlap (GEM_ERR_SHAPE otherwise); elements aligned to their size
 * (GEM_ERR_ALIGN). *k_bytes / *v_bytes (either may be NULL) receive the extent
 * of each tensor in bytes, ((n_kv_heads-1)*head_stride + (capacity-1)*token_stride
 * + d) * size, which must fit size_t (GEM_ERR_OVERFLOW). Reads no data.
 * With k_from_v: k NULL, K strides 0, k_dtype == v_dtype, dk == dv (GEM_ERR_PARAM
 * for the fields of gem_k_from_v: NULL k_weight or inv_freq (with n_pairs > 0),
 * half or n_pairs out of range, pos0 < 0 or pos0 + capacity past
 * GEM_K_FROM_V_MAX_POS; GEM_ERR_SHAPE for the K fields or dk != dv); *k_bytes = 0.
 * The values of k_weight and inv_freq are checked where they are read
 * (gem_k_from_v_check). Scales: GEM_ERR_PARAM when an FP8 tensor has none, a tensor of
 * another type (or K rebuilt from V) has one; GEM_ERR_ALIGN when one is not aligned to
 * float; their values are checked by gem_kv_view_scales_check. */
gem_status gem_kv_view_check(const gem_kv_view *kv, int64_t n_kv_heads, int64_t dk, int64_t dv,
                             size_t *k_bytes, size_t *v_bytes);

/* GEM_OK when kfv's host-side values are usable: every inv_freq finite and >= 0
 * (GEM_ERR_PARAM otherwise). k_weight is in the backend's memory and is not read
 * here (gem_decode_check_finite scans it with the cache). kfv validated by
 * gem_kv_view_check. */
gem_status gem_k_from_v_check(const gem_k_from_v *kfv);

/* GEM_OK when every scale of an FP8 tensor of kv (k_scale, v_scale: n_kv_heads each) is
 * > 0 and at most FLT_MAX / 448 (so every element's value is finite in float),
 * GEM_ERR_PARAM otherwise (NaN and infinity included); GEM_OK for a view without FP8 tensors. kv
 * validated by gem_kv_view_check for n_kv_heads heads. */
gem_status gem_kv_view_scales_check(const gem_kv_view *kv, int64_t n_kv_heads);

/* The dense head-major view of k (n_kv_heads, capacity, dk) and
 * v (n_kv_heads, capacity, dv), F32, with `live` rows taking part. */
gem_kv_view gem_kv_view_dense(const float *k, const float *v, int64_t dk, int64_t dv,
                              int64_t live, int64_t capacity);

/* Element (g, t, i) of a view's K (which = 0) or V (which = 1) as float (exact
 * for F32, BF16 and F16; FP8: e * scale[g] in double rounded once to float). No checks:
 * the caller validated the view (and its scales) and the indices.
 * A view whose K is rebuilt from V (k_from_v) answers K in double arithmetic rounded
 * once to float. */
float gem_kv_view_load(const gem_kv_view *kv, int which, int64_t g, int64_t t, int64_t i);

/* The inputs of one call and how many elements each buffer holds. */
typedef struct gem_attn_inputs {
    const float *q; /* (n_q_heads, dk) */
    const float *k; /* (n_kv_heads, capacity, dk) */
    const float *v; /* (n_kv_heads, capacity, dv) */
    size_t q_elems; /* elements available at q */
    size_t k_elems; /* elements available at k */
    size_t v_elems; /* elements available at v */
} gem_attn_inputs;

/* Checked size arithmetic: *r = a*b or a+b; GEM_ERR_OVERFLOW when it does not
 * fit (*r untouched), GEM_ERR_NULL for a NULL r. */
gem_status gem_mul_size(size_t a, size_t b, size_t *r);
gem_status gem_add_size(size_t a, size_t b, size_t *r);

/* Element counts a shape needs: q, k, v and out. Any pointer may be NULL.
 * Returns GEM_ERR_SHAPE for an invalid shape, GEM_ERR_OVERFLOW when a count
 * does not fit size_t. */
gem_status gem_attn_shape_elems(const gem_attn_shape *shape, size_t *q_elems,
                                size_t *k_elems, size_t *v_elems, size_t *out_elems);

/* Validates a shape on its own: all sizes >= 1, n_kv_heads divides n_q_heads,
 * live <= capacity, finite scale, and every element count fits size_t.
 * live = 0 is GEM_ERR_SHAPE (softmax over no tokens is undefined). */
gem_status gem_attn_shape_check(const gem_attn_shape *shape);

/* Validates shape, inputs and an output of `out_elems` elements: non-NULL
 * pointers, 4-byte alignment, buffers large enough (GEM_ERR_RANGE otherwise).
 * Does not read the data. */
gem_status gem_attn_check(const gem_attn_shape *shape, const gem_attn_inputs *in,
                          const void *out, size_t out_elems);

/* Scans q (all of it) and rows [0, live) of k and v for NaN or infinity.
 * GEM_ERR_NONFINITE if any is found. The input policy of every route is to
 * reject non-finite inputs with that status. */
gem_status gem_attn_check_finite(const gem_attn_shape *shape, const gem_attn_inputs *in);

/* Double-precision direct softmax, the oracle of every route:
 *   s_t = scale * sum_i q[h,i] k[g,t,i]   (in double)
 *   out[h,:] = sum_t exp(s_t - max_t s) v[g,t,:] / sum_t exp(s_t - max_t s)
 * with g = h / (n_q_heads / n_kv_heads). Inputs are F32, every operation is
 * double. `out` (n_q_heads, dv) doubles, `out_elems` available.
 * Rejects non-finite inputs (GEM_ERR_NONFINITE). Single-threaded, slow. */
gem_status gem_attn_reference(const gem_attn_shape *shape, const gem_attn_inputs *in,
                              double *out, size_t out_elems);

/* gem_attn_reference on a KV view in host memory (any layout and dtype the view
 * describes): the same double-precision direct softmax over rows [0, kv->live).
 * q (n_q_heads, dk) F32, out (n_q_heads, dv) doubles with out_elems available.
 * Rejects non-finite q or live rows (GEM_ERR_NONFINITE); validates the view. */
gem_status gem_attn_reference_kv(const gem_decode_shape *shape, const float *q,
                                 const gem_kv_view *kv, double *out, size_t out_elems);

/* ---- online softmax oracle (float) ---------------------------------------
 * A partial state over a token range is (M, S, O[dv]) per query head:
 *   M = max score, S = sum exp(s_t - M), O = sum exp(s_t - M) v_t.
 * The empty state is M = -inf, S = 0, O = 0. */

/* Valid states: either empty (M = -inf, S = 0, every O = 0) or finite M,
 * finite S > 0, finite O. Everything else is GEM_ERR_STATE: NaN anywhere,
 * M = +inf, S < 0, S = 0 with finite M, S > 0 with M = -inf, non-finite S,
 * non-finite O, or M = -inf with a non-zero O. `o` is (dv). */
gem_status gem_online_state_check(int64_t dv, float m, float s, const float *o);

/* Partition p of P over `live` tokens: chunk = ceil(live / P),
 * begin = min(p*chunk, live), end = min(begin + chunk, live). Partitions past
 * the tokens are empty (begin == end == live). Every route that splits the
 * sequence uses this rule, so their partials describe the same ranges.
 * GEM_ERR_PARAM for P < 1, p outside [0, P) or live < 0. */
gem_status gem_partition_range(int64_t live, int64_t partitions, int64_t p,
                               int64_t *begin, int64_t *end);

/* Partial states of every query head over tokens [begin, end), in float, in
 * token order: m, s (n_q_heads), o (n_q_heads, dv). begin == end yields empty
 * states. GEM_ERR_RANGE unless 0 <= begin <= end <= live. The caller states
 * how many elements m/s (`ms_elems`) and o (`o_elems`) hold. A score that is
 * not finite is an error: GEM_ERR_NONFINITE when the q row or k row it came
 * from holds NaN or infinity, GEM_ERR_SCORE when they are finite and
 * scale * q.k overflows float. The query heads of a KV head advance together
 * token by token, and the first non-finite score in that order is the one
 * reported. On those two errors m, s and o may hold partial results. */
gem_status gem_online_partial(const gem_attn_shape *shape, const gem_attn_inputs *in,
                              int64_t begin, int64_t end, float *m, float *s,
                              size_t ms_elems, float *o, size_t o_elems);

/* Merges state a and state b of one head into (m_out, s_out, o_out) with the
 * exact identity M = max(Ma, Mb), S = Sa exp(Ma-M) + Sb exp(Mb-M),
 * O = Oa exp(Ma-M) + Ob exp(Mb-M). An empty state is the identity on either
 * side. Both states are validated first, and so is the result: a merge whose
 * S or any O overflows float is GEM_ERR_STATE, so GEM_OK always comes with a
 * valid state. On error nothing is written. o_out may alias oa or ob.
 * Vectors are (dv); GEM_ERR_NULL for any NULL pointer. */
gem_status gem_online_merge(int64_t dv, float ma, float sa, const float *oa,
                            float mb, float sb, const float *ob,
                            float *m_out, float *s_out, float *o_out);

/* out = O / S for one head, after validating the state. Finalizing an empty
 * state is GEM_ERR_STATE, and so is a quotient that overflows float (GEM_OK
 * always comes with a finite output). On error nothing is written. Vectors
 * are (dv); GEM_ERR_NULL for a NULL o or out. */
gem_status gem_online_finalize(int64_t dv, float m, float s, const float *o, float *out);

/* Upper bounds of the route parameters: a partition count above
 * GEM_MAX_PARTITIONS or a tile above GEM_MAX_TILE tokens is GEM_ERR_PARAM for
 * every route that takes one (so a huge P cannot make a call run forever). */
#define GEM_MAX_PARTITIONS ((int64_t)1 << 16)
#define GEM_MAX_TILE ((int64_t)1024)

/* The whole float oracle: P partials (gem_partition_range), merged per head
 * in partition order 0..P-1, finalized into out (n_q_heads, dv) floats.
 * 1 <= P <= GEM_MAX_PARTITIONS (GEM_ERR_PARAM otherwise); partitions past the
 * tokens are empty and skipped (merging an empty state changes nothing).
 * Rejects non-finite inputs (GEM_ERR_NONFINITE) and scores that overflow
 * float (GEM_ERR_SCORE). out is written only on GEM_OK. Single-threaded;
 * allocates its own scratch. */
gem_status gem_attn_online(const gem_attn_shape *shape, const gem_attn_inputs *in,
                           int64_t partitions, float *out, size_t out_elems);

/* ---- fused scratch byte contract ------------------------------------------ */

typedef struct gem_online_scratch {
    size_t maxima_bytes;       /* P * n_q_heads * sizeof(float) */
    size_t denominators_bytes; /* P * n_q_heads * sizeof(float) */
    size_t numerators_bytes;   /* P * n_q_heads * dv * sizeof(float) */
    size_t total_bytes;        /* the sum of the three */
} gem_online_scratch;

/* Bytes of the partition-major partial layout for P partitions:
 * P=32, 32 heads, DV=512 gives 4,096 / 4,096 / 2,097,152 / 2,105,344.
 * GEM_ERR_PARAM for a count < 1, GEM_ERR_OVERFLOW when a product or the sum
 * does not fit size_t; on error *out is not written. */
gem_status gem_attention_online_scratch_bytes(int64_t partitions, int64_t n_q_heads,
                                              int64_t dv, gem_online_scratch *out);

/* ---- routes -------------------------------------------------------------- */

typedef enum gem_route {
    GEM_ROUTE_REFERENCE = 0, /* double direct softmax (output rounded to float) */
    GEM_ROUTE_ONLINE,        /* float online-softmax oracle */
    GEM_ROUTE_BASELINE,      /* three-stage score / normalize / value + reduce */
    GEM_ROUTE_FUSED,         /* fused split-KV first pass + merge */
    GEM_ROUTE_COUNT
} gem_route;

typedef enum gem_backend {
    GEM_BACKEND_CPU = 0,
    GEM_BACKEND_CUDA,
    GEM_BACKEND_COUNT
} gem_backend;

/* Stable lower-case names ("reference", "online", "baseline", "fused";
 * "cpu", "cuda"); NULL for an out-of-range value. */
const char *gem_route_name(gem_route r);
const char *gem_backend_name(gem_backend b);

/* Parse a name as printed by the functions above. GEM_ERR_PARAM if unknown. */
gem_status gem_route_parse(const char *name, gem_route *out);
gem_status gem_backend_parse(const char *name, gem_backend *out);

#ifdef __cplusplus
}
#endif

#endif /* GEM_ATTN_H */
