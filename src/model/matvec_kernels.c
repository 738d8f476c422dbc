/*
 * The arithmetic of the matrix-vector products on GGUF weights (matvec.h, matvec_kernels.h;
 * src/model/matvec.c splits them over a pool). A block of weights
 * (one Q8_0/Q4_0 block of 32, one Q4_K/Q6_K super-block of 256, or 256 plain
 * elements) is dequantized into a small buffer with ggml's arithmetic, then
 * multiplied into 16 lanes; the lanes are summed by a fixed tree at the end.
 *
 * Packed Q8_0, Q4_0, Q4_K and Q6_K matrices take the integer products (matvec.h): 16
 * rows at once, one row per 32-bit lane, the quants times x's digits by vpdpbusd.
 * Lineage: dev/cpu/mv_int8 measured the F32 rule (per 16 Q8_0 weights a widening, a
 * conversion, a product by d and the FMA; the 4-bit types by table) against this
 * (per 512 weights 32 vpdpbusd and 13 vector operations for the scales) on the AMD
 * EPYC VM's 2 cores, one thread in L2: Q8_0 20.0 -> 37.0 GB/s, Q4_0 14.0 -> 20.1,
 * Q4_K 7.9 -> 17.6, Q6_K 6.5 -> 12.5; the first version, which broadcast each digit word through a
 * general register and ran the four digits' chains one after the other, had Q8_0 at
 * 27.0 and Q4_0 at 14.0 (results/cpu/model/speed/int8-products).
 */
#include <math.h>
#include <string.h>

/* The F32 rule's rows: with AVX-512F 16 lanes a register; else, with AVX2, FMA and F16C (the
 * plain element types), each 16-lane accumulator as two 8-lane halves. The integer products:
 * with AVX512-VNNI by vpdpbusd; else, with AVX2, FMA and F16C, by vpmaddubsw and vpmaddwd.
 * Otherwise portable C. Every path gives the same bits (matvec.h). */
#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define MV_ROWS_AVX2 1
#else
#define MV_ROWS_AVX2 0
#endif
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#define MV_INT_VNNI 1
#else
#define MV_INT_VNNI 0
#endif
#if !MV_INT_VNNI && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define MV_INT_AVX2 1
#else
#define MV_INT_AVX2 0
#endif
#if defined(__AVX512F__) || MV_ROWS_AVX2 || MV_INT_AVX2
#include <immintrin.h>
#endif

#include "matvec_kernels.h"

#define LANES 64
#define CHUNK 256

const char *mvk_isa(void)
{
#if MV_INT_VNNI
    return "avx512-vnni";
#elif defined(__AVX512F__) && MV_INT_AVX2
    return "avx512";
#elif MV_ROWS_AVX2 && MV_INT_AVX2
    return "avx2";
#else
    return "portable";
#endif
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* Asks for the line at p with locality 3 (L1), 0 (non-temporal) or else 2 (L2): the builtin
 * takes its locality as a constant expression, which clang requires before inlining. */
static inline __attribute__((always_inline)) void prefetch_line(const void *p, const int locality)
{
    if (locality == 3)
        __builtin_prefetch(p, 0, 3);
    else if (locality == 0)
        __builtin_prefetch(p, 0, 0);
    else
        __builtin_prefetch(p, 0, 2);
}

static float half_table[65536];
static int half_ready;

void mvk_init(void)
{
    /* Benign if two threads fill it at once: both write the same values. */
    if (__atomic_load_n(&half_ready, __ATOMIC_ACQUIRE))
        return;
    for (uint32_t h = 0; h < 65536; h++)
        half_table[h] = gem_gguf_f16_to_f32((uint16_t)h);
    __atomic_store_n(&half_ready, 1, __ATOMIC_RELEASE);
}

/* Dequantizes elements [e0, e0 + n) of a row (e0 and n multiples of the block,
 * n <= CHUNK) into buf. */
static void dq(gem_gguf_type t, const uint8_t *row, int64_t e0, int64_t n, float *buf)
{
    switch (t) {
    case GEM_GGUF_F32: memcpy(buf, row + 4 * e0, (size_t)n * 4); return;
    case GEM_GGUF_F16: {
        const uint8_t *p = row + 2 * e0;
        for (int64_t i = 0; i < n; i++)
            buf[i] = half_table[rd16(p + 2 * i)];
        return;
    }
    case GEM_GGUF_BF16: {
        const uint16_t *p = (const uint16_t *)(const void *)(row + 2 * e0);
        for (int64_t i = 0; i < n; i++) {
            uint32_t b = (uint32_t)p[i] << 16;
            memcpy(&buf[i], &b, 4);
        }
        return;
    }
    case GEM_GGUF_Q8_0: {
        for (int64_t b = 0; b < n / 32; b++) {
            const uint8_t *blk = row + (e0 / 32 + b) * 34;
            const float d = half_table[rd16(blk)];
            const int8_t *q = (const int8_t *)(blk + 2);
            for (int j = 0; j < 32; j++)
                buf[32 * b + j] = q[j] * d;
        }
        return;
    }
    case GEM_GGUF_Q4_0: {
        for (int64_t b = 0; b < n / 32; b++) {
            const uint8_t *blk = row + (e0 / 32 + b) * 18;
            const float d = half_table[rd16(blk)];
            const uint8_t *q = blk + 2;
            for (int j = 0; j < 16; j++) {
                buf[32 * b + j] = ((q[j] & 0x0F) - 8) * d;
                buf[32 * b + j + 16] = ((q[j] >> 4) - 8) * d;
            }
        }
        return;
    }
    case GEM_GGUF_Q4_K:
    case GEM_GGUF_Q6_K: {
        size_t bb = t == GEM_GGUF_Q4_K ? 144 : 210;
        gem_gguf_dequant(t, row + (e0 / 256) * bb, buf, n);
        return;
    }
    }
}

static int64_t chunk_of(gem_gguf_type t, int64_t cols)
{
    (void)t;
    return cols < CHUNK ? cols : CHUNK;
}

/* Fixed-order sum of the lanes: halves added pairwise, 32, 16, ..., 1. */
static float lanes_sum(float *acc)
{
    for (int width = LANES / 2; width > 0; width /= 2)
        for (int l = 0; l < width; l++)
            acc[l] += acc[l + width];
    return acc[0];
}

/* The rule every kernel follows: element e of a row (its exactly dequantized
 * weight w) goes into lane e % 64 as acc = fmaf(w, x[e], acc) (one rounding), in
 * element order; the 64 lanes are then summed by the fixed tree of lanes_sum.
 * (64 lanes = four independent 16-wide accumulators, so the additions are not
 * one serial chain.) */

/* The generic path: dequantize a chunk into buf, then follow the rule. */
static float dot_generic(const gem_matrix *w, const uint8_t *row, const float *x)
{
    float acc[LANES] = {0};
    float buf[CHUNK];
    const int64_t ch = chunk_of(w->type, w->cols);
    for (int64_t e = 0; e < w->cols; e += ch) {
        const int64_t n = w->cols - e < ch ? w->cols - e : ch;
        dq(w->type, row, e, n, buf);
        for (int64_t i = 0; i < n; i++)
            acc[(e + i) % LANES] = fmaf(buf[i], x[e + i], acc[(e + i) % LANES]);
    }
    return lanes_sum(acc);
}

#if defined(__AVX512F__) || MV_ROWS_AVX2
/* The plain element types' scalar values, for the partial last group of the vector paths. */
static inline float f32_of(float v) { return v; }
static inline float bf16_of(uint16_t v) { return gem_gguf_bf16_to_f32(v); }
static inline float f16_of(uint16_t v) { return half_table[v]; }
#endif

#if defined(__AVX512F__)
/* Four 16-lane accumulators a[0..3]: a[g % 4] takes group g (elements 16g..16g+15),
 * with a fused multiply-add per element as in the scalar rule, so both give the
 * same bits (tests/test_matvec.c). */
#define MADD(acc, w, x) ((acc) = _mm512_fmadd_ps((w), (x), (acc)))

/* lanes_sum on the four accumulators, in registers: the same additions in the
 * same order (32: a0 + a2, a1 + a3; 16: their sum; then 8, 4, 2, 1 within the
 * register). */
static float lanes_out(const __m512 a[4])
{
    const __m512 s = _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]));
    const __m256 u =
        _mm256_add_ps(_mm512_castps512_ps256(s),
                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    v = _mm_add_ss(v, _mm_shuffle_ps(v, v, 1));
    return _mm_cvtss_f32(v);
}
/* 16 int8 -> float */
static inline __m512 i8x16(const int8_t *q)
{
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)q)));
}
static float dot_q8_0(const uint8_t *row, const float *x, int64_t cols)
{
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    const int64_t nb = cols / 32;
    int64_t b = 0;
    for (; b + 1 < nb; b += 2, row += 68, x += 64) { /* two blocks: groups 0..3 */
        const __m512 d0 = _mm512_set1_ps(half_table[rd16(row)]);
        const __m512 d1 = _mm512_set1_ps(half_table[rd16(row + 34)]);
        const int8_t *q0 = (const int8_t *)(row + 2), *q1 = (const int8_t *)(row + 36);
        MADD(a[0], _mm512_mul_ps(i8x16(q0), d0), _mm512_loadu_ps(x));
        MADD(a[1], _mm512_mul_ps(i8x16(q0 + 16), d0), _mm512_loadu_ps(x + 16));
        MADD(a[2], _mm512_mul_ps(i8x16(q1), d1), _mm512_loadu_ps(x + 32));
        MADD(a[3], _mm512_mul_ps(i8x16(q1 + 16), d1), _mm512_loadu_ps(x + 48));
    }
    if (b < nb) { /* an even block number: groups 0 and 1 */
        const __m512 d0 = _mm512_set1_ps(half_table[rd16(row)]);
        const int8_t *q0 = (const int8_t *)(row + 2);
        MADD(a[0], _mm512_mul_ps(i8x16(q0), d0), _mm512_loadu_ps(x));
        MADD(a[1], _mm512_mul_ps(i8x16(q0 + 16), d0), _mm512_loadu_ps(x + 16));
    }
    return lanes_out(a);
}

/* The 4-bit types by table: a block's 16 possible weights (nibble n -> its dequantized
 * value, computed by the same operations as the scalar rule, so with the same bits) fill one
 * register, and vpermps picks each element's from the low 4 bits of its byte, which is the
 * low nibble as it stands and the high one after a shift. Per 16 weights: a widening load,
 * (a shift,) a permute and the FMA, against a mask, a subtraction, a conversion and a product
 * per 16 before (about 1.6x fewer instructions for Q4_0). */
static inline __m512i bytes16(const uint8_t *q)
{
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)q));
}

static float dot_q4_0(const uint8_t *row, const float *x, int64_t cols)
{
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    /* (n - 8) as floats, n = 0..15: the table is (n - 8) * d, the scalar rule's product */
    const __m512 centred = _mm512_cvtepi32_ps(_mm512_sub_epi32(
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        _mm512_set1_epi32(8)));
    /* two blocks a step, so that every accumulator has a fixed register: groups 0, 1 (block
     * b), 2, 3 (block b + 1), as element e % 64 requires */
    const int64_t nb = cols / 32;
    int64_t b = 0;
    for (; b + 1 < nb; b += 2, row += 36, x += 64) {
        const __m512 t0 = _mm512_mul_ps(centred, _mm512_set1_ps(half_table[rd16(row)]));
        const __m512 t1 = _mm512_mul_ps(centred, _mm512_set1_ps(half_table[rd16(row + 18)]));
        const __m512i q0 = bytes16(row + 2), q1 = bytes16(row + 20);
        MADD(a[0], _mm512_permutexvar_ps(q0, t0), _mm512_loadu_ps(x));
        MADD(a[1], _mm512_permutexvar_ps(_mm512_srli_epi32(q0, 4), t0), _mm512_loadu_ps(x + 16));
        MADD(a[2], _mm512_permutexvar_ps(q1, t1), _mm512_loadu_ps(x + 32));
        MADD(a[3], _mm512_permutexvar_ps(_mm512_srli_epi32(q1, 4), t1), _mm512_loadu_ps(x + 48));
    }
    if (b < nb) { /* an even block number: groups 0 and 1 */
        const __m512 t0 = _mm512_mul_ps(centred, _mm512_set1_ps(half_table[rd16(row)]));
        const __m512i q0 = bytes16(row + 2);
        MADD(a[0], _mm512_permutexvar_ps(q0, t0), _mm512_loadu_ps(x));
        MADD(a[1], _mm512_permutexvar_ps(_mm512_srli_epi32(q0, 4), t0), _mm512_loadu_ps(x + 16));
    }
    return lanes_out(a);
}

/* Plain element types: 16 at a time through `load`, the tail by the scalar rule. */
#define PLAIN_DOT(name, T, LOAD, SCALAR)                                                           \
    static float name(const T *w, const float *x, int64_t cols)                                    \
    {                                                                                              \
        __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),              \
                       _mm512_setzero_ps()};                                                       \
        int64_t i = 0;                                                                             \
        for (; i + 64 <= cols; i += 64)                                                            \
            for (int k = 0; k < 4; k++)                                                            \
                MADD(a[k], LOAD(w + i + 16 * k), _mm512_loadu_ps(x + i + 16 * k));                 \
        for (; i + 16 <= cols; i += 16)                                                            \
            MADD(a[(i / 16) % 4], LOAD(w + i), _mm512_loadu_ps(x + i));                            \
        if (i < cols) { /* the partial last group, by the scalar rule */                           \
            float acc[LANES];                                                                      \
            for (int k = 0; k < 4; k++)                                                            \
                _mm512_storeu_ps(acc + 16 * k, a[k]);                                              \
            for (; i < cols; i++)                                                                  \
                acc[i % LANES] = fmaf(SCALAR(w[i]), x[i], acc[i % LANES]);                         \
            for (int k = 0; k < 4; k++)                                                            \
                a[k] = _mm512_loadu_ps(acc + 16 * k);                                              \
        }                                                                                          \
        return lanes_out(a);                                                                       \
    }
#define LOAD_F32(p) _mm512_loadu_ps(p)
#define LOAD_BF16(p)                                                                               \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                                         \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p))), 16))
#define LOAD_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
PLAIN_DOT(dot_f32, float, LOAD_F32, f32_of)
PLAIN_DOT(dot_bf16, uint16_t, LOAD_BF16, bf16_of)
PLAIN_DOT(dot_f16, uint16_t, LOAD_F16, f16_of)
#define MV_HAS_DOT_F16 1

/* Q6_K in element order: quarter k of each 128-element half takes its low 4 bits
 * from ql[l + 32*(k&1)] (low nibble for k < 2) and its high 2 bits from qh[l] at
 * bit 2k; the weight is (d * scale) * (q - 32), scale per 16 elements. Group
 * 2k + half of a 128-element half goes to a[(2k + half) % 4]. */
static float dot_q6_k(const uint8_t *row, const float *x, int64_t cols)
{
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    const __m512i three = _mm512_set1_epi32(3), f = _mm512_set1_epi32(0xF),
                  off = _mm512_set1_epi32(32);
    for (int64_t b = 0; b < cols / 256; b++, row += 210) {
        const uint8_t *ql = row, *qh = row + 128;
        const int8_t *sc = (const int8_t *)(row + 192);
        const float d = half_table[rd16(row + 208)];
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, x += 128)
            for (int k = 0; k < 4; k++)
                for (int half = 0; half < 2; half++) {
                    const int l0 = 16 * half;
                    __m512i lo = _mm512_cvtepu8_epi32(
                        _mm_loadu_si128((const __m128i *)(const void *)(ql + l0 + 32 * (k & 1))));
                    lo = k < 2 ? _mm512_and_si512(lo, f) : _mm512_srli_epi32(lo, 4);
                    __m512i hi = _mm512_cvtepu8_epi32(
                        _mm_loadu_si128((const __m128i *)(const void *)(qh + l0)));
                    hi =
                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hi, 2 * k), three), 4);
                    const __m512 q =
                        _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_or_si512(lo, hi), off));
                    const __m512 ds = _mm512_set1_ps(d * sc[half + 2 * k]);
                    MADD(a[(2 * k + half) % 4], _mm512_mul_ps(ds, q),
                         _mm512_loadu_ps(x + 32 * k + l0));
                }
    }
    return lanes_out(a);
}
#else
#if MV_ROWS_AVX2
/* Eight 8-lane accumulators: a[2 (g % 4) + h] takes half h (elements 16g + 8h .. 16g + 8h + 7)
 * of group g, so that a[2i], a[2i + 1] are the 16-lane accumulator i of the AVX-512 path. */
#define MADD8(acc, w, x) ((acc) = _mm256_fmadd_ps((w), (x), (acc)))

/* lanes_sum on the eight accumulators (lanes_out's additions, each 16-lane one as two halves:
 * 32: a0 + a4 and a2 + a6, their sum; 8: the two halves' sums; then 4, 2, 1). */
static float lanes_out8(const __m256 a[8])
{
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
    const __m256 u = _mm256_add_ps(lo, hi);
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    v = _mm_add_ss(v, _mm_shuffle_ps(v, v, 1));
    return _mm_cvtss_f32(v);
}

/* Plain element types 8 at a time through `load`, the tail by the scalar rule. */
#define PLAIN_DOT8(name, T, LOAD, SCALAR)                                                          \
    static float name(const T *w, const float *x, int64_t cols)                                    \
    {                                                                                              \
        __m256 a[8];                                                                               \
        for (int k = 0; k < 8; k++)                                                                \
            a[k] = _mm256_setzero_ps();                                                            \
        int64_t i = 0;                                                                             \
        for (; i + 64 <= cols; i += 64)                                                            \
            for (int k = 0; k < 8; k++)                                                            \
                MADD8(a[k], LOAD(w + i + 8 * k), _mm256_loadu_ps(x + i + 8 * k));                  \
        for (; i + 8 <= cols; i += 8)                                                              \
            MADD8(a[(i / 8) % 8], LOAD(w + i), _mm256_loadu_ps(x + i));                            \
        if (i < cols) { /* the partial last half group, by the scalar rule */                      \
            float acc[LANES];                                                                      \
            for (int k = 0; k < 8; k++)                                                            \
                _mm256_storeu_ps(acc + 8 * k, a[k]);                                               \
            for (; i < cols; i++)                                                                  \
                acc[i % LANES] = fmaf(SCALAR(w[i]), x[i], acc[i % LANES]);                         \
            for (int k = 0; k < 8; k++)                                                            \
                a[k] = _mm256_loadu_ps(acc + 8 * k);                                               \
        }                                                                                          \
        return lanes_out8(a);                                                                      \
    }
#define LOAD8_F32(p) _mm256_loadu_ps(p)
#define LOAD8_BF16(p)                                                                              \
    _mm256_castsi256_ps(_mm256_slli_epi32(                                                         \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))), 16))
#define LOAD8_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
PLAIN_DOT8(dot_f32, float, LOAD8_F32, f32_of)
PLAIN_DOT8(dot_bf16, uint16_t, LOAD8_BF16, bf16_of)
PLAIN_DOT8(dot_f16, uint16_t, LOAD8_F16, f16_of)
#define MV_HAS_DOT_F16 1
#endif

static float dot_q8_0(const uint8_t *row, const float *x, int64_t cols)
{
    float acc[LANES] = {0};
    for (int64_t b = 0; b < cols / 32; b++, row += 34) {
        const float d = half_table[rd16(row)];
        const int8_t *q = (const int8_t *)(row + 2);
        for (int l = 0; l < 32; l++)
            acc[(32 * b + l) % LANES] = fmaf(q[l] * d, x[32 * b + l], acc[(32 * b + l) % LANES]);
    }
    return lanes_sum(acc);
}

static float dot_q4_0(const uint8_t *row, const float *x, int64_t cols)
{
    float acc[LANES] = {0};
    for (int64_t b = 0; b < cols / 32; b++, row += 18) {
        const float d = half_table[rd16(row)];
        const uint8_t *q = row + 2;
        for (int l = 0; l < 16; l++)
            acc[(32 * b + l) % LANES] =
                fmaf(((q[l] & 0x0F) - 8) * d, x[32 * b + l], acc[(32 * b + l) % LANES]);
        for (int l = 0; l < 16; l++)
            acc[(32 * b + 16 + l) % LANES] =
                fmaf(((q[l] >> 4) - 8) * d, x[32 * b + 16 + l], acc[(32 * b + 16 + l) % LANES]);
    }
    return lanes_sum(acc);
}

#if !MV_ROWS_AVX2
static float dot_f32(const float *w, const float *x, int64_t cols)
{
    float acc[LANES] = {0};
    for (int64_t i = 0; i < cols; i++)
        acc[i % LANES] = fmaf(w[i], x[i], acc[i % LANES]);
    return lanes_sum(acc);
}

static float dot_bf16(const uint16_t *w, const float *x, int64_t cols)
{
    float acc[LANES] = {0};
    for (int64_t i = 0; i < cols; i++)
        acc[i % LANES] = fmaf(gem_gguf_bf16_to_f32(w[i]), x[i], acc[i % LANES]);
    return lanes_sum(acc);
}
#endif
#endif

/* Q4_K: the scale and min of sub-blocks 2j and 2j+1 from the 12 packed bytes. */
static void q4k_scales(const uint8_t *sc, int j, float d, float min, float *d1, float *dm1,
                       float *d2, float *dm2)
{
    uint8_t s1, m1, s2, m2;
    if (j < 2) {
        s1 = sc[2 * j] & 63, m1 = sc[2 * j + 4] & 63;
        s2 = sc[2 * j + 1] & 63, m2 = sc[2 * j + 5] & 63;
    } else {
        const int a = 2 * j, c = 2 * j + 1;
        s1 = (uint8_t)((sc[a + 4] & 0xF) | ((sc[a - 4] >> 6) << 4));
        m1 = (uint8_t)((sc[a + 4] >> 4) | ((sc[a] >> 6) << 4));
        s2 = (uint8_t)((sc[c + 4] & 0xF) | ((sc[c - 4] >> 6) << 4));
        m2 = (uint8_t)((sc[c + 4] >> 4) | ((sc[c] >> 6) << 4));
    }
    *d1 = d * s1, *dm1 = min * m1, *d2 = d * s2, *dm2 = min * m2;
}

/* Q4_K: each 64-element chunk is groups 0..3 (rows are multiples of 256). */
static float dot_q4_k(const uint8_t *row, const float *x, int64_t cols)
{
#if defined(__AVX512F__)
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    const __m512 nibbles =
        _mm512_cvtepi32_ps(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
#else
    float acc[LANES] = {0};
#endif
    for (int64_t b = 0; b < cols / 256; b++, row += 144) {
        const float d = half_table[rd16(row)], min = half_table[rd16(row + 2)];
        const uint8_t *sc = row + 4, *q = row + 16;
        for (int j = 0; j < 4; j++, q += 32, x += 64) {
            float d1, dm1, d2, dm2;
            q4k_scales(sc, j, d, min, &d1, &dm1, &d2, &dm2);
#if defined(__AVX512F__)
            /* the tables d1 n - dm1 and d2 n - dm2, n = 0..15 (the scalar rule's operations) */
            const __m512 t1 = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(d1), nibbles),
                                            _mm512_set1_ps(dm1));
            const __m512 t2 = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(d2), nibbles),
                                            _mm512_set1_ps(dm2));
            const __m512i q0 = bytes16(q), q1 = bytes16(q + 16);
            MADD(a[0], _mm512_permutexvar_ps(q0, t1), _mm512_loadu_ps(x));
            MADD(a[1], _mm512_permutexvar_ps(q1, t1), _mm512_loadu_ps(x + 16));
            MADD(a[2], _mm512_permutexvar_ps(_mm512_srli_epi32(q0, 4), t2),
                 _mm512_loadu_ps(x + 32));
            MADD(a[3], _mm512_permutexvar_ps(_mm512_srli_epi32(q1, 4), t2),
                 _mm512_loadu_ps(x + 48));
#else
            for (int l = 0; l < 32; l++)
                acc[l] = fmaf(d1 * (q[l] & 0xF) - dm1, x[l], acc[l]);
            for (int l = 0; l < 32; l++)
                acc[32 + l] = fmaf(d2 * (q[l] >> 4) - dm2, x[32 + l], acc[32 + l]);
#endif
        }
    }
#if defined(__AVX512F__)
    return lanes_out(a);
#else
    return lanes_sum(acc);
#endif
}

static float dot_row(const gem_matrix *w, const uint8_t *row, const float *x)
{
    switch (w->type) {
    case GEM_GGUF_Q8_0: return dot_q8_0(row, x, w->cols);
    case GEM_GGUF_Q4_0: return dot_q4_0(row, x, w->cols);
    case GEM_GGUF_Q4_K: return dot_q4_k(row, x, w->cols);
    case GEM_GGUF_F32: return dot_f32((const float *)(const void *)row, x, w->cols);
    case GEM_GGUF_BF16: return dot_bf16((const uint16_t *)(const void *)row, x, w->cols);
#if defined(MV_HAS_DOT_F16)
    case GEM_GGUF_F16: return dot_f16((const uint16_t *)(const void *)row, x, w->cols);
#endif
#if defined(__AVX512F__)
    case GEM_GGUF_Q6_K: return dot_q6_k(row, x, w->cols);
#endif
    default: return dot_generic(w, row, x);
    }
}

/* 2^e, the value of ldexpf(1, e): from its bits in the normal range. */
static inline float pow2f(int e)
{
    if (e < -126 || e > 127)
        return ldexpf(1.0f, e);
    const uint32_t b = (uint32_t)(e + 127) << 23;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* frexpf's exponent of m > 0 (m = f 2^e, f in [0.5, 1)): from its bits when normal. */
static inline int frexp_exponent(float m)
{
    uint32_t b;
    memcpy(&b, &m, sizeof b);
    const int ex = (int)((b >> 23) & 0xFF);
    if (ex != 0)
        return ex - 126;
    int e;
    (void)frexpf(m, &e);
    return e;
}

/* x (cols, a multiple of 32) into its blocks' digits: the CUDA tile product's
 * gem_tiles_xq_block, element for element (with AVX-512 16 elements at a time: the same
 * operations, so the same digits). */
void mvk_quantize(const float *x, int64_t cols, xq_block *out)
{
    for (int64_t b = 0; b < cols / 32; b++) {
        const float *v = x + 32 * b;
        xq_block *o = out + b;
        float m = 0.0f;
        int bad = 0;
#if defined(__AVX512F__)
        const __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
        /* 0x99: QNaN, SNaN, +inf, -inf */
        bad = (_mm512_fpclass_ps_mask(v0, 0x99) | _mm512_fpclass_ps_mask(v1, 0x99)) != 0;
        m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
#elif MV_INT_AVX2
        const __m256 sign = _mm256_set1_ps(-0.0f), inf = _mm256_set1_ps(INFINITY);
        __m256 mx = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(v + 8 * i));
            /* not below infinity, or unordered: inf or NaN */
            bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, inf, _CMP_NLT_UQ)) != 0;
            mx = _mm256_max_ps(mx, a);
        }
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        m = _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1)));
#else
        for (int i = 0; i < 32; i++) {
            bad |= !isfinite(v[i]);
            const float a = fabsf(v[i]);
            m = a > m ? a : m;
        }
#endif
        /* m / 2^E in [32, 64) */
        const int E = !bad && m > 0.0f ? frexp_exponent(m) - 6 : 0;
        float r[32];
        if (bad)
            memset(r, 0, sizeof r);
        else if (E >= -126 && E <= 126) {
            /* 2^-E is a normal float: the product is ldexpf's correctly rounded value */
            const float p = pow2f(-E);
            for (int i = 0; i < 32; i++)
                r[i] = v[i] * p;
        } else
            for (int i = 0; i < 32; i++)
                r[i] = ldexpf(v[i], -E);
#if defined(__AVX512F__)
        __m512 r0 = _mm512_loadu_ps(r), r1 = _mm512_loadu_ps(r + 16);
        const __m512 k128 = _mm512_set1_ps(128.0f);
        for (int j = 0; j < 4; j++) {
            /* rintf: to nearest, ties to even (|r| <= 64) */
            const __m512 q0 = _mm512_roundscale_ps(r0, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __m512 q1 = _mm512_roundscale_ps(r1, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __m512i i0 = _mm512_cvtps_epi32(q0), i1 = _mm512_cvtps_epi32(q1);
            _mm_storeu_si128((__m128i *)(void *)o->dig[j], _mm512_cvtepi32_epi8(i0));
            _mm_storeu_si128((__m128i *)(void *)(o->dig[j] + 16), _mm512_cvtepi32_epi8(i1));
            o->half_sum[j][0] = _mm512_reduce_add_epi32(i0);
            o->half_sum[j][1] = _mm512_reduce_add_epi32(i1);
            r0 = _mm512_mul_ps(_mm512_sub_ps(r0, q0), k128); /* exact: |r - q| <= 1/2 */
            r1 = _mm512_mul_ps(_mm512_sub_ps(r1, q1), k128);
        }
#elif MV_INT_AVX2
        __m256 r8[4];
        for (int i = 0; i < 4; i++)
            r8[i] = _mm256_loadu_ps(r + 8 * i);
        const __m256 k128 = _mm256_set1_ps(128.0f);
        /* packs leave each 128-bit lane's share interleaved: dword 4h + i holds elements
         * 8i + 4h .. 8i + 4h + 3 */
        const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for (int j = 0; j < 4; j++) {
            __m256i qi[4];
            for (int i = 0; i < 4; i++) {
                /* rintf: to nearest, ties to even (|r| <= 64) */
                const __m256 q =
                    _mm256_round_ps(r8[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                qi[i] = _mm256_cvtps_epi32(q);
                r8[i] = _mm256_mul_ps(_mm256_sub_ps(r8[i], q), k128); /* exact: |r - q| <= 1/2 */
            }
            const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]),
                                                     _mm256_packs_epi32(qi[2], qi[3]));
            _mm256_storeu_si256((__m256i *)(void *)o->dig[j],
                                _mm256_permutevar8x32_epi32(bytes, order));
            for (int e = 0; e < 2; e++) {
                const __m256i t = _mm256_add_epi32(qi[2 * e], qi[2 * e + 1]);
                __m128i u =
                    _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
                u = _mm_add_epi32(u, _mm_unpackhi_epi64(u, u));
                u = _mm_add_epi32(u, _mm_shuffle_epi32(u, 1));
                o->half_sum[j][e] = _mm_cvtsi128_si32(u);
            }
        }
#else
        for (int j = 0; j < 4; j++) {
            int32_t sum[2] = {0, 0};
            for (int i = 0; i < 32; i++) {
                const float q = rintf(r[i]); /* |r| <= 64 */
                o->dig[j][i] = (int8_t)q;
                sum[i / 16] += (int32_t)q;
                r[i] = (r[i] - q) * 128.0f; /* exact: |r - q| <= 1/2 */
            }
            o->half_sum[j][0] = sum[0];
            o->half_sum[j][1] = sum[1];
        }
#endif
        for (int j = 0; j < 4; j++) {
            o->sum[j] = o->half_sum[j][0] + o->half_sum[j][1];
            o->scale[j] = bad ? NAN : pow2f(E - 7 * j);
        }
        /* |sum_0| <= 2^11: the combination fits 2^32, exact in int64; one rounding to float,
         * then an exact scaling (ldexpf's value: a power of two, or ldexpf itself below the
         * normal range) */
        const int64_t A =
            ((((int64_t)o->sum[0] * 128 + o->sum[1]) * 128 + o->sum[2]) * 128) + o->sum[3];
        o->sum_x = bad ? NAN : E - 21 >= -126 ? (float)A * pow2f(E - 21) : ldexpf((float)A, E - 21);
        memset(o->pad, 0, sizeof o->pad);
    }
}

#if MV_INT_VNNI || MV_INT_AVX2
/* Asks for the `bytes` that start `ahead` past the block at p, while they lie before end
 * (ahead 0: none); locality 3 L1, 2 L2, 0 non-temporal. */
static inline __attribute__((always_inline)) void
prefetch_packed(const uint8_t *p, size_t bytes, size_t ahead, const uint8_t *end, const int locality)
{
    if (!ahead || (size_t)(end - p) <= ahead + bytes)
        return;
    for (size_t o = 0; o < bytes; o += 64)
        prefetch_line(p + ahead + o, locality);
}

/* Four digits (4 bytes at p) in every 32-bit lane: a broadcast straight from memory (through a
 * general register it costs a transfer uop each). */
#endif
#if MV_INT_VNNI
static inline __m512i digits4(const int8_t *p)
{
    return _mm512_broadcastd_epi32(_mm_loadu_si32((const void *)p));
}
#endif
#if MV_INT_AVX2
/* The AVX2 products take a group's 16 rows as two halves of 8: bytes 0..31 of each 64-byte
 * vector hold rows 0..7, bytes 32..63 rows 8..15. A quant byte u times a digit a comes from
 * vpmaddubsw, which adds the products of neighbouring bytes into 16 bits, then vpmaddwd
 * against ones, which adds neighbouring 16-bit sums into the row's 32-bit lane: vpdpbusd's
 * sum in two steps. vpmaddubsw saturates, but |a| <= 64 (matvec.h's digits), so a pair's sum
 * is at most 2 * 255 * 64 = 32,640 in magnitude and never does. */
static inline __m256i digits4_8(const int8_t *p)
{
    return _mm256_broadcastd_epi32(_mm_loadu_si32((const void *)p));
}

/* 32 bytes at p */
static inline __m256i bytes32(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* 8 f16 at p as floats (exactly, as half_table) */
static inline __m256 f16x8(const uint8_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* The 32-bit lanes' sums of a vpmaddubsw result's 16-bit pairs (exact). */
static inline __m256i pairs32(__m256i t) { return _mm256_madd_epi16(t, _mm256_set1_epi16(1)); }

/* acc[h] = fmaf(d[h] * scale, S[h], acc[h]) lane by lane, h = 0, 1 (rows 0..7, 8..15). */
static inline void scaled_fma8(__m256 acc[2], const __m256 d[2], float scale, const __m256i S[2])
{
    const __m256 sc = _mm256_set1_ps(scale);
    for (int h = 0; h < 2; h++)
        acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(d[h], sc), _mm256_cvtepi32_ps(S[h]), acc[h]);
}
#endif

/* One group of a packed matrix of type t over nb consecutive blocks at p (x's digits from xb):
 * y[0..15] of its 16 rows, their sums carried on from y[0..15] when `carry` (a later chunk of
 * the same rows), asking for the bytes `ahead` past each block while they lie before `end`.
 * Both types as (unsigned byte u) x (digit a) sums: Q8_0 u = q + 128, Q4_0 u = n, so
 * S_j = sum u a_j - off A_j with off 128 or 8. */
static inline __attribute__((always_inline)) void
group_int(const uint8_t *p, int64_t nb, const xq_block *xb, float *y, const int carry,
          size_t ahead, const uint8_t *end, const int locality, const gem_gguf_type t)
{
    const int q8 = t == GEM_GGUF_Q8_0;
    const int32_t off = q8 ? 128 : 8;
    const size_t pb = q8 ? 544 : 288;
#if MV_INT_VNNI
    __m512 acc = carry ? _mm512_loadu_ps(y) : _mm512_setzero_ps();
    const __m512i lo4 = _mm512_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; b++, p += pb) {
        prefetch_packed(p, pb, ahead, end, locality);
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
        /* u[k]: the bytes of elements 4k .. 4k + 3 of the 16 rows (k = 0..7) */
        __m512i u[8];
        if (q8)
            for (int k = 0; k < 8; k++)
                u[k] = _mm512_loadu_si512((const void *)(p + 32 + 64 * k));
        else
            for (int k = 0; k < 4; k++) {
                const __m512i w = _mm512_loadu_si512((const void *)(p + 32 + 64 * k));
                u[k] = _mm512_and_si512(w, lo4);
                u[k + 4] = _mm512_and_si512(_mm512_srli_epi16(w, 4), lo4);
            }
        const xq_block *x = xb + b;
        /* S_j = sum_k u_k a_jk - off A_j; the four digits' chains interleaved */
        __m512i s[4];
        for (int j = 0; j < 4; j++)
            s[j] = _mm512_set1_epi32(-off * x->sum[j]);
        for (int k = 0; k < 8; k++)
            for (int j = 0; j < 4; j++)
                s[j] = _mm512_dpbusd_epi32(s[j], u[k], digits4(x->dig[j] + 4 * k));
        for (int j = 0; j < 4; j++) {
            const __m512 sc = _mm512_mul_ps(d, _mm512_set1_ps(x->scale[j]));
            acc = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(s[j]), acc);
        }
    }
    _mm512_storeu_ps(y, acc);
#elif MV_INT_AVX2
    __m256 acc[2] = {carry ? _mm256_loadu_ps(y) : _mm256_setzero_ps(),
                     carry ? _mm256_loadu_ps(y + 8) : _mm256_setzero_ps()};
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; b++, p += pb) {
        prefetch_packed(p, pb, ahead, end, locality);
        const __m256 d[2] = {f16x8(p), f16x8(p + 16)};
        const xq_block *x = xb + b;
        __m256i s[4][2];
        if (q8) { /* u = q + 128: each vector's pair sums widened at once */
            for (int j = 0; j < 4; j++)
                s[j][0] = s[j][1] = _mm256_set1_epi32(-off * x->sum[j]);
            for (int k = 0; k < 8; k++) {
                const __m256i u0 = bytes32(p + 32 + 64 * k), u1 = bytes32(p + 64 + 64 * k);
                for (int j = 0; j < 4; j++) {
                    const __m256i a = digits4_8(x->dig[j] + 4 * k);
                    s[j][0] = _mm256_add_epi32(s[j][0], pairs32(_mm256_maddubs_epi16(u0, a)));
                    s[j][1] = _mm256_add_epi32(s[j][1], pairs32(_mm256_maddubs_epi16(u1, a)));
                }
            }
        } else { /* u = n <= 15: a pair's sum is at most 1,920 in magnitude, so the 16-bit sums
                  * of all 8 vectors (15,360) are exact and are widened once */
            for (int j = 0; j < 4; j++)
                s[j][0] = s[j][1] = _mm256_setzero_si256();
            for (int k = 0; k < 8; k++) {
                const uint8_t *v = p + 32 + 64 * (k % 4);
                __m256i u0 = bytes32(v), u1 = bytes32(v + 32);
                if (k >= 4)
                    u0 = _mm256_srli_epi16(u0, 4), u1 = _mm256_srli_epi16(u1, 4);
                u0 = _mm256_and_si256(u0, lo4), u1 = _mm256_and_si256(u1, lo4);
                for (int j = 0; j < 4; j++) {
                    const __m256i a = digits4_8(x->dig[j] + 4 * k);
                    s[j][0] = _mm256_add_epi16(s[j][0], _mm256_maddubs_epi16(u0, a));
                    s[j][1] = _mm256_add_epi16(s[j][1], _mm256_maddubs_epi16(u1, a));
                }
            }
            for (int j = 0; j < 4; j++) {
                const __m256i o = _mm256_set1_epi32(-off * x->sum[j]);
                s[j][0] = _mm256_add_epi32(pairs32(s[j][0]), o);
                s[j][1] = _mm256_add_epi32(pairs32(s[j][1]), o);
            }
        }
        for (int j = 0; j < 4; j++)
            scaled_fma8(acc, d, x->scale[j], s[j]);
    }
    _mm256_storeu_ps(y, acc[0]);
    _mm256_storeu_ps(y + 8, acc[1]);
#else
    (void)ahead, (void)end, (void)locality;
    float acc[GROUP_ROWS] = {0};
    if (carry)
        memcpy(acc, y, sizeof acc);
    for (int64_t b = 0; b < nb; b++, p += pb) {
        const xq_block *x = xb + b;
        for (int r = 0; r < GROUP_ROWS; r++) {
            const float d = half_table[rd16(p + 2 * r)];
            int32_t u[32];
            for (int e = 0; e < 32; e++) {
                const int k = e / 4 % 4, at = 32 + 64 * k + 4 * r + e % 4;
                u[e] = q8 ? p[32 + 64 * (e / 4) + 4 * r + e % 4]
                          : (e < 16 ? p[at] & 0x0F : p[at] >> 4);
            }
            for (int j = 0; j < 4; j++) {
                int32_t sum = -off * x->sum[j];
                for (int e = 0; e < 32; e++)
                    sum += u[e] * x->dig[j][e];
                acc[r] = fmaf(d * x->scale[j], (float)sum, acc[r]);
            }
        }
    }
    memcpy(y, acc, sizeof acc);
#endif
}

#if MV_INT_VNNI || MV_INT_AVX2
/* Q4_K: the 6-bit scales (sc) and mins (mn) of sub-block s of the 16 rows, one byte a row, from
 * the packed scale bytes B[0..11] (byte i of every row; q4k_scales' arithmetic). */
static inline void q4k_scale_bytes(const __m128i B[12], int s, __m128i *sc, __m128i *mn)
{
    const __m128i m63 = _mm_set1_epi8(63), m0f = _mm_set1_epi8(0x0F), m30 = _mm_set1_epi8(0x30);
    if (s < 4) {
        *sc = _mm_and_si128(B[s], m63);
        *mn = _mm_and_si128(B[s + 4], m63);
    } else {
        /* (b >> 6) << 4 = (b >> 2) & 0x30 */
        *sc = _mm_or_si128(_mm_and_si128(B[s + 4], m0f),
                           _mm_and_si128(_mm_srli_epi16(B[s - 4], 2), m30));
        *mn = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(B[s + 4], 4), m0f),
                           _mm_and_si128(_mm_srli_epi16(B[s], 2), m30));
    }
}
#endif

/* Q4_K: one group's nsb consecutive super-blocks at p into y[0..15], carried on from y when
 * `carry` (group_int) (matvec.h: per sub-block s of 32,
 * weights d1 n - dm1 with d1 = d sc_s, dm1 = dmin m_s; acc takes fmaf(d1 2^(E - 7j), S_j, acc)
 * for j = 0..3, S_j = sum n a_j, then fmaf(-dm1, sum_x, acc)). */
static void group_q4_k(const uint8_t *p, int64_t nsb, const xq_block *xb, float *y,
                       const int carry, size_t ahead, const uint8_t *end, const int locality)
{
#if MV_INT_VNNI
    __m512 acc = carry ? _mm512_loadu_ps(y) : _mm512_setzero_ps();
    const __m512i lo4 = _mm512_set1_epi8(0x0F);
    for (int64_t sb = 0; sb < nsb; sb++, p += 2304, xb += 8) {
        prefetch_packed(p, 2304, ahead, end, locality);
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
        const __m512 dmin =
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p + 32)));
        /* the 6-bit scales and mins of the 16 rows, one byte a row (q4k_scales' arithmetic) */
        __m128i B[12];
        for (int i = 0; i < 12; i++)
            B[i] = _mm_loadu_si128((const __m128i *)(const void *)(p + 64 + 16 * i));
        /* the 16 rows' d1 and dm1 of the 8 sub-blocks, through L1 (in registers with the
         * rest they would spill) */
        float d1[8][GROUP_ROWS] __attribute__((aligned(64)));
        float dm1[8][GROUP_ROWS] __attribute__((aligned(64)));
        for (int s = 0; s < 8; s++) {
            __m128i sc, mn;
            q4k_scale_bytes(B, s, &sc, &mn);
            _mm512_store_ps(d1[s], _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc))));
            _mm512_store_ps(dm1[s],
                            _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(mn))));
        }
        for (int s = 0; s < 8; s++) { /* sub-block s: pair s / 2, low nibbles when s is even */
            const uint8_t *qs = p + 256 + 512 * (s / 2);
            __m512i u[8];
            for (int k = 0; k < 8; k++) {
                const __m512i w = _mm512_loadu_si512((const void *)(qs + 64 * k));
                u[k] = _mm512_and_si512(s % 2 ? _mm512_srli_epi16(w, 4) : w, lo4);
            }
            const xq_block *x = xb + s;
            __m512i S[4];
            for (int j = 0; j < 4; j++)
                S[j] = _mm512_setzero_si512();
            for (int k = 0; k < 8; k++)
                for (int j = 0; j < 4; j++)
                    S[j] = _mm512_dpbusd_epi32(S[j], u[k], digits4(x->dig[j] + 4 * k));
            const __m512 d1s = _mm512_load_ps(d1[s]);
            for (int j = 0; j < 4; j++)
                acc = _mm512_fmadd_ps(_mm512_mul_ps(d1s, _mm512_set1_ps(x->scale[j])),
                                      _mm512_cvtepi32_ps(S[j]), acc);
            acc = _mm512_fnmadd_ps(_mm512_load_ps(dm1[s]), _mm512_set1_ps(x->sum_x), acc);
        }
    }
    _mm512_storeu_ps(y, acc);
#elif MV_INT_AVX2
    __m256 acc[2] = {carry ? _mm256_loadu_ps(y) : _mm256_setzero_ps(),
                     carry ? _mm256_loadu_ps(y + 8) : _mm256_setzero_ps()};
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    for (int64_t sb = 0; sb < nsb; sb++, p += 2304, xb += 8) {
        prefetch_packed(p, 2304, ahead, end, locality);
        const __m256 d[2] = {f16x8(p), f16x8(p + 16)}, dmin[2] = {f16x8(p + 32), f16x8(p + 48)};
        __m128i B[12];
        for (int i = 0; i < 12; i++)
            B[i] = _mm_loadu_si128((const __m128i *)(const void *)(p + 64 + 16 * i));
        /* the 16 rows' d1 and dm1 of the 8 sub-blocks, rows 0..7 then 8..15 */
        __m256 d1[8][2], dm1[8][2];
        for (int s = 0; s < 8; s++) {
            __m128i sc, mn;
            q4k_scale_bytes(B, s, &sc, &mn);
            for (int h = 0; h < 2; h++) {
                const __m128i sh = h ? _mm_srli_si128(sc, 8) : sc;
                const __m128i mh = h ? _mm_srli_si128(mn, 8) : mn;
                d1[s][h] = _mm256_mul_ps(d[h], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sh)));
                dm1[s][h] = _mm256_mul_ps(dmin[h], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mh)));
            }
        }
        for (int s = 0; s < 8; s++) { /* sub-block s: pair s / 2, low nibbles when s is even */
            const uint8_t *qs = p + 256 + 512 * (s / 2);
            const xq_block *x = xb + s;
            /* n <= 15: the 16-bit sums of the 8 vectors are exact (group_int) */
            __m256i S[4][2];
            for (int j = 0; j < 4; j++)
                S[j][0] = S[j][1] = _mm256_setzero_si256();
            for (int k = 0; k < 8; k++) {
                __m256i u0 = bytes32(qs + 64 * k), u1 = bytes32(qs + 64 * k + 32);
                if (s % 2)
                    u0 = _mm256_srli_epi16(u0, 4), u1 = _mm256_srli_epi16(u1, 4);
                u0 = _mm256_and_si256(u0, lo4), u1 = _mm256_and_si256(u1, lo4);
                for (int j = 0; j < 4; j++) {
                    const __m256i a = digits4_8(x->dig[j] + 4 * k);
                    S[j][0] = _mm256_add_epi16(S[j][0], _mm256_maddubs_epi16(u0, a));
                    S[j][1] = _mm256_add_epi16(S[j][1], _mm256_maddubs_epi16(u1, a));
                }
            }
            for (int j = 0; j < 4; j++) {
                S[j][0] = pairs32(S[j][0]), S[j][1] = pairs32(S[j][1]);
                scaled_fma8(acc, d1[s], x->scale[j], S[j]);
            }
            const __m256 sx = _mm256_set1_ps(x->sum_x);
            for (int h = 0; h < 2; h++)
                acc[h] = _mm256_fnmadd_ps(dm1[s][h], sx, acc[h]);
        }
    }
    _mm256_storeu_ps(y, acc[0]);
    _mm256_storeu_ps(y + 8, acc[1]);
#else
    (void)ahead, (void)end, (void)locality;
    float acc[GROUP_ROWS] = {0};
    if (carry)
        memcpy(acc, y, sizeof acc);
    for (int64_t sb = 0; sb < nsb; sb++, p += 2304, xb += 8)
        for (int r = 0; r < GROUP_ROWS; r++) {
            const float d = half_table[rd16(p + 2 * r)], dmin = half_table[rd16(p + 32 + 2 * r)];
            uint8_t sc[12];
            for (int i = 0; i < 12; i++)
                sc[i] = p[64 + 16 * i + r];
            for (int i = 0; i < 4; i++) {
                float d1[2], dm1[2];
                q4k_scales(sc, i, d, dmin, &d1[0], &dm1[0], &d1[1], &dm1[1]);
                for (int h = 0; h < 2; h++) {
                    const xq_block *x = xb + 2 * i + h;
                    for (int j = 0; j < 4; j++) {
                        int32_t S = 0;
                        for (int e = 0; e < 32; e++) {
                            const uint8_t q = p[256 + 512 * i + 64 * (e / 4) + 4 * r + e % 4];
                            S += (int32_t)(h ? q >> 4 : q & 0x0F) * x->dig[j][e];
                        }
                        acc[r] = fmaf(d1[h] * x->scale[j], (float)S, acc[r]);
                    }
                    acc[r] = fmaf(-dm1[h], x->sum_x, acc[r]);
                }
            }
        }
    memcpy(y, acc, sizeof acc);
#endif
}

/* Q6_K: one group's nsb consecutive super-blocks at p into y[0..15], carried on from y when
 * `carry` (group_int) (matvec.h: per 32-element block
 * (half h, quarter k of a super-block), per 16-element half e of it with scale sc_i:
 * acc = fmaf((d * sc_i) 2^(E - 7j), S_j, acc) for j = 0..3, S_j = sum (u - 32) a_j over the
 * 16, u the 6-bit quant). */
static void group_q6_k(const uint8_t *p, int64_t nsb, const xq_block *xb, float *y,
                       const int carry, size_t ahead, const uint8_t *end, const int locality)
{
#if MV_INT_VNNI
    __m512 acc = carry ? _mm512_loadu_ps(y) : _mm512_setzero_ps();
    const __m512i lo4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    for (int64_t sb = 0; sb < nsb; sb++, p += 3360, xb += 8) {
        prefetch_packed(p, 3360, ahead, end, locality);
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 4; k++) {
                const xq_block *x = xb + 4 * h + k;
                for (int e = 0; e < 2; e++) { /* the block's halves of 16, one scale each */
                    __m512i S[4];
                    for (int j = 0; j < 4; j++)
                        S[j] = _mm512_set1_epi32(-32 * x->half_sum[j][e]);
                    for (int t = 4 * e; t < 4 * e + 4; t++) { /* elements 4t .. 4t + 3 */
                        const __m512i l = _mm512_loadu_si512(
                            (const void *)(p + 288 + 1024 * h + 64 * (8 * (k & 1) + t)));
                        const __m512i q =
                            _mm512_loadu_si512((const void *)(p + 2336 + 512 * h + 64 * t));
                        const __m512i nib =
                            _mm512_and_si512(k < 2 ? l : _mm512_srli_epi16(l, 4), lo4);
                        /* bits 2k, 2k + 1 of qh to bits 4, 5 */
                        const __m512i hb = k == 0   ? _mm512_slli_epi16(q, 4)
                                           : k == 1 ? _mm512_slli_epi16(q, 2)
                                           : k == 2 ? q
                                                    : _mm512_srli_epi16(q, 2);
                        const __m512i u = _mm512_or_si512(nib, _mm512_and_si512(hb, m30));
                        for (int j = 0; j < 4; j++)
                            S[j] = _mm512_dpbusd_epi32(S[j], u, digits4(x->dig[j] + 4 * t));
                    }
                    const __m128i sc8 = _mm_loadu_si128(
                        (const __m128i *)(const void *)(p + 32 + 16 * (8 * h + 2 * k + e)));
                    const __m512 ds =
                        _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc8)));
                    for (int j = 0; j < 4; j++)
                        acc = _mm512_fmadd_ps(_mm512_mul_ps(ds, _mm512_set1_ps(x->scale[j])),
                                              _mm512_cvtepi32_ps(S[j]), acc);
                }
            }
    }
    _mm512_storeu_ps(y, acc);
#elif MV_INT_AVX2
    __m256 acc[2] = {carry ? _mm256_loadu_ps(y) : _mm256_setzero_ps(),
                     carry ? _mm256_loadu_ps(y + 8) : _mm256_setzero_ps()};
    const __m256i lo4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    for (int64_t sb = 0; sb < nsb; sb++, p += 3360, xb += 8) {
        prefetch_packed(p, 3360, ahead, end, locality);
        const __m256 d[2] = {f16x8(p), f16x8(p + 16)};
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 4; k++) {
                const xq_block *x = xb + 4 * h + k;
                for (int e = 0; e < 2; e++) { /* the block's halves of 16, one scale each */
                    /* u <= 63: a pair's sum is at most 8,064 in magnitude, so the 16-bit sums
                     * of the 4 vectors (32,256) are exact */
                    __m256i S[4][2];
                    for (int j = 0; j < 4; j++)
                        S[j][0] = S[j][1] = _mm256_setzero_si256();
                    for (int t = 4 * e; t < 4 * e + 4; t++) { /* elements 4t .. 4t + 3 */
                        __m256i u[2];
                        for (int r = 0; r < 2; r++) {
                            const __m256i l =
                                bytes32(p + 288 + 1024 * h + 64 * (8 * (k & 1) + t) + 32 * r);
                            const __m256i q = bytes32(p + 2336 + 512 * h + 64 * t + 32 * r);
                            const __m256i nib =
                                _mm256_and_si256(k < 2 ? l : _mm256_srli_epi16(l, 4), lo4);
                            /* bits 2k, 2k + 1 of qh to bits 4, 5 */
                            const __m256i hb = k == 0   ? _mm256_slli_epi16(q, 4)
                                               : k == 1 ? _mm256_slli_epi16(q, 2)
                                               : k == 2 ? q
                                                        : _mm256_srli_epi16(q, 2);
                            u[r] = _mm256_or_si256(nib, _mm256_and_si256(hb, m30));
                        }
                        for (int j = 0; j < 4; j++) {
                            const __m256i a = digits4_8(x->dig[j] + 4 * t);
                            S[j][0] = _mm256_add_epi16(S[j][0], _mm256_maddubs_epi16(u[0], a));
                            S[j][1] = _mm256_add_epi16(S[j][1], _mm256_maddubs_epi16(u[1], a));
                        }
                    }
                    const __m128i sc8 = _mm_loadu_si128(
                        (const __m128i *)(const void *)(p + 32 + 16 * (8 * h + 2 * k + e)));
                    const __m256 ds[2] = {
                        _mm256_mul_ps(d[0], _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8))),
                        _mm256_mul_ps(d[1], _mm256_cvtepi32_ps(
                                                _mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8))))};
                    for (int j = 0; j < 4; j++) {
                        const __m256i o = _mm256_set1_epi32(-32 * x->half_sum[j][e]);
                        S[j][0] = _mm256_add_epi32(pairs32(S[j][0]), o);
                        S[j][1] = _mm256_add_epi32(pairs32(S[j][1]), o);
                        scaled_fma8(acc, ds, x->scale[j], S[j]);
                    }
                }
            }
    }
    _mm256_storeu_ps(y, acc[0]);
    _mm256_storeu_ps(y + 8, acc[1]);
#else
    (void)ahead, (void)end, (void)locality;
    float acc[GROUP_ROWS] = {0};
    if (carry)
        memcpy(acc, y, sizeof acc);
    for (int64_t sb = 0; sb < nsb; sb++, p += 3360, xb += 8)
        for (int r = 0; r < GROUP_ROWS; r++) {
            const float d = half_table[rd16(p + 2 * r)];
            for (int h = 0; h < 2; h++)
                for (int k = 0; k < 4; k++) {
                    const xq_block *x = xb + 4 * h + k;
                    for (int e = 0; e < 2; e++) {
                        const float ds = d * (float)(int8_t)p[32 + 16 * (8 * h + 2 * k + e) + r];
                        for (int j = 0; j < 4; j++) {
                            int32_t S = 0;
                            for (int i = 16 * e; i < 16 * e + 16; i++) {
                                const int t = i / 4;
                                const uint8_t l =
                                    p[288 + 1024 * h + 64 * (8 * (k & 1) + t) + 4 * r + i % 4];
                                const uint8_t q = p[2336 + 512 * h + 64 * t + 4 * r + i % 4];
                                const int32_t u =
                                    (k < 2 ? l & 0x0F : l >> 4) | (((q >> (2 * k)) & 3) << 4);
                                S += (u - 32) * x->dig[j][i];
                            }
                            acc[r] = fmaf(ds * x->scale[j], (float)S, acc[r]);
                        }
                    }
                }
        }
    memcpy(y, acc, sizeof acc);
#endif
}

/* One group of w over n consecutive packed blocks at p (group_int's contract). */
static void group_of(const gem_matrix *w, const uint8_t *p, int64_t n, const xq_block *xb,
                     float *y, int carry, size_t ahead, const uint8_t *end, int locality)
{
    if (w->type == GEM_GGUF_Q8_0)
        group_int(p, n, xb, y, carry, ahead, end, locality, GEM_GGUF_Q8_0);
    else if (w->type == GEM_GGUF_Q4_0)
        group_int(p, n, xb, y, carry, ahead, end, locality, GEM_GGUF_Q4_0);
    else if (w->type == GEM_GGUF_Q4_K)
        group_q4_k(p, n, xb, y, carry, ahead, end, locality);
    else
        group_q6_k(p, n, xb, y, carry, ahead, end, locality);
}

/* Span s of a packed w (mv_pack) into out (16 rows a group of the span), xb: x's digits; chunk
 * by chunk, each group's sums carried in out from one chunk to the next, so each row takes its
 * blocks in column order as one group over every column would (the same bits for any span). */
static void span_into(const gem_matrix *w, const pk_geom *g, const xq_block *xb, int64_t s,
                      float *out, size_t ahead, int loc)
{
    const uint8_t *base = w->packed;
    const uint8_t *end = base + (size_t)g->groups * (size_t)g->nb * g->pb;
    const int64_t g0 = s * g->span, g1 = g0 + g->span < g->groups ? g0 + g->span : g->groups;
    const int64_t xpb = g->bc / 32; /* x's digit blocks a packed block */
    for (int64_t c = 0; c * g->cb < g->nb; c++) {
        const int64_t cw = g->nb - c * g->cb < g->cb ? g->nb - c * g->cb : g->cb;
        for (int64_t grp = g0; grp < g1; grp++)
            group_of(w, base + pk_offset(g, grp, c), cw, xb + c * g->cb * xpb,
                     out + GROUP_ROWS * (grp - g0), c > 0, ahead, end, loc);
    }
}

/* Spans [s0, s1) of a packed w into y (rows 16 span g0 ..), xb: x's digits. */
void mvk_spans(const gem_matrix *w, const xq_block *xb, float *y, int64_t s0, int64_t s1,
               int64_t ahead_bytes, int into)
{
    mvk_init();
    const pk_geom g = geom_of(w);
    const int loc = into == 1 ? 3 : (into == 0 ? 0 : 2);
    for (int64_t s = s0; s < s1; s++)
        span_into(w, &g, xb, s, y + GROUP_ROWS * s * g.span, (size_t)ahead_bytes, loc);
}

void mvk_span_rows(const gem_matrix *w, const xq_block *xb, int64_t s, float *out)
{
    mvk_init();
    const pk_geom g = geom_of(w);
    span_into(w, &g, xb, s, out, 0, 2);
}

/* The rows [r0, r1) by the F32 rule, asking before each row for the lines of the row `ahead`
 * rows later (ahead 0: none; rows past the matrix are not asked for). */
static inline __attribute__((always_inline)) void
mv_rows_into(const gem_matrix *w, const float *x, float *y, int64_t r0, int64_t r1, int64_t ahead,
             const int locality)
{
    mvk_init();
    const uint8_t *base = w->data;
    const size_t rb = w->row_bytes;
    for (int64_t r = r0; r < r1; r++) {
        if (ahead > 0 && r + ahead < w->rows) {
            const uint8_t *pf = base + (size_t)(r + ahead) * rb;
            for (size_t o = 0; o < rb; o += 64)
                prefetch_line(pf + o, locality);
        }
        y[r] = dot_row(w, base + (size_t)r * rb, x);
    }
}

/* into: mv_tuning's prefetch_into (matvec_kernels.h) */
void mvk_rows(const gem_matrix *w, const float *x, float *y, int64_t r0, int64_t r1,
              int64_t ahead, int into)
{
    if (into == 1)
        mv_rows_into(w, x, y, r0, r1, ahead, 3);
    else if (into == 0)
        mv_rows_into(w, x, y, r0, r1, ahead, 0);
    else
        mv_rows_into(w, x, y, r0, r1, ahead, 2);
}

void mvk_row_f32(const gem_matrix *w, int64_t r, float *dst)
{
    mvk_init();
    const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
    const int64_t ch = chunk_of(w->type, w->cols);
    for (int64_t e = 0; e < w->cols; e += ch)
        dq(w->type, row, e, w->cols - e < ch ? w->cols - e : ch, dst + e);
}

#ifndef GEM_CPU_VARIANT /* one build: these two; several: src/model/matvec_dispatch.c's */
int mvk_builds(const char **names, int max)
{
    if (max > 0)
        names[0] = mvk_isa();
    return 1;
}

int mvk_use(const char *name) { return strcmp(name, mvk_isa()) == 0 ? 0 : -1; }
#endif
