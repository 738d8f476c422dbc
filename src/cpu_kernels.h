/*
 * Internal: the CPU backend's inner loops. Each function is defined by a plain
 * scalar rule (written out in its comment) that every implementation follows
 * operation for operation, so the AVX-512 path and the portable path give the
 * same bits, and a result never depends on how the caller batched its calls.
 *
 * Element types. The kernels that read the cache (cpu_dot_tile, cpu_dot_tile_tm,
 * cpu_value_tile, cpu_weighted_rows) take K or V rows as F32, BF16, F16 or FP8
 * E4M3 (gem_dtype; strides count elements of that type). In the rules below k[i]
 * and v[i] are the float each element stands for, converted exactly (BF16: the
 * bits shifted up 16; F16: the IEEE half's value, subnormals included; FP8: the
 * E4M3 value without its head's scale, which the routes apply per head; see
 * gem_bf16_to_f32 / gem_f16_to_f32 / gem_fp8_e4m3_to_f32). The arithmetic after
 * the conversion is the F32 rule unchanged, so a kernel on a 16-bit or FP8 row
 * gives bit for bit what it gives on that row widened to F32. q, scores, weights
 * and accumulators are F32. The AVX-512 path converts as it loads (BF16: a
 * 16-bit shift; F16: vcvtph2ps; FP8: the exponent rebiased in integers, the
 * subnormals through a convert), so the bytes it reads from the cache are the
 * dtype's; so does the AVX2 path (FP8 there through F16: the code's bits under a half's,
 * vcvtph2ps and a multiply by 256).
 */
#ifndef GEM_CPU_KERNELS_H
#define GEM_CPU_KERNELS_H

#include <stdint.h>

#include "gem/attn.h"

/* Lanes of every accumulator: element i of a reduction goes to lane i % 16. */
#define CPU_LANES 16

/* dot(q, k) over n elements:
 *   acc[16] = 0; for i in [0, n): acc[i % 16] = fmaf(q[i], k[i], acc[i % 16]);
 *   then the fixed tree c8[l] = acc[l] + acc[l+8], c4[l] = c8[l] + c8[l+4],
 *   c2[l] = c4[l] + c4[l+2], result c2[0] + c2[1].
 * q (n), k (n). The portable definition, always compiled. */
float cpu_dot_portable(const float *q, const float *k, int64_t n);

/* out[h*out_stride + t] = dot(q + h*n, k_t) for h < nh, t < nt, k_t row t of
 * k (element i at k[t*ks + i] of type kt), each by the rule of
 * cpu_dot_portable on the row's floats (bitwise equal to it).
 * q (nh, n), k (nt, ks) rows of n used, ks >= n, out (nh, out_stride). */
void cpu_dot_tile(const float *q, int64_t nh, const void *k, gem_dtype kt, int64_t ks, int64_t nt,
                  int64_t n, float *out, int64_t out_stride);

/* y[i] = e^x[i] by a fixed rule (Cody-Waite reduction, degree-6 polynomial,
 * about 1 ulp); inputs below -87.33654 (and -inf) give exactly 0, and x = 0
 * gives exactly 1. Meant for x <= 0; x must not be NaN or above 88.
 * x (n), y (n); x == y is allowed. */
void cpu_exp(const float *x, float *y, int64_t n);

/* Sum of x[0, n) with the lane rule and tree of cpu_dot_portable. x (n). */
float cpu_sum(const float *x, int64_t n);

/* Largest element of x[0, n), n >= 1 (exact; no NaN expected). x (n). */
float cpu_max(const float *x, int64_t n);

/* Online-softmax value update of one head over nt tokens:
 *   o[d] = o[d] * alpha; then for t in [0, nt): o[d] = fmaf(p[t], v[t*v_stride + d], o[d])
 * for every d < n. o (n), p (nt), v (nt, v_stride). */
void cpu_rescale_accumulate(float *o, int64_t n, float alpha, const float *p, const float *v,
                            int64_t nt, int64_t v_stride);

/* Sum of 4-byte words over x[0, n) floats with wide independent accumulators:
 * a streaming read for the bandwidth probe. x (n). */
float cpu_stream_sum(const float *x, int64_t n);

/* Where cpu_stream_sum_ahead's prefetches go: L1, L2, or non-temporal. */
typedef enum { CPU_PF_L1, CPU_PF_L2, CPU_PF_NTA } cpu_prefetch_hint;

/* cpu_stream_sum's loop with, at every 256-byte step, the four lines `ahead` bytes on (within
 * x) asked for under `hint`; ahead 0 asks for none (cpu_stream_sum). The prefetches change no
 * value. x (n); ahead >= 0, a multiple of 256. */
float cpu_stream_sum_ahead(const float *x, int64_t n, int64_t ahead, cpu_prefetch_hint hint);

/* Why a scaled score of nh query heads q (nh, n) against nt rows of k (row t
 * at element t*ks, type kt, n elements) is not finite: GEM_ERR_NONFINITE when
 * q or one of those rows holds NaN or infinity, GEM_ERR_SCORE when every
 * element is finite (scale * q.k overflowed float). For the error path only. */
gem_status cpu_score_status(const float *q, int64_t nh, const void *k, gem_dtype kt, int64_t ks,
                            int64_t nt, int64_t n);

/* Which implementation cpu_dot_tile and friends use: "avx512", "avx2" (AVX2, FMA and F16C
 * without AVX-512: the scores, the softmax step, the value update and the baseline's 8 x 32
 * weighted rows, for rows of every type; the rest portable) or "portable". */
const char *cpu_kernels_isa(void);

/* The builds of the kernels that this library holds and this processor runs, widest first:
 * with GEM_CPU_DISPATCH up to three ("avx512", "avx2", "portable"), else the one build
 * (cpu_kernels_isa()). Writes at most max names (static strings) into names and returns how
 * many there are. names (max). The build chosen by default is the first. */
int cpu_kernels_builds(const char **names, int max);

/* With GEM_CPU_DISPATCH (src/cpu_dispatch.c), what the processor and the operating system run:
 * 3 AVX-512 F, DQ, BW and VL with AVX512_VNNI, 2 the same without VNNI, 1 AVX2 with FMA and
 * F16C, 0 none of these (each level with AVX2, FMA and F16C, and the register state it needs
 * saved by the OS). Asks CPUID each call. Not defined in other builds. */
int cpu_isa_level(void);

/* Makes `name`, one of cpu_kernels_builds' names, the build that every later kernel call runs
 * (the tests hold each build to the rules in one process; all give the same bits). Returns 0,
 * or -1 (nothing changed) for another name. Not to be called while kernels run. */
int cpu_kernels_use(const char *name);

/* cpu_dot_tile with the scores token-major, the layout of the fused route's
 * tile: out[t*out_stride + h] = dot(q + h*n, k_t) for h < nh, t < nt, each
 * by the rule of cpu_dot_portable (bitwise equal to it); k of type kt.
 * While it computes it prefetches pf_nt rows of n elements of type kt, ks
 * apart, from pf (the rows of a later tile; pf may be NULL): speed only, never
 * read. q (nh, n), k (nt, ks) rows of n used, ks >= n, out (nt, out_stride),
 * out_stride >= nh, pf (pf_nt, ks). */
void cpu_dot_tile_tm(const float *q, int64_t nh, const void *k, gem_dtype kt, int64_t ks,
                     int64_t nt, int64_t n, float *out, int64_t out_stride, const void *pf,
                     int64_t pf_nt);

/* One tile of the online softmax for nh heads, scores token-major, by the rule:
 *   x[t,h] = scale * sc[t*nh + h]                 (all must be finite, else 1 is
 *                                                  returned and nothing else changed
 *                                                  but sc)
 *   mt[h] = max over t of x[t,h];  M' = max(m[h], mt[h])
 *   alpha[h] = exp(m[h] - M');  m[h] = M'
 *   sc[t*nh + h] = p[t,h] = exp(x[t,h] - M')
 *   s[h] = s[h] * alpha[h] + p[0,h] + p[1,h] + ...  (token order)
 * with exp the rule of cpu_exp (m = -inf gives alpha = 0). nt >= 1.
 * sc (nt, nh), m (nh), s (nh), alpha (nh). Returns 0, or 1 when a scaled score
 * is not finite (|x| > FLT_MAX). */
int cpu_online_tile(float *sc, int64_t nt, int64_t nh, float scale, float *m, float *s,
                    float *alpha);

/* The value update of nh heads over nt tokens made of consecutive tiles of
 * `tile` tokens (the last may be shorter), weights token-major, V of type vt;
 * tile j is scaled by its own alpha before its tokens:
 *   for h < nh, d < n: for each tile j in order:
 *       o[h*n + d] = o[h*n + d] * alpha[j*nh + h]
 *       for t in tile j: o[h*n + d] = fmaf(p[t*nh + h], v[t*v_stride + d], o[h*n + d])
 * Per tile and head the rule of cpu_rescale_accumulate, so one call over k
 * tiles gives the same bits as k calls of one tile each; the accumulators stay
 * in registers across the tiles of a call. While it computes it prefetches
 * pf_nt rows from pf like cpu_dot_tile_tm (pf may be NULL).
 * o (nh, n), alpha (ceil(nt / tile), nh), p (nt, nh), v (nt, v_stride),
 * pf (pf_nt, v_stride); tile >= 1. */
void cpu_value_tile(float *o, int64_t nh, int64_t n, int64_t tile, const float *alpha,
                    const float *p, const void *v, gem_dtype vt, int64_t nt, int64_t v_stride,
                    const void *pf, int64_t pf_nt);

/* Weighted sum of rows for the baseline's value stage, nh heads at once:
 *   for t in [0, nt): for h < nh: for d < w:
 *       acc[h*w + d] = fmaf(p[h*p_stride + t], v[t*v_stride + d], acc[h*w + d])
 * accumulating into what acc holds; v of type vt. p (nh, p_stride),
 * v (nt, v_stride), acc (nh, w). */
void cpu_weighted_rows(const float *p, int64_t p_stride, int64_t nh, const void *v, gem_dtype vt,
                       int64_t v_stride, int64_t nt, int64_t w, float *acc);

/* dst[i] = the float element i of src (type t) stands for, i < n (exact).
 * src (n) elements of t, dst (n). */
void cpu_widen(const void *src, gem_dtype t, int64_t n, float *dst);

#endif /* GEM_CPU_KERNELS_H */
