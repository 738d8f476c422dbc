/*
 * Matrix-vector products on GGUF weights in device memory (model_cuda.h): gem_dmv,
 * gem_dmv_multi, gem_dmv_geglu, gem_dmv_row and gem_dmatrix_fill_random, for F32, F16,
 * BF16, Q8_0, Q4_0, Q4_K and Q6_K.
 *
 * The product kernel (mv_kernel), built for batch-1 decode, which only streams weights:
 *
 *   Work. A warp owns a group of NS row slots (NS consecutive rows of one matrix; for the
 *   GeGLU kernel the gate row and the up row of one output) and walks the row in steps.
 *   Every lane owns fixed elements of each step (the formats below say which), keeps one
 *   F32 accumulator per slot, and adds its elements into it with fused multiply-adds in
 *   a fixed order; at the end of the row the warp sums its 32 accumulators by the xor
 *   tree 16, 8, 4, 2, 1 and lane 0 stores. Nothing depends on the launch geometry, the
 *   slot a row lands in, the timing or the other rows: the same matrix, x and stream give
 *   the same bits on every call, and a row gives the same bits in gem_dmv, gem_dmv_multi
 *   and (for its two products) gem_dmv_geglu. No atomics. NS = 2 (gem_dmv_slots takes 1
 *   or 4 for dev/cuda/model_matvec.cu, which measured 2 the best overall on the H200: 4
 *   wins for the 4-bit types and Q6_K on the 8192- and 262144-row matrices and loses on
 *   the 4096-row ones and those of long rows, 1 loses nearly everywhere).
 *
 *   Weights. Each warp streams its slots' row bytes through its own ring of kStages
 *   shared-memory stages with 16-byte cp.async copies (L2 only, fully coalesced, any row
 *   alignment: a step's window starts at the 16-byte boundary below it), so loads of the
 *   next kStages - 1 steps are in flight while a step is consumed; lanes then read the
 *   bytes of their blocks from shared memory, where the 2-byte alignment of the Q8_0,
 *   Q4_0 and Q6_K blocks costs only a funnel shift per word.
 *
 *   x. Each block copies x once into shared memory (zero-padded to a multiple of 1024
 *   floats) and every lane reads its four-element quads with 16-byte loads. Quad q is
 *   stored at quad q ^ ((q >> 3) & 7), a swizzle inside each run of eight quads under
 *   which the lane strides of the formats (1, 2, 4 or 8 quads between neighbouring lanes)
 *   give conflict-free quarter-warp accesses (Q6_K's map: two-way). The NS slots of a
 *   group share each quad read: with NS = 2 the shared-memory traffic for x is half a
 *   float per weight, which keeps the 4-bit formats inside the 128 bytes per clock of an
 *   SM. Shared memory rather than L1: the lanes' quads are scattered (a block's elements
 *   per lane), and the swizzle that makes them conflict-free needs a layout of our own.
 *   Blocks are persistent (one wave, at most the resident blocks of every SM) of 8, 16
 *   or 24 warps, whichever keeps the most warps resident (x is one copy per block: the
 *   21504-float x of the down projection wants 24-warp blocks); each warp takes groups
 *   warp, warp + all warps, ...
 *
 * Arithmetic, per format (w is the exactly dequantized weight, gem_gguf_dequant's value):
 *
 *   F32, F16, BF16: w is the element (F16 by the exact half to float conversion, BF16 by
 *     a 16-bit shift); acc = fma(w, x, acc).
 *   Q4_0, Q8_0, Q6_K: the block value is an integer c (Q4_0: n - 8, Q8_0: q, Q6_K: u - 32)
 *     times a scale D (Q4_0, Q8_0: the block's f16 d; Q6_K: d * scale, exact in F32).
 *     The integer's bits are placed in the mantissa of a power of two 2^t by one logical
 *     operation (or one byte permute), which makes the float v = 2^t + n exactly (n the
 *     unsigned field: Q4_0's nibble, Q8_0's byte with its sign bit flipped, Q6_K's six
 *     bits); then w = fma(v, D, K) with K = -(2^t + o) * D for the field's offset o (8,
 *     128, 32). K is exact because t is kept small enough that (2^t + o) * D fits 24 bits
 *     (Q4_0: t in {7, 11, 15}; Q8_0: t = 15; Q6_K: t = 7), v * D is exact inside the fma,
 *     and the sum (n - o) * D is a float, so the fma returns gem_gguf_dequant's value
 *     exactly, in one instruction per weight; then acc = fma(w, x, acc).
 *   Q4_K: w = d1 * n - m1 per 32-element sub-block (d1 = d * scale, m1 = dmin * min, both
 *     exact). The scale is applied once per sub-block: each lane forms s = sum n * x over
 *     its elements of one sub-block (n exact from a mantissa trick and one add; fma
 *     accumulation), then acc = fma(d1, s, acc) and acc = fma(-m1, X, acc), X the F32 sum
 *     of the same x elements (computed once per block in a fixed order). This is the
 *     same sum with another rounding: the error is within a few float roundings of
 *     d1 * sum|n x| + m1 * sum|x| per sub-block instead of sum|w x| (tests/test_cuda_matvec.c
 *     bounds it so), at three instructions per weight instead of four. With x = a unit
 *     vector it returns exactly gem_gguf_dequant's value.
 *
 * Sizes: cols up to kMaxCols (x and the stages fit one block's shared memory), rows up
 * to 2^31 - 1 per matrix; every size and offset is int64_t or size_t.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <mutex>

#include "matvec_tiles.h"
#include "tiles_arith.cuh"
#include "model_cuda.h"

namespace {

/* Blocks of 8, 16 or 24 warps: the launch takes the size that keeps the most warps
 * resident (x is one copy per block, so long rows want big blocks). The register budget
 * keeps 24 warps per SM with 1 or 2 row slots (at most 85 registers), 16 with 4 (which
 * would spill at 85; 8-warp blocks only). */
constexpr int max_threads(int ns) { return ns >= 4 ? 256 : 768; }
constexpr int min_blocks(int ns) { return ns >= 4 ? 2 : 1; }
constexpr int64_t kMaxCols = 32768;  /* x in shared memory: 128 KiB at most */
constexpr int kXPad = 1024;          /* x in shared memory is padded to a multiple of this */
constexpr unsigned kFull = 0xffffffffu;

/* ---- shared-memory and copy helpers ------------------------------------------------------ */

__device__ __forceinline__ float u2f(uint32_t u) { return __uint_as_float(u); }

/* The slot of quad q (four floats) of x in shared memory: q with its low three bits xor-ed
 * with the next three. For b a multiple of 64, xswz(b + q) = b + xswz(q). */
__host__ __device__ __forceinline__ uint32_t xswz(uint32_t q) { return q ^ ((q >> 3) & 7u); }

/* Quad qbase + q of x (qbase a multiple of 64; qs = xswz(q), a lane constant): xs (x quads,
 * swizzled) in shared memory. */
__device__ __forceinline__ float4 ldx(const float *xs, int qbase, uint32_t qs)
{
    return *reinterpret_cast<const float4 *>(xs + 4 * ((uint32_t)qbase + qs));
}

/* Shared memory at byte offset `off` of sm (the dynamic shared base, 16-byte aligned). */
__device__ __forceinline__ uint32_t lds32(const unsigned char *sm, int off)
{
    return *reinterpret_cast<const uint32_t *>(sm + off);
}
__device__ __forceinline__ uint2 lds64(const unsigned char *sm, int off)
{
    return *reinterpret_cast<const uint2 *>(sm + off);
}
__device__ __forceinline__ uint4 lds128(const unsigned char *sm, int off)
{
    return *reinterpret_cast<const uint4 *>(sm + off);
}
__device__ __forceinline__ float lds_half(const unsigned char *sm, int off) /* off even */
{
    return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short *>(sm + off)));
}

/* N little-endian 32-bit words at byte offset off (even) of sm: N + 1 aligned loads and a
 * funnel shift per word. */
template <int N>
__device__ __forceinline__ void ld_words(const unsigned char *sm, int off, uint32_t (&out)[N])
{
    const int a = off & ~3;
    const uint32_t sh = 8u * (uint32_t)(off & 3); /* 0 or 16 */
    uint32_t w[N + 1];
#pragma unroll
    for (int i = 0; i <= N; i++)
        w[i] = lds32(sm, a + 4 * i);
#pragma unroll
    for (int i = 0; i < N; i++)
        out[i] = __funnelshift_r(w[i], w[i + 1], sh);
}

/* 16 bytes from src (global, 16-byte aligned) to the shared address dst. */
__device__ __forceinline__ void cp_async16(uint32_t dst, const unsigned char *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
/* The first n (1..15) bytes of src to dst and zeros after them, by plain loads and stores:
 * the matrix's last bytes, where a 16-byte copy (even cp.async's zero-filling form, which
 * compute-sanitizer's memcheck counts as a 16-byte read) would reach past the allocation.
 * The consumer's cp_wait and __syncwarp order these stores like the copies. */
__device__ __noinline__ void copy_tail(uint32_t dst, const unsigned char *src, int n)
{
    for (int i = 0; i < 16; i++) {
        const uint32_t v = i < n ? src[i] : 0u;
        asm volatile("st.shared.u8 [%0], %1;\n" ::"r"(dst + (uint32_t)i), "r"(v) : "memory");
    }
}
/* Chunk c (16 bytes) from base to dst when c < chunks; room: bytes from base to the end of
 * the matrix, of which a chunk reads no more. */
__device__ __forceinline__ void copy_chunk(uint32_t dst, const unsigned char *base, int c,
                                           int chunks, int room)
{
    if (c >= chunks)
        return;
    const int n = room - 16 * c;
    if (n >= 16)
        cp_async16(dst + 16u * (uint32_t)c, base + 16 * c);
    else
        copy_tail(dst + 16u * (uint32_t)c, base + 16 * c, n);
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* Exponent patterns of powers of two (the host puts them in MvParams::magic, so that the
 * compiler keeps them in registers and a mask-and-or is one LOP3). */
enum { kM15 = 0, kM11 = 1, kM7 = 2, kMagics = 3 };
constexpr uint32_t kMagicBits[kMagics] = {0x47000000u /* 2^15 */, 0x45000000u /* 2^11 */,
                                          0x43000000u /* 2^7 */};

/* ---- formats ------------------------------------------------------------------------------
 * Each format fixes: the block (elements, bytes); the main step (kMainElems elements,
 * kMainBytes bytes of a row) and its lane map; the tail step (kTailElems, kTailBytes) that
 * covers the cols % kMainElems elements left (the last one possibly partial: `nvalid`
 * elements); kStages; kCopyIters (16-byte copies per lane per slot and step, at most);
 * kXsum (whether the kernel needs the sums of each 32 elements of x); a Lane struct of
 * per-lane constants; and two device functions that add one step of NS slots into acc:
 *   main_step(L, sm, win, xs, q0, xsum, acc)
 *   tail_step(L, sm, win, xs, q0, nvalid, acc)
 * sm is the shared base, win[j] the byte offset of slot j's step bytes, q0 = e0 / 4 for
 * the step's first element e0 (a multiple of 256). */

struct MvParams;

/* main_step / tail_step of the formats whose one step<NS, FULL> serves both: a whole step
 * (FULL, kMainElems valid elements, no x sums) and a tail of nvalid elements. */
template <class F> struct WholeOrTailSteps {
    template <int NS, class L>
    static __device__ __forceinline__ void main_step(const L &lane, const unsigned char *sm,
                                                     const int (&win)[NS], const float *xs,
                                                     int q0, const float *, float (&acc)[NS])
    {
        F::template step<NS, true>(lane, sm, win, xs, q0, F::kMainElems, acc);
    }
    template <int NS, class L>
    static __device__ __forceinline__ void tail_step(const L &lane, const unsigned char *sm,
                                                     const int (&win)[NS], const float *xs,
                                                     int q0, int nvalid, float (&acc)[NS])
    {
        F::template step<NS, false>(lane, sm, win, xs, q0, nvalid, acc);
    }
};

/* F32: a step is 256 elements; lane l takes elements 4l..4l+3 and 128+4l..128+4l+3. */
struct FmtF32 : WholeOrTailSteps<FmtF32> {
    static constexpr int kBlockElems = 1, kBlockBytes = 4;
    static constexpr int kMainElems = 256, kMainBytes = 1024, kTailElems = 256, kTailBytes = 1024;
    static constexpr int kStages = 3, kCopyIters = 3;
    static constexpr bool kXsum = false;
    struct Lane {
        int lane;
        uint32_t xq0, xq1;
    };
    static __device__ __forceinline__ Lane lane_consts(const MvParams &, int lane)
    {
        return Lane{lane, xswz((uint32_t)lane), xswz((uint32_t)(32 + lane))};
    }
    static __device__ __forceinline__ void ld4(const unsigned char *sm, int off, float (&w)[4])
    {
        if ((off & 15) == 0) {
            const uint4 v = lds128(sm, off);
            w[0] = u2f(v.x), w[1] = u2f(v.y), w[2] = u2f(v.z), w[3] = u2f(v.w);
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++)
                w[i] = u2f(lds32(sm, off + 4 * i));
        }
    }
    template <int NS, bool FULL>
    static __device__ __forceinline__ void step(const Lane &L, const unsigned char *sm,
                                                const int (&win)[NS], const float *xs, int q0,
                                                int nvalid, float (&acc)[NS])
    {
        const int e = 4 * L.lane;
        if (!FULL && e >= nvalid)
            return;
        const float4 x0 = ldx(xs, q0, L.xq0), x1 = ldx(xs, q0, L.xq1);
        const float xa[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
        for (int j = 0; j < NS; j++) {
            float w[8];
            float(&w0)[4] = *reinterpret_cast<float(*)[4]>(&w[0]);
            float(&w1)[4] = *reinterpret_cast<float(*)[4]>(&w[4]);
            ld4(sm, win[j] + 4 * e, w0);
            ld4(sm, win[j] + 512 + 4 * e, w1);
#pragma unroll
            for (int i = 0; i < 8; i++)
                if (FULL || (i < 4 ? e + i : 128 + e + i - 4) < nvalid)
                    acc[j] = fmaf(w[i], xa[i], acc[j]);
        }
    }
};

/* F16 and BF16: a step is 256 elements; lane l takes elements 8l..8l+7 (16 bytes). */
template <bool BF16> struct Fmt16 : WholeOrTailSteps<Fmt16<BF16>> {
    static constexpr int kBlockElems = 1, kBlockBytes = 2;
    static constexpr int kMainElems = 256, kMainBytes = 512, kTailElems = 256, kTailBytes = 512;
    static constexpr int kStages = 4, kCopyIters = 2;
    static constexpr bool kXsum = false;
    struct Lane {
        int lane;
        uint32_t xq0, xq1;
    };
    static __device__ __forceinline__ Lane lane_consts(const MvParams &, int lane)
    {
        return Lane{lane, xswz((uint32_t)(2 * lane)), xswz((uint32_t)(2 * lane + 1))};
    }
    static __device__ __forceinline__ float lo(uint32_t w)
    {
        return BF16 ? u2f(w << 16) : __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
    }
    static __device__ __forceinline__ float hi(uint32_t w)
    {
        return BF16 ? u2f(w & 0xffff0000u) : __half2float(__ushort_as_half((unsigned short)(w >> 16)));
    }
    template <int NS, bool FULL>
    static __device__ __forceinline__ void step(const Lane &L, const unsigned char *sm,
                                                const int (&win)[NS], const float *xs, int q0,
                                                int nvalid, float (&acc)[NS])
    {
        const int e = 8 * L.lane;
        if (!FULL && e >= nvalid)
            return;
        const float4 x0 = ldx(xs, q0, L.xq0), x1 = ldx(xs, q0, L.xq1);
        const float xa[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
        for (int j = 0; j < NS; j++) {
            const int off = win[j] + 2 * e;
            uint32_t w[4];
            if ((off & 15) == 0) {
                const uint4 v = lds128(sm, off);
                w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
            } else {
                ld_words<4>(sm, off, w);
            }
#pragma unroll
            for (int i = 0; i < 4; i++) {
                if (FULL || e + 2 * i < nvalid)
                    acc[j] = fmaf(lo(w[i]), xa[2 * i], acc[j]);
                if (FULL || e + 2 * i + 1 < nvalid)
                    acc[j] = fmaf(hi(w[i]), xa[2 * i + 1], acc[j]);
            }
        }
    }
};

/* Q8_0 (34-byte blocks: f16 d, i8 q[32]): a main step is 32 blocks, lane l takes block l;
 * a tail step is 8 blocks, lane l takes elements 8k..8k+7 (k = l % 4) of block l / 4.
 * Weight: u = q ^ 0x80 (q + 128) in the mantissa of 2^15, w = fma(2^15 + u, d, -32896 d). */
struct FmtQ8_0 {
    static constexpr int kBlockElems = 32, kBlockBytes = 34;
    static constexpr int kMainElems = 1024, kMainBytes = 1088, kTailElems = 256, kTailBytes = 272;
    static constexpr int kStages = 3, kCopyIters = 3;
    static constexpr bool kXsum = false;
    struct Lane {
        int lane, b, k4;
        uint32_t m15;
        uint32_t xq[8], xt[2];
    };
    static __device__ __forceinline__ Lane lane_consts(const MvParams &p, int lane);

    /* acc += the four weights of quant word q (elements 4i..4i+3) times xv */
    static __device__ __forceinline__ float word(uint32_t q, uint32_t m15, float d, float k,
                                                 const float4 &xv, float acc)
    {
        const uint32_t u = q ^ 0x80808080u;
        acc = fmaf(fmaf(u2f(__byte_perm(u, m15, 0x7604u)), d, k), xv.x, acc);
        acc = fmaf(fmaf(u2f(__byte_perm(u, m15, 0x7614u)), d, k), xv.y, acc);
        acc = fmaf(fmaf(u2f(__byte_perm(u, m15, 0x7624u)), d, k), xv.z, acc);
        acc = fmaf(fmaf(u2f(__byte_perm(u, m15, 0x7634u)), d, k), xv.w, acc);
        return acc;
    }
    template <int NS>
    static __device__ __forceinline__ void main_step(const Lane &L, const unsigned char *sm,
                                                     const int (&win)[NS], const float *xs,
                                                     int q0, const float *, float (&acc)[NS])
    {
        float4 xv[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            xv[i] = ldx(xs, q0, L.xq[i]);
#pragma unroll
        for (int j = 0; j < NS; j++) {
            const int off = win[j] + 34 * L.lane;
            const float d = lds_half(sm, off), k = d * -32896.0f;
            uint32_t q[8];
            ld_words<8>(sm, off + 2, q);
#pragma unroll
            for (int i = 0; i < 8; i++)
                acc[j] = word(q[i], L.m15, d, k, xv[i], acc[j]);
        }
    }
    template <int NS>
    static __device__ __forceinline__ void tail_step(const Lane &L, const unsigned char *sm,
                                                     const int (&win)[NS], const float *xs,
                                                     int q0, int nvalid, float (&acc)[NS])
    {
        if (32 * L.b >= nvalid)
            return;
        const float4 xv0 = ldx(xs, q0, L.xt[0]), xv1 = ldx(xs, q0, L.xt[1]);
#pragma unroll
        for (int j = 0; j < NS; j++) {
            const int off = win[j] + 34 * L.b;
            const float d = lds_half(sm, off), k = d * -32896.0f;
            uint32_t q[2];
            ld_words<2>(sm, off + 2 + 8 * L.k4, q);
            acc[j] = word(q[0], L.m15, d, k, xv0, acc[j]);
            acc[j] = word(q[1], L.m15, d, k, xv1, acc[j]);
        }
    }
};

/* Q4_0 (18-byte blocks: f16 d, u8 q[16]; element i < 16 the low nibble of q[i], 16 + i its
 * high nibble): a main step is 32 blocks, lane l takes block l; a tail step is 8 blocks,
 * lane l takes quant word k = l % 4 (elements 4k..4k+3 and 16+4k..16+4k+3) of block l / 4.
 * Weight: the nibble in the mantissa of 2^t (t = 15, 11 or 7 by where the nibble sits in
 * the word, moved by at most one shift), w = fma(2^t + n, d, -(2^t + 8) d). */
struct FmtQ4_0 {
    static constexpr int kBlockElems = 32, kBlockBytes = 18;
    static constexpr int kMainElems = 1024, kMainBytes = 576, kTailElems = 256, kTailBytes = 144;
    static constexpr int kStages = 4, kCopyIters = 2;
    static constexpr bool kXsum = false;
    struct Lane {
        int lane, b, k4;
        uint32_t m15, m11, m7;
        uint32_t xq[8], xt[2];
    };
    static __device__ __forceinline__ Lane lane_consts(const MvParams &p, int lane);

    /* acc += the eight weights of quant word q: xl (its low-nibble elements), xh (high) */
    static __device__ __forceinline__ float word(const Lane &L, uint32_t q, float d, float k15,
                                                 float k11, float k7, const float4 &xl,
                                                 const float4 &xh, float acc)
    {
        const uint32_t a = q << 8, c = q >> 12;
        acc = fmaf(fmaf(u2f((a & 0x00f00u) | L.m15), d, k15), xl.x, acc); /* byte 0 lo */
        acc = fmaf(fmaf(u2f((q & 0x00f00u) | L.m15), d, k15), xl.y, acc); /* byte 1 lo */
        acc = fmaf(fmaf(u2f((q & 0xf0000u) | L.m7), d, k7), xl.z, acc);   /* byte 2 lo */
        acc = fmaf(fmaf(u2f((c & 0x0f000u) | L.m11), d, k11), xl.w, acc); /* byte 3 lo */
        acc = fmaf(fmaf(u2f((a & 0x0f000u) | L.m11), d, k11), xh.x, acc); /* byte 0 hi */
        acc = fmaf(fmaf(u2f((q & 0x0f000u) | L.m11), d, k11), xh.y, acc); /* byte 1 hi */
        acc = fmaf(fmaf(u2f((c & 0x00f00u) | L.m15), d, k15), xh.z, acc); /* byte 2 hi */
        acc = fmaf(fmaf(u2f((c & 0xf0000u) | L.m7), d, k7), xh.w, acc);   /* byte 3 hi */
        return acc;
    }
    template <int NS>
    static __device__ __forceinline__ void main_step(const Lane &L, const unsigned char *sm,
                                                     const int (&win)[NS], const float *xs,
                                                     int q0, const float *, float (&acc)[NS])
    {
        float4 xv[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            xv[i] = ldx(xs, q0, L.xq[i]);
#pragma unroll
        for (int j = 0; j < NS; j++) {
            const int off = win[j] + 18 * L.lane;
            const float d = lds_half(sm, off);
            const float k15 = d * -32776.0f, k11 = d * -2056.0f, k7 = d * -136.0f;
            uint32_t q[4];
            ld_words<4>(sm, off + 2, q);
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[j] = word(L, q[i], d, k15, k11, k7, xv[i], xv[4 + i], acc[j]);
        }
    }
    template <int NS>
    static __device__ __forceinline__ void tail_step(const Lane &L, const unsigned char *sm,
                                                     const int (&win)[NS], const float *xs,
                                                     int q0, int nvalid, float (&acc)[NS])
    {
        if (32 * L.b >= nvalid)
            return;
        const float4 xl = ldx(xs, q0, L.xt[0]), xh = ldx(xs, q0, L.xt[1]);
#pragma unroll
        for (int j = 0; j < NS; j++) {
            const int off = win[j] + 18 * L.b;
            const float d = lds_half(sm, off);
            uint32_t q[1];
            ld_words<1>(sm, off + 2 + 4 * L.k4, q);
            acc[j] = word(L, q[0], d, d * -32776.0f, d * -2056.0f, d * -136.0f, xl, xh, acc[j]);
        }
    }
};

/* Q4_K (144-byte super-blocks of 256: f16 d, f16 dmin, 12 bytes of six-bit scales and
 * mins, u8 q[128]; sub-block s (32 elements) is the low (s even) or high nibbles of
 * q[32 (s/2) ..]). A main step is 4 super-blocks: lane l takes sub-block l % 8 of
 * super-block l / 8; a tail step is one super-block: lane l takes elements 8k..8k+7
 * (k = l % 4) of sub-block l / 4. Each lane adds d1 * sum(n x) - m1 * sum(x) over its
 * elements (see the file comment). The nibble of byte b of a quant word sits at bit
 * 4 hs + 8 (b & 1) of the word (b < 2) or of the word >> 16 (hs: the sub-block's half);
 * OR-ed into the mantissa of 2^(23 - that bit) it gives 2^t + n, one subtraction n. */
struct FmtQ4_K {
    static constexpr int kBlockElems = 256, kBlockBytes = 144;
    static constexpr int kMainElems = 1024, kMainBytes = 576, kTailElems = 256, kTailBytes = 144;
    static constexpr int kStages = 4, kCopyIters = 2;
    static constexpr bool kXsum = true;
    struct Lane {
        int sb, sub, tsub, k4;       /* main: super-block, sub-block; tail: sub-block, quarter */
        uint32_t msk0, msk1, e0, e1; /* main's nibble masks and exponents */
        float f0, f1;
        uint32_t tmsk0, tmsk1, te0, te1; /* the tail's */
        float tf0, tf1;
        uint32_t xq[8], xt[2];
    };
    static __device__ __forceinline__ void half_consts(int hs, uint32_t &m0, uint32_t &m1,
                                                       uint32_t &e0, uint32_t &e1, float &f0,
                                                       float &f1)
    {
        m0 = 0xfu << (4 * hs);
        m1 = 0xf00u << (4 * hs);
        e0 = hs ? 0x49000000u : 0x4b000000u; /* 2^19 : 2^23 */
        e1 = hs ? 0x45000000u : 0x47000000u; /* 2^11 : 2^15 */
        f0 = u2f(e0);
        f1 = u2f(e1);
    }
    static __device__ __forceinline__ Lane lane_consts(const MvParams &, int lane)
    {
        Lane L;
        L.sb = lane >> 3, L.sub = lane & 7, L.tsub = lane >> 2, L.k4 = lane & 3;
        half_consts(L.sub & 1, L.msk0, L.msk1, L.e0, L.e1, L.f0, L.f1);
        half_consts(L.tsub & 1, L.tmsk0, L.tmsk1, L.te0, L.te1, L.tf0, L.tf1);
#pragma unroll
        for (int i = 0; i < 8; i++)
            L.xq[i] = xswz((uint32_t)(64 * L.sb + 8 * L.sub + i));
        L.xt[0] = xswz((uint32_t)(8 * L.tsub + 2 * L.k4));
        L.xt[1] = xswz((uint32_t)(8 * L.tsub + 2 * L.k4 + 1));
        return L;
    }

    /* d1 and m1 of sub-block s (0..7) from the header words h (d | dmin << 16, scales) */
    static __device__ __forceinline__ void scales(const uint4 &h, int s, float &d1, float &m1)
    {
        const unsigned sh = 8u * (unsigned)(s & 3);
        unsigned sc, mn;
        if (s < 4) {
            sc = (h.y >> sh) & 63u;
            mn = (h.z >> sh) & 63u;
        } else {
            sc = ((h.w >> sh) & 0xfu) | ((h.y >> (sh + 2)) & 0x30u);
            mn = ((h.w >> (sh + 4)) & 0xfu) | ((h.z >> (sh + 2)) & 0x30u);
        }
        const float d = __half2float(__ushort_as_half((unsigned short)(h.x & 0xffffu)));
        const float dmin = __half2float(__ushort_as_half((unsigned short)(h.x >> 16)));
        d1 = __fmul_rn(d, (float)sc);
        m1 = __fmul_rn(dmin, (float)mn);
    }
    /* s += n * x for the four nibbles of quant word q */
    static __device__ __forceinline__ float word(uint32_t q, uint32_t m0, uint32_t m1,
                                                 uint32_t e0, uint32_t e1, float f0, float f1,
                                                 const float4 &xv, float s)
    {
        const uint32_t q2 = q >> 16;
        s = fmaf(u2f((q & m0) | e0) - f0, xv.x, s);
        s = fmaf(u2f((q & m1) | e1) - f1, xv.y, s);
        s = fmaf(u2f((q2 & m0) | e0) - f0, xv.z, s);
        s = fmaf(u2f((q2 & m1) | e1) - f1, xv.w, s);
        return s;
    }
    template <int NS>
    static __device__ __forceinline__ void main_step(const Lane &L, const unsigned char *sm,
                                                     const int (&win)[NS], const float *xs,
                                                     int q0, const float *xsum, float (&acc)[NS])
    {
        float4 xv[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            xv[i] = ldx(xs, q0, L.xq[i]);
        const float xsub = xsum[q0 / 8 + 8 * L.sb + L.sub];
#pragma unroll
        for (int j = 0; j < NS; j++) {
            const int off = win[j] + 144 * L.sb; /* 16-byte aligned */
            const uint4 h = lds128(sm, off);
            const uint4 qa = lds128(sm, off + 16 + 32 * (L.sub >> 1));
            const uint4 qb = lds128(sm, off + 32 + 32 * (L.sub >> 1));
            const uint32_t q[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < 8; i++)
                s = word(q[i], L.msk0, L.msk1, L.e0, L.e1, L.f0, L.f1, xv[i], s);
            float d1, m1;
            scales(h, L.sub, d1, m1);
            acc[j] = fmaf(d1, s, acc[j]);
            acc[j] = fmaf(-m1, xsub, acc[j]);
        }
    }
    template <int NS>
    static __device__ __forceinline__ void tail_step(const Lane &L, const unsigned char *sm,
                                                     const int (&win)[NS], const float *xs,
                                                     int q0, int nvalid, float (&acc)[NS])
    {
        (void)nvalid; /* cols is a multiple of 256: a tail step is one whole super-block */
        const float4 xv0 = ldx(xs, q0, L.xt[0]), xv1 = ldx(xs, q0, L.xt[1]);
        const float xsub = ((((((xv0.x + xv0.y) + xv0.z) + xv0.w) + xv1.x) + xv1.y) + xv1.z) + xv1.w;
#pragma unroll
        for (int j = 0; j < NS; j++) {
            const int off = win[j];
            const uint4 h = lds128(sm, off);
            const uint2 qv = lds64(sm, off + 16 + 32 * (L.tsub >> 1) + 8 * L.k4);
            float s = word(qv.x, L.tmsk0, L.tmsk1, L.te0, L.te1, L.tf0, L.tf1, xv0, 0.0f);
            s = word(qv.y, L.tmsk0, L.tmsk1, L.te0, L.te1, L.tf0, L.tf1, xv1, s);
            float d1, m1;
            scales(h, L.tsub, d1, m1);
            acc[j] = fmaf(d1, s, acc[j]);
            acc[j] = fmaf(-m1, xsub, acc[j]);
        }
    }
};

/* Q6_K (210-byte super-blocks of 256: ql[128], qh[64], i8 scales[16], f16 d; in half h,
 * element 32k + l (l < 32) has low bits from ql[64h + l + 32 (k & 1)] (nibble k >> 1)
 * and high bits from qh[32h + l] (bits 2k, 2k+1); scale scales[8h + l/16 + 2k]). A step
 * is 4 super-blocks: lane L takes l = 8 (L % 4) .. +7 of half L / 16 of super-block
 * (L / 4) % 4, for k = 0..3 (32 elements); the tail step is the same map with the
 * super-blocks past the row left out. Weight: u (six bits) in the mantissa of 2^7,
 * w = fma(128 + u, D, -160 D), D = d * scale. */
struct FmtQ6_K : WholeOrTailSteps<FmtQ6_K> {
    static constexpr int kBlockElems = 256, kBlockBytes = 210;
    static constexpr int kMainElems = 1024, kMainBytes = 840, kTailElems = 1024, kTailBytes = 840;
    static constexpr int kStages = 3, kCopyIters = 2;
    static constexpr bool kXsum = false;
    struct Lane {
        int jl, sb, h;
        uint32_t m7;
        uint32_t xq[8];
    };
    static __device__ __forceinline__ Lane lane_consts(const MvParams &p, int lane);

    template <int NS, bool FULL>
    static __device__ __forceinline__ void step(const Lane &L, const unsigned char *sm,
                                                const int (&win)[NS], const float *xs, int q0,
                                                int nvalid, float (&acc)[NS])
    {
        if (!FULL && 256 * L.sb >= nvalid)
            return;
        float4 xv[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            xv[i] = ldx(xs, q0, L.xq[i]);
#pragma unroll
        for (int j = 0; j < NS; j++) {
            const int off = win[j] + 210 * L.sb;
            uint32_t ql0[2], ql1[2], qh[2];
            ld_words<2>(sm, off + 64 * L.h + 8 * L.jl, ql0);
            ld_words<2>(sm, off + 64 * L.h + 32 + 8 * L.jl, ql1);
            ld_words<2>(sm, off + 128 + 32 * L.h + 8 * L.jl, qh);
            const float d = lds_half(sm, off + 208);
            const signed char *sc =
                reinterpret_cast<const signed char *>(sm + off + 192 + 8 * L.h + (L.jl >> 1));
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float dk = __fmul_rn(d, (float)sc[2 * k]), kk = dk * -160.0f;
#pragma unroll
                for (int wi = 0; wi < 2; wi++) {
                    const uint32_t lo4 = ((k & 1) ? ql1[wi] : ql0[wi]) >> (k >= 2 ? 4 : 0);
                    const uint32_t hi2 = k == 3 ? qh[wi] >> 2 : qh[wi] << (4 - 2 * k);
                    const uint32_t u = (lo4 & 0x0f0f0f0fu) | (hi2 & 0x30303030u);
                    const float4 &x4 = xv[2 * k + wi];
                    acc[j] = fmaf(fmaf(u2f(__byte_perm(u, L.m7, 0x7054u)), dk, kk), x4.x, acc[j]);
                    acc[j] = fmaf(fmaf(u2f(__byte_perm(u, L.m7, 0x7154u)), dk, kk), x4.y, acc[j]);
                    acc[j] = fmaf(fmaf(u2f(__byte_perm(u, L.m7, 0x7254u)), dk, kk), x4.z, acc[j]);
                    acc[j] = fmaf(fmaf(u2f(__byte_perm(u, L.m7, 0x7354u)), dk, kk), x4.w, acc[j]);
                }
            }
        }
    }
};

/* Bytes of one slot's stage: a step's bytes, the window's offset below it (< 16) and
 * the word ld_words may read past it, rounded up to 16 (cp.async's destinations). */
template <class F> struct StageCap {
    static constexpr int value =
        ((F::kMainBytes > F::kTailBytes ? F::kMainBytes : F::kTailBytes) + 32 + 15) / 16 * 16;
    static_assert((value + 31) / 16 <= 32 * F::kCopyIters, "kCopyIters covers a step");
};

/* ---- the product kernel -------------------------------------------------------------------- */

/* One matrix of a launch: rows of row_bytes from data (device, 16-byte aligned) up to end;
 * y (rows); group0: the first group of the launch that is this matrix's. */
struct MvMat {
    const unsigned char *data, *end;
    float *y;
    int64_t rows, row_bytes, group0;
};

struct MvParams {
    MvMat mat[3];
    int nmat;
    int64_t groups; /* row groups of all matrices */
    const float *x; /* (cols) device */
    int cols, x_quads;        /* x_quads: padded length / 4 */
    int nmain, ntail, rem;    /* main steps, tail steps, elements after the main steps */
    int xsum_floats;          /* kXsum: cols / 32 rounded up to 4, else 0 */
    uint32_t magic[kMagics];  /* kMagicBits */
};

__device__ __forceinline__ FmtQ8_0::Lane FmtQ8_0::lane_consts(const MvParams &p, int lane)
{
    Lane L;
    L.lane = lane, L.b = lane >> 2, L.k4 = lane & 3, L.m15 = p.magic[kM15];
#pragma unroll
    for (int i = 0; i < 8; i++)
        L.xq[i] = xswz((uint32_t)(8 * lane + i));
    L.xt[0] = xswz((uint32_t)(8 * L.b + 2 * L.k4));
    L.xt[1] = xswz((uint32_t)(8 * L.b + 2 * L.k4 + 1));
    return L;
}

__device__ __forceinline__ FmtQ4_0::Lane FmtQ4_0::lane_consts(const MvParams &p, int lane)
{
    Lane L;
    L.lane = lane, L.b = lane >> 2, L.k4 = lane & 3;
    L.m15 = p.magic[kM15], L.m11 = p.magic[kM11], L.m7 = p.magic[kM7];
#pragma unroll
    for (int i = 0; i < 8; i++)
        L.xq[i] = xswz((uint32_t)(8 * lane + i));
    L.xt[0] = xswz((uint32_t)(8 * L.b + L.k4));
    L.xt[1] = xswz((uint32_t)(8 * L.b + 4 + L.k4));
    return L;
}

__device__ __forceinline__ FmtQ6_K::Lane FmtQ6_K::lane_consts(const MvParams &p, int lane)
{
    Lane L;
    L.jl = lane & 3, L.sb = (lane >> 2) & 3, L.h = lane >> 4, L.m7 = p.magic[kM7];
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
        for (int wi = 0; wi < 2; wi++)
            L.xq[2 * k + wi] = xswz((uint32_t)(64 * L.sb + 32 * L.h + 8 * k + 2 * L.jl + wi));
    return L;
}

/* The row slots of one group: slot j reads row[j], which has room[j] bytes up to the
 * matrix's end (at most 2^30), and stores y[j] when valid[j] (a slot past the matrix's
 * last row reads its first row, unstored). */
template <int NS> struct Slots {
    const unsigned char *row[NS];
    int room[NS];
    float *y[NS];
    bool valid[NS];
};

__device__ __forceinline__ int room_of(const unsigned char *row, const unsigned char *end)
{
    const int64_t r = end - row;
    return r < (int64_t(1) << 30) ? (int)r : 1 << 30;
}

/* What a launch computes: y = W x (kPlain); y = gelu(Wg x) * (Wu x) with the gate row
 * and the up row of an output in one group (kGeglu, NS = 2); y = gelu(y) * (W x), y
 * holding the gate's products from an earlier launch (kGegluUp). */
enum { kPlain = 0, kGeglu = 1, kGegluUp = 2 };

template <int NS, int MODE>
__device__ __forceinline__ void slots_of(const MvParams &p, int64_t g, Slots<NS> &s)
{
    if (MODE == kGeglu) { /* slot 0: gate row g, slot 1: up row g; y is the gate matrix's */
#pragma unroll
        for (int j = 0; j < NS; j++) {
            const MvMat &m = p.mat[j];
            s.row[j] = m.data + g * m.row_bytes;
            s.room[j] = room_of(s.row[j], m.end);
            s.y[j] = p.mat[0].y + g;
            s.valid[j] = true;
        }
        return;
    }
    int mi = 0;
    while (mi + 1 < p.nmat && g >= p.mat[mi + 1].group0)
        mi++;
    const MvMat &m = p.mat[mi];
    const int64_t r0 = (g - m.group0) * NS;
#pragma unroll
    for (int j = 0; j < NS; j++) {
        const int64_t r = r0 + j;
        s.valid[j] = r < m.rows;
        s.row[j] = m.data + (s.valid[j] ? r : 0) * m.row_bytes;
        s.room[j] = room_of(s.row[j], m.end);
        s.y[j] = m.y + r;
    }
}

/* Step s of a row: its first element, its byte offset and bytes, its valid elements. */
template <class F>
__device__ __forceinline__ void step_geo(const MvParams &p, int s, int &e0, int &off, int &bytes,
                                         int &nvalid)
{
    if (s < p.nmain) {
        e0 = s * F::kMainElems;
        off = s * F::kMainBytes; /* < 2^18: rows hold at most 32768 F32 */
        bytes = F::kMainBytes;
        nvalid = F::kMainElems;
        return;
    }
    const int t = s - p.nmain;
    e0 = p.nmain * F::kMainElems + t * F::kTailElems;
    off = p.nmain * F::kMainBytes + t * F::kTailBytes;
    nvalid = p.rem - t * F::kTailElems < F::kTailElems ? p.rem - t * F::kTailElems : F::kTailElems;
    bytes = nvalid / F::kBlockElems * F::kBlockBytes;
}

/* Queues the copies of step s of every slot into stage (NS slots of StageCap bytes): the
 * 16-byte chunks from the boundary at or below the step's first byte to past its last,
 * none reading past the matrix's end. */
template <class F, int NS>
__device__ __forceinline__ void issue(const MvParams &p, const Slots<NS> &sl, int s,
                                      uint32_t stage, int lane)
{
    int e0, off, bytes, nvalid;
    step_geo<F>(p, s, e0, off, bytes, nvalid);
#pragma unroll
    for (int j = 0; j < NS; j++) {
        const unsigned char *src = sl.row[j] + off;
        const int mis = (int)((uint32_t)reinterpret_cast<uintptr_t>(src) & 15u);
        const unsigned char *base = src - mis;
        const int chunks = (mis + bytes + 15) >> 4;
        const int room = sl.room[j] - off + mis; /* bytes from base to the matrix's end */
        const uint32_t dst = stage + (uint32_t)(j * StageCap<F>::value);
        if (room >= 16 * chunks) { /* the window ends inside the matrix: whole chunks */
#pragma unroll
            for (int it = 0; it < F::kCopyIters; it++) {
                const int c = lane + 32 * it;
                if ((it == 0 || chunks > 32 * it) && c < chunks)
                    cp_async16(dst + 16u * (uint32_t)c, base + 16 * c);
            }
        } else {
#pragma unroll
            for (int it = 0; it < F::kCopyIters; it++)
                copy_chunk(dst, base, lane + 32 * it, chunks, room);
        }
    }
}

/* y = W x for the groups of p (see the file comment). Dynamic shared memory: x quads
 * (x_quads * 16 bytes), xsum (xsum_floats), then one ring per warp of kStages stages of NS
 * slots of StageCap bytes. */
template <class F, int NS, int MODE>
__global__ void __launch_bounds__(max_threads(NS), min_blocks(NS)) mv_kernel(const MvParams p)
{
    extern __shared__ __align__(16) unsigned char smem[];
    float *xs = reinterpret_cast<float *>(smem);
    float *xsum = xs + 4 * p.x_quads;
    constexpr int kCap = StageCap<F>::value, kStageBytes = NS * kCap;
    const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
    const int ring_off = p.x_quads * 16 + p.xsum_floats * 4 + warp * (F::kStages * kStageBytes);
    const uint32_t ring = (uint32_t)__cvta_generic_to_shared(smem) + (uint32_t)ring_off;

    const int nwarps = (int)(blockDim.x >> 5), nthreads = (int)blockDim.x;
    const int64_t gw = (int64_t)blockIdx.x * nwarps + warp, gstride = (int64_t)gridDim.x * nwarps;
    const int64_t ngroups = gw < p.groups ? (p.groups - 1 - gw) / gstride + 1 : 0;
    const int nsteps = p.nmain + p.ntail;

    /* the first kStages - 1 steps' copies go out before x is staged */
    Slots<NS> si, sc;
    int64_t ki = 0;
    int si_step = 0;
    if (ngroups > 0)
        slots_of<NS, MODE>(p, gw, si);
    sc = si;
#pragma unroll
    for (int st = 0; st < F::kStages - 1; st++) {
        if (ki < ngroups) {
            issue<F, NS>(p, si, si_step, ring + (uint32_t)(st * kStageBytes), lane);
            if (++si_step == nsteps) {
                si_step = 0;
                if (++ki < ngroups)
                    slots_of<NS, MODE>(p, gw + ki * gstride, si);
            }
        }
        cp_commit();
    }

    const bool x16 = (reinterpret_cast<uintptr_t>(p.x) & 15u) == 0;
    for (int q = (int)threadIdx.x; q < p.x_quads; q += nthreads) {
        const int e = 4 * q;
        float4 v;
        if (x16 && e + 3 < p.cols) {
            v = __ldg(reinterpret_cast<const float4 *>(p.x + e));
        } else {
            v.x = e < p.cols ? __ldg(p.x + e) : 0.0f;
            v.y = e + 1 < p.cols ? __ldg(p.x + e + 1) : 0.0f;
            v.z = e + 2 < p.cols ? __ldg(p.x + e + 2) : 0.0f;
            v.w = e + 3 < p.cols ? __ldg(p.x + e + 3) : 0.0f;
        }
        *reinterpret_cast<float4 *>(xs + 4u * xswz((uint32_t)q)) = v;
    }
    __syncthreads();
    if (F::kXsum) { /* the sum of each 32 elements of x, in element order */
        for (int b = (int)threadIdx.x; b < p.cols / 32; b += nthreads) {
            float s = 0.0f;
            for (int qd = 0; qd < 8; qd++) {
                const float4 v = ldx(xs, 0, xswz((uint32_t)(8 * b + qd)));
                s = (((s + v.x) + v.y) + v.z) + v.w;
            }
            xsum[b] = s;
        }
        __syncthreads();
    }

    const typename F::Lane L = F::lane_consts(p, lane);
    float acc[NS];
#pragma unroll
    for (int j = 0; j < NS; j++)
        acc[j] = 0.0f;
    int stage_c = 0, stage_i = F::kStages - 1, sc_step = 0;
    for (int64_t kc = 0; kc < ngroups;) {
        if (ki < ngroups) {
            issue<F, NS>(p, si, si_step, ring + (uint32_t)(stage_i * kStageBytes), lane);
            if (++si_step == nsteps) {
                si_step = 0;
                if (++ki < ngroups)
                    slots_of<NS, MODE>(p, gw + ki * gstride, si);
            }
        }
        cp_commit();
        cp_wait<F::kStages - 1>();
        __syncwarp();
        {
            int e0, off, bytes, nvalid;
            step_geo<F>(p, sc_step, e0, off, bytes, nvalid);
            int win[NS];
#pragma unroll
            for (int j = 0; j < NS; j++)
                win[j] = ring_off + stage_c * kStageBytes + j * kCap +
                         (int)(((uint32_t)reinterpret_cast<uintptr_t>(sc.row[j]) + (uint32_t)off) & 15u);
            if (sc_step < p.nmain)
                F::template main_step<NS>(L, smem, win, xs, e0 / 4, xsum, acc);
            else
                F::template tail_step<NS>(L, smem, win, xs, e0 / 4, nvalid, acc);
        }
        __syncwarp();
        stage_c = stage_c + 1 == F::kStages ? 0 : stage_c + 1;
        stage_i = stage_i + 1 == F::kStages ? 0 : stage_i + 1;
        if (++sc_step == nsteps) { /* the group's rows are done */
            float v[NS];
#pragma unroll
            for (int j = 0; j < NS; j++) {
                v[j] = acc[j];
#pragma unroll
                for (int o = 16; o > 0; o >>= 1)
                    v[j] += __shfl_xor_sync(kFull, v[j], o);
                acc[j] = 0.0f;
            }
            if (lane == 0) {
                if (MODE == kGeglu) {
                    *sc.y[0] = __fmul_rn(gem_gelu_tanh(v[0]), v[1]);
                } else {
#pragma unroll
                    for (int j = 0; j < NS; j++)
                        if (sc.valid[j])
                            *sc.y[j] = MODE == kGegluUp ? __fmul_rn(gem_gelu_tanh(*sc.y[j]), v[j]) : v[j];
                }
            }
            sc_step = 0;
            if (++kc < ngroups)
                slots_of<NS, MODE>(p, gw + kc * gstride, sc);
        }
    }
}

/* ---- gem_dmv_row: exact dequantization ---------------------------------------------------- */

__device__ __forceinline__ float ld_half(const unsigned char *p) /* global, 2-byte aligned */
{
    return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short *>(p)));
}

/* y[i] = scale * (element i of row `row` (or *drow, gem_row_at) of data, row_bytes a row),
 * i < cols: gem_gguf_dequant's arithmetic operation for operation (no contraction), then one
 * rounded product. One thread per block (per element for the plain types). */
template <int TYPE>
__global__ void row_kernel(const unsigned char *data, size_t row_bytes, int64_t rowh,
                           const int32_t *drow, int64_t rows, int64_t nblocks, int64_t be,
                           float scale, float *y)
{
    const int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblocks)
        return;
    const int64_t rr = gem_row_at(rowh, drow, rows);
    if (rr < 0) {
        for (int64_t j = 0; j < be; j++)
            y[be * b + j] = __int_as_float(0x7fc00000);
        return;
    }
    const unsigned char *row = data + (size_t)rr * row_bytes;
    if (TYPE == GEM_GGUF_F32) {
        y[b] = __fmul_rn(reinterpret_cast<const float *>(row)[b], scale);
    } else if (TYPE == GEM_GGUF_F16) {
        y[b] = __fmul_rn(ld_half(row + 2 * b), scale);
    } else if (TYPE == GEM_GGUF_BF16) {
        const unsigned short h = reinterpret_cast<const unsigned short *>(row)[b];
        y[b] = __fmul_rn(u2f((uint32_t)h << 16), scale);
    } else if (TYPE == GEM_GGUF_Q8_0) {
        const unsigned char *p = row + 34 * b;
        const float d = ld_half(p);
        for (int j = 0; j < 32; j++)
            y[32 * b + j] = __fmul_rn(__fmul_rn((float)(signed char)p[2 + j], d), scale);
    } else if (TYPE == GEM_GGUF_Q4_0) {
        const unsigned char *p = row + 18 * b;
        const float d = ld_half(p);
        for (int j = 0; j < 16; j++) {
            y[32 * b + j] = __fmul_rn(__fmul_rn((float)((p[2 + j] & 0xf) - 8), d), scale);
            y[32 * b + 16 + j] = __fmul_rn(__fmul_rn((float)((p[2 + j] >> 4) - 8), d), scale);
        }
    } else if (TYPE == GEM_GGUF_Q4_K) {
        const unsigned char *p = row + 144 * b;
        uint4 h;
        memcpy(&h, p, 16);
        const unsigned char *q = p + 16;
        float *out = y + 256 * b;
        for (int c = 0; c < 4; c++) {
            float d1, m1, d2, m2;
            FmtQ4_K::scales(h, 2 * c, d1, m1);
            FmtQ4_K::scales(h, 2 * c + 1, d2, m2);
            for (int l = 0; l < 32; l++)
                out[64 * c + l] = __fmul_rn(__fsub_rn(__fmul_rn(d1, (float)(q[32 * c + l] & 0xf)), m1), scale);
            for (int l = 0; l < 32; l++)
                out[64 * c + 32 + l] = __fmul_rn(__fsub_rn(__fmul_rn(d2, (float)(q[32 * c + l] >> 4)), m2), scale);
        }
    } else { /* Q6_K */
        const unsigned char *p = row + 210 * b;
        const float d = ld_half(p + 208);
        for (int h = 0; h < 2; h++) {
            const unsigned char *ql = p + 64 * h, *qh = p + 128 + 32 * h;
            const signed char *sc = reinterpret_cast<const signed char *>(p + 192 + 8 * h);
            float *out = y + 256 * b + 128 * h;
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                out[l] = __fmul_rn(__fmul_rn(__fmul_rn(d, (float)sc[is]), (float)q1), scale);
                out[l + 32] = __fmul_rn(__fmul_rn(__fmul_rn(d, (float)sc[is + 2]), (float)q2), scale);
                out[l + 64] = __fmul_rn(__fmul_rn(__fmul_rn(d, (float)sc[is + 4]), (float)q3), scale);
                out[l + 96] = __fmul_rn(__fmul_rn(__fmul_rn(d, (float)sc[is + 6]), (float)q4), scale);
            }
        }
    }
}

/* Row `row` of a Q4_K matrix in tiles (matvec_tiles.cu's layout; GEM_TILES_Q4K_SB_BYTES a
 * tile's super-block) dequantized times scale: row_kernel's arithmetic on the same bytes, so
 * the same bits. One thread per element (cols of them: the embedding row of the head is read
 * once a token, and a thread per super-block left the row to 21 threads at Gemma 4 31B's
 * width). */
__global__ void q4k_tile_row_kernel(const unsigned char *data, int64_t rowh, const int32_t *drow,
                                    int64_t rows, int64_t cols, float scale, float *y)
{
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols)
        return;
    const int64_t row = gem_row_at(rowh, drow, rows);
    if (row < 0) {
        y[j] = __int_as_float(0x7fc00000);
        return;
    }
    const int g = (int)(row % 8), e = (int)(j % 256), sb = e / 32, l = e % 32;
    const unsigned char *t =
        data + ((size_t)(row / 8) * (size_t)(cols / 256) + (size_t)(j / 256)) *
                   GEM_TILES_Q4K_SB_BYTES;
    uint4 h;
    memcpy(&h, t + 1024 + 16 * g, 16);
    float d1, m1;
    FmtQ4_K::scales(h, sb, d1, m1);
    const int q = t[gem_tiles_q4k_qs_off(g, 32 * (sb / 2) + l)];
    y[j] = __fmul_rn(__fsub_rn(__fmul_rn(d1, (float)(sb & 1 ? q >> 4 : q & 0xf)), m1), scale);
}

/* Row `row` of a Q6_K matrix in tiles (matvec_tiles.cu's layout; GEM_TILES_Q6K_SB_BYTES a
 * tile's super-block) dequantized times scale: row_kernel's arithmetic on the same bytes, so
 * the same bits. One thread per element, as q4k_tile_row_kernel. */
__global__ void q6k_tile_row_kernel(const unsigned char *data, int64_t rowh, const int32_t *drow,
                                    int64_t rows, int64_t cols, float scale, float *y)
{
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols)
        return;
    const int64_t row = gem_row_at(rowh, drow, rows);
    if (row < 0) {
        y[j] = __int_as_float(0x7fc00000);
        return;
    }
    /* element 128 h + 32 i + l of the super-block */
    const int g = (int)(row % 8), e = (int)(j % 256), h = e / 128, i = (e % 128) / 32, l = e % 32;
    const unsigned char *t =
        data + ((size_t)(row / 8) * (size_t)(cols / 256) + (size_t)(j / 256)) *
                   GEM_TILES_Q6K_SB_BYTES;
    const float d = __half2float(__ushort_as_half(
        (unsigned short)(t[gem_tiles_q6k_d_off(g)] | (t[gem_tiles_q6k_d_off(g) + 1] << 8))));
    const int ql = t[gem_tiles_q4k_qs_off(g, 64 * h + l + 32 * (i & 1))];
    const int qh = t[gem_tiles_q6k_qh_off(g, 32 * h + l)];
    const int q = ((i < 2 ? ql & 0xf : ql >> 4) | (((qh >> (2 * i)) & 3) << 4)) - 32;
    const float sc = (float)(signed char)t[gem_tiles_q6k_sc_off(g, 8 * h + l / 16 + 2 * i)];
    y[j] = __fmul_rn(__fmul_rn(__fmul_rn(d, sc), (float)q), scale);
}

/* Row `row` of a Q8_0 matrix in tiles (matvec_tiles.cu's layout; GEM_TILES_Q8_0_CHUNK_BYTES a
 * tile's chunk of four blocks) dequantized times scale: row_kernel's arithmetic on the same
 * bytes, so the same bits. One thread per block. */
__global__ void q8_0_tile_row_kernel(const unsigned char *data, int64_t rowh,
                                     const int32_t *drow, int64_t rows, int64_t nb, float scale,
                                     float *y)
{
    const int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb)
        return;
    const int64_t row = gem_row_at(rowh, drow, rows);
    if (row < 0) {
        for (int e = 0; e < 32; e++)
            y[32 * b + e] = __int_as_float(0x7fc00000);
        return;
    }
    const int g = (int)(row % 8), i = (int)(b % 4);
    const size_t chunk = (size_t)(row / 8) * (size_t)(nb / 4) + (size_t)(b / 4);
    const unsigned char *t = data + chunk * GEM_TILES_Q8_0_CHUNK_BYTES;
    const float d = ld_half(t + gem_tiles_q8_0_d_off(g, i));
    for (int e = 0; e < 32; e++)
        y[32 * b + e] =
            __fmul_rn(__fmul_rn((float)(signed char)t[gem_tiles_q8_0_qs_off(g, i, e)], d), scale);
}

/* Row `row` of a BF16 matrix in tiles (matvec_tiles.cu's layout; GEM_TILES_BF16_CHUNK_BYTES a
 * tile's chunk of 128 columns) times scale: row_kernel's arithmetic on the same bytes, so the
 * same bits. One thread per element. */
__global__ void bf16_tile_row_kernel(const unsigned char *data, int64_t rowh,
                                     const int32_t *drow, int64_t rows, int64_t cols, float scale,
                                     float *y)
{
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols)
        return;
    const int64_t row = gem_row_at(rowh, drow, rows);
    if (row < 0) {
        y[j] = __int_as_float(0x7fc00000);
        return;
    }
    const size_t chunk = (size_t)(row / 8) * (size_t)(cols / 128) + (size_t)(j / 128);
    const unsigned char *p = data + chunk * GEM_TILES_BF16_CHUNK_BYTES +
                             gem_tiles_bf16_off((int)(row % 8), (int)(j % 128));
    const unsigned short h = *reinterpret_cast<const unsigned short *>(p);
    y[j] = __fmul_rn(u2f((uint32_t)h << 16), scale);
}

/* ---- gem_dmatrix_fill_random ------------------------------------------------------------------ */

__device__ __forceinline__ uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Word k of the counter-based stream `seed` (SplitMix64 at counter k + 1). */
__device__ __forceinline__ uint64_t rnd(uint64_t seed, uint64_t k)
{
    return mix64(seed + (k + 1) * 0x9E3779B97F4A7C15ull);
}
/* A uniform float in [-1, 1) from the top 24 bits of r. */
__device__ __forceinline__ float unit(uint64_t r) { return (float)(r >> 40) * 0x1p-23f - 1.0f; }

/* v as a finite, nonzero f16 (v > 0): rounded to nearest, clamped to [2^-24, 65504]. */
__device__ __forceinline__ unsigned short f16_scale(float v)
{
    v = fminf(fmaxf(v, 0x1p-24f), 65504.0f);
    unsigned short h = __half_as_ushort(__float2half_rn(v));
    return h ? h : (unsigned short)1;
}

/* Block b (element b for the plain types) of the whole matrix (nblocks of them): the
 * stream's words b * W .. b * W + W - 1 (W per type) give its bytes. */
template <int TYPE>
__global__ void fill_kernel(unsigned char *data, int64_t nblocks, uint64_t seed, float amp)
{
    const int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblocks)
        return;
    const uint64_t ub = (uint64_t)b;
    if (TYPE == GEM_GGUF_F32) {
        reinterpret_cast<float *>(data)[b] = amp * unit(rnd(seed, ub));
    } else if (TYPE == GEM_GGUF_F16) {
        reinterpret_cast<__half *>(data)[b] = __float2half_rn(fminf(amp, 65504.0f) * unit(rnd(seed, ub)));
    } else if (TYPE == GEM_GGUF_BF16) {
        const float v = amp * unit(rnd(seed, ub));
        uint32_t u = __float_as_uint(v);
        u += 0x7fffu + ((u >> 16) & 1u); /* to nearest even (v finite) */
        reinterpret_cast<unsigned short *>(data)[b] = (unsigned short)(u >> 16);
    } else if (TYPE == GEM_GGUF_Q8_0) { /* q uniform in [-127, 127], d = amp / 127 */
        unsigned char *p = data + 34 * b;
        const unsigned short d = f16_scale(amp / 127.0f);
        p[0] = (unsigned char)(d & 0xff), p[1] = (unsigned char)(d >> 8);
        for (int w = 0; w < 4; w++) {
            const uint64_t r = rnd(seed, 4 * ub + w);
            for (int i = 0; i < 8; i++)
                p[2 + 8 * w + i] = (unsigned char)(signed char)((int)((r >> (8 * i)) & 0xff) % 255 - 127);
        }
    } else if (TYPE == GEM_GGUF_Q4_0) { /* nibbles uniform, d = amp / 8 */
        unsigned char *p = data + 18 * b;
        const unsigned short d = f16_scale(amp / 8.0f);
        p[0] = (unsigned char)(d & 0xff), p[1] = (unsigned char)(d >> 8);
        for (int w = 0; w < 2; w++) {
            const uint64_t r = rnd(seed, 2 * ub + w);
            for (int i = 0; i < 8; i++)
                p[2 + 8 * w + i] = (unsigned char)(r >> (8 * i));
        }
    } else if (TYPE == GEM_GGUF_Q4_K) {
        /* sub-block scale s in [32, 63] and min m = s, d = 2 amp / (15 * 63),
         * dmin = amp / 63: w = s (amp / 63) (2n / 15 - 1), within [-amp, amp] */
        unsigned char *p = data + 144 * b;
        const unsigned short d = f16_scale(2.0f * amp / (15.0f * 63.0f));
        const unsigned short dm = f16_scale(amp / 63.0f);
        p[0] = (unsigned char)(d & 0xff), p[1] = (unsigned char)(d >> 8);
        p[2] = (unsigned char)(dm & 0xff), p[3] = (unsigned char)(dm >> 8);
        const uint64_t r0 = rnd(seed, 17 * ub);
        unsigned char sc[8];
        for (int s = 0; s < 8; s++)
            sc[s] = (unsigned char)(32 + ((r0 >> (6 * s)) & 31));
        unsigned char *scales = p + 4;
        for (int j = 0; j < 4; j++) { /* the quantizer's packing, with m = sc */
            scales[j] = (unsigned char)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
            scales[j + 4] = (unsigned char)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
            scales[j + 8] = (unsigned char)((sc[j + 4] & 0xf) | ((sc[j + 4] & 0xf) << 4));
        }
        for (int w = 0; w < 16; w++) {
            const uint64_t r = rnd(seed, 17 * ub + 1 + w);
            for (int i = 0; i < 8; i++)
                p[16 + 8 * w + i] = (unsigned char)(r >> (8 * i));
        }
    } else { /* Q6_K: six-bit values uniform, scales in [64, 127], d = amp / (32 * 127) */
        unsigned char *p = data + 210 * b;
        for (int w = 0; w < 24; w++) {
            const uint64_t r = rnd(seed, 26 * ub + w);
            for (int i = 0; i < 8; i++)
                p[8 * w + i] = (unsigned char)(r >> (8 * i));
        }
        const uint64_t r1 = rnd(seed, 26 * ub + 24), r2 = rnd(seed, 26 * ub + 25);
        for (int i = 0; i < 8; i++) {
            p[192 + i] = (unsigned char)(64 + ((r1 >> (8 * i)) & 63));
            p[200 + i] = (unsigned char)(64 + ((r2 >> (8 * i)) & 63));
        }
        const unsigned short d = f16_scale(amp / (32.0f * 127.0f));
        p[208] = (unsigned char)(d & 0xff), p[209] = (unsigned char)(d >> 8);
    }
}

/* ---- host side ------------------------------------------------------------------------------- */

gem_status report_launch(const char *what)
{
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return GEM_OK;
    fprintf(stderr, "gem cuda: %s launch failed: %s: %s\n", what, cudaGetErrorName(e),
            cudaGetErrorString(e));
    return GEM_ERR_DEVICE;
}

/* What the launches need of the current device and of each kernel, cached. */
struct DevInfo {
    int sms, smem_optin;
};
struct KernInfo {
    const void *fn;
    int device, threads, smem, blocks; /* smem < 0: the attribute was set; blocks unused */
};
std::mutex g_mu;
constexpr int kMaxDevices = 64, kMaxKern = 256;
DevInfo g_dev[kMaxDevices];
bool g_dev_ok[kMaxDevices];
KernInfo g_kern[kMaxKern];
int g_nkern;

gem_status current_device(int *dev, DevInfo *info)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        (void)cudaGetLastError();
        return GEM_ERR_NO_DEVICE;
    }
    if (cudaGetDevice(dev) != cudaSuccess || *dev < 0 || *dev >= kMaxDevices) {
        (void)cudaGetLastError();
        return GEM_ERR_NO_DEVICE;
    }
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_dev_ok[*dev]) {
        DevInfo d;
        if (cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, *dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                   *dev) != cudaSuccess) {
            (void)cudaGetLastError();
            return GEM_ERR_DEVICE;
        }
        g_dev[*dev] = d;
        g_dev_ok[*dev] = true;
    }
    *info = g_dev[*dev];
    return GEM_OK;
}

/* Resident blocks per SM of fn with `threads` threads and `smem` dynamic bytes on the
 * current device (the kernel's dynamic shared memory limit raised to the device's opt-in
 * maximum first); 0 when none fits. */
gem_status blocks_per_sm(const void *fn, int dev, const DevInfo &di, int threads, int smem,
                         int *blocks)
{
    std::lock_guard<std::mutex> lock(g_mu);
    bool attr = false;
    for (int i = 0; i < g_nkern; i++) {
        if (g_kern[i].fn != fn || g_kern[i].device != dev)
            continue;
        if (g_kern[i].smem < 0)
            attr = true;
        else if (g_kern[i].smem == smem && g_kern[i].threads == threads) {
            *blocks = g_kern[i].blocks;
            return GEM_OK;
        }
    }
    if (!attr) {
        if (cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 di.smem_optin) != cudaSuccess) {
            (void)cudaGetLastError();
            return GEM_ERR_DEVICE;
        }
        if (g_nkern < kMaxKern)
            g_kern[g_nkern++] = KernInfo{fn, dev, 0, -1, 0};
    }
    int b = 0;
    if (smem <= di.smem_optin &&
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, fn, threads, (size_t)smem) !=
            cudaSuccess) {
        (void)cudaGetLastError();
        return GEM_ERR_DEVICE;
    }
    if (g_nkern < kMaxKern)
        g_kern[g_nkern++] = KernInfo{fn, dev, threads, smem, b};
    *blocks = b;
    return GEM_OK;
}

/* Launches mv_kernel<F, NS, MODE> over p (mat, nmat, x, cols set; the rest derived). */
template <class F, int NS, int MODE> gem_status launch_mv(MvParams p, cudaStream_t stream)
{
    int64_t groups = 0;
    for (int i = 0; i < p.nmat; i++) {
        p.mat[i].group0 = groups;
        groups += MODE == kGeglu ? p.mat[i].rows : (p.mat[i].rows + NS - 1) / NS;
        if (MODE == kGeglu)
            break; /* the up matrix has the same rows */
    }
    p.groups = groups;
    p.nmain = p.cols / F::kMainElems;
    p.rem = p.cols - p.nmain * F::kMainElems;
    p.ntail = (p.rem + F::kTailElems - 1) / F::kTailElems;
    p.x_quads = (int)((p.cols + kXPad - 1) / kXPad * kXPad / 4);
    p.xsum_floats = F::kXsum ? (p.cols / 32 + 3) / 4 * 4 : 0;
    for (int i = 0; i < kMagics; i++)
        p.magic[i] = kMagicBits[i];
    const int x_bytes = p.x_quads * 16 + p.xsum_floats * 4;
    const int warp_bytes = F::kStages * NS * StageCap<F>::value;

    int dev;
    DevInfo di;
    gem_status st = current_device(&dev, &di);
    if (st != GEM_OK)
        return st;
    const void *fn = reinterpret_cast<const void *>(&mv_kernel<F, NS, MODE>);
    int best_w = 0, best_bps = 0;
    for (int w = 8; w * 32 <= max_threads(NS); w += 8) { /* the most resident warps */
        int bps = 0;
        if ((st = blocks_per_sm(fn, dev, di, 32 * w, x_bytes + w * warp_bytes, &bps)) != GEM_OK)
            return st;
        if (bps * w > best_bps * best_w)
            best_w = w, best_bps = bps;
    }
    if (best_bps < 1)
        return GEM_ERR_UNSUPPORTED;
    /* one wave of resident blocks at most; warps loop over the groups beyond it */
    const int64_t resident = (int64_t)di.sms * best_bps, needed = (groups + best_w - 1) / best_w;
    const int64_t grid = needed < resident ? needed : resident;
    mv_kernel<F, NS, MODE><<<(unsigned)grid, 32 * best_w, (size_t)(x_bytes + best_w * warp_bytes),
                             stream>>>(p);
    return report_launch("gem_dmv");
}

template <int NS, int MODE> gem_status launch_type(gem_gguf_type t, const MvParams &p, cudaStream_t s)
{
    switch (t) {
    case GEM_GGUF_F32: return launch_mv<FmtF32, NS, MODE>(p, s);
    case GEM_GGUF_F16: return launch_mv<Fmt16<false>, NS, MODE>(p, s);
    case GEM_GGUF_BF16: return launch_mv<Fmt16<true>, NS, MODE>(p, s);
    case GEM_GGUF_Q8_0: return launch_mv<FmtQ8_0, NS, MODE>(p, s);
    case GEM_GGUF_Q4_0: return launch_mv<FmtQ4_0, NS, MODE>(p, s);
    case GEM_GGUF_Q4_K: return launch_mv<FmtQ4_K, NS, MODE>(p, s);
    case GEM_GGUF_Q6_K: return launch_mv<FmtQ6_K, NS, MODE>(p, s);
    }
    return GEM_ERR_UNSUPPORTED;
}

bool known_type(uint32_t t)
{
    switch (t) {
    case GEM_GGUF_F32:
    case GEM_GGUF_F16:
    case GEM_GGUF_BF16:
    case GEM_GGUF_Q8_0:
    case GEM_GGUF_Q4_0:
    case GEM_GGUF_Q4_K:
    case GEM_GGUF_Q6_K: return true;
    }
    return false;
}

/* The tile layout of a type: Q4_0, Q4_K, Q6_K, Q8_0 and BF16 have one; GEM_DLAYOUT_ROWS for
 * the others. */
gem_dlayout tiles_layout(gem_gguf_type t)
{
    return t == GEM_GGUF_Q4_0   ? GEM_DLAYOUT_Q4_0_TILES
           : t == GEM_GGUF_Q4_K ? GEM_DLAYOUT_Q4_K_TILES
           : t == GEM_GGUF_Q6_K ? GEM_DLAYOUT_Q6_K_TILES
           : t == GEM_GGUF_Q8_0 ? GEM_DLAYOUT_Q8_0_TILES
           : t == GEM_GGUF_BF16 ? GEM_DLAYOUT_BF16_TILES
                                : GEM_DLAYOUT_ROWS;
}

/* The checks every entry makes of a matrix: GEM_ERR_NULL, GEM_ERR_SHAPE (rows or cols
 * < 1, rows >= 2^31, row_bytes not gem_gguf_row_bytes, tiles of a shape that has none),
 * GEM_ERR_UNSUPPORTED (type or cols), GEM_ERR_PARAM (an unknown layout), GEM_ERR_OVERFLOW
 * (the bytes do not fit the address space), GEM_ERR_ALIGN (data not 16-byte aligned). */
gem_status check_matrix(const gem_dmatrix *w)
{
    if (!w || !w->data)
        return GEM_ERR_NULL;
    if (w->rows < 1 || w->cols < 1 || w->rows > INT32_MAX)
        return GEM_ERR_SHAPE;
    if (!gem_dmv_supported(w->type, w->cols))
        return GEM_ERR_UNSUPPORTED;
    if (w->layout != GEM_DLAYOUT_ROWS && w->layout != GEM_DLAYOUT_Q4_0_TILES &&
        w->layout != GEM_DLAYOUT_Q4_K_TILES && w->layout != GEM_DLAYOUT_Q6_K_TILES &&
        w->layout != GEM_DLAYOUT_Q8_0_TILES && w->layout != GEM_DLAYOUT_BF16_TILES)
        return GEM_ERR_PARAM;
    if (w->layout != GEM_DLAYOUT_ROWS &&
        (w->layout != tiles_layout(w->type) || !gem_dmatrix_tiles_ok(w->type, w->rows, w->cols)))
        return GEM_ERR_SHAPE;
    size_t rb = 0, total = 0, end = 0;
    if (gem_gguf_row_bytes(w->type, w->cols, &rb) != GEM_OK || rb != w->row_bytes)
        return GEM_ERR_SHAPE;
    if (gem_mul_size((size_t)w->rows, rb, &total) != GEM_OK ||
        gem_add_size((size_t)reinterpret_cast<uintptr_t>(w->data), total, &end) != GEM_OK)
        return GEM_ERR_OVERFLOW;
    if (reinterpret_cast<uintptr_t>(w->data) & 15u)
        return GEM_ERR_ALIGN;
    return GEM_OK;
}

bool tiled(const gem_dmatrix *w) { return w->layout != GEM_DLAYOUT_ROWS; }

/* The kind of a tiled matrix's launch. */
TileKind tile_kind(gem_dlayout l)
{
    return l == GEM_DLAYOUT_Q4_K_TILES   ? TileKind::kQ4_K
           : l == GEM_DLAYOUT_Q6_K_TILES ? TileKind::kQ6_K
           : l == GEM_DLAYOUT_Q8_0_TILES ? TileKind::kQ8_0
           : l == GEM_DLAYOUT_BF16_TILES ? TileKind::kBF16
                                         : TileKind::kQ4_0;
}

/* 1 when the n floats at a and the m at b share a byte. */
bool overlaps(const float *a, int64_t n, const float *b, int64_t m)
{
    const uintptr_t a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
    return a0 < b0 + 4 * (uintptr_t)m && b0 < a0 + 4 * (uintptr_t)n;
}

/* 1 when the n bytes at a and the m at b share a byte. */
bool overlaps_bytes(const void *a, size_t n, const void *b, size_t m)
{
    const uintptr_t a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
    return a0 < b0 + m && b0 < a0 + n;
}

/* The x scratch of a product on tiles: GEM_ERR_NULL, GEM_ERR_ALIGN (not 16-byte aligned),
 * GEM_ERR_OVERLAP (with x or one of the n outputs y (rows[i])). */
gem_status check_xq(const void *xq, int64_t cols, const float *x, int n, float *const *y,
                    const int64_t *rows)
{
    if (!xq)
        return GEM_ERR_NULL;
    if (reinterpret_cast<uintptr_t>(xq) & 15u)
        return GEM_ERR_ALIGN;
    const size_t nb = gem_dmv_xq_bytes(cols);
    if (overlaps_bytes(xq, nb, x, (size_t)cols * 4))
        return GEM_ERR_OVERLAP;
    for (int i = 0; i < n; i++)
        if (overlaps_bytes(xq, nb, y[i], (size_t)rows[i] * 4))
            return GEM_ERR_OVERLAP;
    return GEM_OK;
}

gem_status check_vector(const float *v)
{
    if (!v)
        return GEM_ERR_NULL;
    return (reinterpret_cast<uintptr_t>(v) & 3u) ? GEM_ERR_ALIGN : GEM_OK;
}

MvMat mat_of(const gem_dmatrix *w, float *y)
{
    const unsigned char *d = static_cast<const unsigned char *>(w->data);
    return MvMat{d, d + (size_t)w->rows * w->row_bytes, y, w->rows, (int64_t)w->row_bytes, 0};
}

/* gem_dmv_multi's body with row slots ns (1, 2 or 4; file-order rows only); xq_ready as
 * gem_dmv_multi_prepared's. */
gem_status dmv_multi_ns(int n, const gem_dmatrix *const *w, const float *x, float *const *y,
                        void *xq, void *stream, int ns, bool xq_ready)
{
    if (n < 1 || n > 3)
        return GEM_ERR_PARAM;
    if (!w || !y)
        return GEM_ERR_NULL;
    gem_status st = check_vector(x);
    if (st != GEM_OK)
        return st;
    bool any_tiles = false, pieces = false;
    int64_t rows[3] = {0, 0, 0};
    for (int i = 0; i < n; i++) {
        if ((st = check_matrix(w[i])) != GEM_OK || (st = check_vector(y[i])) != GEM_OK)
            return st;
        if (w[i]->cols != w[0]->cols)
            return GEM_ERR_SHAPE;
        if (overlaps(y[i], w[i]->rows, x, w[i]->cols))
            return GEM_ERR_OVERLAP;
        for (int k = 0; k < i; k++)
            if (overlaps(y[i], w[i]->rows, y[k], w[k]->rows))
                return GEM_ERR_OVERLAP;
        any_tiles |= tiled(w[i]);
        pieces |= w[i]->layout == GEM_DLAYOUT_BF16_TILES;
        rows[i] = w[i]->rows;
    }
    if (any_tiles) {
        int dev;
        DevInfo di;
        if ((st = check_xq(xq, w[0]->cols, x, n, y, rows)) != GEM_OK ||
            (st = current_device(&dev, &di)) != GEM_OK)
            return st;
    }
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    /* one launch per element type and layout, the matrices of one together in order */
    bool done[3] = {false, false, false};
    for (int i = 0; i < n; i++) {
        if (done[i])
            continue;
        if (tiled(w[i])) {
            TileParams tp;
            memset(&tp, 0, sizeof tp);
            tp.cols = w[0]->cols;
            tp.kind = tile_kind(w[i]->layout);
            tp.xq = static_cast<const unsigned char *>(xq);
            for (int k = i; k < n; k++)
                if (!done[k] && w[k]->layout == w[i]->layout) {
                    tp.mat[tp.nmat++] = TileMat{static_cast<const unsigned char *>(w[k]->data),
                                                y[k], w[k]->rows, 0};
                    done[k] = true;
                }
            if ((st = gem_tiles_launch(tp, x, false, xq_ready, pieces, s)) != GEM_OK)
                return st;
            xq_ready = true; /* every tile layout reads the one scratch of x */
            continue;
        }
        MvParams p;
        memset(&p, 0, sizeof p);
        p.x = x;
        p.cols = (int)w[0]->cols;
        for (int k = i; k < n; k++)
            if (!done[k] && !tiled(w[k]) && w[k]->type == w[i]->type) {
                p.mat[p.nmat++] = mat_of(w[k], y[k]);
                done[k] = true;
            }
        st = ns == 1   ? launch_type<1, kPlain>(w[i]->type, p, s)
             : ns == 4 ? launch_type<4, kPlain>(w[i]->type, p, s)
                       : launch_type<2, kPlain>(w[i]->type, p, s);
        if (st != GEM_OK)
            return st;
    }
    return GEM_OK;
}

} /* namespace */

/* ---- the entries ------------------------------------------------------------------------------- */

extern "C" {

int gem_dmv_supported(gem_gguf_type type, int64_t cols)
{
    int64_t be = 0;
    if (!known_type((uint32_t)type) || gem_gguf_type_block((uint32_t)type, &be, NULL) != GEM_OK)
        return 0;
    return cols >= 1 && cols <= kMaxCols && cols % be == 0;
}

int gem_dmatrix_tiles_ok(gem_gguf_type type, int64_t rows, int64_t cols)
{
    const gem_dlayout l = tiles_layout(type);
    return l != GEM_DLAYOUT_ROWS && rows <= INT32_MAX && gem_dmv_supported(type, cols) &&
           gem_tiles_shape_ok(tile_kind(l), rows, cols, kMaxCols);
}

size_t gem_dmv_xq_bytes(int64_t cols) { return gem_tiles_xq_bytes(cols); }

gem_status gem_dmatrix_tile(gem_dmatrix *w, const void *src, void *stream)
{
    if (!w || !src)
        return GEM_ERR_NULL;
    gem_dmatrix rows_view = *w;
    rows_view.layout = GEM_DLAYOUT_ROWS;
    gem_status st = check_matrix(&rows_view);
    if (st != GEM_OK)
        return st;
    if (!gem_dmatrix_tiles_ok(w->type, w->rows, w->cols))
        return GEM_ERR_UNSUPPORTED;
    const size_t bytes = (size_t)w->rows * w->row_bytes; /* checked by check_matrix */
    if (overlaps_bytes(src, bytes, w->data, bytes))
        return GEM_ERR_OVERLAP;
    int dev;
    DevInfo di;
    if ((st = current_device(&dev, &di)) != GEM_OK)
        return st;
    const gem_dlayout l = tiles_layout(w->type);
    st = gem_tiles_from_rows(tile_kind(l), static_cast<const unsigned char *>(src), w->row_bytes,
                             w->rows, w->cols, static_cast<unsigned char *>(w->data),
                             static_cast<cudaStream_t>(stream));
    if (st == GEM_OK)
        w->layout = l;
    return st;
}

gem_status gem_dmv(const gem_dmatrix *w, const float *x, float *y, void *xq, void *stream)
{
    return dmv_multi_ns(1, &w, x, &y, xq, stream, 2, false);
}

gem_status gem_dmv_multi(int n, const gem_dmatrix *const *w, const float *x, float *const *y,
                         void *xq, void *stream)
{
    return dmv_multi_ns(n, w, x, y, xq, stream, 2, false);
}

gem_status gem_dmv_multi_prepared(int n, const gem_dmatrix *const *w, const float *x,
                                  float *const *y, void *xq, void *stream)
{
    return dmv_multi_ns(n, w, x, y, xq, stream, 2, true);
}

/* The product with `slots` rows per warp (1, 2 or 4; gem_dmv uses 2): for
 * dev/cuda/model_matvec.cu, which measures the choice. The same bits for any slots. */
gem_status gem_dmv_slots(const gem_dmatrix *w, const float *x, float *y, void *stream, int slots)
{
    if (slots != 1 && slots != 2 && slots != 4)
        return GEM_ERR_PARAM;
    if (w && tiled(w))
        return GEM_ERR_UNSUPPORTED; /* row slots are the file-order kernel's */
    return dmv_multi_ns(1, &w, x, &y, NULL, stream, slots, false);
}

/* gem_dmv_geglu's body; xq_ready as gem_dmv_geglu_prepared's. */
static gem_status dmv_geglu(const gem_dmatrix *wg, const gem_dmatrix *wu, const float *x, float *y,
                            void *xq, void *stream, bool xq_ready)
{
    gem_status st;
    if ((st = check_matrix(wg)) != GEM_OK || (st = check_matrix(wu)) != GEM_OK ||
        (st = check_vector(x)) != GEM_OK || (st = check_vector(y)) != GEM_OK)
        return st;
    if (wg->rows != wu->rows || wg->cols != wu->cols)
        return GEM_ERR_SHAPE;
    if (overlaps(y, wg->rows, x, wg->cols))
        return GEM_ERR_OVERLAP;
    if (tiled(wg) || tiled(wu)) {
        const int64_t rows = wg->rows;
        if ((st = check_xq(xq, wg->cols, x, 1, &y, &rows)) != GEM_OK)
            return st;
        if (wg->layout != wu->layout)
            return GEM_ERR_UNSUPPORTED; /* one layout for both, as the model stores them */
        int dev;
        DevInfo di;
        if ((st = current_device(&dev, &di)) != GEM_OK)
            return st;
        TileParams tp;
        memset(&tp, 0, sizeof tp);
        tp.cols = wg->cols;
        tp.kind = tile_kind(wg->layout);
        tp.xq = static_cast<const unsigned char *>(xq);
        tp.nmat = 2;
        tp.mat[0] = TileMat{static_cast<const unsigned char *>(wg->data), y, wg->rows, 0};
        tp.mat[1] = TileMat{static_cast<const unsigned char *>(wu->data), y, wu->rows, 0};
        return gem_tiles_launch(tp, x, true, xq_ready, tp.kind == TileKind::kBF16,
                                static_cast<cudaStream_t>(stream));
    }
    MvParams p;
    memset(&p, 0, sizeof p);
    p.x = x;
    p.cols = (int)wg->cols;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (wg->type == wu->type) { /* one launch: a group is the gate row and the up row */
        p.nmat = 2;
        p.mat[0] = mat_of(wg, y);
        p.mat[1] = mat_of(wu, y);
        return launch_type<2, kGeglu>(wg->type, p, s);
    }
    /* two element types: y = Wg x, then y = gelu(y) * (Wu x) (the same bits) */
    p.nmat = 1;
    p.mat[0] = mat_of(wg, y);
    if ((st = launch_type<2, kPlain>(wg->type, p, s)) != GEM_OK)
        return st;
    p.mat[0] = mat_of(wu, y);
    return launch_type<2, kGegluUp>(wu->type, p, s);
}

gem_status gem_dmv_geglu(const gem_dmatrix *wg, const gem_dmatrix *wu, const float *x, float *y,
                         void *xq, void *stream)
{
    return dmv_geglu(wg, wu, x, y, xq, stream, false);
}

gem_status gem_dmv_geglu_prepared(const gem_dmatrix *wg, const gem_dmatrix *wu, const float *x,
                                  float *y, void *xq, void *stream)
{
    return dmv_geglu(wg, wu, x, y, xq, stream, true);
}

/* gem_dmv_row and gem_dmv_row_at: the row `row`, or with drow (device) the row *drow */
static gem_status dmv_row(const gem_dmatrix *w, int64_t row, const int32_t *drow, float scale,
                          float *y, void *stream)
{
    gem_status st;
    if ((st = check_matrix(w)) != GEM_OK || (st = check_vector(y)) != GEM_OK)
        return st;
    if (!drow && (row < 0 || row >= w->rows))
        return GEM_ERR_RANGE;
    if (drow && (st = check_vector(reinterpret_cast<const float *>(drow))) != GEM_OK)
        return st;
    int dev;
    DevInfo di;
    if ((st = current_device(&dev, &di)) != GEM_OK)
        return st;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const unsigned char *data = static_cast<const unsigned char *>(w->data);
    if (w->layout == GEM_DLAYOUT_Q4_0_TILES)
        return gem_tiles_row(data, w->rows, w->cols, row, drow, scale, y, s);
    if (w->layout == GEM_DLAYOUT_Q4_K_TILES || w->layout == GEM_DLAYOUT_Q6_K_TILES) {
        (w->layout == GEM_DLAYOUT_Q4_K_TILES ? q4k_tile_row_kernel : q6k_tile_row_kernel)
            <<<(unsigned)((w->cols + 127) / 128), 128, 0, s>>>(data, row, drow, w->rows, w->cols,
                                                              scale, y);
        return report_launch("gem_dmv_row");
    }
    if (w->layout == GEM_DLAYOUT_BF16_TILES) {
        bf16_tile_row_kernel<<<(unsigned)((w->cols + 127) / 128), 128, 0, s>>>(
            data, row, drow, w->rows, w->cols, scale, y);
        return report_launch("gem_dmv_row");
    }
    if (w->layout == GEM_DLAYOUT_Q8_0_TILES) {
        const int64_t nb = w->cols / 32;
        q8_0_tile_row_kernel<<<(unsigned)((nb + 127) / 128), 128, 0, s>>>(data, row, drow,
                                                                          w->rows, nb, scale, y);
        return report_launch("gem_dmv_row");
    }
    int64_t be = 0;
    (void)gem_gguf_type_block((uint32_t)w->type, &be, NULL);
    const int64_t nblocks = w->cols / be;
    const unsigned grid = (unsigned)((nblocks + 127) / 128);
    const size_t rb = w->row_bytes;
    const int64_t nr = w->rows;
#define ROW_CASE(T)                                                                               \
    case T:                                                                                       \
        row_kernel<T><<<grid, 128, 0, s>>>(data, rb, row, drow, nr, nblocks, be, scale, y);       \
        break
    switch (w->type) {
        ROW_CASE(GEM_GGUF_F32);
        ROW_CASE(GEM_GGUF_F16);
        ROW_CASE(GEM_GGUF_BF16);
        ROW_CASE(GEM_GGUF_Q8_0);
        ROW_CASE(GEM_GGUF_Q4_0);
        ROW_CASE(GEM_GGUF_Q4_K);
        ROW_CASE(GEM_GGUF_Q6_K);
#undef ROW_CASE
    }
    return report_launch("gem_dmv_row");
}

gem_status gem_dmv_row(const gem_dmatrix *w, int64_t row, float scale, float *y, void *stream)
{
    return dmv_row(w, row, NULL, scale, y, stream);
}

gem_status gem_dmv_row_at(const gem_dmatrix *w, const int32_t *drow, float scale, float *y,
                          void *stream)
{
    if (!drow)
        return GEM_ERR_NULL;
    return dmv_row(w, 0, drow, scale, y, stream);
}

gem_status gem_dmatrix_fill_random(const gem_dmatrix *w, uint64_t seed, float amp, void *stream)
{
    gem_status st;
    if ((st = check_matrix(w)) != GEM_OK)
        return st;
    if (!(amp > 0.0f) || !isfinite(amp))
        return GEM_ERR_PARAM;
    if (tiled(w))
        return GEM_ERR_UNSUPPORTED; /* fill file-order rows, then gem_dmatrix_tile */
    int dev;
    DevInfo di;
    if ((st = current_device(&dev, &di)) != GEM_OK)
        return st;
    int64_t be = 0;
    (void)gem_gguf_type_block((uint32_t)w->type, &be, NULL);
    const int64_t nblocks = w->cols / be * w->rows; /* <= rows * row_bytes: fits */
    const int64_t grid64 = (nblocks + 255) / 256;
    if (grid64 > INT32_MAX)
        return GEM_ERR_UNSUPPORTED;
    const unsigned grid = (unsigned)grid64;
    unsigned char *d = static_cast<unsigned char *>(w->data);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    switch (w->type) {
    case GEM_GGUF_F32: fill_kernel<GEM_GGUF_F32><<<grid, 256, 0, s>>>(d, nblocks, seed, amp); break;
    case GEM_GGUF_F16: fill_kernel<GEM_GGUF_F16><<<grid, 256, 0, s>>>(d, nblocks, seed, amp); break;
    case GEM_GGUF_BF16: fill_kernel<GEM_GGUF_BF16><<<grid, 256, 0, s>>>(d, nblocks, seed, amp); break;
    case GEM_GGUF_Q8_0: fill_kernel<GEM_GGUF_Q8_0><<<grid, 256, 0, s>>>(d, nblocks, seed, amp); break;
    case GEM_GGUF_Q4_0: fill_kernel<GEM_GGUF_Q4_0><<<grid, 256, 0, s>>>(d, nblocks, seed, amp); break;
    case GEM_GGUF_Q4_K: fill_kernel<GEM_GGUF_Q4_K><<<grid, 256, 0, s>>>(d, nblocks, seed, amp); break;
    case GEM_GGUF_Q6_K: fill_kernel<GEM_GGUF_Q6_K><<<grid, 256, 0, s>>>(d, nblocks, seed, amp); break;
    }
    return report_launch("gem_dmatrix_fill_random");
}

} /* extern "C" */
