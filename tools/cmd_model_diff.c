/*
 * gem model-diff: the design's model differential. The whole Gemma 4 model runs
 * twice on the same prompts, once with the full-attention layers on the
 * baseline route (production) and once on the fused route (candidate); every
 * other computation is the same code. --compare k-from-v runs instead the
 * fused route with explicit K and V caches (the record's baseline side) against
 * the fused route on V-only caches of the K = V layers with K rebuilt from V
 * (candidate); its records carry "comparison": "k-from-v", which the
 * correctness gate refuses as a different comparison. --compare backends runs
 * the CPU decoder (baseline side) against the CUDA decoder (candidate), both on
 * the fused route with explicit caches; its records carry "comparison":
 * "backends" and the largest difference of the last-position logits, and pass
 * only within --logits-tol (default 1e-4) with equal argmax, top-10 and greedy
 * tokens. --backend cuda runs the route comparison on the GPU.
 *
 * --fill N evaluates only the first N prompt tokens of the shared prefix and
 * fills the full layers' caches up to the prefix's end by repeating those rows
 * (gem_session_fill_repeat; the sliding layers keep the rings of the evaluated
 * tokens): a fast synthetic prefill for the 60-layer model at 8K tokens. Both
 * sides see the same synthetic cache, the tokens past the prefix are evaluated
 * for real, and the prompt id says so ("...-fillN"). For each context C the
 * prompt is the first C tokens of one seeded token stream (BOS, then ids drawn
 * from the vocabulary's normal tokens), so when the first greedy token is chosen
 * the full layers' caches hold C rows. Per context it records (gem.model_diff.v1,
 * docs/receipts-records.md): argmax, ordered top-10 and the logits digest at the
 * last prompt position for both routes, a second candidate evaluation's digest
 * (repeat determinism), and `steps` greedy continuation tokens of each route.
 *
 * The prompts share their first min(C) - 1 tokens; that prefix is evaluated
 * once per route (each route on its own session) and each context continues
 * from a copy of it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "cli.h"
#include "cli_model.h"
#include "gem/check.h"
#include "gem/receipt.h"

#define CMD "model-diff"
#define MAX_CONTEXTS 16

static void help(void)
{
    printf("usage: gem model-diff --model M.gguf [options]\n\n"
           "Runs the model with the full-attention layers on the baseline route and on the\n"
           "fused route over the same prompts and writes one gem.model_diff.v1 record per\n"
           "context (the prompt's length in tokens: the full layers' cache rows when the first\n"
           "greedy token is chosen). Verdict pass: same argmax, same ordered top-10,\n"
           "repeat-identical candidate logits and all greedy tokens equal (at least 8).\n\n"
           "options:\n"
           "  --compare WHAT     routes: baseline vs fused route (default); k-from-v: the\n"
           "                     fused route with explicit K and V caches vs V-only caches\n"
           "                     with K rebuilt from V in the K = V layers (records named\n"
           "                     ...-k-from-v.json, with \"comparison\": \"k-from-v\"; not\n"
           "                     records for gem analyze correctness); backends: the CPU\n"
           "                     decoder vs the CUDA decoder, both fused with explicit caches\n"
           "                     (records ...-backends.json, \"comparison\": \"backends\";\n"
           "                     pass within --logits-tol)\n"
           "  --backend B        cpu (default) or cuda: where the route comparison runs\n"
           "  --random-weights S with --backend cuda: seeded random weights generated on the\n"
           "                     GPU in each matrix's type (files from gem synth --no-matrices)\n"
           "  --fill N           evaluate N prefix tokens and repeat their full-layer rows up\n"
           "                     to the prefix's end (a fast synthetic prefill; default 0 =\n"
           "                     evaluate the whole prefix)\n"
           "  --logits-tol T     backends: largest |logit difference| that passes (1e-4)\n"
           "  --contexts C,C,..  prompt lengths (default 8191,8192,8193)\n"
           "  --steps N          greedy continuation tokens per route (default 8)\n"
           "  --seed S           prompt stream seed (default 1)\n"
           "  --threads N        threads, 0 = one per core (default 0)\n"
           "  --out DIR          where records go (default gem-model-diff; created)\n"
           "  -h, --help         this text\n\n"
           "exit status: 0 every context passes, 1 a verdict is fail, 2 bad usage or input\n");
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* BOS, then ids from the normal tokens, element i from (seed, i) alone. */
static int make_prompt(const gem_tokenizer *tok, uint64_t seed, int64_t n, int32_t *ids)
{
    const int64_t V = gem_tokenizer_n_vocab(tok);
    int32_t *normal = malloc((size_t)V * sizeof *normal);
    if (!normal)
        return -1;
    int64_t nn = 0;
    for (int32_t i = 0; i < V; i++) {
        char buf[8];
        size_t len = 0;
        gem_gguf_str t = gem_token_text(tok, i);
        /* normal tokens: those whose piece is their text with spaces */
        gem_token_piece(tok, i, buf, sizeof buf, &len);
        if (len > 0 && !(t.len == 6 && !memcmp(t.ptr, "<0x", 3)))
            normal[nn++] = i;
    }
    if (nn == 0) {
        free(normal);
        return -1;
    }
    int32_t bos = gem_tokenizer_bos(tok);
    for (int64_t i = 0; i < n; i++)
        ids[i] = (i == 0 && bos >= 0)
                     ? bos
                     : normal[splitmix64(seed * 0x100000001B3ull + (uint64_t)i) % (uint64_t)nn];
    free(normal);
    return 0;
}

typedef struct side {
    int32_t argmax, top[10];
    char sha[65], sha_repeat[65];
    int32_t *greedy; /* (steps) */
} side;

static void digest_logits(const float *logits, int64_t n, char hex[65])
{
    gem_sha256_hex(logits, (size_t)n * sizeof *logits, hex);
}

/* From a copy of `prefix`, evaluates ids[prefix_pos .. C) and `steps` greedy tokens.
 * repeat: also re-evaluate from the prefix and digest the logits again. */
static gem_status run_side(gem_session *work, const gem_session *prefix, const int32_t *ids,
                           int64_t C, int64_t steps, int repeat, float *logits, int64_t V,
                           side *out, float *keep)
{
    gem_status st = gem_session_copy(work, prefix);
    if (st != GEM_OK)
        return st;
    for (int64_t i = gem_session_pos(work); i < C; i++)
        if ((st = gem_session_eval(work, ids[i], i + 1 == C ? logits : NULL)) != GEM_OK)
            return st;
    cli_top10(logits, V, out->top);
    out->argmax = out->top[0];
    digest_logits(logits, V, out->sha);
    if (keep)
        memcpy(keep, logits, (size_t)V * sizeof *logits);
    for (int64_t k = 0; k < steps; k++) {
        int32_t top[10];
        cli_top10(logits, V, top);
        out->greedy[k] = top[0];
        if (k + 1 < steps && (st = gem_session_eval(work, top[0], logits)) != GEM_OK)
            return st;
    }
    if (repeat) {
        if ((st = gem_session_copy(work, prefix)) != GEM_OK)
            return st;
        for (int64_t i = gem_session_pos(work); i < C; i++)
            if ((st = gem_session_eval(work, ids[i], i + 1 == C ? logits : NULL)) != GEM_OK)
                return st;
        digest_logits(logits, V, out->sha_repeat);
    }
    return GEM_OK;
}

static json_t *ints(const int32_t *v, int64_t n)
{
    json_t *a = json_array();
    for (int64_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

int gem_cmd_model_diff(int argc, char **argv)
{
    const char *model_path = NULL, *out_dir = "gem-model-diff";
    int64_t contexts[MAX_CONTEXTS] = {8191, 8192, 8193};
    size_t n_ctx = 3;
    int64_t steps = 8, threads = 0;
    uint64_t seed = 1;
    int compare_k_from_v = 0; /* 0: baseline vs fused route; 1: explicit K vs K from V */
    int compare_backends = 0; /* 1: CPU vs CUDA decoder */
    gem_backend backend = GEM_BACKEND_CPU;
    uint64_t random_seed = 0;
    int64_t fill = 0;
    double logits_tol = 1e-4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        }
        if (i + 1 >= argc) {
            cli_error(CMD, "'%s' needs a value or is unknown (see --help)", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--model"))
            model_path = v;
        else if (!strcmp(a, "--out"))
            out_dir = v;
        else if (!strcmp(a, "--compare")) {
            compare_k_from_v = !strcmp(v, "k-from-v");
            compare_backends = !strcmp(v, "backends");
            if (strcmp(v, "routes") && !compare_k_from_v && !compare_backends) {
                cli_error(CMD, "--compare '%s' is not 'routes', 'k-from-v' or 'backends'", v);
                return 2;
            }
        } else if (!strcmp(a, "--backend")) {
            if (cli_parse_model_backend(CMD, v, &backend))
                return 2;
        } else if (!strcmp(a, "--random-weights")) {
            if (cli_parse_random_weights(CMD, v, &random_seed))
                return 2;
        } else if (!strcmp(a, "--fill")) {
            if (cli_parse_i64(v, 0, 1 << 24, &fill)) {
                cli_error(CMD, "--fill '%s' is not an integer in [0, 16777216]", v);
                return 2;
            }
        } else if (!strcmp(a, "--logits-tol")) {
            if (cli_parse_f64(v, &logits_tol) || !(logits_tol >= 0)) {
                cli_error(CMD, "--logits-tol '%s' is not a number >= 0", v);
                return 2;
            }
        } else if (!strcmp(a, "--contexts")) {
            if (cli_parse_i64_list(v, 2, 1 << 24, contexts, MAX_CONTEXTS, &n_ctx)) {
                cli_error(CMD, "--contexts '%s' is not a list of at most %d lengths >= 2", v,
                          MAX_CONTEXTS);
                return 2;
            }
        } else if (!strcmp(a, "--steps")) {
            if (cli_parse_i64(v, 1, 4096, &steps)) {
                cli_error(CMD, "--steps '%s' is not an integer in [1, 4096]", v);
                return 2;
            }
        } else if (!strcmp(a, "--threads")) {
            if (cli_parse_i64(v, 0, 4096, &threads)) {
                cli_error(CMD, "--threads '%s' is not an integer in [0, 4096]", v);
                return 2;
            }
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_u64(v, &seed)) {
                cli_error(CMD, "--seed '%s' is not an unsigned integer", v);
                return 2;
            }
        } else {
            cli_error(CMD, "unknown option '%s' (see --help)", a);
            return 2;
        }
    }
    if (!model_path) {
        cli_error(CMD, "--model is required (see --help)");
        return 2;
    }
    if (compare_backends && (backend != GEM_BACKEND_CPU || random_seed)) {
        cli_error(CMD, "--compare backends runs both backends on the file's weights: no "
                       "--backend or --random-weights");
        return 2;
    }
    if (random_seed && backend != GEM_BACKEND_CUDA) {
        cli_error(CMD, "--random-weights generates the weights on the GPU: it needs --backend "
                       "cuda");
        return 2;
    }
    if ((backend == GEM_BACKEND_CUDA || compare_backends) && threads != 0) {
        cli_error(CMD, "--threads is for the CPU decoder; leave it at 0 with the GPU");
        return 2;
    }
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        cli_error(CMD, "cannot create %s", out_dir);
        return 2;
    }
    int64_t cmin = contexts[0], cmax = contexts[0];
    for (size_t i = 1; i < n_ctx; i++) {
        cmin = contexts[i] < cmin ? contexts[i] : cmin;
        cmax = contexts[i] > cmax ? contexts[i] : cmax;
    }
    if (fill >= cmin - 1)
        fill = 0; /* the whole prefix is evaluated anyway */
    gem_model *m = NULL;
    if (cli_load_model(CMD, model_path, &m))
        return 2;
    if (cli_model_to_backend(CMD, m, compare_backends ? GEM_BACKEND_CUDA : backend,
                             random_seed)) {
        gem_model_free(m);
        return 2;
    }
    const gem_hparams *hp = gem_model_hparams(m);
    const int64_t V = hp->n_vocab, cap = cmax + steps;
    float *base_logits = NULL; /* backends: side 0's last-position logits */
    double max_diff = 0;
    int rc = 2;
    gem_session *pre[2] = {NULL, NULL}, *work[2] = {NULL, NULL};
    int32_t *ids = malloc((size_t)cmax * sizeof *ids);
    float *logits = malloc((size_t)V * sizeof *logits);
    side sides[2];
    memset(sides, 0, sizeof sides);
    sides[0].greedy = calloc((size_t)steps, sizeof(int32_t));
    sides[1].greedy = calloc((size_t)steps, sizeof(int32_t));
    char wsha[65], err[GEM_GGUF_ERR_LEN];
    if (compare_backends && !(base_logits = malloc((size_t)V * sizeof *base_logits))) {
        cli_error(CMD, "out of memory");
        goto out;
    }
    if (!ids || !logits || !sides[0].greedy || !sides[1].greedy) {
        cli_error(CMD, "out of memory");
        goto out;
    }
    if (cap > hp->context_length) {
        cli_error(CMD, "context %lld + %lld steps exceeds the model's %lld", (long long)cmax,
                  (long long)steps, (long long)hp->context_length);
        goto out;
    }
    if (make_prompt(gem_model_tokenizer(m), seed, cmax, ids)) {
        cli_error(CMD, "the vocabulary has no normal tokens to draw a prompt from");
        goto out;
    }
    cli_progress("%s: digesting the weights", CMD);
    if (cli_weights_sha256(model_path, random_seed, wsha)) {
        cli_error(CMD, "%s: cannot read", model_path);
        goto out;
    }
    /* The global (full-attention) layers and their geometry, from the model. */
    json_t *gl = json_array();
    const gem_layer *g0 = NULL;
    for (int64_t i = 0; i < hp->n_layers; i++) {
        const gem_layer *l = gem_model_layer(m, i);
        if (l->swa)
            continue;
        json_array_append_new(gl, json_integer(i));
        if (!g0)
            g0 = l;
        else if (l->n_head != g0->n_head || l->n_head_kv != g0->n_head_kv ||
                 l->head_dim != g0->head_dim) {
            cli_error(CMD, "the full-attention layers do not share one geometry");
            json_decref(gl);
            goto out;
        }
    }
    if (!g0) {
        cli_error(CMD, "the model has no full-attention layer");
        json_decref(gl);
        goto out;
    }
    /* Side 0 is the record's baseline, side 1 its candidate. */
    const int separate = compare_k_from_v || compare_backends; /* sides with their own work */
    const gem_route routes[2] = {separate ? GEM_ROUTE_FUSED : GEM_ROUTE_BASELINE,
                                 GEM_ROUTE_FUSED};
    const int k_from_v[2] = {0, compare_k_from_v};
    const gem_backend backends[2] = {compare_backends ? GEM_BACKEND_CPU : backend,
                                     compare_backends ? GEM_BACKEND_CUDA : backend};
    const char *const side_names[2] = {
        compare_k_from_v ? "explicit K" : compare_backends ? "CPU decoder" : "baseline route",
        compare_k_from_v ? "K from V" : compare_backends ? "CUDA decoder" : "fused route"};
    for (int r = 0; r < 2; r++) {
        gem_session_opts so = {backends[r] == GEM_BACKEND_CPU ? threads : 0,
                               cap,
                               routes[r],
                               0,
                               0,
                               GEM_DTYPE_F32,
                               k_from_v[r],
                               backends[r]};
        /* a session continues from a copy of its side's prefix: the sides share one work
           session when their caches hold the same tensors in the same memory */
        if (gem_session_create(m, &so, &pre[r], err, sizeof err) != GEM_OK ||
            ((r == 1 || separate) &&
             gem_session_create(m, &so, &work[r], err, sizeof err) != GEM_OK)) {
            cli_error(CMD, "%s", err);
            json_decref(gl);
            goto out;
        }
    }
    gem_session *const work_of[2] = {separate ? work[0] : work[1], work[1]};
    if (compare_k_from_v) {
        char line[2][256];
        cli_kv_memory_line(pre[0], line[0], sizeof line[0]);
        cli_kv_memory_line(pre[1], line[1], sizeof line[1]);
        printf("explicit K: %s; K from V: %s\n", line[0], line[1]);
    }
    rc = 1;
    /* The shared prefix, once per side. */
    for (int r = 0; r < 2; r++) {
        const int64_t evaluated = fill ? fill : cmin - 1;
        cli_progress("%s: %s: prefix of %lld tokens%s", CMD, side_names[r], (long long)(cmin - 1),
                     fill ? " (the evaluated ones repeated)" : "");
        if (cli_prefill(CMD, pre[r], ids, evaluated, logits, 512) != GEM_OK) {
            json_decref(gl);
            goto out;
        }
        gem_status fst = fill ? gem_session_fill_repeat(pre[r], cmin - 1) : GEM_OK;
        if (fst != GEM_OK) {
            cli_error(CMD, "%s: filling the caches to %lld rows: %s", side_names[r],
                      (long long)(cmin - 1), gem_status_str(fst));
            json_decref(gl);
            goto out;
        }
    }
    int all_pass = 1;
    for (size_t c = 0; c < n_ctx; c++) {
        const int64_t C = contexts[c];
        for (int r = 0; r < 2; r++) {
            gem_status st =
                run_side(work_of[r], pre[r], ids, C, steps, r == 1, logits, V, &sides[r],
                         r == 0 ? base_logits : NULL);
            if (st != GEM_OK) {
                cli_error(CMD, "context %lld, %s: %s", (long long)C, side_names[r],
                          gem_status_str(st));
                json_decref(gl);
                goto out;
            }
            if (r == 1 && compare_backends) {
                /* the candidate's repeat pass ended at the prompt's end: logits hold the
                   CUDA decoder's last-position logits */
                max_diff = 0;
                for (int64_t i = 0; i < V; i++) {
                    const double dlt = fabs((double)logits[i] - (double)base_logits[i]);
                    max_diff = dlt > max_diff || dlt != dlt ? dlt : max_diff;
                }
            }
        }
        int same = 1;
        for (int64_t k = 0; k < steps; k++)
            same &= sides[0].greedy[k] == sides[1].greedy[k];
        const int pass = sides[0].argmax == sides[1].argmax &&
                         !memcmp(sides[0].top, sides[1].top, sizeof sides[0].top) &&
                         !strcmp(sides[1].sha, sides[1].sha_repeat) && same && steps >= 8 &&
                         (!compare_backends || max_diff <= logits_tol);
        all_pass &= pass;
        const char *mname = hp->name[0] ? hp->name : "gemma4";
        char psha[65], pid[96], case_id[256], path[1024];
        gem_sha256_hex(ids, (size_t)C * sizeof *ids, psha);
        if (fill)
            snprintf(pid, sizeof pid, "synthetic-seed%llu-len%lld-fill%lld",
                     (unsigned long long)seed, (long long)C, (long long)fill);
        else
            snprintf(pid, sizeof pid, "synthetic-seed%llu-len%lld", (unsigned long long)seed,
                     (long long)C);
        /* The baseline-vs-fused id is the one the correctness gate rebuilds from the
         * record's own fields (docs/receipts-records.md): model-<model.name>-<prompt.id>-
         * ctx<prompt.context_tokens>. The K-from-V comparison is named apart. */
        if (compare_k_from_v)
            snprintf(case_id, sizeof case_id, "model-%s-ctx%lld-explicit-vs-k-from-v-seed%llu",
                     mname, (long long)C, (unsigned long long)seed);
        else if (compare_backends)
            snprintf(case_id, sizeof case_id, "model-%s-ctx%lld-cpu-vs-cuda-seed%llu", mname,
                     (long long)C, (unsigned long long)seed);
        else
            snprintf(case_id, sizeof case_id, "model-%s-%s-ctx%lld", mname, pid, (long long)C);
        json_t *doc = gem_receipt_new("gem.model_diff.v1", "gem model-diff", cli_git_commit());
        json_object_set_new(doc, "case_id", json_string(case_id));
        if (compare_k_from_v) /* baseline: explicit K and V; candidate: V alone, K rebuilt */
            json_object_set_new(doc, "comparison", json_string("k-from-v"));
        if (compare_backends) { /* baseline: the CPU decoder; candidate: the CUDA decoder */
            json_object_set_new(doc, "comparison", json_string("backends"));
            json_object_set_new(doc, "logits_max_abs_diff", gem_receipt_real(max_diff));
            json_object_set_new(doc, "logits_tolerance", gem_receipt_real(logits_tol));
        }
        json_object_set_new(doc, "model",
                            json_pack("{s:s, s:I, s:O, s:{s:I, s:I, s:I, s:I, s:s, s:i}, s:s}",
                                      "name", mname, "n_layers",
                                      (json_int_t)hp->n_layers, "global_layers", gl,
                                      "global_geometry", "n_q_heads", (json_int_t)g0->n_head,
                                      "n_kv_heads", (json_int_t)g0->n_head_kv, "dk",
                                      (json_int_t)g0->head_dim, "dv", (json_int_t)g0->head_dim,
                                      "dtype", "f32", "window", 0, "weights_sha256", wsha));
        json_object_set_new(doc, "prompt",
                            json_pack("{s:s, s:s, s:I}", "id", pid, "sha256", psha,
                                      "context_tokens", (json_int_t)C));
        json_object_set_new(doc, "selection",
                            json_pack("{s:s, s:s, s:s, s:s}", "production_before", "baseline",
                                      "production_after", "baseline", "baseline_route",
                                      gem_route_name(routes[0]), "candidate_route",
                                      gem_route_name(routes[1])));
        json_object_set_new(doc, "baseline",
                            json_pack("{s:i, s:o, s:s}", "argmax", sides[0].argmax, "top10",
                                      ints(sides[0].top, 10), "logits_sha256", sides[0].sha));
        json_object_set_new(doc, "candidate",
                            json_pack("{s:i, s:o, s:s, s:s}", "argmax", sides[1].argmax, "top10",
                                      ints(sides[1].top, 10), "logits_sha256", sides[1].sha,
                                      "logits_sha256_repeat", sides[1].sha_repeat));
        json_object_set_new(doc, "greedy",
                            json_pack("{s:I, s:o, s:o}", "steps", (json_int_t)steps,
                                      "baseline_tokens", ints(sides[0].greedy, steps),
                                      "candidate_tokens", ints(sides[1].greedy, steps)));
        json_object_set_new(doc, "verdict", json_string(pass ? "pass" : "fail"));
        snprintf(path, sizeof path, "%s/model-diff-%s-ctx%lld-seed%llu%s.json", out_dir, mname,
                 (long long)C, (unsigned long long)seed,
                 compare_k_from_v ? "-k-from-v" : compare_backends ? "-backends" : "");
        gem_status wst = gem_receipt_write(path, doc);
        json_decref(doc);
        if (wst != GEM_OK) {
            cli_error(CMD, "cannot write %s", path);
            json_decref(gl);
            rc = 2;
            goto out;
        }
        if (compare_backends)
            printf("context %lld: largest |logit difference| CPU vs CUDA %.3g (tolerance %.3g)\n",
                   (long long)C, max_diff, logits_tol);
        printf("context %lld: argmax %d / %d, top-10 %s, candidate repeat %s, greedy %lld tokens "
               "%s: %s (%s)\n",
               (long long)C, sides[0].argmax, sides[1].argmax,
               memcmp(sides[0].top, sides[1].top, sizeof sides[0].top) ? "differs" : "equal",
               strcmp(sides[1].sha, sides[1].sha_repeat) ? "differs" : "identical",
               (long long)steps, same ? "equal" : "differ", pass ? "pass" : "FAIL", path);
        fflush(stdout);
    }
    json_decref(gl);
    rc = all_pass ? 0 : 1;
out:
    free(ids);
    free(logits);
    free(base_logits);
    free(sides[0].greedy);
    free(sides[1].greedy);
    gem_session_free(pre[0]);
    gem_session_free(pre[1]);
    gem_session_free(work[0]);
    gem_session_free(work[1]);
    gem_model_free(m);
    return rc;
}
