/*
layer_persistent: a 31B sliding layer's products as one persistent kernel whose weights stream
ahead of the layer's dependences, against the library's launches of the same products.

A 31B sliding layer reads 269.4 MB of Q4_0 weights (59 us at the H200's 4.54 TB/s), and its
chain of launches takes about 114 us (dev/cuda/norm_prefetch, run 143), 99 us with the norm
kernels left out (run 153's bound). Each launch waits for the one before it to end, so DRAM idles
in every product's ramp and tail and in every small kernel between them; the products' blocks,
launched early as programmatic dependents, can fetch only the first batch of their weights before
they wait. The weights depend on nothing the token computes. Here one block an SM, resident for
the whole chain (a cooperative launch), has a producer warp that copies the block's next tiles
(cp.async.bulk, one bulk copy a tile, completion on an mbarrier) into a ring of two 96,768-byte
stages in the block's order of work across every phase and layer, and 16 consumer warps that
compute the tiles from shared memory and meet the other blocks at a grid barrier wherever the
layer has a dependence. While the consumers wait at a barrier, the producer keeps filling the
ring with the next phase's weights.

The chain, per layer (the products of dev/cuda/norm_prefetch's chain, whose --bounds variant runs
them without the norm kernels; matrices of copy c = layer % copies, copies enough to pass 4 x the
L2), each phase followed by a grid barrier:
  D1  the x scratch of q's outputs (the o product's input; one warp a 32-element block)
  P1  o     (5376 x 8192, the library's split: tiles of 8 warps, two at once)
  P2  gate+up (2 x 21504 x 5376, GeGLU's split: tiles of 6 warps, two at once), reading the
      scratch the checked chain left (in the decoder the post-attention norm writes it)
  D2  the x scratch of GeGLU's outputs (the down product's input)
  P3  down  (5376 x 21504, tiles of 16 warps)
  P4  q, k, v (8192 / 4096 / 4096 x 5376, tiles of 4 warps, four at once), reading the scratch
      the checked chain left (in the decoder the post-MLP norm writes it)
The library's launches of the same products: gem_dmv (o, with its scratch kernel),
gem_dmv_geglu_prepared, gem_dmv (down, with its scratch kernel), gem_dmv_multi_prepared.

The whole layer (norm_prefetch's chain with nothing prefetched) adds the post-attention norm
after o and after down (x += rmsnorm(o) w; xn = rmsnorm(x) w'; the next product's scratch), the
library's post_attn_kernel (sliding_chain.h's copy, with no bytes asked ahead): persistent, each
is a phase of its own (NA, NB) in which every block computes both sums of squares as the
library's six blocks each do (its 512 consumers take two of the library's 1,024 threads each, so
the trees and the bits are the same), then the grid's warps store x, xn and the scratch a
32-element block each.

A block's steps: a step is the tiles its warp groups compute at once (G = 16 / W tiles of a
phase whose tiles take W warps); the phase's steps go to the blocks in turn, continuing where the
phase before left off, so no block gets every phase's extra step. Every tile is computed with the
library's split of its chunks over W warps, the library's chunk arithmetic (tiles_arith.cuh) and
its order of additions, so every output must equal the library's bit for bit; the program checks
that after the chain (and a repeat of each variant) before it times anything (exit 1 otherwise).

Variants (the same bits as the library's launches of the same chain):
  library, products / layer           the library's launches
  persistent, products / layer        the producer running ahead across the barriers
  persistent, ..., waiting            the producer waiting at each barrier before it copies the
                                      next phase's tiles (what running ahead is worth)
  persistent, no arithmetic           the products' chain with the consumers computing nothing
                                      (they wait for each stage and free it): what the ring, the
                                      barriers and the digits' phases take alone (not checked)
  persistent, stream alone            the same without the grid barriers: the ring's own rate
  persistent, arithmetic alone        the products' chain with its barriers and arithmetic on
                                      whatever the stages hold, no weights copied (not checked)
  read probe                          a streaming read of the layer's bytes

Caveat of the prototype: the scratch a phase writes for the next (D1, D2, NA, NB) is read by
plain loads after the barrier's acquire, in one of 4 buffers taken in turn by layer; the library
would have to settle how a phase's scratch reaches every SM.

Timing: chains of --layers layers (default 12), events around the chain alone, variants in order
then reversed each round, --rounds rounds (default 10): the median us a layer, p10 and p90, and
the fraction of the weights' bytes at a streaming read measured in the same process.

./layer_persistent [--rounds R] [--layers L]

Run 169 (results/h200/run169), on an H100 (no H200 machine could be started then): every
variant equal to the library bit for bit after 12 layers. Medians of 20 chains, us a layer (the
read probe: 88.2 us for the layer's 269.4 MB, 3,055 GB/s):

  library, products 119.4 (74% of the probe)   persistent 151.8 (58%)   waiting 162.3
  library, layer    133.4 (66%)                persistent 176.6 (50%)   waiting 184.4
  persistent, no arithmetic 107.6 (82%)        stream alone 92.4 (95%)
  arithmetic alone (out/arith, a later call: library products 119.5, persistent 151.5) 110.1

Running ahead is worth 8-10 us a layer, about what the library's products lose to their ramps,
tails and small kernels; the ring streams at 95% of the probe alone and 82% with the barriers,
the phases' uneven steps and the scratch phases. But the arithmetic does not keep up: 16
consumer warps an SM (96 registers; ncu 0.27 instructions issued a cycle a scheduler, 4.3 warps a
scheduler, a warp's cycles stalled on L1TEX loads (the scratch's digits) 36% and on barriers),
where the library's launches keep 24-32 warps an SM. A warp's chunks loaded two at a time and a
stage freed warp by warp, each tile summed at its own group's barrier (the program as it stands),
moved nothing: 151.4 us against 152.9 for one chunk at a time and a block barrier a step. The
arithmetic alone, with the barriers and no weights, takes 110.1 us: about the library's whole
products chain; with the copies it takes 151.5, not the larger of the two (why is not measured). A
persistent chain needs a consumer that computes a chunk in fewer instructions or with twice the
warps (say a producer folded into a consumer thread, at 64 registers) before it can gain.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "sliding_chain.h"

#define TILE_ROWS 8
#define CHUNK_BYTES 576
#define XQ_LANE GEM_TILES_XQ_LANE_BYTES
#define XQ_CHUNK GEM_TILES_XQ_CHUNK_BYTES
#define CW 16             /* consumer warps */
#define CT (CW * 32)      /* consumer threads */
#define SLOT_BYTES 96768  /* 168 chunks: a step of every phase fits */
#define NSLOT 2
#define MAXCOPY 4
#define NROT 4
#define NPH 8
#define EPS 1e-6
static const unsigned kFull = 0xffffffffu;

enum { K_DIGITS, K_PLAIN, K_GEGLU, K_NORM };

struct Phase {
    int kind, nmat, W, G, cpw;
    int64_t tiles, nchunks, steps, nblk;
    int64_t tile0[3];
    const unsigned char *data[MAXCOPY][3];
    float *y[3];
    const unsigned char *xq[NROT]; /* products: the scratch read in layer l (l % NROT) */
    const float *x;                /* digits: the input; norm: o */
    unsigned char *xq_out[NROT];   /* digits, norm: the scratch written in layer l */
    const float *x_in, *w_post, *w_next; /* norm: x_out = x_in + rmsnorm(x) w_post; */
    float *x_out, *xn;                   /* xn = rmsnorm(x_out) w_next */
};

struct Chain {
    Phase ph[NPH];
    int nph, layers, copy0, ncopies, ahead, arithmetic, barriers, weights;
    int64_t steps_per_layer;
    unsigned *bar;
};

/* ---- shared-memory barriers and bulk copies ------------------------------------------------- */

__device__ __forceinline__ uint32_t saddr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(uint32_t a, unsigned n)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(a), "r"(n) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint32_t a, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(a), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t a)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(a) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t a, uint32_t parity)
{
    asm volatile("{\n\t.reg .pred P1;\n\t"
                 "WAIT_%=:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
                 "@P1 bra DONE_%=;\n\t"
                 "bra WAIT_%=;\n\t"
                 "DONE_%=:\n\t}\n" ::"r"(a),
                 "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void *src, uint32_t bytes,
                                          uint32_t bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                 "%2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ void consumers_sync()
{
    asm volatile("bar.sync 1, %0;\n" ::"n"(CT) : "memory");
}
/* The W warps of warp group g (barriers 2 .. 2 + CW / W - 1; 1 is the consumers'). */
__device__ __forceinline__ void group_sync(int g, int w)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(2 + g), "r"(32 * w) : "memory");
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* Every consumer of every block has passed its k-th barrier (target = k * blocks): the grid's
 * writes before it are visible to every consumer after it. */
__device__ void grid_barrier(unsigned *bar, unsigned target)
{
    consumers_sync();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(bar, 1u);
        while (ld_acquire(bar) < target)
            ;
        __threadfence();
    }
    consumers_sync();
}

/* The first step of phase p in layer l goes to block step_offset(...); the rest in turn. */
__device__ __forceinline__ int64_t first_step(const Chain &c, int l, int p, int64_t nb)
{
    int64_t off = (int64_t)l * c.steps_per_layer;
    for (int q = 0; q < p; q++)
        off += c.ph[q].steps; /* 0 for the digits and the norms */
    const int64_t b = blockIdx.x;
    return ((b - off) % nb + nb) % nb;
}

/* The barriers completed before phase p of layer l starts. */
__device__ __forceinline__ unsigned barriers_before(const Chain &c, int l, int p)
{
    return (unsigned)(l * c.nph + p);
}

/* The library's block_sum over NORM_THREADS threads, computed by the CT consumers: consumer t
 * holds the sums of the library's threads t (a) and t + CT (b), whose warps are warp and warp +
 * CW; the same trees in the same order, so the same bits. sh (33) shared. */
__device__ double norm_sum2(double a, double b, double *sh)
{
    static_assert(NORM_THREADS == 2 * CT, "two of the library's threads a consumer");
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_down_sync(kFull, a, o);
        b += __shfl_down_sync(kFull, b, o);
    }
    consumers_sync(); /* sh may still be read from a previous sum */
    if (lane == 0) {
        sh[warp] = a;
        sh[warp + CW] = b;
    }
    consumers_sync();
    if (warp == 0) {
        double v = sh[lane];
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_down_sync(kFull, v, o);
        if (lane == 0)
            sh[32] = v;
    }
    consumers_sync();
    return sh[32];
}

/* The post-attention norm of gemma4_cuda.cu's post_attn_kernel, every block computing both sums
 * (the library's six blocks each do too), then the warps of the grid storing x_out, xn and the
 * scratch of one 32-element block each in turn: the library's bits. */
__device__ void norm_phase(const Phase &ph, int rot, double *sh)
{
    const int64_t n = N_EMBD, nb = gridDim.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float ov[2][NORM_PER_THREAD], xv[2][NORM_PER_THREAD];
    double s1[2] = {0.0, 0.0}, s2[2] = {0.0, 0.0};
#pragma unroll
    for (int v = 0; v < 2; v++)
#pragma unroll
        for (int k = 0; k < NORM_PER_THREAD; k++) {
            const int64_t i = threadIdx.x + (int64_t)v * CT + (int64_t)k * NORM_THREADS;
            ov[v][k] = i < n ? __ldcg(ph.x + i) : 0.0f;
            xv[v][k] = i < n ? __ldcg(ph.x_in + i) : 0.0f;
            if (i < n)
                s1[v] += (double)ov[v][k] * (double)ov[v][k];
        }
    const double r1 = 1.0 / sqrt(norm_sum2(s1[0], s1[1], sh) / (double)n + EPS);
#pragma unroll
    for (int v = 0; v < 2; v++)
#pragma unroll
        for (int k = 0; k < NORM_PER_THREAD; k++) {
            const int64_t i = threadIdx.x + (int64_t)v * CT + (int64_t)k * NORM_THREADS;
            if (i < n) {
                xv[v][k] += (float)((double)ov[v][k] * r1) * ph.w_post[i];
                s2[v] += (double)xv[v][k] * (double)xv[v][k];
            }
        }
    const double r2 = 1.0 / sqrt(norm_sum2(s2[0], s2[1], sh) / (double)n + EPS);
    for (int64_t d = (int64_t)blockIdx.x * CW + warp; d < n / 32; d += nb * CW) {
        const int64_t i = 32 * d + lane;
        const float xo =
            __ldcg(ph.x_in + i) + (float)((double)__ldcg(ph.x + i) * r1) * ph.w_post[i];
        const float y = (float)((double)xo * r2) * ph.w_next[i];
        ph.x_out[i] = xo;
        ph.xn[i] = y;
        gem_tiles_xq_block(y, d, ph.xq_out[rot], lane);
    }
}

/* A warp's chunks [cb, ce) of its tile in the stage st (GEGLU: the up tile tb bytes on) into a0
 * (a1): the operands of BATCH chunks loaded together, then their arithmetic in chunk order, so
 * the accumulators take the library's order. Two chunks a batch keep the kernel at 96 registers
 * (__maxnreg__; an SM gives 17 warps the registers of 20) with 60 bytes of spills (ptxas,
 * CUDA 13.0; 112 registers do not launch). */
template <bool GEGLU, int BATCH = 2>
__device__ __forceinline__ void step_chunks(const unsigned char *st, size_t tb,
                                            const unsigned char *xq, int64_t cb, int64_t ce,
                                            size_t dl, int lane, uint32_t m0, float (&a0)[4],
                                            float (&a1)[4])
{
    for (int64_t c0 = cb; c0 < ce; c0 += BATCH) {
        uint4 dg[BATCH], cx[BATCH], wq[BATCH], wq1[BATCH];
        uint2 dd[BATCH], dd1[BATCH];
#pragma unroll
        for (int k = 0; k < BATCH; k++)
            if (c0 + k < ce) {
                const uint4 *xc = reinterpret_cast<const uint4 *>(
                    xq + (size_t)(c0 + k) * XQ_CHUNK + (size_t)XQ_LANE * lane);
                dg[k] = xc[0];
                cx[k] = xc[1];
                const unsigned char *cc = st + (size_t)(c0 + k) * CHUNK_BYTES;
                wq[k] = *reinterpret_cast<const uint4 *>(cc + 16 * lane);
                dd[k] = *reinterpret_cast<const uint2 *>(cc + dl);
                if (GEGLU) {
                    wq1[k] = *reinterpret_cast<const uint4 *>(cc + tb + 16 * lane);
                    dd1[k] = *reinterpret_cast<const uint2 *>(cc + tb + dl);
                }
            }
#pragma unroll
        for (int k = 0; k < BATCH; k++)
            if (c0 + k < ce) {
                gem_tiles_chunk(wq[k], dd[k], dg[k], cx[k], m0, a0);
                if (GEGLU)
                    gem_tiles_chunk(wq1[k], dd1[k], dg[k], cx[k], m0, a1);
            }
    }
}

__global__ void __maxnreg__(96) chain_kernel(const Chain c)
{
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ __align__(8) uint64_t full[NSLOT], empty[NSLOT];
    __shared__ float red[2][2][CW][TILE_ROWS];
    __shared__ double sh[33];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t nb = gridDim.x;
    if (threadIdx.x == 0) {
        for (int s = 0; s < NSLOT; s++) {
            mbar_init(saddr(&full[s]), 1);
            mbar_init(saddr(&empty[s]), CW); /* every consumer warp, once it has read the stage */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warp == CW) { /* the producer */
        if (lane != 0 || !c.weights)
            return;
        uint32_t it = 0;
        for (int l = 0; l < c.layers; l++) {
            const int cp = (c.copy0 + l) % c.ncopies;
            for (int p = 0; p < c.nph; p++) {
                const Phase &ph = c.ph[p];
                if (ph.kind == K_DIGITS || ph.kind == K_NORM)
                    continue;
                if (!c.ahead) /* wait for the barrier before the phase */
                    while (ld_acquire(c.bar) < barriers_before(c, l, p) * (unsigned)nb)
                        ;
                const size_t tb = (size_t)ph.nchunks * CHUNK_BYTES;
                const int nm = ph.kind == K_GEGLU ? 2 : 1;
                for (int64_t s = first_step(c, l, p, nb); s < ph.steps; s += nb, it++) {
                    const int slot = (int)(it % NSLOT);
                    const uint32_t n = it / NSLOT;
                    if (n >= 1)
                        mbar_wait(saddr(&empty[slot]), (n - 1) & 1);
                    const int64_t t0 = s * ph.G;
                    const int64_t nv = ph.tiles - t0 < ph.G ? ph.tiles - t0 : ph.G;
                    const uint32_t fb = saddr(&full[slot]);
                    mbar_expect(fb, (uint32_t)(nv * nm * tb));
                    const uint32_t base = saddr(ring + (size_t)slot * SLOT_BYTES);
                    for (int64_t g = 0; g < nv; g++) {
                        const int64_t tile = t0 + g;
                        if (ph.kind == K_GEGLU) {
                            bulk_copy(base + (uint32_t)(g * 2 * tb), ph.data[cp][0] + tile * tb,
                                      (uint32_t)tb, fb);
                            bulk_copy(base + (uint32_t)(g * 2 * tb + tb),
                                      ph.data[cp][1] + tile * tb, (uint32_t)tb, fb);
                        } else {
                            int m = 0;
                            while (m + 1 < ph.nmat && tile >= ph.tile0[m + 1])
                                m++;
                            bulk_copy(base + (uint32_t)(g * tb),
                                      ph.data[cp][m] + (tile - ph.tile0[m]) * tb, (uint32_t)tb, fb);
                        }
                    }
                }
            }
        }
        return;
    }

    /* the consumers */
    const int g4 = lane >> 2, t = lane & 3, h = g4 >> 2;
    const uint32_t m0 = h ? 0u : kFull;
    uint32_t it = 0;
    for (int l = 0; l < c.layers; l++) {
        const int rot = l % NROT;
        for (int p = 0; p < c.nph; p++) {
            const Phase &ph = c.ph[p];
            if (ph.kind == K_NORM) {
                norm_phase(ph, rot, sh);
            } else if (ph.kind == K_DIGITS) {
                for (int64_t d = (int64_t)blockIdx.x * CW + warp; d < ph.nblk; d += nb * CW) {
                    const float v = __ldcg(ph.x + 32 * d + lane);
                    gem_tiles_xq_block(v, d, ph.xq_out[rot], lane);
                }
            } else {
                const bool geglu = ph.kind == K_GEGLU;
                const size_t tb = (size_t)ph.nchunks * CHUNK_BYTES;
                const int W = ph.W, group = warp / W, wi = warp % W;
                const unsigned char *xq = ph.xq[rot];
                for (int64_t s = first_step(c, l, p, nb); s < ph.steps; s += nb, it++) {
                    const int slot = (int)(it % NSLOT), buf = (int)(it & 1);
                    if (c.weights)
                        mbar_wait(saddr(&full[slot]), (it / NSLOT) & 1);
                    const int64_t tile = s * ph.G + group;
                    const bool valid = group < ph.G && tile < ph.tiles;
                    float a0[4] = {0.f, 0.f, 0.f, 0.f}, a1[4] = {0.f, 0.f, 0.f, 0.f};
                    if (valid && c.arithmetic) {
                        const unsigned char *st =
                            ring + (size_t)slot * SLOT_BYTES + (size_t)group * (geglu ? 2 : 1) * tb;
                        const int64_t cb = (int64_t)wi * ph.cpw;
                        const int64_t ce = cb + ph.cpw < ph.nchunks ? cb + ph.cpw : ph.nchunks;
                        const size_t dl = (size_t)(512 + 8 * (4 * h + t));
                        if (geglu)
                            step_chunks<true>(st, tb, xq, cb, ce, dl, lane, m0, a0, a1);
                        else
                            step_chunks<false>(st, tb, xq, cb, ce, dl, lane, m0, a0, a1);
                    }
                    float r0 = a0[0] + a0[2], r1 = a0[1] + a0[3];
                    float u0 = a1[0] + a1[2], u1 = a1[1] + a1[3];
                    for (int o = 4; o < 32; o <<= 1) {
                        r0 += __shfl_xor_sync(kFull, r0, o);
                        r1 += __shfl_xor_sync(kFull, r1, o);
                        u0 += __shfl_xor_sync(kFull, u0, o);
                        u1 += __shfl_xor_sync(kFull, u1, o);
                    }
                    __syncwarp(); /* the warp has read its part of the stage */
                    if (lane == 0)
                        mbar_arrive(saddr(&empty[slot]));
                    if (!valid)
                        continue;
                    if (g4 == 0) {
                        red[buf][0][warp][2 * t] = r0;
                        red[buf][0][warp][2 * t + 1] = r1;
                        red[buf][1][warp][2 * t] = u0;
                        red[buf][1][warp][2 * t + 1] = u1;
                    }
                    group_sync(group, W); /* the group's red is written */
                    if (wi == 0 && lane < TILE_ROWS) {
                        const int r = lane, w0 = group * W;
                        float sum = red[buf][0][w0][r];
                        for (int w = 1; w < W; w++)
                            sum += red[buf][0][w0 + w][r];
                        if (geglu) {
                            float u = red[buf][1][w0][r];
                            for (int w = 1; w < W; w++)
                                u += red[buf][1][w0 + w][r];
                            ph.y[0][(size_t)tile * TILE_ROWS + (size_t)r] =
                                __fmul_rn(gem_gelu_tanh(sum), u);
                        } else {
                            int m = 0;
                            while (m + 1 < ph.nmat && tile >= ph.tile0[m + 1])
                                m++;
                            ph.y[m][(size_t)(tile - ph.tile0[m]) * TILE_ROWS + (size_t)r] = sum;
                        }
                    }
                }
            }
            if (c.barriers)
                grid_barrier(c.bar, (barriers_before(c, l, p) + 1) * (unsigned)nb);
        }
    }
}

/* ---- the chain ----------------------------------------------------------------------------- */

typedef struct chain {
    int ncopies;
    gem_dmatrix (*m)[M_COUNT];
    float *x[2], *xn, *o_out, *act, *d_out, *yq, *yk, *yv, *w_post, *w_ffn;
    void *xq_o, *xq_mlp, *xq_down, *xq_qkv, *xq_mlp_layer, *xq_qkv_layer;
    unsigned char *xqo_rot[NROT], *xqd_rot[NROT], *xqm_rot[NROT], *xqq_rot[NROT];
    unsigned *bar;
    cudaStream_t st;
} chain;

/* The library's launches of one layer's products on copy c (the --bounds chain of
 * norm_prefetch: GeGLU and q/k/v read the scratch left before the chain). */
static void layer_products(chain *ch, int c)
{
    gem_dmatrix *m = ch->m[c];
    GEM_TRY(gem_dmv(&m[M_O], ch->yq, ch->o_out, ch->xq_o, ch->st));
    GEM_TRY(gem_dmv_geglu_prepared(&m[M_GATE], &m[M_UP], ch->xn, ch->act, ch->xq_mlp, ch->st));
    GEM_TRY(gem_dmv(&m[M_DOWN], ch->act, ch->d_out, ch->xq_down, ch->st));
    const gem_dmatrix *w3[3] = {&m[M_Q], &m[M_K], &m[M_V]};
    float *y3[3] = {ch->yq, ch->yk, ch->yv};
    GEM_TRY(gem_dmv_multi_prepared(3, w3, ch->xn, y3, ch->xq_qkv, ch->st));
}

/* The library's launches of the whole layer (norm_prefetch's chain with nothing prefetched):
 * x[0] -> x[1] -> x[0]. */
static void layer_norms(chain *ch, int c)
{
    gem_dmatrix *m = ch->m[c];
    const unsigned grid = (N_EMBD + NORM_THREADS - 1) / NORM_THREADS;
    GEM_TRY(gem_dmv(&m[M_O], ch->yq, ch->o_out, ch->xq_o, ch->st));
    cudaCheck(launch_pdl(norm_pf_kernel, grid, NORM_THREADS, ch->st, (const float *)ch->o_out,
                         (const float *)ch->w_post, (const float *)ch->x[0], ch->x[1],
                         (const float *)ch->w_ffn, (int64_t)N_EMBD, EPS, ch->xn,
                         (unsigned char *)ch->xq_mlp_layer, (const unsigned char *)NULL, (size_t)0,
                         (const unsigned char *)NULL, (size_t)0));
    GEM_TRY(gem_dmv_geglu_prepared(&m[M_GATE], &m[M_UP], ch->xn, ch->act, ch->xq_mlp_layer,
                                   ch->st));
    GEM_TRY(gem_dmv(&m[M_DOWN], ch->act, ch->d_out, ch->xq_down, ch->st));
    cudaCheck(launch_pdl(norm_pf_kernel, grid, NORM_THREADS, ch->st, (const float *)ch->d_out,
                         (const float *)ch->w_post, (const float *)ch->x[1], ch->x[0],
                         (const float *)ch->w_ffn, (int64_t)N_EMBD, EPS, ch->xn,
                         (unsigned char *)ch->xq_qkv_layer, (const unsigned char *)NULL, (size_t)0,
                         (const unsigned char *)NULL, (size_t)0));
    const gem_dmatrix *w3[3] = {&m[M_Q], &m[M_K], &m[M_V]};
    float *y3[3] = {ch->yq, ch->yk, ch->yv};
    GEM_TRY(gem_dmv_multi_prepared(3, w3, ch->xn, y3, ch->xq_qkv_layer, ch->st));
}

/* The library's splits (matvec_tiles.cu's gem_tiles_launch). */
static void split(Phase *p, int64_t cols, bool geglu)
{
    p->nchunks = cols / 128;
    int64_t w;
    if (geglu) {
        w = (p->nchunks + 7) / 8;
        w = w > 16 ? 16 : w;
    } else {
        const int64_t need = (p->nchunks + 11) / 12;
        w = 1;
        while (w < need && w < 16)
            w *= 2;
    }
    p->W = (int)w;
    p->G = (int)(CW / w);
    p->cpw = (int)((p->nchunks + w - 1) / w);
}

/* The persistent chain: the products alone (norms 0: D1 o G D2 down qkv, GeGLU and q/k/v on the
 * scratch left before the chain) or the whole layer (norms 1: D1 o NA G D2 down NB qkv). */
static Chain make_chain(chain *ch, int norms)
{
    Chain c;
    memset(&c, 0, sizeof c);
    int np = 0;
    Phase *d1 = &c.ph[np++], *po = &c.ph[np++], *na = norms ? &c.ph[np++] : NULL,
          *pg = &c.ph[np++], *d2 = &c.ph[np++], *pd = &c.ph[np++],
          *nbm = norms ? &c.ph[np++] : NULL, *pq = &c.ph[np++];
    c.nph = np;
    d1->kind = K_DIGITS;
    d1->x = ch->yq;
    d1->nblk = N_Q / 32;
    d2->kind = K_DIGITS;
    d2->x = ch->act;
    d2->nblk = N_FF / 32;
    for (int r = 0; r < NROT; r++) {
        d1->xq_out[r] = ch->xqo_rot[r];
        po->xq[r] = ch->xqo_rot[r];
        d2->xq_out[r] = ch->xqd_rot[r];
        pd->xq[r] = ch->xqd_rot[r];
        pg->xq[r] = norms ? ch->xqm_rot[r] : (const unsigned char *)ch->xq_mlp;
        pq->xq[r] = norms ? ch->xqq_rot[r] : (const unsigned char *)ch->xq_qkv;
    }
    if (norms) {
        Phase *nn[2] = {na, nbm};
        for (int k = 0; k < 2; k++) {
            nn[k]->kind = K_NORM;
            nn[k]->x = k ? ch->d_out : ch->o_out;
            nn[k]->x_in = ch->x[k];
            nn[k]->x_out = ch->x[k ^ 1];
            nn[k]->w_post = ch->w_post;
            nn[k]->w_next = ch->w_ffn;
            nn[k]->xn = ch->xn;
            for (int r = 0; r < NROT; r++)
                nn[k]->xq_out[r] = k ? ch->xqq_rot[r] : ch->xqm_rot[r];
        }
    }
    po->kind = K_PLAIN;
    po->nmat = 1;
    split(po, N_Q, false);
    po->tiles = N_EMBD / TILE_ROWS;
    po->y[0] = ch->o_out;
    pg->kind = K_GEGLU;
    pg->nmat = 2;
    split(pg, N_EMBD, true);
    pg->tiles = N_FF / TILE_ROWS;
    pg->y[0] = ch->act;
    pd->kind = K_PLAIN;
    pd->nmat = 1;
    split(pd, N_FF, false);
    pd->tiles = N_EMBD / TILE_ROWS;
    pd->y[0] = ch->d_out;
    pq->kind = K_PLAIN;
    pq->nmat = 3;
    split(pq, N_EMBD, false);
    pq->tile0[0] = 0;
    pq->tile0[1] = N_Q / TILE_ROWS;
    pq->tile0[2] = (N_Q + N_KV) / TILE_ROWS;
    pq->tiles = (N_Q + 2 * N_KV) / TILE_ROWS;
    pq->y[0] = ch->yq;
    pq->y[1] = ch->yk;
    pq->y[2] = ch->yv;
    for (int k = 0; k < ch->ncopies; k++) {
        po->data[k][0] = (const unsigned char *)ch->m[k][M_O].data;
        pg->data[k][0] = (const unsigned char *)ch->m[k][M_GATE].data;
        pg->data[k][1] = (const unsigned char *)ch->m[k][M_UP].data;
        pd->data[k][0] = (const unsigned char *)ch->m[k][M_DOWN].data;
        pq->data[k][0] = (const unsigned char *)ch->m[k][M_Q].data;
        pq->data[k][1] = (const unsigned char *)ch->m[k][M_K].data;
        pq->data[k][2] = (const unsigned char *)ch->m[k][M_V].data;
    }
    for (int p = 0; p < c.nph; p++) {
        Phase *q = &c.ph[p];
        if (q->kind == K_DIGITS || q->kind == K_NORM)
            continue;
        q->steps = (q->tiles + q->G - 1) / q->G;
        c.steps_per_layer += q->steps;
        if ((size_t)q->G * (q->kind == K_GEGLU ? 2 : 1) * (size_t)q->nchunks * CHUNK_BYTES >
            SLOT_BYTES) {
            fprintf(stderr, "phase %d: a step does not fit a stage\n", p);
            exit(1);
        }
    }
    c.ncopies = ch->ncopies;
    c.bar = ch->bar;
    return c;
}

static int g_blocks;

/* The persistent chain (its barrier counter zeroed by the caller, before the timed region). */
static void persistent(chain *ch, Chain c, int layers, int copy0, int ahead, int arithmetic,
                       int barriers, int weights = 1)
{
    c.weights = weights;
    c.layers = layers;
    c.copy0 = copy0;
    c.ahead = ahead;
    c.arithmetic = arithmetic;
    c.barriers = barriers;
    void *args[] = {&c};
    cudaCheck(cudaLaunchCooperativeKernel((const void *)chain_kernel, dim3(g_blocks), dim3(CT + 32),
                                          args, NSLOT * SLOT_BYTES, ch->st));
}

/* The chain's state from the same start: x, and q's outputs (the first o's input). */
static void reset(chain *ch, const float *hx, const float *hq)
{
    cudaCheck(cudaStreamSynchronize(ch->st));
    cudaCheck(cudaMemcpyAsync(ch->x[0], hx, N_EMBD * 4, cudaMemcpyHostToDevice, ch->st));
    cudaCheck(cudaMemcpyAsync(ch->yq, hq, N_Q * 4, cudaMemcpyHostToDevice, ch->st));
    cudaCheck(cudaMemsetAsync(ch->bar, 0, sizeof(unsigned), ch->st));
    cudaCheck(cudaStreamSynchronize(ch->st));
}

/* A streaming read of n bytes (the fraction's denominator): 16-byte loads, every thread a
 * share, folded so the loads are kept. */
__global__ void read_kernel(const uint4 *p, size_t n16, unsigned *sink)
{
    unsigned acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u)
        *sink = acc;
}

enum { V_LIB_PRODUCTS, V_PERSIST_PRODUCTS, V_PERSIST_PRODUCTS_WAIT, V_LIB_LAYER, V_PERSIST_LAYER,
       V_PERSIST_LAYER_WAIT, V_PERSIST_NO_ARITH, V_PERSIST_STREAM, V_PERSIST_ARITH, V_PROBE, NV };
static const char *const kNames[NV] = {
    "library, products",   "persistent, products", "persistent, products, waiting",
    "library, layer",      "persistent, layer",    "persistent, layer, waiting",
    "persistent, no arithmetic", "persistent, stream alone", "persistent, arithmetic alone",
    "read probe"};

/* One run of variant v over `layers` layers from copy copy0 (the probe: the layer's bytes). */
static void run_variant(chain *ch, const Chain *cp, const Chain *cl, int v, int layers, int copy0,
                        const void *pbuf, size_t pbytes, unsigned *sink, int sms)
{
    switch (v) {
    case V_LIB_PRODUCTS:
        for (int l = 0; l < layers; l++)
            layer_products(ch, (copy0 + l) % ch->ncopies);
        break;
    case V_LIB_LAYER:
        for (int l = 0; l < layers; l++)
            layer_norms(ch, (copy0 + l) % ch->ncopies);
        break;
    case V_PERSIST_PRODUCTS:
    case V_PERSIST_PRODUCTS_WAIT:
        persistent(ch, *cp, layers, copy0, v == V_PERSIST_PRODUCTS, 1, 1);
        break;
    case V_PERSIST_LAYER:
    case V_PERSIST_LAYER_WAIT:
        persistent(ch, *cl, layers, copy0, v == V_PERSIST_LAYER, 1, 1);
        break;
    case V_PERSIST_NO_ARITH:
    case V_PERSIST_STREAM:
        persistent(ch, *cp, layers, copy0, 1, 0, v == V_PERSIST_NO_ARITH);
        break;
    case V_PERSIST_ARITH:
        persistent(ch, *cp, layers, copy0, 1, 1, 1, 0);
        break;
    default:
        read_kernel<<<4 * sms, 1024, 0, ch->st>>>((const uint4 *)pbuf, pbytes / 16, sink);
        break;
    }
}

int main(int argc, char **argv)
{
    int rounds = 10, layers = 12;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            layers = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--rounds R] [--layers L]\n", argv[0]);
            return 2;
        }
    }
    rounds = rounds < 2 ? 2 : rounds;
    layers = layers < 1 ? 1 : layers;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20);
    const size_t smem = NSLOT * SLOT_BYTES;
    cudaCheck(cudaFuncSetAttribute(chain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)smem));
    int occ = 0;
    cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, chain_kernel, CT + 32, smem));
    if (occ < 1) {
        fprintf(stderr, "the persistent kernel does not fit an SM\n");
        return 1;
    }
    g_blocks = prop.multiProcessorCount;
    cudaFuncAttributes fa;
    cudaCheck(cudaFuncGetAttributes(&fa, chain_kernel));
    printf("persistent kernel: %d blocks of %d threads, %zu + %zu bytes of shared memory, %d "
           "registers, %zu bytes of local memory\n",
           g_blocks, CT + 32, smem, fa.sharedSizeBytes, fa.numRegs, fa.localSizeBytes);

    chain ch;
    memset(&ch, 0, sizeof ch);
    cudaCheck(cudaStreamCreateWithFlags(&ch.st, cudaStreamNonBlocking));
    const size_t layer_bytes = sliding_layer_bytes();
    ch.m = sliding_layer_copies(prop.l2CacheSize, MAXCOPY, &ch.ncopies);
    printf("%d copies of a layer's %.1f MB of weights\n", ch.ncopies, layer_bytes * 1e-6);
    float **vecs[] = {&ch.x[0], &ch.x[1], &ch.xn, &ch.o_out, &ch.act, &ch.d_out,
                      &ch.yq,   &ch.yk,   &ch.yv, &ch.w_post, &ch.w_ffn};
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) {
        cudaCheck(cudaMalloc((void **)vecs[i], (size_t)N_FF * 4));
        cudaCheck(cudaMemset(*vecs[i], 0, (size_t)N_FF * 4));
    }
    const size_t xqb = gem_dmv_xq_bytes(N_FF) + 16;
    void **xqs[] = {&ch.xq_o,   &ch.xq_mlp,       &ch.xq_down,
                    &ch.xq_qkv, &ch.xq_mlp_layer, &ch.xq_qkv_layer};
    for (size_t i = 0; i < sizeof xqs / sizeof xqs[0]; i++)
        cudaCheck(cudaMalloc(xqs[i], xqb));
    for (int r = 0; r < NROT; r++) {
        cudaCheck(cudaMalloc((void **)&ch.xqo_rot[r], xqb));
        cudaCheck(cudaMalloc((void **)&ch.xqd_rot[r], xqb));
        cudaCheck(cudaMalloc((void **)&ch.xqm_rot[r], xqb));
        cudaCheck(cudaMalloc((void **)&ch.xqq_rot[r], xqb));
    }
    cudaCheck(cudaMalloc((void **)&ch.bar, 256));
    float *hx = (float *)malloc(N_FF * 4), *hq = (float *)malloc(N_Q * 4),
          *hw = (float *)malloc(N_EMBD * 4);
    fill(hx, N_EMBD, 5);
    fill(hq, N_Q, 6);
    fill_uniform(hw, N_EMBD, 7, 0.5f, 1.5f);
    cudaCheck(cudaMemcpy(ch.w_post, hw, N_EMBD * 4, cudaMemcpyHostToDevice));
    fill_uniform(hw, N_EMBD, 8, 0.5f, 1.5f);
    cudaCheck(cudaMemcpy(ch.w_ffn, hw, N_EMBD * 4, cudaMemcpyHostToDevice));
    /* the scratch of GeGLU's and q/k/v's input for the products alone: once, from x */
    cudaCheck(cudaMemcpy(ch.xn, hx, N_EMBD * 4, cudaMemcpyHostToDevice));
    GEM_TRY(gem_dmv_geglu(&ch.m[0][M_GATE], &ch.m[0][M_UP], ch.xn, ch.act, ch.xq_mlp, ch.st));
    {
        const gem_dmatrix *w3[3] = {&ch.m[0][M_Q], &ch.m[0][M_K], &ch.m[0][M_V]};
        float *y3[3] = {ch.yq, ch.yk, ch.yv};
        GEM_TRY(gem_dmv_multi(3, w3, ch.xn, y3, ch.xq_qkv, ch.st));
    }
    cudaCheck(cudaStreamSynchronize(ch.st));
    const Chain cprod = make_chain(&ch, 0), clayer = make_chain(&ch, 1);

    /* the read probe: the bytes of the layer's copies */
    const size_t pbytes = layer_bytes * (size_t)ch.ncopies;
    void *pbuf;
    cudaCheck(cudaMalloc(&pbuf, pbytes));
    cudaCheck(cudaMemset(pbuf, 1, pbytes));
    unsigned *sink;
    cudaCheck(cudaMalloc((void **)&sink, 4));

    /* every persistent variant's outputs after the chain equal the library's (products: variant
     * 0's; layer: variant 3's), and a repeat of every variant its own */
    float *outs[] = {ch.o_out, ch.act, ch.d_out, ch.yq, ch.yk, ch.yv, ch.x[0], ch.xn};
    const size_t lens[] = {N_EMBD, N_FF, N_EMBD, N_Q, N_KV, N_KV, N_EMBD, N_EMBD};
    const char *names[] = {"o", "gate+up", "down", "q", "k", "v", "x", "xn"};
    const int nout = 8;
    float *ref[2][8], *got = (float *)malloc(N_FF * 4);
    int failed = 0;
    for (int v = 0; v < V_PERSIST_NO_ARITH; v++) /* the rest compute nothing to check */
        for (int rep = 0; rep < 2; rep++) {
            const int layer = v >= V_LIB_LAYER, base = rep == 0 && (v == V_LIB_PRODUCTS ||
                                                                      v == V_LIB_LAYER);
            for (int k = 0; k < nout; k++)
                cudaCheck(cudaMemsetAsync(outs[k], 0, lens[k] * 4, ch.st));
            reset(&ch, hx, hq);
            run_variant(&ch, &cprod, &clayer, v, layers, 0, pbuf, pbytes, sink,
                        prop.multiProcessorCount);
            cudaCheck(cudaStreamSynchronize(ch.st));
            cudaCheck(cudaGetLastError());
            for (int k = 0; k < nout; k++) {
                if (!layer && k >= 6)
                    continue; /* the products alone leave x and xn alone */
                if (base) {
                    ref[layer][k] = (float *)malloc(lens[k] * 4);
                    cudaCheck(cudaMemcpy(ref[layer][k], outs[k], lens[k] * 4,
                                         cudaMemcpyDeviceToHost));
                    int finite = 1;
                    for (size_t i = 0; i < lens[k]; i++)
                        finite &= isfinite(ref[layer][k][i]) != 0;
                    if (!finite) {
                        printf("check: %s: %s is not finite: FAILED\n", kNames[v], names[k]);
                        failed = 1;
                    }
                    continue;
                }
                cudaCheck(cudaMemcpy(got, outs[k], lens[k] * 4, cudaMemcpyDeviceToHost));
                if (memcmp(ref[layer][k], got, lens[k] * 4) != 0) {
                    size_t nd = 0, first = 0;
                    for (size_t i = 0; i < lens[k]; i++)
                        if (memcmp(&ref[layer][k][i], &got[i], 4) && nd++ == 0)
                            first = i;
                    printf("check: %s, repeat %d: %s differs from the library's in %zu of %zu "
                           "(first %zu: %.9g against %.9g): FAILED\n",
                           kNames[v], rep, names[k], nd, lens[k], first, got[first],
                           ref[layer][k][first]);
                    failed = 1;
                }
            }
        }
    if (failed)
        return 1;
    printf("check: every variant's outputs after %d layers equal the library's bit for bit, "
           "and its repeat's\n",
           layers);

    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    double *t = (double *)calloc((size_t)NV * 2 * rounds, sizeof(double));
    int nt[NV] = {0};
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 2 * NV; k++) {
            const int v = k < NV ? k : 2 * NV - 1 - k;
            reset(&ch, hx, hq);
            wait_kernel<<<1, 1, 0, ch.st>>>(20000000ull); /* the launches run ahead */
            cudaCheck(cudaGetLastError());
            cudaCheck(cudaEventRecord(e0, ch.st));
            run_variant(&ch, &cprod, &clayer, v, layers, r % ch.ncopies, pbuf, pbytes, sink,
                        prop.multiProcessorCount);
            cudaCheck(cudaEventRecord(e1, ch.st));
            cudaCheck(cudaEventSynchronize(e1));
            cudaCheck(cudaGetLastError());
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
            t[(size_t)v * 2 * rounds + (size_t)nt[v]++] =
                ms * 1e3 / (v == V_PROBE ? ch.ncopies : layers);
        }
    double med[NV];
    for (int v = 0; v < NV; v++) {
        double *tv = t + (size_t)v * 2 * rounds;
        qsort(tv, (size_t)nt[v], sizeof(double), cmp_double);
        med[v] = tv[nt[v] / 2];
    }
    printf("\n%-30s %10s %8s %8s %10s %13s\n", "variant (us a layer)", "median", "p10", "p90",
           "vs library", "of the probe");
    for (int v = 0; v < NV; v++) {
        double *tv = t + (size_t)v * 2 * rounds;
        const double lib =
            v >= V_LIB_LAYER && v <= V_PERSIST_LAYER_WAIT ? med[V_LIB_LAYER] : med[V_LIB_PRODUCTS];
        printf("%-30s %10.2f %8.2f %8.2f %10.3f %12.1f%%\n", kNames[v], med[v], tv[nt[v] / 10],
               tv[nt[v] - 1 - nt[v] / 10], med[v] / lib, 100.0 * med[V_PROBE] / med[v]);
    }
    printf("read probe: %.0f GB/s over %.1f MB (%d copies of a layer)\n",
           layer_bytes / med[V_PROBE] * 1e-3, pbytes * 1e-6, ch.ncopies);
    return 0;
}
