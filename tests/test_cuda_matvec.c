/*
 * The device matrix kernels (src/model/cuda/model_cuda.h) against the CPU's
 * dequantization.
 *
 * Without a GPU (or in a build without CUDA) every entry answers GEM_ERR_NO_DEVICE
 * and the test says that the GPU part was not run. With a GPU, for every element type:
 *   - gem_dmv on seeded rows (gem_gguf_quantize of seeded floats) of many shapes (row
 *     lengths that fill whole steps, leave partial tails, and misalign the rows; 1 to
 *     70001 rows) against the double-precision dot product of gem_gguf_dequant's values:
 *     |y - ref| <= 1e-5 * sum|w x| + 1e-30 (Q4_K: sum over its sub-blocks of
 *     |d1| sum|n x| + |m1| sum|x|, the terms its scale-once arithmetic rounds);
 *   - exactness: with x a unit vector e_c, y is column c of gem_gguf_dequant's values bit
 *     for bit, for every column of rows of 1280 (each lane map and tail);
 *   - the same bits: on a repeat, for one and four rows per warp (gem_dmv_slots), for a
 *     matrix view that starts one row later, in gem_dmv_multi (one type and three), and
 *     gem_dmv_geglu against gelu_tanh(gate) * up of gem_dmv's values (one type and two);
 *   - gem_dmv_row bit for bit against gem_gguf_dequant * scale, and gem_dmv_row_at (the row's
 *     id read on the device) bit for bit against gem_dmv_row in every layout, NaN in every
 *     element for an id outside the matrix;
 *   - gem_dmatrix_fill_random: the same bytes for the same seed, others for another,
 *     every scale a finite nonzero f16, every value finite, within [-amp, amp] and spread;
 *   - Q4_0 in tiles (gem_dmatrix_tile, the tensor-core product): against the reference
 *     within its bound (F32 additions of 4 exact terms per block, and x to 2^-27 of each
 *     block's largest magnitude: 4e-6 (sum|w x| + sum_b M_b W_b / 32) + 2^-26 sum_b
 *     M_b W_b, M_b = max|x| and W_b = sum|w| over block b), also for x with outliers and
 *     tiny values; unit vectors exact; x = 0 gives 0; a NaN or an infinity in x gives no
 *     finite output; the same bits on a repeat, in gem_dmv_multi with a file-order
 *     matrix, and gem_dmv_geglu against gelu_tanh(gate) * up of gem_dmv's sums (the
 *     activation's roundings alone); the prepared entries read
 *     the scratch as it stands (the tiled products of the x it was made from, bit for bit,
 *     while a file-order matrix reads the new x); gem_dmv_row bit for bit; shapes of 1 to
 *     16 warps per tile and partial batches;
 *   - Q4_K in tiles, the same checks, against its own bound (4e-6 (sum_s (|d1| sum|q x| +
 *     |m1| sum|x|) + E / 32) + 2^-26 E, E = sum_s max|x_s| (|d1| sum q + 32 |m1|)), and
 *     gem_dmv_multi with Q4_K tiles, Q4_0 tiles and file-order rows together;
 *   - Q6_K in tiles, the same checks, against Q4_0's bound (its weights d sc (q - 32) are
 *     exact in F32, and its sums are exact per 16-element sub-block), and gem_dmv_multi with
 *     Q6_K tiles, Q4_K tiles and file-order rows together;
 *   - Q8_0 in tiles, the same checks, against Q4_0's bound (its weights d q are exact in F32),
 *     on Q4_0's shapes (1 to 16 warps a tile, a warp past the tile's chunks, partial batches),
 *     and gem_dmv_multi with Q8_0 tiles, Q4_0 tiles and file-order rows together;
 *   - BF16 in tiles (x as three exact BF16 pieces on the BF16 tensor cores), the same checks
 *     against the file-order kernel's bound, on Q4_0's shapes, with Q4_0 tiles and rows;
 *   - the statuses of bad arguments.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gem/cuda.h"
#include "gem/gguf.h"
#include "harness.h"
#include "model/cuda/model_cuda.h"
#include "tcheck.h"

#ifdef GEM_HAVE_CUDA
/* src/model/cuda/matvec.cu: gem_dmv with 1, 2 or 4 rows per warp */
gem_status gem_dmv_slots(const gem_dmatrix *w, const float *x, float *y, void *stream, int slots);
#endif

static const gem_gguf_type all_types[] = {GEM_GGUF_F32,  GEM_GGUF_F16,  GEM_GGUF_BF16,
                                          GEM_GGUF_Q8_0, GEM_GGUF_Q4_0, GEM_GGUF_Q4_K,
                                          GEM_GGUF_Q6_K};
#define NTYPES (sizeof all_types / sizeof all_types[0])

static const gem_harness_ops *dev_ops = &gem_harness_cuda_ops;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static float urand(uint64_t *s) { return (float)(splitmix(s) >> 40) * 0x1p-23f - 1.0f; }

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test_cuda_matvec: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    if (dev_ops->alloc(bytes ? bytes : 16, &p) != GEM_OK) {
        fprintf(stderr, "test_cuda_matvec: device allocation of %zu bytes failed\n", bytes);
        exit(2);
    }
    return p;
}

static void upload(void *d, const void *h, size_t bytes)
{
    if (dev_ops->upload(d, h, bytes) != GEM_OK) {
        fprintf(stderr, "test_cuda_matvec: upload failed\n");
        exit(2);
    }
}

static void download(void *h, const void *d, size_t bytes)
{
    if (dev_ops->download(h, d, bytes) != GEM_OK) {
        fprintf(stderr, "test_cuda_matvec: download failed\n");
        exit(2);
    }
}

/* A seeded matrix: host rows (rows, rb), their gem_gguf_dequant values deq (rows, cols)
 * and a device copy of exactly rows * rb bytes. */
typedef struct tmat {
    gem_dmatrix d;
    uint8_t *host;
    float *deq;
} tmat;

static void tmat_make(tmat *t, gem_gguf_type type, int64_t rows, int64_t cols, uint64_t seed)
{
    size_t rb = 0;
    if (gem_gguf_row_bytes(type, cols, &rb) != GEM_OK) {
        fprintf(stderr, "test_cuda_matvec: bad shape %s x %lld\n", gem_gguf_type_name(type),
                (long long)cols);
        exit(2);
    }
    float *src = xmalloc((size_t)cols * sizeof(float));
    t->host = xmalloc((size_t)rows * rb);
    t->deq = xmalloc((size_t)rows * (size_t)cols * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        /* rows of different magnitudes, and a few large elements, to vary the scales */
        const float mag = ldexpf(1.0f, (int)(r % 7) - 3);
        for (int64_t i = 0; i < cols; i++)
            src[i] = mag * urand(&seed) * (splitmix(&seed) % 17 == 0 ? 4.0f : 1.0f);
        gem_gguf_quantize(type, src, t->host + (size_t)r * rb, cols);
        gem_gguf_dequant(type, t->host + (size_t)r * rb, t->deq + (size_t)r * (size_t)cols, cols);
    }
    free(src);
    t->d.data = dev_alloc((size_t)rows * rb);
    upload(t->d.data, t->host, (size_t)rows * rb);
    t->d.type = type;
    t->d.rows = rows;
    t->d.cols = cols;
    t->d.row_bytes = rb;
    t->d.layout = GEM_DLAYOUT_ROWS;
}

static void tmat_free(tmat *t)
{
    dev_ops->free(t->d.data);
    free(t->host);
    free(t->deq);
}

static float f16_at(const uint8_t *p) { return gem_gguf_f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }

/* The magnitude the error of row r is measured against: sum|w x|, and for Q4_K the sum
 * over sub-blocks of |d1| sum|n x| + |m1| sum|x| (d1 = d * scale, m1 = dmin * min). */
static double row_magnitude(const tmat *t, int64_t r, const float *x)
{
    const int64_t cols = t->d.cols;
    const float *w = t->deq + (size_t)r * (size_t)cols;
    double m = 0;
    if (t->d.type != GEM_GGUF_Q4_K) {
        for (int64_t i = 0; i < cols; i++)
            m += fabs((double)w[i] * (double)x[i]);
        return m;
    }
    const uint8_t *row = t->host + (size_t)r * t->d.row_bytes;
    for (int64_t b = 0; b < cols / 256; b++) {
        const uint8_t *blk = row + 144 * b, *sc = blk + 4, *q = blk + 16;
        const double d = f16_at(blk), dmin = f16_at(blk + 2);
        for (int s = 0; s < 8; s++) {
            int scale, mn;
            if (s < 4) {
                scale = sc[s] & 63;
                mn = sc[s + 4] & 63;
            } else {
                scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
                mn = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
            }
            for (int l = 0; l < 32; l++) {
                const int n = s & 1 ? q[32 * (s / 2) + l] >> 4 : q[32 * (s / 2) + l] & 0xF;
                const double xv = fabs((double)x[256 * b + 32 * s + l]);
                m += fabs(d * scale) * n * xv + fabs(dmin * mn) * xv;
            }
        }
    }
    return m;
}

/* Checks y (rows) against the double reference; returns the rows outside the bound. */
static int check_products(const tmat *t, const float *x, const float *y, const char *what)
{
    int bad = 0;
    for (int64_t r = 0; r < t->d.rows; r++) {
        const float *w = t->deq + (size_t)r * (size_t)t->d.cols;
        double ref = 0;
        for (int64_t i = 0; i < t->d.cols; i++)
            ref += (double)w[i] * (double)x[i];
        const double tol = 1e-5 * row_magnitude(t, r, x) + 1e-30;
        if (!(fabs((double)y[r] - ref) <= tol)) {
            if (bad < 3)
                fprintf(stderr, "  %s %s rows %lld cols %lld: row %lld: %.9g vs %.9g (tol %.3g)\n",
                        what, gem_gguf_type_name(t->d.type), (long long)t->d.rows,
                        (long long)t->d.cols, (long long)r, y[r], ref, tol);
            bad++;
        }
    }
    return bad;
}

static float *seeded_x(int64_t cols, uint64_t seed)
{
    float *x = xmalloc((size_t)cols * sizeof(float));
    for (int64_t i = 0; i < cols; i++)
        x[i] = urand(&seed);
    return x;
}

/* One shape of one type: gem_dmv against the reference, repeats, rows per warp, and a view
 * one row later. */
static void check_shape(gem_gguf_type type, int64_t rows, int64_t cols, uint64_t seed)
{
    tmat t;
    tmat_make(&t, type, rows, cols, seed);
    float *x = seeded_x(cols, seed ^ 0xABCDEF);
    float *dx = dev_alloc((size_t)cols * 4), *dy = dev_alloc((size_t)rows * 4);
    float *y = xmalloc((size_t)rows * 4), *y2 = xmalloc((size_t)rows * 4);
    upload(dx, x, (size_t)cols * 4);
    TCHECK_STATUS(gem_dmv(&t.d, dx, dy, NULL, NULL), GEM_OK);
    download(y, dy, (size_t)rows * 4);
    TCHECK(check_products(&t, x, y, "gem_dmv") == 0);
    TCHECK_STATUS(gem_dmv(&t.d, dx, dy, NULL, NULL), GEM_OK);
    download(y2, dy, (size_t)rows * 4);
    TCHECK(memcmp(y, y2, (size_t)rows * 4) == 0);
#ifdef GEM_HAVE_CUDA
    for (int slots = 1; slots <= 4; slots *= 2) {
        memset(y2, 0, (size_t)rows * 4);
        TCHECK_STATUS(gem_dmv_slots(&t.d, dx, dy, NULL, slots), GEM_OK);
        download(y2, dy, (size_t)rows * 4);
        if (!TCHECK(memcmp(y, y2, (size_t)rows * 4) == 0))
            fprintf(stderr, "  %s rows %lld cols %lld: %d rows per warp differ\n",
                    gem_gguf_type_name(type), (long long)rows, (long long)cols, slots);
    }
#endif
    if (rows > 1 && t.d.row_bytes % 16 == 0) { /* rows 1.. as a matrix of their own */
        gem_dmatrix v = t.d;
        v.data = (uint8_t *)t.d.data + t.d.row_bytes;
        v.rows = rows - 1;
        TCHECK_STATUS(gem_dmv(&v, dx, dy, NULL, NULL), GEM_OK);
        download(y2, dy, (size_t)(rows - 1) * 4);
        TCHECK(memcmp(y + 1, y2, (size_t)(rows - 1) * 4) == 0);
    }
    dev_ops->free(dx);
    dev_ops->free(dy);
    free(x);
    free(y);
    free(y2);
    tmat_free(&t);
}

/* y = W e_c is column c of the dequantized values, bit for bit, for every c. */
static void check_unit_vectors(gem_gguf_type type)
{
    const int64_t rows = 5, cols = 1280;
    tmat t;
    tmat_make(&t, type, rows, cols, 77 + (uint64_t)type);
    float *x = xmalloc((size_t)cols * 4), y[5];
    memset(x, 0, (size_t)cols * 4);
    float *dx = dev_alloc((size_t)cols * 4), *dy = dev_alloc(rows * 4);
    int bad = 0;
    for (int64_t c = 0; c < cols; c++) {
        x[c] = 1.0f;
        if (c > 0)
            x[c - 1] = 0.0f;
        upload(dx, x, (size_t)cols * 4);
        if (gem_dmv(&t.d, dx, dy, NULL, NULL) != GEM_OK) {
            bad++;
            break;
        }
        download(y, dy, rows * 4);
        for (int64_t r = 0; r < rows; r++) {
            const float want = t.deq[r * cols + c];
            if (!(y[r] == want)) {
                if (bad < 3)
                    fprintf(stderr, "  unit vector %s: row %lld col %lld: %.9g vs %.9g\n",
                            gem_gguf_type_name(type), (long long)r, (long long)c, y[r], want);
                bad++;
            }
        }
    }
    TCHECK(bad == 0);
    dev_ops->free(dx);
    dev_ops->free(dy);
    free(x);
    tmat_free(&t);
}

static float gelu_ref(float g)
{
    const double a = g;
    return (float)(0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))));
}

/* gem_dmv_multi and gem_dmv_geglu give gem_dmv's products. */
static void check_multi_geglu(gem_gguf_type t0, gem_gguf_type t1, gem_gguf_type t2, int64_t cols)
{
    const int64_t rows[3] = {33, 7, 1};
    const gem_gguf_type types[3] = {t0, t1, t2};
    tmat m[3];
    float *dy[3], *ym[3], *yd[3];
    for (int i = 0; i < 3; i++) {
        tmat_make(&m[i], types[i], rows[i], cols, 1000 + 17 * (uint64_t)i + (uint64_t)types[i]);
        dy[i] = dev_alloc((size_t)rows[i] * 4);
        ym[i] = xmalloc((size_t)rows[i] * 4);
        yd[i] = xmalloc((size_t)rows[i] * 4);
    }
    float *x = seeded_x(cols, 4242), *dx = dev_alloc((size_t)cols * 4);
    upload(dx, x, (size_t)cols * 4);
    for (int i = 0; i < 3; i++) {
        TCHECK_STATUS(gem_dmv(&m[i].d, dx, dy[i], NULL, NULL), GEM_OK);
        download(yd[i], dy[i], (size_t)rows[i] * 4);
    }
    const gem_dmatrix *w[3] = {&m[0].d, &m[1].d, &m[2].d};
    for (int n = 1; n <= 3; n++) {
        TCHECK_STATUS(gem_dmv_multi(n, w, dx, dy, NULL, NULL), GEM_OK);
        for (int i = 0; i < n; i++) {
            download(ym[i], dy[i], (size_t)rows[i] * 4);
            if (!TCHECK(memcmp(ym[i], yd[i], (size_t)rows[i] * 4) == 0))
                fprintf(stderr, "  gem_dmv_multi %s/%s/%s cols %lld: product %d differs\n",
                        gem_gguf_type_name(t0), gem_gguf_type_name(t1), gem_gguf_type_name(t2),
                        (long long)cols, i);
        }
    }
    /* geglu of m[0] with a second matrix of m[1]'s type and m[0]'s rows */
    tmat up;
    tmat_make(&up, t1, rows[0], cols, 999);
    float *yu = xmalloc((size_t)rows[0] * 4), *yg = xmalloc((size_t)rows[0] * 4);
    TCHECK_STATUS(gem_dmv(&up.d, dx, dy[0], NULL, NULL), GEM_OK);
    download(yu, dy[0], (size_t)rows[0] * 4);
    TCHECK_STATUS(gem_dmv_geglu(&m[0].d, &up.d, dx, dy[0], NULL, NULL), GEM_OK);
    download(yg, dy[0], (size_t)rows[0] * 4);
    int bad = 0;
    for (int64_t r = 0; r < rows[0]; r++) {
        const double ref = (double)gelu_ref(yd[0][r]) * (double)yu[r];
        const double tol = 4e-6 * fabs((double)yd[0][r] * (double)yu[r]) + 1e-35;
        if (!(fabs((double)yg[r] - ref) <= tol)) {
            if (bad < 3)
                fprintf(stderr, "  gem_dmv_geglu %s/%s: row %lld: %.9g vs %.9g\n",
                        gem_gguf_type_name(t0), gem_gguf_type_name(t1), (long long)r, yg[r], ref);
            bad++;
        }
    }
    TCHECK(bad == 0);
    tmat_free(&up);
    free(yu);
    free(yg);
    for (int i = 0; i < 3; i++) {
        tmat_free(&m[i]);
        dev_ops->free(dy[i]);
        free(ym[i]);
        free(yd[i]);
    }
    dev_ops->free(dx);
    free(x);
}

/* gem_dmv_row_at on w (cols columns, rows rows): the same bits as gem_dmv_row for row r, and
 * NaN in every element for the ids -1 and rows; the number of elements that fail */
static int64_t row_at_differs(const gem_dmatrix *w, int64_t r, float scale, int64_t cols)
{
    float *dy = dev_alloc((size_t)cols * 4), *dz = dev_alloc((size_t)cols * 4);
    float *y = xmalloc((size_t)cols * 4), *z = xmalloc((size_t)cols * 4);
    int32_t *did = dev_alloc(4);
    int64_t bad = 0;
    TCHECK_STATUS(gem_dmv_row(w, r, scale, dy, NULL), GEM_OK);
    download(y, dy, (size_t)cols * 4);
    const int32_t ids[3] = {(int32_t)r, -1, (int32_t)w->rows};
    for (int k = 0; k < 3; k++) {
        upload(did, &ids[k], 4);
        TCHECK_STATUS(gem_dmv_row_at(w, did, scale, dz, NULL), GEM_OK);
        download(z, dz, (size_t)cols * 4);
        for (int64_t i = 0; i < cols; i++)
            bad += k == 0 ? memcmp(&y[i], &z[i], 4) != 0 : !isnan(z[i]);
    }
    TCHECK_STATUS(gem_dmv_row_at(w, NULL, scale, dz, NULL), GEM_ERR_NULL);
    dev_ops->free(dy);
    dev_ops->free(dz);
    dev_ops->free(did);
    free(y);
    free(z);
    return bad;
}

static void check_rows(gem_gguf_type type)
{
    const int64_t rows = 7, cols = 1280;
    tmat t;
    tmat_make(&t, type, rows, cols, 31 + (uint64_t)type);
    float *dy = dev_alloc((size_t)cols * 4), *y = xmalloc((size_t)cols * 4);
    const float scale = 1.7f;
    int bad = 0;
    for (int64_t r = 0; r < rows; r += 3) {
        TCHECK_STATUS(gem_dmv_row(&t.d, r, scale, dy, NULL), GEM_OK);
        download(y, dy, (size_t)cols * 4);
        for (int64_t i = 0; i < cols; i++) {
            const float want = t.deq[r * cols + i] * scale;
            if (memcmp(&want, &y[i], 4) != 0)
                bad++;
        }
        bad += (int)row_at_differs(&t.d, r, scale, cols);
    }
    if (!TCHECK(bad == 0))
        fprintf(stderr, "  gem_dmv_row %s: %d elements differ\n", gem_gguf_type_name(type), bad);
    dev_ops->free(dy);
    free(y);
    tmat_free(&t);
}

/* The f16 scales of a block: count (0..2) and their offsets. */
static int block_scales(gem_gguf_type t, size_t off[2])
{
    switch (t) {
    case GEM_GGUF_Q8_0:
    case GEM_GGUF_Q4_0: off[0] = 0; return 1;
    case GEM_GGUF_Q4_K: off[0] = 0, off[1] = 2; return 2;
    case GEM_GGUF_Q6_K: off[0] = 208; return 1;
    default: return 0;
    }
}

static void check_fill(gem_gguf_type type)
{
    const int64_t rows = 33, cols = 1280;
    const float amp = 0.25f;
    size_t rb = 0, bb = 0;
    int64_t be = 0;
    gem_gguf_row_bytes(type, cols, &rb);
    gem_gguf_type_block(type, &be, &bb);
    const size_t bytes = (size_t)rows * rb;
    gem_dmatrix w = {dev_alloc(bytes), type, rows, cols, rb, GEM_DLAYOUT_ROWS};
    uint8_t *a = xmalloc(bytes), *b = xmalloc(bytes);
    float *v = xmalloc((size_t)cols * 4);
    TCHECK_STATUS(gem_dmatrix_fill_random(&w, 12345, amp, NULL), GEM_OK);
    download(a, w.data, bytes);
    TCHECK_STATUS(gem_dmatrix_fill_random(&w, 12345, amp, NULL), GEM_OK);
    download(b, w.data, bytes);
    TCHECK(memcmp(a, b, bytes) == 0);
    TCHECK_STATUS(gem_dmatrix_fill_random(&w, 12346, amp, NULL), GEM_OK);
    download(b, w.data, bytes);
    TCHECK(memcmp(a, b, bytes) != 0);
    int bad_scale = 0, bad_value = 0;
    double sum_abs = 0, max_abs = 0;
    size_t off[2];
    const int ns = block_scales(type, off);
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *row = a + (size_t)r * rb;
        for (int64_t blk = 0; blk < cols / be; blk++)
            for (int s = 0; s < ns; s++) {
                const float d = f16_at(row + (size_t)blk * bb + off[s]);
                bad_scale += !(isfinite(d) && d > 0.0f);
            }
        gem_gguf_dequant(type, row, v, cols);
        for (int64_t i = 0; i < cols; i++) {
            bad_value += !(isfinite(v[i]) && fabsf(v[i]) <= amp * 1.001f);
            sum_abs += fabs((double)v[i]);
            max_abs = fabs((double)v[i]) > max_abs ? fabs((double)v[i]) : max_abs;
        }
    }
    const double mean_abs = sum_abs / (double)(rows * cols);
    if (!TCHECK(bad_scale == 0 && bad_value == 0 && max_abs >= 0.5 * amp &&
                mean_abs >= 0.1 * amp && mean_abs <= 0.75 * amp))
        fprintf(stderr, "  fill %s: %d bad scales, %d bad values, max %.4g mean %.4g\n",
                gem_gguf_type_name(type), bad_scale, bad_value, max_abs, mean_abs);
    dev_ops->free(w.data);
    free(a);
    free(b);
    free(v);
}

static void check_errors(void)
{
    const int64_t rows = 4, cols = 256;
    size_t rb = 0;
    gem_gguf_row_bytes(GEM_GGUF_Q4_0, cols, &rb);
    uint8_t *data = dev_alloc(rows * rb + 64);
    float *dx = dev_alloc(2 * 32768 * 4), *dy = dev_alloc(cols * 4);
    const gem_dmatrix ok = {data, GEM_GGUF_Q4_0, rows, cols, rb, GEM_DLAYOUT_ROWS};
    gem_dmatrix w = ok;
    TCHECK_STATUS(gem_dmatrix_fill_random(&ok, 1, 1.0f, NULL), GEM_OK);
    TCHECK_STATUS(gem_dmv(&ok, dx, dy, NULL, NULL), GEM_OK);
    w.type = (gem_gguf_type)3; /* Q4_1: not a type gem reads */
    TCHECK_STATUS(gem_dmv(&w, dx, dy, NULL, NULL), GEM_ERR_UNSUPPORTED);
    w = ok;
    w.cols = 100; /* not a multiple of 32 */
    TCHECK_STATUS(gem_dmv(&w, dx, dy, NULL, NULL), GEM_ERR_UNSUPPORTED);
    w = ok;
    w.type = GEM_GGUF_Q4_K, w.cols = 32, w.row_bytes = 18; /* Q4_K needs 256 */
    TCHECK_STATUS(gem_dmv(&w, dx, dy, NULL, NULL), GEM_ERR_UNSUPPORTED);
    w = ok;
    w.row_bytes = rb + 2;
    TCHECK_STATUS(gem_dmv(&w, dx, dy, NULL, NULL), GEM_ERR_SHAPE);
    w = ok;
    w.rows = 0;
    TCHECK_STATUS(gem_dmv(&w, dx, dy, NULL, NULL), GEM_ERR_SHAPE);
    w = ok;
    w.data = data + 2;
    TCHECK_STATUS(gem_dmv(&w, dx, dy, NULL, NULL), GEM_ERR_ALIGN);
    w = ok;
    w.data = NULL;
    TCHECK_STATUS(gem_dmv(&w, dx, dy, NULL, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_dmv(NULL, dx, dy, NULL, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_dmv(&ok, NULL, dy, NULL, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_dmv(&ok, dx, NULL, NULL, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_dmv(&ok, dx, dx + 100, NULL, NULL), GEM_ERR_OVERLAP);
    TCHECK_STATUS(gem_dmv(&ok, dx, dx + cols, NULL, NULL), GEM_OK); /* adjacent is fine */
    /* rows beyond the supported length, and the longest supported */
    TCHECK(gem_dmv_supported(GEM_GGUF_F32, 32768) && !gem_dmv_supported(GEM_GGUF_F32, 32769));
    TCHECK(!gem_dmv_supported(GEM_GGUF_Q4_0, 0) && !gem_dmv_supported(GEM_GGUF_Q4_0, -32));
    TCHECK(gem_dmv_supported(GEM_GGUF_Q4_0, 32) && !gem_dmv_supported(GEM_GGUF_Q4_K, 128));
    for (size_t k = 0; k < NTYPES; k++)
        TCHECK(gem_dmv_supported(all_types[k], 5376) && gem_dmv_supported(all_types[k], 21504));
    {
        float *big = dev_alloc(32768 * 4);
        const gem_dmatrix wide = {big, GEM_GGUF_F32, 1, 32768, 32768 * 4, GEM_DLAYOUT_ROWS};
        TCHECK_STATUS(gem_dmatrix_fill_random(&wide, 3, 1.0f, NULL), GEM_OK);
        TCHECK_STATUS(gem_dmv(&wide, dx, dy, NULL, NULL), GEM_OK);
        dev_ops->free(big);
    }
    /* multi */
    const gem_dmatrix *ws[3] = {&ok, &ok, &ok};
    float *ys[3] = {dy, dy + 4, dy + 8};
    TCHECK_STATUS(gem_dmv_multi(0, ws, dx, ys, NULL, NULL), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_dmv_multi(4, ws, dx, ys, NULL, NULL), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_dmv_multi(3, ws, dx, ys, NULL, NULL), GEM_OK);
    float *ys_overlap[3] = {dy, dy + 2, dy + 8};
    TCHECK_STATUS(gem_dmv_multi(3, ws, dx, ys_overlap, NULL, NULL), GEM_ERR_OVERLAP);
    gem_dmatrix other = ok;
    other.cols = 128, other.row_bytes = 72;
    const gem_dmatrix *ws2[2] = {&ok, &other};
    TCHECK_STATUS(gem_dmv_multi(2, ws2, dx, ys, NULL, NULL), GEM_ERR_SHAPE);
    /* geglu */
    gem_dmatrix fewer = ok;
    fewer.rows = 3;
    TCHECK_STATUS(gem_dmv_geglu(&ok, &fewer, dx, dy, NULL, NULL), GEM_ERR_SHAPE);
    TCHECK_STATUS(gem_dmv_geglu(&ok, &other, dx, dy, NULL, NULL), GEM_ERR_SHAPE);
    TCHECK_STATUS(gem_dmv_geglu(&ok, &ok, dx, dy, NULL, NULL), GEM_OK);
    /* row */
    TCHECK_STATUS(gem_dmv_row(&ok, rows, 1.0f, dy, NULL), GEM_ERR_RANGE);
    TCHECK_STATUS(gem_dmv_row(&ok, -1, 1.0f, dy, NULL), GEM_ERR_RANGE);
    TCHECK_STATUS(gem_dmv_row(&ok, rows - 1, 1.0f, dy, NULL), GEM_OK);
    /* fill */
    TCHECK_STATUS(gem_dmatrix_fill_random(&ok, 1, 0.0f, NULL), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_dmatrix_fill_random(&ok, 1, -1.0f, NULL), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_dmatrix_fill_random(&ok, 1, NAN, NULL), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_dmatrix_fill_random(&ok, 1, INFINITY, NULL), GEM_ERR_PARAM);
    w = ok;
    w.type = (gem_gguf_type)3;
    TCHECK_STATUS(gem_dmatrix_fill_random(&w, 1, 1.0f, NULL), GEM_ERR_UNSUPPORTED);
    dev_ops->free(data);
    dev_ops->free(dx);
    dev_ops->free(dy);
}

/* ---- Q4_0 and Q4_K in tiles ---------------------------------------------------------------- */

/* The bound of a tiled Q4_0, Q6_K or Q8_0 product (file comment); rows (rows, cols) of
 * dequantized weights. */
static double tiles_tol_q4_0(const float *w, const float *x, int64_t cols)
{
    double wx = 0, mw = 0;
    for (int64_t b = 0; b < cols / 32; b++) {
        double m = 0, sw = 0;
        for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
            wx += fabs((double)w[k] * (double)x[k]);
            m = fabs((double)x[k]) > m ? fabs((double)x[k]) : m;
            sw += fabs((double)w[k]);
        }
        mw += m * sw;
    }
    return 4e-6 * (wx + mw / 32) + 0x1p-26 * mw + 1e-35;
}

/* The bound of a tiled Q4_K product (file comment) for row r of t. */
static double tiles_tol_q4_k(const tmat *t, int64_t r, const float *x)
{
    const uint8_t *row = t->host + (size_t)r * t->d.row_bytes;
    double mag = 0, e = 0;
    for (int64_t b = 0; b < t->d.cols / 256; b++) {
        const uint8_t *blk = row + 144 * b, *sc = blk + 4, *q = blk + 16;
        const double d = f16_at(blk), dmin = f16_at(blk + 2);
        for (int s = 0; s < 8; s++) {
            int scale, mn;
            if (s < 4) {
                scale = sc[s] & 63;
                mn = sc[s + 4] & 63;
            } else {
                scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
                mn = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
            }
            double qx = 0, ax = 0, mx = 0, qs = 0;
            for (int l = 0; l < 32; l++) {
                const int n = s & 1 ? q[32 * (s / 2) + l] >> 4 : q[32 * (s / 2) + l] & 0xF;
                const double xv = fabs((double)x[256 * b + 32 * s + l]);
                qx += n * xv;
                ax += xv;
                mx = xv > mx ? xv : mx;
                qs += n;
            }
            mag += fabs(d * scale) * qx + fabs(dmin * mn) * ax;
            e += mx * (fabs(d * scale) * qs + 32.0 * fabs(dmin * mn));
        }
    }
    return 4e-6 * (mag + e / 32) + 0x1p-26 * e + 1e-35;
}

/* The bound of row r of t's tiled product with x (BF16: the file-order kernel's). */
static double tiles_tol(const tmat *t, int64_t r, const float *x)
{
    if (t->d.type == GEM_GGUF_Q4_K)
        return tiles_tol_q4_k(t, r, x);
    if (t->d.type == GEM_GGUF_BF16)
        return 1e-5 * row_magnitude(t, r, x) + 1e-30;
    return tiles_tol_q4_0(t->deq + (size_t)r * (size_t)t->d.cols, x, t->d.cols);
}

/* The tile layout of a tileable type. */
static gem_dlayout layout_of(gem_gguf_type t)
{
    return t == GEM_GGUF_Q4_K   ? GEM_DLAYOUT_Q4_K_TILES
           : t == GEM_GGUF_Q6_K ? GEM_DLAYOUT_Q6_K_TILES
           : t == GEM_GGUF_Q8_0 ? GEM_DLAYOUT_Q8_0_TILES
           : t == GEM_GGUF_BF16 ? GEM_DLAYOUT_BF16_TILES
                                : GEM_DLAYOUT_Q4_0_TILES;
}

/* t tiled into a new device buffer: the matrix (layout_of its type). */
static gem_dmatrix tiled_copy(const tmat *t)
{
    gem_dmatrix w = t->d;
    w.data = dev_alloc((size_t)t->d.rows * t->d.row_bytes);
    TCHECK_STATUS(gem_dmatrix_tile(&w, t->d.data, NULL), GEM_OK);
    TCHECK(w.layout == layout_of(t->d.type));
    return w;
}

/* y of the tiled product of t with x (host, cols); returns the rows outside the bound. */
static int tiles_products(const tmat *t, const gem_dmatrix *tw, const float *x, float *y,
                          void *xq, const char *what)
{
    const int64_t rows = t->d.rows, cols = t->d.cols;
    float *dx = dev_alloc((size_t)cols * 4), *dy = dev_alloc((size_t)rows * 4);
    upload(dx, x, (size_t)cols * 4);
    TCHECK_STATUS(gem_dmv(tw, dx, dy, xq, NULL), GEM_OK);
    download(y, dy, (size_t)rows * 4);
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *w = t->deq + (size_t)r * (size_t)cols;
        double ref = 0;
        for (int64_t i = 0; i < cols; i++)
            ref += (double)w[i] * (double)x[i];
        const double tol = tiles_tol(t, r, x);
        if (!(fabs((double)y[r] - ref) <= tol)) {
            if (bad < 3)
                fprintf(stderr, "  tiles %s rows %lld cols %lld: row %lld: %.9g vs %.9g (tol %.3g)\n",
                        what, (long long)rows, (long long)cols, (long long)r, y[r], ref, tol);
            bad++;
        }
    }
    dev_ops->free(dx);
    dev_ops->free(dy);
    return bad;
}

static void check_tiles(gem_gguf_type type, int64_t rows, int64_t cols, uint64_t seed)
{
    TCHECK(gem_dmatrix_tiles_ok(type, rows, cols));
    tmat t;
    tmat_make(&t, type, rows, cols, seed);
    gem_dmatrix tw = tiled_copy(&t);
    void *xq = dev_alloc(gem_dmv_xq_bytes(cols));
    float *x = seeded_x(cols, seed ^ 0x5151);
    float *y = xmalloc((size_t)rows * 4), *y2 = xmalloc((size_t)rows * 4);
    TCHECK(tiles_products(&t, &tw, x, y, xq, "seeded") == 0);
    /* the same bits on a repeat */
    TCHECK(tiles_products(&t, &tw, x, y2, xq, "repeat") == 0);
    TCHECK(memcmp(y, y2, (size_t)rows * 4) == 0);
    /* outliers and tiny values in the same blocks */
    float *xo = xmalloc((size_t)cols * 4);
    for (int64_t i = 0; i < cols; i++)
        xo[i] = x[i] * (i % 37 == 3 ? 3000.0f : i % 5 == 1 ? 1e-4f : 1.0f);
    TCHECK(tiles_products(&t, &tw, xo, y2, xq, "outliers") == 0);
    free(xo);
    free(x);
    free(y);
    free(y2);
    dev_ops->free(xq);
    dev_ops->free(tw.data);
    tmat_free(&t);
}

/* Unit vectors, zero, non-finite x, rows, multi, GeGLU and the statuses, on one shape, for
 * Q4_0, Q4_K, Q6_K or Q8_0 tiles. */
static void check_tiles_properties(gem_gguf_type type)
{
    const int q4k = type == GEM_GGUF_Q4_K;
    const int sb = q4k || type == GEM_GGUF_Q6_K; /* super-blocks */
    /* Q4_0: 9 chunks, 3 warps of 3, a partial batch; Q8_0: 2 warps of 5 and 4; BF16: 4 warps
     * of 3, the last with none; Q4_K, Q6_K: 5 super-blocks, one warp of 5 (GeGLU: 2 warps, 3
     * and 2) */
    const int64_t rows = 16, cols = sb ? 1280 : 1152;
    tmat t, up, rowsm;
    tmat_make(&t, type, rows, cols, 4711);
    tmat_make(&up, type, rows, cols, 4712);
    tmat_make(&rowsm, GEM_GGUF_Q8_0, 5, cols, 4713);
    gem_dmatrix tw = tiled_copy(&t), tu = tiled_copy(&up);
    const size_t xqb = gem_dmv_xq_bytes(cols);
    TCHECK(xqb > 0 && xqb % 16 == 0 && gem_dmv_xq_bytes(0) == 0);
    unsigned char *xq = dev_alloc(xqb + 32);
    float *x = xmalloc((size_t)cols * 4), *y = xmalloc((size_t)rows * 4);
    float *dx = dev_alloc((size_t)cols * 4), *dy = dev_alloc((size_t)rows * 4);
    /* unit vectors: the dequantized column, exactly */
    int bad = 0;
    for (int64_t c = 0; c < cols; c += (c % 128 == 0 ? 31 : 97)) {
        memset(x, 0, (size_t)cols * 4);
        x[c] = 1.0f;
        upload(dx, x, (size_t)cols * 4);
        TCHECK_STATUS(gem_dmv(&tw, dx, dy, xq, NULL), GEM_OK);
        download(y, dy, (size_t)rows * 4);
        for (int64_t r = 0; r < rows; r++)
            if (!(y[r] == t.deq[r * cols + c]) && bad++ < 3)
                fprintf(stderr, "  tiles unit vector: row %lld col %lld: %.9g vs %.9g\n",
                        (long long)r, (long long)c, y[r], t.deq[r * cols + c]);
    }
    TCHECK(bad == 0);
    /* zero */
    memset(x, 0, (size_t)cols * 4);
    upload(dx, x, (size_t)cols * 4);
    TCHECK_STATUS(gem_dmv(&tw, dx, dy, xq, NULL), GEM_OK);
    download(y, dy, (size_t)rows * 4);
    for (int64_t r = 0; r < rows; r++)
        bad += y[r] != 0.0f;
    TCHECK(bad == 0);
    /* a NaN, then an infinity: no finite output */
    for (int k = 0; k < 2; k++) {
        float *xs = seeded_x(cols, 99 + (uint64_t)k);
        xs[700] = k ? INFINITY : NAN;
        upload(dx, xs, (size_t)cols * 4);
        TCHECK_STATUS(gem_dmv(&tw, dx, dy, xq, NULL), GEM_OK);
        download(y, dy, (size_t)rows * 4);
        int finite = 0;
        for (int64_t r = 0; r < rows; r++)
            finite += isfinite(y[r]) != 0;
        TCHECK(finite == 0);
        free(xs);
    }
    /* multi with a file-order matrix, GeGLU: the same bits as gem_dmv */
    float *xs = seeded_x(cols, 1234);
    upload(dx, xs, (size_t)cols * 4);
    float *yq = xmalloc((size_t)rows * 4), *yu = xmalloc((size_t)rows * 4), *yr = xmalloc(5 * 4);
    float *dyu = dev_alloc((size_t)rows * 4), *dyr = dev_alloc(5 * 4);
    TCHECK_STATUS(gem_dmv(&tw, dx, dy, xq, NULL), GEM_OK);
    download(yq, dy, (size_t)rows * 4);
    TCHECK_STATUS(gem_dmv(&tu, dx, dyu, xq, NULL), GEM_OK);
    download(yu, dyu, (size_t)rows * 4);
    TCHECK_STATUS(gem_dmv(&rowsm.d, dx, dyr, NULL, NULL), GEM_OK);
    download(yr, dyr, 5 * 4);
    {
        const gem_dmatrix *ws[3] = {&tw, &rowsm.d, &tu};
        float *ys[3] = {dy, dyr, dyu};
        float *got = xmalloc((size_t)rows * 4);
        TCHECK_STATUS(gem_dmv_multi(3, ws, dx, ys, xq, NULL), GEM_OK);
        download(got, dy, (size_t)rows * 4);
        TCHECK(memcmp(got, yq, (size_t)rows * 4) == 0);
        download(got, dyu, (size_t)rows * 4);
        TCHECK(memcmp(got, yu, (size_t)rows * 4) == 0);
        download(got, dyr, 5 * 4);
        TCHECK(memcmp(got, yr, 5 * 4) == 0);
        TCHECK_STATUS(gem_dmv_geglu(&tw, &tu, dx, dy, xq, NULL), GEM_OK);
        download(got, dy, (size_t)rows * 4);
        bad = 0;
        for (int64_t r = 0; r < rows; r++) {
            /* GeGLU's two sums are gem_dmv's, bit for bit: only the activation's F32
             * roundings stand between it and gelu(gate) * up in double */
            const double ref = (double)gelu_ref(yq[r]) * (double)yu[r];
            const double tol = 4e-6 * fabs((double)yq[r] * yu[r]) + 1e-35;
            bad += !(fabs((double)got[r] - ref) <= tol);
        }
        TCHECK(bad == 0);
        /* prepared: xq holds xs's scratch from the GeGLU call; x is now zeros, which only the
         * file-order matrix reads, so the tiled products are xs's, bit for bit */
        float *gg = xmalloc((size_t)rows * 4);
        memcpy(gg, got, (size_t)rows * 4);
        memset(x, 0, (size_t)cols * 4);
        upload(dx, x, (size_t)cols * 4);
        TCHECK_STATUS(gem_dmv_multi_prepared(3, ws, dx, ys, xq, NULL), GEM_OK);
        download(got, dy, (size_t)rows * 4);
        TCHECK(memcmp(got, yq, (size_t)rows * 4) == 0);
        download(got, dyu, (size_t)rows * 4);
        TCHECK(memcmp(got, yu, (size_t)rows * 4) == 0);
        download(got, dyr, 5 * 4);
        bad = 0;
        for (int i = 0; i < 5; i++)
            bad += got[i] != 0.0f;
        TCHECK(bad == 0);
        TCHECK_STATUS(gem_dmv_geglu_prepared(&tw, &tu, dx, dy, xq, NULL), GEM_OK);
        download(got, dy, (size_t)rows * 4);
        TCHECK(memcmp(got, gg, (size_t)rows * 4) == 0);
        /* the unprepared call makes the scratch of the zeros again */
        TCHECK_STATUS(gem_dmv_multi(3, ws, dx, ys, xq, NULL), GEM_OK);
        download(got, dy, (size_t)rows * 4);
        bad = 0;
        for (int64_t r = 0; r < rows; r++)
            bad += got[r] != 0.0f;
        TCHECK(bad == 0);
        upload(dx, xs, (size_t)cols * 4);
        free(gg);
        free(got);
    }
    /* rows */
    bad = 0;
    for (int64_t r = 0; r < rows; r += 5) {
        float *row = xmalloc((size_t)cols * 4), *drow = dev_alloc((size_t)cols * 4);
        TCHECK_STATUS(gem_dmv_row(&tw, r, 0.75f, drow, NULL), GEM_OK);
        download(row, drow, (size_t)cols * 4);
        for (int64_t i = 0; i < cols; i++) {
            const float want = t.deq[r * cols + i] * 0.75f;
            bad += memcmp(&want, &row[i], 4) != 0;
        }
        bad += (int)row_at_differs(&tw, r, 0.75f, cols);
        free(row);
        dev_ops->free(drow);
    }
    TCHECK(bad == 0);
    /* Q4_K (Q8_0, BF16) tiles, Q4_0 tiles and file-order rows in one gem_dmv_multi (Q6_K: with
     * Q4_K tiles): the same bits as gem_dmv (the second tiled launch reads the scratch the
     * first made) */
    if (type != GEM_GGUF_Q4_0) {
        tmat o;
        tmat_make(&o, type == GEM_GGUF_Q6_K ? GEM_GGUF_Q4_K : GEM_GGUF_Q4_0, rows, cols, 4714);
        gem_dmatrix to = tiled_copy(&o);
        float *dyo = dev_alloc((size_t)rows * 4), *yo = xmalloc((size_t)rows * 4);
        float *got = xmalloc((size_t)rows * 4);
        TCHECK_STATUS(gem_dmv(&to, dx, dyo, xq, NULL), GEM_OK);
        download(yo, dyo, (size_t)rows * 4);
        const gem_dmatrix *ws[3] = {&rowsm.d, &tw, &to};
        float *ys[3] = {dyr, dy, dyo};
        TCHECK_STATUS(gem_dmv_multi(3, ws, dx, ys, xq, NULL), GEM_OK);
        download(got, dy, (size_t)rows * 4);
        TCHECK(memcmp(got, yq, (size_t)rows * 4) == 0);
        download(got, dyo, (size_t)rows * 4);
        TCHECK(memcmp(got, yo, (size_t)rows * 4) == 0);
        download(got, dyr, 5 * 4);
        TCHECK(memcmp(got, yr, 5 * 4) == 0);
        TCHECK_STATUS(gem_dmv_geglu(&tw, &to, dx, dy, xq, NULL), GEM_ERR_UNSUPPORTED);
        free(got);
        free(yo);
        dev_ops->free(dyo);
        dev_ops->free(to.data);
        tmat_free(&o);
    }
    /* statuses */
    TCHECK(!gem_dmatrix_tiles_ok(GEM_GGUF_Q4_K, 8, 128) &&
           !gem_dmatrix_tiles_ok(GEM_GGUF_Q4_K, 12, 256) &&
           !gem_dmatrix_tiles_ok(GEM_GGUF_Q6_K, 8, 128) &&
           !gem_dmatrix_tiles_ok(GEM_GGUF_Q6_K, 12, 256) &&
           !gem_dmatrix_tiles_ok(GEM_GGUF_F16, 8, 256) &&
           !gem_dmatrix_tiles_ok(GEM_GGUF_F32, 8, 256) &&
           !gem_dmatrix_tiles_ok(GEM_GGUF_BF16, 8, 96) &&
           gem_dmatrix_tiles_ok(GEM_GGUF_BF16, 8, 128) &&
           gem_dmatrix_tiles_ok(GEM_GGUF_BF16, 262144, 5376) &&
           gem_dmatrix_tiles_ok(GEM_GGUF_Q4_K, 8, 256) &&
           gem_dmatrix_tiles_ok(GEM_GGUF_Q4_K, 262144, 5376) &&
           gem_dmatrix_tiles_ok(GEM_GGUF_Q6_K, 8, 256) &&
           gem_dmatrix_tiles_ok(GEM_GGUF_Q6_K, 262144, 5376));
    TCHECK(!gem_dmatrix_tiles_ok(GEM_GGUF_Q4_0, 7, cols) &&
           !gem_dmatrix_tiles_ok(GEM_GGUF_Q4_0, 8, 96) &&
           !gem_dmatrix_tiles_ok(GEM_GGUF_Q8_0, 7, cols) &&
           !gem_dmatrix_tiles_ok(GEM_GGUF_Q8_0, 8, 96) &&
           !gem_dmatrix_tiles_ok(GEM_GGUF_Q4_0, 8, 32768 + 128) &&
           gem_dmatrix_tiles_ok(GEM_GGUF_Q4_0, 8, 128) &&
           gem_dmatrix_tiles_ok(GEM_GGUF_Q4_0, 262144, 5376) &&
           gem_dmatrix_tiles_ok(GEM_GGUF_Q8_0, 8, 128) &&
           gem_dmatrix_tiles_ok(GEM_GGUF_Q8_0, 262144, 5376));
    TCHECK_STATUS(gem_dmv(&tw, dx, dy, NULL, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_dmv(&tw, dx, dy, xq + 4, NULL), GEM_ERR_ALIGN);
    TCHECK_STATUS(gem_dmv(&tw, dx, dy, (void *)dx, NULL), GEM_ERR_OVERLAP);
    TCHECK_STATUS(gem_dmv(&tw, dx, dy, (void *)dy, NULL), GEM_ERR_OVERLAP);
    TCHECK_STATUS(gem_dmv_geglu(&tw, &up.d, dx, dy, xq, NULL), GEM_ERR_UNSUPPORTED);
    TCHECK_STATUS(gem_dmv_geglu(&tw, &tu, dx, dy, NULL, NULL), GEM_ERR_NULL);
#ifdef GEM_HAVE_CUDA
    TCHECK_STATUS(gem_dmv_slots(&tw, dx, dy, NULL, 2), GEM_ERR_UNSUPPORTED);
#endif
    TCHECK_STATUS(gem_dmatrix_fill_random(&tw, 1, 1.0f, NULL), GEM_ERR_UNSUPPORTED);
    gem_dmatrix bad_w = tw;
    bad_w.layout = (gem_dlayout)7;
    TCHECK_STATUS(gem_dmv(&bad_w, dx, dy, xq, NULL), GEM_ERR_PARAM);
    bad_w = tw;
    bad_w.rows = 15; /* a partial tile */
    TCHECK_STATUS(gem_dmv(&bad_w, dx, dy, xq, NULL), GEM_ERR_SHAPE);
    for (int k = 0; k < 5; k++) { /* another type's tiles */
        static const gem_dlayout ls[5] = {GEM_DLAYOUT_Q4_0_TILES, GEM_DLAYOUT_Q4_K_TILES,
                                          GEM_DLAYOUT_Q6_K_TILES, GEM_DLAYOUT_Q8_0_TILES,
                                          GEM_DLAYOUT_BF16_TILES};
        if (ls[k] == tw.layout)
            continue;
        bad_w = tw;
        bad_w.layout = ls[k];
        TCHECK_STATUS(gem_dmv(&bad_w, dx, dy, xq, NULL), GEM_ERR_SHAPE);
    }
    gem_dmatrix seven = rowsm.d;
    TCHECK_STATUS(gem_dmatrix_tile(&seven, up.d.data, NULL), GEM_ERR_UNSUPPORTED);
    gem_dmatrix self = t.d;
    TCHECK_STATUS(gem_dmatrix_tile(&self, t.d.data, NULL), GEM_ERR_OVERLAP);
    TCHECK(self.layout == GEM_DLAYOUT_ROWS);
    TCHECK_STATUS(gem_dmatrix_tile(&self, NULL, NULL), GEM_ERR_NULL);
    free(xs);
    free(yq);
    free(yu);
    free(yr);
    free(x);
    free(y);
    dev_ops->free(dyu);
    dev_ops->free(dyr);
    dev_ops->free(dx);
    dev_ops->free(dy);
    dev_ops->free(xq);
    dev_ops->free(tw.data);
    dev_ops->free(tu.data);
    tmat_free(&t);
    tmat_free(&up);
    tmat_free(&rowsm);
}

/* The argmax rule on the host: the largest number, the lowest index among equal ones; 0 when
 * no value is a number. */
static int32_t argmax_ref(const float *x, int64_t n)
{
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best]))
            best = i;
    return best < 0 ? 0 : (int32_t)best;
}

/* gem_dargmax against argmax_ref on vectors built to trip an order-dependent reduction: ties
 * far apart (in different blocks of the first launch), -0 against +0, NaNs, all -inf, all NaN,
 * one value, lengths that are not multiples of a block; the same index on a repeat. */
static void check_dargmax(void)
{
    static const int64_t lengths[] = {1, 7, 2048, 2049, 262144, 600001};
    const int64_t nmax = 600001;
    float *x = xmalloc((size_t)nmax * 4);
    float *dx = dev_alloc((size_t)nmax * 4 + 4);
    int32_t *didx = dev_alloc(8), got = -1, again = -1;
    void *scr = dev_alloc(gem_dargmax_scratch_bytes(nmax));
    TCHECK(gem_dargmax_scratch_bytes(nmax) > 0 && gem_dargmax_scratch_bytes(0) == 0);
    uint64_t seed = 77;
    int bad = 0, cases = 0;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        const int64_t n = lengths[li];
        for (int kind = 0; kind < 7; kind++) {
            for (int64_t i = 0; i < n; i++)
                x[i] = urand(&seed);
            switch (kind) {
            case 1: /* the max twice, far apart; the later one first in a grid-stride order */
                x[n - 1] = 2.0f;
                x[n / 3] = 2.0f;
                break;
            case 2: /* all equal */
                for (int64_t i = 0; i < n; i++)
                    x[i] = 0.5f;
                break;
            case 3: /* -0 and +0 the largest: equal, so the lower index */
                for (int64_t i = 0; i < n; i++)
                    x[i] = -fabsf(x[i]) - 1.0f;
                x[n - 1] = 0.0f;
                x[n / 2] = -0.0f;
                break;
            case 4: /* NaNs, one of them at 0, never win */
                x[0] = NAN;
                x[n / 2] = NAN;
                x[n - 1] = 3.0f;
                break;
            case 5: /* all -inf: the first */
                for (int64_t i = 0; i < n; i++)
                    x[i] = -INFINITY;
                break;
            case 6: /* all NaN: 0 */
                for (int64_t i = 0; i < n; i++)
                    x[i] = NAN;
                break;
            default:
                break;
            }
            upload(dx, x, (size_t)n * 4);
            TCHECK_STATUS(gem_dargmax(dx, n, didx, scr, NULL), GEM_OK);
            download(&got, didx, 4);
            TCHECK_STATUS(gem_dargmax(dx, n, didx, scr, NULL), GEM_OK);
            download(&again, didx, 4);
            const int32_t want = argmax_ref(x, n);
            cases++;
            if ((got != want || again != got) && bad++ < 3)
                fprintf(stderr, "  dargmax n %lld case %d: %d (repeat %d), want %d\n",
                        (long long)n, kind, got, again, want);
        }
    }
    TCHECK(bad == 0 && cases == 42);
    TCHECK_STATUS(gem_dargmax(NULL, 4, didx, scr, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_dargmax(dx, 0, didx, scr, NULL), GEM_ERR_SHAPE);
    TCHECK_STATUS(gem_dargmax(dx, 4, didx, NULL, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_dargmax((const float *)((const char *)dx + 2), 4, didx, scr, NULL),
                  GEM_ERR_ALIGN);
    free(x);
    dev_ops->free(dx);
    dev_ops->free(didx);
    dev_ops->free(scr);
}

static void check_no_device(void)
{
#ifdef GEM_HAVE_CUDA
    TCHECK(gem_dmv_supported(GEM_GGUF_Q4_0, 5376) == 1); /* a property of the kernels */
#else
    TCHECK(gem_dmv_supported(GEM_GGUF_Q4_0, 5376) == 0);
#endif
    /* plausible device addresses, never dereferenced on the host */
    gem_dmatrix w = {(void *)(uintptr_t)0x100000, GEM_GGUF_Q4_0, 4, 256, 144, GEM_DLAYOUT_ROWS};
    const gem_dmatrix *ws[1] = {&w};
    float *x = (float *)(uintptr_t)0x200000, *y = (float *)(uintptr_t)0x300000;
    float *ys[1] = {y};
    TCHECK_STATUS(gem_dmv(&w, x, y, NULL, NULL), GEM_ERR_NO_DEVICE);
    TCHECK_STATUS(gem_dmv_multi(1, ws, x, ys, NULL, NULL), GEM_ERR_NO_DEVICE);
    TCHECK_STATUS(gem_dmv_geglu(&w, &w, x, y, NULL, NULL), GEM_ERR_NO_DEVICE);
    TCHECK_STATUS(gem_dmv_row(&w, 0, 1.0f, y, NULL), GEM_ERR_NO_DEVICE);
    TCHECK_STATUS(gem_dmv_row_at(&w, (const int32_t *)(uintptr_t)0x400000, 1.0f, y, NULL),
                  GEM_ERR_NO_DEVICE);
    TCHECK_STATUS(gem_dargmax(x, 4, (int32_t *)(uintptr_t)0x500000, (void *)(uintptr_t)0x600000,
                              NULL),
                  GEM_ERR_NO_DEVICE);
    TCHECK_STATUS(gem_dmatrix_fill_random(&w, 1, 1.0f, NULL), GEM_ERR_NO_DEVICE);
    gem_dmatrix eight = w;
    eight.rows = 8; /* a shape that tiles */
    TCHECK_STATUS(gem_dmatrix_tile(&eight, x, NULL), GEM_ERR_NO_DEVICE);
}

/* --tiles: the tiled Q4_0, Q4_K, Q6_K, Q8_0 and BF16 checks and the argmax alone (for
 * compute-sanitizer). */
int main(int argc, char **argv)
{
    const int tiles_only = argc > 1 && strcmp(argv[1], "--tiles") == 0;
    if (argc > 1 && !tiles_only) {
        fprintf(stderr, "usage: test_cuda_matvec [--tiles]\n");
        return 2;
    }
    gem_cuda_device_info dev;
    if (gem_cuda_device_query(&dev) == GEM_ERR_NO_DEVICE) {
        check_no_device();
        printf("test_cuda_matvec: no CUDA device here; the GPU checks did not run\n");
        return tcheck_summary("test_cuda_matvec");
    }
    for (size_t k = 0; k < (tiles_only ? 0 : NTYPES); k++) {
        const gem_gguf_type t = all_types[k];
        int64_t be = 0;
        gem_gguf_type_block(t, &be, NULL);
        /* row lengths: whole steps, a main step and tails, the 31B model's, and for the
         * smaller blocks partial tails and rows that are not 16-byte aligned */
        static const int64_t common[] = {256, 512, 1280, 5376};
        static const int64_t blk32[] = {32, 96, 1056, 4160, 8192};
        static const int64_t plain[] = {1, 7, 130, 264, 509};
        static const int64_t row_counts[] = {1, 7, 33};
        for (size_t c = 0; c < sizeof common / sizeof common[0]; c++)
            for (size_t r = 0; r < sizeof row_counts / sizeof row_counts[0]; r++)
                check_shape(t, row_counts[r], common[c], 100 * k + 10 * c + r);
        if (be == 32)
            for (size_t c = 0; c < sizeof blk32 / sizeof blk32[0]; c++)
                check_shape(t, 7, blk32[c], 500 + 10 * k + c);
        if (be == 1)
            for (size_t c = 0; c < sizeof plain / sizeof plain[0]; c++) {
                check_shape(t, 7, plain[c], 700 + 10 * k + c);
                check_shape(t, 33, plain[c], 800 + 10 * k + c);
            }
        check_shape(t, 1000, 5376, 900 + k);
        check_shape(t, 1000, 512, 950 + k);
        check_shape(t, 70001, 256, 990 + k); /* many rounds of the persistent warps */
        check_shape(t, 3, 21504, 995 + k);
        check_unit_vectors(t);
        check_rows(t);
        check_fill(t);
    }
    check_dargmax();
    if (!tiles_only) {
        check_errors();
        check_multi_geglu(GEM_GGUF_Q4_0, GEM_GGUF_Q4_0, GEM_GGUF_Q4_0, 5376);
        check_multi_geglu(GEM_GGUF_Q4_K, GEM_GGUF_Q4_K, GEM_GGUF_Q4_K, 1280);
        check_multi_geglu(GEM_GGUF_Q4_K, GEM_GGUF_Q6_K, GEM_GGUF_Q8_0, 5376);
        check_multi_geglu(GEM_GGUF_BF16, GEM_GGUF_F32, GEM_GGUF_F16, 1280);
        check_multi_geglu(GEM_GGUF_Q8_0, GEM_GGUF_Q4_0, GEM_GGUF_Q8_0, 96);
    }
    /* tiles: 1, 3, 11 and 16 warps per tile (16384 and more columns: several batches a warp);
     * 1 to 513 tiles */
    static const int64_t tile_shapes[][2] = {{8, 128},   {16, 384},   {40, 1152}, {8, 5376},
                                             {4104, 5376}, {64, 8192}, {24, 21504}, {16, 32768}};
    for (size_t i = 0; i < sizeof tile_shapes / sizeof tile_shapes[0]; i++)
        check_tiles(GEM_GGUF_Q4_0, tile_shapes[i][0], tile_shapes[i][1], 3000 + i);
    check_tiles_properties(GEM_GGUF_Q4_0);
    /* Q4_K tiles: 1 to 16 warps per tile, warps of 1 to 6 super-blocks, warps past the end
     * (84 super-blocks on 16 warps of 6), 1 to 513 tiles */
    static const int64_t q4k_shapes[][2] = {{8, 256},   {16, 512},  {40, 1280},  {8, 5376},
                                            {4104, 5376}, {64, 8192}, {24, 16384}, {24, 21504}};
    for (size_t i = 0; i < sizeof q4k_shapes / sizeof q4k_shapes[0]; i++)
        check_tiles(GEM_GGUF_Q4_K, q4k_shapes[i][0], q4k_shapes[i][1], 3100 + i);
    check_tiles_properties(GEM_GGUF_Q4_K);
    /* Q6_K tiles: the same split as Q4_K's, the same shapes */
    for (size_t i = 0; i < sizeof q4k_shapes / sizeof q4k_shapes[0]; i++)
        check_tiles(GEM_GGUF_Q6_K, q4k_shapes[i][0], q4k_shapes[i][1], 3200 + i);
    check_tiles_properties(GEM_GGUF_Q6_K);
    /* Q8_0 tiles: Q4_0's shapes; at most 6 chunks a warp, so 1 to 16 warps a tile, a warp past
     * the tile's chunks (42 chunks on 8 warps of 6) and partial batches of two */
    for (size_t i = 0; i < sizeof tile_shapes / sizeof tile_shapes[0]; i++)
        check_tiles(GEM_GGUF_Q8_0, tile_shapes[i][0], tile_shapes[i][1], 3300 + i);
    check_tiles_properties(GEM_GGUF_Q8_0);
    /* BF16 tiles: Q4_0's shapes; at most 3 chunks a warp, so 1 to 16 warps a tile and warps
     * past the tile's chunks (42 chunks on 16 warps of 3) */
    for (size_t i = 0; i < sizeof tile_shapes / sizeof tile_shapes[0]; i++)
        check_tiles(GEM_GGUF_BF16, tile_shapes[i][0], tile_shapes[i][1], 3400 + i);
    check_tiles_properties(GEM_GGUF_BF16);
    return tcheck_summary("test_cuda_matvec");
}
