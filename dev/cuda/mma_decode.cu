/*
The fused first pass on tensor cores for BF16 K and V, exact to F32: an experiment against the
library's CUDA-core first pass (gem_fused_first_pass_bf16), at the Gemma 4 full-attention shape
(32 query heads over 4 KV heads, D512, scale 1/sqrt(512) and 1.0).

Why: on BF16 caches the library's first pass is bound by instruction issue, not by DRAM (run 15:
0.47 ms at 128K, 49% of the read bandwidth; ncu 71% SM throughput in run 18): per token and KV
head it issues about 750 warp instructions, of which 256 are the FMAs of the dots and the V
update. mma.sync m16n8k16 (BF16 in, F32 accumulate) does a k16 x n8 block of those FMAs for
sixteen rows in one instruction.

Exactness: a product of two BF16 values is exact in F32. Q (F32) is split into three BF16
pieces, q = hi + mid + lo + r with |r| <= 2^-24 |q| (each piece rounds the rest to 8 bits), so
Q.K is the F32 dot to within F32 rounding; the softmax weights p (F32, in [0, 1]) into two,
p = hi + lo + r with |r| <= 2^-17 p, which bounds the V update's relative error per token far
below the NMSE gate. The tensor core accumulates in F32 in a fixed order: the bits repeat.

Layout of one block (partition p, KV head g; 256 threads, warps w = 0..7, lane = 4*grp + tig):
  scores: M = 32 rows (hi and mid pieces of the eight heads in m-tile 0, lo in m-tile 1),
    N = 8 tokens per n-tile, K = dims: warp w takes 64 dims in four k-steps and sums them over
    the 16 tokens of a tile; a thread loads 16 bytes of a K row (8 dims), which are its B
    fragments for two k-steps (any order of the dims is the same dot, so the dims are laid out
    as the loads fall: k-step 2p'+e, column 2*tig + h (+8) <-> dim 64w + 32p' + 8 tig + 4e + h
    (+2)); Q's A fragments of those dims stay in registers (24 of them).
    The eight warps' partial scores meet in shared memory, summed in warp order.
  softmax: warp h owns head h, lane t (mod 16) token t, as in the library.
  V update: M = 16 rows (hi and lo pieces of the weights of the eight heads), N = dims (warp w
    owns 64 in eight n-tiles), K = the 16 tokens of the tile: a thread loads 16 bytes (8 dims)
    of the V rows of tokens 2 tig, 2 tig + 1, 2 tig + 8, 2 tig + 9 and pairs them with byte
    permutes into the B fragments of its eight n-tiles (column grp <-> dim 64w + 8 grp + j in
    n-tile j). O stays in the accumulators (32 floats per thread: head grp, dims 64w + 16 tig
    .. + 15, hi and lo rows added at the end).
Per tile of 16 tokens a warp issues 16 + 8 mma, 8 loads of 16 bytes, 16 byte permutes, and the
softmax; two barriers per tile (the library: two per 8 tokens).

version 1 is the library (gem_decode, BF16 head-major): the comparison.
version 2 is the tensor-core first pass above with the library's reducer body (no PDL).
version 3 was version 2 with Q's fragments in shared memory and V two tiles ahead (removed; the
  code is in commit f13a100).
  H200 run 21: the same as version 2 (0.2690 / 0.2685 ms at 128K).
version 4 was version 2 with K loaded in whole 128-byte lines and routed by shuffles (removed;
  commit f13a100).
  H200 run 21: slower, 0.3076 ms at 128K against 0.2733 (DRAM 73% against 83%, L2 busy 83%
  against 94%: the L2 figure follows the DRAM one, it was not the limit).
version 5 is version 2 with .L2::256B on every K and V load.
  H200 run 23: a tie (0.2690 / 0.2685 ms at 128K; at P 66, 0.2694 / 0.2683, also a tie with P 64).
versions 6 and 7 were version 2 with the K and V rows of the tile 2 (6) or 4 (7) tiles ahead
  prefetched into the L2 (cp.async.bulk.prefetch, 1 KiB a row, one row per thread of two warps;
  removed, the code is in commit c805675). Predicted 0.269 -> about 0.255 ms at 128K, since a
  prefetch holds no register. H200 run 39: slower at every length, 128K 0.2745 (v2) -> 0.2831
  (6) and 0.2931 (7), 64K 0.1450 -> 0.1494 and 0.1586 (v5 0.2733 / 0.1434 in the same run).
version 8 was version 2 with every thread's eight 16-byte pieces of a tile copied by cp.async
  into 3 stages of shared memory private to the thread (96 KiB a block) and read back when the
  tile is computed, so that two tiles stream while one is computed with no register holding a
  load (as the GeGLU tile product gained, runs 35-36; removed, the code is in commit e15734b).
  Predicted 0.2745 -> 0.262 ms at 128K, or a tie if the L2 is the limit. H200 run 40: the same
  bits as version 2 and much slower: 128K 0.2738 -> 0.3901 ms, 64K 0.1437 -> 0.2070, 8K 0.0290
  -> 0.0394. Not profiled; the 96 KiB stages leave little L1 and at most two blocks an SM.
  H200: results/h200/run19 (as first written here), then the library's copy (run 20).

./mma_decode [--lengths 8192,65536,131072] [--rounds 10] [--partitions 64] [versions 1 2 5]
*/
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "common.h"

#include "attn_fused_body.cuh"

extern "C" {
#include "gem/decode.h"
}

#define D 512
#define GROUP 8
#define NKV 4
#define NQ (NKV * GROUP)

/* ---- the tensor-core first pass ---------------------------------------------------------
 * Version 2 as run 19 measured it now lives in the library as gem_fused_first_pass_mma_body
 * (src/cuda/attn_fused_body.cuh: the same arithmetic, row pointers stepped per tile instead of
 * recomputed, which removed an 8-byte spill); this program instantiates that body, so what it
 * times is what ships. */
extern "C" __global__ void __launch_bounds__(256, 2)
    mma_first_pass(const float *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                   const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                   float *__restrict__ part_m, float *__restrict__ part_s,
                   float *__restrict__ part_o, int64_t live, int64_t partitions,
                   int64_t n_q_heads, float scale)
{
    gem_fused_first_pass_mma_body<0>(q, k, hs, ts, v, hs, ts, part_m, part_s, part_o, live,
                                     partitions, n_q_heads, scale);
}

/* Versions 3 and 4 were measured in run 21 and lost (see the header); their code is in commit
 * f13a100 of this file. */

/* Version 5: version 2 (the library's body) with every K and V load asking the L2 to fetch the
 * enclosing 256 bytes (.L2::256B). Prediction: the rows of a tile are contiguous 1 KiB runs, so
 * larger DRAM fetches cost nothing extra and may raise DRAM efficiency from 84% toward 90%. */
extern "C" __global__ void __launch_bounds__(256, 2)
    mma_first_pass_v5(const float *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                      const __nv_bfloat16 *__restrict__ v, int64_t hs, int64_t ts,
                      float *__restrict__ part_m, float *__restrict__ part_s,
                      float *__restrict__ part_o, int64_t live, int64_t partitions,
                      int64_t n_q_heads, float scale)
{
    gem_fused_first_pass_mma_body<0, true>(q, k, hs, ts, v, hs, ts, part_m, part_s, part_o, live,
                                           partitions, n_q_heads, scale);
}

extern "C" __global__ void __launch_bounds__(256)
    mma_reducer(const float *__restrict__ part_m, const float *__restrict__ part_s,
                const float *__restrict__ part_o, float *__restrict__ out, int64_t partitions)
{
    gem_fused_reducer_body(part_m, part_s, part_o, out, partitions);
}

/* the reference, the seeded fills and the timing helpers are in common.h */

int main(int argc, char **argv)
{
    int vs[4], nv = 0, rounds = 10;
    int64_t lengths[8] = {8192, 65536, 131072}, partitions = 64;
    int nl = 3;
    float scales[2] = {1.0f / sqrtf((float)D), 1.0f};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--partitions") && i + 1 < argc)
            partitions = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--lengths") && i + 1 < argc) {
            nl = 0;
            for (char *t = strtok(argv[++i], ","); t && nl < 8; t = strtok(NULL, ","))
                lengths[nl++] = atoll(t);
        } else if (nv < 4) {
            vs[nv] = atoi(argv[i]);
            if (vs[nv] != 1 && vs[nv] != 2 && vs[nv] != 5) {
                fprintf(stderr, "unknown version %s (1, 2 or 5; 3 and 4 are in commit f13a100)\n",
                        argv[i]);
                return 2;
            }
            nv++;
        }
    }
    if (nv == 0)
        for (nv = 0; nv < 3; nv++)
            vs[nv] = nv < 2 ? nv + 1 : 5;
    if (rounds < 1 || partitions < 1 || partitions > 4096)
        return 2;
    gem_decode_ctx *ctx = NULL;
    if (gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &ctx) != GEM_OK)
        return 2;
    cudaStream_t stream;
    cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    printf("version 1: the library's BF16 first pass (gem_decode); version 2: tensor cores, "
           "P %lld\n", (long long)partitions);
    printf("%-8s %-8s %10s %10s %10s %9s\n", "live", "version", "min ms", "median ms", "max ms",
           "GB/s");
    int failed = 0;
    for (int li = 0; li < nl; li++) {
        const int64_t live = lengths[li];
        const size_t n = (size_t)NKV * (size_t)live * D;
        float *hq = (float *)malloc(NQ * D * sizeof(float));
        float *hk = (float *)malloc(n * sizeof(float)), *hv = (float *)malloc(n * sizeof(float));
        __nv_bfloat16 *bk = (__nv_bfloat16 *)malloc(n * 2), *bv = (__nv_bfloat16 *)malloc(n * 2);
        fill(hq, NQ * D, 11 + (uint64_t)live);
        fill(hk, n, 12 + (uint64_t)live);
        fill(hv, n, 13 + (uint64_t)live);
        for (size_t i = 0; i < n; i++) {
            bk[i] = __float2bfloat16_rn(hk[i]);
            hk[i] = __bfloat162float(bk[i]);
            bv[i] = __float2bfloat16_rn(hv[i]);
            hv[i] = __bfloat162float(bv[i]);
        }
        const double bytes = 2.0 * (double)n * 2.0;
        const int copies = bytes < 512e6 ? (int)fmin(16.0, ceil(512e6 / bytes)) : 1;
        void *dk[16], *dv[16];
        for (int c = 0; c < copies; c++) {
            cudaCheck(cudaMalloc(&dk[c], n * 2));
            cudaCheck(cudaMalloc(&dv[c], n * 2));
            cudaCheck(cudaMemcpy(dk[c], bk, n * 2, cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(dv[c], bv, n * 2, cudaMemcpyHostToDevice));
        }
        float *dq, *dout;
        cudaCheck(cudaMalloc(&dq, NQ * D * sizeof(float)));
        cudaCheck(cudaMalloc(&dout, NQ * D * sizeof(float)));
        cudaCheck(cudaMemcpy(dq, hq, NQ * D * sizeof(float), cudaMemcpyHostToDevice));
        const int64_t pmax = partitions > 64 ? partitions : 64;
        size_t ws_bytes = (size_t)pmax * NQ * (D + 2) * sizeof(float);
        void *dws;
        cudaCheck(cudaMalloc(&dws, ws_bytes + (1 << 20)));
        float *hout = (float *)malloc(NQ * D * sizeof(float));
        float *hfirst = (float *)malloc(NQ * D * sizeof(float));
        double *ref = (double *)malloc(NQ * D * sizeof(double));
        int valid[4];
        for (int sc = 0; sc < 2; sc++) {
            const float scale = scales[sc];
            const gem_decode_shape shape = {NQ, NKV, D, D, scale};
            reference(ref, hq, hk, hv, live, scale, NQ, GROUP, D);
#define RUN(i, c)                                                                              \
    do {                                                                                       \
        if (vs[i] == 1) {                                                                      \
            gem_kv_view kv_;                                                                   \
            memset(&kv_, 0, sizeof kv_);                                                       \
            kv_.k = dk[c];                                                                     \
            kv_.v = dv[c];                                                                     \
            kv_.k_dtype = kv_.v_dtype = GEM_DTYPE_BF16;                                        \
            kv_.k_head_stride = kv_.v_head_stride = live * D;                                  \
            kv_.k_token_stride = kv_.v_token_stride = D;                                       \
            kv_.live = kv_.capacity = live;                                                    \
            const gem_status st_ =                                                             \
                gem_decode(ctx, &shape, dq, &kv_, dout, dws, ws_bytes, NULL, stream);          \
            if (st_ != GEM_OK) {                                                               \
                fprintf(stderr, "gem_decode: %s\n", gem_status_str(st_));                      \
                exit(EXIT_FAILURE);                                                            \
            }                                                                                  \
        } else {                                                                               \
            float *pm_ = (float *)dws, *ps_ = pm_ + partitions * NQ, *po_ = ps_ + partitions * NQ; \
            if (vs[i] == 2)                                                                    \
                mma_first_pass<<<dim3((unsigned)partitions, NKV), 256, 0, stream>>>(           \
                    dq, (const __nv_bfloat16 *)dk[c], (const __nv_bfloat16 *)dv[c], live * D,  \
                    D, pm_, ps_, po_, live, partitions, NQ, scale);                            \
            else                                                                               \
                mma_first_pass_v5<<<dim3((unsigned)partitions, NKV), 256, 0, stream>>>(        \
                    dq, (const __nv_bfloat16 *)dk[c], (const __nv_bfloat16 *)dv[c], live * D,  \
                    D, pm_, ps_, po_, live, partitions, NQ, scale);                            \
            mma_reducer<<<dim3(NQ, D / 256), 256, 0, stream>>>(pm_, ps_, po_, dout,            \
                                                               partitions);                    \
            cudaCheck(cudaGetLastError());                                                     \
        }                                                                                      \
    } while (0)
            for (int i = 0; i < nv; i++) {
                valid[i] = 1;
                for (int rep = 0; rep < 2; rep++) {
                    cudaCheck(cudaMemsetAsync(dout, 0xFF, NQ * D * sizeof(float), stream));
                    RUN(i, rep % copies);
                    cudaCheck(cudaStreamSynchronize(stream));
                    cudaCheck(cudaMemcpy(hout, dout, NQ * D * sizeof(float),
                                         cudaMemcpyDeviceToHost));
                    if (rep == 0) {
                        double num = 0, den = 0;
                        for (int j = 0; j < NQ * D; j++) {
                            num += (hout[j] - ref[j]) * (hout[j] - ref[j]);
                            den += ref[j] * ref[j];
                        }
                        const double nmse = num / den;
                        printf("%-8lld v%-7d scale %.4f: nmse %.3g against double\n",
                               (long long)live, vs[i], scale, nmse);
                        if (!(nmse <= 1e-10))
                            valid[i] = 0;
                        memcpy(hfirst, hout, NQ * D * sizeof(float));
                    } else if (memcmp(hfirst, hout, NQ * D * sizeof(float)) != 0) {
                        printf("%-8lld v%-7d INVALID: the repeat differs\n", (long long)live,
                               vs[i]);
                        valid[i] = 0;
                    }
                }
                failed |= !valid[i];
            }
            if (sc == 1)
                break; /* scale 1.0 is validated, not timed */
            double *t = (double *)calloc((size_t)nv * 2 * rounds, sizeof(double));
            int turn = 0;
            for (int wu = 0; wu < 3; wu++)
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
                        wait_kernel<<<1, 1, 0, stream>>>(50000);
                        cudaCheck(cudaEventRecord(e0, stream));
                        RUN(i, turn % copies);
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
                printf("%-8lld v%-7d %10.4f %10.4f %10.4f %9.1f\n", (long long)live, vs[i], ti[0],
                       med, ti[2 * rounds - 1], bytes / (med * 1e-3) / 1e9);
            }
            free(t);
        }
#undef RUN
        for (int c = 0; c < copies; c++) {
            cudaFree(dk[c]);
            cudaFree(dv[c]);
        }
        cudaFree(dq);
        cudaFree(dout);
        cudaFree(dws);
        free(hq);
        free(hk);
        free(hv);
        free(bk);
        free(bv);
        free(hout);
        free(hfirst);
        free(ref);
    }
    gem_decode_ctx_destroy(ctx);
    return failed;
}
