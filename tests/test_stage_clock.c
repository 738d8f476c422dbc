/*
 * The baseline route's stage clock (src/decode_stage_clock.h) and the model
 * session's baseline stage times built on it: the clock only observes. With it
 * on, a decode call and a whole model step give the same bits as with it off;
 * it counts baseline calls alone (never the fused route), stays at zero while
 * off, and resets to zero.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_stage_clock.h"
#include "gem/check.h"
#include "gem/decode.h"
#include "gem/model.h"
#include "kv_view.h"
#include "tcheck.h"

/* 1 when every field of t is zero. */
static int clock_zero(const gem_baseline_stage_seconds *t)
{
    return t->score == 0.0 && t->normalize == 0.0 && t->value == 0.0 && t->reduce == 0.0 &&
           t->calls == 0;
}

/* 1 when every stage time of t is finite and not negative. */
static int clock_sane(const gem_baseline_stage_seconds *t)
{
    const double v[4] = {t->score, t->normalize, t->value, t->reduce};
    for (int k = 0; k < 4; k++)
        if (!(v[k] >= 0.0 && v[k] < 1e6))
            return 0;
    return 1;
}

/* One gem_decode of route `route` on the seeded inputs `in` of shape s (head-major K and
 * V, capacity rows) with the K and V buffers k, v of type kv, into out (n_q_heads * dv). */
static gem_status decode_once(gem_decode_ctx *ctx, const gem_attn_shape *s,
                              const gem_owned_inputs *in, const void *k, const void *v,
                              gem_dtype kv, gem_route route, float *out)
{
    const gem_decode_shape sh = {s->n_q_heads, s->n_kv_heads, s->dk, s->dv, s->scale};
    const gem_kv_view view = {k,        v,      kv, kv, s->capacity * s->dk, s->dk,
                              s->capacity * s->dv, s->dv, s->live, s->capacity, NULL,
                              NULL,     NULL};
    const gem_decode_config cfg = {route, 0, 0};
    size_t bytes = 0;
    gem_status st = gem_decode_workspace_bytes(ctx, &sh, s->live, &cfg, &bytes);
    if (st != GEM_OK)
        return st;
    void *ws = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!ws)
        return GEM_ERR_NOMEM;
    st = gem_decode(ctx, &sh, in->q, &view, out, ws, bytes, &cfg, NULL);
    free(ws);
    return st;
}

/* x (n) rounded to bfloat16 bit patterns into a new buffer (NULL when out of memory). */
static uint16_t *to_bf16(const float *x, size_t n)
{
    uint16_t *b = malloc(n * sizeof *b);
    for (size_t i = 0; b && i < n; i++)
        b[i] = gem_f32_to_bf16(x[i]);
    return b;
}

static void check_decode_clock(void)
{
    /* live 700: three score chunks and uneven value partitions */
    const gem_attn_shape s = {32, 4, 512, 512, 700, 720, 0.04419417f};
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, 11, &in), GEM_OK);
    const size_t n_out = 32 * 512, n_kv = (size_t)4 * 720 * 512;
    float *off = malloc(n_out * sizeof(float)), *on = malloc(n_out * sizeof(float));
    uint16_t *kb = to_bf16(in.k, n_kv), *vb = to_bf16(in.v, n_kv);
    gem_decode_ctx *ctx = NULL;
    TCHECK_STATUS(gem_decode_ctx_create(GEM_BACKEND_CPU, 2, &ctx), GEM_OK);
    if (!off || !on || !kb || !vb || !ctx) {
        TCHECK(0);
        goto out;
    }
    gem_baseline_stage_seconds t;
    /* a new context: off, zero */
    TCHECK_STATUS(gem_decode_stage_clock_read(ctx, &t), GEM_OK);
    TCHECK(clock_zero(&t));
    for (int typed = 0; typed < 2; typed++) {
        const void *k = typed ? (const void *)kb : (const void *)in.k;
        const void *v = typed ? (const void *)vb : (const void *)in.v;
        const gem_dtype dt = typed ? GEM_DTYPE_BF16 : GEM_DTYPE_F32;
        TCHECK_STATUS(gem_decode_stage_clock_set(ctx, 0), GEM_OK);
        TCHECK_STATUS(gem_decode_stage_clock_reset(ctx), GEM_OK);
        TCHECK_STATUS(decode_once(ctx, &s, &in, k, v, dt, GEM_ROUTE_BASELINE, off), GEM_OK);
        TCHECK_STATUS(gem_decode_stage_clock_read(ctx, &t), GEM_OK);
        TCHECK(clock_zero(&t)); /* off: nothing counted */
        TCHECK_STATUS(gem_decode_stage_clock_set(ctx, 1), GEM_OK);
        memset(on, 0xFF, n_out * sizeof(float));
        TCHECK_STATUS(decode_once(ctx, &s, &in, k, v, dt, GEM_ROUTE_BASELINE, on), GEM_OK);
        TCHECK(memcmp(off, on, n_out * sizeof(float)) == 0); /* the same bits */
        TCHECK_STATUS(gem_decode_stage_clock_read(ctx, &t), GEM_OK);
        TCHECK_EQ_I64(t.calls, 1);
        TCHECK(clock_sane(&t));
        TCHECK(t.score + t.normalize + t.value + t.reduce > 0.0);
        /* the fused route is not counted */
        TCHECK_STATUS(decode_once(ctx, &s, &in, k, v, dt, GEM_ROUTE_FUSED, on), GEM_OK);
        gem_baseline_stage_seconds after;
        TCHECK_STATUS(gem_decode_stage_clock_read(ctx, &after), GEM_OK);
        TCHECK(memcmp(&after, &t, sizeof t) == 0);
        /* a second baseline call adds up */
        TCHECK_STATUS(decode_once(ctx, &s, &in, k, v, dt, GEM_ROUTE_BASELINE, on), GEM_OK);
        TCHECK(memcmp(off, on, n_out * sizeof(float)) == 0);
        TCHECK_STATUS(gem_decode_stage_clock_read(ctx, &after), GEM_OK);
        TCHECK_EQ_I64(after.calls, 2);
        TCHECK(after.score >= t.score && after.value >= t.value);
        /* switched off, the sums are kept and no more calls are counted */
        TCHECK_STATUS(gem_decode_stage_clock_set(ctx, 0), GEM_OK);
        TCHECK_STATUS(decode_once(ctx, &s, &in, k, v, dt, GEM_ROUTE_BASELINE, on), GEM_OK);
        TCHECK_STATUS(gem_decode_stage_clock_read(ctx, &t), GEM_OK);
        TCHECK(memcmp(&after, &t, sizeof t) == 0);
        TCHECK_STATUS(gem_decode_stage_clock_reset(ctx), GEM_OK);
        TCHECK_STATUS(gem_decode_stage_clock_read(ctx, &t), GEM_OK);
        TCHECK(clock_zero(&t));
    }
    /* a failing call (a score that overflows) counts nothing */
    {
        const float keep_q = in.q[0], keep_k = in.k[0];
        in.q[0] = 3e38f; /* times 3e38 overflows float in the score of token 0 */
        in.k[0] = 3e38f;
        TCHECK_STATUS(gem_decode_stage_clock_set(ctx, 1), GEM_OK);
        TCHECK(decode_once(ctx, &s, &in, in.k, in.v, GEM_DTYPE_F32, GEM_ROUTE_BASELINE, on) !=
               GEM_OK);
        TCHECK_STATUS(gem_decode_stage_clock_read(ctx, &t), GEM_OK);
        TCHECK_EQ_I64(t.calls, 0);
        in.q[0] = keep_q;
        in.k[0] = keep_k;
    }
    /* bad arguments */
    TCHECK_STATUS(gem_decode_stage_clock_set(NULL, 1), GEM_ERR_NULL);
    TCHECK_STATUS(gem_decode_stage_clock_set(ctx, 2), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_decode_stage_clock_set(ctx, -1), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_decode_stage_clock_read(NULL, &t), GEM_ERR_NULL);
    TCHECK_STATUS(gem_decode_stage_clock_read(ctx, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_decode_stage_clock_reset(NULL), GEM_ERR_NULL);
out:
    gem_decode_ctx_destroy(ctx);
    free(off);
    free(on);
    free(kb);
    free(vb);
    gem_inputs_free(&in);
}

/* A session on the tiny model: `steps` tokens (a fixed prompt, then greedy) with the full
 * layers on `route`, kv dtype `kv`, the baseline stage timing `timing`; the logits of every
 * step into logits (steps * n_vocab); *bt receives the baseline stage times of the last
 * step. */
static gem_status session_run(const gem_model *m, gem_route route, gem_dtype kv, int timing,
                              int64_t steps, float *logits, gem_baseline_stage_times *bt)
{
    const gem_hparams *hp = gem_model_hparams(m);
    gem_session_opts o = {2, steps, route, 0, 0, kv, 0, GEM_BACKEND_CPU};
    gem_session *s = NULL;
    char err[256];
    gem_status st = gem_session_create(m, &o, &s, err, sizeof err);
    if (st == GEM_OK)
        st = gem_session_time_baseline_stages(s, timing);
    int32_t tok = 2;
    for (int64_t i = 0; st == GEM_OK && i < steps; i++) {
        float *l = logits + i * hp->n_vocab;
        gem_session_times_reset(s);
        st = gem_session_eval(s, tok, l);
        if (st == GEM_OK)
            st = gem_session_baseline_stage_times(s, bt);
        /* the prompt's first 12 tokens, then the argmax */
        if (i < 12) {
            tok = (int32_t)((317 + 7 * i) % hp->n_vocab);
        } else {
            int64_t best = 0;
            for (int64_t j = 1; j < hp->n_vocab; j++)
                if (l[j] > l[best])
                    best = j;
            tok = (int32_t)best;
        }
    }
    gem_session_free(s);
    return st;
}

static void check_session_times(void)
{
    const char *path = "test_stage_clock_tmp.gguf";
    gem_synth_spec spec;
    char err[256];
    TCHECK_STATUS(gem_synth_preset("tiny", &spec), GEM_OK);
    TCHECK_STATUS(gem_synth_write(&spec, path, err, sizeof err), GEM_OK);
    gem_model *m = NULL;
    TCHECK_STATUS(gem_model_load(path, &m, err, sizeof err), GEM_OK);
    if (!m) {
        remove(path);
        return;
    }
    const gem_hparams *hp = gem_model_hparams(m);
    const int64_t steps = 24; /* past the window of 8: the sliding rings wrap */
    const size_t n = (size_t)(steps * hp->n_vocab);
    float *off = malloc(n * sizeof(float)), *on = malloc(n * sizeof(float));
    if (!off || !on) {
        TCHECK(0);
        goto out;
    }
    const gem_dtype types[2] = {GEM_DTYPE_F32, GEM_DTYPE_BF16};
    for (int k = 0; k < 2; k++) {
        gem_baseline_stage_times a, b;
        TCHECK_STATUS(session_run(m, GEM_ROUTE_BASELINE, types[k], 0, steps, off, &a), GEM_OK);
        TCHECK_STATUS(session_run(m, GEM_ROUTE_BASELINE, types[k], 1, steps, on, &b), GEM_OK);
        TCHECK(memcmp(off, on, n * sizeof(float)) == 0); /* every step, the same bits */
        TCHECK(a.calls == 0 && a.score == 0.0 && a.value == 0.0);
        /* the last step alone (times reset before each): one call per full layer */
        TCHECK_EQ_I64(b.calls, hp->n_full_layers);
        TCHECK(b.score >= 0.0 && b.normalize >= 0.0 && b.value >= 0.0 && b.reduce >= 0.0);
        TCHECK(b.score + b.normalize + b.value + b.reduce > 0.0);
        /* the fused route: the clock stays at zero */
        TCHECK_STATUS(session_run(m, GEM_ROUTE_FUSED, types[k], 1, steps, on, &b), GEM_OK);
        TCHECK_EQ_I64(b.calls, 0);
    }
    gem_session_opts o = {1, 4, GEM_ROUTE_BASELINE, 0, 0, GEM_DTYPE_F32, 0, GEM_BACKEND_CPU};
    gem_session *s = NULL;
    TCHECK_STATUS(gem_session_create(m, &o, &s, err, sizeof err), GEM_OK);
    gem_baseline_stage_times t;
    TCHECK_STATUS(gem_session_time_baseline_stages(s, 2), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_session_time_baseline_stages(NULL, 1), GEM_ERR_NULL);
    TCHECK_STATUS(gem_session_baseline_stage_times(NULL, &t), GEM_ERR_NULL);
    TCHECK_STATUS(gem_session_baseline_stage_times(s, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_session_time_baseline_stages(s, 1), GEM_OK);
    TCHECK_STATUS(gem_session_eval(s, 2, NULL), GEM_OK);
    TCHECK_STATUS(gem_session_baseline_stage_times(s, &t), GEM_OK);
    TCHECK_EQ_I64(t.calls, hp->n_full_layers);
    gem_session_times_reset(s);
    TCHECK_STATUS(gem_session_baseline_stage_times(s, &t), GEM_OK);
    TCHECK(t.calls == 0 && t.score == 0.0 && t.normalize == 0.0 && t.value == 0.0 &&
           t.reduce == 0.0);
    gem_session_free(s);
out:
    free(off);
    free(on);
    gem_model_free(m);
    remove(path);
}

int main(void)
{
    check_decode_clock();
    check_session_times();
    return tcheck_summary("test_stage_clock");
}
