/*
tiles_split: the plain Q4_0 tile product (src/model/cuda/matvec_tiles.cu) with more chunks a
warp, so fewer warps a tile, against the library's kernel in the same process, at the Gemma 4
31B shapes.

Run 145 (ncu, one launch a shape) counted 92-98 warp instructions a 576-byte chunk, where a
chunk's own arithmetic and loads are about 60: the rest is each warp's fixed work (finding its
tile, addresses, the first loads, the shuffles, the block's barrier and the final sum), paid
over only 7-8 chunks (the library splits a tile's chunks so that a warp takes at most 8). The
head's issue slots were 69% busy at 80% of the read probe, the layer matrices' 36-48% with
their warps waiting on DRAM (long scoreboard 7-10 cycles an instruction). With more chunks a
warp the fixed work is spread thinner and a block has fewer warps, so an SM holds more blocks
(up to its 32 warps at 64 registers) and a matrix of 1,024 tiles fits in one wave:

  1 cpw-12   at most 12 chunks a warp (5376 columns: 4 warps of 11)
  2 cpw-16   at most 16 (5376: 3 warps of 14; 8192: 4 of 16; 16384: 8 of 16; 21504: 11 of 16)
  3 cpw-24   at most 24 (5376: 2 warps of 21)

The library's kernel and arithmetic otherwise (the loop over batches of 4 chunks in
registers, tiles_arith.cuh). The warps' partial sums meet in another grouping, so the outputs
are held to within 1e-6 of the largest |y| of the library's (and to bitwise repeats) before
anything is timed; GeGLU runs the library's kernel in every variant. Timing: ABBA, per-launch
medians and chains, rotating copies past the L2, fractions of the read probe measured in the
same process. --once runs every variant once per shape and exits (for a profiler).

H200 run 146 ("library" then: at most 8 chunks a warp), chains in us, library / cpw-12 / cpw-16 /
cpw-24, all within 2.4e-7 of the largest |y|: q 13.02 / 11.42 / 13.65 / 17.30, k 8.54 / 11.10 /
12.30 / 16.00, o-swa 14.21 / 15.40 / 13.30 / 17.84, o-full 22.12 / 23.81 / 23.46 / 26.28, down
27.31 / 26.66 / 29.13 / 30.80, the head 212.8 / 200.2 / 198.7 / 197.1 (82% -> 87-89% of the
probe); --hot the same picture. The library's plain product takes at most 12 chunks a warp with
a power-of-two number of warps (4 at 5376 columns; 8, 16 and 16 at 8192, 16384 and 21504, as
before), so "library" is that since; this program's tiles_prepare gives the library's split.

./tiles_split [--reps R] [--once] [--hot]
*/
#include "tiles_bench.h"

/* ---- the library's plain kernel (matvec_tiles.cu's q4t_kernel), its split from p ------------ */

constexpr int kBatch = 4;

__global__ void __launch_bounds__(MAX_WARPS * 32) split_kernel(const TileParams p)
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
    uint4 wq[kBatch];
    uint2 dd[kBatch];
    auto load = [&](int64_t c0) {
#pragma unroll
        for (int k = 0; k < kBatch; k++) {
            if (c0 + k < ce) {
                const size_t off = (size_t)(c0 + k) * CHUNK_BYTES;
                wq[k] = __ldcs(reinterpret_cast<const uint4 *>(w0 + off + wlane));
                dd[k] = __ldcs(reinterpret_cast<const uint2 *>(w0 + off + dlane));
            }
        }
    };
    pdl_trigger();
    load(cb);
    pdl_wait();
    for (int64_t c0 = cb; c0 < ce; c0 += kBatch) {
#pragma unroll
        for (int k = 0; k < kBatch; k++) {
            if (c0 + k < ce) {
                const uint4 *xc = reinterpret_cast<const uint4 *>(
                    p.xq + (size_t)(c0 + k) * XQ_CHUNK + (size_t)XQ_LANE * lane);
                const uint4 dg = __ldg(xc), cx = __ldg(xc + 1);
                gem_tiles_chunk(wq[k], dd[k], dg, cx, m0, a0);
            }
        }
        if (c0 + kBatch < ce)
            load(c0 + kBatch);
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

static const int64_t kTarget[4] = {0, 12, 16, 24}; /* chunks a warp at most, by variant */

/* The variant's scratch and kernel over p with its own split; GeGLU through the library. */
static void split_launch(int v, TileParams p, const float *x, bool geglu)
{
    if (geglu) {
        tiles_library_geglu(p, x);
        return;
    }
    unsigned grid;
    int64_t warps;
    tiles_prepare(&p, x, geglu, &grid, &warps); /* the scratch, tile0 and nchunks */
    warps = (p.nchunks + kTarget[v] - 1) / kTarget[v];
    warps = warps > MAX_WARPS ? MAX_WARPS : warps;
    p.cpw = (p.nchunks + warps - 1) / warps;
    cudaCheck(launch_pdl(split_kernel, grid, (unsigned)(32 * warps), 0, p));
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"library", "cpw-12", "cpw-16", "cpw-24"};
    tiles_bench_tol = 1e-6;
    return tiles_bench_run(argc, argv, 4, names, split_launch);
}
