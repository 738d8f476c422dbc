/*
 * `gem analyze merge-boundary`: the fail-closed consumer of a
 * gem-online-merge-check receipt (gem.merge_check.v1). It binds exactly the
 * design's positions (8,191 / 8,192 / 8,193 / 65,536 / 131,072), geometry
 * (32 / 4 / 512 / 512, F32, no window, P = 32, the documented scale),
 * thresholds, seeds, and recomputes every raw-input digest from its seed with
 * gem_inputs_make. The gates are re-derived from the figures with the same
 * function the producer uses, so a verdict that disagrees with the figures is
 * caught. Checks run structure -> geometry -> figures -> verdict -> digests,
 * so the cheap defects are reported before any input is regenerated.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analyze.h"
#include "cli.h"
#include "gem/check.h"
#include "gem/receipt.h"
#include "merge_check.h"

static const char *const top_keys[] = {"schema",    "tool",       "partitions",
                                       "inputs",    "seed",       "positions",
                                       "thresholds", "cases",     "verdict"};
static const char *const case_keys[] = {
    "live",      "geometry", "seeds",  "input_sha256",        "output_sha256",
    "finite",    "repeat_deterministic", "unwritten", "guard_ok", "online_vs_reference",
    "scores",    "gates",    "verdict"};
static const char *const geo_keys[] = {"n_q_heads", "n_kv_heads", "dk",    "dv",    "live",
                                       "capacity",  "scale",      "dtype", "window"};
static const char *const cmp_keys[] = {"n", "nonfinite", "correlation", "nmse", "max_abs"};
static const char *const score_keys[] = {"mean", "std", "min", "max", "max_softmax_weight",
                                         "min_effective_tokens"};
static const char *const gate_keys[] = {"correlation", "nmse", "max_abs", "finite",
                                        "repeat_deterministic", "output_written"};
static const char *const qkv[] = {"q", "k", "v"};

#define NKEYS(a) (sizeof(a) / sizeof((a)[0]))

/* Checks a real field equals `want` exactly (thresholds, scale). */
static int real_eq(an_ctx *c, const json_t *o, const char *path, const char *key, double want,
                   const char *cls)
{
    double v = 0.0;
    if (an_real(c, o, path, key, &v))
        return -1;
    if (v != want)
        return an_fail(c, path, cls, "%s is %.17g, the design fixes %.17g", key, v, want);
    return 0;
}

static int verdict_field(an_ctx *c, const json_t *o, const char *path, int *pass)
{
    const char *v = NULL;
    if (an_str(c, o, path, "verdict", &v))
        return -1;
    if (strcmp(v, "pass") && strcmp(v, "fail"))
        return an_fail(c, path, AN_VALUE, "verdict '%.40s' is neither 'pass' nor 'fail'", v);
    *pass = !strcmp(v, "pass");
    return 0;
}

/* One case: structure, geometry, seeds, figures, gates and verdict (no digests). */
static int check_case(an_ctx *c, const json_t *cs, size_t i, uint64_t seed, double scale,
                      gem_mc_figures *f)
{
    char p[64], q[96];
    snprintf(p, sizeof p, "cases[%zu]", i);
    if (an_keys(c, cs, p, case_keys, NKEYS(case_keys)))
        return -1;
    const int64_t live = gem_mc_design_lengths[i];
    if (an_int_eq(c, cs, p, "live", live, AN_GEOMETRY))
        return -1;

    const json_t *g = NULL;
    snprintf(q, sizeof q, "%s.geometry", p);
    if (an_obj(c, cs, p, "geometry", &g) || an_keys(c, g, q, geo_keys, NKEYS(geo_keys)) ||
        an_int_eq(c, g, q, "n_q_heads", GEM_MC_N_Q_HEADS, NULL) ||
        an_int_eq(c, g, q, "n_kv_heads", GEM_MC_N_KV_HEADS, NULL) ||
        an_int_eq(c, g, q, "dk", GEM_MC_DK, NULL) || an_int_eq(c, g, q, "dv", GEM_MC_DV, NULL) ||
        an_int_eq(c, g, q, "live", live, NULL) || an_int_eq(c, g, q, "capacity", live, NULL) ||
        real_eq(c, g, q, "scale", scale, AN_GEOMETRY) ||
        an_str_eq(c, g, q, "dtype", "f32", NULL) || an_int_eq(c, g, q, "window", 0, NULL))
        return -1;

    const json_t *s = NULL;
    static const char *const seed_keys[] = {"run", "q", "k", "v"};
    snprintf(q, sizeof q, "%s.seeds", p);
    uint64_t run = 0, sq = 0, sk = 0, sv = 0;
    if (an_obj(c, cs, p, "seeds", &s) || an_keys(c, s, q, seed_keys, 4) ||
        an_u64(c, s, q, "run", &run) || an_u64(c, s, q, "q", &sq) || an_u64(c, s, q, "k", &sk) ||
        an_u64(c, s, q, "v", &sv))
        return -1;
    gem_input_seeds want = gem_input_seeds_from(seed);
    if (run != seed)
        return an_fail(c, q, AN_VALUE, "run seed %" PRIu64 " is not the receipt's seed %" PRIu64,
                       run, seed);
    if (sq != want.q || sk != want.k || sv != want.v)
        return an_fail(c, q, AN_VALUE, "q/k/v seeds do not derive from run seed %" PRIu64, seed);

    const json_t *d = NULL;
    const char *h = NULL;
    snprintf(q, sizeof q, "%s.input_sha256", p);
    if (an_obj(c, cs, p, "input_sha256", &d) || an_keys(c, d, q, qkv, 3))
        return -1;
    for (int t = 0; t < 3; t++)
        if (an_sha(c, d, q, qkv[t], &h))
            return -1;
    static const char *const out_keys[] = {"online", "online_repeat", "reference"};
    const char *o1 = NULL, *o2 = NULL;
    snprintf(q, sizeof q, "%s.output_sha256", p);
    if (an_obj(c, cs, p, "output_sha256", &d) || an_keys(c, d, q, out_keys, 3) ||
        an_sha(c, d, q, "online", &o1) || an_sha(c, d, q, "online_repeat", &o2) ||
        an_sha(c, d, q, "reference", &h))
        return -1;

    memset(f, 0, sizeof *f);
    f->live = live;
    static const char *const run_keys[] = {"online", "online_repeat"};
    int64_t uw[2] = {0, 0};
    const json_t *u = NULL;
    if (an_bool(c, cs, p, "finite", &f->finite) ||
        an_bool(c, cs, p, "repeat_deterministic", &f->deterministic))
        return -1;
    snprintf(q, sizeof q, "%s.unwritten", p);
    if (an_obj(c, cs, p, "unwritten", &u) || an_keys(c, u, q, run_keys, 2) ||
        an_int(c, u, q, "online", &uw[0]) || an_int(c, u, q, "online_repeat", &uw[1]))
        return -1;
    if (uw[0] < 0 || uw[1] < 0)
        return an_fail(c, q, AN_VALUE, "negative count");
    f->unwritten[0] = (size_t)uw[0];
    f->unwritten[1] = (size_t)uw[1];
    snprintf(q, sizeof q, "%s.guard_ok", p);
    if (an_obj(c, cs, p, "guard_ok", &u) || an_keys(c, u, q, run_keys, 2) ||
        an_bool(c, u, q, "online", &f->guard_ok[0]) ||
        an_bool(c, u, q, "online_repeat", &f->guard_ok[1]))
        return -1;

    int64_t n = 0, nonfinite = 0;
    snprintf(q, sizeof q, "%s.online_vs_reference", p);
    if (an_obj(c, cs, p, "online_vs_reference", &u) ||
        an_keys(c, u, q, cmp_keys, NKEYS(cmp_keys)) || an_int(c, u, q, "n", &n) ||
        an_int(c, u, q, "nonfinite", &nonfinite) ||
        an_real(c, u, q, "correlation", &f->cmp.correlation) ||
        an_real(c, u, q, "nmse", &f->cmp.nmse) || an_real(c, u, q, "max_abs", &f->cmp.max_abs))
        return -1;
    if (n != (int64_t)GEM_MC_N_Q_HEADS * GEM_MC_DV)
        return an_fail(c, q, AN_GEOMETRY, "n is %" PRId64 ", the output has %d elements", n,
                       GEM_MC_N_Q_HEADS * GEM_MC_DV);
    if (nonfinite != 0)
        return an_fail(c, q, AN_NONFINITE, "%" PRId64 " non-finite output elements", nonfinite);
    if (f->cmp.nmse < 0.0 || f->cmp.max_abs < 0.0 || f->cmp.correlation > 1.0 + 1e-12)
        return an_fail(c, q, AN_VALUE, "a figure outside its mathematical range");
    f->cmp.n = (size_t)n;

    snprintf(q, sizeof q, "%s.scores", p);
    double sc[6];
    if (an_obj(c, cs, p, "scores", &u) || an_keys(c, u, q, score_keys, NKEYS(score_keys)))
        return -1;
    for (size_t k = 0; k < NKEYS(score_keys); k++)
        if (an_real(c, u, q, score_keys[k], &sc[k]))
            return -1;

    /* Gates: recorded booleans must be what the figures give. */
    int rec[6];
    snprintf(q, sizeof q, "%s.gates", p);
    if (an_obj(c, cs, p, "gates", &u) || an_keys(c, u, q, gate_keys, NKEYS(gate_keys)))
        return -1;
    for (size_t k = 0; k < NKEYS(gate_keys); k++)
        if (an_bool(c, u, q, gate_keys[k], &rec[k]))
            return -1;
    int case_pass = 0;
    if (verdict_field(c, cs, p, &case_pass))
        return -1;
    gem_mc_gates(f);
    const int got[6] = {f->gate_corr, f->gate_nmse, f->gate_max_abs, f->finite,
                        f->deterministic, f->gate_written};
    for (size_t k = 0; k < NKEYS(gate_keys); k++)
        if (rec[k] != got[k])
            return an_fail(c, q, AN_VERDICT, "gates.%s is %s but the figures say %s",
                           gate_keys[k], rec[k] ? "true" : "false", got[k] ? "true" : "false");
    if (f->deterministic != !strcmp(o1, o2))
        return an_fail(c, p, AN_VERDICT,
                       "repeat_deterministic is %s but the two output digests %s",
                       f->deterministic ? "true" : "false", strcmp(o1, o2) ? "differ" : "match");
    if (case_pass != f->pass)
        return an_fail(c, p, AN_VERDICT, "verdict '%s' but the gates say '%s'",
                       case_pass ? "pass" : "fail", f->pass ? "pass" : "fail");
    return 0;
}

/* The first failed gate of a case, in words. */
static int threshold_fail(an_ctx *c, size_t i, const gem_mc_figures *f)
{
    char p[64];
    snprintf(p, sizeof p, "cases[%zu]", i);
    if (!f->gate_corr)
        return an_fail(c, p, AN_THRESHOLD, "%" PRId64 " tokens: correlation %.15f < %.12f",
                       f->live, f->cmp.correlation, GEM_MC_MIN_CORRELATION);
    if (!f->gate_nmse)
        return an_fail(c, p, AN_THRESHOLD, "%" PRId64 " tokens: nmse %.4g > %.4g", f->live,
                       f->cmp.nmse, GEM_MC_MAX_NMSE);
    if (!f->gate_max_abs)
        return an_fail(c, p, AN_THRESHOLD, "%" PRId64 " tokens: max_abs %.4g >= %.4g", f->live,
                       f->cmp.max_abs, GEM_MC_MAX_ABS_BELOW);
    if (!f->finite)
        return an_fail(c, p, AN_THRESHOLD, "%" PRId64 " tokens: output not finite", f->live);
    if (!f->deterministic)
        return an_fail(c, p, AN_THRESHOLD, "%" PRId64 " tokens: not repeat-deterministic",
                       f->live);
    return an_fail(c, p, AN_THRESHOLD, "%" PRId64 " tokens: output not fully written or guard "
                   "bytes changed", f->live);
}

/* Regenerates the inputs of case i from the seed and compares the digests. */
static int check_digests(an_ctx *c, const json_t *cs, size_t i, uint64_t seed, float scale)
{
    const int64_t live = gem_mc_design_lengths[i];
    gem_attn_shape s = {GEM_MC_N_Q_HEADS, GEM_MC_N_KV_HEADS, GEM_MC_DK, GEM_MC_DV,
                        live, live, scale};
    gem_owned_inputs in;
    gem_status st = gem_inputs_make(&s, seed, &in);
    char p[64];
    snprintf(p, sizeof p, "cases[%zu].input_sha256", i);
    if (st != GEM_OK)
        return an_fail(c, p, "cannot recompute", "%s", gem_status_str(st));
    const json_t *d = json_object_get(cs, "input_sha256");
    const float *buf[3] = {in.q, in.k, in.v};
    const size_t n[3] = {in.in.q_elems, in.in.k_elems, in.in.v_elems};
    int rc = 0;
    for (int t = 0; t < 3 && rc == 0; t++) {
        char hex[65];
        if (gem_sha256_hex(buf[t], n[t] * sizeof(float), hex) != GEM_OK) {
            rc = an_fail(c, p, "cannot recompute", "sha256 failed");
            break;
        }
        if (strcmp(hex, json_string_value(json_object_get(d, qkv[t]))) != 0)
            rc = an_fail(c, p, AN_DIGEST,
                         "%s does not match the input regenerated from seed %" PRIu64
                         " at %" PRId64 " tokens",
                         qkv[t], seed, live);
    }
    gem_inputs_free(&in);
    return rc;
}

int an_merge_boundary_doc(an_ctx *c, const json_t *doc, const an_opts *o)
{
    if (!json_is_object(doc))
        return an_fail(c, "", AN_TYPE, "the document is not a JSON object");
    if (an_schema(c, doc, GEM_MC_SCHEMA) || an_keys(c, doc, "", top_keys, NKEYS(top_keys)) ||
        an_tool(c, doc, GEM_MC_TOOL_NAME) ||
        an_int_eq(c, doc, "", "partitions", GEM_MC_PARTITIONS, NULL))
        return -1;

    static const char *const in_keys[] = {"distribution", "lo", "hi", "scale"};
    const json_t *inp = NULL;
    const double scale = (double)GEM_MC_DEFAULT_SCALE;
    if (an_obj(c, doc, "", "inputs", &inp) || an_keys(c, inp, "inputs", in_keys, 4) ||
        an_str_eq(c, inp, "inputs", "distribution", GEM_MC_DISTRIBUTION, AN_VALUE) ||
        real_eq(c, inp, "inputs", "lo", -1.0, AN_VALUE) ||
        real_eq(c, inp, "inputs", "hi", 1.0, AN_VALUE) ||
        real_eq(c, inp, "inputs", "scale", scale, AN_GEOMETRY))
        return -1;
    uint64_t seed = 0;
    if (an_u64(c, doc, "", "seed", &seed))
        return -1;

    const json_t *pos = NULL;
    if (an_arr(c, doc, "", "positions", &pos))
        return -1;
    if (json_array_size(pos) != GEM_MC_N_LENGTHS)
        return an_fail(c, "positions", AN_GEOMETRY,
                       "%zu positions, the design fixes 8191,8192,8193,65536,131072",
                       json_array_size(pos));
    for (size_t i = 0; i < GEM_MC_N_LENGTHS; i++) {
        const json_t *x = json_array_get(pos, i);
        if (!json_is_integer(x))
            return an_fail(c, "positions", AN_TYPE, "entry %zu is not an integer", i);
        if (json_integer_value(x) != gem_mc_design_lengths[i])
            return an_fail(c, "positions", AN_GEOMETRY,
                           "entry %zu is %lld, the design fixes %" PRId64, i,
                           (long long)json_integer_value(x), gem_mc_design_lengths[i]);
    }

    static const char *const th_keys[] = {"min_correlation", "max_nmse", "max_abs_below"};
    const json_t *th = NULL;
    if (an_obj(c, doc, "", "thresholds", &th) || an_keys(c, th, "thresholds", th_keys, 3) ||
        real_eq(c, th, "thresholds", "min_correlation", GEM_MC_MIN_CORRELATION, AN_VALUE) ||
        real_eq(c, th, "thresholds", "max_nmse", GEM_MC_MAX_NMSE, AN_VALUE) ||
        real_eq(c, th, "thresholds", "max_abs_below", GEM_MC_MAX_ABS_BELOW, AN_VALUE))
        return -1;

    const json_t *cases = NULL;
    if (an_arr(c, doc, "", "cases", &cases))
        return -1;
    if (json_array_size(cases) != GEM_MC_N_LENGTHS)
        return an_fail(c, "cases", AN_GEOMETRY, "%zu cases, one per design position (5) needed",
                       json_array_size(cases));
    gem_mc_figures f[GEM_MC_N_LENGTHS];
    int all = 1;
    for (size_t i = 0; i < GEM_MC_N_LENGTHS; i++) {
        if (check_case(c, json_array_get(cases, i), i, seed, scale, &f[i]))
            return -1;
        all &= f[i].pass;
    }
    int top_pass = 0;
    if (verdict_field(c, doc, "", &top_pass))
        return -1;
    if (top_pass != all)
        return an_fail(c, "verdict", AN_VERDICT, "'%s' but the cases say '%s'",
                       top_pass ? "pass" : "fail", all ? "pass" : "fail");
    for (size_t i = 0; i < GEM_MC_N_LENGTHS; i++)
        if (!f[i].pass)
            return threshold_fail(c, i, &f[i]);
    if (o && o->recompute_digests) {
        for (size_t i = 0; i < GEM_MC_N_LENGTHS; i++) {
            cli_progress("analyze merge-boundary: recomputing input digests at %" PRId64
                         " tokens",
                         gem_mc_design_lengths[i]);
            if (check_digests(c, json_array_get(cases, i), i, seed, (float)scale))
                return -1;
        }
    }
    return 0;
}

int an_merge_boundary(an_ctx *c, const char *path, const an_opts *o, json_t **analysis)
{
    json_t *doc = NULL;
    c->file = path;
    if (an_load(c, path, &doc))
        return 1;
    int rc = an_merge_boundary_doc(c, doc, o) ? 1 : 0;
    if (rc == 0 && analysis) {
        char sha[65];
        if (an_digest(c, path, sha)) {
            rc = 1;
        } else {
            json_t *a = gem_receipt_new("gem.analysis.merge_boundary.v1",
                                        "gem analyze merge-boundary", cli_git_commit());
            json_t *pos = json_array();
            for (size_t i = 0; i < GEM_MC_N_LENGTHS; i++)
                json_array_append_new(pos, json_integer(gem_mc_design_lengths[i]));
            const json_t *t = json_object_get(doc, "tool");
            json_object_set_new(a, "receipt",
                                json_pack("{s:s, s:s, s:O, s:O}", "path", path, "sha256", sha,
                                          "schema", json_object_get(doc, "schema"),
                                          "git_commit", json_object_get(t, "git_commit")));
            json_object_set_new(a, "positions", pos);
            json_object_set(a, "seed", json_object_get(doc, "seed"));
            json_object_set_new(a, "digests_recomputed",
                                json_boolean(o && o->recompute_digests));
            json_object_set_new(a, "verdict", json_string("pass"));
            json_object_set_new(a, "statement",
                                json_string("The float online-softmax oracle (P=32 partials, "
                                            "exact merge) matches the double direct softmax at "
                                            "the design's five positions within the design's "
                                            "gates. This discharges only the CPU algebra "
                                            "prerequisite; it says nothing about a GPU kernel."));
            *analysis = a;
        }
    }
    json_decref(doc);
    return rc;
}
