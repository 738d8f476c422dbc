/*
 * The engine's device-memory operations in a build without nvcc: every entry
 * answers GEM_ERR_NO_DEVICE (gem_engine_create on CUDA fails before any is
 * called, through gem_decode_ctx_create).
 */
#include "harness.h"

static gem_status none_open(void **hx)
{
    *hx = NULL;
    return GEM_ERR_NO_DEVICE;
}
static void none_close(void *hx) { (void)hx; }
static void *none_stream(void *hx)
{
    (void)hx;
    return NULL;
}
static gem_status none_alloc(size_t bytes, void **out)
{
    (void)bytes;
    *out = NULL;
    return GEM_ERR_NO_DEVICE;
}
static void none_free(void *p) { (void)p; }
static gem_status none_copy(void *dst, const void *src, size_t bytes)
{
    (void)dst;
    (void)src;
    (void)bytes;
    return GEM_ERR_NO_DEVICE;
}
static gem_status none_poison(void *hx, void *p, size_t n, uint32_t bits, size_t guard)
{
    (void)hx;
    (void)p;
    (void)n;
    (void)bits;
    (void)guard;
    return GEM_ERR_NO_DEVICE;
}
static gem_status none_timer_start(void *hx)
{
    (void)hx;
    return GEM_ERR_NO_DEVICE;
}
static gem_status none_timer_stop(void *hx, double *seconds)
{
    (void)hx;
    (void)seconds;
    return GEM_ERR_NO_DEVICE;
}
static gem_status none_read_bandwidth(void *hx, int64_t threads, size_t bytes, int64_t reps,
                                      double *bps)
{
    (void)hx;
    (void)threads;
    (void)bytes;
    (void)reps;
    (void)bps;
    return GEM_ERR_NO_DEVICE;
}

const gem_harness_ops gem_harness_cuda_ops = {
    none_open,  none_close,  none_stream,      none_alloc,      none_free,          none_copy,
    none_copy,  none_poison, none_timer_start, none_timer_stop, none_read_bandwidth,
};

gem_status gem_harness_cuda_copy_bandwidth(size_t bytes, int64_t reps, double *bps)
{
    (void)bytes;
    (void)reps;
    (void)bps;
    return GEM_ERR_NO_DEVICE;
}

gem_status gem_harness_cuda_nominal_bandwidth(double *bps)
{
    (void)bps;
    return GEM_ERR_NO_DEVICE;
}

gem_status gem_harness_cuda_devices(int *count)
{
    (void)count;
    return GEM_ERR_NO_DEVICE;
}

gem_status gem_harness_cuda_use(int device)
{
    (void)device;
    return GEM_ERR_NO_DEVICE;
}

gem_status gem_harness_cuda_enable_peers(int *pairs)
{
    (void)pairs;
    return GEM_ERR_NO_DEVICE;
}
