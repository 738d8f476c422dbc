/*
 * The CPU backend of gem/decode.h: a thread pool per context, the fused and
 * baseline routes (cpu_fused.c, cpu_baseline.c) on the caller's view and
 * workspace, the tuned default, the finiteness scan, the baseline route's
 * stage clock (decode_stage_clock.h, off unless switched on), and the KV cache
 * helper's host memory and row copies.
 */
#define _DEFAULT_SOURCE 1 /* sysconf */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_kernels.h"
#include "cpu_memory.h"
#include "cpu_routes.h"
#include "decode_internal.h"
#include "decode_stage_clock.h"
#include "kv_view.h"

/* The fused route's tuned default on the CPU: 32 sequence partitions, tiles of
 * 4 tokens (results/cpu: P32 tile 4 against P64, tile 8 and tile 32 at 64K and
 * 128K; the design's candidate), from 8,192 live rows on. Below, one partition
 * per CPU_MIN_PARTITION_ROWS rows: small partitions cost more to set up and
 * merge than they gain (Gemma 4's sliding layers, D256 and 16 KV heads, on 2
 * threads: live 64 / 256 / 1,024 took 219 / 492 / 1,564 us at P 32 against
 * 106 / 258-295 / 1,004-1,153 us at P 1-4; results/cpu/partitions-small), but
 * never fewer than CPU_MIN_ITEMS work items (KV heads x partitions) while each
 * partition keeps CPU_MIN_ITEM_ROWS rows: with 4 KV heads (Gemma 4's full
 * layers) P 1 leaves 4 items, and the 16-core Xeon of the H200 host ran such a
 * call at live 64 / 256 in 43.6 / 110 us at P 1 against 29.1 / 64.5 at P 4
 * with its caches cold (results/h200/run54, dev/cpu/small_live; a 2-vCPU VM
 * loses 7-40 us there, in noisy runs). The count depends on the shape and live
 * alone, never on the threads, so the bits do not either, and it never
 * decreases as live grows. */
#define CPU_DEFAULT_PARTITIONS 32
#define CPU_MIN_PARTITION_ROWS 256
#define CPU_MIN_ITEMS 16
#define CPU_MIN_ITEM_ROWS 16
#define CPU_DEFAULT_TILE 4

typedef struct cpu_decode {
    cpu_pool *pool;
    int64_t threads;
    atomic_flag busy; /* one gem_decode at a time: the pool is not reentrant */
    int stage_clock_on; /* 1: baseline calls add their stage times to stage_seconds */
    gem_baseline_stage_seconds stage_seconds; /* decode_stage_clock.h */
    char desc[256];
} cpu_decode;

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

static gem_status create(int64_t threads, void **impl)
{
    *impl = NULL;
    if (threads == 0) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n >= 1 ? (int64_t)n : 1;
        if (threads > 4096)
            threads = 4096;
    }
    cpu_decode *c = calloc(1, sizeof *c);
    if (!c)
        return GEM_ERR_NOMEM;
    atomic_flag_clear(&c->busy);
    gem_status st = cpu_pool_create(threads, &c->pool);
    if (st != GEM_OK) {
        free(c);
        return st;
    }
    c->threads = threads;
    char model[160];
    cpu_model(model, sizeof model);
    snprintf(c->desc, sizeof c->desc, "%s, %lld threads, %s kernels", model, (long long)threads,
             cpu_kernels_isa());
    *impl = c;
    return GEM_OK;
}

static void destroy(void *impl)
{
    cpu_decode *c = impl;
    if (!c)
        return;
    cpu_pool_destroy(c->pool);
    free(c);
}

cpu_pool *gem_cpu_decode_pool(void *impl) { return ((cpu_decode *)impl)->pool; }

static int64_t threads_of(const void *impl) { return ((const cpu_decode *)impl)->threads; }
static int device_of(const void *impl)
{
    (void)impl;
    return -1;
}
static const char *describe(const void *impl) { return ((const cpu_decode *)impl)->desc; }

/* Every valid shape and every pair of known dtypes (F32, BF16, F16 for K and V
 * each; the caller checked both are known): both routes convert on load. */
static gem_status supports(const void *impl, const gem_decode_shape *shape, gem_dtype k_dtype,
                           gem_dtype v_dtype, gem_route route)
{
    (void)impl;
    (void)shape;
    (void)k_dtype;
    (void)v_dtype;
    (void)route; /* every shape, type pair and route */
    return GEM_OK;
}

/* Any rotation: the fused route builds each K row in F32 before the scores. */
static gem_status k_from_v_supports(const void *impl, const gem_decode_shape *shape,
                                    gem_dtype v_dtype, const gem_k_from_v *kfv)
{
    (void)impl;
    (void)shape;
    (void)v_dtype;
    (void)kfv;
    return GEM_OK;
}

static void config_default(const void *impl, const gem_decode_shape *shape, int64_t live,
                           gem_decode_config *out)
{
    (void)impl;
    const int64_t by_items = (CPU_MIN_ITEMS + shape->n_kv_heads - 1) / shape->n_kv_heads;
    const int64_t by_rows = live / CPU_MIN_ITEM_ROWS;
    int64_t p = live / CPU_MIN_PARTITION_ROWS;
    if (p < by_items)
        p = by_items < by_rows ? by_items : by_rows;
    out->route = GEM_ROUTE_FUSED;
    out->partitions = p < 1 ? 1 : (p > CPU_DEFAULT_PARTITIONS ? CPU_DEFAULT_PARTITIONS : p);
    out->tile = CPU_DEFAULT_TILE;
}

static gem_status config_check(const void *impl, const gem_decode_config *cfg)
{
    (void)impl;
    (void)cfg; /* every tile and partition count within the API's bounds runs */
    return GEM_OK;
}

static gem_status workspace_bytes(const void *impl, const gem_decode_shape *shape, int64_t live,
                                  const gem_decode_config *cfg, size_t *bytes)
{
    cpu_layout l;
    gem_status st = cpu_routes_layout(shape, live, cfg, threads_of(impl), &l);
    if (st == GEM_OK)
        *bytes = l.total_bytes;
    return st;
}

static gem_status check_memory(const void *impl, const gem_decode_args *a)
{
    (void)impl;
    if (a->stream)
        return GEM_ERR_PARAM; /* the context's pool is the CPU's stream */
    if ((uintptr_t)a->q % sizeof(float) != 0 || (uintptr_t)a->out % sizeof(float) != 0)
        return GEM_ERR_ALIGN;
    return GEM_OK;
}

static gem_status run(void *impl, const gem_decode_args *a)
{
    cpu_decode *c = impl;
    if (atomic_flag_test_and_set(&c->busy))
        return GEM_ERR_STATE;
    cpu_layout l;
    gem_status st = cpu_routes_layout(a->shape, a->kv->live, &a->cfg, c->threads, &l);
    if (st == GEM_OK) {
        cpu_run r;
        cpu_run_bind(&r, c->pool, c->threads, a->workspace, &l);
        if (c->stage_clock_on)
            r.stage_clock = &c->stage_seconds;
        if (a->cfg.route == GEM_ROUTE_FUSED)
            st = cpu_route_fused(&r, a->shape, a->q, a->kv, &a->cfg, a->state ? NULL : a->out,
                                 a->state ? a->out : NULL);
        else
            st = cpu_route_baseline(&r, a->shape, a->q, a->kv, &a->cfg, a->out);
    }
    atomic_flag_clear(&c->busy);
    return st;
}

/* ---- the baseline route's stage clock (decode_stage_clock.h) ---------------------------- */

void cpu_decode_stage_clock_set(void *impl, int on) { ((cpu_decode *)impl)->stage_clock_on = on; }

void cpu_decode_stage_clock_read(const void *impl, gem_baseline_stage_seconds *out)
{
    *out = ((const cpu_decode *)impl)->stage_seconds;
}

void cpu_decode_stage_clock_reset(void *impl)
{
    memset(&((cpu_decode *)impl)->stage_seconds, 0, sizeof(gem_baseline_stage_seconds));
}

/* ---- finiteness ------------------------------------------------------------------------ */

int gem_cpu_floats_finite(const float *p, int64_t n)
{
    uint32_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, p + i, sizeof bits);
        bad |= (uint32_t)((bits & 0x7F800000u) == 0x7F800000u);
    }
    return bad == 0;
}

/* 16-bit rows: exponent all ones (BF16 0x7F80, F16 0x7C00). */
static int halves_finite(const uint16_t *p, int64_t n, uint16_t mask)
{
    uint32_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad |= (uint32_t)((p[i] & mask) == mask);
    return bad == 0;
}

/* FP8 E4M3 rows: S.1111.111 is NaN (there are no infinities). */
static int fp8_finite(const uint8_t *p, int64_t n)
{
    uint32_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad |= (uint32_t)((p[i] & 0x7Fu) == 0x7Fu);
    return bad == 0;
}

static int row_finite(const void *base, gem_dtype t, int64_t off, int64_t n)
{
    switch (t) {
    case GEM_DTYPE_FP8_E4M3: return fp8_finite((const uint8_t *)base + off, n);
    case GEM_DTYPE_BF16: return halves_finite((const uint16_t *)base + off, n, 0x7F80u);
    case GEM_DTYPE_F16: return halves_finite((const uint16_t *)base + off, n, 0x7C00u);
    default: return gem_cpu_floats_finite((const float *)base + off, n);
    }
}

#define SCAN_ROWS 1024 /* rows of one head per scan item */

typedef struct scan_job {
    const gem_kv_view *kv;
    int64_t heads, dk, dv, chunks;
    gem_status *status; /* (items) */
} scan_job;

static void scan_item(void *ctx, int64_t item, int64_t thread)
{
    (void)thread;
    const scan_job *j = ctx;
    const gem_kv_view *kv = j->kv;
    const int64_t g = item / j->chunks, c = item % j->chunks;
    const int64_t t0 = c * SCAN_ROWS, t1 = t0 + SCAN_ROWS < kv->live ? t0 + SCAN_ROWS : kv->live;
    gem_status st = GEM_OK;
    for (int64_t t = t0; t < t1 && st == GEM_OK; t++)
        if ((!kv->k_from_v &&
             !row_finite(kv->k, kv->k_dtype, g * kv->k_head_stride + t * kv->k_token_stride,
                         j->dk)) ||
            !row_finite(kv->v, kv->v_dtype, g * kv->v_head_stride + t * kv->v_token_stride,
                        j->dv))
            st = GEM_ERR_NONFINITE;
    j->status[item] = st;
}

static gem_status check_finite(void *impl, const gem_decode_shape *shape, const float *q,
                               const gem_kv_view *kv, void *stream)
{
    cpu_decode *c = impl;
    if (stream)
        return GEM_ERR_PARAM;
    if (!gem_cpu_floats_finite(q, shape->n_q_heads * shape->dk) ||
        (kv->k_from_v && !gem_cpu_floats_finite(kv->k_from_v->k_weight, shape->dk)))
        return GEM_ERR_NONFINITE;
    const int64_t chunks = (kv->live + SCAN_ROWS - 1) / SCAN_ROWS;
    size_t items = 0;
    if (gem_mul_size((size_t)shape->n_kv_heads, (size_t)chunks, &items) != GEM_OK ||
        items > (size_t)INT64_MAX / sizeof(gem_status))
        return GEM_ERR_OVERFLOW;
    gem_status *status = malloc(items * sizeof *status);
    if (!status)
        return GEM_ERR_NOMEM;
    if (atomic_flag_test_and_set(&c->busy)) {
        free(status);
        return GEM_ERR_STATE;
    }
    scan_job j = {kv, shape->n_kv_heads, shape->dk, shape->dv, chunks, status};
    cpu_pool_run(c->pool, (int64_t)items, scan_item, &j);
    atomic_flag_clear(&c->busy);
    const gem_status st = cpu_first_error(status, (int64_t)items);
    free(status);
    return st;
}

/* Host memory in whole lines of the workspace's alignment (aligned_alloc's rule). */
static gem_status workspace_alloc(void *impl, size_t bytes, void **out)
{
    (void)impl;
    const size_t a = GEM_DECODE_WORKSPACE_ALIGN;
    if (bytes > SIZE_MAX - (a - 1))
        return GEM_ERR_OVERFLOW;
    void *p = aligned_alloc(a, (bytes + a - 1) / a * a);
    if (!p)
        return GEM_ERR_NOMEM;
    *out = p;
    return GEM_OK;
}

/* gem_decode returns when its output is written: nothing is queued on the memory. */
static void workspace_free(void *impl, void *p)
{
    (void)impl;
    free(p);
}

static gem_status merge(void *impl, const gem_decode_shape *shape, const float *states,
                        int64_t n, float *out, void *stream, int do_run)
{
    cpu_decode *c = impl;
    if (stream)
        return GEM_ERR_PARAM;
    if ((uintptr_t)states % sizeof(float) != 0 || (uintptr_t)out % sizeof(float) != 0)
        return GEM_ERR_ALIGN;
    if (!do_run)
        return GEM_OK;
    if (atomic_flag_test_and_set(&c->busy))
        return GEM_ERR_STATE;
    gem_status st = cpu_merge_states(c->pool, shape, states, n, out);
    atomic_flag_clear(&c->busy);
    return st;
}

/* The pieces one after another on their contexts' pools, each state into its place, then the
 * merge on the leader's. */
static gem_status across(void *leader, const gem_decode_shape *shape, void *const *impls,
                         const gem_decode_args *args, int64_t n, float *states, float *out,
                         void *stream)
{
    const int64_t sf = GEM_DECODE_STATE_FLOATS(shape->n_q_heads, shape->dv);
    for (int64_t i = 0; i < n; i++) {
        gem_status st = run(impls[i], &args[i]);
        if (st != GEM_OK)
            return st;
        if (args[i].out != states + i * sf)
            memcpy(states + i * sf, args[i].out, (size_t)sf * sizeof(float));
    }
    return merge(leader, shape, states, n, out, stream, 1);
}

const gem_decode_backend_ops gem_cpu_decode_ops = {
    create,          destroy,      threads_of,      device_of,    describe, supports,
    k_from_v_supports, config_default, config_check, workspace_bytes, check_memory, run,
    check_finite,    NULL, /* the default does not depend on the view */
    workspace_alloc, workspace_free, merge, across,
};

/* ---- KV cache helper: host memory ----------------------------------------------------- */

/* Zeroed streaming memory (cpu_memory.h). */
static gem_status cache_alloc(size_t bytes, void **out) { return cpu_stream_alloc(bytes, 1, out); }

static void cache_free(void *p) { free(p); }

/* Stores n floats of src at element offset off of a tensor of type t. */
static void store_row(void *base, gem_dtype t, int64_t off, const float *src, int64_t n)
{
    if (t == GEM_DTYPE_F32) {
        memcpy((float *)base + off, src, (size_t)n * sizeof(float));
        return;
    }
    uint16_t *dst = (uint16_t *)base + off;
    for (int64_t i = 0; i < n; i++)
        dst[i] = t == GEM_DTYPE_BF16 ? gem_f32_to_bf16(src[i]) : gem_f32_to_f16(src[i]);
}

/* 1 when all n floats are finite and stay finite stored as type t (a finite
 * F32 value can round to infinity in BF16 or F16: |x| >= 65520 in F16). */
static int storable(const float *src, int64_t n, gem_dtype t)
{
    if (!gem_cpu_floats_finite(src, n))
        return 0;
    if (t == GEM_DTYPE_F32)
        return 1;
    uint32_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint16_t h =
            t == GEM_DTYPE_BF16 ? gem_f32_to_bf16(src[i]) : gem_f32_to_f16(src[i]);
        const uint16_t e = t == GEM_DTYPE_BF16 ? 0x7F80u : 0x7C00u;
        bad |= (uint32_t)((h & e) == e);
    }
    return bad == 0;
}

static gem_status cache_append(const float *k, const float *v, int64_t n, int64_t heads,
                               int64_t dk, int64_t dv, int64_t capacity, int64_t first, void *kc,
                               gem_dtype kt, void *vc, gem_dtype vt, int *flag, void *stream)
{
    (void)stream;
    /* every row first, so a refused append writes nothing */
    (void)flag; /* refused rows are not appended, so nothing is ever flagged here */
    if (!storable(k, n * heads * dk, kt) || !storable(v, n * heads * dv, vt))
        return GEM_ERR_NONFINITE;
    for (int64_t i = 0; i < n; i++) {
        const int64_t row = (first + i) % capacity;
        for (int64_t g = 0; g < heads; g++) {
            store_row(kc, kt, (g * capacity + row) * dk, k + (i * heads + g) * dk, dk);
            store_row(vc, vt, (g * capacity + row) * dv, v + (i * heads + g) * dv, dv);
        }
    }
    return GEM_OK;
}

static gem_status cache_flag_reset(int *flag, void *stream)
{
    (void)stream;
    *flag = 0;
    return GEM_OK;
}

static gem_status cache_flag_read(const int *flag, void *stream, int *value)
{
    (void)stream;
    *value = *flag;
    return GEM_OK;
}

static gem_status cache_check_pointer(const void *p)
{
    (void)p; /* host memory cannot be told from device memory without CUDA */
    return GEM_OK;
}

const gem_cache_ops gem_cpu_cache_ops = {
    cache_alloc, cache_free, cache_append, cache_flag_reset, cache_flag_read, cache_check_pointer,
};
