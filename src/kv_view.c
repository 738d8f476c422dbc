/*
 * KV views: element types, the head geometry check, the stride and extent
 * rules of a cache described in place (gem_kv_view), and exact element loads.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "gem/attn.h"
#include "kv_view.h"

static const char *const dtype_names[GEM_DTYPE_COUNT] = {"f32", "bf16", "f16", "fp8_e4m3"};
static const size_t dtype_sizes[GEM_DTYPE_COUNT] = {4, 2, 2, 1};

const char *gem_dtype_name(gem_dtype t)
{
    return (unsigned)t < GEM_DTYPE_COUNT ? dtype_names[t] : NULL;
}

size_t gem_dtype_size(gem_dtype t) { return (unsigned)t < GEM_DTYPE_COUNT ? dtype_sizes[t] : 0; }

gem_status gem_dtype_parse(const char *name, gem_dtype *out)
{
    if (!name || !out)
        return GEM_ERR_NULL;
    for (int i = 0; i < GEM_DTYPE_COUNT; i++)
        if (!strcmp(name, dtype_names[i])) {
            *out = (gem_dtype)i;
            return GEM_OK;
        }
    return GEM_ERR_PARAM;
}

gem_status gem_decode_shape_check(const gem_decode_shape *s)
{
    if (!s)
        return GEM_ERR_NULL;
    if (s->n_q_heads < 1 || s->n_kv_heads < 1 || s->dk < 1 || s->dv < 1 ||
        s->n_q_heads % s->n_kv_heads != 0 || !isfinite(s->scale))
        return GEM_ERR_SHAPE;
    /* q and out element counts (and their bytes as doubles, for the reference) */
    size_t e = 0;
    if (gem_mul_size((size_t)s->n_q_heads, (size_t)(s->dk > s->dv ? s->dk : s->dv), &e) !=
            GEM_OK ||
        gem_mul_size(e, sizeof(double), &e) != GEM_OK)
        return GEM_ERR_OVERFLOW;
    return GEM_OK;
}

/* a * b for non-negative int64 operands, as uint64; 1 on overflow. */
static int mul_u64(uint64_t a, uint64_t b, uint64_t *r)
{
    if (a != 0 && b > UINT64_MAX / a)
        return 1;
    *r = a * b;
    return 0;
}

/* Checks one tensor of a view: arrangement and extent in bytes. */
static gem_status tensor_check(const void *p, gem_dtype t, int64_t hs, int64_t ts, int64_t heads,
                               int64_t cap, int64_t d, size_t *bytes)
{
    if (!p)
        return GEM_ERR_NULL;
    const size_t es = gem_dtype_size(t);
    if (es == 0)
        return GEM_ERR_PARAM;
    if (hs < 0 || ts < 0)
        return GEM_ERR_SHAPE;
    uint64_t span = 0;
    /* head-major: rows of a head d apart or more, heads at least a head's rows apart */
    const int head_major =
        (cap == 1 || ts >= d) &&
        (heads == 1 || (!mul_u64((uint64_t)cap, (uint64_t)ts, &span) && (uint64_t)hs >= span));
    /* token-major: heads of a token d apart or more, tokens at least a token's heads apart */
    const int token_major =
        (heads == 1 || hs >= d) &&
        (cap == 1 || (!mul_u64((uint64_t)heads, (uint64_t)hs, &span) && (uint64_t)ts >= span));
    if (!head_major && !token_major)
        return GEM_ERR_SHAPE; /* two rows would overlap */
    uint64_t a = 0, b = 0, elems = 0, total = 0;
    if (mul_u64((uint64_t)(heads - 1), (uint64_t)hs, &a) ||
        mul_u64((uint64_t)(cap - 1), (uint64_t)ts, &b) || a > UINT64_MAX - b ||
        a + b > UINT64_MAX - (uint64_t)d)
        return GEM_ERR_OVERFLOW;
    elems = a + b + (uint64_t)d;
    if (mul_u64(elems, (uint64_t)es, &total) || total > SIZE_MAX || total > (uint64_t)INT64_MAX)
        return GEM_ERR_OVERFLOW;
    if ((uintptr_t)p % es != 0)
        return GEM_ERR_ALIGN;
    if (bytes)
        *bytes = (size_t)total;
    return GEM_OK;
}

gem_status gem_kv_view_check(const gem_kv_view *kv, int64_t n_kv_heads, int64_t dk, int64_t dv,
                             size_t *k_bytes, size_t *v_bytes)
{
    if (!kv)
        return GEM_ERR_NULL;
    if (n_kv_heads < 1 || dk < 1 || dv < 1 || kv->live < 1 || kv->capacity < kv->live)
        return GEM_ERR_SHAPE;
    const gem_k_from_v *kfv = kv->k_from_v;
    gem_status st = GEM_OK;
    /* a scale exactly where a tensor holds FP8; K rebuilt from V takes V's */
    const int k_fp8 = kv->k_dtype == GEM_DTYPE_FP8_E4M3 && !kfv;
    if ((kv->k_scale != NULL) != k_fp8 ||
        (kv->v_scale != NULL) != (kv->v_dtype == GEM_DTYPE_FP8_E4M3))
        return GEM_ERR_PARAM;
    if ((uintptr_t)kv->k_scale % sizeof(float) != 0 ||
        (uintptr_t)kv->v_scale % sizeof(float) != 0)
        return GEM_ERR_ALIGN;
    if (kfv) {
        /* V alone: no K tensor, K rebuilt from V (gem_k_from_v) */
        if (kv->k || kv->k_head_stride != 0 || kv->k_token_stride != 0 || dk != dv)
            return GEM_ERR_SHAPE;
        if (kv->k_dtype != kv->v_dtype || !kfv->k_weight || kfv->half < 1 ||
            kfv->half > dk / 2 || kfv->n_pairs < 0 || kfv->n_pairs > kfv->half ||
            (kfv->n_pairs > 0 && !kfv->inv_freq) || kfv->pos0 < 0 ||
            kfv->pos0 > GEM_K_FROM_V_MAX_POS - kv->capacity)
            return GEM_ERR_PARAM;
        if ((uintptr_t)kfv->k_weight % sizeof(float) != 0)
            return GEM_ERR_ALIGN;
        if (k_bytes)
            *k_bytes = 0;
    } else {
        st = tensor_check(kv->k, kv->k_dtype, kv->k_head_stride, kv->k_token_stride, n_kv_heads,
                          kv->capacity, dk, k_bytes);
    }
    if (st == GEM_OK)
        st = tensor_check(kv->v, kv->v_dtype, kv->v_head_stride, kv->v_token_stride, n_kv_heads,
                          kv->capacity, dv, v_bytes);
    return st;
}

gem_status gem_kv_view_scales_check(const gem_kv_view *kv, int64_t n_kv_heads)
{
    if (!kv)
        return GEM_ERR_NULL;
    for (int which = 0; which < 2; which++) {
        const float *sc = which ? kv->v_scale : kv->k_scale;
        /* finite, > 0, and every element's value (|e| <= 448) finite in float */
        for (int64_t g = 0; sc && g < n_kv_heads; g++)
            if (!(sc[g] > 0.0f) || !(sc[g] <= FLT_MAX / 448.0f))
                return GEM_ERR_PARAM;
    }
    return GEM_OK;
}

double gem_kv_head_scale(const gem_kv_view *kv, int which, int64_t g)
{
    const float *sc = which || kv->k_from_v ? kv->v_scale : kv->k_scale;
    return sc ? (double)sc[g] : 1.0;
}

gem_status gem_k_from_v_check(const gem_k_from_v *kfv)
{
    if (!kfv)
        return GEM_ERR_NULL;
    for (int64_t j = 0; j < kfv->n_pairs; j++)
        if (!isfinite(kfv->inv_freq[j]) || !(kfv->inv_freq[j] >= 0.0))
            return GEM_ERR_PARAM;
    return GEM_OK;
}

void gem_k_from_v_row_f64(const gem_kv_view *kv, int64_t g, int64_t t, int64_t n, float *vrow,
                          double *dst)
{
    const gem_k_from_v *kfv = kv->k_from_v;
    gem_kv_row_f32(kv, 1, g, t, n, vrow);
    const double sv = gem_kv_head_scale(kv, 1, g); /* FP8 V: exact, 24 + 4 + 24 bits */
    for (int64_t i = 0; i < n; i++)
        dst[i] = (double)kfv->k_weight[i] * (double)vrow[i] * sv;
    const double pos = (double)(kfv->pos0 + t); /* exact: below 2^40 */
    for (int64_t j = 0; j < kfv->n_pairs; j++) {
        const double th = pos * kfv->inv_freq[j], c = cos(th), s = sin(th);
        const double a = dst[j], b = dst[j + kfv->half];
        dst[j] = a * c - b * s;
        dst[j + kfv->half] = a * s + b * c;
    }
}

gem_kv_view gem_kv_view_dense(const float *k, const float *v, int64_t dk, int64_t dv,
                              int64_t live, int64_t capacity)
{
    gem_kv_view kv;
    memset(&kv, 0, sizeof kv);
    kv.k = k;
    kv.v = v;
    kv.k_dtype = kv.v_dtype = GEM_DTYPE_F32;
    kv.k_head_stride = capacity * dk; /* wraps only for shapes gem_kv_view_check refuses */
    kv.k_token_stride = dk;
    kv.v_head_stride = capacity * dv;
    kv.v_token_stride = dv;
    kv.live = live;
    kv.capacity = capacity;
    return kv;
}

float gem_bf16_to_f32(uint16_t h)
{
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float gem_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h >> 15) << 31;
    const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    uint32_t bits;
    if (e == 0x1Fu) { /* infinity or NaN */
        bits = sign | 0x7F800000u | (m << 13);
    } else if (e != 0) { /* normal */
        bits = sign | ((e + 112u) << 23) | (m << 13);
    } else if (m == 0) { /* zero */
        bits = sign;
    } else { /* subnormal: m * 2^-24, exact in float */
        const float f = (float)m * 0x1p-24f;
        memcpy(&bits, &f, sizeof bits);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float gem_fp8_e4m3_to_f32(uint8_t b)
{
    const uint32_t sign = (uint32_t)(b >> 7) << 31;
    const uint32_t e = (b >> 3) & 0xFu, m = b & 0x7u;
    uint32_t bits;
    if ((b & 0x7Fu) == 0x7Fu) { /* NaN (E4M3FN has no infinities): the positive quiet NaN
                                 * for both codes, as every widening of the kernels gives */
        bits = 0x7FC00000u;
    } else if (e != 0) { /* normal: 2^(e - 7) (1 + m / 8) */
        bits = sign | ((e + 120u) << 23) | (m << 20);
    } else { /* zero or subnormal: m * 2^-9, exact in float */
        const float f = (float)m * 0x1p-9f;
        memcpy(&bits, &f, sizeof bits);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint8_t gem_f32_to_fp8_e4m3(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
    const uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) /* NaN */
        return (uint8_t)(sign | 0x7Fu);
    if (ax >= 0x43E00000u) /* >= 448 (infinity included): the largest finite, 448 */
        return (uint8_t)(sign | 0x7Eu);
    if (ax < 0x3C800000u) { /* below 2^-6, the smallest normal: m * 2^-9 */
        float a;
        memcpy(&a, &ax, sizeof a);
        return (uint8_t)(sign | (uint8_t)nearbyintf(a * 0x1p9f)); /* m = 8 is 2^-6's code */
    }
    /* normal: rebias the exponent, round the 20 dropped bits to nearest even */
    uint32_t c = ((ax >> 23) - 120u) << 3 | ((ax >> 20) & 0x7u);
    const uint32_t rest = ax & 0xFFFFFu;
    if (rest > 0x80000u || (rest == 0x80000u && (c & 1u)))
        c++;
    return (uint8_t)(sign | c); /* at most 0x7E: magnitudes from 448 on returned above */
}

float gem_kv_view_load(const gem_kv_view *kv, int which, int64_t g, int64_t t, int64_t i)
{
    if (!which && kv->k_from_v) {
        const gem_k_from_v *kfv = kv->k_from_v;
        const double a = (double)kfv->k_weight[i] * (double)gem_kv_view_load(kv, 1, g, t, i);
        const int64_t j = i < kfv->half ? i : i - kfv->half;
        if (i >= 2 * kfv->half || j >= kfv->n_pairs)
            return (float)a;
        const int64_t o = i < kfv->half ? i + kfv->half : j; /* the partner */
        const double b = (double)kfv->k_weight[o] * (double)gem_kv_view_load(kv, 1, g, t, o);
        const double th = (double)(kfv->pos0 + t) * kfv->inv_freq[j], c = cos(th), s = sin(th);
        return (float)(i < kfv->half ? a * c - b * s : b * s + a * c);
    }
    const void *base = which ? kv->v : kv->k;
    const gem_dtype dt = which ? kv->v_dtype : kv->k_dtype;
    const int64_t off = g * (which ? kv->v_head_stride : kv->k_head_stride) +
                        t * (which ? kv->v_token_stride : kv->k_token_stride) + i;
    switch (dt) {
    case GEM_DTYPE_BF16: return gem_bf16_to_f32(((const uint16_t *)base)[off]);
    case GEM_DTYPE_F16: return gem_f16_to_f32(((const uint16_t *)base)[off]);
    case GEM_DTYPE_FP8_E4M3:
        return (float)((double)gem_fp8_e4m3_to_f32(((const uint8_t *)base)[off]) *
                       gem_kv_head_scale(kv, which, g));
    default: return ((const float *)base)[off];
    }
}

uint16_t gem_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7F800000u) == 0x7F800000u && (x & 0x007FFFFFu))
        return (uint16_t)((x >> 16) | 0x0040u);
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

uint16_t gem_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) /* inf or NaN */
        return (uint16_t)(sign | 0x7C00u | (ax > 0x7F800000u ? 0x0200u : 0u));
    if (ax >= 0x477FF000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7C00u);
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        float a;
        memcpy(&a, &ax, sizeof a);
        /* a * 2^24 rounded to nearest even is the subnormal's mantissa (exact in float) */
        const float m = nearbyintf(a * 0x1p24f);
        return (uint16_t)(sign | (uint16_t)m);
    }
    /* normal: rebias the exponent, round the 13 dropped bits to nearest even */
    uint32_t h = ((ax - 0x38000000u) >> 13);
    const uint32_t rest = ax & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

void gem_kv_row_f32(const gem_kv_view *kv, int which, int64_t g, int64_t t, int64_t n,
                    float *dst)
{
    const gem_dtype dt = which ? kv->v_dtype : kv->k_dtype;
    const int64_t off = g * (which ? kv->v_head_stride : kv->k_head_stride) +
                        t * (which ? kv->v_token_stride : kv->k_token_stride);
    const void *base = which ? kv->v : kv->k;
    if (dt == GEM_DTYPE_F32) {
        memcpy(dst, (const float *)base + off, (size_t)n * sizeof(float));
        return;
    }
    if (dt == GEM_DTYPE_FP8_E4M3) {
        const uint8_t *b = (const uint8_t *)base + off;
        for (int64_t i = 0; i < n; i++)
            dst[i] = gem_fp8_e4m3_to_f32(b[i]);
        return;
    }
    const uint16_t *src = (const uint16_t *)base + off;
    if (dt == GEM_DTYPE_BF16)
        for (int64_t i = 0; i < n; i++)
            dst[i] = gem_bf16_to_f32(src[i]);
    else
        for (int64_t i = 0; i < n; i++)
            dst[i] = gem_f16_to_f32(src[i]);
}
