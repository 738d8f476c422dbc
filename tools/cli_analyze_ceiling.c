/*
 * `gem analyze ceiling`: the non-promotional ceiling attribution of the design
 * (fused-split-kv-ceiling.json). From stage profiles of the baseline route
 * (gem.stage_profile.v1, docs/receipts-ceiling.md) at 65,536 and 131,072
 * context tokens it computes, per context:
 *
 *   attention_ms      median over samples of score + normalize + value + reduce
 *   global share      calls * attention_ms / whole_token_ms   (calls = 10)
 *   score share       calls * median(score) / whole_token_ms
 *   required cut      floor / global share                    (floor = 3%)
 *
 * It validates the selector (the baseline route), the exact D512 geometry,
 * the context, that per-sample stage totals add up, at least three
 * repetitions, full sample coverage (every stage has repetitions * samples
 * entries) and each profile's samples digest, and binds every profile file
 * by SHA-256 in its output. The attribution bounds what a global-attention
 * change could give; it predicts no gain and is not a promotion claim.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "cli.h"
#include "gem/check.h"
#include "gem/receipt.h"

#define NKEYS(a) (sizeof(a) / sizeof((a)[0]))
#define CEIL_FLOOR_PCT 3.0
#define CEIL_MIN_REPS 3
#define CEIL_MAX_SAMPLES 100000
#define CEIL_TOTAL_TOL 1e-6 /* relative, per sample */
/* No sample of a model step or a stage can take 1e9 ms (11.6 days); the bound
 * also keeps every sum and ratio below finite-double overflow. */
#define CEIL_MAX_MS 1e9

static const char *const top_keys[] = {"schema",      "tool",        "selector",
                                       "geometry",    "model",       "context",
                                       "repetitions", "samples_per_repetition",
                                       "stages_ms",   "attention_total_ms",
                                       "whole_token_ms", "samples_sha256", "provenance"};
static const char *const geo_keys[] = {"n_q_heads", "n_kv_heads", "dk", "dv", "dtype", "window"};
static const char *const model_keys[] = {"n_layers", "global_attention_calls"};
static const char *const stage_names[] = {"score", "normalize", "value", "reduce"};
static const int64_t contexts[2] = {65536, 131072};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A real array of exactly n positive finite entries into out. */
static int samples(an_ctx *c, const json_t *o, const char *path, const char *key, size_t n,
                   double *out)
{
    const json_t *a = NULL;
    if (an_arr(c, o, path, key, &a))
        return -1;
    char p[96];
    snprintf(p, sizeof p, "%s%s%s", path, path[0] ? "." : "", key);
    if (json_array_size(a) != n)
        return an_fail(c, p, AN_MISSING, "%zu samples, repetitions x samples_per_repetition = %zu",
                       json_array_size(a), n);
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(a, i);
        if (json_is_null(x))
            return an_fail(c, p, AN_NONFINITE, "sample %zu is null", i);
        if (!json_is_number(x))
            return an_fail(c, p, AN_TYPE, "sample %zu is not a number", i);
        double v = json_number_value(x);
        if (!isfinite(v))
            return an_fail(c, p, AN_NONFINITE, "sample %zu", i);
        if (!(v >= 0.0 && v <= CEIL_MAX_MS))
            return an_fail(c, p, AN_RANGE, "sample %zu, %.17g ms, is outside [0, %g] ms", i, v,
                           CEIL_MAX_MS);
        out[i] = v;
    }
    return 0;
}

/* SHA-256 of the canonical text of the samples: for each series in the order
 * stages_ms.score, .normalize, .value, .reduce, attention_total_ms,
 * whole_token_ms, one line "<name>:" followed by its values printed with
 * "%.17g" and joined by ",". Python's '%.17g' % x prints the same digits. */
static int samples_digest(const json_t *doc, char hex[65])
{
    const json_t *sm = json_object_get(doc, "stages_ms");
    const json_t *series[6] = {json_object_get(sm, "score"), json_object_get(sm, "normalize"),
                               json_object_get(sm, "value"), json_object_get(sm, "reduce"),
                               json_object_get(doc, "attention_total_ms"),
                               json_object_get(doc, "whole_token_ms")};
    static const char *const names[6] = {"score", "normalize", "value", "reduce",
                                         "attention_total_ms", "whole_token_ms"};
    /* "%.17g" of a double is at most 24 characters; 32 per value and per name
     * leave room for the separators. The counts are bounded by the caller. */
    size_t cap = 64;
    for (int k = 0; k < 6; k++)
        cap += 32 + 32 * json_array_size(series[k]);
    char *t = malloc(cap);
    if (!t)
        return -1;
    size_t len = 0;
    int ok = 1;
    for (int k = 0; k < 6 && ok; k++) {
        int w = snprintf(t + len, cap - len, "%s:", names[k]);
        ok = w > 0 && (size_t)w < cap - len;
        len += ok ? (size_t)w : 0;
        for (size_t i = 0; ok && i < json_array_size(series[k]); i++) {
            w = snprintf(t + len, cap - len, "%s%.17g", i ? "," : "",
                         json_number_value(json_array_get(series[k], i)));
            ok = w > 0 && (size_t)w < cap - len;
            len += ok ? (size_t)w : 0;
        }
        w = ok ? snprintf(t + len, cap - len, "\n") : -1;
        ok = ok && w > 0 && (size_t)w < cap - len;
        len += ok ? (size_t)w : 0;
    }
    int rc = ok && gem_sha256_hex(t, len, hex) == GEM_OK ? 0 : -1;
    free(t);
    return rc;
}

typedef struct ceiling_fig {
    int64_t context, reps, per_rep, calls;
    double stage_ms[4], attention_ms, whole_ms;
    double share_pct, score_share_pct, required_pct;
} ceiling_fig;

static int profile(an_ctx *c, const json_t *d, int64_t context, ceiling_fig *f)
{
    if (!json_is_object(d))
        return an_fail(c, "", AN_TYPE, "the document is not a JSON object");
    const char *s = NULL;
    if (an_schema(c, d, "gem.stage_profile.v1") || an_keys(c, d, "", top_keys, NKEYS(top_keys)) ||
        an_tool(c, d, "gem profile") ||
        an_str_eq(c, d, "", "selector", "baseline", AN_VALUE) || an_str(c, d, "", "provenance", &s))
        return -1;
    const json_t *g = NULL, *m = NULL;
    if (an_obj(c, d, "", "geometry", &g) || an_keys(c, g, "geometry", geo_keys, NKEYS(geo_keys)) ||
        an_int_eq(c, g, "geometry", "n_q_heads", 32, NULL) ||
        an_int_eq(c, g, "geometry", "n_kv_heads", 4, NULL) ||
        an_int_eq(c, g, "geometry", "dk", 512, NULL) || an_int_eq(c, g, "geometry", "dv", 512, NULL) ||
        an_str_eq(c, g, "geometry", "dtype", "f32", NULL) ||
        an_int_eq(c, g, "geometry", "window", 0, NULL) || an_obj(c, d, "", "model", &m) ||
        an_keys(c, m, "model", model_keys, 2) || an_int_eq(c, m, "model", "n_layers", 60, NULL) ||
        an_int_eq(c, m, "model", "global_attention_calls", 10, NULL) ||
        an_int_eq(c, d, "", "context", context, NULL) ||
        an_int(c, d, "", "repetitions", &f->reps) ||
        an_int(c, d, "", "samples_per_repetition", &f->per_rep))
        return -1;
    f->context = context;
    f->calls = 10;
    if (f->reps < CEIL_MIN_REPS)
        return an_fail(c, "repetitions", AN_THRESHOLD, "%" PRId64 " < %d interleaved repetitions",
                       f->reps, CEIL_MIN_REPS);
    if (f->per_rep < 1 || f->reps > CEIL_MAX_SAMPLES || f->per_rep > CEIL_MAX_SAMPLES / f->reps)
        return an_fail(c, "samples_per_repetition", AN_VALUE, "%" PRId64 " out of range",
                       f->per_rep);
    const size_t n = (size_t)(f->reps * f->per_rep);
    double *buf = calloc(n * 7, sizeof(double));
    if (!buf)
        return an_fail(c, "", "internal", "out of memory");
    double *st[4] = {buf, buf + n, buf + 2 * n, buf + 3 * n};
    double *tot = buf + 4 * n, *whole = buf + 5 * n, *tmp = buf + 6 * n;
    const json_t *sm = NULL;
    int rc = -1;
    if (an_obj(c, d, "", "stages_ms", &sm) || an_keys(c, sm, "stages_ms", stage_names, 4))
        goto out;
    for (int k = 0; k < 4; k++)
        if (samples(c, sm, "stages_ms", stage_names[k], n, st[k]))
            goto out;
    if (samples(c, d, "", "attention_total_ms", n, tot) ||
        samples(c, d, "", "whole_token_ms", n, whole))
        goto out;
    for (size_t i = 0; i < n; i++) {
        double sum = st[0][i] + st[1][i] + st[2][i] + st[3][i];
        if (!(fabs(sum - tot[i]) <= CEIL_TOTAL_TOL * fmax(fabs(tot[i]), 1e-12))) {
            an_fail(c, "attention_total_ms", AN_VALUE,
                    "sample %zu: stages add up to %.9g ms, the total says %.9g ms", i, sum, tot[i]);
            goto out;
        }
        if (!(whole[i] > (double)f->calls * tot[i])) {
            an_fail(c, "whole_token_ms", AN_VALUE,
                    "sample %zu: %.9g ms is not more than %" PRId64 " attention calls of %.9g ms",
                    i, whole[i], f->calls, tot[i]);
            goto out;
        }
    }
    const char *want = NULL;
    char hex[65];
    if (an_sha(c, d, "", "samples_sha256", &want))
        goto out;
    if (samples_digest(d, hex) != 0) {
        an_fail(c, "samples_sha256", "internal", "cannot digest the samples");
        goto out;
    }
    if (strcmp(hex, want) != 0) {
        an_fail(c, "samples_sha256", AN_DIGEST, "the samples digest to %.12s..., recorded %.12s...",
                hex, want);
        goto out;
    }
    for (int k = 0; k < 4; k++) {
        memcpy(tmp, st[k], n * sizeof(double));
        f->stage_ms[k] = median(tmp, n);
    }
    memcpy(tmp, tot, n * sizeof(double));
    f->attention_ms = median(tmp, n);
    memcpy(tmp, whole, n * sizeof(double));
    f->whole_ms = median(tmp, n);
    f->share_pct = 100.0 * (double)f->calls * f->attention_ms / f->whole_ms;
    f->score_share_pct = 100.0 * (double)f->calls * f->stage_ms[0] / f->whole_ms;
    if (!(f->share_pct > 0.0)) {
        an_fail(c, "stages_ms", AN_VALUE, "global attention takes no time");
        goto out;
    }
    f->required_pct = 100.0 * CEIL_FLOOR_PCT / f->share_pct;
    /* Every figure written is finite and a true share lies in (0, 100]. */
    const double all[] = {f->stage_ms[0], f->stage_ms[1], f->stage_ms[2], f->stage_ms[3],
                          f->attention_ms, f->whole_ms, f->share_pct, f->score_share_pct,
                          f->required_pct};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        if (!isfinite(all[k])) {
            an_fail(c, "stages_ms", AN_NONFINITE, "a derived figure is not finite");
            goto out;
        }
    if (!(f->share_pct <= 100.0 && f->score_share_pct <= f->share_pct)) {
        an_fail(c, "whole_token_ms", AN_INCONSISTENT,
                "the median attention share %.6g%% (score %.6g%%) is not a share of the "
                "median whole token",
                f->share_pct, f->score_share_pct);
        goto out;
    }
    rc = 0;
out:
    free(buf);
    return rc;
}

int an_profile_doc(an_ctx *c, const json_t *doc, int64_t context)
{
    ceiling_fig f;
    return profile(c, doc, context, &f);
}

static double round2(double x) { return round(x * 100.0) / 100.0; }

int an_ceiling(an_ctx *c, const char *const *paths, size_t n, const an_opts *o, json_t **analysis)
{
    (void)o;
    if (n != 2) {
        c->file = "(command line)";
        return an_io(c, "%zu stage profiles given, one at 65536 and one at 131072 are required",
                     n),
               1;
    }
    ceiling_fig f[2];
    int seen[2] = {0, 0};
    json_t *bound = json_array();
    json_t *ctxs = json_array();
    int rc = 1;
    if (!bound || !ctxs) {
        an_io(c, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *doc = NULL;
        char sha[65];
        c->file = paths[i];
        if (an_load(c, paths[i], &doc, sha))
            goto out;
        const json_t *cx = json_object_get(doc, "context");
        int at = -1;
        for (int k = 0; k < 2; k++)
            if (json_is_integer(cx) && json_integer_value(cx) == contexts[k])
                at = k;
        if (at < 0) {
            if (!profile(c, doc, contexts[i], &f[0]) || !c->failed)
                an_fail(c, "context", AN_GEOMETRY, "not 65536 or 131072");
            json_decref(doc);
            goto out;
        }
        if (seen[at]++) {
            an_fail(c, "context", AN_SWAPPED, "a second profile at %" PRId64, contexts[at]);
            json_decref(doc);
            goto out;
        }
        int bad = profile(c, doc, contexts[at], &f[at]);
        json_decref(doc);
        if (bad)
            goto out;
        if (json_array_append_new(bound, json_pack("{s:I, s:s, s:s}", "context",
                                                   (json_int_t)contexts[at], "path", paths[i],
                                                   "sha256", sha))) {
            an_io(c, "out of memory");
            goto out;
        }
    }
    for (int k = 0; k < 2; k++) {
        const ceiling_fig *x = &f[k];
        /* json_pack fails on a non-finite real: that is a failure, never a
         * silently missing context. */
        json_t *e = json_pack(
            "{s:I, s:I, s:I, s:I, s:{s:f, s:f, s:f, s:f}, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
            "context", (json_int_t)x->context, "repetitions", (json_int_t)x->reps, "samples",
            (json_int_t)(x->reps * x->per_rep), "global_attention_calls", (json_int_t)x->calls,
            "stage_median_ms", "score", x->stage_ms[0], "normalize", x->stage_ms[1], "value",
            x->stage_ms[2], "reduce", x->stage_ms[3], "attention_median_ms", x->attention_ms,
            "whole_token_median_ms", x->whole_ms, "global_attention_share", x->share_pct / 100.0,
            "global_attention_share_pct", round2(x->share_pct), "score_share_pct",
            round2(x->score_share_pct), "admission_floor_pct", CEIL_FLOOR_PCT,
            "required_reduction", x->required_pct / 100.0, "required_reduction_pct",
            round2(x->required_pct));
        if (!e || json_array_append_new(ctxs, e)) {
            c->file = paths[0];
            an_fail(c, "contexts", AN_NONFINITE, "the attribution at %" PRId64 " cannot be "
                    "written (a figure is not finite)", x->context);
            goto out;
        }
    }
    rc = 0;
    if (analysis) {
        json_t *a = gem_receipt_new("gem.ceiling.v1", "gem analyze ceiling", cli_git_commit());
        int bad =
            !a || json_object_set(a, "profiles", bound) || json_object_set(a, "contexts", ctxs) ||
            json_object_set_new(a, "formula",
                                json_string("share = calls * median(attention) / median(whole "
                                            "token); required reduction = floor / share")) ||
            json_object_set_new(a, "promotion_claim", json_false()) ||
            json_object_set_new(
                a, "statement",
                json_string("Attribution only: the largest whole-token fraction a "
                            "global-attention change could affect, and the cut it needs to clear "
                            "the 3% admission floor. It does not predict a gain (compulsory K/V "
                            "reads, dot products, exponentials and reductions remain) and is not "
                            "a promotion claim."));
        if (bad) {
            json_decref(a);
            an_io(c, "out of memory building the attribution");
            rc = 1;
        } else {
            *analysis = a;
        }
    }
out:
    json_decref(bound);
    json_decref(ctxs);
    return rc;
}
