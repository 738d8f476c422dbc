/*
dev/cpu/token_ahead: whole tokens of the CPU decoder with and without the preload of the next
product (mv_ahead) by the pool's waiting threads, switched inside one process.

The host's noise moves a process's token by 20% and more (results/cpu/model/speed), so the
variants run in one session, block by block in A B B A order, each block `--steps` tokens
timed whole, and the context grows by every block's tokens (the orders cancel that drift):
  owned   the first 2 levels of the products' taper owned (thread t computes items t and T + t
          first), no idle work
  ahead   owned, and the waiting threads preload their owned items of the next product (the
          library's decoder)
Each variant's stage times (gem_session_times, the clock read between stages) are summed over
its blocks and printed a token: where the preload's gain or cost falls (norms, products,
sliding and full attention, MLP, logits).
The bits are the same in both: an item computes the same rows whoever runs it
(tests/test_matvec holds every owned level to mv_rows' bits). Run 160 measured a third variant,
the plain split (no owned levels), at c2fbb99 through a switch the library no longer has:
owned/plain 0.98-1.03, ahead/plain 0.92-0.94 (results/h200/run160).

With --product the program checks the mechanism alone first: layer 0's o product, its threads'
caches emptied (each reads 40 MiB, past the L3), then with and without each thread's owned items of o preloaded
(mv_ahead_step to the plan's budget, on the pool, thread t its own) and 200 us for them to
land, the product timed alone;
the versions alternate, 200 times each.

Usage: token_ahead --model M.gguf [--context C] [--rounds R] [--steps S] [--threads N]
                   [--product]
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gem/model.h"
#include "matvec.h"
#include "model_internal.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct evict_job {
    const mv_ahead *plan; /* NULL: read the thread's buffer instead */
    unsigned char *buf;   /* (threads x EVICT) */
    volatile uint64_t sink;
} evict_job;

#define EVICT ((size_t)40 << 20)

/* item t: thread t's L2 emptied (its buffer read), or its owned items of the plan preloaded */
static void evict_item(void *ctx, int64_t item, int64_t thread)
{
    evict_job *j = ctx;
    (void)item;
    if (j->plan) {
        size_t done = 0;
        while (mv_ahead_step(j->plan, thread, &done, 4096) > 0)
            ;
        return;
    }
    uint64_t sum = 0;
    const unsigned char *b = j->buf + (size_t)thread * EVICT;
    for (size_t i = 0; i < EVICT; i += 64)
        sum += b[i];
    j->sink += sum;
}

static void product_check(gem_session *s)
{
    const int64_t T = cpu_pool_threads(s->pool);
    const gem_layer *l = &s->m->layers[0];
    evict_job ev = {NULL, malloc((size_t)T * EVICT), 0};
    memset(ev.buf, 1, (size_t)T * EVICT);
    evict_job pre = {&s->ahead[1], NULL, 0};
    const mv_scratch xq = {s->xq, s->xq_bytes};
    enum { REPS = 200 };
    double t[2][REPS];
    cpu_pool_set_idle(s->pool, NULL);
    double tpre = 0;
    for (int r = 0; r < REPS; r++)
        for (int k = 0; k < 2; k++) {
            const int v = (r & 1) ? 1 - k : k; /* A B B A */
            cpu_pool_run_owned(s->pool, T, T, evict_item, &ev);
            if (v) {
                const double tp = now();
                cpu_pool_run_owned(s->pool, T, T, evict_item, &pre);
                tpre += now() - tp;
            }
            /* the prefetches land: 200 us, in both versions (a token's attention gap) */
            for (const double tw = now(); now() - tw < 200e-6;)
                ;
            const double t0 = now();
            (void)mv(s->pool, &l->wo, s->att, &xq, s->o);
            t[v][r] = (now() - t0) * 1e6;
        }
    for (int v = 0; v < 2; v++)
        qsort(t[v], REPS, sizeof(double), cmp);
    printf("o of layer 0 (%.1f MB), %lld threads, budget %zu KiB a thread: cold %.1f us "
           "[%.1f .. %.1f], owned items preloaded %.1f us [%.1f .. %.1f]: %.3f\n",
           (double)(l->wo.rows * (int64_t)l->wo.row_bytes) / 1e6, (long long)T,
           s->ahead[1].budget >> 10, t[0][REPS / 2], t[0][REPS / 4], t[0][3 * REPS / 4],
           t[1][REPS / 2], t[1][REPS / 4], t[1][3 * REPS / 4], t[1][REPS / 2] / t[0][REPS / 2]);
    printf("  the preload itself: %.1f us a time\n", tpre / REPS * 1e6);
    free(ev.buf);
}

/* 0: owned items alone, 1: and the waiting threads' preload */
static void set_variant(gem_session *s, int v)
{
    cpu_pool_set_idle(s->pool, v == 1 ? &s->idle : NULL);
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int64_t context = 64, rounds = 5, steps = 4, threads = 0;
    int product = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            path = argv[++i];
        else if (!strcmp(argv[i], "--context") && i + 1 < argc)
            context = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--product"))
            product = 1;
        else {
            fprintf(stderr, "usage: token_ahead --model M.gguf [--context C] [--rounds R] "
                            "[--steps S] [--threads N] [--product]\n");
            return 2;
        }
    }
    if (!path || context < 17 || rounds < 1 || steps < 1) {
        fprintf(stderr, "token_ahead: --model is required, context >= 17, rounds and steps >= 1\n");
        return 2;
    }
    char err[256];
    gem_model *m = NULL;
    if (gem_model_load(path, &m, err, sizeof err) != GEM_OK) {
        fprintf(stderr, "token_ahead: %s\n", err);
        return 2;
    }
    const int64_t total = context + rounds * 4 * steps + 1;
    gem_session_opts so = {threads, total, GEM_MODEL_FULL_ROUTE_DEFAULT, 0, 0, GEM_DTYPE_F32, 0,
                           GEM_BACKEND_CPU};
    gem_session *s = NULL;
    if (gem_session_create(m, &so, &s, err, sizeof err) != GEM_OK) {
        fprintf(stderr, "token_ahead: %s\n", err);
        return 2;
    }
    if (!s->ahead) {
        fprintf(stderr, "token_ahead: one thread: nothing to compare\n");
        return 2;
    }
    int32_t tok = 2, next = 0;
    for (int64_t i = 0; i < 16; i++) /* a prompt, then the full layers filled to the context */
        if (gem_session_eval_argmax(s, (int32_t)(2 + i * 7 % 100), &next) != GEM_OK)
            return 1;
    if (gem_session_fill_repeat(s, context) != GEM_OK)
        return 1;
    tok = next;
    if (product)
        product_check(s);
    static const char *names[2] = {"owned", "ahead"};
    static const int order[4] = {0, 1, 1, 0};
    double *t[2];
    for (int v = 0; v < 2; v++)
        if (!(t[v] = malloc((size_t)(rounds * 2 * steps) * sizeof(double)))) {
            fprintf(stderr, "token_ahead: out of memory\n");
            return 2;
        }
    int64_t n[2] = {0, 0};
    gem_stage_times st[2];
    memset(st, 0, sizeof st);
    for (int64_t r = 0; r < rounds; r++)
        for (int b = 0; b < 4; b++) {
            const int v = order[b];
            set_variant(s, v);
            gem_session_times_reset(s);
            for (int64_t k = 0; k < steps; k++) {
                const double t0 = now();
                if (gem_session_eval_argmax(s, tok, &next) != GEM_OK)
                    return 1;
                t[v][n[v]++] = (now() - t0) * 1e3;
                tok = next;
            }
            gem_stage_times d;
            gem_session_times(s, &d);
            st[v].norms += d.norms;
            st[v].proj += d.proj;
            st[v].attn_swa += d.attn_swa;
            st[v].attn_full += d.attn_full;
            st[v].mlp += d.mlp;
            st[v].logits += d.logits;
            st[v].total += d.total;
            st[v].tokens += d.tokens;
        }
    set_variant(s, 1);
    printf("token_ahead: %s, %lld threads, context %lld to %lld, %lld rounds of %lld tokens a "
           "block\n",
           path, (long long)cpu_pool_threads(s->pool), (long long)context,
           (long long)gem_session_pos(s), (long long)rounds, (long long)steps);
    double med[2];
    for (int v = 0; v < 2; v++) {
        qsort(t[v], (size_t)n[v], sizeof(double), cmp);
        med[v] = t[v][n[v] / 2];
        printf("  %-6s median %8.3f ms  [%8.3f .. %8.3f]  q1 %8.3f  q3 %8.3f  (%lld tokens)\n",
               names[v], med[v], t[v][0], t[v][n[v] - 1], t[v][n[v] / 4], t[v][3 * n[v] / 4],
               (long long)n[v]);
    }
    printf("  ahead/owned %.3f\n", med[1] / med[0]);
    printf("  stages, ms a token (means): norms  products  sliding attn  full attn  MLP  logits"
           "  sum\n");
    for (int v = 0; v < 2; v++) {
        const double k = st[v].tokens ? 1e3 / (double)st[v].tokens : 0;
        printf("  %-6s %7.3f %9.3f %13.3f %10.3f %6.3f %7.3f %7.3f\n", names[v], st[v].norms * k,
               st[v].proj * k, st[v].attn_swa * k, st[v].attn_full * k, st[v].mlp * k,
               st[v].logits * k, st[v].total * k);
    }
    for (int v = 0; v < 2; v++)
        free(t[v]);
    gem_session_free(s);
    gem_model_free(m);
    return 0;
}
