/*
 * gem_engine: validates what callers hand in, applies route defaults and
 * dispatches to the backend's ops (src/backend.h).
 */
#include <stdlib.h>

#include "backend.h"
#include "gem/engine.h"

struct gem_engine {
    gem_backend backend;
    const gem_backend_ops *ops;
    void *impl;
    int loaded;
};

static const gem_backend_ops *ops_for(gem_backend b)
{
    switch (b) {
    case GEM_BACKEND_CPU: return &gem_cpu_backend_ops;
    case GEM_BACKEND_CUDA: return &gem_cuda_backend_ops;
    default: return NULL;
    }
}

gem_status gem_engine_create(gem_backend backend, int64_t threads, gem_engine **out)
{
    if (!out)
        return GEM_ERR_NULL;
    *out = NULL;
    const gem_backend_ops *ops = ops_for(backend);
    if (!ops)
        return GEM_ERR_PARAM;
    if (threads < 0 || threads > 4096)
        return GEM_ERR_PARAM;
    gem_engine *e = calloc(1, sizeof *e);
    if (!e)
        return GEM_ERR_NOMEM;
    e->backend = backend;
    e->ops = ops;
    gem_status st = ops->create(threads, &e->impl);
    if (st != GEM_OK) {
        free(e);
        return st;
    }
    *out = e;
    return GEM_OK;
}

void gem_engine_destroy(gem_engine *e)
{
    if (!e)
        return;
    e->ops->destroy(e->impl);
    free(e);
}

gem_backend gem_engine_backend(const gem_engine *e) { return e->backend; }
int64_t gem_engine_threads(const gem_engine *e) { return e->ops->threads(e->impl); }
const char *gem_engine_describe(const gem_engine *e) { return e->ops->describe(e->impl); }

gem_status gem_engine_load(gem_engine *e, const gem_attn_shape *shape,
                           const gem_attn_inputs *in, int64_t copies)
{
    if (!e || !shape || !in)
        return GEM_ERR_NULL;
    /* Whatever happens next, the earlier inputs are gone: a failed load must
     * not leave a caller running on them. */
    e->loaded = 0;
    if (copies < 1 || copies > 64)
        return GEM_ERR_PARAM;
    size_t out_elems = 0;
    gem_status st = gem_attn_shape_elems(shape, NULL, NULL, NULL, &out_elems);
    if (st != GEM_OK)
        return st;
    /* gem_attn_check wants an output pointer; the engine owns its output. */
    static const float dummy_out[1];
    st = gem_attn_check(shape, in, dummy_out, out_elems);
    if (st != GEM_OK)
        return st;
    st = gem_attn_check_finite(shape, in);
    if (st != GEM_OK)
        return st;
    st = e->ops->load(e->impl, shape, in, copies);
    if (st == GEM_OK)
        e->loaded = 1;
    return st;
}

static gem_status resolve_params(gem_route route, const gem_route_params *in,
                                 gem_route_params *out)
{
    gem_route_params p = {0, 0};
    if (in)
        p = *in;
    if (p.partitions < 0 || p.tile < 0)
        return GEM_ERR_PARAM;
    if (route == GEM_ROUTE_FUSED) {
        if (p.partitions == 0)
            p.partitions = 32;
        if (p.tile == 0)
            p.tile = 4;
    } else if (route == GEM_ROUTE_BASELINE) {
        if (p.partitions == 0)
            p.partitions = 16;
        if (p.tile != 0)
            return GEM_ERR_PARAM; /* the baseline has no tile parameter */
    } else if (route == GEM_ROUTE_ONLINE) {
        if (p.partitions == 0)
            p.partitions = 32;
    }
    if (p.partitions > (int64_t)1 << 20 || p.tile > 1024)
        return GEM_ERR_PARAM;
    *out = p;
    return GEM_OK;
}

/* What run and scratch_bytes check before they reach the backend: a loaded
 * engine, a known route and its parameters with defaults applied. */
static gem_status prepare(const gem_engine *e, gem_route route, const gem_route_params *params,
                          gem_route_params *out)
{
    if ((unsigned)route >= GEM_ROUTE_COUNT)
        return GEM_ERR_PARAM;
    if (!e->loaded)
        return GEM_ERR_STATE;
    return resolve_params(route, params, out);
}

gem_status gem_engine_run(gem_engine *e, gem_route route, const gem_route_params *params,
                          double *seconds)
{
    if (!e)
        return GEM_ERR_NULL;
    gem_route_params p;
    gem_status st = prepare(e, route, params, &p);
    if (st != GEM_OK)
        return st;
    double t = 0;
    st = e->ops->run(e->impl, route, &p, &t);
    if (st == GEM_OK && seconds)
        *seconds = t;
    return st;
}

gem_status gem_engine_output(gem_engine *e, float *out, size_t out_elems,
                             gem_output_audit *audit)
{
    if (!e || !out || !audit)
        return GEM_ERR_NULL;
    if (!e->loaded)
        return GEM_ERR_STATE;
    return e->ops->output(e->impl, out, out_elems, audit);
}

gem_status gem_engine_read_bandwidth(gem_engine *e, size_t bytes, int64_t reps,
                                     double *bytes_per_second)
{
    if (!e || !bytes_per_second)
        return GEM_ERR_NULL;
    if (bytes < ((size_t)1 << 20) || reps < 1 || reps > 10000)
        return GEM_ERR_PARAM;
    return e->ops->read_bandwidth(e->impl, bytes, reps, bytes_per_second);
}

gem_status gem_engine_scratch_bytes(const gem_engine *e, gem_route route,
                                    const gem_route_params *params, size_t *bytes)
{
    if (!e || !bytes)
        return GEM_ERR_NULL;
    gem_route_params p;
    gem_status st = prepare(e, route, params, &p);
    if (st != GEM_OK)
        return st;
    return e->ops->scratch_bytes(e->impl, route, &p, bytes);
}
