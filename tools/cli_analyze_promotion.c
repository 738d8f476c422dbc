/*
 * `gem analyze promotion`: the design's promotion decision on whole-token time,
 * written as a checked receipt (gem.promotion.v1, docs/receipts-records.md).
 *
 * Inputs are gem.model_profile.v1 records of `gem profile`: at one context
 * each, `repetitions` interleaved repetitions (ABBA order over repetitions) of
 * `samples_per_repetition` decode steps per route; routes.<route>.whole_token_ms
 * holds the steps repetition by repetition (entry r * samples + k is step k of
 * repetition r). Two records are at the long contexts (the design's 65,536 and
 * 131,072 positions unless the caller allows any two), any further ones at
 * short contexts below them.
 *
 * Per context and route, m_r is the median whole-token time of repetition r and
 * M the median of all its samples:
 *
 *   g_r        = 1 - m_r(fused) / m_r(baseline)       gain of repetition r
 *   G          = 1 - M(fused) / M(baseline)           overall gain
 *   spread     = (max_r m_r - min_r m_r) / M          per route
 *   gain range = max_r g_r - min_r g_r
 *
 * A long context passes when G > 3% and every g_r > 3%. A short context passes
 * when M(fused) / M(baseline) - 1 <= max(3%, gain range, spread(baseline),
 * spread(fused)). The decision is "promote" when both long contexts and every
 * short context pass, else "keep-baseline" with one reason per failed condition.
 *
 * Every record is checked fail-closed before any figure: schema and tool, the
 * model (name, layers, weights digest), the machine (its cpu and threads, or its
 * gpu), repetitions >= 3, samples >= 1, both routes with exactly repetitions x
 * samples whole-token times, each finite and in [1e-6, 1e9] ms (so every ratio
 * is finite), the recorded medians equal to the recomputed ones; then across
 * records one model, one machine (its fields other than real numbers, which are
 * measurements such as the read bandwidth), one backend and one KV cache type
 * (or none recorded in any), distinct contexts. The receipt binds every record
 * by the SHA-256 of the bytes checked; `--check` re-derives it from those files
 * and requires the same digests and the same receipt.
 *
 * Fields of a record that are not named here are not read, so that the producer
 * may add some; the digest still binds the whole file.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "cli.h"
#include "gem/receipt.h"

#define PROMO_MIN_GAIN 0.03       /* the design's 3% */
#define PROMO_MIN_GAIN_PCT 3.0    /* the same, as the receipt states it */
#define PROMO_MIN_REPS 3          /* the design's three interleaved repetitions */
#define PROMO_MAX_REPS 1000       /* what gem profile accepts */
#define PROMO_MAX_SAMPLES 1000000 /* repetitions x samples_per_repetition */
/* No decode step takes less than a nanosecond or more than 11.6 days; the
 * bounds keep every ratio of two times within [1e-15, 1e15]. */
#define PROMO_MIN_MS 1e-6
#define PROMO_MAX_MS 1e9
#define PROMO_MAX_CONTEXT (INT64_C(1) << 24)
#define PROMO_MAX_LAYERS 4096
#define PROMO_MEDIAN_TOL 1e-9 /* relative: a recorded median against the recomputed one */
#define PROMO_ORDER "ABBA over repetitions, consecutive tokens"
#define PROMO_UNRECORDED "unrecorded"

static const int64_t design_long[2] = {65536, 131072};
static const char *const route_names[2] = {"baseline", "fused"};

static const char rule_text[] =
    "Per context and route: m_r = median whole-token time of repetition r, M = median of all "
    "samples (repetitions interleaved ABBA). g_r = 1 - m_r(fused) / m_r(baseline); G = 1 - "
    "M(fused) / M(baseline); spread(route) = (max_r m_r - min_r m_r) / M; gain range = max_r g_r "
    "- min_r g_r. A long context passes when G > 0.03 and every g_r > 0.03. A short context "
    "passes when M(fused) / M(baseline) - 1 <= max(0.03, gain range, spread(baseline), "
    "spread(fused)). promote when both long contexts (65536 and 131072 unless design_contexts "
    "is false) and every short context pass; otherwise keep-baseline.";

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0, n), n >= 1; sorts v. The mean of the two middle values
 * for an even n, as gem profile computes it. */
static double median_sorting(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void an_promotion_fig_free(an_promotion_fig *f)
{
    if (!f)
        return;
    free(f->owned);
    memset(f, 0, sizeof *f);
}

/* routes.<route>.whole_token_ms: exactly n numbers in [PROMO_MIN_MS, PROMO_MAX_MS]
 * into out. 0, or -1 with c set. */
static int whole_token_series(an_ctx *c, const json_t *route, const char *route_path, size_t n,
                              double *out)
{
    const json_t *a = NULL;
    if (an_arr(c, route, route_path, "whole_token_ms", &a))
        return -1;
    char p[64];
    snprintf(p, sizeof p, "%s.whole_token_ms", route_path);
    const size_t have = json_array_size(a);
    if (have < n)
        return an_fail(c, p, AN_MISSING,
                       "%zu samples, repetitions x samples_per_repetition = %zu", have, n);
    if (have > n)
        return an_fail(c, p, AN_EXTRA, "%zu samples, repetitions x samples_per_repetition = %zu",
                       have, n);
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(a, i);
        if (json_is_null(x))
            return an_fail(c, p, AN_NONFINITE, "sample %zu is null (NaN or infinity)", i);
        if (!json_is_number(x))
            return an_fail(c, p, AN_TYPE, "sample %zu is not a number", i);
        const double v = json_number_value(x);
        if (!isfinite(v))
            return an_fail(c, p, AN_NONFINITE, "sample %zu", i);
        if (!(v >= PROMO_MIN_MS && v <= PROMO_MAX_MS))
            return an_fail(c, p, AN_RANGE, "sample %zu, %.17g ms, is outside [%g, %g] ms", i, v,
                           PROMO_MIN_MS, PROMO_MAX_MS);
        out[i] = v;
    }
    return 0;
}

/* Where a record was measured: machine names its CPU ("cpu", with "threads") or its
 * GPU ("gpu"), or both; backend, when present (gem profile --backend), is a
 * non-empty string. */
static int platform_fields(an_ctx *c, const json_t *d)
{
    const json_t *machine = NULL;
    const char *s = NULL;
    if (an_obj(c, d, "", "machine", &machine))
        return -1;
    const int has_cpu = json_object_get(machine, "cpu") != NULL;
    const int has_gpu = json_object_get(machine, "gpu") != NULL;
    if (!has_cpu && !has_gpu)
        return an_fail(c, "machine.cpu", AN_MISSING, "the machine names neither a cpu nor a gpu");
    if (has_cpu) {
        if (an_str(c, machine, "machine", "cpu", &s))
            return -1;
        if (!s[0])
            return an_fail(c, "machine.cpu", AN_VALUE, "empty");
        if (an_int_in(c, machine, "machine", "threads", 1, INT64_C(1) << 20, NULL))
            return -1;
    }
    if (has_gpu) {
        if (an_str(c, machine, "machine", "gpu", &s))
            return -1;
        if (!s[0])
            return an_fail(c, "machine.gpu", AN_VALUE, "empty");
    }
    if (json_object_get(d, "backend")) {
        if (an_str(c, d, "", "backend", &s))
            return -1;
        if (!s[0])
            return an_fail(c, "backend", AN_VALUE, "empty");
    }
    return 0;
}

int an_promotion_record_doc(an_ctx *c, const json_t *d, an_promotion_fig *f)
{
    memset(f, 0, sizeof *f);
    if (!json_is_object(d))
        return an_fail(c, "", AN_TYPE, "the document is not a JSON object");
    const json_t *model = NULL, *cx = NULL, *routes = NULL;
    const char *s = NULL;
    int64_t n_layers = 0;
    if (an_schema(c, d, "gem.model_profile.v1") || an_tool(c, d, "gem profile") ||
        an_obj(c, d, "", "model", &model) || an_str(c, model, "model", "name", &s))
        return -1;
    if (!s[0])
        return an_fail(c, "model.name", AN_VALUE, "empty");
    if (an_int_in(c, model, "model", "n_layers", 1, PROMO_MAX_LAYERS, &n_layers) ||
        an_int_in(c, model, "model", "full_layers", 0, n_layers, NULL) ||
        an_sha(c, model, "model", "weights_sha256", &s) || platform_fields(c, d) ||
        an_obj(c, d, "", "context", &cx) ||
        an_int_in(c, cx, "context", "positions", 1, PROMO_MAX_CONTEXT, &f->context))
        return -1;
    if (json_object_get(cx, "kv_dtype") && an_str(c, cx, "context", "kv_dtype", &s))
        return -1;
    if (json_object_get(cx, "k_from_v")) {
        int k_from_v = 0;
        if (an_bool(c, cx, "context", "k_from_v", &k_from_v))
            return -1;
        if (k_from_v)
            return an_fail(c, "context.k_from_v", AN_VALUE,
                           "true: only the fused route was timed (K rebuilt from V); the "
                           "decision needs the baseline route in the same run");
    }
    if (an_int(c, d, "", "repetitions", &f->reps))
        return -1;
    if (f->reps < PROMO_MIN_REPS)
        return an_fail(c, "repetitions", AN_THRESHOLD, "%" PRId64 " < %d interleaved repetitions",
                       f->reps, PROMO_MIN_REPS);
    if (f->reps > PROMO_MAX_REPS)
        return an_fail(c, "repetitions", AN_RANGE, "%" PRId64 " is above %d", f->reps,
                       PROMO_MAX_REPS);
    if (an_int(c, d, "", "samples_per_repetition", &f->per_rep))
        return -1;
    /* reps in [3, 1000]: the bound on per_rep keeps reps * per_rep <= PROMO_MAX_SAMPLES */
    if (f->per_rep < 1 || f->per_rep > PROMO_MAX_SAMPLES / f->reps)
        return an_fail(c, "samples_per_repetition", AN_RANGE,
                       "%" PRId64 " is outside [1, %" PRId64 "] for %" PRId64 " repetitions",
                       f->per_rep, (int64_t)PROMO_MAX_SAMPLES / f->reps, f->reps);
    if (an_str_eq(c, d, "", "order", PROMO_ORDER, AN_VALUE) ||
        an_obj(c, d, "", "routes", &routes) || an_keys(c, routes, "routes", route_names, 2))
        return -1;

    /* reps * per_rep <= PROMO_MAX_SAMPLES: every size below fits in size_t */
    const size_t reps = (size_t)f->reps, per_rep = (size_t)f->per_rep, n = reps * per_rep;
    /* samples of both routes and a sorting copy; the figures kept in f->owned */
    double *work = malloc(3 * n * sizeof(double));
    double *owned = malloc(3 * reps * sizeof(double));
    if (!work || !owned) {
        free(work);
        free(owned);
        return an_io(c, "out of memory for %zu samples", n);
    }
    double *w[2] = {work, work + n}, *tmp = work + 2 * n;
    f->owned = owned;
    f->rep_median_ms[0] = owned;
    f->rep_median_ms[1] = owned + reps;
    f->rep_gain = owned + 2 * reps;
    int rc = -1;
    for (int r = 0; r < 2; r++) {
        const json_t *route = NULL;
        char rp[32];
        snprintf(rp, sizeof rp, "routes.%s", route_names[r]);
        if (an_obj(c, routes, "routes", route_names[r], &route) ||
            whole_token_series(c, route, rp, n, w[r]))
            goto out;
        memcpy(tmp, w[r], n * sizeof(double));
        f->median_ms[r] = median_sorting(tmp, n);
        /* the producer's median, when it writes one, is the one recomputed here */
        if (json_object_get(route, "whole_token_median_ms")) {
            double recorded = 0.0;
            if (an_real(c, route, rp, "whole_token_median_ms", &recorded))
                goto out;
            if (!(fabs(recorded - f->median_ms[r]) <= PROMO_MEDIAN_TOL * f->median_ms[r])) {
                char p[64];
                snprintf(p, sizeof p, "%s.whole_token_median_ms", rp);
                an_fail(c, p, AN_INCONSISTENT, "%.17g ms, the samples' median is %.17g ms",
                        recorded, f->median_ms[r]);
                goto out;
            }
        }
        double lo = 0.0, hi = 0.0;
        for (size_t k = 0; k < reps; k++) {
            memcpy(tmp, w[r] + k * per_rep, per_rep * sizeof(double));
            const double m = median_sorting(tmp, per_rep);
            f->rep_median_ms[r][k] = m;
            lo = k == 0 || m < lo ? m : lo;
            hi = k == 0 || m > hi ? m : hi;
        }
        f->spread[r] = (hi - lo) / f->median_ms[r];
    }
    f->gain = 1.0 - f->median_ms[1] / f->median_ms[0];
    double lo = 0.0, hi = 0.0;
    for (size_t k = 0; k < reps; k++) {
        const double g = 1.0 - f->rep_median_ms[1][k] / f->rep_median_ms[0][k];
        f->rep_gain[k] = g;
        lo = k == 0 || g < lo ? g : lo;
        hi = k == 0 || g > hi ? g : hi;
    }
    f->min_rep_gain = lo;
    f->gain_range = hi - lo;
    rc = 0;
out:
    free(work);
    if (rc)
        an_promotion_fig_free(f);
    return rc;
}

/* ---- across records ----------------------------------------------------------- */

/* A copy of v without the real numbers in its objects, at every depth: what
 * names a machine rather than what a run measured on it (the read
 * bandwidth). NULL when out of memory. */
static json_t *identity_copy(const json_t *v)
{
    if (!json_is_object(v))
        return json_deep_copy(v);
    json_t *o = json_object();
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)v, k, x) {
        if (!o)
            break;
        if (json_is_real(x))
            continue;
        json_t *y = identity_copy(x);
        if (!y || json_object_set_new(o, k, y)) { /* set_new releases y on failure */
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

/* The string field key of o, or PROMO_UNRECORDED when o does not have it
 * (its type was checked with the record). */
static const char *recorded_string(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : PROMO_UNRECORDED;
}

/* One input record: its file, the document, its digest and its figures. */
typedef struct promo_record {
    const char *path;
    int is_long;
    json_t *doc;
    char sha[65];
    an_promotion_fig fig;
} promo_record;

/* `field` (a path for the message) of record b must equal that of the first
 * record a: identities of what was measured. -1 with c set (file swapped) when
 * they differ. */
static int same_identity(an_ctx *c, const promo_record *a, const promo_record *b,
                         const char *field, const json_t *va, const json_t *vb)
{
    json_t *ia = va ? identity_copy(va) : json_string(PROMO_UNRECORDED);
    json_t *ib = vb ? identity_copy(vb) : json_string(PROMO_UNRECORDED);
    int rc = 0;
    if (!ia || !ib) {
        rc = an_io(c, "out of memory");
    } else if (!json_equal(ia, ib)) {
        char ta[160], tb[160];
        char *da = json_dumps(ia, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
        char *db = json_dumps(ib, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
        snprintf(ta, sizeof ta, "%s", da ? da : "?");
        snprintf(tb, sizeof tb, "%s", db ? db : "?");
        free(da);
        free(db);
        c->file = b->path;
        rc = an_fail(c, field, AN_SWAPPED, "%.150s, while %.200s records %.150s", tb, a->path,
                     ta);
    }
    json_decref(ia);
    json_decref(ib);
    return rc;
}

/* Orders records: long contexts first, then short ones, each by context. */
static int cmp_record(const void *x, const void *y)
{
    const promo_record *a = *(const promo_record *const *)x, *b = *(const promo_record *const *)y;
    if (a->is_long != b->is_long)
        return a->is_long ? -1 : 1;
    return (a->fig.context > b->fig.context) - (a->fig.context < b->fig.context);
}

/* A JSON array of n reals; NULL when out of memory or a value is not finite. */
static json_t *reals(const double *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (!isfinite(v[i]) || json_array_append_new(a, json_real(v[i]))) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

/* The figures of one route at one context. */
static json_t *route_json(const an_promotion_fig *f, int r)
{
    json_t *rep = reals(f->rep_median_ms[r], (size_t)f->reps);
    if (!rep)
        return NULL;
    return json_pack("{s:f, s:o, s:f}", "median_ms", f->median_ms[r], "repetition_median_ms",
                     rep, "spread", f->spread[r]);
}

/* Appends a reason (formatted) to the array; -1 when out of memory. */
static int add_reason(json_t *reasons, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int add_reason(json_t *reasons, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return json_array_append_new(reasons, json_string(text)) ? -1 : 0;
}

/* The decision figures of one context into a new object, its failed conditions
 * appended to reasons; *passes says whether it passed. NULL when out of memory
 * or a figure is not finite. */
static json_t *context_json(const promo_record *rec, json_t *reasons, int *passes)
{
    const an_promotion_fig *f = &rec->fig;
    json_t *base = route_json(f, 0), *fused = route_json(f, 1);
    json_t *gains = reals(f->rep_gain, (size_t)f->reps);
    json_t *e = NULL;
    if (!base || !fused || !gains) {
        json_decref(base);
        json_decref(fused);
        json_decref(gains);
        return NULL;
    }
    const int64_t ctx = f->context;
    int bad = 0;
    if (rec->is_long) {
        const int overall_ok = f->gain > PROMO_MIN_GAIN;
        const int reps_ok = f->min_rep_gain > PROMO_MIN_GAIN;
        *passes = overall_ok && reps_ok;
        if (!overall_ok)
            bad |= add_reason(reasons,
                              "context %" PRId64 ": the overall gain, %.2f%%, is not above 3%%",
                              ctx, 100.0 * f->gain);
        if (!reps_ok) {
            size_t worst = 0;
            for (size_t k = 1; k < (size_t)f->reps; k++)
                worst = f->rep_gain[k] < f->rep_gain[worst] ? k : worst;
            bad |= add_reason(reasons,
                              "context %" PRId64 ": the gain of repetition %zu of %" PRId64
                              ", %.2f%%, is not above 3%% (the gain is within the observed "
                              "variation)",
                              ctx, worst + 1, f->reps, 100.0 * f->rep_gain[worst]);
        }
        e = json_pack("{s:I, s:s, s:I, s:I, s:o, s:o, s:f, s:o, s:f, s:f, s:b}", "context",
                      (json_int_t)ctx, "role", "long", "repetitions", (json_int_t)f->reps,
                      "samples_per_repetition", (json_int_t)f->per_rep, "baseline", base,
                      "fused", fused, "gain", f->gain, "repetition_gain", gains,
                      "min_repetition_gain", f->min_rep_gain, "gain_range", f->gain_range,
                      "passes", *passes);
    } else {
        const double regression = f->median_ms[1] / f->median_ms[0] - 1.0;
        double tolerance = PROMO_MIN_GAIN;
        tolerance = f->gain_range > tolerance ? f->gain_range : tolerance;
        tolerance = f->spread[0] > tolerance ? f->spread[0] : tolerance;
        tolerance = f->spread[1] > tolerance ? f->spread[1] : tolerance;
        *passes = regression <= tolerance;
        if (!*passes)
            bad |= add_reason(reasons,
                              "context %" PRId64 " (short): the fused median is %.2f%% above "
                              "the baseline's, beyond the tolerance of %.2f%%",
                              ctx, 100.0 * regression, 100.0 * tolerance);
        e = json_pack("{s:I, s:s, s:I, s:I, s:o, s:o, s:f, s:o, s:f, s:f, s:f, s:f, s:b}",
                      "context", (json_int_t)ctx, "role", "short", "repetitions",
                      (json_int_t)f->reps, "samples_per_repetition", (json_int_t)f->per_rep,
                      "baseline", base, "fused", fused, "gain", f->gain, "repetition_gain",
                      gains, "min_repetition_gain", f->min_rep_gain, "gain_range",
                      f->gain_range, "regression", regression, "tolerance", tolerance,
                      "passes", *passes);
    }
    if (bad) {
        json_decref(e);
        return NULL;
    }
    return e;
}

/* The gem.promotion.v1 receipt of records that passed every check, in the
 * receipt's order (rec); *promote receives the decision. NULL when out of
 * memory or a figure is not finite. */
static json_t *build_receipt(promo_record *const *rec, size_t n, int any_long_contexts,
                             int *promote)
{
    const json_t *d0 = rec[0]->doc;
    const json_t *m0 = json_object_get(d0, "model");
    json_t *a = gem_receipt_new("gem.promotion.v1", "gem analyze promotion", cli_git_commit());
    json_t *bound = json_array(), *ctxs = json_array(), *reasons = json_array();
    json_t *longs = json_array(), *shorts = json_array();
    json_t *machine = identity_copy(json_object_get(d0, "machine"));
    int bad = !a || !bound || !ctxs || !reasons || !longs || !shorts || !machine;
    int all_pass = 1;
    for (size_t i = 0; i < n && !bad; i++) {
        const promo_record *r = rec[i];
        int passes = 0;
        json_t *e = context_json(r, reasons, &passes);
        all_pass = all_pass && passes;
        bad = !e || json_array_append_new(ctxs, e) ||
              json_array_append_new(bound, json_pack("{s:s, s:I, s:s, s:s}", "role",
                                                     r->is_long ? "long" : "short", "context",
                                                     (json_int_t)r->fig.context, "path",
                                                     r->path, "sha256", r->sha)) ||
              json_array_append_new(r->is_long ? longs : shorts,
                                    json_integer((json_int_t)r->fig.context));
    }
    *promote = all_pass;
    size_t n_short = 0;
    for (size_t i = 0; i < n; i++)
        n_short += !rec[i]->is_long;
    char statement[1024];
    snprintf(statement, sizeof statement,
             "%sDecision on whole-token time alone, from interleaved repetitions of the baseline "
             "and fused routes of the model on the machine and backend named (the rule field). "
             "It does not cover logits or the backend-op oracle, the design's other conditions "
             "of this gate, nor any other model, machine or backend; operator time is never "
             "part of it.%s",
             any_long_contexts ? "Long contexts other than the design's 65536 and 131072 "
                                 "(--any-long-contexts): not the design's promotion gate. "
                               : "",
             n_short ? "" : " No short context was given: short-context regression is unchecked.");
    if (!bad) {
        json_t *model = json_pack(
            "{s:O, s:O, s:O, s:O}", "name", json_object_get(m0, "name"), "n_layers",
            json_object_get(m0, "n_layers"), "full_layers", json_object_get(m0, "full_layers"),
            "weights_sha256", json_object_get(m0, "weights_sha256"));
        bad = !model || json_object_set(a, "bound_files", bound) ||
              json_object_set_new(a, "model", model) ||
              json_object_set(a, "machine", machine) ||
              json_object_set_new(a, "backend", json_string(recorded_string(d0, "backend")));
        bad = bad ||
              json_object_set_new(a, "kv_dtype",
                                  json_string(recorded_string(json_object_get(d0, "context"),
                                                              "kv_dtype"))) ||
              json_object_set_new(a, "design_contexts", json_boolean(!any_long_contexts)) ||
              json_object_set(a, "long_contexts", longs) ||
              json_object_set(a, "short_contexts", shorts) ||
              json_object_set(a, "contexts", ctxs) ||
              json_object_set_new(a, "min_gain_pct", json_real(PROMO_MIN_GAIN_PCT)) ||
              json_object_set_new(a, "rule", json_string(rule_text)) ||
              json_object_set_new(a, "decision",
                                  json_string(all_pass ? "promote" : "keep-baseline")) ||
              json_object_set(a, "reasons", reasons) ||
              json_object_set_new(a, "statement", json_string(statement));
    }
    json_decref(bound);
    json_decref(ctxs);
    json_decref(reasons);
    json_decref(longs);
    json_decref(shorts);
    json_decref(machine);
    if (bad) {
        json_decref(a);
        return NULL;
    }
    return a;
}

int an_promotion(an_ctx *c, const an_promotion_in *in, json_t **receipt, int *promote)
{
    *promote = 0;
    if (receipt)
        *receipt = NULL;
    c->file = "(command line)";
    if (in->n > AN_PROMOTION_MAX_FILES)
        return an_io(c, "%zu records given, at most %d", in->n, AN_PROMOTION_MAX_FILES), 1;
    size_t n_long = 0;
    for (size_t i = 0; i < in->n; i++)
        n_long += in->files[i].is_long != 0;
    if (n_long != 2)
        return an_io(c, "%zu long-context records given, two are required (65536 and 131072)",
                     n_long),
               1;
    promo_record recs[AN_PROMOTION_MAX_FILES];
    promo_record *order[AN_PROMOTION_MAX_FILES];
    memset(recs, 0, sizeof recs);
    int rc = 1;
    /* Each file read once; what is checked is what was digested. */
    for (size_t i = 0; i < in->n; i++) {
        promo_record *r = &recs[i];
        r->path = in->files[i].path;
        r->is_long = in->files[i].is_long != 0;
        order[i] = r;
        c->file = r->path;
        if (an_load(c, r->path, &r->doc, r->sha))
            goto out;
        const char *want = in->files[i].sha256;
        if (want && strcmp(want, r->sha) != 0) {
            an_fail(c, "", AN_DIGEST, "the file digests to %.12s..., the receipt binds %.12s...",
                    r->sha, want);
            goto out;
        }
    }
    for (size_t i = 0; i < in->n; i++) {
        c->file = recs[i].path;
        if (an_promotion_record_doc(c, recs[i].doc, &recs[i].fig))
            goto out;
    }
    /* One model, one machine, one backend, one KV cache type. */
    const promo_record *a = &recs[0];
    for (size_t i = 1; i < in->n; i++) {
        const promo_record *b = &recs[i];
        static const char *const model_keys[5] = {"name", "n_layers", "full_layers",
                                                  "weights_sha256", "weights_random_seed"};
        const json_t *ma = json_object_get(a->doc, "model"), *mb = json_object_get(b->doc, "model");
        for (int k = 0; k < 5; k++) {
            char p[48];
            snprintf(p, sizeof p, "model.%s", model_keys[k]);
            if (same_identity(c, a, b, p, json_object_get(ma, model_keys[k]),
                              json_object_get(mb, model_keys[k])))
                goto out;
        }
        if (same_identity(c, a, b, "machine", json_object_get(a->doc, "machine"),
                          json_object_get(b->doc, "machine")) ||
            same_identity(c, a, b, "backend", json_object_get(a->doc, "backend"),
                          json_object_get(b->doc, "backend")) ||
            same_identity(c, a, b, "context.kv_dtype",
                          json_object_get(json_object_get(a->doc, "context"), "kv_dtype"),
                          json_object_get(json_object_get(b->doc, "context"), "kv_dtype")))
            goto out;
    }
    /* Distinct contexts; the design's two long ones unless any are allowed;
     * short ones below both long ones. */
    int64_t shortest_long = 0;
    for (size_t i = 0; i < in->n; i++) {
        const promo_record *r = &recs[i];
        c->file = r->path;
        for (size_t j = 0; j < i; j++)
            if (recs[j].fig.context == r->fig.context) {
                an_fail(c, "context.positions", AN_SWAPPED,
                        "a second record at %" PRId64 " positions (also %.200s)", r->fig.context,
                        recs[j].path);
                goto out;
            }
        if (r->is_long && !in->any_long_contexts && r->fig.context != design_long[0] &&
            r->fig.context != design_long[1]) {
            an_fail(c, "context.positions", AN_GEOMETRY,
                    "%" PRId64 ", the design's long contexts are 65536 and 131072 "
                    "(--any-long-contexts allows others, and the receipt says so)",
                    r->fig.context);
            goto out;
        }
        if (r->is_long && (shortest_long == 0 || r->fig.context < shortest_long))
            shortest_long = r->fig.context;
    }
    for (size_t i = 0; i < in->n; i++) {
        const promo_record *r = &recs[i];
        if (!r->is_long && r->fig.context >= shortest_long) {
            c->file = r->path;
            an_fail(c, "context.positions", AN_VALUE,
                    "a short context of %" PRId64 " positions is not below the long contexts",
                    r->fig.context);
            goto out;
        }
    }
    qsort(order, in->n, sizeof order[0], cmp_record);
    json_t *built = build_receipt(order, in->n, in->any_long_contexts, promote);
    if (!built) {
        c->file = in->files[0].path;
        an_io(c, "cannot build the receipt (out of memory)");
        goto out;
    }
    rc = 0;
    if (receipt)
        *receipt = built;
    else
        json_decref(built);
out:
    for (size_t i = 0; i < in->n; i++) {
        json_decref(recs[i].doc);
        an_promotion_fig_free(&recs[i].fig);
    }
    return rc;
}

int an_promotion_check(an_ctx *c, const char *path, json_t **receipt, int *promote)
{
    static const char *const bound_keys[4] = {"role", "context", "path", "sha256"};
    *promote = 0;
    if (receipt)
        *receipt = NULL;
    c->file = path;
    json_t *given = NULL;
    if (an_load(c, path, &given, NULL))
        return 1;
    an_promotion_in in;
    memset(&in, 0, sizeof in);
    const json_t *bound = NULL;
    size_t n_long = 0;
    int design = 0, rc = 1;
    json_t *want = NULL;
    if (an_schema(c, given, "gem.promotion.v1") || an_tool(c, given, "gem analyze promotion") ||
        an_arr(c, given, "", "bound_files", &bound) ||
        an_bool(c, given, "", "design_contexts", &design))
        goto out;
    if (json_array_size(bound) > AN_PROMOTION_MAX_FILES) {
        an_fail(c, "bound_files", AN_RANGE, "%zu files, at most %d", json_array_size(bound),
                AN_PROMOTION_MAX_FILES);
        goto out;
    }
    for (size_t i = 0; i < json_array_size(bound); i++) {
        char p[48];
        snprintf(p, sizeof p, "bound_files[%zu]", i);
        const json_t *b = json_array_get(bound, i);
        const char *role = NULL;
        an_promotion_file *f = &in.files[in.n++];
        if (an_keys(c, b, p, bound_keys, 4) || an_str(c, b, p, "role", &role) ||
            an_str(c, b, p, "path", &f->path) || an_sha(c, b, p, "sha256", &f->sha256))
            goto out;
        if (strcmp(role, "long") != 0 && strcmp(role, "short") != 0) {
            an_fail(c, p, AN_VALUE, "role '%.40s' is not long or short", role);
            goto out;
        }
        if (!f->path[0]) {
            an_fail(c, p, AN_VALUE, "empty path");
            goto out;
        }
        f->is_long = !strcmp(role, "long");
        n_long += (size_t)f->is_long;
    }
    if (n_long != 2) {
        an_fail(c, "bound_files", AN_VALUE, "%zu long-context records, a receipt binds two",
                n_long);
        goto out;
    }
    in.any_long_contexts = !design;
    /* The receipt's own files, re-derived; then the receipt against the re-derived one. */
    if (an_promotion(c, &in, &want, promote))
        goto out;
    c->file = path;
    if (an_analysis_matches(c, given, want))
        goto out;
    rc = 0;
    if (receipt) {
        *receipt = want;
        want = NULL;
    }
out:
    if (rc)
        *promote = 0;
    json_decref(want);
    json_decref(given);
    return rc;
}
