/*
 * The float online-softmax oracle: partial states over token ranges, their
 * exact merge, finalization, and the fused route's scratch byte contract.
 * This is the reducer every fast route must match. Plain scalar C.
 *
 * A state (M, S, O[dv]) over tokens T means
 *   M = max_{t in T} s_t,  S = sum_{t in T} exp(s_t - M),  O = sum_{t in T} exp(s_t - M) v_t
 * and the empty state (T empty) is (-inf, 0, 0).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gem/attn.h"

gem_status gem_online_state_check(int64_t dv, float m, float s, const float *o)
{
    if (dv < 1)
        return GEM_ERR_PARAM;
    if (!o)
        return GEM_ERR_NULL;
    if (isnan(m) || isnan(s) || !isfinite(s) || s < 0.0f || (isinf(m) && m > 0))
        return GEM_ERR_STATE;
    const int empty_m = isinf(m) != 0; /* only -inf is left */
    if (empty_m != (s == 0.0f))
        return GEM_ERR_STATE; /* S = 0 with finite M, or S > 0 with M = -inf */
    for (int64_t i = 0; i < dv; i++) {
        if (!isfinite(o[i]))
            return GEM_ERR_STATE;
        if (empty_m && o[i] != 0.0f)
            return GEM_ERR_STATE;
    }
    return GEM_OK;
}

gem_status gem_partition_range(int64_t live, int64_t partitions, int64_t p, int64_t *begin,
                               int64_t *end)
{
    if (!begin || !end)
        return GEM_ERR_NULL;
    if (partitions < 1 || p < 0 || p >= partitions || live < 0)
        return GEM_ERR_PARAM;
    /* chunk = ceil(live / P) without overflow; p * chunk is capped at live. */
    const int64_t chunk = live / partitions + (live % partitions != 0);
    int64_t b = live;
    if (chunk == 0 || p <= live / chunk)
        b = chunk == 0 ? 0 : p * chunk; /* p <= live/chunk: no overflow */
    if (b > live)
        b = live;
    int64_t e = (live - b < chunk) ? live : b + chunk;
    *begin = b;
    *end = e;
    return GEM_OK;
}

/* Tokens whose dot products the oracle computes side by side (online_dots). */
#define ONLINE_CHAINS 8
/* Query heads of one KV head whose states the oracle advances together. */
#define ONLINE_HEADS 8

/* out[j] = dot(q, k + j * dk) for j < nt (nt <= ONLINE_CHAINS): each the serial float sum
 * dot += q[i] * k[i], i = 0 .. dk - 1, a product then a sum, both rounded. The nt sums run side
 * by side, element by element, so each is the same chain of operations as alone (the same bits)
 * while the processor overlaps the independent chains. */
static void online_dots(const float *q, const float *k, int64_t dk, int64_t nt, float *out)
{
    if (nt == ONLINE_CHAINS) {
        float d[ONLINE_CHAINS] = {0};
        for (int64_t i = 0; i < dk; i++) {
            const float qi = q[i];
            for (int j = 0; j < ONLINE_CHAINS; j++)
                d[j] += qi * k[(size_t)j * (size_t)dk + (size_t)i];
        }
        memcpy(out, d, sizeof d);
        return;
    }
    for (int64_t j = 0; j < nt; j++) {
        const float *kj = k + (size_t)j * (size_t)dk;
        float dot = 0.0f;
        for (int64_t i = 0; i < dk; i++)
            dot += q[i] * kj[i];
        out[j] = dot;
    }
}

/* Why a score is not finite: a non-finite input, or float overflow. */
static gem_status score_error(const float *q, const float *k, int64_t dk)
{
    for (int64_t i = 0; i < dk; i++)
        if (!isfinite(q[i]) || !isfinite(k[i]))
            return GEM_ERR_NONFINITE;
    return GEM_ERR_SCORE;
}

gem_status gem_online_partial(const gem_attn_shape *shape, const gem_attn_inputs *in,
                              int64_t begin, int64_t end, float *m, float *s,
                              size_t ms_elems, float *o, size_t o_elems)
{
    if (!m || !s)
        return GEM_ERR_NULL;
    gem_status st = gem_attn_check(shape, in, o, o_elems);
    if (st != GEM_OK)
        return st;
    if (begin < 0 || begin > end || end > shape->live)
        return GEM_ERR_RANGE;
    if (ms_elems < (size_t)shape->n_q_heads)
        return GEM_ERR_RANGE;

    const int64_t group = shape->n_q_heads / shape->n_kv_heads;
    const int64_t dk = shape->dk, dv = shape->dv;
    /* Up to ONLINE_HEADS query heads of one KV head at a time, token by token, so that each K
     * and V row is read once for all of them; every head's state sees the same operations in
     * the same order as if it ran alone. */
    for (int64_t h0 = 0, nh = 0; h0 < shape->n_q_heads; h0 += nh) {
        const int64_t g = h0 / group;
        nh = (g + 1) * group - h0 < ONLINE_HEADS ? (g + 1) * group - h0 : ONLINE_HEADS;
        const float *kg = in->k + (size_t)g * (size_t)shape->capacity * (size_t)dk;
        const float *vg = in->v + (size_t)g * (size_t)shape->capacity * (size_t)dv;
        float mh[ONLINE_HEADS], sh[ONLINE_HEADS], dots[ONLINE_HEADS][ONLINE_CHAINS];
        for (int64_t j = 0; j < nh; j++) {
            mh[j] = -INFINITY;
            sh[j] = 0.0f;
            memset(o + (size_t)(h0 + j) * (size_t)dv, 0, (size_t)dv * sizeof(float));
        }
        for (int64_t t0 = begin; t0 < end; t0 += ONLINE_CHAINS) {
            const int64_t nt = end - t0 < ONLINE_CHAINS ? end - t0 : ONLINE_CHAINS;
            const float *k0 = kg + (size_t)t0 * (size_t)dk;
            for (int64_t j = 0; j < nh; j++) /* the next tokens' scores, in order */
                online_dots(in->q + (size_t)(h0 + j) * (size_t)dk, k0, dk, nt, dots[j]);
            for (int64_t u = 0; u < nt; u++) {
                const float *vrow = vg + (size_t)(t0 + u) * (size_t)dv;
                for (int64_t j = 0; j < nh; j++) {
                    float *oh = o + (size_t)(h0 + j) * (size_t)dv;
                    const float x = shape->scale * dots[j][u];
                    if (!isfinite(x))
                        return score_error(in->q + (size_t)(h0 + j) * (size_t)dk,
                                           k0 + (size_t)u * (size_t)dk, dk);
                    if (x > mh[j]) {
                        /* New maximum: rescale what came before (exp(-inf) = 0 at first). */
                        const float alpha = expf(mh[j] - x);
                        sh[j] = sh[j] * alpha + 1.0f;
                        for (int64_t i = 0; i < dv; i++)
                            oh[i] = oh[i] * alpha + vrow[i];
                        mh[j] = x;
                    } else {
                        const float w = expf(x - mh[j]);
                        sh[j] += w;
                        for (int64_t i = 0; i < dv; i++)
                            oh[i] += w * vrow[i];
                    }
                }
            }
        }
        for (int64_t j = 0; j < nh; j++) {
            m[h0 + j] = mh[j];
            s[h0 + j] = sh[j];
        }
    }
    return GEM_OK;
}

gem_status gem_online_merge(int64_t dv, float ma, float sa, const float *oa, float mb, float sb,
                            const float *ob, float *m_out, float *s_out, float *o_out)
{
    if (!m_out || !s_out || !o_out || !oa || !ob)
        return GEM_ERR_NULL;
    gem_status st = gem_online_state_check(dv, ma, sa, oa);
    if (st != GEM_OK)
        return st;
    st = gem_online_state_check(dv, mb, sb, ob);
    if (st != GEM_OK)
        return st;
    /* The empty state is the identity on either side (and avoids -inf - -inf). */
    if (sa == 0.0f || sb == 0.0f) {
        const int take_b = (sa == 0.0f);
        const float *src = take_b ? ob : oa;
        if (src != o_out)
            memmove(o_out, src, (size_t)dv * sizeof(float));
        *m_out = take_b ? mb : ma;
        *s_out = take_b ? sb : sa;
        return GEM_OK;
    }
    const float mm = ma > mb ? ma : mb;
    const float ea = expf(ma - mm), eb = expf(mb - mm);
    const float sm = sa * ea + sb * eb;
    if (!isfinite(sm) || !(sm > 0.0f))
        return GEM_ERR_STATE;
    /* Check every result before writing any: o_out may alias oa or ob. The
     * second pass computes the same expressions, so it writes what was checked. */
    for (int64_t i = 0; i < dv; i++)
        if (!isfinite(oa[i] * ea + ob[i] * eb))
            return GEM_ERR_STATE;
    for (int64_t i = 0; i < dv; i++)
        o_out[i] = oa[i] * ea + ob[i] * eb;
    *s_out = sm;
    *m_out = mm;
    return GEM_OK;
}

gem_status gem_online_finalize(int64_t dv, float m, float s, const float *o, float *out)
{
    if (!out || !o)
        return GEM_ERR_NULL;
    gem_status st = gem_online_state_check(dv, m, s, o);
    if (st != GEM_OK)
        return st;
    if (s == 0.0f)
        return GEM_ERR_STATE; /* the empty state has no softmax */
    for (int64_t i = 0; i < dv; i++)
        if (!isfinite(o[i] / s))
            return GEM_ERR_STATE;
    for (int64_t i = 0; i < dv; i++)
        out[i] = o[i] / s;
    return GEM_OK;
}

gem_status gem_attn_online(const gem_attn_shape *shape, const gem_attn_inputs *in,
                           int64_t partitions, float *out, size_t out_elems)
{
    gem_status st = gem_attn_check(shape, in, out, out_elems);
    if (st != GEM_OK)
        return st;
    if (partitions < 1 || partitions > GEM_MAX_PARTITIONS)
        return GEM_ERR_PARAM;
    st = gem_attn_check_finite(shape, in);
    if (st != GEM_OK)
        return st;

    const int64_t hq = shape->n_q_heads, dv = shape->dv;
    size_t o_elems = (size_t)hq * (size_t)dv; /* fits: out_elems >= it */
    float *acc_m = malloc((size_t)hq * sizeof(float));
    float *acc_s = malloc((size_t)hq * sizeof(float));
    float *pm = malloc((size_t)hq * sizeof(float));
    float *ps = malloc((size_t)hq * sizeof(float));
    float *acc_o = calloc(o_elems, sizeof(float));
    float *po = malloc(o_elems * sizeof(float));
    if (!acc_m || !acc_s || !pm || !ps || !acc_o || !po) {
        st = GEM_ERR_NOMEM;
        goto done;
    }
    for (int64_t h = 0; h < hq; h++) {
        acc_m[h] = -INFINITY;
        acc_s[h] = 0.0f;
    }
    /* Partials in partition order, each merged into the running state. */
    for (int64_t p = 0; p < partitions; p++) {
        int64_t b, e;
        if ((st = gem_partition_range(shape->live, partitions, p, &b, &e)) != GEM_OK)
            goto done;
        if (b == e)
            continue; /* an empty partial is the identity of the merge */
        if ((st = gem_online_partial(shape, in, b, e, pm, ps, (size_t)hq, po, o_elems)) != GEM_OK)
            goto done;
        for (int64_t h = 0; h < hq; h++) {
            float *ao = acc_o + (size_t)h * (size_t)dv;
            st = gem_online_merge(dv, acc_m[h], acc_s[h], ao, pm[h], ps[h],
                                  po + (size_t)h * (size_t)dv, &acc_m[h], &acc_s[h], ao);
            if (st != GEM_OK)
                goto done;
        }
    }
    /* Finalize every head into scratch; write the output only when all succeeded. */
    for (int64_t h = 0; h < hq; h++) {
        st = gem_online_finalize(dv, acc_m[h], acc_s[h], acc_o + (size_t)h * (size_t)dv,
                                 po + (size_t)h * (size_t)dv);
        if (st != GEM_OK)
            goto done;
    }
    memcpy(out, po, o_elems * sizeof(float));
    st = GEM_OK;
done:
    free(acc_m);
    free(acc_s);
    free(pm);
    free(ps);
    free(acc_o);
    free(po);
    return st;
}

gem_status gem_attention_online_scratch_bytes(int64_t partitions, int64_t n_q_heads, int64_t dv,
                                              gem_online_scratch *out)
{
    if (!out)
        return GEM_ERR_NULL;
    if (partitions < 1 || n_q_heads < 1 || dv < 1)
        return GEM_ERR_PARAM;
    if ((uint64_t)partitions > SIZE_MAX || (uint64_t)n_q_heads > SIZE_MAX ||
        (uint64_t)dv > SIZE_MAX)
        return GEM_ERR_OVERFLOW;
    size_t states, maxima, numer_elems, numer, total;
    if (gem_mul_size((size_t)partitions, (size_t)n_q_heads, &states) != GEM_OK ||
        gem_mul_size(states, sizeof(float), &maxima) != GEM_OK ||
        gem_mul_size(states, (size_t)dv, &numer_elems) != GEM_OK ||
        gem_mul_size(numer_elems, sizeof(float), &numer) != GEM_OK ||
        gem_add_size(maxima, maxima, &total) != GEM_OK ||
        gem_add_size(total, numer, &total) != GEM_OK)
        return GEM_ERR_OVERFLOW;
    out->maxima_bytes = maxima;
    out->denominators_bytes = maxima;
    out->numerators_bytes = numer;
    out->total_bytes = total;
    return GEM_OK;
}
