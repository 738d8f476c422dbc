/*
 * gem/decode.h: the checks every backend shares, then dispatch to the
 * backend's ops (src/decode_internal.h).
 *
 * Check order (so gem_decode and gem_decode_validate answer the same status
 * for the same arguments): pointers, shape, view, config, support, the
 * backend's stream / alignment / memory-space rules, workspace size, overlaps.
 */
#include <stdlib.h>
#include <string.h>

#include "decode_internal.h"
#include "decode_stage_clock.h"

struct gem_decode_ctx {
    gem_backend backend;
    const gem_decode_backend_ops *ops;
    void *impl;
};

static const gem_decode_backend_ops *ops_for(gem_backend b)
{
    switch (b) {
    case GEM_BACKEND_CPU: return &gem_cpu_decode_ops;
    case GEM_BACKEND_CUDA: return &gem_cuda_decode_ops;
    default: return NULL;
    }
}

gem_status gem_decode_ctx_create(gem_backend backend, int64_t threads, gem_decode_ctx **out)
{
    if (!out)
        return GEM_ERR_NULL;
    *out = NULL;
    const gem_decode_backend_ops *ops = ops_for(backend);
    if (!ops || threads < 0 || threads > 4096 || (backend == GEM_BACKEND_CUDA && threads != 0))
        return GEM_ERR_PARAM;
    gem_decode_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return GEM_ERR_NOMEM;
    c->backend = backend;
    c->ops = ops;
    gem_status st = ops->create(threads, &c->impl);
    if (st != GEM_OK) {
        free(c);
        return st;
    }
    *out = c;
    return GEM_OK;
}

void gem_decode_ctx_destroy(gem_decode_ctx *ctx)
{
    if (!ctx)
        return;
    ctx->ops->destroy(ctx->impl);
    free(ctx);
}

gem_backend gem_decode_ctx_backend(const gem_decode_ctx *ctx) { return ctx->backend; }
cpu_pool *gem_decode_ctx_cpu_pool(gem_decode_ctx *ctx)
{
    return ctx->backend == GEM_BACKEND_CPU ? gem_cpu_decode_pool(ctx->impl) : NULL;
}

int64_t gem_decode_ctx_threads(const gem_decode_ctx *ctx) { return ctx->ops->threads(ctx->impl); }
int gem_decode_ctx_device(const gem_decode_ctx *ctx) { return ctx->ops->device(ctx->impl); }
const char *gem_decode_ctx_describe(const gem_decode_ctx *ctx)
{
    return ctx->ops->describe(ctx->impl);
}

gem_status gem_decode_supports_route(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                                     gem_dtype k_dtype, gem_dtype v_dtype, gem_route route)
{
    if (!ctx || !shape)
        return GEM_ERR_NULL;
    gem_status st = gem_decode_shape_check(shape);
    if (st != GEM_OK)
        return st;
    if (gem_dtype_size(k_dtype) == 0 || gem_dtype_size(v_dtype) == 0 ||
        (route != GEM_ROUTE_FUSED && route != GEM_ROUTE_BASELINE))
        return GEM_ERR_PARAM;
    return ctx->ops->supports(ctx->impl, shape, k_dtype, v_dtype, route);
}

gem_status gem_decode_supports(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                               gem_dtype k_dtype, gem_dtype v_dtype)
{
    return gem_decode_supports_route(ctx, shape, k_dtype, v_dtype, GEM_ROUTE_FUSED);
}

gem_status gem_decode_supports_k_from_v(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                                       gem_dtype v_dtype, const gem_k_from_v *kfv)
{
    if (!ctx || !shape || !kfv)
        return GEM_ERR_NULL;
    gem_status st = gem_decode_shape_check(shape);
    if (st != GEM_OK)
        return st;
    if (shape->dk != shape->dv)
        return GEM_ERR_SHAPE;
    if (gem_dtype_size(v_dtype) == 0 || kfv->half < 1 || kfv->half > shape->dk / 2 ||
        kfv->n_pairs < 0 || kfv->n_pairs > kfv->half)
        return GEM_ERR_PARAM;
    st = ctx->ops->supports(ctx->impl, shape, v_dtype, v_dtype, GEM_ROUTE_FUSED);
    if (st != GEM_OK)
        return st;
    return ctx->ops->k_from_v_supports(ctx->impl, shape, v_dtype, kfv);
}

gem_status gem_decode_config_default(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                                     int64_t live, gem_decode_config *out)
{
    if (!ctx || !shape || !out)
        return GEM_ERR_NULL;
    gem_status st = gem_decode_shape_check(shape);
    if (st != GEM_OK)
        return st;
    if (live < 1)
        return GEM_ERR_SHAPE;
    gem_decode_config c;
    ctx->ops->config_default(ctx->impl, shape, live, &c);
    *out = c;
    return GEM_OK;
}

/* The default at live, its partitions those of the view where the backend's default depends on
 * it (kv NULL: the view-blind default; else a view gem_kv_view_check passed, live its live). */
static void default_config(const gem_decode_ctx *ctx, const gem_decode_shape *shape, int64_t live,
                           const gem_kv_view *kv, gem_decode_config *out)
{
    ctx->ops->config_default(ctx->impl, shape, live, out);
    if (kv && ctx->ops->view_partitions) {
        const int64_t p = ctx->ops->view_partitions(ctx->impl, shape, kv, out->partitions);
        if (p >= 1 && p <= out->partitions) /* never more: the default's workspace fits */
            out->partitions = p;
    }
}

gem_status gem_decode_config_for_view(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                                      const gem_kv_view *kv, gem_decode_config *out)
{
    if (!ctx || !shape || !kv || !out)
        return GEM_ERR_NULL;
    gem_status st = gem_decode_shape_check(shape);
    if (st != GEM_OK)
        return st;
    st = gem_kv_view_check(kv, shape->n_kv_heads, shape->dk, shape->dv, NULL, NULL);
    if (st == GEM_OK)
        st = gem_kv_view_scales_check(kv, shape->n_kv_heads);
    if (st == GEM_OK && kv->k_from_v)
        st = gem_k_from_v_check(kv->k_from_v);
    if (st != GEM_OK)
        return st;
    gem_decode_config c;
    default_config(ctx, shape, kv->live, kv, &c);
    *out = c;
    return GEM_OK;
}

/* cfg (NULL = default) with every zero field replaced by the default (of the view kv, NULL for
 * the view-blind one), then checked against the API's bounds and the backend's kernels. */
static gem_status resolve_config(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                                 int64_t live, const gem_kv_view *kv,
                                 const gem_decode_config *cfg, gem_decode_config *out)
{
    gem_decode_config def;
    default_config(ctx, shape, live, kv, &def);
    if (!cfg) {
        *out = def;
        return GEM_OK;
    }
    gem_decode_config c = *cfg;
    if (c.partitions < 0 || c.partitions > GEM_DECODE_MAX_PARTITIONS || c.tile < 0)
        return GEM_ERR_PARAM;
    if (c.route == GEM_ROUTE_FUSED) {
        if (c.partitions == 0)
            c.partitions = def.partitions;
        if (c.tile == 0)
            c.tile = def.tile;
        if (c.tile > GEM_DECODE_MAX_TILE)
            return GEM_ERR_PARAM;
    } else if (c.route == GEM_ROUTE_BASELINE) {
        if (c.partitions == 0)
            c.partitions = GEM_BASELINE_DEFAULT_PARTITIONS;
        if (c.tile != 0)
            return GEM_ERR_PARAM; /* the baseline has no tile */
    } else {
        return GEM_ERR_PARAM; /* reference and online are oracles, not decode routes */
    }
    gem_status st = ctx->ops->config_check(ctx->impl, &c);
    if (st != GEM_OK)
        return st;
    *out = c;
    return GEM_OK;
}

gem_status gem_decode_workspace_bytes(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                                      int64_t live, const gem_decode_config *cfg, size_t *bytes)
{
    if (!ctx || !shape || !bytes)
        return GEM_ERR_NULL;
    gem_status st = gem_decode_shape_check(shape);
    if (st != GEM_OK)
        return st;
    if (live < 1)
        return GEM_ERR_SHAPE;
    gem_decode_config c;
    st = resolve_config(ctx, shape, live, NULL, cfg, &c);
    if (st != GEM_OK)
        return st;
    return ctx->ops->workspace_bytes(ctx->impl, shape, live, &c, bytes);
}

gem_status gem_decode_workspace_alloc(const gem_decode_ctx *ctx, size_t bytes, void **out)
{
    if (!out)
        return GEM_ERR_NULL;
    *out = NULL;
    if (!ctx)
        return GEM_ERR_NULL;
    if (bytes == 0)
        return GEM_ERR_PARAM;
    return ctx->ops->workspace_alloc(ctx->impl, bytes, out);
}

void gem_decode_workspace_free(const gem_decode_ctx *ctx, void *p)
{
    if (ctx && p)
        ctx->ops->workspace_free(ctx->impl, p);
}

/* 1 when [a, a + an) and [b, b + bn) share a byte. */
static int overlaps(const void *a, size_t an, const void *b, size_t bn)
{
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    if (an == 0 || bn == 0)
        return 0;
    return x < y ? y - x < an : x - y < bn;
}

/* The shared checks; fills *a for the backend. */
static gem_status validate(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                           const float *q, const gem_kv_view *kv, const float *out,
                           const void *workspace, size_t workspace_bytes,
                           const gem_decode_config *cfg, const void *stream, int state,
                           gem_decode_args *a)
{
    if (!ctx || !shape || !q || !kv || !out || !workspace)
        return GEM_ERR_NULL;
    gem_status st = gem_decode_shape_check(shape);
    if (st != GEM_OK)
        return st;
    memset(a, 0, sizeof *a);
    st = gem_kv_view_check(kv, shape->n_kv_heads, shape->dk, shape->dv, &a->k_bytes, &a->v_bytes);
    if (st == GEM_OK)
        st = gem_kv_view_scales_check(kv, shape->n_kv_heads);
    if (st != GEM_OK)
        return st;
    st = resolve_config(ctx, shape, kv->live, kv, cfg, &a->cfg);
    if (st != GEM_OK)
        return st;
    st = ctx->ops->supports(ctx->impl, shape, kv->k_dtype, kv->v_dtype, a->cfg.route);
    if (st != GEM_OK)
        return st;
    if (state && a->cfg.route != GEM_ROUTE_FUSED)
        return GEM_ERR_UNSUPPORTED; /* a state is the fused route's merge before the division */
    if (kv->k_from_v) {
        /* K rebuilt from V: the fused route of a backend that has the kernel */
        if ((st = gem_k_from_v_check(kv->k_from_v)) != GEM_OK)
            return st;
        if (a->cfg.route != GEM_ROUTE_FUSED)
            return GEM_ERR_UNSUPPORTED;
        if ((st = ctx->ops->k_from_v_supports(ctx->impl, shape, kv->v_dtype, kv->k_from_v)) !=
            GEM_OK)
            return st;
    }
    a->shape = shape;
    a->q = q;
    a->kv = kv;
    a->out = (float *)out;
    a->state = state;
    a->workspace = (void *)workspace;
    a->workspace_bytes = workspace_bytes;
    a->stream = (void *)stream;
    if ((uintptr_t)workspace % GEM_DECODE_WORKSPACE_ALIGN != 0)
        return GEM_ERR_ALIGN;
    st = ctx->ops->check_memory(ctx->impl, a);
    if (st != GEM_OK)
        return st;
    size_t need = 0;
    st = ctx->ops->workspace_bytes(ctx->impl, shape, kv->live, &a->cfg, &need);
    if (st != GEM_OK)
        return st;
    if (workspace_bytes < need)
        return GEM_ERR_RANGE;
    /* q and out fit size_t: gem_decode_shape_check bounds them as doubles */
    const size_t q_bytes = (size_t)shape->n_q_heads * (size_t)shape->dk * sizeof(float);
    const size_t out_bytes =
        (size_t)shape->n_q_heads * (size_t)(shape->dv + (state ? 2 : 0)) * sizeof(float);
    if (overlaps(out, out_bytes, q, q_bytes) || overlaps(out, out_bytes, kv->k, a->k_bytes) ||
        overlaps(out, out_bytes, kv->v, a->v_bytes) ||
        overlaps(out, out_bytes, workspace, workspace_bytes) ||
        overlaps(workspace, workspace_bytes, q, q_bytes) ||
        overlaps(workspace, workspace_bytes, kv->k, a->k_bytes) ||
        overlaps(workspace, workspace_bytes, kv->v, a->v_bytes))
        return GEM_ERR_OVERLAP;
    if (kv->k_from_v) {
        const void *w = kv->k_from_v->k_weight;
        const size_t w_bytes = (size_t)shape->dk * sizeof(float);
        if (overlaps(out, out_bytes, w, w_bytes) ||
            overlaps(workspace, workspace_bytes, w, w_bytes))
            return GEM_ERR_OVERLAP;
    }
    return GEM_OK;
}

gem_status gem_decode_validate(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                               const float *q, const gem_kv_view *kv, const float *out,
                               const void *workspace, size_t workspace_bytes,
                               const gem_decode_config *cfg, const void *stream)
{
    gem_decode_args a;
    return validate(ctx, shape, q, kv, out, workspace, workspace_bytes, cfg, stream, 0, &a);
}

gem_status gem_decode(const gem_decode_ctx *ctx, const gem_decode_shape *shape, const float *q,
                      const gem_kv_view *kv, float *out, void *workspace, size_t workspace_bytes,
                      const gem_decode_config *cfg, void *stream)
{
    gem_decode_args a;
    gem_status st = validate(ctx, shape, q, kv, out, workspace, workspace_bytes, cfg, stream, 0, &a);
    if (st != GEM_OK)
        return st;
    return ctx->ops->run(ctx->impl, &a);
}

/* ---- attention states ------------------------------------------------------------------ */

gem_status gem_decode_state_bytes(const gem_decode_shape *shape, int64_t n, size_t *bytes)
{
    if (!shape || !bytes)
        return GEM_ERR_NULL;
    gem_status st = gem_decode_shape_check(shape);
    if (st != GEM_OK)
        return st;
    if (n < 1)
        return GEM_ERR_PARAM;
    size_t b = 0;
    st = gem_mul_size((size_t)shape->n_q_heads, (size_t)shape->dv + 2, &b);
    if (st == GEM_OK)
        st = gem_mul_size(b, (size_t)n, &b);
    if (st == GEM_OK)
        st = gem_mul_size(b, sizeof(float), &b);
    if (st == GEM_OK && b > (size_t)INT64_MAX)
        st = GEM_ERR_OVERFLOW;
    if (st == GEM_OK)
        *bytes = b;
    return st;
}

gem_status gem_decode_state(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                            const float *q, const gem_kv_view *kv, float *state,
                            void *workspace, size_t workspace_bytes,
                            const gem_decode_config *cfg, void *stream)
{
    gem_decode_args a;
    gem_status st =
        validate(ctx, shape, q, kv, state, workspace, workspace_bytes, cfg, stream, 1, &a);
    if (st != GEM_OK)
        return st;
    return ctx->ops->run(ctx->impl, &a);
}

gem_status gem_decode_merge(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                            const float *states, int64_t n_states, float *out, void *stream)
{
    if (!ctx || !shape || !states || !out)
        return GEM_ERR_NULL;
    size_t states_bytes = 0;
    gem_status st = gem_decode_state_bytes(shape, n_states, &states_bytes);
    if (st != GEM_OK)
        return st;
    /* out fits size_t: gem_decode_shape_check bounds it as a double */
    const size_t out_bytes = (size_t)shape->n_q_heads * (size_t)shape->dv * sizeof(float);
    if (overlaps(out, out_bytes, states, states_bytes))
        return GEM_ERR_OVERLAP;
    return ctx->ops->merge(ctx->impl, shape, states, n_states, out, stream, 1);
}

gem_status gem_decode_across(const gem_decode_shape *shape, const gem_decode_piece *pieces,
                             int64_t n_pieces, const gem_decode_ctx *leader, float *states,
                             float *out, void *stream)
{
    if (!shape || !pieces || !leader || !states || !out)
        return GEM_ERR_NULL;
    if (n_pieces < 1 || n_pieces > GEM_DECODE_MAX_PIECES)
        return GEM_ERR_PARAM;
    gem_decode_args args[GEM_DECODE_MAX_PIECES];
    void *impls[GEM_DECODE_MAX_PIECES];
    size_t states_bytes = 0, sf_bytes = 0;
    gem_status st = gem_decode_state_bytes(shape, n_pieces, &states_bytes);
    if (st == GEM_OK)
        st = gem_decode_state_bytes(shape, 1, &sf_bytes);
    if (st != GEM_OK)
        return st;
    const size_t out_bytes = (size_t)shape->n_q_heads * (size_t)shape->dv * sizeof(float);
    for (int64_t i = 0; i < n_pieces; i++) {
        const gem_decode_piece *p = &pieces[i];
        if (!p->ctx)
            return GEM_ERR_NULL;
        if (p->ctx->backend != leader->backend)
            return GEM_ERR_UNSUPPORTED;
        st = validate(p->ctx, shape, p->q, p->kv, p->state, p->workspace, p->workspace_bytes,
                      NULL, p->stream, 1, &args[i]);
        if (st != GEM_OK)
            return st;
        impls[i] = p->ctx->impl;
        /* a piece's state: its own place in states, or memory apart from states, out and the
         * other pieces' states (one address space: host memory, or CUDA's unified one) */
        const float *place = states + (size_t)i * (sf_bytes / sizeof(float));
        if (p->state != place && overlaps(p->state, sf_bytes, states, states_bytes))
            return GEM_ERR_OVERLAP;
        if (overlaps(p->state, sf_bytes, out, out_bytes))
            return GEM_ERR_OVERLAP;
        for (int64_t j = 0; j < i; j++)
            if (overlaps(p->state, sf_bytes, pieces[j].state, sf_bytes))
                return GEM_ERR_OVERLAP;
    }
    if (overlaps(out, out_bytes, states, states_bytes))
        return GEM_ERR_OVERLAP;
    st = leader->ops->merge(leader->impl, shape, states, n_pieces, out, stream, 0);
    if (st != GEM_OK)
        return st;
    return leader->ops->across(leader->impl, shape, impls, args, n_pieces, states, out, stream);
}

gem_status gem_decode_check_finite(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                                   const float *q, const gem_kv_view *kv, void *stream)
{
    if (!ctx || !shape || !q || !kv)
        return GEM_ERR_NULL;
    gem_status st = gem_decode_shape_check(shape);
    if (st == GEM_OK)
        st = gem_kv_view_check(kv, shape->n_kv_heads, shape->dk, shape->dv, NULL, NULL);
    if (st == GEM_OK)
        st = gem_kv_view_scales_check(kv, shape->n_kv_heads);
    if (st == GEM_OK && kv->k_from_v)
        st = gem_k_from_v_check(kv->k_from_v);
    if (st != GEM_OK)
        return st;
    return ctx->ops->check_finite(ctx->impl, shape, q, kv, stream);
}

/* ---- the baseline route's stage clock (decode_stage_clock.h) ------------------------- */

gem_status gem_decode_stage_clock_set(gem_decode_ctx *ctx, int on)
{
    if (!ctx)
        return GEM_ERR_NULL;
    if (on != 0 && on != 1)
        return GEM_ERR_PARAM;
    if (ctx->backend == GEM_BACKEND_CUDA)
        return cuda_decode_stage_clock_set(ctx->impl, on);
    cpu_decode_stage_clock_set(ctx->impl, on);
    return GEM_OK;
}

gem_status gem_decode_stage_clock_read(const gem_decode_ctx *ctx, gem_baseline_stage_seconds *out)
{
    if (!ctx || !out)
        return GEM_ERR_NULL;
    if (ctx->backend == GEM_BACKEND_CUDA)
        return cuda_decode_stage_clock_read(ctx->impl, out);
    cpu_decode_stage_clock_read(ctx->impl, out);
    return GEM_OK;
}

gem_status gem_decode_stage_clock_reset(gem_decode_ctx *ctx)
{
    if (!ctx)
        return GEM_ERR_NULL;
    if (ctx->backend == GEM_BACKEND_CUDA)
        return cuda_decode_stage_clock_reset(ctx->impl);
    cpu_decode_stage_clock_reset(ctx->impl);
    return GEM_OK;
}

/* ---- KV cache helper --------------------------------------------------------------- */

struct gem_kv_cache {
    gem_kv_cache_desc desc;
    const gem_cache_ops *ops;
    void *k;           /* (n_kv_heads, capacity, dk) of k_dtype */
    void *v;           /* (n_kv_heads, capacity, dv) of v_dtype */
    int *flag;         /* non-finite seen (device memory on CUDA) */
    int64_t appended;  /* rows appended since creation or reset */
};

static const gem_cache_ops *cache_ops_for(gem_backend b)
{
    switch (b) {
    case GEM_BACKEND_CPU: return &gem_cpu_cache_ops;
    case GEM_BACKEND_CUDA: return &gem_cuda_cache_ops;
    default: return NULL;
    }
}

/* Bytes of one tensor: heads * capacity * d elements of t. */
static gem_status tensor_bytes(int64_t heads, int64_t capacity, int64_t d, gem_dtype t,
                               size_t *bytes)
{
    size_t n = 0;
    gem_status st = gem_mul_size((size_t)heads, (size_t)capacity, &n);
    if (st == GEM_OK)
        st = gem_mul_size(n, (size_t)d, &n);
    if (st == GEM_OK)
        st = gem_mul_size(n, gem_dtype_size(t), bytes);
    if (st == GEM_OK && *bytes > (size_t)INT64_MAX)
        st = GEM_ERR_OVERFLOW;
    return st;
}

gem_status gem_kv_cache_create(const gem_kv_cache_desc *desc, gem_kv_cache **out)
{
    if (!desc || !out)
        return GEM_ERR_NULL;
    *out = NULL;
    const gem_cache_ops *ops = cache_ops_for(desc->backend);
    if (!ops || gem_dtype_size(desc->k_dtype) == 0 || gem_dtype_size(desc->v_dtype) == 0 ||
        (desc->ring != 0 && desc->ring != 1))
        return GEM_ERR_PARAM;
    if (desc->n_kv_heads < 1 || desc->dk < 1 || desc->dv < 1 || desc->capacity < 1)
        return GEM_ERR_SHAPE;
    if (desc->k_dtype == GEM_DTYPE_FP8_E4M3 || desc->v_dtype == GEM_DTYPE_FP8_E4M3)
        return GEM_ERR_UNSUPPORTED; /* the helper holds no scales */
    size_t kb = 0, vb = 0;
    gem_status st = tensor_bytes(desc->n_kv_heads, desc->capacity, desc->dk, desc->k_dtype, &kb);
    if (st == GEM_OK)
        st = tensor_bytes(desc->n_kv_heads, desc->capacity, desc->dv, desc->v_dtype, &vb);
    if (st != GEM_OK)
        return st;
    gem_kv_cache *c = calloc(1, sizeof *c);
    if (!c)
        return GEM_ERR_NOMEM;
    c->desc = *desc;
    c->ops = ops;
    if ((st = ops->alloc(kb, &c->k)) != GEM_OK || (st = ops->alloc(vb, &c->v)) != GEM_OK ||
        (st = ops->alloc(sizeof(int), (void **)&c->flag)) != GEM_OK) {
        gem_kv_cache_destroy(c);
        return st;
    }
    *out = c;
    return GEM_OK;
}

void gem_kv_cache_destroy(gem_kv_cache *c)
{
    if (!c)
        return;
    if (c->k)
        c->ops->free(c->k);
    if (c->v)
        c->ops->free(c->v);
    if (c->flag)
        c->ops->free(c->flag);
    free(c);
}

gem_status gem_kv_cache_append(gem_kv_cache *c, const float *k, const float *v, int64_t n,
                               void *stream)
{
    if (!c || !k || !v)
        return GEM_ERR_NULL;
    const gem_kv_cache_desc *d = &c->desc;
    if (n < 1)
        return GEM_ERR_SHAPE;
    if (d->backend == GEM_BACKEND_CPU && stream)
        return GEM_ERR_PARAM;
    if (n > d->capacity || (!d->ring && c->appended > d->capacity - n))
        return GEM_ERR_RANGE;
    /* the source rows must be readable: n * heads * d floats fit (n <= capacity) */
    gem_status st = c->ops->check_pointer(k);
    if (st == GEM_OK)
        st = c->ops->check_pointer(v);
    if (st != GEM_OK)
        return st;
    if (c->appended > INT64_MAX - n)
        return GEM_ERR_OVERFLOW;
    const int64_t first = c->appended % d->capacity;
    st = c->ops->append(k, v, n, d->n_kv_heads, d->dk, d->dv, d->capacity, first, c->k,
                        d->k_dtype, c->v, d->v_dtype, c->flag, stream);
    if (st == GEM_OK)
        c->appended += n;
    return st;
}

int64_t gem_kv_cache_appended(const gem_kv_cache *c) { return c ? c->appended : 0; }

int64_t gem_kv_cache_live(const gem_kv_cache *c)
{
    if (!c)
        return 0;
    return c->appended < c->desc.capacity ? c->appended : c->desc.capacity;
}

gem_status gem_kv_cache_view(const gem_kv_cache *c, gem_kv_view *out)
{
    if (!c || !out)
        return GEM_ERR_NULL;
    const gem_kv_cache_desc *d = &c->desc;
    memset(out, 0, sizeof *out);
    out->k = c->k;
    out->v = c->v;
    out->k_dtype = d->k_dtype;
    out->v_dtype = d->v_dtype;
    out->k_head_stride = d->capacity * d->dk; /* fit: the tensors were allocated */
    out->k_token_stride = d->dk;
    out->v_head_stride = d->capacity * d->dv;
    out->v_token_stride = d->dv;
    out->live = gem_kv_cache_live(c);
    out->capacity = d->capacity;
    return GEM_OK;
}

gem_status gem_kv_cache_reset(gem_kv_cache *c, void *stream)
{
    if (!c)
        return GEM_ERR_NULL;
    if (c->desc.backend == GEM_BACKEND_CPU && stream)
        return GEM_ERR_PARAM;
    gem_status st = c->ops->flag_reset(c->flag, stream);
    if (st == GEM_OK)
        c->appended = 0;
    return st;
}

gem_status gem_kv_cache_check(gem_kv_cache *c, void *stream)
{
    if (!c)
        return GEM_ERR_NULL;
    if (c->desc.backend == GEM_BACKEND_CPU && stream)
        return GEM_ERR_PARAM;
    int v = 0;
    gem_status st = c->ops->flag_read(c->flag, stream, &v);
    if (st != GEM_OK)
        return st;
    return v ? GEM_ERR_NONFINITE : GEM_OK;
}
