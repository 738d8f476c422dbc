/*
 * Internal to the CUDA backend: the error macro, the fixed fast-path shape,
 * the launch helpers of the two routes and the kernel table the resource
 * receipt reads. Included by the .cu files of src/cuda/ only.
 *
 * The kernels are CUDA C: plain functions and structs, extern "C" names for
 * every __global__ symbol (so the names in the resource receipt are the
 * symbols the binary holds), and integer template parameters only where a
 * tile size or pipeline depth must be a compile-time constant.
 */
#ifndef GEM_CUDA_INTERNAL_H
#define GEM_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime.h>

extern "C" {
#include "gem/attn.h"
#include "gem/cuda.h"
}

/* The shapes the kernels specialise. Gemma 4's full-attention layers: DK = DV = 512, eight
 * query heads per KV head. Its sliding-window layers: DK = DV = 256, two query heads per KV
 * head (attn_fused_d256_body.cuh). */
#define GEM_CU_D 512
#define GEM_CU_GROUP 8
#define GEM_CU_D256 256
#define GEM_CU_D256_GROUP 2
#define GEM_CU_THREADS 256 /* every kernel of both routes runs 256-thread blocks */
/* The element types of the kernel tables by type: gem_dtype's first three, F32, BF16 and F16
 * (FP8 E4M3 has the two D512 first passes of the fused route alone, gem_cu_fused_kernels) */
#define GEM_CU_DTYPES 3
/* FP8 E4M3 K and V: the heads' scales travel in the launch (gem_cu_fp8_scales), so a view
 * of FP8 rows has at most this many KV heads on CUDA */
#define GEM_CU_FP8_MAX_KV_HEADS 64
#define GEM_CU_ROW_F4 (GEM_CU_D / 4) /* float4 per 512-float row: 128 */

/* Baseline geometry (the design's selector 19). */
#define GEM_CU_VALUE_DIM_TILE 32   /* value kernel: output dims per block ("dim32") */
#define GEM_CU_VALUE_TYPED_DIM_TILE 64 /* the BF16 / F16 / FP8 value kernels: two pieces a lane */
#define GEM_CU_VALUE_CHUNK 256     /* value kernel: tokens of weights staged at a time */
#define GEM_CU_SCORE_TOKENS 256    /* score kernel: tokens per block */
#define GEM_CU_SCORE_ROWS 4        /* score kernel: tokens a warp holds in registers */

/* Reports a failed CUDA call on stderr: call text, file, line, device and the
 * runtime's message. Returns the gem status the caller should answer. */
gem_status gem_cuda_fail(cudaError_t err, const char *call, const char *file, int line);

/* Checks one CUDA runtime call (or, after a launch, cudaGetLastError()) and
 * returns GEM_ERR_NOMEM / GEM_ERR_DEVICE from the enclosing function on
 * failure. Only for functions that return gem_status. */
#define GEM_CUDA_CHECK(call)                                                                   \
    do {                                                                                       \
        cudaError_t gem_cu_err_ = (call);                                                      \
        if (gem_cu_err_ != cudaSuccess)                                                        \
            return gem_cuda_fail(gem_cu_err_, #call, __FILE__, __LINE__);                     \
    } while (0)

/* One kernel of a route, as launched for a geometry. */
typedef struct gem_cu_kernel_ref {
    const void *func;       /* the __global__ function */
    const char *name;       /* its symbol */
    const char *role;       /* fused_first_pass, fused_reducer, baseline_score, ... */
    size_t dynamic_shared;  /* bytes it is launched with */
    int threads;            /* threads per block it is launched with */
} gem_cu_kernel_ref;

/* K rebuilt from V (gem_k_from_v) as the CUDA first pass takes it: Gemma 4's full layers,
 * pairs (j, j + 256) for j < 64 (zero frequencies past the view's n_pairs: cos 1, sin 0,
 * an exact identity); row t at position pos0 + t. Passed by value (__grid_constant__). */
#define GEM_CU_ROPE_PAIRS 64
#define GEM_CU_ROPE_HALF 256
/* An F32 V cache rebuilding K takes the long pass, gem_fused_first_pass_k_from_v_f32_long (one
 * block an SM), from GEM_KFV_PAIR_MIN_LIVE rows at any partition count, and from
 * GEM_KFV_PAIR_MIN_LIVE_ONE_WAVE rows when its blocks are one wave (at most one an SM, as the
 * view's default gives: gem_decode_config_for_view); attn_fused.cu says why. */
#define GEM_KFV_PAIR_MIN_LIVE 20480
#define GEM_KFV_PAIR_MIN_LIVE_ONE_WAVE 12288
static inline int gem_cu_kfv_f32_long(int64_t live, int64_t partitions, int64_t n_kv_heads,
                                      int64_t sm_count)
{
    return live >= GEM_KFV_PAIR_MIN_LIVE ||
           (live >= GEM_KFV_PAIR_MIN_LIVE_ONE_WAVE && partitions * n_kv_heads <= sm_count);
}
typedef struct gem_cu_rope {
    double inv_freq[GEM_CU_ROPE_PAIRS];
    int64_t pos0;
} gem_cu_rope;

/* Device buffers of one fused run, at head_dim 512 (group 8) or 256 (group 2). */
typedef struct gem_cu_fused_args {
    const float *q;  /* (n_q_heads, head_dim) */
    const void *k;   /* row (g, t) at element 4*(g*k_hs4 + t*k_ts4), of type dtype */
    const void *v;   /* row (g, t) at element 4*(g*v_hs4 + t*v_ts4) */
    int64_t k_hs4, k_ts4, v_hs4, v_ts4; /* view strides in pieces of 4 elements */
    gem_dtype dtype; /* of K and V */
    const float *k_weight; /* (512) K rebuilt from V (k is NULL; head_dim 512 only), else NULL */
    gem_cu_rope rope;      /* with k_weight: the rotation */
    float *part_m;   /* (P, n_q_heads) */
    float *part_s;   /* (P, n_q_heads) */
    float *part_o;   /* (P, n_q_heads, head_dim) */
    float *out;      /* (n_q_heads, head_dim): the output, or with state_ms the state's o */
    float *state_ms; /* NULL, or gem_decode_state's m (n_q_heads) then s (n_q_heads): the
                        reducer leaves out the division */
    int64_t head_dim; /* dk = dv: GEM_CU_D (n_q_heads = 8 n_kv_heads) or GEM_CU_D256 (2 n_kv_heads) */
    int64_t n_kv_heads;
    int64_t live;
    int64_t partitions;
    float scale;
    int64_t sm_count; /* the device's SMs: the long F32 K-from-V pass's choice */
    const float *k_scale, *v_scale; /* dtype FP8 E4M3: (n_kv_heads) host, the heads' scales;
                                       else NULL */
} gem_cu_fused_args;

/* An FP8 first pass's per-head factors, in the launch: score[g] = (float)(scale * k_scale[g])
 * (the CPU routes' rule), v[g] = v_scale[g]; heads past n_kv_heads unused. */
typedef struct gem_cu_fp8_scales {
    float score[GEM_CU_FP8_MAX_KV_HEADS];
    float v[GEM_CU_FP8_MAX_KV_HEADS];
} gem_cu_fp8_scales;

/* Device buffers of one baseline run. */
typedef struct gem_cu_baseline_args {
    const float *q;   /* (n_q_heads, 512) */
    const void *k;    /* row (g, t) at element 4*(g*k_hs4 + t*k_ts4) of type dtype */
    const void *v;    /* row (g, t) at element 4*(g*v_hs4 + t*v_ts4) of type dtype */
    gem_dtype dtype;  /* of K and V: F32, BF16, F16 or FP8 E4M3 */
    const float *k_scale, *v_scale; /* dtype FP8 E4M3: (n_kv_heads) host, the heads' scales
                                       (at most GEM_CU_FP8_MAX_KV_HEADS heads); else NULL */
    int64_t k_hs4, k_ts4, v_hs4, v_ts4; /* view strides in pieces of four elements */
    float *scores;    /* (n_q_heads, live): scores, then normalized weights in place */
    float *partials;  /* (value_partitions, n_q_heads, 512) */
    float *out;       /* (n_q_heads, 512) */
    int64_t n_kv_heads;
    int64_t live;
    int64_t value_partitions; /* 16 for the design */
    float scale;
    cudaEvent_t *stage_events; /* NULL, or 5 events recorded before score and after each of
                                  the four stages (the stage clock) */
} gem_cu_baseline_args;

/* The fused route's kernels: first (GEM_CUDA_FIRST_PASSES = 4 * GEM_CU_DTYPES): the D512
 * first passes by element type in gem_dtype order, each for dense rows (token stride 512
 * elements) then for any other strides, then the three K-from-V first passes (any strides) in
 * gem_dtype order, then the three D256 / group-2 first passes (any strides) in gem_dtype
 * order; reducer (1, every head dimension); kfv_long (2): the BF16 and the F32 K-from-V first
 * passes of long lengths (gem_cu_fused_launch picks them from GEM_KFV_WARP_MIN_LIVE and
 * GEM_KFV_PAIR_MIN_LIVE rows on); fp8 (2): the D512 FP8 E4M3 first passes, dense rows then
 * any other strides. */
void gem_cu_fused_kernels(gem_cu_kernel_ref *first, gem_cu_kernel_ref *reducer,
                          gem_cu_kernel_ref *kfv_long, gem_cu_kernel_ref *fp8);
/* Raises the dynamic shared memory limit of the BF16 and F16 first passes (launched with
 * 66,560 bytes), of the FP8 ones (67,584), of their K-from-V passes (33,280) and of the long BF16 and F32 K-from-V
 * passes (109,952 and 221,696) on the current device; done once per device. Called before their launch and
 * before their occupancy is asked for. */
cudaError_t gem_cu_fused_allow_staged_shared(void);
/* Launches first pass + reducer (a programmatic dependent launch) on `stream`: the D512 or
 * the D256 first pass by a->head_dim. GEM_ERR_PARAM for a geometry the grids cannot hold. */
gem_status gem_cu_fused_launch(const gem_cu_fused_args *a, cudaStream_t stream);
/* Grid of the first pass / reducer for a geometry (for the receipt). */
int64_t gem_cu_fused_first_blocks(int64_t n_kv_heads, int64_t partitions);
int64_t gem_cu_fused_reducer_blocks(int64_t n_q_heads);

/* The fused route for the other small head shapes (attn_general.cu): dk = dv in {32, 64,
 * 128, 256}, one to eight query heads per KV head, K and V of one type (the alignment rules
 * of the other CUDA kernels apply).
 * The workspace has the fused route's layout (part_m, part_s, part_o contiguous). */
int gem_cu_general_supports(const gem_decode_shape *s, gem_dtype kt, gem_dtype vt);
/* Its default partitions at `live` rows: about 64 rows each, 1..128, non-decreasing. */
int64_t gem_cu_general_partitions(int64_t live);
/* First pass and reducer on `stream`; state_ms as in gem_cu_fused_args. */
gem_status gem_cu_general_launch(const gem_decode_shape *s, const float *q, const gem_kv_view *kv,
                                 float *out, float *state_ms, void *ws, int64_t partitions,
                                 cudaStream_t stream);

/* gem_decode_merge's kernels on `stream` (the current device): n states (n, n_q * (d + 2))
 * merged into out (n_q, d) by a reducer's arithmetic, the fused one for d a multiple of 256
 * (gem_cu_fused_merge), the general one for any d (gem_cu_general_merge). */
gem_status gem_cu_fused_merge(const float *states, int64_t n, int64_t n_q, int64_t d, float *out,
                              cudaStream_t stream);
gem_status gem_cu_general_merge(const float *states, int64_t n, int64_t n_q, int64_t d,
                                float *out, cudaStream_t stream);

/* The baseline's four kernels in stage order (the F32 score and value). */
void gem_cu_baseline_kernels(gem_cu_kernel_ref out[4]);
/* The baseline's score and value kernels of the other cache types: score for BF16, F16 and
 * FP8 E4M3, then value for the same three (normalize and reduce are the F32 route's). */
void gem_cu_baseline_typed_kernels(gem_cu_kernel_ref out[GEM_CUDA_BASELINE_TYPED_KERNELS]);
/* Launches score, normalize, value and reduce on `stream`, score and value for a->dtype.
 * GEM_ERR_PARAM for a geometry the grids cannot hold or a type the kernels do not read. */
gem_status gem_cu_baseline_launch(const gem_cu_baseline_args *a, cudaStream_t stream);
/* Grids of the four stages, in the same order. */
void gem_cu_baseline_blocks(int64_t n_kv_heads, int64_t live, int64_t value_partitions,
                            int64_t blocks[4]);
/* Grids of the typed kernels, in gem_cu_baseline_typed_kernels' order. */
void gem_cu_baseline_typed_blocks(int64_t n_kv_heads, int64_t live, int64_t value_partitions,
                                  int64_t blocks[GEM_CUDA_BASELINE_TYPED_KERNELS]);

/* Device `*ordinal` (the current one) if it runs sm_90 code, with its properties;
 * GEM_ERR_NO_DEVICE otherwise, with one line on stderr saying why. */
gem_status gem_cu_open_device(int *ordinal, cudaDeviceProp *prop);

/* GEM_OK when p is device memory of `device` (any device when device < 0) or managed
 * memory; GEM_ERR_MEMSPACE for host memory (registered or not) or another device. */
gem_status gem_cu_check_pointer(const void *p, int device);

#endif /* GEM_CUDA_INTERNAL_H */
