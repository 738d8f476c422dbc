/*
 * Route specifications and audited runs shared by diff, bench and run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_routes.h"
#include "gem/receipt.h"

int cli_route_resolve(const char *cmd, cli_route_spec *s)
{
    switch (s->route) {
    case GEM_ROUTE_FUSED:
        return 0;
    case GEM_ROUTE_BASELINE:
    case GEM_ROUTE_ONLINE:
        if (s->tile != 0) {
            cli_error(cmd, "route %s has no tile parameter", gem_route_name(s->route));
            return -1;
        }
        return 0;
    case GEM_ROUTE_REFERENCE:
        if (s->tile != 0 || s->partitions != 0) {
            cli_error(cmd, "route reference has no partitions or tile");
            return -1;
        }
        return 0;
    default:
        cli_error(cmd, "unknown route");
        return -1;
    }
}

int cli_route_bind(const char *cmd, const gem_engine *e, cli_route_spec *s)
{
    const gem_route_params p = {s->partitions, s->tile};
    gem_route_params r;
    const gem_status st = gem_engine_resolve(e, s->route, &p, &r);
    if (st != GEM_OK) {
        cli_error(cmd, "route %s with partitions %lld, tile %lld: %s", gem_route_name(s->route),
                  (long long)s->partitions, (long long)s->tile, gem_status_str(st));
        return -1;
    }
    s->partitions = r.partitions;
    s->tile = r.tile;
    return 0;
}

void cli_route_label(const cli_route_spec *s, char *buf, size_t cap)
{
    const char *name = gem_route_name(s->route);
    if (s->route == GEM_ROUTE_REFERENCE)
        snprintf(buf, cap, "%s", name);
    else if (s->partitions == 0 && s->tile == 0)
        snprintf(buf, cap, "%s_default", name); /* not bound to an engine yet */
    else if (s->tile > 0)
        snprintf(buf, cap, "%s_p%lld_t%lld", name, (long long)s->partitions, (long long)s->tile);
    else
        snprintf(buf, cap, "%s_p%lld", name, (long long)s->partitions);
}

json_t *cli_route_json(const cli_route_spec *s)
{
    return json_pack("{s:s, s:I, s:I}", "route", gem_route_name(s->route), "partitions",
                     (json_int_t)s->partitions, "tile", (json_int_t)s->tile);
}

gem_attn_shape cli_production_shape(int64_t live, float scale)
{
    gem_attn_shape s = {CLI_NQ, CLI_NKV, CLI_D, CLI_D, live, live, scale};
    return s;
}

int cli_kv_dtype_option(const char *opt, const char *val, cli_kv_dtypes *d, int *bad)
{
    const int both = !strcmp(opt, "--kv-dtype"), k = !strcmp(opt, "--k-dtype"),
              v = !strcmp(opt, "--v-dtype");
    if (!both && !k && !v)
        return 0;
    gem_dtype t;
    *bad = gem_dtype_parse(val, &t) != GEM_OK;
    if (!*bad) {
        if (both || k)
            d->k = t;
        if (both || v)
            d->v = t;
    }
    return 1;
}

void cli_kv_dtype_tag(const cli_kv_dtypes *d, char *buf, size_t cap)
{
    if (d->k == d->v)
        snprintf(buf, cap, "%s", gem_dtype_name(d->k));
    else
        snprintf(buf, cap, "k%s_v%s", gem_dtype_name(d->k), gem_dtype_name(d->v));
}

json_t *cli_kv_dtype_json(const cli_kv_dtypes *d)
{
    return json_pack("{s:s, s:s}", "k", gem_dtype_name(d->k), "v", gem_dtype_name(d->v));
}

json_t *cli_geometry_json(const gem_attn_shape *shape, const cli_kv_dtypes *d)
{
    char tag[32];
    cli_kv_dtype_tag(d, tag, sizeof tag);
    json_t *g = gem_receipt_geometry(shape);
    if (g && json_object_set_new(g, "dtype", json_string(tag))) {
        json_decref(g);
        return NULL;
    }
    return g;
}

double cli_kv_bytes(const cli_kv_dtypes *d, int64_t live)
{
    return (double)CLI_NKV * (double)live * (double)CLI_D *
           (double)(gem_dtype_size(d->k) + gem_dtype_size(d->v));
}

gem_status cli_route_run_checked(gem_engine *e, const cli_route_spec *spec, size_t n,
                                 int runs, cli_route_result *r)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    r->deterministic = 1;
    r->finite = 1;
    r->guard_ok = 1;
    float *buf = malloc(n * sizeof(float));
    r->out = malloc(n * sizeof(float));
    if (!buf || !r->out) {
        free(buf);
        free(r->out);
        r->out = NULL;
        return r->status = GEM_ERR_NOMEM;
    }
    const gem_route_params p = {spec->partitions, spec->tile};
    for (int i = 0; i < runs; i++) {
        double sec = 0;
        gem_status st = gem_engine_run(e, spec->route, &p, &sec);
        gem_output_audit a = {0, 1};
        if (st == GEM_OK)
            st = gem_engine_output(e, i == 0 ? r->out : buf, n, &a);
        if (st != GEM_OK) {
            free(buf);
            free(r->out);
            r->out = NULL;
            return r->status = st;
        }
        if (i == 0)
            r->seconds = sec;
        if (a.unwritten > r->unwritten)
            r->unwritten = a.unwritten;
        if (!a.guard_ok)
            r->guard_ok = 0;
        const float *o = i == 0 ? r->out : buf;
        char sha[65];
        gem_sha256_hex(o, n * sizeof(float), sha);
        if (i == 0)
            memcpy(r->sha256, sha, sizeof sha);
        else if (strcmp(sha, r->sha256) != 0)
            r->deterministic = 0;
        for (size_t k = 0; k < n; k++)
            if (!isfinite(o[k])) {
                r->finite = 0;
                break;
            }
    }
    free(buf);
    return r->status = GEM_OK;
}

void cli_route_result_free(cli_route_result *r)
{
    free(r->out);
    r->out = NULL;
}

int cli_compare_passes(const gem_compare *c)
{
    gem_gate g;
    return gem_gate_compare(c, CLI_MIN_CORRELATION, CLI_MAX_NMSE, &g) == GEM_OK && g.pass;
}

int cli_check_load_memory(const char *cmd, gem_backend backend, const cli_kv_dtypes *d,
                          int64_t live, int64_t copies)
{
    /* the generated F32 inputs (K and V), the engine's host copies in the cache's types
     * (the CPU's rotation copies, or CUDA's one host view) and the reference's scores */
    const double f32 = 2.0 * CLI_NKV * (double)live * CLI_D * 4.0;
    const double cache = cli_kv_bytes(d, live);
    const double host = backend == GEM_BACKEND_CPU ? (double)copies * cache : cache;
    const double need = f32 + host + (double)CLI_NQ * (double)live * 8.0 + (64 << 20);
    return cli_check_memory(cmd, "the inputs", need < 1.8e19 ? (uint64_t)need : UINT64_MAX);
}

static int result_sound(const cli_route_result *r)
{
    return r->finite && r->unwritten == 0 && r->guard_ok && r->deterministic;
}

/* The checks of cli_pair_validate and cli_pair_validate2: a read kv_a, b read kv_b (the same
 * view or another of the same layer); b against a gates when gate_b_vs_a; each route against
 * the reference of its own view when with_double (one reference when the views are the same). */
static gem_status pair_validate(const gem_attn_shape *shape, const float *q,
                                const gem_kv_view *kv_a, const gem_kv_view *kv_b,
                                const cli_route_result *a, const cli_route_result *b, size_t n,
                                int gate_b_vs_a, int with_double, const char *progress,
                                cli_pair_check *out)
{
    memset(out, 0, sizeof *out);
    gem_compare_f32_f32(b->out, a->out, n, &out->b_vs_a);
    out->passed = result_sound(a) && result_sound(b) &&
                  (!gate_b_vs_a || cli_compare_passes(&out->b_vs_a));
    if (!with_double)
        return GEM_OK;
    if (progress)
        cli_progress("%s", progress);
    double *dbl = malloc(n * sizeof(double)); /* n * 8 fits: it is an output of the shape */
    if (!dbl) {
        out->passed = 0;
        return GEM_ERR_NOMEM;
    }
    const gem_decode_shape ds = {shape->n_q_heads, shape->n_kv_heads, shape->dk, shape->dv,
                                 shape->scale};
    gem_status st = gem_attn_reference_kv(&ds, q, kv_a, dbl, n);
    if (st == GEM_OK) {
        gem_compare_f32_f64(a->out, dbl, n, &out->a_vs_double);
        if (kv_b != kv_a)
            st = gem_attn_reference_kv(&ds, q, kv_b, dbl, n);
    }
    if (st == GEM_OK) {
        gem_compare_f32_f64(b->out, dbl, n, &out->b_vs_double);
        out->passed = out->passed && cli_compare_passes(&out->a_vs_double) &&
                      cli_compare_passes(&out->b_vs_double);
    } else {
        out->passed = 0;
    }
    free(dbl);
    return st;
}

gem_status cli_pair_validate(const gem_attn_shape *shape, const float *q, const gem_kv_view *kv,
                             const cli_route_result *a, const cli_route_result *b, size_t n,
                             int with_double, const char *progress, cli_pair_check *out)
{
    return pair_validate(shape, q, kv, kv, a, b, n, 1, with_double, progress, out);
}

gem_status cli_pair_validate2(const gem_attn_shape *shape, const float *q,
                              const gem_kv_view *kv, const gem_kv_view *kv_b,
                              const cli_route_result *a, const cli_route_result *b, size_t n,
                              const char *progress, cli_pair_check *out)
{
    /* b against a gates only when both read F32: a stored 16-bit K rounds what b rebuilds */
    const int f32 = kv->v_dtype == GEM_DTYPE_F32 && kv_b->v_dtype == GEM_DTYPE_F32;
    return pair_validate(shape, q, kv, kv_b, a, b, n, f32, 1, progress, out);
}
