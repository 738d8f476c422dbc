/*
 * gem bench: ABBA timing of two routes through the engine API (any backend).
 *
 * For each live length: generate the inputs in F32 and load them (K and V
 * rounded to their element types, --kv-dtype; with K/V copies that rotate, so
 * short contexts are not timed out of cache), validate both routes
 * in this run (two audited runs each: finite, all written, guard intact,
 * repeat deterministic, A vs B and each vs the double reference within the
 * gates) and refuse to time anything that did not validate; then warm up and
 * time A B B A for N rounds. Prints min / median / max per route, the A/B
 * ratio pair by pair, effective GB/s (K+V bytes of their types read once /
 * median time) and
 * the fraction of the read bandwidth measured by the same engine in the same
 * run. Writes one "gem.bench.v1" record (docs/receipts-bench.md).
 * --k-from-v: the inputs of a Gemma 4 full layer whose K is rebuilt from V
 * (gem_engine_load_k_from_v): route A reads the stored K and V, route B V alone
 * (the bytes of each route are what it reads).
 * Exit status: 0 everything validated and was timed, 1 a validation failed,
 * 2 bad usage or input.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_routes.h"
#include "gem/check.h"
#include "gem/engine.h"
#include "gem/receipt.h"

#define CMD "bench"
#define MAX_LENGTHS 64
#define MAX_ROUNDS 1000

static const int64_t default_lengths[] = {8192, 32768, 65536};

static void help(void)
{
    printf("usage: gem bench [options]\n\n"
           "Times route A and route B interleaved A B B A over N rounds after warm-up, on\n"
           "seeded inputs of the production shape (32 query heads, 4 KV heads, D512; K and V\n"
           "generated in F32 and rounded to --kv-dtype), after validating both outputs in the\n"
           "same run. Reports min/median/max, the A/B ratio pair by pair, GB/s (K+V bytes of\n"
           "their types read once / time) and the fraction of the read bandwidth measured in\n"
           "the same run.\n\n"
           "options:\n"
           "  --a ROUTE            route A (default baseline)\n"
           "  --a-partitions P     route A partitions (default: the route's)\n"
           "  --a-tile T           route A tile (fused; default: the tuned default)\n"
           "  --b ROUTE            route B (default fused)\n"
           "  --b-partitions P     route B partitions (default: the tuned default for fused)\n"
           "  --b-tile T           route B tile (default: the tuned default for fused)\n"
           "  --lengths L,L,..     live tokens (default 8192,32768,65536; 128K ok)\n"
           "  --kv-dtype T         K and V element type: f32, bf16, f16 or fp8_e4m3 (a scale\n"
           "                       per KV head; CUDA: both FP8, fused) (default f32)\n"
           "  --k-dtype T          K alone (after --kv-dtype)\n"
           "  --v-dtype T          V alone (after --kv-dtype)\n"
           "  --rounds N           ABBA rounds (default 5)\n"
           "  --warmup W           warm-up rounds of A and B (default 1)\n"
           "  --calls N            calls per timed sample, queued back to back on the next\n"
           "                       K/V copy each with no synchronisation between them, as a\n"
           "                       decode loop queues them; the sample is their time / N\n"
           "                       (default 1, at most 64)\n"
           "  --copies C           K/V copies rotated between runs, 0 = enough for 512 MiB\n"
           "                       (cpu: and for 4x the last-level cache)\n"
           "                       (default 0, at most 64)\n"
           "  --backend B          cpu or cuda (default cpu)\n"
           "  --threads N          CPU threads, 0 = one per core (default 0)\n"
           "  --seed S             run seed of the inputs (default 1)\n"
           "  --scale X            score scale (default 1/sqrt(512))\n"
           "  --bw-mib M           read-bandwidth probe size in MiB (default 1024)\n"
           "  --bw-reps R          read-bandwidth repetitions, median taken (default 5)\n"
           "  --no-double          skip the double-reference check (A vs B still gates)\n"
           "  --k-from-v           a Gemma 4 full layer (K = RoPE(k_weight * V), 64 of 256\n"
           "                       pairs rotating, base 1e6, k_weight seeded in [0.5, 1.5)):\n"
           "                       A reads the stored K and V, B (fused) V alone, rebuilding\n"
           "                       K; each checked against its own double reference\n"
           "  --out PATH           JSON record (default gem-bench.json)\n"
           "  -h, --help           this text\n\n"
           "exit status: 0 validated and timed, 1 a validation failed, 2 bad usage or input\n");
}

typedef struct bench_opts {
    cli_route_spec a, b;
    int64_t lengths[MAX_LENGTHS];
    size_t n_lengths;
    int64_t rounds, warmup, calls, copies, threads, bw_mib, bw_reps;
    gem_backend backend;
    uint64_t seed;
    float scale;
    int check_double;
    int k_from_v; /* --k-from-v */
    cli_kv_dtypes dt;
    const char *out;
} bench_opts;

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

typedef struct stats {
    double min, median, max;
} stats;

static stats stats_of(const double *v, size_t n)
{
    double *s = malloc(n * sizeof *s);
    stats r = {NAN, NAN, NAN};
    if (!s || n == 0) {
        free(s);
        return r;
    }
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    r.min = s[0];
    r.max = s[n - 1];
    r.median = (n % 2) ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return r;
}

static json_t *samples_json(const double *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, gem_receipt_real(v[i]));
    return a;
}

static json_t *stats_json(stats s)
{
    return json_pack("{s:o, s:o, s:o}", "min", gem_receipt_real(s.min), "median",
                     gem_receipt_real(s.median), "max", gem_receipt_real(s.max));
}

static json_t *audit_json(const cli_route_result *r)
{
    return json_pack("{s:s, s:b, s:b, s:I, s:b}", "output_sha256", r->sha256,
                     "repeat_deterministic", r->deterministic, "finite", r->finite,
                     "unwritten", (json_int_t)r->unwritten, "guard_ok", r->guard_ok);
}

/* The default rotation of --copies 0: enough copies of kv_bytes for 512 MiB and, on the CPU,
 * for four times the host's last-level cache (a 300 MB L3 keeps part of a 512 MiB rotation,
 * and the rows it keeps are not read from memory); 1 to 64. */
static int64_t default_copies(gem_backend backend, double kv_bytes)
{
    double want = 512.0 * 1048576.0;
    if (backend == GEM_BACKEND_CPU) {
        const double llc4 = 4.0 * (double)cli_host_llc_bytes();
        want = llc4 > want ? llc4 : want;
    }
    const double c = ceil(want / kv_bytes);
    return c < 1.0 ? 1 : (c > 64.0 ? 64 : (int64_t)c);
}

/* Validates and times one length, appending its case to `cases`.
 * Returns 0 timed, 1 refused (validation failed), 2 error. */
static int bench_length(const bench_opts *o, gem_engine *e, double bw, double nominal,
                        int64_t live, json_t *cases)
{
    const gem_attn_shape shape = cli_production_shape(live, o->scale);
    char la[64], lb[64];
    cli_route_spec ra_spec = o->a, rb_spec = o->b; /* bound to the loaded inputs below */
    const double kv_bytes = cli_kv_bytes(&o->dt, live);
    /* what route B reads: K and V, or V alone when it rebuilds K */
    const double kv_bytes_b = o->k_from_v ? kv_bytes / 2 : kv_bytes;
    const int64_t copies = o->copies ? o->copies : default_copies(o->backend, kv_bytes);
    cli_progress("bench %lld tokens: generating inputs", (long long)live);
    gem_owned_inputs in;
    gem_status st = gem_inputs_make(&shape, o->seed, &in);
    if (st != GEM_OK) {
        cli_error(CMD, "inputs at %lld tokens: %s", (long long)live, gem_status_str(st));
        return 2;
    }
    int rc = 2;
    double *ta = NULL, *tb = NULL, *ratio = NULL, *ha = NULL, *hb = NULL;
    cli_route_result ra = {0}, rb = {0};
    size_t n = 0;
    gem_attn_shape_elems(&shape, NULL, NULL, NULL, &n);
    char sha[3][65];
    gem_inputs_sha256(&in, sha); /* cannot fail: the buffers exist and fit */
    cli_progress("bench %lld tokens: loading %lld cop%s of K/V", (long long)live,
                 (long long)copies, copies == 1 ? "y" : "ies");
    gem_kv_view host_kv, host_kv_b;
    float k_weight[CLI_D];
    double inv_freq[64];
    if (o->k_from_v) {
        /* Gemma 4's full layer: 64 of 256 pairs rotate, base 1e6, row t at position t */
        gem_fill_uniform(o->seed ^ 0x6b776569676874ull, 0.5f, 1.5f, k_weight, CLI_D);
        for (int j = 0; j < 64; j++)
            inv_freq[j] = pow(1e6, -2.0 * j / (double)CLI_D);
        const gem_k_from_v rot = {NULL, inv_freq, 64, CLI_D / 2, 0};
        st = gem_engine_load_k_from_v(e, &shape, &in.in, o->dt.v, k_weight, &rot, copies);
        if (st == GEM_OK && (st = gem_engine_select_k_from_v(e, 1)) == GEM_OK &&
            (st = gem_engine_kv_host(e, &host_kv_b)) == GEM_OK)
            st = gem_engine_select_k_from_v(e, 0);
    } else {
        st = gem_engine_load_kv(e, &shape, &in.in, o->dt.k, o->dt.v, copies);
    }
    if (st == GEM_OK)
        st = gem_engine_kv_host(e, &host_kv);
    if (st != GEM_OK) {
        cli_error(CMD, "load at %lld tokens: %s", (long long)live, gem_status_str(st));
        goto done;
    }
    /* each route's defaults on the view it reads (a view of V alone may take other partitions:
     * gem_decode_config_for_view) */
    if (cli_route_bind(CMD, e, &ra_spec))
        goto done;
    if ((st = gem_engine_select_k_from_v(e, o->k_from_v)) != GEM_OK) {
        cli_error(CMD, "select the view of V alone: %s", gem_status_str(st));
        goto done;
    }
    const int bound_b = cli_route_bind(CMD, e, &rb_spec);
    if ((st = gem_engine_select_k_from_v(e, 0)) != GEM_OK) {
        cli_error(CMD, "select the view of K and V: %s", gem_status_str(st));
        goto done;
    }
    if (bound_b)
        goto done;
    cli_route_label(&ra_spec, la, sizeof la);
    cli_route_label(&rb_spec, lb, sizeof lb);
    /* validation: every copy holds the same data, so two runs of each route
     * on consecutive copies also check that the rotation changes nothing */
    cli_progress("bench %lld tokens: validating %s and %s", (long long)live, la, lb);
    if ((st = gem_engine_select_k_from_v(e, 0)) != GEM_OK ||
        (st = cli_route_run_checked(e, &ra_spec, n, 2, &ra)) != GEM_OK ||
        (st = gem_engine_select_k_from_v(e, o->k_from_v)) != GEM_OK ||
        (st = cli_route_run_checked(e, &rb_spec, n, 2, &rb)) != GEM_OK) {
        cli_error(CMD, "route %s at %lld tokens: %s", ra.out ? lb : la, (long long)live,
                  gem_status_str(st));
        goto done;
    }
    char what[96];
    snprintf(what, sizeof what, "bench %lld tokens: double-precision reference", (long long)live);
    cli_pair_check pc;
    if ((st = o->k_from_v
                  ? cli_pair_validate2(&shape, in.q, &host_kv, &host_kv_b, &ra, &rb, n, what, &pc)
                  : cli_pair_validate(&shape, in.q, &host_kv, &ra, &rb, n, o->check_double,
                                      what, &pc)) != GEM_OK) {
        cli_error(CMD, "double reference: %s", gem_status_str(st));
        goto done;
    }
    const gem_compare c_ab = pc.b_vs_a, c_ad = pc.a_vs_double, c_bd = pc.b_vs_double;
    const int valid = pc.passed;
    json_t *val = json_pack("{s:o, s:o, s:o}", "a", audit_json(&ra), "b", audit_json(&rb),
                            "b_vs_a", gem_receipt_compare(&c_ab));
    if (val && o->check_double) {
        json_object_set_new(val, "a_vs_double", gem_receipt_compare(&c_ad));
        json_object_set_new(val, "b_vs_double", gem_receipt_compare(&c_bd));
    }
    json_object_set_new(val, "passed", json_boolean(valid));
    json_t *c = json_pack("{s:I, s:o, s:o, s:I, s:f, s:o}", "live", (json_int_t)live, "seeds",
                          json_pack("{s:o, s:o, s:o, s:o}", "run", gem_receipt_u64(o->seed),
                                    "q", gem_receipt_u64(in.seeds.q), "k",
                                    gem_receipt_u64(in.seeds.k), "v",
                                    gem_receipt_u64(in.seeds.v)),
                          "input_sha256",
                          json_pack("{s:s, s:s, s:s}", "q", sha[0], "k", sha[1], "v", sha[2]),
                          "copies", (json_int_t)copies, "kv_bytes", kv_bytes, "validation",
                          val);
    if (c && o->k_from_v)
        json_object_set_new(c, "kv_bytes_b", gem_receipt_real(kv_bytes_b));
    if (!c || json_object_set_new(c, "routes", json_pack("{s:o, s:o}", "a",
                                                          cli_route_json(&ra_spec), "b",
                                                          cli_route_json(&rb_spec)))) {
        json_decref(c);
        cli_error(CMD, "out of memory building the record");
        goto done;
    }
    json_array_append_new(cases, c);
    if (!valid) {
        printf("%-8lld REFUSED to time: the outputs did not validate "
               "(b vs a corr %.9f nmse %.3e; finite %d/%d, unwritten %zu/%zu, guard %d/%d, "
               "repeat %d/%d)\n",
               (long long)live, c_ab.correlation, c_ab.nmse, ra.finite, rb.finite,
               ra.unwritten, rb.unwritten, ra.guard_ok, rb.guard_ok, ra.deterministic,
               rb.deterministic);
        json_object_set_new(c, "verdict", json_string("refused"));
        rc = 1;
        goto done;
    }

    const gem_route_params pa = {ra_spec.partitions, ra_spec.tile},
                           pb = {rb_spec.partitions, rb_spec.tile};
    cli_progress("bench %lld tokens: %lld warm-up and %lld ABBA rounds, %lld call%s a sample",
                 (long long)live, (long long)o->warmup, (long long)o->rounds,
                 (long long)o->calls, o->calls == 1 ? "" : "s");
    for (int64_t w = 0; w < o->warmup; w++) {
        double s;
        if ((st = gem_engine_select_k_from_v(e, 0)) != GEM_OK ||
            (st = gem_engine_run_calls(e, ra_spec.route, &pa, o->calls, &s)) != GEM_OK ||
            (st = gem_engine_select_k_from_v(e, o->k_from_v)) != GEM_OK ||
            (st = gem_engine_run_calls(e, rb_spec.route, &pb, o->calls, &s)) != GEM_OK) {
            cli_error(CMD, "warm-up: %s", gem_status_str(st));
            goto done;
        }
    }
    const size_t ns = (size_t)(2 * o->rounds);
    ta = malloc(ns * sizeof *ta);
    tb = malloc(ns * sizeof *tb);
    ratio = malloc(ns * sizeof *ratio);
    ha = malloc(ns * sizeof *ha);
    hb = malloc(ns * sizeof *hb);
    if (!ta || !tb || !ratio || !ha || !hb) {
        cli_error(CMD, "out of memory");
        goto done;
    }
    for (int64_t r = 0; r < o->rounds; r++) {
        /* A B B A: device seconds into ta/tb, host seconds per call into ha/hb */
        const cli_route_spec *order[4] = {&ra_spec, &rb_spec, &rb_spec, &ra_spec};
        const gem_route_params *par[4] = {&pa, &pb, &pb, &pa};
        double *dev[4] = {&ta[2 * r], &tb[2 * r], &tb[2 * r + 1], &ta[2 * r + 1]};
        double *host[4] = {&ha[2 * r], &hb[2 * r], &hb[2 * r + 1], &ha[2 * r + 1]};
        for (int k = 0; k < 4 && st == GEM_OK; k++) {
            st = gem_engine_select_k_from_v(e, o->k_from_v && order[k] == &rb_spec);
            if (st == GEM_OK)
                st = gem_engine_run_calls(e, order[k]->route, par[k], o->calls, dev[k]);
            *host[k] = gem_engine_last_host_seconds(e);
        }
        if (st != GEM_OK) {
            cli_error(CMD, "timed run: %s", gem_status_str(st));
            goto done;
        }
        ratio[2 * r] = ta[2 * r] / tb[2 * r];
        ratio[2 * r + 1] = ta[2 * r + 1] / tb[2 * r + 1];
    }
    /* the last timed run's output must still be whole */
    {
        gem_output_audit au;
        float *tmp = malloc(n * sizeof(float));
        if (!tmp || gem_engine_output(e, tmp, n, &au) != GEM_OK || au.unwritten || !au.guard_ok) {
            free(tmp);
            cli_error(CMD, "the last timed output failed its audit");
            rc = 1;
            goto done;
        }
        free(tmp);
    }
    const stats sa = stats_of(ta, ns), sb = stats_of(tb, ns), sr = stats_of(ratio, ns);
    const double ga = kv_bytes / sa.median / 1e9, gb = kv_bytes_b / sb.median / 1e9;
    const double floor_s = kv_bytes / bw, floor_b = kv_bytes_b / bw;
    printf("%-8lld %-16s %9.3f %9.3f %9.3f %8.2f %6.1f%% %7.2fx\n", (long long)live, la,
           sa.min * 1e3, sa.median * 1e3, sa.max * 1e3, ga, 100.0 * ga * 1e9 / bw,
           sa.median / floor_s);
    printf("%-8s %-16s %9.3f %9.3f %9.3f %8.2f %6.1f%% %7.2fx\n", "", lb, sb.min * 1e3,
           sb.median * 1e3, sb.max * 1e3, gb, 100.0 * gb * 1e9 / bw, sb.median / floor_b);
    printf("%-8s A/B ratio median %.3f (pairs %zu, min %.3f, max %.3f); floor %.3f ms", "",
           sr.median, ns, sr.min, sr.max, floor_s * 1e3);
    if (o->k_from_v)
        printf(" (B, V alone: %.3f ms)", floor_b * 1e3);
    printf("\n");
    if (nominal > 0)
        printf("%-8s of the nominal %.0f GB/s: A %.1f%%, B %.1f%%\n", "", nominal / 1e9,
               100.0 * ga * 1e9 / nominal, 100.0 * gb * 1e9 / nominal);
    /* a route that reads faster than the probe shows the probe is not the ceiling */
    if (ga * 1e9 > bw || gb * 1e9 > bw)
        fprintf(stderr,
                "gem bench: warning: at %lld tokens %s read %.1f%% of the read-bandwidth probe: "
                "the probe is the weaker reader, so its floor time is too long\n",
                (long long)live, ga >= gb ? la : lb, 100.0 * (ga >= gb ? ga : gb) * 1e9 / bw);
    fflush(stdout);
    json_t *timing = json_pack(
        "{s:I, s:I, s:I, s:{s:o, s:o}, s:{s:o, s:o}, s:{s:o, s:o}}", "rounds",
        (json_int_t)o->rounds, "warmup", (json_int_t)o->warmup, "calls_per_sample",
        (json_int_t)o->calls, "a", "seconds", samples_json(ta, ns), "stats",
        stats_json(sa), "b", "seconds", samples_json(tb, ns), "stats", stats_json(sb),
        "ratio_a_over_b", "pairs", samples_json(ratio, ns), "stats", stats_json(sr));
    json_object_set_new(c, "timing", timing);
    json_object_set_new(c, "floor_seconds", gem_receipt_real(floor_s));
    if (o->k_from_v)
        json_object_set_new(c, "floor_seconds_b", gem_receipt_real(floor_b));
    json_object_set_new(c, "gbps", json_pack("{s:o, s:o}", "a", gem_receipt_real(ga), "b",
                                              gem_receipt_real(gb)));
    json_object_set_new(c, "fraction_of_read_bandwidth",
                        json_pack("{s:o, s:o}", "a", gem_receipt_real(ga * 1e9 / bw), "b",
                                  gem_receipt_real(gb * 1e9 / bw)));
    if (nominal > 0)
        json_object_set_new(c, "fraction_of_nominal_bandwidth",
                            json_pack("{s:o, s:o}", "a", gem_receipt_real(ga * 1e9 / nominal),
                                      "b", gem_receipt_real(gb * 1e9 / nominal)));
    const stats sta = stats_of(ha, ns), stb = stats_of(hb, ns);
    json_object_set_new(c, "host_seconds_per_call",
                        json_pack("{s:o, s:o}", "a", stats_json(sta), "b", stats_json(stb)));
    printf("%-8s host time per call (median): A %.1f us, B %.1f us\n", "", sta.median * 1e6,
           stb.median * 1e6);
    json_object_set_new(c, "verdict", json_string("timed"));
    rc = 0;
done:
    free(ta);
    free(tb);
    free(ratio);
    free(ha);
    free(hb);
    cli_route_result_free(&ra);
    cli_route_result_free(&rb);
    gem_inputs_free(&in);
    return rc;
}

static int parse_route_opt(const char *a, const char *v, bench_opts *o)
{
    cli_route_spec *s = (a[2] == 'a') ? &o->a : &o->b;
    const char *rest = a + 3; /* after "--a" / "--b" */
    if (*rest == '\0') {
        if (gem_route_parse(v, &s->route) != GEM_OK) {
            cli_error(CMD, "%s '%s' is not reference, online, baseline or fused", a, v);
            return -1;
        }
    } else if (!strcmp(rest, "-partitions")) {
        if (cli_parse_i64(v, 1, GEM_DECODE_MAX_PARTITIONS, &s->partitions)) {
            cli_error(CMD, "%s '%s' is not in [1, %d]", a, v, GEM_DECODE_MAX_PARTITIONS);
            return -1;
        }
    } else if (!strcmp(rest, "-tile")) {
        if (cli_parse_i64(v, 1, GEM_DECODE_MAX_TILE, &s->tile)) {
            cli_error(CMD, "%s '%s' is not in [1, %d]", a, v, GEM_DECODE_MAX_TILE);
            return -1;
        }
    } else {
        cli_error(CMD, "unknown option '%s' (see --help)", a);
        return -1;
    }
    return 0;
}

int gem_cmd_bench(int argc, char **argv)
{
    bench_opts o;
    memset(&o, 0, sizeof o);
    o.a.route = GEM_ROUTE_BASELINE;
    o.b.route = GEM_ROUTE_FUSED;
    o.n_lengths = sizeof default_lengths / sizeof default_lengths[0];
    memcpy(o.lengths, default_lengths, sizeof default_lengths);
    o.rounds = 5;
    o.warmup = 1;
    o.calls = 1;
    o.bw_mib = 1024;
    o.bw_reps = 5;
    o.backend = GEM_BACKEND_CPU;
    o.seed = 1;
    o.scale = 1.0f / sqrtf((float)CLI_D);
    o.check_double = 1;
    o.dt.k = o.dt.v = GEM_DTYPE_F32;
    o.out = "gem-bench.json";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        }
        if (!strcmp(a, "--no-double")) {
            o.check_double = 0;
            continue;
        }
        if (!strcmp(a, "--k-from-v")) {
            o.k_from_v = 1;
            continue;
        }
        if (!v) {
            cli_error(CMD, "unknown option or missing value: '%s' (see --help)", a);
            return 2;
        }
        i++;
        int bad = 0;
        if (cli_kv_dtype_option(a, v, &o.dt, &bad))
            ;
        else if (!strncmp(a, "--a", 3) && (a[3] == '\0' || a[3] == '-'))
            bad = parse_route_opt(a, v, &o);
        else if (!strncmp(a, "--b", 3) && (a[3] == '\0' || a[3] == '-') &&
                 strncmp(a, "--bw-", 5) != 0 && strcmp(a, "--backend") != 0)
            bad = parse_route_opt(a, v, &o);
        else if (!strcmp(a, "--lengths"))
            bad = cli_parse_i64_list(v, 1, (int64_t)1 << 24, o.lengths, MAX_LENGTHS,
                                     &o.n_lengths);
        else if (!strcmp(a, "--rounds"))
            bad = cli_parse_i64(v, 1, MAX_ROUNDS, &o.rounds);
        else if (!strcmp(a, "--warmup"))
            bad = cli_parse_i64(v, 0, MAX_ROUNDS, &o.warmup);
        else if (!strcmp(a, "--calls"))
            bad = cli_parse_i64(v, 1, GEM_ENGINE_MAX_CALLS, &o.calls);
        else if (!strcmp(a, "--copies"))
            bad = cli_parse_i64(v, 0, 64, &o.copies);
        else if (!strcmp(a, "--threads"))
            bad = cli_parse_i64(v, 0, 4096, &o.threads);
        else if (!strcmp(a, "--bw-mib"))
            bad = cli_parse_i64(v, 1, 1 << 20, &o.bw_mib);
        else if (!strcmp(a, "--bw-reps"))
            bad = cli_parse_i64(v, 1, 1000, &o.bw_reps);
        else if (!strcmp(a, "--seed"))
            bad = cli_parse_u64(v, &o.seed);
        else if (!strcmp(a, "--backend"))
            bad = gem_backend_parse(v, &o.backend) != GEM_OK;
        else if (!strcmp(a, "--scale"))
            bad = cli_parse_f32(v, FLT_MIN, FLT_MAX, &o.scale);
        else if (!strcmp(a, "--out"))
            o.out = v;
        else {
            cli_error(CMD, "unknown option '%s' (see --help)", a);
            return 2;
        }
        if (bad) {
            /* the route options print their own message */
            if (strncmp(a, "--a", 3) && strncmp(a, "--b", 3))
                cli_error(CMD, "bad value '%s' for %s (see --help)", v, a);
            else if (!strcmp(a, "--backend") || !strncmp(a, "--bw-", 5))
                cli_error(CMD, "bad value '%s' for %s (see --help)", v, a);
            return 2;
        }
    }
    if (cli_route_resolve(CMD, &o.a) || cli_route_resolve(CMD, &o.b))
        return 2;
    if (o.k_from_v && (o.b.route != GEM_ROUTE_FUSED || !o.check_double || o.dt.k != o.dt.v)) {
        cli_error(CMD, "--k-from-v needs --b fused (the route that rebuilds K), the double "
                       "reference (no --no-double) and one element type for K and V");
        return 2;
    }
    if (cli_check_output(CMD, "--out", o.out, NULL, 0))
        return 2;
    for (size_t i = 0; i < o.n_lengths; i++) { /* the largest copies x length the run loads */
        const int64_t c =
            o.copies ? o.copies : default_copies(o.backend, cli_kv_bytes(&o.dt, o.lengths[i]));
        if (cli_check_load_memory(CMD, o.backend, &o.dt, o.lengths[i], c))
            return 2;
    }
    gem_engine *e = NULL;
    gem_status st = gem_engine_create(o.backend, o.threads, &e);
    if (st != GEM_OK) {
        cli_error(CMD, "cannot start the %s backend: %s", gem_backend_name(o.backend),
                  gem_status_str(st));
        return 2;
    }
    const size_t bw_bytes = (size_t)o.bw_mib << 20;
    cli_progress("bench: measuring read bandwidth over %lld MiB, %lld reps", (long long)o.bw_mib,
                 (long long)o.bw_reps);
    double bw = 0;
    st = gem_engine_read_bandwidth(e, bw_bytes, o.bw_reps, &bw);
    if (st != GEM_OK) {
        cli_error(CMD, "read bandwidth: %s", gem_status_str(st));
        gem_engine_destroy(e);
        return 2;
    }
    double nominal = 0; /* CUDA: the device's nominal bandwidth; 0 where unknown */
    if (o.backend == GEM_BACKEND_CUDA && (st = gem_engine_nominal_bandwidth(e, &nominal)) != GEM_OK) {
        cli_error(CMD, "nominal bandwidth: %s", gem_status_str(st));
        gem_engine_destroy(e);
        return 2;
    }
    char la[64], lb[64];
    cli_route_label(&o.a, la, sizeof la);
    cli_route_label(&o.b, lb, sizeof lb);
    printf("gem bench: A = %s, B = %s on %s; K %s, V %s%s\n", la, lb, gem_engine_describe(e),
           gem_dtype_name(o.dt.k), gem_dtype_name(o.dt.v),
           o.k_from_v ? "; B reads V alone and rebuilds K (--k-from-v)" : "");
    if (o.calls > 1)
        printf("times per call: %lld calls queued back to back a sample, their time / %lld\n",
               (long long)o.calls, (long long)o.calls);
    printf("read bandwidth %.2f GB/s (%lld MiB streaming read, the best reader's median of %lld)\n",
           bw / 1e9, (long long)o.bw_mib, (long long)o.bw_reps);
    if (nominal > 0)
        printf("nominal bandwidth %.2f GB/s (memory clock x bus width); the probe reads %.1f%% of it\n",
               nominal / 1e9, 100.0 * bw / nominal);
    printf("%-8s %-16s %9s %9s %9s %8s %7s %8s\n", "live", "route", "min ms", "med ms", "max ms",
           "GB/s", "of bw", "x floor");
    json_t *doc = gem_receipt_new("gem.bench.v1", "gem bench", cli_git_commit());
    json_t *cases = json_array();
    int worst = 0;
    if (!doc || !cases ||
        json_object_set_new(doc, "backend", json_string(gem_backend_name(o.backend))) ||
        json_object_set_new(doc, "device", json_string(gem_engine_describe(e))) ||
        json_object_set_new(doc, "threads", json_integer((json_int_t)gem_engine_threads(e))) ||
        json_object_set_new(doc, "geometry", cli_geometry_json(&(gem_attn_shape){
                                                 CLI_NQ, CLI_NKV, CLI_D, CLI_D, 0, 0, o.scale},
                                                               &o.dt)) ||
        json_object_set_new(doc, "kv_dtype", cli_kv_dtype_json(&o.dt)) ||
        json_object_set_new(doc, "route_a", cli_route_json(&o.a)) ||
        json_object_set_new(doc, "route_b", cli_route_json(&o.b)) ||
        json_object_set_new(doc, "k_from_v", json_boolean(o.k_from_v)) ||
        json_object_set_new(doc, "read_bandwidth",
                            json_pack("{s:I, s:I, s:o}", "bytes", (json_int_t)bw_bytes, "reps",
                                      (json_int_t)o.bw_reps, "bytes_per_second",
                                      gem_receipt_real(bw))) ||
        (nominal > 0 && json_object_set_new(doc, "nominal_bandwidth_bytes_per_second",
                                            gem_receipt_real(nominal))) ||
        json_object_set(doc, "cases", cases)) {
        cli_error(CMD, "out of memory");
        worst = 2;
    }
    for (size_t i = 0; worst < 2 && i < o.n_lengths; i++) {
        const int rc = bench_length(&o, e, bw, nominal, o.lengths[i], cases);
        if (rc > worst)
            worst = rc;
    }
    if (worst < 2) {
        json_object_set_new(doc, "verdict", json_string(worst == 0 ? "timed" : "refused"));
        char why[256];
        st = gem_receipt_save(o.out, doc, why, sizeof why);
        if (st != GEM_OK) {
            cli_error(CMD, "cannot write %s: %s", o.out, why);
            worst = 2;
        } else {
            printf("record %s\n", o.out);
        }
    }
    json_decref(cases);
    json_decref(doc);
    gem_engine_destroy(e);
    return worst;
}
