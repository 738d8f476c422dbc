/*
Streaming-read probes: how fast can a kernel read device memory once? The answer is the
ceiling every "fraction of read bandwidth" in gem is measured against, so the probe must be at
least as good a reader as the best attention kernel.

Each probe reads n float4 (every byte once) and writes one sum per block; main() first checks
that the block sums add up to the host's sum of the same buffer (relative error < 1e-5, so
nothing was skipped), then times each configuration (CUDA events, median of --reps after a
warm-up) over --bytes (default 4 GiB), one axis at a time:
  axis 1: 16-byte loads in flight per thread, U = 1, 2, 4, 8, 16 (grid-stride, 8 blocks of
          256 threads per SM, L1 no-allocate / L2 evict-first loads);
  axis 2: blocks per SM, 2, 4, 8, 16, 32, at U = 8;
  axis 3: the load hint, plain ld.global.nc vs L1 no-allocate + L2 evict-first, at U = 8, 8/SM;
  axis 4: the access pattern, grid-stride vs one contiguous chunk per block, at U = 8, 8/SM.
The library's probe (src/cuda/harness_cuda.cu) takes the best of its configurations each run.
  H200 (results/h200/): see NOTES.md for the figures of each axis.

./read_probe [--bytes N] [--reps R]
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common.h"

template <int HINT> __device__ __forceinline__ float4 load(const float4 *p, uint64_t pol)
{
    if (!HINT)
        return __ldg(p);
    float4 r;
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
                 : "l"(p), "l"(pol)
                 : "memory");
    return r;
}

__device__ __forceinline__ void block_sum(float acc, float *sums)
{
    __shared__ float red[32];
    for (int off = 16; off > 0; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++)
            s += red[w];
        sums[blockIdx.x] = s;
    }
}

/* grid-stride: thread i reads i, i + stride, ... with U loads in flight */
template <int U, int HINT>
__global__ void probe_stride(const float4 *__restrict__ p, size_t n4, float *__restrict__ sums)
{
    uint64_t pol = 0;
    if (HINT)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.f;
    for (; i + (U - 1) * stride < n4; i += U * stride) {
        float4 a[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            a[u] = load<HINT>(p + i + u * stride, pol);
#pragma unroll
        for (int u = 0; u < U; u++)
            acc += (a[u].x + a[u].y) + (a[u].z + a[u].w);
    }
    for (; i < n4; i += stride) {
        const float4 a = load<HINT>(p + i, pol);
        acc += (a.x + a.y) + (a.z + a.w);
    }
    block_sum(acc, sums);
}

/* one contiguous chunk per block, U rows of blockDim float4 in flight */
template <int U>
__global__ void probe_chunk(const float4 *__restrict__ p, size_t n4, float *__restrict__ sums)
{
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    const size_t chunk = (n4 + gridDim.x - 1) / gridDim.x;
    const size_t b = (size_t)blockIdx.x * chunk, e = b + chunk < n4 ? b + chunk : n4;
    float acc = 0.f;
    size_t i = b + threadIdx.x;
    for (; i + (U - 1) * blockDim.x < e; i += U * blockDim.x) {
        float4 a[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            a[u] = load<1>(p + i + u * blockDim.x, pol);
#pragma unroll
        for (int u = 0; u < U; u++)
            acc += (a[u].x + a[u].y) + (a[u].z + a[u].w);
    }
    for (; i < e; i += blockDim.x) {
        const float4 a = load<1>(p + i, pol);
        acc += (a.x + a.y) + (a.z + a.w);
    }
    block_sum(acc, sums);
}

typedef void (*probe_fn)(const float4 *, size_t, float *);

typedef struct config {
    const char *axis;
    const char *name;
    probe_fn fn;
    int blocks_per_sm;
} config;

int main(int argc, char **argv)
{
    size_t bytes = (size_t)4 << 30;
    int reps = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--bytes"))
            bytes = (size_t)atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
    }
    bytes = bytes / 16 * 16;
    const size_t n4 = bytes / 16, n = bytes / 4;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0, bus = 0;
    cudaCheck(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0));
    cudaCheck(cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, 0));
    const double nominal = 2.0 * clock_khz * 1e3 * bus / 8.0;
    printf("%s, %d SMs; nominal %.1f GB/s (memory clock %d MHz, %d-bit bus); %.2f GiB read\n",
           prop.name, prop.multiProcessorCount, nominal / 1e9, clock_khz / 1000, bus,
           bytes / 1073741824.0);
    float *h = (float *)malloc(bytes);
    double want = 0;
    for (size_t i = 0; i < n; i++) {
        h[i] = (float)(i % 1021u) * (1.0f / 1021.0f) - 0.5f;
        want += h[i];
    }
    float4 *d;
    float *sums;
    const int max_blocks = prop.multiProcessorCount * 32;
    cudaCheck(cudaMalloc(&d, bytes));
    cudaCheck(cudaMalloc(&sums, max_blocks * sizeof(float)));
    cudaCheck(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    float *hs = (float *)malloc(max_blocks * sizeof(float));
    const config configs[] = {
        {"U", "stride U1 8/SM hint", probe_stride<1, 1>, 8},
        {"U", "stride U2 8/SM hint", probe_stride<2, 1>, 8},
        {"U", "stride U4 8/SM hint", probe_stride<4, 1>, 8},
        {"U", "stride U8 8/SM hint", probe_stride<8, 1>, 8},
        {"U", "stride U16 8/SM hint", probe_stride<16, 1>, 8},
        {"grid", "stride U8 2/SM hint", probe_stride<8, 1>, 2},
        {"grid", "stride U8 4/SM hint", probe_stride<8, 1>, 4},
        {"grid", "stride U8 16/SM hint", probe_stride<8, 1>, 16},
        {"grid", "stride U8 32/SM hint", probe_stride<8, 1>, 32},
        {"hint", "stride U8 8/SM ldg", probe_stride<8, 0>, 8},
        {"pattern", "chunk U8 8/SM hint", probe_chunk<8>, 8},
        {"pattern", "chunk U16 4/SM hint", probe_chunk<16>, 4},
    };
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    double *t = (double *)malloc(reps * sizeof(double));
    printf("%-8s %-24s %10s %10s %9s\n", "axis", "probe", "median ms", "GB/s", "nominal");
    double best = 0, gbs[32];
    int failed = 0;
    const int nc = (int)(sizeof configs / sizeof configs[0]);
    for (int c = 0; c < nc; c++) {
        const int blocks = prop.multiProcessorCount * configs[c].blocks_per_sm;
        configs[c].fn<<<blocks, 256>>>(d, n4, sums);
        cudaCheck(cudaGetLastError());
        cudaCheck(cudaMemcpy(hs, sums, blocks * sizeof(float), cudaMemcpyDeviceToHost));
        double got = 0;
        for (int b = 0; b < blocks; b++)
            got += hs[b];
        if (!(fabs(got - want) <= 1e-5 * (fabs(want) + (double)n * 1e-3))) {
            printf("%-8s %-24s INVALID: sum %.6g, want %.6g\n", configs[c].axis, configs[c].name,
                   got, want);
            failed = 1;
            gbs[c] = 0;
            continue;
        }
        for (int r = 0; r < reps; r++) {
            cudaCheck(cudaEventRecord(e0));
            configs[c].fn<<<blocks, 256>>>(d, n4, sums);
            cudaCheck(cudaEventRecord(e1));
            cudaCheck(cudaEventSynchronize(e1));
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
            t[r] = ms;
        }
        qsort(t, reps, sizeof(double), cmp_double);
        const double med = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
        gbs[c] = bytes / (med * 1e-3) / 1e9;
        if (gbs[c] > best)
            best = gbs[c];
        printf("%-8s %-24s %10.4f %10.1f %8.1f%%\n", configs[c].axis, configs[c].name, med,
               gbs[c], 100.0 * gbs[c] * 1e9 / nominal);
    }
    printf("best %.1f GB/s = %.1f%% of nominal\n", best, 100.0 * best * 1e9 / nominal);
    cudaFree(d);
    cudaFree(sums);
    free(h);
    free(hs);
    free(t);
    return failed;
}
