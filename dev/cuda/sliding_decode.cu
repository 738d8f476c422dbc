/*
The library's fused route at Gemma 4's sliding-window shape, through gem_decode exactly as the
model decoder calls it: 32 query heads over 16 KV heads (two per KV head), dk = dv = 256,
scale 1.0, a token-major view (head stride 256, token stride 16 x 256, for K and for V) of a
ring of `window` = 1,024 rows (capacity max(1024, live), rows [0, live) taking part), K and V
both F32, both BF16 or both F16, the default config (NULL) unless --sweep names partitions.

First it validates, for every type and every config it will time: live 1, 13, 63, 64, 65,
1,000, 1,023, 1,024 and 4,097 against the double-precision reference of common.h (reading the
same rounded values the cache holds), NMSE <= 1e-10, every output element written (the output
is poisoned with NaN first, and every row of the cache past live is NaN), and a bitwise repeat.
Nothing is timed unless all of that holds.

Then it times, at each length (default 256, 512, 1,024, 4,096) and type: every config in turn
(order reversed every other round), each call alone on the stream, queued behind 50 us of GPU
work so that the host's validation and launches overlap the device as in a decode loop; CUDA
events around the call; the median and the 10th / 90th percentiles over --reps calls; the K/V
copies rotate (at least 1 GiB of them) so that no call finds its rows in the L2. GB/s = K+V
bytes of the live rows / median time. Beside it, two read probes of the same process:
  - the library's streaming-read probe (gem_engine_read_bandwidth: the best of its readers over
    4 GiB), the ceiling the docs measure every route against;
  - a same-bytes probe: one kernel that reads exactly the live K and V rows of a copy (the
    live rows of a token-major ring are contiguous) with 8 16-byte loads in flight per thread,
    timed like the decode: what one launch can read in that many bytes, launch and ramp
    included.

./sliding_decode                                  validate, then time the default
./sliding_decode --lengths 1024 --reps 500 --types f32
./sliding_decode --sweep 4,8,16,32,64             also validate and time these partition counts

H200 (132 SMs, CUDA 13.0; the 4 GiB probe 4,533 GB/s), the default at live 1,024: F32 0.0155 ms
(2,162 GB/s, 47.7% of the probe, 76.7% of the same-bytes probe's 0.0119 ms), BF16 0.0129 ms
(1,304 GB/s, 65% of the same-bytes probe), F16 the same; at 4,096 rows F32 reaches 77% of the
probe (90% of the same-bytes one). --sweep 2,4,8,12,16,24,32 at 64 .. 4,096 rows: P 16 the
fastest or within 2% up to 1,024 rows for every type and at every length for F32 (P 24 7%
faster for 16-bit caches from 2,048 rows, 20% slower for F32). Variants of the first pass
built from attn_fused_d256_body.cuh (not kept as versions here): 2 or 4 rows of loads in
flight per warp instead of 1 were 1-5% slower; an early trigger of the reducer 0.3-0.6 us
slower; contiguous rows per warp and 16-byte BF16 loads within 1%. docs/cuda.md has the table.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "common.h"
#include "sliding_case.h"

extern "C" {
#include "gem/decode.h"
#include "gem/engine.h"
}

#define MAX_CONFIGS 16
#define MAX_COPIES 256

/* ---- the same-bytes read probe -------------------------------------------------------------- */

/* Reads a (na float4) then b (nb float4) once, 8 16-byte loads in flight per thread
 * (grid-stride, L1 no-allocate, L2 evict-first), and writes one sum per block (sums: gridDim.x)
 * so that nothing is elided. */
__global__ void __launch_bounds__(256) same_bytes_probe(const float4 *__restrict__ a, size_t na,
                                                        const float4 *__restrict__ b, size_t nb,
                                                        float *__restrict__ sums)
{
    const int U = 8;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    const size_t n = na + nb, stride = (size_t)gridDim.x * blockDim.x;
    float acc = 0.f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += U * stride) {
        float4 x[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t j = i + u * stride;
            const float4 *p = j < na ? a + j : b + (j - na);
            if (j < n)
                asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, "
                             "[%4], %5;\n"
                             : "=f"(x[u].x), "=f"(x[u].y), "=f"(x[u].z), "=f"(x[u].w)
                             : "l"(p), "l"(pol)
                             : "memory");
            else
                x[u] = make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            acc += (x[u].x + x[u].y) + (x[u].z + x[u].w);
    }
    for (int off = 16; off > 0; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    __shared__ float red[8];
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int w = 0; w < 8; w++)
            s += red[w];
        sums[blockIdx.x] = s;
    }
}

/* ---- validation ----------------------------------------------------------------------------- */

/* Runs config cfg (NULL = default) twice on case c through gem_decode; 0 when NMSE <= 1e-10
 * against the double reference, every output finite and the repeat bitwise equal. */
static int validate(gem_decode_ctx *ctx, const host_case *c, const gem_decode_config *cfg,
                    cudaStream_t stream, const char *what)
{
    const gem_decode_shape shape = {NQ, NKV, D, D, 1.0f};
    double *ref = (double *)malloc(NQ * D * sizeof(double));
    float *out = (float *)malloc(NQ * D * sizeof(float)), *first = (float *)malloc(NQ * D * 4);
    reference(ref, c->q, c->kf, c->vf, c->live, 1.0f, NQ, GROUP, D);
    size_t ws_bytes = 0;
    if (gem_decode_workspace_bytes(ctx, &shape, c->live, cfg, &ws_bytes) != GEM_OK) {
        printf("%s: INVALID: no workspace size\n", what);
        free(ref);
        free(out);
        free(first);
        return 1;
    }
    void *dk, *dv, *ws;
    float *dq, *dout;
    cudaCheck(cudaMalloc(&dk, c->cache_bytes));
    cudaCheck(cudaMalloc(&dv, c->cache_bytes));
    cudaCheck(cudaMalloc(&ws, ws_bytes));
    cudaCheck(cudaMalloc(&dq, NQ * D * sizeof(float)));
    cudaCheck(cudaMalloc(&dout, NQ * D * sizeof(float)));
    cudaCheck(cudaMemcpy(dk, c->k, c->cache_bytes, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(dv, c->v, c->cache_bytes, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(dq, c->q, NQ * D * sizeof(float), cudaMemcpyHostToDevice));
    const gem_kv_view kv = view_of(c, dk, dv);
    int bad = 0;
    double nmse = 0;
    for (int rep = 0; rep < 2 && !bad; rep++) {
        cudaCheck(cudaMemsetAsync(dout, 0xFF, NQ * D * sizeof(float), stream)); /* NaN */
        cudaCheck(cudaMemsetAsync(ws, 0xFF, ws_bytes, stream));
        const gem_status st = gem_decode(ctx, &shape, dq, &kv, dout, ws, ws_bytes, cfg, stream);
        if (st != GEM_OK) {
            printf("%s: INVALID: gem_decode answers %s\n", what, gem_status_name(st));
            bad = 1;
            break;
        }
        cudaCheck(cudaStreamSynchronize(stream));
        cudaCheck(cudaMemcpy(out, dout, NQ * D * sizeof(float), cudaMemcpyDeviceToHost));
        if (rep == 0) {
            double num = 0, den = 0;
            size_t nonfinite = 0;
            for (int j = 0; j < NQ * D; j++) {
                nonfinite += !isfinite(out[j]);
                num += (out[j] - ref[j]) * (out[j] - ref[j]);
                den += ref[j] * ref[j];
            }
            nmse = num / den;
            if (nonfinite || !(nmse <= 1e-10)) {
                printf("%s: INVALID: nmse %.3g, %zu outputs not finite\n", what, nmse, nonfinite);
                bad = 1;
            }
            memcpy(first, out, NQ * D * sizeof(float));
        } else if (memcmp(first, out, NQ * D * sizeof(float)) != 0) {
            printf("%s: INVALID: the repeat differs\n", what);
            bad = 1;
        }
    }
    if (!bad)
        printf("%s: nmse %.3g against double, repeat bitwise equal\n", what, nmse);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(ws);
    cudaFree(dq);
    cudaFree(dout);
    free(ref);
    free(out);
    free(first);
    return bad;
}

/* ---- timing --------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int64_t lengths[16] = {256, 512, 1024, 4096}, sweep[MAX_CONFIGS];
    int nl = 4, ns = 0, reps = 200;
    gem_dtype types[3] = {GEM_DTYPE_F32, GEM_DTYPE_BF16, GEM_DTYPE_F16};
    int nt = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--lengths") && i + 1 < argc)
            nl = parse_list(argv[++i], lengths, 16);
        else if (!strcmp(argv[i], "--sweep") && i + 1 < argc)
            ns = parse_list(argv[++i], sweep, MAX_CONFIGS - 1);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--types") && i + 1 < argc)
            nt = parse_types(argv[++i], types, 3);
        else {
            fprintf(stderr, "usage: sliding_decode [--lengths L,..] [--sweep P,..] [--reps N] "
                            "[--types f32,bf16,f16]\n");
            return 2;
        }
    }
    if (reps < 10 || nl < 1 || nt < 1) {
        fprintf(stderr, "sliding_decode: want --reps >= 10, a length and a type\n");
        return 2;
    }
    for (int i = 0; i < ns; i++)
        if (sweep[i] < 1 || sweep[i] > GEM_DECODE_MAX_PARTITIONS) {
            fprintf(stderr, "sliding_decode: partitions %lld out of range\n", (long long)sweep[i]);
            return 2;
        }
    gem_decode_ctx *ctx = NULL;
    if (gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &ctx) != GEM_OK)
        return 2;
    printf("device: %s\n", gem_decode_ctx_describe(ctx));
    const gem_decode_shape shape = {NQ, NKV, D, D, 1.0f};
    /* the configs: NULL (the default), then the sweep's partitions */
    gem_decode_config cfgs[MAX_CONFIGS];
    const gem_decode_config *pc[MAX_CONFIGS];
    const int nc = 1 + ns;
    pc[0] = NULL;
    for (int i = 0; i < ns; i++) {
        cfgs[i + 1] = (gem_decode_config){GEM_ROUTE_FUSED, sweep[i], 8};
        pc[i + 1] = &cfgs[i + 1];
    }
    cudaStream_t stream;
    cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    /* ---- validation ---- */
    static const int64_t check_lengths[] = {1, 13, 63, 64, 65, 1000, 1023, 1024, 4097};
    int failed = 0;
    for (int ti = 0; ti < nt; ti++)
        for (size_t li = 0; li < sizeof check_lengths / sizeof check_lengths[0]; li++) {
            host_case c;
            if (make_case(&c, types[ti], check_lengths[li], 100 + li)) {
                fprintf(stderr, "out of host memory\n");
                return 2;
            }
            for (int ci = 0; ci < nc; ci++) {
                gem_decode_config used;
                if (gem_decode_config_default(ctx, &shape, c.live, &used) != GEM_OK)
                    return 2;
                if (pc[ci])
                    used = *pc[ci];
                char what[128];
                snprintf(what, sizeof what, "check %-4s live %5lld %s P%lld",
                         gem_dtype_name(c.t), (long long)c.live, pc[ci] ? "explicit" : "default",
                         (long long)used.partitions);
                failed |= validate(ctx, &c, pc[ci], stream, what);
            }
            free_case(&c);
        }
    if (failed) {
        printf("sliding_decode: validation failed; nothing timed\n");
        return 1;
    }

    /* ---- the library's read probe ---- */
    double probe_bps = 0;
    {
        gem_engine *e = NULL;
        if (gem_engine_create(GEM_BACKEND_CUDA, 0, &e) != GEM_OK ||
            gem_engine_read_bandwidth(e, (size_t)1 << 32, 10, &probe_bps) != GEM_OK) {
            fprintf(stderr, "sliding_decode: the read probe failed\n");
            return 2;
        }
        gem_engine_destroy(e);
    }
    printf("probe: streaming read %.1f GB/s (4 GiB, the best of the library's readers)\n",
           probe_bps * 1e-9);

    /* ---- timing ---- */
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    int sms = 0, dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int probe_blocks = 8 * sms;
    float *dsums;
    cudaCheck(cudaMalloc(&dsums, (size_t)probe_blocks * sizeof(float)));
    for (int ti = 0; ti < nt; ti++)
        for (int li = 0; li < nl; li++) {
            host_case c;
            if (lengths[li] < 1 || make_case(&c, types[ti], lengths[li], 900 + li)) {
                fprintf(stderr, "bad length or out of host memory\n");
                return 2;
            }
            const size_t es = gem_dtype_size(c.t);
            const double kv_bytes = 2.0 * (double)c.live * NKV * D * (double)es;
            int copies = (int)ceil((double)(1u << 30) / (2.0 * (double)c.cache_bytes));
            copies = copies < 2 ? 2 : (copies > MAX_COPIES ? MAX_COPIES : copies);
            void *dk[MAX_COPIES], *dv[MAX_COPIES];
            for (int i = 0; i < copies; i++) {
                cudaCheck(cudaMalloc(&dk[i], c.cache_bytes));
                cudaCheck(cudaMalloc(&dv[i], c.cache_bytes));
                cudaCheck(cudaMemcpy(dk[i], c.k, c.cache_bytes, cudaMemcpyHostToDevice));
                cudaCheck(cudaMemcpy(dv[i], c.v, c.cache_bytes, cudaMemcpyHostToDevice));
            }
            size_t ws_bytes = 0;
            for (int ci = 0; ci < nc; ci++) {
                size_t b = 0;
                if (gem_decode_workspace_bytes(ctx, &shape, c.live, pc[ci], &b) != GEM_OK)
                    return 2;
                ws_bytes = b > ws_bytes ? b : ws_bytes;
            }
            void *ws;
            float *dq, *dout;
            cudaCheck(cudaMalloc(&ws, ws_bytes));
            cudaCheck(cudaMalloc(&dq, NQ * D * sizeof(float)));
            cudaCheck(cudaMalloc(&dout, NQ * D * sizeof(float)));
            cudaCheck(cudaMemcpy(dq, c.q, NQ * D * sizeof(float), cudaMemcpyHostToDevice));
            /* the subjects: the configs, then the same-bytes probe */
            const int nsub = nc + 1;
            double *t = (double *)malloc((size_t)nsub * reps * sizeof(double));
            const size_t n4 = (size_t)c.live * NKV * D * es / 16;
            int turn = 0;
            for (int r = -3; r < reps; r++) /* three untimed warm-up rounds */
                for (int j = 0; j < nsub; j++) {
                    const int s = (r & 1) ? nsub - 1 - j : j;
                    const int cp = turn++ % copies;
                    const gem_kv_view kv = view_of(&c, dk[cp], dv[cp]);
                    wait_kernel<<<1, 1, 0, stream>>>(50000); /* the host runs ahead */
                    cudaCheck(cudaEventRecord(e0, stream));
                    if (s < nc) {
                        const gem_status st =
                            gem_decode(ctx, &shape, dq, &kv, dout, ws, ws_bytes, pc[s], stream);
                        if (st != GEM_OK) {
                            fprintf(stderr, "gem_decode: %s\n", gem_status_str(st));
                            return 1;
                        }
                    } else {
                        same_bytes_probe<<<probe_blocks, 256, 0, stream>>>(
                            (const float4 *)dk[cp], n4, (const float4 *)dv[cp], n4, dsums);
                        cudaCheck(cudaGetLastError());
                    }
                    cudaCheck(cudaEventRecord(e1, stream));
                    cudaCheck(cudaEventSynchronize(e1));
                    float ms = 0;
                    cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
                    if (r >= 0)
                        t[(size_t)s * reps + r] = ms;
                }
            const stats sp = summarize(t + (size_t)nc * reps, reps);
            const double probe_same = kv_bytes / (sp.median * 1e-3);
            printf("%-4s live %5lld: same-bytes probe %.5f ms median [p10 %.5f, p90 %.5f] "
                   "%7.1f GB/s (%.1f%% of the probe)\n",
                   gem_dtype_name(c.t), (long long)c.live, sp.median, sp.p10, sp.p90,
                   probe_same * 1e-9, 100.0 * probe_same / probe_bps);
            for (int s = 0; s < nc; s++) {
                gem_decode_config used;
                if (gem_decode_config_default(ctx, &shape, c.live, &used) != GEM_OK)
                    return 2;
                if (pc[s])
                    used = *pc[s];
                const stats st = summarize(t + (size_t)s * reps, reps);
                const double bps = kv_bytes / (st.median * 1e-3);
                printf("%-4s live %5lld: %-8s P%-4lld %.5f ms median [p10 %.5f, p90 %.5f] "
                       "%7.1f GB/s, %.1f%% of the probe, %.1f%% of the same-bytes probe "
                       "(%.2f MiB K+V, %d reps)\n",
                       gem_dtype_name(c.t), (long long)c.live, pc[s] ? "explicit" : "default",
                       (long long)used.partitions, st.median, st.p10, st.p90, bps * 1e-9,
                       100.0 * bps / probe_bps, 100.0 * bps / probe_same, kv_bytes / 1048576.0,
                       reps);
            }
            free(t);
            for (int i = 0; i < copies; i++) {
                cudaFree(dk[i]);
                cudaFree(dv[i]);
            }
            cudaFree(ws);
            cudaFree(dq);
            cudaFree(dout);
            free_case(&c);
        }
    cudaFree(dsums);
    gem_decode_ctx_destroy(ctx);
    return 0;
}
