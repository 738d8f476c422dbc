/*
 * The CUDA backend of gem/decode.h and the queries of gem/cuda.h.
 *
 * A context binds one device (the current one at creation) and holds only
 * what cudaGetDeviceProperties said about it; every call runs on the caller's
 * memory and stream. gem_decode checks the pointers (alignment for the 16-byte
 * loads, cudaPointerGetAttributes for the memory space and device), queues the
 * route's kernels on the stream and returns: no allocation, no copy, no
 * synchronisation.
 *
 * The tuned default is the fused route at tile 8. D512 (gem_cu_default_partitions):
 * P = 64 sequence partitions: results/h200/run8 measured P 64 against 66,
 * 96 and 128 at 8K, 64K and 128K tokens with 4 KV heads on 132 SMs (64 x 4 =
 * 256 first-pass blocks, one wave of two blocks per SM); results/h200/ holds
 * the measurements behind every figure. D256 / group 2 (gem_cu_d256_partitions):
 * P grows with live up to one wave of two blocks per SM (16 at 16 KV heads on 132
 * SMs); dev/cuda/sliding_decode.cu measures it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "decode_stage_clock.h"
#include "gem_cuda_internal.h"

extern "C" {
#include "decode_internal.h"
#include "gem/cpu.h"
#include "gem/cuda.h"
}

/* ---- errors and the device ------------------------------------------------------------ */

gem_status gem_cuda_fail(cudaError_t err, const char *call, const char *file, int line)
{
    int dev = -1;
    (void)cudaGetDevice(&dev);
    fprintf(stderr, "gem cuda: %s failed at %s:%d (device %d): %s: %s\n", call, file, line, dev,
            cudaGetErrorName(err), cudaGetErrorString(err));
    return err == cudaErrorMemoryAllocation ? GEM_ERR_NOMEM : GEM_ERR_DEVICE;
}

gem_status gem_cu_open_device(int *ordinal, cudaDeviceProp *prop)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
        fprintf(stderr, "gem cuda: no GPU: %s\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device present");
        (void)cudaGetLastError();
        return GEM_ERR_NO_DEVICE;
    }
    GEM_CUDA_CHECK(cudaGetDevice(ordinal));
    GEM_CUDA_CHECK(cudaGetDeviceProperties(prop, *ordinal));
    if (prop->major != 9) {
        fprintf(stderr,
                "gem cuda: device %d (%s) has compute capability %d.%d; this build holds sm_90 "
                "code only\n",
                *ordinal, prop->name, prop->major, prop->minor);
        return GEM_ERR_NO_DEVICE;
    }
    return GEM_OK;
}

gem_status gem_cu_check_pointer(const void *p, int device)
{
    cudaPointerAttributes at;
    const cudaError_t e = cudaPointerGetAttributes(&at, p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return GEM_ERR_MEMSPACE;
    }
    if (at.type == cudaMemoryTypeManaged)
        return GEM_OK;
    if (at.type == cudaMemoryTypeDevice && (device < 0 || at.device == device))
        return GEM_OK;
    return GEM_ERR_MEMSPACE; /* host memory, registered or not, or another device */
}

/* ---- the tuned default ------------------------------------------------------------------ */

/* Sequence partitions of the fused route: one wave of two first-pass blocks per SM, rounded
 * down to a multiple of 32 (results/h200/run8: on 132 SMs with 4 KV heads, P 64 beat 66, 96
 * and 128 at 8K, 64K and 128K), at least 32. Independent of live, so the default's workspace
 * never shrinks as live grows. */
static int64_t gem_cu_default_partitions(int sm_count, int64_t n_kv_heads)
{
    int64_t p = (int64_t)sm_count * 2 / n_kv_heads / 32 * 32;
    return p < 32 ? 32 : (p > 1024 ? 1024 : p);
}

/* Sequence partitions of the D256 / group-2 first pass (the sliding-window layers): one per 8
 * rows of live (a row per warp of the block) up to one wave of two first-pass blocks per SM
 * (2 x SMs / KV heads, at least 1, at most 1024): on 132 SMs with 16 KV heads P = 16 from
 * live 121 on. dev/cuda/sliding_decode.cu measured P 2 .. 32 at live 64 .. 4,096 on the H200:
 * P 16 was the fastest or within 2% of it for every type up to 1,024 rows, and for F32 at
 * every length (P 24 was faster for 16-bit caches from 2,048 rows, but slower for F32, which
 * fits two blocks per SM, not three). Non-decreasing in live, so the default's workspace sized
 * at the cache's capacity covers every live length. */
#define GEM_CU_D256_ROWS_PER_PARTITION 8
static int64_t gem_cu_d256_partitions(int sm_count, int64_t n_kv_heads, int64_t live)
{
    int64_t cap = (int64_t)sm_count * 2 / n_kv_heads;
    cap = cap < 1 ? 1 : (cap > 1024 ? 1024 : cap);
    const int64_t want = (live - 1) / GEM_CU_D256_ROWS_PER_PARTITION + 1; /* live >= 1 */
    return want < cap ? want : cap;
}

/* ---- the decode backend ---------------------------------------------------------------- */

/* Baseline calls the stage clock holds events for before it adds their times up. */
#define GEM_CU_CLOCK_CALLS 64

typedef struct cu_decode {
    int device;
    int sm_count;
    char desc[384];
    /* the baseline route's stage clock (decode_stage_clock.h): while on, every baseline call
     * records 5 events (gem_cu_baseline_args.stage_events); their times are added up when
     * the clock is read or the events run out */
    int clock_on;
    cudaEvent_t *clock_ev;  /* (GEM_CU_CLOCK_CALLS * 5), created when first switched on */
    int64_t clock_pending;  /* calls whose events are not yet added */
    gem_baseline_stage_seconds clock_sum;
} cu_decode;

/* Adds the pending calls' stage times (waits for their last events). */
static gem_status cu_clock_flush(cu_decode *c)
{
    for (int64_t i = 0; i < c->clock_pending; i++) {
        cudaEvent_t *e = c->clock_ev + 5 * i;
        cudaError_t err = cudaEventSynchronize(e[4]);
        float ms[4] = {0, 0, 0, 0};
        for (int k = 0; k < 4 && err == cudaSuccess; k++)
            err = cudaEventElapsedTime(&ms[k], e[k], e[k + 1]);
        if (err != cudaSuccess) {
            c->clock_pending = 0;
            return gem_cuda_fail(err, "stage clock", __FILE__, __LINE__);
        }
        c->clock_sum.score += 1e-3 * ms[0];
        c->clock_sum.normalize += 1e-3 * ms[1];
        c->clock_sum.value += 1e-3 * ms[2];
        c->clock_sum.reduce += 1e-3 * ms[3];
        c->clock_sum.calls++;
    }
    c->clock_pending = 0;
    return GEM_OK;
}

extern "C" gem_status cuda_decode_stage_clock_set(void *impl, int on)
{
    cu_decode *c = (cu_decode *)impl;
    if (on && !c->clock_ev) {
        cudaEvent_t *ev = (cudaEvent_t *)calloc(GEM_CU_CLOCK_CALLS * 5, sizeof *ev);
        if (!ev)
            return GEM_ERR_NOMEM;
        for (int i = 0; i < GEM_CU_CLOCK_CALLS * 5; i++) {
            cudaError_t err = cudaEventCreate(&ev[i]);
            if (err != cudaSuccess) {
                for (int j = 0; j < i; j++)
                    cudaEventDestroy(ev[j]);
                free(ev);
                return gem_cuda_fail(err, "cudaEventCreate", __FILE__, __LINE__);
            }
        }
        c->clock_ev = ev;
    }
    c->clock_on = on;
    return GEM_OK;
}

extern "C" gem_status cuda_decode_stage_clock_read(const void *impl, gem_baseline_stage_seconds *out)
{
    cu_decode *c = (cu_decode *)impl; /* adding the pending events up changes no result */
    gem_status st = cu_clock_flush(c);
    *out = c->clock_sum;
    return st;
}

extern "C" gem_status cuda_decode_stage_clock_reset(void *impl)
{
    cu_decode *c = (cu_decode *)impl;
    gem_status st = cu_clock_flush(c);
    memset(&c->clock_sum, 0, sizeof c->clock_sum);
    return st;
}

static gem_status cu_create(int64_t threads, void **impl)
{
    (void)threads;
    *impl = NULL;
    cudaDeviceProp prop;
    int dev = -1;
    gem_status st = gem_cu_open_device(&dev, &prop);
    if (st != GEM_OK)
        return st;
    /* here, before any call: a stream being captured into a graph then needs no attribute set */
    GEM_CUDA_CHECK(gem_cu_fused_allow_staged_shared());
    cu_decode *c = (cu_decode *)calloc(1, sizeof *c);
    if (!c)
        return GEM_ERR_NOMEM;
    c->device = dev;
    c->sm_count = prop.multiProcessorCount;
    snprintf(c->desc, sizeof c->desc, "%s, sm_%d%d, %d SMs, device %d", prop.name, prop.major,
             prop.minor, prop.multiProcessorCount, dev);
    *impl = c;
    return GEM_OK;
}

static void cu_destroy(void *impl)
{
    cu_decode *c = (cu_decode *)impl;
    if (c && c->clock_ev) {
        for (int i = 0; i < GEM_CU_CLOCK_CALLS * 5; i++)
            cudaEventDestroy(c->clock_ev[i]);
        free(c->clock_ev);
    }
    free(impl);
}
static int64_t cu_threads(const void *impl)
{
    (void)impl;
    return 1;
}
static int cu_device(const void *impl) { return ((const cu_decode *)impl)->device; }
static const char *cu_describe(const void *impl) { return ((const cu_decode *)impl)->desc; }

/* 1 when the shape has dk = dv = d and `group` query heads per KV head, with n_kv_heads within
 * what a grid dimension holds (65535 / group; checked before the product is formed). */
static int cu_shape_is(const gem_decode_shape *s, int64_t d, int64_t group)
{
    return s->dk == d && s->dv == d && s->n_kv_heads <= 65535 / group &&
           s->n_q_heads == s->n_kv_heads * group;
}

/* The full-attention layers' shape: D512, eight query heads per KV head. */
static int cu_shape_d512(const gem_decode_shape *s)
{
    return cu_shape_is(s, GEM_CU_D, GEM_CU_GROUP);
}

/* The sliding-window layers' shape: D256, two query heads per KV head. */
static int cu_shape_d256(const gem_decode_shape *s)
{
    return cu_shape_is(s, GEM_CU_D256, GEM_CU_D256_GROUP);
}

/* K and V of one element type. F32, BF16 or F16: D512, eight query heads per KV head: both
 * routes; D256, two query heads per KV head: the fused route. FP8 E4M3: D512, both routes, at
 * most GEM_CU_FP8_MAX_KV_HEADS KV heads (their scales travel in the launch). */
static gem_status cu_supports(const void *impl, const gem_decode_shape *s, gem_dtype kt,
                              gem_dtype vt, gem_route route)
{
    (void)impl;
    if (kt == GEM_DTYPE_FP8_E4M3 && vt == kt)
        return cu_shape_d512(s) && s->n_kv_heads <= GEM_CU_FP8_MAX_KV_HEADS
                   ? GEM_OK
                   : GEM_ERR_UNSUPPORTED;
    if (kt != vt || (unsigned)kt >= GEM_CU_DTYPES)
        return GEM_ERR_UNSUPPORTED;
    if (cu_shape_d512(s))
        return GEM_OK;
    if (cu_shape_d256(s))
        return route == GEM_ROUTE_FUSED ? GEM_OK : GEM_ERR_UNSUPPORTED;
    if (gem_cu_general_supports(s, kt, vt)) /* the other small shapes: fused only */
        return route == GEM_ROUTE_FUSED ? GEM_OK : GEM_ERR_UNSUPPORTED;
    return GEM_ERR_UNSUPPORTED;
}

/* Gemma 4's full layers: pairs (j, j + 256), at most 64 of them rotating (the kernel's slot
 * 0 covers elements 0-63 and 256-319; pairs past n_pairs get frequency 0, an exact identity). */
static gem_status cu_k_from_v_supports(const void *impl, const gem_decode_shape *s,
                                       gem_dtype v_dtype, const gem_k_from_v *kfv)
{
    (void)impl;
    /* cu_supports passed the shape; only the D512 first passes of F32, BF16 and F16 V rebuild
     * K */
    if (!cu_shape_d512(s) || (unsigned)v_dtype >= GEM_CU_DTYPES ||
        kfv->half != GEM_CU_ROPE_HALF || kfv->n_pairs > GEM_CU_ROPE_PAIRS)
        return GEM_ERR_UNSUPPORTED;
    return GEM_OK;
}

/* The fused route's partitions for a view. The long F32 K-from-V pass holds one block an SM,
 * so the default's 64 partitions at 4 KV heads are two waves (256 blocks on 132 SMs), each
 * block paying its prologue and merge; one wave, SMs / KV heads partitions (33 on an H200 at 4
 * KV heads), took 5% less time at 128K, 7% at 64K and 18% at 20K (dev/cuda/kfv_timeline.cu,
 * results/h200/run148). At one wave the pass beats the CUDA-core pass at its default from 12K
 * on (single calls, run 149: 0.0451 ms against 0.0559 at 12K, 0.0545 against 0.0710 at 16K;
 * gem bench, runs 150-151: 0.059 against 0.071 at 16K) but not at 8K (gem bench: 0.042 against
 * 0.040), so an F32 V rebuilding K takes one wave from GEM_KFV_PAIR_MIN_LIVE_ONE_WAVE (12,288)
 * rows on. Other views: def. */
static int64_t cu_kfv_f32_partitions(int sm_count, int64_t n_kv_heads, int64_t live,
                                     int64_t def)
{
    if (live < GEM_KFV_PAIR_MIN_LIVE_ONE_WAVE)
        return def;
    const int64_t one_wave = (int64_t)sm_count / n_kv_heads;
    return one_wave < 1 ? 1 : (one_wave < def ? one_wave : def);
}

static int64_t cu_view_partitions(const void *impl, const gem_decode_shape *s,
                                  const gem_kv_view *kv, int64_t def)
{
    if (!kv->k_from_v || kv->v_dtype != GEM_DTYPE_F32 || !cu_shape_d512(s))
        return def;
    return cu_kfv_f32_partitions(((const cu_decode *)impl)->sm_count, s->n_kv_heads, kv->live,
                                 def);
}

static void cu_config_default(const void *impl, const gem_decode_shape *s, int64_t live,
                              gem_decode_config *out)
{
    const int sms = ((const cu_decode *)impl)->sm_count;
    out->route = GEM_ROUTE_FUSED;
    out->partitions = cu_shape_d256(s)   ? gem_cu_d256_partitions(sms, s->n_kv_heads, live)
                      : cu_shape_d512(s) ? gem_cu_default_partitions(sms, s->n_kv_heads)
                                         : gem_cu_general_partitions(live);
    out->tile = 8;
}

static gem_status cu_config_check(const void *impl, const gem_decode_config *c)
{
    (void)impl;
    if (c->route == GEM_ROUTE_FUSED && c->tile != 8)
        return GEM_ERR_PARAM; /* the fused first passes step 8 tokens at a time */
    return GEM_OK;
}

static gem_status cu_workspace_bytes(const void *impl, const gem_decode_shape *s, int64_t live,
                                     const gem_decode_config *c, size_t *bytes)
{
    (void)impl;
    if (c->route == GEM_ROUTE_FUSED) {
        gem_online_scratch sc;
        gem_status st = gem_attention_online_scratch_bytes(c->partitions, s->n_q_heads, s->dv, &sc);
        if (st == GEM_OK)
            *bytes = sc.total_bytes;
        return st;
    }
    gem_baseline_scratch sc;
    gem_status st = gem_baseline_scratch_bytes(live, s->n_q_heads, s->dv, c->partitions, &sc);
    if (st == GEM_OK)
        *bytes = sc.total_bytes;
    return st;
}

static int misaligned16(const void *p) { return ((uintptr_t)p & 15u) != 0; }

/* The kernels load a piece of a row at once: four elements of F32 (16 bytes), eight of BF16 or
 * F16 (16 bytes, the tensor-core first passes), sixteen FP8 codes (16 bytes). Base pointers
 * aligned to the piece, strides multiples of its elements. */
static int view_misaligned(const gem_kv_view *kv)
{
    const int64_t n =
        kv->v_dtype == GEM_DTYPE_F32 ? 4 : (kv->v_dtype == GEM_DTYPE_FP8_E4M3 ? 16 : 8);
    const uintptr_t piece = (uintptr_t)n * (uintptr_t)gem_dtype_size(kv->v_dtype);
    /* a view without K (K rebuilt from V) has k NULL and K strides 0 */
    return ((uintptr_t)kv->k % piece) != 0 || ((uintptr_t)kv->v % piece) != 0 ||
           kv->k_head_stride % n || kv->k_token_stride % n || kv->v_head_stride % n ||
           kv->v_token_stride % n;
}

static gem_status cu_check_memory(const void *impl, const gem_decode_args *a)
{
    const cu_decode *c = (const cu_decode *)impl;
    const gem_kv_view *kv = a->kv;
    /* 16-byte loads of q and the partials, 4-element pieces of K and V rows; a state (whose
     * stores are single floats) only float-aligned, so states stack at any shape */
    if (misaligned16(a->q) || (a->state ? ((uintptr_t)a->out & 3u) != 0 : misaligned16(a->out)) ||
        view_misaligned(kv))
        return GEM_ERR_ALIGN;
    /* K rebuilt from V: k_weight in the place of k */
    const void *ptrs[5] = {a->q, a->out, kv->k_from_v ? (const void *)kv->k_from_v->k_weight : kv->k,
                           kv->v, a->workspace};
    for (int i = 0; i < 5; i++) {
        gem_status st = gem_cu_check_pointer(ptrs[i], c->device);
        if (st != GEM_OK)
            return st;
    }
    return GEM_OK;
}

/* Runs `body` with the context's device current, restoring the caller's device after;
 * on a failure to switch, st holds the error and body does not run. */
#define GEM_CU_ON_DEVICE(c, st, body)                                                          \
    do {                                                                                       \
        int gem_prev_ = -1;                                                                    \
        cudaError_t gem_e_ = cudaGetDevice(&gem_prev_);                                        \
        if (gem_e_ != cudaSuccess) {                                                           \
            st = gem_cuda_fail(gem_e_, "cudaGetDevice", __FILE__, __LINE__);                   \
            break;                                                                             \
        }                                                                                      \
        if (gem_prev_ != (c)->device && (gem_e_ = cudaSetDevice((c)->device)) != cudaSuccess) { \
            st = gem_cuda_fail(gem_e_, "cudaSetDevice", __FILE__, __LINE__);                   \
            break;                                                                             \
        }                                                                                      \
        body;                                                                                  \
        if (gem_prev_ != (c)->device)                                                          \
            (void)cudaSetDevice(gem_prev_);                                                    \
    } while (0)

static gem_status cu_run(void *impl, const gem_decode_args *a)
{
    cu_decode *c = (cu_decode *)impl;
    const gem_kv_view *kv = a->kv;
    cudaStream_t stream = (cudaStream_t)a->stream;
    gem_status st = GEM_OK;
    if (a->cfg.route == GEM_ROUTE_FUSED) {
        const size_t ms = (size_t)a->cfg.partitions * (size_t)a->shape->n_q_heads;
        gem_cu_fused_args f;
        f.q = a->q;
        f.k = kv->k;
        f.v = kv->v;
        f.dtype = kv->k_dtype;
        f.k_weight = NULL;
        memset(&f.rope, 0, sizeof f.rope);
        if (kv->k_from_v) { /* the frequencies travel in the launch; zero past n_pairs */
            f.k_weight = kv->k_from_v->k_weight;
            for (int64_t j = 0; j < kv->k_from_v->n_pairs; j++)
                f.rope.inv_freq[j] = kv->k_from_v->inv_freq[j];
            f.rope.pos0 = kv->k_from_v->pos0;
        }
        f.k_hs4 = kv->k_head_stride / 4;
        f.k_ts4 = kv->k_token_stride / 4;
        f.v_hs4 = kv->v_head_stride / 4;
        f.v_ts4 = kv->v_token_stride / 4;
        f.part_m = (float *)a->workspace;
        f.part_s = f.part_m + ms;
        f.part_o = f.part_m + 2 * ms;
        /* gem_decode_state: m and s first, then o where the output would be */
        f.state_ms = a->state ? a->out : NULL;
        f.out = a->state ? a->out + 2 * a->shape->n_q_heads : a->out;
        f.head_dim = a->shape->dk; /* GEM_CU_D or GEM_CU_D256: cu_supports passed the shape */
        if (!cu_shape_d512(a->shape) && !cu_shape_d256(a->shape)) { /* the general kernel */
            GEM_CU_ON_DEVICE(c, st,
                             st = gem_cu_general_launch(a->shape, a->q, kv, f.out, f.state_ms,
                                                        a->workspace, a->cfg.partitions, stream));
            return st;
        }
        f.n_kv_heads = a->shape->n_kv_heads;
        f.live = kv->live;
        f.partitions = a->cfg.partitions;
        f.scale = a->shape->scale;
        f.sm_count = c->sm_count;
        f.k_scale = kv->k_scale; /* FP8: the heads' scales (gem_decode checked them) */
        f.v_scale = kv->v_scale;
        GEM_CU_ON_DEVICE(c, st, st = gem_cu_fused_launch(&f, stream));
    } else {
        gem_cu_baseline_args b;
        b.q = a->q;
        b.k = kv->k;
        b.v = kv->v;
        b.dtype = kv->k_dtype; /* = v_dtype (cu_supports) */
        b.k_scale = kv->k_scale; /* FP8: the heads' scales (gem_decode checked them) */
        b.v_scale = kv->v_scale;
        b.k_hs4 = kv->k_head_stride / 4;
        b.k_ts4 = kv->k_token_stride / 4;
        b.v_hs4 = kv->v_head_stride / 4;
        b.v_ts4 = kv->v_token_stride / 4;
        b.scores = (float *)a->workspace;
        b.partials = b.scores + (size_t)a->shape->n_q_heads * (size_t)kv->live;
        b.out = a->out;
        b.n_kv_heads = a->shape->n_kv_heads;
        b.live = kv->live;
        b.value_partitions = a->cfg.partitions;
        b.scale = a->shape->scale;
        b.stage_events = NULL;
        if (c->clock_on) {
            if (c->clock_pending == GEM_CU_CLOCK_CALLS && (st = cu_clock_flush(c)) != GEM_OK)
                return st;
            b.stage_events = c->clock_ev + 5 * c->clock_pending;
        }
        GEM_CU_ON_DEVICE(c, st, st = gem_cu_baseline_launch(&b, stream));
        if (st == GEM_OK && c->clock_on)
            c->clock_pending++;
    }
    return st;
}

/* ---- finiteness ------------------------------------------------------------------------ */

/* 1 when any of four elements (in the element type E's piece) is NaN or infinite. */
template <typename P> __device__ __forceinline__ int gem_piece_bad(P x);
template <> __device__ __forceinline__ int gem_piece_bad<float4>(float4 x)
{
    return !isfinite(x.x) | !isfinite(x.y) | !isfinite(x.z) | !isfinite(x.w);
}
/* four FP8 E4M3 codes: S.1111.111 is NaN (E4M3 has no infinity) */
__device__ __forceinline__ int gem_fp8_bad(uint32_t x)
{
    int bad = 0;
#pragma unroll
    for (int j = 0; j < 4; j++)
        bad |= ((x >> (8 * j)) & 0x7Fu) == 0x7Fu;
    return bad;
}
/* 16-bit pieces: exponent bits all ones (BF16 0x7F80, F16 0x7C00) */
template <int MASK> __device__ __forceinline__ int gem_half_bad(uint2 x)
{
    const unsigned m = (unsigned)MASK;
    return ((x.x & m) == m) | (((x.x >> 16) & m) == m) | ((x.y & m) == m) |
           (((x.y >> 16) & m) == m);
}

/* Sets *flag when any of the rows holds NaN or infinity. Grid (row blocks, heads); each
 * thread walks its pieces of a row (d4 pieces of 4 elements). q is scanned by head 0's blocks.
 * MASK: 0 F32 (P float4), a 16-bit type's exponent bits (P uint2), GEM_SCAN_FP8 (P uint32_t). */
#define GEM_SCAN_FP8 0x7F
template <typename P, int MASK>
__device__ __forceinline__ int gem_scan_bad(const P &x)
{
    if constexpr (MASK == 0)
        return gem_piece_bad<float4>(*reinterpret_cast<const float4 *>(&x));
    else if constexpr (MASK == GEM_SCAN_FP8)
        return gem_fp8_bad(*reinterpret_cast<const uint32_t *>(&x));
    else
        return gem_half_bad<MASK>(*reinterpret_cast<const uint2 *>(&x));
}
template <typename P, int MASK>
__global__ void gem_finite_scan_kernel(const float4 *__restrict__ q, int64_t q4,
                                       const P *__restrict__ k, int64_t k_hs4, int64_t k_ts4,
                                       int64_t dk4, const P *__restrict__ v, int64_t v_hs4,
                                       int64_t v_ts4, int64_t dv4, int64_t live, int *flag)
{
    const int64_t g = blockIdx.y;
    int bad = 0;
    for (int64_t t = blockIdx.x; t < live; t += gridDim.x) {
        for (int64_t i = threadIdx.x; i < dk4; i += blockDim.x) {
            bad |= gem_scan_bad<P, MASK>(k[g * k_hs4 + t * k_ts4 + i]);
        }
        for (int64_t i = threadIdx.x; i < dv4; i += blockDim.x) {
            bad |= gem_scan_bad<P, MASK>(v[g * v_hs4 + t * v_ts4 + i]);
        }
    }
    if (g == 0 && blockIdx.x == 0)
        for (int64_t i = threadIdx.x; i < q4; i += blockDim.x) {
            const float4 x = q[i];
            bad |= !isfinite(x.x) | !isfinite(x.y) | !isfinite(x.z) | !isfinite(x.w);
        }
    if (bad)
        *flag = 1; /* every writer stores the same value: no reduction, no order */
}

/* The scan on the current device: a flag, the kernel, the flag back, waiting for `stream`. */
static gem_status cu_scan(const gem_decode_shape *s, const float *q, const gem_kv_view *kv,
                          cudaStream_t stream)
{
    int *flag = NULL, host = 0;
    cudaError_t e = cudaMalloc((void **)&flag, sizeof(int));
    if (e == cudaSuccess)
        e = cudaMemsetAsync(flag, 0, sizeof(int), stream);
    if (e == cudaSuccess) {
        const int64_t blocks = kv->live < 4096 ? kv->live : 4096;
        const dim3 grid((unsigned)blocks, (unsigned)s->n_kv_heads);
        const float4 *q4 = (const float4 *)q;
        const int64_t nq4 = s->n_q_heads * s->dk / 4, khs = kv->k_head_stride / 4,
                      kts = kv->k_token_stride / 4, vhs = kv->v_head_stride / 4,
                      vts = kv->v_token_stride / 4;
        if (kv->k_dtype == GEM_DTYPE_F32)
            gem_finite_scan_kernel<float4, 0><<<grid, 128, 0, stream>>>(
                q4, nq4, (const float4 *)kv->k, khs, kts, s->dk / 4, (const float4 *)kv->v, vhs,
                vts, s->dv / 4, kv->live, flag);
        else if (kv->k_dtype == GEM_DTYPE_FP8_E4M3)
            gem_finite_scan_kernel<uint32_t, GEM_SCAN_FP8><<<grid, 128, 0, stream>>>(
                q4, nq4, (const uint32_t *)kv->k, khs, kts, s->dk / 4, (const uint32_t *)kv->v,
                vhs, vts, s->dv / 4, kv->live, flag);
        else if (kv->k_dtype == GEM_DTYPE_BF16)
            gem_finite_scan_kernel<uint2, 0x7F80><<<grid, 128, 0, stream>>>(
                q4, nq4, (const uint2 *)kv->k, khs, kts, s->dk / 4, (const uint2 *)kv->v, vhs, vts,
                s->dv / 4, kv->live, flag);
        else
            gem_finite_scan_kernel<uint2, 0x7C00><<<grid, 128, 0, stream>>>(
                q4, nq4, (const uint2 *)kv->k, khs, kts, s->dk / 4, (const uint2 *)kv->v, vhs, vts,
                s->dv / 4, kv->live, flag);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(&host, flag, sizeof(int), cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(stream);
    if (flag)
        cudaFree(flag);
    if (e != cudaSuccess)
        return gem_cuda_fail(e, "the finiteness scan", __FILE__, __LINE__);
    return host ? GEM_ERR_NONFINITE : GEM_OK;
}

static gem_status cu_check_finite(void *impl, const gem_decode_shape *s, const float *q,
                                  const gem_kv_view *kv, void *stream)
{
    cu_decode *c = (cu_decode *)impl;
    gem_status st = cu_supports(impl, s, kv->k_dtype, kv->v_dtype, GEM_ROUTE_FUSED);
    if (st != GEM_OK)
        return st;
    if (misaligned16(q) || view_misaligned(kv))
        return GEM_ERR_ALIGN;
    const gem_k_from_v *kfv = kv->k_from_v;
    const void *ptrs[3] = {q, kfv ? (const void *)kfv->k_weight : kv->k, kv->v};
    for (int i = 0; i < 3; i++)
        if ((st = gem_cu_check_pointer(ptrs[i], c->device)) != GEM_OK)
            return st;
    if (kfv) {
        /* k_weight (dk floats, dk <= GEM_CU_D by cu_supports) on the host; the scan then reads
         * V in the place of K */
        float w[GEM_CU_D];
        const size_t w_bytes = (size_t)s->dk * sizeof(float);
        GEM_CU_ON_DEVICE(c, st, {
            const cudaError_t e = cudaMemcpy(w, kfv->k_weight, w_bytes, cudaMemcpyDeviceToHost);
            if (e != cudaSuccess)
                st = gem_cuda_fail(e, "cudaMemcpy", __FILE__, __LINE__);
        });
        if (st != GEM_OK)
            return st;
        for (int64_t i = 0; i < s->dk; i++)
            if (!isfinite(w[i]))
                return GEM_ERR_NONFINITE;
        gem_kv_view vv = *kv;
        vv.k = kv->v;
        vv.k_head_stride = kv->v_head_stride;
        vv.k_token_stride = kv->v_token_stride;
        vv.k_from_v = NULL;
        GEM_CU_ON_DEVICE(c, st, st = cu_scan(s, q, &vv, (cudaStream_t)stream));
        return st;
    }
    GEM_CU_ON_DEVICE(c, st, st = cu_scan(s, q, kv, (cudaStream_t)stream));
    return st;
}

/* Device memory of the context's device (cudaMalloc aligns to 256 bytes). */
static gem_status cu_workspace_alloc(void *impl, size_t bytes, void **out)
{
    cu_decode *c = (cu_decode *)impl;
    gem_status st = GEM_OK;
    void *p = NULL;
    GEM_CU_ON_DEVICE(c, st, {
        const cudaError_t e = cudaMalloc(&p, bytes);
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError(); /* not sticky: clear it */
            st = GEM_ERR_NOMEM;
        } else if (e != cudaSuccess) {
            st = gem_cuda_fail(e, "cudaMalloc", __FILE__, __LINE__);
        }
    });
    if (st == GEM_OK)
        *out = p;
    return st;
}

/* Waits for the device's queued work (any stream may still read the memory), then frees. */
static void cu_workspace_free(void *impl, void *p)
{
    cu_decode *c = (cu_decode *)impl;
    gem_status st = GEM_OK;
    GEM_CU_ON_DEVICE(c, st, {
        (void)cudaDeviceSynchronize();
        (void)cudaFree(p);
    });
    if (st != GEM_OK) /* the device could not be made current (gem_cuda_fail said why) */
        return;
}

static gem_status cu_merge(void *impl, const gem_decode_shape *s, const float *states, int64_t n,
                           float *out, void *stream, int run)
{
    cu_decode *c = (cu_decode *)impl;
    if (((uintptr_t)states & 3u) != 0 || ((uintptr_t)out & 3u) != 0)
        return GEM_ERR_ALIGN; /* the merge loads and stores single floats */
    gem_status st = gem_cu_check_pointer(states, c->device);
    if (st == GEM_OK)
        st = gem_cu_check_pointer(out, c->device);
    if (st != GEM_OK)
        return st;
    const int64_t nq = s->n_q_heads, d = s->dv;
    if (nq > INT32_MAX)
        return GEM_ERR_UNSUPPORTED; /* one block per head */
    if (!run)
        return GEM_OK;
    GEM_CU_ON_DEVICE(c, st,
                     st = d % GEM_CU_THREADS == 0 && d / GEM_CU_THREADS <= 65535
                              ? gem_cu_fused_merge(states, n, nq, d, out, (cudaStream_t)stream)
                              : gem_cu_general_merge(states, n, nq, d, out, (cudaStream_t)stream));
    return st;
}

/* On the piece's device (current): its state's copy to `place` on the leader's device, queued
 * on the piece's stream ps (none where the state is already there), and where ev is not NULL
 * an event recorded after it for the leader's stream to wait for. */
static cudaError_t cu_piece_to_leader(float *place, int leader_device, const float *state,
                                      int device, size_t bytes, cudaStream_t ps, cudaEvent_t *ev)
{
    cudaError_t e = cudaSuccess;
    if (state != place)
        e = device == leader_device
                ? cudaMemcpyAsync(place, state, bytes, cudaMemcpyDeviceToDevice, ps)
                : cudaMemcpyPeerAsync(place, leader_device, state, device, bytes, ps);
    if (e != cudaSuccess || !ev)
        return e;
    if ((e = cudaEventCreateWithFlags(ev, cudaEventDisableTiming)) != cudaSuccess)
        return e;
    return cudaEventRecord(*ev, ps);
}

/* On the leader's device (current, so that a NULL stream is its default stream): ls waits for
 * *ev, which is then destroyed (CUDA keeps it until its work completes) and set to NULL. */
static cudaError_t cu_leader_wait(cudaStream_t ls, cudaEvent_t *ev)
{
    cudaError_t e = cudaStreamWaitEvent(ls, *ev, 0);
    const cudaError_t d = cudaEventDestroy(*ev);
    *ev = NULL;
    return e == cudaSuccess ? d : e;
}

/* Piece by piece: its state on its device and stream (cu_run), then its way to the leader
 * (cu_piece_to_leader); then the merge on the leader's stream. */
static gem_status cu_across(void *leader, const gem_decode_shape *shape, void *const *impls,
                            const gem_decode_args *args, int64_t n, float *states, float *out,
                            void *stream)
{
    cu_decode *l = (cu_decode *)leader;
    const int64_t sf = GEM_DECODE_STATE_FLOATS(shape->n_q_heads, shape->dv);
    const size_t bytes = (size_t)sf * sizeof(float);
    for (int64_t i = 0; i < n; i++) {
        cu_decode *c = (cu_decode *)impls[i];
        gem_status st = cu_run(c, &args[i]);
        if (st != GEM_OK)
            return st;
        /* no event where the piece's stream is the leader's */
        const int same = args[i].stream == stream && c->device == l->device;
        cudaError_t e = cudaSuccess;
        cudaEvent_t ev = NULL;
        GEM_CU_ON_DEVICE(c, st,
                         e = cu_piece_to_leader(states + i * sf, l->device, args[i].out,
                                                c->device, bytes, (cudaStream_t)args[i].stream,
                                                same ? NULL : &ev));
        if (st == GEM_OK && e == cudaSuccess && ev)
            GEM_CU_ON_DEVICE(l, st, e = cu_leader_wait((cudaStream_t)stream, &ev));
        if (ev) /* not waited for: a failure before */
            (void)cudaEventDestroy(ev);
        if (st == GEM_OK && e != cudaSuccess)
            st = gem_cuda_fail(e, "gem_decode_across", __FILE__, __LINE__);
        if (st != GEM_OK)
            return st;
    }
    return cu_merge(leader, shape, states, n, out, stream, 1);
}

extern "C" const gem_decode_backend_ops gem_cuda_decode_ops = {
    cu_create,         cu_destroy,         cu_threads,  cu_device,          cu_describe,
    cu_supports,       cu_k_from_v_supports, cu_config_default, cu_config_check,
    cu_workspace_bytes, cu_check_memory,
    cu_run,            cu_check_finite,    cu_view_partitions,
    cu_workspace_alloc, cu_workspace_free, cu_merge, cu_across,
};

/* ---- KV cache helper: device memory ---------------------------------------------------- */

static gem_status cache_alloc(size_t bytes, void **out)
{
    cudaDeviceProp prop;
    int dev = -1;
    gem_status st = gem_cu_open_device(&dev, &prop);
    if (st != GEM_OK)
        return st;
    void *p = NULL;
    GEM_CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 16));
    const cudaError_t e = cudaMemset(p, 0, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        cudaFree(p);
        return gem_cuda_fail(e, "cudaMemset", __FILE__, __LINE__);
    }
    *out = p;
    return GEM_OK;
}

static void cache_free(void *p) { cudaFree(p); }

/* F32 to bfloat16 / IEEE half, round to nearest even (the CPU helper's rule). */
__device__ __forceinline__ uint16_t gem_to_bf16(float f)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}
__device__ __forceinline__ uint16_t gem_to_f16(float f) { return __half_as_ushort(__float2half_rn(f)); }

/* 1 when finite x stays finite in type t (round to nearest even may overflow 16 bits). */
__device__ __forceinline__ int gem_fits(float x, int t)
{
    if (t == GEM_DTYPE_BF16)
        return isfinite(__bfloat162float(__float2bfloat16_rn(x)));
    if (t == GEM_DTYPE_F16)
        return isfinite(__half2float(__float2half_rn(x)));
    return 1;
}

/* Row i of the n appended tokens, head g, into cache row (first + i) % capacity; a value
 * that is not finite, or that becomes infinite in a 16-bit cache, sets *flag. Grid
 * (n, heads), block 128: thread j copies elements j, j + 128, ... of the K and V rows. */
extern "C" __global__ void gem_cache_append_kernel(const float *__restrict__ k, /* (n, heads, dk) */
                                                   const float *__restrict__ v, /* (n, heads, dv) */
                                                   int64_t heads, int64_t dk, int64_t dv,
                                                   int64_t capacity, int64_t first, void *kc,
                                                   int kt, void *vc, int vt, int *flag)
{
    const int64_t i = blockIdx.x, g = blockIdx.y;
    const int64_t row = (first + i) % capacity;
    int bad = 0;
    const float *ks = k + (i * heads + g) * dk;
    const int64_t ko = (g * capacity + row) * dk;
    for (int64_t j = threadIdx.x; j < dk; j += blockDim.x) {
        const float x = ks[j];
        bad |= !isfinite(x) || !gem_fits(x, kt);
        if (kt == GEM_DTYPE_F32)
            ((float *)kc)[ko + j] = x;
        else
            ((uint16_t *)kc)[ko + j] = kt == GEM_DTYPE_BF16 ? gem_to_bf16(x) : gem_to_f16(x);
    }
    const float *vs = v + (i * heads + g) * dv;
    const int64_t vo = (g * capacity + row) * dv;
    for (int64_t j = threadIdx.x; j < dv; j += blockDim.x) {
        const float x = vs[j];
        bad |= !isfinite(x) || !gem_fits(x, vt);
        if (vt == GEM_DTYPE_F32)
            ((float *)vc)[vo + j] = x;
        else
            ((uint16_t *)vc)[vo + j] = vt == GEM_DTYPE_BF16 ? gem_to_bf16(x) : gem_to_f16(x);
    }
    if (bad)
        *flag = 1;
}

static gem_status cache_append(const float *k, const float *v, int64_t n, int64_t heads,
                               int64_t dk, int64_t dv, int64_t capacity, int64_t first, void *kc,
                               gem_dtype kt, void *vc, gem_dtype vt, int *flag, void *stream)
{
    if (n > INT32_MAX || heads > 65535)
        return GEM_ERR_UNSUPPORTED;
    gem_cache_append_kernel<<<dim3((unsigned)n, (unsigned)heads), 128, 0, (cudaStream_t)stream>>>(
        k, v, heads, dk, dv, capacity, first, kc, (int)kt, vc, (int)vt, flag);
    GEM_CUDA_CHECK(cudaGetLastError());
    return GEM_OK;
}

static gem_status cache_flag_reset(int *flag, void *stream)
{
    GEM_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), (cudaStream_t)stream));
    return GEM_OK;
}

static gem_status cache_flag_read(const int *flag, void *stream, int *value)
{
    int host = 0;
    GEM_CUDA_CHECK(
        cudaMemcpyAsync(&host, flag, sizeof(int), cudaMemcpyDeviceToHost, (cudaStream_t)stream));
    GEM_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    *value = host;
    return GEM_OK;
}

static gem_status cache_check_pointer(const void *p) { return gem_cu_check_pointer(p, -1); }

extern "C" const gem_cache_ops gem_cuda_cache_ops = {
    cache_alloc, cache_free, cache_append, cache_flag_reset, cache_flag_read, cache_check_pointer,
};

/* ---- gem/cuda.h ------------------------------------------------------------------------ */

extern "C" gem_status gem_cuda_device_query(gem_cuda_device_info *out)
{
    if (!out)
        return GEM_ERR_NULL;
    cudaDeviceProp prop;
    int dev = -1;
    gem_status st = gem_cu_open_device(&dev, &prop);
    if (st != GEM_OK)
        return st;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->ordinal = dev;
    out->major = prop.major;
    out->minor = prop.minor;
    out->sm_count = prop.multiProcessorCount;
    out->warp_size = prop.warpSize;
    out->shared_mem_per_block = prop.sharedMemPerBlock;
    out->shared_mem_per_block_optin = prop.sharedMemPerBlockOptin;
    out->shared_mem_per_sm = prop.sharedMemPerMultiprocessor;
    out->regs_per_sm = prop.regsPerMultiprocessor;
    out->l2_bytes = (size_t)prop.l2CacheSize;
    out->global_mem_bytes = prop.totalGlobalMem;
    GEM_CUDA_CHECK(cudaDeviceGetAttribute(&out->memory_clock_khz, cudaDevAttrMemoryClockRate, dev));
    GEM_CUDA_CHECK(
        cudaDeviceGetAttribute(&out->memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
    out->nominal_bytes_per_second =
        2.0 * (double)out->memory_clock_khz * 1e3 * (double)out->memory_bus_bits / 8.0;
    return GEM_OK;
}

static gem_status gem_cu_kernel_info(const gem_cu_kernel_ref *r, int64_t grid,
                                     gem_cuda_kernel_info *out)
{
    cudaFuncAttributes fa;
    GEM_CUDA_CHECK(cudaFuncGetAttributes(&fa, r->func));
    int active = 0;
    GEM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&active, r->func, r->threads,
                                                                 r->dynamic_shared));
    int warp = 0, dev = 0;
    GEM_CUDA_CHECK(cudaGetDevice(&dev));
    GEM_CUDA_CHECK(cudaDeviceGetAttribute(&warp, cudaDevAttrWarpSize, dev));
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", r->name);
    snprintf(out->role, sizeof out->role, "%s", r->role);
    out->max_threads_per_block = fa.maxThreadsPerBlock;
    out->static_shared_bytes = fa.sharedSizeBytes;
    out->dynamic_shared_bytes = r->dynamic_shared;
    out->registers = fa.numRegs;
    out->local_bytes = fa.localSizeBytes;
    out->threads_dispatched = r->threads;
    out->warps_dispatched = (r->threads + warp - 1) / warp;
    out->warp_size = warp;
    out->max_active_blocks_per_sm = active;
    out->grid_blocks = grid;
    return GEM_OK;
}

extern "C" gem_status gem_cuda_kernel_query(int64_t n_kv_heads, int64_t live, int64_t partitions,
                                            int64_t baseline_partitions,
                                            gem_cuda_kernel_info *out, size_t cap, size_t *n)
{
    if (!out || !n)
        return GEM_ERR_NULL;
    *n = 0;
    if (cap < GEM_CUDA_KERNELS)
        return GEM_ERR_RANGE;
    if (n_kv_heads < 1 || n_kv_heads > 65535 / GEM_CU_GROUP || live < 1 || partitions < 1 ||
        partitions > GEM_DECODE_MAX_PARTITIONS || baseline_partitions < 1 ||
        baseline_partitions > GEM_DECODE_MAX_PARTITIONS)
        return GEM_ERR_PARAM;
    cudaDeviceProp prop;
    int dev = -1;
    gem_status st = gem_cu_open_device(&dev, &prop);
    if (st != GEM_OK)
        return st;
    GEM_CUDA_CHECK(gem_cu_fused_allow_staged_shared());
    gem_cu_kernel_ref refs[GEM_CUDA_KERNELS];
    const int F = GEM_CUDA_FIRST_PASSES;
    const int L = F + 1 + GEM_CUDA_BASELINE_KERNELS; /* the long BF16, F32 K-from-V first passes */
    const int B = L + 2 + 2; /* the baseline's score and value for the other cache types */
    static_assert(F + 1 + GEM_CUDA_BASELINE_KERNELS + 2 + 2 + GEM_CUDA_BASELINE_TYPED_KERNELS ==
                      GEM_CUDA_KERNELS,
                  "the kernels' order");
    static_assert(GEM_CUDA_BASELINE_TYPED_KERNELS == 6,
                  "a score and a value kernel for each of BF16, F16 and FP8 E4M3");
    static_assert(GEM_CUDA_FIRST_PASSES == 4 * GEM_CU_DTYPES,
                  "two D512, a K-from-V and a D256 first pass for each type the kernels read");
    gem_cu_fused_kernels(&refs[0], &refs[F], &refs[L], &refs[L + 2]);
    gem_cu_baseline_kernels(&refs[F + 1]);
    gem_cu_baseline_typed_kernels(&refs[B]);
    int64_t grids[GEM_CUDA_KERNELS];
    for (int i = 0; i < F; i++)
        grids[i] = gem_cu_fused_first_blocks(n_kv_heads, partitions);
    grids[F] = gem_cu_fused_reducer_blocks(n_kv_heads * GEM_CU_GROUP);
    gem_cu_baseline_blocks(n_kv_heads, live, baseline_partitions, &grids[F + 1]);
    grids[L] = gem_cu_fused_first_blocks(n_kv_heads, partitions);
    /* the long F32 K-from-V pass at the partitions gem_decode gives its views by default */
    grids[L + 1] = gem_cu_fused_first_blocks(
        n_kv_heads, cu_kfv_f32_partitions(prop.multiProcessorCount, n_kv_heads, live, partitions));
    grids[L + 2] = grids[L + 3] = gem_cu_fused_first_blocks(n_kv_heads, partitions); /* FP8 */
    gem_cu_baseline_typed_blocks(n_kv_heads, live, baseline_partitions, &grids[B]);
    for (int i = 0; i < GEM_CUDA_KERNELS; i++) {
        st = gem_cu_kernel_info(&refs[i], grids[i], &out[i]);
        if (st != GEM_OK)
            return st;
    }
    *n = GEM_CUDA_KERNELS;
    return GEM_OK;
}
