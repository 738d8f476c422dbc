/*
 * Internal to src/model/cuda: the tiled Q4_0, Q4_K, Q6_K, Q8_0 and BF16 products of
 * matvec_tiles.cu, called by matvec.cu's entries after their checks (model_cuda.h has the
 * contracts).
 */
#ifndef GEM_MATVEC_TILES_H
#define GEM_MATVEC_TILES_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "gem/attn.h"

/* The element type of a launch's tiles. */
enum class TileKind { kQ4_0, kQ4_K, kQ6_K, kQ8_0, kBF16 };

/* One matrix of a launch: data (rows / 8 tiles), y (rows); tile0 is set by the launch. */
struct TileMat {
    const unsigned char *data;
    float *y;
    int64_t rows, tile0;
};

/* A launch: nmat matrices (1..3; GeGLU: 2, the gate then the up matrix) of cols columns,
 * all tiles of one kind, xq the caller's scratch (gem_tiles_xq_bytes(cols)); nchunks and cpw
 * (chunks a warp; for Q4_K and Q6_K an even count, whole super-blocks) are set by it. */
struct TileParams {
    TileMat mat[3];
    int nmat;
    TileKind kind;
    int64_t cols, nchunks, cpw;
    const unsigned char *xq;
};

/* 1 when a matrix of this kind and rows x cols can be tiled: rows a multiple of 8, cols a
 * multiple of 128 (Q4_0, Q8_0, BF16; Q4_K and Q6_K: 256) and at most max_cols. */
int gem_tiles_shape_ok(TileKind kind, int64_t rows, int64_t cols, int64_t max_cols);

/* Bytes of the x scratch for cols columns: the digits, then the BF16 pieces (tiles_arith.cuh). */
size_t gem_tiles_xq_bytes(int64_t cols);

/* dst (rows * row_bytes bytes, device) = the tiles of the rows of this kind at src (rows,
 * row_bytes, device). src and dst must not overlap. */
gem_status gem_tiles_from_rows(TileKind kind, const unsigned char *src, size_t row_bytes,
                               int64_t rows, int64_t cols, unsigned char *dst, cudaStream_t s);

/* y (cols) = row `row` of the tiled Q4_0 matrix at data (rows x cols), dequantized, times
 * scale; with drow (one int32, device) the row *drow instead, read when the kernel runs (NaN in
 * y where it lies outside [0, rows)). */
gem_status gem_tiles_row(const unsigned char *data, int64_t rows, int64_t cols, int64_t row,
                         const int32_t *drow, float scale, float *y, cudaStream_t s);

/* The product (geglu: y = gelu(gate x) * (up x)) of x (cols, device F32): the x scratch, its
 * BF16 pieces too when `pieces` (unless xq_ready: then p.xq already holds it, written by the
 * caller's kernel with gem_tiles_xq_block, and gem_tiles_xq_pieces when BF16 tiles read it,
 * from the same x, and x is not read), then the tiles. A launch of BF16 tiles needs the
 * pieces. */
gem_status gem_tiles_launch(TileParams p, const float *x, bool geglu, bool xq_ready,
                            bool pieces, cudaStream_t s);

#endif /* GEM_MATVEC_TILES_H */
