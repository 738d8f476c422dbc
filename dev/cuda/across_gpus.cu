/*
One full-attention layer's decode with the cache split by rows across every GPU the process sees
(gem_decode_across), against gem_decode of the whole cache on GPU 0: Gemma 4's full-layer shape,
32 query heads over 4 KV heads, dk = dv = 512, scale 1.0, K and V F32 (or BF16 with --bf16),
head-major. Piece i holds rows [i L / n, (i + 1) L / n) on device i mod devices (n = --pieces,
default the device count, at least 2); each piece is a tensor of its own rows on its device,
filled on the device from the same hash of (head, row, element) as the whole cache on GPU 0, so
both hold the same values. Peer access is enabled between every pair that can have it.

Validation before anything is timed: at 4,096 rows both against the double reference of
common.h (NMSE <= 1e-10), and at every timed length the split against the whole, NMSE <= 1e-10
(the merge of different pieces is not the same bits) and a bitwise repeat of the split.

Timing: A = gem_decode on GPU 0, B = gem_decode_across, A B B A per round; each sample is
--calls calls back to back timed on the host after every device is idle (the split's calls
launch a state, a copy and an event per piece, and that host time is part of its cost), the
median and spread over --rounds rounds. GB/s = K+V bytes of the whole / median time.

./across_gpus [--lengths 8192,131072] [--pieces N] [--rounds 5] [--calls 20] [--bf16]
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "common.h"
#include "gem/decode.h"

#define NQ 32
#define NKV 4
#define D 512
#define MAX_PIECES 16

/* The value of (g, t, i) of tensor `which` (0 K, 1 V) over L rows: uniform in [-1, 1). */
__device__ __host__ static inline float cache_value(int which, int64_t g, int64_t t, int64_t i)
{
    uint64_t z = ((uint64_t)which << 62) ^ (((uint64_t)g << 48) + ((uint64_t)t << 10) + (uint64_t)i);
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * 0x1p-23f - 1.0f;
}

/* rows [t0, t0 + rows) of every head into p (NKV, rows, D), F32 or BF16 */
template <typename T>
__global__ void fill_rows(T *p, int which, int64_t t0, int64_t rows)
{
    const int64_t n = (int64_t)NKV * rows * D;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = e % D, r = (e / D) % rows, g = e / (D * rows);
        const float x = cache_value(which, g, t0 + r, i);
        if constexpr (sizeof(T) == 4)
            p[e] = x;
        else
            p[e] = __float2bfloat16_rn(x);
    }
}

typedef struct piece_mem {
    int device;
    gem_decode_ctx *ctx;
    cudaStream_t stream;
    float *q, *state;
    void *k, *v, *ws;
    size_t ws_bytes;
    gem_kv_view view;
} piece_mem;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sync_all(int devices)
{
    for (int d = 0; d < devices; d++) {
        cudaCheck(cudaSetDevice(d));
        cudaCheck(cudaDeviceSynchronize());
    }
    cudaCheck(cudaSetDevice(0));
}

static double nmse(const float *x, const float *y, int64_t n)
{
    double a = 0, b = 0;
    for (int64_t i = 0; i < n; i++) {
        a += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        b += (double)y[i] * y[i];
    }
    return a / b;
}

typedef struct layer {
    int64_t live;
    int n;
    piece_mem p[MAX_PIECES];
    gem_decode_piece pieces[MAX_PIECES];
    /* GPU 0: the whole cache */
    gem_decode_ctx *ctx0;
    cudaStream_t s0;
    float *q0, *out0, *out1, *states;
    void *k0, *v0, *ws0;
    size_t ws0_bytes;
    gem_kv_view view0;
    gem_decode_shape shape;
} layer;

static void alloc_rows(void **k, void **v, int64_t t0, int64_t rows, gem_dtype t)
{
    const size_t es = t == GEM_DTYPE_F32 ? 4 : 2, bytes = (size_t)NKV * rows * D * es;
    cudaCheck(cudaMalloc(k, bytes));
    cudaCheck(cudaMalloc(v, bytes));
    if (t == GEM_DTYPE_F32) {
        fill_rows<float><<<1024, 256>>>((float *)*k, 0, t0, rows);
        fill_rows<float><<<1024, 256>>>((float *)*v, 1, t0, rows);
    } else {
        fill_rows<__nv_bfloat16><<<1024, 256>>>((__nv_bfloat16 *)*k, 0, t0, rows);
        fill_rows<__nv_bfloat16><<<1024, 256>>>((__nv_bfloat16 *)*v, 1, t0, rows);
    }
    cudaCheck(cudaGetLastError());
}

static gem_kv_view view_of(const void *k, const void *v, int64_t rows, gem_dtype t)
{
    gem_kv_view w;
    memset(&w, 0, sizeof w);
    w.k = k;
    w.v = v;
    w.k_dtype = w.v_dtype = t;
    w.k_head_stride = w.v_head_stride = rows * D;
    w.k_token_stride = w.v_token_stride = D;
    w.live = w.capacity = rows;
    return w;
}

static void layer_make(layer *L, int64_t live, int n, int devices, gem_dtype t, const float *hq)
{
    memset(L, 0, sizeof *L);
    L->live = live;
    L->n = n;
    L->shape = (gem_decode_shape){NQ, NKV, D, D, 1.0f};
    const size_t sf_bytes = (size_t)GEM_DECODE_STATE_FLOATS(NQ, D) * sizeof(float);
    for (int i = 0; i < n; i++) {
        piece_mem *m = &L->p[i];
        const int64_t a = live * i / n, b = live * (i + 1) / n;
        m->device = i % devices;
        cudaCheck(cudaSetDevice(m->device));
        GEM_TRY(gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &m->ctx));
        cudaCheck(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
        cudaCheck(cudaMalloc(&m->q, NQ * D * sizeof(float)));
        cudaCheck(cudaMemcpy(m->q, hq, NQ * D * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMalloc(&m->state, sf_bytes));
        alloc_rows(&m->k, &m->v, a, b - a, t);
        m->view = view_of(m->k, m->v, b - a, t);
        GEM_TRY(gem_decode_workspace_bytes(m->ctx, &L->shape, b - a, NULL, &m->ws_bytes));
        cudaCheck(cudaMalloc(&m->ws, m->ws_bytes));
        L->pieces[i] = (gem_decode_piece){m->ctx, m->q, &m->view, m->state, m->ws, m->ws_bytes,
                                          m->stream};
    }
    cudaCheck(cudaSetDevice(0));
    GEM_TRY(gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &L->ctx0));
    cudaCheck(cudaStreamCreateWithFlags(&L->s0, cudaStreamNonBlocking));
    cudaCheck(cudaMalloc(&L->q0, NQ * D * sizeof(float)));
    cudaCheck(cudaMemcpy(L->q0, hq, NQ * D * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMalloc(&L->out0, NQ * D * sizeof(float)));
    cudaCheck(cudaMalloc(&L->out1, NQ * D * sizeof(float)));
    cudaCheck(cudaMalloc(&L->states, sf_bytes * (size_t)n));
    alloc_rows(&L->k0, &L->v0, 0, live, t);
    L->view0 = view_of(L->k0, L->v0, live, t);
    GEM_TRY(gem_decode_workspace_bytes(L->ctx0, &L->shape, live, NULL, &L->ws0_bytes));
    cudaCheck(cudaMalloc(&L->ws0, L->ws0_bytes));
    sync_all(devices);
}

static void layer_free(layer *L, int devices)
{
    sync_all(devices);
    for (int i = 0; i < L->n; i++) {
        piece_mem *m = &L->p[i];
        cudaCheck(cudaSetDevice(m->device));
        cudaFree(m->q);
        cudaFree(m->state);
        cudaFree(m->k);
        cudaFree(m->v);
        cudaFree(m->ws);
        cudaStreamDestroy(m->stream);
        gem_decode_ctx_destroy(m->ctx);
    }
    cudaCheck(cudaSetDevice(0));
    cudaFree(L->q0);
    cudaFree(L->out0);
    cudaFree(L->out1);
    cudaFree(L->states);
    cudaFree(L->k0);
    cudaFree(L->v0);
    cudaFree(L->ws0);
    cudaStreamDestroy(L->s0);
    gem_decode_ctx_destroy(L->ctx0);
}

static void run_whole(layer *L)
{
    GEM_TRY(gem_decode(L->ctx0, &L->shape, L->q0, &L->view0, L->out0, L->ws0, L->ws0_bytes, NULL,
                       L->s0));
}

static void run_split(layer *L)
{
    GEM_TRY(gem_decode_across(&L->shape, L->pieces, L->n, L->ctx0, L->states, L->out1, L->s0));
}

/* The split against the whole (and at `ref_check` the whole against the double reference);
 * exits on a failure. */
static void validate(layer *L, int devices, const float *hq, gem_dtype t, int ref_check)
{
    const int64_t n = NQ * D;
    float *a = (float *)malloc(n * sizeof(float)), *b = (float *)malloc(n * sizeof(float)),
          *c = (float *)malloc(n * sizeof(float));
    run_whole(L);
    run_split(L);
    sync_all(devices);
    cudaCheck(cudaMemcpy(a, L->out0, n * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(b, L->out1, n * sizeof(float), cudaMemcpyDeviceToHost));
    run_split(L);
    sync_all(devices);
    cudaCheck(cudaMemcpy(c, L->out1, n * sizeof(float), cudaMemcpyDeviceToHost));
    const double e = nmse(b, a, n);
    int ok = e <= 1e-10 && memcmp(b, c, n * sizeof(float)) == 0;
    printf("validate %7lld rows, %d pieces: split vs whole NMSE %.2e, repeat %s", (long long)L->live,
           L->n, e, memcmp(b, c, n * sizeof(float)) == 0 ? "bitwise" : "DIFFERS");
    if (ref_check) {
        const int64_t live = L->live, elems = (int64_t)NKV * live * D;
        float *hk = (float *)malloc(elems * sizeof(float)), *hv = (float *)malloc(elems * sizeof(float));
        double *ref = (double *)malloc(n * sizeof(double));
        float *rf = (float *)malloc(n * sizeof(float));
        for (int64_t g = 0; g < NKV; g++)
            for (int64_t r = 0; r < live; r++)
                for (int64_t i = 0; i < D; i++) {
                    float x = cache_value(0, g, r, i), y = cache_value(1, g, r, i);
                    if (t == GEM_DTYPE_BF16) {
                        x = __bfloat162float(__float2bfloat16_rn(x));
                        y = __bfloat162float(__float2bfloat16_rn(y));
                    }
                    hk[(g * live + r) * D + i] = x;
                    hv[(g * live + r) * D + i] = y;
                }
        reference(ref, hq, hk, hv, live, 1.0f, NQ, NQ / NKV, D);
        for (int64_t i = 0; i < n; i++)
            rf[i] = (float)ref[i];
        const double ea = nmse(a, rf, n), eb = nmse(b, rf, n);
        printf("; vs the double reference: whole %.2e, split %.2e", ea, eb);
        ok = ok && ea <= 1e-10 && eb <= 1e-10;
        free(hk);
        free(hv);
        free(ref);
        free(rf);
    }
    printf("%s\n", ok ? "" : "  FAILED");
    free(a);
    free(b);
    free(c);
    if (!ok)
        exit(1);
}

static double sample(layer *L, int devices, int split, int calls)
{
    sync_all(devices);
    const double t0 = now();
    for (int c = 0; c < calls; c++)
        split ? run_split(L) : run_whole(L);
    sync_all(devices);
    return (now() - t0) / calls;
}

int main(int argc, char **argv)
{
    int64_t lengths[16] = {8192, 32768, 131072};
    int n_lengths = 3, pieces = 0, rounds = 5, calls = 20;
    gem_dtype t = GEM_DTYPE_F32;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--lengths") && i + 1 < argc) {
            n_lengths = 0;
            for (char *s = strtok(argv[++i], ","); s && n_lengths < 16; s = strtok(NULL, ","))
                lengths[n_lengths++] = atoll(s);
        } else if (!strcmp(argv[i], "--pieces") && i + 1 < argc) {
            pieces = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--calls") && i + 1 < argc) {
            calls = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--bf16")) {
            t = GEM_DTYPE_BF16;
        } else {
            fprintf(stderr, "usage: across_gpus [--lengths L,...] [--pieces N] [--rounds R] "
                            "[--calls C] [--bf16]\n");
            return 2;
        }
    }
    int devices = 0, pairs = 0;
    cudaCheck(cudaGetDeviceCount(&devices));
    for (int a = 0; a < devices; a++)
        for (int b = 0; b < devices; b++) {
            int can = 0;
            if (a != b && cudaDeviceCanAccessPeer(&can, a, b) == cudaSuccess && can) {
                cudaCheck(cudaSetDevice(a));
                cudaCheck(cudaDeviceEnablePeerAccess(b, 0));
                pairs++;
            }
        }
    cudaCheck(cudaSetDevice(0));
    if (pieces < 1)
        pieces = devices < 2 ? 2 : devices;
    if (pieces > MAX_PIECES || rounds < 1 || calls < 1) {
        fprintf(stderr, "across_gpus: --pieces 1..%d, --rounds and --calls >= 1\n", MAX_PIECES);
        return 2;
    }
    printf("across_gpus: %d device(s), peer access between %d ordered pair(s), %d pieces, %s\n",
           devices, pairs, pieces, t == GEM_DTYPE_F32 ? "F32" : "BF16");
    float hq[NQ * D];
    fill(hq, NQ * D, 7);
    {
        layer L;
        layer_make(&L, 4096, pieces, devices, t, hq);
        validate(&L, devices, hq, t, 1);
        layer_free(&L, devices);
    }
    printf("%8s %6s %12s %12s %12s %12s %9s %10s\n", "rows", "pieces", "whole ms", "spread",
           "split ms", "spread", "speedup", "split GB/s");
    for (int li = 0; li < n_lengths; li++) {
        layer L;
        layer_make(&L, lengths[li], pieces, devices, t, hq);
        validate(&L, devices, hq, t, 0);
        double *a = (double *)malloc(2 * rounds * sizeof(double)), *b = a + rounds;
        for (int w = 0; w < 3; w++) { /* warm-up */
            sample(&L, devices, 0, 2);
            sample(&L, devices, 1, 2);
        }
        for (int r = 0; r < rounds; r++) { /* A B B A */
            a[r] = sample(&L, devices, 0, calls);
            b[r] = sample(&L, devices, 1, calls);
            const double b2 = sample(&L, devices, 1, calls), a2 = sample(&L, devices, 0, calls);
            a[r] = (a[r] + a2) / 2;
            b[r] = (b[r] + b2) / 2;
        }
        qsort(a, rounds, sizeof(double), cmp_double);
        qsort(b, rounds, sizeof(double), cmp_double);
        const double bytes = 2.0 * NKV * (double)lengths[li] * D * (t == GEM_DTYPE_F32 ? 4 : 2);
        printf("%8lld %6d %12.4f %12.4f %12.4f %12.4f %9.3f %10.0f\n", (long long)lengths[li],
               pieces, 1e3 * a[rounds / 2], 1e3 * (a[rounds - 1] - a[0]), 1e3 * b[rounds / 2],
               1e3 * (b[rounds - 1] - b[0]), a[rounds / 2] / b[rounds / 2],
               bytes / b[rounds / 2] / 1e9);
        free(a);
        layer_free(&L, devices);
    }
    return 0;
}
