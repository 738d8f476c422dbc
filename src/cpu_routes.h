/*
 * Internal: the CPU backend's split routes (baseline, fused) and the buffers
 * they share. attn_cpu.c owns a cpu_ctx per engine; cpu_routes_reserve sizes
 * its buffers before a timed run so the run itself allocates nothing.
 */
#ifndef GEM_CPU_ROUTES_H
#define GEM_CPU_ROUTES_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_pool.h"
#include "gem/attn.h"
#include "gem/engine.h"

typedef struct cpu_ctx {
    cpu_pool *pool;
    int64_t threads;
    void *scratch;        /* route scratch (partials, scores), 64-byte aligned */
    size_t scratch_cap;   /* bytes */
    float *ws;            /* per-thread temporaries: (threads, ws_stride) */
    size_t ws_cap;        /* floats */
    int64_t ws_stride;    /* floats per thread, a multiple of 16 */
    gem_status *status;   /* one status per work item of a stage */
    size_t status_cap;    /* entries */
} cpu_ctx;

/* Frees the buffers (not the pool). */
void cpu_ctx_release(cpu_ctx *c);

/* Scratch bytes `route` needs for `shape` (0 for routes without scratch).
 * params already defaulted. GEM_ERR_OVERFLOW / GEM_ERR_PARAM as the byte
 * contracts say. */
gem_status cpu_routes_scratch_bytes(gem_route route, const gem_attn_shape *shape,
                                    const gem_route_params *params, size_t *bytes);

/* Grows c's buffers for one run of `route` (baseline or fused).
 * GEM_ERR_NOMEM / GEM_ERR_OVERFLOW on failure. */
gem_status cpu_routes_reserve(cpu_ctx *c, gem_route route, const gem_attn_shape *shape,
                              const gem_route_params *params);

/* The first failing work item's status in item order (so the answer does not
 * depend on which thread failed first); GEM_OK if none. status (n). */
gem_status cpu_first_error(const gem_status *status, int64_t n);

/* The fused split-KV route: P = params->partitions sequence partitions,
 * tile = params->tile tokens. q (n_q_heads, dk), k (n_kv_heads, capacity, dk),
 * v (n_kv_heads, capacity, dv), out (n_q_heads, dv); all validated and finite.
 * Needs cpu_routes_reserve first. */
gem_status cpu_route_fused(cpu_ctx *c, const gem_attn_shape *shape, const float *q,
                           const float *k, const float *v, const gem_route_params *params,
                           float *out);

/* The three-stage baseline route with params->partitions value partitions.
 * Same buffers and contract as cpu_route_fused. */
gem_status cpu_route_baseline(cpu_ctx *c, const gem_attn_shape *shape, const float *q,
                              const float *k, const float *v, const gem_route_params *params,
                              float *out);

#endif /* GEM_CPU_ROUTES_H */
