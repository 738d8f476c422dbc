/*
tiles_q4k: Q4_K products on the tensor cores, the way src/model/cuda/matvec_tiles.cu does Q4_0,
against the library's F32 Q4_K product (src/model/cuda/matvec.cu) at Gemma 4 31B's shapes. Real
Gemma 4 files are mostly Q4_K_M, whose Q4_K matrices take the F32 kernel today (19-32% of the
read probe, H200 run 25).

Q4_K (GGUF): a super-block of 256 elements, 144 bytes: d and dmin (f16), twelve bytes of 6-bit
scales sc_s and mins m_s of its eight 32-element sub-blocks, 128 bytes of nibbles (bytes 32c..
32c+31: sub-block 2c in the low nibbles, 2c+1 in the high ones). w = (d sc_s) q - (dmin m_s),
q in 0..15.

Tiles: 8 rows; per super-block 1,152 bytes = two halves of 512 bytes (lane (g, t) of a warp
reads 16 bytes at 16 lane: row g's nibble words at 64 half + 4t, + 16, + 32, + 48, i.e. the
elements 4t..4t+3 and 16+4t..16+4t+3 of the half's four sub-blocks) and the 8 rows' raw
16-byte headers (d, dmin, the scales). The same bytes as the file, reordered.

The product: x's scratch is the library's Q4_0 one (four 7-bit digits per element under each
32-block's exponent; digit sums Xd_j), since a sub-block is a 32-block of x and the nibbles
take the same fragment positions. Per 128 columns, four MMAs (mma.m16n8k32 s8 x u8, C = 0)
give S_j = sum q a_j exactly for four sub-blocks; each lane then adds, for each of its four
sums, fma(d1 2^(E - 7j), S_j) and fma(-m1 2^(E - 7j), Xd_j) (d1 = d sc, m1 = dmin m: exact in
F32, the products exact inside the fmas): w x summed with F32 additions of exact terms. Warps
split a row's chunks as the Q4_0 kernel does (8 a warp, at most 16 warps), summed in a fixed
order: the same bits on every call.

Checks before timing (exit 1 on a failure): against the double-precision dot product of
gem_gguf_dequant's values on seeded rows (gem_gguf_quantize), |y - ref| <= 4e-6 (sum_s (|d1|
sum|q x| + |m1| sum|x|) + E_x / 32) + 2^-26 E_x, E_x = sum_s max|x_s| (|d1| sum q + 32 |m1|) (the
digits' representation error); bitwise repeats. Timing: per launch and chained, ABBA against
gem_dmv on the file-order rows of the same matrices, rotating over copies past the L2.

Version 1 (run 33, H200): the kernel above, a chunk at a time with its loads right before its
MMAs, 8 chunks a warp: 17-36% of the probe against 17-33% for the F32 kernel; not ported.

Version 2: the library's Q4_0 loop applied to Q4_K. A warp owns whole super-blocks (the plain
product's split in super-blocks: at most 6 a warp, the warps a power of two up to 16), loads
them in batches of kSbBatch (both halves' nibble words and its two rows' 16 header bytes, into
registers, before the launch wait for the first batch and after each batch for the next, a
full batch unpredicated from stepped pointers as dev/cuda/tiles_tight), and decodes the six-bit
scales and mins of its sub-blocks four bytes at a time: a lane's sub-blocks are h, 2 + h, 4 + h
and 6 + h, bytes h and 2 + h of the scale words shifted by 8 h, so one mask gives both of a
half's scales (s < 4: the low six bits of bytes s and s + 4; s >= 4: the low and high nibbles of
byte s + 4 under the top two bits of bytes s - 4 and s). The same sums per chunk as version 1
(fma(d1 2^(E - 7j), S_j) then fma(-m1 2^(E - 7j), Xd_j) per sum, exact products); the split
differs, so its bits are checked against the double reference and a repeat, not version 1.
Prediction (before its first run): about 90 warp instructions a chunk against the Q4_0
tiles' 83 (ncu, run 188), and 55-75% of the probe on an H100 on the layer shapes against the
F32 kernel's 19-33%.

Version 3: version 2 with batches of one super-block (58 registers against 78).

Run 190 (results/h200/run190, an H100): every version within its bound, repeats equal,
memcheck and racecheck clean. Chained us, F32 kernel / v2 / v3: q 27.1 / 14.85 / 12.55, k 14.9 /
10.3 / 13.0, o-swa 24.6 / 13.95 / 14.55, o-full 39.6 / 29.96 / 23.77, gate 51.8 / 27.9 / 27.2,
down 50.1 / 38.45 / 30.6, the head 519 / 263.1 / 263.5 (94.5% of the probe). ncu: 117-120 warp
instructions a chunk (not the 90 predicted) against 274-321 for the F32 kernel. Version 3 is
the library's Q4_K product since (run 191; src/model/cuda/matvec_tiles.cu's q4_k_warp, which
GeGLU's warps run too since run 194).

./tiles_q4k [--reps R] [--once]     (--once: every variant once per shape, no timing, for ncu)
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "common.h"
#include "gem/gguf.h"
#include "harness.h"
#include "model/cuda/model_cuda.h"
#include "cuda/gem_pdl.cuh"
#include "model/cuda/tiles_arith.cuh"

#define TILE_ROWS 8
#define SB_BYTES 144           /* a Q4_K super-block in the file */
#define TSB_BYTES (8 * 144)    /* a tile's super-block: 1,152 bytes */
#define CHUNK_ELEMS 128
#define XQ_LANE GEM_TILES_XQ_LANE_BYTES
#define XQ_CHUNK GEM_TILES_XQ_CHUNK_BYTES
#define CHUNKS_PER_WARP 8
#define MAX_WARPS 16
static const unsigned kFull = 0xffffffffu;

/* ---- tiles ---------------------------------------------------------------------------------- */

/* rows (file order) -> tiles; one thread per (row, super-block). */
__global__ void tile_q4k(const unsigned char *__restrict__ src, size_t row_bytes, int64_t rows,
                         int64_t nsb, unsigned char *__restrict__ dst)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * nsb)
        return;
    const int64_t r = i / nsb, s = i % nsb;
    const int g = (int)(r % TILE_ROWS);
    const unsigned char *b = src + (size_t)r * row_bytes + (size_t)s * SB_BYTES;
    unsigned char *t = dst + ((size_t)(r / TILE_ROWS) * (size_t)nsb + (size_t)s) * TSB_BYTES;
    for (int k = 0; k < 16; k++) /* d, dmin, scales */
        t[1024 + 16 * g + k] = b[k];
    const unsigned char *qs = b + 16;
    for (int half = 0; half < 2; half++)
        for (int tt = 0; tt < 4; tt++)
            for (int w = 0; w < 4; w++)
                for (int k = 0; k < 4; k++)
                    t[512 * half + 16 * (4 * g + tt) + 4 * w + k] = qs[64 * half + 16 * w + 4 * tt + k];
}

/* ---- x's scratch: the library's (matvec_tiles.cu's xq_kernel, on tiles_arith.cuh) -------- */

__global__ void xq_kernel(const float *__restrict__ x, int64_t nblk, unsigned char *__restrict__ xq)
{
    pdl_trigger();
    pdl_wait();
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= nblk)
        return;
    gem_tiles_xq_block(x[32 * b + (threadIdx.x & 31)], b, xq, threadIdx.x & 31);
}

/* ---- the product ---------------------------------------------------------------------------- */

/* Sub-block s's scale and min from the 12 scale bytes (GGUF's get_scale_min_k4). */
__device__ __forceinline__ void scale_min(const unsigned char *q, int s, int &sc, int &mn)
{
    if (s < 4) {
        sc = q[s] & 63;
        mn = q[s + 4] & 63;
    } else {
        sc = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
        mn = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
    }
}

struct Params {
    const unsigned char *data;
    float *y;
    int64_t rows, nchunks, cpw;
    const unsigned char *xq;
};

__global__ void __launch_bounds__(MAX_WARPS * 32) q4kt_kernel(const Params p)
{
    __shared__ float red[MAX_WARPS][TILE_ROWS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = g >> 2;
    const int64_t tile = blockIdx.x;
    const size_t tile_bytes = (size_t)(p.nchunks / 2) * TSB_BYTES;
    const unsigned char *w0 = p.data + (size_t)tile * tile_bytes;
    const uint32_t m0 = h ? 0u : kFull, m1 = ~m0, lo = 0x0F0F0F0Fu;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const int64_t cb = (int64_t)warp * p.cpw;
    const int64_t ce = cb + p.cpw < p.nchunks ? cb + p.cpw : p.nchunks;
    pdl_trigger();
    pdl_wait();
    for (int64_t c = cb; c < ce; c++) {
        const unsigned char *sb = w0 + (size_t)(c / 2) * TSB_BYTES;
        const int half = (int)(c % 2);
        const uint4 wq = __ldcs(reinterpret_cast<const uint4 *>(sb + 512 * half + 16 * lane));
        unsigned char hd[2][16]; /* rows 2t and 2t+1: d, dmin, scales */
        for (int r = 0; r < 2; r++) {
            const uint4 v = __ldg(reinterpret_cast<const uint4 *>(sb + 1024 + 16 * (2 * t + r)));
            memcpy(hd[r], &v, 16);
        }
        const uint4 *xc = reinterpret_cast<const uint4 *>(p.xq + (size_t)c * XQ_CHUNK +
                                                          (size_t)XQ_LANE * lane);
        const uint4 dg = __ldg(xc), cx = __ldg(xc + 1);
        int s[4] = {0, 0, 0, 0};
        gem_tiles_mma(s, m0 & dg.x, 0u, m0 & dg.y, 0u, wq.x & lo, wq.y & lo);
        gem_tiles_mma(s, m1 & dg.x, 0u, m1 & dg.y, 0u, (wq.x >> 4) & lo, (wq.y >> 4) & lo);
        gem_tiles_mma(s, 0u, m0 & dg.z, 0u, m0 & dg.w, wq.z & lo, wq.w & lo);
        gem_tiles_mma(s, 0u, m1 & dg.z, 0u, m1 & dg.w, (wq.z >> 4) & lo, (wq.w >> 4) & lo);
        /* s[0], s[1]: sub-block 4 half + h, rows 2t, 2t+1; s[2], s[3]: sub-block 4 half + 2 + h */
        const float xs0 = __uint_as_float(cx.z), xs1 = __uint_as_float(cx.w);
        const float xd0 = (float)(-(int)cx.x / 8), xd1 = (float)(-(int)cx.y / 8);
        for (int r = 0; r < 2; r++) {
            __half dh, mh;
            memcpy(&dh, hd[r], 2);
            memcpy(&mh, hd[r] + 2, 2);
            const float d = __half2float(dh), dmin = __half2float(mh);
            for (int k = 0; k < 2; k++) {
                int sc, mn;
                scale_min(hd[r] + 4, 4 * half + 2 * k + h, sc, mn);
                const float xs = k ? xs1 : xs0, xd = k ? xd1 : xd0;
                float &a = acc[2 * k + r];
                a = fmaf((d * (float)sc) * xs, (float)s[2 * k + r], a);
                a = fmaf(-((dmin * (float)mn) * xs), xd, a);
            }
        }
    }
    float r0 = acc[0] + acc[2], r1 = acc[1] + acc[3];
    for (int o = 4; o < 32; o <<= 1) {
        r0 += __shfl_xor_sync(kFull, r0, o);
        r1 += __shfl_xor_sync(kFull, r1, o);
    }
    if (g == 0) {
        red[warp][2 * t] = r0;
        red[warp][2 * t + 1] = r1;
    }
    __syncthreads();
    if (threadIdx.x < TILE_ROWS) {
        const int nw = (int)(blockDim.x >> 5), r = (int)threadIdx.x;
        float sum = red[0][r];
        for (int w = 1; w < nw; w++)
            sum += red[w][r];
        p.y[(size_t)tile * TILE_ROWS + (size_t)r] = sum;
    }
}

static void q4kt(const unsigned char *tiles, int64_t rows, int64_t cols, const float *x,
                 unsigned char *xq, float *y)
{
    const int64_t nblk = cols / 32;
    cudaCheck(launch_pdl(xq_kernel, (unsigned)((nblk + 7) / 8), 256, 0, x, nblk, xq));
    Params p;
    p.data = tiles;
    p.y = y;
    p.rows = rows;
    p.nchunks = cols / CHUNK_ELEMS;
    int64_t warps = (p.nchunks + CHUNKS_PER_WARP - 1) / CHUNKS_PER_WARP;
    warps = warps > MAX_WARPS ? MAX_WARPS : warps;
    p.cpw = (p.nchunks + warps - 1) / warps;
    p.xq = xq;
    cudaCheck(launch_pdl(q4kt_kernel, (unsigned)(rows / TILE_ROWS), (unsigned)(32 * warps), 0, p));
}

/* ---- version 2 ------------------------------------------------------------------------------ */

constexpr int kSbPerWarp = 6;       /* the plain split: at most 6 super-blocks (12 chunks) a warp */

struct Params2 {
    const unsigned char *data;
    float *y;
    int64_t nsb, spw; /* super-blocks a row, super-blocks a warp */
    const unsigned char *xq;
};

/* One chunk (half `half` of a super-block) into acc: the x scratch's loads, then
 * tiles_arith.cuh's chunk (the library's arithmetic since run 191; it was this program's). */
template <int half>
__device__ __forceinline__ void q4k_chunk(const uint4 wq, const uint4 h0, const uint4 h1,
                                          uint32_t sh, const unsigned char *x, uint32_t m0,
                                          float (&acc)[4])
{
    const uint4 *xc = reinterpret_cast<const uint4 *>(x);
    gem_tiles_q4k_chunk<half>(wq, h0, h1, sh, __ldg(xc), __ldg(xc + 1), m0, acc);
}

/* kSbBatch: super-blocks whose loads a warp issues together (version 2: 2, version 3: 1). */
template <int kSbBatch>
__global__ void __launch_bounds__(MAX_WARPS * 32) q4kt2_kernel(const Params2 p)
{
    __shared__ float red[MAX_WARPS][TILE_ROWS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = g >> 2;
    const int64_t tile = blockIdx.x;
    const uint32_t m0 = h ? 0u : kFull, sh = 8u * (uint32_t)h;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    /* this warp's super-blocks [sb0, sb0 + left) */
    const int64_t sw = (int64_t)warp * p.spw;
    const int64_t sb0 = sw < p.nsb ? sw : p.nsb;
    const int64_t sbe = sb0 + p.spw < p.nsb ? sb0 + p.spw : p.nsb;
    uint32_t left = (uint32_t)(sbe - sb0);
    const unsigned char *const w0 =
        p.data + ((size_t)tile * (size_t)p.nsb + (size_t)sb0) * TSB_BYTES;
    const unsigned char *wp = w0 + (size_t)16 * lane;          /* nibble words, half 0 */
    const unsigned char *hp = w0 + 1024 + (size_t)32 * t;      /* rows 2t, 2t + 1 */
    const unsigned char *xp = p.xq + (size_t)(2 * sb0) * XQ_CHUNK + (size_t)XQ_LANE * lane;
    uint4 wq[kSbBatch][2], hd[kSbBatch][2];
    auto load1 = [&](int k) {
        wq[k][0] = __ldcs(reinterpret_cast<const uint4 *>(wp + (size_t)k * TSB_BYTES));
        wq[k][1] = __ldcs(reinterpret_cast<const uint4 *>(wp + (size_t)k * TSB_BYTES + 512));
        hd[k][0] = __ldcs(reinterpret_cast<const uint4 *>(hp + (size_t)k * TSB_BYTES));
        hd[k][1] = __ldcs(reinterpret_cast<const uint4 *>(hp + (size_t)k * TSB_BYTES + 16));
    };
    auto load = [&]() {
        if (left >= (uint32_t)kSbBatch) {
#pragma unroll
            for (int k = 0; k < kSbBatch; k++)
                load1(k);
        } else {
#pragma unroll
            for (int k = 0; k < kSbBatch - 1; k++)
                if ((uint32_t)k < left)
                    load1(k);
        }
    };
    pdl_trigger();
    load(); /* the first weights stream while the kernels before finish */
    pdl_wait();
    while (left) {
#pragma unroll
        for (int k = 0; k < kSbBatch; k++) {
            if ((uint32_t)k < left) {
                const unsigned char *x = xp + (size_t)(2 * k) * XQ_CHUNK;
                q4k_chunk<0>(wq[k][0], hd[k][0], hd[k][1], sh, x, m0, acc);
                q4k_chunk<1>(wq[k][1], hd[k][0], hd[k][1], sh, x + XQ_CHUNK, m0, acc);
            }
        }
        left = left > (uint32_t)kSbBatch ? left - (uint32_t)kSbBatch : 0u;
        wp += (size_t)kSbBatch * TSB_BYTES;
        hp += (size_t)kSbBatch * TSB_BYTES;
        xp += (size_t)(2 * kSbBatch) * XQ_CHUNK;
        if (left)
            load();
    }
    float r0 = acc[0] + acc[2], r1 = acc[1] + acc[3];
    for (int o = 4; o < 32; o <<= 1) {
        r0 += __shfl_xor_sync(kFull, r0, o);
        r1 += __shfl_xor_sync(kFull, r1, o);
    }
    if (g == 0) {
        red[warp][2 * t] = r0;
        red[warp][2 * t + 1] = r1;
    }
    __syncthreads();
    if (threadIdx.x < TILE_ROWS) {
        const int nw = (int)(blockDim.x >> 5), r = (int)threadIdx.x;
        float sum = red[0][r];
        for (int w = 1; w < nw; w++)
            sum += red[w][r];
        p.y[(size_t)tile * TILE_ROWS + (size_t)r] = sum;
    }
}

static void q4kt2(int v, const unsigned char *tiles, int64_t rows, int64_t cols, const float *x,
                  unsigned char *xq, float *y)
{
    const int64_t nblk = cols / 32;
    cudaCheck(launch_pdl(xq_kernel, (unsigned)((nblk + 7) / 8), 256, 0, x, nblk, xq));
    Params2 p;
    p.data = tiles;
    p.y = y;
    p.nsb = cols / 256;
    const int64_t need = (p.nsb + kSbPerWarp - 1) / kSbPerWarp;
    int64_t warps = 1;
    while (warps < need && warps < MAX_WARPS)
        warps *= 2;
    p.spw = (p.nsb + warps - 1) / warps;
    p.xq = xq;
    if (v == 2)
        cudaCheck(launch_pdl(q4kt2_kernel<2>, (unsigned)(rows / TILE_ROWS), (unsigned)(32 * warps),
                             0, p));
    else
        cudaCheck(launch_pdl(q4kt2_kernel<1>, (unsigned)(rows / TILE_ROWS), (unsigned)(32 * warps),
                             0, p));
}

/* Version v (1, 2 or 3) of the tiled product. */
static void q4kt_v(int v, const unsigned char *tiles, int64_t rows, int64_t cols, const float *x,
                   unsigned char *xq, float *y)
{
    if (v == 1)
        q4kt(tiles, rows, cols, x, xq, y);
    else
        q4kt2(v, tiles, rows, cols, x, xq, y);
}

/* ---- checks and timing ---------------------------------------------------------------------- */

static float f16_at(const uint8_t *q) { return gem_gguf_f16_to_f32((uint16_t)(q[0] | (q[1] << 8))); }

/* The bound of one row (file comment). */
static double row_bound(const uint8_t *row, const float *x, int64_t cols)
{
    double mag = 0, ex = 0;
    for (int64_t b = 0; b < cols / 256; b++) {
        const uint8_t *blk = row + SB_BYTES * b, *sc = blk + 4, *q = blk + 16;
        const double d = f16_at(blk), dmin = f16_at(blk + 2);
        for (int s = 0; s < 8; s++) {
            int scale, mn;
            if (s < 4) {
                scale = sc[s] & 63;
                mn = sc[s + 4] & 63;
            } else {
                scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
                mn = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
            }
            double qx = 0, ax = 0, mx = 0, qs = 0;
            for (int l = 0; l < 32; l++) {
                const int n = s & 1 ? q[32 * (s / 2) + l] >> 4 : q[32 * (s / 2) + l] & 0xF;
                const double xv = fabs((double)x[256 * b + 32 * s + l]);
                qx += n * xv;
                ax += xv;
                mx = fmax(mx, xv);
                qs += n;
            }
            mag += fabs(d * scale) * qx + fabs(dmin * mn) * ax;
            ex += mx * (fabs(d * scale) * qs + 32.0 * fabs(dmin * mn));
        }
    }
    return 4e-6 * (mag + ex / 32) + 0x1p-26 * ex + 1e-30;
}

/* Version v of the tiled product on rows x cols against the double reference and a repeat. */
static int check(int v, int64_t rows, int64_t cols, uint64_t seed)
{
    size_t rb = 0;
    GEM_TRY(gem_gguf_row_bytes(GEM_GGUF_Q4_K, cols, &rb));
    const size_t bytes = (size_t)rows * rb;
    uint8_t *hw = (uint8_t *)malloc(bytes);
    float *src = (float *)malloc((size_t)cols * 4), *deq = (float *)malloc((size_t)cols * 4);
    float *x = (float *)malloc((size_t)cols * 4), *y = (float *)malloc((size_t)rows * 4);
    float *y2 = (float *)malloc((size_t)rows * 4);
    fill(x, (size_t)cols, seed);
    for (int64_t i = 0; i < cols; i += 53)
        x[i] *= 200.0f; /* outliers inside blocks */
    for (int64_t r = 0; r < rows; r++) {
        fill(src, (size_t)cols, seed + 100 + (uint64_t)r);
        GEM_TRY(gem_gguf_quantize(GEM_GGUF_Q4_K, src, hw + (size_t)r * rb, cols));
    }
    unsigned char *drows, *dtiles, *xq;
    float *dx, *dy;
    cudaCheck(cudaMalloc((void **)&drows, bytes));
    cudaCheck(cudaMalloc((void **)&dtiles, bytes));
    cudaCheck(cudaMalloc((void **)&xq, gem_dmv_xq_bytes(cols) + 16));
    cudaCheck(cudaMalloc((void **)&dx, (size_t)cols * 4));
    cudaCheck(cudaMalloc((void **)&dy, (size_t)rows * 4));
    cudaCheck(cudaMemcpy(drows, hw, bytes, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(dx, x, (size_t)cols * 4, cudaMemcpyHostToDevice));
    const int64_t nsb = cols / 256;
    tile_q4k<<<(unsigned)((rows * nsb + 255) / 256), 256>>>(drows, rb, rows, nsb, dtiles);
    cudaCheck(cudaGetLastError());
    q4kt_v(v, dtiles, rows, cols, dx, xq, dy);
    cudaCheck(cudaMemcpy(y, dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    q4kt_v(v, dtiles, rows, cols, dx, xq, dy);
    cudaCheck(cudaMemcpy(y2, dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    int bad = memcmp(y, y2, (size_t)rows * 4) != 0;
    double worst = 0;
    for (int64_t r = 0; r < rows; r++) {
        GEM_TRY(gem_gguf_dequant(GEM_GGUF_Q4_K, hw + (size_t)r * rb, deq, cols));
        double ref = 0;
        for (int64_t i = 0; i < cols; i++)
            ref += (double)deq[i] * (double)x[i];
        const double e = fabs((double)y[r] - ref) / row_bound(hw + (size_t)r * rb, x, cols);
        worst = e > worst || e != e ? e : worst;
    }
    bad |= !(worst <= 1.0);
    printf("check q4_k tiles v%d %6lld x %-5lld  max |y - ref| / bound %.3f, repeat %s  %s\n",
           v, (long long)rows, (long long)cols, worst, memcmp(y, y2, (size_t)rows * 4) ? "differs" : "equal",
           bad ? "FAILED" : "ok");
    cudaFree(drows);
    cudaFree(dtiles);
    cudaFree(xq);
    cudaFree(dx);
    cudaFree(dy);
    free(hw), free(src), free(deq), free(x), free(y), free(y2);
    return bad;
}

typedef struct shape {
    const char *name;
    int64_t rows, cols;
} shape;

static const shape shapes[] = {
    {"q", 8192, 5376},       {"k", 4096, 5376},    {"o-swa", 5376, 8192}, {"o-full", 5376, 16384},
    {"gate", 21504, 5376},   {"down", 5376, 21504}, {"head", 262144, 5376},
};

int main(int argc, char **argv)
{
    int reps = 100, once = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--once"))
            once = 1;
        else {
            fprintf(stderr, "usage: %s [--reps R] [--once]\n", argv[0]);
            return 2;
        }
    }
    reps = reps < 5 ? 5 : reps;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    int failed = 0;
    for (int v = 1; v <= 3; v++) {
        failed |= check(v, 8, 256, 1);
        failed |= check(v, 64, 1280, 2);
        failed |= check(v, 72, 5376, 3);
        failed |= check(v, 16, 21504, 4);
        failed |= check(v, 24, 16384, 5);
    }
    if (failed) {
        printf("validation FAILED: no timings\n");
        return 1;
    }
    void *hx = NULL;
    GEM_TRY(gem_harness_cuda_ops.open(&hx));
    double probe = 0;
    GEM_TRY(gem_harness_cuda_ops.read_bandwidth(hx, 0, (size_t)4 << 30, 20, &probe));
    printf("read probe: %.1f GB/s\n\n%-7s %-8s %8s %9s %6s %9s %6s  %s\n", probe * 1e-9, "shape",
           "variant", "MB", "median_us", "probe", "chain_us", "probe", "rep");
    double *times = (double *)malloc((size_t)reps * sizeof(double));
    cudaEvent_t *ev = (cudaEvent_t *)malloc((size_t)(reps + 1) * sizeof(cudaEvent_t));
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventCreate(&ev[r]));
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *s = &shapes[si];
        size_t rb = 0;
        GEM_TRY(gem_gguf_row_bytes(GEM_GGUF_Q4_K, s->cols, &rb));
        const size_t mbytes = (size_t)s->rows * rb;
        int ncopies = (int)(((size_t)200 << 20) / mbytes + 1);
        ncopies = ncopies < 2 ? 2 : ncopies > 64 ? 64 : ncopies;
        gem_dmatrix *rows = (gem_dmatrix *)calloc((size_t)ncopies, sizeof *rows);
        unsigned char **tiles = (unsigned char **)calloc((size_t)ncopies, sizeof *tiles);
        const int64_t nsb = s->cols / 256;
        for (int c = 0; c < ncopies; c++) {
            rows[c] = (gem_dmatrix){NULL, GEM_GGUF_Q4_K, s->rows, s->cols, rb, GEM_DLAYOUT_ROWS};
            cudaCheck(cudaMalloc(&rows[c].data, mbytes));
            cudaCheck(cudaMalloc((void **)&tiles[c], mbytes));
            GEM_TRY(gem_dmatrix_fill_random(&rows[c], 21 + (uint64_t)c,
                                            1.0f / sqrtf((float)s->cols), NULL));
            tile_q4k<<<(unsigned)((s->rows * nsb + 255) / 256), 256>>>(
                (const unsigned char *)rows[c].data, rb, s->rows, nsb, tiles[c]);
            cudaCheck(cudaGetLastError());
        }
        float *hxv = (float *)malloc((size_t)s->cols * 4), *dx, *dy;
        unsigned char *xq;
        fill(hxv, (size_t)s->cols, 9 + si);
        cudaCheck(cudaMalloc((void **)&dx, (size_t)s->cols * 4));
        cudaCheck(cudaMalloc((void **)&dy, (size_t)s->rows * 4));
        cudaCheck(cudaMalloc((void **)&xq, gem_dmv_xq_bytes(s->cols) + 16));
        cudaCheck(cudaMemcpy(dx, hxv, (size_t)s->cols * 4, cudaMemcpyHostToDevice));
        const double moved = (double)mbytes + 4.0 * (double)s->cols + 4.0 * (double)s->rows;
        const int r_here = s->rows >= 100000 ? (reps < 30 ? reps : 30) : reps;
        const int order[8] = {0, 1, 2, 3, 3, 2, 1, 0};
        for (int v = 0; v < 4 && once; v++) {
            if (v == 0)
                GEM_TRY(gem_dmv(&rows[0], dx, dy, NULL, NULL));
            else
                q4kt_v(v, tiles[0], s->rows, s->cols, dx, xq, dy);
            cudaCheck(cudaDeviceSynchronize());
        }
        for (int k = 0; k < 8 && !once; k++) {
            const int v = order[k];
            double med = 0, chain = 0;
            for (int pass = 0; pass < 3; pass++) { /* warm-up, per launch, chain */
                wait_kernel<<<1, 1>>>(pass ? 20000000ull : 1000ull);
                cudaCheck(cudaGetLastError());
                if (pass == 2)
                    cudaCheck(cudaEventRecord(ev[0], 0));
                for (int r = 0; r < r_here; r++) {
                    if (pass == 1)
                        cudaCheck(cudaEventRecord(ev[r], 0));
                    if (v == 0)
                        GEM_TRY(gem_dmv(&rows[r % ncopies], dx, dy, NULL, NULL));
                    else
                        q4kt_v(v, tiles[r % ncopies], s->rows, s->cols, dx, xq, dy);
                }
                if (pass)
                    cudaCheck(cudaEventRecord(ev[r_here], 0));
                cudaCheck(cudaDeviceSynchronize());
                if (pass == 1) {
                    for (int r = 0; r < r_here; r++) {
                        float ms = 0;
                        cudaCheck(cudaEventElapsedTime(&ms, ev[r], ev[r + 1]));
                        times[r] = ms * 1e-3;
                    }
                    qsort(times, (size_t)r_here, sizeof(double), cmp_double);
                    med = times[r_here / 2];
                } else if (pass == 2) {
                    float ms = 0;
                    cudaCheck(cudaEventElapsedTime(&ms, ev[0], ev[r_here]));
                    chain = ms * 1e-3 / r_here;
                }
            }
            static const char *const vname[4] = {"library", "tiles-v1", "tiles-v2", "tiles-v3"};
            printf("%-7s %-8s %8.1f %9.2f %5.1f%% %9.2f %5.1f%%  %d\n", s->name, vname[v],
                   mbytes * 1e-6, med * 1e6, 100.0 * moved / med / probe, chain * 1e6,
                   100.0 * moved / chain / probe, k < 4 ? 1 : 2);
            fflush(stdout);
        }
        for (int c = 0; c < ncopies; c++) {
            cudaCheck(cudaFree(rows[c].data));
            cudaCheck(cudaFree(tiles[c]));
        }
        free(rows);
        free(tiles);
        free(hxv);
        cudaCheck(cudaFree(dx));
        cudaCheck(cudaFree(dy));
        cudaCheck(cudaFree(xq));
    }
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventDestroy(ev[r]));
    free(ev);
    free(times);
    gem_harness_cuda_ops.close(hx);
    return 0;
}
