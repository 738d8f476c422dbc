/*
What dev/cuda/norm_prefetch.cu and dev/cuda/layer_persistent.cu share: Gemma 4 31B's sliding-layer
products in Q4_0 tiles (o, gate, up, down, q, k, v), copies of a layer's matrices enough to pass
4 x the L2, and the library's post-attention norm kernel (gemma4_cuda.cu's post_attn_kernel, which
is internal to the library, copied here) with an optional prefetch of the next product's first
bytes into the L2 before its launch wait: with no bytes asked it is the library's kernel.
*/
#ifndef GEM_DEV_CUDA_SLIDING_CHAIN_H
#define GEM_DEV_CUDA_SLIDING_CHAIN_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#include "common.h"
#include "gem/gguf.h"
#include "model/cuda/model_cuda.h"
#include "cuda/gem_pdl.cuh"
#include "model/cuda/tiles_arith.cuh"

#define N_EMBD 5376
#define N_FF 21504
#define N_Q 8192
#define N_KV 4096
#define NORM_THREADS 1024
#define NORM_PER_THREAD 8

/* ---- the library's norm kernel (gemma4_cuda.cu's post_attn_kernel), with a prefetch -------- */

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

__device__ __forceinline__ void norm_store(const float (&v)[NORM_PER_THREAD],
                                           const float (&w)[NORM_PER_THREAD], double r, int64_t n,
                                           float *__restrict__ x_out, float *__restrict__ xn,
                                           unsigned char *__restrict__ xq)
{
    const int k = (int)blockIdx.x;
    float vk = 0.0f, wk = 0.0f;
#pragma unroll
    for (int kk = 0; kk < NORM_PER_THREAD; kk++)
        if (kk == k) {
            vk = v[kk];
            wk = w[kk];
        }
    const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
    const float y = (float)((double)vk * r) * wk;
    if (i < n) {
        x_out[i] = vk;
        xn[i] = y;
    }
    const int64_t blk = ((int64_t)k * blockDim.x + (threadIdx.x & ~31u)) / 32;
    if (32 * blk < n)
        gem_tiles_xq_block(y, blk, xq, (int)(threadIdx.x & 31));
}

/* The grid's threads ask the L2 for bytes [0, n0) of p0 and [0, n1) of p1 (16-byte multiples,
 * 16-byte aligned), each thread one equal share of each. */
__device__ __forceinline__ void l2_prefetch_share(const unsigned char *p, size_t n)
{
    if (n == 0)
        return;
    const size_t nt = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t per = ((n + nt - 1) / nt + 15) & ~(size_t)15;
    const size_t off = tid * per;
    if (off < n) {
        const size_t len = n - off < per ? n - off : per;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p + off),
                     "r"((unsigned)len)
                     : "memory");
    }
}

__global__ void __launch_bounds__(NORM_THREADS)
    norm_pf_kernel(const float *__restrict__ o, const float *__restrict__ w_post,
                   const float *__restrict__ x_in, float *__restrict__ x_out,
                   const float *__restrict__ w_ffn, int64_t n, double eps, float *__restrict__ xn,
                   unsigned char *__restrict__ xq, const unsigned char *pf0, size_t pf0_bytes,
                   const unsigned char *pf1, size_t pf1_bytes)
{
    __shared__ double sh[32];
    float wp[NORM_PER_THREAD], wf[NORM_PER_THREAD], ov[NORM_PER_THREAD], xv[NORM_PER_THREAD];
    pdl_trigger();
    l2_prefetch_share(pf0, pf0_bytes); /* weights: no kernel of the chain writes them */
    l2_prefetch_share(pf1, pf1_bytes);
    norm_load(w_post, n, wp);
    norm_load(w_ffn, n, wf);
    pdl_wait();
    norm_load(o, n, ov);
    norm_load(x_in, n, xv);
    const double r = norm_rms_inv(ov, n, eps, sh);
#pragma unroll
    for (int k = 0; k < NORM_PER_THREAD; k++)
        xv[k] += (float)((double)ov[k] * r) * wp[k];
    norm_store(xv, wf, norm_rms_inv(xv, n, eps, sh), n, x_out, xn, xq);
}

/* ---- a layer's matrices ------------------------------------------------------------------- */

enum { M_O, M_GATE, M_UP, M_DOWN, M_Q, M_K, M_V, M_COUNT };
static const int64_t kRows[M_COUNT] = {N_EMBD, N_FF, N_FF, N_EMBD, N_Q, N_KV, N_KV};
static const int64_t kCols[M_COUNT] = {N_Q, N_EMBD, N_EMBD, N_FF, N_EMBD, N_EMBD, N_EMBD};

/* Bytes of one layer's matrices. */
static size_t sliding_layer_bytes(void)
{
    size_t bytes = 0;
    for (int i = 0; i < M_COUNT; i++) {
        size_t rb = 0;
        GEM_TRY(gem_gguf_row_bytes(GEM_GGUF_Q4_0, kCols[i], &rb));
        bytes += (size_t)kRows[i] * rb;
    }
    return bytes;
}

/* Copies of a layer's matrices, enough to pass 4 x the L2 (l2_bytes), at most max_copies when
 * max_copies > 0: seeded random Q4_0 rows (copy c, matrix i: seed 11 + 7 c + i), tiled. */
static gem_dmatrix (*sliding_layer_copies(int l2_bytes, int max_copies, int *ncopies))[M_COUNT]
{
    int n = (int)(((size_t)4 * (size_t)l2_bytes) / sliding_layer_bytes() + 2);
    if (max_copies > 0 && n > max_copies)
        n = max_copies;
    gem_dmatrix(*m)[M_COUNT] = (gem_dmatrix(*)[M_COUNT])calloc((size_t)n, sizeof *m);
    if (!m) {
        fprintf(stderr, "out of host memory\n");
        exit(EXIT_FAILURE);
    }
    void *tmp;
    cudaCheck(cudaMalloc(&tmp, (size_t)N_FF * 21504)); /* >= the largest matrix's bytes */
    for (int c = 0; c < n; c++)
        for (int i = 0; i < M_COUNT; i++) {
            size_t rb = 0;
            GEM_TRY(gem_gguf_row_bytes(GEM_GGUF_Q4_0, kCols[i], &rb));
            gem_dmatrix *w = &m[c][i];
            *w = (gem_dmatrix){NULL, GEM_GGUF_Q4_0, kRows[i], kCols[i], rb, GEM_DLAYOUT_ROWS};
            cudaCheck(cudaMalloc(&w->data, (size_t)kRows[i] * rb));
            gem_dmatrix r = *w;
            r.data = tmp;
            GEM_TRY(gem_dmatrix_fill_random(&r, 11 + 7 * (uint64_t)c + (uint64_t)i,
                                            1.0f / sqrtf((float)kCols[i]), NULL));
            GEM_TRY(gem_dmatrix_tile(w, tmp, NULL));
            cudaCheck(cudaDeviceSynchronize());
        }
    cudaCheck(cudaFree(tmp));
    *ncopies = n;
    return m;
}

#endif /* GEM_DEV_CUDA_SLIDING_CHAIN_H */
