/*
 * Internal: the Gemma 4 decoder's device kernels other than attention (which goes
 * through gem_decode). C-callable; every function queues work on `stream` (a
 * cudaStream_t, NULL = the default stream) and returns without synchronising.
 *
 * Matrix-vector products. A device matrix holds GGUF rows as the file stores
 * them (gem_matrix: rows x cols of `type`, row_bytes per row) in device memory.
 * Each output element is one dot product of the row's exactly dequantized
 * weights (the values of gem_gguf_dequant) with x in F32, computed by one warp
 * in a fixed order and summed by a fixed shuffle tree: the same bits on every
 * call. The order differs from the CPU's mv_rows, so the two agree to float
 * rounding, not bitwise.
 */
#ifndef GEM_MODEL_CUDA_H
#define GEM_MODEL_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "gem/attn.h"
#include "gem/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A weight matrix in device memory: `rows` outputs of `cols` inputs. */
typedef struct gem_dmatrix {
    void *data; /* device (rows, row_bytes) */
    gem_gguf_type type;
    int64_t rows, cols;
    size_t row_bytes; /* gem_gguf_row_bytes(type, cols) */
} gem_dmatrix;

/* 1 when the device kernels take this type (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)
 * with this row length (a multiple of the type's block), else 0. */
int gem_dmv_supported(gem_gguf_type type, int64_t cols);

/* y[r] = W[r, :] . x for r < w->rows.  x (w->cols) device F32, y (w->rows) device F32;
 * y must not overlap x. GEM_ERR_UNSUPPORTED for a type / cols gem_dmv_supported refuses,
 * GEM_ERR_DEVICE when the launch fails. */
gem_status gem_dmv(const gem_dmatrix *w, const float *x, float *y, void *stream);

/* Up to three products with one x in one launch (the q, k and v projections):
 * y[i][r] = w[i][r, :] . x.  n in 1..3; every w[i]->cols equal; w (n), y (n). */
gem_status gem_dmv_multi(int n, const gem_dmatrix *const *w, const float *x, float *const *y,
                         void *stream);

/* The MLP's first half in one launch: y[r] = gelu_tanh(Wg[r, :] . x) * (Wu[r, :] . x),
 * gelu_tanh(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) in F32.
 * wg and wu of the same shape; x (cols), y (rows). */
gem_status gem_dmv_geglu(const gem_dmatrix *wg, const gem_dmatrix *wu, const float *x, float *y,
                         void *stream);

/* Row `row` of w dequantized and multiplied by `scale` (the embedding lookup):
 * y (w->cols) F32 device. GEM_ERR_RANGE for a row outside the matrix. */
gem_status gem_dmv_row(const gem_dmatrix *w, int64_t row, float scale, float *y, void *stream);

/* Fills w->data with valid blocks of w->type from a counter-based generator on
 * (seed, element or block index): elements roughly uniform in [-amp, amp], every
 * scale finite. For random-weight models generated on the device. The same bits
 * for the same (type, shape, seed, amp). */
gem_status gem_dmatrix_fill_random(const gem_dmatrix *w, uint64_t seed, float amp, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* GEM_MODEL_CUDA_H */
