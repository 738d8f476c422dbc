/*
 * The gemma4 tokenizer on the vocabulary of the synthetic tiny model: round
 * trips (text -> ids -> text) over ASCII, UTF-8 that falls back to bytes,
 * newline runs and control tokens; merges applied by rank; BOS; the synthetic
 * file's bytes are a pure function of the spec (written twice, same digest).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gem/check.h"
#include "gem/model.h"
#include "tcheck.h"

static int32_t id_of(const gem_tokenizer *t, const char *text)
{
    for (int32_t i = 0; i < gem_tokenizer_n_vocab(t); i++)
        if (gem_gguf_str_eq(gem_token_text(t, i), text))
            return i;
    return -1;
}

/* Decodes ids to text (NUL-terminated) into out (cap). */
static void detok(const gem_tokenizer *t, const int32_t *ids, int64_t n, char *out, size_t cap)
{
    size_t len = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t pl = 0;
        if (gem_token_piece(t, ids[i], out + len, cap - len - 1, &pl) == GEM_OK)
            len += pl;
    }
    out[len] = 0;
}

static void roundtrip(const gem_tokenizer *t, const char *text)
{
    int32_t ids[512];
    int64_t n = 0;
    TCHECK_STATUS(gem_tokenize(t, text, 0, ids, 512, &n), GEM_OK);
    char back[2048];
    detok(t, ids, n, back, sizeof back);
    if (!TCHECK(strcmp(back, text) == 0))
        fprintf(stderr, "     '%s' came back as '%s'\n", text, back);
}

int main(void)
{
    const char *path = "test_tokenizer_tmp.gguf", *path2 = "test_tokenizer_tmp2.gguf";
    gem_synth_spec spec;
    TCHECK_STATUS(gem_synth_preset("tiny", &spec), GEM_OK);
    char err[256];
    TCHECK_STATUS(gem_synth_write(&spec, path, err, sizeof err), GEM_OK);
    TCHECK_STATUS(gem_synth_write(&spec, path2, err, sizeof err), GEM_OK);
    char h1[65], h2[65];
    TCHECK_STATUS(gem_sha256_file_hex(path, h1), GEM_OK);
    TCHECK_STATUS(gem_sha256_file_hex(path2, h2), GEM_OK);
    TCHECK(strcmp(h1, h2) == 0);
    remove(path2);

    gem_gguf *g = NULL;
    TCHECK_STATUS(gem_gguf_open(path, &g, err, sizeof err), GEM_OK);
    gem_tokenizer *t = NULL;
    TCHECK_STATUS(gem_tokenizer_load(g, &t, err, sizeof err), GEM_OK);
    if (!t)
        return tcheck_summary("test_tokenizer");
    TCHECK_EQ_I64(gem_tokenizer_n_vocab(t), 512);
    TCHECK_EQ_I64(gem_tokenizer_bos(t), 2);
    TCHECK_EQ_I64(gem_tokenizer_eos(t), 1);
    TCHECK(gem_tokenizer_is_eog(t, 1) && gem_tokenizer_is_eog(t, id_of(t, "<turn|>")));
    TCHECK(!gem_tokenizer_is_eog(t, id_of(t, "a")));

    roundtrip(t, "The quick brown fox jumps over the lazy dog.");
    roundtrip(t, "  leading and trailing spaces  ");
    roundtrip(t, "line one\nline two\n\nline four\n\n\n");
    roundtrip(t, "caf\xc3\xa9 \xe2\x82\xac 100 \xf0\x9f\x98\x80!");
    roundtrip(t, "<mask> is user-defined");
    roundtrip(t, "");

    int32_t ids[64];
    int64_t n = 0;
    /* BOS, then " the " merged into one token by rank. */
    TCHECK_STATUS(gem_tokenize(t, "in the sun", 1, ids, 64, &n), GEM_OK);
    TCHECK(n >= 2 && ids[0] == 2);
    int32_t the = id_of(t, "\xe2\x96\x81the\xe2\x96\x81");
    TCHECK(the >= 0);
    int found = 0;
    for (int64_t i = 0; i < n; i++)
        found |= ids[i] == the;
    TCHECK(found);
    /* A control token in the text is that token; its piece is empty. */
    TCHECK_STATUS(gem_tokenize(t, "a<|turn>b", 0, ids, 64, &n), GEM_OK);
    TCHECK_EQ_I64(n, 3);
    TCHECK_EQ_I64(ids[1], id_of(t, "<|turn>"));
    TCHECK_EQ_I64(ids[0], id_of(t, "a"));
    size_t pl = 99;
    char piece[16];
    TCHECK_STATUS(gem_token_piece(t, ids[1], piece, sizeof piece, &pl), GEM_OK);
    TCHECK_EQ_I64(pl, 0);
    /* Byte fallback: e-acute is not a token, its two bytes are. */
    TCHECK_STATUS(gem_tokenize(t, "\xc3\xa9", 0, ids, 64, &n), GEM_OK);
    TCHECK_EQ_I64(n, 2);
    TCHECK_EQ_I64(ids[0], id_of(t, "<0xC3>"));
    TCHECK_EQ_I64(ids[1], id_of(t, "<0xA9>"));
    /* Newline runs: "\n\n" is a token; "\n\n\n" is not, so it splits into characters. */
    TCHECK_STATUS(gem_tokenize(t, "\n\n", 0, ids, 64, &n), GEM_OK);
    TCHECK(n == 1 && ids[0] == id_of(t, "\n\n"));
    TCHECK_STATUS(gem_tokenize(t, "\n\n\n", 0, ids, 64, &n), GEM_OK);
    TCHECK(n == 3 && ids[0] == id_of(t, "\n"));
    /* Too small a buffer says how much is needed. */
    TCHECK_STATUS(gem_tokenize(t, "The quick brown fox", 1, ids, 2, &n), GEM_ERR_RANGE);
    TCHECK(n > 2);
    TCHECK_STATUS(gem_token_piece(t, 512, piece, sizeof piece, &pl), GEM_ERR_RANGE);
    TCHECK_STATUS(gem_token_piece(t, -1, piece, sizeof piece, &pl), GEM_ERR_RANGE);

    gem_tokenizer_free(t);
    gem_gguf_close(g);
    remove(path);
    return tcheck_summary("test_tokenizer");
}
