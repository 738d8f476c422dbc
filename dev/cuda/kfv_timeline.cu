/*
kfv_timeline: where the long F32 K-from-V pass's fixed time goes (Gemma 4's full layers, 32 query
heads over 4 KV heads, D512, an F32 V cache, K rebuilt from V).

Why: through gem_decode the library's pass (gem_fused_first_pass_kfv_pair_body) takes 0.1670 ms
at 64K rows and 0.2944 at 128K at 64 partitions, and 0.1555 / 0.2764 at 33 (results/h200 runs
139-140). The second 64K rows cost 0.121-0.127 ms, 4.2-4.4 TB/s, near the read probe (4,536
GB/s), so the pass streams at the bytes' rate once it runs and the rest, some 35-40 us a call,
is fixed. The stored K + V pass has about 15 us of it. This program measures where it goes: for
one call (queued behind a spin kernel that stamps its end, as dev/cuda/tiles_timeline does for
the tile products) every block stamps the GPU's global timer.

version 1 is gem_decode on the K-from-V view with an explicit config (fused, P partitions).
version 2 is the library's body in a kernel that stamps each block's start, the return of its
  launch wait (griddepcontrol.wait) and its end; the library's reducer body, stamped the same way.
version 3 is a copy of the library's body (the same arithmetic in the same order) with stamps
  after its prologue (Q's pieces, the rotating pairs and the table in shared memory) and at the
  end of each warp's tiles.
version 4 is version 3 with the prologue's loads of q and k_weight issued before the first
  tile's copy: the same bits. The prologue's loads otherwise queue behind the first tiles' copies
  of every block (about 21 MB at once). Runs 148-149: the prologue 7.9 -> 6.4 us, the call 0.8%
  shorter at 128K and 1.4-2.4% at 20K-64K (33 partitions). Not in the library: racecheck reported
  hazards between the mbarriers' init and the stage copies in the library's body with versions 4
  and 5's changes (run 149), which run 150 sorts out.
version 5 is version 4 with a leaner merge of the pairs' states (the same bits): each (pair,
  head)'s weight, the maximum and the sum once by eight threads instead of once an output
  element (gem_kfv_states_combine computes 5 expf for each of the 4,096 outputs), the outputs
  four at a time. Run 149: no shorter than version 4 (the merge, tiles to end, 2.3-2.6 us in
  both); a loser.
version 6 is version 4 with the angles that depend on the kernel's parameters alone (the table's
  and the first tile's) computed before the launch wait (the same bits): the candidate for the
  library's body, not yet timed or sanitized on the H200.
version 7 is version 3 counting, per warp, the cycles it waits for its tiles to land (the
  wait_group and the pair's meeting after it) and for its pair's stage to be free (the meeting
  before a copy), as fractions of its cycles in the tiles; its counters cost 8 bytes of spills.
version 8 is version 6 with the tiles of a KV head dealt round robin over its blocks' pairs:
  pair pr of block p takes tiles p * 5 + pr, then every 5 P tiles on, so that the blocks of a
  head stream one moving window of the cache instead of P contiguous partitions. Each partial is
  still one fixed set of tiles, merged in a fixed order (the same bits on every call), but not
  gem_partition_range's contiguous rows, so its bits differ from the library's. The question:
  do the blocks' ends still spread by 13-18 us at 128K when every block reads the same stretch
  of the cache at the same time (run 153 found the late SMs change from call to call)?
  Run 172 (an H100): 0.3682 against 0.3695 ms at 128K, the last block no earlier; there an SM's
  end correlates with the next call's by 0.77-0.91 (slow SMs, not slow rows). Not kept.
version 0 is gem_decode with the library's default config (below 20,480 rows the CUDA-core pass).
Versions 0-2 and 8 are checked against the double reference of the view (NMSE <= 1e-10),
versions 3-7 bit for bit against version 2, and every version's repeat bit for bit, before
anything is timed. Every stamped version records its blocks' SM ids: at one wave (a block an SM) it prints
each call's spread of the SMs' ends, the correlation of an SM's end between consecutive calls
(is a late SM late again?) and the six latest SMs.

Run 148 found the fixed time: the prologue (7.9 us), the spread of the blocks' ends (7-15 us),
the merge (2-6 us), the reducer (3.6 us with its launch), and at 64 partitions a second wave of
blocks that each pay all of it. The library takes one wave since (gem_decode_config_for_view).

It prints, per length, partition count and version: the call's time (CUDA events, median of
--rounds A B B A rounds, min and max) and, for versions 2-7, the median over 5 stamped calls of
(in us from the spin kernel's end): the first block start, the last block start, the last wait
return, the prologue's end (median and last block), the end of the blocks' tiles (first, median,
last), the blocks' end (median, last), and the reducer's first start and last end.

./kfv_timeline [--rounds N] [--lengths 20480,32768,...] [--partitions 33,64] [--versions 2,3,..]
               [--check-only]
--versions runs those versions (version 2, the bits' lead, always); --check-only checks them and
times nothing (for compute-sanitizer).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common.h"

#include "attn_fused_body.cuh"
#include "gem_pdl.cuh"

#include "gem/decode.h"

#define NQ 32
#define NKV 4
#define D 512
#define NPAIRS 64
#define NV 9     /* versions 0 .. 8 */
/* stamps a block: 0 start, 1 wait return, 2 prologue end, 3-12 the warps' ends, 15 end;
 * version 7: 16-25 the warps' cycles waiting for their tiles, 26-35 waiting for the stage to be
 * free, 36-45 in their tiles; every version: 46 the SM's id */
#define NSLOT 48
#define SL_WAIT 16
#define SL_FREE 26
#define SL_LOOP 36
#define SL_SMID 46

__device__ __forceinline__ uint32_t smid(void)
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}

__device__ __forceinline__ uint64_t gtimer(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* the spin kernel before a timed call, stamping its end */
__global__ void wait_stamped(uint64_t ns, uint64_t *end)
{
    uint64_t t0 = gtimer(), t;
    do {
        t = gtimer();
    } while (t - t0 < ns);
    *end = t;
}

/* version 2: the library's first pass, stamped */
extern "C" __global__ void __launch_bounds__(GEM_KFV_PAIR_THREADS, 1)
    tl_library(const float *__restrict__ q, const float *__restrict__ kw,
               const __grid_constant__ gem_cu_rope rope, const float *__restrict__ v, int64_t v_hs,
               int64_t v_ts, float *__restrict__ part_m, float *__restrict__ part_s,
               float *__restrict__ part_o, int64_t live, int64_t partitions, int64_t n_q_heads,
               float scale, uint64_t *__restrict__ st)
{
    uint64_t *const my = st + ((size_t)blockIdx.y * gridDim.x + blockIdx.x) * NSLOT;
    if (threadIdx.x == 0) {
        my[0] = gtimer();
        my[SL_SMID] = smid();
    }
    gem_fp_prefetch_l2<GEM_CU_D * 4, 8>(nullptr, 0, 0, v, v_hs * 4, v_ts * 4, live, partitions);
    pdl_wait();
    if (threadIdx.x == 0)
        my[1] = gtimer();
    gem_fused_first_pass_kfv_pair_body(q, kw, &rope, v, v_hs, v_ts, part_m, part_s, part_o, live,
                                       partitions, n_q_heads, scale);
    __syncthreads();
    if (threadIdx.x == 0)
        my[15] = gtimer();
}

/* the library's reducer, stamped (start after the wait, end) */
__global__ void __launch_bounds__(GEM_CU_THREADS)
    tl_reducer(const float *__restrict__ part_m, const float *__restrict__ part_s,
               const float *__restrict__ part_o, float *__restrict__ out, int64_t partitions,
               uint64_t *__restrict__ st)
{
    uint64_t *const my = st + ((size_t)blockIdx.y * gridDim.x + blockIdx.x) * 2;
    pdl_wait(); /* the body waits again: a no-op */
    if (threadIdx.x == 0)
        my[0] = gtimer();
    gem_fused_reducer_body(part_m, part_s, part_o, out, partitions, GEM_CU_D, true);
    __syncthreads();
    if (threadIdx.x == 0)
        my[1] = gtimer();
}

/* version 5's merge: gem_kfv_states_combine's arithmetic in its order (the same bits), with each
 * (state, head)'s weight, the maximum and the sum computed once by 8 threads instead of once an
 * output element, and the outputs four at a time. sf: N x 8 floats of shared memory. */
template <int N, int THREADS>
__device__ __forceinline__ void tl_states_combine_fast(const float *so, const float *smm,
                                                       const float *sss, float *sf, int64_t p,
                                                       int64_t g, int64_t n_q_heads,
                                                       float *__restrict__ part_m,
                                                       float *__restrict__ part_s,
                                                       float *__restrict__ part_o)
{
    const int G = GEM_CU_GROUP, DD = GEM_CU_D;
    if (threadIdx.x < G) {
        const int h = threadIdx.x;
        float M = -INFINITY;
        for (int n = 0; n < N; n++)
            M = fmaxf(M, smm[n * G + h]);
        float S = 0.f;
        for (int n = 0; n < N; n++) {
            const float mn = smm[n * G + h];
            const float f = mn == -INFINITY ? 0.f : expf(mn - M);
            sf[n * G + h] = f;
            S += sss[n * G + h] * f;
        }
        const int64_t row = p * n_q_heads + g * G + h;
        part_m[row] = M;
        part_s[row] = S;
    }
    __syncthreads();
    /* the block's 8 rows of part_o are one run of 8 x 512 floats; output i: head i / 128 */
    float4 *const po4 = reinterpret_cast<float4 *>(part_o + (p * n_q_heads + g * G) * DD);
    const float4 *const so4 = reinterpret_cast<const float4 *>(so);
    for (int i = threadIdx.x; i < G * DD / 4; i += THREADS) {
        const int h = i / (DD / 4);
        float4 O = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int n = 0; n < N; n++) {
            const float f = sf[n * G + h];
            const float4 x = so4[n * G * DD / 4 + i];
            O.x += x.x * f;
            O.y += x.y * f;
            O.z += x.z * f;
            O.w += x.w * f;
        }
        po4[i] = O;
    }
}

/* gem_kfv_pair_merge with version 5's combine */
__device__ __forceinline__ void tl_pair_merge_fast(float *sm, const float (&o)[16][4], float m0,
                                                   float m1, float s0, float s1, int64_t p,
                                                   int64_t g, int64_t n_q_heads,
                                                   float *__restrict__ part_m,
                                                   float *__restrict__ part_s,
                                                   float *__restrict__ part_o)
{
    const int NPR = GEM_KFV_PAIR_PAIRS, G = GEM_CU_GROUP, DD = GEM_CU_D;
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int pr = w >> 1, h = w & 1;
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();
    float *const so = sm;
    float *const smm = so + (size_t)NPR * G * DD;
    float *const sss = smm + NPR * G;
    float *const sf = sss + NPR * G;
    float *const ow = so + (size_t)pr * G * DD;
#pragma unroll
    for (int mt = 0; mt < 16; mt++) {
        const int d = 256 * h + 32 * (mt >> 1) + 4 * grp + 2 * (mt & 1);
        ow[(2 * tig) * DD + d] = o[mt][0];
        ow[(2 * tig + 1) * DD + d] = o[mt][1];
        ow[(2 * tig) * DD + d + 1] = o[mt][2];
        ow[(2 * tig + 1) * DD + d + 1] = o[mt][3];
    }
    if (grp == 0 && h == 0) {
        smm[pr * G + 2 * tig] = m0;
        smm[pr * G + 2 * tig + 1] = m1;
        sss[pr * G + 2 * tig] = s0;
        sss[pr * G + 2 * tig + 1] = s1;
    }
    __syncthreads();
    tl_states_combine_fast<NPR, GEM_KFV_PAIR_THREADS>(so, smm, sss, sf, p, g, n_q_heads, part_m,
                                                      part_s, part_o);
}

/* versions 3-8: gem_fused_first_pass_kfv_pair_body (attn_fused_body.cuh) with stamps;
 * LOADS_FIRST: the prologue's loads before the first tile's copy; MERGE_FAST: version 5's merge;
 * HOIST: the angles before the launch wait; WAITCLK: version 7's counters; ILV: version 8's tiles
 * dealt round robin over the (block, pair)s of a KV head (partial p holds tiles p NPR + pr +
 * k P NPR, pr < NPR) instead of a contiguous partition each */
template <bool LOADS_FIRST, bool MERGE_FAST, bool HOIST, bool WAITCLK, bool ILV = false>
__global__ void __launch_bounds__(GEM_KFV_PAIR_THREADS, 1)
    tl_copy(const float *__restrict__ q, const float *__restrict__ kw,
            const __grid_constant__ gem_cu_rope rope_p, const float *__restrict__ v, int64_t v_hs,
            int64_t v_ts, float *__restrict__ part_m, float *__restrict__ part_s,
            float *__restrict__ part_o, int64_t live, int64_t partitions, int64_t n_q_heads,
            float scale, uint64_t *__restrict__ st)
{
/* the block's stamps, recomputed where used (no register held across the tiles) */
#define MY (st + ((size_t)blockIdx.y * gridDim.x + blockIdx.x) * NSLOT)
    if (threadIdx.x == 0) {
        MY[0] = gtimer();
        MY[SL_SMID] = smid();
    }
    {
        /* the first 8 rows of the block's first tile: at row p NPR T when the tiles are dealt */
        const int64_t bt = (int64_t)GEM_KFV_PAIR_PAIRS * GEM_MMA_TILE;
        const int64_t pl = ILV ? (live < partitions * bt ? live : partitions * bt) : live;
        gem_fp_prefetch_l2<GEM_CU_D * 4, 8>(nullptr, 0, 0, v, v_hs * 4, v_ts * 4, pl, partitions);
    }
    if (!HOIST) {
        pdl_wait();
        if (threadIdx.x == 0)
            MY[1] = gtimer();
    }
    const gem_cu_rope *const rope = &rope_p;
    const int NPR = GEM_KFV_PAIR_PAIRS, G = GEM_CU_GROUP, T = GEM_MMA_TILE;
    const int NP = GEM_CU_ROPE_PAIRS, HALF = GEM_CU_ROPE_HALF;
    extern __shared__ __align__(128) unsigned char tl_sm[];
    float *const stiles = reinterpret_cast<float *>(tl_sm);
    float *const sqb = stiles + (size_t)NPR * GEM_KFV_PAIR_STAGE;
    float *const sqs = sqb + GEM_KFV_PAIR_QNR;
    float2 *const sqr = reinterpret_cast<float2 *>(sqs + GEM_KFV_PAIR_QNR);
    float *const spt = reinterpret_cast<float *>(sqr + G * NP);
    float2 *const scs = reinterpret_cast<float2 *>(spt + 2 * NPR * T * G);
    float4 *const sx = reinterpret_cast<float4 *>(scs + 2 * NPR * 32);
    float4 *const scf = sx + 2 * NPR * 32;
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int pr = w >> 1, h = w & 1;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = ILV ? 0 : min(p * chunk, live);
    const int64_t end = ILV ? live : min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    /* the pair's tiles from begin: tile0, tile0 + stride, ... (32-bit tile numbers: at most
     * 1,024 partitions of at most 2^20 rows here) */
    const int tile0 = ILV ? (int)p * NPR + pr : pr, stride = ILV ? (int)partitions * NPR : NPR;
    const int nmine = ntiles > tile0 ? (int)((ntiles - tile0 + stride - 1) / stride) : 0;
    const float *const vg = v + g * v_hs;
    float *const stage = stiles + (size_t)pr * GEM_KFV_PAIR_STAGE;
    __shared__ __align__(8) uint64_t tl_bars[GEM_KFV_PAIR_PAIRS];
    const uint32_t bar = gem_smem_addr(tl_bars + pr);
    if (tid < NPR)
        gem_mbar_init(gem_smem_addr(tl_bars + tid), 64);

    auto copy = [&](int64_t t0) {
        if (t0 + T <= end) {
            const float *src = vg + (t0 + 8 * h) * v_ts + 4 * lane;
#pragma unroll
            for (int r = 0; r < 8; r++, src += v_ts) {
                float *dst = stage + (8 * h + r) * GEM_CU_D + 4 * (lane ^ gem_tf32_swz(r));
#pragma unroll
                for (int i = 0; i < 4; i++)
                    gem_cp16(dst + 128 * i, src + 128 * i);
            }
        } else {
            for (int r = 8 * h; r < 8 * h + 8; r++) {
                const bool in = t0 + r < end;
                const float *src = vg + (in ? t0 + r : begin) * v_ts + 4 * lane;
                float *dst = stage + r * GEM_CU_D;
                const int sw = gem_tf32_swz(r);
#pragma unroll
                for (int i = 0; i < 4; i++)
                    gem_cp16_zfill(dst + 4 * ((lane + 32 * i) ^ sw), src + 128 * i, in ? 16 : 0);
            }
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    constexpr int NTB = (GEM_MMA_TILE * GEM_CU_ROPE_PAIRS + GEM_KFV_PAIR_THREADS - 1) /
                        GEM_KFV_PAIR_THREADS;
    float tc[NTB], ts[NTB];
    if (HOIST) { /* the table's angles and the first tile's before the launch wait */
#pragma unroll
        for (int n = 0; n < NTB; n++) {
            const int i = tid + n * GEM_KFV_PAIR_THREADS;
            tc[n] = ts[n] = 0.f;
            if (i < T * NP) {
                const int ln = i & 31, e = (i >> 5) & 3, k = (i >> 7) & 3, x = i >> 9;
                const int u = (ln >> 2) + 8 * x, j = 16 * k + 4 * (ln & 3) + e;
                gem_rope_cs(u, rope->inv_freq[j], &tc[n], &ts[n]);
            }
        }
        if (nmine > 0) {
            float c, s;
            gem_rope_cs(rope->pos0 + begin + (int64_t)tile0 * T, rope->inv_freq[32 * h + lane], &c, &s);
            scs[(size_t)w * 32 + lane] = make_float2(c, s);
        }
        pdl_wait();
        if (threadIdx.x == 0)
            MY[1] = gtimer();
    }
    if (!LOADS_FIRST && nmine > 0)
        copy(begin + (int64_t)tile0 * T);

    const float *qg = q + g * G * GEM_CU_D;
    if (LOADS_FIRST) {
        /* every load of the thread's Q pieces, rotating pairs and table weights first */
        constexpr int NQP = (GEM_CU_GROUP * 384 + GEM_KFV_PAIR_THREADS - 1) / GEM_KFV_PAIR_THREADS;
        constexpr int NRP = (GEM_CU_GROUP * GEM_CU_ROPE_PAIRS + GEM_KFV_PAIR_THREADS - 1) /
                            GEM_KFV_PAIR_THREADS;
        float lq[NQP], lw[NQP], lr0[NRP], lr1[NRP], tw0[NTB], tw1[NTB];
#pragma unroll
        for (int n = 0; n < NQP; n++) {
            const int i = tid + n * GEM_KFV_PAIR_THREADS;
            if (i < G * 384) {
                const int hd = i / 384, x = i % 384, d = x < 192 ? 64 + x : 128 + x;
                lq[n] = __ldg(qg + hd * GEM_CU_D + d);
                lw[n] = __ldg(kw + d);
            }
        }
#pragma unroll
        for (int n = 0; n < NRP; n++) {
            const int i = tid + n * GEM_KFV_PAIR_THREADS;
            if (i < G * NP) {
                const int hd = i / NP, j = i % NP;
                lr0[n] = __ldg(qg + hd * GEM_CU_D + j);
                lr1[n] = __ldg(qg + hd * GEM_CU_D + HALF + j);
            }
        }
#pragma unroll
        for (int n = 0; n < NTB; n++) {
            const int i = tid + n * GEM_KFV_PAIR_THREADS;
            if (i < T * NP) {
                const int ln = i & 31, e = (i >> 5) & 3, k = (i >> 7) & 3;
                const int j = 16 * k + 4 * (ln & 3) + e;
                tw0[n] = __ldg(kw + j);
                tw1[n] = __ldg(kw + HALF + j);
            }
        }
        if (nmine > 0)
            copy(begin + (int64_t)tile0 * T);
#pragma unroll
        for (int n = 0; n < NQP; n++) {
            const int i = tid + n * GEM_KFV_PAIR_THREADS;
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
            const int i = tid + n * GEM_KFV_PAIR_THREADS;
            if (i < G * NP)
                sqr[i] = make_float2(lr0[n], lr1[n]);
        }
#pragma unroll
        for (int n = 0; n < NTB; n++) {
            const int i = tid + n * GEM_KFV_PAIR_THREADS;
            if (i < T * NP) {
                const int ln = i & 31, e = (i >> 5) & 3, k = (i >> 7) & 3, x = i >> 9;
                const int u = (ln >> 2) + 8 * x, j = 16 * k + 4 * (ln & 3) + e;
                float c, s;
                if (HOIST) {
                    c = tc[n];
                    s = ts[n];
                } else {
                    gem_rope_cs(u, rope->inv_freq[j], &c, &s);
                }
                scf[i] = make_float4(tw0[n] * c, tw1[n] * s, tw0[n] * s, tw1[n] * c);
            }
        }
    } else {
        for (int i = tid; i < G * 384; i += GEM_KFV_PAIR_THREADS) {
            const int hd = i / 384, x = i % 384, d = x < 192 ? 64 + x : 128 + x;
            const int kq = (d >> 4) - (d < HALF ? 4 : 8), t4 = (d >> 2) & 3;
            const int at = hd * 384 + 4 * ((4 * kq + t4) ^ gem_tf32_swz(hd)) + (d & 3);
            uint32_t b, s;
            gem_tf32_split(__ldg(qg + hd * GEM_CU_D + d) * __ldg(kw + d), b, s);
            sqb[at] = __uint_as_float(b);
            sqs[at] = __uint_as_float(s);
        }
        for (int i = tid; i < G * NP; i += GEM_KFV_PAIR_THREADS) {
            const int hd = i / NP, j = i % NP;
            sqr[i] = make_float2(__ldg(qg + hd * GEM_CU_D + j),
                                 __ldg(qg + hd * GEM_CU_D + HALF + j));
        }
        for (int i = tid; i < T * NP; i += GEM_KFV_PAIR_THREADS) {
            const int ln = i & 31, e = (i >> 5) & 3, k = (i >> 7) & 3, x = i >> 9;
            const int u = (ln >> 2) + 8 * x, j = 16 * k + 4 * (ln & 3) + e;
            float c, s;
            gem_rope_cs(u, rope->inv_freq[j], &c, &s);
            const float wl = __ldg(kw + j), wh = __ldg(kw + HALF + j);
            scf[i] = make_float4(wl * c, wh * s, wl * s, wh * c);
        }
    }
    __syncthreads();
    if (tid == 0)
        MY[2] = gtimer();

    float o[16][4];
#pragma unroll
    for (int mt = 0; mt < 16; mt++)
        o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, s0 = 0.f, s1 = 0.f;
    float *const sp = spt + (size_t)w * T * G;
    float2 *const cs = scs + (size_t)w * 32;
    float4 *const xmine = sx + (size_t)w * 32, *const xother = sx + (size_t)(w ^ 1) * 32;
    const int swg = gem_tf32_swz(grp), swt = gem_tf32_swz(tig);
    const int lo = 4 * (tig ^ (swg & 3)), s2 = 16 * (swg >> 2);
    const float *const rae = stage + grp * GEM_CU_D + lo + s2,
                      *const rao = stage + grp * GEM_CU_D + lo - s2;
    const float *const rbe = rae + 8 * GEM_CU_D, *const rbo = rao + 8 * GEM_CU_D;
    const float *const rre = rae + 32 * h, *const rro = rao + 32 * h;
    const float *const rrbe = rbe + 32 * h, *const rrbo = rbo + 32 * h;
    const int nr0 = 16 * (h ? 20 : 4), q0 = 16 * 12 * h;
    const float *const nae = rae + nr0, *const nao = rao + nr0, *const nbe = rbe + nr0,
                      *const nbo = rbo + nr0;
    const float *const qbe = sqb + grp * 384 + lo + s2 + q0,
                      *const qbo = sqb + grp * 384 + lo - s2 + q0;
    const float *const qse = sqs + grp * 384 + lo + s2 + q0,
                      *const qso = sqs + grp * 384 + lo - s2 + q0;
    const float2 *const hqr = sqr + grp * NP + 32 * h + 4 * tig;
    const float4 *const hcf = scf + 2 * h * 4 * 32 + lane;
    const float *const vbase = stage + tig * GEM_CU_D + 4 * (grp ^ swt) + 256 * h;
    unsigned cwait = 0, cfree = 0; /* 32-bit clocks: a call is far below 2^32 cycles */
    const unsigned cloop = WAITCLK ? (unsigned)clock() : 0u;
    for (int jt = 0; jt < nmine; jt++) {
        const int64_t t0 = begin + (int64_t)(tile0 + jt * stride) * T;
        if (jt > 0) {
            const unsigned c0 = WAITCLK ? (unsigned)clock() : 0u;
            gem_pair_sync(bar, (jt + 1) & 1);
            if (WAITCLK)
                cfree += (unsigned)clock() - c0;
            copy(t0);
        }
        if (!HOIST || jt > 0) {
            float c, s;
            gem_rope_cs(rope->pos0 + t0, rope->inv_freq[32 * h + lane], &c, &s);
            cs[lane] = make_float2(c, s);
        }
        const unsigned c1 = WAITCLK ? (unsigned)clock() : 0u;
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        gem_pair_sync(bar, jt & 1);
        if (WAITCLK)
            cwait += (unsigned)clock() - c1;
        float sa[2][3][4];
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int pc = 0; pc < 3; pc++)
                sa[u][pc][0] = sa[u][pc][1] = sa[u][pc][2] = sa[u][pc][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
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
                al[e] = fmaf(qq.x, c.x, qq.y * c.y);
                ah[e] = fmaf(qq.y, c.x, -(qq.x * c.y));
#pragma unroll
                for (int x = 0; x < 2; x++) {
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
#pragma unroll 6
        for (int kx = 0; kx < 12; kx++) {
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
        gem_pair_sync(bar, (jt + 1) & 1);
        const float4 xo = xother[lane];
        const float oth[4] = {xo.x, xo.y, xo.z, xo.w};
        float sv[4];
#pragma unroll
        for (int r = 0; r < 4; r++)
            sv[r] = (h ? oth[r] + part[r] : part[r] + oth[r]) * scale;
        gem_kfv_pair_update(sv, t0, end, m0, m1, s0, s1, o, sp, vbase, grp, tig);
    }
    if (lane == 0) {
        MY[3 + w] = gtimer();
        if (WAITCLK) {
            MY[SL_WAIT + w] = (uint64_t)cwait;
            MY[SL_FREE + w] = (uint64_t)cfree;
            MY[SL_LOOP + w] = (uint64_t)((unsigned)clock() - cloop);
        }
    }
    if (MERGE_FAST)
        tl_pair_merge_fast(stiles, o, m0, m1, s0, s1, p, g, n_q_heads, part_m, part_s, part_o);
    else
        gem_kfv_pair_merge(stiles, o, m0, m1, s0, s1, p, g, n_q_heads, part_m, part_s, part_o);
    __syncthreads();
    if (tid == 0)
        MY[15] = gtimer();
#undef MY
}

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* the k-th smallest of n values (copied, sorted) */
static double kth(const double *x, int n, int k)
{
    double *c = (double *)malloc((size_t)n * sizeof(double));
    memcpy(c, x, (size_t)n * sizeof(double));
    qsort(c, (size_t)n, sizeof(double), cmp_double);
    const double r = c[k < 0 ? 0 : (k >= n ? n - 1 : k)];
    free(c);
    return r;
}

typedef void (*tl_fn)(const float *, const float *, const gem_cu_rope, const float *, int64_t,
                      int64_t, float *, float *, float *, int64_t, int64_t, int64_t, float,
                      uint64_t *);

/* the stamped copies: 3 the library's body, 4 its prologue's loads first, 5 and
 * the lean merge, 6 the loads first and the angles before the launch wait, 7 version 3 counting
 * the cycles its warps wait, 8 version 6 with the tiles dealt round robin */
static tl_fn tl_version(int ver)
{
    switch (ver) {
    case 3: return tl_copy<false, false, false, false>;
    case 4: return tl_copy<true, false, false, false>;
    case 5: return tl_copy<true, true, false, false>;
    case 6: return tl_copy<true, false, true, false>;
    case 8: return tl_copy<true, false, true, false, true>;
    default: return tl_copy<false, false, false, true>;
    }
}

/* Pearson's correlation of x and y (n) */
static double pearson(const double *x, const double *y, int n)
{
    double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= n;
    my /= n;
    for (int i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : 0.0;
}

enum { TL_FIELDS = 12 };
static const char *tl_names[TL_FIELDS] = {
    "first start", "last start", "last wait", "prologue med", "prologue last",
    "tiles first", "tiles med", "tiles last", "end med", "end last", "red start", "red end"};

int main(int argc, char **argv)
{
    int rounds = 10, check_only = 0, want[NV] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    int64_t lengths[8] = {20480, 32768, 65536, 131072}, parts[4] = {33, 64};
    int nl = 4, np = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lengths") && i + 1 < argc) {
            nl = 0;
            for (char *t = strtok(argv[++i], ","); t && nl < 8; t = strtok(NULL, ","))
                lengths[nl++] = atoll(t);
        } else if (!strcmp(argv[i], "--partitions") && i + 1 < argc) {
            np = 0;
            for (char *t = strtok(argv[++i], ","); t && np < 4; t = strtok(NULL, ","))
                parts[np++] = atoll(t);
        } else if (!strcmp(argv[i], "--versions") && i + 1 < argc) {
            for (int v = 0; v < NV; v++)
                want[v] = 0;
            for (char *t = strtok(argv[++i], ","); t; t = strtok(NULL, ",")) {
                const int v = atoi(t);
                if (v < 0 || v >= NV) {
                    fprintf(stderr, "unknown version %s (0 .. %d)\n", t, NV - 1);
                    return 2;
                }
                want[v] = 1;
            }
            want[2] = 1; /* the bits' lead */
        } else if (!strcmp(argv[i], "--check-only")) {
            check_only = 1;
        } else {
            fprintf(stderr, "usage: kfv_timeline [--rounds N] [--lengths a,b,..] "
                            "[--partitions a,b] [--versions a,b,..] [--check-only]\n");
            return 2;
        }
    }
    if (rounds < 1 || nl < 1 || np < 1)
        return 2;
    for (int i = 0; i < nl; i++)
        if (lengths[i] < 1 || lengths[i] > (1 << 20))
            return 2;
    for (int i = 0; i < np; i++)
        if (parts[i] < 1 || parts[i] > 1024)
            return 2;
    gem_decode_ctx *ctx = NULL;
    GEM_TRY(gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &ctx));
    cudaStream_t stream;
    cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    cudaCheck(cudaFuncSetAttribute(tl_library, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)GEM_KFV_PAIR_BYTES));
    for (int ver = 3; ver < NV; ver++)
        cudaCheck(cudaFuncSetAttribute(tl_version(ver),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)GEM_KFV_PAIR_BYTES));
    const float scale = 1.0f;
    const gem_decode_shape shape = {NQ, NKV, D, D, scale};
    double inv_freq[NPAIRS];
    for (int j = 0; j < NPAIRS; j++)
        inv_freq[j] = pow(1e6, -2.0 * j / (double)D);
    float hw[D];
    fill_uniform(hw, D, 99, 0.5f, 1.5f);
    float *dw;
    cudaCheck(cudaMalloc(&dw, sizeof hw));
    cudaCheck(cudaMemcpy(dw, hw, sizeof hw, cudaMemcpyHostToDevice));
    gem_cu_rope rope;
    memset(&rope, 0, sizeof rope);
    for (int j = 0; j < NPAIRS; j++)
        rope.inv_freq[j] = inv_freq[j];
    rope.pos0 = 0;
    const int nblk_max = 1024 * NKV;
    uint64_t *dst, *dred, *dwait;
    cudaCheck(cudaMalloc(&dst, (size_t)nblk_max * NSLOT * sizeof(uint64_t)));
    cudaCheck(cudaMalloc(&dred, (size_t)NQ * 2 * 2 * sizeof(uint64_t)));
    cudaCheck(cudaMalloc(&dwait, sizeof(uint64_t)));
    uint64_t *hst = (uint64_t *)malloc((size_t)nblk_max * NSLOT * sizeof(uint64_t));
    uint64_t hred[NQ * 2 * 2], hwait;
    printf("K rebuilt from V, F32 V, scale 1.0, rows from position 0; times in ms, stamps in us\n");
    int failed = 0;
    for (int li = 0; li < nl; li++) {
        const int64_t live = lengths[li];
        const size_t n = (size_t)NKV * (size_t)live * D;
        float *hq = (float *)malloc(NQ * D * sizeof(float));
        float *hv = (float *)malloc(n * sizeof(float));
        fill_uniform(hq, NQ * D, 11 + (uint64_t)live, -1.7f, 1.7f);
        fill_uniform(hv, n, 13 + (uint64_t)live, -1.7f, 1.7f);
        const gem_k_from_v host_rot = {hw, inv_freq, NPAIRS, D / 2, 0};
        gem_kv_view kfv_host;
        memset(&kfv_host, 0, sizeof kfv_host);
        kfv_host.v = hv;
        kfv_host.k_dtype = kfv_host.v_dtype = GEM_DTYPE_F32;
        kfv_host.v_head_stride = live * D;
        kfv_host.v_token_stride = D;
        kfv_host.live = kfv_host.capacity = live;
        kfv_host.k_from_v = &host_rot;
        double *ref = (double *)malloc(NQ * D * sizeof(double));
        GEM_TRY(gem_attn_reference_kv(&shape, hq, &kfv_host, ref, NQ * D));
        float *dq, *dv, *dout;
        cudaCheck(cudaMalloc(&dq, NQ * D * sizeof(float)));
        cudaCheck(cudaMalloc(&dv, n * sizeof(float)));
        cudaCheck(cudaMalloc(&dout, NQ * D * sizeof(float)));
        cudaCheck(cudaMemcpy(dq, hq, NQ * D * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(dv, hv, n * sizeof(float), cudaMemcpyHostToDevice));
        const size_t ws_bytes = (size_t)1024 * NQ * (D + 2) * sizeof(float);
        void *dws;
        cudaCheck(cudaMalloc(&dws, ws_bytes));
        gem_k_from_v dev_rot = host_rot;
        dev_rot.k_weight = dw;
        gem_kv_view kv;
        memset(&kv, 0, sizeof kv);
        kv.v = dv;
        kv.k_dtype = kv.v_dtype = GEM_DTYPE_F32;
        kv.v_head_stride = live * D;
        kv.v_token_stride = D;
        kv.live = kv.capacity = live;
        kv.k_from_v = &dev_rot;
        float *hout = (float *)malloc(NQ * D * sizeof(float));
        float *hlead = (float *)malloc(NQ * D * sizeof(float));
        float *hfirst = (float *)malloc(NQ * D * sizeof(float));
        for (int pi = 0; pi < np; pi++) {
            const int64_t P = parts[pi];
            const gem_decode_config cfg = {GEM_ROUTE_FUSED, P, 8};
            float *pm = (float *)dws, *ps = pm + P * NQ, *po = ps + P * NQ;
            const dim3 grid1((unsigned)P, NKV);
            auto run = [&](int ver, bool stamp) {
                if (stamp)
                    wait_stamped<<<1, 1, 0, stream>>>(50000, dwait);
                if (ver <= 1) { /* 0: the library's default config */
                    GEM_TRY(gem_decode(ctx, &shape, dq, &kv, dout, dws, ws_bytes,
                                       ver == 0 ? NULL : &cfg, stream));
                    return;
                }
                if (ver == 2)
                    cudaCheck(launch_pdl_shared(tl_library, grid1, GEM_KFV_PAIR_THREADS,
                                                (size_t)GEM_KFV_PAIR_BYTES, stream,
                                                (const float *)dq, (const float *)dw, rope,
                                                (const float *)dv, live * D, (int64_t)D, pm, ps,
                                                po, live, P, (int64_t)NQ, scale, dst));
                else
                    cudaCheck(launch_pdl_shared(tl_version(ver), grid1,
                                                GEM_KFV_PAIR_THREADS, (size_t)GEM_KFV_PAIR_BYTES,
                                                stream, (const float *)dq, (const float *)dw, rope,
                                                (const float *)dv, live * D, (int64_t)D, pm, ps,
                                                po, live, P, (int64_t)NQ, scale, dst));
                cudaCheck(launch_pdl(tl_reducer, dim3(NQ, D / GEM_CU_THREADS), GEM_CU_THREADS,
                                     stream, (const float *)pm, (const float *)ps,
                                     (const float *)po, dout, P, dred));
            };
            /* versions 0-2 and 8 (other partials) against the double reference; 3-7 bit for
             * bit against version 2 (the library's body); every version's repeat bit for bit
             * against its first call */
            int valid[NV];
            for (int ver = 0; ver < NV; ver++) {
                valid[ver] = want[ver];
                if (!want[ver])
                    continue;
                for (int rep = 0; rep < 2; rep++) {
                    cudaCheck(cudaMemsetAsync(dout, 0xFF, NQ * D * sizeof(float), stream));
                    run(ver, false);
                    cudaCheck(cudaStreamSynchronize(stream));
                    cudaCheck(cudaMemcpy(hout, dout, NQ * D * sizeof(float),
                                         cudaMemcpyDeviceToHost));
                    if (rep == 1) {
                        if (memcmp(hfirst, hout, NQ * D * sizeof(float)) != 0) {
                            printf("%-7lld P%-4lld v%d INVALID: the repeat differs\n",
                                   (long long)live, (long long)P, ver);
                            valid[ver] = 0;
                        }
                        continue;
                    }
                    memcpy(hfirst, hout, NQ * D * sizeof(float));
                    if (ver <= 2 || ver == 8) {
                        double num = 0, den = 0;
                        for (int j = 0; j < NQ * D; j++) {
                            num += (hout[j] - ref[j]) * (hout[j] - ref[j]);
                            den += ref[j] * ref[j];
                        }
                        printf("%-7lld P%-4lld v%d nmse %.3g against the double reference\n",
                               (long long)live, (long long)P, ver, num / den);
                        if (!(num / den <= 1e-10))
                            valid[ver] = 0;
                        if (ver == 2)
                            memcpy(hlead, hout, NQ * D * sizeof(float));
                    } else if (!valid[2] || memcmp(hlead, hout, NQ * D * sizeof(float)) != 0) {
                        printf("%-7lld P%-4lld v%d INVALID: bits differ from v2's\n",
                               (long long)live, (long long)P, ver);
                        valid[ver] = 0;
                    }
                }
                failed |= !valid[ver];
            }
            if (check_only)
                continue;
            double *t = (double *)calloc((size_t)NV * 2 * rounds, sizeof(double));
            for (int wu = 0; wu < 3; wu++)
                for (int ver = 0; ver < NV; ver++)
                    if (valid[ver])
                        run(ver, false);
            for (int r = 0; r < rounds; r++)
                for (int pass = 0; pass < 2; pass++)
                    for (int j = 0; j < NV; j++) {
                        const int ver = pass == 0 ? j : NV - 1 - j;
                        if (!valid[ver])
                            continue;
                        wait_kernel<<<1, 1, 0, stream>>>(50000);
                        cudaCheck(cudaEventRecord(e0, stream));
                        run(ver, false);
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
                printf("%-7lld P%-4lld v%d  min %.4f  median %.4f  max %.4f  %.1f GB/s\n",
                       (long long)live, (long long)P, ver, ti[0], med, ti[2 * rounds - 1],
                       (double)n * 4.0 / (med * 1e-3) / 1e9);
            }
            free(t);
            /* the stamped calls: 5 each, the median of each field */
            const int nb = (int)P * NKV, CALLS = 5;
            for (int ver = 2; ver < NV; ver++) {
                if (!valid[ver])
                    continue;
                double f[TL_FIELDS][CALLS];
                /* per SM (one block an SM at one wave): each call's block end, by SM id */
                enum { MAXSM = 1024 };
                double *smend = (double *)calloc((size_t)CALLS * MAXSM, sizeof(double));
                int one_each = 1, nsm = 0;
                double wfrac[CALLS], ffrac[CALLS];
                for (int c = 0; c < CALLS; c++) {
                    cudaCheck(cudaMemsetAsync(dst, 0, (size_t)nb * NSLOT * sizeof(uint64_t),
                                              stream));
                    run(ver, true);
                    cudaCheck(cudaStreamSynchronize(stream));
                    cudaCheck(cudaMemcpy(hst, dst, (size_t)nb * NSLOT * sizeof(uint64_t),
                                         cudaMemcpyDeviceToHost));
                    cudaCheck(cudaMemcpy(hred, dred, sizeof hred, cudaMemcpyDeviceToHost));
                    cudaCheck(cudaMemcpy(&hwait, dwait, sizeof hwait, cudaMemcpyDeviceToHost));
                    double *s0 = (double *)malloc((size_t)nb * sizeof(double)),
                           *s1 = (double *)malloc((size_t)nb * sizeof(double)),
                           *s2 = (double *)malloc((size_t)nb * sizeof(double)),
                           *s3 = (double *)malloc((size_t)nb * sizeof(double)),
                           *s15 = (double *)malloc((size_t)nb * sizeof(double));
                    for (int b = 0; b < nb; b++) {
                        const uint64_t *m = hst + (size_t)b * NSLOT;
                        s0[b] = ((double)m[0] - (double)hwait) * 1e-3;
                        s1[b] = ((double)m[1] - (double)hwait) * 1e-3;
                        s2[b] = ver == 2 ? 0 : ((double)m[2] - (double)m[1]) * 1e-3;
                        uint64_t last = 0;
                        for (int w = 0; w < 2 * GEM_KFV_PAIR_PAIRS; w++)
                            last = m[3 + w] > last ? m[3 + w] : last;
                        s3[b] = ver == 2 ? 0 : ((double)last - (double)hwait) * 1e-3;
                        s15[b] = ((double)m[15] - (double)hwait) * 1e-3;
                    }
                    {
                        int seen[MAXSM] = {0};
                        for (int b = 0; b < nb; b++) {
                            const uint64_t id = hst[(size_t)b * NSLOT + SL_SMID];
                            if (id >= MAXSM || seen[id]++) {
                                one_each = 0;
                                continue;
                            }
                            smend[(size_t)c * MAXSM + id] = s15[b];
                            nsm = (int)id + 1 > nsm ? (int)id + 1 : nsm;
                        }
                    }
                    if (ver == 7) { /* the warps' waits as fractions of their tiles' cycles */
                        double *fw = (double *)malloc((size_t)nb * 10 * sizeof(double));
                        double *ff = (double *)malloc((size_t)nb * 10 * sizeof(double));
                        int k = 0;
                        for (int b = 0; b < nb; b++)
                            for (int w = 0; w < 2 * GEM_KFV_PAIR_PAIRS; w++) {
                                const uint64_t *m = hst + (size_t)b * NSLOT;
                                const double loop = (double)m[SL_LOOP + w];
                                if (loop <= 0)
                                    continue;
                                fw[k] = (double)m[SL_WAIT + w] / loop;
                                ff[k++] = (double)m[SL_FREE + w] / loop;
                            }
                        wfrac[c] = k ? kth(fw, k, k / 2) : 0;
                        ffrac[c] = k ? kth(ff, k, k / 2) : 0;
                        free(fw);
                        free(ff);
                    }
                    uint64_t rs[NQ * 2], re[NQ * 2];
                    for (int b = 0; b < NQ * 2; b++) {
                        rs[b] = hred[2 * b];
                        re[b] = hred[2 * b + 1];
                    }
                    qsort(rs, NQ * 2, sizeof(uint64_t), cmp_u64);
                    qsort(re, NQ * 2, sizeof(uint64_t), cmp_u64);
                    f[0][c] = kth(s0, nb, 0);
                    f[1][c] = kth(s0, nb, nb - 1);
                    f[2][c] = kth(s1, nb, nb - 1);
                    f[3][c] = kth(s2, nb, nb / 2);
                    f[4][c] = kth(s2, nb, nb - 1);
                    f[5][c] = kth(s3, nb, 0);
                    f[6][c] = kth(s3, nb, nb / 2);
                    f[7][c] = kth(s3, nb, nb - 1);
                    f[8][c] = kth(s15, nb, nb / 2);
                    f[9][c] = kth(s15, nb, nb - 1);
                    f[10][c] = ((double)rs[0] - (double)hwait) * 1e-3;
                    f[11][c] = ((double)re[NQ * 2 - 1] - (double)hwait) * 1e-3;
                    free(s0);
                    free(s1);
                    free(s2);
                    free(s3);
                    free(s15);
                }
                printf("%-7lld P%-4lld v%d  stamps:", (long long)live, (long long)P, ver);
                for (int k = 0; k < TL_FIELDS; k++) {
                    if (ver == 2 && k >= 3 && k <= 7) /* no prologue stamps */
                        continue;
                    printf("  %s %.2f", tl_names[k], kth(f[k], CALLS, CALLS / 2));
                }
                printf("\n");
                if (ver == 7)
                    printf("%-7lld P%-4lld v%d  a warp's cycles in its tiles (median): waiting "
                           "for a tile %.1f%%, for the stage %.1f%%\n",
                           (long long)live, (long long)P, ver,
                           100 * kth(wfrac, CALLS, CALLS / 2), 100 * kth(ffrac, CALLS, CALLS / 2));
                if (one_each && nsm > 0) {
                    /* is an SM that ends late in one call late in the next? */
                    double *x = (double *)malloc((size_t)nsm * sizeof(double));
                    double *y = (double *)malloc((size_t)nsm * sizeof(double));
                    double mean[MAXSM] = {0};
                    printf("%-7lld P%-4lld v%d  per SM: end spread", (long long)live,
                           (long long)P, ver);
                    for (int c = 0; c < CALLS; c++) {
                        int k = 0;
                        for (int id = 0; id < nsm; id++)
                            if (smend[(size_t)c * MAXSM + id] > 0)
                                x[k++] = smend[(size_t)c * MAXSM + id];
                        printf(" %.1f", kth(x, k, k - 1) - kth(x, k, 0));
                    }
                    printf(" us; correlation of an SM's end between calls");
                    for (int c = 1; c < CALLS; c++) {
                        int k = 0;
                        for (int id = 0; id < nsm; id++) {
                            const double a = smend[(size_t)(c - 1) * MAXSM + id],
                                         b = smend[(size_t)c * MAXSM + id];
                            if (a > 0 && b > 0) {
                                x[k] = a;
                                y[k++] = b;
                            }
                        }
                        printf(" %.2f", pearson(x, y, k));
                    }
                    for (int id = 0; id < nsm; id++)
                        for (int c = 0; c < CALLS; c++)
                            mean[id] += smend[(size_t)c * MAXSM + id] / CALLS;
                    printf("; latest SMs (mean end us):");
                    for (int r = 0; r < 6; r++) {
                        int best = -1;
                        for (int id = 0; id < nsm; id++)
                            if (mean[id] > 0 && (best < 0 || mean[id] > mean[best]))
                                best = id;
                        if (best < 0)
                            break;
                        printf(" %d (%.1f)", best, mean[best]);
                        mean[best] = 0;
                    }
                    printf("\n");
                    free(x);
                    free(y);
                }
                free(smend);
            }
        }
        cudaFree(dq);
        cudaFree(dv);
        cudaFree(dout);
        cudaFree(dws);
        free(hq);
        free(hv);
        free(ref);
        free(hout);
        free(hlead);
        free(hfirst);
    }
    cudaFree(dw);
    cudaFree(dst);
    cudaFree(dred);
    cudaFree(dwait);
    free(hst);
    gem_decode_ctx_destroy(ctx);
    printf("%s\n", failed ? "FAILED" : "all versions checked");
    return failed;
}
