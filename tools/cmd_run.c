/*
 * gem run (and `gem` alone): the main job. One decode step of a Gemma-4
 * full-attention layer (32 query heads, 4 KV heads, D512; KV cache in F32 by
 * default, BF16 or F16 with --kv-dtype) at a long context with the fused
 * split-KV route, checked against the three-stage baseline route and the
 * double-precision reference on the same (rounded) inputs, timed against the
 * read bandwidth measured in the same run, summarized in a few lines; writes
 * a gem.run.v1 summary with --json (docs/receipts-run.md).
 * Exit status: 0 pass, 1 a check failed, 2 bad usage or input.
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

#define CMD "run"
#define TIMED_ROUNDS 3 /* F B B F rounds: 6 samples per route */

static void help(void)
{
    printf("usage: gem [run] [options]\n\n"
           "One decode step of a Gemma-4 full-attention layer (32 query heads, 4 KV heads,\n"
           "D512) at a long context: the fused split-KV route, checked against the\n"
           "three-stage baseline route and the double-precision reference on the same seeded\n"
           "inputs, timed (both routes interleaved F B B F, %d rounds after a warm-up;\n"
           "medians) against the read bandwidth measured in the same run. Inputs are\n"
           "generated in F32; K and V are rounded to their type as they enter the cache,\n"
           "and the reference reads the rounded values.\n\n"
           "options:\n"
           "  --live N         context tokens (default 65536; 64K / 128K suffixes ok)\n"
           "  --backend B      cpu or cuda (default cpu)\n"
           "  --threads N      CPU threads, 0 = one per core (default 0)\n"
           "  --seed S         run seed of the inputs (default 1)\n"
           "  --scale X        score scale (default 1/sqrt(512))\n"
           "  --partitions P   fused sequence partitions (default: the tuned default)\n"
           "  --tile T         fused tokens per tile (default: the tuned default)\n"
           "  --kv-dtype T     K and V element type: f32, bf16, f16 or fp8_e4m3 (a scale\n"
           "                   per KV head; CUDA: both FP8, fused) (default f32)\n"
           "  --k-dtype T      K alone (after --kv-dtype)\n"
           "  --v-dtype T      V alone (after --kv-dtype)\n"
           "  --no-double      skip the double-reference check\n"
           "  --json PATH      also write a gem.run.v1 JSON summary\n"
           "  -h, --help       this text\n\n"
           "exit status: 0 pass, 1 a check failed, 2 bad usage or input\n",
           TIMED_ROUNDS);
}

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Times the fused (f) and baseline (b) routes interleaved F B B F over
 * TIMED_ROUNDS rounds after one warm-up run of each, so both see the same
 * machine conditions; medians, minima and maxima of the 2*TIMED_ROUNDS samples. */
static gem_status time_routes(gem_engine *e, const cli_route_spec *f, const cli_route_spec *b,
                              double fs[3], double bs[3])
{
    const gem_route_params pf = {f->partitions, f->tile}, pb = {b->partitions, b->tile};
    double tf[2 * TIMED_ROUNDS], tb[2 * TIMED_ROUNDS], w;
    gem_status st = gem_engine_run(e, f->route, &pf, &w);
    if (st == GEM_OK)
        st = gem_engine_run(e, b->route, &pb, &w);
    for (int i = 0; st == GEM_OK && i < TIMED_ROUNDS; i++) {
        st = gem_engine_run(e, f->route, &pf, &tf[2 * i]);
        if (st == GEM_OK)
            st = gem_engine_run(e, b->route, &pb, &tb[2 * i]);
        if (st == GEM_OK)
            st = gem_engine_run(e, b->route, &pb, &tb[2 * i + 1]);
        if (st == GEM_OK)
            st = gem_engine_run(e, f->route, &pf, &tf[2 * i + 1]);
    }
    if (st != GEM_OK)
        return st;
    qsort(tf, 2 * TIMED_ROUNDS, sizeof tf[0], cmp_double);
    qsort(tb, 2 * TIMED_ROUNDS, sizeof tb[0], cmp_double);
    fs[0] = tf[0];
    fs[1] = 0.5 * (tf[TIMED_ROUNDS - 1] + tf[TIMED_ROUNDS]);
    fs[2] = tf[2 * TIMED_ROUNDS - 1];
    bs[0] = tb[0];
    bs[1] = 0.5 * (tb[TIMED_ROUNDS - 1] + tb[TIMED_ROUNDS]);
    bs[2] = tb[2 * TIMED_ROUNDS - 1];
    return GEM_OK;
}

int gem_cmd_run(int argc, char **argv)
{
    int64_t live = 65536, threads = 0;
    uint64_t seed = 1;
    float scale = 1.0f / sqrtf((float)CLI_D);
    gem_backend backend = GEM_BACKEND_CPU;
    cli_route_spec fused = {GEM_ROUTE_FUSED, 0, 0}, base = {GEM_ROUTE_BASELINE, 0, 0};
    int check_double = 1;
    cli_kv_dtypes dt = {GEM_DTYPE_F32, GEM_DTYPE_F32};
    const char *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        }
        if (!strcmp(a, "--no-double")) {
            check_double = 0;
            continue;
        }
        if (!v) {
            cli_error(CMD, "unknown option or missing value: '%s' (see --help)", a);
            return 2;
        }
        i++;
        int bad = 0;
        if (cli_kv_dtype_option(a, v, &dt, &bad))
            ;
        else if (!strcmp(a, "--live"))
            bad = cli_parse_i64_list(v, 1, (int64_t)1 << 24, &live, 1, &(size_t){0});
        else if (!strcmp(a, "--backend"))
            bad = gem_backend_parse(v, &backend) != GEM_OK;
        else if (!strcmp(a, "--threads"))
            bad = cli_parse_i64(v, 0, 4096, &threads);
        else if (!strcmp(a, "--seed"))
            bad = cli_parse_u64(v, &seed);
        else if (!strcmp(a, "--scale"))
            bad = cli_parse_f32(v, FLT_MIN, FLT_MAX, &scale);
        else if (!strcmp(a, "--partitions"))
            bad = cli_parse_i64(v, 1, GEM_DECODE_MAX_PARTITIONS, &fused.partitions);
        else if (!strcmp(a, "--tile"))
            bad = cli_parse_i64(v, 1, GEM_DECODE_MAX_TILE, &fused.tile);
        else if (!strcmp(a, "--json"))
            json_path = v;
        else {
            cli_error(CMD, "unknown option '%s' (see --help)", a);
            return 2;
        }
        if (bad) {
            cli_error(CMD, "bad value '%s' for %s (see --help)", v, a);
            return 2;
        }
    }
    if (cli_route_resolve(CMD, &fused) || cli_route_resolve(CMD, &base))
        return 2;
    if ((json_path && cli_check_output(CMD, "--json", json_path, NULL, 0)) ||
        cli_check_load_memory(CMD, backend, &dt, live, 1))
        return 2;

    const double t_start = cli_now();
    const gem_attn_shape shape = cli_production_shape(live, scale);
    const double kv_bytes = cli_kv_bytes(&dt, live);
    char tag[32];
    cli_kv_dtype_tag(&dt, tag, sizeof tag);
    gem_engine *e = NULL;
    gem_status st = gem_engine_create(backend, threads, &e);
    if (st != GEM_OK) {
        cli_error(CMD, "cannot start the %s backend: %s", gem_backend_name(backend),
                  gem_status_str(st));
        return 2;
    }
    int rc = 2;
    gem_owned_inputs in;
    memset(&in, 0, sizeof in);
    cli_route_result rf = {0}, rb = {0};
    json_t *doc = NULL;
    cli_progress("gem: measuring read bandwidth (512 MiB streaming read, median of 5)");
    double bw = 0;
    st = gem_engine_read_bandwidth(e, (size_t)1 << 29, 5, &bw);
    if (st != GEM_OK) {
        cli_error(CMD, "read bandwidth: %s", gem_status_str(st));
        goto done;
    }
    cli_progress("gem: generating %lld tokens of seeded K/V (%.2f GiB in %s)", (long long)live,
                 kv_bytes / 1073741824.0, tag);
    st = gem_inputs_make(&shape, seed, &in);
    if (st != GEM_OK) {
        cli_error(CMD, "inputs at %lld tokens: %s", (long long)live, gem_status_str(st));
        goto done;
    }
    cli_progress("gem: loading into the %s engine", gem_backend_name(backend));
    st = gem_engine_load_kv(e, &shape, &in.in, dt.k, dt.v, 1);
    gem_kv_view host_kv;
    if (st == GEM_OK)
        st = gem_engine_kv_host(e, &host_kv);
    if (st != GEM_OK) {
        cli_error(CMD, "load: %s", gem_status_str(st));
        goto done;
    }
    if (cli_route_bind(CMD, e, &fused) || cli_route_bind(CMD, e, &base))
        goto done;
    size_t n = 0;
    gem_attn_shape_elems(&shape, NULL, NULL, NULL, &n);
    cli_progress("gem: checking the fused route against the baseline route");
    if ((st = cli_route_run_checked(e, &fused, n, 2, &rf)) != GEM_OK ||
        (st = cli_route_run_checked(e, &base, n, 2, &rb)) != GEM_OK) {
        cli_error(CMD, "route %s: %s", rf.out ? "baseline" : "fused", gem_status_str(st));
        goto done;
    }
    cli_pair_check pc;
    if ((st = cli_pair_validate(&shape, in.q, &host_kv, &rb, &rf, n, check_double,
                                "gem: double-precision reference (single thread)", &pc)) !=
        GEM_OK) {
        cli_error(CMD, "double reference: %s", gem_status_str(st));
        goto done;
    }
    const gem_compare c_fb = pc.b_vs_a, c_fd = pc.b_vs_double;
    const int pass = pc.passed;
    double fs[3] = {NAN, NAN, NAN}, bs[3] = {NAN, NAN, NAN};
    if (pass) {
        cli_progress("gem: timing the fused and baseline routes (F B B F x %d after a warm-up)",
                     TIMED_ROUNDS);
        if ((st = time_routes(e, &fused, &base, fs, bs)) != GEM_OK) {
            cli_error(CMD, "timed run: %s", gem_status_str(st));
            goto done;
        }
    }
    const double fmed = fs[1], fmin = fs[0], fmax = fs[2], bmed = bs[1];
    const double gbps = kv_bytes / fmed / 1e9, floor_s = kv_bytes / bw;
    char fl[64];
    cli_route_label(&fused, fl, sizeof fl);
    printf("gem: one decode step, 32 query heads / 4 KV heads, D512, %s K / %s V\n",
           gem_dtype_name(dt.k), gem_dtype_name(dt.v));
    printf("  context      %lld tokens (K+V %.2f GiB)\n", (long long)live,
           kv_bytes / 1073741824.0);
    printf("  device       %s\n", gem_engine_describe(e));
    if (pass) {
        printf("  fused        %s: %.2f ms (median of %d; min %.2f, max %.2f)\n", fl,
               fmed * 1e3, 2 * TIMED_ROUNDS, fmin * 1e3, fmax * 1e3);
        printf("  throughput   %.2f GB/s = %.1f%% of the measured read bandwidth %.2f GB/s\n",
               gbps, 100.0 * gbps * 1e9 / bw, bw / 1e9);
        printf("               (memory floor %.2f ms; fused at %.2fx the floor)\n",
               floor_s * 1e3, fmed / floor_s);
        printf("  baseline     %.2f ms median (interleaved) -> fused is %.2fx faster\n",
               bmed * 1e3, bmed / fmed);
    } else {
        printf("  timing       not timed: the outputs did not validate\n");
    }
    printf("  agreement    fused vs baseline: corr %.12f  NMSE %.2e  max|d| %.2e\n",
           c_fb.correlation, c_fb.nmse, c_fb.max_abs);
    if (check_double)
        printf("               fused vs double:   corr %.12f  NMSE %.2e  max|d| %.2e\n",
               c_fd.correlation, c_fd.nmse, c_fd.max_abs);
    printf("  checks       finite %s, all written %s, guard %s, repeat-identical %s\n",
           (rf.finite && rb.finite) ? "yes" : "NO",
           (rf.unwritten == 0 && rb.unwritten == 0) ? "yes" : "NO",
           (rf.guard_ok && rb.guard_ok) ? "ok" : "DAMAGED",
           (rf.deterministic && rb.deterministic) ? "yes" : "NO");
    printf("  verdict      %s (gates: correlation >= %g, NMSE <= %g)\n",
           pass ? "PASS" : "FAIL", CLI_MIN_CORRELATION, CLI_MAX_NMSE);
    printf("  wall         %.1f s in all\n", cli_now() - t_start);
    fflush(stdout);
    rc = pass ? 0 : 1;
    if (json_path) {
        char why[256];
        doc = gem_receipt_new("gem.run.v1", "gem run", cli_git_commit());
        if (!doc ||
            json_object_set_new(doc, "backend", json_string(gem_backend_name(backend))) ||
            json_object_set_new(doc, "device", json_string(gem_engine_describe(e))) ||
            json_object_set_new(doc, "threads", json_integer((json_int_t)gem_engine_threads(e))) ||
            json_object_set_new(doc, "geometry", cli_geometry_json(&shape, &dt)) ||
            json_object_set_new(doc, "kv_dtype", cli_kv_dtype_json(&dt)) ||
            json_object_set_new(doc, "kv_bytes", json_real(kv_bytes)) ||
            json_object_set_new(doc, "route", cli_route_json(&fused)) ||
            json_object_set_new(doc, "check_route", cli_route_json(&base)) ||
            json_object_set_new(doc, "seed", gem_receipt_u64(seed)) ||
            json_object_set_new(doc, "output_sha256",
                                json_pack("{s:s, s:s}", "fused", rf.sha256, "baseline",
                                          rb.sha256)) ||
            json_object_set_new(doc, "read_bandwidth_bytes_per_second", gem_receipt_real(bw)) ||
            json_object_set_new(doc, "seconds_median",
                                json_pack("{s:o, s:o}", "fused", gem_receipt_real(fmed),
                                          "baseline", gem_receipt_real(bmed))) ||
            json_object_set_new(doc, "gbps", gem_receipt_real(gbps)) ||
            json_object_set_new(doc, "fraction_of_read_bandwidth",
                                gem_receipt_real(gbps * 1e9 / bw)) ||
            json_object_set_new(doc, "fused_vs_baseline", gem_receipt_compare(&c_fb)) ||
            (check_double &&
             json_object_set_new(doc, "fused_vs_double", gem_receipt_compare(&c_fd))) ||
            json_object_set_new(doc, "verdict", json_string(pass ? "pass" : "fail"))) {
            cli_error(CMD, "out of memory building the JSON summary");
            rc = 2;
        } else if ((st = gem_receipt_save(json_path, doc, why, sizeof why)) != GEM_OK) {
            cli_error(CMD, "cannot write %s: %s", json_path, why);
            rc = 2;
        }
    }
done:
    json_decref(doc);
    cli_route_result_free(&rf);
    cli_route_result_free(&rb);
    gem_inputs_free(&in);
    gem_engine_destroy(e);
    return rc;
}
