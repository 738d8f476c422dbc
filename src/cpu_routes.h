/*
 * Internal: the CPU backend's split routes (baseline, fused) on a KV view, and
 * how they carve the caller's workspace: route scratch (partials or scores),
 * per-thread temporaries and per-item statuses, laid out by cpu_routes_layout
 * so that a run allocates nothing.
 */
#ifndef GEM_CPU_ROUTES_H
#define GEM_CPU_ROUTES_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_pool.h"
#include "decode_stage_clock.h"
#include "gem/attn.h"
#include "gem/decode.h"

/* Where the pieces of one run sit in the workspace (byte offsets from its
 * start, each 64-byte aligned). */
typedef struct cpu_layout {
    size_t scratch_bytes;  /* route scratch at offset 0: fused partials (the layout of
                              gem_attention_online_scratch_bytes), baseline scores and
                              value partials (gem_baseline_scratch_bytes) */
    size_t ws_offset;      /* per-thread temporaries: (threads, ws_stride) floats */
    int64_t ws_stride;     /* floats per thread, a multiple of 16 */
    size_t kfv_offset;     /* fused: per-thread room to rebuild K from V: (threads, kfv_stride)
                              floats; 0 bytes for the baseline */
    int64_t kfv_stride;    /* floats per thread (CPU_KFV_FLOATS), a multiple of 16 */
    size_t status_offset;  /* (status_count) gem_status, one per work item of a stage */
    size_t status_count;
    size_t total_bytes;    /* what the workspace must hold */
} cpu_layout;

/* The layout of `cfg` (route fused or baseline, parameters resolved) for `shape`
 * at `live` tokens on `threads` threads. GEM_ERR_OVERFLOW when a size does not fit. */
gem_status cpu_routes_layout(const gem_decode_shape *shape, int64_t live,
                             const gem_decode_config *cfg, int64_t threads, cpu_layout *out);

/* Tokens the fused route's kernels take at once when the tile is shorter (a multiple of
 * the tile, at most this); a span is max(CPU_SPAN_TOKENS, tile) tokens at most. */
#define CPU_SPAN_TOKENS 32

/* Floats per thread the fused route needs to rebuild K from V (gem_k_from_v): the
 * rotation state, 4 * (dk / 2) doubles (cos, sin, and their per-token step), then one
 * span of K rows, max(CPU_SPAN_TOKENS, tile) * dk floats. The workspace of the fused
 * route always holds it, so one size serves views with and without K. */
gem_status cpu_kfv_floats(int64_t dk, int64_t tile, size_t *floats);

/* One run's resources: the pool and the workspace pieces of a layout. */
typedef struct cpu_run {
    cpu_pool *pool;
    int64_t threads;
    void *scratch;      /* (scratch_bytes), 64-byte aligned */
    float *ws;          /* (threads, ws_stride) */
    int64_t ws_stride;
    float *kfv;         /* (threads, kfv_stride), NULL for the baseline */
    int64_t kfv_stride;
    gem_status *status; /* (status_count) */
    int64_t status_count;
    gem_baseline_stage_seconds *stage_clock; /* the baseline adds its stage times here;
                                                NULL (cpu_run_bind's value): not timed */
} cpu_run;

/* Points r's pieces into `workspace` (at least l->total_bytes, 64-byte aligned); the run
 * is not timed (stage_clock NULL). */
void cpu_run_bind(cpu_run *r, cpu_pool *pool, int64_t threads, void *workspace,
                  const cpu_layout *l);

/* The first failing work item's status in item order (so the answer does not
 * depend on which thread failed first); GEM_OK if none. status (n). */
gem_status cpu_first_error(const gem_status *status, int64_t n);

/* The fused split-KV route: P = cfg->partitions sequence partitions, tile =
 * cfg->tile tokens. q (n_q_heads, dk), kv a validated view with K and V each
 * F32, BF16 or F16, or V alone with K rebuilt from it (kv->k_from_v), out
 * (n_q_heads, dv). GEM_ERR_NONFINITE / GEM_ERR_SCORE when a score is not finite. */
gem_status cpu_route_fused(const cpu_run *r, const gem_decode_shape *shape, const float *q,
                           const gem_kv_view *kv, const gem_decode_config *cfg, float *out,
                           float *state);

/* With state not NULL (out NULL), cpu_route_fused writes the merged state of the rows in
 * place of the division (gem_decode_state's layout, GEM_DECODE_STATE_FLOATS(n_q_heads, dv)
 * floats; FP8 V: o times the head's scale); GEM_ERR_STATE for a state that overflowed. */

/* gem_decode_merge on the pool: states (n, GEM_DECODE_STATE_FLOATS(n_q_heads, dv)) merged per
 * head in index order with the fused route's merge (the same expressions), accumulated in out
 * (n_q_heads, dv) and divided there. GEM_ERR_STATE for an invalid state, all states empty or an
 * overflow (out then holds partial sums). */
gem_status cpu_merge_states(cpu_pool *pool, const gem_decode_shape *shape, const float *states,
                            int64_t n, float *out);

/* The three-stage baseline route with cfg->partitions value partitions.
 * Same contract as cpu_route_fused. When r->stage_clock is not NULL, a call that
 * runs all four stages adds each stage's wall time to it and counts itself;
 * the output does not depend on it. */
gem_status cpu_route_baseline(const cpu_run *r, const gem_decode_shape *shape, const float *q,
                              const gem_kv_view *kv, const gem_decode_config *cfg, float *out);

#endif /* GEM_CPU_ROUTES_H */
