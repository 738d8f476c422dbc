/*
dev/cpu/core_probe: what one thread of the machine computes when the others compute too.

On the H200 host (a KVM guest that reports 16 cores with one thread each) 16 threads run the
BF16 attention route from the L3 at 3.6 Gelem/s a thread, where one thread alone runs 3.3-5.6,
and taking uops out of the kernels did not move the 16-thread figure (results/h200/run82). Two
causes fit: the all-core AVX-512 clock, or vCPUs that are sibling hyperthreads on the host,
which share one core's FMA units. This program tells them apart with two loops that touch no
memory, run on T threads at once for T = 1, 2, 4, ... up to the processors:
  fma   16 independent chains of 16-lane FMAs (AVX-512; with AVX2 and FMA alone, 12 of 8
        lanes, which fit its 16 registers; else plain C): bound by the FMA units. Sibling hyperthreads halve it per thread; a lower clock lowers it by the clock.
  chain one dependent scalar FMA chain: bound by the FMA latency, so by the clock alone;
        siblings barely share it.
Predictions for the Xeon host: if its 16 vCPUs are 8 cores x 2 threads, fma per thread falls
by about 2x from 8 to 16 threads while chain holds within 10-20%; if it is the clock, both fall
together by 10-30%.

H200 host (results/h200/run83): neither. One thread: fma 5.11 G instructions/s, chain 0.661 G
steps/s (a 4-cycle latency: 2.64 GHz, so 1.93 FMAs a cycle, both units). fma a thread falls to
94% / 69% / 61% / 59% / 55% at 2 / 4 / 8 / 12 / 16 threads (45.2 G/s in all at 16), chain only
to 93% / 84% / 84% / 82% / 81%; from 8 to 16 threads both hold (98-100% in the second table), so
the vCPUs are not siblings. The 512-bit FMAs lose about a third more than the scalar clock as
cores are added: an AVX-512 clock below the scalar one (or a host that throttles them); at 16
threads a thread gets 1.3 FMAs a cycle of the scalar clock.

Each loop is checked first: x <- x * 0.5 + 1 has the fixed point 2, exact in float, and every
chain of every thread must end there (and at the scalar reference's value after few steps).
Then rounds in A B ... B A order over the thread counts; per count the median over rounds of
the slowest thread's time, reported as G FMA instructions a second (all threads, a thread) and
G chain steps a second a thread.

usage: core_probe [--iters N] [--rounds R] [--threads 1,2,4,8,12,16]
*/
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#define LANES 16
#define CHAINS 16
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define LANES 8
#define CHAINS 12 /* with the two constants, 14 of AVX2's 16 registers: no spill */
#else
#define LANES 8
#define CHAINS 16
#endif
#define MAX_COUNTS 16
#define MAX_THREADS 512

/* CHAINS x LANES floats after iters steps of x <- x * 0.5 + 1 from x0 (out: CHAINS*LANES). */
static void fma_loop(int64_t iters, float x0, float *out)
{
#if defined(__AVX512F__)
    __m512 acc[CHAINS];
    const __m512 a = _mm512_set1_ps(0.5f), b = _mm512_set1_ps(1.0f);
    for (int c = 0; c < CHAINS; c++)
        acc[c] = _mm512_set1_ps(x0 + (float)c);
    for (int64_t i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm512_fmadd_ps(acc[c], a, b);
    for (int c = 0; c < CHAINS; c++)
        _mm512_storeu_ps(out + c * LANES, acc[c]);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc[CHAINS];
    const __m256 a = _mm256_set1_ps(0.5f), b = _mm256_set1_ps(1.0f);
    for (int c = 0; c < CHAINS; c++)
        acc[c] = _mm256_set1_ps(x0 + (float)c);
    for (int64_t i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    for (int c = 0; c < CHAINS; c++)
        _mm256_storeu_ps(out + c * LANES, acc[c]);
#else
    float acc[CHAINS][LANES];
    for (int c = 0; c < CHAINS; c++)
        for (int l = 0; l < LANES; l++)
            acc[c][l] = x0 + (float)c;
    for (int64_t i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++)
            for (int l = 0; l < LANES; l++)
                acc[c][l] = fmaf(acc[c][l], 0.5f, 1.0f);
    memcpy(out, acc, sizeof acc);
#endif
}

/* One dependent chain of iters steps of the same map, in double (one FMA a step). */
static double chain_loop(int64_t iters, double x0)
{
    volatile double seed = x0; /* not folded at compile time */
    double x = seed;
    for (int64_t i = 0; i < iters; i++)
        x = fma(x, 0.5, 1.0);
    return x;
}

typedef struct shared {
    pthread_barrier_t start;
    int64_t iters;
    int kind; /* 0 fma, 1 chain */
} shared;

typedef struct worker {
    shared *s;
    int index;
    double seconds;
    float out[CHAINS * LANES];
    double chain_out;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(&w->s->start);
    const double t0 = now_s();
    if (w->s->kind == 0)
        fma_loop(w->s->iters, 3.0f + (float)w->index, w->out);
    else
        w->chain_out = chain_loop(w->s->iters, 3.0 + w->index);
    w->seconds = now_s() - t0;
    return NULL;
}

/* Runs kind on n threads at once; the slowest thread's seconds, or -1 (a check failed). */
static double run_threads(int n, int kind, int64_t iters, int check)
{
    static worker ws[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    shared s;
    s.iters = iters;
    s.kind = kind;
    if (pthread_barrier_init(&s.start, NULL, (unsigned)n) != 0)
        return -1.0;
    for (int i = 0; i < n; i++) {
        ws[i].s = &s;
        ws[i].index = i;
        if (pthread_create(&tid[i], NULL, run, &ws[i]) != 0) {
            fprintf(stderr, "core_probe: cannot start thread %d\n", i);
            exit(1);
        }
    }
    double worst = 0.0;
    int bad = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(tid[i], NULL);
        worst = ws[i].seconds > worst ? ws[i].seconds : worst;
        if (check) { /* every chain at the fixed point 2 */
            if (kind == 0) {
                for (int e = 0; e < CHAINS * LANES; e++)
                    bad |= ws[i].out[e] != 2.0f;
            } else
                bad |= ws[i].chain_out != 2.0;
        }
    }
    pthread_barrier_destroy(&s.start);
    return bad ? -1.0 : worst;
}

int main(int argc, char **argv)
{
    int64_t iters = 20000000, rounds = 5;
    int counts[MAX_COUNTS], nc = 0;
    const long procs = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            char *copy = strdup(argv[++i]), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t && nc < MAX_COUNTS;
                 t = strtok_r(NULL, ",", &save))
                counts[nc++] = atoi(t);
            free(copy);
        } else {
            fprintf(stderr, "usage: core_probe [--iters N] [--rounds R] [--threads 1,2,4,...]\n");
            return 2;
        }
    }
    if (nc == 0)
        for (long t = 1; t <= procs && nc < MAX_COUNTS; t = t < 8 ? 2 * t : t + 4)
            counts[nc++] = (int)t;
    if (nc > 0 && counts[nc - 1] != procs && procs <= MAX_THREADS && nc < MAX_COUNTS)
        counts[nc++] = (int)procs;
    if (iters < 100 || rounds < 1) {
        fprintf(stderr, "core_probe: --iters at least 100, --rounds at least 1\n");
        return 2;
    }
    for (int c = 0; c < nc; c++)
        if (counts[c] < 1 || counts[c] > MAX_THREADS) {
            fprintf(stderr, "core_probe: 1 to %d threads\n", MAX_THREADS);
            return 2;
        }
    /* checks: the reference's steps agree, and every thread's chains reach the fixed point */
    {
        float v[CHAINS * LANES];
        fma_loop(3, 3.0f, v);
        const float want = fmaf(fmaf(fmaf(3.0f, 0.5f, 1.0f), 0.5f, 1.0f), 0.5f, 1.0f);
        if (v[0] != want || chain_loop(3, 3.0) != fma(fma(fma(3.0, 0.5, 1.0), 0.5, 1.0), 0.5, 1.0)) {
            fprintf(stderr, "core_probe: the loops disagree with the reference\n");
            return 1;
        }
        for (int c = 0; c < nc; c++)
            for (int k = 0; k < 2; k++)
                if (run_threads(counts[c], k, 4000, 1) < 0.0) {
                    fprintf(stderr, "core_probe: %s on %d threads missed the fixed point\n",
                            k ? "chain" : "fma", counts[c]);
                    return 1;
                }
    }
    printf("%ld processors; fma: %d chains of %d-lane FMAs, chain: one dependent double FMA; "
           "%lld steps, %lld rounds A B .. B A\nchecks: every thread of every count at the fixed point\n",
           procs, CHAINS, LANES, (long long)iters, (long long)rounds);
    double *t = calloc((size_t)(2 * nc * 2 * rounds), sizeof *t);
    int64_t *cnt = calloc((size_t)(2 * nc), sizeof *cnt);
    if (!t || !cnt)
        return 1;
    for (int64_t r = 0; r < rounds; r++)
        for (int pass = 0; pass < 2; pass++)
            for (int u = 0; u < nc; u++) {
                const int c = pass ? nc - 1 - u : u;
                for (int k = 0; k < 2; k++) {
                    const double s = run_threads(counts[c], k, iters, 0);
                    t[(k * nc + c) * 2 * rounds + cnt[k * nc + c]++] = s;
                }
            }
    printf("threads   fma G instr/s (all)   fma G instr/s (a thread)   chain G steps/s (a thread)\n");
    double base_fma = 0.0, base_chain = 0.0;
    for (int c = 0; c < nc; c++) {
        double med[2];
        for (int k = 0; k < 2; k++) {
            double *x = t + (k * nc + c) * 2 * rounds;
            qsort(x, (size_t)(2 * rounds), sizeof *x, cmp_d);
            med[k] = 0.5 * (x[rounds - 1] + x[rounds]);
        }
        const double fma_thread = (double)iters * CHAINS / med[0] * 1e-9;
        const double chain_thread = (double)iters / med[1] * 1e-9;
        if (c == 0) {
            base_fma = fma_thread;
            base_chain = chain_thread;
        }
        printf("%7d   %19.2f   %16.2f (%5.1f%%)   %18.3f (%5.1f%%)\n", counts[c],
               fma_thread * counts[c], fma_thread, 100.0 * fma_thread / base_fma, chain_thread,
               100.0 * chain_thread / base_chain);
    }
    printf("(percent: of the first count's rate a thread)\n");
    free(t);
    free(cnt);
    return 0;
}
