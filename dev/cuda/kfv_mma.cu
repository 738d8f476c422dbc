/*
K rebuilt from V on tensor cores: an experiment for Gemma 4's K = V layers with a BF16 V cache
(32 query heads over 4 KV heads, D512, K(t) = RoPE_{pos0+t}(k_weight * V(t)), pairs (j, j+256),
64 rotating, inv_freq 1e6^(-2j/512)).

Why: the library's K-from-V first pass runs on CUDA cores and is bound by instruction issue
(results/h200/run18: BF16 0.557 ms at 128K, slower than reading a stored K); the stored-K BF16
first pass on tensor cores takes 0.272 ms (run 20). Reading V alone is half the bytes.

The tensor-core pass of the library (gem_fused_first_pass_mma_body) with three changes:
  - the dots' dims are laid out so that a thread's two 16-byte loads of a row are a dim block
    and its RoPE partners: tig 0 of warp w holds dims 8w .. 8w+7 and 256+8w .. (the 64 rotating
    pairs, 8 per warp), tigs 1-3 blocks of [64, 256) and their partners in [320, 512);
  - for the dims that do not rotate, K = k_weight * V: k_weight is folded into Q's pieces and
    the B fragment is V itself (exact BF16); for the rotating ones the B fragment is the rotated
    K in F32, split in three BF16 pieces (hi, mid, lo), each its own mma with Q's hi and mid rows
    (Q's lo rows only meet K's hi piece: the dropped products are below 2^-24 of the dot);
  - cos and sin of the 16 tokens x 64 pairs of a tile are a shared table built by all threads
    during the softmax (the exact angle at the tile's first token, then one angle-addition step
    from a per-block table of the 16 offsets), so the rotation costs each rotating lane 16 pairs
    of loads from shared memory.
V is read twice per tile: once in the dots' layout (default L2 policy), once in the V update's
(evict-first), the second read served by the L2.

version 1 is the library's K-from-V first pass on CUDA cores (gem_decode on a k_from_v view).
version 2 is the library's stored-K BF16 first pass (tensor cores; K stored as BF16 of the same
  K), for comparison of bytes read.
version 3 is the tensor-core K-from-V pass above (Q's pieces in shared memory: with them in
  registers the pass spilled 60 bytes).
  H200 run 22: exact (NMSE 1.4e-12 .. 4.4e-12, positions from 0 and from 1,000,000) but slower
  than version 1: 0.5722 ms at 128K against 0.5533 (version 2, reading K and V: 0.2769). The
  lane of each warp that owns the rotating pairs rotates, splits and packs 16 pairs per n-tile
  while the other three wait (the warp pays for it), three pieces of K cost four mma where one
  did, and the angle table adds a barrier: the rotation on the B side is more work than the
  dots it feeds. A loser; what the numbers say is left is rotating Q instead (the A side), per
  token, which mma cannot batch.
version 4 is the staged tensor-core pass with V alone staged, the rotating dims on the F64 tensor
  cores (RoPE_{-P}(q) . RoPE_u(w V), see its comment). H200 run 94: exact (NMSE 8e-14 .. 1.3e-12)
  and 0.2432 ms at 128K against 0.5647 (version 1) and 0.2471 (version 2, reading K and V);
  0.1289 against 0.2883 at 64K. The winner: the library's BF16 and F16 K-from-V first passes
  since (gem_fused_first_pass_kfv_mma_body). ncu at 128K (run 95): 2.1 instructions a cycle an
  SM, 0.53 a scheduler with 3.8 warps, 7.1 cycles between a warp's instructions; DRAM 37%; the
  F64 tensor pipe 32%. Bound by latency at two blocks an SM, not by bytes or by one pipe.
version 5 (--f32) is an F32 V cache with every product on the F64 tensor cores (V to double by
  bit operations, x 2^-896). Run 94: exact (NMSE 3e-14 .. 4.6e-13), 0.4814 ms at 128K against
  0.5001 (version 1, the CUDA-core pass) and 0.4864 (version 2, K and V): 4%, not taken.
  ncu: F64 tensor pipe 59%, 0.47 instructions a cycle a scheduler.
versions 6 and 7 are version 4 with cp.async rings of 3 and 4 tiles (two and three tiles in
  flight instead of one). Run 95: 0.2506 and 0.2471 ms at 128K against 0.2417 for version 4:
  the loads were not what it waited on.
version 8 is version 4 with the softmax of tile it issued beside the dots of tile it + 1 (a
  second sred buffer, a ring of three V tiles): the same bits. Run 98: 0.2529 ms at 128K
  against 0.2436; the stall mix is version 4's (per issued instruction: short scoreboard 1.97
  against 1.88, wait 1.37 / 1.46, math pipe throttle 0.74 / 0.87, barrier 0.37 / 0.42).
version 9 is version 4 with fewer instructions a tile (shared addresses computed once, 32-bit
  compares, stepped row pointers, the O rescale skipped when every alpha of the warp is 1): the
  same bits. Run 99: 0.2487 ms against 0.2435. Versions 6-9 each changed one thing that a
  latency- or issue-bound pass would gain from, and each lost 2-4%; what bounds version 4 at
  the stored K + V pass's time (0.2428 in run 99) is not found.
version 10 is the library's stored-K pass (version 2's) given V as its K: K and V rows at the
  same addresses, so DRAM serves each row once and the L2 the second read. Against version 2 it
  asks whether the staged pass's time at 128K is set by its bytes or by its own work: the same
  time as version 2 says the work, version 4's latency bound is then the staged pass's own.
  Run 101: 0.2259 ms at 128K against 0.2420 (version 2) and 0.2422 (version 4); F32 0.4338
  against 0.4766. Half the DRAM bytes take 7-9% off: the staged pass's tile loop sets both
  passes' time.
version 11 is version 4 with 32-token tiles (two 16-token halves for the dots and the rotating
  dims, one softmax and one O rescale a tile, the V update in two k-steps; tiles copied by
  cp.async into two buffers, as 32 rows would not fit in registers beside version 4's 128).
  Predicted: the per-tile costs paid once every 32 tokens, about 0.20 ms at 128K. Run 102:
  exact (version 4's NMSE), 17% fewer instructions (ncu), and the same time: 0.2423 ms at 128K
  against 0.2427. A loser.
versions 12 and 13 are diagnostics, timed but not held to the reference: version 4 with the rows
  it loads made in registers (no DRAM reads), and version 4 with its loads, stores and barriers
  alone (no arithmetic). Run 103 at 128K: 0.2160 ms without the reads, 0.1303 the reads alone,
  against 0.2434 for version 4: the arithmetic sets the time.
version 14 is version 4 at three blocks an SM (__launch_bounds__(256, 3): 85 registers, 24
  warps), for --partitions 99. Run 104: exact, 280 bytes of spills, and 1.5-1.9x slower (0.4019
  ms at 128K and 99 partitions against 0.2627 for version 4 there, 0.2443 at 64). A loser.
version 15 is the view K = V (version 10's) on warpgroup MMAs: one warpgroup a block takes
  64-token tiles whole (see its comment), for --partitions 33 (one block an SM). Run 105:
  exact (NMSE 1e-13 .. 1.7e-11), memcheck clean, 0.2659 ms at 128K against 0.2267 for version
  10 (the stored pass on the same view): 55.6 M instructions (half of version 4's), 0.24 issued
  a cycle a scheduler, waiting on its loads.
versions 16 and 17 are version 15 with its descriptors made once a tile and its copies at
  constant offsets, three and two stages. Run 106's two calls stopped on an illegal instruction
  in the copies, at an LDGSTS whose L2 hint descriptor ptxas had put in an odd uniform register;
  without the hint the third ran: exact, memcheck clean, 0.2675 (16) and 0.2742 ms (17) at 128K
  against 15's 0.2719 in the same process.
version 18 is version 17 on the K-from-V view: the rotating dims on the F64 tensor cores while
  the non-rotating scores' wgmma run (see its comment); for --partitions 33. Run 106: exact
  (NMSE <= 1.1e-11, 1.3e-12 from position 10^6), memcheck clean, 0.3864 ms at 128K against
  version 4's 0.2446: 79.4 M instructions, 0.23 issued a cycle a scheduler.
version 19 is version 18 on two warpgroups a block (each half the dims of the scores and of O,
  8 rotating pairs a warp); for --partitions 33. Run 106: exact, memcheck clean, 0.3900 ms at
  128K (126.5 M instructions, 0.35 a cycle a scheduler). The two versions' maps from lanes
  to tokens, pairs and heads in the rotating dims' F64 MMAs are checked on the host against the
  direct formula by dev/cuda/kfv_wgmma_rotation.py (relative error 2.4e-11, positions from 10^6).
version 20 is the view K = V on warps that own whole 16-token tiles (see its comment: no
  barrier inside the loop, the scores with the tokens as rows, O^T in registers), for
  --partitions 33. Run 114: exact (NMSE <= 1.2e-12), memcheck and racecheck clean, 0.1562 ms at
  128K against 0.2260 for version 10 (the stored pass on the same view): 779 instructions a warp
  and tile where version 4's eight warps issue about 3,600.
version 21 is K from V on version 20's warps, the rotating dims as version 4 takes them on the
  F64 tensor cores, a whole tile's in each warp. Run 115: exact, 0.2119 ms at 128K against
  0.2438 for version 4; slower at 8K (0.0348 against 0.0256).
version 22 is version 21 with eight warps an SM of one stage each (the next tile's rows asked of
  the L2). Run 116: 0.1966 ms at 128K against 0.2129 for version 21.
version 23 is version 22 with its table of w cos, w sin built by each block in shared memory.
  Run 117: exact (NMSE <= 1.4e-12, also from position 10^6), memcheck and racecheck clean,
  0.1827 ms at 128K and 0.1085 at 64K against 0.2417 and 0.1277 for version 4; even at 32K,
  slower below (8K 0.0341 against 0.0254).
versions 24 and 25 are an F32 V cache on version 22's warps, every product three TF32 MMAs (big
  and small pieces, see their comment): five warps a block with the table in shared memory, and
  six with version 21's table in global memory. Run 122: NMSE <= 1.1e-11, memcheck and
  racecheck clean, 0.3886 / 0.3832 ms at 128K against 0.5024 for version 1 (the CUDA-core pass)
  and 0.4835 for version 2 (stored K and V); slower at 8K (0.057 / 0.052 against 0.040). ncu:
  3,166 instructions a tile, 1.25 warps a scheduler of which 0.37 eligible.
version 26 is version 24 with whole tiles copied a row an add from the last, and every shared
  load a base and an immediate offset. Run 123: 17% fewer instructions, 0.3675 ms at 128K.
version 27 is version 26 on pairs of warps that share a tile (each half the scores' dims and
  half of O), ten warps an SM. Run 123: 0.3201 ms at 128K, 0.1789 at 64K, DRAM 76% (ncu); but
  racecheck reports hazards across the block's __syncthreads.
version 28 is version 27 with its barriers' ids and its shared loads' offsets immediate. Run
  124: as fast (0.3232 ms at 128K, faster than version 1 from 16K on), racecheck as version 27.
version 29 is version 28 with the pairs meeting at the block's barrier (every pair the same
  number of iterations), which racecheck can follow. Run 125: racecheck and memcheck clean,
  0.3508 ms at 128K and 0.1958 at 64K against 0.5006 and 0.2571 for version 1, even near 20K
  (24K 0.0944 against 0.1028, 16K 0.0744 against 0.0715). The library's long F32 pass.
version 30 is version 28 with an mbarrier a pair instead of a named barrier: not yet run.
versions 31 and 32 are version 23 (BF16) on pairs of warps (27-29's design), three pairs a block
  and two blocks an SM, at the block's barrier (31) or an mbarrier a pair (32): not yet run.
Run 129 (version 1 the library's passes, 33 partitions for F32 and 64 for BF16): version 30
0.3177 ms at 128K against 0.3493 for version 29 (0.1786 / 0.1963 at 64K); version 31 0.2266
and 32 0.2060 against 0.2034 for version 23 at 128K (64K: 0.1288, 0.1171, 0.1262; 8K: 0.0340,
0.0332, 0.0476). All exact (NMSE <= 2.6e-12, also from position 10^6). Racecheck: 31 clean, 30
and 32 report write-after-write hazards at the word after the table, where the mbarriers live
(run 130). That is racecheck's: it places an mbarrier.init 1 KiB (the shared window's reserved
bytes) below the addresses it gives ordinary stores, so the words after a table written before
the block's barrier collide with the table's last KiB (run 134: a minimal kernel in version
30's layout is reported, and clean with its words at the start of shared memory; at the same
place run 133 found version 30 reported in blocks with and without tiles). Synccheck (run 130):
versions 27, 30 and 32 clean; version 29 (and so 31, of the same form) reports divergent threads
at the block's barrier, since a pair past its tiles meets the others at barrier instructions of
its own, which bar.sync's .aligned form forbids.
version 33 is version 30 with its mbarriers invalidated at the end (run 133: the same bits and
time, racecheck as version 30). Run 133 at 64 partitions: version 30 0.3407 ms at 128K and
0.1867 at 64K against 0.3785 / 0.2087 for version 29, the same bits. Version 30's form, its
mbarriers in static shared memory, is the library's long F32 pass since (run 135: 0.3424 ms at
128K through gem_decode).
versions 34 and 35 are version 30 with the next tile never asked of the L2 (34) or asked only
after the tile's scores (35): run 137's ncu counted about 1.3 GB of DRAM reads for 1.07 GB of V,
as if prefetched rows left the L2 before their copies. Run 138 at 64 partitions, the same bits
as version 1: 128K 0.3339 (30), **0.2915** (34), 0.3164 ms (35), 64K 0.1821 / 0.1666 / 0.1810;
ncu: version 30 read 1.31 GB of DRAM in 333 us, version 34 1.07 GB (V's bytes) in 289 us, the
same L2 read sectors. The prefetch cost reads and time; the library's long F32 pass drops it.
version 36 is version 23 (the BF16 pass's design) with the next tile never asked of the L2, the
same question for BF16.
Every version but the diagnostics 12 and 13 is held to NMSE <= 1e-10 against the double
reference of its own view and bitwise repeats before it is timed (CUDA events, 10 ABBA rounds);
each version after the first prints whether its output has the first one's bits.
The program is built for sm_90a (versions 15-19 use wgmma).

./kfv_mma [--f32] [--lengths 8192,65536,131072] [--rounds 10] [--pos0 N] [--partitions 64]
  [versions...]
(--f32: an F32 V cache, versions 1, 2, 5, 10, 24-30 and 33-35; otherwise BF16, versions 1-4, 6-23,
31, 32, 36)
*/
#include <math.h>
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
#define NPAIRS 64

/* the dims of a thread's two 8-dim blocks in the dots: low block, its partner is + 256 */
__device__ __forceinline__ int kfv_block(int w, int tig)
{
    return tig == 0 ? 8 * w : 64 + 8 * (3 * w + tig - 1);
}

__device__ __forceinline__ void split3_bf16(float x, __nv_bfloat16 *hi, __nv_bfloat16 *mid,
                                            __nv_bfloat16 *lo)
{
    *hi = __float2bfloat16_rn(x);
    const float r1 = x - __bfloat162float(*hi);
    *mid = __float2bfloat16_rn(r1);
    *lo = __float2bfloat16_rn(r1 - __bfloat162float(*mid));
}

__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

__device__ __forceinline__ uint4 ld16_keep(const void *p)
{
    uint4 r;
    asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p)
                 : "memory");
    return r;
}

extern "C" __global__ void __launch_bounds__(256, 2)
    kfv_mma_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                       const __grid_constant__ gem_cu_rope rope,
                       const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                       float *__restrict__ part_m, float *__restrict__ part_s,
                       float *__restrict__ part_o, int64_t live, int64_t partitions,
                       int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    __shared__ __align__(16) float sred[8][GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GROUP];
    __shared__ __align__(16) float2 scs[GEM_MMA_TILE][NPAIRS];   /* the tile's cos, sin */
    __shared__ __align__(16) float2 sstep[GEM_MMA_TILE][NPAIRS]; /* cos, sin of u * f_j */
    __shared__ __align__(16) float swr[8][16];                   /* k_weight of tig 0's dims */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    const int blk = kfv_block(w, tig);
    const bool rot = tig == 0;

    /* Q's pieces: rotating dims plain, the others times k_weight; in shared memory (k-step,
     * word, thread), read per k-step */
    __shared__ uint32_t sqf[4][6][256];
    {
        const float *qh = q + (g * GROUP + grp) * D;
#pragma unroll
        for (int st = 0; st < 4; st++) {
            const int base = blk + 256 * (st >> 1) + 4 * (st & 1);
            __nv_bfloat16 hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const float x = rot ? __ldg(qh + base + u) : __ldg(qh + base + u) * __ldg(kw + base + u);
                split3_bf16(x, &hi[u], &mid[u], &lo[u]);
            }
            sqf[st][0][tid] = gem_pack_bf16(hi[0], hi[1]);
            sqf[st][1][tid] = gem_pack_bf16(mid[0], mid[1]);
            sqf[st][2][tid] = gem_pack_bf16(hi[2], hi[3]);
            sqf[st][3][tid] = gem_pack_bf16(mid[2], mid[3]);
            sqf[st][4][tid] = gem_pack_bf16(lo[0], lo[1]);
            sqf[st][5][tid] = gem_pack_bf16(lo[2], lo[3]);
        }
    }
    /* the per-block tables: the 16 offsets' cos, sin; k_weight of the rotating blocks */
    for (int e = tid; e < T * NPAIRS; e += 256) {
        float c, s;
        gem_rope_cs(e / NPAIRS, rope.inv_freq[e % NPAIRS], &c, &s);
        sstep[e / NPAIRS][e % NPAIRS] = make_float2(c, s);
    }
    if (tid < 128)
        swr[tid >> 4][tid & 15] = __ldg(kw + ((tid & 15) < 8 ? 8 * (tid >> 4) + (tid & 15)
                                                            : 256 + 8 * (tid >> 4) + (tid & 7)));
    __syncthreads();
    /* the first tile's angles */
    for (int e = tid; e < T * NPAIRS; e += 256) {
        const int u = e / NPAIRS, j = e % NPAIRS;
        float c, s;
        gem_rope_cs(rope.pos0 + begin + u, rope.inv_freq[j], &c, &s);
        scs[u][j] = make_float2(c, s);
    }
    const uint4 zero4 = make_uint4(0u, 0u, 0u, 0u);
    /* the dots' V rows: token begin + grp, dims blk (+ 256); n-tile 1 eight rows further */
    const __nv_bfloat16 *kp = v + g * hs + (begin + grp) * ts + blk;
    const __nv_bfloat16 *vp = v + g * hs + (begin + 2 * tig) * ts + 64 * w + 8 * grp;
    const int64_t k8 = 8 * ts, v8 = 8 * ts;
    uint4 kr[2][2], vr[4];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const bool in = begin + 8 * i + grp < end;
        kr[i][0] = in ? ld16_keep(kp + i * k8) : zero4;
        kr[i][1] = in ? ld16_keep(kp + i * k8 + 256) : zero4;
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
        const int dt = 2 * tig + (u & 1) + 8 * (u >> 1);
        vr[u] = begin + dt < end ? gem_ld16(vp + (u & 1) * ts + (u >> 1) * v8, pol) : zero4;
    }
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;
    __syncthreads(); /* scs of the first tile */

    for (int64_t t0 = begin; t0 < end; t0 += T) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int h = 0; h < 2; h++) {
                /* B pieces of block h (the low block, or its partners): words c */
                uint32_t bh[4] = {kr[i][h].x, kr[i][h].y, kr[i][h].z, kr[i][h].w};
                uint32_t bm[4] = {0u, 0u, 0u, 0u}, bl[4] = {0u, 0u, 0u, 0u};
                if (rot) { /* rotate the 8 pairs of token 8i + grp, keep side h, split in three */
                    const float2 *cs = &scs[8 * i + grp][8 * w];
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        const uint32_t wl = gem_word(kr[i][0], c), wh = gem_word(kr[i][1], c);
                        __nv_bfloat16 kh[2], km[2], kl[2];
#pragma unroll
                        for (int b = 0; b < 2; b++) {
                            const int e = 2 * c + b; /* pair 8w + e */
                            const float a = swr[w][e] * (b ? bf_hi(wl) : bf_lo(wl));
                            const float bb = swr[w][8 + e] * (b ? bf_hi(wh) : bf_lo(wh));
                            const float2 r = cs[e];
                            const float x = h == 0 ? fmaf(a, r.x, -bb * r.y) : fmaf(a, r.y, bb * r.x);
                            split3_bf16(x, &kh[b], &km[b], &kl[b]);
                        }
                        bh[c] = gem_pack_bf16(kh[0], kh[1]);
                        bm[c] = gem_pack_bf16(km[0], km[1]);
                        bl[c] = gem_pack_bf16(kl[0], kl[1]);
                    }
                }
#pragma unroll
                for (int e2 = 0; e2 < 2; e2++) {
                    const int st = 2 * h + e2, c0 = 2 * e2;
                    const uint32_t a0 = sqf[st][0][tid], a1 = sqf[st][1][tid],
                                   a2 = sqf[st][2][tid], a3 = sqf[st][3][tid],
                                   l0 = sqf[st][4][tid], l1 = sqf[st][5][tid];
                    gem_mma_bf16(d0, a0, a1, a2, a3, bh[c0], bh[c0 + 1]);
                    gem_mma_bf16(d0, a0, a1, a2, a3, bm[c0], bm[c0 + 1]);
                    gem_mma_bf16(d0, a0, a1, a2, a3, bl[c0], bl[c0 + 1]);
                    gem_mma_bf16(d1, l0, 0u, l1, 0u, bh[c0], bh[c0 + 1]);
                }
            }
            float2 r;
            r.x = (d0[0] + d0[2]) + d1[0];
            r.y = (d0[1] + d0[3]) + d1[1];
            *reinterpret_cast<float2 *>(&sred[w][grp][8 * i + 2 * tig]) = r;
        }
        kp += T * ts;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const bool in = t0 + T + 8 * i + grp < end;
            kr[i][0] = in ? ld16_keep(kp + i * k8) : zero4;
            kr[i][1] = in ? ld16_keep(kp + i * k8 + 256) : zero4;
        }
        __syncthreads(); /* sred complete; every read of scs done */
        /* the next tile's angles: exact at its first token, one step from the offset table */
        if (tid < NPAIRS) {
            float c0, s0;
            gem_rope_cs(rope.pos0 + t0 + T, rope.inv_freq[tid], &c0, &s0);
            scs[0][tid] = make_float2(c0, s0);
        }
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
        __syncthreads(); /* weights and the next tile's first angles published */
        for (int e = tid + NPAIRS; e < T * NPAIRS; e += 256) {
            const int u = e / NPAIRS, j = e % NPAIRS;
            const float2 b = scs[0][j], st = sstep[u][j];
            scs[u][j] = make_float2(fmaf(b.x, st.x, -b.y * st.y), fmaf(b.y, st.x, b.x * st.y));
        }
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
        vp += T * ts;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int dt = 2 * tig + (u & 1) + 8 * (u >> 1);
            vr[u] = t0 + T + dt < end ? gem_ld16(vp + (u & 1) * ts + (u >> 1) * v8, pol) : zero4;
        }
        __syncthreads(); /* the next tile's angles complete before its dots */
    }
    const int64_t row = p * n_q_heads + g * GROUP + grp;
    float4 *po = reinterpret_cast<float4 *>(part_o + row * D + 64 * w + 16 * tig);
    po[0] = make_float4(acc[0][0] + acc[0][2], acc[1][0] + acc[1][2], acc[2][0] + acc[2][2],
                        acc[3][0] + acc[3][2]);
    po[1] = make_float4(acc[4][0] + acc[4][2], acc[5][0] + acc[5][2], acc[6][0] + acc[6][2],
                        acc[7][0] + acc[7][2]);
    po[2] = make_float4(acc[0][1] + acc[0][3], acc[1][1] + acc[1][3], acc[2][1] + acc[2][3],
                        acc[3][1] + acc[3][3]);
    po[3] = make_float4(acc[4][1] + acc[4][3], acc[5][1] + acc[5][3], acc[6][1] + acc[6][3],
                        acc[7][1] + acc[7][3]);
    if (lane == 0) {
        part_m[p * n_q_heads + g * GROUP + w] = m;
        part_s[p * n_q_heads + g * GROUP + w] = s;
    }
}

/* ---- version 4: the rotating dims on the F64 tensor cores ------------------------------------

The library's staged tensor-core pass (gem_fused_first_pass_mma_staged_body) with V alone staged:
  - the 384 dims that do not rotate: K = k_weight * V, so k_weight is folded into Q's three BF16
    pieces and the B fragments are the staged V rows themselves (exact BF16), 3 k-steps a warp;
  - the 128 rotating dims: q . RoPE_{P + u}(w V) = RoPE_{-P}(q) . RoPE_u(w V) with P the tile's
    first position and u its offset (0 .. 15). RoPE_{-P}(q) is taken in double once a tile (the
    8 pairs of warp w, 8w .. 8w + 7, exact angles from sincospif, computed for four tiles at a
    time); RoPE_u(w V) uses a per-block table of w cos and w sin of the 16 offsets, in F32, and
    is converted to double. Both meet in mma.m8n8k4.f64 (A: 8 heads x 4 dims, B: 4 dims x 8
    tokens, D: the heads' scores of 8 tokens, the layout of the BF16 mma's D rows 0-7), four a
    warp and n-tile. A thread's ldmatrix of a tile gives it two whole pairs of one token per
    n-tile, so the rotation needs no shuffle and every lane does the same work.
The softmax and the V update are the library's. */
#define V4_ROW 520                      /* elements of a staged row: 512 + 16 bytes of padding */
#define V4_STAGE (GEM_MMA_TILE * V4_ROW) /* one staged tile */
#define V4_SHARED (2 * V4_STAGE * 2)     /* two buffers: 33,280 bytes, dynamic */

/* D += A B, m8n8k4, F64; a = A[grp][tig], b = B[tig][grp], d = D[grp][2 tig], D[grp][2 tig + 1] */
__device__ __forceinline__ void dmma(double *d, double a, double b)
{
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
                 : "+d"(d[0]), "+d"(d[1])
                 : "d"(a), "d"(b));
}

/* the dims of non-rotating k-step s (0 .. 23): [64, 256) then [320, 512), 16 each */
__device__ __forceinline__ int v4_step_dim(int s) { return s < 12 ? 64 + 16 * s : 320 + 16 * (s - 12); }

extern "C" __global__ void __launch_bounds__(256, 2)
    kfv_dmma_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                        const __grid_constant__ gem_cu_rope rope,
                        const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                        float *__restrict__ part_m, float *__restrict__ part_s,
                        float *__restrict__ part_o, int64_t live, int64_t partitions,
                        int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    extern __shared__ __align__(128) unsigned char v4_tiles[]; /* V4_SHARED */
    __nv_bfloat16 *const ring = reinterpret_cast<__nv_bfloat16 *>(v4_tiles);
    __shared__ __align__(16) float sred[8][GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GROUP];
    __shared__ __align__(16) float4 scoef[8][2][2][32]; /* warp, n-tile, pair, lane */
    __shared__ uint2 sqb[8][3][32];                     /* Q's lo fragments, by warp, k-step, lane */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    /* Q: the non-rotating k-steps 3w .. 3w + 2 times k_weight, in three BF16 pieces (hi, mid in
     * registers, lo in sqb); the rotating pairs 8w + 2 tig + e of head grp in double */
    uint32_t qa[3][4];
    double ql[2], qh[2];
    {
        const float *qg = q + (g * GROUP + grp) * D;
#pragma unroll
        for (int st = 0; st < 3; st++) {
            const int base = v4_step_dim(3 * w + st) + 2 * tig;
            __nv_bfloat16 hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int d = base + (u & 1) + 8 * (u >> 1);
                split3_bf16(__ldg(qg + d) * __ldg(kw + d), &hi[u], &mid[u], &lo[u]);
            }
            qa[st][0] = gem_pack_bf16(hi[0], hi[1]);
            qa[st][1] = gem_pack_bf16(mid[0], mid[1]);
            qa[st][2] = gem_pack_bf16(hi[2], hi[3]);
            qa[st][3] = gem_pack_bf16(mid[2], mid[3]);
            sqb[w][st][lane] = make_uint2(gem_pack_bf16(lo[0], lo[1]), gem_pack_bf16(lo[2], lo[3]));
        }
#pragma unroll
        for (int e = 0; e < 2; e++) {
            ql[e] = (double)__ldg(qg + 8 * w + 2 * tig + e);
            qh[e] = (double)__ldg(qg + 256 + 8 * w + 2 * tig + e);
        }
        /* this lane's rotation of offset 8i + grp: w cos, w sin of pairs 8w + 2 tig + e */
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int j = 8 * w + 2 * tig + e;
                float c, s;
                gem_rope_cs(8 * i + grp, rope.inv_freq[j], &c, &s);
                const float wl = __ldg(kw + j), wh = __ldg(kw + 256 + j);
                scoef[w][i][e][lane] = make_float4(wl * c, wh * s, wl * s, wh * c);
            }
    }
    const int prow = tid >> 6, pcol = 8 * (tid & 63);
    const __nv_bfloat16 *vp = v + g * hs + (begin + prow) * ts + pcol;
    const uint4 zero4 = make_uint4(0u, 0u, 0u, 0u);
    uint4 r[4]; /* V rows prow + 4u of the tile in flight */
    auto load = [&](int64_t it) {
        const int64_t t = begin + it * T + prow;
#pragma unroll
        for (int u = 0; u < 4; u++)
            r[u] = t + 4 * u < end ? gem_ld16(vp + 4 * u * ts, pol) : zero4;
        vp += T * ts;
    };
    auto store = [&](int64_t it) {
        __nv_bfloat16 *vs = ring + (size_t)(it & 1) * V4_STAGE;
#pragma unroll
        for (int u = 0; u < 4; u++)
            *reinterpret_cast<uint4 *>(vs + (prow + 4 * u) * V4_ROW + pcol) = r[u];
    };
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;
    float cc = 1.f, ss = 0.f; /* cos, sin of tile (it & ~3) + (lane >> 3), pair 8w + (lane & 7) */
    if (ntiles > 0) {
        load(0);
        store(0);
    }
    if (ntiles > 1)
        load(1);
    __syncthreads(); /* tile 0 and the tables are staged */
    /* ldmatrix rows: lane l gives the row of matrix l >> 3, row l & 7; the rotating block: matrix
     * mi is tokens 8 (mi >> 1) + row of dims 8w (+ 256 for odd mi); a non-rotating k-step: dims
     * base (+ 8 for odd mi); the V update's as in the library */
    const int mrow = (lane & 7) + 8 * (lane >> 4), mhalf = (lane >> 3) & 1;
    const int vrow = (lane & 7) + 8 * ((lane >> 3) & 1), vcol = 64 * w + 8 * (lane >> 4);
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * T;
        const __nv_bfloat16 *vs = ring + (size_t)(it & 1) * V4_STAGE;
        if ((it & 3) == 0)
            gem_rope_cs(rope.pos0 + t0 + (int64_t)(lane >> 3) * T, rope.inv_freq[8 * w + (lane & 7)],
                        &cc, &ss);
        /* RoPE_{-P}(q) of this tile's first position P, pairs 8w + 2 tig + e */
        double al[2], ah[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int src = 8 * (int)(it & 3) + 2 * tig + e;
            const double c = (double)__shfl_sync(0xffffffffu, cc, src);
            const double sn = (double)__shfl_sync(0xffffffffu, ss, src);
            al[e] = fma(ql[e], c, qh[e] * sn);
            ah[e] = fma(qh[e], c, -(ql[e] * sn));
        }
        uint32_t rb[4]; /* the rotating block: n-tile i's low dims rb[2i], their partners rb[2i + 1] */
        gem_ldsm_x4(rb, vs + mrow * V4_ROW + 8 * w + 256 * mhalf);
        uint32_t nb[3][4];
#pragma unroll
        for (int st = 0; st < 3; st++)
            gem_ldsm_x4(nb[st], vs + mrow * V4_ROW + v4_step_dim(3 * w + st) + 8 * mhalf);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int st = 0; st < 3; st++) {
                const uint2 l = sqb[w][st][lane];
                gem_mma_bf16(d0, qa[st][0], qa[st][1], qa[st][2], qa[st][3], nb[st][2 * i],
                             nb[st][2 * i + 1]);
                gem_mma_bf16(d1, l.x, 0u, l.y, 0u, nb[st][2 * i], nb[st][2 * i + 1]);
            }
            double c[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float vl = e ? bf_hi(rb[2 * i]) : bf_lo(rb[2 * i]);
                const float vh = e ? bf_hi(rb[2 * i + 1]) : bf_lo(rb[2 * i + 1]);
                const float4 cf = scoef[w][i][e][lane];
                const float kl = fmaf(cf.x, vl, -(cf.y * vh)), kh = fmaf(cf.z, vl, cf.w * vh);
                dmma(c[e], al[e], (double)kl);
                dmma(c[e], ah[e], (double)kh);
            }
            float2 rr; /* head grp, tokens 8i + 2 tig, + 1 */
            rr.x = ((d0[0] + d0[2]) + d1[0]) + (float)(c[0][0] + c[1][0]);
            rr.y = ((d0[1] + d0[3]) + d1[1]) + (float)(c[0][1] + c[1][1]);
            *reinterpret_cast<float2 *>(&sred[w][grp][8 * i + 2 * tig]) = rr;
        }
        __syncthreads(); /* sred complete; every warp is past tile it - 1's V update */
        if (it + 1 < ntiles)
            store(it + 1);
        if (it + 2 < ntiles)
            load(it + 2);
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
        __syncthreads(); /* the weights of all eight heads and tile it + 1 are published */
        {
            const float al2 = salpha[grp];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                acc[j][0] *= al2;
                acc[j][1] *= al2;
                acc[j][2] *= al2;
                acc[j][3] *= al2;
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
                uint32_t b[4];
                gem_ldsm_x4_trans(b, vs + vrow * V4_ROW + vcol + 16 * jj);
                gem_mma_bf16(acc[2 * jj], a0, a1, a2, a3, b[0], b[1]);
                gem_mma_bf16(acc[2 * jj + 1], a0, a1, a2, a3, b[2], b[3]);
            }
        }
    }
    const int64_t row = p * n_q_heads + g * GROUP + grp;
    float *po = part_o + row * D + 64 * w + 2 * tig;
#pragma unroll
    for (int j = 0; j < 8; j++)
        *reinterpret_cast<float2 *>(po + 8 * j) =
            make_float2(acc[j][0] + acc[j][2], acc[j][1] + acc[j][3]);
    if (lane == 0) {
        part_m[p * n_q_heads + g * GROUP + w] = m;
        part_s[p * n_q_heads + g * GROUP + w] = s;
    }
}

/* ---- version 14: version 4 at three blocks an SM ------------------------------------------

Run 103 put version 4's time in its arithmetic (0.216 of 0.243 ms at 128K without the reads),
issued at 0.55 instructions a cycle a scheduler by 15 warps an SM: two blocks of 256 threads at
128 registers. The same code with __launch_bounds__(256, 3) gets at most 85 registers a thread
(ptxas spills what does not fit) and 24 warps an SM, 60 KB of shared memory a block; run with
--partitions 99 so that the grid (99 x 4 blocks) fills three blocks on 132 SMs. */
extern "C" __global__ void __launch_bounds__(256, 3)
    kfv_dmma3_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                        const __grid_constant__ gem_cu_rope rope,
                        const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                        float *__restrict__ part_m, float *__restrict__ part_s,
                        float *__restrict__ part_o, int64_t live, int64_t partitions,
                        int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    extern __shared__ __align__(128) unsigned char v14_tiles[]; /* V4_SHARED */
    __nv_bfloat16 *const ring = reinterpret_cast<__nv_bfloat16 *>(v14_tiles);
    __shared__ __align__(16) float sred[8][GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GROUP];
    __shared__ __align__(16) float4 scoef[8][2][2][32]; /* warp, n-tile, pair, lane */
    __shared__ uint2 sqb[8][3][32];                     /* Q's lo fragments, by warp, k-step, lane */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    /* Q: the non-rotating k-steps 3w .. 3w + 2 times k_weight, in three BF16 pieces (hi, mid in
     * registers, lo in sqb); the rotating pairs 8w + 2 tig + e of head grp in double */
    uint32_t qa[3][4];
    double ql[2], qh[2];
    {
        const float *qg = q + (g * GROUP + grp) * D;
#pragma unroll
        for (int st = 0; st < 3; st++) {
            const int base = v4_step_dim(3 * w + st) + 2 * tig;
            __nv_bfloat16 hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int d = base + (u & 1) + 8 * (u >> 1);
                split3_bf16(__ldg(qg + d) * __ldg(kw + d), &hi[u], &mid[u], &lo[u]);
            }
            qa[st][0] = gem_pack_bf16(hi[0], hi[1]);
            qa[st][1] = gem_pack_bf16(mid[0], mid[1]);
            qa[st][2] = gem_pack_bf16(hi[2], hi[3]);
            qa[st][3] = gem_pack_bf16(mid[2], mid[3]);
            sqb[w][st][lane] = make_uint2(gem_pack_bf16(lo[0], lo[1]), gem_pack_bf16(lo[2], lo[3]));
        }
#pragma unroll
        for (int e = 0; e < 2; e++) {
            ql[e] = (double)__ldg(qg + 8 * w + 2 * tig + e);
            qh[e] = (double)__ldg(qg + 256 + 8 * w + 2 * tig + e);
        }
        /* this lane's rotation of offset 8i + grp: w cos, w sin of pairs 8w + 2 tig + e */
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int j = 8 * w + 2 * tig + e;
                float c, s;
                gem_rope_cs(8 * i + grp, rope.inv_freq[j], &c, &s);
                const float wl = __ldg(kw + j), wh = __ldg(kw + 256 + j);
                scoef[w][i][e][lane] = make_float4(wl * c, wh * s, wl * s, wh * c);
            }
    }
    const int prow = tid >> 6, pcol = 8 * (tid & 63);
    const __nv_bfloat16 *vp = v + g * hs + (begin + prow) * ts + pcol;
    const uint4 zero4 = make_uint4(0u, 0u, 0u, 0u);
    uint4 r[4]; /* V rows prow + 4u of the tile in flight */
    auto load = [&](int64_t it) {
        const int64_t t = begin + it * T + prow;
#pragma unroll
        for (int u = 0; u < 4; u++)
            r[u] = t + 4 * u < end ? gem_ld16(vp + 4 * u * ts, pol) : zero4;
        vp += T * ts;
    };
    auto store = [&](int64_t it) {
        __nv_bfloat16 *vs = ring + (size_t)(it & 1) * V4_STAGE;
#pragma unroll
        for (int u = 0; u < 4; u++)
            *reinterpret_cast<uint4 *>(vs + (prow + 4 * u) * V4_ROW + pcol) = r[u];
    };
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;
    float cc = 1.f, ss = 0.f; /* cos, sin of tile (it & ~3) + (lane >> 3), pair 8w + (lane & 7) */
    if (ntiles > 0) {
        load(0);
        store(0);
    }
    if (ntiles > 1)
        load(1);
    __syncthreads(); /* tile 0 and the tables are staged */
    /* ldmatrix rows: lane l gives the row of matrix l >> 3, row l & 7; the rotating block: matrix
     * mi is tokens 8 (mi >> 1) + row of dims 8w (+ 256 for odd mi); a non-rotating k-step: dims
     * base (+ 8 for odd mi); the V update's as in the library */
    const int mrow = (lane & 7) + 8 * (lane >> 4), mhalf = (lane >> 3) & 1;
    const int vrow = (lane & 7) + 8 * ((lane >> 3) & 1), vcol = 64 * w + 8 * (lane >> 4);
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * T;
        const __nv_bfloat16 *vs = ring + (size_t)(it & 1) * V4_STAGE;
        if ((it & 3) == 0)
            gem_rope_cs(rope.pos0 + t0 + (int64_t)(lane >> 3) * T, rope.inv_freq[8 * w + (lane & 7)],
                        &cc, &ss);
        /* RoPE_{-P}(q) of this tile's first position P, pairs 8w + 2 tig + e */
        double al[2], ah[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int src = 8 * (int)(it & 3) + 2 * tig + e;
            const double c = (double)__shfl_sync(0xffffffffu, cc, src);
            const double sn = (double)__shfl_sync(0xffffffffu, ss, src);
            al[e] = fma(ql[e], c, qh[e] * sn);
            ah[e] = fma(qh[e], c, -(ql[e] * sn));
        }
        uint32_t rb[4]; /* the rotating block: n-tile i's low dims rb[2i], their partners rb[2i + 1] */
        gem_ldsm_x4(rb, vs + mrow * V4_ROW + 8 * w + 256 * mhalf);
        uint32_t nb[3][4];
#pragma unroll
        for (int st = 0; st < 3; st++)
            gem_ldsm_x4(nb[st], vs + mrow * V4_ROW + v4_step_dim(3 * w + st) + 8 * mhalf);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int st = 0; st < 3; st++) {
                const uint2 l = sqb[w][st][lane];
                gem_mma_bf16(d0, qa[st][0], qa[st][1], qa[st][2], qa[st][3], nb[st][2 * i],
                             nb[st][2 * i + 1]);
                gem_mma_bf16(d1, l.x, 0u, l.y, 0u, nb[st][2 * i], nb[st][2 * i + 1]);
            }
            double c[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float vl = e ? bf_hi(rb[2 * i]) : bf_lo(rb[2 * i]);
                const float vh = e ? bf_hi(rb[2 * i + 1]) : bf_lo(rb[2 * i + 1]);
                const float4 cf = scoef[w][i][e][lane];
                const float kl = fmaf(cf.x, vl, -(cf.y * vh)), kh = fmaf(cf.z, vl, cf.w * vh);
                dmma(c[e], al[e], (double)kl);
                dmma(c[e], ah[e], (double)kh);
            }
            float2 rr; /* head grp, tokens 8i + 2 tig, + 1 */
            rr.x = ((d0[0] + d0[2]) + d1[0]) + (float)(c[0][0] + c[1][0]);
            rr.y = ((d0[1] + d0[3]) + d1[1]) + (float)(c[0][1] + c[1][1]);
            *reinterpret_cast<float2 *>(&sred[w][grp][8 * i + 2 * tig]) = rr;
        }
        __syncthreads(); /* sred complete; every warp is past tile it - 1's V update */
        if (it + 1 < ntiles)
            store(it + 1);
        if (it + 2 < ntiles)
            load(it + 2);
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
        __syncthreads(); /* the weights of all eight heads and tile it + 1 are published */
        {
            const float al2 = salpha[grp];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                acc[j][0] *= al2;
                acc[j][1] *= al2;
                acc[j][2] *= al2;
                acc[j][3] *= al2;
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
                uint32_t b[4];
                gem_ldsm_x4_trans(b, vs + vrow * V4_ROW + vcol + 16 * jj);
                gem_mma_bf16(acc[2 * jj], a0, a1, a2, a3, b[0], b[1]);
                gem_mma_bf16(acc[2 * jj + 1], a0, a1, a2, a3, b[2], b[3]);
            }
        }
    }
    const int64_t row = p * n_q_heads + g * GROUP + grp;
    float *po = part_o + row * D + 64 * w + 2 * tig;
#pragma unroll
    for (int j = 0; j < 8; j++)
        *reinterpret_cast<float2 *>(po + 8 * j) =
            make_float2(acc[j][0] + acc[j][2], acc[j][1] + acc[j][3]);
    if (lane == 0) {
        part_m[p * n_q_heads + g * GROUP + w] = m;
        part_s[p * n_q_heads + g * GROUP + w] = s;
    }
}


/* ---- versions 12 and 13: version 4 without its DRAM reads, and without its arithmetic ------

Diagnostics, not checked against the reference (their outputs are not attention): version 12
(MODE 1) is version 4 with every row it would load replaced by a row of 1.0 made in registers
(the stores into shared memory, the barriers and all the arithmetic stay); version 13 (MODE 2)
keeps version 4's loads, stores and barriers and drops the dots, the softmax and the V update
(each thread folds one word of each staged tile into a value the kernel may write). Their times
against version 4's say whether its time is its arithmetic's, its reads', or their sum. */
template <int MODE>
__global__ void __launch_bounds__(256, 2)
    kfv_dmma_probe_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                        const __grid_constant__ gem_cu_rope rope,
                        const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                        float *__restrict__ part_m, float *__restrict__ part_s,
                        float *__restrict__ part_o, int64_t live, int64_t partitions,
                        int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    extern __shared__ __align__(128) unsigned char v12_tiles[]; /* V4_SHARED */
    __nv_bfloat16 *const ring = reinterpret_cast<__nv_bfloat16 *>(v12_tiles);
    __shared__ __align__(16) float sred[8][GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GROUP];
    __shared__ __align__(16) float4 scoef[8][2][2][32]; /* warp, n-tile, pair, lane */
    __shared__ uint2 sqb[8][3][32];                     /* Q's lo fragments, by warp, k-step, lane */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    /* Q: the non-rotating k-steps 3w .. 3w + 2 times k_weight, in three BF16 pieces (hi, mid in
     * registers, lo in sqb); the rotating pairs 8w + 2 tig + e of head grp in double */
    uint32_t qa[3][4];
    double ql[2], qh[2];
    {
        const float *qg = q + (g * GROUP + grp) * D;
#pragma unroll
        for (int st = 0; st < 3; st++) {
            const int base = v4_step_dim(3 * w + st) + 2 * tig;
            __nv_bfloat16 hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int d = base + (u & 1) + 8 * (u >> 1);
                split3_bf16(__ldg(qg + d) * __ldg(kw + d), &hi[u], &mid[u], &lo[u]);
            }
            qa[st][0] = gem_pack_bf16(hi[0], hi[1]);
            qa[st][1] = gem_pack_bf16(mid[0], mid[1]);
            qa[st][2] = gem_pack_bf16(hi[2], hi[3]);
            qa[st][3] = gem_pack_bf16(mid[2], mid[3]);
            sqb[w][st][lane] = make_uint2(gem_pack_bf16(lo[0], lo[1]), gem_pack_bf16(lo[2], lo[3]));
        }
#pragma unroll
        for (int e = 0; e < 2; e++) {
            ql[e] = (double)__ldg(qg + 8 * w + 2 * tig + e);
            qh[e] = (double)__ldg(qg + 256 + 8 * w + 2 * tig + e);
        }
        /* this lane's rotation of offset 8i + grp: w cos, w sin of pairs 8w + 2 tig + e */
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int j = 8 * w + 2 * tig + e;
                float c, s;
                gem_rope_cs(8 * i + grp, rope.inv_freq[j], &c, &s);
                const float wl = __ldg(kw + j), wh = __ldg(kw + 256 + j);
                scoef[w][i][e][lane] = make_float4(wl * c, wh * s, wl * s, wh * c);
            }
    }
    const int prow = tid >> 6, pcol = 8 * (tid & 63);
    const __nv_bfloat16 *vp = v + g * hs + (begin + prow) * ts + pcol;
    const uint4 zero4 = make_uint4(0u, 0u, 0u, 0u);
    uint4 r[4]; /* V rows prow + 4u of the tile in flight */
    auto load = [&](int64_t it) {
        const int64_t t = begin + it * T + prow;
#pragma unroll
        for (int u = 0; u < 4; u++)
            if constexpr (MODE == 1) /* no DRAM: a row of 1.0 (in registers, as if loaded) */
                r[u] = t + 4 * u < end ? make_uint4(0x3F803F80u, 0x3F803F80u, 0x3F803F80u,
                                                    0x3F803F80u)
                                       : zero4;
            else
                r[u] = t + 4 * u < end ? gem_ld16(vp + 4 * u * ts, pol) : zero4;
        vp += T * ts;
    };
    auto store = [&](int64_t it) {
        __nv_bfloat16 *vs = ring + (size_t)(it & 1) * V4_STAGE;
#pragma unroll
        for (int u = 0; u < 4; u++)
            *reinterpret_cast<uint4 *>(vs + (prow + 4 * u) * V4_ROW + pcol) = r[u];
    };
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;
    uint32_t sink = 0; /* MODE 2: what the staged rows fold into, so their loads stay */
    float cc = 1.f, ss = 0.f; /* cos, sin of tile (it & ~3) + (lane >> 3), pair 8w + (lane & 7) */
    if (ntiles > 0) {
        load(0);
        store(0);
    }
    if (ntiles > 1)
        load(1);
    __syncthreads(); /* tile 0 and the tables are staged */
    /* ldmatrix rows: lane l gives the row of matrix l >> 3, row l & 7; the rotating block: matrix
     * mi is tokens 8 (mi >> 1) + row of dims 8w (+ 256 for odd mi); a non-rotating k-step: dims
     * base (+ 8 for odd mi); the V update's as in the library */
    const int mrow = (lane & 7) + 8 * (lane >> 4), mhalf = (lane >> 3) & 1;
    const int vrow = (lane & 7) + 8 * ((lane >> 3) & 1), vcol = 64 * w + 8 * (lane >> 4);
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * T;
        const __nv_bfloat16 *vs = ring + (size_t)(it & 1) * V4_STAGE;
        if constexpr (MODE != 2) {
            if ((it & 3) == 0)
                gem_rope_cs(rope.pos0 + t0 + (int64_t)(lane >> 3) * T, rope.inv_freq[8 * w + (lane & 7)],
                            &cc, &ss);
            /* RoPE_{-P}(q) of this tile's first position P, pairs 8w + 2 tig + e */
            double al[2], ah[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int src = 8 * (int)(it & 3) + 2 * tig + e;
                const double c = (double)__shfl_sync(0xffffffffu, cc, src);
                const double sn = (double)__shfl_sync(0xffffffffu, ss, src);
                al[e] = fma(ql[e], c, qh[e] * sn);
                ah[e] = fma(qh[e], c, -(ql[e] * sn));
            }
            uint32_t rb[4]; /* the rotating block: n-tile i's low dims rb[2i], their partners rb[2i + 1] */
            gem_ldsm_x4(rb, vs + mrow * V4_ROW + 8 * w + 256 * mhalf);
            uint32_t nb[3][4];
#pragma unroll
            for (int st = 0; st < 3; st++)
                gem_ldsm_x4(nb[st], vs + mrow * V4_ROW + v4_step_dim(3 * w + st) + 8 * mhalf);
#pragma unroll
            for (int i = 0; i < 2; i++) {
                float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
                for (int st = 0; st < 3; st++) {
                    const uint2 l = sqb[w][st][lane];
                    gem_mma_bf16(d0, qa[st][0], qa[st][1], qa[st][2], qa[st][3], nb[st][2 * i],
                                 nb[st][2 * i + 1]);
                    gem_mma_bf16(d1, l.x, 0u, l.y, 0u, nb[st][2 * i], nb[st][2 * i + 1]);
                }
                double c[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const float vl = e ? bf_hi(rb[2 * i]) : bf_lo(rb[2 * i]);
                    const float vh = e ? bf_hi(rb[2 * i + 1]) : bf_lo(rb[2 * i + 1]);
                    const float4 cf = scoef[w][i][e][lane];
                    const float kl = fmaf(cf.x, vl, -(cf.y * vh)), kh = fmaf(cf.z, vl, cf.w * vh);
                    dmma(c[e], al[e], (double)kl);
                    dmma(c[e], ah[e], (double)kh);
                }
                float2 rr; /* head grp, tokens 8i + 2 tig, + 1 */
                rr.x = ((d0[0] + d0[2]) + d1[0]) + (float)(c[0][0] + c[1][0]);
                rr.y = ((d0[1] + d0[3]) + d1[1]) + (float)(c[0][1] + c[1][1]);
                *reinterpret_cast<float2 *>(&sred[w][grp][8 * i + 2 * tig]) = rr;
            }
        } else {
            sink ^= *reinterpret_cast<const uint32_t *>(vs + (tid & 15) * V4_ROW + 2 * (tid >> 4));
        }
        __syncthreads(); /* sred complete; every warp is past tile it - 1's V update */
        if (it + 1 < ntiles)
            store(it + 1);
        if (it + 2 < ntiles)
            load(it + 2);
        if constexpr (MODE != 2) {
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
        __syncthreads(); /* the weights of all eight heads and tile it + 1 are published */
        if constexpr (MODE != 2) {
            const float al2 = salpha[grp];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                acc[j][0] *= al2;
                acc[j][1] *= al2;
                acc[j][2] *= al2;
                acc[j][3] *= al2;
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
                uint32_t b[4];
                gem_ldsm_x4_trans(b, vs + vrow * V4_ROW + vcol + 16 * jj);
                gem_mma_bf16(acc[2 * jj], a0, a1, a2, a3, b[0], b[1]);
                gem_mma_bf16(acc[2 * jj + 1], a0, a1, a2, a3, b[2], b[3]);
            }
        }
    }
    const int64_t row = p * n_q_heads + g * GROUP + grp;
    float *po = part_o + row * D + 64 * w + 2 * tig;
#pragma unroll
    for (int j = 0; j < 8; j++)
        *reinterpret_cast<float2 *>(po + 8 * j) =
            make_float2(acc[j][0] + acc[j][2], acc[j][1] + acc[j][3]);
    if constexpr (MODE == 2)
        if (sink == 0x7FC00001u) /* never, as far as the compiler knows */
            part_o[0] = 1.f;
    if (lane == 0) {
        part_m[p * n_q_heads + g * GROUP + w] = m;
        part_s[p * n_q_heads + g * GROUP + w] = s;
    }
}


/* ---- versions 6 and 7: version 4 with its V tiles copied by cp.async -----------------------

Version 4 (and the library's staged pass it comes from) loads tile it + 2 into registers after
tile it's dots and stores it after tile it + 1's: a load has one tile's time to arrive. Here
cp.async copies tile it + NB - 1 into a ring of NB buffers after tile it's dots, so a copy has
NB - 1 tiles' time, and no registers hold rows in flight. Version 6: NB = 3 (49,920 bytes);
version 7: NB = 4 (66,560 bytes). */
template <int NB>
__global__ void __launch_bounds__(256, 2)
    kfv_dmma_async_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                        const __grid_constant__ gem_cu_rope rope,
                        const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                        float *__restrict__ part_m, float *__restrict__ part_s,
                        float *__restrict__ part_o, int64_t live, int64_t partitions,
                        int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    extern __shared__ __align__(128) unsigned char v6_tiles[]; /* NB * V4_STAGE * 2 */
    __nv_bfloat16 *const ring = reinterpret_cast<__nv_bfloat16 *>(v6_tiles);
    __shared__ __align__(16) float sred[8][GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GROUP];
    __shared__ __align__(16) float4 scoef[8][2][2][32]; /* warp, n-tile, pair, lane */
    __shared__ uint2 sqb[8][3][32];                     /* Q's lo fragments, by warp, k-step, lane */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    /* Q: the non-rotating k-steps 3w .. 3w + 2 times k_weight, in three BF16 pieces (hi, mid in
     * registers, lo in sqb); the rotating pairs 8w + 2 tig + e of head grp in double */
    uint32_t qa[3][4];
    double ql[2], qh[2];
    {
        const float *qg = q + (g * GROUP + grp) * D;
#pragma unroll
        for (int st = 0; st < 3; st++) {
            const int base = v4_step_dim(3 * w + st) + 2 * tig;
            __nv_bfloat16 hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int d = base + (u & 1) + 8 * (u >> 1);
                split3_bf16(__ldg(qg + d) * __ldg(kw + d), &hi[u], &mid[u], &lo[u]);
            }
            qa[st][0] = gem_pack_bf16(hi[0], hi[1]);
            qa[st][1] = gem_pack_bf16(mid[0], mid[1]);
            qa[st][2] = gem_pack_bf16(hi[2], hi[3]);
            qa[st][3] = gem_pack_bf16(mid[2], mid[3]);
            sqb[w][st][lane] = make_uint2(gem_pack_bf16(lo[0], lo[1]), gem_pack_bf16(lo[2], lo[3]));
        }
#pragma unroll
        for (int e = 0; e < 2; e++) {
            ql[e] = (double)__ldg(qg + 8 * w + 2 * tig + e);
            qh[e] = (double)__ldg(qg + 256 + 8 * w + 2 * tig + e);
        }
        /* this lane's rotation of offset 8i + grp: w cos, w sin of pairs 8w + 2 tig + e */
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int j = 8 * w + 2 * tig + e;
                float c, s;
                gem_rope_cs(8 * i + grp, rope.inv_freq[j], &c, &s);
                const float wl = __ldg(kw + j), wh = __ldg(kw + 256 + j);
                scoef[w][i][e][lane] = make_float4(wl * c, wh * s, wl * s, wh * c);
            }
    }
    const int prow = tid >> 6, pcol = 8 * (tid & 63);
    const __nv_bfloat16 *vsrc = v + g * hs + begin * ts + pcol;
    /* tile it's rows into buffer it % NB (rows past the end as zeros), one commit group a tile,
     * empty past the last tile, so that wait_group counts tiles */
    auto issue = [&](int64_t it) {
        if (it < ntiles) {
            __nv_bfloat16 *dst = ring + (size_t)(it % NB) * V4_STAGE;
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int row = prow + 4 * u;
                const bool in = begin + it * T + row < end;
                const __nv_bfloat16 *src = vsrc + (in ? (it * T + row) * ts : 0);
                asm volatile(
                    "cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(
                        gem_smem_addr(dst + row * V4_ROW + pcol)),
                    "l"(src), "r"(in ? 16 : 0), "l"(pol)
                    : "memory");
            }
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;
    float cc = 1.f, ss = 0.f; /* cos, sin of tile (it & ~3) + (lane >> 3), pair 8w + (lane & 7) */
#pragma unroll
    for (int i = 0; i < NB - 1; i++)
        issue(i);
    asm volatile("cp.async.wait_group %0;\n" ::"n"(NB - 2) : "memory");
    __syncthreads(); /* tile 0 and the tables are staged */
    /* ldmatrix rows: lane l gives the row of matrix l >> 3, row l & 7; the rotating block: matrix
     * mi is tokens 8 (mi >> 1) + row of dims 8w (+ 256 for odd mi); a non-rotating k-step: dims
     * base (+ 8 for odd mi); the V update's as in the library */
    const int mrow = (lane & 7) + 8 * (lane >> 4), mhalf = (lane >> 3) & 1;
    const int vrow = (lane & 7) + 8 * ((lane >> 3) & 1), vcol = 64 * w + 8 * (lane >> 4);
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * T;
        const __nv_bfloat16 *vs = ring + (size_t)(it % NB) * V4_STAGE;
        if ((it & 3) == 0)
            gem_rope_cs(rope.pos0 + t0 + (int64_t)(lane >> 3) * T, rope.inv_freq[8 * w + (lane & 7)],
                        &cc, &ss);
        /* RoPE_{-P}(q) of this tile's first position P, pairs 8w + 2 tig + e */
        double al[2], ah[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int src = 8 * (int)(it & 3) + 2 * tig + e;
            const double c = (double)__shfl_sync(0xffffffffu, cc, src);
            const double sn = (double)__shfl_sync(0xffffffffu, ss, src);
            al[e] = fma(ql[e], c, qh[e] * sn);
            ah[e] = fma(qh[e], c, -(ql[e] * sn));
        }
        uint32_t rb[4]; /* the rotating block: n-tile i's low dims rb[2i], their partners rb[2i + 1] */
        gem_ldsm_x4(rb, vs + mrow * V4_ROW + 8 * w + 256 * mhalf);
        uint32_t nb[3][4];
#pragma unroll
        for (int st = 0; st < 3; st++)
            gem_ldsm_x4(nb[st], vs + mrow * V4_ROW + v4_step_dim(3 * w + st) + 8 * mhalf);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int st = 0; st < 3; st++) {
                const uint2 l = sqb[w][st][lane];
                gem_mma_bf16(d0, qa[st][0], qa[st][1], qa[st][2], qa[st][3], nb[st][2 * i],
                             nb[st][2 * i + 1]);
                gem_mma_bf16(d1, l.x, 0u, l.y, 0u, nb[st][2 * i], nb[st][2 * i + 1]);
            }
            double c[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float vl = e ? bf_hi(rb[2 * i]) : bf_lo(rb[2 * i]);
                const float vh = e ? bf_hi(rb[2 * i + 1]) : bf_lo(rb[2 * i + 1]);
                const float4 cf = scoef[w][i][e][lane];
                const float kl = fmaf(cf.x, vl, -(cf.y * vh)), kh = fmaf(cf.z, vl, cf.w * vh);
                dmma(c[e], al[e], (double)kl);
                dmma(c[e], ah[e], (double)kh);
            }
            float2 rr; /* head grp, tokens 8i + 2 tig, + 1 */
            rr.x = ((d0[0] + d0[2]) + d1[0]) + (float)(c[0][0] + c[1][0]);
            rr.y = ((d0[1] + d0[3]) + d1[1]) + (float)(c[0][1] + c[1][1]);
            *reinterpret_cast<float2 *>(&sred[w][grp][8 * i + 2 * tig]) = rr;
        }
        __syncthreads(); /* sred complete; every warp is past tile it - 1's V update */
        issue(it + NB - 1); /* into the buffer tile it - 1 was read from */
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
        asm volatile("cp.async.wait_group %0;\n" ::"n"(NB - 2) : "memory"); /* tile it + 1 */
        __syncthreads(); /* the weights of all eight heads and tile it + 1 are published */
        {
            const float al2 = salpha[grp];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                acc[j][0] *= al2;
                acc[j][1] *= al2;
                acc[j][2] *= al2;
                acc[j][3] *= al2;
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
                uint32_t b[4];
                gem_ldsm_x4_trans(b, vs + vrow * V4_ROW + vcol + 16 * jj);
                gem_mma_bf16(acc[2 * jj], a0, a1, a2, a3, b[0], b[1]);
                gem_mma_bf16(acc[2 * jj + 1], a0, a1, a2, a3, b[2], b[3]);
            }
        }
    }
    const int64_t row = p * n_q_heads + g * GROUP + grp;
    float *po = part_o + row * D + 64 * w + 2 * tig;
#pragma unroll
    for (int j = 0; j < 8; j++)
        *reinterpret_cast<float2 *>(po + 8 * j) =
            make_float2(acc[j][0] + acc[j][2], acc[j][1] + acc[j][3]);
    if (lane == 0) {
        part_m[p * n_q_heads + g * GROUP + w] = m;
        part_s[p * n_q_heads + g * GROUP + w] = s;
    }
}

/* ---- version 8: version 4 with the softmax of tile it beside the dots of tile it + 1 ---------

Version 4 runs, per tile, dots -> barrier -> softmax -> barrier -> V update: three chains of
latency in a row, at four warps a scheduler (run 95: 0.53 instructions a cycle a scheduler).
Here the dots of tile it + 1 are issued in the same stretch as the softmax of tile it (their
partial dots in a second sred buffer), so the two chains overlap:
    barrier; store tile it + 2, load it + 3; softmax(it) and dots(it + 1); barrier; V update(it)
V tiles in a ring of three buffers (49,920 bytes of dynamic shared memory); the arithmetic of
every tile is version 4's, in the same order, so the output is bitwise version 4's. */
#define V8_BUFS 3

extern "C" __global__ void __launch_bounds__(256, 2)
    kfv_dmma_pipe_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                             const __grid_constant__ gem_cu_rope rope,
                             const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                             float *__restrict__ part_m, float *__restrict__ part_s,
                             float *__restrict__ part_o, int64_t live, int64_t partitions,
                             int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    extern __shared__ __align__(128) unsigned char v8_tiles[]; /* V8_BUFS * V4_STAGE * 2 */
    __nv_bfloat16 *const ring = reinterpret_cast<__nv_bfloat16 *>(v8_tiles);
    __shared__ __align__(16) float sred[2][8][GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GROUP];
    __shared__ __align__(16) float4 scoef[8][2][2][32];
    __shared__ uint2 sqb[8][3][32];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    uint32_t qa[3][4];
    double ql[2], qh[2];
    {
        const float *qg = q + (g * GROUP + grp) * D;
#pragma unroll
        for (int st = 0; st < 3; st++) {
            const int base = v4_step_dim(3 * w + st) + 2 * tig;
            __nv_bfloat16 hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int d = base + (u & 1) + 8 * (u >> 1);
                split3_bf16(__ldg(qg + d) * __ldg(kw + d), &hi[u], &mid[u], &lo[u]);
            }
            qa[st][0] = gem_pack_bf16(hi[0], hi[1]);
            qa[st][1] = gem_pack_bf16(mid[0], mid[1]);
            qa[st][2] = gem_pack_bf16(hi[2], hi[3]);
            qa[st][3] = gem_pack_bf16(mid[2], mid[3]);
            sqb[w][st][lane] = make_uint2(gem_pack_bf16(lo[0], lo[1]), gem_pack_bf16(lo[2], lo[3]));
        }
#pragma unroll
        for (int e = 0; e < 2; e++) {
            ql[e] = (double)__ldg(qg + 8 * w + 2 * tig + e);
            qh[e] = (double)__ldg(qg + 256 + 8 * w + 2 * tig + e);
        }
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int j = 8 * w + 2 * tig + e;
                float c, s;
                gem_rope_cs(8 * i + grp, rope.inv_freq[j], &c, &s);
                const float wl = __ldg(kw + j), wh = __ldg(kw + 256 + j);
                scoef[w][i][e][lane] = make_float4(wl * c, wh * s, wl * s, wh * c);
            }
    }
    const int prow = tid >> 6, pcol = 8 * (tid & 63);
    const __nv_bfloat16 *vp = v + g * hs + (begin + prow) * ts + pcol;
    const uint4 zero4 = make_uint4(0u, 0u, 0u, 0u);
    uint4 r[4];
    auto load = [&](int64_t it) {
        const int64_t t = begin + it * T + prow;
#pragma unroll
        for (int u = 0; u < 4; u++)
            r[u] = t + 4 * u < end ? gem_ld16(vp + 4 * u * ts, pol) : zero4;
        vp += T * ts;
    };
    auto store = [&](int64_t it) {
        __nv_bfloat16 *vs = ring + (size_t)(it % V8_BUFS) * V4_STAGE;
#pragma unroll
        for (int u = 0; u < 4; u++)
            *reinterpret_cast<uint4 *>(vs + (prow + 4 * u) * V4_ROW + pcol) = r[u];
    };
    const int mrow = (lane & 7) + 8 * (lane >> 4), mhalf = (lane >> 3) & 1;
    const int vrow = (lane & 7) + 8 * ((lane >> 3) & 1), vcol = 64 * w + 8 * (lane >> 4);
    float cc = 1.f, ss = 0.f;
    /* the dots of tile it into sred[it & 1] (a tile past the last reads a stale buffer and its
     * dots are never used) */
    /* the exact angles of tiles it .. it + 3, a lane each, when it is a multiple of 4: called
     * ahead of dots(it), so that no branch splits the dots from the softmax beside them */
    auto angles = [&](int64_t it) {
        if ((it & 3) == 0)
            gem_rope_cs(rope.pos0 + begin + (it + (int64_t)(lane >> 3)) * T,
                        rope.inv_freq[8 * w + (lane & 7)], &cc, &ss);
    };
    auto dots = [&](int64_t it) {
        const __nv_bfloat16 *vs = ring + (size_t)(it % V8_BUFS) * V4_STAGE;
        double al[2], ah[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int src = 8 * (int)(it & 3) + 2 * tig + e;
            const double c = (double)__shfl_sync(0xffffffffu, cc, src);
            const double sn = (double)__shfl_sync(0xffffffffu, ss, src);
            al[e] = fma(ql[e], c, qh[e] * sn);
            ah[e] = fma(qh[e], c, -(ql[e] * sn));
        }
        uint32_t rb[4];
        gem_ldsm_x4(rb, vs + mrow * V4_ROW + 8 * w + 256 * mhalf);
        uint32_t nb[3][4];
#pragma unroll
        for (int st = 0; st < 3; st++)
            gem_ldsm_x4(nb[st], vs + mrow * V4_ROW + v4_step_dim(3 * w + st) + 8 * mhalf);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int st = 0; st < 3; st++) {
                const uint2 l = sqb[w][st][lane];
                gem_mma_bf16(d0, qa[st][0], qa[st][1], qa[st][2], qa[st][3], nb[st][2 * i],
                             nb[st][2 * i + 1]);
                gem_mma_bf16(d1, l.x, 0u, l.y, 0u, nb[st][2 * i], nb[st][2 * i + 1]);
            }
            double c[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float vl = e ? bf_hi(rb[2 * i]) : bf_lo(rb[2 * i]);
                const float vh = e ? bf_hi(rb[2 * i + 1]) : bf_lo(rb[2 * i + 1]);
                const float4 cf = scoef[w][i][e][lane];
                const float kl = fmaf(cf.x, vl, -(cf.y * vh)), kh = fmaf(cf.z, vl, cf.w * vh);
                dmma(c[e], al[e], (double)kl);
                dmma(c[e], ah[e], (double)kh);
            }
            float2 rr;
            rr.x = ((d0[0] + d0[2]) + d1[0]) + (float)(c[0][0] + c[1][0]);
            rr.y = ((d0[1] + d0[3]) + d1[1]) + (float)(c[0][1] + c[1][1]);
            *reinterpret_cast<float2 *>(&sred[it & 1][w][grp][8 * i + 2 * tig]) = rr;
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
    if (ntiles > 1) {
        load(1);
        store(1);
    }
    if (ntiles > 2)
        load(2);
    __syncthreads(); /* tiles 0 and 1 and the tables are staged */
    if (ntiles > 0) {
        angles(0);
        dots(0);
    }
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * T;
        const __nv_bfloat16 *vs = ring + (size_t)(it % V8_BUFS) * V4_STAGE;
        __syncthreads(); /* sred[it & 1] complete; every warp is past tile it - 1's V update */
        if (it + 2 < ntiles)
            store(it + 2); /* into the buffer tile it - 1 was read from */
        if (it + 3 < ntiles)
            load(it + 3);
        angles(it + 1);
        {
            const int t = lane & (T - 1);
            float a = 0.f;
#pragma unroll
            for (int ww = 0; ww < 8; ww++)
                a += sred[it & 1][ww][w][t];
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
        dots(it + 1); /* sred[(it + 1) & 1] was read by tile it - 1's softmax, before the barrier */
        __syncthreads(); /* the weights of tile it, the dots of tile it + 1, tile it + 2 staged */
        {
            const float al2 = salpha[grp];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                acc[j][0] *= al2;
                acc[j][1] *= al2;
                acc[j][2] *= al2;
                acc[j][3] *= al2;
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
                uint32_t b[4];
                gem_ldsm_x4_trans(b, vs + vrow * V4_ROW + vcol + 16 * jj);
                gem_mma_bf16(acc[2 * jj], a0, a1, a2, a3, b[0], b[1]);
                gem_mma_bf16(acc[2 * jj + 1], a0, a1, a2, a3, b[2], b[3]);
            }
        }
    }
    const int64_t row = p * n_q_heads + g * GROUP + grp;
    float *po = part_o + row * D + 64 * w + 2 * tig;
#pragma unroll
    for (int j = 0; j < 8; j++)
        *reinterpret_cast<float2 *>(po + 8 * j) =
            make_float2(acc[j][0] + acc[j][2], acc[j][1] + acc[j][3]);
    if (lane == 0) {
        part_m[p * n_q_heads + g * GROUP + w] = m;
        part_s[p * n_q_heads + g * GROUP + w] = s;
    }
}

/* ---- version 9: version 4 with fewer instructions a tile ------------------------------------

Run 98's SASS of the pass has about 450 instructions a warp and tile, some 170 of them integer
and address work. Here: shared-memory addresses computed once (a buffer offset a tile), 32-bit
compares for the rows that exist, row pointers stepped, and the O rescale skipped when every
head of the warp kept its max (alpha exactly 1: the same bits). */
extern "C" __global__ void __launch_bounds__(256, 2)
    kfv_dmma_lean_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                        const __grid_constant__ gem_cu_rope rope,
                        const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                        float *__restrict__ part_m, float *__restrict__ part_s,
                        float *__restrict__ part_o, int64_t live, int64_t partitions,
                        int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    extern __shared__ __align__(128) unsigned char v9_tiles[]; /* V4_SHARED */
    __nv_bfloat16 *const ring = reinterpret_cast<__nv_bfloat16 *>(v9_tiles);
    __shared__ __align__(16) float sred[8][GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GROUP];
    __shared__ __align__(16) float4 scoef[8][2][2][32]; /* warp, n-tile, pair, lane */
    __shared__ uint2 sqb[8][3][32];                     /* Q's lo fragments, by warp, k-step, lane */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    /* Q: the non-rotating k-steps 3w .. 3w + 2 times k_weight, in three BF16 pieces (hi, mid in
     * registers, lo in sqb); the rotating pairs 8w + 2 tig + e of head grp in double */
    uint32_t qa[3][4];
    double ql[2], qh[2];
    {
        const float *qg = q + (g * GROUP + grp) * D;
#pragma unroll
        for (int st = 0; st < 3; st++) {
            const int base = v4_step_dim(3 * w + st) + 2 * tig;
            __nv_bfloat16 hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int d = base + (u & 1) + 8 * (u >> 1);
                split3_bf16(__ldg(qg + d) * __ldg(kw + d), &hi[u], &mid[u], &lo[u]);
            }
            qa[st][0] = gem_pack_bf16(hi[0], hi[1]);
            qa[st][1] = gem_pack_bf16(mid[0], mid[1]);
            qa[st][2] = gem_pack_bf16(hi[2], hi[3]);
            qa[st][3] = gem_pack_bf16(mid[2], mid[3]);
            sqb[w][st][lane] = make_uint2(gem_pack_bf16(lo[0], lo[1]), gem_pack_bf16(lo[2], lo[3]));
        }
#pragma unroll
        for (int e = 0; e < 2; e++) {
            ql[e] = (double)__ldg(qg + 8 * w + 2 * tig + e);
            qh[e] = (double)__ldg(qg + 256 + 8 * w + 2 * tig + e);
        }
        /* this lane's rotation of offset 8i + grp: w cos, w sin of pairs 8w + 2 tig + e */
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int j = 8 * w + 2 * tig + e;
                float c, s;
                gem_rope_cs(8 * i + grp, rope.inv_freq[j], &c, &s);
                const float wl = __ldg(kw + j), wh = __ldg(kw + 256 + j);
                scoef[w][i][e][lane] = make_float4(wl * c, wh * s, wl * s, wh * c);
            }
    }
    const int prow = tid >> 6, pcol = 8 * (tid & 63);
    const __nv_bfloat16 *vp = v + g * hs + (begin + prow) * ts + pcol;
    const int64_t ts4 = 4 * ts, tsT = T * ts;
    const uint4 zero4 = make_uint4(0u, 0u, 0u, 0u);
    uint4 r[4]; /* V rows prow + 4u of the tile in flight */
    auto load = [&](int64_t it) {
        /* rows of this tile left for this thread, at most 16: 32-bit compares below */
        const int left = (int)min(end - (begin + it * T + prow), (int64_t)T);
        const __nv_bfloat16 *p0 = vp;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            r[u] = 4 * u < left ? gem_ld16(p0, pol) : zero4;
            p0 += ts4;
        }
        vp += tsT;
    };
    /* shared-memory addresses: this thread's 16 bytes of a staged tile, its ldmatrix rows */
    const uint32_t ring_s = gem_smem_addr(ring);
    const uint32_t st_s = ring_s + 2u * (uint32_t)(prow * V4_ROW + pcol);
    auto store = [&](int64_t it) {
        const uint32_t a = st_s + (uint32_t)(it & 1) * (uint32_t)(V4_STAGE * 2);
#pragma unroll
        for (int u = 0; u < 4; u++)
            asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(a + 2u * 4u * u * V4_ROW),
                         "r"(r[u].x), "r"(r[u].y), "r"(r[u].z), "r"(r[u].w)
                         : "memory");
    };
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;
    float cc = 1.f, ss = 0.f; /* cos, sin of tile (it & ~3) + (lane >> 3), pair 8w + (lane & 7) */
    if (ntiles > 0) {
        load(0);
        store(0);
    }
    if (ntiles > 1)
        load(1);
    __syncthreads(); /* tile 0 and the tables are staged */
    /* ldmatrix rows: lane l gives the row of matrix l >> 3, row l & 7; the rotating block: matrix
     * mi is tokens 8 (mi >> 1) + row of dims 8w (+ 256 for odd mi); a non-rotating k-step: dims
     * base (+ 8 for odd mi); the V update's as in the library */
    const int mrow = (lane & 7) + 8 * (lane >> 4), mhalf = (lane >> 3) & 1;
    const int vrow = (lane & 7) + 8 * ((lane >> 3) & 1), vcol = 64 * w + 8 * (lane >> 4);
    const uint32_t rot_s = ring_s + 2u * (uint32_t)(mrow * V4_ROW + 8 * w + 256 * mhalf);
    const uint32_t dot_s = ring_s + 2u * (uint32_t)(mrow * V4_ROW + 8 * mhalf);
    const uint32_t upd_s = ring_s + 2u * (uint32_t)(vrow * V4_ROW + vcol);
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * T;
        const uint32_t boff = (uint32_t)(it & 1) * (uint32_t)(V4_STAGE * 2);
        const int live_rows = (int)min(end - t0, (int64_t)T); /* rows of the tile that exist */
        if ((it & 3) == 0)
            gem_rope_cs(rope.pos0 + t0 + (int64_t)(lane >> 3) * T, rope.inv_freq[8 * w + (lane & 7)],
                        &cc, &ss);
        /* RoPE_{-P}(q) of this tile's first position P, pairs 8w + 2 tig + e */
        double al[2], ah[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int src = 8 * (int)(it & 3) + 2 * tig + e;
            const double c = (double)__shfl_sync(0xffffffffu, cc, src);
            const double sn = (double)__shfl_sync(0xffffffffu, ss, src);
            al[e] = fma(ql[e], c, qh[e] * sn);
            ah[e] = fma(qh[e], c, -(ql[e] * sn));
        }
        uint32_t rb[4]; /* the rotating block: n-tile i's low dims rb[2i], their partners rb[2i + 1] */
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(rb[0]), "=r"(rb[1]), "=r"(rb[2]), "=r"(rb[3])
                     : "r"(rot_s + boff)
                     : "memory");
        uint32_t nb[3][4];
#pragma unroll
        for (int st = 0; st < 3; st++)
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(nb[st][0]), "=r"(nb[st][1]), "=r"(nb[st][2]), "=r"(nb[st][3])
                         : "r"(dot_s + boff + 2u * (uint32_t)v4_step_dim(3 * w + st))
                         : "memory");
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int st = 0; st < 3; st++) {
                const uint2 l = sqb[w][st][lane];
                gem_mma_bf16(d0, qa[st][0], qa[st][1], qa[st][2], qa[st][3], nb[st][2 * i],
                             nb[st][2 * i + 1]);
                gem_mma_bf16(d1, l.x, 0u, l.y, 0u, nb[st][2 * i], nb[st][2 * i + 1]);
            }
            double c[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float vl = e ? bf_hi(rb[2 * i]) : bf_lo(rb[2 * i]);
                const float vh = e ? bf_hi(rb[2 * i + 1]) : bf_lo(rb[2 * i + 1]);
                const float4 cf = scoef[w][i][e][lane];
                const float kl = fmaf(cf.x, vl, -(cf.y * vh)), kh = fmaf(cf.z, vl, cf.w * vh);
                dmma(c[e], al[e], (double)kl);
                dmma(c[e], ah[e], (double)kh);
            }
            float2 rr; /* head grp, tokens 8i + 2 tig, + 1 */
            rr.x = ((d0[0] + d0[2]) + d1[0]) + (float)(c[0][0] + c[1][0]);
            rr.y = ((d0[1] + d0[3]) + d1[1]) + (float)(c[0][1] + c[1][1]);
            *reinterpret_cast<float2 *>(&sred[w][grp][8 * i + 2 * tig]) = rr;
        }
        __syncthreads(); /* sred complete; every warp is past tile it - 1's V update */
        if (it + 1 < ntiles)
            store(it + 1);
        if (it + 2 < ntiles)
            load(it + 2);
        {
            const int t = lane & (T - 1);
            float a = 0.f;
#pragma unroll
            for (int ww = 0; ww < 8; ww++)
                a += sred[ww][w][t];
            const float sc = t < live_rows ? a * scale : -INFINITY;
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
        __syncthreads(); /* the weights of all eight heads and tile it + 1 are published */
        {
            const float al2 = salpha[grp];
            /* times 1 changes nothing: skipped when no head of the warp's rows moved its max */
            if (__any_sync(0xffffffffu, al2 != 1.f)) {
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    acc[j][0] *= al2;
                    acc[j][1] *= al2;
                    acc[j][2] *= al2;
                    acc[j][3] *= al2;
                }
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
                uint32_t b[4];
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                             : "r"(upd_s + boff + 2u * 16u * jj)
                             : "memory");
                gem_mma_bf16(acc[2 * jj], a0, a1, a2, a3, b[0], b[1]);
                gem_mma_bf16(acc[2 * jj + 1], a0, a1, a2, a3, b[2], b[3]);
            }
        }
    }
    const int64_t row = p * n_q_heads + g * GROUP + grp;
    float *po = part_o + row * D + 64 * w + 2 * tig;
#pragma unroll
    for (int j = 0; j < 8; j++)
        *reinterpret_cast<float2 *>(po + 8 * j) =
            make_float2(acc[j][0] + acc[j][2], acc[j][1] + acc[j][3]);
    if (lane == 0) {
        part_m[p * n_q_heads + g * GROUP + w] = m;
        part_s[p * n_q_heads + g * GROUP + w] = s;
    }
}


/* ---- version 11: version 4 with 32-token tiles -----------------------------------------------

Run 101 put the staged pass's time in its tile loop, not its bytes: version 10 (half the DRAM
bytes) took 7% off. Per 16 tokens the loop pays two barriers, a softmax over 16 lanes (the other
16 repeat it), the O rescale (32 multiplies a thread) and the sred sums, whatever the tile's
work. Here a tile is 32 tokens: the dots and the rotating dims run as version 4's on each half
(h = 0, 1; RoPE_{-P}(q) at P = the half's first position, the same 16-offset table), the
softmax takes one token a lane over 32 lanes, and the V update takes the tile as two k-steps of
16 tokens after one rescale. A 32-row tile in registers (8 loads a thread) would not fit beside
version 4's 128 registers, so the tiles are copied by cp.async into two buffers (66,560 bytes):
tile it + 1 is asked for after tile it's first barrier and waited for at its end, three
barriers a tile. */
#define V11_T 32
#define V11_STAGE (V11_T * V4_ROW)
#define V11_SHARED (2 * V11_STAGE * 2) /* two buffers: 66,560 bytes, dynamic */

extern "C" __global__ void __launch_bounds__(256, 2)
    kfv_dmma32_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                          const __grid_constant__ gem_cu_rope rope,
                          const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                          float *__restrict__ part_m, float *__restrict__ part_s,
                          float *__restrict__ part_o, int64_t live, int64_t partitions,
                          int64_t n_q_heads, float scale)
{
    const int T = V11_T, H = GEM_MMA_TILE; /* a tile, a half */
    extern __shared__ __align__(128) unsigned char v11_tiles[]; /* V11_SHARED */
    __nv_bfloat16 *const ring = reinterpret_cast<__nv_bfloat16 *>(v11_tiles);
    __shared__ __align__(16) float sred[8][GROUP][V11_T];
    __shared__ __align__(16) float sp[GROUP][V11_T];
    __shared__ float salpha[GROUP];
    __shared__ __align__(16) float4 scoef[8][2][2][32]; /* warp, n-tile, pair, lane */
    __shared__ uint2 sqb[8][3][32];                     /* Q's lo fragments, by warp, k-step, lane */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    /* Q as in version 4 */
    uint32_t qa[3][4];
    double ql[2], qh[2];
    {
        const float *qg = q + (g * GROUP + grp) * D;
#pragma unroll
        for (int st = 0; st < 3; st++) {
            const int base = v4_step_dim(3 * w + st) + 2 * tig;
            __nv_bfloat16 hi[4], mid[4], lo[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int d = base + (u & 1) + 8 * (u >> 1);
                split3_bf16(__ldg(qg + d) * __ldg(kw + d), &hi[u], &mid[u], &lo[u]);
            }
            qa[st][0] = gem_pack_bf16(hi[0], hi[1]);
            qa[st][1] = gem_pack_bf16(mid[0], mid[1]);
            qa[st][2] = gem_pack_bf16(hi[2], hi[3]);
            qa[st][3] = gem_pack_bf16(mid[2], mid[3]);
            sqb[w][st][lane] = make_uint2(gem_pack_bf16(lo[0], lo[1]), gem_pack_bf16(lo[2], lo[3]));
        }
#pragma unroll
        for (int e = 0; e < 2; e++) {
            ql[e] = (double)__ldg(qg + 8 * w + 2 * tig + e);
            qh[e] = (double)__ldg(qg + 256 + 8 * w + 2 * tig + e);
        }
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int j = 8 * w + 2 * tig + e;
                float c, s;
                gem_rope_cs(8 * i + grp, rope.inv_freq[j], &c, &s);
                const float wl = __ldg(kw + j), wh = __ldg(kw + 256 + j);
                scoef[w][i][e][lane] = make_float4(wl * c, wh * s, wl * s, wh * c);
            }
    }
    const int prow = tid >> 6, pcol = 8 * (tid & 63);
    const __nv_bfloat16 *vsrc = v + g * hs + begin * ts + pcol;
    /* tile it's rows prow + 4u into buffer it & 1 (rows past the end as zeros), one commit
     * group a call */
    auto issue = [&](int64_t it) {
        if (it < ntiles) {
            __nv_bfloat16 *dst = ring + (size_t)(it & 1) * V11_STAGE;
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const int row = prow + 4 * u;
                const bool in = begin + it * T + row < end;
                const __nv_bfloat16 *src = vsrc + (in ? (it * T + row) * ts : 0);
                asm volatile(
                    "cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(
                        gem_smem_addr(dst + row * V4_ROW + pcol)),
                    "l"(src), "r"(in ? 16 : 0), "l"(pol)
                    : "memory");
            }
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float m = -INFINITY, s = 0.f;
    float cc = 1.f, ss = 0.f; /* cos, sin of half 2 (it & ~1) + (lane >> 3), pair 8w + (lane & 7) */
    issue(0);
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads(); /* tile 0 and the tables are staged */
    const int mrow = (lane & 7) + 8 * (lane >> 4), mhalf = (lane >> 3) & 1;
    const int vrow = (lane & 7) + 8 * ((lane >> 3) & 1), vcol = 64 * w + 8 * (lane >> 4);
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * T;
        const __nv_bfloat16 *vs = ring + (size_t)(it & 1) * V11_STAGE;
        if ((it & 1) == 0)
            gem_rope_cs(rope.pos0 + t0 + (int64_t)(lane >> 3) * H, rope.inv_freq[8 * w + (lane & 7)],
                        &cc, &ss);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const __nv_bfloat16 *hv = vs + H * h * V4_ROW;
            /* RoPE_{-P}(q) of this half's first position P, pairs 8w + 2 tig + e */
            double al[2], ah[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int src = 8 * (2 * (int)(it & 1) + h) + 2 * tig + e;
                const double c = (double)__shfl_sync(0xffffffffu, cc, src);
                const double sn = (double)__shfl_sync(0xffffffffu, ss, src);
                al[e] = fma(ql[e], c, qh[e] * sn);
                ah[e] = fma(qh[e], c, -(ql[e] * sn));
            }
            uint32_t rb[4];
            gem_ldsm_x4(rb, hv + mrow * V4_ROW + 8 * w + 256 * mhalf);
            uint32_t nb[3][4];
#pragma unroll
            for (int st = 0; st < 3; st++)
                gem_ldsm_x4(nb[st], hv + mrow * V4_ROW + v4_step_dim(3 * w + st) + 8 * mhalf);
#pragma unroll
            for (int i = 0; i < 2; i++) {
                float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
                for (int st = 0; st < 3; st++) {
                    const uint2 l = sqb[w][st][lane];
                    gem_mma_bf16(d0, qa[st][0], qa[st][1], qa[st][2], qa[st][3], nb[st][2 * i],
                                 nb[st][2 * i + 1]);
                    gem_mma_bf16(d1, l.x, 0u, l.y, 0u, nb[st][2 * i], nb[st][2 * i + 1]);
                }
                double c[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const float vl = e ? bf_hi(rb[2 * i]) : bf_lo(rb[2 * i]);
                    const float vh = e ? bf_hi(rb[2 * i + 1]) : bf_lo(rb[2 * i + 1]);
                    const float4 cf = scoef[w][i][e][lane];
                    const float kl = fmaf(cf.x, vl, -(cf.y * vh)), kh = fmaf(cf.z, vl, cf.w * vh);
                    dmma(c[e], al[e], (double)kl);
                    dmma(c[e], ah[e], (double)kh);
                }
                float2 rr; /* head grp, tokens 16h + 8i + 2 tig, + 1 */
                rr.x = ((d0[0] + d0[2]) + d1[0]) + (float)(c[0][0] + c[1][0]);
                rr.y = ((d0[1] + d0[3]) + d1[1]) + (float)(c[0][1] + c[1][1]);
                *reinterpret_cast<float2 *>(&sred[w][grp][H * h + 8 * i + 2 * tig]) = rr;
            }
        }
        __syncthreads(); /* sred complete; every warp is past tile it - 1's V update */
        issue(it + 1);   /* into the buffer tile it - 1 was read from */
        {
            float a = 0.f; /* token lane */
#pragma unroll
            for (int ww = 0; ww < 8; ww++)
                a += sred[ww][w][lane];
            const float sc = t0 + lane < end ? a * scale : -INFINITY;
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
            sp[w][lane] = e;
            if (lane == 0)
                salpha[w] = alpha;
        }
        __syncthreads(); /* the weights of all eight heads are published */
        {
            const float al2 = salpha[grp];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                acc[j][0] *= al2;
                acc[j][1] *= al2;
                acc[j][2] *= al2;
                acc[j][3] *= al2;
            }
#pragma unroll
            for (int kk = 0; kk < 2; kk++) {
                const float2 p01 = *reinterpret_cast<const float2 *>(&sp[grp][H * kk + 2 * tig]);
                const float2 p89 = *reinterpret_cast<const float2 *>(&sp[grp][H * kk + 2 * tig + 8]);
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
                    uint32_t b[4];
                    gem_ldsm_x4_trans(b, vs + (H * kk + vrow) * V4_ROW + vcol + 16 * jj);
                    gem_mma_bf16(acc[2 * jj], a0, a1, a2, a3, b[0], b[1]);
                    gem_mma_bf16(acc[2 * jj + 1], a0, a1, a2, a3, b[2], b[3]);
                }
            }
        }
        asm volatile("cp.async.wait_group 0;\n" ::: "memory"); /* tile it + 1 */
        __syncthreads(); /* tile it + 1 is staged */
    }
    const int64_t row = p * n_q_heads + g * GROUP + grp;
    float *po = part_o + row * D + 64 * w + 2 * tig;
#pragma unroll
    for (int j = 0; j < 8; j++)
        *reinterpret_cast<float2 *>(po + 8 * j) =
            make_float2(acc[j][0] + acc[j][2], acc[j][1] + acc[j][3]);
    if (lane == 0) {
        part_m[p * n_q_heads + g * GROUP + w] = m;
        part_s[p * n_q_heads + g * GROUP + w] = s;
    }
}

/* ---- version 15: V as its own K on warpgroup MMAs (wgmma) ------------------------------------

Runs 101-104 put the staged pass's time in its arithmetic: 8 warps a block each take 64 of the
512 dims, so every 16 tokens the warps sum their partial dots through shared memory, pass two
barriers, and issue about 450 instructions each. Here one warpgroup (128 threads, a block) takes
a 64-token tile whole:
  - the scores S (64 tokens x 24: 8 heads x Q's three BF16 pieces) = V tile (64 x 512, from
    shared memory) x Q^T (512 x 24, from shared memory): 32 wgmma m64n24k16, the dims summed
    inside the MMA; a thread holds 2 tokens x 2 heads x 3 pieces;
  - the softmax: per head, the warp's max and sum by shuffles, the four warps' by shared memory
    (two barriers a tile);
  - the V update O^T (512 dims x 8 heads) += V^T (512 x 64, the same staged tile read
    transposed) x P^T (64 x 8, the weights' hi and lo BF16 pieces in shared memory): 8 x 4 x 2
    wgmma m64n8k16 into 32 accumulators a thread.
The tile is staged by cp.async in the MMAs' canonical layout without swizzle: core matrices of
8 tokens x 8 dims (128 contiguous bytes), dims-adjacent ones 128 bytes apart, token-adjacent
ones 8,192 bytes apart; read as A (tokens x dims) it is K-major, read as A^T (dims x tokens) it
is MN-major. Two stages (128 KiB) and Q^T (24 KiB): one block an SM, 33 partitions x 4 heads.
This is the view K = V (version 10's, no k_weight, no rotation): whether the design reads at
the bytes' speed before the rotating dims are added. For the transposed (MN-major) operand the
descriptor's stride offset is the distance between core matrices along MN (dims, 128 bytes) and
its leading offset the distance along K (tokens, 8,192 bytes): run 105 tried them the other way
round, and the MMAs read past the shared memory. Needs sm_90a. */
#define V15_T 64                                 /* tokens a tile */
#define V15_STAGE_BYTES (V15_T * D * 2)          /* 65,536 */
#define V15_QT_BYTES (24 * D * 2)                /* Q^T: 24 rows of 512, 24,576 */
#define V15_P_BYTES (2 * GROUP * V15_T * 2)      /* P^T hi and lo: 2,048 */
#define V15_SHARED (2 * V15_STAGE_BYTES + V15_QT_BYTES + V15_P_BYTES)
#define V15_PARTITIONS 33

/* a no-swizzle wgmma shared-memory descriptor: start, leading and stride byte offsets */
__device__ __forceinline__ uint64_t v15_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
           ((uint64_t)(sbo >> 4) << 32);
}
/* the byte offset of element (row r, col c) of a K-major operand stored as core matrices of 8
 * rows x 8 elements: col-adjacent ones 128 bytes apart, row-adjacent ones `rs` apart */
__device__ __forceinline__ uint32_t v15_at(int r, int c, uint32_t rs)
{
    return (uint32_t)(r >> 3) * rs + (uint32_t)(c >> 3) * 128u + (uint32_t)(r & 7) * 16u +
           (uint32_t)(c & 7) * 2u;
}
__device__ __forceinline__ void v15_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void v15_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void v15_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void v15_keep(float &x) { asm volatile("" : "+f"(x)::"memory"); }

/* S (m64 n24) = or += A (desc, K-major) B (desc, K-major) */
__device__ __forceinline__ void v15_mma_s(float (&d)[12], uint64_t a, uint64_t b, int acc)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %14, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n24k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11}, %12, %13, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
                 : "l"(a), "l"(b), "r"(acc));
}
/* O (m64 n8) += A^T (desc, MN-major: transposed) B (desc, K-major) */
__device__ __forceinline__ void v15_mma_o(float (&d)[4], uint64_t a, uint64_t b)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3}, %4, %5, p, 1, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "l"(a), "l"(b));
}

__global__ void __launch_bounds__(128, 1)
    alias_wgmma_first_pass(const float *__restrict__ q, const __nv_bfloat16 *__restrict__ v,
                           int64_t hs, int64_t ts, float *__restrict__ part_m,
                           float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,
                           int64_t partitions, int64_t n_q_heads, float scale)
{
    extern __shared__ __align__(128) unsigned char v15_smem[]; /* V15_SHARED */
    const uint32_t s_base = gem_smem_addr(v15_smem);
    const uint32_t s_qt = s_base + 2 * V15_STAGE_BYTES, s_p = s_qt + V15_QT_BYTES;
    __nv_bfloat16 *const qt = reinterpret_cast<__nv_bfloat16 *>(v15_smem + 2 * V15_STAGE_BYTES);
    __nv_bfloat16 *const pt = reinterpret_cast<__nv_bfloat16 *>(v15_smem + 2 * V15_STAGE_BYTES +
                                                               V15_QT_BYTES);
    __shared__ float smax[4][GROUP], ssum[4][GROUP];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + V15_T - 1) / V15_T;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    /* Q^T: row n = 8 piece + head, K-major over the 512 dims (row-adjacent core matrices
     * 8,192 bytes apart) */
    for (int i = tid; i < GROUP * D; i += 128) {
        const int h = i / D, d = i % D;
        __nv_bfloat16 hi, mid, lo;
        split3_bf16(__ldg(q + (g * GROUP + h) * D + d), &hi, &mid, &lo);
        qt[v15_at(h, d, 8192u) / 2] = hi;
        qt[v15_at(8 + h, d, 8192u) / 2] = mid;
        qt[v15_at(16 + h, d, 8192u) / 2] = lo;
    }
    /* cp.async of tile it into stage it & 1: thread tid takes 16-byte column c = tid & 63 of
     * rows (tid >> 6) + 2k, k = 0 .. 31 (rows past the end as zeros) */
    const int ccol = tid & 63, crow0 = tid >> 6;
    const __nv_bfloat16 *vsrc = v + g * hs + begin * ts + 8 * ccol;
    auto issue = [&](int64_t it) {
        if (it < ntiles) {
            const uint32_t dst = s_base + (uint32_t)(it & 1) * V15_STAGE_BYTES;
#pragma unroll 8
            for (int k = 0; k < 32; k++) {
                const int row = crow0 + 2 * k;
                const bool in = begin + it * V15_T + row < end;
                const __nv_bfloat16 *src = vsrc + (in ? (it * V15_T + row) * ts : 0);
                asm volatile(
                    "cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(
                        dst + v15_at(row, 8 * ccol, 8192u)),
                    "l"(src), "r"(in ? 16 : 0), "l"(pol)
                    : "memory");
            }
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    float o[8][4]; /* m-block mb: dims 64 mb + 16 w + grp (+ 8), heads 2 tig, 2 tig + 1 */
#pragma unroll
    for (int mb = 0; mb < 8; mb++)
        o[mb][0] = o[mb][1] = o[mb][2] = o[mb][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, s[2] = {0.f, 0.f}; /* heads 2 tig + e */
    issue(0);
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * V15_T;
        const uint32_t s_v = s_base + (uint32_t)(it & 1) * V15_STAGE_BYTES;
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads(); /* tile it (and Q^T) staged; every thread is past tile it - 1 */
        issue(it + 1);
        float sc[12];
#pragma unroll
        for (int i = 0; i < 12; i++)
            sc[i] = 0.f;
        v15_fence();
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++)
            v15_mma_s(sc, v15_desc(s_v + 256u * ks, 128u, 8192u),
                      v15_desc(s_qt + 256u * ks, 128u, 8192u), ks > 0);
        v15_commit();
        v15_wait0();
#pragma unroll
        for (int i = 0; i < 12; i++)
            v15_keep(sc[i]);
        /* tokens r = 16 w + grp + 8 u, heads 2 tig + e: (hi + mid) + lo */
        float x[2][2], mx[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const float a = (sc[2 * u + e] + sc[4 + 2 * u + e]) + sc[8 + 2 * u + e];
                x[u][e] = t0 + 16 * w + grp + 8 * u < end ? a * scale : -INFINITY;
            }
            mx[e] = fmaxf(x[0][e], x[1][e]);
#pragma unroll
            for (int off = 4; off < 32; off <<= 1)
                mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], off));
        }
        if (grp == 0) {
            smax[w][2 * tig] = mx[0];
            smax[w][2 * tig + 1] = mx[1];
        }
        __syncthreads(); /* the warps' maxima */
        float alpha[2], ps[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int h = 2 * tig + e;
            const float tm = fmaxf(fmaxf(smax[0][h], smax[1][h]), fmaxf(smax[2][h], smax[3][h]));
            const float mn = fmaxf(m[e], tm);
            alpha[e] = expf(m[e] - mn);
            m[e] = mn;
            ps[e] = 0.f;
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const float pe = expf(x[u][e] - mn);
                ps[e] += pe;
                const __nv_bfloat16 hi = __float2bfloat16_rn(pe);
                const __nv_bfloat16 lo = __float2bfloat16_rn(pe - __bfloat162float(hi));
                const int t = 16 * w + grp + 8 * u;
                pt[v15_at(h, t, 0u) / 2] = hi;                       /* P^T hi: row h, col t */
                pt[(GROUP * V15_T * 2 + v15_at(h, t, 0u)) / 2] = lo; /* then lo */
            }
#pragma unroll
            for (int off = 4; off < 32; off <<= 1)
                ps[e] += __shfl_xor_sync(0xffffffffu, ps[e], off);
        }
        if (grp == 0) {
            ssum[w][2 * tig] = ps[0];
            ssum[w][2 * tig + 1] = ps[1];
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads(); /* the warps' sums and P^T */
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int h = 2 * tig + e;
            s[e] = s[e] * alpha[e] + (((ssum[0][h] + ssum[1][h]) + ssum[2][h]) + ssum[3][h]);
        }
#pragma unroll
        for (int mb = 0; mb < 8; mb++) {
            o[mb][0] *= alpha[0];
            o[mb][1] *= alpha[1];
            o[mb][2] *= alpha[0];
            o[mb][3] *= alpha[1];
        }
#pragma unroll
        for (int mb = 0; mb < 8; mb++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                v15_keep(o[mb][i]);
        v15_fence();
#pragma unroll
        for (int ks = 0; ks < V15_T / 16; ks++)
#pragma unroll
            for (int pc = 0; pc < 2; pc++) {
                const uint64_t b =
                    v15_desc(s_p + pc * (GROUP * V15_T * 2) + 256u * ks, 128u, 1024u);
#pragma unroll
                for (int mb = 0; mb < 8; mb++)
                    v15_mma_o(o[mb], v15_desc(s_v + 16384u * ks + 1024u * mb, 8192u, 128u), b);
            }
        v15_commit();
        v15_wait0();
#pragma unroll
        for (int mb = 0; mb < 8; mb++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                v15_keep(o[mb][i]);
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    /* the partial: O of head 2 tig + e, dim 64 mb + 16 w + grp + 8 u is o[mb][2u + e] */
#pragma unroll
    for (int mb = 0; mb < 8; mb++)
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int64_t row = p * n_q_heads + g * GROUP + 2 * tig + e;
                part_o[row * D + 64 * mb + 16 * w + grp + 8 * u] = o[mb][2 * u + e];
            }
    if (w == 0 && grp == 0)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            part_m[p * n_q_heads + g * GROUP + 2 * tig + e] = m[e];
            part_s[p * n_q_heads + g * GROUP + 2 * tig + e] = s[e];
        }
}

/* Versions 16-18's tile after its scores: x[u][e] is the scaled score of token 16w + grp + 8u
 * of the tile, head 2 tig + e (-inf past the end). The heads' maxima and sums over the four
 * warps (two barriers), the running (m, s) of heads 2 tig + e, P^T's hi and lo pieces at pt
 * (descriptor d_p), the O rescale and the V update from the staged tile read transposed (d_vt):
 * version 15's steps, in its order. */
__device__ __forceinline__ void v16_tile_update(const float (&x)[2][2], float (&m)[2],
                                                float (&s)[2], float (&o)[8][4],
                                                float (*smax)[GROUP], float (*ssum)[GROUP],
                                                __nv_bfloat16 *pt, uint64_t d_p, uint64_t d_vt,
                                                int w, int grp, int tig)
{
    float mx[2];
#pragma unroll
    for (int e = 0; e < 2; e++) {
        mx[e] = fmaxf(x[0][e], x[1][e]);
#pragma unroll
        for (int off = 4; off < 32; off <<= 1)
            mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], off));
    }
    if (grp == 0) {
        smax[w][2 * tig] = mx[0];
        smax[w][2 * tig + 1] = mx[1];
    }
    __syncthreads(); /* the warps' maxima */
    float alpha[2], ps[2];
#pragma unroll
    for (int e = 0; e < 2; e++) {
        const int h = 2 * tig + e;
        const float tm = fmaxf(fmaxf(smax[0][h], smax[1][h]), fmaxf(smax[2][h], smax[3][h]));
        const float mn = fmaxf(m[e], tm);
        alpha[e] = expf(m[e] - mn);
        m[e] = mn;
        ps[e] = 0.f;
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const float pe = expf(x[u][e] - mn);
            ps[e] += pe;
            const __nv_bfloat16 hi = __float2bfloat16_rn(pe);
            const __nv_bfloat16 lo = __float2bfloat16_rn(pe - __bfloat162float(hi));
            const int t = 16 * w + grp + 8 * u;
            pt[v15_at(h, t, 0u) / 2] = hi;                       /* P^T hi: row h, col t */
            pt[(GROUP * V15_T * 2 + v15_at(h, t, 0u)) / 2] = lo; /* then lo */
        }
#pragma unroll
        for (int off = 4; off < 32; off <<= 1)
            ps[e] += __shfl_xor_sync(0xffffffffu, ps[e], off);
    }
    if (grp == 0) {
        ssum[w][2 * tig] = ps[0];
        ssum[w][2 * tig + 1] = ps[1];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads(); /* the warps' sums and P^T */
#pragma unroll
    for (int e = 0; e < 2; e++) {
        const int h = 2 * tig + e;
        s[e] = s[e] * alpha[e] + (((ssum[0][h] + ssum[1][h]) + ssum[2][h]) + ssum[3][h]);
    }
#pragma unroll
    for (int mb = 0; mb < 8; mb++) {
        o[mb][0] *= alpha[0];
        o[mb][1] *= alpha[1];
        o[mb][2] *= alpha[0];
        o[mb][3] *= alpha[1];
    }
#pragma unroll
    for (int mb = 0; mb < 8; mb++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            v15_keep(o[mb][i]);
    v15_fence();
#pragma unroll
    for (int ks = 0; ks < V15_T / 16; ks++)
#pragma unroll
        for (int pc = 0; pc < 2; pc++) {
            const uint64_t b = d_p + (uint64_t)(64 * pc + 16 * ks);
#pragma unroll
            for (int mb = 0; mb < 8; mb++)
                v15_mma_o(o[mb], d_vt + (uint64_t)(1024 * ks + 64 * mb), b);
        }
    v15_commit();
    v15_wait0();
#pragma unroll
    for (int mb = 0; mb < 8; mb++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            v15_keep(o[mb][i]);
}

/* Versions 16-18's partial (M, S, O): O of head 2 tig + e, dim 64 mb + 16 w + grp + 8 u is
 * o[mb][2u + e]; the lanes of warp 0 with grp 0 write heads 2 tig + e's M and S. */
__device__ __forceinline__ void v16_write_partial(const float (&o)[8][4], const float (&m)[2],
                                                  const float (&s)[2], float *__restrict__ part_m,
                                                  float *__restrict__ part_s,
                                                  float *__restrict__ part_o, int64_t p, int64_t g,
                                                  int64_t n_q_heads, int w, int grp, int tig)
{
#pragma unroll
    for (int mb = 0; mb < 8; mb++)
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int64_t row = p * n_q_heads + g * GROUP + 2 * tig + e;
                part_o[row * D + 64 * mb + 16 * w + grp + 8 * u] = o[mb][2 * u + e];
            }
    if (w == 0 && grp == 0)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            part_m[p * n_q_heads + g * GROUP + 2 * tig + e] = m[e];
            part_s[p * n_q_heads + g * GROUP + 2 * tig + e] = s[e];
        }
}

/* ---- versions 16 and 17: version 15 with its descriptors and copies made once -----------------

Version 15 (run 105) is exact but 0.2659 ms at 128K: 1,670 instructions a thread and tile
(ncu: 55.6 M), most of them building a 64-bit descriptor for each of 96 MMAs and the address
of each of 32 copies, and it waits on its loads (long scoreboard 1.63 a instruction: one tile
in flight, asked for at the start of the tile before it). Here the descriptors are built once a
tile and stepped by constants, and a whole tile's 32 copies are one unrolled run of constant
offsets. Version 17: two stages, as version 15; version 16: three (208 KiB of tiles, two tiles
in flight). */
#define V16_SHARED(NS) ((NS) * V15_STAGE_BYTES + V15_QT_BYTES + V15_P_BYTES)

template <int NS>
__global__ void __launch_bounds__(128, 1)
    alias_wgmma_lean_first_pass(const float *__restrict__ q, const __nv_bfloat16 *__restrict__ v,
                           int64_t hs, int64_t ts, float *__restrict__ part_m,
                           float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,
                           int64_t partitions, int64_t n_q_heads, float scale)
{
    extern __shared__ __align__(128) unsigned char v16_smem[]; /* V16_SHARED(NS) */
    const uint32_t s_base = gem_smem_addr(v16_smem);
    const uint32_t s_qt = s_base + NS * V15_STAGE_BYTES, s_p = s_qt + V15_QT_BYTES;
    __nv_bfloat16 *const qt = reinterpret_cast<__nv_bfloat16 *>(v16_smem + NS * V15_STAGE_BYTES);
    __nv_bfloat16 *const pt = reinterpret_cast<__nv_bfloat16 *>(v16_smem + NS * V15_STAGE_BYTES +
                                                               V15_QT_BYTES);
    __shared__ float smax[4][GROUP], ssum[4][GROUP];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + V15_T - 1) / V15_T;

    /* Q^T: row n = 8 piece + head, K-major over the 512 dims (row-adjacent core matrices
     * 8,192 bytes apart) */
    for (int i = tid; i < GROUP * D; i += 128) {
        const int h = i / D, d = i % D;
        __nv_bfloat16 hi, mid, lo;
        split3_bf16(__ldg(q + (g * GROUP + h) * D + d), &hi, &mid, &lo);
        qt[v15_at(h, d, 8192u) / 2] = hi;
        qt[v15_at(8 + h, d, 8192u) / 2] = mid;
        qt[v15_at(16 + h, d, 8192u) / 2] = lo;
    }
    /* cp.async of tile it into stage it % NS: thread tid takes 16-byte column c = tid & 63 of
     * rows (tid >> 6) + 2k, k = 0 .. 31 (rows past the end as zeros), at offsets stepped by
     * constants. Without the L2 evict-first hint: run 106's first two calls stopped on an
     * illegal instruction at an LDGSTS whose hint descriptor ptxas 13.0 had put in an odd
     * uniform register (desc[UR1] in the SASS; every kernel that runs keeps its hints in even
     * ones). Taken for the cause until a run of this form says otherwise. */
    const int ccol = tid & 63, crow0 = tid >> 6;
    const __nv_bfloat16 *vsrc = v + g * hs + (begin + crow0) * ts + 8 * ccol;
    const __nv_bfloat16 *vfirst = v + g * hs + begin * ts; /* a row that exists, for the zeros */
    const uint32_t cdst = v15_at(crow0, 8 * ccol, 8192u); /* row crow0 + 2k: + (k / 4) 8192 + (k % 4) 32 */
    auto issue = [&](int64_t it) {
        if (it < ntiles) {
            const uint32_t dst = s_base + (uint32_t)(it % NS) * V15_STAGE_BYTES + cdst;
            const __nv_bfloat16 *src = vsrc + it * V15_T * ts;
#pragma unroll 8
            for (int k = 0; k < 32; k++) {
                const bool in = begin + it * V15_T + crow0 + 2 * k < end;
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                                 dst + (uint32_t)(k >> 2) * 8192u + (uint32_t)(k & 3) * 32u),
                             "l"(in ? src + 2 * k * ts : vfirst), "r"(in ? 16 : 0)
                             : "memory");
            }
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    float o[8][4]; /* m-block mb: dims 64 mb + 16 w + grp (+ 8), heads 2 tig, 2 tig + 1 */
#pragma unroll
    for (int mb = 0; mb < 8; mb++)
        o[mb][0] = o[mb][1] = o[mb][2] = o[mb][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, s[2] = {0.f, 0.f}; /* heads 2 tig + e */
    /* the descriptors: Q^T and the tile's A at k-step 0, the tile's A^T at (k-step 0, m-block
     * 0), P^T hi at k-step 0; a step adds its byte offset / 16 to the start address field */
    const uint64_t d_qt = v15_desc(s_qt, 128u, 8192u), d_p = v15_desc(s_p, 128u, 1024u);
#pragma unroll
    for (int i = 0; i < NS - 1; i++)
        issue(i);
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * V15_T;
        const uint32_t s_v = s_base + (uint32_t)(it % NS) * V15_STAGE_BYTES;
        const uint64_t d_v = v15_desc(s_v, 128u, 8192u), d_vt = v15_desc(s_v, 8192u, 128u);
        asm volatile("cp.async.wait_group %0;\n" ::"n"(NS - 2) : "memory"); /* tile it */
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads(); /* tile it (and Q^T) staged; every thread is past tile it - 1 */
        issue(it + NS - 1);
        float sc[12];
#pragma unroll
        for (int i = 0; i < 12; i++)
            sc[i] = 0.f;
        v15_fence();
#pragma unroll
        for (int ks = 0; ks < D / 16; ks++)
            v15_mma_s(sc, d_v + 16u * ks, d_qt + 16u * ks, ks > 0);
        v15_commit();
        v15_wait0();
#pragma unroll
        for (int i = 0; i < 12; i++)
            v15_keep(sc[i]);
        /* tokens r = 16 w + grp + 8 u, heads 2 tig + e: (hi + mid) + lo */
        float x[2][2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const float a = (sc[2 * u + e] + sc[4 + 2 * u + e]) + sc[8 + 2 * u + e];
                x[u][e] = t0 + 16 * w + grp + 8 * u < end ? a * scale : -INFINITY;
            }
        }
        v16_tile_update(x, m, s, o, smax, ssum, pt, d_p, d_vt, w, grp, tig);
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    v16_write_partial(o, m, s, part_m, part_s, part_o, p, g, n_q_heads, w, grp, tig);
}

/* ---- version 18: K from V on warpgroup MMAs ----------------------------------------------------

Version 17 (two stages) with the K-from-V view of version 4 (K(t) = RoPE_{pos0 + t}(k_weight *
V(t)), pairs (j, j + 256), j < 64 rotating):
  - the 384 dims that do not rotate: k_weight folded into Q^T's three pieces, 24 of the 32
    k-steps of the scores' wgmma (the 8 of the rotating dims are skipped);
  - the 128 rotating dims on the F64 tensor cores while those wgmma run: warp w takes pairs
    16w .. 16w + 15 of all 64 tokens, eight groups of 8 tokens; for group tg, P = pos0 + t0 +
    8 tg and q . RoPE_{P + u}(w V) = RoPE_{-P}(q) . RoPE_u(w V) (u = 0 .. 7: a lane's u is its
    row grp, so its four pairs' w cos and w sin of u sit in registers for the whole pass);
    RoPE_{-P}(q) in double from exact angles at the tile's first group, then one 8-token
    angle-addition step a group; mma.m8n8k4.f64 with A = RoPE_u(w V) (8 tokens x 4 pairs, F32
    products made double) and B = RoPE_{-P}(q) (4 pairs x 8 heads), D = the group's partial
    scores (token grp, heads 2 tig, 2 tig + 1), the layout of the wgmma scores' rows;
  - the four warps' partial rotating scores meet in shared memory (8 KiB, one more barrier a
    tile) and the token's owner adds them, in warp order, to its wgmma score.
A lane's pairs in k-step kk: 16w + 8 (kk / 2) + 2 tig + kk % 2, so that one 32-bit load gives it
the low dims of two k-steps (and one more their partners). Run 106: 0.3864 ms at 128K.
Needs sm_90a. */
#define V18_ROT_BYTES (4 * V15_T * GROUP * 4) /* the warps' rotating partial scores */
#define V18_SHARED (2 * V15_STAGE_BYTES + V15_QT_BYTES + V15_P_BYTES + V18_ROT_BYTES)

__global__ void __launch_bounds__(128, 1)
    kfv_wgmma_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                         const __grid_constant__ gem_cu_rope rope,
                         const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                         float *__restrict__ part_m, float *__restrict__ part_s,
                         float *__restrict__ part_o, int64_t live, int64_t partitions,
                         int64_t n_q_heads, float scale)
{
    const int NS = 2;
    extern __shared__ __align__(128) unsigned char v18_smem[]; /* V18_SHARED */
    const uint32_t s_base = gem_smem_addr(v18_smem);
    const uint32_t s_qt = s_base + NS * V15_STAGE_BYTES, s_p = s_qt + V15_QT_BYTES;
    __nv_bfloat16 *const qt = reinterpret_cast<__nv_bfloat16 *>(v18_smem + NS * V15_STAGE_BYTES);
    __nv_bfloat16 *const pt = reinterpret_cast<__nv_bfloat16 *>(v18_smem + NS * V15_STAGE_BYTES +
                                                               V15_QT_BYTES);
    /* srot[w][t][h]: warp w's partial rotating score of token t, head h */
    float(*const srot)[V15_T][GROUP] = reinterpret_cast<float(*)[V15_T][GROUP]>(
        v18_smem + NS * V15_STAGE_BYTES + V15_QT_BYTES + V15_P_BYTES);
    __shared__ float smax[4][GROUP], ssum[4][GROUP];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + V15_T - 1) / V15_T;

    /* Q^T: row n = 8 piece + head, the non-rotating dims times k_weight */
    for (int i = tid; i < GROUP * 384; i += 128) {
        const int h = i / 384, e = i % 384, d = e < 192 ? 64 + e : 320 + (e - 192);
        __nv_bfloat16 hi, mid, lo;
        split3_bf16(__ldg(q + (g * GROUP + h) * D + d) * __ldg(kw + d), &hi, &mid, &lo);
        qt[v15_at(h, d, 8192u) / 2] = hi;
        qt[v15_at(8 + h, d, 8192u) / 2] = mid;
        qt[v15_at(16 + h, d, 8192u) / 2] = lo;
    }
    /* the rotating pairs of this lane: j(kk) = 16w + 8 (kk / 2) + 2 tig + kk % 2; q of head grp
     * in double; w cos, w sin of offset grp; cos, sin of an 8-token step */
    double ql[4], qh[4], c8[4], s8[4];
    float4 cf[4];
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        const int j = 16 * w + 8 * (kk >> 1) + 2 * tig + (kk & 1);
        const float *qg = q + (g * GROUP + grp) * D;
        ql[kk] = (double)__ldg(qg + j);
        qh[kk] = (double)__ldg(qg + 256 + j);
        float c, sn;
        gem_rope_cs(grp, rope.inv_freq[j], &c, &sn);
        const float wl = __ldg(kw + j), wh = __ldg(kw + 256 + j);
        cf[kk] = make_float4(wl * c, wh * sn, wl * sn, wh * c);
        gem_rope_cs(8, rope.inv_freq[j], &c, &sn);
        c8[kk] = (double)c;
        s8[kk] = (double)sn;
    }
    const int ccol = tid & 63, crow0 = tid >> 6;
    const __nv_bfloat16 *vsrc = v + g * hs + (begin + crow0) * ts + 8 * ccol;
    const __nv_bfloat16 *vfirst = v + g * hs + begin * ts;
    const uint32_t cdst = v15_at(crow0, 8 * ccol, 8192u);
    auto issue = [&](int64_t it) { /* version 17's copies */
        if (it < ntiles) {
            const uint32_t dst = s_base + (uint32_t)(it % NS) * V15_STAGE_BYTES + cdst;
            const __nv_bfloat16 *src = vsrc + it * V15_T * ts;
#pragma unroll 8
            for (int k = 0; k < 32; k++) {
                const bool in = begin + it * V15_T + crow0 + 2 * k < end;
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                                 dst + (uint32_t)(k >> 2) * 8192u + (uint32_t)(k & 3) * 32u),
                             "l"(in ? src + 2 * k * ts : vfirst), "r"(in ? 16 : 0)
                             : "memory");
            }
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    float o[8][4];
#pragma unroll
    for (int mb = 0; mb < 8; mb++)
        o[mb][0] = o[mb][1] = o[mb][2] = o[mb][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, s[2] = {0.f, 0.f};
    const uint64_t d_qt = v15_desc(s_qt, 128u, 8192u), d_p = v15_desc(s_p, 128u, 1024u);
    issue(0);
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * V15_T;
        const uint32_t s_v = s_base + (uint32_t)(it % NS) * V15_STAGE_BYTES;
        const unsigned char *tile = v18_smem + (size_t)(it % NS) * V15_STAGE_BYTES;
        const uint64_t d_v = v15_desc(s_v, 128u, 8192u), d_vt = v15_desc(s_v, 8192u, 128u);
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads(); /* tile it (and Q^T) staged; every thread is past tile it - 1 */
        issue(it + 1);
        float sc[12];
#pragma unroll
        for (int i = 0; i < 12; i++)
            sc[i] = 0.f;
        v15_fence();
#pragma unroll
        for (int st = 0; st < 24; st++) { /* dims v4_step_dim(st): its byte offset / 16 */
            const uint32_t d0 = (uint32_t)v4_step_dim(st);
            v15_mma_s(sc, d_v + d0, d_qt + d0, st > 0);
        }
        v15_commit();
        /* the rotating dims, while the MMAs run: RoPE_{-P}(q) of the tile's first group */
        double cp_[4], sp_[4];
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            float c, sn;
            gem_rope_cs(rope.pos0 + t0, rope.inv_freq[16 * w + 8 * (kk >> 1) + 2 * tig + (kk & 1)],
                        &c, &sn);
            cp_[kk] = (double)c;
            sp_[kk] = (double)sn;
        }
#pragma unroll 1
        for (int tg = 0; tg < V15_T / 8; tg++) {
            if (tg > 0)
#pragma unroll
                for (int kk = 0; kk < 4; kk++) {
                    const double cn = fma(cp_[kk], c8[kk], -(sp_[kk] * s8[kk]));
                    sp_[kk] = fma(sp_[kk], c8[kk], cp_[kk] * s8[kk]);
                    cp_[kk] = cn;
                }
            const int t = 8 * tg + grp; /* this lane's token of the group */
            double c2[2] = {0.0, 0.0};
#pragma unroll
            for (int mm = 0; mm < 2; mm++) {
                const int dl = 16 * w + 8 * mm + 2 * tig; /* dims dl, dl + 1 and 256 + them */
                const uint32_t lo2 = *reinterpret_cast<const uint32_t *>(tile + v15_at(t, dl, 8192u));
                const uint32_t hi2 =
                    *reinterpret_cast<const uint32_t *>(tile + v15_at(t, 256 + dl, 8192u));
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int kk = 2 * mm + e;
                    const float vl = e ? bf_hi(lo2) : bf_lo(lo2), vh = e ? bf_hi(hi2) : bf_lo(hi2);
                    const float kl = fmaf(cf[kk].x, vl, -(cf[kk].y * vh));
                    const float kh = fmaf(cf[kk].z, vl, cf[kk].w * vh);
                    const double al = fma(ql[kk], cp_[kk], qh[kk] * sp_[kk]);
                    const double ah = fma(qh[kk], cp_[kk], -(ql[kk] * sp_[kk]));
                    dmma(c2, (double)kl, al);
                    dmma(c2, (double)kh, ah);
                }
            }
            *reinterpret_cast<float2 *>(&srot[w][t][2 * tig]) = make_float2((float)c2[0], (float)c2[1]);
        }
        __syncthreads(); /* the warps' rotating partial scores */
        v15_wait0();
#pragma unroll
        for (int i = 0; i < 12; i++)
            v15_keep(sc[i]);
        /* tokens r = 16 w + grp + 8 u, heads 2 tig + e: ((hi + mid) + lo) + the rotating dims */
        float x[2][2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int r = 16 * w + grp + 8 * u, h = 2 * tig + e;
                const float rot = ((srot[0][r][h] + srot[1][r][h]) + srot[2][r][h]) + srot[3][r][h];
                const float a = ((sc[2 * u + e] + sc[4 + 2 * u + e]) + sc[8 + 2 * u + e]) + rot;
                x[u][e] = t0 + r < end ? a * scale : -INFINITY;
            }
        }
        v16_tile_update(x, m, s, o, smax, ssum, pt, d_p, d_vt, w, grp, tig);
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    v16_write_partial(o, m, s, part_m, part_s, part_o, p, g, n_q_heads, w, grp, tig);
}

/* ---- version 19: version 18 on two warpgroups --------------------------------------------------

Version 15 issued 0.24 instructions a cycle a scheduler (run 105): one warp a scheduler waits
out every latency. Here a block is two warpgroups (256 threads, 8 warps) on the same staged
tile. Warpgroup g2 scores the non-rotating dims of its half of the row (k-steps 12 g2 .. 12 g2 +
11: dims 64 .. 255, then 320 .. 511) and updates O for dims 256 g2 .. 256 g2 + 255 (16
accumulators a thread); warp w (0 .. 7) takes the rotating pairs 8w .. 8w + 7 of all 64 tokens
on the F64 tensor cores, as version 18 does with 16. The two halves' scores and the eight
warps' rotating partials meet in shared memory; both warpgroups then add them in one order
and run the same softmax (warpgroup 0 writes P^T). Four barriers a tile. Run 106: 0.3900 ms at
128K. Needs sm_90a. */
#define V19_ROT_BYTES (8 * V15_T * GROUP * 4)  /* the eight warps' rotating partial scores */
#define V19_HALF_BYTES (2 * V15_T * GROUP * 4) /* the two warpgroups' non-rotating scores */
#define V19_SHARED                                                                             \
    (2 * V15_STAGE_BYTES + V15_QT_BYTES + V15_P_BYTES + V19_ROT_BYTES + V19_HALF_BYTES)

__global__ void __launch_bounds__(256, 1)
    kfv_wgmma2_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                          const __grid_constant__ gem_cu_rope rope,
                          const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                          float *__restrict__ part_m, float *__restrict__ part_s,
                          float *__restrict__ part_o, int64_t live, int64_t partitions,
                          int64_t n_q_heads, float scale)
{
    const int NS = 2;
    extern __shared__ __align__(128) unsigned char v19_smem[]; /* V19_SHARED */
    const uint32_t s_base = gem_smem_addr(v19_smem);
    const uint32_t s_qt = s_base + NS * V15_STAGE_BYTES, s_p = s_qt + V15_QT_BYTES;
    unsigned char *const extra = v19_smem + NS * V15_STAGE_BYTES;
    __nv_bfloat16 *const qt = reinterpret_cast<__nv_bfloat16 *>(extra);
    __nv_bfloat16 *const pt = reinterpret_cast<__nv_bfloat16 *>(extra + V15_QT_BYTES);
    /* srot[w][t][h]: warp w's rotating partial score; shalf[g2][t][h]: warpgroup g2's */
    float(*const srot)[V15_T][GROUP] =
        reinterpret_cast<float(*)[V15_T][GROUP]>(extra + V15_QT_BYTES + V15_P_BYTES);
    float(*const shalf)[V15_T][GROUP] = reinterpret_cast<float(*)[V15_T][GROUP]>(
        extra + V15_QT_BYTES + V15_P_BYTES + V19_ROT_BYTES);
    __shared__ float smax[2][4][GROUP], ssum[2][4][GROUP];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int g2 = w >> 2, wl = w & 3; /* warpgroup, warp within it */
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + V15_T - 1) / V15_T;

    /* Q^T: row n = 8 piece + head, the non-rotating dims times k_weight */
    for (int i = tid; i < GROUP * 384; i += 256) {
        const int h = i / 384, e = i % 384, d = e < 192 ? 64 + e : 320 + (e - 192);
        __nv_bfloat16 hi, mid, lo;
        split3_bf16(__ldg(q + (g * GROUP + h) * D + d) * __ldg(kw + d), &hi, &mid, &lo);
        qt[v15_at(h, d, 8192u) / 2] = hi;
        qt[v15_at(8 + h, d, 8192u) / 2] = mid;
        qt[v15_at(16 + h, d, 8192u) / 2] = lo;
    }
    /* this lane's rotating pairs j(kk) = 8w + 2 tig + kk: q of head grp in double, w cos and
     * w sin of offset grp, cos and sin of an 8-token step */
    double ql[2], qh[2], c8[2], s8[2];
    float4 cf[2];
#pragma unroll
    for (int kk = 0; kk < 2; kk++) {
        const int j = 8 * w + 2 * tig + kk;
        const float *qg = q + (g * GROUP + grp) * D;
        ql[kk] = (double)__ldg(qg + j);
        qh[kk] = (double)__ldg(qg + 256 + j);
        float c, sn;
        gem_rope_cs(grp, rope.inv_freq[j], &c, &sn);
        const float wl_ = __ldg(kw + j), wh_ = __ldg(kw + 256 + j);
        cf[kk] = make_float4(wl_ * c, wh_ * sn, wl_ * sn, wh_ * c);
        gem_rope_cs(8, rope.inv_freq[j], &c, &sn);
        c8[kk] = (double)c;
        s8[kk] = (double)sn;
    }
    /* copies: thread tid takes 16-byte column tid & 63 of rows (tid >> 6) + 4k, k = 0 .. 15 */
    const int ccol = tid & 63, crow0 = tid >> 6;
    const __nv_bfloat16 *vsrc = v + g * hs + (begin + crow0) * ts + 8 * ccol;
    const __nv_bfloat16 *vfirst = v + g * hs + begin * ts;
    const uint32_t cdst = v15_at(crow0, 8 * ccol, 8192u); /* row crow0 + 4k: + (k / 2) 8192 + (k % 2) 64 */
    auto issue = [&](int64_t it) {
        if (it < ntiles) {
            const uint32_t dst = s_base + (uint32_t)(it % NS) * V15_STAGE_BYTES + cdst;
            const __nv_bfloat16 *src = vsrc + it * V15_T * ts;
#pragma unroll 8
            for (int k = 0; k < 16; k++) {
                const bool in = begin + it * V15_T + crow0 + 4 * k < end;
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                                 dst + (uint32_t)(k >> 1) * 8192u + (uint32_t)(k & 1) * 64u),
                             "l"(in ? src + 4 * k * ts : vfirst), "r"(in ? 16 : 0)
                             : "memory");
            }
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    float o[4][4]; /* m-block 4 g2 + mb: dims 256 g2 + 64 mb + 16 wl + grp (+ 8), heads 2 tig (+ 1) */
#pragma unroll
    for (int mb = 0; mb < 4; mb++)
        o[mb][0] = o[mb][1] = o[mb][2] = o[mb][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, s[2] = {0.f, 0.f};
    const uint64_t d_qt = v15_desc(s_qt, 128u, 8192u), d_p = v15_desc(s_p, 128u, 1024u);
    issue(0);
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * V15_T;
        const uint32_t s_v = s_base + (uint32_t)(it % NS) * V15_STAGE_BYTES;
        const unsigned char *tile = v19_smem + (size_t)(it % NS) * V15_STAGE_BYTES;
        const uint64_t d_v = v15_desc(s_v, 128u, 8192u), d_vt = v15_desc(s_v, 8192u, 128u);
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads(); /* tile it (and Q^T) staged; every thread is past tile it - 1 */
        issue(it + 1);
        float sc[12];
#pragma unroll
        for (int i = 0; i < 12; i++)
            sc[i] = 0.f;
        v15_fence();
#pragma unroll
        for (int st = 0; st < 12; st++) {
            const uint32_t d0 = (uint32_t)v4_step_dim(12 * g2 + st);
            v15_mma_s(sc, d_v + d0, d_qt + d0, st > 0);
        }
        v15_commit();
        /* the rotating pairs, while the MMAs run (version 18's, 8 pairs a warp) */
        double cp_[2], sp_[2];
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            float c, sn;
            gem_rope_cs(rope.pos0 + t0, rope.inv_freq[8 * w + 2 * tig + kk], &c, &sn);
            cp_[kk] = (double)c;
            sp_[kk] = (double)sn;
        }
#pragma unroll 2
        for (int tg = 0; tg < V15_T / 8; tg++) {
            if (tg > 0)
#pragma unroll
                for (int kk = 0; kk < 2; kk++) {
                    const double cn = fma(cp_[kk], c8[kk], -(sp_[kk] * s8[kk]));
                    sp_[kk] = fma(sp_[kk], c8[kk], cp_[kk] * s8[kk]);
                    cp_[kk] = cn;
                }
            const int t = 8 * tg + grp;
            const uint32_t lo2 = *reinterpret_cast<const uint32_t *>(tile + v15_at(t, 8 * w + 2 * tig, 8192u));
            const uint32_t hi2 =
                *reinterpret_cast<const uint32_t *>(tile + v15_at(t, 256 + 8 * w + 2 * tig, 8192u));
            double c2[2] = {0.0, 0.0};
#pragma unroll
            for (int kk = 0; kk < 2; kk++) {
                const float vl = kk ? bf_hi(lo2) : bf_lo(lo2), vh = kk ? bf_hi(hi2) : bf_lo(hi2);
                const float kl = fmaf(cf[kk].x, vl, -(cf[kk].y * vh));
                const float kh = fmaf(cf[kk].z, vl, cf[kk].w * vh);
                dmma(c2, (double)kl, fma(ql[kk], cp_[kk], qh[kk] * sp_[kk]));
                dmma(c2, (double)kh, fma(qh[kk], cp_[kk], -(ql[kk] * sp_[kk])));
            }
            *reinterpret_cast<float2 *>(&srot[w][t][2 * tig]) = make_float2((float)c2[0], (float)c2[1]);
        }
        v15_wait0();
#pragma unroll
        for (int i = 0; i < 12; i++)
            v15_keep(sc[i]);
        /* this warpgroup's half: tokens 16 wl + grp + 8 u, heads 2 tig + e, (hi + mid) + lo */
#pragma unroll
        for (int u = 0; u < 2; u++)
            *reinterpret_cast<float2 *>(&shalf[g2][16 * wl + grp + 8 * u][2 * tig]) =
                make_float2((sc[2 * u] + sc[4 + 2 * u]) + sc[8 + 2 * u],
                            (sc[2 * u + 1] + sc[4 + 2 * u + 1]) + sc[8 + 2 * u + 1]);
        __syncthreads(); /* both halves and the eight warps' rotating partials */
        float x[2][2], mx[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int r = 16 * wl + grp + 8 * u, h = 2 * tig + e;
                float rot = 0.f;
#pragma unroll
                for (int ww = 0; ww < 8; ww++)
                    rot += srot[ww][r][h];
                const float a = (shalf[0][r][h] + shalf[1][r][h]) + rot;
                x[u][e] = t0 + r < end ? a * scale : -INFINITY;
            }
            mx[e] = fmaxf(x[0][e], x[1][e]);
#pragma unroll
            for (int off = 4; off < 32; off <<= 1)
                mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], off));
        }
        if (grp == 0) {
            smax[g2][wl][2 * tig] = mx[0];
            smax[g2][wl][2 * tig + 1] = mx[1];
        }
        __syncthreads(); /* each warpgroup's maxima (the two hold the same values) */
        float alpha[2], ps[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int h = 2 * tig + e;
            const float tm = fmaxf(fmaxf(smax[g2][0][h], smax[g2][1][h]),
                                   fmaxf(smax[g2][2][h], smax[g2][3][h]));
            const float mn = fmaxf(m[e], tm);
            alpha[e] = expf(m[e] - mn);
            m[e] = mn;
            ps[e] = 0.f;
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const float pe = expf(x[u][e] - mn);
                ps[e] += pe;
                if (g2 == 0) { /* P^T, written once */
                    const __nv_bfloat16 hi = __float2bfloat16_rn(pe);
                    const __nv_bfloat16 lo = __float2bfloat16_rn(pe - __bfloat162float(hi));
                    const int t = 16 * wl + grp + 8 * u;
                    pt[v15_at(h, t, 0u) / 2] = hi;
                    pt[(GROUP * V15_T * 2 + v15_at(h, t, 0u)) / 2] = lo;
                }
            }
#pragma unroll
            for (int off = 4; off < 32; off <<= 1)
                ps[e] += __shfl_xor_sync(0xffffffffu, ps[e], off);
        }
        if (grp == 0) {
            ssum[g2][wl][2 * tig] = ps[0];
            ssum[g2][wl][2 * tig + 1] = ps[1];
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads(); /* the sums and P^T */
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int h = 2 * tig + e;
            s[e] = s[e] * alpha[e] +
                   (((ssum[g2][0][h] + ssum[g2][1][h]) + ssum[g2][2][h]) + ssum[g2][3][h]);
        }
#pragma unroll
        for (int mb = 0; mb < 4; mb++) {
            o[mb][0] *= alpha[0];
            o[mb][1] *= alpha[1];
            o[mb][2] *= alpha[0];
            o[mb][3] *= alpha[1];
        }
#pragma unroll
        for (int mb = 0; mb < 4; mb++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                v15_keep(o[mb][i]);
        v15_fence();
#pragma unroll
        for (int ks = 0; ks < V15_T / 16; ks++)
#pragma unroll
            for (int pc = 0; pc < 2; pc++) {
                const uint64_t b = d_p + (uint64_t)(64 * pc + 16 * ks);
#pragma unroll
                for (int mb = 0; mb < 4; mb++)
                    v15_mma_o(o[mb], d_vt + (uint64_t)(1024 * ks + 64 * (4 * g2 + mb)), b);
            }
        v15_commit();
        v15_wait0();
#pragma unroll
        for (int mb = 0; mb < 4; mb++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                v15_keep(o[mb][i]);
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#pragma unroll
    for (int mb = 0; mb < 4; mb++)
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int64_t row = p * n_q_heads + g * GROUP + 2 * tig + e;
                part_o[row * D + 256 * g2 + 64 * mb + 16 * wl + grp + 8 * u] = o[mb][2 * u + e];
            }
    if (w == 0 && grp == 0)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            part_m[p * n_q_heads + g * GROUP + 2 * tig + e] = m[e];
            part_s[p * n_q_heads + g * GROUP + 2 * tig + e] = s[e];
        }
}

/* ---- version 5: F32 V, every product on the F64 tensor cores ---------------------------------

An F32 V cache on the BF16 tensor cores would need V in three pieces on both sides. Here every
product is one mma.m8n8k4.f64: a product of two F32 values is exact in F64, and the sums are
F64. A V element becomes a double by bit operations alone: its sign and its bits 30 .. 0 shifted
right by 3 are the double x 2^-896 (exact, subnormals and zero included); the dots and the
partial O carry that factor and drop it exactly at the end.
  - the 16-token tile is staged in shared memory by cp.async, three buffers (two tiles in
    flight), rows of 528 floats with the 16-byte groups' bit 1 flipped on rows 2 and 3 mod 4;
  - the dots: warp w takes the non-rotating dims of k-steps 3w .. 3w + 2 (16 each, a thread's
    4-dim slice one 16-byte load), k_weight folded into Q in double; and the rotating pairs
    8w + 4v + tig (v = 0, 1) as in version 4 (RoPE_{-P}(q) in double a tile, RoPE_u(w V) in F32
    from a per-thread table); the warps' partial dots are added in double;
  - the V update: A is the weights of 8 heads over 4 tokens, B 4 tokens x 8 dims, a thread's
    4-dim slice one 16-byte load serving four mma; warp w owns output dims 64w .. 64w + 63. */
#define V5_ROW 528
#define V5_STAGE (GEM_MMA_TILE * V5_ROW)     /* floats of one staged tile */
#define V5_BUFS 3
#define V5_SHARED (V5_BUFS * V5_STAGE * 4)   /* 101,376 bytes, dynamic */
#define V5_UNSCALE 0x1p896                   /* what the bit conversion took off */

/* x 2^-896 as a double, exactly: x's bits 30 .. 0 moved into a double's exponent and fraction */
__device__ __forceinline__ double v5_f64(float x)
{
    const uint32_t b = __float_as_uint(x);
    return __hiloint2double((int)((b & 0x80000000u) | ((b & 0x7fffffffu) >> 3)), (int)(b << 29));
}
/* the float offset of element (row, 4 g + e) of a staged tile */
__device__ __forceinline__ int v5_at(int row, int g)
{
    return row * V5_ROW + 4 * (g ^ (((row >> 1) & 1) << 1));
}

extern "C" __global__ void __launch_bounds__(256, 2)
    kfv_f64_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                       const __grid_constant__ gem_cu_rope rope, const float *__restrict__ v,
                       int64_t hs, int64_t ts, float *__restrict__ part_m,
                       float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,
                       int64_t partitions, int64_t n_q_heads, float scale)
{
    const int T = GEM_MMA_TILE;
    extern __shared__ __align__(128) unsigned char v5_tiles[]; /* V5_SHARED */
    float *const ring = reinterpret_cast<float *>(v5_tiles);
    __shared__ __align__(16) double sred[8][GROUP][GEM_MMA_TILE];
    __shared__ __align__(16) float sp[GROUP][GEM_MMA_TILE];
    __shared__ float salpha[GROUP];
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + T - 1) / T;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    /* A: the non-rotating dims base(3w + st) + 4 tig + u of head grp times k_weight; the
     * rotating pairs 8w + 4v + tig; this lane's rotation table of offsets 8i + grp */
    double qa[3][4], ql[2], qh[2];
    float4 cf[2][2];
    {
        const float *qg = q + (g * GROUP + grp) * D;
#pragma unroll
        for (int st = 0; st < 3; st++)
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int d = v4_step_dim(3 * w + st) + 4 * tig + u;
                qa[st][u] = (double)__ldg(qg + d) * (double)__ldg(kw + d);
            }
#pragma unroll
        for (int vv = 0; vv < 2; vv++) {
            const int j = 8 * w + 4 * vv + tig;
            ql[vv] = (double)__ldg(qg + j);
            qh[vv] = (double)__ldg(qg + 256 + j);
            const float wl = __ldg(kw + j), wh = __ldg(kw + 256 + j);
#pragma unroll
            for (int i = 0; i < 2; i++) {
                float c, sn;
                gem_rope_cs(8 * i + grp, rope.inv_freq[j], &c, &sn);
                cf[i][vv] = make_float4(wl * c, wh * sn, wl * sn, wh * c);
            }
        }
    }
    /* cp.async: thread's 16-byte group c = tid & 127 of rows (tid >> 7) + 2u */
    const int cg = tid & 127, crow = tid >> 7;
    const float *vsrc = v + g * hs + begin * ts + 4 * cg;
    auto issue = [&](int64_t it) {
        float *dst = ring + (size_t)(it % V5_BUFS) * V5_STAGE;
        const int64_t t = begin + it * T;
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int row = crow + 2 * u;
            const bool in = t + row < end;
            const float *src = vsrc + (in ? (it * T + row) * ts : 0);
            asm volatile(
                "cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(
                    gem_smem_addr(dst + v5_at(row, cg))),
                "l"(src), "r"(in ? 16 : 0), "l"(pol)
                : "memory");
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    double acc[8][2]; /* output dims 64w + 32b + 8 tig + u (acc[4b + u][0]) and + 4 ([1]) */
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc[j][0] = acc[j][1] = 0.0;
    float m = -INFINITY, s = 0.f;
    float cc = 1.f, ss = 0.f;
    if (ntiles > 0)
        issue(0);
    if (ntiles > 1)
        issue(1);
    if (ntiles > 1)
        asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    else
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads(); /* tile 0 is staged */
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t t0 = begin + it * T;
        const float *vs = ring + (size_t)(it % V5_BUFS) * V5_STAGE;
        if ((it & 3) == 0)
            gem_rope_cs(rope.pos0 + t0 + (int64_t)(lane >> 3) * T, rope.inv_freq[8 * w + (lane & 7)],
                        &cc, &ss);
        double al[2], ah[2];
#pragma unroll
        for (int vv = 0; vv < 2; vv++) {
            const int src = 8 * (int)(it & 3) + 4 * vv + tig;
            const double c = (double)__shfl_sync(0xffffffffu, cc, src);
            const double sn = (double)__shfl_sync(0xffffffffu, ss, src);
            al[vv] = fma(ql[vv], c, qh[vv] * sn);
            ah[vv] = fma(qh[vv], c, -(ql[vv] * sn));
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int row = 8 * i + grp;
            double d[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
#pragma unroll
            for (int st = 0; st < 3; st++) {
                const float4 x = *reinterpret_cast<const float4 *>(
                    vs + v5_at(row, (v4_step_dim(3 * w + st) >> 2) + tig));
                dmma(d[0], qa[st][0], v5_f64(x.x));
                dmma(d[1], qa[st][1], v5_f64(x.y));
                dmma(d[0], qa[st][2], v5_f64(x.z));
                dmma(d[1], qa[st][3], v5_f64(x.w));
            }
#pragma unroll
            for (int vv = 0; vv < 2; vv++) {
                const int j = 8 * w + 4 * vv + tig;
                const float vl = vs[v5_at(row, j >> 2) + (j & 3)];
                const float vh = vs[v5_at(row, (256 + j) >> 2) + (j & 3)];
                const float4 c = cf[i][vv];
                dmma(d[vv], al[vv], v5_f64(fmaf(c.x, vl, -(c.y * vh))));
                dmma(d[vv], ah[vv], v5_f64(fmaf(c.z, vl, c.w * vh)));
            }
            *reinterpret_cast<double2 *>(&sred[w][grp][8 * i + 2 * tig]) =
                make_double2(d[0][0] + d[1][0], d[0][1] + d[1][1]);
        }
        __syncthreads(); /* sred complete; every warp is past tile it - 1's V update */
        if (it + 2 < ntiles)
            issue(it + 2); /* into the buffer tile it - 1 was read from */
        {
            const int t = lane & (T - 1);
            double a = 0.0;
#pragma unroll
            for (int ww = 0; ww < 8; ww++)
                a += sred[ww][w][t];
            const float sc = t0 + t < end ? (float)(a * V5_UNSCALE) * scale : -INFINITY;
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
        /* tile it + 1 has landed (this thread's copies), then published by the barrier */
        if (it + 2 < ntiles)
            asm volatile("cp.async.wait_group 1;\n" ::: "memory");
        else
            asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        __syncthreads();
        {
            const double al2 = (double)salpha[grp];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                acc[j][0] *= al2;
                acc[j][1] *= al2;
            }
#pragma unroll
            for (int kb = 0; kb < 4; kb++) {
                const double a = (double)sp[grp][4 * kb + tig];
#pragma unroll
                for (int b = 0; b < 2; b++) {
                    const float4 x = *reinterpret_cast<const float4 *>(
                        vs + v5_at(4 * kb + tig, 16 * w + 8 * b + grp));
                    dmma(acc[4 * b + 0], a, v5_f64(x.x));
                    dmma(acc[4 * b + 1], a, v5_f64(x.y));
                    dmma(acc[4 * b + 2], a, v5_f64(x.z));
                    dmma(acc[4 * b + 3], a, v5_f64(x.w));
                }
            }
        }
    }
    const int64_t row = p * n_q_heads + g * GROUP + grp;
    float *po = part_o + row * D + 64 * w + 8 * tig;
#pragma unroll
    for (int b = 0; b < 2; b++) {
        *reinterpret_cast<float4 *>(po + 32 * b) =
            make_float4((float)(acc[4 * b][0] * V5_UNSCALE), (float)(acc[4 * b + 1][0] * V5_UNSCALE),
                        (float)(acc[4 * b + 2][0] * V5_UNSCALE), (float)(acc[4 * b + 3][0] * V5_UNSCALE));
        *reinterpret_cast<float4 *>(po + 32 * b + 4) =
            make_float4((float)(acc[4 * b][1] * V5_UNSCALE), (float)(acc[4 * b + 1][1] * V5_UNSCALE),
                        (float)(acc[4 * b + 2][1] * V5_UNSCALE), (float)(acc[4 * b + 3][1] * V5_UNSCALE));
    }
    if (lane == 0) {
        part_m[p * n_q_heads + g * GROUP + w] = m;
        part_s[p * n_q_heads + g * GROUP + w] = s;
    }
}

extern "C" __global__ void __launch_bounds__(256)
    kfv_reducer(const float *__restrict__ part_m, const float *__restrict__ part_s,
                const float *__restrict__ part_o, float *__restrict__ out, int64_t partitions)
{
    gem_fused_reducer_body(part_m, part_s, part_o, out, partitions);
}

/* ---- version 20: warps that own whole 16-token tiles (the view K = V) -------------------------
Versions 4-19 share each tile among the block's warps: the staged passes split the tile's dims
over eight warps (so every tile pays for the warps' partial scores meeting in shared memory,
two barriers, a softmax in every warp and an O rescale of every warp's dims), the wgmma passes
run a tile's steps one after another in one warpgroup. Here each warp owns its tiles whole and
never waits for another warp inside the loop:
  - warp w of a block takes the block's 16-token tiles w, w + NW, ... and copies each into its
    own two-stage ring in shared memory by cp.async (16 rows of 1,040 bytes), so a tile is in
    flight while the warp computes the one before;
  - scores with the tokens as rows: S^T (16 tokens x 8 heads) = K (16 x 512) Q^T, the A
    fragments by ldmatrix from the staged rows, the B fragments (Q's three BF16 pieces, 8 heads
    x 512 in shared memory, shared by the block) by ldmatrix: 32 k-steps x 3 pieces = 96 mma a
    tile, the pieces and k-step parities in six accumulators added in a fixed order;
  - the online softmax in the accumulators' layout: a lane holds tokens grp and grp + 8 of
    heads 2 tig and 2 tig + 1, the head's maxima and sums over the 16 tokens by three xor
    shuffles;
  - the V update with the dims as rows: O^T (512 x 8) += V^T (512 x 16) P^T, the A fragments
    by ldmatrix.trans from the same staged rows, the B fragments the weights' two BF16 pieces
    (the tile's weights pass through 512 bytes of the warp's shared memory to the B layout):
    32 m-tiles x 2 = 64 mma; O^T stays in 128 registers a lane whose heads (2 tig, 2 tig + 1)
    are the softmax's, so the rescale needs no exchange; it is skipped when both alphas of every
    lane are 1 (x * 1 = x: the same bits);
  - at the end the block's warps merge (M, S, O) in warp order through shared memory and write
    one partial (the library's reducer's layout), for --partitions 33 (one block of six warps
    an SM at 4 KV heads; 227,712 bytes of shared memory).
Per tile a warp issues 779 instructions (run 114's ncu) where version 4's eight warps issue about
3,600.
*/
#define V20_WARPS 6
#define V20_ROW 520 /* elements a staged row: 512 + 16 bytes, ldmatrix rows on distinct banks */
#define V20_TILE (16 * V20_ROW)
#define V20_QELEMS (3 * GROUP * V20_ROW)
#define V20_SHARED                                                                              \
    ((size_t)(V20_QELEMS + V20_WARPS * 2 * V20_TILE) * 2 + (size_t)V20_WARPS * 16 * GROUP * 4)

/* ---- versions 20-23: the parts their warps share ---------------------------------------------
The library's helpers of its long BF16 K-from-V pass (src/cuda/attn_fused_body.cuh, the port of
version 23): a warp's tile copy (gem_kfv_warp_copy), the softmax and V update of a tile
(gem_kfv_warp_update) and the block's merge (gem_kfv_warp_merge<NW>), so that the versions and
the library compute the same bits. */

extern "C" __global__ void __launch_bounds__(32 * V20_WARPS, 1)
    alias_warp_first_pass(const float *__restrict__ q, const __nv_bfloat16 *__restrict__ v,
                          int64_t hs, int64_t ts, float *__restrict__ part_m,
                          float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,
                          int64_t partitions, int64_t n_q_heads, float scale)
{
    extern __shared__ __align__(128) unsigned char v20_sm[];
    __nv_bfloat16 *const sq = reinterpret_cast<__nv_bfloat16 *>(v20_sm); /* [3][8][ROW] */
    __nv_bfloat16 *const stiles = sq + V20_QELEMS; /* [warp][2][16][ROW] */
    float *const spt = reinterpret_cast<float *>(stiles + V20_WARPS * 2 * V20_TILE); /* [w][16][8] */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + 15) / 16;
    const int nmine = ntiles > w ? (int)((ntiles - w + V20_WARPS - 1) / V20_WARPS) : 0;

    for (int i = tid; i < GROUP * D; i += 32 * V20_WARPS) {
        const int h = i / D, d = i % D;
        __nv_bfloat16 hi, mid, lo;
        split3_bf16(__ldg(q + (g * GROUP + h) * D + d), &hi, &mid, &lo);
        sq[(0 * GROUP + h) * V20_ROW + d] = hi;
        sq[(1 * GROUP + h) * V20_ROW + d] = mid;
        sq[(2 * GROUP + h) * V20_ROW + d] = lo;
    }

    __nv_bfloat16 *const mine = stiles + (size_t)w * 2 * V20_TILE;
    const __nv_bfloat16 *const vg = v + g * hs;
    /* own tile j into stage j & 1 (a group each, empty past the last) */
    auto issue = [&](int j) {
        if (j < nmine) {
            const int64_t t0 = begin + (int64_t)(w + j * V20_WARPS) * 16;
            __nv_bfloat16 *st = mine + (j & 1) * V20_TILE + 8 * lane;
            gem_kfv_warp_copy(st, vg, t0, begin, end, ts, lane);
        } else {
            asm volatile("cp.async.commit_group;\n" ::: "memory"); /* the counts stay uniform */
        }
    };
    issue(0);
    issue(1);
    __syncthreads(); /* Q's pieces */

    float o[32][4];
#pragma unroll
    for (int mt = 0; mt < 32; mt++)
        o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, s0 = 0.f, s1 = 0.f; /* heads 2 tig, 2 tig + 1 */
    float *const sp = spt + (size_t)w * 16 * GROUP;
    /* ldmatrix row addresses: K as A (token (lane & 7) + 8 ((lane >> 3) & 1), dims + 8 (lane >> 4));
     * Q as B (head lane & 7, dims + 8 (lane >> 3)); V^T as A, transposed (token (lane & 7) +
     * 8 (lane >> 4), dims + 8 ((lane >> 3) & 1)) */
    const int arow = ((lane & 7) + 8 * ((lane >> 3) & 1)) * V20_ROW + 8 * (lane >> 4);
    const __nv_bfloat16 *const qrow = sq + (lane & 7) * V20_ROW + 8 * (lane >> 3);
    const int vrow = ((lane & 7) + 8 * (lane >> 4)) * V20_ROW + 8 * ((lane >> 3) & 1);
    for (int j = 0; j < nmine; j++) {
        asm volatile("cp.async.wait_group 1;\n" ::: "memory"); /* own tile j has landed */
        __syncwarp();
        const __nv_bfloat16 *st = mine + (j & 1) * V20_TILE;
        const int64_t t0 = begin + (int64_t)(w + j * V20_WARPS) * 16;
        float sa[6][4];
#pragma unroll
        for (int u = 0; u < 6; u++)
            sa[u][0] = sa[u][1] = sa[u][2] = sa[u][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < 32; kk += 2) {
            uint32_t a[4], a2[4];
            gem_ldsm_x4(a, st + arow + 16 * kk);
            gem_ldsm_x4(a2, st + arow + 16 * kk + 16);
#pragma unroll
            for (int pc = 0; pc < 3; pc++) {
                uint32_t b[4]; /* k-step kk: b[0], b[1]; kk + 1: b[2], b[3] */
                gem_ldsm_x4(b, qrow + pc * GROUP * V20_ROW + 16 * kk);
                gem_mma_bf16(sa[2 * pc], a[0], a[1], a[2], a[3], b[0], b[1]);
                gem_mma_bf16(sa[2 * pc + 1], a2[0], a2[1], a2[2], a2[3], b[2], b[3]);
            }
        }
        /* tokens grp (0, 1) and grp + 8 (2, 3); heads 2 tig (0, 2) and 2 tig + 1 (1, 3) */
        float sv[4];
#pragma unroll
        for (int r = 0; r < 4; r++)
            sv[r] = (((sa[0][r] + sa[1][r]) + (sa[2][r] + sa[3][r])) + (sa[4][r] + sa[5][r])) *
                    scale;
        gem_kfv_warp_update(sv, t0, end, m0, m1, s0, s1, o, sp, st, vrow, grp, tig);
        __syncwarp(); /* every lane is past this stage and sp before they are rewritten */
        issue(j + 2);
    }
    gem_kfv_warp_merge<V20_WARPS>(reinterpret_cast<float *>(stiles), o, m0, m1, s0, s1, p, g,
                          n_q_heads, part_m, part_s, part_o);
}

/* ---- version 21: version 20's warps on the K-from-V view ---------------------------------------
Version 20's structure (each warp owns whole 16-token tiles, the scores with the tokens as rows,
O^T in registers) with K(t) = RoPE_{pos0 + t}(k_weight * V(t)):
  - the 384 dims that do not rotate: k_weight folded into Q's three BF16 pieces (version 4's
    rule), 24 k-steps x 3 pieces = 72 mma a tile; Q's pieces are stored for those dims alone;
  - the 128 rotating dims as version 4 takes them: q . RoPE_{P + u}(w V) = RoPE_{-P}(q) . RoPE_u(w
    V), P the tile's first position, u its offset. The warp takes the tile's 64 angles P f_j
    (two a lane, gem_rope_cs) into its own 512 bytes of shared memory; each lane forms
    RoPE_{-P}(q) of head grp for its 16 pairs in double, and RoPE_u(w V) of tokens grp and
    grp + 8 in F32 from its ldmatrix fragments of the rotating blocks and a table of w cos and
    w sin of the 16 offsets (global memory, 16 KiB, read through the L1); both meet on the F64
    tensor cores (m8n8k4: tokens x 4 pairs' dims times 4 dims x heads), 64 a tile, whose D has
    the 16-bit scores' layout (tokens grp, heads 2 tig, 2 tig + 1).
The softmax, the V update and the block's merge are version 20's. For --partitions 33.
*/
#define V21_QROW 392 /* Q's pieces of the 384 dims that do not rotate: 784-byte rows */
#define V21_QELEMS (3 * GROUP * V21_QROW)
#define V21_SHARED(NW, NS)                                                                      \
    ((size_t)(V21_QELEMS + (NW) * (NS) * V20_TILE) * 2 + (size_t)(NW) * 16 * GROUP * 4 +           \
     (size_t)GROUP * NPAIRS * 8 + (size_t)(NW) * NPAIRS * 8)

template <int NW, int NS, bool SCOEF = false, bool PF = true>
__device__ __forceinline__ void kfv_warp_body(const float *__restrict__ q, const float *__restrict__ kw,
                        const gem_cu_rope &rope,
                        const float4 *__restrict__ coef, /* [16 offsets][64 pairs] */
                        const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                        float *__restrict__ part_m, float *__restrict__ part_s,
                        float *__restrict__ part_o, int64_t live, int64_t partitions,
                        int64_t n_q_heads, float scale)
{
    extern __shared__ __align__(128) unsigned char v21_sm[];
    __nv_bfloat16 *const sq = reinterpret_cast<__nv_bfloat16 *>(v21_sm); /* [3][8][QROW] */
    __nv_bfloat16 *const stiles = sq + V21_QELEMS; /* [warp][2][16][ROW] */
    float *const spt = reinterpret_cast<float *>(stiles + NW * NS * V20_TILE); /* [w][16][8] */
    float2 *const sqr = reinterpret_cast<float2 *>(spt + NW * 16 * GROUP); /* [8][64] */
    float2 *const scs = sqr + GROUP * NPAIRS; /* [w][64]: cos, sin of P f_j */
    float4 *const scf = reinterpret_cast<float4 *>(scs + NW * NPAIRS); /* SCOEF: coef's copy */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + 15) / 16;
    const int nmine = ntiles > w ? (int)((ntiles - w + NW - 1) / NW) : 0;

    for (int i = tid; i < GROUP * 384; i += 32 * NW) {
        const int h = i / 384, x = i % 384, d = gem_kfv_step_dim(x / 16) + x % 16;
        __nv_bfloat16 hi, mid, lo;
        split3_bf16(__ldg(q + (g * GROUP + h) * D + d) * __ldg(kw + d), &hi, &mid, &lo);
        sq[(0 * GROUP + h) * V21_QROW + x] = hi;
        sq[(1 * GROUP + h) * V21_QROW + x] = mid;
        sq[(2 * GROUP + h) * V21_QROW + x] = lo;
    }
    for (int i = tid; i < GROUP * NPAIRS; i += 32 * NW) {
        const int h = i / NPAIRS, j = i % NPAIRS;
        const float *qh = q + (g * GROUP + h) * D;
        sqr[i] = make_float2(__ldg(qh + j), __ldg(qh + 256 + j));
    }
    if (SCOEF) /* version 4's scoef rule for every offset u and pair j */
        for (int i = tid; i < 16 * NPAIRS; i += 32 * NW) {
            const int u = i / NPAIRS, j = i % NPAIRS;
            float c, s;
            gem_rope_cs(u, rope.inv_freq[j], &c, &s);
            const float wl = __ldg(kw + j), wh = __ldg(kw + 256 + j);
            scf[i] = make_float4(wl * c, wh * s, wl * s, wh * c);
        }

    __nv_bfloat16 *const mine = stiles + (size_t)w * NS * V20_TILE;
    const __nv_bfloat16 *const vg = v + g * hs;
    auto issue = [&](int j) {
        if (j < nmine) {
            const int64_t t0 = begin + (int64_t)(w + j * NW) * 16;
            __nv_bfloat16 *st = mine + (NS == 2 ? (j & 1) : 0) * V20_TILE + 8 * lane;
            gem_kfv_warp_copy(st, vg, t0, begin, end, ts, lane);
        } else {
            asm volatile("cp.async.commit_group;\n" ::: "memory"); /* the counts stay uniform */
        }
    };
    /* NS == 1: the rows of own tile j + 1 asked of the L2 while tile j is copied and computed
     * (never without PF) */
    auto prefetch = [&](int j) {
        if (PF && j < nmine) {
            const int64_t t0 = begin + (int64_t)(w + j * NW) * 16;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t t = t0 + 4 * i + (lane >> 3);
                if (t < end)
                    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(vg + t * ts + 64 * (lane & 7)));
            }
        }
    };
    if (NS == 2) {
        issue(0);
        issue(1);
    } else {
        prefetch(0);
    }
    __syncthreads(); /* Q's pieces and rotating pairs */

    float o[32][4];
#pragma unroll
    for (int mt = 0; mt < 32; mt++)
        o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, s0 = 0.f, s1 = 0.f;
    float *const sp = spt + (size_t)w * 16 * GROUP;
    float2 *const cs = scs + (size_t)w * NPAIRS;
    const int arow = ((lane & 7) + 8 * ((lane >> 3) & 1)) * V20_ROW + 8 * (lane >> 4);
    const __nv_bfloat16 *const qrow = sq + (lane & 7) * V21_QROW + 8 * (lane >> 3);
    const int vrow = ((lane & 7) + 8 * (lane >> 4)) * V20_ROW + 8 * ((lane >> 3) & 1);
    const float4 *const cf0 = (SCOEF ? scf : coef) + grp * NPAIRS,
                        *const cf1 = (SCOEF ? scf : coef) + (grp + 8) * NPAIRS;
    const float2 *const qr = sqr + grp * NPAIRS;
    for (int j = 0; j < nmine; j++) {
        const int64_t t0 = begin + (int64_t)(w + j * NW) * 16;
        if (NS == 1) {
            issue(j);
            prefetch(j + 1);
        }
        {
            float c, s;
            gem_rope_cs(rope.pos0 + t0, rope.inv_freq[lane], &c, &s);
            cs[lane] = make_float2(c, s);
            gem_rope_cs(rope.pos0 + t0, rope.inv_freq[lane + 32], &c, &s);
            cs[lane + 32] = make_float2(c, s);
        }
        if (NS == 2)
            asm volatile("cp.async.wait_group 1;\n" ::: "memory"); /* own tile j has landed */
        else
            asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        __syncwarp();
        const __nv_bfloat16 *st = mine + (NS == 2 ? (j & 1) : 0) * V20_TILE;
        float sa[6][4];
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
                uint32_t b[4];
                gem_ldsm_x4(b, qrow + pc * GROUP * V21_QROW + 16 * ks);
                gem_mma_bf16(sa[2 * pc], a[0], a[1], a[2], a[3], b[0], b[1]);
                gem_mma_bf16(sa[2 * pc + 1], a2[0], a2[1], a2[2], a2[3], b[2], b[3]);
            }
        }
        /* the rotating dims: block b's fragments (tokens grp, grp + 8 in regs 0/1 (dims 2 tig,
         * + 1) and 2/3 (+ 8)), pair 16b + 2 tig + e + 8f */
        double dr[2][2][2]; /* [token half][e][head 2 tig + h] */
#pragma unroll
        for (int x = 0; x < 2; x++)
#pragma unroll
            for (int e = 0; e < 2; e++)
                dr[x][e][0] = dr[x][e][1] = 0.0;
#pragma unroll
        for (int b = 0; b < 4; b++) {
            uint32_t lo[4], hi[4];
            gem_ldsm_x4(lo, st + arow + 16 * b);
            gem_ldsm_x4(hi, st + arow + 256 + 16 * b);
#pragma unroll
            for (int f = 0; f < 2; f++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int pr = 16 * b + 2 * tig + e + 8 * f;
                    const float2 c = cs[pr], qq = qr[pr];
                    const double al = fma((double)qq.x, (double)c.x, (double)qq.y * (double)c.y);
                    const double ah = fma((double)qq.y, (double)c.x, -((double)qq.x * (double)c.y));
#pragma unroll
                    for (int x = 0; x < 2; x++) {
                        const float vl = gem_mma_bf16_elem::half_value(lo[x + 2 * f], e);
                        const float vh = gem_mma_bf16_elem::half_value(hi[x + 2 * f], e);
                        const float4 k4 = SCOEF ? (x ? cf1 : cf0)[pr] : __ldg((x ? cf1 : cf0) + pr);
                        const float kl = fmaf(k4.x, vl, -(k4.y * vh)), kh = fmaf(k4.z, vl, k4.w * vh);
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
        __syncwarp(); /* every lane is past this stage, sp and cs before they are rewritten */
        if (NS == 2)
            issue(j + 2);
    }
    gem_kfv_warp_merge<NW>(reinterpret_cast<float *>(stiles), o, m0, m1, s0, s1, p, g,
                          n_q_heads, part_m, part_s, part_o);
}


extern "C" __global__ void __launch_bounds__(32 * V20_WARPS, 1)
    kfv_warp_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                        const __grid_constant__ gem_cu_rope rope, const float4 *__restrict__ coef,
                        const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                        float *__restrict__ part_m, float *__restrict__ part_s,
                        float *__restrict__ part_o, int64_t live, int64_t partitions,
                        int64_t n_q_heads, float scale)
{
    kfv_warp_body<V20_WARPS, 2>(q, kw, rope, coef, v, hs, ts, part_m, part_s, part_o, live,
                                partitions, n_q_heads, scale);
}

/* ---- version 22: version 21 with eight warps and one stage each ------------------------------
Version 21 holds six warps an SM (two stages of 16.6 KB each): 1.5 warps a scheduler, and ncu
finds it waiting on its own dependences (wait 1.9, short scoreboard 1.2 stall cycles an
instruction). With one stage a warp, eight fit (its 254 registers still do): a warp copies its
tile at the top of the iteration, from the L2, where it asked for the tile's rows
(prefetch.global.L2) while computing the tile before. For --partitions 33.
*/
#define V22_WARPS 8
#define V23_SHARED (V21_SHARED(V22_WARPS, 1) + (size_t)16 * NPAIRS * 16)
extern "C" __global__ void __launch_bounds__(32 * V22_WARPS, 1)
    kfv_warp1_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                         const __grid_constant__ gem_cu_rope rope, const float4 *__restrict__ coef,
                         const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                         float *__restrict__ part_m, float *__restrict__ part_s,
                         float *__restrict__ part_o, int64_t live, int64_t partitions,
                         int64_t n_q_heads, float scale)
{
    kfv_warp_body<V22_WARPS, 1>(q, kw, rope, coef, v, hs, ts, part_m, part_s, part_o, live,
                                partitions, n_q_heads, scale);
}

/* ---- version 23: version 22 with its table of w cos, w sin in shared memory ------------------
Each block builds the 16 x 64 entries by version 4's rule (gem_rope_cs of u f_j, times k_weight
in F32) into 16 KiB of shared memory at its start, and the rotation reads them there: what the
library needs (no table beside the view), and shared-memory loads where version 22 read the L1.
For --partitions 33.
*/
extern "C" __global__ void __launch_bounds__(32 * V22_WARPS, 1)
    kfv_warp1s_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                          const __grid_constant__ gem_cu_rope rope,
                          const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                          float *__restrict__ part_m, float *__restrict__ part_s,
                          float *__restrict__ part_o, int64_t live, int64_t partitions,
                          int64_t n_q_heads, float scale)
{
    kfv_warp_body<V22_WARPS, 1, true>(q, kw, rope, nullptr, v, hs, ts, part_m, part_s, part_o,
                                      live, partitions, n_q_heads, scale);
}

/* ---- version 36: version 23 with the next tile never asked of the L2 --------------------------
Run 138: version 34 (version 30, the F32 pass, without its prefetch.global.L2 of the next tile)
read 1.07 GB from DRAM at 128K where version 30 read 1.31, and took 0.2915 ms against 0.3339.
Version 23 (the BF16 pass's design) asks for its next tile the same way. For --partitions 33.
*/
extern "C" __global__ void __launch_bounds__(32 * V22_WARPS, 1)
    kfv_warp1s_nopf_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                               const __grid_constant__ gem_cu_rope rope,
                               const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                               float *__restrict__ part_m, float *__restrict__ part_s,
                               float *__restrict__ part_o, int64_t live, int64_t partitions,
                               int64_t n_q_heads, float scale)
{
    kfv_warp_body<V22_WARPS, 1, true, false>(q, kw, rope, nullptr, v, hs, ts, part_m, part_s,
                                             part_o, live, partitions, n_q_heads, scale);
}

/* ---- versions 24 and 25: an F32 V cache on warps that own whole tiles, TF32 pieces ----------
Version 22's design (each warp owns whole 16-token tiles, one stage a warp filled by cp.async
from the L2 where the rows were asked for during the tile before, scores with the tokens as the
MMA's rows, O^T in 128 registers a lane, the block's warps merged in warp order at the end) on
an F32 V cache. Version 5 took F32 to the F64 tensor cores (0.48 ms at 128K); here every product
is three TF32 MMAs (mma.m16n8k8.tf32): a value x is big + small, big = cvt.rn.tf32(x) (one F2FP)
and small = x - big exactly (an FADD); a . b is big_a big_b + big_a small_b + small_a big_b,
small_a small_b (about 2^-22 of the product) left out, and small given to the MMA as it is (it
keeps 11 of its bits: about 2^-22 of x again, of either sign since big was rounded to nearest).
So a product is good to about 2^-21 of itself, without bias: this is F32 arithmetic's accuracy,
not exactness, and the output is held to the same NMSE <= 1e-10 and bitwise repeats.
  - The stage: 16 rows of 512 floats (2,048 bytes, no padding), its 16-byte quads XOR-swizzled
    by the row's token t: physical quad = logical quad ^ f(t), f(t) = 4 (t & 1) + (t & 2).
  - Scores S^T = K Q^T: lane (grp, tig) owns the quads 4k + tig of tokens grp and grp + 8 (dims
    16k + 4 tig + e), one ld.shared.v4 each giving two k-steps: k-step 2k takes e = 0 at slot
    tig and e = 1 at slot tig + 4, k-step 2k + 1 e = 2 and 3. Q's B fragment of head grp is then
    the same quad of fl(q w) (big and small, in shared memory swizzled by head). 24 quads do
    not rotate: 48 k-steps x 3 = 144 MMAs.
  - The rotating dims (quads 0-3 and their partners 16-19 in the same lane): q . RoPE_{P+u}(w V)
    = RoPE_{-P}(q) . RoPE_u(w V) as in versions 4-23, RoPE_{-P}(q) in F32 from the tile's 64
    angles (gem_rope_cs), RoPE_u(w V) in F32 from a table of w cos, w sin of the 16 offsets:
    16 k-steps x 3 = 48 MMAs.
  - V update O^T += V^T P^T: lane (grp, tig) owns quads 8k + grp of tokens tig, tig + 4, + 8,
    + 12; m-tile 2k + h takes dims 32k + 4 grp + 2h (row grp) and + 1 (row grp + 8), so one
    ld.shared.v4 feeds two m-tiles. 32 m-tiles x 2 k-steps x 3 = 192 MMAs. The swizzle makes
    both patterns free of bank conflicts (a quarter warp's eight quads are distinct mod 8).
  - Version 24: five warps a block and an SM, the table in shared memory in the lanes' order
    (214,016 bytes); version 25: six warps, the table (version 21's, in global memory) read
    through the L1 (231,424 bytes). For --partitions 33 (132 blocks at 4 KV heads).
*/
#define V24_STAGE (16 * D)   /* floats of a warp's stage */
#define V24_QNR (GROUP * 384) /* floats of one piece of fl(q w): 8 heads x 96 quads */
#define V24_SHARED(NW, SCOEF)                                                                   \
    ((size_t)(NW) * V24_STAGE * 4 + (size_t)2 * V24_QNR * 4 + (size_t)GROUP * NPAIRS * 8 +      \
     (size_t)(NW) * (16 * GROUP * 4 + NPAIRS * 8) + ((SCOEF) ? (size_t)16 * NPAIRS * 16 : 0))

/* The TF32 pieces' helpers are the library's (src/cuda/attn_fused_body.cuh: gem_tf32_swz,
 * gem_tf32_split, gem_mma_tf32, gem_mma_tf32x3, gem_cp16), so that these versions and the
 * library's long F32 pass compute the same bits. */

template <int NW, bool SCOEF, bool LEAN = false>
__device__ __forceinline__ void kfv_tf32_body(const float *__restrict__ q, const float *__restrict__ kw,
                        const gem_cu_rope &rope,
                        const float4 *__restrict__ coef, /* !SCOEF: [16 offsets][64 pairs] */
                        const float *__restrict__ v, int64_t hs, int64_t ts,
                        float *__restrict__ part_m, float *__restrict__ part_s,
                        float *__restrict__ part_o, int64_t live, int64_t partitions,
                        int64_t n_q_heads, float scale)
{
    extern __shared__ __align__(128) unsigned char v24_sm[];
    float *const stiles = reinterpret_cast<float *>(v24_sm); /* [w][16][512], swizzled */
    float *const sqb = stiles + (size_t)NW * V24_STAGE;      /* [8][96 quads] big, swizzled */
    float *const sqs = sqb + V24_QNR;                        /* small */
    float2 *const sqr = reinterpret_cast<float2 *>(sqs + V24_QNR); /* [8][64]: q_j, q_{j+256} */
    float *const spt = reinterpret_cast<float *>(sqr + GROUP * NPAIRS); /* [w][16][8] */
    float2 *const scs = reinterpret_cast<float2 *>(spt + NW * 16 * GROUP); /* [w][64] */
    float4 *const scf = reinterpret_cast<float4 *>(scs + NW * NPAIRS); /* [2][4][4][32] */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + 15) / 16;
    const int nmine = ntiles > w ? (int)((ntiles - w + NW - 1) / NW) : 0;
    const float *const vg = v + g * hs;
    float *const mine = stiles + (size_t)w * V24_STAGE;

    auto copy = [&](int64_t t0) {
        if (LEAN && t0 + 16 <= end) { /* a whole tile: a row's address one add from the last */
            const float *src = vg + t0 * ts + 4 * lane;
#pragma unroll
            for (int r = 0; r < 16; r++, src += ts) {
                float *dst = mine + r * D + 4 * (lane ^ gem_tf32_swz(r)); /* (lane + 32 i) ^ sw */
#pragma unroll
                for (int i = 0; i < 4; i++)
                    gem_cp16(dst + 128 * i, src + 128 * i);
            }
            asm volatile("cp.async.commit_group;\n" ::: "memory");
            return;
        }
        for (int r = 0; r < 16; r++) {
            const bool in = t0 + r < end;
            const float *src = vg + (in ? t0 + r : begin) * ts + 4 * lane;
            float *dst = mine + r * D;
            const int sw = gem_tf32_swz(r);
#pragma unroll
            for (int i = 0; i < 4; i++)
                gem_cp16_zfill(dst + 4 * ((lane + 32 * i) ^ sw), src + 128 * i, in ? 16 : 0);
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    auto prefetch = [&](int j) {
        if (j < nmine) {
            const int64_t t0 = begin + (int64_t)(w + j * NW) * 16;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int64_t t = t0 + 2 * i + (lane >> 4);
                if (t < end)
                    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(vg + t * ts + 32 * (lane & 15)));
            }
        }
    };
    if (nmine > 0) {
        copy(begin + (int64_t)w * 16);
        prefetch(1);
    }

    const float *qg = q + g * GROUP * D;
    for (int i = tid; i < GROUP * 384; i += 32 * NW) {
        const int h = i / 384, x = i % 384, d = x < 192 ? 64 + x : 128 + x;
        const int kq = (d >> 4) - (d < 256 ? 4 : 8), t4 = (d >> 2) & 3;
        const int at = h * 384 + 4 * ((4 * kq + t4) ^ gem_tf32_swz(h)) + (d & 3);
        uint32_t b, s;
        gem_tf32_split(__ldg(qg + h * D + d) * __ldg(kw + d), b, s);
        sqb[at] = __uint_as_float(b);
        sqs[at] = __uint_as_float(s);
    }
    for (int i = tid; i < GROUP * NPAIRS; i += 32 * NW) {
        const int h = i / NPAIRS, j = i % NPAIRS;
        sqr[i] = make_float2(__ldg(qg + h * D + j), __ldg(qg + h * D + 256 + j));
    }
    if (SCOEF) /* version 4's rule; entry ((x 4 + k) 4 + e) 32 + lane' for lane' (grp', tig') */
        for (int i = tid; i < 16 * NPAIRS; i += 32 * NW) {
            const int ln = i & 31, e = (i >> 5) & 3, k = (i >> 7) & 3, x = i >> 9;
            const int u = (ln >> 2) + 8 * x, j = 16 * k + 4 * (ln & 3) + e;
            float c, s;
            gem_rope_cs(u, rope.inv_freq[j], &c, &s);
            const float wl = __ldg(kw + j), wh = __ldg(kw + 256 + j);
            scf[i] = make_float4(wl * c, wh * s, wl * s, wh * c);
        }
    __syncthreads();

    float o[32][4];
#pragma unroll
    for (int mt = 0; mt < 32; mt++)
        o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, s0 = 0.f, s1 = 0.f; /* heads 2 tig, 2 tig + 1 */
    float *const sp = spt + (size_t)w * 16 * GROUP;
    float2 *const cs = scs + (size_t)w * NPAIRS;
    const int swg = gem_tf32_swz(grp), swt = gem_tf32_swz(tig);
    const float *const ra = mine + grp * D, *const rb = mine + (grp + 8) * D;
    const float *const qb = sqb + grp * 384, *const qs = sqs + grp * 384;
    /* LEAN: quad (4k + tig) ^ swg is at floats 16 (k ^ s2) + lo: 16 k + lo + 16 s2 for even k,
     * - 16 s2 for odd k, so every load is a base and an immediate offset */
    const int lo = 4 * (tig ^ (swg & 3)), s2 = 16 * (swg >> 2);
    const float *const rae = ra + lo + s2, *const rao = ra + lo - s2;
    const float *const rbe = rb + lo + s2, *const rbo = rb + lo - s2;
    const float *const qbe = qb + lo + s2, *const qbo = qb + lo - s2;
    const float *const qse = qs + lo + s2, *const qso = qs + lo - s2;
    const float *const vbase = mine + tig * D + 4 * (grp ^ swt);
    for (int jt = 0; jt < nmine; jt++) {
        const int64_t t0 = begin + (int64_t)(w + jt * NW) * 16;
        if (jt > 0) {
            copy(t0);
            prefetch(jt + 1);
        }
        {
            float c, s;
            gem_rope_cs(rope.pos0 + t0, rope.inv_freq[lane], &c, &s);
            cs[lane] = make_float2(c, s);
            gem_rope_cs(rope.pos0 + t0, rope.inv_freq[lane + 32], &c, &s);
            cs[lane + 32] = make_float2(c, s);
        }
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        __syncwarp();
        float sa[2][3][4]; /* k-step parity x (big big, big small, small big) */
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int pc = 0; pc < 3; pc++)
                sa[u][pc][0] = sa[u][pc][1] = sa[u][pc][2] = sa[u][pc][3] = 0.f;
        /* the rotating quads k and their partners k + 16 */
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int lq = 4 * (((4 * k + tig) ^ swg)), hq = 4 * (((4 * (k + 16) + tig) ^ swg));
            const float *const ea = LEAN ? (k & 1 ? rao : rae) + 16 * k : ra + lq;
            const float *const eb = LEAN ? (k & 1 ? rbo : rbe) + 16 * k : rb + lq;
            const float *const fa = LEAN ? (k & 1 ? rao : rae) + 16 * (k + 16) : ra + hq;
            const float *const fb = LEAN ? (k & 1 ? rbo : rbe) + 16 * (k + 16) : rb + hq;
            const float4 l0 = *reinterpret_cast<const float4 *>(ea),
                         l1 = *reinterpret_cast<const float4 *>(eb),
                         h0 = *reinterpret_cast<const float4 *>(fa),
                         h1 = *reinterpret_cast<const float4 *>(fb);
            const float vl[2][4] = {{l0.x, l0.y, l0.z, l0.w}, {l1.x, l1.y, l1.z, l1.w}};
            const float vh[2][4] = {{h0.x, h0.y, h0.z, h0.w}, {h1.x, h1.y, h1.z, h1.w}};
            const int j0 = 16 * k + 4 * tig;
            float al[4], ah[4], kl[2][4], kh[2][4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float2 c = cs[j0 + e], qq = sqr[grp * NPAIRS + j0 + e];
                al[e] = fmaf(qq.x, c.x, qq.y * c.y);     /* RoPE_{-P}(q), head grp */
                ah[e] = fmaf(qq.y, c.x, -(qq.x * c.y));
#pragma unroll
                for (int x = 0; x < 2; x++) { /* RoPE_u(w V), token grp + 8 x */
                    const float4 k4 = SCOEF ? scf[((x * 4 + k) * 4 + e) * 32 + lane]
                                            : __ldg(coef + (grp + 8 * x) * NPAIRS + j0 + e);
                    kl[x][e] = fmaf(k4.x, vl[x][e], -(k4.y * vh[x][e]));
                    kh[x][e] = fmaf(k4.z, vl[x][e], k4.w * vh[x][e]);
                }
            }
            gem_mma_tf32x3(sa[0], kl[0][0], kl[1][0], kl[0][1], kl[1][1], al[0], al[1]);
            gem_mma_tf32x3(sa[1], kl[0][2], kl[1][2], kl[0][3], kl[1][3], al[2], al[3]);
            gem_mma_tf32x3(sa[0], kh[0][0], kh[1][0], kh[0][1], kh[1][1], ah[0], ah[1]);
            gem_mma_tf32x3(sa[1], kh[0][2], kh[1][2], kh[0][3], kh[1][3], ah[2], ah[3]);
        }
        /* the quads that do not rotate: k-steps 2k, 2k + 1 */
#pragma unroll
        for (int kq = 0; kq < 24; kq++) {
            const int k = kq < 12 ? kq + 4 : kq + 8;
            const int aq = 4 * ((4 * k + tig) ^ swg), bq = 4 * ((4 * kq + tig) ^ swg);
            const float4 a0 = *reinterpret_cast<const float4 *>(
                             LEAN ? (k & 1 ? rao : rae) + 16 * k : ra + aq),
                         a1 = *reinterpret_cast<const float4 *>(
                             LEAN ? (k & 1 ? rbo : rbe) + 16 * k : rb + aq),
                         b = *reinterpret_cast<const float4 *>(
                             LEAN ? (kq & 1 ? qbo : qbe) + 16 * kq : qb + bq),
                         bs = *reinterpret_cast<const float4 *>(
                             LEAN ? (kq & 1 ? qso : qse) + 16 * kq : qs + bq);
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
            gem_mma_tf32(sa[0][1], ab[0], ab[1], ab[2], ab[3], __float_as_uint(bs.x), __float_as_uint(bs.y));
            gem_mma_tf32(sa[0][2], as[0], as[1], as[2], as[3], b0, b1);
            gem_mma_tf32(sa[1][0], ab[4], ab[5], ab[6], ab[7], b2, b3);
            gem_mma_tf32(sa[1][1], ab[4], ab[5], ab[6], ab[7], __float_as_uint(bs.z), __float_as_uint(bs.w));
            gem_mma_tf32(sa[1][2], as[4], as[5], as[6], as[7], b2, b3);
        }
        float sv[4];
#pragma unroll
        for (int r = 0; r < 4; r++)
            sv[r] = ((sa[0][0][r] + sa[1][0][r]) + ((sa[0][1][r] + sa[1][1][r]) +
                                                    (sa[0][2][r] + sa[1][2][r]))) *
                    scale;
        /* the online softmax (the library's), the weights into sp for the B layout */
        float al0, al1;
        gem_kfv_tile_softmax(sv, t0, end, m0, m1, s0, s1, al0, al1, sp, grp, tig);
        uint32_t pb[4], pls[4];
#pragma unroll
        for (int u = 0; u < 4; u++) /* tokens tig, tig + 4, tig + 8, tig + 12 */
            gem_tf32_split(sp[(tig + 4 * u) * GROUP + grp], pb[u], pls[u]);
        if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) {
#pragma unroll
            for (int mt = 0; mt < 32; mt++) {
                o[mt][0] *= al0;
                o[mt][1] *= al1;
                o[mt][2] *= al0;
                o[mt][3] *= al1;
            }
        }
        /* the V update: quads 8k + grp of tokens tig + 4u */
#pragma unroll
        for (int k = 0; k < 16; k++) {
            const int vq = 4 * ((8 * k + grp) ^ swt);
            float4 vv[4];
#pragma unroll
            for (int u = 0; u < 4; u++)
                vv[u] = *reinterpret_cast<const float4 *>(
                    LEAN ? vbase + 4 * u * D + 32 * k : mine + (tig + 4 * u) * D + vq);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint32_t ab[8], as[8]; /* ks 0: tokens tig, tig + 4; ks 1: + 8, + 12 */
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    gem_tf32_split(h ? vv[u].z : vv[u].x, ab[2 * u], as[2 * u]);
                    gem_tf32_split(h ? vv[u].w : vv[u].y, ab[2 * u + 1], as[2 * u + 1]);
                }
                float *acc = o[2 * k + h];
                gem_mma_tf32(acc, ab[0], ab[1], ab[2], ab[3], pb[0], pb[1]);
                gem_mma_tf32(acc, ab[0], ab[1], ab[2], ab[3], pls[0], pls[1]);
                gem_mma_tf32(acc, as[0], as[1], as[2], as[3], pb[0], pb[1]);
                gem_mma_tf32(acc, ab[4], ab[5], ab[6], ab[7], pb[2], pb[3]);
                gem_mma_tf32(acc, ab[4], ab[5], ab[6], ab[7], pls[2], pls[3]);
                gem_mma_tf32(acc, as[4], as[5], as[6], as[7], pb[2], pb[3]);
            }
        }
        __syncwarp(); /* every lane is past the stage, sp and cs before they are rewritten */
    }

    /* the block's merge (gem_kfv_warp_merge's, with this O^T's dims: m-tile 2k + h, row grp
     * is dim 32k + 4 grp + 2h, row grp + 8 the next) */
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();
    float *const so = stiles;                   /* [w][8 heads][512] */
    float *const smm = so + (size_t)NW * GROUP * D; /* [w][8] */
    float *const sss = smm + NW * GROUP;
    float *ow = so + (size_t)w * GROUP * D;
#pragma unroll
    for (int mt = 0; mt < 32; mt++) {
        const int d = 32 * (mt >> 1) + 4 * grp + 2 * (mt & 1);
        ow[(2 * tig) * D + d] = o[mt][0];
        ow[(2 * tig + 1) * D + d] = o[mt][1];
        ow[(2 * tig) * D + d + 1] = o[mt][2];
        ow[(2 * tig + 1) * D + d + 1] = o[mt][3];
    }
    if (grp == 0) {
        smm[w * GROUP + 2 * tig] = m0;
        smm[w * GROUP + 2 * tig + 1] = m1;
        sss[w * GROUP + 2 * tig] = s0;
        sss[w * GROUP + 2 * tig + 1] = s1;
    }
    __syncthreads();
    for (int i = tid; i < GROUP * D; i += 32 * NW) {
        const int h = i / D, d = i % D;
        float M = -INFINITY;
        for (int ww = 0; ww < NW; ww++)
            M = fmaxf(M, smm[ww * GROUP + h]);
        float O = 0.f, S = 0.f;
        for (int ww = 0; ww < NW; ww++) {
            const float mw = smm[ww * GROUP + h];
            const float f = mw == -INFINITY ? 0.f : expf(mw - M);
            O += so[((size_t)ww * GROUP + h) * D + d] * f;
            S += sss[ww * GROUP + h] * f;
        }
        const int64_t row = p * n_q_heads + g * GROUP + h;
        part_o[row * D + d] = O;
        if (d == 0) {
            part_m[row] = M;
            part_s[row] = S;
        }
    }
}

extern "C" __global__ void __launch_bounds__(160, 1)
    kfv_tf32_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                        const __grid_constant__ gem_cu_rope rope, const float *__restrict__ v,
                        int64_t hs, int64_t ts, float *__restrict__ part_m,
                        float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,
                        int64_t partitions, int64_t n_q_heads, float scale)
{
    kfv_tf32_body<5, true>(q, kw, rope, nullptr, v, hs, ts, part_m, part_s, part_o, live,
                           partitions, n_q_heads, scale);
}

extern "C" __global__ void __launch_bounds__(192, 1)
    kfv_tf32g_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                         const __grid_constant__ gem_cu_rope rope, const float4 *__restrict__ coef,
                         const float *__restrict__ v, int64_t hs, int64_t ts,
                         float *__restrict__ part_m, float *__restrict__ part_s,
                         float *__restrict__ part_o, int64_t live, int64_t partitions,
                         int64_t n_q_heads, float scale)
{
    kfv_tf32_body<6, false>(q, kw, rope, coef, v, hs, ts, part_m, part_s, part_o, live,
                            partitions, n_q_heads, scale);
}

/* ---- version 27: version 26 on pairs of warps that share a tile -----------------------------
Versions 24-26 hold five or six warps an SM (a 32 KiB stage each), and ncu finds version 24
waiting on its own dependences: 1.25 warps a scheduler, 0.37 of them eligible a cycle. Here two
warps share each stage, so ten fit: warp h (0, 1) of a pair copies rows 8h .. 8h + 7 of the
tile, takes the scores over half the dims (rotating quads 2h, 2h + 1 and their partners, and
the 12 quads 12h .. 12h + 11 of those that do not rotate), and after the pair's partial scores
meet in shared memory (both warps add them in the same order, so both hold the same bits), both
run the same online softmax and each updates O^T over its 256 dims (quads 8k + grp, k = 8h ..
8h + 7: 64 registers a lane). Three 64-thread barriers a tile: the tile landed, the partial
scores written, the stage free again. The merge at the end takes the pairs in order. Five
pairs a block (320 threads), the table in shared memory. For --partitions 33.
*/
#define V27_PAIRS 5
#define V27_SHARED                                                                              \
    ((size_t)V27_PAIRS * V24_STAGE * 4 + (size_t)2 * V24_QNR * 4 + (size_t)GROUP * NPAIRS * 8 + \
     (size_t)V27_PAIRS * 2 * (16 * GROUP * 4 + 32 * 8 + 32 * 16) + (size_t)16 * NPAIRS * 16)

__device__ __forceinline__ void v27_pair_sync(int pair)
{
    asm volatile("bar.sync %0, 64;\n" ::"r"(pair + 1) : "memory");
}

/* LEAN2 (version 28): the barriers' ids immediate (one per pair), and the half's offsets folded
 * into its base pointers, so every shared load is a base and an immediate offset */
template <int ID> __device__ __forceinline__ void v28_bar()
{
    asm volatile("bar.sync %0, 64;\n" ::"n"(ID) : "memory");
}
__device__ __forceinline__ void v28_pair_sync(int pair)
{
    switch (pair) {
    case 0: v28_bar<1>(); break;
    case 1: v28_bar<2>(); break;
    case 2: v28_bar<3>(); break;
    case 3: v28_bar<4>(); break;
    default: v28_bar<5>(); break;
    }
}

/* MBAR (version 30): a pair meets at its own mbarrier (64 arrivals a phase, in shared memory
 * after the table) instead of a named barrier: version 28's coupling, through a primitive whose
 * arrive releases and whose wait acquires the pair's shared-memory writes */
__device__ __forceinline__ void v30_pair_sync(uint32_t bar, uint32_t &phase)
{
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar)
                 : "memory");
    uint32_t done = 0;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(phase)
                     : "memory");
    } while (!done);
    phase ^= 1u;
}

/* SYNC0 (version 29): the pairs meet at the block's barrier (bar.sync 0) instead, every pair
 * running the same number of iterations (those past its tiles empty), since racecheck reports
 * hazards across the block's __syncthreads in versions 27 and 28 */
template <bool LEAN2, bool SYNC0 = false, bool MBAR = false, bool INVAL = false, int PF = 1>
__device__ __forceinline__ void kfv_tf32_pair_body(const float *__restrict__ q, const float *__restrict__ kw,
                             const gem_cu_rope &rope,
                             const float *__restrict__ v, int64_t hs, int64_t ts,
                             float *__restrict__ part_m, float *__restrict__ part_s,
                             float *__restrict__ part_o, int64_t live, int64_t partitions,
                             int64_t n_q_heads, float scale)
{
    const int NPR = V27_PAIRS;
    extern __shared__ __align__(128) unsigned char v27_sm[];
    float *const stiles = reinterpret_cast<float *>(v27_sm); /* [pair][16][512], swizzled */
    float *const sqb = stiles + (size_t)NPR * V24_STAGE;
    float *const sqs = sqb + V24_QNR;
    float2 *const sqr = reinterpret_cast<float2 *>(sqs + V24_QNR); /* [8][64] */
    float *const spt = reinterpret_cast<float *>(sqr + GROUP * NPAIRS); /* [w][16][8] */
    float2 *const scs = reinterpret_cast<float2 *>(spt + 2 * NPR * 16 * GROUP); /* [w][32] */
    float4 *const sx = reinterpret_cast<float4 *>(scs + 2 * NPR * 32); /* [w][32]: partials */
    float4 *const scf = sx + 2 * NPR * 32; /* [2][4][4][32] */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int pr = w >> 1, h = w & 1;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + 15) / 16;
    const int nmine = ntiles > pr ? (int)((ntiles - pr + NPR - 1) / NPR) : 0;
    const int nall = (int)((ntiles + NPR - 1) / NPR); /* pair 0's count */
    const float *const vg = v + g * hs;
    float *const stage = stiles + (size_t)pr * V24_STAGE;
    uint64_t *const sbar = reinterpret_cast<uint64_t *>(scf + 16 * NPAIRS); /* MBAR: [pair] */
    const uint32_t bar = gem_smem_addr(sbar + pr);
    uint32_t phase = 0;
    if (MBAR && tid < NPR)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 64;\n" ::"r"(gem_smem_addr(sbar + tid))
                     : "memory");
    auto sync = [&]() {
        if (MBAR)
            v30_pair_sync(bar, phase);
        else if (SYNC0)
            __syncthreads();
        else if (LEAN2)
            v28_pair_sync(pr);
        else
            v27_pair_sync(pr);
    };

    auto copy = [&](int64_t t0) { /* rows 8h .. 8h + 7 */
        if (t0 + 16 <= end) {
            const float *src = vg + (t0 + 8 * h) * ts + 4 * lane;
#pragma unroll
            for (int r = 0; r < 8; r++, src += ts) {
                float *dst = stage + (8 * h + r) * D + 4 * (lane ^ gem_tf32_swz(r));
#pragma unroll
                for (int i = 0; i < 4; i++)
                    gem_cp16(dst + 128 * i, src + 128 * i);
            }
        } else {
            for (int r = 8 * h; r < 8 * h + 8; r++) {
                const bool in = t0 + r < end;
                const float *src = vg + (in ? t0 + r : begin) * ts + 4 * lane;
                float *dst = stage + r * D;
                const int sw = gem_tf32_swz(r);
#pragma unroll
                for (int i = 0; i < 4; i++)
                    gem_cp16_zfill(dst + 4 * ((lane + 32 * i) ^ sw), src + 128 * i, in ? 16 : 0);
            }
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    auto prefetch = [&](int j) {
        if (j < nmine) {
            const int64_t t0 = begin + (int64_t)(pr + j * NPR) * 16 + 8 * h;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t t = t0 + 2 * i + (lane >> 4);
                if (t < end)
                    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(vg + t * ts + 32 * (lane & 15)));
            }
        }
    };
    if (nmine > 0) {
        copy(begin + (int64_t)pr * 16);
        if (PF != 0)
            prefetch(1);
    }

    const float *qg = q + g * GROUP * D;
    for (int i = tid; i < GROUP * 384; i += 64 * NPR) {
        const int hd = i / 384, x = i % 384, d = x < 192 ? 64 + x : 128 + x;
        const int kq = (d >> 4) - (d < 256 ? 4 : 8), t4 = (d >> 2) & 3;
        const int at = hd * 384 + 4 * ((4 * kq + t4) ^ gem_tf32_swz(hd)) + (d & 3);
        uint32_t b, s;
        gem_tf32_split(__ldg(qg + hd * D + d) * __ldg(kw + d), b, s);
        sqb[at] = __uint_as_float(b);
        sqs[at] = __uint_as_float(s);
    }
    for (int i = tid; i < GROUP * NPAIRS; i += 64 * NPR) {
        const int hd = i / NPAIRS, j = i % NPAIRS;
        sqr[i] = make_float2(__ldg(qg + hd * D + j), __ldg(qg + hd * D + 256 + j));
    }
    for (int i = tid; i < 16 * NPAIRS; i += 64 * NPR) {
        const int ln = i & 31, e = (i >> 5) & 3, k = (i >> 7) & 3, x = i >> 9;
        const int u = (ln >> 2) + 8 * x, j = 16 * k + 4 * (ln & 3) + e;
        float c, s;
        gem_rope_cs(u, rope.inv_freq[j], &c, &s);
        const float wl = __ldg(kw + j), wh = __ldg(kw + 256 + j);
        scf[i] = make_float4(wl * c, wh * s, wl * s, wh * c);
    }
    __syncthreads();

    float o[16][4]; /* m-tiles 2k + hh of k = 8h .. 8h + 7 */
#pragma unroll
    for (int mt = 0; mt < 16; mt++)
        o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, s0 = 0.f, s1 = 0.f;
    float *const sp = spt + (size_t)w * 16 * GROUP;
    float2 *const cs = scs + (size_t)w * 32; /* pairs 32h .. 32h + 31 */
    float4 *const xmine = sx + (size_t)w * 32, *const xother = sx + (size_t)(w ^ 1) * 32;
    const int swg = gem_tf32_swz(grp), swt = gem_tf32_swz(tig);
    const int lo = 4 * (tig ^ (swg & 3)), s2 = 16 * (swg >> 2);
    const float *const rae = stage + grp * D + lo + s2, *const rao = stage + grp * D + lo - s2;
    const float *const rbe = rae + 8 * D, *const rbo = rao + 8 * D;
    const float *const qbe = sqb + grp * 384 + lo + s2, *const qbo = sqb + grp * 384 + lo - s2;
    const float *const qse = sqs + grp * 384 + lo + s2, *const qso = sqs + grp * 384 + lo - s2;
    const float *const vbase = stage + tig * D + 4 * (grp ^ swt) + 256 * h;
    /* LEAN2: quad k = 2h + kk of the rotating ones, k = (h ? 20 : 4) + kx of the others, kq =
     * 12h + kx of Q's */
    const int rot0 = 32 * h, nr0 = 16 * (h ? 20 : 4), q0 = 16 * 12 * h;
    const float *const hrae = rae + nr0, *const hrao = rao + nr0, *const hrbe = rbe + nr0,
                      *const hrbo = rbo + nr0;
    const float *const hqbe = qbe + q0, *const hqbo = qbo + q0, *const hqse = qse + q0,
                      *const hqso = qso + q0;
    const float2 *const hqr = sqr + grp * NPAIRS + rot0 + 4 * tig;
    const float4 *const hcf = scf + 2 * h * 4 * 32 + lane;
    const float *const rrae = rae + 32 * h, *const rrao = rao + 32 * h, *const rrbe = rbe + 32 * h,
                      *const rrbo = rbo + 32 * h;
    for (int jt = 0; jt < (SYNC0 ? nall : nmine); jt++) {
        const int64_t t0 = begin + (int64_t)(pr + jt * NPR) * 16;
        if (jt > 0) {
            sync(); /* both warps are past the stage */
            if (!SYNC0 || jt < nmine) {
                copy(t0);
                if (PF == 1)
                    prefetch(jt + 1);
            }
        }
        if (SYNC0 && jt >= nmine) { /* the block's barriers of an iteration past own tiles */
            __syncthreads();
            __syncthreads();
            continue;
        }
        {
            float c, s;
            gem_rope_cs(rope.pos0 + t0, rope.inv_freq[32 * h + lane], &c, &s);
            cs[lane] = make_float2(c, s);
        }
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        sync(); /* both halves of the tile have landed; cs written */
        float sa[2][3][4];
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int pc = 0; pc < 3; pc++)
                sa[u][pc][0] = sa[u][pc][1] = sa[u][pc][2] = sa[u][pc][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            const int k = 2 * h + kk; /* parity kk */
            const float *const ea = LEAN2 ? (kk ? rrao : rrae) + 16 * kk : (kk ? rao : rae) + 16 * k,
                        *const eb = LEAN2 ? (kk ? rrbo : rrbe) + 16 * kk : (kk ? rbo : rbe) + 16 * k;
            const float4 l0 = *reinterpret_cast<const float4 *>(ea),
                         l1 = *reinterpret_cast<const float4 *>(eb),
                         h0 = *reinterpret_cast<const float4 *>(ea + 256),
                         h1 = *reinterpret_cast<const float4 *>(eb + 256);
            const float vl[2][4] = {{l0.x, l0.y, l0.z, l0.w}, {l1.x, l1.y, l1.z, l1.w}};
            const float vh[2][4] = {{h0.x, h0.y, h0.z, h0.w}, {h1.x, h1.y, h1.z, h1.w}};
            const int j0 = 16 * k + 4 * tig;
            float al[4], ah[4], kl[2][4], kh[2][4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float2 c = cs[16 * kk + 4 * tig + e],
                             qq = LEAN2 ? hqr[16 * kk + e] : sqr[grp * NPAIRS + j0 + e];
                al[e] = fmaf(qq.x, c.x, qq.y * c.y);
                ah[e] = fmaf(qq.y, c.x, -(qq.x * c.y));
#pragma unroll
                for (int x = 0; x < 2; x++) {
                    const float4 k4 = LEAN2 ? hcf[((x * 4 + kk) * 4 + e) * 32]
                                            : scf[((x * 4 + k) * 4 + e) * 32 + lane];
                    kl[x][e] = fmaf(k4.x, vl[x][e], -(k4.y * vh[x][e]));
                    kh[x][e] = fmaf(k4.z, vl[x][e], k4.w * vh[x][e]);
                }
            }
            gem_mma_tf32x3(sa[0], kl[0][0], kl[1][0], kl[0][1], kl[1][1], al[0], al[1]);
            gem_mma_tf32x3(sa[1], kl[0][2], kl[1][2], kl[0][3], kl[1][3], al[2], al[3]);
            gem_mma_tf32x3(sa[0], kh[0][0], kh[1][0], kh[0][1], kh[1][1], ah[0], ah[1]);
            gem_mma_tf32x3(sa[1], kh[0][2], kh[1][2], kh[0][3], kh[1][3], ah[2], ah[3]);
        }
#pragma unroll
        for (int kx = 0; kx < 12; kx++) {
            const int kq = 12 * h + kx, k = kq < 12 ? kq + 4 : kq + 8; /* kq & 1 == k & 1 */
            const float4 a0 = *reinterpret_cast<const float4 *>(
                             LEAN2 ? (kx & 1 ? hrao : hrae) + 16 * kx : (kx & 1 ? rao : rae) + 16 * k),
                         a1 = *reinterpret_cast<const float4 *>(
                             LEAN2 ? (kx & 1 ? hrbo : hrbe) + 16 * kx : (kx & 1 ? rbo : rbe) + 16 * k),
                         b = *reinterpret_cast<const float4 *>(
                             LEAN2 ? (kx & 1 ? hqbo : hqbe) + 16 * kx : (kx & 1 ? qbo : qbe) + 16 * kq),
                         bs = *reinterpret_cast<const float4 *>(
                             LEAN2 ? (kx & 1 ? hqso : hqse) + 16 * kx : (kx & 1 ? qso : qse) + 16 * kq);
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
            gem_mma_tf32(sa[0][1], ab[0], ab[1], ab[2], ab[3], __float_as_uint(bs.x), __float_as_uint(bs.y));
            gem_mma_tf32(sa[0][2], as[0], as[1], as[2], as[3], b0, b1);
            gem_mma_tf32(sa[1][0], ab[4], ab[5], ab[6], ab[7], b2, b3);
            gem_mma_tf32(sa[1][1], ab[4], ab[5], ab[6], ab[7], __float_as_uint(bs.z), __float_as_uint(bs.w));
            gem_mma_tf32(sa[1][2], as[4], as[5], as[6], as[7], b2, b3);
        }
        float part[4];
#pragma unroll
        for (int r = 0; r < 4; r++)
            part[r] = (sa[0][0][r] + sa[1][0][r]) + ((sa[0][1][r] + sa[1][1][r]) +
                                                    (sa[0][2][r] + sa[1][2][r]));
        xmine[lane] = make_float4(part[0], part[1], part[2], part[3]);
        sync(); /* both partials written */
        if (PF == 2) /* the next tile asked of the L2 only now */
            prefetch(jt + 1);
        const float4 xo = xother[lane];
        const float oth[4] = {xo.x, xo.y, xo.z, xo.w};
        float sv[4];
#pragma unroll
        for (int r = 0; r < 4; r++) /* half 0's partial first in both warps */
            sv[r] = (h ? oth[r] + part[r] : part[r] + oth[r]) * scale;
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
        const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        const float al0 = expf(m0 - mn0), al1 = expf(m1 - mn1);
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
        *reinterpret_cast<float2 *>(sp + grp * GROUP + 2 * tig) = make_float2(e0, e1);
        *reinterpret_cast<float2 *>(sp + (grp + 8) * GROUP + 2 * tig) = make_float2(e2, e3);
        __syncwarp();
        uint32_t pb[4], pls[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            gem_tf32_split(sp[(tig + 4 * u) * GROUP + grp], pb[u], pls[u]);
        if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) {
#pragma unroll
            for (int mt = 0; mt < 16; mt++) {
                o[mt][0] *= al0;
                o[mt][1] *= al1;
                o[mt][2] *= al0;
                o[mt][3] *= al1;
            }
        }
#pragma unroll
        for (int k = 0; k < 8; k++) { /* quads 8 (8h + k) + grp */
            float4 vv[4];
#pragma unroll
            for (int u = 0; u < 4; u++)
                vv[u] = *reinterpret_cast<const float4 *>(vbase + 4 * u * D + 32 * k);
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                uint32_t ab[8], as[8];
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

    /* the merge over the pairs in order: pair pr's O (half h: dims 256h + 32k + 4 grp + 2hh) */
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();
    if (MBAR && INVAL && tid < NPR) /* version 33: every pair is past its mbarrier */
        asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(gem_smem_addr(sbar + tid))
                     : "memory");
    float *const so = stiles;                        /* [pair][8 heads][512] */
    float *const smm = so + (size_t)NPR * GROUP * D; /* [pair][8] */
    float *const sss = smm + NPR * GROUP;
    float *ow = so + (size_t)pr * GROUP * D;
#pragma unroll
    for (int mt = 0; mt < 16; mt++) {
        const int d = 256 * h + 32 * (mt >> 1) + 4 * grp + 2 * (mt & 1);
        ow[(2 * tig) * D + d] = o[mt][0];
        ow[(2 * tig + 1) * D + d] = o[mt][1];
        ow[(2 * tig) * D + d + 1] = o[mt][2];
        ow[(2 * tig + 1) * D + d + 1] = o[mt][3];
    }
    if (grp == 0 && h == 0) {
        smm[pr * GROUP + 2 * tig] = m0;
        smm[pr * GROUP + 2 * tig + 1] = m1;
        sss[pr * GROUP + 2 * tig] = s0;
        sss[pr * GROUP + 2 * tig + 1] = s1;
    }
    __syncthreads();
    for (int i = tid; i < GROUP * D; i += 64 * NPR) {
        const int hd = i / D, d = i % D;
        float M = -INFINITY;
        for (int pp = 0; pp < NPR; pp++)
            M = fmaxf(M, smm[pp * GROUP + hd]);
        float O = 0.f, S = 0.f;
        for (int pp = 0; pp < NPR; pp++) {
            const float mw = smm[pp * GROUP + hd];
            const float f = mw == -INFINITY ? 0.f : expf(mw - M);
            O += so[((size_t)pp * GROUP + hd) * D + d] * f;
            S += sss[pp * GROUP + hd] * f;
        }
        const int64_t row = p * n_q_heads + g * GROUP + hd;
        part_o[row * D + d] = O;
        if (d == 0) {
            part_m[row] = M;
            part_s[row] = S;
        }
    }
}

extern "C" __global__ void __launch_bounds__(64 * V27_PAIRS, 1)
    kfv_tf32_pair_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                             const __grid_constant__ gem_cu_rope rope,
                             const float *__restrict__ v, int64_t hs, int64_t ts,
                             float *__restrict__ part_m, float *__restrict__ part_s,
                             float *__restrict__ part_o, int64_t live, int64_t partitions,
                             int64_t n_q_heads, float scale)
{
    kfv_tf32_pair_body<false>(q, kw, rope, v, hs, ts, part_m, part_s, part_o, live, partitions,
                              n_q_heads, scale);
}

/* ---- version 30: version 28 with an mbarrier a pair (MBAR above) ----------------------------
Run 124 and 125: version 28's named barriers take 9% less time than version 29's block-wide
ones, but racecheck reports hazards with them across the block's __syncthreads. An mbarrier a
pair keeps version 28's coupling (each pair on its own) with a primitive whose arrive releases
and whose wait acquires, which racecheck may follow. Not yet run. */
#define V30_SHARED (V27_SHARED + 64)
extern "C" __global__ void __launch_bounds__(64 * V27_PAIRS, 1)
    kfv_tf32_pair_mbar_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                                  const __grid_constant__ gem_cu_rope rope,
                                  const float *__restrict__ v, int64_t hs, int64_t ts,
                                  float *__restrict__ part_m, float *__restrict__ part_s,
                                  float *__restrict__ part_o, int64_t live, int64_t partitions,
                                  int64_t n_q_heads, float scale)
{
    kfv_tf32_pair_body<true, false, true>(q, kw, rope, v, hs, ts, part_m, part_s, part_o, live,
                                          partitions, n_q_heads, scale);
}

/* ---- version 33: version 30 with its mbarriers invalidated once the pairs are done --------
Run 130 put version 30's racecheck hazards at its mbarriers' word in blocks without tiles,
where the pairs initialise their mbarriers and never arrive; mbarrier.inval ends their lives
before the block does. */
extern "C" __global__ void __launch_bounds__(64 * V27_PAIRS, 1)
    kfv_tf32_pair_mbar_inval_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                                        const __grid_constant__ gem_cu_rope rope,
                                        const float *__restrict__ v, int64_t hs, int64_t ts,
                                        float *__restrict__ part_m, float *__restrict__ part_s,
                                        float *__restrict__ part_o, int64_t live,
                                        int64_t partitions, int64_t n_q_heads, float scale)
{
    kfv_tf32_pair_body<true, false, true, true>(q, kw, rope, v, hs, ts, part_m, part_s, part_o,
                                                live, partitions, n_q_heads, scale);
}

/* ---- versions 34 and 35: version 30 with the next tile asked of the L2 never (34) or after the
tile's scores instead of before them (35) ------------------------------------------------------
Run 137: ncu counted DRAM at 81.6% of its peak during the library's pass (version 30's form),
about 1.3 GB for the 1.07 GB of V at 128K. If the L2 drops prefetched rows before the copies
read them, fewer rows waiting in the L2 would read less. Not yet run. */
template <int PF>
__global__ void __launch_bounds__(64 * V27_PAIRS, 1)
    kfv_tf32_pair_mbar_pf_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                                     const __grid_constant__ gem_cu_rope rope,
                                     const float *__restrict__ v, int64_t hs, int64_t ts,
                                     float *__restrict__ part_m, float *__restrict__ part_s,
                                     float *__restrict__ part_o, int64_t live, int64_t partitions,
                                     int64_t n_q_heads, float scale)
{
    kfv_tf32_pair_body<true, false, true, false, PF>(q, kw, rope, v, hs, ts, part_m, part_s,
                                                     part_o, live, partitions, n_q_heads, scale);
}

/* ---- version 29: version 28 with the block's barrier (SYNC0 above) ------------------------- */
extern "C" __global__ void __launch_bounds__(64 * V27_PAIRS, 1)
    kfv_tf32_pair_sync0_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                                   const __grid_constant__ gem_cu_rope rope,
                                   const float *__restrict__ v, int64_t hs, int64_t ts,
                                   float *__restrict__ part_m, float *__restrict__ part_s,
                                   float *__restrict__ part_o, int64_t live, int64_t partitions,
                                   int64_t n_q_heads, float scale)
{
    kfv_tf32_pair_body<true, true>(q, kw, rope, v, hs, ts, part_m, part_s, part_o, live,
                                   partitions, n_q_heads, scale);
}

/* ---- version 28: version 27 with immediate barrier ids and offsets (LEAN2 above) ---------- */
extern "C" __global__ void __launch_bounds__(64 * V27_PAIRS, 1)
    kfv_tf32_pair_lean_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                                  const __grid_constant__ gem_cu_rope rope,
                                  const float *__restrict__ v, int64_t hs, int64_t ts,
                                  float *__restrict__ part_m, float *__restrict__ part_s,
                                  float *__restrict__ part_o, int64_t live, int64_t partitions,
                                  int64_t n_q_heads, float scale)
{
    kfv_tf32_pair_body<true>(q, kw, rope, v, hs, ts, part_m, part_s, part_o, live, partitions,
                             n_q_heads, scale);
}

extern "C" __global__ void __launch_bounds__(160, 1)
    kfv_tf32_lean_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                             const __grid_constant__ gem_cu_rope rope, const float *__restrict__ v,
                             int64_t hs, int64_t ts, float *__restrict__ part_m,
                             float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,
                             int64_t partitions, int64_t n_q_heads, float scale)
{
    kfv_tf32_body<5, true, true>(q, kw, rope, nullptr, v, hs, ts, part_m, part_s, part_o, live,
                                 partitions, n_q_heads, scale);
}

/* ---- version 31: the BF16 pass (version 23, the library's) on pairs of warps -----------------
Versions 27-29 took the F32 pass from 0.3675 to 0.3201 / 0.3508 ms at 128K by letting two warps
share each tile (half the scores' dims and half of O each), so that ten warps fit an SM where
five did. The BF16 pass (version 23 and the library's long pass) is bound by its own
dependences at eight warps an SM with 254 registers, 128 of them O. Here: three pairs a block,
two blocks an SM (twelve warps), the default 64 partitions in one wave:
  - warp h of a pair copies rows 8h .. 8h + 7 of the pair's stage (16 rows of GEM_MMA_ROW) by
    cp.async, from the L2, where it asked for them during the tile before;
  - scores: the 12 k-steps 12h .. 12h + 11 of the 24 that do not rotate (Q's three pieces, as
    the library's pass), the rotating blocks 2h, 2h + 1 on the F64 tensor cores (the same rule),
    the warp's 32 angles; the pair's partial sums meet in shared memory and both warps add them
    in the same order (half 0's first);
  - the softmax (gem_kfv_tile_softmax) in both warps; each warp's V update takes the m-tiles
    16h .. 16h + 15 (dims 256h .. 256h + 255): O^T in 64 registers a lane;
  - the pairs meet at the block's barrier three times a tile (every pair the same number of
    iterations) or, MBAR, at an mbarrier a pair (version 30's);
  - at the end the pairs merge in pair order.
Not yet run. */
#define V31_PAIRS 3
#define V31_STAGE (16 * GEM_MMA_ROW) /* elements of a pair's stage */
#define V31_SHARED                                                                              \
    ((size_t)3 * GROUP * V21_QROW * 2 + (size_t)V31_PAIRS * V31_STAGE * 2 +                     \
     (size_t)2 * V31_PAIRS * (16 * GROUP * 4 + 32 * 8 + 32 * 16) + (size_t)GROUP * NPAIRS * 8 + \
     (size_t)16 * NPAIRS * 16 + 64)
static_assert((size_t)V31_PAIRS * (GROUP * D + 2 * GROUP) * 4 <= (size_t)V31_PAIRS * V31_STAGE * 2,
              "the pairs' states meet in their stages");

template <bool MBAR>
__device__ __forceinline__ void kfv_bf16_pair_body(const float *__restrict__ q,
                                                   const float *__restrict__ kw,
                                                   const gem_cu_rope &rope,
                                                   const __nv_bfloat16 *__restrict__ v,
                                                   int64_t hs, int64_t ts,
                                                   float *__restrict__ part_m,
                                                   float *__restrict__ part_s,
                                                   float *__restrict__ part_o, int64_t live,
                                                   int64_t partitions, int64_t n_q_heads,
                                                   float scale)
{
    const int NPR = V31_PAIRS, QROW = V21_QROW;
    extern __shared__ __align__(128) unsigned char v31_sm[];
    unsigned char *smb = v31_sm;
    __nv_bfloat16 *const sq = reinterpret_cast<__nv_bfloat16 *>(smb); /* [3][8][QROW] */
    smb += (size_t)3 * GROUP * QROW * 2;
    __nv_bfloat16 *const stiles = reinterpret_cast<__nv_bfloat16 *>(smb); /* [pair][16][ROW] */
    smb += (size_t)NPR * V31_STAGE * 2;
    float *const spt = reinterpret_cast<float *>(smb); /* [w][16][8] */
    smb += (size_t)2 * NPR * 16 * GROUP * 4;
    float2 *const scs = reinterpret_cast<float2 *>(smb); /* [w][32]: cos, sin of P f_j */
    smb += (size_t)2 * NPR * 32 * 8;
    float4 *const sx = reinterpret_cast<float4 *>(smb); /* [w][32]: partial scores */
    smb += (size_t)2 * NPR * 32 * 16;
    float2 *const sqr = reinterpret_cast<float2 *>(smb); /* [8][64] */
    smb += (size_t)GROUP * NPAIRS * 8;
    float4 *const scf = reinterpret_cast<float4 *>(smb); /* [16][64]: w cos, w sin */
    smb += (size_t)16 * NPAIRS * 16;
    uint64_t *const sbar = reinterpret_cast<uint64_t *>(smb); /* MBAR: [pair] */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, grp = lane >> 2, tig = lane & 3;
    const int pr = w >> 1, h = w & 1;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live), end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + 15) / 16;
    const int nmine = ntiles > pr ? (int)((ntiles - pr + NPR - 1) / NPR) : 0;
    const int nall = (int)((ntiles + NPR - 1) / NPR);
    const __nv_bfloat16 *const vg = v + g * hs;
    __nv_bfloat16 *const stage = stiles + (size_t)pr * V31_STAGE;
    const uint32_t bar = gem_smem_addr(sbar + pr);
    uint32_t phase = 0;
    if (MBAR && tid < NPR)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 64;\n" ::"r"(gem_smem_addr(sbar + tid))
                     : "memory");
    auto sync = [&]() {
        if (MBAR)
            v30_pair_sync(bar, phase);
        else
            __syncthreads();
    };
    auto copy = [&](int64_t t0) { /* rows 8h .. 8h + 7; past end: zeros */
        for (int r = 8 * h; r < 8 * h + 8; r++) {
            const bool in = t0 + r < end;
            const __nv_bfloat16 *src = vg + (in ? t0 + r : begin) * ts + 8 * lane;
            gem_cp16_zfill(stage + r * GEM_MMA_ROW + 8 * lane, src, in ? 16 : 0);
            gem_cp16_zfill(stage + r * GEM_MMA_ROW + 256 + 8 * lane, src + 256, in ? 16 : 0);
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    auto prefetch = [&](int j) {
        if (j < nmine) {
            const int64_t t = begin + (int64_t)(pr + j * NPR) * 16 + 8 * h + (lane >> 3);
#pragma unroll
            for (int i = 0; i < 2; i++)
                if (t + 4 * i < end)
                    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(vg + (t + 4 * i) * ts +
                                                                     64 * (lane & 7)));
        }
    };
    if (nmine > 0) {
        copy(begin + (int64_t)pr * 16);
        prefetch(1);
    }
    for (int i = tid; i < GROUP * 384; i += 64 * NPR) {
        const int hd = i / 384, x = i % 384, d = gem_kfv_step_dim(x / 16) + x % 16;
        __nv_bfloat16 hi, mid, lo;
        split3_bf16(__ldg(q + (g * GROUP + hd) * D + d) * __ldg(kw + d), &hi, &mid, &lo);
        sq[(0 * GROUP + hd) * QROW + x] = hi;
        sq[(1 * GROUP + hd) * QROW + x] = mid;
        sq[(2 * GROUP + hd) * QROW + x] = lo;
    }
    for (int i = tid; i < GROUP * NPAIRS; i += 64 * NPR) {
        const int hd = i / NPAIRS, j = i % NPAIRS;
        const float *qh = q + (g * GROUP + hd) * D;
        sqr[i] = make_float2(__ldg(qh + j), __ldg(qh + 256 + j));
    }
    for (int i = tid; i < 16 * NPAIRS; i += 64 * NPR) { /* version 4's scoef rule */
        const int u = i / NPAIRS, j = i % NPAIRS;
        float c, s;
        gem_rope_cs(u, rope.inv_freq[j], &c, &s);
        const float wl = __ldg(kw + j), wh = __ldg(kw + 256 + j);
        scf[i] = make_float4(wl * c, wh * s, wl * s, wh * c);
    }
    __syncthreads();

    float o[16][4]; /* m-tiles 16h .. 16h + 15: dims 16 mt + grp, + 8 */
#pragma unroll
    for (int mt = 0; mt < 16; mt++)
        o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, s0 = 0.f, s1 = 0.f;
    float *const sp = spt + (size_t)w * 16 * GROUP;
    float2 *const cs = scs + (size_t)w * 32; /* pairs 32h .. 32h + 31 */
    float4 *const xmine = sx + (size_t)w * 32, *const xother = sx + (size_t)(w ^ 1) * 32;
    const int arow = ((lane & 7) + 8 * ((lane >> 3) & 1)) * GEM_MMA_ROW + 8 * (lane >> 4);
    const __nv_bfloat16 *const qrow = sq + (lane & 7) * QROW + 8 * (lane >> 3);
    const int vrow = ((lane & 7) + 8 * (lane >> 4)) * GEM_MMA_ROW + 8 * ((lane >> 3) & 1);
    const float4 *const cf0 = scf + grp * NPAIRS, *const cf1 = scf + (grp + 8) * NPAIRS;
    const float2 *const qr = sqr + grp * NPAIRS;
    for (int jt = 0; jt < (MBAR ? nmine : nall); jt++) {
        const int64_t t0 = begin + (int64_t)(pr + jt * NPR) * 16;
        if (jt > 0) {
            sync(); /* both warps are past the stage */
            if (jt < nmine) {
                copy(t0);
                prefetch(jt + 1);
            }
        }
        if (!MBAR && jt >= nmine) { /* past the pair's tiles: the block's two other barriers */
            __syncthreads();
            __syncthreads();
            continue;
        }
        {
            float c, s;
            gem_rope_cs(rope.pos0 + t0, rope.inv_freq[32 * h + lane], &c, &s);
            cs[lane] = make_float2(c, s);
        }
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        sync(); /* both halves of the tile have landed; cs written */
        float sa[6][4];
#pragma unroll
        for (int u = 0; u < 6; u++)
            sa[u][0] = sa[u][1] = sa[u][2] = sa[u][3] = 0.f;
#pragma unroll
        for (int kx = 0; kx < 12; kx += 2) {
            const int ks = 12 * h + kx;
            uint32_t a[4], a2[4];
            gem_ldsm_x4(a, stage + arow + gem_kfv_step_dim(ks));
            gem_ldsm_x4(a2, stage + arow + gem_kfv_step_dim(ks + 1));
#pragma unroll
            for (int pc = 0; pc < 3; pc++) {
                uint32_t b[4];
                gem_ldsm_x4(b, qrow + pc * GROUP * QROW + 16 * ks);
                gem_mma_bf16(sa[2 * pc], a[0], a[1], a[2], a[3], b[0], b[1]);
                gem_mma_bf16(sa[2 * pc + 1], a2[0], a2[1], a2[2], a2[3], b[2], b[3]);
            }
        }
        double dr[2][2][2] = {{{0.0, 0.0}, {0.0, 0.0}}, {{0.0, 0.0}, {0.0, 0.0}}};
#pragma unroll
        for (int bb = 0; bb < 2; bb++) {
            const int b = 2 * h + bb;
            uint32_t lo[4], hi[4];
            gem_ldsm_x4(lo, stage + arow + 16 * b);
            gem_ldsm_x4(hi, stage + arow + 256 + 16 * b);
#pragma unroll
            for (int f = 0; f < 2; f++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int prr = 16 * b + 2 * tig + e + 8 * f;
                    const float2 c = cs[prr - 32 * h], qq = qr[prr];
                    const double al = fma((double)qq.x, (double)c.x, (double)qq.y * (double)c.y);
                    const double ah = fma((double)qq.y, (double)c.x, -((double)qq.x * (double)c.y));
#pragma unroll
                    for (int x = 0; x < 2; x++) {
                        const float vl = gem_mma_bf16_elem::half_value(lo[x + 2 * f], e);
                        const float vh = gem_mma_bf16_elem::half_value(hi[x + 2 * f], e);
                        const float4 k4 = (x ? cf1 : cf0)[prr];
                        const float kl = fmaf(k4.x, vl, -(k4.y * vh)), kh = fmaf(k4.z, vl, k4.w * vh);
                        gem_dmma(dr[x][e], (double)kl, al);
                        gem_dmma(dr[x][e], (double)kh, ah);
                    }
                }
        }
        float part[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int x = r >> 1, hh = r & 1;
            part[r] = (((sa[0][r] + sa[1][r]) + (sa[2][r] + sa[3][r])) + (sa[4][r] + sa[5][r])) +
                      (float)(dr[x][0][hh] + dr[x][1][hh]);
        }
        xmine[lane] = make_float4(part[0], part[1], part[2], part[3]);
        sync(); /* both partials written */
        const float4 xo = xother[lane];
        const float oth[4] = {xo.x, xo.y, xo.z, xo.w};
        float sv[4];
#pragma unroll
        for (int r = 0; r < 4; r++)
            sv[r] = (h ? oth[r] + part[r] : part[r] + oth[r]) * scale;
        float al0, al1;
        gem_kfv_tile_softmax(sv, t0, end, m0, m1, s0, s1, al0, al1, sp, grp, tig);
        const float pw[4] = {sp[(2 * tig) * GROUP + grp], sp[(2 * tig + 1) * GROUP + grp],
                             sp[(2 * tig + 8) * GROUP + grp], sp[(2 * tig + 9) * GROUP + grp]};
        __nv_bfloat16 ph[4], pl[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            ph[u] = __float2bfloat16_rn(pw[u]);
            pl[u] = __float2bfloat16_rn(pw[u] - __bfloat162float(ph[u]));
        }
        const uint32_t bh0 = gem_pack_bf16(ph[0], ph[1]), bh1 = gem_pack_bf16(ph[2], ph[3]),
                       bl0 = gem_pack_bf16(pl[0], pl[1]), bl1 = gem_pack_bf16(pl[2], pl[3]);
        if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) {
#pragma unroll
            for (int mt = 0; mt < 16; mt++) {
                o[mt][0] *= al0;
                o[mt][1] *= al1;
                o[mt][2] *= al0;
                o[mt][3] *= al1;
            }
        }
#pragma unroll
        for (int mt = 0; mt < 16; mt++) {
            uint32_t a[4];
            gem_ldsm_x4_trans(a, stage + vrow + 16 * (16 * h + mt));
            gem_mma_bf16(o[mt], a[0], a[1], a[2], a[3], bh0, bh1);
            gem_mma_bf16(o[mt], a[0], a[1], a[2], a[3], bl0, bl1);
        }
    }

    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();
    float *const so = reinterpret_cast<float *>(stiles); /* [pair][8 heads][512] */
    float *const smm = so + (size_t)NPR * GROUP * D;
    float *const sss = smm + NPR * GROUP;
    float *ow = so + (size_t)pr * GROUP * D;
#pragma unroll
    for (int mt = 0; mt < 16; mt++) {
        const int d = 16 * (16 * h + mt) + grp;
        ow[(2 * tig) * D + d] = o[mt][0];
        ow[(2 * tig + 1) * D + d] = o[mt][1];
        ow[(2 * tig) * D + d + 8] = o[mt][2];
        ow[(2 * tig + 1) * D + d + 8] = o[mt][3];
    }
    if (grp == 0 && h == 0) {
        smm[pr * GROUP + 2 * tig] = m0;
        smm[pr * GROUP + 2 * tig + 1] = m1;
        sss[pr * GROUP + 2 * tig] = s0;
        sss[pr * GROUP + 2 * tig + 1] = s1;
    }
    __syncthreads();
    for (int i = tid; i < GROUP * D; i += 64 * NPR) {
        const int hd = i / D, d = i % D;
        float M = -INFINITY;
        for (int pp = 0; pp < NPR; pp++)
            M = fmaxf(M, smm[pp * GROUP + hd]);
        float O = 0.f, S = 0.f;
        for (int pp = 0; pp < NPR; pp++) {
            const float mw = smm[pp * GROUP + hd];
            const float f = mw == -INFINITY ? 0.f : expf(mw - M);
            O += so[((size_t)pp * GROUP + hd) * D + d] * f;
            S += sss[pp * GROUP + hd] * f;
        }
        const int64_t row = p * n_q_heads + g * GROUP + hd;
        part_o[row * D + d] = O;
        if (d == 0) {
            part_m[row] = M;
            part_s[row] = S;
        }
    }
}

extern "C" __global__ void __launch_bounds__(64 * V31_PAIRS, 2)
    kfv_bf16_pair_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                             const __grid_constant__ gem_cu_rope rope,
                             const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                             float *__restrict__ part_m, float *__restrict__ part_s,
                             float *__restrict__ part_o, int64_t live, int64_t partitions,
                             int64_t n_q_heads, float scale)
{
    kfv_bf16_pair_body<false>(q, kw, rope, v, hs, ts, part_m, part_s, part_o, live, partitions,
                              n_q_heads, scale);
}

/* ---- version 32: version 31 with an mbarrier a pair (version 30's). Not yet run. ---------- */
extern "C" __global__ void __launch_bounds__(64 * V31_PAIRS, 2)
    kfv_bf16_pair_mbar_first_pass(const float *__restrict__ q, const float *__restrict__ kw,
                                  const __grid_constant__ gem_cu_rope rope,
                                  const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                                  float *__restrict__ part_m, float *__restrict__ part_s,
                                  float *__restrict__ part_o, int64_t live, int64_t partitions,
                                  int64_t n_q_heads, float scale)
{
    kfv_bf16_pair_body<true>(q, kw, rope, v, hs, ts, part_m, part_s, part_o, live, partitions,
                             n_q_heads, scale);
}

/* ---- host: inputs, references, versions ----------------------------------------------------- */


int main(int argc, char **argv)
{
    int vs[20], nv = 0, rounds = 10, f32 = 0;
    int64_t lengths[8] = {8192, 65536, 131072}, pos0 = 0, P = 64;
    int nl = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--f32"))
            f32 = 1;
        else if (!strcmp(argv[i], "--partitions") && i + 1 < argc)
            P = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--pos0") && i + 1 < argc)
            pos0 = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--lengths") && i + 1 < argc) {
            nl = 0;
            for (char *t = strtok(argv[++i], ","); t && nl < 8; t = strtok(NULL, ","))
                lengths[nl++] = atoll(t);
        } else if (nv < 20) {
            vs[nv] = atoi(argv[i]);
            if (vs[nv] < 1 || vs[nv] > 36) {
                fprintf(stderr, "unknown version %s (1 .. 36)\n", argv[i]);
                return 2;
            }
            const bool f32_only =
                vs[nv] == 5 || (vs[nv] >= 24 && vs[nv] <= 30) || (vs[nv] >= 33 && vs[nv] <= 35);
            if ((f32_only && !f32) || (vs[nv] >= 3 && !f32_only && vs[nv] != 10 && f32)) {
                fprintf(stderr, "version %d reads a %s V cache (--f32 goes before the versions)\n",
                        vs[nv], f32_only ? "F32" : "BF16");
                return 2;
            }
            nv++;
        }
    }
    if (nv == 0) {
        const int bf[9] = {1, 2, 3, 4, 6, 7, 8, 9, 11}, fl[3] = {1, 2, 5};
        for (nv = 0; nv < (f32 ? 3 : 9); nv++)
            vs[nv] = f32 ? fl[nv] : bf[nv];
    }
    if (rounds < 1 || pos0 < 0 || P < 1 || P > GEM_DECODE_MAX_PARTITIONS)
        return 2;
    gem_decode_ctx *ctx = NULL;
    if (gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &ctx) != GEM_OK)
        return 2;
    cudaStream_t stream;
    cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    const float scale = 1.0f; /* Gemma 4's QK-normed scale */
    const gem_decode_shape shape = {NQ, NKV, D, D, scale};
    double inv_freq[NPAIRS];
    for (int j = 0; j < NPAIRS; j++)
        inv_freq[j] = pow(1e6, -2.0 * j / (double)D);
    float hw[D];
    fill_uniform(hw, D, 99, 0.5f, 1.5f);
    float *dw;
    cudaCheck(cudaMalloc(&dw, sizeof hw));
    cudaCheck(cudaMemcpy(dw, hw, sizeof hw, cudaMemcpyHostToDevice));
    /* version 21's table: w cos and w sin of offset u (0 .. 15) times f_j, as version 4's */
    float4 hcoef[16 * NPAIRS];
    for (int u = 0; u < 16; u++)
        for (int j = 0; j < NPAIRS; j++) {
            const float c = (float)cos(u * inv_freq[j]), sn = (float)sin(u * inv_freq[j]);
            hcoef[u * NPAIRS + j] = make_float4(hw[j] * c, hw[j + 256] * sn, hw[j] * sn, hw[j + 256] * c);
        }
    float4 *dcoef;
    cudaCheck(cudaMalloc(&dcoef, sizeof hcoef));
    cudaCheck(cudaMemcpy(dcoef, hcoef, sizeof hcoef, cudaMemcpyHostToDevice));
    cudaCheck(cudaFuncSetAttribute(kfv_dmma_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, V4_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_dmma_async_first_pass<3>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, 3 * V4_STAGE * 2));
    cudaCheck(cudaFuncSetAttribute(kfv_dmma_async_first_pass<4>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * V4_STAGE * 2));
    cudaCheck(cudaFuncSetAttribute(kfv_dmma_pipe_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   V8_BUFS * V4_STAGE * 2));
    cudaCheck(cudaFuncSetAttribute(kfv_dmma_lean_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, V4_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_dmma_probe_first_pass<1>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, V4_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_dmma_probe_first_pass<2>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, V4_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_wgmma2_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, V19_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_wgmma_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, V18_SHARED));
    cudaCheck(cudaFuncSetAttribute(alias_wgmma_lean_first_pass<2>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, V16_SHARED(2)));
    cudaCheck(cudaFuncSetAttribute(alias_wgmma_lean_first_pass<3>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, V16_SHARED(3)));
    cudaCheck(cudaFuncSetAttribute(alias_wgmma_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, V15_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_dmma3_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, V4_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_dmma32_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, V11_SHARED));
    cudaCheck(cudaFuncSetAttribute(alias_warp_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V20_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_warp_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)V21_SHARED(V20_WARPS, 2)));
    cudaCheck(cudaFuncSetAttribute(kfv_warp1_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)V21_SHARED(V22_WARPS, 1)));
    cudaCheck(cudaFuncSetAttribute(kfv_warp1s_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V23_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_warp1s_nopf_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V23_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_f64_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, V5_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_tf32_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)V24_SHARED(5, true)));
    cudaCheck(cudaFuncSetAttribute(kfv_tf32_lean_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)V24_SHARED(5, true)));
    cudaCheck(cudaFuncSetAttribute(kfv_tf32_pair_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V27_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_tf32_pair_lean_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V27_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_tf32_pair_sync0_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V27_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_tf32_pair_mbar_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V30_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_tf32_pair_mbar_inval_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V30_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_tf32_pair_mbar_pf_first_pass<0>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V30_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_tf32_pair_mbar_pf_first_pass<2>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V30_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_bf16_pair_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V31_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_bf16_pair_mbar_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V31_SHARED));
    cudaCheck(cudaFuncSetAttribute(kfv_tf32g_first_pass,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)V24_SHARED(6, false)));
    const gem_dtype kv_type = f32 ? GEM_DTYPE_F32 : GEM_DTYPE_BF16;
    const size_t esz = f32 ? 4 : 2; /* bytes of a cache element */
    printf("K rebuilt from V, %s V, scale 1.0, row 0 at position %lld\n", f32 ? "F32" : "BF16",
           (long long)pos0);
    printf("%-8s %-8s %10s %10s %10s %9s\n", "live", "version", "min ms", "median ms", "max ms",
           "GB/s");
    int failed = 0;
    for (int li = 0; li < nl; li++) {
        const int64_t live = lengths[li];
        const size_t n = (size_t)NKV * (size_t)live * D;
        float *hq = (float *)malloc(NQ * D * sizeof(float));
        /* q of RMS-normed rows scaled by a norm weight: about unit size */
        fill_uniform(hq, NQ * D, 11 + (uint64_t)live, -1.7f, 1.7f);
        float *hv = (float *)malloc(n * sizeof(float));
        __nv_bfloat16 *bv = (__nv_bfloat16 *)malloc(n * 2), *bk = (__nv_bfloat16 *)malloc(n * 2);
        fill_uniform(hv, n, 13 + (uint64_t)live, -1.7f, 1.7f);
        if (!f32)
            for (size_t i = 0; i < n; i++) {
                bv[i] = __float2bfloat16_rn(hv[i]);
                hv[i] = __bfloat162float(bv[i]);
            }
        /* the stored K of version 2: the K of the rounded V, in double, rounded to BF16 */
        float *hk = (float *)malloc(n * sizeof(float));
        for (int64_t r = 0; r < (int64_t)NKV * live; r++) {
            const float *vrow = hv + (size_t)r * D;
            const double pos = (double)(pos0 + r % live);
            double kd[D];
            for (int i = 0; i < D; i++)
                kd[i] = (double)hw[i] * (double)vrow[i];
            for (int j = 0; j < NPAIRS; j++) {
                const double th = pos * inv_freq[j], c = cos(th), sn = sin(th);
                const double a = kd[j], b = kd[j + 256];
                kd[j] = a * c - b * sn;
                kd[j + 256] = a * sn + b * c;
            }
            for (int i = 0; i < D; i++) {
                bk[(size_t)r * D + i] = __float2bfloat16_rn((float)kd[i]);
                hk[(size_t)r * D + i] = f32 ? (float)kd[i] : __bfloat162float(bk[(size_t)r * D + i]);
            }
        }
        const gem_k_from_v host_rot = {hw, inv_freq, NPAIRS, D / 2, pos0};
        gem_kv_view kfv_host;
        memset(&kfv_host, 0, sizeof kfv_host);
        kfv_host.v = hv;
        kfv_host.k_dtype = kfv_host.v_dtype = GEM_DTYPE_F32;
        kfv_host.v_head_stride = live * D;
        kfv_host.v_token_stride = D;
        kfv_host.live = kfv_host.capacity = live;
        kfv_host.k_from_v = &host_rot;
        gem_kv_view stored_host = gem_kv_view_dense(hk, hv, D, D, live, live);
        gem_kv_view alias_host = gem_kv_view_dense(hv, hv, D, D, live, live); /* version 10 */
        double *ref_kfv = (double *)malloc(NQ * D * sizeof(double));
        double *ref_stored = (double *)malloc(NQ * D * sizeof(double));
        double *ref_alias = (double *)malloc(NQ * D * sizeof(double));
        if (gem_attn_reference_kv(&shape, hq, &kfv_host, ref_kfv, NQ * D) != GEM_OK ||
            gem_attn_reference_kv(&shape, hq, &stored_host, ref_stored, NQ * D) != GEM_OK ||
            gem_attn_reference_kv(&shape, hq, &alias_host, ref_alias, NQ * D) != GEM_OK) {
            fprintf(stderr, "reference failed\n");
            return 2;
        }
        void *dk, *dv;
        float *dq, *dout;
        cudaCheck(cudaMalloc(&dk, n * esz));
        cudaCheck(cudaMalloc(&dv, n * esz));
        cudaCheck(cudaMemcpy(dk, f32 ? (const void *)hk : (const void *)bk, n * esz,
                             cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(dv, f32 ? (const void *)hv : (const void *)bv, n * esz,
                             cudaMemcpyHostToDevice));
        cudaCheck(cudaMalloc(&dq, NQ * D * sizeof(float)));
        cudaCheck(cudaMalloc(&dout, NQ * D * sizeof(float)));
        cudaCheck(cudaMemcpy(dq, hq, NQ * D * sizeof(float), cudaMemcpyHostToDevice));
        /* the partials of P partitions, or of the library's own count (versions 1, 2, 10) */
        const size_t ws_bytes = (size_t)GEM_DECODE_MAX_PARTITIONS * NQ * (D + 2) * sizeof(float);
        void *dws;
        cudaCheck(cudaMalloc(&dws, ws_bytes));
        gem_k_from_v dev_rot = host_rot;
        dev_rot.k_weight = dw;
        gem_cu_rope rope;
        memset(&rope, 0, sizeof rope);
        for (int j = 0; j < NPAIRS; j++)
            rope.inv_freq[j] = inv_freq[j];
        rope.pos0 = pos0;
        float *hout = (float *)malloc(NQ * D * sizeof(float));
        float *hfirst = (float *)malloc(NQ * D * sizeof(float));
        float *hlead = (float *)malloc(NQ * D * sizeof(float)); /* the first version's output */
        int valid[20];
#define RUN(i)                                                                                 \
    do {                                                                                       \
        if (vs[i] >= 3 && vs[i] != 10) {                                                       \
            float *pm_ = (float *)dws, *ps_ = pm_ + P * NQ, *po_ = ps_ + P * NQ;               \
            if (vs[i] == 3)                                                                    \
                kfv_mma_first_pass<<<dim3((unsigned)P, NKV), 256, 0, stream>>>(                \
                    dq, dw, rope, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_, live, \
                    P, NQ, scale);                                                             \
            else if (vs[i] == 4)                                                               \
                kfv_dmma_first_pass<<<dim3((unsigned)P, NKV), 256, V4_SHARED, stream>>>(       \
                    dq, dw, rope, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_, live, \
                    P, NQ, scale);                                                             \
            else if (vs[i] == 12 || vs[i] == 13)                                               \
                (vs[i] == 12 ? kfv_dmma_probe_first_pass<1> : kfv_dmma_probe_first_pass<2>)    \
                    <<<dim3((unsigned)P, NKV), 256, V4_SHARED, stream>>>(                      \
                        dq, dw, rope, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_,   \
                        live, P, NQ, scale);                                                   \
            else if (vs[i] == 21)                                                              \
                kfv_warp_first_pass<<<dim3((unsigned)P, NKV), 32 * V20_WARPS,                  \
                                      V21_SHARED(V20_WARPS, 2), stream>>>(                     \
                    dq, dw, rope, dcoef, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_, \
                    live, P, NQ, scale);                                                       \
            else if (vs[i] == 24)                                                              \
                kfv_tf32_first_pass<<<dim3((unsigned)P, NKV), 160, V24_SHARED(5, true),        \
                                      stream>>>(dq, dw, rope, (const float *)dv, live * D, D,   \
                                                pm_, ps_, po_, live, P, NQ, scale);             \
            else if (vs[i] == 26)                                                              \
                kfv_tf32_lean_first_pass<<<dim3((unsigned)P, NKV), 160, V24_SHARED(5, true),   \
                                           stream>>>(dq, dw, rope, (const float *)dv, live * D, \
                                                     D, pm_, ps_, po_, live, P, NQ, scale);     \
            else if (vs[i] == 27)                                                              \
                kfv_tf32_pair_first_pass<<<dim3((unsigned)P, NKV), 64 * V27_PAIRS, V27_SHARED, \
                                           stream>>>(dq, dw, rope, (const float *)dv, live * D, \
                                                     D, pm_, ps_, po_, live, P, NQ, scale);     \
            else if (vs[i] == 31 || vs[i] == 32)                                               \
                (vs[i] == 31 ? kfv_bf16_pair_first_pass : kfv_bf16_pair_mbar_first_pass)       \
                    <<<dim3((unsigned)P, NKV), 64 * V31_PAIRS, V31_SHARED, stream>>>(           \
                        dq, dw, rope, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_,   \
                        live, P, NQ, scale);                                                   \
            else if (vs[i] == 30 || (vs[i] >= 33 && vs[i] <= 35))                              \
                (vs[i] == 30   ? kfv_tf32_pair_mbar_first_pass                                 \
                 : vs[i] == 33 ? kfv_tf32_pair_mbar_inval_first_pass                           \
                 : vs[i] == 34 ? kfv_tf32_pair_mbar_pf_first_pass<0>                           \
                               : kfv_tf32_pair_mbar_pf_first_pass<2>)<<<dim3((unsigned)P, NKV), \
                                                                        64 * V27_PAIRS,        \
                                                V30_SHARED, stream>>>(                          \
                    dq, dw, rope, (const float *)dv, live * D, D, pm_, ps_, po_, live, P, NQ,   \
                    scale);                                                                    \
            else if (vs[i] == 29)                                                              \
                kfv_tf32_pair_sync0_first_pass<<<dim3((unsigned)P, NKV), 64 * V27_PAIRS,        \
                                                 V27_SHARED, stream>>>(                         \
                    dq, dw, rope, (const float *)dv, live * D, D, pm_, ps_, po_, live, P, NQ,   \
                    scale);                                                                    \
            else if (vs[i] == 28)                                                              \
                kfv_tf32_pair_lean_first_pass<<<dim3((unsigned)P, NKV), 64 * V27_PAIRS,         \
                                                V27_SHARED, stream>>>(                          \
                    dq, dw, rope, (const float *)dv, live * D, D, pm_, ps_, po_, live, P, NQ,   \
                    scale);                                                                    \
            else if (vs[i] == 25)                                                              \
                kfv_tf32g_first_pass<<<dim3((unsigned)P, NKV), 192, V24_SHARED(6, false),      \
                                       stream>>>(dq, dw, rope, dcoef, (const float *)dv,        \
                                                 live * D, D, pm_, ps_, po_, live, P, NQ,       \
                                                 scale);                                        \
            else if (vs[i] == 23 || vs[i] == 36)                                               \
                (vs[i] == 23 ? kfv_warp1s_first_pass : kfv_warp1s_nopf_first_pass)<<<dim3((unsigned)P, NKV), 32 * V22_WARPS, V23_SHARED,    \
                                        stream>>>(dq, dw, rope, (const __nv_bfloat16 *)dv,     \
                                                  live * D, D, pm_, ps_, po_, live, P, NQ,     \
                                                  scale);                                      \
            else if (vs[i] == 22)                                                              \
                kfv_warp1_first_pass<<<dim3((unsigned)P, NKV), 32 * V22_WARPS,                 \
                                       V21_SHARED(V22_WARPS, 1), stream>>>(                    \
                    dq, dw, rope, dcoef, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_, \
                    live, P, NQ, scale);                                                       \
            else if (vs[i] == 20)                                                              \
                alias_warp_first_pass<<<dim3((unsigned)P, NKV), 32 * V20_WARPS, V20_SHARED,    \
                                        stream>>>(dq, (const __nv_bfloat16 *)dv, live * D, D,  \
                                                  pm_, ps_, po_, live, P, NQ, scale);          \
            else if (vs[i] == 19)                                                              \
                kfv_wgmma2_first_pass<<<dim3((unsigned)P, NKV), 256, V19_SHARED, stream>>>(    \
                    dq, dw, rope, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_, live, \
                    P, NQ, scale);                                                             \
            else if (vs[i] == 18)                                                              \
                kfv_wgmma_first_pass<<<dim3((unsigned)P, NKV), 128, V18_SHARED, stream>>>(    \
                    dq, dw, rope, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_, live, \
                    P, NQ, scale);                                                             \
            else if (vs[i] == 16)                                                              \
                alias_wgmma_lean_first_pass<3>                                                 \
                    <<<dim3((unsigned)P, NKV), 128, V16_SHARED(3), stream>>>(                  \
                        dq, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_, live, P,    \
                        NQ, scale);                                                            \
            else if (vs[i] == 17)                                                              \
                alias_wgmma_lean_first_pass<2>                                                 \
                    <<<dim3((unsigned)P, NKV), 128, V16_SHARED(2), stream>>>(                  \
                        dq, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_, live, P,    \
                        NQ, scale);                                                            \
            else if (vs[i] == 15)                                                              \
                alias_wgmma_first_pass<<<dim3((unsigned)P, NKV), 128, V15_SHARED, stream>>>(   \
                    dq, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_, live, P, NQ,    \
                    scale);                                                                    \
            else if (vs[i] == 14)                                                              \
                kfv_dmma3_first_pass<<<dim3((unsigned)P, NKV), 256, V4_SHARED, stream>>>(      \
                    dq, dw, rope, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_, live, \
                    P, NQ, scale);                                                             \
            else if (vs[i] == 11)                                                              \
                kfv_dmma32_first_pass<<<dim3((unsigned)P, NKV), 256, V11_SHARED, stream>>>(    \
                    dq, dw, rope, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_, live, \
                    P, NQ, scale);                                                             \
            else if (vs[i] == 9)                                                               \
                kfv_dmma_lean_first_pass<<<dim3((unsigned)P, NKV), 256, V4_SHARED, stream>>>(  \
                    dq, dw, rope, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_, live, \
                    P, NQ, scale);                                                             \
            else if (vs[i] == 8)                                                               \
                kfv_dmma_pipe_first_pass<<<dim3((unsigned)P, NKV), 256,                        \
                                           V8_BUFS * V4_STAGE * 2, stream>>>(                  \
                    dq, dw, rope, (const __nv_bfloat16 *)dv, live * D, D, pm_, ps_, po_, live, \
                    P, NQ, scale);                                                             \
            else if (vs[i] == 6)                                                               \
                kfv_dmma_async_first_pass<3><<<dim3((unsigned)P, NKV), 256, 3 * V4_STAGE * 2,  \
                                                stream>>>(dq, dw, rope,                        \
                                                          (const __nv_bfloat16 *)dv, live * D, \
                                                          D, pm_, ps_, po_, live, P, NQ, scale); \
            else if (vs[i] == 7)                                                               \
                kfv_dmma_async_first_pass<4><<<dim3((unsigned)P, NKV), 256, 4 * V4_STAGE * 2,  \
                                                stream>>>(dq, dw, rope,                        \
                                                          (const __nv_bfloat16 *)dv, live * D, \
                                                          D, pm_, ps_, po_, live, P, NQ, scale); \
            else                                                                               \
                kfv_f64_first_pass<<<dim3((unsigned)P, NKV), 256, V5_SHARED, stream>>>(        \
                    dq, dw, rope, (const float *)dv, live * D, D, pm_, ps_, po_, live, P, NQ,  \
                    scale);                                                                    \
            kfv_reducer<<<dim3(NQ, D / 256), 256, 0, stream>>>(pm_, ps_, po_, dout, P);        \
            cudaCheck(cudaGetLastError());                                                     \
        } else {                                                                               \
            gem_kv_view kv_;                                                                   \
            memset(&kv_, 0, sizeof kv_);                                                       \
            kv_.v = dv;                                                                        \
            kv_.k_dtype = kv_.v_dtype = kv_type;                                               \
            kv_.v_head_stride = live * D;                                                      \
            kv_.v_token_stride = D;                                                            \
            kv_.live = kv_.capacity = live;                                                    \
            if (vs[i] == 1) {                                                                  \
                kv_.k_from_v = &dev_rot;                                                       \
            } else {                                                                           \
                kv_.k = vs[i] == 10 ? dv : dk; /* 10: V read as its own K */                   \
                kv_.k_head_stride = live * D;                                                  \
                kv_.k_token_stride = D;                                                        \
            }                                                                                  \
            const gem_status st_ =                                                             \
                gem_decode(ctx, &shape, dq, &kv_, dout, dws, ws_bytes, NULL, stream);          \
            if (st_ != GEM_OK) {                                                               \
                fprintf(stderr, "gem_decode: %s\n", gem_status_str(st_));                     \
                exit(EXIT_FAILURE);                                                            \
            }                                                                                  \
        }                                                                                      \
    } while (0)
        for (int i = 0; i < nv; i++) {
            const double *ref = vs[i] == 2                                   ? ref_stored
                                : vs[i] == 10 || (vs[i] >= 15 && vs[i] <= 17) || vs[i] == 20
                                    ? ref_alias
                                                                              : ref_kfv;
            valid[i] = 1;
            for (int rep = 0; rep < 2; rep++) {
                cudaCheck(cudaMemsetAsync(dout, 0xFF, NQ * D * sizeof(float), stream));
                RUN(i);
                cudaCheck(cudaStreamSynchronize(stream));
                cudaCheck(cudaMemcpy(hout, dout, NQ * D * sizeof(float), cudaMemcpyDeviceToHost));
                if (rep == 0) {
                    double num = 0, den = 0;
                    for (int j = 0; j < NQ * D; j++) {
                        num += (hout[j] - ref[j]) * (hout[j] - ref[j]);
                        den += ref[j] * ref[j];
                    }
                    const double nmse = num / den;
                    printf("%-8lld v%-7d nmse %.3g against the double reference of its view\n",
                           (long long)live, vs[i], nmse);
                    if (!(nmse <= 1e-10) && vs[i] < 12) /* 12, 13: diagnostics */
                        valid[i] = 0;
                    memcpy(hfirst, hout, NQ * D * sizeof(float));
                    if (i == 0)
                        memcpy(hlead, hout, NQ * D * sizeof(float));
                    else /* two designs with the same order of operations give the same bits */
                        printf("%-8lld v%-7d bits %s v%d's\n", (long long)live, vs[i],
                               memcmp(hlead, hout, NQ * D * sizeof(float)) ? "differ from"
                                                                           : "the same as",
                               vs[0]);
                } else if (memcmp(hfirst, hout, NQ * D * sizeof(float)) != 0) {
                    printf("%-8lld v%-7d INVALID: the repeat differs\n", (long long)live, vs[i]);
                    valid[i] = 0;
                }
            }
            failed |= !valid[i];
        }
        double *t = (double *)calloc((size_t)nv * 2 * rounds, sizeof(double));
        for (int wu = 0; wu < 3; wu++)
            for (int i = 0; i < nv; i++)
                if (valid[i])
                    RUN(i);
        for (int r = 0; r < rounds; r++)
            for (int pass = 0; pass < 2; pass++)
                for (int j = 0; j < nv; j++) {
                    const int i = pass == 0 ? j : nv - 1 - j;
                    if (!valid[i])
                        continue;
                    wait_kernel<<<1, 1, 0, stream>>>(50000);
                    cudaCheck(cudaEventRecord(e0, stream));
                    RUN(i);
                    cudaCheck(cudaEventRecord(e1, stream));
                    cudaCheck(cudaEventSynchronize(e1));
                    float ms = 0;
                    cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
                    t[(size_t)i * 2 * rounds + 2 * r + pass] = ms;
                }
#undef RUN
        for (int i = 0; i < nv; i++) {
            if (!valid[i])
                continue;
            double *ti = t + (size_t)i * 2 * rounds;
            qsort(ti, (size_t)2 * rounds, sizeof(double), cmp_double);
            const double med = 0.5 * (ti[rounds - 1] + ti[rounds]);
            const double bytes = (vs[i] == 2 ? 2.0 : 1.0) * (double)n * (double)esz;
            printf("%-8lld v%-7d %10.4f %10.4f %10.4f %9.1f\n", (long long)live, vs[i], ti[0],
                   med, ti[2 * rounds - 1], bytes / (med * 1e-3) / 1e9);
        }
        free(t);
        cudaFree(dk);
        cudaFree(dv);
        cudaFree(dq);
        cudaFree(dout);
        cudaFree(dws);
        free(hq);
        free(hv);
        free(hk);
        free(bv);
        free(bk);
        free(ref_kfv);
        free(ref_stored);
        free(ref_alias);
        free(hout);
        free(hfirst);
        free(hlead);
    }
    cudaFree(dw);
    cudaFree(dcoef);
    gem_decode_ctx_destroy(ctx);
    return failed;
}
