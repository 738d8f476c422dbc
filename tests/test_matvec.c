/*
 * Matrix-vector products of the model: for every element type, each output is
 * bit for bit the dot product of the row's gem_gguf_dequant values with x,
 * accumulated with fused multiply-adds in 64 lanes in element order (element e
 * in lane e % 64) and summed by the fixed tree 32, 16, ..., 1; and the pool gives
 * the same bits for 1, 2 and 3 threads. Row lengths 512 and, for the plain types, 500 (a partial group).
 *
 * Packed Q8_0, Q4_0, Q4_K and Q6_K matrices (the integer products of matvec.h): every row bit for bit the
 * definition below (written here from matvec.h's contract, with ldexpf everywhere and
 * the signed quants, independently of the library's +128 bytes and fast paths), for 1
 * and 3 threads, any row range, x of every magnitude (blocks of zeros, near the smallest
 * normals, subnormals, near the largest floats), within the error bound of the contract
 * against a double sum; a block with NaN or infinity makes every row NaN; a short scratch
 * is refused with nothing written. And at the extremes of the integer sums: every quant byte
 * 0x7F, 0x80 or 0xFF (Q8_0's q of 127 and -128, the 4-bit types' nibble 15, Q6_K's 6-bit 63)
 * with x's digits +-64, where a 16-bit partial sum that saturated or overflowed would show.
 */
#include <math.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "model/matvec.h"
#include "model/matvec_kernels.h"
#include "cpu_pool.h"
#include "tcheck.h"

static float ref_dot(const float *w, const float *x, int64_t n)
{
    float acc[64] = {0};
    for (int64_t e = 0; e < n; e++)
        acc[e % 64] = fmaf(w[e], x[e], acc[e % 64]);
    for (int width = 32; width > 0; width /= 2)
        for (int l = 0; l < width; l++)
            acc[l] += acc[l + width];
    return acc[0];
}

/* x's digits of one block as matvec.h defines them: dig[j][i], the scales 2^(E - 7j) (NaN for
 * a block that is not finite) and sum_x. */
static void ref_digits(const float *v, int8_t dig[4][32], float sc[4], float *sum_x)
{
    float m = 0.0f;
    int bad = 0;
    for (int i = 0; i < 32; i++) {
        bad |= !isfinite(v[i]);
        m = fmaxf(m, fabsf(v[i]));
    }
    int E = 0;
    if (!bad && m > 0.0f) {
        int e;
        (void)frexpf(m, &e);
        E = e - 6;
    }
    float r[32];
    for (int i = 0; i < 32; i++)
        r[i] = bad ? 0.0f : ldexpf(v[i], -E);
    int64_t A = 0;
    for (int j = 0; j < 4; j++) {
        int64_t Aj = 0;
        for (int i = 0; i < 32; i++) {
            const float a = rintf(r[i]);
            dig[j][i] = (int8_t)a;
            Aj += (int64_t)a;
            r[i] = (r[i] - a) * 128.0f;
        }
        A = A * 128 + Aj;
        sc[j] = bad ? NAN : ldexpf(1.0f, E - 7 * j);
    }
    *sum_x = bad ? NAN : ldexpf((float)A, E - 21);
}

/* Q4_K's scale and min of sub-block s from the 12 packed bytes (ggml's get_scale_min_k4). */
static void ref_scale_min(const uint8_t *q, int s, uint8_t *sc, uint8_t *mn)
{
    if (s < 4) {
        *sc = q[s] & 63;
        *mn = q[s + 4] & 63;
    } else {
        *sc = (uint8_t)((q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4));
        *mn = (uint8_t)((q[s + 4] >> 4) | ((q[s] >> 6) << 4));
    }
}

/* The integer products' definition (matvec.h) for one Q8_0, Q4_0, Q4_K or Q6_K row. */
static float ref_int(gem_gguf_type t, const uint8_t *row, const float *x, int64_t cols)
{
    float acc = 0.0f;
    for (int64_t b = 0; b < cols / 32; b++) {
        int8_t dig[4][32];
        float sc[4], sum_x;
        ref_digits(x + 32 * b, dig, sc, &sum_x);
        if (t == GEM_GGUF_Q6_K) {
            /* block b: half h, quarter k of its super-block; two scales of 16 elements */
            const uint8_t *blk = row + 210 * (size_t)(b / 8);
            const int h = (int)(b % 8) / 4, k = (int)(b % 4);
            const float d = gem_gguf_f16_to_f32((uint16_t)(blk[208] | blk[209] << 8));
            for (int e = 0; e < 2; e++) {
                const float ds = d * (float)(int8_t)blk[192 + 8 * h + 2 * k + e];
                for (int j = 0; j < 4; j++) {
                    int32_t S = 0;
                    for (int l = 16 * e; l < 16 * e + 16; l++) {
                        const uint8_t lo = blk[64 * h + l + 32 * (k & 1)];
                        const uint8_t hi = blk[128 + 32 * h + l];
                        const int32_t q =
                            ((k < 2 ? lo & 0x0F : lo >> 4) | (((hi >> (2 * k)) & 3) << 4)) - 32;
                        S += q * (int32_t)dig[j][l];
                    }
                    acc = fmaf(ds * sc[j], (float)S, acc);
                }
            }
            continue;
        }
        int32_t q[32];
        float d, dm = 0.0f;
        if (t == GEM_GGUF_Q4_K) {
            const uint8_t *blk = row + 144 * (size_t)(b / 8);
            const int s = (int)(b % 8);
            uint8_t scale, mn;
            ref_scale_min(blk + 4, s, &scale, &mn);
            d = gem_gguf_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)) * (float)scale;
            dm = gem_gguf_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8)) * (float)mn;
            const uint8_t *qs = blk + 16 + 32 * (s / 2);
            for (int i = 0; i < 32; i++)
                q[i] = s % 2 ? qs[i] >> 4 : qs[i] & 0x0F;
        } else {
            const size_t bb = t == GEM_GGUF_Q8_0 ? 34 : 18;
            const uint8_t *blk = row + bb * (size_t)b;
            d = gem_gguf_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
            for (int i = 0; i < 32; i++)
                q[i] = t == GEM_GGUF_Q8_0 ? (int32_t)(int8_t)blk[2 + i]
                       : i < 16           ? (int32_t)(blk[2 + i] & 0x0F) - 8
                                          : (int32_t)(blk[2 + i - 16] >> 4) - 8;
        }
        for (int j = 0; j < 4; j++) {
            int32_t S = 0;
            for (int i = 0; i < 32; i++)
                S += q[i] * (int32_t)dig[j][i];
            acc = fmaf(d * sc[j], (float)S, acc);
        }
        if (t == GEM_GGUF_Q4_K)
            acc = fmaf(-dm, sum_x, acc);
    }
    return acc;
}

/* The packed checks on a rows x cols matrix of type t (Q8_0, Q4_0, Q4_K or Q6_K; rows a
 * multiple of 16) packed with span `span` (mv_pack): every span must give the definition's
 * bits. */
static void check_packed(cpu_pool *p1, cpu_pool *p3, gem_gguf_type t, int64_t rows, int64_t cols,
                         int64_t span)
{
    size_t rb = 0;
    TCHECK_STATUS(gem_gguf_row_bytes(t, cols, &rb), GEM_OK);
    float *src = malloc((size_t)(rows * cols) * 4), *x = malloc((size_t)cols * 4);
    float *y = malloc((size_t)rows * 4), *y3 = malloc((size_t)rows * 4);
    float *part = malloc((size_t)rows * 4), *row = malloc((size_t)cols * 4);
    uint8_t *q = malloc((size_t)rows * rb);
    /* aligned_alloc takes whole multiples of the alignment */
    void *pk = aligned_alloc(64, ((size_t)rows * rb + 63) / 64 * 64);
    mv_scratch xq = {aligned_alloc(64, (2 * mv_xq_bytes(cols) + 63) / 64 * 64),
                     2 * mv_xq_bytes(cols)};
    for (int64_t i = 0; i < rows * cols; i++)
        src[i] = sinf((float)i * 0.917f) * (float)(1 + i % 7);
    /* the columns where x is near the largest float (below) have zero weights, so the sums
     * stay finite */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 5; c < cols; c += 32)
            if ((c / 32) % 8 == 3)
                src[r * cols + c] = 0.0f;
    for (int64_t r = 0; r < rows; r++)
        gem_gguf_quantize(t, src + r * cols, q + (size_t)r * rb, cols);
    gem_matrix w = {q, t, rows, cols, rb, NULL, span};
    TCHECK(mv_packable(&w));
    mv_pack(&w, pk);
    w.packed = pk;
    /* x: block b of magnitude class b % 8 in pass 0 (element 5 of a block its largest
     * magnitude, negative; in class 3, 3e38 there and the rest of order 1) */
    static const float mag[8] = {1.0f, 0.0f, 1e-3f, 1.0f, 2e-38f, 1e-41f, 1e20f, 0.37f};
    for (int pass = 0; pass < 3; pass++) {
        for (int64_t i = 0; i < cols; i++) {
            const float u = cosf((float)i * 1.37f + (float)pass);
            const int cls = (int)((i / 32) % 8);
            const float c = pass == 0 ? mag[cls] : 1.0f;
            /* Q4_K sums d1 n x and dm1 x apart, so its terms would overflow near 3e38 where
             * the weight d1 n - dm1 is small: 1e30 there */
            const float big = t == GEM_GGUF_Q4_K ? -1e30f : -3e38f;
            x[i] = i % 32 == 5 && pass == 0 ? (cls == 3 ? big : -c) : u * c;
        }
        if (pass == 2)
            x[cols / 2 + 3] = (cols & 64) ? NAN : INFINITY; /* one block not finite */
        TCHECK_STATUS(mv(p1, &w, x, &xq, y), GEM_OK);
        TCHECK_STATUS(mv(p3, &w, x, &xq, y3), GEM_OK);
        TCHECK(memcmp(y, y3, (size_t)rows * 4) == 0);
        int bad_bits = 0, nan_rows = 0, bound = 0;
        for (int64_t r = 0; r < rows; r++) {
            const float want = ref_int(t, q + (size_t)r * rb, x, cols);
            bad_bits += memcmp(&want, &y[r], 4) != 0;
            nan_rows += isnan(y[r]);
            if (pass == 2)
                continue;
            /* the contract's bound: four (Q4_K five, Q6_K eight) F32 roundings a block of sums
             * below sum |w x|, and
             * the digits' 2^-27 of each block's largest |x| times the block's sum |w| (with
             * a subnormal block, its digits lose what underflows: 2^-149 an element) */
            gem_gguf_dequant(t, q + (size_t)r * rb, row, cols);
            double exact = 0.0, mag_sum = 0.0, rep = 0.0;
            for (int64_t b = 0; b < cols / 32; b++) {
                double mx = 0.0, sw = 0.0;
                for (int i = 0; i < 32; i++) {
                    const int64_t e = 32 * b + i;
                    exact += (double)row[e] * (double)x[e];
                    mag_sum += fabs((double)row[e] * (double)x[e]);
                    mx = fmax(mx, fabs((double)x[e]));
                    sw += fabs((double)row[e]);
                }
                if (t == GEM_GGUF_Q4_K) {
                    /* Q4_K's digits meet d1 n and dm1 apart (|w| does not bound them), and
                     * sum_x's rounding meets dm1: per block (15 d1 + dm1) 32 and dm1 sum |x| */
                    const uint8_t *blk = q + (size_t)r * rb + 144 * (size_t)(b / 8);
                    uint8_t scale, mn;
                    ref_scale_min(blk + 4, (int)(b % 8), &scale, &mn);
                    const double d1 = gem_gguf_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)) * scale;
                    const double dm1 = gem_gguf_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8)) * mn;
                    double sx = 0.0;
                    for (int i = 0; i < 32; i++)
                        sx += fabs((double)x[32 * b + i]);
                    sw = (15.0 * d1 + dm1) * 32.0;
                    rep += ldexp(dm1 * sx, -23) + 5.0 * ldexp((15.0 * d1 + dm1) * sx, -24);
                }
                rep += (ldexp(mx, -27) + ldexp(1.0, -149)) * sw;
            }
            const double tol = (double)(8 * (cols / 32) + 4) * ldexp(1.0, -24) * mag_sum + rep;
            if (!(fabs((double)y[r] - exact) <= tol) && bound++ == 0)
                fprintf(stderr, "     packed %lldx%lld span %lld pass %d row %lld: %.9g vs %.9g, "
                                "tol %.3g\n",
                        (long long)rows, (long long)cols, (long long)span, pass, (long long)r,
                        (double)y[r], exact, tol);
        }
        if (!TCHECK(bad_bits == 0))
            fprintf(stderr, "     packed %s %lldx%lld span %lld pass %d: %d rows differ from the "
                            "definition\n",
                    gem_gguf_type_name(t), (long long)rows, (long long)cols, (long long)span, pass,
                    bad_bits);
        TCHECK(bound == 0);
        TCHECK(nan_rows == (pass == 2 ? rows : 0));
        /* any row range gives the same bits, and writes nothing outside it */
        const int64_t ranges[][2] = {{5, 37}, {16, 32}, {0, 1}, {rows - 3, rows}, {40, 150}};
        for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
            const int64_t r0 = ranges[k][0], r1 = ranges[k][1] < rows ? ranges[k][1] : rows;
            memset(part, 0x5A, (size_t)rows * 4);
            TCHECK_STATUS(mv_rows(&w, x, &xq, part, r0, r1), GEM_OK);
            int ok = 1;
            for (int64_t r = 0; r < rows; r++) {
                uint32_t u;
                memcpy(&u, &part[r], 4);
                ok &= r >= r0 && r < r1 ? memcmp(&part[r], &y[r], 4) == 0 : u == 0x5A5A5A5Au;
            }
            TCHECK(ok);
        }
    }
    /* a batch of two products of one x needs one x's scratch; of two x, two */
    {
        const gem_matrix *ws[2] = {&w, &w};
        const float *xs[2] = {x, x};
        float *ys[2] = {y, y3};
        mv_scratch one = {xq.buf, mv_xq_bytes(cols)};
        TCHECK_STATUS(mv_batch(p3, 2, ws, xs, &one, ys), GEM_OK);
        TCHECK(memcmp(y, y3, (size_t)rows * 4) == 0);
        xs[1] = src;
        memset(y, 0x5A, (size_t)rows * 4);
        TCHECK_STATUS(mv_batch(p3, 2, ws, xs, &one, ys), GEM_ERR_RANGE);
        uint32_t u;
        memcpy(&u, &y[rows - 1], 4);
        TCHECK(u == 0x5A5A5A5Au);
        TCHECK_STATUS(mv_batch(p3, 2, ws, xs, &xq, ys), GEM_OK);
        mv_scratch short_xq = {xq.buf, mv_xq_bytes(cols) - 1};
        TCHECK_STATUS(mv(p1, &w, x, &short_xq, y), GEM_ERR_RANGE);
        TCHECK_STATUS(mv(p1, &w, x, NULL, y), GEM_ERR_RANGE);
    }
    /* not packable: rows not a multiple of 16, or another type */
    gem_matrix odd = {q, t, rows - 1, cols, rb, NULL, 0};
    TCHECK(!mv_packable(&odd));
    gem_matrix f32 = {src, GEM_GGUF_F32, rows, cols, (size_t)cols * 4, NULL, 0};
    TCHECK(!mv_packable(&f32));
    free(src);
    free(x);
    free(y);
    free(y3);
    free(part);
    free(row);
    free(q);
    free(pk);
    free(xq.buf);
}

/* Packed products where every quant byte is `fill` (scales 1.0, Q4_K's dmin 1.0) against
 * x = +-63.5 (digits a0 = +-64, a1 = -+64: the largest in magnitude), in blocks of one sign
 * or with signs alternating in pairs of elements: the definition's bits. */
static void check_extremes(cpu_pool *p1, gem_gguf_type t, uint8_t fill)
{
    const int64_t rows = 16, cols = 512;
    size_t rb = 0;
    TCHECK_STATUS(gem_gguf_row_bytes(t, cols, &rb), GEM_OK);
    uint8_t *q = malloc((size_t)rows * rb);
    void *pk = aligned_alloc(64, ((size_t)rows * rb + 63) / 64 * 64);
    mv_scratch xq = {aligned_alloc(64, (mv_xq_bytes(cols) + 63) / 64 * 64), mv_xq_bytes(cols)};
    float x[512], y[16];
    memset(q, fill, (size_t)rows * rb);
    /* the f16 scales at 1.0 (0x3C00): where each block keeps them */
    const size_t bb = t == GEM_GGUF_Q8_0   ? 34
                      : t == GEM_GGUF_Q4_0 ? 18
                      : t == GEM_GGUF_Q4_K ? 144
                                           : 210;
    for (size_t at = 0; at < (size_t)rows * rb; at += bb) {
        const size_t d = t == GEM_GGUF_Q6_K ? 208 : 0;
        q[at + d] = 0x00, q[at + d + 1] = 0x3C;
        if (t == GEM_GGUF_Q4_K)
            q[at + 2] = 0x00, q[at + 3] = 0x3C;
    }
    gem_matrix w = {q, t, rows, cols, rb, NULL, 1};
    TCHECK(mv_packable(&w));
    mv_pack(&w, pk);
    w.packed = pk;
    for (int pattern = 0; pattern < 3; pattern++) {
        for (int64_t i = 0; i < cols; i++)
            x[i] = pattern == 0   ? 63.5f
                   : pattern == 1 ? -63.5f
                                  : ((i / 2 + i / 32) % 2 ? 63.5f : -63.5f);
        TCHECK_STATUS(mv(p1, &w, x, &xq, y), GEM_OK);
        int bad = 0;
        for (int64_t r = 0; r < rows; r++) {
            const float want = ref_int(t, q + (size_t)r * rb, x, cols);
            bad += memcmp(&want, &y[r], 4) != 0 || !isfinite(y[r]);
        }
        if (!TCHECK(bad == 0))
            fprintf(stderr, "     extremes %s bytes 0x%02X pattern %d: %d rows differ\n",
                    gem_gguf_type_name(t), fill, pattern, bad);
    }
    free(q);
    free(pk);
    free(xq.buf);
}

/* Bytes one thread's preload of plan a asks for in steps of `step` bytes (to the end). */
static size_t ahead_total(const mv_ahead *a, int64_t thread, size_t step)
{
    size_t done = 0, sum = 0, got;
    while ((got = mv_ahead_step(a, thread, &done, step)) > 0)
        sum += got;
    return sum == done ? sum : (size_t)-1;
}

/* The preload plan of a batch of w twice (mv_ahead): its threads' owned items are the first
 * owned_levels levels of the tapered split, which end at a fraction 1 - 2^-owned_levels of the
 * batch's bytes, so together the threads ask for the bytes of every unit (row, or 16-row group
 * when packed) whose first byte lies below that, each once; steps of any size ask for the same
 * bytes; a budget caps each thread. */
static void check_ahead(const gem_matrix *w)
{
    const gem_matrix *ws[2] = {w, w};
    mv_ahead a;
    TCHECK_STATUS(mv_ahead_plan(&a, 0, ws, 3), GEM_ERR_PARAM);
    TCHECK_STATUS(mv_ahead_plan(&a, 9, ws, 3), GEM_ERR_PARAM);
    TCHECK_STATUS(mv_ahead_plan(&a, 2, ws, 0), GEM_ERR_PARAM);
    TCHECK_STATUS(mv_ahead_plan(&a, 2, ws, 1), GEM_OK); /* one thread: nothing to preload */
    size_t done = 0;
    TCHECK(mv_ahead_step(&a, 0, &done, 4096) == 0 && done == 0);
    const int64_t T = 3;
    TCHECK_STATUS(mv_ahead_plan(&a, 2, ws, T), GEM_OK);
    if (!TCHECK(a.budget > 0 && a.owned_levels >= 1 && a.owned_levels <= a.taper))
        return;
    const size_t mb = (size_t)w->rows * w->row_bytes, B = 2 * mb;
    const size_t den = (size_t)T << (a.taper - 1);
    const size_t s_end = den - ((size_t)T << (a.taper - 1 - a.owned_levels));
    const size_t b_end = s_end * B / den; /* no overflow at these sizes */
    const size_t ub = w->packed ? 16 * w->row_bytes : w->row_bytes;
    size_t want = 0;
    for (int k = 0; k < 2; k++)
        for (size_t u = 0; u * ub < mb; u++)
            if (k * mb + u * ub < b_end)
                want += (u + 1) * ub < mb ? ub : mb - u * ub;
    a.budget = (size_t)-1 / 2;
    size_t sum = 0, own[3];
    int same = 1;
    for (int64_t t = 0; t < T; t++) {
        own[t] = ahead_total(&a, t, 4096);
        same &= ahead_total(&a, t, 1000) == own[t] && ahead_total(&a, t, 64) == own[t];
        sum += own[t];
    }
    TCHECK(same);
    if (!TCHECK(sum == want))
        fprintf(stderr, "     preload of %s%s: %zu bytes asked for, %zu owned\n",
                gem_gguf_type_name(w->type), w->packed ? " packed" : "", sum, want);
    TCHECK(mv_ahead_step(&a, T, &done, 4096) == 0); /* a thread the plan does not have */
    a.budget = 10000;
    int capped = 1;
    for (int64_t t = 0; t < T; t++)
        capped &= ahead_total(&a, t, 4096) == (own[t] < 10000 ? own[t] : 10000);
    TCHECK(capped);
}

/* mv_pair's callback: every row once, after both products wrote it; then a = a / 2 + b there */
typedef struct pair_seen {
    const float *wa, *wb; /* the rows' values from mv_batch */
    float *ya, *yb;
    int *count; /* (rows) calls that covered the row */
    int early;  /* set when a row was handed over before its values were there */
} pair_seen;

static void pair_done(void *ctx, int64_t r0, int64_t r1)
{
    pair_seen *c = ctx;
    for (int64_t r = r0; r < r1; r++) {
        __atomic_fetch_add(&c->count[r], 1, __ATOMIC_RELAXED);
        if (memcmp(&c->ya[r], &c->wa[r], 4) != 0 || memcmp(&c->yb[r], &c->wb[r], 4) != 0)
            __atomic_store_n(&c->early, 1, __ATOMIC_RELAXED);
        c->ya[r] = c->ya[r] * 0.5f + c->yb[r];
    }
}

/* mv_pair of two matrices of type t (rows x cols, packed with span `span` when packable) on 1 and
 * 3 threads: the bits of mv_batch of the two, the callback on every row exactly once and after
 * its values, what is not pairable refused; and its preload plan (mv_ahead_plan_pair): together
 * the threads ask for the bytes of every unit of both matrices whose first byte lies below the
 * owned levels' end of the shared split, each once. */
static void check_pair(cpu_pool *p1, cpu_pool *p3, gem_gguf_type t, int64_t rows, int64_t cols,
                       int64_t span)
{
    size_t rb = 0;
    TCHECK_STATUS(gem_gguf_row_bytes(t, cols, &rb), GEM_OK);
    const size_t mb = (size_t)rows * rb;
    float *src = malloc((size_t)cols * 4), *x = malloc((size_t)cols * 4);
    float *wa = malloc((size_t)rows * 4), *wb = malloc((size_t)rows * 4);
    float *ya = malloc((size_t)rows * 4), *yb = malloc((size_t)rows * 4);
    int *count = malloc((size_t)rows * sizeof(int));
    uint8_t *q[2] = {malloc(mb), malloc(mb)};
    void *pk[2] = {aligned_alloc(64, (mb + 63) / 64 * 64), aligned_alloc(64, (mb + 63) / 64 * 64)};
    mv_scratch xq = {aligned_alloc(64, mv_xq_bytes(cols)), mv_xq_bytes(cols)};
    if (!TCHECK(src && x && wa && wb && ya && yb && count && q[0] && q[1] && pk[0] && pk[1] &&
                xq.buf))
        return;
    for (int64_t i = 0; i < cols; i++)
        x[i] = cosf((float)i * 0.41f);
    gem_matrix w[2];
    for (int m = 0; m < 2; m++) {
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t i = 0; i < cols; i++)
                src[i] = sinf((float)(r * cols + i) * (m ? 0.377f : 0.613f)) * (float)(1 + i % 3);
            gem_gguf_quantize(t, src, q[m] + (size_t)r * rb, cols);
        }
        w[m] = (gem_matrix){q[m], t, rows, cols, rb, NULL, span};
        if (mv_packable(&w[m])) {
            mv_pack(&w[m], pk[m]);
            w[m].packed = pk[m];
        }
    }
    const gem_matrix *ws[2] = {&w[0], &w[1]};
    const float *xs[2] = {x, x};
    float *ys[2] = {wa, wb};
    TCHECK_STATUS(mv_batch(p1, 2, ws, xs, &xq, ys), GEM_OK);
    TCHECK(mv_pairable(&w[0], &w[1]));
    for (int threads = 1; threads <= 3; threads += 2) {
        pair_seen c = {wa, wb, ya, yb, count, 0};
        memset(count, 0, (size_t)rows * sizeof(int));
        memset(ya, 0x5A, (size_t)rows * 4);
        memset(yb, 0x5A, (size_t)rows * 4);
        TCHECK_STATUS(mv_pair(threads == 1 ? p1 : p3, &w[0], &w[1], x, &xq, ya, yb, pair_done, &c),
                      GEM_OK);
        int once = 1, bits = 1;
        for (int64_t r = 0; r < rows; r++) {
            const float want = wa[r] * 0.5f + wb[r];
            once &= count[r] == 1;
            bits &= memcmp(&ya[r], &want, 4) == 0 && memcmp(&yb[r], &wb[r], 4) == 0;
        }
        if (!TCHECK(once && bits && !c.early))
            fprintf(stderr, "     mv_pair %s%s %lldx%lld span %lld, %d threads: once %d, bits %d, "
                            "early %d\n",
                    gem_gguf_type_name(t), w[0].packed ? " packed" : "", (long long)rows,
                    (long long)cols, (long long)span, threads, once, bits, c.early);
    }
    TCHECK_STATUS(mv_pair(p3, &w[0], &w[1], x, &xq, ya, yb, NULL, NULL), GEM_ERR_PARAM);
    gem_matrix other = w[1];
    other.rows = rows - 16;
    TCHECK(!mv_pairable(&w[0], &other));
    TCHECK_STATUS(mv_pair(p3, &w[0], &other, x, &xq, ya, yb, pair_done, NULL), GEM_ERR_PARAM);
    other = w[1];
    other.type = t == GEM_GGUF_Q8_0 ? GEM_GGUF_Q4_0 : GEM_GGUF_Q8_0;
    TCHECK(!mv_pairable(&w[0], &other));
    other = w[1];
    other.packed = other.packed ? NULL : pk[1];
    TCHECK(!mv_pairable(&w[0], &other));
    mv_ahead a;
    TCHECK_STATUS(mv_ahead_plan_pair(&a, &w[0], &other, 3), GEM_ERR_PARAM);
    if (w[0].packed) {
        other = w[1];
        other.packed_span = span == 1 ? 2 : 1;
        TCHECK(!mv_pairable(&w[0], &other) || cols <= MV_CHUNK_COLS);
    }
    TCHECK_STATUS(mv_ahead_plan_pair(&a, &w[0], &w[1], 3), GEM_OK);
    if (2 * mb >= ((size_t)256 << 10) && TCHECK(a.budget > 0 && a.owned_levels >= 1)) {
        const size_t den = (size_t)3 << (a.taper - 1);
        const size_t s_end = den - ((size_t)3 << (a.taper - 1 - a.owned_levels));
        const size_t b_end = s_end * mb / den;
        const int64_t rpu = w[0].packed ? 16 * (span < 1 ? 1 : span) : 1;
        const size_t ub = (size_t)rpu * rb;
        size_t want = 0;
        for (size_t u = 0; u * ub < mb; u++)
            if (u * ub < b_end)
                want += 2 * ((u + 1) * ub < mb ? ub : mb - u * ub);
        a.budget = (size_t)-1 / 2;
        size_t sum = 0;
        for (int64_t th = 0; th < 3; th++)
            sum += ahead_total(&a, th, 4096);
        if (!TCHECK(sum == want))
            fprintf(stderr, "     pair preload of %s: %zu bytes asked for, %zu owned\n",
                    gem_gguf_type_name(t), sum, want);
    }
    free(src);
    free(x);
    free(wa);
    free(wb);
    free(ya);
    free(yb);
    free(count);
    free(q[0]);
    free(q[1]);
    free(pk[0]);
    free(pk[1]);
    free(xq.buf);
}

/* mv_batch_then's callback: every row of every product once, after its value is there */
typedef struct batch_seen {
    const float *want[3]; /* the products' values from mv_batch */
    float *y[3];
    int *count[3];
    int early, bad_k;
} batch_seen;

static void batch_done(void *ctx, int k, int64_t r0, int64_t r1)
{
    batch_seen *c = ctx;
    if (k < 0 || k > 2) {
        __atomic_store_n(&c->bad_k, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        __atomic_fetch_add(&c->count[k][r], 1, __ATOMIC_RELAXED);
        if (memcmp(&c->y[k][r], &c->want[k][r], 4) != 0)
            __atomic_store_n(&c->early, 1, __ATOMIC_RELAXED);
    }
}

/* mv_batch_then of three products of type t (rows, rows / 2, rows / 2 x cols; packed with span
 * `span` when packable, as the q, k and v of a layer) on 1 and 3 threads: mv_batch's bits, and
 * each product's rows handed over exactly once, after their values; a NULL callback refused. */
static void check_batch_then(cpu_pool *p1, cpu_pool *p3, gem_gguf_type t, int64_t rows,
                             int64_t cols, int64_t span)
{
    size_t rb = 0;
    TCHECK_STATUS(gem_gguf_row_bytes(t, cols, &rb), GEM_OK);
    const int64_t nr[3] = {rows, rows / 2, rows / 2};
    float *src = malloc((size_t)cols * 4), *x = malloc((size_t)cols * 4);
    mv_scratch xq = {aligned_alloc(64, mv_xq_bytes(cols)), mv_xq_bytes(cols)};
    uint8_t *q[3];
    void *pk[3];
    float *want[3], *y[3];
    int *count[3];
    gem_matrix w[3];
    int ok = src && x && xq.buf;
    for (int m = 0; m < 3; m++) {
        const size_t mb = (size_t)nr[m] * rb;
        q[m] = malloc(mb);
        pk[m] = aligned_alloc(64, (mb + 63) / 64 * 64);
        want[m] = malloc((size_t)nr[m] * 4);
        y[m] = malloc((size_t)nr[m] * 4);
        count[m] = malloc((size_t)nr[m] * sizeof(int));
        ok &= q[m] && pk[m] && want[m] && y[m] && count[m];
    }
    if (!TCHECK(ok))
        return;
    for (int64_t i = 0; i < cols; i++)
        x[i] = sinf((float)i * 0.23f);
    for (int m = 0; m < 3; m++) {
        for (int64_t r = 0; r < nr[m]; r++) {
            for (int64_t i = 0; i < cols; i++)
                src[i] = cosf((float)((m + 1) * r * cols + i) * 0.519f) * (float)(1 + i % 4);
            gem_gguf_quantize(t, src, q[m] + (size_t)r * rb, cols);
        }
        w[m] = (gem_matrix){q[m], t, nr[m], cols, rb, NULL, span};
        if (mv_packable(&w[m])) {
            mv_pack(&w[m], pk[m]);
            w[m].packed = pk[m];
        }
    }
    const gem_matrix *ws[3] = {&w[0], &w[1], &w[2]};
    const float *xs[3] = {x, x, x};
    TCHECK_STATUS(mv_batch(p1, 3, ws, xs, &xq, want), GEM_OK);
    for (int threads = 1; threads <= 3; threads += 2) {
        batch_seen c = {{want[0], want[1], want[2]}, {y[0], y[1], y[2]},
                        {count[0], count[1], count[2]}, 0, 0};
        for (int m = 0; m < 3; m++) {
            memset(count[m], 0, (size_t)nr[m] * sizeof(int));
            memset(y[m], 0x5A, (size_t)nr[m] * 4);
        }
        TCHECK_STATUS(mv_batch_then(threads == 1 ? p1 : p3, 3, ws, xs, &xq, y, batch_done, &c),
                      GEM_OK);
        int once = 1, bits = 1;
        for (int m = 0; m < 3; m++)
            for (int64_t r = 0; r < nr[m]; r++) {
                once &= count[m][r] == 1;
                bits &= memcmp(&y[m][r], &want[m][r], 4) == 0;
            }
        if (!TCHECK(once && bits && !c.early && !c.bad_k))
            fprintf(stderr, "     mv_batch_then %s%s %lldx%lld span %lld, %d threads: once %d, "
                            "bits %d, early %d\n",
                    gem_gguf_type_name(t), w[0].packed ? " packed" : "", (long long)rows,
                    (long long)cols, (long long)span, threads, once, bits, c.early);
    }
    TCHECK_STATUS(mv_batch_then(p3, 3, ws, xs, &xq, y, NULL, NULL), GEM_ERR_PARAM);
    free(src);
    free(x);
    free(xq.buf);
    for (int m = 0; m < 3; m++) {
        free(q[m]);
        free(pk[m]);
        free(want[m]);
        free(y[m]);
        free(count[m]);
    }
}

/* Products large enough for the pool (past the bytes run on the caller): every split, prefetch
 * distance and prefetch target gives the bits of mv_rows on one thread, packed or not. The
 * library's default distance depends on the processor (none on AMD), so both must hold. */
static void check_tunings(cpu_pool *p3)
{
    static const gem_gguf_type types[] = {GEM_GGUF_Q8_0, GEM_GGUF_Q4_K, GEM_GGUF_F16};
    const int64_t rows = 1024, cols = 512;
    float *src = malloc((size_t)(rows * cols) * 4), *x = malloc((size_t)cols * 4);
    float *y1 = malloc((size_t)rows * 4), *y = malloc((size_t)rows * 4);
    uint8_t *q = malloc((size_t)(rows * cols) * 2);
    void *pk = aligned_alloc(64, (size_t)(rows * cols) * 2);
    mv_scratch xq = {aligned_alloc(64, mv_xq_bytes(cols)), mv_xq_bytes(cols)};
    if (!TCHECK(src && x && y1 && y && q && pk && xq.buf))
        return;
    for (int64_t i = 0; i < rows * cols; i++)
        src[i] = sinf((float)i * 0.613f) * (float)(1 + i % 3);
    for (int64_t i = 0; i < cols; i++)
        x[i] = cosf((float)i * 0.29f);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        size_t rb = 0;
        TCHECK_STATUS(gem_gguf_row_bytes(types[k], cols, &rb), GEM_OK);
        TCHECK(rows * rb > ((size_t)256 << 10)); /* past MV_INLINE_BYTES: the pool runs it */
        for (int64_t r = 0; r < rows; r++)
            gem_gguf_quantize(types[k], src + r * cols, q + (size_t)r * rb, cols);
        gem_matrix w = {q, types[k], rows, cols, rb, NULL, 0};
        if (mv_packable(&w)) {
            mv_pack(&w, pk);
            w.packed = pk;
        }
        TCHECK_STATUS(mv_rows(&w, x, &xq, y1, 0, rows), GEM_OK);
        static const int64_t parts[] = {1, 4, 64}, ahead[] = {0, 4096, 16384};
        int bad = 0;
        for (size_t a = 0; a < 3; a++)
            for (size_t b = 0; b < 3; b++)
                for (int into = 0; into < 3; into++) {
                    /* x's digits by the caller, or by the items (from 256 or 512 columns) */
                    const int64_t xq_cols = (int64_t)(a + b + (size_t)into) % 3 * 256;
                    const mv_tuning t = {parts[a], ahead[b], into, 0, 0, xq_cols};
                    const gem_matrix *wp = &w;
                    const float *xp = x;
                    float *yp = y;
                    memset(y, 0x5A, (size_t)rows * 4);
                    TCHECK_STATUS(mv_batch_tuned(p3, 1, &wp, &xp, &xq, &yp, &t), GEM_OK);
                    bad += memcmp(y, y1, (size_t)rows * 4) != 0;
                }
        if (!TCHECK(bad == 0))
            fprintf(stderr, "     tunings %s%s: %d of 27 differ from mv_rows\n",
                    gem_gguf_type_name(types[k]), w.packed ? " packed" : "", bad);
        /* tapered splits, down to ranges shorter than a row (they hold no row), then 6 levels
         * with 1-7 of them owned (cpu_pool_run_owned; 7 clamps to 6): {taper, owned} */
        static const int64_t tapers[][2] = {{2, 0}, {3, 0}, {5, 0}, {8, 0}, {6, 1}, {6, 2},
                                            {6, 3}, {6, 4}, {6, 5}, {6, 6}, {6, 7}};
        for (size_t a = 0; a < sizeof tapers / sizeof tapers[0]; a++) {
            const mv_tuning t = {1, -1, 2, tapers[a][0], tapers[a][1], a % 2 ? 512 : 0};
            const gem_matrix *wp = &w;
            const float *xp = x;
            float *yp = y;
            memset(y, 0x5A, (size_t)rows * 4);
            TCHECK_STATUS(mv_batch_tuned(p3, 1, &wp, &xp, &xq, &yp, &t), GEM_OK);
            if (!TCHECK(memcmp(y, y1, (size_t)rows * 4) == 0))
                fprintf(stderr, "     taper %d levels, %d owned, %s%s differs from mv_rows\n",
                        (int)tapers[a][0], (int)tapers[a][1], gem_gguf_type_name(types[k]),
                        w.packed ? " packed" : "");
        }
        check_ahead(&w);
        TCHECK_STATUS(mv(p3, &w, x, &xq, y), GEM_OK); /* the default tuning */
        TCHECK(memcmp(y, y1, (size_t)rows * 4) == 0);
    }
    free(src);
    free(x);
    free(y1);
    free(y);
    free(q);
    free(pk);
    free(xq.buf);
}

/* Every check of the products, on the build that runs (mvk_use). */
static void check_products(cpu_pool *p1, cpu_pool *p3)
{
    static const gem_gguf_type types[] = {GEM_GGUF_F32,  GEM_GGUF_F16,  GEM_GGUF_BF16,
                                          GEM_GGUF_Q8_0, GEM_GGUF_Q4_0, GEM_GGUF_Q4_K,
                                          GEM_GGUF_Q6_K};
    const int64_t rows = 37, max_cols = 512;
    float *src = malloc((size_t)(rows * max_cols) * 4), *x = malloc((size_t)max_cols * 4);
    float *row = malloc((size_t)max_cols * 4), *y = malloc((size_t)rows * 4);
    float *y2 = malloc((size_t)rows * 4);
    uint8_t *q = malloc((size_t)(rows * max_cols) * 4);
    for (int64_t i = 0; i < rows * max_cols; i++)
        src[i] = sinf((float)i * 0.731f) * 0.1f * (float)(1 + i % 5);
    for (int64_t i = 0; i < max_cols; i++)
        x[i] = cosf((float)i * 0.37f);
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
            const int64_t cols = pass ? 500 : 512;
            size_t rb;
            if (gem_gguf_row_bytes(types[k], cols, &rb) != GEM_OK)
                continue; /* 500 is not a multiple of a quantized block */
            for (int64_t r = 0; r < rows; r++)
                gem_gguf_quantize(types[k], src + r * cols, q + (size_t)r * rb, cols);
            gem_matrix w = {q, types[k], rows, cols, rb, NULL, 0};
            TCHECK_STATUS(mv(p1, &w, x, NULL, y), GEM_OK);
            int bad = 0;
            for (int64_t r = 0; r < rows; r++) {
                gem_gguf_dequant(types[k], q + (size_t)r * rb, row, cols);
                float want = ref_dot(row, x, cols);
                bad += memcmp(&want, &y[r], 4) != 0;
            }
            if (!TCHECK(bad == 0))
                fprintf(stderr, "     type %s: %d rows differ\n", gem_gguf_type_name(types[k]),
                        bad);
            TCHECK_STATUS(mv(p3, &w, x, NULL, y2), GEM_OK);
            TCHECK(memcmp(y, y2, (size_t)rows * 4) == 0);
            mv_row_f32(&w, 5, row);
            float dq[512];
            gem_gguf_dequant(types[k], q + 5 * rb, dq, cols);
            TCHECK(memcmp(row, dq, (size_t)cols * 4) == 0);
        }
    static const gem_gguf_type packed_types[] = {GEM_GGUF_Q8_0, GEM_GGUF_Q4_0, GEM_GGUF_Q4_K,
                                                 GEM_GGUF_Q6_K};
    for (int k = 0; k < 4; k++) {
        const gem_gguf_type t = packed_types[k];
        const int k_quant = t == GEM_GGUF_Q4_K || t == GEM_GGUF_Q6_K;
        check_packed(p1, p3, t, 48, 512, 1);
        check_packed(p1, p3, t, 32, k_quant ? 1280 : 1088, 1);
        check_packed(p1, p3, t, 512, 2048, 1); /* large enough for the pool (256 KiB and up) */
        /* spans of column chunks: 11 groups (the last span short for 2, 4 and 8) over 81 blocks
         * of 32 or 11 super-blocks (chunks of 1,024 columns, the last narrower) */
        for (int64_t span = 2; span <= MV_SPAN_MAX; span *= 2)
            check_packed(p1, p3, t, 176, k_quant ? 2816 : 2592, span);
        check_packed(p1, p3, t, 512, 4096, 8); /* on the pool */
        check_packed(p1, p3, t, 48, 512, 8);   /* one chunk: the span changes nothing */
        check_extremes(p1, t, 0x7F);
        check_extremes(p1, t, 0x80);
        check_extremes(p1, t, 0xFF);
    }
    {
        /* mv_span_for: on AMD the widest span that leaves a span for each of threads x 4
         * ranges, elsewhere 1 */
        int amd = 0;
#if defined(__x86_64__) || defined(__i386__)
        unsigned a = 0, b = 0, c = 0, d = 0;
        if (__get_cpuid(0, &a, &b, &c, &d))
            amd = b == 0x68747541u && d == 0x69746E65u && c == 0x444D4163u; /* AuthenticAMD */
#endif
        gem_matrix o = {NULL, GEM_GGUF_Q8_0, 1024, 8192, 8192 / 32 * 34, NULL, 0};
        TCHECK(mv_span_for(&o, 2) == (amd ? 8 : 1));  /* 64 groups, 8 ranges */
        TCHECK(mv_span_for(&o, 4) == (amd ? 4 : 1));  /* 16 ranges */
        TCHECK(mv_span_for(&o, 8) == (amd ? 2 : 1));  /* 32 ranges */
        TCHECK(mv_span_for(&o, 16) == 1);             /* 64 ranges */
        TCHECK(mv_span_for(&o, 0) == (amd ? 8 : 1));
        gem_matrix narrow = {NULL, GEM_GGUF_Q8_0, 8192, 1024, 1024 / 32 * 34, NULL, 0};
        TCHECK(mv_span_for(&narrow, 1) == 1); /* one chunk */
        gem_matrix f16 = {NULL, GEM_GGUF_F16, 1024, 8192, 8192 * 2, NULL, 0};
        TCHECK(mv_span_for(&f16, 1) == 1); /* not packable */
    }
    {
        gem_matrix h16 = {NULL, GEM_GGUF_F16, 32, 256, 512, NULL, 0};
        TCHECK(!mv_packable(&h16)); /* the other types keep the F32 rule */
    }
    check_tunings(p3);
    check_pair(p1, p3, GEM_GGUF_Q8_0, 1024, 512, 1);  /* on the pool */
    check_pair(p1, p3, GEM_GGUF_Q4_K, 512, 2048, 2);  /* units of 32 rows */
    check_pair(p1, p3, GEM_GGUF_Q6_K, 176, 2816, 8);  /* the last span short */
    check_pair(p1, p3, GEM_GGUF_F16, 1024, 512, 0);   /* rows, not packed */
    check_pair(p1, p3, GEM_GGUF_Q4_0, 48, 512, 1);    /* small: on the calling thread */
    check_batch_then(p1, p3, GEM_GGUF_Q8_0, 1024, 512, 1); /* on the pool */
    check_batch_then(p1, p3, GEM_GGUF_Q6_K, 352, 2816, 4); /* spans of 64 rows, k's last short */
    check_batch_then(p1, p3, GEM_GGUF_BF16, 512, 512, 0);  /* rows, not packed */
    check_batch_then(p1, p3, GEM_GGUF_Q8_0, 64, 512, 1);   /* small: on the calling thread */
    /* one or two 16-row groups a matrix but past 256 KiB: on the pool, most items without rows
     * (they still compute x's digits, 16,384 columns), the callbacks once a range */
    check_pair(p1, p3, GEM_GGUF_Q8_0, 16, 16384, 1);
    check_batch_then(p1, p3, GEM_GGUF_Q8_0, 32, 16384, 1);
    free(src);
    free(x);
    free(row);
    free(y);
    free(y2);
    free(q);
}

int main(void)
{
    cpu_pool *p1 = NULL, *p3 = NULL;
    TCHECK_STATUS(cpu_pool_create(1, &p1), GEM_OK);
    TCHECK_STATUS(cpu_pool_create(3, &p3), GEM_OK);
    /* every build of the products this library holds and this processor runs (up to four in a
     * GEM_CPU_DISPATCH build), each named (scripts/portable-check.sh reads the lines) */
    const char *builds[4];
    const int nb = mvk_builds(builds, 4);
    for (int b = 0; b < nb && b < 4; b++) {
        TCHECK(mvk_use(builds[b]) == 0 && strcmp(gem_model_cpu_products_isa(), builds[b]) == 0);
        printf("test_matvec: %s products\n", builds[b]);
        check_products(p1, p3);
    }
    TCHECK(mvk_use("no such build") == -1);
    TCHECK(mvk_use(builds[0]) == 0);
    {
        /* one build: it names this program's target's paths; several: the last is portable */
        const char *isa = gem_model_cpu_products_isa();
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
        const char *want = "avx512-vnni";
#elif defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
        const char *want = "avx512";
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
        const char *want = "avx2";
#else
        const char *want = "portable";
#endif
        if (nb > 1)
            TCHECK(strcmp(builds[nb - 1], "portable") == 0);
        else if (!TCHECK(isa && strcmp(isa, want) == 0))
            fprintf(stderr, "     products' instruction set %s, this build's %s\n",
                    isa ? isa : "(null)", want);
    }
    cpu_pool_destroy(p1);
    cpu_pool_destroy(p3);
    return tcheck_summary("test_matvec");
}
