/*
 * Matrix-vector products on GGUF weights (see matvec.h). A block of weights
 * (one Q8_0/Q4_0 block of 32, one Q4_K/Q6_K super-block of 256, or 256 plain
 * elements) is dequantized into a small buffer with ggml's arithmetic, then
 * multiplied into 16 lanes; the lanes are summed by a fixed tree at the end.
 */
#include <math.h>
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "matvec.h"

#define LANES 64
#define CHUNK 256
#define MV_INLINE_BYTES (256u << 10) /* weights below this run on the calling thread */
/* The library's mv_tuning, from dev/cpu/mv_split on the H200 host's 16-core Xeon (run 49, a
 * token of the 2gb preset's products, 2.0 GB of Q8_0): 4 ranges a thread, each thread asking
 * for the row 4 KiB ahead into L2: 23.7 ms against 33.6 for one range and no prefetch (71%
 * against 50% of the probe). One core from DRAM: 347 -> 254 ms at 16 KiB (run 48). */
#define MV_PARTS_PER_THREAD 4
#define MV_PREFETCH_BYTES 4096
#define MV_PREFETCH_INTO 2

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static float half_table[65536];
static int half_ready;

static void half_init(void)
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
static inline float f32_of(float v) { return v; }
static inline float bf16_of(uint16_t v) { return gem_gguf_bf16_to_f32(v); }
static inline float f16_of(uint16_t v) { return half_table[v]; }
PLAIN_DOT(dot_f32, float, LOAD_F32, f32_of)
PLAIN_DOT(dot_bf16, uint16_t, LOAD_BF16, bf16_of)
PLAIN_DOT(dot_f16, uint16_t, LOAD_F16, f16_of)

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
#if defined(__AVX512F__)
    case GEM_GGUF_F16: return dot_f16((const uint16_t *)(const void *)row, x, w->cols);
    case GEM_GGUF_Q6_K: return dot_q6_k(row, x, w->cols);
#endif
    default: return dot_generic(w, row, x);
    }
}

/* mv_rows asking, before each row, for the lines of the row `ahead` rows later (ahead 0: none;
 * rows past the matrix are not asked for). */
static inline __attribute__((always_inline)) void
mv_rows_into(const gem_matrix *w, const float *x, float *y, int64_t r0, int64_t r1, int64_t ahead,
             const int locality)
{
    half_init();
    const uint8_t *base = w->data;
    const size_t rb = w->row_bytes;
    for (int64_t r = r0; r < r1; r++) {
        if (ahead > 0 && r + ahead < w->rows) {
            const uint8_t *pf = base + (size_t)(r + ahead) * rb;
            for (size_t o = 0; o < rb; o += 64)
                __builtin_prefetch(pf + o, 0, locality);
        }
        y[r] = dot_row(w, base + (size_t)r * rb, x);
    }
}

/* into: mv_tuning's prefetch_into */
static void mv_rows_ahead(const gem_matrix *w, const float *x, float *y, int64_t r0, int64_t r1,
                          int64_t ahead, int into)
{
    if (into == 1)
        mv_rows_into(w, x, y, r0, r1, ahead, 3);
    else if (into == 0)
        mv_rows_into(w, x, y, r0, r1, ahead, 0);
    else
        mv_rows_into(w, x, y, r0, r1, ahead, 2);
}

/* Rows ahead for a prefetch distance in bytes: the row that starts at least that far on. */
static int64_t rows_ahead(const gem_matrix *w, int64_t bytes)
{
    return bytes <= 0 ? 0 : (int64_t)(((size_t)bytes + w->row_bytes - 1) / w->row_bytes);
}

void mv_rows(const gem_matrix *w, const float *x, float *y, int64_t r0, int64_t r1)
{
    mv_rows_ahead(w, x, y, r0, r1, rows_ahead(w, MV_PREFETCH_BYTES), MV_PREFETCH_INTO);
}

void mv_row_f32(const gem_matrix *w, int64_t r, float *dst)
{
    half_init();
    const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
    const int64_t ch = chunk_of(w->type, w->cols);
    for (int64_t e = 0; e < w->cols; e += ch)
        dq(w->type, row, e, w->cols - e < ch ? w->cols - e : ch, dst + e);
}

typedef struct mv_job {
    int n;
    const gem_matrix *const *w;
    const float *const *x;
    float *const *y;
    size_t first_byte[9]; /* where product k's rows start in the batch's bytes; [n] = total */
    int64_t parts;        /* items: contiguous byte ranges of the batch */
    int64_t prefetch_bytes;
    int prefetch_into;
} mv_job;

/* Item `item` of the batch: the rows whose first byte lies in [item * B / parts,
 * (item + 1) * B / parts) of the products' rows laid end to end (B bytes), so every row is
 * computed by exactly one item, whole, and each item streams one contiguous range. */
static void mv_item(void *ctx, int64_t item, int64_t thread)
{
    (void)thread;
    const mv_job *j = ctx;
    const size_t B = j->first_byte[j->n];
    /* item * B fits: B is at most the bytes of 8 mapped matrices (below 2^40), parts at most
     * 4096 threads x 64 */
    const size_t b0 = (size_t)item * B / (size_t)j->parts;
    const size_t b1 = (size_t)(item + 1) * B / (size_t)j->parts;
    for (int k = 0; k < j->n; k++) {
        const size_t start = j->first_byte[k], rb = j->w[k]->row_bytes;
        const int64_t rows = j->w[k]->rows;
        /* rows r with start + r * rb in [b0, b1): r in [ceil((b0 - start) / rb), ...) */
        const int64_t r0 = b0 <= start ? 0 : (int64_t)((b0 - start + rb - 1) / rb);
        int64_t r1 = b1 <= start ? 0 : (int64_t)((b1 - start + rb - 1) / rb);
        r1 = r1 < rows ? r1 : rows;
        if (r0 < r1)
            mv_rows_ahead(j->w[k], j->x[k], j->y[k], r0, r1,
                          rows_ahead(j->w[k], j->prefetch_bytes), j->prefetch_into);
    }
}

void mv_batch(cpu_pool *p, int n, const gem_matrix *const *w, const float *const *x, float *const *y)
{
    const mv_tuning t = {MV_PARTS_PER_THREAD, MV_PREFETCH_BYTES, MV_PREFETCH_INTO};
    mv_batch_tuned(p, n, w, x, y, &t);
}

void mv_batch_tuned(cpu_pool *p, int n, const gem_matrix *const *w, const float *const *x,
                    float *const *y, const mv_tuning *t)
{
    half_init();
    const int64_t pf_max = (int64_t)1 << 30;
    const int64_t pf =
        t->prefetch_bytes < 0 ? 0 : (t->prefetch_bytes > pf_max ? pf_max : t->prefetch_bytes);
    /* Small products are not worth waking the pool for (the same bits either way). */
    size_t bytes = 0;
    for (int k = 0; k < n; k++)
        bytes += (size_t)w[k]->rows * w[k]->row_bytes;
    if (bytes < MV_INLINE_BYTES || cpu_pool_threads(p) == 1) {
        for (int k = 0; k < n; k++)
            mv_rows_ahead(w[k], x[k], y[k], 0, w[k]->rows, rows_ahead(w[k], pf), t->prefetch_into);
        return;
    }
    /* Contiguous ranges, a few per thread: each core streams its rows in order (16-row items
     * taken in turn from a shared counter left each core a stream with gaps and ran at about
     * 60% of the read bandwidth), and one that finishes early takes the next range. */
    const int64_t ppt =
        t->parts_per_thread < 1 ? 1 : (t->parts_per_thread > 64 ? 64 : t->parts_per_thread);
    mv_job j = {n, w, x, y, {0}, cpu_pool_threads(p) * ppt, pf, t->prefetch_into};
    for (int k = 0; k < n; k++)
        j.first_byte[k + 1] = j.first_byte[k] + (size_t)w[k]->rows * w[k]->row_bytes;
    cpu_pool_run(p, j.parts, mv_item, &j);
}

void mv(cpu_pool *p, const gem_matrix *w, const float *x, float *y) { mv_batch(p, 1, &w, &x, &y); }
