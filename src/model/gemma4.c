/*
 * The Gemma 4 text decoder on the CPU, one token at a time, as transformers'
 * gemma4 code computes it:
 *
 *   x = embed(token) * sqrt(n_embd)
 *   per layer:
 *     h = rmsnorm(x) * attn_norm
 *     q = Wq h, k = Wk h, v = Wv h (full layers without attn_v: v = k, raw)
 *     per head: q = rope(rmsnorm(q) * q_norm), k = rope(rmsnorm(k) * k_norm),
 *               v = rmsnorm(v)                         (no weight)
 *     a = attention(q, K, V), scale 1.0                  (gem_decode)
 *     x = x + rmsnorm(Wo a) * post_attention_norm
 *     m = Wdown(gelu_tanh(Wgate g) * Wup g), g = rmsnorm(x) * ffn_norm
 *     x = (x + rmsnorm(m) * post_ffw_norm) * layer_output_scale
 *   logits = cap * tanh((E rmsnorm(x) * output_norm) / cap)   (E: tied embedding)
 *
 * RoPE is NeoX-paired: dims i and i + n_rot/2 rotate by pos * base^(-2i/n_rot) /
 * factor_i; full layers take the factors from rope_freqs (1 for the first 64
 * pairs, 1e30 beyond: the proportional partial RoPE), sliding layers use none.
 * Full layers keep every position; sliding layers keep a ring of `window` rows
 * (attention does not depend on the order of the rows), so a token sees the
 * last `window` keys including its own.
 *
 * K rebuilt from V (gem_session_opts.k_from_v): in a full layer whose K = V both
 * norms divide the same raw projection k by the same rms(k), so V = rmsnorm(k)
 * and K = rope(rmsnorm(k) * k_norm) = rope(k_norm * V), the float product being
 * the one the explicit row takes. Such a layer stores V alone and hands
 * gem_decode a gem_k_from_v (k_norm, the layer's inv_freq, pos0 = 0: row t is
 * position t, full layers are not rings); the fused route rebuilds K as it reads V.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "cpu_memory.h"
#include "decode_internal.h"
#include "decode_stage_clock.h"
#include "gem/decode.h"
#include "gem/model.h"
#include "kv_view.h"
#include "matvec.h"
#include "model_internal.h"


static gem_status mfail(char *err, size_t errlen, gem_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static gem_status mfail(char *err, size_t errlen, gem_status st, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* ---- loading -------------------------------------------------------------------------- */

/* A string from the file, for a message or a name: at most cap - 1 bytes, anything
 * outside printable ASCII written as '?', NUL-terminated. dst (cap). */
static void printable(gem_gguf_str s, char *dst, size_t cap)
{
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        dst[i] = c >= 32 && c < 127 ? (char)c : '?';
    }
    dst[n] = 0;
}

/* A required positive integer key of the architecture. */
static gem_status key_i64(const gem_gguf *g, const char *suffix, int64_t lo, int64_t hi,
                          int required, int64_t *out, char *err, size_t errlen)
{
    char key[128];
    snprintf(key, sizeof key, "gemma4.%s", suffix);
    gem_status st = gem_gguf_get_i64(g, key, out, err, errlen);
    if (st == GEM_ERR_RANGE && !required)
        return GEM_OK;
    if (st != GEM_OK)
        return GEM_ERR_FORMAT;
    if (*out < lo || *out > hi)
        return mfail(err, errlen, GEM_ERR_FORMAT, "metadata key '%s' is %lld, outside [%lld, %lld]",
                     key, (long long)*out, (long long)lo, (long long)hi);
    return GEM_OK;
}

static gem_status key_f64(const gem_gguf *g, const char *suffix, int required, double *out,
                          char *err, size_t errlen)
{
    char key[128];
    snprintf(key, sizeof key, "gemma4.%s", suffix);
    gem_status st = gem_gguf_get_f64(g, key, out, err, errlen);
    if (st == GEM_ERR_RANGE && !required)
        return GEM_OK;
    if (st != GEM_OK)
        return GEM_ERR_FORMAT;
    if (!isfinite(*out))
        return mfail(err, errlen, GEM_ERR_FORMAT, "metadata key '%s' is not finite", key);
    return GEM_OK;
}

/* A per-layer value written as one scalar or as an array of n_layers. */
static gem_status key_layers(const gem_gguf *g, const char *suffix, int64_t n_layers, int64_t lo,
                             int64_t hi, int64_t *out, char *err, size_t errlen)
{
    char key[128];
    snprintf(key, sizeof key, "gemma4.%s", suffix);
    const gem_gguf_kv *kv = gem_gguf_find(g, key);
    if (!kv)
        return mfail(err, errlen, GEM_ERR_FORMAT, "metadata key '%s' is missing", key);
    for (int64_t i = 0; i < n_layers; i++) {
        int64_t v;
        gem_status st;
        if (kv->type == GEM_GGUF_V_ARRAY) {
            if (kv->n != (uint64_t)n_layers)
                return mfail(err, errlen, GEM_ERR_FORMAT,
                             "metadata key '%s' has %llu entries for %lld layers", key,
                             (unsigned long long)kv->n, (long long)n_layers);
            st = gem_gguf_arr_i64(kv, (uint64_t)i, &v);
        } else {
            st = gem_gguf_get_i64(g, key, &v, NULL, 0);
        }
        if (st != GEM_OK)
            return mfail(err, errlen, GEM_ERR_FORMAT, "metadata key '%s' is not an integer", key);
        if (v < lo || v > hi)
            return mfail(err, errlen, GEM_ERR_FORMAT,
                         "metadata key '%s' is %lld for layer %lld, outside [%lld, %lld]", key,
                         (long long)v, (long long)i, (long long)lo, (long long)hi);
        out[i] = v;
    }
    return GEM_OK;
}

/* A 2-D weight matrix of exactly (rows, cols); optional ones may be absent. */
static gem_status need_matrix(const gem_gguf *g, const char *name, int64_t rows, int64_t cols,
                              int optional, gem_matrix *m, char *err, size_t errlen)
{
    const gem_gguf_tensor *t = gem_gguf_find_tensor(g, name);
    memset(m, 0, sizeof *m);
    if (!t)
        return optional ? GEM_OK
                        : mfail(err, errlen, GEM_ERR_FORMAT, "tensor '%s' is missing", name);
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1)
        return mfail(err, errlen, GEM_ERR_FORMAT,
                     "tensor '%s' is [%lld, %lld, %lld, %lld], the metadata says [%lld, %lld]",
                     name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                     (long long)t->ne[3], (long long)cols, (long long)rows);
    m->data = t->data;
    m->type = t->type;
    m->rows = rows;
    m->cols = cols;
    if (gem_gguf_row_bytes(t->type, cols, &m->row_bytes) != GEM_OK)
        return mfail(err, errlen, GEM_ERR_FORMAT, "tensor '%s': bad row size", name);
    return GEM_OK;
}

/* A 1-D tensor of n elements, dequantized into a new float array. */
static gem_status need_vector(const gem_gguf *g, const char *name, int64_t n, int optional,
                              float **out, char *err, size_t errlen)
{
    *out = NULL;
    const gem_gguf_tensor *t = gem_gguf_find_tensor(g, name);
    if (!t)
        return optional ? GEM_OK
                        : mfail(err, errlen, GEM_ERR_FORMAT, "tensor '%s' is missing", name);
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return mfail(err, errlen, GEM_ERR_FORMAT,
                     "tensor '%s' has %lld x %lld x %lld x %lld elements, the metadata says %lld",
                     name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                     (long long)t->ne[3], (long long)n);
    float *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return mfail(err, errlen, GEM_ERR_NOMEM, "out of memory");
    gem_gguf_dequant(t->type, t->data, v, n);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]) && strcmp(name, "rope_freqs.weight") != 0) {
            free(v);
            return mfail(err, errlen, GEM_ERR_FORMAT, "tensor '%s' holds a non-finite value", name);
        }
    *out = v;
    return GEM_OK;
}

static size_t mat_bytes(const gem_matrix *m)
{
    return m->data ? (size_t)m->rows * m->row_bytes : 0;
}

gem_status gem_model_load_gguf(const gem_gguf *g, gem_model **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    if (!g || !out)
        return GEM_ERR_NULL;
    *out = NULL;
    gem_gguf_str arch;
    if (gem_gguf_get_str(g, "general.architecture", &arch, err, errlen) != GEM_OK)
        return GEM_ERR_FORMAT;
    if (!gem_gguf_str_eq(arch, "gemma4")) {
        char a[33];
        printable(arch, a, sizeof a);
        return mfail(err, errlen, GEM_ERR_UNSUPPORTED,
                     "general.architecture is '%s', gem runs 'gemma4'", a);
    }
    gem_model *m = calloc(1, sizeof *m);
    if (!m)
        return GEM_ERR_NOMEM;
    if (pthread_mutex_init(&m->pack_lock, NULL) != 0) {
        free(m);
        return GEM_ERR_NOMEM;
    }
    m->g = g;
    gem_hparams *hp = &m->hp;
    gem_status st;
    int64_t *hc = NULL, *kvh = NULL, *ff = NULL, *swa = NULL;
    gem_gguf_str name;
    if (gem_gguf_get_str(g, "general.name", &name, NULL, 0) == GEM_OK)
        printable(name, hp->name, sizeof hp->name);
    int64_t vl = 0, vl_swa = 0, extra = 0;
    hp->context_length = 131072;
    if ((st = key_i64(g, "block_count", 1, GEM_MODEL_MAX_LAYERS, 1, &hp->n_layers, err, errlen)) ||
        (st = key_i64(g, "embedding_length", 1, 1 << 20, 1, &hp->n_embd, err, errlen)) ||
        (st = key_i64(g, "context_length", 1, INT32_MAX, 0, &hp->context_length, err, errlen)) ||
        (st = key_i64(g, "attention.key_length", 2, 1 << 16, 1, &hp->head_dim_full, err, errlen)) ||
        (st = key_i64(g, "attention.value_length", 2, 1 << 16, 1, &vl, err, errlen)) ||
        (st = key_i64(g, "attention.key_length_swa", 2, 1 << 16, 1, &hp->head_dim_swa, err,
                      errlen)) ||
        (st = key_i64(g, "attention.value_length_swa", 2, 1 << 16, 1, &vl_swa, err, errlen)) ||
        (st = key_f64(g, "attention.layer_norm_rms_epsilon", 1, &hp->eps, err, errlen)) ||
        (st = key_f64(g, "rope.freq_base", 1, &hp->rope_base_full, err, errlen)))
        goto fail;
    hp->rope_base_swa = hp->rope_base_full;
    hp->n_rot_full = hp->head_dim_full;
    hp->n_rot_swa = hp->head_dim_swa;
    if ((st = key_f64(g, "rope.freq_base_swa", 0, &hp->rope_base_swa, err, errlen)) ||
        (st = key_f64(g, "final_logit_softcapping", 0, &hp->softcap, err, errlen)) ||
        (st = key_i64(g, "rope.dimension_count", 2, hp->head_dim_full, 0, &hp->n_rot_full, err,
                      errlen)) ||
        (st = key_i64(g, "rope.dimension_count_swa", 2, hp->head_dim_swa, 0, &hp->n_rot_swa, err,
                      errlen)))
        goto fail;
    if (vl != hp->head_dim_full || vl_swa != hp->head_dim_swa) {
        st = mfail(err, errlen, GEM_ERR_FORMAT,
                   "key and value lengths differ (%lld/%lld, swa %lld/%lld)",
                   (long long)hp->head_dim_full, (long long)vl, (long long)hp->head_dim_swa,
                   (long long)vl_swa);
        goto fail;
    }
    if (hp->n_rot_full % 2 || hp->n_rot_swa % 2 || !(hp->eps > 0) || hp->softcap < 0 ||
        !(hp->rope_base_full > 0) || !(hp->rope_base_swa > 0)) {
        st = mfail(err, errlen, GEM_ERR_FORMAT,
                   "rope dimensions must be even, epsilon and rope bases positive, softcap >= 0");
        goto fail;
    }
    /* Variants gem does not run. */
    static const char *const unsupported[] = {"attention.shared_kv_layers",
                                              "embedding_length_per_layer_input", "expert_count"};
    for (size_t i = 0; i < 3; i++) {
        extra = 0;
        if ((st = key_i64(g, unsupported[i], 0, INT64_MAX, 0, &extra, err, errlen)))
            goto fail;
        if (extra != 0) {
            st = mfail(err, errlen, GEM_ERR_UNSUPPORTED,
                       "gemma4.%s is %lld: gem runs Gemma 4 models without it (31B-style dense "
                       "decoders)",
                       unsupported[i], (long long)extra);
            goto fail;
        }
    }
    const int64_t L = hp->n_layers;
    hc = calloc((size_t)L, sizeof *hc);
    kvh = calloc((size_t)L, sizeof *kvh);
    ff = calloc((size_t)L, sizeof *ff);
    swa = calloc((size_t)L, sizeof *swa);
    m->layers = calloc((size_t)L, sizeof *m->layers);
    if (!hc || !kvh || !ff || !swa || !m->layers) {
        st = mfail(err, errlen, GEM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = key_layers(g, "attention.head_count", L, 1, 4096, hc, err, errlen)) ||
        (st = key_layers(g, "attention.head_count_kv", L, 1, 4096, kvh, err, errlen)) ||
        (st = key_layers(g, "feed_forward_length", L, 1, 1 << 22, ff, err, errlen)) ||
        (st = key_layers(g, "attention.sliding_window_pattern", L, 0, 1, swa, err, errlen)))
        goto fail;
    int any_swa = 0;
    for (int64_t i = 0; i < L; i++)
        any_swa |= swa[i] != 0;
    if (any_swa &&
        (st = key_i64(g, "attention.sliding_window", 1, INT32_MAX, 1, &hp->window, err, errlen)))
        goto fail;
    if ((st = gem_tokenizer_load(g, &m->tok, err, errlen)) != GEM_OK)
        goto fail;
    hp->n_vocab = gem_tokenizer_n_vocab(m->tok);
    const int64_t E = hp->n_embd;
    if ((st = need_matrix(g, "token_embd.weight", hp->n_vocab, E, 0, &m->tok_embd, err, errlen)) ||
        (st = need_matrix(g, "output.weight", hp->n_vocab, E, 1, &m->output, err, errlen)) ||
        (st = need_vector(g, "output_norm.weight", E, 0, &m->output_norm, err, errlen)))
        goto fail;
    if (!m->output.data)
        m->output = m->tok_embd; /* tied embeddings */
    m->weight_bytes = mat_bytes(&m->output) + m->tok_embd.row_bytes + (size_t)E * 4;
    for (int64_t i = 0; i < L; i++) {
        gem_layer *l = &m->layers[i];
        l->swa = swa[i] != 0;
        l->n_head = hc[i];
        l->n_head_kv = kvh[i];
        l->head_dim = l->swa ? hp->head_dim_swa : hp->head_dim_full;
        l->n_ff = ff[i];
        l->n_rot = l->swa ? hp->n_rot_swa : hp->n_rot_full;
        l->rope_base = l->swa ? hp->rope_base_swa : hp->rope_base_full;
        hp->n_full_layers += !l->swa;
        if (l->n_head % l->n_head_kv) {
            st = mfail(err, errlen, GEM_ERR_FORMAT,
                       "layer %lld: %lld query heads are not a multiple of %lld KV heads",
                       (long long)i, (long long)l->n_head, (long long)l->n_head_kv);
            goto fail;
        }
        const int64_t qd = l->n_head * l->head_dim, kd = l->n_head_kv * l->head_dim;
        char nm[GEM_GGUF_MAX_NAME];
#define NM(s) (snprintf(nm, sizeof nm, "blk.%lld.%s", (long long)i, s), nm)
        if ((st = need_matrix(g, NM("attn_q.weight"), qd, E, 0, &l->wq, err, errlen)) ||
            (st = need_matrix(g, NM("attn_k.weight"), kd, E, 0, &l->wk, err, errlen)) ||
            (st = need_matrix(g, NM("attn_v.weight"), kd, E, 1, &l->wv, err, errlen)) ||
            (st = need_matrix(g, NM("attn_output.weight"), E, qd, 0, &l->wo, err, errlen)) ||
            (st = need_matrix(g, NM("ffn_gate.weight"), l->n_ff, E, 0, &l->w_gate, err, errlen)) ||
            (st = need_matrix(g, NM("ffn_up.weight"), l->n_ff, E, 0, &l->w_up, err, errlen)) ||
            (st = need_matrix(g, NM("ffn_down.weight"), E, l->n_ff, 0, &l->w_down, err, errlen)) ||
            (st = need_vector(g, NM("attn_norm.weight"), E, 0, &l->attn_norm, err, errlen)) ||
            (st = need_vector(g, NM("attn_q_norm.weight"), l->head_dim, 0, &l->q_norm, err,
                              errlen)) ||
            (st = need_vector(g, NM("attn_k_norm.weight"), l->head_dim, 0, &l->k_norm, err,
                              errlen)) ||
            (st = need_vector(g, NM("post_attention_norm.weight"), E, 0, &l->post_attn_norm, err,
                              errlen)) ||
            (st = need_vector(g, NM("ffn_norm.weight"), E, 0, &l->ffn_norm, err, errlen)) ||
            (st = need_vector(g, NM("post_ffw_norm.weight"), E, 0, &l->post_ffn_norm, err, errlen)))
            goto fail;
        float *scale = NULL;
        if ((st = need_vector(g, NM("layer_output_scale.weight"), 1, 1, &scale, err, errlen)))
            goto fail;
#undef NM
        l->out_scale = scale ? scale[0] : 1.0f;
        free(scale);
        l->k_eq_v = l->wv.data == NULL;
        m->weight_bytes += mat_bytes(&l->wq) + mat_bytes(&l->wk) + mat_bytes(&l->wv) +
                           mat_bytes(&l->wo) + mat_bytes(&l->w_gate) + mat_bytes(&l->w_up) +
                           mat_bytes(&l->w_down) + (size_t)(5 * E + 2 * l->head_dim + 1) * 4;
    }
    if (hp->n_full_layers > 0 && (st = need_vector(g, "rope_freqs.weight", hp->head_dim_full / 2, 1,
                                                   &m->rope_freqs, err, errlen)))
        goto fail;
    for (int64_t i = 0; m->rope_freqs && i < hp->head_dim_full / 2; i++)
        if (!(m->rope_freqs[i] > 0)) {
            st = mfail(err, errlen, GEM_ERR_FORMAT,
                       "rope_freqs.weight holds a factor that is not positive");
            goto fail;
        }
    free(hc);
    free(kvh);
    free(ff);
    free(swa);
    *out = m;
    return GEM_OK;
fail:
    free(hc);
    free(kvh);
    free(ff);
    free(swa);
    gem_model_free(m);
    return st;
}

gem_status gem_model_load(const char *path, gem_model **out, char *err, size_t errlen)
{
    if (!path || !out)
        return GEM_ERR_NULL;
    *out = NULL;
    gem_gguf *g = NULL;
    gem_status st = gem_gguf_open(path, &g, err, errlen);
    if (st != GEM_OK)
        return st;
    st = gem_model_load_gguf(g, out, err, errlen);
    if (st != GEM_OK) {
        gem_gguf_close(g);
        return st;
    }
    (*out)->owned = g;
    return GEM_OK;
}

void gem_model_free(gem_model *m)
{
    if (!m)
        return;
    for (int64_t i = 0; m->layers && i < m->hp.n_layers; i++) {
        gem_layer *l = &m->layers[i];
        free(l->attn_norm);
        free(l->q_norm);
        free(l->k_norm);
        free(l->post_attn_norm);
        free(l->ffn_norm);
        free(l->post_ffn_norm);
    }
    gem_model_dev_free(m->dev);
    free(m->pack_mem);
    pthread_mutex_destroy(&m->pack_lock);
    free(m->layers);
    free(m->output_norm);
    free(m->rope_freqs);
    gem_tokenizer_free(m->tok);
    gem_gguf_close(m->owned);
    free(m);
}

gem_status gem_model_upload(gem_model *m, uint64_t random_seed, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    if (!m)
        return GEM_ERR_NULL;
    if (m->dev)
        return mfail(err, errlen, GEM_ERR_STATE, "the model's weights are already on the device");
    return gem_model_dev_create(m, random_seed, &m->dev, err, errlen);
}

size_t gem_model_device_bytes(const gem_model *m) { return m ? gem_model_dev_bytes(m->dev) : 0; }
uint64_t gem_model_device_seed(const gem_model *m)
{
    return m ? gem_model_dev_random_seed(m->dev) : 0;
}

const gem_hparams *gem_model_hparams(const gem_model *m) { return m ? &m->hp : NULL; }
const gem_layer *gem_model_layer(const gem_model *m, int64_t i)
{
    return m && i >= 0 && i < m->hp.n_layers ? &m->layers[i] : NULL;
}
const gem_gguf *gem_model_file(const gem_model *m) { return m ? m->g : NULL; }
const gem_tokenizer *gem_model_tokenizer(const gem_model *m) { return m ? m->tok : NULL; }
const gem_matrix *gem_model_embedding(const gem_model *m) { return m ? &m->tok_embd : NULL; }
const gem_matrix *gem_model_output(const gem_model *m) { return m ? &m->output : NULL; }
size_t gem_model_weight_bytes_per_token(const gem_model *m) { return m ? m->weight_bytes : 0; }

size_t gem_model_cpu_packed_bytes(const gem_model *m)
{
    if (!m)
        return 0;
    gem_model *mm = (gem_model *)(uintptr_t)m; /* the lock only */
    pthread_mutex_lock(&mm->pack_lock);
    const size_t b = m->packed_bytes;
    pthread_mutex_unlock(&mm->pack_lock);
    return b;
}

/* The matrices the CPU decoder multiplies: n_layers * 7 + 1 at most (out). */
static int64_t cpu_matrices(gem_model *m, gem_matrix **out)
{
    int64_t n = 0;
    for (int64_t i = 0; i < m->hp.n_layers; i++) {
        gem_layer *l = &m->layers[i];
        gem_matrix *w[7] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
        for (int k = 0; k < 7; k++)
            if (!(k == 2 && l->k_eq_v))
                out[n++] = w[k];
    }
    out[n++] = &m->output;
    return n;
}

typedef struct pack_job {
    gem_matrix **list; /* the packable matrices */
    unsigned char **dst;
} pack_job;

static void pack_item(void *ctx, int64_t i, int64_t thread)
{
    (void)thread;
    const pack_job *j = ctx;
    mv_pack(j->list[i], j->dst[i]);
}

/* Packs every packable matrix of the model for the CPU's integer products (matvec.h), once,
 * one matrix an item on the session's pool: the packed copy is a cache of the file's weights,
 * so a const model takes it under its lock. One allocation, freed with the model. The layout's
 * span suits the first session's thread count (mv_span_for); later sessions with other counts
 * compute the same bits from it. */
static gem_status model_cpu_pack(const gem_model *cm, cpu_pool *pool, char *err, size_t errlen)
{
    gem_model *m = (gem_model *)(uintptr_t)cm;
    gem_status st = GEM_OK;
    pthread_mutex_lock(&m->pack_lock);
    if (m->pack_done)
        goto out;
    const size_t max_n = (size_t)(m->hp.n_layers * 7 + 1);
    gem_matrix **list = malloc(max_n * sizeof *list);
    unsigned char **dst = malloc(max_n * sizeof *dst);
    if (!list || !dst) {
        free(list);
        free(dst);
        st = mfail(err, errlen, GEM_ERR_NOMEM, "out of memory packing the weights");
        goto out;
    }
    const int64_t all = cpu_matrices(m, list);
    int64_t n = 0;
    size_t total = 0;
    for (int64_t k = 0; k < all; k++)
        if (list[k]->data && mv_packable(list[k])) {
            size_t b;
            if ((st = gem_mul_size((size_t)list[k]->rows, list[k]->row_bytes, &b)) != GEM_OK ||
                (st = gem_add_size(total, b, &total)) != GEM_OK) {
                free(list);
                free(dst);
                st = mfail(err, errlen, st, "the packed weights do not fit size_t");
                goto out;
            }
            list[n++] = list[k];
        }
    void *mem = NULL;
    if (total && (st = cpu_stream_alloc(total, 0, &mem)) != GEM_OK) {
        free(list);
        free(dst);
        st = mfail(err, errlen, st, "out of memory packing %zu bytes of quantized weights for the "
                                    "CPU's integer products", total);
        goto out;
    }
    size_t at = 0;
    for (int64_t k = 0; k < n; k++) {
        dst[k] = (unsigned char *)mem + at;
        at += (size_t)list[k]->rows * list[k]->row_bytes;
        /* the layout's span for this session's pool (the same bits under any span) */
        list[k]->packed_span = mv_span_for(list[k], cpu_pool_threads(pool));
    }
    cpu_pool_run(pool, n, pack_item, &(pack_job){list, dst});
    int64_t max_cols = 0;
    for (int64_t k = 0; k < n; k++) {
        list[k]->packed = dst[k];
        max_cols = list[k]->cols > max_cols ? list[k]->cols : max_cols;
    }
    free(list);
    free(dst);
    m->pack_mem = mem;
    m->packed_bytes = total;
    m->packed_max_cols = max_cols;
    m->pack_done = 1;
out:
    pthread_mutex_unlock(&m->pack_lock);
    return st;
}

/* ---- session ---------------------------------------------------------------------------- */


static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The idle work of the session's pool: thread `thread` preloads its owned items of plan
 * `arg` (gem_session's ahead), a step of 4 KiB a call. */
static int ahead_idle(void *ctx, uint32_t arg, uint32_t seq, int64_t thread)
{
    gem_session *s = ctx;
    gem_ahead_pos *p = &s->ahead_pos[thread];
    if (p->seq != seq) {
        p->seq = seq;
        p->done = 0;
    }
    return mv_ahead_step(&s->ahead[arg], thread, &p->done, 4096) > 0;
}

/* The next product whose owned items the waiting threads preload (a plan of s->ahead). */
static void ahead_next(gem_session *s, int64_t plan)
{
    if (s->ahead)
        cpu_pool_idle_arg(s->pool, (uint32_t)plan);
}

static void *alloc64(size_t bytes);

/* The CPU session's preload plans (gem_session's ahead) and the pool's idle work; none on a
 * pool of one thread. */
static gem_status session_ahead(gem_session *s)
{
    const int64_t T = cpu_pool_threads(s->pool), L = s->m->hp.n_layers;
    if (T < 2)
        return GEM_OK;
    s->ahead = calloc((size_t)(4 * L + 1), sizeof *s->ahead);
    s->ahead_pos = alloc64((size_t)T * sizeof *s->ahead_pos);
    if (!s->ahead || !s->ahead_pos)
        return GEM_ERR_NOMEM;
    memset(s->ahead_pos, 0, (size_t)T * sizeof *s->ahead_pos);
    gem_status st = GEM_OK;
    for (int64_t li = 0; li < L && st == GEM_OK; li++) {
        const gem_layer *l = &s->m->layers[li];
        const gem_matrix *qkv[3] = {&l->wq, &l->wk, &l->wv}, *o = &l->wo,
                         *gu[2] = {&l->w_gate, &l->w_up}, *down = &l->w_down;
        if ((st = mv_ahead_plan(&s->ahead[4 * li], l->k_eq_v ? 2 : 3, qkv, T)) == GEM_OK &&
            (st = mv_ahead_plan(&s->ahead[4 * li + 1], 1, &o, T)) == GEM_OK &&
            (st = mv_pairable(gu[0], gu[1])
                      ? mv_ahead_plan_pair(&s->ahead[4 * li + 2], gu[0], gu[1], T)
                      : mv_ahead_plan(&s->ahead[4 * li + 2], 2, gu, T)) == GEM_OK)
            st = mv_ahead_plan(&s->ahead[4 * li + 3], 1, &down, T);
    }
    const gem_matrix *head = &s->m->output;
    if (st == GEM_OK)
        st = mv_ahead_plan(&s->ahead[4 * L], 1, &head, T);
    if (st != GEM_OK)
        return st;
    s->idle = (cpu_pool_idle){ahead_idle, s};
    cpu_pool_set_idle(s->pool, &s->idle);
    ahead_next(s, 0); /* the first layer's q/k/v */
    return GEM_OK;
}

static void *alloc64(size_t bytes)
{
    size_t r = (bytes + 63) / 64 * 64;
    return r >= bytes ? aligned_alloc(64, r ? r : 64) : NULL;
}

/* A CPU cache tensor, every page touched (zeroed) now: a decode step then never takes a page
 * fault for a new row (60 layers' new rows cost some 240 faults a token otherwise), and rows
 * never written read as zeros from memory of their own. (Untouched, they read the kernel's
 * one shared zero page from the caches: `gem profile` fills only the full layers' caches up
 * to the context, so its sliding layers' unwritten ring rows were timed that way, faster than
 * a real cache.) NULL on failure; released with free(). */
static void *cache_alloc(size_t bytes)
{
    void *p = alloc64(bytes);
    if (p)
        memset(p, 0, bytes);
    return p;
}

void gem_session_free(gem_session *s)
{
    if (!s)
        return;
    for (int64_t i = 0; s->kc && i < s->m->hp.n_layers; i++) {
        if (s->backend == GEM_BACKEND_CUDA) {
            gem_dev_free(s->kc[i]);
            gem_dev_free(s->vc[i]);
        } else {
            free(s->kc[i]);
            free(s->vc[i]);
        }
        free(s->inv_freq[i]);
    }
    if (s->backend == GEM_BACKEND_CUDA)
        gem_session_dev_free(s); /* also the device workspace */
    else
        free(s->ws);
    free(s->kc);
    free(s->vc);
    free(s->v_only);
    free(s->head_major);
    free(s->kfv);
    free(s->cap);
    free(s->inv_freq);
    for (int k = 0; k < 2; k++) {
        free(s->rope[k].freq);
        free(s->rope[k].cs);
    }
    free(s->x);
    free(s->xn);
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->kr);
    free(s->vr);
    free(s->head_rows);
    free(s->att);
    free(s->o);
    free(s->gate);
    free(s->up);
    free(s->lg);
    free(s->xq);
    if (s->ahead)
        cpu_pool_set_idle(s->pool, NULL); /* no thread inside ahead_idle from here on */
    free(s->ahead);
    free(s->ahead_pos);
    gem_decode_ctx_destroy(s->dctx);
    gem_decode_ctx_destroy(s->dctx1);
    free(s);
}

gem_decode_shape gem_layer_decode_shape(const gem_layer *l)
{
    return (gem_decode_shape){l->n_head, l->n_head_kv, l->head_dim, l->head_dim, 1.0f};
}

gem_kv_view gem_session_layer_view(const gem_session *s, int64_t li)
{
    const gem_layer *l = &s->m->layers[li];
    const int64_t hd = l->head_dim, nkv = l->n_head_kv, cap = s->cap[li];
    const int v_only = s->v_only[li];
    /* element strides per KV head and per token */
    const int64_t hs = s->head_major[li] ? cap * hd : hd, ts = s->head_major[li] ? hd : nkv * hd;
    return (gem_kv_view){v_only ? NULL : s->kc[li],
                         s->vc[li],
                         s->kv_dtype,
                         s->kv_dtype,
                         v_only ? 0 : hs,
                         v_only ? 0 : ts,
                         hs,
                         ts,
                         s->pos + 1 < cap ? s->pos + 1 : cap,
                         cap,
                         v_only ? &s->kfv[li] : NULL,
                         NULL,
                         NULL};
}

/* Angles below this at every position are left out of a rebuilt K's rotation. */
#define K_FROM_V_MIN_ANGLE 1e-9

/* The rotation that rebuilds the K rows of full layer l from its V rows over positions
 * [0, max_tokens): k_weight = k_norm, NeoX pairs (j, j + n_rot/2) turning by
 * inv_freq[j] (n_rot/2 of them) per position, row t at position t (pos0 = 0).
 *
 * n_pairs keeps the leading pairs whose angle can matter. A pair whose angle stays
 * below K_FROM_V_MIN_ANGLE at every position has cos = 1 exactly in double (1 - th^2/2
 * rounds to 1) and sin < 1e-9: the explicit row's rotation moves an element by less than
 * 1e-9 of its partner, at most one float rounding and only where the partner is some 60
 * times larger. Gemma 4's rope_freqs divide the frequencies of the pairs past the first
 * 64 by 1e30 (angles below 1e-25 at 2^17 positions): the explicit route applies those
 * rotations, the rebuilt K leaves them out. gem_k_from_v rotates a prefix of pairs, so the
 * pairs kept must be one: when a pair after the first negligible one can matter
 * (frequencies that do not fall with j), every pair rotates (n_pairs = n_rot / 2). A NaN
 * frequency counts as mattering, for gem_k_from_v_check to refuse. */
static gem_k_from_v k_from_v_of(const gem_layer *l, const double *inv_freq, int64_t max_tokens)
{
    const int64_t half = l->n_rot / 2;
    const double positions = (double)max_tokens;
    int64_t n_pairs = 0;
    while (n_pairs < half && !(inv_freq[n_pairs] * positions < K_FROM_V_MIN_ANGLE))
        n_pairs++;
    for (int64_t j = n_pairs; j < half; j++)
        if (!(inv_freq[j] * positions < K_FROM_V_MIN_ANGLE)) {
            n_pairs = half; /* the kept pairs would not be a prefix */
            break;
        }
    return (gem_k_from_v){l->k_norm, inv_freq, n_pairs, half, 0};
}

gem_status gem_session_create(const gem_model *m, const gem_session_opts *o, gem_session **out,
                              char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    if (!m || !o || !out)
        return GEM_ERR_NULL;
    *out = NULL;
    if (o->max_tokens < 1 || o->threads < 0 || o->threads > 4096 ||
        (o->full_route != GEM_ROUTE_BASELINE && o->full_route != GEM_ROUTE_FUSED))
        return mfail(err, errlen, GEM_ERR_PARAM,
                     "session options: max_tokens >= 1, threads 0..4096, route baseline or fused");
    if (o->kv_dtype != GEM_DTYPE_F32 && o->kv_dtype != GEM_DTYPE_BF16 &&
        o->kv_dtype != GEM_DTYPE_F16)
        return mfail(err, errlen, GEM_ERR_PARAM, "session options: kv_dtype f32, bf16 or f16");
    if (o->k_from_v != 0 && o->k_from_v != 1)
        return mfail(err, errlen, GEM_ERR_PARAM, "session options: k_from_v 0 or 1");
    if (o->backend != GEM_BACKEND_CPU && o->backend != GEM_BACKEND_CUDA)
        return mfail(err, errlen, GEM_ERR_PARAM, "session options: backend cpu or cuda");
    if (o->backend == GEM_BACKEND_CUDA && o->threads != 0)
        return mfail(err, errlen, GEM_ERR_PARAM,
                     "session options: threads must be 0 on the CUDA backend");
    if (o->backend == GEM_BACKEND_CUDA && !m->dev)
        return mfail(err, errlen, GEM_ERR_STATE,
                     "the model's weights are not on the device (gem_model_upload)");
    if (o->k_from_v && o->full_route != GEM_ROUTE_FUSED)
        return mfail(err, errlen, GEM_ERR_UNSUPPORTED,
                     "session options: K rebuilt from V (k_from_v) needs the fused route for the "
                     "full-attention layers; the baseline route reads a stored K");
    if (o->k_from_v && o->max_tokens > GEM_K_FROM_V_MAX_POS)
        return mfail(err, errlen, GEM_ERR_PARAM,
                     "session options: k_from_v covers max_tokens up to 2^40");
    const gem_hparams *hp = &m->hp;
    gem_session *s = calloc(1, sizeof *s);
    if (!s)
        return GEM_ERR_NOMEM;
    s->m = m;
    s->max_tokens = o->max_tokens;
    s->kv_dtype = o->kv_dtype;
    s->kv_es = o->kv_dtype == GEM_DTYPE_F32 ? 4 : 2;
    s->k_from_v = o->k_from_v;
    s->full_cfg = (gem_decode_config){o->full_route, o->full_partitions, o->full_tile};
    s->backend = o->backend;
    const int cuda = o->backend == GEM_BACKEND_CUDA;
    gem_status st = gem_decode_ctx_create(o->backend, o->threads, &s->dctx);
    if (st != GEM_OK) {
        mfail(err, errlen, st, "decode context: %s", gem_status_str(st));
        goto fail;
    }
    /* the CPU's matrix pool and one-thread context; the device has its kernels */
    if (!cuda && (st = gem_decode_ctx_create(GEM_BACKEND_CPU, 1, &s->dctx1)) != GEM_OK) {
        mfail(err, errlen, st, "decode context: %s", gem_status_str(st));
        goto fail;
    }
    /* the matrix products run on the decode context's workers: one pool, whose workers
     * poll between the layer's parallel regions instead of sleeping */
    if (!cuda)
        s->pool = gem_decode_ctx_cpu_pool(s->dctx);
    const int64_t L = hp->n_layers;
    s->kc = calloc((size_t)L, sizeof *s->kc);
    s->vc = calloc((size_t)L, sizeof *s->vc);
    s->cap = calloc((size_t)L, sizeof *s->cap);
    s->inv_freq = calloc((size_t)L, sizeof *s->inv_freq);
    s->v_only = calloc((size_t)L, sizeof *s->v_only);
    s->head_major = calloc((size_t)L, sizeof *s->head_major);
    s->kfv = calloc((size_t)L, sizeof *s->kfv);
    st = GEM_ERR_NOMEM;
    if (!s->kc || !s->vc || !s->cap || !s->inv_freq || !s->v_only || !s->kfv || !s->head_major)
        goto nomem;
    int64_t max_q = 0, max_k = 0, max_ff = 0, max_heads = 0;
    for (int64_t i = 0; i < L; i++) {
        const gem_layer *l = &m->layers[i];
        s->cap[i] = l->swa && hp->window < o->max_tokens ? hp->window : o->max_tokens;
        s->v_only[i] = o->k_from_v && !l->swa && l->k_eq_v;
        s->head_major[i] = !cuda && l->swa;
        size_t row = (size_t)l->n_head_kv * (size_t)l->head_dim, bytes, layer_bytes;
        if ((st = gem_mul_size(row, (size_t)s->cap[i], &bytes)) != GEM_OK ||
            (st = gem_mul_size(bytes, s->kv_es, &bytes)) != GEM_OK ||
            (st = gem_mul_size(bytes, s->v_only[i] ? 1 : 2, &layer_bytes)) != GEM_OK ||
            (st = gem_add_size(s->mem.held, layer_bytes, &s->mem.held)) != GEM_OK ||
            (st = gem_add_size(s->mem.saved, s->v_only[i] ? bytes : 0, &s->mem.saved)) !=
                GEM_OK) {
            mfail(err, errlen, st, "the KV cache of layer %lld does not fit size_t", (long long)i);
            goto fail;
        }
        s->mem.v_only_layers += s->v_only[i];
        st = GEM_ERR_NOMEM;
        if (cuda) {
            if ((!s->v_only[i] && gem_dev_alloc(bytes, &s->kc[i]) != GEM_OK) ||
                gem_dev_alloc(bytes, &s->vc[i]) != GEM_OK) {
                mfail(err, errlen, GEM_ERR_NOMEM,
                      "out of device memory for the KV cache of layer %lld (%zu bytes per tensor)",
                      (long long)i, bytes);
                goto fail;
            }
        } else {
            s->kc[i] = s->v_only[i] ? NULL : cache_alloc(bytes);
            s->vc[i] = cache_alloc(bytes);
        }
        s->inv_freq[i] = malloc((size_t)(l->n_rot / 2 + 1) * sizeof(double));
        if ((!s->v_only[i] && !s->kc[i]) || !s->vc[i] || !s->inv_freq[i])
            goto nomem;
        for (int64_t j = 0; j < l->n_rot / 2; j++) {
            double f = pow(l->rope_base, -2.0 * (double)j / (double)l->n_rot);
            if (!l->swa && m->rope_freqs)
                f /= (double)m->rope_freqs[j];
            s->inv_freq[i][j] = f;
        }
        const gem_decode_shape sh = gem_layer_decode_shape(l);
        /* the route the layer takes must read this cache type: refused here rather than at
         * the first token */
        const gem_route lroute = l->swa ? GEM_ROUTE_FUSED : s->full_cfg.route;
        if ((st = gem_decode_supports_route(s->dctx, &sh, s->kv_dtype, s->kv_dtype, lroute)) !=
            GEM_OK) {
            mfail(err, errlen, st, "layer %lld: the %s route of the %s backend does not read %s "
                                   "K/V caches (%s)",
                  (long long)i, gem_route_name(lroute), gem_backend_name(o->backend),
                  gem_dtype_name(s->kv_dtype), gem_status_str(st));
            goto fail;
        }
        if (s->v_only[i]) {
            s->kfv[i] = k_from_v_of(l, s->inv_freq[i], o->max_tokens);
            if ((st = gem_k_from_v_check(&s->kfv[i])) != GEM_OK ||
                (st = gem_decode_supports_k_from_v(s->dctx, &sh, s->kv_dtype, &s->kfv[i])) !=
                    GEM_OK) {
                mfail(err, errlen, st, "layer %lld: the decode cannot rebuild K from V: %s",
                      (long long)i, gem_status_str(st));
                goto fail;
            }
        }
        /* The workspace covers the session's route and, for full layers, the
         * two routes' defaults too (gem_session_set_route; a session that rebuilds
         * K from V never takes the baseline). */
        const gem_decode_config both[3] = {
            s->full_cfg, {GEM_ROUTE_FUSED, 0, 0}, {GEM_ROUTE_BASELINE, 0, 0}};
        for (int k = 0; k < (l->swa ? 1 : s->k_from_v ? 2 : 3); k++) {
            size_t ws = 0;
            st = gem_decode_workspace_bytes(s->dctx, &sh, s->cap[i], l->swa ? NULL : &both[k], &ws);
            if (st != GEM_OK) {
                mfail(err, errlen, st, "decode workspace of layer %lld: %s", (long long)i,
                      gem_status_str(st));
                goto fail;
            }
            if (ws > s->ws_bytes)
                s->ws_bytes = ws;
        }
        if (l->n_head * l->head_dim > max_q)
            max_q = l->n_head * l->head_dim;
        if (l->n_head_kv * l->head_dim > max_k)
            max_k = l->n_head_kv * l->head_dim;
        if (l->n_ff > max_ff)
            max_ff = l->n_ff;
        if (l->n_head + l->n_head_kv > max_heads)
            max_heads = l->n_head + l->n_head_kv;
    }
    if (cuda) {
        /* the device's scratch, workspace, stream and events; k_weight of the V-only
         * layers then points at the device's k_norm */
        if ((st = gem_session_dev_create(s, err, errlen)) != GEM_OK)
            goto fail;
        *out = s;
        return GEM_OK;
    }
    if ((st = model_cpu_pack(m, s->pool, err, errlen)) != GEM_OK)
        goto fail;
    /* the integer products' scratch: one x at a time (a batch's products share theirs);
     * packed_max_cols is fixed once model_cpu_pack has returned */
    s->xq_bytes = mv_xq_bytes(m->packed_max_cols);
    st = GEM_ERR_NOMEM;
    s->xq = alloc64(s->xq_bytes ? s->xq_bytes : 64);
    s->ws = alloc64(s->ws_bytes ? s->ws_bytes : 64);
    const size_t E = (size_t)hp->n_embd;
    s->x = alloc64(E * 4);
    s->xn = alloc64(E * 4);
    s->o = alloc64(E * 4);
    s->q = alloc64((size_t)max_q * 4);
    s->att = alloc64((size_t)max_q * 4);
    s->k = alloc64((size_t)max_k * 4);
    s->v = alloc64((size_t)max_k * 4);
    s->kr = alloc64((size_t)max_k * 4);
    s->vr = alloc64((size_t)max_k * 4);
    s->head_rows = alloc64((size_t)max_heads * sizeof *s->head_rows);
    s->gate = alloc64((size_t)max_ff * 4);
    const int64_t max_rot = hp->n_rot_full > hp->n_rot_swa ? hp->n_rot_full : hp->n_rot_swa;
    for (int k = 0; k < 2; k++) {
        s->rope[k].pos = -1;
        s->rope[k].freq = malloc((size_t)(max_rot / 2 + 1) * sizeof(double));
        s->rope[k].cs = malloc((size_t)(max_rot + 1) * sizeof(double));
        if (!s->rope[k].freq || !s->rope[k].cs)
            goto nomem;
    }
    s->up = alloc64((size_t)max_ff * 4);
    s->lg = alloc64((size_t)hp->n_vocab * 4);
    if (!s->xq || !s->ws || !s->x || !s->xn || !s->o || !s->q || !s->att || !s->k || !s->v || !s->gate ||
        !s->up || !s->kr || !s->vr || !s->head_rows || !s->lg)
        goto nomem;
    if ((st = session_ahead(s)) != GEM_OK) {
        mfail(err, errlen, st, "the products' preload plans: %s", gem_status_str(st));
        goto fail;
    }
    *out = s;
    return GEM_OK;
nomem:
    mfail(err, errlen, GEM_ERR_NOMEM, "out of memory for the KV caches and scratch");
fail:
    gem_session_free(s);
    return st;
}

const char *gem_session_describe(const gem_session *s)
{
    return s ? gem_decode_ctx_describe(s->dctx) : "";
}
gem_backend gem_session_backend(const gem_session *s) { return s ? s->backend : GEM_BACKEND_CPU; }

int64_t gem_session_pos(const gem_session *s) { return s ? s->pos : 0; }
void gem_session_reset(gem_session *s)
{
    if (s)
        s->pos = 0;
}
void gem_session_times(const gem_session *s, gem_stage_times *out)
{
    if (!s || !out)
        return;
    *out = s->t;
    if (s->whole_only) /* the CPU still laps its stages (free there); they are not reported */
        *out = (gem_stage_times){0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, s->t.total, s->t.tokens};
}
void gem_session_times_reset(gem_session *s)
{
    if (!s)
        return;
    memset(&s->t, 0, sizeof s->t);
    if (s->backend == GEM_BACKEND_CUDA) {
        (void)gem_decode_stage_clock_reset(s->dctx); /* one context on the device */
        return;
    }
    /* both contexts are CPU ones: the clock answers GEM_OK */
    (void)gem_decode_stage_clock_reset(s->dctx);
    (void)gem_decode_stage_clock_reset(s->dctx1);
}

/* The full layers' calls go to dctx or, when small, to dctx1, so both contexts' clocks
 * are switched and summed. Only the full layers take the baseline route (the sliding
 * layers run the decode default, the fused route), so the clocks hold full-attention
 * calls alone. */
gem_status gem_session_time_baseline_stages(gem_session *s, int on)
{
    if (!s)
        return GEM_ERR_NULL;
    if (on != 0 && on != 1)
        return GEM_ERR_PARAM;
    if (s->backend == GEM_BACKEND_CUDA)
        return gem_decode_stage_clock_set(s->dctx, on); /* CUDA events around the kernels */
    gem_status st = gem_decode_stage_clock_set(s->dctx, on);
    if (st == GEM_OK)
        st = gem_decode_stage_clock_set(s->dctx1, on);
    return st;
}

gem_status gem_session_baseline_stage_times(const gem_session *s, gem_baseline_stage_times *out)
{
    if (!s || !out)
        return GEM_ERR_NULL;
    gem_baseline_stage_seconds a, b;
    if (s->backend == GEM_BACKEND_CUDA) {
        gem_status st = gem_decode_stage_clock_read(s->dctx, &a);
        if (st == GEM_OK)
            *out = (gem_baseline_stage_times){a.score, a.normalize, a.value, a.reduce, a.calls};
        return st;
    }
    gem_status st = gem_decode_stage_clock_read(s->dctx, &a);
    if (st == GEM_OK)
        st = gem_decode_stage_clock_read(s->dctx1, &b);
    if (st != GEM_OK)
        return st;
    *out = (gem_baseline_stage_times){a.score + b.score, a.normalize + b.normalize,
                                      a.value + b.value, a.reduce + b.reduce, a.calls + b.calls};
    return GEM_OK;
}

gem_status gem_session_set_route(gem_session *s, gem_route route)
{
    if (!s)
        return GEM_ERR_NULL;
    if (route != GEM_ROUTE_BASELINE && route != GEM_ROUTE_FUSED)
        return GEM_ERR_PARAM;
    if (s->k_from_v && route != GEM_ROUTE_FUSED)
        return GEM_ERR_UNSUPPORTED; /* the V-only layers need the fused route */
    for (int64_t i = 0; i < s->m->hp.n_layers; i++) { /* the full layers read this cache type */
        const gem_layer *l = &s->m->layers[i];
        if (l->swa)
            continue;
        const gem_decode_shape sh = gem_layer_decode_shape(l);
        const gem_status st =
            gem_decode_supports_route(s->dctx, &sh, s->kv_dtype, s->kv_dtype, route);
        if (st != GEM_OK)
            return st;
    }
    if (route != s->full_cfg.route)
        s->full_cfg = (gem_decode_config){route, 0, 0};
    return GEM_OK;
}

gem_status gem_session_fill_repeat(gem_session *s, int64_t n)
{
    if (!s)
        return GEM_ERR_NULL;
    if (s->pos < 1 || n < s->pos || n > s->max_tokens)
        return GEM_ERR_RANGE;
    for (int64_t i = 0; i < s->m->hp.n_layers; i++) {
        const gem_layer *l = &s->m->layers[i];
        if (l->swa)
            continue;
        const size_t row = (size_t)l->n_head_kv * (size_t)l->head_dim * s->kv_es; /* bytes */
        char *kc = s->kc[i], *vc = s->vc[i]; /* kc NULL: V alone */
        if (s->backend == GEM_BACKEND_CUDA) {
            /* runs of up to pos rows, each a copy of the first rows */
            for (int64_t t = s->pos; t < n; t += s->pos) {
                const int64_t rows = n - t < s->pos ? n - t : s->pos;
                const size_t at = (size_t)t * row, len = (size_t)rows * row;
                gem_status st = GEM_OK;
                if (kc)
                    st = gem_dev_copy(s, kc + at, kc, len);
                if (st == GEM_OK)
                    st = gem_dev_copy(s, vc + at, vc, len);
                if (st != GEM_OK)
                    return st;
            }
            continue;
        }
        for (int64_t t = s->pos; t < n; t++) {
            if (kc)
                memcpy(kc + (size_t)t * row, kc + (size_t)(t % s->pos) * row, row);
            memcpy(vc + (size_t)t * row, vc + (size_t)(t % s->pos) * row, row);
        }
    }
    s->pos = n;
    return GEM_OK;
}

gem_status gem_session_copy(gem_session *dst, const gem_session *src)
{
    if (!dst || !src)
        return GEM_ERR_NULL;
    if (dst->m != src->m || dst->max_tokens != src->max_tokens ||
        dst->kv_dtype != src->kv_dtype || dst->k_from_v != src->k_from_v ||
        dst->backend != src->backend)
        return GEM_ERR_PARAM; /* the caches differ in size, type, place or what they hold */
    for (int64_t i = 0; i < src->m->hp.n_layers; i++) {
        const gem_layer *l = &src->m->layers[i];
        int64_t rows = src->pos < src->cap[i] ? src->pos : src->cap[i];
        if (src->head_major[i]) /* a head's rows are spread over its cap: all of it */
            rows = src->cap[i];
        /* within the allocation: rows <= cap */
        size_t n = (size_t)rows * (size_t)l->n_head_kv * (size_t)l->head_dim * src->kv_es;
        if (src->backend == GEM_BACKEND_CUDA) {
            gem_status st = GEM_OK;
            if (!src->v_only[i])
                st = gem_dev_copy(dst, dst->kc[i], src->kc[i], n);
            if (st == GEM_OK)
                st = gem_dev_copy(dst, dst->vc[i], src->vc[i], n);
            if (st != GEM_OK)
                return st;
            continue;
        }
        if (!src->v_only[i])
            memcpy(dst->kc[i], src->kc[i], n);
        memcpy(dst->vc[i], src->vc[i], n);
    }
    dst->pos = src->pos;
    return GEM_OK;
}

size_t gem_session_kv_bytes_at(const gem_session *s, int64_t pos)
{
    size_t total = 0;
    for (int64_t i = 0; s && i < s->m->hp.n_layers; i++) {
        const gem_layer *l = &s->m->layers[i];
        int64_t live = pos + 1 < s->cap[i] ? pos + 1 : s->cap[i];
        if (live < 1)
            continue;
        /* at most the bytes allocated, whose sum fits size_t (mem.held) */
        const size_t tensors = s->v_only[i] ? 1 : 2;
        total += tensors * (size_t)live * (size_t)l->n_head_kv * (size_t)l->head_dim * s->kv_es;
    }
    return total;
}

gem_status gem_session_kv_memory(const gem_session *s, gem_kv_memory *out)
{
    if (!s || !out)
        return GEM_ERR_NULL;
    *out = s->mem;
    return GEM_OK;
}

/* The sum of squares of rmsnorm: element i goes to lane i % NORM_LANES, the lanes are added in
 * a fixed tree, so the result is the same on every call (and vectorizes; one chain of n
 * dependent double adds took 2 us a norm at n = 1024, eight norms a layer). */
#define NORM_LANES 8
static double sum_squares(const float *x, int64_t n)
{
    double lane[NORM_LANES] = {0.0};
    int64_t i = 0;
    for (; i + NORM_LANES <= n; i += NORM_LANES)
        for (int k = 0; k < NORM_LANES; k++)
            lane[k] += (double)x[i + k] * (double)x[i + k];
    for (int k = 0; i < n; i++, k++)
        lane[k] += (double)x[i] * (double)x[i];
    for (int w = NORM_LANES / 2; w > 0; w /= 2)
        for (int k = 0; k < w; k++)
            lane[k] += lane[k + w];
    return lane[0];
}

/* out = x / sqrt(mean(x^2) + eps) (* w when w is not NULL). x (n), w (n), out (n);
 * out may be x. */
static void rmsnorm(const float *x, const float *w, int64_t n, double eps, float *out)
{
    const double ss = sum_squares(x, n);
    const double r = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) {
        float v = (float)((double)x[i] * r);
        out[i] = w ? v * w[i] : v;
    }
}

/* The rotation of position pos: cs[2j] = cos, cs[2j+1] = sin of pos * inv_freq[j]. */
static void rope_angles(int64_t n_rot, const double *inv_freq, int64_t pos, double *cs)
{
    for (int64_t j = 0; j < n_rot / 2; j++) {
        const double th = (double)pos * inv_freq[j];
        cs[2 * j] = cos(th);
        cs[2 * j + 1] = sin(th);
    }
}

/* The rotation of position pos for a layer's (n_rot, inv_freq): rope_angles' values, kept in
 * one of two slots so that the layers of one kind share one computation a token. */
static const double *rope_cached(gem_session *s, int64_t n_rot, const double *inv_freq,
                                 int64_t pos)
{
    const size_t fb = (size_t)(n_rot / 2) * sizeof(double);
    for (int k = 0; k < 2; k++)
        if (s->rope[k].pos == pos && s->rope[k].n_rot == n_rot &&
            memcmp(s->rope[k].freq, inv_freq, fb) == 0)
            return s->rope[k].cs;
    const int k = s->rope_next;
    s->rope_next ^= 1;
    memcpy(s->rope[k].freq, inv_freq, fb);
    s->rope[k].n_rot = n_rot;
    s->rope[k].pos = pos;
    rope_angles(n_rot, inv_freq, pos, s->rope[k].cs);
    return s->rope[k].cs;
}

/* NeoX RoPE on one head: x (head_dim), pairs (j, j + n_rot/2) for j < n_rot/2,
 * cs (n_rot) from rope_angles. */
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

/* The per-head norms and rotations of a layer's new q, K and V: item h < n_head normalizes
 * and rotates query head h in place; item n_head + g writes KV head g's K row (unless kr is
 * NULL: V-only layers) and V row. Each item's arithmetic is one head's, in the order of the
 * serial loop, so the pool gives the same bits. */
/* dst[0..n) = src by non-temporal stores where dst is 64-byte aligned (a head's row of a
 * cache: hd * 4 bytes from a 64-byte aligned base), plain ones otherwise. The caller fences
 * (stream_fence) once after its rows, before anything reads them. */
static void stream_row(float *dst, const float *src, int64_t n)
{
#if defined(__AVX512F__)
    if (((uintptr_t)dst & 63) == 0 && n % 16 == 0) {
        for (int64_t i = 0; i < n; i += 16)
            _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
        return;
    }
#endif
    memcpy(dst, src, (size_t)n * sizeof *dst);
}

/* Orders the non-temporal stores of stream_row before the loads that follow (the decode's;
 * the pool's hand-off then orders them for its workers). */
static void stream_fence(void)
{
#if defined(__AVX512F__)
    _mm_sfence();
#endif
}

typedef struct head_norm_job {
    const gem_layer *l;
    double eps;
    const double *cs;   /* (n_rot) the rotation of the position */
    float *q;           /* (n_head, head_dim) */
    const float *k, *v; /* (n_head_kv, head_dim) the projections */
    float *kr, *vr;     /* (n_head_kv, head_dim) the rows the cache gets; kr may be NULL */
    /* F32 head-major caches: head g's new K and V rows go to kc + g * hs and vc + g * hs
     * (elements) by non-temporal stores from the item that computes them; NULL otherwise */
    float *kc, *vc;
    int64_t hs;
} head_norm_job;

static void head_norm_item(void *ctx, int64_t item, int64_t thread)
{
    (void)thread;
    const head_norm_job *j = ctx;
    const gem_layer *l = j->l;
    const int64_t hd = l->head_dim;
    if (item < l->n_head) {
        float *qh = j->q + item * hd;
        rmsnorm(qh, l->q_norm, hd, j->eps, qh);
        rope(qh, l->n_rot, j->cs);
        return;
    }
    const int64_t g = item - l->n_head;
    if (j->kr) {
        rmsnorm(j->k + g * hd, l->k_norm, hd, j->eps, j->kr + g * hd);
        rope(j->kr + g * hd, l->n_rot, j->cs);
    }
    rmsnorm(j->v + g * hd, NULL, hd, j->eps, j->vr + g * hd);
    if (j->vc) { /* this thread's streaming stores, fenced before the pool hands off */
        if (j->kr && j->kc)
            stream_row(j->kc + g * j->hs, j->kr + g * hd, hd);
        stream_row(j->vc + g * j->hs, j->vr + g * hd, hd);
        stream_fence();
    }
}

/* The heads' norms inside the q/k/v products' run (mv_batch_then): each item that wrote rows of
 * a head's projections adds them to the head's count, and the one that completes it (q: the
 * head's head_dim rows of q; a KV head: its rows of k, and of v unless V is the raw K) computes
 * the head (head_norm_item), so the norms take no pool run of their own. The count's
 * acquire-release addition makes the other items' rows visible to that thread; which thread it
 * is changes no bit. */
typedef struct head_ready {
    const head_norm_job *j;
    int64_t n_head, hd, kv_rows; /* kv_rows: a KV head's rows, hd or 2 hd */
    int64_t *rows;               /* (n_head + n_head_kv), zero before the run */
} head_ready;

static void head_rows_done(void *ctx, int k, int64_t r0, int64_t r1)
{
    const head_ready *h = ctx;
    const int64_t base = k == 0 ? 0 : h->n_head, want = k == 0 ? h->hd : h->kv_rows;
    for (int64_t r = r0; r < r1;) {
        const int64_t head = r / h->hd, end = (head + 1) * h->hd < r1 ? (head + 1) * h->hd : r1;
        if (__atomic_add_fetch(&h->rows[base + head], end - r, __ATOMIC_ACQ_REL) == want)
            head_norm_item((void *)h->j, base + head, 0);
        r = end;
    }
}

static float gelu_tanh(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

/* An elementwise pass split into chunks on the pool: each element's arithmetic is the
 * serial loop's, so any split gives the same bits. */
typedef struct ew_job ew_job;
struct ew_job {
    void (*range)(const ew_job *j, int64_t i0, int64_t i1); /* the pass on [i0, i1) */
    float *a;       /* (n) in place */
    const float *b; /* (n) or NULL */
    double c;
    int64_t n, chunk;
};

/* The fewest elements a chunk takes (tanh costs some 20 ns an element: 2,048 of them on one
 * thread are 40 us; a chunk of 256 is 5 us); a pass has at most one chunk a thread. */
#define EW_MIN_CHUNK 256

/* a = gelu_tanh(a) * b on [i0, i1): GeGLU's activation (gate, up). */
static void geglu_range(const ew_job *j, int64_t i0, int64_t i1)
{
    for (int64_t i = i0; i < i1; i++)
        j->a[i] = gelu_tanh(j->a[i]) * j->b[i];
}

/* GeGLU's activation on the rows [r0, r1) an item of mv_pair computed: ctx an ew_job with a the
 * gate's output and b the up's (geglu_range's arithmetic, so the same bits). */
static void geglu_rows(void *ctx, int64_t r0, int64_t r1) { geglu_range(ctx, r0, r1); }

/* a = c tanh(a / c) on [i0, i1): the final logit softcap (c = cap). */
static void softcap_range(const ew_job *j, int64_t i0, int64_t i1)
{
    for (int64_t i = i0; i < i1; i++)
        j->a[i] = (float)(j->c * tanh((double)j->a[i] / j->c));
}

static void ew_item(void *ctx, int64_t item, int64_t thread)
{
    (void)thread;
    const ew_job *j = ctx;
    const int64_t i0 = item * j->chunk, i1 = i0 + j->chunk < j->n ? i0 + j->chunk : j->n;
    j->range(j, i0, i1);
}

/* j->range over n elements: chunks of at least EW_MIN_CHUNK, at most one a thread. */
static void elementwise(cpu_pool *pool, int64_t n, ew_job *j)
{
    if (n <= 0)
        return;
    int64_t items = n / EW_MIN_CHUNK;
    const int64_t threads = cpu_pool_threads(pool);
    items = items < 1 ? 1 : (items > threads ? threads : items);
    j->n = n;
    j->chunk = (n + items - 1) / items;
    items = (n + j->chunk - 1) / j->chunk;
    if (items > 1)
        cpu_pool_run(pool, items, ew_item, j);
    else
        j->range(j, 0, n);
}

/* dst (n) of type t (BF16 or F16) = src (n) rounded to nearest even; 0 when a finite value
 * became infinite in t (|x| >= 65520 for F16), else 1. */
static int store_half(void *dst, gem_dtype t, const float *src, int64_t n)
{
    uint16_t *d = dst;
    const uint16_t e = t == GEM_DTYPE_BF16 ? 0x7F80u : 0x7C00u;
    uint16_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        d[i] = t == GEM_DTYPE_BF16 ? gem_f32_to_bf16(src[i]) : gem_f32_to_f16(src[i]);
        bad |= (uint16_t)((d[i] & e) == e);
    }
    return !bad;
}


/* The index of the largest of x (n >= 1), the lowest among equal values: the order of
 * gem_dargmax (a NaN never wins; 0 when no value is a number). */
static int32_t host_argmax(const float *x, int64_t n)
{
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best]))
            best = i;
    return best < 0 ? 0 : (int32_t)best;
}

gem_status gem_session_eval_argmax(gem_session *s, int32_t token, int32_t *argmax)
{
    if (!s || !argmax)
        return GEM_ERR_NULL;
    const gem_hparams *hp = &s->m->hp;
    if (s->pos >= s->max_tokens || token < 0 || token >= hp->n_vocab)
        return GEM_ERR_RANGE;
    if (s->backend == GEM_BACKEND_CUDA)
        return gem_session_dev_eval(s, token, NULL, argmax);
    const gem_status st = gem_session_eval(s, token, s->lg);
    if (st == GEM_OK)
        *argmax = host_argmax(s->lg, hp->n_vocab);
    return st;
}

gem_status gem_session_greedy(gem_session *s, int32_t token, int64_t n, int32_t *out,
                              int64_t *made, int (*on_token)(void *user, int32_t token),
                              void *user)
{
    if (!s || !out || !made)
        return GEM_ERR_NULL;
    *made = 0;
    if (n < 1 || n > s->max_tokens - s->pos || token < 0 || token >= s->m->hp.n_vocab)
        return GEM_ERR_RANGE;
    if (s->backend == GEM_BACKEND_CUDA)
        return gem_session_dev_greedy(s, token, n, out, made, on_token, user);
    for (int64_t i = 0; i < n; i++) {
        const gem_status st = gem_session_eval_argmax(s, i ? out[i - 1] : token, &out[i]);
        if (st != GEM_OK)
            return st;
        *made = i + 1;
        if (on_token && on_token(user, out[i]))
            break;
    }
    return GEM_OK;
}

gem_status gem_session_eval(gem_session *s, int32_t token, float *logits)
{
    if (!s)
        return GEM_ERR_NULL;
    const gem_model *m = s->m;
    const gem_hparams *hp = &m->hp;
    if (s->pos >= s->max_tokens || token < 0 || token >= hp->n_vocab)
        return GEM_ERR_RANGE;
    if (s->backend == GEM_BACKEND_CUDA)
        return gem_session_dev_eval(s, token, logits, NULL);
    const int64_t E = hp->n_embd, pos = s->pos;
    const mv_scratch xq = {s->xq, s->xq_bytes};
    gem_status st;
    double t0 = now(), t1;
#define LAP(field) (t1 = now(), s->t.field += t1 - t0, t0 = t1)
    mv_row_f32(&m->tok_embd, token, s->x);
    const float es = sqrtf((float)E);
    for (int64_t i = 0; i < E; i++)
        s->x[i] *= es;
    LAP(embed);
    for (int64_t li = 0; li < hp->n_layers; li++) {
        const gem_layer *l = &m->layers[li];
        const int64_t hd = l->head_dim, nkv = l->n_head_kv;
        rmsnorm(s->x, l->attn_norm, E, hp->eps, s->xn);
        LAP(norms);
        ahead_next(s, 4 * li + 1); /* q/k/v's and the attention's waits preload o */
        const double *cs = rope_cached(s, l->n_rot, s->inv_freq[li], pos);
        const int v_only = s->v_only[li]; /* V stored alone, K rebuilt by the decode */
        const int64_t row = l->swa ? pos % s->cap[li] : pos;
        const int hm = s->head_major[li];
        /* the new row: head g at element row * nkv * hd + g * hd (token-major) or
         * (g * cap + row) * hd (head-major) */
        const int64_t hs = hm ? s->cap[li] * hd : hd;
        const size_t row_off =
            (size_t)row * (size_t)(hm ? hd : nkv * hd) * s->kv_es; /* bytes, head 0 */
        char *kdst = v_only ? NULL : (char *)s->kc[li] + row_off;
        char *vdst = (char *)s->vc[li] + row_off;
        /* F32 token-major caches take the rows in place; 16-bit ones from F32 scratch,
         * rounded, and F32 head-major ones from it by the norm items' streaming stores (32
         * runs of 1 KiB in as many pages a layer: written in place, each line's read for
         * ownership cost the norms stage 0.4-0.7 ms a token on the Xeon, runs 68-70; copied
         * by the caller, 0.3 ms, run 71) */
        const int in_place = s->kv_dtype == GEM_DTYPE_F32 && !hm;
        float *kr = in_place && !v_only ? (float *)(void *)kdst : s->kr;
        float *vr = in_place ? (float *)(void *)vdst : s->vr;
        {
            /* F32 head-major: the items store their heads' rows (in parallel) */
            const int hm32 = hm && s->kv_dtype == GEM_DTYPE_F32;
            const head_norm_job j = {l,
                                     hp->eps,
                                     cs,
                                     s->q,
                                     s->k,
                                     l->k_eq_v ? s->k : s->v, /* V is the raw K projection */
                                     v_only ? NULL : kr,
                                     vr,
                                     hm32 && !v_only ? (float *)(void *)kdst : NULL,
                                     hm32 ? (float *)(void *)vdst : NULL,
                                     hs};
            const head_ready ready = {&j, l->n_head, hd, l->k_eq_v ? hd : 2 * hd, s->head_rows};
            memset(s->head_rows, 0, (size_t)(l->n_head + nkv) * sizeof *s->head_rows);
            const gem_matrix *w[3] = {&l->wq, &l->wk, &l->wv};
            const float *xs[3] = {s->xn, s->xn, s->xn};
            float *ys[3] = {s->q, s->k, s->v};
            if ((st = mv_batch_then(s->pool, l->k_eq_v ? 2 : 3, w, xs, &xq, ys, head_rows_done,
                                    (void *)&ready)) != GEM_OK)
                return st;
        }
        LAP(proj);
        /* what the cache stores must be finite */
        if ((!v_only && !gem_cpu_floats_finite(kr, nkv * hd)) ||
            !gem_cpu_floats_finite(vr, nkv * hd))
            return GEM_ERR_NONFINITE;
        if (s->kv_dtype != GEM_DTYPE_F32) /* head g from the scratch's g * hd to g * hs */
            for (int64_t g = 0; g < (hm ? nkv : 1); g++) {
                const int64_t n = hm ? hd : nkv * hd;
                const size_t off = (size_t)(g * hs) * s->kv_es; /* bytes from head 0's row */
                if ((!v_only && !store_half(kdst + off, s->kv_dtype, kr + g * hd, n)) ||
                    !store_half(vdst + off, s->kv_dtype, vr + g * hd, n))
                    return GEM_ERR_NONFINITE; /* a finite value past the 16-bit type's range */
            }
        LAP(norms);
        const gem_kv_view view = gem_session_layer_view(s, li);
        const int64_t live = view.live;
        const gem_decode_shape sh = gem_layer_decode_shape(l);
        /* Cache rows this call reads: below 1 MiB one thread does it. */
        const size_t kv_bytes = (size_t)live * (size_t)(nkv * hd) * (v_only ? 1 : 2) * s->kv_es;
        /* a call that reads more than a quarter of an L2 a thread evicts what the threads
         * preloaded before it: o's preload starts over for the call's end */
        if (s->ahead && kv_bytes / (size_t)cpu_pool_threads(s->pool) > s->ahead[4 * li + 1].budget / 4)
            ahead_next(s, 4 * li + 1);
        st =
            gem_decode(kv_bytes < ((size_t)1 << 20) ? s->dctx1 : s->dctx, &sh, s->q, &view, s->att,
                       s->ws, s->ws_bytes, l->swa ? NULL : &s->full_cfg, NULL);
        if (st != GEM_OK)
            return st;
        if (l->swa)
            LAP(attn_swa);
        else
            LAP(attn_full);
        ahead_next(s, 4 * li + 2); /* gate/up */
        if ((st = mv(s->pool, &l->wo, s->att, &xq, s->o)) != GEM_OK)
            return st;
        LAP(proj);
        rmsnorm(s->o, l->post_attn_norm, E, hp->eps, s->o);
        for (int64_t i = 0; i < E; i++)
            s->x[i] += s->o[i];
        rmsnorm(s->x, l->ffn_norm, E, hp->eps, s->xn);
        LAP(norms);
        ahead_next(s, 4 * li + 3); /* down */
        if (mv_pairable(&l->w_gate, &l->w_up)) {
            /* the activation by the item that computed the rows: no pass of its own (one pool
             * run a layer fewer) */
            ew_job act = {geglu_range, s->gate, s->up, 0.0, l->n_ff, 0};
            if ((st = mv_pair(s->pool, &l->w_gate, &l->w_up, s->xn, &xq, s->gate, s->up,
                              geglu_rows, &act)) != GEM_OK)
                return st;
        } else {
            const gem_matrix *w[2] = {&l->w_gate, &l->w_up};
            const float *xs[2] = {s->xn, s->xn};
            float *ys[2] = {s->gate, s->up};
            if ((st = mv_batch(s->pool, 2, w, xs, &xq, ys)) != GEM_OK)
                return st;
            elementwise(s->pool, l->n_ff, &(ew_job){geglu_range, s->gate, s->up, 0.0, 0, 0});
        }
        ahead_next(s, 4 * (li + 1)); /* the next layer's q/k/v, after the last the head */
        if ((st = mv(s->pool, &l->w_down, s->gate, &xq, s->o)) != GEM_OK)
            return st;
        LAP(mlp);
        rmsnorm(s->o, l->post_ffn_norm, E, hp->eps, s->o);
        for (int64_t i = 0; i < E; i++)
            s->x[i] = (s->x[i] + s->o[i]) * l->out_scale;
        LAP(norms);
    }
    rmsnorm(s->x, m->output_norm, E, hp->eps, s->xn);
    LAP(norms);
    s->pos++;
    if (!logits)
        ahead_next(s, 0); /* the next token's first q/k/v (not the head) */
    if (logits) {
        if ((st = mv(s->pool, &m->output, s->xn, &xq, logits)) != GEM_OK)
            return st;
        if (hp->softcap > 0)
            elementwise(s->pool, hp->n_vocab,
                        &(ew_job){softcap_range, logits, NULL, hp->softcap, 0, 0});
        LAP(logits);
        ahead_next(s, 0); /* the next token's first q/k/v */
        if (!gem_cpu_floats_finite(logits, hp->n_vocab))
            return GEM_ERR_NONFINITE;
    }
#undef LAP
    s->t.tokens++;
    s->t.total = s->t.embed + s->t.norms + s->t.proj + s->t.attn_swa + s->t.attn_full + s->t.mlp +
                 s->t.logits;
    return GEM_OK;
}

gem_status gem_session_time_stages(gem_session *s, int on)
{
    if (!s)
        return GEM_ERR_NULL;
    if (on != 0 && on != 1)
        return GEM_ERR_PARAM;
    s->whole_only = !on;
    gem_session_times_reset(s);
    return GEM_OK;
}
