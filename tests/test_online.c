/*
 * The online-softmax oracle against the double reference, the merge identity,
 * every invalid state, partition ranges and GQA mapping.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gem/attn.h"
#include "gem/check.h"
#include "tcheck.h"

/* The fixture: 13 live tokens, 17 dims (non-power-of-two), GQA 6/2, and two
 * extra cache rows beyond live that hold large values that must not matter. */
static gem_attn_shape fixture_shape(void)
{
    gem_attn_shape s = {.n_q_heads = 6, .n_kv_heads = 2, .dk = 17, .dv = 17, .live = 13,
                        .capacity = 15, .scale = 0.6f};
    return s;
}

static void poison_tail_rows(const gem_attn_shape *s, float *k, float *v)
{
    for (int64_t g = 0; g < s->n_kv_heads; g++)
        for (int64_t t = s->live; t < s->capacity; t++) {
            for (int64_t i = 0; i < s->dk; i++)
                k[(g * s->capacity + t) * s->dk + i] = 1000.0f;
            for (int64_t i = 0; i < s->dv; i++)
                v[(g * s->capacity + t) * s->dv + i] = -5000.0f;
        }
}

static double max_abs_diff(const float *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void test_partitions_against_reference(void)
{
    gem_attn_shape s = fixture_shape();
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, 7, &in), GEM_OK);
    poison_tail_rows(&s, in.k, in.v);
    size_t n = (size_t)(s.n_q_heads * s.dv);
    double *ref = malloc(n * sizeof(double));
    float *out = malloc(n * sizeof(float));
    TCHECK_STATUS(gem_attn_reference(&s, &in.in, ref, n), GEM_OK);

    /* The reference itself against an independent per-head direct softmax. */
    for (int64_t h = 0; h < s.n_q_heads; h++) {
        int64_t g = h / (s.n_q_heads / s.n_kv_heads);
        double sc[13], mx = -INFINITY, sum = 0;
        for (int t = 0; t < 13; t++) {
            double d = 0;
            for (int i = 0; i < 17; i++)
                d += (double)in.q[h * 17 + i] * in.k[(g * 15 + t) * 17 + i];
            sc[t] = (double)0.6f * d;
            mx = fmax(mx, sc[t]);
        }
        for (int t = 0; t < 13; t++)
            sum += exp(sc[t] - mx);
        for (int i = 0; i < 17; i++) {
            double o = 0;
            for (int t = 0; t < 13; t++)
                o += exp(sc[t] - mx) * in.v[(g * 15 + t) * 17 + i];
            TCHECK(fabs(o / sum - ref[h * 17 + i]) < 1e-12);
        }
    }

    static const int64_t parts[] = {1, 2, 3, 4, 7, 16};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        memset(out, 0, n * sizeof(float));
        TCHECK_STATUS(gem_attn_online(&s, &in.in, parts[i], out, n), GEM_OK);
        TCHECK(max_abs_diff(out, ref, n) < 2e-6);
        gem_compare c;
        TCHECK_STATUS(gem_compare_f32_f64(out, ref, n, &c), GEM_OK);
        TCHECK(c.nonfinite == 0 && c.correlation > 0.99999999 && c.nmse < 1e-12);
    }
    /* 16 partitions over 13 tokens: some partitions are empty. */
    int empties = 0;
    for (int64_t p = 0; p < 16; p++) {
        int64_t b, e;
        TCHECK_STATUS(gem_partition_range(13, 16, p, &b, &e), GEM_OK);
        empties += (b == e);
    }
    TCHECK(empties > 0);
    free(ref);
    free(out);
    gem_inputs_free(&in);
}

/* Partials over three ranges merged in both association orders and with empty
 * states on both sides. */
static void test_merge_order_and_empty(void)
{
    gem_attn_shape s = fixture_shape();
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, 11, &in), GEM_OK);
    const int64_t H = s.n_q_heads, D = s.dv;
    const size_t no = (size_t)(H * D);
    float m[3][6], sd[3][6];
    float *o[3];
    const int64_t cuts[4] = {0, 4, 9, 13};
    for (int r = 0; r < 3; r++) {
        o[r] = malloc(no * sizeof(float));
        TCHECK_STATUS(gem_online_partial(&s, &in.in, cuts[r], cuts[r + 1], m[r], sd[r], 6, o[r], no),
                      GEM_OK);
    }
    double *ref = malloc(no * sizeof(double));
    TCHECK_STATUS(gem_attn_reference(&s, &in.in, ref, no), GEM_OK);
    float *ab = malloc(D * sizeof(float)), *abc = malloc(D * sizeof(float));
    float *bc = malloc(D * sizeof(float)), *a_bc = malloc(D * sizeof(float));
    float *fin1 = malloc(D * sizeof(float)), *fin2 = malloc(D * sizeof(float));
    float *zero = calloc((size_t)D, sizeof(float)), *same = malloc(D * sizeof(float));
    for (int64_t h = 0; h < H; h++) {
        const float *oa = o[0] + h * D, *ob = o[1] + h * D, *oc = o[2] + h * D;
        float m1, s1, m2, s2, m3, s3, m4, s4;
        TCHECK_STATUS(gem_online_merge(D, m[0][h], sd[0][h], oa, m[1][h], sd[1][h], ob, &m1, &s1, ab), GEM_OK);
        TCHECK_STATUS(gem_online_merge(D, m1, s1, ab, m[2][h], sd[2][h], oc, &m2, &s2, abc), GEM_OK);
        TCHECK_STATUS(gem_online_merge(D, m[1][h], sd[1][h], ob, m[2][h], sd[2][h], oc, &m3, &s3, bc), GEM_OK);
        TCHECK_STATUS(gem_online_merge(D, m[0][h], sd[0][h], oa, m3, s3, bc, &m4, &s4, a_bc), GEM_OK);
        TCHECK(m2 == m4);
        TCHECK(fabsf(s2 - s4) <= 1e-5f * s2);
        TCHECK_STATUS(gem_online_finalize(D, m2, s2, abc, fin1), GEM_OK);
        TCHECK_STATUS(gem_online_finalize(D, m4, s4, a_bc, fin2), GEM_OK);
        TCHECK(max_abs_diff(fin1, ref + h * D, (size_t)D) < 2e-6);
        TCHECK(max_abs_diff(fin2, ref + h * D, (size_t)D) < 2e-6);
        /* Empty on the left, then on the right: bitwise identity. */
        float me, se;
        TCHECK_STATUS(gem_online_merge(D, -INFINITY, 0.0f, zero, m2, s2, abc, &me, &se, same), GEM_OK);
        TCHECK(me == m2 && se == s2 && !memcmp(same, abc, D * sizeof(float)));
        TCHECK_STATUS(gem_online_merge(D, m2, s2, abc, -INFINITY, 0.0f, zero, &me, &se, same), GEM_OK);
        TCHECK(me == m2 && se == s2 && !memcmp(same, abc, D * sizeof(float)));
        /* Empty with empty stays empty; in-place merge (o_out aliases oa) works. */
        TCHECK_STATUS(gem_online_merge(D, -INFINITY, 0.0f, zero, -INFINITY, 0.0f, zero, &me, &se, same), GEM_OK);
        TCHECK(isinf(me) && me < 0 && se == 0.0f && same[0] == 0.0f);
        memcpy(same, ab, D * sizeof(float));
        TCHECK_STATUS(gem_online_merge(D, m1, s1, same, m[2][h], sd[2][h], oc, &me, &se, same), GEM_OK);
        TCHECK(!memcmp(same, abc, D * sizeof(float)) && me == m2 && se == s2);
    }
    /* An empty range gives empty states. */
    float em[6], es[6];
    TCHECK_STATUS(gem_online_partial(&s, &in.in, 5, 5, em, es, 6, o[0], no), GEM_OK);
    TCHECK(isinf(em[0]) && es[0] == 0.0f && o[0][0] == 0.0f);
    TCHECK_STATUS(gem_online_partial(&s, &in.in, 5, 4, em, es, 6, o[0], no), GEM_ERR_RANGE);
    TCHECK_STATUS(gem_online_partial(&s, &in.in, 0, 14, em, es, 6, o[0], no), GEM_ERR_RANGE);
    TCHECK_STATUS(gem_online_partial(&s, &in.in, -1, 3, em, es, 6, o[0], no), GEM_ERR_RANGE);
    TCHECK_STATUS(gem_online_partial(&s, &in.in, 0, 3, em, es, 5, o[0], no), GEM_ERR_RANGE);
    for (int r = 0; r < 3; r++)
        free(o[r]);
    free(ref), free(ab), free(abc), free(bc), free(a_bc), free(fin1), free(fin2), free(zero), free(same);
    gem_inputs_free(&in);
}

/* Every invalid state fails closed, on either side of a merge and in finalize,
 * and leaves the outputs untouched. */
static void test_invalid_states(void)
{
    enum { D = 5 };
    const float good_o[D] = {0.5f, -1.0f, 2.0f, 0.0f, 3.0f};
    const float zero_o[D] = {0};
    struct bad {
        const char *what;
        float m, s;
        int o_kind; /* 0 good, 1 NaN in O, 2 inf in O, 3 zero O */
    } bads[] = {
        {"NaN M", NAN, 1.0f, 0},         {"NaN S", 0.5f, NAN, 0},
        {"NaN O", 0.5f, 1.0f, 1},        {"+inf M", INFINITY, 1.0f, 0},
        {"negative S", 0.5f, -1.0f, 0},  {"S = 0 with finite M", 0.5f, 0.0f, 0},
        {"S > 0 with M = -inf", -INFINITY, 1.0f, 0}, {"non-finite O", 0.5f, 1.0f, 2},
        {"infinite S", 0.5f, INFINITY, 0}, {"empty with non-zero O", -INFINITY, 0.0f, 0},
        {"S = 0 finite M zero O", 0.25f, 0.0f, 3},
    };
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        float o[D];
        memcpy(o, good_o, sizeof o);
        if (bads[i].o_kind == 1)
            o[2] = NAN;
        if (bads[i].o_kind == 2)
            o[3] = INFINITY;
        if (bads[i].o_kind == 3)
            memset(o, 0, sizeof o);
        float mo = 123.0f, so = 456.0f, out[D], fin[D];
        for (int j = 0; j < D; j++)
            out[j] = fin[j] = 789.0f;
        TCHECK_STATUS(gem_online_state_check(D, bads[i].m, bads[i].s, o), GEM_ERR_STATE);
        TCHECK_STATUS(gem_online_merge(D, bads[i].m, bads[i].s, o, 0.1f, 2.0f, good_o, &mo, &so, out),
                      GEM_ERR_STATE);
        TCHECK_STATUS(gem_online_merge(D, 0.1f, 2.0f, good_o, bads[i].m, bads[i].s, o, &mo, &so, out),
                      GEM_ERR_STATE);
        TCHECK_STATUS(gem_online_merge(D, -INFINITY, 0.0f, zero_o, bads[i].m, bads[i].s, o, &mo, &so, out),
                      GEM_ERR_STATE);
        TCHECK_STATUS(gem_online_finalize(D, bads[i].m, bads[i].s, o, fin), GEM_ERR_STATE);
        int untouched = mo == 123.0f && so == 456.0f;
        for (int j = 0; j < D; j++)
            untouched &= out[j] == 789.0f && fin[j] == 789.0f;
        if (!TCHECK(untouched))
            fprintf(stderr, "     output written for invalid state: %s\n", bads[i].what);
    }
    float fin[D];
    TCHECK_STATUS(gem_online_finalize(D, -INFINITY, 0.0f, zero_o, fin), GEM_ERR_STATE);
    TCHECK_STATUS(gem_online_finalize(D, 0.5f, 2.0f, good_o, fin), GEM_OK);
    TCHECK(fin[4] == 1.5f);
    TCHECK_STATUS(gem_online_state_check(D, -INFINITY, 0.0f, zero_o), GEM_OK);
    TCHECK_STATUS(gem_online_state_check(0, 0.5f, 1.0f, good_o), GEM_ERR_PARAM);
    float m, s, o[D];
    TCHECK_STATUS(gem_online_merge(D, 0.1f, 1.0f, good_o, 0.2f, 1.0f, good_o, NULL, &s, o), GEM_ERR_NULL);
    TCHECK_STATUS(gem_online_merge(D, 0.1f, 1.0f, NULL, 0.2f, 1.0f, good_o, &m, &s, o), GEM_ERR_NULL);
}

/* Valid states whose merge or finalization overflows float: every such
 * result is refused and nothing is written, so GEM_OK always means a valid
 * state (classes: S overflows, an O element overflows, O / S overflows). */
static void test_results_validated(void)
{
    enum { D = 4 };
    const float big = 3.0e38f;
    struct {
        const char *what;
        float ma, sa, oa[D], mb, sb, ob[D];
    } merges[] = {
        {"S overflows", 1.0f, big, {0, 0, 0, 0}, 1.0f, big, {0, 0, 0, 0}},
        {"O overflows", 1.0f, 1.0f, {0, big, 0, 0}, 1.0f, 1.0f, {0, big, 0, 0}},
        {"O overflows (negative)", 2.0f, 1.0f, {0, 0, 0, -big}, 2.0f, 2.0f, {0, 0, 0, -big}},
    };
    for (size_t i = 0; i < sizeof merges / sizeof merges[0]; i++) {
        float mo = 5.0f, so = 6.0f, out[D] = {7, 7, 7, 7};
        TCHECK_STATUS(gem_online_merge(D, merges[i].ma, merges[i].sa, merges[i].oa, merges[i].mb,
                                       merges[i].sb, merges[i].ob, &mo, &so, out),
                      GEM_ERR_STATE);
        int untouched = mo == 5.0f && so == 6.0f;
        for (int j = 0; j < D; j++)
            untouched &= out[j] == 7.0f;
        if (!TCHECK(untouched))
            fprintf(stderr, "     merge wrote a result for: %s\n", merges[i].what);
        /* In place (o_out aliasing oa): the input is untouched too. */
        float inplace[D];
        memcpy(inplace, merges[i].oa, sizeof inplace);
        TCHECK_STATUS(gem_online_merge(D, merges[i].ma, merges[i].sa, inplace, merges[i].mb,
                                       merges[i].sb, merges[i].ob, &mo, &so, inplace),
                      GEM_ERR_STATE);
        TCHECK(!memcmp(inplace, merges[i].oa, sizeof inplace));
    }
    /* A merge that stays in range is valid and exact. */
    const float oa[D] = {1, 2, 3, 4}, ob[D] = {4, 3, 2, 1};
    float mo, so, out[D];
    TCHECK_STATUS(gem_online_merge(D, 0.0f, 1.0f, oa, 0.0f, 1.0f, ob, &mo, &so, out), GEM_OK);
    TCHECK(so == 2.0f && out[0] == 5.0f && gem_online_state_check(D, mo, so, out) == GEM_OK);
    /* Finalize: a valid state whose quotient overflows (S tiny, O large). */
    const float ol[D] = {1e30f, 0, 0, 0};
    float fin[D] = {9, 9, 9, 9};
    TCHECK_STATUS(gem_online_state_check(D, 0.0f, 1e-20f, ol), GEM_OK);
    TCHECK_STATUS(gem_online_finalize(D, 0.0f, 1e-20f, ol, fin), GEM_ERR_STATE);
    TCHECK(fin[0] == 9.0f && fin[3] == 9.0f);
    TCHECK_STATUS(gem_online_finalize(D, 0.0f, 1.0f, NULL, fin), GEM_ERR_NULL);
    TCHECK_STATUS(gem_online_merge(D, 0.1f, 1.0f, oa, 0.2f, 1.0f, NULL, &mo, &so, out),
                  GEM_ERR_NULL);
}

/* Scores that overflow float with finite inputs are GEM_ERR_SCORE (not
 * "non-finite input", not "state"); a non-finite input is GEM_ERR_NONFINITE;
 * the output is never written. */
static void test_score_overflow(void)
{
    gem_attn_shape s = {.n_q_heads = 2, .n_kv_heads = 1, .dk = 4, .dv = 3, .live = 5,
                        .capacity = 5, .scale = 1.0f};
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, 9, &in), GEM_OK);
    for (int i = 0; i < 4; i++) {
        in.q[i] = 1e30f;
        in.k[2 * 4 + i] = 1e30f; /* token 2: q.k = 4e60 */
    }
    TCHECK_STATUS(gem_attn_check_finite(&s, &in.in), GEM_OK);
    float out[6] = {1, 1, 1, 1, 1, 1}, m[2], sd[2], o[6];
    TCHECK_STATUS(gem_attn_online(&s, &in.in, 2, out, 6), GEM_ERR_SCORE);
    TCHECK(out[0] == 1.0f && out[5] == 1.0f);
    TCHECK_STATUS(gem_online_partial(&s, &in.in, 0, 5, m, sd, 2, o, 6), GEM_ERR_SCORE);
    TCHECK_STATUS(gem_online_partial(&s, &in.in, 3, 5, m, sd, 2, o, 6), GEM_OK);
    /* The scale alone can overflow a score of finite, moderate inputs. */
    gem_inputs_free(&in);
    s.scale = 3.0e38f;
    TCHECK_STATUS(gem_inputs_make(&s, 9, &in), GEM_OK);
    for (int i = 0; i < 4 * 5; i++)
        in.k[i] = 1.0f;
    for (int i = 0; i < 8; i++)
        in.q[i] = 1.0f;
    TCHECK_STATUS(gem_attn_online(&s, &in.in, 1, out, 6), GEM_ERR_SCORE);
    /* A NaN in k is a non-finite input, reported as such by the partial too. */
    s.scale = 1.0f;
    in.k[3] = NAN;
    TCHECK_STATUS(gem_online_partial(&s, &in.in, 0, 5, m, sd, 2, o, 6), GEM_ERR_NONFINITE);
    TCHECK_STATUS(gem_attn_online(&s, &in.in, 1, out, 6), GEM_ERR_NONFINITE);
    TCHECK(out[0] == 1.0f);
    gem_inputs_free(&in);
}

/* P has an upper bound; empty partitions are skipped with the same bits. */
static void test_partition_bound(void)
{
    gem_attn_shape s = fixture_shape();
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, 7, &in), GEM_OK);
    size_t n = (size_t)(s.n_q_heads * s.dv);
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    TCHECK_STATUS(gem_attn_online(&s, &in.in, 13, a, n), GEM_OK);
    TCHECK_STATUS(gem_attn_online(&s, &in.in, GEM_MAX_PARTITIONS, b, n), GEM_OK);
    TCHECK(!memcmp(a, b, n * sizeof(float))); /* P > live: one token per non-empty partition */
    TCHECK_STATUS(gem_attn_online(&s, &in.in, GEM_MAX_PARTITIONS + 1, b, n), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_attn_online(&s, &in.in, INT64_MAX, b, n), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_attn_online(&s, &in.in, 0, b, n), GEM_ERR_PARAM);
    free(a);
    free(b);
    gem_inputs_free(&in);
}

static void test_partition_ranges(void)
{
    static const int64_t lives[] = {0, 1, 2, 13, 31, 32, 33, 8191, 8192, 8193, 131072};
    static const int64_t parts[] = {1, 2, 3, 7, 16, 32, 64, 128, 256, 1000};
    for (size_t i = 0; i < sizeof lives / sizeof lives[0]; i++)
        for (size_t j = 0; j < sizeof parts / sizeof parts[0]; j++) {
            const int64_t L = lives[i], P = parts[j], chunk = (L + P - 1) / P;
            int64_t expect = 0, ok = 1;
            for (int64_t p = 0; p < P; p++) {
                int64_t b, e;
                if (gem_partition_range(L, P, p, &b, &e) != GEM_OK) {
                    ok = 0;
                    break;
                }
                ok &= (b == expect) && (e >= b) && (e - b <= chunk);
                expect = e;
            }
            TCHECK(ok && expect == L);
        }
    int64_t b, e;
    TCHECK_STATUS(gem_partition_range(INT64_MAX, 3, 2, &b, &e), GEM_OK);
    TCHECK(e == INT64_MAX && b < e);
    TCHECK_STATUS(gem_partition_range(10, 0, 0, &b, &e), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_partition_range(10, 4, 4, &b, &e), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_partition_range(10, 4, -1, &b, &e), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_partition_range(-1, 4, 0, &b, &e), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_partition_range(10, 4, 0, NULL, &e), GEM_ERR_NULL);
}

/* Query head h must read KV head h / group: give every KV head's V a distinct
 * constant, so each output is exactly that constant. */
static void test_gqa_mapping(void)
{
    static const int64_t ratios[][2] = {{4, 4}, {8, 4}, {32, 4}, {6, 3}, {5, 1}};
    for (size_t r = 0; r < sizeof ratios / sizeof ratios[0]; r++) {
        gem_attn_shape s = {.n_q_heads = ratios[r][0], .n_kv_heads = ratios[r][1], .dk = 9,
                            .dv = 7, .live = 10, .capacity = 10, .scale = 0.3f};
        gem_owned_inputs in;
        TCHECK_STATUS(gem_inputs_make(&s, 3 + r, &in), GEM_OK);
        for (int64_t g = 0; g < s.n_kv_heads; g++)
            for (int64_t i = 0; i < s.capacity * s.dv; i++)
                in.v[g * s.capacity * s.dv + i] = (float)(g + 1);
        size_t n = (size_t)(s.n_q_heads * s.dv);
        double *ref = malloc(n * sizeof(double));
        float *out = malloc(n * sizeof(float));
        TCHECK_STATUS(gem_attn_reference(&s, &in.in, ref, n), GEM_OK);
        TCHECK_STATUS(gem_attn_online(&s, &in.in, 3, out, n), GEM_OK);
        int ok = 1;
        const int64_t group = s.n_q_heads / s.n_kv_heads;
        for (int64_t h = 0; h < s.n_q_heads; h++)
            for (int64_t i = 0; i < s.dv; i++) {
                const double want = (double)(h / group + 1);
                ok &= fabs(ref[h * s.dv + i] - want) < 1e-12;
                ok &= fabs(out[h * s.dv + i] - want) < 1e-5 * want;
            }
        TCHECK(ok);
        free(ref);
        free(out);
        gem_inputs_free(&in);
    }
}

int main(void)
{
    test_partitions_against_reference();
    test_merge_order_and_empty();
    test_invalid_states();
    test_partition_ranges();
    test_gqa_mapping();
    test_results_validated();
    test_score_overflow();
    test_partition_bound();
    return tcheck_summary("test_online");
}
