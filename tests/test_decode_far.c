/*
 * Offsets past 2^32: gem_decode on caller memory whose rows lie more than 2^31
 * elements (F32) or 2^32 elements (the other types) from the tensor's base, on
 * every backend this machine has (the CPU; CUDA when a GPU is present). A kernel
 * that formed an element or byte offset in 32 bits would read another row there,
 * or fault. Each case lays out the same values twice, head-major and dense, and
 * far apart (a token stride or a head stride of 2^18 .. 2^31 elements), and
 * checks, through gem_decode exactly as a caller would:
 *   - the view's default config is the same for both views, and the far call gives
 *     bit for bit the dense call's output;
 *   - NMSE <= 1e-10 against the double reference of the dense view, nothing
 *     non-finite, every output element written, and a repeat of the far call
 *     bitwise equal;
 *   - on the CPU, the double reference of the far view is the dense one bit for bit
 *     (the oracle's own offsets).
 * The cases: the production shape (32 query heads over 4 KV heads, D512) with
 * F32 and K and V both stored (the default route and the baseline), BF16 with a
 * head stride of 2^31, FP8 E4M3; the sliding-window shape (16 KV heads, D256)
 * in BF16; and V alone with K rebuilt from it (Gemma 4's rotation) in F32 at 12,300
 * rows and BF16 at 32,800, past the rows where CUDA's long K-from-V passes start.
 * On the CPU the far tensors are anonymous mappings without swap reservation
 * (MAP_NORESERVE; 4.7-24 GiB of address space each) of which only the rows'
 * pages are touched (under 140 MB a tensor). On CUDA they are device allocations
 * of the same extents (24 GiB the largest), poisoned with NaN before the rows are
 * copied in, so a wrong offset reads NaN.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gem/check.h"
#include "gem/decode.h"
#include "harness.h"
#include "tcheck.h"
#include "tdtype.h"

#define MAX_NMSE 1e-10
#define MAX_KV_HEADS 16

typedef enum far_kind {
    FAR_TOKEN, /* (capacity, heads, d) with the token stride `stride`: heads adjacent */
    FAR_HEAD   /* (heads, capacity, d) with the head stride `stride`: rows adjacent */
} far_kind;

typedef struct fcase {
    const char *name;
    gem_route route; /* GEM_ROUTE_COUNT: the view's default config (cfg NULL) */
    int64_t nq, nkv, d, live;
    gem_dtype t;     /* K and V */
    far_kind kind;
    int64_t stride;  /* elements */
    int kfv;         /* V alone, K rebuilt from it (Gemma 4's rotation, row 0 at 10^6) */
} fcase;

#define DEF GEM_ROUTE_COUNT

static const fcase cases[] = {
    {"production F32, token stride 2^23", DEF, 32, 4, 512, 300, GEM_DTYPE_F32, FAR_TOKEN,
     (int64_t)1 << 23, 0},
    {"production F32 baseline, token stride 2^23", GEM_ROUTE_BASELINE, 32, 4, 512, 300,
     GEM_DTYPE_F32, FAR_TOKEN, (int64_t)1 << 23, 0},
    {"production BF16, head stride 2^31", DEF, 32, 4, 512, 300, GEM_DTYPE_BF16, FAR_HEAD,
     (int64_t)1 << 31, 0},
    {"production FP8 E4M3, token stride 2^24", DEF, 32, 4, 512, 300, GEM_DTYPE_FP8_E4M3,
     FAR_TOKEN, (int64_t)1 << 24, 0},
    {"sliding BF16, token stride 2^24", DEF, 32, 16, 256, 300, GEM_DTYPE_BF16, FAR_TOKEN,
     (int64_t)1 << 24, 0},
    {"production F32 V alone, token stride 2^19", DEF, 32, 4, 512, 12300, GEM_DTYPE_F32,
     FAR_TOKEN, (int64_t)1 << 19, 1},
    {"production BF16 V alone, token stride 2^18", DEF, 32, 4, 512, 32800, GEM_DTYPE_BF16,
     FAR_TOKEN, (int64_t)1 << 18, 1},
};

/* A tensor's layout: strides and extent in elements. */
typedef struct lay {
    int64_t hs, ts, elems;
} lay;

static lay dense_lay(const fcase *c)
{
    const lay l = {c->live * c->d, c->d, c->nkv * c->live * c->d};
    return l;
}

static lay far_lay(const fcase *c)
{
    lay l;
    if (c->kind == FAR_TOKEN) {
        l.hs = c->d;
        l.ts = c->stride;
    } else {
        l.hs = c->stride;
        l.ts = c->d;
    }
    l.elems = (c->nkv - 1) * l.hs + (c->live - 1) * l.ts + c->d;
    return l;
}

/* The 32-bit word that poisons a tensor of type t with its NaN. */
static uint32_t nan_word(gem_dtype t)
{
    switch (t) {
    case GEM_DTYPE_F32: return 0x7FC00000u;
    case GEM_DTYPE_BF16: return 0x7FC07FC0u;
    case GEM_DTYPE_F16: return 0x7E007E00u;
    default: return 0x7F7F7F7Fu;
    }
}

/* The rows of a dense head-major tensor `src` placed at layout l of `dst` in the backend's
 * memory by its copies (the CPU's copy is memcpy, so a mapping takes them too). Rows adjacent
 * in l go in one copy: a token's heads (FAR_TOKEN) or a head's rows (FAR_HEAD). */
static int place_rows(const fcase *c, const gem_harness_ops *ops, void *dst, lay l,
                      const void *src)
{
    const size_t es = gem_dtype_size(c->t);
    const lay s = dense_lay(c);
    if (c->kind == FAR_HEAD) {
        for (int64_t g = 0; g < c->nkv; g++) {
            char *to = (char *)dst + (size_t)(g * l.hs) * es;
            const char *from = (const char *)src + (size_t)(g * s.hs) * es;
            if (ops->upload(to, from, (size_t)(c->live * c->d) * es) != GEM_OK)
                return 0;
        }
        return 1;
    }
    char *row = malloc((size_t)(c->nkv * c->d) * es);
    if (!row)
        return 0;
    int ok = 1;
    for (int64_t r = 0; r < c->live && ok; r++) {
        for (int64_t g = 0; g < c->nkv; g++)
            memcpy(row + (size_t)(g * c->d) * es,
                   (const char *)src + (size_t)(g * s.hs + r * s.ts) * es, (size_t)c->d * es);
        char *to = (char *)dst + (size_t)(r * l.ts) * es;
        ok = ops->upload(to, row, (size_t)(c->nkv * c->d) * es) == GEM_OK;
    }
    free(row);
    return ok;
}

/* 1 when `got` is GEM_OK; else a failed check and one line naming the call. */
static int status_ok(gem_status got, const char *what, const char *call)
{
    if (TCHECK(got == GEM_OK))
        return 1;
    fprintf(stderr, "     %s: %s: %s\n", what, call, gem_status_str(got));
    return 0;
}

/* ---- one backend ---------------------------------------------------------------------- */

typedef struct target {
    const char *name;
    gem_backend backend;
    const gem_harness_ops *ops;
    void *hx;
    gem_decode_ctx *ctx;
} target;

/* A tensor in the backend's memory: the CPU's far tensors are mappings (mapped = 1). */
typedef struct buf {
    void *p;
    size_t bytes;
    int mapped;
} buf;

static buf buf_alloc(const target *tg, size_t bytes, int far)
{
    buf b = {NULL, bytes, 0};
    if (tg->backend == GEM_BACKEND_CPU && far) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "     %s: no mapping of %.1f GiB of address space\n", tg->name,
                    (double)bytes / (double)(1u << 30));
            return b;
        }
#ifdef MADV_NOHUGEPAGE
        /* rows 2 MiB or more apart: a huge page a row would commit gigabytes */
        (void)madvise(p, bytes, MADV_NOHUGEPAGE);
#endif
        b.p = p;
        b.mapped = 1;
        return b;
    }
    if (tg->ops->alloc(bytes, &b.p) != GEM_OK)
        b.p = NULL;
    return b;
}

static void buf_free(const target *tg, buf *b)
{
    if (b->mapped)
        munmap(b->p, b->bytes);
    else
        tg->ops->free(b->p);
    b->p = NULL;
}

/* The rotation of a K-from-V case (inv_freq: 64 doubles). */
static gem_k_from_v kfv_of(const float *k_weight, double *inv_freq)
{
    gem_k_from_v r;
    memset(&r, 0, sizeof r);
    r.half = 256;
    r.n_pairs = 64;
    r.pos0 = 1000000;
    for (int64_t j = 0; j < r.n_pairs; j++)
        inv_freq[j] = pow(1e6, -2.0 * (double)j / 512.0);
    r.k_weight = k_weight;
    r.inv_freq = inv_freq;
    return r;
}

/* A view of c over tensors k and v (k unused with K rebuilt from V) at layout l. */
static gem_kv_view view_of(const fcase *c, const void *k, const void *v, lay l,
                           const gem_k_from_v *kfv, const float *scales)
{
    gem_kv_view kv;
    memset(&kv, 0, sizeof kv);
    kv.k = c->kfv ? NULL : k;
    kv.v = v;
    kv.k_dtype = kv.v_dtype = c->t;
    kv.k_head_stride = c->kfv ? 0 : l.hs;
    kv.k_token_stride = c->kfv ? 0 : l.ts;
    kv.v_head_stride = l.hs;
    kv.v_token_stride = l.ts;
    kv.live = kv.capacity = c->live;
    kv.k_from_v = c->kfv ? kfv : NULL;
    if (c->t == GEM_DTYPE_FP8_E4M3) {
        kv.k_scale = c->kfv ? NULL : scales;
        kv.v_scale = scales + MAX_KV_HEADS;
    }
    return kv;
}

/* gem_decode of view kv on tg twice (q and out in the backend's memory, the output poisoned
 * before each call): the first output into out_host (nq * d floats); 1 when both calls
 * answered GEM_OK, wrote every element and gave the same bits. */
static int decode_twice(const fcase *c, const target *tg, const gem_decode_shape *shape,
                        const float *dq, const gem_kv_view *kv, float *dout, float *out_host,
                        const char *what)
{
    const gem_decode_config cfg = {c->route, 0, 0};
    const gem_decode_config *pc = c->route == DEF ? NULL : &cfg;
    const size_t no = (size_t)(c->nq * c->d);
    size_t ws_bytes = 0;
    if (!status_ok(gem_decode_workspace_bytes(tg->ctx, shape, c->live, pc, &ws_bytes), what,
                   "gem_decode_workspace_bytes"))
        return 0;
    void *ws = NULL;
    float *host = gem_guard_alloc(no);
    int ok = status_ok(gem_decode_workspace_alloc(tg->ctx, ws_bytes ? ws_bytes : 1, &ws), what,
                       "gem_decode_workspace_alloc") &&
             TCHECK(host != NULL);
    void *stream = tg->ops->stream(tg->hx);
    for (int rep = 0; rep < 2 && ok; rep++) {
        ok = TCHECK(tg->ops->poison(tg->hx, dout, no, GEM_POISON_BITS, GEM_GUARD_BYTES) ==
                    GEM_OK);
        if (!status_ok(gem_decode(tg->ctx, shape, dq, kv, dout, ws, ws_bytes, pc, stream), what,
                       "gem_decode")) {
            ok = 0;
            break;
        }
        ok = TCHECK(tg->ops->download(host, dout, no * sizeof(float) + GEM_GUARD_BYTES) ==
                    GEM_OK);
        size_t unwritten = 0;
        int guard_ok = 0;
        gem_guard_check(host, no, &unwritten, &guard_ok);
        if (!TCHECK(unwritten == 0 && guard_ok)) {
            fprintf(stderr, "     %s: %zu unwritten, guard %s\n", what, unwritten,
                    guard_ok ? "ok" : "damaged");
            ok = 0;
        }
        if (rep == 0)
            memcpy(out_host, host, no * sizeof(float));
        else if (!TCHECK(memcmp(out_host, host, no * sizeof(float)) == 0)) {
            fprintf(stderr, "     %s: the repeat differs\n", what);
            ok = 0;
        }
    }
    gem_decode_workspace_free(tg->ctx, ws);
    gem_guard_free(host);
    return ok;
}

/* Case c on target tg: the dense and the far view of the same host values. */
static void check_on(const fcase *c, const target *tg, const float *q, const void *kh,
                     const void *vh, const float *k_weight, const double *ref,
                     const float *scales)
{
    char what[200];
    snprintf(what, sizeof what, "%s on %s", c->name, tg->name);
    const gem_decode_shape shape = {c->nq, c->nkv, c->d, c->d, 1.0f / sqrtf((float)c->d)};
    const size_t es = gem_dtype_size(c->t), no = (size_t)(c->nq * c->d);
    const lay dl = dense_lay(c), fl = far_lay(c);
    /* the bytes rounded up to whole 32-bit words, which the poison writes */
    const size_t dense_bytes = ((size_t)dl.elems * es + 3) / 4 * 4;
    const size_t far_bytes = ((size_t)fl.elems * es + 3) / 4 * 4;
    const int host = tg->backend == GEM_BACKEND_CPU;
    buf dk = {NULL, 0, 0}, fk = {NULL, 0, 0}, dv, fv, dq, dout, dw = {NULL, 0, 0};
    dv = buf_alloc(tg, dense_bytes, 0);
    fv = buf_alloc(tg, far_bytes, 1);
    if (!c->kfv) {
        dk = buf_alloc(tg, dense_bytes, 0);
        fk = buf_alloc(tg, far_bytes, 1);
    }
    dq = buf_alloc(tg, no * sizeof(float), 0);
    dout = buf_alloc(tg, no * sizeof(float) + GEM_GUARD_BYTES, 0);
    if (c->kfv)
        dw = buf_alloc(tg, (size_t)c->d * sizeof(float), 0);
    float *out_dense = malloc(no * sizeof(float)), *out_far = malloc(no * sizeof(float));
    if (!TCHECK(dv.p && fv.p && (c->kfv || (dk.p && fk.p)) && dq.p && dout.p &&
                (!c->kfv || dw.p) && out_dense && out_far)) {
        fprintf(stderr, "     %s: out of memory\n", what);
        goto done;
    }
    /* the device's far tensors NaN wherever no row is copied */
    if (!host && !TCHECK(tg->ops->poison(tg->hx, fv.p, far_bytes / 4, nan_word(c->t), 0) ==
                             GEM_OK &&
                         (c->kfv || tg->ops->poison(tg->hx, fk.p, far_bytes / 4,
                                                    nan_word(c->t), 0) == GEM_OK)))
        goto done;
    if (!TCHECK(tg->ops->upload(dv.p, vh, (size_t)dl.elems * es) == GEM_OK &&
                (c->kfv || tg->ops->upload(dk.p, kh, (size_t)dl.elems * es) == GEM_OK) &&
                place_rows(c, tg->ops, fv.p, fl, vh) &&
                (c->kfv || place_rows(c, tg->ops, fk.p, fl, kh)) &&
                tg->ops->upload(dq.p, q, no * sizeof(float)) == GEM_OK &&
                (!c->kfv ||
                 tg->ops->upload(dw.p, k_weight, (size_t)c->d * sizeof(float)) == GEM_OK)))
        goto done;
    double inv_freq[64];
    const gem_k_from_v kfv = kfv_of((const float *)dw.p, inv_freq);
    const gem_kv_view dense = view_of(c, dk.p, dv.p, dl, &kfv, scales);
    const gem_kv_view far = view_of(c, fk.p, fv.p, fl, &kfv, scales);
    /* the same config for both views, so the same kernels */
    gem_decode_config cd, cf;
    if (!status_ok(gem_decode_config_for_view(tg->ctx, &shape, &dense, &cd), what,
                   "gem_decode_config_for_view (dense)") ||
        !status_ok(gem_decode_config_for_view(tg->ctx, &shape, &far, &cf), what,
                   "gem_decode_config_for_view (far)"))
        goto done;
    if (!TCHECK(cd.route == cf.route && cd.partitions == cf.partitions && cd.tile == cf.tile))
        fprintf(stderr, "     %s: default configs differ (%s P%lld, %s P%lld)\n", what,
                gem_route_name(cd.route), (long long)cd.partitions, gem_route_name(cf.route),
                (long long)cf.partitions);
    if (!decode_twice(c, tg, &shape, (const float *)dq.p, &dense, (float *)dout.p, out_dense,
                      what) ||
        !decode_twice(c, tg, &shape, (const float *)dq.p, &far, (float *)dout.p, out_far, what))
        goto done;
    gem_compare cmp;
    TCHECK_STATUS(gem_compare_f32_f64(out_far, ref, no, &cmp), GEM_OK);
    if (!TCHECK(cmp.nonfinite == 0 && cmp.nmse <= MAX_NMSE))
        fprintf(stderr, "     %s: nmse %.3g max_abs %.3g nonfinite %zu\n", what, cmp.nmse,
                cmp.max_abs, cmp.nonfinite);
    if (!TCHECK(memcmp(out_dense, out_far, no * sizeof(float)) == 0))
        fprintf(stderr, "     %s: the far view's output differs from the dense view's\n", what);
    if (host) { /* the oracle on the far view: the dense reference's bits */
        double *ref_far = malloc(no * sizeof(double));
        gem_k_from_v hk = kfv;
        hk.k_weight = k_weight;
        const gem_kv_view hfar = view_of(c, fk.p, fv.p, fl, &hk, scales);
        if (TCHECK(ref_far != NULL) &&
            status_ok(gem_attn_reference_kv(&shape, q, &hfar, ref_far, no), what,
                      "gem_attn_reference_kv (far)") &&
            !TCHECK(memcmp(ref_far, ref, no * sizeof(double)) == 0))
            fprintf(stderr, "     %s: the reference on the far view differs\n", what);
        free(ref_far);
    }
    printf("  %-46s %-5s far extent %5.1f GiB, nmse %.2e\n", c->name, tg->name,
           (double)far_bytes / (double)(1u << 30), cmp.nmse);
done:
    buf_free(tg, &dk);
    buf_free(tg, &fk);
    buf_free(tg, &dv);
    buf_free(tg, &fv);
    buf_free(tg, &dq);
    buf_free(tg, &dout);
    buf_free(tg, &dw);
    free(out_dense);
    free(out_far);
}

/* A dense head-major tensor of c's type: row (g, r) from stream seed + g * 1000003 + r,
 * uniform in [-1, 1) and rounded to the type (NULL when out of memory). */
static void *make_dense(const fcase *c, uint64_t seed)
{
    const lay l = dense_lay(c);
    void *p = malloc((size_t)l.elems * gem_dtype_size(c->t));
    float *row = malloc((size_t)c->d * sizeof(float));
    if (!p || !row) {
        free(p);
        free(row);
        return NULL;
    }
    for (int64_t g = 0; g < c->nkv; g++)
        for (int64_t r = 0; r < c->live; r++) {
            gem_fill_uniform(seed + (uint64_t)(g * 1000003 + r), -1.0f, 1.0f, row,
                             (size_t)c->d);
            for (int64_t i = 0; i < c->d; i++)
                tdt_store(p, c->t, g * l.hs + r * l.ts + i, row[i]);
        }
    free(row);
    return p;
}

static void check_case(const fcase *c, const target *targets, int nt, size_t index)
{
    const uint64_t seed = 91000 + (uint64_t)index * 257;
    const size_t no = (size_t)(c->nq * c->d);
    const gem_decode_shape shape = {c->nq, c->nkv, c->d, c->d, 1.0f / sqrtf((float)c->d)};
    float *q = malloc(no * sizeof(float));
    float *k_weight = c->kfv ? malloc((size_t)c->d * sizeof(float)) : NULL;
    void *k = c->kfv ? NULL : make_dense(c, seed);
    void *v = make_dense(c, seed + 77);
    double *ref = malloc(no * sizeof(double));
    /* per-head FP8 scales, K's then V's, not powers of two */
    float scales[2 * MAX_KV_HEADS];
    for (int i = 0; i < 2 * MAX_KV_HEADS; i++)
        scales[i] = 0.3f + 0.07f * (float)i;
    if (!TCHECK(q && (k || c->kfv) && v && ref && (k_weight || !c->kfv) &&
                c->nkv <= MAX_KV_HEADS)) {
        fprintf(stderr, "     %s: out of memory\n", c->name);
        goto done;
    }
    gem_fill_uniform(seed + 5, -1.0f, 1.0f, q, no);
    if (k_weight) /* a k_norm weight around 1, as trained ones are */
        gem_fill_uniform(seed + 9, 0.5f, 1.5f, k_weight, (size_t)c->d);
    double inv_freq[64];
    const gem_k_from_v kfv = kfv_of(k_weight, inv_freq);
    const gem_kv_view hv = view_of(c, k, v, dense_lay(c), &kfv, scales);
    if (!status_ok(gem_attn_reference_kv(&shape, q, &hv, ref, no), c->name,
                   "gem_attn_reference_kv"))
        goto done;
    for (int t = 0; t < nt; t++) {
        const gem_status sup =
            c->kfv ? gem_decode_supports_k_from_v(targets[t].ctx, &shape, c->t, &kfv)
                   : gem_decode_supports_route(targets[t].ctx, &shape, c->t, c->t,
                                               c->route == DEF ? GEM_ROUTE_FUSED : c->route);
        if (targets[t].backend == GEM_BACKEND_CPU)
            TCHECK_STATUS(sup, GEM_OK); /* the CPU runs every case */
        if (sup != GEM_OK) {
            printf("  %-46s %-5s not supported (%s)\n", c->name, targets[t].name,
                   gem_status_name(sup));
            continue;
        }
        check_on(c, &targets[t], q, k, v, k_weight, ref, scales);
    }
done:
    free(q);
    free(k_weight);
    free(k);
    free(v);
    free(ref);
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: test_decode_far (no options)\n");
        return 2;
    }
    target targets[2];
    int nt = 0;
    targets[nt].name = "cpu";
    targets[nt].backend = GEM_BACKEND_CPU;
    targets[nt].ops = &gem_harness_cpu_ops;
    if (TCHECK(gem_decode_ctx_create(GEM_BACKEND_CPU, 0, &targets[nt].ctx) == GEM_OK &&
               targets[nt].ops->open(&targets[nt].hx) == GEM_OK))
        nt++;
    targets[nt].name = "cuda";
    targets[nt].backend = GEM_BACKEND_CUDA;
    targets[nt].ops = &gem_harness_cuda_ops;
    const gem_status st = gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &targets[nt].ctx);
    if (st == GEM_OK && TCHECK(targets[nt].ops->open(&targets[nt].hx) == GEM_OK))
        nt++;
    else {
        TCHECK_STATUS(st, GEM_ERR_NO_DEVICE); /* no GPU: the only acceptable answer */
        printf("test_decode_far: no CUDA device here; the CUDA cases did not run\n");
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i], targets, nt, i);
    for (int t = 0; t < nt; t++) {
        targets[t].ops->close(targets[t].hx);
        gem_decode_ctx_destroy(targets[t].ctx);
    }
    return tcheck_summary("test_decode_far");
}
