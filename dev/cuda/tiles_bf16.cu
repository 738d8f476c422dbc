/*
tiles_bf16: BF16 products on the BF16 tensor cores with x as three exact BF16 pieces, against the
library's F32 BF16 product (src/model/cuda/matvec.cu, each weight widened, F32 fmas) and cuBLAS
(cublasGemmEx, BF16 x BF16 into F32, x rounded to BF16) at Gemma 4 31B's shapes, in one process.

The weights have no common scale, so the integer tiles' trick does not apply; but a BF16 weight
times a BF16 value is exact in F32, and x = h + m + l, three BF16 values (each the rounded
remainder of the one before), exactly. mma m16n8k16 (bf16 x bf16 into F32) takes a tile's 8
weight rows as B and the three pieces as A's rows 0..2, so D row p is piece p's sums; the rows'
outputs add the three. Tiles (8 rows, 2,048 bytes a chunk of 128 columns, the file's bytes):
quarter s of a chunk at 512 s, lane (g, t)'s 16 bytes at 16 lane holding row g's columns
8t..8t+7 of the quarter, two MMAs' B in order; the lane reads the same columns of its piece
from the x scratch (after the digits; tiles_arith.cuh's gem_tiles_xq_pieces). A chunk's eight
MMAs accumulate in the tensor core's F32, then add to the lane's sums.

Variants (each a launch of the library's x scratch kernel, then the product; cuBLAS alone):
  rows      the library's F32 kernel on the file's rows (gem_dmv)
  library   the library's tiled product (gem_dmv on GEM_DLAYOUT_BF16_TILES): at most 3 chunks
            a warp (6,144 bytes, about the Q4_0 split's 6,912), a chunk loaded at a time
  v2        at most 6 chunks a warp
  v3        the library's split, with a scratch of its own that holds each lane's A operand
            with its zero words ({p0p1, 0, p2p3, 0}: twice the bytes), so that the MMAs take the
            loaded registers as they are (ptxas builds the library's A quads with about 46 moves
            a chunk)
  cublas    cublasGemmEx (CUBLAS_OP_T, n = 1), x rounded to BF16 outside the timed interval

Checks before timing (exit 1 on a failure): rows, library, v2 and v3 against the double-
precision dot product of the BF16 values, |y - ref| <= 1e-5 sum|w x| (the file-order kernel's
bound); bitwise repeats; unit vectors exact (the library); cuBLAS within 5e-2 of the RMS of
gem's (x's rounding; printed). Timing: per launch and chained, the variants in order then
reversed, rotating over copies past the L2; fractions of the read probe measured in the same
process.

Prediction (before the first run): the tiles at 90-100% of the probe on every shape of 16 MB or
more on an H100 (0.06 warp instructions a byte, half of the Q4_0 tiles'), ahead of cuBLAS (run
31 on an H200: 53-96%) and of the F32 kernel (50-89%); v2 within 3%; v3 no faster on an H100.

Run 199 (results/h200/run199, an H200 came; read probe 4,538 GB/s): rows, library, v2 and v3
within 0.014 of the bound, repeats equal, unit vectors exact; cuBLAS 2.6-5.5e-3 of the RMS from
gem (x's rounding). Chained us, rows / library / v2 / v3 / cuBLAS: k 17.4 / 15.9 / 16.8 / 16.8 /
15.9, q 27.0 / 26.6 / 29.2 / 26.2 / 24.9, o-swa 36.6 / 26.6 / 27.7 / 27.0 / 26.5, o-full 52.1 /
47.9 / 50.3 / 49.8 / 47.2, gate 69.8 / 58.4 / 59.5 / 58.6 / 63.0, down 66.8 / 59.1 / 63.4 / 62.3
/ 60.4, the head 681 / 617 / 619 / 622 / 659 (library 100.8% of the probe). The prediction held
for the head and for cuBLAS (the tiles ahead on gate, down and the head, even on k, o-swa and
o-full, 7% behind on q) but not for the smaller shapes (61-81% of the probe on the H200, the
other tile products' per-launch costs); v2 lost up to 10% (q), v3's loaded zeros saved nothing.
The library keeps 3 chunks a warp and the A quads ptxas builds.

./tiles_bf16 [--reps R] [--once]
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "common.h"
#include "gem/gguf.h"
#include "harness.h"
#include "model/cuda/model_cuda.h"
#include "cuda/gem_pdl.cuh"
#include "model/cuda/tiles_arith.cuh"

#define CUBLAS_TRY(call)                                                                       \
    do {                                                                                       \
        cublasStatus_t s_ = (call);                                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                     \
            fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #call, (int)s_); \
            exit(EXIT_FAILURE);                                                                \
        }                                                                                      \
    } while (0)

#define TILE_ROWS 8
#define CHUNK_BYTES GEM_TILES_BF16_CHUNK_BYTES
#define MAX_WARPS 16
#define NVAR 5
static const unsigned kFull = 0xffffffffu;
static const char *const vname[NVAR] = {"rows", "library", "v2", "v3", "cublas"};

/* v3's scratch: for each 8 columns and piece p, the lane's two A quads {p0p1, 0, p2p3, 0},
 * {p4p5, 0, p6p7, 0} (32 bytes, a word an element); piece p at p * cols words. One thread per
 * element. */
__global__ void pieces_quads(const float *__restrict__ x, int64_t cols, uint32_t *__restrict__ q)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    pdl_trigger();
    pdl_wait();
    if (i >= cols)
        return;
    const float v = x[i];
    const __nv_bfloat16 h = __float2bfloat16_rn(v);
    const float r = v - __bfloat162float(h);
    const __nv_bfloat16 m = __float2bfloat16_rn(r);
    const __nv_bfloat16 l = __float2bfloat16_rn(r - __bfloat162float(m));
    const __nv_bfloat16 pc[3] = {h, m, l};
    const int64_t w = 8 * (i / 8) + 2 * ((i % 8) / 2); /* the pair's word in the quads */
    for (int p = 0; p < 3; p++) {
        uint32_t *word = q + (size_t)p * (size_t)cols + (size_t)w;
        reinterpret_cast<__nv_bfloat16 *>(word)[i % 2] = pc[p];
        if (i % 2 == 0)
            word[1] = 0u;
    }
}

struct Params {
    const unsigned char *data;
    float *y;
    int64_t nchunks, cpw; /* chunks a row, chunks a warp */
    const unsigned char *xp; /* v2: the library's pieces; v3: the quads */
};

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint4 a, uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

/* kQuads 0: the library's loop (v2's split from p); 1: v3's A quads as loaded. */
template <int kQuads>
__global__ void __launch_bounds__(MAX_WARPS * 32) bf16t_kernel(const Params p)
{
    __shared__ float red[MAX_WARPS][TILE_ROWS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t tile = blockIdx.x;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const int64_t cw = (int64_t)warp * p.cpw;
    const int64_t cb = cw < p.nchunks ? cw : p.nchunks;
    const int64_t ce = cb + p.cpw < p.nchunks ? cb + p.cpw : p.nchunks;
    uint32_t left = (uint32_t)(ce - cb);
    const unsigned char *wp =
        p.data + ((size_t)tile * (size_t)p.nchunks + (size_t)cb) * CHUNK_BYTES + (size_t)16 * lane;
    const int64_t cols = 128 * p.nchunks;
    const size_t gp = (size_t)(g < 3 ? g : 0);
    const unsigned char *xp =
        kQuads ? p.xp + 4 * (gp * (size_t)cols + (size_t)(128 * cb + 8 * t))
               : p.xp + 2 * (gp * (size_t)cols + (size_t)(128 * cb + 8 * t));
    uint4 w[4];
    auto load = [&](const unsigned char *c) {
#pragma unroll
        for (int s = 0; s < 4; s++)
            w[s] = __ldcs(reinterpret_cast<const uint4 *>(c + 512 * s));
    };
    pdl_trigger();
    if (left)
        load(wp);
    pdl_wait();
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    while (left) {
        if (kQuads) {
            float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int s = 0; s < 4; s++) {
                const uint4 *q = reinterpret_cast<const uint4 *>(xp + 128 * s);
                const uint4 a0 = g < 3 ? __ldg(q) : z, a1 = g < 3 ? __ldg(q + 1) : z;
                mma_bf16(d, a0, w[s].x, w[s].y);
                mma_bf16(d, a1, w[s].z, w[s].w);
            }
            acc[0] += d[0];
            acc[1] += d[1];
            xp += 4 * 128;
        } else {
            uint4 xv[4];
#pragma unroll
            for (int s = 0; s < 4; s++)
                xv[s] = g < 3 ? __ldg(reinterpret_cast<const uint4 *>(xp + 64 * s)) : z;
            gem_tiles_bf16_chunk(w, xv, acc);
            xp += 2 * 128;
        }
        left--;
        wp += CHUNK_BYTES;
        if (left)
            load(wp);
    }
    float r0 = acc[0] + acc[2], r1 = acc[1] + acc[3];
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
        float sum = red[0][r];
        for (int k = 1; k < nw; k++)
            sum += red[k][r];
        p.y[(size_t)tile * TILE_ROWS + (size_t)r] = sum;
    }
}

/* x's scratch: the library's (xq_kernel: the digits and the pieces) */
__global__ void xq_kernel(const float *__restrict__ x, int64_t nblk, unsigned char *__restrict__ xq)
{
    pdl_trigger();
    pdl_wait();
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= nblk)
        return;
    const float v = x[32 * b + (threadIdx.x & 31)];
    gem_tiles_xq_block(v, b, xq, threadIdx.x & 31);
    gem_tiles_xq_pieces(v, 32 * b + (threadIdx.x & 31), 32 * nblk, xq);
}

/* v2 (6 chunks a warp, the library's loop) or v3 (the library's split, the quads). */
static void bf16t_v(int v, const unsigned char *tiles, int64_t rows, int64_t cols, const float *x,
                    unsigned char *xq, uint32_t *quads, float *y)
{
    Params p;
    p.data = tiles;
    p.y = y;
    p.nchunks = cols / 128;
    if (v == 3) {
        cudaCheck(launch_pdl(pieces_quads, (unsigned)((cols + 255) / 256), 256, 0, x, cols, quads));
        p.xp = (const unsigned char *)quads;
    } else {
        const int64_t nblk = cols / 32;
        cudaCheck(launch_pdl(xq_kernel, (unsigned)((nblk + 7) / 8), 256, 0, x, nblk, xq));
        p.xp = xq + (size_t)p.nchunks * GEM_TILES_XQ_CHUNK_BYTES;
    }
    const int64_t per = v == 2 ? 6 : 3, need = (p.nchunks + per - 1) / per;
    int64_t warps = 1;
    while (warps < need && warps < MAX_WARPS)
        warps *= 2;
    p.cpw = (p.nchunks + warps - 1) / warps;
    const unsigned grid = (unsigned)(rows / TILE_ROWS), block = (unsigned)(32 * warps);
    if (v == 3)
        cudaCheck(launch_pdl(bf16t_kernel<1>, grid, block, 0, p));
    else
        cudaCheck(launch_pdl(bf16t_kernel<0>, grid, block, 0, p));
}

__global__ void to_bf16(const float *x, int64_t n, __nv_bfloat16 *y)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = __float2bfloat16_rn(x[i]);
}

/* One matrix's buffers and the variants on it. */
typedef struct bench {
    cublasHandle_t h;
    gem_dmatrix rows, tiles;
    float *dx, *dy;
    __nv_bfloat16 *dxb;
    unsigned char *xq;
    uint32_t *quads;
} bench;

static void run_variant(const bench *b, int v)
{
    const float one = 1.0f, zero = 0.0f;
    const int64_t rows = b->rows.rows, cols = b->rows.cols;
    if (v == 0)
        GEM_TRY(gem_dmv(&b->rows, b->dx, b->dy, NULL, NULL));
    else if (v == 1)
        GEM_TRY(gem_dmv(&b->tiles, b->dx, b->dy, b->xq, NULL));
    else if (v == 4)
        CUBLAS_TRY(cublasGemmEx(b->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, 1, (int)cols, &one,
                                b->rows.data, CUDA_R_16BF, (int)cols, b->dxb, CUDA_R_16BF,
                                (int)cols, &zero, b->dy, CUDA_R_32F, (int)rows,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
        bf16t_v(v, (const unsigned char *)b->tiles.data, rows, cols, b->dx, b->xq, b->quads,
                b->dy);
}

static void bench_alloc(bench *b, cublasHandle_t h, int64_t rows, int64_t cols)
{
    b->h = h;
    b->rows = (gem_dmatrix){NULL, GEM_GGUF_BF16, rows, cols, (size_t)cols * 2, GEM_DLAYOUT_ROWS};
    b->tiles = b->rows;
    cudaCheck(cudaMalloc(&b->rows.data, (size_t)rows * (size_t)cols * 2));
    cudaCheck(cudaMalloc(&b->tiles.data, (size_t)rows * (size_t)cols * 2));
    cudaCheck(cudaMalloc((void **)&b->dx, (size_t)cols * 4));
    cudaCheck(cudaMalloc((void **)&b->dy, (size_t)rows * 4));
    cudaCheck(cudaMalloc((void **)&b->dxb, (size_t)cols * 2));
    cudaCheck(cudaMalloc((void **)&b->xq, gem_dmv_xq_bytes(cols) + 16));
    cudaCheck(cudaMalloc((void **)&b->quads, (size_t)cols * 12));
}

static void bench_x(bench *b, const float *x)
{
    const int64_t cols = b->rows.cols;
    cudaCheck(cudaMemcpy(b->dx, x, (size_t)cols * 4, cudaMemcpyHostToDevice));
    to_bf16<<<(unsigned)((cols + 255) / 256), 256>>>(b->dx, cols, b->dxb);
    cudaCheck(cudaGetLastError());
}

static void bench_free(bench *b)
{
    cudaFree(b->rows.data);
    cudaFree(b->tiles.data);
    cudaFree(b->dx);
    cudaFree(b->dy);
    cudaFree(b->dxb);
    cudaFree(b->xq);
    cudaFree(b->quads);
}

/* The variants on rows x cols (seeded BF16 values, x with outliers) against the double
 * reference and a repeat; unit vectors through the library. */
static int check(cublasHandle_t h, int64_t rows, int64_t cols, uint64_t seed)
{
    const size_t n = (size_t)rows * (size_t)cols;
    uint16_t *hw = (uint16_t *)malloc(n * 2);
    float *w = (float *)malloc(n * 4), *x = (float *)malloc((size_t)cols * 4);
    float *y = (float *)malloc((size_t)rows * 4), *y2 = (float *)malloc((size_t)rows * 4);
    fill(w, n, seed);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &w[i], 4);
        u += 0x7fffu + ((u >> 16) & 1u); /* to nearest even */
        hw[i] = (uint16_t)(u >> 16);
        u = (uint32_t)hw[i] << 16;
        memcpy(&w[i], &u, 4);
    }
    fill(x, (size_t)cols, seed + 7);
    for (int64_t i = 0; i < cols; i += 53)
        x[i] *= 200.0f;
    bench b;
    bench_alloc(&b, h, rows, cols);
    cudaCheck(cudaMemcpy(b.rows.data, hw, n * 2, cudaMemcpyHostToDevice));
    GEM_TRY(gem_dmatrix_tile(&b.tiles, b.rows.data, NULL));
    bench_x(&b, x);
    int bad = b.tiles.layout != GEM_DLAYOUT_BF16_TILES;
    double rms = 0;
    float *ygem = (float *)malloc((size_t)rows * 4);
    for (int v = 0; v < NVAR; v++) {
        for (int rep = 0; rep < 2; rep++) {
            run_variant(&b, v);
            cudaCheck(cudaMemcpy(rep ? y2 : y, b.dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
        }
        const int same = memcmp(y, y2, (size_t)rows * 4) == 0;
        double worst = 0;
        for (int64_t r = 0; r < rows; r++) {
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < cols; i++) {
                ref += (double)w[(size_t)r * cols + i] * (double)x[i];
                mag += fabs((double)w[(size_t)r * cols + i] * (double)x[i]);
            }
            if (v == 0)
                rms += ref * ref / (double)rows;
            const double e = v == 4 ? fabs((double)y[r] - (double)ygem[r])
                                    : fabs((double)y[r] - ref) / (1e-5 * mag + 1e-30);
            worst = e > worst || e != e ? e : worst;
        }
        if (v == 0)
            memcpy(ygem, y, (size_t)rows * 4);
        if (v == 4) {
            worst /= sqrt(rms) + 1e-30;
            const int ok = worst < 5e-2;
            bad |= !ok;
            printf("check bf16 %-8s %6lld x %-5lld  max |y - y_rows| / rms %.2e  %s\n", vname[v],
                   (long long)rows, (long long)cols, worst, ok ? "ok" : "FAILED");
            continue;
        }
        bad |= !same || !(worst <= 1.0);
        printf("check bf16 %-8s %6lld x %-5lld  max |y - ref| / bound %.4f, repeat %s  %s\n",
               vname[v], (long long)rows, (long long)cols, worst, same ? "equal" : "differs",
               !same || !(worst <= 1.0) ? "FAILED" : "ok");
    }
    /* unit vectors: the library gives the weights exactly */
    int unit_bad = 0;
    for (int64_t c = 0; c < cols; c += 37) {
        memset(x, 0, (size_t)cols * 4);
        x[c] = 1.0f;
        bench_x(&b, x);
        run_variant(&b, 1);
        cudaCheck(cudaMemcpy(y, b.dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
        for (int64_t r = 0; r < rows; r++)
            unit_bad += y[r] != w[(size_t)r * cols + c];
    }
    bad |= unit_bad != 0;
    printf("check bf16 library  %6lld x %-5lld  unit vectors: %d outputs differ  %s\n",
           (long long)rows, (long long)cols, unit_bad, unit_bad ? "FAILED" : "ok");
    bench_free(&b);
    free(hw), free(w), free(x), free(y), free(y2), free(ygem);
    return bad;
}

typedef struct shape {
    const char *name;
    int64_t rows, cols;
} shape;

static const shape shapes[] = {
    {"k", 4096, 5376},       {"q", 8192, 5376},       {"o-swa", 5376, 8192},
    {"o-full", 5376, 16384}, {"gate", 21504, 5376},   {"down", 5376, 21504},
    {"head", 262144, 5376},
};

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
    cublasHandle_t h;
    int ver = 0;
    CUBLAS_TRY(cublasCreate(&h));
    CUBLAS_TRY(cublasGetVersion(h, &ver));
    printf("device: %s, %d SMs; cuBLAS %d\n", prop.name, prop.multiProcessorCount, ver);
    int failed = 0;
    failed |= check(h, 8, 128, 1);    /* one warp, one chunk */
    failed |= check(h, 64, 1152, 2);  /* 4 warps of 3, the last with none (v2: 2 of 5 and 4) */
    failed |= check(h, 72, 5376, 3);  /* 16 warps of 3 (v2: 8 of 6) */
    failed |= check(h, 16, 21504, 4); /* 16 warps of 11 */
    if (failed) {
        printf("validation FAILED: no timings\n");
        return 1;
    }
    void *hx = NULL;
    GEM_TRY(gem_harness_cuda_ops.open(&hx));
    double probe = 0;
    GEM_TRY(gem_harness_cuda_ops.read_bandwidth(hx, 0, (size_t)4 << 30, 20, &probe));
    printf("read probe: %.1f GB/s\n\n%-7s %-8s %8s %9s %6s %9s %6s  %s\n", probe * 1e-9, "shape",
           "variant", "MB", "median_us", "probe", "chain_us", "probe", "rep");
    double *times = (double *)malloc((size_t)reps * sizeof(double));
    cudaEvent_t *ev = (cudaEvent_t *)malloc((size_t)(reps + 1) * sizeof(cudaEvent_t));
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventCreate(&ev[r]));
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *s = &shapes[si];
        const size_t mbytes = (size_t)s->rows * (size_t)s->cols * 2;
        int ncopies = (int)(((size_t)200 << 20) / mbytes + 1);
        ncopies = ncopies < 2 ? 2 : ncopies > 64 ? 64 : ncopies;
        bench *bs = (bench *)calloc((size_t)ncopies, sizeof *bs);
        float *hxv = (float *)malloc((size_t)s->cols * 4);
        fill(hxv, (size_t)s->cols, 9 + si);
        for (int c = 0; c < ncopies; c++) {
            bench_alloc(&bs[c], h, s->rows, s->cols);
            GEM_TRY(gem_dmatrix_fill_random(&bs[c].rows, 21 + (uint64_t)c,
                                            1.0f / sqrtf((float)s->cols), NULL));
            GEM_TRY(gem_dmatrix_tile(&bs[c].tiles, bs[c].rows.data, NULL));
            bench_x(&bs[c], hxv);
        }
        const double moved = (double)mbytes + 4.0 * (double)s->cols + 4.0 * (double)s->rows;
        const int r_here = s->rows >= 100000 ? (reps < 30 ? reps : 30) : reps;
        for (int v = 0; v < NVAR && once; v++) {
            run_variant(&bs[0], v);
            cudaCheck(cudaDeviceSynchronize());
        }
        for (int k = 0; k < 2 * NVAR && !once; k++) {
            const int v = k < NVAR ? k : 2 * NVAR - 1 - k;
            double med = 0, chain = 0;
            for (int pass = 0; pass < 3; pass++) { /* warm-up, per launch, chain */
                wait_kernel<<<1, 1>>>(pass ? 20000000ull : 1000ull);
                cudaCheck(cudaGetLastError());
                if (pass == 2)
                    cudaCheck(cudaEventRecord(ev[0], 0));
                for (int r = 0; r < r_here; r++) {
                    if (pass == 1)
                        cudaCheck(cudaEventRecord(ev[r], 0));
                    run_variant(&bs[r % ncopies], v);
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
                    med = times[r_here / 2];
                } else if (pass == 2) {
                    float ms = 0;
                    cudaCheck(cudaEventElapsedTime(&ms, ev[0], ev[r_here]));
                    chain = ms * 1e-3 / r_here;
                }
            }
            printf("%-7s %-8s %8.1f %9.2f %5.1f%% %9.2f %5.1f%%  %d\n", s->name, vname[v],
                   mbytes * 1e-6, med * 1e6, 100.0 * moved / med / probe, chain * 1e6,
                   100.0 * moved / chain / probe, k < NVAR ? 1 : 2);
            fflush(stdout);
        }
        for (int c = 0; c < ncopies; c++)
            bench_free(&bs[c]);
        free(bs);
        free(hxv);
    }
    free(times);
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventDestroy(ev[r]));
    free(ev);
    gem_harness_cuda_ops.close(hx);
    CUBLAS_TRY(cublasDestroy(h));
    return 0;
}
