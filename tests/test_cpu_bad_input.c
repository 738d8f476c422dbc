/*
 * The CPU backend on bad input: every case answers a clear status, never a
 * crash and never an output. Also the baseline scratch byte contract.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gem/check.h"
#include "gem/cpu.h"
#include "gem/engine.h"
#include "tcheck.h"

static void check_scratch_contract(void)
{
    gem_baseline_scratch b;
    TCHECK_STATUS(gem_baseline_scratch_bytes(65536, 32, 512, 16, &b), GEM_OK);
    TCHECK_EQ_I64(b.scores_bytes, 8388608);
    TCHECK_EQ_I64(b.partials_bytes, 1048576);
    TCHECK_EQ_I64(b.total_bytes, 9437184);
    TCHECK_STATUS(gem_baseline_scratch_bytes(131072, 32, 512, 16, &b), GEM_OK);
    TCHECK_EQ_I64(b.scores_bytes, 16777216);
    gem_baseline_scratch keep = b;
    TCHECK_STATUS(gem_baseline_scratch_bytes(INT64_MAX / 2, 32, 512, 16, &b), GEM_ERR_OVERFLOW);
    TCHECK_STATUS(gem_baseline_scratch_bytes(1, 32, INT64_MAX / 4, INT64_MAX / 4, &b),
                  GEM_ERR_OVERFLOW);
    TCHECK(memcmp(&b, &keep, sizeof b) == 0); /* untouched on error */
    TCHECK_STATUS(gem_baseline_scratch_bytes(0, 32, 512, 16, &b), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_baseline_scratch_bytes(1, 32, 512, 0, &b), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_baseline_scratch_bytes(1, 32, 512, 16, NULL), GEM_ERR_NULL);
}

/* Non-finite values in q, k or v (within live) are rejected at load. */
static void check_nonfinite(gem_engine *e)
{
    gem_attn_shape s = {8, 2, 16, 16, 9, 12, 0.25f};
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, 3, &in), GEM_OK);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    float *bufs[] = {in.q, in.k, in.v};
    const size_t where[] = {5, (size_t)(1 * 12 + 8) * 16 + 3, (size_t)(0 * 12 + 4) * 16};
    for (int b = 0; b < 3; b++)
        for (int x = 0; x < 3; x++) {
            const float keep = bufs[b][where[b]];
            bufs[b][where[b]] = bad[x];
            TCHECK_STATUS(gem_engine_load(e, &s, &in.in, 1), GEM_ERR_NONFINITE);
            /* a fresh engine that never loaded has nothing to run */
            gem_engine *f = NULL;
            TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CPU, 1, &f), GEM_OK);
            TCHECK_STATUS(gem_engine_load(f, &s, &in.in, 1), GEM_ERR_NONFINITE);
            TCHECK_STATUS(gem_engine_run(f, GEM_ROUTE_FUSED, NULL, NULL), GEM_ERR_STATE);
            gem_engine_destroy(f);
            bufs[b][where[b]] = keep;
        }
    /* beyond live a NaN is not read, so it is accepted and changes nothing */
    in.k[(size_t)(0 * 12 + 10) * 16] = NAN;
    in.v[(size_t)(1 * 12 + 11) * 16] = INFINITY;
    TCHECK_STATUS(gem_engine_load(e, &s, &in.in, 1), GEM_OK);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, NULL, NULL), GEM_OK);
    float out[8 * 16];
    gem_output_audit a;
    TCHECK_STATUS(gem_engine_output(e, out, 8 * 16, &a), GEM_OK);
    TCHECK_EQ_I64(a.unwritten, 0);
    int finite = 1;
    for (int i = 0; i < 8 * 16; i++)
        finite &= isfinite(out[i]) != 0;
    TCHECK(finite);
    /* A failed load drops the earlier inputs: nothing runs on them afterwards. */
    in.q[0] = NAN;
    TCHECK_STATUS(gem_engine_load(e, &s, &in.in, 1), GEM_ERR_NONFINITE);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, NULL, NULL), GEM_ERR_STATE);
    TCHECK_STATUS(gem_engine_output(e, out, 8 * 16, &a), GEM_ERR_STATE);
    gem_inputs_free(&in);
}

/* Finite inputs whose scores overflow float: the float routes refuse with GEM_ERR_SCORE (not
 * "an input holds NaN or infinity": every input is finite). */
static void check_score_overflow(gem_engine *e)
{
    gem_attn_shape s = {4, 1, 32, 32, 5, 5, 1.0f};
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, 4, &in), GEM_OK);
    for (size_t i = 0; i < in.in.q_elems; i++)
        in.q[i] = 1e20f;
    for (size_t i = 0; i < in.in.k_elems; i++)
        in.k[i] = 1e20f;
    TCHECK_STATUS(gem_engine_load(e, &s, &in.in, 1), GEM_OK);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, NULL, NULL), GEM_ERR_SCORE);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_BASELINE, NULL, NULL), GEM_ERR_SCORE);
    gem_inputs_free(&in);
}

/* gem_engine_load_kv: unknown dtypes, a finite value that becomes infinite in
 * F16 (refused in live rows, accepted past live), the online oracle refusing a
 * 16-bit cache, and the host view before a load and after a failed one. */
static void check_load_kv(gem_engine *e)
{
    gem_attn_shape s = {8, 2, 16, 16, 9, 12, 0.25f};
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, 5, &in), GEM_OK);
    gem_kv_view kv;
    TCHECK_STATUS(gem_engine_load_kv(e, &s, &in.in, GEM_DTYPE_COUNT, GEM_DTYPE_F32, 1),
                  GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_kv_host(e, &kv), GEM_ERR_STATE);
    TCHECK_STATUS(gem_engine_load_kv(e, &s, &in.in, GEM_DTYPE_F16, (gem_dtype)-1, 1),
                  GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_load_kv(NULL, &s, &in.in, GEM_DTYPE_F16, GEM_DTYPE_F16, 1),
                  GEM_ERR_NULL);
    TCHECK_STATUS(gem_engine_kv_host(NULL, &kv), GEM_ERR_NULL);
    const size_t live_elem = (size_t)(1 * 12 + 8) * 16 + 5, past = (size_t)(1 * 12 + 9) * 16;
    in.v[live_elem] = 70000.0f; /* finite, infinite in F16, fine in BF16 and F32 */
    TCHECK_STATUS(gem_engine_load_kv(e, &s, &in.in, GEM_DTYPE_F32, GEM_DTYPE_F16, 1),
                  GEM_ERR_NONFINITE);
    TCHECK_STATUS(gem_engine_kv_host(e, &kv), GEM_ERR_STATE);
    TCHECK_STATUS(gem_engine_load_kv(e, &s, &in.in, GEM_DTYPE_F16, GEM_DTYPE_BF16, 1), GEM_OK);
    in.v[live_elem] = 0.5f;
    in.v[past] = -70000.0f; /* past live: never read */
    TCHECK_STATUS(gem_engine_load_kv(e, &s, &in.in, GEM_DTYPE_F16, GEM_DTYPE_F16, 2), GEM_OK);
    TCHECK_STATUS(gem_engine_kv_host(e, &kv), GEM_OK);
    TCHECK(kv.k_dtype == GEM_DTYPE_F16 && kv.v_dtype == GEM_DTYPE_F16 && kv.live == 9 &&
           kv.capacity == 12);
    TCHECK(((const uint16_t *)kv.v)[past] == 0xFC00u); /* -inf, as placed */
    TCHECK(((const uint16_t *)kv.v)[live_elem] == 0x3800u);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_ONLINE, NULL, NULL), GEM_ERR_UNSUPPORTED);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_REFERENCE, NULL, NULL), GEM_OK);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, NULL, NULL), GEM_OK);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_BASELINE, NULL, NULL), GEM_OK);
    /* several calls a sample: the decode routes only, 1 .. GEM_ENGINE_MAX_CALLS; the last
     * call's output is whole and equals a single call's */
    float one[8 * 16], many[8 * 16];
    gem_output_audit au;
    TCHECK_STATUS(gem_engine_run_calls(e, GEM_ROUTE_REFERENCE, NULL, 2, NULL), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_run_calls(e, GEM_ROUTE_FUSED, NULL, 0, NULL), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_run_calls(e, GEM_ROUTE_FUSED, NULL, GEM_ENGINE_MAX_CALLS + 1, NULL),
                  GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_run_calls(NULL, GEM_ROUTE_FUSED, NULL, 1, NULL), GEM_ERR_NULL);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, NULL, NULL), GEM_OK);
    TCHECK_STATUS(gem_engine_output(e, one, 8 * 16, &au), GEM_OK);
    double sec = -1.0;
    TCHECK_STATUS(gem_engine_run_calls(e, GEM_ROUTE_FUSED, NULL, 3, &sec), GEM_OK);
    TCHECK(sec >= 0.0 && gem_engine_last_host_seconds(e) >= 0.0);
    TCHECK_STATUS(gem_engine_output(e, many, 8 * 16, &au), GEM_OK);
    TCHECK(au.unwritten == 0 && au.guard_ok);
    TCHECK(memcmp(one, many, sizeof one) == 0);
    gem_inputs_free(&in);
}

int main(void)
{
    check_scratch_contract();
    gem_engine *e = NULL;
    TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CPU, 2, &e), GEM_OK);
    TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CPU, -1, NULL), GEM_ERR_NULL);
    gem_engine *bad = (gem_engine *)1;
    TCHECK_STATUS(gem_engine_create(GEM_BACKEND_CPU, -1, &bad), GEM_ERR_PARAM);
    TCHECK(bad == NULL);

    /* before any load */
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, NULL, NULL), GEM_ERR_STATE);
    float out[64 * 64];
    gem_output_audit a;
    TCHECK_STATUS(gem_engine_output(e, out, 64, &a), GEM_ERR_STATE);
    size_t bytes = 0;
    TCHECK_STATUS(gem_engine_scratch_bytes(e, GEM_ROUTE_FUSED, NULL, &bytes), GEM_ERR_STATE);

    gem_attn_shape s = {8, 2, 16, 16, 1, 1, 0.25f};
    gem_owned_inputs in;
    TCHECK_STATUS(gem_inputs_make(&s, 1, &in), GEM_OK);
    /* live = 1 works on every route and equals v of that one token */
    TCHECK_STATUS(gem_engine_load(e, &s, &in.in, 1), GEM_OK);
    for (int r = 0; r < GEM_ROUTE_COUNT; r++) {
        TCHECK_STATUS(gem_engine_run(e, (gem_route)r, NULL, NULL), GEM_OK);
        TCHECK_STATUS(gem_engine_output(e, out, 8 * 16, &a), GEM_OK);
        TCHECK_EQ_I64(a.unwritten, 0);
        int same = 1;
        for (int h = 0; h < 8; h++)
            for (int d = 0; d < 16; d++)
                same &= out[h * 16 + d] == in.v[(h / 4) * 16 + d];
        TCHECK(same);
    }
    /* output buffer too small */
    TCHECK_STATUS(gem_engine_output(e, out, 8 * 16 - 1, &a), GEM_ERR_RANGE);
    TCHECK_STATUS(gem_engine_output(e, NULL, 8 * 16, &a), GEM_ERR_NULL);

    /* live = 0 */
    gem_attn_shape z = s;
    z.live = 0;
    TCHECK_STATUS(gem_engine_load(e, &z, &in.in, 1), GEM_ERR_SHAPE);
    /* live beyond capacity */
    z = s;
    z.live = 2;
    TCHECK_STATUS(gem_engine_load(e, &z, &in.in, 1), GEM_ERR_SHAPE);
    /* sizes that overflow */
    z = s;
    z.live = z.capacity = INT64_MAX / 8;
    gem_status st = gem_engine_load(e, &z, &in.in, 1);
    TCHECK(st == GEM_ERR_OVERFLOW || st == GEM_ERR_RANGE);
    z = s;
    z.dk = INT64_MAX / 2;
    st = gem_engine_load(e, &z, &in.in, 1);
    TCHECK(st == GEM_ERR_OVERFLOW || st == GEM_ERR_RANGE);
    /* buffers too small for the shape */
    gem_attn_inputs small = in.in;
    small.k_elems -= 1;
    TCHECK_STATUS(gem_engine_load(e, &s, &small, 1), GEM_ERR_RANGE);
    /* NULL and misaligned buffers */
    gem_attn_inputs nul = in.in;
    nul.v = NULL;
    TCHECK_STATUS(gem_engine_load(e, &s, &nul, 1), GEM_ERR_NULL);
    TCHECK_STATUS(gem_engine_load(e, NULL, &in.in, 1), GEM_ERR_NULL);
    TCHECK_STATUS(gem_engine_load(e, &s, NULL, 1), GEM_ERR_NULL);
    unsigned char *raw = malloc(in.in.q_elems * sizeof(float) + 8);
    gem_attn_inputs mis = in.in;
    mis.q = (const float *)(const void *)(raw + 1);
    memcpy(raw + 1, in.q, in.in.q_elems * sizeof(float));
    TCHECK_STATUS(gem_engine_load(e, &s, &mis, 1), GEM_ERR_ALIGN);
    free(raw);
    /* bad copies */
    TCHECK_STATUS(gem_engine_load(e, &s, &in.in, 0), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_load(e, &s, &in.in, 65), GEM_ERR_PARAM);

    /* bad route parameters on good inputs */
    TCHECK_STATUS(gem_engine_load(e, &s, &in.in, 1), GEM_OK);
    const gem_route_params neg_p = {-1, 0}, neg_t = {32, -4}, big_t = {32, 4096},
                           base_tile = {16, 4}, huge_p = {(int64_t)1 << 21, 4};
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, &neg_p, NULL), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, &neg_t, NULL), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, &big_t, NULL), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_FUSED, &huge_p, NULL), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_run(e, GEM_ROUTE_BASELINE, &base_tile, NULL), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_run(e, (gem_route)99, NULL, NULL), GEM_ERR_PARAM);
    /* scratch bytes answer the contracts */
    const gem_route_params p64 = {64, 8};
    /* (the partials or scores of the contracts, plus the CPU's per-thread temporaries:
     * exactly what gem_decode_workspace_bytes asks of a caller) */
    const gem_decode_shape ds = {s.n_q_heads, s.n_kv_heads, s.dk, s.dv, s.scale};
    const gem_decode_config c64 = {GEM_ROUTE_FUSED, 64, 8}, cb = {GEM_ROUTE_BASELINE, 0, 0};
    size_t want = 0;
    TCHECK_STATUS(gem_engine_scratch_bytes(e, GEM_ROUTE_FUSED, &p64, &bytes), GEM_OK);
    TCHECK(bytes >= 64 * 8 * 4 * 2 + 64 * 8 * 16 * 4);
    TCHECK_STATUS(gem_decode_workspace_bytes(gem_engine_ctx(e), &ds, s.live, &c64, &want), GEM_OK);
    TCHECK_EQ_I64(bytes, want);
    TCHECK_STATUS(gem_engine_scratch_bytes(e, GEM_ROUTE_BASELINE, NULL, &bytes), GEM_OK);
    TCHECK(bytes >= 8 * 1 * 4 + 16 * 8 * 16 * 4);
    TCHECK_STATUS(gem_decode_workspace_bytes(gem_engine_ctx(e), &ds, s.live, &cb, &want), GEM_OK);
    TCHECK_EQ_I64(bytes, want);
    TCHECK_STATUS(gem_engine_scratch_bytes(e, GEM_ROUTE_REFERENCE, NULL, &bytes), GEM_OK);
    TCHECK_EQ_I64(bytes, 0);
    /* bandwidth probe arguments */
    double bw = 0;
    TCHECK_STATUS(gem_engine_read_bandwidth(e, 1024, 3, &bw), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_read_bandwidth(e, (size_t)8 << 20, 0, &bw), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_engine_read_bandwidth(e, (size_t)8 << 20, 3, &bw), GEM_OK);
    TCHECK(bw > 0.0 && isfinite(bw));
    gem_inputs_free(&in);

    check_nonfinite(e);
    check_score_overflow(e);
    check_load_kv(e);
    gem_engine_destroy(e);
    return tcheck_summary("test_cpu_bad_input");
}
