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
 * kernels do not take refused. Gemma 4's sliding-window shape (32 query heads over
 * 16 KV heads, D256): supported for K and V both F32, both BF16 and both F16 on
 * the fused route; its default (tile 8, one partition per 8 rows up to 2 x SMs /
 * KV heads, never shrinking as live grows) and workspace; and its neighbours
 * refused: the baseline route, K and V of two types, four query heads per KV head,
 * D128, dk != dv, K rebuilt from V.
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

/* What the CUDA backend answers for K and V both of element type t at a shape other than D512
 * with eight query heads per KV head, and for a V rebuilding K: FP8 E4M3 has the D512 fused
 * first passes alone (gem_decode refuses it elsewhere; the CPU routes read it anywhere). */
static gem_status cuda_type_status(int t)
{
    return t == GEM_DTYPE_FP8_E4M3 ? GEM_ERR_UNSUPPORTED : GEM_OK;
}

/* Gemma 4's sliding-window shape on context c of device dev. */
static void check_sliding(gem_decode_ctx *c, const gem_cuda_device_info *dev)
{
    const gem_decode_shape sliding = {32, 16, 256, 256, 1.0f};
    for (int t = 0; t < GEM_DTYPE_COUNT; t++) {
        TCHECK_STATUS(gem_decode_supports(c, &sliding, (gem_dtype)t, (gem_dtype)t),
                      cuda_type_status(t));
        TCHECK_STATUS(gem_decode_supports_route(c, &sliding, (gem_dtype)t, (gem_dtype)t,
                                                GEM_ROUTE_BASELINE),
                      GEM_ERR_UNSUPPORTED); /* the baseline's kernels are D512 */
    }
    TCHECK_STATUS(gem_decode_supports(c, &sliding, GEM_DTYPE_BF16, GEM_DTYPE_F16),
                  GEM_ERR_UNSUPPORTED);
    TCHECK_STATUS(gem_decode_supports(c, &sliding, GEM_DTYPE_F32, GEM_DTYPE_BF16),
                  GEM_ERR_UNSUPPORTED);
    /* its neighbours: four query heads per KV head, one, D128 and the tiny model's D64 with
     * four go to the general kernel (fused only); dk != dv, D512 with two, D96 and sixteen
     * query heads per KV head have no kernel */
    const gem_decode_shape general[] = {{32, 8, 256, 256, 1.0f}, {16, 16, 256, 256, 1.0f},
                                        {32, 16, 128, 128, 1.0f}, {32, 8, 64, 64, 1.0f},
                                        {8, 8, 32, 32, 1.0f}};
    for (size_t i = 0; i < sizeof general / sizeof general[0]; i++)
        for (int t = 0; t < GEM_DTYPE_COUNT; t++) {
            TCHECK_STATUS(gem_decode_supports(c, &general[i], (gem_dtype)t, (gem_dtype)t),
                          cuda_type_status(t));
            TCHECK_STATUS(gem_decode_supports_route(c, &general[i], (gem_dtype)t, (gem_dtype)t,
                                                    GEM_ROUTE_BASELINE),
                          GEM_ERR_UNSUPPORTED);
        }
    const gem_decode_shape others[] = {{32, 16, 256, 128, 1.0f}, {32, 16, 512, 512, 1.0f},
                                       {32, 16, 96, 96, 1.0f}, {256, 16, 64, 64, 1.0f}};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        TCHECK_STATUS(gem_decode_supports(c, &others[i], GEM_DTYPE_F32, GEM_DTYPE_F32),
                      GEM_ERR_UNSUPPORTED);
    /* one and 32767 KV heads are the tuned shape; 32768 leave its grid for the general
     * kernel's, and 65536 fit no grid's y dimension */
    const gem_decode_shape one = {2, 1, 256, 256, 1.0f}, most = {65534, 32767, 256, 256, 1.0f},
                           past = {65536, 32768, 256, 256, 1.0f},
                           none = {131072, 65536, 256, 256, 1.0f};
    TCHECK_STATUS(gem_decode_supports(c, &one, GEM_DTYPE_F16, GEM_DTYPE_F16), GEM_OK);
    TCHECK_STATUS(gem_decode_supports(c, &most, GEM_DTYPE_F32, GEM_DTYPE_F32), GEM_OK);
    TCHECK_STATUS(gem_decode_supports(c, &past, GEM_DTYPE_F32, GEM_DTYPE_F32), GEM_OK);
    TCHECK_STATUS(gem_decode_supports(c, &none, GEM_DTYPE_F32, GEM_DTYPE_F32),
                  GEM_ERR_UNSUPPORTED);
    /* K rebuilt from V is the D512 first passes' (half 128 is valid at D256) */
    const gem_k_from_v kfv = {NULL, NULL, 64, 128, 0};
    TCHECK_STATUS(gem_decode_supports_k_from_v(c, &sliding, GEM_DTYPE_F32, &kfv),
                  GEM_ERR_UNSUPPORTED);
    /* the default: fused, tile 8, one partition per 8 rows up to 2 x SMs / 16 KV heads */
    int64_t cap = (int64_t)dev->sm_count * 2 / 16;
    cap = cap < 1 ? 1 : cap;
    int64_t prev = 0;
    const int64_t lives[] = {1, 7, 8, 9, 13, 63, 64, 65, 127, 128, 129, 1000, 1023, 1024,
                             4097, 8193, 65536, 131072, 1 << 20};
    for (size_t i = 0; i < sizeof lives / sizeof lives[0]; i++) {
        gem_decode_config cfg;
        TCHECK_STATUS(gem_decode_config_default(c, &sliding, lives[i], &cfg), GEM_OK);
        const int64_t want = (lives[i] + 7) / 8 < cap ? (lives[i] + 7) / 8 : cap;
        if (!TCHECK(cfg.route == GEM_ROUTE_FUSED && cfg.tile == 8 && cfg.partitions == want &&
                    cfg.partitions >= prev))
            fprintf(stderr, "     sliding default at %lld: route %d, tile %lld, P %lld (want %lld)\n",
                    (long long)lives[i], (int)cfg.route, (long long)cfg.tile,
                    (long long)cfg.partitions, (long long)want);
        prev = cfg.partitions;
        size_t bytes = 0;
        TCHECK_STATUS(gem_decode_workspace_bytes(c, &sliding, lives[i], NULL, &bytes), GEM_OK);
        TCHECK_EQ_I64((int64_t)bytes, cfg.partitions * 32 * (256 + 2) * 4);
    }
    const gem_decode_config t4 = {GEM_ROUTE_FUSED, 16, 4}, base = {GEM_ROUTE_BASELINE, 16, 0};
    size_t bytes = 0;
    TCHECK_STATUS(gem_decode_workspace_bytes(c, &sliding, 1024, &t4, &bytes), GEM_ERR_PARAM);
    /* the baseline's workspace can be asked for; gem_decode refuses the route (test_decode) */
    TCHECK_STATUS(gem_decode_workspace_bytes(c, &sliding, 1024, &base, &bytes), GEM_OK);
}

/* gem_decode_config_for_view: an F32 V rebuilding K from 12,288 rows on takes one wave of the
 * long pass (SMs / KV heads partitions, never more than the view-blind default); a BF16 V, a
 * stored K or fewer rows take the default. No memory is read: the pointers only need to be set. */
static void check_view_default(gem_decode_ctx *c, const gem_decode_shape *prod,
                               const gem_cuda_device_info *dev)
{
    static float dummy[16];
    const double inv_freq[1] = {1.0};
    const gem_k_from_v rot = {dummy, inv_freq, 1, 256, 0};
    const int64_t lives[] = {1, 8193, 12287, 12288, 20480, 131072};
    for (size_t i = 0; i < sizeof lives / sizeof lives[0]; i++) {
        const int64_t live = lives[i];
        gem_decode_config def, kfv32, kfv16, stored;
        TCHECK_STATUS(gem_decode_config_default(c, prod, live, &def), GEM_OK);
        gem_kv_view v = gem_kv_view_dense(NULL, dummy, 512, 512, live, live);
        v.k_head_stride = v.k_token_stride = 0;
        v.k_from_v = &rot;
        TCHECK_STATUS(gem_decode_config_for_view(c, prod, &v, &kfv32), GEM_OK);
        v.k_dtype = v.v_dtype = GEM_DTYPE_BF16;
        TCHECK_STATUS(gem_decode_config_for_view(c, prod, &v, &kfv16), GEM_OK);
        gem_kv_view s = gem_kv_view_dense(dummy, dummy, 512, 512, live, live);
        TCHECK_STATUS(gem_decode_config_for_view(c, prod, &s, &stored), GEM_OK);
        const int64_t wave = dev->sm_count / 4;
        TCHECK_EQ_I64(kfv32.partitions,
                      live >= 12288 ? (wave < def.partitions ? wave : def.partitions)
                                    : def.partitions);
        TCHECK(kfv32.partitions <= def.partitions && kfv32.route == def.route &&
               kfv32.tile == def.tile);
        TCHECK_EQ_I64(kfv16.partitions, def.partitions);
        TCHECK_EQ_I64(stored.partitions, def.partitions);
    }
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
        "gem_fused_first_pass_d256", "gem_fused_first_pass_d256_bf16",
        "gem_fused_first_pass_d256_f16",
        "gem_fused_reducer",         "gem_baseline_score",
        "gem_baseline_normalize",    "gem_baseline_value",
        "gem_baseline_reduce",       "gem_fused_first_pass_k_from_v_bf16_long",
        "gem_fused_first_pass_k_from_v_f32_long", "gem_fused_first_pass_fp8",
        "gem_fused_first_pass_fp8_strided", "gem_baseline_score_bf16",
        "gem_baseline_score_f16",    "gem_baseline_score_fp8",
        "gem_baseline_value_bf16",   "gem_baseline_value_f16",
        "gem_baseline_value_fp8"};
    static const char *roles[GEM_CUDA_KERNELS] = {
        "fused_first_pass",      "fused_first_pass_strided", "fused_first_pass_bf16",
        "fused_first_pass_bf16_strided", "fused_first_pass_f16", "fused_first_pass_f16_strided",
        "fused_first_pass_k_from_v", "fused_first_pass_k_from_v_bf16",
        "fused_first_pass_k_from_v_f16",
        "fused_first_pass_d256", "fused_first_pass_d256_bf16", "fused_first_pass_d256_f16",
        "fused_reducer",         "baseline_score",           "baseline_normalize",
        "baseline_value",        "baseline_reduce",          "fused_first_pass_kfv_bf16_long",
        "fused_first_pass_kfv_f32_long", "fused_first_pass_fp8", "fused_first_pass_fp8_strided",
        "baseline_score_bf16",   "baseline_score_f16",       "baseline_score_fp8",
        "baseline_value_bf16",   "baseline_value_f16",       "baseline_value_fp8"};
    /* places in the list: the baseline's F32 stages, the long K-from-V passes, the FP8 passes,
     * the baseline's score and value stages of the other cache types */
    const int base0 = GEM_CUDA_FIRST_PASSES + 1, long0 = base0 + GEM_CUDA_BASELINE_KERNELS;
    const int fp80 = long0 + 2, typed0 = fp80 + 2;
    TCHECK_EQ_I64(typed0 + GEM_CUDA_BASELINE_TYPED_KERNELS, GEM_CUDA_KERNELS);
    for (int i = 0; i < GEM_CUDA_KERNELS; i++) {
        TCHECK(!strcmp(ks[i].name, names[i]) && !strcmp(ks[i].role, roles[i]));
        TCHECK_EQ_I64(ks[i].local_bytes, 0);
        TCHECK(ks[i].max_active_blocks_per_sm >= 1);
        /* the BF16 and F16 first passes stage two tiles of K and V rows in dynamic shared
         * memory, the FP8 ones two 32-token tiles of FP8 rows, the K-from-V passes of BF16 and
         * F16 two tiles of V rows */
        const int fp8 = i == fp80 || i == fp80 + 1;
        const int staged = i >= 2 && i <= 5, kfv_staged = i == 7 || i == 8;
        const int kfv_long = i == long0, kfv_f32_long = i == long0 + 1;
        TCHECK_EQ_I64(ks[i].dynamic_shared_bytes, staged         ? 66560
                                                  : fp8          ? 67584
                                                  : kfv_staged   ? 33280
                                                  : kfv_long     ? 109952
                                                  : kfv_f32_long ? 221696
                                                                 : 0);
        if (staged || kfv_staged)
            TCHECK(ks[i].static_shared_bytes + ks[i].dynamic_shared_bytes <= 81920);
        if (fp8) /* two blocks an SM within the 228 KiB of an SM */
            TCHECK(ks[i].static_shared_bytes + ks[i].dynamic_shared_bytes <= 98304);
    }
    for (int i = 0; i < GEM_CUDA_FIRST_PASSES; i++) {
        TCHECK(ks[i].threads_dispatched == 256 && ks[i].warps_dispatched == 8);
        TCHECK(ks[i].static_shared_bytes <= 32768);
        TCHECK(ks[i].max_active_blocks_per_sm >= 2);
        TCHECK_EQ_I64(ks[i].grid_blocks, 4 * 64);
    }
    TCHECK_EQ_I64(ks[GEM_CUDA_FIRST_PASSES].grid_blocks, 32 * 2);
    /* the FP8 first passes: the staged passes' block, two an SM, the fused route's grid */
    for (int i = fp80; i < fp80 + 2; i++) {
        TCHECK(ks[i].threads_dispatched == 256 && ks[i].warps_dispatched == 8);
        TCHECK(ks[i].max_active_blocks_per_sm >= 2);
        TCHECK_EQ_I64(ks[i].grid_blocks, 4 * 64);
    }
    /* the long BF16 K-from-V first pass: four warps, its shared memory within 112 KiB, and
     * still two blocks an SM; the fused route's grid */
    /* the baseline's score and value of BF16, F16 and FP8: the F32 stages' blocks; the score's
     * grid, the value stage's in 64-dim tiles (half the F32 grid, twice its reduction's
     * shared memory) */
    for (int i = 0; i < GEM_CUDA_BASELINE_TYPED_KERNELS; i++) {
        const int value = i >= 3;
        const gem_cuda_kernel_info *f32 = &ks[value ? base0 + 2 : base0];
        TCHECK(ks[typed0 + i].threads_dispatched == 256 && ks[typed0 + i].warps_dispatched == 8);
        TCHECK_EQ_I64(ks[typed0 + i].grid_blocks, value ? f32->grid_blocks / 2 : f32->grid_blocks);
        TCHECK_EQ_I64((int64_t)ks[typed0 + i].static_shared_bytes,
                      (int64_t)f32->static_shared_bytes + (value ? 8192 : 0));
    }
    TCHECK_EQ_I64(ks[base0].grid_blocks, 131072 / 256 * 4);
    TCHECK_EQ_I64(ks[base0 + 2].grid_blocks, 16 * (512 / 32) * 4);
    const gem_cuda_kernel_info *kl = &ks[long0];
    TCHECK(kl->threads_dispatched == 128 && kl->warps_dispatched == 4);
    TCHECK(kl->static_shared_bytes + kl->dynamic_shared_bytes <= 114688);
    TCHECK(kl->max_active_blocks_per_sm >= 2);
    TCHECK_EQ_I64(kl->grid_blocks, 4 * 64);
    /* the long F32 K-from-V first pass: five pairs of warps, within the 227 KiB a block may
     * take, resident (one block an SM); the grid gem_decode gives its views by default, one
     * wave at 128K (SMs / 4 partitions, 33 on an H200) and the view-blind grid below 12,288 */
    const gem_cuda_kernel_info *kf = &ks[long0 + 1];
    TCHECK(kf->threads_dispatched == 320 && kf->warps_dispatched == 10);
    TCHECK(kf->static_shared_bytes + kf->dynamic_shared_bytes <= 232448);
    TCHECK(kf->max_active_blocks_per_sm >= 1);
    TCHECK_EQ_I64(kf->local_bytes, 0);
    TCHECK_EQ_I64(kf->grid_blocks, 4 * (dev.sm_count / 4 < 64 ? dev.sm_count / 4 : 64));
    TCHECK_STATUS(gem_cuda_kernel_query(4, 12287, 64, 16, ks, cap, &n), GEM_OK);
    TCHECK_EQ_I64(ks[long0 + 1].grid_blocks, 4 * 64);

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
    /* FP8 E4M3: the fused route, up to 64 KV heads (their scales travel in the launch) */
    TCHECK_STATUS(gem_decode_supports(c, &prod, GEM_DTYPE_FP8_E4M3, GEM_DTYPE_FP8_E4M3), GEM_OK);
    TCHECK_STATUS(gem_decode_supports_route(c, &prod, GEM_DTYPE_FP8_E4M3, GEM_DTYPE_FP8_E4M3,
                                            GEM_ROUTE_BASELINE),
                  GEM_OK);
    TCHECK_STATUS(gem_decode_supports(c, &prod, GEM_DTYPE_FP8_E4M3, GEM_DTYPE_BF16),
                  GEM_ERR_UNSUPPORTED);
    const gem_decode_shape heads64 = {512, 64, 512, 512, 1.0f}, heads65 = {520, 65, 512, 512, 1.0f};
    TCHECK_STATUS(gem_decode_supports(c, &heads64, GEM_DTYPE_FP8_E4M3, GEM_DTYPE_FP8_E4M3),
                  GEM_OK);
    TCHECK_STATUS(gem_decode_supports(c, &heads65, GEM_DTYPE_FP8_E4M3, GEM_DTYPE_FP8_E4M3),
                  GEM_ERR_UNSUPPORTED);
    TCHECK_STATUS(gem_decode_supports_route(c, &heads64, GEM_DTYPE_FP8_E4M3, GEM_DTYPE_FP8_E4M3,
                                            GEM_ROUTE_BASELINE),
                  GEM_OK);
    TCHECK_STATUS(gem_decode_supports_route(c, &heads65, GEM_DTYPE_FP8_E4M3, GEM_DTYPE_FP8_E4M3,
                                            GEM_ROUTE_BASELINE),
                  GEM_ERR_UNSUPPORTED);
    TCHECK_STATUS(gem_decode_supports(c, &heads65, GEM_DTYPE_BF16, GEM_DTYPE_BF16), GEM_OK);
    TCHECK_STATUS(gem_decode_supports(c, &prod, GEM_DTYPE_BF16, GEM_DTYPE_F32),
                  GEM_ERR_UNSUPPORTED); /* one element type for K and V on CUDA */
    /* the baseline reads every cache type the fused route reads at D512, one type for both */
    TCHECK_STATUS(gem_decode_supports_route(c, &prod, GEM_DTYPE_BF16, GEM_DTYPE_BF16,
                                            GEM_ROUTE_BASELINE),
                  GEM_OK);
    TCHECK_STATUS(gem_decode_supports_route(c, &prod, GEM_DTYPE_F16, GEM_DTYPE_F16,
                                            GEM_ROUTE_BASELINE),
                  GEM_OK);
    TCHECK_STATUS(gem_decode_supports_route(c, &prod, GEM_DTYPE_BF16, GEM_DTYPE_F16,
                                            GEM_ROUTE_BASELINE),
                  GEM_ERR_UNSUPPORTED);
    TCHECK_STATUS(gem_decode_supports_route(c, &prod, GEM_DTYPE_F32, GEM_DTYPE_F32,
                                            GEM_ROUTE_BASELINE),
                  GEM_OK);
    /* K rebuilt from V: Gemma 4's rotation (half 256, at most 64 pairs), every V type */
    gem_k_from_v kfv = {NULL, NULL, 64, 256, 0};
    for (int t = 0; t < GEM_DTYPE_COUNT; t++)
        TCHECK_STATUS(gem_decode_supports_k_from_v(c, &prod, (gem_dtype)t, &kfv),
                      cuda_type_status(t));
    kfv.n_pairs = 65;
    TCHECK_STATUS(gem_decode_supports_k_from_v(c, &prod, GEM_DTYPE_F32, &kfv),
                  GEM_ERR_UNSUPPORTED);
    kfv.n_pairs = 8;
    kfv.half = 128;
    TCHECK_STATUS(gem_decode_supports_k_from_v(c, &prod, GEM_DTYPE_F32, &kfv),
                  GEM_ERR_UNSUPPORTED);
    check_view_default(c, &prod, &dev);
    check_sliding(c, &dev);
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
