/*
 * The core of gem: status messages, checked sizes, shape and buffer
 * validation, and route/backend names.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gem/attn.h"

static const struct {
    const char *name;
    const char *message;
} status_text[GEM_STATUS_COUNT] = {
    [GEM_OK] = {"ok", "success"},
    [GEM_ERR_NULL] = {"null", "a required pointer is NULL"},
    [GEM_ERR_SHAPE] = {"shape",
                       "invalid shape: sizes must be >= 1, n_q_heads divisible by n_kv_heads, "
                       "1 <= live <= capacity, scale finite"},
    [GEM_ERR_RANGE] = {"range", "a range or buffer is too short for the shape"},
    [GEM_ERR_OVERFLOW] = {"overflow", "size arithmetic overflows"},
    [GEM_ERR_STATE] = {"state", "invalid online-softmax state"},
    [GEM_ERR_NONFINITE] = {"nonfinite", "an input holds NaN or infinity"},
    [GEM_ERR_ALIGN] = {"align", "a buffer is not aligned as required"},
    [GEM_ERR_NOMEM] = {"nomem", "out of memory"},
    [GEM_ERR_PARAM] = {"param", "invalid parameter"},
    [GEM_ERR_UNSUPPORTED] = {"unsupported", "the route or backend does not support this shape"},
    [GEM_ERR_NO_DEVICE] = {"no_device", "no CUDA device available (or built without CUDA)"},
    [GEM_ERR_DEVICE] = {"device", "a CUDA runtime call failed"},
    [GEM_ERR_IO] = {"io", "a file could not be read or written"},
    [GEM_ERR_FORMAT] = {"format", "malformed input file"},
    [GEM_ERR_OVERLAP] = {"overlap", "an output overlaps an input, the cache or the workspace"},
    [GEM_ERR_MEMSPACE] = {"memspace",
                          "a pointer is not in the backend's memory (host vs device, or another "
                          "device)"},
    [GEM_ERR_SCORE] = {"score",
                       "a score scale * q.k overflows float although every input is finite"},
};

const char *gem_status_str(gem_status s)
{
    if ((unsigned)s >= GEM_STATUS_COUNT)
        return "unknown status";
    return status_text[s].message;
}

const char *gem_status_name(gem_status s)
{
    if ((unsigned)s >= GEM_STATUS_COUNT)
        return "unknown";
    return status_text[s].name;
}

gem_status gem_mul_size(size_t a, size_t b, size_t *r)
{
    if (!r)
        return GEM_ERR_NULL;
    if (a != 0 && b > SIZE_MAX / a)
        return GEM_ERR_OVERFLOW;
    *r = a * b;
    return GEM_OK;
}

gem_status gem_add_size(size_t a, size_t b, size_t *r)
{
    if (!r)
        return GEM_ERR_NULL;
    if (b > SIZE_MAX - a)
        return GEM_ERR_OVERFLOW;
    *r = a + b;
    return GEM_OK;
}

/* a*b*c as size_t, all operands already known to be >= 0. */
static gem_status mul3(int64_t a, int64_t b, int64_t c, size_t *r)
{
    size_t t;
    if ((uint64_t)a > SIZE_MAX || (uint64_t)b > SIZE_MAX || (uint64_t)c > SIZE_MAX)
        return GEM_ERR_OVERFLOW;
    gem_status st = gem_mul_size((size_t)a, (size_t)b, &t);
    if (st != GEM_OK)
        return st;
    return gem_mul_size(t, (size_t)c, r);
}

gem_status gem_attn_shape_elems(const gem_attn_shape *s, size_t *q_elems, size_t *k_elems,
                                size_t *v_elems, size_t *out_elems)
{
    if (!s)
        return GEM_ERR_NULL;
    if (s->n_q_heads < 1 || s->n_kv_heads < 1 || s->dk < 1 || s->dv < 1 || s->capacity < 1 ||
        s->live < 1 || s->live > s->capacity || s->n_q_heads % s->n_kv_heads != 0 ||
        !isfinite(s->scale))
        return GEM_ERR_SHAPE;
    size_t q, k, v, o;
    gem_status st;
    if ((st = mul3(s->n_q_heads, s->dk, 1, &q)) != GEM_OK ||
        (st = mul3(s->n_kv_heads, s->capacity, s->dk, &k)) != GEM_OK ||
        (st = mul3(s->n_kv_heads, s->capacity, s->dv, &v)) != GEM_OK ||
        (st = mul3(s->n_q_heads, s->dv, 1, &o)) != GEM_OK)
        return st;
    /* Byte sizes must fit too: every element count times sizeof(double). */
    size_t bytes;
    if ((st = gem_mul_size(k, sizeof(double), &bytes)) != GEM_OK ||
        (st = gem_mul_size(v, sizeof(double), &bytes)) != GEM_OK ||
        (st = gem_mul_size(q, sizeof(double), &bytes)) != GEM_OK ||
        (st = gem_mul_size(o, sizeof(double), &bytes)) != GEM_OK)
        return st;
    if (q_elems)
        *q_elems = q;
    if (k_elems)
        *k_elems = k;
    if (v_elems)
        *v_elems = v;
    if (out_elems)
        *out_elems = o;
    return GEM_OK;
}

gem_status gem_attn_shape_check(const gem_attn_shape *shape)
{
    return gem_attn_shape_elems(shape, NULL, NULL, NULL, NULL);
}

static int misaligned(const void *p) { return ((uintptr_t)p % sizeof(float)) != 0; }

gem_status gem_attn_check(const gem_attn_shape *shape, const gem_attn_inputs *in,
                          const void *out, size_t out_elems)
{
    if (!shape || !in || !out || !in->q || !in->k || !in->v)
        return GEM_ERR_NULL;
    size_t q, k, v, o;
    gem_status st = gem_attn_shape_elems(shape, &q, &k, &v, &o);
    if (st != GEM_OK)
        return st;
    if (misaligned(in->q) || misaligned(in->k) || misaligned(in->v) || misaligned(out))
        return GEM_ERR_ALIGN;
    if (in->q_elems < q || in->k_elems < k || in->v_elems < v || out_elems < o)
        return GEM_ERR_RANGE;
    return GEM_OK;
}

static int all_finite(const float *p, size_t n)
{
    /* A float is NaN or infinite exactly when its exponent bits are all ones.
     * An integer OR-reduction vectorizes without relaxing float semantics. */
    const uint32_t exp_mask = 0x7F800000u;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, p + i, sizeof bits);
        bad |= (uint32_t)((bits & exp_mask) == exp_mask);
    }
    return bad == 0;
}

gem_status gem_attn_check_finite(const gem_attn_shape *s, const gem_attn_inputs *in)
{
    if (!s || !in || !in->q || !in->k || !in->v)
        return GEM_ERR_NULL;
    size_t q;
    gem_status st = gem_attn_shape_elems(s, &q, NULL, NULL, NULL);
    if (st != GEM_OK)
        return st;
    if (!all_finite(in->q, q))
        return GEM_ERR_NONFINITE;
    size_t krows = (size_t)s->live * (size_t)s->dk; /* fits: checked via k_elems */
    size_t vrows = (size_t)s->live * (size_t)s->dv;
    for (int64_t h = 0; h < s->n_kv_heads; h++) {
        size_t hk = (size_t)h * (size_t)s->capacity * (size_t)s->dk;
        size_t hv = (size_t)h * (size_t)s->capacity * (size_t)s->dv;
        if (!all_finite(in->k + hk, krows) || !all_finite(in->v + hv, vrows))
            return GEM_ERR_NONFINITE;
    }
    return GEM_OK;
}

static const char *const route_names[GEM_ROUTE_COUNT] = {"reference", "online", "baseline",
                                                         "fused"};
static const char *const backend_names[GEM_BACKEND_COUNT] = {"cpu", "cuda"};

const char *gem_route_name(gem_route r)
{
    return (unsigned)r < GEM_ROUTE_COUNT ? route_names[r] : NULL;
}

const char *gem_backend_name(gem_backend b)
{
    return (unsigned)b < GEM_BACKEND_COUNT ? backend_names[b] : NULL;
}

gem_status gem_route_parse(const char *name, gem_route *out)
{
    if (!name || !out)
        return GEM_ERR_NULL;
    for (int i = 0; i < GEM_ROUTE_COUNT; i++)
        if (!strcmp(name, route_names[i])) {
            *out = (gem_route)i;
            return GEM_OK;
        }
    return GEM_ERR_PARAM;
}

gem_status gem_backend_parse(const char *name, gem_backend *out)
{
    if (!name || !out)
        return GEM_ERR_NULL;
    for (int i = 0; i < GEM_BACKEND_COUNT; i++)
        if (!strcmp(name, backend_names[i])) {
            *out = (gem_backend)i;
            return GEM_OK;
        }
    return GEM_ERR_PARAM;
}
