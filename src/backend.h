/*
 * Internal: the interface every backend implements behind gem_engine.
 * src/engine.c dispatches to these; src/attn_cpu.c implements the CPU one,
 * src/cuda/ (or src/nocuda/ in a build without nvcc) the CUDA one.
 */
#ifndef GEM_BACKEND_H
#define GEM_BACKEND_H

#include "gem/engine.h"

typedef struct gem_backend_ops {
    gem_status (*create)(int64_t threads, void **impl);
    void (*destroy)(void *impl);
    int64_t (*threads)(const void *impl);
    const char *(*describe)(const void *impl);
    /* shape and inputs already validated (shape, buffers, finiteness) */
    gem_status (*load)(void *impl, const gem_attn_shape *shape, const gem_attn_inputs *in,
                       int64_t copies);
    /* params already defaulted; poison the output, run, time */
    gem_status (*run)(void *impl, gem_route route, const gem_route_params *params,
                      double *seconds);
    gem_status (*output)(void *impl, float *out, size_t out_elems, gem_output_audit *audit);
    gem_status (*read_bandwidth)(void *impl, size_t bytes, int64_t reps, double *bps);
    gem_status (*scratch_bytes)(const void *impl, gem_route route,
                                const gem_route_params *params, size_t *bytes);
} gem_backend_ops;

extern const gem_backend_ops gem_cpu_backend_ops;
extern const gem_backend_ops gem_cuda_backend_ops;

#endif /* GEM_BACKEND_H */
