/*
 * The Gemma 4 decoder's own properties on the synthetic tiny model:
 *   - logits are the same bits for 1, 2 and 3 threads, and on a repeat, also on a model whose
 *     products are large enough for the pool (the activation and the per-head norms inside
 *     the products' items, x's digits computed by the items);
 *   - the first CPU session packs the quantized matrices once (the integer products), and
 *     models of Q4_0, Q4_K, Q6_K and mixed weights give thread-identical, finite logits
 *     on which both routes agree;
 *   - both full-attention routes agree closely (and exactly on the argmax);
 *   - gem_session_copy continues bit for bit where the source stands, also after
 *     the sliding layers' ring has wrapped;
 *   - the KV bytes read per step grow with the position in full layers and stop
 *     at the window in sliding ones;
 *   - BF16 and F16 caches: thread- and repeat-identical, both routes agree
 *     closely, the logits stay near the F32 ones, half the KV bytes, and a copy
 *     continues bit for bit;
 *   - K rebuilt from V (k_from_v): the same greedy tokens as the explicit K and V
 *     caches and logits within 1e-4 (F32) or a measured bound (BF16, F16), the
 *     full layers' cache bytes exactly halved, thread-identical, copies and fills
 *     that handle the missing K cache, and the baseline route refused;
 *   - the q4_k_m mix has llama.cpp's Q4_K_M composition on 60 layers in the 31B pattern
 *     (Q6_K head, Q6_K attn_v and ffn_down on the written-out layers, Q4_K elsewhere,
 *     general.file_type 15), rows off the 256 block fall back to Q8_0, and a tiny q4_k_m
 *     model runs;
 *   - the hyperparameters and shapes come from the metadata, and a file whose
 *     metadata disagrees with a tensor's shape is refused with one line;
 *   - gem_session_greedy gives gem_session_eval_argmax's tokens, position and cache, stops
 *     where its callback asks, and goes on from there (tgreedy.h), on F32 caches and on BF16
 *     ones that rebuild K from V, the sliding rings wrapped;
 *   - bad calls answer a status.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gem/model.h"
#include "tcheck.h"
#include "tgreedy.h"

#define N_PROMPT 24

static const int32_t prompt[N_PROMPT] = {2,   317, 362, 346, 350, 338, 332, 340,
                                         265, 331, 347, 447, 343, 265, 335, 344,
                                         353, 265, 339, 413, 448, 446, 366, 384};

/* Runs the prompt on a new session with caches of type kt; logits (n_vocab) of the last
 * position. */
static gem_status run_kv(const gem_model *m, int64_t threads, gem_route route, gem_dtype kt,
                         const int32_t *ids, int64_t n, float *logits)
{
    gem_session *s = NULL;
    char err[256];
    gem_session_opts o = {threads, 64, route, 0, 0, kt, 0, GEM_BACKEND_CPU};
    gem_status st = gem_session_create(m, &o, &s, err, sizeof err);
    for (int64_t i = 0; st == GEM_OK && i < n; i++)
        st = gem_session_eval(s, ids[i], i + 1 == n ? logits : NULL);
    gem_session_free(s);
    return st;
}

static gem_status run(const gem_model *m, int64_t threads, gem_route route, const int32_t *ids,
                      int64_t n, float *logits)
{
    return run_kv(m, threads, route, GEM_DTYPE_F32, ids, n, logits);
}

/* The prompt, then `steps` greedy tokens on a new fused-route session with caches of type kt,
 * K rebuilt from V or not: tokens (steps), the logits at the last prompt position (first) and
 * at the last step (last), each (n_vocab). */
static gem_status run_greedy(const gem_model *m, int64_t threads, gem_dtype kt, int k_from_v,
                             int64_t steps, int32_t *tokens, float *first, float *last)
{
    gem_session *s = NULL;
    char err[256];
    const int64_t V = gem_model_hparams(m)->n_vocab;
    gem_session_opts o = {threads, 64, GEM_ROUTE_FUSED, 0, 0, kt, k_from_v, GEM_BACKEND_CPU};
    gem_status st = gem_session_create(m, &o, &s, err, sizeof err);
    for (int64_t i = 0; st == GEM_OK && i < N_PROMPT; i++)
        st = gem_session_eval(s, prompt[i], i + 1 == N_PROMPT ? first : NULL);
    if (st == GEM_OK)
        memcpy(last, first, (size_t)V * sizeof *last);
    for (int64_t k = 0; st == GEM_OK && k < steps; k++) {
        int32_t best = 0;
        for (int64_t i = 1; i < V; i++)
            best = last[i] > last[best] ? (int32_t)i : best;
        tokens[k] = best;
        if (k + 1 < steps)
            st = gem_session_eval(s, best, last);
    }
    gem_session_free(s);
    return st;
}

static double max_abs_diff(const float *a, const float *b, int64_t n)
{
    double w = 0;
    for (int64_t i = 0; i < n; i++)
        w = fmax(w, fabs((double)a[i] - b[i]));
    return w;
}

static int fill_zero(void *user, int64_t index, void *dst, size_t bytes)
{
    (void)user;
    (void)index;
    memset(dst, 0, bytes);
    return 0;
}

/* The element type of tensor `name` in g, or -1 when g has no such tensor. */
static int64_t tensor_type(const gem_gguf *g, const char *name)
{
    const gem_gguf_tensor *t = gem_gguf_find_tensor(g, name);
    return t ? (int64_t)t->type : -1;
}

/* Checks that tensor blk.<layer>.<suffix> of g has type `want` (-1: is absent). */
static void check_type(const gem_gguf *g, int64_t layer, const char *suffix, int64_t want)
{
    char name[GEM_GGUF_MAX_NAME];
    snprintf(name, sizeof name, "blk.%lld.%s", (long long)layer, suffix);
    const int64_t got = tensor_type(g, name);
    if (!TCHECK(got == want))
        fprintf(stderr, "     %s: type %lld, expected %lld\n", name, (long long)got,
                (long long)want);
}

static int listed(const int *list, size_t n, int64_t v)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == v)
            return 1;
    return 0;
}

/* The q4_k_m mix on the diff preset's 60 layers (every sixth full, K = V there: 50 attn_v).
 * The Q6_K layers are written out from llama.cpp's use_more_bits(i, n) = i < n/8 ||
 * i >= 7n/8 || (i - n/8) % 3 == 2: ffn_down over n = 60 layers (0-6, every third from 9 to
 * 51, 52-59); attn_v over the n = 50 layers that have one, i counting them alone (0-5,
 * every third from 8 to 41, 43-49), which are layers 0-4, 6, 9, ..., 58. With hidden 256
 * every matrix row fits Q4_K's block; with the preset's hidden 64 the matrices whose rows
 * are the hidden size (the embedding, q, k, v, gate, up) fall back to Q8_0. */
static void check_q4_k_m(int64_t n_embd)
{
    static const int down6[] = {0,  1,  2,  3,  4,  5,  6,  9,  12, 15, 18, 21, 24, 27, 30,
                                33, 36, 39, 42, 45, 48, 51, 52, 53, 54, 55, 56, 57, 58, 59};
    static const int v6[] = {0,  1,  2,  3,  4,  6,  9,  13, 16, 20, 24, 27, 31,
                             34, 38, 42, 45, 49, 51, 52, 54, 55, 56, 57, 58};
    const size_t n_down6 = sizeof down6 / sizeof down6[0], n_v6 = sizeof v6 / sizeof v6[0];
    const char *path = "test_model_q4km_tmp.gguf";
    gem_synth_spec qs;
    char err[256];
    TCHECK_STATUS(gem_synth_preset("diff", &qs), GEM_OK);
    qs.type = GEM_SYNTH_Q4_K_M;
    qs.n_embd = n_embd;
    qs.no_matrices = 1; /* the types are in the header; no weights needed */
    TCHECK_STATUS(gem_synth_write(&qs, path, err, sizeof err), GEM_OK);
    gem_gguf *g = NULL;
    TCHECK_STATUS(gem_gguf_open(path, &g, err, sizeof err), GEM_OK);
    if (!g)
        return;
    const int fits = n_embd % 256 == 0;
    const int64_t q4k = GEM_GGUF_Q4_K, q6k = GEM_GGUF_Q6_K;
    const int64_t hid4 = fits ? q4k : GEM_GGUF_Q8_0, hid6 = fits ? q6k : GEM_GGUF_Q8_0;
    int64_t ft = -1;
    TCHECK_STATUS(gem_gguf_get_i64(g, "general.file_type", &ft, err, sizeof err), GEM_OK);
    TCHECK_EQ_I64(ft, 15);
    TCHECK_EQ_I64(tensor_type(g, "token_embd.weight"), hid6); /* the tied head */
    TCHECK_EQ_I64(tensor_type(g, "output.weight"), -1);
    TCHECK_EQ_I64(tensor_type(g, "output_norm.weight"), GEM_GGUF_F32);
    int64_t n_v = 0, v_q6 = 0, down_q6 = 0;
    for (int64_t i = 0; i < 60; i++) {
        const int full = (i + 1) % 6 == 0;
        check_type(g, i, "attn_q.weight", hid4);
        check_type(g, i, "attn_k.weight", hid4);
        check_type(g, i, "attn_v.weight", full ? -1 : listed(v6, n_v6, i) ? hid6 : hid4);
        check_type(g, i, "attn_output.weight", q4k);
        check_type(g, i, "ffn_gate.weight", hid4);
        check_type(g, i, "ffn_up.weight", hid4);
        check_type(g, i, "ffn_down.weight", listed(down6, n_down6, i) ? q6k : q4k);
        check_type(g, i, "attn_norm.weight", GEM_GGUF_F32);
        check_type(g, i, "ffn_norm.weight", GEM_GGUF_F32);
        char name[GEM_GGUF_MAX_NAME];
        snprintf(name, sizeof name, "blk.%lld.attn_v.weight", (long long)i);
        n_v += tensor_type(g, name) >= 0;
        v_q6 += tensor_type(g, name) == hid6;
        snprintf(name, sizeof name, "blk.%lld.ffn_down.weight", (long long)i);
        down_q6 += tensor_type(g, name) == q6k;
    }
    TCHECK_EQ_I64(n_v, 50);
    if (fits)
        TCHECK_EQ_I64(v_q6, 25); /* half the attn_v */
    TCHECK_EQ_I64(down_q6, 30);  /* half the ffn_down */
    gem_gguf_close(g);
    remove(path);
}

static int argmax(const float *x, int64_t n)
{
    int best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = (int)i;
    return best;
}

int main(void)
{
    const char *path = "test_model_tmp.gguf";
    gem_synth_spec spec;
    char err[256];
    TCHECK_STATUS(gem_synth_preset("tiny", &spec), GEM_OK);
    TCHECK_STATUS(gem_synth_write(&spec, path, err, sizeof err), GEM_OK);
    gem_model *m = NULL;
    TCHECK_STATUS(gem_model_load(path, &m, err, sizeof err), GEM_OK);
    if (!m)
        return tcheck_summary("test_model");
    const gem_hparams *hp = gem_model_hparams(m);
    TCHECK_EQ_I64(hp->n_layers, 6);
    TCHECK_EQ_I64(hp->n_full_layers, 2);
    TCHECK_EQ_I64(hp->window, 8);
    TCHECK_EQ_I64(hp->head_dim_full, 512);
    TCHECK_EQ_I64(hp->n_rot_full, 512);
    TCHECK(hp->rope_base_full == 1e6 && hp->rope_base_swa == 1e4 && hp->softcap == 30.0);
    const gem_layer *full = gem_model_layer(m, 2), *swa = gem_model_layer(m, 0);
    TCHECK(full && !full->swa && full->k_eq_v && full->n_head == 32 && full->n_head_kv == 4);
    TCHECK(swa && swa->swa && !swa->k_eq_v && swa->n_head_kv == 8 && swa->head_dim == 64);
    TCHECK(full && full->out_scale != 1.0f && full->attn_norm[0] != 1.0f);
    TCHECK(gem_model_layer(m, 6) == NULL);

    const int64_t V = hp->n_vocab;
    float *a = malloc((size_t)V * 4), *b = malloc((size_t)V * 4), *c = malloc((size_t)V * 4);
    /* The first CPU session packs the Q8_0 matrices for the integer products, once. */
    TCHECK(gem_model_cpu_packed_bytes(m) == 0);
    /* greedy decoding in one call (the prompt wraps the sliding rings: window 8) */
    for (int kind = 0; kind < 2; kind++) {
        gem_session *gs = NULL;
        gem_session_opts go = {2, 64, GEM_ROUTE_FUSED, 0, 0,
                               kind ? GEM_DTYPE_BF16 : GEM_DTYPE_F32, kind, GEM_BACKEND_CPU};
        TCHECK_STATUS(gem_session_create(m, &go, &gs, err, sizeof err), GEM_OK);
        if (gs)
            tgreedy_check(gs, prompt, N_PROMPT, 12, hp->n_vocab);
        gem_session_free(gs);
    }
    /* Same bits for any thread count and on a repeat. */
    TCHECK_STATUS(run(m, 1, GEM_ROUTE_FUSED, prompt, N_PROMPT, a), GEM_OK);
    const size_t packed = gem_model_cpu_packed_bytes(m);
    TCHECK(packed > 0 && packed < gem_model_weight_bytes_per_token(m));
    TCHECK_STATUS(run(m, 2, GEM_ROUTE_FUSED, prompt, N_PROMPT, b), GEM_OK);
    TCHECK(memcmp(a, b, (size_t)V * 4) == 0);
    TCHECK_STATUS(run(m, 3, GEM_ROUTE_FUSED, prompt, N_PROMPT, b), GEM_OK);
    TCHECK(memcmp(a, b, (size_t)V * 4) == 0);
    TCHECK_STATUS(run(m, 2, GEM_ROUTE_FUSED, prompt, N_PROMPT, b), GEM_OK);
    TCHECK(memcmp(a, b, (size_t)V * 4) == 0);
    TCHECK(gem_model_cpu_packed_bytes(m) == packed); /* not again */
    /* The other packed types (and all types at once): the same bits for 1 and 3 threads, the
     * routes within float rounding, every logit finite. */
    {
        const int32_t types[4] = {GEM_GGUF_Q4_0, GEM_GGUF_Q4_K, GEM_GGUF_Q6_K, GEM_SYNTH_MIXED};
        for (int k = 0; k < 4; k++) {
            gem_synth_spec ts = spec;
            ts.type = types[k];
            const char *tpath = "test_model_types_tmp.gguf";
            gem_model *tm = NULL;
            TCHECK_STATUS(gem_synth_write(&ts, tpath, err, sizeof err), GEM_OK);
            TCHECK_STATUS(gem_model_load(tpath, &tm, err, sizeof err), GEM_OK);
            if (!tm)
                continue;
            TCHECK_STATUS(run(tm, 1, GEM_ROUTE_FUSED, prompt, N_PROMPT, b), GEM_OK);
            TCHECK(gem_model_cpu_packed_bytes(tm) > 0);
            TCHECK_STATUS(run(tm, 3, GEM_ROUTE_FUSED, prompt, N_PROMPT, c), GEM_OK);
            TCHECK(memcmp(b, c, (size_t)V * 4) == 0);
            TCHECK_STATUS(run(tm, 2, GEM_ROUTE_BASELINE, prompt, N_PROMPT, c), GEM_OK);
            double tw = 0;
            int finite = 1;
            for (int64_t i = 0; i < V; i++) {
                tw = fmax(tw, fabs((double)b[i] - c[i]));
                finite &= isfinite(b[i]) != 0;
            }
            if (!TCHECK(tw < 1e-4 && finite))
                fprintf(stderr, "     type %d: routes differ by %g\n", (int)types[k], tw);
            gem_model_free(tm);
            remove(tpath);
        }
    }
    /* The q4_k_m mix: llama.cpp's Q4_K_M composition, and its fallback; an unknown type is
     * refused; a tiny q4_k_m model (hidden 256, so that Q4_K and Q6_K fit) loads and gives
     * thread-identical, finite logits. */
    check_q4_k_m(256);
    check_q4_k_m(64);
    {
        gem_synth_spec bs = spec;
        bs.type = -3;
        TCHECK_STATUS(gem_synth_write(&bs, "test_model_bad_tmp.gguf", err, sizeof err),
                      GEM_ERR_PARAM);
        TCHECK(strstr(err, "type") != NULL);
        gem_synth_spec ts = spec;
        ts.type = GEM_SYNTH_Q4_K_M;
        ts.n_embd = 256;
        const char *tpath = "test_model_q4km_run_tmp.gguf";
        gem_model *tm = NULL;
        TCHECK_STATUS(gem_synth_write(&ts, tpath, err, sizeof err), GEM_OK);
        TCHECK_STATUS(gem_model_load(tpath, &tm, err, sizeof err), GEM_OK);
        if (tm) {
            TCHECK_STATUS(run(tm, 1, GEM_ROUTE_FUSED, prompt, N_PROMPT, b), GEM_OK);
            TCHECK_STATUS(run(tm, 3, GEM_ROUTE_FUSED, prompt, N_PROMPT, c), GEM_OK);
            TCHECK(memcmp(b, c, (size_t)V * 4) == 0);
            int finite = 1;
            for (int64_t i = 0; i < V; i++)
                finite &= isfinite(b[i]) != 0;
            TCHECK(finite);
            gem_model_free(tm);
        }
        remove(tpath);
    }
    /* Products large enough for the pool (past 256 KiB): GeGLU's activation and the per-head
     * norms then run inside the items, and o's x of 16,384 columns gets its digits from the
     * items; the same bits for 1, 2 and 3 threads, F32 and BF16 caches, K stored or rebuilt. */
    {
        gem_synth_spec ps = spec;
        ps.n_layers = 3; /* two sliding layers, then a full one */
        ps.full_every = 3;
        ps.n_embd = 512; /* full q and o 8.9 MB of Q8_0, gate, up and down 0.56 MB each */
        ps.n_ff = 1024;
        const char *ppath = "test_model_pool_tmp.gguf";
        gem_model *pm = NULL;
        TCHECK_STATUS(gem_synth_write(&ps, ppath, err, sizeof err), GEM_OK);
        TCHECK_STATUS(gem_model_load(ppath, &pm, err, sizeof err), GEM_OK);
        if (pm) {
            const int64_t PV = gem_model_hparams(pm)->n_vocab;
            float *p1 = malloc((size_t)PV * 4), *pn = malloc((size_t)PV * 4);
            float *l1 = malloc((size_t)PV * 4), *ln = malloc((size_t)PV * 4);
            int32_t t1[4], tn[4];
            TCHECK(p1 && pn && l1 && ln);
            for (int kv = 0; p1 && pn && l1 && ln && kv < 3; kv++) {
                const gem_dtype kt = kv == 1 ? GEM_DTYPE_BF16 : GEM_DTYPE_F32;
                const int kfv = kv == 2;
                TCHECK_STATUS(run_greedy(pm, 1, kt, kfv, 4, t1, p1, l1), GEM_OK);
                int finite = 1;
                for (int64_t i = 0; i < PV; i++)
                    finite &= isfinite(p1[i]) != 0;
                TCHECK(finite);
                for (int64_t th = 2; th <= 3; th++) {
                    TCHECK_STATUS(run_greedy(pm, th, kt, kfv, 4, tn, pn, ln), GEM_OK);
                    if (!TCHECK(memcmp(p1, pn, (size_t)PV * 4) == 0 &&
                                memcmp(l1, ln, (size_t)PV * 4) == 0 &&
                                memcmp(t1, tn, sizeof t1) == 0))
                        fprintf(stderr, "     pool-sized model, caches %d, %lld threads: "
                                        "differs from 1 thread\n",
                                kv, (long long)th);
                }
            }
            free(p1);
            free(pn);
            free(l1);
            free(ln);
            gem_model_free(pm);
        }
        remove(ppath);
    }
    /* The baseline route: same argmax, logits within float rounding. */
    TCHECK_STATUS(run(m, 2, GEM_ROUTE_BASELINE, prompt, N_PROMPT, c), GEM_OK);
    double worst = 0;
    for (int64_t i = 0; i < V; i++)
        worst = fmax(worst, fabs((double)a[i] - c[i]));
    TCHECK(worst < 1e-4);
    TCHECK_EQ_I64(argmax(a, V), argmax(c, V));

    /* A copy continues exactly where its source stands (after the ring wrapped). */
    gem_session *s1 = NULL, *s2 = NULL;
    gem_session_opts o = {2, 64, GEM_ROUTE_FUSED, 0, 0, GEM_DTYPE_F32, 0, GEM_BACKEND_CPU};
    TCHECK_STATUS(gem_session_create(m, &o, &s1, err, sizeof err), GEM_OK);
    TCHECK_STATUS(gem_session_create(m, &o, &s2, err, sizeof err), GEM_OK);
    for (int i = 0; i < N_PROMPT - 1; i++)
        TCHECK_STATUS(gem_session_eval(s1, prompt[i], NULL), GEM_OK);
    TCHECK_STATUS(gem_session_copy(s2, s1), GEM_OK);
    TCHECK_EQ_I64(gem_session_pos(s2), N_PROMPT - 1);
    TCHECK_STATUS(gem_session_eval(s2, prompt[N_PROMPT - 1], b), GEM_OK);
    TCHECK(memcmp(a, b, (size_t)V * 4) == 0);
    /* The greedy token without the logits: the same argmax, the same next step. */
    {
        int32_t am = -1;
        gem_session_reset(s2);
        for (int i = 0; i < N_PROMPT - 1; i++)
            TCHECK_STATUS(gem_session_eval(s2, prompt[i], NULL), GEM_OK);
        TCHECK_STATUS(gem_session_eval_argmax(s2, prompt[N_PROMPT - 1], &am), GEM_OK);
        TCHECK_EQ_I64(am, argmax(a, V));
        TCHECK_EQ_I64(gem_session_pos(s2), N_PROMPT);
        TCHECK_STATUS(gem_session_eval_argmax(s2, prompt[0], NULL), GEM_ERR_NULL);
        TCHECK_STATUS(gem_session_eval_argmax(NULL, prompt[0], &am), GEM_ERR_NULL);
        TCHECK_STATUS(gem_session_eval_argmax(s2, (int32_t)V, &am), GEM_ERR_RANGE);
    }
    /* Positions run out at max_tokens; ids outside the vocabulary are refused. */
    TCHECK_STATUS(gem_session_eval(s2, (int32_t)V, b), GEM_ERR_RANGE);
    TCHECK_STATUS(gem_session_eval(s2, -1, b), GEM_ERR_RANGE);
    gem_session_reset(s2);
    TCHECK_EQ_I64(gem_session_pos(s2), 0);
    for (int i = 0; i < 64; i++)
        gem_session_eval(s2, 4, NULL);
    TCHECK_STATUS(gem_session_eval(s2, 4, NULL), GEM_ERR_RANGE);
    /* KV bytes per step: full layers grow with the position, sliding ones stop at the window. */
    size_t k10 = gem_session_kv_bytes_at(s1, 9), k11 = gem_session_kv_bytes_at(s1, 10);
    TCHECK_EQ_I64(k11 - k10, 2 * 2 * 4 * 512 * 4); /* two full layers, K and V, 4 heads x 512 */
    TCHECK_EQ_I64(gem_session_kv_bytes_at(s1, 7) - gem_session_kv_bytes_at(s1, 6),
                  2 * 2 * 4 * 512 * 4 + 4 * 2 * 8 * 64 * 4);
    gem_stage_times t;
    gem_session_times(s1, &t);
    TCHECK(t.tokens == N_PROMPT - 1 && t.attn_full > 0 && t.attn_swa > 0 && t.proj > 0 &&
           t.mlp > 0 && t.total >= t.attn_full + t.mlp);
    /* timed whole alone: a total and a count, the stages at 0; switching resets the times */
    TCHECK_STATUS(gem_session_time_stages(s1, 2), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_session_time_stages(NULL, 0), GEM_ERR_NULL);
    TCHECK_STATUS(gem_session_time_stages(s1, 0), GEM_OK);
    gem_session_times(s1, &t);
    TCHECK(t.tokens == 0 && t.total == 0);
    TCHECK_STATUS(gem_session_eval(s1, prompt[1], NULL), GEM_OK);
    TCHECK_STATUS(gem_session_eval(s1, prompt[2], NULL), GEM_OK);
    gem_session_times(s1, &t);
    TCHECK(t.tokens == 2 && t.total > 0 && t.embed == 0 && t.norms == 0 && t.proj == 0 &&
           t.attn_swa == 0 && t.attn_full == 0 && t.mlp == 0 && t.logits == 0);
    TCHECK_STATUS(gem_session_time_stages(s1, 1), GEM_OK);
    TCHECK_STATUS(gem_session_eval(s1, prompt[3], NULL), GEM_OK);
    gem_session_times(s1, &t);
    TCHECK(t.tokens == 1 && t.proj > 0 && t.mlp > 0);
    gem_session_free(s1);
    gem_session_free(s2);

    /* The prompt is longer than the window, so the window matters: changing the
     * first prompt token after BOS changes the logits (through the full layers),
     * while the sliding layers only ever see 8 rows (checked by the byte count above). */
    int32_t other[N_PROMPT];
    memcpy(other, prompt, sizeof other);
    other[1] = 300;
    TCHECK_STATUS(run(m, 2, GEM_ROUTE_FUSED, other, N_PROMPT, b), GEM_OK);
    TCHECK(memcmp(a, b, (size_t)V * 4) != 0);

    /* 16-bit caches. The K and V rows are rounded as they enter the cache, so the logits move
     * off the F32 ones by the rounding (bounded loosely: softcap 30, 8-bit BF16 mantissa);
     * each type is thread-identical, the routes agree closely, and a copy of a 16-bit session
     * continues exactly. */
    float *d = malloc((size_t)V * 4);
    const gem_dtype halves[2] = {GEM_DTYPE_BF16, GEM_DTYPE_F16};
    for (int h = 0; h < 2 && d; h++) {
        TCHECK_STATUS(run_kv(m, 1, GEM_ROUTE_FUSED, halves[h], prompt, N_PROMPT, b), GEM_OK);
        TCHECK_STATUS(run_kv(m, 3, GEM_ROUTE_FUSED, halves[h], prompt, N_PROMPT, d), GEM_OK);
        TCHECK(memcmp(b, d, (size_t)V * 4) == 0);
        TCHECK(memcmp(a, b, (size_t)V * 4) != 0); /* the rounding reached the logits */
        TCHECK(max_abs_diff(a, b, V) < 0.5);
        TCHECK_STATUS(run_kv(m, 2, GEM_ROUTE_BASELINE, halves[h], prompt, N_PROMPT, d), GEM_OK);
        /* The routes' float-rounding differences (< 1e-4 on F32) can flip a later layer's
           16-bit rounding by one unit, so here they agree to 2e-3 (measured: 3.0e-4 BF16,
           1.0e-4 F16) and on the argmax. */
        TCHECK(max_abs_diff(b, d, V) < 2e-3);
        TCHECK_EQ_I64(argmax(b, V), argmax(d, V));
        gem_session_opts ho = {2, 64, GEM_ROUTE_FUSED, 0, 0, halves[h], 0, GEM_BACKEND_CPU};
        gem_session *h1 = NULL, *h2 = NULL, *f32 = NULL;
        TCHECK_STATUS(gem_session_create(m, &ho, &h1, err, sizeof err), GEM_OK);
        TCHECK_STATUS(gem_session_create(m, &ho, &h2, err, sizeof err), GEM_OK);
        TCHECK_STATUS(gem_session_create(m, &o, &f32, err, sizeof err), GEM_OK);
        for (int i = 0; h1 && i < N_PROMPT - 1; i++)
            TCHECK_STATUS(gem_session_eval(h1, prompt[i], NULL), GEM_OK);
        TCHECK_STATUS(gem_session_copy(f32, h1), GEM_ERR_PARAM); /* another cache type */
        TCHECK_STATUS(gem_session_copy(h2, h1), GEM_OK);
        TCHECK_STATUS(gem_session_eval(h2, prompt[N_PROMPT - 1], d), GEM_OK);
        TCHECK(memcmp(b, d, (size_t)V * 4) == 0);
        TCHECK_EQ_I64(gem_session_kv_bytes_at(h1, 10) - gem_session_kv_bytes_at(h1, 9),
                      2 * 2 * 4 * 512 * 2); /* half the F32 bytes */
        gem_session_free(h1);
        gem_session_free(h2);
        gem_session_free(f32);
    }
    free(d);

    /* K rebuilt from V. The tiny model's full layers are K = V layers with the real D512
     * geometry and partial RoPE (64 rotated pairs; the other 192 turn at frequencies ~3e-32,
     * which the rebuilt K leaves out). F32: the rebuilt K is the explicit row but for the
     * route's angle stepping (below 1e-12), so the logits agree to float rounding, bounded at
     * 1e-4 (measured: 0, the same bits, at the last prompt position and after 12 greedy
     * steps). 16-bit caches: the explicit route rounds the rotated K to the cache's type, the
     * rebuilt K rotates the rounded V in F32, so every K element differs by up to about half
     * a unit of the type (2^-9 relative for BF16, 2^-12 for F16). Measured: 1.09e-2 / 1.21e-2
     * (BF16) and 1.96e-3 / 1.25e-3 (F16) at the last prompt position / the last step, less
     * than either route's own distance from the F32 logits (BF16 2.1e-2 to 3.7e-2, F16
     * 3.6e-3 to 3.8e-3); bounded at about 4x the measured: 5e-2 (BF16), 1e-2 (F16). The
     * greedy tokens agree exactly for every type. */
    {
        enum { STEPS = 12 };
        const gem_dtype kts[3] = {GEM_DTYPE_F32, GEM_DTYPE_BF16, GEM_DTYPE_F16};
        const double bounds[3] = {1e-4, 5e-2, 1e-2};
        float *e0 = malloc((size_t)V * 4), *e1 = malloc((size_t)V * 4);
        float *k0 = malloc((size_t)V * 4), *k1 = malloc((size_t)V * 4);
        for (int ty = 0; ty < 3 && e0 && e1 && k0 && k1; ty++) {
            int32_t te[STEPS], tk[STEPS];
            TCHECK_STATUS(run_greedy(m, 2, kts[ty], 0, STEPS, te, e0, e1), GEM_OK);
            TCHECK_STATUS(run_greedy(m, 2, kts[ty], 1, STEPS, tk, k0, k1), GEM_OK);
            TCHECK(memcmp(te, tk, sizeof te) == 0);
            TCHECK(max_abs_diff(e0, k0, V) < bounds[ty]);
            TCHECK(max_abs_diff(e1, k1, V) < bounds[ty]);
            /* thread-identical like the explicit caches */
            TCHECK_STATUS(run_greedy(m, 1, kts[ty], 1, STEPS, te, e0, e1), GEM_OK);
            TCHECK(memcmp(te, tk, sizeof te) == 0 && memcmp(e1, k1, (size_t)V * 4) == 0);
            TCHECK_STATUS(run_greedy(m, 3, kts[ty], 1, STEPS, te, e0, e1), GEM_OK);
            TCHECK(memcmp(e0, k0, (size_t)V * 4) == 0 && memcmp(e1, k1, (size_t)V * 4) == 0);
        }
        free(e0);
        free(e1);
        free(k0);
        free(k1);

        /* What is stored: V alone in the two full layers, so they hold and read half. */
        gem_session_opts xo = {2, 64, GEM_ROUTE_FUSED, 0, 0, GEM_DTYPE_F32, 0, GEM_BACKEND_CPU};
        gem_session_opts ko = xo;
        ko.k_from_v = 1;
        gem_session *xs = NULL, *ks = NULL, *ks2 = NULL;
        TCHECK_STATUS(gem_session_create(m, &xo, &xs, err, sizeof err), GEM_OK);
        TCHECK_STATUS(gem_session_create(m, &ko, &ks, err, sizeof err), GEM_OK);
        TCHECK_STATUS(gem_session_create(m, &ko, &ks2, err, sizeof err), GEM_OK);
        const size_t full_row = 4 * 512 * 4;              /* one position of one full layer's K */
        const size_t swa_rows = 4 * 2 * 8 * 64 * 4 * 8;   /* 4 sliding layers, K and V, 8 rows */
        for (int64_t pos = 9; pos <= 40; pos += 31) {
            const size_t rows = (size_t)(pos + 1);
            TCHECK_EQ_I64(gem_session_kv_bytes_at(xs, pos), swa_rows + 2 * 2 * rows * full_row);
            TCHECK_EQ_I64(gem_session_kv_bytes_at(ks, pos), swa_rows + 2 * 1 * rows * full_row);
        }
        gem_kv_memory xm, km;
        TCHECK_STATUS(gem_session_kv_memory(xs, &xm), GEM_OK);
        TCHECK_STATUS(gem_session_kv_memory(ks, &km), GEM_OK);
        TCHECK_STATUS(gem_session_kv_memory(NULL, &km), GEM_ERR_NULL);
        const size_t swa_held = 4 * 2 * 8 * 64 * 4 * 8, full_held = 2 * 64 * full_row;
        TCHECK_EQ_I64(xm.held, swa_held + 2 * full_held);
        TCHECK(xm.saved == 0 && xm.v_only_layers == 0);
        TCHECK_EQ_I64(km.held, swa_held + full_held);
        TCHECK_EQ_I64(km.saved, full_held);
        TCHECK_EQ_I64(km.v_only_layers, 2);
        /* A copy continues exactly, between sessions that store the same tensors only. */
        float *x = malloc((size_t)V * 4), *y = malloc((size_t)V * 4);
        for (int i = 0; ks && x && i < N_PROMPT - 1; i++) {
            TCHECK_STATUS(gem_session_eval(ks, prompt[i], NULL), GEM_OK);
            TCHECK_STATUS(gem_session_eval(xs, prompt[i], NULL), GEM_OK);
        }
        TCHECK_STATUS(gem_session_copy(ks2, xs), GEM_ERR_PARAM);
        TCHECK_STATUS(gem_session_copy(xs, ks), GEM_ERR_PARAM);
        TCHECK_EQ_I64(gem_session_pos(ks2), 0);
        TCHECK_STATUS(gem_session_copy(ks2, ks), GEM_OK);
        TCHECK_STATUS(gem_session_eval(ks2, prompt[N_PROMPT - 1], x), GEM_OK);
        TCHECK_STATUS(gem_session_eval(ks, prompt[N_PROMPT - 1], y), GEM_OK);
        TCHECK(x && y && memcmp(x, y, (size_t)V * 4) == 0);
        /* Filling by repetition copies the V rows alone (timing only: a rebuilt K turns by the
         * row's position, a copied K keeps its source's, so no comparison with the explicit
         * caches); two sessions at the same position fill and continue alike. */
        TCHECK_STATUS(gem_session_fill_repeat(ks, 50), GEM_OK);
        TCHECK_STATUS(gem_session_fill_repeat(ks2, 50), GEM_OK);
        TCHECK_EQ_I64(gem_session_pos(ks), 50);
        TCHECK_STATUS(gem_session_eval(ks, 4, x), GEM_OK);
        TCHECK_STATUS(gem_session_eval(ks2, 4, y), GEM_OK);
        TCHECK(x && y && memcmp(x, y, (size_t)V * 4) == 0);
        /* The baseline route reads a stored K: refused, and the route stays fused. */
        TCHECK_STATUS(gem_session_set_route(ks, GEM_ROUTE_BASELINE), GEM_ERR_UNSUPPORTED);
        TCHECK_STATUS(gem_session_set_route(ks, GEM_ROUTE_FUSED), GEM_OK);
        TCHECK_STATUS(gem_session_eval(ks, 4, x), GEM_OK);
        TCHECK_STATUS(gem_session_set_route(xs, GEM_ROUTE_BASELINE), GEM_OK);
        free(x);
        free(y);
        gem_session_free(xs);
        gem_session_free(ks);
        gem_session_free(ks2);
        gem_session *bad = NULL;
        ko.full_route = GEM_ROUTE_BASELINE;
        TCHECK_STATUS(gem_session_create(m, &ko, &bad, err, sizeof err), GEM_ERR_UNSUPPORTED);
        TCHECK(bad == NULL && strstr(err, "fused") && strstr(err, "k_from_v"));
        ko.full_route = GEM_ROUTE_FUSED;
        ko.k_from_v = 2;
        TCHECK_STATUS(gem_session_create(m, &ko, &bad, err, sizeof err), GEM_ERR_PARAM);
        TCHECK(bad == NULL && strstr(err, "k_from_v"));
    }

    /* Bad calls and options. */
    gem_session *bad = NULL;
    gem_session_opts bo = {2, 0, GEM_ROUTE_FUSED, 0, 0, GEM_DTYPE_F32, 0, GEM_BACKEND_CPU};
    TCHECK_STATUS(gem_session_create(m, &bo, &bad, err, sizeof err), GEM_ERR_PARAM);
    TCHECK(bad == NULL && err[0]);
    bo.max_tokens = 8;
    bo.full_route = GEM_ROUTE_ONLINE;
    TCHECK_STATUS(gem_session_create(m, &bo, &bad, err, sizeof err), GEM_ERR_PARAM);
    bo.full_route = GEM_ROUTE_FUSED;
    bo.kv_dtype = GEM_DTYPE_COUNT;
    TCHECK_STATUS(gem_session_create(m, &bo, &bad, err, sizeof err), GEM_ERR_PARAM);
    TCHECK(bad == NULL && strstr(err, "kv_dtype"));
    bo.kv_dtype = GEM_DTYPE_F32;
    bo.full_tile = 100000;
    TCHECK(gem_session_create(m, &bo, &bad, err, sizeof err) != GEM_OK && bad == NULL);
    gem_model_free(m);

    /* A file whose metadata disagrees with a tensor's shape: feed_forward_length
     * patched from 256 to 300 in the file's bytes. */
    FILE *f = fopen(path, "rb");
    static uint8_t bytes[16 << 20];
    size_t n = f ? fread(bytes, 1, sizeof bytes, f) : 0;
    if (f)
        fclose(f);
    const char *key = "gemma4.feed_forward_length";
    uint8_t *at = NULL;
    for (size_t i = 0; i + strlen(key) < n && !at; i++)
        if (!memcmp(bytes + i, key, strlen(key)))
            at = bytes + i + strlen(key) + 4; /* past the key and its u32 type */
    TCHECK(at && at[0] == 0 && at[1] == 1);   /* 256, little-endian */
    if (at) {
        at[0] = 44; /* 300 */
        gem_gguf *g = NULL;
        TCHECK_STATUS(gem_gguf_open_buffer(bytes, n, &g, err, sizeof err), GEM_OK);
        TCHECK_STATUS(gem_model_load_gguf(g, &m, err, sizeof err), GEM_ERR_FORMAT);
        TCHECK(m == NULL && strstr(err, "ffn_gate") && strstr(err, "300") && !strchr(err, '\n'));
        gem_gguf_close(g);
    }
    /* Strings from the file never break the one-line message (found by fuzzing). */
    {
        gem_gguf_writer *w = NULL;
        TCHECK_STATUS(gem_gguf_writer_create(&w), GEM_OK);
        TCHECK_STATUS(gem_gguf_writer_str(w, "general.architecture", "gld\n\n  xh"), GEM_OK);
        const int64_t ne[1] = {4};
        TCHECK_STATUS(gem_gguf_writer_tensor(w, "x", GEM_GGUF_F32, 1, ne), GEM_OK);
        TCHECK_STATUS(gem_gguf_writer_write(w, path, fill_zero, NULL, err, sizeof err), GEM_OK);
        gem_gguf_writer_free(w);
        TCHECK_STATUS(gem_model_load(path, &m, err, sizeof err), GEM_ERR_UNSUPPORTED);
        TCHECK(m == NULL && strstr(err, "gld??  xh") && !strchr(err, '\n'));
    }
    TCHECK_STATUS(gem_model_load("/nonexistent.gguf", &m, err, sizeof err), GEM_ERR_IO);
    TCHECK(m == NULL && err[0] && !strchr(err, '\n'));
    remove(path);
    free(a);
    free(b);
    free(c);
    return tcheck_summary("test_model");
}
