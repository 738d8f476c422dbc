/*
tiles_smemfirst: the plain Q4_0 tile product (src/model/cuda/matvec_tiles.cu) with a warp's first
batch landing in shared memory, so that its second batch can be asked for as soon as the launch
wait returns, against the library's kernel in the same process, at the Gemma 4 31B shapes.

Run 113's timeline: after the launch wait a block computes its first batch (asked for before
the wait, already there) for about 1 us, and every block of the first wave does so at once,
while DRAM idles; only then does each warp ask for its second batch, a whole loaded round trip
(about 3 us). Two register batches cost warps (run 34), a ring of shared-memory stages per chunk
lost (run 35), and loads spread through the MMAs lost (run 138). Here only the first batch of 4
chunks goes to shared memory (cp.async before the wait: 2,304 bytes a warp, 69-74 KB an SM at
the library's occupancy); right after the wait the warp asks for its second batch into the
library's registers and then computes the first from shared memory, so each warp has its first
8 chunks asked for by the time it computes (q's and k's warps hold 7: all of them). From the
second register batch on it is the library's loop.

  1 smem-first

Everything else is the library's: the tiled layout, the scratch kernel and the four MMAs per
chunk (tiles_arith.cuh), the split of the chunks over the warps and the order of every
addition, so the outputs must equal the library's bit for bit; the program checks that on every
shape before it times anything (exit 1 otherwise). GeGLU runs the library's kernel (its
cp.async ring already streams). Timing: ABBA (0 1 1 0), per-launch medians and chains,
rotating copies past the L2, fractions of the read probe measured in the same process. --once
runs every variant once per shape and exits (for a profiler).

H200 run 144: bit-identical on every shape; chains (us) library / smem-first: q 13.08 / 14.43,
k 8.55 / 8.78, o-swa 14.21 / 14.66, o-full 21.99 / 25.06, down 27.25 / 30.33, the head 214.1 /
265.1 (80% -> 65% of the probe); with --hot closer (q 11.4-12.0 / 12.3, k 8.05 / 7.66) but no
faster on the larger shapes. Asked for earlier, the weights arrive later: with run 138's
register ring this is the second way of keeping more of a warp's chunks in flight that costs
the head 15 points of the probe. The library keeps its batches.

./tiles_smemfirst [--reps R] [--once] [--hot]
*/
#include "tiles_bench.h"

/* ---- the kernel ----------------------------------------------------------------------------- */

constexpr int kBatch = 4;

/* Dynamic shared memory: per warp kBatch chunks of CHUNK_BYTES. */
__global__ void __launch_bounds__(MAX_WARPS * 32) smemfirst_kernel(const TileParams p)
{
    extern __shared__ __align__(16) unsigned char first_sm[];
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
    unsigned char *mine = first_sm + (size_t)warp * kBatch * CHUNK_BYTES;
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
    auto chunk = [&](int64_t c, const uint4 &w, const uint2 &d) {
        const uint4 *xc = reinterpret_cast<const uint4 *>(p.xq + (size_t)c * XQ_CHUNK +
                                                          (size_t)XQ_LANE * lane);
        const uint4 dg = __ldg(xc), cx = __ldg(xc + 1);
        gem_tiles_chunk(w, d, dg, cx, m0, a0);
    };
    pdl_trigger();
    /* the first batch into shared memory while the kernels before finish: lane l copies the
     * 16 bytes of nibbles at 16 l of each chunk, lanes 0-3 the 64 bytes of scales */
#pragma unroll
    for (int k = 0; k < kBatch; k++) {
        if (cb + k < ce) {
            const size_t off = (size_t)(cb + k) * CHUNK_BYTES;
            unsigned char *st = mine + (size_t)k * CHUNK_BYTES;
            cp16(st + 16 * lane, w0 + off + 16 * lane);
            if (lane < 4)
                cp16(st + 512 + 16 * lane, w0 + off + 512 + 16 * lane);
        }
    }
    cp_commit();
    pdl_wait(); /* x's scratch is complete and y free to write */
    load(cb + kBatch); /* the second batch, before the first is computed */
    cp_wait<0>();
    __syncwarp(); /* every lane's copies: the scales */
#pragma unroll
    for (int k = 0; k < kBatch; k++) {
        if (cb + k < ce) {
            const unsigned char *st = mine + (size_t)k * CHUNK_BYTES;
            chunk(cb + k, *reinterpret_cast<const uint4 *>(st + 16 * lane),
                  *reinterpret_cast<const uint2 *>(st + 512 + 8 * (4 * h + t)));
        }
    }
    for (int64_t c0 = cb + kBatch; c0 < ce; c0 += kBatch) {
#pragma unroll
        for (int k = 0; k < kBatch; k++)
            if (c0 + k < ce)
                chunk(c0 + k, wq[k], dd[k]);
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

/* The variant's scratch and kernel over p; GeGLU through the library's entry. */
static void smemfirst_launch(int v, TileParams p, const float *x, bool geglu)
{
    (void)v;
    if (geglu) {
        tiles_library_geglu(p, x);
        return;
    }
    unsigned grid;
    int64_t warps;
    tiles_prepare(&p, x, geglu, &grid, &warps);
    const unsigned block = (unsigned)(32 * warps);
    launch_smem(smemfirst_kernel, grid, block, (size_t)warps * kBatch * CHUNK_BYTES, p);
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"library", "smem-first"};
    return tiles_bench_run(argc, argv, 2, names, smemfirst_launch);
}
