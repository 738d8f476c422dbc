/*
tiles_q6k: Q6_K products on the tensor cores with the Q4_K tiles' loop, against the library's F32
Q6_K product (src/model/cuda/matvec.cu) at Gemma 4 31B's shapes. Q4_K_M files, the most common
real Gemma 4 files, keep the tied embedding (the head, the largest matrix), about half the layers'
attn_v and half their ffn_down in Q6_K; those take the F32 kernel today.

Q6_K (GGUF): a super-block of 256 elements, 210 bytes: ql (128 bytes of low nibbles), qh (64 bytes
of high two-bit pairs), sixteen int8 scales (one per 16 elements), d (f16). In half n of 128
elements, element 32i + l (block i of 32, l < 32) is q = (nibble of ql[64n + l + 32 (i & 1)], low
for i < 2) | (bits 2i..2i+1 of qh[32n + l]) << 4, and w = d sc[8n + 2i + l / 16] (q - 32).

Tiles (8 rows; 1,680 bytes a super-block): ql as the Q4_K tiles' nibbles (lane (g, t) reads row
g's words at 64 half + 4t, + 16, + 32, + 48, whose low and high nibbles are elements 4t..4t+3
and 16+4t..16+4t+3 of blocks 0 and 2, 0 and 2, 1 and 3, 1 and 3); qh as the lane's two words of
the half, bytes 4t.. and 16+4t.., each byte holding an element's high bits for all four blocks;
the scales a lane needs in one 16-byte word; the rows' d. tiles_arith.cuh's
gem_tiles_q6k_chunk has the offsets.

The product, per 128 columns: the scratch of x is the library's (four 7-bit digits a_j under each
32-block's exponent). A fragment of B is (nibbles & 0x0F) | (qh bits shifted to 4..5), q in
0..63. Each 16-element sub-block has its own scale, so a lane keeps two sets of sums, one per
sub-block: two s8 x s8 MMAs start them at -32 sum a_j (B all -32 over the sub-block's k), then
two u8 MMAs each add q a_j, one MMA covering a sub-block of two blocks (block i on k 0..15,
block i + 2 on k 16..31, A's rows masked to the block's digits). Six MMAs a chunk; every sum
S_ju = sum (q - 32) a_j exact (|S| <= 2^15); each adds fma((d 2^(E - 7j)) sc_u, S_ju), the
coefficient exact in F32.

Checks before timing (exit 1 on a failure): against the double-precision dot product of
gem_gguf_dequant's values on seeded rows (gem_gguf_quantize), |y - ref| <= 4e-6 (mag + E_x / 32)
+ 2^-26 E_x, mag = sum_u |d sc_u| sum |(q - 32) x|, E_x = sum over 32-blocks of max|x| times sum
|w| (the digits' representation error); bitwise repeats. Timing: per launch and chained, ABBA
against gem_dmv on the file-order rows of the same matrices, rotating over copies past the L2.

Version 1: a warp owns whole super-blocks (at most 6, the warps a power of two up to 16, the
Q4_K plain split) and loads the next one (ql, qh, scales, d: 17 registers) while it computes one.
Version 2: batches of two super-blocks.
Prediction (before the first run): 70-80 warp instructions a 840-byte chunk (Q4_K's 117 a 576-
byte one); on an H100 the head near the Q4_K tiles' 94% of the probe, v near 35-40% (one wave,
as Q4_K's k), down 65-70%, against 20-35% for the F32 kernel.

Run 192 (results/h200/run192, an H100): both versions within 0.002-0.008 of their bound (the
F32 kernel 0.004-0.013 of it), repeats equal. Chained us, F32 kernel / v1 / v2: v 15.9 / 13.5-13.8
/ 11.7, q 30.0 / 15.8 / 21.0, o-swa 26.4 / 19.0 / 19.6, gate 57.7 / 36.9 / 39.8, down 52.7 / 39.9
/ 49.4, the head 578 / 366.6 / 366.3 (99.0% of the probe). ncu: 129-133 warp instructions a
chunk, not the 70-80 predicted; the rates beat the prediction. Version 1 is the library's Q6_K
product since (src/model/cuda/matvec_tiles.cu's q6_k_warp).

./tiles_q6k [--reps R] [--once]     (--once: every variant once per shape, no timing, for ncu)
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
#define SB_BYTES 210                     /* a Q6_K super-block in the file */
#define TSB_BYTES GEM_TILES_Q6K_SB_BYTES /* a tile's super-block: 1,680 bytes */
#define XQ_LANE GEM_TILES_XQ_LANE_BYTES
#define XQ_CHUNK GEM_TILES_XQ_CHUNK_BYTES
#define MAX_WARPS 16
#define SB_PER_WARP 6
static const unsigned kFull = 0xffffffffu;

/* rows (file order) -> tiles; one thread per (row, super-block). */
__global__ void tile_q6k(const unsigned char *__restrict__ src, size_t row_bytes, int64_t rows,
                         int64_t nsb, unsigned char *__restrict__ dst)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * nsb)
        return;
    const int64_t r = i / nsb, s = i % nsb;
    const int g = (int)(r % TILE_ROWS);
    const unsigned char *b = src + (size_t)r * row_bytes + (size_t)s * SB_BYTES;
    unsigned char *t = dst + ((size_t)(r / TILE_ROWS) * (size_t)nsb + (size_t)s) * TSB_BYTES;
    for (int k = 0; k < 128; k++)
        t[gem_tiles_q4k_qs_off(g, k)] = b[k];
    for (int k = 0; k < 64; k++)
        t[gem_tiles_q6k_qh_off(g, k)] = b[128 + k];
    for (int k = 0; k < 16; k++)
        t[gem_tiles_q6k_sc_off(g, k)] = b[192 + k];
    t[gem_tiles_q6k_d_off(g)] = b[208];
    t[gem_tiles_q6k_d_off(g) + 1] = b[209];
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
    int64_t nsb, spw; /* super-blocks a row, super-blocks a warp */
    const unsigned char *xq;
};

/* A super-block's loads of one lane. */
struct Q6kSb {
    uint4 wq0, wq1, sc;
    uint2 hq0, hq1;
    uint32_t dd;
};

/* kSbBatch: super-blocks whose loads a warp issues together (version 1: 1, version 2: 2). */
template <int kSbBatch>
__global__ void __launch_bounds__(MAX_WARPS * 32) q6kt_kernel(const Params p)
{
    __shared__ float red[MAX_WARPS][TILE_ROWS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = g >> 2;
    const int64_t tile = blockIdx.x;
    const uint32_t m0 = h ? 0u : kFull;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const int64_t sw = (int64_t)warp * p.spw;
    const int64_t sb0 = sw < p.nsb ? sw : p.nsb;
    const int64_t sbe = sb0 + p.spw < p.nsb ? sb0 + p.spw : p.nsb;
    uint32_t left = (uint32_t)(sbe - sb0);
    /* the lane's bytes of the warp's first super-block */
    const unsigned char *wp =
        p.data + ((size_t)tile * (size_t)p.nsb + (size_t)sb0) * TSB_BYTES + (size_t)16 * lane;
    const size_t qh_from = 1024 + (size_t)8 * lane - (size_t)16 * lane;   /* from wp */
    const size_t sc_from = 1536 + (size_t)16 * (4 * h + t) - (size_t)16 * lane;
    const size_t d_from = 1664 + (size_t)4 * t - (size_t)16 * lane;
    const unsigned char *xp = p.xq + (size_t)(2 * sb0) * XQ_CHUNK + (size_t)XQ_LANE * lane;
    Q6kSb b[kSbBatch];
    auto load1 = [&](int k) {
        const unsigned char *w = wp + (size_t)k * TSB_BYTES;
        b[k].wq0 = __ldcs(reinterpret_cast<const uint4 *>(w));
        b[k].wq1 = __ldcs(reinterpret_cast<const uint4 *>(w + 512));
        b[k].hq0 = __ldcs(reinterpret_cast<const uint2 *>(w + qh_from));
        b[k].hq1 = __ldcs(reinterpret_cast<const uint2 *>(w + qh_from + 256));
        b[k].sc = __ldcs(reinterpret_cast<const uint4 *>(w + sc_from));
        b[k].dd = __ldcs(reinterpret_cast<const unsigned int *>(w + d_from));
    };
    auto load = [&]() {
        if (left >= (uint32_t)kSbBatch) {
#pragma unroll
            for (int k = 0; k < kSbBatch; k++)
                load1(k);
        } else {
#pragma unroll
            for (int k = 0; k < kSbBatch - 1; k++)
                if ((uint32_t)k < left)
                    load1(k);
        }
    };
    pdl_trigger();
    if (left)
        load(); /* the first weights stream while the kernels before finish */
    pdl_wait();
    while (left) {
#pragma unroll
        for (int k = 0; k < kSbBatch; k++) {
            if ((uint32_t)k < left) {
                const uint4 *xc = reinterpret_cast<const uint4 *>(xp + (size_t)(2 * k) * XQ_CHUNK);
                gem_tiles_q6k_chunk<0>(b[k].wq0, b[k].hq0, b[k].sc, b[k].dd, __ldg(xc),
                                       __ldg(xc + 1), m0, acc);
                const uint4 *xd = reinterpret_cast<const uint4 *>(xp + (size_t)(2 * k + 1) * XQ_CHUNK);
                gem_tiles_q6k_chunk<1>(b[k].wq1, b[k].hq1, b[k].sc, b[k].dd, __ldg(xd),
                                       __ldg(xd + 1), m0, acc);
            }
        }
        left = left > (uint32_t)kSbBatch ? left - (uint32_t)kSbBatch : 0u;
        wp += (size_t)kSbBatch * TSB_BYTES;
        xp += (size_t)(2 * kSbBatch) * XQ_CHUNK;
        if (left)
            load();
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

/* Version v (1 or 2) of the tiled product: the scratch, then the tiles. */
static void q6kt_v(int v, const unsigned char *tiles, int64_t rows, int64_t cols, const float *x,
                   unsigned char *xq, float *y)
{
    const int64_t nblk = cols / 32;
    cudaCheck(launch_pdl(xq_kernel, (unsigned)((nblk + 7) / 8), 256, 0, x, nblk, xq));
    Params p;
    p.data = tiles;
    p.y = y;
    p.nsb = cols / 256;
    const int64_t need = (p.nsb + SB_PER_WARP - 1) / SB_PER_WARP;
    int64_t warps = 1;
    while (warps < need && warps < MAX_WARPS)
        warps *= 2;
    p.spw = (p.nsb + warps - 1) / warps;
    p.xq = xq;
    if (v == 2)
        cudaCheck(launch_pdl(q6kt_kernel<2>, (unsigned)(rows / TILE_ROWS), (unsigned)(32 * warps),
                             0, p));
    else
        cudaCheck(launch_pdl(q6kt_kernel<1>, (unsigned)(rows / TILE_ROWS), (unsigned)(32 * warps),
                             0, p));
}

/* ---- checks and timing ---------------------------------------------------------------------- */

static float f16_at(const uint8_t *q) { return gem_gguf_f16_to_f32((uint16_t)(q[0] | (q[1] << 8))); }

/* The bound of one row (file comment). */
static double row_bound(const uint8_t *row, const float *x, int64_t cols)
{
    double mag = 0, ex = 0;
    for (int64_t b = 0; b < cols / 256; b++) {
        const uint8_t *blk = row + SB_BYTES * b;
        const double d = f16_at(blk + 208);
        for (int n = 0; n < 2; n++)
            for (int i = 0; i < 4; i++) {
                double mx = 0, wsum = 0;
                for (int l = 0; l < 32; l++) {
                    const int ql = blk[64 * n + l + 32 * (i & 1)];
                    const int q = ((i < 2 ? ql & 0xF : ql >> 4) |
                                   (((blk[128 + 32 * n + l] >> (2 * i)) & 3) << 4)) - 32;
                    const double sc = (double)(signed char)blk[192 + 8 * n + 2 * i + l / 16];
                    const double xv = fabs((double)x[256 * b + 128 * n + 32 * i + l]);
                    mag += fabs(d * sc) * abs(q) * xv;
                    wsum += fabs(d * sc) * abs(q);
                    mx = fmax(mx, xv);
                }
                ex += mx * wsum;
            }
    }
    return 4e-6 * (mag + ex / 32) + 0x1p-26 * ex + 1e-30;
}

/* Version v of the tiled product on rows x cols against the double reference and a repeat. */
static int check(int v, int64_t rows, int64_t cols, uint64_t seed)
{
    size_t rb = 0;
    GEM_TRY(gem_gguf_row_bytes(GEM_GGUF_Q6_K, cols, &rb));
    const size_t bytes = (size_t)rows * rb;
    uint8_t *hw = (uint8_t *)malloc(bytes);
    float *src = (float *)malloc((size_t)cols * 4), *deq = (float *)malloc((size_t)cols * 4);
    float *x = (float *)malloc((size_t)cols * 4), *y = (float *)malloc((size_t)rows * 4);
    float *y2 = (float *)malloc((size_t)rows * 4), *yf = (float *)malloc((size_t)rows * 4);
    fill(x, (size_t)cols, seed);
    for (int64_t i = 0; i < cols; i += 53)
        x[i] *= 200.0f; /* outliers inside blocks */
    for (int64_t r = 0; r < rows; r++) {
        fill(src, (size_t)cols, seed + 100 + (uint64_t)r);
        GEM_TRY(gem_gguf_quantize(GEM_GGUF_Q6_K, src, hw + (size_t)r * rb, cols));
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
    const int64_t nsb = cols / 256;
    tile_q6k<<<(unsigned)((rows * nsb + 255) / 256), 256>>>(drows, rb, rows, nsb, dtiles);
    cudaCheck(cudaGetLastError());
    q6kt_v(v, dtiles, rows, cols, dx, xq, dy);
    cudaCheck(cudaMemcpy(y, dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    q6kt_v(v, dtiles, rows, cols, dx, xq, dy);
    cudaCheck(cudaMemcpy(y2, dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    const gem_dmatrix fm = {drows, GEM_GGUF_Q6_K, rows, cols, rb, GEM_DLAYOUT_ROWS};
    GEM_TRY(gem_dmv(&fm, dx, dy, NULL, NULL));
    cudaCheck(cudaMemcpy(yf, dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    int bad = memcmp(y, y2, (size_t)rows * 4) != 0;
    double worst = 0, worst_f32 = 0;
    for (int64_t r = 0; r < rows; r++) {
        GEM_TRY(gem_gguf_dequant(GEM_GGUF_Q6_K, hw + (size_t)r * rb, deq, cols));
        double ref = 0;
        for (int64_t i = 0; i < cols; i++)
            ref += (double)deq[i] * (double)x[i];
        const double bound = row_bound(hw + (size_t)r * rb, x, cols);
        const double e = fabs((double)y[r] - ref) / bound;
        const double ef = fabs((double)yf[r] - ref) / bound;
        worst = e > worst || e != e ? e : worst;
        worst_f32 = ef > worst_f32 || ef != ef ? ef : worst_f32;
    }
    bad |= !(worst <= 1.0);
    printf("check q6_k tiles v%d %6lld x %-5lld  max |y - ref| / bound %.3f (F32 kernel %.3f), "
           "repeat %s  %s\n",
           v, (long long)rows, (long long)cols, worst, worst_f32,
           memcmp(y, y2, (size_t)rows * 4) ? "differs" : "equal", bad ? "FAILED" : "ok");
    cudaFree(drows);
    cudaFree(dtiles);
    cudaFree(xq);
    cudaFree(dx);
    cudaFree(dy);
    free(hw), free(src), free(deq), free(x), free(y), free(y2), free(yf);
    return bad;
}

typedef struct shape {
    const char *name;
    int64_t rows, cols;
} shape;

/* v and down are Q6_K in about half the layers of a Q4_K_M file, the head always */
static const shape shapes[] = {
    {"v", 4096, 5376},     {"q", 8192, 5376},      {"o-swa", 5376, 8192},
    {"gate", 21504, 5376}, {"down", 5376, 21504}, {"head", 262144, 5376},
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
    for (int v = 1; v <= 2; v++) {
        failed |= check(v, 8, 256, 1);
        failed |= check(v, 64, 1280, 2);
        failed |= check(v, 72, 5376, 3);
        failed |= check(v, 16, 21504, 4);
        failed |= check(v, 24, 16384, 5);
    }
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
        GEM_TRY(gem_gguf_row_bytes(GEM_GGUF_Q6_K, s->cols, &rb));
        const size_t mbytes = (size_t)s->rows * rb;
        int ncopies = (int)(((size_t)200 << 20) / mbytes + 1);
        ncopies = ncopies < 2 ? 2 : ncopies > 64 ? 64 : ncopies;
        gem_dmatrix *rows = (gem_dmatrix *)calloc((size_t)ncopies, sizeof *rows);
        unsigned char **tiles = (unsigned char **)calloc((size_t)ncopies, sizeof *tiles);
        const int64_t nsb = s->cols / 256;
        for (int c = 0; c < ncopies; c++) {
            rows[c] = (gem_dmatrix){NULL, GEM_GGUF_Q6_K, s->rows, s->cols, rb, GEM_DLAYOUT_ROWS};
            cudaCheck(cudaMalloc(&rows[c].data, mbytes));
            cudaCheck(cudaMalloc((void **)&tiles[c], mbytes));
            GEM_TRY(gem_dmatrix_fill_random(&rows[c], 21 + (uint64_t)c,
                                            1.0f / sqrtf((float)s->cols), NULL));
            tile_q6k<<<(unsigned)((s->rows * nsb + 255) / 256), 256>>>(
                (const unsigned char *)rows[c].data, rb, s->rows, nsb, tiles[c]);
            cudaCheck(cudaGetLastError());
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
        const int order[6] = {0, 1, 2, 2, 1, 0};
        for (int v = 0; v < 3 && once; v++) {
            if (v == 0)
                GEM_TRY(gem_dmv(&rows[0], dx, dy, NULL, NULL));
            else
                q6kt_v(v, tiles[0], s->rows, s->cols, dx, xq, dy);
            cudaCheck(cudaDeviceSynchronize());
        }
        for (int k = 0; k < 6 && !once; k++) {
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
                    if (v == 0)
                        GEM_TRY(gem_dmv(&rows[r % ncopies], dx, dy, NULL, NULL));
                    else
                        q6kt_v(v, tiles[r % ncopies], s->rows, s->cols, dx, xq, dy);
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
            static const char *const vname[3] = {"library", "tiles-v1", "tiles-v2"};
            printf("%-7s %-8s %8.1f %9.2f %5.1f%% %9.2f %5.1f%%  %d\n", s->name, vname[v],
                   mbytes * 1e-6, med * 1e6, 100.0 * moved / med / probe, chain * 1e6,
                   100.0 * moved / chain / probe, k < 3 ? 1 : 2);
            fflush(stdout);
        }
        for (int c = 0; c < ncopies; c++) {
            cudaCheck(cudaFree(rows[c].data));
            cudaCheck(cudaFree(tiles[c]));
        }
        free(rows);
        free(tiles);
        free(hxv);
        cudaCheck(cudaFree(dx));
        cudaCheck(cudaFree(dy));
        cudaCheck(cudaFree(xq));
    }
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventDestroy(ev[r]));
    free(ev);
    free(times);
    gem_harness_cuda_ops.close(hx);
    return 0;
}
