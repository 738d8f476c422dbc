/*
 * The three-stage baseline route on the CPU, mirroring the design's
 * selector 19 stage for stage:
 *   1. score:     one item per (KV head, 256-token chunk); each K row is read
 *                 once for all G query heads of its KV head and
 *                 scores[h][t] = scale * dot(q_h, k_t) is written
 *                 (n_q_heads * live F32: 32*live*4 bytes).
 *   2. normalize: one item per query head: a max pass, an exponentiation pass
 *                 that also sums (lane rule), a scaling pass (p / sum).
 *   3. value:     one item per (KV head, 32-wide dimension tile, value
 *                 partition) (1,024 items at 4 KV heads, D512, 16 partitions);
 *                 each reads the normalized score rows of its G heads and its
 *                 tile of V and writes a partial (VP, n_q_heads, dv).
 *   4. reduce:    one item per query head sums the VP partials in order 0..VP-1
 *                 and checks that its output is finite (GEM_ERR_STATE if not).
 * K and V may each be F32, BF16 or F16; the kernels convert each element
 * exactly as they load it (cpu_kernels.h).
 * Items depend only on their indices, never on the thread, so the output is
 * bitwise the same for any thread count. With a stage clock in the run
 * (decode_stage_clock.h) the monotonic clock is read between the stages; the
 * stages themselves do not change.
 */
#include <float.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "cpu_kernels.h"
#include "cpu_routes.h"
#include "kv_view.h"
#include "gem/cpu.h"

#define SCORE_CHUNK 256 /* tokens per score item */
#define EXP_CHUNK 256   /* elements per exponentiation step, a multiple of 16 */

gem_status gem_baseline_scratch_bytes(int64_t live, int64_t n_q_heads, int64_t dv,
                                      int64_t value_partitions, gem_baseline_scratch *out)
{
    if (!out)
        return GEM_ERR_NULL;
    if (live < 1 || n_q_heads < 1 || dv < 1 || value_partitions < 1)
        return GEM_ERR_PARAM;
    size_t scores = 0, partials = 0, total = 0;
    gem_status st = gem_mul_size((size_t)n_q_heads, (size_t)live, &scores);
    if (st == GEM_OK)
        st = gem_mul_size(scores, sizeof(float), &scores);
    if (st == GEM_OK)
        st = gem_mul_size((size_t)value_partitions, (size_t)n_q_heads, &partials);
    if (st == GEM_OK)
        st = gem_mul_size(partials, (size_t)dv, &partials);
    if (st == GEM_OK)
        st = gem_mul_size(partials, sizeof(float), &partials);
    if (st == GEM_OK)
        st = gem_add_size(scores, partials, &total);
    if (st != GEM_OK)
        return st;
    out->scores_bytes = scores;
    out->partials_bytes = partials;
    out->total_bytes = total;
    return GEM_OK;
}

typedef struct baseline_job {
    const float *q;     /* (n_q_heads, dk) */
    const char *k;      /* K element (g, t, i) at element g*k_hs + t*k_ts + i of type kt */
    const char *v;      /* V element (g, t, i) at element g*v_hs + t*v_ts + i of type vt */
    gem_dtype kt, vt;
    int64_t k_es, v_es; /* bytes per K / V element */
    float *scores;      /* (n_q_heads, live) */
    float *partials;    /* (VP, n_q_heads, dv) */
    float *out;         /* (n_q_heads, dv) */
    float *ws;          /* (threads, ws_stride) */
    gem_status *status; /* (items) */
    int64_t ws_stride, n_q, n_kv, group, dk, dv, live, vparts, dim_tiles;
    int64_t k_hs, k_ts, v_hs, v_ts;
    float scale;
    const gem_kv_view *kv; /* the view, for its FP8 heads' scales (gem_kv_head_scale) */
} baseline_job;

static void score_item(void *ctx, int64_t item, int64_t thread)
{
    (void)thread;
    const baseline_job *j = ctx;
    const int64_t g = item % j->n_kv, chunk = item / j->n_kv;
    const int64_t begin = chunk * SCORE_CHUNK;
    const int64_t end = begin + SCORE_CHUNK < j->live ? begin + SCORE_CHUNK : j->live;
    const int64_t h0 = g * j->group, dk = j->dk;
    const char *kg = j->k + g * j->k_hs * j->k_es; /* within the view's extent */
    float *rows = j->scores + h0 * j->live;         /* (G, live) */
    /* FP8 K: the head's scale joins the score's (the same float as scale otherwise) */
    const float scale = (float)((double)j->scale * gem_kv_head_scale(j->kv, 0, g));
    for (int64_t t0 = begin; t0 < end; t0 += 4) {
        const int64_t n = end - t0 < 4 ? end - t0 : 4;
        cpu_dot_tile(j->q + h0 * dk, j->group, kg + t0 * j->k_ts * j->k_es, j->kt, j->k_ts, n, dk,
                     rows + t0, j->live);
    }
    for (int64_t hh = 0; hh < j->group; hh++) {
        float *r = rows + hh * j->live;
        for (int64_t t = begin; t < end; t++) {
            const float s = scale * r[t];
            if (!(fabsf(s) <= FLT_MAX)) {
                /* a non-finite input, or a score that overflowed float */
                j->status[item] = cpu_score_status(j->q + (h0 + hh) * dk, 1,
                                                   kg + t * j->k_ts * j->k_es, j->kt, j->k_ts,
                                                   1, dk);
                return;
            }
            r[t] = s;
        }
    }
    j->status[item] = GEM_OK;
}

static void normalize_item(void *ctx, int64_t h, int64_t thread)
{
    (void)thread;
    const baseline_job *j = ctx;
    const int64_t live = j->live;
    float *r = j->scores + h * live;
    const float mx = cpu_max(r, live);
    /* exponentiate in place and sum with the lane rule (element t to lane t % 16) */
    float lanes[CPU_LANES] = {0};
    for (int64_t t0 = 0; t0 < live; t0 += EXP_CHUNK) {
        const int64_t n = live - t0 < EXP_CHUNK ? live - t0 : EXP_CHUNK;
        for (int64_t t = 0; t < n; t++)
            r[t0 + t] -= mx;
        cpu_exp(r + t0, r + t0, n);
        int64_t t = 0;
        for (; t + CPU_LANES <= n; t += CPU_LANES)
            for (int l = 0; l < CPU_LANES; l++)
                lanes[l] += r[t0 + t + l];
        for (int l = 0; t + l < n; l++)
            lanes[l] += r[t0 + t + l];
    }
    const float total = cpu_sum(lanes, CPU_LANES);
    if (!(total > 0.0f) || !(total <= FLT_MAX)) {
        j->status[h] = GEM_ERR_STATE; /* cannot happen: the max term is e^0 = 1 */
        return;
    }
    for (int64_t t = 0; t < live; t++)
        r[t] /= total;
    j->status[h] = GEM_OK;
}

static void value_item(void *ctx, int64_t item, int64_t thread)
{
    const baseline_job *j = ctx;
    const int64_t g = item % j->n_kv;
    const int64_t dt = (item / j->n_kv) % j->dim_tiles;
    const int64_t sp = item / (j->n_kv * j->dim_tiles);
    const int64_t G = j->group, dv = j->dv, h0 = g * G;
    const int64_t d0 = dt * GEM_BASELINE_DIM_TILE;
    const int64_t w = dv - d0 < GEM_BASELINE_DIM_TILE ? dv - d0 : GEM_BASELINE_DIM_TILE;
    int64_t begin = 0, end = 0;
    gem_status st = gem_partition_range(j->live, j->vparts, sp, &begin, &end);
    if (st != GEM_OK) {
        j->status[item] = st;
        return;
    }
    float *acc = j->ws + thread * j->ws_stride; /* (G, w) */
    memset(acc, 0, (size_t)(G * w) * sizeof(float));
    cpu_weighted_rows(j->scores + h0 * j->live + begin, j->live, G,
                      j->v + (g * j->v_hs + begin * j->v_ts + d0) * j->v_es, j->vt, j->v_ts,
                      end - begin, w, acc);
    for (int64_t hh = 0; hh < G; hh++)
        memcpy(j->partials + (sp * j->n_q + h0 + hh) * dv + d0, acc + hh * w,
               (size_t)w * sizeof(float));
    j->status[item] = GEM_OK;
}

static void reduce_item(void *ctx, int64_t h, int64_t thread)
{
    (void)thread;
    const baseline_job *j = ctx;
    const int64_t dv = j->dv;
    float *o = j->out + h * dv;
    memcpy(o, j->partials + h * dv, (size_t)dv * sizeof(float));
    for (int64_t sp = 1; sp < j->vparts; sp++) {
        const float *part = j->partials + (sp * j->n_q + h) * dv;
        for (int64_t d = 0; d < dv; d++)
            o[d] += part[d];
    }
    if (j->kv->v_scale) { /* FP8 V: the head's scale, after the sums */
        const float sv = j->kv->v_scale[h / j->group];
        for (int64_t d = 0; d < dv; d++)
            o[d] *= sv;
    }
    /* an output that is not finite (a V row with NaN or infinity, or sums past float's range):
     * GEM_ERR_STATE, as the fused route's division answers */
    int bad = 0;
    for (int64_t d = 0; d < dv; d++)
        bad |= !isfinite(o[d]);
    j->status[h] = bad ? GEM_ERR_STATE : GEM_OK;
}

/* Seconds on the monotonic clock (0 if it cannot be read: the stage times are then 0). */
static double stage_clock_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0.0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

gem_status cpu_route_baseline(const cpu_run *r, const gem_decode_shape *shape, const float *q,
                              const gem_kv_view *kv, const gem_decode_config *cfg, float *out)
{
    const int64_t VP = cfg->partitions, nq = shape->n_q_heads, nkv = shape->n_kv_heads;
    const int64_t live = kv->live;
    if (VP < 1 || cfg->tile != 0)
        return GEM_ERR_PARAM;
    baseline_job j = {
        .q = q, .k = kv->k, .v = kv->v, .kt = kv->k_dtype, .vt = kv->v_dtype,
        .k_es = (int64_t)gem_dtype_size(kv->k_dtype), .v_es = (int64_t)gem_dtype_size(kv->v_dtype),
        .out = out, .ws = r->ws, .status = r->status,
        .ws_stride = r->ws_stride, .n_q = nq, .n_kv = nkv, .group = nq / nkv,
        .dk = shape->dk, .dv = shape->dv, .live = live, .vparts = VP,
        .dim_tiles = (shape->dv + GEM_BASELINE_DIM_TILE - 1) / GEM_BASELINE_DIM_TILE,
        .k_hs = kv->k_head_stride, .k_ts = kv->k_token_stride,
        .v_hs = kv->v_head_stride, .v_ts = kv->v_token_stride, .scale = shape->scale, .kv = kv,
    };
    j.scores = r->scratch;
    j.partials = j.scores + nq * live;

    /* stage boundaries on the stage clock: begin, after score, normalize, value, reduce */
    gem_baseline_stage_seconds *clock = r->stage_clock;
    double mark[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
    if (clock)
        mark[0] = stage_clock_now();
    const int64_t score_items = nkv * ((live + SCORE_CHUNK - 1) / SCORE_CHUNK);
    cpu_pool_run(r->pool, score_items, score_item, &j);
    gem_status st = cpu_first_error(r->status, score_items);
    if (st != GEM_OK)
        return st;
    if (clock)
        mark[1] = stage_clock_now();
    cpu_pool_run(r->pool, nq, normalize_item, &j);
    st = cpu_first_error(r->status, nq);
    if (st != GEM_OK)
        return st;
    if (clock)
        mark[2] = stage_clock_now();
    const int64_t value_items = nkv * j.dim_tiles * VP;
    cpu_pool_run(r->pool, value_items, value_item, &j);
    st = cpu_first_error(r->status, value_items);
    if (st != GEM_OK)
        return st;
    if (clock)
        mark[3] = stage_clock_now();
    cpu_pool_run(r->pool, nq, reduce_item, &j);
    st = cpu_first_error(r->status, nq);
    if (st == GEM_OK && clock) {
        mark[4] = stage_clock_now();
        clock->score += mark[1] - mark[0];
        clock->normalize += mark[2] - mark[1];
        clock->value += mark[3] - mark[2];
        clock->reduce += mark[4] - mark[3];
        clock->calls++;
    }
    return st;
}
