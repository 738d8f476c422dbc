/*
 * The CPU backend's inner loops (see cpu_kernels.h for the rule each one
 * follows). With AVX-512 (F + DQ) the dot products, the value update and the
 * streaming read use intrinsics; without it, with AVX2, FMA and F16C (x86-64-v3:
 * most AMD and Intel servers before AVX-512), the fused route's three kernels
 * use 8-lane intrinsics; otherwise the portable C below, which gcc vectorizes
 * for whatever the target has. All follow the same per-element operation order,
 * so they agree bit for bit.
 *
 * Cache rows of 16-bit types: the AVX-512 kernels convert 16 elements as they
 * load them (BF16: zero-extend and shift up 16 bits; F16: vcvtph2ps, exact for
 * every half including subnormals), the portable path widens a row chunk by
 * chunk (cpu_widen) and then runs the F32 loop. Either way the float that takes
 * part in the arithmetic is the element's exact value, so the F32 rule holds.
 * Each kernel body is written once, for a dtype known at compile time
 * (always_inline, called from a switch on the dtype), so each dtype gets its
 * own specialized loop.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#ifdef GEM_CPU_VARIANT /* one of several builds of this file (cpu_kernels_variant.h) */
#include "cpu_kernels_variant.h"
#endif
#include "cpu_kernels.h"
#include "kv_view.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>
#define CPU_AVX512 1
#else
#define CPU_AVX512 0
#endif

/* AVX2 with FMA and F16C and no AVX-512: the 8-lane kernels (each 16-lane accumulator of the
 * rule as two 8-lane halves), for rows of every type. The baseline's value stage outside 8
 * heads x 32 columns stays portable. */
#if !CPU_AVX512 && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define CPU_AVX2 1
#else
#define CPU_AVX2 0
#endif

#ifndef CPU_PF_LOCALITY
/* Where the kernels' prefetches of the rows ahead go (__builtin_prefetch
 * locality): 2 = prefetcht1, into L2. */
#define CPU_PF_LOCALITY 2
#endif

/* BF16 to F32 by one shuffle on port 5 (vpermw, vpshufb; AVX512BW) in place of a widening
 * and a shift, whose shift takes port 0 from the FMAs: with the scores of 8 heads two K rows
 * at a time (dot_8x2), on the Xeon host (results/h200/run81/cpu-variants) one core from the L3
 * 6.86 -> 5.97 ms at 8K, 16 cores 5.85 -> 5.01 ms at 64K and 11.43 -> 11.34 at 128K; on the
 * AMD EPYC within its noise. */
#if CPU_AVX512 && defined(__AVX512BW__)
#define CPU_BF16_BY_SHUFFLE 1
#else
#define CPU_BF16_BY_SHUFFLE 0
#endif

#define INLINE static inline __attribute__((always_inline))

/* Bytes of one element of a cache row type. */
INLINE int64_t esize(const gem_dtype t)
{
    return t == GEM_DTYPE_F32 ? 4 : (t == GEM_DTYPE_FP8_E4M3 ? 1 : 2);
}

/* Address of element i of a row of type t. */
INLINE const void *elem(const void *p, int64_t i, const gem_dtype t)
{
    return (const char *)p + i * esize(t);
}

/* Prefetches the n elements (type t) of a row, one request per 64-byte line. */
INLINE void prefetch_row(const void *p, int64_t n, const gem_dtype t)
{
    const int64_t bytes = n * esize(t);
    for (int64_t i = 0; i < bytes; i += 64)
        __builtin_prefetch((const char *)p + i, 0, CPU_PF_LOCALITY);
}

#if CPU_AVX512 || CPU_AVX2
/* Prefetch of the line that holds element i of a row of type t, asked once per
 * 64-byte line as i advances by 16 (every step for F32, every other for 16 bits). */
INLINE void prefetch_step(const void *row, int64_t i, const gem_dtype t)
{
    if ((i * esize(t)) % 64 == 0)
        __builtin_prefetch(elem(row, i, t), 0, CPU_PF_LOCALITY);
}
#endif

const char *cpu_kernels_isa(void)
{
    return CPU_AVX512 ? "avx512" : (CPU_AVX2 ? "avx2" : "portable");
}

#ifndef GEM_CPU_VARIANT /* one build: these two; several: src/cpu_dispatch.c's */
int cpu_kernels_builds(const char **names, int max)
{
    if (max > 0)
        names[0] = cpu_kernels_isa();
    return 1;
}

int cpu_kernels_use(const char *name)
{
    return strcmp(name, cpu_kernels_isa()) == 0 ? 0 : -1;
}
#endif

void cpu_widen(const void *src, gem_dtype t, int64_t n, float *dst)
{
    if (t == GEM_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    if (t == GEM_DTYPE_FP8_E4M3) {
        const uint8_t *b = src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = gem_fp8_e4m3_to_f32(b[i]);
        return;
    }
    const uint16_t *h = src;
    if (t == GEM_DTYPE_BF16)
        for (int64_t i = 0; i < n; i++) {
            const uint32_t bits = (uint32_t)h[i] << 16;
            memcpy(dst + i, &bits, sizeof bits);
        }
    else
        for (int64_t i = 0; i < n; i++)
            dst[i] = gem_f16_to_f32(h[i]);
}

/* Elements the portable path widens at once (a multiple of CPU_LANES, so the
 * lane of element i stays i % 16 across chunks). */
#define WIDEN_CHUNK 256

/* The fixed 16 -> 1 tree of the lane rule. a (16). */
static inline float tree16(const float *a)
{
    float c8[8], c4[4], c2[2];
    for (int l = 0; l < 8; l++)
        c8[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; l++)
        c4[l] = c8[l] + c8[l + 4];
    for (int l = 0; l < 2; l++)
        c2[l] = c4[l] + c4[l + 2];
    return c2[0] + c2[1];
}

float cpu_dot_portable(const float *q, const float *k, int64_t n)
{
    float acc[CPU_LANES] = {0};
    int64_t i = 0;
    for (; i + CPU_LANES <= n; i += CPU_LANES)
        for (int l = 0; l < CPU_LANES; l++)
            acc[l] = fmaf(q[i + l], k[i + l], acc[l]);
    for (int l = 0; i + l < n; l++)
        acc[l] = fmaf(q[i + l], k[i + l], acc[l]);
    return tree16(acc);
}

/* cpu_dot_portable on a row of type kt: the same lanes and tree, the row
 * widened chunk by chunk. q (n), k (n) elements of kt. */
static float dot_portable_any(const float *q, const void *k, gem_dtype kt, int64_t n)
{
    if (kt == GEM_DTYPE_F32)
        return cpu_dot_portable(q, k, n);
    float acc[CPU_LANES] = {0}, buf[WIDEN_CHUNK];
    for (int64_t c = 0; c < n; c += WIDEN_CHUNK) {
        const int64_t m = n - c < WIDEN_CHUNK ? n - c : WIDEN_CHUNK;
        cpu_widen(elem(k, c, kt), kt, m, buf);
        for (int64_t i = 0; i < m; i++)
            acc[i % CPU_LANES] = fmaf(q[c + i], buf[i], acc[i % CPU_LANES]);
    }
    return tree16(acc);
}

#if CPU_AVX512
/* tree16 on a register, in the same order. */
static inline float hsum16(__m512 a)
{
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* Elements [i, i + 16) of a row of type t as 16 floats, converted exactly. */
INLINE __m512 load16(const void *row, int64_t i, const gem_dtype t)
{
    if (t == GEM_DTYPE_F32)
        return _mm512_loadu_ps((const float *)row + i);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    if (t == GEM_DTYPE_FP8_E4M3) {
        /* through F16, which holds every E4M3 value: the code's exponent and mantissa moved
         * under a half's (sign to bit 15, bits 0-6 to 7-13) stand for the value times 2^-8,
         * the E4M3 subnormals as F16 subnormals, so vcvtph2ps and a multiply by 256 give it
         * exactly; the NaN codes (exponent and mantissa all ones) by a compare. 9 operations
         * for 16 elements against 13 for the integer rebiasing below. */
        const __m256i w = _mm256_slli_epi16(
            _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)((const uint8_t *)row + i))),
            8);
        const __m256i h = _mm256_and_si256(_mm256_srai_epi16(w, 1),
                                           _mm256_set1_epi16((short)0xBF80));
        const __mmask16 nan = _mm256_cmpeq_epi16_mask(
            _mm256_and_si256(h, _mm256_set1_epi16(0x3F80)), _mm256_set1_epi16(0x3F80));
        return _mm512_mask_blend_ps(nan, _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f)),
                                    _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
    }
#endif
    if (t == GEM_DTYPE_FP8_E4M3) { /* gem_fp8_e4m3_to_f32's cases, 16 at a time */
        const __m512i b =
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)((const uint8_t *)row + i)));
        const __m512i em = _mm512_and_si512(b, _mm512_set1_epi32(0x7F));
        const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x80)), 24);
        /* normal: exponent rebiased by 120, mantissa on top; zero and subnormal: m * 2^-9 */
        const __m512 nrm = _mm512_castsi512_ps(
            _mm512_add_epi32(_mm512_slli_epi32(em, 20), _mm512_set1_epi32(120 << 23)));
        const __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(em), _mm512_set1_ps(0x1p-9f));
        const __m512 r = _mm512_castsi512_ps(_mm512_or_si512(
            _mm512_castps_si512(_mm512_mask_blend_ps(
                _mm512_cmplt_epu32_mask(em, _mm512_set1_epi32(8)), nrm, sub)),
            sign));
        /* the NaN codes: the positive quiet NaN, whatever their sign (gem_fp8_e4m3_to_f32) */
        return _mm512_mask_blend_ps(_mm512_cmpeq_epu32_mask(em, _mm512_set1_epi32(0x7F)), r,
                                    _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
    }
    const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i));
#if CPU_BF16_BY_SHUFFLE
    if (t == GEM_DTYPE_BF16) /* word 2m + 1 of the result = word m of h, word 2m = 0 */
        return _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(
            0xAAAAAAAAu,
            _mm512_setr_epi32(0, 1 << 16, 2 << 16, 3 << 16, 4 << 16, 5 << 16, 6 << 16, 7 << 16,
                              8 << 16, 9 << 16, 10 << 16, 11 << 16, 12 << 16, 13 << 16,
                              14 << 16, 15 << 16),
            _mm512_castsi256_si512(h)));
#endif
    if (t == GEM_DTYPE_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

/* The 16 dot products of a 4 x 4 block reduced by the tree of hsum16, all at
 * once: acc[h][t] holds the 16 lanes of dot (h, t); lane 4*t + h of the
 * result is hsum16(acc[h][t]), bit for bit. Each step adds the same pairs as
 * tree16 (c8, c4, c2, then the last sum), several dot products per vector:
 * 45 shuffles and adds for 16 results instead of 128. */
static inline __m512 reduce_4x4(__m512 acc[4][4])
{
    __m512 c8[8], c4[4], c2[2];
    for (int i = 0; i < 8; i++) { /* halves: c8 of a[2i] (lanes 0-7), of a[2i+1] (8-15) */
        const __m512 x = acc[(2 * i) / 4][(2 * i) % 4], y = acc[(2 * i + 1) / 4][(2 * i + 1) % 4];
        c8[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    for (int i = 0; i < 4; i++) /* quarter j: c4 of a[4i + j] */
        c4[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c8[2 * i], c8[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(c8[2 * i], c8[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int i = 0; i < 2; i++) /* quarter j: c2 of a[8i + j], then of a[8i + 4 + j] */
        c2[i] = _mm512_add_ps(_mm512_shuffle_ps(c4[2 * i], c4[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(c4[2 * i], c4[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* quarter j: the sums of a[j], a[4 + j], a[8 + j], a[12 + j] */
    return _mm512_add_ps(_mm512_shuffle_ps(c2[0], c2[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(c2[0], c2[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* 4 query rows x 4 key rows (type kt), n a multiple of 16: the 16 dot products
 * in the lanes of one register, lane 4*t + h = dot(q_h, k_t). While it computes
 * it prefetches npf rows of pf (ks apart). */
INLINE __m512 dot_4x4(const float *q, const void *k, int64_t ks, int64_t n, const void *pf,
                      int npf, const gem_dtype kt)
{
    __m512 acc[4][4];
    for (int h = 0; h < 4; h++)
        for (int t = 0; t < 4; t++)
            acc[h][t] = _mm512_setzero_ps();
    /* two steps per iteration: the loads of the next step start under the
     * FMAs of this one (40 -> 50 FMA/ns in L1) */
#pragma GCC unroll 2
    for (int64_t i = 0; i < n; i += 16) {
        __m512 kv[4];
        for (int t = 0; t < 4; t++) {
            kv[t] = load16(elem(k, t * ks, kt), i, kt);
            /* keep each K vector in a register: without this gcc folds the
             * load into every FMA and reads K four times from L1 */
            __asm__("" : "+v"(kv[t]));
        }
        for (int t = 0; t < npf; t++)
            prefetch_step(elem(pf, t * ks, kt), i, kt);
        for (int h = 0; h < 4; h++) {
            const __m512 qv = _mm512_loadu_ps(q + h * n + i);
            for (int t = 0; t < 4; t++)
                acc[h][t] = _mm512_fmadd_ps(qv, kv[t], acc[h][t]);
        }
    }
    return reduce_4x4(acc);
}

/* 8 query rows x 2 key rows (type kt), n a multiple of 16: the 16 dot products in the lanes
 * of one register, lane 8*t + h = dot(q_h, k_t). Each K vector is loaded and converted once
 * for all 8 heads (dot_4x4 converts a row once per block of 4 heads: twice at 8 heads, as
 * many conversions as FMAs for 16-bit K), with the same per-lane FMAs and the same tree, so
 * the same bits. While it computes it prefetches npf rows of pf (ks apart). */
INLINE __m512 dot_8x2(const float *q, const void *k, int64_t ks, int64_t n, const void *pf,
                      int npf, const gem_dtype kt)
{
    __m512 acc[4][4]; /* dot (h, t) in acc[h % 4][2t + h / 4]: reduce_4x4 puts it in lane 8t + h */
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            acc[a][b] = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int64_t i = 0; i < n; i += 16) {
        __m512 kv[2];
        for (int t = 0; t < 2; t++) {
            kv[t] = load16(elem(k, t * ks, kt), i, kt);
            __asm__("" : "+v"(kv[t])); /* one load a K vector (see dot_4x4) */
        }
        for (int t = 0; t < npf; t++)
            prefetch_step(elem(pf, t * ks, kt), i, kt);
        for (int h = 0; h < 8; h++) {
            __m512 qv = _mm512_loadu_ps(q + h * n + i);
            __asm__("" : "+v"(qv)); /* one load a q vector for both rows */
            for (int t = 0; t < 2; t++)
                acc[h % 4][2 * t + h / 4] = _mm512_fmadd_ps(qv, kv[t], acc[h % 4][2 * t + h / 4]);
        }
    }
    return reduce_4x4(acc);
}

/* 4 query rows x 1 key row: out[h*os] = dot(q_h, k). */
INLINE void dot_4x1(const float *q, const void *k, int64_t n, float *out, int64_t os,
                    const gem_dtype kt)
{
    __m512 acc[4];
    for (int h = 0; h < 4; h++)
        acc[h] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 kv = load16(k, i, kt);
        for (int h = 0; h < 4; h++)
            acc[h] = _mm512_fmadd_ps(_mm512_loadu_ps(q + h * n + i), kv, acc[h]);
    }
    for (int h = 0; h < 4; h++)
        out[h * os] = hsum16(acc[h]);
}

/* 1 query row x 4 key rows. */
INLINE void dot_1x4(const float *q, const void *k, int64_t ks, int64_t n, float *out,
                    const gem_dtype kt)
{
    __m512 acc[4];
    for (int t = 0; t < 4; t++)
        acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 qv = _mm512_loadu_ps(q + i);
        for (int t = 0; t < 4; t++)
            acc[t] = _mm512_fmadd_ps(qv, load16(elem(k, t * ks, kt), i, kt), acc[t]);
    }
    for (int t = 0; t < 4; t++)
        out[t] = hsum16(acc[t]);
}

INLINE float dot_1x1(const float *q, const void *k, int64_t n, const gem_dtype kt)
{
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16)
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), load16(k, i, kt), acc);
    return hsum16(acc);
}

/* cpu_dot_tile for n a multiple of 16. */
INLINE void dot_tile_avx(const float *q, int64_t nh, const void *k, int64_t ks, int64_t nt,
                         int64_t n, float *out, int64_t out_stride, const gem_dtype kt)
{
    int64_t h = 0;
    for (; h + 4 <= nh; h += 4) {
        int64_t t = 0;
        for (; t + 4 <= nt; t += 4) {
            float r[16];
            _mm512_storeu_ps(r, dot_4x4(q + h * n, elem(k, t * ks, kt), ks, n, NULL, 0, kt));
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++)
                    out[(h + a) * out_stride + t + b] = r[4 * b + a];
        }
        for (; t < nt; t++)
            dot_4x1(q + h * n, elem(k, t * ks, kt), n, out + h * out_stride + t, out_stride, kt);
    }
    for (; h < nh; h++) {
        int64_t t = 0;
        for (; t + 4 <= nt; t += 4)
            dot_1x4(q + h * n, elem(k, t * ks, kt), ks, n, out + h * out_stride + t, kt);
        for (; t < nt; t++)
            out[h * out_stride + t] = dot_1x1(q + h * n, elem(k, t * ks, kt), n, kt);
    }
}

/* cpu_dot_tile_tm for n a multiple of 16. The blocks of 4 heads share the
 * prefetches of the 4 rows ahead: block b asks for rows [b*rpb, (b+1)*rpb),
 * spread over its FMAs. */
INLINE void dot_tile_tm_avx(const float *q, int64_t nh, const void *k, int64_t ks, int64_t nt,
                            int64_t n, float *out, int64_t out_stride, const void *pf,
                            int64_t pf_nt, const gem_dtype kt)
{
    if (nh == 8) { /* a group of 8 query heads (Gemma 4's full layers): two rows at a time */
        int64_t t = 0;
        for (; t + 2 <= nt; t += 2) {
            const int use = pf && t + 2 <= pf_nt;
            const void *kt0 = elem(k, t * ks, kt), *pf0 = use ? elem(pf, t * ks, kt) : NULL;
            /* n = 512 (Gemma 4's full layers) compiled apart: the eight q rows become one
             * pointer and immediate offsets. With n a run-time value gcc moves the row pointers
             * through xmm registers and the stack every step, on the FMA ports; llvm-mca
             * (Ice Lake server model) 13.8 -> 11.6 cycles per 16 FMAs; the AMD EPYC's score 5%
             * faster (dev/cpu/fused_parts; results/h200/NOTES.md "Run 84"). Same arithmetic. */
            const __m512 r = n == 512 ? dot_8x2(q, kt0, ks, 512, pf0, use ? 2 : 0, kt)
                                      : dot_8x2(q, kt0, ks, n, pf0, use ? 2 : 0, kt);
            _mm256_storeu_ps(out + t * out_stride, _mm512_castps512_ps256(r));
            _mm256_storeu_ps(out + (t + 1) * out_stride, _mm512_extractf32x8_ps(r, 1));
        }
        for (; t < nt; t++)
            for (int64_t h = 0; h < 8; h += 4)
                dot_4x1(q + h * n, elem(k, t * ks, kt), n, out + t * out_stride + h, 1, kt);
        for (int64_t u = nt / 2 * 2; pf && u < pf_nt; u++) /* rows no pair covered */
            prefetch_row(elem(pf, u * ks, kt), n, kt);
        return;
    }
    const int64_t nb = nh / 4;
    const int64_t rpb = nb >= 4 ? 1 : (nb > 0 ? (4 + nb - 1) / nb : 4);
    /* token blocks outside, head blocks inside: the 4 K rows of a block are read
     * by every head block while they are in L1 */
    int64_t t = 0;
    for (; t + 4 <= nt && nb > 0; t += 4)
        for (int64_t h = 0; h + 4 <= nh; h += 4) {
            const int64_t r0 = (h / 4) * rpb, r1 = r0 + rpb < 4 ? r0 + rpb : 4;
            const int use = pf && t + 4 <= pf_nt && r0 < 4;
            const __m512 r = dot_4x4(q + h * n, elem(k, t * ks, kt), ks, n,
                                     use ? elem(pf, (t + r0) * ks, kt) : NULL,
                                     use ? (int)(r1 - r0) : 0, kt);
            _mm_storeu_ps(out + (t + 0) * out_stride + h, _mm512_extractf32x4_ps(r, 0));
            _mm_storeu_ps(out + (t + 1) * out_stride + h, _mm512_extractf32x4_ps(r, 1));
            _mm_storeu_ps(out + (t + 2) * out_stride + h, _mm512_extractf32x4_ps(r, 2));
            _mm_storeu_ps(out + (t + 3) * out_stride + h, _mm512_extractf32x4_ps(r, 3));
        }
    for (; t < nt && nb > 0; t++)
        for (int64_t h = 0; h + 4 <= nh; h += 4)
            dot_4x1(q + h * n, elem(k, t * ks, kt), n, out + t * out_stride + h, 1, kt);
    for (int64_t h = nb * 4; h < nh; h++) {
        int64_t u = 0;
        for (; u + 4 <= nt; u += 4) {
            float r[4];
            dot_1x4(q + h * n, elem(k, u * ks, kt), ks, n, r, kt);
            for (int b = 0; b < 4; b++)
                out[(u + b) * out_stride + h] = r[b];
        }
        for (; u < nt; u++)
            out[u * out_stride + h] = dot_1x1(q + h * n, elem(k, u * ks, kt), n, kt);
    }
    for (int64_t u = nh >= 4 ? nt / 4 * 4 : 0; pf && u < pf_nt; u++) /* rows no block covered */
        prefetch_row(elem(pf, u * ks, kt), n, kt);
}
#endif

#if CPU_AVX2
/* Elements [i, i + 8) of a row of type t as 8 floats, converted exactly (BF16: zero-extended
 * and shifted up 16 bits; F16: vcvtph2ps, subnormals included; FP8 E4M3 through F16 as
 * load16's AVX512BW path, gem_fp8_e4m3_to_f32's bits for every code). */
INLINE __m256 load8(const void *row, int64_t i, const gem_dtype t)
{
    if (t == GEM_DTYPE_F32)
        return _mm256_loadu_ps((const float *)row + i);
    if (t == GEM_DTYPE_FP8_E4M3) {
        /* the code's exponent and mantissa under a half's (sign to bit 15, bits 0-6 to 7-13)
         * stand for the value times 2^-8, the subnormals as F16 subnormals; the NaN codes
         * (exponent and mantissa all ones) become F16's quiet NaN 0x7E00, which vcvtph2ps
         * widens to 0x7FC00000 and the multiply by 256 returns as it is. 8 operations. */
        const __m128i w = _mm_slli_epi16(
            _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)((const uint8_t *)row + i))), 8);
        const __m128i h = _mm_and_si128(_mm_srai_epi16(w, 1), _mm_set1_epi16((short)0xBF80));
        const __m128i nan = _mm_cmpeq_epi16(_mm_and_si128(h, _mm_set1_epi16(0x3F80)),
                                            _mm_set1_epi16(0x3F80));
        return _mm256_mul_ps(_mm256_cvtph_ps(_mm_blendv_epi8(h, _mm_set1_epi16(0x7E00), nan)),
                             _mm256_set1_ps(256.0f));
    }
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
    if (t == GEM_DTYPE_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

/* tree16 of the 16 lanes lo (0-7) and hi (8-15), in its order. */
static inline float hsum16_avx2(__m256 lo, __m256 hi)
{
    const __m256 s8 = _mm256_add_ps(lo, hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* out[h * os] = dot(q_h, k) for NH (1..8) query rows of q (n apart) and one row k of type kt,
 * n a multiple of 16. The rule's lanes 0-7 of every head over the whole row first, then lanes
 * 8-15: a lane's FMAs are in the rule's order and the two halves meet only in the tree, so NH
 * accumulators and one K vector are live at a time (NH 8 would not fit 16 registers with both
 * halves). While it computes the first half it asks for the lines of pf (a row of type kt with
 * n elements; NULL: none). */
INLINE void dot_row_avx2(const float *q, int64_t n, const void *k, const void *pf, float *out,
                         int64_t os, const gem_dtype kt, const int NH)
{
    __m256 lo[8];
    for (int half = 0; half < 2; half++) {
        __m256 acc[8];
        for (int h = 0; h < NH; h++)
            acc[h] = _mm256_setzero_ps();
        for (int64_t i = 8 * half; i < n; i += 16) {
            const __m256 kv = load8(k, i, kt);
            if (pf && half == 0)
                prefetch_step(pf, i, kt);
            for (int h = 0; h < NH; h++)
                acc[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * n + i), kv, acc[h]);
        }
        for (int h = 0; h < NH; h++) {
            if (half == 0)
                lo[h] = acc[h];
            else
                out[h * os] = hsum16_avx2(lo[h], acc[h]);
        }
    }
}

/* dot_row_avx2 for nh heads (blocks of 8, then the rest): out[h * os] = dot(q_h, k). */
INLINE void dot_heads_avx2(const float *q, int64_t nh, int64_t n, const void *k, const void *pf,
                           float *out, int64_t os, const gem_dtype kt)
{
    int64_t h = 0;
    for (; h + 8 <= nh; h += 8, pf = NULL) /* the prefetch once, with the first block */
        dot_row_avx2(q + h * n, n, k, pf, out + h * os, os, kt, 8);
    switch (nh - h) {
    case 7: dot_row_avx2(q + h * n, n, k, pf, out + h * os, os, kt, 7); break;
    case 6: dot_row_avx2(q + h * n, n, k, pf, out + h * os, os, kt, 6); break;
    case 5: dot_row_avx2(q + h * n, n, k, pf, out + h * os, os, kt, 5); break;
    case 4: dot_row_avx2(q + h * n, n, k, pf, out + h * os, os, kt, 4); break;
    case 3: dot_row_avx2(q + h * n, n, k, pf, out + h * os, os, kt, 3); break;
    case 2: dot_row_avx2(q + h * n, n, k, pf, out + h * os, os, kt, 2); break;
    case 1: dot_row_avx2(q + h * n, n, k, pf, out + h * os, os, kt, 1); break;
    default: break;
    }
}

/* cpu_dot_tile (h_stride = out_stride, t_stride = 1) and cpu_dot_tile_tm (h_stride = 1,
 * t_stride = out_stride) for n a multiple of 16: row by row, row t asking for row t of pf. */
INLINE void dot_tile_avx2(const float *q, int64_t nh, const void *k, int64_t ks, int64_t nt,
                          int64_t n, float *out, int64_t h_stride, int64_t t_stride,
                          const void *pf, int64_t pf_nt, const gem_dtype kt)
{
    for (int64_t t = 0; t < nt; t++)
        dot_heads_avx2(q, nh, n, elem(k, t * ks, kt),
                       pf && t < pf_nt ? elem(pf, t * ks, kt) : NULL, out + t * t_stride,
                       h_stride, kt);
    for (int64_t t = nt; pf && t < pf_nt; t++) /* rows beyond the tile's */
        prefetch_row(elem(pf, t * ks, kt), n, kt);
}
#endif

void cpu_dot_tile(const float *q, int64_t nh, const void *k, gem_dtype kt, int64_t ks, int64_t nt,
                  int64_t n, float *out, int64_t out_stride)
{
#if CPU_AVX512
    if (n % 16 == 0) {
        switch (kt) {
        case GEM_DTYPE_FP8_E4M3:
            dot_tile_avx(q, nh, k, ks, nt, n, out, out_stride, GEM_DTYPE_FP8_E4M3);
            return;
        case GEM_DTYPE_BF16:
            dot_tile_avx(q, nh, k, ks, nt, n, out, out_stride, GEM_DTYPE_BF16);
            return;
        case GEM_DTYPE_F16:
            dot_tile_avx(q, nh, k, ks, nt, n, out, out_stride, GEM_DTYPE_F16);
            return;
        default:
            dot_tile_avx(q, nh, k, ks, nt, n, out, out_stride, GEM_DTYPE_F32);
            return;
        }
    }
#elif CPU_AVX2
    if (n % 16 == 0) {
        if (kt == GEM_DTYPE_FP8_E4M3)
            dot_tile_avx2(q, nh, k, ks, nt, n, out, out_stride, 1, NULL, 0, GEM_DTYPE_FP8_E4M3);
        else if (kt == GEM_DTYPE_BF16)
            dot_tile_avx2(q, nh, k, ks, nt, n, out, out_stride, 1, NULL, 0, GEM_DTYPE_BF16);
        else if (kt == GEM_DTYPE_F16)
            dot_tile_avx2(q, nh, k, ks, nt, n, out, out_stride, 1, NULL, 0, GEM_DTYPE_F16);
        else
            dot_tile_avx2(q, nh, k, ks, nt, n, out, out_stride, 1, NULL, 0, GEM_DTYPE_F32);
        return;
    }
#endif
    for (int64_t h = 0; h < nh; h++)
        for (int64_t t = 0; t < nt; t++)
            out[h * out_stride + t] = dot_portable_any(q + h * n, elem(k, t * ks, kt), kt, n);
}

void cpu_dot_tile_tm(const float *q, int64_t nh, const void *k, gem_dtype kt, int64_t ks,
                     int64_t nt, int64_t n, float *out, int64_t out_stride, const void *pf,
                     int64_t pf_nt)
{
#if CPU_AVX512
    if (n % 16 == 0) {
        switch (kt) {
        case GEM_DTYPE_FP8_E4M3:
            dot_tile_tm_avx(q, nh, k, ks, nt, n, out, out_stride, pf, pf_nt,
                            GEM_DTYPE_FP8_E4M3);
            return;
        case GEM_DTYPE_BF16:
            dot_tile_tm_avx(q, nh, k, ks, nt, n, out, out_stride, pf, pf_nt, GEM_DTYPE_BF16);
            return;
        case GEM_DTYPE_F16:
            dot_tile_tm_avx(q, nh, k, ks, nt, n, out, out_stride, pf, pf_nt, GEM_DTYPE_F16);
            return;
        default:
            dot_tile_tm_avx(q, nh, k, ks, nt, n, out, out_stride, pf, pf_nt, GEM_DTYPE_F32);
            return;
        }
    }
#elif CPU_AVX2
    if (n % 16 == 0) {
        if (kt == GEM_DTYPE_FP8_E4M3)
            dot_tile_avx2(q, nh, k, ks, nt, n, out, 1, out_stride, pf, pf_nt,
                          GEM_DTYPE_FP8_E4M3);
        else if (kt == GEM_DTYPE_BF16)
            dot_tile_avx2(q, nh, k, ks, nt, n, out, 1, out_stride, pf, pf_nt, GEM_DTYPE_BF16);
        else if (kt == GEM_DTYPE_F16)
            dot_tile_avx2(q, nh, k, ks, nt, n, out, 1, out_stride, pf, pf_nt, GEM_DTYPE_F16);
        else
            dot_tile_avx2(q, nh, k, ks, nt, n, out, 1, out_stride, pf, pf_nt, GEM_DTYPE_F32);
        return;
    }
#endif
    for (int64_t t = 0; pf && t < pf_nt; t++)
        prefetch_row(elem(pf, t * ks, kt), n, kt);
    for (int64_t t = 0; t < nt; t++)
        for (int64_t h = 0; h < nh; h++)
            out[t * out_stride + h] = dot_portable_any(q + h * n, elem(k, t * ks, kt), kt, n);
}

/* e^x for x <= 0 by Cody-Waite reduction x = n ln2 + r and the Cephes
 * degree-6 polynomial; 2^n built from the exponent bits. */
static inline float exp_rule(float x)
{
    const float xc = x < -88.0f ? -88.0f : (x > 88.0f ? 88.0f : x);
    const float t = xc * 1.44269504088896341f + 12582912.0f;
    const float nf = t - 12582912.0f;
    float r = fmaf(nf, -0.693359375f, xc);
    r = fmaf(nf, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    const float y = fmaf(p, r * r, r) + 1.0f;
    const int32_t bits = ((int32_t)nf + 127) * (int32_t)8388608; /* << 23, no UB */
    float s;
    memcpy(&s, &bits, sizeof s);
    return x < -87.33654f ? 0.0f : y * s;
}

void cpu_exp(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = exp_rule(x[i]);
}

float cpu_sum(const float *x, int64_t n)
{
    float acc[CPU_LANES] = {0};
    int64_t i = 0;
    for (; i + CPU_LANES <= n; i += CPU_LANES)
        for (int l = 0; l < CPU_LANES; l++)
            acc[l] += x[i + l];
    for (int l = 0; i + l < n; l++)
        acc[l] += x[i + l];
    return tree16(acc);
}

float cpu_max(const float *x, int64_t n)
{
    float acc[CPU_LANES];
    for (int l = 0; l < CPU_LANES; l++)
        acc[l] = x[0];
    int64_t i = 0;
    for (; i + CPU_LANES <= n; i += CPU_LANES)
        for (int l = 0; l < CPU_LANES; l++)
            acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
    for (int l = 0; i + l < n; l++)
        acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
    float m = acc[0];
    for (int l = 1; l < CPU_LANES; l++)
        m = acc[l] > m ? acc[l] : m;
    return m;
}

void cpu_rescale_accumulate(float *o, int64_t n, float alpha, const float *p, const float *v,
                            int64_t nt, int64_t v_stride)
{
#if CPU_AVX512
    if (n % 16 == 0) {
        const __m512 va = _mm512_set1_ps(alpha);
        int64_t t0 = 0;
        int first = 1;
        do {
            const int64_t m = nt - t0 < 8 ? nt - t0 : 8;
            __m512 pb[8];
            for (int64_t t = 0; t < m; t++)
                pb[t] = _mm512_set1_ps(p[t0 + t]);
            const float *vb = v + t0 * v_stride;
            for (int64_t d = 0; d < n; d += 16) {
                __m512 a = _mm512_loadu_ps(o + d);
                if (first)
                    a = _mm512_mul_ps(a, va);
                for (int64_t t = 0; t < m; t++)
                    a = _mm512_fmadd_ps(pb[t], _mm512_loadu_ps(vb + t * v_stride + d), a);
                _mm512_storeu_ps(o + d, a);
            }
            first = 0;
            t0 += m;
        } while (t0 < nt);
        return;
    }
#endif
    for (int64_t d = 0; d < n; d++)
        o[d] *= alpha;
    for (int64_t t = 0; t < nt; t++) {
        const float pt = p[t];
        const float *vt = v + t * v_stride;
        for (int64_t d = 0; d < n; d++)
            o[d] = fmaf(pt, vt[d], o[d]);
    }
}

/* cpu_online_tile for a compile-time head count (so the head loops vectorize). */
static inline int online_tile_n(float *sc, int64_t nt, const int64_t nh, float scale, float *m,
                                float *s, float *alpha)
{
    int bad = 0;
    for (int64_t h = 0; h < nh; h++)
        alpha[h] = -INFINITY; /* the tile maxima first */
    for (int64_t t = 0; t < nt; t++)
        for (int64_t h = 0; h < nh; h++) {
            const float x = scale * sc[t * nh + h];
            bad |= !(fabsf(x) <= FLT_MAX);
            sc[t * nh + h] = x;
            alpha[h] = x > alpha[h] ? x : alpha[h];
        }
    if (bad)
        return 1;
    for (int64_t h = 0; h < nh; h++) {
        const float mn = m[h] > alpha[h] ? m[h] : alpha[h];
        alpha[h] = exp_rule(m[h] - mn);
        m[h] = mn;
    }
    for (int64_t t = 0; t < nt; t++)
        for (int64_t h = 0; h < nh; h++)
            sc[t * nh + h] = exp_rule(sc[t * nh + h] - m[h]);
    for (int64_t h = 0; h < nh; h++)
        s[h] *= alpha[h];
    for (int64_t t = 0; t < nt; t++)
        for (int64_t h = 0; h < nh; h++)
            s[h] += sc[t * nh + h];
    return 0;
}

#if CPU_AVX512 || CPU_AVX2
/* exp_rule on 8 lanes, operation for operation (the same bits). */
static inline __m256 exp_rule8(__m256 x)
{
    const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-88.0f)),
                                    _mm256_set1_ps(88.0f));
    const __m256 big = _mm256_set1_ps(12582912.0f);
    const __m256 t = _mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)), big);
    const __m256 nf = _mm256_sub_ps(t, big);
    __m256 r = _mm256_fmadd_ps(nf, _mm256_set1_ps(-0.693359375f), xc);
    r = _mm256_fmadd_ps(nf, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r),
                                   _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvttps_epi32(nf), _mm256_set1_epi32(127)), 23);
    const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_LT_OQ);
    return _mm256_andnot_ps(under, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}

/* cpu_online_tile for 8 heads: one 8-lane vector per token. */
static int online_tile_8(float *sc, int64_t nt, float scale, float *m, float *s, float *alpha)
{
    const __m256 vs = _mm256_set1_ps(scale), lim = _mm256_set1_ps(FLT_MAX);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 mt = _mm256_set1_ps(-INFINITY), ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    for (int64_t t = 0; t < nt; t++) {
        const __m256 x = _mm256_mul_ps(vs, _mm256_loadu_ps(sc + t * 8));
        ok = _mm256_and_ps(ok, _mm256_cmp_ps(_mm256_and_ps(x, absmask), lim, _CMP_LE_OQ));
        _mm256_storeu_ps(sc + t * 8, x);
        mt = _mm256_max_ps(x, mt); /* x > mt ? x : mt */
    }
    if (_mm256_movemask_ps(ok) != 0xff)
        return 1;
    const __m256 mo = _mm256_loadu_ps(m);
    const __m256 mn = _mm256_max_ps(mo, mt); /* m > mt ? m : mt */
    const __m256 al = exp_rule8(_mm256_sub_ps(mo, mn));
    _mm256_storeu_ps(alpha, al);
    _mm256_storeu_ps(m, mn);
    __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(s), al);
    for (int64_t t = 0; t < nt; t++) {
        const __m256 pt = exp_rule8(_mm256_sub_ps(_mm256_loadu_ps(sc + t * 8), mn));
        _mm256_storeu_ps(sc + t * 8, pt);
        acc = _mm256_add_ps(acc, pt);
    }
    _mm256_storeu_ps(s, acc);
    return 0;
}
#endif

int cpu_online_tile(float *sc, int64_t nt, int64_t nh, float scale, float *m, float *s,
                    float *alpha)
{
#if CPU_AVX512 || CPU_AVX2
    if (nh == 8)
        return online_tile_8(sc, nt, scale, m, s, alpha);
#endif
    if (nh == 8)
        return online_tile_n(sc, nt, 8, scale, m, s, alpha);
    return online_tile_n(sc, nt, nh, scale, m, s, alpha);
}

#if CPU_AVX512 || CPU_AVX2
/* 0 when all NH alphas of a tile are exactly 1: the rule's o * alpha is then o
 * itself, bit for bit (x * 1 = x for every float but a signalling NaN, which no
 * accumulator of the routes holds: they start at 0 and only take FMA results),
 * so the multiplies can be left out. Once the running maxima settle (most tiles
 * of a long context) that saves NH heads x dv multiplies per tile. al (NH). */
INLINE int rescales(const float *al, const int NH)
{
    if (NH == 8)
        return _mm256_movemask_ps(
                   _mm256_cmp_ps(_mm256_loadu_ps(al), _mm256_set1_ps(1.0f), _CMP_NEQ_UQ)) != 0;
    for (int h = 0; h < NH; h++)
        if (al[h] != 1.0f) /* a NaN too */
            return 1;
    return 0;
}

/* Tiles one value_nh call takes at most (cpu_value_tile splits longer calls). */
#define VALUE_MAX_TILES 64

#endif

#if CPU_AVX512

/* cpu_value_tile for NH (1, 2, 4 or 8) heads, n a multiple of 16, V of type vt, at
 * most VALUE_MAX_TILES tiles: per 32 (then 16) columns the NH heads' accumulators
 * stay in registers for the whole call; each V vector is loaded (and converted)
 * once and feeds NH FMAs (weights broadcast from memory). The tokens run in segments:
 * a segment starts at a tile whose alphas are not all 1 (its multiplies first)
 * and takes every token up to the next such tile in one loop; a tile whose
 * alphas are all 1 needs no multiply (x * 1 = x), so once the running maxima
 * settle a call is one loop over its tokens. Per element the rule's operations
 * in the rule's order. */
INLINE void value_nh(float *o, int64_t n, int64_t tile, const float *alpha, const float *p,
                     const void *v, int64_t nt, int64_t vs, const void *pf, int64_t pf_nt,
                     const gem_dtype vt, const int NH)
{
    int64_t seg_t[VALUE_MAX_TILES + 1];     /* first token of each segment, then nt */
    const float *seg_al[VALUE_MAX_TILES];   /* its tile's alphas, NULL when all 1 */
    int nseg = 0;
    for (int64_t t0 = 0; t0 < nt; t0 += tile) {
        const float *al = alpha + (t0 / tile) * NH;
        const int r = rescales(al, NH);
        if (nseg == 0 || r) {
            seg_t[nseg] = t0;
            seg_al[nseg] = r ? al : NULL;
            nseg++;
        }
    }
    seg_t[nseg] = nt;
    const int64_t row_bytes = vs * esize(vt);
    int64_t d = 0;
    /* BF16: a 64-byte load holds 32 columns; shifting each dword up 16 bits gives
     * the even columns as floats, masking its low half the odd ones (2 cheap ops
     * instead of 2 widenings and 2 shifts). a[h] then holds the even columns of
     * the block and b[h] the odd ones: o is split so on load and merged back on
     * store (2 + 2 permutes per head and call). */
    const int eo = vt == GEM_DTYPE_BF16;
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512i himask = _mm512_set1_epi32((int)0xFFFF0000u);
    for (; d + 32 <= n; d += 32) { /* 32 columns: each weight broadcast feeds 2 FMAs */
        __m512 a[8], b[8];
        for (int h = 0; h < NH; h++) {
            a[h] = _mm512_loadu_ps(o + h * n + d);
            b[h] = _mm512_loadu_ps(o + h * n + d + 16);
            if (eo) {
                const __m512 x = a[h];
                a[h] = _mm512_permutex2var_ps(x, ev, b[h]);
                b[h] = _mm512_permutex2var_ps(x, od, b[h]);
            }
        }
        const char *vr = elem(v, d, vt);
        const char *pr = pf_nt > 0 ? elem(pf, d, vt) : NULL;
        const float *pt = p;
        for (int g = 0; g < nseg; g++) {
            if (seg_al[g])
                for (int h = 0; h < NH; h++) {
                    const __m512 ah = _mm512_set1_ps(seg_al[g][h]);
                    a[h] = _mm512_mul_ps(a[h], ah);
                    b[h] = _mm512_mul_ps(b[h], ah);
                }
            for (int64_t t = seg_t[g]; t < seg_t[g + 1]; t++) {
                __m512 va, vb;
                if (eo) {
                    const __m512i w = _mm512_loadu_si512((const void *)vr);
#if CPU_BF16_BY_SHUFFLE
                    /* each dword's low word moved up, its low half zeroed: bytes 0, 1 of
                     * dword j of a 16-byte lane to bytes 2, 3, bytes 0, 1 from index 0x80 */
                    va = _mm512_castsi512_ps(_mm512_shuffle_epi8(
                        w, _mm512_broadcast_i32x4(_mm_setr_epi8(-128, -128, 0, 1, -128, -128,
                                                                4, 5, -128, -128, 8, 9, -128,
                                                                -128, 12, 13))));
#else
                    va = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
#endif
                    vb = _mm512_castsi512_ps(_mm512_and_si512(w, himask));
                } else {
                    va = load16(vr, 0, vt);
                    vb = load16(vr, 16, vt);
                }
                if (t < pf_nt) {
                    prefetch_step(pr, 0, vt);
                    prefetch_step(pr, 16, vt);
                    pr += row_bytes;
                }
                /* the row's next 32 columns into L1 for the next block: the block
                 * reads one line (two for F32) of each of its rows, a stride the
                 * hardware prefetchers follow late (5% at 16K tokens, one core) */
                __builtin_prefetch(vr + 32 * esize(vt), 0, 3);
                if (vt == GEM_DTYPE_F32)
                    __builtin_prefetch(vr + 32 * esize(vt) + 64, 0, 3);
                for (int h = 0; h < NH; h++) {
                    const __m512 ph = _mm512_set1_ps(pt[h]);
                    a[h] = _mm512_fmadd_ps(ph, va, a[h]);
                    b[h] = _mm512_fmadd_ps(ph, vb, b[h]);
                }
                vr += row_bytes;
                pt += NH;
            }
        }
        for (int h = 0; h < NH; h++) {
            if (eo) {
                const __m512 x = a[h];
                a[h] = _mm512_permutex2var_ps(x, lo, b[h]);
                b[h] = _mm512_permutex2var_ps(x, hi, b[h]);
            }
            _mm512_storeu_ps(o + h * n + d, a[h]);
            _mm512_storeu_ps(o + h * n + d + 16, b[h]);
        }
    }
    for (; d < n; d += 16) {
        __m512 a[8];
        for (int h = 0; h < NH; h++)
            a[h] = _mm512_loadu_ps(o + h * n + d);
        const char *vr = elem(v, d, vt);
        const char *pr = pf_nt > 0 ? elem(pf, d, vt) : NULL;
        const float *pt = p;
        for (int g = 0; g < nseg; g++) {
            if (seg_al[g])
                for (int h = 0; h < NH; h++)
                    a[h] = _mm512_mul_ps(a[h], _mm512_set1_ps(seg_al[g][h]));
            for (int64_t t = seg_t[g]; t < seg_t[g + 1]; t++) {
                const __m512 vv = load16(vr, 0, vt);
                if (t < pf_nt) {
                    prefetch_step(pr, 0, vt);
                    pr += row_bytes;
                }
                for (int h = 0; h < NH; h++)
                    a[h] = _mm512_fmadd_ps(_mm512_set1_ps(pt[h]), vv, a[h]);
                vr += row_bytes;
                pt += NH;
            }
        }
        for (int h = 0; h < NH; h++)
            _mm512_storeu_ps(o + h * n + d, a[h]);
    }
}

#elif CPU_AVX2
/* The segments of a value call of nt tokens in tiles of `tile` (at most VALUE_MAX_TILES): a
 * segment starts at the first tile and at every tile whose NH alphas are not all 1 (rescales),
 * and runs to the next one (the AVX-512 value_nh builds the same segments inline, in the
 * form it was measured in). seg_t[g]: its first token (seg_t[nseg] = nt); seg_al[g]: its
 * tile's alphas, NULL when all 1 (no multiply). Returns nseg. alpha (tiles, NH). */
INLINE int value_segments(int64_t tile, const float *alpha, int64_t nt, int64_t *seg_t,
                          const float **seg_al, const int NH)
{
    int nseg = 0;
    for (int64_t t0 = 0; t0 < nt; t0 += tile) {
        const float *al = alpha + (t0 / tile) * NH;
        const int r = rescales(al, NH);
        if (nseg == 0 || r) {
            seg_t[nseg] = t0;
            seg_al[nseg] = r ? al : NULL;
            nseg++;
        }
    }
    seg_t[nseg] = nt;
    return nseg;
}
/* The value update of heads [h0, h0 + HB) (HB 1 to 4) of NH over 16 columns at a time (n a
 * multiple of 16) for value_nh's segments: the block's 2 HB accumulators stay in registers for
 * the whole call, each pair of V vectors is loaded (and converted) once for the block and
 * feeds 2 HB FMAs, the weights broadcast from memory. While it computes it asks for the
 * lines of the first pf_nt rows of pf (pr: column 0 of pf's first row, NULL: none). */
INLINE void value_block_avx2(float *o, int64_t n, const float *p, const void *v, int64_t vs,
                             const int64_t *seg_t, const float *const *seg_al, int nseg,
                             const char *pr, int64_t pf_nt, const gem_dtype vt, const int h0,
                             const int HB, const int NH)
{
    const int64_t row_bytes = vs * esize(vt);
    for (int64_t d = 0; d < n; d += 16) {
        __m256 a[4], b[4];
        for (int h = 0; h < HB; h++) {
            a[h] = _mm256_loadu_ps(o + (h0 + h) * n + d);
            b[h] = _mm256_loadu_ps(o + (h0 + h) * n + d + 8);
        }
        const char *vr = elem(v, d, vt);
        /* a line of each pf row per 64 bytes of columns: every 16 columns of F32, 32 of 16-bit */
        const int ask = pr && (d * esize(vt)) % 64 == 0;
        const char *pd = ask ? pr + d * esize(vt) : NULL;
        const float *pt = p + h0;
        for (int g = 0; g < nseg; g++) {
            if (seg_al[g])
                for (int h = 0; h < HB; h++) {
                    const __m256 ah = _mm256_set1_ps(seg_al[g][h0 + h]);
                    a[h] = _mm256_mul_ps(a[h], ah);
                    b[h] = _mm256_mul_ps(b[h], ah);
                }
            for (int64_t t = seg_t[g]; t < seg_t[g + 1]; t++) {
                const __m256 va = load8(vr, 0, vt), vb = load8(vr, 8, vt);
                if (ask && t < pf_nt) {
                    __builtin_prefetch(pd, 0, CPU_PF_LOCALITY);
                    pd += row_bytes;
                }
                for (int h = 0; h < HB; h++) {
                    const __m256 ph = _mm256_set1_ps(pt[h]);
                    a[h] = _mm256_fmadd_ps(ph, va, a[h]);
                    b[h] = _mm256_fmadd_ps(ph, vb, b[h]);
                }
                vr += row_bytes;
                pt += NH;
            }
        }
        for (int h = 0; h < HB; h++) {
            _mm256_storeu_ps(o + (h0 + h) * n + d, a[h]);
            _mm256_storeu_ps(o + (h0 + h) * n + d + 8, b[h]);
        }
    }
}

/* cpu_value_tile for NH (1 to 8) heads, n a multiple of 16, V of type vt (any row type),
 * at most VALUE_MAX_TILES tiles: the heads in blocks of 4 (value_block_avx2), the tokens in
 * value_segments' segments (the multiplies of a tile whose alphas are all 1 left out: x * 1 =
 * x). Per element the rule's operations in the rule's order. The first block asks for the
 * lines of the first pf_nt rows of pf. */
INLINE void value_nh(float *o, int64_t n, int64_t tile, const float *alpha, const float *p,
                     const void *v, int64_t nt, int64_t vs, const void *pf, int64_t pf_nt,
                     const gem_dtype vt, const int NH)
{
    int64_t seg_t[VALUE_MAX_TILES + 1];
    const float *seg_al[VALUE_MAX_TILES];
    const int nseg = value_segments(tile, alpha, nt, seg_t, seg_al, NH);
    const char *pr = pf_nt > 0 ? (const char *)pf : NULL;
    int h0 = 0;
    for (; h0 + 4 <= NH; h0 += 4, pr = NULL)
        value_block_avx2(o, n, p, v, vs, seg_t, seg_al, nseg, pr, pf_nt, vt, h0, 4, NH);
    if (NH - h0 == 3)
        value_block_avx2(o, n, p, v, vs, seg_t, seg_al, nseg, pr, pf_nt, vt, h0, 3, NH);
    else if (NH - h0 == 2)
        value_block_avx2(o, n, p, v, vs, seg_t, seg_al, nseg, pr, pf_nt, vt, h0, 2, NH);
    else if (NH - h0 == 1)
        value_block_avx2(o, n, p, v, vs, seg_t, seg_al, nseg, pr, pf_nt, vt, h0, 1, NH);
}
#endif

#if CPU_AVX512 || CPU_AVX2
/* cpu_value_tile for NH heads: calls of at most VALUE_MAX_TILES tiles (each loads
 * and stores o; the per-element order is the rule's), then the prefetch of the
 * rows beyond this call's tokens. */
INLINE void value_tile_nh(float *o, int64_t n, int64_t tile, const float *alpha, const float *p,
                          const void *v, int64_t nt, int64_t vs, const void *pf, int64_t pf_nt,
                          const gem_dtype vt, const int NH)
{
    /* all of it when it has at most VALUE_MAX_TILES tiles, else that many tiles */
    const int64_t step = tile > nt / VALUE_MAX_TILES ? nt : VALUE_MAX_TILES * tile;
    for (int64_t c = 0; c < nt; c += step) {
        const int64_t m = nt - c < step ? nt - c : step;
        const int64_t pm = pf_nt > c ? (pf_nt - c < m ? pf_nt - c : m) : 0;
        value_nh(o, n, tile, alpha + (c / tile) * NH, p + c * NH, elem(v, c * vs, vt), m, vs,
                 pm > 0 ? elem(pf, c * vs, vt) : NULL, pm, vt, NH);
    }
    for (int64_t t = nt; t < pf_nt; t++) /* rows beyond this call's count */
        prefetch_row(elem(pf, t * vs, vt), n, vt);
}

#endif

#if CPU_AVX512
/* cpu_weighted_rows for 8 heads and 32 columns, V of type vt. */
INLINE void weighted_8x32(const float *p, int64_t p_stride, const void *v, int64_t v_stride,
                          int64_t nt, float *acc, const gem_dtype vt)
{
    __m512 a[8][2];
    for (int h = 0; h < 8; h++) {
        a[h][0] = _mm512_loadu_ps(acc + h * 32);
        a[h][1] = _mm512_loadu_ps(acc + h * 32 + 16);
    }
    for (int64_t t = 0; t < nt; t++) {
        const void *row = elem(v, t * v_stride, vt);
        const __m512 v0 = load16(row, 0, vt);
        const __m512 v1 = load16(row, 16, vt);
        for (int h = 0; h < 8; h++) {
            const __m512 ph = _mm512_set1_ps(p[h * p_stride + t]);
            a[h][0] = _mm512_fmadd_ps(ph, v0, a[h][0]);
            a[h][1] = _mm512_fmadd_ps(ph, v1, a[h][1]);
        }
    }
    for (int h = 0; h < 8; h++) {
        _mm512_storeu_ps(acc + h * 32, a[h][0]);
        _mm512_storeu_ps(acc + h * 32 + 16, a[h][1]);
    }
}
#endif
#if CPU_AVX2
/* Rows of V a chunk of weighted_8x32_avx2: 64 rows of 32 columns (8 KiB of F32) stay in the
 * L1 while the chunk's four blocks of heads and columns read them in turn. */
#define WEIGHTED_CHUNK_ROWS 64

/* cpu_weighted_rows for 8 heads and 32 columns, V of type vt (any row type): each chunk of
 * rows once for every block of 4 heads x 16 columns (8 accumulators in registers), so every
 * acc lane still takes its rows' FMAs in row order. */
INLINE void weighted_8x32_avx2(const float *p, int64_t p_stride, const void *v, int64_t v_stride,
                               int64_t nt, float *acc, const gem_dtype vt)
{
    for (int64_t t0 = 0; t0 < nt; t0 += WEIGHTED_CHUNK_ROWS) {
        const int64_t t1 = nt - t0 < WEIGHTED_CHUNK_ROWS ? nt : t0 + WEIGHTED_CHUNK_ROWS;
        for (int hb = 0; hb < 8; hb += 4)
            for (int c = 0; c < 32; c += 16) {
                __m256 a[4][2];
                for (int h = 0; h < 4; h++) {
                    a[h][0] = _mm256_loadu_ps(acc + (hb + h) * 32 + c);
                    a[h][1] = _mm256_loadu_ps(acc + (hb + h) * 32 + c + 8);
                }
                for (int64_t t = t0; t < t1; t++) {
                    const void *row = elem(v, t * v_stride, vt);
                    const __m256 v0 = load8(row, c, vt), v1 = load8(row, c + 8, vt);
                    for (int h = 0; h < 4; h++) {
                        const __m256 ph = _mm256_broadcast_ss(p + (hb + h) * p_stride + t);
                        a[h][0] = _mm256_fmadd_ps(ph, v0, a[h][0]);
                        a[h][1] = _mm256_fmadd_ps(ph, v1, a[h][1]);
                    }
                }
                for (int h = 0; h < 4; h++) {
                    _mm256_storeu_ps(acc + (hb + h) * 32 + c, a[h][0]);
                    _mm256_storeu_ps(acc + (hb + h) * 32 + c + 8, a[h][1]);
                }
            }
    }
}
#endif

void cpu_value_tile(float *o, int64_t nh, int64_t n, int64_t tile, const float *alpha,
                    const float *p, const void *v, gem_dtype vt, int64_t nt, int64_t v_stride,
                    const void *pf, int64_t pf_nt)
{
    if (!pf)
        pf_nt = 0;
#if CPU_AVX512
    if ((nh == 8 || nh == 4 || nh == 2 || nh == 1) && n % 16 == 0) {
#define VALUE_TILE(NH)                                                                      \
    switch (vt) {                                                                           \
    case GEM_DTYPE_FP8_E4M3:                                                                \
        value_tile_nh(o, n, tile, alpha, p, v, nt, v_stride, pf, pf_nt, GEM_DTYPE_FP8_E4M3,  \
                      NH);                                                                  \
        return;                                                                             \
    case GEM_DTYPE_BF16:                                                                    \
        value_tile_nh(o, n, tile, alpha, p, v, nt, v_stride, pf, pf_nt, GEM_DTYPE_BF16, NH); \
        return;                                                                             \
    case GEM_DTYPE_F16:                                                                     \
        value_tile_nh(o, n, tile, alpha, p, v, nt, v_stride, pf, pf_nt, GEM_DTYPE_F16, NH);  \
        return;                                                                             \
    default:                                                                                \
        value_tile_nh(o, n, tile, alpha, p, v, nt, v_stride, pf, pf_nt, GEM_DTYPE_F32, NH);  \
        return;                                                                             \
    }
        if (nh == 8)
            VALUE_TILE(8)
        if (nh == 4)
            VALUE_TILE(4)
        if (nh == 2)
            VALUE_TILE(2)
        VALUE_TILE(1)
#undef VALUE_TILE
    }
#elif CPU_AVX2
    if (nh >= 1 && nh <= 8 && n % 16 == 0) {
#define VALUE_TILE(NH)                                                                      \
    switch (vt) {                                                                           \
    case GEM_DTYPE_FP8_E4M3:                                                                \
        value_tile_nh(o, n, tile, alpha, p, v, nt, v_stride, pf, pf_nt, GEM_DTYPE_FP8_E4M3,  \
                      NH);                                                                  \
        return;                                                                             \
    case GEM_DTYPE_BF16:                                                                    \
        value_tile_nh(o, n, tile, alpha, p, v, nt, v_stride, pf, pf_nt, GEM_DTYPE_BF16, NH); \
        return;                                                                             \
    case GEM_DTYPE_F16:                                                                     \
        value_tile_nh(o, n, tile, alpha, p, v, nt, v_stride, pf, pf_nt, GEM_DTYPE_F16, NH);  \
        return;                                                                             \
    default:                                                                                \
        value_tile_nh(o, n, tile, alpha, p, v, nt, v_stride, pf, pf_nt, GEM_DTYPE_F32, NH);  \
        return;                                                                             \
    }
        switch (nh) {
        case 8: VALUE_TILE(8)
        case 7: VALUE_TILE(7)
        case 6: VALUE_TILE(6)
        case 5: VALUE_TILE(5)
        case 4: VALUE_TILE(4)
        case 3: VALUE_TILE(3)
        case 2: VALUE_TILE(2)
        default: VALUE_TILE(1)
        }
#undef VALUE_TILE
    }
#endif
    for (int64_t t = 0; t < pf_nt; t++)
        prefetch_row(elem(pf, t * v_stride, vt), n, vt);
    /* Per head, tile and chunk of columns: the alpha scaling, then the tokens in
     * order, each row widened once per chunk; every o[h*n + d] sees the rule's
     * operations in the rule's order. */
    float buf[WIDEN_CHUNK];
    for (int64_t h = 0; h < nh; h++) {
        float *oh = o + h * n;
        for (int64_t t0 = 0; t0 < nt; t0 += tile) {
            const float al = alpha[(t0 / tile) * nh + h];
            const int64_t t1 = t0 + tile < nt ? t0 + tile : nt;
            for (int64_t d = 0; d < n; d++)
                oh[d] *= al;
            for (int64_t t = t0; t < t1; t++) {
                const float pt = p[t * nh + h];
                const void *vt_row = elem(v, t * v_stride, vt);
                for (int64_t c = 0; c < n; c += WIDEN_CHUNK) {
                    const int64_t m = n - c < WIDEN_CHUNK ? n - c : WIDEN_CHUNK;
                    const float *src = buf;
                    if (vt == GEM_DTYPE_F32)
                        src = (const float *)vt_row + c;
                    else
                        cpu_widen(elem(vt_row, c, vt), vt, m, buf);
                    for (int64_t d = 0; d < m; d++)
                        oh[c + d] = fmaf(pt, src[d], oh[c + d]);
                }
            }
        }
    }
}

void cpu_weighted_rows(const float *p, int64_t p_stride, int64_t nh, const void *v, gem_dtype vt,
                       int64_t v_stride, int64_t nt, int64_t w, float *acc)
{
#if CPU_AVX512
    if (nh == 8 && w == 32) {
        switch (vt) {
        case GEM_DTYPE_FP8_E4M3:
            weighted_8x32(p, p_stride, v, v_stride, nt, acc, GEM_DTYPE_FP8_E4M3);
            return;
        case GEM_DTYPE_BF16:
            weighted_8x32(p, p_stride, v, v_stride, nt, acc, GEM_DTYPE_BF16);
            return;
        case GEM_DTYPE_F16:
            weighted_8x32(p, p_stride, v, v_stride, nt, acc, GEM_DTYPE_F16);
            return;
        default:
            weighted_8x32(p, p_stride, v, v_stride, nt, acc, GEM_DTYPE_F32);
            return;
        }
    }
#elif CPU_AVX2
    if (nh == 8 && w == 32) {
        switch (vt) {
        case GEM_DTYPE_BF16:
            weighted_8x32_avx2(p, p_stride, v, v_stride, nt, acc, GEM_DTYPE_BF16);
            return;
        case GEM_DTYPE_F16:
            weighted_8x32_avx2(p, p_stride, v, v_stride, nt, acc, GEM_DTYPE_F16);
            return;
        case GEM_DTYPE_FP8_E4M3:
            weighted_8x32_avx2(p, p_stride, v, v_stride, nt, acc, GEM_DTYPE_FP8_E4M3);
            return;
        default:
            weighted_8x32_avx2(p, p_stride, v, v_stride, nt, acc, GEM_DTYPE_F32);
            return;
        }
    }
#endif
    float buf[WIDEN_CHUNK];
    for (int64_t t = 0; t < nt; t++) {
        const void *row = elem(v, t * v_stride, vt);
        for (int64_t c = 0; c < w; c += WIDEN_CHUNK) {
            const int64_t m = w - c < WIDEN_CHUNK ? w - c : WIDEN_CHUNK;
            const float *src = buf;
            if (vt == GEM_DTYPE_F32)
                src = (const float *)row + c;
            else
                cpu_widen(elem(row, c, vt), vt, m, buf);
            for (int64_t h = 0; h < nh; h++) {
                const float ph = p[h * p_stride + t];
                float *ah = acc + h * w + c;
                for (int64_t d = 0; d < m; d++)
                    ah[d] = fmaf(ph, src[d], ah[d]);
            }
        }
    }
}

float cpu_stream_sum_ahead(const float *x, int64_t n, int64_t ahead, cpu_prefetch_hint hint)
{
    const int64_t af = ahead > 0 ? ahead / (int64_t)sizeof(float) : 0;
    int64_t i = 0;
#if CPU_AVX512
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 64 <= n; i += 64) {
        if (af > 0 && i + af + 64 <= n) {
            const char *p = (const char *)(x + i + af);
            for (int l = 0; l < 4; l++) {
                if (hint == CPU_PF_L1)
                    _mm_prefetch(p + 64 * l, _MM_HINT_T0);
                else if (hint == CPU_PF_L2)
                    _mm_prefetch(p + 64 * l, _MM_HINT_T1);
                else
                    _mm_prefetch(p + 64 * l, _MM_HINT_NTA);
            }
        }
        a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
        a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_loadu_ps(x + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_loadu_ps(x + i + 48));
    }
    float acc = hsum16(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
#else
    float lanes[64] = {0};
    for (; i + 64 <= n; i += 64) {
        if (af > 0 && i + af + 64 <= n) {
            const char *p = (const char *)(x + i + af);
            for (int l = 0; l < 4; l++) {
                if (hint == CPU_PF_L1)
                    __builtin_prefetch(p + 64 * l, 0, 3);
                else if (hint == CPU_PF_L2)
                    __builtin_prefetch(p + 64 * l, 0, 2);
                else
                    __builtin_prefetch(p + 64 * l, 0, 0);
            }
        }
        for (int l = 0; l < 64; l++)
            lanes[l] += x[i + l];
    }
    float acc = 0.0f;
    for (int l = 0; l < 64; l++)
        acc += lanes[l];
#endif
    for (; i < n; i++)
        acc += x[i];
    return acc;
}

float cpu_stream_sum(const float *x, int64_t n) { return cpu_stream_sum_ahead(x, n, 0, CPU_PF_L2); }

gem_status cpu_score_status(const float *q, int64_t nh, const void *k, gem_dtype kt, int64_t ks,
                            int64_t nt, int64_t n)
{
    for (int64_t i = 0; i < nh * n; i++)
        if (!isfinite(q[i]))
            return GEM_ERR_NONFINITE;
    for (int64_t t = 0; t < nt; t++)
        for (int64_t i = 0; i < n; i++) {
            const int64_t e = t * ks + i;
            const float x = kt == GEM_DTYPE_F32  ? ((const float *)k)[e]
                            : kt == GEM_DTYPE_FP8_E4M3
                                ? gem_fp8_e4m3_to_f32(((const uint8_t *)k)[e])
                            : kt == GEM_DTYPE_BF16 ? gem_bf16_to_f32(((const uint16_t *)k)[e])
                                                   : gem_f16_to_f32(((const uint16_t *)k)[e]);
            if (!isfinite(x))
                return GEM_ERR_NONFINITE;
        }
    return GEM_ERR_SCORE;
}
