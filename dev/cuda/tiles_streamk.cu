/*
tiles_streamk: the Q4_0 tile product (src/model/cuda/matvec_tiles.cu) with its chunks split
evenly over one wave of warps (stream-K), against the library's kernel in the same process, at
the Gemma 4 31B shapes.

H200 runs 107 and 109 (dev/cuda/tiles_prefetch, --hot): the layer matrices' products are not
held by the DRAM: with the whole matrix in the L2 they take 80-90% of their time from DRAM.
The library's grid is a block per tile of 8 rows (q: 1,024 blocks, down: 672 of 16 warps), of
which an SM holds 5 (q) or 2 (down): 1.55 and 2.55 waves, the last one partly empty, and every
block starts, waits on its loads and drains on its own. Here one wave of blocks (as many as the
SMs hold, from the occupancy query) covers the whole matrix: the chunks of all tiles, in the
layout's order, are cut into as many equal runs as there are warps, and warp w takes run w,
loading 4 chunks at a time as the library does and computing each with the library's
arithmetic (tiles_arith.cuh). A run crosses tile boundaries: at each, the warp sums its lanes
(the library's xor tree) and writes its partial of that tile's 8 rows; a second kernel (a
programmatic dependent) adds a row's partials in warp order. No atomics: the same bits on every
call, but not the library's bits (its order is chunks within a warp, then the tile's warps in
order; here chunks within a run, then the runs), so the check is a tolerance (2e-6 of the
largest |y|) and a bitwise repeat.

  1 sk-8w   blocks of 8 warps
  2 sk-4w   blocks of 4 warps

Prediction: the waves' tails go, not the per-call cost: down 27.3 -> ~20 us chained, q 13.1 ->
~11, k and the head unchanged; the extra kernel costs about 1 us a call.

H200 run 111 (results/h200/run111, probe 4,536 GB/s): within 2.4e-7 of the largest |y| on
every shape, bitwise repeats, memcheck clean; 4 blocks of 8 warps (8 of 4) an SM, 4,224 warps.
Slower on every shape, chained (us, library / sk-8w / sk-4w): q 13.0 / 15.4 / 15.8, k 8.5 /
14.0 / 14.1, o-swa 14.2 / 18.5 / 18.8, o-full 22.1 / 26.1 / 26.4, down 27.5 / 30.7 / 30.8,
the head 213 / 215 / 218. Wrong: k, a single wave in the library too, lost the most (5.5 us),
so the second kernel and the partials cost more than any tail the even split saves; the
library's block a tile stays. Not ported.

GeGLU (gate+up) runs the library's kernel in every variant here.

./tiles_streamk [--reps R] [--once] [--hot]
*/
#include "tiles_bench.h"

#define SK_BATCH 4

/* The first chunk of run w of G chunks over nw runs. */
__host__ __device__ __forceinline__ int64_t sk_start(int64_t w, int64_t G, int64_t nw)
{
    return w * G / nw;
}
/* The run that holds chunk g. */
__host__ __device__ __forceinline__ int64_t sk_owner(int64_t g, int64_t G, int64_t nw)
{
    return ((g + 1) * nw - 1) / G;
}

struct SkParams {
    const unsigned char *data; /* the tiles of one matrix */
    const unsigned char *xq;
    float *part; /* (nw, maxj, 8) */
    float *y;    /* (rows) */
    int64_t nchunks, G, nw, maxj, rows;
};

template <int W> __global__ void __launch_bounds__(W * 32, 32 / W) sk_kernel(const SkParams p)
{
    /* chunk and tile indices in 32 bits (the host checks G < 2^31); byte offsets in size_t */
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, h = g >> 2;
    const int w = (int)blockIdx.x * W + (int)(threadIdx.x >> 5);
    const int nch = (int)p.nchunks;
    const int c0 = (int)sk_start(w, p.G, p.nw), c1 = (int)sk_start(w + 1, p.G, p.nw);
    const uint32_t m0 = h ? 0u : kFull;
    const unsigned char *wl = p.data + (size_t)16 * lane;
    const unsigned char *dl = p.data + (size_t)(512 + 8 * (4 * h + t));
    uint4 wq[SK_BATCH];
    uint2 dd[SK_BATCH];
    auto load = [&](int b) {
#pragma unroll
        for (int k = 0; k < SK_BATCH; k++)
            if (b + k < c1) {
                const size_t off = (size_t)(b + k) * CHUNK_BYTES;
                wq[k] = __ldcs(reinterpret_cast<const uint4 *>(wl + off));
                dd[k] = __ldcs(reinterpret_cast<const uint2 *>(dl + off));
            }
    };
    pdl_trigger();
    load(c0);
    pdl_wait();
    const int tile0 = c0 / nch;
    int tile = tile0, c = c0 - tile0 * nch;
    float a0[4] = {0.f, 0.f, 0.f, 0.f};
    auto flush = [&]() { /* the run's partial of `tile`: rows 2t, 2t + 1 in lanes 0-3 */
        float r0 = a0[0] + a0[2], r1 = a0[1] + a0[3];
        for (int o = 4; o < 32; o <<= 1) {
            r0 += __shfl_xor_sync(kFull, r0, o);
            r1 += __shfl_xor_sync(kFull, r1, o);
        }
        if (g == 0) {
            float *dst = p.part + ((size_t)w * (size_t)p.maxj + (size_t)(tile - tile0)) * TILE_ROWS;
            dst[2 * t] = r0;
            dst[2 * t + 1] = r1;
        }
        a0[0] = a0[1] = a0[2] = a0[3] = 0.f;
    };
    const unsigned char *xl = p.xq + (size_t)XQ_LANE * lane;
    for (int b = c0; b < c1; b += SK_BATCH) {
#pragma unroll
        for (int k = 0; k < SK_BATCH; k++) {
            if (b + k < c1) {
                if (c == nch) { /* the next tile */
                    flush();
                    tile++;
                    c = 0;
                }
                const uint4 *xc = reinterpret_cast<const uint4 *>(xl + (size_t)c * XQ_CHUNK);
                const uint4 dg = __ldg(xc), cx = __ldg(xc + 1);
                gem_tiles_chunk(wq[k], dd[k], dg, cx, m0, a0);
                c++;
            }
        }
        if (b + SK_BATCH < c1)
            load(b + SK_BATCH);
    }
    if (c1 > c0)
        flush();
}

/* y[r] = the runs' partials of row r's tile, in run order. One thread a row. */
__global__ void sk_combine(const SkParams p)
{
    pdl_trigger();
    pdl_wait();
    const int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= p.rows)
        return;
    const int64_t tile = r / TILE_ROWS, row = r % TILE_ROWS;
    const int64_t g0 = tile * p.nchunks, g1 = g0 + p.nchunks - 1;
    const int64_t w0 = sk_owner(g0, p.G, p.nw), w1 = sk_owner(g1, p.G, p.nw);
    float s = 0.f;
    for (int64_t w = w0; w <= w1; w++) {
        const int64_t c0 = sk_start(w, p.G, p.nw);
        if (sk_start(w + 1, p.G, p.nw) == c0)
            continue; /* an empty run */
        const int64_t j = tile - c0 / p.nchunks;
        const float v = p.part[((size_t)w * (size_t)p.maxj + (size_t)j) * TILE_ROWS + (size_t)row];
        s = w == w0 ? v : s + v;
    }
    p.y[r] = s;
}

static float *sk_part;
static size_t sk_part_bytes;

template <int W> static void sk_run(TileParams tp, const float *x)
{
    static int nw_cached = 0;
    if (!nw_cached) {
        int dev, sms, per_sm;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sk_kernel<W>, W * 32, 0));
        nw_cached = sms * per_sm * W;
        printf("sk-%dw: %d blocks an SM, %d warps\n", W, per_sm, nw_cached);
    }
    unsigned grid_unused;
    int64_t warps_unused;
    tiles_prepare(&tp, x, false, &grid_unused, &warps_unused); /* the scratch kernel */
    SkParams p;
    p.data = tp.mat[0].data;
    p.xq = tp.xq;
    p.y = tp.mat[0].y;
    p.rows = tp.mat[0].rows;
    p.nchunks = tp.nchunks;
    p.G = (p.rows / TILE_ROWS) * p.nchunks;
    p.nw = nw_cached <= p.G ? nw_cached : (p.G / W) * W; /* whole blocks */
    if (p.G >= ((int64_t)1 << 31) / 2) {
        fprintf(stderr, "tiles_streamk: %lld chunks: past the kernel's 32-bit indices\n",
                (long long)p.G);
        exit(2);
    }
    p.maxj = (p.G + p.nw - 1) / p.nw / p.nchunks + 2;
    const size_t need = (size_t)p.nw * (size_t)p.maxj * TILE_ROWS * sizeof(float);
    if (need > sk_part_bytes) {
        cudaCheck(cudaDeviceSynchronize());
        if (sk_part)
            cudaCheck(cudaFree(sk_part));
        cudaCheck(cudaMalloc((void **)&sk_part, need));
        sk_part_bytes = need;
    }
    p.part = sk_part;
    cudaCheck(launch_pdl(sk_kernel<W>, (unsigned)(p.nw / W), W * 32, 0, p));
    cudaCheck(launch_pdl(sk_combine, (unsigned)((p.rows + 255) / 256), 256, 0, p));
}

static void sk_launch(int v, TileParams p, const float *x, bool geglu)
{
    if (geglu) { /* the library's GeGLU */
        if (gem_tiles_launch(p, x, true, false, false, 0) != GEM_OK) {
            fprintf(stderr, "tiles_streamk: the GeGLU launch failed\n");
            exit(2);
        }
        return;
    }
    if (p.nmat != 1) {
        fprintf(stderr, "tiles_streamk: one matrix a launch\n");
        exit(2);
    }
    if (v == 1)
        sk_run<8>(p, x);
    else
        sk_run<4>(p, x);
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"library", "sk-8w", "sk-4w"};
    tiles_bench_tol = 2e-6;
    return tiles_bench_run(argc, argv, 3, names, sk_launch);
}
