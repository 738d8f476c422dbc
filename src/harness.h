/*
 * Internal to the evidence library: the memory, timing and probe operations
 * the engine (src/engine.c) needs from a backend, for host memory
 * (src/harness_cpu.c) and for device memory (src/cuda/harness_cuda.cu, or
 * src/nocuda/harness_none.c in a build without nvcc).
 */
#ifndef GEM_HARNESS_H
#define GEM_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "gem/attn.h"

typedef struct gem_harness_ops {
    /* the harness state hx: a stream and a timer (CUDA), a timer (CPU) */
    gem_status (*open)(void **hx);
    void (*close)(void *hx);
    /* the stream gem_decode gets: the cudaStream_t on CUDA, NULL on the CPU */
    void *(*stream)(void *hx);
    /* `bytes` of the backend's memory (64-byte aligned at least); free(NULL) is fine */
    gem_status (*alloc)(size_t bytes, void **out);
    void (*free)(void *p);
    /* host -> backend and backend -> host copies (synchronous: after all queued work) */
    gem_status (*upload)(void *dst, const void *src, size_t bytes);
    gem_status (*download)(void *dst, const void *src, size_t bytes);
    /* n 32-bit words of the pattern `bits`, then `guard` bytes of 0xA5 (before the run) */
    gem_status (*poison)(void *hx, void *p, size_t n, uint32_t bits, size_t guard);
    /* starts a timed region; stop waits for its end and gives its seconds */
    gem_status (*timer_start)(void *hx);
    gem_status (*timer_stop)(void *hx, double *seconds);
    /* median streaming-read bandwidth over `bytes` with `threads` CPU threads (ignored on
     * CUDA), after one warm-up (see gem_engine_read_bandwidth) */
    gem_status (*read_bandwidth)(void *hx, int64_t threads, size_t bytes, int64_t reps,
                                 double *bps);
} gem_harness_ops;

extern const gem_harness_ops gem_harness_cpu_ops;
extern const gem_harness_ops gem_harness_cuda_ops;

/* CUDA only (GEM_ERR_NO_DEVICE / GEM_ERR_UNSUPPORTED otherwise): copy bandwidth and
 * nominal bandwidth, as gem_engine_copy_bandwidth / gem_engine_nominal_bandwidth say. */
gem_status gem_harness_cuda_copy_bandwidth(size_t bytes, int64_t reps, double *bps);
gem_status gem_harness_cuda_nominal_bandwidth(double *bps);

/* CUDA only (GEM_ERR_NO_DEVICE otherwise): the number of devices the runtime sees; making
 * `device` current on the calling thread (what the harness and a CUDA context then bind); and
 * peer access enabled between every pair of devices that can have it (*pairs: how many
 * ordered pairs have it now; already enabled counts). */
gem_status gem_harness_cuda_devices(int *count);
gem_status gem_harness_cuda_use(int device);
gem_status gem_harness_cuda_enable_peers(int *pairs);

#endif /* GEM_HARNESS_H */
