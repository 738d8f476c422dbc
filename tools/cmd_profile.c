/*
 * gem profile: whole-token stage profile and decoding speed of the Gemma 4
 * decoder on the CPU, against the memory floor measured in the same run.
 *
 * The session first evaluates a real prompt (the seeded token stream of
 * gem model-diff); to reach a longer context without evaluating every position
 * it can then extend the full layers' caches by repeating the rows the model
 * computed (--fill repeat; timing only: the decode step's time does not depend
 * on the values). Then `reps` interleaved repetitions: in each, `samples`
 * samples with the full layers on the baseline route and `samples` on the fused
 * route, consecutive tokens (the context grows by one per step). A sample is two
 * steps: one timed whole and alone (gem_session_time_stages off: on CUDA two events
 * a token, as a decode loop runs it), which gives the record's whole-token time,
 * tokens/s and floor ratio; then one timed per stage: embedding, norms (with q/k/v
 * norms and RoPE), projections (q/k/v/o), sliding attention, full attention, MLP,
 * logits, and its own whole (staged_whole_token_ms: on CUDA the events around every
 * stage cost time of their own).
 *
 * The floor of a step is the bytes it must read (every weight the decoder reads
 * per token plus the K/V rows of every layer at that position) over the read
 * bandwidth measured in the same run (a multi-threaded streaming read); the
 * record gives tokens/s and the median step time as a multiple of the floor.
 *
 * --k-from-v: the full layers with K = V store V alone and the fused route rebuilds
 * K from it; the baseline route cannot read such a cache, so only the fused route
 * is timed, and the floor counts the V rows alone for those layers. --fused-only
 * times the fused route alone with K stored (for caches the baseline does not read).
 *
 * --stage-profile FILE: the ceiling screen's gem.stage_profile.v1
 * (docs/receipts-records.md) from the same baseline steps: the session's stage
 * clock (gem_session_time_baseline_stages) times the baseline route's own
 * stages inside every full-attention call (score, normalize, value, reduce);
 * each sample is the mean per call over the step's full-attention calls, next
 * to that step's whole-token time and its stages. The clock only reads the
 * time between the stages, so the steps compute the same bits with it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "analyze.h"
#include "cli.h"
#include "cli_model.h"
#include "gem/engine.h"
#include "gem/receipt.h"

#define CMD "profile"
#define N_STAGES 7
#define N_BASELINE_STAGES 4
/* Samples a stage profile may hold (the ceiling screen reads at most this many). */
#define STAGE_PROFILE_MAX_SAMPLES 100000

static const char *const stage_names[N_STAGES] = {
    "embedding", "norms", "projections", "sliding_attention", "full_attention", "mlp", "logits"};
#define FULL_ATTENTION 4 /* stage_names[FULL_ATTENTION] */
/* The baseline route's stages inside a full-attention call, in the profile's order. */
static const char *const baseline_stage_names[N_BASELINE_STAGES] = {"score", "normalize",
                                                                    "value", "reduce"};

static void help(void)
{
    printf("usage: gem profile --model M.gguf [options]\n\n"
           "Times whole decode steps and their stages (embedding, norms, projections, sliding\n"
           "attention, full attention, MLP, logits) with the full layers on the baseline and\n"
           "the fused route in interleaved repetitions, and compares tokens/s with the floor:\n"
           "(weight bytes + KV bytes read per token) / read bandwidth measured in the same run.\n"
           "Each sample is two steps: one timed whole alone (the record's whole_token_ms, the\n"
           "tokens/s and the floor ratio), then one timed per stage (stages_ms and its own\n"
           "staged_whole_token_ms; on CUDA the stage events cost time of their own).\n"
           "Prints the KV cache memory held (and saved with --k-from-v).\n\n"
           "options:\n"
           "  --context C,..  positions in the caches when timing starts (default 256); a\n"
           "                  list times each context in turn on one session (ascending, each\n"
           "                  at least the steps of the one before past it), one record per\n"
           "                  context: --out / --stage-profile F.json become F-ctxC.json\n"
           "  --prompt N      positions evaluated for real first (default min(C, 256)); with\n"
           "                  N < C the full layers' caches are filled up to C by repeating the\n"
           "                  rows the model computed (timing only)\n"
           "  --reps R        interleaved repetitions (default 3)\n"
           "  --samples S     decode steps per route and repetition (default 5)\n"
           "  --threads N     threads, 0 = one per core (default 0)\n"
           "  --backend B     cpu (default) or cuda: the decoder on the GPU, stages timed by\n"
           "                  CUDA events, the floor from the GPU's read bandwidth\n"
           "  --random-weights S\n"
           "                  with --backend cuda: seeded random weights generated on the\n"
           "                  GPU in each matrix's type (files from gem synth --no-matrices)\n"
           "  --kv-dtype T    element type of the K/V caches: f32, bf16 or f16 (default f32)\n"
           "  --k-from-v      full layers with K = V store V alone and the fused route\n"
           "                  rebuilds K from it; times the fused route only (the baseline\n"
           "                  reads a stored K)\n"
           "  --fused-only    times the fused route alone, with K stored\n"
           "  --bw-mib M      MiB read by the bandwidth probe (default 1024)\n"
           "  --greedy N      after the repetitions, greedy decoding as an application runs\n"
           "                  it: N tokens a call of gem_session_greedy (on CUDA a graph a\n"
           "                  token) against N calls of gem_session_eval_argmax, A B B A on the\n"
           "                  host's clock, on the last route timed (default 0: not timed)\n"
           "  --out FILE      write the gem.model_profile.v1 record\n"
           "  --stage-profile FILE\n"
           "                  also time the baseline route's stages (score, normalize, value,\n"
           "                  reduce) inside every full-attention call and write the ceiling\n"
           "                  screen's gem.stage_profile.v1 (not with --k-from-v or\n"
           "                  --fused-only)\n"
           "  -h, --help      this text\n");
}

#define MAX_CONTEXTS 8

/* The output path of context C: `base` itself for a single context, else base with
 * "-ctx<C>" before a final ".json" (or at its end). 0, or -1 when buf (cap) is short. */
static int ctx_path(const char *base, size_t n_ctx, int64_t C, char *buf, size_t cap)
{
    const size_t n = strlen(base);
    int w;
    if (n_ctx == 1)
        w = snprintf(buf, cap, "%s", base);
    else if (n > 5 && !strcmp(base + n - 5, ".json"))
        w = snprintf(buf, cap, "%.*s-ctx%lld.json", (int)(n - 5), base, (long long)C);
    else
        w = snprintf(buf, cap, "%s-ctx%lld", base, (long long)C);
    return w < 0 || (size_t)w >= cap ? -1 : 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int64_t n)
{
    double *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return NAN;
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    double m = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return m;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static json_t *reals(const double *v, int64_t n)
{
    json_t *a = json_array();
    for (int64_t i = 0; i < n; i++)
        json_array_append_new(a, gem_receipt_real(v[i]));
    return a;
}

/* The full-attention geometry the stage profile records, from the model's full layers:
 * 0 when every full layer has the same query heads, KV heads and head width (K and V
 * are head_dim wide), else -1 after one line. */
static int full_layer_geometry(const gem_model *m, int64_t *n_q, int64_t *n_kv, int64_t *dim)
{
    const gem_hparams *hp = gem_model_hparams(m);
    int seen = 0;
    for (int64_t i = 0; i < hp->n_layers; i++) {
        const gem_layer *l = gem_model_layer(m, i);
        if (l->swa)
            continue;
        if (!seen) {
            *n_q = l->n_head, *n_kv = l->n_head_kv, *dim = l->head_dim;
            seen = 1;
        } else if (l->n_head != *n_q || l->n_head_kv != *n_kv || l->head_dim != *dim) {
            cli_error(CMD, "--stage-profile: full layer %lld has another attention shape than "
                      "the first full layer", (long long)i);
            return -1;
        }
    }
    if (!seen) {
        cli_error(CMD, "--stage-profile: the model has no full-attention layer");
        return -1;
    }
    return 0;
}

/* Replaces every byte below 0x20 and DEL of the NUL-terminated text with '?', so that it
 * can go into a receipt's free-text field (the analyzers refuse control characters). */
static void printable(char *text)
{
    for (char *c = text; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7F)
            *c = '?';
}

/* The samples of a stage profile, (samples) per series, milliseconds. */
typedef struct stage_profile_series {
    double *stage[N_BASELINE_STAGES]; /* per full-attention call: score, normalize, ... */
    double *attention_total;          /* per sample: the sum of the four, in that order */
    double *whole_token;              /* per sample: the whole model step */
    double *whole_stage[N_STAGES];    /* per sample: its stages (stage_names), which add up
                                         to whole_token */
    int64_t samples;
} stage_profile_series;

/* The full-attention shape a stage profile records (full_layer_geometry). */
typedef struct full_geometry {
    int64_t n_q, n_kv, dim;
} full_geometry;

/* The gem.stage_profile.v1 document (docs/receipts-records.md) of series taken at
 * `context` with `reps` repetitions of `per_rep` samples on model m, whose full layers
 * have shape g, or NULL when out of memory or the samples cannot be digested. */
static json_t *stage_profile_doc(const stage_profile_series *sp, const gem_model *m,
                                 const full_geometry *g, int64_t context, int64_t reps,
                                 int64_t per_rep, gem_dtype kv_dtype, const char *provenance)
{
    const gem_hparams *hp = gem_model_hparams(m);
    const int64_t n_q = g->n_q, n_kv = g->n_kv, dim = g->dim;
    json_t *doc = gem_receipt_new("gem.stage_profile.v1", "gem profile", cli_git_commit());
    json_t *stages = json_object(), *whole_stages = json_object();
    if (!doc || !stages || !whole_stages) {
        json_decref(doc);
        json_decref(stages);
        json_decref(whole_stages);
        return NULL;
    }
    int bad = 0;
    for (int k = 0; k < N_BASELINE_STAGES; k++)
        bad |= json_object_set_new(stages, baseline_stage_names[k],
                                   reals(sp->stage[k], sp->samples));
    for (int k = 0; k < N_STAGES; k++)
        bad |= json_object_set_new(whole_stages, stage_names[k],
                                   reals(sp->whole_stage[k], sp->samples));
    bad |= json_object_set_new(doc, "selector", json_string("baseline"));
    bad |= json_object_set_new(
        doc, "geometry",
        json_pack("{s:I, s:I, s:I, s:I, s:s, s:I}", "n_q_heads", (json_int_t)n_q, "n_kv_heads",
                  (json_int_t)n_kv, "dk", (json_int_t)dim, "dv", (json_int_t)dim, "dtype",
                  gem_dtype_name(kv_dtype), "window", (json_int_t)0));
    bad |= json_object_set_new(doc, "model",
                               json_pack("{s:I, s:I}", "n_layers", (json_int_t)hp->n_layers,
                                         "global_attention_calls",
                                         (json_int_t)hp->n_full_layers));
    bad |= json_object_set_new(doc, "context", json_integer(context));
    bad |= json_object_set_new(doc, "repetitions", json_integer(reps));
    bad |= json_object_set_new(doc, "samples_per_repetition", json_integer(per_rep));
    bad |= json_object_set_new(doc, "stages_ms", stages);
    bad |= json_object_set_new(doc, "attention_total_ms",
                               reals(sp->attention_total, sp->samples));
    bad |= json_object_set_new(doc, "whole_token_ms", reals(sp->whole_token, sp->samples));
    bad |= json_object_set_new(doc, "whole_token_stages_ms", whole_stages);
    bad |= json_object_set_new(doc, "provenance", json_string(provenance));
    char hex[65];
    if (bad || an_stage_profile_samples_sha256(doc, hex) != 0 ||
        json_object_set_new(doc, "samples_sha256", json_string(hex))) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* The session's stage clocks on (1) or off (0): its stages, and with baseline_too the
 * baseline route's own stages. 0, or 1 after saying why. */
static int stage_clocks(gem_session *s, int on, int baseline_too)
{
    if (gem_session_time_stages(s, on) != GEM_OK ||
        (baseline_too && gem_session_time_baseline_stages(s, on) != GEM_OK)) {
        cli_error(CMD, "cannot switch the stage clocks");
        return 1;
    }
    return 0;
}

int gem_cmd_profile(int argc, char **argv)
{
    const char *model_path = NULL, *out = NULL, *stage_out = NULL;
    int64_t context = 256, prompt = -1, reps = 3, samples = 5, threads = 0, bw_mib = 1024;
    int64_t greedy = 0; /* tokens a greedy call (--greedy), 0: none */
    int64_t contexts[MAX_CONTEXTS] = {256};
    size_t n_ctx = 1;
    gem_dtype kv_dtype = GEM_DTYPE_F32;
    int k_from_v = 0, fused_only = 0;
    gem_backend backend = GEM_BACKEND_CPU;
    uint64_t random_seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        }
        if (!strcmp(a, "--k-from-v")) {
            k_from_v = 1;
            continue;
        }
        if (!strcmp(a, "--fused-only")) {
            fused_only = 1;
            continue;
        }
        if (i + 1 >= argc) {
            cli_error(CMD, "'%s' needs a value or is unknown (see --help)", a);
            return 2;
        }
        const char *v = argv[++i];
        int64_t *dst = NULL, lo = 0, hi = 0;
        if (!strcmp(a, "--model"))
            model_path = v;
        else if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--stage-profile"))
            stage_out = v;
        else if (!strcmp(a, "--context")) {
            if (cli_parse_i64_list(v, 1, 1 << 24, contexts, MAX_CONTEXTS, &n_ctx) || n_ctx < 1) {
                cli_error(CMD, "--context '%s' is not a list of at most %d positions in [1, "
                               "16777216]",
                          v, MAX_CONTEXTS);
                return 2;
            }
        }
        else if (!strcmp(a, "--prompt"))
            dst = &prompt, lo = 1, hi = 1 << 24;
        else if (!strcmp(a, "--reps"))
            dst = &reps, lo = 1, hi = 1000;
        else if (!strcmp(a, "--samples"))
            dst = &samples, lo = 1, hi = 100000;
        else if (!strcmp(a, "--threads"))
            dst = &threads, lo = 0, hi = 4096;
        else if (!strcmp(a, "--bw-mib"))
            dst = &bw_mib, lo = 16, hi = 1 << 20;
        else if (!strcmp(a, "--greedy"))
            dst = &greedy, lo = 0, hi = 4096;
        else if (!strcmp(a, "--backend")) {
            if (cli_parse_model_backend(CMD, v, &backend))
                return 2;
        } else if (!strcmp(a, "--random-weights")) {
            if (cli_parse_random_weights(CMD, v, &random_seed))
                return 2;
        } else if (!strcmp(a, "--kv-dtype")) {
            if (gem_dtype_parse(v, &kv_dtype) != GEM_OK || kv_dtype == GEM_DTYPE_FP8_E4M3) {
                cli_error(CMD, "--kv-dtype '%s' is not f32, bf16 or f16 (the model's caches)", v);
                return 2;
            }
        } else {
            cli_error(CMD, "unknown option '%s' (see --help)", a);
            return 2;
        }
        if (dst && cli_parse_i64(v, lo, hi, dst)) {
            cli_error(CMD, "%s '%s' is not an integer in [%lld, %lld]", a, v, (long long)lo,
                      (long long)hi);
            return 2;
        }
    }
    if (!model_path) {
        cli_error(CMD, "--model is required (see --help)");
        return 2;
    }
    if (backend == GEM_BACKEND_CUDA && threads != 0) {
        cli_error(CMD, "--threads is for the CPU; the CUDA backend takes --threads 0");
        return 2;
    }
    /* per context: two steps a sample (timed whole, then per stage), two routes, + 2 warm-up;
     * with --greedy four runs of its tokens */
    const int64_t steps = 4 * reps * samples + 2 + 4 * greedy;
    for (size_t i = 1; i < n_ctx; i++)
        if (contexts[i] < contexts[i - 1] + steps) {
            cli_error(CMD, "--context: %lld follows %lld; each context must be at least %lld "
                           "(the steps timed at the one before) past it",
                      (long long)contexts[i], (long long)contexts[i - 1], (long long)steps);
            return 2;
        }
    context = contexts[0];
    if (prompt < 0)
        prompt = context < 256 ? context : 256;
    if (prompt > context) {
        cli_error(CMD, "--prompt %lld exceeds --context %lld", (long long)prompt,
                  (long long)context);
        return 2;
    }
    if (stage_out && (k_from_v || fused_only)) {
        cli_error(CMD, "--stage-profile times the baseline route, which %s leaves out",
                  k_from_v ? "--k-from-v" : "--fused-only");
        return 2;
    }
    if (stage_out && reps * samples > STAGE_PROFILE_MAX_SAMPLES) {
        cli_error(CMD, "--stage-profile holds at most %d samples (--reps x --samples)",
                  STAGE_PROFILE_MAX_SAMPLES);
        return 2;
    }
    {
        /* the outputs, before minutes of work: never the model, never each other (the
         * same name, or the same existing file) */
        const char *inputs[2] = {model_path, stage_out};
        if (out && stage_out && !strcmp(out, stage_out)) {
            cli_error(CMD, "--out and --stage-profile name the same file '%s'", out);
            return 2;
        }
        for (size_t i = 0; i < n_ctx; i++) {
            char po[1024], ps[1024];
            if ((out && ctx_path(out, n_ctx, contexts[i], po, sizeof po)) ||
                (stage_out && ctx_path(stage_out, n_ctx, contexts[i], ps, sizeof ps))) {
                cli_error(CMD, "an output path is too long");
                return 2;
            }
            inputs[1] = stage_out ? ps : NULL;
            if ((out && cli_check_output(CMD, "--out", po, inputs, 2)) ||
                (stage_out && cli_check_output(CMD, "--stage-profile", ps, inputs, 1)))
                return 2;
        }
    }
    gem_model *m = NULL;
    if (cli_load_model(CMD, model_path, &m))
        return 2;
    if (cli_model_to_backend(CMD, m, backend, random_seed)) {
        gem_model_free(m);
        return 2;
    }
    const gem_hparams *hp = gem_model_hparams(m);
    full_geometry full = {0, 0, 0};
    if (stage_out && full_layer_geometry(m, &full.n_q, &full.n_kv, &full.dim)) {
        gem_model_free(m);
        return 2;
    }
    const int64_t cap = contexts[n_ctx - 1] + steps;
    int rc = 2;
    gem_session *s = NULL;
    gem_engine *e = NULL;
    json_t *per_route = NULL; /* the record's per-route figures */
    int32_t *ids = malloc((size_t)prompt * sizeof *ids);
    float *logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    int32_t *gout = malloc((size_t)(greedy > 0 ? greedy : 1) * sizeof *gout); /* --greedy's */
    double *whole[2], *staged[2], *stage[2][N_STAGES], *floor_ms[2];
    int alloc_failed = 0;
    for (int r = 0; r < 2; r++) {
        whole[r] = calloc((size_t)(reps * samples), sizeof(double));
        staged[r] = calloc((size_t)(reps * samples), sizeof(double));
        floor_ms[r] = calloc((size_t)(reps * samples), sizeof(double));
        alloc_failed |= !whole[r] || !staged[r] || !floor_ms[r];
        for (int k = 0; k < N_STAGES; k++) {
            stage[r][k] = calloc((size_t)(reps * samples), sizeof(double));
            alloc_failed |= !stage[r][k];
        }
    }
    /* the stage profile's series (with --stage-profile): the baseline route's steps */
    stage_profile_series sp = {{NULL, NULL, NULL, NULL}, NULL, NULL, {NULL}, reps * samples};
    if (stage_out) {
        for (int k = 0; k < N_BASELINE_STAGES; k++) {
            sp.stage[k] = calloc((size_t)sp.samples, sizeof(double));
            alloc_failed |= !sp.stage[k];
        }
        sp.attention_total = calloc((size_t)sp.samples, sizeof(double));
        alloc_failed |= !sp.attention_total;
    }
    char err[GEM_GGUF_ERR_LEN];
    if (!ids || !logits || !gout || alloc_failed) {
        cli_error(CMD, "out of memory");
        goto out;
    }
    if (cap > hp->context_length) {
        cli_error(CMD, "context %lld + %lld steps exceeds the model's %lld positions",
                  (long long)contexts[n_ctx - 1], (long long)steps,
                  (long long)hp->context_length);
        goto out;
    }
    /* the routes timed: both, or the fused one alone when K is rebuilt from V or when asked */
    const gem_route all_routes[2] = {GEM_ROUTE_BASELINE, GEM_ROUTE_FUSED};
    const int fused_alone = k_from_v || fused_only;
    const gem_route *routes = fused_alone ? all_routes + 1 : all_routes;
    const int n_routes = fused_alone ? 1 : 2;
    gem_session_opts so = {threads, cap, routes[0], 0, 0, kv_dtype, k_from_v, backend};
    const gem_status created = gem_session_create(m, &so, &s, err, sizeof err);
    if (created != GEM_OK) {
        /* a cache type the baseline route does not read: the fused route alone can be timed */
        cli_error(CMD, "%s%s", err,
                  created == GEM_ERR_UNSUPPORTED && !fused_alone
                      ? "; --fused-only times the fused route alone"
                      : "");
        goto out;
    }
    {
        /* the caches are allocated but not yet touched: refuse what cannot fit */
        gem_kv_memory held;
        gem_session_kv_memory(s, &held);
        if (backend == GEM_BACKEND_CPU &&
            cli_check_memory(CMD, "the KV caches", (uint64_t)held.held) != 0)
            goto out;
    }
    if (stage_out && gem_session_time_baseline_stages(s, 1) != GEM_OK) {
        cli_error(CMD, "cannot time the baseline route's stages");
        goto out;
    }
    if (gem_engine_create(backend, threads, &e) != GEM_OK) {
        cli_error(CMD, "cannot create the bandwidth probe");
        goto out;
    }
    rc = 1;
    const int32_t bos = gem_tokenizer_bos(gem_model_tokenizer(m));
    for (int64_t i = 0; i < prompt; i++)
        ids[i] = i == 0 && bos >= 0
                     ? bos
                     : (int32_t)(splitmix64(1 + (uint64_t)i) % (uint64_t)hp->n_vocab);
    if (cli_prefill(CMD, s, ids, prompt, logits, prompt >= 1024 ? 1024 : 0) != GEM_OK)
        goto out;
    char wsha[65] = "unknown";
    if (out || stage_out) {
        /* the records name the weights by the file's digest: a pass over the whole file */
        cli_progress("%s: digesting the weights for the records", CMD);
        if (cli_weights_sha256(model_path, random_seed, wsha))
            snprintf(wsha, sizeof wsha, "unknown");
    }
    for (size_t ci = 0; ci < n_ctx; ci++) {
    context = contexts[ci];
    char out_path[1024], stage_path[1024];
    if (out)
        ctx_path(out, n_ctx, context, out_path, sizeof out_path); /* checked above */
    if (stage_out)
        ctx_path(stage_out, n_ctx, context, stage_path, sizeof stage_path);
    json_decref(per_route);
    per_route = NULL;
    if (context > gem_session_pos(s))
        cli_progress("%s: filling the full layers' caches to %lld positions", CMD,
                     (long long)context);
    if (context > gem_session_pos(s) && gem_session_fill_repeat(s, context) != GEM_OK) {
        cli_error(CMD, "cannot fill the caches to %lld positions", (long long)context);
        goto out;
    }
    double bw = 0;
    cli_progress("%s: measuring the read bandwidth (%lld MiB)", CMD, (long long)bw_mib);
    if (gem_engine_read_bandwidth(e, (size_t)bw_mib << 20, 5, &bw) != GEM_OK || !(bw > 0)) {
        cli_error(CMD, "the bandwidth probe failed");
        goto out;
    }
    const size_t wbytes = gem_model_weight_bytes_per_token(m);
    int32_t tok = 4 % (int32_t)hp->n_vocab;
    cli_progress("%s: %lld repetitions x %lld samples per route at context %lld", CMD,
                 (long long)reps, (long long)samples, (long long)context);
    /* one warm-up step per route */
    for (int r = 0; r < n_routes; r++) {
        gem_session_set_route(s, routes[r]);
        if (gem_session_eval(s, tok, logits) != GEM_OK)
            goto out;
    }
    for (int64_t rep = 0; rep < reps; rep++)
        for (int r0 = 0; r0 < n_routes; r0++) {
            const int r = rep % 2 ? n_routes - 1 - r0 : r0; /* ABBA order across repetitions */
            gem_session_set_route(s, routes[r]);
            cli_progress("%s: repetition %lld/%lld, %s route, %lld steps", CMD,
                         (long long)rep + 1, (long long)reps, gem_route_name(routes[r]),
                         (long long)samples);
            for (int64_t k = 0; k < samples; k++) {
                const int64_t idx = rep * samples + k;
                gem_stage_times t;
                /* a step timed whole (two CUDA events: what a decode loop runs), then a
                 * step timed per stage (events at every stage; the baseline's own stages
                 * with --stage-profile), alternating */
                if (stage_clocks(s, 0, stage_out != NULL))
                    goto out;
                floor_ms[r][idx] =
                    1e3 * (double)(wbytes + gem_session_kv_bytes_at(s, gem_session_pos(s))) / bw;
                gem_status st = gem_session_eval(s, tok, logits);
                if (st != GEM_OK) {
                    cli_error(CMD, "decode step failed: %s", gem_status_str(st));
                    goto out;
                }
                gem_session_times(s, &t);
                whole[r][idx] = 1e3 * t.total;
                {
                    int32_t top[10];
                    cli_top10(logits, hp->n_vocab, top);
                    tok = top[0];
                }
                if (stage_clocks(s, 1, stage_out != NULL))
                    goto out;
                gem_session_times_reset(s);
                st = gem_session_eval(s, tok, logits);
                if (st != GEM_OK) {
                    cli_error(CMD, "decode step failed: %s", gem_status_str(st));
                    goto out;
                }
                gem_session_times(s, &t);
                const double v[N_STAGES] = {t.embed,     t.norms, t.proj,  t.attn_swa,
                                            t.attn_full, t.mlp,   t.logits};
                for (int j = 0; j < N_STAGES; j++)
                    stage[r][j][idx] = 1e3 * v[j];
                staged[r][idx] = 1e3 * t.total;
                if (stage_out && routes[r] == GEM_ROUTE_BASELINE) {
                    gem_baseline_stage_times bt = {0.0, 0.0, 0.0, 0.0, 0};
                    if (gem_session_baseline_stage_times(s, &bt) != GEM_OK ||
                        bt.calls != hp->n_full_layers) {
                        cli_error(CMD, "the stage clock saw %lld baseline calls in a step with "
                                  "%lld full-attention layers",
                                  (long long)bt.calls, (long long)hp->n_full_layers);
                        goto out;
                    }
                    /* per call, in ms; the total adds the four in the screen's order */
                    const double per_call = 1e3 / (double)bt.calls;
                    const double v4[N_BASELINE_STAGES] = {bt.score, bt.normalize, bt.value,
                                                          bt.reduce};
                    for (int j = 0; j < N_BASELINE_STAGES; j++)
                        sp.stage[j][idx] = per_call * v4[j];
                    sp.attention_total[idx] =
                        sp.stage[0][idx] + sp.stage[1][idx] + sp.stage[2][idx] + sp.stage[3][idx];
                }
                int32_t top[10];
                cli_top10(logits, hp->n_vocab, top);
                tok = top[0];
            }
        }
    /* --greedy: greedy decoding as an application runs it, on the last route timed, A B B A:
     * A gem_session_eval_argmax a token at a time, B gem_session_greedy (the first B call
     * also makes the graphs a CUDA session keeps) */
    double loop_ms[2] = {0.0, 0.0}, greedy_ms[2] = {0.0, 0.0}, greedy_floor = 0.0;
    if (greedy > 0) {
        gem_session_set_route(s, routes[n_routes - 1]);
        if (stage_clocks(s, 0, stage_out != NULL))
            goto out;
        /* the floor at the middle of the four runs */
        greedy_floor =
            1e3 * (double)(wbytes + gem_session_kv_bytes_at(s, gem_session_pos(s) + 2 * greedy)) /
            bw;
        cli_progress("%s: greedy decoding, %lld tokens a call, A B B A, %s route", CMD,
                     (long long)greedy, gem_route_name(routes[n_routes - 1]));
        for (int run = 0; run < 4; run++) {
            const int call = run == 1 || run == 2;
            int64_t made = 0;
            gem_status st = GEM_OK;
            const double t0 = cli_now();
            if (call)
                st = gem_session_greedy(s, tok, greedy, gout, &made, NULL, NULL);
            else
                for (int64_t k = 0; k < greedy; k++) {
                    st = gem_session_eval_argmax(s, k ? gout[k - 1] : tok, &gout[k]);
                    if (st != GEM_OK)
                        break;
                    made = k + 1;
                }
            const double ms = 1e3 * (cli_now() - t0) / (double)greedy;
            if (st != GEM_OK || made != greedy) {
                cli_error(CMD, "greedy decoding failed after %lld tokens: %s", (long long)made,
                          gem_status_str(st));
                goto out;
            }
            if (call)
                greedy_ms[run - 1] = ms;
            else
                loop_ms[run ? 1 : 0] = ms;
            tok = gout[greedy - 1];
        }
    }
    const int64_t n = reps * samples;
    printf("gem profile: %s on %s, context %lld (%lld evaluated%s), read bandwidth %.2f GB/s\n",
           model_path, gem_session_describe(s), (long long)context, (long long)prompt,
           context > prompt ? ", the rest repeated" : "", bw / 1e9);
    printf("weights read per token %.1f MB, KV read per token %.1f MB (%s caches) at the first "
           "timed step\n",
           (double)wbytes / 1e6, (double)gem_session_kv_bytes_at(s, context) / 1e6,
           gem_dtype_name(kv_dtype));
    char kv_line[256];
    cli_kv_memory_line(s, kv_line, sizeof kv_line);
    printf("%s\n", kv_line);
    if (cli_packed_line(m, kv_line, sizeof kv_line) == 0)
        printf("%s\n", kv_line);
    gem_kv_memory mem;
    gem_session_kv_memory(s, &mem);
    per_route = json_object();
    for (int r = 0; r < n_routes; r++) {
        const double med = median(whole[r], n), fl = median(floor_ms[r], n);
        const double smed = median(staged[r], n);
        printf("%-8s  whole token %.3f ms median (%.2f tokens/s), floor %.3f ms, %.2fx the floor "
               "(%.1f%% of it)\n",
               gem_route_name(routes[r]), med, 1e3 / med, fl, med / fl, 100.0 * fl / med);
        printf("          with every stage timed: %.3f ms, of which\n", smed);
        json_t *st = json_object(), *meds = json_object();
        for (int j = 0; j < N_STAGES; j++) {
            const double sm = median(stage[r][j], n);
            printf("          %-18s %9.3f ms  %5.1f%%\n", stage_names[j], sm, 100.0 * sm / smed);
            json_object_set_new(st, stage_names[j], reals(stage[r][j], n));
            json_object_set_new(meds, stage_names[j], gem_receipt_real(sm));
        }
        json_object_set_new(per_route, gem_route_name(routes[r]),
                            json_pack("{s:o, s:o, s:o, s:o, s:o, s:f, s:f, s:f, s:f, s:f}",
                                      "whole_token_ms", reals(whole[r], n), "floor_ms",
                                      reals(floor_ms[r], n), "staged_whole_token_ms",
                                      reals(staged[r], n), "stages_ms", st, "stage_median_ms",
                                      meds, "whole_token_median_ms", med, "tokens_per_s",
                                      1e3 / med, "floor_median_ms", fl, "x_floor", med / fl,
                                      "staged_whole_token_median_ms", smed));
    }
    if (greedy > 0) {
        const double gm = 0.5 * (greedy_ms[0] + greedy_ms[1]), lm = 0.5 * (loop_ms[0] + loop_ms[1]);
        printf("%-8s  greedy decoding, %lld tokens a call: %.3f ms a token (%.2f tokens/s), floor "
               "%.3f ms, %.1f%% of it; token by token %.3f ms; greedy/token by token %.4f (host "
               "clock, A B B A: %.3f %.3f %.3f %.3f ms)\n",
               gem_route_name(routes[n_routes - 1]), (long long)greedy, gm, 1e3 / gm, greedy_floor,
               100.0 * greedy_floor / gm, lm, gm / lm, loop_ms[0], greedy_ms[0], greedy_ms[1],
               loop_ms[1]);
    }
    if (stage_out) {
        /* the baseline route's series: the steps timed per stage, staged[0] (routes[0] is
         * the baseline without --k-from-v) */
        sp.whole_token = staged[0];
        for (int j = 0; j < N_STAGES; j++)
            sp.whole_stage[j] = stage[0][j];
        const double full_med = median(stage[0][FULL_ATTENTION], n);
        const double total_med = median(sp.attention_total, n);
        printf("baseline  full attention per call: ");
        for (int j = 0; j < N_BASELINE_STAGES; j++)
            printf("%s%s %.3f ms", j ? ", " : "", baseline_stage_names[j],
                   median(sp.stage[j], n));
        printf(" (median)\n          the four stages cover %.1f%% of the full-attention time "
               "(%lld calls x %.3f ms of %.3f ms)\n",
               100.0 * (double)hp->n_full_layers * total_med / full_med,
               (long long)hp->n_full_layers, total_med, full_med);
        char cpu[160], provenance[4096];
        snprintf(cpu, sizeof cpu, "%s", gem_engine_describe(e));
        printable(cpu);
        const int gpu = backend == GEM_BACKEND_CUDA;
        snprintf(provenance, sizeof provenance,
                 "measured by gem profile on the %s: model %s (weights sha256 %s), %lld "
                 "layers, %lld full-attention calls per token; %s; %lld positions evaluated%s; "
                 "%s K and V caches; stages: %s of the baseline route's score, "
                 "normalize, value and reduce %s, the mean per full-attention "
                 "call of each step; whole_token_ms: the same step's time%s; baseline steps "
                 "interleaved ABBA with the fused route, each after a step timed whole alone",
                 gpu ? "GPU" : "CPU", hp->name, wsha, (long long)hp->n_layers,
                 (long long)hp->n_full_layers, cpu, (long long)prompt,
                 context > prompt ? ", the rest repeated (timing only)" : "",
                 gem_dtype_name(kv_dtype), gpu ? "GPU time between CUDA events" : "wall time",
                 gpu ? "kernels" : "thread-pool runs",
                 gpu ? " (CUDA events around every stage of the token)" : "");
        printable(provenance);
        json_t *doc =
            stage_profile_doc(&sp, m, &full, context, reps, samples, kv_dtype, provenance);
        if (!doc) {
            cli_error(CMD, "cannot build the stage profile");
            rc = 2;
            goto out;
        }
        char why[512];
        if (gem_receipt_save(stage_path, doc, why, sizeof why) != GEM_OK) {
            cli_error(CMD, "cannot write %s: %s", stage_path, why);
            json_decref(doc);
            rc = 2;
            goto out;
        }
        json_decref(doc);
        printf("stage profile %s\n", stage_path);
    }
    if (out) {
        json_t *doc = gem_receipt_new("gem.model_profile.v1", "gem profile", cli_git_commit());
        json_object_set_new(doc, "model",
                            json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:s}", "path", model_path,
                                      "name", hp->name, "n_layers", (json_int_t)hp->n_layers,
                                      "full_layers", (json_int_t)hp->n_full_layers, "n_embd",
                                      (json_int_t)hp->n_embd, "weight_bytes_per_token",
                                      (json_int_t)wbytes, "weights_sha256", wsha));
        if (backend == GEM_BACKEND_CUDA)
            json_object_set_new(doc, "machine",
                                json_pack("{s:s, s:f}", "gpu", gem_engine_describe(e),
                                          "read_bandwidth_bytes_per_s", bw));
        else
            json_object_set_new(doc, "machine",
                                json_pack("{s:s, s:I, s:f}", "cpu", gem_engine_describe(e),
                                          "threads", (json_int_t)gem_engine_threads(e),
                                          "read_bandwidth_bytes_per_s", bw));
        json_object_set_new(doc, "backend", json_string(gem_backend_name(backend)));
        if (random_seed)
            json_object_set_new(json_object_get(doc, "model"), "weights_random_seed",
                                json_integer((json_int_t)random_seed));
        json_object_set_new(
            doc, "context",
            json_pack("{s:I, s:I, s:s, s:s, s:b, s:I, s:I}", "positions", (json_int_t)context,
                      "evaluated", (json_int_t)prompt, "fill",
                      context > prompt ? "repeat (timing only)" : "real", "kv_dtype",
                      gem_dtype_name(kv_dtype), "k_from_v", k_from_v, "kv_cache_held_bytes",
                      (json_int_t)mem.held, "kv_cache_saved_bytes", (json_int_t)mem.saved));
        json_object_set_new(doc, "repetitions", json_integer(reps));
        json_object_set_new(doc, "samples_per_repetition", json_integer(samples));
        json_object_set_new(doc, "order", json_string("ABBA over repetitions, consecutive tokens"));
        json_object_set_new(doc, "routes", per_route);
        per_route = NULL;
        if (greedy > 0)
            json_object_set_new(
                doc, "greedy",
                json_pack("{s:s, s:I, s:s, s:s, s:[f, f], s:[f, f], s:f}", "route",
                          gem_route_name(routes[n_routes - 1]), "tokens_per_call",
                          (json_int_t)greedy, "order",
                          "A B B A: A gem_session_eval_argmax a token at a time, B "
                          "gem_session_greedy",
                          "clock", "host, milliseconds a token", "greedy_ms_per_token",
                          greedy_ms[0], greedy_ms[1], "token_by_token_ms_per_token", loop_ms[0],
                          loop_ms[1], "floor_ms", greedy_floor));
        if (gem_receipt_write(out_path, doc) != GEM_OK) {
            cli_error(CMD, "cannot write %s", out_path);
            json_decref(doc);
            rc = 2;
            goto out;
        }
        json_decref(doc);
        printf("record %s\n", out_path);
    }
    } /* contexts */
    rc = 0;
out:
    json_decref(per_route);
    for (int k = 0; k < N_BASELINE_STAGES; k++)
        free(sp.stage[k]);
    free(sp.attention_total);
    for (int r = 0; r < 2; r++) {
        free(whole[r]);
        free(staged[r]);
        free(floor_ms[r]);
        for (int k = 0; k < N_STAGES; k++)
            free(stage[r][k]);
    }
    free(ids);
    free(logits);
    free(gout);
    gem_engine_destroy(e);
    gem_session_free(s);
    gem_model_free(m);
    return rc;
}
