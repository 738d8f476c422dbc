/*
 * The double-precision reference: direct softmax over F32 inputs, every
 * operation in double. Plain scalar C, written to be read against the math:
 *
 *   s[h,t]   = scale * sum_i q[h,i] k[g,t,i]            g = h / group
 *   m[h]     = max_t s[h,t]
 *   out[h,:] = sum_t exp(s[h,t] - m[h]) v[g,t,:] / sum_t exp(s[h,t] - m[h])
 *
 * Loops run KV head by KV head so each K and V row is read once for all the
 * query heads that share it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gem/attn.h"

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

gem_status gem_attn_reference(const gem_attn_shape *shape, const gem_attn_inputs *in,
                              double *out, size_t out_elems)
{
    gem_status st = gem_attn_check(shape, in, out, out_elems);
    if (st != GEM_OK)
        return st;
    st = gem_attn_check_finite(shape, in);
    if (st != GEM_OK)
        return st;

    const int64_t hq = shape->n_q_heads, hkv = shape->n_kv_heads, group = hq / hkv;
    const int64_t dk = shape->dk, dv = shape->dv, live = shape->live, cap = shape->capacity;
    size_t score_elems, acc_elems;
    if (gem_mul_size((size_t)group, (size_t)live, &score_elems) != GEM_OK ||
        gem_mul_size(score_elems, sizeof(double), &score_elems) != GEM_OK ||
        gem_mul_size((size_t)group, (size_t)dv, &acc_elems) != GEM_OK)
        return GEM_ERR_OVERFLOW;
    double *score = malloc(score_elems);            /* (group, live) */
    double *acc = malloc(acc_elems * sizeof(double)); /* (group, dv), fits: out fits */
    if (!score || !acc) {
        free(score);
        free(acc);
        return GEM_ERR_NOMEM;
    }

    for (int64_t g = 0; g < hkv; g++) {
        const float *kg = in->k + (size_t)g * (size_t)cap * (size_t)dk;
        const float *vg = in->v + (size_t)g * (size_t)cap * (size_t)dv;
        /* Scores of the group's query heads; each K row read once. */
        for (int64_t t = 0; t < live; t++) {
            const float *krow = kg + (size_t)t * (size_t)dk;
            for (int64_t j = 0; j < group; j++) {
                const float *qh = in->q + (size_t)(g * group + j) * (size_t)dk;
                score[(size_t)j * (size_t)live + (size_t)t] =
                    (double)shape->scale * dot_f64(qh, krow, dk);
            }
        }
        /* Max, then weights exp(s - max) in place, then their sum. */
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
        for (int64_t t = 0; t < live; t++) {
            const float *vrow = vg + (size_t)t * (size_t)dv;
            for (int64_t j = 0; j < group; j++) {
                const double w = score[(size_t)j * (size_t)live + (size_t)t];
                double *aj = acc + (size_t)j * (size_t)dv;
                for (int64_t i = 0; i < dv; i++)
                    aj[i] += w * (double)vrow[i];
            }
        }
        for (int64_t j = 0; j < group; j++) {
            const double *sj = score + (size_t)j * (size_t)live;
            double sum = 0.0;
            for (int64_t t = 0; t < live; t++)
                sum += sj[t];
            double *oh = out + (size_t)(g * group + j) * (size_t)dv;
            const double *aj = acc + (size_t)j * (size_t)dv;
            for (int64_t i = 0; i < dv; i++)
                oh[i] = aj[i] / sum;
        }
    }
    free(score);
    free(acc);
    return GEM_OK;
}
