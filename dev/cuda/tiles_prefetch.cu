/*
tiles_prefetch: the Q4_0 tile product (src/model/cuda/matvec_tiles.cu) with a bulk prefetch of
its weights into the L2 when a block starts, against the library's kernel in the same process,
at the Gemma 4 31B shapes.

H200 runs 34-35 (dev/cuda/tiles_ring, tiles_regs; docs/model-cuda.md): the library's kernel is
limited by the bytes an SM has in flight. A load in flight holds a register (the plain product:
a batch of 4 chunks, 3 KB a warp) or shared memory (GeGLU's ring of 4 stages), and both bound
the warps an SM holds; deeper rings and second register buffers lost. On the layer matrices
(12-130 MB) the product reads at 31-76% of the read probe, the head (793 MB) at 80%.

Here a block asks the memory system for its weights in one go, with no register or shared memory
held: `cp.async.bulk.prefetch.L2.global` (sm_90; 16-byte aligned, a multiple of 16 bytes) of
a byte range, issued before the launch wait (nothing in a token writes the weights), then the
library's loads, which find the lines in the L2 or already on their way there. A block's tile is
contiguous (the tiled layout: a tile of 8 rows is cols / 128 chunks of 576 bytes), a warp's
share of it too, so a range is one instruction:

  1 pf-warp   lane 0 of each warp: its own chunks [cb, ce) (the plain product's and GeGLU's
              split), both matrices for GeGLU
  2 pf-rest   the same without the chunks the warp loads first anyway (the plain product's first
              batch of 4, GeGLU's first 3 ring stages)
  3 pf-tile   thread 0: the block's whole tile (both matrices for GeGLU), one instruction each

Prediction: the resident blocks' prefetches keep the DRAM queue full whatever the registers
allow (some 16-26 MB in flight at the 31B shapes, under the 50 MB L2), so the layer matrices
move toward the head's 80% of the probe chained: q 13 -> ~8 us, down 27 -> ~17, gate+up 37 ->
~31; pf-tile no worse than pf-warp; the head unchanged.

H200 run 107 (results/h200/run107): every variant equals the library bit for bit, and none is
faster. Chained (us, library / pf-warp / pf-rest / pf-tile): q 13.1 / 12.8 / 12.6 / 13.1, k 8.5
/ 8.8 / 8.6 / 9.0, o-swa 14.3 / 14.4 / 14.0 / 14.6, o-full 22.0 / 23.4 / 22.6 / 23.4, gate+up
36.9 / 39.2 / 39.6 / 39.2, down 27.3 / 29.8 / 29.4 / 30.0, the head 213 / 212 / 214 / 215.
Missed: the queue of requests to DRAM is not what holds the layer matrices at 31-76%; the
extra requests cost 2-10% on the larger ones. What is left per call (about 6 us on q beyond
80% of the probe) is the launch, the scratch kernel, the ramp and the tail, not the depth.

Everything else is the library's: the tiled layout, the scratch kernel and the four MMAs per
chunk (tiles_arith.cuh), the split of the chunks over the warps and the order of every
addition, so the outputs must equal the library's bit for bit; tiles_bench.h checks that on
every shape before it times anything (exit 1 otherwise). Timing: ABBA, per-launch medians and
chains, rotating copies past the L2, fractions of the read probe measured in the same process.
--once runs every variant once per shape and exits (for a profiler).

./tiles_prefetch [--reps R] [--once]
*/
#include "tiles_bench.h"

/* The L2 prefetch of bytes (a multiple of 16) at p (16-byte aligned). */
__device__ __forceinline__ void l2_prefetch(const void *p, uint32_t bytes)
{
    if (bytes)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes)
                     : "memory");
}

/* The library's warp split: a warp's chunks [cb, ce) of its tile; its prefetch per mode (the
 * module comment), `first` chunks of it loaded directly anyway. */
template <int PF>
__device__ __forceinline__ void prefetch_tile(const unsigned char *w0, const unsigned char *w1,
                                              size_t tile_bytes, int64_t cb, int64_t ce,
                                              int first)
{
    if (PF == 3) {
        if (threadIdx.x == 0) {
            l2_prefetch(w0, (uint32_t)tile_bytes);
            if (w1)
                l2_prefetch(w1, (uint32_t)tile_bytes);
        }
        return;
    }
    if ((threadIdx.x & 31) != 0)
        return;
    const int64_t c0 = PF == 2 ? (cb + first < ce ? cb + first : ce) : cb;
    const uint32_t bytes = (uint32_t)((ce - c0) * CHUNK_BYTES);
    l2_prefetch(w0 + (size_t)c0 * CHUNK_BYTES, bytes);
    if (w1)
        l2_prefetch(w1 + (size_t)c0 * CHUNK_BYTES, bytes);
}

/* ---- the plain product: the library's q4t_kernel with the prefetch ---------------------------- */

#define BATCH 4

template <int PF> __global__ void __launch_bounds__(MAX_WARPS * 32) pf_kernel(const TileParams p)
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
    const unsigned char *w0 = p.mat[m].data + (size_t)tile * tile_bytes;
    const uint32_t m0 = h ? 0u : kFull;
    float a0[4] = {0.f, 0.f, 0.f, 0.f};
    const int64_t cb = (int64_t)warp * p.cpw;
    const int64_t ce = cb + p.cpw < p.nchunks ? cb + p.cpw : p.nchunks;
    const size_t wlane = (size_t)16 * lane, dlane = (size_t)(512 + 8 * (4 * h + t));
    uint4 wq[BATCH];
    uint2 dd[BATCH];
    auto load = [&](int64_t c0) {
#pragma unroll
        for (int k = 0; k < BATCH; k++) {
            if (c0 + k < ce) {
                const size_t off = (size_t)(c0 + k) * CHUNK_BYTES;
                wq[k] = __ldcs(reinterpret_cast<const uint4 *>(w0 + off + wlane));
                dd[k] = __ldcs(reinterpret_cast<const uint2 *>(w0 + off + dlane));
            }
        }
    };
    pdl_trigger();
    load(cb);
    prefetch_tile<PF>(w0, nullptr, tile_bytes, cb, ce, BATCH);
    pdl_wait();
    for (int64_t c0 = cb; c0 < ce; c0 += BATCH) {
#pragma unroll
        for (int k = 0; k < BATCH; k++) {
            if (c0 + k < ce) {
                const uint4 *xc = reinterpret_cast<const uint4 *>(
                    p.xq + (size_t)(c0 + k) * XQ_CHUNK + (size_t)XQ_LANE * lane);
                const uint4 dg = __ldg(xc), cx = __ldg(xc + 1);
                gem_tiles_chunk(wq[k], dd[k], dg, cx, m0, a0);
            }
        }
        if (c0 + BATCH < ce)
            load(c0 + BATCH);
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

/* ---- GeGLU: the library's q4t_geglu_kernel (a ring of 4 stages a warp) with the prefetch ----- */

#define RING 4

template <int PF>
__global__ void __launch_bounds__(MAX_WARPS * 32) pf_geglu_kernel(const TileParams p)
{
    extern __shared__ __align__(16) unsigned char ring_sm[];
    __shared__ float red[2][MAX_WARPS][TILE_ROWS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = g >> 2;
    const int64_t tile = blockIdx.x;
    const size_t tile_bytes = (size_t)p.nchunks * CHUNK_BYTES;
    const unsigned char *w0 = p.mat[0].data + (size_t)tile * tile_bytes;
    const unsigned char *w1 = p.mat[1].data + (size_t)tile * tile_bytes;
    const uint32_t m0 = h ? 0u : kFull;
    float a0[4] = {0.f, 0.f, 0.f, 0.f}, a1[4] = {0.f, 0.f, 0.f, 0.f};
    const int64_t cb = (int64_t)warp * p.cpw;
    const int64_t ce = cb + p.cpw < p.nchunks ? cb + p.cpw : p.nchunks;
    const int n = ce > cb ? (int)(ce - cb) : 0;
    unsigned char *ring = ring_sm + (size_t)warp * RING * 2 * CHUNK_BYTES;
    auto issue = [&](int i) {
        if (i < n) {
            unsigned char *st = ring + (size_t)(i % RING) * 2 * CHUNK_BYTES;
            const size_t off = (size_t)(cb + i) * CHUNK_BYTES;
            cp16(st + 16 * lane, w0 + off + 16 * lane);
            cp16(st + CHUNK_BYTES + 16 * lane, w1 + off + 16 * lane);
            if (lane < 4) {
                cp16(st + 512 + 16 * lane, w0 + off + 512 + 16 * lane);
                cp16(st + CHUNK_BYTES + 512 + 16 * lane, w1 + off + 512 + 16 * lane);
            }
        }
        cp_commit();
    };
    pdl_trigger();
#pragma unroll
    for (int i = 0; i < RING - 1; i++)
        issue(i);
    prefetch_tile<PF>(w0, w1, tile_bytes, cb, ce, RING - 1);
    pdl_wait();
    for (int i = 0; i < n; i++) {
        cp_wait<RING - 2>();
        __syncwarp();
        issue(i + RING - 1);
        const unsigned char *st = ring + (size_t)(i % RING) * 2 * CHUNK_BYTES;
        const uint4 *xc = reinterpret_cast<const uint4 *>(p.xq + (size_t)(cb + i) * XQ_CHUNK +
                                                          (size_t)XQ_LANE * lane);
        const uint4 dg = __ldg(xc), cx = __ldg(xc + 1);
        const size_t dlane = (size_t)(512 + 8 * (4 * h + t));
        gem_tiles_chunk(*reinterpret_cast<const uint4 *>(st + 16 * lane),
                        *reinterpret_cast<const uint2 *>(st + dlane), dg, cx, m0, a0);
        gem_tiles_chunk(*reinterpret_cast<const uint4 *>(st + CHUNK_BYTES + 16 * lane),
                        *reinterpret_cast<const uint2 *>(st + CHUNK_BYTES + dlane), dg, cx, m0,
                        a1);
    }
    cp_wait<0>();
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

/* Variant v's scratch and kernel over p. */
static void pf_launch(int v, TileParams p, const float *x, bool geglu)
{
    unsigned grid;
    int64_t warps;
    tiles_prepare(&p, x, geglu, &grid, &warps);
    const unsigned block = (unsigned)(32 * warps);
    if (geglu) {
        const size_t smem = (size_t)warps * RING * 2 * CHUNK_BYTES;
        if (v == 1)
            launch_smem(pf_geglu_kernel<1>, grid, block, smem, p);
        else if (v == 2)
            launch_smem(pf_geglu_kernel<2>, grid, block, smem, p);
        else
            launch_smem(pf_geglu_kernel<3>, grid, block, smem, p);
        return;
    }
    if (v == 1)
        cudaCheck(launch_pdl(pf_kernel<1>, grid, block, 0, p));
    else if (v == 2)
        cudaCheck(launch_pdl(pf_kernel<2>, grid, block, 0, p));
    else
        cudaCheck(launch_pdl(pf_kernel<3>, grid, block, 0, p));
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"library", "pf-warp", "pf-rest", "pf-tile"};
    return tiles_bench_run(argc, argv, 4, names, pf_launch);
}
