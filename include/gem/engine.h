/*
 * gem engine: the measuring harness the tools (`gem run`, `bench`, `diff`)
 * stand on. It owns one set of inputs in a backend's memory (host on the CPU,
 * device memory on CUDA), calls the decode API (gem/decode.h) on them exactly
 * as a user would, and adds what evidence needs and a library must not do:
 * rotation copies of K and V (so short contexts are not timed out of cache),
 * a poisoned output with guard bytes after it, a poisoned workspace, timing
 * and the read-bandwidth probes. Part of the evidence library (libgemcheck),
 * not of libgem.
 *
 * Typical use:
 *   gem_engine *e; gem_engine_create(GEM_BACKEND_CPU, 0, &e);
 *   gem_engine_load(e, &shape, &inputs, 1);
 *   gem_engine_run(e, GEM_ROUTE_FUSED, NULL, &seconds);   // the tuned default
 *   gem_engine_output(e, out, out_elems, &audit);
 *   gem_engine_destroy(e);
 *
 * K/V element types: inputs are always given in F32; gem_engine_load_kv holds
 * K and V as F32, BF16 or F16 (each chosen on its own), rounding every element
 * to nearest even as it places it, exactly as gem_kv_cache_append does, so
 * every route and every rotation copy reads the same rounded cache.
 * gem_engine_kv_host gives a host view of those rounded values for the double
 * reference (gem_attn_reference_kv).
 *
 * Routes: fused and baseline run through gem_decode on either backend;
 * reference (double, rounded to float) and online (the float oracle) are CPU
 * oracles and answer GEM_ERR_UNSUPPORTED on CUDA (online also for 16-bit K or
 * V: it takes F32 inputs). Nothing falls back silently.
 *
 * Input policy: non-finite values in q or in rows [0, live) of k and v are
 * rejected with GEM_ERR_NONFINITE by gem_engine_load, and so are finite values
 * that round to infinity in a 16-bit K or V (|x| >= 65520 for F16).
 */
#ifndef GEM_ENGINE_H
#define GEM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "gem/attn.h"
#include "gem/decode.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gem_engine gem_engine;

/* Parameters of a route. Zero means the tuned default of the decode API
 * (gem_decode_config_for_view on the loaded view) for fused, 16 for the baseline's value
 * partitions, 32 for the online oracle's partitions; gem_engine_resolve says
 * what a run will use. */
typedef struct gem_route_params {
    int64_t partitions; /* fused: sequence partitions P; baseline: value partitions;
                           online: partitions; reference: must be 0 */
    int64_t tile;       /* fused: tokens per tile; every other route: must be 0 */
} gem_route_params;

/* Creates an engine on `backend`. threads: CPU worker threads, 0 = one per
 * online core; must be 0 for CUDA. GEM_ERR_NO_DEVICE when CUDA is asked for
 * and the build has no CUDA or no GPU is present. *out is NULL on error. */
gem_status gem_engine_create(gem_backend backend, int64_t threads, gem_engine **out);

/* Frees the engine and everything it holds; NULL is fine. */
void gem_engine_destroy(gem_engine *e);

/* The backend, the thread count actually used (CPU) or 1 (CUDA), a one-line
 * description of the hardware, and the decode context the engine calls (for
 * gem_decode_config_default and friends). e must not be NULL (NULL gives
 * GEM_BACKEND_COUNT, 0, "no engine" and NULL). */
gem_backend gem_engine_backend(const gem_engine *e);
int64_t gem_engine_threads(const gem_engine *e);
const char *gem_engine_describe(const gem_engine *e);
const gem_decode_ctx *gem_engine_ctx(const gem_engine *e);

/* Copies the inputs into the backend's memory (validating shape, buffers and
 * finiteness first): q, and `copies` (1 .. 64) copies of k and v with all
 * `capacity` rows, head-major as gem_attn_inputs describes them. Each run uses
 * the next copy in turn. Replaces any earlier inputs; on error none are held.
 * K and V are held in F32: gem_engine_load_kv with GEM_DTYPE_F32 for both. */
gem_status gem_engine_load(gem_engine *e, const gem_attn_shape *shape,
                           const gem_attn_inputs *in, int64_t copies);

/* gem_engine_load with K held as k_dtype and V as v_dtype: every element of the
 * F32 in->k and in->v (all `capacity` rows) is rounded to nearest even in its
 * type (gem_kv_cache_append's rounding; F16 keeps subnormals) before it is
 * placed, and every copy holds the same bytes. FP8 E4M3: a scale per KV head, the
 * largest magnitude of the head's rows over 448 (1 for a head of zeros), and each
 * element the code nearest x / scale (the quotient in float, saturating at 448); the
 * views the engine gives carry the scales. GEM_ERR_PARAM for an unknown
 * dtype; GEM_ERR_NONFINITE also when a value of rows [0, live) rounds to
 * infinity. Host memory: the F32 inputs are not kept; on CUDA one rounded
 * host copy of K and V is (for gem_engine_kv_host). */
gem_status gem_engine_load_kv(gem_engine *e, const gem_attn_shape *shape,
                              const gem_attn_inputs *in, gem_dtype k_dtype, gem_dtype v_dtype,
                              int64_t copies);

/* Inputs of a Gemma 4 full layer, whose keys are rebuilt from its values
 * (gem_k_from_v): V is in->v rounded to v_dtype (in->k is not read; FP8: the codes
 * times their heads' scales, as floats), and K is built from that rounded V here,
 * RoPE_{pos0+t}(k_weight * V) in double, rounded to float and then to v_dtype, for
 * every `capacity` row. Both are loaded as
 * gem_engine_load_kv loads K and V (the same copies), so a run reads either the
 * stored K and V, or, after gem_engine_select_k_from_v(e, 1), V alone with K
 * rebuilt from it by the route. k_weight (dk) host floats, finite; rot's fields
 * as gem_k_from_v describes them (its k_weight is ignored: the engine places
 * its own copy in the backend's memory; inv_freq is copied). dk must equal dv.
 * GEM_ERR_PARAM / GEM_ERR_SHAPE / GEM_ERR_NONFINITE as gem_kv_view_check,
 * gem_k_from_v_check and gem_engine_load_kv answer. Runs start with the stored K
 * selected. */
gem_status gem_engine_load_k_from_v(gem_engine *e, const gem_attn_shape *shape,
                                    const gem_attn_inputs *in, gem_dtype v_dtype,
                                    const float *k_weight, const gem_k_from_v *rot,
                                    int64_t copies);

/* After gem_engine_load_k_from_v: on = 1 makes the following runs (and
 * gem_engine_kv_host) use the view of V alone with K rebuilt from it, on = 0 the
 * stored K and V. GEM_ERR_STATE when the loaded inputs came from another load
 * (on = 0 is always accepted), GEM_ERR_PARAM for on not 0 or 1. */
gem_status gem_engine_select_k_from_v(gem_engine *e, int on);

/* A view of the loaded K and V in host memory, as every route reads them (the
 * rounded values, the loaded dtypes), dense head-major with the loaded live and
 * capacity: what the double reference (gem_attn_reference_kv) must read. The
 * memory belongs to the engine and stays valid until the next load or
 * gem_engine_destroy; runs never write it. GEM_ERR_NULL, GEM_ERR_STATE before
 * a load. */
gem_status gem_engine_kv_host(const gem_engine *e, gem_kv_view *out);

/* The parameters a run of `route` with `params` (NULL = all defaults) would use
 * on the loaded shape. GEM_ERR_STATE before a load, GEM_ERR_PARAM for a
 * parameter the route does not take or a value out of range. */
gem_status gem_engine_resolve(const gem_engine *e, gem_route route,
                              const gem_route_params *params, gem_route_params *out);

/* Poisons the output (every element GEM_POISON_BITS, guard bytes 0xA5) and the
 * workspace, then runs `route` once through gem_decode (fused, baseline) or the
 * CPU oracle (reference, online). *seconds (may be NULL) is the route alone:
 * wall clock on the CPU; on CUDA, CUDA events around gem_decode on the engine's
 * stream, the first queued behind 50 us of GPU work so that the host's part of
 * the call overlaps the device as in a decode loop that runs ahead (the engine
 * waits for the second event): the GPU's execution of what the call queued. */
gem_status gem_engine_run(gem_engine *e, gem_route route, const gem_route_params *params,
                          double *seconds);

/* gem_engine_run for the decode routes with `calls` (1 .. GEM_ENGINE_MAX_CALLS) calls of
 * gem_decode queued back to back between the timer's start and stop, each on the next K/V
 * copy, with no synchronisation between them (a decode loop's calls on one stream);
 * *seconds is their time over `calls`. Poisoning happens once, before the first; the output
 * is the last call's. calls > 1 on an oracle route: GEM_ERR_PARAM. */
#define GEM_ENGINE_MAX_CALLS 64
gem_status gem_engine_run_calls(gem_engine *e, gem_route route, const gem_route_params *params,
                                int64_t calls, double *seconds);

/* Host wall-clock seconds the last run's gem_decode call took to return (the
 * checks and the launches on CUDA; the whole route on the CPU), per call when the
 * run made several; 0 before a run and after an oracle run. */
double gem_engine_last_host_seconds(const gem_engine *e);

/* Audit of an output buffer after a run. */
typedef struct gem_output_audit {
    size_t unwritten; /* elements still holding the poison */
    int guard_ok;     /* 1 when no byte after the output changed */
} gem_output_audit;

/* Copies the last run's output (n_q_heads, dv) into out (out_elems floats) and
 * audits it. GEM_ERR_RANGE if out_elems is too small, GEM_ERR_STATE before any
 * run. */
gem_status gem_engine_output(gem_engine *e, float *out, size_t out_elems,
                             gem_output_audit *audit);

/* Workspace bytes a run of `route` uses on the loaded shape (0 for the oracles). */
gem_status gem_engine_scratch_bytes(const gem_engine *e, gem_route route,
                                    const gem_route_params *params, size_t *bytes);

/* ---- read-bandwidth probes ------------------------------------------------------ */

/* The backend's streaming-read bandwidth in bytes per second over `bytes` (at
 * least 1 MiB; choose far larger than the last-level cache): CPU, a
 * multi-threaded sum over the buffer in 16 slices a thread, by three readers
 * (no software prefetch; 4 KiB ahead into L2; 16 KiB ahead into L1,
 * dev/cpu/stream_probe.c); CUDA, the best streaming reader measured
 * (dev/cuda/read_probe.cu: many 16-byte loads in flight per thread, each byte
 * read once). Each reader's median of `reps` after one warm-up; the best. */
gem_status gem_engine_read_bandwidth(gem_engine *e, size_t bytes, int64_t reps,
                                     double *bytes_per_second);

/* CUDA only: the device-to-device copy bandwidth (bytes read plus written) of
 * cudaMemcpyAsync over `bytes`, median of `reps` after one warm-up; and the
 * device's nominal bandwidth from its memory clock and bus width.
 * GEM_ERR_UNSUPPORTED on the CPU. */
gem_status gem_engine_copy_bandwidth(gem_engine *e, size_t bytes, int64_t reps,
                                     double *bytes_per_second);
gem_status gem_engine_nominal_bandwidth(gem_engine *e, double *bytes_per_second);

#ifdef __cplusplus
}
#endif

#endif /* GEM_ENGINE_H */
