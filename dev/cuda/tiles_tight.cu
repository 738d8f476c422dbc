/*
tiles_tight: the Q4_0 tile products (src/model/cuda/matvec_tiles.cu's q4t_kernel and
q4t_geglu_kernel) with the same split, arithmetic and order of additions and fewer instructions
around the chunks, against the library's kernels in the same process, at the Gemma 4 31B shapes.

Why: on the H200 the products are partly bound by their instructions (the head at 87% of the
read probe against 98% on an H100, run 169), and the library's loops spend about a fifth of
theirs on addresses and branches. In the SASS of the library's q4t_kernel (nvcc 13, sm_90) a
batch of four chunks is about 294 instructions: four chunk bodies of about 58 (the arithmetic
proper about 52: four IMMA, the digits' masks, the nibbles, the scales, four I2F and four FFMA)
and about 62 to reload the next batch, most of it the scales' per-lane address rebuilt under a
predicate for each chunk (`w + k * 576 + dl` with dl recomputed from the lane). The library's
GeGLU loop is about 136 instructions a step of two chunks, about 40 of them its cp.async
issue: the step's stage (`ring + (i % 4) * 1152`), the 64-bit source offsets, the shared
window's base read again from SR_CgaCtaId, and the lanes 0-3 copying the scales each with
addresses of their own.

  1 tight  plain product: a full batch's loads unpredicated from two pointers (nibbles and
           scales) stepped a batch at a time, the partial batch as the library's; the chunks'
           own tests kept (they hold the x scratch's loads to their chunk and the kernel to
           59 registers: without them ptxas hoists a batch's scratch loads and takes 68, which
           costs half the resident warps at 512 threads).
           GeGLU: the ring's source pointers and shared addresses stepped a chunk at a time,
           the stage a rolling 32-bit shared address, cp.async on it directly.

The chunk arithmetic is tiles_arith.cuh's, in the library's order, so the outputs must equal
the library's bit for bit (checked on every shape, and a repeat of each, before timing).
Timing: tiles_bench.h's ABBA of per-launch medians and chains, rotating copies past the L2,
fractions of the read probe measured in the same process. --once runs every variant once per
shape and exits (for a profiler: ncu's instruction counts are the prediction's check).

Prediction (before the first GPU run): SASS of the steady loop 63 instructions a chunk against
about 73.5 (plain) and about 52 against 68 (GeGLU); on an H100, whose products stream at up to
98% of the probe, chained times within 1-2% of the library's; on an H200, where the head
reaches 87%, a few percent on every shape.

./tiles_tight [--reps R] [--once] [--hot]

Run 188 (results/h200/run188, an H100; no H200 could be started): bit for bit the library's on
every shape. ncu counts 75.5 against 83.1 warp instructions a 576-byte chunk on the plain
shapes of 5,376 columns (o-swa 77.2 / 83.0, o-full 76.8 / 82.6, down 74.5 / 81.7) and 80.5
against 88.8 for GeGLU: 9% fewer. Chained us, library / tight: q 12.87 / 13.02, k 11.57 /
10.87, o-swa 15.95 / 15.99, o-full 24.20 / 24.20, gate+up 48.02 / 47.90, down 29.60 / 29.56,
the head 256.4 / 256.2 (97.2% of the probe). Run 189 (an H100): the loops in the library
(branch tiles-tight, 51e4fe1) give whole 31B tokens of the same time (B/A 1.002 at 128K, 0.999
at 8K). The H200, where the head streams at 87% of its probe while issuing about 0.66
instructions a cycle a scheduler, is the machine that can tell; until it does, the library
keeps its loops.
*/
#include "tiles_bench.h"

constexpr int kBatch = 4; /* the library's plain batch */
constexpr int kRing = 4;  /* the library's GeGLU stages a warp */

/* The library's q4t_kernel with the loop above. */
__global__ void __launch_bounds__(MAX_WARPS * 32) tight_kernel(const TileParams p)
{
    __shared__ float red[MAX_WARPS][TILE_ROWS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = g >> 2;
    int64_t tile = blockIdx.x;
    int m = 0;
    while (m + 1 < p.nmat && tile >= p.mat[m + 1].tile0)
        m++;
    tile -= p.mat[m].tile0;
    const size_t tile_bytes = (size_t)p.nchunks * CHUNK_BYTES;
    const uint32_t m0 = h ? 0u : kFull;
    float a0[4] = {0.f, 0.f, 0.f, 0.f};
    /* this warp's chunks [cb, cb + left); a warp past the tile's chunks has none */
    const int64_t cw = (int64_t)warp * p.cpw;
    const int64_t cb = cw < p.nchunks ? cw : p.nchunks;
    const int64_t ce = cb + p.cpw < p.nchunks ? cb + p.cpw : p.nchunks;
    uint32_t left = (uint32_t)(ce - cb);
    const unsigned char *const w0 =
        p.mat[m].data + (size_t)tile * tile_bytes + (size_t)cb * CHUNK_BYTES;
    const unsigned char *wp = w0 + (size_t)16 * lane;                       /* nibble words */
    const unsigned char *dp = w0 + (size_t)(512 + 8 * (4 * h + t));         /* scales */
    const unsigned char *xp = p.xq + (size_t)cb * XQ_CHUNK + (size_t)XQ_LANE * lane;
    uint4 wq[kBatch];
    uint2 dd[kBatch];
    auto load_full = [&]() {
#pragma unroll
        for (int k = 0; k < kBatch; k++) {
            wq[k] = __ldcs(reinterpret_cast<const uint4 *>(wp + (size_t)k * CHUNK_BYTES));
            dd[k] = __ldcs(reinterpret_cast<const uint2 *>(dp + (size_t)k * CHUNK_BYTES));
        }
    };
    auto load_part = [&]() { /* the first `left` chunks, left < kBatch */
#pragma unroll
        for (int k = 0; k < kBatch - 1; k++)
            if ((uint32_t)k < left) {
                wq[k] = __ldcs(reinterpret_cast<const uint4 *>(wp + (size_t)k * CHUNK_BYTES));
                dd[k] = __ldcs(reinterpret_cast<const uint2 *>(dp + (size_t)k * CHUNK_BYTES));
            }
    };
    pdl_trigger();
    if (left >= (uint32_t)kBatch)
        load_full(); /* the first weights stream while the kernels before finish */
    else
        load_part();
    pdl_wait(); /* then x's scratch is complete and y free to write */
    while (left) {
#pragma unroll
        for (int k = 0; k < kBatch; k++) {
            if ((uint32_t)k < left) {
                const uint4 *xc = reinterpret_cast<const uint4 *>(xp + (size_t)k * XQ_CHUNK);
                gem_tiles_chunk(wq[k], dd[k], __ldg(xc), __ldg(xc + 1), m0, a0);
            }
        }
        left = left > (uint32_t)kBatch ? left - (uint32_t)kBatch : 0u;
        wp += (size_t)kBatch * CHUNK_BYTES;
        dp += (size_t)kBatch * CHUNK_BYTES;
        xp += (size_t)kBatch * XQ_CHUNK;
        if (left >= (uint32_t)kBatch)
            load_full(); /* the next batch once this one is done, as the library */
        else if (left)
            load_part();
    }
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
    if (threadIdx.x < TILE_ROWS) {
        const int nw = (int)(blockDim.x >> 5), r = (int)threadIdx.x;
        float s = red[0][r];
        for (int w = 1; w < nw; w++)
            s += red[w][r];
        p.mat[m].y[(size_t)tile * TILE_ROWS + (size_t)r] = s;
    }
}

/* cp.async of 16 bytes to a shared address, cached in the L2 only. */
__device__ __forceinline__ void cp16s(uint32_t dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

/* The library's q4t_geglu_kernel with the ring's addresses stepped: the same stages, copies,
 * waits, chunk order and additions. */
__global__ void __launch_bounds__(MAX_WARPS * 32) tight_geglu_kernel(const TileParams p)
{
    extern __shared__ __align__(16) unsigned char ring_sm[];
    __shared__ float red[2][MAX_WARPS][TILE_ROWS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = g >> 2;
    const int64_t tile = blockIdx.x;
    const size_t tile_bytes = (size_t)p.nchunks * CHUNK_BYTES;
    const uint32_t m0 = h ? 0u : kFull;
    float a0[4] = {0.f, 0.f, 0.f, 0.f}, a1[4] = {0.f, 0.f, 0.f, 0.f};
    const int64_t cb = (int64_t)warp * p.cpw;
    const int64_t ce = cb + p.cpw < p.nchunks ? cb + p.cpw : p.nchunks;
    const int n = ce > cb ? (int)(ce - cb) : 0;
    constexpr uint32_t kStage = 2 * CHUNK_BYTES, kRingBytes = kRing * kStage;
    /* this lane's 16 bytes of a stage (and lanes 0-3 also 16 of its scales at + 512) */
    unsigned char *const ring = ring_sm + (size_t)warp * kRingBytes;
    const uint32_t ring_s = (uint32_t)__cvta_generic_to_shared(ring) + 16u * (uint32_t)lane;
    const unsigned char *g_src = p.mat[0].data + (size_t)tile * tile_bytes +
                                 (size_t)(cb > 0 ? cb : 0) * CHUNK_BYTES + (size_t)16 * lane;
    const unsigned char *u_src = p.mat[1].data + (size_t)tile * tile_bytes +
                                 (size_t)(cb > 0 ? cb : 0) * CHUNK_BYTES + (size_t)16 * lane;
    uint32_t issue_off = 0; /* the stage of the next copy, from the ring */
    int issued = 0;         /* chunks copied */
    auto issue = [&]() {
        if (issued < n) {
            const uint32_t d = ring_s + issue_off;
            cp16s(d, g_src);
            cp16s(d + CHUNK_BYTES, u_src);
            if (lane < 4) {
                cp16s(d + 512, g_src + 512);
                cp16s(d + CHUNK_BYTES + 512, u_src + 512);
            }
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory"); /* uniform counts */
        g_src += CHUNK_BYTES;
        u_src += CHUNK_BYTES;
        issued++;
        issue_off = issue_off + kStage == kRingBytes ? 0u : issue_off + kStage;
    };
    pdl_trigger();
#pragma unroll
    for (int i = 0; i < kRing - 1; i++)
        issue(); /* the first weights stream while the kernels before finish */
    pdl_wait();  /* then x's scratch is complete and y free to write */
    const unsigned char *xp =
        p.xq + (size_t)(cb > 0 ? cb : 0) * XQ_CHUNK + (size_t)XQ_LANE * lane;
    const uint32_t dlane = (uint32_t)(512 + 8 * (4 * h + t));
    uint32_t read_off = 0; /* the stage of chunk i */
    for (int i = 0; i < n; i++) {
        cp_wait<kRing - 2>(); /* this lane's copies of chunk i have landed */
        __syncwarp();         /* and every lane's (the scales); stage (i - 1) % kRing is read */
        issue();
        const unsigned char *st = ring + read_off;
        const uint4 *xc = reinterpret_cast<const uint4 *>(xp);
        const uint4 dg = __ldg(xc), cx = __ldg(xc + 1);
        gem_tiles_chunk(*reinterpret_cast<const uint4 *>(st + 16 * lane),
                        *reinterpret_cast<const uint2 *>(st + dlane), dg, cx, m0, a0);
        gem_tiles_chunk(*reinterpret_cast<const uint4 *>(st + CHUNK_BYTES + 16 * lane),
                        *reinterpret_cast<const uint2 *>(st + CHUNK_BYTES + dlane), dg, cx, m0,
                        a1);
        xp += XQ_CHUNK;
        read_off = read_off + kStage == kRingBytes ? 0u : read_off + kStage;
    }
    cp_wait<0>(); /* the empty groups */
    float r0 = a0[0] + a0[2], r1 = a0[1] + a0[3];
    float u0 = a1[0] + a1[2], u1 = a1[1] + a1[3];
    for (int o = 4; o < 32; o <<= 1) {
        r0 += __shfl_xor_sync(kFull, r0, o);
        r1 += __shfl_xor_sync(kFull, r1, o);
        u0 += __shfl_xor_sync(kFull, u0, o);
        u1 += __shfl_xor_sync(kFull, u1, o);
    }
    if (g == 0) {
        red[0][warp][2 * t] = r0;
        red[0][warp][2 * t + 1] = r1;
        red[1][warp][2 * t] = u0;
        red[1][warp][2 * t + 1] = u1;
    }
    __syncthreads();
    if (threadIdx.x < TILE_ROWS) {
        const int nw = (int)(blockDim.x >> 5), r = (int)threadIdx.x;
        float s = red[0][0][r], u = red[1][0][r];
        for (int w = 1; w < nw; w++)
            s += red[0][w][r];
        for (int w = 1; w < nw; w++)
            u += red[1][w][r];
        p.mat[0].y[(size_t)tile * TILE_ROWS + (size_t)r] = __fmul_rn(gem_gelu_tanh(s), u);
    }
}

/* The variant's scratch and kernel over p with the library's split. */
static void tight_launch(int v, TileParams p, const float *x, bool geglu)
{
    (void)v;
    unsigned grid;
    int64_t warps;
    tiles_prepare(&p, x, geglu, &grid, &warps);
    if (geglu)
        launch_smem(tight_geglu_kernel, grid, (unsigned)(32 * warps),
                    (size_t)warps * kRing * 2 * CHUNK_BYTES, p);
    else
        cudaCheck(launch_pdl(tight_kernel, grid, (unsigned)(32 * warps), 0, p));
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"library", "tight"};
    return tiles_bench_run(argc, argv, 2, names, tight_launch);
}
