/*
 * gem model-check: holds the decoder to an external reference. The reference
 * file (gem.reference.v1, written by scripts/reference/gemma4_reference.py from
 * transformers' Gemma 4 model) gives a model digest, a prompt, and per greedy
 * step the float64 and float32 tokens and top-10 logits, plus the full logits at
 * the last prompt position. The check: the model file has that digest; gem's
 * greedy tokens equal the float64 reference's for every recorded step (16 at
 * least); every step's top-10 set equals the reference's; gem's logits at the
 * last prompt position are within 1e-3 of float64 everywhere; and every text of
 * the file tokenizes to the reference's ids (a `tokenizers` BPE with byte fallback
 * on the same vocabulary).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_model.h"
#include "gem/check.h"

#define CMD "model-check"
#define MIN_STEPS 16
#define MAX_STEPS 4096
#define LOGIT_TOL 1e-3

static void help(void)
{
    printf("usage: gem model-check --model M.gguf --expected FILE [options]\n\n"
           "Runs the prompt of a reference file (gem.reference.v1, from\n"
           "scripts/reference/gemma4_reference.py) and checks: the model's SHA-256, the\n"
           "greedy tokens of every recorded step (>= %d) against float64, each step's top-10\n"
           "set, the logits at the last prompt position within %g of float64, and the\n"
           "file's texts tokenized to the reference's ids.\n\n"
           "options:\n"
           "  --attn R      route of the full-attention layers (default fused,\n"
           "                the production route)\n"
           "  --k-from-v    full layers with K = V store V alone and the fused route\n"
           "                rebuilds K from it (needs --attn fused)\n"
           "  --threads N   threads, 0 = one per core (default 0)\n"
           "  --backend B   cpu (default) or cuda: the decoder on the GPU\n"
           "  -h, --help    this text\n\n"
           "exit status: 0 pass, 1 a check failed, 2 bad usage or input\n",
           MIN_STEPS, LOGIT_TOL);
}

#define MAX_TEXTS 64

typedef struct ref_text {
    char *text;   /* NUL-terminated UTF-8 */
    int32_t *ids; /* (n) with BOS */
    int64_t n;
} ref_text;

typedef struct ref {
    char sha[65];
    ref_text texts[MAX_TEXTS];
    int64_t n_texts;
    int32_t *prompt;
    int64_t n_prompt, steps, n_vocab;
    int32_t tokens[MAX_STEPS];
    int32_t top[MAX_STEPS][10];
    double *logits0; /* (n_vocab) float64 */
} ref;

/* Reads the reference file. 0, or -1 with a message. */
static int read_ref(const char *path, ref *r)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_error(CMD, "%s: cannot open", path);
        return -1;
    }
    memset(r, 0, sizeof *r);
    r->steps = -1;
    char word[64];
    int ok = fscanf(f, "%63s", word) == 1 && !strcmp(word, "gem.reference.v1");
    int have_tokens = 0, have_logits = 0;
    int64_t tops = 0;
    while (ok && fscanf(f, "%63s", word) == 1) {
        long long n = 0, k = 0;
        if (word[0] == '#' || !strncmp(word, "f32.", 4) || strstr(word, "_max_abs") ||
            strstr(word, "_gap") || strstr(word, "_edge")) {
            int c;
            while ((c = fgetc(f)) != '\n' && c != EOF)
                ;
        } else if (!strcmp(word, "tokenize")) {
            static char hex[1 << 16];
            ok = r->n_texts < MAX_TEXTS && fscanf(f, "%65535s %lld", hex, &n) == 2 && n >= 1 &&
                 n <= 65536 && strlen(hex) % 2 == 0;
            ref_text *t = ok ? &r->texts[r->n_texts] : NULL;
            if (ok) {
                t->text = malloc(strlen(hex) / 2 + 1);
                t->ids = malloc((size_t)n * sizeof *t->ids);
                ok = t->text && t->ids;
            }
            for (size_t i = 0; ok && i < strlen(hex) / 2; i++) {
                unsigned v;
                ok = sscanf(hex + 2 * i, "%2x", &v) == 1;
                t->text[i] = (char)v;
            }
            if (ok) {
                t->text[strlen(hex) / 2] = 0;
                t->n = n;
                r->n_texts++;
            }
            for (long long i = 0; ok && i < n; i++)
                ok = fscanf(f, "%d", &t->ids[i]) == 1;
        } else if (!strcmp(word, "model_sha256")) {
            ok = fscanf(f, "%64s", r->sha) == 1 && strlen(r->sha) == 64;
        } else if (!strcmp(word, "prompt")) {
            ok = fscanf(f, "%lld", &n) == 1 && n >= 1 && n <= (1 << 24) && !r->prompt;
            if (ok && (r->prompt = malloc((size_t)n * sizeof *r->prompt)) != NULL) {
                r->n_prompt = n;
                for (long long i = 0; ok && i < n; i++)
                    ok = fscanf(f, "%d", &r->prompt[i]) == 1 && r->prompt[i] >= 0;
            } else {
                ok = 0;
            }
        } else if (!strcmp(word, "steps")) {
            ok = fscanf(f, "%lld", &n) == 1 && n >= 1 && n <= MAX_STEPS;
            r->steps = n;
        } else if (!strcmp(word, "f64.tokens")) {
            ok = fscanf(f, "%lld", &n) == 1 && n == r->steps;
            for (long long i = 0; ok && i < n; i++)
                ok = fscanf(f, "%d", &r->tokens[i]) == 1;
            have_tokens = ok;
        } else if (!strcmp(word, "f64.top10")) {
            ok = fscanf(f, "%lld", &k) == 1 && k >= 0 && k < r->steps;
            for (int j = 0; ok && j < 10; j++) {
                double v;
                ok = fscanf(f, "%d %lf", &r->top[k][j], &v) == 2;
            }
            tops++;
        } else if (!strcmp(word, "f64.logits0")) {
            ok = fscanf(f, "%lld", &n) == 1 && n >= 10 && n <= (1 << 26) && !r->logits0;
            if (ok && (r->logits0 = malloc((size_t)n * sizeof *r->logits0)) != NULL) {
                r->n_vocab = n;
                for (long long i = 0; ok && i < n; i++)
                    ok = fscanf(f, "%lf", &r->logits0[i]) == 1 && isfinite(r->logits0[i]);
                have_logits = ok;
            } else {
                ok = 0;
            }
        } else {
            ok = 0;
        }
    }
    fclose(f);
    if (!ok || !r->sha[0] || !r->prompt || r->steps < 1 || !have_tokens || !have_logits ||
        tops != r->steps) {
        cli_error(CMD, "%s: not a complete gem.reference.v1 file", path);
        return -1;
    }
    return 0;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int gem_cmd_model_check(int argc, char **argv)
{
    const char *model_path = NULL, *exp_path = NULL;
    int64_t threads = 0;
    gem_route route = GEM_MODEL_FULL_ROUTE_DEFAULT;
    int k_from_v = 0;
    gem_backend backend = GEM_BACKEND_CPU;
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
        if (i + 1 >= argc) {
            cli_error(CMD, "'%s' needs a value or is unknown (see --help)", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--model"))
            model_path = v;
        else if (!strcmp(a, "--expected"))
            exp_path = v;
        else if (!strcmp(a, "--threads")) {
            if (cli_parse_i64(v, 0, 4096, &threads)) {
                cli_error(CMD, "--threads '%s' is not an integer in [0, 4096]", v);
                return 2;
            }
        } else if (!strcmp(a, "--attn")) {
            if (cli_parse_attn(CMD, v, &route))
                return 2;
        } else if (!strcmp(a, "--backend")) {
            if (cli_parse_model_backend(CMD, v, &backend))
                return 2;
        } else {
            cli_error(CMD, "unknown option '%s' (see --help)", a);
            return 2;
        }
    }
    if (!model_path || !exp_path) {
        cli_error(CMD, "--model and --expected are required (see --help)");
        return 2;
    }
    if (cli_check_k_from_v(CMD, k_from_v, route))
        return 2;
    if (backend == GEM_BACKEND_CUDA && threads != 0) {
        cli_error(CMD, "--threads is for the CPU; the CUDA backend takes --threads 0");
        return 2;
    }
    static ref r;
    if (read_ref(exp_path, &r))
        return 2;
    int rc = 2;
    gem_model *m = NULL;
    gem_session *s = NULL;
    float *logits = NULL;
    char sha[65];
    if (cli_model_file_sha256(model_path, sha)) {
        cli_error(CMD, "%s: cannot read", model_path);
        goto out;
    }
    if (strcmp(sha, r.sha) != 0) {
        cli_error(CMD, "%s has SHA-256 %.12s..., the reference was made from %.12s...", model_path,
                  sha, r.sha);
        rc = 1;
        goto out;
    }
    if (cli_load_model(CMD, model_path, &m) || cli_model_to_backend(CMD, m, backend, 0))
        goto out;
    const gem_hparams *hp = gem_model_hparams(m);
    if (hp->n_vocab != r.n_vocab) {
        cli_error(CMD, "the model has %lld tokens, the reference %lld", (long long)hp->n_vocab,
                  (long long)r.n_vocab);
        goto out;
    }
    for (int64_t i = 0; i < r.n_prompt; i++)
        if (r.prompt[i] >= hp->n_vocab) {
            cli_error(CMD, "prompt token %d is outside the vocabulary", r.prompt[i]);
            goto out;
        }
    char err[GEM_GGUF_ERR_LEN];
    gem_session_opts so = {threads, r.n_prompt + r.steps, route, 0, 0, GEM_DTYPE_F32, k_from_v,
                           backend};
    if (gem_session_create(m, &so, &s, err, sizeof err) != GEM_OK) {
        cli_error(CMD, "%s", err);
        goto out;
    }
    logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    if (!logits || cli_prefill(CMD, s, r.prompt, r.n_prompt, logits, 0) != GEM_OK) {
        rc = 1;
        goto out;
    }
    double max_abs = 0.0;
    for (int64_t i = 0; i < hp->n_vocab; i++)
        max_abs = fmax(max_abs, fabs((double)logits[i] - r.logits0[i]));
    int64_t same_tokens = 0, same_sets = 0;
    int diverged = 0;
    for (int64_t k = 0; k < r.steps; k++) {
        int32_t top[10], a[10], b[10];
        cli_top10(logits, hp->n_vocab, top);
        memcpy(a, top, sizeof a);
        memcpy(b, r.top[k], sizeof b);
        qsort(a, 10, sizeof a[0], cmp_i32);
        qsort(b, 10, sizeof b[0], cmp_i32);
        same_sets += !diverged && memcmp(a, b, sizeof a) == 0;
        if (top[0] != r.tokens[k])
            diverged = 1;
        same_tokens += !diverged;
        if (diverged || k + 1 == r.steps)
            break;
        /* continue with the reference's token (equal to gem's while not diverged) */
        gem_status st = gem_session_eval(s, r.tokens[k], logits);
        if (st != GEM_OK) {
            cli_error(CMD, "evaluating step %lld: %s", (long long)k, gem_status_str(st));
            rc = 1;
            goto out;
        }
    }
    /* The tokenizer against the reference's token ids. */
    int64_t same_texts = 0;
    for (int64_t i = 0; i < r.n_texts; i++) {
        int32_t ids[4096];
        int64_t n = 0;
        if (gem_tokenize(gem_model_tokenizer(m), r.texts[i].text, 1, ids, 4096, &n) == GEM_OK &&
            n == r.texts[i].n && !memcmp(ids, r.texts[i].ids, (size_t)n * sizeof ids[0]))
            same_texts++;
        else
            cli_error(CMD, "text %lld ('%.40s') tokenizes differently from the reference",
                      (long long)i, r.texts[i].text);
    }
    const int pass = same_tokens == r.steps && r.steps >= MIN_STEPS && same_sets == r.steps &&
                     max_abs <= LOGIT_TOL && same_texts == r.n_texts;
    printf("model-check: %s, attn %s%s: greedy tokens %lld/%lld equal to float64, top-10 sets "
           "%lld/%lld equal, last-prompt-position logits max |gem - float64| = %.3e (<= %g), "
           "texts tokenized as the reference %lld/%lld: %s\n",
           exp_path, route == GEM_ROUTE_FUSED ? "fused" : "baseline",
           k_from_v ? " (K from V)" : "", (long long)same_tokens,
           (long long)r.steps, (long long)same_sets, (long long)r.steps, max_abs, LOGIT_TOL,
           (long long)same_texts, (long long)r.n_texts, pass ? "pass" : "FAIL");
    rc = pass ? 0 : 1;
out:
    for (int64_t i = 0; i < r.n_texts; i++) {
        free(r.texts[i].text);
        free(r.texts[i].ids);
    }
    free(r.prompt);
    free(r.logits0);
    free(logits);
    gem_session_free(s);
    gem_model_free(m);
    return rc;
}
