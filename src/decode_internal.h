/*
 * Internal: what each backend implements behind gem/decode.h. src/decode.c
 * validates the arguments every backend shares (shapes, the view, the config,
 * workspace size, overlaps) and dispatches here; src/cpu_decode.c implements
 * the CPU backend, src/cuda/cuda_decode.cu the CUDA one (src/nocuda/ in a
 * build without nvcc, where every entry answers GEM_ERR_NO_DEVICE).
 */
#ifndef GEM_DECODE_INTERNAL_H
#define GEM_DECODE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gem/decode.h"

/* The arguments of one gem_decode call after the shared checks: the config
 * resolved (no zero fields), the extents of K and V known. */
typedef struct gem_decode_args {
    const gem_decode_shape *shape;
    const float *q;           /* (n_q_heads, dk) */
    const gem_kv_view *kv;
    float *out;               /* (n_q_heads, dv), or with state set the state */
    int state;                /* 1: gem_decode_state: out receives the state of the rows,
                                 GEM_DECODE_STATE_FLOATS(n_q_heads, dv) floats (fused route) */
    void *workspace;          /* (workspace_bytes) */
    size_t workspace_bytes;
    gem_decode_config cfg;    /* resolved */
    void *stream;
    size_t k_bytes, v_bytes;  /* extents of the view's tensors */
} gem_decode_args;

typedef struct gem_decode_backend_ops {
    /* threads as given to gem_decode_ctx_create (range-checked by the caller) */
    gem_status (*create)(int64_t threads, void **impl);
    void (*destroy)(void *impl);
    int64_t (*threads)(const void *impl);
    int (*device)(const void *impl);
    const char *(*describe)(const void *impl);
    /* GEM_OK or GEM_ERR_UNSUPPORTED for a valid shape, known dtypes and a decode route */
    gem_status (*supports)(const void *impl, const gem_decode_shape *shape, gem_dtype k_dtype,
                           gem_dtype v_dtype, gem_route route);
    /* GEM_OK or GEM_ERR_UNSUPPORTED: the fused route rebuilds K from a V of v_dtype this way
     * (shape valid, dk == dv, kfv's fields in range, supports passed for v_dtype) */
    gem_status (*k_from_v_supports)(const void *impl, const gem_decode_shape *shape,
                                    gem_dtype v_dtype, const gem_k_from_v *kfv);
    /* the tuned fused config at `live` (shape valid, live >= 1) */
    void (*config_default)(const void *impl, const gem_decode_shape *shape, int64_t live,
                           gem_decode_config *out);
    /* GEM_ERR_PARAM for a resolved config the backend has no kernel for */
    gem_status (*config_check)(const void *impl, const gem_decode_config *cfg);
    gem_status (*workspace_bytes)(const void *impl, const gem_decode_shape *shape, int64_t live,
                                  const gem_decode_config *cfg, size_t *bytes);
    /* the backend's own rules: stream, alignment, memory space */
    gem_status (*check_memory)(const void *impl, const gem_decode_args *a);
    /* runs a fully validated call */
    gem_status (*run)(void *impl, const gem_decode_args *a);
    /* the full finiteness scan of a validated q and view (with k_from_v: V and k_weight) */
    gem_status (*check_finite)(void *impl, const gem_decode_shape *shape, const float *q,
                               const gem_kv_view *kv, void *stream);
    /* the default's partitions `def` (config_default at kv->live) for this checked view: at
     * most def, at least 1; NULL when the backend's default does not depend on the view */
    int64_t (*view_partitions)(const void *impl, const gem_decode_shape *shape,
                               const gem_kv_view *kv, int64_t def);
    /* bytes >= 1 of workspace in the backend's memory (on CUDA the context's device),
     * GEM_DECODE_WORKSPACE_ALIGN-aligned; its release (p not NULL) once the work queued on it
     * is done */
    gem_status (*workspace_alloc)(void *impl, size_t bytes, void **out);
    void (*workspace_free)(void *impl, void *p);
    /* gem_decode_merge after the shared checks: states (n, GEM_DECODE_STATE_FLOATS(n_q_heads,
     * dv)), out (n_q_heads, dv), both checked against each other; the backend checks its
     * stream, alignment and memory space, then (run != 0) merges */
    gem_status (*merge)(void *impl, const gem_decode_shape *shape, const float *states,
                        int64_t n, float *out, void *stream, int run);
    /* gem_decode_across after every check: piece i's state (args[i], state set, validated on
     * the context impls[i] of this backend), then its copy to states + i * STATE_FLOATS (none
     * where args[i].out is that place), then the merge on `leader` and its stream */
    gem_status (*across)(void *leader, const gem_decode_shape *shape, void *const *impls,
                         const gem_decode_args *args, int64_t n, float *states, float *out,
                         void *stream);
} gem_decode_backend_ops;

extern const gem_decode_backend_ops gem_cpu_decode_ops;
extern const gem_decode_backend_ops gem_cuda_decode_ops;

/* The KV cache helper's memory and row copies, per backend. */
typedef struct gem_cache_ops {
    /* zero-initialised memory of `bytes` (device memory on the current CUDA device) */
    gem_status (*alloc)(size_t bytes, void **out);
    void (*free)(void *p);
    /* Writes n token-major F32 rows k (n, heads, dk), v (n, heads, dv) (v may be NULL
     * for no V tensor) at cache rows first, first+1, ... (mod capacity) of the
     * head-major tensors kc (heads, capacity, dk) and vc (heads, capacity, dv),
     * converting to the dtypes; CPU: refuses non-finite rows (GEM_ERR_NONFINITE,
     * nothing written); CUDA: records them in *flag (a device int). */
    gem_status (*append)(const float *k, const float *v, int64_t n, int64_t heads, int64_t dk,
                         int64_t dv, int64_t capacity, int64_t first, void *kc, gem_dtype kt,
                         void *vc, gem_dtype vt, int *flag, void *stream);
    /* *flag = 0 (CUDA: on the stream) */
    gem_status (*flag_reset)(int *flag, void *stream);
    /* reads *flag after the stream's work (CUDA: synchronous) */
    gem_status (*flag_read)(const int *flag, void *stream, int *value);
    /* GEM_ERR_MEMSPACE unless p is in the backend's memory */
    gem_status (*check_pointer)(const void *p);
} gem_cache_ops;

extern const gem_cache_ops gem_cpu_cache_ops;
extern const gem_cache_ops gem_cuda_cache_ops;

typedef struct cpu_pool cpu_pool;

/* The thread pool of a CPU context (cpu_pool.h), for work of its caller between decode
 * calls (the model's matrix products), so that one set of workers serves both; NULL for a
 * context of another backend. The pool runs one thing at a time: never during a gem_decode
 * on the same context. ctx: a live context. */
cpu_pool *gem_decode_ctx_cpu_pool(gem_decode_ctx *ctx);
/* The CPU backend's side of it: impl, a CPU context's implementation. */
cpu_pool *gem_cpu_decode_pool(void *impl);

/* 1 when every one of the n floats at p is finite (no exponent of all ones: an integer OR over
 * the bits, which vectorizes without relaxing float semantics), else 0. p (n). */
int gem_cpu_floats_finite(const float *p, int64_t n);

/* The fixed default of the baseline route's value partitions (the design's 16). */
#define GEM_BASELINE_DEFAULT_PARTITIONS 16

#endif /* GEM_DECODE_INTERNAL_H */
