/*
 * gem synth: writes a seeded random-weight Gemma 4 GGUF in the layout llama.cpp's
 * converter writes (gem_synth_write), from a preset with optional overrides,
 * and prints its size and SHA-256.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_model.h"
#include "gem/check.h"
#include "gem/model.h"

#define CMD "synth"

static void help(void)
{
    printf("usage: gem synth --out FILE [options]\n\n"
           "Writes a random-weight Gemma 4 GGUF (keys, tensor names and shapes as llama.cpp's\n"
           "converter writes them for gemma4) whose bytes depend only on the options.\n\n"
           "options:\n"
           "  --preset P      tiny (default; 6 layers, hidden 64, 32 query heads, full layers\n"
           "                  4 KV heads x 512 with K = V, sliding 8 x 64, window 8),\n"
           "                  diff (60 layers in the 31B pattern, hidden 64, window 64),\n"
           "                  2gb (about 2 GB of Q8_0), 31b (the real dimensions, Q4_K)\n"
           "  --type T        weight type of every matrix: f32, f16, bf16, q8_0, q4_0, q4_k,\n"
           "                  q6_k; or mixed (all of them spread over the tensors); or q4_k_m\n"
           "                  (llama.cpp's Q4_K_M assignment: q4_k, but q6_k for the embedding,\n"
           "                  which the tied head reads, and for attn_v and ffn_down in the\n"
           "                  first and last eighth of their layers and every third between;\n"
           "                  general.file_type 15); matrices whose rows do not fit the block\n"
           "                  (256 for q4_k and q6_k) fall back to q8_0, then f32\n"
           "  --seed S        weight seed (default 1)\n"
           "  --layers N --embd N --ff N --vocab N --window N --heads N\n"
           "  --kv-swa N --kv-full N --dim-swa N --dim-full N --full-every N\n"
           "                  override the preset's dimensions\n"
           "  --context-length N\n"
           "                  the positions the file declares (default 131072)\n"
           "  --no-matrices   leave every matrix (the embedding too) out: holes that read as\n"
           "                  zero weights and take no disk space, for timing the real\n"
           "                  dimensions with weights generated on the GPU\n"
           "                  (gem profile / model-diff --backend cuda --random-weights S)\n"
           "  --out FILE      the file to write\n"
           "  -h, --help      this text\n");
}

typedef struct dim_opt {
    const char *opt;
    int64_t *dst;
    int64_t lo, hi;
} dim_opt;

int gem_cmd_synth(int argc, char **argv)
{
    const char *preset = "tiny", *out = NULL, *type = NULL;
    dim_opt dims[13];
    gem_synth_spec s;
    uint64_t seed = 1;
    int no_matrices = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--preset") && i + 1 < argc)
            preset = argv[i + 1];
    if (gem_synth_preset(preset, &s) != GEM_OK) {
        cli_error(CMD, "unknown preset '%s' (tiny, diff, 2gb, 31b)", preset);
        return 2;
    }
    size_t nd = 0;
#define D(o, f, lo, hi) dims[nd++] = (dim_opt){o, &s.f, lo, hi}
    D("--layers", n_layers, 1, GEM_MODEL_MAX_LAYERS);
    D("--embd", n_embd, 1, 1 << 20);
    D("--ff", n_ff, 1, 1 << 22);
    D("--vocab", n_vocab, 512, INT32_MAX);
    D("--window", window, 1, 1 << 24);
    D("--heads", n_head, 1, 4096);
    D("--kv-swa", n_head_kv_swa, 1, 4096);
    D("--kv-full", n_head_kv_full, 1, 4096);
    D("--dim-swa", head_dim_swa, 2, 1 << 16);
    D("--dim-full", head_dim_full, 2, 1 << 16);
    D("--full-every", full_every, 1, GEM_MODEL_MAX_LAYERS);
    D("--context-length", context_length, 1, INT32_MAX);
#undef D
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 0;
        }
        if (!strcmp(a, "--no-matrices")) {
            no_matrices = 1;
            continue;
        }
        if (i + 1 >= argc) {
            cli_error(CMD, "'%s' needs a value or is unknown (see --help)", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--preset"))
            continue;
        if (!strcmp(a, "--out")) {
            out = v;
            continue;
        }
        if (!strcmp(a, "--type")) {
            type = v;
            continue;
        }
        if (!strcmp(a, "--seed")) {
            if (cli_parse_u64(v, &seed)) {
                cli_error(CMD, "--seed '%s' is not an unsigned integer", v);
                return 2;
            }
            continue;
        }
        size_t k = 0;
        while (k < nd && strcmp(a, dims[k].opt))
            k++;
        if (k == nd) {
            cli_error(CMD, "unknown option '%s' (see --help)", a);
            return 2;
        }
        if (cli_parse_i64(v, dims[k].lo, dims[k].hi, dims[k].dst)) {
            cli_error(CMD, "%s '%s' is not an integer in [%lld, %lld]", a, v, (long long)dims[k].lo,
                      (long long)dims[k].hi);
            return 2;
        }
    }
    if (!out) {
        cli_error(CMD, "--out FILE is required (see --help)");
        return 2;
    }
    s.seed = seed;
    s.no_matrices = no_matrices;
    if (type) {
        gem_gguf_type t;
        if (!strcmp(type, "mixed"))
            s.type = GEM_SYNTH_MIXED;
        else if (!strcmp(type, "q4_k_m"))
            s.type = GEM_SYNTH_Q4_K_M;
        else if (gem_gguf_type_parse(type, &t) == GEM_OK)
            s.type = t;
        else {
            cli_error(CMD,
                      "--type '%s' is not one of f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, mixed, "
                      "q4_k_m",
                      type);
            return 2;
        }
    }
    char err[256];
    cli_progress("synth: writing %s (preset %s, %lld layers, hidden %lld%s)", out, preset,
                 (long long)s.n_layers, (long long)s.n_embd,
                 no_matrices ? ", matrices left out" : "");
    gem_status st = gem_synth_write(&s, out, err, sizeof err);
    if (st != GEM_OK) {
        cli_error(CMD, "%s: %s", out, err[0] ? err : gem_status_str(st));
        return 2;
    }
    char hex[65];
    if (cli_model_file_sha256(out, hex)) {
        cli_error(CMD, "%s: cannot read back the file", out);
        return 2;
    }
    printf("%s  %s\n", hex, out);
    return 0;
}
