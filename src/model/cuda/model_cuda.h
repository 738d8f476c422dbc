/*
 * Internal: the Gemma 4 decoder's device kernels other than attention (which goes
 * through gem_decode). C-callable; every function queues work on `stream` (a
 * cudaStream_t, NULL = the default stream) and returns without synchronising.
 *
 * Matrix-vector products. A device matrix holds GGUF rows as the file stores
 * them (gem_matrix: rows x cols of `type`, row_bytes per row) in device memory,
 * or, for Q4_0, Q4_K, Q6_K, Q8_0 and BF16 of a tileable shape, the same bytes in tiles
 * (GEM_DLAYOUT_Q4_0_TILES, GEM_DLAYOUT_Q4_K_TILES, GEM_DLAYOUT_Q6_K_TILES,
 * GEM_DLAYOUT_Q8_0_TILES, GEM_DLAYOUT_BF16_TILES, gem_dmatrix_tile).
 * In the file's rows each output element is one dot product of
 * the row's exactly dequantized weights (the values of gem_gguf_dequant) with x in
 * F32, computed by one warp in a fixed order and summed by a fixed shuffle tree. In
 * tiles the products run on the tensor cores in integers (matvec_tiles.cu: x to
 * 2^-27 of each 32-element block's largest magnitude, exact integer block sums, F32
 * additions of exactly scaled block terms). Either way: the same bits on every call.
 * The order differs from the CPU's mv_rows, so the two agree to float rounding, not
 * bitwise.
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

/* How a device matrix's bytes are ordered. */
typedef enum gem_dlayout {
    GEM_DLAYOUT_ROWS = 0,       /* the file's rows */
    GEM_DLAYOUT_Q4_0_TILES = 1, /* Q4_0 in tiles of 8 rows (matvec_tiles.cu) */
    GEM_DLAYOUT_Q4_K_TILES = 2, /* Q4_K in tiles of 8 rows (matvec_tiles.cu) */
    GEM_DLAYOUT_Q6_K_TILES = 3, /* Q6_K in tiles of 8 rows (matvec_tiles.cu) */
    GEM_DLAYOUT_Q8_0_TILES = 4, /* Q8_0 in tiles of 8 rows (matvec_tiles.cu) */
    GEM_DLAYOUT_BF16_TILES = 5, /* BF16 in tiles of 8 rows (matvec_tiles.cu) */
} gem_dlayout;

/* A weight matrix in device memory: `rows` outputs of `cols` inputs. */
typedef struct gem_dmatrix {
    void *data; /* device: rows * row_bytes bytes */
    gem_gguf_type type;
    int64_t rows, cols;
    size_t row_bytes;   /* gem_gguf_row_bytes(type, cols) */
    gem_dlayout layout; /* 0 (GEM_DLAYOUT_ROWS) unless gem_dmatrix_tile made it */
} gem_dmatrix;

/* 1 when gem_dmatrix_tile takes a matrix of this type and shape: Q4_0, Q4_K, Q6_K, Q8_0 or
 * BF16, rows a multiple of 8, cols a multiple of 128 (Q4_K, Q6_K: 256) that gem_dmv_supported
 * takes;
 * else 0. */
int gem_dmatrix_tiles_ok(gem_gguf_type type, int64_t rows, int64_t cols);

/* w->data (rows * row_bytes bytes, device) = the tiles of the file-order rows at src
 * (the same bytes, device, not overlapping w->data); sets w->layout to the type's tiles
 * (GEM_DLAYOUT_Q4_0_TILES, GEM_DLAYOUT_Q4_K_TILES, GEM_DLAYOUT_Q6_K_TILES,
 * GEM_DLAYOUT_Q8_0_TILES or GEM_DLAYOUT_BF16_TILES). w describes the matrix (layout ignored on
 * entry).
 * GEM_ERR_UNSUPPORTED when gem_dmatrix_tiles_ok refuses it, GEM_ERR_OVERLAP,
 * GEM_ERR_NULL, GEM_ERR_DEVICE. */
gem_status gem_dmatrix_tile(gem_dmatrix *w, const void *src, void *stream);

/* Bytes of the x scratch (`xq` below) that a product of cols columns on a tiled
 * matrix needs; 0 for cols < 1. */
size_t gem_dmv_xq_bytes(int64_t cols);

/* 1 when the device kernels take this type (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)
 * with this row length (a multiple of the type's block), else 0. */
int gem_dmv_supported(gem_gguf_type type, int64_t cols);

/* y[r] = W[r, :] . x for r < w->rows.  x (w->cols) device F32, y (w->rows) device F32;
 * y must not overlap x. xq: device scratch of gem_dmv_xq_bytes(w->cols) bytes, 16-byte
 * aligned, overlapping neither x nor y, written by the call; required (GEM_ERR_NULL)
 * when the matrix is tiled, unused (may be NULL) otherwise. GEM_ERR_UNSUPPORTED for a
 * type / cols gem_dmv_supported refuses, GEM_ERR_DEVICE when the launch fails. */
gem_status gem_dmv(const gem_dmatrix *w, const float *x, float *y, void *xq, void *stream);

/* Up to three products with one x in one launch per type and layout (the q, k and v
 * projections): y[i][r] = w[i][r, :] . x.  n in 1..3; every w[i]->cols equal; w (n),
 * y (n); xq as gem_dmv's. */
gem_status gem_dmv_multi(int n, const gem_dmatrix *const *w, const float *x, float *const *y,
                         void *xq, void *stream);

/* The MLP's first half in one launch: y[r] = gelu_tanh(Wg[r, :] . x) * (Wu[r, :] . x),
 * gelu_tanh(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) in F32.
 * wg and wu of the same shape; x (cols), y (rows); xq as gem_dmv's. Tiled matrices
 * only in pairs of one layout (GEM_ERR_UNSUPPORTED when one of the two is tiled, or the
 * two are tiles of two types); on tiles the two sums are gem_dmv's bit for bit. */
gem_status gem_dmv_geglu(const gem_dmatrix *wg, const gem_dmatrix *wu, const float *x, float *y,
                         void *xq, void *stream);

/* gem_dmv_multi and gem_dmv_geglu for a caller whose own kernel, earlier on `stream`, wrote
 * x's scratch into xq: gem_tiles_xq_block (tiles_arith.cuh) of every 32-element block of x
 * and, when one of the matrices is BF16 in tiles, gem_tiles_xq_pieces of every element, after
 * it had finished writing x and no earlier product still read xq. The tiled matrices
 * read xq as it stands, with no scratch kernel of their own, and give the same bits as the
 * unprepared call on that x; the other matrices read x. x, w, y and xq as gem_dmv_multi's / gem_dmv_geglu's (x is still checked:
 * it is the vector the scratch was made from). */
gem_status gem_dmv_multi_prepared(int n, const gem_dmatrix *const *w, const float *x,
                                  float *const *y, void *xq, void *stream);
gem_status gem_dmv_geglu_prepared(const gem_dmatrix *wg, const gem_dmatrix *wu, const float *x,
                                  float *y, void *xq, void *stream);

/* Row `row` of w dequantized and multiplied by `scale` (the embedding lookup):
 * y (w->cols) F32 device, the same bits in either layout. GEM_ERR_RANGE for a row
 * outside the matrix. */
gem_status gem_dmv_row(const gem_dmatrix *w, int64_t row, float scale, float *y, void *stream);
/* As gem_dmv_row, the row read from device memory when the kernel runs: drow (one int32,
 * device, 4-byte aligned), so that a queued or captured token can take the token id that an
 * earlier kernel writes (the argmax before it). A row outside the matrix is not an error here:
 * y is then NaN, which fails the token that reads it on its finiteness flag. */
gem_status gem_dmv_row_at(const gem_dmatrix *w, const int32_t *drow, float scale, float *y,
                          void *stream);

/* Bytes of gem_dargmax's scratch for n values; 0 for n outside 1 .. INT32_MAX. */
size_t gem_dargmax_scratch_bytes(int64_t n);

/* *idx (device int32) = the index of the largest of x (n, device F32), the lowest index among
 * equal values (-0 equals +0): the greedy token of the logits. A NaN never wins; 0 when no
 * value is a number. scratch: gem_dargmax_scratch_bytes(n) bytes of device memory, 8-byte
 * aligned, overlapping neither x nor idx. Two launches (argmax.cu), no atomics: the same index
 * on every call. GEM_ERR_NULL, GEM_ERR_SHAPE (n), GEM_ERR_ALIGN, GEM_ERR_NO_DEVICE,
 * GEM_ERR_DEVICE. */
gem_status gem_dargmax(const float *x, int64_t n, int32_t *idx, void *scratch, void *stream);

/* Fills w->data with valid blocks of w->type from a counter-based generator on
 * (seed, element or block index): elements roughly uniform in [-amp, amp], every
 * scale finite. For random-weight models generated on the device. The same bits
 * for the same (type, shape, seed, amp). File-order rows only (GEM_ERR_UNSUPPORTED
 * for tiles: fill the rows, then gem_dmatrix_tile). */
gem_status gem_dmatrix_fill_random(const gem_dmatrix *w, uint64_t seed, float amp, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* GEM_MODEL_CUDA_H */
