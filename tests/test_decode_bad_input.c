/*
 * The decode API refuses bad calls with the documented status and writes
 * nothing: NULLs, shapes, views (live, capacity, strides that overlap rows,
 * extents that overflow, misalignment, unknown dtypes), configs (routes that
 * are oracles, tiles on the baseline, bounds), a stream on the CPU, a
 * workspace that is short or misaligned, and an output that overlaps q, the
 * cache or the workspace. gem_decode_validate answers the same as gem_decode.
 * K and V element types: unknown values, 16-bit tensors misaligned or placed so
 * that their 2-byte extent decides an overlap, every known pair supported on
 * the CPU.
 * The KV cache helper: bad descriptions, appends past capacity, non-finite rows
 * (refused, nothing written; for a 16-bit cache also finite F32 values that
 * round to infinity in it), rounding to BF16 / F16, ring wrap, reset. The
 * finiteness scan finds a NaN in q, in a live K row and in a live V row (F32
 * and 16-bit), and ignores rows past live. Views with K rebuilt from V: every
 * malformed field of the view and of gem_k_from_v, the baseline route, an
 * output over k_weight, and the scan of k_weight and V.
 * Runs on the CPU (host memory); the CUDA answers are in test_decode and
 * test_cuda_queries.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gem/check.h"
#include "gem/decode.h"
#include "tcheck.h"

#define NQ 8
#define NKV 2
#define D 16
#define CAP 32

typedef struct fixture {
    gem_decode_ctx *ctx;
    gem_decode_shape shape;
    float *q;     /* (NQ, D) */
    float *kv;    /* K then V: (NKV, CAP, D) each */
    uint16_t *kv16; /* BF16 K then F16 V: (NKV, CAP, D) each; one spare element for the
                       "K at 2 bytes" view; then room for an output after it */
    float *out;   /* (NQ, D) */
    void *ws;     /* (ws_room), 64-aligned */
    size_t ws_bytes; /* the default's at CAP */
    size_t ws_room;  /* ws_bytes and enough for check_config's explicit P 3 */
    gem_kv_view view;   /* F32, dense, 20 live rows */
    gem_kv_view view16; /* kv16, dense, 20 live rows */
} fixture;

/* gem_decode and gem_decode_validate answer `want` and leave out untouched. */
static void expect(fixture *f, const float *q, const gem_kv_view *kv, float *out, void *ws,
                   size_t ws_bytes, const gem_decode_config *cfg, void *stream, gem_status want,
                   const char *what)
{
    float before[NQ * D];
    if (out == f->out)
        for (int i = 0; i < NQ * D; i++)
            f->out[i] = 12345.0f;
    memcpy(before, f->out, sizeof before);
    const gem_status v = gem_decode_validate(f->ctx, &f->shape, q, kv, out, ws, ws_bytes, cfg,
                                             stream);
    const gem_status r = gem_decode(f->ctx, &f->shape, q, kv, out, ws, ws_bytes, cfg, stream);
    if (!TCHECK(v == want && r == want))
        fprintf(stderr, "     %s: validate %s, decode %s, want %s\n", what, gem_status_name(v),
                gem_status_name(r), gem_status_name(want));
    if (want != GEM_OK && !TCHECK(memcmp(before, f->out, sizeof before) == 0))
        fprintf(stderr, "     %s: the output was written\n", what);
}

static void check_decode_args(fixture *f)
{
    gem_kv_view kv = f->view;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_OK, "good call");
    /* NULLs */
    expect(f, NULL, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_NULL, "q NULL");
    expect(f, f->q, NULL, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_NULL, "view NULL");
    expect(f, f->q, &kv, NULL, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_NULL, "out NULL");
    expect(f, f->q, &kv, f->out, NULL, f->ws_bytes, NULL, NULL, GEM_ERR_NULL, "workspace NULL");
    kv.k = NULL;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_NULL, "k NULL");
    TCHECK_STATUS(gem_decode(NULL, &f->shape, f->q, &f->view, f->out, f->ws, f->ws_bytes, NULL,
                             NULL),
                  GEM_ERR_NULL);
    TCHECK_STATUS(gem_decode(f->ctx, NULL, f->q, &f->view, f->out, f->ws, f->ws_bytes, NULL, NULL),
                  GEM_ERR_NULL);
    /* shapes */
    gem_decode_shape good = f->shape;
    f->shape.n_kv_heads = 3; /* does not divide 8 */
    expect(f, f->q, &f->view, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_SHAPE, "heads");
    f->shape = good;
    f->shape.scale = NAN;
    expect(f, f->q, &f->view, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_SHAPE, "scale NaN");
    f->shape = good;
    f->shape.dk = 0;
    expect(f, f->q, &f->view, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_SHAPE, "dk 0");
    f->shape = good;
    f->shape.n_q_heads = INT64_MAX - 7;
    f->shape.n_kv_heads = 1;
    expect(f, f->q, &f->view, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_OVERFLOW,
           "heads overflow");
    f->shape = good;
    /* views */
    kv = f->view;
    kv.live = 0;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_SHAPE, "live 0");
    kv = f->view;
    kv.live = CAP + 1;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_SHAPE, "live > capacity");
    kv = f->view;
    kv.k_token_stride = D - 1; /* rows overlap */
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_SHAPE, "token stride");
    kv = f->view;
    kv.v_head_stride = (CAP - 1) * D; /* heads overlap */
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_SHAPE, "head stride");
    kv = f->view;
    kv.k_head_stride = -1;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_SHAPE, "negative stride");
    kv = f->view;
    kv.k_head_stride = INT64_MAX / 2;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_OVERFLOW, "extent");
    kv = f->view;
    kv.v_dtype = (gem_dtype)7;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_PARAM, "dtype");
    kv = f->view;
    kv.k = (const char *)f->kv + 1;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_ALIGN, "k misaligned");
    kv = f->view;
    kv.k_dtype = GEM_DTYPE_COUNT;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_PARAM, "k dtype count");
    kv = f->view;
    kv.k_dtype = (gem_dtype)-1;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_PARAM, "k dtype -1");
    /* a BF16 K / F16 V cache (f->view16) */
    kv = f->view16;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_OK, "bf16 K, f16 V");
    /* 16-bit elements need 2-byte alignment, not 4 (one row further on is still
     * a valid view: capacity rows plus one element fit the buffer) */
    kv.k = f->kv16 + 1;
    kv.capacity = CAP - 1;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_OK, "bf16 K at 2 bytes");
    kv.k = (const char *)f->kv16 + 1;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_ALIGN, "bf16 K odd");
    kv = f->view16;
    kv.v = (const char *)kv.v + 3;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_ALIGN, "f16 V odd");
    /* the extent of a 16-bit V is half the F32 one: an output right after it does
     * not overlap, one on its last element does */
    kv = f->view16;
    {
        uint16_t *after = f->kv16 + 2 * NKV * CAP * D;
        expect(f, f->q, &kv, (float *)(void *)after, f->ws, f->ws_bytes, NULL, NULL, GEM_OK,
               "out after an f16 V");
        expect(f, f->q, &kv, (float *)(void *)(after - 2), f->ws, f->ws_bytes, NULL, NULL,
               GEM_ERR_OVERLAP, "out on an f16 V's last element");
    }
    /* a 16-bit view with strides that would overlap rows */
    kv = f->view16;
    kv.k_token_stride = D - 1;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_SHAPE, "f16 stride");
    /* token-major with K = V in one buffer is a valid view */
    kv = f->view;
    kv.v = kv.k;
    kv.k_head_stride = kv.v_head_stride = D;
    kv.k_token_stride = kv.v_token_stride = NKV * D;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_OK, "K = V token-major");
    /* configs */
    const gem_decode_config ref = {GEM_ROUTE_REFERENCE, 0, 0}, online = {GEM_ROUTE_ONLINE, 0, 0},
                            base_tile = {GEM_ROUTE_BASELINE, 16, 4},
                            big_p = {GEM_ROUTE_FUSED, GEM_DECODE_MAX_PARTITIONS + 1, 4},
                            big_t = {GEM_ROUTE_FUSED, 32, GEM_DECODE_MAX_TILE + 1},
                            neg = {GEM_ROUTE_FUSED, -1, 4}, bad = {(gem_route)42, 0, 0},
                            explicit_ok = {GEM_ROUTE_FUSED, 3, 5};
    expect(f, f->q, &f->view, f->out, f->ws, f->ws_bytes, &ref, NULL, GEM_ERR_PARAM, "reference");
    expect(f, f->q, &f->view, f->out, f->ws, f->ws_bytes, &online, NULL, GEM_ERR_PARAM, "online");
    expect(f, f->q, &f->view, f->out, f->ws, f->ws_bytes, &base_tile, NULL, GEM_ERR_PARAM,
           "baseline tile");
    expect(f, f->q, &f->view, f->out, f->ws, f->ws_bytes, &big_p, NULL, GEM_ERR_PARAM, "P bound");
    expect(f, f->q, &f->view, f->out, f->ws, f->ws_bytes, &big_t, NULL, GEM_ERR_PARAM, "tile bound");
    expect(f, f->q, &f->view, f->out, f->ws, f->ws_bytes, &neg, NULL, GEM_ERR_PARAM, "P < 0");
    expect(f, f->q, &f->view, f->out, f->ws, f->ws_bytes, &bad, NULL, GEM_ERR_PARAM, "route 42");
    expect(f, f->q, &f->view, f->out, f->ws, f->ws_room, &explicit_ok, NULL, GEM_OK, "P3 t5");
    /* a stream on the CPU */
    expect(f, f->q, &f->view, f->out, f->ws, f->ws_bytes, NULL, (void *)f, GEM_ERR_PARAM, "stream");
    /* workspace: short, misaligned */
    size_t need = 0; /* the default's at this view's live (its P may be below the capacity's) */
    TCHECK_STATUS(gem_decode_workspace_bytes(f->ctx, &f->shape, f->view.live, NULL, &need), GEM_OK);
    expect(f, f->q, &f->view, f->out, f->ws, need - 1, NULL, NULL, GEM_ERR_RANGE,
           "short workspace");
    expect(f, f->q, &f->view, f->out, (char *)f->ws + 4, f->ws_bytes - 64, NULL, NULL,
           GEM_ERR_ALIGN, "misaligned workspace");
    /* overlaps: out on q, on K, on V, on the workspace; the workspace on V */
    expect(f, f->q, &f->view, f->q, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_OVERLAP, "out = q");
    expect(f, f->q, &f->view, f->kv + 5 * D, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_OVERLAP,
           "out in K");
    expect(f, f->q, &f->view, f->kv + NKV * CAP * D + 3, f->ws, f->ws_bytes, NULL, NULL,
           GEM_ERR_OVERLAP, "out in V");
    expect(f, f->q, &f->view, (float *)f->ws + 16, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_OVERLAP,
           "out in workspace");
    /* rows past live are still the cache's (its extent is the capacity): an output there
     * would clobber rows a later append fills */
    expect(f, f->q, &f->view, f->kv + (CAP - 8) * D, f->ws, f->ws_bytes, NULL, NULL,
           GEM_ERR_OVERLAP, "out in K past live");
}

static void check_queries(fixture *f)
{
    gem_decode_config cfg;
    TCHECK_STATUS(gem_decode_config_default(f->ctx, &f->shape, 0, &cfg), GEM_ERR_SHAPE);
    TCHECK_STATUS(gem_decode_config_default(f->ctx, &f->shape, 100, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_decode_config_default(f->ctx, &f->shape, 100, &cfg), GEM_OK);
    TCHECK(cfg.route == GEM_ROUTE_FUSED && cfg.partitions >= 1 && cfg.tile >= 1);
    size_t a = 0, b = 0;
    /* the default's workspace never shrinks as live grows */
    for (int64_t live = 1; live <= (1 << 20); live *= 4) {
        TCHECK_STATUS(gem_decode_workspace_bytes(f->ctx, &f->shape, live, NULL, &b), GEM_OK);
        TCHECK(b >= a);
        a = b;
    }
    TCHECK_STATUS(gem_decode_workspace_bytes(f->ctx, &f->shape, 0, NULL, &b), GEM_ERR_SHAPE);
    /* the context's allocator: aligned, refusals leave *out NULL, free takes NULL */
    void *w = (void *)&a;
    TCHECK_STATUS(gem_decode_workspace_alloc(f->ctx, 0, &w), GEM_ERR_PARAM);
    TCHECK(w == NULL);
    w = (void *)&a;
    TCHECK_STATUS(gem_decode_workspace_alloc(NULL, 64, &w), GEM_ERR_NULL);
    TCHECK(w == NULL);
    TCHECK_STATUS(gem_decode_workspace_alloc(f->ctx, 64, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_decode_workspace_alloc(f->ctx, SIZE_MAX, &w), GEM_ERR_OVERFLOW);
    TCHECK(w == NULL);
    TCHECK_STATUS(gem_decode_workspace_alloc(f->ctx, b, &w), GEM_OK);
    TCHECK(w && (uintptr_t)w % GEM_DECODE_WORKSPACE_ALIGN == 0);
    memset(w, 0x5A, b); /* all of it is the caller's (ASan checks the extent) */
    gem_decode_workspace_free(f->ctx, w);
    gem_decode_workspace_free(f->ctx, NULL);
    gem_decode_workspace_free(NULL, NULL);
    /* the view's default: the CPU's does not depend on the view; bad views as gem_decode */
    gem_decode_config vc, dc;
    TCHECK_STATUS(gem_decode_config_for_view(f->ctx, &f->shape, &f->view, &vc), GEM_OK);
    TCHECK_STATUS(gem_decode_config_default(f->ctx, &f->shape, f->view.live, &dc), GEM_OK);
    TCHECK(vc.route == dc.route && vc.partitions == dc.partitions && vc.tile == dc.tile);
    TCHECK_STATUS(gem_decode_config_for_view(NULL, &f->shape, &f->view, &vc), GEM_ERR_NULL);
    TCHECK_STATUS(gem_decode_config_for_view(f->ctx, NULL, &f->view, &vc), GEM_ERR_NULL);
    TCHECK_STATUS(gem_decode_config_for_view(f->ctx, &f->shape, NULL, &vc), GEM_ERR_NULL);
    TCHECK_STATUS(gem_decode_config_for_view(f->ctx, &f->shape, &f->view, NULL), GEM_ERR_NULL);
    gem_kv_view bad = f->view;
    bad.live = 0;
    TCHECK_STATUS(gem_decode_config_for_view(f->ctx, &f->shape, &bad, &vc), GEM_ERR_SHAPE);
    bad = f->view;
    bad.live = bad.capacity + 1;
    TCHECK_STATUS(gem_decode_config_for_view(f->ctx, &f->shape, &bad, &vc), GEM_ERR_SHAPE);
    const double inv_freq[1] = {1.0};
    gem_k_from_v rot = {f->q, inv_freq, 1, D / 2, 0};
    bad = f->view;
    bad.k = NULL;
    bad.k_head_stride = bad.k_token_stride = 0;
    bad.k_from_v = &rot;
    TCHECK_STATUS(gem_decode_config_for_view(f->ctx, &f->shape, &bad, &vc), GEM_OK);
    rot.n_pairs = D; /* more pairs than half */
    TCHECK_STATUS(gem_decode_config_for_view(f->ctx, &f->shape, &bad, &vc), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_decode_supports(f->ctx, &f->shape, GEM_DTYPE_F32, GEM_DTYPE_F32), GEM_OK);
    TCHECK_STATUS(gem_decode_supports_route(f->ctx, &f->shape, GEM_DTYPE_BF16, GEM_DTYPE_F16,
                                            GEM_ROUTE_BASELINE),
                  GEM_OK); /* the CPU runs every type pair on both routes */
    TCHECK_STATUS(gem_decode_supports_route(f->ctx, &f->shape, GEM_DTYPE_F32, GEM_DTYPE_F32,
                                            GEM_ROUTE_REFERENCE),
                  GEM_ERR_PARAM); /* an oracle is not a decode route */
    TCHECK_STATUS(gem_decode_supports(f->ctx, &f->shape, (gem_dtype)9, GEM_DTYPE_F32),
                  GEM_ERR_PARAM);
    TCHECK_STATUS(gem_decode_supports(f->ctx, &f->shape, GEM_DTYPE_F32, GEM_DTYPE_COUNT),
                  GEM_ERR_PARAM);
    TCHECK_STATUS(gem_decode_supports(f->ctx, &f->shape, (gem_dtype)-1, GEM_DTYPE_F32),
                  GEM_ERR_PARAM);
    /* the CPU runs every pair of the four element types */
    for (int kt = 0; kt < GEM_DTYPE_COUNT; kt++)
        for (int vt = 0; vt < GEM_DTYPE_COUNT; vt++)
            TCHECK_STATUS(gem_decode_supports(f->ctx, &f->shape, (gem_dtype)kt, (gem_dtype)vt),
                          GEM_OK);
    TCHECK_STATUS(gem_decode_supports(NULL, &f->shape, GEM_DTYPE_F32, GEM_DTYPE_F32),
                  GEM_ERR_NULL);
    gem_decode_ctx *c = (gem_decode_ctx *)1;
    TCHECK_STATUS(gem_decode_ctx_create(GEM_BACKEND_CPU, -1, &c), GEM_ERR_PARAM);
    TCHECK(c == NULL);
    TCHECK_STATUS(gem_decode_ctx_create(GEM_BACKEND_CPU, 4097, &c), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_decode_ctx_create((gem_backend)5, 0, &c), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_decode_ctx_create(GEM_BACKEND_CPU, 0, NULL), GEM_ERR_NULL);
    TCHECK_EQ_I64(gem_decode_ctx_device(f->ctx), -1);
    TCHECK(gem_decode_ctx_backend(f->ctx) == GEM_BACKEND_CPU);
}

/* The CPU default's partitions: never fewer as live grows, within [1, 32], the same for every
 * thread count (the bits must not depend on the threads), and at least 16 work items (KV heads
 * x partitions) wherever partitions of 16 rows allow them. */
static void check_cpu_default_partitions(void)
{
    gem_decode_ctx *c1 = NULL, *c3 = NULL;
    TCHECK_STATUS(gem_decode_ctx_create(GEM_BACKEND_CPU, 1, &c1), GEM_OK);
    TCHECK_STATUS(gem_decode_ctx_create(GEM_BACKEND_CPU, 3, &c3), GEM_OK);
    if (!c1 || !c3) {
        gem_decode_ctx_destroy(c1);
        gem_decode_ctx_destroy(c3);
        return;
    }
    const int64_t kv_heads[] = {1, 2, 4, 16, 32};
    for (size_t i = 0; i < sizeof kv_heads / sizeof kv_heads[0]; i++) {
        const int64_t g = kv_heads[i];
        const gem_decode_shape shape = {2 * g, g, 64, 64, 0.125f};
        int64_t last = 0;
        int ok = 1;
        for (int64_t live = 1; live <= 20000; live += live < 300 ? 1 : 97) {
            gem_decode_config a, b;
            if (gem_decode_config_default(c1, &shape, live, &a) != GEM_OK ||
                gem_decode_config_default(c3, &shape, live, &b) != GEM_OK) {
                ok = 0;
                break;
            }
            const int64_t p = a.partitions;
            const int64_t want_items = 16 < g * (live / 16) ? 16 : g * (live / 16);
            ok &= p == b.partitions && a.tile == b.tile && p >= last && p >= 1 && p <= 32 &&
                  (p * g >= want_items || p == 32);
            last = p;
        }
        if (!TCHECK(ok))
            fprintf(stderr, "     CPU default partitions with %lld KV heads\n", (long long)g);
    }
    gem_decode_ctx_destroy(c1);
    gem_decode_ctx_destroy(c3);
}

static void check_finite_scan(fixture *f)
{
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &f->view, NULL), GEM_OK);
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &f->view, f), GEM_ERR_PARAM);
    const float saved_q = f->q[5];
    f->q[5] = NAN;
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &f->view, NULL),
                  GEM_ERR_NONFINITE);
    f->q[5] = saved_q;
    float *k = f->kv, *v = f->kv + NKV * CAP * D;
    const int64_t live = f->view.live;
    k[(1 * CAP + live - 1) * D + 3] = INFINITY; /* the last live K row of head 1 */
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &f->view, NULL),
                  GEM_ERR_NONFINITE);
    k[(1 * CAP + live - 1) * D + 3] = 0.5f;
    v[(0 * CAP + 0) * D + 0] = NAN;
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &f->view, NULL),
                  GEM_ERR_NONFINITE);
    v[0] = 0.25f;
    v[(0 * CAP + live) * D] = NAN; /* past live: not part of the view */
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &f->view, NULL), GEM_OK);
    /* 16-bit: a BF16 NaN in a live K row, an F16 infinity in a live V row */
    uint16_t *k16 = f->kv16, *v16 = f->kv16 + NKV * CAP * D;
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &f->view16, NULL), GEM_OK);
    const uint16_t keep_k = k16[(1 * CAP + 7) * D + 9], keep_v = v16[(1 * CAP + live - 1) * D];
    k16[(1 * CAP + 7) * D + 9] = 0x7FC0u;
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &f->view16, NULL),
                  GEM_ERR_NONFINITE);
    k16[(1 * CAP + 7) * D + 9] = keep_k;
    v16[(1 * CAP + live - 1) * D] = 0xFC00u; /* -inf */
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &f->view16, NULL),
                  GEM_ERR_NONFINITE);
    v16[(1 * CAP + live - 1) * D] = keep_v;
    k16[(0 * CAP + live) * D + 1] = 0x7F80u; /* past live */
    v16[(1 * CAP + CAP - 1) * D] = 0x7E00u;
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &f->view16, NULL), GEM_OK);
}

/* K rebuilt from V (gem_k_from_v): every malformed view, rotation and route is refused with
 * its status and nothing written; a good one runs; the finiteness scan covers k_weight. */
static void check_k_from_v(fixture *f)
{
    float w[D + 1]; /* one spare: the view at w + 1 */
    for (int i = 0; i < D + 1; i++)
        w[i] = 0.75f + 0.03125f * (float)i;
    double inv_freq[D / 2];
    for (int j = 0; j < D / 2; j++)
        inv_freq[j] = pow(1e4, -2.0 * j / (double)D);
    const gem_k_from_v good = {w, inv_freq, 3, D / 2, 5};
    gem_k_from_v r = good;
    gem_kv_view kv = f->view;
    kv.k = NULL;
    kv.k_head_stride = kv.k_token_stride = 0;
    kv.k_from_v = &r;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_OK, "K from V");
    TCHECK_STATUS(gem_decode_supports_k_from_v(f->ctx, &f->shape, GEM_DTYPE_F32, &r), GEM_OK);
    /* the view: a K tensor, K strides, dtypes that differ */
    gem_kv_view bad = kv;
    bad.k = f->kv;
    expect(f, f->q, &bad, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_SHAPE, "kfv with k");
    bad = kv;
    bad.k_token_stride = D;
    expect(f, f->q, &bad, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_SHAPE,
           "kfv with K strides");
    bad = kv;
    bad.k_dtype = GEM_DTYPE_BF16;
    expect(f, f->q, &bad, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_PARAM,
           "kfv K dtype differs");
    /* the rotation's fields */
    const struct {
        gem_k_from_v r;
        gem_status want;
        const char *what;
    } rots[] = {
        {{NULL, inv_freq, 3, D / 2, 5}, GEM_ERR_PARAM, "no k_weight"},
        {{w, NULL, 3, D / 2, 5}, GEM_ERR_PARAM, "no inv_freq"},
        {{w, NULL, 0, D / 2, 5}, GEM_OK, "no pair rotates: inv_freq unused"},
        {{w, inv_freq, 3, 0, 5}, GEM_ERR_PARAM, "half 0"},
        {{w, inv_freq, 3, D / 2 + 1, 5}, GEM_ERR_PARAM, "2 half > dk"},
        {{w, inv_freq, D / 2 + 1, D / 2, 5}, GEM_ERR_PARAM, "n_pairs > half"},
        {{w, inv_freq, -1, D / 2, 5}, GEM_ERR_PARAM, "n_pairs < 0"},
        {{w, inv_freq, 3, D / 2, -1}, GEM_ERR_PARAM, "pos0 < 0"},
        {{w, inv_freq, 3, D / 2, GEM_K_FROM_V_MAX_POS - CAP + 1}, GEM_ERR_PARAM,
         "positions past 2^40"},
        {{w, inv_freq, 3, D / 2, GEM_K_FROM_V_MAX_POS - CAP}, GEM_OK, "the last positions"},
        {{w + 1, inv_freq, 3, D / 2, 5}, GEM_OK, "k_weight at any float"},
    };
    for (size_t i = 0; i < sizeof rots / sizeof rots[0]; i++) {
        r = rots[i].r;
        expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, rots[i].want, rots[i].what);
    }
    r = good;
    r.k_weight = (const float *)(const void *)((const char *)w + 2);
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_ALIGN,
           "k_weight misaligned");
    double bad_freq[3] = {1.0, NAN, 0.5};
    r = good;
    r.inv_freq = bad_freq;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_PARAM, "NaN inv_freq");
    bad_freq[1] = -0.5;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_PARAM,
           "negative inv_freq");
    bad_freq[1] = INFINITY;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_PARAM,
           "infinite inv_freq");
    /* the baseline route has no kernel for it; dk != dv cannot be one */
    r = good;
    const gem_decode_config base = {GEM_ROUTE_BASELINE, 2, 0};
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, &base, NULL, GEM_ERR_UNSUPPORTED,
           "kfv on the baseline");
    gem_decode_shape wide = f->shape;
    wide.dv = D / 2;
    TCHECK_STATUS(gem_decode_supports_k_from_v(f->ctx, &wide, GEM_DTYPE_F32, &r), GEM_ERR_SHAPE);
    TCHECK_STATUS(gem_decode_supports_k_from_v(f->ctx, &f->shape, GEM_DTYPE_COUNT, &r),
                  GEM_ERR_PARAM);
    TCHECK_STATUS(gem_decode_supports_k_from_v(f->ctx, &f->shape, GEM_DTYPE_F32, NULL),
                  GEM_ERR_NULL);
    /* an output over k_weight */
    r.k_weight = f->out;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_OVERLAP,
           "out over k_weight");
    /* the scan: k_weight and V; K is not looked for */
    r = good;
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &kv, NULL), GEM_OK);
    w[D - 1] = NAN;
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &kv, NULL), GEM_ERR_NONFINITE);
    w[D - 1] = 1.0f;
    float *v = f->kv + NKV * CAP * D;
    const float keep = v[(1 * CAP + 19) * D + 2];
    v[(1 * CAP + 19) * D + 2] = INFINITY;
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &kv, NULL), GEM_ERR_NONFINITE);
    v[(1 * CAP + 19) * D + 2] = keep;
    r.inv_freq = bad_freq;
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &kv, NULL), GEM_ERR_PARAM);
}

/* A scaled score that is not finite, on both CPU routes and both cache types: NaN or infinity
 * in q or a live K row is GEM_ERR_NONFINITE; finite inputs whose scale * q.k overflows float
 * are GEM_ERR_SCORE, whichever token and head they sit at. */
static void check_score_status(fixture *f)
{
    const gem_decode_config base = {GEM_ROUTE_BASELINE, 2, 0};
    const gem_decode_config *cfgs[2] = {NULL, &base};
    const gem_kv_view *views[2] = {&f->view, &f->view16};
    float *k = f->kv;
    uint16_t *k16 = f->kv16;
    const int64_t row = (1 * CAP + 13) * D; /* KV head 1, token 13 */
    const int64_t qe = (1 * (NQ / NKV) + 1) * D + 4; /* a query head of KV head 1 */
    for (int c = 0; c < 2; c++)
        for (int w = 0; w < 2; w++) {
            const float keep = k[row + 4];
            const uint16_t keep16 = k16[row + 4];
            k[row + 4] = NAN;
            k16[row + 4] = 0x7FC0u;
            TCHECK_STATUS(gem_decode(f->ctx, &f->shape, f->q, views[w], f->out, f->ws,
                                     f->ws_bytes, cfgs[c], NULL),
                          GEM_ERR_NONFINITE);
            k[row + 4] = keep;
            k16[row + 4] = keep16;
            const float keep_q = f->q[qe]; /* a query head of group 2 */
            f->q[qe] = INFINITY;
            TCHECK_STATUS(gem_decode(f->ctx, &f->shape, f->q, views[w], f->out, f->ws,
                                     f->ws_bytes, cfgs[c], NULL),
                          GEM_ERR_NONFINITE);
            /* finite, but q[4] * K[4] = 3e38 * ~1e30 overflows float */
            f->q[qe] = 3e38f;
            const float keep_k = k[row + 4];
            const uint16_t keep_k16 = k16[row + 4];
            k[row + 4] = 1e30f;
            k16[row + 4] = 0x7149u; /* BF16 ~1e30 */
            TCHECK_STATUS(gem_decode(f->ctx, &f->shape, f->q, views[w], f->out, f->ws,
                                     f->ws_bytes, cfgs[c], NULL),
                          GEM_ERR_SCORE);
            k[row + 4] = keep_k;
            k16[row + 4] = keep_k16;
            f->q[qe] = keep_q;
            TCHECK_STATUS(gem_decode(f->ctx, &f->shape, f->q, views[w], f->out, f->ws,
                                     f->ws_bytes, cfgs[c], NULL),
                          GEM_OK);
        }
}

/* The CPU fused route's statuses depend neither on its partition count nor on its threads (at
 * one partition with an item for every thread, 1 here, an item also divides its heads'
 * outputs in one pool run; with 3 threads and 2 KV heads it does not): a non-finite live V row is
 * GEM_ERR_STATE (the division is not finite), and a non-finite K row of any KV head is
 * GEM_ERR_NONFINITE even when a V row of an earlier head is not finite too. The baseline
 * route answers GEM_ERR_STATE for the V row too. */
static void check_value_status(fixture *f)
{
    float *k = f->kv, *v = f->kv + NKV * CAP * D;
    const int64_t vrow = (0 * CAP + 3) * D, krow = (1 * CAP + 13) * D; /* KV heads 0 and 1 */
    gem_decode_ctx *ctxs[2] = {NULL, NULL};
    const gem_status made = gem_decode_ctx_create(GEM_BACKEND_CPU, 1, &ctxs[0]);
    if (!TCHECK(made == GEM_OK &&
                gem_decode_ctx_create(GEM_BACKEND_CPU, 3, &ctxs[1]) == GEM_OK)) {
        gem_decode_ctx_destroy(ctxs[0]);
        return;
    }
    for (int64_t run = 0; run < 4; run++) {
        const int64_t p = 1 + run % 2;
        gem_decode_ctx *ctx = ctxs[run / 2];
        const gem_decode_config cfg = {GEM_ROUTE_FUSED, p, 4};
        size_t need = 0, need_base = 0;
        const gem_decode_config base = {GEM_ROUTE_BASELINE, p, 0};
        if (!TCHECK(gem_decode_workspace_bytes(ctx, &f->shape, CAP, &cfg, &need) == GEM_OK &&
                    gem_decode_workspace_bytes(ctx, &f->shape, CAP, &base, &need_base) ==
                        GEM_OK))
            continue;
        const size_t wsb = (need > need_base ? need : need_base) + GEM_DECODE_WORKSPACE_ALIGN;
        const size_t wsn = wsb - wsb % GEM_DECODE_WORKSPACE_ALIGN;
        void *ws = aligned_alloc(GEM_DECODE_WORKSPACE_ALIGN, wsn);
        if (!TCHECK(ws != NULL))
            continue;
        const float keep_v = v[vrow + 2], keep_k = k[krow + 5];
        v[vrow + 2] = NAN;
        TCHECK_STATUS(gem_decode(ctx, &f->shape, f->q, &f->view, f->out, ws, wsn, &cfg,
                                 NULL),
                      GEM_ERR_STATE);
        TCHECK_STATUS(gem_decode(ctx, &f->shape, f->q, &f->view, f->out, ws, wsn, &base,
                                 NULL),
                      GEM_ERR_STATE);
        k[krow + 5] = INFINITY;
        TCHECK_STATUS(gem_decode(ctx, &f->shape, f->q, &f->view, f->out, ws, wsn, &cfg,
                                 NULL),
                      GEM_ERR_NONFINITE);
        v[vrow + 2] = keep_v;
        TCHECK_STATUS(gem_decode(ctx, &f->shape, f->q, &f->view, f->out, ws, wsn, &cfg,
                                 NULL),
                      GEM_ERR_NONFINITE);
        k[krow + 5] = keep_k;
        TCHECK_STATUS(gem_decode(ctx, &f->shape, f->q, &f->view, f->out, ws, wsn, &cfg,
                                 NULL),
                      GEM_OK);
        free(ws);
    }
    gem_decode_ctx_destroy(ctxs[0]);
    gem_decode_ctx_destroy(ctxs[1]);
}

static void check_cache(void)
{
    gem_kv_cache *c = (gem_kv_cache *)1;
    gem_kv_cache_desc d = {GEM_BACKEND_CPU, NKV, D, D, 4, GEM_DTYPE_F32, GEM_DTYPE_F32, 0};
    gem_kv_cache_desc bad = d;
    bad.capacity = 0;
    TCHECK_STATUS(gem_kv_cache_create(&bad, &c), GEM_ERR_SHAPE);
    TCHECK(c == NULL);
    bad = d;
    bad.k_dtype = (gem_dtype)8;
    TCHECK_STATUS(gem_kv_cache_create(&bad, &c), GEM_ERR_PARAM);
    bad = d;
    bad.ring = 2;
    TCHECK_STATUS(gem_kv_cache_create(&bad, &c), GEM_ERR_PARAM);
    bad = d;
    bad.capacity = INT64_MAX / 4;
    TCHECK_STATUS(gem_kv_cache_create(&bad, &c), GEM_ERR_OVERFLOW);
    TCHECK_STATUS(gem_kv_cache_create(NULL, &c), GEM_ERR_NULL);
    TCHECK_STATUS(gem_kv_cache_create(&d, &c), GEM_OK);
    float rows[3 * NKV * D], vrows[3 * NKV * D];
    gem_fill_uniform(3, -1.0f, 1.0f, rows, 3 * NKV * D);
    gem_fill_uniform(4, -1.0f, 1.0f, vrows, 3 * NKV * D);
    gem_kv_view view;
    TCHECK_STATUS(gem_kv_cache_view(c, &view), GEM_OK);
    TCHECK_EQ_I64(view.live, 0);
    TCHECK_STATUS(gem_kv_cache_append(c, rows, vrows, 0, NULL), GEM_ERR_SHAPE);
    TCHECK_STATUS(gem_kv_cache_append(c, NULL, vrows, 1, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_kv_cache_append(c, rows, vrows, 1, (void *)rows), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_kv_cache_append(c, rows, vrows, 3, NULL), GEM_OK);
    /* the chunk's first token is finite, its second is not: the first alone goes in; the
     * pair is refused whole and nothing is written */
    float nan_rows[2 * NKV * D];
    gem_fill_uniform(5, -1.0f, 1.0f, nan_rows, 2 * NKV * D);
    nan_rows[NKV * D + 7] = NAN;
    TCHECK_STATUS(gem_kv_cache_append(c, nan_rows, vrows, 1, NULL), GEM_OK);
    TCHECK_EQ_I64(gem_kv_cache_live(c), 4);
    TCHECK_STATUS(gem_kv_cache_reset(c, NULL), GEM_OK);
    TCHECK_EQ_I64(gem_kv_cache_live(c), 0);
    TCHECK_STATUS(gem_kv_cache_append(c, nan_rows, vrows, 2, NULL), GEM_ERR_NONFINITE);
    TCHECK_EQ_I64(gem_kv_cache_live(c), 0);
    TCHECK_STATUS(gem_kv_cache_check(c, NULL), GEM_OK);
    /* rows land head-major at (g, row): token i of head g is rows[(i*NKV + g)*D] */
    TCHECK_STATUS(gem_kv_cache_append(c, rows, vrows, 3, NULL), GEM_OK);
    TCHECK_STATUS(gem_kv_cache_view(c, &view), GEM_OK);
    TCHECK(view.live == 3 && view.capacity == 4 && view.k_token_stride == D &&
           view.k_head_stride == 4 * D);
    const float *kc = view.k, *vc = view.v;
    TCHECK(memcmp(kc + (1 * 4 + 2) * D, rows + (2 * NKV + 1) * D, D * sizeof(float)) == 0);
    TCHECK(memcmp(vc + (0 * 4 + 1) * D, vrows + (1 * NKV + 0) * D, D * sizeof(float)) == 0);
    /* past capacity: refused whole */
    TCHECK_STATUS(gem_kv_cache_append(c, rows, vrows, 2, NULL), GEM_ERR_RANGE);
    TCHECK_EQ_I64(gem_kv_cache_appended(c), 3);
    gem_kv_cache_destroy(c);

    /* a ring of 4 rows: the fifth token overwrites row 0 */
    d.ring = 1;
    TCHECK_STATUS(gem_kv_cache_create(&d, &c), GEM_OK);
    TCHECK_STATUS(gem_kv_cache_append(c, rows, vrows, 3, NULL), GEM_OK);
    TCHECK_STATUS(gem_kv_cache_append(c, rows, vrows, 2, NULL), GEM_OK);
    TCHECK_EQ_I64(gem_kv_cache_live(c), 4);
    TCHECK_EQ_I64(gem_kv_cache_appended(c), 5);
    TCHECK_STATUS(gem_kv_cache_view(c, &view), GEM_OK);
    kc = view.k;
    TCHECK(memcmp(kc + (1 * 4 + 0) * D, rows + (1 * NKV + 1) * D, D * sizeof(float)) == 0);
    TCHECK(memcmp(kc + (1 * 4 + 3) * D, rows + (0 * NKV + 1) * D, D * sizeof(float)) == 0);
    TCHECK_STATUS(gem_kv_cache_append(c, rows, vrows, 5, NULL), GEM_ERR_RANGE); /* > capacity */
    gem_kv_cache_destroy(c);
    gem_kv_cache_destroy(NULL);
}

/* A BF16 K / F16 V cache: rows are rounded to nearest even (ties to even,
 * F16 subnormals kept), and a finite F32 value that rounds to infinity in the
 * cache's type is refused like a non-finite one, with nothing written. */
static void check_cache16(void)
{
    const gem_kv_cache_desc d = {GEM_BACKEND_CPU, NKV, D, D, 4, GEM_DTYPE_BF16, GEM_DTYPE_F16, 0};
    gem_kv_cache *c = NULL;
    TCHECK_STATUS(gem_kv_cache_create(&d, &c), GEM_OK);
    if (!c)
        return;
    /* value, its BF16 bits, its F16 bits */
    static const struct {
        float x;
        uint16_t bf16, f16;
    } want[] = {
        {1.0f, 0x3F80, 0x3C00},
        {-0.0f, 0x8000, 0x8000},
        {1.0f / 3.0f, 0x3EAB, 0x3555},
        {1.00390625f, 0x3F80, 0x3C04},          /* BF16 tie to even (down) */
        {1.01171875f, 0x3F82, 0x3C0C},          /* BF16 tie to even (up) */
        {1.00048828125f, 0x3F80, 0x3C00},       /* 1 + 2^-11: F16 tie to even (down) */
        {1.00146484375f, 0x3F80, 0x3C02},       /* 1 + 3 * 2^-11: F16 tie to even (up) */
        {0x1p-20f, 0x3580, 0x0010},             /* an F16 subnormal */
        {0x1p-25f, 0x3300, 0x0000},             /* F16: half the smallest subnormal, to 0 */
        {0x1.8p-24f, 0x33C0, 0x0002},           /* F16: 1.5 quanta, tie to 2 */
        {65504.0f, 0x4780, 0x7BFF},             /* F16 max */
        {-65519.0f, 0xC780, 0xFBFF},            /* F16: just below the overflow bound */
    };
    const int nw = (int)(sizeof want / sizeof want[0]);
    float k[NKV * D], v[NKV * D];
    for (int i = 0; i < NKV * D; i++)
        k[i] = v[i] = 0.5f;
    for (int i = 0; i < nw; i++)
        k[D + i] = v[D + i] = want[i].x; /* head 1 */
    TCHECK_STATUS(gem_kv_cache_append(c, k, v, 1, NULL), GEM_OK);
    gem_kv_view view;
    TCHECK_STATUS(gem_kv_cache_view(c, &view), GEM_OK);
    TCHECK(view.k_dtype == GEM_DTYPE_BF16 && view.v_dtype == GEM_DTYPE_F16);
    const uint16_t *kc = view.k, *vc = view.v;
    for (int i = 0; i < nw; i++) {
        const uint16_t kb = kc[view.k_head_stride + i], vb = vc[view.v_head_stride + i];
        if (!TCHECK(kb == want[i].bf16 && vb == want[i].f16))
            fprintf(stderr, "     %a: bf16 %04x (want %04x), f16 %04x (want %04x)\n",
                    (double)want[i].x, kb, want[i].bf16, vb, want[i].f16);
    }
    TCHECK(kc[0] == 0x3F00 && vc[0] == 0x3800); /* 0.5 in head 0 */
    /* finite F32 values the cache's type cannot hold: refused, nothing written */
    k[5] = 65520.0f; /* fits BF16, overflows F16: only V is F16 */
    TCHECK_STATUS(gem_kv_cache_append(c, k, v, 1, NULL), GEM_OK);
    v[5] = 65520.0f;
    TCHECK_STATUS(gem_kv_cache_append(c, k, v, 1, NULL), GEM_ERR_NONFINITE);
    v[5] = 0.5f;
    k[D + 3] = FLT_MAX; /* overflows BF16 */
    TCHECK_STATUS(gem_kv_cache_append(c, k, v, 1, NULL), GEM_ERR_NONFINITE);
    k[D + 3] = 0x1.fefffep127f; /* the largest float that rounds to BF16's largest */
    TCHECK_STATUS(gem_kv_cache_append(c, k, v, 1, NULL), GEM_OK);
    TCHECK_EQ_I64(gem_kv_cache_live(c), 3);
    TCHECK_STATUS(gem_kv_cache_view(c, &view), GEM_OK);
    kc = view.k;
    TCHECK(kc[view.k_head_stride + 2 * D + 3] == 0x7F7F);
    TCHECK_STATUS(gem_kv_cache_check(c, NULL), GEM_OK);
    gem_kv_cache_destroy(c);
}

/* FP8 E4M3 views: a scale exactly where a tensor holds FP8, each > 0 and at most FLT_MAX / 448,
 * aligned; every other view refused with its status and nothing written; the finiteness scan
 * finds the E4M3 NaN codes; the cache helper refuses FP8. */
static void check_fp8(fixture *f)
{
    uint8_t *b = malloc(2 * NKV * CAP * D + 1);
    float sc[NKV + 1] = {0.5f, 0.003f, 1.0f};
    if (!TCHECK(b != NULL))
        return;
    for (int i = 0; i < 2 * NKV * CAP * D; i++)
        b[i] = (uint8_t)((i * 29) % 0x7E); /* every finite positive code */
    gem_kv_view kv = f->view;
    kv.k = b;
    kv.v = b + NKV * CAP * D;
    kv.k_dtype = kv.v_dtype = GEM_DTYPE_FP8_E4M3;
    kv.k_scale = sc;
    kv.v_scale = sc + 1;
    expect(f, f->q, &kv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_OK, "fp8 good call");
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &kv, NULL), GEM_OK);
    gem_kv_view bad = kv;
    bad.k_scale = NULL;
    expect(f, f->q, &bad, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_PARAM,
           "fp8 K without a scale");
    bad = kv;
    bad.v_scale = NULL;
    expect(f, f->q, &bad, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_PARAM,
           "fp8 V without a scale");
    bad = f->view;
    bad.k_scale = sc;
    expect(f, f->q, &bad, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_PARAM,
           "a scale for an f32 K");
    bad = kv;
    bad.v_scale = (const float *)(const void *)((const char *)sc + 2);
    expect(f, f->q, &bad, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_ALIGN,
           "fp8 V scale misaligned");
    const float bads[] = {0.0f, -1.0f, NAN, INFINITY, FLT_MAX / 400.0f};
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        float s2[NKV] = {0.5f, bads[i]};
        bad = kv;
        bad.k_scale = s2;
        expect(f, f->q, &bad, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_PARAM,
               "fp8 K scale out of range");
        TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &bad, NULL),
                      GEM_ERR_PARAM);
        gem_decode_config cfg;
        TCHECK_STATUS(gem_decode_config_for_view(f->ctx, &f->shape, &bad, &cfg), GEM_ERR_PARAM);
        double ref[NQ * D];
        TCHECK_STATUS(gem_attn_reference_kv(&f->shape, f->q, &bad, ref, NQ * D), GEM_ERR_PARAM);
    }
    float s3[NKV] = {FLT_MAX / 448.0f, 1e-30f}; /* the bounds themselves */
    bad = kv;
    bad.k_scale = s3;
    TCHECK_STATUS(gem_kv_view_scales_check(&bad, NKV), GEM_OK);
    /* K rebuilt from an FP8 V takes V's scale alone */
    float w[D];
    for (int i = 0; i < D; i++)
        w[i] = 1.0f;
    const double inv[2] = {0.1, 0.01};
    const gem_k_from_v rot = {w, inv, 2, D / 2, 0};
    gem_kv_view kfv = kv;
    kfv.k = NULL;
    kfv.k_head_stride = kfv.k_token_stride = 0;
    kfv.k_from_v = &rot;
    kfv.k_scale = NULL;
    expect(f, f->q, &kfv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_OK, "fp8 K from V");
    kfv.k_scale = sc;
    expect(f, f->q, &kfv, f->out, f->ws, f->ws_bytes, NULL, NULL, GEM_ERR_PARAM,
           "fp8 K from V with a K scale");
    /* the NaN codes S.1111.111 in live rows; past live they are not part of the view */
    const int64_t live = kv.live;
    b[(1 * CAP + live - 1) * D + 2] = 0x7Fu;
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &kv, NULL),
                  GEM_ERR_NONFINITE);
    b[(1 * CAP + live - 1) * D + 2] = 0x10u;
    b[NKV * CAP * D + 5] = 0xFFu;
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &kv, NULL),
                  GEM_ERR_NONFINITE);
    b[NKV * CAP * D + 5] = 0x10u;
    b[(0 * CAP + live) * D] = 0x7Fu;
    TCHECK_STATUS(gem_decode_check_finite(f->ctx, &f->shape, f->q, &kv, NULL), GEM_OK);
    /* the cache helper keeps no scales */
    const gem_kv_cache_desc d8 = {GEM_BACKEND_CPU, NKV, D, D, CAP, GEM_DTYPE_FP8_E4M3,
                                  GEM_DTYPE_F32, 0};
    gem_kv_cache *c = NULL;
    TCHECK_STATUS(gem_kv_cache_create(&d8, &c), GEM_ERR_UNSUPPORTED);
    TCHECK(c == NULL);
    free(b);
}

int main(void)
{
    fixture f;
    memset(&f, 0, sizeof f);
    TCHECK_STATUS(gem_decode_ctx_create(GEM_BACKEND_CPU, 2, &f.ctx), GEM_OK);
    const gem_decode_shape shape = {NQ, NKV, D, D, 0.25f};
    f.shape = shape;
    f.q = malloc(NQ * D * sizeof(float));
    f.kv = malloc(2 * NKV * CAP * D * sizeof(float));
    f.out = malloc(NQ * D * sizeof(float));
    /* the default at the capacity, and room for the explicit P 3 of check_config */
    const gem_decode_config p3 = {GEM_ROUTE_FUSED, 3, 5};
    TCHECK_STATUS(gem_decode_workspace_bytes(f.ctx, &f.shape, CAP, NULL, &f.ws_bytes), GEM_OK);
    TCHECK_STATUS(gem_decode_workspace_bytes(f.ctx, &f.shape, CAP, &p3, &f.ws_room), GEM_OK);
    f.ws_room = f.ws_room > f.ws_bytes ? f.ws_room : f.ws_bytes;
    f.ws = aligned_alloc(64, (f.ws_room + 63) / 64 * 64);
    if (!f.ctx || !f.q || !f.kv || !f.out || !f.ws)
        return tcheck_summary("test_decode_bad_input");
    gem_fill_uniform(1, -1.0f, 1.0f, f.q, NQ * D);
    gem_fill_uniform(2, -1.0f, 1.0f, f.kv, 2 * NKV * CAP * D);
    f.view = gem_kv_view_dense(f.kv, f.kv + NKV * CAP * D, D, D, 20, CAP);
    /* BF16 K: the F32 values' top halves; F16 V: halves in [0.125, 1) */
    f.kv16 = malloc((2 * NKV * CAP * D + 2 * NQ * D) * sizeof(uint16_t));
    if (!f.kv16)
        return tcheck_summary("test_decode_bad_input");
    for (int i = 0; i < NKV * CAP * D; i++) {
        uint32_t bits;
        memcpy(&bits, &f.kv[i], sizeof bits);
        f.kv16[i] = (uint16_t)(bits >> 16);
        f.kv16[NKV * CAP * D + i] = (uint16_t)(0x3000 + (i * 37) % 0x0C00);
    }
    f.view16 = f.view;
    f.view16.k = f.kv16;
    f.view16.v = f.kv16 + NKV * CAP * D;
    f.view16.k_dtype = GEM_DTYPE_BF16;
    f.view16.v_dtype = GEM_DTYPE_F16;
    check_decode_args(&f);
    check_queries(&f);
    check_cpu_default_partitions();
    check_finite_scan(&f);
    check_k_from_v(&f);
    check_fp8(&f);
    check_score_status(&f);
    check_value_status(&f);
    check_cache();
    check_cache16();
    free(f.q);
    free(f.kv);
    free(f.kv16);
    free(f.out);
    free(f.ws);
    gem_decode_ctx_destroy(f.ctx);
    return tcheck_summary("test_decode_bad_input");
}
