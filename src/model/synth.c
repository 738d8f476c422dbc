/*
 * Synthetic Gemma 4 GGUF files: seeded random weights in the layout llama.cpp's
 * converter writes for `gemma4` (the same keys, tensor names, shapes, vector
 * types and rope_freqs), and a small BPE vocabulary learned from a fixed text.
 * The bytes depend only on the spec (and so on the seed): CI regenerates the
 * test fixture and checks its SHA-256.
 *
 * Weights: element i of tensor k is uniform in [-a, a) from SplitMix64 on
 * (seed, k, i), with a = 1/sqrt(fan_in) for matrices and 0.5 for the embedding;
 * norm weights lie in [0.5, 1.5) (post-attention and post-MLP norms in [2, 4), so
 * that the layers, not the token's own embedding, dominate the residual stream
 * and greedy decoding does not just repeat the last token), q/k norm weights in
 * [0.15, 0.35) (so that the attention logits of the random model stay near unit
 * scale at D512) and layer output scales in [0.5, 1.5).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gem/model.h"

/* ---- presets ---------------------------------------------------------------------- */

gem_status gem_synth_preset(const char *name, gem_synth_spec *out)
{
    if (!name || !out)
        return GEM_ERR_NULL;
    gem_synth_spec s = {
        .seed = 1,
        .n_head = 32,
        .n_head_kv_full = 4,
        .head_dim_full = 512,
        .full_every = 6,
        .rope_base_full = 1e6,
        .rope_base_swa = 1e4,
        .partial_rotary_full = 0.25,
        .softcap = 30.0,
        .eps = 1e-6,
        .context_length = 131072,
        .type = GEM_SYNTH_MIXED,
    };
    if (!strcmp(name, "tiny")) {
        s.name = "gem-synth-tiny";
        s.n_layers = 6, s.n_embd = 64, s.n_ff = 256, s.n_vocab = 512;
        s.n_head_kv_swa = 8, s.head_dim_swa = 64, s.window = 8;
        s.full_every = 3;
    } else if (!strcmp(name, "diff")) {
        s.name = "gem-synth-diff60";
        s.n_layers = 60, s.n_embd = 64, s.n_ff = 256, s.n_vocab = 512;
        s.n_head_kv_swa = 8, s.head_dim_swa = 64, s.window = 64;
        s.type = GEM_GGUF_Q8_0;
    } else if (!strcmp(name, "2gb")) {
        s.name = "gem-synth-2gb";
        s.n_layers = 60, s.n_embd = 1024, s.n_ff = 2048, s.n_vocab = 32768;
        s.n_head_kv_swa = 16, s.head_dim_swa = 256, s.window = 1024;
        s.type = GEM_GGUF_Q8_0;
    } else if (!strcmp(name, "31b")) {
        s.name = "gem-synth-31b";
        s.n_layers = 60, s.n_embd = 5376, s.n_ff = 21504, s.n_vocab = 262144;
        s.n_head_kv_swa = 16, s.head_dim_swa = 256, s.window = 1024;
        s.type = GEM_GGUF_Q4_K;
    } else {
        return GEM_ERR_PARAM;
    }
    *out = s;
    return GEM_OK;
}

/* ---- vocabulary ---------------------------------------------------------------------- */

static const char corpus[] =
    "The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun.\n"
    "A long context needs attention over every earlier token, and the keys and values of\n"
    "each token are read once from memory for every new token that the model writes.\n"
    "Gemma models use sliding window layers and full attention layers in turn; the full\n"
    "layers see the whole history while the sliding layers see only the most recent tokens.\n"
    "In the beginning there was the word, and the word was read, split into pieces, and each\n"
    "piece became a number that the network could understand and answer with another one.\n"
    "Numbers such as 12345 and 67890 appear too, with punctuation: commas, periods; colons!\n"
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.\n"
    "Every test of the decoder compares its tokens with the reference, one token at a time.\n";

typedef struct vocab {
    char **text;
    uint64_t *len;
    int32_t *type;
    int64_t n, cap;
    char **merges;
    uint64_t *mlen;
    int64_t n_merges, merges_cap;
} vocab;

static int v_add(vocab *v, const char *s, size_t n, int32_t type)
{
    if (v->n == v->cap)
        return -1;
    v->text[v->n] = malloc(n + 1);
    if (!v->text[v->n])
        return -1;
    memcpy(v->text[v->n], s, n);
    v->text[v->n][n] = 0;
    v->len[v->n] = n;
    v->type[v->n] = type;
    v->n++;
    return 0;
}

static int64_t v_find(const vocab *v, const char *s, size_t n)
{
    for (int64_t i = 0; i < v->n; i++)
        if (v->len[i] == n && !memcmp(v->text[i], s, n))
            return i;
    return -1;
}

/* Symbols of the training text: each line a sequence of (offset, length). */
typedef struct seg {
    uint32_t off, len;
} seg;

/* Learns merges from the corpus (spaces as U+2581, lines apart) until the
 * vocabulary holds `target` tokens or no pair occurs twice. The most frequent
 * adjacent pair wins, ties to the lexicographically smallest (left, right). */
static int learn_merges(vocab *v, const char *text, size_t n, int64_t target)
{
    seg *s = malloc(n * sizeof *s);
    uint8_t *line_end = calloc(n, 1);
    if (!s || !line_end) {
        free(s);
        free(line_end);
        return -1;
    }
    size_t ns = 0;
    for (size_t i = 0; i < n;) {
        if (text[i] == '\n') {
            if (ns)
                line_end[ns - 1] = 1;
            i++;
            continue;
        }
        size_t cl = (text[i] & 0x80) ? 3 : 1; /* the text is ASCII plus U+2581 */
        s[ns++] = (seg){(uint32_t)i, (uint32_t)cl};
        i += cl;
    }
    int rc = 0;
    while (v->n < target) {
        /* Count pairs by scanning: the corpus is small. */
        size_t best_i = SIZE_MAX, best_c = 1;
        for (size_t i = 0; i + 1 < ns; i++) {
            if (line_end[i])
                continue;
            size_t c = 0;
            for (size_t j = 0; j + 1 < ns; j++)
                if (!line_end[j] && s[j].len == s[i].len && s[j + 1].len == s[i + 1].len &&
                    !memcmp(text + s[j].off, text + s[i].off, s[i].len) &&
                    !memcmp(text + s[j + 1].off, text + s[i + 1].off, s[i + 1].len))
                    c++;
            int better = c > best_c;
            if (c == best_c && c > 1 && best_i != SIZE_MAX) {
                /* tie: compare (left, right) byte strings */
                size_t la = s[i].len + s[i + 1].len, lb = s[best_i].len + s[best_i + 1].len;
                int r = memcmp(text + s[i].off, text + s[best_i].off, la < lb ? la : lb);
                better = r < 0 || (r == 0 && la < lb);
            }
            if (better) {
                best_c = c;
                best_i = i;
            }
        }
        if (best_i == SIZE_MAX)
            break;
        const seg L = s[best_i], R = s[best_i + 1];
        char buf[256];
        if (L.len + R.len + 1 > sizeof buf)
            break;
        /* merge rule "left right" */
        memcpy(buf, text + L.off, L.len);
        buf[L.len] = ' ';
        memcpy(buf + L.len + 1, text + R.off, R.len);
        if (v->n_merges == v->merges_cap) {
            rc = -1;
            break;
        }
        v->merges[v->n_merges] = malloc(L.len + R.len + 1);
        if (!v->merges[v->n_merges]) {
            rc = -1;
            break;
        }
        memcpy(v->merges[v->n_merges], buf, L.len + R.len + 1);
        v->mlen[v->n_merges++] = L.len + R.len + 1;
        /* the merged token (its text is contiguous in the corpus) */
        if (v_find(v, text + L.off, L.len + R.len) < 0 &&
            v_add(v, text + L.off, L.len + R.len, GEM_TOK_NORMAL)) {
            rc = -1;
            break;
        }
        /* apply the merge everywhere, left to right */
        char pair[256];
        memcpy(pair, text + L.off, L.len + R.len);
        const uint32_t ll = L.len, rl = R.len;
        size_t w = 0;
        for (size_t i = 0; i < ns; i++) {
            if (i + 1 < ns && !line_end[i] && s[i].len == ll && s[i + 1].len == rl &&
                !memcmp(text + s[i].off, pair, ll) && !memcmp(text + s[i + 1].off, pair + ll, rl)) {
                s[w] = (seg){s[i].off, ll + rl};
                line_end[w] = line_end[i + 1];
                w++;
                i++;
            } else {
                s[w] = s[i];
                line_end[w] = line_end[i];
                w++;
            }
        }
        ns = w;
    }
    free(s);
    free(line_end);
    return rc;
}

static void vocab_free(vocab *v)
{
    for (int64_t i = 0; i < v->n; i++)
        free(v->text[i]);
    for (int64_t i = 0; i < v->n_merges; i++)
        free(v->merges[i]);
    free(v->text);
    free(v->len);
    free(v->type);
    free(v->merges);
    free(v->mlen);
}

/* Specials, byte tokens, ASCII characters and U+2581, newline runs, learned merges,
 * then <unusedN> up to n_vocab. */
static int build_vocab(vocab *v, int64_t n_vocab)
{
    memset(v, 0, sizeof *v);
    v->cap = n_vocab;
    v->merges_cap = n_vocab;
    v->text = calloc((size_t)n_vocab, sizeof *v->text);
    v->len = calloc((size_t)n_vocab, sizeof *v->len);
    v->type = calloc((size_t)n_vocab, sizeof *v->type);
    v->merges = calloc((size_t)n_vocab, sizeof *v->merges);
    v->mlen = calloc((size_t)n_vocab, sizeof *v->mlen);
    if (!v->text || !v->len || !v->type || !v->merges || !v->mlen)
        return -1;
    static const struct {
        const char *s;
        int32_t type;
    } specials[] = {{"<pad>", GEM_TOK_CONTROL},  {"<eos>", GEM_TOK_CONTROL},
                    {"<bos>", GEM_TOK_CONTROL},  {"<unk>", GEM_TOK_UNKNOWN},
                    {"<mask>", GEM_TOK_USER},    {"<|turn>", GEM_TOK_CONTROL},
                    {"<turn|>", GEM_TOK_CONTROL}};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        if (v_add(v, specials[i].s, strlen(specials[i].s), specials[i].type))
            return -1;
    for (int b = 0; b < 256; b++) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", b);
        if (v_add(v, t, 6, GEM_TOK_BYTE))
            return -1;
    }
    if (v_add(v, "\n", 1, GEM_TOK_NORMAL) || v_add(v, "\n\n", 2, GEM_TOK_NORMAL) ||
        v_add(v, "\xe2\x96\x81", 3, GEM_TOK_NORMAL))
        return -1;
    for (int c = 33; c < 127; c++) {
        char ch = (char)c;
        if (v_add(v, &ch, 1, GEM_TOK_NORMAL))
            return -1;
    }
    /* the corpus with spaces written as U+2581 */
    size_t n = 0;
    for (const char *p = corpus; *p; p++)
        n += *p == ' ' ? 3 : 1;
    char *text = malloc(n + 1);
    if (!text)
        return -1;
    size_t j = 0;
    for (const char *p = corpus; *p; p++) {
        if (*p == ' ') {
            memcpy(text + j, "\xe2\x96\x81", 3);
            j += 3;
        } else {
            text[j++] = *p;
        }
    }
    int rc = learn_merges(v, text, n, n_vocab);
    free(text);
    if (rc)
        return -1;
    for (int64_t k = 0; v->n < n_vocab; k++) {
        char t[32];
        int len = snprintf(t, sizeof t, "<unused%lld>", (long long)k);
        if (v_add(v, t, (size_t)len, GEM_TOK_UNUSED))
            return -1;
    }
    return 0;
}

/* ---- weights ----------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Uniform in [lo, hi) for element i of stream (seed, k). */
static float uni(uint64_t seed, uint64_t k, uint64_t i, float lo, float hi)
{
    uint64_t r = splitmix64(splitmix64(seed ^ (k * 0xD1B54A32D192ED03ull)) + i);
    float u = (float)(r >> 40) * 0x1p-24f;
    return lo + (hi - lo) * u;
}

typedef enum tkind { T_MATRIX, T_EMBED, T_NORM, T_POSTNORM, T_QKNORM, T_SCALE, T_ROPE } tkind;

typedef struct tinfo {
    char name[GEM_GGUF_MAX_NAME];
    gem_gguf_type type;
    int64_t ne0, ne1; /* ne1 = 0: a vector */
    tkind kind;
} tinfo;

typedef struct synth_ctx {
    const gem_synth_spec *spec;
    tinfo *t;
    int64_t n;
    int64_t rope_rot; /* rotated pairs of the full layers */
} synth_ctx;

static int fill(void *user, int64_t index, void *dst, size_t bytes)
{
    const synth_ctx *c = user;
    const tinfo *t = &c->t[index];
    const uint64_t seed = c->spec->seed, k = (uint64_t)index + 1;
    const int64_t rows = t->ne1 ? t->ne1 : 1;
    float *row = malloc((size_t)t->ne0 * sizeof *row);
    if (!row)
        return -1;
    size_t rb;
    if (gem_gguf_row_bytes(t->type, t->ne0, &rb) != GEM_OK || rb * (size_t)rows != bytes) {
        free(row);
        return -1;
    }
    const float a = t->kind == T_EMBED ? 0.5f : 1.0f / sqrtf((float)t->ne0);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < t->ne0; i++) {
            const uint64_t e = (uint64_t)(r * t->ne0 + i);
            switch (t->kind) {
            case T_MATRIX:
            case T_EMBED: row[i] = uni(seed, k, e, -a, a); break;
            case T_NORM:
            case T_SCALE: row[i] = uni(seed, k, e, 0.5f, 1.5f); break;
            case T_POSTNORM: row[i] = uni(seed, k, e, 2.0f, 4.0f); break;
            case T_QKNORM: row[i] = uni(seed, k, e, 0.15f, 0.35f); break;
            case T_ROPE: row[i] = i < c->rope_rot ? 1.0f : 1e30f; break;
            }
        }
        if (gem_gguf_quantize(t->type, row, (uint8_t *)dst + (size_t)r * rb, t->ne0) != GEM_OK) {
            free(row);
            return -1;
        }
    }
    free(row);
    return 0;
}

/* llama.cpp's use_more_bits: the first and the last eighth of n, and every third one
 * between. n <= GEM_MODEL_MAX_LAYERS, so 7 * n cannot overflow. */
static int more_bits(int64_t i, int64_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The type of a matrix: the spec's type; or the mix, which gives every role a
 * rotation of types over the layers so that each type gemm reads appears
 * (Q4_K and Q6_K where rows are multiples of 256); or llama.cpp's Q4_K_M
 * assignment: Q6_K for the embedding (the tied head: synth writes no output.weight),
 * for attn_v and ffn_down where more_bits(i, n) holds, with i the matrix's place
 * among the n of its role in layer order (attn_v: the layers that have one), and
 * Q4_K elsewhere. Rows that do not fit the block fall back to Q8_0 and then F32. */
enum { R_EMBED, R_Q, R_K, R_V, R_O, R_GATE, R_UP, R_DOWN };
static gem_gguf_type mat_type(const gem_synth_spec *s, int64_t ne0, int role, int64_t layer,
                              int64_t i, int64_t n)
{
    static const gem_gguf_type mix[8][3] = {
        [R_EMBED] = {GEM_GGUF_Q8_0, GEM_GGUF_Q8_0, GEM_GGUF_Q8_0},
        [R_Q] = {GEM_GGUF_Q8_0, GEM_GGUF_Q4_0, GEM_GGUF_F16},
        [R_K] = {GEM_GGUF_BF16, GEM_GGUF_Q8_0, GEM_GGUF_F32},
        [R_V] = {GEM_GGUF_F16, GEM_GGUF_Q4_0, GEM_GGUF_Q8_0},
        [R_O] = {GEM_GGUF_Q4_K, GEM_GGUF_Q6_K, GEM_GGUF_Q8_0},
        [R_GATE] = {GEM_GGUF_Q4_0, GEM_GGUF_Q8_0, GEM_GGUF_BF16},
        [R_UP] = {GEM_GGUF_Q8_0, GEM_GGUF_F16, GEM_GGUF_Q4_0},
        [R_DOWN] = {GEM_GGUF_Q6_K, GEM_GGUF_Q4_K, GEM_GGUF_BF16},
    };
    gem_gguf_type t = (gem_gguf_type)s->type;
    if (s->type == GEM_SYNTH_MIXED)
        t = mix[role][layer % 3];
    else if (s->type == GEM_SYNTH_Q4_K_M)
        t = role == R_EMBED || ((role == R_V || role == R_DOWN) && more_bits(i, n))
                ? GEM_GGUF_Q6_K
                : GEM_GGUF_Q4_K;
    size_t rb;
    if (gem_gguf_row_bytes(t, ne0, &rb) == GEM_OK)
        return t;
    if (gem_gguf_row_bytes(GEM_GGUF_Q8_0, ne0, &rb) == GEM_OK)
        return GEM_GGUF_Q8_0;
    return GEM_GGUF_F32;
}

/* llama.cpp's general.file_type of a single-type file (7, "mostly Q8_0", for the mix;
 * 15, "mostly Q4_K_M", for the Q4_K_M assignment and for Q4_K alone). */
static uint32_t file_type(int32_t t)
{
    switch (t) {
    case GEM_GGUF_F32: return 0;
    case GEM_GGUF_F16: return 1;
    case GEM_GGUF_Q4_0: return 2;
    case GEM_GGUF_Q4_K: return 15;
    case GEM_GGUF_Q6_K: return 18;
    case GEM_GGUF_BF16: return 32;
    case GEM_SYNTH_Q4_K_M: return 15;
    default: return 7;
    }
}

static gem_status sfail(char *err, size_t errlen, gem_status st, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
    return st;
}

gem_status gem_synth_write(const gem_synth_spec *s, const char *path, char *err, size_t errlen)
{
    if (!s || !path)
        return GEM_ERR_NULL;
    if (s->n_layers < 1 || s->n_layers > GEM_MODEL_MAX_LAYERS || s->n_embd < 1 || s->n_ff < 1 ||
        s->n_vocab < 512 || s->n_vocab > INT32_MAX || s->n_head < 1 || s->n_head_kv_swa < 1 ||
        s->n_head_kv_full < 1 || s->n_head % s->n_head_kv_swa || s->n_head % s->n_head_kv_full ||
        s->head_dim_swa < 2 || s->head_dim_full < 2 || s->head_dim_swa % 2 ||
        s->head_dim_full % 2 || s->window < 1 || s->full_every < 1 || s->context_length < 1 ||
        !(s->partial_rotary_full > 0.0 && s->partial_rotary_full <= 1.0))
        return sfail(err, errlen, GEM_ERR_SHAPE, "inconsistent synthetic model dimensions");
    if (s->type != GEM_SYNTH_MIXED && s->type != GEM_SYNTH_Q4_K_M &&
        !gem_gguf_type_name((uint32_t)s->type))
        return sfail(err, errlen, GEM_ERR_PARAM, "unknown weight type");
    const int64_t L = s->n_layers;
    uint8_t *swa = malloc((size_t)L);
    int32_t *kvh = malloc((size_t)L * sizeof *kvh);
    tinfo *t = calloc((size_t)(L * 14 + 4), sizeof *t);
    vocab v;
    memset(&v, 0, sizeof v);
    gem_gguf_writer *w = NULL;
    gem_status st = GEM_ERR_NOMEM;
    if (!swa || !kvh || !t || build_vocab(&v, s->n_vocab) || gem_gguf_writer_create(&w) != GEM_OK)
        goto out;
    for (int64_t i = 0; i < L; i++) {
        swa[i] = (i + 1) % s->full_every != 0 && i != L - 1;
        kvh[i] = (int32_t)(swa[i] ? s->n_head_kv_swa : s->n_head_kv_full);
    }
    /* metadata, in the converter's names */
    const char *A = "gemma4";
    char key[128];
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", A, suffix), key)
    if ((st = gem_gguf_writer_str(w, "general.architecture", A)) ||
        (st = gem_gguf_writer_str(w, "general.name", s->name ? s->name : "gem-synth")) ||
        (st = gem_gguf_writer_u32(w, "general.file_type", file_type(s->type))) ||
        (st = gem_gguf_writer_u32(w, "general.quantization_version", 2)) ||
        (st = gem_gguf_writer_u32(w, K("block_count"), (uint32_t)L)) ||
        (st = gem_gguf_writer_u32(w, K("context_length"), (uint32_t)s->context_length)) ||
        (st = gem_gguf_writer_u32(w, K("embedding_length"), (uint32_t)s->n_embd)) ||
        (st = gem_gguf_writer_u32(w, K("feed_forward_length"), (uint32_t)s->n_ff)) ||
        (st = gem_gguf_writer_u32(w, K("attention.head_count"), (uint32_t)s->n_head)) ||
        (st = gem_gguf_writer_arr(w, K("attention.head_count_kv"), GEM_GGUF_V_I32, kvh,
                                  (uint64_t)L)) ||
        (st = gem_gguf_writer_f32(w, K("rope.freq_base"), (float)s->rope_base_full)) ||
        (st = gem_gguf_writer_f32(w, K("rope.freq_base_swa"), (float)s->rope_base_swa)) ||
        (st = gem_gguf_writer_f32(w, K("attention.layer_norm_rms_epsilon"), (float)s->eps)) ||
        (st = gem_gguf_writer_u32(w, K("attention.key_length"), (uint32_t)s->head_dim_full)) ||
        (st = gem_gguf_writer_u32(w, K("attention.value_length"), (uint32_t)s->head_dim_full)) ||
        (st = gem_gguf_writer_u32(w, K("attention.key_length_swa"), (uint32_t)s->head_dim_swa)) ||
        (st = gem_gguf_writer_u32(w, K("attention.value_length_swa"), (uint32_t)s->head_dim_swa)) ||
        (st = gem_gguf_writer_f32(w, K("final_logit_softcapping"), (float)s->softcap)) ||
        (st = gem_gguf_writer_u32(w, K("attention.sliding_window"), (uint32_t)s->window)) ||
        (st = gem_gguf_writer_u32(w, K("attention.shared_kv_layers"), 0)) ||
        (st = gem_gguf_writer_u32(w, K("embedding_length_per_layer_input"), 0)) ||
        (st = gem_gguf_writer_arr(w, K("attention.sliding_window_pattern"), GEM_GGUF_V_BOOL, swa,
                                  (uint64_t)L)) ||
        (st = gem_gguf_writer_u32(w, K("rope.dimension_count"), (uint32_t)s->head_dim_full)) ||
        (st = gem_gguf_writer_u32(w, K("rope.dimension_count_swa"), (uint32_t)s->head_dim_swa)))
        goto out;
#undef K
    {
        float *scores = malloc((size_t)v.n * sizeof *scores);
        if (!scores) {
            st = GEM_ERR_NOMEM;
            goto out;
        }
        for (int64_t i = 0; i < v.n; i++)
            scores[i] = -(float)i;
        st = gem_gguf_writer_str(w, "tokenizer.ggml.model", "gemma4");
        if (!st)
            st = gem_gguf_writer_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.text,
                                         v.len, (uint64_t)v.n);
        if (!st)
            st = gem_gguf_writer_arr(w, "tokenizer.ggml.scores", GEM_GGUF_V_F32, scores,
                                     (uint64_t)v.n);
        if (!st)
            st = gem_gguf_writer_arr(w, "tokenizer.ggml.token_type", GEM_GGUF_V_I32, v.type,
                                     (uint64_t)v.n);
        free(scores);
        if (st ||
            (st = gem_gguf_writer_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v.merges,
                                          v.mlen, (uint64_t)v.n_merges)) ||
            (st = gem_gguf_writer_u32(w, "tokenizer.ggml.bos_token_id", 2)) ||
            (st = gem_gguf_writer_u32(w, "tokenizer.ggml.eos_token_id", 1)) ||
            (st = gem_gguf_writer_u32(w, "tokenizer.ggml.unknown_token_id", 3)) ||
            (st = gem_gguf_writer_u32(w, "tokenizer.ggml.padding_token_id", 0)) ||
            (st = gem_gguf_writer_bool(w, "tokenizer.ggml.add_bos_token", 1)) ||
            (st = gem_gguf_writer_bool(w, "tokenizer.ggml.add_space_prefix", 0)))
            goto out;
    }
    /* tensors, in the converter's order: embedding, per-layer blocks, rope_freqs, output norm */
    int64_t n = 0;
#define T(nm, ty, a, b, kd)                                                                        \
    do {                                                                                           \
        snprintf(t[n].name, sizeof t[n].name, "%s", nm);                                           \
        t[n].type = (ty), t[n].ne0 = (a), t[n].ne1 = (b), t[n].kind = (kd);                        \
        n++;                                                                                       \
    } while (0)
    /* the layers that have an attn_v (the sliding ones), for the Q4_K_M assignment */
    int64_t n_v = 0, i_v = 0;
    for (int64_t i = 0; i < L; i++)
        n_v += swa[i];
    T("token_embd.weight", mat_type(s, s->n_embd, R_EMBED, 0, 0, 1), s->n_embd, s->n_vocab,
      T_EMBED);
    for (int64_t i = 0; i < L; i++) {
        const int64_t hd = swa[i] ? s->head_dim_swa : s->head_dim_full, nkv = kvh[i];
        char nm[GEM_GGUF_MAX_NAME];
#define B(suffix) (snprintf(nm, sizeof nm, "blk.%lld.%s", (long long)i, suffix), nm)
        T(B("attn_norm.weight"), GEM_GGUF_F32, s->n_embd, 0, T_NORM);
        T(B("attn_q.weight"), mat_type(s, s->n_embd, R_Q, i, i, L), s->n_embd, s->n_head * hd,
          T_MATRIX);
        T(B("attn_k.weight"), mat_type(s, s->n_embd, R_K, i, i, L), s->n_embd, nkv * hd, T_MATRIX);
        if (swa[i]) /* full layers have K = V: no attn_v */
            T(B("attn_v.weight"), mat_type(s, s->n_embd, R_V, i, i_v++, n_v), s->n_embd,
              nkv * hd, T_MATRIX);
        T(B("attn_output.weight"), mat_type(s, s->n_head * hd, R_O, i, i, L), s->n_head * hd,
          s->n_embd, T_MATRIX);
        T(B("attn_q_norm.weight"), GEM_GGUF_F32, hd, 0, T_QKNORM);
        T(B("attn_k_norm.weight"), GEM_GGUF_F32, hd, 0, T_QKNORM);
        T(B("post_attention_norm.weight"), GEM_GGUF_F32, s->n_embd, 0, T_POSTNORM);
        T(B("ffn_norm.weight"), GEM_GGUF_F32, s->n_embd, 0, T_NORM);
        T(B("ffn_gate.weight"), mat_type(s, s->n_embd, R_GATE, i, i, L), s->n_embd, s->n_ff,
          T_MATRIX);
        T(B("ffn_up.weight"), mat_type(s, s->n_embd, R_UP, i, i, L), s->n_embd, s->n_ff, T_MATRIX);
        T(B("ffn_down.weight"), mat_type(s, s->n_ff, R_DOWN, i, i, L), s->n_ff, s->n_embd,
          T_MATRIX);
        T(B("post_ffw_norm.weight"), GEM_GGUF_F32, s->n_embd, 0, T_POSTNORM);
        T(B("layer_output_scale.weight"), GEM_GGUF_F32, 1, 0, T_SCALE);
#undef B
    }
    T("rope_freqs.weight", GEM_GGUF_F32, s->head_dim_full / 2, 0, T_ROPE);
    T("output_norm.weight", GEM_GGUF_F32, s->n_embd, 0, T_NORM);
#undef T
    for (int64_t i = 0; i < n; i++) {
        int64_t ne[2] = {t[i].ne0, t[i].ne1};
        if ((st = gem_gguf_writer_tensor(w, t[i].name, t[i].type, t[i].ne1 ? 2 : 1, ne)) !=
            GEM_OK) {
            sfail(err, errlen, st, "a tensor does not fit its type's block");
            goto out;
        }
    }
    for (int64_t i = 0; s->no_matrices && i < n; i++)
        if ((t[i].kind == T_MATRIX || t[i].kind == T_EMBED) &&
            (st = gem_gguf_writer_hole(w, i)) != GEM_OK)
            goto out;
    synth_ctx c = {s, t, n, (int64_t)(s->partial_rotary_full * (double)s->head_dim_full / 2.0)};
    st = gem_gguf_writer_write(w, path, fill, &c, err, errlen);
out:
    if (st == GEM_ERR_NOMEM)
        sfail(err, errlen, st, "out of memory");
    gem_gguf_writer_free(w);
    vocab_free(&v);
    free(swa);
    free(kvh);
    free(t);
    return st;
}
