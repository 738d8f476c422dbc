/*
 * The CUDA backend's answers that do not depend on the data.
 *
 * Without a GPU (or in a build without CUDA) every CUDA entry must answer
 * GEM_ERR_NO_DEVICE: decode context, cache helper, engine, device and kernel
 * queries; the test says that the GPU part was not run. With a GPU: the device
 * query (sm_90, a nominal bandwidth), the shipped kernels as the resource
 * receipt describes them (names and roles in order, 256-thread blocks, no local
 * memory, the first passes resident twice per SM within 32 KiB of shared memory,
 * no dynamic shared memory), the tuned default (fused, tile 8, partitions a
 * multiple of 32 that never shrink as live grows), and explicit configs the
 * kernels do not take refused.
 */
#include <stdio.h>
#include <string.h>

#include "gem/cuda.h"
#include "gem/decode.h"
#include "gem/engine.h"
#include "tcheck.h"

static void check_no_device(void)
{
    gem_decode_ctx *c = (gem_decode_ctx *)1;
    TCHECK_STATUS(gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &c), GEM_ERR_NO_DEVICE);
    TCHECK(c == NULL);
    gem_engine *e = (gem_engine *)1;
    TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CUDA, 0, &e), GEM_ERR_NO_DEVICE);
    TCHECK(e == NULL);
    const gem_kv_cache_desc d = {GEM_BACKEND_CUDA, 4, 512, 512, 16, GEM_DTYPE_F32, GEM_DTYPE_F32, 0};
    gem_kv_cache *kc = (gem_kv_cache *)1;
    TCHECK_STATUS(gem_kv_cache_create(&d, &kc), GEM_ERR_NO_DEVICE);
    TCHECK(kc == NULL);
    gem_cuda_device_info dev;
    TCHECK_STATUS(gem_cuda_device_query(&dev), GEM_ERR_NO_DEVICE);
    gem_cuda_kernel_info ks[GEM_CUDA_KERNELS];
    size_t n = 99;
    TCHECK_STATUS(gem_cuda_kernel_query(4, 8192, 64, 16, ks, GEM_CUDA_KERNELS, &n),
                  GEM_ERR_NO_DEVICE);
    TCHECK(n == 0);
}

static void check_device(void)
{
    gem_cuda_device_info dev;
    TCHECK_STATUS(gem_cuda_device_query(&dev), GEM_OK);
    TCHECK(dev.major == 9 && dev.warp_size == 32 && dev.sm_count > 0);
    TCHECK(dev.nominal_bytes_per_second > 1e11);

    gem_cuda_kernel_info ks[GEM_CUDA_KERNELS];
    size_t n = 0;
    const size_t cap = GEM_CUDA_KERNELS;
    TCHECK_STATUS(gem_cuda_kernel_query(4, 131072, 64, 16, ks, cap - 1, &n), GEM_ERR_RANGE);
    TCHECK_STATUS(gem_cuda_kernel_query(0, 131072, 64, 16, ks, cap, &n), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_cuda_kernel_query(4, 131072, 64, 16, ks, cap, &n), GEM_OK);
    TCHECK_EQ_I64(n, GEM_CUDA_KERNELS);
    static const char *names[GEM_CUDA_KERNELS] = {
        "gem_fused_first_pass",      "gem_fused_first_pass_strided",
        "gem_fused_first_pass_bf16", "gem_fused_first_pass_bf16_strided",
        "gem_fused_first_pass_f16",  "gem_fused_first_pass_f16_strided",
        "gem_fused_first_pass_k_from_v", "gem_fused_first_pass_k_from_v_bf16",
        "gem_fused_first_pass_k_from_v_f16",
        "gem_fused_reducer",         "gem_baseline_score",
        "gem_baseline_normalize",    "gem_baseline_value",
        "gem_baseline_reduce"};
    static const char *roles[GEM_CUDA_KERNELS] = {
        "fused_first_pass",      "fused_first_pass_strided", "fused_first_pass_bf16",
        "fused_first_pass_bf16_strided", "fused_first_pass_f16", "fused_first_pass_f16_strided",
        "fused_first_pass_k_from_v", "fused_first_pass_k_from_v_bf16",
        "fused_first_pass_k_from_v_f16",
        "fused_reducer",         "baseline_score",           "baseline_normalize",
        "baseline_value",        "baseline_reduce"};
    for (int i = 0; i < GEM_CUDA_KERNELS; i++) {
        TCHECK(!strcmp(ks[i].name, names[i]) && !strcmp(ks[i].role, roles[i]));
        TCHECK_EQ_I64(ks[i].local_bytes, 0);
        TCHECK(ks[i].max_active_blocks_per_sm >= 1);
        TCHECK_EQ_I64(ks[i].dynamic_shared_bytes, 0);
    }
    for (int i = 0; i < GEM_CUDA_FIRST_PASSES; i++) {
        TCHECK(ks[i].threads_dispatched == 256 && ks[i].warps_dispatched == 8);
        TCHECK(ks[i].static_shared_bytes <= 32768);
        TCHECK(ks[i].max_active_blocks_per_sm >= 2);
        TCHECK_EQ_I64(ks[i].grid_blocks, 4 * 64);
    }
    TCHECK_EQ_I64(ks[GEM_CUDA_FIRST_PASSES].grid_blocks, 32 * 2);

    gem_decode_ctx *c = NULL;
    TCHECK_STATUS(gem_decode_ctx_create(GEM_BACKEND_CUDA, 1, &c), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &c), GEM_OK);
    if (!c)
        return;
    TCHECK_EQ_I64(gem_decode_ctx_threads(c), 1);
    TCHECK(gem_decode_ctx_device(c) == dev.ordinal);
    const gem_decode_shape prod = {32, 4, 512, 512, 1.0f};
    int64_t prev = 0;
    const int64_t lives[] = {1, 13, 8192, 65536, 131072, 1 << 20};
    for (size_t i = 0; i < sizeof lives / sizeof lives[0]; i++) {
        gem_decode_config cfg;
        TCHECK_STATUS(gem_decode_config_default(c, &prod, lives[i], &cfg), GEM_OK);
        TCHECK(cfg.route == GEM_ROUTE_FUSED && cfg.tile == 8 && cfg.partitions % 32 == 0);
        TCHECK(cfg.partitions >= prev);
        prev = cfg.partitions;
    }
    const gem_decode_config t4 = {GEM_ROUTE_FUSED, 32, 4};
    size_t bytes = 0;
    TCHECK_STATUS(gem_decode_workspace_bytes(c, &prod, 8192, &t4, &bytes), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_decode_supports(c, &prod, GEM_DTYPE_F32, GEM_DTYPE_F32), GEM_OK);
    TCHECK_STATUS(gem_decode_supports(c, &prod, GEM_DTYPE_BF16, GEM_DTYPE_BF16), GEM_OK);
    TCHECK_STATUS(gem_decode_supports(c, &prod, GEM_DTYPE_F16, GEM_DTYPE_F16), GEM_OK);
    TCHECK_STATUS(gem_decode_supports(c, &prod, GEM_DTYPE_BF16, GEM_DTYPE_F32),
                  GEM_ERR_UNSUPPORTED); /* one element type for K and V on CUDA */
    TCHECK_STATUS(gem_decode_supports_route(c, &prod, GEM_DTYPE_BF16, GEM_DTYPE_BF16,
                                            GEM_ROUTE_BASELINE),
                  GEM_ERR_UNSUPPORTED); /* the baseline's kernels read F32 */
    TCHECK_STATUS(gem_decode_supports_route(c, &prod, GEM_DTYPE_F32, GEM_DTYPE_F32,
                                            GEM_ROUTE_BASELINE),
                  GEM_OK);
    /* K rebuilt from V: Gemma 4's rotation (half 256, at most 64 pairs), every V type */
    gem_k_from_v kfv = {NULL, NULL, 64, 256, 0};
    for (int t = 0; t < GEM_DTYPE_COUNT; t++)
        TCHECK_STATUS(gem_decode_supports_k_from_v(c, &prod, (gem_dtype)t, &kfv), GEM_OK);
    kfv.n_pairs = 65;
    TCHECK_STATUS(gem_decode_supports_k_from_v(c, &prod, GEM_DTYPE_F32, &kfv),
                  GEM_ERR_UNSUPPORTED);
    kfv.n_pairs = 8;
    kfv.half = 128;
    TCHECK_STATUS(gem_decode_supports_k_from_v(c, &prod, GEM_DTYPE_F32, &kfv),
                  GEM_ERR_UNSUPPORTED);
    const gem_decode_shape sliding = {32, 16, 256, 256, 1.0f};
    TCHECK_STATUS(gem_decode_supports(c, &sliding, GEM_DTYPE_F32, GEM_DTYPE_F32),
                  GEM_ERR_UNSUPPORTED);
    gem_decode_ctx_destroy(c);
}

int main(void)
{
    gem_cuda_device_info dev;
    if (gem_cuda_device_query(&dev) == GEM_ERR_NO_DEVICE) {
        check_no_device();
        printf("test_cuda_queries: no CUDA device here; the GPU checks did not run\n");
    } else {
        check_device();
    }
    return tcheck_summary("test_cuda_queries");
}
