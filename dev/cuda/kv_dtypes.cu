/*
The library's fused route on 16-bit KV caches, through gem_decode, at the Gemma 4
full-attention shape (32 query heads over 4 KV heads, D512, scale 1/sqrt(512)).

K and V are drawn in F32 and rounded (round to nearest even) to the type under test; the
double-precision CPU reference reads the same rounded values, so every version is held to
NMSE <= 1e-10 against it, with every output element written and bitwise repeats, before it is
timed (CUDA events, the first queued behind 50 us of GPU work, versions interleaved A B .. B A
over rotating K/V copies). GB/s counts the bytes of the type.

version 1 is the F32 cache (gem_fused_first_pass), the comparison.
version 2 is a BF16 cache, head-major (gem_fused_first_pass_bf16: four elements per thread and
  row in 8-byte loads, K two tiles ahead, V one).
version 3 is an F16 cache, head-major (gem_fused_first_pass_f16).
version 4 is a BF16 cache, token-major (gem_fused_first_pass_bf16_strided).
  H200: see results/h200/NOTES.md (run 15).

./kv_dtypes [--lengths 8192,65536,131072] [--rounds 10] [versions...]
*/
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "common.h"

extern "C" {
#include "gem/decode.h"
}

#define D 512
#define GROUP 8
#define NKV 4
#define NQ (NKV * GROUP)

/* ---- inputs (the reference and the seeded fills are in common.h) ----------------------- */

/* x rounded to type t in place (the value the cache holds); bits (n) receives the 16-bit
 * patterns (NULL for F32). */
static void round_to(gem_dtype t, float *x, uint16_t *bits, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (t == GEM_DTYPE_BF16) {
            const __nv_bfloat16 b = __float2bfloat16_rn(x[i]);
            x[i] = __bfloat162float(b);
            bits[i] = *reinterpret_cast<const uint16_t *>(&b);
        } else if (t == GEM_DTYPE_F16) {
            const __half hh = __float2half_rn(x[i]);
            x[i] = __half2float(hh);
            bits[i] = *reinterpret_cast<const uint16_t *>(&hh);
        }
    }
}


typedef struct version {
    gem_dtype dtype;
    int token_major;
} version;

static const version versions_all[5] = {
    {GEM_DTYPE_F32, 0}, {GEM_DTYPE_F32, 0}, {GEM_DTYPE_BF16, 0}, {GEM_DTYPE_F16, 0},
    {GEM_DTYPE_BF16, 1}};

int main(int argc, char **argv)
{
    int vs[8], nv = 0, rounds = 10;
    int64_t lengths[8] = {8192, 65536, 131072};
    int nl = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lengths") && i + 1 < argc) {
            nl = 0;
            for (char *t = strtok(argv[++i], ","); t && nl < 8; t = strtok(NULL, ","))
                lengths[nl++] = atoll(t);
        } else if (nv < 8) {
            vs[nv] = atoi(argv[i]);
            if (vs[nv] < 1 || vs[nv] > 4) {
                fprintf(stderr, "unknown version %s (1 .. 4)\n", argv[i]);
                return 2;
            }
            nv++;
        }
    }
    if (nv == 0)
        for (nv = 0; nv < 4; nv++)
            vs[nv] = nv + 1;
    gem_decode_ctx *ctx = NULL;
    if (gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &ctx) != GEM_OK)
        return 2;
    cudaStream_t stream;
    cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    printf("%-8s %-8s %-6s %10s %10s %10s %9s\n", "live", "version", "type", "min ms",
           "median ms", "max ms", "GB/s");
    int failed = 0;
    for (int li = 0; li < nl; li++) {
        const int64_t live = lengths[li];
        const size_t n = (size_t)NKV * (size_t)live * D;
        const float scale = 1.0f / sqrtf((float)D);
        float *hq = (float *)malloc(NQ * D * sizeof(float));
        fill(hq, NQ * D, 11 + (uint64_t)live);
        const gem_decode_shape shape = {NQ, NKV, D, D, scale};
        size_t ws_bytes = 0;
        if (gem_decode_workspace_bytes(ctx, &shape, live, NULL, &ws_bytes) != GEM_OK)
            return 2;
        float *dq, *dout;
        void *dws;
        cudaCheck(cudaMalloc(&dq, NQ * D * sizeof(float)));
        cudaCheck(cudaMalloc(&dout, NQ * D * sizeof(float)));
        cudaCheck(cudaMalloc(&dws, ws_bytes));
        cudaCheck(cudaMemcpy(dq, hq, NQ * D * sizeof(float), cudaMemcpyHostToDevice));
        /* per version: copies of K and V in its type and layout, and its reference */
        void *dk[8][16], *dv[8][16];
        int copies[8];
        double *ref[8];
        int valid[8];
        for (int i = 0; i < nv; i++) {
            const version *ver = &versions_all[vs[i]];
            const size_t es = gem_dtype_size(ver->dtype);
            const double bytes = 2.0 * (double)n * (double)es;
            copies[i] = bytes < 512e6 ? (int)ceil(512e6 / bytes) : 1;
            copies[i] = copies[i] > 16 ? 16 : copies[i];
            float *hk = (float *)malloc(n * sizeof(float)), *hv = (float *)malloc(n * sizeof(float));
            uint16_t *bk = (uint16_t *)malloc(n * 2), *bv = (uint16_t *)malloc(n * 2);
            fill(hk, n, 12 + (uint64_t)live);
            fill(hv, n, 13 + (uint64_t)live);
            round_to(ver->dtype, hk, bk, n);
            round_to(ver->dtype, hv, bv, n);
            ref[i] = (double *)malloc(NQ * D * sizeof(double));
            reference(ref[i], hq, hk, hv, live, scale, NQ, GROUP, D);
            /* the bytes to upload: head-major as drawn, or token-major */
            const void *sk = ver->dtype == GEM_DTYPE_F32 ? (const void *)hk : (const void *)bk;
            const void *sv = ver->dtype == GEM_DTYPE_F32 ? (const void *)hv : (const void *)bv;
            char *tk = NULL, *tv = NULL;
            if (ver->token_major) {
                tk = (char *)malloc(n * es);
                tv = (char *)malloc(n * es);
                for (int g = 0; g < NKV; g++)
                    for (int64_t t = 0; t < live; t++) {
                        memcpy(tk + (((size_t)t * NKV + g) * D) * es,
                               (const char *)sk + (((size_t)g * live + t) * D) * es, D * es);
                        memcpy(tv + (((size_t)t * NKV + g) * D) * es,
                               (const char *)sv + (((size_t)g * live + t) * D) * es, D * es);
                    }
                sk = tk;
                sv = tv;
            }
            for (int c = 0; c < copies[i]; c++) {
                cudaCheck(cudaMalloc(&dk[i][c], n * es));
                cudaCheck(cudaMalloc(&dv[i][c], n * es));
                cudaCheck(cudaMemcpy(dk[i][c], sk, n * es, cudaMemcpyHostToDevice));
                cudaCheck(cudaMemcpy(dv[i][c], sv, n * es, cudaMemcpyHostToDevice));
            }
            free(tk);
            free(tv);
            free(hk);
            free(hv);
            free(bk);
            free(bv);
        }
        float *hout = (float *)malloc(NQ * D * sizeof(float));
        float *hfirst = (float *)malloc(NQ * D * sizeof(float));
        /* one call of version i on copy c */
#define RUN(i, c)                                                                              \
    do {                                                                                       \
        const version *ver_ = &versions_all[vs[i]];                                           \
        gem_kv_view kv_;                                                                       \
        memset(&kv_, 0, sizeof kv_);                                                           \
        kv_.k = dk[i][c];                                                                      \
        kv_.v = dv[i][c];                                                                      \
        kv_.k_dtype = kv_.v_dtype = ver_->dtype;                                               \
        kv_.k_head_stride = kv_.v_head_stride = ver_->token_major ? D : live * D;              \
        kv_.k_token_stride = kv_.v_token_stride = ver_->token_major ? NKV * D : D;             \
        kv_.live = kv_.capacity = live;                                                        \
        const gem_status st_ =                                                                 \
            gem_decode(ctx, &shape, dq, &kv_, dout, dws, ws_bytes, NULL, stream);              \
        if (st_ != GEM_OK) {                                                                   \
            fprintf(stderr, "gem_decode (version %d): %s\n", vs[i], gem_status_str(st_));      \
            exit(EXIT_FAILURE);                                                                \
        }                                                                                      \
    } while (0)
        for (int i = 0; i < nv; i++) {
            valid[i] = 1;
            for (int rep = 0; rep < 2; rep++) {
                cudaCheck(cudaMemsetAsync(dout, 0xFF, NQ * D * sizeof(float), stream));
                RUN(i, rep % copies[i]);
                cudaCheck(cudaStreamSynchronize(stream));
                cudaCheck(cudaMemcpy(hout, dout, NQ * D * sizeof(float), cudaMemcpyDeviceToHost));
                if (rep == 0) {
                    double num = 0, den = 0;
                    for (int j = 0; j < NQ * D; j++) {
                        num += (hout[j] - ref[i][j]) * (hout[j] - ref[i][j]);
                        den += ref[i][j] * ref[i][j];
                    }
                    const double nmse = num / den;
                    printf("%-8lld v%-7d %-6s nmse %.3g against double\n", (long long)live, vs[i],
                           gem_dtype_name(versions_all[vs[i]].dtype), nmse);
                    if (!(nmse <= 1e-10))
                        valid[i] = 0;
                    memcpy(hfirst, hout, NQ * D * sizeof(float));
                } else if (memcmp(hfirst, hout, NQ * D * sizeof(float)) != 0) {
                    printf("%-8lld v%-7d INVALID: the repeat differs\n", (long long)live, vs[i]);
                    valid[i] = 0;
                }
            }
            failed |= !valid[i];
        }
        double *t = (double *)calloc((size_t)nv * 2 * rounds, sizeof(double));
        int turn = 0;
        for (int w = 0; w < 3; w++)
            for (int i = 0; i < nv; i++)
                if (valid[i])
                    RUN(i, 0);
        for (int r = 0; r < rounds; r++)
            for (int pass = 0; pass < 2; pass++)
                for (int j = 0; j < nv; j++) {
                    const int i = pass == 0 ? j : nv - 1 - j;
                    if (!valid[i])
                        continue;
                    turn++;
                    wait_kernel<<<1, 1, 0, stream>>>(50000); /* the host runs ahead */
                    cudaCheck(cudaEventRecord(e0, stream));
                    RUN(i, turn % copies[i]);
                    cudaCheck(cudaEventRecord(e1, stream));
                    cudaCheck(cudaEventSynchronize(e1));
                    float ms = 0;
                    cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
                    t[(size_t)i * 2 * rounds + 2 * r + pass] = ms;
                }
        for (int i = 0; i < nv; i++) {
            if (!valid[i])
                continue;
            double *ti = t + (size_t)i * 2 * rounds;
            qsort(ti, (size_t)2 * rounds, sizeof(double), cmp_double);
            const double med = 0.5 * (ti[rounds - 1] + ti[rounds]);
            const gem_dtype dt = versions_all[vs[i]].dtype;
            const double bytes = 2.0 * (double)n * (double)gem_dtype_size(dt);
            printf("%-8lld v%-7d %-6s %10.4f %10.4f %10.4f %9.1f\n", (long long)live, vs[i],
                   gem_dtype_name(dt), ti[0], med, ti[2 * rounds - 1], bytes / (med * 1e-3) / 1e9);
        }
        free(t);
        for (int i = 0; i < nv; i++) {
            for (int c = 0; c < copies[i]; c++) {
                cudaFree(dk[i][c]);
                cudaFree(dv[i][c]);
            }
            free(ref[i]);
        }
        cudaFree(dq);
        cudaFree(dout);
        cudaFree(dws);
        free(hq);
        free(hout);
        free(hfirst);
    }
    gem_decode_ctx_destroy(ctx);
    return failed;
}
