/*
 * The fused route for the head shapes the tuned kernels do not take: dk = dv = D with
 * D in {32, 64, 128, 256} and one to eight query heads per KV head, K and V of one
 * element type (F32, BF16 or F16), with the alignment of the other CUDA kernels (it would
 * take any element strides). It runs models whose attention
 * is small (the tiny synthetic Gemma 4 of the tests: sliding layers of 8 KV heads x 64
 * with four query heads each); Gemma 4 31B's shapes go to the tuned kernels
 * (attn_fused.cu: D512 with eight query heads; D256 with two).
 *
 * First pass (gem_general_first_pass): one 128-thread block per (partition p, KV head g),
 * rows of the partition by gem_partition_range. Warp w takes rows begin + w, begin + w + 4,
 * ...; lane l holds elements l, l + 32, ... (D / 32 of them) of the group's q rows and
 * output accumulators. Per row and head: the lane's dot in element order (fmaf), a butterfly
 * over the warp (the same sum in every lane), s = scale * dot, then the exact online
 * softmax step M' = max(M, s), a = e^(M - M'), w = e^(s - M'), S' = S a + w, O = O a + w v.
 * The four warps' states are merged in warp order through shared memory and written as the
 * partition's partial (m, s, o), the layout of gem_attention_online_scratch_bytes:
 *   part_m, part_s (P, n_q_heads); part_o (P, n_q_heads, D).
 * Reducer (gem_general_reducer): one 128-thread block per query head; every thread takes
 * M = max M_p over non-empty partials and S = sum S_p e^(M_p - M) in partition order (the
 * same sequence of operations in every thread), then its elements of O = sum O_p e^(M_p - M)
 * in partition order, out = O / S. No atomics and a fixed order: bitwise repeatable.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "gem_cuda_internal.h"

#define GEN_THREADS 128
#define GEN_WARPS (GEN_THREADS / 32)
#define GEN_MAX_DPL 8   /* elements per lane: D <= 256 */
#define GEN_MAX_GROUP 8 /* query heads per KV head */

/* Element i of a row of type t, as F32 (exact). */
__device__ __forceinline__ float gen_load(const void *row, int64_t i, int t)
{
    if (t == GEM_DTYPE_F32)
        return __ldg((const float *)row + i);
    const unsigned short b = __ldg((const unsigned short *)row + i);
    if (t == GEM_DTYPE_BF16)
        return __uint_as_float((unsigned)b << 16);
    return __half2float(__ushort_as_half(b));
}

extern "C" __global__ void __launch_bounds__(GEN_THREADS)
    gem_general_first_pass(const float *__restrict__ q, /* (n_q_heads, D) */
                           const void *__restrict__ k, int64_t k_hs, int64_t k_ts,
                           const void *__restrict__ v, int64_t v_hs, int64_t v_ts, int dtype,
                           int64_t live, int64_t d, int group, float scale,
                           float *__restrict__ part_m, float *__restrict__ part_s,
                           float *__restrict__ part_o)
{
    __shared__ float sh_m[GEN_WARPS][GEN_MAX_GROUP], sh_s[GEN_WARPS][GEN_MAX_GROUP];
    __shared__ float sh_o[GEN_WARPS][GEN_MAX_GROUP * GEN_MAX_DPL * 32];
    const int64_t p = blockIdx.x, P = gridDim.x, g = blockIdx.y, n_kv = gridDim.y;
    const int64_t n_q = n_kv * group;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int dpl = (int)(d / 32);
    const size_t es = dtype == GEM_DTYPE_F32 ? 4 : 2;
    /* rows [begin, end) of this partition: ceil(live / P) each, the last ones short or empty */
    const int64_t chunk = (live + P - 1) / P;
    const int64_t begin = p * chunk < live ? p * chunk : live;
    const int64_t end = begin + chunk < live ? begin + chunk : live;
    float qr[GEN_MAX_GROUP][GEN_MAX_DPL], o[GEN_MAX_GROUP][GEN_MAX_DPL];
    float m[GEN_MAX_GROUP], s[GEN_MAX_GROUP];
#pragma unroll
    for (int h = 0; h < GEN_MAX_GROUP; h++) {
        m[h] = -INFINITY;
        s[h] = 0.f;
#pragma unroll
        for (int j = 0; j < GEN_MAX_DPL; j++) {
            o[h][j] = 0.f;
            qr[h][j] = h < group && j < dpl ? q[(g * group + h) * d + lane + 32 * j] : 0.f;
        }
    }
    for (int64_t t = begin + warp; t < end; t += GEN_WARPS) {
        const char *kr = (const char *)k + (size_t)(g * k_hs + t * k_ts) * es;
        const char *vr = (const char *)v + (size_t)(g * v_hs + t * v_ts) * es;
        float kx[GEN_MAX_DPL], vx[GEN_MAX_DPL];
#pragma unroll
        for (int j = 0; j < GEN_MAX_DPL; j++) {
            kx[j] = j < dpl ? gen_load(kr, lane + 32 * j, dtype) : 0.f;
            vx[j] = j < dpl ? gen_load(vr, lane + 32 * j, dtype) : 0.f;
        }
#pragma unroll
        for (int h = 0; h < GEN_MAX_GROUP; h++) {
            if (h >= group)
                break;
            float dot = 0.f;
#pragma unroll
            for (int j = 0; j < GEN_MAX_DPL; j++)
                if (j < dpl)
                    dot = fmaf(qr[h][j], kx[j], dot);
#pragma unroll
            for (int off = 16; off > 0; off >>= 1)
                dot += __shfl_xor_sync(0xffffffffu, dot, off);
            const float sc = scale * dot;
            const float mn = fmaxf(m[h], sc);
            const float a = expf(m[h] - mn), w = expf(sc - mn);
            s[h] = fmaf(s[h], a, w);
            m[h] = mn;
#pragma unroll
            for (int j = 0; j < GEN_MAX_DPL; j++)
                o[h][j] = fmaf(w, vx[j], o[h][j] * a);
        }
    }
    /* the warps' states, merged in warp order */
#pragma unroll
    for (int h = 0; h < GEN_MAX_GROUP; h++) {
        if (h >= group)
            break;
        if (lane == 0) {
            sh_m[warp][h] = m[h];
            sh_s[warp][h] = s[h];
        }
#pragma unroll
        for (int j = 0; j < GEN_MAX_DPL; j++)
            if (j < dpl)
                sh_o[warp][h * GEN_MAX_DPL * 32 + j * 32 + lane] = o[h][j];
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < (int64_t)group * d; e += GEN_THREADS) {
        const int h = (int)(e / d);
        const int64_t i = e % d; /* element i: lane i % 32, slot i / 32 */
        float mx = -INFINITY;
        for (int w = 0; w < GEN_WARPS; w++)
            if (sh_s[w][h] > 0.f)
                mx = fmaxf(mx, sh_m[w][h]);
        float sa = 0.f, oa = 0.f;
        for (int w = 0; w < GEN_WARPS; w++) {
            const float sw = sh_s[w][h];
            const float ww = sw > 0.f ? expf(sh_m[w][h] - mx) : 0.f;
            sa = fmaf(sw, ww, sa);
            oa = fmaf(sh_o[w][h * GEN_MAX_DPL * 32 + (i / 32) * 32 + (i % 32)], ww, oa);
        }
        const int64_t hq = g * group + h;
        part_o[(p * n_q + hq) * d + i] = oa;
        if (i == 0) {
            part_m[p * n_q + hq] = mx;
            part_s[p * n_q + hq] = sa;
        }
    }
}

/* Partial p of head h: M, S at part_m / part_s[p * ms + h], O at part_o[p * os + h * d] (the
 * first pass's layout: ms = n_q, os = n_q * d; gem_decode_merge's states: both n_q * (d + 2)).
 * state_ms not NULL: out receives O undivided and state_ms[h], state_ms[n_q + h] M and S. */
extern "C" __global__ void __launch_bounds__(GEN_THREADS)
    gem_general_reducer(const float *__restrict__ part_m, const float *__restrict__ part_s,
                        const float *__restrict__ part_o, float *__restrict__ out,
                        int64_t partitions, int64_t d, int64_t ms, int64_t os,
                        float *__restrict__ state_ms)
{
    const int64_t h = blockIdx.x, n_q = gridDim.x;
    float mx = -INFINITY;
    for (int64_t p = 0; p < partitions; p++)
        if (part_s[p * ms + h] > 0.f)
            mx = fmaxf(mx, part_m[p * ms + h]);
    float sa = 0.f;
    for (int64_t p = 0; p < partitions; p++) {
        const float sp = part_s[p * ms + h];
        sa = fmaf(sp, sp > 0.f ? expf(part_m[p * ms + h] - mx) : 0.f, sa);
    }
    for (int64_t i = threadIdx.x; i < d; i += GEN_THREADS) {
        float oa = 0.f;
        for (int64_t p = 0; p < partitions; p++) {
            const float sp = part_s[p * ms + h];
            const float w = sp > 0.f ? expf(part_m[p * ms + h] - mx) : 0.f;
            oa = fmaf(part_o[p * os + h * d + i], w, oa);
        }
        out[h * d + i] = state_ms ? oa : oa / sa;
    }
    if (state_ms && threadIdx.x == 0) {
        state_ms[h] = mx;
        state_ms[n_q + h] = sa;
    }
}

int gem_cu_general_supports(const gem_decode_shape *s, gem_dtype kt, gem_dtype vt)
{
    if (kt != vt || (kt != GEM_DTYPE_F32 && kt != GEM_DTYPE_BF16 && kt != GEM_DTYPE_F16))
        return 0;
    if (s->dk != s->dv || (s->dk != 32 && s->dk != 64 && s->dk != 128 && s->dk != 256))
        return 0;
    if (s->n_kv_heads < 1 || s->n_q_heads % s->n_kv_heads != 0)
        return 0;
    const int64_t group = s->n_q_heads / s->n_kv_heads;
    return group >= 1 && group <= GEN_MAX_GROUP && s->n_kv_heads <= 65535;
}

int64_t gem_cu_general_partitions(int64_t live)
{
    /* about 64 rows per partition, at most 128 partitions: non-decreasing in live */
    int64_t p = (live + 63) / 64;
    return p < 1 ? 1 : p > 128 ? 128 : p;
}

gem_status gem_cu_general_launch(const gem_decode_shape *s, const float *q, const gem_kv_view *kv,
                                 float *out, float *state_ms, void *ws, int64_t partitions,
                                 cudaStream_t stream)
{
    const int64_t n_q = s->n_q_heads, d = s->dk;
    float *part_m = (float *)ws, *part_s = part_m + partitions * n_q,
          *part_o = part_s + partitions * n_q;
    const dim3 g1((unsigned)partitions, (unsigned)s->n_kv_heads);
    gem_general_first_pass<<<g1, GEN_THREADS, 0, stream>>>(
        q, kv->k, kv->k_head_stride, kv->k_token_stride, kv->v, kv->v_head_stride,
        kv->v_token_stride, (int)kv->k_dtype, kv->live, d, (int)(n_q / s->n_kv_heads), s->scale,
        part_m, part_s, part_o);
    gem_general_reducer<<<(unsigned)n_q, GEN_THREADS, 0, stream>>>(
        part_m, part_s, part_o, out, partitions, d, n_q, n_q * d, state_ms);
    return cudaGetLastError() == cudaSuccess ? GEM_OK : GEM_ERR_DEVICE;
}

gem_status gem_cu_general_merge(const float *states, int64_t n, int64_t n_q, int64_t d,
                                float *out, cudaStream_t stream)
{
    const int64_t ss = n_q * (d + 2);
    gem_general_reducer<<<(unsigned)n_q, GEN_THREADS, 0, stream>>>(
        states, states + n_q, states + 2 * n_q, out, n, d, ss, ss, nullptr);
    return cudaGetLastError() == cudaSuccess ? GEM_OK : GEM_ERR_DEVICE;
}
