/*
 * The CUDA backend through the engine API.
 *
 * Without a GPU (or in a build without CUDA) the backend must answer
 * GEM_ERR_NO_DEVICE from create and from every gem/cuda.h query; the test
 * asserts exactly that and says that the GPU part was not run.
 *
 * With a GPU: both CUDA routes against the double reference on small and odd
 * lengths (1 .. 4,097, capacity larger than live, two scales, several P and
 * tiles, two KV-head counts), every output element written and the guard
 * intact, bitwise repeatability (same copy, other rotation copies),
 * unsupported shapes and CPU-only routes refused, bad parameters rejected,
 * and the resource query's fixed design figures. The four-dims-per-thread
 * direct-load variants (GEM_CUDA_FUSED_VSHARE 4..7, STAGES 0) must give the
 * same bits as each other (same arithmetic; 6 and 7 differ in the reducer's
 * load rounds and the first pass's schedule only), and 6 and 7 must report the
 * one-round reducer, 7 no local memory.
 *
 * `test_cuda_backend --small` runs only the short lengths (for
 * compute-sanitizer).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gem/attn.h"
#include "gem/check.h"
#include "gem/cuda.h"
#include "gem/engine.h"
#include "tcheck.h"

#define NMSE_MAX 1e-9  /* F32 accumulation over <= 8K tokens lands near 1e-13 */
#define CORR_MIN 0.999999

static void check_no_device(void)
{
    gem_engine *e = (gem_engine *)1;
    TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CUDA, 0, &e), GEM_ERR_NO_DEVICE);
    TCHECK(e == NULL);
    gem_cuda_device_info dev;
    TCHECK_STATUS(gem_cuda_device_query(&dev), GEM_ERR_NO_DEVICE);
    double bps = 0;
    TCHECK_STATUS(gem_cuda_read_bandwidth((size_t)1 << 24, 1, &bps), GEM_ERR_NO_DEVICE);
    TCHECK_STATUS(gem_cuda_copy_bandwidth((size_t)1 << 24, 1, &bps), GEM_ERR_NO_DEVICE);
    gem_cuda_fused_config cfg = {32, 4, 1, 0};
    gem_cuda_kernel_info ks[6];
    size_t n = 99;
    TCHECK_STATUS(gem_cuda_kernel_query(&cfg, 4, 8192, ks, 6, &n), GEM_ERR_NO_DEVICE);
    TCHECK(n == 0);
}

/* Runs `route` with params on a loaded engine, audits and compares the
 * output with ref; out (n) receives it. */
static void run_and_check(gem_engine *e, gem_route route, const gem_route_params *p,
                          const double *ref, float *out, size_t n, const char *what)
{
    double sec = -1;
    gem_status st = gem_engine_run(e, route, p, &sec);
    if (!TCHECK(st == GEM_OK)) {
        fprintf(stderr, "     %s: run -> %s\n", what, gem_status_name(st));
        return;
    }
    TCHECK(sec > 0 && isfinite(sec));
    gem_output_audit a = {99, 0};
    TCHECK_STATUS(gem_engine_output(e, out, n, &a), GEM_OK);
    TCHECK(a.unwritten == 0);
    TCHECK(a.guard_ok == 1);
    gem_compare c;
    TCHECK_STATUS(gem_compare_f32_f64(out, ref, n, &c), GEM_OK);
    if (!TCHECK(c.nonfinite == 0 && c.nmse <= NMSE_MAX && c.correlation >= CORR_MIN))
        fprintf(stderr, "     %s: nonfinite %zu nmse %.3e corr %.9f max_abs %.3e\n", what,
                c.nonfinite, c.nmse, c.correlation, c.max_abs);
}

/* The fused route's parameters for the runs that take the defaults: NULL (P32,
 * tile 4), or P32 tile 8 under GEM_CUDA_FUSED_VSHARE=3, 4 or 5, which have no tile 4. */
static const gem_route_params *fused_defaults(void)
{
    static const gem_route_params t8 = {32, 8};
    gem_cuda_fused_config env = {0, 0, 1, 0};
    if (gem_cuda_fused_config_from_env(&env) == GEM_OK && env.vshare >= 3)
        return &t8;
    return NULL;
}

/* One shape: both routes, several parameters, repeatability. */
static void check_shape(gem_engine *e, int64_t n_kv, int64_t live, int64_t extra_capacity,
                        float scale, uint64_t seed)
{
    gem_attn_shape s = {8 * n_kv, n_kv, 512, 512, live, live + extra_capacity, scale};
    gem_owned_inputs in;
    if (!TCHECK(gem_inputs_make(&s, seed, &in) == GEM_OK))
        return;
    const size_t n = (size_t)s.n_q_heads * 512;
    double *ref = malloc(n * sizeof *ref);
    float *out = malloc(n * sizeof *out), *again = malloc(n * sizeof *again);
    if (!TCHECK(ref && out && again))
        goto done;
    TCHECK_STATUS(gem_attn_reference(&s, &in.in, ref, n), GEM_OK);
    TCHECK_STATUS(gem_engine_load(e, &s, &in.in, 3), GEM_OK);

    char what[128];
    gem_cuda_fused_config env = {0, 0, 1, 0};
    TCHECK_STATUS(gem_cuda_fused_config_from_env(&env), GEM_OK);
    static const int64_t fused_p[] = {32, 7, 256};
    static const int64_t tiles[] = {4, 8, 16};
    for (size_t i = 0; i < 3; i++) {
        for (size_t j = 0; j < 3; j++) {
            gem_route_params p = {fused_p[i], tiles[j]};
            if ((env.vshare == 2 && tiles[j] == 16) || (env.vshare == 3 && tiles[j] == 4) ||
                (env.vshare >= 4 && tiles[j] != 8)) {
                /* not compiled: refused, not run */
                TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, &p, NULL), GEM_ERR_PARAM);
                continue;
            }
            snprintf(what, sizeof what, "fused live %lld P %lld tile %lld", (long long)live,
                     (long long)p.partitions, (long long)p.tile);
            run_and_check(e, GEM_ROUTE_FUSED, &p, ref, out, n, what);
        }
    }
    static const int64_t base_p[] = {16, 3};
    for (size_t i = 0; i < 2; i++) {
        gem_route_params p = {base_p[i], 0};
        snprintf(what, sizeof what, "baseline live %lld P %lld", (long long)live,
                 (long long)p.partitions);
        run_and_check(e, GEM_ROUTE_BASELINE, &p, ref, out, n, what);
    }
    /* bitwise repeatability: the defaults, four runs cycle through all three copies */
    for (int r = 0; r < 2; r++) {
        const gem_route route = r ? GEM_ROUTE_BASELINE : GEM_ROUTE_FUSED;
        const gem_route_params *rp = r ? NULL : fused_defaults();
        gem_output_audit a;
        TCHECK_STATUS(gem_engine_run(e, route, rp, NULL), GEM_OK);
        TCHECK_STATUS(gem_engine_output(e, out, n, &a), GEM_OK);
        for (int k = 0; k < 4; k++) {
            TCHECK_STATUS(gem_engine_run(e, route, rp, NULL), GEM_OK);
            TCHECK_STATUS(gem_engine_output(e, again, n, &a), GEM_OK);
            TCHECK(memcmp(out, again, n * sizeof *out) == 0);
        }
    }
done:
    free(ref);
    free(out);
    free(again);
    gem_inputs_free(&in);
}

static void check_refusals(gem_engine *e)
{
    /* before any load nothing runs */
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, NULL, NULL), GEM_ERR_STATE);
    static const gem_attn_shape bad[] = {
        {8, 1, 256, 256, 16, 16, 1.0f}, /* head dim 256 */
        {8, 2, 512, 512, 16, 16, 1.0f}, /* group 4 */
        {8, 1, 512, 256, 16, 16, 1.0f}, /* dk != dv */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gem_owned_inputs in;
        if (!TCHECK(gem_inputs_make(&bad[i], 7 + i, &in) == GEM_OK))
            continue;
        const gem_status ls = gem_engine_load(e, &bad[i], &in.in, 1);
        TCHECK(ls == GEM_OK || ls == GEM_ERR_UNSUPPORTED);
        if (ls == GEM_OK) {
            TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, NULL, NULL), GEM_ERR_UNSUPPORTED);
            TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_BASELINE, NULL, NULL),
                          GEM_ERR_UNSUPPORTED);
        }
        gem_inputs_free(&in);
    }
    gem_attn_shape s = {8, 1, 512, 512, 40, 40, 1.0f};
    gem_owned_inputs in;
    if (!TCHECK(gem_inputs_make(&s, 99, &in) == GEM_OK))
        return;
    TCHECK_STATUS(gem_engine_load(e, &s, &in.in, 1), GEM_OK);
    float out[8 * 512];
    gem_output_audit a;
    TCHECK_STATUS(gem_engine_output(e, out, 8 * 512, &a), GEM_ERR_STATE);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_REFERENCE, NULL, NULL), GEM_ERR_UNSUPPORTED);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_ONLINE, NULL, NULL), GEM_ERR_UNSUPPORTED);
    gem_route_params p = {32, 5};
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, &p, NULL), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, fused_defaults(), NULL), GEM_OK);
    TCHECK_STATUS(gem_engine_output(e, out, 100, &a), GEM_ERR_RANGE);
    size_t bytes = 0;
    gem_route_params p32 = {32, 4};
    TCHECK_STATUS(gem_engine_scratch_bytes(e, GEM_ROUTE_FUSED, &p32, &bytes), GEM_OK);
    gem_online_scratch sc;
    TCHECK_STATUS(gem_attention_online_scratch_bytes(32, 8, 512, &sc), GEM_OK);
    TCHECK(bytes == sc.total_bytes);
    gem_inputs_free(&in);
}

static void check_queries(void)
{
    gem_cuda_device_info dev;
    TCHECK_STATUS(gem_cuda_device_query(&dev), GEM_OK);
    TCHECK(dev.major == 9 && dev.warp_size == 32 && dev.sm_count > 0);
    gem_cuda_fused_config cfg = {32, 4, 1, 0};
    gem_cuda_kernel_info ks[6];
    size_t n = 0;
    TCHECK_STATUS(gem_cuda_kernel_query(&cfg, 4, 8192, ks, 5, &n), GEM_ERR_RANGE);
    TCHECK_STATUS(gem_cuda_kernel_query(&cfg, 4, 8192, ks, 6, &n), GEM_OK);
    TCHECK(n == 6);
    TCHECK(!strcmp(ks[0].role, "fused_first_pass") && !strcmp(ks[1].role, "fused_reducer"));
    TCHECK(ks[0].dynamic_shared_bytes == 16384);
    TCHECK(ks[0].threads_dispatched == 256 && ks[0].warps_dispatched == 8);
    TCHECK(ks[1].dynamic_shared_bytes == 0 && ks[1].threads_dispatched == 256);
    TCHECK(ks[0].grid_blocks == 4 * 32);
    for (size_t i = 0; i < n; i++)
        TCHECK(ks[i].max_active_blocks_per_sm >= 1 && ks[i].local_bytes == 0);
    cfg.tile = 5;
    TCHECK_STATUS(gem_cuda_kernel_query(&cfg, 4, 8192, ks, 6, &n), GEM_ERR_PARAM);
    double bps = 0;
    TCHECK_STATUS(gem_cuda_read_bandwidth((size_t)1 << 26, 3, &bps), GEM_OK);
    TCHECK(bps > 1e9 && isfinite(bps));
}

/* One output of the fused route at tile 8 under GEM_CUDA_FUSED_STAGES=0 and the given vshare
 * (a fresh engine: the variant is read at create). 0 on success. */
static int wide_run(const char *vshare, const gem_attn_shape *s, const gem_attn_inputs *in,
                    int64_t partitions, float *out, size_t n)
{
    if (!TCHECK(setenv("GEM_CUDA_FUSED_STAGES", "0", 1) == 0 &&
                setenv("GEM_CUDA_FUSED_VSHARE", vshare, 1) == 0))
        return 1;
    gem_engine *e = NULL;
    if (!TCHECK(gem_engine_create(GEM_BACKEND_CUDA, 0, &e) == GEM_OK))
        return 1;
    int bad = 1;
    gem_route_params p = {partitions, 8};
    gem_output_audit a;
    if (TCHECK(gem_engine_load(e, s, in, 1) == GEM_OK) &&
        TCHECK(gem_engine_run(e, GEM_ROUTE_FUSED, &p, NULL) == GEM_OK) &&
        TCHECK(gem_engine_output(e, out, n, &a) == GEM_OK) && TCHECK(a.unwritten == 0))
        bad = 0;
    gem_engine_destroy(e);
    return bad;
}

/* VSHARE 4..7 (STAGES 0, tile 8): the same bits for the same inputs, at P 7, 64 and 256 (one
 * and several load rounds of the wide reducer, empty partitions); the reducer each reports. */
static void check_wide_variants(void)
{
    const char *old_s = getenv("GEM_CUDA_FUSED_STAGES"), *old_v = getenv("GEM_CUDA_FUSED_VSHARE");
    char keep_s[16] = "", keep_v[16] = "";
    if (old_s)
        snprintf(keep_s, sizeof keep_s, "%s", old_s);
    if (old_v)
        snprintf(keep_v, sizeof keep_v, "%s", old_v);
    gem_attn_shape s = {16, 2, 512, 512, 1001, 1003, 0.0441941738f};
    gem_owned_inputs in;
    const size_t n = (size_t)s.n_q_heads * 512;
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    if (TCHECK(want && got) && TCHECK(gem_inputs_make(&s, 4242, &in) == GEM_OK)) {
        static const int64_t ps[] = {7, 64, 256};
        static const char *vs[] = {"5", "6", "7"};
        for (size_t i = 0; i < 3; i++) {
            if (wide_run("4", &s, &in.in, ps[i], want, n))
                continue;
            for (size_t j = 0; j < 3; j++) {
                if (wide_run(vs[j], &s, &in.in, ps[i], got, n))
                    continue;
                if (!TCHECK(memcmp(want, got, n * sizeof *got) == 0))
                    fprintf(stderr, "     vshare %s P %lld: bits differ from vshare 4\n", vs[j],
                            (long long)ps[i]);
            }
        }
        gem_inputs_free(&in);
    }
    free(want);
    free(got);
    static const struct {
        int64_t vshare;
        const char *reducer;
    } red[] = {{4, "gem_fused_reducer"}, {5, "gem_fused_reducer"},
               {6, "gem_fused_reducer_wide"}, {7, "gem_fused_reducer_wide"}};
    for (size_t i = 0; i < 4; i++) {
        gem_cuda_fused_config cfg = {64, 8, 0, red[i].vshare};
        gem_cuda_kernel_info ks[6];
        size_t nk = 0;
        if (!TCHECK(gem_cuda_kernel_query(&cfg, 4, 65536, ks, 6, &nk) == GEM_OK))
            continue;
        TCHECK(!strcmp(ks[1].name, red[i].reducer));
        TCHECK(ks[0].grid_blocks == 4 * 64 && ks[0].threads_dispatched == 256);
        if (red[i].vshare == 7)
            TCHECK(ks[0].local_bytes == 0 && ks[0].max_active_blocks_per_sm >= 2);
    }
    gem_cuda_fused_config cfg = {64, 4, 0, 7}; /* tile 4 is not compiled for 7 */
    gem_cuda_kernel_info ks[6];
    size_t nk = 0;
    TCHECK_STATUS(gem_cuda_kernel_query(&cfg, 4, 65536, ks, 6, &nk), GEM_ERR_PARAM);
    TCHECK(setenv("GEM_CUDA_FUSED_VSHARE", "8", 1) == 0);
    gem_cuda_fused_config env = {0, 0, 1, 0};
    TCHECK_STATUS(gem_cuda_fused_config_from_env(&env), GEM_ERR_PARAM);
    /* the process's own variant again */
    if (old_s)
        setenv("GEM_CUDA_FUSED_STAGES", keep_s, 1);
    else
        unsetenv("GEM_CUDA_FUSED_STAGES");
    if (old_v)
        setenv("GEM_CUDA_FUSED_VSHARE", keep_v, 1);
    else
        unsetenv("GEM_CUDA_FUSED_VSHARE");
}

int main(int argc, char **argv)
{
    const int small = argc > 1 && !strcmp(argv[1], "--small");
    gem_engine *e = NULL;
    gem_status st = gem_engine_create(GEM_BACKEND_CUDA, 0, &e);
    if (st == GEM_ERR_NO_DEVICE) {
        check_no_device();
        printf("test_cuda_backend: no GPU here: asserted that the CUDA backend answers "
               "no_device; the GPU part was NOT run\n");
        return tcheck_summary("test_cuda_backend");
    }
    if (!TCHECK(st == GEM_OK && e != NULL))
        return tcheck_summary("test_cuda_backend");
    printf("test_cuda_backend: %s\n", gem_engine_describe(e));
    TCHECK(gem_engine_backend(e) == GEM_BACKEND_CUDA);
    check_refusals(e);
    check_queries();
    check_wide_variants();
    static const int64_t lives[] = {1, 2, 5, 13, 31, 100, 257, 1000, 4097};
    const size_t nl = small ? 5 : sizeof lives / sizeof lives[0];
    for (size_t i = 0; i < nl; i++)
        check_shape(e, 1, lives[i], (int64_t)(i % 3) * 5, (i % 2) ? 1.0f : 0.0441941738f,
                    1000 + i);
    if (!small) {
        check_shape(e, 4, 8193, 7, 1.0f, 77);
        check_shape(e, 2, 3001, 0, 0.0441941738f, 78);
    }
    gem_engine_destroy(e);
    return tcheck_summary("test_cuda_backend");
}
