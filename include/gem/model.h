/*
 * gem model: the Gemma 4 text decoder on the CPU, read from a GGUF file in the
 * layout llama.cpp's converter writes for `gemma4`, with its tokenizer.
 *
 *   gem_model *m;      gem_model_load("m.gguf", &m, err, sizeof err);
 *   gem_session *s;    gem_session_create(m, &opts, &s, err, sizeof err);
 *   gem_tokenize(gem_model_tokenizer(m), "text", 1, ids, cap, &n);
 *   for each token: gem_session_eval(s, id, logits);      (logits (n_vocab) or NULL)
 *   or, greedy:     gem_session_eval_argmax(s, id, &next); (the next token alone)
 *
 * Every hyperparameter comes from the file's metadata (gemma4.*), so a tiny
 * synthetic file and the 31B model run the same code. Attention of every layer
 * goes through gem_decode (include/gem/decode.h) on the session's own KV cache:
 * full-attention layers keep every token (capacity opts.max_tokens), sliding
 * layers a ring of `window` rows; with opts.k_from_v the full layers whose K = V
 * store V alone and the decode rebuilds K from it. Matrix-vector products run on
 * the CPU decode context's thread pool with each output row computed by one
 * thread in a fixed order, so the logits are the same bits for any thread count.
 *
 * Untrusted input (the file, the command line) answers a status and one line
 * in `err`; a model file that loads has every tensor present, typed, shaped as
 * the metadata says and inside the file.
 */
#ifndef GEM_MODEL_H
#define GEM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "gem/attn.h"
#include "gem/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GEM_MODEL_MAX_LAYERS 512

/* A weight matrix in the file: `rows` outputs of `cols` inputs, row-major
 * (GGUF ne[0] = cols, ne[1] = rows), element type `type`. */
typedef struct gem_matrix {
    const void *data; /* (rows, row_bytes) in the mapping */
    gem_gguf_type type;
    int64_t rows, cols;
    size_t row_bytes;
    /* NULL, or the same weights laid out for the CPU's integer products (16-row groups,
     * src/model/matvec.h); set by the model when its first CPU session is created */
    const void *packed;
    /* the packed layout's span: how many 16-row groups lie together in 1,024-column chunks
     * (0 or 1: one; at most 8); set with packed */
    int64_t packed_span;
} gem_matrix;

/* One decoder layer. Vectors are dequantized to F32 at load time. */
typedef struct gem_layer {
    int swa;             /* 1: sliding-window attention, 0: full attention */
    int64_t n_head;      /* query heads */
    int64_t n_head_kv;   /* KV heads */
    int64_t head_dim;    /* key = value = query head dimension */
    int64_t n_ff;        /* MLP width */
    int64_t n_rot;       /* rotated dimensions (NeoX pairs i, i + n_rot/2) */
    double rope_base;
    int k_eq_v;          /* 1: no attn_v, V is taken from the raw K projection */
    gem_matrix wq;       /* (n_head*head_dim, n_embd) */
    gem_matrix wk;       /* (n_head_kv*head_dim, n_embd) */
    gem_matrix wv;       /* (n_head_kv*head_dim, n_embd), absent when k_eq_v */
    gem_matrix wo;       /* (n_embd, n_head*head_dim) */
    gem_matrix w_gate;   /* (n_ff, n_embd) */
    gem_matrix w_up;     /* (n_ff, n_embd) */
    gem_matrix w_down;   /* (n_embd, n_ff) */
    float *attn_norm;    /* (n_embd) */
    float *q_norm;       /* (head_dim) */
    float *k_norm;       /* (head_dim) */
    float *post_attn_norm; /* (n_embd) */
    float *ffn_norm;     /* (n_embd) */
    float *post_ffn_norm; /* (n_embd) */
    float out_scale;     /* layer_output_scale (1 when absent) */
} gem_layer;

/* Hyperparameters, all from the metadata. */
typedef struct gem_hparams {
    char name[64];          /* general.name, or "" */
    int64_t n_layers, n_embd, n_vocab, context_length;
    int64_t window;         /* attention.sliding_window */
    int64_t head_dim_full, head_dim_swa;
    int64_t n_rot_full, n_rot_swa;
    double rope_base_full, rope_base_swa;
    double eps;             /* attention.layer_norm_rms_epsilon */
    double softcap;         /* final_logit_softcapping, 0 = none */
    int64_t n_full_layers;  /* layers with full attention */
} gem_hparams;

typedef struct gem_tokenizer gem_tokenizer;
typedef struct gem_model gem_model;

/* Loads the file at `path` (mapped) and validates it as a Gemma 4 model.
 * GEM_ERR_IO, GEM_ERR_FORMAT (malformed, a missing tensor or key, a shape or type
 * that disagrees with the metadata), GEM_ERR_UNSUPPORTED (a Gemma 4 variant gem
 * does not run: per-layer embeddings, shared KV layers, experts), GEM_ERR_NOMEM.
 * err (errlen, may be NULL): one line. *out NULL on error. */
gem_status gem_model_load(const char *path, gem_model **out, char *err, size_t errlen);

/* The same on an open file, which the model borrows: g must outlive the model. */
gem_status gem_model_load_gguf(const gem_gguf *g, gem_model **out, char *err, size_t errlen);

/* Puts the model's weights on the current CUDA device for sessions with backend
 * GEM_BACKEND_CUDA: every matrix in its file type (dequantized by the kernels as they
 * read it), the norm vectors in F32. random_seed 0 copies the file's weights;
 * otherwise every matrix is filled on the device with seeded random values of its
 * own type and shape (elements uniform in about +-1/sqrt(cols), the embedding
 * +-4/sqrt(n_embd), which keeps the logits near unit scale at any width),
 * for timing the real dimensions from a file whose matrices were left out
 * (gem synth --no-matrices); the vectors still come from the file. Once per model:
 * a second call answers GEM_ERR_STATE. GEM_ERR_NO_DEVICE without a GPU or in a build
 * without CUDA, GEM_ERR_UNSUPPORTED for a matrix type the kernels lack, GEM_ERR_NOMEM
 * when the device memory is short, GEM_ERR_DEVICE; err (errlen, may be NULL) one line. */
gem_status gem_model_upload(gem_model *m, uint64_t random_seed, char *err, size_t errlen);

/* Device bytes the uploaded weights hold (0 before gem_model_upload), and the seed
 * they were generated from (0: the file's weights). */
size_t gem_model_device_bytes(const gem_model *m);
uint64_t gem_model_device_seed(const gem_model *m);

/* Frees the model (and closes the file if gem_model_load opened it); NULL is fine. */
void gem_model_free(gem_model *m);

const gem_hparams *gem_model_hparams(const gem_model *m);
const gem_layer *gem_model_layer(const gem_model *m, int64_t i); /* NULL out of range */
const gem_gguf *gem_model_file(const gem_model *m);
const gem_tokenizer *gem_model_tokenizer(const gem_model *m);
/* Token embedding matrix (n_vocab rows of n_embd), also the output head (tied). */
const gem_matrix *gem_model_embedding(const gem_model *m);
const gem_matrix *gem_model_output(const gem_model *m);
/* Bytes of every weight tensor the decoder reads per token (matrices and vectors;
 * the embedding counted once for its row and once whole as the tied head). */
size_t gem_model_weight_bytes_per_token(const gem_model *m);
/* Bytes of host memory holding the model's matrices repacked for the CPU's integer products
 * (every Q8_0, Q4_0, Q4_K and Q6_K matrix whose rows are a multiple of 16, packed by the first CPU
 * session: gem_session_create), beside the file's mapping; 0 before that or when none
 * qualifies. */
size_t gem_model_cpu_packed_bytes(const gem_model *m);
/* The instruction set this build's CPU matrix-vector products run on: "avx512-vnni" (AVX-512F
 * rows, the integer products by vpdpbusd), "avx512" (AVX-512F rows, the integer products by
 * AVX2), "avx2" (AVX2, FMA and F16C) or "portable" (C). Each gives the same bits. A static
 * string; never NULL. */
const char *gem_model_cpu_products_isa(void);

/* ---- tokenizer (tokenizer.ggml.model = "gemma4": BPE with merges, byte fallback) ---- */

/* Token types (tokenizer.ggml.token_type). */
enum { GEM_TOK_NORMAL = 1, GEM_TOK_UNKNOWN = 2, GEM_TOK_CONTROL = 3, GEM_TOK_USER = 4,
       GEM_TOK_UNUSED = 5, GEM_TOK_BYTE = 6 };

/* Builds the tokenizer from the file's vocabulary. Borrows g (strings point into it). */
gem_status gem_tokenizer_load(const gem_gguf *g, gem_tokenizer **out, char *err, size_t errlen);
void gem_tokenizer_free(gem_tokenizer *t);

int64_t gem_tokenizer_n_vocab(const gem_tokenizer *t);
int32_t gem_tokenizer_bos(const gem_tokenizer *t); /* -1 when none */
int32_t gem_tokenizer_eos(const gem_tokenizer *t); /* -1 when none */
/* 1 when `id` ends a generation (the EOS token, or a control token whose text is
 * "<eos>", "<turn|>" or "<end_of_turn>"). */
int gem_tokenizer_is_eog(const gem_tokenizer *t, int32_t id);

/* Text to token ids as llama.cpp's gemma4 tokenizer does: control and
 * user-defined token texts in `text` become those tokens, spaces become U+2581,
 * the rest splits into runs of newlines and runs of other characters, each run
 * is merged by BPE rank (lowest first, leftmost on ties) from UTF-8 characters,
 * and a piece that is not a token falls back to its <0xXX> byte tokens. BOS first
 * when add_bos and the vocabulary asks for it. ids (cap); *n receives the count;
 * GEM_ERR_RANGE when cap is too small (*n then holds the count needed). */
gem_status gem_tokenize(const gem_tokenizer *t, const char *text, int add_bos, int32_t *ids,
                        int64_t cap, int64_t *n);

/* The bytes a token stands for: normal tokens with U+2581 as a space, byte
 * tokens as their byte, user-defined tokens as their text, control/unused/unknown
 * tokens as nothing. buf (cap) is not NUL-terminated; *len receives the length
 * (may be NULL). GEM_ERR_RANGE for an id outside the vocabulary or a short buf. */
gem_status gem_token_piece(const gem_tokenizer *t, int32_t id, char *buf, size_t cap,
                           size_t *len);

/* The token's text as stored in the vocabulary (NULL for a bad id). */
gem_gguf_str gem_token_text(const gem_tokenizer *t, int32_t id);

/* ---- session: KV caches and scratch for one sequence ------------------------------------ */

typedef struct gem_session gem_session;

/* The full-attention layers' production route, set by the design's promotion rule on
 * whole-token time: the fused route beat the baseline by 12.2% at 64K and 17.6% at 128K
 * tokens, every one of three ABBA repetitions above 3%, with no regression at 8K (+4.3%),
 * on one H200 at Gemma 4 31B's dimensions (Q4_0 weights, F32 caches):
 * results/h200/run38/promotion.json, which `gem analyze promotion --check` re-derives
 * (run26 and run30/promotion.json decided the same with the earlier matrix kernels). */
#define GEM_MODEL_FULL_ROUTE_DEFAULT GEM_ROUTE_FUSED

typedef struct gem_session_opts {
    int64_t threads;     /* matrix-vector threads and decode threads; 0 = online cores */
    int64_t max_tokens;  /* positions the session can hold (full-layer cache rows), >= 1 */
    gem_route full_route; /* route of the full-attention layers: GEM_ROUTE_BASELINE or
                             GEM_ROUTE_FUSED (GEM_MODEL_FULL_ROUTE_DEFAULT, the production
                             route); sliding layers use the decode default */
    int64_t full_partitions, full_tile; /* 0 = the route's tuned default */
    gem_dtype kv_dtype;  /* element type of every layer's K and V cache: GEM_DTYPE_F32 (0, the
                            default), GEM_DTYPE_BF16 or GEM_DTYPE_F16; rows are computed in F32
                            and rounded to it as they enter the cache */
    int k_from_v;        /* 0 (the default): every layer stores K and V. 1: every full layer
                            whose K = V (gem_layer.k_eq_v) stores V alone (no K cache: half of
                            that layer's cache bytes) and gem_decode rebuilds each K row from
                            the stored V (gem_k_from_v: k_norm weight, the layer's rotation),
                            which only the fused route does: full_route must be
                            GEM_ROUTE_FUSED (GEM_ERR_UNSUPPORTED otherwise). Sliding layers
                            and layers with attn_v keep both caches. */
    gem_backend backend; /* GEM_BACKEND_CPU (0, the default) or GEM_BACKEND_CUDA: the caches in
                            device memory and the whole token on the current GPU, which needs
                            the weights there first (gem_model_upload); threads must be 0 */
} gem_session_opts;

/* Per-stage time of the calls so far (seconds), for the whole-token profile. */
typedef struct gem_stage_times {
    double embed, norms, proj, attn_swa, attn_full, mlp, logits, total;
    int64_t tokens;
} gem_stage_times;

/* Allocates the KV caches and scratch of one sequence on model m (which must outlive the
 * session; with backend CUDA in device memory, on the device current at creation, which
 * the calls on the session must keep current). GEM_ERR_STATE for backend CUDA before
 * gem_model_upload. GEM_ERR_PARAM for options out of range (a backend other than CPU or
 * CUDA, threads other than 0 on CUDA) (max_tokens < 1, threads outside 0..4096,
 * a route other than baseline or fused, kv_dtype other than F32/BF16/F16, k_from_v other
 * than 0 or 1, max_tokens past GEM_K_FROM_V_MAX_POS with k_from_v), GEM_ERR_UNSUPPORTED
 * for k_from_v with the baseline route or for a layer's route the backend has no kernels
 * for at kv_dtype (gem_decode_supports_route), the
 * status of gem_k_from_v_check or
 * gem_decode_supports_k_from_v when the decode refuses a V-only layer's rotation, a status
 * of the decode context or workspace sizing (e.g. a bad full_partitions / full_tile),
 * GEM_ERR_OVERFLOW, GEM_ERR_NOMEM; err (errlen, may be NULL) then holds one line and *out
 * is NULL. */
gem_status gem_session_create(const gem_model *m, const gem_session_opts *opts, gem_session **out,
                              char *err, size_t errlen);
/* Frees the session; NULL is fine. */
void gem_session_free(gem_session *s);

/* Runs one token at the next position and, when logits (n_vocab) is not NULL,
 * writes the final soft-capped logits. GEM_ERR_RANGE when the session is full or
 * the id is outside the vocabulary; GEM_ERR_NONFINITE when a row the cache stores
 * (K and V, or V alone in a layer that rebuilds K) or the logits are not finite; a
 * gem_decode status otherwise. logits is host memory on either backend. On CUDA the call
 * queues the whole token on the session's stream and waits once, at its end (for the
 * logits and the device's non-finite flag); a non-finite row is found after it was
 * stored, and as on the CPU the position does not advance, so the next call rewrites it;
 * GEM_ERR_DEVICE for a failure the CUDA runtime reports. */
gem_status gem_session_eval(gem_session *s, int32_t token, float *logits);

/* As gem_session_eval, with the greedy next token instead of the logits: *argmax = the index
 * of the largest final logit, the lowest index among equal ones (the first of gem generate's
 * top-10). On CUDA the argmax runs on the device and only the index (and the non-finite flag)
 * crosses to the host; the token's time includes it. GEM_ERR_NULL for a NULL argmax, the
 * statuses of gem_session_eval otherwise (GEM_ERR_NONFINITE for non-finite logits, *argmax
 * then unwritten). */
gem_status gem_session_eval_argmax(gem_session *s, int32_t token, int32_t *argmax);

/* Greedy decoding: evaluates `token` at the session's position, takes the argmax of its logits
 * (as gem_session_eval_argmax) as the next token, evaluates that, and so on, n evaluations at
 * most: out (n, host) gets the argmax after each. After each, on_token (may be NULL) is called
 * with it; a nonzero return stops the loop before that token is evaluated (an end of text).
 * *made (n >= *made >= 0) gets the tokens written to out, which is also how far the position
 * advanced; on an error it counts those done before it (GEM_ERR_NONFINITE leaves the position
 * at the token that failed, as gem_session_eval does).
 * The tokens, the cache and the position are those of n calls of gem_session_eval_argmax, bit
 * for bit. On the CPU it is that loop, stage times included. On CUDA the first token is queued
 * as gem_session_eval_argmax queues it and each later one runs as one CUDA graph of the same
 * kernels, captured while the token before it runs, its id read on the device (only the argmax
 * crosses to the host); the session keeps the graphs for its next call, and the stage times are
 * left as they were.
 * GEM_ERR_NULL for a NULL session, out or made; GEM_ERR_RANGE for n < 1 or n past the session's
 * capacity (its position plus n evaluations must fit) or a token outside the vocabulary. */
gem_status gem_session_greedy(gem_session *s, int32_t token, int64_t n, int32_t *out,
                              int64_t *made, int (*on_token)(void *user, int32_t token),
                              void *user);

/* Where the session runs, one line ("NVIDIA H200, sm_90, 132 SMs", "<cpu model>, 16
 * threads, avx512 kernels"), and its backend; the string lives as long as the session. */
const char *gem_session_describe(const gem_session *s);
gem_backend gem_session_backend(const gem_session *s);

/* Positions evaluated so far. */
int64_t gem_session_pos(const gem_session *s);
/* Forgets every position. */
void gem_session_reset(gem_session *s);
/* Makes dst continue exactly where src stands (same model, max_tokens, kv_dtype and
 * k_from_v): copies the cache rows in use and the position. GEM_ERR_PARAM otherwise
 * (nothing copied). */
gem_status gem_session_copy(gem_session *dst, const gem_session *src);
/* Changes the route of the full-attention layers for the next evaluations
 * (GEM_ROUTE_BASELINE or GEM_ROUTE_FUSED, tuned default parameters). The
 * workspace was sized for both routes at creation. GEM_ERR_PARAM for another
 * route; GEM_ERR_UNSUPPORTED for the baseline in a session with k_from_v (its
 * V-only layers need the fused route) or for a route the backend has no kernels
 * for at the session's cache type (gem_decode_supports_route);
 * the route is unchanged on error. */
gem_status gem_session_set_route(gem_session *s, gem_route route);

/* For timing at long contexts without evaluating every position: extends the
 * session from its position p >= 1 to position n (p <= n <= max_tokens) by
 * copying the rows of the first p positions cyclically into the full layers'
 * caches (row t gets row t mod p); the sliding layers' rings keep their rows.
 * The next token then attends over n rows that the model computed, but not
 * for these positions: use it for speed, never for correctness. Layers that
 * store V alone (k_from_v) copy V rows; their K, rebuilt at each row's position,
 * then differs from the copied K of explicit caches. */
gem_status gem_session_fill_repeat(gem_session *s, int64_t n);

/* Stage times since creation or the last reset of the times (which also zeroes the
 * baseline stage times below). */
void gem_session_times(const gem_session *s, gem_stage_times *out);
void gem_session_times_reset(gem_session *s);

/* Whether the evaluations time each stage (on = 1, the default) or only the whole token
 * (on = 0: total and tokens count, the stages stay 0). On CUDA a stage is an interval
 * between CUDA events recorded on the stream, about 7 per layer, which cost time of their
 * own and keep neighbouring kernels from overlapping; off, a token records two. On the
 * CPU both clocks cost nothing measurable and off only leaves the stages at 0. Resets
 * the times. GEM_ERR_NULL, GEM_ERR_PARAM for on other than 0 or 1. */
gem_status gem_session_time_stages(gem_session *s, int on);

/* The baseline route's own stages inside the full-attention calls, for the stage profile
 * of the ceiling screen (gem profile --stage-profile, docs/receipts-records.md): wall
 * seconds of score, normalize, value and reduce, summed over `calls` full-attention calls
 * that ran on the baseline route. */
typedef struct gem_baseline_stage_times {
    double score, normalize, value, reduce;
    int64_t calls;
} gem_baseline_stage_times;

/* Turns the timing of the baseline route's stages on (on = 1) or off (on = 0, the default
 * of a new session). It only reads a clock between the stages: the logits and the caches
 * are the same bits either way. GEM_ERR_NULL for a NULL s, GEM_ERR_PARAM for another on. */
gem_status gem_session_time_baseline_stages(gem_session *s, int on);
/* The baseline stage times since creation or the last gem_session_times_reset into *out
 * (all zero while the timing was off or the full layers ran on the fused route).
 * GEM_ERR_NULL for a NULL argument. */
gem_status gem_session_baseline_stage_times(const gem_session *s, gem_baseline_stage_times *out);

/* Bytes of KV cache a token at position `pos` reads: every layer's live rows of what it
 * stores (K and V, or V alone in a layer that rebuilds K). 0 for a NULL s. */
size_t gem_session_kv_bytes_at(const gem_session *s, int64_t pos);

/* The KV cache memory of a session, fixed at creation. */
typedef struct gem_kv_memory {
    size_t held;           /* bytes of every layer's caches as allocated (capacity rows) */
    size_t saved;          /* bytes the K caches of the V-only layers would have taken: what
                              k_from_v saves (0 without it) */
    int64_t v_only_layers; /* layers that store V alone and rebuild K (0 without k_from_v) */
} gem_kv_memory;

/* Fills *out. GEM_ERR_NULL for a NULL argument. */
gem_status gem_session_kv_memory(const gem_session *s, gem_kv_memory *out);

/* ---- synthetic models ------------------------------------------------------------------- */

/* Element types of a synthetic file: one type for every matrix, or a mix
 * (GEM_SYNTH_MIXED) that puts each of Q8_0, Q4_0, Q4_K, Q6_K, BF16, F16 and F32
 * on some tensor, or the mix of a real Q4_K_M file (GEM_SYNTH_Q4_K_M): llama.cpp's
 * quantizer assignment for LLAMA_FTYPE_MOSTLY_Q4_K_M, Q4_K with Q6_K on the head
 * (token_embd, which the tied output reads), on attn_v where use_more_bits(i, n) holds
 * over the n layers that have an attn_v (i counting those layers alone, in layer order)
 * and on ffn_down where use_more_bits(layer, n_layers) holds; use_more_bits(i, n) is
 * i < n/8 || i >= 7*n/8 || (i - n/8) % 3 == 2, and general.file_type is 15. Matrices
 * whose rows do not fit the type's block fall back to Q8_0 (then F32). Vectors are
 * always F32, as the converter writes them. */
#define GEM_SYNTH_MIXED (-1)
#define GEM_SYNTH_Q4_K_M (-2)

typedef struct gem_synth_spec {
    uint64_t seed;
    int64_t n_layers, n_embd, n_ff, n_vocab, n_head;
    int64_t n_head_kv_swa, n_head_kv_full, head_dim_swa, head_dim_full;
    int64_t window, context_length;
    int64_t full_every;   /* layer i is full when (i + 1) % full_every == 0; the last is full */
    double rope_base_full, rope_base_swa, partial_rotary_full, softcap, eps;
    int32_t type;         /* a gem_gguf_type, GEM_SYNTH_MIXED or GEM_SYNTH_Q4_K_M */
    const char *name;     /* general.name */
    int no_matrices;      /* 1: the matrices (the embedding included) are left out, holes that
                             read as zero weights and take no disk space (gem_gguf_writer_hole):
                             the real dimensions for a device model that generates its weights
                             (gem_model_upload with a random seed); vectors are written */
} gem_synth_spec;

/* The named presets: "tiny" (tests and the reference: 6 layers, hidden 64, the
 * real full-layer attention shape), "diff" (60 layers in the 31B pattern, hidden
 * 64, for the model differentials), "2gb" (about 2 GB of Q8_0 weights) and "31b"
 * (the real dimensions). GEM_ERR_PARAM for an unknown name. */
gem_status gem_synth_preset(const char *name, gem_synth_spec *out);

/* Writes a seeded random-weight Gemma 4 GGUF in the converter's layout.
 * GEM_ERR_SHAPE for inconsistent dimensions, GEM_ERR_PARAM for a type that is none of a
 * gem_gguf_type, GEM_SYNTH_MIXED and GEM_SYNTH_Q4_K_M, GEM_ERR_IO. */
gem_status gem_synth_write(const gem_synth_spec *spec, const char *path, char *err,
                           size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* GEM_MODEL_H */
