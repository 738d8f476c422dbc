/*
 * Internal to the CUDA backend: the device code of the fused route's first pass at Gemma 4's
 * sliding-window shape, dk = dv = 256 with two query heads per KV head
 * (gem_fused_first_pass_d256_body), included by src/cuda/attn_fused.cu, which instantiates
 * the kernels the library ships; an experiment can include it to measure variants. The
 * partials have the layout of the D512 first passes, so the reducer is
 * gem_fused_reducer_body (attn_fused_body.cuh) with dv = 256.
 *
 * A sliding layer's cache holds at most `window` (1,024) rows, so the pass is shaped for short
 * row counts first: a block of eight warps reads each of its rows once, every warp keeps its
 * own exact online softmax over its rows (no barrier inside the loop), and the eight warp
 * states are merged once at the end in warp order.
 *
 * First pass: one 256-thread block per (sequence partition p, KV head g), partitions by
 * gem_partition_range (chunk = ceil(live / P)). The block steps through its rows 8 at a time
 * (the config's tile 8): warp w takes rows begin + w, begin + w + 8, ... Lane l owns the
 * pieces l and 32 + l of every row (elements 4l .. 4l+3 and 128 + 4l .. 128 + 4l + 3: one
 * warp-wide load instruction reads 512 contiguous bytes of F32 or 256 of BF16 / F16), of
 * both query heads' Q (registers) and O (registers: 2 heads x 8 elements).
 *   - loads: K and V pieces straight into registers, one row of the warp ahead, L1
 *     no-allocate, L2 evict-first (each byte is used once); the next row's K and V are issued
 *     right after this row's dots, so they are in flight through the softmax and the V
 *     update (16 warps per SM: 32 KiB of F32 rows in flight per SM);
 *   - dots: 2 partial dots per lane (fmaf in element order), one transposed step (lanes 0-15
 *     keep head 0, 16-31 head 1) and a butterfly over the 16 lanes of each half, so the
 *     sum of a head is bitwise the same in every lane of its half; two shuffles broadcast
 *     the two scores to every lane;
 *   - softmax, per head, in every lane alike: M' = max(M, s), alpha = e^(M - M'),
 *     w = e^(s - M'), S' = S alpha + w; O = O alpha (skipped when both alphas are 1, a
 *     warp-uniform branch: x * 1 = x), then O = fmaf(w, v, O);
 *   - end: each warp's (M, S, O) to shared memory; thread i merges element i of both heads
 *     over the non-empty warps in warp order: M = max M_w, w_w = e^(M_w - M),
 *     S = sum S_w w_w, O = sum O_w w_w (fmaf), and writes the partial, partition-major:
 *       part_m, part_s (P, n_q_heads); part_o (P, n_q_heads, 256)
 *     the layout of gem_attention_online_scratch_bytes.
 * No atomics, a fixed order everywhere: the result is bitwise reproducible.
 */
#ifndef GEM_ATTN_FUSED_D256_BODY_CUH
#define GEM_ATTN_FUSED_D256_BODY_CUH

#include <math.h>

#include "attn_fused_body.cuh" /* gem_kv_f32 / _bf16 / _f16, gem_dot4, the reducer */

#define GEM_D256_WARPS (GEM_CU_THREADS / 32)       /* warps per block: rows per block step */
#define GEM_D256_ROW_PIECES (GEM_CU_D256 / 4)      /* pieces of 4 elements per row: 64 */

/* The dot of one head's eight elements of a row, Q pieces q0, q1 with K pieces k0, k1: fmaf in
 * element order over pieces 0 and 1. */
__device__ __forceinline__ float gem_d256_dot8(float4 q0, float4 q1, float4 k0, float4 k1)
{
    float a = gem_dot4(q0, k0);
    a = fmaf(q1.x, k1.x, a);
    a = fmaf(q1.y, k1.y, a);
    a = fmaf(q1.z, k1.z, a);
    return fmaf(q1.w, k1.w, a);
}

/* acc = fmaf(w, v, acc), element by element */
__device__ __forceinline__ void gem_d256_axpy(float4 &acc, float w, float4 v)
{
    acc.x = fmaf(w, v.x, acc.x);
    acc.y = fmaf(w, v.y, acc.y);
    acc.z = fmaf(w, v.z, acc.z);
    acc.w = fmaf(w, v.w, acc.w);
}

/* acc = acc * a, element by element */
__device__ __forceinline__ void gem_d256_scale(float4 &acc, float a)
{
    acc.x *= a;
    acc.y *= a;
    acc.z *= a;
    acc.w *= a;
}

/* E: the element type of K and V (gem_kv_f32, gem_kv_bf16, gem_kv_f16). AHEAD: rows of the
 * warp whose loads are in flight ahead of the row it computes (1 ships: more measured slower,
 * dev/cuda/sliding_decode.cu's header). Strides count pieces of four elements; base pointers
 * and strides put every piece at a multiple of its size (16 bytes for F32, 8 for BF16 and
 * F16). */
template <typename E, int AHEAD = 1>
__device__ __forceinline__ void gem_fused_first_pass_d256_body(
    const float *__restrict__ q, /* (n_q_heads, 256) */
    const void *__restrict__ k,  /* row (g, t) at piece g*k_hs4 + t*k_ts4 (4 elements each) */
    int64_t k_hs4, int64_t k_ts4,
    const void *__restrict__ v,  /* row (g, t) at piece g*v_hs4 + t*v_ts4 */
    int64_t v_hs4, int64_t v_ts4,
    float *__restrict__ part_m, /* (P, n_q_heads) */
    float *__restrict__ part_s, /* (P, n_q_heads) */
    float *__restrict__ part_o, /* (P, n_q_heads, 256) */
    int64_t live, int64_t partitions, int64_t n_q_heads, float scale)
{
    typedef typename E::piece piece;
    const int A = AHEAD, G = GEM_CU_D256_GROUP, NW = GEM_D256_WARPS;
    /* the warps' states for the merge: O (8 warps, 2 heads, 256 elements), M, S */
    __shared__ __align__(16) float sacc[GEM_D256_WARPS][GEM_CU_D256_GROUP][GEM_CU_D256];
    __shared__ float sm[GEM_D256_WARPS][GEM_CU_D256_GROUP];
    __shared__ float ss[GEM_D256_WARPS][GEM_CU_D256_GROUP];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live);
    const int64_t end = min(begin + chunk, live);
    /* this warp's rows: begin + warp + NW i for i < nrows */
    const int64_t nrows = end - begin > warp ? (end - begin - warp + NW - 1) / NW : 0;

    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    /* this lane's first piece of the warp's next row to load; piece 1 is 32 pieces on */
    const piece *kp = reinterpret_cast<const piece *>(k) + g * k_hs4 + (begin + warp) * k_ts4 + lane;
    const piece *vp = reinterpret_cast<const piece *>(v) + g * v_hs4 + (begin + warp) * v_ts4 + lane;
    const int64_t kstep = NW * k_ts4, vstep = NW * v_ts4;

    /* Q of the two heads, this lane's pieces */
    float4 qr[GEM_CU_D256_GROUP][2];
    {
        const float4 *q4 = reinterpret_cast<const float4 *>(q) + g * G * GEM_D256_ROW_PIECES + lane;
#pragma unroll
        for (int h = 0; h < G; h++) {
            qr[h][0] = __ldg(q4 + h * GEM_D256_ROW_PIECES);
            qr[h][1] = __ldg(q4 + h * GEM_D256_ROW_PIECES + 32);
        }
    }
    /* the first A rows' pieces; kq[a], vq[a]: row i + a while row i is computed */
    piece kq[AHEAD][2], vq[AHEAD][2];
#pragma unroll
    for (int a = 0; a < A; a++) {
        const bool in = a < nrows;
        kq[a][0] = in ? E::load(kp, pol) : E::zero();
        kq[a][1] = in ? E::load(kp + 32, pol) : E::zero();
        vq[a][0] = in ? E::load(vp, pol) : E::zero();
        vq[a][1] = in ? E::load(vp + 32, pol) : E::zero();
        kp += kstep;
        vp += vstep;
    }

    float m[GEM_CU_D256_GROUP], s[GEM_CU_D256_GROUP];
    float4 o[GEM_CU_D256_GROUP][2];
#pragma unroll
    for (int h = 0; h < G; h++) {
        m[h] = -INFINITY;
        s[h] = 0.f;
        o[h][0] = o[h][1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }

    for (int64_t i = 0; i < nrows; i++) {
        /* the two heads' partial dots over this lane's eight elements */
        float d[GEM_CU_D256_GROUP];
        {
            const float4 k0 = E::f4(kq[0][0]), k1 = E::f4(kq[0][1]);
#pragma unroll
            for (int h = 0; h < G; h++)
                d[h] = gem_d256_dot8(qr[h][0], qr[h][1], k0, k1);
        }
        /* row i + A's pieces, in flight through this row's softmax and V update */
        piece kn[2], vn[2];
        {
            const bool in = i + A < nrows;
            kn[0] = in ? E::load(kp, pol) : E::zero();
            kn[1] = in ? E::load(kp + 32, pol) : E::zero();
            vn[0] = in ? E::load(vp, pol) : E::zero();
            vn[1] = in ? E::load(vp + 32, pol) : E::zero();
            kp += kstep;
            vp += vstep;
        }
        /* lanes 0-15 keep head 0, lanes 16-31 head 1, each adding its partner's; then the
         * butterfly within the half: every lane of a half holds the same sum */
        float r;
        {
            const bool upper = (lane & 16) != 0;
            const float send = upper ? d[0] : d[1];
            r = (upper ? d[1] : d[0]) + __shfl_xor_sync(0xffffffffu, send, 16);
#pragma unroll
            for (int off = 8; off > 0; off >>= 1)
                r += __shfl_xor_sync(0xffffffffu, r, off);
        }
        const float sc[GEM_CU_D256_GROUP] = {__shfl_sync(0xffffffffu, r, 0) * scale,
                                            __shfl_sync(0xffffffffu, r, 16) * scale};
        /* the online softmax of both heads, the same in every lane */
        float al[GEM_CU_D256_GROUP], w[GEM_CU_D256_GROUP];
#pragma unroll
        for (int h = 0; h < G; h++) {
            const float mn = fmaxf(m[h], sc[h]);
            al[h] = expf(m[h] - mn); /* m = -inf before the warp's first row: 0 */
            w[h] = expf(sc[h] - mn);
            s[h] = s[h] * al[h] + w[h];
            m[h] = mn;
        }
        if (al[0] != 1.f || al[1] != 1.f) { /* warp-uniform */
#pragma unroll
            for (int h = 0; h < G; h++) {
                gem_d256_scale(o[h][0], al[h]);
                gem_d256_scale(o[h][1], al[h]);
            }
        }
        {
            const float4 v0 = E::f4(vq[0][0]), v1 = E::f4(vq[0][1]);
#pragma unroll
            for (int h = 0; h < G; h++) {
                gem_d256_axpy(o[h][0], w[h], v0);
                gem_d256_axpy(o[h][1], w[h], v1);
            }
        }
        /* the pieces move down one row */
#pragma unroll
        for (int a = 0; a + 1 < A; a++) {
            kq[a][0] = kq[a + 1][0];
            kq[a][1] = kq[a + 1][1];
            vq[a][0] = vq[a + 1][0];
            vq[a][1] = vq[a + 1][1];
        }
        kq[A - 1][0] = kn[0];
        kq[A - 1][1] = kn[1];
        vq[A - 1][0] = vn[0];
        vq[A - 1][1] = vn[1];
    }

    /* the warps' states meet in shared memory */
#pragma unroll
    for (int h = 0; h < G; h++) {
        float4 *so = reinterpret_cast<float4 *>(&sacc[warp][h][0]);
        so[lane] = o[h][0];
        so[lane + 32] = o[h][1];
    }
    if (lane == 0) {
#pragma unroll
        for (int h = 0; h < G; h++) {
            sm[warp][h] = m[h];
            ss[warp][h] = s[h];
        }
    }
    __syncthreads();
    /* thread e merges element e of both heads over the warps that had rows, in warp order */
    const int e = threadIdx.x;
    const int64_t rows = end - begin;
    const int64_t row0 = p * n_q_heads + g * G;
#pragma unroll
    for (int h = 0; h < G; h++) {
        float mx = -INFINITY;
#pragma unroll
        for (int ww = 0; ww < NW; ww++)
            if (rows > ww)
                mx = fmaxf(mx, sm[ww][h]);
        float st = 0.f, ot = 0.f;
#pragma unroll
        for (int ww = 0; ww < NW; ww++) {
            if (rows > ww) {
                const float wt = expf(sm[ww][h] - mx);
                st = fmaf(ss[ww][h], wt, st);
                ot = fmaf(sacc[ww][h][e], wt, ot);
            }
        }
        part_o[(row0 + h) * GEM_CU_D256 + e] = ot;
        if (e == 0) {
            part_m[row0 + h] = mx;
            part_s[row0 + h] = st;
        }
    }
}

#endif /* GEM_ATTN_FUSED_D256_BODY_CUH */
