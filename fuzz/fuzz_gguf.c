/*
 * libFuzzer harness for the GGUF reader and the model loader built on it.
 * Each input is a file: it must open or fail with a status and one line; an
 * opened file has every pair read with every typed getter, every string array
 * walked, the first row of every tensor dequantized, and the Gemma 4 loader
 * (hyperparameters, tensor shapes, tokenizer) run on it. No crash, no leak,
 * no undefined behaviour.
 *   build: cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang-14 -DGEM_FUZZ=ON \
 *            -DGEM_CUDA=OFF && cmake --build build-fuzz --target fuzz_gguf
 *   run:   build-fuzz/fuzz_gguf fuzz/corpus-gguf -max_total_time=300 -max_len=65536
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gem/gguf.h"
#include "gem/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[GEM_GGUF_ERR_LEN];
    gem_gguf *g = NULL;
    if (gem_gguf_open_buffer(data, size, &g, err, sizeof err) != GEM_OK) {
        if (!err[0] || memchr(err, '\n', strlen(err)))
            abort(); /* every failure says why, on one line */
        return 0;
    }
    for (int64_t i = 0; i < gem_gguf_n_kv(g); i++) {
        const gem_gguf_kv *kv = gem_gguf_kv_at(g, i);
        char key[128];
        size_t n = kv->key.len < sizeof key - 1 ? (size_t)kv->key.len : sizeof key - 1;
        memcpy(key, kv->key.ptr, n);
        key[n] = 0;
        int64_t iv;
        double fv;
        int bv;
        gem_gguf_str sv;
        gem_gguf_get_i64(g, key, &iv, err, sizeof err);
        gem_gguf_get_f64(g, key, &fv, err, sizeof err);
        gem_gguf_get_bool(g, key, &bv, err, sizeof err);
        gem_gguf_get_str(g, key, &sv, err, sizeof err);
        if (kv->type == GEM_GGUF_V_ARRAY) {
            if (kv->arr_type == GEM_GGUF_V_STRING) {
                gem_gguf_str *s = malloc((size_t)kv->n * sizeof *s + 1);
                if (s && gem_gguf_arr_strings(kv, s, kv->n) == GEM_OK) {
                    size_t sum = 0; /* touch the last byte of every string */
                    for (uint64_t j = 0; j < kv->n; j++)
                        sum += s[j].len ? (unsigned char)s[j].ptr[s[j].len - 1] : 0;
                    if (sum == (size_t)-1)
                        abort();
                }
                free(s);
            } else {
                for (uint64_t j = 0; j < kv->n && j < 64; j++) {
                    gem_gguf_arr_i64(kv, j, &iv);
                    gem_gguf_arr_f64(kv, j, &fv);
                }
            }
        }
    }
    for (int64_t i = 0; i < gem_gguf_n_tensors(g); i++) {
        const gem_gguf_tensor *t = gem_gguf_tensor_at(g, i);
        if (t->ne[0] > 4096)
            continue;
        float *row = malloc((size_t)t->ne[0] * sizeof *row);
        if (row)
            gem_gguf_dequant(t->type, t->data, row, t->ne[0]);
        free(row);
    }
    gem_model *m = NULL;
    if (gem_model_load_gguf(g, &m, err, sizeof err) == GEM_OK) {
        /* Tokenize a fixed text and decode it back: exercises the vocabulary. */
        int32_t ids[64];
        int64_t n_ids = 0;
        gem_tokenize(gem_model_tokenizer(m), "Hello world\n\n  x", 1, ids, 64, &n_ids);
        char piece[64];
        for (int64_t j = 0; j < n_ids && j < 64; j++)
            gem_token_piece(gem_model_tokenizer(m), ids[j], piece, sizeof piece, NULL);
        gem_model_free(m);
    } else if (!err[0] || memchr(err, '\n', strlen(err))) {
        abort();
    }
    gem_gguf_close(g);
    return 0;
}
