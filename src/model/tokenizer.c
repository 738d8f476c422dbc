/*
 * The gemma4 tokenizer: BPE over UTF-8 characters with merge ranks from
 * tokenizer.ggml.merges, spaces written as U+2581, byte fallback to <0xXX>
 * tokens, control and user-defined tokens matched in the text. It follows
 * llama.cpp's behaviour for tokenizer.ggml.model = "gemma4" (see
 * include/gem/model.h for the rules).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gem/model.h"

/* Open-addressing hash from a byte string (or a pair of them) to an int32. */
typedef struct hslot {
    uint64_t h;
    const char *a, *b; /* b NULL for single strings */
    uint32_t alen, blen;
    int32_t val;
    int used;
} hslot;

typedef struct hmap {
    hslot *s;
    uint64_t cap; /* power of two */
} hmap;

static uint64_t fnv(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}
static uint64_t hash2(const char *a, size_t an, const char *b, size_t bn)
{
    uint64_t h = fnv(0xCBF29CE484222325ull, a, an);
    h = fnv(h ^ 0xFF, "\x1f", 1);
    return b ? fnv(h, b, bn) : h;
}

static int hmap_init(hmap *m, uint64_t n)
{
    m->cap = 16;
    while (m->cap < 2 * n + 16)
        m->cap *= 2;
    m->s = calloc((size_t)m->cap, sizeof *m->s);
    return m->s ? 0 : -1;
}

static hslot *hmap_find(const hmap *m, const char *a, size_t an, const char *b, size_t bn,
                        uint64_t h)
{
    for (uint64_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        hslot *s = &m->s[i];
        if (!s->used)
            return s;
        if (s->h == h && s->alen == an && (s->b != NULL) == (b != NULL) && !memcmp(s->a, a, an) &&
            (!b || (s->blen == bn && !memcmp(s->b, b, bn))))
            return s;
    }
}

/* Inserts unless present (the first entry wins, as in a vocabulary scan). */
static void hmap_put(hmap *m, const char *a, size_t an, const char *b, size_t bn, int32_t val)
{
    uint64_t h = hash2(a, an, b, bn);
    hslot *s = hmap_find(m, a, an, b, bn, h);
    if (s->used)
        return;
    *s = (hslot){h, a, b, (uint32_t)an, (uint32_t)bn, val, 1};
}

static int32_t hmap_get(const hmap *m, const char *a, size_t an, const char *b, size_t bn)
{
    hslot *s = hmap_find(m, a, an, b, bn, hash2(a, an, b, bn));
    return s->used ? s->val : -1;
}

struct gem_tokenizer {
    int64_t n_vocab;
    gem_gguf_str *text; /* (n_vocab) */
    int32_t *type;      /* (n_vocab) */
    hmap vocab;         /* text -> id */
    hmap merges;        /* (left, right) -> rank */
    int32_t bos, eos;
    int add_bos;
    int32_t *special; /* ids of control/user-defined/unknown tokens, longest text first */
    int64_t n_special;
    int32_t byte_tok[256];
};

static gem_status tfail(char *err, size_t errlen, gem_status st, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
    return st;
}

static const gem_tokenizer *sort_t;
static int special_order(const void *a, const void *b)
{
    uint64_t x = sort_t->text[*(const int32_t *)a].len, y = sort_t->text[*(const int32_t *)b].len;
    if (x != y)
        return x < y ? 1 : -1;
    return (*(const int32_t *)a > *(const int32_t *)b) -
           (*(const int32_t *)a < *(const int32_t *)b);
}

static int64_t opt_id(const gem_gguf *g, const char *key, int64_t n_vocab, int *bad)
{
    int64_t v;
    if (gem_gguf_get_i64(g, key, &v, NULL, 0) != GEM_OK)
        return -1;
    if (v < 0 || v >= n_vocab)
        *bad = 1;
    return v;
}

gem_status gem_tokenizer_load(const gem_gguf *g, gem_tokenizer **out, char *err, size_t errlen)
{
    if (!g || !out)
        return GEM_ERR_NULL;
    *out = NULL;
    gem_gguf_str model;
    if (gem_gguf_get_str(g, "tokenizer.ggml.model", &model, err, errlen) != GEM_OK)
        return GEM_ERR_FORMAT;
    if (!gem_gguf_str_eq(model, "gemma4"))
        return tfail(err, errlen, GEM_ERR_UNSUPPORTED,
                     "tokenizer.ggml.model is not 'gemma4' (the only tokenizer gem reads)");
    const gem_gguf_kv *toks = gem_gguf_find(g, "tokenizer.ggml.tokens");
    const gem_gguf_kv *types = gem_gguf_find(g, "tokenizer.ggml.token_type");
    const gem_gguf_kv *merges = gem_gguf_find(g, "tokenizer.ggml.merges");
    if (!toks || toks->type != GEM_GGUF_V_ARRAY || toks->arr_type != GEM_GGUF_V_STRING ||
        toks->n < 1)
        return tfail(err, errlen, GEM_ERR_FORMAT,
                     "tokenizer.ggml.tokens is missing or not a string array");
    if (toks->n > INT32_MAX)
        return tfail(err, errlen, GEM_ERR_FORMAT,
                     "tokenizer.ggml.tokens has more than 2^31 entries");
    if (!merges || merges->type != GEM_GGUF_V_ARRAY || merges->arr_type != GEM_GGUF_V_STRING)
        return tfail(err, errlen, GEM_ERR_FORMAT,
                     "tokenizer.ggml.merges is missing or not a string array");
    if (merges->n > INT32_MAX)
        return tfail(err, errlen, GEM_ERR_FORMAT,
                     "tokenizer.ggml.merges has more than 2^31 entries");
    if (types && (types->type != GEM_GGUF_V_ARRAY || types->n != toks->n))
        return tfail(err, errlen, GEM_ERR_FORMAT,
                     "tokenizer.ggml.token_type is not an array as long as the vocabulary");
    gem_tokenizer *t = calloc(1, sizeof *t);
    gem_gguf_str *ms = NULL;
    gem_status st = GEM_ERR_NOMEM;
    if (!t)
        return GEM_ERR_NOMEM;
    t->n_vocab = (int64_t)toks->n;
    t->text = calloc((size_t)toks->n, sizeof *t->text);
    t->type = calloc((size_t)toks->n, sizeof *t->type);
    t->special = calloc((size_t)toks->n, sizeof *t->special);
    ms = calloc(merges->n ? (size_t)merges->n : 1, sizeof *ms);
    if (!t->text || !t->type || !t->special || !ms || hmap_init(&t->vocab, toks->n) ||
        hmap_init(&t->merges, merges->n))
        goto fail;
    gem_gguf_arr_strings(toks, t->text, toks->n);
    gem_gguf_arr_strings(merges, ms, merges->n);
    for (int i = 0; i < 256; i++)
        t->byte_tok[i] = -1;
    for (int64_t i = 0; i < t->n_vocab; i++) {
        int64_t ty = GEM_TOK_NORMAL;
        if (types && gem_gguf_arr_i64(types, (uint64_t)i, &ty) != GEM_OK) {
            st =
                tfail(err, errlen, GEM_ERR_FORMAT, "tokenizer.ggml.token_type holds a non-integer");
            goto fail;
        }
        if (ty < GEM_TOK_NORMAL || ty > GEM_TOK_BYTE) {
            st = tfail(err, errlen, GEM_ERR_FORMAT,
                       "tokenizer.ggml.token_type holds an unknown type");
            goto fail;
        }
        t->type[i] = (int32_t)ty;
        if (t->text[i].len > UINT32_MAX) {
            st = tfail(err, errlen, GEM_ERR_FORMAT, "a token text is longer than 4 GiB");
            goto fail;
        }
        hmap_put(&t->vocab, t->text[i].ptr, (size_t)t->text[i].len, NULL, 0, (int32_t)i);
        if ((ty == GEM_TOK_CONTROL || ty == GEM_TOK_USER || ty == GEM_TOK_UNKNOWN) &&
            t->text[i].len)
            t->special[t->n_special++] = (int32_t)i;
        if (ty == GEM_TOK_BYTE) {
            const gem_gguf_str s = t->text[i];
            unsigned v = 0;
            int ok = s.len == 6 && !memcmp(s.ptr, "<0x", 3) && s.ptr[5] == '>';
            for (int k = 3; ok && k < 5; k++) {
                char c = s.ptr[k];
                v = v * 16 + (unsigned)(c >= '0' && c <= '9'   ? c - '0'
                                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                               : (ok = 0));
            }
            if (!ok) {
                st = tfail(err, errlen, GEM_ERR_FORMAT, "a byte token is not written <0xXX>");
                goto fail;
            }
            if (t->byte_tok[v] < 0)
                t->byte_tok[v] = (int32_t)i;
        }
    }
    for (int64_t i = 0; i < (int64_t)merges->n; i++) {
        const gem_gguf_str m = ms[i];
        /* "left right": split at the first space after the first byte. */
        const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', (size_t)m.len - 1) : NULL;
        if (!sp || m.len > UINT32_MAX) {
            st = tfail(err, errlen, GEM_ERR_FORMAT, "a merge is not written 'left right'");
            goto fail;
        }
        size_t ln = (size_t)(sp - m.ptr);
        hmap_put(&t->merges, m.ptr, ln, sp + 1, (size_t)m.len - ln - 1, (int32_t)i);
    }
    int bad = 0;
    t->bos = (int32_t)opt_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &bad);
    t->eos = (int32_t)opt_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &bad);
    if (bad) {
        st = tfail(err, errlen, GEM_ERR_FORMAT, "a special token id lies outside the vocabulary");
        goto fail;
    }
    /* llama.cpp always adds BOS for gemma4. */
    t->add_bos = t->bos >= 0;
    sort_t = t;
    qsort(t->special, (size_t)t->n_special, sizeof *t->special, special_order);
    free(ms);
    *out = t;
    return GEM_OK;
fail:
    if (st == GEM_ERR_NOMEM)
        tfail(err, errlen, st, "out of memory for the vocabulary");
    free(ms);
    gem_tokenizer_free(t);
    return st;
}

void gem_tokenizer_free(gem_tokenizer *t)
{
    if (!t)
        return;
    free(t->text);
    free(t->type);
    free(t->special);
    free(t->vocab.s);
    free(t->merges.s);
    free(t);
}

int64_t gem_tokenizer_n_vocab(const gem_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t gem_tokenizer_bos(const gem_tokenizer *t) { return t ? t->bos : -1; }
int32_t gem_tokenizer_eos(const gem_tokenizer *t) { return t ? t->eos : -1; }

gem_gguf_str gem_token_text(const gem_tokenizer *t, int32_t id)
{
    gem_gguf_str none = {NULL, 0};
    return t && id >= 0 && id < t->n_vocab ? t->text[id] : none;
}

int gem_tokenizer_is_eog(const gem_tokenizer *t, int32_t id)
{
    if (!t || id < 0 || id >= t->n_vocab)
        return 0;
    if (id == t->eos)
        return 1;
    return t->type[id] == GEM_TOK_CONTROL &&
           (gem_gguf_str_eq(t->text[id], "<eos>") || gem_gguf_str_eq(t->text[id], "<turn|>") ||
            gem_gguf_str_eq(t->text[id], "<end_of_turn>"));
}

/* ---- encoding ------------------------------------------------------------------------- */

typedef struct out_ids {
    int32_t *ids;
    int64_t cap, n;
} out_ids;

static void emit(out_ids *o, int32_t id)
{
    if (o->n < o->cap)
        o->ids[o->n] = id;
    o->n++;
}

typedef struct sym {
    const char *p;
    size_t n;
    int64_t prev, next;
} sym;

typedef struct bigram {
    int32_t rank;
    int64_t left, right;
    size_t size; /* bytes of left + right when queued, to spot stale entries */
} bigram;

/* Min-heap on (rank, left). */
static int bg_less(const bigram *a, const bigram *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}
static void heap_push(bigram *h, int64_t *n, bigram b)
{
    int64_t i = (*n)++;
    h[i] = b;
    while (i > 0 && bg_less(&h[i], &h[(i - 1) / 2])) {
        bigram t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}
static bigram heap_pop(bigram *h, int64_t *n)
{
    bigram top = h[0];
    h[0] = h[--(*n)];
    for (int64_t i = 0;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && bg_less(&h[l], &h[m]))
            m = l;
        if (r < *n && bg_less(&h[r], &h[m]))
            m = r;
        if (m == i)
            break;
        bigram t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
    return top;
}

static void try_pair(const gem_tokenizer *t, sym *s, int64_t l, int64_t r, bigram *h, int64_t *hn)
{
    if (l < 0 || r < 0)
        return;
    int32_t rank = hmap_get(&t->merges, s[l].p, s[l].n, s[r].p, s[r].n);
    if (rank >= 0)
        heap_push(h, hn, (bigram){rank, l, r, s[l].n + s[r].n});
}

static size_t utf8_len(unsigned char c)
{
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}

/* BPE over one piece (no newlines, or only newlines). Scratch s and h hold at
 * least n entries / 3n entries. */
static void bpe_piece(const gem_tokenizer *t, const char *p, size_t n, sym *s, bigram *h,
                      out_ids *o)
{
    if (n == 0)
        return;
    int64_t ns = 0;
    for (size_t off = 0; off < n;) {
        size_t cl = utf8_len((unsigned char)p[off]);
        if (cl > n - off)
            cl = n - off;
        s[ns] = (sym){p + off, cl, ns - 1, -1};
        if (ns > 0)
            s[ns - 1].next = ns;
        ns++;
        off += cl;
    }
    int64_t hn = 0;
    for (int64_t i = 1; i < ns; i++)
        try_pair(t, s, i - 1, i, h, &hn);
    while (hn > 0) {
        bigram b = heap_pop(h, &hn);
        sym *l = &s[b.left], *r = &s[b.right];
        if (l->n == 0 || r->n == 0 || l->next != b.right || l->n + r->n != b.size)
            continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            s[r->next].prev = b.left;
        try_pair(t, s, l->prev, b.left, h, &hn);
        try_pair(t, s, b.left, l->next, h, &hn);
    }
    for (int64_t i = 0; i >= 0 && i < ns; i = s[i].next) {
        if (s[i].n == 0)
            continue;
        int32_t id = hmap_get(&t->vocab, s[i].p, s[i].n, NULL, 0);
        if (id >= 0) {
            emit(o, id);
            continue;
        }
        for (size_t k = 0; k < s[i].n; k++) {
            int32_t bt = t->byte_tok[(unsigned char)s[i].p[k]];
            if (bt >= 0)
                emit(o, bt);
        }
    }
}

/* Raw text (no special tokens): spaces to U+2581, split into newline runs and
 * other runs. */
static int encode_raw(const gem_tokenizer *t, const char *p, size_t n, out_ids *o)
{
    size_t spaces = 0;
    for (size_t i = 0; i < n; i++)
        spaces += p[i] == ' ';
    if (spaces > (SIZE_MAX - n) / 2)
        return -1;
    size_t m = n + 2 * spaces;
    char *e = malloc(m ? m : 1);
    sym *s = malloc((m ? m : 1) * sizeof *s);
    bigram *h = malloc((m ? 3 * m : 1) * sizeof *h);
    if (!e || !s || !h) {
        free(e);
        free(s);
        free(h);
        return -1;
    }
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ' ') {
            memcpy(e + j, "\xe2\x96\x81", 3);
            j += 3;
        } else {
            e[j++] = p[i];
        }
    }
    for (size_t a = 0; a < m;) {
        size_t b = a;
        const int nl = e[a] == '\n';
        while (b < m && (e[b] == '\n') == nl)
            b++;
        int32_t whole = nl ? hmap_get(&t->vocab, e + a, b - a, NULL, 0) : -1;
        if (whole >= 0)
            emit(o, whole);
        else
            bpe_piece(t, e + a, b - a, s, h, o);
        a = b;
    }
    free(e);
    free(s);
    free(h);
    return 0;
}

gem_status gem_tokenize(const gem_tokenizer *t, const char *text, int add_bos, int32_t *ids,
                        int64_t cap, int64_t *n)
{
    if (!t || !text || !n || (!ids && cap > 0))
        return GEM_ERR_NULL;
    out_ids o = {ids, cap < 0 ? 0 : cap, 0};
    if (add_bos && t->add_bos)
        emit(&o, t->bos);
    const size_t len = strlen(text);
    size_t start = 0;
    for (size_t i = 0; i < len;) {
        int32_t hit = -1;
        for (int64_t k = 0; k < t->n_special; k++) {
            const gem_gguf_str s = t->text[t->special[k]];
            if (s.len <= len - i && !memcmp(text + i, s.ptr, (size_t)s.len)) {
                hit = t->special[k];
                break;
            }
        }
        if (hit < 0) {
            i++;
            continue;
        }
        if (encode_raw(t, text + start, i - start, &o))
            return GEM_ERR_NOMEM;
        emit(&o, hit);
        i += (size_t)t->text[hit].len;
        start = i;
    }
    if (encode_raw(t, text + start, len - start, &o))
        return GEM_ERR_NOMEM;
    *n = o.n;
    return o.n <= o.cap ? GEM_OK : GEM_ERR_RANGE;
}

gem_status gem_token_piece(const gem_tokenizer *t, int32_t id, char *buf, size_t cap, size_t *len)
{
    if (!t || (!buf && cap))
        return GEM_ERR_NULL;
    if (id < 0 || id >= t->n_vocab)
        return GEM_ERR_RANGE;
    const gem_gguf_str s = t->text[id];
    size_t n = 0;
    switch (t->type[id]) {
    case GEM_TOK_NORMAL:
        for (uint64_t i = 0; i < s.len;) {
            if (s.len - i >= 3 && !memcmp(s.ptr + i, "\xe2\x96\x81", 3)) {
                if (n < cap)
                    buf[n] = ' ';
                n++;
                i += 3;
            } else {
                if (n < cap)
                    buf[n] = s.ptr[i];
                n++;
                i++;
            }
        }
        break;
    case GEM_TOK_USER:
        if (s.len <= cap)
            memcpy(buf, s.ptr, (size_t)s.len);
        n = (size_t)s.len;
        break;
    case GEM_TOK_BYTE: {
        unsigned v = 0;
        for (int k = 3; k < 5; k++) {
            char c = s.ptr[k];
            v = v * 16 + (unsigned)(c <= '9' ? c - '0' : c <= 'F' ? c - 'A' + 10 : c - 'a' + 10);
        }
        if (cap >= 1)
            buf[0] = (char)v;
        n = 1;
        break;
    }
    default: n = 0; break;
    }
    if (len)
        *len = n;
    return n <= cap ? GEM_OK : GEM_ERR_RANGE;
}
