/*
The fused first pass on tensor cores for BF16 K and V, exact to F32: an experiment against the
library's CUDA-core first pass (gem_fused_first_pass_bf16), at the Gemma 4 full-attention shape
(32 query heads over 4 KV heads, D512, scale 1/sqrt(512) and 1.0).

Why: on BF16 caches the library's first pass is bound by instruction issue, not by DRAM (run 15:
0.47 ms at 128K, 49% of the read bandwidth; ncu 71% SM throughput in run 18): per token and KV
head it issues about 750 warp instructions, of which 256 are the FMAs of the dots and the V
update. mma.sync m16n8k16 (BF16 in, F32 accumulate) does a k16 x n8 block of those FMAs for
sixteen rows in one instruction.

Exactness: a product of two BF16 values is exact in F32. Q (F32) is split into three BF16
pieces, q = hi + mid + lo + r with |r| <= 2^-24 |q| (each piece rounds the rest to 8 bits), so
Q.K is the F32 dot to within F32 rounding; the softmax weights p (F32, in [0, 1]) into two,
p = hi + lo + r with |r| <= 2^-17 p, which bounds the V update's relative error per token far
below the NMSE gate. The tensor core accumulates in F32 in a fixed order: the bits repeat.

Layout of one block (partition p, KV head g; 256 threads, warps w = 0..7, lane = 4*grp + tig):
  scores: M = 32 rows (hi and mid pieces of the eight heads in m-tile 0, lo in m-tile 1),
    N = 8 tokens per n-tile, K = dims: warp w takes 64 dims in four k-steps and sums them over
    the 16 tokens of a tile; a thread loads 16 bytes of a K row (8 dims), which are its B
    fragments for two k-steps (any order of the dims is the same dot, so the dims are laid out
    as the loads fall: k-step 2p'+e, column 2*tig + h (+8) <-> dim 64w + 32p' + 8 tig + 4e + h
    (+2)); Q's A fragments of those dims stay in registers (24 of them).
    The eight warps' partial scores meet in shared memory, summed in warp order.
  softmax: warp h owns head h, lane t (mod 16) token t, as in the library.
  V update: M = 16 rows (hi and lo pieces of the weights of the eight heads), N = dims (warp w
    owns 64 in eight n-tiles), K = the 16 tokens of the tile: a thread loads 16 bytes (8 dims)
    of the V rows of tokens 2 tig, 2 tig + 1, 2 tig + 8, 2 tig + 9 and pairs them with byte
    permutes into the B fragments of its eight n-tiles (column grp <-> dim 64w + 8 grp + j in
    n-tile j). O stays in the accumulators (32 floats per thread: head grp, dims 64w + 16 tig
    .. + 15, hi and lo rows added at the end).
Per tile of 16 tokens a warp issues 16 + 8 mma, 8 loads of 16 bytes, 16 byte permutes, and the
softmax; two barriers per tile (the library: two per 8 tokens).

version 1 is the library (gem_decode, BF16 head-major): the comparison.
version 2 is the tensor-core first pass above with the library's reducer body (no PDL).
version 3 was version 2 with Q's fragments in shared memory and V two tiles ahead (removed; the
  code is in commit f13a100).
  H200 run 21: the same as version 2 (0.2690 / 0.2685 ms at 128K).
version 4 was version 2 with K loaded in whole 128-byte lines and routed by shuffles (removed;
  commit f13a100).
  H200 run 21: slower, 0.3076 ms at 128K against 0.2733 (DRAM 73% against 83%, L2 busy 83%
  against 94%: the L2 figure follows the DRAM one, it was not the limit).
version 5 is version 2 with .L2::256B on every K and V load.
  H200 run 23: a tie (0.2690 / 0.2685 ms at 128K; at P 66, 0.2694 / 0.2683, also a tie with P 64).
versions 6 and 7 were version 2 with the K and V rows of the tile 2 (6) or 4 (7) tiles ahead
  prefetched into the L2 (cp.async.bulk.prefetch, 1 KiB a row, one row per thread of two warps;
  removed, the code is in commit c805675). Predicted 0.269 -> about 0.255 ms at 128K, since a
  prefetch holds no register. H200 run 39: slower at every length, 128K 0.2745 (v2) -> 0.2831
  (6) and 0.2931 (7), 64K 0.1450 -> 0.1494 and 0.1586 (v5 0.2733 / 0.1434 in the same run).
version 8 was version 2 with every thread's eight 16-byte pieces of a tile copied by cp.async
  into 3 stages of shared memory private to the thread (96 KiB a block) and read back when the
  tile is computed, so that two tiles stream while one is computed with no register holding a
  load (as the GeGLU tile product gained, runs 35-36; removed, the code is in commit e15734b).
  Predicted 0.2745 -> 0.262 ms at 128K, or a tie if the L2 is the limit. H200 run 40: the same
  bits as version 2 and much slower: 128K 0.2738 -> 0.3901 ms, 64K 0.1437 -> 0.2070, 8K 0.0290
  -> 0.0394. Not profiled; the 96 KiB stages leave little L1 and at most two blocks an SM.
  H200: results/h200/run19 (as first written here), then the library's copy (run 20).

Run 78 (results/h200/run78/mma-decode-1..7.txt, one session, medians of 8-10 ABBA rounds; the
figures below are 128K / 64K ms unless said): where the last 10% goes.
versions 9-11 stage the tiles in shared memory by the bulk-copy engine: one producer warp asks
  for whole 1 KiB rows (cp.async.bulk, completion counted on an mbarrier), STAGES tiles ahead,
  eight consumer warps read the fragments by ldmatrix from rows padded to 1,040 bytes (the
  consumer arithmetic, staged_tile, is shared with versions 22-28). 9: 4 stages, one block an
  SM (P 33): 0.329; 10: 6 stages, 0.338; 11: 3 stages, two blocks an SM (P 66): 0.2694 against
  0.2712 for version 2. Exact (NMSE 5e-12 .. 1.3e-11), repeats bitwise.
versions 12-15 (diagnostics, not validated) split 11 and 9 into their halves: the arithmetic
  alone (no copies) 0.148 at two blocks an SM, 0.168 at one; the copies alone 0.268 / 0.275. At
  one block an SM the pass is bound by its arithmetic, at two by the copies, which stream no
  faster than version 2 reads.
version 16 is version 2 with interleaved tiles (block p takes tiles p, p + P, ...): 0.2754
  against 0.2713, slower; 17 is version 11 interleaved: 0.2657; 18 (diagnostic) the copies alone
  interleaved: 0.2598 (4.13 TB/s; the read probe 4,532 GB/s in the same session).
versions 19-21 (diagnostics) are the loads alone through the load/store unit, one tile ahead
  in registers: 19 reads 512 contiguous bytes of a row a warp instruction (the F32 pass's
  shape): 0.2440 (4.40 TB/s); 20 version 2's shape (eight rows x 64 bytes): 0.2492; 21 as 19,
  two tiles ahead: 0.2434. The bulk copies lose to plain loads here, and version 2 loses about
  10% to its arithmetic, not to its bytes in flight.
versions 22-23 load in 19's shape, one tile ahead, and store the tile into three buffers in
  shared memory (97.5 KiB a block): 0.319 / 0.316, much slower. Version 26 says why: version 2
  with 97.5 KiB of unused dynamic shared memory a block takes 0.327 against 0.271. The loads in
  flight live in the L1, which is what shared memory leaves of the SM's 256 KiB (version 8's
  96 KiB ring lost the same way).
versions 24-25 are 22-23 with two buffers (65 KiB a block; tile it + 1 is stored after tile
  it's first barrier, when every warp is past tile it - 1's V update): 24 0.2573 / 0.1373
  against 0.2677 / 0.1403 for version 2 in the same run, 3.9% / 2.1% faster; 25 (interleaved)
  0.2603. Version 24 is the library's BF16 first pass since (gem_fused_first_pass_mma_staged_body,
  with Q's lo fragments in shared memory to hold 128 registers without a spill).
versions 27-28 keep one K and one V buffer (32.5 KiB), K of tile it + 1 and V of tile it stored
  between tile it's barriers: 0.2698 / 0.2823, slower (32-48 bytes of spills, the V loads later).

version 29 (--f16: every version then reads F16 K and V, version 1 the library's F16 pass) is
  the library's staged body on F16 (gem_mma_f16_elem): Q scaled per head by a power of two
  before its split into F16 pieces, the weights by 2^14, both exactly undone. H200 run 80:
  0.0293 / 0.1343 / 0.2511 ms at 8K / 64K / 128K against 0.0389 / 0.2326 / 0.4540 for version
  1 (the library's CUDA-core F16 pass then), NMSE <= 6e-12, and at --q-scale 1e-20 / 1e4 NMSE
  5e-14 / 2e-25: the library's F16 first passes since. --q-scale X multiplies Q (1e-20 and 1e4 exercise the per-head exponent; past about
  1e18 the F32 scores of every route overflow).

./mma_decode [--lengths 8192,65536,131072] [--rounds 10] [--partitions 64] [--f16]
             [--q-scale X] [versions 1 2 5 9-29]
*/
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "common.h"

#include "attn_fused_body.cuh"

extern "C" {
#include "gem/decode.h"
}

#define D 512
#define GROUP 8
#define NKV 4
#define NQ (NKV * GROUP)

/* ---- the tensor-core first pass ---------------------------------------------------------
 * Version 2 as run 19 measured it now lives in the library as gem_fused_first_pass_mma_body
 * (src/cuda/attn_fused_body.cuh: the same arithmetic, row pointers stepped per tile instead of
 * recomputed, which removed an 8-byte spill); this program instantiates that body, so what it
 * times is what ships. */
/* ---- version 2: the register-fed tensor-core first pass -----------------------------------
 * The library's BF16 first pass from run 19 to run 78 (src/cuda/attn_fused_body.cuh had it as
 * gem_fused_first_pass_mma_body; results/h200/run19-run20): each thread's K and V pieces are
 * loaded straight into its mma fragments, one tile ahead. Kept here as the control of the
 * versions that stage the tiles through shared memory. Layout of a block: the header above.
 * The next tile's K rows are loaded after this tile's dots, its V rows after this tile's V
 * update (16-byte loads, L1 no-allocate, L2 evict-first). Two barriers per tile. Rows past the
 * partition's end load as zeros, their scores are -inf, their weights 0. TS > 0: the token
 * stride in elements is TS (dense rows); 0: ts at run time. PF256: every load asks the L2 for
 * the enclosing 256 bytes (version 5); IL: interleaved tiles (version 16). */
template <int TS, bool PF256 = false, bool IL = false>
__device__ __forceinline__ void mma_register_fed_body(
    const float *__restrict__ q,          /* (n_q_heads, 512) */
    const __nv_bfloat16 *__restrict__ k,  /* row (g, t) at element g*k_hs + t*k_ts */
    int64_t k_hs, int64_t k_ts,
    const __nv_bfloat16 *__restrict__ v,  /* row (g, t) at element g*v_hs + t*v_ts */
    int64_t v_hs, int64_t v_ts,
    float *__restrict__ part_m, float *__restrict__ part_s, float *__restrict__ part_o,
    int64_t live, int64_t partitions, int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    __shared__ __align__(16) float sred[GEM_CU_THREADS / 32][GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GEM_CU_GROUP];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    /* IL: interleaved tiles, block p takes tiles p, p + P, p + 2P, ... of the whole length */
    const int64_t begin = IL ? min(p * T, live) : min(p * chunk, live);
    const int64_t end = IL ? live : min(begin + chunk, live), step = IL ? partitions * T : T;
    const int64_t kts = TS > 0 ? (int64_t)TS : k_ts, vts = TS > 0 ? (int64_t)TS : v_ts;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    /* Q's A fragments: qa m-tile 0 (hi, mid), qb m-tile 1 (lo; rows 8-15 zero) */
    uint32_t qa[4][4], qb[4][2];
    {
        const float *qh = q + (g * GEM_CU_GROUP + grp) * GEM_CU_D;
#pragma unroll
        for (int st = 0; st < 4; st++) {
            const int base = 64 * w + 32 * (st >> 1) + 8 * tig + 4 * (st & 1);
            __nv_bfloat16 hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const float x = __ldg(qh + base + u);
                hi[u] = __float2bfloat16_rn(x);
                const float r1 = x - __bfloat162float(hi[u]); /* exact */
                mid[u] = __float2bfloat16_rn(r1);
                lo[u] = __float2bfloat16_rn(r1 - __bfloat162float(mid[u])); /* r1 - mid exact */
            }
            qa[st][0] = gem_pack_bf16(hi[0], hi[1]);
            qa[st][1] = gem_pack_bf16(mid[0], mid[1]);
            qa[st][2] = gem_pack_bf16(hi[2], hi[3]);
            qa[st][3] = gem_pack_bf16(mid[2], mid[3]);
            qb[st][0] = gem_pack_bf16(lo[0], lo[1]);
            qb[st][1] = gem_pack_bf16(lo[2], lo[3]);
        }
    }
    const uint4 zero4 = make_uint4(0u, 0u, 0u, 0u);
    /* K: token begin + grp of the tile's first n-tile, dims 64w + 8 tig (+ 32); n-tile 1 is 8
     * rows further. V: token begin + 2 tig, dims 64w + 8 grp; the others 1, 8, 9 rows further. */
    const __nv_bfloat16 *kp = k + g * k_hs + (begin + grp) * kts + 64 * w + 8 * tig;
    const __nv_bfloat16 *vp = v + g * v_hs + (begin + 2 * tig) * vts + 64 * w + 8 * grp;
    const int64_t k8 = 8 * kts, v8 = 8 * vts;
    uint4 kr[2][2], vr[4];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const bool in = begin + 8 * i + grp < end;
        kr[i][0] = in ? gem_ld16<PF256>(kp + i * k8, pol) : zero4;
        kr[i][1] = in ? gem_ld16<PF256>(kp + i * k8 + 32, pol) : zero4;
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
        const int dt = 2 * tig + (u & 1) + 8 * (u >> 1);
        vr[u] = begin + dt < end ? gem_ld16<PF256>(vp + (u & 1) * vts + (u >> 1) * v8, pol) : zero4;
    }
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;

    for (int64_t t0 = begin; t0 < end; t0 += step) {
        /* the warp's 64 dims of the tile's dots */
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int st = 0; st < 4; st++) {
                const uint4 &kk = kr[i][st >> 1];
                const uint32_t b0 = (st & 1) ? kk.z : kk.x, b1 = (st & 1) ? kk.w : kk.y;
                gem_mma_bf16(d0, qa[st][0], qa[st][1], qa[st][2], qa[st][3], b0, b1);
                gem_mma_bf16(d1, qb[st][0], 0u, qb[st][1], 0u, b0, b1);
            }
            float2 r; /* head grp, tokens 8i + 2 tig, + 1: (hi + mid) + lo */
            r.x = (d0[0] + d0[2]) + d1[0];
            r.y = (d0[1] + d0[3]) + d1[1];
            *reinterpret_cast<float2 *>(&sred[w][grp][8 * i + 2 * tig]) = r;
        }
        kp += step * kts;
#pragma unroll
        for (int i = 0; i < 2; i++) { /* the next tile's K, in flight through this tile */
            const bool in = t0 + step + 8 * i + grp < end;
            kr[i][0] = in ? gem_ld16<PF256>(kp + i * k8, pol) : zero4;
            kr[i][1] = in ? gem_ld16<PF256>(kp + i * k8 + 32, pol) : zero4;
        }
        __syncthreads(); /* sred complete */
        {
            const int t = lane & (T - 1);
            float a = 0.f;
#pragma unroll
            for (int ww = 0; ww < GEM_CU_THREADS / 32; ww++)
                a += sred[ww][w][t];
            const float sc = t0 + t < end ? a * scale : -INFINITY;
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
        __syncthreads(); /* the weights of all eight heads are published */
        {
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
            const float pv[4] = {p01.x, p01.y, p89.x, p89.y};
            __nv_bfloat16 ph[4], pl[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                ph[u] = __float2bfloat16_rn(pv[u]);
                pl[u] = __float2bfloat16_rn(pv[u] - __bfloat162float(ph[u]));
            }
            const uint32_t a0 = gem_pack_bf16(ph[0], ph[1]), a1 = gem_pack_bf16(pl[0], pl[1]),
                           a2 = gem_pack_bf16(ph[2], ph[3]), a3 = gem_pack_bf16(pl[2], pl[3]);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const uint32_t sel = (j & 1) ? 0x7632u : 0x5410u;
                const uint32_t b0 = __byte_perm(gem_word(vr[0], j >> 1), gem_word(vr[1], j >> 1), sel);
                const uint32_t b1 = __byte_perm(gem_word(vr[2], j >> 1), gem_word(vr[3], j >> 1), sel);
                gem_mma_bf16(acc[j], a0, a1, a2, a3, b0, b1);
            }
        }
        vp += step * vts;
#pragma unroll
        for (int u = 0; u < 4; u++) { /* the next tile's V */
            const int dt = 2 * tig + (u & 1) + 8 * (u >> 1);
            vr[u] = t0 + step + dt < end ? gem_ld16<PF256>(vp + (u & 1) * vts + (u >> 1) * v8, pol) : zero4;
        }
        /* the next tile's first barrier orders these sp reads before sp is rewritten, and
         * its second barrier orders this tile's sred reads before sred is rewritten */
    }
    /* the partial: head grp, dims 64w + 16 tig + 0..7 (column 2 tig) and + 8..15 (2 tig + 1) */
    const int64_t row = p * n_q_heads + g * GEM_CU_GROUP + grp;
    float4 *po = reinterpret_cast<float4 *>(part_o + row * GEM_CU_D + 64 * w + 16 * tig);
    po[0] = make_float4(acc[0][0] + acc[0][2], acc[1][0] + acc[1][2], acc[2][0] + acc[2][2],
                        acc[3][0] + acc[3][2]);
    po[1] = make_float4(acc[4][0] + acc[4][2], acc[5][0] + acc[5][2], acc[6][0] + acc[6][2],
                        acc[7][0] + acc[7][2]);
    po[2] = make_float4(acc[0][1] + acc[0][3], acc[1][1] + acc[1][3], acc[2][1] + acc[2][3],
                        acc[3][1] + acc[3][3]);
    po[3] = make_float4(acc[4][1] + acc[4][3], acc[5][1] + acc[5][3], acc[6][1] + acc[6][3],
                        acc[7][1] + acc[7][3]);
    if (lane == 0) {
        part_m[p * n_q_heads + g * GEM_CU_GROUP + w] = m;
        part_s[p * n_q_heads + g * GEM_CU_GROUP + w] = s;
    }
}

extern "C" __global__ void __launch_bounds__(256, 2)
    mma_first_pass(const float *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                   const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                   float *__restrict__ part_m, float *__restrict__ part_s,
                   float *__restrict__ part_o, int64_t live, int64_t partitions,
                   int64_t n_q_heads, float scale)
{
    mma_register_fed_body<0>(q, k, hs, ts, v, hs, ts, part_m, part_s, part_o, live,
                                     partitions, n_q_heads, scale);
}

/* Versions 3 and 4 were measured in run 21 and lost (see the header); their code is in commit
 * f13a100 of this file. */

/* Version 5: version 2 (the library's body) with every K and V load asking the L2 to fetch the
 * enclosing 256 bytes (.L2::256B). Prediction: the rows of a tile are contiguous 1 KiB runs, so
 * larger DRAM fetches cost nothing extra and may raise DRAM efficiency from 84% toward 90%. */
extern "C" __global__ void __launch_bounds__(256, 2)
    mma_first_pass_v5(const float *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                      const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                      float *__restrict__ part_m, float *__restrict__ part_s,
                      float *__restrict__ part_o, int64_t live, int64_t partitions,
                      int64_t n_q_heads, float scale)
{
    mma_register_fed_body<0, true>(q, k, hs, ts, v, hs, ts, part_m, part_s, part_o, live,
                                           partitions, n_q_heads, scale);
}

/* ---- versions 9-11: K and V staged by the bulk-copy engine --------------------------------
 * Why: the loads of version 2 are the thread's own 16-byte pieces of one tile ahead: at 16
 * warps an SM about 64 KiB can be in flight and on average less (the next tile's K goes out
 * after this tile's dots, its V after the V update), where the probe's 4.4 TB/s at ~1-1.5 us of
 * loaded latency needs some 33-50 KiB an SM all the time. Versions 6-8 moved loads off the
 * registers and lost, but kept every 16-byte request (cp.async, per thread) or added requests
 * (prefetches). Here one producer warp asks the bulk-copy engine (cp.async.bulk, completion
 * counted in bytes on an mbarrier) for whole 1 KiB rows: 32 requests a tile of 32 KiB, STAGES
 * tiles ahead, into a ring in shared memory, while eight consumer warps compute the tiles as in
 * version 2. A staged row is padded to 1,040 bytes so that the eight 16-byte rows of each
 * ldmatrix phase fall on distinct banks; the fragments come by ldmatrix (K) and ldmatrix.trans
 * (V), which fixes the order of the dims in a k-step (a thread holds dims 2 tig, 2 tig + 1 and
 * 2 tig + 8, 2 tig + 9 of the step), so Q's pieces follow that order. Exactness as version 2:
 * the same splits, the products exact, F32 accumulation in a fixed order.
 * One block per (partition, KV head), 288 threads: warps 0-7 compute, warp 8 copies. Consumer
 * barriers are the named barrier 1 over 256 threads. Rows past the partition's end are not
 * copied; the producer writes zeros into their V rows (a weight 0 times stale bits could be
 * NaN), and their scores are -inf as before. */
#define TMA_ROWP 520                       /* a staged row: 512 elements + 16 bytes of padding */
#define TMA_STAGE_ELEMS (2 * GEM_MMA_TILE * TMA_ROWP) /* K then V rows of one tile */

__device__ __forceinline__ void mbar_init(uint64_t *b, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(gem_smem_addr(b)), "r"(count)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *b, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(gem_smem_addr(b)),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(gem_smem_addr(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(gem_smem_addr(b)), "r"(parity)
                     : "memory");
    } while (!done);
}
/* bytes (a multiple of 16) from global src to shared dst (both 16-byte aligned), counted on b */
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *b,
                                          uint64_t pol)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1], %2, [%3], %4;\n" ::"r"(gem_smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(gem_smem_addr(b)), "l"(pol)
                 : "memory");
}
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }

/* ---- the consumer's arithmetic on staged rows (versions 9-18 and 22-23) ------------------ */
/* Q's A fragments of warp w: k-step st covers dims 64w + 16st .. + 15; a thread's k columns are
 * 2 tig, 2 tig + 1 (a0, a1) and 2 tig + 8, + 9 (a2, a3); hi and mid in qa, lo in qb */
__device__ __forceinline__ void staged_q_fragments(const float *__restrict__ q, int64_t g,
                                                   uint32_t (&qa)[4][4], uint32_t (&qb)[4][2])
{
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = lane >> 2, tig = lane & 3;
    {
        const float *qh = q + (g * GEM_CU_GROUP + grp) * GEM_CU_D;
#pragma unroll
        for (int st = 0; st < 4; st++) {
            __nv_bfloat16 hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const float x = __ldg(qh + 64 * w + 16 * st + 2 * tig + (u & 1) + 8 * (u >> 1));
                hi[u] = __float2bfloat16_rn(x);
                const float r1 = x - __bfloat162float(hi[u]);
                mid[u] = __float2bfloat16_rn(r1);
                lo[u] = __float2bfloat16_rn(r1 - __bfloat162float(mid[u]));
            }
            qa[st][0] = gem_pack_bf16(hi[0], hi[1]);
            qa[st][1] = gem_pack_bf16(mid[0], mid[1]);
            qa[st][2] = gem_pack_bf16(hi[2], hi[3]);
            qa[st][3] = gem_pack_bf16(mid[2], mid[3]);
            qb[st][0] = gem_pack_bf16(lo[0], lo[1]);
            qb[st][1] = gem_pack_bf16(lo[2], lo[3]);
        }
    }
}

/* One tile of 16 tokens from its staged K rows ks and V rows vs (TMA_ROWP elements apart):
 * the dots, the softmax (warp h: head h), the V update into acc; t0 the tile's first token,
 * rows from end on are past the partition (their V rows must hold zeros). Two barriers of the
 * 256 computing threads (named barrier 1); mid() runs between them. */
struct staged_no_mid {
    __device__ void operator()() const {}
};
template <class MID = staged_no_mid>
__device__ __forceinline__ void staged_tile(const __nv_bfloat16 *ks, const __nv_bfloat16 *vs,
                                            int64_t t0, int64_t end, float scale,
                                            const uint32_t (&qa)[4][4], const uint32_t (&qb)[4][2],
                                            float (&acc)[8][4], float &m, float &s,
                                            float (*sred)[GEM_CU_GROUP][GEM_MMA_TILE],
                                            float (*sp)[GEM_MMA_TILE], float *salpha,
                                            MID mid = MID())
{
    const int T = GEM_MMA_TILE;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = lane >> 2, tig = lane & 3;
    /* ldmatrix rows: K, matrix lane >> 3 of n-tile i is dims 64w + 32h + 8 (lane >> 3) of token
     * 8i + (lane & 7); V, matrix lane >> 3 is tokens (lane & 7) + 8 ((lane >> 3) & 1) of dims
     * 64w + 8 (2jj + (lane >> 4)) */
    const int krow = lane & 7, kcol = 64 * w + 8 * (lane >> 3);
    const int vrow = (lane & 7) + 8 * ((lane >> 3) & 1), vcol = 64 * w + 8 * (lane >> 4);
#pragma unroll
    for (int i = 0; i < 2; i++) {
        float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int h = 0; h < 2; h++) {
            uint32_t r[4];
            gem_ldsm_x4(r, ks + (8 * i + krow) * TMA_ROWP + kcol + 32 * h);
            gem_mma_bf16(d0, qa[2 * h][0], qa[2 * h][1], qa[2 * h][2], qa[2 * h][3], r[0], r[1]);
            gem_mma_bf16(d1, qb[2 * h][0], 0u, qb[2 * h][1], 0u, r[0], r[1]);
            gem_mma_bf16(d0, qa[2 * h + 1][0], qa[2 * h + 1][1], qa[2 * h + 1][2],
                         qa[2 * h + 1][3], r[2], r[3]);
            gem_mma_bf16(d1, qb[2 * h + 1][0], 0u, qb[2 * h + 1][1], 0u, r[2], r[3]);
        }
        float2 rr; /* head grp, tokens 8i + 2 tig, + 1: (hi + mid) + lo */
        rr.x = (d0[0] + d0[2]) + d1[0];
        rr.y = (d0[1] + d0[3]) + d1[1];
        *reinterpret_cast<float2 *>(&sred[w][grp][8 * i + 2 * tig]) = rr;
    }
    consumers_sync(); /* sred complete */
    mid();            /* every warp is past the previous tile's V update */
    {
        const int t = lane & (T - 1);
        float a = 0.f;
#pragma unroll
        for (int ww = 0; ww < 8; ww++)
            a += sred[ww][w][t];
        const float sc = t0 + t < end ? a * scale : -INFINITY;
        float mx = sc;
#pragma unroll
        for (int off = T / 2; off > 0; off >>= 1)
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
        const float mn = fmaxf(m, mx);
        const float e = expf(sc - mn);
        const float alpha = expf(m - mn);
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
    consumers_sync(); /* the weights of all eight heads are published */
    {
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
        const float pv[4] = {p01.x, p01.y, p89.x, p89.y};
        __nv_bfloat16 ph[4], pl[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            ph[u] = __float2bfloat16_rn(pv[u]);
            pl[u] = __float2bfloat16_rn(pv[u] - __bfloat162float(ph[u]));
        }
        const uint32_t a0 = gem_pack_bf16(ph[0], ph[1]), a1 = gem_pack_bf16(pl[0], pl[1]),
                       a2 = gem_pack_bf16(ph[2], ph[3]), a3 = gem_pack_bf16(pl[2], pl[3]);
#pragma unroll
        for (int jj = 0; jj < 4; jj++) {
            uint32_t r[4];
            gem_ldsm_x4_trans(r, vs + vrow * TMA_ROWP + vcol + 16 * jj);
            gem_mma_bf16(acc[2 * jj], a0, a1, a2, a3, r[0], r[1]);
            gem_mma_bf16(acc[2 * jj + 1], a0, a1, a2, a3, r[2], r[3]);
        }
    }
}

/* the partial of warp w's heads: head grp, n-tile j is dims 64w + 8j + 2 tig, + 1 */
__device__ __forceinline__ void staged_write_partial(const float (&acc)[8][4], float m, float s,
                                                     int64_t p, int64_t g, int64_t n_q_heads,
                                                     float *__restrict__ part_m,
                                                     float *__restrict__ part_s,
                                                     float *__restrict__ part_o)
{
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t row = p * n_q_heads + g * GEM_CU_GROUP + grp;
    float *po = part_o + row * GEM_CU_D + 64 * w + 2 * tig;
#pragma unroll
    for (int j = 0; j < 8; j++)
        *reinterpret_cast<float2 *>(po + 8 * j) =
            make_float2(acc[j][0] + acc[j][2], acc[j][1] + acc[j][3]);
    if (lane == 0) {
        part_m[p * n_q_heads + g * GEM_CU_GROUP + w] = m;
        part_s[p * n_q_heads + g * GEM_CU_GROUP + w] = s;
    }
}

template <int STAGES, int MODE, bool IL = false>
__device__ __forceinline__ void tma_first_pass_body(
    const float *__restrict__ q, const __nv_bfloat16 *__restrict__ k, int64_t k_hs, int64_t k_ts,
    const __nv_bfloat16 *__restrict__ v, int64_t v_hs, int64_t v_ts, float *__restrict__ part_m,
    float *__restrict__ part_s, float *__restrict__ part_o, int64_t live, int64_t partitions,
    int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    extern __shared__ __align__(128) unsigned char tma_dsm[];
    __nv_bfloat16 *const ring = reinterpret_cast<__nv_bfloat16 *>(tma_dsm);
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    __shared__ __align__(16) float sred[8][GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GEM_CU_GROUP];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    /* IL: interleaved tiles, block p takes tiles p, p + P, ... of the whole length */
    const int64_t all_tiles = (live + T - 1) / T;
    const int64_t begin = IL ? min(p * T, live) : min(p * chunk, live);
    const int64_t end = IL ? live : min(begin + chunk, live), step = IL ? partitions * T : T;
    const int64_t ntiles =
        IL ? (all_tiles > p ? (all_tiles - p + partitions - 1) / partitions : 0)
           : (end - begin + T - 1) / T;
    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (w == 8) { /* the producer */
        uint64_t pol;
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
        const __nv_bfloat16 *kg = k + g * k_hs, *vg = v + g * v_hs;
        for (int64_t it = 0; it < ntiles; it++) {
            const int s = (int)(it % STAGES);
            if (it >= STAGES)
                mbar_wait(&empty[s], (uint32_t)((it / STAGES - 1) & 1));
            const int64_t t0 = begin + it * step;
            const int n = (int)min((int64_t)T, end - t0);
            __nv_bfloat16 *ks = ring + (size_t)s * TMA_STAGE_ELEMS, *vs = ks + T * TMA_ROWP;
            if (MODE == 1) { /* diagnostic: no copies, the consumers compute on stale bytes */
                if (lane == 0)
                    mbar_arrive(&full[s]);
                continue;
            }
            if (n < T) {
                for (int e = lane; e < (T - n) * 64; e += 32)
                    reinterpret_cast<uint4 *>(vs + (n + e / 64) * TMA_ROWP)[e % 64] =
                        make_uint4(0u, 0u, 0u, 0u);
            }
            __syncwarp();
            if (lane == 0)
                mbar_arrive_expect_tx(&full[s], (uint32_t)n * 2u * 1024u);
            __syncwarp();
            if (lane < n)
                bulk_copy(ks + lane * TMA_ROWP, kg + (t0 + lane) * k_ts, 1024, &full[s], pol);
            else if (lane >= T && lane - T < n)
                bulk_copy(vs + (lane - T) * TMA_ROWP, vg + (t0 + lane - T) * v_ts, 1024, &full[s],
                          pol);
        }
        return;
    }
    uint32_t qa[4][4], qb[4][2];
    staged_q_fragments(q, g, qa, qb);
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;
    for (int64_t it = 0; it < ntiles; it++) {
        const int st_ = (int)(it % STAGES);
        const int64_t t0 = begin + it * step;
        mbar_wait(&full[st_], (uint32_t)((it / STAGES) & 1));
        if (MODE == 2) { /* diagnostic: the copies alone */
            __syncwarp();
            if (lane == 0)
                mbar_arrive(&empty[st_]);
            continue;
        }
        const __nv_bfloat16 *ks = ring + (size_t)st_ * TMA_STAGE_ELEMS, *vs = ks + T * TMA_ROWP;
        staged_tile(ks, vs, t0, end, scale, qa, qb, acc, m, s, sred, sp, salpha);
        __syncwarp();
        if (lane == 0)
            mbar_arrive(&empty[st_]);
    }
    staged_write_partial(acc, m, s, p, g, n_q_heads, part_m, part_s, part_o);
}

#define TMA_KERNEL(NAME, STAGES, MINB, MODE, IL)                                                   \
    extern "C" __global__ void __launch_bounds__(288, MINB)                                    \
        NAME(const float *__restrict__ q, const __nv_bfloat16 *__restrict__ k,                 \
             const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,                      \
             float *__restrict__ part_m, float *__restrict__ part_s,                           \
             float *__restrict__ part_o, int64_t live, int64_t partitions, int64_t n_q_heads,  \
             float scale)                                                                      \
    {                                                                                          \
        tma_first_pass_body<STAGES, MODE, IL>(q, k, hs, ts, v, hs, ts, part_m, part_s, part_o, \
                                          live, partitions, n_q_heads, scale);                 \
    }
TMA_KERNEL(tma_first_pass_s4, 4, 1, 0, false)
TMA_KERNEL(tma_first_pass_s6, 6, 1, 0, false)
TMA_KERNEL(tma_first_pass_s3, 3, 2, 0, false)
TMA_KERNEL(tma_compute_only_s3, 3, 2, 1, false)
TMA_KERNEL(tma_copy_only_s3, 3, 2, 2, false)
TMA_KERNEL(tma_compute_only_s4, 4, 1, 1, false)
TMA_KERNEL(tma_copy_only_s4, 4, 1, 2, false)
TMA_KERNEL(tma_first_pass_s3_il, 3, 2, 0, true)
TMA_KERNEL(tma_copy_only_s3_il, 3, 2, 2, true)

typedef void (*tma_kernel_fn)(const float *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                              int64_t, int64_t, float *, float *, float *, int64_t, int64_t,
                              int64_t, float);
/* versions 9..18: kernel, stages, blocks an SM; 12-15 and 18 are diagnostics (not
 * validated); 16 is version 2 with interleaved tiles, 17 version 11 with interleaved tiles */
static const struct {
    tma_kernel_fn fn;
    int stages, per_sm;
} tma_versions[10] = {
    {tma_first_pass_s4, 4, 1},   {tma_first_pass_s6, 6, 1},   {tma_first_pass_s3, 3, 2},
    {tma_compute_only_s3, 3, 2}, {tma_copy_only_s3, 3, 2},    {tma_compute_only_s4, 4, 1},
    {tma_copy_only_s4, 4, 1},    {NULL, 0, 0} /* 16: version 2 interleaved */,
    {tma_first_pass_s3_il, 3, 2}, {tma_copy_only_s3_il, 3, 2},
};

/* Version 16: version 2 with interleaved tiles (block p takes tiles p, p + P, ...): the blocks
 * of a KV head read one moving window, as the read probe's grid-stride pattern does (93.7% of
 * nominal there against 85-86% for one contiguous chunk per block). */
extern "C" __global__ void __launch_bounds__(256, 2)
    mma_first_pass_il(const float *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                      const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                      float *__restrict__ part_m, float *__restrict__ part_s,
                      float *__restrict__ part_o, int64_t live, int64_t partitions,
                      int64_t n_q_heads, float scale)
{
    mma_register_fed_body<0, false, true>(q, k, hs, ts, v, hs, ts, part_m, part_s, part_o,
                                                  live, partitions, n_q_heads, scale);
}

/* Versions 22-23: the loads of version 19's shape (a warp's instruction reads 512 contiguous
 * bytes of a row; versions 19-21 measured that shape alone at 4.40 TB/s, version 2's at 4.31 and
 * the bulk copies at 4.06-4.12), issued one tile ahead into registers right after the previous
 * tile's were stored, then stored into a ring of three padded tiles in shared memory, which
 * the arithmetic of versions 9-18 reads by ldmatrix. Tile it + 1 is stored while tile it is
 * computed from its buffer; a buffer is rewritten two tiles after it was last read, which the
 * tile's two barriers order. 256 threads, two blocks an SM (97.5 KiB of dynamic shared memory
 * each), P as version 2. 23: interleaved tiles. Rows past the end load as zeros.
 * Versions 24-25: the same with two buffers (65 KiB an SM less, so the L1, which holds the
 * loads in flight, keeps more): tile it + 1 is stored after tile it's first barrier. */
#define LSU_BYTES(BUFS) ((size_t)(BUFS) * TMA_STAGE_ELEMS * sizeof(__nv_bfloat16))
template <bool IL, int LSU_BUFS>
__global__ void __launch_bounds__(256, 2)
    lsu_staged_first_pass(const float *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                          const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                          float *__restrict__ part_m, float *__restrict__ part_s,
                          float *__restrict__ part_o, int64_t live, int64_t partitions,
                          int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    extern __shared__ __align__(128) unsigned char lsu_dsm[];
    __nv_bfloat16 *const ring = reinterpret_cast<__nv_bfloat16 *>(lsu_dsm);
    __shared__ __align__(16) float sred[8][GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GEM_CU_GROUP];
    const int tid = threadIdx.x;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t all_tiles = (live + T - 1) / T;
    const int64_t begin = IL ? min(p * T, live) : min(p * chunk, live);
    const int64_t end = IL ? live : min(begin + chunk, live), step = IL ? partitions * T : T;
    const int64_t ntiles =
        IL ? (all_tiles > p ? (all_tiles - p + partitions - 1) / partitions : 0)
           : (end - begin + T - 1) / T;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    const __nv_bfloat16 *kg = k + g * hs, *vg = v + g * hs;
    const int prow = tid >> 6, pcol = 8 * (tid & 63); /* rows prow + 4u, 16 bytes at pcol */
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    uint4 r[8];
    auto load = [&](int64_t t0) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int64_t t = t0 + prow + 4 * u;
            r[u] = t < end ? gem_ld16(kg + t * ts + pcol, pol) : z;
            r[4 + u] = t < end ? gem_ld16(vg + t * ts + pcol, pol) : z;
        }
    };
    auto store = [&](int64_t it) {
        __nv_bfloat16 *ks = ring + (size_t)(it % LSU_BUFS) * TMA_STAGE_ELEMS,
                      *vs = ks + T * TMA_ROWP;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            *reinterpret_cast<uint4 *>(ks + (prow + 4 * u) * TMA_ROWP + pcol) = r[u];
            *reinterpret_cast<uint4 *>(vs + (prow + 4 * u) * TMA_ROWP + pcol) = r[4 + u];
        }
    };
    uint32_t qa[4][4], qb[4][2];
    staged_q_fragments(q, g, qa, qb);
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;
    if (ntiles > 0) {
        load(begin);
        store(0);
    }
    if (ntiles > 1)
        load(begin + step);
    consumers_sync(); /* tile 0 is staged */
    for (int64_t it = 0; it < ntiles; it++) {
        const __nv_bfloat16 *ks = ring + (size_t)(it % LSU_BUFS) * TMA_STAGE_ELEMS;
        auto next = [&]() {
            if (it + 1 < ntiles)
                store(it + 1);
            if (it + 2 < ntiles)
                load(begin + (it + 2) * step);
        };
        if (LSU_BUFS == 3) { /* the buffer of tile it + 1 was last read two tiles ago */
            next();
            staged_tile(ks, ks + T * TMA_ROWP, begin + it * step, end, scale, qa, qb, acc, m, s,
                        sred, sp, salpha);
        } else { /* two buffers: after the tile's first barrier, past the last tile's reads */
            staged_tile(ks, ks + T * TMA_ROWP, begin + it * step, end, scale, qa, qb, acc, m, s,
                        sred, sp, salpha, next);
        }
    }
    staged_write_partial(acc, m, s, p, g, n_q_heads, part_m, part_s, part_o);
}

/* Versions 27-28: version 24 with one K buffer and one V buffer (32.5 KiB a block): K of tile
 * it + 1 and V of tile it are stored between tile it's two barriers (every warp is then past
 * the dots of tile it and the V update of tile it - 1, the last reads of both buffers; the
 * second barrier publishes them), and the loads of K(it + 2) and V(it + 1) go out at once,
 * a whole tile ahead of their stores. Shared memory 66.5 KiB an SM with the static arrays,
 * so the L1 keeps some 156 KiB for the loads in flight (version 26: version 2 with 97.5 KiB
 * of unused shared memory a block takes 0.327 ms at 128K against 0.271). 28: interleaved. */
#define SPLIT_BYTES ((size_t)TMA_STAGE_ELEMS * sizeof(__nv_bfloat16))
template <bool IL>
__global__ void __launch_bounds__(256, 2)
    split_staged_first_pass(const float *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                            const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                            float *__restrict__ part_m, float *__restrict__ part_s,
                            float *__restrict__ part_o, int64_t live, int64_t partitions,
                            int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    extern __shared__ __align__(128) unsigned char split_dsm[];
    __nv_bfloat16 *const kbuf = reinterpret_cast<__nv_bfloat16 *>(split_dsm),
                         *const vbuf = kbuf + T * TMA_ROWP;
    __shared__ __align__(16) float sred[8][GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GEM_CU_GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GEM_CU_GROUP];
    const int tid = threadIdx.x;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t all_tiles = (live + T - 1) / T;
    const int64_t begin = IL ? min(p * T, live) : min(p * chunk, live);
    const int64_t end = IL ? live : min(begin + chunk, live), step = IL ? partitions * T : T;
    const int64_t ntiles =
        IL ? (all_tiles > p ? (all_tiles - p + partitions - 1) / partitions : 0)
           : (end - begin + T - 1) / T;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    const __nv_bfloat16 *kg = k + g * hs, *vg = v + g * hs;
    const int prow = tid >> 6, pcol = 8 * (tid & 63); /* rows prow + 4u, 16 bytes at pcol */
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    uint4 rk[4], rv[4];
    /* rows of tile it from base; a tile past the last starts at or past end: zeros */
    auto load = [&](uint4 *r, const __nv_bfloat16 *base, int64_t it) {
        const int64_t t0 = begin + it * step + prow;
        const __nv_bfloat16 *b = base + t0 * ts + pcol;
#pragma unroll
        for (int u = 0; u < 4; u++)
            r[u] = t0 + 4 * u < end ? gem_ld16(b + 4 * u * ts, pol) : z;
    };
    auto store = [&](__nv_bfloat16 *buf, const uint4 *r) {
#pragma unroll
        for (int u = 0; u < 4; u++)
            *reinterpret_cast<uint4 *>(buf + (prow + 4 * u) * TMA_ROWP + pcol) = r[u];
    };
    uint32_t qa[4][4], qb[4][2];
    staged_q_fragments(q, g, qa, qb);
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;
    load(rk, kg, 0);
    store(kbuf, rk);
    load(rk, kg, 1);
    load(rv, vg, 0);
    consumers_sync(); /* K of tile 0 is staged */
    for (int64_t it = 0; it < ntiles; it++) {
        auto mid = [&]() {
            store(kbuf, rk); /* K(it + 1), zeros past the last tile */
            store(vbuf, rv); /* V(it) */
            load(rk, kg, it + 2);
            load(rv, vg, it + 1);
        };
        staged_tile(kbuf, vbuf, begin + it * step, end, scale, qa, qb, acc, m, s, sred, sp, salpha,
                    mid);
    }
    staged_write_partial(acc, m, s, p, g, n_q_heads, part_m, part_s, part_o);
}

/* Versions 19-21 (diagnostics, not validated): the loads alone, through the load/store unit,
 * one 256-thread block per (partition, KV head) at two blocks an SM as version 2, tiles of 16
 * rows of K and V (32 KiB), AHEAD tiles ahead in registers, the bytes folded into one word that
 * is written at the end. SHAPE 0: a warp's instruction reads 512 contiguous bytes of one row
 * (thread i: 16 bytes at 16 (i % 64) of rows i / 64 + 4u), as the F32 first pass reads its
 * rows; SHAPE 1: version 2's pattern (eight rows x 64 bytes an instruction). */
template <int SHAPE, int AHEAD>
__device__ __forceinline__ void lsu_tile_loads(uint4 *r, const __nv_bfloat16 *kg,
                                               const __nv_bfloat16 *vg, int64_t ts, int64_t t0,
                                               int64_t end, uint64_t pol)
{
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int u = 0; u < 4; u++) {
        int64_t kr, vr;
        int kc, vc;
        if (SHAPE == 0) {
            kr = vr = tid / 64 + 4 * u;
            kc = vc = 8 * (tid % 64);
        } else {
            kr = 8 * (u >> 1) + grp;
            kc = 64 * w + 8 * tig + 32 * (u & 1);
            vr = 2 * tig + (u & 1) + 8 * (u >> 1);
            vc = 64 * w + 8 * grp;
        }
        r[u] = t0 + kr < end ? gem_ld16(kg + (t0 + kr) * ts + kc, pol) : z;
        r[4 + u] = t0 + vr < end ? gem_ld16(vg + (t0 + vr) * ts + vc, pol) : z;
    }
}
template <int SHAPE, int AHEAD>
__global__ void __launch_bounds__(256, 2)
    lsu_copy_only(const float *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                  const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                  float *__restrict__ part_m, float *__restrict__ part_s,
                  float *__restrict__ part_o, int64_t live, int64_t partitions, int64_t n_q_heads,
                  float scale)
{
    (void)q;
    (void)scale;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    const __nv_bfloat16 *kg = k + g * hs, *vg = v + g * hs;
    uint4 r[AHEAD][8];
    uint32_t acc = 0;
#pragma unroll
    for (int a = 0; a < AHEAD; a++)
        lsu_tile_loads<SHAPE, AHEAD>(r[a], kg, vg, ts, begin + 16 * a, end, pol);
    for (int64_t t0 = begin; t0 < end; t0 += 16 * AHEAD) {
#pragma unroll
        for (int a = 0; a < AHEAD; a++) {
#pragma unroll
            for (int u = 0; u < 8; u++)
                acc ^= r[a][u].x ^ r[a][u].y ^ r[a][u].z ^ r[a][u].w;
            lsu_tile_loads<SHAPE, AHEAD>(r[a], kg, vg, ts, t0 + 16 * (AHEAD + a), end, pol);
        }
    }
    part_o[(p * n_q_heads + g * 8) * 512 + threadIdx.x] = __uint_as_float(acc);
    if (threadIdx.x < 8) {
        part_m[p * n_q_heads + g * 8 + threadIdx.x] = 0.f;
        part_s[p * n_q_heads + g * 8 + threadIdx.x] = 1.f;
    }
}

/* Version 29 (with --f16): the library's staged body on F16 K and V (gem_mma_f16_elem: Q
 * scaled per head by a power of two before its F16 split, the weights by 2^14), dense rows.
 * Prediction: it times like the BF16 pass (0.245 ms at 128K through gem_decode, run 79), where
 * the library's F16 pass, on CUDA cores, takes 0.457 (run 20). */
extern "C" __global__ void __launch_bounds__(256, 2)
    mma_staged_f16(const float *__restrict__ q, const __half *__restrict__ k,
                   const __half *__restrict__ v, int64_t hs, int64_t ts,
                   float *__restrict__ part_m, float *__restrict__ part_s,
                   float *__restrict__ part_o, int64_t live, int64_t partitions,
                   int64_t n_q_heads, float scale)
{
    gem_fused_first_pass_mma_staged_body<D, gem_mma_f16_elem>(
        q, k, hs, ts, v, hs, ts, part_m, part_s, part_o, live, partitions, n_q_heads, scale);
}

static int diagnostic(int version)
{
    return (version >= 12 && version <= 15) || (version >= 18 && version <= 21);
}

extern "C" __global__ void __launch_bounds__(256)
    mma_reducer(const float *__restrict__ part_m, const float *__restrict__ part_s,
                const float *__restrict__ part_o, float *__restrict__ out, int64_t partitions)
{
    gem_fused_reducer_body(part_m, part_s, part_o, out, partitions);
}

/* the reference, the seeded fills and the timing helpers are in common.h */

int main(int argc, char **argv)
{
    int vs[8], nv = 0, rounds = 10, f16 = 0;
    int64_t lengths[8] = {8192, 65536, 131072}, partitions = 64;
    int nl = 3;
    float scales[2] = {1.0f / sqrtf((float)D), 1.0f}, q_scale = 1.0f;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--f16"))
            f16 = 1;
        else if (!strcmp(argv[i], "--q-scale") && i + 1 < argc)
            q_scale = (float)atof(argv[++i]);
        else if (!strcmp(argv[i], "--partitions") && i + 1 < argc)
            partitions = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--lengths") && i + 1 < argc) {
            nl = 0;
            for (char *t = strtok(argv[++i], ","); t && nl < 8; t = strtok(NULL, ","))
                lengths[nl++] = atoll(t);
        } else if (nv < 8) {
            vs[nv] = atoi(argv[i]);
            if (vs[nv] != 1 && vs[nv] != 2 && vs[nv] != 5 && (vs[nv] < 9 || vs[nv] > 29)) {
                fprintf(stderr,
                        "unknown version %s (1, 2, 5, 9 to 29; 3 and 4 are in commit f13a100)\n",
                        argv[i]);
                return 2;
            }
            nv++;
        }
    }
    if (nv == 0)
        for (nv = 0; nv < 3; nv++)
            vs[nv] = nv < 2 ? nv + 1 : 5;
    if (rounds < 1 || partitions < 1 || partitions > 4096 || !(q_scale > 0.f) || !isfinite(q_scale))
        return 2;
    for (int i = 0; i < nv; i++)
        if (f16 != (vs[i] == 29) && vs[i] != 1) {
            fprintf(stderr, "version %d reads %s K and V; --f16 takes versions 1 and 29\n", vs[i],
                    f16 ? "BF16" : "F16");
            return 2;
        }
    gem_decode_ctx *ctx = NULL;
    if (gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &ctx) != GEM_OK)
        return 2;
    cudaStream_t stream;
    cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    int sms = 0;
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    /* versions 9-15: dynamic shared bytes, partitions (one or two blocks an SM) */
    cudaCheck(cudaFuncSetAttribute(mma_staged_f16, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)GEM_MMA_STAGED_BYTES));
    cudaCheck(cudaFuncSetAttribute(split_staged_first_pass<false>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SPLIT_BYTES));
    cudaCheck(cudaFuncSetAttribute(split_staged_first_pass<true>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SPLIT_BYTES));
    cudaCheck(cudaFuncSetAttribute(mma_first_pass, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)LSU_BYTES(3)));
    cudaCheck(cudaFuncSetAttribute(lsu_staged_first_pass<false, 3>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)LSU_BYTES(3)));
    cudaCheck(cudaFuncSetAttribute(lsu_staged_first_pass<true, 3>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)LSU_BYTES(3)));
    cudaCheck(cudaFuncSetAttribute(lsu_staged_first_pass<false, 2>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)LSU_BYTES(2)));
    cudaCheck(cudaFuncSetAttribute(lsu_staged_first_pass<true, 2>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)LSU_BYTES(2)));
    int64_t tma_p[10];
    size_t tma_bytes[10];
    for (int i = 0; i < 10; i++) {
        if (!tma_versions[i].fn) { /* version 16: version 2's kernel, interleaved */
            tma_p[i] = partitions;
            tma_bytes[i] = 0;
            continue;
        }
        tma_bytes[i] = (size_t)tma_versions[i].stages * TMA_STAGE_ELEMS * sizeof(__nv_bfloat16);
        tma_p[i] = (int64_t)tma_versions[i].per_sm * sms / NKV;
        cudaCheck(cudaFuncSetAttribute(tma_versions[i].fn,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)tma_bytes[i]));
        printf("version %d: bulk copies, %d stages, P %lld (%d SMs)%s\n", 9 + i,
               tma_versions[i].stages, (long long)tma_p[i], sms,
               i == 3 || i == 5 ? ": compute alone (diagnostic)"
               : i == 4 || i == 6 ? ": copies alone (diagnostic)"
               : i == 9 ? ": interleaved tiles, copies alone (diagnostic)"
               : i == 8 ? ": interleaved tiles" : "");
    }
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    if (f16)
        printf("--f16: K and V are F16 values; version 1 is the library's F16 first pass\n");
    if (q_scale != 1.0f)
        printf("--q-scale %g: Q is the uniform fill times that\n", (double)q_scale);
    printf("version 1: the library's BF16 first pass (gem_decode); version 2: tensor cores, "
           "P %lld\n", (long long)partitions);
    printf("%-8s %-8s %10s %10s %10s %9s\n", "live", "version", "min ms", "median ms", "max ms",
           "GB/s");
    int failed = 0;
    for (int li = 0; li < nl; li++) {
        const int64_t live = lengths[li];
        const size_t n = (size_t)NKV * (size_t)live * D;
        float *hq = (float *)malloc(NQ * D * sizeof(float));
        float *hk = (float *)malloc(n * sizeof(float)), *hv = (float *)malloc(n * sizeof(float));
        __nv_bfloat16 *bk = (__nv_bfloat16 *)malloc(n * 2), *bv = (__nv_bfloat16 *)malloc(n * 2);
        fill(hq, NQ * D, 11 + (uint64_t)live);
        for (int i = 0; i < NQ * D; i++)
            hq[i] *= q_scale;
        fill(hk, n, 12 + (uint64_t)live);
        fill(hv, n, 13 + (uint64_t)live);
        for (size_t i = 0; i < n; i++) {
            if (f16) { /* the same 16-bit buffers hold F16 bits */
                const __half hk16 = __float2half_rn(hk[i]), hv16 = __float2half_rn(hv[i]);
                memcpy(&bk[i], &hk16, 2);
                memcpy(&bv[i], &hv16, 2);
                hk[i] = __half2float(hk16);
                hv[i] = __half2float(hv16);
                continue;
            }
            bk[i] = __float2bfloat16_rn(hk[i]);
            hk[i] = __bfloat162float(bk[i]);
            bv[i] = __float2bfloat16_rn(hv[i]);
            hv[i] = __bfloat162float(bv[i]);
        }
        const double bytes = 2.0 * (double)n * 2.0;
        const int copies = bytes < 512e6 ? (int)fmin(16.0, ceil(512e6 / bytes)) : 1;
        void *dk[16], *dv[16];
        for (int c = 0; c < copies; c++) {
            cudaCheck(cudaMalloc(&dk[c], n * 2));
            cudaCheck(cudaMalloc(&dv[c], n * 2));
            cudaCheck(cudaMemcpy(dk[c], bk, n * 2, cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(dv[c], bv, n * 2, cudaMemcpyHostToDevice));
        }
        float *dq, *dout;
        cudaCheck(cudaMalloc(&dq, NQ * D * sizeof(float)));
        cudaCheck(cudaMalloc(&dout, NQ * D * sizeof(float)));
        cudaCheck(cudaMemcpy(dq, hq, NQ * D * sizeof(float), cudaMemcpyHostToDevice));
        int64_t pmax = partitions > 64 ? partitions : 64;
        for (int i = 0; i < 10; i++)
            pmax = tma_p[i] > pmax ? tma_p[i] : pmax;
        size_t ws_bytes = (size_t)pmax * NQ * (D + 2) * sizeof(float);
        void *dws;
        cudaCheck(cudaMalloc(&dws, ws_bytes + (1 << 20)));
        float *hout = (float *)malloc(NQ * D * sizeof(float));
        float *hfirst = (float *)malloc(NQ * D * sizeof(float));
        double *ref = (double *)malloc(NQ * D * sizeof(double));
        int valid[8];
        for (int sc = 0; sc < 2; sc++) {
            const float scale = scales[sc];
            const gem_decode_shape shape = {NQ, NKV, D, D, scale};
            reference(ref, hq, hk, hv, live, scale, NQ, GROUP, D);
#define RUN(i, c)                                                                              \
    do {                                                                                       \
        if (vs[i] == 1) {                                                                      \
            gem_kv_view kv_;                                                                   \
            memset(&kv_, 0, sizeof kv_);                                                       \
            kv_.k = dk[c];                                                                     \
            kv_.v = dv[c];                                                                     \
            kv_.k_dtype = kv_.v_dtype = f16 ? GEM_DTYPE_F16 : GEM_DTYPE_BF16;                  \
            kv_.k_head_stride = kv_.v_head_stride = live * D;                                  \
            kv_.k_token_stride = kv_.v_token_stride = D;                                       \
            kv_.live = kv_.capacity = live;                                                    \
            const gem_status st_ =                                                             \
                gem_decode(ctx, &shape, dq, &kv_, dout, dws, ws_bytes, NULL, stream);          \
            if (st_ != GEM_OK) {                                                               \
                fprintf(stderr, "gem_decode: %s\n", gem_status_str(st_));                      \
                exit(EXIT_FAILURE);                                                            \
            }                                                                                  \
        } else {                                                                               \
            const int64_t pv_ = vs[i] >= 9 && vs[i] <= 18 ? tma_p[vs[i] - 9] : partitions;                   \
            float *pm_ = (float *)dws, *ps_ = pm_ + pv_ * NQ, *po_ = ps_ + pv_ * NQ;           \
            const dim3 grid_((unsigned)pv_, NKV);                                              \
            const __nv_bfloat16 *k_ = (const __nv_bfloat16 *)dk[c];                            \
            const __nv_bfloat16 *v_ = (const __nv_bfloat16 *)dv[c];                            \
            if (vs[i] == 2)                                                                    \
                mma_first_pass<<<grid_, 256, 0, stream>>>(dq, k_, v_, live * D, D, pm_, ps_,   \
                                                          po_, live, pv_, NQ, scale);          \
            else if (vs[i] == 5)                                                               \
                mma_first_pass_v5<<<grid_, 256, 0, stream>>>(dq, k_, v_, live * D, D, pm_,     \
                                                             ps_, po_, live, pv_, NQ, scale);  \
            else if (vs[i] == 22)                                                              \
                lsu_staged_first_pass<false, 3><<<grid_, 256, LSU_BYTES(3), stream>>>(        \
                    dq, k_, v_, live * D, D, pm_, ps_, po_, live, pv_, NQ, scale);             \
            else if (vs[i] == 23)                                                              \
                lsu_staged_first_pass<true, 3><<<grid_, 256, LSU_BYTES(3), stream>>>(         \
                    dq, k_, v_, live * D, D, pm_, ps_, po_, live, pv_, NQ, scale);             \
            else if (vs[i] == 29)                                                              \
                mma_staged_f16<<<grid_, 256, GEM_MMA_STAGED_BYTES, stream>>>(                  \
                    dq, (const __half *)dk[c], (const __half *)dv[c], live * D, D, pm_, ps_,   \
                    po_, live, pv_, NQ, scale);                                                \
            else if (vs[i] == 27)                                                              \
                split_staged_first_pass<false><<<grid_, 256, SPLIT_BYTES, stream>>>(           \
                    dq, k_, v_, live * D, D, pm_, ps_, po_, live, pv_, NQ, scale);             \
            else if (vs[i] == 28)                                                              \
                split_staged_first_pass<true><<<grid_, 256, SPLIT_BYTES, stream>>>(            \
                    dq, k_, v_, live * D, D, pm_, ps_, po_, live, pv_, NQ, scale);             \
            else if (vs[i] == 26)                                                              \
                mma_first_pass<<<grid_, 256, LSU_BYTES(3), stream>>>(dq, k_, v_, live * D, D,  \
                                                                     pm_, ps_, po_, live, pv_, \
                                                                     NQ, scale);               \
            else if (vs[i] == 24)                                                              \
                lsu_staged_first_pass<false, 2><<<grid_, 256, LSU_BYTES(2), stream>>>(        \
                    dq, k_, v_, live * D, D, pm_, ps_, po_, live, pv_, NQ, scale);             \
            else if (vs[i] == 25)                                                              \
                lsu_staged_first_pass<true, 2><<<grid_, 256, LSU_BYTES(2), stream>>>(         \
                    dq, k_, v_, live * D, D, pm_, ps_, po_, live, pv_, NQ, scale);             \
            else if (vs[i] == 19)                                                              \
                lsu_copy_only<0, 1><<<grid_, 256, 0, stream>>>(dq, k_, v_, live * D, D, pm_,   \
                                                               ps_, po_, live, pv_, NQ, scale); \
            else if (vs[i] == 20)                                                              \
                lsu_copy_only<1, 1><<<grid_, 256, 0, stream>>>(dq, k_, v_, live * D, D, pm_,   \
                                                               ps_, po_, live, pv_, NQ, scale); \
            else if (vs[i] == 21)                                                              \
                lsu_copy_only<0, 2><<<grid_, 256, 0, stream>>>(dq, k_, v_, live * D, D, pm_,   \
                                                               ps_, po_, live, pv_, NQ, scale); \
            else if (vs[i] == 16)                                                              \
                mma_first_pass_il<<<grid_, 256, 0, stream>>>(dq, k_, v_, live * D, D, pm_,     \
                                                             ps_, po_, live, pv_, NQ, scale);  \
            else                                                                               \
                tma_versions[vs[i] - 9].fn<<<grid_, 288, tma_bytes[vs[i] - 9], stream>>>(      \
                    dq, k_, v_, live * D, D, pm_, ps_, po_, live, pv_, NQ, scale);             \
            mma_reducer<<<dim3(NQ, D / 256), 256, 0, stream>>>(pm_, ps_, po_, dout, pv_);      \
            cudaCheck(cudaGetLastError());                                                     \
        }                                                                                      \
    } while (0)
            for (int i = 0; i < nv; i++) {
                valid[i] = 1;
                for (int rep = 0; rep < 2; rep++) {
                    cudaCheck(cudaMemsetAsync(dout, 0xFF, NQ * D * sizeof(float), stream));
                    RUN(i, rep % copies);
                    cudaCheck(cudaStreamSynchronize(stream));
                    cudaCheck(cudaMemcpy(hout, dout, NQ * D * sizeof(float),
                                         cudaMemcpyDeviceToHost));
                    if (rep == 0) {
                        double num = 0, den = 0;
                        for (int j = 0; j < NQ * D; j++) {
                            num += (hout[j] - ref[j]) * (hout[j] - ref[j]);
                            den += ref[j] * ref[j];
                        }
                        const double nmse = num / den;
                        printf("%-8lld v%-7d scale %.4f: nmse %.3g against double\n",
                               (long long)live, vs[i], scale, nmse);
                        if (!(nmse <= 1e-10) && !diagnostic(vs[i]))
                            valid[i] = 0;
                        memcpy(hfirst, hout, NQ * D * sizeof(float));
                    } else if (!diagnostic(vs[i]) && memcmp(hfirst, hout, NQ * D * sizeof(float)) != 0) {
                        printf("%-8lld v%-7d INVALID: the repeat differs\n", (long long)live,
                               vs[i]);
                        valid[i] = 0;
                    }
                }
                failed |= !valid[i] && !diagnostic(vs[i]);
            }
            if (sc == 1)
                break; /* scale 1.0 is validated, not timed */
            double *t = (double *)calloc((size_t)nv * 2 * rounds, sizeof(double));
            int turn = 0;
            for (int wu = 0; wu < 3; wu++)
                for (int i = 0; i < nv; i++)
                    if (valid[i])
                        RUN(i, 0);
            for (int r = 0; r < rounds; r++)
                for (int pass = 0; pass < 2; pass++)
                    for (int j = 0; j < nv; j++) {
                        const int i = pass == 0 ? j : nv - 1 - j;
                        if (!valid[i])
                            continue;
                        turn++;
                        wait_kernel<<<1, 1, 0, stream>>>(50000);
                        cudaCheck(cudaEventRecord(e0, stream));
                        RUN(i, turn % copies);
                        cudaCheck(cudaEventRecord(e1, stream));
                        cudaCheck(cudaEventSynchronize(e1));
                        float ms = 0;
                        cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
                        t[(size_t)i * 2 * rounds + 2 * r + pass] = ms;
                    }
            for (int i = 0; i < nv; i++) {
                if (!valid[i])
                    continue;
                double *ti = t + (size_t)i * 2 * rounds;
                qsort(ti, (size_t)2 * rounds, sizeof(double), cmp_double);
                const double med = 0.5 * (ti[rounds - 1] + ti[rounds]);
                printf("%-8lld v%-7d %10.4f %10.4f %10.4f %9.1f\n", (long long)live, vs[i], ti[0],
                       med, ti[2 * rounds - 1], bytes / (med * 1e-3) / 1e9);
            }
            free(t);
        }
#undef RUN
        for (int c = 0; c < copies; c++) {
            cudaFree(dk[c]);
            cudaFree(dv[c]);
        }
        cudaFree(dq);
        cudaFree(dout);
        cudaFree(dws);
        free(hq);
        free(hk);
        free(hv);
        free(bk);
        free(bv);
        free(hout);
        free(hfirst);
        free(ref);
    }
    gem_decode_ctx_destroy(ctx);
    return failed;
}
