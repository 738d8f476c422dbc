/*
 * gem engine: one backend (CPU or CUDA) holding one set of inputs, able to run
 * any route on them, time it, and hand back an audited output.
 *
 * Typical use:
 *   gem_engine *e; gem_engine_create(GEM_BACKEND_CPU, 0, &e);
 *   gem_engine_load(e, &shape, &inputs, 1);
 *   gem_engine_run(e, GEM_ROUTE_FUSED, &params, &seconds);
 *   gem_engine_output(e, out, out_elems, &audit);
 *   gem_engine_destroy(e);
 *
 * Routes and the backends that run them:
 *   reference  CPU only (double, output rounded to float)
 *   online     CPU only (the float oracle)
 *   baseline   CPU and CUDA
 *   fused      CPU and CUDA
 * A route a backend does not run answers GEM_ERR_UNSUPPORTED, and so does a
 * shape a backend's kernels do not cover; nothing falls back silently.
 *
 * Input policy: non-finite values in q or in rows [0, live) of k and v are
 * rejected with GEM_ERR_NONFINITE (checked in gem_engine_load).
 */
#ifndef GEM_ENGINE_H
#define GEM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "gem/attn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gem_engine gem_engine;

/* Parameters of the split routes. Zero means the route's default. */
typedef struct gem_route_params {
    int64_t partitions; /* fused: sequence partitions P (default 32); baseline: value
                           partitions (default 16) */
    int64_t tile;       /* fused: tokens per tile (default 4) */
} gem_route_params;

/* Creates an engine on `backend`. threads: CPU worker threads, 0 = one per
 * online core; ignored by CUDA. GEM_ERR_NO_DEVICE when CUDA is asked for and
 * the build has no CUDA or no GPU is present. *out is NULL on error. */
gem_status gem_engine_create(gem_backend backend, int64_t threads, gem_engine **out);

/* Frees the engine and everything it holds; NULL is fine. */
void gem_engine_destroy(gem_engine *e);

/* The backend, the thread count actually used (CPU) or 1 (CUDA), and a
 * one-line description of the hardware ("AMD EPYC ..., 2 threads",
 * "NVIDIA H200, sm_90, 132 SMs"). desc may be NULL. */
gem_backend gem_engine_backend(const gem_engine *e);
int64_t gem_engine_threads(const gem_engine *e);
const char *gem_engine_describe(const gem_engine *e);

/* Copies the inputs in (validating shape, buffers and finiteness first).
 * copies >= 1: the engine keeps that many copies of k and v and each run uses
 * the next one in turn, so short contexts are not timed out of cache. Replaces
 * any earlier inputs. */
gem_status gem_engine_load(gem_engine *e, const gem_attn_shape *shape,
                           const gem_attn_inputs *in, int64_t copies);

/* Poisons the engine's output (every element set to GEM_POISON_BITS) and runs
 * `route` once. params may be NULL (defaults). *seconds (may be NULL) is the
 * time of the route alone: wall clock on the CPU, CUDA events on the GPU. */
gem_status gem_engine_run(gem_engine *e, gem_route route, const gem_route_params *params,
                          double *seconds);

/* Audit of an output buffer after a run. */
typedef struct gem_output_audit {
    size_t unwritten; /* elements still holding the poison */
    int guard_ok;     /* 1 when no byte after the output changed */
} gem_output_audit;

/* Copies the last run's output (n_q_heads, dv) into out and audits it.
 * GEM_ERR_RANGE if out_elems is too small, GEM_ERR_STATE before any run. */
gem_status gem_engine_output(gem_engine *e, float *out, size_t out_elems,
                             gem_output_audit *audit);

/* Measures the backend's read bandwidth in bytes per second: CPU, a
 * multi-threaded streaming read (sum) over `bytes` (choose larger than the last
 * level cache); CUDA, a read-only reduction kernel over `bytes` of device
 * memory. Median of `reps` repetitions after one warm-up. */
gem_status gem_engine_read_bandwidth(gem_engine *e, size_t bytes, int64_t reps,
                                     double *bytes_per_second);

/* Scratch bytes a route uses for the loaded shape (0 for reference/online).
 * GEM_ERR_STATE before gem_engine_load. */
gem_status gem_engine_scratch_bytes(const gem_engine *e, gem_route route,
                                    const gem_route_params *params, size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* GEM_ENGINE_H */
