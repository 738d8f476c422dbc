/*
 * Internal: the baseline route's stage clock, a measurement hook for the
 * whole-token stage profile (gem profile --stage-profile). It is not part of
 * gem/decode.h.
 *
 * A decode context can accumulate the time of each of the baseline route's
 * four stages (score, normalize, value, reduce) over its calls: on the CPU the
 * wall time of cpu_route_baseline's four pool runs; on CUDA the GPU time between
 * events recorded on the call's stream around its four kernels (reading the
 * clock waits for the timed calls; while the clock is on, the CUDA context is
 * no longer safe to share between threads). The clock is off when
 * a context is created; while it is off a call reads no clock at all. It
 * only observes: the route computes the same bits with the clock on or off
 * (tests/test_stage_clock.c). The fused route is never timed by it.
 *
 * Like the context itself the clock is not thread-safe: switch, read and
 * reset it between gem_decode calls of the thread that owns the context.
 */
#ifndef GEM_DECODE_STAGE_CLOCK_H
#define GEM_DECODE_STAGE_CLOCK_H

#include <stdint.h>

#include "gem/decode.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Wall seconds of the baseline route's stages, summed over `calls` calls. */
typedef struct gem_baseline_stage_seconds {
    double score;     /* stage 1: the GQA scores */
    double normalize; /* stage 2: max, exponentiation and sum, scaling */
    double value;     /* stage 3: the value partials */
    double reduce;    /* stage 4: the sum of the value partials */
    int64_t calls;    /* baseline calls that ran all four stages while the clock was on */
} gem_baseline_stage_seconds;

/* Turns ctx's stage clock on (on = 1) or off (on = 0); the sums are kept.
 * GEM_ERR_NULL for a NULL ctx, GEM_ERR_PARAM for another `on`, GEM_ERR_NOMEM /
 * GEM_ERR_DEVICE when CUDA events cannot be created. */
gem_status gem_decode_stage_clock_set(gem_decode_ctx *ctx, int on);

/* The sums since the context was created or last reset into *out (CUDA: after waiting
 * for the timed calls). GEM_ERR_NULL for a NULL argument, GEM_ERR_DEVICE. */
gem_status gem_decode_stage_clock_read(const gem_decode_ctx *ctx,
                                       gem_baseline_stage_seconds *out);

/* Zeroes the sums (the clock stays on or off). GEM_ERR_NULL, GEM_ERR_DEVICE. */
gem_status gem_decode_stage_clock_reset(gem_decode_ctx *ctx);

/* The CPU backend's side of the three above, on its impl pointer (src/cpu_decode.c). */
void cpu_decode_stage_clock_set(void *impl, int on);
void cpu_decode_stage_clock_read(const void *impl, gem_baseline_stage_seconds *out);
void cpu_decode_stage_clock_reset(void *impl);

/* The CUDA backend's side (src/cuda/cuda_decode.cu; src/nocuda/cuda_none.c answers
 * GEM_ERR_NO_DEVICE). */
gem_status cuda_decode_stage_clock_set(void *impl, int on);
gem_status cuda_decode_stage_clock_read(const void *impl, gem_baseline_stage_seconds *out);
gem_status cuda_decode_stage_clock_reset(void *impl);

#ifdef __cplusplus
}
#endif

#endif /* GEM_DECODE_STAGE_CLOCK_H */
