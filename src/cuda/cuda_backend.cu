/*
 * The CUDA backend (gem_cuda_backend_ops) and the queries of gem/cuda.h.
 *
 * One engine holds device copies of q and of rows [0, live) of k and v
 * (`copies` rotation copies of k and v, so short contexts are not timed out of
 * L2), a guarded output (n_q_heads * dv floats followed by GEM_GUARD_BYTES
 * guard bytes) and the route's scratch. Each run poisons output, guard and
 * scratch on the device (GEM_POISON_BITS / 0xA5), launches the route between
 * two CUDA events on the engine's stream, waits, and reports the event time.
 * gem_engine_output copies output and guard back and audits them.
 *
 * Routes: baseline and fused at D512 / group 8 (n_q_heads = 8 * n_kv_heads,
 * dk = dv = 512). Any other shape answers GEM_ERR_UNSUPPORTED; reference and
 * online are CPU routes and answer GEM_ERR_UNSUPPORTED here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gem_cuda_internal.h"

extern "C" {
#include "backend.h"
#include "gem/check.h"
#include "gem/cuda.h"
}

#define GEM_CU_MAX_COPIES 64

/* ---- errors ---------------------------------------------------------------------- */

gem_status gem_cuda_fail(cudaError_t err, const char *call, const char *file, int line)
{
    int dev = -1;
    (void)cudaGetDevice(&dev);
    fprintf(stderr, "gem cuda: %s failed at %s:%d (device %d): %s: %s\n", call, file, line, dev,
            cudaGetErrorName(err), cudaGetErrorString(err));
    return err == cudaErrorMemoryAllocation ? GEM_ERR_NOMEM : GEM_ERR_DEVICE;
}

/* Device 0 if it exists and runs sm_90 code; GEM_ERR_NO_DEVICE otherwise,
 * with one line on stderr saying why. */
static gem_status gem_cu_open_device(cudaDeviceProp *prop)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
        fprintf(stderr, "gem cuda: no GPU: %s\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device present");
        (void)cudaGetLastError();
        return GEM_ERR_NO_DEVICE;
    }
    GEM_CUDA_CHECK(cudaSetDevice(0));
    GEM_CUDA_CHECK(cudaGetDeviceProperties(prop, 0));
    if (prop->major != 9) {
        fprintf(stderr,
                "gem cuda: device 0 (%s) has compute capability %d.%d; this build holds sm_90 "
                "code only\n",
                prop->name, prop->major, prop->minor);
        return GEM_ERR_NO_DEVICE;
    }
    return GEM_OK;
}

/* ---- small kernels: poison fill, read reduction --------------------------------------- */

extern "C" __global__ void gem_fill_bits_kernel(uint32_t *__restrict__ p, /* (n) */
                                                size_t n, uint32_t bits)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = bits;
}

gem_status gem_cu_fill_bits(float *p, size_t n, uint32_t bits, cudaStream_t stream)
{
    if (n == 0)
        return GEM_OK;
    size_t blocks = (n + 255) / 256;
    if (blocks > 4096)
        blocks = 4096;
    gem_fill_bits_kernel<<<(unsigned)blocks, 256, 0, stream>>>((uint32_t *)p, n, bits);
    GEM_CUDA_CHECK(cudaGetLastError());
    return GEM_OK;
}

/* Fills the read buffer with a non-zero pattern (timing zeros can flatter). */
extern "C" __global__ void gem_fill_pattern_kernel(float *__restrict__ p, /* (n) */ size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = (float)(i % 1021u) * (1.0f / 1021.0f) - 0.5f;
}

/* Read-only reduction: each block sums its grid-stride share of n4 float4
 * (four loads in flight per thread) and writes one float, so nothing can be
 * elided. */
extern "C" __global__ void __launch_bounds__(256)
    gem_read_reduce_kernel(const float4 *__restrict__ p, /* (n4) */ size_t n4,
                           float *__restrict__ block_sums /* (gridDim.x) */)
{
    __shared__ float red[8];
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.f;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        const float4 a = __ldg(p + i), b = __ldg(p + i + stride), c = __ldg(p + i + 2 * stride),
                     d = __ldg(p + i + 3 * stride);
        acc += (a.x + a.y + a.z + a.w) + (b.x + b.y + b.z + b.w) + (c.x + c.y + c.z + c.w) +
               (d.x + d.y + d.z + d.w);
    }
    for (; i < n4; i += stride) {
        const float4 a = __ldg(p + i);
        acc += a.x + a.y + a.z + a.w;
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

static int gem_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median read bandwidth over buf (bytes, a multiple of 16, already filled). */
static gem_status gem_cu_read_bw(const float *buf, size_t bytes, int64_t reps, int sm_count,
                                 cudaStream_t stream, double *bps)
{
    const unsigned blocks = (unsigned)(sm_count > 0 ? sm_count * 8 : 1056);
    float *sums = NULL;
    double *t = (double *)calloc((size_t)reps, sizeof(double));
    if (!t)
        return GEM_ERR_NOMEM;
    cudaEvent_t e0 = NULL, e1 = NULL;
    gem_status st = GEM_OK;
    cudaError_t ce;
#define GEM_BW_TRY(call)                                                                       \
    do {                                                                                       \
        if ((ce = (call)) != cudaSuccess) {                                                    \
            st = gem_cuda_fail(ce, #call, __FILE__, __LINE__);                                 \
            goto done;                                                                         \
        }                                                                                      \
    } while (0)
    GEM_BW_TRY(cudaMalloc((void **)&sums, blocks * sizeof(float)));
    GEM_BW_TRY(cudaEventCreate(&e0));
    GEM_BW_TRY(cudaEventCreate(&e1));
    for (int64_t r = -1; r < reps; r++) { /* r = -1: warm-up */
        GEM_BW_TRY(cudaEventRecord(e0, stream));
        gem_read_reduce_kernel<<<blocks, 256, 0, stream>>>((const float4 *)buf, bytes / 16, sums);
        GEM_BW_TRY(cudaGetLastError());
        GEM_BW_TRY(cudaEventRecord(e1, stream));
        GEM_BW_TRY(cudaEventSynchronize(e1));
        float ms = 0.f;
        GEM_BW_TRY(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0)
            t[r] = (double)ms * 1e-3;
    }
    qsort(t, (size_t)reps, sizeof(double), gem_cmp_double);
    *bps = (double)(bytes / 16 * 16) / t[reps / 2];
done:
#undef GEM_BW_TRY
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    if (sums)
        cudaFree(sums);
    free(t);
    return st;
}

/* ---- the engine's implementation ----------------------------------------------------- */

typedef struct cu_impl {
    cudaDeviceProp prop;
    char desc[384];
    cudaStream_t stream;
    cudaEvent_t ev0, ev1;
    int stages, vshare; /* fused variant (gem/cuda.h) */

    gem_attn_shape shape; /* capacity == live on the device */
    int loaded, ran;
    float *q;                      /* (n_q_heads, 512) */
    float *k[GEM_CU_MAX_COPIES];   /* each (n_kv_heads, live, 512) */
    float *v[GEM_CU_MAX_COPIES];   /* each (n_kv_heads, live, 512) */
    int64_t copies, next_copy;
    size_t out_elems;
    float *out;          /* (n_q_heads, 512) floats + GEM_GUARD_BYTES guard */
    float *scratch;      /* route scratch */
    size_t scratch_cap;  /* bytes allocated at scratch */

    float *bw_buf;       /* read-bandwidth buffer */
    size_t bw_bytes;
} cu_impl;

static void cu_free_inputs(cu_impl *c)
{
    if (c->q)
        cudaFree(c->q);
    c->q = NULL;
    for (int64_t i = 0; i < GEM_CU_MAX_COPIES; i++) {
        if (c->k[i])
            cudaFree(c->k[i]);
        if (c->v[i])
            cudaFree(c->v[i]);
        c->k[i] = c->v[i] = NULL;
    }
    if (c->out)
        cudaFree(c->out);
    c->out = NULL;
    c->loaded = c->ran = 0;
    c->copies = c->next_copy = 0;
}

static void cu_destroy(void *impl)
{
    cu_impl *c = (cu_impl *)impl;
    if (!c)
        return;
    cu_free_inputs(c);
    if (c->scratch)
        cudaFree(c->scratch);
    if (c->bw_buf)
        cudaFree(c->bw_buf);
    if (c->ev0)
        cudaEventDestroy(c->ev0);
    if (c->ev1)
        cudaEventDestroy(c->ev1);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    free(c);
}

static gem_status cu_create_inner(cu_impl *c)
{
    gem_status st = gem_cu_open_device(&c->prop);
    if (st != GEM_OK)
        return st;
    gem_cuda_fused_config cfg;
    st = gem_cuda_fused_config_from_env(&cfg);
    if (st != GEM_OK)
        return st;
    c->stages = (int)cfg.stages;
    c->vshare = (int)cfg.vshare;
    GEM_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    GEM_CUDA_CHECK(cudaEventCreate(&c->ev0));
    GEM_CUDA_CHECK(cudaEventCreate(&c->ev1));
    st = gem_cu_fused_prepare();
    if (st != GEM_OK)
        return st;
    snprintf(c->desc, sizeof c->desc,
             "%s, sm_%d%d, %d SMs, %.0f GiB; fused staging: %d stage%s (%s), V per %s",
             c->prop.name, c->prop.major, c->prop.minor, c->prop.multiProcessorCount,
             (double)c->prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), c->stages,
             c->stages == 1 ? "" : "s",
             c->stages == 0   ? "direct register loads"
             : c->stages == 1 ? "plain loads"
             : c->vshare == 3 ? "bulk copies on mbarriers"
                              : "cp.async",
             c->vshare == 7   ? "thread (4 dims of all 8 heads, 16-byte loads, L1 no-allocate, "
                                "L2 evict-first, Q in shared memory, next V issued after the "
                                "dots, one-round reducer), QK per thread too"
             : c->vshare == 6 ? "thread (4 dims of all 8 heads, 16-byte loads, L1 no-allocate, "
                                "L2 evict-first, one-round reducer), QK per thread too"
             : c->vshare == 5 ? "thread (4 dims of all 8 heads, 16-byte loads, L1 no-allocate, "
                                "L2 evict-first), QK per thread too"
             : c->vshare == 4 ? "thread (4 dims of all 8 heads, 16-byte loads), QK per thread too"
             : c->vshare == 3 ? "thread (4 dims of all 8 heads), QK per thread too"
             : c->vshare == 2 ? "thread (all 8 heads), QK per thread too"
             : c->vshare == 1 ? "thread (all 8 heads)"
                              : "warp (one head)");
    return GEM_OK;
}

static gem_status cu_create(int64_t threads, void **impl)
{
    (void)threads; /* the GPU has no thread-count knob */
    *impl = NULL;
    cu_impl *c = (cu_impl *)calloc(1, sizeof *c);
    if (!c)
        return GEM_ERR_NOMEM;
    gem_status st = cu_create_inner(c);
    if (st != GEM_OK) {
        cu_destroy(c);
        return st;
    }
    *impl = c;
    return GEM_OK;
}

static int64_t cu_threads(const void *impl)
{
    (void)impl;
    return 1;
}

static const char *cu_describe(const void *impl) { return ((const cu_impl *)impl)->desc; }

static int cu_shape_supported(const gem_attn_shape *s)
{
    return s->dk == GEM_CU_D && s->dv == GEM_CU_D && s->n_q_heads == GEM_CU_GROUP * s->n_kv_heads &&
           s->n_kv_heads <= 65535 / GEM_CU_GROUP;
}

static gem_status cu_load_inner(cu_impl *c, const gem_attn_shape *shape, const gem_attn_inputs *in,
                                int64_t copies)
{
    size_t q_elems = 0, out_elems = 0, row_elems = 0, head_bytes = 0, copy_bytes = 0, out_bytes = 0;
    if (gem_mul_size((size_t)shape->n_q_heads, (size_t)shape->dk, &q_elems) ||
        gem_mul_size((size_t)shape->n_q_heads, (size_t)shape->dv, &out_elems) ||
        gem_mul_size((size_t)shape->live, (size_t)shape->dk, &row_elems) ||
        gem_mul_size(row_elems, sizeof(float), &head_bytes) ||
        gem_mul_size(head_bytes, (size_t)shape->n_kv_heads, &copy_bytes) ||
        gem_mul_size(out_elems, sizeof(float), &out_bytes) ||
        gem_add_size(out_bytes, GEM_GUARD_BYTES, &out_bytes))
        return GEM_ERR_OVERFLOW;
    if (shape->dk != shape->dv)
        return GEM_ERR_UNSUPPORTED; /* device rows are laid out for dk = dv */
    GEM_CUDA_CHECK(cudaMalloc((void **)&c->q, q_elems * sizeof(float)));
    GEM_CUDA_CHECK(cudaMemcpy(c->q, in->q, q_elems * sizeof(float), cudaMemcpyHostToDevice));
    GEM_CUDA_CHECK(cudaMalloc((void **)&c->out, out_bytes));
    for (int64_t i = 0; i < copies; i++) {
        GEM_CUDA_CHECK(cudaMalloc((void **)&c->k[i], copy_bytes));
        GEM_CUDA_CHECK(cudaMalloc((void **)&c->v[i], copy_bytes));
        if (i > 0) {
            GEM_CUDA_CHECK(cudaMemcpy(c->k[i], c->k[0], copy_bytes, cudaMemcpyDeviceToDevice));
            GEM_CUDA_CHECK(cudaMemcpy(c->v[i], c->v[0], copy_bytes, cudaMemcpyDeviceToDevice));
            continue;
        }
        /* host rows [0, live) of each KV head sit at g * capacity * dk */
        for (int64_t g = 0; g < shape->n_kv_heads; g++) {
            const size_t src = (size_t)g * (size_t)shape->capacity * (size_t)shape->dk;
            const size_t dst = (size_t)g * row_elems;
            GEM_CUDA_CHECK(cudaMemcpy(c->k[0] + dst, in->k + src, head_bytes,
                                      cudaMemcpyHostToDevice));
            GEM_CUDA_CHECK(cudaMemcpy(c->v[0] + dst, in->v + src, head_bytes,
                                      cudaMemcpyHostToDevice));
        }
    }
    c->shape = *shape;
    c->shape.capacity = shape->live;
    c->copies = copies;
    c->next_copy = 0;
    c->out_elems = out_elems;
    c->loaded = 1;
    return GEM_OK;
}

static gem_status cu_load(void *impl, const gem_attn_shape *shape, const gem_attn_inputs *in,
                          int64_t copies)
{
    cu_impl *c = (cu_impl *)impl;
    if (copies < 1 || copies > GEM_CU_MAX_COPIES)
        return GEM_ERR_PARAM;
    cu_free_inputs(c);
    gem_status st = cu_load_inner(c, shape, in, copies);
    if (st != GEM_OK)
        cu_free_inputs(c);
    return st;
}

/* Scratch bytes of a route on the loaded shape. */
static gem_status cu_route_scratch(const cu_impl *c, gem_route route, const gem_route_params *p,
                                   size_t *bytes)
{
    const gem_attn_shape *s = &c->shape;
    if (route == GEM_ROUTE_FUSED) {
        gem_online_scratch sc;
        gem_status st = gem_attention_online_scratch_bytes(p->partitions, s->n_q_heads, s->dv, &sc);
        if (st != GEM_OK)
            return st;
        *bytes = sc.total_bytes;
        return GEM_OK;
    }
    if (route == GEM_ROUTE_BASELINE) {
        size_t a = 0, b = 0;
        if (gem_mul_size((size_t)s->n_q_heads, (size_t)s->live, &a) ||
            gem_mul_size(a, sizeof(float), &a) ||
            gem_mul_size((size_t)p->partitions, (size_t)s->n_q_heads, &b) ||
            gem_mul_size(b, (size_t)s->dv, &b) || gem_mul_size(b, sizeof(float), &b) ||
            gem_add_size(a, b, bytes))
            return GEM_ERR_OVERFLOW;
        return GEM_OK;
    }
    *bytes = 0;
    return GEM_OK;
}

static gem_status cu_scratch_bytes(const void *impl, gem_route route, const gem_route_params *p,
                                   size_t *bytes)
{
    return cu_route_scratch((const cu_impl *)impl, route, p, bytes);
}

static gem_status cu_ensure_scratch(cu_impl *c, size_t bytes)
{
    if (bytes <= c->scratch_cap)
        return GEM_OK;
    if (c->scratch)
        cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_cap = 0;
    GEM_CUDA_CHECK(cudaMalloc((void **)&c->scratch, bytes));
    c->scratch_cap = bytes;
    return GEM_OK;
}

static gem_status cu_run(void *impl, gem_route route, const gem_route_params *params,
                         double *seconds)
{
    cu_impl *c = (cu_impl *)impl;
    const gem_attn_shape *s = &c->shape;
    if (route != GEM_ROUTE_BASELINE && route != GEM_ROUTE_FUSED) {
        fprintf(stderr, "gem cuda: route '%s' runs on the CPU backend only\n",
                gem_route_name(route));
        return GEM_ERR_UNSUPPORTED;
    }
    if (!cu_shape_supported(s)) {
        fprintf(stderr,
                "gem cuda: the CUDA kernels cover dk = dv = 512 with 8 query heads per KV head; "
                "got dk %lld, dv %lld, %lld/%lld heads\n",
                (long long)s->dk, (long long)s->dv, (long long)s->n_q_heads,
                (long long)s->n_kv_heads);
        return GEM_ERR_UNSUPPORTED;
    }
    if (params->partitions < 1 || params->partitions > 65535)
        return GEM_ERR_PARAM;
    gem_cu_fused_variant var = {(int)params->tile, c->stages, c->vshare};
    if (route == GEM_ROUTE_FUSED) {
        gem_cu_kernel_ref a, b;
        if (gem_cu_fused_kernels(&var, &a, &b) != GEM_OK) {
            fprintf(stderr,
                    "gem cuda: no compiled fused first pass for tile %lld with "
                    "GEM_CUDA_FUSED_STAGES=%d, GEM_CUDA_FUSED_VSHARE=%d (tiles 4, 8, 16; "
                    "VSHARE 2: tiles 4 and 8; STAGES 0: VSHARE 2, 4, 5, 6 or 7; VSHARE 3: tiles "
                    "8 and 16 with STAGES 2 or 3; VSHARE 4 to 7: tile 8 with STAGES 0)\n",
                    (long long)params->tile, c->stages, c->vshare);
            return GEM_ERR_PARAM;
        }
    }
    size_t sbytes = 0;
    gem_status st = cu_route_scratch(c, route, params, &sbytes);
    if (st != GEM_OK)
        return st;
    st = cu_ensure_scratch(c, sbytes);
    if (st != GEM_OK)
        return st;

    /* poison output, guard and scratch; none of it is timed */
    st = gem_cu_fill_bits(c->out, c->out_elems, GEM_POISON_BITS, c->stream);
    if (st != GEM_OK)
        return st;
    GEM_CUDA_CHECK(cudaMemsetAsync(c->out + c->out_elems, 0xA5, GEM_GUARD_BYTES, c->stream));
    st = gem_cu_fill_bits(c->scratch, sbytes / sizeof(float), GEM_POISON_BITS, c->stream);
    if (st != GEM_OK)
        return st;

    const int64_t copy = c->next_copy;
    c->next_copy = (c->next_copy + 1) % c->copies;
    GEM_CUDA_CHECK(cudaEventRecord(c->ev0, c->stream));
    if (route == GEM_ROUTE_FUSED) {
        const size_t ms = (size_t)params->partitions * (size_t)s->n_q_heads;
        gem_cu_fused_args a;
        a.q = c->q;
        a.k = c->k[copy];
        a.v = c->v[copy];
        a.part_m = c->scratch;
        a.part_s = c->scratch + ms;
        a.part_o = c->scratch + 2 * ms;
        a.out = c->out;
        a.n_kv_heads = s->n_kv_heads;
        a.live = s->live;
        a.partitions = params->partitions;
        a.scale = s->scale;
        st = gem_cu_fused_launch(&var, &a, c->stream);
    } else {
        gem_cu_baseline_args a;
        a.q = c->q;
        a.k = c->k[copy];
        a.v = c->v[copy];
        a.scores = c->scratch;
        a.partials = c->scratch + (size_t)s->n_q_heads * (size_t)s->live;
        a.out = c->out;
        a.n_kv_heads = s->n_kv_heads;
        a.live = s->live;
        a.value_partitions = params->partitions;
        a.scale = s->scale;
        st = gem_cu_baseline_launch(&a, c->stream);
    }
    if (st != GEM_OK)
        return st;
    GEM_CUDA_CHECK(cudaEventRecord(c->ev1, c->stream));
    GEM_CUDA_CHECK(cudaEventSynchronize(c->ev1));
    float ms = 0.f;
    GEM_CUDA_CHECK(cudaEventElapsedTime(&ms, c->ev0, c->ev1));
    if (seconds)
        *seconds = (double)ms * 1e-3;
    c->ran = 1;
    return GEM_OK;
}

static gem_status cu_output(void *impl, float *out, size_t out_elems, gem_output_audit *audit)
{
    cu_impl *c = (cu_impl *)impl;
    if (!c->ran)
        return GEM_ERR_STATE;
    if (out_elems < c->out_elems)
        return GEM_ERR_RANGE;
    float *host = gem_guard_alloc(c->out_elems);
    if (!host)
        return GEM_ERR_NOMEM;
    cudaError_t e = cudaMemcpy(host, c->out, c->out_elems * sizeof(float) + GEM_GUARD_BYTES,
                               cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        gem_guard_free(host);
        return gem_cuda_fail(e, "cudaMemcpy(host, c->out, ...)", __FILE__, __LINE__);
    }
    /* the device guard was written with the same 0xA5 bytes gem_guard_check expects */
    gem_guard_check(host, c->out_elems, &audit->unwritten, &audit->guard_ok);
    memcpy(out, host, c->out_elems * sizeof(float));
    gem_guard_free(host);
    return GEM_OK;
}

static gem_status cu_read_bandwidth(void *impl, size_t bytes, int64_t reps, double *bps)
{
    cu_impl *c = (cu_impl *)impl;
    bytes = bytes / 16 * 16;
    if (c->bw_bytes != bytes) {
        if (c->bw_buf)
            cudaFree(c->bw_buf);
        c->bw_buf = NULL;
        c->bw_bytes = 0;
        GEM_CUDA_CHECK(cudaMalloc((void **)&c->bw_buf, bytes));
        c->bw_bytes = bytes;
        gem_fill_pattern_kernel<<<4096, 256, 0, c->stream>>>(c->bw_buf, bytes / sizeof(float));
        GEM_CUDA_CHECK(cudaGetLastError());
    }
    return gem_cu_read_bw(c->bw_buf, bytes, reps, c->prop.multiProcessorCount, c->stream, bps);
}

extern "C" const gem_backend_ops gem_cuda_backend_ops = {
    cu_create, cu_destroy, cu_threads,       cu_describe,     cu_load,
    cu_run,    cu_output,  cu_read_bandwidth, cu_scratch_bytes,
};

/* ---- gem/cuda.h ------------------------------------------------------------------------ */

extern "C" gem_status gem_cuda_device_query(gem_cuda_device_info *out)
{
    if (!out)
        return GEM_ERR_NULL;
    cudaDeviceProp prop;
    gem_status st = gem_cu_open_device(&prop);
    if (st != GEM_OK)
        return st;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->major = prop.major;
    out->minor = prop.minor;
    out->sm_count = prop.multiProcessorCount;
    out->warp_size = prop.warpSize;
    out->shared_mem_per_block = prop.sharedMemPerBlock;
    out->shared_mem_per_block_optin = prop.sharedMemPerBlockOptin;
    out->shared_mem_per_sm = prop.sharedMemPerMultiprocessor;
    out->regs_per_sm = prop.regsPerMultiprocessor;
    out->l2_bytes = (size_t)prop.l2CacheSize;
    out->global_mem_bytes = prop.totalGlobalMem;
    return GEM_OK;
}

static gem_status gem_env_int(const char *name, int64_t lo, int64_t hi, int64_t dflt,
                              int64_t *out)
{
    const char *s = getenv(name);
    if (!s || !*s) {
        *out = dflt;
        return GEM_OK;
    }
    char *end = NULL;
    const long long v = strtoll(s, &end, 10);
    if (*end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "gem cuda: %s='%s' is not an integer in [%lld, %lld]\n", name, s,
                (long long)lo, (long long)hi);
        return GEM_ERR_PARAM;
    }
    *out = v;
    return GEM_OK;
}

extern "C" gem_status gem_cuda_fused_config_from_env(gem_cuda_fused_config *cfg)
{
    if (!cfg)
        return GEM_ERR_NULL;
    gem_status st = gem_env_int("GEM_CUDA_FUSED_STAGES", 0, 3, 1, &cfg->stages);
    if (st != GEM_OK)
        return st;
    return gem_env_int("GEM_CUDA_FUSED_VSHARE", 0, 7, 0, &cfg->vshare);
}

static gem_status gem_cu_kernel_info(const gem_cu_kernel_ref *r, int64_t grid,
                                     gem_cuda_kernel_info *out)
{
    cudaFuncAttributes fa;
    GEM_CUDA_CHECK(cudaFuncGetAttributes(&fa, r->func));
    int active = 0;
    GEM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&active, r->func, r->threads,
                                                                 r->dynamic_shared));
    int warp = 0;
    GEM_CUDA_CHECK(cudaDeviceGetAttribute(&warp, cudaDevAttrWarpSize, 0));
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", r->name);
    snprintf(out->role, sizeof out->role, "%s", r->role);
    out->max_threads_per_block = fa.maxThreadsPerBlock;
    out->static_shared_bytes = fa.sharedSizeBytes;
    out->dynamic_shared_bytes = r->dynamic_shared;
    out->registers = fa.numRegs;
    out->local_bytes = fa.localSizeBytes;
    out->threads_dispatched = r->threads;
    out->warps_dispatched = (r->threads + warp - 1) / warp;
    out->warp_size = warp;
    out->max_active_blocks_per_sm = active;
    out->grid_blocks = grid;
    return GEM_OK;
}

extern "C" gem_status gem_cuda_kernel_query(const gem_cuda_fused_config *cfg, int64_t n_kv_heads,
                                            int64_t live, gem_cuda_kernel_info *out, size_t cap,
                                            size_t *n)
{
    if (!cfg || !out || !n)
        return GEM_ERR_NULL;
    *n = 0;
    if (cap < 6)
        return GEM_ERR_RANGE;
    if (n_kv_heads < 1 || n_kv_heads > 65535 / GEM_CU_GROUP || live < 1 || cfg->partitions < 1 ||
        cfg->partitions > 65535)
        return GEM_ERR_PARAM;
    cudaDeviceProp prop;
    gem_status st = gem_cu_open_device(&prop);
    if (st != GEM_OK)
        return st;
    gem_cu_fused_variant var = {(int)cfg->tile, (int)cfg->stages, (int)cfg->vshare};
    gem_cu_kernel_ref refs[6];
    st = gem_cu_fused_kernels(&var, &refs[0], &refs[1]);
    if (st != GEM_OK)
        return st;
    st = gem_cu_fused_prepare();
    if (st != GEM_OK)
        return st;
    gem_cu_baseline_kernels(&refs[2]);
    int64_t grids[6];
    grids[0] = gem_cu_fused_first_blocks(n_kv_heads, cfg->partitions);
    grids[1] = gem_cu_fused_reducer_blocks(n_kv_heads * GEM_CU_GROUP);
    gem_cu_baseline_blocks(n_kv_heads, live, 16, &grids[2]);
    for (int i = 0; i < 6; i++) {
        st = gem_cu_kernel_info(&refs[i], grids[i], &out[i]);
        if (st != GEM_OK)
            return st;
    }
    *n = 6;
    return GEM_OK;
}

extern "C" gem_status gem_cuda_copy_bandwidth(size_t bytes, int64_t reps, double *bps)
{
    if (!bps)
        return GEM_ERR_NULL;
    if (bytes < ((size_t)1 << 20) || reps < 1 || reps > 10000)
        return GEM_ERR_PARAM;
    cudaDeviceProp prop;
    gem_status st = gem_cu_open_device(&prop);
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

extern "C" gem_status gem_cuda_read_bandwidth(size_t bytes, int64_t reps, double *bps)
{
    if (!bps)
        return GEM_ERR_NULL;
    if (bytes < ((size_t)1 << 20) || reps < 1 || reps > 10000)
        return GEM_ERR_PARAM;
    cudaDeviceProp prop;
    gem_status st = gem_cu_open_device(&prop);
    if (st != GEM_OK)
        return st;
    bytes = bytes / 16 * 16;
    float *buf = NULL;
    GEM_CUDA_CHECK(cudaMalloc((void **)&buf, bytes));
    gem_fill_pattern_kernel<<<4096, 256>>>(buf, bytes / sizeof(float));
    cudaError_t ce = cudaGetLastError();
    if (ce != cudaSuccess) {
        cudaFree(buf);
        return gem_cuda_fail(ce, "gem_fill_pattern_kernel<<<...>>>", __FILE__, __LINE__);
    }
    ce = cudaDeviceSynchronize();
    if (ce != cudaSuccess) {
        cudaFree(buf);
        return gem_cuda_fail(ce, "cudaDeviceSynchronize()", __FILE__, __LINE__);
    }
    st = gem_cu_read_bw(buf, bytes, reps, prop.multiProcessorCount, 0, bps);
    cudaFree(buf);
    return st;
}
