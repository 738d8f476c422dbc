/*
 * libFuzzer harness for the receipt analyzers and the checks they rest on.
 * The first byte selects the target (its value modulo 16; the seed corpus
 * uses the ASCII digits '0'..'9', ':', ';' and '<'), the rest is its input:
 *
 *   0 merge-check receipt      1 resource receipt       2 operator record (8191)
 *   3 model record (8192)      4 stage profile (65536)  5 u64 seed string
 *   6 merge analysis against the analysis re-derived for a fixed receipt
 *   7 resource analysis against the analysis re-derived for a fixed receipt
 *   8 the command line's number parsers and commit check on raw text
 *   9 escaping for one terminal line on raw bytes
 *  10 online-softmax merge and finalize on raw floats
 *  11 the comparison gate on raw doubles
 *  12 whole-token model profile as the promotion decision reads it (13-15 too)
 *
 * Targets 0-7 and 12 parse JSON and run with recomputation and file access off
 * (the tests exercise those). Every input must end in a pass or exactly one
 * non-empty defect line without control characters, and each target's
 * contract is asserted (abort on a violation): no crash, no leak, no
 * undefined behaviour, and no result that breaks its documented invariants.
 *   build: cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang-14 -DGEM_FUZZ=ON \
 *            -DGEM_CUDA=OFF -DGEM_WERROR=OFF && cmake --build build-fuzz --target fuzz_receipts
 *   run:   build-fuzz/fuzz/fuzz_receipts fuzz/out fuzz/corpus -max_total_time=600
 */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "cli.h"
#include "gem/attn.h"
#include "gem/check.h"
#include "gem/receipt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_receipts: contract broken: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

/* No byte below 0x20 and no DEL. */
static int printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7F)
            return 0;
    return 1;
}

/* The receipts the analysis targets re-derive their expected analysis from. */
static const char merge_receipt[] =
    "{\"schema\": \"gem.merge_check.v1\", \"tool\": {\"name\": \"gem-online-merge-check\", "
    "\"version\": \"0.1.0\", \"git_commit\": \"d6b5244e8e04e23144ea4d1a8c9ff69ac1178423\"}, "
    "\"seed\": \"20260501\"}";
static const char resources_receipt[] =
    "{\"schema\": \"gem.resources.v1\", \"device\": {\"name\": \"NVIDIA H200\", "
    "\"compute_capability\": \"9.0\"}, \"kernels\": ["
    "{\"name\": \"gem_fused_first_pass_t4_s1_v0\", \"role\": \"fused_first_pass\"}, "
    "{\"name\": \"gem_fused_reducer\", \"role\": \"fused_reducer\"}, "
    "{\"name\": \"gem_baseline_score\", \"role\": \"baseline_score\"}, "
    "{\"name\": \"gem_baseline_normalize\", \"role\": \"baseline_normalize\"}, "
    "{\"name\": \"gem_baseline_value\", \"role\": \"baseline_value\"}, "
    "{\"name\": \"gem_baseline_reduce\", \"role\": \"baseline_reduce\"}]}";
static const char receipt_sha[] =
    "3c0c1b266fdef889ab6d1a08bcec8bc46464b394b32b2ae9c006761b82b83027";

static void json_target(unsigned kind, const uint8_t *data, size_t size)
{
    json_error_t err;
    json_t *doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &err);
    if (!doc)
        return;
    an_ctx c;
    memset(&c, 0, sizeof c);
    c.file = "fuzz";
    an_opts o = {.recompute = 0, .root = NULL, .threads = 1};
    int rc = 0;
    switch (kind) {
    case 0: rc = an_merge_boundary_doc(&c, doc, &o); break;
    case 1: rc = an_resources_doc(&c, doc, &o); break;
    case 2: rc = an_diff_doc(&c, doc, 8191, &o); break;
    case 3: rc = an_model_doc(&c, doc, 8192); break;
    case 4: rc = an_profile_doc(&c, doc, 65536, NULL, NULL); break;
    case 5: {
        uint64_t v = 7;
        const json_t *j = json_is_object(doc) ? json_object_get(doc, "seed") : doc;
        if (gem_receipt_parse_u64(j, &v) == 0) {
            /* A parsed seed prints back to the very string it came from. */
            json_t *back = gem_receipt_u64(v);
            CHECK(back && json_equal(back, j));
            json_decref(back);
        } else {
            CHECK(v == 7);
        }
        break;
    }
    default: {
        json_t *r = json_loads(kind == 6 ? merge_receipt : resources_receipt, 0, &err);
        CHECK(r != NULL);
        const json_t *given = json_object_get(json_object_get(doc, "receipt"), "path");
        const char *path = json_is_string(given) ? json_string_value(given) : "merge-check.json";
        json_t *want = kind == 6 ? an_merge_analysis_build(r, path, receipt_sha, NULL)
                                 : an_resources_analysis_build(r, path, receipt_sha, NULL);
        CHECK(want != NULL);
        rc = an_analysis_matches(&c, doc, want);
        /* A pass means the document is the analysis, provenance aside. */
        if (rc == 0) {
            json_t *g = json_deep_copy(doc);
            json_object_set(g, "tool", json_object_get(want, "tool"));
            CHECK(json_equal(g, want));
            json_decref(g);
        }
        json_decref(want);
        json_decref(r);
        break;
    }
    }
    /* A failure leaves exactly one non-empty line, nothing a terminal acts on. */
    if (rc != 0)
        CHECK(c.failed && c.msg[0] && printable(c.msg));
    if (rc == 0)
        CHECK(!c.failed);
    json_decref(doc);
}

static void parser_target(const uint8_t *data, size_t size)
{
    char s[128];
    size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
    memcpy(s, data, n);
    s[n] = '\0';
    int64_t i = 0;
    if (cli_parse_i64(s, INT64_MIN, INT64_MAX, &i) == 0) {
        /* Decimal only: no space, no '+', no "0x", no leading zero. */
        CHECK(s[0] == '-' || (s[0] >= '0' && s[0] <= '9'));
        CHECK(!strchr(s, ' ') && !strchr(s, 'x') && !strchr(s, '+'));
        char back[32];
        snprintf(back, sizeof back, "%lld", (long long)i);
        CHECK(!strcmp(back, s) || strchr(s, 'K') || strchr(s, 'k') || strchr(s, 'M') ||
              strchr(s, 'm') || !strcmp(s, "-0"));
    }
    uint64_t u = 0;
    if (cli_parse_u64(s, &u) == 0) {
        char back[32];
        snprintf(back, sizeof back, "%llu", (unsigned long long)u);
        CHECK(!strcmp(back, s)); /* exactly the canonical decimal form */
    }
    double d = 0;
    if (cli_parse_f64(s, &d) == 0)
        CHECK(isfinite(d) && (d == 0.0 || fabs(d) >= DBL_MIN) && !strchr(s, 'x') &&
              !strchr(s, 'n') && !strchr(s, 'N') && !strchr(s, ' '));
    float f = 0;
    if (cli_parse_f32(s, FLT_MIN, FLT_MAX, &f) == 0)
        CHECK(isfinite(f) && f >= FLT_MIN && f <= FLT_MAX);
    int64_t list[8];
    size_t ln = 0;
    if (cli_parse_i64_list(s, 1, (int64_t)1 << 24, list, 8, &ln) == 0) {
        CHECK(ln >= 1 && ln <= 8);
        for (size_t k = 0; k < ln; k++)
            CHECK(list[k] >= 1 && list[k] <= ((int64_t)1 << 24));
    }
    if (cli_commit_ok(s))
        CHECK(printable(s) && strlen(s) <= 46);
}

static void escape_target(const uint8_t *data, size_t size)
{
    char in[512], out[256], again[256];
    size_t n = size < sizeof in - 1 ? size : sizeof in - 1;
    memcpy(in, data, n);
    in[n] = '\0';
    size_t len = cli_escape(in, out, sizeof out);
    CHECK(len == strlen(out) && len < sizeof out && printable(out));
    /* Escaping is idempotent: what it writes needs no more escaping. */
    if (len + 4 < sizeof out && !strstr(out, "..."))
        CHECK(cli_escape(out, again, sizeof again) == len && !strcmp(again, out));
    char tiny[5];
    CHECK(cli_escape(in, tiny, sizeof tiny) < sizeof tiny);
}

static void online_target(const uint8_t *data, size_t size)
{
    enum { D = 4 };
    float v[2 + D + 2 + D];
    if (size < sizeof v)
        return;
    memcpy(v, data, sizeof v);
    const float ma = v[0], sa = v[1], mb = v[2 + D], sb = v[3 + D];
    const float *oa = v + 2, *ob = v + 4 + D;
    float m = 11.0f, s = 12.0f, o[D] = {13, 13, 13, 13};
    gem_status st = gem_online_merge(D, ma, sa, oa, mb, sb, ob, &m, &s, o);
    if (st == GEM_OK) {
        /* GEM_OK always comes with a valid state. */
        CHECK(gem_online_state_check(D, m, s, o) == GEM_OK);
        float fin[D] = {14, 14, 14, 14};
        gem_status fs = gem_online_finalize(D, m, s, o, fin);
        if (fs == GEM_OK) {
            for (int i = 0; i < D; i++)
                CHECK(isfinite(fin[i]));
        } else {
            for (int i = 0; i < D; i++)
                CHECK(fin[i] == 14.0f);
        }
    } else {
        CHECK(m == 11.0f && s == 12.0f);
        for (int i = 0; i < D; i++)
            CHECK(o[i] == 13.0f);
    }
    /* In place, aliasing oa: the same answer, and oa untouched on error. */
    float in[D];
    memcpy(in, oa, sizeof in);
    float m2 = 0, s2 = 0;
    gem_status st2 = gem_online_merge(D, ma, sa, in, mb, sb, ob, &m2, &s2, in);
    CHECK(st2 == st);
    if (st2 != GEM_OK)
        CHECK(!memcmp(in, oa, sizeof in));
    else
        CHECK(!memcmp(in, o, sizeof in) && m2 == m && s2 == s);
}

static void gate_target(const uint8_t *data, size_t size)
{
    double x[7];
    if (size < sizeof x)
        return;
    memcpy(x, data, sizeof x);
    gem_compare c = {16384, 0, x[0], x[1], x[2], x[3], x[4]};
    gem_gate g = {9, 9, 9, 9, 9};
    gem_status st = gem_gate_compare(&c, x[5], x[6], &g);
    if (st != GEM_OK) {
        CHECK(g.pass == 9);
        return;
    }
    if (g.pass) {
        CHECK(g.finite && g.nmse_ok && g.shape_ok && c.nmse <= x[6] && isfinite(c.correlation));
        if (!g.near_constant)
            CHECK(c.correlation >= x[5]);
    }
}

/* One gem.model_profile.v1 record through the promotion checks: a failure leaves
 * one line and nothing allocated; a pass gives figures that agree with one another. */
static void promotion_target(const uint8_t *data, size_t size)
{
    json_error_t err;
    json_t *doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &err);
    if (!doc)
        return;
    an_ctx c;
    memset(&c, 0, sizeof c);
    c.file = "fuzz";
    an_promotion_fig f;
    if (an_promotion_record_doc(&c, doc, &f) != 0) {
        CHECK(c.failed && c.msg[0] && printable(c.msg) && f.owned == NULL);
        json_decref(doc);
        return;
    }
    CHECK(!c.failed && f.reps >= 3 && f.per_rep >= 1 && f.context >= 1);
    /* every time lies in [1e-6, 1e9] ms, so does every median; a gain is below 1 */
    for (int r = 0; r < 2; r++) {
        CHECK(f.median_ms[r] >= 1e-6 && f.median_ms[r] <= 1e9);
        CHECK(isfinite(f.spread[r]) && f.spread[r] >= 0.0);
        for (int64_t k = 0; k < f.reps; k++)
            CHECK(f.rep_median_ms[r][k] >= 1e-6 && f.rep_median_ms[r][k] <= 1e9);
    }
    double lo = f.rep_gain[0], hi = f.rep_gain[0];
    for (int64_t k = 0; k < f.reps; k++) {
        CHECK(isfinite(f.rep_gain[k]) && f.rep_gain[k] < 1.0);
        lo = f.rep_gain[k] < lo ? f.rep_gain[k] : lo;
        hi = f.rep_gain[k] > hi ? f.rep_gain[k] : hi;
    }
    CHECK(isfinite(f.gain) && f.gain < 1.0);
    CHECK(f.min_rep_gain == lo && f.gain_range == hi - lo);
    an_promotion_fig_free(&f);
    CHECK(f.owned == NULL);
    json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const unsigned kind = data[0] % 16u;
    data++;
    size--;
    if (kind <= 7)
        json_target(kind, data, size);
    else if (kind == 8)
        parser_target(data, size);
    else if (kind == 9)
        escape_target(data, size);
    else if (kind == 10)
        online_target(data, size);
    else if (kind == 11)
        gate_target(data, size);
    else
        promotion_target(data, size);
    return 0;
}
