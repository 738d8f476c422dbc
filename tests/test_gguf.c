/*
 * GGUF reader, writer and element types: hand-made quant blocks with known
 * values, half/bfloat16 conversion, quantize/dequantize round trips, a file
 * written and read back, and malformed files (every truncation, bad magic and
 * version, bad alignment, overlapping or out-of-file tensors, unknown types,
 * duplicate keys and names) that must answer a status and one line.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gem/gguf.h"
#include "tcheck.h"

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void test_half(void)
{
    TCHECK(gem_gguf_f16_to_f32(0x3C00) == 1.0f);
    TCHECK(gem_gguf_f16_to_f32(0xC000) == -2.0f);
    TCHECK(gem_gguf_f16_to_f32(0x3800) == 0.5f);
    TCHECK(gem_gguf_f16_to_f32(0x7BFF) == 65504.0f);
    TCHECK(gem_gguf_f16_to_f32(0x0001) == 0x1p-24f);
    TCHECK(gem_gguf_f16_to_f32(0x03FF) == 1023.0f * 0x1p-24f);
    TCHECK(isinf(gem_gguf_f16_to_f32(0x7C00)) && gem_gguf_f16_to_f32(0xFC00) < 0);
    TCHECK(isnan(gem_gguf_f16_to_f32(0x7E00)));
    TCHECK(gem_gguf_bf16_to_f32(0x3F80) == 1.0f);
    TCHECK(gem_gguf_bf16_to_f32(0xC040) == -3.0f);
    /* Every finite half survives half -> float -> half. */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = gem_gguf_f16_to_f32((uint16_t)h);
        if (isnan(f))
            continue;
        bad += gem_gguf_f32_to_f16(f) != h;
    }
    TCHECK_EQ_I64(bad, 0);
    TCHECK(gem_gguf_f32_to_f16(65520.0f) == 0x7C00);        /* rounds to infinity */
    TCHECK(gem_gguf_f32_to_f16(1.0f + 0x1p-11f) == 0x3C00); /* tie to even */
    TCHECK(gem_gguf_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3C02);
    TCHECK(gem_gguf_f32_to_bf16(1.0f) == 0x3F80);
    TCHECK(gem_gguf_f32_to_bf16(1.0f + 0x1p-8f) == 0x3F80); /* tie to even */
}

static void test_q8_0(void)
{
    uint8_t b[34];
    put16(b, 0x3800); /* d = 0.5 */
    for (int j = 0; j < 32; j++)
        b[2 + j] = (uint8_t)(int8_t)(j * 8 - 127);
    float y[32];
    TCHECK_STATUS(gem_gguf_dequant(GEM_GGUF_Q8_0, b, y, 32), GEM_OK);
    int bad = 0;
    for (int j = 0; j < 32; j++)
        bad += y[j] != (float)(j * 8 - 127) * 0.5f;
    TCHECK_EQ_I64(bad, 0);
    TCHECK_STATUS(gem_gguf_dequant(GEM_GGUF_Q8_0, b, y, 31), GEM_ERR_SHAPE);
}

static void test_q4_0(void)
{
    uint8_t b[18];
    put16(b, 0x4000); /* d = 2 */
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    TCHECK_STATUS(gem_gguf_dequant(GEM_GGUF_Q4_0, b, y, 32), GEM_OK);
    int bad = 0;
    for (int j = 0; j < 16; j++) {
        bad += y[j] != (float)(j - 8) * 2.0f;
        bad += y[j + 16] != (float)(15 - j - 8) * 2.0f;
    }
    TCHECK_EQ_I64(bad, 0);
}

/* Q4_K with every sub-block's 6-bit scale and min chosen so that the high
 * bits of sub-blocks 4..7 are exercised. Bytes packed here by the layout rule:
 * bytes 0-3: scale j (6 bits) | high 2 bits of scale j+4; bytes 4-7: min j |
 * high 2 bits of min j+4; bytes 8-11: low 4 bits of scale j+4 | low 4 bits of
 * min j+4 << 4. */
static void test_q4_k(void)
{
    const int sc[8] = {1, 2, 3, 63, 17, 33, 48, 5}, mn[8] = {0, 1, 62, 4, 20, 40, 63, 7};
    uint8_t b[144];
    memset(b, 0, sizeof b);
    put16(b, 0x3C00);     /* d = 1 */
    put16(b + 2, 0x3400); /* dmin = 0.25 */
    for (int j = 0; j < 4; j++) {
        b[4 + j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        b[8 + j] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
        b[12 + j] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
    /* element e: sub-block s = e / 32, chunk c = e / 64, nibble = low for even s */
    int qv[256];
    for (int e = 0; e < 256; e++) {
        qv[e] = (e * 7 + 3) % 16;
        int c = e / 64, l = e % 32, hi = (e / 32) % 2;
        b[16 + 32 * c + l] |= (uint8_t)(hi ? qv[e] << 4 : qv[e]);
    }
    float y[256];
    TCHECK_STATUS(gem_gguf_dequant(GEM_GGUF_Q4_K, b, y, 256), GEM_OK);
    int bad = 0;
    for (int e = 0; e < 256; e++) {
        int s = e / 32;
        float want = (1.0f * (float)sc[s]) * (float)qv[e] - 0.25f * (float)mn[s];
        bad += y[e] != want;
    }
    TCHECK_EQ_I64(bad, 0);
}

/* Q6_K: element e of a 128-element half h: l = e % 32, quarter k = (e % 128) / 32;
 * low 4 bits in ql[64h + l + 32*(k&1)] (low nibble for k < 2), high 2 bits in
 * qh[32h + l] at bit 2k; scale of group e / 16. */
static void test_q6_k(void)
{
    uint8_t b[210];
    memset(b, 0, sizeof b);
    int qv[256];
    int8_t sc[16];
    for (int g = 0; g < 16; g++)
        sc[g] = (int8_t)(g * 9 - 70);
    for (int e = 0; e < 256; e++) {
        qv[e] = (e * 13 + 5) % 64;
        int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
        uint8_t *ql = b + 64 * h + l + 32 * (k & 1);
        *ql |= (uint8_t)(k < 2 ? (qv[e] & 15) : (qv[e] & 15) << 4);
        b[128 + 32 * h + l] |= (uint8_t)((qv[e] >> 4) << (2 * k));
    }
    memcpy(b + 192, sc, 16);
    put16(b + 208, 0x3000); /* d = 0.125 */
    float y[256];
    TCHECK_STATUS(gem_gguf_dequant(GEM_GGUF_Q6_K, b, y, 256), GEM_OK);
    int bad = 0;
    for (int e = 0; e < 256; e++) {
        float want = 0.125f * (float)sc[e / 16] * (float)(qv[e] - 32);
        bad += y[e] != want;
    }
    TCHECK_EQ_I64(bad, 0);
}

/* Quantize then dequantize: the error stays within each format's step. */
static void test_roundtrip(void)
{
    static const struct {
        gem_gguf_type t;
        double tol;
    } cases[] = {{GEM_GGUF_F32, 0.0},   {GEM_GGUF_F16, 1e-3}, {GEM_GGUF_BF16, 8e-3},
                 {GEM_GGUF_Q8_0, 1e-2}, {GEM_GGUF_Q4_0, 0.2}, {GEM_GGUF_Q4_K, 0.15},
                 {GEM_GGUF_Q6_K, 0.05}};
    enum { N = 512 };
    float x[N], y[N];
    uint8_t buf[N * 4];
    for (int i = 0; i < N; i++)
        x[i] = sinf((float)i * 0.37f) * (1.0f + (float)(i % 7) * 0.1f);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t rb;
        TCHECK_STATUS(gem_gguf_row_bytes(cases[c].t, N, &rb), GEM_OK);
        TCHECK(rb <= sizeof buf);
        TCHECK_STATUS(gem_gguf_quantize(cases[c].t, x, buf, N), GEM_OK);
        TCHECK_STATUS(gem_gguf_dequant(cases[c].t, buf, y, N), GEM_OK);
        double worst = 0;
        for (int i = 0; i < N; i++)
            worst = fmax(worst, fabs((double)y[i] - x[i]));
        if (!TCHECK(worst <= cases[c].tol))
            fprintf(stderr, "     %s: max error %g\n", gem_gguf_type_name(cases[c].t), worst);
    }
    size_t rb;
    TCHECK_STATUS(gem_gguf_row_bytes(GEM_GGUF_Q4_K, 256, &rb), GEM_OK);
    TCHECK_EQ_I64(rb, 144);
    TCHECK_STATUS(gem_gguf_row_bytes(GEM_GGUF_Q6_K, 512, &rb), GEM_OK);
    TCHECK_EQ_I64(rb, 420);
    TCHECK_STATUS(gem_gguf_row_bytes(GEM_GGUF_Q4_K, 64, &rb), GEM_ERR_SHAPE);
    TCHECK_STATUS(gem_gguf_row_bytes(13, 256, &rb), GEM_ERR_UNSUPPORTED);
}

/* ---- files ------------------------------------------------------------------------ */

static int fill_pattern(void *user, int64_t index, void *dst, size_t bytes)
{
    (void)user;
    for (size_t i = 0; i < bytes; i++)
        ((uint8_t *)dst)[i] = (uint8_t)(index * 31 + (int64_t)i);
    return 0;
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static void test_file(void)
{
    const char *path = "test_gguf_tmp.gguf";
    gem_gguf_writer *w;
    TCHECK_STATUS(gem_gguf_writer_create(&w), GEM_OK);
    TCHECK_STATUS(gem_gguf_writer_str(w, "general.architecture", "gemma4"), GEM_OK);
    TCHECK_STATUS(gem_gguf_writer_u32(w, "gemma4.block_count", 6), GEM_OK);
    TCHECK_STATUS(gem_gguf_writer_f32(w, "gemma4.rope.freq_base", 1e6f), GEM_OK);
    TCHECK_STATUS(gem_gguf_writer_u32(w, "gemma4.block_count", 7), GEM_ERR_PARAM);
    const int32_t kvh[3] = {16, 16, 4};
    const uint8_t swa[3] = {1, 1, 0};
    TCHECK_STATUS(gem_gguf_writer_arr(w, "gemma4.attention.head_count_kv", GEM_GGUF_V_I32, kvh, 3),
                  GEM_OK);
    TCHECK_STATUS(
        gem_gguf_writer_arr(w, "gemma4.attention.sliding_window_pattern", GEM_GGUF_V_BOOL, swa, 3),
        GEM_OK);
    const char *toks[3] = {"<pad>", "a\xe2\x96\x81", "b"};
    const uint64_t lens[3] = {5, 4, 1};
    TCHECK_STATUS(gem_gguf_writer_arr_str(w, "tokenizer.ggml.tokens", toks, lens, 3), GEM_OK);
    const int64_t ne1[2] = {256, 3}, ne2[1] = {5}, ne3[2] = {64, 2};
    TCHECK_STATUS(gem_gguf_writer_tensor(w, "a", GEM_GGUF_Q4_K, 2, ne1), GEM_OK);
    TCHECK_STATUS(gem_gguf_writer_tensor(w, "b", GEM_GGUF_F32, 1, ne2), GEM_OK);
    TCHECK_STATUS(gem_gguf_writer_tensor(w, "c", GEM_GGUF_Q8_0, 2, ne3), GEM_OK);
    TCHECK_STATUS(gem_gguf_writer_tensor(w, "c", GEM_GGUF_Q8_0, 2, ne3), GEM_ERR_PARAM);
    TCHECK_STATUS(gem_gguf_writer_tensor(w, "d", GEM_GGUF_Q4_K, 2, ne3), GEM_ERR_SHAPE);
    char err[GEM_GGUF_ERR_LEN];
    TCHECK_STATUS(gem_gguf_writer_write(w, path, fill_pattern, NULL, err, sizeof err), GEM_OK);
    gem_gguf_writer_free(w);

    gem_gguf *g = NULL;
    TCHECK_STATUS(gem_gguf_open(path, &g, err, sizeof err), GEM_OK);
    if (!g)
        return;
    TCHECK_EQ_I64(gem_gguf_n_kv(g), 6);
    TCHECK_EQ_I64(gem_gguf_n_tensors(g), 3);
    int64_t v = 0;
    double f = 0;
    gem_gguf_str s;
    TCHECK_STATUS(gem_gguf_get_i64(g, "gemma4.block_count", &v, err, sizeof err), GEM_OK);
    TCHECK_EQ_I64(v, 6);
    TCHECK_STATUS(gem_gguf_get_f64(g, "gemma4.rope.freq_base", &f, err, sizeof err), GEM_OK);
    TCHECK(f == 1e6);
    TCHECK_STATUS(gem_gguf_get_str(g, "general.architecture", &s, err, sizeof err), GEM_OK);
    TCHECK(gem_gguf_str_eq(s, "gemma4"));
    TCHECK_STATUS(gem_gguf_get_i64(g, "missing", &v, err, sizeof err), GEM_ERR_RANGE);
    TCHECK(strstr(err, "missing") != NULL);
    TCHECK_STATUS(gem_gguf_get_f64(g, "gemma4.block_count", &f, err, sizeof err), GEM_ERR_FORMAT);
    TCHECK_STATUS(gem_gguf_get_i64(g, "gemma4.attention.head_count_kv", &v, err, sizeof err),
                  GEM_ERR_FORMAT);
    const gem_gguf_kv *kv = gem_gguf_find(g, "gemma4.attention.head_count_kv");
    TCHECK(kv && kv->n == 3);
    TCHECK_STATUS(gem_gguf_arr_i64(kv, 2, &v), GEM_OK);
    TCHECK_EQ_I64(v, 4);
    TCHECK_STATUS(gem_gguf_arr_i64(kv, 3, &v), GEM_ERR_RANGE);
    kv = gem_gguf_find(g, "gemma4.attention.sliding_window_pattern");
    TCHECK_STATUS(gem_gguf_arr_i64(kv, 1, &v), GEM_OK);
    TCHECK_EQ_I64(v, 1);
    kv = gem_gguf_find(g, "tokenizer.ggml.tokens");
    gem_gguf_str strs[3];
    TCHECK_STATUS(gem_gguf_arr_strings(kv, strs, 3), GEM_OK);
    TCHECK(gem_gguf_str_eq(strs[1], "a\xe2\x96\x81") && gem_gguf_str_eq(strs[2], "b"));
    const gem_gguf_tensor *t = gem_gguf_find_tensor(g, "c");
    TCHECK(t && t->type == GEM_GGUF_Q8_0 && t->ne[0] == 64 && t->ne[1] == 2 && t->bytes == 136);
    TCHECK(t && ((const uint8_t *)t->data)[5] == (uint8_t)(2 * 31 + 5));
    TCHECK(t && t->offset % 32 == 0);
    t = gem_gguf_find_tensor(g, "a");
    TCHECK(t && t->bytes == 3 * 144 && ((const uint8_t *)t->data)[0] == 0);
    TCHECK(gem_gguf_find_tensor(g, "zz") == NULL);
    gem_gguf_close(g);

    /* Every truncation of the file must fail cleanly with one line, except the
     * 24 bytes of padding after the last tensor (136 bytes padded to 160). */
    size_t n = 0;
    uint8_t *bytes = slurp(path, &n);
    TCHECK(bytes != NULL);
    if (!bytes)
        return;
    int wrong = 0;
    for (size_t len = 0; len < n; len++) {
        gem_gguf *h = NULL;
        gem_status st = gem_gguf_open_buffer(bytes, len, &h, err, sizeof err);
        int ok = len >= n - 24;
        if (ok != (st == GEM_OK) || ok != (h != NULL) || (!ok && (!err[0] || strchr(err, '\n'))))
            wrong++;
        gem_gguf_close(h);
    }
    TCHECK_EQ_I64(wrong, 0);

    /* Targeted corruptions of the header. Offsets: magic 0, version 4, n_tensors 8. */
    uint8_t *m = malloc(n);
    struct {
        size_t at;
        uint8_t val;
        gem_status want;
        const char *msg;
    } bad[] = {
        {0, 'X', GEM_ERR_FORMAT, "magic"},
        {4, 2, GEM_ERR_UNSUPPORTED, "version 2"},
        {4, 9, GEM_ERR_FORMAT, "version 9"},
        {15, 0x7F, GEM_ERR_FORMAT, "tensor records cannot fit"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        memcpy(m, bytes, n);
        m[bad[k].at] = bad[k].val;
        gem_gguf *h = NULL;
        TCHECK_STATUS(gem_gguf_open_buffer(m, n, &h, err, sizeof err), bad[k].want);
        if (!TCHECK(strstr(err, bad[k].msg) != NULL))
            fprintf(stderr, "     message: %s\n", err);
        gem_gguf_close(h);
    }
    free(m);
    free(bytes);
    remove(path);
}

/* A tiny hand-built file: header, optional kv, tensors given as raw records. */
typedef struct buf {
    uint8_t b[4096];
    size_t n;
} buf;
static void b_bytes(buf *b, const void *p, size_t n)
{
    memcpy(b->b + b->n, p, n);
    b->n += n;
}
static void b_u32(buf *b, uint32_t v) { b_bytes(b, &v, 4); }
static void b_u64(buf *b, uint64_t v) { b_bytes(b, &v, 8); }
static void b_str(buf *b, const char *s)
{
    b_u64(b, strlen(s));
    b_bytes(b, s, strlen(s));
}
static void b_tensor(buf *b, const char *name, uint32_t type, int64_t ne0, uint64_t off)
{
    b_str(b, name);
    b_u32(b, 1);
    b_u64(b, (uint64_t)ne0);
    b_u32(b, type);
    b_u64(b, off);
}
static void b_head(buf *b, uint64_t nt, uint64_t nkv)
{
    b->n = 0;
    b_bytes(b, "GGUF", 4);
    b_u32(b, 3);
    b_u64(b, nt);
    b_u64(b, nkv);
}
static void b_data(buf *b, size_t bytes)
{
    while (b->n % 32)
        b->b[b->n++] = 0;
    memset(b->b + b->n, 0, bytes);
    b->n += bytes;
}

static void expect(buf *b, gem_status want, const char *msg)
{
    char err[GEM_GGUF_ERR_LEN];
    gem_gguf *g = NULL;
    gem_status st = gem_gguf_open_buffer(b->b, b->n, &g, err, sizeof err);
    if (!tcheck_record_(st == want && (want != GEM_OK) == (g == NULL), __FILE__, __LINE__, msg))
        fprintf(stderr, "     got %s: %s\n", gem_status_name(st), err);
    else if (want != GEM_OK && !tcheck_record_(strstr(err, msg) != NULL, __FILE__, __LINE__, msg))
        fprintf(stderr, "     message: %s\n", err);
    gem_gguf_close(g);
}

static void test_malformed(void)
{
    buf b;
    b_head(&b, 2, 0);
    b_tensor(&b, "x", GEM_GGUF_F32, 8, 0);
    b_tensor(&b, "y", GEM_GGUF_F32, 8, 32);
    b_data(&b, 64);
    expect(&b, GEM_OK, "two tensors");

    b_head(&b, 2, 0);
    b_tensor(&b, "x", GEM_GGUF_F32, 16, 0);
    b_tensor(&b, "y", GEM_GGUF_F32, 8, 32);
    b_data(&b, 64);
    expect(&b, GEM_ERR_FORMAT, "overlap");

    b_head(&b, 1, 0);
    b_tensor(&b, "x", GEM_GGUF_F32, 8, 64);
    b_data(&b, 64);
    expect(&b, GEM_ERR_FORMAT, "past the end of the file");

    b_head(&b, 1, 0);
    b_tensor(&b, "x", GEM_GGUF_F32, 8, 4);
    b_data(&b, 64);
    expect(&b, GEM_ERR_FORMAT, "not a multiple of the alignment");

    b_head(&b, 1, 0);
    b_tensor(&b, "x", 13 /* q5_k */, 256, 0);
    b_data(&b, 256);
    expect(&b, GEM_ERR_UNSUPPORTED, "which gem does not read");

    b_head(&b, 1, 0);
    b_tensor(&b, "x", GEM_GGUF_Q8_0, 40, 0);
    b_data(&b, 256);
    expect(&b, GEM_ERR_FORMAT, "not a multiple of the q8_0 block");

    b_head(&b, 2, 0);
    b_tensor(&b, "x", GEM_GGUF_F32, 8, 0);
    b_tensor(&b, "x", GEM_GGUF_F32, 8, 32);
    b_data(&b, 64);
    expect(&b, GEM_ERR_FORMAT, "duplicate tensor name");

    b_head(&b, 1, 0);
    b_str(&b, "x");
    b_u32(&b, 5);
    b_data(&b, 64);
    expect(&b, GEM_ERR_FORMAT, "5 dimensions");

    b_head(&b, 1, 0);
    b_str(&b, "x");
    b_u32(&b, 2);
    b_u64(&b, 1ull << 30);
    b_u64(&b, 1ull << 30);
    b_u32(&b, 0);
    b_u64(&b, 0);
    b_data(&b, 64);
    expect(&b, GEM_ERR_FORMAT, "past the end of the file");

    b_head(&b, 1, 0);
    b_str(&b, "x");
    b_u32(&b, 3);
    b_u64(&b, 1ull << 32);
    b_u64(&b, 1ull << 32);
    b_u64(&b, 1ull << 32);
    b_u32(&b, 0);
    b_u64(&b, 0);
    b_data(&b, 64);
    expect(&b, GEM_ERR_FORMAT, "element count overflows");

    b_head(&b, 0, 2);
    b_str(&b, "k");
    b_u32(&b, GEM_GGUF_V_U32);
    b_u32(&b, 1);
    b_str(&b, "k");
    b_u32(&b, GEM_GGUF_V_U32);
    b_u32(&b, 2);
    expect(&b, GEM_ERR_FORMAT, "duplicate key");

    b_head(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, GEM_GGUF_V_BOOL);
    b.b[b.n++] = 2;
    expect(&b, GEM_ERR_FORMAT, "neither 0 nor 1");

    b_head(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, 99);
    b_u32(&b, 0);
    expect(&b, GEM_ERR_FORMAT, "unknown value type");

    b_head(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, GEM_GGUF_V_ARRAY);
    b_u32(&b, GEM_GGUF_V_ARRAY);
    b_u64(&b, 1);
    expect(&b, GEM_ERR_FORMAT, "arrays of arrays");

    b_head(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, GEM_GGUF_V_ARRAY);
    b_u32(&b, GEM_GGUF_V_STRING);
    b_u64(&b, 1ull << 60);
    expect(&b, GEM_ERR_FORMAT, "declares");

    b_head(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, GEM_GGUF_V_STRING);
    b_u64(&b, 1ull << 62);
    expect(&b, GEM_ERR_FORMAT, "truncated");

    b_head(&b, 1, 1);
    b_str(&b, "general.alignment");
    b_u32(&b, GEM_GGUF_V_U32);
    b_u32(&b, 24);
    b_tensor(&b, "x", GEM_GGUF_F32, 8, 0);
    b_data(&b, 64);
    expect(&b, GEM_ERR_FORMAT, "not a power of two");

    b_head(&b, 1, 1);
    b_str(&b, "general.alignment");
    b_u32(&b, GEM_GGUF_V_U32);
    b_u32(&b, 64);
    b_tensor(&b, "x", GEM_GGUF_F32, 8, 32);
    b_data(&b, 128);
    expect(&b, GEM_ERR_FORMAT, "not a multiple of the alignment 64");

    b_head(&b, 1, 0);
    b_tensor(&b, "", GEM_GGUF_F32, 8, 0);
    b_data(&b, 64);
    expect(&b, GEM_ERR_FORMAT, "name length 0");

    gem_gguf *g = NULL;
    char err[GEM_GGUF_ERR_LEN];
    TCHECK_STATUS(gem_gguf_open("/nonexistent/x.gguf", &g, err, sizeof err), GEM_ERR_IO);
    TCHECK(g == NULL && err[0]);
}

/* A tensor left as a hole (gem_gguf_writer_hole): not produced, read back as zeros, the file
 * as long as with its bytes; holes in the middle and at the end; a bad index refused. */
static int fill_counting(void *user, int64_t index, void *dst, size_t bytes)
{
    ((int *)user)[index]++;
    return fill_pattern(NULL, index, dst, bytes);
}

static void test_holes(void)
{
    const char *full = "test_gguf_full.gguf", *holes = "test_gguf_holes.gguf";
    const int64_t ne[2] = {64, 4};
    char err[GEM_GGUF_ERR_LEN];
    size_t n_full = 0, n_holes = 0;
    for (int pass = 0; pass < 2; pass++) {
        gem_gguf_writer *w = NULL;
        TCHECK_STATUS(gem_gguf_writer_create(&w), GEM_OK);
        if (!w)
            return;
        TCHECK_STATUS(gem_gguf_writer_u32(w, "k", 1), GEM_OK);
        TCHECK_STATUS(gem_gguf_writer_tensor(w, "a", GEM_GGUF_Q8_0, 2, ne), GEM_OK);
        TCHECK_STATUS(gem_gguf_writer_tensor(w, "b", GEM_GGUF_F32, 2, ne), GEM_OK);
        TCHECK_STATUS(gem_gguf_writer_tensor(w, "c", GEM_GGUF_Q8_0, 2, ne), GEM_OK);
        int calls[3] = {0, 0, 0};
        if (pass == 1) {
            TCHECK_STATUS(gem_gguf_writer_hole(w, 0), GEM_OK);
            TCHECK_STATUS(gem_gguf_writer_hole(w, 2), GEM_OK);
            TCHECK_STATUS(gem_gguf_writer_hole(w, 3), GEM_ERR_RANGE);
            TCHECK_STATUS(gem_gguf_writer_hole(w, -1), GEM_ERR_RANGE);
            TCHECK_STATUS(gem_gguf_writer_hole(NULL, 0), GEM_ERR_NULL);
        }
        TCHECK_STATUS(gem_gguf_writer_write(w, pass ? holes : full, fill_counting, calls, err,
                                            sizeof err),
                      GEM_OK);
        gem_gguf_writer_free(w);
        TCHECK(calls[0] == !pass && calls[1] == 1 && calls[2] == !pass);
    }
    uint8_t *a = slurp(full, &n_full), *b = slurp(holes, &n_holes);
    TCHECK(a && b && n_full == n_holes);
    gem_gguf *g = NULL;
    TCHECK_STATUS(gem_gguf_open(holes, &g, err, sizeof err), GEM_OK);
    if (g) {
        const gem_gguf_tensor *ta = gem_gguf_find_tensor(g, "a"), *tb = gem_gguf_find_tensor(g, "b"),
                              *tc = gem_gguf_find_tensor(g, "c");
        TCHECK(ta && tb && tc);
        int zero_a = 1, zero_c = 1, same_b = 1;
        for (size_t i = 0; ta && i < ta->bytes; i++)
            zero_a &= ((const uint8_t *)ta->data)[i] == 0;
        for (size_t i = 0; tc && i < tc->bytes; i++)
            zero_c &= ((const uint8_t *)tc->data)[i] == 0;
        for (size_t i = 0; tb && i < tb->bytes; i++)
            same_b &= ((const uint8_t *)tb->data)[i] == (uint8_t)(1 * 31 + (int64_t)i);
        TCHECK(zero_a && zero_c && same_b);
        gem_gguf_close(g);
    }
    free(a);
    free(b);
    remove(full);
    remove(holes);
}

int main(void)
{
    test_half();
    test_q8_0();
    test_q4_0();
    test_q4_k();
    test_q6_k();
    test_roundtrip();
    test_file();
    test_holes();
    test_malformed();
    return tcheck_summary("test_gguf");
}
