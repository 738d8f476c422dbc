/*
 * The engine's host-memory operations: streaming allocations (huge pages from
 * 2 MiB up, like the cache helper), memcpy, poison, a wall-clock timer, and the
 * multi-threaded streaming-read probe.
 */
#define _DEFAULT_SOURCE 1 /* clock_gettime */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_kernels.h"
#include "cpu_memory.h"
#include "cpu_pool.h"
#include "harness.h"

typedef struct cpu_hx {
    double t0; /* start of the timed region */
} cpu_hx;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static gem_status hx_open(void **hx)
{
    *hx = calloc(1, sizeof(cpu_hx));
    return *hx ? GEM_OK : GEM_ERR_NOMEM;
}

static void hx_close(void *hx) { free(hx); }

static void *hx_stream(void *hx)
{
    (void)hx;
    return NULL;
}

/* Streaming memory (cpu_memory.h); the harness writes every byte it reads. */
static gem_status hx_alloc(size_t bytes, void **out) { return cpu_stream_alloc(bytes, 0, out); }

static void hx_free(void *p) { free(p); }

static gem_status hx_copy(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    return GEM_OK;
}

static gem_status hx_poison(void *hx, void *p, size_t n, uint32_t bits, size_t guard)
{
    (void)hx;
    uint32_t *w = p;
    for (size_t i = 0; i < n; i++)
        w[i] = bits;
    memset(w + n, 0xA5, guard);
    return GEM_OK;
}

static gem_status hx_timer_start(void *hx)
{
    ((cpu_hx *)hx)->t0 = now_seconds();
    return GEM_OK;
}

static gem_status hx_timer_stop(void *hx, double *seconds)
{
    *seconds = now_seconds() - ((cpu_hx *)hx)->t0;
    return GEM_OK;
}

typedef struct stream_job {
    const float *buf; /* (n) */
    int64_t n, items;
    int64_t ahead;    /* prefetch distance in bytes (0: none) */
    cpu_prefetch_hint hint;
    float *sums;      /* (items) */
} stream_job;

static void stream_item(void *ctx, int64_t item, int64_t thread)
{
    (void)thread;
    stream_job *j = ctx;
    const int64_t per = (j->n + j->items - 1) / j->items;
    const int64_t b = item * per < j->n ? item * per : j->n;
    const int64_t e = b + per < j->n ? b + per : j->n;
    j->sums[item] = cpu_stream_sum_ahead(j->buf + b, e - b, j->ahead, j->hint);
}

/* The probe's readers: hardware prefetch alone, and two software prefetches (the decoder's
 * products and the attention kernels read with one). On the H200 host's Xeon the fused route
 * read 104.7% of a probe of 4 slices a thread and no prefetch (results/h200/run54); with 16
 * slices a thread (a shorter tail when the threads finish) the readers below read 9.6-13.8%
 * more than that one in the same process (dev/cpu/stream_probe, results/h200/run61). */
#define PROBE_SLICES 16
static const struct {
    int64_t ahead;
    cpu_prefetch_hint hint;
} probe_readers[] = {{0, CPU_PF_L2}, {4096, CPU_PF_L2}, {16384, CPU_PF_L1}};

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Streaming read over `bytes` on `threads` threads: the buffer (the allocation
 * policy of K and V) split into PROBE_SLICES contiguous slices per thread, taken
 * in turn, read by each of probe_readers `reps` times; the best reader's median. */
static gem_status hx_read_bandwidth(void *hx, int64_t threads, size_t bytes, int64_t reps,
                                    double *bps)
{
    (void)hx;
    const size_t n = bytes / sizeof(float);
    cpu_pool *pool = NULL;
    void *buf = NULL;
    gem_status st = cpu_pool_create(threads, &pool);
    if (st == GEM_OK)
        st = hx_alloc(n * sizeof(float), &buf);
    const int64_t items = threads * PROBE_SLICES;
    double *times = calloc((size_t)reps, sizeof *times);
    float *sums = calloc((size_t)items, sizeof *sums);
    if (st == GEM_OK && (!times || !sums))
        st = GEM_ERR_NOMEM;
    if (st == GEM_OK) {
        float *f = buf;
        for (size_t i = 0; i < n; i++)
            f[i] = (float)(i & 7) * 0.125f;
        double best = 0.0;
        volatile float sink = 0.0f;
        for (size_t k = 0; k < sizeof probe_readers / sizeof probe_readers[0]; k++) {
            stream_job j = {f, (int64_t)n, items, probe_readers[k].ahead, probe_readers[k].hint,
                            sums};
            cpu_pool_run(pool, items, stream_item, &j); /* warm-up */
            for (int64_t r = 0; r < reps; r++) {
                const double t0 = now_seconds();
                cpu_pool_run(pool, items, stream_item, &j);
                times[r] = now_seconds() - t0;
                sink += sums[0];
            }
            qsort(times, (size_t)reps, sizeof *times, cmp_double);
            const double med =
                (reps % 2) ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
            const double rate = med > 0.0 ? (double)(n * sizeof(float)) / med : 0.0;
            best = rate > best ? rate : best;
        }
        (void)sink;
        if (best > 0.0)
            *bps = best;
        else
            st = GEM_ERR_STATE;
    }
    free(buf);
    free(times);
    free(sums);
    cpu_pool_destroy(pool);
    return st;
}

const gem_harness_ops gem_harness_cpu_ops = {
    hx_open,   hx_close,       hx_stream,     hx_alloc,         hx_free,          hx_copy,
    hx_copy,   hx_poison,      hx_timer_start, hx_timer_stop,   hx_read_bandwidth,
};
