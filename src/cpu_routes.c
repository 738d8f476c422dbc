/*
 * The workspace layout the CPU split routes share: route scratch, per-thread
 * temporaries and per-item statuses, carved out of the caller's workspace.
 */
#include <string.h>

#include "cpu_routes.h"
#include "gem/cpu.h"

/* Score chunk of the baseline's score stage (tokens per item). */
#define CPU_SCORE_CHUNK 256

gem_status cpu_kfv_floats(int64_t dk, int64_t tile, size_t *floats)
{
    const size_t span = (size_t)(tile > CPU_SPAN_TOKENS ? tile : CPU_SPAN_TOKENS);
    size_t rows = 0, n = 0;
    gem_status st = gem_mul_size(span, (size_t)dk, &rows);
    /* 4 * (dk / 2) doubles = 4 * (dk / 2) * 2 floats, then the rows; rounded to 16 floats */
    if (st == GEM_OK)
        st = gem_add_size(rows, (size_t)(dk / 2) * 8 + 15, &n);
    if (st == GEM_OK)
        *floats = n / 16 * 16;
    return st;
}

/* Work items of the largest stage of a route, for the status array. */
static gem_status stage_items(const gem_decode_shape *s, int64_t live,
                              const gem_decode_config *c, size_t *items)
{
    size_t a = 0, b = 0;
    gem_status st;
    if (c->route == GEM_ROUTE_FUSED) {
        st = gem_mul_size((size_t)s->n_kv_heads, (size_t)c->partitions, &a);
    } else {
        const size_t tiles = (size_t)((s->dv + GEM_BASELINE_DIM_TILE - 1) / GEM_BASELINE_DIM_TILE);
        st = gem_mul_size((size_t)s->n_kv_heads, tiles, &a);
        if (st == GEM_OK)
            st = gem_mul_size(a, (size_t)c->partitions, &a);
        if (st == GEM_OK)
            st = gem_mul_size((size_t)s->n_kv_heads,
                              (size_t)(live / CPU_SCORE_CHUNK + 1), &b);
    }
    if (st != GEM_OK)
        return st;
    if ((size_t)s->n_q_heads > a)
        a = (size_t)s->n_q_heads;
    *items = a > b ? a : b;
    return GEM_OK;
}

/* x rounded up to a multiple of 64 (x small enough: callers checked). */
static gem_status round64(size_t x, size_t *r)
{
    gem_status st = gem_add_size(x, 63, r);
    if (st == GEM_OK)
        *r = *r / 64 * 64;
    return st;
}

gem_status cpu_routes_layout(const gem_decode_shape *shape, int64_t live,
                             const gem_decode_config *cfg, int64_t threads, cpu_layout *out)
{
    size_t scratch = 0, items = 0, per = 0, ws_floats = 0, ws_bytes = 0, status_bytes = 0;
    gem_status st;
    if (cfg->route == GEM_ROUTE_FUSED) {
        gem_online_scratch sc;
        st = gem_attention_online_scratch_bytes(cfg->partitions, shape->n_q_heads, shape->dv,
                                                &sc);
        scratch = sc.total_bytes;
    } else {
        gem_baseline_scratch sc;
        st = gem_baseline_scratch_bytes(live, shape->n_q_heads, shape->dv, cfg->partitions, &sc);
        scratch = sc.total_bytes;
    }
    if (st == GEM_OK)
        st = stage_items(shape, live, cfg, &items);
    if (st != GEM_OK)
        return st;
    /* Per-thread floats: the fused tile (scores, exp arguments, m, s, new m:
     * G*(2T+4) + T), the baseline accumulators G*32 and a dv merge row. */
    const size_t g = (size_t)(shape->n_q_heads / shape->n_kv_heads);
    const size_t t = (size_t)(cfg->tile > 0 ? cfg->tile : 1);
    size_t tile_part = 0, base_part = 0;
    st = gem_mul_size(g, 2 * t + 4, &tile_part);
    if (st == GEM_OK)
        st = gem_add_size(tile_part, t, &tile_part);
    if (st == GEM_OK)
        st = gem_mul_size(g, GEM_BASELINE_DIM_TILE, &base_part);
    if (st == GEM_OK)
        st = gem_add_size(tile_part, base_part, &per);
    if (st == GEM_OK)
        st = gem_add_size(per, (size_t)shape->dv + 64, &per);
    if (st != GEM_OK)
        return st;
    per = (per + 15) / 16 * 16; /* keep every thread's block on its own lines */
    memset(out, 0, sizeof *out);
    size_t kfv = 0, kfv_bytes = 0;
    if (cfg->route == GEM_ROUTE_FUSED &&
        ((st = cpu_kfv_floats(shape->dk, cfg->tile, &kfv)) != GEM_OK ||
         (st = gem_mul_size(kfv, (size_t)threads, &kfv_bytes)) != GEM_OK ||
         (st = gem_mul_size(kfv_bytes, sizeof(float), &kfv_bytes)) != GEM_OK))
        return st;
    if ((st = gem_mul_size(per, (size_t)threads, &ws_floats)) != GEM_OK ||
        (st = gem_mul_size(ws_floats, sizeof(float), &ws_bytes)) != GEM_OK ||
        (st = gem_mul_size(items, sizeof(gem_status), &status_bytes)) != GEM_OK ||
        (st = round64(scratch, &out->ws_offset)) != GEM_OK ||
        (st = round64(ws_bytes, &ws_bytes)) != GEM_OK ||
        (st = gem_add_size(out->ws_offset, ws_bytes, &out->kfv_offset)) != GEM_OK ||
        (st = gem_add_size(out->kfv_offset, kfv_bytes, &out->status_offset)) != GEM_OK ||
        (st = gem_add_size(out->status_offset, status_bytes, &out->total_bytes)) != GEM_OK)
        return st;
    out->scratch_bytes = scratch;
    out->kfv_stride = (int64_t)kfv;
    out->ws_stride = (int64_t)per;
    out->status_count = items;
    return GEM_OK;
}

void cpu_run_bind(cpu_run *r, cpu_pool *pool, int64_t threads, void *workspace,
                  const cpu_layout *l)
{
    char *base = workspace;
    r->pool = pool;
    r->threads = threads;
    r->scratch = base;
    r->ws = (float *)(void *)(base + l->ws_offset);
    r->ws_stride = l->ws_stride;
    r->kfv = l->kfv_stride ? (float *)(void *)(base + l->kfv_offset) : NULL;
    r->kfv_stride = l->kfv_stride;
    r->status = (gem_status *)(void *)(base + l->status_offset);
    r->status_count = (int64_t)l->status_count;
    r->stage_clock = NULL;
}

gem_status cpu_first_error(const gem_status *status, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (status[i] != GEM_OK)
            return status[i];
    return GEM_OK;
}
