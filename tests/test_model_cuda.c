/*
 * The Gemma 4 decoder on the GPU against the one on the CPU, on the synthetic
 * tiny model (both full-layer routes, every KV type, K rebuilt from V), and on the tiny
 * model in Q4_0, Q8_0 and BF16 with a hidden size of 2,176 and in the Q4_K_M mix (Q4_K and
 * Q6_K matrices) with 2,304 (every product in tiles; the norm kernels in three blocks, writing
 * the products' scratch):
 *   - the same greedy tokens (12) and last-position logits within 1e-4 (F32
 *     caches); BF16 / F16 caches: logits within the bound their rounding allows;
 *   - the same bits on a repeat, and after gem_session_copy / gem_session_fill_repeat
 *     continue as on the CPU;
 *   - the greedy tokens of gem_session_eval_argmax (the argmax on the device) are those of
 *     the logits, on the CPU and on the GPU;
 *   - gem_session_greedy gives gem_session_eval_argmax's tokens, position and cache bit for
 *     bit, stops where its callback asks and goes on from there, on every configuration
 *     (tgreedy.h);
 *   - weights generated on the device from a seed: finite logits, the same bits
 *     for the same seed, others for another seed;
 *   - bad calls: a CUDA session before gem_model_upload (GEM_ERR_STATE), threads
 *     on CUDA (GEM_ERR_PARAM), a second upload (GEM_ERR_STATE), sessions of two
 *     backends in one copy (GEM_ERR_PARAM).
 * Without a GPU (or CUDA in the build) the uploads answer GEM_ERR_NO_DEVICE and
 * the test says the GPU part did not run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gem/model.h"
#include "tcheck.h"
#include "tgreedy.h"

#define N_PROMPT 24
#define STEPS 12
#define CAP 64

static const int32_t prompt[N_PROMPT] = {2,   317, 362, 346, 350, 338, 332, 340,
                                         265, 331, 347, 447, 343, 265, 335, 344,
                                         353, 265, 339, 413, 448, 446, 366, 384};

static gem_session *open_session(const gem_model *m, gem_backend b, gem_route route, gem_dtype kt,
                                 int k_from_v)
{
    gem_session *s = NULL;
    char err[256];
    gem_session_opts o = {b == GEM_BACKEND_CPU ? 2 : 0, CAP, route, 0, 0, kt, k_from_v, b};
    gem_status st = gem_session_create(m, &o, &s, err, sizeof err);
    if (st != GEM_OK)
        fprintf(stderr, "     session: %s\n", err);
    TCHECK_STATUS(st, GEM_OK);
    return s;
}

static int32_t argmax(const float *x, int64_t n)
{
    int32_t best = 0;
    for (int64_t i = 1; i < n; i++)
        best = x[i] > x[best] ? (int32_t)i : best;
    return best;
}

/* The prompt, then STEPS greedy tokens: tokens (STEPS), the logits at the prompt's end
 * (first, n_vocab). */
static gem_status greedy(gem_session *s, int64_t V, int32_t *tokens, float *first, float *tmp)
{
    gem_status st = GEM_OK;
    for (int64_t i = 0; st == GEM_OK && i < N_PROMPT; i++)
        st = gem_session_eval(s, prompt[i], i + 1 == N_PROMPT ? first : NULL);
    if (st != GEM_OK)
        return st;
    memcpy(tmp, first, (size_t)V * sizeof *tmp);
    for (int64_t k = 0; st == GEM_OK && k < STEPS; k++) {
        tokens[k] = argmax(tmp, V);
        if (k + 1 < STEPS)
            st = gem_session_eval(s, tokens[k], tmp);
    }
    return st;
}

/* As greedy, the generated tokens from gem_session_eval_argmax (the argmax on the device). */
static gem_status greedy_argmax(gem_session *s, int32_t *tokens)
{
    gem_status st = GEM_OK;
    for (int64_t i = 0; st == GEM_OK && i + 1 < N_PROMPT; i++)
        st = gem_session_eval(s, prompt[i], NULL);
    if (st == GEM_OK)
        st = gem_session_eval_argmax(s, prompt[N_PROMPT - 1], &tokens[0]);
    for (int64_t k = 1; st == GEM_OK && k < STEPS; k++)
        st = gem_session_eval_argmax(s, tokens[k - 1], &tokens[k]);
    return st;
}

static double max_abs_diff(const float *a, const float *b, int64_t n)
{
    double w = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        w = d > w || d != d ? d : w;
    }
    return w;
}

static int all_finite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

/* CPU and CUDA on one configuration: same greedy tokens, logits within tol, and the CUDA
 * side repeat-identical. */
static void agree(const gem_model *m, gem_route route, gem_dtype kt, int k_from_v, double tol)
{
    const int64_t V = gem_model_hparams(m)->n_vocab;
    float *a = malloc((size_t)V * 4), *b = malloc((size_t)V * 4), *c = malloc((size_t)V * 4),
          *t = malloc((size_t)V * 4);
    int32_t ta[STEPS], tb[STEPS], tc[STEPS];
    gem_session *cpu = open_session(m, GEM_BACKEND_CPU, route, kt, k_from_v);
    gem_session *gpu = open_session(m, GEM_BACKEND_CUDA, route, kt, k_from_v);
    if (a && b && c && t && cpu && gpu) {
        TCHECK_STATUS(greedy(cpu, V, ta, a, t), GEM_OK);
        TCHECK_STATUS(greedy(gpu, V, tb, b, t), GEM_OK);
        const double d = max_abs_diff(a, b, V);
        if (!TCHECK(d <= tol))
            fprintf(stderr, "     %s route, %s caches%s: CPU vs CUDA logits differ by %.3g > %.3g\n",
                    gem_route_name(route), gem_dtype_name(kt), k_from_v ? ", K from V" : "", d,
                    tol);
        if (kt == GEM_DTYPE_F32) /* 16-bit rows may round apart; their logits are bounded */
            TCHECK(memcmp(ta, tb, sizeof ta) == 0);
        /* the device repeats itself bit for bit */
        gem_session_reset(gpu);
        TCHECK_STATUS(greedy(gpu, V, tc, c, t), GEM_OK);
        TCHECK(memcmp(b, c, (size_t)V * 4) == 0);
        TCHECK(memcmp(tb, tc, sizeof tb) == 0);
        /* the argmax on the device gives the logits' greedy tokens; so does the CPU's */
        int32_t td[STEPS];
        gem_session_reset(gpu);
        TCHECK_STATUS(greedy_argmax(gpu, td), GEM_OK);
        TCHECK(memcmp(tb, td, sizeof tb) == 0);
        gem_session_reset(cpu);
        TCHECK_STATUS(greedy_argmax(cpu, td), GEM_OK);
        TCHECK(memcmp(ta, td, sizeof ta) == 0);
        TCHECK_STATUS(gem_session_eval_argmax(gpu, prompt[0], NULL), GEM_ERR_NULL);
        /* greedy decoding in one call */
        tgreedy_check(gpu, prompt, N_PROMPT, STEPS, V);
        printf("test_model_cuda: %-8s %-4s%s  CPU vs CUDA max |logit diff| %.3g, greedy %s\n",
               gem_route_name(route), gem_dtype_name(kt), k_from_v ? " K from V" : "         ", d,
               memcmp(ta, tb, sizeof ta) ? "DIFFERS" : "equal");
    }
    gem_session_free(cpu);
    gem_session_free(gpu);
    free(a);
    free(b);
    free(c);
    free(t);
}

/* Copy and fill on the device continue as on the CPU. */
static void copy_and_fill(const gem_model *m)
{
    const int64_t V = gem_model_hparams(m)->n_vocab;
    float *a = malloc((size_t)V * 4), *b = malloc((size_t)V * 4), *c = malloc((size_t)V * 4);
    gem_session *g1 = open_session(m, GEM_BACKEND_CUDA, GEM_ROUTE_FUSED, GEM_DTYPE_F32, 0);
    gem_session *g2 = open_session(m, GEM_BACKEND_CUDA, GEM_ROUTE_FUSED, GEM_DTYPE_F32, 0);
    gem_session *h = open_session(m, GEM_BACKEND_CPU, GEM_ROUTE_FUSED, GEM_DTYPE_F32, 0);
    if (a && b && c && g1 && g2 && h) {
        /* past the ring (window 8) so the copy carries wrapped sliding rows */
        for (int64_t i = 0; i < 12; i++) {
            TCHECK_STATUS(gem_session_eval(g1, prompt[i], NULL), GEM_OK);
            TCHECK_STATUS(gem_session_eval(h, prompt[i], NULL), GEM_OK);
        }
        TCHECK_STATUS(gem_session_copy(g2, g1), GEM_OK);
        TCHECK_EQ_I64(gem_session_pos(g2), 12);
        TCHECK_STATUS(gem_session_copy(g2, h), GEM_ERR_PARAM); /* another backend */
        /* g2 timed whole alone (two events a token): the same logits, a total, no stages */
        TCHECK_STATUS(gem_session_time_stages(g2, 0), GEM_OK);
        TCHECK_STATUS(gem_session_eval(g1, prompt[12], a), GEM_OK);
        TCHECK_STATUS(gem_session_eval(g2, prompt[12], b), GEM_OK);
        TCHECK(memcmp(a, b, (size_t)V * 4) == 0);
        gem_stage_times t;
        gem_session_times(g2, &t);
        TCHECK(t.tokens == 1 && t.total > 0 && t.proj == 0 && t.mlp == 0 && t.attn_full == 0);
        gem_session_times(g1, &t);
        TCHECK(t.tokens == 13 && t.proj > 0 && t.mlp > 0 && t.total >= t.proj + t.mlp);
        /* fill_repeat: rows 13..39 repeat rows 0..12 on both backends */
        TCHECK_STATUS(gem_session_eval(h, prompt[12], c), GEM_OK);
        TCHECK_STATUS(gem_session_fill_repeat(g1, 40), GEM_OK);
        TCHECK_STATUS(gem_session_fill_repeat(h, 40), GEM_OK);
        TCHECK_STATUS(gem_session_fill_repeat(g1, 39), GEM_ERR_RANGE);
        TCHECK_STATUS(gem_session_eval(g1, prompt[13], a), GEM_OK);
        TCHECK_STATUS(gem_session_eval(h, prompt[13], c), GEM_OK);
        TCHECK(max_abs_diff(a, c, V) <= 1e-4);
        TCHECK(argmax(a, V) == argmax(c, V));
    }
    gem_session_free(g1);
    gem_session_free(g2);
    gem_session_free(h);
    free(a);
    free(b);
    free(c);
}

/* Seeded device weights: finite, reproducible, seed-dependent. */
static void random_weights(const char *path)
{
    gem_model *m1 = NULL, *m2 = NULL, *m3 = NULL;
    char err[256];
    TCHECK_STATUS(gem_model_load(path, &m1, err, sizeof err), GEM_OK);
    TCHECK_STATUS(gem_model_load(path, &m2, err, sizeof err), GEM_OK);
    TCHECK_STATUS(gem_model_load(path, &m3, err, sizeof err), GEM_OK);
    if (!m1 || !m2 || !m3)
        goto out;
    TCHECK_STATUS(gem_model_upload(m1, 7, err, sizeof err), GEM_OK);
    TCHECK_STATUS(gem_model_upload(m2, 7, err, sizeof err), GEM_OK);
    TCHECK_STATUS(gem_model_upload(m3, 8, err, sizeof err), GEM_OK);
    TCHECK_STATUS(gem_model_upload(m3, 8, err, sizeof err), GEM_ERR_STATE);
    TCHECK(gem_model_device_seed(m1) == 7 && gem_model_device_bytes(m1) > 0);
    {
        const int64_t V = gem_model_hparams(m1)->n_vocab;
        float *l[3];
        gem_model *ms[3] = {m1, m2, m3};
        for (int k = 0; k < 3; k++) {
            l[k] = malloc((size_t)V * 4);
            gem_session *s = open_session(ms[k], GEM_BACKEND_CUDA, GEM_ROUTE_FUSED,
                                          GEM_DTYPE_F32, 0);
            for (int64_t i = 0; s && l[k] && i < N_PROMPT; i++)
                TCHECK_STATUS(gem_session_eval(s, prompt[i], i + 1 == N_PROMPT ? l[k] : NULL),
                              GEM_OK);
            gem_session_free(s);
        }
        if (l[0] && l[1] && l[2]) {
            TCHECK(all_finite(l[0], V) && all_finite(l[2], V));
            TCHECK(memcmp(l[0], l[1], (size_t)V * 4) == 0);
            TCHECK(memcmp(l[0], l[2], (size_t)V * 4) != 0);
        }
        for (int k = 0; k < 3; k++)
            free(l[k]);
    }
out:
    gem_model_free(m1);
    gem_model_free(m2);
    gem_model_free(m3);
}

/* A model whose products all tile (type: Q4_0, Q8_0, BF16, or GEM_SYNTH_Q4_K_M) and whose
 * hidden size n_embd spans three slices of the norm kernels (2,176 = 2 x 1,024 + 128, 2,304 =
 * 2 x 1,024 + 256: the last slice partial): the norm kernels, one block a slice, write the
 * products' x scratch and the products run prepared. Agreement as above. */
static void tiled_wide(int32_t type, int64_t n_embd)
{
    const char *path = "test_model_cuda_wide_tmp.gguf";
    gem_synth_spec spec;
    char err[256];
    TCHECK_STATUS(gem_synth_preset("tiny", &spec), GEM_OK);
    spec.type = type;
    spec.n_embd = n_embd;
    spec.n_ff = 512;
    spec.n_vocab = 1024;
    TCHECK_STATUS(gem_synth_write(&spec, path, err, sizeof err), GEM_OK);
    gem_model *m = NULL;
    TCHECK_STATUS(gem_model_load(path, &m, err, sizeof err), GEM_OK);
    if (m) {
        const gem_status up = gem_model_upload(m, 0, err, sizeof err);
        TCHECK_STATUS(up, GEM_OK);
        if (up == GEM_OK) {
            agree(m, GEM_ROUTE_FUSED, GEM_DTYPE_F32, 0, 1e-4);
            agree(m, GEM_ROUTE_BASELINE, GEM_DTYPE_F32, 0, 1e-4);
        }
    }
    gem_model_free(m);
    remove(path);
}

int main(void)
{
    const char *path = "test_model_cuda_tmp.gguf";
    gem_synth_spec spec;
    char err[256];
    TCHECK_STATUS(gem_synth_preset("tiny", &spec), GEM_OK);
    TCHECK_STATUS(gem_synth_write(&spec, path, err, sizeof err), GEM_OK);
    gem_model *m = NULL;
    TCHECK_STATUS(gem_model_load(path, &m, err, sizeof err), GEM_OK);
    if (!m)
        return tcheck_summary("test_model_cuda");
    /* a CUDA session needs the weights on the device first */
    gem_session *s = (gem_session *)1;
    gem_session_opts o = {0, CAP, GEM_ROUTE_FUSED, 0, 0, GEM_DTYPE_F32, 0, GEM_BACKEND_CUDA};
    TCHECK_STATUS(gem_session_create(m, &o, &s, err, sizeof err), GEM_ERR_STATE);
    TCHECK(s == NULL);
    o.backend = (gem_backend)7;
    TCHECK_STATUS(gem_session_create(m, &o, &s, err, sizeof err), GEM_ERR_PARAM);
    const gem_status up = gem_model_upload(m, 0, err, sizeof err);
    if (up == GEM_ERR_NO_DEVICE) {
        TCHECK(gem_model_device_bytes(m) == 0);
        printf("test_model_cuda: no CUDA device here (%s); the GPU checks did not run\n", err);
        gem_model_free(m);
        remove(path);
        return tcheck_summary("test_model_cuda");
    }
    TCHECK_STATUS(up, GEM_OK);
    o.backend = GEM_BACKEND_CUDA;
    o.threads = 2;
    TCHECK_STATUS(gem_session_create(m, &o, &s, err, sizeof err), GEM_ERR_PARAM);
    if (up == GEM_OK) {
        printf("test_model_cuda: %s\n", err[0] ? err : "weights on the device");
        const gem_dtype kts[3] = {GEM_DTYPE_F32, GEM_DTYPE_BF16, GEM_DTYPE_F16};
        /* F32 caches: 1e-4. 16-bit caches: the CUDA and CPU rows round the same F32 values,
         * which differ by float rounding, so a row can land one 16-bit step apart; bounds
         * of 16x the F32 one for F16 and 128x for BF16 (their steps are 2^-11 and 2^-8). */
        const double tols[3] = {1e-4, 1.28e-2, 1.6e-3};
        for (int k = 0; k < 3; k++) {
            agree(m, GEM_ROUTE_FUSED, kts[k], 0, tols[k]);
            agree(m, GEM_ROUTE_FUSED, kts[k], 1, tols[k]);
        }
        /* the baseline reads every cache type the sessions take; a fused 16-bit session can
         * be switched to it and back */
        for (int k = 0; k < 3; k++)
            agree(m, GEM_ROUTE_BASELINE, kts[k], 0, tols[k]);
        {
            gem_session_opts b16 = {0, CAP, GEM_ROUTE_FUSED, 0, 0, GEM_DTYPE_BF16, 0,
                                    GEM_BACKEND_CUDA};
            gem_session *sb = NULL;
            TCHECK_STATUS(gem_session_create(m, &b16, &sb, err, sizeof err), GEM_OK);
            TCHECK_STATUS(gem_session_set_route(sb, GEM_ROUTE_BASELINE), GEM_OK);
            TCHECK_STATUS(gem_session_set_route(sb, GEM_ROUTE_FUSED), GEM_OK);
            gem_session_free(sb);
        }
        copy_and_fill(m);
        random_weights(path);
        tiled_wide(GEM_GGUF_Q4_0, 2176);
        tiled_wide(GEM_GGUF_Q8_0, 2176);
        tiled_wide(GEM_GGUF_BF16, 2176);
        tiled_wide(GEM_SYNTH_Q4_K_M, 2304); /* Q4_K and Q6_K tiles */
    }
    gem_model_free(m);
    remove(path);
    return tcheck_summary("test_model_cuda");
}
