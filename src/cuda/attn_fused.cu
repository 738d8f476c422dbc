/*
 * The fused split-KV route on CUDA: the kernels the library ships. D512 / group 8 (Gemma 4's
 * full-attention layers; the device code is in attn_fused_body.cuh, a header of its own so
 * that experiments can instantiate variants of it), and D256 / group 2 (its sliding-window
 * layers; attn_fused_d256_body.cuh says what those first passes do). Everything below up to
 * the D256 first passes describes the D512 kernels; the reducer serves both.
 *
 * Lineage: dev/cuda/fused_decode.cu holds the CPU-validated experiments that
 * led here, with their H200 figures. The first pass is its version 7 ("Q in
 * shared memory, the next tile's V issued after the dots", results/h200/run8:
 * 0.2517 ms at 64K and 0.4854 ms at 128K) read through a KV view: row
 * addresses stepped by pointer, the token stride of dense rows a compile-time
 * constant (gem_fused_first_pass; gem_fused_first_pass_strided takes it at run
 * time: a run-time stride multiplied per row cost 8.5% in run 9), half 1's O
 * handed over in Q's shared memory (17.3 KiB of static shared memory instead of
 * 33.3). The reducer is version 10's (one weight per partial instead of two
 * expf per merge step: 3-4 us faster, run 9), launched as a programmatic
 * dependent of the first pass (versions 12-19, runs 10-13), with its O loads
 * issued 64 partials at a time before it loads M and S (version 20 against 21:
 * the same bits, 0.8-1.2 us faster, run 53). Both kernels are programmatic
 * dependents of the kernel before them in the caller's stream: the first pass
 * asks the L2 for its first rows and then waits for that kernel, the reducer lets
 * the next kernel launch once its own wait returns (versions 24-27, runs 72-74:
 * calls queued back to back 1.7 us faster at 8K; GEM_FP_PROLOGUE below).
 *
 * K and V are F32, BF16 or F16 (the same type for both). F32: a thread owns four elements of
 * every row, loaded as 16 bytes one tile ahead; the arithmetic below. BF16 and F16: the dots and
 * the V update run on tensor cores, exact to F32 by splitting Q and the weights into 16-bit
 * pieces (dev/cuda/mma_decode.cu version 2, results/h200/run19: 0.283 ms at 128K against 0.472
 * for the CUDA-core body, which is bound by instruction issue on 16-bit rows), their rows loaded
 * as the F32 pass loads its own and staged through shared memory
 * (gem_fused_first_pass_mma_staged_body, version 24, results/h200/run78: 0.2573 ms at 128K
 * against 0.2677 for version 2's register-fed fragments). F16 scales Q per head by a power of
 * two and the weights by 2^14 so their pieces stay in F16's range, and undoes both exactly
 * (version 29, results/h200/run80: 0.2511 ms at 128K against 0.4540 for the CUDA-core body
 * that F16 ran on before). The partials have the same layout, so the reducer is shared.
 * K rebuilt from V (gem_k_from_v): F32 V on the CUDA-core body above; BF16 and F16 V on
 * gem_fused_first_pass_kfv_mma_body, the staged pass with V alone staged and the rotating dims
 * on the F64 tensor cores (dev/cuda/kfv_mma.cu version 4, results/h200/run94: BF16 0.2432 ms at
 * 128K against 0.5647 for the CUDA-core body; run96 through gem_decode: 0.2431); BF16 V from
 * GEM_KFV_WARP_MIN_LIVE rows on, gem_fused_first_pass_kfv_warp_body, warps that own whole
 * tiles (versions 20-23, runs 114-117; run118 through gem_decode: 0.1900 ms at 128K against
 * 0.2451); F32 V from GEM_KFV_PAIR_MIN_LIVE rows on, gem_fused_first_pass_kfv_pair_body, pairs
 * of warps sharing each tile with every product three TF32 MMAs (versions 24-34, runs 122-139:
 * 0.2944 ms at 128K through gem_decode against 0.5006 for the CUDA-core body).
 *
 * First pass: one 256-thread block per (sequence partition p, KV head g),
 * partitions by gem_partition_range (chunk = ceil(live / P)). Thread i belongs
 * to half hf = i / 128 (warps 0-3, 4-7) and owns the four dims
 * 4*(i % 128) .. +3 of all eight query heads: O (8 float4) in registers, Q of
 * the eight heads in shared memory. Tiles of 8 tokens: half hf takes tokens
 * hf*4 .. hf*4+3 of each tile; each thread loads its float4 of K and V of
 * those rows straight into registers one tile ahead (16-byte loads, L1
 * no-allocate, L2 evict-first: each byte is used once), the next tile's K and
 * V right after this tile's dots, so two tiles of loads are in flight through
 * the softmax and the V update.
 *   - dots: 32 partial dots (8 heads x 4 tokens) per thread, summed across the
 *     warp by a transposed sum (lane l holds head h ^ ((l >> 2) & 7) in slot h,
 *     so three steps need no selects), leaving lane l the warp's sum for head
 *     l / 4, token l % 4; the four warps of a half are added in warp order;
 *   - softmax: warp h owns head h, lane t (mod 8) token t: one expf per lane
 *     and tile plus one for the rescale, M' = max(M, max_t s_t),
 *     S' = S e^(M-M') + sum_t e^(s_t-M');
 *   - V update: O = O e^(M-M') + sum_t e^(s_t-M') v_t, token order, fmaf;
 *   - end: half 1 hands its O to half 0, which adds it (fixed order) and
 *     writes the partial (M, S, O), partition-major:
 *       part_m, part_s (P, n_q_heads); part_o (P, n_q_heads, 512)
 *     the layout of gem_attention_online_scratch_bytes.
 * Reducer: one 256-thread block per (query head, 256 of its dims: two blocks per
 * head at D512, one at D256): M = the largest M_p of the non-empty partials
 * (each partial's M and S loaded together and kept for its weight), w_p =
 * e^(M_p - M) once per partial, O = sum_p O_p w_p in partition order (fmaf),
 * S = sum_p S_p w_p in a fixed warp order, out = O / S. No atomics anywhere: the
 * result is bitwise reproducible.
 */
#include <atomic>

#include "attn_fused_body.cuh"
#include "attn_fused_d256_body.cuh"

/* Every first pass is launched as a programmatic dependent of the stream's previous kernel
 * and begins with this prologue: it asks the L2 for the first GEM_FP_PREFETCH_ROWS rows of
 * its K and V, then waits for that kernel (pdl_wait, gem_pdl.cuh) before it reads anything. Behind
 * the reducer of a previous call, which lets its dependents launch once its own wait returns,
 * the blocks start and the first rows stream while that reducer still runs
 * (dev/cuda/fused_decode.cu versions 24-27, results/h200/run72-run74: eight calls back to back
 * at 8K, 0.0389 -> 0.0372 ms a call with 8 rows, 0.0375 with 16, 0.0386 with 32; 64K and
 * 128K 0.5-1.7% faster; a call timed alone behind an event record 1 us slower at 8K). */
#define GEM_FP_PREFETCH_ROWS 8
#define GEM_FP_PROLOGUE(K, V, ROW_ELEMS, ELEM_BYTES)                                          \
    do {                                                                                       \
        gem_fp_prefetch_l2<(ROW_ELEMS) * (ELEM_BYTES), GEM_FP_PREFETCH_ROWS>(                  \
            K, k_hs4 * 4 * (ELEM_BYTES), k_ts4 * 4 * (ELEM_BYTES), V, v_hs4 * 4 * (ELEM_BYTES), \
            v_ts4 * 4 * (ELEM_BYTES), live, partitions);                                       \
        pdl_wait();                                                                            \
    } while (0)

/* The first passes: per element type of K and V (F32, BF16, F16), one for rows of 512
 * elements back to back within a head (head-major, the layout of the cache helper) and one for
 * any other strides. */
#define GEM_FIRST_PASS(NAME, E, TS4)                                                           \
    extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS, 2)                            \
        NAME(const float *__restrict__ q, const void *__restrict__ k, int64_t k_hs4,          \
             int64_t k_ts4, const void *__restrict__ v, int64_t v_hs4, int64_t v_ts4,          \
             float *__restrict__ part_m, float *__restrict__ part_s, float *__restrict__ part_o, \
             int64_t live, int64_t partitions, int64_t n_q_heads, float scale)                 \
    {                                                                                          \
        GEM_FP_PROLOGUE(k, v, GEM_CU_D, (int)(sizeof(typename E::piece) / 4));                   \
        gem_fused_first_pass_body<E, TS4, false>(q, k, k_hs4, k_ts4, v, v_hs4, v_ts4, part_m,  \
                                                 part_s, part_o, live, partitions, n_q_heads,  \
                                                 scale, nullptr, nullptr);                     \
    }

/* BF16 and F16 K and V: the tensor-core body staged through shared memory
 * (gem_fused_first_pass_mma_staged_body, GEM_MMA_STAGED_BYTES of dynamic shared memory), the
 * same arguments with the strides turned into elements; TS elements per row when dense, E the
 * element's pieces (gem_mma_bf16_elem, gem_mma_f16_elem). */
#define GEM_FIRST_PASS_MMA(NAME, E, TS)                                                        \
    extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS, 2)                            \
        NAME(const float *__restrict__ q, const void *__restrict__ k, int64_t k_hs4,          \
             int64_t k_ts4, const void *__restrict__ v, int64_t v_hs4, int64_t v_ts4,          \
             float *__restrict__ part_m, float *__restrict__ part_s, float *__restrict__ part_o, \
             int64_t live, int64_t partitions, int64_t n_q_heads, float scale)                 \
    {                                                                                          \
        GEM_FP_PROLOGUE(k, v, GEM_CU_D, 2);                                                    \
        gem_fused_first_pass_mma_staged_body<TS, E>(                                           \
            q, reinterpret_cast<const typename E::elem *>(k), 4 * k_hs4, 4 * k_ts4,            \
            reinterpret_cast<const typename E::elem *>(v), 4 * v_hs4, 4 * v_ts4, part_m,       \
            part_s, part_o, live, partitions, n_q_heads, scale);                               \
    }

/* FP8 E4M3 K and V: the codes kept FP8 in shared memory, 32-token tiles, the MMAs' B fragments
 * widened as they are read (gem_fused_first_pass_fp8_body, GEM_FP8_STAGED_BYTES of dynamic
 * shared memory; dev/cuda/fp8_decode.cu version 5, results/h200/run182 on an H100: 0.1951 ms at
 * 128K against 0.2317 for version 3, the staged F16 pass with the codes widened as they were
 * staged, which ran here first, runs 179-181), the heads' score factors and V scales in the
 * launch. TS codes per row when dense. */
#define GEM_FIRST_PASS_FP8(NAME, TS)                                                           \
    extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS, 2)                            \
        NAME(const float *__restrict__ q, const void *__restrict__ k, int64_t k_hs4,          \
             int64_t k_ts4, const void *__restrict__ v, int64_t v_hs4, int64_t v_ts4,          \
             float *__restrict__ part_m, float *__restrict__ part_s, float *__restrict__ part_o, \
             int64_t live, int64_t partitions, int64_t n_q_heads,                              \
             const __grid_constant__ gem_cu_fp8_scales sc)                                     \
    {                                                                                          \
        GEM_FP_PROLOGUE(k, v, GEM_CU_D, 1);                                                    \
        gem_fused_first_pass_fp8_body<TS>(                                                     \
            q, reinterpret_cast<const uint8_t *>(k), 4 * k_hs4, 4 * k_ts4,                     \
            reinterpret_cast<const uint8_t *>(v), 4 * v_hs4, 4 * v_ts4, part_m, part_s, part_o, \
            live, partitions, n_q_heads, sc.score[blockIdx.y], sc.v[blockIdx.y]);             \
    }

GEM_FIRST_PASS(gem_fused_first_pass, gem_kv_f32, GEM_CU_ROW_F4)
GEM_FIRST_PASS(gem_fused_first_pass_strided, gem_kv_f32, 0)
GEM_FIRST_PASS_MMA(gem_fused_first_pass_bf16, gem_mma_bf16_elem, GEM_CU_D)
GEM_FIRST_PASS_MMA(gem_fused_first_pass_bf16_strided, gem_mma_bf16_elem, 0)
GEM_FIRST_PASS_MMA(gem_fused_first_pass_f16, gem_mma_f16_elem, GEM_CU_D)
GEM_FIRST_PASS_MMA(gem_fused_first_pass_f16_strided, gem_mma_f16_elem, 0)
GEM_FIRST_PASS_FP8(gem_fused_first_pass_fp8, GEM_CU_D)
GEM_FIRST_PASS_FP8(gem_fused_first_pass_fp8_strided, 0)

/* The K-from-V first passes (gem_k_from_v: the view holds V alone), one per element type, any
 * strides. F32: the same body with K rebuilt from each V row as it arrives (attn_fused_body.cuh,
 * gem_kfv_elements). */
#define GEM_FIRST_PASS_KFV(NAME, E)                                                            \
    extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS, 2)                            \
        NAME(const float *__restrict__ q, const float *__restrict__ k_weight,                  \
             const __grid_constant__ gem_cu_rope rope, const void *__restrict__ v,             \
             int64_t v_hs4, int64_t v_ts4, float *__restrict__ part_m,                         \
             float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,             \
             int64_t partitions, int64_t n_q_heads, float scale)                               \
    {                                                                                          \
        const int64_t k_hs4 = 0, k_ts4 = 0;                                                    \
        GEM_FP_PROLOGUE(nullptr, v, GEM_CU_D, (int)(sizeof(typename E::piece) / 4));             \
        gem_fused_first_pass_body<E, 0, true>(q, nullptr, 0, 0, v, v_hs4, v_ts4, part_m,       \
                                              part_s, part_o, live, partitions, n_q_heads,     \
                                              scale, k_weight, &rope);                         \
    }

/* BF16 and F16 V: the tensor-core body (gem_fused_first_pass_kfv_mma_body, GEM_KFV_STAGED_BYTES
 * of dynamic shared memory), the strides turned into elements. */
#define GEM_FIRST_PASS_KFV_MMA(NAME, E)                                                        \
    extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS, 2)                            \
        NAME(const float *__restrict__ q, const float *__restrict__ k_weight,                  \
             const __grid_constant__ gem_cu_rope rope, const void *__restrict__ v,             \
             int64_t v_hs4, int64_t v_ts4, float *__restrict__ part_m,                         \
             float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,             \
             int64_t partitions, int64_t n_q_heads, float scale)                               \
    {                                                                                          \
        const int64_t k_hs4 = 0, k_ts4 = 0;                                                    \
        GEM_FP_PROLOGUE(nullptr, v, GEM_CU_D, 2);                                              \
        gem_fused_first_pass_kfv_mma_body<E>(q, k_weight, &rope,                               \
                                             reinterpret_cast<const typename E::elem *>(v),    \
                                             4 * v_hs4, 4 * v_ts4, part_m, part_s, part_o,     \
                                             live, partitions, n_q_heads, scale);              \
    }

GEM_FIRST_PASS_KFV(gem_fused_first_pass_k_from_v, gem_kv_f32)
GEM_FIRST_PASS_KFV_MMA(gem_fused_first_pass_k_from_v_bf16, gem_mma_bf16_elem)
GEM_FIRST_PASS_KFV_MMA(gem_fused_first_pass_k_from_v_f16, gem_mma_f16_elem)

/* BF16 V from GEM_KFV_WARP_MIN_LIVE rows on: warps that own whole tiles
 * (gem_fused_first_pass_kfv_warp_body), GEM_KFV_WARP_THREADS threads and GEM_KFV_WARP_BYTES of
 * dynamic shared memory a block, two blocks an SM. dev/cuda/kfv_mma.cu version 23 (results/h200
 * run 117) against version 4, the staged pass: even at 32K tokens, 15% less time at 64K, 24% at
 * 128K, slower below (8K: 0.0341 against 0.0254 ms). */
#define GEM_KFV_WARP_MIN_LIVE 32768
extern "C" __global__ void __launch_bounds__(GEM_KFV_WARP_THREADS, 2)
    gem_fused_first_pass_k_from_v_bf16_long(const float *__restrict__ q,
                                            const float *__restrict__ k_weight,
                                            const __grid_constant__ gem_cu_rope rope,
                                            const void *__restrict__ v, int64_t v_hs4,
                                            int64_t v_ts4, float *__restrict__ part_m,
                                            float *__restrict__ part_s, float *__restrict__ part_o,
                                            int64_t live, int64_t partitions, int64_t n_q_heads,
                                            float scale)
{
    const int64_t k_hs4 = 0, k_ts4 = 0;
    GEM_FP_PROLOGUE(nullptr, v, GEM_CU_D, 2);
    gem_fused_first_pass_kfv_warp_body(q, k_weight, &rope,
                                       reinterpret_cast<const __nv_bfloat16 *>(v), 4 * v_hs4,
                                       4 * v_ts4, part_m, part_s, part_o, live, partitions,
                                       n_q_heads, scale);
}

/* F32 V from GEM_KFV_PAIR_MIN_LIVE rows on: pairs of warps that share each tile, every product
 * three TF32 MMAs (gem_fused_first_pass_kfv_pair_body), GEM_KFV_PAIR_THREADS threads and
 * GEM_KFV_PAIR_BYTES of dynamic shared memory a block, one block an SM. dev/cuda/kfv_mma.cu
 * version 29 (results/h200 run 125, 33 partitions) against version 1, the CUDA-core pass: 8%
 * less time at 24K tokens, 24% at 64K, 30% at 128K, slower at 16K and below (8K: 0.0514 against
 * 0.0404 ms). At the default 64 partitions (two waves of one block an SM) the library's pass took
 * 0.1045 ms at 24K, 0.1270 at 32K and 0.3758 at 128K (run 126), so it starts at 32K, where it
 * was 5% faster than the CUDA-core pass. Its pairs at mbarriers of their own (version 30's form)
 * took 10% off at 32K to 128K (run 135: 0.1150 / 0.1868 / 0.3424 ms at 32K / 64K / 128K), and
 * version 30 at 64 partitions took 0.0965 ms at 24K against 0.1035 for the CUDA-core pass,
 * 0.0813 at 16K against 0.0713, so it started at 24K. Without its L2 prefetch of the next tile
 * (version 34's form, run 139 at 64 partitions: 0.2944 ms at 128K, 0.1670 at 64K) it took 0.0800
 * ms at 20K against 0.0860 for the CUDA-core pass, 0.0731 at 16K against 0.0702, so it starts
 * at 20K (GEM_KFV_PAIR_MIN_LIVE, gem_cuda_internal.h). At one wave (33 partitions, the view's
 * default since then) it beats the CUDA-core pass at its default from 12K on (0.0451 ms against
 * 0.0559 at 12K, 0.0545 against 0.0710 at 16K; dev/cuda/kfv_timeline.cu, results/h200/run149;
 * gem bench at 8K: 0.042 against 0.040, run 151), so a grid of at most one block an SM takes it
 * from 12,288 rows (GEM_KFV_PAIR_MIN_LIVE_ONE_WAVE). */
extern "C" __global__ void __launch_bounds__(GEM_KFV_PAIR_THREADS, 1)
    gem_fused_first_pass_k_from_v_f32_long(const float *__restrict__ q,
                                           const float *__restrict__ k_weight,
                                           const __grid_constant__ gem_cu_rope rope,
                                           const void *__restrict__ v, int64_t v_hs4,
                                           int64_t v_ts4, float *__restrict__ part_m,
                                           float *__restrict__ part_s, float *__restrict__ part_o,
                                           int64_t live, int64_t partitions, int64_t n_q_heads,
                                           float scale)
{
    /* GEM_FP_PROLOGUE's L2 prefetch; the body waits for the grid before itself, after the
     * angles that depend on the parameters alone */
    gem_fp_prefetch_l2<GEM_CU_D * 4, GEM_FP_PREFETCH_ROWS>(nullptr, 0, 0, v, v_hs4 * 16,
                                                          v_ts4 * 16, live, partitions);
    gem_fused_first_pass_kfv_pair_body(q, k_weight, &rope, reinterpret_cast<const float *>(v),
                                       4 * v_hs4, 4 * v_ts4, part_m, part_s, part_o, live,
                                       partitions, n_q_heads, scale);
}

typedef void (*gem_first_pass_kfv_fn)(const float *, const float *, const gem_cu_rope,
                                      const void *, int64_t, int64_t, float *, float *, float *,
                                      int64_t, int64_t, int64_t, float);

static_assert(GEM_DTYPE_F32 == 0 && GEM_DTYPE_BF16 == 1 && GEM_DTYPE_F16 == 2,
              "the kernel tables follow gem_dtype's order");

static const struct {
    gem_first_pass_kfv_fn fn;
    const char *name, *role;
} gem_first_passes_kfv[GEM_CU_DTYPES] = {
    {gem_fused_first_pass_k_from_v, "gem_fused_first_pass_k_from_v", "fused_first_pass_k_from_v"},
    {gem_fused_first_pass_k_from_v_bf16, "gem_fused_first_pass_k_from_v_bf16",
     "fused_first_pass_k_from_v_bf16"},
    {gem_fused_first_pass_k_from_v_f16, "gem_fused_first_pass_k_from_v_f16",
     "fused_first_pass_k_from_v_f16"},
};

typedef void (*gem_first_pass_fn)(const float *, const void *, int64_t, int64_t, const void *,
                                  int64_t, int64_t, float *, float *, float *, int64_t, int64_t,
                                  int64_t, float);

/* The sliding-window layers' first passes (dk = dv = 256, two query heads per KV head), one per
 * element type of K and V, any strides (attn_fused_d256_body.cuh); the arguments of the D512
 * first passes. */
#define GEM_FIRST_PASS_D256(NAME, E)                                                           \
    extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS, 2)                            \
        NAME(const float *__restrict__ q, const void *__restrict__ k, int64_t k_hs4,          \
             int64_t k_ts4, const void *__restrict__ v, int64_t v_hs4, int64_t v_ts4,          \
             float *__restrict__ part_m, float *__restrict__ part_s, float *__restrict__ part_o, \
             int64_t live, int64_t partitions, int64_t n_q_heads, float scale)                 \
    {                                                                                          \
        GEM_FP_PROLOGUE(k, v, GEM_CU_D256, (int)(sizeof(typename E::piece) / 4));                \
        gem_fused_first_pass_d256_body<E>(q, k, k_hs4, k_ts4, v, v_hs4, v_ts4, part_m, part_s, \
                                          part_o, live, partitions, n_q_heads, scale);         \
    }

static_assert(GEM_CU_THREADS == GEM_CU_D256, "the D256 merge gives thread i element i");

GEM_FIRST_PASS_D256(gem_fused_first_pass_d256, gem_kv_f32)
GEM_FIRST_PASS_D256(gem_fused_first_pass_d256_bf16, gem_kv_bf16)
GEM_FIRST_PASS_D256(gem_fused_first_pass_d256_f16, gem_kv_f16)

static const struct {
    gem_first_pass_fn fn;
    const char *name, *role;
} gem_first_passes_d256[GEM_CU_DTYPES] = {
    {gem_fused_first_pass_d256, "gem_fused_first_pass_d256", "fused_first_pass_d256"},
    {gem_fused_first_pass_d256_bf16, "gem_fused_first_pass_d256_bf16",
     "fused_first_pass_d256_bf16"},
    {gem_fused_first_pass_d256_f16, "gem_fused_first_pass_d256_f16",
     "fused_first_pass_d256_f16"},
};

/* The first passes by element type (GEM_DTYPE_F32, _BF16, _F16) and layout (dense, strided),
 * with their names and roles in the resource receipt. */
static const struct {
    gem_first_pass_fn fn;
    const char *name, *role;
} gem_first_passes[GEM_CU_DTYPES][2] = {
    {{gem_fused_first_pass, "gem_fused_first_pass", "fused_first_pass"},
     {gem_fused_first_pass_strided, "gem_fused_first_pass_strided", "fused_first_pass_strided"}},
    {{gem_fused_first_pass_bf16, "gem_fused_first_pass_bf16", "fused_first_pass_bf16"},
     {gem_fused_first_pass_bf16_strided, "gem_fused_first_pass_bf16_strided",
      "fused_first_pass_bf16_strided"}},
    {{gem_fused_first_pass_f16, "gem_fused_first_pass_f16", "fused_first_pass_f16"},
     {gem_fused_first_pass_f16_strided, "gem_fused_first_pass_f16_strided",
      "fused_first_pass_f16_strided"}},
};

/* The reducer of every first pass: grid (n_q_heads, dv / 256), dv the head dimension. */
extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS)
    gem_fused_reducer(const float *__restrict__ part_m, /* (P, n_q_heads) */
                      const float *__restrict__ part_s, /* (P, n_q_heads) */
                      const float *__restrict__ part_o, /* (P, n_q_heads, dv) */
                      float *__restrict__ out,          /* (n_q_heads, dv) */
                      int64_t partitions, int64_t dv)
{
    gem_fused_reducer_body(part_m, part_s, part_o, out, partitions, dv, true);
}

/* The reducer that stops before the division (gem_decode_state): out receives O, state_ms M
 * then S (n_q_heads each). */
extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS)
    gem_fused_state_reducer(const float *__restrict__ part_m, const float *__restrict__ part_s,
                            const float *__restrict__ part_o, float *__restrict__ out,
                            int64_t partitions, int64_t dv, float *__restrict__ state_ms)
{
    gem_fused_reducer_body(part_m, part_s, part_o, out, partitions, dv, true, 0, 0, state_ms);
}

/* gem_decode_merge: the reducer over n states, (n, n_q_heads * (dv + 2)) floats; grid
 * (n_q_heads, dv / 256). */
extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS)
    gem_fused_merge(const float *__restrict__ states, float *__restrict__ out, int64_t n,
                    int64_t dv)
{
    const int64_t nq = gridDim.x, ss = nq * (dv + 2);
    gem_fused_reducer_body(states, states + nq, states + 2 * nq, out, n, dv, true, ss, ss);
}

/* ---- host side ------------------------------------------------------------------ */

/* Whether the D512 first pass for element type t is the staged tensor-core body (BF16, F16). */
static int gem_fused_staged(int t) { return t == GEM_DTYPE_BF16 || t == GEM_DTYPE_F16; }

/* The BF16 and F16 first passes take GEM_MMA_STAGED_BYTES (66,560) of dynamic shared memory,
 * their K-from-V passes GEM_KFV_STAGED_BYTES (33,280) beside 27 KiB of static, both past the
 * 48 KiB a kernel gets without asking: raise their limits on the current device, once
 * per device (the first 64 devices are remembered; any other asks every time, which is
 * harmless). */
cudaError_t gem_cu_fused_allow_staged_shared(void)
{
    static std::atomic<uint64_t> done{0};
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess)
        return e;
    const uint64_t bit = dev >= 0 && dev < 64 ? (uint64_t)1 << dev : 0;
    if (bit && (done.load(std::memory_order_acquire) & bit))
        return cudaSuccess;
    for (int t = 0; t < GEM_CU_DTYPES; t++) {
        for (int l = 0; l < 2 && gem_fused_staged(t); l++) {
            e = cudaFuncSetAttribute(gem_first_passes[t][l].fn,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)GEM_MMA_STAGED_BYTES);
            if (e != cudaSuccess)
                return e;
        }
        if (gem_fused_staged(t) &&
            (e = cudaFuncSetAttribute(gem_first_passes_kfv[t].fn,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)GEM_KFV_STAGED_BYTES)) != cudaSuccess)
            return e;
    }
    for (int l = 0; l < 2; l++) {
        const void *fp8 = l ? (const void *)gem_fused_first_pass_fp8_strided
                            : (const void *)gem_fused_first_pass_fp8;
        if ((e = cudaFuncSetAttribute(fp8, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)GEM_FP8_STAGED_BYTES)) != cudaSuccess)
            return e;
    }
    e = cudaFuncSetAttribute(gem_fused_first_pass_k_from_v_bf16_long,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)GEM_KFV_WARP_BYTES);
    if (e != cudaSuccess)
        return e;
    e = cudaFuncSetAttribute(gem_fused_first_pass_k_from_v_f32_long,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)GEM_KFV_PAIR_BYTES);
    if (e != cudaSuccess)
        return e;
    done.fetch_or(bit, std::memory_order_acq_rel);
    return cudaSuccess;
}

void gem_cu_fused_kernels(gem_cu_kernel_ref *first, gem_cu_kernel_ref *reducer,
                          gem_cu_kernel_ref *kfv_long, gem_cu_kernel_ref *fp8)
{
    for (int l = 0; l < 2; l++) {
        fp8[l].func = l ? (const void *)gem_fused_first_pass_fp8_strided
                        : (const void *)gem_fused_first_pass_fp8;
        fp8[l].name = l ? "gem_fused_first_pass_fp8_strided" : "gem_fused_first_pass_fp8";
        fp8[l].role = l ? "fused_first_pass_fp8_strided" : "fused_first_pass_fp8";
        fp8[l].dynamic_shared = GEM_FP8_STAGED_BYTES;
        fp8[l].threads = GEM_CU_THREADS;
    }
    kfv_long->func = (const void *)gem_fused_first_pass_k_from_v_bf16_long;
    kfv_long->name = "gem_fused_first_pass_k_from_v_bf16_long";
    kfv_long->role = "fused_first_pass_kfv_bf16_long";
    kfv_long->dynamic_shared = GEM_KFV_WARP_BYTES;
    kfv_long->threads = GEM_KFV_WARP_THREADS;
    kfv_long[1].func = (const void *)gem_fused_first_pass_k_from_v_f32_long;
    kfv_long[1].name = "gem_fused_first_pass_k_from_v_f32_long";
    kfv_long[1].role = "fused_first_pass_kfv_f32_long";
    kfv_long[1].dynamic_shared = GEM_KFV_PAIR_BYTES;
    kfv_long[1].threads = GEM_KFV_PAIR_THREADS;
    for (int t = 0; t < GEM_CU_DTYPES; t++)
        for (int l = 0; l < 2; l++) {
            gem_cu_kernel_ref *r = &first[2 * t + l];
            r->func = (const void *)gem_first_passes[t][l].fn;
            r->name = gem_first_passes[t][l].name;
            r->role = gem_first_passes[t][l].role;
            r->dynamic_shared = gem_fused_staged(t) ? GEM_MMA_STAGED_BYTES : 0;
            r->threads = GEM_CU_THREADS;
        }
    for (int t = 0; t < GEM_CU_DTYPES; t++) {
        gem_cu_kernel_ref *r = &first[2 * GEM_CU_DTYPES + t];
        r->func = (const void *)gem_first_passes_kfv[t].fn;
        r->name = gem_first_passes_kfv[t].name;
        r->role = gem_first_passes_kfv[t].role;
        r->dynamic_shared = gem_fused_staged(t) ? GEM_KFV_STAGED_BYTES : 0;
        r->threads = GEM_CU_THREADS;
    }
    for (int t = 0; t < GEM_CU_DTYPES; t++) {
        gem_cu_kernel_ref *r = &first[3 * GEM_CU_DTYPES + t];
        r->func = (const void *)gem_first_passes_d256[t].fn;
        r->name = gem_first_passes_d256[t].name;
        r->role = gem_first_passes_d256[t].role;
        r->dynamic_shared = 0;
        r->threads = GEM_CU_THREADS;
    }
    reducer->func = (const void *)gem_fused_reducer;
    reducer->name = "gem_fused_reducer";
    reducer->role = "fused_reducer";
    reducer->dynamic_shared = 0;
    reducer->threads = GEM_CU_THREADS;
}

int64_t gem_cu_fused_first_blocks(int64_t n_kv_heads, int64_t partitions)
{
    return n_kv_heads * partitions;
}

int64_t gem_cu_fused_reducer_blocks(int64_t n_q_heads)
{
    return n_q_heads * (GEM_CU_D / GEM_CU_THREADS);
}

gem_status gem_cu_fused_launch(const gem_cu_fused_args *a, cudaStream_t stream)
{
    const int d256 = a->head_dim == GEM_CU_D256;
    const int64_t group = d256 ? GEM_CU_D256_GROUP : GEM_CU_GROUP;
    const int fp8 = a->dtype == GEM_DTYPE_FP8_E4M3;
    if ((a->head_dim != GEM_CU_D && !d256) || a->partitions < 1 || a->partitions > 65535 ||
        a->n_kv_heads < 1 || a->n_kv_heads > 65535 / group ||
        ((unsigned)a->dtype >= GEM_CU_DTYPES && !fp8) || (d256 && a->k_weight) ||
        (fp8 && (d256 || a->k_weight || a->n_kv_heads > GEM_CU_FP8_MAX_KV_HEADS ||
                 !a->k_scale || !a->v_scale)))
        return GEM_ERR_PARAM;
    const int64_t n_q_heads = a->n_kv_heads * group;
    const dim3 grid1((unsigned)a->partitions, (unsigned)a->n_kv_heads);
    if (fp8) {
        gem_cu_fp8_scales sc;
        memset(&sc, 0, sizeof sc);
        for (int64_t g = 0; g < a->n_kv_heads; g++) {
            sc.score[g] = (float)((double)a->scale * (double)a->k_scale[g]);
            sc.v[g] = a->v_scale[g];
        }
        const int strided = a->k_ts4 != GEM_CU_D / 4 || a->v_ts4 != GEM_CU_D / 4;
        GEM_CUDA_CHECK(gem_cu_fused_allow_staged_shared());
        GEM_CUDA_CHECK(launch_pdl_shared(
            strided ? gem_fused_first_pass_fp8_strided : gem_fused_first_pass_fp8, grid1,
            GEM_CU_THREADS, (size_t)GEM_FP8_STAGED_BYTES, stream, a->q, a->k, a->k_hs4, a->k_ts4,
            a->v, a->v_hs4, a->v_ts4, a->part_m, a->part_s, a->part_o, a->live, a->partitions,
            n_q_heads, sc));
    } else if (d256) {
        GEM_CUDA_CHECK(launch_pdl(
            gem_first_passes_d256[a->dtype].fn, grid1, GEM_CU_THREADS, stream, a->q, a->k, a->k_hs4, a->k_ts4,
            a->v, a->v_hs4, a->v_ts4, a->part_m, a->part_s, a->part_o, a->live, a->partitions,
            n_q_heads, a->scale));
    } else if (a->k_weight && a->dtype == GEM_DTYPE_BF16 && a->live >= GEM_KFV_WARP_MIN_LIVE) {
        GEM_CUDA_CHECK(gem_cu_fused_allow_staged_shared());
        GEM_CUDA_CHECK(launch_pdl_shared(
            gem_fused_first_pass_k_from_v_bf16_long, grid1, GEM_KFV_WARP_THREADS,
            (size_t)GEM_KFV_WARP_BYTES, stream, a->q, a->k_weight, a->rope, a->v, a->v_hs4,
            a->v_ts4, a->part_m, a->part_s, a->part_o, a->live, a->partitions, n_q_heads,
            a->scale));
    } else if (a->k_weight && a->dtype == GEM_DTYPE_F32 &&
               gem_cu_kfv_f32_long(a->live, a->partitions, a->n_kv_heads, a->sm_count)) {
        GEM_CUDA_CHECK(gem_cu_fused_allow_staged_shared());
        GEM_CUDA_CHECK(launch_pdl_shared(
            gem_fused_first_pass_k_from_v_f32_long, grid1, GEM_KFV_PAIR_THREADS,
            (size_t)GEM_KFV_PAIR_BYTES, stream, a->q, a->k_weight, a->rope, a->v, a->v_hs4,
            a->v_ts4, a->part_m, a->part_s, a->part_o, a->live, a->partitions, n_q_heads,
            a->scale));
    } else if (a->k_weight) {
        const size_t smem = gem_fused_staged(a->dtype) ? GEM_KFV_STAGED_BYTES : 0;
        if (smem)
            GEM_CUDA_CHECK(gem_cu_fused_allow_staged_shared());
        GEM_CUDA_CHECK(launch_pdl_shared(
            gem_first_passes_kfv[a->dtype].fn, grid1, GEM_CU_THREADS, smem, stream, a->q, a->k_weight, a->rope, a->v,
            a->v_hs4, a->v_ts4, a->part_m, a->part_s, a->part_o, a->live, a->partitions,
            n_q_heads, a->scale));
    } else {
        const int strided = a->k_ts4 != GEM_CU_ROW_F4 || a->v_ts4 != GEM_CU_ROW_F4;
        const size_t smem = gem_fused_staged(a->dtype) ? GEM_MMA_STAGED_BYTES : 0;
        if (smem)
            GEM_CUDA_CHECK(gem_cu_fused_allow_staged_shared());
        GEM_CUDA_CHECK(launch_pdl_shared(
            gem_first_passes[a->dtype][strided].fn, grid1, GEM_CU_THREADS, smem, stream, a->q, a->k,
            a->k_hs4, a->k_ts4, a->v, a->v_hs4, a->v_ts4, a->part_m, a->part_s, a->part_o, a->live,
            a->partitions, n_q_heads, a->scale));
    }
    const dim3 grid2((unsigned)n_q_heads, (unsigned)(a->head_dim / GEM_CU_THREADS));
    if (a->state_ms)
        GEM_CUDA_CHECK(launch_pdl(gem_fused_state_reducer, grid2, GEM_CU_THREADS, stream,
                                  (const float *)a->part_m, (const float *)a->part_s,
                                  (const float *)a->part_o, a->out, a->partitions, a->head_dim,
                                  a->state_ms));
    else
        GEM_CUDA_CHECK(launch_pdl(gem_fused_reducer, grid2, GEM_CU_THREADS, stream,
                                  (const float *)a->part_m, (const float *)a->part_s,
                                  (const float *)a->part_o, a->out, a->partitions, a->head_dim));
    return GEM_OK;
}

gem_status gem_cu_fused_merge(const float *states, int64_t n, int64_t n_q, int64_t d, float *out,
                              cudaStream_t stream)
{
    if (d % GEM_CU_THREADS != 0 || n_q < 1 || n_q > INT32_MAX || d / GEM_CU_THREADS > 65535)
        return GEM_ERR_PARAM;
    GEM_CUDA_CHECK(launch_pdl(gem_fused_merge,
                              dim3((unsigned)n_q, (unsigned)(d / GEM_CU_THREADS)), GEM_CU_THREADS,
                              stream, states, out, n, d));
    return GEM_OK;
}
