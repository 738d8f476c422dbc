/*
dev/cpu/fused_parts: where a fused work item's time goes, part by part, with its rows in L2.

On the H200 host 16 threads run the BF16 fused route from the L3 at 3.6 Gelem/s a thread
(results/h200/run82), where the machine issues 2.8-3.0 G 512-bit FMAs a second a thread
(run 83, dev/cpu/core_probe): the route's 512 FMA instructions per token and KV head fill 61% of
that. Taking uops out (08c07c1) did not move it. This program times the item's three kernels
apart (the library's own: cpu_dot_tile_tm, cpu_online_tile, cpu_value_tile), each thread on
rows of its own that fit its L2, so memory is out of the picture:
  score   the scores of a span of 32 tokens for 8 query heads (256 FMA instructions a token)
  online  the softmax step of the span's tiles of 4 tokens
  value   the V update of the span (256 FMA instructions a token; every alpha 1, as once the
          running maxima settle)
  item    the three in the item's order, as src/cpu_fused.c runs them (without its prefetches)
  amx     (BF16 only) the whole item on the tile unit, dev/cpu/amx_item.h: the scores and the V
          update as BF16 tile products with q and the weights split into three BF16 pieces;
          checked against the double softmax like the library's item, then also timed by phase
          on one thread (TSC), after a probe of the tile unit alone (results/h200/run85-93)
  amx-pipe  the same item with its tile loads issued early (the same bits, checked)
  amx-score the library's item with its scores on the tile unit (amx_scores) and its softmax
          step and V update on the FMA kernels: no V relayout
Per part and thread count: ns a token (one KV head, 8 query heads) a thread and, for score,
value and item, G FMA instructions a second a thread. Predictions for the Xeon host (run 83:
5.1 G FMAs a second on one thread, 2.9 on each of 16; run 82: the route from the L3 at 284 ns a
token a thread on 16 threads): on one thread score and value 60-70 ns a token each (256 FMAs at
5.1 G/s is 50), the item 140-160; on 16 threads score and value 110-130 ns (88 at 2.9 G/s), the
item 260-290, as from the L3: the kernels themselves, not the memory, set the 16-thread rate.

Checks first: the item's final state (S, O per head) against the softmax in double over the
thread's rows: O/S of every head within NMSE 1e-10 of the double result.

usage: fused_parts [--dtype f32|bf16|f16] [--tokens N] [--reps R] [--rounds R]
                   [--threads 1,16]
*/
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "amx_item.h"
#include "common.h"
#include "cpu_kernels.h"
#include "cpu_routes.h"
#include "gem/attn.h"
#include "kv_view.h"

#define NH 8
#define D 512
#define TILE 4
#define SPAN CPU_SPAN_TOKENS
#define MAX_COUNTS 8
#define MAX_THREADS 256
enum { P_SCORE, P_ONLINE, P_VALUE, P_ITEM, P_AMX, P_AMX_PIPE, P_AMX_SCORE, NPARTS };
static const char *part_name[NPARTS] = {"score", "online", "value", "item",
                                        "amx", "amx-pipe", "amx-score"};
static int nparts = P_AMX; /* P_AMX too for BF16 */

static uint64_t rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

/* a value in [-1, 1) rounded to the type t, stored at element i of buf */
static void put(void *buf, gem_dtype t, int64_t i, float x)
{
    if (t == GEM_DTYPE_F32) {
        ((float *)buf)[i] = x;
        return;
    }
    const uint16_t h = t == GEM_DTYPE_BF16 ? gem_f32_to_bf16(x) : gem_f32_to_f16(x);
    ((uint16_t *)buf)[i] = h;
}

typedef struct rows {
    gem_dtype t;
    int64_t tokens, es;
    float *q;    /* (NH, D) */
    void *k, *v; /* (tokens, D) of t */
    float *sc, *alpha, *m, *s, *o, *saved; /* span scratch, state, saved scores */
    amx_ws *aw; /* BF16: the tile item's workspace */
} rows;

static int rows_init(rows *r, gem_dtype t, int64_t tokens, uint64_t seed)
{
    r->t = t;
    r->tokens = tokens;
    r->es = (int64_t)gem_dtype_size(t);
    const size_t kv = (size_t)(tokens * D * r->es);
    r->q = aligned_alloc(64, NH * D * sizeof(float));
    r->k = aligned_alloc(64, (kv + 63) / 64 * 64);
    r->v = aligned_alloc(64, (kv + 63) / 64 * 64);
    r->sc = aligned_alloc(64, SPAN * NH * sizeof(float));
    r->saved = aligned_alloc(64, SPAN * NH * sizeof(float));
    r->alpha = aligned_alloc(64, 64 * NH * sizeof(float));
    r->m = aligned_alloc(64, 64 * sizeof(float));
    r->s = aligned_alloc(64, 64 * sizeof(float));
    r->o = aligned_alloc(64, NH * D * sizeof(float));
    r->aw = aligned_alloc(64, (sizeof(amx_ws) + 63) / 64 * 64);
    if (!r->q || !r->k || !r->v || !r->sc || !r->saved || !r->alpha || !r->m || !r->s || !r->o ||
        !r->aw)
        return -1;
    uint64_t st = seed;
    for (int64_t i = 0; i < NH * D; i++)
        r->q[i] = (float)((double)rng_next(&st) / 9007199254740992.0 * 2.0 - 1.0);
    for (int64_t i = 0; i < tokens * D; i++) {
        put(r->k, t, i, (float)((double)rng_next(&st) / 9007199254740992.0 * 2.0 - 1.0));
        put(r->v, t, i, (float)((double)rng_next(&st) / 9007199254740992.0 * 2.0 - 1.0));
    }
    return 0;
}

static void state_reset(rows *r)
{
    for (int h = 0; h < NH; h++) {
        r->m[h] = -INFINITY;
        r->s[h] = 0.0f;
    }
    memset(r->o, 0, NH * D * sizeof(float));
}

static const float kScale = 0.044194173824159216f; /* 1/sqrt(512) */

/* One pass of a part over all the rows; returns nonzero on a non-finite score. */
static int pass(rows *r, int part)
{
    const char *k = r->k, *v = r->v;
    const int64_t rb = D * r->es;
    int bad = 0;
    if (part == P_AMX || part == P_AMX_PIPE)
        return amx_item_bf16(r->aw, r->q, r->k, r->v, r->tokens, D, kScale, r->m, r->s, r->o,
                             part == P_AMX_PIPE);
    if (part == P_ITEM || part == P_AMX_SCORE)
        state_reset(r);
    if (part == P_AMX_SCORE) {
        amx_q_tiles(r->aw, r->q);
        amx_config(amx_rows_sc, amx_colsb_sc);
    }
    for (int64_t t0 = 0; t0 < r->tokens; t0 += SPAN) {
        const int64_t n = r->tokens - t0 < SPAN ? r->tokens - t0 : SPAN;
        if (part == P_SCORE || part == P_ITEM)
            cpu_dot_tile_tm(r->q, NH, k + t0 * rb, r->t, D, n, D, r->sc, NH, NULL, 0);
        if (part == P_AMX_SCORE)
            amx_scores(r->aw, k + t0 * rb, rb, n, r->sc);
        if (part == P_ONLINE) /* the step rewrites the scores: start from the saved ones */
            memcpy(r->sc, r->saved, (size_t)(n * NH) * sizeof(float));
        if (part == P_ONLINE || part == P_ITEM || part == P_AMX_SCORE)
            for (int64_t u = 0; u < n; u += TILE)
                bad |= cpu_online_tile(r->sc + u * NH, n - u < TILE ? n - u : TILE, NH, kScale,
                                       r->m, r->s, r->alpha + (u / TILE) * NH);
        if (part == P_VALUE || part == P_ITEM || part == P_AMX_SCORE)
            cpu_value_tile(r->o, NH, D, TILE, r->alpha, r->sc, v + t0 * rb, r->t, n, D, NULL, 0);
    }
    return bad;
}

/* The item's (or the tile item's) O/S against the online softmax in double over the same rows. */
static int check(rows *r, int part)
{
    if (pass(r, part))
        return -1;
    float *kf = malloc((size_t)(r->tokens * D) * sizeof(float));
    float *vf = malloc((size_t)(r->tokens * D) * sizeof(float));
    double *p = malloc((size_t)r->tokens * sizeof(double));
    if (!kf || !vf || !p)
        return -1;
    cpu_widen(r->k, r->t, r->tokens * D, kf);
    cpu_widen(r->v, r->t, r->tokens * D, vf);
    int bad = 0;
    for (int h = 0; h < NH && !bad; h++) {
        double mx = -INFINITY, sum = 0.0;
        for (int64_t t = 0; t < r->tokens; t++) {
            double d = 0.0;
            for (int i = 0; i < D; i++)
                d += (double)r->q[h * D + i] * kf[t * D + i];
            p[t] = d * kScale;
            mx = p[t] > mx ? p[t] : mx;
        }
        for (int64_t t = 0; t < r->tokens; t++)
            sum += (p[t] = exp(p[t] - mx));
        double err = 0.0, ref = 0.0;
        for (int i = 0; i < D; i++) {
            double acc = 0.0;
            for (int64_t t = 0; t < r->tokens; t++)
                acc += p[t] * vf[t * D + i];
            const double want = acc / sum, got = (double)r->o[h * D + i] / r->s[h];
            err += (got - want) * (got - want);
            ref += want * want;
        }
        if (!(err <= 1e-10 * ref)) { /* the project's NMSE bound; NaN fails too */
            fprintf(stderr, "%s, head %d: NMSE %.3g against the double softmax\n",
                    part_name[part], h, err / ref);
            bad = 1;
        }
    }
    free(kf);
    free(vf);
    free(p);
    return bad;
}

typedef struct shared {
    pthread_barrier_t start;
    int part;
    int64_t reps;
} shared;

typedef struct worker {
    shared *sh;
    rows *r;
    double seconds;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(&w->sh->start);
    const double t0 = now_s();
    for (int64_t i = 0; i < w->sh->reps; i++)
        pass(w->r, w->sh->part);
    w->seconds = now_s() - t0;
    if (w->sh->part >= P_AMX)
        amx_unconfigure();
    return NULL;
}

static double run_threads(rows *rs, int n, int part, int64_t reps)
{
    static worker ws[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    shared sh;
    sh.part = part;
    sh.reps = reps;
    pthread_barrier_init(&sh.start, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        ws[i].sh = &sh;
        ws[i].r = &rs[i];
        if (pthread_create(&tid[i], NULL, run, &ws[i]) != 0) {
            fprintf(stderr, "fused_parts: cannot start thread %d\n", i);
            exit(1);
        }
    }
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        pthread_join(tid[i], NULL);
        worst = ws[i].seconds > worst ? ws[i].seconds : worst;
    }
    pthread_barrier_destroy(&sh.start);
    return worst;
}

int main(int argc, char **argv)
{
    int64_t tokens = 256, reps = 200, rounds = 5;
    gem_dtype t = GEM_DTYPE_BF16;
    int counts[MAX_COUNTS], nc = 0;
    const long procs = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            tokens = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *d = argv[++i];
            t = !strcmp(d, "f32") ? GEM_DTYPE_F32 : !strcmp(d, "f16") ? GEM_DTYPE_F16
                                                  : !strcmp(d, "bf16") ? GEM_DTYPE_BF16
                                                                       : GEM_DTYPE_COUNT;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            char *copy = strdup(argv[++i]), *save = NULL;
            for (char *s = strtok_r(copy, ",", &save); s && nc < MAX_COUNTS;
                 s = strtok_r(NULL, ",", &save))
                counts[nc++] = atoi(s);
            free(copy);
        } else {
            fprintf(stderr, "usage: fused_parts [--dtype f32|bf16|f16] [--tokens N] [--reps R] "
                            "[--rounds R] [--threads 1,16]\n");
            return 2;
        }
    }
    if (t == GEM_DTYPE_COUNT || tokens < SPAN || tokens % SPAN || tokens > 1 << 20 || reps < 1 ||
        rounds < 1) {
        fprintf(stderr, "fused_parts: --dtype f32, bf16 or f16; --tokens a multiple of %d "
                        "up to 2^20; --reps and --rounds at least 1\n", SPAN);
        return 2;
    }
    if (nc == 0) {
        counts[nc++] = 1;
        if (procs > 1)
            counts[nc++] = (int)(procs < MAX_THREADS ? procs : MAX_THREADS);
    }
    int maxn = 0;
    for (int c = 0; c < nc; c++) {
        if (counts[c] < 1 || counts[c] > MAX_THREADS) {
            fprintf(stderr, "fused_parts: 1 to %d threads\n", MAX_THREADS);
            return 2;
        }
        maxn = counts[c] > maxn ? counts[c] : maxn;
    }
    if (t == GEM_DTYPE_BF16) {
        if (amx_enable() != 0) {
            fprintf(stderr, "fused_parts: the kernel refused the tile state (arch_prctl)\n");
            return 1;
        }
        nparts = NPARTS;
    }
    rows *rs = calloc((size_t)maxn, sizeof *rs);
    for (int i = 0; i < maxn; i++)
        if (!rs || rows_init(&rs[i], t, tokens, 1234 + 77 * (uint64_t)i) != 0) {
            fprintf(stderr, "fused_parts: out of memory\n");
            return 1;
        }
    /* checks, and the saved scores and alphas the online and value parts start from */
    for (int i = 0; i < maxn; i++) {
        for (int part = nparts - 1; part >= P_ITEM; part--) /* the library's item last */
            if (check(&rs[i], part) != 0) {
                fprintf(stderr, "fused_parts: thread %d's %s disagrees with the double softmax\n",
                        i, part_name[part]);
                return 1;
            }
        if (nparts > P_AMX) { /* the two tile orders: the same operations, so the same bits */
            float keep[NH * D + 2 * NH];
            pass(&rs[i], P_AMX);
            memcpy(keep, rs[i].o, NH * D * sizeof(float));
            memcpy(keep + NH * D, rs[i].m, NH * sizeof(float));
            memcpy(keep + NH * D + NH, rs[i].s, NH * sizeof(float));
            pass(&rs[i], P_AMX_PIPE);
            if (memcmp(keep, rs[i].o, NH * D * sizeof(float)) ||
                memcmp(keep + NH * D, rs[i].m, NH * sizeof(float)) ||
                memcmp(keep + NH * D + NH, rs[i].s, NH * sizeof(float))) {
                fprintf(stderr, "fused_parts: thread %d's amx and amx-pipe differ\n", i);
                return 1;
            }
            if (pass(&rs[i], P_ITEM)) /* the saved scores below are the library item's */
                return 1;
        }
        memcpy(rs[i].saved, rs[i].sc, SPAN * NH * sizeof(float));
        for (int j = 0; j < 64 * NH; j++)
            rs[i].alpha[j] = 1.0f;
    }
    printf("%s kernels%s%s, %s K and V, %lld tokens a thread (%lld KiB of rows), %lld passes a "
           "sample, %lld rounds A B .. B A\nchecks: every thread's item within NMSE 1e-10 of "
           "the double softmax%s\n",
           cpu_kernels_isa(), nparts > P_AMX ? " and " : "", nparts > P_AMX ? amx_kind() : "",
           gem_dtype_name(t), (long long)tokens,
           (long long)(2 * tokens * D * rs[0].es / 1024), (long long)reps, (long long)rounds,
           nparts > P_AMX ? "; amx and amx-pipe bitwise equal" : "");
    const int nv = nc * nparts;
    double *tm = calloc((size_t)(nv * 2 * rounds), sizeof *tm);
    int64_t *cnt = calloc((size_t)nv, sizeof *cnt);
    for (int64_t r = 0; r < rounds; r++)
        for (int pass_ = 0; pass_ < 2; pass_++)
            for (int u = 0; u < nv; u++) {
                const int x = pass_ ? nv - 1 - u : u, c = x / nparts, part = x % nparts;
                for (int i = 0; i < counts[c]; i++)
                    state_reset(&rs[i]);
                tm[x * 2 * rounds + cnt[x]++] = run_threads(rs, counts[c], part, reps);
            }
    if (nparts > P_AMX) { /* the tile unit alone, and where the tile item's time goes */
        uint16_t *buf = aligned_alloc(64, 65536);
        for (int i = 0; i < 32768 && buf; i++)
            buf[i] = gem_f32_to_bf16((float)(i % 7) * 0.01f);
        if (buf)
            printf("tile unit on one thread, full tiles, TSC cycles a TDPBF16PS: A from rows 1 KiB "
                   "apart %.1f, B just stored %.1f\n", amx_tdp_probe(100000, 3, buf, 0),
                   amx_tdp_probe(100000, 4, buf, 0));
        static const char *shape_name[3] = {"full tiles", "the score shapes",
                                            "the value shapes"};
        for (int sh = 0; sh < 3 && buf; sh++)
            printf("tile unit on one thread, %s, TSC cycles a TDPBF16PS: operands fixed %.1f, "
                   "reloaded from L1 before each step %.1f, each as its last reader issues %.1f\n",
                   shape_name[sh], amx_tdp_probe(100000, 0, buf, sh),
                   amx_tdp_probe(100000, 1, buf, sh), amx_tdp_probe(100000, 2, buf, sh));
        free(buf);
        for (int part = P_AMX; part <= P_AMX_PIPE; part++) {
            memset(amx_ph_cycles, 0, sizeof amx_ph_cycles);
            amx_clock_on = 1;
            for (int64_t i = 0; i < reps; i++)
                pass(&rs[0], part);
            amx_clock_on = 0;
            uint64_t all = 0;
            for (int ph = 0; ph < AMX_NPH; ph++)
                all += amx_ph_cycles[ph];
            printf("%s on one thread, TSC cycles a token:", part_name[part]);
            for (int ph = 0; ph < AMX_NPH; ph++)
                printf(" %s %.1f,", amx_ph_name[ph],
                       (double)amx_ph_cycles[ph] / (double)(reps * tokens));
            printf(" all %.1f\n", (double)all / (double)(reps * tokens));
        }
    }
    printf("threads  part     ns a token a thread (median, min, max)   G FMA/s a thread\n");
    for (int x = 0; x < nv; x++) {
        const int c = x / nparts, part = x % nparts;
        double *v = tm + x * 2 * rounds;
        qsort(v, (size_t)(2 * rounds), sizeof *v, cmp_d);
        const double per = 1e9 / (double)(reps * tokens);
        const double med = 0.5 * (v[rounds - 1] + v[rounds]) * per;
        const double fmas = part == P_SCORE || part == P_VALUE ? 256.0 : part == P_ITEM ? 512.0
                                                                                       : 0.0;
        /* (the tile item issues no FMA instructions: its column stays empty) */
        printf("%7d  %-7s  %8.1f  (%.1f, %.1f)", counts[c], part_name[part], med, v[0] * per,
               v[2 * rounds - 1] * per);
        if (fmas > 0)
            printf("   %6.2f", fmas / med);
        printf("\n");
    }
    return 0;
}
