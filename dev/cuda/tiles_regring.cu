/*
tiles_regring: the plain Q4_0 tile product (src/model/cuda/matvec_tiles.cu) with each register
slot of a warp's batch reloaded as soon as its chunk is computed, against the library's kernel in
the same process, at the Gemma 4 31B shapes.

The library's kernel holds a batch of 4 chunks a warp in registers and asks for the next batch
only after all 4 are computed (its SASS: the eight weight loads sit after the fourth chunk's
MMAs), so a warp has nothing in flight while it computes a batch; run 113's timeline put a
block's time after its launch wait mostly in the second batch's round trip, and the blocks of a
wave compute in step after the wait, leaving DRAM idle meanwhile. Every earlier way of keeping
more in flight cost registers (two batches: fewer warps) or shared memory (tiles_ring: L1 and
occupancy). Here the same 4 slots form a ring: chunk i + 4 is asked for into slot i % 4 right
after chunk i is computed, so a warp keeps 3 chunks in flight while it computes, with the
library's registers and no shared memory:

  1 reg-ring     the ring
  2 reg-ring-x   the ring, and the x scratch of chunk i + 1 loaded before chunk i is computed
                 (the library loads each chunk's scratch just before its MMAs)

Everything else is the library's: the tiled layout, the scratch kernel and the four MMAs per
chunk (tiles_arith.cuh), the split of the chunks over the warps and the order of every addition,
so the outputs must equal the library's bit for bit; the program checks that on every shape
before it times anything (exit 1 otherwise). GeGLU runs the library's kernel in every variant
(its cp.async ring already streams). Timing: ABBA (0 1 2 2 1 0), per-launch medians and chains,
rotating copies past the L2, fractions of the read probe measured in the same process. --once
runs every variant once per shape and exits (for a profiler).

H200 run 138: bit-identical on every shape; chains (us) library / reg-ring / reg-ring-x: q 13.03
/ 13.69 / 13.75, k 8.48 / 8.64 / 9.24, o-swa 14.20 / 13.62 / 14.24, o-full 21.88 / 23.03 / 22.55,
down 27.20 / 28.52 / 29.32, the head 213.1 / 259.1 / 266.2 (80.3% -> 66.1% of the probe); the
same with --hot. Loads spread among the MMAs lose, most of all on the head; the library keeps
its batches.

./tiles_regring [--reps R] [--once] [--hot]
*/
#include "tiles_bench.h"

/* ---- the register-ring kernel ------------------------------------------------------------- */

constexpr int kSlots = 4;

template <bool XAHEAD>
__global__ void __launch_bounds__(MAX_WARPS * 32) regring_kernel(const TileParams p)
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
    uint4 wq[kSlots];
    uint2 dd[kSlots];
    auto load = [&](int k, int64_t c) { /* chunk c into slot k, when it exists */
        if (c < ce) {
            const size_t off = (size_t)c * CHUNK_BYTES;
            wq[k] = __ldcs(reinterpret_cast<const uint4 *>(w0 + off + wlane));
            dd[k] = __ldcs(reinterpret_cast<const uint2 *>(w0 + off + dlane));
        }
    };
    auto xload = [&](int64_t c, uint4 &dg, uint4 &cx) {
        if (c < ce) {
            const uint4 *xc = reinterpret_cast<const uint4 *>(
                p.xq + (size_t)c * XQ_CHUNK + (size_t)XQ_LANE * lane);
            dg = __ldg(xc);
            cx = __ldg(xc + 1);
        }
    };
    pdl_trigger();
#pragma unroll
    for (int k = 0; k < kSlots; k++)
        load(k, cb + k); /* the first weights stream while the kernels before finish */
    pdl_wait();          /* then x's scratch is complete and y free to write */
    uint4 ndg = make_uint4(0, 0, 0, 0), ncx = make_uint4(0, 0, 0, 0);
    if (XAHEAD)
        xload(cb, ndg, ncx);
    for (int64_t c0 = cb; c0 < ce; c0 += kSlots) {
#pragma unroll
        for (int k = 0; k < kSlots; k++) {
            const int64_t c = c0 + k;
            if (c < ce) {
                uint4 dg, cx;
                if (XAHEAD) {
                    dg = ndg;
                    cx = ncx;
                    xload(c + 1, ndg, ncx);
                } else {
                    xload(c, dg, cx);
                }
                gem_tiles_chunk(wq[k], dd[k], dg, cx, m0, a0);
                load(k, c + kSlots); /* the slot is free: the chunk 4 on */
            }
        }
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

/* Variant v's scratch and kernel over p; GeGLU through the library's entry. */
static void regring_launch(int v, TileParams p, const float *x, bool geglu)
{
    if (geglu) {
        tiles_library_geglu(p, x);
        return;
    }
    unsigned grid;
    int64_t warps;
    tiles_prepare(&p, x, geglu, &grid, &warps);
    const unsigned block = (unsigned)(32 * warps);
    if (v == 1)
        cudaCheck(launch_pdl(regring_kernel<false>, grid, block, 0, p));
    else
        cudaCheck(launch_pdl(regring_kernel<true>, grid, block, 0, p));
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"library", "reg-ring", "reg-ring-x"};
    return tiles_bench_run(argc, argv, 3, names, regring_launch);
}
