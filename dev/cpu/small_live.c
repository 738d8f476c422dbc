/*
dev/cpu/small_live: the CPU fused route at the short contexts of a decode token.

At context 64 a token of the 2gb preset (gem synth --preset 2gb) spends 3.1 ms in its 50 sliding
layers' attention (D256, 32 query heads over 16 KV heads, 2 MB of F32 K and V a layer) and 0.9 ms
in its 10 full layers' (D512, 32 over 4, 1 MB), about 61 and 87 us a call where the bytes would
take 15-20 at the host's read rate (H200 host, results/h200/run52). The tuned default gives one
partition per 256 rows, so at live 64 a call has 16 work items (sliding) or 4 (full) for 16
threads. This program times gem_decode at those shapes for each partition count asked for, on
the caches hot (one copy, as a hot loop sees it) and cold (copies rotated through 512 MiB, as a
token sees them after streaming 2 GB of weights), on all cores and on one thread, with the
rows head-major (a head's rows back to back, the cache helper's layout) or token-major (a token's
rows of every head back to back, the CPU decoder's layout before this program: a head's
consecutive rows 16 KiB apart at the sliding shape, 8 KiB at the full one).

Every configuration is checked first against gem_attn_reference_kv (NMSE <= 1e-10) and repeated
bitwise; then rounds of all configurations of a (shape, live, cache) in A B ... B A order.

H200 host (Intel Xeon, 16 cores; results/h200/run54, caches cold, head-major): the full shape at
live 64 / 256 / 1,024 took 43.6 / 110.2 / 378.4 us at P 1 and 29.1 / 64.5 / 183.5 at P 4; the
sliding shape at live 64 35.4 (P 1) / 33.2 (P 4). The library's default keeps 16 work items since
(src/cpu_decode.c). Token-major rows cost the same as head-major ones at live 64 (run 55).
Run 167 (commit 47edf8d has the program's --variants of that run): at one partition with an item
for every thread the route now takes one pool run, the sliding shape at live 64 14.7 -> 12.5 us
hot and 22.6 -> 19.7 cold (src/cpu_fused.c, fused_whole_item).

usage: small_live [--threads N] [--lengths 64,256,1024] [--partitions 1,2,4,8,16,32]
                  [--rounds R] [--calls C] [--layouts head,token] [--shapes sliding,full]
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "gem/attn.h"
#include "gem/decode.h"

#define MAX_LIST 16

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float next_f(void) { return (float)(dev_xorshift(&rng) >> 40) * 0x1p-24f * 2.0f - 1.0f; }

static int parse_list(const char *s, int64_t *out)
{
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t && n < MAX_LIST; t = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        const long long v = strtoll(t, &end, 10);
        if (!end || *end || v < 1) {
            free(copy);
            return -1;
        }
        out[n++] = v;
    }
    free(copy);
    return n;
}

static void *alloc64(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        exit(2);
    }
    return p;
}

/* The view of k and v (each n_kv_heads * live rows): head-major (tm 0) or token-major. */
static gem_kv_view view_of(const gem_decode_shape *sh, const float *k, const float *v,
                           int64_t live, int tm)
{
    gem_kv_view w = gem_kv_view_dense(k, v, sh->dk, sh->dv, live, live);
    if (tm) {
        w.k_head_stride = sh->dk;
        w.k_token_stride = sh->n_kv_heads * sh->dk;
        w.v_head_stride = sh->dv;
        w.v_token_stride = sh->n_kv_heads * sh->dv;
    }
    return w;
}

typedef struct shape_case {
    const char *name;
    gem_decode_shape shape;
} shape_case;

int main(int argc, char **argv)
{
    int64_t threads = 0, lengths[MAX_LIST] = {64, 256, 1024}, parts[MAX_LIST] = {1, 2, 4, 8, 16, 32};
    int nl = 3, np = 6, rounds = 7, calls = 40, layouts[2] = {1, 1}, want_shape[2] = {1, 1}; /* head, token; sliding, full */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--lengths") && i + 1 < argc)
            nl = parse_list(argv[++i], lengths);
        else if (!strcmp(argv[i], "--partitions") && i + 1 < argc)
            np = parse_list(argv[++i], parts);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layouts") && i + 1 < argc) {
            const char *a = argv[++i];
            layouts[0] = strstr(a, "head") != NULL;
            layouts[1] = strstr(a, "token") != NULL;
        } else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) {
            const char *a = argv[++i];
            want_shape[0] = strstr(a, "sliding") != NULL;
            want_shape[1] = strstr(a, "full") != NULL;
        }
        else {
            fprintf(stderr, "usage: small_live [--threads N] [--lengths L,..] [--partitions P,..] "
                            "[--rounds R] [--calls C] [--layouts head,token] "
                            "[--shapes sliding,full]\n");
            return 2;
        }
    }
    if (nl < 1 || np < 1 || rounds < 1 || calls < 1 || threads < 0 || !(layouts[0] || layouts[1]) ||
        !(want_shape[0] || want_shape[1])) {
        fprintf(stderr, "small_live: bad argument\n");
        return 2;
    }
    gem_decode_ctx *ctx[2] = {NULL, NULL}; /* all threads asked, one thread */
    if (gem_decode_ctx_create(GEM_BACKEND_CPU, threads, &ctx[0]) != GEM_OK ||
        gem_decode_ctx_create(GEM_BACKEND_CPU, 1, &ctx[1]) != GEM_OK) {
        fprintf(stderr, "small_live: no CPU context\n");
        return 2;
    }
    printf("%s\n", gem_decode_ctx_describe(ctx[0]));
    const float scale = 1.0f; /* Gemma 4: QK-normed, scale 1 */
    const shape_case shapes[2] = {{"sliding", {32, 16, 256, 256, scale}},
                                  {"full", {32, 4, 512, 512, scale}}};
    printf("%-8s %-6s %6s %5s %-5s %7s %10s %10s %10s %8s\n", "shape", "layout", "live", "P",
           "cache", "threads", "min us", "median us", "max us", "GB/s");
    int failed = 0;
    for (int si = 0; si < 2; si++) {
        if (!want_shape[si])
            continue;
        const gem_decode_shape *sh = &shapes[si].shape;
        for (int tm = 0; tm < 2; tm++)
        for (int li = 0; li < nl; li++) {
            if (!layouts[tm])
                continue;
            const char *lay = tm ? "token" : "head";
            const int64_t live = lengths[li];
            const size_t kv_elems = (size_t)sh->n_kv_heads * (size_t)live * (size_t)sh->dk;
            const double kv_bytes = 2.0 * (double)kv_elems * sizeof(float);
            const int copies = (int)ceil(512e6 / kv_bytes) + 1;
            float *q = alloc64((size_t)sh->n_q_heads * sh->dk * sizeof(float));
            float *out = alloc64((size_t)sh->n_q_heads * sh->dv * sizeof(float));
            float *first = alloc64((size_t)sh->n_q_heads * sh->dv * sizeof(float));
            double *ref = alloc64((size_t)sh->n_q_heads * sh->dv * sizeof(double));
            float **k = alloc64((size_t)copies * sizeof(float *));
            float **v = alloc64((size_t)copies * sizeof(float *));
            for (int64_t i = 0; i < sh->n_q_heads * sh->dk; i++)
                q[i] = next_f() * 3.0f;
            k[0] = alloc64(kv_elems * sizeof(float));
            v[0] = alloc64(kv_elems * sizeof(float));
            for (size_t i = 0; i < kv_elems; i++) {
                k[0][i] = next_f();
                v[0][i] = next_f();
            }
            for (int c = 1; c < copies; c++) {
                k[c] = alloc64(kv_elems * sizeof(float));
                v[c] = alloc64(kv_elems * sizeof(float));
                memcpy(k[c], k[0], kv_elems * sizeof(float));
                memcpy(v[c], v[0], kv_elems * sizeof(float));
            }
            gem_kv_view view = view_of(sh, k[0], v[0], live, tm);
            if (gem_attn_reference_kv(sh, q, &view, ref, (size_t)sh->n_q_heads * sh->dv) != GEM_OK) {
                fprintf(stderr, "small_live: the reference failed\n");
                return 2;
            }
            /* configurations: (P, context); the one-thread context with P 1 only */
            int64_t cp[MAX_LIST + 1];
            int cx[MAX_LIST + 1], nc = 0;
            for (int pi = 0; pi < np; pi++) {
                cp[nc] = parts[pi];
                cx[nc++] = 0;
            }
            cp[nc] = 1;
            cx[nc++] = 1;
            size_t ws_bytes = 0;
            for (int c = 0; c < nc; c++) {
                const gem_decode_config cfg = {GEM_ROUTE_FUSED, cp[c], 4};
                size_t b = 0;
                if (gem_decode_workspace_bytes(ctx[cx[c]], sh, live, &cfg, &b) != GEM_OK) {
                    fprintf(stderr, "small_live: workspace size\n");
                    return 2;
                }
                ws_bytes = b > ws_bytes ? b : ws_bytes;
            }
            void *ws = alloc64(ws_bytes);
            int valid[MAX_LIST + 1];
            float *bits[MAX_LIST + 1];
            for (int c = 0; c < nc; c++) { /* validate: reference, repeat */
                const gem_decode_config cfg = {GEM_ROUTE_FUSED, cp[c], 4};
                valid[c] = 1;
                for (int rep = 0; rep < 2; rep++) {
                    memset(out, 0xFF, (size_t)sh->n_q_heads * sh->dv * sizeof(float));
                    view = view_of(sh, k[rep], v[rep], live, tm);
                    const gem_status st = gem_decode(ctx[cx[c]], sh, q, &view, out, ws, ws_bytes,
                                                     &cfg, NULL);
                    if (st != GEM_OK) {
                        printf("%-8s %-6s %6lld %5lld INVALID: %s\n", shapes[si].name, lay,
                               (long long)live, (long long)cp[c], gem_status_str(st));
                        valid[c] = 0;
                        break;
                    }
                    if (rep == 0) {
                        double num = 0, den = 0;
                        for (int64_t i = 0; i < sh->n_q_heads * sh->dv; i++) {
                            num += ((double)out[i] - ref[i]) * ((double)out[i] - ref[i]);
                            den += ref[i] * ref[i];
                        }
                        if (!(num / den <= 1e-10)) {
                            printf("%-8s %-6s %6lld %5lld INVALID: nmse %.3g\n", shapes[si].name,
                                   lay, (long long)live, (long long)cp[c], num / den);
                            valid[c] = 0;
                        }
                        memcpy(first, out, (size_t)sh->n_q_heads * sh->dv * sizeof(float));
                    } else if (memcmp(first, out, (size_t)sh->n_q_heads * sh->dv * sizeof(float))) {
                        printf("%-8s %-6s %6lld %5lld INVALID: the repeat differs\n",
                               shapes[si].name, lay, (long long)live, (long long)cp[c]);
                        valid[c] = 0;
                    }
                }
                /* both contexts (all threads, one) at one P: the same bits */
                const size_t ob = (size_t)sh->n_q_heads * sh->dv * sizeof(float);
                bits[c] = alloc64(ob);
                memcpy(bits[c], first, ob);
                for (int e = 0; e < c && valid[c]; e++)
                    if (valid[e] && cp[e] == cp[c] && memcmp(bits[e], bits[c], ob)) {
                        printf("%-8s %-6s %6lld %5lld INVALID: bits differ between %lld and %lld "
                               "threads\n", shapes[si].name, lay, (long long)live,
                               (long long)cp[c], (long long)gem_decode_ctx_threads(ctx[cx[e]]),
                               (long long)gem_decode_ctx_threads(ctx[cx[c]]));
                        valid[c] = 0;
                    }
                failed |= !valid[c];
            }
            for (int c = 0; c < nc; c++)
                free(bits[c]);
            for (int cold = 0; cold < 2; cold++) {
                double *t = calloc((size_t)nc * 2 * rounds, sizeof(double));
                int turn = 0;
                for (int r = 0; r < rounds; r++)
                    for (int pass = 0; pass < 2; pass++)
                        for (int jj = 0; jj < nc; jj++) {
                            const int c = pass == 0 ? jj : nc - 1 - jj;
                            if (!valid[c])
                                continue;
                            const gem_decode_config cfg = {GEM_ROUTE_FUSED, cp[c], 4};
                            /* the median call of `calls` back-to-back ones */
                            double dt[256];
                            const int nk = calls < 256 ? calls : 256;
                            for (int i = 0; i < nk; i++) {
                                const int cc = cold ? turn++ % copies : 0;
                                view = view_of(sh, k[cc], v[cc], live, tm);
                                const double t0 = now_s();
                                (void)gem_decode(ctx[cx[c]], sh, q, &view, out, ws, ws_bytes, &cfg,
                                                 NULL);
                                dt[i] = now_s() - t0;
                            }
                            qsort(dt, (size_t)nk, sizeof dt[0], cmp_d);
                            t[(size_t)c * 2 * rounds + 2 * r + pass] = dt[nk / 2];
                        }
                for (int c = 0; c < nc; c++) {
                    if (!valid[c])
                        continue;
                    double *tc = t + (size_t)c * 2 * rounds;
                    qsort(tc, (size_t)2 * rounds, sizeof(double), cmp_d);
                    const double med = 0.5 * (tc[rounds - 1] + tc[rounds]);
                    printf("%-8s %-6s %6lld %5lld %-5s %7lld %10.1f %10.1f %10.1f %8.1f\n",
                           shapes[si].name, lay, (long long)live, (long long)cp[c],
                           cold ? "cold" : "hot",
                           (long long)gem_decode_ctx_threads(ctx[cx[c]]), 1e6 * tc[0], 1e6 * med,
                           1e6 * tc[2 * rounds - 1], kv_bytes / med / 1e9);
                }
                free(t);
            }
            for (int c = 0; c < copies; c++) {
                free(k[c]);
                free(v[c]);
            }
            free(k);
            free(v);
            free(ws);
            free(q);
            free(out);
            free(first);
            free(ref);
        }
    }
    gem_decode_ctx_destroy(ctx[0]);
    gem_decode_ctx_destroy(ctx[1]);
    return failed;
}
