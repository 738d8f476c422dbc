/*
 * gem_engine: the measuring harness on top of the decode API. It holds the
 * inputs in the backend's memory (src/harness.h says how per backend), K and V
 * rounded to their element types, builds the KV view of the current rotation
 * copy, poisons output and workspace, calls gem_decode and times it; the CPU
 * oracles (reference, online) run on host copies.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gem/check.h"
#include "gem/engine.h"
#include "harness.h"
#include "kv_view.h"

#define MAX_COPIES 64
#define ONLINE_DEFAULT_PARTITIONS 32
#define BASELINE_DEFAULT_PARTITIONS 16

struct gem_engine {
    gem_backend backend;
    gem_decode_ctx *ctx;
    const gem_harness_ops *hx_ops;
    void *hx;                 /* harness state: timer (CPU), stream and events (CUDA) */
    int64_t threads;

    int loaded, ran;
    gem_attn_shape shape;
    size_t q_elems, k_elems, v_elems, out_elems;
    float *q;                 /* (n_q_heads, dk) in the backend's memory */
    gem_dtype kt, vt;         /* element types of K and V */
    void *k[MAX_COPIES];      /* each (n_kv_heads, capacity, dk) of kt in the backend's memory */
    void *v[MAX_COPIES];      /* each (n_kv_heads, capacity, dv) of vt */
    void *host_k, *host_v;    /* CUDA: host copies of k[0], v[0] (gem_engine_kv_host); NULL
                                 on the CPU, whose copy 0 is host memory */
    int64_t copies, next_copy;
    float *out;               /* (n_q_heads, dv) + GEM_GUARD_BYTES, backend memory */
    void *ws;                 /* workspace, backend memory */
    size_t ws_cap;
    /* CPU oracles only */
    double *ref_out;          /* (n_q_heads, dv) */
    float *host_out;          /* (n_q_heads, dv) + GEM_GUARD_BYTES: the oracles' output */
    int last_on_host;         /* the last run wrote host_out */
    double host_seconds;      /* the last gem_decode call's host time */
    /* gem_engine_load_k_from_v */
    int kfv_loaded, kfv_on;
    float *kw;                /* (dk) k_weight in the backend's memory */
    float *host_kw;           /* (dk) host copy */
    double *inv_freq;         /* (n_pairs) host */
    gem_k_from_v kfv_dev, kfv_host; /* the rotation with kw / host_kw */
    float *k_scale, *v_scale; /* (n_kv_heads) host: the FP8 tensors' scales, else NULL */
};

gem_status gem_engine_create(gem_backend backend, int64_t threads, gem_engine **out)
{
    if (!out)
        return GEM_ERR_NULL;
    *out = NULL;
    if ((unsigned)backend >= GEM_BACKEND_COUNT || threads < 0 || threads > 4096 ||
        (backend == GEM_BACKEND_CUDA && threads != 0))
        return GEM_ERR_PARAM;
    gem_engine *e = calloc(1, sizeof *e);
    if (!e)
        return GEM_ERR_NOMEM;
    e->backend = backend;
    e->hx_ops = backend == GEM_BACKEND_CPU ? &gem_harness_cpu_ops : &gem_harness_cuda_ops;
    gem_status st = gem_decode_ctx_create(backend, threads, &e->ctx);
    if (st == GEM_OK)
        st = e->hx_ops->open(&e->hx);
    if (st != GEM_OK) {
        gem_engine_destroy(e);
        return st;
    }
    e->threads = gem_decode_ctx_threads(e->ctx);
    *out = e;
    return GEM_OK;
}

static void free_inputs(gem_engine *e)
{
    const gem_harness_ops *o = e->hx_ops;
    o->free(e->q);
    e->q = NULL;
    for (int64_t i = 0; i < MAX_COPIES; i++) {
        o->free(e->k[i]);
        o->free(e->v[i]);
        e->k[i] = e->v[i] = NULL;
    }
    o->free(e->out);
    e->out = NULL;
    free(e->host_k);
    free(e->host_v);
    e->host_k = e->host_v = NULL;
    free(e->ref_out);
    e->ref_out = NULL;
    gem_guard_free(e->host_out);
    e->host_out = NULL;
    o->free(e->kw);
    e->kw = NULL;
    free(e->host_kw);
    free(e->inv_freq);
    e->host_kw = NULL;
    e->inv_freq = NULL;
    free(e->k_scale);
    free(e->v_scale);
    e->k_scale = e->v_scale = NULL;
    e->kfv_loaded = e->kfv_on = 0;
    e->loaded = e->ran = 0;
    e->copies = e->next_copy = 0;
}

void gem_engine_destroy(gem_engine *e)
{
    if (!e)
        return;
    free_inputs(e);
    if (e->ws)
        e->hx_ops->free(e->ws);
    if (e->hx)
        e->hx_ops->close(e->hx);
    gem_decode_ctx_destroy(e->ctx);
    free(e);
}

gem_backend gem_engine_backend(const gem_engine *e) { return e ? e->backend : GEM_BACKEND_COUNT; }
int64_t gem_engine_threads(const gem_engine *e) { return e ? e->threads : 0; }
const char *gem_engine_describe(const gem_engine *e)
{
    return e ? gem_decode_ctx_describe(e->ctx) : "no engine";
}
const gem_decode_ctx *gem_engine_ctx(const gem_engine *e) { return e ? e->ctx : NULL; }

/* A copy of n elements of `size` bytes from src (NULL: uninitialised) in the
 * backend's memory, with `guard` spare bytes after. */
static gem_status place(gem_engine *e, const void *src, size_t n, size_t size, size_t guard,
                        void **out)
{
    size_t bytes = 0, total = 0;
    gem_status st = gem_mul_size(n, size, &bytes);
    if (st == GEM_OK)
        st = gem_add_size(bytes, guard, &total);
    void *p = NULL;
    if (st == GEM_OK)
        st = e->hx_ops->alloc(total, &p);
    if (st == GEM_OK && src)
        st = e->hx_ops->upload(p, src, bytes);
    if (st != GEM_OK) {
        e->hx_ops->free(p);
        return st;
    }
    *out = p;
    return GEM_OK;
}

/* The n F32 elements of src rounded to type t (t not F32) in new host memory
 * (*out, free()); GEM_ERR_NONFINITE when an element of rows [0, live) of the
 * head-major (heads, capacity, d) tensor becomes infinite. */
static gem_status round_tensor(const float *src, size_t n, gem_dtype t, int64_t heads,
                               int64_t capacity, int64_t live, int64_t d, void **out)
{
    size_t bytes = 0;
    if (gem_mul_size(n, sizeof(uint16_t), &bytes) != GEM_OK)
        return GEM_ERR_OVERFLOW;
    uint16_t *h = malloc(bytes ? bytes : 1);
    if (!h)
        return GEM_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        h[i] = t == GEM_DTYPE_BF16 ? gem_f32_to_bf16(src[i]) : gem_f32_to_f16(src[i]);
    const uint16_t e = t == GEM_DTYPE_BF16 ? 0x7F80u : 0x7C00u; /* exponent all ones */
    uint32_t bad = 0;
    for (int64_t g = 0; g < heads; g++) /* n = heads * capacity * d: fits */
        for (size_t i = (size_t)(g * capacity * d); i < (size_t)((g * capacity + live) * d); i++)
            bad |= (uint32_t)((h[i] & e) == e);
    if (bad) {
        free(h);
        return GEM_ERR_NONFINITE;
    }
    *out = h;
    return GEM_OK;
}

/* The head-major (heads, capacity, d) F32 tensor src as FP8 E4M3 codes in new host memory
 * (*out, free()) with a scale per head in *scale (heads floats, free()): a head's scale is
 * the largest magnitude of its rows over 448 (1 for a head of zeros), rounded to float, and
 * each element is the code nearest x / scale (the quotient in float; saturating at 448).
 * src finite (checked by the caller). */
static gem_status round_fp8(const float *src, int64_t heads, int64_t capacity, int64_t d,
                            void **out, float **scale)
{
    const size_t per = (size_t)capacity * (size_t)d; /* heads * per fits: the tensor's size */
    const size_t n = per * (size_t)heads;
    uint8_t *b = malloc(n > 0 ? n : 1);
    float *sc = malloc((size_t)heads * sizeof(float));
    if (!b || !sc) {
        free(b);
        free(sc);
        return GEM_ERR_NOMEM;
    }
    for (int64_t g = 0; g < heads; g++) {
        const float *x = src + (size_t)g * per;
        float amax = 0.0f;
        for (size_t i = 0; i < per; i++)
            amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
        sc[g] = s > 0.0f ? s : FLT_MIN; /* a subnormal amax / 448 can round to 0 */
        for (size_t i = 0; i < per; i++)
            b[(size_t)g * per + i] = gem_f32_to_fp8_e4m3(x[i] / sc[g]);
    }
    *out = b;
    *scale = sc;
    return GEM_OK;
}

gem_status gem_engine_load(gem_engine *e, const gem_attn_shape *shape,
                           const gem_attn_inputs *in, int64_t copies)
{
    return gem_engine_load_kv(e, shape, in, GEM_DTYPE_F32, GEM_DTYPE_F32, copies);
}

gem_status gem_engine_load_kv(gem_engine *e, const gem_attn_shape *shape,
                              const gem_attn_inputs *in, gem_dtype k_dtype, gem_dtype v_dtype,
                              int64_t copies)
{
    if (!e || !shape || !in)
        return GEM_ERR_NULL;
    /* Whatever happens next, the earlier inputs are gone: a failed load must
     * not leave a caller running on them. */
    free_inputs(e);
    if (copies < 1 || copies > MAX_COPIES || gem_dtype_size(k_dtype) == 0 ||
        gem_dtype_size(v_dtype) == 0)
        return GEM_ERR_PARAM;
    size_t qe = 0, ke = 0, ve = 0, oe = 0, ref_bytes = 0;
    gem_status st = gem_attn_shape_elems(shape, &qe, &ke, &ve, &oe);
    if (st != GEM_OK)
        return st;
    static const float dummy_out[1]; /* gem_attn_check wants an output; the engine owns it */
    if ((st = gem_attn_check(shape, in, dummy_out, oe)) != GEM_OK ||
        (st = gem_attn_check_finite(shape, in)) != GEM_OK ||
        (st = gem_mul_size(oe, sizeof(double), &ref_bytes)) != GEM_OK)
        return st;
    /* K and V as the routes will read them: the caller's F32, or rounded */
    void *rk = NULL, *rv = NULL;
    const void *sk = in->k, *sv = in->v;
    if (k_dtype == GEM_DTYPE_FP8_E4M3 &&
        (st = round_fp8(in->k, shape->n_kv_heads, shape->capacity, shape->dk,
                        &rk, &e->k_scale)) != GEM_OK)
        goto fail;
    if (v_dtype == GEM_DTYPE_FP8_E4M3 &&
        (st = round_fp8(in->v, shape->n_kv_heads, shape->capacity, shape->dv,
                        &rv, &e->v_scale)) != GEM_OK)
        goto fail;
    if (k_dtype != GEM_DTYPE_F32 && k_dtype != GEM_DTYPE_FP8_E4M3 &&
        (st = round_tensor(in->k, ke, k_dtype, shape->n_kv_heads, shape->capacity, shape->live,
                           shape->dk, &rk)) != GEM_OK)
        goto fail;
    if (v_dtype != GEM_DTYPE_F32 && v_dtype != GEM_DTYPE_FP8_E4M3 &&
        (st = round_tensor(in->v, ve, v_dtype, shape->n_kv_heads, shape->capacity, shape->live,
                           shape->dv, &rv)) != GEM_OK)
        goto fail;
    if (rk)
        sk = rk;
    if (rv)
        sv = rv;
    void *q = NULL, *out = NULL;
    if ((st = place(e, in->q, qe, sizeof(float), 0, &q)) != GEM_OK)
        goto fail;
    e->q = q;
    if ((st = place(e, NULL, oe, sizeof(float), GEM_GUARD_BYTES, &out)) != GEM_OK)
        goto fail;
    e->out = out;
    for (int64_t c = 0; c < copies; c++)
        if ((st = place(e, sk, ke, gem_dtype_size(k_dtype), 0, &e->k[c])) != GEM_OK ||
            (st = place(e, sv, ve, gem_dtype_size(v_dtype), 0, &e->v[c])) != GEM_OK)
            goto fail;
    if (e->backend != GEM_BACKEND_CPU) {
        /* the host copy gem_engine_kv_host gives: the rounded tensors, or the F32 ones */
        e->host_k = rk ? (void *)rk : malloc(ke * sizeof(float)); /* ke * 4 fits: placed */
        e->host_v = rv ? (void *)rv : malloc(ve * sizeof(float));
        rk = rv = NULL;
        if (!e->host_k || !e->host_v) {
            st = GEM_ERR_NOMEM;
            goto fail;
        }
        if (k_dtype == GEM_DTYPE_F32)
            memcpy(e->host_k, in->k, ke * sizeof(float));
        if (v_dtype == GEM_DTYPE_F32)
            memcpy(e->host_v, in->v, ve * sizeof(float));
    }
    free(rk);
    free(rv);
    rk = rv = NULL;
    if (e->backend == GEM_BACKEND_CPU) {
        e->ref_out = malloc(ref_bytes);
        e->host_out = gem_guard_alloc(oe);
        if (!e->ref_out || !e->host_out) {
            st = GEM_ERR_NOMEM;
            goto fail;
        }
    }
    e->shape = *shape;
    e->kt = k_dtype;
    e->vt = v_dtype;
    e->q_elems = qe;
    e->k_elems = ke;
    e->v_elems = ve;
    e->out_elems = oe;
    e->copies = copies;
    e->next_copy = 0;
    e->loaded = 1;
    return GEM_OK;
fail:
    free(rk);
    free(rv);
    free_inputs(e);
    return st;
}

/* The view of copy `c` (in the backend's memory), or of the host copy (c = -1);
 * V alone with K rebuilt from it when gem_engine_select_k_from_v chose that. */
static gem_kv_view copy_view(const gem_engine *e, int64_t c)
{
    const gem_attn_shape *s = &e->shape;
    gem_kv_view kv = gem_kv_view_dense(NULL, NULL, s->dk, s->dv, s->live, s->capacity);
    kv.k = c >= 0 ? e->k[c] : (e->host_k ? e->host_k : e->k[0]);
    kv.v = c >= 0 ? e->v[c] : (e->host_v ? e->host_v : e->v[0]);
    kv.k_dtype = e->kt;
    kv.v_dtype = e->vt;
    kv.k_scale = e->k_scale;
    kv.v_scale = e->v_scale;
    if (e->kfv_on) {
        kv.k_scale = NULL; /* K rebuilt from V takes V's scale */
        kv.k = NULL;
        kv.k_head_stride = kv.k_token_stride = 0;
        kv.k_dtype = e->vt;
        kv.k_from_v = c >= 0 ? &e->kfv_dev : &e->kfv_host;
    }
    return kv;
}

gem_status gem_engine_load_k_from_v(gem_engine *e, const gem_attn_shape *shape,
                                    const gem_attn_inputs *in, gem_dtype v_dtype,
                                    const float *k_weight, const gem_k_from_v *rot,
                                    int64_t copies)
{
    if (!e || !shape || !in || !k_weight || !rot || !in->v)
        return GEM_ERR_NULL;
    free_inputs(e);
    gem_status st = gem_attn_shape_check(shape);
    if (st != GEM_OK)
        return st;
    if (shape->dk != shape->dv)
        return GEM_ERR_SHAPE;
    if (gem_dtype_size(v_dtype) == 0 || copies < 1 || copies > MAX_COPIES)
        return GEM_ERR_PARAM;
    size_t qe = 0, ke = 0, ve = 0;
    if ((st = gem_attn_shape_elems(shape, &qe, &ke, &ve, NULL)) != GEM_OK)
        return st;
    if (in->v_elems < ve || in->q_elems < qe || !in->q)
        return GEM_ERR_RANGE;
    for (int64_t i = 0; i < shape->dk; i++)
        if (!isfinite(k_weight[i]))
            return GEM_ERR_NONFINITE;
    /* the rotation, checked as a view of the caller's V would be */
    gem_k_from_v r = *rot;
    r.k_weight = k_weight;
    gem_kv_view hv = gem_kv_view_dense(NULL, in->v, shape->dk, shape->dv, shape->live,
                                       shape->capacity);
    hv.k_head_stride = hv.k_token_stride = 0;
    hv.k_from_v = &r;
    if ((st = gem_kv_view_check(&hv, shape->n_kv_heads, shape->dk, shape->dv, NULL, NULL)) !=
            GEM_OK ||
        (st = gem_k_from_v_check(&r)) != GEM_OK)
        return st;
    /* V as the routes will read it (rounded to v_dtype, as float), then K from it */
    float *vr = malloc(ve * sizeof(float)), *kb = malloc(ke * sizeof(float));
    double *krow = malloc((size_t)shape->dk * sizeof(double));
    float *tmp = malloc((size_t)shape->dk * sizeof(float));
    st = GEM_ERR_NOMEM;
    if (!vr || !kb || !krow || !tmp)
        goto out;
    if (v_dtype == GEM_DTYPE_FP8_E4M3) { /* the codes times their head's scale, as floats */
        void *codes = NULL;
        float *sc = NULL;
        if ((st = round_fp8(in->v, shape->n_kv_heads, shape->capacity, shape->dv, &codes,
                            &sc)) != GEM_OK)
            goto out;
        const size_t per = (size_t)shape->capacity * (size_t)shape->dv;
        for (size_t i = 0; i < ve; i++)
            vr[i] = gem_fp8_e4m3_to_f32(((const uint8_t *)codes)[i]) * sc[i / per];
        free(codes);
        free(sc);
    } else {
        for (size_t i = 0; i < ve; i++)
            vr[i] = v_dtype == GEM_DTYPE_BF16  ? gem_bf16_to_f32(gem_f32_to_bf16(in->v[i]))
                    : v_dtype == GEM_DTYPE_F16 ? gem_f16_to_f32(gem_f32_to_f16(in->v[i]))
                                               : in->v[i];
    }
    hv.v = vr;
    for (int64_t g = 0; g < shape->n_kv_heads; g++)
        for (int64_t t = 0; t < shape->capacity; t++) {
            gem_k_from_v_row_f64(&hv, g, t, shape->dk, tmp, krow);
            float *dst = kb + (size_t)(g * shape->capacity + t) * (size_t)shape->dk;
            for (int64_t i = 0; i < shape->dk; i++)
                dst[i] = (float)krow[i];
        }
    const gem_attn_inputs built = {in->q, kb, vr, qe, ke, ve};
    if ((st = gem_engine_load_kv(e, shape, &built, v_dtype, v_dtype, copies)) != GEM_OK)
        goto out;
    st = GEM_ERR_NOMEM;
    e->host_kw = malloc((size_t)shape->dk * sizeof(float));
    e->inv_freq = malloc((size_t)(r.n_pairs > 0 ? r.n_pairs : 1) * sizeof(double));
    if (!e->host_kw || !e->inv_freq)
        goto fail;
    memcpy(e->host_kw, k_weight, (size_t)shape->dk * sizeof(float));
    if (r.n_pairs > 0)
        memcpy(e->inv_freq, r.inv_freq, (size_t)r.n_pairs * sizeof(double));
    void *kw = NULL;
    if ((st = place(e, k_weight, (size_t)shape->dk, sizeof(float), 0, &kw)) != GEM_OK)
        goto fail;
    e->kw = kw;
    e->kfv_host = r;
    e->kfv_host.k_weight = e->host_kw;
    e->kfv_host.inv_freq = e->inv_freq;
    e->kfv_dev = e->kfv_host;
    e->kfv_dev.k_weight = e->kw;
    e->kfv_loaded = 1;
    e->kfv_on = 0;
    st = GEM_OK;
    goto out;
fail:
    free_inputs(e);
out:
    free(vr);
    free(kb);
    free(krow);
    free(tmp);
    return st;
}

gem_status gem_engine_select_k_from_v(gem_engine *e, int on)
{
    if (!e)
        return GEM_ERR_NULL;
    if (on != 0 && on != 1)
        return GEM_ERR_PARAM;
    if (on && !e->kfv_loaded)
        return GEM_ERR_STATE;
    e->kfv_on = on;
    return GEM_OK;
}

gem_status gem_engine_kv_host(const gem_engine *e, gem_kv_view *out)
{
    if (!e || !out)
        return GEM_ERR_NULL;
    if (!e->loaded)
        return GEM_ERR_STATE;
    *out = copy_view(e, -1);
    return GEM_OK;
}

gem_status gem_engine_resolve(const gem_engine *e, gem_route route,
                              const gem_route_params *params, gem_route_params *out)
{
    if (!e || !out)
        return GEM_ERR_NULL;
    if ((unsigned)route >= GEM_ROUTE_COUNT)
        return GEM_ERR_PARAM;
    if (!e->loaded)
        return GEM_ERR_STATE;
    gem_route_params p = {0, 0};
    if (params)
        p = *params;
    if (p.partitions < 0 || p.partitions > GEM_DECODE_MAX_PARTITIONS || p.tile < 0 ||
        p.tile > GEM_DECODE_MAX_TILE)
        return GEM_ERR_PARAM;
    switch (route) {
    case GEM_ROUTE_REFERENCE:
        if (p.partitions || p.tile)
            return GEM_ERR_PARAM; /* the reference has neither */
        break;
    case GEM_ROUTE_ONLINE:
        if (p.tile)
            return GEM_ERR_PARAM;
        if (!p.partitions)
            p.partitions = ONLINE_DEFAULT_PARTITIONS;
        break;
    case GEM_ROUTE_BASELINE:
        if (p.tile)
            return GEM_ERR_PARAM;
        if (!p.partitions)
            p.partitions = BASELINE_DEFAULT_PARTITIONS;
        break;
    default: {
        gem_decode_config def;
        const gem_decode_shape ds = {e->shape.n_q_heads, e->shape.n_kv_heads, e->shape.dk,
                                     e->shape.dv, e->shape.scale};
        const gem_kv_view kv = copy_view(e, -1); /* the loaded view: its dtypes, live, K = V */
        gem_status st = gem_decode_config_for_view(e->ctx, &ds, &kv, &def);
        if (st != GEM_OK)
            return st;
        if (!p.partitions)
            p.partitions = def.partitions;
        if (!p.tile)
            p.tile = def.tile;
        break;
    }
    }
    *out = p;
    return GEM_OK;
}

static gem_decode_shape decode_shape(const gem_attn_shape *s)
{
    const gem_decode_shape d = {s->n_q_heads, s->n_kv_heads, s->dk, s->dv, s->scale};
    return d;
}

gem_status gem_engine_scratch_bytes(const gem_engine *e, gem_route route,
                                    const gem_route_params *params, size_t *bytes)
{
    if (!e || !bytes)
        return GEM_ERR_NULL;
    gem_route_params p;
    gem_status st = gem_engine_resolve(e, route, params, &p);
    if (st != GEM_OK)
        return st;
    if (route != GEM_ROUTE_FUSED && route != GEM_ROUTE_BASELINE) {
        *bytes = 0;
        return GEM_OK;
    }
    const gem_decode_shape ds = decode_shape(&e->shape);
    const gem_decode_config cfg = {route, p.partitions, p.tile};
    return gem_decode_workspace_bytes(e->ctx, &ds, e->shape.live, &cfg, bytes);
}

/* Grows the workspace to `bytes` (outside any timed region). */
static gem_status ensure_workspace(gem_engine *e, size_t bytes)
{
    if (bytes <= e->ws_cap && e->ws)
        return GEM_OK;
    if (e->ws)
        e->hx_ops->free(e->ws);
    e->ws = NULL;
    e->ws_cap = 0;
    gem_status st = e->hx_ops->alloc(bytes ? bytes : 64, &e->ws);
    if (st == GEM_OK)
        e->ws_cap = bytes;
    return st;
}

/* The CPU oracles, on the host copies (the CPU backend's memory is host memory). */
static gem_status run_oracle(gem_engine *e, gem_route route, const gem_route_params *p,
                             int64_t copy, double *seconds)
{
    if (e->backend != GEM_BACKEND_CPU)
        return GEM_ERR_UNSUPPORTED; /* the oracles run on the CPU only */
    if (route == GEM_ROUTE_ONLINE &&
        (e->kt != GEM_DTYPE_F32 || e->vt != GEM_DTYPE_F32 || e->kfv_on))
        return GEM_ERR_UNSUPPORTED; /* the float oracle takes F32 K and V tensors */
    const gem_kv_view kv = copy_view(e, copy);
    const gem_decode_shape ds = {e->shape.n_q_heads, e->shape.n_kv_heads, e->shape.dk,
                                 e->shape.dv, e->shape.scale};
    const gem_attn_inputs in = {e->q, kv.k, kv.v, e->q_elems, e->k_elems, e->v_elems};
    gem_guard_poison(e->host_out, e->out_elems);
    e->last_on_host = 1;
    e->ran = 1;
    gem_status st = e->hx_ops->timer_start(e->hx);
    if (st != GEM_OK)
        return st;
    if (route == GEM_ROUTE_REFERENCE) {
        st = gem_attn_reference_kv(&ds, e->q, &kv, e->ref_out, e->out_elems);
        if (st == GEM_OK)
            for (size_t i = 0; i < e->out_elems; i++)
                e->host_out[i] = (float)e->ref_out[i];
    } else {
        st = gem_attn_online(&e->shape, &in, p->partitions, e->host_out, e->out_elems);
    }
    double t = 0;
    gem_status st2 = e->hx_ops->timer_stop(e->hx, &t);
    if (st == GEM_OK)
        st = st2;
    if (st == GEM_OK && seconds)
        *seconds = t;
    return st;
}

gem_status gem_engine_run(gem_engine *e, gem_route route, const gem_route_params *params,
                          double *seconds)
{
    return gem_engine_run_calls(e, route, params, 1, seconds);
}

gem_status gem_engine_run_calls(gem_engine *e, gem_route route, const gem_route_params *params,
                                int64_t calls, double *seconds)
{
    if (!e)
        return GEM_ERR_NULL;
    if (calls < 1 || calls > GEM_ENGINE_MAX_CALLS ||
        (calls > 1 && (route == GEM_ROUTE_REFERENCE || route == GEM_ROUTE_ONLINE)))
        return GEM_ERR_PARAM;
    gem_route_params p;
    gem_status st = gem_engine_resolve(e, route, params, &p);
    if (st != GEM_OK)
        return st;
    if (route == GEM_ROUTE_REFERENCE || route == GEM_ROUTE_ONLINE) {
        const int64_t copy = e->next_copy;
        e->next_copy = (e->next_copy + 1) % e->copies;
        return run_oracle(e, route, &p, copy, seconds);
    }

    const gem_decode_shape ds = decode_shape(&e->shape);
    const gem_decode_config cfg = {route, p.partitions, p.tile};
    size_t ws_bytes = 0;
    if ((st = gem_decode_workspace_bytes(e->ctx, &ds, e->shape.live, &cfg, &ws_bytes)) != GEM_OK ||
        (st = ensure_workspace(e, ws_bytes)) != GEM_OK)
        return st;
    /* poison output, guard and workspace; none of it is timed */
    if ((st = e->hx_ops->poison(e->hx, e->out, e->out_elems, GEM_POISON_BITS, GEM_GUARD_BYTES)) !=
            GEM_OK ||
        (st = e->hx_ops->poison(e->hx, e->ws, ws_bytes / sizeof(float), GEM_POISON_BITS, 0)) !=
            GEM_OK)
        return st;
    e->last_on_host = 0;
    e->ran = 1; /* an output exists (poisoned until the route writes it) */
    if ((st = e->hx_ops->timer_start(e->hx)) != GEM_OK)
        return st;
    struct timespec h0, h1;
    clock_gettime(CLOCK_MONOTONIC, &h0);
    gem_status run = GEM_OK;
    for (int64_t c = 0; c < calls && run == GEM_OK; c++) { /* back to back, the next copy each */
        const gem_kv_view kv = copy_view(e, e->next_copy);
        e->next_copy = (e->next_copy + 1) % e->copies;
        run = gem_decode(e->ctx, &ds, e->q, &kv, e->out, e->ws, ws_bytes, &cfg,
                         e->hx_ops->stream(e->hx));
    }
    clock_gettime(CLOCK_MONOTONIC, &h1);
    e->host_seconds =
        ((double)(h1.tv_sec - h0.tv_sec) + 1e-9 * (double)(h1.tv_nsec - h0.tv_nsec)) /
        (double)calls;
    double t = 0;
    st = e->hx_ops->timer_stop(e->hx, &t); /* waits for the stream even after a failed launch */
    if (run != GEM_OK)
        return run;
    if (st == GEM_OK && seconds)
        *seconds = t / (double)calls;
    return st;
}

double gem_engine_last_host_seconds(const gem_engine *e)
{
    return e && !e->last_on_host ? e->host_seconds : 0.0;
}

gem_status gem_engine_output(gem_engine *e, float *out, size_t out_elems,
                             gem_output_audit *audit)
{
    if (!e || !out || !audit)
        return GEM_ERR_NULL;
    if (!e->loaded || !e->ran)
        return GEM_ERR_STATE;
    if (out_elems < e->out_elems)
        return GEM_ERR_RANGE;
    if (e->last_on_host) {
        gem_guard_check(e->host_out, e->out_elems, &audit->unwritten, &audit->guard_ok);
        memcpy(out, e->host_out, e->out_elems * sizeof(float));
        return GEM_OK;
    }
    float *host = gem_guard_alloc(e->out_elems);
    if (!host)
        return GEM_ERR_NOMEM;
    gem_status st =
        e->hx_ops->download(host, e->out, e->out_elems * sizeof(float) + GEM_GUARD_BYTES);
    if (st == GEM_OK) {
        /* the guard was written with the same 0xA5 bytes gem_guard_check expects */
        gem_guard_check(host, e->out_elems, &audit->unwritten, &audit->guard_ok);
        memcpy(out, host, e->out_elems * sizeof(float));
    }
    gem_guard_free(host);
    return st;
}

gem_status gem_engine_read_bandwidth(gem_engine *e, size_t bytes, int64_t reps,
                                     double *bytes_per_second)
{
    if (!e || !bytes_per_second)
        return GEM_ERR_NULL;
    if (bytes < ((size_t)1 << 20) || reps < 1 || reps > 10000)
        return GEM_ERR_PARAM;
    return e->hx_ops->read_bandwidth(e->hx, e->threads, bytes, reps, bytes_per_second);
}

gem_status gem_engine_copy_bandwidth(gem_engine *e, size_t bytes, int64_t reps,
                                     double *bytes_per_second)
{
    if (!e || !bytes_per_second)
        return GEM_ERR_NULL;
    if (e->backend != GEM_BACKEND_CUDA)
        return GEM_ERR_UNSUPPORTED;
    if (bytes < ((size_t)1 << 20) || reps < 1 || reps > 10000)
        return GEM_ERR_PARAM;
    return gem_harness_cuda_copy_bandwidth(bytes, reps, bytes_per_second);
}

gem_status gem_engine_nominal_bandwidth(gem_engine *e, double *bytes_per_second)
{
    if (!e || !bytes_per_second)
        return GEM_ERR_NULL;
    if (e->backend != GEM_BACKEND_CUDA)
        return GEM_ERR_UNSUPPORTED;
    return gem_harness_cuda_nominal_bandwidth(bytes_per_second);
}
