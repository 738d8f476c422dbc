/*
model_matvec: the device matrix-vector products (src/model/cuda/matvec.cu) at the Gemma 4 31B
shapes, against the device's streaming-read bandwidth measured in the same process.

First every type is validated: gem_dmv on seeded rows (gem_gguf_quantize of seeded floats, 1280
and 5376 columns) against the double dot product of gem_gguf_dequant's values (|y - ref| <=
1e-5 * sum|w x|; Q4_K: its sub-blocks' |d1| sum|n x| + |m1| sum|x|), and gem_dmv_geglu against
gelu_tanh(gate) * up of gem_dmv's products; any failure ends the program with status 1.

Then the read probe (the library's, gem_harness_cuda_ops.read_bandwidth over 4 GiB: the best
of its configurations) and, for each shape and type, the product timed with CUDA events: one
event before each launch, launches queued behind a spin kernel so that they run back to back
as in a decode loop, rotating over enough copies of the matrix (seeded with
gem_dmatrix_fill_random) that their bytes exceed 4 x the 50 MiB L2. Each line gives the median
and the 10th / 90th percentiles of the per-launch times over --reps launches, and the read
rate (the matrices' bytes plus x and y over the median) with its fraction of the probe.

Shapes (rows x cols): q 8192 x 5376, k 4096 x 5376, o 5376 x 8192, gate+up 21504 x 5376 (two
matrices, gem_dmv_geglu), down 5376 x 21504, head 262144 x 5376, and q+k+v 8192/4096/4096 x
5376 (gem_dmv_multi). Types: Q4_0 Q4_K Q8_0 BF16 F16 F32 Q6_K. With --slots, the plain products
also run with 1 and 4 rows per warp (gem_dmv_slots; the library uses 2).

Q4_0 is also timed in tiles (GEM_DLAYOUT_Q4_0_TILES, the tensor-core product of
src/model/cuda/matvec_tiles.cu; validated against its own bound), and every line adds a chain:
the same launches with events around the chain alone, where programmatic dependent launches
overlap as in the decoder.

./model_matvec [--reps R] [--slots] [--types q4_0,q4_k,...] [--quick]

H200 (132 SMs, probe 4.64 TB/s), 2 rows per warp, fraction of the probe (q / k / o / gate+up /
down / head / q+k+v): BF16 68 / 50 / 50 / 78 / 74 / 89 / 76 %, F16 the same, F32 71 / 65 /
74 / 86 / 68 / 91 / 78 %, Q8_0 33 / 28 / 43 / 63 / 39 / 69 / 48 %, Q6_K 25 / 23 / 29 / 38 /
38 / 42 / 30 %, Q4_0 21 / 18 / 23 / 34 / 30 / 37 / 25 %, Q4_K 19 / 17 / 21 / 30 / 28 / 32 /
23 %. The 4-bit kernels are issue-bound, not memory-bound: ncu on Q4_0 at 8192 x 5376 gave
0.27 warp instructions per weight (the dequantize-and-dot loop alone about 5 lane
instructions per weight), 22 of 64 warps resident, 8.5 cycles per issued instruction per
warp with "not selected", long-scoreboard and math-pipe-throttle the leading stalls. The 4096-
row matrices are short kernels (10 to 20 us) dominated by the ramp.

Q4_0 in tiles (H200 run 28, per launch; results/h200/run28/dev-model-matvec.txt): q 32.7%, k
24.7%, o 31.5%, gate+up 58.8%, down 48.5%, head 80.5%, q+k+v 47.2% of the probe (the file-order
kernel: 21.6 / 18.4 / 23.6 / 34.3 / 30.9 / 37.4 / 26.0%); chained (run 29) q 37.9%, o 42.6%,
q+k+v 46.7%. The layer matrices keep about 10 us a call outside their bandwidth.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common.h"
#include "gem/gguf.h"
#include "harness.h"
#include "model/cuda/model_cuda.h"

/* src/model/cuda/matvec.cu: gem_dmv with 1, 2 or 4 rows per warp */
extern "C" gem_status gem_dmv_slots(const gem_dmatrix *w, const float *x, float *y, void *stream,
                                    int slots);

static float f16_at(const uint8_t *p) { return gem_gguf_f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }

/* ---- validation ------------------------------------------------------------------------------ */

/* The error scale of row `row` (rb bytes) of `type`: sum|w x|, for Q4_K the per-sub-block
 * |d1| sum|n x| + |m1| sum|x|. w (cols): the row's dequantized values. */
static double magnitude(gem_gguf_type type, const uint8_t *row, const float *w, const float *x,
                        int64_t cols)
{
    double m = 0;
    if (type != GEM_GGUF_Q4_K) {
        for (int64_t i = 0; i < cols; i++)
            m += fabs((double)w[i] * (double)x[i]);
        return m;
    }
    for (int64_t b = 0; b < cols / 256; b++) {
        const uint8_t *blk = row + 144 * b, *sc = blk + 4, *q = blk + 16;
        const double d = f16_at(blk), dmin = f16_at(blk + 2);
        for (int s = 0; s < 8; s++) {
            const int scale = s < 4 ? sc[s] & 63 : (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
            const int mn = s < 4 ? sc[s + 4] & 63 : (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
            for (int l = 0; l < 32; l++) {
                const int n = s & 1 ? q[32 * (s / 2) + l] >> 4 : q[32 * (s / 2) + l] & 0xF;
                const double xv = fabs((double)x[256 * b + 32 * s + l]);
                m += fabs(d * scale) * n * xv + fabs(dmin * mn) * xv;
            }
        }
    }
    return m;
}

static float gelu_ref(float g)
{
    const double a = g;
    return (float)(0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))));
}

/* The bound of a tiled Q4_0 product (src/model/cuda/matvec_tiles.cu): 4e-6 (sum|w x| +
 * sum_b M_b W_b / 32) + 2^-26 sum_b M_b W_b, M_b = max|x|, W_b = sum|w| over block b. */
static double tiles_bound(const float *w, const float *x, int64_t cols)
{
    double wx = 0, mw = 0;
    for (int64_t b = 0; b < cols / 32; b++) {
        double m = 0, sw = 0;
        for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
            wx += fabs((double)w[k] * (double)x[k]);
            m = fmax(m, fabs((double)x[k]));
            sw += fabs((double)w[k]);
        }
        mw += m * sw;
    }
    return 4e-6 * (wx + mw / 32) + 0x1p-26 * mw;
}

/* 0 when gem_dmv and gem_dmv_geglu of `type` at rows x cols pass; prints the worst error.
 * tiles: the matrices in GEM_DLAYOUT_Q4_0_TILES, the error over tiles_bound. */
static int validate(gem_gguf_type type, int64_t rows, int64_t cols, int tiles)
{
    size_t rb = 0;
    GEM_TRY(gem_gguf_row_bytes(type, cols, &rb));
    const size_t bytes = (size_t)rows * rb;
    uint8_t *hw = (uint8_t *)malloc(2 * bytes);
    float *src = (float *)malloc((size_t)cols * 4), *deq = (float *)malloc((size_t)rows * cols * 4);
    float *x = (float *)malloc((size_t)cols * 4), *y = (float *)malloc((size_t)rows * 4);
    float *yu = (float *)malloc((size_t)rows * 4), *yg = (float *)malloc((size_t)rows * 4);
    fill(x, (size_t)cols, 7);
    for (int64_t r = 0; r < 2 * rows; r++) {
        fill(src, (size_t)cols, 1000 + (uint64_t)r);
        for (int64_t i = 0; i < cols; i++)
            src[i] *= ldexpf(1.0f, (int)(r % 5) - 2);
        GEM_TRY(gem_gguf_quantize(type, src, hw + (size_t)r * rb, cols));
    }
    for (int64_t r = 0; r < rows; r++)
        GEM_TRY(gem_gguf_dequant(type, hw + (size_t)r * rb, deq + (size_t)r * cols, cols));
    void *dw;
    float *dx, *dy;
    cudaCheck(cudaMalloc(&dw, 2 * bytes));
    cudaCheck(cudaMalloc((void **)&dx, (size_t)cols * 4));
    cudaCheck(cudaMalloc((void **)&dy, (size_t)rows * 4));
    cudaCheck(cudaMemcpy(dw, hw, 2 * bytes, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(dx, x, (size_t)cols * 4, cudaMemcpyHostToDevice));
    gem_dmatrix wg = {dw, type, rows, cols, rb, GEM_DLAYOUT_ROWS};
    gem_dmatrix wu = {(uint8_t *)dw + bytes, type, rows, cols, rb, GEM_DLAYOUT_ROWS};
    void *xq = NULL, *dt = NULL;
    cudaCheck(cudaMalloc(&xq, gem_dmv_xq_bytes(cols) + 16));
    if (tiles) {
        cudaCheck(cudaMalloc(&dt, 2 * bytes));
        const void *src_g = wg.data, *src_u = wu.data;
        wg.data = dt;
        wu.data = (uint8_t *)dt + bytes;
        GEM_TRY(gem_dmatrix_tile(&wg, src_g, NULL));
        GEM_TRY(gem_dmatrix_tile(&wu, src_u, NULL));
    }
    GEM_TRY(gem_dmv(&wg, dx, dy, xq, NULL));
    cudaCheck(cudaMemcpy(y, dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    GEM_TRY(gem_dmv(&wu, dx, dy, xq, NULL));
    cudaCheck(cudaMemcpy(yu, dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    GEM_TRY(gem_dmv_geglu(&wg, &wu, dx, dy, xq, NULL));
    cudaCheck(cudaMemcpy(yg, dy, (size_t)rows * 4, cudaMemcpyDeviceToHost));
    double worst = 0, worst_geglu = 0;
    for (int64_t r = 0; r < rows; r++) {
        double ref = 0;
        for (int64_t i = 0; i < cols; i++)
            ref += (double)deq[(size_t)r * cols + i] * (double)x[i];
        const double mag = tiles ? tiles_bound(deq + (size_t)r * cols, x, cols) * 1e5
                                 : magnitude(type, hw + (size_t)r * rb, deq + (size_t)r * cols, x, cols);
        const double e = fabs((double)y[r] - ref) / (mag + 1e-30);
        worst = e > worst || e != e ? e : worst;
        const double g = (double)gelu_ref(y[r]) * (double)yu[r];
        const double eg = fabs((double)yg[r] - g) / (fabs((double)y[r] * (double)yu[r]) + 1e-35);
        worst_geglu = eg > worst_geglu || eg != eg ? eg : worst_geglu;
    }
    const int ok = worst <= 1e-5 && worst_geglu <= 4e-6;
    printf("validate %-5s %-5s %6lld x %-5lld  max |y - ref| / scale %.2e  geglu %.2e  %s\n",
           gem_gguf_type_name(type), tiles ? "tiles" : "rows", (long long)rows, (long long)cols,
           worst, worst_geglu, ok ? "ok" : "FAILED");
    cudaCheck(cudaFree(xq));
    if (dt)
        cudaCheck(cudaFree(dt));
    cudaCheck(cudaFree(dw));
    cudaCheck(cudaFree(dx));
    cudaCheck(cudaFree(dy));
    free(hw), free(src), free(deq), free(x), free(y), free(yu), free(yg);
    return ok ? 0 : 1;
}

/* ---- timing ---------------------------------------------------------------------------------- */

enum { OP_DMV, OP_GEGLU, OP_MULTI };

typedef struct shape {
    const char *name;
    int op;
    int64_t rows[3]; /* OP_MULTI: three matrices; OP_GEGLU: gate and up of rows[0] */
    int64_t cols;
} shape;

static const shape shapes[] = {
    {"q", OP_DMV, {8192}, 5376},
    {"k", OP_DMV, {4096}, 5376},
    {"o", OP_DMV, {5376}, 8192},
    {"gate+up", OP_GEGLU, {21504}, 5376},
    {"down", OP_DMV, {5376}, 21504},
    {"head", OP_DMV, {262144}, 5376},
    {"q+k+v", OP_MULTI, {8192, 4096, 4096}, 5376},
};

static const gem_gguf_type bench_types[] = {GEM_GGUF_Q4_0, GEM_GGUF_Q4_K, GEM_GGUF_Q8_0,
                                            GEM_GGUF_BF16, GEM_GGUF_F16,  GEM_GGUF_F32,
                                            GEM_GGUF_Q6_K};

/* Times `op` over `reps` launches rotating over ncopies sets of matrices; times (reps) in
 * seconds. slots: 0 for the library's choice, else gem_dmv_slots. */
static void time_op(const shape *s, gem_dmatrix (*sets)[3], int ncopies, const float *dx,
                    float *const *dy, void *xq, int reps, int slots, double *times, double *chain)
{
    cudaEvent_t *ev = (cudaEvent_t *)malloc((size_t)(reps + 1) * sizeof(cudaEvent_t));
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventCreate(&ev[r]));
    /* passes: a warm-up, the measured one (an event before every launch), and a chain (events
     * before the first and after the last launch alone, as in a decode loop: launches that
     * start early, programmatic dependents, overlap) */
    for (int pass = 0; pass < 3; pass++) {
        const int measured = pass == 1, chained = pass == 2;
        wait_kernel<<<1, 1>>>(pass ? 20000000ull : 1000ull);
        cudaCheck(cudaGetLastError());
        if (chained)
            cudaCheck(cudaEventRecord(ev[0], 0));
        for (int r = 0; r < reps; r++) {
            gem_dmatrix *m = sets[r % ncopies];
            if (measured)
                cudaCheck(cudaEventRecord(ev[r], 0));
            if (s->op == OP_DMV)
                GEM_TRY(slots ? gem_dmv_slots(&m[0], dx, dy[0], NULL, slots)
                              : gem_dmv(&m[0], dx, dy[0], xq, NULL));
            else if (s->op == OP_GEGLU)
                GEM_TRY(gem_dmv_geglu(&m[0], &m[1], dx, dy[0], xq, NULL));
            else {
                const gem_dmatrix *w[3] = {&m[0], &m[1], &m[2]};
                GEM_TRY(gem_dmv_multi(3, w, dx, dy, xq, NULL));
            }
        }
        if (measured || chained)
            cudaCheck(cudaEventRecord(ev[reps], 0));
        cudaCheck(cudaDeviceSynchronize());
        if (chained) {
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, ev[0], ev[reps]));
            *chain = ms * 1e-3 / reps;
        }
        if (measured) { /* keep the measured pass's intervals before the chain reuses ev */
            for (int r = 0; r < reps; r++) {
                float ms = 0;
                cudaCheck(cudaEventElapsedTime(&ms, ev[r], ev[r + 1]));
                times[r] = ms * 1e-3;
            }
        }
    }
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventDestroy(ev[r]));
    free(ev);
}

static int type_selected(const char *list, gem_gguf_type t)
{
    if (!list)
        return 1;
    const char *name = gem_gguf_type_name(t);
    const size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    int reps = 100, slots_axis = 0, quick = 0;
    const char *types = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--slots"))
            slots_axis = 1;
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--types") && i + 1 < argc)
            types = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--reps R] [--slots] [--types q4_0,...] [--quick]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 5)
        reps = 5;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20);

    int failed = 0;
    for (size_t k = 0; k < sizeof bench_types / sizeof bench_types[0]; k++) {
        failed |= validate(bench_types[k], 64, 1280, 0);
        failed |= validate(bench_types[k], 64, 5376, 0);
    }
    failed |= validate(GEM_GGUF_Q4_0, 64, 1280, 1);
    failed |= validate(GEM_GGUF_Q4_0, 64, 5376, 1);
    failed |= validate(GEM_GGUF_Q4_0, 64, 21504, 1);
    if (failed) {
        printf("validation FAILED: no timings\n");
        return 1;
    }

    void *hx = NULL;
    GEM_TRY(gem_harness_cuda_ops.open(&hx));
    double probe = 0;
    GEM_TRY(gem_harness_cuda_ops.read_bandwidth(hx, 0, (size_t)4 << 30, 20, &probe));
    printf("read probe: %.1f GB/s (4 GiB, best configuration, median of 20)\n\n", probe * 1e-9);
    printf("%-8s %-5s %-5s %5s %9s %9s %9s %9s %8s %6s %9s %6s\n", "shape", "type", "order",
           "slots", "MB", "median_us", "p10_us", "p90_us", "GB/s", "probe", "chain_us", "probe");

    const size_t footprint = (size_t)4 * 50 << 20; /* bytes the copies cover at least */
    double *times = (double *)malloc((size_t)reps * sizeof(double));
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *s = &shapes[si];
        const int nmat = s->op == OP_MULTI ? 3 : s->op == OP_GEGLU ? 2 : 1;
        for (size_t k = 0; k < sizeof bench_types / sizeof bench_types[0]; k++) {
            const gem_gguf_type t = bench_types[k];
            if (!type_selected(types, t) || (quick && t != GEM_GGUF_Q4_0 && t != GEM_GGUF_Q4_K &&
                                             t != GEM_GGUF_BF16))
                continue;
            for (int tiles = 0; tiles <= 1; tiles++) {
                int all_tile = 1;
                for (int i = 0; i < nmat; i++)
                    all_tile &= gem_dmatrix_tiles_ok(t, s->op == OP_GEGLU ? s->rows[0] : s->rows[i],
                                                     s->cols);
                if (tiles && !all_tile)
                    continue;
                size_t rb = 0, set_bytes = 0;
                GEM_TRY(gem_gguf_row_bytes(t, s->cols, &rb));
                for (int i = 0; i < nmat; i++)
                    set_bytes += (size_t)(s->op == OP_GEGLU ? s->rows[0] : s->rows[i]) * rb;
                int ncopies = (int)((footprint + set_bytes - 1) / set_bytes);
                ncopies = ncopies < 2 ? 2 : ncopies > 64 ? 64 : ncopies;
                gem_dmatrix(*sets)[3] = (gem_dmatrix(*)[3])calloc((size_t)ncopies, sizeof *sets);
                for (int c = 0; c < ncopies; c++)
                    for (int i = 0; i < nmat; i++) {
                        const int64_t rows = s->op == OP_GEGLU ? s->rows[0] : s->rows[i];
                        gem_dmatrix *m = &sets[c][i];
                        *m = (gem_dmatrix){NULL, t, rows, s->cols, rb, GEM_DLAYOUT_ROWS};
                        cudaCheck(cudaMalloc(&m->data, (size_t)rows * rb));
                        if (tiles) { /* the same random rows, tiled */
                            void *tmp;
                            cudaCheck(cudaMalloc(&tmp, (size_t)rows * rb));
                            gem_dmatrix r = *m;
                            r.data = tmp;
                            GEM_TRY(gem_dmatrix_fill_random(&r, 1 + 3 * (uint64_t)c + (uint64_t)i,
                                                            1.0f / sqrtf((float)s->cols), NULL));
                            GEM_TRY(gem_dmatrix_tile(m, tmp, NULL));
                            cudaCheck(cudaDeviceSynchronize());
                            cudaCheck(cudaFree(tmp));
                        } else {
                            GEM_TRY(gem_dmatrix_fill_random(m, 1 + 3 * (uint64_t)c + (uint64_t)i,
                                                            1.0f / sqrtf((float)s->cols), NULL));
                        }
                    }
                float *dx, *dy[3], *hx_vec = (float *)malloc((size_t)s->cols * 4);
                fill(hx_vec, (size_t)s->cols, 99);
                cudaCheck(cudaMalloc((void **)&dx, (size_t)s->cols * 4));
                cudaCheck(cudaMemcpy(dx, hx_vec, (size_t)s->cols * 4, cudaMemcpyHostToDevice));
                int64_t out_rows = 0;
                for (int i = 0; i < 3; i++) {
                    const int64_t rows = i < nmat && s->op != OP_GEGLU ? s->rows[i] : s->rows[0];
                    cudaCheck(cudaMalloc((void **)&dy[i], (size_t)rows * 4));
                    out_rows += i < nmat && (s->op != OP_GEGLU || i == 0) ? rows : 0;
                }
                const double moved = (double)set_bytes + 4.0 * (double)s->cols + 4.0 * (double)out_rows;
                const int r_here = s->rows[0] >= 100000 ? (reps < 30 ? reps : 30) : reps;
                void *xq;
                cudaCheck(cudaMalloc(&xq, gem_dmv_xq_bytes(s->cols) + 16));
                for (int slots = 0; slots <= (slots_axis && !tiles && s->op == OP_DMV ? 4 : 0);
                     slots = slots == 0 ? 1 : slots * 4) {
                    double chain = 0;
                    time_op(s, sets, ncopies, dx, dy, xq, r_here, slots, times, &chain);
                    qsort(times, (size_t)r_here, sizeof(double), cmp_double);
                    const double med = times[r_here / 2], p10 = times[r_here / 10],
                                 p90 = times[r_here - 1 - r_here / 10];
                    printf("%-8s %-5s %-5s %5s %9.1f %9.2f %9.2f %9.2f %8.1f %5.1f%% %9.2f %5.1f%%\n",
                           s->name, gem_gguf_type_name(t), tiles ? "tiles" : "rows",
                           tiles ? "-" : slots ? (slots == 1 ? "1" : "4") : "2",
                           set_bytes * 1e-6, med * 1e6, p10 * 1e6, p90 * 1e6, moved / med * 1e-9,
                           100.0 * moved / med / probe, chain * 1e6,
                           100.0 * moved / chain / probe);
                    fflush(stdout);
                }
                for (int c = 0; c < ncopies; c++)
                    for (int i = 0; i < nmat; i++)
                        cudaCheck(cudaFree(sets[c][i].data));
                free(sets);
                cudaCheck(cudaFree(dx));
                cudaCheck(cudaFree(xq));
                for (int i = 0; i < 3; i++)
                    cudaCheck(cudaFree(dy[i]));
                free(hx_vec);
            }
        }
    }
    free(times);
    gem_harness_cuda_ops.close(hx);
    return 0;
}
