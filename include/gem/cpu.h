/*
 * gem CPU backend: byte contracts of the CPU routes that are not part of the
 * core API. The routes themselves run through gem_engine (gem/engine.h) with
 * GEM_BACKEND_CPU.
 */
#ifndef GEM_CPU_H
#define GEM_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "gem/attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The baseline route's value stage splits each output into dimension tiles of
 * this many elements (the design's "dim32"). */
#define GEM_BASELINE_DIM_TILE 32

/* Scratch of the three-stage baseline route. */
typedef struct gem_baseline_scratch {
    size_t scores_bytes;   /* n_q_heads * live * sizeof(float): the score rows,
                              normalized in place (32*live*4 at 32 heads) */
    size_t partials_bytes; /* value_partitions * n_q_heads * dv * sizeof(float):
                              16 * 32 * 512 * 4 = 1 MiB at the production shape */
    size_t total_bytes;    /* the sum of the two */
} gem_baseline_scratch;

/* Bytes of the baseline route's scratch for `live` tokens and
 * `value_partitions` sequence partitions of the value stage:
 * live = 65,536, 32 heads, DV = 512, 16 partitions gives 8,388,608 +
 * 1,048,576 = 9,437,184. GEM_ERR_PARAM for any count < 1, GEM_ERR_OVERFLOW
 * when a product or the sum does not fit size_t; *out untouched on error. */
gem_status gem_baseline_scratch_bytes(int64_t live, int64_t n_q_heads, int64_t dv,
                                      int64_t value_partitions, gem_baseline_scratch *out);

#ifdef __cplusplus
}
#endif

#endif /* GEM_CPU_H */
