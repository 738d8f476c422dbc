/*
 * The fused split-KV route on CUDA (the design's candidate), D512 / group 8.
 *
 * First pass: one 256-thread block per (sequence partition p, KV head g).
 * Warp w owns query head g*8 + w; lane l owns the 16 dims
 * {j*128 + 4*l + c : j < 4, c < 4} of that head (Q and, in the design's
 * variant, O in registers; the float4 at j*128 + 4*l makes every shared and
 * global access of a warp one contiguous 512-byte run). The block walks its
 * partition in tiles of TILE tokens: the 256 threads stage the tile's K and V
 * rows (TILE * 512 * 2 * 4 bytes: 16,384 at tile 4) in dynamic shared memory
 * once, then each warp scores the tile for its head (warp butterfly sums) and
 * updates its exact online state (M, S, O): M' = max(M, max_t s_t),
 * S' = S e^(M-M') + sum_t e^(s_t-M'), O' = O e^(M-M') + sum_t e^(s_t-M') v_t.
 * It writes one (M, S, O) partial per head, partition-major:
 *   part_m, part_s (P, n_q_heads); part_o (P, n_q_heads, 512)
 * which is the layout and size of gem_attention_online_scratch_bytes, with the
 * ranges of gem_partition_range (chunk = ceil(live / P)).
 *
 * Variants (one axis each, see gem_cu_fused_variant):
 *   STAGES = 0  (VSHARE = 2 only) no staging: each thread loads the K and V
 *               pieces it owns straight into registers, one tile ahead;
 *   STAGES = 1  the design: plain loads through registers, two barriers a tile;
 *   STAGES > 1  cp.async copies, STAGES tiles in flight (16-byte cp.async.cg,
 *               zero-filled rows past the partition end);
 *   VSHARE = 1  the V side is owned per thread instead of per warp: after the
 *               warps publish e^(s_t-M') and e^(M-M') of their head in shared
 *               memory, thread i accumulates dims 2i, 2i+1 of all eight heads,
 *               so each staged V element is read once instead of eight times.
 *   VSHARE = 2  the K side too: thread i forms partial dots of dims 2i, 2i+1
 *               for all eight heads (Q of 8 heads x 2 dims in registers), so each
 *               staged K element is read once; the per-head sums come from a
 *               transposed warp sum plus the eight warps' sums added in warp
 *               order. Tiles 4 and 8 only (8 x TILE partial sums per thread).
 *   VSHARE = 3  four dims of all eight heads per thread, the two half-blocks on the two
 *               halves of each tile, tiles brought in by bulk copies (cp.async.bulk on an
 *               mbarrier) into STAGES = 2 or 3 buffers, select-free transposed sums, one
 *               expf per lane for the softmax, and a reducer that loads 64 partials at a
 *               time (gem_fused_reducer_wide, same merge order). Tiles 8 and 16.
 *   VSHARE = 4  VSHARE 3's ownership fed as STAGES = 0: each thread loads its float4 of K and V
 *               straight into registers one tile ahead (16-byte loads); tile 8, STAGES 0 only;
 *               run 4's reducer.
 *   VSHARE = 5  4, with the K/V loads marked L1::no_allocate and L2 evict_first.
 *   VSHARE = 6  5's first pass with gem_fused_reducer_wide (one load round for 64 partials).
 *   VSHARE = 7  6 with Q of the eight heads in shared memory instead of 32 registers, which
 *               lets the next tile's V loads be issued right after this tile's dots (with the
 *               next K) instead of after this tile's V update: same arithmetic, same bits.
 *
 * Reducer: one 256-thread block per (query head, half of the 512 dims); thread
 * i merges the P partials of dim 256*half + i in partition order 0..P-1 with
 * the identity of gem_online_merge (an empty partial, S = 0, is the identity)
 * and writes O / S. No dynamic shared memory, no atomics: the result is
 * bitwise reproducible.
 */
#include <math.h>

#include "gem_cuda_internal.h"

/* ---- cp.async helpers (sm_80+) -------------------------------------------- */

/* 16-byte global->shared copy; src_bytes 0 zero-fills the destination. */
__device__ __forceinline__ void gem_cp_async16(void *smem, const void *gmem, int src_bytes)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
                 "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void gem_cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void gem_cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* ---- tile staging ------------------------------------------------------------ */

/* buf: (2, TILE, 128) float4: K rows then V rows of tokens t0 .. t0+n-1;
 * rows n .. TILE-1 are zero. kg, vg: this KV head's (live, 128) float4. */
template <int TILE>
__device__ __forceinline__ void gem_stage_sync(float4 *buf, const float4 *__restrict__ kg,
                                               const float4 *__restrict__ vg, int64_t t0, int n)
{
    const int per = TILE * GEM_CU_ROW_F4 / GEM_CU_THREADS; /* float4 of K per thread */
    float4 rk[per], rv[per];
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int u = 0; u < per; u++) {
        const int i = threadIdx.x + u * GEM_CU_THREADS;
        const int row = i / GEM_CU_ROW_F4, col = i % GEM_CU_ROW_F4;
        const int64_t at = (t0 + row) * GEM_CU_ROW_F4 + col;
        rk[u] = row < n ? __ldg(kg + at) : zero;
        rv[u] = row < n ? __ldg(vg + at) : zero;
    }
#pragma unroll
    for (int u = 0; u < per; u++) {
        const int i = threadIdx.x + u * GEM_CU_THREADS;
        buf[i] = rk[u];
        buf[TILE * GEM_CU_ROW_F4 + i] = rv[u];
    }
}

template <int TILE>
__device__ __forceinline__ void gem_stage_async(float4 *buf, const float4 *__restrict__ kg,
                                                const float4 *__restrict__ vg, int64_t t0, int n)
{
    const int per = TILE * GEM_CU_ROW_F4 / GEM_CU_THREADS;
#pragma unroll
    for (int u = 0; u < per; u++) {
        const int i = threadIdx.x + u * GEM_CU_THREADS;
        const int row = i / GEM_CU_ROW_F4, col = i % GEM_CU_ROW_F4;
        const int ok = row < n;
        const int64_t at = ok ? (t0 + row) * GEM_CU_ROW_F4 + col : 0;
        gem_cp_async16(buf + i, kg + at, ok ? 16 : 0);
        gem_cp_async16(buf + TILE * GEM_CU_ROW_F4 + i, vg + at, ok ? 16 : 0);
    }
}

/* ---- first pass ------------------------------------------------------------------ */

/* One halving step of a transposed warp sum over 2W values per lane: lanes with
 * bit O set keep values [W, 2W), the others [0, W), each adding its partner's
 * copy. Steps (N/2, 16) .. (N/32, 1) leave lane l the sums of values
 * l*(N/32) .. l*(N/32) + N/32 - 1 in v[0, N/32). */
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

template <int TILE, int STAGES, int VSHARE>
__device__ __forceinline__ void gem_fused_first_pass_body(
    const float *__restrict__ q,  /* (n_q_heads, 512) */
    const float *__restrict__ k,  /* (n_kv_heads, live, 512) */
    const float *__restrict__ v,  /* (n_kv_heads, live, 512) */
    float *__restrict__ part_m,   /* (P, n_q_heads) */
    float *__restrict__ part_s,   /* (P, n_q_heads) */
    float *__restrict__ part_o,   /* (P, n_q_heads, 512) */
    int64_t live, int64_t partitions, float scale)
{
    extern __shared__ float4 gem_fused_smem[]; /* (STAGES, 2, TILE, 128) float4 */
    __shared__ __align__(16) float sp[VSHARE ? GEM_CU_GROUP : 1][VSHARE ? TILE : 1];
    __shared__ float salpha[VSHARE ? GEM_CU_GROUP : 1];
    __shared__ float sred[VSHARE == 2 ? GEM_CU_THREADS / 32 : 1][VSHARE == 2 ? GEM_CU_GROUP * TILE : 1];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t n_q_heads = (int64_t)gridDim.y * GEM_CU_GROUP;
    const int64_t head = g * GEM_CU_GROUP + warp;

    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live);
    const int64_t end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + TILE - 1) / TILE;

    const float4 *kg = reinterpret_cast<const float4 *>(k) + g * live * GEM_CU_ROW_F4;
    const float4 *vg = reinterpret_cast<const float4 *>(v) + g * live * GEM_CU_ROW_F4;
    const float4 *q4 = reinterpret_cast<const float4 *>(q) + head * GEM_CU_ROW_F4;

    float4 qr[4], o[4];
    float2 o2[VSHARE ? GEM_CU_GROUP : 1];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        qr[j] = __ldg(q4 + j * 32 + lane);
        o[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float2 q2[VSHARE == 2 ? GEM_CU_GROUP : 1];
#pragma unroll
    for (int h = 0; h < (VSHARE ? GEM_CU_GROUP : 1); h++)
        o2[h] = make_float2(0.f, 0.f);
#pragma unroll
    for (int h = 0; h < (VSHARE == 2 ? GEM_CU_GROUP : 1); h++)
        q2[h] = __ldg(reinterpret_cast<const float2 *>(q) +
                      (g * GEM_CU_GROUP + h) * (GEM_CU_D / 2) + threadIdx.x);
    float m = -INFINITY, s = 0.f;

    if (STAGES > 1) {
#pragma unroll
        for (int st = 0; st < STAGES - 1; st++) {
            if (st < ntiles) {
                const int64_t t0 = begin + (int64_t)st * TILE;
                gem_stage_async<TILE>(gem_fused_smem + st * 2 * TILE * GEM_CU_ROW_F4, kg, vg, t0,
                                      (int)min((int64_t)TILE, end - t0));
            }
            gem_cp_async_commit();
        }
    }

    /* STAGES == 0 (with VSHARE == 2): no shared staging; thread i loads the
     * 8-byte pieces of K and V it owns straight into registers, one tile ahead */
    const int DR = STAGES == 0 ? TILE : 1;
    const int SDIV = STAGES > 0 ? STAGES : 1; /* ring size of the staged tiles */
    float2 kc[DR], vc[DR], kn[DR], vn[DR];
    const float2 *kg2 = reinterpret_cast<const float2 *>(k) + g * live * (GEM_CU_D / 2) + threadIdx.x;
    const float2 *vg2 = reinterpret_cast<const float2 *>(v) + g * live * (GEM_CU_D / 2) + threadIdx.x;
    if (STAGES == 0) {
#pragma unroll
        for (int t = 0; t < DR; t++) {
            const int ok = begin + t < end;
            kn[t] = ok ? __ldg(kg2 + (begin + t) * (GEM_CU_D / 2)) : make_float2(0.f, 0.f);
            vn[t] = ok ? __ldg(vg2 + (begin + t) * (GEM_CU_D / 2)) : make_float2(0.f, 0.f);
        }
    }

    for (int64_t i = 0; i < ntiles; i++) {
        const int64_t t0 = begin + i * TILE;
        const int n = (int)min((int64_t)TILE, end - t0);
        const float4 *buf;
        if (STAGES == 0) {
#pragma unroll
            for (int t = 0; t < DR; t++) {
                kc[t] = kn[t];
                vc[t] = vn[t];
            }
            const int64_t tn = t0 + TILE;
#pragma unroll
            for (int t = 0; t < DR; t++) {
                const int ok = tn + t < end;
                kn[t] = ok ? __ldg(kg2 + (tn + t) * (GEM_CU_D / 2)) : make_float2(0.f, 0.f);
                vn[t] = ok ? __ldg(vg2 + (tn + t) * (GEM_CU_D / 2)) : make_float2(0.f, 0.f);
            }
            buf = gem_fused_smem; /* unused */
        } else if (STAGES == 1) {
            __syncthreads(); /* every warp is done with the previous tile */
            gem_stage_sync<TILE>(gem_fused_smem, kg, vg, t0, n);
            __syncthreads();
            buf = gem_fused_smem;
        } else {
            gem_cp_async_wait<(STAGES >= 2 ? STAGES - 2 : 0)>(); /* tile i's copies landed */
            __syncthreads(); /* everyone's copies landed; tile i-1's buffer is free */
            const int64_t nx = i + STAGES - 1;
            if (nx < ntiles) {
                const int64_t tn = begin + nx * TILE;
                gem_stage_async<TILE>(gem_fused_smem + (nx % SDIV) * 2 * TILE * GEM_CU_ROW_F4,
                                      kg, vg, tn, (int)min((int64_t)TILE, end - tn));
            }
            gem_cp_async_commit();
            buf = gem_fused_smem + (i % SDIV) * 2 * TILE * GEM_CU_ROW_F4;
        }
        const float4 *ks = buf;
        const float4 *vs = buf + TILE * GEM_CU_ROW_F4;

        /* scores of the tile for this warp's head, lane-uniform in sc[] */
        float sc[TILE];
        if (VSHARE == 2) {
            /* thread i: partial dots of dims 2i, 2i+1 for all 8 heads x TILE
             * tokens, one 8-byte read of each staged K element per block; a
             * transposed warp sum leaves lane l the sums lane*(N/32) + j; the
             * eight warps' sums are then added in warp order by the head's warp */
            const float2 *ks2 = reinterpret_cast<const float2 *>(ks);
            float part[GEM_CU_GROUP * TILE]; /* index h * TILE + t */
#pragma unroll
            for (int t = 0; t < TILE; t++) {
                const float2 k2 = STAGES == 0 ? kc[t % DR] : ks2[t * (GEM_CU_D / 2) + threadIdx.x];
#pragma unroll
                for (int h = 0; h < GEM_CU_GROUP; h++)
                    part[h * TILE + t] = fmaf(q2[h].y, k2.y, q2[h].x * k2.x);
            }
            const int N = GEM_CU_GROUP * TILE;
            gem_xpose_step<N / 2, 16>(part, lane);
            gem_xpose_step<N / 4, 8>(part, lane);
            gem_xpose_step<N / 8, 4>(part, lane);
            gem_xpose_step<N / 16, 2>(part, lane);
            gem_xpose_step<N / 32, 1>(part, lane);
#pragma unroll
            for (int j = 0; j < N / 32; j++)
                sred[warp][lane * (N / 32) + j] = part[j];
            __syncthreads(); /* every warp's partial sums are published */
            float a = 0.f;
            if (lane < TILE) {
#pragma unroll
                for (int w = 0; w < GEM_CU_THREADS / 32; w++)
                    a += sred[w][warp * TILE + lane];
            }
#pragma unroll
            for (int t = 0; t < TILE; t++)
                sc[t] = __shfl_sync(0xffffffffu, a, t);
        } else {
#pragma unroll
        for (int t = 0; t < TILE; t++) {
            float a = 0.f;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float4 kk = ks[t * GEM_CU_ROW_F4 + j * 32 + lane];
                a = fmaf(qr[j].x, kk.x, a);
                a = fmaf(qr[j].y, kk.y, a);
                a = fmaf(qr[j].z, kk.z, a);
                a = fmaf(qr[j].w, kk.w, a);
            }
            sc[t] = a;
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
            for (int t = 0; t < TILE; t++)
                sc[t] += __shfl_xor_sync(0xffffffffu, sc[t], off);
        }
        }
        float mn = m;
#pragma unroll
        for (int t = 0; t < TILE; t++) {
            sc[t] = t < n ? sc[t] * scale : -INFINITY;
            mn = fmaxf(mn, sc[t]);
        }
        const float alpha = expf(m - mn); /* m = -inf before the first tile: 0 */
        float psum = 0.f;
#pragma unroll
        for (int t = 0; t < TILE; t++) {
            sc[t] = expf(sc[t] - mn); /* rows past n: exp(-inf) = 0 */
            psum += sc[t];
        }
        s = s * alpha + psum;
        m = mn;

        if (!VSHARE) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                o[j].x *= alpha;
                o[j].y *= alpha;
                o[j].z *= alpha;
                o[j].w *= alpha;
            }
#pragma unroll
            for (int t = 0; t < TILE; t++) {
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float4 vv = vs[t * GEM_CU_ROW_F4 + j * 32 + lane];
                    o[j].x = fmaf(sc[t], vv.x, o[j].x);
                    o[j].y = fmaf(sc[t], vv.y, o[j].y);
                    o[j].z = fmaf(sc[t], vv.z, o[j].z);
                    o[j].w = fmaf(sc[t], vv.w, o[j].w);
                }
            }
        } else {
            if (lane == 0) {
#pragma unroll
                for (int t = 0; t < TILE; t++)
                    sp[warp][t] = sc[t];
                salpha[warp] = alpha;
            }
            __syncthreads(); /* the weights of all eight heads are published */
            const float2 *vs2 = reinterpret_cast<const float2 *>(vs);
#pragma unroll
            for (int h = 0; h < GEM_CU_GROUP; h++) {
                const float al = salpha[h];
                o2[h].x *= al;
                o2[h].y *= al;
            }
            /* weights read four tokens at a time (one 16-byte broadcast) */
#pragma unroll
            for (int t4 = 0; t4 < TILE; t4 += 4) {
                float4 w4[GEM_CU_GROUP];
#pragma unroll
                for (int h = 0; h < GEM_CU_GROUP; h++)
                    w4[h] = *reinterpret_cast<const float4 *>(&sp[h][t4]);
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    const float2 vv = STAGES == 0 ? vc[(t4 + u) % DR]
                                                  : vs2[(t4 + u) * (GEM_CU_D / 2) + threadIdx.x];
#pragma unroll
                    for (int h = 0; h < GEM_CU_GROUP; h++) {
                        const float w = u == 0 ? w4[h].x : u == 1 ? w4[h].y : u == 2 ? w4[h].z : w4[h].w;
                        o2[h].x = fmaf(w, vv.x, o2[h].x);
                        o2[h].y = fmaf(w, vv.y, o2[h].y);
                    }
                }
            }
            /* the next iteration's barrier orders these reads before sp is rewritten */
        }
    }
    if (STAGES > 1)
        gem_cp_async_wait<0>(); /* no copy may outlive the block (empty groups only) */

    const int64_t row = p * n_q_heads + head;
    if (lane == 0) {
        part_m[row] = m;
        part_s[row] = s;
    }
    if (!VSHARE) {
        float4 *po = reinterpret_cast<float4 *>(part_o) + row * GEM_CU_ROW_F4;
#pragma unroll
        for (int j = 0; j < 4; j++)
            po[j * 32 + lane] = o[j];
    } else {
#pragma unroll
        for (int h = 0; h < GEM_CU_GROUP; h++) {
            const int64_t r = p * n_q_heads + g * GEM_CU_GROUP + h;
            reinterpret_cast<float2 *>(part_o)[r * (GEM_CU_D / 2) + threadIdx.x] = o2[h];
        }
    }
}

/* ---- VSHARE = 3: four dims of all eight heads per thread, bulk-copied tiles ---------------
 *
 * Thread i of the block belongs to half hf = i / 128 (warps 0-3, 4-7) and owns the four dims
 * 4*(i % 128) .. +3 of all eight heads: Q (8 float4) and O (8 float4) in registers. A tile of
 * TILE tokens arrives in shared memory by two bulk copies (cp.async.bulk, completing on one
 * mbarrier per buffer; K and V rows of consecutive tokens are contiguous), issued by thread 0
 * STAGES - 1 tiles ahead. Half hf scores and accumulates tokens hf*TILE/2 .. +TILE/2-1 of the
 * tile, in chunks of four: the 32 partial dots (8 heads x 4 tokens) of a chunk are summed
 * across the warp by a 5-step transposed sum without selects (lane l holds Q of head
 * h ^ ((l >> 2) & 7) and reads K of token j ^ (l & 3) into slot j, so at every step each lane
 * sends its upper half and keeps its lower one), leaving lane l the warp's sum for head l / 4,
 * token l % 4; the four warps of the half are then added in warp order. Warp h owns the
 * softmax of head h: lane t (t < TILE) takes token t, so one expf per lane and per tile, plus
 * one for the rescale. Both halves apply the same weights and rescales; at the end half 1
 * hands its O to half 0 through shared memory and half 0 adds it (fixed order). */

__device__ __forceinline__ void gem_mbar_init(uint64_t *bar, unsigned count)
{
    const unsigned a = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(a), "r"(count) : "memory");
}
__device__ __forceinline__ void gem_mbar_fence_init(void)
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/* Arms the barrier's phase for `bytes` and copies two runs of bytes/2 into smem. */
__device__ __forceinline__ void gem_bulk_pair(uint64_t *bar, void *dk, const void *sk, void *dv,
                                              const void *sv, unsigned half_bytes)
{
    const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b),
                 "r"(2u * half_bytes)
                 : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                 "%2, [%3];\n" ::"r"((unsigned)__cvta_generic_to_shared(dk)),
                 "l"(sk), "r"(half_bytes), "r"(b)
                 : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                 "%2, [%3];\n" ::"r"((unsigned)__cvta_generic_to_shared(dv)),
                 "l"(sv), "r"(half_bytes), "r"(b)
                 : "memory");
}
__device__ __forceinline__ void gem_mbar_wait(uint64_t *bar, unsigned parity)
{
    const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile("{\n"
                 ".reg .pred P1;\n"
                 "GEM_WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
                 "@!P1 bra GEM_WAIT_%=;\n"
                 "}\n" ::"r"(b),
                 "r"(parity)
                 : "memory");
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

template <int TILE, int STAGES>
__device__ __forceinline__ void gem_fused_first_pass_quad(
    const float *__restrict__ q,  /* (n_q_heads, 512) */
    const float *__restrict__ k,  /* (n_kv_heads, live, 512) */
    const float *__restrict__ v,  /* (n_kv_heads, live, 512) */
    float *__restrict__ part_m,   /* (P, n_q_heads) */
    float *__restrict__ part_s,   /* (P, n_q_heads) */
    float *__restrict__ part_o,   /* (P, n_q_heads, 512) */
    int64_t live, int64_t partitions, float scale)
{
    const int TH = TILE / 2;         /* tokens per half */
    const int NC = TH / 4;           /* chunks of four tokens per half */
    const int HT = GEM_CU_THREADS / 2; /* threads per half: 128 = one float4 per row each */
    extern __shared__ float4 gem_fused_smem[]; /* (STAGES, 2, TILE, 128) float4 */
    __shared__ __align__(8) uint64_t bars[STAGES];
    __shared__ __align__(16) float sp[GEM_CU_GROUP][TILE];
    __shared__ __align__(16) float salpha[GEM_CU_GROUP];
    __shared__ float sred[GEM_CU_THREADS / 32][NC * 32];

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int hf = tid / HT, d4 = tid % HT;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t n_q_heads = (int64_t)gridDim.y * GEM_CU_GROUP;

    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live);
    const int64_t end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + TILE - 1) / TILE;

    const float *kg = k + g * live * GEM_CU_D;
    const float *vg = v + g * live * GEM_CU_D;

    /* Q of head h ^ hx in slot h (hx from lane bits 2..4), O of head h in slot h */
    const int hx = (lane >> 2) & 7, jx = lane & 3;
    float4 qr[GEM_CU_GROUP], o[GEM_CU_GROUP];
    const float4 *q4 = reinterpret_cast<const float4 *>(q) + g * GEM_CU_GROUP * GEM_CU_ROW_F4 + d4;
#pragma unroll
    for (int h = 0; h < GEM_CU_GROUP; h++) {
        qr[h] = __ldg(q4 + (h ^ hx) * GEM_CU_ROW_F4);
        o[h] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float m = -INFINITY, s = 0.f;

    if (tid == 0) {
#pragma unroll
        for (int st = 0; st < STAGES; st++)
            gem_mbar_init(&bars[st], 1);
        gem_mbar_fence_init();
    }
    __syncthreads();
    if (tid == 0) {
#pragma unroll
        for (int st = 0; st < STAGES - 1; st++) {
            if (st < ntiles) {
                const int64_t t0 = begin + (int64_t)st * TILE;
                const int n = (int)min((int64_t)TILE, end - t0);
                float4 *buf = gem_fused_smem + st * 2 * TILE * GEM_CU_ROW_F4;
                gem_bulk_pair(&bars[st], buf, kg + t0 * GEM_CU_D, buf + TILE * GEM_CU_ROW_F4,
                              vg + t0 * GEM_CU_D, (unsigned)n * GEM_CU_D * 4u);
            }
        }
    }

    for (int64_t i = 0; i < ntiles; i++) {
        const int64_t t0 = begin + i * TILE;
        const int n = (int)min((int64_t)TILE, end - t0);
        const int st = (int)(i % STAGES);
        float4 *ks = gem_fused_smem + st * 2 * TILE * GEM_CU_ROW_F4;
        float4 *vs = ks + TILE * GEM_CU_ROW_F4;
        gem_mbar_wait(&bars[st], (unsigned)((i / STAGES) & 1));
        if (n < TILE) {
            /* rows past the partition end were not copied: zero this thread's own pieces of
             * them (it alone reads them, and no copy writes this buffer again) */
#pragma unroll
            for (int t = 0; t < TH; t++) {
                if (hf * TH + t >= n) {
                    ks[(hf * TH + t) * GEM_CU_ROW_F4 + d4] = make_float4(0.f, 0.f, 0.f, 0.f);
                    vs[(hf * TH + t) * GEM_CU_ROW_F4 + d4] = make_float4(0.f, 0.f, 0.f, 0.f);
                }
            }
        }

        /* partial dots, transposed sums, one value per lane and chunk into sred */
#pragma unroll
        for (int c = 0; c < NC; c++) {
            float part[32]; /* slot h*4 + j: Q of head h ^ hx . K of token j ^ jx */
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float4 kk = ks[(hf * TH + c * 4 + (j ^ jx)) * GEM_CU_ROW_F4 + d4];
#pragma unroll
                for (int h = 0; h < GEM_CU_GROUP; h++)
                    part[h * 4 + j] = gem_dot4(qr[h], kk);
            }
            gem_xpose_keep_low<16, 16>(part);
            gem_xpose_keep_low<8, 8>(part);
            gem_xpose_keep_low<4, 4>(part);
            gem_xpose_keep_low<2, 2>(part);
            gem_xpose_keep_low<1, 1>(part);
            sred[warp][c * 32 + lane] = part[0]; /* head lane/4, token c*4 + lane%4 */
        }
        __syncthreads(); /* sred complete; every thread is done with tile i-1 */
        if (tid == 0) {
            const int64_t nx = i + STAGES - 1;
            if (nx < ntiles) {
                const int64_t tn = begin + nx * TILE;
                const int nn = (int)min((int64_t)TILE, end - tn);
                const int sx = (int)(nx % STAGES);
                float4 *buf = gem_fused_smem + sx * 2 * TILE * GEM_CU_ROW_F4;
                gem_bulk_pair(&bars[sx], buf, kg + tn * GEM_CU_D, buf + TILE * GEM_CU_ROW_F4,
                              vg + tn * GEM_CU_D, (unsigned)nn * GEM_CU_D * 4u);
            }
        }

        /* softmax of head `warp`: lane t (mod TILE) takes token t */
        {
            const int t = lane & (TILE - 1);
            const int th = t / TH, tt = t % TH;
            const int col = (tt / 4) * 32 + warp * 4 + (tt & 3);
            float a = 0.f;
#pragma unroll
            for (int w = 0; w < 4; w++)
                a += sred[th * 4 + w][col];
            const float sc = t < n ? a * scale : -INFINITY;
            float mx = sc;
#pragma unroll
            for (int off = TILE / 2; off > 0; off >>= 1)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float mn = fmaxf(m, mx);
            const float e = expf(sc - mn);     /* rows past n: exp(-inf) = 0 */
            const float alpha = expf(m - mn);  /* m = -inf before the first tile: 0 */
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
#pragma unroll
        for (int c = 0; c < NC; c++) {
            float4 vv[4];
#pragma unroll
            for (int j = 0; j < 4; j++)
                vv[j] = vs[(hf * TH + c * 4 + j) * GEM_CU_ROW_F4 + d4];
#pragma unroll
            for (int h = 0; h < GEM_CU_GROUP; h++) {
                const float4 w = *reinterpret_cast<const float4 *>(&sp[h][hf * TH + c * 4]);
                const float wj[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    o[h].x = fmaf(wj[j], vv[j].x, o[h].x);
                    o[h].y = fmaf(wj[j], vv[j].y, o[h].y);
                    o[h].z = fmaf(wj[j], vv[j].z, o[h].z);
                    o[h].w = fmaf(wj[j], vv[j].w, o[h].w);
                }
            }
        }
        /* the next tile's first barrier orders these reads before sp and this buffer are
         * rewritten */
    }

    /* half 1 hands its O to half 0 through the first buffer (no copy is in flight: every
     * issued tile was waited for) */
    __syncthreads();
    float4 *xo = gem_fused_smem; /* (8, 128) float4 */
    if (hf == 1) {
#pragma unroll
        for (int h = 0; h < GEM_CU_GROUP; h++)
            xo[h * HT + d4] = o[h];
    }
    __syncthreads();
    const int64_t row0 = p * n_q_heads + g * GEM_CU_GROUP;
    if (hf == 0) {
#pragma unroll
        for (int h = 0; h < GEM_CU_GROUP; h++) {
            const float4 b = xo[h * HT + d4];
            float4 r;
            r.x = o[h].x + b.x;
            r.y = o[h].y + b.y;
            r.z = o[h].z + b.z;
            r.w = o[h].w + b.w;
            reinterpret_cast<float4 *>(part_o)[(row0 + h) * GEM_CU_ROW_F4 + d4] = r;
        }
    }
    if (lane == 0) {
        part_m[row0 + warp] = m;
        part_s[row0 + warp] = s;
    }
}

/* ---- VSHARE = 4, 5: four dims of all eight heads per thread, direct 16-byte loads -----------
 *
 * The ownership of VSHARE = 3 (thread i: half hf = i / 128, dims 4*(i % 128) .. +3 of all eight
 * heads; half hf takes tokens hf*TILE/2 .. +TILE/2-1 of each tile) with the feeding of STAGES = 0:
 * no shared staging, each thread loads the float4 of K and V it owns (LDG.128, one 512-byte run
 * per warp and row) straight into registers one tile ahead: the next tile's K as soon as this
 * tile's dots are formed, its V as soon as this tile's V update is done (128 registers hold Q and
 * O of eight heads, 64, so the two tiles of K/V cannot all be live at once). Q of head h ^ hx sits in slot h (hx = lane bits 2..4), so the three head steps of
 * the transposed sum keep the lower half without selects; the two token steps select. Lane l then
 * holds the warp's sum for head l / 4, token l % 4 of its half; the four warps of a half are added
 * in warp order, and the softmax, the weights and the end-of-block hand-over of half 1's O are
 * those of VSHARE = 3. HINT = 1 (VSHARE = 5) loads K and V with L1::no_allocate and an L2
 * evict_first cache policy (one use per byte), HINT = 0 (VSHARE = 4) with plain ld.global. */
template <int HINT> __device__ __forceinline__ float4 gem_ld_kv(const float4 *p, uint64_t pol)
{
    /* plain (not .nc) global loads, volatile with a memory clobber: neither the compiler nor the
     * assembler may move them across the block's barriers, so they stay where the loop issues
     * them (an .nc load of a read-only array may be sunk to its use, which would leave no load in
     * flight while the tile is computed) */
    float4 r;
    if (HINT)
        asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;\n"
                     : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
                     : "l"(p), "l"(pol)
                     : "memory");
    else
        asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                     : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
                     : "l"(p)
                     : "memory");
    return r;
}

template <int TILE, int HINT, int SCHED>
__device__ __forceinline__ void gem_fused_first_pass_wide(
    const float *__restrict__ q,  /* (n_q_heads, 512) */
    const float *__restrict__ k,  /* (n_kv_heads, live, 512) */
    const float *__restrict__ v,  /* (n_kv_heads, live, 512) */
    float *__restrict__ part_m,   /* (P, n_q_heads) */
    float *__restrict__ part_s,   /* (P, n_q_heads) */
    float *__restrict__ part_o,   /* (P, n_q_heads, 512) */
    int64_t live, int64_t partitions, float scale)
{
    static_assert(TILE == 8, "VSHARE 4..7: four tokens per half and tile");
    const int TH = TILE / 2;           /* tokens per half: one chunk of four */
    const int HT = GEM_CU_THREADS / 2; /* threads per half: 128 = one float4 per row each */
    __shared__ __align__(16) float sp[GEM_CU_GROUP][TILE];
    __shared__ __align__(16) float salpha[GEM_CU_GROUP];
    __shared__ float sred[GEM_CU_THREADS / 32][32];
    __shared__ __align__(16) float4 xo[GEM_CU_GROUP * HT]; /* half 1's O at the end */
    /* SCHED 1: Q of the eight heads, read per tile instead of held in 32 registers */
    __shared__ __align__(16) float4 sq[SCHED ? GEM_CU_GROUP * HT : 1];

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int hf = tid / HT, d4 = tid % HT;
    const int64_t p = blockIdx.x, g = blockIdx.y;
    const int64_t n_q_heads = (int64_t)gridDim.y * GEM_CU_GROUP;

    const int64_t chunk = (live + partitions - 1) / partitions;
    const int64_t begin = min(p * chunk, live);
    const int64_t end = min(begin + chunk, live);
    const int64_t ntiles = (end - begin + TILE - 1) / TILE;

    /* this thread's float4 column of this KV head's rows, from this half's first token */
    const float4 *kg = reinterpret_cast<const float4 *>(k) + g * live * GEM_CU_ROW_F4 + d4;
    const float4 *vg = reinterpret_cast<const float4 *>(v) + g * live * GEM_CU_ROW_F4 + d4;
    uint64_t pol = 0;
    if (HINT)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));

    const int hx = (lane >> 2) & 7;
    float4 qr[SCHED ? 1 : GEM_CU_GROUP], o[GEM_CU_GROUP];
    const float4 *q4 = reinterpret_cast<const float4 *>(q) + g * GEM_CU_GROUP * GEM_CU_ROW_F4 + d4;
#pragma unroll
    for (int h = 0; h < GEM_CU_GROUP; h++) {
        if (SCHED) {
            if (hf == 0)
                sq[h * HT + d4] = __ldg(q4 + h * GEM_CU_ROW_F4);
        } else {
            qr[h] = __ldg(q4 + (h ^ hx) * GEM_CU_ROW_F4);
        }
        o[h] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    if (SCHED)
        __syncthreads(); /* sq complete before the first tile's dots */
    float m = -INFINITY, s = 0.f;

    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    float4 kc[TH], vc[TH]; /* this thread's K and V pieces of the tile, loaded one tile ahead */
#pragma unroll
    for (int j = 0; j < TH; j++) {
        const int64_t t = begin + hf * TH + j;
        kc[j] = t < end ? gem_ld_kv<HINT>(kg + t * GEM_CU_ROW_F4, pol) : zero;
        vc[j] = t < end ? gem_ld_kv<HINT>(vg + t * GEM_CU_ROW_F4, pol) : zero;
    }

    for (int64_t i = 0; i < ntiles; i++) {
        const int64_t t0 = begin + i * TILE;
        const int n = (int)min((int64_t)TILE, end - t0);

        /* partial dots: slot h*4 + j = Q of head h ^ hx . K of token j; transposed sum */
        float part[32];
#pragma unroll
        for (int h = 0; h < GEM_CU_GROUP; h++) {
            /* SCHED 1: one 16-byte shared load per head and tile (the block's barriers keep it
             * from being hoisted out of the loop into registers) */
            const float4 qh = SCHED ? sq[(h ^ hx) * HT + d4] : qr[SCHED ? 0 : h];
#pragma unroll
            for (int j = 0; j < TH; j++)
                part[h * 4 + j] = gem_dot4(qh, kc[j]);
        }
        gem_xpose_keep_low<16, 16>(part);
        gem_xpose_keep_low<8, 8>(part);
        gem_xpose_keep_low<4, 4>(part);
        gem_xpose_step<2, 2>(part, lane);
        gem_xpose_step<1, 1>(part, lane);
        /* the next tile's K pieces, in flight through the softmax, the V update and the next
         * tile's V loads (the registers of this tile's K are free now) */
#pragma unroll
        for (int j = 0; j < TH; j++) {
            const int64_t t = t0 + TILE + hf * TH + j;
            kc[j] = t < end ? gem_ld_kv<HINT>(kg + t * GEM_CU_ROW_F4, pol) : zero;
        }
        /* SCHED 1: the next tile's V pieces too, now (the 32 registers Q no longer takes hold
         * them), so they are in flight through this tile's softmax and V update as well */
        float4 vn[SCHED ? TH : 1];
        if (SCHED) {
#pragma unroll
            for (int j = 0; j < TH; j++) {
                const int64_t t = t0 + TILE + hf * TH + j;
                vn[j] = t < end ? gem_ld_kv<HINT>(vg + t * GEM_CU_ROW_F4, pol) : zero;
            }
        }
        sred[warp][lane] = part[0]; /* head lane/4, token hf*TH + lane%4 */
        __syncthreads(); /* sred complete */

        /* softmax of head `warp`: lane t (mod TILE) takes token t */
        {
            const int t = lane & (TILE - 1);
            const int th = t / TH, tt = t % TH;
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
            const float e = expf(sc - mn);    /* rows past n: exp(-inf) = 0 */
            const float alpha = expf(m - mn); /* m = -inf before the first tile: 0 */
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
#pragma unroll
        for (int h = 0; h < GEM_CU_GROUP; h++) {
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
        /* the next tile's V pieces, in flight through its dots, sums and softmax (SCHED 0), or
         * the ones issued after this tile's dots (SCHED 1) */
#pragma unroll
        for (int j = 0; j < TH; j++) {
            const int64_t t = t0 + TILE + hf * TH + j;
            if (SCHED)
                vc[j] = vn[SCHED ? j : 0];
            else
                vc[j] = t < end ? gem_ld_kv<HINT>(vg + t * GEM_CU_ROW_F4, pol) : zero;
        }
        /* the next tile's first barrier orders these reads before sp is rewritten, and its
         * second barrier orders this tile's sred reads before sred is rewritten */
    }

    /* half 1 hands its O to half 0; half 0 adds it (fixed order) and writes the partial */
    if (hf == 1) {
#pragma unroll
        for (int h = 0; h < GEM_CU_GROUP; h++)
            xo[h * HT + d4] = o[h];
    }
    __syncthreads();
    const int64_t row0 = p * n_q_heads + g * GEM_CU_GROUP;
    if (hf == 0) {
#pragma unroll
        for (int h = 0; h < GEM_CU_GROUP; h++) {
            const float4 b = xo[h * HT + d4];
            float4 r;
            r.x = o[h].x + b.x;
            r.y = o[h].y + b.y;
            r.z = o[h].z + b.z;
            r.w = o[h].w + b.w;
            reinterpret_cast<float4 *>(part_o)[(row0 + h) * GEM_CU_ROW_F4 + d4] = r;
        }
    }
    if (lane == 0) {
        part_m[row0 + warp] = m;
        part_s[row0 + warp] = s;
    }
}

/* The compiled variants, one extern "C" symbol each (the receipt names them). */
#define GEM_FUSED_FIRST_PASS(T, S, V)                                                          \
    extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS, 2)                            \
        gem_fused_first_pass_t##T##_s##S##_v##V(                                               \
            const float *__restrict__ q, const float *__restrict__ k,                          \
            const float *__restrict__ v, float *__restrict__ part_m,                           \
            float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,              \
            int64_t partitions, float scale)                                                   \
    {                                                                                          \
        gem_fused_first_pass_body<T, S, V>(q, k, v, part_m, part_s, part_o, live, partitions,  \
                                           scale);                                             \
    }

GEM_FUSED_FIRST_PASS(4, 1, 0)
GEM_FUSED_FIRST_PASS(8, 1, 0)
GEM_FUSED_FIRST_PASS(16, 1, 0)
GEM_FUSED_FIRST_PASS(4, 2, 0)
GEM_FUSED_FIRST_PASS(8, 2, 0)
GEM_FUSED_FIRST_PASS(16, 2, 0)
GEM_FUSED_FIRST_PASS(4, 3, 0)
GEM_FUSED_FIRST_PASS(8, 3, 0)
GEM_FUSED_FIRST_PASS(16, 3, 0)
GEM_FUSED_FIRST_PASS(4, 1, 1)
GEM_FUSED_FIRST_PASS(8, 1, 1)
GEM_FUSED_FIRST_PASS(16, 1, 1)
GEM_FUSED_FIRST_PASS(4, 2, 1)
GEM_FUSED_FIRST_PASS(8, 2, 1)
GEM_FUSED_FIRST_PASS(16, 2, 1)
GEM_FUSED_FIRST_PASS(4, 3, 1)
GEM_FUSED_FIRST_PASS(8, 3, 1)
GEM_FUSED_FIRST_PASS(16, 3, 1)
GEM_FUSED_FIRST_PASS(4, 2, 2)
GEM_FUSED_FIRST_PASS(8, 2, 2)
GEM_FUSED_FIRST_PASS(4, 3, 2)
GEM_FUSED_FIRST_PASS(8, 3, 2)
GEM_FUSED_FIRST_PASS(8, 1, 2)
GEM_FUSED_FIRST_PASS(4, 1, 2)
GEM_FUSED_FIRST_PASS(4, 0, 2)
GEM_FUSED_FIRST_PASS(8, 0, 2)

/* VSHARE = 3: STAGES is the number of bulk-copy buffers (2 or 3); tiles 8 and 16. */
#define GEM_FUSED_FIRST_PASS_QUAD(T, S)                                                        \
    extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS, 2)                            \
        gem_fused_first_pass_t##T##_s##S##_v3(                                                 \
            const float *__restrict__ q, const float *__restrict__ k,                          \
            const float *__restrict__ v, float *__restrict__ part_m,                           \
            float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,              \
            int64_t partitions, float scale)                                                   \
    {                                                                                          \
        gem_fused_first_pass_quad<T, S>(q, k, v, part_m, part_s, part_o, live, partitions,     \
                                        scale);                                                \
    }

GEM_FUSED_FIRST_PASS_QUAD(8, 2)
GEM_FUSED_FIRST_PASS_QUAD(8, 3)
GEM_FUSED_FIRST_PASS_QUAD(16, 2)
GEM_FUSED_FIRST_PASS_QUAD(16, 3)

/* VSHARE = 4 (plain ld.global) and 5 (L1 no-allocate, L2 evict-first): STAGES 0, tile 8, run 4's
 * reducer; 6: 5's first pass with the one-round reducer; 7: 6 with Q in shared memory and the
 * next tile's V issued right after this tile's dots (SCHED 1). */
#define GEM_FUSED_FIRST_PASS_WIDE(V, HINT, SCHED)                                              \
    extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS, 2)                            \
        gem_fused_first_pass_t8_s0_v##V(                                                       \
            const float *__restrict__ q, const float *__restrict__ k,                          \
            const float *__restrict__ v, float *__restrict__ part_m,                           \
            float *__restrict__ part_s, float *__restrict__ part_o, int64_t live,              \
            int64_t partitions, float scale)                                                   \
    {                                                                                          \
        gem_fused_first_pass_wide<8, HINT, SCHED>(q, k, v, part_m, part_s, part_o, live,       \
                                                  partitions, scale);                          \
    }

GEM_FUSED_FIRST_PASS_WIDE(4, 0, 0)
GEM_FUSED_FIRST_PASS_WIDE(5, 1, 0)
GEM_FUSED_FIRST_PASS_WIDE(6, 1, 0)
GEM_FUSED_FIRST_PASS_WIDE(7, 1, 1)

typedef void (*gem_first_pass_fn)(const float *, const float *, const float *, float *, float *,
                                  float *, int64_t, int64_t, float);

typedef struct gem_first_pass_entry {
    int tile, stages, vshare;
    gem_first_pass_fn fn;
    const char *name;
} gem_first_pass_entry;

#define GEM_FP_ENTRY(T, S, V)                                                                  \
    {T, S, V, gem_fused_first_pass_t##T##_s##S##_v##V,                                         \
     "gem_fused_first_pass_t" #T "_s" #S "_v" #V}

static const gem_first_pass_entry gem_first_pass_table[] = {
    GEM_FP_ENTRY(4, 1, 0),  GEM_FP_ENTRY(8, 1, 0), GEM_FP_ENTRY(16, 1, 0),
    GEM_FP_ENTRY(4, 2, 0),  GEM_FP_ENTRY(8, 2, 0), GEM_FP_ENTRY(16, 2, 0),
    GEM_FP_ENTRY(4, 3, 0),  GEM_FP_ENTRY(8, 3, 0), GEM_FP_ENTRY(16, 3, 0),
    GEM_FP_ENTRY(4, 1, 1),  GEM_FP_ENTRY(8, 1, 1), GEM_FP_ENTRY(16, 1, 1),
    GEM_FP_ENTRY(4, 2, 1),  GEM_FP_ENTRY(8, 2, 1), GEM_FP_ENTRY(16, 2, 1),
    GEM_FP_ENTRY(4, 3, 1),  GEM_FP_ENTRY(8, 3, 1), GEM_FP_ENTRY(16, 3, 1),
    GEM_FP_ENTRY(4, 2, 2),  GEM_FP_ENTRY(8, 2, 2), GEM_FP_ENTRY(4, 3, 2),
    GEM_FP_ENTRY(8, 3, 2),  GEM_FP_ENTRY(8, 1, 2), GEM_FP_ENTRY(4, 1, 2),
    GEM_FP_ENTRY(4, 0, 2),  GEM_FP_ENTRY(8, 0, 2),  GEM_FP_ENTRY(8, 2, 3),
    GEM_FP_ENTRY(8, 3, 3),  GEM_FP_ENTRY(16, 2, 3), GEM_FP_ENTRY(16, 3, 3),
    GEM_FP_ENTRY(8, 0, 4),  GEM_FP_ENTRY(8, 0, 5),  GEM_FP_ENTRY(8, 0, 6),
    GEM_FP_ENTRY(8, 0, 7),
};
#define GEM_FP_COUNT (sizeof gem_first_pass_table / sizeof gem_first_pass_table[0])

static size_t gem_fp_dynamic_bytes(int tile, int stages)
{
    return (size_t)stages * 2u * (size_t)tile * GEM_CU_D * sizeof(float);
}

/* ---- reducer ------------------------------------------------------------------ */

/* One merge step of gem_online_merge for one dim, written with explicit
 * roundings so that no multiply-add is contracted. */
extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS)
    gem_fused_reducer(const float *__restrict__ part_m, /* (P, n_q_heads) */
                      const float *__restrict__ part_s, /* (P, n_q_heads) */
                      const float *__restrict__ part_o, /* (P, n_q_heads, 512) */
                      float *__restrict__ out,          /* (n_q_heads, 512) */
                      int64_t partitions)
{
    const int64_t h = blockIdx.x, n_q_heads = gridDim.x;
    const int64_t d = (int64_t)blockIdx.y * GEM_CU_THREADS + threadIdx.x;
    float m = -INFINITY, s = 0.f, o = 0.f;
    const int B = 16; /* partials loaded ahead of the merge chain */
    for (int64_t p0 = 0; p0 < partitions; p0 += B) {
        float mp[B], spv[B], op[B];
#pragma unroll
        for (int b = 0; b < B; b++) {
            const int64_t p = p0 + b;
            const int ok = p < partitions;
            const int64_t r = ok ? p * n_q_heads + h : 0;
            mp[b] = ok ? __ldg(part_m + r) : -INFINITY;
            spv[b] = ok ? __ldg(part_s + r) : 0.f;
            op[b] = ok ? __ldg(part_o + r * GEM_CU_D + d) : 0.f;
        }
#pragma unroll
        for (int b = 0; b < B; b++) {
            if (spv[b] == 0.f)
                continue; /* an empty partial is the identity */
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
    out[h * GEM_CU_D + d] = __fdiv_rn(o, s);
}

/* The reducer of the VSHARE = 3, 6 and 7 variants: the same merges in the same order as
 * gem_fused_reducer (so the same bits for the same partials), with fewer dependent load
 * rounds: each thread issues the O loads of 64 partials at once, while threads 0..63 stage
 * their (M, S) in shared memory. */
#define GEM_CU_WIDE_B 64
extern "C" __global__ void __launch_bounds__(GEM_CU_THREADS)
    gem_fused_reducer_wide(const float *__restrict__ part_m, /* (P, n_q_heads) */
                           const float *__restrict__ part_s, /* (P, n_q_heads) */
                           const float *__restrict__ part_o, /* (P, n_q_heads, 512) */
                           float *__restrict__ out,          /* (n_q_heads, 512) */
                           int64_t partitions)
{
    __shared__ float sm[GEM_CU_WIDE_B], ss[GEM_CU_WIDE_B];
    const int64_t h = blockIdx.x, n_q_heads = gridDim.x;
    const int64_t d = (int64_t)blockIdx.y * GEM_CU_THREADS + threadIdx.x;
    float m = -INFINITY, s = 0.f, o = 0.f;
    for (int64_t p0 = 0; p0 < partitions; p0 += GEM_CU_WIDE_B) {
        float op[GEM_CU_WIDE_B];
#pragma unroll
        for (int b = 0; b < GEM_CU_WIDE_B; b++) {
            const int64_t p = p0 + b;
            op[b] = p < partitions ? __ldg(part_o + (p * n_q_heads + h) * GEM_CU_D + d) : 0.f;
        }
        if (threadIdx.x < GEM_CU_WIDE_B) {
            const int64_t p = p0 + threadIdx.x;
            const int ok = p < partitions;
            sm[threadIdx.x] = ok ? __ldg(part_m + p * n_q_heads + h) : -INFINITY;
            ss[threadIdx.x] = ok ? __ldg(part_s + p * n_q_heads + h) : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int b = 0; b < GEM_CU_WIDE_B; b++) {
            const float mb = sm[b], sb = ss[b];
            if (sb == 0.f)
                continue; /* an empty partial is the identity */
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
        __syncthreads(); /* sm/ss are rewritten by the next round */
    }
    out[h * GEM_CU_D + d] = __fdiv_rn(o, s);
}

/* ---- host side ------------------------------------------------------------------ */

/* The variants merged by gem_fused_reducer_wide (one load round per 64 partials). */
static int gem_fp_wide_reducer(int vshare)
{
    return vshare == 3 || vshare == 6 || vshare == 7;
}

static const gem_first_pass_entry *gem_fp_find(const gem_cu_fused_variant *var)
{
    for (size_t i = 0; i < GEM_FP_COUNT; i++) {
        const gem_first_pass_entry *e = &gem_first_pass_table[i];
        if (e->tile == var->tile && e->stages == var->stages && e->vshare == var->vshare)
            return e;
    }
    return NULL;
}

gem_status gem_cu_fused_kernels(const gem_cu_fused_variant *var, gem_cu_kernel_ref *first,
                                gem_cu_kernel_ref *reducer)
{
    const gem_first_pass_entry *e = gem_fp_find(var);
    if (!e)
        return GEM_ERR_PARAM;
    first->func = (const void *)e->fn;
    first->name = e->name;
    first->role = "fused_first_pass";
    first->dynamic_shared = gem_fp_dynamic_bytes(e->tile, e->stages);
    first->threads = GEM_CU_THREADS;
    const int wide = gem_fp_wide_reducer(e->vshare);
    reducer->func = wide ? (const void *)gem_fused_reducer_wide : (const void *)gem_fused_reducer;
    reducer->name = wide ? "gem_fused_reducer_wide" : "gem_fused_reducer";
    reducer->role = "fused_reducer";
    reducer->dynamic_shared = 0;
    reducer->threads = GEM_CU_THREADS;
    return GEM_OK;
}

gem_status gem_cu_fused_prepare(void)
{
    for (size_t i = 0; i < GEM_FP_COUNT; i++) {
        const gem_first_pass_entry *e = &gem_first_pass_table[i];
        /* always: static shared bytes count against the 48 KiB default too */
        const size_t dyn = gem_fp_dynamic_bytes(e->tile, e->stages);
        GEM_CUDA_CHECK(cudaFuncSetAttribute((const void *)e->fn,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn));
    }
    return GEM_OK;
}

int64_t gem_cu_fused_first_blocks(int64_t n_kv_heads, int64_t partitions)
{
    return n_kv_heads * partitions;
}

int64_t gem_cu_fused_reducer_blocks(int64_t n_q_heads)
{
    return n_q_heads * (GEM_CU_D / GEM_CU_THREADS);
}

gem_status gem_cu_fused_launch(const gem_cu_fused_variant *var, const gem_cu_fused_args *a,
                               cudaStream_t stream)
{
    const gem_first_pass_entry *e = gem_fp_find(var);
    if (!e)
        return GEM_ERR_PARAM;
    if (a->partitions < 1 || a->partitions > 65535 || a->n_kv_heads < 1 ||
        a->n_kv_heads > 65535 / GEM_CU_GROUP)
        return GEM_ERR_PARAM;
    const dim3 grid1((unsigned)a->partitions, (unsigned)a->n_kv_heads);
    e->fn<<<grid1, GEM_CU_THREADS, gem_fp_dynamic_bytes(e->tile, e->stages), stream>>>(
        a->q, a->k, a->v, a->part_m, a->part_s, a->part_o, a->live, a->partitions, a->scale);
    GEM_CUDA_CHECK(cudaGetLastError());
    const dim3 grid2((unsigned)(a->n_kv_heads * GEM_CU_GROUP), GEM_CU_D / GEM_CU_THREADS);
    if (gem_fp_wide_reducer(e->vshare))
        gem_fused_reducer_wide<<<grid2, GEM_CU_THREADS, 0, stream>>>(
            a->part_m, a->part_s, a->part_o, a->out, a->partitions);
    else
        gem_fused_reducer<<<grid2, GEM_CU_THREADS, 0, stream>>>(a->part_m, a->part_s,
                                                                a->part_o, a->out, a->partitions);
    GEM_CUDA_CHECK(cudaGetLastError());
    return GEM_OK;
}
