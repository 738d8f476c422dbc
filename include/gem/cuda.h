/*
 * gem CUDA queries: what the device is and what the CUDA runtime reports about
 * each kernel the library ships (the fused route's first pass and reducer, the
 * baseline's four stages). `gem resources` writes them into the resource
 * receipt. The routes themselves run through gem/decode.h.
 *
 * In a build without CUDA, or on a machine without a usable GPU, every
 * function returns GEM_ERR_NO_DEVICE (with one line on stderr saying why).
 */
#ifndef GEM_CUDA_H
#define GEM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "gem/attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the runtime reports about the current device. */
typedef struct gem_cuda_device_info {
    char name[256];
    int ordinal;                       /* cudaGetDevice */
    int major, minor;                  /* compute capability */
    int sm_count;
    int warp_size;
    size_t shared_mem_per_block;       /* default per-block limit, bytes */
    size_t shared_mem_per_block_optin; /* opt-in per-block limit, bytes */
    size_t shared_mem_per_sm;          /* bytes */
    int regs_per_sm;
    size_t l2_bytes;
    size_t global_mem_bytes;
    int memory_clock_khz;              /* cudaDevAttrMemoryClockRate */
    int memory_bus_bits;               /* cudaDevAttrGlobalMemoryBusWidth */
    double nominal_bytes_per_second;   /* 2 (double data rate) * clock * bus width / 8 */
} gem_cuda_device_info;

/* Fills *out for the current device. GEM_ERR_NO_DEVICE (with a line on stderr
 * saying why) when there is no usable GPU or no CUDA in the build. */
gem_status gem_cuda_device_query(gem_cuda_device_info *out);

/* What the runtime reports about one kernel, and how the route launches it. */
typedef struct gem_cuda_kernel_info {
    char name[96];             /* the kernel's extern "C" symbol */
    char role[32];             /* fused_first_pass[_bf16|_f16][_strided],
                                  fused_first_pass_k_from_v[_bf16|_f16],
                                  fused_first_pass_d256[_bf16|_f16], fused_reducer,
                                  baseline_score, baseline_normalize, baseline_value,
                                  baseline_reduce, fused_first_pass_kfv_bf16_long,
                                  fused_first_pass_kfv_f32_long */
    int max_threads_per_block; /* cudaFuncAttributes.maxThreadsPerBlock */
    size_t static_shared_bytes;
    size_t dynamic_shared_bytes; /* launched with */
    int registers;               /* per thread */
    size_t local_bytes;          /* local memory per thread (stack frame, spills) */
    int64_t threads_dispatched;  /* per block, as launched */
    int64_t warps_dispatched;    /* per block */
    int warp_size;
    int max_active_blocks_per_sm; /* cudaOccupancyMaxActiveBlocksPerMultiprocessor */
    int64_t grid_blocks;          /* blocks per launch at the given geometry */
} gem_cuda_kernel_info;

/* Kernels the library ships (gem_cuda_kernel_query's entries): the fused route's twelve first
 * passes and its reducer, the baseline's four stages (F32), then the fused route's first passes
 * for BF16 and F32 K-from-V views of long lengths, then its two FP8 E4M3 first passes (D512,
 * dense rows then any strides), then the baseline's score and value for BF16, F16 and FP8 E4M3
 * caches. */
#define GEM_CUDA_KERNELS 27
#define GEM_CUDA_FIRST_PASSES 12
#define GEM_CUDA_BASELINE_KERNELS 4
#define GEM_CUDA_BASELINE_TYPED_KERNELS 6

/* The shipped kernels, in this order: the fused route's first passes at `partitions` for F32,
 * BF16 and F16 K/V at D512 (eight query heads per KV head), each for dense rows (head-major,
 * token stride 512) and then for any other strides (roles fused_first_pass,
 * fused_first_pass_strided, fused_first_pass_bf16, ..._bf16_strided, ..._f16, ..._f16_strided),
 * the first passes that rebuild K from V for F32, BF16 and F16 V (fused_first_pass_k_from_v,
 * ..._k_from_v_bf16, ..._k_from_v_f16), the D256 first passes (two query heads per KV head,
 * Gemma 4's sliding-window layers; any strides) for F32, BF16 and F16 K/V
 * (fused_first_pass_d256, ..._d256_bf16, ..._d256_f16), its reducer (every head dimension),
 * then the baseline's score, normalize, value and reduce at `baseline_partitions` value
 * partitions, then the first passes that rebuild K from a BF16 V cache from 32,768 rows on
 * (fused_first_pass_kfv_bf16_long: 128-thread blocks, two an SM) and from an F32 V cache from
 * 20,480 rows on, 12,288 at one block an SM (fused_first_pass_kfv_f32_long: 320-thread blocks,
 * one an SM), then the FP8 E4M3 first passes at D512 (fused_first_pass_fp8, ..._fp8_strided:
 * tensor cores, the codes staged as FP8 in 67,584 bytes of dynamic shared memory), then the
 * baseline's score for BF16, F16 and FP8 E4M3 caches (baseline_score_bf16, ..._f16, ..._fp8)
 * and its value stage for the same three (baseline_value_bf16, ...), which share normalize and
 * reduce with F32; grids for
 * n_kv_heads KV heads and `live` tokens (each first pass: n_kv_heads x partitions blocks, but
 * the long F32 K-from-V pass from 12,288 rows at most one wave, SMs / n_kv_heads partitions, as
 * gem_decode_config_for_view gives such views; the reducer and the baseline at D512, x8 query
 * heads).
 * out (cap entries), *n = entries written (GEM_CUDA_KERNELS). GEM_ERR_PARAM for counts out of
 * range, GEM_ERR_RANGE when cap < GEM_CUDA_KERNELS. */
gem_status gem_cuda_kernel_query(int64_t n_kv_heads, int64_t live, int64_t partitions,
                                 int64_t baseline_partitions, gem_cuda_kernel_info *out,
                                 size_t cap, size_t *n);

#ifdef __cplusplus
}
#endif

#endif /* GEM_CUDA_H */
