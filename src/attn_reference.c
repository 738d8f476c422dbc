/*
 * The double-precision reference: direct softmax over F32 inputs, every
 * operation in double. Plain scalar C, written to be read against the math:
 *
 *   s[h,t]   = scale * sum_i q[h,i] k[g,t,i]            g = h / group
 *   m[h]     = max_t s[h,t]
 *   out[h,:] = sum_t exp(s[h,t] - m[h]) v[g,t,:] / sum_t exp(s[h,t] - m[h])
 *
 * Loops run KV head by KV head so each K and V row is read once for all the
 * query heads that share it. Rows come through a KV view (any layout; BF16 and
 * F16 elements converted to float exactly; FP8 elements times their head's scale in
 * double, exactly: 4 significant bits times 24). A view whose K is rebuilt from V
 * (gem_k_from_v) gets its K rows in double from the stored V: k_weight * V, then
 * the rotation with cos and sin in double (gem_k_from_v_row_f64).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gem/attn.h"
#include "kv_view.h"

/* Dot product of two F32 vectors in double. Eight interleaved partial sums in
 * a fixed order: deterministic, and short dependency chains for speed. */
static double dot_f64(const float *a, const float *b, int64_t n)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += (double)a[i + j] * (double)b[i + j];
    for (; i < n; i++)
        acc[i % 8] += (double)a[i] * (double)b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

gem_status gem_attn_reference_kv(const gem_decode_shape *shape, const float *q,
                                 const gem_kv_view *kv, double *out, size_t out_elems)
{
    if (!shape || !q || !kv || !out)
        return GEM_ERR_NULL;
    gem_status st = gem_decode_shape_check(shape);
    if (st == GEM_OK)
        st = gem_kv_view_check(kv, shape->n_kv_heads, shape->dk, shape->dv, NULL, NULL);
    if (st == GEM_OK)
        st = gem_kv_view_scales_check(kv, shape->n_kv_heads);
    if (st != GEM_OK)
        return st;
    const int64_t hq = shape->n_q_heads, hkv = shape->n_kv_heads, group = hq / hkv;
    const int64_t dk = shape->dk, dv = shape->dv, live = kv->live;
    size_t q_elems = 0, o_elems = 0, score_bytes = 0, acc_elems = 0, row_elems = 0;
    if (gem_mul_size((size_t)hq, (size_t)dk, &q_elems) != GEM_OK ||
        gem_mul_size((size_t)hq, (size_t)dv, &o_elems) != GEM_OK ||
        gem_mul_size((size_t)group, (size_t)live, &score_bytes) != GEM_OK ||
        gem_mul_size(score_bytes, sizeof(double), &score_bytes) != GEM_OK ||
        gem_mul_size((size_t)group, (size_t)dv, &acc_elems) != GEM_OK)
        return GEM_ERR_OVERFLOW;
    if (out_elems < o_elems)
        return GEM_ERR_RANGE;
    if ((uintptr_t)q % sizeof(float) != 0 || (uintptr_t)out % sizeof(double) != 0)
        return GEM_ERR_ALIGN;
    for (size_t i = 0; i < q_elems; i++)
        if (!isfinite(q[i]))
            return GEM_ERR_NONFINITE;
    const gem_k_from_v *kfv = kv->k_from_v;
    if (kfv) {
        if ((st = gem_k_from_v_check(kfv)) != GEM_OK)
            return st;
        for (int64_t i = 0; i < dk; i++)
            if (!isfinite(kfv->k_weight[i]))
                return GEM_ERR_NONFINITE;
    }
    row_elems = (size_t)(dk > dv ? dk : dv);
    double *score = malloc(score_bytes);               /* (group, live) */
    double *acc = malloc(acc_elems * sizeof(double));  /* (group, dv), fits: out fits */
    float *row = malloc(row_elems * sizeof(float));    /* (max(dk, dv)) one converted row */
    double *krow = malloc(row_elems * sizeof(double)); /* (dk) K rebuilt from V */
    if (!score || !acc || !row || !krow) {
        free(score);
        free(acc);
        free(row);
        free(krow);
        return GEM_ERR_NOMEM;
    }
    st = GEM_OK;
    for (int64_t g = 0; g < hkv && st == GEM_OK; g++) {
        /* the head's FP8 scales (1 otherwise); K rebuilt from V has V's in krow */
        const double sk = kfv ? 1.0 : gem_kv_head_scale(kv, 0, g);
        const double sv = gem_kv_head_scale(kv, 1, g);
        /* Scores of the group's query heads; each K row read once. */
        for (int64_t t = 0; t < live && st == GEM_OK; t++) {
            if (kfv)
                gem_k_from_v_row_f64(kv, g, t, dk, row, krow);
            else
                gem_kv_row_f32(kv, 0, g, t, dk, row);
            for (int64_t i = 0; i < dk; i++)
                if (!isfinite(row[i]))
                    st = GEM_ERR_NONFINITE;
            for (int64_t j = 0; j < group; j++) {
                const float *qh = q + (size_t)(g * group + j) * (size_t)dk;
                double d = 0.0;
                if (kfv)
                    for (int64_t i = 0; i < dk; i++)
                        d += (double)qh[i] * krow[i];
                else
                    d = dot_f64(qh, row, dk) * sk; /* sk factored out of the sum */
                score[(size_t)j * (size_t)live + (size_t)t] = (double)shape->scale * d;
            }
        }
        if (st != GEM_OK)
            break;
        /* Max, then weights exp(s - max) in place. */
        for (int64_t j = 0; j < group; j++) {
            double *sj = score + (size_t)j * (size_t)live;
            double m = -INFINITY;
            for (int64_t t = 0; t < live; t++)
                m = sj[t] > m ? sj[t] : m;
            for (int64_t t = 0; t < live; t++)
                sj[t] = exp(sj[t] - m);
        }
        /* Weighted V sum; each V row read once for the group. */
        memset(acc, 0, acc_elems * sizeof(double));
        for (int64_t t = 0; t < live && st == GEM_OK; t++) {
            gem_kv_row_f32(kv, 1, g, t, dv, row);
            for (int64_t i = 0; i < dv; i++)
                if (!isfinite(row[i]))
                    st = GEM_ERR_NONFINITE;
            for (int64_t j = 0; j < group; j++) {
                const double w = score[(size_t)j * (size_t)live + (size_t)t];
                double *aj = acc + (size_t)j * (size_t)dv;
                for (int64_t i = 0; i < dv; i++)
                    aj[i] += w * (double)row[i];
            }
        }
        if (st != GEM_OK)
            break;
        for (int64_t j = 0; j < group; j++) {
            const double *sj = score + (size_t)j * (size_t)live;
            double sum = 0.0;
            for (int64_t t = 0; t < live; t++)
                sum += sj[t];
            double *oh = out + (size_t)(g * group + j) * (size_t)dv;
            const double *aj = acc + (size_t)j * (size_t)dv;
            for (int64_t i = 0; i < dv; i++)
                oh[i] = aj[i] / sum * sv; /* sv factored out of the sum */
        }
    }
    free(score);
    free(acc);
    free(row);
    free(krow);
    return st;
}

gem_status gem_attn_reference(const gem_attn_shape *shape, const gem_attn_inputs *in,
                              double *out, size_t out_elems)
{
    gem_status st = gem_attn_check(shape, in, out, out_elems);
    if (st != GEM_OK)
        return st;
    st = gem_attn_check_finite(shape, in);
    if (st != GEM_OK)
        return st;
    const gem_decode_shape ds = {shape->n_q_heads, shape->n_kv_heads, shape->dk, shape->dv,
                                 shape->scale};
    const gem_kv_view kv =
        gem_kv_view_dense(in->k, in->v, shape->dk, shape->dv, shape->live, shape->capacity);
    return gem_attn_reference_kv(&ds, in->q, &kv, out, out_elems);
}
