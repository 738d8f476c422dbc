/*
 * gem analyze <kind>: the design's fail-closed analyzers.
 *
 *   merge-boundary  a gem-online-merge-check receipt
 *   resources       a CUDA compiled-resource receipt (gem resources)
 *   correctness     the CPU gate, the resource analysis, five operator and
 *                   three model differential records
 *   ceiling         stage profiles -> fused-split-kv-ceiling.json
 *   promotion       whole-token model profiles -> the promotion decision
 *                   (gem.promotion.v1); --check re-derives a receipt
 *
 * Each prints one line and exits 0 when everything passes, or prints ONE line
 * naming the file, the field and the defect on stderr and exits 1. Usage,
 * input and I/O problems (a missing option or file, a file that is not
 * regular or too large, an unusable --out) exit 2 with one line. An analysis
 * document is written only on a pass (--out), atomically, never over an
 * input, a device or a directory. `promotion` also writes its receipt for a
 * keep-baseline decision, which exits 1 with one line giving the first reason.
 */
#include <float.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze.h"
#include "cli.h"
#include "gem/check.h"
#include "gem/receipt.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gem analyze <kind> [options]\n\n"
            "kinds:\n"
            "  merge-boundary RECEIPT [--threads N] [--out PATH]\n"
            "      validates a gem-online-merge-check receipt: the design's positions,\n"
            "      geometry, thresholds and seeds, every figure's range and consistency;\n"
            "      then reruns every case from its seed and compares the input and output\n"
            "      digests and every figure exactly\n"
            "  resources RECEIPT [--root DIR] [--out PATH]\n"
            "      validates a compiled-resource receipt (gem.resources.v10 from gem resources,\n"
            "      v2 to v9 from it for the kernels earlier libraries shipped, v1 from\n"
            "      dev/cuda/fused_decode --resources-v1); source and binary\n"
            "      paths are relative to DIR (default: the source tree) and must stay in it\n"
            "  correctness --merge R --merge-analysis A --resources R --resources-analysis A\n"
            "              --diff F (x5) [--model F (x3)] [--root DIR] [--threads N] [--out PATH]\n"
            "      the design's correctness gate; re-analyzes both receipts and requires each\n"
            "      analysis to be exactly the one re-derived; never reports promotion\n"
            "      eligibility\n"
            "  ceiling PROFILE... [--kv-dtype T] [--out PATH]\n"
            "      attribution of whole-token time to global attention from stage profiles\n"
            "      (default output fused-split-kv-ceiling.json); the profiles' KV caches must\n"
            "      be F32, or all of type T (f32, bf16, f16) with --kv-dtype\n"
            "  stage-profile PROFILE [--kv-dtype T]\n"
            "      every rule of the ceiling screen on one stage profile at the context it\n"
            "      records (any context; the screen itself wants 65536 and 131072)\n"
            "  promotion --long R64K --long R128K [--short R]... [--any-long-contexts]\n"
            "            [--out PATH]\n"
            "  promotion --check RECEIPT\n"
            "      the design's promotion decision from gem profile records (whole-token time,\n"
            "      baseline and fused routes, interleaved repetitions): promote when at both\n"
            "      long contexts the fused route's gain is above 3%% overall and in every\n"
            "      repetition, and no short context regresses beyond max(3%%, its spread);\n"
            "      else keep-baseline (exit 1; the receipt is still written). The long\n"
            "      contexts must be 65536 and 131072 unless --any-long-contexts (the receipt\n"
            "      then says it is not the design's gate). --check re-derives a receipt from\n"
            "      the files it binds (paths as recorded, from the current directory)\n"
            "  input-digests --live L [--capacity C] --seed S [--scale X]\n"
            "      prints the SHA-256 of the seeded q, k, v (32/4/512/512) as JSON: what the\n"
            "      analyzers recompute, for producers and tests of records\n\n"
            "Inputs are read once, only regular files of at most 64 MiB; --out must be a\n"
            "regular file or a new path, never an input, and is checked before any work.\n"
            "--threads N: workers for recomputation, 1..64 (default: online CPUs).\n"
            "exit status: 0 pass, 1 a defect (one line on stderr), 2 usage, input or I/O\n"
            "error (one line on stderr)\n"
            "docs/gates.md describes every gate and the exact command for it.\n");
}

static int64_t default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : n;
}

static int finish(const char *kind, an_ctx *c, int rc, json_t *analysis, const char *out,
                  const char *pass_line)
{
    if (rc != 0 || c->failed) {
        if (c->io)
            fprintf(stderr, "gem analyze %s: %s\n", kind, c->msg);
        else
            fprintf(stderr, "gem analyze %s: FAIL: %s\n", kind,
                    c->failed ? c->msg : "unknown defect");
        json_decref(analysis);
        return c->io ? 2 : 1;
    }
    if (out && analysis) {
        char why[512];
        gem_status st = gem_receipt_save(out, analysis, why, sizeof why);
        if (st != GEM_OK) {
            cli_error("analyze", "cannot write '%s': %s", out, why);
            json_decref(analysis);
            return 2;
        }
    }
    json_decref(analysis);
    char esc[1024];
    cli_escape(out ? out : "", esc, sizeof esc);
    printf("gem analyze %s: pass: %s%s%s\n", kind, pass_line, out ? " -> " : "", esc);
    return 0;
}

/* Options of the analyzers that take one receipt: the receipt, --out,
 * --threads, and --root where `root` is non-NULL. Returns -1 to go on, else
 * an exit status. The output is checked before any work. */
static int parse_one_receipt(int argc, char **argv, const char *name, const char **in,
                             const char **out, const char **root, int64_t *threads)
{
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--out") && v) {
            *out = argv[++i];
        } else if (root && !strcmp(argv[i], "--root") && v) {
            *root = argv[++i];
        } else if (!strcmp(argv[i], "--threads") && v) {
            if (cli_parse_i64(v, 1, 64, threads)) {
                cli_error(name, "--threads '%s' is not an integer in [1, 64]", v);
                return 2;
            }
            i++;
        } else if (argv[i][0] != '-' && !*in) {
            *in = argv[i];
        } else {
            cli_error(name, "%s '%s' (see --help)",
                      argv[i][0] == '-' && !v ? "missing value for" : "unexpected argument",
                      argv[i]);
            return 2;
        }
    }
    if (!*in) {
        cli_error(name, "no receipt given (see --help)");
        return 2;
    }
    if (*out) {
        const char *inputs[1] = {*in};
        if (cli_check_output(name, "--out", *out, inputs, 1) != 0)
            return 2;
    }
    return -1;
}

static int cmd_merge(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    int64_t threads = default_threads();
    int rc = parse_one_receipt(argc, argv, "analyze merge-boundary", &in, &out, NULL, &threads);
    if (rc >= 0)
        return rc;
    an_ctx c = {0};
    an_opts o = {.recompute = 1, .root = NULL, .threads = threads};
    json_t *a = NULL;
    rc = an_merge_boundary(&c, in, &o, out ? &a : NULL);
    return finish("merge-boundary", &c, rc, a, out,
                  "CPU online-softmax algebra bound at 8191/8192/8193/65536/131072 "
                  "(every case rerun from its seed: inputs, outputs and figures reproduced); "
                  "CPU prerequisite only");
}

/* --root must name a directory: 0, or 2 after one line. */
static int check_root(const char *cmd, const char *root)
{
    struct stat st;
    if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode)) {
        cli_error(cmd, "--root '%s' is not a directory", root);
        return 2;
    }
    return 0;
}

static int cmd_resources(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *root = GEM_SOURCE_DIR;
    int64_t threads = 1;
    int rc = parse_one_receipt(argc, argv, "analyze resources", &in, &out, &root, &threads);
    if (rc >= 0)
        return rc;
    if (check_root("analyze resources", root))
        return 2;
    an_ctx c = {0};
    an_opts o = {.recompute = 1, .root = root, .threads = threads};
    json_t *a = NULL;
    rc = an_resources(&c, in, &o, out ? &a : NULL);
    return finish("resources", &c, rc, a, out,
                  "compilable and launchable (this is not occupancy, correctness or timing)");
}

static int cmd_correctness(int argc, char **argv)
{
    an_correctness_in in = {0};
    const char *out = NULL, *root = GEM_SOURCE_DIR;
    int64_t threads = default_threads();
    for (int i = 1; i < argc; i += 2) { /* option, value */
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!v) {
            cli_error("analyze correctness", "'%s' needs a value or is unknown (see --help)", a);
            return 2;
        } else if (!strcmp(a, "--out")) {
            out = v;
        } else if (!strcmp(a, "--root")) {
            root = v;
        } else if (!strcmp(a, "--threads")) {
            if (cli_parse_i64(v, 1, 64, &threads)) {
                cli_error("analyze correctness", "--threads '%s' is not an integer in [1, 64]",
                          v);
                return 2;
            }
        } else if (!strcmp(a, "--merge")) {
            in.merge_receipt = v;
        } else if (!strcmp(a, "--merge-analysis")) {
            in.merge_analysis = v;
        } else if (!strcmp(a, "--resources")) {
            in.resources_receipt = v;
        } else if (!strcmp(a, "--resources-analysis")) {
            in.resources_analysis = v;
        } else if (!strcmp(a, "--diff")) {
            if (in.n_diffs == sizeof in.diffs / sizeof in.diffs[0]) {
                cli_error("analyze correctness", "too many --diff records");
                return 2;
            }
            in.diffs[in.n_diffs++] = v;
        } else if (!strcmp(a, "--model")) {
            if (in.n_models == sizeof in.models / sizeof in.models[0]) {
                cli_error("analyze correctness", "too many --model records");
                return 2;
            }
            in.models[in.n_models++] = v;
        } else {
            cli_error("analyze correctness", "unknown option '%s' (see --help)", a);
            return 2;
        }
    }
    if (check_root("analyze correctness", root))
        return 2;
    if (out) {
        const char *inputs[4 + 8 + 8] = {in.merge_receipt, in.merge_analysis,
                                         in.resources_receipt, in.resources_analysis};
        size_t n = 4;
        for (size_t i = 0; i < in.n_diffs; i++)
            inputs[n++] = in.diffs[i];
        for (size_t i = 0; i < in.n_models; i++)
            inputs[n++] = in.models[i];
        if (cli_check_output("analyze correctness", "--out", out, inputs, n) != 0)
            return 2;
    }
    an_ctx c = {0};
    an_opts o = {.recompute = 1, .root = root, .threads = threads};
    json_t *an = NULL;
    int rc = an_correctness(&c, &in, &o, out ? &an : NULL);
    return finish("correctness", &c, rc, an, out,
                  "operator and model differentials bound; this is not a promotion claim");
}

/* The value of --kv-dtype: "f32", "bf16" or "f16" into *out; -1 after one line otherwise. */
static int parse_kv_dtype(const char *cmd, const char *v, const char **out)
{
    static const char *const known[3] = {"f32", "bf16", "f16"};
    for (int k = 0; k < 3; k++)
        if (!strcmp(v, known[k])) {
            *out = known[k];
            return 0;
        }
    cli_error(cmd, "--kv-dtype '%s' is not f32, bf16 or f16", v);
    return -1;
}

static int cmd_ceiling(int argc, char **argv)
{
    const char *out = "fused-split-kv-ceiling.json";
    const char *kv_dtype = NULL;
    const char *profiles[16];
    size_t n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--kv-dtype") && i + 1 < argc) {
            if (parse_kv_dtype("analyze ceiling", argv[++i], &kv_dtype))
                return 2;
        } else if (argv[i][0] != '-' && n < sizeof profiles / sizeof profiles[0]) {
            profiles[n++] = argv[i];
        } else {
            cli_error("analyze ceiling", "unexpected argument '%s' (see --help)", argv[i]);
            return 2;
        }
    }
    if (n == 0) {
        cli_error("analyze ceiling", "no stage profiles given (see --help)");
        return 2;
    }
    if (cli_check_output("analyze ceiling", "--out", out, profiles, n) != 0)
        return 2;
    an_ctx c = {0};
    an_opts o = {.recompute = 1, .root = NULL, .threads = 1, .kv_dtype = kv_dtype};
    json_t *a = NULL;
    int rc = an_ceiling(&c, profiles, n, &o, &a);
    if (rc == 0 && !c.failed && a) {
        /* Print the attribution before the pass line. */
        const json_t *ctx = json_object_get(a, "contexts");
        size_t i;
        const json_t *e;
        json_array_foreach(ctx, i, e) {
            printf("context %lld (%s KV): global attention %.2f%% of whole-token time, score "
                   "%.2f%%, required reduction within global attention %.2f%%\n",
                   (long long)json_integer_value(json_object_get(e, "context")),
                   json_string_value(json_object_get(a, "kv_dtype")),
                   json_number_value(json_object_get(e, "global_attention_share_pct")),
                   json_number_value(json_object_get(e, "score_share_pct")),
                   json_number_value(json_object_get(e, "required_reduction_pct")));
        }
    }
    return finish("ceiling", &c, rc, a, out,
                  "attribution only; not a promotion claim and no gain prediction");
}

/* gem analyze stage-profile PROFILE [--kv-dtype T]: the ceiling screen's rules on one
 * profile at the context it records; prints that context's attribution before the pass
 * line. Writes nothing. */
static int cmd_stage_profile(int argc, char **argv)
{
    const char *kv_dtype = NULL, *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--kv-dtype") && i + 1 < argc) {
            if (parse_kv_dtype("analyze stage-profile", argv[++i], &kv_dtype))
                return 2;
        } else if (argv[i][0] != '-' && !path) {
            path = argv[i];
        } else {
            cli_error("analyze stage-profile", "unexpected argument '%s' (see --help)",
                      argv[i]);
            return 2;
        }
    }
    if (!path) {
        cli_error("analyze stage-profile", "no stage profile given (see --help)");
        return 2;
    }
    an_ctx c = {0};
    c.file = path;
    json_t *doc = NULL;
    if (an_load(&c, path, &doc, NULL))
        return finish("stage-profile", &c, 1, NULL, NULL, "");
    /* the context it records, checked against itself; a missing or non-integer context
     * fails in the checks as it would in the screen */
    const json_t *cx = json_object_get(doc, "context");
    const int64_t context = json_is_integer(cx) ? (int64_t)json_integer_value(cx) : 0;
    an_ceiling_fig f;
    int rc = 0;
    if (json_is_integer(cx) && context < 1)
        rc = an_fail(&c, "context", AN_GEOMETRY, "%" PRId64 " tokens", context);
    else
        rc = an_profile_doc(&c, doc, context, kv_dtype, &f);
    json_decref(doc);
    if (rc == 0 && !c.failed)
        printf("context %" PRId64 " (%s KV, %" PRId64 " samples): global attention %.2f%% of "
               "whole-token time, score %.2f%%, required reduction within global attention "
               "%.2f%%\n",
               f.context, kv_dtype ? kv_dtype : "f32", f.reps * f.per_rep, f.share_pct,
               f.score_share_pct, f.required_pct);
    return finish("stage-profile", &c, rc != 0, NULL, NULL,
                  "the stage profile meets every rule of the ceiling screen at its context");
}

/* Prints one line per context of a promotion receipt (stdout). */
static void print_promotion(const json_t *receipt)
{
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(receipt, "contexts"), i, e) {
        const int is_long = !strcmp(json_string_value(json_object_get(e, "role")), "long");
        const double mb = json_number_value(json_object_get(json_object_get(e, "baseline"),
                                                            "median_ms"));
        const double mf = json_number_value(json_object_get(json_object_get(e, "fused"),
                                                            "median_ms"));
        printf("context %lld (%s): baseline %.3f ms, fused %.3f ms (medians); gain %.2f%%, "
               "repetitions from %.2f%% (range %.2f%%)",
               (long long)json_integer_value(json_object_get(e, "context")),
               is_long ? "long" : "short", mb, mf,
               100.0 * json_number_value(json_object_get(e, "gain")),
               100.0 * json_number_value(json_object_get(e, "min_repetition_gain")),
               100.0 * json_number_value(json_object_get(e, "gain_range")));
        if (!is_long)
            printf("; fused over baseline %+.2f%%, tolerance %.2f%%",
                   100.0 * json_number_value(json_object_get(e, "regression")),
                   100.0 * json_number_value(json_object_get(e, "tolerance")));
        printf("; %s\n", json_is_true(json_object_get(e, "passes")) ? "passes" : "fails");
    }
}

/* gem analyze promotion: decides and writes the receipt (--out), or re-derives one
 * (--check). 0 promote, 1 keep-baseline or a defect, 2 usage, input or I/O. */
static int cmd_promotion(int argc, char **argv)
{
    static const char *const cmd = "analyze promotion";
    an_promotion_in in;
    memset(&in, 0, sizeof in);
    const char *out = NULL, *check = NULL;
    size_t n_long = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--any-long-contexts")) {
            in.any_long_contexts = 1;
        } else if (!v) {
            cli_error(cmd, "'%s' needs a value or is unknown (see --help)", a);
            return 2;
        } else if (!strcmp(a, "--long") || !strcmp(a, "--short")) {
            const int is_long = !strcmp(a, "--long");
            if (in.n == AN_PROMOTION_MAX_FILES || (is_long && n_long == 2)) {
                cli_error(cmd, "too many %s records (two --long, at most %d records in all)", a,
                          AN_PROMOTION_MAX_FILES);
                return 2;
            }
            in.files[in.n++] = (an_promotion_file){v, is_long, NULL};
            n_long += (size_t)is_long;
            i++;
        } else if (!strcmp(a, "--out")) {
            out = v;
            i++;
        } else if (!strcmp(a, "--check")) {
            check = v;
            i++;
        } else {
            cli_error(cmd, "unknown option '%s' (see --help)", a);
            return 2;
        }
    }
    if (check && (in.n || out || in.any_long_contexts)) {
        cli_error(cmd, "--check RECEIPT takes no other option (the receipt names its files)");
        return 2;
    }
    if (!check && n_long != 2) {
        cli_error(cmd, "%zu --long records given, two are required (65536 and 131072)",
                  n_long);
        return 2;
    }
    if (out) {
        const char *inputs[AN_PROMOTION_MAX_FILES];
        for (size_t i = 0; i < in.n; i++)
            inputs[i] = in.files[i].path;
        if (cli_check_output(cmd, "--out", out, inputs, in.n) != 0)
            return 2;
    }
    an_ctx c = {0};
    json_t *receipt = NULL;
    int promote = 0;
    int rc = check ? an_promotion_check(&c, check, &receipt, &promote)
                   : an_promotion(&c, &in, &receipt, &promote);
    if (rc != 0 || c.failed || !receipt)
        return finish("promotion", &c, 1, receipt, NULL, "");
    print_promotion(receipt);
    if (out) {
        char why[512];
        if (gem_receipt_save(out, receipt, why, sizeof why) != GEM_OK) {
            cli_error(cmd, "cannot write '%s': %s", out, why);
            json_decref(receipt);
            return 2;
        }
    }
    const json_t *reasons = json_object_get(receipt, "reasons");
    const size_t n_reasons = json_array_size(reasons);
    char first[1024], where[1024];
    cli_escape(json_string_value(json_array_get(reasons, 0)), first, sizeof first);
    cli_escape(out ? out : "", where, sizeof where);
    char checked[96] = "";
    if (check)
        snprintf(checked, sizeof checked, " (reproduced from its %zu bound files)",
                 json_array_size(json_object_get(receipt, "bound_files")));
    const int design = json_is_true(json_object_get(receipt, "design_contexts"));
    const int unchecked_short = json_array_size(json_object_get(receipt, "short_contexts")) == 0;
    json_decref(receipt);
    if (!promote) {
        fprintf(stderr, "gem analyze %s: keep-baseline%s: %s%s%s%s\n", "promotion", checked,
                first, n_reasons > 1 ? " (and more reasons in the receipt)" : "",
                out ? " -> " : "", where);
        return 1;
    }
    printf("gem analyze promotion: pass: promote%s: whole-token gain above 3%% overall and in "
           "every repetition at both long contexts%s%s%s%s\n",
           checked, unchecked_short ? "; no short context checked" : "",
           design ? "" : "; NOT the design's long contexts", out ? " -> " : "", where);
    return 0;
}

static int cmd_input_digests(int argc, char **argv)
{
    int64_t live = 0, capacity = 0;
    uint64_t seed = 0;
    float scale = 1.0f;
    int have_seed = 0;
    for (int i = 1; i < argc; i += 2) { /* option, value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        int bad = !v;
        if (!bad && !strcmp(a, "--live"))
            bad = cli_parse_i64(v, 1, INT64_C(1) << 24, &live);
        else if (!bad && !strcmp(a, "--capacity"))
            bad = cli_parse_i64(v, 1, INT64_C(1) << 24, &capacity);
        else if (!bad && !strcmp(a, "--seed"))
            bad = cli_parse_u64(v, &seed) || !(have_seed = 1);
        else if (!bad && !strcmp(a, "--scale"))
            bad = cli_parse_f32(v, FLT_MIN, FLT_MAX, &scale);
        else
            bad = 1;
        if (bad) {
            cli_error("analyze input-digests", "bad or unknown argument '%s' (see --help)", a);
            return 2;
        }
    }
    if (!live || !have_seed) {
        cli_error("analyze input-digests", "--live and --seed are required");
        return 2;
    }
    if (capacity && capacity < live) {
        cli_error("analyze input-digests", "--capacity %lld is below --live %lld",
                  (long long)capacity, (long long)live);
        return 2;
    }
    gem_attn_shape s = {32, 4, 512, 512, live, capacity ? capacity : live, scale};
    size_t nq = 0, nk = 0, nv = 0;
    if (gem_attn_shape_elems(&s, &nq, &nk, &nv, NULL) != GEM_OK) {
        cli_error("analyze input-digests", "the shape does not fit in memory sizes");
        return 2;
    }
    char what[64];
    snprintf(what, sizeof what, "%lld cache rows", (long long)s.capacity);
    if (cli_check_memory("analyze input-digests", what,
                         (uint64_t)(nq + nk + nv) * sizeof(float)) != 0)
        return 2;
    gem_owned_inputs in;
    gem_status st = gem_inputs_make(&s, seed, &in);
    if (st != GEM_OK) {
        cli_error("analyze input-digests", "%s", gem_status_str(st));
        return 2;
    }
    char h[3][65];
    st = gem_inputs_sha256(&in, h);
    gem_inputs_free(&in);
    if (st != GEM_OK) {
        cli_error("analyze input-digests", "%s", gem_status_str(st));
        return 2;
    }
    printf("{\"q\": \"%s\", \"k\": \"%s\", \"v\": \"%s\"}\n", h[0], h[1], h[2]);
    return 0;
}

int gem_cmd_analyze(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *k = argv[1];
    if (!strcmp(k, "-h") || !strcmp(k, "--help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(k, "merge-boundary"))
        return cmd_merge(argc - 1, argv + 1);
    if (!strcmp(k, "resources"))
        return cmd_resources(argc - 1, argv + 1);
    if (!strcmp(k, "correctness"))
        return cmd_correctness(argc - 1, argv + 1);
    if (!strcmp(k, "ceiling"))
        return cmd_ceiling(argc - 1, argv + 1);
    if (!strcmp(k, "stage-profile"))
        return cmd_stage_profile(argc - 1, argv + 1);
    if (!strcmp(k, "promotion"))
        return cmd_promotion(argc - 1, argv + 1);
    if (!strcmp(k, "input-digests"))
        return cmd_input_digests(argc - 1, argv + 1);
    cli_error("analyze",
              "unknown kind '%s' (merge-boundary, resources, correctness, ceiling, "
              "stage-profile, promotion, input-digests)",
              k);
    return 2;
}
