/*
 * gem CUDA queries: what the device is, what the CUDA runtime reports about
 * each compiled kernel of the baseline and fused routes, and the device's
 * copy and read bandwidth. Used by `gem resources` to write the resource
 * receipt. The attention routes themselves run through gem_engine
 * (gem/engine.h) with GEM_BACKEND_CUDA.
 *
 * In a build without CUDA, or on a machine without a GPU, every function
 * returns GEM_ERR_NO_DEVICE.
 *
 * The fused route's variant beyond P and tile is chosen per process by two
 * environment variables, read when a CUDA engine is created and printed in
 * its description (gem_engine_describe):
 *   GEM_CUDA_FUSED_STAGES  1 (default, the design's candidate: plain loads
 *                          staged into shared memory), 2 or 3 (cp.async, that
 *                          many tiles in flight), 0 (no staging: each thread
 *                          loads its own K/V pieces into registers one tile
 *                          ahead; with GEM_CUDA_FUSED_VSHARE=2, 4..7 only)
 *   GEM_CUDA_FUSED_VSHARE  0 (default: warp w accumulates O of head w), 1
 *                          (each thread accumulates two dims of all 8 heads)
 *                          or 2 (1, and each thread also forms the partial
 *                          Q.K dots of its two dims for all 8 heads; tiles 4
 *                          and 8 only) or 3 (each thread owns four dims of all
 *                          8 heads for Q.K and O, the two half-blocks take the
 *                          two halves of a tile, tiles arrive by bulk copies
 *                          into GEM_CUDA_FUSED_STAGES = 2 or 3 buffers; tiles
 *                          8 and 16 only) or 4 (3's ownership, fed as STAGES
 *                          0: 16-byte loads straight into registers one tile
 *                          ahead; tile 8 with GEM_CUDA_FUSED_STAGES=0 only) or
 *                          5 (4, with the K/V loads marked L1 no-allocate and
 *                          L2 evict-first) or 6 (5's first pass merged by the
 *                          one-round reducer of 3) or 7 (6, with Q of the 8
 *                          heads in shared memory so that the next tile's V
 *                          loads are issued right after this tile's dots;
 *                          same bits as 4..6)
 * Anything else is rejected with GEM_ERR_PARAM, never ignored.
 */
#ifndef GEM_CUDA_H
#define GEM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "gem/attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What cudaGetDeviceProperties reports about device 0. */
typedef struct gem_cuda_device_info {
    char name[256];
    int major, minor;                  /* compute capability */
    int sm_count;
    int warp_size;
    size_t shared_mem_per_block;       /* default per-block limit, bytes */
    size_t shared_mem_per_block_optin; /* opt-in per-block limit, bytes */
    size_t shared_mem_per_sm;          /* bytes */
    int regs_per_sm;
    size_t l2_bytes;
    size_t global_mem_bytes;
} gem_cuda_device_info;

/* Fills *out for device 0. GEM_ERR_NO_DEVICE (with a line on stderr saying
 * why) when there is no usable GPU or no CUDA in the build. */
gem_status gem_cuda_device_query(gem_cuda_device_info *out);

/* The fused variant: P, tile (4, 8, 16), stages (0..3), vshare (0..7). */
typedef struct gem_cuda_fused_config {
    int64_t partitions;
    int64_t tile;
    int64_t stages;
    int64_t vshare;
} gem_cuda_fused_config;

/* Reads GEM_CUDA_FUSED_STAGES / GEM_CUDA_FUSED_VSHARE into cfg->stages and
 * cfg->vshare (defaults 1 and 0). GEM_ERR_PARAM, with a line on stderr, for a
 * value that is set but not valid. Needs no GPU. */
gem_status gem_cuda_fused_config_from_env(gem_cuda_fused_config *cfg);

/* What the runtime reports about one kernel, and how the route launches it. */
typedef struct gem_cuda_kernel_info {
    char name[96];             /* the kernel's symbol */
    char role[32];             /* fused_first_pass, fused_reducer, baseline_score,
                                  baseline_normalize, baseline_value, baseline_reduce */
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

/* The six kernels (fused first pass and reducer for cfg, then the baseline's
 * score, normalize, value, reduce) at n_kv_heads KV heads (x8 query heads,
 * D512), `live` tokens and 16 baseline value partitions. out (cap entries),
 * *n = entries written (6). GEM_ERR_PARAM for a config without compiled
 * kernels, GEM_ERR_RANGE when cap < 6. */
gem_status gem_cuda_kernel_query(const gem_cuda_fused_config *cfg, int64_t n_kv_heads,
                                 int64_t live, gem_cuda_kernel_info *out, size_t cap,
                                 size_t *n);

/* Device-to-device copy bandwidth, counting bytes read plus bytes written:
 * median of `reps` cudaMemcpyAsync of `bytes` after one warm-up. */
gem_status gem_cuda_copy_bandwidth(size_t bytes, int64_t reps, double *bytes_per_second);

/* Read-only reduction bandwidth over `bytes` of device memory (the same kernel
 * as gem_engine_read_bandwidth on the CUDA backend), median of `reps`. */
gem_status gem_cuda_read_bandwidth(size_t bytes, int64_t reps, double *bytes_per_second);

#ifdef __cplusplus
}
#endif

#endif /* GEM_CUDA_H */
