/*
 * The fused route's token-major kernels (cpu_dot_tile_tm, cpu_online_tile,
 * cpu_value_tile) against their scalar rules, bit for bit, on block-aligned
 * and ragged head / token / dimension counts, with and without prefetch rows,
 * with K and V rows in F32, BF16, F16 and FP8 E4M3 (a narrow row against the rule on its
 * exact widening, with subnormals and both zeros among the elements; FP8 rows with every
 * code, NaN included);
 * then the fused route at large and ragged tiles (tile > partition, live not a
 * multiple of the tile, P > live) against the double reference and across
 * thread counts; and the read probe's sums, with and without prefetches.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "gem/check.h"
#include "gem/engine.h"
#include "tcheck.h"
#include "tdtype.h"

static float *fmalloc(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }

static int same_bits(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

static const gem_dtype dtypes[] = {GEM_DTYPE_F32, GEM_DTYPE_BF16, GEM_DTYPE_F16,
                                   GEM_DTYPE_FP8_E4M3};

/* Memory for n elements of the largest type (4 bytes). */
static void *emalloc(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }

/* out[t*os + h] = cpu_dot_portable(q_h, k_t) with k_t the widened row t;
 * columns h >= nh untouched. */
static void check_dot_tm(void)
{
    const int64_t ns[] = {512, 48, 13, 1, 33};
    const int64_t nhs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}; /* every head block of each path */
    const int64_t nts[] = {1, 3, 4, 5, 16, 17};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof nhs / sizeof nhs[0]; b++)
            for (size_t c = 0; c < sizeof nts / sizeof nts[0]; c++)
                for (size_t e = 0; e < sizeof dtypes / sizeof dtypes[0]; e++) {
                    const gem_dtype kt = dtypes[e];
                    const int64_t n = ns[a], nh = nhs[b], nt = nts[c], os = nh + 2;
                    const int64_t ks = n + (c % 2 ? 16 : 0); /* K rows dense or padded */
                    float *q = fmalloc(nh * n), *out = fmalloc(nt * os), *wide = fmalloc(nt * ks);
                    void *k = emalloc(nt * ks), *pf = emalloc(5 * ks);
                    gem_fill_uniform(100 + (uint64_t)(a * 64 + b * 8 + c), -1.0f, 1.0f, q,
                                     (size_t)(nh * n));
                    tdt_fill(200 + (uint64_t)(a * 64 + b * 8 + c) * 3 + e, kt, nt * ks, k, wide);
                    for (int64_t i = 0; i < nt * os; i++)
                        out[i] = 12345.0f;
                    /* with prefetch rows on odd shapes, without on the others */
                    const int with_pf = (nt % 2) == 1;
                    cpu_dot_tile_tm(q, nh, k, kt, ks, nt, n, out, os, with_pf ? pf : NULL,
                                    with_pf ? 5 : 0);
                    int ok = 1;
                    for (int64_t t = 0; t < nt; t++)
                        for (int64_t h = 0; h < os; h++) {
                            const float want =
                                h < nh ? cpu_dot_portable(q + h * n, wide + t * ks, n) : 12345.0f;
                            ok &= memcmp(&want, &out[t * os + h], sizeof want) == 0;
                        }
                    if (!TCHECK(ok))
                        fprintf(stderr, "     dot_tm %s n%lld nh%lld nt%lld\n", gem_dtype_name(kt),
                                (long long)n, (long long)nh, (long long)nt);
                    free(q);
                    free(k);
                    free(wide);
                    free(out);
                    free(pf);
                }
}

/* The scalar rule of cpu_online_tile, written out with cpu_exp. */
static int online_rule(float *sc, int64_t nt, int64_t nh, float scale, float *m, float *s,
                       float *alpha)
{
    for (int64_t t = 0; t < nt; t++)
        for (int64_t h = 0; h < nh; h++)
            if (!(fabsf(scale * sc[t * nh + h]) <= FLT_MAX))
                return 1;
    for (int64_t h = 0; h < nh; h++) {
        float mt = -INFINITY;
        for (int64_t t = 0; t < nt; t++) {
            const float x = scale * sc[t * nh + h];
            mt = x > mt ? x : mt;
        }
        const float mn = m[h] > mt ? m[h] : mt;
        float d = m[h] - mn;
        cpu_exp(&d, &alpha[h], 1);
        for (int64_t t = 0; t < nt; t++) {
            float x = scale * sc[t * nh + h] - mn;
            cpu_exp(&x, &sc[t * nh + h], 1);
        }
        float acc = s[h] * alpha[h];
        for (int64_t t = 0; t < nt; t++)
            acc += sc[t * nh + h];
        s[h] = acc;
        m[h] = mn;
    }
    return 0;
}

static void check_online_tile(void)
{
    const int64_t nhs[] = {1, 2, 3, 8};
    const int64_t nts[] = {1, 5, 16, 32};
    for (size_t b = 0; b < sizeof nhs / sizeof nhs[0]; b++)
        for (size_t c = 0; c < sizeof nts / sizeof nts[0]; c++) {
            const int64_t nh = nhs[b], nt = nts[c];
            float m1[8], s1[8], a1[8], m2[8], s2[8], a2[8];
            for (int64_t h = 0; h < nh; h++) {
                m1[h] = m2[h] = -INFINITY;
                s1[h] = s2[h] = 0.0f;
            }
            float *x1 = fmalloc(nt * nh), *x2 = fmalloc(nt * nh);
            int ok = 1;
            for (int tile = 0; tile < 4; tile++) { /* a running state over several tiles */
                /* later tiles reach far below the running max: exp underflows to 0 */
                gem_fill_uniform(300 + (uint64_t)(tile * 16 + (int)b * 4 + (int)c),
                                 -30.0f - 150.0f * (float)tile, 30.0f + 10.0f * (float)tile, x1,
                                 (size_t)(nt * nh));
                memcpy(x2, x1, (size_t)(nt * nh) * sizeof(float));
                ok &= cpu_online_tile(x1, nt, nh, 0.37f, m1, s1, a1) == 0;
                ok &= online_rule(x2, nt, nh, 0.37f, m2, s2, a2) == 0;
                ok &= same_bits(x1, x2, nt * nh) && same_bits(m1, m2, nh) &&
                      same_bits(s1, s2, nh) && same_bits(a1, a2, nh);
                if (tile == 0)
                    for (int64_t h = 0; h < nh; h++)
                        ok &= a1[h] == 0.0f; /* from the empty state */
            }
            if (!TCHECK(ok))
                fprintf(stderr, "     online_tile nh%lld nt%lld\n", (long long)nh, (long long)nt);
            /* a score that overflows float after scaling is refused */
            x1[nt * nh - 1] = FLT_MAX;
            TCHECK(cpu_online_tile(x1, nt, nh, 4.0f, m1, s1, a1) == 1);
            free(x1);
            free(x2);
        }
}

/* cpu_value_tile equals one cpu_rescale_accumulate per head (token-major weights
 * gathered into a head-major row) and the plain scalar loop, on the widened V
 * rows for a 16-bit V. */
static void check_value_tile(void)
{
    const int64_t ns[] = {512, 48, 13};
    const int64_t nhs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const int64_t nts[] = {1, 3, 4, 16, 17};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof nhs / sizeof nhs[0]; b++)
            for (size_t c = 0; c < sizeof nts / sizeof nts[0]; c++)
                for (size_t e = 0; e < sizeof dtypes / sizeof dtypes[0]; e++) {
                    const gem_dtype vt = dtypes[e];
                    const int64_t n = ns[a], nh = nhs[b], nt = nts[c], vs = n + 3;
                    float *w = fmalloc(nt * vs), *o1 = fmalloc(nh * n), *o2 = fmalloc(nh * n);
                    float *o3 = fmalloc(nh * n), *p = fmalloc(nt * nh), *ph = fmalloc(nt);
                    void *v = emalloc(nt * vs);
                    float al[9];
                    const uint64_t sd = (uint64_t)(a * 64 + b * 8 + c);
                    tdt_fill(400 + sd * 3 + e, vt, nt * vs, v, w);
                    gem_fill_uniform(500 + sd, -1.0f, 1.0f, o1, (size_t)(nh * n));
                    gem_fill_uniform(600 + sd, 0.0f, 1.0f, p, (size_t)(nt * nh));
                    gem_fill_uniform(700 + sd, 0.0f, 1.0f, al, 9);
                    memcpy(o2, o1, (size_t)(nh * n) * sizeof(float));
                    memcpy(o3, o1, (size_t)(nh * n) * sizeof(float));
                    const int with_pf = (nt % 2) == 1;
                    cpu_value_tile(o1, nh, n, nt, al, p, v, vt, nt, vs, with_pf ? v : NULL,
                                   with_pf ? 2 : 0);
                    for (int64_t h = 0; h < nh; h++) {
                        for (int64_t t = 0; t < nt; t++)
                            ph[t] = p[t * nh + h];
                        cpu_rescale_accumulate(o2 + h * n, n, al[h], ph, w, nt, vs);
                        for (int64_t d = 0; d < n; d++) {
                            float acc = o3[h * n + d] * al[h];
                            for (int64_t t = 0; t < nt; t++)
                                acc = fmaf(ph[t], w[t * vs + d], acc);
                            o3[h * n + d] = acc;
                        }
                    }
                    if (!TCHECK(same_bits(o1, o2, nh * n) && same_bits(o1, o3, nh * n)))
                        fprintf(stderr, "     value_tile %s n%lld nh%lld nt%lld\n",
                                gem_dtype_name(vt), (long long)n, (long long)nh, (long long)nt);
                    free(v);
                    free(w);
                    free(o1);
                    free(o2);
                    free(o3);
                    free(p);
                    free(ph);
                }
}

/* One call over several tiles (each with its alpha) equals one call per tile and
 * the scalar rule, for tile lengths that do and do not divide the token count,
 * calls longer than the kernel takes at once (150 and 301 tokens at tiles 1 and
 * 3), and alphas that are exactly 1 for all heads of a tile, for some, or none
 * (the kernel leaves out multiplies by 1). */
static void check_value_tiles(void)
{
    const int64_t ns[] = {512, 13};
    const int64_t nhs[] = {8, 4, 2, 1, 3};
    const int64_t tiles[][2] = {{1, 32}, {3, 32}, {4, 32}, {5, 32}, {32, 32}, {1, 150}, {3, 301}};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof nhs / sizeof nhs[0]; b++)
            for (size_t c = 0; c < sizeof tiles / sizeof tiles[0]; c++)
                for (size_t e = 0; e < sizeof dtypes / sizeof dtypes[0]; e++) {
                    const gem_dtype vt = dtypes[e];
                    const size_t es = gem_dtype_size(vt);
                    const int64_t n = ns[a], nh = nhs[b], T = tiles[c][0], nt = tiles[c][1];
                    const int64_t vs = n, k = (nt + T - 1) / T;
                    float *w = fmalloc(nt * vs), *o1 = fmalloc(nh * n), *o2 = fmalloc(nh * n);
                    float *o3 = fmalloc(nh * n);
                    float *p = fmalloc(nt * nh), *al = fmalloc(k * nh);
                    char *v = emalloc(nt * vs);
                    const uint64_t sd = (uint64_t)(a * 64 + b * 8 + c);
                    tdt_fill(800 + sd * 3 + e, vt, nt * vs, v, w);
                    gem_fill_uniform(900 + sd, -1.0f, 1.0f, o1, (size_t)(nh * n));
                    gem_fill_uniform(1000 + sd, 0.0f, 1.0f, p, (size_t)(nt * nh));
                    gem_fill_uniform(1100 + sd, 0.0f, 1.0f, al, (size_t)(k * nh));
                    for (int64_t j = 0; j < k; j++) /* all heads 1, every other head 1, none */
                        for (int64_t h = 0; h < nh; h++)
                            if (j % 3 == 0 || (j % 3 == 1 && h % 2 == 0))
                                al[j * nh + h] = 1.0f;
                    memcpy(o2, o1, (size_t)(nh * n) * sizeof(float));
                    memcpy(o3, o1, (size_t)(nh * n) * sizeof(float));
                    cpu_value_tile(o1, nh, n, T, al, p, v, vt, nt, vs, v, nt);
                    for (int64_t u = 0; u < nt; u += T)
                        cpu_value_tile(o2, nh, n, T, al + (u / T) * nh, p + u * nh,
                                       v + (size_t)(u * vs) * es, vt, nt - u < T ? nt - u : T, vs,
                                       NULL, 0);
                    for (int64_t h = 0; h < nh; h++) /* the rule, on the widened rows */
                        for (int64_t d = 0; d < n; d++) {
                            float acc = o3[h * n + d];
                            for (int64_t t = 0; t < nt; t++) {
                                if (t % T == 0)
                                    acc = acc * al[(t / T) * nh + h];
                                acc = fmaf(p[t * nh + h], w[t * vs + d], acc);
                            }
                            o3[h * n + d] = acc;
                        }
                    if (!TCHECK(same_bits(o1, o2, nh * n) && same_bits(o1, o3, nh * n)))
                        fprintf(stderr, "     value_tiles %s n%lld nh%lld T%lld nt%lld\n",
                                gem_dtype_name(vt), (long long)n, (long long)nh, (long long)T,
                                (long long)nt);
                    free(v);
                    free(w);
                    free(o1);
                    free(o2);
                    free(o3);
                    free(p);
                    free(al);
                }
}

/* FP8 E4M3 rows holding every code, the two NaN codes in rows of their own: the dot and value
 * kernels and cpu_weighted_rows against their rules on the widened rows, bit for bit (the
 * results a NaN reaches carry the rule's NaN bits), at 512 columns (32 a step) and 48 (a step of
 * 32, then 16). tdt_fill never draws a NaN code; these rows do. */
static void check_fp8_every_code(void)
{
    const int64_t ns[] = {512, 48};
    const int64_t nt = 8, nhs[] = {8, 4, 1};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        const int64_t n = ns[a];
        /* the codes' bytes and the two NaN cells' offsets as size_t: with int64_t products
         * the H100 host's GCC could not bound them and warned of writes before the allocation */
        const size_t cells = (size_t)nt * (size_t)n, nan_a = 5 * (size_t)n + 7,
                     nan_b = 7 * (size_t)n - 3;
        uint8_t *k = malloc(cells);
        float *wide = fmalloc(nt * n), *q = fmalloc(8 * n), *out = fmalloc(nt * 8);
        float *o1 = fmalloc(8 * n), *o2 = fmalloc(8 * n), *p = fmalloc(nt * 8), al[8];
        if (!TCHECK(k && wide && q && out && o1 && o2 && p))
            return;
        for (int64_t t = 0; t < nt; t++)
            for (int64_t i = 0; i < n; i++) {
                uint8_t c = (uint8_t)((t * 64 + i * 5) & 255); /* 5 is odd: every code */
                if ((c & 0x7F) == 0x7F)
                    c ^= 1; /* 0x7E / 0xFE: NaN only where placed below */
                k[t * n + i] = c;
            }
        k[nan_a] = 0x7F; /* row 5, in a 32-column step */
        k[nan_b] = 0xFF; /* row 6, in the tail's 16 columns at n = 48 */
        for (int64_t i = 0; i < nt * n; i++)
            wide[i] = tdt_from_fp8(k[i]);
        gem_fill_uniform(1200 + (uint64_t)a, -1.0f, 1.0f, q, (size_t)(8 * n));
        gem_fill_uniform(1300 + (uint64_t)a, 0.0f, 1.0f, p, (size_t)(nt * 8));
        gem_fill_uniform(1400 + (uint64_t)a, 0.0f, 1.0f, al, 8);
        for (size_t b = 0; b < sizeof nhs / sizeof nhs[0]; b++) {
            const int64_t nh = nhs[b];
            int ok = 1;
            cpu_dot_tile_tm(q, nh, k, GEM_DTYPE_FP8_E4M3, n, nt, n, out, nh, NULL, 0);
            for (int64_t t = 0; t < nt; t++)
                for (int64_t h = 0; h < nh; h++) {
                    const float want = cpu_dot_portable(q + h * n, wide + t * n, n);
                    ok &= memcmp(&want, &out[t * nh + h], sizeof want) == 0;
                    ok &= (t == 5 || t == 6) == (isnan(want) != 0);
                }
            gem_fill_uniform(1500 + (uint64_t)a, -1.0f, 1.0f, o1, (size_t)(nh * n));
            memcpy(o2, o1, (size_t)(nh * n) * sizeof(float));
            cpu_value_tile(o1, nh, n, nt, al, p, k, GEM_DTYPE_FP8_E4M3, nt, n, NULL, 0);
            for (int64_t h = 0; h < nh; h++)
                for (int64_t d = 0; d < n; d++) {
                    float acc = o2[h * n + d] * al[h];
                    for (int64_t t = 0; t < nt; t++)
                        acc = fmaf(p[t * nh + h], wide[t * n + d], acc);
                    o2[h * n + d] = acc;
                }
            ok &= same_bits(o1, o2, nh * n) && isnan(o1[7]) && !isnan(o1[8]);
            if (nh == 8) /* the baseline's weighted rows, 32 columns from column 0 and 16 */
                for (int64_t c0 = 0; c0 + 32 <= n; c0 += 16) {
                    memset(o1, 0, 8 * 32 * sizeof(float));
                    memset(o2, 0, 8 * 32 * sizeof(float));
                    cpu_weighted_rows(p, nt, 8, k + c0, GEM_DTYPE_FP8_E4M3, n, nt, 32, o1);
                    for (int64_t t = 0; t < nt; t++)
                        for (int64_t h = 0; h < 8; h++)
                            for (int64_t d = 0; d < 32; d++)
                                o2[h * 32 + d] =
                                    fmaf(p[h * nt + t], wide[t * n + c0 + d], o2[h * 32 + d]);
                    ok &= same_bits(o1, o2, 8 * 32);
                }
            if (!TCHECK(ok))
                fprintf(stderr, "     fp8 every code n%lld nh%lld\n", (long long)n,
                        (long long)nh);
        }
        free(k);
        free(wide);
        free(q);
        free(out);
        free(o1);
        free(o2);
        free(p);
    }
}

/* The fused route at tiles beyond the register blocks and the partitions:
 * against the double reference, bitwise equal for 1, 2 and 3 threads and on a
 * repeat. */
static void check_route_tiles(int64_t nq, int64_t nkv, int64_t d, int64_t live, uint64_t seed)
{
    gem_attn_shape s = {nq, nkv, d, d, live, live + 5, 1.0f / sqrtf((float)d)};
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, seed, &in), GEM_OK);
    size_t n = 0;
    TCHECK_STATUS(gem_attn_shape_elems(&s, NULL, NULL, NULL, &n), GEM_OK);
    double *ref = malloc(n * sizeof(double));
    TCHECK_STATUS(gem_attn_reference(&s, &in.in, ref, n), GEM_OK);
    gem_engine *e[3] = {NULL, NULL, NULL};
    const int64_t threads[3] = {1, 2, 3};
    for (int i = 0; i < 3; i++) {
        TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CPU, threads[i], &e[i]), GEM_OK);
        TCHECK_STATUS(gem_engine_load(e[i], &s, &in.in, 1), GEM_OK);
    }
    const int64_t cases[][2] = {{32, 4},  {32, 16}, {32, 32}, {32, 17}, {7, 64},
                                {3, 6},   {512, 16}, {5, 3},  {1, 33}, {2, 1}};
    float *out = malloc(n * sizeof(float));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const gem_route_params p = {cases[c][0], cases[c][1]};
        char sha[4][65];
        for (int r = 0; r < 4; r++) {
            double sec = 0;
            gem_engine *en = e[r < 3 ? r : 0];
            TCHECK_STATUS(gem_engine_run(en, GEM_ROUTE_FUSED, &p, &sec), GEM_OK);
            gem_output_audit au = {99, 0};
            TCHECK_STATUS(gem_engine_output(en, out, n, &au), GEM_OK);
            TCHECK_EQ_I64(au.unwritten, 0);
            TCHECK(au.guard_ok == 1);
            TCHECK_STATUS(gem_sha256_hex(out, n * sizeof(float), sha[r]), GEM_OK);
            if (r == 0) {
                gem_compare cmp;
                TCHECK_STATUS(gem_compare_f32_f64(out, ref, n, &cmp), GEM_OK);
                TCHECK_EQ_I64(cmp.nonfinite, 0);
                if (!TCHECK(cmp.nmse <= 1e-9 && cmp.correlation >= 0.9999999))
                    fprintf(stderr, "     P%lld T%lld live%lld: nmse %.3g corr %.12f\n",
                            (long long)p.partitions, (long long)p.tile, (long long)live,
                            cmp.nmse, cmp.correlation);
            }
        }
        for (int r = 1; r < 4; r++)
            if (!TCHECK(strcmp(sha[0], sha[r]) == 0))
                fprintf(stderr, "     P%lld T%lld live%lld: run %d differs\n",
                        (long long)p.partitions, (long long)p.tile, (long long)live, r);
    }
    free(out);
    for (int i = 0; i < 3; i++)
        gem_engine_destroy(e[i]);
    free(ref);
    gem_inputs_free(&in);
}

/* The read probe's sums: with any prefetch distance and hint, the exact total of values whose
 * every partial sum is exact (multiples of 1/8 below 2^14), on lengths that are and are not
 * multiples of the 64-float step, and the same as cpu_stream_sum's. */
static void check_stream_sums(void)
{
    const int64_t lens[] = {0, 1, 63, 64, 65, 4096, 100003};
    const int64_t aheads[] = {0, 256, 4096, 16384};
    const cpu_prefetch_hint hints[] = {CPU_PF_L1, CPU_PF_L2, CPU_PF_NTA};
    float *x = fmalloc(100003);
    if (!TCHECK(x != NULL))
        return;
    for (int64_t i = 0; i < 100003; i++)
        x[i] = (float)(i & 7) * 0.125f;
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        const int64_t n = lens[l];
        double want = 0.0;
        for (int64_t i = 0; i < n; i++)
            want += x[i];
        TCHECK((double)cpu_stream_sum(x, n) == want);
        for (size_t a = 0; a < sizeof aheads / sizeof aheads[0]; a++)
            for (size_t h = 0; h < sizeof hints / sizeof hints[0]; h++)
                if (!TCHECK((double)cpu_stream_sum_ahead(x, n, aheads[a], hints[h]) == want))
                    fprintf(stderr, "     stream sum n %lld ahead %lld hint %d\n", (long long)n,
                            (long long)aheads[a], (int)hints[h]);
    }
    free(x);
}

int main(void)
{
    /* every build of the kernels this library holds and this processor runs (three in a
     * GEM_CPU_DISPATCH build), each named (scripts/portable-check.sh reads the lines) */
    const char *builds[3];
    const int nb = cpu_kernels_builds(builds, 3);
    for (int b = 0; b < nb && b < 3; b++) {
        TCHECK(cpu_kernels_use(builds[b]) == 0 && strcmp(cpu_kernels_isa(), builds[b]) == 0);
        printf("test_cpu_fused_kernels: %s kernels\n", cpu_kernels_isa());
        check_stream_sums();
        check_dot_tm();
        check_online_tile();
        check_value_tile();
        check_value_tiles();
        check_fp8_every_code();
        check_route_tiles(32, 4, 512, 1003, 21); /* production heads, ragged live */
        check_route_tiles(16, 2, 48, 301, 22);   /* group 8, dims a multiple of 16 */
        check_route_tiles(6, 2, 13, 45, 23);     /* group 3, odd dims, P = 512 > live */
    }
    TCHECK(cpu_kernels_use("no such build") == -1);
    TCHECK(cpu_kernels_use(builds[0]) == 0);
    return tcheck_summary("test_cpu_fused_kernels");
}
