/*
model_norms: the decoder's post-MLP norm kernel (src/model/cuda/gemma4_cuda.cu's post_ffn_kernel,
the residual update and the next layer's input norm, one block of 1024 threads) as the library
has it, against a version that holds each thread's elements in registers, at Gemma 4 31B's
hidden size 5,376.

ncu measured the library's post-attention and post-MLP kernels at 11.7 us each (H200 run 32,
results/h200/run32/ncu-31b-token-sums.txt), 1.4 ms of a 31B token: each of their four passes
loads one element per thread, uses it, and only then loads the next. The register version
(commit f5d4799, not yet run on a GPU when this program was written) loads every element a
thread owns (up to 8) at once, the weights before the programmatic-launch wait, and adds the
sums of squares in the same order, so its outputs must equal the library's bit for bit: the
program checks that first (x and xn after one call, on seeded inputs with a few large values)
and exits 1 otherwise.

A third version also writes the tiled products' x scratch for xn (the next layer's q/k/v input)
from the registers: warp w holds exactly the 32-element blocks w + 32k of xn, one element per
lane, so the conversion needs no load. It is timed against the register version followed by
the scratch kernel (matvec_tiles.cu's, on tiles_arith.cuh), the decoder's launches; its
scratch bytes must equal that kernel's (checked with x and xn). Run 31 measured the scratch
written by the loop version (one thread block converting every block after reloading xn) 1.3 ms
a token slower; this one converts what the warps already hold.

Timing: the kernels launched as programmatic dependents, as in the decoder, 200 calls in a
chain (events around the chain alone) and per call (an event before each), ABBA twice; the
figure is the mean per call of the chain and the median of the per-call intervals. Prediction
before the first run: the library's version near 11-12 us per call, the register version
3-5 us, the register version and the scratch kernel 6-8 us, the register version writing the
scratch 5-6 us. (ptxas spills 16 and 36 bytes of the register versions under their
64-register bound.)

H200 run 33 (results/h200/run33/dev-model-norms.txt, where the names were "regs+xq" for the
register version followed by the scratch kernel and "regs-xq" for the one writing the scratch):
every output equal; chained per call: loops 5.74 us, registers 5.04 (the library since then),
registers then the scratch kernel 6.68, the register version writing the scratch 15.4 (32 warps
convert the 168 blocks in series where the scratch kernel spreads them over 168 warps).
The decoder with the scratch written by its norms (run 37) confirmed it: the norms stage 1.53 ->
2.83 ms a token; reverted. The predictions above were wrong twice: ncu's 11.7 us per kernel was
not the chained time, and the conversion is not free in one block.

./model_norms [--reps R]
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common.h"
#include "cuda/gem_pdl.cuh"
#include "model/cuda/tiles_arith.cuh"

#define NORM_THREADS 1024
#define NORM_PER_THREAD 8
#define N_EMBD 5376
#define XQ_CHUNK GEM_TILES_XQ_CHUNK_BYTES

/* ---- the library's kernel (gemma4_cuda.cu at a2ef766), unchanged ---------------------------- */

__device__ double block_sum(double v, double *sh)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x / 32) ? sh[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0)
            sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

__device__ double rms_inv(const float *x, int64_t n, double eps, double *sh)
{
    double ss = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        ss += (double)x[i] * (double)x[i];
    ss = block_sum(ss, sh);
    return 1.0 / sqrt(ss / (double)n + eps);
}

__global__ void post_ffn_loops(const float *__restrict__ o, const float *__restrict__ w_post,
                               float *__restrict__ x, float scale,
                               const float *__restrict__ w_next, int64_t n, double eps,
                               float *__restrict__ xn)
{
    pdl_trigger();
    pdl_wait();
    __shared__ double sh[32];
    const double r = rms_inv(o, n, eps, sh);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        x[i] = (x[i] + (float)((double)o[i] * r) * w_post[i]) * scale;
    const double r2 = rms_inv(x, n, eps, sh);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        xn[i] = (float)((double)x[i] * r2) * w_next[i];
}

/* ---- the register version (f5d4799) ------------------------------------------------------- */

__device__ __forceinline__ void norm_load(const float *__restrict__ p, int64_t n,
                                          float (&v)[NORM_PER_THREAD])
{
#pragma unroll
    for (int k = 0; k < NORM_PER_THREAD; k++) {
        const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
        v[k] = i < n ? p[i] : 0.0f;
    }
}

__device__ __forceinline__ double norm_rms_inv(const float (&v)[NORM_PER_THREAD], int64_t n,
                                               double eps, double *sh)
{
    double ss = 0.0;
#pragma unroll
    for (int k = 0; k < NORM_PER_THREAD; k++)
        if (threadIdx.x + (int64_t)k * blockDim.x < n)
            ss += (double)v[k] * (double)v[k];
    ss = block_sum(ss, sh);
    return 1.0 / sqrt(ss / (double)n + eps);
}

__global__ void __launch_bounds__(NORM_THREADS)
    post_ffn_registers(const float *__restrict__ o, const float *__restrict__ w_post,
                       float *__restrict__ x, float scale, const float *__restrict__ w_next,
                       int64_t n, double eps, float *__restrict__ xn)
{
    __shared__ double sh[32];
    float wp[NORM_PER_THREAD], wn[NORM_PER_THREAD], ov[NORM_PER_THREAD], xv[NORM_PER_THREAD];
    pdl_trigger();
    norm_load(w_post, n, wp);
    norm_load(w_next, n, wn);
    pdl_wait();
    norm_load(o, n, ov);
    norm_load(x, n, xv);
    const double r = norm_rms_inv(ov, n, eps, sh);
#pragma unroll
    for (int k = 0; k < NORM_PER_THREAD; k++)
        xv[k] = (xv[k] + (float)((double)ov[k] * r) * wp[k]) * scale;
    const double r2 = norm_rms_inv(xv, n, eps, sh);
#pragma unroll
    for (int k = 0; k < NORM_PER_THREAD; k++) {
        const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
        if (i < n) {
            x[i] = xv[k];
            xn[i] = (float)((double)xv[k] * r2) * wn[k];
        }
    }
}


/* ---- the scratch (tiles_arith.cuh, the library's conversion) ----------------------------- */

/* The library's scratch kernel (one warp per block of 32). */
__global__ void xq_kernel(const float *__restrict__ x, int64_t nblk, unsigned char *__restrict__ xq)
{
    pdl_trigger();
    pdl_wait();
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= nblk)
        return;
    gem_tiles_xq_block(x[32 * b + (threadIdx.x & 31)], b, xq, threadIdx.x & 31);
}

/* The register version that also writes xn's scratch from the registers. n a multiple of 32. */
__global__ void __launch_bounds__(NORM_THREADS)
    post_ffn_registers_xq(const float *__restrict__ o, const float *__restrict__ w_post,
                          float *__restrict__ x, float scale, const float *__restrict__ w_next,
                          int64_t n, double eps, float *__restrict__ xn,
                          unsigned char *__restrict__ xq)
{
    __shared__ double sh[32];
    float wp[NORM_PER_THREAD], wn[NORM_PER_THREAD], ov[NORM_PER_THREAD], xv[NORM_PER_THREAD];
    pdl_trigger();
    norm_load(w_post, n, wp);
    norm_load(w_next, n, wn);
    pdl_wait();
    norm_load(o, n, ov);
    norm_load(x, n, xv);
    const double r = norm_rms_inv(ov, n, eps, sh);
#pragma unroll
    for (int k = 0; k < NORM_PER_THREAD; k++)
        xv[k] = (xv[k] + (float)((double)ov[k] * r) * wp[k]) * scale;
    const double r2 = norm_rms_inv(xv, n, eps, sh);
    const int lane = threadIdx.x & 31;
    const int64_t warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
    for (int k = 0; k < NORM_PER_THREAD; k++) {
        const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
        const float v = (float)((double)xv[k] * r2) * wn[k];
        if (i < n) {
            x[i] = xv[k];
            xn[i] = v;
        }
        const int64_t b = warp + (int64_t)k * warps; /* this warp's block k: elements 32b .. */
        if (32 * b < n)
            gem_tiles_xq_block(v, b, xq, lane);
    }
}

/* ---- check and timing ---------------------------------------------------------------------- */

typedef struct bufs {
    float *o, *wp, *wn, *x, *xn;
    unsigned char *xq;
} bufs;

/* version 0: the loops; 1: the registers; 2: the registers, then the scratch kernel; 3: the
 * registers writing the scratch */
static void launch(int v, const bufs *b)
{
    const int64_t n = N_EMBD;
    const float scale = 0.75f;
    const double eps = 1e-6;
    if (v == 0)
        cudaCheck(launch_pdl(post_ffn_loops, 1, NORM_THREADS, 0, b->o, b->wp, b->x, scale, b->wn,
                             n, eps, b->xn));
    else if (v == 3)
        cudaCheck(launch_pdl(post_ffn_registers_xq, 1, NORM_THREADS, 0, b->o, b->wp, b->x, scale,
                             b->wn, n, eps, b->xn, b->xq));
    else
        cudaCheck(launch_pdl(post_ffn_registers, 1, NORM_THREADS, 0, b->o, b->wp, b->x, scale,
                             b->wn, n, eps, b->xn));
    if (v == 2)
        cudaCheck(launch_pdl(xq_kernel, (unsigned)((n / 32 + 7) / 8), 256, 0, b->xn, n / 32,
                             b->xq));
}
static const char *const version_names[4] = {"loops", "registers", "regs,xqkern", "regs-writexq"};

/* seeded inputs: o and x with a few large values, the weights near 1 */
static void seed(bufs *b, float *h)
{
    const size_t bytes = (size_t)N_EMBD * 4;
    fill(h, N_EMBD, 1);
    for (int i = 0; i < N_EMBD; i += 97)
        h[i] *= 300.0f;
    cudaCheck(cudaMemcpy(b->o, h, bytes, cudaMemcpyHostToDevice));
    fill(h, N_EMBD, 2);
    cudaCheck(cudaMemcpy(b->x, h, bytes, cudaMemcpyHostToDevice));
    fill_uniform(h, N_EMBD, 3, 0.5f, 1.5f);
    cudaCheck(cudaMemcpy(b->wp, h, bytes, cudaMemcpyHostToDevice));
    fill_uniform(h, N_EMBD, 4, 0.5f, 1.5f);
    cudaCheck(cudaMemcpy(b->wn, h, bytes, cudaMemcpyHostToDevice));
}

int main(int argc, char **argv)
{
    int reps = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps R]\n", argv[0]);
            return 2;
        }
    }
    reps = reps < 10 ? 10 : reps;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs; hidden size %d, %d threads\n", prop.name,
           prop.multiProcessorCount, N_EMBD, NORM_THREADS);
    const size_t bytes = (size_t)N_EMBD * 4;
    const size_t xq_bytes = (size_t)N_EMBD / 128 * XQ_CHUNK;
    bufs b[4];
    for (int v = 0; v < 4; v++) {
        cudaCheck(cudaMalloc((void **)&b[v].o, bytes));
        cudaCheck(cudaMalloc((void **)&b[v].wp, bytes));
        cudaCheck(cudaMalloc((void **)&b[v].wn, bytes));
        cudaCheck(cudaMalloc((void **)&b[v].x, bytes));
        cudaCheck(cudaMalloc((void **)&b[v].xn, bytes));
        cudaCheck(cudaMalloc((void **)&b[v].xq, xq_bytes));
        cudaCheck(cudaMemset(b[v].xq, 0, xq_bytes));
    }
    float *h = (float *)malloc(bytes), *r0 = (float *)malloc(2 * bytes),
          *r1 = (float *)malloc(2 * bytes);
    unsigned char *q2 = (unsigned char *)malloc(xq_bytes), *q3 = (unsigned char *)malloc(xq_bytes);
    /* the check: the same inputs, one call each, x and xn (and the scratch of versions 2 and 3)
     * compared bit for bit */
    for (int v = 0; v < 4; v++) {
        seed(&b[v], h);
        launch(v, &b[v]);
    }
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(r0, b[0].x, bytes, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(r0 + N_EMBD, b[0].xn, bytes, cudaMemcpyDeviceToHost));
    int failed = 0;
    for (int v = 1; v < 4; v++) {
        cudaCheck(cudaMemcpy(r1, b[v].x, bytes, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(r1 + N_EMBD, b[v].xn, bytes, cudaMemcpyDeviceToHost));
        int differ = 0;
        for (int i = 0; i < 2 * N_EMBD; i++)
            differ += memcmp(&r0[i], &r1[i], 4) != 0;
        printf("check: %s against loops, x and xn: %d of %d values differ  %s\n",
               version_names[v], differ, 2 * N_EMBD, differ ? "FAILED" : "ok");
        failed |= differ != 0;
    }
    cudaCheck(cudaMemcpy(q2, b[2].xq, xq_bytes, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(q3, b[3].xq, xq_bytes, cudaMemcpyDeviceToHost));
    const int qdiff = memcmp(q2, q3, xq_bytes) != 0;
    printf("check: the scratch from the registers against the scratch kernel's: %s\n",
           qdiff ? "differs  FAILED" : "equal  ok");
    failed |= qdiff;
    free(q2);
    free(q3);
    if (failed)
        return 1;
    /* timing */
    cudaEvent_t *ev = (cudaEvent_t *)malloc((size_t)(reps + 1) * sizeof(cudaEvent_t));
    double *t = (double *)malloc((size_t)reps * sizeof(double));
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventCreate(&ev[r]));
    printf("%-12s %4s %10s %10s\n", "version", "rep", "chain_us", "median_us");
    const int order[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    for (int k = 0; k < 8; k++) {
        const int v = order[k];
        double chain = 0, med = 0;
        for (int pass = 0; pass < 3; pass++) { /* warm-up, chain, per call */
            wait_kernel<<<1, 1>>>(pass ? 5000000ull : 1000ull);
            cudaCheck(cudaGetLastError());
            if (pass == 1)
                cudaCheck(cudaEventRecord(ev[0], 0));
            for (int r = 0; r < reps; r++) {
                if (pass == 2)
                    cudaCheck(cudaEventRecord(ev[r], 0));
                launch(v, &b[v]);
            }
            if (pass)
                cudaCheck(cudaEventRecord(ev[reps], 0));
            cudaCheck(cudaDeviceSynchronize());
            if (pass == 1) {
                float ms = 0;
                cudaCheck(cudaEventElapsedTime(&ms, ev[0], ev[reps]));
                chain = 1e3 * ms / reps;
            } else if (pass == 2) {
                for (int r = 0; r < reps; r++) {
                    float ms = 0;
                    cudaCheck(cudaEventElapsedTime(&ms, ev[r], ev[r + 1]));
                    t[r] = 1e3 * ms;
                }
                qsort(t, (size_t)reps, sizeof(double), cmp_double);
                med = t[reps / 2];
            }
        }
        printf("%-12s %4d %10.2f %10.2f\n", version_names[v], k < 4 ? 1 : 2, chain, med);
    }
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventDestroy(ev[r]));
    for (int v = 0; v < 4; v++) {
        cudaFree(b[v].xq);
        cudaFree(b[v].o);
        cudaFree(b[v].wp);
        cudaFree(b[v].wn);
        cudaFree(b[v].x);
        cudaFree(b[v].xn);
    }
    free(ev);
    free(t);
    free(h);
    free(r0);
    free(r1);
    return 0;
}
