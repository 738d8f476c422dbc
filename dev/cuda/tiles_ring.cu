/*
tiles_ring: the Q4_0 tile product (src/model/cuda/matvec_tiles.cu) with its weights brought by
cp.async into a ring of shared-memory stages per warp, against the library's kernel in the same
process, at the Gemma 4 31B shapes.

H200 run 34 (dev/cuda/tiles_pipe, since removed; its code is in commit 8a3736b; ncu): the library's
kernel is limited by the bytes an SM has in flight.
Its loads land in registers (a batch of 4 chunks, 3 KB a warp), a warp has nothing in flight
while it computes, and the registers bound the warps an SM holds (61 a thread for the product,
5 blocks of 6 warps; 84 for GeGLU, 3 blocks); pipelining through twice the registers lost
(fewer warps). Here a load in flight holds no register: each warp keeps S stages of one chunk
(576 bytes; GeGLU: the chunk of both matrices) in shared memory, issues chunk i + S - 1 as soon
as chunk i has landed, and computes chunk i from shared memory while the next S - 1 stream:

  1 ring-a   S = 4 (GeGLU 2)
  2 ring-b   S = 8 (GeGLU 4)

H200 run 35, with GeGLU at 3 and 6 stages: GeGLU 3 won (gate+up 45.4 -> 38.3 us chained, 63%
-> 75% of the probe; 6: 46.2) and became the library's GeGLU (src/model/cuda/matvec_tiles.cu,
kRing), so from then on "library" is that ring for gate+up and GeGLU runs 2 and 4 stages
against it; the plain product lost at every shape (the head 82% -> 73% and 71%, down 53% ->
48% and 45%) and keeps its register loads. Run 36: GeGLU 4 stages 36.9 us chained against the
library's 3 (38.0), 2 stages 40.7; the library took 4 (so "library" is 4 stages after run 36).

Lane l copies and reads the 16 bytes of nibbles at 16 l (its own), lanes 0-3 the 64 bytes of
scales (read by all after the wait and a warp barrier); .cg copies (L2 only). Everything else
is the library's: the tiled layout, the scratch kernel and the four MMAs per chunk
(tiles_arith.cuh), the split of the chunks over the warps and the order of every addition, so
the outputs must equal the library's bit for bit; the program checks that on every shape
before it times anything (exit 1 otherwise). Timing: ABBA (0 1 2 2 1 0),
per-launch medians and chains, rotating copies past the L2, fractions of the read probe
measured in the same process. --once runs every variant once per shape and exits (for a
profiler).

./tiles_ring [--reps R] [--once]
*/
#include "tiles_bench.h"

/* ---- the ring kernel ----------------------------------------------------------------------- */

/* Dynamic shared memory: per warp S stages of NM * 576 bytes. */
template <bool GEGLU, int S>
__global__ void __launch_bounds__(MAX_WARPS * 32) ring_kernel(const TileParams p)
{
    constexpr int NM = GEGLU ? 2 : 1;
    extern __shared__ __align__(16) unsigned char ring_sm[];
    __shared__ float red[GEGLU ? 2 : 1][MAX_WARPS][TILE_ROWS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = g >> 2;
    int64_t tile = blockIdx.x;
    int m = 0;
    if (!GEGLU)
        while (m + 1 < p.nmat && tile >= p.mat[m + 1].tile0)
            m++;
    tile -= p.mat[m].tile0;
    const size_t tile_bytes = (size_t)p.nchunks * CHUNK_BYTES;
    const unsigned char *w0 = p.mat[m].data + (size_t)tile * tile_bytes;
    const unsigned char *w1 = GEGLU ? p.mat[1].data + (size_t)tile * tile_bytes : nullptr;
    const uint32_t m0 = h ? 0u : kFull;
    float a0[4] = {0.f, 0.f, 0.f, 0.f}, a1[4] = {0.f, 0.f, 0.f, 0.f};
    const int64_t cb = (int64_t)warp * p.cpw;
    const int64_t ce = cb + p.cpw < p.nchunks ? cb + p.cpw : p.nchunks;
    const int n = ce > cb ? (int)(ce - cb) : 0;
    unsigned char *ring = ring_sm + (size_t)warp * S * NM * CHUNK_BYTES;
    auto issue = [&](int i) {
        if (i < n) {
            unsigned char *st = ring + (size_t)(i % S) * NM * CHUNK_BYTES;
            const size_t off = (size_t)(cb + i) * CHUNK_BYTES;
            cp16(st + 16 * lane, w0 + off + 16 * lane);
            if (lane < 4)
                cp16(st + 512 + 16 * lane, w0 + off + 512 + 16 * lane);
            if (GEGLU) {
                cp16(st + CHUNK_BYTES + 16 * lane, w1 + off + 16 * lane);
                if (lane < 4)
                    cp16(st + CHUNK_BYTES + 512 + 16 * lane, w1 + off + 512 + 16 * lane);
            }
        }
        cp_commit(); /* one group per chunk, empty past the end: the counts stay uniform */
    };
    pdl_trigger();
#pragma unroll
    for (int i = 0; i < S - 1; i++)
        issue(i); /* the first weights stream while the kernels before finish */
    pdl_wait();
    for (int i = 0; i < n; i++) {
        cp_wait<S - 2>(); /* chunk i has landed (this lane's copies) */
        __syncwarp();     /* every lane's: the scales; and slot (i - 1) % S is read */
        issue(i + S - 1);
        const unsigned char *st = ring + (size_t)(i % S) * NM * CHUNK_BYTES;
        const uint4 *xc = reinterpret_cast<const uint4 *>(p.xq + (size_t)(cb + i) * XQ_CHUNK +
                                                          (size_t)XQ_LANE * lane);
        const uint4 dg = __ldg(xc), cx = __ldg(xc + 1);
        const uint4 wq = *reinterpret_cast<const uint4 *>(st + 16 * lane);
        const uint2 dd = *reinterpret_cast<const uint2 *>(st + 512 + 8 * (4 * h + t));
        gem_tiles_chunk(wq, dd, dg, cx, m0, a0);
        if (GEGLU) {
            const uint4 wq1 = *reinterpret_cast<const uint4 *>(st + CHUNK_BYTES + 16 * lane);
            const uint2 dd1 =
                *reinterpret_cast<const uint2 *>(st + CHUNK_BYTES + 512 + 8 * (4 * h + t));
            gem_tiles_chunk(wq1, dd1, dg, cx, m0, a1);
        }
    }
    cp_wait<0>();
    float r0 = a0[0] + a0[2], r1 = a0[1] + a0[3];
    float u0 = a1[0] + a1[2], u1 = a1[1] + a1[3];
    for (int o = 4; o < 32; o <<= 1) {
        r0 += __shfl_xor_sync(kFull, r0, o);
        r1 += __shfl_xor_sync(kFull, r1, o);
        if (GEGLU) {
            u0 += __shfl_xor_sync(kFull, u0, o);
            u1 += __shfl_xor_sync(kFull, u1, o);
        }
    }
    if (g == 0) {
        red[0][warp][2 * t] = r0;
        red[0][warp][2 * t + 1] = r1;
        if (GEGLU) {
            red[GEGLU ? 1 : 0][warp][2 * t] = u0;
            red[GEGLU ? 1 : 0][warp][2 * t + 1] = u1;
        }
    }
    __syncthreads();
    if (threadIdx.x < TILE_ROWS) {
        const int nw = (int)(blockDim.x >> 5), r = (int)threadIdx.x;
        float s = red[0][0][r];
        for (int w = 1; w < nw; w++)
            s += red[0][w][r];
        if (GEGLU) {
            float u = red[GEGLU ? 1 : 0][0][r];
            for (int w = 1; w < nw; w++)
                u += red[GEGLU ? 1 : 0][w][r];
            s = __fmul_rn(gem_gelu_tanh(s), u);
        }
        p.mat[m].y[(size_t)tile * TILE_ROWS + (size_t)r] = s;
    }
}

/* Variant v's scratch and ring kernel over p. */
static void ring_launch(int v, TileParams p, const float *x, bool geglu)
{
    unsigned grid;
    int64_t warps;
    tiles_prepare(&p, x, geglu, &grid, &warps);
    const unsigned block = (unsigned)(32 * warps);
    const int sa = geglu ? 2 : 4, sb = geglu ? 4 : 8, st = v == 1 ? sa : sb;
    const size_t smem = (size_t)warps * (size_t)st * (geglu ? 2 : 1) * CHUNK_BYTES;
    if (v == 1)
        geglu ? launch_smem(ring_kernel<true, 2>, grid, block, smem, p)
              : launch_smem(ring_kernel<false, 4>, grid, block, smem, p);
    else
        geglu ? launch_smem(ring_kernel<true, 4>, grid, block, smem, p)
              : launch_smem(ring_kernel<false, 8>, grid, block, smem, p);
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"library", "ring-a", "ring-b"};
    return tiles_bench_run(argc, argv, 3, names, ring_launch);
}
