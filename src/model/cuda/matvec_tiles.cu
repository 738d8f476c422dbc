/*
 * Q4_0, Q4_K, Q6_K and Q8_0 matrix-vector products on the tensor cores, in integers, and BF16
 * ones in BF16 (model_cuda.h's GEM_DLAYOUT_Q4_0_TILES, GEM_DLAYOUT_Q4_K_TILES,
 * GEM_DLAYOUT_Q6_K_TILES, GEM_DLAYOUT_Q8_0_TILES and GEM_DLAYOUT_BF16_TILES): the production
 * product for Q4_0, Q8_0 and BF16 matrices whose rows are a multiple of 8 and whose columns are
 * a multiple of 128 (every Gemma 4 projection), and for Q4_K and Q6_K ones of 256-column
 * multiples ("Q4_K", "Q6_K", "Q8_0" and "BF16" below).
 *
 * Lineage: dev/cuda/model_matvec.cu measured the F32 product of matvec.cu (which
 * dequantizes every weight and multiplies it in F32) at 18-37% of the read bandwidth
 * for Q4_0, issue-bound at about five lane instructions per weight. This kernel spends
 * about 0.05 warp instructions per weight: the 4-bit integers go to the tensor cores
 * as they are (mma m16n8k32, u8 x s8 into s32), and F32 arithmetic is left for one
 * scale per block of 32 weights.
 *
 * x as integers (xq_kernel, once per product, into the caller's scratch). Each block
 * of 32 elements of x gets an exponent E (its largest |x| / 2^E in [32, 64)) and four
 * signed 8-bit digits per element, x = 2^E (a0 + a1 / 128 + a2 / 128^2 + a3 / 128^3) + r:
 * a0 = rint(x / 2^E), then each digit the rounded remainder times 128. Every step is
 * exact, every digit is in [-64, 64], and |r| <= 2^(E - 22) <= 2^-27 max|x| of the
 * block: the elements of the block's largest magnitude are represented exactly, a
 * smaller one to 2^-27 of the largest. With the Q4_0 value w = (n - 8) d:
 *
 *   y = sum_blocks d * sum_j 2^(E - 7j) * S_j,   S_j = sum_k (n_k - 8) a_jk   (exact, |S_j| <= 2^14)
 *
 * S_j comes out of the tensor core exactly (integers; the - 8 sum a_jk is the MMA's C
 * input); (d * 2^(E - 7j)) * S_j is exact inside an F32 fma, whose addition rounds. So
 * the only roundings are F32 additions of exact block terms (4 per block) plus the
 * representation error of x above: against the exact sum, |y - sum w x| <= (a few F32
 * roundings of sum|w x|) + 2^-27 sum_blocks max|x| sum|w|. A block of x with a value that
 * is not finite makes its scales NaN, so y is NaN wherever it is used. (An x whose
 * largest magnitude in a block is below about 2^-100 loses digits to underflow.)
 *
 * The layout. The matrix is stored in tiles of 8 rows; a tile is cols / 128 chunks of
 * 576 bytes, one per 4 blocks (128 columns), in the order the kernel reads them:
 *   bytes [0, 512): lane (g, t) of a warp (g = lane / 4, t = lane % 4) reads 16 bytes at
 *     16 * lane: the t-th 32-bit word of the 16 nibble bytes of row g's blocks 4c .. 4c+3;
 *   bytes [512, 576): the 32 f16 scales: lane (g, t) with h = g / 4 reads 8 bytes at
 *     512 + 8 * (4h + t): d of rows 2t and 2t+1 in block 4c+h, then in block 4c+2+h.
 * The same 18 bytes a block for the same values (gem_dmatrix_tile converts; gem_dmv_row
 * reads rows back from it).
 *
 * One chunk, one warp, four MMAs. The weights are B (k 32 x n 8: the 8 rows of the tile,
 * each lane's word as it is: low nibbles are elements 4t..4t+3, high ones 16+4t..16+4t+3,
 * exactly B's fragment after a mask and a shift). The digits are A (m 16 x k 32): MMA i
 * (block 4c+i) puts block 4c+i's four digits in rows 4i..4i+3 and zeros elsewhere, and the
 * four MMAs accumulate into one D, so D row 4i+j, column r is S_j of block 4c+i, row r:
 * every lane holds four useful sums, each scaled once. Lane (g, t) reads its A fragments
 * from 32 bytes of the scratch (digits g % 4 of blocks 4c + g/4 and 4c + 2 + g/4, their
 * - 8 sum a_j and the two scales 2^(E - 7j)), masked per MMA by a lane constant.
 *
 * Launches. The scratch kernel and the product are launched as programmatic dependents
 * (griddepcontrol): the product's blocks start while the kernels before it finish, issue
 * their first weight loads, and wait for the scratch before they read it or write y. The
 * weights are the only memory touched before the wait. The plain product loads batches of
 * chunks into registers; GeGLU runs the plain product's warps for both of its matrices in
 * one block (the first half the gate's rows, the second the up's), so each of its warps holds
 * what a plain product's does (geglu_kernel's comment has the measurements).
 *
 * Order. Each lane adds its four block terms per chunk into four F32 accumulators in
 * chunk order; then the two of a row are added, the warp sums its lanes by the xor tree
 * 4, 8, 16, and the block's warps (a split of the chunks that depends only on cols) are
 * added in warp order by one thread per row. No atomics; the same bits on every call and
 * for a row in gem_dmv, gem_dmv_multi and GeGLU (whose two sums are gem_dmv's, bit for bit).
 *
 * Q4_K (GGUF: a super-block of 256 elements, 144 bytes: d and dmin in f16, twelve bytes of
 * six-bit scales sc_s and mins m_s of its eight 32-element sub-blocks, 128 nibble bytes with
 * sub-block 2c in the low nibbles of bytes 32c..32c+31 and 2c+1 in their high ones;
 * w = d sc_s q - dmin m_s, q in 0..15). The tiles hold the same bytes: a tile's super-block is
 * 1,152 bytes, two halves of 512 (lane (g, t) reads 16 bytes at 16 lane: row g's nibble words
 * at 64 half + 4t, + 16, + 32, + 48, i.e. elements 4t..4t+3 and 16+4t..16+4t+3 of the half's
 * four sub-blocks, B's fragments after a mask and a shift) and the 8 rows' 16 header bytes as
 * the file has them. A half is a chunk of 128 columns and takes the Q4_0 chunk's four MMAs
 * with C = 0, so S_j = sum q a_j exactly; each of a lane's four sums (rows 2t, 2t+1 of its two
 * sub-blocks) then adds fma(d1 2^(E - 7j), S_j) and fma(-m1 2^(E - 7j), Xd_j) (d1 = d sc,
 * m1 = dmin m: exact in F32, the products exact inside the fmas; Xd_j = sum a_j, from the
 * scratch's correction). The scales of a lane's sub-blocks (h, 2 + h, 4 + h, 6 + h) are bytes h
 * and 2 + h of the scale words shifted by 8 h, decoded two at a time. The error is within a few
 * F32 roundings of sum_s (d1 sum|q x| + m1 sum|x|) plus the digits' representation error,
 * 2^-27 of each block's max|x| times (d1 sum q + 32 m1). A warp owns whole super-blocks (at
 * most 6, the warps a power of two up to 16) and loads one at a time into registers, the next while it computes (dev/cuda/tiles_q4k version 3; version
 * 2's batches of two took 78 registers and lost on every shape but k; run 190 on an H100: 1.6-
 * 2.2x the F32 kernel, the head at 94.5% of the read probe).
 *
 * Q6_K (GGUF: a super-block of 256 elements, 210 bytes: 128 bytes ql of low nibbles, 64 bytes qh
 * of high two-bit pairs, sixteen int8 scales sc_u of 16-element sub-blocks, d in f16; in half n,
 * element 32 i + l has q = nibble (low for i < 2) of ql[64 n + l + 32 (i & 1)] | bits 2i..2i+1
 * of qh[32 n + l] << 4, w = d sc_u (q - 32), q in 0..63). The tiles hold the same bytes: a
 * tile's super-block is 1,680 bytes: the ql of both halves as the Q4_K tiles' nibbles (1,024),
 * the qh of a lane's elements 4t..4t+3 and 16+4t..16+4t+3 as two words a half (512: a qh byte
 * holds an element's high bits for the half's four blocks, so one word serves four B
 * fragments), the scales of the lanes that share rows and blocks in one 16-byte word (128), the
 * rows' d (16); tiles_arith.cuh has the offsets. A half is a chunk; a B fragment is (nibbles &
 * 0x0F) | (the qh bits at 4..5), q in 0..63, u8. A 16-element sub-block has its own scale, so a
 * lane keeps two sums a chunk per block and row: an s8 x s8 MMA with B = -32 over the sub-
 * block's k starts each at -32 sum a_j, then two u8 MMAs add q a_j, one MMA covering the sub-
 * block of blocks i (k 0..15) and i + 2 (k 16..31); six MMAs a chunk, every S_ju = sum (q - 32)
 * a_j exact (|S| <= 2^15), each added as fma((d 2^(E - 7j)) sc_u, S_ju), the coefficient exact.
 * The error is within a few F32 roundings of sum_u |d sc_u| sum |(q - 32) x| plus the digits'
 * representation error, 2^-27 of each 32-block's max|x| times its sum |w|. The loop is Q4_K's
 * (dev/cuda/tiles_q6k version 1).
 *
 * Q8_0 (GGUF: a block of 32 elements, 34 bytes: d in f16, then 32 signed bytes q; w = d q). The
 * tiles hold the same bytes: a chunk of 128 columns is 1,088 bytes, lane (g, t) reading 16 bytes
 * at 16 lane (row g's elements 4t..4t+3 and 16+4t..16+4t+3 of blocks 4c and 4c + 1, B's fragment
 * words as they are) and 16 at 512 + 16 lane (blocks 4c + 2 and 4c + 3), then the 32 d at 1024
 * in the Q4_0 chunk's order. A chunk takes the Q4_0 chunk's four MMAs as s8 x s8 with C = 0, so
 * S_j = sum q a_j exactly (|S_j| <= 2^18), and the same scaling; the weights d q are exact in
 * F32, so Q4_0's bound holds. A warp owns at most 6 chunks and loads two at a time, about the
 * Q4_0 split's bytes a warp and in flight (dev/cuda/tiles_q8_0, results/h200/run198 on an H100,
 * chained against the F32 kernel: k 17.8 -> 11.5 us, q 32.0 -> 19.3, down 72.9 -> 45.9, the head
 * 556 -> 474, at the read probe; 12 chunks a warp or batches of four were slower or even).
 *
 * BF16 (GGUF: two bytes an element, F32's upper half). The weights have no common scale, so the
 * product runs on the BF16 tensor cores in floating point: x is split into three BF16 pieces,
 * x = h + m + l exactly (the scratch's second part, tiles_arith.cuh's gem_tiles_xq_pieces),
 * and mma m16n8k16 (bf16 x bf16 into F32) takes the weights as B (the tile's 8 rows) and the
 * pieces as A's rows 0..2, so every product is exact and D row p holds piece p's sums. The tiles
 * hold the same bytes: a chunk of 128 columns is 2,048 bytes, four quarters of 512 in which lane
 * (g, t) reads 16 bytes at 16 lane (row g's columns 8t..8t+7 of the quarter: two MMAs' B, in
 * order); the lane reads the same columns of its piece from the scratch. The tensor core adds
 * the products of a chunk's eight MMAs in its own rounding (at most a few units of 2^-23 of
 * the chunk's sum|w x| an MMA); the chunks' sums are added in F32. Bound, tested: the file-order
 * kernel's, 1e-5 sum|w x|; unit vectors give the weights exactly (the other pieces are 0).
 * dev/cuda/tiles_bf16 (results/h200/run199, an H200, chained, F32 kernel / tiles / cuBLAS with x
 * rounded to BF16): q 27.0 / 26.6 / 24.9 us, gate 69.8 / 58.4 / 63.0, down 66.8 / 59.1 / 60.4,
 * the head 681 / 617 / 659 (100.8% of the read probe); 6 chunks a warp, or A loaded with its
 * zero words (no register moves around the MMAs), were slower or even.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "matvec_tiles.h"
#include "cuda/gem_pdl.cuh"
#include "tiles_arith.cuh"

namespace {

constexpr int kTileRows = 8;
constexpr int kChunkElems = 128;
constexpr int kChunkBytes = 576;
constexpr int kXqLaneBytes = GEM_TILES_XQ_LANE_BYTES;
constexpr int kXqChunkBytes = GEM_TILES_XQ_CHUNK_BYTES;
/* The plain product's split: at most 12 chunks a warp, the warps of a block rounded up to a
 * power of two (up to 16), so that blocks fill an SM's 32 warps at 64 registers. A warp's
 * fixed work (its tile, addresses, the reduction) was a third of the product's instructions
 * at 8 chunks a warp (ncu, H200 run 145: 92-98 a 576-byte chunk); dev/cuda/tiles_split (run
 * 146, chained) at 5376 columns, 4 warps of 11 chunks where 8 chunks a warp made 6 warps of 7:
 * q 13.02 -> 11.42 us, the head 212.8 -> 200.2 us (82% -> 87% of the read probe); at 8192,
 * 16384 and 21504 columns this rule keeps 8, 16 and 16 warps, the 8-chunk split's. (k alone,
 * 512 tiles, lost: 8.5 -> 11.1 us; the decoder runs it in one launch with q and v.) */
constexpr int kPlainChunksPerWarp = 12;
constexpr int kMaxWarps = 16; /* 512 threads (GeGLU: twice, 1,024: up to 64 registers) */
constexpr int kBatch = 4; /* chunks whose loads a warp issues together (the plain product) */
constexpr unsigned kFull = 0xffffffffu;
constexpr int kSbBytes = GEM_TILES_Q4K_SB_BYTES;
/* the Q4_K and Q6_K products: super-blocks a warp, at most */
constexpr int kQ4kSbPerWarp = 6;
constexpr int kQ6kSbBytes = GEM_TILES_Q6K_SB_BYTES;
constexpr int kQ8ChunkBytes = GEM_TILES_Q8_0_CHUNK_BYTES;
constexpr int kQ8Batch = 2; /* Q8_0 chunks whose loads a warp issues together */
/* the Q8_0 product's split: at most this many chunks a warp, the plain rule otherwise */
constexpr int kQ8ChunksPerWarp = 6;
constexpr int kBf16ChunkBytes = GEM_TILES_BF16_CHUNK_BYTES;
/* the BF16 product's split: at most this many chunks a warp (about the Q4_0 split's bytes) */
constexpr int kBf16ChunksPerWarp = 3;

/* Byte offsets inside a tile: word t of the nibbles of row g (0..7) in block 4c+i, and
 * the f16 d of row r in block 4c+i. */
__host__ __device__ inline size_t qs_off(int64_t c, int g, int t, int i)
{
    return (size_t)c * kChunkBytes + (size_t)(16 * (4 * g + t) + 4 * i);
}
__host__ __device__ inline size_t d_off(int64_t c, int r, int i)
{
    return (size_t)c * kChunkBytes + 512 + (size_t)(8 * (4 * (i & 1) + (r >> 1)) +
                                                    2 * (2 * (i >> 1) + (r & 1)));
}

/* rows (rows, row_bytes) in the file's Q4_0 layout -> tiles; one thread per block. */
__global__ void tile_kernel(const unsigned char *__restrict__ src, size_t row_bytes,
                            int64_t rows, int64_t nb, unsigned char *__restrict__ dst)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * nb)
        return;
    const int64_t r = i / nb, b = i % nb, c = b / 4;
    const int g = (int)(r % kTileRows), bi = (int)(b % 4);
    const unsigned char *s = src + (size_t)r * row_bytes + (size_t)b * 18;
    unsigned char *t = dst + (size_t)(r / kTileRows) * (size_t)(nb / 4) * kChunkBytes;
    t[d_off(c, g, bi)] = s[0];
    t[d_off(c, g, bi) + 1] = s[1];
    for (int w = 0; w < 4; w++)
        for (int k = 0; k < 4; k++)
            t[qs_off(c, g, w, bi) + (size_t)k] = s[2 + 4 * w + k];
}

/* Row r of a tiled matrix dequantized times scale, as matvec.cu's row_kernel: the same
 * bits as gem_gguf_dequant * scale. One thread per block. */
__global__ void tile_row_kernel(const unsigned char *__restrict__ data, int64_t rh,
                                const int32_t *__restrict__ drow, int64_t rows, int64_t nb,
                                float scale, float *__restrict__ y)
{
    const int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb)
        return;
    const int64_t r = gem_row_at(rh, drow, rows);
    if (r < 0) { /* a row from device memory outside the matrix: NaN, for the token's flag */
        for (int j = 0; j < 32; j++)
            y[32 * b + j] = __int_as_float(0x7fc00000);
        return;
    }
    const unsigned char *t = data + (size_t)(r / kTileRows) * (size_t)(nb / 4) * kChunkBytes;
    const int g = (int)(r % kTileRows), bi = (int)(b % 4);
    const int64_t c = b / 4;
    const unsigned short dh =
        (unsigned short)(t[d_off(c, g, bi)] | (t[d_off(c, g, bi) + 1] << 8));
    const float d = __half2float(__ushort_as_half(dh));
    for (int w = 0; w < 4; w++)
        for (int k = 0; k < 4; k++) {
            const int q = t[qs_off(c, g, w, bi) + (size_t)k], j = 4 * w + k;
            y[32 * b + j] = __fmul_rn(__fmul_rn((float)((q & 0xf) - 8), d), scale);
            y[32 * b + 16 + j] = __fmul_rn(__fmul_rn((float)((q >> 4) - 8), d), scale);
        }
}

/* x (cols) -> the digits, corrections and scales of each lane (module comment), and x's BF16
 * pieces when kPieces (a template argument, so that the kernel without them is the one measured
 * before them); one warp per block of 32 elements, lane = element. */
template <bool kPieces>
__global__ void xq_kernel(const float *__restrict__ x, int64_t nblk, unsigned char *__restrict__ xq)
{
    pdl_trigger(); /* the product's blocks may start and fetch their first weights */
    pdl_wait();    /* x is the previous kernel's output; xq may still be read by it */
    const int lane = threadIdx.x & 31;
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= nblk)
        return; /* the whole warp */
    const float v = x[32 * b + lane];
    gem_tiles_xq_block(v, b, xq, lane);
    if (kPieces)
        gem_tiles_xq_pieces(v, 32 * b + lane, 32 * nblk, xq);
}

/* The end of a plain tile product, called by every thread of the block: a warp's four
 * accumulators (a lane's rows 2t and 2t + 1 of two blocks) added per row, then by the xor tree
 * 4, 8, 16; the block's warps added in warp order by one thread per row into y (the tile's 8
 * outputs). */
__device__ __forceinline__ void tile_rows_out(float (&red)[kMaxWarps][kTileRows],
                                              const float (&a)[4], float *y)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float r0 = a[0] + a[2], r1 = a[1] + a[3];
    for (int o = 4; o < 32; o <<= 1) {
        r0 += __shfl_xor_sync(kFull, r0, o);
        r1 += __shfl_xor_sync(kFull, r1, o);
    }
    if (g == 0) {
        red[warp][2 * t] = r0;
        red[warp][2 * t + 1] = r1;
    }
    __syncthreads();
    if (threadIdx.x < kTileRows) {
        const int nw = (int)(blockDim.x >> 5), r = (int)threadIdx.x;
        float s = red[0][r];
        for (int w = 1; w < nw; w++)
            s += red[w][r];
        y[r] = s;
    }
}

/* A warp's chunks in the plain split: [cb, cb + the count returned), warp p.cpw on; a warp
 * past the tile's chunks has none. */
__device__ __forceinline__ uint32_t warp_chunks(const TileParams &p, int warp, int64_t &cb)
{
    const int64_t cw = (int64_t)warp * p.cpw;
    cb = cw < p.nchunks ? cw : p.nchunks;
    const int64_t ce = cb + p.cpw < p.nchunks ? cb + p.cpw : p.nchunks;
    return (uint32_t)(ce - cb);
}

/* One warp's share of a tile's row sums in the plain split (its chunks [warp p.cpw, + p.cpw)
 * of the tile at `tile`, a matrix's data) into a0; loads in batches of kBatch chunks into
 * registers, the first before the launch wait. A warp counts its chunks in 32 bits and steps
 * its weight and scratch pointers a batch at a time. Lineage: dev/cuda/tiles_lean
 * (results/h200/run170): the loop with 64-bit chunk indices and offsets took 92-94 warp
 * instructions a 576-byte chunk (ncu), this one 82-84, the same bits (the same tests, loads and
 * order of additions). */
__device__ __forceinline__ void q4_0_warp(const TileParams &p, const unsigned char *data,
                                          int64_t tile, int warp, float (&a0)[4])
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = g >> 2;
    const size_t tile_bytes = (size_t)p.nchunks * kChunkBytes;
    const uint32_t m0 = h ? 0u : kFull;
    int64_t cb;
    const uint32_t n = warp_chunks(p, warp, cb);
    const unsigned char *wp =
        data + (size_t)tile * tile_bytes + (size_t)cb * kChunkBytes + (size_t)16 * lane;
    const size_t dl = (size_t)(512 + 8 * (4 * h + t)) - (size_t)16 * lane; /* from wp */
    const unsigned char *xp = p.xq + (size_t)cb * kXqChunkBytes + (size_t)kXqLaneBytes * lane;
    uint4 wq[kBatch];
    uint2 dd[kBatch];
    /* the batch at w: all kBatch chunks when left >= kBatch, else the first left */
    auto load = [&](const unsigned char *w, uint32_t left) {
#pragma unroll
        for (int k = 0; k < kBatch; k++) {
            if ((uint32_t)k < left) {
                wq[k] = __ldcs(reinterpret_cast<const uint4 *>(w + (size_t)k * kChunkBytes));
                dd[k] = __ldcs(reinterpret_cast<const uint2 *>(w + (size_t)k * kChunkBytes + dl));
            }
        }
    };
    load(wp, n);  /* the first weights stream while the kernels before finish */
    pdl_wait(); /* then x's scratch is complete and y free to write */
    for (uint32_t c = 0; c < n; c += kBatch) {
#pragma unroll
        for (int k = 0; k < kBatch; k++) {
            if (c + (uint32_t)k < n) {
                const uint4 *xc = reinterpret_cast<const uint4 *>(xp + (size_t)k * kXqChunkBytes);
                gem_tiles_chunk(wq[k], dd[k], __ldg(xc), __ldg(xc + 1), m0, a0);
            }
        }
        wp += (size_t)kBatch * kChunkBytes;
        xp += (size_t)kBatch * kXqChunkBytes;
        if (c + kBatch < n)
            load(wp, n - c - kBatch); /* the next batch once this one is done */
    }
}

/* The matrix of a plain launch that blockIdx.x falls in (m) and its tile there. */
__device__ __forceinline__ int tile_of(const TileParams &p, int64_t &tile)
{
    tile = blockIdx.x;
    int m = 0;
    while (m + 1 < p.nmat && tile >= p.mat[m + 1].tile0)
        m++;
    tile -= p.mat[m].tile0;
    return m;
}

/* Block = one tile (of the matrix mat[m] that blockIdx.x falls in), warps = the split of
 * its chunks (q4_0_warp). */
__global__ void __launch_bounds__(kMaxWarps * 32) q4t_kernel(const TileParams p)
{
    __shared__ float red[kMaxWarps][kTileRows];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int64_t tile;
    const int m = tile_of(p, tile);
    float a0[4] = {0.f, 0.f, 0.f, 0.f};
    pdl_trigger();
    q4_0_warp(p, p.mat[m].data, tile, warp, a0);
    /* tile_rows_out's steps, written out: through it ptxas gives this kernel other SASS (more
     * registers) than the one every run since run 171 measured */
    float r0 = a0[0] + a0[2], r1 = a0[1] + a0[3];
    for (int o = 4; o < 32; o <<= 1) {
        r0 += __shfl_xor_sync(kFull, r0, o);
        r1 += __shfl_xor_sync(kFull, r1, o);
    }
    if (g == 0) {
        red[warp][2 * t] = r0;
        red[warp][2 * t + 1] = r1;
    }
    __syncthreads();
    if (threadIdx.x < kTileRows) {
        const int nw = (int)(blockDim.x >> 5), r = (int)threadIdx.x;
        float s = red[0][r];
        for (int w = 1; w < nw; w++)
            s += red[w][r];
        p.mat[m].y[(size_t)tile * kTileRows + (size_t)r] = s;
    }
}

/* ---- Q4_K ----------------------------------------------------------------------------------- */

/* rows (rows, row_bytes) in the file's Q4_K layout -> tiles; one thread per (row, super-block). */
__global__ void tile_q4k_kernel(const unsigned char *__restrict__ src, size_t row_bytes,
                                int64_t rows, int64_t nsb, unsigned char *__restrict__ dst)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * nsb)
        return;
    const int64_t r = i / nsb, b = i % nsb;
    const int g = (int)(r % kTileRows);
    const unsigned char *s = src + (size_t)r * row_bytes + (size_t)b * 144;
    unsigned char *t = dst + ((size_t)(r / kTileRows) * (size_t)nsb + (size_t)b) * kSbBytes;
    for (int k = 0; k < 16; k++) /* d, dmin, the scales */
        t[1024 + 16 * g + k] = s[k];
    for (int k = 0; k < 128; k++)
        t[gem_tiles_q4k_qs_off(g, k)] = s[16 + k];
}

/* One super-block's loads: both halves' nibble words (w: the lane's) and rows 2t, 2t + 1's
 * headers (hp: the tile's super-block + 1024 + 32 t). */
struct Q4kSb {
    uint4 wq0, wq1, h0, h1;
};
__device__ __forceinline__ Q4kSb q4k_load(const unsigned char *w, const unsigned char *hp)
{
    Q4kSb b;
    b.wq0 = __ldcs(reinterpret_cast<const uint4 *>(w));
    b.wq1 = __ldcs(reinterpret_cast<const uint4 *>(w + 512));
    b.h0 = __ldcs(reinterpret_cast<const uint4 *>(hp));
    b.h1 = __ldcs(reinterpret_cast<const uint4 *>(hp + 16));
    return b;
}

/* One warp's share of a Q4_K tile's row sums in the plain split (its super-blocks [warp
 * p.cpw / 2, + p.cpw / 2)) into acc; the next super-block loaded while it computes one, the
 * first before the launch wait. */
__device__ __forceinline__ void q4_k_warp(const TileParams &p, const unsigned char *data,
                                          int64_t tile, int warp, float (&acc)[4])
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = g >> 2;
    const int64_t nsb = p.nchunks / 2, spw = p.cpw / 2;
    const uint32_t m0 = h ? 0u : kFull, sh = 8u * (uint32_t)h;
    /* this warp's super-blocks [sb0, sb0 + left); a warp past the tile's has none */
    const int64_t sw = (int64_t)warp * spw;
    const int64_t sb0 = sw < nsb ? sw : nsb;
    const int64_t sbe = sb0 + spw < nsb ? sb0 + spw : nsb;
    uint32_t left = (uint32_t)(sbe - sb0);
    const unsigned char *const w0 = data + ((size_t)tile * (size_t)nsb + (size_t)sb0) * kSbBytes;
    const unsigned char *wp = w0 + (size_t)16 * lane;    /* nibble words, half 0 */
    const unsigned char *hp = w0 + 1024 + (size_t)32 * t; /* rows 2t, 2t + 1 */
    const unsigned char *xp =
        p.xq + (size_t)(2 * sb0) * kXqChunkBytes + (size_t)kXqLaneBytes * lane;
    Q4kSb b = {};
    if (left)
        b = q4k_load(wp, hp); /* the first weights stream while the kernels before finish */
    pdl_wait();             /* then x's scratch is complete and y free to write */
    while (left) {
        const uint4 *xc = reinterpret_cast<const uint4 *>(xp);
        gem_tiles_q4k_chunk<0>(b.wq0, b.h0, b.h1, sh, __ldg(xc), __ldg(xc + 1), m0, acc);
        const uint4 *xd = reinterpret_cast<const uint4 *>(xp + kXqChunkBytes);
        gem_tiles_q4k_chunk<1>(b.wq1, b.h0, b.h1, sh, __ldg(xd), __ldg(xd + 1), m0, acc);
        left--;
        wp += kSbBytes;
        hp += kSbBytes;
        xp += 2 * kXqChunkBytes;
        if (left)
            b = q4k_load(wp, hp); /* the next super-block once this one is done */
    }
}

/* ---- Q6_K ----------------------------------------------------------------------------------- */

/* rows (rows, row_bytes) in the file's Q6_K layout -> tiles; one thread per (row, super-block). */
__global__ void tile_q6k_kernel(const unsigned char *__restrict__ src, size_t row_bytes,
                                int64_t rows, int64_t nsb, unsigned char *__restrict__ dst)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * nsb)
        return;
    const int64_t r = i / nsb, b = i % nsb;
    const int g = (int)(r % kTileRows);
    const unsigned char *s = src + (size_t)r * row_bytes + (size_t)b * 210;
    unsigned char *t = dst + ((size_t)(r / kTileRows) * (size_t)nsb + (size_t)b) * kQ6kSbBytes;
    for (int k = 0; k < 128; k++)
        t[gem_tiles_q4k_qs_off(g, k)] = s[k];
    for (int k = 0; k < 64; k++)
        t[gem_tiles_q6k_qh_off(g, k)] = s[128 + k];
    for (int k = 0; k < 16; k++)
        t[gem_tiles_q6k_sc_off(g, k)] = s[192 + k];
    t[gem_tiles_q6k_d_off(g)] = s[208];
    t[gem_tiles_q6k_d_off(g) + 1] = s[209];
}

/* One super-block's loads of a lane: both halves' ql words, both halves' qh words, its scale
 * word and its rows' d. */
struct Q6kSb {
    uint4 wq0, wq1, sc;
    uint2 hq0, hq1;
    uint32_t dd;
};
/* The offsets of a lane's loads from its ql words (w, at 16 lane of the super-block). */
struct Q6kOffs {
    size_t qh, sc, d;
};
__device__ __forceinline__ Q6kOffs q6k_offs(int lane)
{
    const int t = lane & 3, h = lane >> 4;
    return Q6kOffs{(size_t)(1024 + 8 * lane) - (size_t)16 * lane,
                   (size_t)(1536 + 16 * (4 * h + t)) - (size_t)16 * lane,
                   (size_t)(1664 + 4 * t) - (size_t)16 * lane};
}
__device__ __forceinline__ Q6kSb q6k_load(const unsigned char *w, const Q6kOffs &o)
{
    Q6kSb b;
    b.wq0 = __ldcs(reinterpret_cast<const uint4 *>(w));
    b.wq1 = __ldcs(reinterpret_cast<const uint4 *>(w + 512));
    b.hq0 = __ldcs(reinterpret_cast<const uint2 *>(w + o.qh));
    b.hq1 = __ldcs(reinterpret_cast<const uint2 *>(w + o.qh + 256));
    b.sc = __ldcs(reinterpret_cast<const uint4 *>(w + o.sc));
    b.dd = __ldcs(reinterpret_cast<const unsigned int *>(w + o.d));
    return b;
}
/* Both chunks of a loaded super-block; x: the lane's scratch of its first chunk. */
__device__ __forceinline__ void q6k_sb(const Q6kSb &b, const unsigned char *x, uint32_t m0,
                                       float (&acc)[4])
{
    const uint4 *xc = reinterpret_cast<const uint4 *>(x);
    gem_tiles_q6k_chunk<0>(b.wq0, b.hq0, b.sc, b.dd, __ldg(xc), __ldg(xc + 1), m0, acc);
    const uint4 *xd = reinterpret_cast<const uint4 *>(x + kXqChunkBytes);
    gem_tiles_q6k_chunk<1>(b.wq1, b.hq1, b.sc, b.dd, __ldg(xd), __ldg(xd + 1), m0, acc);
}

/* One warp's share of a Q6_K tile's row sums in the plain split, as q4_k_warp's. */
__device__ __forceinline__ void q6_k_warp(const TileParams &p, const unsigned char *data,
                                          int64_t tile, int warp, float (&acc)[4])
{
    const int lane = threadIdx.x & 31, g = lane >> 2;
    const int64_t nsb = p.nchunks / 2, spw = p.cpw / 2;
    const uint32_t m0 = (g >> 2) ? 0u : kFull;
    const int64_t sw = (int64_t)warp * spw;
    const int64_t sb0 = sw < nsb ? sw : nsb;
    const int64_t sbe = sb0 + spw < nsb ? sb0 + spw : nsb;
    uint32_t left = (uint32_t)(sbe - sb0);
    const unsigned char *wp =
        data + ((size_t)tile * (size_t)nsb + (size_t)sb0) * kQ6kSbBytes + (size_t)16 * lane;
    const Q6kOffs o = q6k_offs(lane);
    const unsigned char *xp =
        p.xq + (size_t)(2 * sb0) * kXqChunkBytes + (size_t)kXqLaneBytes * lane;
    Q6kSb b = {};
    if (left)
        b = q6k_load(wp, o); /* the first weights stream while the kernels before finish */
    pdl_wait();              /* then x's scratch is complete and y free to write */
    while (left) {
        q6k_sb(b, xp, m0, acc);
        left--;
        wp += kQ6kSbBytes;
        xp += 2 * kXqChunkBytes;
        if (left)
            b = q6k_load(wp, o); /* the next super-block once this one is done */
    }
}

/* ---- Q8_0 ----------------------------------------------------------------------------------- */

/* rows (rows, row_bytes) in the file's Q8_0 layout -> tiles; one thread per block. */
__global__ void tile_q8_0_kernel(const unsigned char *__restrict__ src, size_t row_bytes,
                                 int64_t rows, int64_t nb, unsigned char *__restrict__ dst)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * nb)
        return;
    const int64_t r = i / nb, b = i % nb;
    const int g = (int)(r % kTileRows), bi = (int)(b % 4);
    const unsigned char *s = src + (size_t)r * row_bytes + (size_t)b * 34;
    unsigned char *t = dst + ((size_t)(r / kTileRows) * (size_t)(nb / 4) + (size_t)(b / 4)) *
                                 kQ8ChunkBytes;
    t[gem_tiles_q8_0_d_off(g, bi)] = s[0];
    t[gem_tiles_q8_0_d_off(g, bi) + 1] = s[1];
    for (int e = 0; e < 32; e++)
        t[gem_tiles_q8_0_qs_off(g, bi, e)] = s[2 + e];
}

/* One warp's share of a Q8_0 tile's row sums in the plain split (its chunks [warp p.cpw, +
 * p.cpw)) into a0: q4_0_warp's loop with batches of kQ8Batch chunks, the first before the
 * launch wait. */
__device__ __forceinline__ void q8_0_warp(const TileParams &p, const unsigned char *data,
                                          int64_t tile, int warp, float (&a0)[4])
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = g >> 2;
    const size_t tile_bytes = (size_t)p.nchunks * kQ8ChunkBytes;
    const uint32_t m0 = h ? 0u : kFull;
    int64_t cb;
    const uint32_t n = warp_chunks(p, warp, cb);
    const unsigned char *wp =
        data + (size_t)tile * tile_bytes + (size_t)cb * kQ8ChunkBytes + (size_t)16 * lane;
    const size_t dl = (size_t)(1024 + 8 * (4 * h + t)) - (size_t)16 * lane; /* from wp */
    const unsigned char *xp = p.xq + (size_t)cb * kXqChunkBytes + (size_t)kXqLaneBytes * lane;
    uint4 w01[kQ8Batch], w23[kQ8Batch];
    uint2 dd[kQ8Batch];
    /* the batch at w: all kQ8Batch chunks when left >= kQ8Batch, else the first left */
    auto load = [&](const unsigned char *w, uint32_t left) {
#pragma unroll
        for (int k = 0; k < kQ8Batch; k++) {
            if ((uint32_t)k < left) {
                const unsigned char *c = w + (size_t)k * kQ8ChunkBytes;
                w01[k] = __ldcs(reinterpret_cast<const uint4 *>(c));
                w23[k] = __ldcs(reinterpret_cast<const uint4 *>(c + 512));
                dd[k] = __ldcs(reinterpret_cast<const uint2 *>(c + dl));
            }
        }
    };
    load(wp, n); /* the first weights stream while the kernels before finish */
    pdl_wait();  /* then x's scratch is complete and y free to write */
    for (uint32_t c = 0; c < n; c += kQ8Batch) {
#pragma unroll
        for (int k = 0; k < kQ8Batch; k++) {
            if (c + (uint32_t)k < n) {
                const uint4 *xc = reinterpret_cast<const uint4 *>(xp + (size_t)k * kXqChunkBytes);
                gem_tiles_q8_0_chunk(w01[k], w23[k], dd[k], __ldg(xc), __ldg(xc + 1), m0, a0);
            }
        }
        wp += (size_t)kQ8Batch * kQ8ChunkBytes;
        xp += (size_t)kQ8Batch * kXqChunkBytes;
        if (c + kQ8Batch < n)
            load(wp, n - c - kQ8Batch); /* the next batch once this one is done */
    }
}

/* ---- BF16 ----------------------------------------------------------------------------------- */

/* rows (rows, row_bytes) in the file's BF16 layout -> tiles; one thread per (row, 8 columns). */
__global__ void tile_bf16_kernel(const unsigned char *__restrict__ src, size_t row_bytes,
                                 int64_t rows, int64_t cols, unsigned char *__restrict__ dst)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, n8 = cols / 8;
    if (i >= rows * n8)
        return;
    const int64_t r = i / n8, j = 8 * (i % n8);
    const int g = (int)(r % kTileRows);
    const unsigned char *s = src + (size_t)r * row_bytes + (size_t)j * 2;
    unsigned char *t = dst + ((size_t)(r / kTileRows) * (size_t)(cols / kChunkElems) +
                              (size_t)(j / kChunkElems)) *
                                 kBf16ChunkBytes +
                       (size_t)gem_tiles_bf16_off(g, (int)(j % kChunkElems));
    for (int k = 0; k < 16; k++)
        t[k] = s[k];
}

/* One warp's share of a BF16 tile's row sums in the plain split (its chunks [warp p.cpw, +
 * p.cpw)) into a[0..1]: a chunk's weights (2,048 bytes a warp, about a Q4_0 batch) loaded once
 * the one before is computed, the first before the launch wait; a lane g < 3 reads its piece of
 * x for the chunk before its MMAs, the others compute with zeros. */
__device__ __forceinline__ void bf16_warp(const TileParams &p, const unsigned char *data,
                                          int64_t tile, int warp, float (&a)[4])
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int64_t cb;
    uint32_t left = warp_chunks(p, warp, cb);
    const unsigned char *wp = data + ((size_t)tile * (size_t)p.nchunks + (size_t)cb) *
                                         kBf16ChunkBytes + (size_t)16 * lane;
    /* piece g of x, columns 128 cb + 8t.. (lane g >= 3: none) */
    const unsigned char *xp = p.xq + (size_t)p.nchunks * kXqChunkBytes +
                              2 * ((size_t)(g < 3 ? g : 0) * (size_t)(kChunkElems * p.nchunks) +
                                   (size_t)kChunkElems * (size_t)cb + (size_t)8 * t);
    uint4 w[4];
    auto load = [&](const unsigned char *c) {
#pragma unroll
        for (int s = 0; s < 4; s++)
            w[s] = __ldcs(reinterpret_cast<const uint4 *>(c + 512 * s));
    };
    if (left)
        load(wp); /* the first weights stream while the kernels before finish */
    pdl_wait();   /* then x's scratch is complete and y free to write */
    while (left) {
        uint4 xv[4];
#pragma unroll
        for (int s = 0; s < 4; s++)
            xv[s] = g < 3 ? __ldg(reinterpret_cast<const uint4 *>(xp + 64 * s))
                          : make_uint4(0u, 0u, 0u, 0u);
        gem_tiles_bf16_chunk(w, xv, a);
        left--;
        wp += kBf16ChunkBytes;
        xp += 2 * kChunkElems;
        if (left)
            load(wp); /* the next chunk once this one is done */
    }
}

/* The plain product on Q4_K, Q6_K, Q8_0 or BF16 tiles: block = one tile of the matrix mat[m]
 * that blockIdx.x falls in; warps = the split of its super-blocks or chunks (q4_k_warp,
 * q6_k_warp, q8_0_warp, bf16_warp). */
template <TileKind K>
__global__ void __launch_bounds__(kMaxWarps * 32) plain_tiles_kernel(const TileParams p)
{
    __shared__ float red[kMaxWarps][kTileRows];
    int64_t tile;
    const int m = tile_of(p, tile);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    pdl_trigger();
    if (K == TileKind::kQ4_K)
        q4_k_warp(p, p.mat[m].data, tile, (int)(threadIdx.x >> 5), acc);
    else if (K == TileKind::kQ6_K)
        q6_k_warp(p, p.mat[m].data, tile, (int)(threadIdx.x >> 5), acc);
    else if (K == TileKind::kQ8_0)
        q8_0_warp(p, p.mat[m].data, tile, (int)(threadIdx.x >> 5), acc);
    else
        bf16_warp(p, p.mat[m].data, tile, (int)(threadIdx.x >> 5), acc);
    tile_rows_out(red, acc, p.mat[m].y + (size_t)tile * kTileRows);
}

/* ---- GeGLU ---------------------------------------------------------------------------------- */

/* y = gelu(gate x) * (up x) on tiles of kind K, mat[0] the gate, mat[1] the up matrix. Block =
 * one tile of both; warps [0, W) compute the gate's rows and [W, 2W) the up's, each half the
 * plain product's split and loop (W = blockDim.x / 64), so each sum is gem_dmv's bit for bit;
 * then one thread per row adds each half's warps in warp order and writes gelu(gate) * up.
 * Lineage: dev/cuda/geglu_split against the kernels that gave each warp a share of both
 * matrices (Q4_0 through a ring of cp.async stages, 63 registers; Q4_K and Q6_K with the next
 * super-block of both in registers, 101 and 119), which held fewer warps an SM. Alone, chained
 * at 21,504 x 5,376 on an H100 (results/h200/run196): Q4_K 64.1 -> 51.5 us, Q6_K 79.7 -> 70.8,
 * Q4_0 48.0 -> 49.3; whole 31B tokens at 8K (run194, processes A B B A): the Q4_K_M mix 0.925,
 * Q6_K 0.948, Q4_0 0.990. */
template <TileKind K>
__global__ void __launch_bounds__(2 * kMaxWarps * 32) geglu_kernel(const TileParams p)
{
    __shared__ float red[2][kMaxWarps][kTileRows];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int nw = (int)(blockDim.x >> 6); /* warps a matrix */
    const int mat = warp >= nw, lw = warp - mat * nw;
    const int64_t tile = blockIdx.x;
    const unsigned char *data = mat ? p.mat[1].data : p.mat[0].data; /* no local copy of p */
    float a[4] = {0.f, 0.f, 0.f, 0.f};
    pdl_trigger();
    if (K == TileKind::kQ4_0)
        q4_0_warp(p, data, tile, lw, a);
    else if (K == TileKind::kQ4_K)
        q4_k_warp(p, data, tile, lw, a);
    else if (K == TileKind::kQ6_K)
        q6_k_warp(p, data, tile, lw, a);
    else if (K == TileKind::kQ8_0)
        q8_0_warp(p, data, tile, lw, a);
    else
        bf16_warp(p, data, tile, lw, a);
    float r0 = a[0] + a[2], r1 = a[1] + a[3];
    for (int o = 4; o < 32; o <<= 1) {
        r0 += __shfl_xor_sync(kFull, r0, o);
        r1 += __shfl_xor_sync(kFull, r1, o);
    }
    if (g == 0) {
        red[mat][lw][2 * t] = r0;
        red[mat][lw][2 * t + 1] = r1;
    }
    __syncthreads();
    if (threadIdx.x < kTileRows) {
        const int r = (int)threadIdx.x;
        float s = red[0][0][r], u = red[1][0][r];
        for (int w = 1; w < nw; w++)
            s += red[0][w][r];
        for (int w = 1; w < nw; w++)
            u += red[1][w][r];
        p.mat[0].y[(size_t)tile * kTileRows + (size_t)r] = __fmul_rn(gem_gelu_tanh(s), u);
    }
}

gem_status launched(void)
{
    return cudaGetLastError() == cudaSuccess ? GEM_OK : GEM_ERR_DEVICE;
}

} /* namespace */

int gem_tiles_shape_ok(TileKind kind, int64_t rows, int64_t cols, int64_t max_cols)
{
    /* Q4_K and Q6_K: whole super-blocks */
    const bool sb = kind == TileKind::kQ4_K || kind == TileKind::kQ6_K;
    const int64_t step = sb ? 2 * kChunkElems : kChunkElems;
    return rows >= kTileRows && rows % kTileRows == 0 && cols >= step && cols % step == 0 &&
           cols <= max_cols;
}

size_t gem_tiles_xq_bytes(int64_t cols)
{
    return cols > 0 ? (size_t)((cols + kChunkElems - 1) / kChunkElems) *
                          (kXqChunkBytes + GEM_TILES_XQ_PIECES_CHUNK_BYTES)
                    : 0;
}

gem_status gem_tiles_from_rows(TileKind kind, const unsigned char *src, size_t row_bytes,
                               int64_t rows, int64_t cols, unsigned char *dst, cudaStream_t s)
{
    /* a thread's unit: a block (Q4_0, Q8_0), a super-block (Q4_K, Q6_K), 8 columns (BF16) */
    const bool sb = kind == TileKind::kQ4_K || kind == TileKind::kQ6_K;
    const int64_t nb = cols / (sb ? 256 : kind == TileKind::kBF16 ? 8 : 32), n = rows * nb;
    const int64_t grid = (n + 255) / 256;
    if (grid > INT32_MAX)
        return GEM_ERR_UNSUPPORTED;
    if (kind == TileKind::kQ4_K)
        tile_q4k_kernel<<<(unsigned)grid, 256, 0, s>>>(src, row_bytes, rows, nb, dst);
    else if (kind == TileKind::kQ6_K)
        tile_q6k_kernel<<<(unsigned)grid, 256, 0, s>>>(src, row_bytes, rows, nb, dst);
    else if (kind == TileKind::kQ8_0)
        tile_q8_0_kernel<<<(unsigned)grid, 256, 0, s>>>(src, row_bytes, rows, nb, dst);
    else if (kind == TileKind::kBF16)
        tile_bf16_kernel<<<(unsigned)grid, 256, 0, s>>>(src, row_bytes, rows, cols, dst);
    else
        tile_kernel<<<(unsigned)grid, 256, 0, s>>>(src, row_bytes, rows, nb, dst);
    return launched();
}

gem_status gem_tiles_row(const unsigned char *data, int64_t rows, int64_t cols, int64_t row,
                         const int32_t *drow, float scale, float *y, cudaStream_t s)
{
    const int64_t nb = cols / 32;
    tile_row_kernel<<<(unsigned)((nb + 127) / 128), 128, 0, s>>>(data, row, drow, rows, nb, scale,
                                                                 y);
    return launched();
}

gem_status gem_tiles_launch(TileParams p, const float *x, bool geglu, bool xq_ready,
                            bool pieces, cudaStream_t s)
{
    const int64_t nblk = p.cols / 32;
    if (!xq_ready && launch_pdl(pieces ? xq_kernel<true> : xq_kernel<false>,
                                (unsigned)((nblk + 7) / 8), 256, s, x, nblk,
                                const_cast<unsigned char *>(p.xq)) != cudaSuccess) {
        (void)cudaGetLastError();
        return GEM_ERR_DEVICE;
    }
    p.nchunks = p.cols / kChunkElems;
    /* the split depends on cols alone, so a row has the same bits in gem_dmv, gem_dmv_multi
     * and (both halves of a block) GeGLU */
    /* the unit a warp owns: a chunk, or for Q4_K and Q6_K a super-block (two chunks) */
    const bool sb = p.kind == TileKind::kQ4_K || p.kind == TileKind::kQ6_K;
    const int64_t unit = sb ? 2 : 1, units = p.nchunks / unit;
    const int64_t per = sb                            ? kQ4kSbPerWarp
                        : p.kind == TileKind::kQ8_0 ? kQ8ChunksPerWarp
                        : p.kind == TileKind::kBF16 ? kBf16ChunksPerWarp
                                                    : kPlainChunksPerWarp;
    const int64_t need = (units + per - 1) / per;
    int64_t warps = 1;
    while (warps < need && warps < kMaxWarps)
        warps *= 2;
    p.cpw = unit * ((units + warps - 1) / warps);
    int64_t tiles = 0;
    for (int i = 0; i < p.nmat; i++) {
        p.mat[i].tile0 = tiles;
        tiles += p.mat[i].rows / kTileRows;
        if (geglu)
            break; /* the up matrix: the same tiles */
    }
    if (tiles > INT32_MAX)
        return GEM_ERR_UNSUPPORTED;
    void (*kernel)(const TileParams);
    if (geglu)
        kernel = p.kind == TileKind::kQ4_K   ? geglu_kernel<TileKind::kQ4_K>
                 : p.kind == TileKind::kQ6_K ? geglu_kernel<TileKind::kQ6_K>
                 : p.kind == TileKind::kQ8_0 ? geglu_kernel<TileKind::kQ8_0>
                 : p.kind == TileKind::kBF16 ? geglu_kernel<TileKind::kBF16>
                                             : geglu_kernel<TileKind::kQ4_0>;
    else
        kernel = p.kind == TileKind::kQ4_K   ? plain_tiles_kernel<TileKind::kQ4_K>
                 : p.kind == TileKind::kQ6_K ? plain_tiles_kernel<TileKind::kQ6_K>
                 : p.kind == TileKind::kQ8_0 ? plain_tiles_kernel<TileKind::kQ8_0>
                 : p.kind == TileKind::kBF16 ? plain_tiles_kernel<TileKind::kBF16>
                                             : q4t_kernel;
    /* GeGLU: the plain split's warps for each of its two matrices */
    const cudaError_t e =
        launch_pdl(kernel, (unsigned)tiles, (unsigned)((geglu ? 64 : 32) * warps), s, p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return GEM_ERR_DEVICE;
    }
    return GEM_OK;
}
