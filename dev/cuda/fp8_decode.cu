/*
fp8_decode: the fused route's CUDA-core first pass on an FP8 E4M3 cache with a scale per KV head,
at the Gemma 4 full-attention shape (32 query heads over 4 KV heads, D512, scale 1/sqrt(512)).

Why: engines keep long caches in FP8 (E4M3 with a per-head or per-tensor scale); FlashInfer
0.7.2's FP8 decode at this shape took 0.81-0.87 ms at 128K on the H200 (issue table). gem's CPU
routes read FP8 since 6441c43; CUDA refuses it until a kernel is measured and sanitized. This is
the first candidate: the library's D512 CUDA-core body (gem_fused_first_pass_body, the F32
pass's arithmetic) with a fourth element type, four E4M3 codes in one 4-byte piece, widened
exactly (cvt e4m3x2 -> f16x2 -> f32: every E4M3 value, subnormals included, is an F16 value).
As on the CPU, K's head scale joins the score's, (float)(scale * k_scale[g]), and each output
row is multiplied by v_scale[g] after the reducer's division (here by the reducer's own thread,
right after it writes the element). Prediction: the CUDA-core body is bound by its instruction
issue (about 0.47 ms at 128K for F32 and for BF16, results/h200 runs 9 and 19), which does not
shrink with the bytes, so about 0.45 ms at 128K: 1.8x FlashInfer's FP8, 3.9x its floor.

version 0 is the library's BF16 route through gem_decode on the same values rounded to BF16
  (the tensor-core pass), the speed to beat.
version 1 is the FP8 pass with K and V one tile ahead (the F32 pass's distances).
version 2 is version 1 with K and V two tiles ahead (a piece is a quarter of F32's, so more
  tiles in flight cost few registers).
version 3 is the library's staged tensor-core pass for F16 (gem_fused_first_pass_mma_staged_body
  with gem_mma_f16_elem: Q in three F16 pieces scaled per head by a power of two, the weights in
  two pieces times 2^14) with the codes widened to F16 on their way into shared memory: each
  thread loads 16 codes (16 bytes) of a row, converts them (cvt e4m3x2 -> f16x2, exact: every
  E4M3 value is an F16 value) and stores 32 bytes of F16, so the dots and the V update are the
  F16 pass's, the ldmatrix fragments the same. K's scale joins the score's, V's multiplies the
  partial's O as it is written (the library's reducer unchanged; one rounding from the CPU's
  order, which multiplies after the division). One tile (16 rows, 16 KiB of K and V) of loads
  in flight. Prediction (run 153: the F16 / BF16 staged pass 0.245-0.251 ms at 128K, about
  4.3 TB/s of its 16-bit bytes, where its arithmetic keeps pace with the memory): the same
  arithmetic per row at twice the rows a byte, plus 16 cvt a thread and tile, is bound by issue
  near the 16-bit pass's time per row: about 0.17-0.20 ms at 128K, 2.7-3.2 TB/s of FP8 bytes,
  4x FlashInfer's FP8.
version 4 is version 3 with two tiles of loads in flight (the same registers as the 16-bit
  pass's one tile): predicted no faster if version 3 is bound by issue, faster if by the loads
  in flight.
version 5 keeps the codes FP8 in shared memory and widens the MMAs' B fragments as it reads
  them (fp8_smem_first_pass says how), so two buffers of 32-token tiles fit at two blocks an SM:
  one softmax step and two barriers per 32 rows instead of per 16 (run 179: version 3 takes
  about 1.8 us a 16-row tile a block on an H100, far above its loads' time). The V fragments
  cost more (16 4-byte loads and 32 byte permutes a 32-row tile, against 8 ldmatrix.trans).
  Prediction: 0.17-0.19 ms at 128K on an H100 against version 3's 0.232.

NaN codes: the CPU widens both (S.1111.111) to the positive quiet NaN 0x7FC00000
(gem_fp8_e4m3_to_f32); what cvt e4m3x2 -> f16x2 gives for them is not checked here (the random
caches hold no NaN code), and a library kernel made from this must give the CPU's bits.

Every version is held to NMSE <= 1e-10 against the double reference of its own cache
(gem_attn_reference_kv on the FP8 view with its scales, or on the BF16 view), every output
element written and bitwise repeats, before it is timed: CUDA events, each call queued behind
50 us of GPU work, versions interleaved A B .. B A over rotating copies of K and V (at least
256 MiB of them, so the L2 holds none), medians and spreads. GB/s counts the bytes of each
version's cache.

./fp8_decode [--lengths 8192,65536,131072] [--rounds 10] [--partitions 64] [versions...]
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "common.h"

#include "attn_fused_body.cuh"

#include "gem/decode.h"

#define NQ 32
#define NKV 4
#define NV 6 /* versions 0 .. 5 */

/* Four E4M3 codes in one 4-byte piece (element 4i + j in byte j), K_AHEAD / V_AHEAD tiles
 * ahead; loads as the F32 pass's (L1 no-allocate, L2 evict-first, volatile). */
template <int KA, int VA> struct kv_fp8 {
    typedef uint32_t piece;
    typedef uint8_t elem;
    enum { K_AHEAD = KA, V_AHEAD = VA };
    static __device__ __forceinline__ piece zero(void) { return 0u; }
    static __device__ __forceinline__ piece load(const piece *p, uint64_t pol)
    {
        uint32_t r;
        asm volatile("ld.global.L1::no_allocate.L2::cache_hint.u32 %0, [%1], %2;\n"
                     : "=r"(r)
                     : "l"(p), "l"(pol)
                     : "memory");
        return r;
    }
    /* exact: E4M3 -> F16 (every E4M3 value is an F16 value) -> F32 */
    static __device__ __forceinline__ float4 f4(piece r)
    {
        const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(r & 0xFFFFu),
                                                          __NV_E4M3);
        const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(r >> 16),
                                                          __NV_E4M3);
        const float2 a = __half22float2(*reinterpret_cast<const __half2 *>(&lo));
        const float2 b = __half22float2(*reinterpret_cast<const __half2 *>(&hi));
        return make_float4(a.x, a.y, b.x, b.y);
    }
};

/* the heads' scales, in the launch */
struct fp8_scales {
    float k[NKV], v[NKV];
};

/* versions 1-2: head-major rows of 512 codes (128 pieces) */
template <int KA, int VA>
__global__ void __launch_bounds__(GEM_CU_THREADS, 2)
    fp8_first_pass(const float *__restrict__ q, const void *__restrict__ k, const void *__restrict__ v,
                   int64_t hs4, float *__restrict__ part_m, float *__restrict__ part_s,
                   float *__restrict__ part_o, int64_t live, int64_t partitions,
                   int64_t n_q_heads, float scale, const __grid_constant__ fp8_scales sc)
{
    const float sg = (float)((double)scale * (double)sc.k[blockIdx.y]);
    gem_fused_first_pass_body<kv_fp8<KA, VA>, GEM_CU_D / 4, false>(
        q, k, hs4, GEM_CU_D / 4, v, hs4, GEM_CU_D / 4, part_m, part_s, part_o, live, partitions,
        n_q_heads, sg, nullptr, nullptr);
}

/* the library's reducer, then the element this thread wrote times its head's V scale */
__global__ void __launch_bounds__(GEM_CU_THREADS)
    fp8_reducer(const float *__restrict__ part_m, const float *__restrict__ part_s,
                const float *__restrict__ part_o, float *__restrict__ out, int64_t partitions,
                const __grid_constant__ fp8_scales sc)
{
    gem_fused_reducer_body(part_m, part_s, part_o, out, partitions, GEM_CU_D, false);
    const int64_t h = blockIdx.x, d = (int64_t)blockIdx.y * GEM_CU_THREADS + threadIdx.x;
    out[h * GEM_CU_D + d] *= sc.v[h / (gridDim.x / NKV)];
}

/* versions 3-4: the staged F16 tensor-core pass with E4M3 codes widened to F16 as they are
 * staged. Head-major rows of 512 codes, hs codes a head. AHEAD tiles of loads in flight
 * (1 or 2). Launched with GEM_MMA_STAGED_BYTES of dynamic shared memory. */
template <int AHEAD>
__global__ void __launch_bounds__(GEM_CU_THREADS, 2)
    fp8_mma_first_pass(const float *__restrict__ q, const uint8_t *__restrict__ k,
                       const uint8_t *__restrict__ v, int64_t hs, float *__restrict__ part_m,
                       float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,
                       int64_t partitions, int64_t n_q_heads, float scale,
                       const __grid_constant__ fp8_scales sc)
{
    static_assert(AHEAD == 1 || AHEAD == 2, "one or two tiles ahead");
    typedef gem_mma_f16_elem E;
    typedef E::elem elem;
    const int T = GEM_MMA_TILE;
    extern __shared__ __align__(128) unsigned char gem_mma_tiles[]; /* GEM_MMA_STAGED_BYTES */
    elem *const ring = reinterpret_cast<elem *>(gem_mma_tiles);
    __shared__ __align__(16) float sred[GEM_CU_THREADS / 32][GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GEM_CU_GROUP];
    __shared__ uint2 sqb[GEM_CU_THREADS / 32][4][32];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    const float sg = (float)((double)scale * (double)sc.k[g]);
    const float vs = sc.v[g];
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    uint32_t qa[4][4];
    int qe = 0;
    {
        const float *qh = q + (g * GEM_CU_GROUP + grp) * GEM_CU_D + 64 * w + 2 * tig;
        float mx = 0.f;
#pragma unroll
        for (int st = 0; st < 4; st++)
#pragma unroll
            for (int u = 0; u < 4; u++)
                mx = fmaxf(mx, fabsf(__ldg(qh + 16 * st + (u & 1) + 8 * (u >> 1))));
        qe = gem_mma_f16_q_exponent(mx, w, grp, tig);
#pragma unroll
        for (int st = 0; st < 4; st++) {
            elem hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const float x = ldexpf(__ldg(qh + 16 * st + (u & 1) + 8 * (u >> 1)), qe);
                hi[u] = E::piece(x);
                const float r1 = x - E::value(hi[u]);
                mid[u] = E::piece(r1);
                lo[u] = E::piece(r1 - E::value(mid[u]));
            }
            qa[st][0] = E::pack(hi[0], hi[1]);
            qa[st][1] = E::pack(mid[0], mid[1]);
            qa[st][2] = E::pack(hi[2], hi[3]);
            qa[st][3] = E::pack(mid[2], mid[3]);
            sqb[w][st][lane] = make_uint2(E::pack(lo[0], lo[1]), E::pack(lo[2], lo[3]));
        }
    }
    /* this thread's pieces: rows prow and prow + 8 of a tile, 16 codes from column pcol */
    const int prow = tid >> 5, pcol = 16 * (tid & 31);
    const uint8_t *kp = k + g * hs + (begin + prow) * GEM_CU_D + pcol;
    const uint8_t *vp = v + g * hs + (begin + prow) * GEM_CU_D + pcol;
    const uint4 zero4 = make_uint4(0u, 0u, 0u, 0u);
    uint4 ra[4], rb[4]; /* tile sets: K rows prow, prow + 8, then V's */
    auto load = [&](int64_t it, uint4 (&r)[4]) {
        const int64_t t = begin + it * T + prow;
        const int64_t off = it * T * GEM_CU_D;
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const bool in = t + 8 * u < end;
            r[u] = in ? gem_ld16(kp + off + 8 * u * GEM_CU_D, pol) : zero4;
            r[2 + u] = in ? gem_ld16(vp + off + 8 * u * GEM_CU_D, pol) : zero4;
        }
    };
    /* 16 codes -> 16 F16 (32 bytes) at dst */
    auto widen = [&](const uint4 &c, elem *dst) {
        uint32_t h[8];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t wd = gem_word(c, j);
            const __half2_raw lo =
                __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(wd & 0xFFFFu), __NV_E4M3);
            const __half2_raw hi =
                __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(wd >> 16), __NV_E4M3);
            h[2 * j] = (uint32_t)lo.x | ((uint32_t)lo.y << 16);
            h[2 * j + 1] = (uint32_t)hi.x | ((uint32_t)hi.y << 16);
        }
        reinterpret_cast<uint4 *>(dst)[0] = make_uint4(h[0], h[1], h[2], h[3]);
        reinterpret_cast<uint4 *>(dst)[1] = make_uint4(h[4], h[5], h[6], h[7]);
    };
    auto store = [&](int64_t it, const uint4 (&r)[4]) {
        elem *ks = ring + (size_t)(it & 1) * GEM_MMA_TILE_ELEMS, *vsm = ks + T * GEM_MMA_ROW;
#pragma unroll
        for (int u = 0; u < 2; u++) {
            widen(r[u], ks + (prow + 8 * u) * GEM_MMA_ROW + pcol);
            widen(r[2 + u], vsm + (prow + 8 * u) * GEM_MMA_ROW + pcol);
        }
    };
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;
    if (ntiles > 0) {
        load(0, ra);
        store(0, ra);
    }
    if (AHEAD == 1 && ntiles > 1)
        load(1, ra); /* one set */
    if (AHEAD == 2 && ntiles > 1)
        load(1, rb); /* tile j in set j & 1: rb odd, ra even */
    if (AHEAD == 2 && ntiles > 2)
        load(2, ra);
    __syncthreads();
    const int krow = lane & 7, kcol = 64 * w + 8 * (lane >> 3);
    /* tile it; its next tile's loads are in set nx (tile j in set j & 1 with two tiles ahead,
     * always ra with one) */
    auto step = [&](int64_t it, uint4 (&nx)[4]) {
        const int64_t t0 = begin + it * T;
        const elem *ks = ring + (size_t)(it & 1) * GEM_MMA_TILE_ELEMS;
        const elem *vsm = ks + T * GEM_MMA_ROW;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint32_t b[4];
                gem_ldsm_x4(b, ks + (8 * i + krow) * GEM_MMA_ROW + kcol + 32 * h);
                const uint2 l0 = sqb[w][2 * h][lane], l1 = sqb[w][2 * h + 1][lane];
                E::mma(d0, qa[2 * h][0], qa[2 * h][1], qa[2 * h][2], qa[2 * h][3], b[0], b[1]);
                E::mma(d1, l0.x, 0u, l0.y, 0u, b[0], b[1]);
                E::mma(d0, qa[2 * h + 1][0], qa[2 * h + 1][1], qa[2 * h + 1][2],
                       qa[2 * h + 1][3], b[2], b[3]);
                E::mma(d1, l1.x, 0u, l1.y, 0u, b[2], b[3]);
            }
            float2 rr;
            rr.x = (d0[0] + d0[2]) + d1[0];
            rr.y = (d0[1] + d0[3]) + d1[1];
            *reinterpret_cast<float2 *>(&sred[w][grp][8 * i + 2 * tig]) = rr;
        }
        __syncthreads();
        if (it + 1 < ntiles)
            store(it + 1, nx);
        if (it + 1 + AHEAD < ntiles)
            load(it + 1 + AHEAD, nx);
        gem_mma_tile_softmax<E>(sred, sp, salpha, w, lane, qe, (int)min(end - t0, (int64_t)T),
                                sg, m, s);
        __syncthreads();
        gem_mma_tile_v_update<E>(acc, sp, salpha, vsm, w, lane);
    };
    if (AHEAD == 1) {
        for (int64_t it = 0; it < ntiles; it++)
            step(it, ra);
    } else {
        for (int64_t it = 0; it < ntiles; it += 2) {
            step(it, rb);
            if (it + 1 < ntiles)
                step(it + 1, ra);
        }
    }
    /* the partial, O times V's scale (and 2^-14: the weights were taken x 2^14) */
    const int64_t row = p * n_q_heads + g * GEM_CU_GROUP + grp;
    float *po = part_o + row * GEM_CU_D + 64 * w + 2 * tig;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        float2 o = make_float2(acc[j][0] + acc[j][2], acc[j][1] + acc[j][3]);
        o.x = o.x * GEM_MMA_F16_O_SCALE * vs;
        o.y = o.y * GEM_MMA_F16_O_SCALE * vs;
        *reinterpret_cast<float2 *>(po + 8 * j) = o;
    }
    if (lane == 0) {
        part_m[p * n_q_heads + g * GEM_CU_GROUP + w] = m;
        part_s[p * n_q_heads + g * GEM_CU_GROUP + w] = s;
    }
}

/* version 5: the codes stay FP8 in shared memory (half the bytes of F16), so a block holds two
 * buffers of 32-token tiles at two blocks an SM: one softmax step and two barriers per 32 rows
 * instead of per 16. The MMAs are version 3's (F16 pieces of Q and of the weights); their B
 * fragments are widened from the FP8 rows as they are read. Dots: lane (grp, tig) reads 16
 * codes of token grp at dims 64w + 16 tig (one 16-byte load) and takes word st as k-step st's
 * columns 2 tig, 2 tig + 1 (its low two codes) and 2 tig + 8, + 9 (its high two), so k-step st
 * covers dims 64w + 16t + 4st + {0..3} over the four tig; Q's A fragments are taken in the same
 * order. V update: lane (grp, tig) reads dims 64w + 32G + 4grp + {0..3} of tokens 4 tig + {0..3}
 * (four 4-byte loads), transposes the 4 x 4 bytes (PRMT), and takes dim 4grp + j's four tokens
 * as n-tile 4G + j's column grp, k = tokens 4 tig + {0..3}; the weights' A fragments follow that
 * token order, and the partial's O columns map back to dims 64w + 32G + 4c + j. */
#define F5_T 32
#define F5_ROW 528                                 /* bytes of a staged row: 512 + 16 */
#define F5_TILE_BYTES (2 * F5_T * F5_ROW)          /* K then V rows of one tile: 33,792 */
#define F5_STAGED_BYTES (2 * F5_TILE_BYTES)        /* two buffers: 67,584 */

/* two E4M3 codes (the low 16 bits of x) -> F16x2, exact */
__device__ __forceinline__ uint32_t f5_h2(uint32_t x)
{
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(x & 0xFFFFu), __NV_E4M3);
    return (uint32_t)h.x | ((uint32_t)h.y << 16);
}

__global__ void __launch_bounds__(GEM_CU_THREADS, 2)
    fp8_smem_first_pass(const float *__restrict__ q, const uint8_t *__restrict__ k,
                        const uint8_t *__restrict__ v, int64_t hs, float *__restrict__ part_m,
                        float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,
                        int64_t partitions, int64_t n_q_heads, float scale,
                        const __grid_constant__ fp8_scales sc)
{
    typedef gem_mma_f16_elem E;
    typedef E::elem elem;
    const int T = F5_T;
    extern __shared__ __align__(128) unsigned char f5_ring[]; /* F5_STAGED_BYTES */
    __shared__ __align__(16) float sred[GEM_CU_THREADS / 32][GEM_CU_GROUP][F5_T];
    __shared__ __align__(16) float sp[GEM_CU_GROUP][F5_T];
    __shared__ float salpha[GEM_CU_GROUP];
    __shared__ uint2 sqb[GEM_CU_THREADS / 32][4][32];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    const float sg = (float)((double)scale * (double)sc.k[g]);
    const float vs = sc.v[g];
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    /* Q of head grp, dims 64w + 16 tig + 4 st + u: k-step st's columns 2 tig + (u & 1) +
     * 8 (u >> 1) */
    uint32_t qa[4][4];
    int qe = 0;
    {
        const float *qh = q + (g * GEM_CU_GROUP + grp) * GEM_CU_D + 64 * w + 16 * tig;
        float mx = 0.f;
#pragma unroll
        for (int i = 0; i < 16; i++)
            mx = fmaxf(mx, fabsf(__ldg(qh + i)));
        qe = gem_mma_f16_q_exponent(mx, w, grp, tig);
#pragma unroll
        for (int st = 0; st < 4; st++) {
            elem hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const float x = ldexpf(__ldg(qh + 4 * st + u), qe);
                hi[u] = E::piece(x);
                const float r1 = x - E::value(hi[u]);
                mid[u] = E::piece(r1);
                lo[u] = E::piece(r1 - E::value(mid[u]));
            }
            qa[st][0] = E::pack(hi[0], hi[1]);
            qa[st][1] = E::pack(mid[0], mid[1]);
            qa[st][2] = E::pack(hi[2], hi[3]);
            qa[st][3] = E::pack(mid[2], mid[3]);
            sqb[w][st][lane] = make_uint2(E::pack(lo[0], lo[1]), E::pack(lo[2], lo[3]));
        }
    }
    /* loads: 16 codes at column pcol of rows prow + 8u (u < 4) of K and of V */
    const int prow = tid >> 5, pcol = 16 * (tid & 31);
    const uint8_t *kp = k + g * hs + (begin + prow) * GEM_CU_D + pcol;
    const uint8_t *vp = v + g * hs + (begin + prow) * GEM_CU_D + pcol;
    const uint4 zero4 = make_uint4(0u, 0u, 0u, 0u);
    uint4 r[8];
    auto load = [&](int64_t it) {
        const int64_t t = begin + it * T + prow;
        const int64_t off = it * T * GEM_CU_D;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const bool in = t + 8 * u < end;
            r[u] = in ? gem_ld16(kp + off + 8 * u * GEM_CU_D, pol) : zero4;
            r[4 + u] = in ? gem_ld16(vp + off + 8 * u * GEM_CU_D, pol) : zero4;
        }
    };
    auto store = [&](int64_t it) {
        unsigned char *ks = f5_ring + (size_t)(it & 1) * F5_TILE_BYTES, *vsm = ks + T * F5_ROW;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            *reinterpret_cast<uint4 *>(ks + (prow + 8 * u) * F5_ROW + pcol) = r[u];
            *reinterpret_cast<uint4 *>(vsm + (prow + 8 * u) * F5_ROW + pcol) = r[4 + u];
        }
    };
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;
    if (ntiles > 0) {
        load(0);
        store(0);
    }
    if (ntiles > 1)
        load(1);
    __syncthreads();
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * T;
        const unsigned char *ks = f5_ring + (size_t)(it & 1) * F5_TILE_BYTES;
        const unsigned char *vsm = ks + T * F5_ROW;
        /* dots: n-tile i is tokens 8i .. 8i + 7 */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 c =
                *reinterpret_cast<const uint4 *>(ks + (8 * i + grp) * F5_ROW + 64 * w + 16 * tig);
            float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int st = 0; st < 4; st++) {
                const uint32_t wd = gem_word(c, st);
                const uint32_t b0 = f5_h2(wd), b1 = f5_h2(wd >> 16);
                const uint2 l = sqb[w][st][lane];
                E::mma(d0, qa[st][0], qa[st][1], qa[st][2], qa[st][3], b0, b1);
                E::mma(d1, l.x, 0u, l.y, 0u, b0, b1);
            }
            float2 rr;
            rr.x = (d0[0] + d0[2]) + d1[0];
            rr.y = (d0[1] + d0[3]) + d1[1];
            *reinterpret_cast<float2 *>(&sred[w][grp][8 * i + 2 * tig]) = rr;
        }
        __syncthreads(); /* sred complete; every warp is past tile it - 1's V update */
        if (it + 1 < ntiles)
            store(it + 1);
        if (it + 2 < ntiles)
            load(it + 2);
        {
            /* softmax: warp w owns head w, lane t token t */
            float a = 0.f;
#pragma unroll
            for (int ww = 0; ww < GEM_CU_THREADS / 32; ww++)
                a += sred[ww][w][lane];
            a = ldexpf(a, -__shfl_sync(0xffffffffu, qe, 4 * w));
            const int live_rows = (int)min(end - t0, (int64_t)T);
            const float scv = lane < live_rows ? a * sg : -INFINITY;
            float mx = scv;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float mn = fmaxf(m, mx);
            const float e = expf(scv - mn);
            const float alpha = expf(m - mn);
            float ps = e;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1)
                ps += __shfl_xor_sync(0xffffffffu, ps, off);
            s = s * alpha + ps;
            m = mn;
            sp[w][lane] = e;
            if (lane == 0)
                salpha[w] = alpha;
        }
        __syncthreads(); /* the weights of all eight heads and tile it + 1 are published */
        {
            const float al = salpha[grp];
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int x = 0; x < 4; x++)
                    acc[j][x] *= al;
#pragma unroll
            for (int kst = 0; kst < 2; kst++) {
                float4 pw = *reinterpret_cast<const float4 *>(&sp[grp][16 * kst + 4 * tig]);
                float pv[4] = {pw.x * GEM_MMA_F16_P_SCALE, pw.y * GEM_MMA_F16_P_SCALE,
                               pw.z * GEM_MMA_F16_P_SCALE, pw.w * GEM_MMA_F16_P_SCALE};
                elem ph[4], pl[4];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    ph[u] = E::piece(pv[u]);
                    pl[u] = E::piece(pv[u] - E::value(ph[u]));
                }
                const uint32_t a0 = E::pack(ph[0], ph[1]), a1 = E::pack(pl[0], pl[1]),
                               a2 = E::pack(ph[2], ph[3]), a3 = E::pack(pl[2], pl[3]);
                const unsigned char *vr = vsm + (16 * kst + 4 * tig) * F5_ROW + 64 * w + 4 * grp;
#pragma unroll
                for (int G = 0; G < 2; G++) {
                    uint32_t x[4];
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        x[i] = *reinterpret_cast<const uint32_t *>(vr + i * F5_ROW + 32 * G);
                    const uint32_t t01l = __byte_perm(x[0], x[1], 0x5140),
                                   t01h = __byte_perm(x[0], x[1], 0x7362),
                                   t23l = __byte_perm(x[2], x[3], 0x5140),
                                   t23h = __byte_perm(x[2], x[3], 0x7362);
                    const uint32_t y[4] = {__byte_perm(t01l, t23l, 0x5410),
                                           __byte_perm(t01l, t23l, 0x7632),
                                           __byte_perm(t01h, t23h, 0x5410),
                                           __byte_perm(t01h, t23h, 0x7632)};
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        E::mma(acc[4 * G + j], a0, a1, a2, a3, f5_h2(y[j]), f5_h2(y[j] >> 16));
                }
            }
        }
    }
    /* the partial: n-tile 4G + j's column c is dim 64w + 32G + 4c + j; this thread's columns
     * 2 tig, 2 tig + 1 are dims 64w + 32G + 8 tig + j and + 4 + j */
    const int64_t row = p * n_q_heads + g * GEM_CU_GROUP + grp;
    float *po = part_o + row * GEM_CU_D + 64 * w + 8 * tig;
    const float f = GEM_MMA_F16_O_SCALE;
#pragma unroll
    for (int G = 0; G < 2; G++) {
        float o[8];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            o[j] = (acc[4 * G + j][0] + acc[4 * G + j][2]) * f * vs;
            o[4 + j] = (acc[4 * G + j][1] + acc[4 * G + j][3]) * f * vs;
        }
        *reinterpret_cast<float4 *>(po + 32 * G) = make_float4(o[0], o[1], o[2], o[3]);
        *reinterpret_cast<float4 *>(po + 32 * G + 4) = make_float4(o[4], o[5], o[6], o[7]);
    }
    if (lane == 0) {
        part_m[p * n_q_heads + g * GEM_CU_GROUP + w] = m;
        part_s[p * n_q_heads + g * GEM_CU_GROUP + w] = s;
    }
}

/* the library's reducer alone (the FP8 tensor-core passes scaled their partials' O) */
__global__ void __launch_bounds__(GEM_CU_THREADS)
    plain_reducer(const float *__restrict__ part_m, const float *__restrict__ part_s,
                  const float *__restrict__ part_o, float *__restrict__ out, int64_t partitions)
{
    gem_fused_reducer_body(part_m, part_s, part_o, out, partitions, GEM_CU_D, false);
}

/* x quantized per head (heads of `per` elements): scale = largest |x| / 448 (1 for zeros),
 * code = the E4M3 nearest x / scale (round to nearest even, saturating) */
static void quantize(const float *x, int64_t heads, size_t per, uint8_t *codes, float *scale)
{
    for (int64_t g = 0; g < heads; g++) {
        float amax = 0.f;
        for (size_t i = 0; i < per; i++)
            amax = fmaxf(amax, fabsf(x[g * per + i]));
        scale[g] = amax > 0.f ? amax / 448.0f : 1.0f;
        for (size_t i = 0; i < per; i++)
            codes[g * per + i] = (uint8_t)__nv_cvt_float_to_fp8(x[g * per + i] / scale[g],
                                                                __NV_SATFINITE, __NV_E4M3);
    }
}

/* x rounded to BF16 (the bits, and the value in place) */
static void to_bf16(float *x, uint16_t *bits, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const __nv_bfloat16 b = __float2bfloat16_rn(x[i]);
        x[i] = __bfloat162float(b);
        bits[i] = *reinterpret_cast<const uint16_t *>(&b);
    }
}

int main(int argc, char **argv)
{
    int rounds = 10, want[NV] = {1, 1, 1, 1, 1, 1}, any = 0;
    int64_t lengths[8] = {8192, 65536, 131072}, P = 64;
    int nl = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--partitions") && i + 1 < argc) {
            P = atoll(argv[++i]);
        } else if (!strcmp(argv[i], "--lengths") && i + 1 < argc) {
            nl = 0;
            for (char *t = strtok(argv[++i], ","); t && nl < 8; t = strtok(NULL, ","))
                lengths[nl++] = atoll(t);
        } else if (argv[i][0] >= '0' && argv[i][0] <= '9' && atoi(argv[i]) < NV) {
            if (!any)
                for (int v = 0; v < NV; v++)
                    want[v] = 0;
            any = 1;
            want[atoi(argv[i])] = 1;
        } else {
            fprintf(stderr, "usage: fp8_decode [--lengths a,b,..] [--rounds N] "
                            "[--partitions P] [versions 0-%d ...]\n", NV - 1);
            return 2;
        }
    }
    if (rounds < 1 || nl < 1 || P < 1 || P > 1024)
        return 2;
    for (int i = 0; i < nl; i++)
        if (lengths[i] < 1 || lengths[i] > (1 << 20))
            return 2;
    cudaCheck(cudaFuncSetAttribute(fp8_mma_first_pass<1>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   GEM_MMA_STAGED_BYTES));
    cudaCheck(cudaFuncSetAttribute(fp8_mma_first_pass<2>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   GEM_MMA_STAGED_BYTES));
    cudaCheck(cudaFuncSetAttribute(fp8_smem_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, F5_STAGED_BYTES));
    gem_decode_ctx *ctx = NULL;
    GEM_TRY(gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &ctx));
    cudaStream_t stream;
    cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    const float scale = 1.0f / sqrtf((float)GEM_CU_D);
    const gem_decode_shape shape = {NQ, NKV, GEM_CU_D, GEM_CU_D, scale};
    const size_t nq = (size_t)NQ * GEM_CU_D;
    printf("FP8 E4M3 K/V, a scale per KV head; %d query heads over %d KV heads, D%d, scale "
           "1/sqrt(%d), %lld partitions; times in ms\n",
           NQ, NKV, GEM_CU_D, GEM_CU_D, (long long)P);
    int failed = 0;
    for (int li = 0; li < nl; li++) {
        const int64_t live = lengths[li];
        const size_t per = (size_t)live * GEM_CU_D, n = (size_t)NKV * per;
        float *hq = (float *)malloc(nq * sizeof(float));
        float *hk = (float *)malloc(n * sizeof(float)), *hv = (float *)malloc(n * sizeof(float));
        uint8_t *k8 = (uint8_t *)malloc(n), *v8 = (uint8_t *)malloc(n);
        uint16_t *k16 = (uint16_t *)malloc(n * 2), *v16 = (uint16_t *)malloc(n * 2);
        double *ref8 = (double *)malloc(nq * sizeof(double));
        double *ref16 = (double *)malloc(nq * sizeof(double));
        float *hout = (float *)malloc(nq * sizeof(float)), *hfirst = (float *)malloc(nq * 4);
        if (!hq || !hk || !hv || !k8 || !v8 || !k16 || !v16 || !ref8 || !ref16 || !hout ||
            !hfirst) {
            fprintf(stderr, "out of host memory at %lld\n", (long long)live);
            return 1;
        }
        fill(hq, nq, 11 + (uint64_t)live);
        /* heads of different magnitudes, so that their scales differ */
        for (int64_t g = 0; g < NKV; g++) {
            fill_uniform(hk + g * per, per, 13 + (uint64_t)live + 7 * g, -0.3f * (g + 1),
                         0.3f * (g + 1));
            fill_uniform(hv + g * per, per, 17 + (uint64_t)live + 7 * g, -2.0f / (g + 1),
                         2.0f / (g + 1));
        }
        fp8_scales sc;
        quantize(hk, NKV, per, k8, sc.k);
        quantize(hv, NKV, per, v8, sc.v);
        to_bf16(hk, k16, n);
        to_bf16(hv, v16, n);
        gem_kv_view v8h, v16h;
        memset(&v8h, 0, sizeof v8h);
        v8h.k = k8;
        v8h.v = v8;
        v8h.k_dtype = v8h.v_dtype = GEM_DTYPE_FP8_E4M3;
        v8h.k_head_stride = v8h.v_head_stride = (int64_t)per;
        v8h.k_token_stride = v8h.v_token_stride = GEM_CU_D;
        v8h.live = v8h.capacity = live;
        v8h.k_scale = sc.k;
        v8h.v_scale = sc.v;
        v16h = v8h;
        v16h.k = k16;
        v16h.v = v16;
        v16h.k_dtype = v16h.v_dtype = GEM_DTYPE_BF16;
        v16h.k_scale = v16h.v_scale = NULL;
        GEM_TRY(gem_attn_reference_kv(&shape, hq, &v8h, ref8, nq));
        if (want[0])
            GEM_TRY(gem_attn_reference_kv(&shape, hq, &v16h, ref16, nq));

        /* rotating copies: at least 256 MiB of caches a version, at most 16 copies */
        const size_t bytes16 = 2 * n * 2;
        int copies = (int)((((size_t)256 << 20) + bytes16 - 1) / bytes16);
        copies = copies < 1 ? 1 : (copies > 16 ? 16 : copies);
        float *dq, *dout, *dws;
        void *dk8[16], *dv8[16], *dk16[16], *dv16[16];
        cudaCheck(cudaMalloc(&dq, nq * sizeof(float)));
        cudaCheck(cudaMalloc(&dout, nq * sizeof(float)));
        size_t ws_bytes = 0; /* version 0's default, or the FP8 passes' partials */
        GEM_TRY(gem_decode_workspace_bytes(ctx, &shape, live, NULL, &ws_bytes));
        const size_t ws_fp8 = (size_t)P * NQ * (GEM_CU_D + 2) * sizeof(float);
        ws_bytes = ws_bytes > ws_fp8 ? ws_bytes : ws_fp8;
        cudaCheck(cudaMalloc(&dws, ws_bytes));
        cudaCheck(cudaMemcpy(dq, hq, nq * sizeof(float), cudaMemcpyHostToDevice));
        for (int c = 0; c < copies; c++) {
            cudaCheck(cudaMalloc(&dk8[c], n));
            cudaCheck(cudaMalloc(&dv8[c], n));
            cudaCheck(cudaMemcpy(dk8[c], k8, n, cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(dv8[c], v8, n, cudaMemcpyHostToDevice));
            if (want[0]) {
                cudaCheck(cudaMalloc(&dk16[c], n * 2));
                cudaCheck(cudaMalloc(&dv16[c], n * 2));
                cudaCheck(cudaMemcpy(dk16[c], k16, n * 2, cudaMemcpyHostToDevice));
                cudaCheck(cudaMemcpy(dv16[c], v16, n * 2, cudaMemcpyHostToDevice));
            }
        }
        float *pm = dws, *ps = pm + P * NQ, *po = ps + P * NQ;
        const dim3 grid1((unsigned)P, NKV), grid2(NQ, GEM_CU_D / GEM_CU_THREADS);
        auto run = [&](int ver, int c) {
            if (ver == 0) {
                gem_kv_view kv = v16h;
                kv.k = dk16[c];
                kv.v = dv16[c];
                GEM_TRY(gem_decode(ctx, &shape, dq, &kv, dout, dws, ws_bytes, NULL, stream));
                return;
            }
            if (ver >= 3) {
                const uint8_t *kk = (const uint8_t *)dk8[c], *vv = (const uint8_t *)dv8[c];
                if (ver == 3)
                    fp8_mma_first_pass<1><<<grid1, GEM_CU_THREADS, GEM_MMA_STAGED_BYTES, stream>>>(
                        dq, kk, vv, (int64_t)per, pm, ps, po, live, P, (int64_t)NQ, scale, sc);
                else if (ver == 5)
                    fp8_smem_first_pass<<<grid1, GEM_CU_THREADS, F5_STAGED_BYTES, stream>>>(
                        dq, kk, vv, (int64_t)per, pm, ps, po, live, P, (int64_t)NQ, scale, sc);
                else
                    fp8_mma_first_pass<2><<<grid1, GEM_CU_THREADS, GEM_MMA_STAGED_BYTES, stream>>>(
                        dq, kk, vv, (int64_t)per, pm, ps, po, live, P, (int64_t)NQ, scale, sc);
                cudaCheck(cudaGetLastError());
                plain_reducer<<<grid2, GEM_CU_THREADS, 0, stream>>>(pm, ps, po, dout, P);
                cudaCheck(cudaGetLastError());
                return;
            }
            if (ver == 1)
                fp8_first_pass<1, 1><<<grid1, GEM_CU_THREADS, 0, stream>>>(
                    dq, dk8[c], dv8[c], (int64_t)per / 4, pm, ps, po, live, P, (int64_t)NQ,
                    scale, sc);
            else
                fp8_first_pass<2, 2><<<grid1, GEM_CU_THREADS, 0, stream>>>(
                    dq, dk8[c], dv8[c], (int64_t)per / 4, pm, ps, po, live, P, (int64_t)NQ,
                    scale, sc);
            cudaCheck(cudaGetLastError());
            fp8_reducer<<<grid2, GEM_CU_THREADS, 0, stream>>>(pm, ps, po, dout, P, sc);
            cudaCheck(cudaGetLastError());
        };
        /* each version against its reference, every element written, a bitwise repeat */
        int valid[NV];
        for (int ver = 0; ver < NV; ver++) {
            valid[ver] = want[ver];
            if (!want[ver])
                continue;
            for (int rep = 0; rep < 2; rep++) {
                cudaCheck(cudaMemsetAsync(dout, 0xFF, nq * sizeof(float), stream));
                run(ver, rep % copies);
                cudaCheck(cudaStreamSynchronize(stream));
                cudaCheck(cudaMemcpy(hout, dout, nq * sizeof(float), cudaMemcpyDeviceToHost));
                if (rep == 1) {
                    if (memcmp(hfirst, hout, nq * sizeof(float)) != 0) {
                        printf("%-7lld v%d INVALID: the repeat differs\n", (long long)live, ver);
                        valid[ver] = 0;
                    }
                    continue;
                }
                memcpy(hfirst, hout, nq * sizeof(float));
                const double *ref = ver == 0 ? ref16 : ref8;
                double num = 0, den = 0;
                int finite = 1;
                for (size_t j = 0; j < nq; j++) {
                    finite &= isfinite(hout[j]);
                    num += (hout[j] - ref[j]) * (hout[j] - ref[j]);
                    den += ref[j] * ref[j];
                }
                printf("%-7lld v%d nmse %.3g against the double reference of its cache%s\n",
                       (long long)live, ver, num / den, finite ? "" : " (NOT FINITE)");
                if (!finite || !(num / den <= 1e-10))
                    valid[ver] = 0;
            }
            failed |= !valid[ver];
        }
        double *t = (double *)calloc((size_t)NV * 2 * rounds, sizeof(double));
        for (int wu = 0; wu < 3; wu++)
            for (int ver = 0; ver < NV; ver++)
                if (valid[ver])
                    run(ver, wu % copies);
        int c = 0;
        for (int r = 0; r < rounds; r++)
            for (int pass = 0; pass < 2; pass++)
                for (int j = 0; j < NV; j++) {
                    const int ver = pass == 0 ? j : NV - 1 - j;
                    if (!valid[ver])
                        continue;
                    wait_kernel<<<1, 1, 0, stream>>>(50000);
                    cudaCheck(cudaEventRecord(e0, stream));
                    run(ver, c);
                    c = (c + 1) % copies;
                    cudaCheck(cudaEventRecord(e1, stream));
                    cudaCheck(cudaEventSynchronize(e1));
                    float ms = 0;
                    cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
                    t[(size_t)ver * 2 * rounds + 2 * r + pass] = ms;
                }
        for (int ver = 0; ver < NV; ver++) {
            if (!valid[ver])
                continue;
            double *ti = t + (size_t)ver * 2 * rounds;
            qsort(ti, (size_t)2 * rounds, sizeof(double), cmp_double);
            const double med = 0.5 * (ti[rounds - 1] + ti[rounds]);
            const double bytes = (double)n * 2 * (ver == 0 ? 2 : 1);
            printf("%-7lld v%d  min %.4f  median %.4f  max %.4f  %.1f GB/s (%s, %d copies)\n",
                   (long long)live, ver, ti[0], med, ti[2 * rounds - 1], bytes / (med * 1e-3) / 1e9,
                   ver == 0 ? "bf16" : "fp8_e4m3", copies);
        }
        free(t);
        for (int cc = 0; cc < copies; cc++) {
            cudaFree(dk8[cc]);
            cudaFree(dv8[cc]);
            if (want[0]) {
                cudaFree(dk16[cc]);
                cudaFree(dv16[cc]);
            }
        }
        cudaFree(dq);
        cudaFree(dout);
        cudaFree(dws);
        free(hq);
        free(hk);
        free(hv);
        free(k8);
        free(v8);
        free(k16);
        free(v16);
        free(ref8);
        free(ref16);
        free(hout);
        free(hfirst);
    }
    gem_decode_ctx_destroy(ctx);
    printf("%s\n", failed ? "FAILED" : "all versions checked");
    return failed;
}
