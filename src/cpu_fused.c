/*
 * The fused split-KV route on the CPU (the design's candidate).
 *
 * First pass: one work item per (KV head g, sequence partition p). The item
 * walks its tokens [begin, end) (gem_partition_range) in tiles of T tokens;
 * each tile's K and V rows are read once, while they sit in L1, by all G query
 * heads of the group. Per query head the item keeps the exact online state
 * (M, S, O[dv]) and, per tile:
 *   s_j   = scale * dot(q_h, k_j)                    j < T
 *   M'    = max(M, max_j s_j)
 *   alpha = e^(M - M'),  p_j = e^(s_j - M')
 *   S     = S * alpha + p_0 + p_1 + ...              (in token order)
 *   O     = O * alpha + sum_j p_j v_j                (per element, token order)
 * (the scores token-major, (T, G): cpu_dot_tile_tm, cpu_online_tile and
 * cpu_value_tile, which keep each step's rule bit for bit, run several whole
 * tiles per call and prefetch the rows of a later span while they compute)
 * and writes the state as partition p's partial, partition-major:
 *   maxima (P, n_q_heads), denominators (P, n_q_heads), numerators
 *   (P, n_q_heads, dv): exactly gem_attention_online_scratch_bytes.
 * Second pass: one item per query head merges partials 0..P-1 in that order
 * with the identity of gem_online_merge (merge_into: the same expressions, so
 * the same bits) and writes O/S with gem_online_finalize, which validates the
 * merged state. With one partition and an item for every thread, the first
 * pass's items do this for their own heads (fused_whole_item: one pool run).
 *
 * K and V may each be F32, BF16 or F16: the kernels convert each element
 * exactly as they load it (cpu_kernels.h), so everything after the load is
 * the F32 route, and a 16-bit cache gives the bits its F32 widening gives.
 *
 * K rebuilt from V (kv->k_from_v, Gemma 4's K = V layers): the item builds each
 * span's K rows in F32 before the scores, from the V rows it is about to weight,
 * as the model computes a K row from its projection:
 *   a[i] = k_weight[i] * v[i]                               (float)
 *   K[j] = (float)(a[j] c_j - a[j+half] s_j), K[j+half] = (float)(a[j] s_j + a[j+half] c_j)
 * with the products and sums in double, for j < n_pairs; c_j, s_j = cos, sin of
 * (pos0 + t) * inv_freq[j], exact at the item's first token and stepped by the
 * angle-addition rule in double token by token (drift below 1e-12 over any
 * partition, far under F32's rounding). Then the route runs unchanged on those rows.
 *
 * Every item's arithmetic depends only on (g, p) or h, never on the thread
 * that runs it, so the output is bitwise the same for any thread count.
 */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_routes.h"
#include "kv_view.h"

#ifndef PF_TOKENS
/* How far ahead the kernels prefetch: one span, and at least this many
 * tokens (32: 128 KiB of K and V per item; 8, 16 and 64 were slower). */
#define PF_TOKENS 32
#endif
#define SPAN_TOKENS CPU_SPAN_TOKENS

typedef struct fused_job {
    const float *q;   /* (n_q_heads, dk) */
    const char *k;    /* K element (g, t, i) at element g*k_hs + t*k_ts + i of type kt */
    const char *v;    /* V element (g, t, i) at element g*v_hs + t*v_ts + i of type vt */
    gem_dtype kt, vt;
    int64_t k_es, v_es; /* bytes per K / V element */
    float *pm;        /* (P, n_q_heads) maxima */
    float *ps;        /* (P, n_q_heads) denominators */
    float *po;        /* (P, n_q_heads, dv) numerators */
    float *out;       /* (n_q_heads, dv), or NULL when the state is written */
    float *state;     /* NULL, or GEM_DECODE_STATE_FLOATS(n_q_heads, dv): m, s, o */
    float *ws;        /* (threads, ws_stride) */
    float *kfv_ws;    /* (threads, kfv_stride): rotation state and a span of K rows */
    const gem_k_from_v *kfv; /* NULL: K read from k */
    int64_t kfv_stride;
    gem_status *status; /* (items) */
    int64_t ws_stride, n_q, n_kv, group, dk, dv, live, partitions, tile;
    int64_t k_hs, k_ts, v_hs, v_ts;
    float scale;
    const gem_kv_view *kv; /* the view, for its FP8 heads' scales (gem_kv_head_scale) */
} fused_job;

/* One K row rebuilt from its V row in place (r: the V row as floats, dk), the rule of the
 * file comment; then c, s step to the next token's angle. w (dk), c, s, c1, s1 (n_pairs). */
static void kfv_row(const float *restrict w, float *restrict r, int64_t dk, int64_t half,
                    int64_t np, double *restrict c, double *restrict s,
                    const double *restrict c1, const double *restrict s1)
{
    for (int64_t i = 0; i < dk; i++)
        r[i] = w[i] * r[i];
    for (int64_t i = 0; i < np; i++) {
        const double a = r[i], b = r[i + half], ci = c[i], si = s[i];
        r[i] = (float)(a * ci - b * si);
        r[i + half] = (float)(a * si + b * ci);
        c[i] = ci * c1[i] - si * s1[i]; /* the next token's angle */
        s[i] = si * c1[i] + ci * s1[i];
    }
}

static void fused_partial_item(void *ctx, int64_t item, int64_t thread)
{
    const fused_job *j = ctx;
    const int64_t g = item % j->n_kv, p = item / j->n_kv;
    const int64_t G = j->group, T = j->tile, dk = j->dk, dv = j->dv;
    const int64_t h0 = g * G;
    int64_t begin = 0, end = 0;
    gem_status st = gem_partition_range(j->live, j->partitions, p, &begin, &end);
    if (st != GEM_OK) {
        j->status[item] = st;
        return;
    }
    /* The kernels run a span of k whole tiles at once (S = k*T tokens, about
     * SPAN_TOKENS, as the thread's temporaries allow): the scores of the span
     * in one call, the softmax step tile by tile, the value update of the span
     * in one call that applies each tile's alpha before its tokens. The
     * arithmetic is that of one tile at a time (the same bits for any k); the
     * O accumulators stay in registers across the span. */
    int64_t k = T < SPAN_TOKENS ? SPAN_TOKENS / T : 1;
    const int64_t fit = (j->ws_stride - 2 * G) / (G * (T + 1)); /* >= 1: see reserve */
    k = k < fit ? k : fit;
    const int64_t S = k * T;
    float *sc = j->ws + thread * j->ws_stride; /* (S, G) scores, then weights */
    float *alpha = sc + G * S;                 /* (k, G) */
    float *m = alpha + G * k;                  /* (G) */
    float *s = m + G;                          /* (G) */
    float *o = j->po + (p * j->n_q + h0) * dv; /* (G, dv) this partition's numerators */
    for (int64_t hh = 0; hh < G; hh++) {
        m[hh] = -INFINITY;
        s[hh] = 0.0f;
    }
    memset(o, 0, (size_t)(G * dv) * sizeof(float));
    /* K rebuilt from V: the rotation at the first token, its per-token step, a span of rows */
    const gem_k_from_v *kfv = j->kfv;
    double *rc = NULL, *rs = NULL, *rc1 = NULL, *rs1 = NULL;
    float *krows = NULL; /* (S, dk) */
    if (kfv) {
        const int64_t np = kfv->n_pairs, hh2 = dk / 2;
        rc = (double *)(void *)(j->kfv_ws + thread * j->kfv_stride);
        rs = rc + hh2;
        rc1 = rs + hh2;
        rs1 = rc1 + hh2;
        krows = (float *)(void *)(rs1 + hh2);
        const double pos = (double)(kfv->pos0 + begin); /* exact: below 2^40 */
        for (int64_t i = 0; i < np; i++) {
            rc[i] = cos(pos * kfv->inv_freq[i]);
            rs[i] = sin(pos * kfv->inv_freq[i]);
            rc1[i] = cos(kfv->inv_freq[i]);
            rs1[i] = sin(kfv->inv_freq[i]);
        }
    }

    const float *qg = j->q + h0 * dk;
    /* FP8 K (or V rebuilding K): the head's scale joins the score's (scale itself otherwise) */
    const float scale = (float)((double)j->scale * gem_kv_head_scale(j->kv, 0, g));
    /* byte offsets: within the view's extent, which fits int64 (gem_kv_view_check) */
    const char *kg = j->k + g * j->k_hs * j->k_es;
    const char *vg = j->v + g * j->v_hs * j->v_es;
    const int64_t ks = j->k_ts, vs = j->v_ts, kb = ks * j->k_es, vb = vs * j->v_es;
    for (int64_t t0 = begin; t0 < end; t0 += S) {
        const int64_t n = end - t0 < S ? end - t0 : S;
        /* The kernels prefetch the S rows max(S, PF_TOKENS) tokens ahead
         * (within this partition) into L2, spread over their FMAs: the
         * hardware streams alone left the core waiting at the first touch of
         * each tile. */
        const int64_t a0 = t0 + (S > PF_TOKENS ? S : PF_TOKENS);
        const int64_t pn = a0 < end ? (end - a0 < S ? end - a0 : S) : 0;
        const char *pk = pn ? kg + a0 * kb : NULL, *pv = pn ? vg + a0 * vb : NULL;
        /* K rows of the span: from the cache, or rebuilt from V into krows */
        const void *kt0 = kg + t0 * kb;
        gem_dtype ktype = j->kt;
        int64_t kstride = ks;
        if (kfv) {
            for (int64_t u = 0; u < n; u++) {
                float *r = krows + u * dk;
                cpu_widen(vg + (t0 + u) * vb, j->vt, dk, r);
                kfv_row(kfv->k_weight, r, dk, kfv->half, kfv->n_pairs, rc, rs, rc1, rs1);
            }
            kt0 = krows;
            ktype = GEM_DTYPE_F32;
            kstride = dk;
            pk = NULL; /* V is prefetched by the value update */
        }
        cpu_dot_tile_tm(qg, G, kt0, ktype, kstride, n, dk, sc, G, pk, pk ? pn : 0);
        for (int64_t u = 0; u < n; u += T) /* tile by tile, in token order */
            if (cpu_online_tile(sc + u * G, n - u < T ? n - u : T, G, scale, m, s,
                                alpha + (u / T) * G) != 0) {
                /* a non-finite input, or a score that overflowed float */
                j->status[item] = cpu_score_status(
                    qg, G, (const char *)kt0 + u * kstride * (int64_t)gem_dtype_size(ktype),
                    ktype, kstride, n - u < T ? n - u : T, dk);
                return;
            }
        cpu_value_tile(o, G, dv, T, alpha, sc, vg + t0 * vb, j->vt, n, vs, pv, pn);
    }
    for (int64_t hh = 0; hh < G; hh++) {
        j->pm[p * j->n_q + h0 + hh] = m[hh];
        j->ps[p * j->n_q + h0 + hh] = s[hh];
    }
    j->status[item] = GEM_OK;
}

/* The merge identity of gem_online_merge for an accumulated state (m, s, o)
 * and partial b, written out so the partials need no second pass:
 *   M = max(m, Mb), S = s e^(m-M) + Sb e^(Mb-M), O = o e^(m-M) + Ob e^(Mb-M)
 * with an empty state (S = 0) the identity on either side. The same
 * expressions as gem_online_merge (same libm expf, same operation order), so
 * the result is the same bits. The partial's scalars are validated here; a
 * non-finite numerator propagates to the output, where gem_online_finalize
 * rejects it. o (dv), ob (dv). */
static gem_status merge_into(int64_t dv, float *m, float *s, float *o, float mb, float sb,
                             const float *ob)
{
    const int empty_b = (mb == -INFINITY && sb == 0.0f);
    const int valid_b = empty_b || (isfinite(mb) && isfinite(sb) && sb > 0.0f);
    if (!valid_b)
        return GEM_ERR_STATE;
    if (empty_b)
        return GEM_OK;
    if (*s == 0.0f) {
        memcpy(o, ob, (size_t)dv * sizeof(float));
        *m = mb;
        *s = sb;
        return GEM_OK;
    }
    const float mm = *m > mb ? *m : mb;
    const float ea = expf(*m - mm), eb = expf(mb - mm);
    for (int64_t i = 0; i < dv; i++)
        o[i] = o[i] * ea + ob[i] * eb;
    *s = *s * ea + sb * eb;
    *m = mm;
    return GEM_OK;
}

/* Query head h's partials merged in partition order and divided (or its state written);
 * thread's temporaries hold the sum. */
static gem_status fused_merge_head(const fused_job *j, int64_t h, int64_t thread)
{
    const int64_t dv = j->dv, nq = j->n_q;
    float *acc = j->ws + thread * j->ws_stride; /* (dv) */
    float am = -INFINITY, as = 0.0f;
    memset(acc, 0, (size_t)dv * sizeof(float));
    gem_status st = GEM_OK;
    for (int64_t p = 0; p < j->partitions && st == GEM_OK; p++)
        st = merge_into(dv, &am, &as, acc, j->pm[p * nq + h], j->ps[p * nq + h],
                        j->po + (p * nq + h) * dv);
    if (st == GEM_OK && j->state) { /* the state before the division (FP8 V: o scaled) */
        float *so = j->state + 2 * nq + h * dv;
        const float sv = j->kv->v_scale ? j->kv->v_scale[h / j->group] : 1.0f;
        for (int64_t i = 0; i < dv; i++)
            so[i] = acc[i] * sv; /* exact for sv = 1 */
        j->state[h] = am;
        j->state[nq + h] = as;
        return gem_online_state_check(dv, am, as, so);
    }
    if (st == GEM_OK)
        st = gem_online_finalize(dv, am, as, acc, j->out + h * dv);
    if (st == GEM_OK && j->kv->v_scale) { /* FP8 V: the head's scale, after the division */
        const float sv = j->kv->v_scale[h / j->group];
        for (int64_t i = 0; i < dv; i++)
            j->out[h * dv + i] *= sv;
    }
    return st;
}

static void fused_merge_item(void *ctx, int64_t h, int64_t thread)
{
    const fused_job *j = ctx;
    j->status[h] = fused_merge_head(j, h, thread);
}

/* One partition (P = 1) and at least one item a thread: item g computes group g's partial
 * (status[g]) and then merges and divides its G heads in head order (the first error in
 * status[n_kv + g]), the arithmetic of the two pool runs (the same bits). The statuses are
 * read partials first, then merges, so the call reports what the two runs would. Needs 2 n_kv
 * statuses (the layout has n_q: G >= 2).
 * dev/cpu/small_live, run 167 (the Xeon host, 16 threads): a sliding layer's call at live 64
 * (16 KV heads, D256) 14.7 -> 12.5 us with its rows hot, 22.6 -> 19.7 cold, the second run's
 * dispatch saved; with fewer items than threads (4 KV heads of D512 at one partition) the
 * merges' divisions, spread over 16 threads by the second run, took longer in 4 (26.2 -> 34.7
 * us), so such a call keeps the two runs. Asking for the first span's V rows before its
 * scores was slower at every shape (up to 19 us at live 1,024) and was dropped. */
static void fused_whole_item(void *ctx, int64_t g, int64_t thread)
{
    const fused_job *j = ctx;
    fused_partial_item(ctx, g, thread);
    gem_status st = GEM_OK;
    if (j->status[g] == GEM_OK)
        for (int64_t hh = 0; hh < j->group && st == GEM_OK; hh++)
            st = fused_merge_head(j, g * j->group + hh, thread);
    j->status[j->n_kv + g] = st;
}

gem_status cpu_route_fused(const cpu_run *r, const gem_decode_shape *shape, const float *q,
                           const gem_kv_view *kv, const gem_decode_config *cfg, float *out,
                           float *state)
{
    const int64_t P = cfg->partitions, nq = shape->n_q_heads;
    if (P < 1 || cfg->tile < 1 || (kv->k_from_v && !r->kfv))
        return GEM_ERR_PARAM;
    fused_job j = {
        .q = q, .k = kv->k, .v = kv->v, .kt = kv->k_dtype, .vt = kv->v_dtype,
        .k_es = (int64_t)gem_dtype_size(kv->k_dtype), .v_es = (int64_t)gem_dtype_size(kv->v_dtype),
        .out = out, .state = state, .ws = r->ws, .status = r->status,
        .kfv_ws = r->kfv, .kfv = kv->k_from_v, .kfv_stride = r->kfv_stride,
        .ws_stride = r->ws_stride, .n_q = nq, .n_kv = shape->n_kv_heads,
        .group = nq / shape->n_kv_heads, .dk = shape->dk, .dv = shape->dv,
        .live = kv->live, .partitions = P, .tile = cfg->tile,
        .k_hs = kv->k_head_stride, .k_ts = kv->k_token_stride,
        .v_hs = kv->v_head_stride, .v_ts = kv->v_token_stride, .scale = shape->scale, .kv = kv,
    };
    j.pm = r->scratch;
    j.ps = j.pm + P * nq;
    j.po = j.ps + P * nq;
    const int64_t items = shape->n_kv_heads * P;
    if (P == 1 && items >= r->threads && 2 * items <= r->status_count) {
        cpu_pool_run(r->pool, items, fused_whole_item, &j);
        const gem_status st = cpu_first_error(r->status, items);
        return st != GEM_OK ? st : cpu_first_error(r->status + items, items);
    }
    cpu_pool_run(r->pool, items, fused_partial_item, &j);
    gem_status st = cpu_first_error(r->status, items);
    if (st != GEM_OK)
        return st;
    cpu_pool_run(r->pool, nq, fused_merge_item, &j);
    return cpu_first_error(r->status, nq);
}

/* ---- gem_decode_merge ----------------------------------------------------------------- */

typedef struct merge_job {
    const float *states; /* (n, nq * (dv + 2)) */
    float *out;          /* (nq, dv) */
    gem_status *status;  /* (chunk) for heads h0 .. h0 + chunk - 1 */
    int64_t n, nq, dv, h0;
} merge_job;

/* Head h0 + i: states 0 .. n-1 merged into out's row in index order (merge_into, the fused
 * route's merge), then divided in place (gem_online_finalize reads each element before it
 * writes it). */
static void merge_states_item(void *ctx, int64_t i, int64_t thread)
{
    (void)thread;
    const merge_job *j = ctx;
    const int64_t h = j->h0 + i, nq = j->nq, dv = j->dv, ss = nq * (dv + 2);
    float *acc = j->out + h * dv;
    float am = -INFINITY, as = 0.0f;
    memset(acc, 0, (size_t)dv * sizeof(float));
    gem_status st = GEM_OK;
    for (int64_t p = 0; p < j->n && st == GEM_OK; p++) {
        const float *sp = j->states + p * ss;
        const float *op = sp + 2 * nq + h * dv;
        /* merge_into checks the scalars; the numerators are checked here so that a
         * non-finite one is the state's error, not the division's */
        st = gem_online_state_check(dv, sp[h], sp[nq + h], op);
        if (st == GEM_OK)
            st = merge_into(dv, &am, &as, acc, sp[h], sp[nq + h], op);
    }
    if (st == GEM_OK)
        st = gem_online_finalize(dv, am, as, acc, acc);
    j->status[i] = st;
}

gem_status cpu_merge_states(cpu_pool *pool, const gem_decode_shape *shape, const float *states,
                            int64_t n, float *out)
{
    enum { CHUNK = 256 }; /* heads per pool run: the statuses live on the stack */
    gem_status status[CHUNK];
    merge_job j = {.states = states, .out = out, .status = status, .n = n,
                   .nq = shape->n_q_heads, .dv = shape->dv};
    for (int64_t h0 = 0; h0 < j.nq; h0 += CHUNK) {
        const int64_t c = j.nq - h0 < CHUNK ? j.nq - h0 : CHUNK;
        j.h0 = h0;
        cpu_pool_run(pool, c, merge_states_item, &j);
        gem_status st = cpu_first_error(status, c);
        if (st != GEM_OK)
            return st;
    }
    return GEM_OK;
}
