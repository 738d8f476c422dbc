/*
geglu_split: the MLP's gate and up products on tiles (y = gelu(gate x) * (up x)) with the plain
products' warps, against the library's GeGLU kernels, at Gemma 4 31B's gate/up shape (21,504 x
5,376) in Q4_0, Q4_K and Q6_K.

The library's GeGLU kernels give each warp a share of both matrices' chunks: for Q4_0 through
a ring of four cp.async stages in shared memory (63 registers), for Q4_K and Q6_K with the next
super-block of both matrices in registers (101 and 119 registers, at most 4 super-blocks a warp
against the plain products' 6), so an SM holds fewer warps than a plain product's. In the 31B
dimensions in Q4_K_M (run 193, an H100, 8K) the MLP stage takes 6.1 ms of an 11.2 ms token, at
about 64% of the read probe.

The split version: a block is one tile of both matrices; its first W warps compute the gate's
rows and its last W the up's, each half exactly as the plain product (src/model/cuda/
matvec_tiles.cu's q4t_kernel and sb_tiles_kernel: the same split of a row's chunks, the
same loads, arithmetic and order of additions), then one thread per row adds each half's warps
in warp order and writes gelu(gate) * up. So its output is gelu_tanh(gem_dmv(gate)) *
gem_dmv(up) bit for bit, and each warp holds the plain product's registers. The scratch of x is
read by both halves (from the L1 or the L2), where the library's GeGLU reads it once for both.

Checks before timing (exit 1 on a failure): the split version's y equals gelu_tanh of the
library's gem_dmv(gate) times gem_dmv(up), bit for bit, on seeded rows at 8 x 256 .. 24 x
21504 and at the 31B shape, and on a repeat. Printed, not checked: the library's GeGLU against
it, max |diff| / (|gate| |up|) (another grouping of the same exact block terms, which
test_cuda_matvec bounds in the library's tree). Timing: chained, A B B A over the library's GeGLU, the split
version and gem_dmv_multi of the two matrices (the plain products alone, no activation), each
call after its own x scratch kernel, rotating over copies past the L2.

Prediction (before the first run, an H100): the split version at the plain products' rate,
Q4_K's gate/up pair in about 54 us chained (2 x run 190's 27.2) against the library's GeGLU at
an estimated 60-65; Q6_K likewise (2 x 36.9 against more); Q4_0 within a few percent of its
ring.

Run 196 (results/h200/run196, an H100; the program built on the tree before the library took
the split version), chained us, library GeGLU / split / the plain pair: Q4_0 48.0 / 49.3 / 49.0,
Q4_K 64.1 / 51.5 / 50.2, Q6_K 79.7 / 70.8 / 67.7. Prediction met. Whole 31B tokens at 8K (run
194, processes A B B A): Q4_0 0.990, the Q4_K_M mix 0.925, Q6_K 0.948. The split version is the
library's GeGLU since (matvec_tiles.cu's geglu_kernel); built on such a tree the program's
"library" rows time the same kernel through gem_dmv_geglu (run 194).

./geglu_split [--reps R] [--once]
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
#include "model/cuda/model_cuda.h"
#include "cuda/gem_pdl.cuh"
#include "model/cuda/tiles_arith.cuh"

#define TILE_ROWS 8
#define CHUNK_BYTES 576
#define XQ_LANE GEM_TILES_XQ_LANE_BYTES
#define XQ_CHUNK GEM_TILES_XQ_CHUNK_BYTES
#define MAX_WARPS 16
static const unsigned kFull = 0xffffffffu;

enum Kind { K_Q4_0, K_Q4_K, K_Q6_K };

/* x's scratch: the library's (matvec_tiles.cu's xq_kernel) */
__global__ void xq_kernel(const float *__restrict__ x, int64_t nblk, unsigned char *__restrict__ xq)
{
    pdl_trigger();
    pdl_wait();
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= nblk)
        return;
    gem_tiles_xq_block(x[32 * b + (threadIdx.x & 31)], b, xq, threadIdx.x & 31);
}

struct Params {
    const unsigned char *data[2]; /* gate, up: tiles */
    float *y;
    int64_t nchunks, cpw; /* chunks a row; chunks a warp (even for Q4_K and Q6_K) */
    const unsigned char *xq;
};

/* ---- one warp of a plain product: matvec_tiles.cu's loops (the library at 819bc2c) -------- */

/* q4t_kernel's: batches of 4 chunks into registers */
__device__ __forceinline__ void q4_0_warp(const unsigned char *data, int64_t tile, int warp,
                                          const Params &p, float (&a0)[4])
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, h = g >> 2;
    constexpr int kBatch = 4;
    const size_t tile_bytes = (size_t)p.nchunks * CHUNK_BYTES;
    const uint32_t m0 = h ? 0u : kFull;
    const int64_t cw = (int64_t)warp * p.cpw;
    const int64_t cb = cw < p.nchunks ? cw : p.nchunks;
    const int64_t ce = cb + p.cpw < p.nchunks ? cb + p.cpw : p.nchunks;
    const uint32_t n = (uint32_t)(ce - cb);
    const unsigned char *wp =
        data + (size_t)tile * tile_bytes + (size_t)cb * CHUNK_BYTES + (size_t)16 * lane;
    const size_t dl = (size_t)(512 + 8 * (4 * h + t)) - (size_t)16 * lane;
    const unsigned char *xp = p.xq + (size_t)cb * XQ_CHUNK + (size_t)XQ_LANE * lane;
    uint4 wq[kBatch];
    uint2 dd[kBatch];
    auto load = [&](const unsigned char *w, uint32_t left) {
#pragma unroll
        for (int k = 0; k < kBatch; k++) {
            if ((uint32_t)k < left) {
                wq[k] = __ldcs(reinterpret_cast<const uint4 *>(w + (size_t)k * CHUNK_BYTES));
                dd[k] = __ldcs(reinterpret_cast<const uint2 *>(w + (size_t)k * CHUNK_BYTES + dl));
            }
        }
    };
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
            load(wp, n - c - kBatch);
    }
}

/* Q4_K's (q4_k_warp): one super-block at a time, the next loaded while one is computed */
__device__ __forceinline__ void q4_k_warp(const unsigned char *data, int64_t tile, int warp,
                                          const Params &p, float (&acc)[4])
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, h = g >> 2;
    const int64_t nsb = p.nchunks / 2, spw = p.cpw / 2;
    const uint32_t m0 = h ? 0u : kFull, sh = 8u * (uint32_t)h;
    const int64_t sw = (int64_t)warp * spw;
    const int64_t sb0 = sw < nsb ? sw : nsb;
    const int64_t sbe = sb0 + spw < nsb ? sb0 + spw : nsb;
    uint32_t left = (uint32_t)(sbe - sb0);
    const unsigned char *const w0 =
        data + ((size_t)tile * (size_t)nsb + (size_t)sb0) * GEM_TILES_Q4K_SB_BYTES;
    const unsigned char *wp = w0 + (size_t)16 * lane;
    const unsigned char *hp = w0 + 1024 + (size_t)32 * t;
    const unsigned char *xp = p.xq + (size_t)(2 * sb0) * XQ_CHUNK + (size_t)XQ_LANE * lane;
    uint4 wq0 = {}, wq1 = {}, h0 = {}, h1 = {};
    auto load = [&]() {
        wq0 = __ldcs(reinterpret_cast<const uint4 *>(wp));
        wq1 = __ldcs(reinterpret_cast<const uint4 *>(wp + 512));
        h0 = __ldcs(reinterpret_cast<const uint4 *>(hp));
        h1 = __ldcs(reinterpret_cast<const uint4 *>(hp + 16));
    };
    if (left)
        load();
    pdl_wait();
    while (left) {
        const uint4 *xc = reinterpret_cast<const uint4 *>(xp);
        gem_tiles_q4k_chunk<0>(wq0, h0, h1, sh, __ldg(xc), __ldg(xc + 1), m0, acc);
        const uint4 *xd = reinterpret_cast<const uint4 *>(xp + XQ_CHUNK);
        gem_tiles_q4k_chunk<1>(wq1, h0, h1, sh, __ldg(xd), __ldg(xd + 1), m0, acc);
        left--;
        wp += GEM_TILES_Q4K_SB_BYTES;
        hp += GEM_TILES_Q4K_SB_BYTES;
        xp += 2 * XQ_CHUNK;
        if (left)
            load();
    }
}

/* Q6_K's (q6_k_warp) */
__device__ __forceinline__ void q6_k_warp(const unsigned char *data, int64_t tile, int warp,
                                          const Params &p, float (&acc)[4])
{
    const int lane = threadIdx.x & 31, t = lane & 3, h = lane >> 4;
    const int64_t nsb = p.nchunks / 2, spw = p.cpw / 2;
    const uint32_t m0 = h ? 0u : kFull;
    const int64_t sw = (int64_t)warp * spw;
    const int64_t sb0 = sw < nsb ? sw : nsb;
    const int64_t sbe = sb0 + spw < nsb ? sb0 + spw : nsb;
    uint32_t left = (uint32_t)(sbe - sb0);
    const unsigned char *wp = data +
                              ((size_t)tile * (size_t)nsb + (size_t)sb0) * GEM_TILES_Q6K_SB_BYTES +
                              (size_t)16 * lane;
    const size_t oqh = (size_t)(1024 + 8 * lane) - (size_t)16 * lane;
    const size_t osc = (size_t)(1536 + 16 * (4 * h + t)) - (size_t)16 * lane;
    const size_t od = (size_t)(1664 + 4 * t) - (size_t)16 * lane;
    const unsigned char *xp = p.xq + (size_t)(2 * sb0) * XQ_CHUNK + (size_t)XQ_LANE * lane;
    uint4 wq0 = {}, wq1 = {}, sc = {};
    uint2 hq0 = {}, hq1 = {};
    uint32_t dd = 0;
    auto load = [&]() {
        wq0 = __ldcs(reinterpret_cast<const uint4 *>(wp));
        wq1 = __ldcs(reinterpret_cast<const uint4 *>(wp + 512));
        hq0 = __ldcs(reinterpret_cast<const uint2 *>(wp + oqh));
        hq1 = __ldcs(reinterpret_cast<const uint2 *>(wp + oqh + 256));
        sc = __ldcs(reinterpret_cast<const uint4 *>(wp + osc));
        dd = __ldcs(reinterpret_cast<const unsigned int *>(wp + od));
    };
    if (left)
        load();
    pdl_wait();
    while (left) {
        const uint4 *xc = reinterpret_cast<const uint4 *>(xp);
        gem_tiles_q6k_chunk<0>(wq0, hq0, sc, dd, __ldg(xc), __ldg(xc + 1), m0, acc);
        const uint4 *xd = reinterpret_cast<const uint4 *>(xp + XQ_CHUNK);
        gem_tiles_q6k_chunk<1>(wq1, hq1, sc, dd, __ldg(xd), __ldg(xd + 1), m0, acc);
        left--;
        wp += GEM_TILES_Q6K_SB_BYTES;
        xp += 2 * XQ_CHUNK;
        if (left)
            load();
    }
}

/* Block = one tile of both matrices: warps [0, W) the gate's rows, [W, 2W) the up's, each half
 * the plain product's split; then per row the halves' warps added in warp order (the plain
 * product's sums) and y = gelu(gate) * up. */
template <int K>
__global__ void __launch_bounds__(2 * MAX_WARPS * 32) split_geglu_kernel(const Params p)
{
    __shared__ float red[2][MAX_WARPS][TILE_ROWS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int nw = (int)(blockDim.x >> 6); /* warps a matrix */
    const int mat = warp >= nw, lw = warp - mat * nw;
    const int64_t tile = blockIdx.x;
    float a[4] = {0.f, 0.f, 0.f, 0.f};
    const unsigned char *data = mat ? p.data[1] : p.data[0]; /* no local copy of p */
    pdl_trigger();
    if (K == K_Q4_0)
        q4_0_warp(data, tile, lw, p, a);
    else if (K == K_Q4_K)
        q4_k_warp(data, tile, lw, p, a);
    else
        q6_k_warp(data, tile, lw, p, a);
    float r0 = a[0] + a[2], r1 = a[1] + a[3];
    for (int o = 4; o < 32; o <<= 1) {
        r0 += __shfl_xor_sync(kFull, r0, o);
        r1 += __shfl_xor_sync(kFull, r1, o);
    }
    if (g == 0) {
        red[mat][lw][2 * t] = r0;
        red[mat][lw][2 * t + 1] = r1;
    }
    __syncthreads();
    if (threadIdx.x < TILE_ROWS) {
        const int r = (int)threadIdx.x;
        float s = red[0][0][r], u = red[1][0][r];
        for (int w = 1; w < nw; w++)
            s += red[0][w][r];
        for (int w = 1; w < nw; w++)
            u += red[1][w][r];
        p.y[(size_t)tile * TILE_ROWS + (size_t)r] = __fmul_rn(gem_gelu_tanh(s), u);
    }
}

/* The plain products' split (matvec_tiles.cu's gem_tiles_launch): warps a tile and chunks a
 * warp for cols columns. */
static void plain_split(int kind, int64_t cols, int64_t *warps, int64_t *cpw)
{
    const int64_t nchunks = cols / 128, unit = kind == K_Q4_0 ? 1 : 2, units = nchunks / unit;
    const int64_t per = kind == K_Q4_0 ? 12 : 6, need = (units + per - 1) / per;
    int64_t w = 1;
    while (w < need && w < MAX_WARPS)
        w *= 2;
    *warps = w;
    *cpw = unit * ((units + w - 1) / w);
}

static void split_geglu(int kind, const unsigned char *gate, const unsigned char *up, int64_t rows,
                        int64_t cols, const float *x, unsigned char *xq, float *y)
{
    const int64_t nblk = cols / 32;
    cudaCheck(launch_pdl(xq_kernel, (unsigned)((nblk + 7) / 8), 256, 0, x, nblk, xq));
    Params p;
    p.data[0] = gate;
    p.data[1] = up;
    p.y = y;
    p.nchunks = cols / 128;
    int64_t warps = 0;
    plain_split(kind, cols, &warps, &p.cpw);
    p.xq = xq;
    const unsigned grid = (unsigned)(rows / TILE_ROWS), block = (unsigned)(64 * warps);
    if (kind == K_Q4_0)
        cudaCheck(launch_pdl(split_geglu_kernel<K_Q4_0>, grid, block, 0, p));
    else if (kind == K_Q4_K)
        cudaCheck(launch_pdl(split_geglu_kernel<K_Q4_K>, grid, block, 0, p));
    else
        cudaCheck(launch_pdl(split_geglu_kernel<K_Q6_K>, grid, block, 0, p));
}

/* y = gelu(g) * u, the library's GeGLU end on the plain products' outputs */
__global__ void gelu_mul_kernel(const float *g, const float *u, int64_t n, float *y)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = __fmul_rn(gem_gelu_tanh(g[i]), u[i]);
}

/* ---- checks and timing ---------------------------------------------------------------------- */

static const gem_gguf_type kTypes[3] = {GEM_GGUF_Q4_0, GEM_GGUF_Q4_K, GEM_GGUF_Q6_K};
static const char *const kNames[3] = {"q4_0", "q4_k", "q6_k"};

/* A tiled matrix of seeded rows (the library's generator), its file-order rows kept too. */
static void make_pair(int kind, int64_t rows, int64_t cols, uint64_t seed, gem_dmatrix *tiled)
{
    size_t rb = 0;
    GEM_TRY(gem_gguf_row_bytes(kTypes[kind], cols, &rb));
    gem_dmatrix src = {NULL, kTypes[kind], rows, cols, rb, GEM_DLAYOUT_ROWS};
    cudaCheck(cudaMalloc(&src.data, (size_t)rows * rb));
    GEM_TRY(gem_dmatrix_fill_random(&src, seed, 1.0f / sqrtf((float)cols), NULL));
    *tiled = src;
    cudaCheck(cudaMalloc(&tiled->data, (size_t)rows * rb));
    GEM_TRY(gem_dmatrix_tile(tiled, src.data, NULL));
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaFree(src.data));
}

static int check(int kind, int64_t rows, int64_t cols, uint64_t seed)
{
    gem_dmatrix g, u;
    make_pair(kind, rows, cols, seed, &g);
    make_pair(kind, rows, cols, seed + 1, &u);
    float *hx = (float *)malloc((size_t)cols * 4), *dx, *dg, *du, *dy;
    unsigned char *xq;
    fill(hx, (size_t)cols, seed + 2);
    for (int64_t i = 0; i < cols; i += 53)
        hx[i] *= 200.0f;
    cudaCheck(cudaMalloc((void **)&dx, (size_t)cols * 4));
    cudaCheck(cudaMalloc((void **)&dg, (size_t)rows * 4));
    cudaCheck(cudaMalloc((void **)&du, (size_t)rows * 4));
    cudaCheck(cudaMalloc((void **)&dy, (size_t)rows * 4));
    cudaCheck(cudaMalloc((void **)&xq, gem_dmv_xq_bytes(cols) + 16));
    cudaCheck(cudaMemcpy(dx, hx, (size_t)cols * 4, cudaMemcpyHostToDevice));
    float *want = (float *)malloc((size_t)rows * 4), *got = (float *)malloc((size_t)rows * 4);
    float *lib = (float *)malloc((size_t)rows * 4), *got2 = (float *)malloc((size_t)rows * 4);
    GEM_TRY(gem_dmv(&g, dx, dg, xq, NULL));
    GEM_TRY(gem_dmv(&u, dx, du, xq, NULL));
    gelu_mul_kernel<<<(unsigned)((rows + 255) / 256), 256>>>(dg, du, rows, dy);
    cudaCheck(cudaMemcpy(want, dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    split_geglu(kind, (const unsigned char *)g.data, (const unsigned char *)u.data, rows, cols,
                dx, xq, dy);
    cudaCheck(cudaMemcpy(got, dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    split_geglu(kind, (const unsigned char *)g.data, (const unsigned char *)u.data, rows, cols,
                dx, xq, dy);
    cudaCheck(cudaMemcpy(got2, dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    GEM_TRY(gem_dmv_geglu(&g, &u, dx, dy, xq, NULL));
    cudaCheck(cudaMemcpy(lib, dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    float *hg = (float *)malloc((size_t)rows * 4), *hu = (float *)malloc((size_t)rows * 4);
    cudaCheck(cudaMemcpy(hg, dg, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(hu, du, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double e =
            fabs((double)lib[r] - want[r]) / (fabs((double)hg[r] * (double)hu[r]) + 1e-30);
        worst = e > worst ? e : worst;
    }
    free(hg), free(hu);
    const int same = memcmp(got, want, (size_t)rows * 4) == 0;
    const int rep = memcmp(got, got2, (size_t)rows * 4) == 0;
    const int bad = !same || !rep;
    printf("check %s %6lld x %-5lld  split = gelu(plain gate) * plain up: %s, repeat %s; library "
           "GeGLU max |diff| / |gate up| %.2e  %s\n",
           kNames[kind], (long long)rows, (long long)cols, same ? "bit for bit" : "DIFFERS",
           rep ? "equal" : "differs", worst, bad ? "FAILED" : "ok");
    cudaFree(g.data), cudaFree(u.data), cudaFree(dx), cudaFree(dg), cudaFree(du), cudaFree(dy);
    cudaFree(xq);
    free(hx), free(want), free(got), free(lib), free(got2);
    return bad;
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
    int failed = 0;
    for (int k = 0; k < 3; k++) {
        if (k == K_Q4_0)
            failed |= check(k, 8, 128, 1);
        failed |= check(k, 8, 256, 2);
        failed |= check(k, 64, 1280, 3);
        failed |= check(k, 72, 5376, 4);
        failed |= check(k, 24, 21504, 5);
        failed |= check(k, 21504, 5376, 6);
    }
    if (failed) {
        printf("validation FAILED: no timings\n");
        return 1;
    }
    void *hxh = NULL;
    GEM_TRY(gem_harness_cuda_ops.open(&hxh));
    double probe = 0;
    GEM_TRY(gem_harness_cuda_ops.read_bandwidth(hxh, 0, (size_t)4 << 30, 20, &probe));
    printf("read probe: %.1f GB/s\n\n%-5s %-8s %8s %9s %6s  %s\n", probe * 1e-9, "type", "variant",
           "MB", "chain_us", "probe", "rep");
    const int64_t rows = 21504, cols = 5376;
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    for (int k = 0; k < 3; k++) {
        size_t rb = 0;
        GEM_TRY(gem_gguf_row_bytes(kTypes[k], cols, &rb));
        const size_t mbytes = (size_t)rows * rb; /* one matrix */
        const int ncopies = 4;                   /* 4 pairs: 520-760 MB, past the L2 */
        gem_dmatrix g[ncopies], u[ncopies];
        for (int c = 0; c < ncopies; c++) {
            make_pair(k, rows, cols, 100 + 2 * (uint64_t)c, &g[c]);
            make_pair(k, rows, cols, 101 + 2 * (uint64_t)c, &u[c]);
        }
        float *hx = (float *)malloc((size_t)cols * 4), *dx, *dy, *dy2;
        unsigned char *xq;
        fill(hx, (size_t)cols, 77);
        cudaCheck(cudaMalloc((void **)&dx, (size_t)cols * 4));
        cudaCheck(cudaMalloc((void **)&dy, (size_t)rows * 4));
        cudaCheck(cudaMalloc((void **)&dy2, (size_t)rows * 4));
        cudaCheck(cudaMalloc((void **)&xq, gem_dmv_xq_bytes(cols) + 16));
        cudaCheck(cudaMemcpy(dx, hx, (size_t)cols * 4, cudaMemcpyHostToDevice));
        auto call = [&](int v, int c) {
            if (v == 0) {
                GEM_TRY(gem_dmv_geglu(&g[c], &u[c], dx, dy, xq, NULL));
            } else if (v == 1) {
                split_geglu(k, (const unsigned char *)g[c].data, (const unsigned char *)u[c].data,
                            rows, cols, dx, xq, dy);
            } else {
                const gem_dmatrix *ws[2] = {&g[c], &u[c]};
                float *ys[2] = {dy, dy2};
                GEM_TRY(gem_dmv_multi(2, ws, dx, ys, xq, NULL));
            }
        };
        const double moved = 2.0 * (double)mbytes + 4.0 * (double)cols + 4.0 * (double)rows;
        if (once) {
            for (int v = 0; v < 3; v++)
                call(v, 0);
            cudaCheck(cudaDeviceSynchronize());
        }
        const int order[6] = {0, 1, 2, 2, 1, 0};
        static const char *const vname[3] = {"library", "split", "plain"};
        for (int i = 0; i < 6 && !once; i++) {
            const int v = order[i];
            for (int c = 0; c < ncopies; c++)
                call(v, c); /* warm-up */
            wait_kernel<<<1, 1>>>(20000000ull);
            cudaCheck(cudaEventRecord(e0, 0));
            for (int r = 0; r < reps; r++)
                call(v, r % ncopies);
            cudaCheck(cudaEventRecord(e1, 0));
            cudaCheck(cudaEventSynchronize(e1));
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
            const double us = 1e3 * ms / reps;
            printf("%-5s %-8s %8.1f %9.2f %5.1f%%  %d\n", kNames[k], vname[v], 2 * mbytes * 1e-6, us,
                   100.0 * moved / (us * 1e-6) / probe, i < 3 ? 1 : 2);
            fflush(stdout);
        }
        for (int c = 0; c < ncopies; c++)
            cudaFree(g[c].data), cudaFree(u[c].data);
        cudaFree(dx), cudaFree(dy), cudaFree(dy2), cudaFree(xq);
        free(hx);
    }
    gem_harness_cuda_ops.close(hxh);
    return 0;
}
