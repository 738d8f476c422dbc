/*
 * Internal to the model library: the model and session objects, shared by the
 * CPU decoder (gemma4.c) and the device decoder (cuda/gemma4_cuda.cu, or
 * nocuda/gemma4_none.c in a build without nvcc).
 */
#ifndef GEM_MODEL_INTERNAL_H
#define GEM_MODEL_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "gem/decode.h"
#include "gem/model.h"
#include "cpu_pool.h"
#include "matvec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The weights on the device (gem_model_upload); opaque outside the device decoder. */
typedef struct gem_model_dev gem_model_dev;
/* A session's device state (stream, scratch, events); opaque likewise. */
typedef struct gem_session_dev gem_session_dev;

struct gem_model {
    gem_gguf *owned; /* the file when gem_model_load opened it */
    const gem_gguf *g;
    gem_hparams hp;
    gem_layer *layers;   /* (n_layers) */
    gem_matrix tok_embd; /* (n_vocab, n_embd) */
    gem_matrix output;   /* the head: `output` if present, else tok_embd */
    float *output_norm;  /* (n_embd) */
    float *rope_freqs;   /* (head_dim_full / 2), or NULL: all factors 1 */
    gem_tokenizer *tok;
    size_t weight_bytes; /* read per token */
    gem_model_dev *dev;  /* the weights on the device, or NULL */
    /* the CPU's integer products (matvec.h): the packable matrices packed once, by the
     * first CPU session (gem_session_create), into pack_mem (packed_bytes), under pack_lock */
    pthread_mutex_t pack_lock;
    int pack_done;
    void *pack_mem;
    size_t packed_bytes;
    int64_t packed_max_cols; /* the widest packed matrix: the sessions' digit scratch */
};

/* Where a pool thread stands in its preload (mv_ahead_step), on a line of its own. (The
 * header is also read by the CUDA sources, compiled as C++.) */
#ifdef __cplusplus
#define GEM_ALIGN_LINE alignas(64)
#else
#define GEM_ALIGN_LINE _Alignas(64)
#endif
typedef struct gem_ahead_pos {
    GEM_ALIGN_LINE uint32_t seq; /* the idle argument's sequence number it is for */
    size_t done;               /* bytes of that plan asked for */
} gem_ahead_pos;

struct gem_session {
    const gem_model *m;
    cpu_pool *pool; /* the CPU context dctx's pool (borrowed), or NULL on the device */
    gem_decode_ctx *dctx;
    gem_decode_ctx *dctx1; /* one thread: for calls too small to share (same bits) */
    gem_decode_config full_cfg;
    int64_t pos, max_tokens;
    void **kc, **vc;   /* per layer: (cap, n_head_kv, head_dim) of kv_dtype, token-major, or
                          (n_head_kv, cap, head_dim) where head_major[i]; kc[i] is NULL in a
                          V-only layer */
    unsigned char *head_major; /* per layer: 1 for a CPU session's sliding layers (a head's
                                  rows back to back: its partitions stream contiguous memory,
                                  results/h200/run67), 0 token-major */
    unsigned char *v_only; /* per layer: 1 when it stores V alone and K is rebuilt (k_from_v) */
    gem_k_from_v *kfv; /* per layer: the rotation that rebuilds K (set in V-only layers) */
    int k_from_v;      /* opts.k_from_v */
    gem_kv_memory mem; /* the caches' bytes, fixed at creation */
    gem_dtype kv_dtype;
    size_t kv_es;      /* bytes per cache element: 4 (F32) or 2 (BF16, F16) */
    int64_t *cap;      /* per layer: rows (max_tokens, or the window for sliding layers) */
    double **inv_freq; /* per layer: (n_rot / 2) */
    /* the rotations of the current position, one per distinct (n_rot, inv_freq) of the
     * layers (sliding and full): computed once a token, not once a layer */
    struct {
        int64_t n_rot, pos; /* pos -1: empty */
        double *freq;       /* (max n_rot / 2): the inv_freq the angles are of */
        double *cs;         /* (max n_rot): cos and sin, as rope_angles writes them */
    } rope[2];
    int rope_next;      /* the slot the next new rotation replaces */
    void *ws;          /* decode workspace (ws_bytes), 64-byte aligned */
    size_t ws_bytes;
    float *x, *xn, *q, *k, *v, *att, *o, *gate, *up; /* scratch */
    float *kr, *vr; /* (max n_head_kv * head_dim): a new K and V row before a 16-bit cache */
    int64_t *head_rows; /* CPU: (max n_head + n_head_kv) rows of each head's projections done */
    float *lg;      /* CPU: (n_vocab) logits of gem_session_eval_argmax */
    void *xq;       /* CPU: the integer products' scratch (xq_bytes, matvec.h's mv_scratch) */
    size_t xq_bytes;
    gem_stage_times t;
    int whole_only;       /* gem_session_time_stages(s, 0): only the whole token is timed */
    /* CPU: while a pool thread waits, it preloads its owned items of the next product into its
     * L2 (mv_ahead): plans per layer (q/k/v, o, gate/up, down: 4 l + kind), then the head's
     * (4 n_layers); NULL on a pool of one thread */
    mv_ahead *ahead;
    gem_ahead_pos *ahead_pos; /* (the pool's threads) */
    cpu_pool_idle idle;
    gem_backend backend;  /* where the caches live and the token runs */
    gem_session_dev *dev; /* CUDA: the device state; kc / vc are device memory */
};

/* The decode shape of layer l: its heads and head dimension, scale 1.0 (Gemma 4's q/k norms). */
gem_decode_shape gem_layer_decode_shape(const gem_layer *l);

/* The decode view of layer li's cache once the row of position s->pos is in it: token-major
 * rows (head-major where s->head_major[li]), live = min(pos + 1, capacity); a layer that stores V alone has no K tensor, K strides
 * 0 and its gem_k_from_v. On the session's backend's memory. */
gem_kv_view gem_session_layer_view(const gem_session *s, int64_t li);

/* ---- the device decoder (CUDA; answers GEM_ERR_NO_DEVICE in a build without it) ---- */

/* Puts m's weights on the current device (or generates them: random_seed != 0). */
gem_status gem_model_dev_create(const gem_model *m, uint64_t random_seed, gem_model_dev **out,
                                char *err, size_t errlen);
void gem_model_dev_free(gem_model_dev *d);
/* Bytes of device memory the weights hold. */
size_t gem_model_dev_bytes(const gem_model_dev *d);
uint64_t gem_model_dev_random_seed(const gem_model_dev *d);

/* Device memory for a cache (bytes, zero allowed) and its release. */
gem_status gem_dev_alloc(size_t bytes, void **out);
void gem_dev_free(void *p);
/* Device-to-device copy of `bytes` on the session's stream, waited for. */
gem_status gem_dev_copy(gem_session *s, void *dst, const void *src, size_t bytes);

/* The session's device state: stream, decode context, scratch, events (s->kc, s->vc,
 * s->cap, s->inv_freq, s->kfv, s->ws_bytes already set; s->ws is allocated here). */
gem_status gem_session_dev_create(gem_session *s, char *err, size_t errlen);
void gem_session_dev_free(gem_session *s);
/* The decode context of the device session (for workspace sizing and support queries). */
gem_decode_ctx *gem_session_dev_decode_ctx(gem_session *s);
/* One token on the device, as gem_session_eval (logits (n_vocab) or *argmax, host memory, at
 * most one of them non-NULL): gem_session_dev_enqueue, then gem_session_dev_finish, timed. */
gem_status gem_session_dev_eval(gem_session *s, int32_t token, float *logits, int32_t *argmax);
/* Queues one token at s->pos on the session's stream and returns without waiting: the flag's
 * reset, the start and end events, every kernel, and the copies of the flag and (with
 * want_logits / want_argmax, at most one of them 1) the logits or the token into pinned host
 * memory. Nothing on the host changes but the events' use count, so the same call can be
 * captured into a CUDA graph (the position, the token and each layer's rows are then fixed
 * in it). On an error the stream may hold part of a token: wait for it before reusing the
 * session. */
gem_status gem_session_dev_enqueue(gem_session *s, int32_t token, int want_logits,
                                   int want_argmax);
/* The rest of a token that gem_session_dev_enqueue queued (or a graph of it replayed): waits
 * on the stream, GEM_ERR_NONFINITE when the flag is set (the position stays), else writes
 * the logits (n_vocab, host) or *argmax, whichever the token queued and the pointer asks for,
 * and advances the position. timed 1: adds the token's events to the session's times (they
 * must have been recorded by the stream, not captured); 0: leaves the times alone. */
gem_status gem_session_dev_finish(gem_session *s, float *logits, int32_t *argmax, int timed);
/* As gem_session_dev_enqueue, the token's id read on the device when the embedding runs:
 * dtoken (one int32, device memory), e.g. gem_session_dev_argmax's, where the token queued
 * before writes its greedy next token; so a token can be queued or captured into a graph before
 * its id is known. An id outside the vocabulary makes the embedding NaN and the token fails on
 * its flag (gem_session_dev_finish: GEM_ERR_NONFINITE). GEM_ERR_NULL for a NULL dtoken. */
gem_status gem_session_dev_enqueue_at(gem_session *s, const int32_t *dtoken, int want_logits,
                                      int want_argmax);
/* Device memory (one int32) where a token queued with want_argmax leaves its greedy next token
 * (before the copy to the host); NULL on a CPU session. */
const int32_t *gem_session_dev_argmax(gem_session *s);
/* gem_session_greedy on CUDA (its checks done by the caller: n >= 1, out (n) host): the first
 * token queued on the stream, each token after it one CUDA graph, captured (its id read on the
 * device from the argmax the token before writes) and made runnable while the token before
 * runs, launched once that token's argmax is on the host and on_token did not stop the loop.
 * The session keeps the two executables between calls and updates them in place. The same
 * kernels in the same order as gem_session_dev_enqueue's, so the same bits. *made: the tokens
 * done. */
gem_status gem_session_dev_greedy(gem_session *s, int32_t token, int64_t n, int32_t *out,
                                  int64_t *made, int (*on_token)(void *user, int32_t token),
                                  void *user);
/* The session's cudaStream_t (NULL on a CPU session). */
void *gem_session_dev_stream(gem_session *s);

#ifdef __cplusplus
}
#endif

#endif /* GEM_MODEL_INTERNAL_H */
