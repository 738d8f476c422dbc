/*
dev/cpu/dot_shapes: how fast the fused route's score loop runs for each register blocking of
query heads x key rows, with its operands in L1 or L2 and no memory beyond.

The library's scores for Gemma 4's full layers (cpu_kernels.c, dot_8x2) take 8 query heads x 2
key rows a step: 2 K and 8 q loads of 16 floats and 16 FMAs into 16 accumulators, each dot then
reduced by hsum16's tree. llvm-mca (Sapphire Rapids model) gives the loop 8 cycles a step, the
FMA ports' bound; dev/cpu/fused_parts measures the score part at 4.1-4.6 G FMA instructions a
second on one thread of a 2-vCPU Xeon whose dev/cpu/core_probe reaches 7.26 from registers. This
program asks whether the blocking sets that rate: the same loop for 8x2, 4x4, 8x3, 4x6 and 2x8
(heads x rows; every accumulator a register, every K and q vector loaded once a step), each call
one block of rows at D 512 with its dots summed per lane and then across lanes.

Checks first (exit 1 on a failure): every dot of every shape within 1e-5 of the double dot of
the same float inputs, relative to the sum of |q k|. Timing: rounds A B .. B A over the shapes,
per shape the median over rounds of G FMA instructions a second; "L1" reuses one block of rows
(at most 8 rows, 16 KiB, beside q's 16 KiB), "L2" steps through 256 rows (512 KiB) a call at a
time.

Prediction (the 2-vCPU Xeon, one thread): if the FMA ports bound the loop, every shape runs near
7 G/s in L1; if its loads do, the shapes with fewer loads an FMA (8x3: 0.46, 4x6: 0.42, against
8x2's 0.63) run up to a third faster.

2-vCPU Xeon (results/cpu/xeon-2vcpu/dot-shapes.txt; core_probe 6.77 G/s in the same minutes):
in L1 8x2 4.45 G/s, 4x4 4.69, 8x3 4.56, 4x6 4.77, 2x8 4.46; in L2 4.12 / 4.13 / 4.32 / 4.09 /
3.46. No shape is near the ports' bound, and fewer loads an FMA buy at most 7% (L1) or 5% (L2):
the blocking is not what holds the loop at two thirds of the FMA rate.

usage: dot_shapes [--reps N] [--rounds R]
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#define D 512
#define L2_ROWS 256
#define MAX_ROUNDS 32

/* dot (h, t) of q rows h (D floats each, consecutive) and k rows t (D floats each,
 * consecutive) into out[h * T + t]: per lane in D / 16 steps, then across lanes. */
#define DOT_SHAPE(H, T)                                                                        \
    static __attribute__((noinline)) void dot_##H##x##T(const float *q, const float *k,      \
                                                        float *out)                           \
    {                                                                                         \
        __m512 acc[H][T];                                                                     \
        for (int a = 0; a < H; a++)                                                           \
            for (int b = 0; b < T; b++)                                                       \
                acc[a][b] = _mm512_setzero_ps();                                              \
        _Pragma("GCC unroll 2") for (int i = 0; i < D; i += 16)                               \
        {                                                                                     \
            __m512 kv[T];                                                                     \
            for (int t = 0; t < T; t++) {                                                     \
                kv[t] = _mm512_loadu_ps(k + t * D + i);                                       \
                __asm__("" : "+v"(kv[t])); /* one load a K vector (as the library) */         \
            }                                                                                 \
            for (int h = 0; h < H; h++) {                                                     \
                __m512 qv = _mm512_loadu_ps(q + h * D + i);                                   \
                __asm__("" : "+v"(qv)); /* one load a q vector */                             \
                for (int t = 0; t < T; t++)                                                   \
                    acc[h][t] = _mm512_fmadd_ps(qv, kv[t], acc[h][t]);                        \
            }                                                                                 \
        }                                                                                     \
        for (int a = 0; a < H; a++)                                                           \
            for (int b = 0; b < T; b++)                                                       \
                out[a * T + b] = _mm512_reduce_add_ps(acc[a][b]);                             \
    }

DOT_SHAPE(8, 2)
DOT_SHAPE(4, 4)
DOT_SHAPE(8, 3)
DOT_SHAPE(4, 6)
DOT_SHAPE(2, 8)

typedef struct {
    const char *name;
    void (*fn)(const float *, const float *, float *);
    int heads, rows;
} shape;

static const shape shapes[] = {{"8x2", dot_8x2, 8, 2}, {"4x4", dot_4x4, 4, 4},
                               {"8x3", dot_8x3, 8, 3}, {"4x6", dot_4x6, 4, 6},
                               {"2x8", dot_2x8, 2, 8}};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

/* Every dot of shape s over the first rows of k within 1e-5 of the double dot, relative to
 * sum |q k|. q (8 x D), k (8 x D). Returns 0 when all pass. */
static int check(const shape *s, const float *q, const float *k)
{
    float out[64];
    s->fn(q, k, out);
    for (int h = 0; h < s->heads; h++)
        for (int t = 0; t < s->rows; t++) {
            double ref = 0.0, mag = 0.0;
            for (int i = 0; i < D; i++) {
                ref += (double)q[h * D + i] * (double)k[t * D + i];
                mag += fabs((double)q[h * D + i] * (double)k[t * D + i]);
            }
            const double err = fabs((double)out[h * s->rows + t] - ref);
            if (!(err <= 1e-5 * mag)) {
                fprintf(stderr, "check failed: shape %s dot (%d, %d) = %.9g, double %.9g\n",
                        s->name, h, t, (double)out[h * s->rows + t], ref);
                return 1;
            }
        }
    return 0;
}

/* G FMA instructions a second of reps calls of shape s; l2: step through L2_ROWS rows of k. */
static double time_shape(const shape *s, const float *q, const float *k, long reps, int l2,
                         float *sink)
{
    float out[64];
    const int64_t steps = l2 ? L2_ROWS / s->rows : 1;
    const double t0 = now_s();
    for (long r = 0; r < reps; r++)
        s->fn(q, k + (int64_t)(r % steps) * s->rows * D, out);
    const double dt = now_s() - t0;
    *sink += out[0];
    return (double)reps * s->heads * s->rows * (D / 16) / dt / 1e9;
}

int main(int argc, char **argv)
{
    long reps = 2000000;
    int rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = (int)strtol(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: dot_shapes [--reps N] [--rounds R]\n");
            return 2;
        }
    }
    if (reps < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "dot_shapes: --reps must be >= 1 and --rounds 1 .. %d\n", MAX_ROUNDS);
        return 2;
    }
    float *q = aligned_alloc(64, 8 * D * sizeof(float));
    float *k = aligned_alloc(64, (size_t)L2_ROWS * D * sizeof(float));
    if (!q || !k) {
        fprintf(stderr, "dot_shapes: out of memory\n");
        return 1;
    }
    uint64_t st = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 8 * D; i++)
        q[i] = (float)((int64_t)(dev_xorshift(&st) % 2001) - 1000) / 1000.0f;
    for (int64_t i = 0; i < (int64_t)L2_ROWS * D; i++)
        k[i] = (float)((int64_t)(dev_xorshift(&st) % 2001) - 1000) / 1000.0f;
    for (int s = 0; s < NSHAPES; s++)
        if (check(&shapes[s], q, k) != 0)
            return 1;
    printf("checks: every dot of every shape within 1e-5 of the double dot\n");
    printf("%ld calls a sample, %d rounds A B .. B A; G FMA instructions a second (median, "
           "min, max)\n",
           reps, rounds);
    float sink = 0.0f;
    for (int l2 = 0; l2 < 2; l2++) {
        double g[NSHAPES][MAX_ROUNDS];
        for (int r = 0; r < rounds; r++)
            for (int j = 0; j < NSHAPES; j++) {
                const int s = r % 2 ? NSHAPES - 1 - j : j;
                g[s][r] = time_shape(&shapes[s], q, k, l2 ? reps / 8 : reps, l2, &sink);
            }
        for (int s = 0; s < NSHAPES; s++) {
            qsort(g[s], (size_t)rounds, sizeof(double), cmp_d);
            printf("%s  %s  loads an FMA %.2f  %.2f  (%.2f, %.2f)\n", l2 ? "L2" : "L1",
                   shapes[s].name,
                   (double)(shapes[s].heads + shapes[s].rows) /
                       (shapes[s].heads * shapes[s].rows),
                   g[s][rounds / 2], g[s][0], g[s][rounds - 1]);
        }
    }
    free(q);
    free(k);
    return sink == 12345.0f ? 3 : 0; /* keeps the results live */
}
#else
int main(void)
{
    printf("dot_shapes: needs AVX-512 (this build has none); nothing to measure\n");
    return 0;
}
#endif
