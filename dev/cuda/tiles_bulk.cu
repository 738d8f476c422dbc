/*
tiles_bulk: the Q4_0 tile product (src/model/cuda/matvec_tiles.cu) with its weights moved by
the Tensor Memory Accelerator instead of registers, against the library's kernel in the same
process, at the Gemma 4 31B shapes.

The library's kernel loads each warp's chunks into registers, four at a time (GeGLU: two of
each matrix), so a warp waits on DRAM once per batch and holds few bytes in flight between
batches. Here lane 0 of every warp issues one bulk copy (cp.async.bulk, completion on an
mbarrier) of all its chunks into shared memory before the programmatic-launch wait, and the
lanes read their words from shared memory once it lands: the whole tile is in flight at
once and no register holds a load. Everything else is the library's: the tiled layout, the
x scratch and the four MMAs per chunk (src/model/cuda/tiles_arith.cuh, as the library), the split of the chunks over
the warps and the order of every addition, so the outputs must equal the library's bit for
bit; the program checks that on every shape before it times anything (exit 1 otherwise).

Timing, per shape: the library's gem_dmv (or gem_dmv_geglu) and the scratch kernel plus the
bulk kernel, both launched as programmatic dependents; the median of per-launch event
intervals, and a chain of launches with events around the chain alone (as a decode loop
runs them); rotating over copies of the matrices whose bytes exceed 4 x the 50 MiB L2.
The fraction is of the library's read probe measured in the same process.

./tiles_bulk [--reps R] [--once]

H200, run 30 (results/h200/run30/dev-tiles-bulk.txt): bit-identical on every shape; the bulk
copies lose on every layer matrix (per launch: q 17.2 -> 17.6 us, k 11.2 -> 12.1, o 17.6 ->
18.6, o-full 24.7 -> 29.0, gate+up 49.0 -> 56.4, down 29.9 -> 35.0) and win on the head only
(217 -> 208 us, 79% -> 82% of the probe): a warp waits for its whole range before its first
MMA, and the larger tiles' shared memory limits the blocks per SM. The library keeps its
register loads.
*/
#include "tiles_bench.h"

/* ---- the bulk-copy kernel ------------------------------------------------------------------ */

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* Dynamic shared memory: the tile's chunks (GeGLU: the gate tile, then the up tile), then one
 * mbarrier per warp. */
template <bool GEGLU>
__global__ void __launch_bounds__(MAX_WARPS * 32) bulk_kernel(const TileParams p)
{
    extern __shared__ __align__(128) unsigned char sm[];
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
    const int64_t cb = (int64_t)warp * p.cpw;
    const int64_t ce = cb + p.cpw < p.nchunks ? cb + p.cpw : p.nchunks;
    uint64_t *bar = reinterpret_cast<uint64_t *>(sm + (GEGLU ? 2 : 1) * tile_bytes) + warp;
    const uint32_t bar_a = smem_addr(bar);
    const uint32_t bytes = (uint32_t)((ce > cb ? ce - cb : 0) * CHUNK_BYTES);
    if (lane == 0 && bytes) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar_a) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar_a),
                     "r"(bytes * (GEGLU ? 2u : 1u))
                     : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], "
                     "[%1], %2, [%3];\n" ::"r"(smem_addr(sm + cb * CHUNK_BYTES)),
                     "l"(w0 + cb * CHUNK_BYTES), "r"(bytes), "r"(bar_a)
                     : "memory");
        if (GEGLU)
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], "
                         "[%1], %2, [%3];\n" ::"r"(smem_addr(sm + tile_bytes + cb * CHUNK_BYTES)),
                         "l"(w1 + cb * CHUNK_BYTES), "r"(bytes), "r"(bar_a)
                         : "memory");
    }
    pdl_trigger();
    pdl_wait();
    __syncwarp();
    if (bytes)
        asm volatile("{\n\t.reg .pred P1;\n\t"
                     "WAIT_%=:\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], 0;\n\t"
                     "@P1 bra DONE_%=;\n\t"
                     "bra WAIT_%=;\n\t"
                     "DONE_%=:\n\t}\n" ::"r"(bar_a)
                     : "memory");
    const uint32_t m0 = h ? 0u : kFull;
    float a0[4] = {0.f, 0.f, 0.f, 0.f}, a1[4] = {0.f, 0.f, 0.f, 0.f};
    for (int64_t c = cb; c < ce; c++) {
        const unsigned char *ch = sm + c * CHUNK_BYTES;
        const uint4 *xc = reinterpret_cast<const uint4 *>(p.xq + (size_t)c * XQ_CHUNK +
                                                          (size_t)XQ_LANE * lane);
        const uint4 dg = __ldg(xc), cx = __ldg(xc + 1);
        const uint4 wq = *reinterpret_cast<const uint4 *>(ch + 16 * lane);
        const uint2 dd = *reinterpret_cast<const uint2 *>(ch + 512 + 8 * (4 * h + t));
        gem_tiles_chunk(wq, dd, dg, cx, m0, a0);
        if (GEGLU) {
            const uint4 wq1 = *reinterpret_cast<const uint4 *>(ch + tile_bytes + 16 * lane);
            const uint2 dd1 =
                *reinterpret_cast<const uint2 *>(ch + tile_bytes + 512 + 8 * (4 * h + t));
            gem_tiles_chunk(wq1, dd1, dg, cx, m0, a1);
        }
    }
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

/* The scratch kernel and the bulk kernel over p (variant 1). */
static void bulk_launch(int v, TileParams p, const float *x, bool geglu)
{
    (void)v;
    unsigned grid;
    int64_t warps;
    tiles_prepare(&p, x, geglu, &grid, &warps);
    const size_t smem = (geglu ? 2 : 1) * (size_t)p.nchunks * CHUNK_BYTES + MAX_WARPS * 8;
    geglu ? launch_smem(bulk_kernel<true>, grid, (unsigned)(32 * warps), smem, p)
          : launch_smem(bulk_kernel<false>, grid, (unsigned)(32 * warps), smem, p);
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"library", "bulk"};
    return tiles_bench_run(argc, argv, 2, names, bulk_launch);
}
