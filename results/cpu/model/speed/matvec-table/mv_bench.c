/* The microbenchmark of abba.txt: 32 matrices of type T (argv[3]: q4_0, q4_k or q8_0), R x 2048
 * (R = argv[1]) through mv() on an mpool of argv[2] threads, 20 repetitions; prints the best and
 * the mean GB/s of weights. From the repository root, A with the previous matvec.c compiled in,
 * B with the library's (the same bits: tests/test_matvec.c):
 *   gcc -O3 -march=native -std=c11 -Iinclude -Isrc/model -Isrc mv_bench.c matvec_X.c \
 *       build-nocuda/libgemmodel.a build-nocuda/libgem.a -lpthread -lm -o mv_bench_X */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gem/gguf.h"
#include "matvec.h"
#include "mpool.h"
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main(int argc, char **argv)
{
    int64_t rows = argc > 1 ? atoll(argv[1]) : 4096, cols = 2048;
    const int nmat = 32;
    const char *tn = argc > 3 ? argv[3] : "q4_0";
    gem_gguf_type type = !strcmp(tn, "q4_k") ? GEM_GGUF_Q4_K
                         : !strcmp(tn, "q8_0") ? GEM_GGUF_Q8_0 : GEM_GGUF_Q4_0;
    size_t rb;
    gem_gguf_row_bytes(type, cols, &rb);
    float *src = malloc(cols * 4), *x = aligned_alloc(64, cols * 4), *y = aligned_alloc(64, rows * 4);
    for (int i = 0; i < cols; i++)
        x[i] = (float)((i * 7919) % 1000) / 1000.f - 0.5f;
    gem_matrix m[32];
    for (int k = 0; k < nmat; k++) {
        uint8_t *d = malloc(rows * rb);
        for (int64_t r = 0; r < rows; r++) {
            for (int i = 0; i < cols; i++)
                src[i] = (float)(((r * 131 + i * 17 + k) % 255) - 127) / 127.f;
            gem_gguf_quantize(type, src, d + r * rb, cols);
        }
        m[k] = (gem_matrix){d, type, rows, cols, rb};
    }
    mpool *p;
    mpool_create(atoi(argc > 2 ? argv[2] : "2"), &p);
    double best = 1e9, tot = 0;
    const int reps = 20;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now();
        for (int k = 0; k < nmat; k++)
            mv(p, &m[k], x, y);
        double t = now() - t0;
        tot += t;
        if (t < best)
            best = t;
    }
    double bytes = (double)nmat * rows * rb;
    printf("%s rows %lld: best %.2f ms for %.1f MB: %.2f GB/s (mean %.2f GB/s)\n", tn,
           (long long)rows, best * 1e3, bytes / 1e6, bytes / best / 1e9, bytes * reps / tot / 1e9);
    return 0;
}
