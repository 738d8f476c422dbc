/*
dev/cpu/mv_int8: the CPU decoder's Q8_0, Q4_0, Q4_K and Q6_K products, in F32 or in integers.

Two versions of one product, both the library's (src/model/matvec.c), for the type --type
(q8_0, the default, q4_0, q4_k or q6_k; the figures below are Q8_0's):
  f32   the matrix as the file holds it: each weight dequantized (q * d, exact) and
        multiplied into 64 F32 lanes by an FMA, per 16 weights a widening, a conversion, a
        product by d and the FMA (the F32 rule of matvec.h)
  int8  the matrix packed in 16-row groups (mv_pack) and x as four 8-bit digits a block
        (matvec.h's integer products): per 512 weights 32 vpdpbusd (AVX512-VNNI; without it
        AVX2's vpmaddubsw and vpmaddwd, gem_model_cpu_products_isa) and 13 vector
        operations for the scales, one F32 accumulator a row

Each version is first checked against a double sum of the same dequantized weights, within
matvec.h's bound for the integer products (four F32 roundings a block of sum |w x|, five for
Q4_K, eight for Q6_K, 2^-27 of each block's largest |x|; four times that for Q4_K, whose two terms a sub-block
are each larger than their sum) and a float rounding per element of sum |w x| for the F32 rule; the
integer version's rows must also match mv_rows on any thread count. Then A B B A rounds of:
  hot     one thread, one matrix of the 2gb preset's shape that fits the L2 (256 rows x 1024)
  dram    one thread, a stream of --mib MiB of such matrices (every byte from DRAM)
  token   every thread, the products of --layers layers of the 2gb preset (q, k, v, o, gate, up,
          down; 33.4 MB a layer) as the decoder runs them (mv_batch)
reporting median, min and max ms and GB/s for each, and their ratio.

The matrices are random floats quantized to the type (gem_gguf_quantize), their bytes per row
the type's.

usage: mv_int8 [--threads N] [--rounds R] [--mib M] [--layers L] [--type q8_0|q4_0|q4_k|q6_k]
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "cpu_memory.h"
#include "cpu_pool.h"
#include "gem/engine.h"
#include "gem/model.h"
#include "matvec.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next_u64(void) { return dev_xorshift(&rng); }

static void *must_alloc(size_t bytes)
{
    void *p = NULL;
    if (cpu_stream_alloc(bytes, 0, &p) != GEM_OK) {
        fprintf(stderr, "mv_int8: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static gem_gguf_type type = GEM_GGUF_Q8_0; /* --type */

/* rows x cols of random floats quantized to `type`, and the packed copy: m[0] as the file
 * holds it, m[1] packed. */
static void q_pair(int64_t rows, int64_t cols, gem_matrix m[2])
{
    size_t rb = 0;
    if (gem_gguf_row_bytes(type, cols, &rb) != GEM_OK) {
        fprintf(stderr, "mv_int8: %lld columns do not fit the type's blocks\n", (long long)cols);
        exit(1);
    }
    const size_t bytes = rb * (size_t)rows;
    uint8_t *d = must_alloc(bytes);
    float *src = malloc((size_t)cols * sizeof *src);
    if (!src)
        exit(1);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < cols; i++)
            src[i] = (float)((double)(next_u64() >> 11) * 0x1.0p-53 - 0.5) * 0.02f;
        gem_gguf_quantize(type, src, d + (size_t)r * rb, cols);
    }
    free(src);
    m[0] = (gem_matrix){d, type, rows, cols, rb, NULL, 0};
    m[1] = m[0];
    void *pk = must_alloc(bytes);
    mv_pack(&m[0], pk);
    m[1].packed = pk;
}

static mv_scratch xq;

/* Both versions of w against the double sum; the integer one against mv_rows on the pool. */
static int check(cpu_pool *pool, const gem_matrix m[2], const float *x)
{
    const int64_t rows = m[0].rows, cols = m[0].cols;
    float *y = malloc((size_t)rows * 4), *yr = malloc((size_t)rows * 4);
    float *w = malloc((size_t)cols * 4);
    int bad = 0;
    for (int v = 0; v < 2; v++) {
        if (mv(pool, &m[v], x, &xq, y) != GEM_OK || mv_rows(&m[v], x, &xq, yr, 0, rows) != GEM_OK)
            return 1;
        bad += memcmp(y, yr, (size_t)rows * 4) != 0;
        for (int64_t r = 0; r < rows; r++) {
            gem_gguf_dequant(type, (const uint8_t *)m[0].data + (size_t)r * m[0].row_bytes, w,
                             cols);
            double exact = 0.0, mag = 0.0, rep = 0.0;
            for (int64_t b = 0; b < cols / 32; b++) {
                double mx = 0.0, sw = 0.0;
                for (int i = 0; i < 32; i++) {
                    const int64_t e = 32 * b + i;
                    exact += (double)w[e] * x[e];
                    mag += fabs((double)w[e] * x[e]);
                    mx = fmax(mx, fabs((double)x[e]));
                    sw += fabs((double)w[e]);
                }
                rep += ldexp(mx, -27) * sw;
            }
            /* Q4_K's integer products sum d1 n x and dm1 x apart (matvec.h), each up to about
             * twice |w x| for these weights: four times the bound */
            const double k = type == GEM_GGUF_Q4_K ? 4.0 : 1.0;
            const double per = type == GEM_GGUF_Q6_K ? 8.0 : 5.0; /* roundings a block */
            const double tol = v ? k * ((per * (double)(cols / 32) + 4) * ldexp(1.0, -24) * mag + rep)
                                 : (double)(cols + 64) * ldexp(1.0, -24) * mag;
            bad += !(fabs((double)y[r] - exact) <= tol);
        }
    }
    free(y);
    free(yr);
    free(w);
    return bad;
}

typedef struct series {
    double t[2][64];
    int n[2];
} series;

static void report(const char *name, const series *s, double bytes)
{
    double med[2];
    for (int v = 0; v < 2; v++) {
        double t[64];
        memcpy(t, s->t[v], sizeof t);
        qsort(t, (size_t)s->n[v], sizeof t[0], cmp_d);
        med[v] = t[s->n[v] / 2];
        printf("%-6s %-5s %9.3f ms [%8.3f - %8.3f]  %7.2f GB/s\n", name, v ? "int8" : "f32",
               med[v] * 1e3, t[0] * 1e3, t[s->n[v] - 1] * 1e3, bytes / med[v] / 1e9);
    }
    printf("%-6s int8 / f32 %.3f\n", name, med[1] / med[0]);
}

int main(int argc, char **argv)
{
    int64_t threads = 0, rounds = 5, mib = 512, layers = 8;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            layers = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--type") && i + 1 < argc && !strcmp(argv[i + 1], "q8_0"))
            type = GEM_GGUF_Q8_0, i++;
        else if (!strcmp(argv[i], "--type") && i + 1 < argc && !strcmp(argv[i + 1], "q4_0"))
            type = GEM_GGUF_Q4_0, i++;
        else if (!strcmp(argv[i], "--type") && i + 1 < argc && !strcmp(argv[i + 1], "q4_k"))
            type = GEM_GGUF_Q4_K, i++;
        else if (!strcmp(argv[i], "--type") && i + 1 < argc && !strcmp(argv[i + 1], "q6_k"))
            type = GEM_GGUF_Q6_K, i++;
        else {
            fprintf(stderr, "usage: mv_int8 [--threads N] [--rounds R] [--mib M] [--layers L] "
                            "[--type q8_0|q4_0|q4_k|q6_k]\n");
            return 2;
        }
    }
    if (threads < 0 || rounds < 1 || rounds > 16 || mib < 1 || mib > 65536 || layers < 1 ||
        layers > 240) {
        fprintf(stderr, "mv_int8: threads >= 0, rounds 1..16, mib 1..65536, layers 1..240\n");
        return 2;
    }
    gem_engine *e = NULL;
    if (gem_engine_create(GEM_BACKEND_CPU, threads, &e) != GEM_OK) {
        fprintf(stderr, "mv_int8: no CPU engine\n");
        return 1;
    }
    threads = gem_engine_threads(e);
    cpu_pool *pool = NULL, *one = NULL;
    if (cpu_pool_create(threads, &pool) != GEM_OK || cpu_pool_create(1, &one) != GEM_OK) {
        fprintf(stderr, "mv_int8: no pool\n");
        return 1;
    }
    const char *isa = gem_model_cpu_products_isa();
    printf("mv_int8: %s, %lld threads, integer products %s\n", gem_gguf_type_name(type),
           (long long)threads, isa);
    xq.bytes = mv_xq_bytes(8192);
    xq.buf = aligned_alloc(64, xq.bytes);
    float *x = malloc(8192 * sizeof(float)), *y = malloc(65536 * sizeof(float));
    for (int i = 0; i < 8192; i++)
        x[i] = (float)(sin(0.37 * i) * (1.0 + (i % 13)));

    /* the shapes: hot (256 x 1024), dram (a stream of 4096 x 1024 matrices), token (the 2gb
     * preset's layer: q, k, v 8192 / 4096 / 4096 x 1024, o 1024 x 8192, gate and up 2048 x
     * 1024, down 1024 x 2048) */
    gem_matrix hot[2];
    q_pair(256, 1024, hot);
    size_t rb1024 = 0; /* bytes of a row of 1024 columns */
    (void)gem_gguf_row_bytes(type, 1024, &rb1024);
    const int64_t per = 4096 * (int64_t)rb1024;
    const int64_t nd = (mib << 20) / per > 0 ? (mib << 20) / per : 1;
    gem_matrix(*dram)[2] = malloc((size_t)nd * sizeof *dram);
    for (int64_t i = 0; i < nd; i++)
        q_pair(4096, 1024, dram[i]);
    gem_matrix(*tok)[7][2] = malloc((size_t)layers * sizeof *tok);
    const int64_t shp[7][2] = {{8192, 1024}, {4096, 1024}, {4096, 1024}, {1024, 8192},
                               {2048, 1024}, {2048, 1024}, {1024, 2048}};
    double tok_bytes = 0.0;
    for (int64_t l = 0; l < layers; l++)
        for (int k = 0; k < 7; k++) {
            q_pair(shp[k][0], shp[k][1], tok[l][k]);
            tok_bytes += (double)shp[k][0] * (double)tok[l][k][0].row_bytes;
        }
    int bad = check(one, hot, x) + check(pool, dram[0], x);
    for (int k = 0; k < 7; k++)
        bad += check(pool, tok[0][k], x);
    if (bad) {
        fprintf(stderr, "mv_int8: %d checks failed\n", bad);
        return 1;
    }
    printf("checks: both versions within their bounds of the double sums on 9 shapes; "
           "mv on %lld threads = mv_rows\n",
           (long long)threads);
    double bw = 0.0;
    if (gem_engine_read_bandwidth(e, (size_t)1 << 30, 5, &bw) != GEM_OK) {
        fprintf(stderr, "mv_int8: the read probe failed\n");
        return 1;
    }
    printf("read bandwidth %.2f GB/s (%lld threads)\n", bw / 1e9, (long long)threads);
    series sh = {0}, sd = {0}, st = {0};
    for (int64_t r = 0; r < rounds; r++)
        for (int k = 0; k < 4; k++) {
            const int v = k == 1 || k == 2; /* A B B A: f32 int8 int8 f32 */
            double best = 1e30;
            for (int rep = 0; rep < 50; rep++) {
                const double t0 = now_s();
                (void)mv(one, &hot[v], x, &xq, y);
                const double t = now_s() - t0;
                best = t < best ? t : best;
            }
            sh.t[v][sh.n[v]++] = best;
            double t0 = now_s();
            for (int64_t i = 0; i < nd; i++)
                (void)mv(one, &dram[i][v], x, &xq, y);
            sd.t[v][sd.n[v]++] = now_s() - t0;
            t0 = now_s();
            for (int64_t l = 0; l < layers; l++) {
                const gem_matrix *w3[3] = {&tok[l][0][v], &tok[l][1][v], &tok[l][2][v]};
                const float *x3[3] = {x, x, x};
                float *y3[3] = {y, y + 8192, y + 12288};
                (void)mv_batch(pool, 3, w3, x3, &xq, y3);
                (void)mv(pool, &tok[l][3][v], x, &xq, y);
                const gem_matrix *w2[2] = {&tok[l][4][v], &tok[l][5][v]};
                const float *x2[2] = {x, x};
                float *y2[2] = {y, y + 2048};
                (void)mv_batch(pool, 2, w2, x2, &xq, y2);
                (void)mv(pool, &tok[l][6][v], x, &xq, y);
            }
            st.t[v][st.n[v]++] = now_s() - t0;
        }
    printf("A B B A rounds: %lld; hot the best of 50 calls, dram %lld matrices (%.0f MB), token "
           "%lld layers (%.1f MB)\n",
           (long long)rounds, (long long)nd, (double)(nd * per) / 1e6, (long long)layers,
           tok_bytes / 1e6);
    report("hot", &sh, 256.0 * (double)rb1024);
    report("dram", &sd, (double)(nd * per));
    report("token", &st, tok_bytes);
    printf("token floor at the probe: %.3f ms\n", tok_bytes / bw * 1e3);
    return 0;
}
