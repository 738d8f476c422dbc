/*
tiles_lean: the plain Q4_0 tile product (src/model/cuda/matvec_tiles.cu's q4t_kernel) with the
same split, arithmetic and order of additions, and a leaner loop around the chunks, against the
library's kernel in the same process, at the Gemma 4 31B shapes.

Run 169 (ncu, out/ncu-tiles) counted 89-94 warp instructions a 576-byte chunk in the library's
products, and its SASS (results/h200/run169/sass.sh) shows a chunk of q4t_kernel's unrolled loop
at 56 instructions with its two scratch loads, where the chunk's own arithmetic (four IMMA,
eight masks, eight nibble operations, the scales, four I2F and four FFMA) is about 36: the rest
is 64-bit chunk indices and their compares (a batch's four `c0 + k < ce` tests as 64-bit pairs),
a branch and a WARPSYNC around every chunk, the lane's mask rebuilt every chunk, and the batch's
64-bit address arithmetic. On the H200 the products are partly bound by their instructions (the
head at 87% of the probe against 98% on an H100, run 169). Here:

  1 lean   a warp's chunks as 32-bit counts and its weight and scratch pointers stepped a
           batch at a time (the library's loop has 64-bit chunk indices and offsets); the same
           tests, loads and order otherwise

The chunk arithmetic is tiles_arith.cuh's, in the library's order, so the outputs must equal
the library's bit for bit (checked on every shape, and a repeat of each, before timing);
GeGLU runs the library's kernel in both. Timing: ABBA, per-launch medians and chains, rotating
copies past the L2, fractions of the read probe measured in the same process. --once runs every
variant once per shape and exits (for a profiler).

./tiles_lean [--reps R] [--once] [--hot]

Run 170 (results/h200/run170), on H100s (no H200 machine could be started then): bit for bit
the library's on every shape, 61 registers as the library's kernel, and ncu counts 82-84 warp
instructions a chunk against the library's 92-94 (10-11% fewer). Chained us, library / lean (two
of the three processes): q 13.00 / 13.06 and 12.97 / 13.04, k 11.86 / 10.99 and 11.89 / 11.33,
o-swa 16.07 / 16.21 and 16.07 / 16.13, o-full 24.73 / 24.53 and 24.67 / 24.58, down 30.53 /
30.09 and 30.56 / 30.07, the head 261.6 / 261.3 and 261.7 / 261.2 (98% of the probe; the third
call's figures are in COMMAND.md). On the H100, whose products are not bound by their
instructions (the head streams at 98% of its probe), only k (-2 to -7%) and down (-0.7 to
-1.6%) move. The H200, where the head reaches 87% of the probe, is the machine that can tell.

Run 171 (results/h200/run171, an H100 again): the loop went into the library's q4t_kernel
(fdf3b44) and whole 31B tokens moved 13.093 -> 13.025 ms at 128K and 9.776 -> 9.732 at 8K
(processes A B B A, every B below every A). Since then this program's "library" variant is the
lean loop too; run it from the tree before (143533c) to compare the two.
*/
#include "tiles_bench.h"

constexpr int kBatch = 4;

/* The library's q4t_kernel with the loop above. */
__global__ void __launch_bounds__(MAX_WARPS * 32) lean_kernel(const TileParams p)
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
    /* this warp's chunks [cb, cb + n) */
    const int64_t cb = (int64_t)warp * p.cpw;
    const int64_t ce = cb + p.cpw < p.nchunks ? cb + p.cpw : p.nchunks;
    const uint32_t n = ce > cb ? (uint32_t)(ce - cb) : 0u;
    const unsigned char *wp = p.mat[m].data + (size_t)tile * tile_bytes +
                              (size_t)(cb > 0 ? cb : 0) * CHUNK_BYTES + (size_t)16 * lane;
    const size_t dl = (size_t)(512 + 8 * (4 * h + t)) - (size_t)16 * lane; /* from wp */
    const unsigned char *xp =
        p.xq + (size_t)(cb > 0 ? cb : 0) * XQ_CHUNK + (size_t)XQ_LANE * lane;
    uint4 wq[kBatch];
    uint2 dd[kBatch];
    /* the next batch's weights: all four when n >= 4, else the first n */
    auto load = [&](const unsigned char *w, uint32_t left) {
#pragma unroll
        for (int k = 0; k < kBatch; k++) {
            if ((uint32_t)k < left) {
                wq[k] = __ldcs(reinterpret_cast<const uint4 *>(w + (size_t)k * CHUNK_BYTES));
                dd[k] = __ldcs(reinterpret_cast<const uint2 *>(w + (size_t)k * CHUNK_BYTES + dl));
            }
        }
    };
    pdl_trigger();
    load(wp, n);
    pdl_wait();
    for (uint32_t c = 0; c < n; c += kBatch) {
#pragma unroll
        for (int k = 0; k < kBatch; k++) {
            if (c + (uint32_t)k < n) {
                const uint4 *xc = reinterpret_cast<const uint4 *>(xp + (size_t)k * XQ_CHUNK);
                gem_tiles_chunk(wq[k], dd[k], __ldg(xc), __ldg(xc + 1), m0, a0);
            }
        }
        wp += (size_t)kBatch * CHUNK_BYTES;
        xp += (size_t)kBatch * XQ_CHUNK;
        if (c + kBatch < n)
            load(wp, n - c - kBatch); /* as the library: the next batch once this one is done */
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

/* The variant's scratch and kernel over p with the library's split; GeGLU through the library. */
static void lean_launch(int v, TileParams p, const float *x, bool geglu)
{
    (void)v;
    if (geglu) {
        tiles_library_geglu(p, x);
        return;
    }
    unsigned grid;
    int64_t warps;
    tiles_prepare(&p, x, geglu, &grid, &warps);
    cudaCheck(launch_pdl(lean_kernel, grid, (unsigned)(32 * warps), 0, p));
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"library", "lean"};
    return tiles_bench_run(argc, argv, 2, names, lean_launch);
}
