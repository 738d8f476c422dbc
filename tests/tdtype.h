/*
 * tdtype: 16-bit and FP8 cache elements for the tests, written here independently of
 * the library (which they check): rounding F32 to BF16 (by frexp and
 * nearbyint), to F16 (by the compiler's _Float16, or F16C's vcvtps2ph where
 * the compiler has no _Float16, as clang before 15 on x86, or by frexp and nearbyint where it
 * has neither, as clang 14 without -march=native) and to FP8 E4M3 (the
 * nearest of the 127 magnitudes by bisection, ties to the even code), the exact widening back,
 * element stores and loads of any gem_dtype, and seeded random bit patterns
 * that reach the corners of each type (subnormals, zeros of both signs, the
 * widest exponents that keep a 512-term dot product finite).
 */
#ifndef GEM_TDTYPE_H
#define GEM_TDTYPE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gem/attn.h"
#include "gem/check.h"

#if !defined(__FLT16_MAX__) && !defined(TDT_F16_SOFT)
#if defined(__F16C__)
#include <immintrin.h>
#define TDT_F16C 1
#else
#define TDT_F16_SOFT 1 /* neither: by frexp and nearbyint, as BF16 below */
#endif
#endif

#ifdef TDT_F16_SOFT
/* x (finite or not) rounded to the nearest even IEEE half by arithmetic alone: 11 significant
 * bits by frexp and nearbyint, multiples of 2^-24 below 2^-14 (the subnormals), infinity from
 * 65520 on (half way between 65504 and the next binade's first value), 0x7E00 for a NaN. */
static inline uint16_t tdt_soft_to_f16(float x)
{
    if (isnan(x))
        return 0x7E00u;
    const uint16_t sign = signbit(x) ? 0x8000u : 0;
    float a = fabsf(x);
    if (a >= 65520.0f)
        return (uint16_t)(sign | 0x7C00u);
    if (a < 0x1p-14f) { /* a subnormal or zero half, or 2^-14 by rounding up */
        const float n = nearbyintf(a * 0x1p24f); /* exact scaling, then ties to even */
        if (n < 1024.0f)
            return (uint16_t)(sign | (uint16_t)n);
        return (uint16_t)(sign | 0x0400u); /* 2^-14 */
    }
    int e = 0;
    const float m = frexpf(a, &e);                   /* a = m 2^e, m in [0.5, 1) */
    a = ldexpf(nearbyintf(m * 2048.0f), e - 11);     /* 11 significant bits */
    if (a > 65504.0f)
        return (uint16_t)(sign | 0x7C00u);
    const float f = frexpf(a, &e);                   /* again: the rounding may carry */
    const uint16_t mant = (uint16_t)(f * 2048.0f - 1024.0f), ex = (uint16_t)(e - 1 + 15);
    return (uint16_t)(sign | (uint16_t)(ex << 10) | mant);
}

/* The float half pattern h stands for (exact). */
static inline float tdt_soft_from_f16(uint16_t h)
{
    const int e = (h >> 10) & 31, m = h & 1023;
    float a;
    if (e == 0)
        a = ldexpf((float)m, -24);
    else if (e == 31)
        a = m ? NAN : INFINITY;
    else
        a = ldexpf((float)(1024 + m), e - 25);
    return (h & 0x8000u) ? -a : a;
}
#endif

/* x rounded to nearest even bfloat16 (finite x below BF16's overflow bound):
 * 8 significant bits by frexp; the result is exact in float, its top half is
 * the BF16 pattern. */
static inline uint16_t tdt_to_bf16(float x)
{
    int e = 0;
    const float m = frexpf(x, &e); /* |m| in [0.5, 1), or 0 */
    const float y = ldexpf(nearbyintf(m * 256.0f), e - 8);
    uint32_t bits;
    memcpy(&bits, &y, sizeof bits);
    return (uint16_t)(bits >> 16);
}

/* x rounded to nearest even IEEE half (subnormals kept), by _Float16. */
static inline uint16_t tdt_to_f16(float x)
{
#if defined(TDT_F16_SOFT)
    return tdt_soft_to_f16(x);
#elif defined(TDT_F16C)
    return (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
#else
    const _Float16 h = (_Float16)x;
    uint16_t bits;
    memcpy(&bits, &h, sizeof bits);
    return bits;
#endif
}

/* The float a BF16 / F16 pattern stands for (exact). */
static inline float tdt_from_16(uint16_t h, gem_dtype t)
{
    if (t == GEM_DTYPE_BF16) {
        const uint32_t bits = (uint32_t)h << 16;
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
#if defined(TDT_F16_SOFT)
    return tdt_soft_from_f16(h);
#elif defined(TDT_F16C)
    return _cvtsh_ss(h);
#else
    _Float16 x;
    memcpy(&x, &h, sizeof x);
    return (float)x;
#endif
}

/* The value of FP8 E4M3 code b (E4M3FN; its head's scale not applied): NaN for S.1111.111,
 * else (-1)^s 2^(e - 7) (1 + m / 8), or m 2^-9 when e = 0. */
static inline float tdt_from_fp8(uint8_t b)
{
    if ((b & 0x7Fu) == 0x7Fu)
        return NAN;
    const int e = (b >> 3) & 0xF, m = b & 7;
    const float a = e ? ldexpf(1.0f + (float)m / 8.0f, e - 7) : ldexpf((float)m, -9);
    return (b & 0x80u) ? -a : a;
}

/* x (finite) rounded to the nearest FP8 E4M3 code among the 127 finite magnitudes, ties to
 * the even code, beyond 448 saturating to +-448. The magnitudes grow with the code, so a
 * bisection finds the two codes around |x| (8 steps, not a pass over all 127: the tests make
 * millions of codes, and under the sanitizers each magnitude's ldexpf is slow). */
static inline uint8_t tdt_to_fp8(float x)
{
    const float a = fabsf(x);
    int lo = 0, hi = 0x7E; /* tdt_from_fp8(lo) <= a < tdt_from_fp8(hi) */
    if (a >= tdt_from_fp8(0x7E)) {
        lo = 0x7E;
    } else {
        while (hi - lo > 1) {
            const int mid = (lo + hi) / 2;
            if (tdt_from_fp8((uint8_t)mid) <= a)
                lo = mid;
            else
                hi = mid;
        }
        const float dl = a - tdt_from_fp8((uint8_t)lo), dh = tdt_from_fp8((uint8_t)hi) - a;
        if (dh < dl || (dh == dl && (hi & 1) == 0))
            lo = hi;
    }
    return (uint8_t)((x < 0 || (x == 0 && signbit(x)) ? 0x80 : 0) | lo);
}

/* Stores x (rounded for 16-bit and FP8 types) as element i of a tensor of type t. */
static inline void tdt_store(void *base, gem_dtype t, int64_t i, float x)
{
    if (t == GEM_DTYPE_F32)
        ((float *)base)[i] = x;
    else if (t == GEM_DTYPE_FP8_E4M3)
        ((uint8_t *)base)[i] = tdt_to_fp8(x);
    else
        ((uint16_t *)base)[i] = t == GEM_DTYPE_BF16 ? tdt_to_bf16(x) : tdt_to_f16(x);
}

/* Element i of a tensor of type t as float (exact; FP8: unscaled). */
static inline float tdt_load(const void *base, gem_dtype t, int64_t i)
{
    return t == GEM_DTYPE_F32        ? ((const float *)base)[i]
           : t == GEM_DTYPE_FP8_E4M3 ? tdt_from_fp8(((const uint8_t *)base)[i])
                                     : tdt_from_16(((const uint16_t *)base)[i], t);
}

/* The quiet NaN of type t as element i: 0x7FC00000, 0x7FC0 (BF16), 0x7E00 (F16), 0x7F (FP8). */
static inline void tdt_store_nan(void *base, gem_dtype t, int64_t i)
{
    if (t == GEM_DTYPE_F32)
        ((float *)base)[i] = NAN;
    else if (t == GEM_DTYPE_FP8_E4M3)
        ((uint8_t *)base)[i] = 0x7Fu;
    else
        ((uint16_t *)base)[i] = t == GEM_DTYPE_BF16 ? 0x7FC0u : 0x7E00u;
}

/* n elements of type t at dst from stream `seed`, and their exact floats at
 * wide (n): F32 uniform in [-1, 1); BF16 and F16 random finite patterns with
 * random signs and mantissas, one in eight subnormal or zero, the other
 * exponents BF16 2^-8 .. 2^4, F16 every normal one (up to 65504); FP8 every finite
 * code (subnormals and zeros of both signs included, up to 448). */
static inline void tdt_fill(uint64_t seed, gem_dtype t, int64_t n, void *dst, float *wide)
{
    if (t == GEM_DTYPE_F32) {
        gem_fill_uniform(seed, -1.0f, 1.0f, wide, (size_t)n);
        memcpy(dst, wide, (size_t)n * sizeof(float));
        return;
    }
    if (t == GEM_DTYPE_FP8_E4M3) {
        uint8_t *b = dst;
        for (int64_t i = 0; i < n; i++) {
            float u;
            gem_fill_uniform(seed * 3 + (uint64_t)i * 7919u, 0.0f, 1.0f, &u, 1);
            uint8_t c = (uint8_t)(u * 256.0f);
            if ((c & 0x7Fu) == 0x7Fu) /* NaN: the next code down */
                c--;
            b[i] = c;
            wide[i] = tdt_from_fp8(c);
        }
        return;
    }
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) {
        float u[3];
        gem_fill_uniform(seed * 3 + (uint64_t)i * 7919u, 0.0f, 1.0f, u, 3);
        const uint16_t sign = u[0] < 0.5f ? 0x8000u : 0;
        const int sub = u[1] < 0.125f;
        uint16_t e, m;
        if (t == GEM_DTYPE_BF16) {
            m = (uint16_t)(u[2] * 128.0f) & 0x7Fu;
            e = sub ? 0 : (uint16_t)(119 + (int)(u[1] * 13.0f) % 13);
            h[i] = (uint16_t)(sign | (uint16_t)(e << 7) | m);
        } else {
            m = (uint16_t)(u[2] * 1024.0f) & 0x3FFu;
            e = sub ? 0 : (uint16_t)(1 + (int)(u[1] * 30.0f) % 30);
            h[i] = (uint16_t)(sign | (uint16_t)(e << 10) | m);
        }
        wide[i] = tdt_from_16(h[i], t);
    }
}

#endif /* GEM_TDTYPE_H */
