/*
dev/cpu/libs_abba: whole tokens of two builds of the CPU decoder in one process, token by token
in A B B A order, so that a noisy host's spread falls on both builds alike.

Why: on the Xeon hosts whole tokens of the 2gb preset moved by 20-27% of the floor between
processes a few seconds apart (results/h200 runs 173 and 176: each process's read probe moved the
floor as much), so scripts/abba-model.sh, which alternates processes, cannot rank a change worth
2-5% of a token. Here both builds' libgemmodel.so are loaded into one process (dlopen,
RTLD_LOCAL | RTLD_DEEPBIND: each copy binds to its own symbols and keeps its own state and
thread pool), each loads the model and runs its own session, and the tokens alternate.

Per context C: both sessions evaluate the same 16 prompt tokens, fill their full layers' caches
to position C (gem_session_fill_repeat), then --rounds rounds of A B B A tokens (4 tokens a
round), --gap-ms of sleep before each token (a pool polls 0.5 ms after its run, then sleeps: the
other build's workers must not be spinning on the cores). Each token's logits are compared
between the builds at the same position: the program says whether the two builds gave the same
bits at every step (it does not fail when they differ: a change may move bits on purpose).

It prints, per context and build, the median, min and max token time (ms, the monotonic clock
around gem_session_eval), the floor (weight bytes a token plus the KV bytes at the position over
the read probe measured once in this process, 16 threads' best reader) and the median's multiple
of it, the ratio B / A of the medians, and the median of the per-round ratios (each round's two
B tokens over its two A tokens).

usage: libs_abba --a A/libgemmodel.so --b B/libgemmodel.so --model M.gguf
                 [--contexts 64,1024] [--rounds 40] [--threads 0] [--gap-ms 2]
*/
#define _GNU_SOURCE 1 /* RTLD_DEEPBIND */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "gem/engine.h"
#include "gem/model.h"

enum { MAX_CTX = 8, PROMPT = 16, MAX_ROUNDS = 1000 };

/* The entry points of one build's libgemmodel.so. */
typedef struct build {
    const char *path;
    void *lib;
    gem_status (*model_load)(const char *, gem_model **, char *, size_t);
    void (*model_free)(gem_model *);
    size_t (*weight_bytes)(const gem_model *);
    const gem_hparams *(*hparams)(const gem_model *);
    gem_status (*session_create)(const gem_model *, const gem_session_opts *, gem_session **,
                                 char *, size_t);
    void (*session_free)(gem_session *);
    gem_status (*eval)(gem_session *, int32_t, float *);
    gem_status (*fill_repeat)(gem_session *, int64_t);
    size_t (*kv_bytes_at)(const gem_session *, int64_t);
    int64_t (*pos)(const gem_session *);
    gem_model *m;
    gem_session *s;
    float *logits;
} build;

static void *sym(build *b, const char *name)
{
    void *p = dlsym(b->lib, name);
    if (!p) {
        fprintf(stderr, "libs_abba: %s has no %s\n", b->path, name);
        exit(1);
    }
    return p;
}

static void open_build(build *b)
{
    b->lib = dlopen(b->path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!b->lib) {
        fprintf(stderr, "libs_abba: cannot load %s: %s\n", b->path, dlerror());
        exit(1);
    }
    *(void **)&b->model_load = sym(b, "gem_model_load");
    *(void **)&b->model_free = sym(b, "gem_model_free");
    *(void **)&b->weight_bytes = sym(b, "gem_model_weight_bytes_per_token");
    *(void **)&b->hparams = sym(b, "gem_model_hparams");
    *(void **)&b->session_create = sym(b, "gem_session_create");
    *(void **)&b->session_free = sym(b, "gem_session_free");
    *(void **)&b->eval = sym(b, "gem_session_eval");
    *(void **)&b->fill_repeat = sym(b, "gem_session_fill_repeat");
    *(void **)&b->kv_bytes_at = sym(b, "gem_session_kv_bytes_at");
    *(void **)&b->pos = sym(b, "gem_session_pos");
}

static void check(gem_status st, const build *b, const char *what)
{
    if (st != GEM_OK) {
        fprintf(stderr, "libs_abba: %s (%s): status %d\n", what, b->path, (int)st);
        exit(1);
    }
}

static void sleep_ms(double ms)
{
    const time_t sec = (time_t)(ms / 1e3);
    const struct timespec ts = {sec, (long)((ms - 1e3 * (double)sec) * 1e6)};
    nanosleep(&ts, NULL);
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_d);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

int main(int argc, char **argv)
{
    build bl[2] = {{0}, {0}};
    const char *model = NULL;
    int64_t ctx[MAX_CTX] = {64, 1024}, threads = 0, rounds = 40;
    int nctx = 2;
    double gap_ms = 2.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--a") && i + 1 < argc)
            bl[0].path = argv[++i];
        else if (!strcmp(argv[i], "--b") && i + 1 < argc)
            bl[1].path = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--contexts") && i + 1 < argc) {
            nctx = 0;
            for (char *t = strtok(argv[++i], ","); t && nctx < MAX_CTX; t = strtok(NULL, ","))
                ctx[nctx++] = atoll(t);
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--gap-ms") && i + 1 < argc)
            gap_ms = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: libs_abba --a A/libgemmodel.so --b B/libgemmodel.so "
                            "--model M.gguf [--contexts 64,1024] [--rounds 40] [--threads 0] "
                            "[--gap-ms 2]\n");
            return 2;
        }
    }
    if (!bl[0].path || !bl[1].path || !model || nctx < 1 || rounds < 1 || rounds > MAX_ROUNDS ||
        threads < 0 || threads > 4096 || !(gap_ms >= 0.0 && gap_ms <= 1000.0)) {
        fprintf(stderr, "libs_abba: --a, --b and --model are needed; rounds 1..%d, threads "
                        "0..4096, gap 0..1000 ms\n", MAX_ROUNDS);
        return 2;
    }
    for (int c = 0; c < nctx; c++)
        if (ctx[c] < PROMPT || ctx[c] > ((int64_t)1 << 24)) {
            fprintf(stderr, "libs_abba: a context is %d .. 2^24 positions\n", PROMPT);
            return 2;
        }
    /* the read probe of this process's threads (the library linked into this program) */
    gem_engine *e = NULL;
    double bw = 0.0;
    if (gem_engine_create(GEM_BACKEND_CPU, threads, &e) != GEM_OK ||
        gem_engine_read_bandwidth(e, (size_t)1 << 30, 5, &bw) != GEM_OK || !(bw > 0.0)) {
        fprintf(stderr, "libs_abba: no read probe\n");
        return 1;
    }
    const int64_t used_threads = gem_engine_threads(e);
    gem_engine_destroy(e);
    char err[512];
    for (int k = 0; k < 2; k++) {
        open_build(&bl[k]);
        gem_status st = bl[k].model_load(model, &bl[k].m, err, sizeof err);
        if (st != GEM_OK) {
            fprintf(stderr, "libs_abba: %s: %s\n", bl[k].path, err);
            return 1;
        }
        bl[k].logits = malloc((size_t)bl[k].hparams(bl[k].m)->n_vocab * sizeof(float));
        if (!bl[k].logits)
            return 1;
    }
    const int64_t nv = bl[0].hparams(bl[0].m)->n_vocab;
    if (nv != bl[1].hparams(bl[1].m)->n_vocab) {
        fprintf(stderr, "libs_abba: the builds read different vocabularies\n");
        return 1;
    }
    printf("libs_abba: A %s\n           B %s\nmodel %s, %lld threads, read probe %.1f GB/s, "
           "%lld rounds of A B B A, %.1f ms before each token\n",
           bl[0].path, bl[1].path, model, (long long)used_threads, bw / 1e9, (long long)rounds,
           gap_ms);
    double *t[2];
    t[0] = malloc((size_t)(2 * rounds) * sizeof(double));
    t[1] = malloc((size_t)(2 * rounds) * sizeof(double));
    double *ratio = malloc((size_t)rounds * sizeof(double));
    if (!t[0] || !t[1] || !ratio)
        return 1;
    for (int c = 0; c < nctx; c++) {
        const int64_t max_tokens = ctx[c] + 2 * rounds + 8;
        int same = 1;
        size_t floor_bytes = 0;
        for (int k = 0; k < 2; k++) {
            const gem_session_opts o = {.threads = threads, .max_tokens = max_tokens,
                                        .full_route = GEM_MODEL_FULL_ROUTE_DEFAULT};
            check(bl[k].session_create(bl[k].m, &o, &bl[k].s, err, sizeof err), &bl[k],
                  "session");
            for (int32_t i = 0; i < PROMPT; i++)
                check(bl[k].eval(bl[k].s, (int32_t)((2 + 7 * i) % nv), bl[k].logits), &bl[k],
                      "prompt");
            if (ctx[c] > PROMPT)
                check(bl[k].fill_repeat(bl[k].s, ctx[c]), &bl[k], "fill");
        }
        same &= memcmp(bl[0].logits, bl[1].logits, (size_t)nv * sizeof(float)) == 0;
        const int64_t tok = 17;
        int na = 0, nb = 0;
        for (int64_t r = 0; r < rounds; r++) {
            double rt[2] = {0.0, 0.0};
            for (int j = 0; j < 4; j++) {
                const int k = (j == 1 || j == 2) ? 1 : 0; /* A B B A */
                /* both builds see the same token at each of their positions */
                const int32_t id = (int32_t)((tok + 13 * (bl[k].pos(bl[k].s) - ctx[c])) % nv);
                sleep_ms(gap_ms);
                const double t0 = now_s();
                check(bl[k].eval(bl[k].s, id, bl[k].logits), &bl[k], "token");
                const double dt = (now_s() - t0) * 1e3;
                rt[k] += dt;
                t[k][k ? nb++ : na++] = dt;
                if (k == 0 && j == 3) /* positions equal again: the two builds' last logits */
                    same &= memcmp(bl[0].logits, bl[1].logits, (size_t)nv * sizeof(float)) == 0;
            }
            ratio[r] = rt[1] / rt[0];
        }
        floor_bytes = bl[0].weight_bytes(bl[0].m) + bl[0].kv_bytes_at(bl[0].s, ctx[c] + rounds);
        const double floor_ms = (double)floor_bytes / bw * 1e3;
        double med[2];
        for (int k = 0; k < 2; k++) {
            const int n = 2 * (int)rounds;
            med[k] = median(t[k], n);
            printf("ctx %-8lld %c  median %8.3f ms  min %8.3f  max %8.3f  floor %.3f ms  x%.3f\n",
                   (long long)ctx[c], k ? 'B' : 'A', med[k], t[k][0], t[k][n - 1], floor_ms,
                   med[k] / floor_ms);
        }
        printf("ctx %-8lld B/A of the medians %.4f, median of the rounds' B/A %.4f; logits %s\n",
               (long long)ctx[c], med[1] / med[0], median(ratio, (int)rounds),
               same ? "the same bits at every compared step" : "DIFFER between the builds");
        for (int k = 0; k < 2; k++) {
            bl[k].session_free(bl[k].s);
            bl[k].s = NULL;
        }
    }
    for (int k = 0; k < 2; k++) {
        bl[k].model_free(bl[k].m);
        free(bl[k].logits);
    }
    free(t[0]);
    free(t[1]);
    free(ratio);
    return 0;
}
