/*
 * gem generate: greedy text generation with the Gemma 4 decoder on the CPU or,
 * with --backend cuda, on the GPU.
 * The prompt (text, tokenized with the model's vocabulary, or token ids) is
 * evaluated, then the argmax token is taken n times; each token's text goes to
 * stdout as soon as it is chosen. Progress, timing and the KV cache memory go to
 * stderr; --json writes the tokens and each step's top-10 logits. Without --json the steps
 * after the first run through gem_session_greedy, so on CUDA the logits stay on the device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "cli_model.h"
#include "gem/receipt.h"

#define CMD "generate"

/* What gem_session_greedy's callback needs: the tokens so far, the text's end. */
typedef struct {
    const gem_tokenizer *tok;
    json_t *toks;
    int64_t made;
    int ignore_eos;
} gen_stream;

/* A generated token: to the list and, as its text, to stdout; 1 (stop) at an end of text. */
static int gen_emit(void *user, int32_t id)
{
    gen_stream *g = user;
    json_array_append_new(g->toks, json_integer(id));
    g->made++;
    char piece[256];
    size_t pl = 0;
    if (gem_token_piece(g->tok, id, piece, sizeof piece, &pl) == GEM_OK) {
        fwrite(piece, 1, pl, stdout);
        fflush(stdout);
    }
    return !g->ignore_eos && gem_tokenizer_is_eog(g->tok, id);
}

static void help(void)
{
    printf("usage: gem generate --model M.gguf (--prompt TEXT | --prompt-tokens ID,ID,..) "
           "[options]\n\n"
           "Greedy decoding with the Gemma 4 decoder; the text streams to stdout.\n\n"
           "options:\n"
           "  -n N              tokens to generate (default 32)\n"
           "  --backend B       cpu (default) or cuda: the whole token on the GPU, weights\n"
           "                    and KV caches in its memory\n"
           "  --attn R          route of the full-attention layers: baseline or fused\n"
           "                    (default fused, the production route)\n"
           "  --threads N       CPU threads, 0 = one per core (default 0; the CUDA backend\n"
           "                    takes 0 only)\n"
           "  --kv-dtype T      element type of the K/V caches: f32, bf16 or f16\n"
           "                    (default f32)\n"
           "  --k-from-v        full layers with K = V store V alone and the fused route\n"
           "                    rebuilds K from it (half those layers' cache bytes; needs\n"
           "                    --attn fused)\n"
           "  --json FILE       write prompt_tokens, tokens, steps[{token, top10}] (step 0\n"
           "                    holds the logits at the last prompt position) and the KV\n"
           "                    cache bytes held and saved\n"
           "  --ignore-eos      keep going past an end-of-generation token\n"
           "  --no-bos          do not put BOS before a text prompt\n"
           "  -h, --help        this text\n\n"
           "exit status: 0 done, 1 the decoder failed, 2 bad usage or input\n");
}

int gem_cmd_generate(int argc, char **argv)
{
    const char *model_path = NULL, *prompt = NULL, *prompt_tokens = NULL, *json_path = NULL;
    int64_t n_gen = 32, threads = 0;
    int ignore_eos = 0, bos = 1, k_from_v = 0;
    gem_route route = GEM_MODEL_FULL_ROUTE_DEFAULT;
    gem_dtype kv_dtype = GEM_DTYPE_F32;
    gem_backend backend = GEM_BACKEND_CPU;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        }
        if (!strcmp(a, "--ignore-eos")) {
            ignore_eos = 1;
            continue;
        }
        if (!strcmp(a, "--no-bos")) {
            bos = 0;
            continue;
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
        else if (!strcmp(a, "--prompt"))
            prompt = v;
        else if (!strcmp(a, "--prompt-tokens"))
            prompt_tokens = v;
        else if (!strcmp(a, "--json"))
            json_path = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (cli_parse_i64(v, 0, 1 << 24, &n_gen)) {
                cli_error(CMD, "-n '%s' is not an integer in [0, 16777216]", v);
                return 2;
            }
        } else if (!strcmp(a, "--threads")) {
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
        } else if (!strcmp(a, "--kv-dtype")) {
            if (gem_dtype_parse(v, &kv_dtype) != GEM_OK || kv_dtype == GEM_DTYPE_FP8_E4M3) {
                cli_error(CMD, "--kv-dtype '%s' is not f32, bf16 or f16 (the model's caches)", v);
                return 2;
            }
        } else {
            cli_error(CMD, "unknown option '%s' (see --help)", a);
            return 2;
        }
    }
    if (!model_path || (!prompt == !prompt_tokens)) {
        cli_error(CMD, "--model and one of --prompt / --prompt-tokens are required (see --help)");
        return 2;
    }
    if (cli_check_k_from_v(CMD, k_from_v, route))
        return 2;
    if (backend == GEM_BACKEND_CUDA && threads != 0) {
        cli_error(CMD, "--threads is for the CPU; the CUDA backend takes --threads 0");
        return 2;
    }
    gem_model *m = NULL;
    if (cli_load_model(CMD, model_path, &m))
        return 2;
    if (cli_model_to_backend(CMD, m, backend, 0)) {
        gem_model_free(m);
        return 2;
    }
    const gem_hparams *hp = gem_model_hparams(m);
    const gem_tokenizer *tok = gem_model_tokenizer(m);
    int32_t *ids = NULL;
    int64_t n_prompt = 0;
    int rc = 2;
    float *logits = NULL;
    gem_session *s = NULL;
    json_t *steps = json_array(), *toks = json_array();
    if (prompt_tokens) {
        if (cli_parse_tokens(CMD, prompt_tokens, hp->n_vocab, &ids, &n_prompt))
            goto out;
    } else {
        int64_t need = 0;
        gem_tokenize(tok, prompt, bos, NULL, 0, &need);
        ids = malloc((size_t)(need > 0 ? need : 1) * sizeof *ids);
        if (!ids || gem_tokenize(tok, prompt, bos, ids, need, &n_prompt) != GEM_OK) {
            cli_error(CMD, "cannot tokenize the prompt");
            goto out;
        }
    }
    if (n_prompt < 1) {
        cli_error(CMD, "the prompt has no tokens");
        goto out;
    }
    if (n_prompt + n_gen > hp->context_length) {
        cli_error(CMD, "%lld prompt + %lld generated tokens exceed the context length %lld",
                  (long long)n_prompt, (long long)n_gen, (long long)hp->context_length);
        goto out;
    }
    char err[GEM_GGUF_ERR_LEN];
    gem_session_opts so = {threads, n_prompt + n_gen, route, 0, 0, kv_dtype, k_from_v, backend};
    gem_status st = gem_session_create(m, &so, &s, err, sizeof err);
    if (st != GEM_OK) {
        cli_error(CMD, "%s", err);
        goto out;
    }
    char kv_line[256];
    cli_kv_memory_line(s, kv_line, sizeof kv_line);
    cli_progress("%s: %s", CMD, kv_line);
    if (cli_packed_line(m, kv_line, sizeof kv_line) == 0)
        cli_progress("%s: %s", CMD, kv_line);
    logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    if (!logits) {
        cli_error(CMD, "out of memory");
        goto out;
    }
    rc = 1;
    double t0 = cli_now();
    if (cli_prefill(CMD, s, ids, n_prompt, logits, n_prompt >= 256 ? 256 : 0) != GEM_OK)
        goto out;
    const double t_prefill = cli_now() - t0;
    t0 = cli_now();
    /* the first token from the prompt's logits; with --json each step's logits come back for
     * its record, else the steps run through gem_session_greedy (on CUDA the logits left on
     * the device) */
    gen_stream gs = {tok, toks, 0, ignore_eos};
    for (int64_t k = 0; k < n_gen; k++) {
        int32_t top[10];
        cli_top10(logits, hp->n_vocab, top);
        json_t *t10 = json_array();
        for (int j = 0; j < 10; j++)
            json_array_append_new(t10,
                                  json_pack("[i, o]", top[j], gem_receipt_real(logits[top[j]])));
        json_array_append_new(steps, json_pack("{s:i, s:o}", "token", top[0], "top10", t10));
        if (gen_emit(&gs, top[0]) || k + 1 == n_gen)
            break;
        if (!json_path) {
            int32_t *out = malloc((size_t)(n_gen - 1) * sizeof *out);
            int64_t done = 0;
            st = out ? gem_session_greedy(s, top[0], n_gen - 1, out, &done, gen_emit, &gs)
                     : GEM_ERR_NOMEM;
            free(out);
            if (st != GEM_OK) {
                cli_error(CMD, "evaluating generated token %lld: %s", (long long)done,
                          gem_status_str(st));
                goto out;
            }
            break;
        }
        st = gem_session_eval(s, top[0], logits);
        if (st != GEM_OK) {
            cli_error(CMD, "evaluating generated token %lld: %s", (long long)k, gem_status_str(st));
            goto out;
        }
    }
    const int64_t made = gs.made;
    const double t_gen = cli_now() - t0;
    printf("\n");
    fflush(stdout); /* the text's end before the summary on stderr */
    /* the first token comes from the prompt's logits: the rate counts the decode steps */
    char gen_line[160];
    if (made > 1)
        snprintf(gen_line, sizeof gen_line,
                 "generated %lld tokens, %lld decode steps in %.3f s (%.2f tokens/s)",
                 (long long)made, (long long)(made - 1), t_gen, (double)(made - 1) / t_gen);
    else
        snprintf(gen_line, sizeof gen_line,
                 "generated %lld token%s from the prompt's logits (no decode step to time)",
                 (long long)made, made == 1 ? "" : "s");
    cli_progress("%s: prompt %lld tokens in %.3f s (%.2f tokens/s), %s, attn %s%s, %s", CMD,
                 (long long)n_prompt, t_prefill, (double)n_prompt / t_prefill, gen_line,
                 route == GEM_ROUTE_FUSED ? "fused" : "baseline", k_from_v ? " (K from V)" : "",
                 gem_session_describe(s));
    if (json_path) {
        json_t *pt = json_array();
        for (int64_t i = 0; i < n_prompt; i++)
            json_array_append_new(pt, json_integer(ids[i]));
        json_t *doc = json_pack(
            "{s:s, s:s, s:s, s:I, s:o, s:O, s:O}", "schema", "gem.generate.v1", "model", model_path,
            "attn", route == GEM_ROUTE_FUSED ? "fused" : "baseline", "threads", (json_int_t)threads,
            "prompt_tokens", pt, "tokens", toks, "steps", steps);
        json_object_set_new(doc, "kv_dtype", json_string(gem_dtype_name(kv_dtype)));
        gem_kv_memory mem;
        gem_session_kv_memory(s, &mem);
        json_object_set_new(doc, "k_from_v", json_boolean(k_from_v));
        json_object_set_new(doc, "kv_cache",
                            json_pack("{s:I, s:I, s:I}", "held_bytes", (json_int_t)mem.held,
                                      "saved_bytes", (json_int_t)mem.saved, "v_only_layers",
                                      (json_int_t)mem.v_only_layers));
        json_object_set_new(doc, "timing",
                            json_pack("{s:f, s:f, s:I}", "prefill_s", t_prefill, "generate_s",
                                      t_gen, "generated", (json_int_t)made));
        if (json_dump_file(doc, json_path, JSON_INDENT(1)) != 0) {
            cli_error(CMD, "cannot write %s", json_path);
            json_decref(doc);
            goto out;
        }
        json_decref(doc);
    }
    rc = 0;
out:
    json_decref(steps);
    json_decref(toks);
    free(ids);
    free(logits);
    gem_session_free(s);
    gem_model_free(m);
    return rc;
}
