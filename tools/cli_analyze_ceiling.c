/*
 * `gem analyze ceiling`: the non-promotional ceiling attribution of the design
 * (fused-split-kv-ceiling.json). From stage profiles of the baseline route
 * (gem.stage_profile.v1, docs/receipts-records.md) at 65,536 and 131,072
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
 *
 * A profile may also carry the whole-token breakdown of every sample
 * (whole_token_stages_ms: embedding, norms, projections, sliding_attention,
 * full_attention, mlp, logits; gem profile writes it). Then the seven must add
 * up to the sample's whole-token time, the ten calls' stages must fit in its
 * full-attention stage, the digest covers them and the output gives their
 * medians.
 *
 * The KV cache type is the design's F32 unless the caller names another one
 * (an_opts.kv_dtype, `--kv-dtype`): then every profile must record exactly
 * that type, and the output states it. A profile of another type than the one
 * asked for fails as a wrong geometry, so the default screen is unchanged.
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

/* The fields of a profile; the last, the whole-token breakdown, is optional. */
static const char *const top_keys[] = {"schema",      "tool",        "selector",
                                       "geometry",    "model",       "context",
                                       "repetitions", "samples_per_repetition",
                                       "stages_ms",   "attention_total_ms",
                                       "whole_token_ms", "samples_sha256", "provenance",
                                       "whole_token_stages_ms"};
static const char *const geo_keys[] = {"n_q_heads", "n_kv_heads", "dk", "dv", "dtype", "window"};
static const char *const model_keys[] = {"n_layers", "global_attention_calls"};
static const char *const stage_names[] = {"score", "normalize", "value", "reduce"};
/* The stages of a whole model step, in the order of whole_token_stages_ms. */
static const char *const whole_stage_names[AN_WHOLE_STAGES] = {
    "embedding", "norms", "projections", "sliding_attention", "full_attention", "mlp", "logits"};
#define WHOLE_FULL_ATTENTION 4 /* whole_stage_names[WHOLE_FULL_ATTENTION] */
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
int an_stage_profile_samples_sha256(const json_t *doc, char hex[65])
{
    const json_t *sm = json_object_get(doc, "stages_ms");
    const json_t *series[6] = {json_object_get(sm, "score"), json_object_get(sm, "normalize"),
                               json_object_get(sm, "value"), json_object_get(sm, "reduce"),
                               json_object_get(doc, "attention_total_ms"),
                               json_object_get(doc, "whole_token_ms")};
    static const char *const names[6] = {"score", "normalize", "value", "reduce",
                                         "attention_total_ms", "whole_token_ms"};
    /* the optional whole-token breakdown, one line each after the six */
    const json_t *wsm = json_object_get(doc, "whole_token_stages_ms");
    const int n_series = wsm ? 6 + AN_WHOLE_STAGES : 6;
    const json_t *extra[AN_WHOLE_STAGES];
    char extra_names[AN_WHOLE_STAGES][48];
    for (int k = 0; k < AN_WHOLE_STAGES; k++) {
        extra[k] = json_object_get(wsm, whole_stage_names[k]);
        snprintf(extra_names[k], sizeof extra_names[k], "whole_token_stages_ms.%s",
                 whole_stage_names[k]);
    }
    /* "%.17g" of a double is at most 24 characters; 32 per value and 64 per name
     * leave room for the separators. */
    size_t cap = 64;
    for (int k = 0; k < n_series; k++) {
        const json_t *a = k < 6 ? series[k] : extra[k - 6];
        size_t values = 0;
        if (gem_mul_size(json_array_size(a), 32, &values) != GEM_OK ||
            gem_add_size(cap, values, &cap) != GEM_OK || gem_add_size(cap, 64, &cap) != GEM_OK)
            return -1;
    }
    char *t = malloc(cap);
    if (!t)
        return -1;
    size_t len = 0;
    int ok = 1;
    for (int k = 0; k < n_series && ok; k++) {
        const json_t *a = k < 6 ? series[k] : extra[k - 6];
        int w = snprintf(t + len, cap - len, "%s:", k < 6 ? names[k] : extra_names[k - 6]);
        ok = w > 0 && (size_t)w < cap - len;
        len += ok ? (size_t)w : 0;
        for (size_t i = 0; ok && i < json_array_size(a); i++) {
            w = snprintf(t + len, cap - len, "%s%.17g", i ? "," : "",
                         json_number_value(json_array_get(a, i)));
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

typedef an_ceiling_fig ceiling_fig;

/* "f32" for NULL, else the type named. */
static const char *kv_dtype_or_f32(const char *kv_dtype) { return kv_dtype ? kv_dtype : "f32"; }

/* Every rule of the screen on one profile expected at `context` with KV type kv_dtype
 * (not NULL); f receives the attribution. 0, or -1 with c set. */
static int profile(an_ctx *c, const json_t *d, int64_t context, const char *kv_dtype,
                   ceiling_fig *f)
{
    if (!json_is_object(d))
        return an_fail(c, "", AN_TYPE, "the document is not a JSON object");
    const char *s = NULL;
    const json_t *wsm = json_object_get(d, "whole_token_stages_ms");
    f->has_whole_stages = wsm != NULL;
    /* every field, the breakdown only when it is there */
    const size_t n_top = NKEYS(top_keys) - (wsm ? 0 : 1);
    if (an_schema(c, d, "gem.stage_profile.v1") || an_keys(c, d, "", top_keys, n_top) ||
        an_tool(c, d, "gem profile") ||
        an_str_eq(c, d, "", "selector", "baseline", AN_VALUE) || an_str(c, d, "", "provenance", &s))
        return -1;
    const json_t *g = NULL, *m = NULL;
    if (an_obj(c, d, "", "geometry", &g) || an_keys(c, g, "geometry", geo_keys, NKEYS(geo_keys)) ||
        an_int_eq(c, g, "geometry", "n_q_heads", 32, NULL) ||
        an_int_eq(c, g, "geometry", "n_kv_heads", 4, NULL) ||
        an_int_eq(c, g, "geometry", "dk", 512, NULL) || an_int_eq(c, g, "geometry", "dv", 512, NULL) ||
        an_str_eq(c, g, "geometry", "dtype", kv_dtype, NULL) ||
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
    /* n <= CEIL_MAX_SAMPLES: the series (7 + 7 of n) fit easily */
    const size_t n = (size_t)(f->reps * f->per_rep);
    double *buf = calloc(n * (7 + AN_WHOLE_STAGES), sizeof(double));
    if (!buf)
        return an_fail(c, "", "internal", "out of memory");
    double *st[4] = {buf, buf + n, buf + 2 * n, buf + 3 * n};
    double *tot = buf + 4 * n, *whole = buf + 5 * n, *tmp = buf + 6 * n;
    double *ws[AN_WHOLE_STAGES]; /* the breakdown's series, when there */
    for (int k = 0; k < AN_WHOLE_STAGES; k++)
        ws[k] = buf + (size_t)(7 + k) * n;
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
    if (wsm) {
        if (an_keys(c, wsm, "whole_token_stages_ms", whole_stage_names, AN_WHOLE_STAGES))
            goto out;
        for (int k = 0; k < AN_WHOLE_STAGES; k++)
            if (samples(c, wsm, "whole_token_stages_ms", whole_stage_names[k], n, ws[k]))
                goto out;
    }
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
        if (!wsm)
            continue;
        double parts = 0.0;
        for (int k = 0; k < AN_WHOLE_STAGES; k++)
            parts += ws[k][i];
        if (!(fabs(parts - whole[i]) <= CEIL_TOTAL_TOL * fmax(fabs(whole[i]), 1e-12))) {
            an_fail(c, "whole_token_stages_ms", AN_VALUE,
                    "sample %zu: the stages add up to %.9g ms, the whole token says %.9g ms", i,
                    parts, whole[i]);
            goto out;
        }
        /* the calls' stages were timed inside the full-attention stage */
        const double inside = (double)f->calls * tot[i];
        const double full = ws[WHOLE_FULL_ATTENTION][i];
        if (!(inside <= full * (1.0 + CEIL_TOTAL_TOL))) {
            an_fail(c, "whole_token_stages_ms.full_attention", AN_INCONSISTENT,
                    "sample %zu: %" PRId64 " calls of %.9g ms do not fit in %.9g ms of full "
                    "attention",
                    i, f->calls, tot[i], full);
            goto out;
        }
    }
    const char *want = NULL;
    char hex[65];
    if (an_sha(c, d, "", "samples_sha256", &want))
        goto out;
    if (an_stage_profile_samples_sha256(d, hex) != 0) {
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
    for (int k = 0; k < AN_WHOLE_STAGES; k++) {
        f->whole_stage_ms[k] = 0.0;
        if (wsm) {
            memcpy(tmp, ws[k], n * sizeof(double));
            f->whole_stage_ms[k] = median(tmp, n);
        }
    }
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

int an_profile_doc(an_ctx *c, const json_t *doc, int64_t context, const char *kv_dtype,
                   an_ceiling_fig *fig)
{
    ceiling_fig f;
    int rc = profile(c, doc, context, kv_dtype_or_f32(kv_dtype), &f);
    if (rc == 0 && fig)
        *fig = f;
    return rc;
}

static double round2(double x) { return round(x * 100.0) / 100.0; }

int an_ceiling(an_ctx *c, const char *const *paths, size_t n, const an_opts *o, json_t **analysis)
{
    const char *kv_dtype = kv_dtype_or_f32(o ? o->kv_dtype : NULL);
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
            if (!profile(c, doc, contexts[i], kv_dtype, &f[0]) || !c->failed)
                an_fail(c, "context", AN_GEOMETRY, "not 65536 or 131072");
            json_decref(doc);
            goto out;
        }
        if (seen[at]++) {
            an_fail(c, "context", AN_SWAPPED, "a second profile at %" PRId64, contexts[at]);
            json_decref(doc);
            goto out;
        }
        int bad = profile(c, doc, contexts[at], kv_dtype, &f[at]);
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
        if (e && x->has_whole_stages) {
            json_t *meds = json_object();
            for (int j = 0; meds && j < AN_WHOLE_STAGES; j++)
                if (json_object_set_new(meds, whole_stage_names[j],
                                        json_real(x->whole_stage_ms[j]))) {
                    json_decref(meds);
                    meds = NULL;
                }
            if (!meds || json_object_set_new(e, "whole_token_stage_median_ms", meds)) {
                json_decref(e);
                e = NULL;
            }
        }
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
            json_object_set_new(a, "kv_dtype", json_string(kv_dtype)) ||
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
