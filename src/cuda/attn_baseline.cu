/*
 * The three-stage baseline route on CUDA (the design's selector 19),
 * D512 / group 8.
 *
 *   1. score:     one 256-thread block per (256-token block, KV head g). Q of
 *                 the eight heads of g sits in shared memory (16 KiB); each warp
 *                 holds four K rows in registers (16 dims per lane), so every K
 *                 row is read from memory once for all eight query heads, and
 *                 writes scale * q.k for 8 heads x 4 tokens. scores: (n_q_heads,
 *                 live) F32, 32 * live * 4 bytes at 32 heads.
 *   2. normalize: one block per query head: row max, e = exp(s - max) written
 *                 back with its sum, then e / sum written back (in place).
 *   3. value:     the dim32 x split16 kernel: one block per (sequence partition,
 *                 32-dim output tile, KV head): 16 x 16 x 4 = 1,024 blocks at the
 *                 design's shape. Each thread owns four dims and one token slot of
 *                 a staged 256-token chunk of weights for all eight heads (each V
 *                 element is loaded once, as part of a float4); slots and warps
 *                 are added in a fixed order. partials: (16, n_q_heads, 512),
 *                 1 MiB at 32 heads. (BF16, F16 and FP8: 64-dim tiles, two pieces
 *                 a thread, 512 blocks; see gem_baseline_value_body.)
 *   4. reduce:    out[h, d] = sum over the 16 partials in partition order.
 *
 * K and V are read through the caller's view in pieces of four elements: row
 * (g, t) of K starts at piece g*k_hs4 + t*k_ts4 (strides in pieces), likewise
 * V. K and V are F32, BF16, F16 or FP8 E4M3 (one type, both caches): each piece
 * is widened to four floats exactly as it is loaded (gem_base_f32 .. _fp8), and
 * from there every type runs the same F32 arithmetic in the same order, so a
 * 16-bit cache gives the bits of the F32 cache its values widen to. The F32
 * kernels are the F32 body alone; the other types have kernels of their own
 * (gem_baseline_score_bf16, ...), so the F32 route's code is the one it always
 * was. FP8 heads take the fused route's factors: the score by (float)(scale *
 * k_scale[g]) in the place of scale, each partition's sums by v_scale[g].
 * Sequence partitions follow gem_partition_range (chunk = ceil(live / P)).
 * Every sum has a fixed order and there are no atomics, so the output is
 * bitwise reproducible.
 */
#include <math.h>

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "gem_cuda_internal.h"

#define GEM_CU_NORM_THREADS 1024

/* ---- the element types ----------------------------------------------------------- */

/* A piece of four elements as loaded (P) and widened to floats, exactly. */
struct gem_base_f32 { /* 16 bytes */
    typedef float4 P;
    static __device__ __forceinline__ float4 widen(float4 x) { return x; }
};
struct gem_base_bf16 { /* 8 bytes: a BF16 element is the high half of its float */
    typedef uint2 P;
    /* pieces q[0], q[1] from p[0], p[1] in one 16-byte load (p 16-byte aligned) */
    static __device__ __forceinline__ void load2(const uint2 *p, uint2 q[2])
    {
        const uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
        q[0] = make_uint2(u.x, u.y);
        q[1] = make_uint2(u.z, u.w);
    }
    static __device__ __forceinline__ float4 widen(uint2 x)
    {
        return make_float4(__uint_as_float(x.x << 16), __uint_as_float(x.x & 0xFFFF0000u),
                           __uint_as_float(x.y << 16), __uint_as_float(x.y & 0xFFFF0000u));
    }
};
struct gem_base_f16 { /* 8 bytes */
    typedef uint2 P;
    static __device__ __forceinline__ void load2(const uint2 *p, uint2 q[2])
    {
        gem_base_bf16::load2(p, q);
    }
    static __device__ __forceinline__ float4 widen(uint2 x)
    {
        return make_float4(__half2float(__ushort_as_half((unsigned short)(x.x & 0xFFFFu))),
                           __half2float(__ushort_as_half((unsigned short)(x.x >> 16))),
                           __half2float(__ushort_as_half((unsigned short)(x.y & 0xFFFFu))),
                           __half2float(__ushort_as_half((unsigned short)(x.y >> 16))));
    }
};
struct gem_base_fp8 { /* 4 bytes: E4M3 -> F16 -> F32, both exact */
    typedef uint32_t P;
    /* pieces q[0], q[1] from p[0], p[1] in one 8-byte load (p 8-byte aligned) */
    static __device__ __forceinline__ void load2(const uint32_t *p, uint32_t q[2])
    {
        const uint2 u = __ldg(reinterpret_cast<const uint2 *>(p));
        q[0] = u.x;
        q[1] = u.y;
    }
    /* code i (0..3, the byte of that order) of the piece x as a float */
    static __device__ __forceinline__ float code(uint32_t x, int i)
    {
        const __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)((x >> (8 * i)) & 0xFFu),
                                                      __NV_E4M3);
        return __half2float(__half(h));
    }
    static __device__ __forceinline__ float4 widen(uint32_t x)
    {
        return make_float4(code(x, 0), code(x, 1), code(x, 2), code(x, 3));
    }
};

/* ---- 1. score ---------------------------------------------------------------- */

/* One halving step of a transposed warp sum over 2*W values per lane: lanes
 * with bit W clear keep values [0, W), the others keep [W, 2W), each adding
 * the partner's copy. After the steps 16, 8, 4, 2, 1 lane l holds the warp
 * sum of value l (31 shuffles for 32 sums). */
template <int W> __device__ __forceinline__ void gem_transpose_step(float *acc, int lane)
{
    const int upper = (lane & W) != 0;
#pragma unroll
    for (int i = 0; i < W; i++) {
        const float send = upper ? acc[i] : acc[i + W];
        const float keep = upper ? acc[i + W] : acc[i];
        acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, W);
    }
}

/* The score stage of one block (see the file comment), K of element type E. */
template <typename E>
__device__ __forceinline__ void
gem_baseline_score_body(const float *__restrict__ q, /* (n_q_heads, 512) */
                        const typename E::P *__restrict__ k, /* row (g, t) at piece
                                                                 g*k_hs4 + t*k_ts4 */
                        int64_t k_hs4, int64_t k_ts4, /* K strides in pieces */
                        float *__restrict__ scores,  /* (n_q_heads, live) */
                        int64_t live, float scale)
{
    __shared__ float4 qs[GEM_CU_GROUP * GEM_CU_ROW_F4]; /* (8, 128) float4: 16 KiB */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t g = blockIdx.y;
    const float4 *q4 = reinterpret_cast<const float4 *>(q) + g * GEM_CU_GROUP * GEM_CU_ROW_F4;
    for (int i = threadIdx.x; i < GEM_CU_GROUP * GEM_CU_ROW_F4; i += GEM_CU_THREADS)
        qs[i] = __ldg(q4 + i);
    __syncthreads();

    const typename E::P *kg = k + g * k_hs4;
    const int R = GEM_CU_SCORE_ROWS;
    const int64_t block0 = (int64_t)blockIdx.x * GEM_CU_SCORE_TOKENS;
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int grp = warp; grp < GEM_CU_SCORE_TOKENS / R; grp += GEM_CU_THREADS / 32) {
        const int64_t t0 = block0 + (int64_t)grp * R;
        if (t0 >= live)
            break;
        float4 kk[R][4];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int j = 0; j < 4; j++)
                kk[r][j] = t0 + r < live ? E::widen(__ldg(kg + (t0 + r) * k_ts4 + j * 32 + lane))
                                         : zero;
        float acc[GEM_CU_GROUP * R]; /* index h * R + r */
#pragma unroll
        for (int h = 0; h < GEM_CU_GROUP; h++) {
#pragma unroll
            for (int r = 0; r < R; r++)
                acc[h * R + r] = 0.f;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float4 qv = qs[h * GEM_CU_ROW_F4 + j * 32 + lane];
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float a = acc[h * R + r];
                    a = fmaf(qv.x, kk[r][j].x, a);
                    a = fmaf(qv.y, kk[r][j].y, a);
                    a = fmaf(qv.z, kk[r][j].z, a);
                    a = fmaf(qv.w, kk[r][j].w, a);
                    acc[h * R + r] = a;
                }
            }
        }
        gem_transpose_step<16>(acc, lane);
        gem_transpose_step<8>(acc, lane);
        gem_transpose_step<4>(acc, lane);
        gem_transpose_step<2>(acc, lane);
        gem_transpose_step<1>(acc, lane);
        const int h = lane / R, r = lane % R;
        if (t0 + r < live)
            scores[(g * GEM_CU_GROUP + h) * live + t0 + r] = acc[0] * scale;
    }
}

extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS)
    gem_baseline_score(const float *__restrict__ q, /* (n_q_heads, 512) */
                       const float *__restrict__ k, /* row (g, t) at k + 4*(g*k_hs4 + t*k_ts4) */
                       int64_t k_hs4, int64_t k_ts4, /* K strides in float4 */
                       float *__restrict__ scores,  /* (n_q_heads, live) */
                       int64_t live, float scale)
{
    gem_baseline_score_body<gem_base_f32>(q, reinterpret_cast<const float4 *>(k), k_hs4, k_ts4,
                                          scores, live, scale);
}

/* The 16-bit types: k holds pieces of four elements (8 bytes); the F32 kernel's arguments. */
#define GEM_BASELINE_SCORE_16(NAME, E)                                                         \
    extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS)                               \
        NAME(const float *__restrict__ q, const void *__restrict__ k, int64_t k_hs4,           \
             int64_t k_ts4, float *__restrict__ scores, int64_t live, float scale)             \
    {                                                                                          \
        gem_baseline_score_body<E>(q, reinterpret_cast<const uint2 *>(k), k_hs4, k_ts4,       \
                                   scores, live, scale);                                       \
    }
GEM_BASELINE_SCORE_16(gem_baseline_score_bf16, gem_base_bf16)
GEM_BASELINE_SCORE_16(gem_baseline_score_f16, gem_base_f16)

/* FP8 E4M3: pieces of four codes (4 bytes); KV head g's scores by sc.score[g]. */
extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS)
    gem_baseline_score_fp8(const float *__restrict__ q, const void *__restrict__ k,
                           int64_t k_hs4, int64_t k_ts4, float *__restrict__ scores,
                           int64_t live, const __grid_constant__ gem_cu_fp8_scales sc)
{
    gem_baseline_score_body<gem_base_fp8>(q, reinterpret_cast<const uint32_t *>(k), k_hs4,
                                          k_ts4, scores, live, sc.score[blockIdx.y]);
}

/* ---- 2. normalize ------------------------------------------------------------- */

/* Block-wide reductions in a fixed order (warp butterfly, then warp 0 over the
 * warps' results). red: (32) floats of shared memory. */
__device__ __forceinline__ float gem_block_max(float x, float *red)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    for (int off = 16; off > 0; off >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
    __syncthreads();
    if (lane == 0)
        red[warp] = x;
    __syncthreads();
    x = lane < nw ? red[lane] : -INFINITY;
    for (int off = 16; off > 0; off >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
}

__device__ __forceinline__ float gem_block_sum(float x, float *red)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    for (int off = 16; off > 0; off >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, off);
    __syncthreads();
    if (lane == 0)
        red[warp] = x;
    __syncthreads();
    x = lane < nw ? red[lane] : 0.f;
    for (int off = 16; off > 0; off >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

extern "C" __global__ void __launch_bounds__(GEM_CU_NORM_THREADS)
    gem_baseline_normalize(float *__restrict__ scores, /* (n_q_heads, live), in place */
                           int64_t live)
{
    __shared__ float red[32];
    float *row = scores + (int64_t)blockIdx.x * live;
    const int64_t step = blockDim.x;
    /* each pass takes four strided elements per thread per step (loads in flight) */
    float mx = -INFINITY;
    for (int64_t t = threadIdx.x; t < live; t += 4 * step) {
        float x[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            x[u] = t + u * step < live ? row[t + u * step] : -INFINITY;
#pragma unroll
        for (int u = 0; u < 4; u++)
            mx = fmaxf(mx, x[u]);
    }
    mx = gem_block_max(mx, red);
    float sum = 0.f;
    for (int64_t t = threadIdx.x; t < live; t += 4 * step) {
        float x[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            x[u] = t + u * step < live ? row[t + u * step] : -INFINITY;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            if (t + u * step < live) {
                const float e = expf(x[u] - mx);
                row[t + u * step] = e;
                sum += e;
            }
        }
    }
    sum = gem_block_sum(sum, red);
    for (int64_t t = threadIdx.x; t < live; t += 4 * step) {
        float x[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            x[u] = t + u * step < live ? row[t + u * step] : 0.f;
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (t + u * step < live)
                row[t + u * step] = x[u] / sum;
    }
}

/* ---- 3. value ----------------------------------------------------------------- */

/* Lane l of warp w owns the four dims 4*(l%8) .. +3 of the block's 32-dim tile
 * and token slot l/8; per 256-token chunk it loads one float4 of V for each of
 * its eight tokens (w*4 + l/8 + 32*k), so each V element is loaded once and a
 * warp reads four 128-byte row segments per instruction. The 4 x 8 partial sums
 * of a dim are added in a fixed order: token slots by butterfly, then warps. */
/* The value stage of one block, V of element type E, a tile of 32 * NP dims: lane (quad, slot)
 * of warp w owns the NP pieces NP*quad .. NP*quad + NP - 1 of the tile (each four dims, as the
 * F32 kernel's lane owns one) and the same tokens as there, so every dim's sum is the F32
 * kernel's in the same order (tokens in the lane, then slots, then warps). NP = 2 for the
 * narrow types: each block then reads 128 bytes of a BF16 / F16 row (64 of FP8) like the F32
 * kernel's 32 dims, which a 32-dim tile of 64 bytes took 1.47x the F32 kernel's time to read
 * (run 185: 0.695 against 0.474 ms at 128K on an H100). SCALED: each partial sum times
 * v_scale (FP8), else v_scale unused. */
template <typename E, int NP, bool SCALED>
__device__ __forceinline__ void
gem_baseline_value_body(const float *__restrict__ weights, /* (n_q_heads, live) normalized */
                        const typename E::P *__restrict__ v, /* row (g, t) at piece
                                                                 g*v_hs4 + t*v_ts4 */
                        int64_t v_hs4, int64_t v_ts4, /* V strides in pieces */
                        float *__restrict__ partials,      /* (P, n_q_heads, 512) */
                        int64_t live, int64_t partitions, float v_scale)
{
    __shared__ __align__(16) float ps[GEM_CU_VALUE_CHUNK][GEM_CU_GROUP];   /* 8 KiB */
    __shared__ __align__(16) float
        red[GEM_CU_THREADS / 32][GEM_CU_GROUP][GEM_CU_VALUE_DIM_TILE * NP];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int quad = lane & 7, slot = lane >> 3;
    const int64_t p = blockIdx.x, g = blockIdx.z;
    const int64_t n_q_heads = (int64_t)gridDim.z * GEM_CU_GROUP;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live);
    const int64_t end = min(begin + chunk, live);
    const typename E::P *vg =
        v + g * v_hs4 + blockIdx.y * (GEM_CU_VALUE_DIM_TILE / 4 * NP) + NP * quad;
    const float *wg = weights + g * GEM_CU_GROUP * live;

    float4 acc[NP][GEM_CU_GROUP];
#pragma unroll
    for (int i = 0; i < NP; i++)
#pragma unroll
        for (int h = 0; h < GEM_CU_GROUP; h++)
            acc[i][h] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int64_t c0 = begin; c0 < end; c0 += GEM_CU_VALUE_CHUNK) {
        __syncthreads(); /* the previous chunk's weights are consumed */
#pragma unroll
        for (int u = 0; u < GEM_CU_VALUE_CHUNK * GEM_CU_GROUP / GEM_CU_THREADS; u++) {
            const int i = threadIdx.x + u * GEM_CU_THREADS;
            const int h = i / GEM_CU_VALUE_CHUNK, t = i % GEM_CU_VALUE_CHUNK;
            ps[t][h] = c0 + t < end ? __ldg(wg + h * live + c0 + t) : 0.f;
        }
        __syncthreads();
        const int n = (int)min((int64_t)GEM_CU_VALUE_CHUNK, end - c0);
        typename E::P raw[GEM_CU_VALUE_CHUNK / 32][NP]; /* a token's pieces as loaded */
#pragma unroll
        for (int k = 0; k < GEM_CU_VALUE_CHUNK / 32; k++) {
            const int tt = k * 32 + warp * 4 + slot;
            if constexpr (NP == 1) {
                raw[k][0] = tt < n ? __ldg(vg + (c0 + tt) * v_ts4) : typename E::P{};
            } else {
                static_assert(NP == 2, "one or two pieces a lane");
                if (tt < n) {
                    E::load2(vg + (c0 + tt) * v_ts4, raw[k]);
                } else {
                    raw[k][0] = typename E::P{};
                    raw[k][1] = typename E::P{};
                }
            }
        }
#pragma unroll
        for (int k = 0; k < GEM_CU_VALUE_CHUNK / 32; k++) {
            const int tt = k * 32 + warp * 4 + slot;
            const float4 w0 = *reinterpret_cast<const float4 *>(&ps[tt][0]);
            const float4 w1 = *reinterpret_cast<const float4 *>(&ps[tt][4]);
            const float w[GEM_CU_GROUP] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
            for (int i = 0; i < NP; i++) {
                const float4 vv = E::widen(raw[k][i]);
#pragma unroll
                for (int h = 0; h < GEM_CU_GROUP; h++) {
                    acc[i][h].x = fmaf(w[h], vv.x, acc[i][h].x);
                    acc[i][h].y = fmaf(w[h], vv.y, acc[i][h].y);
                    acc[i][h].z = fmaf(w[h], vv.z, acc[i][h].z);
                    acc[i][h].w = fmaf(w[h], vv.w, acc[i][h].w);
                }
            }
        }
    }
    /* token slots: lanes quad, quad+8, quad+16, quad+24 */
#pragma unroll
    for (int off = 8; off <= 16; off <<= 1) {
#pragma unroll
        for (int i = 0; i < NP; i++)
#pragma unroll
            for (int h = 0; h < GEM_CU_GROUP; h++) {
                acc[i][h].x += __shfl_xor_sync(0xffffffffu, acc[i][h].x, off);
                acc[i][h].y += __shfl_xor_sync(0xffffffffu, acc[i][h].y, off);
                acc[i][h].z += __shfl_xor_sync(0xffffffffu, acc[i][h].z, off);
                acc[i][h].w += __shfl_xor_sync(0xffffffffu, acc[i][h].w, off);
            }
    }
    if (slot == 0) {
#pragma unroll
        for (int i = 0; i < NP; i++)
#pragma unroll
            for (int h = 0; h < GEM_CU_GROUP; h++)
                *reinterpret_cast<float4 *>(&red[warp][h][(NP * quad + i) * 4]) = acc[i][h];
    }
    __syncthreads();
    const int h = threadIdx.x >> 5; /* now: thread (h, lane) adds the warps in order */
#pragma unroll
    for (int i = 0; i < NP; i++) {
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < GEM_CU_THREADS / 32; w++)
            sum += red[w][h][lane + GEM_CU_VALUE_DIM_TILE * i];
        const int64_t d = (int64_t)blockIdx.y * GEM_CU_VALUE_DIM_TILE * NP + lane +
                          GEM_CU_VALUE_DIM_TILE * i;
        partials[(p * n_q_heads + g * GEM_CU_GROUP + h) * GEM_CU_D + d] =
            SCALED ? sum * v_scale : sum;
    }
}

extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS)
    gem_baseline_value(const float *__restrict__ weights, /* (n_q_heads, live) normalized */
                       const float *__restrict__ v, /* row (g, t) at v + 4*(g*v_hs4 + t*v_ts4) */
                       int64_t v_hs4, int64_t v_ts4, /* V strides in float4 */
                       float *__restrict__ partials,      /* (P, n_q_heads, 512) */
                       int64_t live, int64_t partitions)
{
    gem_baseline_value_body<gem_base_f32, 1, false>(weights, reinterpret_cast<const float4 *>(v),
                                                    v_hs4, v_ts4, partials, live, partitions, 1.f);
}

/* The 16-bit types: v holds pieces of four elements (8 bytes), tiles of
 * GEM_CU_VALUE_TYPED_DIM_TILE dims; the F32 kernel's arguments. */
#define GEM_BASELINE_VALUE_16(NAME, E)                                                         \
    extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS)                               \
        NAME(const float *__restrict__ weights, const void *__restrict__ v, int64_t v_hs4,     \
             int64_t v_ts4, float *__restrict__ partials, int64_t live, int64_t partitions)    \
    {                                                                                          \
        gem_baseline_value_body<E, 2, false>(weights, reinterpret_cast<const uint2 *>(v),      \
                                             v_hs4, v_ts4, partials, live, partitions, 1.f);   \
    }
GEM_BASELINE_VALUE_16(gem_baseline_value_bf16, gem_base_bf16)
GEM_BASELINE_VALUE_16(gem_baseline_value_f16, gem_base_f16)

static_assert(GEM_CU_VALUE_TYPED_DIM_TILE == 2 * GEM_CU_VALUE_DIM_TILE,
              "the typed value kernels take two pieces a lane");

/* FP8 E4M3: pieces of four codes (4 bytes), tiles of GEM_CU_VALUE_TYPED_DIM_TILE dims; KV head
 * g's partial sums by sc.v[g]. */
extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS)
    gem_baseline_value_fp8(const float *__restrict__ weights, const void *__restrict__ v,
                           int64_t v_hs4, int64_t v_ts4, float *__restrict__ partials,
                           int64_t live, int64_t partitions,
                           const __grid_constant__ gem_cu_fp8_scales sc)
{
    gem_baseline_value_body<gem_base_fp8, 2, true>(weights,
                                                   reinterpret_cast<const uint32_t *>(v), v_hs4,
                                                   v_ts4, partials, live, partitions,
                                                   sc.v[blockIdx.z]);
}

/* ---- 4. reduce ------------------------------------------------------------------ */

extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS)
    gem_baseline_reduce(const float *__restrict__ partials, /* (P, n) */
                        float *__restrict__ out,            /* (n) = (n_q_heads, 512) */
                        int64_t n, int64_t partitions)
{
    const int64_t i = (int64_t)blockIdx.x * GEM_CU_THREADS + threadIdx.x;
    if (i >= n)
        return;
    float sum = 0.f;
    for (int64_t p = 0; p < partitions; p++)
        sum += __ldg(partials + p * n + i);
    out[i] = sum;
}

/* ---- host side ----------------------------------------------------------------- */

void gem_cu_baseline_kernels(gem_cu_kernel_ref out[4])
{
    out[0].func = (const void *)gem_baseline_score;
    out[0].name = "gem_baseline_score";
    out[0].role = "baseline_score";
    out[0].dynamic_shared = 0;
    out[0].threads = GEM_CU_THREADS;
    out[1].func = (const void *)gem_baseline_normalize;
    out[1].name = "gem_baseline_normalize";
    out[1].role = "baseline_normalize";
    out[1].dynamic_shared = 0;
    out[1].threads = GEM_CU_NORM_THREADS;
    out[2].func = (const void *)gem_baseline_value;
    out[2].name = "gem_baseline_value";
    out[2].role = "baseline_value";
    out[2].dynamic_shared = 0;
    out[2].threads = GEM_CU_THREADS;
    out[3].func = (const void *)gem_baseline_reduce;
    out[3].name = "gem_baseline_reduce";
    out[3].role = "baseline_reduce";
    out[3].dynamic_shared = 0;
    out[3].threads = GEM_CU_THREADS;
}

void gem_cu_baseline_typed_kernels(gem_cu_kernel_ref out[GEM_CUDA_BASELINE_TYPED_KERNELS])
{
    static const struct {
        const void *func;
        const char *name, *role;
    } k[GEM_CUDA_BASELINE_TYPED_KERNELS] = {
        {(const void *)gem_baseline_score_bf16, "gem_baseline_score_bf16", "baseline_score_bf16"},
        {(const void *)gem_baseline_score_f16, "gem_baseline_score_f16", "baseline_score_f16"},
        {(const void *)gem_baseline_score_fp8, "gem_baseline_score_fp8", "baseline_score_fp8"},
        {(const void *)gem_baseline_value_bf16, "gem_baseline_value_bf16", "baseline_value_bf16"},
        {(const void *)gem_baseline_value_f16, "gem_baseline_value_f16", "baseline_value_f16"},
        {(const void *)gem_baseline_value_fp8, "gem_baseline_value_fp8", "baseline_value_fp8"},
    };
    for (int i = 0; i < GEM_CUDA_BASELINE_TYPED_KERNELS; i++) {
        out[i].func = k[i].func;
        out[i].name = k[i].name;
        out[i].role = k[i].role;
        out[i].dynamic_shared = 0;
        out[i].threads = GEM_CU_THREADS;
    }
}

void gem_cu_baseline_blocks(int64_t n_kv_heads, int64_t live, int64_t value_partitions,
                            int64_t blocks[4])
{
    const int64_t n_q_heads = n_kv_heads * GEM_CU_GROUP;
    blocks[0] = (live + GEM_CU_SCORE_TOKENS - 1) / GEM_CU_SCORE_TOKENS * n_kv_heads;
    blocks[1] = n_q_heads;
    blocks[2] = value_partitions * (GEM_CU_D / GEM_CU_VALUE_DIM_TILE) * n_kv_heads;
    blocks[3] = (n_q_heads * GEM_CU_D + GEM_CU_THREADS - 1) / GEM_CU_THREADS;
}

void gem_cu_baseline_typed_blocks(int64_t n_kv_heads, int64_t live, int64_t value_partitions,
                                  int64_t blocks[GEM_CUDA_BASELINE_TYPED_KERNELS])
{
    for (int i = 0; i < GEM_CUDA_BASELINE_TYPED_KERNELS / 2; i++) {
        blocks[i] = (live + GEM_CU_SCORE_TOKENS - 1) / GEM_CU_SCORE_TOKENS * n_kv_heads;
        blocks[GEM_CUDA_BASELINE_TYPED_KERNELS / 2 + i] =
            value_partitions * (GEM_CU_D / GEM_CU_VALUE_TYPED_DIM_TILE) * n_kv_heads;
    }
}

gem_status gem_cu_baseline_launch(const gem_cu_baseline_args *a, cudaStream_t stream)
{
    const int fp8 = a->dtype == GEM_DTYPE_FP8_E4M3;
    if (a->value_partitions < 1 || a->value_partitions > 65535 || a->n_kv_heads < 1 ||
        a->n_kv_heads > 65535 / GEM_CU_GROUP || a->live < 1 ||
        ((unsigned)a->dtype >= GEM_CU_DTYPES && !fp8) ||
        (fp8 && (a->n_kv_heads > GEM_CU_FP8_MAX_KV_HEADS || !a->k_scale || !a->v_scale)))
        return GEM_ERR_PARAM;
    gem_cu_fp8_scales sc; /* FP8: the fused route's factors (attn_fused.cu) */
    memset(&sc, 0, sizeof sc);
    for (int64_t g = 0; fp8 && g < a->n_kv_heads; g++) {
        sc.score[g] = (float)((double)a->scale * (double)a->k_scale[g]);
        sc.v[g] = a->v_scale[g];
    }
    const int64_t n_q_heads = a->n_kv_heads * GEM_CU_GROUP;
    const int64_t score_blocks = (a->live + GEM_CU_SCORE_TOKENS - 1) / GEM_CU_SCORE_TOKENS;
    if (score_blocks > INT32_MAX)
        return GEM_ERR_PARAM;
    const dim3 g1((unsigned)score_blocks, (unsigned)a->n_kv_heads);
    cudaEvent_t *ev = a->stage_events;
    if (ev)
        GEM_CUDA_CHECK(cudaEventRecord(ev[0], stream));
    switch (a->dtype) {
    case GEM_DTYPE_F32:
        gem_baseline_score<<<g1, GEM_CU_THREADS, 0, stream>>>(
            a->q, (const float *)a->k, a->k_hs4, a->k_ts4, a->scores, a->live, a->scale);
        break;
    case GEM_DTYPE_BF16:
        gem_baseline_score_bf16<<<g1, GEM_CU_THREADS, 0, stream>>>(
            a->q, a->k, a->k_hs4, a->k_ts4, a->scores, a->live, a->scale);
        break;
    case GEM_DTYPE_F16:
        gem_baseline_score_f16<<<g1, GEM_CU_THREADS, 0, stream>>>(
            a->q, a->k, a->k_hs4, a->k_ts4, a->scores, a->live, a->scale);
        break;
    default: /* FP8 E4M3 */
        gem_baseline_score_fp8<<<g1, GEM_CU_THREADS, 0, stream>>>(a->q, a->k, a->k_hs4, a->k_ts4,
                                                                  a->scores, a->live, sc);
        break;
    }
    GEM_CUDA_CHECK(cudaGetLastError());
    if (ev)
        GEM_CUDA_CHECK(cudaEventRecord(ev[1], stream));
    gem_baseline_normalize<<<(unsigned)n_q_heads, GEM_CU_NORM_THREADS, 0, stream>>>(a->scores,
                                                                                   a->live);
    GEM_CUDA_CHECK(cudaGetLastError());
    if (ev)
        GEM_CUDA_CHECK(cudaEventRecord(ev[2], stream));
    const dim3 g3((unsigned)a->value_partitions, GEM_CU_D / GEM_CU_VALUE_DIM_TILE,
                  (unsigned)a->n_kv_heads);
    const dim3 g3_typed((unsigned)a->value_partitions, GEM_CU_D / GEM_CU_VALUE_TYPED_DIM_TILE,
                        (unsigned)a->n_kv_heads);
    switch (a->dtype) {
    case GEM_DTYPE_F32:
        gem_baseline_value<<<g3, GEM_CU_THREADS, 0, stream>>>(
            a->scores, (const float *)a->v, a->v_hs4, a->v_ts4, a->partials, a->live,
            a->value_partitions);
        break;
    case GEM_DTYPE_BF16:
        gem_baseline_value_bf16<<<g3_typed, GEM_CU_THREADS, 0, stream>>>(
            a->scores, a->v, a->v_hs4, a->v_ts4, a->partials, a->live, a->value_partitions);
        break;
    case GEM_DTYPE_F16:
        gem_baseline_value_f16<<<g3_typed, GEM_CU_THREADS, 0, stream>>>(
            a->scores, a->v, a->v_hs4, a->v_ts4, a->partials, a->live, a->value_partitions);
        break;
    default: /* FP8 E4M3 */
        gem_baseline_value_fp8<<<g3_typed, GEM_CU_THREADS, 0, stream>>>(
            a->scores, a->v, a->v_hs4, a->v_ts4, a->partials, a->live, a->value_partitions, sc);
        break;
    }
    GEM_CUDA_CHECK(cudaGetLastError());
    if (ev)
        GEM_CUDA_CHECK(cudaEventRecord(ev[3], stream));
    const int64_t n = n_q_heads * GEM_CU_D;
    gem_baseline_reduce<<<(unsigned)((n + GEM_CU_THREADS - 1) / GEM_CU_THREADS), GEM_CU_THREADS,
                          0, stream>>>(a->partials, a->out, n, a->value_partitions);
    GEM_CUDA_CHECK(cudaGetLastError());
    if (ev)
        GEM_CUDA_CHECK(cudaEventRecord(ev[4], stream));
    return GEM_OK;
}
