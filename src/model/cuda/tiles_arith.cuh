/*
 * Internal to src/model/cuda, and read by the dev/cuda experiments on it: the arithmetic of
 * the tile products (matvec_tiles.cu's module comment has the layouts, the scratch and the
 * error bounds): one 32-element block of x to its scratch, the MMAs, one chunk of a Q4_0, a
 * Q4_K, a Q6_K or a Q8_0 tile, and the decoder's GeGLU activation. One copy, so that an
 * experiment computes the library's bits.
 */
#ifndef GEM_MODEL_CUDA_TILES_ARITH_CUH
#define GEM_MODEL_CUDA_TILES_ARITH_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define GEM_TILES_XQ_LANE_BYTES 32                               /* a lane's scratch a chunk */
#define GEM_TILES_XQ_CHUNK_BYTES (32 * GEM_TILES_XQ_LANE_BYTES) /* the scratch of 128 columns */
/* The scratch of x for cols columns (c = ceil(cols / 128) chunks): the digits, c
 * GEM_TILES_XQ_CHUNK_BYTES (gem_tiles_xq_block), then x's three BF16 pieces (the BF16 tiles'
 * operand, gem_tiles_xq_pieces): piece p of element i at 2 (p 128 c + i) after the digits. */
#define GEM_TILES_XQ_PIECES_CHUNK_BYTES (3 * 128 * 2) /* the pieces of 128 columns */

/* The row an embedding row kernel reads (matvec.cu, matvec_tiles.cu): `row`, or with drow
 * (device) *drow, which must lie in [0, rows): -1 otherwise, and the kernel then writes NaN to
 * its elements, so that the token that reads them fails on its finiteness flag instead of
 * reading outside the matrix. */
static __device__ __forceinline__ int64_t gem_row_at(int64_t row, const int32_t *drow,
                                                     int64_t rows)
{
    if (!drow)
        return row;
    const int64_t r = *drow;
    return r >= 0 && r < rows ? r : -1;
}

/* Block b of x into the scratch xq: v is element 32b + lane of x. One warp, all 32 lanes
 * together (shuffles). */
static __device__ __forceinline__ void gem_tiles_xq_block(float v, int64_t b,
                                                          unsigned char *__restrict__ xq,
                                                          int lane)
{
    const unsigned kFull = 0xffffffffu;
    float m = fabsf(v);
    const int bad = __any_sync(kFull, !isfinite(v));
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(kFull, m, o));
    int E = 0;
    if (!bad && m > 0.0f) {
        int e;
        (void)frexpf(m, &e); /* m = f 2^e, f in [0.5, 1): m / 2^(e - 6) in [32, 64) */
        E = e - 6;
    }
    float r = bad ? 0.0f : ldexpf(v, -E); /* exact: a power of two */
    int dg[4], sum[4];
    for (int j = 0; j < 4; j++) {
        const float q = rintf(r); /* |r| <= 64 */
        dg[j] = (int)q;
        r = (r - q) * 128.0f; /* r - q is exact (|r - q| <= 1/2) */
    }
    for (int j = 0; j < 4; j++) {
        int s = dg[j];
        for (int o = 16; o > 0; o >>= 1)
            s += __shfl_xor_sync(kFull, s, o);
        sum[j] = s;
    }
    const int64_t c = b / 4;
    const int bi = (int)(b % 4), h = bi & 1, half = bi >> 1;
    unsigned char *base = xq + (size_t)c * GEM_TILES_XQ_CHUNK_BYTES;
    const int t = (lane % 16) / 4;
    for (int j = 0; j < 4; j++) {
        const int slot = 4 * (4 * h + j) + t;
        base[GEM_TILES_XQ_LANE_BYTES * slot + 8 * half + 4 * (lane >> 4) + (lane & 3)] =
            (unsigned char)(signed char)dg[j];
    }
    if (lane < 16) {
        const int j = lane & 3, tt = lane >> 2, slot = 4 * (4 * h + j) + tt;
        unsigned char *p = base + GEM_TILES_XQ_LANE_BYTES * slot;
        const int corr = -8 * sum[j];
        const float xs = bad ? __int_as_float(0x7fc00000) : ldexpf(1.0f, E - 7 * j);
        memcpy(p + 16 + 4 * half, &corr, 4);
        memcpy(p + 24 + 4 * half, &xs, 4);
    }
}

/* x = h + m + l, each a BF16 (round to nearest even), exactly for every finite x whose pieces
 * neither underflow nor overflow (x = 0 or 2^-110 <= |x| < 2^128 - 2^119: above that h rounds
 * to infinity, so the products are not finite, though x is): each remainder is exact in F32,
 * and three 8-bit significands cover x's 24. A value that is not finite makes every piece not
 * finite. Element i of x (cols columns, digits as gem_tiles_xq_block's) into the pieces after
 * the digits. */
static __device__ __forceinline__ void gem_tiles_xq_pieces(float v, int64_t i, int64_t cols,
                                                           unsigned char *__restrict__ xq)
{
    const int64_t c = (cols + 127) / 128;
    __nv_bfloat16 *pc =
        reinterpret_cast<__nv_bfloat16 *>(xq + (size_t)c * GEM_TILES_XQ_CHUNK_BYTES);
    const __nv_bfloat16 h = __float2bfloat16_rn(v);
    const float r = v - __bfloat162float(h);
    const __nv_bfloat16 m = __float2bfloat16_rn(r);
    const __nv_bfloat16 l = __float2bfloat16_rn(r - __bfloat162float(m));
    pc[i] = h;
    pc[(size_t)128 * c + (size_t)i] = m;
    pc[(size_t)256 * c + (size_t)i] = l;
}

/* D += A B: m16n8k32, A s8 (row), B u8 (col), s32 accumulate. */
static __device__ __forceinline__ void gem_tiles_mma(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* A chunk's four exact block sums into acc: acc[k] += (d 2^(E - 7j)) S_k, the coefficient and
 * the product exact (an fma), for the lane's rows 2t, 2t + 1 (dd: their f16 d in blocks h and
 * 2 + h) and digits j (cx: the blocks' scales 2^(E - 7j)). The Q4_0 and Q8_0 chunks' end. */
static __device__ __forceinline__ void gem_tiles_add_terms(const uint2 dd, const uint4 cx,
                                                           const int (&s)[4], float (&acc)[4])
{
    __half2 ha, hb;
    memcpy(&ha, &dd.x, 4);
    memcpy(&hb, &dd.y, 4);
    const float2 da = __half22float2(ha), db = __half22float2(hb);
    const float xs0 = __uint_as_float(cx.z), xs1 = __uint_as_float(cx.w);
    acc[0] = fmaf(da.x * xs0, (float)s[0], acc[0]);
    acc[1] = fmaf(da.y * xs0, (float)s[1], acc[1]);
    acc[2] = fmaf(db.x * xs1, (float)s[2], acc[2]);
    acc[3] = fmaf(db.y * xs1, (float)s[3], acc[3]);
}

/* One chunk of one tile into acc (matvec_tiles.cu's module comment). wq, dd: the lane's weight words and
 * scales; dg, cx: its scratch (digits; corrections and scales); m0 (m1 = ~m0): all ones
 * in the lanes whose digit rows are blocks 4c and 4c+2. */
static __device__ __forceinline__ void gem_tiles_chunk(const uint4 wq, const uint2 dd, const uint4 dg,
                                      const uint4 cx, uint32_t m0, float (&acc)[4])
{
    const uint32_t m1 = ~m0;
    const uint32_t lo = 0x0F0F0F0Fu;
    int s[4] = {(int)cx.x, (int)cx.x, (int)cx.y, (int)cx.y};
    gem_tiles_mma(s, m0 & dg.x, 0u, m0 & dg.y, 0u, wq.x & lo, (wq.x >> 4) & lo);
    gem_tiles_mma(s, m1 & dg.x, 0u, m1 & dg.y, 0u, wq.y & lo, (wq.y >> 4) & lo);
    gem_tiles_mma(s, 0u, m0 & dg.z, 0u, m0 & dg.w, wq.z & lo, (wq.z >> 4) & lo);
    gem_tiles_mma(s, 0u, m1 & dg.z, 0u, m1 & dg.w, wq.w & lo, (wq.w >> 4) & lo);
    gem_tiles_add_terms(dd, cx, s, acc);
}

/* ---- Q4_K in tiles (matvec_tiles.cu's module comment, "Q4_K") ---------------------------- */

#define GEM_TILES_Q4K_SB_BYTES 1152 /* a tile's super-block: 8 rows x 144 bytes */

/* The offset inside a tile's super-block of byte i (0..127) of row g's 128 nibble bytes (the
 * file's bytes 16 + i of the row's super-block): half i / 64 of the super-block, lane (g, t)'s
 * 16 bytes at 16 (4 g + t) of that half, word w = (i % 64) / 16, byte i % 4 of it. */
static __device__ __host__ __forceinline__ int gem_tiles_q4k_qs_off(int g, int i)
{
    const int half = i >> 6, w = (i & 63) >> 4, t = (i & 15) >> 2, k = i & 3;
    return 512 * half + 16 * (4 * g + t) + 4 * w + k;
}

/* One chunk (half `half` of a super-block) of a Q4_K tile into acc. wq: the lane's nibble
 * words of the half; h0 / h1: the 16 header bytes (d | dmin << 16, the twelve scale bytes) of
 * rows 2t and 2t + 1; sh = 8 h (h = g / 4); dg, cx: the lane's scratch of the chunk; m0 as
 * gem_tiles_chunk's. acc[2k + r] gets row 2t + r of sub-block 4 half + 2k + h:
 * fma(d1 2^(E - 7j), S_j) then fma(-m1 2^(E - 7j), Xd_j), every product exact. */
template <int half>
static __device__ __forceinline__ void gem_tiles_q4k_chunk(const uint4 wq, const uint4 h0,
                                                           const uint4 h1, uint32_t sh,
                                                           const uint4 dg, const uint4 cx,
                                                           uint32_t m0, float (&acc)[4])
{
    const uint32_t m1 = ~m0, lo = 0x0F0F0F0Fu;
    int s[4] = {0, 0, 0, 0};
    gem_tiles_mma(s, m0 & dg.x, 0u, m0 & dg.y, 0u, wq.x & lo, wq.y & lo);
    gem_tiles_mma(s, m1 & dg.x, 0u, m1 & dg.y, 0u, (wq.x >> 4) & lo, (wq.y >> 4) & lo);
    gem_tiles_mma(s, 0u, m0 & dg.z, 0u, m0 & dg.w, wq.z & lo, wq.w & lo);
    gem_tiles_mma(s, 0u, m1 & dg.z, 0u, m1 & dg.w, (wq.z >> 4) & lo, (wq.w >> 4) & lo);
    const float xs0 = __uint_as_float(cx.z), xs1 = __uint_as_float(cx.w);
    const float xd0 = (float)(-(int)cx.x / 8), xd1 = (float)(-(int)cx.y / 8); /* sum a_j */
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const uint4 hd = r ? h1 : h0;
        __half2 dm;
        memcpy(&dm, &hd.x, 4);
        const float2 dmf = __half22float2(dm); /* d, dmin */
        /* the scales and mins of sub-blocks 4 half + h (low 16 bits) and 4 half + 2 + h
         * (high 16 bits): bytes h and 2 + h of the scale words */
        const uint32_t w0 = hd.y >> sh, w1 = hd.z >> sh;
        uint32_t sc, mn;
        if (half == 0) {
            sc = w0 & 0x003F003Fu;
            mn = w1 & 0x003F003Fu;
        } else {
            const uint32_t w2 = hd.w >> sh;
            sc = (w2 & 0x000F000Fu) | ((w0 >> 2) & 0x00300030u);
            mn = ((w2 >> 4) & 0x000F000Fu) | ((w1 >> 2) & 0x00300030u);
        }
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const float scf = (float)(k ? sc >> 16 : sc & 0xFFFFu);
            const float mnf = (float)(k ? mn >> 16 : mn & 0xFFFFu);
            const float xs = k ? xs1 : xs0, xd = k ? xd1 : xd0;
            float &a = acc[2 * k + r];
            a = fmaf((dmf.x * scf) * xs, (float)s[2 * k + r], a);
            a = fmaf(-((dmf.y * mnf) * xs), xd, a);
        }
    }
}

/* ---- Q6_K in tiles (matvec_tiles.cu's module comment, "Q6_K") ---------------------------- */

#define GEM_TILES_Q6K_SB_BYTES 1680 /* a tile's super-block: 8 rows x 210 bytes */

/* The offsets inside a tile's super-block of row g's bytes (the file's super-block: ql at 0,
 * qh at 128, the sixteen scales at 192, d at 208). ql byte i (0..127): gem_tiles_q4k_qs_off.
 * qh byte j (0..63): half j / 32, lane (g, t)'s 8 bytes at 1024 + 256 half + 8 (4 g + t): the
 * half's bytes 4t..4t+3, then 16+4t..16+4t+3. Scale s (0..15, sub-block s of 16 elements):
 * the 16 bytes of lanes (h, t) at 1536 + 16 (4 h + t) hold rows 2t and 2t + 1's scales of
 * blocks h and 2 + h of both halves: byte 8 half + 4 r + 2 b + u of row 2t + r is scale
 * 8 half + 2 (h + 2 b) + u. d of row g: 1664 + 2 g. */
static __device__ __host__ __forceinline__ int gem_tiles_q6k_qh_off(int g, int j)
{
    const int half = j >> 5, l = j & 31, hi = l >> 4, t = (l & 15) >> 2, k = l & 3;
    return 1024 + 256 * half + 8 * (4 * g + t) + 4 * hi + k;
}
static __device__ __host__ __forceinline__ int gem_tiles_q6k_sc_off(int g, int s)
{
    const int half = s >> 3, i = (s & 7) >> 1, u = s & 1, h = i & 1, b = i >> 1;
    return 1536 + 16 * (4 * h + (g >> 1)) + 8 * half + 4 * (g & 1) + 2 * b + u;
}
static __device__ __host__ __forceinline__ int gem_tiles_q6k_d_off(int g) { return 1664 + 2 * g; }

/* D += A B: m16n8k32, A s8 (row), B s8 (col), s32 accumulate. */
static __device__ __forceinline__ void gem_tiles_mma_ss(int (&d)[4], uint32_t a0, uint32_t a1,
                                                        uint32_t a2, uint32_t a3, uint32_t b0,
                                                        uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* One chunk (half `half` of a super-block) of a Q6_K tile into acc. wq: the lane's ql words of
 * the half; hq: its qh words (elements 4t..4t+3 of the half's four blocks, then 16+4t..);
 * sc: its scale bytes (both halves); dd: d of rows 2t, 2t + 1; dg, cx: the lane's scratch of
 * the chunk; m0 as gem_tiles_chunk's. acc[2k + r] gets row 2t + r of block 4 half + 2k + h
 * (blocks of 32), both of its 16-element sub-blocks: fma(d sc_u 2^(E - 7j), S_ju) for u = 0, 1,
 * S_ju = sum (q - 32) a_j over sub-block u, exact: the MMAs with the -32s (s8 x s8) start the
 * sums, then two MMAs a sub-block add q a_j (q = the nibble | the two high bits << 4, u8). */
template <int half>
static __device__ __forceinline__ void gem_tiles_q6k_chunk(const uint4 wq, const uint2 hq,
                                                           const uint4 sc, uint32_t dd,
                                                           const uint4 dg, const uint4 cx,
                                                           uint32_t m0, float (&acc)[4])
{
    const uint32_t m1 = ~m0, lo = 0x0F0F0F0Fu, hm = 0x30303030u, k32 = 0xE0E0E0E0u;
    /* B fragments: block i, elements 4t..4t+3 (f0) and 16+4t..16+4t+3 (f1) */
    const uint32_t f0_0 = (wq.x & lo) | ((hq.x << 4) & hm), f1_0 = (wq.y & lo) | ((hq.y << 4) & hm);
    const uint32_t f0_1 = (wq.z & lo) | ((hq.x << 2) & hm), f1_1 = (wq.w & lo) | ((hq.y << 2) & hm);
    const uint32_t f0_2 = ((wq.x >> 4) & lo) | (hq.x & hm), f1_2 = ((wq.y >> 4) & lo) | (hq.y & hm);
    const uint32_t f0_3 = ((wq.z >> 4) & lo) | ((hq.x >> 2) & hm);
    const uint32_t f1_3 = ((wq.w >> 4) & lo) | ((hq.y >> 2) & hm);
    /* D row g: block h's digit g % 4, row g + 8: block 2 + h's; columns: the tile's rows */
    int s0[4] = {0, 0, 0, 0}, s1[4] = {0, 0, 0, 0};
    gem_tiles_mma_ss(s0, dg.x, dg.z, dg.y, dg.w, k32, 0u); /* -32 sum a_j, elements 0..15 */
    gem_tiles_mma_ss(s1, dg.x, dg.z, dg.y, dg.w, 0u, k32); /* elements 16..31 */
    /* sub-block 0 of blocks 0 and 2 in one MMA (k 0..15: block 0, k 16..31: block 2), then of
     * blocks 1 and 3; likewise sub-block 1 */
    gem_tiles_mma(s0, m0 & dg.x, 0u, 0u, m0 & dg.z, f0_0, f0_2);
    gem_tiles_mma(s0, m1 & dg.x, 0u, 0u, m1 & dg.z, f0_1, f0_3);
    gem_tiles_mma(s1, m0 & dg.y, 0u, 0u, m0 & dg.w, f1_0, f1_2);
    gem_tiles_mma(s1, m1 & dg.y, 0u, 0u, m1 & dg.w, f1_1, f1_3);
    __half2 dh;
    memcpy(&dh, &dd, 4);
    const float2 d = __half22float2(dh);
    const float xs0 = __uint_as_float(cx.z), xs1 = __uint_as_float(cx.w);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const uint32_t w = half ? (r ? sc.w : sc.z) : (r ? sc.y : sc.x);
        const float dr = r ? d.y : d.x;
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const float dx = dr * (k ? xs1 : xs0); /* exact: xs is a power of two */
            const float c0 = dx * (float)(signed char)(w >> (16 * k));
            const float c1 = dx * (float)(signed char)(w >> (16 * k + 8));
            float &a = acc[2 * k + r];
            a = fmaf(c0, (float)s0[2 * k + r], a);
            a = fmaf(c1, (float)s1[2 * k + r], a);
        }
    }
}

/* ---- Q8_0 in tiles (matvec_tiles.cu's module comment, "Q8_0") ---------------------------- */

#define GEM_TILES_Q8_0_CHUNK_BYTES 1088 /* a tile's 128 columns: 8 rows x 4 blocks x 34 bytes */

/* The offsets inside a Q8_0 tile's chunk of row g's bytes. Element e (0..31) of block i (0..3):
 * lane (g, t)'s 16 bytes at 512 (i / 2) + 16 (4 g + t) hold blocks 2 (i / 2) and 2 (i / 2) + 1,
 * each as its elements 4t..4t+3 then 16+4t..16+4t+3 (B's two fragment words as they are). d of
 * block i: at 1024, in the Q4_0 chunk's order of scales (lane (g, t) reads 8 bytes at
 * 1024 + 8 (4 h + t), h = g / 4: rows 2t and 2t + 1 in block h, then in block 2 + h). */
static __device__ __host__ __forceinline__ int gem_tiles_q8_0_qs_off(int g, int i, int e)
{
    const int t = (e & 15) >> 2;
    return 512 * (i >> 1) + 16 * (4 * g + t) + 8 * (i & 1) + 4 * (e >> 4) + (e & 3);
}
static __device__ __host__ __forceinline__ int gem_tiles_q8_0_d_off(int g, int i)
{
    return 1024 + 8 * (4 * (i & 1) + (g >> 1)) + 2 * (2 * (i >> 1) + (g & 1));
}

/* One chunk of a Q8_0 tile into acc: gem_tiles_chunk's MMAs on the weights as they are (s8 x s8,
 * C = 0, so S_j = sum q a_j exactly: |S_j| <= 32 * 128 * 64 = 2^18) and its scaling. w01, w23:
 * the lane's words of blocks 0 and 1, 2 and 3; dd, dg, cx, m0 as gem_tiles_chunk's. */
static __device__ __forceinline__ void gem_tiles_q8_0_chunk(const uint4 w01, const uint4 w23,
                                                            const uint2 dd, const uint4 dg,
                                                            const uint4 cx, uint32_t m0,
                                                            float (&acc)[4])
{
    const uint32_t m1 = ~m0;
    int s[4] = {0, 0, 0, 0};
    gem_tiles_mma_ss(s, m0 & dg.x, 0u, m0 & dg.y, 0u, w01.x, w01.y);
    gem_tiles_mma_ss(s, m1 & dg.x, 0u, m1 & dg.y, 0u, w01.z, w01.w);
    gem_tiles_mma_ss(s, 0u, m0 & dg.z, 0u, m0 & dg.w, w23.x, w23.y);
    gem_tiles_mma_ss(s, 0u, m1 & dg.z, 0u, m1 & dg.w, w23.z, w23.w);
    gem_tiles_add_terms(dd, cx, s, acc);
}

/* ---- BF16 in tiles (matvec_tiles.cu's module comment, "BF16") ----------------------------- */

#define GEM_TILES_BF16_CHUNK_BYTES 2048 /* a tile's 128 columns: 8 rows x 128 x 2 bytes */

/* The offset inside a BF16 tile's chunk of row g's column j (0..127): quarter s = j / 32 at
 * 512 s, lane (g, t)'s 16 bytes at 16 (4 g + t) holding the quarter's columns 8t..8t+7. */
static __device__ __host__ __forceinline__ int gem_tiles_bf16_off(int g, int j)
{
    return 512 * (j >> 5) + 16 * (4 * g + ((j & 31) >> 3)) + 2 * (j & 7);
}

/* D += A B: m16n8k16, A bf16 (row), B bf16 (col), F32 accumulate. */
static __device__ __forceinline__ void gem_tiles_mma_bf16(float (&d)[4], uint32_t a0, uint32_t a2,
                                                          uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

/* One chunk of a BF16 tile into acc[0..1] (rows 2t, 2t + 1; lane (g, t), g < 3, the sums with
 * x's piece g). w: the lane's four quarters' words; xp: its piece g of the same columns (zeros
 * in the lanes g >= 3). A quarter is two MMAs whose k runs over the lane's words in order (the
 * same order for the weights and the pieces): B is the weights as they are, A's rows 0..2 the
 * three pieces (the others zero). Every product of two BF16 values is exact in F32; the tensor
 * core adds a chunk's eight MMAs in its own rounding, then the chunk's sum is added to acc
 * (F32, to nearest). */
static __device__ __forceinline__ void gem_tiles_bf16_chunk(const uint4 (&w)[4],
                                                            const uint4 (&xp)[4], float (&acc)[4])
{
    float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int s = 0; s < 4; s++) {
        gem_tiles_mma_bf16(d, xp[s].x, xp[s].y, w[s].x, w[s].y);
        gem_tiles_mma_bf16(d, xp[s].z, xp[s].w, w[s].z, w[s].w);
    }
    acc[0] += d[0];
    acc[1] += d[1];
}

static __device__ __forceinline__ float gem_gelu_tanh(float a)
{
    /* gemma4.c's gelu_tanh operation for operation: 0.5f * a * (1 + tanhf(k (a + c a a a))) */
    const float k = 0.7978845608028654f;
    const float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, a), a), a);
    const float t = tanhf(__fmul_rn(k, __fadd_rn(a, cube)));
    return __fmul_rn(__fmul_rn(0.5f, a), __fadd_rn(1.0f, t));
}

#endif /* GEM_MODEL_CUDA_TILES_ARITH_CUH */
