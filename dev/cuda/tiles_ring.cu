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
#include "model/cuda/matvec_tiles.h"
#include "model/cuda/model_cuda.h"
#include "model/cuda/pdl.cuh"
#include "model/cuda/tiles_arith.cuh"

/* The library's constants (matvec_tiles.cu). */
#define TILE_ROWS 8
#define CHUNK_ELEMS 128
#define CHUNK_BYTES 576
#define XQ_LANE GEM_TILES_XQ_LANE_BYTES
#define XQ_CHUNK GEM_TILES_XQ_CHUNK_BYTES
#define CHUNKS_PER_WARP 8
#define MAX_WARPS 16
#define NVAR 3
static const unsigned kFull = 0xffffffffu;
static const char *const names[NVAR] = {"library", "ring-a", "ring-b"};

/* ---- the library's x scratch kernel (matvec_tiles.cu's, on tiles_arith.cuh) ------------------ */

__global__ void xq_kernel(const float *__restrict__ x, int64_t nblk, unsigned char *__restrict__ xq)
{
    pdl_trigger();
    pdl_wait();
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= nblk)
        return;
    gem_tiles_xq_block(x[32 * b + (threadIdx.x & 31)], b, xq, threadIdx.x & 31);
}

/* ---- the ring kernel ----------------------------------------------------------------------- */

__device__ __forceinline__ void cp16(void *dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                     (uint32_t)__cvta_generic_to_shared(dst)),
                 "l"(src)
                 : "memory");
}
__device__ __forceinline__ void cp_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

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

/* Launches kernel k with programmatic stream serialization and `smem` bytes of dynamic
 * shared memory (raising the kernel's limit when needed). */
template <typename K> static void launch_smem(K k, unsigned grid, unsigned block, size_t smem, TileParams p)
{
    cudaCheck(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cudaCheck(cudaLaunchKernelEx(&cfg, k, p));
}

/* The scratch kernel and variant v's kernel over p (mat[].data, y, rows; nmat; cols; xq). */
static void ring_launch(int v, TileParams p, const float *x, bool geglu)
{
    const int64_t nblk = p.cols / 32;
    cudaCheck(launch_pdl(xq_kernel, (unsigned)((nblk + 7) / 8), 256, 0, x, nblk,
                         const_cast<unsigned char *>(p.xq)));
    p.nchunks = p.cols / CHUNK_ELEMS;
    int64_t warps = (p.nchunks + CHUNKS_PER_WARP - 1) / CHUNKS_PER_WARP;
    warps = warps > MAX_WARPS ? MAX_WARPS : warps;
    p.cpw = (p.nchunks + warps - 1) / warps;
    int64_t tiles = 0;
    for (int i = 0; i < p.nmat; i++) {
        p.mat[i].tile0 = tiles;
        tiles += p.mat[i].rows / TILE_ROWS;
        if (geglu)
            break;
    }
    const unsigned grid = (unsigned)tiles, block = (unsigned)(32 * warps);
    const int sa = geglu ? 2 : 4, sb = geglu ? 4 : 8, st = v == 1 ? sa : sb;
    const size_t smem = (size_t)warps * (size_t)st * (geglu ? 2 : 1) * CHUNK_BYTES;
    if (v == 1)
        geglu ? launch_smem(ring_kernel<true, 2>, grid, block, smem, p)
              : launch_smem(ring_kernel<false, 4>, grid, block, smem, p);
    else
        geglu ? launch_smem(ring_kernel<true, 4>, grid, block, smem, p)
              : launch_smem(ring_kernel<false, 8>, grid, block, smem, p);
}

/* ---- shapes, checks and timing ------------------------------------------------------------- */

typedef struct shape {
    const char *name;
    int geglu;
    int64_t rows, cols;
} shape;

static const shape shapes[] = {
    {"q", 0, 8192, 5376},       {"k", 0, 4096, 5376},         {"o-swa", 0, 5376, 8192},
    {"o-full", 0, 5376, 16384}, {"gate+up", 1, 21504, 5376},  {"down", 0, 5376, 21504},
    {"head", 0, 262144, 5376},
};

/* One call of variant v (0 the library, else ring_launch's) on the matrices m (two for GeGLU). */
static void call(int v, const shape *s, gem_dmatrix *m, const float *dx, float *dy, void *xq)
{
    if (v == 0) {
        if (s->geglu)
            GEM_TRY(gem_dmv_geglu(&m[0], &m[1], dx, dy, xq, NULL));
        else
            GEM_TRY(gem_dmv(&m[0], dx, dy, xq, NULL));
        return;
    }
    TileParams p;
    memset(&p, 0, sizeof p);
    p.cols = s->cols;
    p.xq = static_cast<const unsigned char *>(xq);
    p.nmat = s->geglu ? 2 : 1;
    for (int i = 0; i < p.nmat; i++)
        p.mat[i] = TileMat{static_cast<const unsigned char *>(m[i].data), dy, s->rows, 0};
    ring_launch(v, p, dx, s->geglu != 0);
}

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
    void *hx = NULL;
    GEM_TRY(gem_harness_cuda_ops.open(&hx));
    double probe = 0;
    GEM_TRY(gem_harness_cuda_ops.read_bandwidth(hx, 0, (size_t)4 << 30, 20, &probe));
    printf("read probe: %.1f GB/s\n\n", probe * 1e-9);
    printf("%-8s %-8s %9s %9s %9s %6s %9s %6s\n", "shape", "variant", "MB", "median_us",
           "p10_us", "probe", "chain_us", "probe");
    double *times = (double *)malloc((size_t)reps * sizeof(double));
    cudaEvent_t *ev = (cudaEvent_t *)malloc((size_t)(reps + 1) * sizeof(cudaEvent_t));
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventCreate(&ev[r]));
    int failed = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *s = &shapes[si];
        const int nmat = s->geglu ? 2 : 1;
        size_t rb = 0;
        GEM_TRY(gem_gguf_row_bytes(GEM_GGUF_Q4_0, s->cols, &rb));
        const size_t mbytes = (size_t)s->rows * rb, set_bytes = nmat * mbytes;
        int ncopies = (int)(((size_t)200 << 20) / set_bytes + 1);
        ncopies = ncopies < 2 ? 2 : ncopies > 64 ? 64 : ncopies;
        gem_dmatrix(*sets)[2] = (gem_dmatrix(*)[2])calloc((size_t)ncopies, sizeof *sets);
        void *tmp;
        cudaCheck(cudaMalloc(&tmp, mbytes));
        for (int c = 0; c < ncopies; c++)
            for (int i = 0; i < nmat; i++) {
                gem_dmatrix *m = &sets[c][i];
                *m = (gem_dmatrix){NULL, GEM_GGUF_Q4_0, s->rows, s->cols, rb, GEM_DLAYOUT_ROWS};
                cudaCheck(cudaMalloc(&m->data, mbytes));
                gem_dmatrix r = *m;
                r.data = tmp;
                GEM_TRY(gem_dmatrix_fill_random(&r, 7 + 3 * (uint64_t)c + (uint64_t)i,
                                                1.0f / sqrtf((float)s->cols), NULL));
                GEM_TRY(gem_dmatrix_tile(m, tmp, NULL));
                cudaCheck(cudaDeviceSynchronize());
            }
        cudaCheck(cudaFree(tmp));
        float *hxv = (float *)malloc((size_t)s->cols * 4), *dx, *dy[NVAR];
        fill(hxv, (size_t)s->cols, 99 + si);
        void *xq;
        cudaCheck(cudaMalloc((void **)&dx, (size_t)s->cols * 4));
        cudaCheck(cudaMalloc(&xq, gem_dmv_xq_bytes(s->cols) + 16));
        cudaCheck(cudaMemcpy(dx, hxv, (size_t)s->cols * 4, cudaMemcpyHostToDevice));
        for (int v = 0; v < NVAR; v++)
            cudaCheck(cudaMalloc((void **)&dy[v], (size_t)s->rows * 4));
        /* the same bits as the library, on two copies */
        float *ya = (float *)malloc((size_t)s->rows * 4), *yb = (float *)malloc((size_t)s->rows * 4);
        for (int c = 0; c < 2; c++)
            for (int v = 1; v < NVAR; v++) {
                call(0, s, sets[c], dx, dy[0], xq);
                call(v, s, sets[c], dx, dy[v], xq);
                cudaCheck(cudaDeviceSynchronize());
                cudaCheck(cudaMemcpy(ya, dy[0], (size_t)s->rows * 4, cudaMemcpyDeviceToHost));
                cudaCheck(cudaMemcpy(yb, dy[v], (size_t)s->rows * 4, cudaMemcpyDeviceToHost));
                int64_t bad = 0;
                for (int64_t r = 0; r < s->rows; r++)
                    bad += memcmp(&ya[r], &yb[r], 4) != 0;
                if (bad) {
                    printf("check %-8s %s copy %d: %lld of %lld outputs differ from the library's: "
                           "FAILED\n", s->name, names[v], c, (long long)bad, (long long)s->rows);
                    failed = 1;
                }
            }
        if (!failed)
            printf("check %-8s: every variant equals the library bit for bit\n", s->name);
        const double moved = (double)set_bytes + 4.0 * (double)s->cols + 4.0 * (double)s->rows;
        const int r_here = s->rows >= 100000 ? (reps < 30 ? reps : 30) : reps;
        /* ABBA over the variants: 0 .. NVAR - 1, then back */
        double med[NVAR][2], chain[NVAR][2], p10[NVAR][2];
        for (int k = 0; k < 2 * NVAR && !failed && !once; k++) {
            const int v = k < NVAR ? k : 2 * NVAR - 1 - k, rep = k < NVAR ? 0 : 1;
            for (int pass = 0; pass < 3; pass++) {
                wait_kernel<<<1, 1>>>(pass ? 20000000ull : 1000ull);
                cudaCheck(cudaGetLastError());
                if (pass == 2)
                    cudaCheck(cudaEventRecord(ev[0], 0));
                for (int r = 0; r < r_here; r++) {
                    if (pass == 1)
                        cudaCheck(cudaEventRecord(ev[r], 0));
                    call(v, s, sets[r % ncopies], dx, dy[v], xq);
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
                    med[v][rep] = times[r_here / 2];
                    p10[v][rep] = times[r_here / 10];
                } else if (pass == 2) {
                    float ms = 0;
                    cudaCheck(cudaEventElapsedTime(&ms, ev[0], ev[r_here]));
                    chain[v][rep] = ms * 1e-3 / r_here;
                }
            }
        }
        for (int v = 0; v < NVAR && !failed && !once; v++)
            for (int rep = 0; rep < 2; rep++)
                printf("%-8s %-8s %9.1f %9.2f %9.2f %5.1f%% %9.2f %5.1f%%\n", s->name,
                       names[v], set_bytes * 1e-6, med[v][rep] * 1e6,
                       p10[v][rep] * 1e6, 100.0 * moved / med[v][rep] / probe,
                       chain[v][rep] * 1e6, 100.0 * moved / chain[v][rep] / probe);
        fflush(stdout);
        for (int c = 0; c < ncopies; c++)
            for (int i = 0; i < nmat; i++)
                cudaCheck(cudaFree(sets[c][i].data));
        free(sets);
        free(hxv);
        free(ya);
        free(yb);
        cudaCheck(cudaFree(dx));
        cudaCheck(cudaFree(xq));
        for (int v = 0; v < NVAR; v++)
            cudaCheck(cudaFree(dy[v]));
    }
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventDestroy(ev[r]));
    free(ev);
    free(times);
    gem_harness_cuda_ops.close(hx);
    return failed;
}
