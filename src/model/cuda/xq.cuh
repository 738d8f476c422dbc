/*
 * Internal to src/model/cuda: the x scratch of the Q4_0 tile product (matvec_tiles.cu's
 * module comment): one 32-element block of x to its four digits per element, their sums
 * times -8 and the block's scales, written where each lane of the product reads them.
 * Used by the product's own scratch kernel and by the decoder's norm kernels, which write
 * the scratch of the vector they produce (the same bytes).
 */
#ifndef GEM_MODEL_CUDA_XQ_CUH
#define GEM_MODEL_CUDA_XQ_CUH

#include <math.h>
#include <stdint.h>
#include <string.h>

#define GEM_XQ_LANE_BYTES 32
#define GEM_XQ_CHUNK_BYTES (32 * GEM_XQ_LANE_BYTES) /* the scratch of 128 columns */

/* Block b of x (elements 32b .. 32b + 31) into the scratch xq: one warp, every lane (lane =
 * the element), the whole warp together (shuffles). x is not __restrict__: the norm kernels
 * read here what they wrote (no read-only cache path). */
__device__ __forceinline__ void gem_xq_block(const float *x, int64_t b,
                                             unsigned char *__restrict__ xq, int lane)
{
    const unsigned full = 0xffffffffu;
    const float v = x[32 * b + lane];
    float m = fabsf(v);
    const int bad = __any_sync(full, !isfinite(v));
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(full, m, o));
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
            s += __shfl_xor_sync(full, s, o);
        sum[j] = s;
    }
    const int64_t c = b / 4;
    const int bi = (int)(b % 4), h = bi & 1, half = bi >> 1;
    unsigned char *base = xq + (size_t)c * GEM_XQ_CHUNK_BYTES;
    const int t = (lane % 16) / 4;
    for (int j = 0; j < 4; j++) {
        const int slot = 4 * (4 * h + j) + t;
        base[GEM_XQ_LANE_BYTES * slot + 8 * half + 4 * (lane >> 4) + (lane & 3)] =
            (unsigned char)(signed char)dg[j];
    }
    if (lane < 16) {
        const int j = lane & 3, tt = lane >> 2, slot = 4 * (4 * h + j) + tt;
        unsigned char *p = base + GEM_XQ_LANE_BYTES * slot;
        const int corr = -8 * sum[j];
        const float xs = bad ? __int_as_float(0x7fc00000) : ldexpf(1.0f, E - 7 * j);
        memcpy(p + 16 + 4 * half, &corr, 4);
        memcpy(p + 24 + 4 * half, &xs, 4);
    }
}

#endif /* GEM_MODEL_CUDA_XQ_CUH */
