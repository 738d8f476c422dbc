/*
 * Core contracts: status messages, checked sizes, shape and buffer validation,
 * the scratch byte contract, names, and the check helpers (seeded inputs,
 * comparison figures, SHA-256, guarded buffers).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gem/attn.h"
#include "gem/check.h"
#include "tcheck.h"

static void test_status(void)
{
    for (int s = 0; s < GEM_STATUS_COUNT; s++) {
        const char *m = gem_status_str((gem_status)s), *n = gem_status_name((gem_status)s);
        TCHECK(m && *m && !strchr(m, '\n'));
        TCHECK(n && *n && strcmp(n, "unknown"));
    }
    TCHECK(!strcmp(gem_status_str((gem_status)999), "unknown status"));
    TCHECK(!strcmp(gem_status_name(GEM_ERR_OVERFLOW), "overflow"));
    TCHECK(!strcmp(gem_status_name(GEM_ERR_SCORE), "score"));
    TCHECK(strstr(gem_status_str(GEM_ERR_SCORE), "finite") != NULL);
}

static void test_checked_sizes(void)
{
    size_t r = 7;
    TCHECK_STATUS(gem_mul_size(SIZE_MAX / 2 + 1, 2, &r), GEM_ERR_OVERFLOW);
    TCHECK(r == 7);
    TCHECK_STATUS(gem_mul_size(SIZE_MAX, 1, &r), GEM_OK);
    TCHECK(r == SIZE_MAX);
    TCHECK_STATUS(gem_mul_size(0, SIZE_MAX, &r), GEM_OK);
    TCHECK(r == 0);
    TCHECK_STATUS(gem_add_size(SIZE_MAX, 1, &r), GEM_ERR_OVERFLOW);
    TCHECK_STATUS(gem_add_size(SIZE_MAX - 1, 1, &r), GEM_OK);
    /* A NULL result pointer is refused, whether or not the operation fits. */
    TCHECK_STATUS(gem_mul_size(2, 3, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_mul_size(SIZE_MAX, 2, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_add_size(2, 3, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_add_size(SIZE_MAX, 2, NULL), GEM_ERR_NULL);
}

static void test_scratch_contract(void)
{
    gem_online_scratch sc;
    TCHECK_STATUS(gem_attention_online_scratch_bytes(32, 32, 512, &sc), GEM_OK);
    TCHECK_EQ_I64(sc.maxima_bytes, 4096);
    TCHECK_EQ_I64(sc.denominators_bytes, 4096);
    TCHECK_EQ_I64(sc.numerators_bytes, 2097152);
    TCHECK_EQ_I64(sc.total_bytes, 2105344);
    static const int64_t ps[] = {64, 128, 256};
    for (int i = 0; i < 3; i++) {
        TCHECK_STATUS(gem_attention_online_scratch_bytes(ps[i], 32, 512, &sc), GEM_OK);
        TCHECK_EQ_I64(sc.total_bytes, 2105344 * (ps[i] / 32)); /* linear in P */
    }
    gem_online_scratch untouched = {1, 2, 3, 4};
    sc = untouched;
    TCHECK_STATUS(gem_attention_online_scratch_bytes(INT64_MAX, 32, 512, &sc), GEM_ERR_OVERFLOW);
    TCHECK_STATUS(gem_attention_online_scratch_bytes(32, 32, INT64_MAX, &sc), GEM_ERR_OVERFLOW);
    TCHECK_STATUS(gem_attention_online_scratch_bytes((int64_t)1 << 40, (int64_t)1 << 20, 512, &sc),
                  GEM_ERR_OVERFLOW);
    /* The sum overflows while every product fits. */
    TCHECK_STATUS(gem_attention_online_scratch_bytes((int64_t)1 << 30, 1, ((int64_t)1 << 32) - 2, &sc),
                  GEM_ERR_OVERFLOW);
    TCHECK(!memcmp(&sc, &untouched, sizeof sc));
    TCHECK_STATUS(gem_attention_online_scratch_bytes(0, 32, 512, &sc), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_attention_online_scratch_bytes(32, -1, 512, &sc), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_attention_online_scratch_bytes(32, 32, 0, &sc), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_attention_online_scratch_bytes(32, 32, 512, NULL), GEM_ERR_NULL);
}

static gem_attn_shape good_shape(void)
{
    gem_attn_shape s = {.n_q_heads = 8, .n_kv_heads = 2, .dk = 16, .dv = 12, .live = 20,
                        .capacity = 24, .scale = 0.25f};
    return s;
}

static void test_bad_shapes(void)
{
    gem_attn_shape s = good_shape();
    TCHECK_STATUS(gem_attn_shape_check(&s), GEM_OK);
    TCHECK_STATUS(gem_attn_shape_check(NULL), GEM_ERR_NULL);
    struct {
        int64_t *field;
        int64_t value;
    } edits[] = {
        {&s.n_q_heads, 0}, {&s.n_q_heads, -8}, {&s.n_kv_heads, 0}, {&s.n_kv_heads, 3},
        {&s.n_q_heads, 9}, {&s.dk, 0},         {&s.dv, -1},        {&s.live, 0},
        {&s.live, -5},     {&s.live, 25},      {&s.capacity, 0},   {&s.capacity, 19},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        s = good_shape();
        *edits[i].field = edits[i].value;
        TCHECK_STATUS(gem_attn_shape_check(&s), GEM_ERR_SHAPE);
    }
    s = good_shape();
    s.scale = NAN;
    TCHECK_STATUS(gem_attn_shape_check(&s), GEM_ERR_SHAPE);
    s.scale = INFINITY;
    TCHECK_STATUS(gem_attn_shape_check(&s), GEM_ERR_SHAPE);
    /* Sizes that overflow size_t (or its byte counts). */
    s = good_shape();
    s.capacity = s.live = (int64_t)1 << 40;
    s.dk = (int64_t)1 << 30;
    TCHECK_STATUS(gem_attn_shape_check(&s), GEM_ERR_OVERFLOW);
    s = good_shape();
    s.capacity = s.live = INT64_MAX;
    TCHECK_STATUS(gem_attn_shape_check(&s), GEM_ERR_OVERFLOW);
    s = good_shape();
    s.capacity = s.live = (int64_t)1 << 61; /* elements fit, bytes do not */
    s.n_kv_heads = 1;
    s.n_q_heads = 1;
    s.dk = s.dv = 1;
    TCHECK_STATUS(gem_attn_shape_check(&s), GEM_ERR_OVERFLOW);

    size_t nq, nk, nv, no;
    s = good_shape();
    TCHECK_STATUS(gem_attn_shape_elems(&s, &nq, &nk, &nv, &no), GEM_OK);
    TCHECK_EQ_I64(nq, 8 * 16);
    TCHECK_EQ_I64(nk, 2 * 24 * 16);
    TCHECK_EQ_I64(nv, 2 * 24 * 12);
    TCHECK_EQ_I64(no, 8 * 12);
}

static void test_buffers(void)
{
    gem_attn_shape s = good_shape();
    gem_owned_inputs own;
    TCHECK_STATUS(gem_inputs_make(&s, 5, &own), GEM_OK);
    double *out = malloc(96 * sizeof(double));
    gem_attn_inputs in = own.in;
    TCHECK_STATUS(gem_attn_check(&s, &in, out, 96), GEM_OK);
    TCHECK_STATUS(gem_attn_check(&s, &in, out, 95), GEM_ERR_RANGE);
    TCHECK_STATUS(gem_attn_reference(&s, &in, out, 95), GEM_ERR_RANGE);
    TCHECK_STATUS(gem_attn_check(&s, &in, NULL, 96), GEM_ERR_NULL);
    in.k_elems--;
    TCHECK_STATUS(gem_attn_reference(&s, &in, out, 96), GEM_ERR_RANGE);
    in = own.in;
    in.v_elems = 0;
    TCHECK_STATUS(gem_attn_reference(&s, &in, out, 96), GEM_ERR_RANGE);
    in = own.in;
    in.q = NULL;
    TCHECK_STATUS(gem_attn_reference(&s, &in, out, 96), GEM_ERR_NULL);
    in = own.in;
    in.k = (const float *)((const char *)own.k + 1);
    TCHECK_STATUS(gem_attn_reference(&s, &in, out, 96), GEM_ERR_ALIGN);
    /* live > capacity is a shape error: the buffers could not hold it. */
    s.live = s.capacity + 1;
    TCHECK_STATUS(gem_attn_reference(&s, &own.in, out, 96), GEM_ERR_SHAPE);

    /* Non-finite inputs are rejected; rows beyond live are not looked at. */
    s = good_shape();
    TCHECK_STATUS(gem_attn_check_finite(&s, &own.in), GEM_OK);
    float keep = own.k[(1 * 24 + 22) * 16 + 3];
    own.k[(1 * 24 + 22) * 16 + 3] = NAN; /* row 22 >= live */
    TCHECK_STATUS(gem_attn_check_finite(&s, &own.in), GEM_OK);
    own.k[(1 * 24 + 22) * 16 + 3] = keep;
    float *targets[] = {&own.q[37], &own.k[(1 * 24 + 19) * 16 + 15], &own.v[(0 * 24 + 0) * 12 + 0]};
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int t = 0; t < 3; t++)
        for (int b = 0; b < 3; b++) {
            float old = *targets[t];
            *targets[t] = bad[b];
            TCHECK_STATUS(gem_attn_check_finite(&s, &own.in), GEM_ERR_NONFINITE);
            out[0] = 42.0;
            TCHECK_STATUS(gem_attn_reference(&s, &own.in, out, 96), GEM_ERR_NONFINITE);
            TCHECK(out[0] == 42.0);
            float fo[96];
            TCHECK_STATUS(gem_attn_online(&s, &own.in, 4, fo, 96), GEM_ERR_NONFINITE);
            *targets[t] = old;
        }
    free(out);
    gem_inputs_free(&own);
}

static void test_names(void)
{
    for (int r = 0; r < GEM_ROUTE_COUNT; r++) {
        gem_route back;
        TCHECK_STATUS(gem_route_parse(gem_route_name((gem_route)r), &back), GEM_OK);
        TCHECK(back == (gem_route)r);
    }
    for (int b = 0; b < GEM_BACKEND_COUNT; b++) {
        gem_backend back;
        TCHECK_STATUS(gem_backend_parse(gem_backend_name((gem_backend)b), &back), GEM_OK);
        TCHECK(back == (gem_backend)b);
    }
    gem_route r;
    TCHECK_STATUS(gem_route_parse("Fused", &r), GEM_ERR_PARAM);
    TCHECK(gem_route_name(GEM_ROUTE_COUNT) == NULL);
}

static void test_inputs_and_digests(void)
{
    /* The stream is position-addressed: a chunk equals the same slice of the whole. */
    float whole[100], part[40];
    gem_fill_uniform(99, -1.0f, 1.0f, whole, 100);
    gem_fill_uniform(99, -1.0f, 1.0f, part, 40);
    TCHECK(!memcmp(whole, part, sizeof part));
    int in_range = 1, distinct = 0;
    for (int i = 0; i < 100; i++) {
        in_range &= whole[i] >= -1.0f && whole[i] < 1.0f;
        distinct += i > 0 && whole[i] != whole[i - 1];
    }
    TCHECK(in_range && distinct > 95);
    gem_input_seeds s = gem_input_seeds_from(1);
    TCHECK(s.q != s.k && s.k != s.v && s.q != s.v);

    char hex[65];
    TCHECK_STATUS(gem_sha256_hex("abc", 3, hex), GEM_OK);
    TCHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    TCHECK_STATUS(gem_sha256_hex(NULL, 0, hex), GEM_OK);
    TCHECK(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    TCHECK_STATUS(gem_sha256_hex(NULL, 1, hex), GEM_ERR_NULL);
    TCHECK_STATUS(gem_sha256_file_hex("/nonexistent/gem", hex), GEM_ERR_IO);
}

static void test_compare(void)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5};
    double r[4] = {1, 2, 3, 4};
    gem_compare c;
    TCHECK_STATUS(gem_compare_f32_f64(a, r, 4, &c), GEM_OK);
    TCHECK(c.correlation == 1.0 && c.nmse == 0.0 && c.max_abs == 0.0 && c.nonfinite == 0);
    TCHECK_STATUS(gem_compare_f32_f32(b, a, 4, &c), GEM_OK);
    TCHECK(fabs(c.nmse - 1.0 / 30.0) < 1e-15 && c.max_abs == 1.0 && c.correlation < 1.0 &&
           c.correlation > 0.98);
    b[2] = NAN;
    TCHECK_STATUS(gem_compare_f32_f32(b, a, 4, &c), GEM_OK);
    TCHECK(c.nonfinite == 1 && isnan(c.nmse) && isnan(c.correlation));
    TCHECK(isnan(c.ref_var) && isnan(c.ref_mean_square));
    TCHECK_STATUS(gem_compare_f32_f32(b, a, 0, &c), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_compare_f32_f64(a, NULL, 4, &c), GEM_ERR_NULL);
    TCHECK_STATUS(gem_compare_f32_f64(NULL, r, 4, &c), GEM_ERR_NULL);
    TCHECK_STATUS(gem_compare_f32_f64(a, r, 4, NULL), GEM_ERR_NULL);
    /* Reference spread and magnitude: ref 1, 2, 3, 4. */
    TCHECK_STATUS(gem_compare_f32_f64(a, r, 4, &c), GEM_OK);
    TCHECK(c.ref_var == 1.25 && c.ref_mean_square == 7.5);
    /* The correlation never leaves [-1, 1], for any data. */
    float x[64], y[64];
    int in_range = 1;
    for (uint64_t seed = 1; seed < 200; seed++) {
        gem_fill_uniform(seed, -1.0f, 1.0f, x, 64);
        for (int i = 0; i < 64; i++)
            y[i] = seed % 2 ? x[i] * 3.0f + 1e-7f * (float)i : -x[i];
        TCHECK_STATUS(gem_compare_f32_f32(y, x, 64, &c), GEM_OK);
        in_range &= c.correlation >= -1.0 && c.correlation <= 1.0;
    }
    TCHECK(in_range);
}

static void test_gate(void)
{
    enum { N = 512 };
    static float got[N];
    static double ref[N];
    gem_compare c;
    gem_gate g;
    /* A reference with a pattern: the correlation decides. */
    gem_fill_uniform(3, -1.0f, 1.0f, got, N);
    for (int i = 0; i < N; i++)
        ref[i] = got[i];
    TCHECK_STATUS(gem_compare_f32_f64(got, ref, N, &c), GEM_OK);
    TCHECK_STATUS(gem_gate_compare(&c, 0.9999, 1e-4, &g), GEM_OK);
    TCHECK(g.pass && g.finite && !g.near_constant && g.shape_ok && g.nmse_ok);
    for (int i = 0; i < N; i++) /* the pattern reversed, same size */
        ref[i] = -got[i];
    gem_compare_f32_f64(got, ref, N, &c);
    gem_gate_compare(&c, 0.9999, 1e-4, &g);
    TCHECK(!g.pass && !g.shape_ok && !g.near_constant);

    /* A nearly constant reference (spread 1e-9 of its size) and a route whose
     * output is that constant to within float rounding: the correlation is
     * noise, the relative error passes. */
    for (int i = 0; i < N; i++) {
        ref[i] = 0.5 + 1e-9 * (double)((i * 7919) % 13);
        got[i] = (float)(0.5 + 1e-9 * (double)((i * 104729) % 11));
    }
    TCHECK_STATUS(gem_compare_f32_f64(got, ref, N, &c), GEM_OK);
    TCHECK(c.correlation < 0.9999 && c.nmse < 1e-12);
    TCHECK_STATUS(gem_gate_compare(&c, 0.9999, 1e-4, &g), GEM_OK);
    TCHECK(g.pass && g.near_constant && g.shape_ok);
    /* The same reference and a route 10% off: the relative error fails even
     * where NMSE is loose enough to let it through. */
    for (int i = 0; i < N; i++)
        got[i] = 0.55f;
    gem_compare_f32_f64(got, ref, N, &c);
    gem_gate_compare(&c, 0.9999, 1.0, &g);
    TCHECK(!g.pass && g.near_constant && !g.shape_ok && g.nmse_ok);
    /* An all-zero reference is nearly constant: only an exact zero passes. */
    for (int i = 0; i < N; i++) {
        ref[i] = 0.0;
        got[i] = 0.0f;
    }
    gem_compare_f32_f64(got, ref, N, &c);
    gem_gate_compare(&c, 0.9999, 1e-4, &g);
    TCHECK(g.pass && g.near_constant);
    got[5] = 1e-30f;
    gem_compare_f32_f64(got, ref, N, &c);
    gem_gate_compare(&c, 0.9999, 1e-4, &g);
    TCHECK(!g.pass);
    /* Non-finite figures fail; bad thresholds and NULLs are refused. */
    got[5] = NAN;
    gem_compare_f32_f64(got, ref, N, &c);
    gem_gate_compare(&c, 0.9999, 1e-4, &g);
    TCHECK(!g.pass && !g.finite);
    gem_compare bad = {N, 0, 1.0, NAN, 0.0, 1.0, 1.0};
    gem_gate_compare(&bad, 0.9999, 1e-4, &g);
    TCHECK(!g.pass && !g.finite);
    gem_gate untouched = {7, 7, 7, 7, 7};
    g = untouched;
    TCHECK_STATUS(gem_gate_compare(&c, 1.5, 1e-4, &g), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_gate_compare(&c, NAN, 1e-4, &g), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_gate_compare(&c, 0.9, -1.0, &g), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_gate_compare(&c, 0.9, INFINITY, &g), GEM_ERR_PARAM);
    TCHECK(!memcmp(&g, &untouched, sizeof g));
    TCHECK_STATUS(gem_gate_compare(NULL, 0.9, 1e-4, &g), GEM_ERR_NULL);
    TCHECK_STATUS(gem_gate_compare(&c, 0.9, 1e-4, NULL), GEM_ERR_NULL);
}

static void test_memory(void)
{
    uint64_t avail = 0;
    gem_status st = gem_mem_available(&avail);
    TCHECK(st == GEM_OK || st == GEM_ERR_UNSUPPORTED);
    if (st == GEM_OK) {
        TCHECK(avail > 0);
        TCHECK_STATUS(gem_mem_check(1, NULL), GEM_OK);
        uint64_t told = 0;
        TCHECK_STATUS(gem_mem_check(UINT64_MAX, &told), GEM_ERR_NOMEM);
        TCHECK(told > 0 && told < UINT64_MAX);
    }
    TCHECK_STATUS(gem_mem_available(NULL), GEM_ERR_NULL);
}

static void test_guard(void)
{
    float *p = gem_guard_alloc(10);
    TCHECK(p != NULL);
    size_t unwritten;
    int ok;
    gem_guard_check(p, 10, &unwritten, &ok);
    TCHECK(unwritten == 10 && ok);
    for (int i = 0; i < 9; i++)
        p[i] = (float)i;
    gem_guard_check(p, 10, &unwritten, &ok);
    TCHECK(unwritten == 1 && ok);
    p[10] = 0.0f; /* one float past the end: the guard notices */
    gem_guard_check(p, 10, &unwritten, &ok);
    TCHECK(!ok);
    gem_guard_poison(p, 10);
    gem_guard_check(p, 10, &unwritten, &ok);
    TCHECK(unwritten == 10 && ok);
    gem_guard_free(p);
    TCHECK(gem_guard_alloc(SIZE_MAX / 2) == NULL);
    /* NULL buffers: nothing is written, nothing is vouched for. */
    gem_guard_poison(NULL, 10);
    unwritten = 0;
    ok = 1;
    gem_guard_check(NULL, 10, &unwritten, &ok);
    TCHECK(unwritten == 10 && !ok);
    gem_guard_check(NULL, 10, NULL, NULL);
    gem_fill_uniform(1, -1.0f, 1.0f, NULL, 10);
}

int main(void)
{
    test_status();
    test_checked_sizes();
    test_scratch_contract();
    test_bad_shapes();
    test_buffers();
    test_names();
    test_inputs_and_digests();
    test_compare();
    test_gate();
    test_guard();
    test_memory();
    return tcheck_summary("test_core");
}
