/*
 * Helpers of the model subcommands: top-10 selection, token-list and route
 * parsing, the --k-from-v route check and KV memory line, model loading with
 * one-line errors, and prefill with progress.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_model.h"
#include "gem/check.h"
#include "gem/file.h"

void cli_top10(const float *logits, int64_t n, int32_t ids[10])
{
    int k = 0;
    for (int64_t i = 0; i < n; i++) {
        /* insertion into the sorted top list: larger logit first, then lower id */
        if (k == 10 && !(logits[i] > logits[ids[9]]))
            continue;
        int j = k < 10 ? k++ : 9;
        while (j > 0 && logits[i] > logits[ids[j - 1]]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = (int32_t)i;
    }
}

int cli_parse_tokens(const char *cmd, const char *s, int64_t n_vocab, int32_t **ids, int64_t *n)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int64_t *tmp = malloc(cap * sizeof *tmp);
    int32_t *out = malloc(cap * sizeof *out);
    size_t got = 0;
    if (!tmp || !out || cli_parse_i64_list(s, 0, n_vocab - 1, tmp, cap, &got) != 0) {
        cli_error(cmd,
                  "--prompt-tokens '%.40s%s' is not a comma-separated list of token ids in "
                  "[0, %lld)",
                  s, strlen(s) > 40 ? "..." : "", (long long)n_vocab);
        free(tmp);
        free(out);
        return -1;
    }
    for (size_t i = 0; i < got; i++)
        out[i] = (int32_t)tmp[i];
    free(tmp);
    *ids = out;
    *n = (int64_t)got;
    return 0;
}

int cli_parse_attn(const char *cmd, const char *s, gem_route *out)
{
    if (!strcmp(s, "baseline"))
        *out = GEM_ROUTE_BASELINE;
    else if (!strcmp(s, "fused"))
        *out = GEM_ROUTE_FUSED;
    else {
        cli_error(cmd, "--attn '%s' is neither 'baseline' nor 'fused'", s);
        return -1;
    }
    return 0;
}

int cli_parse_model_backend(const char *cmd, const char *s, gem_backend *out)
{
    if (!strcmp(s, "cpu"))
        *out = GEM_BACKEND_CPU;
    else if (!strcmp(s, "cuda"))
        *out = GEM_BACKEND_CUDA;
    else {
        cli_error(cmd, "--backend '%s' is neither 'cpu' nor 'cuda'", s);
        return -1;
    }
    return 0;
}

int cli_parse_random_weights(const char *cmd, const char *s, uint64_t *out)
{
    if (cli_parse_u64(s, out) || *out == 0) {
        cli_error(cmd, "--random-weights '%s' is not an unsigned integer >= 1", s);
        return -1;
    }
    return 0;
}

int cli_model_to_backend(const char *cmd, gem_model *m, gem_backend backend,
                         uint64_t random_seed)
{
    if (backend == GEM_BACKEND_CPU) {
        if (random_seed) {
            cli_error(cmd, "--random-weights generates the weights on the GPU: it needs "
                           "--backend cuda");
            return -1;
        }
        return 0;
    }
    char err[GEM_GGUF_ERR_LEN];
    double t0 = cli_now();
    cli_progress("%s: %s on the GPU", cmd,
                 random_seed ? "generating seeded random weights" : "putting the weights");
    gem_status st = gem_model_upload(m, random_seed, err, sizeof err);
    if (st != GEM_OK) {
        cli_error(cmd, "%s", err[0] ? err : gem_status_str(st));
        return -1;
    }
    cli_progress("%s: %.2f GB of weights on the GPU%s in %.2f s", cmd,
                 (double)gem_model_device_bytes(m) / 1e9,
                 random_seed ? " (random, from the seed)" : "", cli_now() - t0);
    return 0;
}

int cli_model_file_sha256(const char *path, char hex[65])
{
    gem_file_digest d;
    if (gem_file_digest_path(path, CLI_MODEL_MAX_DIGEST_BYTES, &d, NULL, 0) != GEM_OK)
        return -1;
    memcpy(hex, d.sha256, 65);
    return 0;
}

int cli_weights_sha256(const char *path, uint64_t random_seed, char hex[65])
{
    if (cli_model_file_sha256(path, hex))
        return -1;
    if (random_seed) {
        char tag[160];
        int n = snprintf(tag, sizeof tag, "gem-device-random-weights:%s:seed=%llu", hex,
                         (unsigned long long)random_seed);
        gem_sha256_hex(tag, (size_t)n, hex);
    }
    return 0;
}

int cli_check_k_from_v(const char *cmd, int k_from_v, gem_route route)
{
    if (k_from_v && route != GEM_ROUTE_FUSED) {
        cli_error(cmd, "--k-from-v rebuilds K inside the fused route; it cannot run with "
                       "--attn %s",
                  gem_route_name(route));
        return -1;
    }
    return 0;
}

void cli_kv_memory_line(const gem_session *s, char *buf, size_t cap)
{
    gem_kv_memory mem;
    if (gem_session_kv_memory(s, &mem) != GEM_OK) {
        snprintf(buf, cap, "KV caches unknown");
        return;
    }
    int n = snprintf(buf, cap, "KV caches %.1f MB", (double)mem.held / 1e6);
    if (mem.v_only_layers > 0 && n >= 0 && (size_t)n < cap) {
        /* doubles: the sum is only printed */
        const double explicit_bytes = (double)mem.held + (double)mem.saved;
        snprintf(buf + n, cap - (size_t)n,
                 " (K rebuilt from V in %lld full layers: %.1f MB saved, half of their caches; "
                 "%.1f MB with K stored)",
                 (long long)mem.v_only_layers, (double)mem.saved / 1e6, explicit_bytes / 1e6);
    }
}

int cli_packed_line(const gem_model *m, char *buf, size_t cap)
{
    const size_t b = gem_model_cpu_packed_bytes(m);
    if (cap)
        buf[0] = 0;
    if (!b)
        return -1;
    snprintf(buf, cap,
             "quantized matrices repacked for the CPU's integer products (%s): %.1f MB of host "
             "memory beside the file's mapping",
             gem_model_cpu_products_isa(), (double)b / 1e6);
    return 0;
}

int cli_load_model(const char *cmd, const char *path, gem_model **out)
{
    char err[GEM_GGUF_ERR_LEN];
    double t0 = cli_now();
    gem_status st = gem_model_load(path, out, err, sizeof err);
    if (st != GEM_OK) {
        cli_error(cmd, "%s: %s", path, err[0] ? err : gem_status_str(st));
        return -1;
    }
    const gem_hparams *hp = gem_model_hparams(*out);
    cli_progress("%s: loaded %s (%s: %lld layers, %lld full, hidden %lld, vocab %lld, %.1f MB of "
                 "weights per token) in %.2f s",
                 cmd, path, hp->name[0] ? hp->name : "gemma4", (long long)hp->n_layers,
                 (long long)hp->n_full_layers, (long long)hp->n_embd, (long long)hp->n_vocab,
                 (double)gem_model_weight_bytes_per_token(*out) / 1e6, cli_now() - t0);
    return 0;
}

gem_status cli_prefill(const char *cmd, gem_session *s, const int32_t *ids, int64_t n,
                       float *logits, int64_t every)
{
    double t0 = cli_now();
    for (int64_t i = 0; i < n; i++) {
        gem_status st = gem_session_eval(s, ids[i], i + 1 == n ? logits : NULL);
        if (st != GEM_OK) {
            cli_error(cmd, "evaluating prompt token %lld (id %d) at position %lld: %s",
                      (long long)i, ids[i], (long long)gem_session_pos(s), gem_status_str(st));
            return st;
        }
        if (every > 0 && ((i + 1) % every == 0 || i + 1 == n))
            cli_progress("%s: prefill %lld/%lld tokens, %.1f tokens/s", cmd, (long long)(i + 1),
                         (long long)n, (double)(i + 1) / (cli_now() - t0));
    }
    return GEM_OK;
}
