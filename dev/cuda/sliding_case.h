/*
What dev/cuda/sliding_decode.cu and dev/cuda/sliding_cluster.cu share: the seeded inputs of Gemma 4
31B's sliding-window shape (32 query heads over 16 KV heads, dk = dv = 256, a token-major ring of
WINDOW = 1,024 rows) in F32, BF16 or F16, with NaN in every row past live, and their view; the
summary of a sample of times and the parsing of a list argument.
*/
#ifndef GEM_DEV_CUDA_SLIDING_CASE_H
#define GEM_DEV_CUDA_SLIDING_CASE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common.h"

extern "C" {
#include "gem/decode.h"
}

#define D 256
#define GROUP 2
#define NKV 16
#define NQ (NKV * GROUP)
#define WINDOW 1024

/* x rounded to type t (the value the cache holds) and its bits in that type (F32: its own). */
static float round_to(gem_dtype t, float x, uint32_t *bits)
{
    if (t == GEM_DTYPE_BF16) {
        const __nv_bfloat16 b = __float2bfloat16_rn(x);
        *bits = __bfloat16_as_ushort(b);
        return __bfloat162float(b);
    }
    if (t == GEM_DTYPE_F16) {
        const __half h = __float2half_rn(x);
        *bits = __half_as_ushort(h);
        return __half2float(h);
    }
    memcpy(bits, &x, sizeof x);
    return x;
}

/* Element i of a tensor of type t set to `bits`. */
static void store_bits(void *p, gem_dtype t, size_t i, uint32_t bits)
{
    if (t == GEM_DTYPE_F32)
        ((uint32_t *)p)[i] = bits;
    else
        ((uint16_t *)p)[i] = (uint16_t)bits;
}

/* One case's host data: q (NQ, D); the cache token-major (capacity, NKV, D) in type t with NaN
 * in every row past live; the values it holds, head-major (NKV, live, D) floats, for the
 * reference. */
typedef struct host_case {
    gem_dtype t;
    int64_t live, capacity;
    float *q;
    void *k, *v;   /* (capacity, NKV, D) of type t */
    float *kf, *vf; /* (NKV, live, D) */
    size_t cache_bytes;
} host_case;

static int make_case(host_case *c, gem_dtype t, int64_t live, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->t = t;
    c->live = live;
    c->capacity = live > WINDOW ? live : WINDOW;
    const size_t es = gem_dtype_size(t);
    const size_t elems = (size_t)c->capacity * NKV * D, live_elems = (size_t)live * NKV * D;
    c->cache_bytes = elems * es;
    c->q = (float *)malloc(NQ * D * sizeof(float));
    c->k = malloc(c->cache_bytes);
    c->v = malloc(c->cache_bytes);
    c->kf = (float *)malloc(live_elems * sizeof(float));
    c->vf = (float *)malloc(live_elems * sizeof(float));
    float *row = (float *)malloc(D * sizeof(float));
    if (!c->q || !c->k || !c->v || !c->kf || !c->vf || !row) {
        free(row);
        return -1;
    }
    fill(c->q, NQ * D, seed);
    uint32_t nan_bits =
        t == GEM_DTYPE_F32 ? 0x7FC00000u : (t == GEM_DTYPE_BF16 ? 0x7FC0u : 0x7E00u);
    for (size_t i = 0; i < elems; i++) {
        store_bits(c->k, t, i, nan_bits);
        store_bits(c->v, t, i, nan_bits);
    }
    for (int which = 0; which < 2; which++) {
        void *cache = which ? c->v : c->k;
        float *vals = which ? c->vf : c->kf;
        for (int64_t g = 0; g < NKV; g++)
            for (int64_t r = 0; r < live; r++) {
                fill(row, D, seed * 7919 + (uint64_t)(which * 1000003 + g * 65537 + r));
                for (int i = 0; i < D; i++) {
                    uint32_t bits;
                    vals[((size_t)g * live + r) * D + i] = round_to(t, row[i], &bits);
                    store_bits(cache, t, ((size_t)r * NKV + g) * D + i, bits);
                }
            }
    }
    free(row);
    return 0;
}

/* Frees what make_case allocated. */
static void free_case(host_case *c)
{
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->kf);
    free(c->vf);
}

/* The token-major view of a device copy of the cache. */
static inline gem_kv_view view_of(const host_case *c, const void *k, const void *v)
{
    gem_kv_view kv;
    memset(&kv, 0, sizeof kv);
    kv.k = k;
    kv.v = v;
    kv.k_dtype = kv.v_dtype = c->t;
    kv.k_head_stride = kv.v_head_stride = D;
    kv.k_token_stride = kv.v_token_stride = NKV * D;
    kv.live = c->live;
    kv.capacity = c->capacity;
    return kv;
}

/* ---- times and arguments ---- */

typedef struct stats {
    double p10, median, p90;
} stats;

/* The 10th percentile, median and 90th percentile of t (n >= 10 times; sorted in place). */
static stats summarize(double *t, int n)
{
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    stats s;
    s.p10 = t[n / 10];
    s.median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    s.p90 = t[n - 1 - n / 10];
    return s;
}

/* "a,b,c" into out (cap entries); the count parsed. */
static int parse_list(const char *s, int64_t *out, int cap)
{
    int n = 0;
    char *copy = strdup(s);
    for (char *t = strtok(copy, ","); t && n < cap; t = strtok(NULL, ","))
        out[n++] = atoll(t);
    free(copy);
    return n;
}

/* "f32,bf16" into out (cap entries): the names gem_dtype_parse knows; the count parsed. */
static int parse_types(const char *s, gem_dtype *out, int cap)
{
    int n = 0;
    char *copy = strdup(s);
    for (char *t = strtok(copy, ","); t && n < cap; t = strtok(NULL, ","))
        if (gem_dtype_parse(t, &out[n]) == GEM_OK)
            n++;
    free(copy);
    return n;
}

#endif /* GEM_DEV_CUDA_SLIDING_CASE_H */
