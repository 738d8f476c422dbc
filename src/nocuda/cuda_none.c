/*
 * The CUDA backend of a build without nvcc: every entry answers
 * GEM_ERR_NO_DEVICE ("built without CUDA"), so `--backend cuda` fails with a
 * clear status instead of linking errors or a silent CPU fallback. The queries
 * of gem/cuda.h answer the same way.
 */
#include <stdio.h>

#include "decode_stage_clock.h"
#include "decode_internal.h"
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

/* A context never exists in this build, so the rest is never called; each still
 * answers sensibly. */
static void none_destroy(void *impl) { (void)impl; }
static int64_t none_threads(const void *impl)
{
    (void)impl;
    return 0;
}
static int none_device(const void *impl)
{
    (void)impl;
    return -1;
}
static const char *none_describe(const void *impl)
{
    (void)impl;
    return "built without CUDA";
}
static gem_status none_supports(const void *impl, const gem_decode_shape *s, gem_dtype k,
                                gem_dtype v, gem_route route)
{
    (void)route;
    (void)impl;
    (void)s;
    (void)k;
    (void)v;
    return GEM_ERR_NO_DEVICE;
}
static gem_status none_k_from_v_supports(const void *impl, const gem_decode_shape *s,
                                         gem_dtype v_dtype, const gem_k_from_v *kfv)
{
    (void)impl;
    (void)s;
    (void)v_dtype;
    (void)kfv;
    return GEM_ERR_NO_DEVICE;
}
static void none_config_default(const void *impl, const gem_decode_shape *s, int64_t live,
                                gem_decode_config *out)
{
    (void)impl;
    (void)s;
    (void)live;
    out->route = GEM_ROUTE_FUSED;
    out->partitions = 64;
    out->tile = 8;
}
static gem_status none_config_check(const void *impl, const gem_decode_config *c)
{
    (void)impl;
    (void)c;
    return GEM_ERR_NO_DEVICE;
}
static gem_status none_workspace_bytes(const void *impl, const gem_decode_shape *s, int64_t live,
                                       const gem_decode_config *c, size_t *bytes)
{
    (void)impl;
    (void)s;
    (void)live;
    (void)c;
    (void)bytes;
    return GEM_ERR_NO_DEVICE;
}
static gem_status none_check_memory(const void *impl, const gem_decode_args *a)
{
    (void)impl;
    (void)a;
    return GEM_ERR_NO_DEVICE;
}
static gem_status none_run(void *impl, const gem_decode_args *a)
{
    (void)impl;
    (void)a;
    return GEM_ERR_NO_DEVICE;
}
static gem_status none_check_finite(void *impl, const gem_decode_shape *s, const float *q,
                                    const gem_kv_view *kv, void *stream)
{
    (void)impl;
    (void)s;
    (void)q;
    (void)kv;
    (void)stream;
    return GEM_ERR_NO_DEVICE;
}

static gem_status none_workspace_alloc(void *impl, size_t bytes, void **out)
{
    (void)impl;
    (void)bytes;
    (void)out;
    return GEM_ERR_NO_DEVICE;
}
static void none_workspace_free(void *impl, void *p)
{
    (void)impl;
    (void)p;
}
static gem_status none_merge(void *impl, const gem_decode_shape *s, const float *states,
                             int64_t n, float *out, void *stream, int run)
{
    (void)run;
    (void)impl;
    (void)s;
    (void)states;
    (void)n;
    (void)out;
    (void)stream;
    return GEM_ERR_NO_DEVICE;
}

static gem_status none_across(void *leader, const gem_decode_shape *s, void *const *impls,
                              const gem_decode_args *args, int64_t n, float *states, float *out,
                              void *stream)
{
    (void)leader;
    (void)s;
    (void)impls;
    (void)args;
    (void)n;
    (void)states;
    (void)out;
    (void)stream;
    return GEM_ERR_NO_DEVICE;
}

const gem_decode_backend_ops gem_cuda_decode_ops = {
    none_create,         none_destroy,      none_threads,         none_device,
    none_describe,       none_supports,     none_k_from_v_supports, none_config_default,
    none_config_check,
    none_workspace_bytes, none_check_memory, none_run,            none_check_finite,
    NULL,                 none_workspace_alloc, none_workspace_free,
    none_merge,          none_across,
};

static gem_status none_alloc(size_t bytes, void **out)
{
    (void)bytes;
    *out = NULL;
    return no_cuda();
}
static void none_free(void *p) { (void)p; }
static gem_status none_append(const float *k, const float *v, int64_t n, int64_t heads,
                              int64_t dk, int64_t dv, int64_t capacity, int64_t first, void *kc,
                              gem_dtype kt, void *vc, gem_dtype vt, int *flag, void *stream)
{
    (void)k, (void)v, (void)n, (void)heads, (void)dk, (void)dv, (void)capacity, (void)first;
    (void)kc, (void)kt, (void)vc, (void)vt, (void)flag, (void)stream;
    return GEM_ERR_NO_DEVICE;
}
static gem_status none_flag_reset(int *flag, void *stream)
{
    (void)flag;
    (void)stream;
    return GEM_ERR_NO_DEVICE;
}
static gem_status none_flag_read(const int *flag, void *stream, int *value)
{
    (void)flag;
    (void)stream;
    (void)value;
    return GEM_ERR_NO_DEVICE;
}
static gem_status none_check_pointer(const void *p)
{
    (void)p;
    return GEM_ERR_NO_DEVICE;
}

const gem_cache_ops gem_cuda_cache_ops = {
    none_alloc, none_free, none_append, none_flag_reset, none_flag_read, none_check_pointer,
};

gem_status gem_cuda_device_query(gem_cuda_device_info *out)
{
    if (!out)
        return GEM_ERR_NULL;
    return no_cuda();
}

gem_status gem_cuda_kernel_query(int64_t n_kv_heads, int64_t live, int64_t partitions,
                                 int64_t baseline_partitions, gem_cuda_kernel_info *out,
                                 size_t cap, size_t *n)
{
    (void)n_kv_heads;
    (void)live;
    (void)partitions;
    (void)baseline_partitions;
    (void)out;
    (void)cap;
    if (n)
        *n = 0;
    return no_cuda();
}

/* The stage clock of a CUDA context (none can be created in this build). */
gem_status cuda_decode_stage_clock_set(void *impl, int on)
{
    (void)impl;
    (void)on;
    return GEM_ERR_NO_DEVICE;
}

gem_status cuda_decode_stage_clock_read(const void *impl, gem_baseline_stage_seconds *out)
{
    (void)impl;
    (void)out;
    return GEM_ERR_NO_DEVICE;
}

gem_status cuda_decode_stage_clock_reset(void *impl)
{
    (void)impl;
    return GEM_ERR_NO_DEVICE;
}
