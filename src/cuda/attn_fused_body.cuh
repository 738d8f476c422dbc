/*
 * Internal to the CUDA backend: the device code of the fused route, its first pass
 * (gem_fused_first_pass_body) and its reducer (gem_fused_reducer_body), included by
 * src/cuda/attn_fused.cu, which instantiates the kernels the library ships; an experiment
 * can include it to measure variants of the same code (dev/cuda/fused_decode.cu versions
 * 14-19 did). See attn_fused.cu for what the kernels do and where they come from.
 */
#ifndef GEM_ATTN_FUSED_BODY_CUH
#define GEM_ATTN_FUSED_BODY_CUH

#include <math.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "gem_cuda_internal.h"
#include "gem_pdl.cuh"

#define GEM_FP_TILE 8                    /* tokens per tile */
#define GEM_FP_HALF_TOKENS 4             /* tokens per half and tile */
#define GEM_FP_HALF_THREADS 128          /* threads per half: one float4 of a row each */
#define GEM_FR_BATCH 256                 /* reducer: partial weights per round */

/* One halving step of a transposed warp sum over 2W values per lane: lanes with
 * bit O set keep values [W, 2W), the others [0, W), each adding its partner's copy. */
template <int W, int O> __device__ __forceinline__ void gem_xpose_step(float *v, int lane)
{
    const int upper = (lane & O) != 0;
#pragma unroll
    for (int i = 0; i < W; i++) {
        const float send = upper ? v[i] : v[i + W];
        const float keep = upper ? v[i + W] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
    }
}

/* One halving step of the select-free transposed sum: keep v[0, W), add the partner's. */
template <int W, int O> __device__ __forceinline__ void gem_xpose_keep_low(float *v)
{
#pragma unroll
    for (int i = 0; i < W; i++)
        v[i] += __shfl_xor_sync(0xffffffffu, v[i + W], O);
}

__device__ __forceinline__ float gem_dot4(float4 a, float4 b)
{
    return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, a.x * b.x)));
}

/* The element types of K and V. A thread owns four consecutive elements of every row (the
 * `piece`): 16 bytes of F32 or 8 bytes of BF16 / F16, loaded with L1 no-allocate and L2
 * evict-first under `pol` (each byte is used once), plain (not .nc) and volatile with a memory
 * clobber, so neither compiler nor assembler moves a load across the block's barriers: it
 * stays where the loop issues it, in flight through the tile. `f4` gives the four elements as
 * floats (exact for every type). F32 serves the D512 CUDA-core body below (K_AHEAD, V_AHEAD:
 * how many tiles ahead its loads of K and V go, one each; load4: the K-from-V pass's scattered
 * elements); all three serve the D256 body (attn_fused_d256_body.cuh). */
/* Scalar loads (L1 no-allocate, L2 under `pol`, volatile like the vector loads) for the F32
 * K-from-V first pass, whose thread owns four scattered elements of each row. */
__device__ __forceinline__ float gem_ld_f32(const float *p, uint64_t pol)
{
    float r;
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.f32 %0, [%1], %2;\n"
                 : "=f"(r)
                 : "l"(p), "l"(pol)
                 : "memory");
    return r;
}

struct gem_kv_f32 {
    typedef float4 piece;
    typedef float elem;
    enum { K_AHEAD = 1, V_AHEAD = 1 };
    /* elements o0, o1, o1 + 32, o1 + 64 of a row (gem_kfv_elements), as one piece */
    static __device__ __forceinline__ piece load4(const elem *row, int o0, int o1, uint64_t pol)
    {
        return make_float4(gem_ld_f32(row + o0, pol), gem_ld_f32(row + o1, pol),
                           gem_ld_f32(row + o1 + 32, pol), gem_ld_f32(row + o1 + 64, pol));
    }
    static __device__ __forceinline__ piece zero(void) { return make_float4(0.f, 0.f, 0.f, 0.f); }
    static __device__ __forceinline__ piece load(const piece *p, uint64_t pol)
    {
        float4 r;
        asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;\n"
                     : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
                     : "l"(p), "l"(pol)
                     : "memory");
        return r;
    }
    static __device__ __forceinline__ float4 f4(piece r) { return r; }
};

/* 8-byte loads of four 16-bit elements (BF16 or F16). */
__device__ __forceinline__ uint2 gem_ld_kv8(const uint2 *p, uint64_t pol)
{
    uint2 r;
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;\n"
                 : "=r"(r.x), "=r"(r.y)
                 : "l"(p), "l"(pol)
                 : "memory");
    return r;
}

struct gem_kv_bf16 {
    typedef uint2 piece;
    typedef uint16_t elem;
    static __device__ __forceinline__ piece zero(void) { return make_uint2(0u, 0u); }
    static __device__ __forceinline__ piece load(const piece *p, uint64_t pol)
    {
        return gem_ld_kv8(p, pol);
    }
    /* a bfloat16 is the top half of the float it stands for */
    static __device__ __forceinline__ float4 f4(piece r)
    {
        return make_float4(__uint_as_float(r.x << 16), __uint_as_float(r.x & 0xFFFF0000u),
                           __uint_as_float(r.y << 16), __uint_as_float(r.y & 0xFFFF0000u));
    }
};

struct gem_kv_f16 {
    typedef uint2 piece;
    typedef uint16_t elem;
    static __device__ __forceinline__ piece zero(void) { return make_uint2(0u, 0u); }
    static __device__ __forceinline__ piece load(const piece *p, uint64_t pol)
    {
        return gem_ld_kv8(p, pol);
    }
    static __device__ __forceinline__ float4 f4(piece r)
    {
        const float2 a = __half22float2(*reinterpret_cast<const __half2 *>(&r.x));
        const float2 b = __half22float2(*reinterpret_cast<const __half2 *>(&r.y));
        return make_float4(a.x, a.y, b.x, b.y);
    }
};

/* K rebuilt from V (KFV): the elements a thread owns. Thread i of half hf (lane l, warp
 * w = (i % 128) / 32 of the half) owns one rotating element, slot 0 (*o0): for l < 16 element
 * 16w + l (pair j = 16w + l, the low side), for l >= 16 element 256 + 16w + l - 16 (the high
 * side of the same pair, in lane l ^ 16 of the same warp), and three that pass through,
 * slots 1-3: elements *o1, *o1 + 32, *o1 + 64, lane l of the warp's three blocks of 32 among
 * the twelve 64-255 and 320-511 (warps 0-3: 64, 160, 320, 416 and the two blocks after).
 * Every warp holds 16 whole pairs, so the rotation needs one shuffle per row and every warp
 * does the same work; each load instruction of a warp reads 64 or 128 contiguous bytes. */
__device__ __forceinline__ void gem_kfv_elements(int d4, int *o0, int *o1)
{
    const int w = d4 >> 5, l = d4 & 31, b = 3 * w; /* the first of the warp's blocks */
    *o0 = l < 16 ? 16 * w + l : GEM_CU_ROPE_HALF + 16 * w + (l - 16);
    *o1 = (b < 6 ? 64 + 32 * b : 320 + 32 * (b - 6)) + l;
}

/* cos and sin of pos * f: the angle in half turns y = pos * f / pi in double, reduced
 * exactly to [-1, 1] (y - 2 rint(y / 2) is exact), then sincospif, whose own reduction is
 * exact, so no large-argument path (and no stack frame) is ever compiled in. */
__device__ __forceinline__ void gem_rope_cs(int64_t pos, double f, float *c, float *s)
{
    const double y = (double)pos * f * 0.3183098861837907; /* 1 / pi */
    const double r = y - 2.0 * rint(0.5 * y);
    sincospif((float)r, s, c);
}

/* E: the element type of K and V (gem_kv_f32: the 16-bit D512 passes are the tensor-core
 * bodies further down). Strides count
 * pieces of four elements. TS4 > 0: the token stride of K and V is TS4 pieces (a compile-time
 * constant: the address of each row is a shift and an add); TS4 = 0: k_ts4 and v_ts4 at run
 * time. KFV: K is rebuilt from V (k is not read; kw and rope are used, gem_kfv_elements gives
 * the thread's elements): each tile's V rows, loaded E::K_AHEAD tiles ahead, serve the dots
 * (slot 0 rotated by the token's angle, k_weight folded into Q for slots 1-3) and then the V
 * update.
 * The reducer, a programmatic dependent of this grid, is let go when the blocks exit (no early
 * trigger: dev/cuda/fused_decode.cu versions 14-19 measured an early trigger 2-3.5 us slower). */
template <typename E, int TS4, bool KFV>
__device__ __forceinline__ void gem_fused_first_pass_body(
    const float *__restrict__ q, /* (n_q_heads, 512) */
    const void *__restrict__ k,  /* row (g, t) at piece g*k_hs4 + t*k_ts4 (4 elements each) */
    int64_t k_hs4, int64_t k_ts4,
    const void *__restrict__ v,  /* row (g, t) at piece g*v_hs4 + t*v_ts4 */
    int64_t v_hs4, int64_t v_ts4,
    float *__restrict__ part_m, /* (P, n_q_heads) */
    float *__restrict__ part_s, /* (P, n_q_heads) */
    float *__restrict__ part_o, /* (P, n_q_heads, 512) */
    int64_t live, int64_t partitions, int64_t n_q_heads, float scale,
    const float *__restrict__ kw, /* KFV: (512) k_weight */
    const gem_cu_rope *rope)      /* KFV: in the kernel's parameters */
{
    typedef typename E::piece piece;
    /* KFV: no K loads (KA 1 keeps the arrays valid), V as far ahead as K would go */
    const int TH = GEM_FP_HALF_TOKENS, HT = GEM_FP_HALF_THREADS, KA = KFV ? 1 : E::K_AHEAD,
              VA = KFV ? E::K_AHEAD : E::V_AHEAD;
    __shared__ __align__(16) float sp[GEM_CU_GROUP][GEM_FP_TILE]; /* weights of the tile */
    __shared__ __align__(16) float salpha[GEM_CU_GROUP];         /* rescales of the tile */
    __shared__ float sred[GEM_CU_THREADS / 32][32];               /* the warps' dot sums */
    /* Q of the eight heads (8, 128 float4) during the tiles; half 1's O at the end */
    __shared__ __align__(16) float4 sq[GEM_CU_GROUP * GEM_FP_HALF_THREADS];


    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int hf = tid / HT, d4 = tid % HT;
    const int64_t p = blockIdx.x, g = blockIdx.y;

    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live);
    const int64_t end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + GEM_FP_TILE - 1) / GEM_FP_TILE;

    /* this thread's piece of its half's first row of the tile loaded next (K and V each); the
     * rows of the half are kts / vts pieces apart, and the next tile's 8 rows further */
    const int64_t kts = TS4 > 0 ? (int64_t)TS4 : k_ts4, vts = TS4 > 0 ? (int64_t)TS4 : v_ts4;
    const piece *kp =
        KFV ? nullptr
            : reinterpret_cast<const piece *>(k) + g * k_hs4 + d4 + (begin + hf * 4) * kts;
    const piece *vp =
        KFV ? nullptr
            : reinterpret_cast<const piece *>(v) + g * v_hs4 + d4 + (begin + hf * 4) * vts;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    /* KFV: the elements, the first row of this half (element pointer), the weight of slot
     * 0, the pair's frequency, and cos / sin of 1, 2, 3 token steps */
    int eo0 = 0, eo1 = 0;
    typedef typename E::elem elem;
    const elem *vr = NULL;
    float w0 = 0.f, cstep = 1.f, sstep = 0.f;
    double fj = 0.0;
    const bool low = lane < 16;
    if constexpr (KFV) {
        gem_kfv_elements(d4, &eo0, &eo1);
        vr = reinterpret_cast<const elem *>(v) + 4 * (g * v_hs4 + (begin + hf * 4) * vts);
        w0 = __ldg(kw + eo0);
        fj = rope->inv_freq[16 * (d4 >> 5) + (lane & 15)];
        gem_rope_cs(1, fj, &cstep, &sstep); /* one token's step */
    }

    const int hx = (lane >> 2) & 7;
    float4 o[GEM_CU_GROUP];
    const float4 *q4 = reinterpret_cast<const float4 *>(q) + g * GEM_CU_GROUP * GEM_CU_ROW_F4 + d4;
#pragma unroll
    for (int h = 0; h < GEM_CU_GROUP; h++) {
        if constexpr (KFV) {
            /* slot 0 as is (its weight is in the rotated K), slots 1-3 times k_weight */
            if (hf == 0) {
                const float *qh = q + (g * GEM_CU_GROUP + h) * GEM_CU_D;
                sq[h * HT + d4] = make_float4(__ldg(qh + eo0), __ldg(qh + eo1) * __ldg(kw + eo1),
                                              __ldg(qh + eo1 + 32) * __ldg(kw + eo1 + 32),
                                              __ldg(qh + eo1 + 64) * __ldg(kw + eo1 + 64));
            }
        } else if (hf == 0) {
            sq[h * HT + d4] = __ldg(q4 + h * GEM_CU_ROW_F4);
        }
        o[h] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    __syncthreads(); /* sq complete before the first tile's dots */
    /* the first KA tiles' K pieces and VA tiles' V pieces (loading them before Q lost 1 us:
     * version 18); kq[a], vq[a]: tile i + a while tile i is computed */
    piece kq[KA][GEM_FP_HALF_TOKENS], vq[VA][GEM_FP_HALF_TOKENS];
    if constexpr (!KFV) {
#pragma unroll
        for (int a = 0; a < KA; a++) {
#pragma unroll
            for (int j = 0; j < TH; j++) {
                const int64_t t = begin + a * GEM_FP_TILE + hf * TH + j;
                kq[a][j] = t < end ? E::load(kp + j * kts, pol) : E::zero();
            }
            kp += GEM_FP_TILE * kts;
        }
    }
#pragma unroll
    for (int a = 0; a < VA; a++) {
#pragma unroll
        for (int j = 0; j < TH; j++) {
            const int64_t t = begin + a * GEM_FP_TILE + hf * TH + j;
            if constexpr (KFV)
                vq[a][j] = t < end ? E::load4(vr + 4 * j * vts, eo0, eo1, pol) : E::zero();
            else
                vq[a][j] = t < end ? E::load(vp + j * vts, pol) : E::zero();
        }
        if constexpr (KFV)
            vr += 4 * GEM_FP_TILE * vts;
        else
            vp += GEM_FP_TILE * vts;
    }
    float m = -INFINITY, s = 0.f;

    for (int64_t i = 0; i < ntiles; i++) {
        const int64_t t0 = begin + i * GEM_FP_TILE;
        const int n = (int)min((int64_t)GEM_FP_TILE, end - t0);

        /* partial dots: slot h*4 + j = Q of head h ^ hx . K of token j; transposed sum */
        float4 kf[GEM_FP_HALF_TOKENS];
        if constexpr (KFV) {
            /* K from this tile's V rows: slot 0 rotated by the token's angle, exact cos / sin
             * at the half's first token, then one token's step at a time by angle addition
             * (three steps at most: a few ulp) */
            float c, sn;
            gem_rope_cs(rope->pos0 + t0 + hf * TH, fj, &c, &sn);
#pragma unroll
            for (int j = 0; j < TH; j++) {
                if (j > 0) {
                    const float cn = fmaf(c, cstep, -sn * sstep);
                    sn = fmaf(sn, cstep, c * sstep);
                    c = cn;
                }
                const float4 vf = E::f4(vq[0][j]);
                const float a = w0 * vf.x;                               /* k_weight * V */
                const float b = __shfl_xor_sync(0xffffffffu, a, 16);     /* the pair's other */
                /* low: a c - b s; high: b s + a c */
                kf[j] = make_float4(fmaf(a, c, (low ? -sn : sn) * b), vf.y, vf.z, vf.w);
            }
        } else {
#pragma unroll
            for (int j = 0; j < TH; j++)
                kf[j] = E::f4(kq[0][j]);
        }
        /* slots 0-15 (heads 0-3); slots 16-31 (heads 4-7) are added to them by the first step
         * of the transposed sum as they are formed, so only 16 are ever live */
        float part[16];
#pragma unroll
        for (int h = 0; h < GEM_CU_GROUP / 2; h++) {
            const float4 qh = sq[(h ^ hx) * HT + d4];
#pragma unroll
            for (int j = 0; j < TH; j++)
                part[h * 4 + j] = gem_dot4(qh, kf[j]);
        }
#pragma unroll
        for (int h = GEM_CU_GROUP / 2; h < GEM_CU_GROUP; h++) {
            const float4 qh = sq[(h ^ hx) * HT + d4];
#pragma unroll
            for (int j = 0; j < TH; j++)
                part[(h - GEM_CU_GROUP / 2) * 4 + j] +=
                    __shfl_xor_sync(0xffffffffu, gem_dot4(qh, kf[j]), 16);
        }
        gem_xpose_keep_low<8, 8>(part);
        gem_xpose_keep_low<4, 4>(part);
        gem_xpose_step<2, 2>(part, lane);
        gem_xpose_step<1, 1>(part, lane);
        /* tile i + KA's K and tile i + VA's V pieces, in flight through this tile's softmax
         * and V update (this tile's K registers are free now: kn takes them) */
        piece kn[GEM_FP_HALF_TOKENS], vn[GEM_FP_HALF_TOKENS];
        if constexpr (!KFV) {
#pragma unroll
            for (int j = 0; j < TH; j++) {
                const int64_t t = t0 + KA * GEM_FP_TILE + hf * TH + j;
                kn[j] = t < end ? E::load(kp + j * kts, pol) : E::zero();
            }
            kp += GEM_FP_TILE * kts;
        }
#pragma unroll
        for (int j = 0; j < TH; j++) {
            const int64_t t = t0 + VA * GEM_FP_TILE + hf * TH + j;
            if constexpr (KFV)
                vn[j] = t < end ? E::load4(vr + 4 * j * vts, eo0, eo1, pol) : E::zero();
            else
                vn[j] = t < end ? E::load(vp + j * vts, pol) : E::zero();
        }
        if constexpr (KFV)
            vr += 4 * GEM_FP_TILE * vts;
        else
            vp += GEM_FP_TILE * vts;
        sred[warp][lane] = part[0]; /* head lane/4, token hf*TH + lane%4 */
        __syncthreads();            /* sred complete */

        /* softmax of head `warp`: lane t (mod 8) takes token t */
        {
            const int t = lane & (GEM_FP_TILE - 1);
            const int th = t / TH, tt = t % TH;
            float a = 0.f;
#pragma unroll
            for (int w = 0; w < 4; w++)
                a += sred[th * 4 + w][warp * 4 + tt];
            const float sc = t < n ? a * scale : -INFINITY;
            float mx = sc;
#pragma unroll
            for (int off = GEM_FP_TILE / 2; off > 0; off >>= 1)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float mn = fmaxf(m, mx);
            const float e = expf(sc - mn);    /* rows past n: exp(-inf) = 0 */
            const float alpha = expf(m - mn); /* m = -inf before the first tile: 0 */
            float ps = e;
#pragma unroll
            for (int off = GEM_FP_TILE / 2; off > 0; off >>= 1)
                ps += __shfl_xor_sync(0xffffffffu, ps, off);
            s = s * alpha + ps;
            m = mn;
            if (lane < GEM_FP_TILE)
                sp[warp][lane] = e;
            if (lane == 0)
                salpha[warp] = alpha;
        }
        __syncthreads(); /* the weights of all eight heads are published */

        {
            const float4 al0 = *reinterpret_cast<const float4 *>(&salpha[0]);
            const float4 al1 = *reinterpret_cast<const float4 *>(&salpha[4]);
            const float al[GEM_CU_GROUP] = {al0.x, al0.y, al0.z, al0.w, al1.x, al1.y, al1.z, al1.w};
#pragma unroll
            for (int h = 0; h < GEM_CU_GROUP; h++) {
                o[h].x *= al[h];
                o[h].y *= al[h];
                o[h].z *= al[h];
                o[h].w *= al[h];
            }
        }
        float4 vf[GEM_FP_HALF_TOKENS];
#pragma unroll
        for (int j = 0; j < TH; j++)
            vf[j] = E::f4(vq[0][j]);
#pragma unroll
        for (int h = 0; h < GEM_CU_GROUP; h++) {
            const float4 w = *reinterpret_cast<const float4 *>(&sp[h][hf * TH]);
            const float wj[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int j = 0; j < TH; j++) {
                o[h].x = fmaf(wj[j], vf[j].x, o[h].x);
                o[h].y = fmaf(wj[j], vf[j].y, o[h].y);
                o[h].z = fmaf(wj[j], vf[j].z, o[h].z);
                o[h].w = fmaf(wj[j], vf[j].w, o[h].w);
            }
        }
        /* the pieces move down one tile */
        if constexpr (!KFV) {
#pragma unroll
            for (int a = 0; a + 1 < KA; a++)
#pragma unroll
                for (int j = 0; j < TH; j++)
                    kq[a][j] = kq[a + 1][j];
#pragma unroll
            for (int j = 0; j < TH; j++)
                kq[KA - 1][j] = kn[j];
        }
#pragma unroll
        for (int a = 0; a + 1 < VA; a++)
#pragma unroll
            for (int j = 0; j < TH; j++)
                vq[a][j] = vq[a + 1][j];
#pragma unroll
        for (int j = 0; j < TH; j++)
            vq[VA - 1][j] = vn[j];
        /* the next tile's first barrier orders these reads of sp before sp is rewritten, and
         * its second barrier orders this tile's sred reads before sred is rewritten */
    }

    /* Half 1 hands its O to half 0 in the space of Q: every read of sq (the dots) came
     * before the last tile's barriers, which every thread has passed; with no tile, the
     * barrier after the fill orders the fill before these writes. */
    if (hf == 1) {
#pragma unroll
        for (int h = 0; h < GEM_CU_GROUP; h++)
            sq[h * HT + d4] = o[h];
    }
    __syncthreads();
    const int64_t row0 = p * n_q_heads + g * GEM_CU_GROUP;
    if (hf == 0) {
#pragma unroll
        for (int h = 0; h < GEM_CU_GROUP; h++) {
            const float4 b = sq[h * HT + d4];
            float4 r;
            r.x = o[h].x + b.x;
            r.y = o[h].y + b.y;
            r.z = o[h].z + b.z;
            r.w = o[h].w + b.w;
            if constexpr (KFV) {
                float *po = part_o + (row0 + h) * GEM_CU_D;
                po[eo0] = r.x;
                po[eo1] = r.y;
                po[eo1 + 32] = r.z;
                po[eo1 + 64] = r.w;
            } else {
                reinterpret_cast<float4 *>(part_o)[(row0 + h) * GEM_CU_ROW_F4 + d4] = r;
            }
        }
    }
    if (lane == 0) {
        part_m[row0 + warp] = m;
        part_s[row0 + warp] = s;
    }
}

/* ---- BF16 K and V on tensor cores, staged through shared memory ------------------------------
 * The first pass for BF16 caches: dev/cuda/mma_decode.cu version 24 (results/h200/run78: 0.2573
 * ms at 128K and 0.1373 at 64K against 0.2677 and 0.1403 for version 2, the register-fed
 * tensor-core body this replaced, which is kept there as the control), read through a view,
 * with Q's lo fragments in shared memory, which removed version 24's 12-byte spill (run 79:
 * 0.2437 / 0.1302 ms through gem_decode against version 24's 0.2555 / 0.1360).
 *
 * Exactness: a product of two BF16 values is exact in F32 and mma.sync accumulates in F32. Q is
 * split into three BF16 pieces (q = hi + mid + lo to 2^-24 |q|), the weights p in [0, 1] into two
 * (to 2^-17 p), so the dots are F32 dots and the V update stays far inside the NMSE gate.
 *
 * One 256-thread block per (partition, KV head), partitions by gem_partition_range; warp w, lane
 * = 4 grp + tig; tiles of 16 tokens.
 *   loads: thread i owns 16 bytes at element 8 (i % 64) of rows i / 64 + 4u (u < 4) of K and of
 *     V, so a warp's load instruction reads 512 contiguous bytes of one row, as the F32 pass
 *     reads its rows (the loads alone stream at 4.40 TB/s in this shape, 4.31 in version 2's
 *     eight rows of 64 bytes; run 78). They go out one tile ahead, into registers (L1
 *     no-allocate, L2 evict-first), and are stored into a tile buffer in shared memory: rows of
 *     GEM_MMA_ROW elements (512 + 8: the 16 bytes of padding put the eight rows an ldmatrix
 *     phase reads on distinct banks), two buffers of K and V, 66,560 bytes of dynamic shared
 *     memory. Tile it + 1 is stored after tile it's first barrier, when every warp is past tile
 *     it - 1's V update, the last reads of that buffer; tile it's second barrier publishes it.
 *     Two buffers and not three: the L1 holds the loads in flight, and it is what shared memory
 *     leaves of the SM's 256 KiB (version 26, version 2 with 97.5 KiB of unused shared memory a
 *     block, took 0.327 ms at 128K against 0.271; version 22, three buffers, 0.319).
 *   dots: mma m16n8k16, rows the pieces of the eight heads (m-tile 0: hi rows 0-7, mid 8-15;
 *     m-tile 1: lo), columns 8 tokens, k the dims: warp w takes 64 dims (four k-steps), its B
 *     fragments by ldmatrix from the K rows (a thread holds dims 2 tig, 2 tig + 1 and 2 tig + 8,
 *     + 9 of a step, so Q's A fragments, in registers, follow that order). The warps' partial
 *     dots meet in shared memory and are summed in warp order: (hi + mid) + lo per warp, then
 *     warps 0..7.
 *   softmax: warp h owns head h, lane t (mod 16) token t (the CUDA-core body's rule).
 *   V update: rows the weights' pieces (hi rows 0-7, lo 8-15), columns dims (warp w: 64 dims in
 *     eight n-tiles, n-tile j is dims 64w + 8j .. + 7), k the 16 tokens: B fragments by
 *     ldmatrix.trans from the V rows. O stays in the accumulators: head grp, dims 64w + 8j +
 *     2 tig, + 1, the hi and lo rows added when the partial is written.
 * Two barriers per tile. Rows past the partition's end load as zeros (their scores are -inf,
 * their weights 0, and 0 times a zero row is 0). TS > 0: the token stride in elements is TS
 * (dense rows); 0: ts at run time. Base pointers and strides are multiples of 8 elements (16
 * bytes). Launched with GEM_MMA_STAGED_BYTES of dynamic shared memory, which needs the kernel's
 * attribute raised first (gem_cu_fused_allow_staged_shared). */
#define GEM_MMA_TILE 16

/* two BF16 as one register, a in the low half (the lower row or column index) */
__device__ __forceinline__ uint32_t gem_pack_bf16(__nv_bfloat16 a, __nv_bfloat16 b)
{
    return (uint32_t)__bfloat16_as_ushort(a) | ((uint32_t)__bfloat16_as_ushort(b) << 16);
}

/* D += A B, m16n8k16, BF16 in, F32 accumulate */
__device__ __forceinline__ void gem_mma_bf16(float *d, uint32_t a0, uint32_t a1, uint32_t a2,
                                             uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* 16 bytes, L1 no-allocate, L2 under `pol`; PF256: the L2 fetches the enclosing 256 bytes */
template <bool PF256 = false> __device__ __forceinline__ uint4 gem_ld16(const void *p, uint64_t pol)
{
    uint4 r;
    if constexpr (PF256)
        asm volatile(
            "ld.global.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
            : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
            : "l"(p), "l"(pol)
            : "memory");
    else
        asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
                     : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                     : "l"(p), "l"(pol)
                     : "memory");
    return r;
}

__device__ __forceinline__ uint32_t gem_word(const uint4 &v, int k)
{
    return k == 0 ? v.x : (k == 1 ? v.y : (k == 2 ? v.z : v.w));
}

#define GEM_MMA_ROW 520 /* elements of a staged row: 512 + 16 bytes of padding */
#define GEM_MMA_TILE_ELEMS (2 * GEM_MMA_TILE * GEM_MMA_ROW) /* K then V rows of one tile */
#define GEM_MMA_STAGED_BYTES (2 * GEM_MMA_TILE_ELEMS * 2)   /* two buffers: 66,560 bytes */

__device__ __forceinline__ uint32_t gem_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}
/* r: four 8x8 matrices of 16-bit elements, row addresses from lanes 8i .. 8i + 7 of matrix i */
__device__ __forceinline__ void gem_ldsm_x4(uint32_t *r, const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(gem_smem_addr(p))
                 : "memory");
}
/* the same, each matrix transposed */
__device__ __forceinline__ void gem_ldsm_x4_trans(uint32_t *r, const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(gem_smem_addr(p))
                 : "memory");
}

/* The 16-bit element types of the staged pass. BF16 has F32's exponent range, so Q and the
 * weights split into BF16 pieces as they are. F16 (11 significant bits, at most 65,504, normal
 * from 2^-14) takes them scaled by powers of two, which is exact: Q of head h by 2^e_h with
 * e_h = 14 - the exponent of max_d |q_hd| (so |q| x 2^e_h < 2^14 and every piece is in range;
 * a piece far below the head's largest element may fall into F16's subnormals, an error of at
 * most 2^-25 against 2^13), the score divided by 2^e_h again; the weights by 2^14 (p <= 1), the
 * partial's O by 2^-14 at the end. A product of two F16 values is exact in F32 too. */
struct gem_mma_bf16_elem {
    typedef __nv_bfloat16 elem;
    static constexpr bool f16 = false;
    static __device__ __forceinline__ elem piece(float x) { return __float2bfloat16_rn(x); }
    static __device__ __forceinline__ float value(elem x) { return __bfloat162float(x); }
    static __device__ __forceinline__ uint32_t pack(elem a, elem b) { return gem_pack_bf16(a, b); }
    /* element e (0: the low half) of a packed pair, exactly */
    static __device__ __forceinline__ float half_value(uint32_t x, int e)
    {
        return __uint_as_float(e ? x & 0xFFFF0000u : x << 16);
    }
    static __device__ __forceinline__ void mma(float *d, uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1)
    {
        gem_mma_bf16(d, a0, a1, a2, a3, b0, b1);
    }
};
struct gem_mma_f16_elem {
    typedef __half elem;
    static constexpr bool f16 = true;
    static __device__ __forceinline__ elem piece(float x) { return __float2half_rn(x); }
    static __device__ __forceinline__ float value(elem x) { return __half2float(x); }
    static __device__ __forceinline__ uint32_t pack(elem a, elem b)
    {
        return (uint32_t)__half_as_ushort(a) | ((uint32_t)__half_as_ushort(b) << 16);
    }
    static __device__ __forceinline__ float half_value(uint32_t x, int e)
    {
        return __half2float(__ushort_as_half((unsigned short)(e ? x >> 16 : x & 0xFFFFu)));
    }
    /* D += A B, m16n8k16, F16 in, F32 accumulate */
    static __device__ __forceinline__ void mma(float *d, uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1)
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
};
#define GEM_MMA_F16_P_SCALE 16384.f   /* F16 weights: p x 2^14 */
#define GEM_MMA_F16_O_SCALE 0x1p-14f  /* and the partial's O back */

/* The staged passes' online softmax of one tile (T = GEM_MMA_TILE tokens): warp w owns head w,
 * lane t % T token t. a: the head's dot of token t, the warps' partials sred[ww][w][t] added in
 * warp order; F16: taken with Q x 2^qe (qe of head w in lane 4w), exact back; tokens t >=
 * live_rows (past the partition's end) get weight 0. Updates the running max m and sum s, and
 * publishes the weights sp[w][t] and the rescale salpha[w] for gem_mma_tile_v_update. */
/* The F16 passes' scale of Q's pieces: mx is the largest |q| among a thread's elements of
 * query head grp; over the thread's quad (lanes 4 grp + tig) and the block's warps it becomes
 * the head's largest, and the result is 14 minus its binary exponent (0 for a head of zeros),
 * so that |q| 2^qe < 2^14 and the pieces keep F16's range. w: the thread's warp. Contains a
 * __syncthreads. */
__device__ __forceinline__ int gem_mma_f16_q_exponent(float mx, int w, int grp, int tig)
{
    __shared__ float sqmax[GEM_CU_THREADS / 32][GEM_CU_GROUP];
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    if (tig == 0)
        sqmax[w][grp] = mx;
    __syncthreads();
#pragma unroll
    for (int ww = 0; ww < GEM_CU_THREADS / 32; ww++)
        mx = fmaxf(mx, sqmax[ww][grp]);
    int ex = 0;
    (void)frexpf(mx, &ex);
    return mx > 0.f ? 14 - ex : 0;
}

template <class E>
__device__ __forceinline__ void gem_mma_tile_softmax(
    const float (*__restrict__ sred)[GEM_CU_GROUP][GEM_MMA_TILE], /* [8 warps][8 heads][T] */
    float (*__restrict__ sp)[GEM_MMA_TILE], float *__restrict__ salpha, int w, int lane, int qe,
    int live_rows, float scale, float &m, float &s)
{
    const int T = GEM_MMA_TILE;
    const int t = lane & (T - 1);
    float a = 0.f;
#pragma unroll
    for (int ww = 0; ww < GEM_CU_THREADS / 32; ww++)
        a += sred[ww][w][t];
    if constexpr (E::f16) /* head w's dots were taken with Q x 2^qe (exact back) */
        a = ldexpf(a, -__shfl_sync(0xffffffffu, qe, 4 * w));
    const float sc = t < live_rows ? a * scale : -INFINITY;
    float mx = sc;
#pragma unroll
    for (int off = T / 2; off > 0; off >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    const float mn = fmaxf(m, mx);
    const float e = expf(sc - mn);    /* rows past the end: exp(-inf) = 0 */
    const float alpha = expf(m - mn); /* m = -inf before the first tile: 0 */
    float ps = e;
#pragma unroll
    for (int off = T / 2; off > 0; off >>= 1)
        ps += __shfl_xor_sync(0xffffffffu, ps, off);
    s = s * alpha + ps;
    m = mn;
    if (lane < T)
        sp[w][lane] = e;
    if (lane == 0)
        salpha[w] = alpha;
}

/* The staged passes' V update of one tile: O (acc, head grp's n-tiles of dims 64w + 8j; rows
 * 0-7 the weights' hi pieces, 8-15 their lo pieces) rescaled by salpha[grp], plus the weights
 * sp[grp] (two 16-bit pieces; F16 x 2^14) times the tile's V rows, staged from vtile at
 * GEM_MMA_ROW elements a row. */
template <class E>
__device__ __forceinline__ void gem_mma_tile_v_update(float (&acc)[8][4],
                                                      const float (*__restrict__ sp)[GEM_MMA_TILE],
                                                      const float *__restrict__ salpha,
                                                      const typename E::elem *vtile, int w,
                                                      int lane)
{
    typedef typename E::elem elem;
    const int grp = lane >> 2, tig = lane & 3;
    const float al = salpha[grp];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        acc[j][0] *= al;
        acc[j][1] *= al;
        acc[j][2] *= al;
        acc[j][3] *= al;
    }
    const float2 p01 = *reinterpret_cast<const float2 *>(&sp[grp][2 * tig]);
    const float2 p89 = *reinterpret_cast<const float2 *>(&sp[grp][2 * tig + 8]);
    float pv[4] = {p01.x, p01.y, p89.x, p89.y};
    elem ph[4], pl[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
        if constexpr (E::f16)
            pv[u] *= GEM_MMA_F16_P_SCALE; /* exact: p <= 1 */
        ph[u] = E::piece(pv[u]);
        pl[u] = E::piece(pv[u] - E::value(ph[u]));
    }
    const uint32_t a0 = E::pack(ph[0], ph[1]), a1 = E::pack(pl[0], pl[1]),
                   a2 = E::pack(ph[2], ph[3]), a3 = E::pack(pl[2], pl[3]);
    /* ldmatrix rows: matrix lane >> 3 is tokens (lane & 7) + 8 ((lane >> 3) & 1) of dims
     * 64w + 8 (2jj + (lane >> 4)) */
    const elem *vb = vtile + ((lane & 7) + 8 * ((lane >> 3) & 1)) * GEM_MMA_ROW + 64 * w +
                     8 * (lane >> 4);
#pragma unroll
    for (int jj = 0; jj < 4; jj++) {
        uint32_t b[4]; /* n-tile 2jj: b[0], b[1]; 2jj + 1: b[2], b[3] */
        gem_ldsm_x4_trans(b, vb + 16 * jj);
        E::mma(acc[2 * jj], a0, a1, a2, a3, b[0], b[1]);
        E::mma(acc[2 * jj + 1], a0, a1, a2, a3, b[2], b[3]);
    }
}

/* The staged passes' partial (M, S, O) of head grp: n-tile j of acc is dims 64w + 8j + 2 tig,
 * + 1 (F16: the weights were taken x 2^14); lane 0 of warp w writes head w's M and S. */
template <class E>
__device__ __forceinline__ void gem_mma_write_partial(const float (&acc)[8][4], float m, float s,
                                                      float *__restrict__ part_m,
                                                      float *__restrict__ part_s,
                                                      float *__restrict__ part_o, int64_t p,
                                                      int64_t g, int64_t n_q_heads, int w,
                                                      int lane)
{
    const int grp = lane >> 2, tig = lane & 3;
    const int64_t row = p * n_q_heads + g * GEM_CU_GROUP + grp;
    float *po = part_o + row * GEM_CU_D + 64 * w + 2 * tig;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        float2 o = make_float2(acc[j][0] + acc[j][2], acc[j][1] + acc[j][3]);
        if constexpr (E::f16) {
            o.x *= GEM_MMA_F16_O_SCALE;
            o.y *= GEM_MMA_F16_O_SCALE;
        }
        *reinterpret_cast<float2 *>(po + 8 * j) = o;
    }
    if (lane == 0) {
        part_m[p * n_q_heads + g * GEM_CU_GROUP + w] = m;
        part_s[p * n_q_heads + g * GEM_CU_GROUP + w] = s;
    }
}

/* E: gem_mma_bf16_elem (the library's BF16 first passes) or gem_mma_f16_elem (measured in
 * dev/cuda/mma_decode.cu; the library's F16 first passes are the CUDA-core body). */
template <int TS, class E = gem_mma_bf16_elem>
__device__ __forceinline__ void gem_fused_first_pass_mma_staged_body(
    const float *__restrict__ q,          /* (n_q_heads, 512) */
    const typename E::elem *__restrict__ k, /* row (g, t) at element g*k_hs + t*k_ts */
    int64_t k_hs, int64_t k_ts,
    const typename E::elem *__restrict__ v, /* row (g, t) at element g*v_hs + t*v_ts */
    int64_t v_hs, int64_t v_ts,
    float *__restrict__ part_m, float *__restrict__ part_s, float *__restrict__ part_o,
    int64_t live, int64_t partitions, int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    extern __shared__ __align__(128) unsigned char gem_mma_tiles[]; /* GEM_MMA_STAGED_BYTES */
    typedef typename E::elem elem;
    elem *const ring = reinterpret_cast<elem *>(gem_mma_tiles);
    __shared__ __align__(16) float sred[GEM_CU_THREADS / 32][GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GEM_CU_GROUP];
    __shared__ uint2 sqb[GEM_CU_THREADS / 32][4][32]; /* Q's lo fragments, by warp, k-step, lane */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    const int64_t kts = TS > 0 ? (int64_t)TS : k_ts, vts = TS > 0 ? (int64_t)TS : v_ts;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    /* Q's A fragments: k-step st covers dims 64w + 16st .. + 15, a thread's columns 2 tig,
     * 2 tig + 1 (a0, a1) and 2 tig + 8, + 9 (a2, a3); qa m-tile 0 (hi, mid) in registers, m-tile
     * 1 (lo; rows 8-15 zero) in sqb, read back per tile: the registers it would hold are the
     * ones the loads in flight need (128 a thread at two blocks an SM, no spill) */
    uint32_t qa[4][4];
    int qe = 0; /* F16: Q of head grp scaled by 2^qe */
    {
        const float *qh = q + (g * GEM_CU_GROUP + grp) * GEM_CU_D + 64 * w + 2 * tig;
        if constexpr (E::f16) {
            float mx = 0.f;
#pragma unroll
            for (int st = 0; st < 4; st++)
#pragma unroll
                for (int u = 0; u < 4; u++)
                    mx = fmaxf(mx, fabsf(__ldg(qh + 16 * st + (u & 1) + 8 * (u >> 1))));
            qe = gem_mma_f16_q_exponent(mx, w, grp, tig);
        }
#pragma unroll
        for (int st = 0; st < 4; st++) {
            elem hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                float x = __ldg(qh + 16 * st + (u & 1) + 8 * (u >> 1));
                if constexpr (E::f16)
                    x = ldexpf(x, qe); /* exact: |x| < 2^14 */
                hi[u] = E::piece(x);
                const float r1 = x - E::value(hi[u]); /* exact */
                mid[u] = E::piece(r1);
                lo[u] = E::piece(r1 - E::value(mid[u])); /* r1 - mid exact */
            }
            qa[st][0] = E::pack(hi[0], hi[1]);
            qa[st][1] = E::pack(mid[0], mid[1]);
            qa[st][2] = E::pack(hi[2], hi[3]);
            qa[st][3] = E::pack(mid[2], mid[3]);
            sqb[w][st][lane] = make_uint2(E::pack(lo[0], lo[1]), E::pack(lo[2], lo[3]));
        }
    }
    /* this thread's pieces: rows prow + 4u of a tile, 16 bytes at element pcol */
    const int prow = tid >> 6, pcol = 8 * (tid & 63);
    const elem *kp = k + g * k_hs + (begin + prow) * kts + pcol;
    const elem *vp = v + g * v_hs + (begin + prow) * vts + pcol;
    const uint4 zero4 = make_uint4(0u, 0u, 0u, 0u);
    uint4 r[8]; /* K rows 0-3, V rows 4-7 of the tile in flight */
    /* loads tile `it` (its first row begin + it * T; rows at or past end as zeros) and steps the
     * row pointers to the next tile */
    auto load = [&](int64_t it) {
        const int64_t t = begin + it * T + prow;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const bool in = t + 4 * u < end;
            r[u] = in ? gem_ld16(kp + 4 * u * kts, pol) : zero4;
            r[4 + u] = in ? gem_ld16(vp + 4 * u * vts, pol) : zero4;
        }
        kp += T * kts;
        vp += T * vts;
    };
    auto store = [&](int64_t it) {
        elem *ks = ring + (size_t)(it & 1) * GEM_MMA_TILE_ELEMS, *vs = ks + T * GEM_MMA_ROW;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            *reinterpret_cast<uint4 *>(ks + (prow + 4 * u) * GEM_MMA_ROW + pcol) = r[u];
            *reinterpret_cast<uint4 *>(vs + (prow + 4 * u) * GEM_MMA_ROW + pcol) = r[4 + u];
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
    __syncthreads(); /* tile 0 is staged */
    /* ldmatrix rows: K, matrix lane >> 3 of n-tile i is dims 64w + 32h + 8 (lane >> 3) of token
     * 8i + (lane & 7) (V: gem_mma_tile_v_update) */
    const int krow = lane & 7, kcol = 64 * w + 8 * (lane >> 3);
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * T;
        const elem *ks = ring + (size_t)(it & 1) * GEM_MMA_TILE_ELEMS;
        const elem *vs = ks + T * GEM_MMA_ROW;
        /* the warp's 64 dims of the tile's dots */
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint32_t b[4]; /* k-step 2h: b[0], b[1]; 2h + 1: b[2], b[3] */
                gem_ldsm_x4(b, ks + (8 * i + krow) * GEM_MMA_ROW + kcol + 32 * h);
                const uint2 l0 = sqb[w][2 * h][lane], l1 = sqb[w][2 * h + 1][lane];
                E::mma(d0, qa[2 * h][0], qa[2 * h][1], qa[2 * h][2], qa[2 * h][3], b[0], b[1]);
                E::mma(d1, l0.x, 0u, l0.y, 0u, b[0], b[1]);
                E::mma(d0, qa[2 * h + 1][0], qa[2 * h + 1][1], qa[2 * h + 1][2],
                       qa[2 * h + 1][3], b[2], b[3]);
                E::mma(d1, l1.x, 0u, l1.y, 0u, b[2], b[3]);
            }
            float2 rr; /* head grp, tokens 8i + 2 tig, + 1: (hi + mid) + lo */
            rr.x = (d0[0] + d0[2]) + d1[0];
            rr.y = (d0[1] + d0[3]) + d1[1];
            *reinterpret_cast<float2 *>(&sred[w][grp][8 * i + 2 * tig]) = rr;
        }
        __syncthreads(); /* sred complete; every warp is past tile it - 1's V update */
        if (it + 1 < ntiles)
            store(it + 1); /* into the buffer tile it - 1 was read from */
        if (it + 2 < ntiles)
            load(it + 2);
        gem_mma_tile_softmax<E>(sred, sp, salpha, w, lane, qe, (int)min(end - t0, (int64_t)T),
                                scale, m, s);
        __syncthreads(); /* the weights of all eight heads and tile it + 1 are published */
        gem_mma_tile_v_update<E>(acc, sp, salpha, vs, w, lane);
        /* the next tile's first barrier orders these sp reads before sp is rewritten, and
         * its second barrier orders this tile's sred reads before sred is rewritten */
    }
    gem_mma_write_partial<E>(acc, m, s, part_m, part_s, part_o, p, g, n_q_heads, w, lane);
}

/* ---- FP8 E4M3 K and V: the codes kept FP8 in shared memory ---------------------------------
 * dev/cuda/fp8_decode.cu version 5 (results/h200/run182 on an H100: 0.1951 ms at 128K against
 * 0.2317 for version 3, the staged F16 pass with the codes widened as they were staged, which
 * the library ran before, and 0.3592 for the BF16 pass on twice the bytes). One 256-thread
 * block per (partition, KV head) as the staged passes; tiles of 32 tokens, their K and V rows
 * staged as FP8 codes (rows padded to GEM_FP8_ROW bytes) in two buffers, so a block holds two
 * 32-token tiles at two blocks an SM: one softmax step and two barriers per 32 rows.
 *   loads: thread i loads 16 codes at element 16 (i % 32) of rows i / 32 + 8u (u < 4) of K and
 *     of V, one tile ahead into registers, stored unchanged into the free buffer.
 *   dots: mma m16n8k16 in F16 (the F16 staged pass's pieces: Q in three pieces scaled per head
 *     by 2^qe, gem_mma_f16_q_exponent), warp w the dims 64w .. 64w + 63, n-tile i the tokens
 *     8i .. 8i + 7. Lane (grp, tig) reads the 16 codes of token grp at dims 64w + 16 tig (one
 *     16-byte load) and widens word st (cvt e4m3x2 -> f16x2, exact) into k-step st's B
 *     fragment: its low two codes as columns 2 tig, 2 tig + 1, its high two as 2 tig + 8, + 9.
 *     So k-step st covers dims 64w + 16t + 4st + {0..3} over the quad, and Q's A fragments are
 *     taken in that order. The warps' dots meet in shared memory, summed in warp order.
 *   softmax: warp h owns head h, lane t token t (the staged passes' rule over 32 lanes).
 *   V update: rows the weights' pieces (x 2^14; hi rows 0-7, lo 8-15), k the tokens, n the
 *     dims: lane (grp, tig) reads dims 64w + 32G + 4grp + {0..3} of tokens 4 tig + {0..3} (four
 *     4-byte loads), transposes the 4 x 4 bytes (PRMT), and widens dim 4grp + j's four tokens
 *     into n-tile 4G + j's B fragment (tokens 4 tig, + 1 as rows 2 tig, + 1; 4 tig + 2, + 3 as
 *     2 tig + 8, + 9); the weights' A fragments take the tokens in that order. n-tile 4G + j's
 *     column c is dim 64w + 32G + 4c + j.
 *   end: the partial (M, S, O), O times 2^-14 and then the head's V scale.
 * The score factor `scale` is the head's (float)(scale * k_scale[g]). Rows past the partition's
 * end load as zeros with weight 0. TS > 0: the token stride in codes is TS (dense rows); 0: k_ts
 * / v_ts at run time. Base pointers and strides are multiples of 16 codes. Launched with
 * GEM_FP8_STAGED_BYTES of dynamic shared memory (gem_cu_fused_allow_staged_shared). */
#define GEM_FP8_TILE 32
#define GEM_FP8_ROW 528 /* bytes of a staged row: 512 codes + 16 */
#define GEM_FP8_TILE_BYTES (2 * GEM_FP8_TILE * GEM_FP8_ROW) /* K then V rows of a tile */
#define GEM_FP8_STAGED_BYTES (2 * GEM_FP8_TILE_BYTES)      /* two buffers: 67,584 bytes */

/* two E4M3 codes (the low 16 bits of x, the first in the low byte) -> F16x2, exactly */
__device__ __forceinline__ uint32_t gem_fp8x2_to_f16x2(uint32_t x)
{
    const __half2_raw h =
        __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(x & 0xFFFFu), __NV_E4M3);
    return (uint32_t)h.x | ((uint32_t)h.y << 16);
}

template <int TS>
__device__ __forceinline__ void gem_fused_first_pass_fp8_body(
    const float *__restrict__ q,   /* (n_q_heads, 512) */
    const uint8_t *__restrict__ k, /* row (g, t) at code g*k_hs + t*k_ts */
    int64_t k_hs, int64_t k_ts,
    const uint8_t *__restrict__ v, /* row (g, t) at code g*v_hs + t*v_ts */
    int64_t v_hs, int64_t v_ts,
    float *__restrict__ part_m, float *__restrict__ part_s, float *__restrict__ part_o,
    int64_t live, int64_t partitions, int64_t n_q_heads, float scale, float v_scale)
{
    typedef gem_mma_f16_elem E;
    typedef E::elem elem;
    const int T = GEM_FP8_TILE;
    extern __shared__ __align__(128) unsigned char gem_fp8_tiles[]; /* GEM_FP8_STAGED_BYTES */
    __shared__ __align__(16) float sred[GEM_CU_THREADS / 32][GEM_CU_GROUP][GEM_FP8_TILE];
    __shared__ __align__(16) float sp[GEM_CU_GROUP][GEM_FP8_TILE];
    __shared__ float salpha[GEM_CU_GROUP];
    __shared__ uint2 sqb[GEM_CU_THREADS / 32][4][32]; /* Q's lo fragments, by warp, k-step, lane */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    const int64_t kts = TS > 0 ? (int64_t)TS : k_ts, vts = TS > 0 ? (int64_t)TS : v_ts;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    /* Q of head grp, dims 64w + 16 tig + 4st + u: k-step st's columns 2 tig + (u & 1) +
     * 8 (u >> 1); m-tile 0 (hi, mid) in registers, m-tile 1 (lo) in sqb */
    uint32_t qa[4][4];
    int qe = 0; /* Q of head grp scaled by 2^qe */
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
                const float x = ldexpf(__ldg(qh + 4 * st + u), qe); /* exact: |x| < 2^14 */
                hi[u] = E::piece(x);
                const float r1 = x - E::value(hi[u]); /* exact */
                mid[u] = E::piece(r1);
                lo[u] = E::piece(r1 - E::value(mid[u])); /* r1 - mid exact */
            }
            qa[st][0] = E::pack(hi[0], hi[1]);
            qa[st][1] = E::pack(mid[0], mid[1]);
            qa[st][2] = E::pack(hi[2], hi[3]);
            qa[st][3] = E::pack(mid[2], mid[3]);
            sqb[w][st][lane] = make_uint2(E::pack(lo[0], lo[1]), E::pack(lo[2], lo[3]));
        }
    }
    /* this thread's pieces: 16 codes at pcol of rows prow + 8u (u < 4) of a tile */
    const int prow = tid >> 5, pcol = 16 * (tid & 31);
    const uint8_t *kp = k + g * k_hs + (begin + prow) * kts + pcol;
    const uint8_t *vp = v + g * v_hs + (begin + prow) * vts + pcol;
    const uint4 zero4 = make_uint4(0u, 0u, 0u, 0u);
    uint4 r[8]; /* K's pieces, then V's, of the tile in flight */
    /* loads tile `it` (rows at or past end as zeros) and steps the row pointers to the next */
    auto load = [&](int64_t it) {
        const int64_t t = begin + it * T + prow;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const bool in = t + 8 * u < end;
            r[u] = in ? gem_ld16(kp + 8 * u * kts, pol) : zero4;
            r[4 + u] = in ? gem_ld16(vp + 8 * u * vts, pol) : zero4;
        }
        kp += T * kts;
        vp += T * vts;
    };
    auto store = [&](int64_t it) {
        unsigned char *ks = gem_fp8_tiles + (size_t)(it & 1) * GEM_FP8_TILE_BYTES;
        unsigned char *vs = ks + T * GEM_FP8_ROW;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            *reinterpret_cast<uint4 *>(ks + (prow + 8 * u) * GEM_FP8_ROW + pcol) = r[u];
            *reinterpret_cast<uint4 *>(vs + (prow + 8 * u) * GEM_FP8_ROW + pcol) = r[4 + u];
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
    __syncthreads(); /* tile 0 is staged */
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * T;
        const unsigned char *ks = gem_fp8_tiles + (size_t)(it & 1) * GEM_FP8_TILE_BYTES;
        const unsigned char *vs = ks + T * GEM_FP8_ROW;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 c = *reinterpret_cast<const uint4 *>(ks + (8 * i + grp) * GEM_FP8_ROW +
                                                             64 * w + 16 * tig);
            float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int st = 0; st < 4; st++) {
                const uint32_t wd = gem_word(c, st);
                const uint32_t b0 = gem_fp8x2_to_f16x2(wd), b1 = gem_fp8x2_to_f16x2(wd >> 16);
                const uint2 l = sqb[w][st][lane];
                E::mma(d0, qa[st][0], qa[st][1], qa[st][2], qa[st][3], b0, b1);
                E::mma(d1, l.x, 0u, l.y, 0u, b0, b1);
            }
            float2 rr; /* head grp, tokens 8i + 2 tig, + 1: (hi + mid) + lo */
            rr.x = (d0[0] + d0[2]) + d1[0];
            rr.y = (d0[1] + d0[3]) + d1[1];
            *reinterpret_cast<float2 *>(&sred[w][grp][8 * i + 2 * tig]) = rr;
        }
        __syncthreads(); /* sred complete; every warp is past tile it - 1's V update */
        if (it + 1 < ntiles)
            store(it + 1); /* into the buffer tile it - 1 was read from */
        if (it + 2 < ntiles)
            load(it + 2);
        {
            float a = 0.f;
#pragma unroll
            for (int ww = 0; ww < GEM_CU_THREADS / 32; ww++)
                a += sred[ww][w][lane];
            a = ldexpf(a, -__shfl_sync(0xffffffffu, qe, 4 * w)); /* Q x 2^qe, exactly back */
            const int live_rows = (int)min(end - t0, (int64_t)T);
            const float sc = lane < live_rows ? a * scale : -INFINITY;
            float mx = sc;
#pragma unroll
            for (int off = T / 2; off > 0; off >>= 1)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float mn = fmaxf(m, mx);
            const float e = expf(sc - mn);    /* rows past the end: exp(-inf) = 0 */
            const float alpha = expf(m - mn); /* m = -inf before the first tile: 0 */
            float ps = e;
#pragma unroll
            for (int off = T / 2; off > 0; off >>= 1)
                ps += __shfl_xor_sync(0xffffffffu, ps, off);
            s = s * alpha + ps;
            m = mn;
            sp[w][lane] = e;
            if (lane == 0)
                salpha[w] = alpha;
        }
        __syncthreads(); /* the weights of all eight heads and tile it + 1 are published */
        const float al = salpha[grp];
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int x = 0; x < 4; x++)
                acc[j][x] *= al;
#pragma unroll
        for (int kst = 0; kst < 2; kst++) {
            const float4 pw = *reinterpret_cast<const float4 *>(&sp[grp][16 * kst + 4 * tig]);
            const float pv[4] = {pw.x * GEM_MMA_F16_P_SCALE, pw.y * GEM_MMA_F16_P_SCALE,
                                 pw.z * GEM_MMA_F16_P_SCALE, pw.w * GEM_MMA_F16_P_SCALE};
            elem ph[4], pl[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                ph[u] = E::piece(pv[u]);
                pl[u] = E::piece(pv[u] - E::value(ph[u]));
            }
            const uint32_t a0 = E::pack(ph[0], ph[1]), a1 = E::pack(pl[0], pl[1]),
                           a2 = E::pack(ph[2], ph[3]), a3 = E::pack(pl[2], pl[3]);
            const unsigned char *vr =
                vs + (16 * kst + 4 * tig) * GEM_FP8_ROW + 64 * w + 4 * grp;
#pragma unroll
            for (int G = 0; G < 2; G++) {
                uint32_t x[4]; /* dims 4grp .. + 3 of tokens 4 tig + i */
#pragma unroll
                for (int i = 0; i < 4; i++)
                    x[i] = *reinterpret_cast<const uint32_t *>(vr + i * GEM_FP8_ROW + 32 * G);
                const uint32_t t01l = __byte_perm(x[0], x[1], 0x5140),
                               t01h = __byte_perm(x[0], x[1], 0x7362),
                               t23l = __byte_perm(x[2], x[3], 0x5140),
                               t23h = __byte_perm(x[2], x[3], 0x7362);
                /* y[j]: dim 4grp + j of tokens 4 tig .. + 3, one a byte */
                const uint32_t y[4] = {__byte_perm(t01l, t23l, 0x5410),
                                       __byte_perm(t01l, t23l, 0x7632),
                                       __byte_perm(t01h, t23h, 0x5410),
                                       __byte_perm(t01h, t23h, 0x7632)};
#pragma unroll
                for (int j = 0; j < 4; j++)
                    E::mma(acc[4 * G + j], a0, a1, a2, a3, gem_fp8x2_to_f16x2(y[j]),
                           gem_fp8x2_to_f16x2(y[j] >> 16));
            }
        }
        /* the next tile's first barrier orders these sp reads before sp is rewritten, and
         * its second barrier orders this tile's sred reads before sred is rewritten */
    }
    /* this thread's columns 2 tig, 2 tig + 1 of n-tile 4G + j: dims 64w + 32G + 8 tig + j and
     * + 4 + j */
    const int64_t row = p * n_q_heads + g * GEM_CU_GROUP + grp;
    float *po = part_o + row * GEM_CU_D + 64 * w + 8 * tig;
#pragma unroll
    for (int G = 0; G < 2; G++) {
        float o[8];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            o[j] = (acc[4 * G + j][0] + acc[4 * G + j][2]) * GEM_MMA_F16_O_SCALE * v_scale;
            o[4 + j] = (acc[4 * G + j][1] + acc[4 * G + j][3]) * GEM_MMA_F16_O_SCALE * v_scale;
        }
        *reinterpret_cast<float4 *>(po + 32 * G) = make_float4(o[0], o[1], o[2], o[3]);
        *reinterpret_cast<float4 *>(po + 32 * G + 4) = make_float4(o[4], o[5], o[6], o[7]);
    }
    if (lane == 0) {
        part_m[p * n_q_heads + g * GEM_CU_GROUP + w] = m;
        part_s[p * n_q_heads + g * GEM_CU_GROUP + w] = s;
    }
}

/* ---- K rebuilt from a BF16 or F16 V cache on tensor cores -------------------------------- */

/* D += A B, m8n8k4, F64 in and out: a = A[grp][tig], b = B[tig][grp], d = D[grp][2 tig],
 * D[grp][2 tig + 1] (grp = lane / 4, tig = lane % 4) */
__device__ __forceinline__ void gem_dmma(double *d, double a, double b)
{
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
                 : "+d"(d[0]), "+d"(d[1])
                 : "d"(a), "d"(b));
}

/* the first dim of the K-from-V pass's non-rotating k-step s (0 .. 23): 16 dims each, [64, 256)
 * then [320, 512) */
__device__ __forceinline__ int gem_kfv_step_dim(int s) { return s < 12 ? 64 + 16 * s : 320 + 16 * (s - 12); }

#define GEM_KFV_ROW GEM_MMA_ROW /* elements of a staged row (gem_mma_tile_v_update reads it) */
#define GEM_KFV_TILE_ELEMS (GEM_MMA_TILE * GEM_KFV_ROW) /* one staged tile of V rows */
#define GEM_KFV_STAGED_BYTES (2 * GEM_KFV_TILE_ELEMS * 2) /* two buffers: 33,280 bytes */

/* The K-from-V first pass for BF16 and F16 V caches (E: gem_mma_bf16_elem, gem_mma_f16_elem):
 * the staged tensor-core pass above with V alone staged (dev/cuda/kfv_mma.cu version 4,
 * results/h200/run94: BF16 0.2432 ms at 128K against 0.5647 for the CUDA-core pass it
 * replaces). K(t) = RoPE_{pos0 + t}(k_weight * V(t)), pairs (j, j + 256), j < 64 rotating:
 *   - the 384 dims that do not rotate: K = k_weight * V, so k_weight is folded into Q (fl(q w)
 *     in three 16-bit pieces, F16 scaled per head as in the staged pass) and the B fragments
 *     are the staged V rows; warp w takes k-steps 3w .. 3w + 2 (gem_kfv_step_dim);
 *   - the 128 rotating dims: q . RoPE_{P + u}(w V) = RoPE_{-P}(q) . RoPE_u(w V), P the tile's
 *     first position, u = 0 .. 15 its offset. RoPE_{-P}(q) of warp w's pairs 8w .. 8w + 7 is
 *     taken in double once a tile, from exact angles (gem_rope_cs, computed four tiles at a
 *     time, a lane each); RoPE_u(w V) in F32 from a per-block table of w cos and w sin of the 16
 *     offsets. Both meet on the F64 tensor cores (gem_dmma: 8 heads x 4 dims times 4 dims x 8
 *     tokens, products exact, sums in F64), whose D is laid out as rows 0-7 of the 16-bit mma's.
 *     A thread's ldmatrix of warp w's block (dims 8w .. 8w + 7 and their partners 256 + 8w ..)
 *     gives it two whole pairs of one token in each n-tile: no shuffles, every lane alike.
 * The softmax and the V update are the staged pass's. Launched with GEM_KFV_STAGED_BYTES of
 * dynamic shared memory (gem_cu_fused_allow_staged_shared raises the kernel's limit). */
template <class E>
__device__ __forceinline__ void gem_fused_first_pass_kfv_mma_body(
    const float *__restrict__ q,             /* (n_q_heads, 512) */
    const float *__restrict__ kw,            /* (512) k_weight */
    const gem_cu_rope *__restrict__ rope,    /* in the kernel's parameters */
    const typename E::elem *__restrict__ v,  /* row (g, t) at element g*v_hs + t*v_ts */
    int64_t v_hs, int64_t v_ts,
    float *__restrict__ part_m, float *__restrict__ part_s, float *__restrict__ part_o,
    int64_t live, int64_t partitions, int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    typedef typename E::elem elem;
    extern __shared__ __align__(128) unsigned char gem_kfv_tiles[]; /* GEM_KFV_STAGED_BYTES */
    elem *const ring = reinterpret_cast<elem *>(gem_kfv_tiles);
    __shared__ __align__(16) float sred[GEM_CU_THREADS / 32][GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GEM_CU_GROUP];
    /* lane's w cos, w sin of offset 8i + grp, pairs 8w + 2 tig + e: by warp, n-tile i, e, lane */
    __shared__ __align__(16) float4 scoef[GEM_CU_THREADS / 32][2][2][32];
    __shared__ uint2 sqb[GEM_CU_THREADS / 32][3][32]; /* Q's lo fragments, by warp, k-step, lane */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    /* Q: the non-rotating k-steps times k_weight in three pieces (hi, mid in registers, lo in
     * sqb); F16: head grp's taken x 2^qe; the rotating pairs 8w + 2 tig + e of head grp in double */
    uint32_t qa[3][4];
    double ql[2], qh[2];
    int qe = 0;
    {
        const float *qg = q + (g * GEM_CU_GROUP + grp) * GEM_CU_D;
        float x[3][4];
#pragma unroll
        for (int st = 0; st < 3; st++)
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int d = gem_kfv_step_dim(3 * w + st) + 2 * tig + (u & 1) + 8 * (u >> 1);
                x[st][u] = __ldg(qg + d) * __ldg(kw + d);
            }
        if constexpr (E::f16) {
            float mx = 0.f;
#pragma unroll
            for (int st = 0; st < 3; st++)
#pragma unroll
                for (int u = 0; u < 4; u++)
                    mx = fmaxf(mx, fabsf(x[st][u]));
            qe = gem_mma_f16_q_exponent(mx, w, grp, tig);
        }
#pragma unroll
        for (int st = 0; st < 3; st++) {
            elem hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                float y = x[st][u];
                if constexpr (E::f16)
                    y = ldexpf(y, qe); /* exact: |y| < 2^14 */
                hi[u] = E::piece(y);
                const float r1 = y - E::value(hi[u]); /* exact */
                mid[u] = E::piece(r1);
                lo[u] = E::piece(r1 - E::value(mid[u]));
            }
            qa[st][0] = E::pack(hi[0], hi[1]);
            qa[st][1] = E::pack(mid[0], mid[1]);
            qa[st][2] = E::pack(hi[2], hi[3]);
            qa[st][3] = E::pack(mid[2], mid[3]);
            sqb[w][st][lane] = make_uint2(E::pack(lo[0], lo[1]), E::pack(lo[2], lo[3]));
        }
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int j = 8 * w + 2 * tig + e;
            ql[e] = (double)__ldg(qg + j);
            qh[e] = (double)__ldg(qg + GEM_CU_ROPE_HALF + j);
            const float wl = __ldg(kw + j), wh = __ldg(kw + GEM_CU_ROPE_HALF + j);
#pragma unroll
            for (int i = 0; i < 2; i++) {
                float c, s;
                gem_rope_cs(8 * i + grp, rope->inv_freq[j], &c, &s);
                scoef[w][i][e][lane] = make_float4(wl * c, wh * s, wl * s, wh * c);
            }
        }
    }
    /* this thread's pieces: rows prow + 4u of a tile, 16 bytes at element pcol */
    const int prow = tid >> 6, pcol = 8 * (tid & 63);
    const elem *vp = v + g * v_hs + (begin + prow) * v_ts + pcol;
    const uint4 zero4 = make_uint4(0u, 0u, 0u, 0u);
    uint4 r[4]; /* V rows of the tile in flight */
    auto load = [&](int64_t it) {
        const int64_t t = begin + it * T + prow;
#pragma unroll
        for (int u = 0; u < 4; u++)
            r[u] = t + 4 * u < end ? gem_ld16(vp + 4 * u * v_ts, pol) : zero4;
        vp += T * v_ts;
    };
    auto store = [&](int64_t it) {
        elem *vs = ring + (size_t)(it & 1) * GEM_KFV_TILE_ELEMS;
#pragma unroll
        for (int u = 0; u < 4; u++)
            *reinterpret_cast<uint4 *>(vs + (prow + 4 * u) * GEM_KFV_ROW + pcol) = r[u];
    };
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;
    float cc = 1.f, ss = 0.f; /* cos, sin of tile (it & ~3) + lane / 8, pair 8w + lane % 8 */
    if (ntiles > 0) {
        load(0);
        store(0);
    }
    if (ntiles > 1)
        load(1);
    __syncthreads(); /* tile 0, scoef and sqb are written */
    /* ldmatrix rows (lane l: matrix l >> 3, row l & 7): matrix mi is tokens 8 (mi >> 1) + row,
     * dims 8w (+ 256 for odd mi) in the rotating block, base (+ 8) in a k-step (the V update's:
     * gem_mma_tile_v_update) */
    const int mrow = (lane & 7) + 8 * (lane >> 4), mhalf = (lane >> 3) & 1;
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * T;
        const elem *vs = ring + (size_t)(it & 1) * GEM_KFV_TILE_ELEMS;
        if ((it & 3) == 0)
            gem_rope_cs(rope->pos0 + t0 + (int64_t)(lane >> 3) * T,
                        rope->inv_freq[8 * w + (lane & 7)], &cc, &ss);
        /* RoPE_{-P}(q) of pairs 8w + 2 tig + e at the tile's first position P */
        double al[2], ah[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int src = 8 * (int)(it & 3) + 2 * tig + e;
            const double c = (double)__shfl_sync(0xffffffffu, cc, src);
            const double sn = (double)__shfl_sync(0xffffffffu, ss, src);
            al[e] = fma(ql[e], c, qh[e] * sn);
            ah[e] = fma(qh[e], c, -(ql[e] * sn));
        }
        uint32_t rb[4]; /* n-tile i: the low dims rb[2i], their partners rb[2i + 1] */
        gem_ldsm_x4(rb, vs + mrow * GEM_KFV_ROW + 8 * w + GEM_CU_ROPE_HALF * mhalf);
        uint32_t nb[3][4];
#pragma unroll
        for (int st = 0; st < 3; st++)
            gem_ldsm_x4(nb[st], vs + mrow * GEM_KFV_ROW + gem_kfv_step_dim(3 * w + st) + 8 * mhalf);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int st = 0; st < 3; st++) {
                const uint2 l = sqb[w][st][lane];
                E::mma(d0, qa[st][0], qa[st][1], qa[st][2], qa[st][3], nb[st][2 * i],
                       nb[st][2 * i + 1]);
                E::mma(d1, l.x, 0u, l.y, 0u, nb[st][2 * i], nb[st][2 * i + 1]);
            }
            double c[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float vl = E::half_value(rb[2 * i], e), vh = E::half_value(rb[2 * i + 1], e);
                const float4 cf = scoef[w][i][e][lane];
                const float kl = fmaf(cf.x, vl, -(cf.y * vh)), kh = fmaf(cf.z, vl, cf.w * vh);
                gem_dmma(c[e], al[e], (double)kl);
                gem_dmma(c[e], ah[e], (double)kh);
            }
            float2 rr; /* head grp, tokens 8i + 2 tig, + 1: (hi + mid) + lo, then the rotating dims */
            rr.x = (d0[0] + d0[2]) + d1[0];
            rr.y = (d0[1] + d0[3]) + d1[1];
            if constexpr (E::f16) { /* taken with Q x 2^qe: exact back */
                rr.x = ldexpf(rr.x, -qe);
                rr.y = ldexpf(rr.y, -qe);
            }
            rr.x += (float)(c[0][0] + c[1][0]);
            rr.y += (float)(c[0][1] + c[1][1]);
            *reinterpret_cast<float2 *>(&sred[w][grp][8 * i + 2 * tig]) = rr;
        }
        __syncthreads(); /* sred complete; every warp is past tile it - 1's V update */
        if (it + 1 < ntiles)
            store(it + 1); /* into the buffer tile it - 1 was read from */
        if (it + 2 < ntiles)
            load(it + 2);
        /* qe 0: the dots were brought back from F16's Q x 2^qe per warp, before the rotating
         * dims were added */
        gem_mma_tile_softmax<E>(sred, sp, salpha, w, lane, 0, (int)min(end - t0, (int64_t)T),
                                scale, m, s);
        __syncthreads(); /* the weights of all eight heads and tile it + 1 are published */
        gem_mma_tile_v_update<E>(acc, sp, salpha, vs, w, lane);
        /* the next tile's first barrier orders these sp reads before sp is rewritten, and
         * its second barrier orders this tile's sred reads before sred is rewritten */
    }
    gem_mma_write_partial<E>(acc, m, s, part_m, part_s, part_o, p, g, n_q_heads, w, lane);
}

/* ---- K rebuilt from a BF16 V cache by warps that own whole tiles ------------------------------
 * The K-from-V first pass for BF16 V caches at long lengths (gem_cu_fused_launch: live >=
 * GEM_KFV_WARP_MIN_LIVE; below it gem_fused_first_pass_kfv_mma_body is faster). Lineage:
 * dev/cuda/kfv_mma.cu versions 20-23 (results/h200/runs 114-117): version 23, 0.1827 ms at 128K
 * and 0.1085 at 64K against 0.2417 and 0.1277 for the staged pass (version 4), even at 32K,
 * slower below; here one partition a block of four warps, two blocks an SM, where version 23 ran
 * one block of eight warps an SM.
 *
 * The staged pass shares each 16-token tile among its eight warps (the dims split over them), so
 * every tile pays for their partial scores meeting in shared memory, two barriers, a softmax in
 * every warp and an O rescale of every warp's dims (about 3,600 warp instructions a tile). Here
 * each warp owns whole tiles and waits for no other warp inside its loop (about 1,450):
 *   - warp w of the block takes the partition's tiles w, w + 4, ...: it copies each into its own
 *     stage in shared memory by cp.async (rows of GEM_MMA_ROW elements) at the top of the
 *     iteration (one stage a warp is what lets two blocks of four warps share an SM: version
 *     22's eight warps of one stage beat version 21's six of two, 0.197 against 0.213 ms), with
 *     nothing asked of the L2 ahead: version 36, version 23 without its prefetch.global.L2 of
 *     the next tile's rows while it computed the tile before, took 0.1739 ms at 128K and 0.1024
 *     at 64K against 0.1834 / 0.1081 (run 139);
 *   - scores with the tokens as the MMA's rows: S^T (16 tokens x 8 heads) = K Q^T. The 384 dims
 *     that do not rotate: K = k_weight * V, k_weight folded into Q (fl(q w) in three BF16 pieces,
 *     stored for those dims alone, GEM_KFV_WARP_QROW elements a row), A fragments by ldmatrix
 *     from the staged rows, 24 k-steps x 3 pieces = 72 mma. The 128 rotating dims: q .
 *     RoPE_{P + u}(w V) = RoPE_{-P}(q) . RoPE_u(w V) as in the staged pass, P the tile's first
 *     position and u its offset: the warp takes the 64 angles P f_j (two a lane, gem_rope_cs)
 *     into its own 512 bytes, a lane forms RoPE_{-P}(q) of head grp for its 16 pairs in double
 *     and RoPE_u(w V) of tokens grp and grp + 8 in F32 from its ldmatrix fragments of the
 *     rotating blocks and the block's table of w cos and w sin of the 16 offsets (built at the
 *     start by the staged pass's rule), and the two meet on the F64 tensor cores (gem_dmma:
 *     tokens x 4 dims times 4 dims x heads, 64 a tile), whose D has the scores' layout;
 *   - the online softmax in the accumulators' layout: a lane holds tokens grp and grp + 8 of
 *     heads 2 tig and 2 tig + 1; maxima and sums over the 16 tokens by three xor shuffles;
 *   - the V update with the dims as rows: O^T (512 x 8) += V^T (512 x 16) P^T, A fragments by
 *     ldmatrix.trans from the same staged rows, B the weights' two BF16 pieces (they pass
 *     through the warp's 512 bytes to the B layout): 32 m-tiles x 2 = 64 mma. O^T stays in 128
 *     registers a lane, whose heads are the softmax's, so the rescale needs no exchange; it is
 *     skipped when both alphas of every lane of the warp are 1 (x * 1 = x: the same bits);
 *   - at the end the four warps merge (M, S, O) in warp order through shared memory and write
 *     the block's partial in the reducer's layout.
 * Exactness as the staged pass: products of BF16 values exact in F32, Q in three pieces, the
 * weights in two, the rotating dims' products exact in F64. Bitwise repeats: every sum in a
 * fixed order. Launched with GEM_KFV_WARP_BYTES of dynamic shared memory and
 * GEM_KFV_WARP_THREADS threads; base pointer and strides multiples of 8 elements. */
#define GEM_KFV_WARP_WARPS 4
#define GEM_KFV_WARP_THREADS (32 * GEM_KFV_WARP_WARPS)
#define GEM_KFV_WARP_QROW 392 /* 384 + 8: 784-byte rows, ldmatrix rows on distinct banks */
#define GEM_KFV_WARP_Q_BYTES (3 * GEM_CU_GROUP * GEM_KFV_WARP_QROW * 2)             /* 18,816 */
#define GEM_KFV_WARP_TILE_ELEMS (GEM_MMA_TILE * GEM_MMA_ROW)                         /* a stage */
#define GEM_KFV_WARP_TILES_BYTES (GEM_KFV_WARP_WARPS * GEM_KFV_WARP_TILE_ELEMS * 2)  /* 66,560 */
#define GEM_KFV_WARP_P_BYTES (GEM_KFV_WARP_WARPS * GEM_MMA_TILE * GEM_CU_GROUP * 4)  /* 2,048 */
#define GEM_KFV_WARP_QR_BYTES (GEM_CU_GROUP * GEM_CU_ROPE_PAIRS * 8)                 /* 4,096 */
#define GEM_KFV_WARP_CS_BYTES (GEM_KFV_WARP_WARPS * GEM_CU_ROPE_PAIRS * 8)           /* 2,048 */
#define GEM_KFV_WARP_COEF_BYTES (GEM_MMA_TILE * GEM_CU_ROPE_PAIRS * 16)              /* 16,384 */
#define GEM_KFV_WARP_BYTES                                                                      \
    (GEM_KFV_WARP_Q_BYTES + GEM_KFV_WARP_TILES_BYTES + GEM_KFV_WARP_P_BYTES +                   \
     GEM_KFV_WARP_QR_BYTES + GEM_KFV_WARP_CS_BYTES + GEM_KFV_WARP_COEF_BYTES) /* 109,952 */
static_assert(GEM_KFV_WARP_WARPS * GEM_CU_GROUP * GEM_CU_D * 4 +
                      2 * GEM_KFV_WARP_WARPS * GEM_CU_GROUP * 4 <=
                  GEM_KFV_WARP_TILES_BYTES,
              "the warps' states meet in their stages");

/* 16 bytes global -> shared, L2 only; bytes 0 fills them with zeros */
__device__ __forceinline__ void gem_cp16_zfill(void *dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(gem_smem_addr(dst)),
                 "l"(src), "r"(bytes)
                 : "memory");
}

/* A lane's part of the copy of the 16-token tile at row t0 of the partition [begin, end) into
 * st (its stage + 8 lane): 16 bytes of each half of each row, so a warp's instruction reads 512
 * contiguous bytes; rows at or past end as zeros. vg: the KV head's rows, token stride ts. */
__device__ __forceinline__ void gem_kfv_warp_copy(__nv_bfloat16 *st, const __nv_bfloat16 *vg,
                                                  int64_t t0, int64_t begin, int64_t end,
                                                  int64_t ts, int lane)
{
    const __nv_bfloat16 *src = vg + t0 * ts + 8 * lane;
    if (t0 + GEM_MMA_TILE <= end) {
#pragma unroll
        for (int r = 0; r < GEM_MMA_TILE; r++, src += ts) {
            gem_cp16_zfill(st + r * GEM_MMA_ROW, src, 16);
            gem_cp16_zfill(st + r * GEM_MMA_ROW + 256, src + 256, 16);
        }
    } else { /* the partition's last tile */
        for (int r = 0; r < GEM_MMA_TILE; r++, src += ts) {
            const bool in = t0 + r < end;
            const __nv_bfloat16 *s0 = in ? src : vg + begin * ts + 8 * lane;
            gem_cp16_zfill(st + r * GEM_MMA_ROW, s0, in ? 16 : 0);
            gem_cp16_zfill(st + r * GEM_MMA_ROW + 256, s0 + 256, in ? 16 : 0);
        }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* The online softmax of one 16-token tile in a warp, shared by the long K-from-V passes: sv the
 * scaled scores of tokens grp (0, 1) and grp + 8 (2, 3) of heads 2 tig (0, 2) and 2 tig + 1
 * (1, 3), rows at or past end masked; (m0, s0), (m1, s1) the running maximum and sum of those
 * heads, updated; al0, al1 the factors of O's heads; the weights stored into sp [16 tokens][8
 * heads] for the V update's B layout (followed by __syncwarp). */
__device__ __forceinline__ void gem_kfv_tile_softmax(float (&sv)[4], int64_t t0, int64_t end,
                                                     float &m0, float &m1, float &s0, float &s1,
                                                     float &al0, float &al1, float *sp, int grp,
                                                     int tig)
{
    if (t0 + grp >= end)
        sv[0] = sv[1] = -INFINITY;
    if (t0 + grp + 8 >= end)
        sv[2] = sv[3] = -INFINITY;
    float mx0 = fmaxf(sv[0], sv[2]), mx1 = fmaxf(sv[1], sv[3]);
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1); /* a tile has a row below end */
    al0 = expf(m0 - mn0);                                   /* m = -inf at first: 0 */
    al1 = expf(m1 - mn1);
    const float e0 = expf(sv[0] - mn0), e1 = expf(sv[1] - mn1), e2 = expf(sv[2] - mn0),
                e3 = expf(sv[3] - mn1);
    float ps0 = e0 + e2, ps1 = e1 + e3;
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) {
        ps0 += __shfl_xor_sync(0xffffffffu, ps0, off);
        ps1 += __shfl_xor_sync(0xffffffffu, ps1, off);
    }
    s0 = s0 * al0 + ps0;
    s1 = s1 * al1 + ps1;
    m0 = mn0;
    m1 = mn1;
    *reinterpret_cast<float2 *>(sp + grp * GEM_CU_GROUP + 2 * tig) = make_float2(e0, e1);
    *reinterpret_cast<float2 *>(sp + (grp + 8) * GEM_CU_GROUP + 2 * tig) = make_float2(e2, e3);
    __syncwarp();
}

/* The online softmax and the V update of one tile: sv the scaled scores of tokens grp (0, 1)
 * and grp + 8 (2, 3) of heads 2 tig (0, 2) and 2 tig + 1 (1, 3); (m0, s0), (m1, s1) the running
 * maximum and sum of those heads; o the lane's O^T accumulators (m-tile mt: dims 16 mt + grp,
 * + 8); sp the warp's 512 bytes that take the weights to the B layout; st the staged tile,
 * vrow the lane's ldmatrix.trans row. */
__device__ __forceinline__ void gem_kfv_warp_update(float (&sv)[4], int64_t t0, int64_t end,
                                                    float &m0, float &m1, float &s0, float &s1,
                                                    float (&o)[32][4], float *sp,
                                                    const __nv_bfloat16 *st, int vrow, int grp,
                                                    int tig)
{
    float al0, al1;
    gem_kfv_tile_softmax(sv, t0, end, m0, m1, s0, s1, al0, al1, sp, grp, tig);
    /* the weights to the B layout: lane (grp, tig) takes tokens 2 tig, + 1, + 8, + 9 of head grp */
    const float pw[4] = {sp[(2 * tig) * GEM_CU_GROUP + grp], sp[(2 * tig + 1) * GEM_CU_GROUP + grp],
                         sp[(2 * tig + 8) * GEM_CU_GROUP + grp],
                         sp[(2 * tig + 9) * GEM_CU_GROUP + grp]};
    __nv_bfloat16 ph[4], pl[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
        ph[u] = __float2bfloat16_rn(pw[u]);
        pl[u] = __float2bfloat16_rn(pw[u] - __bfloat162float(ph[u])); /* exact difference */
    }
    const uint32_t bh0 = gem_pack_bf16(ph[0], ph[1]), bh1 = gem_pack_bf16(ph[2], ph[3]),
                   bl0 = gem_pack_bf16(pl[0], pl[1]), bl1 = gem_pack_bf16(pl[2], pl[3]);
    if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) {
#pragma unroll
        for (int mt = 0; mt < 32; mt++) {
            o[mt][0] *= al0;
            o[mt][1] *= al1;
            o[mt][2] *= al0;
            o[mt][3] *= al1;
        }
    }
#pragma unroll
    for (int mt = 0; mt < 32; mt++) {
        uint32_t a[4];
        gem_ldsm_x4_trans(a, st + vrow + 16 * mt);
        gem_mma_bf16(o[mt], a[0], a[1], a[2], a[3], bh0, bh1);
        gem_mma_bf16(o[mt], a[0], a[1], a[2], a[3], bl0, bl1);
    }
}

/* The block's N states (M, S, O of 8 heads each, in shared memory: so [N][8][512], smm and sss
 * [N][8]) combined in order into the partial of (partition p, KV head g), by the block's THREADS
 * threads: the long K-from-V passes' merge after their states are stored. */
template <int N, int THREADS>
__device__ __forceinline__ void gem_kfv_states_combine(const float *so, const float *smm,
                                                       const float *sss, int64_t p, int64_t g,
                                                       int64_t n_q_heads,
                                                       float *__restrict__ part_m,
                                                       float *__restrict__ part_s,
                                                       float *__restrict__ part_o)
{
    const int G = GEM_CU_GROUP, D = GEM_CU_D;
    for (int i = threadIdx.x; i < G * D; i += THREADS) {
        const int h = i / D, d = i % D;
        float M = -INFINITY;
        for (int n = 0; n < N; n++)
            M = fmaxf(M, smm[n * G + h]);
        float O = 0.f, S = 0.f;
        for (int n = 0; n < N; n++) {
            const float mn = smm[n * G + h];
            const float f = mn == -INFINITY ? 0.f : expf(mn - M); /* a state without tiles: 0 */
            O += so[((size_t)n * G + h) * D + d] * f;
            S += sss[n * G + h] * f;
        }
        const int64_t row = p * n_q_heads + g * G + h;
        part_o[row * D + d] = O;
        if (d == 0) {
            part_m[row] = M;
            part_s[row] = S;
        }
    }
}

/* The block's NW warps' (M, S, O) merged in warp order through sm (at least NW x (8 x 512 +
 * 16) floats: the warps' stages, free once every copy has landed), written as the partial of
 * (partition p, KV head g). Contains __syncthreads. */
template <int NW = GEM_KFV_WARP_WARPS>
__device__ __forceinline__ void gem_kfv_warp_merge(float *sm, const float (&o)[32][4], float m0,
                                                   float m1, float s0, float s1, int64_t p,
                                                   int64_t g, int64_t n_q_heads,
                                                   float *__restrict__ part_m,
                                                   float *__restrict__ part_s,
                                                   float *__restrict__ part_o)
{
    const int G = GEM_CU_GROUP, D = GEM_CU_D;
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads(); /* every warp is past its tiles */
    float *const so = sm;                   /* [w][8 heads][512] */
    float *const smm = so + (size_t)NW * G * D; /* [w][8] */
    float *const sss = smm + NW * G;            /* [w][8] */
    float *ow = so + (size_t)w * G * D;
#pragma unroll
    for (int mt = 0; mt < 32; mt++) {
        ow[(2 * tig) * D + 16 * mt + grp] = o[mt][0];
        ow[(2 * tig + 1) * D + 16 * mt + grp] = o[mt][1];
        ow[(2 * tig) * D + 16 * mt + grp + 8] = o[mt][2];
        ow[(2 * tig + 1) * D + 16 * mt + grp + 8] = o[mt][3];
    }
    if (grp == 0) {
        smm[w * G + 2 * tig] = m0;
        smm[w * G + 2 * tig + 1] = m1;
        sss[w * G + 2 * tig] = s0;
        sss[w * G + 2 * tig + 1] = s1;
    }
    __syncthreads();
    gem_kfv_states_combine<NW, 32 * NW>(so, smm, sss, p, g, n_q_heads, part_m, part_s, part_o);
}

__device__ __forceinline__ void gem_fused_first_pass_kfv_warp_body(
    const float *__restrict__ q,           /* (n_q_heads, 512) */
    const float *__restrict__ kw,          /* (512) k_weight */
    const gem_cu_rope *__restrict__ rope,  /* in the kernel's parameters */
    const __nv_bfloat16 *__restrict__ v,   /* row (g, t) at element g*v_hs + t*v_ts */
    int64_t v_hs, int64_t v_ts,
    float *__restrict__ part_m, float *__restrict__ part_s, float *__restrict__ part_o,
    int64_t live, int64_t partitions, int64_t n_q_heads, float scale)
{
    const int NW = GEM_KFV_WARP_WARPS, G = GEM_CU_GROUP, T = GEM_MMA_TILE;
    const int NP = GEM_CU_ROPE_PAIRS, HALF = GEM_CU_ROPE_HALF, QROW = GEM_KFV_WARP_QROW;
    extern __shared__ __align__(128) unsigned char gem_kfv_warp_sm[]; /* GEM_KFV_WARP_BYTES */
    unsigned char *smb = gem_kfv_warp_sm;
    __nv_bfloat16 *const sq = reinterpret_cast<__nv_bfloat16 *>(smb); /* [3][8][QROW] */
    smb += GEM_KFV_WARP_Q_BYTES;
    __nv_bfloat16 *const stiles = reinterpret_cast<__nv_bfloat16 *>(smb); /* [w][16][ROW] */
    smb += GEM_KFV_WARP_TILES_BYTES;
    float *const spt = reinterpret_cast<float *>(smb); /* [w][16 tokens][8 heads] */
    smb += GEM_KFV_WARP_P_BYTES;
    float2 *const sqr = reinterpret_cast<float2 *>(smb); /* [8 heads][64]: q_j, q_{j+256} */
    smb += GEM_KFV_WARP_QR_BYTES;
    float2 *const scs = reinterpret_cast<float2 *>(smb); /* [w][64]: cos, sin of P f_j */
    smb += GEM_KFV_WARP_CS_BYTES;
    float4 *const scf = reinterpret_cast<float4 *>(smb); /* [16 offsets][64]: w cos, w sin */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    const int nmine = ntiles > w ? (int)((ntiles - w + NW - 1) / NW) : 0;
    const __nv_bfloat16 *const vg = v + g * v_hs;
    __nv_bfloat16 *const mine = stiles + (size_t)w * GEM_KFV_WARP_TILE_ELEMS + 8 * lane;
    if (nmine > 0) /* own tile 0 while Q's pieces and the table are made */
        gem_kfv_warp_copy(mine, vg, begin + (int64_t)w * T, begin, end, v_ts, lane);

    const float *qg = q + g * G * GEM_CU_D;
    for (int i = tid; i < G * 384; i += GEM_KFV_WARP_THREADS) {
        const int h = i / 384, x = i % 384, d = gem_kfv_step_dim(x / 16) + x % 16;
        const float y = __ldg(qg + h * GEM_CU_D + d) * __ldg(kw + d);
        const __nv_bfloat16 hi = __float2bfloat16_rn(y);
        const float r1 = y - __bfloat162float(hi); /* exact */
        const __nv_bfloat16 mid = __float2bfloat16_rn(r1);
        sq[(0 * G + h) * QROW + x] = hi;
        sq[(1 * G + h) * QROW + x] = mid;
        sq[(2 * G + h) * QROW + x] = __float2bfloat16_rn(r1 - __bfloat162float(mid));
    }
    for (int i = tid; i < G * NP; i += GEM_KFV_WARP_THREADS) {
        const int h = i / NP, j = i % NP;
        sqr[i] = make_float2(__ldg(qg + h * GEM_CU_D + j), __ldg(qg + h * GEM_CU_D + HALF + j));
    }
    for (int i = tid; i < T * NP; i += GEM_KFV_WARP_THREADS) { /* the staged pass's scoef rule */
        const int u = i / NP, j = i % NP;
        float c, s;
        gem_rope_cs(u, rope->inv_freq[j], &c, &s);
        const float wl = __ldg(kw + j), wh = __ldg(kw + HALF + j);
        scf[i] = make_float4(wl * c, wh * s, wl * s, wh * c);
    }
    __syncthreads(); /* Q's pieces, the rotating pairs, the table */

    float o[32][4];
#pragma unroll
    for (int mt = 0; mt < 32; mt++)
        o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, s0 = 0.f, s1 = 0.f; /* heads 2 tig, 2 tig + 1 */
    float *const sp = spt + (size_t)w * T * G;
    float2 *const cs = scs + (size_t)w * NP;
    const __nv_bfloat16 *const st = stiles + (size_t)w * GEM_KFV_WARP_TILE_ELEMS;
    /* ldmatrix rows: K as A (token (lane & 7) + 8 ((lane >> 3) & 1), dims + 8 (lane >> 4));
     * Q as B (head lane & 7, dims + 8 (lane >> 3)); V^T as A, transposed (token (lane & 7) +
     * 8 (lane >> 4), dims + 8 ((lane >> 3) & 1)) */
    const int arow = ((lane & 7) + 8 * ((lane >> 3) & 1)) * GEM_MMA_ROW + 8 * (lane >> 4);
    const __nv_bfloat16 *const qrow = sq + (lane & 7) * QROW + 8 * (lane >> 3);
    const int vrow = ((lane & 7) + 8 * (lane >> 4)) * GEM_MMA_ROW + 8 * ((lane >> 3) & 1);
    const float4 *const cf0 = scf + grp * NP, *const cf1 = scf + (grp + 8) * NP;
    const float2 *const qr = sqr + grp * NP;
    for (int j = 0; j < nmine; j++) {
        const int64_t t0 = begin + (int64_t)(w + j * NW) * T;
        if (j > 0) /* tile 0 was copied before the loop */
            gem_kfv_warp_copy(mine, vg, t0, begin, end, v_ts, lane);
        {
            float c, s;
            gem_rope_cs(rope->pos0 + t0, rope->inv_freq[lane], &c, &s);
            cs[lane] = make_float2(c, s);
            gem_rope_cs(rope->pos0 + t0, rope->inv_freq[lane + 32], &c, &s);
            cs[lane + 32] = make_float2(c, s);
        }
        asm volatile("cp.async.wait_group 0;\n" ::: "memory"); /* own tile j has landed */
        __syncwarp();
        float sa[6][4]; /* pieces hi, mid, lo x k-step parity */
#pragma unroll
        for (int u = 0; u < 6; u++)
            sa[u][0] = sa[u][1] = sa[u][2] = sa[u][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < 24; ks += 2) {
            uint32_t a[4], a2[4];
            gem_ldsm_x4(a, st + arow + gem_kfv_step_dim(ks));
            gem_ldsm_x4(a2, st + arow + gem_kfv_step_dim(ks + 1));
#pragma unroll
            for (int pc = 0; pc < 3; pc++) {
                uint32_t b[4]; /* k-step ks: b[0], b[1]; ks + 1: b[2], b[3] */
                gem_ldsm_x4(b, qrow + pc * G * QROW + 16 * ks);
                gem_mma_bf16(sa[2 * pc], a[0], a[1], a[2], a[3], b[0], b[1]);
                gem_mma_bf16(sa[2 * pc + 1], a2[0], a2[1], a2[2], a2[3], b[2], b[3]);
            }
        }
        /* the rotating dims: block b's fragments (tokens grp, grp + 8 in regs 0 / 1 (dims
         * 2 tig, + 1) and 2 / 3 (+ 8)), pair 16 b + 2 tig + e + 8 f: F64 k-step slot tig */
        double dr[2][2][2] = {{{0.0, 0.0}, {0.0, 0.0}}, {{0.0, 0.0}, {0.0, 0.0}}};
#pragma unroll
        for (int b = 0; b < 4; b++) {
            uint32_t lo[4], hi[4];
            gem_ldsm_x4(lo, st + arow + 16 * b);
            gem_ldsm_x4(hi, st + arow + HALF + 16 * b);
#pragma unroll
            for (int f = 0; f < 2; f++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int pr = 16 * b + 2 * tig + e + 8 * f;
                    const float2 c = cs[pr], qq = qr[pr];
                    /* RoPE_{-P}(q) of head grp, pair pr */
                    const double al = fma((double)qq.x, (double)c.x, (double)qq.y * (double)c.y);
                    const double ah = fma((double)qq.y, (double)c.x, -((double)qq.x * (double)c.y));
#pragma unroll
                    for (int x = 0; x < 2; x++) { /* RoPE_u(w V) of token grp + 8 x */
                        const float vl = gem_mma_bf16_elem::half_value(lo[x + 2 * f], e);
                        const float vh = gem_mma_bf16_elem::half_value(hi[x + 2 * f], e);
                        const float4 k4 = (x ? cf1 : cf0)[pr];
                        const float kl = fmaf(k4.x, vl, -(k4.y * vh));
                        const float kh = fmaf(k4.z, vl, k4.w * vh);
                        gem_dmma(dr[x][e], (double)kl, al);
                        gem_dmma(dr[x][e], (double)kh, ah);
                    }
                }
        }
        float sv[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int x = r >> 1, h = r & 1;
            sv[r] = ((((sa[0][r] + sa[1][r]) + (sa[2][r] + sa[3][r])) + (sa[4][r] + sa[5][r])) +
                     (float)(dr[x][0][h] + dr[x][1][h])) *
                    scale;
        }
        gem_kfv_warp_update(sv, t0, end, m0, m1, s0, s1, o, sp, st, vrow, grp, tig);
        __syncwarp(); /* every lane is past the stage, sp and cs before they are rewritten */
    }
    gem_kfv_warp_merge(reinterpret_cast<float *>(stiles), o, m0, m1, s0, s1, p, g, n_q_heads,
                       part_m, part_s, part_o);
}

/* ---- the mbarrier of a pair of warps -----------------------------------------------------------
 * gem_mbar_init: one thread makes the 8-byte, 8-aligned shared word at addr (gem_smem_addr) an
 * mbarrier that completes a phase when `count` threads have arrived; the block must meet at a
 * __syncthreads before any thread uses it. gem_pair_sync: the calling thread arrives (release)
 * and waits (acquire) until the barrier's phase of parity `parity` is complete; every one of the
 * count threads calls it the same number of times, the n-th time (from 0) with parity n & 1.
 *
 * Where the words live: compute-sanitizer's racecheck (2025.3) places an mbarrier.init 1 KiB
 * (the shared window's reserved bytes) below the address it reports for the block's ordinary
 * loads and stores, so a word right after a table that the block writes before its barrier is
 * reported as a write-after-write hazard against that table, which is not there
 * (results/h200/run134: a minimal kernel, clean with its words at the start of shared memory,
 * reported with them after its table). Words in static shared memory, which precedes the
 * dynamic block, come out in the reserved bytes, which nothing writes. */
__device__ __forceinline__ void gem_mbar_init(uint32_t addr, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
}
__device__ __forceinline__ void gem_pair_sync(uint32_t addr, uint32_t parity)
{
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(addr)
                 : "memory");
    uint32_t done = 0;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(addr), "r"(parity)
                     : "memory");
    } while (!done);
}

/* ---- K rebuilt from an F32 V cache by pairs of warps, products in TF32 pieces ------------------
 * The K-from-V first pass for F32 V caches at long lengths (gem_cu_fused_launch,
 * gem_cu_kfv_f32_long: from GEM_KFV_PAIR_MIN_LIVE rows, or GEM_KFV_PAIR_MIN_LIVE_ONE_WAVE at one
 * block an SM; below them the CUDA-core body, gem_fused_first_pass_body with KFV, is faster).
 * Lineage: dev/cuda/kfv_mma.cu versions 24-34 (results/h200/runs 122-138): version 34,
 * which is version 30 without its L2 prefetch of the next tile (0.2915 ms at 128K and 0.1666 at
 * 64K at 64 partitions against 0.3339 / 0.1821 for version 30, run 138); version 30 is version
 * 29's arithmetic in its order (the same bits) with each pair at an mbarrier of its own
 * instead of the block's barrier: 0.3407 ms at 128K and 0.1867 at 64K at 64 partitions against
 * 0.3785 and 0.2087 for version 29 (run 133), and 0.3508 / 0.1958 for version 29 at 33 against
 * 0.5006 / 0.2571 for the CUDA-core pass (run 125), even near 20K, slower below (8K: 0.0514
 * against 0.0404).
 *
 * Each product is three TF32 MMAs (mma.m16n8k8.tf32): a value x is big + small with big =
 * cvt.rn.tf32(x) and small = x - big exactly; a . b takes big big + big small + small big, the
 * small small term (about 2^-22 of the product) left out and small given to the MMA as it is (it
 * keeps 11 of its bits, about 2^-22 of x, of either sign since big was rounded to nearest). So a
 * product is good to about 2^-21 of itself, without bias: F32 arithmetic's accuracy, not the
 * 16-bit passes' exact products; NMSE against the double reference 1e-13 .. 2e-12 (run 125).
 *
 * A block of GEM_KFV_PAIR_PAIRS pairs of warps takes one partition; pair pr takes the
 * partition's 16-token tiles pr, pr + PAIRS, ...:
 *   - the stage (one a pair): 16 rows of 512 floats, 2,048 bytes, their 16-byte quads swizzled
 *     by the row's token t (physical quad = quad ^ (4 (t & 1) + (t & 2))); warp h of the pair
 *     copies rows 8h .. 8h + 7 by cp.async at the top of the iteration, with nothing asked of
 *     the L2 ahead: the form that asked for the next tile's rows (prefetch.global.L2) during the
 *     tile before read 1.31 GB of DRAM for the 1.07 GB of V at 128K and took 0.3339 ms against
 *     0.2915 without it (dev/cuda/kfv_mma versions 30 and 34, run 138);
 *   - scores S^T = K Q^T with the tokens as the MMA's rows: lane (grp, tig) of warp h owns the
 *     quads 4k + tig of tokens grp and grp + 8 (dims 16k + 4 tig + e), one 16-byte load giving
 *     two k-steps (e = 0, 1 at slots tig, tig + 4; then e = 2, 3), and Q's B fragment of head grp
 *     is the same quad of fl(q w) (big and small in shared memory, swizzled by head). Warp h
 *     takes the 12 quads that do not rotate 12h .. 12h + 11 of the 24 (k_weight folded into Q)
 *     and the rotating quads 2h, 2h + 1 with their partners 16 quads on (pairs j and j + 256 in
 *     one lane): q . RoPE_{P+u}(w V) = RoPE_{-P}(q) . RoPE_u(w V), RoPE_{-P}(q) in F32 from the
 *     tile's angles (gem_rope_cs), RoPE_u(w V) in F32 from the block's table of w cos, w sin of
 *     the 16 offsets (the staged pass's rule), in the lanes' order;
 *   - the pair's partial scores meet in shared memory, both warps add them in the same order
 *     (half 0's first) and run the same online softmax;
 *   - the V update O^T += V^T P^T: warp h owns quads 8k + grp, k = 8h .. 8h + 7, of tokens tig,
 *     + 4, + 8, + 12 (its 256 dims); m-tile 2k + hh takes dims 32k + 4 grp + 2 hh (row grp)
 *     and + 1 (row grp + 8), so one 16-byte load feeds two m-tiles; O^T in 64 registers a lane;
 *   - the two warps of a pair meet at the pair's mbarrier (gem_pair_sync) three times a tile
 *     (the tile landed, the partial scores written, the stage free again); each pair runs its
 *     own tiles and the block meets only at the merge. Version 29 met at the block's barrier
 *     (10% slower at 64 partitions); 64-thread named barriers (versions 27, 28) were as fast as
 *     the mbarriers, but racecheck reports hazards with them that are not understood;
 *   - at the end the pairs merge (M, S, O) in pair order through shared memory and write the
 *     block's partial in the reducer's layout.
 * The body waits for the grid before (pdl_wait) itself, after the table's angles and the first
 * tile's, which need only the kernel's parameters; then it issues every load of Q and k_weight
 * before the first tile's copy (kfv_timeline versions 4 and 6).
 * Bitwise repeats: every sum in a fixed order. Launched with GEM_KFV_PAIR_BYTES of dynamic shared
 * memory (the pairs' mbarriers take 128 static bytes) and GEM_KFV_PAIR_THREADS threads, one block
 * an SM; v, its strides multiples of 4 floats. */
#define GEM_KFV_PAIR_PAIRS 5
#define GEM_KFV_PAIR_THREADS (64 * GEM_KFV_PAIR_PAIRS)
#define GEM_KFV_PAIR_STAGE (GEM_MMA_TILE * GEM_CU_D)  /* floats of a stage */
#define GEM_KFV_PAIR_QNR (GEM_CU_GROUP * 384)        /* floats of one piece of fl(q w) */
#define GEM_KFV_PAIR_BYTES                                                                      \
    (GEM_KFV_PAIR_PAIRS * GEM_KFV_PAIR_STAGE * 4 + 2 * GEM_KFV_PAIR_QNR * 4 +                   \
     GEM_CU_GROUP * GEM_CU_ROPE_PAIRS * 8 +                                                     \
     2 * GEM_KFV_PAIR_PAIRS * (GEM_MMA_TILE * GEM_CU_GROUP * 4 + 32 * 8 + 32 * 16) +            \
     GEM_MMA_TILE * GEM_CU_ROPE_PAIRS * 16) /* 221,696 */
static_assert(GEM_KFV_PAIR_PAIRS * (GEM_CU_GROUP * GEM_CU_D + 2 * GEM_CU_GROUP) <=
                  GEM_KFV_PAIR_PAIRS * GEM_KFV_PAIR_STAGE,
              "the pairs' states meet in their stages");

/* the swizzle of a staged row of token t (and of Q's rows of head t): bits 1 and 2 of a quad */
__device__ __forceinline__ int gem_tf32_swz(int t) { return ((t & 1) << 2) | (t & 2); }

/* x = big + small: big rounded to TF32 (to nearest), small the exact rest */
__device__ __forceinline__ void gem_tf32_split(float x, uint32_t &big, uint32_t &small)
{
    uint32_t b;
    asm("cvt.rn.tf32.f32 %0, %1;\n" : "=r"(b) : "f"(x));
    big = b;
    small = __float_as_uint(x - __uint_as_float(b));
}

__device__ __forceinline__ void gem_mma_tf32(float *d, uint32_t a0, uint32_t a1, uint32_t a2,
                                             uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* One k-step's three products into acc[0] (big big), acc[1] (big small), acc[2] (small big):
 * a0 .. a3 the A values, b0, b1 the B values */
__device__ __forceinline__ void gem_mma_tf32x3(float (*acc)[4], float a0, float a1, float a2,
                                               float a3, float b0, float b1)
{
    uint32_t ab[4], as[4], bb[2], bs[2];
    gem_tf32_split(a0, ab[0], as[0]);
    gem_tf32_split(a1, ab[1], as[1]);
    gem_tf32_split(a2, ab[2], as[2]);
    gem_tf32_split(a3, ab[3], as[3]);
    gem_tf32_split(b0, bb[0], bs[0]);
    gem_tf32_split(b1, bb[1], bs[1]);
    gem_mma_tf32(acc[0], ab[0], ab[1], ab[2], ab[3], bb[0], bb[1]);
    gem_mma_tf32(acc[1], ab[0], ab[1], ab[2], ab[3], bs[0], bs[1]);
    gem_mma_tf32(acc[2], as[0], as[1], as[2], as[3], bb[0], bb[1]);
}

/* 16 bytes global -> shared, L2 only */
__device__ __forceinline__ void gem_cp16(void *dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(gem_smem_addr(dst)), "l"(src)
                 : "memory");
}

/* The online softmax and the V update of one tile in warp h of a pair: sv the scaled scores of
 * tokens grp (0, 1) and grp + 8 (2, 3) of heads 2 tig (0, 2) and 2 tig + 1 (1, 3), the same
 * bits in both warps; (m0, s0), (m1, s1) the running maximum and sum of those heads; o the
 * lane's O^T accumulators (m-tile 2k + hh: dims 256h + 32k + 4 grp + 2hh, + 1); sp the warp's
 * 512 bytes that take the weights to the B layout; vbase the lane's first quad of the warp's
 * dims in the stage (token tig). */
__device__ __forceinline__ void gem_kfv_pair_update(float (&sv)[4], int64_t t0, int64_t end,
                                                    float &m0, float &m1, float &s0, float &s1,
                                                    float (&o)[16][4], float *sp,
                                                    const float *vbase, int grp, int tig)
{
    const int G = GEM_CU_GROUP, D = GEM_CU_D;
    float al0, al1;
    gem_kfv_tile_softmax(sv, t0, end, m0, m1, s0, s1, al0, al1, sp, grp, tig);
    /* the weights to the B layout: k-step ks takes tokens tig + 8 ks and + 4 of head grp */
    uint32_t pb[4], pls[4];
#pragma unroll
    for (int u = 0; u < 4; u++) /* tokens tig, tig + 4, tig + 8, tig + 12 */
        gem_tf32_split(sp[(tig + 4 * u) * G + grp], pb[u], pls[u]);
    __syncwarp(); /* sp is read before the next tile writes it */
    if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) { /* x * 1 = x: the same bits */
#pragma unroll
        for (int mt = 0; mt < 16; mt++) {
            o[mt][0] *= al0;
            o[mt][1] *= al1;
            o[mt][2] *= al0;
            o[mt][3] *= al1;
        }
    }
#pragma unroll
    for (int k = 0; k < 8; k++) {
        float4 vv[4]; /* quad 8 (8h + k) + grp of tokens tig + 4u */
#pragma unroll
        for (int u = 0; u < 4; u++)
            vv[u] = *reinterpret_cast<const float4 *>(vbase + 4 * u * D + 32 * k);
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            uint32_t ab[8], as[8]; /* k-step 0: tokens tig, tig + 4; k-step 1: + 8, + 12 */
#pragma unroll
            for (int u = 0; u < 4; u++) {
                gem_tf32_split(hh ? vv[u].z : vv[u].x, ab[2 * u], as[2 * u]);
                gem_tf32_split(hh ? vv[u].w : vv[u].y, ab[2 * u + 1], as[2 * u + 1]);
            }
            float *acc = o[2 * k + hh];
            gem_mma_tf32(acc, ab[0], ab[1], ab[2], ab[3], pb[0], pb[1]);
            gem_mma_tf32(acc, ab[0], ab[1], ab[2], ab[3], pls[0], pls[1]);
            gem_mma_tf32(acc, as[0], as[1], as[2], as[3], pb[0], pb[1]);
            gem_mma_tf32(acc, ab[4], ab[5], ab[6], ab[7], pb[2], pb[3]);
            gem_mma_tf32(acc, ab[4], ab[5], ab[6], ab[7], pls[2], pls[3]);
            gem_mma_tf32(acc, as[4], as[5], as[6], as[7], pb[2], pb[3]);
        }
    }
}

/* The block's pairs' (M, S, O) merged in pair order through sm (at least PAIRS x (8 x 512 + 16)
 * floats: the pairs' stages, free once every copy has landed), written as the partial of
 * (partition p, KV head g). Warp h of pair pr holds dims 256h + 32k + 4 grp + 2hh (+ 1) of
 * m-tile 2k + hh. Contains __syncthreads. */
__device__ __forceinline__ void gem_kfv_pair_merge(float *sm, const float (&o)[16][4], float m0,
                                                   float m1, float s0, float s1, int64_t p,
                                                   int64_t g, int64_t n_q_heads,
                                                   float *__restrict__ part_m,
                                                   float *__restrict__ part_s,
                                                   float *__restrict__ part_o)
{
    const int NPR = GEM_KFV_PAIR_PAIRS, G = GEM_CU_GROUP, D = GEM_CU_D;
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int pr = w >> 1, h = w & 1;
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads(); /* every warp is past its tiles */
    float *const so = sm;                        /* [pair][8 heads][512] */
    float *const smm = so + (size_t)NPR * G * D; /* [pair][8] */
    float *const sss = smm + NPR * G;            /* [pair][8] */
    float *const ow = so + (size_t)pr * G * D;
#pragma unroll
    for (int mt = 0; mt < 16; mt++) {
        const int d = 256 * h + 32 * (mt >> 1) + 4 * grp + 2 * (mt & 1);
        ow[(2 * tig) * D + d] = o[mt][0];
        ow[(2 * tig + 1) * D + d] = o[mt][1];
        ow[(2 * tig) * D + d + 1] = o[mt][2];
        ow[(2 * tig + 1) * D + d + 1] = o[mt][3];
    }
    if (grp == 0 && h == 0) {
        smm[pr * G + 2 * tig] = m0;
        smm[pr * G + 2 * tig + 1] = m1;
        sss[pr * G + 2 * tig] = s0;
        sss[pr * G + 2 * tig + 1] = s1;
    }
    __syncthreads();
    gem_kfv_states_combine<NPR, GEM_KFV_PAIR_THREADS>(so, smm, sss, p, g, n_q_heads, part_m,
                                                      part_s, part_o);
}

__device__ __forceinline__ void gem_fused_first_pass_kfv_pair_body(
    const float *__restrict__ q,          /* (n_q_heads, 512) */
    const float *__restrict__ kw,         /* (512) k_weight */
    const gem_cu_rope *__restrict__ rope, /* in the kernel's parameters */
    const float *__restrict__ v,          /* row (g, t) at element g*v_hs + t*v_ts */
    int64_t v_hs, int64_t v_ts,
    float *__restrict__ part_m, float *__restrict__ part_s, float *__restrict__ part_o,
    int64_t live, int64_t partitions, int64_t n_q_heads, float scale)
{
    const int NPR = GEM_KFV_PAIR_PAIRS, G = GEM_CU_GROUP, D = GEM_CU_D, T = GEM_MMA_TILE;
    const int NP = GEM_CU_ROPE_PAIRS, HALF = GEM_CU_ROPE_HALF;
    extern __shared__ __align__(128) unsigned char gem_kfv_pair_sm[]; /* GEM_KFV_PAIR_BYTES */
    float *const stiles = reinterpret_cast<float *>(gem_kfv_pair_sm); /* [pair][16][512] */
    float *const sqb = stiles + (size_t)NPR * GEM_KFV_PAIR_STAGE;      /* [8][384] big */
    float *const sqs = sqb + GEM_KFV_PAIR_QNR;                         /* [8][384] small */
    float2 *const sqr = reinterpret_cast<float2 *>(sqs + GEM_KFV_PAIR_QNR); /* [8][64] */
    float *const spt = reinterpret_cast<float *>(sqr + G * NP);        /* [w][16][8] */
    float2 *const scs = reinterpret_cast<float2 *>(spt + 2 * NPR * T * G); /* [w][32] */
    float4 *const sx = reinterpret_cast<float4 *>(scs + 2 * NPR * 32); /* [w][32] partials */
    float4 *const scf = sx + 2 * NPR * 32; /* [2][4][4][32]: w cos, w sin in the lanes' order */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int pr = w >> 1, h = w & 1;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    const int nmine = ntiles > pr ? (int)((ntiles - pr + NPR - 1) / NPR) : 0;
    const float *const vg = v + g * v_hs;
    float *const stage = stiles + (size_t)pr * GEM_KFV_PAIR_STAGE;
    /* the pairs' mbarriers, in static shared memory: see gem_pair_sync on where they live */
    __shared__ __align__(8) uint64_t gem_kfv_pair_bars[GEM_KFV_PAIR_PAIRS];
    const uint32_t bar = gem_smem_addr(gem_kfv_pair_bars + pr);
    if (tid < NPR) /* published to the block by the prologue's __syncthreads */
        gem_mbar_init(gem_smem_addr(gem_kfv_pair_bars + tid), 64);

    auto copy = [&](int64_t t0) { /* rows 8h .. 8h + 7 of the tile at t0; past end: zeros */
        if (t0 + T <= end) {
            const float *src = vg + (t0 + 8 * h) * v_ts + 4 * lane;
#pragma unroll
            for (int r = 0; r < 8; r++, src += v_ts) {
                float *dst = stage + (8 * h + r) * D + 4 * (lane ^ gem_tf32_swz(r));
#pragma unroll
                for (int i = 0; i < 4; i++)
                    gem_cp16(dst + 128 * i, src + 128 * i);
            }
        } else { /* the partition's last tile */
            for (int r = 8 * h; r < 8 * h + 8; r++) {
                const bool in = t0 + r < end;
                const float *src = vg + (in ? t0 + r : begin) * v_ts + 4 * lane;
                float *dst = stage + r * D;
                const int sw = gem_tf32_swz(r);
#pragma unroll
                for (int i = 0; i < 4; i++)
                    gem_cp16_zfill(dst + 4 * ((lane + 32 * i) ^ sw), src + 128 * i, in ? 16 : 0);
            }
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    /* The prologue. Before the launch wait, what depends only on the kernel's parameters: the
     * angles of the table's entries (in registers) and of the pair's first tile (in the warp's
     * cs). After it, every load of Q and k_weight the block needs is issued at once, ahead of the
     * first tile's copy, so that they do not queue behind the copies of every block: 7.9 -> 6.4
     * us to the end of the prologue at 128K (dev/cuda/kfv_timeline.cu version 4, run 148). */
    constexpr int NTHR = GEM_KFV_PAIR_THREADS;
    constexpr int NQP = (GEM_CU_GROUP * 384 + NTHR - 1) / NTHR;  /* Q's pieces a thread */
    constexpr int NRP = (GEM_CU_GROUP * GEM_CU_ROPE_PAIRS + NTHR - 1) / NTHR; /* rotating pairs */
    constexpr int NTB = (GEM_MMA_TILE * GEM_CU_ROPE_PAIRS + NTHR - 1) / NTHR; /* table entries */
    float tc[NTB], ts[NTB];
#pragma unroll
    for (int n = 0; n < NTB; n++) {
        /* entry i = ((x 4 + k) 4 + e) 32 + lane' for lane' (grp', tig'): offset u = grp' + 8x,
         * pair j = 16k + 4 tig' + e */
        const int i = tid + n * NTHR;
        tc[n] = ts[n] = 0.f;
        if (i < T * NP) {
            const int ln = i & 31, e = (i >> 5) & 3, k = (i >> 7) & 3, x = i >> 9;
            const int u = (ln >> 2) + 8 * x, j = 16 * k + 4 * (ln & 3) + e;
            gem_rope_cs(u, rope->inv_freq[j], &tc[n], &ts[n]);
        }
    }
    if (nmine > 0) { /* the first tile's angles, pairs 32h .. 32h + 31 */
        float c, s;
        gem_rope_cs(rope->pos0 + begin + (int64_t)pr * T, rope->inv_freq[32 * h + lane], &c, &s);
        scs[(size_t)w * 32 + lane] = make_float2(c, s);
    }
    pdl_wait();

    const float *qg = q + g * G * D;
    float lq[NQP], lw[NQP], lr0[NRP], lr1[NRP], tw0[NTB], tw1[NTB];
#pragma unroll
    for (int n = 0; n < NQP; n++) {
        const int i = tid + n * NTHR;
        lq[n] = lw[n] = 0.f;
        if (i < G * 384) {
            const int hd = i / 384, x = i % 384, d = x < 192 ? 64 + x : 128 + x;
            lq[n] = __ldg(qg + hd * D + d);
            lw[n] = __ldg(kw + d);
        }
    }
#pragma unroll
    for (int n = 0; n < NRP; n++) {
        const int i = tid + n * NTHR;
        lr0[n] = lr1[n] = 0.f;
        if (i < G * NP) {
            const int hd = i / NP, j = i % NP;
            lr0[n] = __ldg(qg + hd * D + j);
            lr1[n] = __ldg(qg + hd * D + HALF + j);
        }
    }
#pragma unroll
    for (int n = 0; n < NTB; n++) {
        const int i = tid + n * NTHR;
        tw0[n] = tw1[n] = 0.f;
        if (i < T * NP) {
            const int ln = i & 31, e = (i >> 5) & 3, k = (i >> 7) & 3;
            const int j = 16 * k + 4 * (ln & 3) + e;
            tw0[n] = __ldg(kw + j);
            tw1[n] = __ldg(kw + HALF + j);
        }
    }
    if (nmine > 0)
        copy(begin + (int64_t)pr * T);
#pragma unroll
    for (int n = 0; n < NQP; n++) {
        const int i = tid + n * NTHR;
        if (i < G * 384) {
            const int hd = i / 384, x = i % 384, d = x < 192 ? 64 + x : 128 + x;
            const int kq = (d >> 4) - (d < HALF ? 4 : 8), t4 = (d >> 2) & 3;
            const int at = hd * 384 + 4 * ((4 * kq + t4) ^ gem_tf32_swz(hd)) + (d & 3);
            uint32_t b, s;
            gem_tf32_split(lq[n] * lw[n], b, s);
            sqb[at] = __uint_as_float(b);
            sqs[at] = __uint_as_float(s);
        }
    }
#pragma unroll
    for (int n = 0; n < NRP; n++) {
        const int i = tid + n * NTHR;
        if (i < G * NP)
            sqr[i] = make_float2(lr0[n], lr1[n]);
    }
#pragma unroll
    for (int n = 0; n < NTB; n++) {
        const int i = tid + n * NTHR;
        if (i < T * NP)
            scf[i] = make_float4(tw0[n] * tc[n], tw1[n] * ts[n], tw0[n] * ts[n], tw1[n] * tc[n]);
    }
    __syncthreads(); /* Q's pieces, the rotating pairs, the table, the first tiles' angles */

    float o[16][4]; /* m-tiles 2k + hh of k = 8h .. 8h + 7 */
#pragma unroll
    for (int mt = 0; mt < 16; mt++)
        o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, s0 = 0.f, s1 = 0.f; /* heads 2 tig, 2 tig + 1 */
    float *const sp = spt + (size_t)w * T * G;
    float2 *const cs = scs + (size_t)w * 32; /* pairs 32h .. 32h + 31 */
    float4 *const xmine = sx + (size_t)w * 32, *const xother = sx + (size_t)(w ^ 1) * 32;
    /* quad (4k + tig) ^ swz(grp) of a row is at floats 16 (k ^ s2) + lo: 16k + lo + s2 for even
     * k, 16k + lo - s2 for odd k, so every load below is a base and an immediate offset */
    const int swg = gem_tf32_swz(grp), swt = gem_tf32_swz(tig);
    const int lo = 4 * (tig ^ (swg & 3)), s2 = 16 * (swg >> 2);
    const float *const rae = stage + grp * D + lo + s2, *const rao = stage + grp * D + lo - s2;
    const float *const rbe = rae + 8 * D, *const rbo = rao + 8 * D; /* token grp + 8 */
    const float *const rre = rae + 32 * h, *const rro = rao + 32 * h; /* rotating quads 2h, +1 */
    const float *const rrbe = rbe + 32 * h, *const rrbo = rbo + 32 * h;
    const int nr0 = 16 * (h ? 20 : 4), q0 = 16 * 12 * h; /* the quads that do not rotate */
    const float *const nae = rae + nr0, *const nao = rao + nr0, *const nbe = rbe + nr0,
                      *const nbo = rbo + nr0;
    const float *const qbe = sqb + grp * 384 + lo + s2 + q0,
                      *const qbo = sqb + grp * 384 + lo - s2 + q0;
    const float *const qse = sqs + grp * 384 + lo + s2 + q0,
                      *const qso = sqs + grp * 384 + lo - s2 + q0;
    const float2 *const hqr = sqr + grp * NP + 32 * h + 4 * tig;
    const float4 *const hcf = scf + 2 * h * 4 * 32 + lane;
    const float *const vbase = stage + tig * D + 4 * (grp ^ swt) + 256 * h;
    /* The two warps of a pair meet at their own mbarrier three times a tile (twice in the
     * first: the n-th meeting, from 0, waits for parity n & 1, so the meetings of tile jt have
     * parities jt + 1, jt, jt + 1); the pairs run their own numbers of tiles and meet the
     * block only at the merge's __syncthreads. */
    for (int jt = 0; jt < nmine; jt++) {
        const int64_t t0 = begin + (int64_t)(pr + jt * NPR) * T;
        if (jt > 0) {
            gem_pair_sync(bar, (jt + 1) & 1); /* both warps are past the stage */
            copy(t0);
        }
        if (jt > 0) { /* the first tile's angles are the prologue's */
            float c, s;
            gem_rope_cs(rope->pos0 + t0, rope->inv_freq[32 * h + lane], &c, &s);
            cs[lane] = make_float2(c, s);
        }
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        gem_pair_sync(bar, jt & 1); /* both halves of the tile have landed; cs written */
        float sa[2][3][4]; /* k-step parity x (big big, big small, small big) */
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int pc = 0; pc < 3; pc++)
                sa[u][pc][0] = sa[u][pc][1] = sa[u][pc][2] = sa[u][pc][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < 2; kk++) { /* rotating quad k = 2h + kk (parity kk), partner + 16 */
            const float *const ea = (kk ? rro : rre) + 16 * kk;
            const float *const eb = (kk ? rrbo : rrbe) + 16 * kk;
            const float4 l0 = *reinterpret_cast<const float4 *>(ea),
                         l1 = *reinterpret_cast<const float4 *>(eb),
                         h0 = *reinterpret_cast<const float4 *>(ea + HALF),
                         h1 = *reinterpret_cast<const float4 *>(eb + HALF);
            const float vl[2][4] = {{l0.x, l0.y, l0.z, l0.w}, {l1.x, l1.y, l1.z, l1.w}};
            const float vh[2][4] = {{h0.x, h0.y, h0.z, h0.w}, {h1.x, h1.y, h1.z, h1.w}};
            float al[4], ah[4], kl[2][4], kh[2][4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float2 c = cs[16 * kk + 4 * tig + e], qq = hqr[16 * kk + e];
                al[e] = fmaf(qq.x, c.x, qq.y * c.y); /* RoPE_{-P}(q), head grp */
                ah[e] = fmaf(qq.y, c.x, -(qq.x * c.y));
#pragma unroll
                for (int x = 0; x < 2; x++) { /* RoPE_u(w V), token grp + 8x */
                    const float4 k4 = hcf[((x * 4 + kk) * 4 + e) * 32];
                    kl[x][e] = fmaf(k4.x, vl[x][e], -(k4.y * vh[x][e]));
                    kh[x][e] = fmaf(k4.z, vl[x][e], k4.w * vh[x][e]);
                }
            }
            gem_mma_tf32x3(sa[0], kl[0][0], kl[1][0], kl[0][1], kl[1][1], al[0], al[1]);
            gem_mma_tf32x3(sa[1], kl[0][2], kl[1][2], kl[0][3], kl[1][3], al[2], al[3]);
            gem_mma_tf32x3(sa[0], kh[0][0], kh[1][0], kh[0][1], kh[1][1], ah[0], ah[1]);
            gem_mma_tf32x3(sa[1], kh[0][2], kh[1][2], kh[0][3], kh[1][3], ah[2], ah[3]);
        }
        /* unrolled by 6, not 12: fully unrolled, the pass needs 3 registers more than 168
         * (the most for 320 threads an SM) and spills them */
#pragma unroll 6
        for (int kx = 0; kx < 12; kx++) { /* quads that do not rotate: k-steps of parity 0, 1 */
            const float4 a0 = *reinterpret_cast<const float4 *>((kx & 1 ? nao : nae) + 16 * kx),
                         a1 = *reinterpret_cast<const float4 *>((kx & 1 ? nbo : nbe) + 16 * kx),
                         b = *reinterpret_cast<const float4 *>((kx & 1 ? qbo : qbe) + 16 * kx),
                         bs = *reinterpret_cast<const float4 *>((kx & 1 ? qso : qse) + 16 * kx);
            uint32_t ab[8], as[8];
            gem_tf32_split(a0.x, ab[0], as[0]);
            gem_tf32_split(a1.x, ab[1], as[1]);
            gem_tf32_split(a0.y, ab[2], as[2]);
            gem_tf32_split(a1.y, ab[3], as[3]);
            gem_tf32_split(a0.z, ab[4], as[4]);
            gem_tf32_split(a1.z, ab[5], as[5]);
            gem_tf32_split(a0.w, ab[6], as[6]);
            gem_tf32_split(a1.w, ab[7], as[7]);
            const uint32_t b0 = __float_as_uint(b.x), b1 = __float_as_uint(b.y),
                           b2 = __float_as_uint(b.z), b3 = __float_as_uint(b.w);
            gem_mma_tf32(sa[0][0], ab[0], ab[1], ab[2], ab[3], b0, b1);
            gem_mma_tf32(sa[0][1], ab[0], ab[1], ab[2], ab[3], __float_as_uint(bs.x),
                         __float_as_uint(bs.y));
            gem_mma_tf32(sa[0][2], as[0], as[1], as[2], as[3], b0, b1);
            gem_mma_tf32(sa[1][0], ab[4], ab[5], ab[6], ab[7], b2, b3);
            gem_mma_tf32(sa[1][1], ab[4], ab[5], ab[6], ab[7], __float_as_uint(bs.z),
                         __float_as_uint(bs.w));
            gem_mma_tf32(sa[1][2], as[4], as[5], as[6], as[7], b2, b3);
        }
        float part[4];
#pragma unroll
        for (int r = 0; r < 4; r++)
            part[r] = (sa[0][0][r] + sa[1][0][r]) +
                      ((sa[0][1][r] + sa[1][1][r]) + (sa[0][2][r] + sa[1][2][r]));
        xmine[lane] = make_float4(part[0], part[1], part[2], part[3]);
        gem_pair_sync(bar, (jt + 1) & 1); /* both partial scores written */
        const float4 xo = xother[lane];
        const float oth[4] = {xo.x, xo.y, xo.z, xo.w};
        float sv[4];
#pragma unroll
        for (int r = 0; r < 4; r++) /* half 0's partial first, in both warps */
            sv[r] = (h ? oth[r] + part[r] : part[r] + oth[r]) * scale;
        gem_kfv_pair_update(sv, t0, end, m0, m1, s0, s1, o, sp, vbase, grp, tig);
    }
    gem_kfv_pair_merge(stiles, o, m0, m1, s0, s1, p, g, n_q_heads, part_m, part_s, part_o);
}

/* Asks the L2 for the first ROWS rows of this first-pass block's K and V (partition
 * blockIdx.x, KV head blockIdx.y; the partition by gem_partition_range, chunk = ceil(live / P);
 * rows of ROW_BYTES bytes, a multiple of 128; strides in bytes; k NULL when the view holds V
 * alone), one 128-byte line per request, at most one request per thread and tensor. A prefetch
 * reads nothing into a register, so it may run before pdl_wait while the grid before
 * this one still writes those rows: the L2 is where they meet. It is only a hint: past 2^31
 * rows (where the 32-bit partition arithmetic that keeps it cheap in registers would not hold)
 * it asks for nothing. */
template <int ROW_BYTES, int ROWS>
__device__ __forceinline__ void gem_fp_prefetch_l2(const void *k, int64_t k_hs, int64_t k_ts,
                                                   const void *v, int64_t v_hs, int64_t v_ts,
                                                   int64_t live, int64_t partitions)
{
    constexpr int LINES = ROW_BYTES / 128, PER = ROWS * LINES; /* requests per tensor */
    static_assert(ROW_BYTES % 128 == 0 && PER <= GEM_CU_THREADS, "one request per thread");
    if (live > INT32_MAX || partitions > INT32_MAX)
        return;
    const unsigned L = (unsigned)live, P = (unsigned)partitions;
    const unsigned chunk = L / P + (L % P != 0);
    const unsigned long long b = (unsigned long long)blockIdx.x * chunk;
    if (b >= L)
        return;
    const unsigned begin = (unsigned)b, n = min(L - begin, (unsigned)ROWS);
    const int i = threadIdx.x, r = i / LINES;
    if (i >= PER || (unsigned)r >= n)
        return;
    const int64_t row = (int64_t)(begin + (unsigned)r), line = (int64_t)(i % LINES) * 128;
    if (k)
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(reinterpret_cast<const char *>(k) +
                                                        blockIdx.y * k_hs + row * k_ts + line));
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(reinterpret_cast<const char *>(v) +
                                                    blockIdx.y * v_hs + row * v_ts + line));
}

/* The reducer: M = the largest M_p of the non-empty partials, one weight w_p = e^(M_p - M) per
 * partial (0 for an empty one), computed once per block, then O = sum_p O_p w_p in partition
 * order (fmaf), S = sum_p S_p w_p by warp 0 in a fixed order (lane l adds the terms
 * l, l + 32, ... of a batch of 256, then a butterfly; the batches in order), out = O / S.
 * Grid (n_q_heads, dv / 256): block (h, y) finishes dims 256 y .. 256 y + 255 of head h; dv is
 * the row length of the partials and the output (512 for the full-attention layers, 256 for
 * the sliding-window ones), a multiple of 256.
 * The O loads do not depend on M, so each thread issues those of its element for a group of
 * GEM_FR_LOADS partials at once, the first group before it loads M and S: one round trip to
 * the L2 for the whole merge at P <= 64 (the loop that loaded 8 partials at a time made eight
 * and took 0.8-1.2 us more a call, results/h200/run53; dev/cuda/fused_decode.cu version 21
 * keeps it as the control). The
 * arithmetic and its order are those of that loop: the same bits. Thread i loads M_i and S_i
 * together and keeps them for the first batch's weight. */
#define GEM_FR_LOADS 64 /* reducer: O loads in flight per thread */

/* A load of the reducer: through the read-only path (__ldg) when the partials come from an
 * earlier grid, from the L2 (__ldcg, coherent) when the same grid wrote them (FRESH: the
 * partials of a cluster's blocks, read after its barrier). */
template <bool FRESH>
__device__ __forceinline__ float gem_fr_load(const float *p)
{
    return FRESH ? __ldcg(p) : __ldg(p);
}
/* M_p or S_p: as gem_fr_load, a plain load when not FRESH (what the compiler makes of it) */
template <bool FRESH>
__device__ __forceinline__ float gem_fr_load_ms(const float *__restrict__ p)
{
    return FRESH ? __ldcg(p) : *p;
}

/* The reducer's O loads of one group: op[u] = p[u * stride] for u < n, 0 past it (n > 0). A
 * whole group steps one pointer (two instructions a load); computing each address and bound
 * on its own took some 20. */
template <bool FRESH>
__device__ __forceinline__ void gem_fr_load_group(float *op, const float *p, int64_t stride,
                                                  int64_t n)
{
    if (n >= GEM_FR_LOADS) {
#pragma unroll
        for (int u = 0; u < GEM_FR_LOADS; u++) {
            op[u] = gem_fr_load<FRESH>(p);
            p += stride;
        }
    } else {
#pragma unroll
        for (int u = 0; u < GEM_FR_LOADS; u++) {
            op[u] = u < n ? gem_fr_load<FRESH>(p) : 0.f;
            p += u < n ? stride : 0;
        }
    }
}
/* The partials' rows: M_p and S_p of head h at part_m / part_s[p * m_stride + h], O_p at
 * part_o[p * o_stride + h * dv] (the first pass's layout: m_stride n_q_heads, o_stride
 * n_q_heads * dv; gem_decode_merge's states: both n_q_heads * (dv + 2)). With state_ms not
 * NULL the division is left out: out receives O, and state_ms[h], state_ms[n_q_heads + h]
 * M and S (gem_decode_state); a merge of one partial then gives back its O and S exactly, so
 * the state's division elsewhere is this one's.
 * gem_fused_reducer_core is the merge of head h, dims 256 slice .. 256 slice + 255, by one
 * 256-thread block (FRESH: gem_fr_load); gem_fused_reducer_body is the reducer grid's block
 * (h = blockIdx.x, n_q_heads = gridDim.x, slice = blockIdx.y) after its launch wait. */
template <bool FRESH>
__device__ __forceinline__ void gem_fused_reducer_core(
    const float *__restrict__ part_m, /* (P, m_stride) */
    const float *__restrict__ part_s, /* (P, m_stride) */
    const float *__restrict__ part_o, /* (P, o_stride) */
    float *__restrict__ out,          /* (n_q_heads, dv) */
    int64_t partitions, int64_t dv, int64_t h, int64_t n_q_heads, int64_t slice,
    int64_t m_stride, int64_t o_stride, float *__restrict__ state_ms)
{
    static_assert(GEM_FR_BATCH % GEM_FR_LOADS == 0, "a batch of weights is whole load groups");
    __shared__ float w[GEM_FR_BATCH];  /* w_p of the batch */
    __shared__ float sw[GEM_FR_BATCH]; /* S_p w_p of the batch */
    __shared__ float red[GEM_CU_THREADS / 32];
    __shared__ float s_all;
    const int64_t d = slice * GEM_CU_THREADS + threadIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t mstride = m_stride ? m_stride : n_q_heads;
    /* O_p of this thread's element: po[p * pstride]; the first group's loads go out first */
    const float *po = part_o + h * dv + d;
    const int64_t pstride = o_stride ? o_stride : n_q_heads * dv;
    float op[GEM_FR_LOADS];
    gem_fr_load_group<FRESH>(op, po, pstride, partitions);
    /* M_p and S_p of partial p = threadIdx.x */
    float m0 = -INFINITY, s0 = 0.f;
    if (threadIdx.x < partitions) {
        m0 = gem_fr_load_ms<FRESH>(part_m + threadIdx.x * mstride + h);
        s0 = gem_fr_load_ms<FRESH>(part_s + threadIdx.x * mstride + h);
    }
    float mx = -INFINITY;
    if (s0 > 0.f)
        mx = fmaxf(mx, m0);
    for (int64_t p = threadIdx.x + GEM_CU_THREADS; p < partitions; p += GEM_CU_THREADS) {
        const float mp = gem_fr_load_ms<FRESH>(part_m + p * mstride + h),
                    sp = gem_fr_load_ms<FRESH>(part_s + p * mstride + h);
        if (sp > 0.f)
            mx = fmaxf(mx, mp);
    }
    for (int off = 16; off > 0; off >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    if (lane == 0)
        red[warp] = mx;
    __syncthreads();
    mx = red[0];
#pragma unroll
    for (int i = 1; i < GEM_CU_THREADS / 32; i++)
        mx = fmaxf(mx, red[i]);
    float o = 0.f, sa = 0.f;
    for (int64_t p0 = 0; p0 < partitions; p0 += GEM_FR_BATCH) {
        const int64_t nb = partitions - p0 < GEM_FR_BATCH ? partitions - p0 : GEM_FR_BATCH;
        if (threadIdx.x < nb) {
            float mp = m0, sp = s0; /* the first batch: partial threadIdx.x, loaded above */
            if (p0 > 0) {
                const int64_t r = (p0 + threadIdx.x) * mstride + h;
                mp = gem_fr_load_ms<FRESH>(part_m + r);
                sp = gem_fr_load_ms<FRESH>(part_s + r);
            }
            const float wp = sp > 0.f ? expf(mp - mx) : 0.f;
            w[threadIdx.x] = wp;
            sw[threadIdx.x] = sp * wp;
        }
        __syncthreads();
        if (warp == 0) {
            float t = 0.f;
            for (int64_t b = lane; b < nb; b += 32)
                t += sw[b];
            for (int off = 16; off > 0; off >>= 1)
                t += __shfl_xor_sync(0xffffffffu, t, off);
            sa += t; /* lane 0's sum is the one written */
        }
        for (int64_t b0 = 0; b0 < nb; b0 += GEM_FR_LOADS) {
            const int64_t g = p0 + b0; /* the group's first partial */
            if (g > 0)
                gem_fr_load_group<FRESH>(op, po + g * pstride, pstride, partitions - g);
#pragma unroll
            for (int u = 0; u < GEM_FR_LOADS; u++)
                if (b0 + u < nb)
                    o = fmaf(op[u], w[b0 + u], o);
        }
        __syncthreads(); /* w is rewritten by the next batch */
    }
    if (state_ms) { /* the state: O, and M and S once per head */
        out[h * dv + d] = o;
        if (slice == 0 && threadIdx.x == 0) {
            state_ms[h] = mx;
            state_ms[n_q_heads + h] = sa;
        }
        return;
    }
    if (threadIdx.x == 0)
        s_all = sa;
    __syncthreads();
    out[h * dv + d] = __fdiv_rn(o, s_all);
}

__device__ __forceinline__ void gem_fused_reducer_body(
    const float *__restrict__ part_m, /* (P, m_stride) */
    const float *__restrict__ part_s, /* (P, m_stride) */
    const float *__restrict__ part_o, /* (P, o_stride) */
    float *__restrict__ out,          /* (n_q_heads, dv) */
    int64_t partitions, int64_t dv = GEM_CU_D, bool trigger = false, int64_t m_stride = 0,
    int64_t o_stride = 0, float *__restrict__ state_ms = nullptr)
{
    /* launched as a programmatic dependent: wait until the first pass has completed and
     * its writes are visible */
    pdl_wait();
    if (trigger) /* the stream's next grid may launch now (it waits for this one itself) */
        pdl_trigger();
    gem_fused_reducer_core<false>(part_m, part_s, part_o, out, partitions, dv, blockIdx.x,
                                  gridDim.x, blockIdx.y, m_stride, o_stride, state_ms);
}

#endif /* GEM_ATTN_FUSED_BODY_CUH */
