/*
dev/cpu/geglu_items: GeGLU's activation as a pool run of its own after the gate and up products
(the decoder before mv_pair) against the activation inside the products' items (mv_pair), in
one process, so that a noisy host's spread falls on both alike.

Why: on the Xeon host whole tokens of the 2gb preset move by 2x between processes a minute apart
(results/h200/run173), so a change worth 2-3% of a token cannot be ranked by processes. What it
changes is local: a layer's gate/up products (2048 x 1024 each, packed Q8_0, 4.5 MB) and the
activation over their 2048 outputs, which ran as a pool run of up to 8 items of 256 elements
(tanhf, some 20 ns an element) after the products' run.

  batch  mv_batch of gate and up, then the activation as the decoder ran it (items of at least
         256 elements, at most one a thread, on the pool)
  pair   mv_pair of gate and up with the activation on each item's rows

The layers' matrices lie end to end in one region (random valid packed Q8_0 blocks, scales in
[2^-10, 2^-6), as dev/cpu/mv_chain), so a chain of L layers streams L x 4.5 MB from memory. x is
the same for every layer. Check first: both versions give the same bits for every layer's
activated output. Then rounds in A B B A order, each a chain over every layer; per version the
median, min and max us a layer, and pair / batch of the medians.

usage: geglu_items [--threads N] [--layers L] [--rounds R]
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

enum { GROUP = 16, BLOCK = 544, COLS = 1024, ROWS = 2048, MAX_ROUNDS = 64, EW_MIN = 256 };

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

typedef struct chain {
    cpu_pool *pool;
    int64_t threads, layers;
    gem_matrix (*m)[2]; /* (layers): gate, up */
    mv_scratch xq;
    const float *x;
    float *gate, *up; /* (ROWS) */
} chain;

/* Layer l's activated output into c->gate, as version v computes it. */
static void layer(chain *c, int64_t l, int v)
{
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
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            layers = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoll(argv[++i]);
        else {
            fprintf(stderr, "usage: geglu_items [--threads N] [--layers L] [--rounds R]\n");
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
    const size_t mbytes = (size_t)ROWS * (COLS / 32) * 34, region = 2 * mbytes * (size_t)layers;
    void *mem = NULL;
    if (cpu_stream_alloc(region, 0, &mem) != GEM_OK) {
        fprintf(stderr, "geglu_items: out of memory (%zu bytes)\n", region);
        return 1;
    }
    uint8_t *base = mem;
    /* every block: 16 scales in [2^-10, 2^-6), 512 quant bytes (q + 128, q in [-127, 127]) */
    for (size_t b = 0; b < region / BLOCK; b++) {
        uint8_t *p = base + b * BLOCK;
        for (int r = 0; r < GROUP; r++) {
            const uint16_t h = (uint16_t)(0x1400u + (dev_xorshift(&rng) & 0x0FFFu));
            memcpy(p + 2 * r, &h, 2);
        }
        for (int i = 32; i < BLOCK; i += 8) {
            uint64_t v = dev_xorshift(&rng);
            for (int k = 0; k < 8; k++, v >>= 8)
                p[i + k] = (uint8_t)(1 + v % 255);
        }
    }
    c.m = malloc((size_t)layers * sizeof *c.m);
    float *x = malloc(COLS * sizeof *x);
    c.gate = malloc(ROWS * sizeof *c.gate);
    c.up = malloc(ROWS * sizeof *c.up);
    float *first = malloc(ROWS * sizeof *first);
    double *t = malloc((size_t)(2 * 2 * rounds) * sizeof *t);
    c.xq.bytes = mv_xq_bytes(COLS);
    c.xq.buf = aligned_alloc(64, c.xq.bytes);
    if (!c.m || !x || !c.gate || !c.up || !first || !t || !c.xq.buf) {
        fprintf(stderr, "geglu_items: out of memory\n");
        return 1;
    }
    for (int64_t l = 0; l < layers; l++)
        for (int k = 0; k < 2; k++) {
            const uint8_t *p = base + (size_t)(2 * l + k) * mbytes;
            c.m[l][k] = (gem_matrix){p, GEM_GGUF_Q8_0, ROWS, COLS, (size_t)(COLS / 32) * 34,
                                     p, 0};
            c.m[l][k].packed_span = mv_span_for(&c.m[l][k], c.threads);
        }
    for (int i = 0; i < COLS; i++)
        x[i] = (float)((double)(dev_xorshift(&rng) >> 11) * 0x1p-53 * 2.0 - 1.0) * 0.05f;
    c.x = x;
    if (!mv_pairable(&c.m[0][0], &c.m[0][1])) {
        fprintf(stderr, "geglu_items: gate and up not pairable\n");
        return 1;
    }
    int bad = 0;
    for (int64_t l = 0; l < layers; l++) {
        layer(&c, l, 0);
        memcpy(first, c.gate, ROWS * sizeof *first);
        layer(&c, l, 1);
        bad += memcmp(first, c.gate, ROWS * sizeof *first) != 0;
    }
    printf("geglu_items: %lld threads, %lld layers of gate and up (%.1f MB), %lld rounds\n",
           (long long)c.threads, (long long)layers, (double)region / 1e6, (long long)rounds);
    if (bad) {
        printf("INVALID: %d layers' outputs differ between batch and pair\n", bad);
        return 1;
    }
    printf("check: pair equals batch bit for bit on every layer\n");
    static const char *const name[2] = {"batch", "pair"};
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
    printf("pair / batch %.3f\n", med[1] / med[0]);
    return 0;
}
