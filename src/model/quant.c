/*
 * GGUF element types: block sizes, half/bfloat16 conversion, dequantization
 * exactly as ggml computes it, and a simple quantizer for synthetic files.
 *
 * The dequantizers follow ggml's dequantize_row_* float operation for float
 * operation (same products, same order), so their output is bit-identical;
 * tests/test_gguf.c checks hand-made blocks whose values are known exactly.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gem/gguf.h"

#define QK8_0 32
#define QK4_0 32
#define QK_K 256

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFF);
    p[1] = (uint8_t)(v >> 8);
}

/* ---- types ------------------------------------------------------------------------ */

const char *gem_gguf_type_name(uint32_t type)
{
    switch (type) {
    case GEM_GGUF_F32: return "f32";
    case GEM_GGUF_F16: return "f16";
    case GEM_GGUF_BF16: return "bf16";
    case GEM_GGUF_Q8_0: return "q8_0";
    case GEM_GGUF_Q4_0: return "q4_0";
    case GEM_GGUF_Q4_K: return "q4_k";
    case GEM_GGUF_Q6_K: return "q6_k";
    default: return NULL;
    }
}

gem_status gem_gguf_type_parse(const char *name, gem_gguf_type *out)
{
    static const gem_gguf_type all[] = {GEM_GGUF_F32,  GEM_GGUF_F16,  GEM_GGUF_BF16, GEM_GGUF_Q8_0,
                                        GEM_GGUF_Q4_0, GEM_GGUF_Q4_K, GEM_GGUF_Q6_K};
    if (!name || !out)
        return GEM_ERR_NULL;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(name, gem_gguf_type_name(all[i]))) {
            *out = all[i];
            return GEM_OK;
        }
    return GEM_ERR_PARAM;
}

gem_status gem_gguf_type_block(uint32_t type, int64_t *block_elems, size_t *block_bytes)
{
    int64_t e;
    size_t b;
    switch (type) {
    case GEM_GGUF_F32: e = 1, b = 4; break;
    case GEM_GGUF_F16:
    case GEM_GGUF_BF16: e = 1, b = 2; break;
    case GEM_GGUF_Q8_0: e = QK8_0, b = 2 + QK8_0; break;
    case GEM_GGUF_Q4_0: e = QK4_0, b = 2 + QK4_0 / 2; break;
    case GEM_GGUF_Q4_K: e = QK_K, b = 2 + 2 + 12 + QK_K / 2; break;
    case GEM_GGUF_Q6_K: e = QK_K, b = QK_K / 2 + QK_K / 4 + QK_K / 16 + 2; break;
    default: return GEM_ERR_UNSUPPORTED;
    }
    if (block_elems)
        *block_elems = e;
    if (block_bytes)
        *block_bytes = b;
    return GEM_OK;
}

gem_status gem_gguf_row_bytes(uint32_t type, int64_t n, size_t *bytes)
{
    int64_t be;
    size_t bb;
    gem_status st = gem_gguf_type_block(type, &be, &bb);
    if (st != GEM_OK)
        return st;
    if (n < 0 || n % be != 0)
        return GEM_ERR_SHAPE;
    return gem_mul_size((size_t)(n / be), bb, bytes);
}

/* ---- half and bfloat16 ------------------------------------------------------------- */

float gem_gguf_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h >> 15) << 31;
    const uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: value = man * 2^-24, exact in float */
            float f = (float)man * 0x1p-24f;
            memcpy(&bits, &f, 4);
            bits |= sign;
        }
    } else if (exp == 31) {
        bits = sign | 0x7F800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float gem_gguf_bf16_to_f32(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t gem_gguf_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    const uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) /* NaN: keep it a quiet NaN */
        return (uint16_t)(sign | 0x7E00);
    if (ax >= 0x477FF000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7C00);
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        /* value / 2^-24 rounded to nearest even */
        float a;
        memcpy(&a, &ax, 4);
        float m = a * 0x1p24f;   /* exact: a power-of-two scale */
        float r = nearbyintf(m); /* default rounding mode: to nearest even */
        return (uint16_t)(sign | (uint16_t)r);
    }
    /* normal: round the 23-bit mantissa to 10 bits, nearest even */
    uint32_t exp = ((ax >> 23) - 112) << 10;
    uint32_t man = ax & 0x7FFFFF;
    uint32_t h = exp | (man >> 13);
    uint32_t rest = man & 0x1FFF;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++;
    return (uint16_t)(sign | h);
}

uint16_t gem_gguf_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7FFF + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* ---- dequantization ---------------------------------------------------------------- */

static void dq_q8_0(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 34) {
        const float d = gem_gguf_f16_to_f32(rd16(b));
        const int8_t *q = (const int8_t *)(b + 2);
        for (int j = 0; j < QK8_0; j++)
            y[i * QK8_0 + j] = q[j] * d;
    }
}

static void dq_q4_0(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 18) {
        const float d = gem_gguf_f16_to_f32(rd16(b));
        const uint8_t *q = b + 2;
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int x0 = (q[j] & 0x0F) - 8;
            const int x1 = (q[j] >> 4) - 8;
            y[i * QK4_0 + j] = x0 * d;
            y[i * QK4_0 + j + QK4_0 / 2] = x1 * d;
        }
    }
}

/* Scale and min of sub-block j (0..7) from the 12 packed bytes. */
static void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void dq_q4_k(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 144) {
        const float d = gem_gguf_f16_to_f32(rd16(b));
        const float min = gem_gguf_f16_to_f32(rd16(b + 2));
        const uint8_t *scales = b + 4, *q = b + 16;
        int is = 0;
        for (int j = 0; j < QK_K; j += 64) {
            uint8_t sc, m;
            scale_min_k4(is + 0, scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

static void dq_q6_k(const uint8_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 210) {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        const float d = gem_gguf_f16_to_f32(rd16(b + 208));
        for (int n = 0; n < QK_K; n += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

gem_status gem_gguf_dequant(uint32_t type, const void *src, float *dst, int64_t n)
{
    int64_t be;
    gem_status st = gem_gguf_type_block(type, &be, NULL);
    if (st != GEM_OK)
        return st;
    if (!src || !dst)
        return GEM_ERR_NULL;
    if (n < 0 || n % be != 0)
        return GEM_ERR_SHAPE;
    const uint8_t *b = src;
    switch (type) {
    case GEM_GGUF_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case GEM_GGUF_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = gem_gguf_f16_to_f32(rd16(b + 2 * i));
        break;
    case GEM_GGUF_BF16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = gem_gguf_bf16_to_f32(rd16(b + 2 * i));
        break;
    case GEM_GGUF_Q8_0: dq_q8_0(b, dst, n / be); break;
    case GEM_GGUF_Q4_0: dq_q4_0(b, dst, n / be); break;
    case GEM_GGUF_Q4_K: dq_q4_k(b, dst, n / be); break;
    case GEM_GGUF_Q6_K: dq_q6_k(b, dst, n / be); break;
    default: return GEM_ERR_UNSUPPORTED;
    }
    return GEM_OK;
}

/* ---- quantization (simple round to nearest, for synthetic files) ------------------- */

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static void qz_q8_0(const float *x, uint8_t *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 34, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        wr16(b, gem_gguf_f32_to_f16(d));
        for (int j = 0; j < QK8_0; j++)
            b[2 + j] = (uint8_t)(int8_t)clampi((int)lrintf(x[j] * id), -127, 127);
    }
}

static void qz_q4_0(const float *x, uint8_t *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 18, x += QK4_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK4_0; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        wr16(b, gem_gguf_f32_to_f16(d));
        for (int j = 0; j < QK4_0 / 2; j++) {
            int x0 = clampi((int)(x[j] * id + 8.5f), 0, 15);
            int x1 = clampi((int)(x[j + QK4_0 / 2] * id + 8.5f), 0, 15);
            b[2 + j] = (uint8_t)(x0 | (x1 << 4));
        }
    }
}

static void qz_q4_k(const float *x, uint8_t *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 144, x += QK_K) {
        float scale[8], minv[8], dmax = 0.0f, mmax = 0.0f;
        for (int s = 0; s < 8; s++) {
            float lo = 0.0f, hi = 0.0f;
            for (int l = 0; l < 32; l++) {
                lo = fminf(lo, x[32 * s + l]);
                hi = fmaxf(hi, x[32 * s + l]);
            }
            scale[s] = (hi - lo) / 15.0f;
            minv[s] = -lo;
            dmax = fmaxf(dmax, scale[s]);
            mmax = fmaxf(mmax, minv[s]);
        }
        const float d = gem_gguf_f16_to_f32(gem_gguf_f32_to_f16(dmax / 63.0f));
        const float dmin = gem_gguf_f16_to_f32(gem_gguf_f32_to_f16(mmax / 63.0f));
        uint8_t sc[8], m[8];
        for (int s = 0; s < 8; s++) {
            sc[s] = (uint8_t)(d > 0.0f ? clampi((int)lrintf(scale[s] / d), 0, 63) : 0);
            m[s] = (uint8_t)(dmin > 0.0f ? clampi((int)lrintf(minv[s] / dmin), 0, 63) : 0);
        }
        wr16(b, gem_gguf_f32_to_f16(d));
        wr16(b + 2, gem_gguf_f32_to_f16(dmin));
        uint8_t *scales = b + 4, *q = b + 16;
        for (int j = 0; j < 4; j++) {
            scales[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
            scales[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
            scales[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
        }
        uint8_t L[QK_K];
        for (int s = 0; s < 8; s++) {
            const float ds = d * sc[s], ms = dmin * m[s];
            for (int l = 0; l < 32; l++)
                L[32 * s + l] =
                    (uint8_t)(ds > 0.0f ? clampi((int)lrintf((x[32 * s + l] + ms) / ds), 0, 15)
                                        : 0);
        }
        for (int j = 0; j < QK_K; j += 64)
            for (int l = 0; l < 32; l++)
                q[j / 2 + l] = (uint8_t)(L[j + l] | (L[j + 32 + l] << 4));
    }
}

static void qz_q6_k(const float *x, uint8_t *b, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b += 210, x += QK_K) {
        float gs[16], amax = 0.0f;
        for (int g = 0; g < 16; g++) {
            float mx = 0.0f, ax = 0.0f;
            for (int l = 0; l < 16; l++)
                if (fabsf(x[16 * g + l]) > ax) {
                    ax = fabsf(x[16 * g + l]);
                    mx = x[16 * g + l];
                }
            gs[g] = mx / -32.0f;
            amax = fmaxf(amax, fabsf(gs[g]));
        }
        const float d = gem_gguf_f16_to_f32(gem_gguf_f32_to_f16(amax / 127.0f));
        int8_t sc[16];
        uint8_t L[QK_K];
        for (int g = 0; g < 16; g++) {
            sc[g] = (int8_t)(d > 0.0f ? clampi((int)lrintf(gs[g] / d), -127, 127) : 0);
            const float ds = d * sc[g];
            for (int l = 0; l < 16; l++)
                L[16 * g + l] =
                    (uint8_t)(ds != 0.0f ? clampi((int)lrintf(x[16 * g + l] / ds) + 32, 0, 63)
                                         : 32);
        }
        uint8_t *ql = b, *qh = b + 128;
        for (int n = 0; n < QK_K; n += 128) {
            for (int l = 0; l < 32; l++) {
                const int q1 = L[n + l], q2 = L[n + l + 32], q3 = L[n + l + 64], q4 = L[n + l + 96];
                ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
                ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
                qh[l] =
                    (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
        memcpy(b + 192, sc, 16);
        wr16(b + 208, gem_gguf_f32_to_f16(d));
    }
}

gem_status gem_gguf_quantize(uint32_t type, const float *src, void *dst, int64_t n)
{
    int64_t be;
    gem_status st = gem_gguf_type_block(type, &be, NULL);
    if (st != GEM_OK)
        return st;
    if (!src || !dst)
        return GEM_ERR_NULL;
    if (n < 0 || n % be != 0)
        return GEM_ERR_SHAPE;
    uint8_t *b = dst;
    switch (type) {
    case GEM_GGUF_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case GEM_GGUF_F16:
        for (int64_t i = 0; i < n; i++)
            wr16(b + 2 * i, gem_gguf_f32_to_f16(src[i]));
        break;
    case GEM_GGUF_BF16:
        for (int64_t i = 0; i < n; i++)
            wr16(b + 2 * i, gem_gguf_f32_to_bf16(src[i]));
        break;
    case GEM_GGUF_Q8_0: qz_q8_0(src, b, n / be); break;
    case GEM_GGUF_Q4_0: qz_q4_0(src, b, n / be); break;
    case GEM_GGUF_Q4_K: qz_q4_k(src, b, n / be); break;
    case GEM_GGUF_Q6_K: qz_q6_k(src, b, n / be); break;
    default: return GEM_ERR_UNSUPPORTED;
    }
    return GEM_OK;
}
