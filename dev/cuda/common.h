/*
What the dev/cuda programs share: the CUDA and gem status checks, seeded inputs, the double-precision CPU
reference of a dense head-major F32 cache, the spin kernel queued before a timed region, and the
comparison for medians. Each program stays standalone apart from this header and the library.
fused_decode.cu keeps its own copies: its version 1 writes the design candidate's resource
receipt, which binds the digests of dev/cuda's .cu files only (gem.resources.v1), so that program
must not depend on a header.
*/
#ifndef GEM_DEV_CUDA_COMMON_H
#define GEM_DEV_CUDA_COMMON_H

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#include "gem/attn.h"

/* A gem call that must succeed: the status's text and exit(1) otherwise. */
#define GEM_TRY(call)                                                                          \
    do {                                                                                       \
        gem_status s_ = (call);                                                                \
        if (s_ != GEM_OK) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, gem_status_str(s_)); \
            exit(EXIT_FAILURE);                                                                \
        }                                                                                      \
    } while (0)

#define cudaCheck(call)                                                                        \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "[CUDA ERROR] at %s:%d: %s: %s\n", __FILE__, __LINE__, #call,       \
                    cudaGetErrorString(e_));                                                   \
            exit(EXIT_FAILURE);                                                                \
        }                                                                                      \
    } while (0)

static inline uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* x (n) uniform in [lo, hi) from `seed` (24-bit steps). */
static inline void fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * (float)(splitmix(&seed) >> 40) * 0x1p-24f;
}

/* x (n) uniform in [-1, 1). */
static inline void fill(float *x, size_t n, uint64_t seed) { fill_uniform(x, n, seed, -1.0f, 1.0f); }

/* Spins for `ns` nanoseconds of the GPU's global timer (queued before a timed region, so the
 * host's launches overlap the device as in a decode loop that runs ahead). */
__global__ void wait_kernel(uint64_t ns)
{
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

static inline int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- the double reference, one thread per slice of query heads ------------------------------- */

typedef struct dev_ref_job {
    double *out;            /* (nq, d) */
    const float *q, *k, *v; /* (nq, d), (nq / group, live, d) x2: the values the cache holds */
    int64_t live, d;
    int group;
    float scale;
    int h0, h1;
} dev_ref_job;

static inline void *dev_ref_heads(void *p)
{
    dev_ref_job *j = (dev_ref_job *)p;
    const int64_t d = j->d;
    double *w = (double *)malloc((size_t)j->live * sizeof(double));
    for (int h = j->h0; h < j->h1; h++) {
        const int g = h / j->group;
        double mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t < j->live; t++) {
            double a = 0;
            const float *kr = j->k + ((size_t)g * j->live + t) * d;
            for (int64_t i = 0; i < d; i++)
                a += (double)j->q[h * d + i] * (double)kr[i];
            w[t] = a * j->scale;
            mx = w[t] > mx ? w[t] : mx;
        }
        for (int64_t t = 0; t < j->live; t++)
            sum += (w[t] = exp(w[t] - mx));
        for (int64_t i = 0; i < d; i++) {
            double a = 0;
            for (int64_t t = 0; t < j->live; t++)
                a += w[t] * (double)j->v[((size_t)g * j->live + t) * d + i];
            j->out[h * d + i] = a / sum;
        }
    }
    free(w);
    return NULL;
}

/* out (nq, d) = softmax(scale q k^T) v per head in double, for nq query heads over nq / group
 * KV heads of a dense head-major cache (live rows); the heads in 16 threads (the values do not
 * depend on it). */
static inline void reference(double *out, const float *q, const float *k, const float *v, int64_t live,
                      float scale, int nq, int group, int64_t d)
{
    enum { THREADS = 16 };
    pthread_t th[THREADS];
    dev_ref_job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (dev_ref_job){out,   q,     k,    v, live, d, group, scale, i * nq / THREADS,
                                (i + 1) * nq / THREADS};
        pthread_create(&th[i], NULL, dev_ref_heads, &jobs[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
}

#endif /* GEM_DEV_CUDA_COMMON_H */
