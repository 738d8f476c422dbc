/*
 * The engine's device-memory operations (part of the evidence library, not of
 * libgem): a stream with two events, cudaMalloc, synchronous copies, poison
 * fills on the stream, event timing, and the bandwidth probes.
 *
 * The read probe is the best streaming reader measured: a grid-stride read of
 * float4 with U independent 16-byte loads in flight per thread (L1
 * no-allocate, L2 evict-first, as the fused kernel loads K and V) and B blocks
 * of 256 threads per SM, each block's sum written out so nothing is elided.
 * gem_engine_read_bandwidth reports the best of the (U, B) configurations of
 * gem_probe_configs, each a median of `reps`: a ceiling at least as good as
 * every reader tried. dev/cuda/read_probe.cu sweeps the axes one at a time
 * (its header has the H200 figures).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gem_cuda_internal.h"

extern "C" {
#include "harness.h"
}

typedef struct cu_hx {
    cudaStream_t stream;
    cudaEvent_t e0, e1;
} cu_hx;

static gem_status hx_open(void **out)
{
    *out = NULL;
    cudaDeviceProp prop;
    int dev = -1;
    gem_status st = gem_cu_open_device(&dev, &prop);
    if (st != GEM_OK)
        return st;
    cu_hx *h = (cu_hx *)calloc(1, sizeof *h);
    if (!h)
        return GEM_ERR_NOMEM;
    cudaError_t e = cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreate(&h->e0);
    if (e == cudaSuccess)
        e = cudaEventCreate(&h->e1);
    if (e != cudaSuccess) {
        st = gem_cuda_fail(e, "stream and events", __FILE__, __LINE__);
        if (h->e0)
            cudaEventDestroy(h->e0);
        if (h->stream)
            cudaStreamDestroy(h->stream);
        free(h);
        return st;
    }
    *out = h;
    return GEM_OK;
}

static void hx_close(void *p)
{
    cu_hx *h = (cu_hx *)p;
    if (!h)
        return;
    cudaStreamSynchronize(h->stream);
    cudaEventDestroy(h->e0);
    cudaEventDestroy(h->e1);
    cudaStreamDestroy(h->stream);
    free(h);
}

static void *hx_stream(void *p) { return (void *)((cu_hx *)p)->stream; }

static gem_status hx_alloc(size_t bytes, void **out)
{
    *out = NULL;
    GEM_CUDA_CHECK(cudaMalloc(out, bytes ? bytes : 16));
    return GEM_OK;
}

static void hx_free(void *p)
{
    if (p)
        cudaFree(p);
}

/* Copies wait for every stream first: the engine's stream does not synchronise with the
 * legacy default stream cudaMemcpy runs on, and a copy must neither overwrite inputs a queued
 * kernel still reads nor read an output before it is written. An upload also waits after:
 * cudaMemcpy from pageable host memory may return once the bytes are staged, before the DMA
 * has written them, and the next kernel on a non-blocking stream would not wait for it (a
 * merge read an earlier upload's states that way, results/h200/run161). */
static gem_status hx_upload(void *dst, const void *src, size_t bytes)
{
    GEM_CUDA_CHECK(cudaDeviceSynchronize());
    GEM_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    GEM_CUDA_CHECK(cudaDeviceSynchronize());
    return GEM_OK;
}

static gem_status hx_download(void *dst, const void *src, size_t bytes)
{
    GEM_CUDA_CHECK(cudaDeviceSynchronize());
    GEM_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return GEM_OK;
}

extern "C" __global__ void gem_fill_bits_kernel(uint32_t *__restrict__ p, /* (n) */
                                                size_t n, uint32_t bits)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = bits;
}

static gem_status hx_poison(void *p, void *buf, size_t n, uint32_t bits, size_t guard)
{
    cu_hx *h = (cu_hx *)p;
    if (n) {
        size_t blocks = (n + 255) / 256;
        if (blocks > 4096)
            blocks = 4096;
        gem_fill_bits_kernel<<<(unsigned)blocks, 256, 0, h->stream>>>((uint32_t *)buf, n, bits);
        GEM_CUDA_CHECK(cudaGetLastError());
    }
    if (guard)
        GEM_CUDA_CHECK(cudaMemsetAsync((uint32_t *)buf + n, 0xA5, guard, h->stream));
    return GEM_OK;
}

/* Spins for `ns` nanoseconds of the GPU's global timer (one thread). */
extern "C" __global__ void gem_wait_kernel(uint64_t ns)
{
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

/* The timed region starts behind 50 us of queued GPU work, so the host's part of the call
 * (validation, launches) overlaps the GPU as it does in a decode loop that runs ahead of the
 * device: the events time the GPU's execution of what the call queued. */
#define GEM_HX_LEAD_NS 50000u

static gem_status hx_timer_start(void *p)
{
    cu_hx *h = (cu_hx *)p;
    gem_wait_kernel<<<1, 1, 0, h->stream>>>(GEM_HX_LEAD_NS);
    GEM_CUDA_CHECK(cudaGetLastError());
    GEM_CUDA_CHECK(cudaEventRecord(h->e0, h->stream));
    return GEM_OK;
}

static gem_status hx_timer_stop(void *p, double *seconds)
{
    cu_hx *h = (cu_hx *)p;
    GEM_CUDA_CHECK(cudaEventRecord(h->e1, h->stream));
    GEM_CUDA_CHECK(cudaEventSynchronize(h->e1));
    float ms = 0.f;
    GEM_CUDA_CHECK(cudaEventElapsedTime(&ms, h->e0, h->e1));
    *seconds = (double)ms * 1e-3;
    return GEM_OK;
}

/* ---- probes --------------------------------------------------------------------------- */

/* Fills the read buffer with a non-zero pattern (timing zeros can flatter). */
extern "C" __global__ void gem_fill_pattern_kernel(float *__restrict__ p, /* (n) */ size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = (float)(i % 1021u) * (1.0f / 1021.0f) - 0.5f;
}

__device__ __forceinline__ float4 gem_probe_ld(const float4 *p, uint64_t pol)
{
    float4 r;
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
                 : "l"(p), "l"(pol)
                 : "memory");
    return r;
}

/* Grid-stride read of n4 float4 with U loads in flight per thread; one sum per block. */
template <int U>
__global__ void __launch_bounds__(256)
    gem_read_probe_kernel(const float4 *__restrict__ p, /* (n4) */ size_t n4,
                          float *__restrict__ block_sums /* (gridDim.x) */)
{
    __shared__ float red[8];
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.f;
    for (; i + (U - 1) * stride < n4; i += U * stride) {
        float4 a[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            a[u] = gem_probe_ld(p + i + u * stride, pol);
#pragma unroll
        for (int u = 0; u < U; u++)
            acc += (a[u].x + a[u].y) + (a[u].z + a[u].w);
    }
    for (; i < n4; i += stride) {
        const float4 a = gem_probe_ld(p + i, pol);
        acc += (a.x + a.y) + (a.z + a.w);
    }
    for (int off = 16; off > 0; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int w = 0; w < 8; w++)
            s += red[w];
        block_sums[blockIdx.x] = s;
    }
}

/* The configurations the probe tries: loads in flight per thread, blocks per SM. */
static const struct {
    int loads, blocks_per_sm;
} gem_probe_configs[] = {{4, 8}, {8, 4}, {8, 8}, {16, 4}, {16, 8}};

static gem_status gem_probe_launch(int loads, unsigned blocks, const float4 *p, size_t n4,
                                   float *sums, cudaStream_t s)
{
    switch (loads) {
    case 4: gem_read_probe_kernel<4><<<blocks, 256, 0, s>>>(p, n4, sums); break;
    case 8: gem_read_probe_kernel<8><<<blocks, 256, 0, s>>>(p, n4, sums); break;
    default: gem_read_probe_kernel<16><<<blocks, 256, 0, s>>>(p, n4, sums); break;
    }
    GEM_CUDA_CHECK(cudaGetLastError());
    return GEM_OK;
}

static int gem_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static gem_status hx_read_bandwidth(void *p, int64_t threads, size_t bytes, int64_t reps,
                                    double *bps)
{
    (void)threads;
    cu_hx *h = (cu_hx *)p;
    cudaDeviceProp prop;
    int dev = -1;
    gem_status st = gem_cu_open_device(&dev, &prop);
    if (st != GEM_OK)
        return st;
    bytes = bytes / 16 * 16;
    const size_t n4 = bytes / 16;
    float *buf = NULL, *sums = NULL;
    double *t = (double *)calloc((size_t)reps, sizeof(double));
    if (!t)
        return GEM_ERR_NOMEM;
    const unsigned max_blocks = (unsigned)prop.multiProcessorCount * 16u;
    double best = 0.0;
    cudaError_t e = cudaMalloc((void **)&buf, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&sums, max_blocks * sizeof(float));
    if (e != cudaSuccess) {
        st = gem_cuda_fail(e, "cudaMalloc (read probe)", __FILE__, __LINE__);
        goto done;
    }
    gem_fill_pattern_kernel<<<4096, 256, 0, h->stream>>>(buf, bytes / sizeof(float));
    if ((e = cudaGetLastError()) != cudaSuccess) {
        st = gem_cuda_fail(e, "gem_fill_pattern_kernel", __FILE__, __LINE__);
        goto done;
    }
    for (size_t c = 0; c < sizeof gem_probe_configs / sizeof gem_probe_configs[0]; c++) {
        const unsigned blocks =
            (unsigned)prop.multiProcessorCount * (unsigned)gem_probe_configs[c].blocks_per_sm;
        for (int64_t r = -1; r < reps && st == GEM_OK; r++) { /* r = -1: warm-up */
            if ((st = hx_timer_start(h)) != GEM_OK ||
                (st = gem_probe_launch(gem_probe_configs[c].loads, blocks, (const float4 *)buf,
                                       n4, sums, h->stream)) != GEM_OK)
                break;
            double sec = 0;
            if ((st = hx_timer_stop(h, &sec)) != GEM_OK)
                break;
            if (r >= 0)
                t[r] = sec;
        }
        if (st != GEM_OK)
            goto done;
        qsort(t, (size_t)reps, sizeof(double), gem_cmp_double);
        const double med = (reps % 2) ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
        if (med > 0 && (double)bytes / med > best)
            best = (double)bytes / med;
    }
    if (best > 0)
        *bps = best;
    else
        st = GEM_ERR_STATE;
done:
    if (buf)
        cudaFree(buf);
    if (sums)
        cudaFree(sums);
    free(t);
    return st;
}

extern "C" const gem_harness_ops gem_harness_cuda_ops = {
    hx_open,   hx_close,    hx_stream,      hx_alloc,      hx_free,           hx_upload,
    hx_download, hx_poison, hx_timer_start, hx_timer_stop, hx_read_bandwidth,
};

extern "C" gem_status gem_harness_cuda_devices(int *count)
{
    const cudaError_t e = cudaGetDeviceCount(count);
    return e == cudaSuccess ? GEM_OK : GEM_ERR_NO_DEVICE;
}

extern "C" gem_status gem_harness_cuda_use(int device)
{
    const cudaError_t e = cudaSetDevice(device);
    return e == cudaSuccess ? GEM_OK : gem_cuda_fail(e, "cudaSetDevice", __FILE__, __LINE__);
}

extern "C" gem_status gem_harness_cuda_enable_peers(int *pairs)
{
    int n = 0, prev = 0;
    *pairs = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || cudaGetDevice(&prev) != cudaSuccess)
        return GEM_ERR_NO_DEVICE;
    gem_status st = GEM_OK;
    for (int a = 0; a < n && st == GEM_OK; a++)
        for (int b = 0; b < n && st == GEM_OK; b++) {
            int can = 0;
            if (a == b || cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess || !can)
                continue;
            cudaError_t e = cudaSetDevice(a);
            if (e == cudaSuccess)
                e = cudaDeviceEnablePeerAccess(b, 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled) {
                (void)cudaGetLastError(); /* not an error here: clear it */
                e = cudaSuccess;
            }
            if (e == cudaSuccess)
                (*pairs)++;
            else
                st = gem_cuda_fail(e, "cudaDeviceEnablePeerAccess", __FILE__, __LINE__);
        }
    (void)cudaSetDevice(prev);
    return st;
}

extern "C" gem_status gem_harness_cuda_copy_bandwidth(size_t bytes, int64_t reps, double *bps)
{
    cudaDeviceProp prop;
    int dev = -1;
    gem_status st = gem_cu_open_device(&dev, &prop);
    if (st != GEM_OK)
        return st;
    float *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double *t = (double *)calloc((size_t)reps, sizeof(double));
    if (!t)
        return GEM_ERR_NOMEM;
    cudaError_t ce;
#define GEM_CP_TRY(call)                                                                       \
    do {                                                                                       \
        if ((ce = (call)) != cudaSuccess) {                                                    \
            st = gem_cuda_fail(ce, #call, __FILE__, __LINE__);                                 \
            goto done;                                                                         \
        }                                                                                      \
    } while (0)
    GEM_CP_TRY(cudaMalloc((void **)&a, bytes));
    GEM_CP_TRY(cudaMalloc((void **)&b, bytes));
    gem_fill_pattern_kernel<<<4096, 256>>>(a, bytes / sizeof(float));
    GEM_CP_TRY(cudaGetLastError());
    GEM_CP_TRY(cudaEventCreate(&e0));
    GEM_CP_TRY(cudaEventCreate(&e1));
    for (int64_t r = -1; r < reps; r++) {
        GEM_CP_TRY(cudaEventRecord(e0, 0));
        GEM_CP_TRY(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0));
        GEM_CP_TRY(cudaEventRecord(e1, 0));
        GEM_CP_TRY(cudaEventSynchronize(e1));
        float ms = 0.f;
        GEM_CP_TRY(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0)
            t[r] = (double)ms * 1e-3;
    }
    qsort(t, (size_t)reps, sizeof(double), gem_cmp_double);
    *bps = 2.0 * (double)bytes / t[reps / 2];
done:
#undef GEM_CP_TRY
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    if (a)
        cudaFree(a);
    if (b)
        cudaFree(b);
    free(t);
    return st;
}

extern "C" gem_status gem_harness_cuda_nominal_bandwidth(double *bps)
{
    cudaDeviceProp prop;
    int dev = -1;
    gem_status st = gem_cu_open_device(&dev, &prop);
    if (st != GEM_OK)
        return st;
    int clock_khz = 0, bus_bits = 0;
    GEM_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev));
    GEM_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
    *bps = 2.0 * (double)clock_khz * 1e3 * (double)bus_bits / 8.0;
    return GEM_OK;
}
