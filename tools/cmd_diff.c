/*
 * gem diff: operator differential of two routes on the same seeded inputs.
 *
 * For each live length: generate the inputs (gem_inputs_make, F32), load them
 * into one engine (K and V rounded to their element types, --kv-dtype), run
 * the reference route and the candidate route twice each
 * (poisoned, audited outputs; repeat determinism by SHA-256), compute the
 * double-precision reference on the values the routes read (the engine's host
 * view of the rounded cache), compare all three pairwise and write one raw
 * "gem.diff.v1" record (docs/receipts-diff.md) named by the case id.
 * Exit status: 0 every length passed, 1 a gate failed, 2 bad usage or input.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_routes.h"
#include "gem/check.h"
#include "gem/engine.h"
#include "gem/receipt.h"

#define CMD "diff"
#define MAX_LENGTHS 64

static const int64_t default_lengths[] = {8191, 8192, 8193, 65536, 131072};

static void help(void)
{
    printf("usage: gem diff [options]\n\n"
           "Runs two routes on the same seeded inputs (32 query heads, 4 KV heads, D512; K and\n"
           "V generated in F32 and rounded to --kv-dtype) at each length, twice each, and\n"
           "compares them with each other and with the double-precision reference on the\n"
           "same rounded values. Gates: correlation >= %g and NMSE <= %g for every\n"
           "pair; any NaN, unwritten element, damaged guard or repeat mismatch fails.\n"
           "Writes one gem.diff.v1 JSON record per length (docs/receipts-diff.md).\n\n"
           "options:\n"
           "  --lengths L,L,..   live tokens (default 8191,8192,8193,65536,131072; 64K ok)\n"
           "  --backend B        cpu or cuda (default cpu)\n"
           "  --threads N        CPU threads, 0 = one per core (default 0)\n"
           "  --seed S           run seed of the inputs (default 1)\n"
           "  --scale X          score scale (default 1/sqrt(512))\n"
           "  --route R          candidate route (default fused)\n"
           "  --partitions P     candidate partitions (default: the backend's tuned\n"
           "                     default at each length, e.g. fused P 31 at 8191 tokens on\n"
           "                     the CPU, 64 on an H200; --design for the gate's 32)\n"
           "  --tile T           candidate tile (default: the backend's, 4 on the CPU, 8\n"
           "                     on CUDA; the gate's 4 runs on the CPU only)\n"
           "  --ref-route R      reference route (default baseline)\n"
           "  --ref-partitions P reference route partitions (default 16 for baseline)\n"
           "  --ref-tile T       reference route tile (fused only)\n"
           "  --design           the routes of the design's operator gate: fused P 32 tile\n"
           "                     4 against baseline P 16 (the CPU only; not with the route\n"
           "                     options). With the default lengths, seed, scale and F32,\n"
           "                     its records are the five gem analyze correctness takes\n"
           "  --kv-dtype T       K and V element type: f32, bf16, f16 or fp8_e4m3 (a scale\n"
           "                     per KV head; CUDA: both FP8, fused) (default f32)\n"
           "  --k-dtype T        K alone (after --kv-dtype)\n"
           "  --v-dtype T        V alone (after --kv-dtype)\n"
           "  --out DIR          where records go (default gem-diff; created)\n"
           "  -h, --help         this text\n\n"
           "exit status: 0 all lengths pass, 1 a gate failed, 2 bad usage or input\n",
           CLI_MIN_CORRELATION, CLI_MAX_NMSE);
}

typedef struct diff_opts {
    int64_t lengths[MAX_LENGTHS];
    size_t n_lengths;
    gem_backend backend;
    int64_t threads;
    uint64_t seed;
    float scale;
    cli_route_spec cand, ref;
    cli_kv_dtypes dt;
    const char *out_dir;
} diff_opts;

static int make_dir(const char *path)
{
    if (mkdir(path, 0777) == 0 || errno == EEXIST)
        return 0;
    return -1;
}

static void print_cmp(const char *what, const gem_compare *c)
{
    printf("    %-22s corr %.12f  nmse %.3e  max_abs %.3e%s\n", what, c->correlation, c->nmse,
           c->max_abs, cli_compare_passes(c) ? "" : "  FAIL");
}

/* One length; returns 0 pass, 1 fail, 2 error (message printed). */
static int diff_length(const diff_opts *o, gem_engine *e, int64_t live)
{
    const gem_attn_shape shape = cli_production_shape(live, o->scale);
    char cand_label[64], ref_label[64], case_id[256], tag[32];
    cli_route_spec cand = o->cand, ref = o->ref; /* bound to the loaded inputs below */
    cli_progress("diff %lld tokens: generating inputs", (long long)live);
    gem_owned_inputs in;
    gem_status st = gem_inputs_make(&shape, o->seed, &in);
    if (st != GEM_OK) {
        cli_error(CMD, "inputs at %lld tokens: %s", (long long)live, gem_status_str(st));
        return 2;
    }
    int rc = 2;
    cli_route_result rr = {0}, cr = {0};
    json_t *doc = NULL;
    char sha[3][65];
    size_t n = 0;
    gem_attn_shape_elems(&shape, NULL, NULL, NULL, &n);
    gem_inputs_sha256(&in, sha); /* cannot fail: the buffers exist and fit */

    cli_progress("diff %lld tokens: loading into the %s engine", (long long)live,
                 gem_backend_name(o->backend));
    st = gem_engine_load_kv(e, &shape, &in.in, o->dt.k, o->dt.v, 1);
    gem_kv_view host_kv;
    if (st == GEM_OK)
        st = gem_engine_kv_host(e, &host_kv);
    if (st != GEM_OK) {
        cli_error(CMD, "load at %lld tokens: %s", (long long)live, gem_status_str(st));
        goto done;
    }
    if (cli_route_bind(CMD, e, &cand) || cli_route_bind(CMD, e, &ref))
        goto done;
    cli_route_label(&cand, cand_label, sizeof cand_label);
    cli_route_label(&ref, ref_label, sizeof ref_label);
    cli_kv_dtype_tag(&o->dt, tag, sizeof tag);
    snprintf(case_id, sizeof case_id, "diff-%s-%s-vs-%s-live%lld-%s-seed%llu",
             gem_backend_name(o->backend), cand_label, ref_label, (long long)live, tag,
             (unsigned long long)o->seed);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.json", o->out_dir, case_id);
    if (cli_check_output(CMD, "the record", path, NULL, 0)) /* before the work, not after */
        goto done;
    cli_progress("%s: reference route %s, two runs", case_id, ref_label);
    st = cli_route_run_checked(e, &ref, n, 2, &rr);
    if (st != GEM_OK) {
        cli_error(CMD, "route %s at %lld tokens: %s", ref_label, (long long)live,
                  gem_status_str(st));
        goto done;
    }
    cli_progress("%s: candidate route %s, two runs", case_id, cand_label);
    st = cli_route_run_checked(e, &cand, n, 2, &cr);
    if (st != GEM_OK) {
        cli_error(CMD, "route %s at %lld tokens: %s", cand_label, (long long)live,
                  gem_status_str(st));
        goto done;
    }
    char what[300];
    snprintf(what, sizeof what, "%s: double-precision reference (single thread)", case_id);
    cli_pair_check pc;
    if ((st = cli_pair_validate(&shape, in.q, &host_kv, &rr, &cr, n, 1, what, &pc)) != GEM_OK) {
        cli_error(CMD, "double reference at %lld tokens: %s", (long long)live,
                  gem_status_str(st));
        goto done;
    }
    const gem_compare c_cr = pc.b_vs_a, c_rd = pc.a_vs_double, c_cd = pc.b_vs_double;
    const int pass = pc.passed;

    const gem_input_seeds sd = in.seeds;
    doc = gem_receipt_new("gem.diff.v1", "gem diff", cli_git_commit());
    json_t *thr = json_pack("{s:f, s:f}", "min_correlation", CLI_MIN_CORRELATION, "max_nmse",
                            CLI_MAX_NMSE);
    if (!doc || !thr ||
        json_object_set_new(doc, "case_id", json_string(case_id)) ||
        json_object_set_new(doc, "backend", json_string(gem_backend_name(o->backend))) ||
        json_object_set_new(doc, "device", json_string(gem_engine_describe(e))) ||
        json_object_set_new(doc, "threads", json_integer((json_int_t)gem_engine_threads(e))) ||
        json_object_set_new(doc, "geometry", cli_geometry_json(&shape, &o->dt)) ||
        json_object_set_new(doc, "reference_route", cli_route_json(&ref)) ||
        json_object_set_new(doc, "candidate_route", cli_route_json(&cand)) ||
        json_object_set_new(doc, "seeds",
                            json_pack("{s:o, s:o, s:o, s:o}", "run", gem_receipt_u64(o->seed),
                                      "q", gem_receipt_u64(sd.q), "k", gem_receipt_u64(sd.k),
                                      "v", gem_receipt_u64(sd.v))) ||
        json_object_set_new(doc, "input_sha256",
                            json_pack("{s:s, s:s, s:s}", "q", sha[0], "k", sha[1], "v", sha[2])) ||
        json_object_set_new(doc, "output_sha256",
                            json_pack("{s:s, s:s}", "reference", rr.sha256, "candidate",
                                      cr.sha256)) ||
        json_object_set_new(doc, "repeat_deterministic",
                            json_pack("{s:b, s:b}", "reference", rr.deterministic, "candidate",
                                      cr.deterministic)) ||
        json_object_set_new(doc, "finite",
                            json_pack("{s:b, s:b}", "reference", rr.finite, "candidate",
                                      cr.finite)) ||
        json_object_set_new(doc, "unwritten",
                            json_pack("{s:I, s:I}", "reference", (json_int_t)rr.unwritten,
                                      "candidate", (json_int_t)cr.unwritten)) ||
        json_object_set_new(doc, "guard_ok",
                            json_pack("{s:b, s:b}", "reference", rr.guard_ok, "candidate",
                                      cr.guard_ok)) ||
        json_object_set_new(doc, "candidate_vs_reference", gem_receipt_compare(&c_cr)) ||
        json_object_set_new(doc, "reference_vs_double", gem_receipt_compare(&c_rd)) ||
        json_object_set_new(doc, "candidate_vs_double", gem_receipt_compare(&c_cd)) ||
        json_object_set_new(doc, "thresholds", thr) ||
        json_object_set_new(doc, "verdict", json_string(pass ? "pass" : "fail")) ||
        /* only where K or V is not F32: an F32 record keeps the exact field set the
         * correctness analyzer checks */
        ((o->dt.k != GEM_DTYPE_F32 || o->dt.v != GEM_DTYPE_F32) &&
         json_object_set_new(doc, "kv_dtype", cli_kv_dtype_json(&o->dt)))) {
        cli_error(CMD, "out of memory building the record");
        goto done;
    }
    char why[256];
    st = gem_receipt_save(path, doc, why, sizeof why);
    if (st != GEM_OK) {
        cli_error(CMD, "cannot write %s: %s", path, why);
        goto done;
    }
    printf("%-8lld %-9s %-9s %-6s %-6s  %s\n", (long long)live, rr.deterministic ? "yes" : "NO",
           cr.deterministic ? "yes" : "NO",
           (rr.finite && cr.finite) ? "yes" : "NO",
           (rr.unwritten == 0 && cr.unwritten == 0 && rr.guard_ok && cr.guard_ok) ? "ok" : "BAD",
           pass ? "pass" : "FAIL");
    print_cmp("candidate vs reference", &c_cr);
    print_cmp("reference vs double", &c_rd);
    print_cmp("candidate vs double", &c_cd);
    printf("    record %s\n", path);
    fflush(stdout);
    rc = pass ? 0 : 1;
done:
    json_decref(doc);
    cli_route_result_free(&rr);
    cli_route_result_free(&cr);
    gem_inputs_free(&in);
    return rc;
}

int gem_cmd_diff(int argc, char **argv)
{
    diff_opts o;
    memset(&o, 0, sizeof o);
    o.n_lengths = sizeof default_lengths / sizeof default_lengths[0];
    memcpy(o.lengths, default_lengths, sizeof default_lengths);
    o.backend = GEM_BACKEND_CPU;
    o.seed = 1;
    o.scale = 1.0f / sqrtf((float)CLI_D);
    o.cand.route = GEM_ROUTE_FUSED;
    o.ref.route = GEM_ROUTE_BASELINE;
    o.dt.k = o.dt.v = GEM_DTYPE_F32;
    o.out_dir = "gem-diff";
    int design = 0, route_options = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        }
        if (!strcmp(a, "--design")) {
            design = 1;
            continue;
        }
        if (!strncmp(a, "--route", 7) || !strncmp(a, "--ref-", 6) ||
            !strcmp(a, "--partitions") || !strcmp(a, "--tile"))
            route_options = 1;
        if (!v) {
            cli_error(CMD, "unknown option or missing value: '%s' (see --help)", a);
            return 2;
        }
        i++;
        int bad_dtype = 0;
        if (cli_kv_dtype_option(a, v, &o.dt, &bad_dtype)) {
            if (bad_dtype) {
                cli_error(CMD, "%s '%s' is not f32, bf16, f16 or fp8_e4m3", a, v);
                return 2;
            }
        } else if (!strcmp(a, "--lengths")) {
            if (cli_parse_i64_list(v, 1, (int64_t)1 << 24, o.lengths, MAX_LENGTHS,
                                   &o.n_lengths)) {
                cli_error(CMD, "--lengths '%s' is not a list of lengths in [1, 16M]", v);
                return 2;
            }
        } else if (!strcmp(a, "--backend")) {
            if (gem_backend_parse(v, &o.backend) != GEM_OK) {
                cli_error(CMD, "--backend '%s' is not cpu or cuda", v);
                return 2;
            }
        } else if (!strcmp(a, "--threads")) {
            if (cli_parse_i64(v, 0, 4096, &o.threads)) {
                cli_error(CMD, "--threads '%s' is not in [0, 4096]", v);
                return 2;
            }
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_u64(v, &o.seed)) {
                cli_error(CMD, "--seed '%s' is not an unsigned 64-bit integer", v);
                return 2;
            }
        } else if (!strcmp(a, "--scale")) {
            if (cli_parse_f32(v, FLT_MIN, FLT_MAX, &o.scale)) {
                cli_error(CMD, "--scale '%s' is not a positive normal float", v);
                return 2;
            }
        } else if (!strcmp(a, "--route") || !strcmp(a, "--ref-route")) {
            gem_route r;
            if (gem_route_parse(v, &r) != GEM_OK) {
                cli_error(CMD, "%s '%s' is not reference, online, baseline or fused", a, v);
                return 2;
            }
            (!strcmp(a, "--route") ? &o.cand : &o.ref)->route = r;
        } else if (!strcmp(a, "--partitions") || !strcmp(a, "--ref-partitions")) {
            int64_t p;
            if (cli_parse_i64(v, 1, GEM_DECODE_MAX_PARTITIONS, &p)) {
                cli_error(CMD, "%s '%s' is not in [1, %d]", a, v, GEM_DECODE_MAX_PARTITIONS);
                return 2;
            }
            (!strcmp(a, "--partitions") ? &o.cand : &o.ref)->partitions = p;
        } else if (!strcmp(a, "--tile") || !strcmp(a, "--ref-tile")) {
            int64_t t;
            if (cli_parse_i64(v, 1, GEM_DECODE_MAX_TILE, &t)) {
                cli_error(CMD, "%s '%s' is not in [1, %d]", a, v, GEM_DECODE_MAX_TILE);
                return 2;
            }
            (!strcmp(a, "--tile") ? &o.cand : &o.ref)->tile = t;
        } else if (!strcmp(a, "--out")) {
            o.out_dir = v;
        } else {
            cli_error(CMD, "unknown option '%s' (see --help)", a);
            return 2;
        }
    }
    if (design) {
        if (route_options) {
            cli_error(CMD, "--design fixes both routes (fused P 32 tile 4 against baseline P "
                           "16): drop --route, --partitions, --tile and the --ref- options");
            return 2;
        }
        if (o.backend != GEM_BACKEND_CPU) {
            cli_error(CMD, "--design: the design's fused tile 4 runs on the CPU only (CUDA's "
                           "fused kernel takes tile 8); run it with --backend cpu");
            return 2;
        }
        o.cand = (cli_route_spec){GEM_ROUTE_FUSED, 32, 4};
        o.ref = (cli_route_spec){GEM_ROUTE_BASELINE, 16, 0};
    }
    if (cli_route_resolve(CMD, &o.cand) || cli_route_resolve(CMD, &o.ref))
        return 2;
    for (size_t i = 0; i < o.n_lengths; i++)
        if (cli_check_load_memory(CMD, o.backend, &o.dt, o.lengths[i], 1))
            return 2;
    if (make_dir(o.out_dir)) {
        cli_error(CMD, "cannot create output directory '%s': %s", o.out_dir, strerror(errno));
        return 2;
    }
    gem_engine *e = NULL;
    gem_status st = gem_engine_create(o.backend, o.threads, &e);
    if (st != GEM_OK) {
        cli_error(CMD, "cannot start the %s backend: %s", gem_backend_name(o.backend),
                  gem_status_str(st));
        return 2;
    }
    char cl[64], rl[64];
    cli_route_label(&o.cand, cl, sizeof cl);
    cli_route_label(&o.ref, rl, sizeof rl);
    printf("gem diff: candidate %s vs reference %s on %s; K %s, V %s\n", cl, rl,
           gem_engine_describe(e), gem_dtype_name(o.dt.k), gem_dtype_name(o.dt.v));
    printf("%-8s %-9s %-9s %-6s %-6s  %s\n", "live", "ref-rep", "cand-rep", "finite", "audit",
           "verdict");
    int worst = 0;
    for (size_t i = 0; i < o.n_lengths; i++) {
        const int rc = diff_length(&o, e, o.lengths[i]);
        if (rc > worst)
            worst = rc;
        if (rc == 2)
            break;
    }
    gem_engine_destroy(e);
    if (worst == 0)
        printf("gem diff: all %zu lengths pass\n", o.n_lengths);
    else if (worst == 1)
        printf("gem diff: FAIL (a gate failed; see the records)\n");
    return worst;
}
