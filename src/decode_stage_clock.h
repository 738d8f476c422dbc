/*
 * Internal: the baseline route's stage clock, a measurement hook for the
 * whole-token stage profile (gem profile --stage-profile). It is not part of
 * gem/decode.h.
 *
 * A decode context of the CPU backend can accumulate the wall time of each of
 * the baseline route's four stages (score, normalize, value, reduce: the
 * four pool runs of cpu_route_baseline) over its calls. The clock is off when
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

/* Wall seconds of the baseline route's stages, summed over `calls` calls. */
typedef struct gem_baseline_stage_seconds {
    double score;     /* stage 1: the GQA scores */
    double normalize; /* stage 2: max, exponentiation and sum, scaling */
    double value;     /* stage 3: the value partials */
    double reduce;    /* stage 4: the sum of the value partials */
    int64_t calls;    /* baseline calls that ran all four stages while the clock was on */
} gem_baseline_stage_seconds;

/* Turns ctx's stage clock on (on = 1) or off (on = 0); the sums are kept.
 * GEM_ERR_NULL for a NULL ctx, GEM_ERR_PARAM for another `on`,
 * GEM_ERR_UNSUPPORTED for a backend without the clock (CUDA). */
gem_status gem_decode_stage_clock_set(gem_decode_ctx *ctx, int on);

/* The sums since the context was created or last reset into *out.
 * GEM_ERR_NULL for a NULL argument, GEM_ERR_UNSUPPORTED as above. */
gem_status gem_decode_stage_clock_read(const gem_decode_ctx *ctx,
                                       gem_baseline_stage_seconds *out);

/* Zeroes the sums (the clock stays on or off). GEM_ERR_NULL, GEM_ERR_UNSUPPORTED. */
gem_status gem_decode_stage_clock_reset(gem_decode_ctx *ctx);

/* The CPU backend's side of the three above, on its impl pointer (src/cpu_decode.c). */
void cpu_decode_stage_clock_set(void *impl, int on);
void cpu_decode_stage_clock_read(const void *impl, gem_baseline_stage_seconds *out);
void cpu_decode_stage_clock_reset(void *impl);

#endif /* GEM_DECODE_STAGE_CLOCK_H */
