/*
 * The greedy token on the device (model_cuda.h's gem_dargmax): the index of the largest value
 * of a vector, the lowest index among equal ones, in two programmatic-dependent launches.
 *
 * "Better" is a total order on the (value, index) pairs whose value is a number: a larger value,
 * or an equal one at a lower index (-0 equals +0). Its maximum is the same pair whatever the
 * order of the comparisons, so the grid-stride scans, the warp shuffles and the blocks' partials
 * give one answer on every call without atomics. A NaN never compares better, so it never wins;
 * when no value is a number the answer is 0 (the decoder reports non-finite logits by its flag
 * before anyone reads the token).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "model_cuda.h"
#include "cuda/gem_pdl.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 256; /* the first launch's blocks: one partial each */
constexpr int64_t kPerThread = 8;

struct Best {
    float v;
    int32_t i; /* INT32_MAX: nothing yet */
};

__device__ __forceinline__ void take(Best &b, float v, int32_t i)
{
    if (v > b.v || (v == b.v && i < b.i))
        b = Best{v, i};
}

/* b = the best of the block's threads' b, in every thread of warp 0 (sh: kThreads / 32). */
__device__ __forceinline__ Best block_best(Best b, Best *sh)
{
    for (int o = 16; o > 0; o >>= 1)
        take(b, __shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        sh[warp] = b;
    __syncthreads();
    if (warp == 0) {
        b = lane < kThreads / 32 ? sh[lane] : Best{-INFINITY, INT32_MAX};
        for (int o = 16; o > 0; o >>= 1)
            take(b, __shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o));
    }
    return b;
}

/* partial[blockIdx.x] = the best of the block's grid-stride share of x (n). */
__global__ void __launch_bounds__(kThreads) argmax_partial_kernel(const float *__restrict__ x,
                                                                  int64_t n, Best *partial)
{
    __shared__ Best sh[kThreads / 32];
    pdl_trigger();
    pdl_wait(); /* x is the previous kernel's output */
    Best b{-INFINITY, INT32_MAX};
    for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * kThreads)
        take(b, x[i], (int32_t)i);
    b = block_best(b, sh);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = b;
}

/* *idx = the best of the nb partials (0 when none holds a number). One block. */
__global__ void __launch_bounds__(kThreads) argmax_final_kernel(const Best *__restrict__ partial,
                                                                int nb, int32_t *idx)
{
    __shared__ Best sh[kThreads / 32];
    pdl_trigger();
    pdl_wait(); /* the partials */
    Best b{-INFINITY, INT32_MAX};
    for (int k = threadIdx.x; k < nb; k += kThreads)
        take(b, partial[k].v, partial[k].i);
    b = block_best(b, sh);
    if (threadIdx.x == 0)
        *idx = b.i == INT32_MAX ? 0 : b.i;
}

int blocks_for(int64_t n)
{
    const int64_t per_block = (int64_t)kThreads * kPerThread;
    const int64_t nb = (n + per_block - 1) / per_block;
    return nb < 1 ? 1 : (nb > kMaxBlocks ? kMaxBlocks : (int)nb);
}

} /* namespace */

extern "C" {

size_t gem_dargmax_scratch_bytes(int64_t n)
{
    return n >= 1 && n <= INT32_MAX ? (size_t)blocks_for(n) * sizeof(Best) : 0;
}

gem_status gem_dargmax(const float *x, int64_t n, int32_t *idx, void *scratch, void *stream)
{
    if (!x || !idx || !scratch)
        return GEM_ERR_NULL;
    if (n < 1 || n > INT32_MAX)
        return GEM_ERR_SHAPE;
    if ((reinterpret_cast<uintptr_t>(x) & 3u) || (reinterpret_cast<uintptr_t>(idx) & 3u) ||
        (reinterpret_cast<uintptr_t>(scratch) & 7u))
        return GEM_ERR_ALIGN;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        (void)cudaGetLastError();
        return GEM_ERR_NO_DEVICE;
    }
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const int nb = blocks_for(n);
    Best *partial = static_cast<Best *>(scratch);
    if (launch_pdl(argmax_partial_kernel, (unsigned)nb, kThreads, s, x, n, partial) !=
            cudaSuccess ||
        launch_pdl(argmax_final_kernel, 1, kThreads, s, (const Best *)partial, nb, idx) !=
            cudaSuccess) {
        (void)cudaGetLastError();
        return GEM_ERR_DEVICE;
    }
    return GEM_OK;
}

} /* extern "C" */
