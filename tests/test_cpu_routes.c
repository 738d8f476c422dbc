/*
 * CPU backend routes (baseline, fused) against the double reference on many
 * shapes, partition counts and tiles; bitwise identity across thread counts
 * and repeats; rows beyond live never read; kernels equal their scalar rule.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "gem/check.h"
#include "kv_view.h"
#include "gem/engine.h"
#include "tcheck.h"
#include "tdtype.h"

/* Every route output must be this close to the double reference. */
#define MAX_NMSE 1e-9
#define MIN_CORR 0.9999999

typedef struct result {
    float *out;     /* (n_q_heads, dv) */
    size_t n;
    char sha[65];
} result;

/* Runs route with params on engine e (already loaded) and checks the audit. */
static int run_route(gem_engine *e, gem_route route, int64_t P, int64_t T, size_t n,
                     result *r)
{
    gem_route_params p = {P, T};
    double sec = 0;
    gem_status st = gem_engine_run(e, route, &p, &sec);
    TCHECK_STATUS(st, GEM_OK);
    if (st != GEM_OK)
        return -1;
    r->n = n;
    r->out = malloc(n * sizeof(float));
    gem_output_audit a = {99, 0};
    TCHECK_STATUS(gem_engine_output(e, r->out, n, &a), GEM_OK);
    TCHECK_EQ_I64(a.unwritten, 0);
    TCHECK(a.guard_ok == 1);
    TCHECK_STATUS(gem_sha256_hex(r->out, n * sizeof(float), r->sha), GEM_OK);
    return 0;
}

static void check_against(const float *got, const double *ref, size_t n, const char *what)
{
    gem_compare c;
    TCHECK_STATUS(gem_compare_f32_f64(got, ref, n, &c), GEM_OK);
    TCHECK_EQ_I64(c.nonfinite, 0);
    if (!TCHECK(c.nmse <= MAX_NMSE && c.correlation >= MIN_CORR))
        fprintf(stderr, "     %s: nmse %.3g corr %.12f max_abs %.3g\n", what, c.nmse,
                c.correlation, c.max_abs);
}

/* One shape: fused at several P and tiles, baseline at several P, online, all
 * against the reference; then 1 / 2 / 5 threads bitwise equal. */
static void check_shape(int64_t nq, int64_t nkv, int64_t dk, int64_t dv, int64_t live,
                        int64_t cap, uint64_t seed)
{
    gem_attn_shape s = {nq, nkv, dk, dv, live, cap, 1.0f / sqrtf((float)dk)};
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, seed, &in), GEM_OK);
    size_t n = 0;
    TCHECK_STATUS(gem_attn_shape_elems(&s, NULL, NULL, NULL, &n), GEM_OK);
    double *ref = malloc(n * sizeof(double));
    TCHECK_STATUS(gem_attn_reference(&s, &in.in, ref, n), GEM_OK);

    gem_engine *e[3] = {NULL, NULL, NULL};
    const int64_t threads[3] = {1, 2, 5};
    for (int i = 0; i < 3; i++) {
        TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CPU, threads[i], &e[i]), GEM_OK);
        TCHECK_STATUS(gem_engine_load(e[i], &s, &in.in, 1), GEM_OK);
    }
    char label[128];
    const int64_t parts[] = {1, 3, 32, 64, 128, 256};
    const int64_t tiles[] = {1, 3, 4, 8, 5};
    for (size_t pi = 0; pi < sizeof parts / sizeof parts[0]; pi++) {
        for (size_t ti = 0; ti < sizeof tiles / sizeof tiles[0]; ti++) {
            /* every tile at P = 32, every P at tile 4: the full cross is slow */
            if (parts[pi] != 32 && tiles[ti] != 4)
                continue;
            result r[3];
            int ok = 1;
            for (int i = 0; i < 3; i++)
                ok &= run_route(e[i], GEM_ROUTE_FUSED, parts[pi], tiles[ti], n, &r[i]) == 0;
            if (!ok)
                continue;
            snprintf(label, sizeof label, "fused q%lld kv%lld dk%lld dv%lld live%lld P%lld T%lld",
                     (long long)nq, (long long)nkv, (long long)dk, (long long)dv,
                     (long long)live, (long long)parts[pi], (long long)tiles[ti]);
            check_against(r[0].out, ref, n, label);
            for (int i = 1; i < 3; i++)
                if (!TCHECK(strcmp(r[0].sha, r[i].sha) == 0))
                    fprintf(stderr, "     %s: threads 1 vs %lld differ\n", label,
                            (long long)threads[i]);
            result again;
            if (run_route(e[2], GEM_ROUTE_FUSED, parts[pi], tiles[ti], n, &again) == 0) {
                TCHECK(strcmp(again.sha, r[0].sha) == 0);
                free(again.out);
            }
            for (int i = 0; i < 3; i++)
                free(r[i].out);
        }
    }
    const int64_t vparts[] = {16, 1, 7};
    for (size_t pi = 0; pi < sizeof vparts / sizeof vparts[0]; pi++) {
        result r[3];
        int ok = 1;
        for (int i = 0; i < 3; i++)
            ok &= run_route(e[i], GEM_ROUTE_BASELINE, vparts[pi], 0, n, &r[i]) == 0;
        if (!ok)
            continue;
        snprintf(label, sizeof label, "baseline q%lld kv%lld dk%lld dv%lld live%lld VP%lld",
                 (long long)nq, (long long)nkv, (long long)dk, (long long)dv, (long long)live,
                 (long long)vparts[pi]);
        check_against(r[0].out, ref, n, label);
        for (int i = 1; i < 3; i++)
            TCHECK(strcmp(r[0].sha, r[i].sha) == 0);
        for (int i = 0; i < 3; i++)
            free(r[i].out);
    }
    result ro, rr;
    if (run_route(e[1], GEM_ROUTE_ONLINE, 32, 0, n, &ro) == 0) {
        check_against(ro.out, ref, n, "online");
        free(ro.out);
    }
    if (run_route(e[1], GEM_ROUTE_REFERENCE, 0, 0, n, &rr) == 0) {
        for (size_t i = 0; i < n; i++)
            if (!TCHECK(rr.out[i] == (float)ref[i]))
                break;
        free(rr.out);
    }
    for (int i = 0; i < 3; i++)
        gem_engine_destroy(e[i]);
    free(ref);
    gem_inputs_free(&in);
}

/* Rows in [live, capacity) must not change the output of any route. */
static void check_rows_beyond_live(void)
{
    gem_attn_shape s = {8, 2, 32, 32, 37, 64, 0.2f};
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, 7, &in), GEM_OK);
    size_t n = 0;
    gem_attn_shape_elems(&s, NULL, NULL, NULL, &n);
    const gem_route routes[] = {GEM_ROUTE_FUSED, GEM_ROUTE_BASELINE};
    char before[2][65], after[2][65];
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) /* large but finite rows past live */
            for (int64_t g = 0; g < s.n_kv_heads; g++)
                for (int64_t t = s.live; t < s.capacity; t++) {
                    for (int64_t i = 0; i < s.dk; i++)
                        in.k[(g * s.capacity + t) * s.dk + i] = 1e4f;
                    for (int64_t i = 0; i < s.dv; i++)
                        in.v[(g * s.capacity + t) * s.dv + i] = -3e5f;
                }
        gem_engine *e;
        TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CPU, 2, &e), GEM_OK);
        TCHECK_STATUS(gem_engine_load(e, &s, &in.in, 1), GEM_OK);
        for (int r = 0; r < 2; r++) {
            result res;
            if (run_route(e, routes[r], routes[r] == GEM_ROUTE_FUSED ? 32 : 16,
                          routes[r] == GEM_ROUTE_FUSED ? 4 : 0, n, &res) == 0) {
                memcpy(pass ? after[r] : before[r], res.sha, 65);
                free(res.out);
            }
        }
        gem_engine_destroy(e);
    }
    for (int r = 0; r < 2; r++)
        TCHECK(strcmp(before[r], after[r]) == 0);
    gem_inputs_free(&in);
}

/* The vector kernels follow their scalar rules bit for bit: cpu_dot_tile and
 * cpu_weighted_rows with K / V rows in F32, BF16 and F16 (16-bit rows against
 * the rule on their exact widening). */
static void check_kernels(void)
{
    static const gem_dtype dtypes[] = {GEM_DTYPE_F32, GEM_DTYPE_BF16, GEM_DTYPE_F16,
                                       GEM_DTYPE_FP8_E4M3};
    const int64_t ns[] = {512, 48, 13, 1, 33};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t e = 0; e < sizeof dtypes / sizeof dtypes[0]; e++) {
            const gem_dtype kt = dtypes[e];
            const int64_t n = ns[a], nh = 6, nt = 7, ks = n + 3; /* padded K rows */
            float *q = malloc((size_t)(nh * n) * sizeof(float));
            void *k = malloc((size_t)(nt * ks) * sizeof(float));
            float *wide = malloc((size_t)(nt * ks) * sizeof(float));
            float out[6 * 7];
            gem_fill_uniform(11 + (uint64_t)a, -1.0f, 1.0f, q, (size_t)(nh * n));
            tdt_fill(12 + (uint64_t)a * 3 + e, kt, nt * ks, k, wide);
            cpu_dot_tile(q, nh, k, kt, ks, nt, n, out, nt);
            int same = 1;
            for (int64_t h = 0; h < nh; h++)
                for (int64_t t = 0; t < nt; t++) {
                    const float want = cpu_dot_portable(q + h * n, wide + t * ks, n);
                    same &= memcmp(&want, &out[h * nt + t], sizeof want) == 0;
                }
            if (!TCHECK(same))
                fprintf(stderr, "     dot_tile %s n%lld\n", gem_dtype_name(kt), (long long)n);
            free(q);
            free(k);
            free(wide);
        }
    /* weighted rows: 8 heads x 32 columns (the vector block; over 150 rows also the AVX2
     * block's chunks of 64 rows, the last ragged) and ragged blocks */
    const int64_t shapes[][3] = {{8, 32, 37}, {3, 13, 37}, {8, 16, 37}, {8, 32, 150}};
    for (size_t a = 0; a < sizeof shapes / sizeof shapes[0]; a++)
        for (size_t e = 0; e < sizeof dtypes / sizeof dtypes[0]; e++) {
            const gem_dtype vt = dtypes[e];
            const int64_t nh = shapes[a][0], w = shapes[a][1], nt = shapes[a][2], vs = w + 5,
                          ps = nt + 2;
            float *p = malloc((size_t)(nh * ps) * sizeof(float));
            void *v = malloc((size_t)(nt * vs) * sizeof(float));
            float *wide = malloc((size_t)(nt * vs) * sizeof(float));
            float *acc = malloc((size_t)(nh * w) * sizeof(float));
            float *want = malloc((size_t)(nh * w) * sizeof(float));
            gem_fill_uniform(31 + (uint64_t)a, 0.0f, 1.0f, p, (size_t)(nh * ps));
            gem_fill_uniform(32 + (uint64_t)a, -1.0f, 1.0f, acc, (size_t)(nh * w));
            memcpy(want, acc, (size_t)(nh * w) * sizeof(float));
            tdt_fill(33 + (uint64_t)a * 3 + e, vt, nt * vs, v, wide);
            cpu_weighted_rows(p, ps, nh, v, vt, vs, nt, w, acc);
            for (int64_t t = 0; t < nt; t++)
                for (int64_t h = 0; h < nh; h++)
                    for (int64_t d = 0; d < w; d++)
                        want[h * w + d] = fmaf(p[h * ps + t], wide[t * vs + d], want[h * w + d]);
            if (!TCHECK(memcmp(acc, want, (size_t)(nh * w) * sizeof(float)) == 0))
                fprintf(stderr, "     weighted_rows %s nh%lld w%lld\n", gem_dtype_name(vt),
                        (long long)nh, (long long)w);
            free(p);
            free(v);
            free(wide);
            free(acc);
            free(want);
        }
    /* exp: exact at 0 and -inf, close to expf elsewhere */
    float x[4096], y[4096];
    for (int i = 0; i < 4096; i++)
        x[i] = -100.0f * (float)i / 4095.0f;
    x[1] = -INFINITY;
    cpu_exp(x, y, 4096);
    TCHECK(y[0] == 1.0f);
    TCHECK(y[1] == 0.0f);
    double worst = 0;
    for (int i = 2; i < 4096; i++) {
        const double want = exp((double)x[i]);
        if (want < 1e-37) {
            TCHECK(y[i] >= 0.0f && y[i] < 1e-36f);
            continue;
        }
        const double rel = fabs((double)y[i] - want) / want;
        worst = rel > worst ? rel : worst;
    }
    if (!TCHECK(worst < 4e-7))
        fprintf(stderr, "     exp worst relative error %.3g\n", worst);
    float p[3] = {0.5f, 0.25f, 2.0f};
    float v[3 * 32], o[32], want[32];
    gem_fill_uniform(5, -1.0f, 1.0f, v, 96);
    gem_fill_uniform(6, -1.0f, 1.0f, o, 32);
    for (int d = 0; d < 32; d++) {
        float a = o[d] * 0.75f;
        for (int t = 0; t < 3; t++)
            a = fmaf(p[t], v[t * 32 + d], a);
        want[d] = a;
    }
    cpu_rescale_accumulate(o, 32, 0.75f, p, v, 3, 32);
    TCHECK(memcmp(o, want, sizeof o) == 0);
}

/* 1 when element i of tensor p (type t) holds x rounded to t. */
static int same_elem(const void *p, gem_dtype t, size_t i, float x)
{
    if (t == GEM_DTYPE_F32)
        return memcmp((const float *)p + i, &x, sizeof x) == 0;
    const uint16_t h = ((const uint16_t *)p)[i];
    return h == (t == GEM_DTYPE_BF16 ? tdt_to_bf16(x) : tdt_to_f16(x));
}

/* The engine with 16-bit K and V: the routes read the rounded cache (its host
 * view), agree with the double reference on it, give the bits the same routes
 * give on its F32 widening, for any thread count and rotation copy; the
 * reference route is the reference on the rounded values. */
static void check_engine_dtypes(void)
{
    const gem_attn_shape s = {16, 2, 64, 48, 300, 307, 1.0f};
    static const gem_dtype pairs[][2] = {{GEM_DTYPE_BF16, GEM_DTYPE_BF16},
                                         {GEM_DTYPE_F16, GEM_DTYPE_F16},
                                         {GEM_DTYPE_BF16, GEM_DTYPE_F16},
                                         {GEM_DTYPE_F32, GEM_DTYPE_F16}};
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, 9, &in), GEM_OK);
    size_t n = 0;
    TCHECK_STATUS(gem_attn_shape_elems(&s, NULL, NULL, NULL, &n), GEM_OK);
    const gem_decode_shape ds = {s.n_q_heads, s.n_kv_heads, s.dk, s.dv, s.scale};
    gem_engine *e1 = NULL, *e3 = NULL, *ew = NULL;
    TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CPU, 1, &e1), GEM_OK);
    TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CPU, 3, &e3), GEM_OK);
    TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CPU, 2, &ew), GEM_OK);
    double *ref = malloc(n * sizeof(double));
    float *wk = malloc(in.in.k_elems * sizeof(float)), *wv = malloc(in.in.v_elems * sizeof(float));
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0] && ref && wk && wv; p++) {
        char label[96];
        snprintf(label, sizeof label, "engine K %s V %s", gem_dtype_name(pairs[p][0]),
                 gem_dtype_name(pairs[p][1]));
        TCHECK_STATUS(gem_engine_load_kv(e1, &s, &in.in, pairs[p][0], pairs[p][1], 3), GEM_OK);
        TCHECK_STATUS(gem_engine_load_kv(e3, &s, &in.in, pairs[p][0], pairs[p][1], 1), GEM_OK);
        gem_kv_view kv;
        TCHECK_STATUS(gem_engine_kv_host(e1, &kv), GEM_OK);
        TCHECK(kv.k_dtype == pairs[p][0] && kv.v_dtype == pairs[p][1]);
        /* every element rounded as the test rounds it; wk, wv: the widening */
        int rounded = 1;
        for (size_t i = 0; i < in.in.k_elems; i++) {
            rounded &= same_elem(kv.k, kv.k_dtype, i, in.k[i]);
            wk[i] = tdt_load(kv.k, kv.k_dtype, (int64_t)i);
        }
        for (size_t i = 0; i < in.in.v_elems; i++) {
            rounded &= same_elem(kv.v, kv.v_dtype, i, in.v[i]);
            wv[i] = tdt_load(kv.v, kv.v_dtype, (int64_t)i);
        }
        TCHECK(rounded);
        TCHECK_STATUS(gem_attn_reference_kv(&ds, in.q, &kv, ref, n), GEM_OK);
        /* the same routes on the widened cache (F32) */
        const gem_attn_inputs wide = {in.q, wk, wv, in.in.q_elems, in.in.k_elems, in.in.v_elems};
        TCHECK_STATUS(gem_engine_load(ew, &s, &wide, 1), GEM_OK);
        const gem_route routes[] = {GEM_ROUTE_FUSED, GEM_ROUTE_BASELINE};
        for (int r = 0; r < 2; r++) {
            const int64_t P = r == 0 ? 32 : 16, T = r == 0 ? 4 : 0;
            result a[3], b, w;
            int ok = 1;
            for (int c = 0; c < 3; c++) /* the three rotation copies */
                ok &= run_route(e1, routes[r], P, T, n, &a[c]) == 0;
            ok &= run_route(e3, routes[r], P, T, n, &b) == 0;
            ok &= run_route(ew, routes[r], P, T, n, &w) == 0;
            if (!ok)
                continue;
            check_against(a[0].out, ref, n, label);
            if (!TCHECK(!strcmp(a[0].sha, a[1].sha) && !strcmp(a[0].sha, a[2].sha) &&
                        !strcmp(a[0].sha, b.sha) && !strcmp(a[0].sha, w.sha)))
                fprintf(stderr, "     %s %s: copies, threads or the widening differ\n", label,
                        gem_route_name(routes[r]));
            for (int c = 0; c < 3; c++)
                free(a[c].out);
            free(b.out);
            free(w.out);
        }
        result rr;
        if (run_route(e1, GEM_ROUTE_REFERENCE, 0, 0, n, &rr) == 0) {
            int same = 1;
            for (size_t i = 0; i < n; i++)
                same &= rr.out[i] == (float)ref[i];
            TCHECK(same);
            free(rr.out);
        }
    }
    free(ref);
    free(wk);
    free(wv);
    gem_engine_destroy(e1);
    gem_engine_destroy(e3);
    gem_engine_destroy(ew);
    gem_inputs_free(&in);
}

/* FP8 E4M3 against the test's own rules: every code's value, every code and every midpoint
 * between neighbours (ties to the even code) back to its code, saturation, NaN, and 100,000
 * random floats over the whole range. */
static void check_fp8_conversions(void)
{
    int decode = 1, encode = 1;
    for (int c = 0; c < 256; c++) {
        const float want = tdt_from_fp8((uint8_t)c), got = gem_fp8_e4m3_to_f32((uint8_t)c);
        /* a NaN code (either sign) gives the positive quiet NaN, as every kernel's widening */
        const uint32_t qnan = 0x7FC00000u;
        decode &= isnan(want) ? memcmp(&qnan, &got, sizeof got) == 0
                              : memcmp(&want, &got, sizeof got) == 0;
        if (!isnan(want))
            encode &= gem_f32_to_fp8_e4m3(want) == (uint8_t)c;
    }
    TCHECK(decode);
    TCHECK(encode);
    int mids = 1;
    for (int c = 0; c + 1 < 0x7F; c++) { /* positive neighbours c, c + 1 */
        const float a = tdt_from_fp8((uint8_t)c), b = tdt_from_fp8((uint8_t)(c + 1));
        const float mid = 0.5f * (a + b); /* exact: one more bit than the codes */
        const uint8_t even = (uint8_t)((c & 1) ? c + 1 : c);
        mids &= gem_f32_to_fp8_e4m3(mid) == even && gem_f32_to_fp8_e4m3(-mid) == (0x80 | even);
        mids &= gem_f32_to_fp8_e4m3(nextafterf(mid, 0.0f)) == c;
        mids &= gem_f32_to_fp8_e4m3(nextafterf(mid, 1e9f)) == c + 1;
    }
    TCHECK(mids);
    TCHECK(gem_f32_to_fp8_e4m3(448.0f) == 0x7E && gem_f32_to_fp8_e4m3(463.9f) == 0x7E &&
           gem_f32_to_fp8_e4m3(464.0f) == 0x7E && gem_f32_to_fp8_e4m3(1e30f) == 0x7E &&
           gem_f32_to_fp8_e4m3(INFINITY) == 0x7E && gem_f32_to_fp8_e4m3(-INFINITY) == 0xFE);
    TCHECK((gem_f32_to_fp8_e4m3(NAN) & 0x7F) == 0x7F);
    TCHECK(gem_f32_to_fp8_e4m3(0x1p-11f) == 0x00 && gem_f32_to_fp8_e4m3(0x1.0p-10f) == 0x00 &&
           gem_f32_to_fp8_e4m3(0x1.8p-10f) == 0x01 && gem_f32_to_fp8_e4m3(-0.0f) == 0x80);
    int rnd = 1;
    for (int i = 0; i < 100000; i++) {
        float u[2];
        gem_fill_uniform(4242 + (uint64_t)i, 0.0f, 1.0f, u, 2);
        const float x = (u[0] < 0.5f ? -1.0f : 1.0f) * ldexpf(0.5f + u[1], (i % 24) - 14);
        rnd &= gem_f32_to_fp8_e4m3(x) == tdt_to_fp8(x);
    }
    TCHECK(rnd);
}

/* The engine with FP8 K and V (and F32 K with FP8 V): a scale per head, the largest
 * magnitude of the head over 448; every element the code nearest x / scale; both routes
 * within the reference's NMSE on those values (the reference multiplies them exactly), the
 * same bits at 1 and 3 threads and for every rotation copy. */
static void check_engine_fp8(void)
{
    const gem_attn_shape s = {16, 2, 64, 48, 300, 307, 1.0f};
    static const gem_dtype pairs[][2] = {{GEM_DTYPE_FP8_E4M3, GEM_DTYPE_FP8_E4M3},
                                         {GEM_DTYPE_F32, GEM_DTYPE_FP8_E4M3},
                                         {GEM_DTYPE_FP8_E4M3, GEM_DTYPE_BF16}};
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, 19, &in), GEM_OK);
    size_t n = 0;
    TCHECK_STATUS(gem_attn_shape_elems(&s, NULL, NULL, NULL, &n), GEM_OK);
    const gem_decode_shape ds = {s.n_q_heads, s.n_kv_heads, s.dk, s.dv, s.scale};
    gem_engine *e1 = NULL, *e3 = NULL;
    TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CPU, 1, &e1), GEM_OK);
    TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CPU, 3, &e3), GEM_OK);
    double *ref = malloc(n * sizeof(double));
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0] && ref; p++) {
        char label[96];
        snprintf(label, sizeof label, "engine K %s V %s", gem_dtype_name(pairs[p][0]),
                 gem_dtype_name(pairs[p][1]));
        TCHECK_STATUS(gem_engine_load_kv(e1, &s, &in.in, pairs[p][0], pairs[p][1], 3), GEM_OK);
        TCHECK_STATUS(gem_engine_load_kv(e3, &s, &in.in, pairs[p][0], pairs[p][1], 1), GEM_OK);
        gem_kv_view kv;
        TCHECK_STATUS(gem_engine_kv_host(e1, &kv), GEM_OK);
        for (int which = 0; which < 2; which++) {
            const gem_dtype t = which ? kv.v_dtype : kv.k_dtype;
            const float *sc = which ? kv.v_scale : kv.k_scale;
            if (!TCHECK((t == GEM_DTYPE_FP8_E4M3) == (sc != NULL)) || !sc)
                continue;
            const int64_t d = which ? s.dv : s.dk, per = s.capacity * d;
            const float *x = which ? in.v : in.k;
            const uint8_t *c = which ? kv.v : kv.k;
            int ok = 1;
            for (int64_t g = 0; g < s.n_kv_heads; g++) {
                float amax = 0.0f;
                for (int64_t i = 0; i < per; i++)
                    amax = fmaxf(amax, fabsf(x[g * per + i]));
                ok &= sc[g] == amax / 448.0f;
                for (int64_t i = 0; i < per; i++)
                    ok &= c[g * per + i] == tdt_to_fp8(x[g * per + i] / sc[g]);
            }
            if (!TCHECK(ok))
                fprintf(stderr, "     %s: %s's scales or codes\n", label, which ? "V" : "K");
        }
        TCHECK_STATUS(gem_attn_reference_kv(&ds, in.q, &kv, ref, n), GEM_OK);
        const gem_route routes[] = {GEM_ROUTE_FUSED, GEM_ROUTE_BASELINE};
        for (int r = 0; r < 2; r++) {
            const int64_t P = r == 0 ? 32 : 16, T = r == 0 ? 4 : 0;
            result a[3], b;
            int ok = 1;
            for (int c = 0; c < 3; c++)
                ok &= run_route(e1, routes[r], P, T, n, &a[c]) == 0;
            ok &= run_route(e3, routes[r], P, T, n, &b) == 0;
            if (!TCHECK(ok))
                continue;
            check_against(a[0].out, ref, n, label);
            if (!TCHECK(!strcmp(a[0].sha, a[1].sha) && !strcmp(a[0].sha, a[2].sha) &&
                        !strcmp(a[0].sha, b.sha)))
                fprintf(stderr, "     %s %s: copies or threads differ\n", label,
                        gem_route_name(routes[r]));
            for (int c = 0; c < 3; c++)
                free(a[c].out);
            free(b.out);
        }
    }
    /* V alone in FP8 with K rebuilt from it: V's scale alone in the view, the fused route within
     * the reference's NMSE on those values, the same bits at 1 and 3 threads */
    const gem_attn_shape s2 = {16, 2, 64, 64, 300, 307, 1.0f};
    gem_owned_inputs in2;
    TCHECK_STATUS(gem_inputs_make(&s2, 23, &in2), GEM_OK);
    size_t n2 = 0;
    TCHECK_STATUS(gem_attn_shape_elems(&s2, NULL, NULL, NULL, &n2), GEM_OK);
    const gem_decode_shape ds2 = {s2.n_q_heads, s2.n_kv_heads, s2.dk, s2.dv, s2.scale};
    float w[64];
    gem_fill_uniform(24, 0.5f, 1.5f, w, 64);
    const double inv[8] = {1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125};
    const gem_k_from_v rot = {NULL, inv, 8, 32, 5};
    double *ref2 = malloc(n2 * sizeof(double));
    TCHECK_STATUS(
        gem_engine_load_k_from_v(e1, &s2, &in2.in, GEM_DTYPE_FP8_E4M3, w, &rot, 2), GEM_OK);
    TCHECK_STATUS(
        gem_engine_load_k_from_v(e3, &s2, &in2.in, GEM_DTYPE_FP8_E4M3, w, &rot, 1), GEM_OK);
    TCHECK_STATUS(gem_engine_select_k_from_v(e1, 1), GEM_OK);
    TCHECK_STATUS(gem_engine_select_k_from_v(e3, 1), GEM_OK);
    gem_kv_view kv2;
    TCHECK_STATUS(gem_engine_kv_host(e1, &kv2), GEM_OK);
    TCHECK(kv2.k_from_v != NULL && kv2.k_scale == NULL && kv2.v_scale != NULL);
    result a, b;
    if (ref2 && TCHECK(gem_attn_reference_kv(&ds2, in2.q, &kv2, ref2, n2) == GEM_OK) &&
        TCHECK(run_route(e1, GEM_ROUTE_FUSED, 4, 4, n2, &a) == 0)) {
        check_against(a.out, ref2, n2, "engine V fp8_e4m3, K from V");
        if (TCHECK(run_route(e3, GEM_ROUTE_FUSED, 4, 4, n2, &b) == 0)) {
            TCHECK(!strcmp(a.sha, b.sha));
            free(b.out);
        }
        free(a.out);
    }
    free(ref2);
    gem_inputs_free(&in2);
    free(ref);
    gem_engine_destroy(e1);
    gem_engine_destroy(e3);
    gem_inputs_free(&in);
}

int main(void)
{
    /* every build of the kernels this library holds and this processor runs */
    const char *builds[3];
    const int nb = cpu_kernels_builds(builds, 3);
    for (int b = 0; b < nb && b < 3; b++) {
        TCHECK(cpu_kernels_use(builds[b]) == 0);
        printf("test_cpu_routes: %s kernels\n", cpu_kernels_isa());
        check_kernels();
        check_fp8_conversions();
        check_engine_dtypes();
        check_engine_fp8();
        check_shape(32, 4, 512, 512, 4097, 4097, 1); /* production heads and dims */
        check_shape(8, 8, 13, 7, 13, 20, 2);         /* GQA ratio 1, odd dims, capacity > live */
        check_shape(4, 2, 24, 40, 1, 3, 3);          /* ratio 2, dk != dv, one token */
        check_shape(16, 2, 64, 48, 1000, 1000, 4);   /* ratio 8, dk != dv, 1,000 tokens */
        check_shape(8, 1, 96, 33, 200, 211, 5);      /* ratio 8, P = 256 > live */
        check_rows_beyond_live();
    }
    cpu_kernels_use(builds[0]);
    return tcheck_summary("test_cpu_routes");
}
