/*
 * `gem analyze merge-boundary`: the fail-closed consumer of a
 * gem-online-merge-check receipt (gem.merge_check.v1). It binds exactly the
 * design's positions (8,191 / 8,192 / 8,193 / 65,536 / 131,072), geometry
 * (32 / 4 / 512 / 512, F32, no window, P = 32, the documented scale),
 * thresholds and seeds; checks every figure against the range it must lie in
 * and against the other figures it constrains; re-derives the gates and
 * verdicts; and then reruns every case from its seed with the producer's own
 * code (gem_mc_run_case), comparing the input digests, the output digests of
 * both oracle runs and of the double reference, and every figure exactly.
 * Nothing in the receipt is taken on trust. Checks run cheap to expensive
 * (structure, geometry, ranges, consistency, verdicts, then recomputation,
 * shortest length first), so the first defect named is the cheapest to find.
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
#define N_OUT ((int64_t)GEM_MC_N_Q_HEADS * GEM_MC_DV)
/* Relative slack for bounds between figures computed in double. */
#define SLACK 1e-9

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

/* The comparison figures: ranges, then what they imply about each other.
 * The reference output is a softmax average of values in [-1, 1), so every
 * element has |r| < 1 and sum r^2 < n: nmse = sum e^2 / sum r^2 is at least
 * max_abs^2 / n, zero exactly when max_abs is, and a zero error means a
 * correlation of 1. */
static int check_comparison(an_ctx *c, const char *q, gem_mc_figures *f)
{
    const gem_compare *m = &f->cmp;
    if (!(m->correlation >= -1.0 && m->correlation <= 1.0))
        return an_fail(c, q, AN_RANGE, "correlation %.17g is outside [-1, 1]", m->correlation);
    if (!(m->nmse >= 0.0))
        return an_fail(c, q, AN_RANGE, "nmse %.17g is negative", m->nmse);
    if (!(m->max_abs >= 0.0 && m->max_abs <= 2.0))
        return an_fail(c, q, AN_RANGE,
                       "max_abs %.17g is outside [0, 2] (both outputs lie in [-1, 1])",
                       m->max_abs);
    if (m->max_abs * m->max_abs > m->nmse * (double)N_OUT * (1.0 + SLACK))
        return an_fail(c, q, AN_INCONSISTENT,
                       "max_abs %.17g needs nmse >= max_abs^2 / %lld = %.6g, the receipt says "
                       "%.17g",
                       m->max_abs, (long long)N_OUT, m->max_abs * m->max_abs / (double)N_OUT,
                       m->nmse);
    if ((m->nmse == 0.0) != (m->max_abs == 0.0))
        return an_fail(c, q, AN_INCONSISTENT, "nmse %.17g and max_abs %.17g: one is zero, the "
                       "other is not", m->nmse, m->max_abs);
    if (m->max_abs == 0.0 && m->correlation < 1.0 - 1e-12)
        return an_fail(c, q, AN_INCONSISTENT,
                       "identical outputs (max_abs 0) with correlation %.17g", m->correlation);
    return 0;
}

/* Score statistics: |score| <= scale * dk (|q|, |k| < 1); min <= mean <= max;
 * std >= 0 and at most (max - min) / 2; the largest softmax weight lies in
 * [1 / live, 1 / (1 + (live - 1) exp(min - max))]; the effective token count
 * in [1 / max_weight, live]. */
static int check_scores(an_ctx *c, const char *q, const double sc[6], int64_t live, double scale)
{
    const double mean = sc[0], sd = sc[1], mn = sc[2], mx = sc[3], w = sc[4], eff = sc[5];
    const double bound = scale * (double)GEM_MC_DK;
    const double L = (double)live;
    if (!(mn >= -bound && mx <= bound))
        return an_fail(c, q, AN_RANGE, "scores [%.17g, %.17g] leave [-%.6g, %.6g] (scale * dk)",
                       mn, mx, bound, bound);
    if (!(mn <= mx))
        return an_fail(c, q, AN_RANGE, "min %.17g > max %.17g", mn, mx);
    if (!(mean >= mn && mean <= mx))
        return an_fail(c, q, AN_RANGE, "mean %.17g is outside [min, max]", mean);
    if (!(sd >= 0.0))
        return an_fail(c, q, AN_RANGE, "std %.17g is negative", sd);
    if (sd > 0.5 * (mx - mn) * (1.0 + SLACK) + 1e-300)
        return an_fail(c, q, AN_INCONSISTENT, "std %.17g exceeds (max - min) / 2 = %.17g", sd,
                       0.5 * (mx - mn));
    if (!(w >= 1.0 / L * (1.0 - SLACK) && w <= 1.0))
        return an_fail(c, q, AN_RANGE, "max_softmax_weight %.17g is outside [1/%lld, 1]", w,
                       (long long)live);
    const double wmax = 1.0 / (1.0 + (L - 1.0) * exp(mn - mx));
    if (w > wmax * (1.0 + SLACK))
        return an_fail(c, q, AN_INCONSISTENT,
                       "max_softmax_weight %.17g exceeds %.17g, the most the score range "
                       "[%.6g, %.6g] allows over %lld tokens",
                       w, wmax, mn, mx, (long long)live);
    if (!(eff >= 1.0 && eff <= L * (1.0 + SLACK)))
        return an_fail(c, q, AN_RANGE, "min_effective_tokens %.17g is outside [1, %lld]", eff,
                       (long long)live);
    if (eff * w < 1.0 - SLACK)
        return an_fail(c, q, AN_INCONSISTENT,
                       "min_effective_tokens %.17g is below 1 / max_softmax_weight = %.17g", eff,
                       1.0 / w);
    return 0;
}

/* One case: structure, geometry, seeds, ranges, consistency, gates and
 * verdict (no recomputation). */
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
        an_int_in(c, u, q, "online", 0, N_OUT, &uw[0]) ||
        an_int_in(c, u, q, "online_repeat", 0, N_OUT, &uw[1]))
        return -1;
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
        an_int_in(c, u, q, "nonfinite", 0, N_OUT, &nonfinite))
        return -1;
    if (n != N_OUT)
        return an_fail(c, q, AN_GEOMETRY, "n is %" PRId64 ", the output has %lld elements", n,
                       (long long)N_OUT);
    if (nonfinite != 0)
        return an_fail(c, q, AN_NONFINITE, "%" PRId64 " non-finite output elements", nonfinite);
    if (an_real(c, u, q, "correlation", &f->cmp.correlation) ||
        an_real(c, u, q, "nmse", &f->cmp.nmse) || an_real(c, u, q, "max_abs", &f->cmp.max_abs))
        return -1;
    f->cmp.n = (size_t)n;
    if (!f->finite)
        return an_fail(c, p, AN_INCONSISTENT, "finite is false but no element is non-finite");
    if (check_comparison(c, q, f))
        return -1;

    snprintf(q, sizeof q, "%s.scores", p);
    double sc[6];
    if (an_obj(c, cs, p, "scores", &u) || an_keys(c, u, q, score_keys, NKEYS(score_keys)))
        return -1;
    for (size_t k = 0; k < NKEYS(score_keys); k++)
        if (an_real(c, u, q, score_keys[k], &sc[k]))
            return -1;
    if (check_scores(c, q, sc, live, scale))
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

/* A recorded real against its recomputation: exact (the receipt writes 17
 * significant digits, so a true figure reads back bit for bit). */
static int same_real(an_ctx *c, const char *p, const json_t *o, const char *key, double want)
{
    const double got = json_number_value(json_object_get(o, key));
    if (got != want)
        return an_fail(c, p, AN_REPRODUCE, "%s is %.17g, recomputed %.17g", key, got, want);
    return 0;
}

static int same_sha(an_ctx *c, const char *p, const json_t *o, const char *key, const char *want,
                    const char *what)
{
    const char *got = json_string_value(json_object_get(o, key));
    if (!got || strcmp(got, want) != 0)
        return an_fail(c, p, AN_DIGEST, "%s %.12s... does not match the %s recomputed from the "
                       "seed (%.12s...)", key, got ? got : "(none)", what, want);
    return 0;
}

/* Reruns case i from the seed and compares everything it records. */
static int recompute_case(an_ctx *c, const json_t *cs, size_t i, uint64_t seed, float scale,
                          int64_t threads)
{
    const int64_t live = gem_mc_design_lengths[i];
    gem_mc_case k;
    char why[256];
    gem_status st = gem_mc_run_case(live, seed, scale, threads, &k, why, sizeof why);
    if (st != GEM_OK)
        return an_io(c, "cannot recompute the case at %" PRId64 " tokens: %s", live, why);
    char p[96];
    snprintf(p, sizeof p, "cases[%zu].input_sha256", i);
    const json_t *d = json_object_get(cs, "input_sha256");
    for (int t = 0; t < 3; t++)
        if (same_sha(c, p, d, qkv[t], k.in_sha[t], "input"))
            return -1;
    snprintf(p, sizeof p, "cases[%zu].output_sha256", i);
    d = json_object_get(cs, "output_sha256");
    if (same_sha(c, p, d, "online", k.out_sha[0], "oracle output") ||
        same_sha(c, p, d, "online_repeat", k.out_sha[1], "oracle output") ||
        same_sha(c, p, d, "reference", k.ref_sha, "double reference output"))
        return -1;
    const gem_mc_figures *f = &k.fig;
    snprintf(p, sizeof p, "cases[%zu]", i);
    const int rec_b[2] = {json_is_true(json_object_get(cs, "finite")),
                          json_is_true(json_object_get(cs, "repeat_deterministic"))};
    if (rec_b[0] != f->finite || rec_b[1] != f->deterministic)
        return an_fail(c, p, AN_REPRODUCE, "finite / repeat_deterministic are %d / %d, "
                       "recomputed %d / %d", rec_b[0], rec_b[1], f->finite, f->deterministic);
    static const char *const run_keys[] = {"online", "online_repeat"};
    for (int r = 0; r < 2; r++) {
        const json_t *u = json_object_get(json_object_get(cs, "unwritten"), run_keys[r]);
        const json_t *gk = json_object_get(json_object_get(cs, "guard_ok"), run_keys[r]);
        if ((size_t)json_integer_value(u) != f->unwritten[r] ||
            json_is_true(gk) != f->guard_ok[r])
            return an_fail(c, p, AN_REPRODUCE, "unwritten / guard_ok of %s differ from the "
                           "recomputed run", run_keys[r]);
    }
    snprintf(p, sizeof p, "cases[%zu].online_vs_reference", i);
    d = json_object_get(cs, "online_vs_reference");
    if (same_real(c, p, d, "correlation", f->cmp.correlation) ||
        same_real(c, p, d, "nmse", f->cmp.nmse) || same_real(c, p, d, "max_abs", f->cmp.max_abs))
        return -1;
    snprintf(p, sizeof p, "cases[%zu].scores", i);
    d = json_object_get(cs, "scores");
    const double want[6] = {f->score_mean, f->score_std,  f->score_min,
                            f->score_max,  f->max_weight, f->min_effective_tokens};
    for (size_t s = 0; s < NKEYS(score_keys); s++)
        if (same_real(c, p, d, score_keys[s], want[s]))
            return -1;
    return 0;
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
    if (!o || !o->recompute)
        return 0;
    /* Every case again from its seed, shortest first. */
    uint64_t need = gem_mc_case_bytes(gem_mc_design_lengths[GEM_MC_N_LENGTHS - 1]), avail = 0;
    if (gem_mem_check(need, &avail) == GEM_ERR_NOMEM)
        return an_io(c, "recomputing the receipt needs %.2f GiB of memory, %.2f GiB are "
                     "available",
                     (double)need / 1073741824.0, (double)avail / 1073741824.0);
    for (size_t i = 0; i < GEM_MC_N_LENGTHS; i++) {
        cli_progress("analyze merge-boundary: recomputing the case at %" PRId64 " tokens",
                     gem_mc_design_lengths[i]);
        if (recompute_case(c, json_array_get(cases, i), i, seed, (float)scale, o->threads))
            return -1;
    }
    return 0;
}

json_t *an_merge_analysis_build(const json_t *doc, const char *path, const char *sha,
                               const char *commit)
{
    const json_t *t = json_object_get(doc, "tool");
    json_t *a = gem_receipt_new("gem.analysis.merge_boundary.v1", "gem analyze merge-boundary",
                                commit ? commit : "unknown");
    json_t *pos = json_array();
    int bad = !a || !pos || !path || !sha;
    for (size_t i = 0; i < GEM_MC_N_LENGTHS && !bad; i++)
        bad = json_array_append_new(pos, json_integer(gem_mc_design_lengths[i])) != 0;
    json_t *receipt = bad ? NULL
                          : json_pack("{s:s, s:s, s:O, s:O}", "path", path, "sha256", sha,
                                      "schema", json_object_get(doc, "schema"), "git_commit",
                                      json_object_get(t, "git_commit"));
    bad = bad || !receipt || json_object_set_new(a, "receipt", receipt) ||
          json_object_set_new(a, "positions", json_incref(pos)) ||
          json_object_set(a, "seed", json_object_get(doc, "seed")) ||
          json_object_set_new(a, "digests_recomputed", json_true()) ||
          json_object_set_new(a, "verdict", json_string("pass")) ||
          json_object_set_new(
              a, "statement",
              json_string("The float online-softmax oracle (P=32 partials, exact merge) matches "
                          "the double direct softmax at the design's five positions within the "
                          "design's gates. This discharges only the CPU algebra prerequisite; it "
                          "says nothing about a GPU kernel."));
    json_decref(pos);
    if (bad) {
        json_decref(a);
        return NULL;
    }
    return a;
}

int an_merge_boundary(an_ctx *c, const char *path, const an_opts *o, json_t **analysis)
{
    json_t *doc = NULL;
    char sha[65];
    c->file = path;
    if (an_load(c, path, &doc, sha))
        return 1;
    int rc = an_merge_boundary_doc(c, doc, o) ? 1 : 0;
    if (rc == 0 && analysis) {
        /* digests_recomputed is true only for a recomputed receipt. */
        *analysis = o && o->recompute
                        ? an_merge_analysis_build(doc, path, sha, cli_git_commit())
                        : NULL;
        if (!*analysis) {
            an_io(c, "cannot build the analysis (out of memory or not recomputed)");
            rc = 1;
        }
    }
    json_decref(doc);
    return rc;
}
