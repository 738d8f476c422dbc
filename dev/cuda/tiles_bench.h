/*
What the Q4_0 tile experiments share (dev/cuda/tiles_bulk.cu, tiles_ring.cu, tiles_prefetch.cu,
tiles_streamk.cu): the library's constants and x scratch kernel, its split of a tile's chunks over
warps, a launch with dynamic shared memory, the Gemma 4 31B shapes, and the program around a
variant launcher: every variant checked bit for bit against the library (or, with
tiles_bench_tol, within a tolerance) and against a repeat of itself on two copies of each shape
before anything is timed,
then ABBA timing (0 .. nvar - 1, then back) of per-launch medians and of a chain of launches
(events around the chain alone, as a decode loop runs them), rotating over copies of the
matrices whose bytes exceed 4 x the 50 MiB L2 (--hot: one copy, so that a matrix that fits
stays in the L2 from call to call); fractions of the library's read probe measured in the same
process. --once runs every variant once per shape and exits (for a profiler).
*/
#ifndef GEM_DEV_CUDA_TILES_BENCH_H
#define GEM_DEV_CUDA_TILES_BENCH_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "common.h"
#include "gem/gguf.h"
#include "harness.h"
#include "model/cuda/matvec_tiles.h"
#include "model/cuda/model_cuda.h"
#include "cuda/gem_pdl.cuh"
#include "model/cuda/tiles_arith.cuh"

/* The library's constants (matvec_tiles.cu). */
#define TILE_ROWS 8
#define CHUNK_ELEMS 128
#define CHUNK_BYTES 576
#define XQ_LANE GEM_TILES_XQ_LANE_BYTES
#define XQ_CHUNK GEM_TILES_XQ_CHUNK_BYTES
#define CHUNKS_PER_WARP 8        /* GeGLU's split */
#define PLAIN_CHUNKS_PER_WARP 12 /* the plain product's (a power-of-two number of warps) */
#define MAX_WARPS 16
#define TILES_MAX_VARIANTS 8
static const unsigned kFull = 0xffffffffu;

/* cp.async of 16 bytes, global -> shared, cached in the L2 only; a group's commit; the wait
 * until at most N groups are in flight (the rings of tiles_ring.cu and tiles_prefetch.cu). */
__device__ __forceinline__ void cp16(void *dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                     (uint32_t)__cvta_generic_to_shared(dst)),
                 "l"(src)
                 : "memory");
}
__device__ __forceinline__ void cp_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* The library's x scratch kernel (matvec_tiles.cu's, on tiles_arith.cuh). */
__global__ void xq_kernel(const float *__restrict__ x, int64_t nblk, unsigned char *__restrict__ xq)
{
    pdl_trigger();
    pdl_wait();
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= nblk)
        return;
    gem_tiles_xq_block(x[32 * b + (threadIdx.x & 31)], b, xq, threadIdx.x & 31);
}

/* The library's warps a tile (gem_tiles_launch): GeGLU at most CHUNKS_PER_WARP chunks a warp;
 * the plain product at most PLAIN_CHUNKS_PER_WARP, the warps rounded up to a power of two;
 * both up to MAX_WARPS. */
static int64_t tiles_library_warps(int64_t nchunks, bool geglu)
{
    if (geglu) {
        const int64_t w = (nchunks + CHUNKS_PER_WARP - 1) / CHUNKS_PER_WARP;
        return w > MAX_WARPS ? MAX_WARPS : w;
    }
    const int64_t need = (nchunks + PLAIN_CHUNKS_PER_WARP - 1) / PLAIN_CHUNKS_PER_WARP;
    int64_t w = 1;
    while (w < need && w < MAX_WARPS)
        w *= 2;
    return w;
}

/* The scratch kernel for x, then the library's split of p (nchunks, cpw, the matrices' tile0):
 * *grid tiles (GeGLU: of the gate matrix) and *warps warps a block. */
static void tiles_prepare(TileParams *p, const float *x, bool geglu, unsigned *grid, int64_t *warps)
{
    const int64_t nblk = p->cols / 32;
    cudaCheck(launch_pdl(xq_kernel, (unsigned)((nblk + 7) / 8), 256, 0, x, nblk,
                         const_cast<unsigned char *>(p->xq)));
    p->nchunks = p->cols / CHUNK_ELEMS;
    const int64_t w = tiles_library_warps(p->nchunks, geglu);
    p->cpw = (p->nchunks + w - 1) / w;
    int64_t tiles = 0;
    for (int i = 0; i < p->nmat; i++) {
        p->mat[i].tile0 = tiles;
        tiles += p->mat[i].rows / TILE_ROWS;
        if (geglu)
            break;
    }
    *grid = (unsigned)tiles;
    *warps = w;
}

/* GeGLU over p's two tiled matrices (gate mat[0], up mat[1], y = mat[0].y) through the library's
 * entry, for a variant that changes only the plain product. */
static void tiles_library_geglu(const TileParams &p, const float *x)
{
    gem_dmatrix g = {const_cast<unsigned char *>(p.mat[0].data), GEM_GGUF_Q4_0, p.mat[0].rows,
                     p.cols, 0, GEM_DLAYOUT_Q4_0_TILES};
    GEM_TRY(gem_gguf_row_bytes(GEM_GGUF_Q4_0, p.cols, &g.row_bytes));
    gem_dmatrix u = g;
    u.data = const_cast<unsigned char *>(p.mat[1].data);
    GEM_TRY(gem_dmv_geglu(&g, &u, x, p.mat[0].y, const_cast<unsigned char *>(p.xq), NULL));
}

/* kernel k over p with programmatic stream serialization and `smem` bytes of dynamic shared
 * memory (raising the kernel's limit to it). */
template <typename K> static void launch_smem(K k, unsigned grid, unsigned block, size_t smem, TileParams p)
{
    cudaCheck(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaCheck(launch_pdl_shared(k, grid, block, smem, 0, p));
}

typedef struct shape {
    const char *name;
    int geglu;
    int64_t rows, cols;
} shape;

static const shape shapes[] = {
    {"q", 0, 8192, 5376},       {"k", 0, 4096, 5376},         {"o-swa", 0, 5376, 8192},
    {"o-full", 0, 5376, 16384}, {"gate+up", 1, 21504, 5376},  {"down", 0, 5376, 21504},
    {"head", 0, 262144, 5376},
};

/* Variant v > 0 of a program: the scratch and its kernel over p. */
typedef void (*tiles_launch_fn)(int v, TileParams p, const float *x, bool geglu);

/* One call of variant v (0 the library, else launch's) on the matrices m (two for GeGLU). */
static void tiles_call(tiles_launch_fn launch, int v, const shape *s, gem_dmatrix *m,
                       const float *dx, float *dy, void *xq)
{
    if (v == 0) {
        if (s->geglu)
            GEM_TRY(gem_dmv_geglu(&m[0], &m[1], dx, dy, xq, NULL));
        else
            GEM_TRY(gem_dmv(&m[0], dx, dy, xq, NULL));
        return;
    }
    TileParams p;
    memset(&p, 0, sizeof p);
    p.cols = s->cols;
    p.xq = static_cast<const unsigned char *>(xq);
    p.nmat = s->geglu ? 2 : 1;
    for (int i = 0; i < p.nmat; i++)
        p.mat[i] = TileMat{static_cast<const unsigned char *>(m[i].data), dy, s->rows, 0};
    launch(v, p, dx, s->geglu != 0);
}

/* 0: every variant must equal the library bit for bit. > 0: a variant whose additions run in
 * another order passes when every output is within tiles_bench_tol x the largest |output| of
 * the library's (set by the program before tiles_bench_run). */
static double tiles_bench_tol = 0.0;

/* The program's main: argv (--reps R, --once), then per shape the checks and the ABBA timing of
 * the nvar variants (0 the library through gem_dmv / gem_dmv_geglu, v > 0 through launch(v, p,
 * x, geglu), which gets p with mat[].data, y, rows, nmat, cols and xq set). Returns the exit
 * status: 1 when a variant's bits differ from the library's. */
static int tiles_bench_run(int argc, char **argv, int nvar, const char *const *names,
                           tiles_launch_fn launch)
{
    if (nvar < 1 || nvar > TILES_MAX_VARIANTS)
        return 2;
    int reps = 100, once = 0, hot = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--once"))
            once = 1;
        else if (!strcmp(argv[i], "--hot"))
            hot = 1;
        else {
            fprintf(stderr, "usage: %s [--reps R] [--once] [--hot]\n", argv[0]);
            return 2;
        }
    }
    reps = reps < 5 ? 5 : reps;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    void *hx = NULL;
    GEM_TRY(gem_harness_cuda_ops.open(&hx));
    double probe = 0;
    GEM_TRY(gem_harness_cuda_ops.read_bandwidth(hx, 0, (size_t)4 << 30, 20, &probe));
    printf("read probe: %.1f GB/s\n\n", probe * 1e-9);
    printf("%-8s %-8s %9s %9s %9s %6s %9s %6s\n", "shape", "variant", "MB", "median_us",
           "p10_us", "probe", "chain_us", "probe");
    double *times = (double *)malloc((size_t)reps * sizeof(double));
    cudaEvent_t *ev = (cudaEvent_t *)malloc((size_t)(reps + 1) * sizeof(cudaEvent_t));
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventCreate(&ev[r]));
    int failed = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *s = &shapes[si];
        const int nmat = s->geglu ? 2 : 1;
        size_t rb = 0;
        GEM_TRY(gem_gguf_row_bytes(GEM_GGUF_Q4_0, s->cols, &rb));
        const size_t mbytes = (size_t)s->rows * rb, set_bytes = nmat * mbytes;
        int ncopies = (int)(((size_t)200 << 20) / set_bytes + 1);
        ncopies = ncopies < 2 ? 2 : ncopies > 64 ? 64 : ncopies;
        gem_dmatrix(*sets)[2] = (gem_dmatrix(*)[2])calloc((size_t)ncopies, sizeof *sets);
        void *tmp;
        cudaCheck(cudaMalloc(&tmp, mbytes));
        for (int c = 0; c < ncopies; c++)
            for (int i = 0; i < nmat; i++) {
                gem_dmatrix *m = &sets[c][i];
                *m = (gem_dmatrix){NULL, GEM_GGUF_Q4_0, s->rows, s->cols, rb, GEM_DLAYOUT_ROWS};
                cudaCheck(cudaMalloc(&m->data, mbytes));
                gem_dmatrix r = *m;
                r.data = tmp;
                GEM_TRY(gem_dmatrix_fill_random(&r, 7 + 3 * (uint64_t)c + (uint64_t)i,
                                                1.0f / sqrtf((float)s->cols), NULL));
                GEM_TRY(gem_dmatrix_tile(m, tmp, NULL));
                cudaCheck(cudaDeviceSynchronize());
            }
        cudaCheck(cudaFree(tmp));
        float *hxv = (float *)malloc((size_t)s->cols * 4), *dx, *dy[TILES_MAX_VARIANTS];
        fill(hxv, (size_t)s->cols, 99 + si);
        void *xq;
        cudaCheck(cudaMalloc((void **)&dx, (size_t)s->cols * 4));
        cudaCheck(cudaMalloc(&xq, gem_dmv_xq_bytes(s->cols) + 16));
        cudaCheck(cudaMemcpy(dx, hxv, (size_t)s->cols * 4, cudaMemcpyHostToDevice));
        for (int v = 0; v < nvar; v++)
            cudaCheck(cudaMalloc((void **)&dy[v], (size_t)s->rows * 4));
        /* the same bits as the library, on two copies */
        float *ya = (float *)malloc((size_t)s->rows * 4), *yb = (float *)malloc((size_t)s->rows * 4);
        for (int c = 0; c < 2; c++)
            for (int v = 1; v < nvar; v++) {
                tiles_call(launch, 0, s, sets[c], dx, dy[0], xq);
                tiles_call(launch, v, s, sets[c], dx, dy[v], xq);
                cudaCheck(cudaDeviceSynchronize());
                cudaCheck(cudaMemcpy(ya, dy[0], (size_t)s->rows * 4, cudaMemcpyDeviceToHost));
                cudaCheck(cudaMemcpy(yb, dy[v], (size_t)s->rows * 4, cudaMemcpyDeviceToHost));
                int64_t bad = 0;
                double ymax = 0.0, dmax = 0.0;
                for (int64_t r = 0; r < s->rows; r++)
                    ymax = fmax(ymax, fabs((double)ya[r]));
                for (int64_t r = 0; r < s->rows; r++) {
                    const double d = fabs((double)ya[r] - (double)yb[r]);
                    dmax = isnan(d) ? INFINITY : fmax(dmax, d);
                    bad += tiles_bench_tol > 0 ? !(d <= tiles_bench_tol * ymax)
                                               : memcmp(&ya[r], &yb[r], 4) != 0;
                }
                /* and a repeat gives the same bits */
                tiles_call(launch, v, s, sets[c], dx, dy[v], xq);
                cudaCheck(cudaDeviceSynchronize());
                cudaCheck(cudaMemcpy(ya, dy[v], (size_t)s->rows * 4, cudaMemcpyDeviceToHost));
                if (memcmp(ya, yb, (size_t)s->rows * 4) != 0) {
                    printf("check %-8s %s copy %d: a repeat gave other bits: FAILED\n", s->name,
                           names[v], c);
                    failed = 1;
                }
                if (tiles_bench_tol > 0 && c == 0)
                    printf("check %-8s %s: largest difference %.3g of the largest |y| %.3g\n",
                           s->name, names[v], dmax, ymax);
                if (bad) {
                    printf("check %-8s %s copy %d: %lld of %lld outputs differ from the library's: "
                           "FAILED\n", s->name, names[v], c, (long long)bad, (long long)s->rows);
                    failed = 1;
                }
            }
        if (!failed)
            printf(tiles_bench_tol > 0 ? "check %-8s: every variant within the tolerance\n"
                                       : "check %-8s: every variant equals the library bit for bit\n",
                   s->name);
        const double moved = (double)set_bytes + 4.0 * (double)s->cols + 4.0 * (double)s->rows;
        const int r_here = s->rows >= 100000 ? (reps < 30 ? reps : 30) : reps;
        /* ABBA over the variants: 0 .. nvar - 1, then back */
        double med[TILES_MAX_VARIANTS][2], chain[TILES_MAX_VARIANTS][2], p10[TILES_MAX_VARIANTS][2];
        for (int k = 0; k < 2 * nvar && !failed && !once; k++) {
            const int v = k < nvar ? k : 2 * nvar - 1 - k, rep = k < nvar ? 0 : 1;
            for (int pass = 0; pass < 3; pass++) {
                wait_kernel<<<1, 1>>>(pass ? 20000000ull : 1000ull);
                cudaCheck(cudaGetLastError());
                if (pass == 2)
                    cudaCheck(cudaEventRecord(ev[0], 0));
                for (int r = 0; r < r_here; r++) {
                    if (pass == 1)
                        cudaCheck(cudaEventRecord(ev[r], 0));
                    tiles_call(launch, v, s, sets[hot ? 0 : r % ncopies], dx, dy[v], xq);
                }
                if (pass)
                    cudaCheck(cudaEventRecord(ev[r_here], 0));
                cudaCheck(cudaDeviceSynchronize());
                if (pass == 1) {
                    for (int r = 0; r < r_here; r++) {
                        float ms = 0;
                        cudaCheck(cudaEventElapsedTime(&ms, ev[r], ev[r + 1]));
                        times[r] = ms * 1e-3;
                    }
                    qsort(times, (size_t)r_here, sizeof(double), cmp_double);
                    med[v][rep] = times[r_here / 2];
                    p10[v][rep] = times[r_here / 10];
                } else if (pass == 2) {
                    float ms = 0;
                    cudaCheck(cudaEventElapsedTime(&ms, ev[0], ev[r_here]));
                    chain[v][rep] = ms * 1e-3 / r_here;
                }
            }
        }
        for (int v = 0; v < nvar && !failed && !once; v++)
            for (int rep = 0; rep < 2; rep++)
                printf("%-8s %-8s %9.1f %9.2f %9.2f %5.1f%% %9.2f %5.1f%%\n", s->name,
                       names[v], set_bytes * 1e-6, med[v][rep] * 1e6,
                       p10[v][rep] * 1e6, 100.0 * moved / med[v][rep] / probe,
                       chain[v][rep] * 1e6, 100.0 * moved / chain[v][rep] / probe);
        fflush(stdout);
        for (int c = 0; c < ncopies; c++)
            for (int i = 0; i < nmat; i++)
                cudaCheck(cudaFree(sets[c][i].data));
        free(sets);
        free(hxv);
        free(ya);
        free(yb);
        cudaCheck(cudaFree(dx));
        cudaCheck(cudaFree(xq));
        for (int v = 0; v < nvar; v++)
            cudaCheck(cudaFree(dy[v]));
    }
    for (int r = 0; r <= reps; r++)
        cudaCheck(cudaEventDestroy(ev[r]));
    free(ev);
    free(times);
    gem_harness_cuda_ops.close(hx);
    return failed;
}

#endif /* GEM_DEV_CUDA_TILES_BENCH_H */
