/*
tiles_q8_0: Q8_0 products on the tensor cores with the Q4_0 tiles' MMAs, against the library's F32
Q8_0 product (src/model/cuda/matvec.cu) at Gemma 4 31B's shapes. Q8_0 files are the common
8-bit Gemma 4 files (every matrix Q8_0, the tied embedding too); their products take the F32
kernel, 28-69% of the read probe on an H200 (run 25).

Q8_0 (GGUF): a block of 32 elements, 34 bytes: d (f16), then 32 signed bytes q; w = d q.

Tiles (8 rows; 1,088 bytes a chunk of 128 columns, the same bytes as the file's): lane (g, t)
reads 16 bytes at 16 lane, row g's elements 4t..4t+3 and 16+4t..16+4t+3 of blocks 0 and 1 (B's
two fragment words of each, as they are), and 16 at 512 + 16 lane (blocks 2 and 3), then 8 bytes
of d at 1024 + 8 (4 h + t) in the Q4_0 chunk's order (tiles_arith.cuh's gem_tiles_q8_0_qs_off
and gem_tiles_q8_0_d_off). The scratch of x is the library's (four 7-bit digits a_j under each
32-block's exponent). A chunk is the Q4_0 chunk's four MMAs as s8 x s8 with C = 0 (S_j = sum
q a_j exact, |S_j| <= 2^18) and its four fmas; the library's gem_tiles_q8_0_chunk.

Variants (each a launch of the library's x scratch kernel, then the product):
  rows      the library's F32 kernel on the file's rows (gem_dmv)
  library   the library's tiled product (gem_dmv on GEM_DLAYOUT_Q8_0_TILES): at most 6 chunks
            a warp (6,528 bytes, about the Q4_0 split's 6,912), loads in batches of 2 chunks
            (2,176 bytes, about Q4_0's 2,304)
  v2        at most 12 chunks a warp (Q4_0's count: fewer warps, twice the bytes each), batches
            of 2
  v3        at most 6 chunks a warp, batches of 4 (twice the bytes in flight a warp)
The split's warps are a power of two up to 16, as the library's.

Checks before timing (exit 1 on a failure): every variant against the double-precision dot
product of gem_gguf_dequant's values on seeded rows (gem_gguf_quantize), |y - ref| <= 4e-6
(sum|w x| + E / 32) + 2^-26 E, E = sum over blocks of max|x| sum|w| (the Q4_0 tiles' bound: the
weights d q are exact in F32); bitwise repeats; v1 (this program's copy of the library's split
and loop) equal to the library bit for bit. Timing: per launch and chained, A B C D D C B A,
rotating over copies past the L2; fractions of the read probe measured in the same process.

Prediction (before the first run): the tiles read every shape at 1.5-3x the F32 kernel's rate;
the head near 95% of the probe on an H100 (Q4_0's 97%, with half the instructions a byte); the
split matters little (within 5%) at 5,376 columns, v2 losing on gate and the head where its 4
warps a tile leave fewer resident warps.

Run 198 (results/h200/run198, an H100, read probe 3,092 GB/s): every variant within 0.012 of its
bound, repeats equal, v1 the library's bits. Chained us (the ABBA halves agree within 1.5%), rows
/ library / v2 / v3: k 17.8 / 11.5 / 13.4 / 13.7, q 32.0 / 19.3 / 19.7 / 20.7, o-swa 24.1 / 20.4 /
21.0 / 22.7, o-full 43.2 / 35.9 / 36.0 / 41.7, gate 58.9 / 44.5 / 45.9 / 44.9, down 72.9 / 45.9 /
45.8 / 53.5, the head 556 / 474 / 484 / 474 (102% of the 4 GiB probe for the tiles). The
prediction was high for the rates: 1.17-1.66x, not 1.5-3x (the F32 kernel reads Q8_0 at 42-87%
of the probe, better than the 4-bit types); it held for the head. v2 lost most on k (16%), not
on gate; v3's deeper batches lost on every shape but the head. The library keeps 6 chunks a
warp in batches of two.

./tiles_q8_0 [--reps R] [--once]     (--once: every variant once per shape, no timing, for ncu)
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
#define BLOCK_BYTES 34                       /* a Q8_0 block in the file */
#define CHUNK_BYTES GEM_TILES_Q8_0_CHUNK_BYTES /* a tile's chunk: 1,088 bytes */
#define XQ_LANE GEM_TILES_XQ_LANE_BYTES
#define XQ_CHUNK GEM_TILES_XQ_CHUNK_BYTES
#define MAX_WARPS 16
#define NVAR 4
static const unsigned kFull = 0xffffffffu;
static const char *const vname[NVAR] = {"rows", "library", "v2", "v3"};

/* rows (file order) -> tiles; one thread per (row, block). */
__global__ void tile_q8_0(const unsigned char *__restrict__ src, size_t row_bytes, int64_t rows,
                          int64_t nb, unsigned char *__restrict__ dst)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * nb)
        return;
    const int64_t r = i / nb, b = i % nb;
    const int g = (int)(r % TILE_ROWS), bi = (int)(b % 4);
    const unsigned char *s = src + (size_t)r * row_bytes + (size_t)b * BLOCK_BYTES;
    unsigned char *t =
        dst + ((size_t)(r / TILE_ROWS) * (size_t)(nb / 4) + (size_t)(b / 4)) * CHUNK_BYTES;
    t[gem_tiles_q8_0_d_off(g, bi)] = s[0];
    t[gem_tiles_q8_0_d_off(g, bi) + 1] = s[1];
    for (int e = 0; e < 32; e++)
        t[gem_tiles_q8_0_qs_off(g, bi, e)] = s[2 + e];
}

/* x's scratch: the library's (matvec_tiles.cu's xq_kernel, on tiles_arith.cuh) */
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
    const unsigned char *data;
    float *y;
    int64_t nchunks, cpw; /* chunks a row, chunks a warp */
    const unsigned char *xq;
};

/* kB: chunks whose loads a warp issues together. */
template <int kB>
__global__ void __launch_bounds__(MAX_WARPS * 32) q8t_kernel(const Params p)
{
    __shared__ float red[MAX_WARPS][TILE_ROWS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = g >> 2;
    const int64_t tile = blockIdx.x;
    const uint32_t m0 = h ? 0u : kFull;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const int64_t cw = (int64_t)warp * p.cpw;
    const int64_t cb = cw < p.nchunks ? cw : p.nchunks;
    const int64_t ce = cb + p.cpw < p.nchunks ? cb + p.cpw : p.nchunks;
    const uint32_t n = (uint32_t)(ce - cb);
    const unsigned char *wp = p.data + (size_t)tile * (size_t)p.nchunks * CHUNK_BYTES +
                              (size_t)cb * CHUNK_BYTES + (size_t)16 * lane;
    const size_t dl = (size_t)(1024 + 8 * (4 * h + t)) - (size_t)16 * lane; /* from wp */
    const unsigned char *xp = p.xq + (size_t)cb * XQ_CHUNK + (size_t)XQ_LANE * lane;
    uint4 w01[kB], w23[kB];
    uint2 dd[kB];
    auto load = [&](const unsigned char *w, uint32_t left) {
#pragma unroll
        for (int k = 0; k < kB; k++) {
            if ((uint32_t)k < left) {
                const unsigned char *c = w + (size_t)k * CHUNK_BYTES;
                w01[k] = __ldcs(reinterpret_cast<const uint4 *>(c));
                w23[k] = __ldcs(reinterpret_cast<const uint4 *>(c + 512));
                dd[k] = __ldcs(reinterpret_cast<const uint2 *>(c + dl));
            }
        }
    };
    pdl_trigger();
    load(wp, n); /* the first weights stream while the kernels before finish */
    pdl_wait();
    for (uint32_t c = 0; c < n; c += kB) {
#pragma unroll
        for (int k = 0; k < kB; k++) {
            if (c + (uint32_t)k < n) {
                const uint4 *xc = reinterpret_cast<const uint4 *>(xp + (size_t)k * XQ_CHUNK);
                gem_tiles_q8_0_chunk(w01[k], w23[k], dd[k], __ldg(xc), __ldg(xc + 1), m0, acc);
            }
        }
        wp += (size_t)kB * CHUNK_BYTES;
        xp += (size_t)kB * XQ_CHUNK;
        if (c + kB < n)
            load(wp, n - c - kB);
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
        for (int w = 1; w < nw; w++)
            sum += red[w][r];
        p.y[(size_t)tile * TILE_ROWS + (size_t)r] = sum;
    }
}

/* Version v of the tiled product: 1 this program's copy of the library's (6 chunks a warp,
 * batches of 2), 2 (12, 2), 3 (6, 4). The scratch, then the tiles. */
static void q8t_v(int v, const unsigned char *tiles, int64_t rows, int64_t cols, const float *x,
                  unsigned char *xq, float *y)
{
    const int64_t nblk = cols / 32;
    cudaCheck(launch_pdl(xq_kernel, (unsigned)((nblk + 7) / 8), 256, 0, x, nblk, xq));
    Params p;
    p.data = tiles;
    p.y = y;
    p.nchunks = cols / 128;
    const int64_t per = v == 2 ? 12 : 6, need = (p.nchunks + per - 1) / per;
    int64_t warps = 1;
    while (warps < need && warps < MAX_WARPS)
        warps *= 2;
    p.cpw = (p.nchunks + warps - 1) / warps;
    p.xq = xq;
    const unsigned grid = (unsigned)(rows / TILE_ROWS), block = (unsigned)(32 * warps);
    if (v == 3)
        cudaCheck(launch_pdl(q8t_kernel<4>, grid, block, 0, p));
    else
        cudaCheck(launch_pdl(q8t_kernel<2>, grid, block, 0, p));
}

/* ---- checks and timing ---------------------------------------------------------------------- */

/* The bound of one row of dequantized weights w with x (file comment). */
static double row_bound(const float *w, const float *x, int64_t cols)
{
    double wx = 0, e = 0;
    for (int64_t b = 0; b < cols / 32; b++) {
        double mx = 0, sw = 0;
        for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
            wx += fabs((double)w[k] * (double)x[k]);
            mx = fmax(mx, fabs((double)x[k]));
            sw += fabs((double)w[k]);
        }
        e += mx * sw;
    }
    return 4e-6 * (wx + e / 32) + 0x1p-26 * e + 1e-30;
}

/* The variants on rows x cols against the double reference, a repeat and the library. */
static int check(int64_t rows, int64_t cols, uint64_t seed)
{
    size_t rb = 0;
    GEM_TRY(gem_gguf_row_bytes(GEM_GGUF_Q8_0, cols, &rb));
    const size_t bytes = (size_t)rows * rb;
    uint8_t *hw = (uint8_t *)malloc(bytes);
    float *src = (float *)malloc((size_t)cols * 4);
    float *deq = (float *)malloc((size_t)rows * (size_t)cols * 4);
    float *x = (float *)malloc((size_t)cols * 4);
    float *y[NVAR], *y2 = (float *)malloc((size_t)rows * 4), *ylib1 = NULL;
    for (int v = 0; v < NVAR; v++)
        y[v] = (float *)malloc((size_t)rows * 4);
    fill(x, (size_t)cols, seed);
    for (int64_t i = 0; i < cols; i += 53)
        x[i] *= 200.0f; /* outliers inside blocks */
    for (int64_t r = 0; r < rows; r++) {
        fill(src, (size_t)cols, seed + 100 + (uint64_t)r);
        GEM_TRY(gem_gguf_quantize(GEM_GGUF_Q8_0, src, hw + (size_t)r * rb, cols));
        GEM_TRY(gem_gguf_dequant(GEM_GGUF_Q8_0, hw + (size_t)r * rb, deq + (size_t)r * cols, cols));
    }
    unsigned char *drows, *dtiles, *xq;
    float *dx, *dy;
    cudaCheck(cudaMalloc((void **)&drows, bytes));
    cudaCheck(cudaMalloc((void **)&dtiles, bytes));
    cudaCheck(cudaMalloc((void **)&xq, gem_dmv_xq_bytes(cols) + 16));
    cudaCheck(cudaMalloc((void **)&dx, (size_t)cols * 4));
    cudaCheck(cudaMalloc((void **)&dy, (size_t)rows * 4));
    cudaCheck(cudaMemcpy(drows, hw, bytes, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(dx, x, (size_t)cols * 4, cudaMemcpyHostToDevice));
    const gem_dmatrix fm = {drows, GEM_GGUF_Q8_0, rows, cols, rb, GEM_DLAYOUT_ROWS};
    gem_dmatrix tm = fm;
    tm.data = dtiles;
    GEM_TRY(gem_dmatrix_tile(&tm, drows, NULL));
    int bad = tm.layout != GEM_DLAYOUT_Q8_0_TILES;
    for (int v = 0; v < NVAR; v++) {
        for (int rep = 0; rep < 2; rep++) {
            if (v == 0)
                GEM_TRY(gem_dmv(&fm, dx, dy, NULL, NULL));
            else if (v == 1)
                GEM_TRY(gem_dmv(&tm, dx, dy, xq, NULL));
            else
                q8t_v(v, dtiles, rows, cols, dx, xq, dy);
            cudaCheck(cudaMemcpy(rep ? y2 : y[v], dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
        }
        const int same = memcmp(y[v], y2, (size_t)rows * 4) == 0;
        double worst = 0;
        for (int64_t r = 0; r < rows; r++) {
            const float *w = deq + (size_t)r * cols;
            double ref = 0;
            for (int64_t i = 0; i < cols; i++)
                ref += (double)w[i] * (double)x[i];
            const double e = fabs((double)y[v][r] - ref) / row_bound(w, x, cols);
            worst = e > worst || e != e ? e : worst;
        }
        bad |= !same || !(worst <= 1.0);
        printf("check q8_0 %-8s %6lld x %-5lld  max |y - ref| / bound %.4f, repeat %s  %s\n",
               vname[v], (long long)rows, (long long)cols, worst, same ? "equal" : "differs",
               !same || !(worst <= 1.0) ? "FAILED" : "ok");
    }
    /* this program's copy of the library's split and loop: the library's bits */
    ylib1 = (float *)malloc((size_t)rows * 4);
    q8t_v(1, dtiles, rows, cols, dx, xq, dy);
    cudaCheck(cudaMemcpy(ylib1, dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    const int eq = memcmp(ylib1, y[1], (size_t)rows * 4) == 0;
    bad |= !eq;
    printf("check q8_0 v1 (copy) %6lld x %-5lld  against the library: %s  %s\n", (long long)rows,
           (long long)cols, eq ? "equal" : "differs", eq ? "ok" : "FAILED");
    cudaFree(drows);
    cudaFree(dtiles);
    cudaFree(xq);
    cudaFree(dx);
    cudaFree(dy);
    for (int v = 0; v < NVAR; v++)
        free(y[v]);
    free(hw), free(src), free(deq), free(x), free(y2), free(ylib1);
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
    printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    int failed = 0;
    failed |= check(8, 128, 1);    /* one warp, one chunk */
    failed |= check(64, 1152, 2);  /* 2 warps (v2: 1), a partial batch */
    failed |= check(72, 5376, 3);  /* 8 warps of 6, the last with none (v2: 4 of 11) */
    failed |= check(16, 21504, 4); /* 16 warps of 11 */
    failed |= check(24, 16384, 5); /* 16 warps of 8 */
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
        size_t rb = 0;
        GEM_TRY(gem_gguf_row_bytes(GEM_GGUF_Q8_0, s->cols, &rb));
        const size_t mbytes = (size_t)s->rows * rb;
        int ncopies = (int)(((size_t)200 << 20) / mbytes + 1);
        ncopies = ncopies < 2 ? 2 : ncopies > 64 ? 64 : ncopies;
        gem_dmatrix *rows = (gem_dmatrix *)calloc((size_t)ncopies, sizeof *rows);
        gem_dmatrix *tiles = (gem_dmatrix *)calloc((size_t)ncopies, sizeof *tiles);
        for (int c = 0; c < ncopies; c++) {
            rows[c] = (gem_dmatrix){NULL, GEM_GGUF_Q8_0, s->rows, s->cols, rb, GEM_DLAYOUT_ROWS};
            cudaCheck(cudaMalloc(&rows[c].data, mbytes));
            GEM_TRY(gem_dmatrix_fill_random(&rows[c], 21 + (uint64_t)c,
                                            1.0f / sqrtf((float)s->cols), NULL));
            tiles[c] = rows[c];
            cudaCheck(cudaMalloc(&tiles[c].data, mbytes));
            GEM_TRY(gem_dmatrix_tile(&tiles[c], rows[c].data, NULL));
        }
        float *hxv = (float *)malloc((size_t)s->cols * 4), *dx, *dy;
        unsigned char *xq;
        fill(hxv, (size_t)s->cols, 9 + si);
        cudaCheck(cudaMalloc((void **)&dx, (size_t)s->cols * 4));
        cudaCheck(cudaMalloc((void **)&dy, (size_t)s->rows * 4));
        cudaCheck(cudaMalloc((void **)&xq, gem_dmv_xq_bytes(s->cols) + 16));
        cudaCheck(cudaMemcpy(dx, hxv, (size_t)s->cols * 4, cudaMemcpyHostToDevice));
        const double moved = (double)mbytes + 4.0 * (double)s->cols + 4.0 * (double)s->rows;
        const int r_here = s->rows >= 100000 ? (reps < 30 ? reps : 30) : reps;
        const int order[2 * NVAR] = {0, 1, 2, 3, 3, 2, 1, 0};
#define RUN_VARIANT(v, c)                                                                         \
    do {                                                                                          \
        if ((v) == 0)                                                                             \
            GEM_TRY(gem_dmv(&rows[(c)], dx, dy, NULL, NULL));                                     \
        else if ((v) == 1)                                                                        \
            GEM_TRY(gem_dmv(&tiles[(c)], dx, dy, xq, NULL));                                      \
        else                                                                                      \
            q8t_v((v), (const unsigned char *)tiles[(c)].data, s->rows, s->cols, dx, xq, dy);    \
    } while (0)
        for (int v = 0; v < NVAR && once; v++) {
            RUN_VARIANT(v, 0);
            cudaCheck(cudaDeviceSynchronize());
        }
        for (int k = 0; k < 2 * NVAR && !once; k++) {
            const int v = order[k];
            double med = 0, chain = 0;
            for (int pass = 0; pass < 3; pass++) { /* warm-up, per launch, chain */
                wait_kernel<<<1, 1>>>(pass ? 20000000ull : 1000ull);
                cudaCheck(cudaGetLastError());
                if (pass == 2)
                    cudaCheck(cudaEventRecord(ev[0], 0));
                for (int r = 0; r < r_here; r++) {
                    if (pass == 1)
                        cudaCheck(cudaEventRecord(ev[r], 0));
                    RUN_VARIANT(v, r % ncopies);
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
#undef RUN_VARIANT
        for (int c = 0; c < ncopies; c++) {
            cudaCheck(cudaFree(rows[c].data));
            cudaCheck(cudaFree(tiles[c].data));
        }
        free(rows);
        free(tiles);
        free(hxv);
        cudaCheck(cudaFree(dx));
        cudaCheck(cudaFree(dy));
        cudaCheck(cudaFree(xq));
    }
    free(times);
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventDestroy(ev[r]));
    free(ev);
    gem_harness_cuda_ops.close(hx);
    return 0;
}
