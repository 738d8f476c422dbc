/*
dev/cpu/geglu_items: GeGLU's activation as a pool run of its own after the gate and up products
(the decoder before mv_pair) against the activation inside the products' items (mv_pair), and
(--step heads) the per-head norms after the q/k/v products likewise (mv_batch_then), in one
process, so that a noisy host's spread falls on both alike.

Why: on the Xeon host whole tokens of the 2gb preset move by 2x between processes a minute apart
(results/h200/run173), so a change worth 2-3% of a token cannot be ranked by processes. What it
changes is local: a layer's gate/up products (2048 x 1024 each, packed Q8_0, 4.5 MB) and the
activation over their 2048 outputs, which ran as a pool run of up to 8 items of 256 elements
(tanhf, some 20 ns an element) after the products' run.

  batch  mv_batch of gate and up, then the activation as the decoder ran it (items of at least
         256 elements, at most one a thread, on the pool)
  pair   mv_pair of gate and up with the activation on each item's rows

--step heads: a sliding layer's q, k and v of the 2gb preset (8192, 4096, 4096 x 1024 packed
Q8_0, 17.8 MB), then per head the decoder's arithmetic (gemma4.c's rmsnorm with a weight and
its rotation of all 256 dims for the 32 query heads; for the 16 KV heads k's and v's norms,
k rotated, into rows of their own):
  run    mv_batch of q, k, v, then the 48 heads as a pool run of their own (the decoder before)
  then   mv_batch_then: the item that completes a head's rows computes the head

The layers' matrices lie end to end in one region (random valid packed Q8_0 blocks, scales in
[2^-10, 2^-6), as dev/cpu/mv_chain), so a chain of L layers streams L x 4.5 MB from memory. x is
the same for every layer. Check first: both versions give the same bits for every layer's
activated output. Then rounds in A B B A order, each a chain over every layer; per version the
median, min and max us a layer, and pair / batch of the medians.

usage: geglu_items [--threads N] [--layers L] [--rounds R] [--step geglu|heads]
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu_memory.h"
#include "cpu_pool.h"
#include "gem/engine.h"
#include "gem/model.h"
#include "matvec.h"

enum { COLS = 1024, ROWS = 2048, MAX_ROUNDS = 64, EW_MIN = 256 };

static uint64_t rng = 0x9E3779B97F4A7C15ull;

/* gemma4.c's gelu_tanh, operation for operation */
static float gelu_tanh(float x)
{
    const float k = 0.7978845608028654f;
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

typedef struct act_job {
    float *a;       /* (ROWS) the gate's output, activated in place */
    const float *b; /* (ROWS) the up's output */
    int64_t chunk;
} act_job;

static void act_range(const act_job *j, int64_t i0, int64_t i1)
{
    for (int64_t i = i0; i < i1; i++)
        j->a[i] = gelu_tanh(j->a[i]) * j->b[i];
}

static void act_item(void *ctx, int64_t item, int64_t thread)
{
    (void)thread;
    const act_job *j = ctx;
    const int64_t i0 = item * j->chunk, i1 = i0 + j->chunk < ROWS ? i0 + j->chunk : ROWS;
    act_range(j, i0, i1);
}

static void act_rows(void *ctx, int64_t r0, int64_t r1) { act_range(ctx, r0, r1); }

/* ---- --step heads ----------------------------------------------------------------------- */

enum { HD = 256, NQH = 32, NKVH = 16 };

/* gemma4.c's rmsnorm (its sum of squares in eight lanes added in a fixed tree) and rope */
static void rmsnorm(const float *x, const float *w, int64_t n, double eps, float *out)
{
    double acc[8] = {0};
    for (int64_t i = 0; i < n; i++)
        acc[i % 8] += (double)x[i] * (double)x[i];
    const double ss = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) +
                                                                 (acc[3] + acc[7]));
    const double r = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) {
        float v = (float)((double)x[i] * r);
        out[i] = w ? v * w[i] : v;
    }
}

static void rope(float *x, int64_t n_rot, const double *cs)
{
    const int64_t h = n_rot / 2;
    for (int64_t j = 0; j < h; j++) {
        const double c = cs[2 * j], s = cs[2 * j + 1];
        const double a = x[j], b = x[j + h];
        x[j] = (float)(a * c - b * s);
        x[j + h] = (float)(a * s + b * c);
    }
}

typedef struct heads_job {
    float *q;           /* (NQH, HD) in place */
    const float *k, *v; /* (NKVH, HD) */
    float *kr, *vr;     /* (NKVH, HD) */
    const float *w;     /* (HD) the norms' weight */
    const double *cs;   /* (HD) */
    int64_t rows[NQH + NKVH];
} heads_job;

static void head_item(void *ctx, int64_t item, int64_t thread)
{
    (void)thread;
    heads_job *j = ctx;
    if (item < NQH) {
        float *qh = j->q + item * HD;
        rmsnorm(qh, j->w, HD, 1e-6, qh);
        rope(qh, HD, j->cs);
        return;
    }
    const int64_t g = item - NQH;
    rmsnorm(j->k + g * HD, j->w, HD, 1e-6, j->kr + g * HD);
    rope(j->kr + g * HD, HD, j->cs);
    rmsnorm(j->v + g * HD, NULL, HD, 1e-6, j->vr + g * HD);
}

static void head_rows(void *ctx, int k, int64_t r0, int64_t r1)
{
    heads_job *j = ctx;
    const int64_t base = k == 0 ? 0 : NQH, want = k == 0 ? HD : 2 * HD;
    for (int64_t r = r0; r < r1;) {
        const int64_t head = r / HD, end = (head + 1) * HD < r1 ? (head + 1) * HD : r1;
        if (__atomic_add_fetch(&j->rows[base + head], end - r, __ATOMIC_ACQ_REL) == want)
            head_item(j, base + head, 0);
        r = end;
    }
}

typedef struct chain {
    cpu_pool *pool;
    int64_t threads, layers;
    int heads;          /* --step heads */
    gem_matrix (*m)[3]; /* (layers): gate, up; or q, k, v */
    mv_scratch xq;
    const float *x;
    float *gate, *up; /* (ROWS) */
    heads_job hj;     /* --step heads: its q, k, v, kr, vr, w, cs */
} chain;

/* Layer l's activated output into c->gate (or its heads into c->hj), as version v computes it. */
static void layer(chain *c, int64_t l, int v)
{
    if (c->heads) {
        const gem_matrix *w[3] = {&c->m[l][0], &c->m[l][1], &c->m[l][2]};
        const float *xs[3] = {c->x, c->x, c->x};
        float *ys[3] = {c->hj.q, (float *)c->hj.k, (float *)c->hj.v};
        if (v == 1) {
            memset(c->hj.rows, 0, sizeof c->hj.rows);
            (void)mv_batch_then(c->pool, 3, w, xs, &c->xq, ys, head_rows, &c->hj);
        } else {
            (void)mv_batch(c->pool, 3, w, xs, &c->xq, ys);
            cpu_pool_run(c->pool, NQH + NKVH, head_item, &c->hj);
        }
        return;
    }
    act_job j = {c->gate, c->up, 0};
    if (v == 1) {
        (void)mv_pair(c->pool, &c->m[l][0], &c->m[l][1], c->x, &c->xq, c->gate, c->up, act_rows,
                      &j);
        return;
    }
    const gem_matrix *w[2] = {&c->m[l][0], &c->m[l][1]};
    const float *xs[2] = {c->x, c->x};
    float *ys[2] = {c->gate, c->up};
    (void)mv_batch(c->pool, 2, w, xs, &c->xq, ys);
    int64_t items = ROWS / EW_MIN;
    items = items > c->threads ? c->threads : items;
    j.chunk = (ROWS + items - 1) / items;
    items = (ROWS + j.chunk - 1) / j.chunk;
    if (items > 1)
        cpu_pool_run(c->pool, items, act_item, &j);
    else
        act_range(&j, 0, ROWS);
}

int main(int argc, char **argv)
{
    int64_t threads = 0, layers = 120, rounds = 20;
    int heads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            layers = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--step") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "geglu") || !strcmp(argv[i + 1], "heads")))
            heads = !strcmp(argv[++i], "heads");
        else {
            fprintf(stderr, "usage: geglu_items [--threads N] [--layers L] [--rounds R] "
                            "[--step geglu|heads]\n");
            return 2;
        }
    }
    if (threads < 0 || threads > 1024 || layers < 1 || layers > 480 || rounds < 1 ||
        rounds > MAX_ROUNDS) {
        fprintf(stderr, "geglu_items: threads 0..1024, layers 1..480, rounds 1..%d\n",
                MAX_ROUNDS);
        return 2;
    }
    gem_engine *e = NULL;
    if (gem_engine_create(GEM_BACKEND_CPU, threads, &e) != GEM_OK) {
        fprintf(stderr, "geglu_items: no CPU engine\n");
        return 1;
    }
    chain c = {0};
    c.threads = gem_engine_threads(e);
    c.layers = layers;
    if (cpu_pool_create(c.threads, &c.pool) != GEM_OK) {
        fprintf(stderr, "geglu_items: no pool\n");
        return 1;
    }
    c.heads = heads;
    /* a layer's matrices: gate and up (ROWS rows each), or q, k and v (NQH, NKVH, NKVH heads) */
    const int nm = heads ? 3 : 2;
    const int64_t mrows[3] = {heads ? NQH * HD : ROWS, heads ? NKVH * HD : ROWS, NKVH * HD};
    const size_t rowb = (size_t)(COLS / 32) * 34;
    const size_t lbytes = (size_t)(mrows[0] + mrows[1] + (heads ? mrows[2] : 0)) * rowb;
    const size_t mbytes = lbytes / 2, region = lbytes * (size_t)layers;
    void *mem = NULL;
    if (cpu_stream_alloc(region, 0, &mem) != GEM_OK) {
        fprintf(stderr, "geglu_items: out of memory (%zu bytes)\n", region);
        return 1;
    }
    uint8_t *base = mem;
    dev_fill_packed_q8_0(base, region, &rng); /* scales in [2^-10, 2^-6) */
    c.m = malloc((size_t)layers * sizeof *c.m);
    (void)mbytes;
    float *x = malloc(COLS * sizeof *x);
    c.gate = malloc(ROWS * sizeof *c.gate);
    c.up = malloc(ROWS * sizeof *c.up);
    const size_t out_floats = heads ? (size_t)(NQH + 2 * NKVH) * HD : ROWS;
    float *first = malloc(out_floats * sizeof *first);
    float *hbuf = malloc((size_t)(NQH + 4 * NKVH) * HD * sizeof *hbuf);
    float *hw = malloc(HD * sizeof *hw);
    double *cs = malloc(HD * sizeof *cs);
    double *t = malloc((size_t)(2 * 2 * rounds) * sizeof *t);
    c.xq.bytes = mv_xq_bytes(COLS);
    c.xq.buf = aligned_alloc(64, c.xq.bytes);
    if (!c.m || !x || !c.gate || !c.up || !first || !hbuf || !hw || !cs || !t || !c.xq.buf) {
        fprintf(stderr, "geglu_items: out of memory\n");
        return 1;
    }
    for (int64_t l = 0; l < layers; l++) {
        const uint8_t *p = base + (size_t)l * lbytes;
        for (int k = 0; k < nm; k++) {
            c.m[l][k] = (gem_matrix){p, GEM_GGUF_Q8_0, mrows[k], COLS, rowb, p, 0};
            c.m[l][k].packed_span = mv_span_for(&c.m[l][k], c.threads);
            p += (size_t)mrows[k] * rowb;
        }
    }
    for (int i = 0; i < HD; i++) {
        hw[i] = 0.5f + (float)i / HD;
        cs[i] = i % 2 ? sin(0.37 * (i / 2 + 1)) : cos(0.37 * (i / 2 + 1));
    }
    c.hj = (heads_job){hbuf, hbuf + NQH * HD, hbuf + (NQH + NKVH) * HD,
                       hbuf + (NQH + 2 * NKVH) * HD, hbuf + (NQH + 3 * NKVH) * HD, hw, cs, {0}};
    for (int i = 0; i < COLS; i++)
        x[i] = (float)((double)(dev_xorshift(&rng) >> 11) * 0x1p-53 * 2.0 - 1.0) * 0.05f;
    c.x = x;
    if (!heads && !mv_pairable(&c.m[0][0], &c.m[0][1])) {
        fprintf(stderr, "geglu_items: gate and up not pairable\n");
        return 1;
    }
    int bad = 0;
    /* the outputs: the activated gate, or the heads' q (in place), kr and vr */
    float *const out[3] = {heads ? c.hj.q : c.gate, c.hj.kr, c.hj.vr};
    const size_t out_n[3] = {heads ? (size_t)NQH * HD : ROWS, heads ? (size_t)NKVH * HD : 0,
                             heads ? (size_t)NKVH * HD : 0};
    for (int64_t l = 0; l < layers; l++) {
        layer(&c, l, 0);
        for (int k = 0, o = 0; k < 3; o += (int)out_n[k], k++)
            memcpy(first + o, out[k], out_n[k] * sizeof *first);
        layer(&c, l, 1);
        for (int k = 0, o = 0; k < 3; o += (int)out_n[k], k++)
            bad += memcmp(first + o, out[k], out_n[k] * sizeof *first) != 0;
    }
    printf("geglu_items: %lld threads, %lld layers of %s (%.1f MB), %lld rounds\n",
           (long long)c.threads, (long long)layers, heads ? "q, k and v" : "gate and up",
           (double)region / 1e6, (long long)rounds);
    static const char *const name_g[2] = {"batch", "pair"}, *const name_h[2] = {"run", "then"};
    const char *const *name = heads ? name_h : name_g;
    if (bad) {
        printf("INVALID: %d layers' outputs differ between %s and %s\n", bad, name[0], name[1]);
        return 1;
    }
    printf("check: %s equals %s bit for bit on every layer\n", name[1], name[0]);
    for (int64_t r = 0; r < rounds; r++)
        for (int k = 0; k < 4; k++) {
            const int v = (k == 1 || k == 2) ? 1 : 0; /* A B B A */
            const double t0 = now_s();
            for (int64_t l = 0; l < layers; l++)
                layer(&c, l, v);
            const double us = (now_s() - t0) * 1e6 / (double)layers;
            t[(size_t)v * 2 * rounds + 2 * r + (k >= 2)] = us;
        }
    double med[2];
    for (int v = 0; v < 2; v++) {
        double *tv = t + (size_t)v * 2 * rounds;
        qsort(tv, (size_t)(2 * rounds), sizeof *tv, cmp_d);
        med[v] = 0.5 * (tv[rounds - 1] + tv[rounds]);
        printf("%-6s us a layer: median %.2f  min %.2f  max %.2f  (%.1f GB/s at the median)\n",
               name[v], med[v], tv[0], tv[2 * rounds - 1], 2.0 * (double)mbytes / (med[v] * 1e3));
    }
    printf("%s / %s %.3f\n", name[1], name[0], med[1] / med[0]);
    return 0;
}
