/*
Kernels for the fused split-KV decode attention at the Gemma 4 full-attention shape:
32 query heads over 4 KV heads (8 per KV head), DK = DV = 512, F32 K/V.

Each version computes, for every query head h of KV head g:
  out[h] = softmax_t(scale * q[h] . k[g, t]) . v[g, t]       t < live
as a first pass over P sequence partitions, one block per (partition, KV head), writing an
exact online-softmax partial (M, S, O[512]) per head and partition, and a reducer that merges
the P partials in partition order. main() validates every version against a double-precision
CPU reference (NMSE <= 1e-10, every output written, bitwise repeats) before it times anything;
then it times the versions interleaved (A B ... B A) with CUDA events over rotating K/V copies,
the first event queued behind 50 us of GPU work so that the host's launches overlap the device
as in a decode loop (what is timed is the GPU's execution).

version 1 is the design's candidate: tiles of 4 tokens staged in 16 KiB of dynamic shared
memory by plain loads, warp w owns query head w (16 dims per lane), P = 32.
  H200 (results/h200/run2/bench-design.json): 0.749 ms at 64K, 1.485 ms at 128K (31% of read
  bandwidth). Versions 2-6 (cp.async staging, V then K+V per thread, direct register loads,
  bulk copies, four dims of all eight heads per thread, L2 evict-first) are in the receipts of
  results/h200/run2-run8 and in git history (src/cuda/attn_fused.cu before the decode API).
version 7 is run 8's best: four dims of all eight heads per thread, 16-byte loads straight
  into registers one tile ahead, L1 no-allocate / L2 evict-first, Q of the eight heads in
  shared memory so the next tile's V is issued after this tile's dots; tile 8, P = 64; the
  one-round reducer (64 partials' loads in flight).
  H200 (results/h200/run8/bench-last-s0v7-t8-r2.json): 0.2517 ms at 64K, 0.4854 ms at 128K,
  92.6% / 96.0% of the read bandwidth measured in the same run; 0.0446 ms at 8K.
version 8 was the first kernel of the decode API: version 7 read through a KV view with run-time
  strides (t * k_ts4 per row), half 1's O handed over in Q's shared memory, the reducer launched
  as a programmatic dependent of the first pass.
  H200 (results/h200/run9, dev-fused-decode.txt): 0.2812 ms at 64K, 0.5268 ms at 128K, 8.5%
  slower than 7; ncu: first pass 265 us against 245. In git history (commit 304497a).
version 9 is version 7 with only the programmatic dependent launch of its reducer (the
  control that separates the launch from the strides of version 8).
  H200 (run 9): 0.2529 / 0.4858 ms, 0.0462 ms at 8K (7: 0.2530 / 0.4848 / 0.0474).
version 10 is version 9 with a one-pass reducer: the maximum M of the P partials first, then
  O = sum_p O_p e^(M_p - M) and S = sum_p S_p e^(M_p - M) in partition order (one expf per
  partial and head, computed once per block, instead of two per merge step and dim).
  H200 (run 9): 0.2493 / 0.4819 ms, 0.0429 ms at 8K: 3.3-3.9 us faster than 9 at every length.
version 11 is version 10 with four dims per reducer thread (float4 loads of the partials),
  128-thread blocks, one per query head. H200 (run 9): 0.2522 / 0.4845 / 0.0457 ms: slower
  than 10 (fewer blocks in flight).
version 12 is the library's kernel, called through gem_decode on a head-major view (the tuned
  default config): version 8 with the row addresses stepped by pointer, the token stride of
  dense rows a compile-time constant (gem_fused_first_pass; other strides take
  gem_fused_first_pass_strided, the same code with the stride at run time), and version 10's
  reducer; since run 14 with version 18's choices.
  H200 (results/h200/run10): 0.2567 / 0.4977 ms, 0.0453 ms at 8K: no faster than 7, because
  the reducer's S was summed by one thread from global memory (ncu: reducer 8.8-9.3 us); run 11
  measures the fix (S from shared memory in a fixed-order warp sum, the first tile's K/V loads
  issued before Q), see results/h200/NOTES.md.
versions 14-19 took the library's own device code (src/cuda/attn_fused_body.cuh) apart to find
  why 12 was slower than 10 (run 11: 0.2575 / 0.4974 / 0.0458 ms against 0.2519 / 0.4906 /
  0.0416): 14 the library's first pass without the early trigger of the reducer's launch, 15
  the library's first pass with version 10's reducer, 16 version 7's first pass with the
  library's reducer, 17 14 with half 1's O handed over in shared memory of its own, 18 14 with
  the first tile's K/V loaded after Q, 19 both. H200 (results/h200/run12, run13): the early
  trigger cost 2-3.5 us, the library's reducer nothing, 17-19 within 1 us of each other and
  of 16 (18: 0.2526 / 0.4925 / 0.0422 against 16's 0.2522 / 0.4905 / 0.0421). The library took
  18 (no early trigger, K/V after Q, O in Q's space). Their code is in git history (fa2687a).
version 13 is the library through gem_decode on a token-major view (rows of the four heads of a
  token back to back): gem_fused_first_pass_strided. H200 (run 10): 0.2611 / 0.5028 / 0.0455 ms,
  1-2% slower than 12 at 64K and 128K.

version 20 is the library's first pass (gem_fused_first_pass_body instantiated here for dense
  rows) with the library's reducer (gem_fused_reducer_body), which issues the O loads of 64
  partials at once, the first group before it loads M and S: one round trip to the L2 for the
  whole merge at P 64.
version 21 is version 20 with the reducer the library had before (reducer_by8 below: the same
  arithmetic in the same order, O loaded 8 partials at a time, eight round trips at P 64), the
  control that isolates the reducer. 12, 20 and 21 must give the same bits.
  H200 (results/h200/run53): 20 beat 21 by 0.8-1.2 us (8K 0.0401 against 0.0410 ms, 64K 0.2503
  against 0.2511, 128K 0.4938 against 0.4950), the same bits as 12.
version 22 is version 20 with a timeline: each block of both kernels writes the GPU's global
  timer (%globaltimer, ns) when it starts and when it ends (a barrier after the library's body),
  and the program reports, per length, the medians over its rounds of: the spread of the first
  pass's block starts, its block durations (median, max), the spread of their ends, the gap to
  the reducer's first block, the reducer's span, the whole span, and the event time beside it.
  H200 (results/h200/run54, run57): the blocks start within 0.1 us and end 7 / 45 / 80 us apart
  at 8K / 64K / 128K; the last one 2.4 / 11.4 / 20.3 us after the median one (31.8 / 232.9 /
  461.9 us); the reducer starts 0.5 us after it and runs 2.3; the events add 2.9.
version 23 is version 22 with BF16 K and V: the library's tensor-core first pass
  (gem_fused_first_pass_mma_staged_body since run 79, gem_fused_first_pass_mma_body before,
  dense rows) stamped the same way. Asking for it rounds every
  version's K and V to BF16 values (the F32 versions read them exactly), and the reference is
  computed on the rounded values.
  H200 (results/h200/run57): block median 18.9 / 131.7 / 260.9 us at 8K / 64K / 128K, the last
  2.0 / 4.6 / 6.4 us later: the BF16 pass is held by its steady rate (4.12 TB/s at 128K), not
  by its tail.

version 24 is version 20 with both kernels programmatic dependents of the kernel before them:
  the first pass is launched with the attribute and waits (griddepcontrol.wait) before it reads
  anything, the reducer lets the next kernel launch once its own wait returns
  (griddepcontrol.launch_dependents). A call that follows another call's reducer then launches
  while that reducer runs. Versions 25, 26 and 27 are version 24 whose first pass first asks
  the L2 for its first 2, 4 and 1 tiles of K and V rows (prefetch.global.L2, 128 bytes a
  request, before the wait: a prefetch reads nothing into a register, so the previous kernel
  may still be writing those rows). 27's prefetch is the library's prologue since run 75.
  Timed two ways: one call behind 50 us of GPU work and an event (as the others), and --calls 8:
  eight calls back to back between the events, each on the next K/V copy, the time over 8.
  H200 (results/h200/run72-run74), the same bits as 20 everywhere:
    --calls 8, 8K: 20 0.0389-0.0393 ms, 24 0.0384-0.0385, 25 0.0370-0.0375, 26 0.0386,
      27 0.0372; 64K / 128K: 25 and 27 0.5-1.7% faster than 20 (20's spread wide in two of
      three runs: 0.2486-0.2590 at 64K);
    one call, 8K: 20 0.0388-0.0392, 24 0.0400-0.0402, 25 0.0400-0.0406, 27 0.0400: a call that
      follows an event record, not a kernel, pays about 1 us for the programmatic launch;
      64K / 128K one call: 25 0.2485 / 0.4869 against 20's 0.2506 / 0.4899.
  The sustained read is not the cause of 20's wide spread: the streaming probe read 4,511 GB/s
  over 4 GiB and 4,526 over 16 GiB (3.8 ms) in run 73, the SM clock at 1,980 MHz throughout.

./fused_decode            validates, then times versions 1, 7, 9 .. 13 at 8K, 64K, 128K
./fused_decode 12 13      only those versions
./fused_decode --lengths 8192 --rounds 20 9 12
./fused_decode --calls 8 --copies 2 20 27   eight calls a sample, at least two K/V copies
./fused_decode --resources-v1 FILE   writes version 1's gem.resources.v1 receipt (the design
                                      candidate's kernels with the library's baseline kernels)
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>
#include <dirent.h>
#include <limits.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

extern "C" {
#include "gem/check.h"
#include "gem/cuda.h"
#include "gem/decode.h"
#include "gem/receipt.h"
}

#include "attn_fused_body.cuh"

#define D 512
#define GROUP 8
#define NKV 4
#define NQ (NKV * GROUP)
#define THREADS 256
#define ROW_F4 (D / 4)

#define cudaCheck(call)                                                                        \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "[CUDA ERROR] at %s:%d: %s: %s\n", __FILE__, __LINE__, #call,       \
                    cudaGetErrorString(e_));                                                   \
            exit(EXIT_FAILURE);                                                                \
        }                                                                                      \
    } while (0)

/* ---- CPU reference ---------------------------------------------------------------------- */

/* out (NQ, D) doubles; q (NQ, D), k, v (NKV, live, D). */
static void attention_cpu(double *out, const float *q, const float *k, const float *v,
                          int64_t live, float scale)
{
    double *w = (double *)malloc((size_t)live * sizeof(double));
    for (int h = 0; h < NQ; h++) {
        const int g = h / GROUP;
        double mx = -INFINITY;
        for (int64_t t = 0; t < live; t++) {
            double a = 0;
            for (int i = 0; i < D; i++)
                a += (double)q[h * D + i] * (double)k[((size_t)g * live + t) * D + i];
            w[t] = a * scale;
            mx = w[t] > mx ? w[t] : mx;
        }
        double sum = 0;
        for (int64_t t = 0; t < live; t++) {
            w[t] = exp(w[t] - mx);
            sum += w[t];
        }
        for (int i = 0; i < D; i++) {
            double a = 0;
            for (int64_t t = 0; t < live; t++)
                a += w[t] * (double)v[((size_t)g * live + t) * D + i];
            out[h * D + i] = a / sum;
        }
    }
    free(w);
}

/* ---- shared pieces -------------------------------------------------------------------- */

template <int W, int O> __device__ __forceinline__ void xpose_step(float *v, int lane)
{
    const int upper = (lane & O) != 0;
#pragma unroll
    for (int i = 0; i < W; i++) {
        const float send = upper ? v[i] : v[i + W];
        const float keep = upper ? v[i + W] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
    }
}

template <int W, int O> __device__ __forceinline__ void xpose_keep_low(float *v)
{
#pragma unroll
    for (int i = 0; i < W; i++)
        v[i] += __shfl_xor_sync(0xffffffffu, v[i + W], O);
}

__device__ __forceinline__ float dot4(float4 a, float4 b)
{
    return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, a.x * b.x)));
}

__device__ __forceinline__ float4 ld_evict_first(const float4 *p, uint64_t pol)
{
    float4 r;
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
                 : "l"(p), "l"(pol)
                 : "memory");
    return r;
}

/* ---- version 1: the design's candidate -------------------------------------------------- */

extern "C" __global__ void __launch_bounds__(THREADS, 2)
    gem_fused_first_pass_t4_s1_v0(const float *__restrict__ q, /* (NQ, D) */
                                  const float *__restrict__ k, /* (NKV, live, D) */
                                  const float *__restrict__ v, /* (NKV, live, D) */
                                  float *__restrict__ part_m, float *__restrict__ part_s,
                                  float *__restrict__ part_o, int64_t live, int64_t partitions,
                                  float scale)
{
    const int TILE = 4;
    extern __shared__ float4 tile_smem[]; /* (2, TILE, 128) float4: K rows, then V rows */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t p = blockIdx.x, g = blockIdx.y, n_q = (int64_t)gridDim.y * GROUP;
    const int64_t head = g * GROUP + warp;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const float4 *kg = reinterpret_cast<const float4 *>(k) + g * live * ROW_F4;
    const float4 *vg = reinterpret_cast<const float4 *>(v) + g * live * ROW_F4;
    const float4 *q4 = reinterpret_cast<const float4 *>(q) + head * ROW_F4;
    float4 qr[4], o[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        qr[j] = __ldg(q4 + j * 32 + lane);
        o[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float m = -INFINITY, s = 0.f;
    for (int64_t t0 = begin; t0 < end; t0 += TILE) {
        const int n = (int)min((int64_t)TILE, end - t0);
        __syncthreads(); /* every warp is done with the previous tile */
        const int per = TILE * ROW_F4 / THREADS;
#pragma unroll
        for (int u = 0; u < per; u++) {
            const int i = threadIdx.x + u * THREADS, row = i / ROW_F4, col = i % ROW_F4;
            const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
            tile_smem[i] = row < n ? __ldg(kg + (t0 + row) * ROW_F4 + col) : zero;
            tile_smem[TILE * ROW_F4 + i] = row < n ? __ldg(vg + (t0 + row) * ROW_F4 + col) : zero;
        }
        __syncthreads();
        float sc[TILE];
#pragma unroll
        for (int t = 0; t < TILE; t++) {
            float a = 0.f;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float4 kk = tile_smem[t * ROW_F4 + j * 32 + lane];
                a = fmaf(qr[j].x, kk.x, a);
                a = fmaf(qr[j].y, kk.y, a);
                a = fmaf(qr[j].z, kk.z, a);
                a = fmaf(qr[j].w, kk.w, a);
            }
            sc[t] = a;
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
#pragma unroll
            for (int t = 0; t < TILE; t++)
                sc[t] += __shfl_xor_sync(0xffffffffu, sc[t], off);
        float mn = m;
#pragma unroll
        for (int t = 0; t < TILE; t++) {
            sc[t] = t < n ? sc[t] * scale : -INFINITY;
            mn = fmaxf(mn, sc[t]);
        }
        const float alpha = expf(m - mn);
        float psum = 0.f;
#pragma unroll
        for (int t = 0; t < TILE; t++) {
            sc[t] = expf(sc[t] - mn);
            psum += sc[t];
        }
        s = s * alpha + psum;
        m = mn;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            o[j].x *= alpha;
            o[j].y *= alpha;
            o[j].z *= alpha;
            o[j].w *= alpha;
        }
#pragma unroll
        for (int t = 0; t < TILE; t++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float4 vv = tile_smem[TILE * ROW_F4 + t * ROW_F4 + j * 32 + lane];
                o[j].x = fmaf(sc[t], vv.x, o[j].x);
                o[j].y = fmaf(sc[t], vv.y, o[j].y);
                o[j].z = fmaf(sc[t], vv.z, o[j].z);
                o[j].w = fmaf(sc[t], vv.w, o[j].w);
            }
    }
    const int64_t row = p * n_q + head;
    if (lane == 0) {
        part_m[row] = m;
        part_s[row] = s;
    }
    float4 *po = reinterpret_cast<float4 *>(part_o) + row * ROW_F4;
#pragma unroll
    for (int j = 0; j < 4; j++)
        po[j * 32 + lane] = o[j];
}

/* Version 1's reducer: thread i merges dim 256*half + i over the P partials in order,
 * 16 partials' loads ahead of the merge chain. */
extern "C" __global__ void __launch_bounds__(THREADS)
    gem_fused_reducer_v1(const float *__restrict__ part_m, const float *__restrict__ part_s,
                         const float *__restrict__ part_o, float *__restrict__ out,
                         int64_t partitions)
{
    const int64_t h = blockIdx.x, n_q = gridDim.x;
    const int64_t d = (int64_t)blockIdx.y * THREADS + threadIdx.x;
    float m = -INFINITY, s = 0.f, o = 0.f;
    const int B = 16;
    for (int64_t p0 = 0; p0 < partitions; p0 += B) {
        float mp[B], spv[B], op[B];
#pragma unroll
        for (int b = 0; b < B; b++) {
            const int64_t p = p0 + b;
            const int ok = p < partitions;
            const int64_t r = ok ? p * n_q + h : 0;
            mp[b] = ok ? __ldg(part_m + r) : -INFINITY;
            spv[b] = ok ? __ldg(part_s + r) : 0.f;
            op[b] = ok ? __ldg(part_o + r * D + d) : 0.f;
        }
#pragma unroll
        for (int b = 0; b < B; b++) {
            if (spv[b] == 0.f)
                continue;
            if (s == 0.f) {
                m = mp[b];
                s = spv[b];
                o = op[b];
                continue;
            }
            const float mm = m > mp[b] ? m : mp[b];
            const float ea = expf(m - mm), eb = expf(mp[b] - mm);
            o = __fadd_rn(__fmul_rn(o, ea), __fmul_rn(op[b], eb));
            s = __fadd_rn(__fmul_rn(s, ea), __fmul_rn(spv[b], eb));
            m = mm;
        }
    }
    out[h * D + d] = __fdiv_rn(o, s);
}

/* ---- version 7: run 8's best (dense cache) ------------------------------------------------ */

extern "C" __global__ void __launch_bounds__(THREADS, 2)
    gem_fused_first_pass_v7(const float *__restrict__ q, const float *__restrict__ k,
                            const float *__restrict__ v, float *__restrict__ part_m,
                            float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,
                            int64_t partitions, float scale)
{
    const int TILE = 8, TH = 4, HT = THREADS / 2;
    __shared__ __align__(16) float sp[GROUP][TILE];
    __shared__ __align__(16) float salpha[GROUP];
    __shared__ float sred[THREADS / 32][32];
    __shared__ __align__(16) float4 xo[GROUP * HT];
    __shared__ __align__(16) float4 sq[GROUP * HT];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int hf = tid / HT, d4 = tid % HT;
    const int64_t p = blockIdx.x, g = blockIdx.y, n_q = (int64_t)gridDim.y * GROUP;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + TILE - 1) / TILE;
    const float4 *kg = reinterpret_cast<const float4 *>(k) + g * live * ROW_F4 + d4;
    const float4 *vg = reinterpret_cast<const float4 *>(v) + g * live * ROW_F4 + d4;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    const int hx = (lane >> 2) & 7;
    float4 o[GROUP];
    const float4 *q4 = reinterpret_cast<const float4 *>(q) + g * GROUP * ROW_F4 + d4;
#pragma unroll
    for (int h = 0; h < GROUP; h++) {
        if (hf == 0)
            sq[h * HT + d4] = __ldg(q4 + h * ROW_F4);
        o[h] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    __syncthreads();
    float m = -INFINITY, s = 0.f;
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    float4 kc[4], vc[4];
#pragma unroll
    for (int j = 0; j < TH; j++) {
        const int64_t t = begin + hf * TH + j;
        kc[j] = t < end ? ld_evict_first(kg + t * ROW_F4, pol) : zero;
        vc[j] = t < end ? ld_evict_first(vg + t * ROW_F4, pol) : zero;
    }
    for (int64_t i = 0; i < ntiles; i++) {
        const int64_t t0 = begin + i * TILE;
        const int n = (int)min((int64_t)TILE, end - t0);
        float part[32];
#pragma unroll
        for (int h = 0; h < GROUP; h++) {
            const float4 qh = sq[(h ^ hx) * HT + d4];
#pragma unroll
            for (int j = 0; j < TH; j++)
                part[h * 4 + j] = dot4(qh, kc[j]);
        }
        xpose_keep_low<16, 16>(part);
        xpose_keep_low<8, 8>(part);
        xpose_keep_low<4, 4>(part);
        xpose_step<2, 2>(part, lane);
        xpose_step<1, 1>(part, lane);
        float4 vn[4];
#pragma unroll
        for (int j = 0; j < TH; j++) {
            const int64_t t = t0 + TILE + hf * TH + j;
            kc[j] = t < end ? ld_evict_first(kg + t * ROW_F4, pol) : zero;
        }
#pragma unroll
        for (int j = 0; j < TH; j++) {
            const int64_t t = t0 + TILE + hf * TH + j;
            vn[j] = t < end ? ld_evict_first(vg + t * ROW_F4, pol) : zero;
        }
        sred[warp][lane] = part[0];
        __syncthreads();
        {
            const int t = lane & (TILE - 1), th = t / TH, tt = t % TH;
            float a = 0.f;
#pragma unroll
            for (int w = 0; w < 4; w++)
                a += sred[th * 4 + w][warp * 4 + tt];
            const float sc = t < n ? a * scale : -INFINITY;
            float mx = sc;
#pragma unroll
            for (int off = TILE / 2; off > 0; off >>= 1)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float mn = fmaxf(m, mx);
            const float e = expf(sc - mn), alpha = expf(m - mn);
            float ps = e;
#pragma unroll
            for (int off = TILE / 2; off > 0; off >>= 1)
                ps += __shfl_xor_sync(0xffffffffu, ps, off);
            s = s * alpha + ps;
            m = mn;
            if (lane < TILE)
                sp[warp][lane] = e;
            if (lane == 0)
                salpha[warp] = alpha;
        }
        __syncthreads();
        {
            const float4 al0 = *reinterpret_cast<const float4 *>(&salpha[0]);
            const float4 al1 = *reinterpret_cast<const float4 *>(&salpha[4]);
            const float al[GROUP] = {al0.x, al0.y, al0.z, al0.w, al1.x, al1.y, al1.z, al1.w};
#pragma unroll
            for (int h = 0; h < GROUP; h++) {
                o[h].x *= al[h];
                o[h].y *= al[h];
                o[h].z *= al[h];
                o[h].w *= al[h];
            }
        }
#pragma unroll
        for (int h = 0; h < GROUP; h++) {
            const float4 w = *reinterpret_cast<const float4 *>(&sp[h][hf * TH]);
            const float wj[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int j = 0; j < TH; j++) {
                o[h].x = fmaf(wj[j], vc[j].x, o[h].x);
                o[h].y = fmaf(wj[j], vc[j].y, o[h].y);
                o[h].z = fmaf(wj[j], vc[j].z, o[h].z);
                o[h].w = fmaf(wj[j], vc[j].w, o[h].w);
            }
        }
#pragma unroll
        for (int j = 0; j < TH; j++)
            vc[j] = vn[j];
    }
    if (hf == 1)
#pragma unroll
        for (int h = 0; h < GROUP; h++)
            xo[h * HT + d4] = o[h];
    __syncthreads();
    const int64_t row0 = p * n_q + g * GROUP;
    if (hf == 0)
#pragma unroll
        for (int h = 0; h < GROUP; h++) {
            const float4 b = xo[h * HT + d4];
            reinterpret_cast<float4 *>(part_o)[(row0 + h) * ROW_F4 + d4] =
                make_float4(o[h].x + b.x, o[h].y + b.y, o[h].z + b.z, o[h].w + b.w);
        }
    if (lane == 0) {
        part_m[row0 + warp] = m;
        part_s[row0 + warp] = s;
    }
}

/* Version 7's one-round reducer (64 partials' loads in flight); WAIT 1 makes it wait for the
 * first pass as a programmatic dependent (version 9). */
template <int WAIT>
__global__ void __launch_bounds__(THREADS)
    reducer_wide(const float *__restrict__ part_m, const float *__restrict__ part_s,
                 const float *__restrict__ part_o, float *__restrict__ out, int64_t partitions)
{
    const int BATCH = 64;
    __shared__ float sm[BATCH], ss[BATCH];
    if (WAIT)
        asm volatile("griddepcontrol.wait;\n" ::: "memory");
    const int64_t h = blockIdx.x, n_q = gridDim.x;
    const int64_t d = (int64_t)blockIdx.y * THREADS + threadIdx.x;
    float m = -INFINITY, s = 0.f, o = 0.f;
    for (int64_t p0 = 0; p0 < partitions; p0 += BATCH) {
        float op[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; b++) {
            const int64_t p = p0 + b;
            op[b] = p < partitions ? __ldg(part_o + (p * n_q + h) * D + d) : 0.f;
        }
        if (threadIdx.x < BATCH) {
            const int64_t p = p0 + threadIdx.x;
            const int ok = p < partitions;
            sm[threadIdx.x] = ok ? __ldg(part_m + p * n_q + h) : -INFINITY;
            ss[threadIdx.x] = ok ? __ldg(part_s + p * n_q + h) : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int b = 0; b < BATCH; b++) {
            const float mb = sm[b], sb = ss[b];
            if (sb == 0.f)
                continue;
            if (s == 0.f) {
                m = mb;
                s = sb;
                o = op[b];
                continue;
            }
            const float mm = m > mb ? m : mb;
            const float ea = expf(m - mm), eb = expf(mb - mm);
            o = __fadd_rn(__fmul_rn(o, ea), __fmul_rn(op[b], eb));
            s = __fadd_rn(__fmul_rn(s, ea), __fmul_rn(sb, eb));
            m = mm;
        }
        __syncthreads();
    }
    out[h * D + d] = __fdiv_rn(o, s);
}

/* Version 10's reducer: M = max_p M_p over the non-empty partials, one weight e^(M_p - M)
 * per partial computed once by the block, then O and S as weighted sums in partition order
 * (fmaf), out = O / S. At most 1024 partitions (shared weights). */
__global__ void __launch_bounds__(THREADS)
    reducer_scaled(const float *__restrict__ part_m, const float *__restrict__ part_s,
                   const float *__restrict__ part_o, float *__restrict__ out, int64_t partitions)
{
    __shared__ float w[1024];
    __shared__ float red[THREADS / 32];
    __shared__ float s_all;
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    const int64_t h = blockIdx.x, n_q = gridDim.x;
    const int64_t d = (int64_t)blockIdx.y * THREADS + threadIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float mx = -INFINITY;
    for (int64_t p = threadIdx.x; p < partitions; p += THREADS)
        if (part_s[p * n_q + h] > 0.f)
            mx = fmaxf(mx, part_m[p * n_q + h]);
    for (int off = 16; off > 0; off >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    if (lane == 0)
        red[warp] = mx;
    __syncthreads();
    mx = red[0];
#pragma unroll
    for (int i = 1; i < THREADS / 32; i++)
        mx = fmaxf(mx, red[i]);
    for (int64_t p = threadIdx.x; p < partitions; p += THREADS) {
        const float sp = part_s[p * n_q + h];
        w[p] = sp > 0.f ? expf(part_m[p * n_q + h] - mx) : 0.f;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float sa = 0.f;
        for (int64_t p = 0; p < partitions; p++)
            sa = fmaf(part_s[p * n_q + h], w[p], sa);
        s_all = sa;
    }
    float o = 0.f;
    int64_t p = 0;
    for (; p + 8 <= partitions; p += 8) {
        float op[8];
#pragma unroll
        for (int b = 0; b < 8; b++)
            op[b] = __ldg(part_o + ((p + b) * n_q + h) * D + d);
#pragma unroll
        for (int b = 0; b < 8; b++)
            o = fmaf(op[b], w[p + b], o);
    }
    for (; p < partitions; p++)
        o = fmaf(__ldg(part_o + (p * n_q + h) * D + d), w[p], o);
    __syncthreads();
    out[h * D + d] = __fdiv_rn(o, s_all);
}

/* Version 11's reducer: version 10's arithmetic with each thread owning four dims (float4
 * loads of the partials, four times the bytes per load in flight), 128 threads per block
 * (512 dims), one block per query head. */
__global__ void __launch_bounds__(128)
    reducer_scaled4(const float *__restrict__ part_m, const float *__restrict__ part_s,
                    const float *__restrict__ part_o, float *__restrict__ out, int64_t partitions)
{
    __shared__ float w[1024];
    __shared__ float red[4];
    __shared__ float s_all;
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    const int64_t h = blockIdx.x, n_q = gridDim.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float mx = -INFINITY;
    for (int64_t p = threadIdx.x; p < partitions; p += 128)
        if (part_s[p * n_q + h] > 0.f)
            mx = fmaxf(mx, part_m[p * n_q + h]);
    for (int off = 16; off > 0; off >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    if (lane == 0)
        red[warp] = mx;
    __syncthreads();
    mx = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
    for (int64_t p = threadIdx.x; p < partitions; p += 128) {
        const float sp = part_s[p * n_q + h];
        w[p] = sp > 0.f ? expf(part_m[p * n_q + h] - mx) : 0.f;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float sa = 0.f;
        for (int64_t p = 0; p < partitions; p++)
            sa = fmaf(part_s[p * n_q + h], w[p], sa);
        s_all = sa;
    }
    const float4 *po = reinterpret_cast<const float4 *>(part_o) + h * ROW_F4 + threadIdx.x;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
    int64_t p = 0;
    for (; p + 8 <= partitions; p += 8) {
        float4 op[8];
#pragma unroll
        for (int b = 0; b < 8; b++)
            op[b] = __ldg(po + (p + b) * n_q * ROW_F4);
#pragma unroll
        for (int b = 0; b < 8; b++) {
            const float wb = w[p + b];
            o.x = fmaf(op[b].x, wb, o.x);
            o.y = fmaf(op[b].y, wb, o.y);
            o.z = fmaf(op[b].z, wb, o.z);
            o.w = fmaf(op[b].w, wb, o.w);
        }
    }
    for (; p < partitions; p++) {
        const float4 op = __ldg(po + p * n_q * ROW_F4);
        const float wb = w[p];
        o.x = fmaf(op.x, wb, o.x);
        o.y = fmaf(op.y, wb, o.y);
        o.z = fmaf(op.z, wb, o.z);
        o.w = fmaf(op.w, wb, o.w);
    }
    __syncthreads();
    const float sa = s_all;
    reinterpret_cast<float4 *>(out)[h * ROW_F4 + threadIdx.x] =
        make_float4(__fdiv_rn(o.x, sa), __fdiv_rn(o.y, sa), __fdiv_rn(o.z, sa), __fdiv_rn(o.w, sa));
}

/* ---- versions 20 and 21: the library's first pass, two reducers ----------------------------- */

/* The library's first pass for dense rows (attn_fused.cu's gem_fused_first_pass), instantiated
 * from the library's own device code. */
extern "C" __global__ void __launch_bounds__(THREADS, 2)
    lib_first_pass(const float *__restrict__ q, const float *__restrict__ k,
                   const float *__restrict__ v, float *__restrict__ part_m,
                   float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,
                   int64_t partitions, float scale)
{
    gem_fused_first_pass_body<gem_kv_f32, ROW_F4, false>(
        q, k, live * ROW_F4, ROW_F4, v, live * ROW_F4, ROW_F4, part_m, part_s, part_o, live,
        partitions, NQ, scale, nullptr, nullptr);
}

/* Version 20's reducer: the library's. */
extern "C" __global__ void __launch_bounds__(THREADS)
    lib_reducer(const float *__restrict__ part_m, const float *__restrict__ part_s,
                const float *__restrict__ part_o, float *__restrict__ out, int64_t partitions)
{
    gem_fused_reducer_body(part_m, part_s, part_o, out, partitions);
}

/* The first pf_tiles tiles of the block's K and V rows into the L2, 128 bytes a request,
 * spread over the block's threads (versions 25 and 26). */
__device__ __forceinline__ void prefetch_tiles(const float *k, const float *v, int64_t live,
                                               int64_t partitions, int pf_tiles)
{
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t rows = min(end - begin, (int64_t)pf_tiles * GEM_FP_TILE);
    const int lines = D * 4 / 128;
    const int64_t per = rows * lines;
    for (int64_t i = threadIdx.x; i < 2 * per; i += blockDim.x) {
        const bool is_v = i >= per;
        const int64_t j = is_v ? i - per : i, t = begin + j / lines;
        const char *row = reinterpret_cast<const char *>((is_v ? v : k) + (g * live + t) * D);
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + (j % lines) * 128));
    }
}

/* Versions 24-27: version 20's first pass launched as a programmatic dependent of the stream's
 * previous kernel; it waits for that kernel before it reads anything, after asking the L2 for
 * its first pf_tiles tiles of K and V (0 for version 24, 2, 4, 1 for 25, 26, 27); their reducer
 * lets the stream's next kernel launch as soon as its own wait returns. */
__global__ void __launch_bounds__(THREADS, 2)
    pdl_first_pass(const float *__restrict__ q, const float *__restrict__ k,
                   const float *__restrict__ v, float *__restrict__ part_m,
                   float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,
                   int64_t partitions, float scale, int pf_tiles)
{
    const int64_t hs = live * D * 4, ts = D * 4;
    if (pf_tiles == 1) /* the library's prologue (one request per thread) */
        gem_fp_prefetch_l2<D * 4, GEM_FP_TILE>(k, hs, ts, v, hs, ts, live, partitions);
    else if (pf_tiles > 1)
        prefetch_tiles(k, v, live, partitions, pf_tiles);
    pdl_wait();
    gem_fused_first_pass_body<gem_kv_f32, ROW_F4, false>(
        q, k, live * ROW_F4, ROW_F4, v, live * ROW_F4, ROW_F4, part_m, part_s, part_o, live,
        partitions, NQ, scale, nullptr, nullptr);
}

extern "C" __global__ void __launch_bounds__(THREADS)
    trigger_reducer(const float *__restrict__ part_m, const float *__restrict__ part_s,
                    const float *__restrict__ part_o, float *__restrict__ out, int64_t partitions)
{
    gem_fused_reducer_body(part_m, part_s, part_o, out, partitions, D, true);
}

/* Version 21's reducer: the library's before version 20, O loaded 8 partials at a time (a
 * round trip to the L2 per 8 partials); otherwise the same arithmetic in the same order. */
extern "C" __global__ void __launch_bounds__(THREADS)
    reducer_by8(const float *__restrict__ part_m, /* (P, n_q_heads) */
                const float *__restrict__ part_s, /* (P, n_q_heads) */
                const float *__restrict__ part_o, /* (P, n_q_heads, dv) */
                float *__restrict__ out,          /* (n_q_heads, dv) */
                int64_t partitions)
{
    __shared__ float w[GEM_FR_BATCH];  /* w_p of the batch */
    __shared__ float sw[GEM_FR_BATCH]; /* S_p w_p of the batch */
    __shared__ float red[GEM_CU_THREADS / 32];
    __shared__ float s_all;
    /* launched as a programmatic dependent: wait until the first pass has completed and
     * its writes are visible */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    const int64_t h = blockIdx.x, n_q_heads = gridDim.x, dv = D;
    const int64_t d = (int64_t)blockIdx.y * GEM_CU_THREADS + threadIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    /* M_p and S_p of partial p = threadIdx.x */
    float m0 = -INFINITY, s0 = 0.f;
    if (threadIdx.x < partitions) {
        m0 = part_m[threadIdx.x * n_q_heads + h];
        s0 = part_s[threadIdx.x * n_q_heads + h];
    }
    float mx = -INFINITY;
    if (s0 > 0.f)
        mx = fmaxf(mx, m0);
    for (int64_t p = threadIdx.x + GEM_CU_THREADS; p < partitions; p += GEM_CU_THREADS) {
        const float mp = part_m[p * n_q_heads + h], sp = part_s[p * n_q_heads + h];
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
    /* O_p of this thread's element: po[p * pstride] */
    const float *po = part_o + h * dv + d;
    const int64_t pstride = n_q_heads * dv;
    for (int64_t p0 = 0; p0 < partitions; p0 += GEM_FR_BATCH) {
        const int64_t nb = partitions - p0 < GEM_FR_BATCH ? partitions - p0 : GEM_FR_BATCH;
        if (threadIdx.x < nb) {
            float mp = m0, sp = s0; /* the first batch: partial threadIdx.x, loaded above */
            if (p0 > 0) {
                const int64_t r = (p0 + threadIdx.x) * n_q_heads + h;
                mp = part_m[r];
                sp = part_s[r];
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
        int64_t b = 0;
        for (; b + 8 <= nb; b += 8) {
            float op[8];
#pragma unroll
            for (int u = 0; u < 8; u++)
                op[u] = __ldg(po + (p0 + b + u) * pstride);
#pragma unroll
            for (int u = 0; u < 8; u++)
                o = fmaf(op[u], w[b + u], o);
        }
        for (; b < nb; b++)
            o = fmaf(__ldg(po + (p0 + b) * pstride), w[b], o);
        __syncthreads(); /* w is rewritten by the next batch */
    }
    if (threadIdx.x == 0)
        s_all = sa;
    __syncthreads();
    out[h * dv + d] = __fdiv_rn(o, s_all);
}

/* Version 22: versions 20's kernels, each block stamping the global timer at its start and
 * end: stamps (blocks, 2), first pass then reducer. */
__device__ __forceinline__ uint64_t global_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* this block's index in the grid, read afresh (so that no register holds it through a body
 * that uses all 128) */
__device__ __forceinline__ uint64_t block_index(void)
{
    unsigned x, y;
    asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(x));
    asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(y));
    return (uint64_t)y * gridDim.x + x;
}

extern "C" __global__ void __launch_bounds__(THREADS, 2)
    stamped_first_pass(const float *__restrict__ q, const float *__restrict__ k,
                       const float *__restrict__ v, float *__restrict__ part_m,
                       float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,
                       int64_t partitions, float scale, uint64_t *__restrict__ stamps)
{
    if (threadIdx.x == 0) /* stored at once: no register held through the body */
        stamps[2 * block_index()] = global_ns();
    gem_fused_first_pass_body<gem_kv_f32, ROW_F4, false>(
        q, k, live * ROW_F4, ROW_F4, v, live * ROW_F4, ROW_F4, part_m, part_s, part_o, live,
        partitions, NQ, scale, nullptr, nullptr);
    __syncthreads();
    if (threadIdx.x == 0)
        stamps[2 * block_index() + 1] = global_ns();
}

extern "C" __global__ void __launch_bounds__(THREADS)
    stamped_reducer(const float *__restrict__ part_m, const float *__restrict__ part_s,
                    const float *__restrict__ part_o, float *__restrict__ out, int64_t partitions,
                    uint64_t *__restrict__ stamps)
{
    const uint64_t t0 = global_ns();
    gem_fused_reducer_body(part_m, part_s, part_o, out, partitions);
    __syncthreads();
    if (threadIdx.x == 0) {
        const uint64_t b = (uint64_t)blockIdx.y * gridDim.x + blockIdx.x;
        stamps[2 * b] = t0;
        stamps[2 * b + 1] = global_ns();
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 2)
    stamped_first_pass_bf16(const float *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                            const __nv_bfloat16 *__restrict__ v, float *__restrict__ part_m,
                            float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,
                            int64_t partitions, float scale, uint64_t *__restrict__ stamps)
{
    if (threadIdx.x == 0) /* stored at once: no register held through the body */
        stamps[2 * block_index()] = global_ns();
    gem_fused_first_pass_mma_staged_body<D>(q, k, live * D, D, v, live * D, D, part_m, part_s,
                                            part_o, live, partitions, NQ, scale);
    __syncthreads();
    if (threadIdx.x == 0)
        stamps[2 * block_index() + 1] = global_ns();
}

/* dst (n) = src (n) as BF16 (the values are BF16 already: exact) */
__global__ void to_bf16(const float *__restrict__ src, __nv_bfloat16 *__restrict__ dst, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

static uint64_t *g_stamps; /* device: version 22's stamps, first pass then reducer */
#define STAMP_FIRST_BLOCKS (64 * NKV)
#define STAMP_REDUCER_BLOCKS (NQ * (D / THREADS))

/* ---- launchers ------------------------------------------------------------------------------ */

typedef struct run_args {
    const float *q, *k, *v; /* device: (NQ, D), (NKV, live, D) x2 */
    const float *kt, *vt;   /* device: (live, NKV, D) x2, the token-major copies (version 13) */
    const __nv_bfloat16 *kb, *vb; /* device: (NKV, live, D) x2 as BF16 (version 23) */
    float *out;             /* device (NQ, D) */
    float *ws;              /* device workspace (at least the library's) */
    size_t ws_bytes;
    int64_t live;
    float scale;
    gem_decode_ctx *ctx;
    cudaStream_t stream;
} run_args;

/* the reducer as a programmatic dependent of the first pass (gem_pdl.cuh's launch_pdl) */
template <typename K> static void launch_dependent(K kernel, dim3 grid, cudaStream_t s,
                                                   const float *pm, const float *ps,
                                                   const float *po, float *out, int64_t P,
                                                   int threads = THREADS)
{
    cudaCheck(launch_pdl(kernel, grid, (unsigned)threads, s, pm, ps, po, out, P));
}

static void run_version(int version, const run_args *a)
{
    const int64_t P = version == 1 ? 32 : 64;
    float *pm = a->ws, *ps = a->ws + P * NQ, *po = a->ws + 2 * P * NQ;
    const dim3 g1((unsigned)P, NKV), g2(NQ, D / THREADS);
    switch (version) {
    case 1:
        gem_fused_first_pass_t4_s1_v0<<<g1, THREADS, 2 * 4 * D * sizeof(float), a->stream>>>(
            a->q, a->k, a->v, pm, ps, po, a->live, P, a->scale);
        cudaCheck(cudaGetLastError());
        gem_fused_reducer_v1<<<g2, THREADS, 0, a->stream>>>(pm, ps, po, a->out, P);
        break;
    case 20:
    case 21:
        lib_first_pass<<<g1, THREADS, 0, a->stream>>>(a->q, a->k, a->v, pm, ps, po, a->live, P,
                                                      a->scale);
        cudaCheck(cudaGetLastError());
        if (version == 20)
            launch_dependent(lib_reducer, g2, a->stream, pm, ps, po, a->out, P);
        else
            launch_dependent(reducer_by8, g2, a->stream, pm, ps, po, a->out, P);
        break;
    case 24:
    case 25:
    case 26:
    case 27: {
        const int pf_tiles = version == 24 ? 0 : version == 25 ? 2 : version == 26 ? 4 : 1;
        cudaCheck(launch_pdl(pdl_first_pass, g1, THREADS, a->stream, a->q, a->k, a->v, pm, ps,
                             po, a->live, P, a->scale, pf_tiles));
        launch_dependent(trigger_reducer, g2, a->stream, pm, ps, po, a->out, P);
        break;
    }
    case 22:
    case 23: {
        if (version == 22)
            stamped_first_pass<<<g1, THREADS, 0, a->stream>>>(a->q, a->k, a->v, pm, ps, po,
                                                              a->live, P, a->scale, g_stamps);
        else
            stamped_first_pass_bf16<<<g1, THREADS, GEM_MMA_STAGED_BYTES, a->stream>>>(
                a->q, a->kb, a->vb, pm, ps, po, a->live, P, a->scale, g_stamps);
        cudaCheck(cudaGetLastError());
        cudaCheck(launch_pdl(stamped_reducer, g2, THREADS, a->stream, (const float *)pm,
                             (const float *)ps, (const float *)po, a->out, P,
                             g_stamps + 2 * STAMP_FIRST_BLOCKS));
        break;
    }
    case 12:
    case 13: {
        const gem_decode_shape shape = {NQ, NKV, D, D, a->scale};
        gem_kv_view kv = gem_kv_view_dense(a->k, a->v, D, D, a->live, a->live);
        if (version == 13) {
            kv.k = a->kt;
            kv.v = a->vt;
            kv.k_head_stride = kv.v_head_stride = D;
            kv.k_token_stride = kv.v_token_stride = NKV * D;
        }
        const gem_status st = gem_decode(a->ctx, &shape, a->q, &kv, a->out, a->ws, a->ws_bytes,
                                         NULL, a->stream);
        if (st != GEM_OK) {
            fprintf(stderr, "gem_decode: %s\n", gem_status_str(st));
            exit(EXIT_FAILURE);
        }
        return;
    }
    default: /* 7, 9, 10, 11: version 7's first pass */
        gem_fused_first_pass_v7<<<g1, THREADS, 0, a->stream>>>(a->q, a->k, a->v, pm, ps, po,
                                                               a->live, P, a->scale);
        cudaCheck(cudaGetLastError());
        if (version == 7)
            reducer_wide<0><<<g2, THREADS, 0, a->stream>>>(pm, ps, po, a->out, P);
        else if (version == 9)
            launch_dependent(reducer_wide<1>, g2, a->stream, pm, ps, po, a->out, P);
        else if (version == 10)
            launch_dependent(reducer_scaled, g2, a->stream, pm, ps, po, a->out, P);
        else
            launch_dependent(reducer_scaled4, dim3(NQ), a->stream, pm, ps, po, a->out, P, 128);
        break;
    }
    cudaCheck(cudaGetLastError());
}

/* ---- main --------------------------------------------------------------------------------- */

/* Spins for `ns` nanoseconds of the GPU's global timer (queued before a timed region). */
__global__ void wait_kernel(uint64_t ns)
{
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void fill(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(splitmix(&seed) >> 40) * 0x1p-24f * 2.0f - 1.0f;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int write_resources_v1(const char *path);

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Version 22's timeline: 2 * rounds calls, each queued behind 50 us of GPU work and timed by
 * two events like the others; the stamps of each call give one sample of every quantity, and
 * the medians over the calls are printed (us). */
static void timeline(int version, run_args *a, float **dk, float **dv, __nv_bfloat16 **dkb,
                     __nv_bfloat16 **dvb, int copies, int rounds, cudaEvent_t e0, cudaEvent_t e1)
{
    enum { DISPATCH, BLOCK_MED, BLOCK_MAX, END_SPREAD, GAP, R_SPAN, SPAN, EVENT, NQTY };
    static const char *names[NQTY] = {"starts spread", "block median", "block max",
                                      "ends spread", "gap to reducer", "reducer span",
                                      "whole span", "event time"};
    const int n = 2 * rounds, nf = STAMP_FIRST_BLOCKS, nr = STAMP_REDUCER_BLOCKS;
    double *q = (double *)calloc((size_t)NQTY * n, sizeof(double));
    uint64_t h[2 * (STAMP_FIRST_BLOCKS + STAMP_REDUCER_BLOCKS)], d[STAMP_FIRST_BLOCKS];
    uint64_t res = UINT64_MAX; /* the smallest nonzero difference of two block starts */
    for (int c = 0; c < n; c++) {
        a->k = dk[c % copies];
        a->v = dv[c % copies];
        a->kb = dkb[c % copies];
        a->vb = dvb[c % copies];
        wait_kernel<<<1, 1, 0, a->stream>>>(50000);
        cudaCheck(cudaEventRecord(e0, a->stream));
        run_version(version, a);
        cudaCheck(cudaEventRecord(e1, a->stream));
        cudaCheck(cudaEventSynchronize(e1));
        float ms = 0;
        cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
        cudaCheck(cudaMemcpy(h, g_stamps, sizeof h, cudaMemcpyDeviceToHost));
        uint64_t s0 = UINT64_MAX, s1 = 0, f0 = UINT64_MAX, f1 = 0, r0 = UINT64_MAX, r1 = 0;
        for (int b = 0; b < nf; b++) {
            s0 = h[2 * b] < s0 ? h[2 * b] : s0;
            s1 = h[2 * b] > s1 ? h[2 * b] : s1;
            f0 = h[2 * b + 1] < f0 ? h[2 * b + 1] : f0;
            f1 = h[2 * b + 1] > f1 ? h[2 * b + 1] : f1;
            d[b] = h[2 * b + 1] - h[2 * b];
        }
        for (int b = nf; b < nf + nr; b++) {
            r0 = h[2 * b] < r0 ? h[2 * b] : r0;
            r1 = h[2 * b + 1] > r1 ? h[2 * b + 1] : r1;
        }
        uint64_t st[STAMP_FIRST_BLOCKS];
        for (int b = 0; b < nf; b++)
            st[b] = h[2 * b];
        qsort(st, (size_t)nf, sizeof st[0], cmp_u64);
        for (int b = 1; b < nf; b++)
            if (st[b] > st[b - 1] && st[b] - st[b - 1] < res)
                res = st[b] - st[b - 1];
        qsort(d, (size_t)nf, sizeof d[0], cmp_u64);
        q[DISPATCH * n + c] = 1e-3 * (double)(s1 - s0);
        q[BLOCK_MED * n + c] = 1e-3 * (double)d[nf / 2];
        q[BLOCK_MAX * n + c] = 1e-3 * (double)d[nf - 1];
        q[END_SPREAD * n + c] = 1e-3 * (double)(f1 - f0);
        q[GAP * n + c] = 1e-3 * ((double)r0 - (double)f1);
        q[R_SPAN * n + c] = 1e-3 * (double)(r1 - r0);
        q[SPAN * n + c] = 1e-3 * (double)(r1 - s0);
        q[EVENT * n + c] = 1e3 * (double)ms;
    }
    printf("%-8lld v%-7d timeline, medians of %d calls (us); timer step <= %llu ns\n",
           (long long)a->live, version, n, (unsigned long long)res);
    for (int k = 0; k < NQTY; k++) {
        qsort(q + (size_t)k * n, (size_t)n, sizeof(double), cmp_double);
        printf("%-8lld v%-7d   %-16s %9.2f  [%.2f .. %.2f]\n", (long long)a->live, version,
               names[k],
               0.5 * (q[(size_t)k * n + n / 2 - 1] + q[(size_t)k * n + n / 2]),
               q[(size_t)k * n], q[(size_t)k * n + n - 1]);
    }
    free(q);
}

int main(int argc, char **argv)
{
    int versions[16], nv = 0, rounds = 10, calls = 1, min_copies = 1;
    int64_t lengths[8] = {8192, 65536, 131072};
    int nl = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--resources-v1") && i + 1 < argc)
            return write_resources_v1(argv[++i]);
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--copies") && i + 1 < argc) {
            min_copies = atoi(argv[++i]);
            if (min_copies < 1 || min_copies > 8) {
                fprintf(stderr, "--copies takes 1 .. 8\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--calls") && i + 1 < argc) {
            calls = atoi(argv[++i]);
            if (calls < 1 || calls > 64) {
                fprintf(stderr, "--calls takes 1 .. 64\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--lengths") && i + 1 < argc) {
            nl = 0;
            for (char *t = strtok(argv[++i], ","); t && nl < 8; t = strtok(NULL, ","))
                lengths[nl++] = atoll(t);
        } else if (nv < 16) {
            versions[nv++] = atoi(argv[i]);
        }
    }
    if (nv == 0) {
        const int all[] = {1, 7, 9, 10, 11, 12, 13};
        for (int i = 0; i < 7; i++)
            versions[nv++] = all[i];
    }
    for (int i = 0; i < nv; i++)
        if (versions[i] != 1 && (versions[i] < 20 || versions[i] > 27) &&
            (versions[i] < 7 || versions[i] > 13 || versions[i] == 8)) {
            fprintf(stderr, "unknown version %d (1, 7, 9 .. 13, 20 .. 27)\n", versions[i]);
            return 2;
        }
    gem_decode_ctx *ctx = NULL;
    if (gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &ctx) != GEM_OK)
        return 2;
    cudaStream_t stream;
    cudaCheck(cudaFuncSetAttribute(stamped_first_pass_bf16,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)GEM_MMA_STAGED_BYTES));
    cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaCheck(cudaMalloc(&g_stamps, 2 * (STAMP_FIRST_BLOCKS + STAMP_REDUCER_BLOCKS) *
                                        sizeof(uint64_t)));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    printf("%-8s %-8s %10s %10s %10s %9s\n", "live", "version", "min ms", "median ms", "max ms",
           "GB/s");
    int failed = 0;
    for (int li = 0; li < nl; li++) {
        const int64_t live = lengths[li];
        const size_t kv_elems = (size_t)NKV * (size_t)live * D;
        const double kv_bytes = 2.0 * (double)kv_elems * 4.0;
        int copies = kv_bytes < 512e6 ? (int)ceil(512e6 / kv_bytes) : 1;
        copies = copies < min_copies ? min_copies : copies;
        float *hq = (float *)malloc(NQ * D * sizeof(float));
        float *hk = (float *)malloc(kv_elems * sizeof(float));
        float *hv = (float *)malloc(kv_elems * sizeof(float));
        double *ref = (double *)malloc(NQ * D * sizeof(double));
        float *hout = (float *)malloc(NQ * D * sizeof(float));
        float *hfirst = (float *)malloc(NQ * D * sizeof(float));
        float *hbits = (float *)malloc(NQ * D * sizeof(float));
        int bits_of = -1;
        fill(hq, NQ * D, 1 + (uint64_t)live);
        fill(hk, kv_elems, 2 + (uint64_t)live);
        fill(hv, kv_elems, 3 + (uint64_t)live);
        int want_bf16 = 0;
        for (int i = 0; i < nv; i++)
            want_bf16 |= versions[i] == 23;
        if (want_bf16) /* every version reads BF16 values (version 23 as BF16) */
            for (size_t i = 0; i < kv_elems; i++) {
                hk[i] = __bfloat162float(__float2bfloat16_rn(hk[i]));
                hv[i] = __bfloat162float(__float2bfloat16_rn(hv[i]));
            }
        const float scale = 1.0f / sqrtf((float)D);
        attention_cpu(ref, hq, hk, hv, live, scale);
        float *dq, *dout, *dws, *dk[64], *dv[64], *dkt[64], *dvt[64];
        __nv_bfloat16 *dkb[64], *dvb[64];
        int want_tm = 0;
        for (int i = 0; i < nv; i++)
            want_tm |= versions[i] == 13;
        float *tk = NULL, *tv = NULL; /* host token-major copies */
        if (want_tm) {
            tk = (float *)malloc(kv_elems * sizeof(float));
            tv = (float *)malloc(kv_elems * sizeof(float));
            for (int g = 0; g < NKV; g++)
                for (int64_t t = 0; t < live; t++) {
                    memcpy(tk + ((size_t)t * NKV + g) * D, hk + ((size_t)g * live + t) * D,
                           D * sizeof(float));
                    memcpy(tv + ((size_t)t * NKV + g) * D, hv + ((size_t)g * live + t) * D,
                           D * sizeof(float));
                }
        }
        const gem_decode_shape shape = {NQ, NKV, D, D, scale};
        size_t ws_bytes = 0;
        if (gem_decode_workspace_bytes(ctx, &shape, live, NULL, &ws_bytes) != GEM_OK)
            return 2;
        const size_t ws_min = (size_t)64 * NQ * (D + 2) * sizeof(float);
        ws_bytes = ws_bytes > ws_min ? ws_bytes : ws_min;
        cudaCheck(cudaMalloc(&dq, NQ * D * sizeof(float)));
        cudaCheck(cudaMalloc(&dout, NQ * D * sizeof(float)));
        cudaCheck(cudaMalloc(&dws, ws_bytes));
        for (int c = 0; c < copies; c++) {
            cudaCheck(cudaMalloc(&dk[c], kv_elems * sizeof(float)));
            cudaCheck(cudaMalloc(&dv[c], kv_elems * sizeof(float)));
            cudaCheck(cudaMemcpy(dk[c], hk, kv_elems * sizeof(float), cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(dv[c], hv, kv_elems * sizeof(float), cudaMemcpyHostToDevice));
            dkt[c] = dvt[c] = NULL;
            dkb[c] = dvb[c] = NULL;
            if (want_bf16) {
                cudaCheck(cudaMalloc(&dkb[c], kv_elems * 2));
                cudaCheck(cudaMalloc(&dvb[c], kv_elems * 2));
                to_bf16<<<1024, 256>>>(dk[c], dkb[c], kv_elems);
                to_bf16<<<1024, 256>>>(dv[c], dvb[c], kv_elems);
                cudaCheck(cudaGetLastError());
                cudaCheck(cudaDeviceSynchronize());
            }
            if (want_tm) {
                cudaCheck(cudaMalloc(&dkt[c], kv_elems * sizeof(float)));
                cudaCheck(cudaMalloc(&dvt[c], kv_elems * sizeof(float)));
                cudaCheck(cudaMemcpy(dkt[c], tk, kv_elems * sizeof(float), cudaMemcpyHostToDevice));
                cudaCheck(cudaMemcpy(dvt[c], tv, kv_elems * sizeof(float), cudaMemcpyHostToDevice));
            }
        }
        free(tk);
        free(tv);
        cudaCheck(cudaMemcpy(dq, hq, NQ * D * sizeof(float), cudaMemcpyHostToDevice));
        run_args a = {dq,  dk[0],    dv[0], dkt[0], dvt[0], dkb[0], dvb[0],
                      dout, dws, ws_bytes, live, scale, ctx, stream};
        int valid[16];
        for (int i = 0; i < nv; i++) { /* validate: reference, every element, repeat */
            valid[i] = 1;
            for (int rep = 0; rep < 2; rep++) {
                cudaCheck(cudaMemsetAsync(dout, 0xFF, NQ * D * sizeof(float), stream)); /* NaN */
                a.k = dk[rep % copies];
                a.v = dv[rep % copies];
                a.kt = dkt[rep % copies];
                a.vt = dvt[rep % copies];
                a.kb = dkb[rep % copies];
                a.vb = dvb[rep % copies];
                run_version(versions[i], &a);
                cudaCheck(cudaStreamSynchronize(stream));
                cudaCheck(cudaMemcpy(hout, dout, NQ * D * sizeof(float), cudaMemcpyDeviceToHost));
                if (rep == 0) {
                    double num = 0, den = 0;
                    for (int j = 0; j < NQ * D; j++) {
                        num += (hout[j] - ref[j]) * (hout[j] - ref[j]);
                        den += ref[j] * ref[j];
                    }
                    const double nmse = num / den;
                    if (!(nmse <= 1e-10)) {
                        printf("%-8lld v%-7d INVALID: nmse %.3g\n", (long long)live, versions[i],
                               nmse);
                        valid[i] = 0;
                    }
                    memcpy(hfirst, hout, NQ * D * sizeof(float));
                } else if (memcmp(hfirst, hout, NQ * D * sizeof(float)) != 0) {
                    printf("%-8lld v%-7d INVALID: the repeat differs\n", (long long)live,
                           versions[i]);
                    valid[i] = 0;
                }
            }
            failed |= !valid[i];
            /* the output's bits against the first valid version's (same arithmetic, same bits) */
            if (valid[i] && bits_of < 0) {
                bits_of = versions[i];
                memcpy(hbits, hfirst, NQ * D * sizeof(float));
            } else if (valid[i]) {
                printf("%-8lld v%-7d %s v%d\n", (long long)live, versions[i],
                       memcmp(hbits, hfirst, NQ * D * sizeof(float)) ? "other bits than"
                                                                      : "same bits as",
                       bits_of);
            }
        }
        double *t = (double *)calloc((size_t)nv * 2 * rounds, sizeof(double));
        for (int w = 0; w < 3; w++) /* warm-up */
            for (int i = 0; i < nv; i++)
                if (valid[i])
                    run_version(versions[i], &a);
        int turn = 0;
        for (int r = 0; r < rounds; r++)
            for (int pass = 0; pass < 2; pass++) /* A B ... then ... B A */
                for (int j = 0; j < nv; j++) {
                    const int i = pass == 0 ? j : nv - 1 - j;
                    if (!valid[i])
                        continue;
                    wait_kernel<<<1, 1, 0, stream>>>(50000); /* the host runs ahead */
                    cudaCheck(cudaEventRecord(e0, stream));
                    for (int c = 0; c < calls; c++) { /* back to back, the next copy each */
                        a.k = dk[turn % copies];
                        a.v = dv[turn % copies];
                        a.kt = dkt[turn % copies];
                        a.vt = dvt[turn % copies];
                        a.kb = dkb[turn % copies];
                        a.vb = dvb[turn % copies];
                        turn++;
                        run_version(versions[i], &a);
                    }
                    cudaCheck(cudaEventRecord(e1, stream));
                    cudaCheck(cudaEventSynchronize(e1));
                    float ms = 0;
                    cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
                    t[(size_t)i * 2 * rounds + 2 * r + pass] = ms / calls;
                }
        for (int i = 0; i < nv; i++) {
            if (!valid[i])
                continue;
            double *ti = t + (size_t)i * 2 * rounds;
            qsort(ti, (size_t)2 * rounds, sizeof(double), cmp_double);
            const double med = 0.5 * (ti[rounds - 1] + ti[rounds]);
            printf("%-8lld v%-7d %10.4f %10.4f %10.4f %9.1f\n", (long long)live, versions[i], ti[0],
                   med, ti[2 * rounds - 1], kv_bytes / (med * 1e-3) / 1e9);
        }
        free(t);
        for (int i = 0; i < nv; i++)
            if ((versions[i] == 22 || versions[i] == 23) && valid[i])
                timeline(versions[i], &a, dk, dv, dkb, dvb, copies, rounds, e0, e1);
        for (int c = 0; c < copies; c++) {
            cudaFree(dk[c]);
            cudaFree(dv[c]);
            if (dkt[c])
                cudaFree(dkt[c]);
            if (dvt[c])
                cudaFree(dvt[c]);
            if (dkb[c])
                cudaFree(dkb[c]);
            if (dvb[c])
                cudaFree(dvb[c]);
        }
        cudaFree(dq);
        cudaFree(dout);
        cudaFree(dws);
        free(hq);
        free(hk);
        free(hv);
        free(ref);
        free(hout);
        free(hfirst);
        free(hbits);
    }
    gem_decode_ctx_destroy(ctx);
    cudaFree(g_stamps);
    return failed;
}

/* ---- version 1's resource receipt (gem.resources.v1) -------------------------------------- */

static json_t *kernel_json(const char *name, const char *role, const void *func, size_t dyn,
                           int threads, int warp)
{
    cudaFuncAttributes fa;
    cudaCheck(cudaFuncGetAttributes(&fa, func));
    if (dyn > 48 * 1024)
        cudaCheck(cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn));
    int active = 0;
    cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&active, func, threads, dyn));
    return json_pack("{s:s, s:s, s:i, s:I, s:I, s:i, s:I, s:I, s:I, s:i, s:i}", "name", name,
                     "role", role, "max_threads_per_block", fa.maxThreadsPerBlock,
                     "static_shared_bytes", (json_int_t)fa.sharedSizeBytes,
                     "dynamic_shared_bytes", (json_int_t)dyn, "registers", fa.numRegs,
                     "local_bytes", (json_int_t)fa.localSizeBytes, "threads_dispatched",
                     (json_int_t)threads, "warps_dispatched", (json_int_t)(threads / warp),
                     "warp_size", warp, "max_active_blocks_per_sm", active);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* [{path, sha256}] of every .cu file of GEM_DEV_ROOT/dev/cuda, sorted by name; NULL (with a
   line on stderr) when one cannot be listed or digested. */
static json_t *dev_sources_json(void)
{
    const char *dir = GEM_DEV_ROOT "/dev/cuda";
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "cannot list %s to digest the sources\n", dir);
        return NULL;
    }
    char *names[64];
    size_t n = 0;
    int bad = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 4 || strcmp(e->d_name + len - 3, ".cu") != 0)
            continue;
        if (n == sizeof names / sizeof names[0] || !(names[n] = strdup(e->d_name))) {
            bad = 1;
            break;
        }
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_name);
    json_t *arr = bad ? NULL : json_array();
    for (size_t i = 0; i < n && arr; i++) {
        char rel[512], full[PATH_MAX], hex[65];
        snprintf(rel, sizeof rel, "dev/cuda/%s", names[i]);
        snprintf(full, sizeof full, "%s/%s", GEM_DEV_ROOT, rel);
        if (gem_sha256_file_hex(full, hex) != GEM_OK) {
            fprintf(stderr, "cannot digest %s\n", full);
            json_decref(arr);
            arr = NULL;
            break;
        }
        json_array_append_new(arr, json_pack("{s:s, s:s}", "path", rel, "sha256", hex));
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    if (bad)
        fprintf(stderr, "cannot list the sources of %s\n", dir);
    return arr;
}

/* {path, sha256} of the running binary, its path relative to the source tree (the analyzer
   resolves it under --root); NULL (with a line on stderr) when it is outside the tree. */
static json_t *binary_json(void)
{
    char exe[PATH_MAX], root[PATH_MAX], hex[65];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0 || !realpath(GEM_DEV_ROOT, root)) {
        fprintf(stderr, "cannot resolve the running binary or %s\n", GEM_DEV_ROOT);
        return NULL;
    }
    exe[len] = '\0';
    const size_t rl = strlen(root);
    if (strncmp(exe, root, rl) != 0 || exe[rl] != '/') {
        fprintf(stderr, "%s is outside the source tree %s: build under it to bind the binary\n",
                exe, root);
        return NULL;
    }
    if (gem_sha256_file_hex(exe, hex) != GEM_OK) {
        fprintf(stderr, "cannot digest %s\n", exe);
        return NULL;
    }
    return json_pack("{s:s, s:s}", "path", exe + rl + 1, "sha256", hex);
}

static int write_resources_v1(const char *path)
{
    gem_cuda_device_info dev;
    if (gem_cuda_device_query(&dev) != GEM_OK)
        return 2;
    gem_cuda_kernel_info base[GEM_CUDA_KERNELS]; /* the baseline's four are the last */
    size_t n = 0;
    if (gem_cuda_kernel_query(NKV, 131072, 32, 16, base, GEM_CUDA_KERNELS, &n) != GEM_OK)
        return 2;
    json_t *doc = gem_receipt_new("gem.resources.v1", "dev/cuda/fused_decode version 1",
                                  getenv("GEM_GIT_COMMIT") ? getenv("GEM_GIT_COMMIT") : "unknown");
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", dev.major, dev.minor);
    json_object_set_new(doc, "device",
                        json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:i}", "name",
                                  dev.name, "compute_capability", cc, "major", dev.major, "minor",
                                  dev.minor, "sm_count", dev.sm_count, "warp_size", dev.warp_size,
                                  "shared_mem_per_block", (json_int_t)dev.shared_mem_per_block,
                                  "shared_mem_per_block_optin",
                                  (json_int_t)dev.shared_mem_per_block_optin, "shared_mem_per_sm",
                                  (json_int_t)dev.shared_mem_per_sm, "regs_per_sm",
                                  dev.regs_per_sm));
    json_object_set_new(doc, "geometry",
                        json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:i}", "n_q_heads", NQ,
                                  "n_kv_heads", NKV, "dk", D, "dv", D, "partitions", 32, "tile", 4,
                                  "dtype", "f32", "window", 0));
    gem_online_scratch sc;
    gem_attention_online_scratch_bytes(32, NQ, D, &sc);
    json_object_set_new(doc, "scratch",
                        json_pack("{s:I, s:I, s:I, s:I}", "maxima_bytes",
                                  (json_int_t)sc.maxima_bytes, "denominators_bytes",
                                  (json_int_t)sc.denominators_bytes, "numerators_bytes",
                                  (json_int_t)sc.numerators_bytes, "total_bytes",
                                  (json_int_t)sc.total_bytes));
    json_t *ks = json_array();
    json_array_append_new(ks, kernel_json("gem_fused_first_pass_t4_s1_v0", "fused_first_pass",
                                          (const void *)gem_fused_first_pass_t4_s1_v0,
                                          2 * 4 * D * sizeof(float), THREADS, dev.warp_size));
    json_array_append_new(ks, kernel_json("gem_fused_reducer_v1", "fused_reducer",
                                          (const void *)gem_fused_reducer_v1, 0, THREADS,
                                          dev.warp_size));
    for (int i = GEM_CUDA_FIRST_PASSES + 1; i <= GEM_CUDA_FIRST_PASSES + GEM_CUDA_BASELINE_KERNELS;
         i++)
        json_array_append_new(
            ks, json_pack("{s:s, s:s, s:i, s:I, s:I, s:i, s:I, s:I, s:I, s:i, s:i}", "name",
                          base[i].name, "role", base[i].role, "max_threads_per_block",
                          base[i].max_threads_per_block, "static_shared_bytes",
                          (json_int_t)base[i].static_shared_bytes, "dynamic_shared_bytes",
                          (json_int_t)base[i].dynamic_shared_bytes, "registers", base[i].registers,
                          "local_bytes", (json_int_t)base[i].local_bytes, "threads_dispatched",
                          (json_int_t)base[i].threads_dispatched, "warps_dispatched",
                          (json_int_t)base[i].warps_dispatched, "warp_size", base[i].warp_size,
                          "max_active_blocks_per_sm", base[i].max_active_blocks_per_sm));
    json_object_set_new(doc, "kernels", ks);
    /* sources: every .cu file of dev/cuda, sorted (the analyzer wants them all); binary: the
       running one, by its path under the source tree */
    json_t *srcs = dev_sources_json();
    json_t *bin = srcs ? binary_json() : NULL;
    if (!srcs || !bin) {
        json_decref(srcs);
        json_decref(doc);
        return 2;
    }
    json_object_set_new(doc, "sources", srcs);
    json_object_set_new(doc, "binary", bin);
    /* the design's gates (docs/receipts-resources.md) */
    json_t *gates = json_object();
    int all = 1;
#define GATE(name, cond)                                                                       \
    do {                                                                                       \
        const int ok_ = (cond);                                                                \
        all &= ok_;                                                                            \
        json_object_set_new(gates, name, json_boolean(ok_));                                   \
    } while (0)
#define KI(i, f) json_integer_value(json_object_get(json_array_get(ks, i), f))
    GATE("device_compute_capability_9_0", dev.major == 9 && dev.minor == 0 && dev.warp_size == 32);
    GATE("geometry_d512_p32_tile4_f32_no_window", 1);
    GATE("scratch_contract_2105344", sc.maxima_bytes == 4096 && sc.denominators_bytes == 4096 &&
                                         sc.numerators_bytes == 2097152 &&
                                         sc.total_bytes == 2105344);
    for (int i = 0; i < 2; i++) {
        const char *pre = i == 0 ? "first_pass" : "reducer";
        char key[96];
#define KGATE(suffix, cond)                                                                    \
    do {                                                                                       \
        snprintf(key, sizeof key, "%s_%s", pre, suffix);                                       \
        GATE(key, cond);                                                                       \
    } while (0)
        KGATE("warp_size_32", KI(i, "warp_size") == 32);
        KGATE("launchable_threads_ge_256", KI(i, "max_threads_per_block") >= 256);
        KGATE("dispatched_256_threads_8_warps",
              KI(i, "threads_dispatched") == 256 && KI(i, "warps_dispatched") == 8);
        if (i == 0)
            KGATE("dynamic_shared_16384", KI(i, "dynamic_shared_bytes") == 16384);
        else
            KGATE("no_dynamic_shared", KI(i, "dynamic_shared_bytes") == 0);
        KGATE("shared_within_32768",
              KI(i, "static_shared_bytes") + KI(i, "dynamic_shared_bytes") <= 32768);
        KGATE("zero_local_bytes", KI(i, "local_bytes") == 0);
        KGATE("resident", KI(i, "max_active_blocks_per_sm") >= 1);
#undef KGATE
    }
    int base_ok = 1;
    for (int i = GEM_CUDA_FIRST_PASSES + 1; i <= GEM_CUDA_FIRST_PASSES + GEM_CUDA_BASELINE_KERNELS;
         i++)
        base_ok &= base[i].warp_size == 32 && base[i].max_active_blocks_per_sm >= 1 &&
                   base[i].threads_dispatched <= base[i].max_threads_per_block &&
                   base[i].local_bytes == 0;
    GATE("baseline_kernels_launchable_no_local", base_ok);
#undef KI
#undef GATE
    json_object_set_new(doc, "gates", gates);
    json_object_set_new(doc, "verdict", json_string(all ? "pass" : "fail"));
    const gem_status st = gem_receipt_write(path, doc);
    json_decref(doc);
    if (st != GEM_OK) {
        fprintf(stderr, "cannot write %s\n", path);
        return 2;
    }
    printf("version 1 resources: verdict %s -> %s\n", all ? "pass" : "fail", path);
    return all ? 0 : 1;
}
