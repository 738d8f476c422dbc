/*
 * The Gemma 4 text decoder on one GPU: the same token as gemma4.c computes on the
 * CPU, with every step on the device and one host synchronisation per token (at
 * its end, for the logits and the non-finite flag).
 *
 *   embedding      gem_dmv_row (dequantized row * sqrt(n_embd))
 *   per layer      norm_kernel / post_attn_kernel / post_ffn_kernel (one block each:
 *                  the RMS norms and the residual stream, sums of squares in double
 *                  as the CPU takes them), gem_dmv_multi (q, k, v), qkv_post_kernel
 *                  (q/k/v norms, RoPE in double, the new cache row), gem_decode
 *                  (attention on the caches in place, sliding and full layers),
 *                  gem_dmv (o, down), gem_dmv_geglu (gate, up and GeGLU)
 *   logits         gem_dmv on the tied embedding, softcap_kernel; gem_dargmax for
 *                  gem_session_eval_argmax (the greedy token alone crosses to the host)
 *
 * Elementwise steps take the CPU decoder's arithmetic operation for operation; the
 * matrix products and the attention sum in another (fixed) order, so the two
 * backends agree to float rounding (tests/test_model_cuda.c), and the device gives
 * the same bits on every run.
 *
 * Stage times: an event at every change of stage (embedding, norms, projections,
 * sliding attention, full attention, MLP, logits) on the session's stream; after
 * the token's synchronisation the intervals are added to the stage they close.
 * The token's time is the first event to the last: GPU time, with any gap the host
 * left between kernels inside it.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gem/decode.h"
#include "gem/model.h"
#include "model_cuda.h"
#include "cuda/gem_pdl.cuh"
#include "model_internal.h"
#include "tiles_arith.cuh"

#define QKV_THREADS 256  /* threads of the q/k/v kernel's blocks */
#define NORM_THREADS 1024 /* threads of the norm kernels' one block */
#define NORM_PER_THREAD 8 /* elements a norm kernel's thread holds */
#define NORM_MAX (NORM_THREADS * NORM_PER_THREAD) /* the widest hidden size */
#define QKV_MAX_DIM 1024 /* head dimensions it holds in shared memory */

/* ---- errors ---------------------------------------------------------------------- */

static gem_status dfail(char *err, size_t errlen, gem_status st, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

static gem_status cu_status(cudaError_t e)
{
    if (e == cudaSuccess)
        return GEM_OK;
    if (e == cudaErrorMemoryAllocation)
        return GEM_ERR_NOMEM;
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
        return GEM_ERR_NO_DEVICE;
    return GEM_ERR_DEVICE;
}

/* ---- the weights on the device ---------------------------------------------------------- */

typedef struct dev_layer {
    gem_dmatrix wq, wk, wv, wo, gate, up, down; /* wv.data NULL when k_eq_v */
    float *attn_norm, *q_norm, *k_norm, *post_attn_norm, *ffn_norm, *post_ffn_norm;
} dev_layer;

struct gem_model_dev {
    int device;
    uint64_t seed;
    size_t bytes;
    dev_layer *layers; /* (n_layers) */
    gem_dmatrix embd;  /* (n_vocab, n_embd) */
    gem_dmatrix output; /* the head: shares embd's memory when tied */
    float *output_norm; /* (n_embd) */
    void **allocs;      /* every device allocation, for the release */
    int64_t n_allocs, cap_allocs;
};

static gem_status dev_track(gem_model_dev *d, size_t bytes, void **out)
{
    *out = NULL;
    if (d->n_allocs == d->cap_allocs) {
        const int64_t cap = d->cap_allocs ? 2 * d->cap_allocs : 64;
        void **a = (void **)realloc(d->allocs, (size_t)cap * sizeof *a);
        if (!a)
            return GEM_ERR_NOMEM;
        d->allocs = a;
        d->cap_allocs = cap;
    }
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return cu_status(e);
    }
    d->allocs[d->n_allocs++] = p;
    d->bytes += bytes;
    *out = p;
    return GEM_OK;
}

void gem_model_dev_free(gem_model_dev *d)
{
    if (!d)
        return;
    for (int64_t i = 0; i < d->n_allocs; i++)
        cudaFree(d->allocs[i]);
    free(d->allocs);
    free(d->layers);
    free(d);
}

size_t gem_model_dev_bytes(const gem_model_dev *d) { return d ? d->bytes : 0; }
uint64_t gem_model_dev_random_seed(const gem_model_dev *d) { return d ? d->seed : 0; }

/* Device memory that stages a matrix's file-order rows before gem_dmatrix_tile: grown to
 * the largest tiled matrix, freed when the upload ends. */
typedef struct dev_stage {
    void *p;
    size_t bytes;
} dev_stage;

/* A matrix on the device: its file bytes, or seeded random blocks (seed != 0, a
 * stream of its own per matrix: `index`); in tiles (Q4_0, Q4_K, Q6_K or Q8_0) when may_tile
 * and its type and shape allow, through `stage`. */
static gem_status dev_matrix(gem_model_dev *d, const gem_matrix *m, uint64_t seed, uint64_t index,
                             float amp, int may_tile, dev_stage *stage, gem_dmatrix *out,
                             char *err, size_t errlen, const char *name)
{
    *out = (gem_dmatrix){NULL, m->type, m->rows, m->cols, m->row_bytes, GEM_DLAYOUT_ROWS};
    if (!gem_dmv_supported(m->type, m->cols))
        return dfail(err, errlen, GEM_ERR_UNSUPPORTED,
                     "%s: weight type %s with rows of %lld has no device kernel", name,
                     gem_gguf_type_name(m->type), (long long)m->cols);
    size_t bytes;
    gem_status st = gem_mul_size((size_t)m->rows, m->row_bytes, &bytes);
    if (st != GEM_OK)
        return dfail(err, errlen, st, "%s: size does not fit", name);
    if ((st = dev_track(d, bytes, &out->data)) != GEM_OK)
        return dfail(err, errlen, st, "%s: device memory for %zu bytes: %s", name, bytes,
                     gem_status_str(st));
    const int tile = may_tile && gem_dmatrix_tiles_ok(m->type, m->rows, m->cols);
    if (tile && stage->bytes < bytes) {
        if (stage->p)
            cudaFree(stage->p);
        stage->p = NULL;
        stage->bytes = 0;
        if ((st = cu_status(cudaMalloc(&stage->p, bytes))) != GEM_OK)
            return dfail(err, errlen, st, "%s: staging memory for %zu bytes: %s", name, bytes,
                         gem_status_str(st));
        stage->bytes = bytes;
    }
    gem_dmatrix rows = *out;
    if (tile)
        rows.data = stage->p;
    if (seed) {
        /* SplitMix64's increment separates the matrices' streams */
        const uint64_t s = seed + 0x9E3779B97F4A7C15ull * (index + 1);
        st = gem_dmatrix_fill_random(&rows, s ? s : 1, amp, NULL);
    } else {
        st = cu_status(cudaMemcpy(rows.data, m->data, bytes, cudaMemcpyHostToDevice));
    }
    if (st == GEM_OK && tile)
        st = gem_dmatrix_tile(out, rows.data, NULL);
    if (st != GEM_OK)
        return dfail(err, errlen, st, "%s: putting the weights on the device: %s", name,
                     gem_status_str(st));
    return GEM_OK;
}

static gem_status dev_vector(gem_model_dev *d, const float *v, int64_t n, float **out)
{
    void *p;
    gem_status st = dev_track(d, (size_t)n * sizeof(float), &p);
    if (st != GEM_OK)
        return st;
    *out = (float *)p;
    return cu_status(cudaMemcpy(p, v, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
}

gem_status gem_model_dev_create(const gem_model *m, uint64_t random_seed, gem_model_dev **out,
                                char *err, size_t errlen)
{
    *out = NULL;
    int dev = -1, n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1 || cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return dfail(err, errlen, GEM_ERR_NO_DEVICE, "no usable CUDA device");
    }
    gem_model_dev *d = (gem_model_dev *)calloc(1, sizeof *d);
    if (!d)
        return GEM_ERR_NOMEM;
    d->device = dev;
    d->seed = random_seed;
    const gem_hparams *hp = &m->hp;
    gem_status st = GEM_ERR_NOMEM;
    dev_stage stage = {NULL, 0};
    d->layers = (dev_layer *)calloc((size_t)hp->n_layers, sizeof *d->layers);
    if (!d->layers)
        goto fail;
    {
        char name[96];
        uint64_t idx = 0;
        /* the embedding +-4/sqrt(n_embd): the logits' scale of the synthetic files' +-0.5 at
         * width 64, whatever the width (at 5376, +-0.5 would make the token's own embedding
         * dominate the residual stream and put every top logit on the softcap) */
        const float embd_amp = 4.0f / sqrtf((float)hp->n_embd);
        if ((st = dev_matrix(d, &m->tok_embd, random_seed, idx++, embd_amp, 1, &stage, &d->embd,
                             err, errlen, "token_embd")) != GEM_OK)
            goto fail;
        if (m->output.data == m->tok_embd.data) {
            d->output = d->embd; /* tied */
        } else if ((st = dev_matrix(d, &m->output, random_seed, idx++,
                                    1.0f / sqrtf((float)m->output.cols), 1, &stage, &d->output,
                                    err, errlen, "output")) != GEM_OK) {
            goto fail;
        }
        if ((st = dev_vector(d, m->output_norm, hp->n_embd, &d->output_norm)) != GEM_OK)
            goto fail;
        for (int64_t i = 0; i < hp->n_layers; i++) {
            const gem_layer *l = &m->layers[i];
            dev_layer *dl = &d->layers[i];
            const gem_matrix *src[7] = {&l->wq, &l->wk, &l->wv, &l->wo,
                                        &l->w_gate, &l->w_up, &l->w_down};
            gem_dmatrix *dst[7] = {&dl->wq, &dl->wk, &dl->wv, &dl->wo,
                                   &dl->gate, &dl->up, &dl->down};
            static const char *const names[7] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                                 "ffn_gate", "ffn_up", "ffn_down"};
            /* GeGLU reads its two matrices in one layout: tiles only when both tile alike */
            const int pair_tiles =
                l->w_gate.type == l->w_up.type &&
                gem_dmatrix_tiles_ok(l->w_gate.type, l->w_gate.rows, l->w_gate.cols) &&
                gem_dmatrix_tiles_ok(l->w_up.type, l->w_up.rows, l->w_up.cols);
            for (int j = 0; j < 7; j++) {
                if (j == 2 && l->k_eq_v)
                    continue;
                snprintf(name, sizeof name, "blk.%lld.%s", (long long)i, names[j]);
                if ((st = dev_matrix(d, src[j], random_seed, idx++,
                                     1.0f / sqrtf((float)src[j]->cols),
                                     j == 4 || j == 5 ? pair_tiles : 1, &stage, dst[j], err,
                                     errlen, name)) != GEM_OK)
                    goto fail;
            }
            const int64_t E = hp->n_embd, hd = l->head_dim;
            if ((st = dev_vector(d, l->attn_norm, E, &dl->attn_norm)) != GEM_OK ||
                (st = dev_vector(d, l->q_norm, hd, &dl->q_norm)) != GEM_OK ||
                (st = dev_vector(d, l->k_norm, hd, &dl->k_norm)) != GEM_OK ||
                (st = dev_vector(d, l->post_attn_norm, E, &dl->post_attn_norm)) != GEM_OK ||
                (st = dev_vector(d, l->ffn_norm, E, &dl->ffn_norm)) != GEM_OK ||
                (st = dev_vector(d, l->post_ffn_norm, E, &dl->post_ffn_norm)) != GEM_OK) {
                dfail(err, errlen, st, "layer %lld's norm vectors: %s", (long long)i,
                      gem_status_str(st));
                goto fail;
            }
        }
    }
    if ((st = cu_status(cudaDeviceSynchronize())) != GEM_OK) {
        dfail(err, errlen, st, "putting the weights on the device: %s", gem_status_str(st));
        goto fail;
    }
    if (stage.p)
        cudaFree(stage.p);
    *out = d;
    return GEM_OK;
fail:
    if (stage.p) {
        cudaDeviceSynchronize();
        cudaFree(stage.p);
    }
    if (err && errlen && !err[0])
        dfail(err, errlen, st, "putting the weights on the device: %s", gem_status_str(st));
    gem_model_dev_free(d);
    return st;
}

/* ---- caches ---------------------------------------------------------------------------- */

gem_status gem_dev_alloc(size_t bytes, void **out)
{
    *out = NULL;
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *out = NULL;
        return cu_status(e);
    }
    return GEM_OK;
}

void gem_dev_free(void *p)
{
    if (p)
        cudaFree(p);
}

/* ---- the session's device state ---------------------------------------------------------- */

enum { ST_EMBED, ST_NORMS, ST_PROJ, ST_ATTN_SWA, ST_ATTN_FULL, ST_MLP, ST_LOGITS, ST_COUNT };

struct gem_session_dev {
    cudaStream_t stream;
    float *x, *x2, *xn, *q, *k, *v, *att, *o, *h, *logits; /* device scratch; x and x2 the
                                                                residual stream's two buffers */
    void *xq;           /* the products' x scratch (gem_dmv_xq_bytes of the widest input) */
    double *inv_freq;   /* (n_layers, max_half) on the device */
    int64_t max_half;
    unsigned *flag;     /* device: bit 0 a cache row, bit 1 a logit not finite */
    unsigned *h_flag;   /* pinned host copy */
    float *h_logits;    /* pinned host (n_vocab) */
    int32_t *amax;      /* device: the greedy token, then gem_dargmax's scratch */
    int32_t *h_amax;    /* pinned host copy of the token */
    cudaEvent_t *ev;    /* (n_ev) */
    int *ev_stage;      /* (n_ev): the stage that the interval ending at event i belongs to */
    int64_t n_ev, used_ev;
    cudaGraphExec_t greedy[2]; /* gem_session_dev_greedy's two executables, kept between calls
                                  (NULL until its first call with n >= 2) */
};

gem_decode_ctx *gem_session_dev_decode_ctx(gem_session *s) { return s->dctx; }

gem_status gem_dev_copy(gem_session *s, void *dst, const void *src, size_t bytes)
{
    cudaStream_t st = s->dev ? s->dev->stream : 0;
    gem_status r = cu_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
    if (r == GEM_OK)
        r = cu_status(cudaStreamSynchronize(st));
    return r;
}

void gem_session_dev_free(gem_session *s)
{
    gem_session_dev *d = s->dev;
    gem_dev_free(s->ws);
    s->ws = NULL;
    if (!d)
        return;
    if (d->stream)
        cudaStreamSynchronize(d->stream);
    for (int k = 0; k < 2; k++)
        if (d->greedy[k])
            cudaGraphExecDestroy(d->greedy[k]);
    float *dev_bufs[] = {d->x, d->x2, d->xn, d->q, d->k, d->v, d->att, d->o, d->h, d->logits};
    for (size_t i = 0; i < sizeof dev_bufs / sizeof *dev_bufs; i++)
        gem_dev_free(dev_bufs[i]);
    gem_dev_free(d->inv_freq);
    gem_dev_free(d->xq);
    gem_dev_free(d->flag);
    gem_dev_free(d->amax);
    if (d->h_flag)
        cudaFreeHost(d->h_flag);
    if (d->h_amax)
        cudaFreeHost(d->h_amax);
    if (d->h_logits)
        cudaFreeHost(d->h_logits);
    for (int64_t i = 0; d->ev && i < d->n_ev; i++)
        if (d->ev[i])
            cudaEventDestroy(d->ev[i]);
    free(d->ev);
    free(d->ev_stage);
    if (d->stream)
        cudaStreamDestroy(d->stream);
    free(d);
    s->dev = NULL;
}

gem_status gem_session_dev_create(gem_session *s, char *err, size_t errlen)
{
    const gem_model *m = s->m;
    const gem_hparams *hp = &m->hp;
    gem_session_dev *d = (gem_session_dev *)calloc(1, sizeof *d);
    if (!d)
        return GEM_ERR_NOMEM;
    s->dev = d;
    gem_status st;
    int64_t max_q = 0, max_k = 0, max_ff = 0, max_half = 1;
    for (int64_t i = 0; i < hp->n_layers; i++) {
        const gem_layer *l = &m->layers[i];
        max_q = l->n_head * l->head_dim > max_q ? l->n_head * l->head_dim : max_q;
        max_k = l->n_head_kv * l->head_dim > max_k ? l->n_head_kv * l->head_dim : max_k;
        max_ff = l->n_ff > max_ff ? l->n_ff : max_ff;
        max_half = l->n_rot / 2 > max_half ? l->n_rot / 2 : max_half;
    }
    d->max_half = max_half;
    if (hp->n_embd > NORM_MAX)
        return dfail(err, errlen, GEM_ERR_UNSUPPORTED,
                     "hidden size %lld is past the device decoder's %d", (long long)hp->n_embd,
                     NORM_MAX);
    for (int64_t i = 0; i < hp->n_layers; i++)
        if (m->layers[i].head_dim > QKV_MAX_DIM)
            return dfail(err, errlen, GEM_ERR_UNSUPPORTED,
                         "layer %lld: head dimension %lld is past the device decoder's %d",
                         (long long)i, (long long)m->layers[i].head_dim, QKV_MAX_DIM);
    const size_t E = (size_t)hp->n_embd;
    int64_t max_in = hp->n_embd > max_q ? hp->n_embd : max_q;
    max_in = max_ff > max_in ? max_ff : max_in;
    if ((st = cu_status(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking))) != GEM_OK ||
        (st = gem_dev_alloc(gem_dmv_xq_bytes(max_in) + 16, &d->xq)) != GEM_OK ||
        (st = gem_dev_alloc(s->ws_bytes ? s->ws_bytes : 64, &s->ws)) != GEM_OK ||
        (st = gem_dev_alloc(E * 4, (void **)&d->x)) != GEM_OK ||
        (st = gem_dev_alloc(E * 4, (void **)&d->x2)) != GEM_OK ||
        (st = gem_dev_alloc(E * 4, (void **)&d->xn)) != GEM_OK ||
        (st = gem_dev_alloc(E * 4, (void **)&d->o)) != GEM_OK ||
        (st = gem_dev_alloc((size_t)max_q * 4, (void **)&d->q)) != GEM_OK ||
        (st = gem_dev_alloc((size_t)max_q * 4, (void **)&d->att)) != GEM_OK ||
        (st = gem_dev_alloc((size_t)max_k * 4, (void **)&d->k)) != GEM_OK ||
        (st = gem_dev_alloc((size_t)max_k * 4, (void **)&d->v)) != GEM_OK ||
        (st = gem_dev_alloc((size_t)max_ff * 4, (void **)&d->h)) != GEM_OK ||
        (st = gem_dev_alloc((size_t)hp->n_vocab * 4, (void **)&d->logits)) != GEM_OK ||
        (st = gem_dev_alloc(sizeof(unsigned), (void **)&d->flag)) != GEM_OK ||
        (st = gem_dev_alloc(8 + gem_dargmax_scratch_bytes(hp->n_vocab), (void **)&d->amax)) !=
            GEM_OK ||
        (st = cu_status(cudaMallocHost((void **)&d->h_amax, sizeof(int32_t)))) != GEM_OK ||
        (st = gem_dev_alloc((size_t)(hp->n_layers * max_half) * sizeof(double),
                            (void **)&d->inv_freq)) != GEM_OK ||
        (st = cu_status(cudaMallocHost((void **)&d->h_flag, sizeof(unsigned)))) != GEM_OK ||
        (st = cu_status(cudaMallocHost((void **)&d->h_logits, (size_t)hp->n_vocab * 4))) !=
            GEM_OK)
        return dfail(err, errlen, st, "device scratch of the session: %s", gem_status_str(st));
    for (int64_t i = 0; i < hp->n_layers; i++) {
        const gem_layer *l = &m->layers[i];
        if (l->n_rot / 2 > 0 &&
            (st = cu_status(cudaMemcpy(d->inv_freq + i * max_half, s->inv_freq[i],
                                       (size_t)(l->n_rot / 2) * sizeof(double),
                                       cudaMemcpyHostToDevice))) != GEM_OK)
            return dfail(err, errlen, st, "rotation table: %s", gem_status_str(st));
        if (s->v_only[i]) /* the decode reads k_weight in the backend's memory */
            s->kfv[i].k_weight = m->dev->layers[i].k_norm;
    }
    /* an event at every change of stage: at most 8 per layer and a few around them */
    d->n_ev = 8 * hp->n_layers + 8;
    d->ev = (cudaEvent_t *)calloc((size_t)d->n_ev, sizeof *d->ev);
    d->ev_stage = (int *)calloc((size_t)d->n_ev, sizeof *d->ev_stage);
    if (!d->ev || !d->ev_stage)
        return dfail(err, errlen, GEM_ERR_NOMEM, "out of memory for the stage events");
    for (int64_t i = 0; i < d->n_ev; i++)
        if ((st = cu_status(cudaEventCreate(&d->ev[i]))) != GEM_OK)
            return dfail(err, errlen, st, "stage events: %s", gem_status_str(st));
    return GEM_OK;
}

/* ---- elementwise kernels --------------------------------------------------------------------- */


/* The sum of v over the block in a fixed order (warp trees, then each warp the same tree over
 * the warps' sums, taking its lane 0's), every thread receiving it, with one barrier. sh (32)
 * shared, written by no other sum of the kernel, since no barrier precedes the warps' stores
 * (block_sum puts one there). Lineage: the sum once had warp 0 alone add the warps' sums and
 * hand the result back through sh, the same additions in the same order, with two barriers
 * more. */
__device__ __forceinline__ double block_sum_once(double v, double *sh)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x / 32) ? sh[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}

/* block_sum_once's sum for a kernel that takes several sums with one sh (32): a barrier first,
 * so that no warp stores into sh while another still reads the previous sum there. */
__device__ double block_sum(double v, double *sh)
{
    __syncthreads();
    return block_sum_once(v, sh);
}

/* 1 / sqrt(mean(x^2) + eps) of x (n) in double, as the CPU's rmsnorm. */
__device__ double rms_inv(const float *x, int64_t n, double eps, double *sh)
{
    double ss = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        ss += (double)x[i] * (double)x[i];
    ss = block_sum(ss, sh);
    return 1.0 / sqrt(ss / (double)n + eps);
}

/* The norm kernels hold the vectors in registers: thread t owns elements t + k NORM_THREADS,
 * k < NORM_PER_THREAD, loaded all at once (the weights before the launch wait, since no kernel
 * of the token writes them), so a kernel waits on memory once instead of once per element per
 * pass (ncu, H200 run 32: 11.7 us a post-attention or post-MLP kernel when each of its loops
 * loaded an element at a time; dev/cuda/model_norms, run 33: the post-MLP kernel 5.74 -> 5.04 us
 * chained, its bits equal). The sums of squares add a thread's elements in the same order
 * and then block_sum, as rms_inv does: the same bits as the loops. n <= NORM_MAX. */

/* v[k] = p[threadIdx.x + k blockDim.x] for the elements below n. */
__device__ __forceinline__ void norm_load(const float *__restrict__ p, int64_t n,
                                          float (&v)[NORM_PER_THREAD])
{
#pragma unroll
    for (int k = 0; k < NORM_PER_THREAD; k++) {
        const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
        v[k] = i < n ? p[i] : 0.0f;
    }
}

/* p[threadIdx.x + blockIdx.x blockDim.x], the element of the block's slice (norm_grid), or 0
 * past n: a weight that only the slice's store multiplies by. */
__device__ __forceinline__ float norm_load_slice(const float *__restrict__ p, int64_t n)
{
    const int64_t i = threadIdx.x + (int64_t)blockIdx.x * blockDim.x;
    return i < n ? p[i] : 0.0f;
}

/* 1 / sqrt(mean(v^2) + eps) over the block's elements (rms_inv's arithmetic); sh (32) shared
 * for this sum alone (block_sum_once). Lineage: block_sum's three barriers a sum, two of them
 * around warp 0's sum of the warps' sums, were on each norm kernel's critical path. */
__device__ __forceinline__ double norm_rms_inv(const float (&v)[NORM_PER_THREAD], int64_t n,
                                               double eps, double *sh)
{
    double ss = 0.0;
#pragma unroll
    for (int k = 0; k < NORM_PER_THREAD; k++)
        if (threadIdx.x + (int64_t)k * blockDim.x < n)
            ss += (double)v[k] * (double)v[k];
    ss = block_sum_once(ss, sh);
    return 1.0 / sqrt(ss / (double)n + eps);
}

/* The norm kernels run norm_grid(n) blocks. Every block loads the whole vectors and computes
 * the same sums in the same order (the same bits in each), and block j stores the elements of
 * slice j (k = j: elements k NORM_THREADS .. + NORM_THREADS - 1): xn, the residual stream's
 * new x when there is one, and, when xq is not NULL, the products' scratch of those elements,
 * each warp one 32-element block of xn by gem_tiles_xq_block (and, when a BF16 tiled matrix
 * reads it, its BF16 pieces by gem_tiles_xq_pieces): the bits xq_kernel would write from xn, so
 * the next product runs prepared, without its own scratch kernel (a launch and a dependent wait
 * less, twice a layer). A block reads x, which another block's stores would change, so the
 * residual stream moves between two buffers (x_in -> x_out). */
__host__ __device__ constexpr unsigned norm_grid(int64_t n)
{
    return (unsigned)((n + NORM_THREADS - 1) / NORM_THREADS);
}

/* xn = v * r * wk for the block's slice, wk the weight of the thread's element there
 * (norm_load_slice; and x_out = v, xq with the BF16 pieces when kPieces) as above; n <=
 * NORM_MAX, and when xq is not NULL n is a multiple of 32. The norm kernels take kPieces as a
 * template argument, so that the kernels without the pieces are the ones measured before them.
 * A block loads only its slice of the weight it stores with: the whole vector in registers
 * made the post-attention and post-MLP kernels spill 20 bytes a thread (ptxas, 1,024 threads
 * of at most 64 registers), for values no other thread's store reads. */
template <bool kPieces>
__device__ __forceinline__ void norm_store(const float (&v)[NORM_PER_THREAD], float wk, double r,
                                           int64_t n, float *__restrict__ x_out,
                                           float *__restrict__ xn, unsigned char *__restrict__ xq)
{
    const int k = (int)blockIdx.x;
    float vk = 0.0f; /* the slice's element, picked with constant indices */
#pragma unroll
    for (int kk = 0; kk < NORM_PER_THREAD; kk++)
        if (kk == k)
            vk = v[kk];
    const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
    const float y = (float)((double)vk * r) * wk;
    if (i < n) {
        if (x_out)
            x_out[i] = vk;
        xn[i] = y;
    }
    /* the warp's block: the whole warp in or out, since n % 32 == 0 with a scratch */
    const int64_t blk = ((int64_t)k * blockDim.x + (threadIdx.x & ~31u)) / 32;
    if (xq && 32 * blk < n) {
        gem_tiles_xq_block(y, blk, xq, (int)(threadIdx.x & 31));
        if (kPieces)
            gem_tiles_xq_pieces(y, i, n, xq);
    }
}

/* xn = rmsnorm(x) * w (and its scratch in xq, unless NULL; with the BF16 pieces when
 * kPieces).  x, w, xn (n <= NORM_MAX); norm_grid(n) blocks of NORM_THREADS. */
template <bool kPieces>
__global__ void __launch_bounds__(NORM_THREADS)
    norm_kernel(const float *__restrict__ x, const float *__restrict__ w, int64_t n, double eps,
                float *__restrict__ xn, unsigned char *__restrict__ xq)
{
    __shared__ double sh[32];
    float xv[NORM_PER_THREAD];
    pdl_trigger();
    const float wk = norm_load_slice(w, n);
    pdl_wait(); /* launched with launch_pdl: the previous kernel's output */
    norm_load(x, n, xv);
    const double r = norm_rms_inv(xv, n, eps, sh);
    norm_store<kPieces>(xv, wk, r, n, nullptr, xn, xq);
}

/* After attention: x_out = x_in + rmsnorm(o) * w_post; xn = rmsnorm(x_out) * w_ffn (and its
 * scratch in xq, unless NULL, as norm_kernel's).  (n <= NORM_MAX) each, x_out apart from x_in;
 * norm_grid(n) blocks of NORM_THREADS. */
template <bool kPieces>
__global__ void __launch_bounds__(NORM_THREADS)
    post_attn_kernel(const float *__restrict__ o, const float *__restrict__ w_post,
                     const float *__restrict__ x_in, float *__restrict__ x_out,
                     const float *__restrict__ w_ffn, int64_t n, double eps,
                     float *__restrict__ xn, unsigned char *__restrict__ xq)
{
    __shared__ double sh[2][32]; /* a buffer for each of the two sums */
    float wp[NORM_PER_THREAD], ov[NORM_PER_THREAD], xv[NORM_PER_THREAD];
    pdl_trigger();
    norm_load(w_post, n, wp);
    const float wf = norm_load_slice(w_ffn, n);
    pdl_wait(); /* launched with launch_pdl: the previous kernel's output */
    norm_load(o, n, ov);
    norm_load(x_in, n, xv);
    const double r = norm_rms_inv(ov, n, eps, sh[0]);
#pragma unroll
    for (int k = 0; k < NORM_PER_THREAD; k++)
        xv[k] += (float)((double)ov[k] * r) * wp[k];
    norm_store<kPieces>(xv, wf, norm_rms_inv(xv, n, eps, sh[1]), n, x_out, xn, xq);
}

/* After the MLP: x_out = (x_in + rmsnorm(o) * w_post) * scale; xn = rmsnorm(x_out) * w_next
 * (the next layer's input norm, or the output norm; its scratch in xq, unless NULL, as
 * norm_kernel's).  (n <= NORM_MAX) each, x_out apart from x_in; norm_grid(n) blocks of
 * NORM_THREADS. */
template <bool kPieces>
__global__ void __launch_bounds__(NORM_THREADS)
    post_ffn_kernel(const float *__restrict__ o, const float *__restrict__ w_post,
                    const float *__restrict__ x_in, float *__restrict__ x_out, float scale,
                    const float *__restrict__ w_next, int64_t n, double eps,
                    float *__restrict__ xn, unsigned char *__restrict__ xq)
{
    __shared__ double sh[2][32]; /* a buffer for each of the two sums */
    float wp[NORM_PER_THREAD], ov[NORM_PER_THREAD], xv[NORM_PER_THREAD];
    pdl_trigger();
    norm_load(w_post, n, wp);
    const float wn = norm_load_slice(w_next, n);
    pdl_wait(); /* launched with launch_pdl: the previous kernel's output */
    norm_load(o, n, ov);
    norm_load(x_in, n, xv);
    const double r = norm_rms_inv(ov, n, eps, sh[0]);
#pragma unroll
    for (int k = 0; k < NORM_PER_THREAD; k++)
        xv[k] = (xv[k] + (float)((double)ov[k] * r) * wp[k]) * scale;
    norm_store<kPieces>(xv, wn, norm_rms_inv(xv, n, eps, sh[1]), n, x_out, xn, xq);
}

/* NeoX RoPE of one head held in shared memory: pairs (j, j + half), angle pos * inv_freq[j]
 * in double, as the CPU's rope. */
__device__ void rope_shared(float *xs, int64_t half, const double *__restrict__ inv_freq,
                            int64_t pos)
{
    for (int64_t j = threadIdx.x; j < half; j += blockDim.x) {
        double sn, cs;
        sincos((double)pos * inv_freq[j], &sn, &cs);
        const double a = xs[j], b = xs[j + half];
        xs[j] = (float)(a * cs - b * sn);
        xs[j + half] = (float)(a * sn + b * cs);
    }
}

/* Stores n values of the head in the cache's type (F32, or BF16 / F16 rounded to nearest
 * even); sets bit 0 of *flag when a stored value is not finite. */
__device__ void store_row(const float *xs, int64_t n, gem_dtype t, void *dst, unsigned *flag)
{
    int bad = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = xs[i];
        if (t == GEM_DTYPE_F32) {
            ((float *)dst)[i] = v;
            bad |= !isfinite(v);
        } else if (t == GEM_DTYPE_BF16) {
            __nv_bfloat16 b = __float2bfloat16_rn(v);
            ((__nv_bfloat16 *)dst)[i] = b;
            bad |= !isfinite(__bfloat162float(b));
        } else {
            __half h = __float2half_rn(v);
            ((__half *)dst)[i] = h;
            bad |= !isfinite(__half2float(h));
        }
    }
    if (bad)
        atomicOr(flag, 1u); /* a flag, not a reduction: any order sets the same bit */
}

/* The new token's q, K row and V row. Blocks [0, n_head): query head b: q = rope(rmsnorm(q)
 * * q_norm) in place. Blocks [n_head, n_head + n_kv): KV head g: K = rope(rmsnorm(k) *
 * k_norm) to kc (unless kc is NULL: V alone), V = rmsnorm(v_src) to vc, where v_src is the
 * raw k when the layer has K = V. q (n_head, hd), k, v (n_kv, hd); kc, vc point at the
 * cache row (n_kv, hd) of type t. hd <= QKV_MAX_DIM, half <= hd / 2. */
__global__ void qkv_post_kernel(float *__restrict__ q, const float *__restrict__ k,
                                const float *__restrict__ v, int64_t n_head, int64_t hd,
                                int64_t half, const float *__restrict__ q_norm,
                                const float *__restrict__ k_norm,
                                const double *__restrict__ inv_freq, int64_t pos, double eps,
                                gem_dtype t, void *kc, void *vc, unsigned *flag)
{
    pdl_trigger();
    pdl_wait(); /* launched with launch_pdl: the previous kernel's output */
    __shared__ double sh[32];
    __shared__ float xs[QKV_MAX_DIM];
    const int64_t b = blockIdx.x;
    if (b < n_head) {
        float *x = q + b * hd;
        const double r = rms_inv(x, hd, eps, sh);
        for (int64_t i = threadIdx.x; i < hd; i += blockDim.x)
            xs[i] = (float)((double)x[i] * r) * q_norm[i];
        __syncthreads();
        rope_shared(xs, half, inv_freq, pos);
        __syncthreads();
        for (int64_t i = threadIdx.x; i < hd; i += blockDim.x)
            x[i] = xs[i];
        return;
    }
    const int64_t g = b - n_head;
    const size_t es = t == GEM_DTYPE_F32 ? 4 : 2;
    const float *kx = k + g * hd;
    if (kc) {
        const double r = rms_inv(kx, hd, eps, sh);
        for (int64_t i = threadIdx.x; i < hd; i += blockDim.x)
            xs[i] = (float)((double)kx[i] * r) * k_norm[i];
        __syncthreads();
        rope_shared(xs, half, inv_freq, pos);
        __syncthreads();
        store_row(xs, hd, t, (char *)kc + (size_t)(g * hd) * es, flag);
        __syncthreads();
    }
    const float *vx = (v ? v : k) + g * hd;
    const double r = rms_inv(vx, hd, eps, sh);
    for (int64_t i = threadIdx.x; i < hd; i += blockDim.x)
        xs[i] = (float)((double)vx[i] * r);
    __syncthreads();
    store_row(xs, hd, t, (char *)vc + (size_t)(g * hd) * es, flag);
}

/* logits = cap * tanh(logits / cap) in double (cap > 0); bit 1 of *flag for a value that is
 * not finite. (n) */
__global__ void softcap_kernel(float *__restrict__ l, int64_t n, double cap, unsigned *flag)
{
    pdl_trigger();
    pdl_wait(); /* launched with launch_pdl: the previous kernel's output */
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float v = l[i];
    if (cap > 0)
        v = (float)(cap * tanh((double)v / cap));
    l[i] = v;
    if (!isfinite(v))
        atomicOr(flag, 2u);
}

/* ---- one token ----------------------------------------------------------------------------- */

/* What a matrix's product reads of the x scratch: 0 nothing (file-order rows), 1 the digits
 * (integer tiles), 2 the digits' scratch with x's BF16 pieces (BF16 tiles). */
static int scratch_need(const gem_dmatrix *w)
{
    return w->layout == GEM_DLAYOUT_ROWS ? 0 : w->layout == GEM_DLAYOUT_BF16_TILES ? 2 : 1;
}
static int tiled(const gem_dmatrix *w) { return scratch_need(w) != 0; }

/* What layer li's q, k, v products read of the x scratch (scratch_need's, the most of them). */
static int qkv_need(const gem_model *m, int64_t li)
{
    const dev_layer *dl = &m->dev->layers[li];
    int need = scratch_need(&dl->wq);
    need = need > scratch_need(&dl->wk) ? need : scratch_need(&dl->wk);
    if (!m->layers[li].k_eq_v)
        need = need > scratch_need(&dl->wv) ? need : scratch_need(&dl->wv);
    return need;
}

/* Closes the interval of `stage` with an event. */
static gem_status mark(gem_session_dev *d, int stage)
{
    if (d->used_ev >= d->n_ev)
        return GEM_ERR_RANGE; /* sized for 8 per layer: a bug if reached */
    d->ev_stage[d->used_ev] = stage;
    return cu_status(cudaEventRecord(d->ev[d->used_ev++], d->stream));
}

void *gem_session_dev_stream(gem_session *s) { return s->dev ? s->dev->stream : NULL; }

/* gem_session_dev_enqueue's body; with dtoken (device) the embedding reads the token id there
 * when it runs, and token is not used. */
static gem_status enqueue(gem_session *s, int32_t token, const int32_t *dtoken, int want_logits,
                          int want_argmax)
{
    const gem_model *m = s->m;
    const gem_model_dev *w = m->dev;
    const gem_hparams *hp = &m->hp;
    gem_session_dev *d = s->dev;
    cudaStream_t str = d->stream;
    const int64_t E = hp->n_embd, pos = s->pos;
    gem_status st;
    /* the scratch of the next product's x, written by the norm kernel before it when a tiled
     * matrix reads it (the product then runs prepared) */
    unsigned char *const xq = static_cast<unsigned char *>(d->xq);
    const unsigned ng = norm_grid(E);
    d->used_ev = 0;
#define TRY(x)                                                                                    \
    do {                                                                                          \
        if ((st = (x)) != GEM_OK)                                                                 \
            goto fail;                                                                            \
    } while (0)
    /* stage events (about 7 a layer), or with s->whole_only the start and the end alone */
#define MARK(stage)                                                                               \
    do {                                                                                          \
        if (!s->whole_only)                                                                       \
            TRY(mark(d, (stage)));                                                                \
    } while (0)
    TRY(cu_status(cudaMemsetAsync(d->flag, 0, sizeof(unsigned), str)));
    TRY(mark(d, ST_EMBED)); /* the start */
    TRY(dtoken ? gem_dmv_row_at(&w->embd, dtoken, sqrtf((float)E), d->x, str)
               : gem_dmv_row(&w->embd, token, sqrtf((float)E), d->x, str));
    MARK(ST_EMBED);
    TRY(cu_status(launch_pdl(qkv_need(m, 0) == 2 ? norm_kernel<true> : norm_kernel<false>, ng,
                             NORM_THREADS, str, d->x, w->layers[0].attn_norm, E, hp->eps, d->xn,
                             qkv_need(m, 0) ? xq : nullptr)));
    MARK(ST_NORMS);
    for (int64_t li = 0; li < hp->n_layers; li++) {
        const gem_layer *l = &m->layers[li];
        const dev_layer *dl = &w->layers[li];
        const int64_t hd = l->head_dim, nkv = l->n_head_kv;
        {
            const gem_dmatrix *mats[3] = {&dl->wq, &dl->wk, &dl->wv};
            float *ys[3] = {d->q, d->k, d->v};
            const int nm = l->k_eq_v ? 2 : 3;
            TRY(qkv_need(m, li) ? gem_dmv_multi_prepared(nm, mats, d->xn, ys, d->xq, str)
                                 : gem_dmv_multi(nm, mats, d->xn, ys, d->xq, str));
        }
        MARK(ST_PROJ);
        const int v_only = s->v_only[li];
        const int64_t row = l->swa ? pos % s->cap[li] : pos;
        const size_t row_off = (size_t)row * (size_t)(nkv * hd) * s->kv_es; /* bytes */
        void *kdst = v_only ? NULL : (char *)s->kc[li] + row_off;
        void *vdst = (char *)s->vc[li] + row_off;
        TRY(cu_status(launch_pdl(qkv_post_kernel, (unsigned)(l->n_head + nkv), QKV_THREADS, str,
                                 d->q, d->k, l->k_eq_v ? NULL : d->v, l->n_head, hd, l->n_rot / 2,
                                 dl->q_norm, dl->k_norm, d->inv_freq + li * d->max_half, pos,
                                 hp->eps, s->kv_dtype, kdst, vdst, d->flag)));
        MARK(ST_NORMS);
        const gem_kv_view view = gem_session_layer_view(s, li);
        const gem_decode_shape sh = gem_layer_decode_shape(l);
        TRY(gem_decode(s->dctx, &sh, d->q, &view, d->att, s->ws, s->ws_bytes,
                       l->swa ? NULL : &s->full_cfg, str));
        MARK(l->swa ? ST_ATTN_SWA : ST_ATTN_FULL);
        TRY(gem_dmv(&dl->wo, d->att, d->o, d->xq, str));
        MARK(ST_PROJ);
        /* the residual stream: d->x -> d->x2 here, back to d->x after the MLP */
        const int mlp_need = scratch_need(&dl->gate); /* the up matrix tiles alike */
        TRY(cu_status(launch_pdl(mlp_need == 2 ? post_attn_kernel<true> : post_attn_kernel<false>,
                                 ng, NORM_THREADS, str, d->o, dl->post_attn_norm, d->x, d->x2,
                                 dl->ffn_norm, E, hp->eps, d->xn, mlp_need ? xq : nullptr)));
        MARK(ST_NORMS);
        TRY(mlp_need ? gem_dmv_geglu_prepared(&dl->gate, &dl->up, d->xn, d->h, d->xq, str)
                     : gem_dmv_geglu(&dl->gate, &dl->up, d->xn, d->h, d->xq, str));
        TRY(gem_dmv(&dl->down, d->h, d->o, d->xq, str));
        MARK(ST_MLP);
        const int last = li + 1 == hp->n_layers;
        const float *next = last ? w->output_norm : w->layers[li + 1].attn_norm;
        const int next_need = last ? scratch_need(&w->output) : qkv_need(m, li + 1);
        TRY(cu_status(launch_pdl(next_need == 2 ? post_ffn_kernel<true> : post_ffn_kernel<false>,
                                 ng, NORM_THREADS, str, d->o, dl->post_ffn_norm, d->x2, d->x,
                                 l->out_scale, next, E, hp->eps, d->xn,
                                 next_need ? xq : nullptr)));
        MARK(ST_NORMS);
    }
    if (want_logits || want_argmax) {
        {
            const gem_dmatrix *head = &w->output;
            float *ys[1] = {d->logits};
            TRY(tiled(head) ? gem_dmv_multi_prepared(1, &head, d->xn, ys, d->xq, str)
                            : gem_dmv(head, d->xn, d->logits, d->xq, str));
        }
        const int64_t nv = hp->n_vocab;
        TRY(cu_status(launch_pdl(softcap_kernel, (unsigned)((nv + 255) / 256), 256, str, d->logits,
                                 nv, hp->softcap, d->flag)));
        if (want_argmax) /* the token (8 bytes in), the partials after it */
            TRY(gem_dargmax(d->logits, nv, d->amax, d->amax + 2, str));
        MARK(ST_LOGITS);
        if (s->whole_only)
            TRY(mark(d, ST_LOGITS)); /* the end, before the copy as with the stages */
        if (want_argmax)
            TRY(cu_status(cudaMemcpyAsync(d->h_amax, d->amax, sizeof(int32_t),
                                          cudaMemcpyDeviceToHost, str)));
        else
            TRY(cu_status(cudaMemcpyAsync(d->h_logits, d->logits, (size_t)nv * sizeof(float),
                                          cudaMemcpyDeviceToHost, str)));
    }
    if (s->whole_only && !want_logits && !want_argmax)
        TRY(mark(d, ST_NORMS)); /* the end */
    TRY(cu_status(cudaMemcpyAsync(d->h_flag, d->flag, sizeof(unsigned), cudaMemcpyDeviceToHost,
                                  str)));
    return GEM_OK;
fail:
    return st;
#undef MARK
#undef TRY
}

gem_status gem_session_dev_enqueue(gem_session *s, int32_t token, int want_logits,
                                   int want_argmax)
{
    return enqueue(s, token, NULL, want_logits, want_argmax);
}

gem_status gem_session_dev_enqueue_at(gem_session *s, const int32_t *dtoken, int want_logits,
                                      int want_argmax)
{
    if (!dtoken)
        return GEM_ERR_NULL;
    return enqueue(s, 0, dtoken, want_logits, want_argmax);
}

const int32_t *gem_session_dev_argmax(gem_session *s) { return s->dev ? s->dev->amax : NULL; }

gem_status gem_session_dev_finish(gem_session *s, float *logits, int32_t *argmax, int timed)
{
    gem_session_dev *d = s->dev;
    cudaStream_t str = d->stream;
    gem_status st;
#define TRY(x)                                                                                    \
    do {                                                                                          \
        if ((st = (x)) != GEM_OK)                                                                 \
            goto fail;                                                                            \
    } while (0)
    TRY(cu_status(cudaStreamSynchronize(str)));
    if (*d->h_flag)
        return GEM_ERR_NONFINITE; /* a cache row (bit 0) or a logit (bit 1); pos stays */
    if (timed && s->whole_only) {
        float ms = 0;
        TRY(cu_status(cudaEventElapsedTime(&ms, d->ev[0], d->ev[d->used_ev - 1])));
        s->t.total += 1e-3 * (double)ms;
    } else if (timed) {
        double stage[ST_COUNT] = {0};
        for (int64_t i = 1; i < d->used_ev; i++) {
            float ms = 0;
            TRY(cu_status(cudaEventElapsedTime(&ms, d->ev[i - 1], d->ev[i])));
            stage[d->ev_stage[i]] += 1e-3 * (double)ms;
        }
        s->t.embed += stage[ST_EMBED];
        s->t.norms += stage[ST_NORMS];
        s->t.proj += stage[ST_PROJ];
        s->t.attn_swa += stage[ST_ATTN_SWA];
        s->t.attn_full += stage[ST_ATTN_FULL];
        s->t.mlp += stage[ST_MLP];
        s->t.logits += stage[ST_LOGITS];
    }
    if (argmax)
        *argmax = *d->h_amax;
    else if (logits)
        memcpy(logits, d->h_logits, (size_t)s->m->hp.n_vocab * sizeof(float));
#undef TRY
    s->pos++;
    if (timed) {
        s->t.tokens++;
        if (!s->whole_only)
            s->t.total = s->t.embed + s->t.norms + s->t.proj + s->t.attn_swa + s->t.attn_full +
                         s->t.mlp + s->t.logits;
    }
    return GEM_OK;
fail:
    /* leave the stream idle before returning: the next call reuses the scratch */
    cudaStreamSynchronize(str);
    (void)cudaGetLastError();
    return st;
}

gem_status gem_session_dev_eval(gem_session *s, int32_t token, float *logits, int32_t *argmax)
{
    const gem_status st = gem_session_dev_enqueue(s, token, logits != NULL, argmax != NULL);
    if (st != GEM_OK) {
        /* leave the stream idle before returning: the next call reuses the scratch */
        cudaStreamSynchronize(s->dev->stream);
        (void)cudaGetLastError();
        return st;
    }
    return gem_session_dev_finish(s, logits, argmax, 1);
}

/* ---- greedy decoding, a CUDA graph a token ------------------------------------------------ */

/* From dev/cuda/token_graph's E2 (run 218, an H100, the 31B dimensions in Q4_0, runs of 5
 * tokens: 0.982-0.990 of the stream's loop with F32 and BF16 caches at 8K and 128K, the same
 * bits). Its rival E1, which captured the call's first token with the GPU idle and instantiated
 * both executables in every call, took 1.04-1.10 of the stream's loop (runs 217-218). */

/* The token at s->pos captured into *g (argmax copied out, as gem_session_dev_enqueue queues
 * it), its id read from dtoken (device memory) when it runs. The capture is ended on every
 * path, so the stream is never left capturing. */
static gem_status capture_token(gem_session *s, const int32_t *dtoken, cudaGraph_t *g)
{
    cudaStream_t str = s->dev->stream;
    *g = NULL;
    gem_status st = cu_status(cudaStreamBeginCapture(str, cudaStreamCaptureModeRelaxed));
    if (st != GEM_OK)
        return st;
    st = enqueue(s, 0, dtoken, 0, 1);
    cudaGraph_t made = NULL;
    const cudaError_t e = cudaStreamEndCapture(str, &made);
    if (st == GEM_OK && e != cudaSuccess)
        st = cu_status(e);
    if (st != GEM_OK) {
        if (made)
            cudaGraphDestroy(made);
        (void)cudaGetLastError();
        return st;
    }
    *g = made;
    return GEM_OK;
}

/* *x made runnable as g: instantiated when NULL, else updated in place, or instantiated anew
 * where the runtime refuses the update (the topology of a token's graph can change with the
 * position, e.g. a decode route's partition count). g stays the caller's. */
static gem_status take_graph(cudaGraphExec_t *x, cudaGraph_t g)
{
    if (*x) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(*x, g, &info) == cudaSuccess)
            return GEM_OK;
        (void)cudaGetLastError();
        cudaGraphExecDestroy(*x);
        *x = NULL;
    }
    const gem_status st = cu_status(cudaGraphInstantiate(x, g, 0));
    if (st != GEM_OK)
        *x = NULL;
    return st;
}

gem_status gem_session_dev_greedy(gem_session *s, int32_t token, int64_t n, int32_t *out,
                                  int64_t *made, int (*on_token)(void *user, int32_t token),
                                  void *user)
{
    gem_session_dev *d = s->dev;
    cudaStream_t str = d->stream;
    cudaGraphExec_t *x = d->greedy;
    int64_t done = 0;
    /* the first token queued kernel by kernel: the GPU starts at once, and the second token's
     * capture and update run on the host meanwhile */
    gem_status st = enqueue(s, token, NULL, 0, 1);
    for (int64_t i = 0; st == GEM_OK && i < n; i++) {
        /* token i runs; the next token's graph, its id the argmax that token i writes on the
         * device, is captured and made runnable meanwhile */
        gem_status next = GEM_OK;
        if (i + 1 < n) {
            cudaGraph_t g = NULL;
            s->pos++;
            next = capture_token(s, d->amax, &g);
            s->pos--;
            if (next == GEM_OK) {
                next = take_graph(&x[(i + 1) % 2], g);
                cudaGraphDestroy(g);
            }
        }
        st = gem_session_dev_finish(s, NULL, &out[i], 0);
        if (st != GEM_OK)
            break;
        done++;
        if (next != GEM_OK) {
            st = next;
            break;
        }
        const int stop = on_token && on_token(user, out[i]);
        if (stop || i + 1 == n)
            break;
        st = cu_status(cudaGraphLaunch(x[(i + 1) % 2], str));
    }
    if (st != GEM_OK) { /* leave the stream idle: the next call reuses the scratch */
        cudaStreamSynchronize(str);
        (void)cudaGetLastError();
    }
    *made = done;
    return st;
}
