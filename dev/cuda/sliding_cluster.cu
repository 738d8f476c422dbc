/*
The sliding-window layers' attention (Gemma 4 31B: 32 query heads over 16 KV heads, dk = dv = 256,
scale 1.0, a token-major ring of 1,024 rows) without its second kernel: each KV head's P
partition blocks form one thread block cluster (P <= 16), and after the cluster's barrier two of
its blocks merge the partials of the KV head's two query heads, which the other blocks wrote to
the L2 just before. The library runs the first pass and then the reducer as a programmatic
dependent grid, which starts merging only once every block of the first pass has ended and its
writes are flushed; here each KV head's merge starts when that head's own blocks are done.

Subjects, all with the partition count of the library's default config at that length:
  lib       gem_decode, the library (first pass + reducer)
  two       the same two kernels built here from attn_fused_d256_body.cuh (the control), at
            the cluster kernels' partition count (--cluster-p; the default's otherwise)
  cluster   one kernel: the first pass, the cluster barrier (release / acquire), the pdl
            trigger, then gem_fused_reducer_core on blocks 0 and 1 of the cluster
  cl-late   the same without the trigger (the next grid launches when every block has ended)
The merge is the reducer's code (gem_fused_reducer_core, its loads of the partials from the L2),
so the cluster kernels must give two's bits, and two the library's at the same P.

First it validates every subject at live 1, 13, 63, 64, 65, 1,000, 1,023, 1,024 and 4,097 for
F32, BF16 and F16: NMSE <= 1e-10 against the double reference, every output finite (the output
is poisoned with NaN first, every cache row past live is NaN), and bit for bit the outputs
named above, twice. Nothing is timed unless all of that holds.

Then at each length and type it times the subjects two ways, in A B B A order (the order of
the subjects reversed every other round):
  single    one call alone on the stream behind 50 us of GPU work, CUDA events around it;
            medians and 10th / 90th percentiles over --reps calls;
  chain     CHAIN (50, the 31B model's sliding layers) calls back to back behind 50 us of GPU
            work, each a programmatic dependent of the one before, each on its own copy of the
            cache (the copies rotate through at least 1 GiB, so no call finds its rows in the
            L2); the chain's time / CHAIN, medians over --rounds chains.

./sliding_cluster                          validate, then time live 1,024, F32 and BF16
./sliding_cluster --lengths 256,1024 --types f32 --reps 300 --rounds 40
./sliding_cluster --check-only             validate alone (for the sanitizers)
./sliding_cluster --check-only --check-max 1024   the lengths up to 1,024 alone
./sliding_cluster --cluster-p 8            the cluster kernels at P 8 (lib and two at the default)

Prediction (before any run): the cluster kernel saves 1-2 us a call in the chain (docs/cuda.md:
the reducer adds about 2 us after the D256 first pass, 12.9 -> ~15 us at F32 1,024 rows on an
H200), 50-100 us a 31B token; single calls save less (0.5-1.5 us), since the lone reducer's
launch is already overlapped by the programmatic launch.

Outcome (an H100 80GB HBM3, results/h200/runs 220-221): it loses. Every check passes (the cluster
kernels give the library's bits for F32, BF16 and F16 at every length; memcheck, racecheck and
synccheck report nothing), but at the default P 16 only 14 of the 16 clusters of 16 blocks are
resident at once, so two clusters run as a second wave: chain ms a call, lib / cluster, F32
0.00847 / 0.01212 at 256 rows and 0.01639 / 0.02209 at 1,024; BF16 0.00809 / 0.01153 and
0.01239 / 0.01805. With every cluster resident it still does not win: at P 8 (30 clusters of 8
fit) the cluster kernel takes 0.01826 ms a call against 0.01797 for the two kernels at the same
P (F32, 1,024 rows; BF16 0.01539 / 0.01502), and P 8 itself costs 1.6-2.7 us against the
library's P 16; at P 12 (16 fit) the cluster kernel takes 0.02086 against 0.01701 with the early
trigger and 0.01839 without it. The reducer's programmatic launch already hides its launch and
wait, and a cluster's merge waits for its slowest block while holding the cluster's other
blocks to the barrier. The library keeps its two kernels.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "attn_fused_d256_body.cuh"
#include "common.h"
#include "sliding_case.h"

extern "C" {
#include "gem/decode.h"
}

#define CHAIN 50
#define MAX_COPIES 256
#define NSUB 4

static const char *const subject_names[NSUB] = {"lib", "two", "cluster", "cl-late"};

/* ---- the kernels ----------------------------------------------------------------------------- */

/* The library's first-pass prologue (attn_fused.cu's GEM_FP_PROLOGUE): the first rows asked of
 * the L2, then the launch wait. */
template <typename E>
__device__ __forceinline__ void fp_prologue(const void *k, int64_t k_hs4, int64_t k_ts4,
                                            const void *v, int64_t v_hs4, int64_t v_ts4,
                                            int64_t live, int64_t partitions)
{
    constexpr int EB = (int)(sizeof(typename E::piece) / 4); /* bytes an element */
    gem_fp_prefetch_l2<GEM_CU_D256 * EB, 8>(k, k_hs4 * 4 * EB, k_ts4 * 4 * EB, v, v_hs4 * 4 * EB,
                                            v_ts4 * 4 * EB, live, partitions);
    pdl_wait();
}

/* The library's D256 first pass: grid (P, n_kv_heads) of 256 threads. */
template <typename E>
__global__ void __launch_bounds__(GEM_CU_THREADS, 2)
    first_pass(const float *__restrict__ q, const void *__restrict__ k, int64_t k_hs4,
               int64_t k_ts4, const void *__restrict__ v, int64_t v_hs4, int64_t v_ts4,
               float *__restrict__ part_m, float *__restrict__ part_s, float *__restrict__ part_o,
               int64_t live, int64_t partitions, int64_t n_q_heads, float scale)
{
    fp_prologue<E>(k, k_hs4, k_ts4, v, v_hs4, v_ts4, live, partitions);
    gem_fused_first_pass_d256_body<E>(q, k, k_hs4, k_ts4, v, v_hs4, v_ts4, part_m, part_s,
                                      part_o, live, partitions, n_q_heads, scale);
}

/* The library's reducer: grid (n_q_heads, 1) of 256 threads. */
__global__ void __launch_bounds__(GEM_CU_THREADS)
    reducer(const float *__restrict__ part_m, const float *__restrict__ part_s,
            const float *__restrict__ part_o, float *__restrict__ out, int64_t partitions)
{
    gem_fused_reducer_body(part_m, part_s, part_o, out, partitions, GEM_CU_D256, true);
}

/* The first pass and the merge in one grid (P, n_kv_heads) of clusters (P, 1, 1): after the
 * cluster's barrier, block r of KV head g merges query heads 2g + r, 2g + r + P, ... (< 2g + 2:
 * at P 1 its one block merges both). */
template <typename E, bool TRIGGER>
__global__ void __launch_bounds__(GEM_CU_THREADS, 2)
    first_pass_cluster(const float *__restrict__ q, const void *__restrict__ k, int64_t k_hs4,
                       int64_t k_ts4, const void *__restrict__ v, int64_t v_hs4, int64_t v_ts4,
                       float *__restrict__ part_m, float *__restrict__ part_s,
                       float *__restrict__ part_o, float *__restrict__ out, int64_t live,
                       int64_t partitions, int64_t n_q_heads, float scale)
{
    fp_prologue<E>(k, k_hs4, k_ts4, v, v_hs4, v_ts4, live, partitions);
    gem_fused_first_pass_d256_body<E>(q, k, k_hs4, k_ts4, v, v_hs4, v_ts4, part_m, part_s,
                                      part_o, live, partitions, n_q_heads, scale);
    /* every block's partial is written before any block of the cluster reads one */
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
    if (TRIGGER)
        pdl_trigger();
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    for (int64_t r = rank; r < GEM_CU_D256_GROUP; r += partitions) {
        if (r > rank)
            __syncthreads(); /* the merge's shared memory is free again */
        gem_fused_reducer_core<true>(part_m, part_s, part_o, out, partitions, GEM_CU_D256,
                                     (int64_t)blockIdx.y * GEM_CU_D256_GROUP + r, n_q_heads, 0,
                                     0, 0, nullptr);
    }
}

/* ---- launches -------------------------------------------------------------------------------- */

typedef struct bufs {
    float *q, *out, *part_m, *part_s, *part_o;
    void *ws;
    size_t ws_bytes;
} bufs;

static cudaError_t launch_cluster_kernel(void (*fn)(const float *, const void *, int64_t, int64_t,
                                                    const void *, int64_t, int64_t, float *,
                                                    float *, float *, float *, int64_t, int64_t,
                                                    int64_t, float),
                                         int64_t P, const bufs *b, const void *k, const void *v,
                                         int64_t live, cudaStream_t s)
{
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3((unsigned)P, NKV);
    cfg.blockDim = dim3(GEM_CU_THREADS);
    cfg.stream = s;
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)P;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 2;
    const int64_t hs4 = D / 4, ts4 = NKV * D / 4;
    return cudaLaunchKernelEx(&cfg, fn, (const float *)b->q, k, hs4, ts4, v, hs4, ts4, b->part_m,
                              b->part_s, b->part_o, b->out, live, P, (int64_t)NQ, 1.0f);
}

/* Subject s of type t on the cache (k, v) at live rows, P partitions. */
static void run_subject(int s, gem_dtype t, gem_decode_ctx *ctx, const bufs *b, const void *k,
                        const void *v, int64_t live, int64_t P, cudaStream_t st)
{
    const int64_t hs4 = D / 4, ts4 = NKV * D / 4;
    if (s == 0) {
        const gem_decode_shape shape = {NQ, NKV, D, D, 1.0f};
        gem_kv_view kv;
        memset(&kv, 0, sizeof kv);
        kv.k = k;
        kv.v = v;
        kv.k_dtype = kv.v_dtype = t;
        kv.k_head_stride = kv.v_head_stride = D;
        kv.k_token_stride = kv.v_token_stride = NKV * D;
        kv.live = live;
        kv.capacity = live > WINDOW ? live : WINDOW;
        GEM_TRY(gem_decode(ctx, &shape, b->q, &kv, b->out, b->ws, b->ws_bytes, NULL, st));
        return;
    }
    if (s == 1) {
        void (*fp)(const float *, const void *, int64_t, int64_t, const void *, int64_t, int64_t,
                   float *, float *, float *, int64_t, int64_t, int64_t, float) =
            t == GEM_DTYPE_F32    ? first_pass<gem_kv_f32>
            : t == GEM_DTYPE_BF16 ? first_pass<gem_kv_bf16>
                                  : first_pass<gem_kv_f16>;
        cudaCheck(launch_pdl(fp, dim3((unsigned)P, NKV), GEM_CU_THREADS, st, (const float *)b->q,
                             k, hs4, ts4, v, hs4, ts4, b->part_m, b->part_s, b->part_o, live, P,
                             (int64_t)NQ, 1.0f));
        cudaCheck(launch_pdl(reducer, dim3(NQ, 1), GEM_CU_THREADS, st, (const float *)b->part_m,
                             (const float *)b->part_s, (const float *)b->part_o, b->out, P));
        return;
    }
    const bool trig = s == 2;
    void (*fc)(const float *, const void *, int64_t, int64_t, const void *, int64_t, int64_t,
               float *, float *, float *, float *, int64_t, int64_t, int64_t, float) =
        t == GEM_DTYPE_F32
            ? (trig ? first_pass_cluster<gem_kv_f32, true> : first_pass_cluster<gem_kv_f32, false>)
        : t == GEM_DTYPE_BF16
            ? (trig ? first_pass_cluster<gem_kv_bf16, true>
                    : first_pass_cluster<gem_kv_bf16, false>)
            : (trig ? first_pass_cluster<gem_kv_f16, true> : first_pass_cluster<gem_kv_f16, false>);
    cudaCheck(launch_cluster_kernel(fc, P, b, k, v, live, st));
}

/* Lets every cluster kernel take clusters of up to 16 blocks. */
static void allow_clusters(void)
{
    const void *fns[] = {
        (const void *)first_pass_cluster<gem_kv_f32, true>,
        (const void *)first_pass_cluster<gem_kv_f32, false>,
        (const void *)first_pass_cluster<gem_kv_bf16, true>,
        (const void *)first_pass_cluster<gem_kv_bf16, false>,
        (const void *)first_pass_cluster<gem_kv_f16, true>,
        (const void *)first_pass_cluster<gem_kv_f16, false>,
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        cudaCheck(cudaFuncSetAttribute(fns[i], cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
}

static int64_t default_partitions(gem_decode_ctx *ctx, int64_t live)
{
    const gem_decode_shape shape = {NQ, NKV, D, D, 1.0f};
    gem_decode_config used;
    GEM_TRY(gem_decode_config_default(ctx, &shape, live, &used));
    return used.partitions;
}

static void alloc_bufs(bufs *b, gem_decode_ctx *ctx, int64_t live, int64_t P)
{
    const gem_decode_shape shape = {NQ, NKV, D, D, 1.0f};
    memset(b, 0, sizeof *b);
    GEM_TRY(gem_decode_workspace_bytes(ctx, &shape, live, NULL, &b->ws_bytes));
    cudaCheck(cudaMalloc(&b->ws, b->ws_bytes));
    cudaCheck(cudaMalloc(&b->q, NQ * D * sizeof(float)));
    cudaCheck(cudaMalloc(&b->out, NQ * D * sizeof(float)));
    cudaCheck(cudaMalloc(&b->part_m, (size_t)P * NQ * sizeof(float)));
    cudaCheck(cudaMalloc(&b->part_s, (size_t)P * NQ * sizeof(float)));
    cudaCheck(cudaMalloc(&b->part_o, (size_t)P * NQ * D * sizeof(float)));
}

static void free_bufs(bufs *b)
{
    cudaFree(b->ws);
    cudaFree(b->q);
    cudaFree(b->out);
    cudaFree(b->part_m);
    cudaFree(b->part_s);
    cudaFree(b->part_o);
}

/* ---- validation ------------------------------------------------------------------------------ */

/* Every subject twice on case c: 0 when the library's output is within NMSE 1e-10 of the double
 * reference and finite, and every run of every subject gives its bits. */
static int validate(gem_decode_ctx *ctx, const host_case *c, int64_t cluster_p, cudaStream_t st)
{
    const int64_t P = default_partitions(ctx, c->live), Pc = cluster_p ? cluster_p : P;
    if (Pc > 16) {
        printf("check %-4s live %5lld: P%lld is past a cluster's 16 blocks: not checked\n",
               gem_dtype_name(c->t), (long long)c->live, (long long)P);
        return 0;
    }
    const size_t n = (size_t)NQ * D;
    double *ref = (double *)malloc(n * sizeof(double));
    float *lib = (float *)malloc(n * sizeof(float)), *out = (float *)malloc(n * sizeof(float));
    float *two = (float *)malloc(n * sizeof(float));
    reference(ref, c->q, c->kf, c->vf, c->live, 1.0f, NQ, GROUP, D);
    bufs b;
    alloc_bufs(&b, ctx, c->live, P > Pc ? P : Pc);
    void *dk, *dv;
    cudaCheck(cudaMalloc(&dk, c->cache_bytes));
    cudaCheck(cudaMalloc(&dv, c->cache_bytes));
    cudaCheck(cudaMemcpy(dk, c->k, c->cache_bytes, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(dv, c->v, c->cache_bytes, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(b.q, c->q, n * sizeof(float), cudaMemcpyHostToDevice));
    int bad = 0;
    double nmse = 0;
    for (int rep = 0; rep < 2 && !bad; rep++)
        for (int s = 0; s < NSUB && !bad; s++) {
            cudaCheck(cudaMemsetAsync(b.out, 0xFF, n * sizeof(float), st)); /* NaN */
            cudaCheck(cudaMemsetAsync(b.ws, 0xFF, b.ws_bytes, st));
            cudaCheck(cudaMemsetAsync(b.part_o, 0xFF, (size_t)(P > Pc ? P : Pc) * n * 4, st));
            run_subject(s, c->t, ctx, &b, dk, dv, c->live, s < 1 ? P : Pc, st);
            cudaCheck(cudaStreamSynchronize(st));
            cudaCheck(cudaGetLastError());
            cudaCheck(cudaMemcpy(out, b.out, n * sizeof(float), cudaMemcpyDeviceToHost));
            /* lib and, at another P, two against the double reference; two's bits are the
             * library's kernels' at the cluster's P, which the cluster kernels must give */
            const float *want = s == 0 ? NULL : (s == 1 ? (Pc == P ? lib : NULL) : two);
            if (rep == 0 && !want) {
                double num = 0, den = 0;
                size_t nonfinite = 0;
                for (size_t j = 0; j < n; j++) {
                    nonfinite += !isfinite(out[j]);
                    num += (out[j] - ref[j]) * (out[j] - ref[j]);
                    den += ref[j] * ref[j];
                }
                const double e = num / den;
                if (s == 0)
                    nmse = e;
                if (nonfinite || !(e <= 1e-10)) {
                    printf("check %-4s live %5lld: INVALID: %s nmse %.3g, %zu not finite\n",
                           gem_dtype_name(c->t), (long long)c->live, subject_names[s], e,
                           nonfinite);
                    bad = 1;
                }
            } else {
                if (!want)
                    want = s == 0 ? lib : two;
                if (memcmp(want, out, n * sizeof(float)) != 0) {
                    size_t first = 0;
                    while (first < n && !memcmp(want + first, out + first, sizeof(float)))
                        first++;
                    printf("check %-4s live %5lld: INVALID: %s (run %d) differs at %zu: %.9g "
                           "against %.9g\n",
                           gem_dtype_name(c->t), (long long)c->live, subject_names[s], rep + 1,
                           first, (double)out[first], (double)want[first]);
                    bad = 1;
                }
            }
            if (rep == 0 && s == 0)
                memcpy(lib, out, n * sizeof(float));
            if (rep == 0 && s == 1)
                memcpy(two, out, n * sizeof(float));
        }
    if (!bad)
        printf("check %-4s live %5lld P%-3lld: lib nmse %.3g against double; cluster and "
               "cl-late give the bits of two (P%lld), twice\n",
               gem_dtype_name(c->t), (long long)c->live, (long long)P, nmse, (long long)Pc);
    cudaFree(dk);
    cudaFree(dv);
    free_bufs(&b);
    free(ref);
    free(lib);
    free(two);
    free(out);
    return bad;
}

/* Every subject, rounds samples of `calls` calls back to back (each on the next copy of the
 * cache, a programmatic dependent of the one before) behind 50 us of GPU work, CUDA events
 * around them; the subjects' order reversed every other round; `warm` untimed rounds first.
 * t[s * rounds + r]: ms a call of subject s in round r. */
static void time_rounds(int rounds, int warm, int calls, double *t, int *turn, int copies,
                        void *const *dk, void *const *dv, const host_case *c,
                        gem_decode_ctx *ctx, const bufs *b, int64_t P, int64_t Pc,
                        cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1)
{
    for (int r = -warm; r < rounds; r++)
        for (int j = 0; j < NSUB; j++) {
            const int s = (r & 1) ? NSUB - 1 - j : j;
            wait_kernel<<<1, 1, 0, st>>>(50000); /* the host runs ahead */
            cudaCheck(cudaEventRecord(e0, st));
            for (int i = 0; i < calls; i++) {
                const int cp = (*turn)++ % copies;
                run_subject(s, c->t, ctx, b, dk[cp], dv[cp], c->live, s < 1 ? P : Pc, st);
            }
            cudaCheck(cudaEventRecord(e1, st));
            cudaCheck(cudaEventSynchronize(e1));
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
            if (r >= 0)
                t[(size_t)s * rounds + r] = ms / calls;
        }
}

/* ---- timing ---------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int64_t lengths[16] = {1024};
    int nl = 1, reps = 200, rounds = 30, check_only = 0;
    int64_t check_max = INT64_MAX, cluster_p = 0;
    gem_dtype types[3] = {GEM_DTYPE_F32, GEM_DTYPE_BF16, GEM_DTYPE_F16};
    int nt = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--lengths") && i + 1 < argc)
            nl = parse_list(argv[++i], lengths, 16);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--check-only"))
            check_only = 1;
        else if (!strcmp(argv[i], "--check-max") && i + 1 < argc)
            check_max = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--cluster-p") && i + 1 < argc)
            cluster_p = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--types") && i + 1 < argc)
            nt = parse_types(argv[++i], types, 3);
        else {
            fprintf(stderr, "usage: sliding_cluster [--lengths L,..] [--reps N] [--rounds N] "
                            "[--types f32,bf16,f16] [--check-only] [--check-max L] "
                            "[--cluster-p P]\n");
            return 2;
        }
    }
    if (cluster_p < 0 || cluster_p > 16) {
        fprintf(stderr, "sliding_cluster: --cluster-p takes 1 .. 16\n");
        return 2;
    }
    if (reps < 10 || rounds < 10 || nl < 1 || nt < 1) {
        fprintf(stderr, "sliding_cluster: want --reps >= 10, --rounds >= 10, a length, a type\n");
        return 2;
    }
    gem_decode_ctx *ctx = NULL;
    if (gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &ctx) != GEM_OK)
        return 2;
    printf("device: %s\n", gem_decode_ctx_describe(ctx));
    allow_clusters();
    cudaStream_t st;
    cudaCheck(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

    /* ---- validation, every type ---- */
    static const int64_t check_lengths[] = {1, 13, 63, 64, 65, 1000, 1023, 1024, 4097};
    static const gem_dtype all_types[3] = {GEM_DTYPE_F32, GEM_DTYPE_BF16, GEM_DTYPE_F16};
    int failed = 0;
    for (int ti = 0; ti < 3; ti++)
        for (size_t li = 0; li < sizeof check_lengths / sizeof check_lengths[0]; li++) {
            if (check_lengths[li] > check_max)
                continue;
            host_case c;
            if (make_case(&c, all_types[ti], check_lengths[li], 100 + li)) {
                fprintf(stderr, "out of host memory\n");
                return 2;
            }
            failed |= validate(ctx, &c, cluster_p, st);
            free_case(&c);
        }
    if (failed) {
        printf("sliding_cluster: validation failed; nothing timed\n");
        return 1;
    }
    if (check_only)
        return 0;

    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    for (int ti = 0; ti < nt; ti++)
        for (int li = 0; li < nl; li++) {
            host_case c;
            if (lengths[li] < 1 || make_case(&c, types[ti], lengths[li], 900 + li)) {
                fprintf(stderr, "bad length or out of host memory\n");
                return 2;
            }
            const int64_t P = default_partitions(ctx, c.live), Pc = cluster_p ? cluster_p : P;
            if (Pc > 16) {
                printf("%-4s live %5lld: P%lld is past a cluster's 16 blocks: not timed\n",
                       gem_dtype_name(c.t), (long long)c.live, (long long)P);
                free_case(&c);
                continue;
            }
            {
                cudaLaunchConfig_t cfg;
                memset(&cfg, 0, sizeof cfg);
                cfg.gridDim = dim3((unsigned)Pc, NKV);
                cfg.blockDim = dim3(GEM_CU_THREADS);
                cudaLaunchAttribute a;
                a.id = cudaLaunchAttributeClusterDimension;
                a.val.clusterDim.x = (unsigned)Pc;
                a.val.clusterDim.y = a.val.clusterDim.z = 1;
                cfg.attrs = &a;
                cfg.numAttrs = 1;
                int nclusters = 0;
                cudaCheck(cudaOccupancyMaxActiveClusters(
                    &nclusters, (const void *)first_pass_cluster<gem_kv_f32, true>, &cfg));
                printf("%-4s live %5lld: lib and two P%lld; clusters of %lld blocks, %d of them "
                       "resident at once (the grid has %d)\n",
                       gem_dtype_name(c.t), (long long)c.live, (long long)P, (long long)Pc,
                       nclusters, NKV);
            }
            int copies = (int)ceil((double)(1u << 30) / (2.0 * (double)c.cache_bytes));
            copies = copies < CHAIN ? CHAIN : (copies > MAX_COPIES ? MAX_COPIES : copies);
            void *dk[MAX_COPIES], *dv[MAX_COPIES];
            for (int i = 0; i < copies; i++) {
                cudaCheck(cudaMalloc(&dk[i], c.cache_bytes));
                cudaCheck(cudaMalloc(&dv[i], c.cache_bytes));
                cudaCheck(cudaMemcpy(dk[i], c.k, c.cache_bytes, cudaMemcpyHostToDevice));
                cudaCheck(cudaMemcpy(dv[i], c.v, c.cache_bytes, cudaMemcpyHostToDevice));
            }
            bufs b;
            alloc_bufs(&b, ctx, c.live, P > Pc ? P : Pc);
            cudaCheck(cudaMemcpy(b.q, c.q, NQ * D * sizeof(float), cudaMemcpyHostToDevice));
            double *ts = (double *)malloc((size_t)NSUB * reps * sizeof(double));
            double *tc = (double *)malloc((size_t)NSUB * rounds * sizeof(double));
            int turn = 0;
            time_rounds(reps, 3, 1, ts, &turn, copies, dk, dv, &c, ctx, &b, P, Pc, st, e0, e1);
            time_rounds(rounds, 2, CHAIN, tc, &turn, copies, dk, dv, &c, ctx, &b, P, Pc, st, e0,
                        e1);
            const double kv_bytes = 2.0 * (double)c.live * NKV * D * (double)gem_dtype_size(c.t);
            for (int s = 0; s < NSUB; s++) {
                const stats a = summarize(ts + (size_t)s * reps, reps);
                const stats ch = summarize(tc + (size_t)s * rounds, rounds);
                printf("%-4s live %5lld P%-3lld %-8s single %.5f ms [p10 %.5f, p90 %.5f]  chain "
                       "%.5f ms a call [p10 %.5f, p90 %.5f]  %.1f GB/s in the chain\n",
                       gem_dtype_name(c.t), (long long)c.live, (long long)(s < 1 ? P : Pc),
                       subject_names[s],
                       a.median, a.p10, a.p90, ch.median, ch.p10, ch.p90,
                       kv_bytes / (ch.median * 1e-3) * 1e-9);
            }
            const stats lib_s = summarize(ts, reps), lib_c = summarize(tc, rounds);
            for (int s = 1; s < NSUB; s++) {
                const stats a = summarize(ts + (size_t)s * reps, reps);
                const stats ch = summarize(tc + (size_t)s * rounds, rounds);
                printf("%-4s live %5lld %-8s / lib: single %.4f (%+.2f us), chain %.4f (%+.2f us "
                       "a call, %+.1f us for %d calls)\n",
                       gem_dtype_name(c.t), (long long)c.live, subject_names[s],
                       a.median / lib_s.median, 1e3 * (a.median - lib_s.median),
                       ch.median / lib_c.median, 1e3 * (ch.median - lib_c.median),
                       1e3 * CHAIN * (ch.median - lib_c.median), CHAIN);
            }
            free(ts);
            free(tc);
            for (int i = 0; i < copies; i++) {
                cudaFree(dk[i]);
                cudaFree(dv[i]);
            }
            free_bufs(&b);
            free_case(&c);
        }
    gem_decode_ctx_destroy(ctx);
    return 0;
}
