/*
 * The CUDA backend of a build without nvcc: every entry answers
 * GEM_ERR_NO_DEVICE ("built without CUDA"), so `--backend cuda` fails with a
 * clear status instead of linking errors or a silent CPU fallback. The queries
 * of gem/cuda.h answer the same way.
 */
#include <stdio.h>

#include "backend.h"
#include "gem/cuda.h"

/* One line on stderr, so that a caller printing only the status still tells
 * the user why. */
static gem_status no_cuda(void)
{
    fprintf(stderr, "gem cuda: built without CUDA (nvcc was not found at configure time)\n");
    return GEM_ERR_NO_DEVICE;
}

static gem_status none_create(int64_t threads, void **impl)
{
    (void)threads;
    *impl = NULL;
    return no_cuda();
}

static void none_destroy(void *impl) { (void)impl; }

static int64_t none_threads(const void *impl)
{
    (void)impl;
    return 0;
}

static const char *none_describe(const void *impl)
{
    (void)impl;
    return "built without CUDA";
}

static gem_status none_load(void *impl, const gem_attn_shape *shape, const gem_attn_inputs *in,
                            int64_t copies)
{
    (void)impl;
    (void)shape;
    (void)in;
    (void)copies;
    return GEM_ERR_NO_DEVICE;
}

static gem_status none_run(void *impl, gem_route route, const gem_route_params *params,
                           double *seconds)
{
    (void)impl;
    (void)route;
    (void)params;
    (void)seconds;
    return GEM_ERR_NO_DEVICE;
}

static gem_status none_output(void *impl, float *out, size_t out_elems, gem_output_audit *audit)
{
    (void)impl;
    (void)out;
    (void)out_elems;
    (void)audit;
    return GEM_ERR_NO_DEVICE;
}

static gem_status none_read_bandwidth(void *impl, size_t bytes, int64_t reps, double *bps)
{
    (void)impl;
    (void)bytes;
    (void)reps;
    (void)bps;
    return GEM_ERR_NO_DEVICE;
}

static gem_status none_scratch_bytes(const void *impl, gem_route route,
                                     const gem_route_params *params, size_t *bytes)
{
    (void)impl;
    (void)route;
    (void)params;
    (void)bytes;
    return GEM_ERR_NO_DEVICE;
}

const gem_backend_ops gem_cuda_backend_ops = {
    none_create, none_destroy, none_threads,        none_describe,      none_load,
    none_run,    none_output,  none_read_bandwidth, none_scratch_bytes,
};

gem_status gem_cuda_device_query(gem_cuda_device_info *out)
{
    (void)out;
    return no_cuda();
}

gem_status gem_cuda_fused_config_from_env(gem_cuda_fused_config *cfg)
{
    (void)cfg;
    return no_cuda();
}

gem_status gem_cuda_kernel_query(const gem_cuda_fused_config *cfg, int64_t n_kv_heads,
                                 int64_t live, gem_cuda_kernel_info *out, size_t cap, size_t *n)
{
    (void)cfg;
    (void)n_kv_heads;
    (void)live;
    (void)out;
    (void)cap;
    if (n)
        *n = 0;
    return no_cuda();
}

gem_status gem_cuda_copy_bandwidth(size_t bytes, int64_t reps, double *bytes_per_second)
{
    (void)bytes;
    (void)reps;
    (void)bytes_per_second;
    return no_cuda();
}

gem_status gem_cuda_read_bandwidth(size_t bytes, int64_t reps, double *bytes_per_second)
{
    (void)bytes;
    (void)reps;
    (void)bytes_per_second;
    return no_cuda();
}
