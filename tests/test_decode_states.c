/*
 * Attention states (gem_decode_state, gem_decode_merge) on every backend here (the CPU with 1
 * and 3 threads; CUDA where a device is present):
 *   - the merge of the single state of a whole view is gem_decode of it, bit for bit;
 *   - the merge of the states of pieces of a cache (cut anywhere, a one-row piece among them)
 *     is the attention over the whole, within MAX_NMSE of the double reference, with K and V
 *     F32, BF16, F16 and FP8 (CPU), and with K rebuilt from V (each piece's rotation starting
 *     at its first row's position);
 *   - the same bits on a repeat, for 1 and 3 CPU threads, with an empty state added (CUDA:
 *     after the others; the CPU: anywhere);
 *     the pieces in reverse order give the same attention;
 *   - states cross backends: the CPU's states merged on the GPU give the attention too;
 *   - bad calls answer their status: NULLs, counts, overlaps, the baseline route, a stream on
 *     the CPU, misalignment, host memory on CUDA, and (CPU) every kind of invalid state.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gem/check.h"
#include "gem/decode.h"
#include "harness.h"
#include "tcheck.h"
#include "tdtype.h"

#define MAX_NMSE 1e-10
#define MAX_PIECES 5

typedef struct target {
    const char *name;
    gem_backend backend;
    gem_decode_ctx *ctx;
    const gem_harness_ops *ops;
    void *hx;
} target;

typedef struct scase {
    const char *name;
    int64_t nq, nkv, dk, dv;
    gem_dtype t;   /* of K and V */
    int kfv;       /* K rebuilt from V */
    int64_t live;
    int64_t cuts[MAX_PIECES - 1]; /* piece boundaries, increasing, 0 < cut < live; 0 ends */
} scase;

static const scase cases[] = {
    {"full layer F32", 32, 4, 512, 512, GEM_DTYPE_F32, 0, 3000, {1000, 1001, 2500}},
    {"full layer BF16", 32, 4, 512, 512, GEM_DTYPE_BF16, 0, 5000, {4096}},
    {"full layer K from V", 32, 4, 512, 512, GEM_DTYPE_F32, 1, 2100, {700, 1400}},
    {"sliding layer F32", 32, 16, 256, 256, GEM_DTYPE_F32, 0, 1024, {300, 700}},
    {"small head F16", 8, 2, 64, 64, GEM_DTYPE_F16, 0, 777, {100}},
    {"odd head F32", 6, 3, 40, 24, GEM_DTYPE_F32, 0, 500, {250}},
    {"small head FP8", 8, 2, 64, 64, GEM_DTYPE_FP8_E4M3, 0, 400, {123}},
};

static int n_pieces(const scase *c)
{
    int n = 1;
    while (n < MAX_PIECES && c->cuts[n - 1] > 0)
        n++;
    return n;
}

static void piece_range(const scase *c, int i, int64_t *a, int64_t *b)
{
    const int n = n_pieces(c);
    *a = i == 0 ? 0 : c->cuts[i - 1];
    *b = i == n - 1 ? c->live : c->cuts[i];
}

static double nmse(const float *x, const double *ref, int64_t n)
{
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)x[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0.0 ? num / den : num;
}

/* The host side of one case: q, K, V (head-major, capacity = live), FP8 scales, the rotation,
 * the double reference over the whole. */
typedef struct host_case {
    gem_decode_shape shape;
    float *q;
    void *k, *v; /* k NULL with kfv */
    size_t k_bytes, v_bytes;
    float k_scale[16], v_scale[16];
    float *k_weight; /* (dk) with kfv */
    double inv_freq[64];
    gem_k_from_v kfv;
    double *ref; /* (nq, dv) */
} host_case;

static void *fill_tensor(int64_t elems, gem_dtype t, uint64_t seed, size_t *bytes)
{
    *bytes = (size_t)elems * gem_dtype_size(t);
    void *p = malloc(*bytes);
    float *wide = malloc((size_t)elems * sizeof(float));
    if (p && wide && t == GEM_DTYPE_FP8_E4M3) { /* every finite code, times the scales */
        tdt_fill(seed, t, elems, p, wide);
    } else if (p && wide) { /* uniform in [-1, 1), rounded to nearest even in t */
        gem_fill_uniform(seed, -1.0f, 1.0f, wide, (size_t)elems);
        for (int64_t i = 0; i < elems; i++)
            tdt_store(p, t, i, wide[i]);
    }
    free(wide);
    return p;
}

/* The view of rows [a, b) of the cache at k, v (host or device pointers). */
static gem_kv_view piece_view(const scase *c, const host_case *h, const void *k, const void *v,
                              const gem_k_from_v *kfv, int64_t a, int64_t b)
{
    const int64_t es = (int64_t)gem_dtype_size(c->t);
    gem_kv_view kv;
    memset(&kv, 0, sizeof kv);
    kv.k = k ? (const char *)k + a * c->dk * es : NULL;
    kv.v = (const char *)v + a * c->dv * es;
    kv.k_dtype = kv.v_dtype = c->t;
    kv.k_head_stride = k ? c->live * c->dk : 0;
    kv.k_token_stride = k ? c->dk : 0;
    kv.v_head_stride = c->live * c->dv;
    kv.v_token_stride = c->dv;
    kv.live = b - a;
    kv.capacity = c->live - a;
    kv.k_from_v = kfv;
    if (c->t == GEM_DTYPE_FP8_E4M3) {
        kv.k_scale = h->k_scale;
        kv.v_scale = h->v_scale;
    }
    return kv;
}

static int host_case_make(const scase *c, host_case *h)
{
    memset(h, 0, sizeof *h);
    h->shape = (gem_decode_shape){c->nq, c->nkv, c->dk, c->dv, 1.0f / sqrtf((float)c->dk)};
    h->q = malloc((size_t)(c->nq * c->dk) * sizeof(float));
    h->ref = malloc((size_t)(c->nq * c->dv) * sizeof(double));
    if (!h->q || !h->ref)
        return 0;
    gem_fill_uniform(11, -1.0f, 1.0f, h->q, (size_t)(c->nq * c->dk));
    if (!c->kfv && !(h->k = fill_tensor(c->nkv * c->live * c->dk, c->t, 23, &h->k_bytes)))
        return 0;
    if (!(h->v = fill_tensor(c->nkv * c->live * c->dv, c->t, 37, &h->v_bytes)))
        return 0;
    for (int g = 0; g < 16; g++) {
        h->k_scale[g] = 0.01f * (float)(g + 1);
        h->v_scale[g] = 0.02f / (float)(g + 1);
    }
    if (c->kfv) {
        h->k_weight = malloc((size_t)c->dk * sizeof(float));
        if (!h->k_weight)
            return 0;
        gem_fill_uniform(41, 0.5f, 1.5f, h->k_weight, (size_t)c->dk);
        h->kfv.k_weight = h->k_weight;
        h->kfv.half = c->dk / 2;
        h->kfv.n_pairs = 64;
        for (int64_t j = 0; j < h->kfv.n_pairs; j++)
            h->inv_freq[j] = pow(1e6, -2.0 * (double)j / (double)c->dk);
        h->kfv.inv_freq = h->inv_freq;
        h->kfv.pos0 = 9000;
    }
    const gem_kv_view whole = piece_view(c, h, h->k, h->v, c->kfv ? &h->kfv : NULL, 0, c->live);
    return TCHECK(gem_attn_reference_kv(&h->shape, h->q, &whole, h->ref,
                                        (size_t)(c->nq * c->dv)) == GEM_OK);
}

static void host_case_free(host_case *h)
{
    free(h->q);
    free(h->k);
    free(h->v);
    free(h->k_weight);
    free(h->ref);
}

/* A copy of host bytes in the target's memory (NULL on failure, reported). */
static void *put(const target *t, const void *src, size_t bytes)
{
    void *p = NULL;
    if (!TCHECK(t->ops->alloc(bytes, &p) == GEM_OK))
        return NULL;
    if (src && !TCHECK(t->ops->upload(p, src, bytes) == GEM_OK)) {
        t->ops->free(p);
        return NULL;
    }
    return p;
}

/* What one target computed for a case, on the host: gem_decode of the whole, the merge of the
 * pieces' states and the states themselves. */
typedef struct result {
    int ran;
    float *decode, *merged, *states;
} result;

static void check_target(const scase *c, const host_case *h, target *t, result *r,
                         const result *cpu)
{
    const gem_decode_shape *s = &h->shape;
    memset(r, 0, sizeof *r);
    gem_status sup = gem_decode_supports(t->ctx, s, c->t, c->t);
    if (sup == GEM_OK && c->kfv)
        sup = gem_decode_supports_k_from_v(t->ctx, s, c->t, &h->kfv);
    if (sup == GEM_ERR_UNSUPPORTED)
        return;
    if (sup != GEM_OK) {
        TCHECK_STATUS(sup, GEM_OK);
        return;
    }
    const int np = n_pieces(c);
    const int64_t sf = GEM_DECODE_STATE_FLOATS(c->nq, c->dv), nout = c->nq * c->dv;
    size_t state_bytes = 0, ws_bytes = 0;
    TCHECK_STATUS(gem_decode_state_bytes(s, np + 1, &state_bytes), GEM_OK);
    TCHECK_EQ_I64(state_bytes, (np + 1) * sf * 4);
    TCHECK_STATUS(gem_decode_workspace_bytes(t->ctx, s, c->live, NULL, &ws_bytes), GEM_OK);
    void *stream = t->ops->stream(t->hx), *ws = NULL;
    float *q = put(t, h->q, (size_t)(c->nq * c->dk) * sizeof(float));
    void *k = h->k ? put(t, h->k, h->k_bytes) : NULL, *v = put(t, h->v, h->v_bytes);
    float *kw = c->kfv ? put(t, h->k_weight, (size_t)c->dk * sizeof(float)) : NULL;
    float *out = put(t, NULL, (size_t)nout * sizeof(float));
    float *st = put(t, NULL, state_bytes), *st2 = put(t, NULL, state_bytes);
    float *host = malloc(state_bytes), *host2 = malloc(state_bytes);
    r->decode = malloc((size_t)nout * sizeof(float));
    r->merged = malloc((size_t)nout * sizeof(float));
    r->states = malloc(state_bytes);
    gem_status ws_st = gem_decode_workspace_alloc(t->ctx, ws_bytes, &ws);
    if (!TCHECK(q && v && (k || c->kfv) && (kw || !c->kfv) && out && st && st2 && host &&
                host2 && r->decode && r->merged && r->states && ws_st == GEM_OK))
        goto done;
    gem_k_from_v kfv = h->kfv, pkfv[MAX_PIECES];
    kfv.k_weight = kw;
    const gem_kv_view whole = piece_view(c, h, k, v, c->kfv ? &kfv : NULL, 0, c->live);

    /* 1. the single state of the whole, merged, is gem_decode */
    TCHECK_STATUS(gem_decode(t->ctx, s, q, &whole, out, ws, ws_bytes, NULL, stream), GEM_OK);
    TCHECK(t->ops->download(r->decode, out, (size_t)nout * sizeof(float)) == GEM_OK);
    TCHECK_STATUS(gem_decode_state(t->ctx, s, q, &whole, st, ws, ws_bytes, NULL, stream), GEM_OK);
    TCHECK_STATUS(gem_decode_merge(t->ctx, s, st, 1, out, stream), GEM_OK);
    TCHECK(t->ops->download(r->merged, out, (size_t)nout * sizeof(float)) == GEM_OK);
    if (c->t == GEM_DTYPE_FP8_E4M3) /* the state holds V's scale in o: one rounding apart */
        TCHECK(nmse(r->merged, h->ref, nout) <= MAX_NMSE);
    else if (!TCHECK(memcmp(r->merged, r->decode, (size_t)nout * sizeof(float)) == 0))
        fprintf(stderr, "     %s on %s: merge of one state != gem_decode\n", c->name, t->name);
    TCHECK(nmse(r->decode, h->ref, nout) <= MAX_NMSE);

    /* 2. the pieces' states, merged: the attention over the whole */
    for (int i = 0; i < np; i++) {
        int64_t a, b;
        piece_range(c, i, &a, &b);
        pkfv[i] = kfv;
        pkfv[i].pos0 = kfv.pos0 + a; /* the piece's first row's position */
        const gem_kv_view pv = piece_view(c, h, k, v, c->kfv ? &pkfv[i] : NULL, a, b);
        TCHECK_STATUS(gem_decode_state(t->ctx, s, q, &pv, st + i * sf, ws, ws_bytes, NULL,
                                       stream),
                      GEM_OK);
    }
    TCHECK_STATUS(gem_decode_merge(t->ctx, s, st, np, out, stream), GEM_OK);
    TCHECK(t->ops->download(r->merged, out, (size_t)nout * sizeof(float)) == GEM_OK);
    TCHECK(t->ops->download(r->states, st, (size_t)(np * sf) * sizeof(float)) == GEM_OK);
    const double e = nmse(r->merged, h->ref, nout);
    if (!TCHECK(e <= MAX_NMSE))
        fprintf(stderr, "     %s on %s: %d pieces, NMSE %.3e\n", c->name, t->name, np, e);

    /* 3. repeat: the same bits */
    TCHECK(t->ops->poison(t->hx, out, (size_t)nout, 0x7FC00000u, 0) == GEM_OK);
    for (int i = 0; i < np; i++) {
        int64_t a, b;
        piece_range(c, i, &a, &b);
        const gem_kv_view pv = piece_view(c, h, k, v, c->kfv ? &pkfv[i] : NULL, a, b);
        TCHECK_STATUS(gem_decode_state(t->ctx, s, q, &pv, st2 + i * sf, ws, ws_bytes, NULL,
                                       stream),
                      GEM_OK);
    }
    TCHECK_STATUS(gem_decode_merge(t->ctx, s, st2, np, out, stream), GEM_OK);
    TCHECK(t->ops->download(host, out, (size_t)nout * sizeof(float)) == GEM_OK);
    TCHECK(memcmp(host, r->merged, (size_t)nout * sizeof(float)) == 0);

    /* 4. an empty state after the others: the same bits (the CUDA reducer sums S as a tree
     * over the states' positions, so only there); on the CPU, which merges in a chain, an
     * empty state anywhere (after the first here) */
    const int at = t->backend == GEM_BACKEND_CPU ? 1 : np;
    for (int64_t i = 0; i < sf; i++)
        host[i] = i < c->nq ? -INFINITY : 0.0f;
    memcpy(host2, r->states, (size_t)(at * sf) * sizeof(float));
    memcpy(host2 + at * sf, host, (size_t)sf * sizeof(float));
    memcpy(host2 + (at + 1) * sf, r->states + at * sf, (size_t)((np - at) * sf) * sizeof(float));
    TCHECK(t->ops->upload(st2, host2, (size_t)((np + 1) * sf) * sizeof(float)) == GEM_OK);
    TCHECK_STATUS(gem_decode_merge(t->ctx, s, st2, np + 1, out, stream), GEM_OK);
    TCHECK(t->ops->download(host, out, (size_t)nout * sizeof(float)) == GEM_OK);
    if (!TCHECK(memcmp(host, r->merged, (size_t)nout * sizeof(float)) == 0))
        fprintf(stderr, "     %s on %s: an empty state changed the merge\n", c->name, t->name);

    /* 5. the pieces in reverse order: the same attention */
    for (int i = 0; i < np; i++)
        memcpy(host2 + i * sf, r->states + (np - 1 - i) * sf, (size_t)sf * sizeof(float));
    TCHECK(t->ops->upload(st2, host2, (size_t)(np * sf) * sizeof(float)) == GEM_OK);
    TCHECK_STATUS(gem_decode_merge(t->ctx, s, st2, np, out, stream), GEM_OK);
    TCHECK(t->ops->download(host, out, (size_t)nout * sizeof(float)) == GEM_OK);
    TCHECK(nmse(host, h->ref, nout) <= MAX_NMSE);

    /* 6. the CPU's states merged here (a GPU merges what the host or another device computed) */
    if (cpu && cpu->ran && t->backend == GEM_BACKEND_CUDA) {
        TCHECK(t->ops->upload(st2, cpu->states, (size_t)(np * sf) * sizeof(float)) == GEM_OK);
        TCHECK_STATUS(gem_decode_merge(t->ctx, s, st2, np, out, stream), GEM_OK);
        TCHECK(t->ops->download(host, out, (size_t)nout * sizeof(float)) == GEM_OK);
        TCHECK(nmse(host, h->ref, nout) <= MAX_NMSE);
    }
    r->ran = 1;
done:
    gem_decode_workspace_free(t->ctx, ws);
    t->ops->free(q);
    t->ops->free(k);
    t->ops->free(v);
    t->ops->free(kw);
    t->ops->free(out);
    t->ops->free(st);
    t->ops->free(st2);
    free(host);
    free(host2);
}

/* gem_decode_across on the CPU: the pieces on alternating contexts (1 and 3 threads), piece 0's
 * state written straight into its place, the others into buffers of their own; the result is
 * the merge of the same states, bit for bit. */
static void check_across_cpu(const scase *c, const host_case *h, target *ta, target *tb,
                             const result *want)
{
    const gem_decode_shape *s = &h->shape;
    const int np = n_pieces(c);
    const int64_t sf = GEM_DECODE_STATE_FLOATS(c->nq, c->dv), nout = c->nq * c->dv;
    float *states = malloc((size_t)(np * sf) * sizeof(float));
    float *own = malloc((size_t)(np * sf) * sizeof(float));
    float *out = malloc((size_t)nout * sizeof(float));
    void *ws[MAX_PIECES] = {NULL};
    gem_decode_piece pieces[MAX_PIECES];
    gem_kv_view views[MAX_PIECES];
    gem_k_from_v kfv[MAX_PIECES];
    int ok = TCHECK(states && own && out);
    for (int i = 0; ok && i < np; i++) {
        const target *t = i % 2 ? tb : ta;
        int64_t a, b;
        piece_range(c, i, &a, &b);
        kfv[i] = h->kfv;
        kfv[i].pos0 = h->kfv.pos0 + a;
        views[i] = piece_view(c, h, h->k, h->v, c->kfv ? &kfv[i] : NULL, a, b);
        size_t ws_bytes = 0; /* the context's: the CPU's temporaries are per thread */
        ok = TCHECK(gem_decode_workspace_bytes(t->ctx, s, b - a, NULL, &ws_bytes) == GEM_OK &&
                    gem_decode_workspace_alloc(t->ctx, ws_bytes, &ws[i]) == GEM_OK);
        pieces[i] = (gem_decode_piece){t->ctx, h->q, &views[i], i == 0 ? states : own + i * sf,
                                       ws[i], ws_bytes, NULL};
    }
    if (ok) {
        TCHECK_STATUS(gem_decode_across(s, pieces, np, ta->ctx, states, out, NULL), GEM_OK);
        if (!TCHECK(memcmp(out, want->merged, (size_t)nout * sizeof(float)) == 0))
            fprintf(stderr, "     %s: gem_decode_across on the CPU != the merge\n", c->name);
        /* refusals, nothing run: a piece's state inside another's place, out in the states,
         * too many pieces, a stream on the CPU */
        gem_decode_piece bad = pieces[1];
        pieces[1].state = states + 2;
        TCHECK_STATUS(gem_decode_across(s, pieces, np, ta->ctx, states, out, NULL),
                      GEM_ERR_OVERLAP);
        pieces[1] = bad;
        pieces[1].state = pieces[0].state;
        TCHECK_STATUS(gem_decode_across(s, pieces, np, ta->ctx, states, out, NULL),
                      GEM_ERR_OVERLAP);
        pieces[1] = bad;
        TCHECK_STATUS(gem_decode_across(s, pieces, np, ta->ctx, states, states + sf, NULL),
                      GEM_ERR_OVERLAP);
        TCHECK_STATUS(gem_decode_across(s, pieces, 0, ta->ctx, states, out, NULL),
                      GEM_ERR_PARAM);
        TCHECK_STATUS(gem_decode_across(s, pieces, GEM_DECODE_MAX_PIECES + 1, ta->ctx, states,
                                        out, NULL),
                      GEM_ERR_PARAM);
        TCHECK_STATUS(gem_decode_across(s, pieces, np, ta->ctx, states, out, (void *)1),
                      GEM_ERR_PARAM);
        pieces[1].stream = (void *)1;
        TCHECK_STATUS(gem_decode_across(s, pieces, np, ta->ctx, states, out, NULL),
                      GEM_ERR_PARAM);
        pieces[1] = bad;
        pieces[1].ctx = NULL;
        TCHECK_STATUS(gem_decode_across(s, pieces, np, ta->ctx, states, out, NULL),
                      GEM_ERR_NULL);
        pieces[1] = bad;
        TCHECK_STATUS(gem_decode_across(s, pieces, np, NULL, states, out, NULL), GEM_ERR_NULL);
    }
    for (int i = 0; i < np; i++)
        gem_decode_workspace_free(i % 2 ? tb->ctx : ta->ctx, ws[i]);
    free(states);
    free(own);
    free(out);
}

/* gem_decode_across on CUDA: piece i on device i % devices, its rows alone uploaded there (a
 * tensor of capacity b - a), its own stream; the leader device 0 on the target's stream. The
 * result is the merge of the states that target computed with the whole cache on one device,
 * bit for bit. */
static void check_across_cuda(const scase *c, const host_case *h, target *t, const result *want,
                              int devices)
{
    const gem_decode_shape *s = &h->shape;
    const int np = n_pieces(c);
    const int64_t sf = GEM_DECODE_STATE_FLOATS(c->nq, c->dv), nout = c->nq * c->dv;
    const int64_t es = (int64_t)gem_dtype_size(c->t);
    gem_decode_ctx *ctx[MAX_PIECES] = {NULL};
    void *hx[MAX_PIECES] = {NULL}, *mem[MAX_PIECES][5] = {{NULL}};
    gem_decode_piece pieces[MAX_PIECES];
    gem_kv_view views[MAX_PIECES];
    gem_k_from_v kfv[MAX_PIECES];
    size_t ws_bytes = 0;
    TCHECK_STATUS(gem_decode_workspace_bytes(t->ctx, s, c->live, NULL, &ws_bytes), GEM_OK);
    int ok = 1;
    for (int i = 0; ok && i < np; i++) {
        int64_t a, b;
        piece_range(c, i, &a, &b);
        const int64_t rows = b - a;
        ok = TCHECK(gem_harness_cuda_use(i % devices) == GEM_OK) &&
             TCHECK(gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &ctx[i]) == GEM_OK) &&
             TCHECK(t->ops->open(&hx[i]) == GEM_OK);
        /* the piece's rows of K and V, head-major with capacity rows */
        const size_t kb = c->kfv ? 0 : (size_t)(c->nkv * rows * c->dk * es);
        const size_t vb = (size_t)(c->nkv * rows * c->dv * es);
        char *kh = kb ? malloc(kb) : NULL, *vh = malloc(vb);
        ok = ok && TCHECK((kh || !kb) && vh);
        for (int64_t g = 0; ok && g < c->nkv; g++) {
            if (kh)
                memcpy(kh + g * rows * c->dk * es,
                       (const char *)h->k + (g * c->live + a) * c->dk * es,
                       (size_t)(rows * c->dk * es));
            memcpy(vh + g * rows * c->dv * es,
                   (const char *)h->v + (g * c->live + a) * c->dv * es,
                   (size_t)(rows * c->dv * es));
        }
        if (ok) {
            mem[i][0] = put(t, h->q, (size_t)(c->nq * c->dk) * sizeof(float));
            mem[i][1] = kh ? put(t, kh, kb) : NULL;
            mem[i][2] = put(t, vh, vb);
            mem[i][3] = put(t, NULL, (size_t)sf * sizeof(float));
            mem[i][4] = c->kfv ? put(t, h->k_weight, (size_t)c->dk * sizeof(float)) : NULL;
            ok = TCHECK(mem[i][0] && (mem[i][1] || c->kfv) && mem[i][2] && mem[i][3] &&
                        (mem[i][4] || !c->kfv));
        }
        free(kh);
        free(vh);
        void *ws = NULL;
        if (ok)
            ok = TCHECK(gem_decode_workspace_alloc(ctx[i], ws_bytes, &ws) == GEM_OK);
        kfv[i] = h->kfv;
        kfv[i].k_weight = mem[i][4];
        kfv[i].pos0 = h->kfv.pos0 + a;
        memset(&views[i], 0, sizeof views[i]);
        views[i].k = mem[i][1];
        views[i].v = mem[i][2];
        views[i].k_dtype = views[i].v_dtype = c->t;
        views[i].k_head_stride = c->kfv ? 0 : rows * c->dk;
        views[i].k_token_stride = c->kfv ? 0 : c->dk;
        views[i].v_head_stride = rows * c->dv;
        views[i].v_token_stride = c->dv;
        views[i].live = views[i].capacity = rows;
        views[i].k_from_v = c->kfv ? &kfv[i] : NULL;
        pieces[i] = (gem_decode_piece){ctx[i], mem[i][0], &views[i], mem[i][3], ws, ws_bytes,
                                       hx[i] ? t->ops->stream(hx[i]) : NULL};
    }
    TCHECK(gem_harness_cuda_use(0) == GEM_OK);
    float *states = put(t, NULL, (size_t)(np * sf) * sizeof(float));
    float *out = put(t, NULL, (size_t)nout * sizeof(float)), *host = malloc((size_t)nout * 4);
    if (ok && TCHECK(states && out && host)) {
        TCHECK_STATUS(gem_decode_across(s, pieces, np, t->ctx, states, out,
                                        t->ops->stream(t->hx)),
                      GEM_OK);
        TCHECK(t->ops->download(host, out, (size_t)nout * sizeof(float)) == GEM_OK);
        if (!TCHECK(memcmp(host, want->merged, (size_t)nout * sizeof(float)) == 0))
            fprintf(stderr, "     %s: gem_decode_across over %d device(s) != the merge "
                            "(NMSE %.3e)\n", c->name, devices, nmse(host, h->ref, nout));
        /* the leader refuses host memory before anything runs */
        TCHECK_STATUS(gem_decode_across(s, pieces, np, t->ctx, states, host,
                                        t->ops->stream(t->hx)),
                      GEM_ERR_MEMSPACE);
    }
    t->ops->free(states);
    t->ops->free(out);
    free(host);
    for (int i = 0; i < np; i++) {
        if (ctx[i]) {
            TCHECK(gem_harness_cuda_use(i % devices) == GEM_OK);
            if (hx[i])
                t->ops->close(hx[i]); /* waits for its stream */
            gem_decode_workspace_free(ctx[i], i < np && ok ? pieces[i].workspace : NULL);
            for (int m = 0; m < 5; m++)
                t->ops->free(mem[i][m]);
            gem_decode_ctx_destroy(ctx[i]);
        }
    }
    TCHECK(gem_harness_cuda_use(0) == GEM_OK);
}

static void result_free(result *r)
{
    free(r->decode);
    free(r->merged);
    free(r->states);
}

/* ---- bad calls -------------------------------------------------------------------------- */

/* gem_decode_merge answers `want` for these states (host memory, CPU). */
static void expect_merge(gem_decode_ctx *ctx, const gem_decode_shape *s, const float *states,
                         int64_t n, float *out, gem_status want, const char *what)
{
    const gem_status got = gem_decode_merge(ctx, s, states, n, out, NULL);
    if (!TCHECK(got == want))
        fprintf(stderr, "     %s: %s, want %s\n", what, gem_status_name(got),
                gem_status_name(want));
}

static void check_bad_calls_cpu(gem_decode_ctx *ctx)
{
    enum { NQ = 4, NKV = 2, D = 8, LIVE = 10, SF = NQ * (D + 2) };
    const gem_decode_shape s = {NQ, NKV, D, D, 1.0f};
    size_t b = 0;
    TCHECK_STATUS(gem_decode_state_bytes(NULL, 1, &b), GEM_ERR_NULL);
    TCHECK_STATUS(gem_decode_state_bytes(&s, 1, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_decode_state_bytes(&s, 0, &b), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_decode_state_bytes(&s, INT64_MAX, &b), GEM_ERR_OVERFLOW);
    const gem_decode_shape bad = {NQ, 3, D, D, 1.0f};
    TCHECK_STATUS(gem_decode_state_bytes(&bad, 1, &b), GEM_ERR_SHAPE);
    TCHECK_STATUS(gem_decode_state_bytes(&s, 3, &b), GEM_OK);
    TCHECK_EQ_I64(b, 3 * SF * 4);

    float q[NQ * D], kv[2 * NKV * LIVE * D], states[3 * SF], out[NQ * D];
    gem_fill_uniform(5, -1.0f, 1.0f, q, NQ * D);
    gem_fill_uniform(6, -1.0f, 1.0f, kv, 2 * NKV * LIVE * D);
    gem_kv_view view = {kv, kv + NKV * LIVE * D, GEM_DTYPE_F32, GEM_DTYPE_F32, LIVE * D, D,
                        LIVE * D, D, LIVE, LIVE, NULL, NULL, NULL};
    size_t ws_bytes = 0;
    void *ws = NULL;
    if (!TCHECK(gem_decode_workspace_bytes(ctx, &s, LIVE, NULL, &ws_bytes) == GEM_OK &&
                gem_decode_workspace_alloc(ctx, ws_bytes + sizeof states, &ws) == GEM_OK))
        return;
    float *ws_f = ws; /* ws_bytes of workspace, then room for a state */
    /* gem_decode_state: gem_decode's checks with the state's size, the fused route only */
    TCHECK_STATUS(gem_decode_state(ctx, &s, q, &view, NULL, ws, ws_bytes, NULL, NULL),
                  GEM_ERR_NULL);
    const gem_decode_config base = {GEM_ROUTE_BASELINE, 0, 0};
    TCHECK_STATUS(gem_decode_state(ctx, &s, q, &view, states, ws, ws_bytes, &base, NULL),
                  GEM_ERR_UNSUPPORTED);
    TCHECK_STATUS(gem_decode_state(ctx, &s, q, &view, states, ws, ws_bytes, NULL, (void *)1),
                  GEM_ERR_PARAM);
    TCHECK_STATUS(gem_decode_state(ctx, &s, q, &view, states, ws, ws_bytes - 1, NULL, NULL),
                  GEM_ERR_RANGE);
    TCHECK_STATUS(gem_decode_state(ctx, &s, q, &view, ws_f + ws_bytes / 4, ws, ws_bytes, NULL,
                                   NULL),
                  GEM_OK); /* just past the workspace */
    TCHECK_STATUS(gem_decode_state(ctx, &s, q, &view, ws_f + ws_bytes / 4 - 1, ws, ws_bytes,
                                   NULL, NULL),
                  GEM_ERR_OVERLAP); /* its first float the workspace's last */
    {
        /* q just past an output's size but within a state's: the state's size counts */
        float buf[SF + NQ * D];
        float *q2 = buf + NQ * (D + 1);
        memcpy(q2, q, sizeof q);
        TCHECK_STATUS(gem_decode_state(ctx, &s, q2, &view, buf, ws, ws_bytes, NULL, NULL),
                      GEM_ERR_OVERLAP);
        TCHECK_STATUS(gem_decode(ctx, &s, q2, &view, buf, ws, ws_bytes, NULL, NULL), GEM_OK);
    }
    TCHECK_STATUS(gem_decode_state(ctx, &s, q, &view, (float *)(void *)((char *)states + 2), ws,
                                   ws_bytes, NULL, NULL),
                  GEM_ERR_ALIGN);
    /* three valid states: two pieces and an empty one */
    gem_kv_view a = view, c = view;
    a.live = 4;
    c.k = kv + 4 * D;
    c.v = kv + NKV * LIVE * D + 4 * D;
    c.live = LIVE - 4;
    c.capacity = LIVE - 4;
    TCHECK_STATUS(gem_decode_state(ctx, &s, q, &a, states, ws, ws_bytes, NULL, NULL), GEM_OK);
    TCHECK_STATUS(gem_decode_state(ctx, &s, q, &c, states + SF, ws, ws_bytes, NULL, NULL),
                  GEM_OK);
    gem_decode_workspace_free(ctx, ws);
    for (int i = 0; i < SF; i++)
        states[2 * SF + i] = i < NQ ? -INFINITY : 0.0f;
    expect_merge(ctx, &s, states, 3, out, GEM_OK, "two pieces and an empty state");
    /* merge: arguments */
    expect_merge(ctx, NULL, states, 3, out, GEM_ERR_NULL, "shape NULL");
    expect_merge(ctx, &s, NULL, 3, out, GEM_ERR_NULL, "states NULL");
    expect_merge(ctx, &s, states, 3, NULL, GEM_ERR_NULL, "out NULL");
    TCHECK_STATUS(gem_decode_merge(NULL, &s, states, 3, out, NULL), GEM_ERR_NULL);
    expect_merge(ctx, &s, states, 0, out, GEM_ERR_PARAM, "no states");
    expect_merge(ctx, &s, states, -1, out, GEM_ERR_PARAM, "negative count");
    expect_merge(ctx, &bad, states, 3, out, GEM_ERR_SHAPE, "bad shape");
    expect_merge(ctx, &s, states, INT64_MAX / 8, out, GEM_ERR_OVERFLOW, "count overflows");
    expect_merge(ctx, &s, states, 3, states + 2 * SF + 3, GEM_ERR_OVERLAP, "out in the states");
    expect_merge(ctx, &s, (const float *)((const char *)states + 1), 2, out, GEM_ERR_ALIGN,
                 "misaligned states");
    TCHECK_STATUS(gem_decode_merge(ctx, &s, states, 3, out, (void *)1), GEM_ERR_PARAM);
    /* merge: invalid states (head 1 of state 1) */
    float keep[SF];
    memcpy(keep, states + SF, sizeof keep);
    const struct {
        int64_t at;
        float value;
        const char *what;
    } bad_states[] = {
        {1, NAN, "M NaN"},
        {1, INFINITY, "M +inf"},
        {NQ + 1, -1.0f, "S negative"},
        {NQ + 1, 0.0f, "S zero with a finite M"},
        {NQ + 1, INFINITY, "S infinite"},
        {2 * NQ + D + 3, INFINITY, "O infinite"},
        {2 * NQ + D + 3, NAN, "O NaN"},
    };
    for (size_t i = 0; i < sizeof bad_states / sizeof bad_states[0]; i++) {
        memcpy(states + SF, keep, sizeof keep);
        states[SF + bad_states[i].at] = bad_states[i].value;
        expect_merge(ctx, &s, states, 3, out, GEM_ERR_STATE, bad_states[i].what);
    }
    memcpy(states + SF, keep, sizeof keep);
    for (int i = 0; i < SF; i++) /* an empty state with a non-zero O */
        states[2 * SF + i] = i < NQ ? -INFINITY : (i == 2 * NQ ? 1.0f : 0.0f);
    expect_merge(ctx, &s, states, 3, out, GEM_ERR_STATE, "empty with O");
    for (int i = 0; i < SF; i++)
        states[2 * SF + i] = i < NQ ? -INFINITY : 0.0f;
    expect_merge(ctx, &s, states + 2 * SF, 1, out, GEM_ERR_STATE, "only an empty state");
    expect_merge(ctx, &s, states, 3, out, GEM_OK, "valid again");
}

/* CUDA: host memory is refused, states stack at any float offset. */
static void check_bad_calls_cuda(target *t)
{
    const gem_decode_shape s = {8, 1, 64, 64, 1.0f};
    const int64_t sf = GEM_DECODE_STATE_FLOATS(8, 64);
    float host[2 * 8 * 66];
    float *dev = put(t, NULL, (size_t)(2 * sf + 8 * 64 + 1) * sizeof(float));
    if (!dev)
        return;
    for (int64_t i = 0; i < sf; i++)
        host[i] = i < 8 ? -INFINITY : 0.0f;
    TCHECK_STATUS(gem_decode_merge(t->ctx, &s, host, 1, dev, t->ops->stream(t->hx)),
                  GEM_ERR_MEMSPACE);
    TCHECK_STATUS(gem_decode_merge(t->ctx, &s, dev, 1, host, t->ops->stream(t->hx)),
                  GEM_ERR_MEMSPACE);
    TCHECK_STATUS(gem_decode_merge(t->ctx, &s, (const float *)((const char *)dev + 2), 1,
                                   dev + 2 * sf, t->ops->stream(t->hx)),
                  GEM_ERR_ALIGN);
    TCHECK_STATUS(gem_decode_merge(t->ctx, &s, dev, 2, dev + 2 * sf - 1, t->ops->stream(t->hx)),
                  GEM_ERR_OVERLAP);
    t->ops->free(dev);
}

int main(void)
{
    target targets[3];
    int nt = 0;
    const int64_t threads[2] = {1, 3};
    for (int i = 0; i < 2; i++) {
        target *t = &targets[nt];
        t->name = i == 0 ? "cpu1" : "cpu3";
        t->backend = GEM_BACKEND_CPU;
        t->ops = &gem_harness_cpu_ops;
        if (TCHECK(gem_decode_ctx_create(GEM_BACKEND_CPU, threads[i], &t->ctx) == GEM_OK &&
                   t->ops->open(&t->hx) == GEM_OK))
            nt++;
    }
    {
        target *t = &targets[nt];
        t->name = "cuda";
        t->backend = GEM_BACKEND_CUDA;
        t->ops = &gem_harness_cuda_ops;
        const gem_status st = gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &t->ctx);
        if (st == GEM_OK && TCHECK(t->ops->open(&t->hx) == GEM_OK)) {
            nt++;
        } else {
            TCHECK_STATUS(st, GEM_ERR_NO_DEVICE);
            printf("test_decode_states: no CUDA device here; the CUDA cases did not run\n");
        }
    }
    int ran_cuda = 0, devices = 0, peers = 0;
    if (nt == 3) {
        TCHECK(gem_harness_cuda_devices(&devices) == GEM_OK && devices >= 1);
        TCHECK(gem_harness_cuda_enable_peers(&peers) == GEM_OK);
        printf("test_decode_states: %d CUDA device(s), peer access between %d ordered pair(s)\n",
               devices, peers);
        devices = devices < 1 ? 1 : devices;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const scase *c = &cases[i];
        host_case h;
        if (!TCHECK(host_case_make(c, &h))) {
            host_case_free(&h);
            continue;
        }
        result r[3];
        memset(r, 0, sizeof r);
        for (int t = 0; t < nt; t++)
            check_target(c, &h, &targets[t], &r[t], &r[0]);
        /* 1 and 3 CPU threads: the same states and the same merge */
        if (nt >= 2 && r[0].ran && r[1].ran) {
            const int64_t sf = GEM_DECODE_STATE_FLOATS(c->nq, c->dv);
            TCHECK(memcmp(r[0].states, r[1].states,
                          (size_t)(n_pieces(c) * sf) * sizeof(float)) == 0);
            TCHECK(memcmp(r[0].merged, r[1].merged, (size_t)(c->nq * c->dv) * sizeof(float)) ==
                   0);
        }
        TCHECK(r[0].ran); /* the CPU runs every case */
        if (nt >= 2 && r[0].ran)
            check_across_cpu(c, &h, &targets[0], &targets[1], &r[0]);
        for (int t = 0; t < nt; t++)
            if (targets[t].backend == GEM_BACKEND_CUDA && r[t].ran)
                check_across_cuda(c, &h, &targets[t], &r[t], devices);
        for (int t = 0; t < nt; t++) {
            if (targets[t].backend == GEM_BACKEND_CUDA && r[t].ran)
                ran_cuda++;
            result_free(&r[t]);
        }
        host_case_free(&h);
    }
    check_bad_calls_cpu(targets[0].ctx);
    for (int t = 0; t < nt; t++)
        if (targets[t].backend == GEM_BACKEND_CUDA) {
            TCHECK(ran_cuda >= 5); /* every case but the CPU's odd head and FP8 */
            check_bad_calls_cuda(&targets[t]);
        }
    printf("test_decode_states: %zu cases on %d targets, %d on CUDA\n",
           sizeof cases / sizeof cases[0], nt, ran_cuda);
    for (int t = 0; t < nt; t++) {
        targets[t].ops->close(targets[t].hx);
        gem_decode_ctx_destroy(targets[t].ctx);
    }
    return tcheck_summary("test_decode_states");
}
