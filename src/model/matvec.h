/*
 * Internal: matrix-vector products of GGUF weight matrices with F32 vectors.
 * Each output row is one dot product of the row's exactly dequantized weights
 * (gem_gguf_dequant's values) with x, accumulated by fused multiply-adds in 64
 * float lanes in element order and summed by a fixed tree: the same bits on
 * every call and for any thread count (a row is never split between threads).
 */
#ifndef GEM_MODEL_MATVEC_H
#define GEM_MODEL_MATVEC_H

#include <stdint.h>

#include "gem/model.h"
#include "cpu_pool.h"

/* y[r] = sum_i W[r, i] * x[i] for r in [r0, r1).  x (w->cols), y (w->rows). */
void mv_rows(const gem_matrix *w, const float *x, float *y, int64_t r0, int64_t r1);

/* The whole product on the pool (a row is computed whole by one item). */
void mv(cpu_pool *p, const gem_matrix *w, const float *x, float *y);

/* Several products that share nothing but the pool, run as one batch of items
 * (e.g. the gate and up projections). w (n), x (n), y (n). */
void mv_batch(cpu_pool *p, int n, const gem_matrix *const *w, const float *const *x, float *const *y);

/* How a batch runs (dev/cpu/mv_split measures both; neither changes a bit of the result):
 * its bytes split into threads * parts_per_thread contiguous ranges (items taken in turn
 * from the pool's counter), and each thread asking for the rows that start prefetch_bytes
 * past the row it computes (0: no prefetch). */
typedef struct mv_tuning {
    int64_t parts_per_thread; /* [1, 64] */
    int64_t prefetch_bytes;   /* [0, 2^30] */
    int prefetch_into;        /* 1: L1 (prefetcht0), 2: L2 (prefetcht1), 0: non-temporal */
} mv_tuning;

/* mv_batch under the tuning t (clamped to the ranges above). */
void mv_batch_tuned(cpu_pool *p, int n, const gem_matrix *const *w, const float *const *x,
                    float *const *y, const mv_tuning *t);

/* Row r of w dequantized into dst (w->cols). */
void mv_row_f32(const gem_matrix *w, int64_t r, float *dst);

#endif /* GEM_MODEL_MATVEC_H */
