/*
 * `gem analyze resources`: the fail-closed consumer of a CUDA compiled-
 * resource receipt (gem.resources.v1, written by `gem resources`). It binds
 * the D512 / P32 / tile4 / F32 / no-window geometry, the 2,105,344-byte
 * scratch contract, compute capability 9.0, the fused first pass (warp 32,
 * >= 256 launchable threads, exactly 256 dispatched in 8 warps, exactly
 * 16,384 dynamic shared bytes) and reducer (warp 32, >= 256 launchable,
 * exactly 256 dispatched, no dynamic shared memory), static + dynamic shared
 * <= 32 KiB, zero local (spill) bytes, at least one resident block, and the
 * source and binary digests of the files named. Passing means only
 * "compilable and launchable".
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "analyze.h"
#include "cli.h"
#include "gem/attn.h"
#include "gem/check.h"
#include "gem/receipt.h"

#define NKEYS(a) (sizeof(a) / sizeof((a)[0]))
#define RES_SHARED_BUDGET 32768
#define RES_THREADS 256
#define RES_TILE4_DYNAMIC 16384

static const char *const top_keys[] = {"schema",  "tool",    "device", "geometry", "scratch",
                                       "kernels", "sources", "binary", "gates",    "verdict"};
static const char *const dev_keys[] = {"name",
                                       "compute_capability",
                                       "major",
                                       "minor",
                                       "sm_count",
                                       "warp_size",
                                       "shared_mem_per_block",
                                       "shared_mem_per_block_optin",
                                       "shared_mem_per_sm",
                                       "regs_per_sm"};
static const char *const geo_keys[] = {"n_q_heads",  "n_kv_heads", "dk",    "dv",
                                       "partitions", "tile",       "dtype", "window"};
static const char *const scratch_keys[] = {"maxima_bytes", "denominators_bytes",
                                           "numerators_bytes", "total_bytes"};
static const char *const kern_keys[] = {"name",
                                        "role",
                                        "max_threads_per_block",
                                        "static_shared_bytes",
                                        "dynamic_shared_bytes",
                                        "registers",
                                        "local_bytes",
                                        "threads_dispatched",
                                        "warps_dispatched",
                                        "warp_size",
                                        "max_active_blocks_per_sm"};
static const char *const roles[] = {"fused_first_pass",   "fused_reducer",  "baseline_score",
                                    "baseline_normalize", "baseline_value", "baseline_reduce"};
static const char *const file_keys[] = {"path", "sha256"};

/* A path inside the root: relative, no "..", no empty component. */
static int safe_relpath(const char *p)
{
    if (!p[0] || p[0] == '/')
        return 0;
    for (const char *s = p; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        s += n + (e ? 1 : 0);
        if (e && !*s)
            return 0;
    }
    return 1;
}

static int check_file(an_ctx *c, const json_t *o, const char *path, const an_opts *opt,
                      const char *prefix, const char *suffix)
{
    const char *p = NULL, *sha = NULL;
    if (an_keys(c, o, path, file_keys, 2) || an_str(c, o, path, "path", &p) ||
        an_sha(c, o, path, "sha256", &sha))
        return -1;
    if (!safe_relpath(p))
        return an_fail(c, path, AN_VALUE, "path '%.200s' must be relative to the root, without ..",
                       p);
    size_t lp = strlen(p), lx = suffix ? strlen(suffix) : 0;
    if ((prefix && strncmp(p, prefix, strlen(prefix)) != 0) ||
        (suffix && (lp < lx || strcmp(p + lp - lx, suffix) != 0)))
        return an_fail(c, path, AN_SWAPPED, "'%.200s' is not a %s*%s file", p, prefix ? prefix : "",
                       suffix ? suffix : "");
    if (!opt || !opt->recompute_digests)
        return 0;
    char full[PATH_MAX];
    if (snprintf(full, sizeof full, "%s/%s", opt->root ? opt->root : ".", p) >= (int)sizeof full)
        return an_fail(c, path, AN_VALUE, "path too long");
    char hex[65];
    if (gem_sha256_file_hex(full, hex) != GEM_OK)
        return an_fail(c, path, AN_DIGEST, "cannot read '%.300s' to check its digest", full);
    if (strcmp(hex, sha) != 0)
        return an_fail(c, path, AN_DIGEST, "'%.200s' has sha256 %.12s..., the receipt says %.12s...",
                       p, hex, sha);
    return 0;
}

static int check_kernel(an_ctx *c, const json_t *k, const char *path, int64_t optin, int *role_out)
{
    const char *name = NULL, *role = NULL;
    int64_t v[9] = {0};
    if (an_keys(c, k, path, kern_keys, NKEYS(kern_keys)) || an_str(c, k, path, "name", &name) ||
        an_str(c, k, path, "role", &role))
        return -1;
    if (!name[0])
        return an_fail(c, path, AN_VALUE, "empty kernel name");
    int r = -1;
    for (int i = 0; i < (int)NKEYS(roles); i++)
        if (!strcmp(role, roles[i]))
            r = i;
    if (r < 0)
        return an_fail(c, path, AN_VALUE, "role '%.60s' is not a known kernel role", role);
    *role_out = r;
    for (size_t i = 2; i < NKEYS(kern_keys); i++) {
        if (an_int(c, k, path, kern_keys[i], &v[i - 2]))
            return -1;
        if (v[i - 2] < 0)
            return an_fail(c, path, AN_VALUE, "%s is negative", kern_keys[i]);
    }
    const int64_t max_threads = v[0], stat = v[1], dyn = v[2], local = v[4], threads = v[5],
                  warps = v[6], warp = v[7], active = v[8];
    if (warp != 32)
        return an_fail(c, path, AN_GEOMETRY, "%s: warp_size %" PRId64 ", expected 32", name, warp);
    if (threads < 1 || threads > max_threads)
        return an_fail(c, path, AN_THRESHOLD,
                       "%s: %" PRId64 " threads dispatched but %" PRId64 " launchable", name,
                       threads, max_threads);
    if (warps * 32 != threads)
        return an_fail(c, path, AN_VALUE, "%s: %" PRId64 " warps for %" PRId64 " threads", name,
                       warps, threads);
    if (stat + dyn > optin)
        return an_fail(c, path, AN_THRESHOLD,
                       "%s: %" PRId64 " shared bytes exceed the device opt-in %" PRId64, name,
                       stat + dyn, optin);
    if (active < 1)
        return an_fail(c, path, AN_THRESHOLD, "%s: no block can be resident on an SM", name);
    if (r > 1)
        return 0; /* baseline kernels: sanity only */
    /* The fused pipelines' fixed contract. */
    if (max_threads < RES_THREADS)
        return an_fail(c, path, AN_THRESHOLD, "%s: %" PRId64 " launchable threads < 256", name,
                       max_threads);
    if (threads != RES_THREADS || warps != RES_THREADS / 32)
        return an_fail(c, path, AN_GEOMETRY,
                       "%s: %" PRId64 " threads / %" PRId64 " warps dispatched, the design fixes "
                       "256 / 8",
                       name, threads, warps);
    const int64_t want_dyn = r == 0 ? RES_TILE4_DYNAMIC : 0;
    if (dyn != want_dyn)
        return an_fail(c, path, AN_GEOMETRY,
                       "%s: %" PRId64 " dynamic shared bytes, the design fixes %" PRId64, name, dyn,
                       want_dyn);
    if (stat + dyn > RES_SHARED_BUDGET)
        return an_fail(c, path, AN_THRESHOLD,
                       "%s: static + dynamic shared %" PRId64 " > 32768 bytes", name, stat + dyn);
    if (local != 0)
        return an_fail(c, path, AN_THRESHOLD, "%s: %" PRId64 " local (spill) bytes, must be 0",
                       name, local);
    return 0;
}

int an_resources_doc(an_ctx *c, const json_t *doc, const an_opts *o)
{
    if (!json_is_object(doc))
        return an_fail(c, "", AN_TYPE, "the document is not a JSON object");
    if (an_schema(c, doc, "gem.resources.v1") || an_keys(c, doc, "", top_keys, NKEYS(top_keys)) ||
        an_tool(c, doc, "gem resources"))
        return -1;

    const json_t *d = NULL;
    const char *s = NULL;
    int64_t optin = 0, x = 0;
    if (an_obj(c, doc, "", "device", &d) || an_keys(c, d, "device", dev_keys, NKEYS(dev_keys)) ||
        an_str(c, d, "device", "name", &s) ||
        an_str_eq(c, d, "device", "compute_capability", "9.0", AN_GEOMETRY) ||
        an_int_eq(c, d, "device", "major", 9, NULL) || an_int_eq(c, d, "device", "minor", 0, NULL) ||
        an_int_eq(c, d, "device", "warp_size", 32, NULL) ||
        an_int(c, d, "device", "shared_mem_per_block_optin", &optin))
        return -1;
    static const char *const positive[] = {"sm_count", "shared_mem_per_block", "shared_mem_per_sm",
                                           "regs_per_sm"};
    for (size_t i = 0; i < NKEYS(positive); i++) {
        if (an_int(c, d, "device", positive[i], &x))
            return -1;
        if (x < 1)
            return an_fail(c, "device", AN_VALUE, "%s must be positive", positive[i]);
    }
    if (optin < RES_SHARED_BUDGET)
        return an_fail(c, "device", AN_VALUE, "shared_mem_per_block_optin %" PRId64 " < 32768",
                       optin);

    const json_t *g = NULL;
    if (an_obj(c, doc, "", "geometry", &g) || an_keys(c, g, "geometry", geo_keys, NKEYS(geo_keys)) ||
        an_int_eq(c, g, "geometry", "n_q_heads", 32, NULL) ||
        an_int_eq(c, g, "geometry", "n_kv_heads", 4, NULL) ||
        an_int_eq(c, g, "geometry", "dk", 512, NULL) || an_int_eq(c, g, "geometry", "dv", 512, NULL) ||
        an_int_eq(c, g, "geometry", "partitions", 32, NULL) ||
        an_int_eq(c, g, "geometry", "tile", 4, NULL) ||
        an_str_eq(c, g, "geometry", "dtype", "f32", NULL) ||
        an_int_eq(c, g, "geometry", "window", 0, NULL))
        return -1;

    gem_online_scratch want;
    if (gem_attention_online_scratch_bytes(32, 32, 512, &want) != GEM_OK)
        return an_fail(c, "scratch", "internal", "the scratch contract cannot be computed");
    const json_t *sc = NULL;
    if (an_obj(c, doc, "", "scratch", &sc) ||
        an_keys(c, sc, "scratch", scratch_keys, NKEYS(scratch_keys)) ||
        an_int_eq(c, sc, "scratch", "maxima_bytes", (int64_t)want.maxima_bytes, NULL) ||
        an_int_eq(c, sc, "scratch", "denominators_bytes", (int64_t)want.denominators_bytes, NULL) ||
        an_int_eq(c, sc, "scratch", "numerators_bytes", (int64_t)want.numerators_bytes, NULL) ||
        an_int_eq(c, sc, "scratch", "total_bytes", (int64_t)want.total_bytes, NULL))
        return -1;

    const json_t *ks = NULL;
    if (an_arr(c, doc, "", "kernels", &ks))
        return -1;
    int seen[NKEYS(roles)] = {0};
    for (size_t i = 0; i < json_array_size(ks); i++) {
        char p[48];
        snprintf(p, sizeof p, "kernels[%zu]", i);
        int r = -1;
        if (check_kernel(c, json_array_get(ks, i), p, optin, &r))
            return -1;
        if (seen[r]++)
            return an_fail(c, p, AN_SWAPPED, "a second '%s' kernel", roles[r]);
    }
    if (!seen[0] || !seen[1])
        return an_fail(c, "kernels", AN_MISSING, "the %s kernel is not in the receipt",
                       !seen[0] ? "fused_first_pass" : "fused_reducer");

    const json_t *srcs = NULL, *bin = NULL;
    if (an_arr(c, doc, "", "sources", &srcs))
        return -1;
    if (json_array_size(srcs) == 0)
        return an_fail(c, "sources", AN_MISSING, "no source file is bound");
    /* Structure of every file entry first, digests after the verdict. */
    an_opts nodig = {.recompute_digests = 0, .root = NULL};
    for (size_t i = 0; i < json_array_size(srcs); i++) {
        char p[48];
        snprintf(p, sizeof p, "sources[%zu]", i);
        if (check_file(c, json_array_get(srcs, i), p, &nodig, "src/cuda/", ".cu"))
            return -1;
    }
    if (an_obj(c, doc, "", "binary", &bin) || check_file(c, bin, "binary", &nodig, NULL, NULL))
        return -1;

    const json_t *gates = NULL;
    if (an_obj(c, doc, "", "gates", &gates))
        return -1;
    if (json_object_size(gates) == 0)
        return an_fail(c, "gates", AN_MISSING, "no gate recorded");
    int all = 1;
    const char *gk;
    const json_t *gv;
    const char *first_false = NULL;
    json_object_foreach((json_t *)gates, gk, gv) {
        if (!json_is_boolean(gv))
            return an_fail(c, "gates", AN_TYPE, "%.60s is not a boolean", gk);
        if (!json_is_true(gv) && !first_false)
            first_false = gk;
        all &= json_is_true(gv);
    }
    if (an_str(c, doc, "", "verdict", &s))
        return -1;
    if (strcmp(s, "pass") && strcmp(s, "fail"))
        return an_fail(c, "verdict", AN_VALUE, "'%.40s' is neither 'pass' nor 'fail'", s);
    if ((strcmp(s, "pass") == 0) != all)
        return an_fail(c, "verdict", AN_VERDICT, "'%s' but gates.%s is %s", s,
                       first_false ? first_false : "(all)", first_false ? "false" : "true");
    if (!all)
        return an_fail(c, "gates", AN_THRESHOLD, "the producer's gate '%.60s' failed", first_false);
    /* The analyzer's own checks above passed, so a producer verdict 'fail'
     * would already have been reported. Now the files. */
    if (o && o->recompute_digests) {
        for (size_t i = 0; i < json_array_size(srcs); i++) {
            char p[48];
            snprintf(p, sizeof p, "sources[%zu]", i);
            if (check_file(c, json_array_get(srcs, i), p, o, "src/cuda/", ".cu"))
                return -1;
        }
        if (check_file(c, bin, "binary", o, NULL, NULL))
            return -1;
    }
    return 0;
}

int an_resources(an_ctx *c, const char *path, const an_opts *o, json_t **analysis)
{
    json_t *doc = NULL;
    c->file = path;
    if (an_load(c, path, &doc))
        return 1;
    int rc = an_resources_doc(c, doc, o) ? 1 : 0;
    if (rc == 0 && analysis) {
        char sha[65];
        if (an_digest(c, path, sha)) {
            rc = 1;
        } else {
            json_t *a = gem_receipt_new("gem.analysis.resources.v1", "gem analyze resources",
                                        cli_git_commit());
            const json_t *d = json_object_get(doc, "device");
            json_t *ks = json_array();
            size_t i;
            const json_t *k;
            json_array_foreach(json_object_get(doc, "kernels"), i, k)
                json_array_append_new(ks, json_pack("{s:O, s:O}", "name", json_object_get(k, "name"),
                                                    "role", json_object_get(k, "role")));
            json_object_set_new(a, "receipt", json_pack("{s:s, s:s}", "path", path, "sha256", sha));
            json_object_set_new(a, "device",
                                json_pack("{s:O, s:O}", "name", json_object_get(d, "name"),
                                          "compute_capability",
                                          json_object_get(d, "compute_capability")));
            json_object_set_new(a, "kernels", ks);
            json_object_set_new(a, "verdict", json_string("pass"));
            json_object_set_new(a, "statement",
                                json_string("compilable and launchable; not an occupancy trace, "
                                            "not correctness, not timing"));
            *analysis = a;
        }
    }
    json_decref(doc);
    return rc;
}
