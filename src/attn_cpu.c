/*
 * The CPU backend (gem_cpu_backend_ops): the engine's copies of the inputs,
 * a thread pool created once per engine, and the four routes:
 *   reference  gem_attn_reference (double), rounded to float
 *   online     gem_attn_online (the float oracle), single-threaded
 *   baseline   cpu_route_baseline (three stages + reduce), threaded
 *   fused      cpu_route_fused (split-KV first pass + merge), threaded
 * The output buffer is guarded (gem_guard_alloc): every run poisons it first,
 * and gem_engine_output reports unwritten elements and guard damage.
 */
#define _DEFAULT_SOURCE 1 /* madvise */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "cpu_kernels.h"
#include "cpu_pool.h"
#include "cpu_routes.h"
#include "gem/check.h"

#define MAX_COPIES 64

typedef struct cpu_impl {
    cpu_ctx ctx;
    char desc[256];
    gem_attn_shape shape;
    int loaded;
    float *q;               /* (n_q_heads, dk) */
    float *k[MAX_COPIES];   /* each (n_kv_heads, capacity, dk) */
    float *v[MAX_COPIES];   /* each (n_kv_heads, capacity, dv) */
    int64_t copies, next_copy;
    size_t q_elems, k_elems, v_elems, out_elems;
    float *out;             /* (n_q_heads, dv), guarded */
    double *ref_out;        /* (n_q_heads, dv), the reference route's doubles */
    int ran;
} cpu_impl;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "model name" of /proc/cpuinfo, or "unknown CPU". */
static void cpu_model(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *c = strchr(line, ':');
        if (!c)
            break;
        c++;
        while (*c == ' ' || *c == '\t')
            c++;
        snprintf(buf, cap, "%s", c);
        buf[strcspn(buf, "\n")] = '\0';
        break;
    }
    fclose(f);
}

static void free_inputs(cpu_impl *im)
{
    free(im->q);
    im->q = NULL;
    for (int64_t i = 0; i < MAX_COPIES; i++) {
        free(im->k[i]);
        free(im->v[i]);
        im->k[i] = im->v[i] = NULL;
    }
    gem_guard_free(im->out);
    im->out = NULL;
    free(im->ref_out);
    im->ref_out = NULL;
    im->loaded = 0;
    im->ran = 0;
}

static gem_status create(int64_t threads, void **impl)
{
    *impl = NULL;
    if (threads == 0) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n >= 1 ? (int64_t)n : 1;
    }
    cpu_impl *im = calloc(1, sizeof *im);
    if (!im)
        return GEM_ERR_NOMEM;
    gem_status st = cpu_pool_create(threads, &im->ctx.pool);
    if (st != GEM_OK) {
        free(im);
        return st;
    }
    im->ctx.threads = threads;
    char model[160];
    cpu_model(model, sizeof model);
    snprintf(im->desc, sizeof im->desc, "%s, %lld threads, %s kernels", model,
             (long long)threads, cpu_kernels_isa());
    *impl = im;
    return GEM_OK;
}

static void destroy(void *impl)
{
    cpu_impl *im = impl;
    if (!im)
        return;
    free_inputs(im);
    cpu_ctx_release(&im->ctx);
    cpu_pool_destroy(im->ctx.pool);
    free(im);
}

static int64_t threads_op(const void *impl) { return ((const cpu_impl *)impl)->ctx.threads; }
static const char *describe(const void *impl) { return ((const cpu_impl *)impl)->desc; }

#define HUGE_PAGE ((size_t)2 << 20)

/* Allocates `bytes` for streaming: 64-byte aligned; from 2 MiB up, aligned to
 * 2 MiB and advised to use transparent huge pages where the kernel offers
 * them, so long K/V streams do not take a TLB miss (and a hardware-prefetch
 * restart) every 4 KiB. The advice only changes speed, never contents.
 * NULL on overflow or no memory. Free with free(). */
static void *stream_alloc(size_t bytes)
{
    const size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
    size_t rounded = 0;
    if (gem_add_size(bytes, align - 1, &rounded) != GEM_OK)
        return NULL;
    rounded = rounded / align * align;
    void *p = NULL;
    if (posix_memalign(&p, align, rounded ? rounded : align) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (align == HUGE_PAGE)
        (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
    return p;
}

/* A stream_alloc copy of n floats. */
static float *aligned_copy(const float *src, size_t n)
{
    size_t bytes = 0;
    if (gem_mul_size(n, sizeof(float), &bytes) != GEM_OK)
        return NULL;
    float *p = stream_alloc(bytes);
    if (p)
        memcpy(p, src, n * sizeof(float));
    return p;
}

static gem_status load(void *impl, const gem_attn_shape *shape, const gem_attn_inputs *in,
                       int64_t copies)
{
    cpu_impl *im = impl;
    free_inputs(im);
    if (copies < 1 || copies > MAX_COPIES)
        return GEM_ERR_PARAM;
    size_t qe = 0, ke = 0, ve = 0, oe = 0, ref_bytes = 0;
    gem_status st = gem_attn_shape_elems(shape, &qe, &ke, &ve, &oe);
    if (st == GEM_OK)
        st = gem_mul_size(oe, sizeof(double), &ref_bytes);
    if (st != GEM_OK)
        return st;
    im->q = aligned_copy(in->q, qe);
    im->ref_out = malloc(ref_bytes);
    im->out = gem_guard_alloc(oe);
    if (!im->q || !im->ref_out || !im->out) {
        free_inputs(im);
        return GEM_ERR_NOMEM;
    }
    for (int64_t c = 0; c < copies; c++) {
        im->k[c] = aligned_copy(in->k, ke);
        im->v[c] = aligned_copy(in->v, ve);
        if (!im->k[c] || !im->v[c]) {
            free_inputs(im);
            return GEM_ERR_NOMEM;
        }
    }
    im->shape = *shape;
    im->copies = copies;
    im->next_copy = 0;
    im->q_elems = qe;
    im->k_elems = ke;
    im->v_elems = ve;
    im->out_elems = oe;
    im->loaded = 1;
    im->ran = 0;
    return GEM_OK;
}

static gem_status run(void *impl, gem_route route, const gem_route_params *params,
                      double *seconds)
{
    cpu_impl *im = impl;
    if (!im->loaded)
        return GEM_ERR_STATE;
    const int64_t c = im->next_copy;
    im->next_copy = (c + 1) % im->copies;
    const gem_attn_inputs in = {im->q, im->k[c], im->v[c], im->q_elems, im->k_elems,
                                im->v_elems};
    gem_status st = GEM_OK;
    if (route == GEM_ROUTE_BASELINE || route == GEM_ROUTE_FUSED) {
        st = cpu_routes_reserve(&im->ctx, route, &im->shape, params);
        if (st != GEM_OK)
            return st;
    }
    gem_guard_poison(im->out, im->out_elems);
    im->ran = 1; /* an output exists (poisoned until the route writes it) */
    const double t0 = now_seconds();
    switch (route) {
    case GEM_ROUTE_REFERENCE:
        st = gem_attn_reference(&im->shape, &in, im->ref_out, im->out_elems);
        if (st == GEM_OK)
            for (size_t i = 0; i < im->out_elems; i++)
                im->out[i] = (float)im->ref_out[i];
        break;
    case GEM_ROUTE_ONLINE:
        st = gem_attn_online(&im->shape, &in, params->partitions, im->out, im->out_elems);
        break;
    case GEM_ROUTE_BASELINE:
        st = cpu_route_baseline(&im->ctx, &im->shape, in.q, in.k, in.v, params, im->out);
        break;
    case GEM_ROUTE_FUSED:
        st = cpu_route_fused(&im->ctx, &im->shape, in.q, in.k, in.v, params, im->out);
        break;
    default:
        st = GEM_ERR_PARAM;
        break;
    }
    const double t1 = now_seconds();
    if (st == GEM_OK)
        *seconds = t1 - t0;
    return st;
}

static gem_status output(void *impl, float *out, size_t out_elems, gem_output_audit *audit)
{
    cpu_impl *im = impl;
    if (!im->ran)
        return GEM_ERR_STATE;
    if (out_elems < im->out_elems)
        return GEM_ERR_RANGE;
    memcpy(out, im->out, im->out_elems * sizeof(float));
    gem_guard_check(im->out, im->out_elems, &audit->unwritten, &audit->guard_ok);
    return GEM_OK;
}

typedef struct stream_job {
    const float *buf; /* (n) */
    int64_t n, items;
    float *sums;      /* (items) */
} stream_job;

static void stream_item(void *ctx, int64_t item, int64_t thread)
{
    (void)thread;
    stream_job *j = ctx;
    const int64_t per = (j->n + j->items - 1) / j->items;
    const int64_t b = item * per < j->n ? item * per : j->n;
    const int64_t e = b + per < j->n ? b + per : j->n;
    j->sums[item] = cpu_stream_sum(j->buf + b, e - b);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Streaming read over `bytes`: the buffer is split into a fixed number of
 * contiguous slices per thread (4 each) handed out by the pool. */
static gem_status read_bandwidth(void *impl, size_t bytes, int64_t reps, double *bps)
{
    cpu_impl *im = impl;
    const size_t n = bytes / sizeof(float);
    float *buf = stream_alloc(n * sizeof(float)); /* the same page policy as K and V */
    double *times = calloc((size_t)reps, sizeof *times);
    const int64_t items = im->ctx.threads * 4;
    float *sums = calloc((size_t)items, sizeof *sums);
    if (!buf || !times || !sums) {
        free(buf);
        free(times);
        free(sums);
        return GEM_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = (float)(i & 7) * 0.125f;
    stream_job j = {buf, (int64_t)n, items, sums};
    cpu_pool_run(im->ctx.pool, items, stream_item, &j); /* warm-up */
    volatile float sink = 0.0f;
    for (int64_t r = 0; r < reps; r++) {
        const double t0 = now_seconds();
        cpu_pool_run(im->ctx.pool, items, stream_item, &j);
        times[r] = now_seconds() - t0;
        sink += sums[0];
    }
    (void)sink;
    qsort(times, (size_t)reps, sizeof *times, cmp_double);
    const double med = (reps % 2) ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
    free(buf);
    free(times);
    free(sums);
    if (!(med > 0.0))
        return GEM_ERR_STATE;
    *bps = (double)(n * sizeof(float)) / med;
    return GEM_OK;
}

static gem_status scratch_bytes(const void *impl, gem_route route,
                                const gem_route_params *params, size_t *bytes)
{
    const cpu_impl *im = impl;
    if (!im->loaded)
        return GEM_ERR_STATE;
    return cpu_routes_scratch_bytes(route, &im->shape, params, bytes);
}

const gem_backend_ops gem_cpu_backend_ops = {
    create, destroy, threads_op, describe, load, run, output, read_bandwidth, scratch_bytes,
};
