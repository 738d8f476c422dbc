/*
 * gem decode: one decode-attention step on the caller's memory.
 *
 * This is the API an inference engine links. The caller owns everything: the
 * KV cache (described by a gem_kv_view: base pointers and strides, so any
 * head-major or token-major layout with capacity >= live works in place), q,
 * the output, a workspace sized by gem_decode_workspace_bytes and, on CUDA,
 * the stream. gem_decode validates cheaply (shapes, strides, overflow,
 * alignment, overlap, memory space), then launches; it allocates nothing,
 * copies nothing and, on CUDA, never synchronises the host.
 *
 * A decode loop on CUDA:
 *
 *   gem_decode_ctx *ctx;   gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &ctx);
 *   size_t ws_bytes;       gem_decode_workspace_bytes(ctx, &shape, capacity, NULL, &ws_bytes);
 *   cudaMalloc(&ws, ws_bytes);                    // once, sized at the cache's capacity
 *   for each token:
 *       (write the new K/V rows into the cache, e.g. gem_kv_cache_append)
 *       gem_decode(ctx, &shape, d_q, &view, d_out, ws, ws_bytes, NULL, stream);
 *
 * On the CPU the same calls take host pointers, and the context's thread pool
 * plays the part of the stream (the stream argument must be NULL; the call
 * returns when the output is written).
 *
 * Routes: NULL config means the tuned default for the shape, view and device
 * (gem_decode_config_for_view, a readable host-side function); an
 * explicit config picks the route (fused or the three-stage baseline) and its
 * parameters, and is validated, never adjusted.
 *
 * What the backends cover (gem_decode_supports answers before any call):
 *   CPU   any shape (n_kv_heads divides n_q_heads), K and V each F32, BF16, F16
 *         or FP8 E4M3 (converted exactly as they are loaded; q, output and
 *         accumulation F32), any strides.
 *   CUDA  dk = dv = 512 with eight query heads per KV head (Gemma 4's
 *         full-attention layers), and dk = dv = 256 with two query heads per KV
 *         head (its sliding-window layers; the fused route only, tuned for
 *         live <= 1,024, correct at any live); any number of KV heads (at most
 *         8,191 at D512, 32,767 at D256); other small heads, dk = dv in {32, 64,
 *         128, 256} with one to eight query heads per KV head and at most 65,535
 *         KV heads, on a general kernel (the fused route only; not tuned: small
 *         models such as the tiny test model); K and V of one element type: F32,
 *         BF16 or F16, or at D512 with at most 64 KV heads FP8 E4M3; the baseline
 *         route at D512 for each of the four; base pointers aligned to 16 bytes
 *         and strides multiples of 4 elements (BF16 and F16: 8, FP8: 16).
 * Both backends can rebuild K from V (Gemma 4's K = V layers, gem_k_from_v in
 * gem/attn.h) in the fused route: the CPU for any rotation, CUDA at D512 for half
 * 256 with up to 64 rotating pairs (gem_decode_supports_k_from_v).
 * Anything else answers GEM_ERR_UNSUPPORTED; nothing falls back silently.
 *
 * Input policy: gem_decode does not scan the cache for NaN or infinity (that
 * would read it a second time). gem_decode_check_finite does the full scan;
 * gem_kv_cache_append checks the rows it writes. Non-finite inputs give
 * non-finite outputs (or GEM_ERR_NONFINITE where the CPU notices a non-finite
 * score), never a crash or an out-of-bounds access.
 */
#ifndef GEM_DECODE_H
#define GEM_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "gem/attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- context ------------------------------------------------------------- */

typedef struct gem_decode_ctx gem_decode_ctx;

/* Creates a context on `backend`.
 *   CPU:  a thread pool of `threads` workers (0 = one per online core, at most
 *         4096). One gem_decode at a time per context (a second concurrent call
 *         answers GEM_ERR_STATE); use one context per calling thread.
 *   CUDA: binds the device current on the calling thread (cudaGetDevice);
 *         `threads` must be 0. The context is read-only after creation: any
 *         thread may use it with any stream of that device, concurrently.
 * GEM_ERR_NO_DEVICE without a usable GPU (or in a build without CUDA),
 * GEM_ERR_PARAM for a bad backend or thread count. *out is NULL on error. */
gem_status gem_decode_ctx_create(gem_backend backend, int64_t threads, gem_decode_ctx **out);

/* Frees the context (joins the CPU pool); NULL is fine. */
void gem_decode_ctx_destroy(gem_decode_ctx *ctx);

/* The backend, the worker threads (CPU) or 1 (CUDA), the CUDA device ordinal
 * (-1 on the CPU), and a one-line description ("NVIDIA H200, sm_90, 132 SMs",
 * "<cpu model>, 16 threads, avx512 kernels"). ctx must not be NULL; the
 * string lives as long as the context. */
gem_backend gem_decode_ctx_backend(const gem_decode_ctx *ctx);
int64_t gem_decode_ctx_threads(const gem_decode_ctx *ctx);
int gem_decode_ctx_device(const gem_decode_ctx *ctx);
const char *gem_decode_ctx_describe(const gem_decode_ctx *ctx);

/* ---- shape, config, workspace ------------------------------------------------- */

/* gem_decode_shape (the head geometry) and gem_kv_view (the cache in place) are
 * declared in gem/attn.h. */

/* A route and its parameters. Zero in partitions or tile means "the tuned
 * default for this field" (gem_decode_config_for_view); a non-zero value is
 * used as given or refused (GEM_ERR_PARAM), never adjusted. */
typedef struct gem_decode_config {
    gem_route route;    /* GEM_ROUTE_FUSED or GEM_ROUTE_BASELINE */
    int64_t partitions; /* fused: sequence partitions P (1 .. GEM_DECODE_MAX_PARTITIONS);
                           baseline: value partitions (same bounds) */
    int64_t tile;       /* fused: tokens per tile (CPU 1 .. GEM_DECODE_MAX_TILE; CUDA 8,
                           the rows a first-pass block steps at a time);
                           baseline: must be 0 */
} gem_decode_config;

#define GEM_DECODE_MAX_PARTITIONS 4096
#define GEM_DECODE_MAX_TILE 256

/* ggml's supports_op: GEM_OK when `backend` has kernels for this shape and
 * these K/V element types, GEM_ERR_UNSUPPORTED (with no message) when not,
 * GEM_ERR_SHAPE / GEM_ERR_PARAM for an invalid shape or dtype. */
gem_status gem_decode_supports(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                               gem_dtype k_dtype, gem_dtype v_dtype);

/* gem_decode_supports for one route (GEM_ROUTE_FUSED, the default's, or
 * GEM_ROUTE_BASELINE; any other is GEM_ERR_PARAM): the CUDA baseline runs at D512
 * only (any cache type the fused route reads there, K stored). */
gem_status gem_decode_supports_route(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                                     gem_dtype k_dtype, gem_dtype v_dtype, gem_route route);

/* Whether the fused route can rebuild K from V (gem_k_from_v, Gemma 4's K = V layers) for
 * this shape, V element type and rotation: GEM_OK or GEM_ERR_UNSUPPORTED (CPU: any; CUDA:
 * the D512 shapes of gem_decode_supports with half = 256 and n_pairs <= 64, Gemma 4's full
 * layers), GEM_ERR_SHAPE (bad shape, dk != dv), GEM_ERR_PARAM (dtype, half or n_pairs out
 * of range). kfv's pointers and pos0 are not looked at. ctx, shape, kfv (1). */
gem_status gem_decode_supports_k_from_v(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                                       gem_dtype v_dtype, const gem_k_from_v *kfv);

/* The tuned default at `live` tokens: the fused route with the partitions and
 * tile measured best for this backend, shape and device (results/ holds the
 * measurements). The choice of partitions never decreases as live grows, so
 * the workspace of the default config is largest at the largest live.
 * ctx, shape, out (1). GEM_ERR_SHAPE for live < 1 or a bad shape. */
gem_status gem_decode_config_default(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                                     int64_t live, gem_decode_config *out);

/* The config gem_decode takes for this view with a NULL config (and the partitions it takes for
 * a zero field): gem_decode_config_default at kv->live, with fewer partitions where the view's
 * kernel is measured faster with them. Never more partitions than gem_decode_config_default at
 * the same live, so a workspace sized by gem_decode_workspace_bytes with a NULL config fits.
 * CUDA: a view that rebuilds K from an F32 V (gem_k_from_v) from 12,288 rows on takes one wave
 * of its one-block-an-SM first pass, SMs / n_kv_heads partitions (33 on an H200 at 4 KV heads;
 * docs/k-from-v.md); every other view the default. CPU: the default. ctx, shape, kv, out (1).
 * GEM_ERR_NULL, GEM_ERR_SHAPE / GEM_ERR_OVERFLOW / GEM_ERR_PARAM for a shape or view that
 * gem_decode would refuse the same way (gem_kv_view_check, gem_k_from_v_check). */
gem_status gem_decode_config_for_view(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                                      const gem_kv_view *kv, gem_decode_config *out);

/* Workspace bytes gem_decode needs at `live` tokens with `cfg` (NULL = the
 * default config). Non-decreasing in live for a fixed cfg and for NULL, so
 * sizing it at the cache's capacity covers every step up to it. Fused:
 * partials P * n_q_heads * (dv + 2) floats (gem_attention_online_scratch_bytes)
 * plus, on the CPU, per-thread temporaries; baseline: n_q_heads * live scores
 * plus value partials. GEM_ERR_OVERFLOW when it does not fit size_t. */
gem_status gem_decode_workspace_bytes(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                                      int64_t live, const gem_decode_config *cfg,
                                      size_t *bytes);

/* Alignment gem_decode requires of the workspace, in bytes (64). */
#define GEM_DECODE_WORKSPACE_ALIGN 64

/* A workspace for callers without an allocator of their own (the Python package): `bytes`
 * (>= 1) in the context's memory, host memory on the CPU, device memory of the context's
 * device on CUDA (whatever device is current on the calling thread), at least
 * GEM_DECODE_WORKSPACE_ALIGN-aligned, contents unspecified. GEM_ERR_NULL, GEM_ERR_PARAM for
 * 0 bytes, GEM_ERR_OVERFLOW, GEM_ERR_NOMEM, GEM_ERR_DEVICE for another CUDA failure. *out is
 * NULL on error. ctx, out (1). */
gem_status gem_decode_workspace_alloc(const gem_decode_ctx *ctx, size_t bytes, void **out);

/* Frees what gem_decode_workspace_alloc returned for this context; NULL is fine. CUDA: waits
 * first for all work queued on the context's device (cudaDeviceSynchronize), so a step still
 * reading the workspace on any stream completes before the memory goes. */
void gem_decode_workspace_free(const gem_decode_ctx *ctx, void *p);

/* ---- the decode step -------------------------------------------------------------- */

/* K rebuilt from V. A view with k_from_v set (gem/attn.h: gem_k_from_v) holds V alone and
 * gem_decode computes K(g, t) = RoPE_{pos0+t}(k_weight * V(g, t)) in F32 inside the fused
 * route as it streams V, so the cache is read once: half the bytes of a K+V cache. The
 * baseline route does not take such a view (GEM_ERR_UNSUPPORTED). k_weight is in the
 * backend's memory like q; inv_freq in host memory. docs/k-from-v.md derives it from
 * Gemma 4's attention and lists the roundings that differ from a stored K. */

/* out[h, :] = softmax_t(scale * q[h, :] . K[g, t, :]) . V[g, t, :] over t < kv->live, for
 * every query head h, g = h / (n_q_heads / n_kv_heads), with the accumulation in F32 and
 * a fixed reduction order: the same bits on every call, for any thread count.
 *
 *   q          (n_q_heads, dk) F32, contiguous; in the backend's memory
 *   kv         the cache (see gem_kv_view in gem/attn.h); in the backend's memory
 *   out        (n_q_heads, dv) F32, contiguous; in the backend's memory; must not
 *              overlap q, the cache or the workspace
 *   workspace  (workspace_bytes) bytes, GEM_DECODE_WORKSPACE_ALIGN-aligned, in the
 *              backend's memory, at least gem_decode_workspace_bytes for this call;
 *              its contents on entry do not matter and are clobbered
 *   cfg        NULL for the tuned default, else a validated explicit config
 *   stream     CUDA: the cudaStream_t to launch on (NULL = the default stream);
 *              CPU: must be NULL
 *
 * CUDA: asynchronous. The kernels are queued on `stream` and the call returns
 * without waiting; out is valid once the stream reaches that point. Pointers are
 * checked with cudaPointerGetAttributes: a host pointer, or memory of another
 * device, answers GEM_ERR_MEMSPACE. The fused route's kernels are programmatic
 * dependent launches (sm_90 griddepcontrol): they may start while the stream's
 * previous kernel finishes, but read nothing (q, the cache, the workspace) and
 * write nothing before it has completed, and they let the stream's next kernel
 * launch early; a kernel the caller launches next with the programmatic attribute
 * must execute griddepcontrol.wait (cudaGridDependencySynchronize) before it reads
 * out, as any such kernel must. Kernels launched without the attribute, copies
 * and events are ordered as usual.
 *
 * Errors (nothing is written, nothing is launched): GEM_ERR_NULL, GEM_ERR_SHAPE
 * (shape or view: live < 1, live > capacity, strides that make rows overlap or
 * are negative), GEM_ERR_OVERFLOW (the view's extent does not fit), GEM_ERR_ALIGN,
 * GEM_ERR_PARAM also for a gem_k_from_v out of range (gem_kv_view_check,
 * gem_k_from_v_check) and GEM_ERR_UNSUPPORTED for one the backend or route lacks,
 * GEM_ERR_PARAM for FP8 scales missing, misplaced or out of range
 * (gem_kv_view_check, gem_kv_view_scales_check; misaligned: GEM_ERR_ALIGN);
 * GEM_ERR_OVERLAP, GEM_ERR_MEMSPACE, GEM_ERR_RANGE (workspace too small),
 * GEM_ERR_PARAM (config, stream on the CPU), GEM_ERR_UNSUPPORTED (shape or dtype
 * the backend has no kernel for), GEM_ERR_STATE (CPU context busy).
 * After the launch: GEM_ERR_DEVICE when the CUDA runtime reports a failure;
 * on the CPU, when a scaled score is not finite (out is then partial): GEM_ERR_NONFINITE
 * when q or the K row behind it holds NaN or infinity, GEM_ERR_SCORE when both are finite
 * and scale * q.k overflowed float; GEM_ERR_STATE when an output is not finite (a live V
 * row with NaN or infinity, or sums past float's range; K and score errors come first). CUDA
 * writes such outputs without a status (gem_decode_check_finite scans the rows beforehand). */
gem_status gem_decode(const gem_decode_ctx *ctx, const gem_decode_shape *shape, const float *q,
                      const gem_kv_view *kv, float *out, void *workspace, size_t workspace_bytes,
                      const gem_decode_config *cfg, void *stream);

/* Validates what gem_decode would validate, without running anything: the same
 * statuses for the same arguments. For callers that check once, outside a loop. */
gem_status gem_decode_validate(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                               const float *q, const gem_kv_view *kv, const float *out,
                               const void *workspace, size_t workspace_bytes,
                               const gem_decode_config *cfg, const void *stream);

/* The full finiteness scan that gem_decode leaves out: q and rows [0, live) of K and V.
 * GEM_OK when all are finite, GEM_ERR_NONFINITE when any is not, or a validation status.
 * CUDA: runs a scan kernel on `stream` and waits for it (synchronous; off the hot path).
 * q (n_q_heads, dk), kv as for gem_decode. */
gem_status gem_decode_check_finite(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                                   const float *q, const gem_kv_view *kv, void *stream);

/* ---- attention states: one decode over pieces of a cache -------------------------------
 * Softmax attention over a union of token ranges is the merge of each range's state, exactly
 * (gem/attn.h's online softmax). gem_decode_state runs the fused route over one piece (a view
 * of any rows: a large block of a cache, a shared prefix, the part of a long context that
 * lives on another GPU; each state is one launch of the route, so a piece is thousands of
 * rows, not a 16-row page) and stops before the division; gem_decode_merge combines the pieces'
 * states in index order and divides. Everything is F32 with a fixed order: the same bits on
 * every call for the same pieces, for any thread count.
 *
 * A state is GEM_DECODE_STATE_FLOATS(n_q_heads, dv) floats in three blocks:
 *   m (n_q_heads)       the largest scaled score of the piece
 *   s (n_q_heads)       sum_t e^(score_t - m)
 *   o (n_q_heads, dv)   sum_t e^(score_t - m) V[t, :]   (times the head's scale for FP8 V)
 * and n states are (n, GEM_DECODE_STATE_FLOATS) floats, state i at i * STATE_FLOATS.
 * A state's bytes do not depend on live, so a state travels (a copy between GPUs, host and
 * device) in one piece of n_q_heads * (dv + 2) * 4 bytes.
 *
 * gem_decode_merge of the single state of a whole view is gem_decode of that view with the same
 * config, bit for bit (both backends; FP8 V, whose scale the state holds in o, differs by one
 * rounding). The merge of several pieces' states is the exact identity in F32 arithmetic, not
 * the same bits as one call over the joined rows (that call merges its own partitions). */
#define GEM_DECODE_STATE_FLOATS(n_q_heads, dv) ((n_q_heads) * ((dv) + 2))

/* Bytes of n states for this shape: n * n_q_heads * (dv + 2) * 4. GEM_ERR_SHAPE for a bad
 * shape, GEM_ERR_PARAM for n < 1, GEM_ERR_OVERFLOW. shape, bytes (1). */
gem_status gem_decode_state_bytes(const gem_decode_shape *shape, int64_t n, size_t *bytes);

/* The state of the rows [0, kv->live) of one piece: gem_decode's contract (the same arguments,
 * checks, statuses, workspace and asynchrony) with `state` (GEM_DECODE_STATE_FLOATS(n_q_heads,
 * dv) floats, in the backend's memory, aligned to float, overlapping nothing) in
 * the place of out, and the fused route only: a config with the baseline route answers
 * GEM_ERR_UNSUPPORTED. On the CPU a state whose sums overflow float answers GEM_ERR_STATE. */
gem_status gem_decode_state(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                            const float *q, const gem_kv_view *kv, float *state,
                            void *workspace, size_t workspace_bytes,
                            const gem_decode_config *cfg, void *stream);

/* out[h, :] = the merge of states 0 .. n_states - 1 of head h, in index order, divided by its
 * sum: the attention over the union of the pieces' rows (any order of pieces gives the same
 * attention; the index order fixes the bits).
 *   states  (n_states, GEM_DECODE_STATE_FLOATS(n_q_heads, dv)) floats in the backend's memory
 *           (CUDA: of the context's device), aligned to float, n_states >= 1, written by
 *           gem_decode_state (on this device or copied from another) or by the caller with
 *           the same meaning; an empty piece is m = -inf, s = 0, o = 0 (the CPU merges in a
 *           chain, where an empty state changes no bit; the CUDA merge sums the s terms as a
 *           tree over the states' positions, where one changes no bit only after the others)
 *   out     (n_q_heads, dv) F32 in the backend's memory, aligned to float, not overlapping
 *           states
 *   stream  as for gem_decode (CUDA: asynchronous, ordered after the work queued on it)
 * No workspace. shape's dk and scale are not used (dv and the heads are). CPU: each state is
 * validated as it is merged (gem_online_state_check's rules: GEM_ERR_STATE, also when every
 * state is empty or the result overflows; out may then hold partial sums). CUDA: the states
 * are not read on the host; invalid ones give NaN or infinity in out.
 * Errors before any work: GEM_ERR_NULL, GEM_ERR_SHAPE, GEM_ERR_PARAM (n_states < 1, a stream
 * on the CPU), GEM_ERR_OVERFLOW, GEM_ERR_ALIGN, GEM_ERR_MEMSPACE, GEM_ERR_OVERLAP,
 * GEM_ERR_STATE (CPU context busy); after: GEM_ERR_DEVICE. */
gem_status gem_decode_merge(const gem_decode_ctx *ctx, const gem_decode_shape *shape,
                            const float *states, int64_t n_states, float *out, void *stream);

/* ---- decode across devices -------------------------------------------------------------
 * A cache split by rows across GPUs (each holding a piece: its capacity, or its share of the
 * read bandwidth): every device computes its piece's state on its own stream, the states travel
 * to one device (cudaMemcpyPeerAsync: kilobytes, not the cache) and are merged there, all
 * queued without a host wait. The result is gem_decode_merge of the pieces' states, bit for
 * bit, whichever devices computed them (the same kernels give the same bits on every sm_90
 * device). Peer copies take the direct path between devices where the caller has enabled peer
 * access (cudaDeviceEnablePeerAccess), and are staged through the host otherwise; gem enables
 * nothing itself. On the CPU the same call runs the pieces one after another on their
 * contexts' pools (a cache in pieces in host memory). */

/* One piece: its context (every piece's and the leader's of one backend), the query and the
 * piece's rows, where its state goes and its workspace, all in that context's memory (CUDA: of
 * its device), and the stream to queue its work on (CUDA; NULL on the CPU). */
typedef struct gem_decode_piece {
    const gem_decode_ctx *ctx;
    const float *q;        /* (n_q_heads, dk) */
    const gem_kv_view *kv; /* the piece's rows, kv->live >= 1 */
    float *state;          /* GEM_DECODE_STATE_FLOATS(n_q_heads, dv) floats */
    void *workspace;       /* at least gem_decode_workspace_bytes(ctx, shape, kv->live, NULL) */
    size_t workspace_bytes;
    void *stream;
} gem_decode_piece;

/* The most pieces one gem_decode_across takes. */
#define GEM_DECODE_MAX_PIECES 64

/* out = the attention over the union of the pieces' rows, with the default config for each
 * piece: each piece's gem_decode_state, its state copied to states[i] on the leader's device,
 * then gem_decode_merge of states on the leader's context and stream.
 *   pieces  (n_pieces) pieces, 1 <= n_pieces <= GEM_DECODE_MAX_PIECES, each checked as
 *           gem_decode_state checks its arguments
 *   leader  the context that merges; states (n_pieces, GEM_DECODE_STATE_FLOATS(n_q_heads, dv))
 *           floats and out (n_q_heads, dv) in its memory, as for gem_decode_merge
 *   stream  the leader's stream (CUDA); out is valid once it reaches the merge
 * CUDA: asynchronous. Each piece's stream runs its state and its copy; the leader's stream
 * waits for those copies (events) and runs the merge; piece i's stream may be the leader's.
 * A piece's state and states[i] are not to be touched until the leader's stream has passed
 * the merge. Pieces on different streams need workspaces and states of their own (the call
 * checks the states against each other, states and out; not the workspaces). The caller's
 * current device is restored before the call returns.
 * Every argument is checked before anything runs (nothing is launched on an error):
 * GEM_ERR_NULL, GEM_ERR_PARAM (n_pieces out of range, a stream on the CPU),
 * GEM_ERR_UNSUPPORTED (contexts of two backends), and each piece's and the merge's own
 * statuses. After: GEM_ERR_DEVICE, and on the CPU the statuses of gem_decode_state. */
gem_status gem_decode_across(const gem_decode_shape *shape, const gem_decode_piece *pieces,
                             int64_t n_pieces, const gem_decode_ctx *leader, float *states,
                             float *out, void *stream);

/* ---- KV cache helper ------------------------------------------------------------------
 * For callers that do not own their cache memory: a head-major cache
 * (n_kv_heads, capacity, d) in the backend's memory, rows appended in token order. */

typedef struct gem_kv_cache gem_kv_cache;

typedef struct gem_kv_cache_desc {
    gem_backend backend;
    int64_t n_kv_heads; /* >= 1 */
    int64_t dk, dv;     /* >= 1 */
    int64_t capacity;   /* rows per KV head, >= 1 */
    gem_dtype k_dtype;  /* element type stored (rows are appended as F32 and converted) */
    gem_dtype v_dtype;
    int ring;           /* 1: a sliding window: appends past capacity overwrite the oldest
                           rows, live = min(appended, capacity) (attention does not depend
                           on the order of the rows) */
} gem_kv_cache_desc;

/* Allocates the cache (device memory on CUDA, on the current device) with no live
 * rows. GEM_ERR_SHAPE / GEM_ERR_PARAM for a bad description, GEM_ERR_UNSUPPORTED for an FP8
 * type (the helper keeps no per-head scales: describe FP8 caches with a gem_kv_view),
 * GEM_ERR_OVERFLOW, GEM_ERR_NOMEM, GEM_ERR_NO_DEVICE. *out is NULL on error. */
gem_status gem_kv_cache_create(const gem_kv_cache_desc *desc, gem_kv_cache **out);

/* Frees the cache; NULL is fine. On CUDA the caller must make sure no queued work
 * still reads it. */
void gem_kv_cache_destroy(gem_kv_cache *c);

/* Appends n >= 1 tokens' rows, token-major as a projection writes them:
 *   k (n, n_kv_heads, dk) F32, v (n, n_kv_heads, dv) F32
 * in the backend's memory (device pointers on CUDA). Writes only the new rows, each
 * value rounded to nearest even in the cache's type (BF16 / F16; F16 keeps subnormals).
 * CPU: the rows are checked first; a non-finite value, or a finite one that would be
 * infinite in the cache's type (|x| >= 65520 for F16), answers GEM_ERR_NONFINITE and
 * nothing is written. CUDA: one kernel on `stream` copies (and converts) the rows and
 * records any non-finite value in a flag that gem_kv_cache_check reports; no host
 * synchronisation. A non-ring cache answers GEM_ERR_RANGE when the rows do not fit
 * (nothing written); a ring takes any n <= capacity. stream: as for gem_decode. */
gem_status gem_kv_cache_append(gem_kv_cache *c, const float *k, const float *v, int64_t n,
                               void *stream);

/* The view of the live rows (valid until the next append, reset or destroy). */
gem_status gem_kv_cache_view(const gem_kv_cache *c, gem_kv_view *out);

/* Rows that take part (min(appended, capacity) for a ring) and rows appended in all. */
int64_t gem_kv_cache_live(const gem_kv_cache *c);
int64_t gem_kv_cache_appended(const gem_kv_cache *c);

/* Forgets every row (live = 0) and clears the non-finite flag; writes no cache memory. */
gem_status gem_kv_cache_reset(gem_kv_cache *c, void *stream);

/* GEM_ERR_NONFINITE when any row appended since creation or the last reset held NaN or
 * infinity, else GEM_OK. CUDA: waits for `stream` (synchronous). */
gem_status gem_kv_cache_check(gem_kv_cache *c, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* GEM_DECODE_H */
