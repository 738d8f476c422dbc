/*
norm_prefetch: the decoder's norm kernels asking the L2 for the next product's first weights,
at Gemma 4 31B's sliding-layer shapes (Q4_0 in tiles), in a chain of layers as the decoder runs
them.

A layer's products each take about twice their bytes' time (docs/model-cuda.md), and between
them the decoder runs small kernels on a few SMs (a norm kernel: 6 blocks for about 5 us) while
DRAM idles. A product's first wave of blocks (660 tiles of q at 5 blocks of 6 warps an SM, 16
MB) starts from DRAM after the norm before it; with the whole matrix in the L2 (run 109) q took
11.1-11.9 us against 13.0. Here the norm kernel, before its programmatic-launch wait, asks the
L2 for the first X bytes of the next product's weights (cp.async.bulk.prefetch.L2, the grid's
threads an equal share each), so that DRAM works through the previous product's tail and the
norm, and the next product's first wave finds its tiles in the L2.

The chain, per layer (matrices of copy c = layer % copies, copies enough to pass 4 x the L2):
  o (gem_dmv, 5376 x 8192)  ->  norm A (x += rmsnorm(o) w; xn = rmsnorm(x) w'; the x scratch)
  ->  gate+up (gem_dmv_geglu_prepared, 2 x 21504 x 5376)  ->  down (gem_dmv, 5376 x 21504)
  ->  norm B (as norm A)  ->  q, k, v (gem_dmv_multi_prepared, 8192 / 4096 / 4096 x 5376)
the next layer's o reading q's first 8,192 outputs. Norm A asks for gate's and up's first X / 2
bytes each, norm B for q's first X. The norm kernel is the library's post_attn_kernel
(src/model/cuda/gemma4_cuda.cu: registers, sums of squares in double, the scratch of each
32-element block by gem_tiles_xq_block) with the prefetch before its wait (its copy and the
layer's matrices in sliding_chain.h, which dev/cuda/layer_persistent shares):

  variant X = 0 (the library's), 8, 16, 32 MB

The prefetch changes no arithmetic: every variant's final x must equal variant 0's bit for bit
(checked before timing, exit 1 otherwise). Timing: chains of `--layers` layers (default 12),
events around the chain alone, variants in order then reversed each round (A B C D D C B A),
`--rounds` rounds (default 10); the median per layer and its spread.

H200 run 143 (L2 60 MB by the device's properties; two copies of a layer's 269.4 MB): every
variant's x equal to the library's after 12 and 60 layers; us a layer, median of 20 chains (p10
.. p90 within 0.6 us): 0 MB 114.59, 8 MB 117.15 (+2.2%), 16 MB 127.61 (+11.4%), 32 MB 143.29
(+25.0%); 60 layers the same. Asking the L2 ahead costs time in proportion to what is asked,
as it did in the long K-from-V passes (run 138) and in the products' own blocks (run 107): the
library's norm kernels ask nothing.

Graphs (--graph): the chain without prefetch (variant 0) captured from its stream into CUDA
graphs (one per copy offset; the launches' programmatic attribute becomes programmatic edges)
and replayed, timed beside the variants: does the device lose time between the 6 launches of a
layer (11 in the decoder's, with attention) that a graph's launch saves, when the host's
launches already run ahead of it? The replay's x must equal variant 0's bit for bit.
Prediction: 1-3 us a layer (1-3%) at most, since the programmatic launches already overlap each
kernel's start with the one before; more would make graphs worth it for the decoder.

Bound (--bounds): the same chain without its two norm kernels (o, gate+up, down, q/k/v back to
back; the products read the x scratch the checked chains left, so the numbers stay finite but
are not the model's). Not a candidate and not checked bit for bit: its time is what the products
alone take in the chain, so variant 0 minus it is the most that computing the norms inside the
next product's blocks (each block reducing the 5,376 values itself, from the L2) could save.
Prediction: 10-18 us of variant 0's 114.6 us a layer (a norm kernel about 5 us of 6 SMs, plus
the next product's start from DRAM after it).

./norm_prefetch [--rounds R] [--layers L] [--graph] [--bounds]
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "sliding_chain.h"

#define NVAR 4
static const size_t kPrefetchMB[NVAR] = {0, 8, 16, 32};

/* ---- the chain ----------------------------------------------------------------------------- */

typedef struct chain {
    int ncopies;
    gem_dmatrix (*m)[M_COUNT];
    float *x[2], *xn, *o_out, *act, *d_out, *yq, *yk, *yv, *w_post, *w_ffn;
    void *xq_o, *xq_mlp, *xq_down, *xq_qkv;
    cudaStream_t st; /* every launch of the chain (a stream that can be captured) */
} chain;

static size_t mat_bytes(const gem_dmatrix *m) { return (size_t)m->rows * m->row_bytes; }

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* One layer of the chain on copy c with X prefetched bytes; x[cur] -> x[cur ^ 1] twice. */
static void layer(chain *ch, int c, size_t X)
{
    gem_dmatrix *m = ch->m[c];
    GEM_TRY(gem_dmv(&m[M_O], ch->yq, ch->o_out, ch->xq_o, ch->st));
    const unsigned grid = (N_EMBD + NORM_THREADS - 1) / NORM_THREADS;
    const size_t half = (X / 2) & ~(size_t)15;
    cudaCheck(launch_pdl(norm_pf_kernel, grid, NORM_THREADS, ch->st, (const float *)ch->o_out,
                         (const float *)ch->w_post, (const float *)ch->x[0], ch->x[1],
                         (const float *)ch->w_ffn, (int64_t)N_EMBD, 1e-6, ch->xn,
                         (unsigned char *)ch->xq_mlp, (const unsigned char *)m[M_GATE].data,
                         min_sz(half, mat_bytes(&m[M_GATE])), (const unsigned char *)m[M_UP].data,
                         min_sz(half, mat_bytes(&m[M_UP]))));
    GEM_TRY(gem_dmv_geglu_prepared(&m[M_GATE], &m[M_UP], ch->xn, ch->act, ch->xq_mlp, ch->st));
    GEM_TRY(gem_dmv(&m[M_DOWN], ch->act, ch->d_out, ch->xq_down, ch->st));
    cudaCheck(launch_pdl(norm_pf_kernel, grid, NORM_THREADS, ch->st, (const float *)ch->d_out,
                         (const float *)ch->w_post, (const float *)ch->x[1], ch->x[0],
                         (const float *)ch->w_ffn, (int64_t)N_EMBD, 1e-6, ch->xn,
                         (unsigned char *)ch->xq_qkv, (const unsigned char *)m[M_Q].data,
                         min_sz(X & ~(size_t)15, mat_bytes(&m[M_Q])),
                         (const unsigned char *)NULL, (size_t)0));
    const gem_dmatrix *w3[3] = {&m[M_Q], &m[M_K], &m[M_V]};
    float *y3[3] = {ch->yq, ch->yk, ch->yv};
    GEM_TRY(gem_dmv_multi_prepared(3, w3, ch->xn, y3, ch->xq_qkv, ch->st));
}

/* The layer's products alone (the --bounds variant): no norm kernels between them. */
static void layer_products(chain *ch, int c)
{
    gem_dmatrix *m = ch->m[c];
    GEM_TRY(gem_dmv(&m[M_O], ch->yq, ch->o_out, ch->xq_o, ch->st));
    GEM_TRY(gem_dmv_geglu_prepared(&m[M_GATE], &m[M_UP], ch->xn, ch->act, ch->xq_mlp, ch->st));
    GEM_TRY(gem_dmv(&m[M_DOWN], ch->act, ch->d_out, ch->xq_down, ch->st));
    const gem_dmatrix *w3[3] = {&m[M_Q], &m[M_K], &m[M_V]};
    float *y3[3] = {ch->yq, ch->yk, ch->yv};
    GEM_TRY(gem_dmv_multi_prepared(3, w3, ch->xn, y3, ch->xq_qkv, ch->st));
}

/* The chain's state from the same start: x, and q's outputs (the first o's input). */
static void reset(chain *ch, const float *hx, const float *hq)
{
    cudaCheck(cudaStreamSynchronize(ch->st));
    cudaCheck(cudaMemcpyAsync(ch->x[0], hx, N_EMBD * 4, cudaMemcpyHostToDevice, ch->st));
    cudaCheck(cudaMemcpyAsync(ch->yq, hq, N_Q * 4, cudaMemcpyHostToDevice, ch->st));
    cudaCheck(cudaStreamSynchronize(ch->st));
}

/* The chain of `layers` layers from copy o captured into a graph (the launches' programmatic
 * attribute becomes the graph's programmatic edges); NULL and a line when the runtime refuses. */
static cudaGraphExec_t capture(chain *ch, int o, int layers)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    cudaError_t e = cudaStreamBeginCapture(ch->st, cudaStreamCaptureModeRelaxed);
    if (e == cudaSuccess) {
        for (int l = 0; l < layers; l++)
            layer(ch, (o + l) % ch->ncopies, 0);
        e = cudaStreamEndCapture(ch->st, &g);
    }
    if (e == cudaSuccess)
        e = cudaGraphInstantiate(&ge, g, 0);
    if (g)
        cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        printf("graph: capture or instantiation refused: %s\n", cudaGetErrorString(e));
        cudaGetLastError();
        return NULL;
    }
    return ge;
}

int main(int argc, char **argv)
{
    int rounds = 10, layers = 12, want_graph = 0, want_bounds = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--graph"))
            want_graph = 1;
        else if (!strcmp(argv[i], "--bounds"))
            want_bounds = 1;
        else {
            fprintf(stderr, "usage: %s [--rounds R] [--layers L] [--graph] [--bounds]\n",
                    argv[0]);
            return 2;
        }
    }
    rounds = rounds < 2 ? 2 : rounds;
    layers = layers < 1 ? 1 : layers;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20);

    chain ch;
    memset(&ch, 0, sizeof ch);
    cudaCheck(cudaStreamCreateWithFlags(&ch.st, cudaStreamNonBlocking));
    const size_t layer_bytes = sliding_layer_bytes();
    ch.m = sliding_layer_copies(prop.l2CacheSize, 0, &ch.ncopies);
    printf("%d copies of a layer's %.1f MB of weights\n", ch.ncopies, layer_bytes * 1e-6);
    float **vecs[] = {&ch.x[0], &ch.x[1], &ch.xn, &ch.o_out, &ch.act, &ch.d_out, &ch.yq, &ch.yk,
                      &ch.yv, &ch.w_post, &ch.w_ffn};
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++)
        cudaCheck(cudaMalloc((void **)vecs[i], (size_t)N_FF * 4));
    void **xqs[] = {&ch.xq_o, &ch.xq_mlp, &ch.xq_down, &ch.xq_qkv};
    for (size_t i = 0; i < sizeof xqs / sizeof xqs[0]; i++)
        cudaCheck(cudaMalloc(xqs[i], gem_dmv_xq_bytes(N_FF) + 16));
    float *hx = (float *)malloc(N_EMBD * 4), *hq = (float *)malloc(N_Q * 4),
          *hw = (float *)malloc(N_EMBD * 4);
    fill(hx, N_EMBD, 5);
    fill(hq, N_Q, 6);
    fill_uniform(hw, N_EMBD, 7, 0.5f, 1.5f);
    cudaCheck(cudaMemcpy(ch.w_post, hw, N_EMBD * 4, cudaMemcpyHostToDevice));
    fill_uniform(hw, N_EMBD, 8, 0.5f, 1.5f);
    cudaCheck(cudaMemcpy(ch.w_ffn, hw, N_EMBD * 4, cudaMemcpyHostToDevice));

    /* every variant's final x equals variant 0's, and a repeat its own */
    float *ref = (float *)malloc(N_EMBD * 4), *got = (float *)malloc(N_EMBD * 4);
    int failed = 0;
    for (int v = 0; v < NVAR; v++)
        for (int rep = 0; rep < 2; rep++) {
            reset(&ch, hx, hq);
            for (int l = 0; l < layers; l++)
                layer(&ch, l % ch.ncopies, kPrefetchMB[v] << 20);
            cudaCheck(cudaDeviceSynchronize());
            cudaCheck(cudaMemcpy(v == 0 && rep == 0 ? ref : got, ch.x[0], N_EMBD * 4,
                                 cudaMemcpyDeviceToHost));
            if ((v || rep) && memcmp(ref, got, N_EMBD * 4) != 0) {
                printf("check: prefetch %zu MB, repeat %d: x differs from the library's: FAILED\n",
                       kPrefetchMB[v], rep);
                failed = 1;
            }
        }
    /* the graph variant: the same chain (prefetch 0) replayed from graphs, one per copy offset */
    cudaGraphExec_t *graphs = (cudaGraphExec_t *)calloc((size_t)ch.ncopies, sizeof *graphs);
    int graph_ok = want_graph;
    for (int o = 0; o < ch.ncopies && graph_ok; o++)
        graph_ok = (graphs[o] = capture(&ch, o, layers)) != NULL;
    for (int rep = 0; rep < 2 && graph_ok; rep++) {
        reset(&ch, hx, hq);
        cudaCheck(cudaGraphLaunch(graphs[0], ch.st));
        cudaCheck(cudaStreamSynchronize(ch.st));
        cudaCheck(cudaMemcpy(got, ch.x[0], N_EMBD * 4, cudaMemcpyDeviceToHost));
        if (memcmp(ref, got, N_EMBD * 4) != 0) {
            printf("check: the graph's replay %d: x differs from the library's: FAILED\n", rep);
            failed = 1;
        }
    }
    int finite = 1;
    for (int i = 0; i < N_EMBD; i++)
        finite &= isfinite(ref[i]) != 0;
    if (!finite) {
        printf("check: x is not finite after %d layers: FAILED\n", layers);
        failed = 1;
    }
    if (failed)
        return 1;
    printf("check: every variant's x after %d layers equals the library's bit for bit%s\n", layers,
           graph_ok ? " (the graph's too)" : "");

    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    const int NV = NVAR + 2; /* the prefetch variants, the graph, the products alone */
    double *t = (double *)calloc((size_t)NV * 2 * rounds, sizeof(double));
    int nt[NVAR + 2] = {0};
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 2 * NV; k++) {
            const int v = k < NV ? k : 2 * NV - 1 - k;
            if ((v == NVAR && !graph_ok) || (v == NVAR + 1 && !want_bounds))
                continue;
            reset(&ch, hx, hq);
            wait_kernel<<<1, 1, 0, ch.st>>>(20000000ull); /* the launches run ahead */
            cudaCheck(cudaGetLastError());
            cudaCheck(cudaEventRecord(e0, ch.st));
            if (v == NVAR)
                cudaCheck(cudaGraphLaunch(graphs[r % ch.ncopies], ch.st));
            else if (v == NVAR + 1)
                for (int l = 0; l < layers; l++)
                    layer_products(&ch, (r + l) % ch.ncopies);
            else
                for (int l = 0; l < layers; l++)
                    layer(&ch, (r + l) % ch.ncopies, kPrefetchMB[v] << 20);
            cudaCheck(cudaEventRecord(e1, ch.st));
            cudaCheck(cudaEventSynchronize(e1));
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
            t[(size_t)v * 2 * rounds + (size_t)nt[v]++] = ms * 1e3 / layers;
        }
    printf("\n%-12s %12s %10s %10s %10s\n", "prefetch", "us/layer", "p10", "p90", "vs 0");
    double med0 = 0;
    for (int v = 0; v < NV; v++) {
        if (nt[v] == 0)
            continue;
        double *tv = t + (size_t)v * 2 * rounds;
        qsort(tv, (size_t)nt[v], sizeof(double), cmp_double);
        const double med = tv[nt[v] / 2];
        if (v == 0)
            med0 = med;
        if (v >= NVAR)
            printf("%12s %12.2f %10.2f %10.2f %9.3f\n",
                   v == NVAR ? "graph, 0 MB" : "no norms", med, tv[nt[v] / 10],
                   tv[nt[v] - 1 - nt[v] / 10], med / med0);
        else
            printf("%9zu MB %12.2f %10.2f %10.2f %9.3f\n", kPrefetchMB[v], med, tv[nt[v] / 10],
                   tv[nt[v] - 1 - nt[v] / 10], med / med0);
    }
    return 0;
}
