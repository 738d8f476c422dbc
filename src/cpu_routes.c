/*
 * The buffers the CPU split routes share: route scratch, per-thread
 * temporaries and per-item statuses, grown before a run, never during one.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_routes.h"
#include "gem/cpu.h"

void cpu_ctx_release(cpu_ctx *c)
{
    free(c->scratch);
    free(c->ws);
    free(c->status);
    c->scratch = NULL;
    c->ws = NULL;
    c->status = NULL;
    c->scratch_cap = c->ws_cap = c->status_cap = 0;
    c->ws_stride = 0;
}

gem_status cpu_routes_scratch_bytes(gem_route route, const gem_attn_shape *shape,
                                    const gem_route_params *params, size_t *bytes)
{
    if (route == GEM_ROUTE_FUSED) {
        gem_online_scratch sc;
        gem_status st = gem_attention_online_scratch_bytes(params->partitions, shape->n_q_heads,
                                                           shape->dv, &sc);
        if (st == GEM_OK)
            *bytes = sc.total_bytes;
        return st;
    }
    if (route == GEM_ROUTE_BASELINE) {
        gem_baseline_scratch sc;
        gem_status st = gem_baseline_scratch_bytes(shape->live, shape->n_q_heads, shape->dv,
                                                   params->partitions, &sc);
        if (st == GEM_OK)
            *bytes = sc.total_bytes;
        return st;
    }
    *bytes = 0;
    return GEM_OK;
}

/* Work items of the largest stage of a route, for the status array. */
static gem_status stage_items(gem_route route, const gem_attn_shape *s,
                              const gem_route_params *p, size_t *items)
{
    size_t a = 0, b = 0;
    gem_status st;
    if (route == GEM_ROUTE_FUSED) {
        st = gem_mul_size((size_t)s->n_kv_heads, (size_t)p->partitions, &a);
    } else {
        const size_t tiles = (size_t)((s->dv + GEM_BASELINE_DIM_TILE - 1) / GEM_BASELINE_DIM_TILE);
        st = gem_mul_size((size_t)s->n_kv_heads, tiles, &a);
        if (st == GEM_OK)
            st = gem_mul_size(a, (size_t)p->partitions, &a);
        /* score stage: chunks of 256 tokens per KV head */
        if (st == GEM_OK)
            st = gem_mul_size((size_t)s->n_kv_heads, (size_t)(s->live / 256 + 1), &b);
    }
    if (st != GEM_OK)
        return st;
    if ((size_t)s->n_q_heads > a)
        a = (size_t)s->n_q_heads;
    *items = a > b ? a : b;
    return GEM_OK;
}

gem_status cpu_routes_reserve(cpu_ctx *c, gem_route route, const gem_attn_shape *shape,
                              const gem_route_params *params)
{
    size_t bytes = 0, items = 0, per = 0, total = 0;
    gem_status st = cpu_routes_scratch_bytes(route, shape, params, &bytes);
    if (st == GEM_OK)
        st = stage_items(route, shape, params, &items);
    if (st != GEM_OK)
        return st;
    /* Per-thread floats: the fused tile (scores, exp arguments, m, s, new m:
     * G*(2T+4) + T), the baseline accumulators G*32 and a dv merge row. */
    const size_t g = (size_t)(shape->n_q_heads / shape->n_kv_heads);
    const size_t t = (size_t)(params->tile > 0 ? params->tile : 1);
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
    st = gem_mul_size(per, (size_t)c->threads, &total);
    if (st != GEM_OK)
        return st;

    if (bytes > c->scratch_cap) {
        size_t rounded = 0;
        st = gem_add_size(bytes, 63, &rounded);
        if (st != GEM_OK)
            return st;
        rounded = rounded / 64 * 64;
        void *p = aligned_alloc(64, rounded);
        if (!p)
            return GEM_ERR_NOMEM;
        free(c->scratch);
        c->scratch = p;
        c->scratch_cap = rounded;
    }
    if (total > c->ws_cap) {
        size_t nbytes = 0;
        st = gem_mul_size(total, sizeof(float), &nbytes);
        if (st != GEM_OK)
            return st;
        float *p = aligned_alloc(64, (nbytes + 63) / 64 * 64);
        if (!p)
            return GEM_ERR_NOMEM;
        free(c->ws);
        c->ws = p;
        c->ws_cap = total;
    }
    c->ws_stride = (int64_t)per;
    if (items > c->status_cap) {
        gem_status *p = calloc(items, sizeof *p);
        if (!p)
            return GEM_ERR_NOMEM;
        free(c->status);
        c->status = p;
        c->status_cap = items;
    }
    return GEM_OK;
}

gem_status cpu_first_error(const gem_status *status, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (status[i] != GEM_OK)
            return status[i];
    return GEM_OK;
}
