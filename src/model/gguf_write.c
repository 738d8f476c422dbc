/*
 * GGUF v3 writer: metadata is serialized as it is added; tensor records are
 * kept until gem_gguf_writer_write lays out the data section (alignment 32)
 * and asks a callback for each tensor's bytes in turn.
 */
#define _POSIX_C_SOURCE 200809L /* fseeko, ftruncate, fileno */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "gem/gguf.h"

typedef struct wtensor {
    char name[GEM_GGUF_MAX_NAME];
    gem_gguf_type type;
    uint32_t n_dims;
    int64_t ne[GEM_GGUF_MAX_DIMS];
    size_t bytes;
    uint64_t offset;
    int hole; /* gem_gguf_writer_hole: bytes left out (zeros in a sparse file) */
} wtensor;

struct gem_gguf_writer {
    uint8_t *kv; /* serialized pairs */
    size_t kv_len, kv_cap;
    int64_t n_kv;
    char **keys; /* (n_kv) for the duplicate check */
    size_t keys_cap;
    wtensor *t;
    int64_t n_t, t_cap;
};

static gem_status put(gem_gguf_writer *w, const void *p, size_t n)
{
    if (n > SIZE_MAX - w->kv_len)
        return GEM_ERR_OVERFLOW;
    if (w->kv_len + n > w->kv_cap) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap < w->kv_len + n) {
            if (cap > SIZE_MAX / 2)
                return GEM_ERR_OVERFLOW;
            cap *= 2;
        }
        uint8_t *q = realloc(w->kv, cap);
        if (!q)
            return GEM_ERR_NOMEM;
        w->kv = q;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
    return GEM_OK;
}

static gem_status put32(gem_gguf_writer *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return put(w, b, 4);
}
static gem_status put64(gem_gguf_writer *w, uint64_t v)
{
    gem_status st = put32(w, (uint32_t)v);
    return st != GEM_OK ? st : put32(w, (uint32_t)(v >> 32));
}
static gem_status putstr(gem_gguf_writer *w, const char *s, uint64_t n)
{
    gem_status st = put64(w, n);
    return st != GEM_OK ? st : put(w, s, (size_t)n);
}

/* Starts a pair: checks the key is new, writes it and the type. */
static gem_status begin(gem_gguf_writer *w, const char *key, gem_gguf_vtype t)
{
    if (!w || !key || !key[0])
        return GEM_ERR_NULL;
    for (int64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->keys[i], key))
            return GEM_ERR_PARAM;
    if ((size_t)w->n_kv == w->keys_cap) {
        size_t cap = w->keys_cap ? 2 * w->keys_cap : 64;
        char **k = realloc(w->keys, cap * sizeof *k);
        if (!k)
            return GEM_ERR_NOMEM;
        w->keys = k;
        w->keys_cap = cap;
    }
    char *copy = strdup(key);
    if (!copy)
        return GEM_ERR_NOMEM;
    w->keys[w->n_kv++] = copy;
    gem_status st = putstr(w, key, strlen(key));
    return st != GEM_OK ? st : put32(w, (uint32_t)t);
}

gem_status gem_gguf_writer_create(gem_gguf_writer **out)
{
    if (!out)
        return GEM_ERR_NULL;
    *out = calloc(1, sizeof **out);
    return *out ? GEM_OK : GEM_ERR_NOMEM;
}

void gem_gguf_writer_free(gem_gguf_writer *w)
{
    if (!w)
        return;
    for (int64_t i = 0; i < w->n_kv; i++)
        free(w->keys[i]);
    free(w->keys);
    free(w->kv);
    free(w->t);
    free(w);
}

gem_status gem_gguf_writer_u32(gem_gguf_writer *w, const char *key, uint32_t v)
{
    gem_status st = begin(w, key, GEM_GGUF_V_U32);
    return st != GEM_OK ? st : put32(w, v);
}

gem_status gem_gguf_writer_i32(gem_gguf_writer *w, const char *key, int32_t v)
{
    gem_status st = begin(w, key, GEM_GGUF_V_I32);
    return st != GEM_OK ? st : put32(w, (uint32_t)v);
}

gem_status gem_gguf_writer_f32(gem_gguf_writer *w, const char *key, float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    gem_status st = begin(w, key, GEM_GGUF_V_F32);
    return st != GEM_OK ? st : put32(w, b);
}

gem_status gem_gguf_writer_bool(gem_gguf_writer *w, const char *key, int v)
{
    uint8_t b = v ? 1 : 0;
    gem_status st = begin(w, key, GEM_GGUF_V_BOOL);
    return st != GEM_OK ? st : put(w, &b, 1);
}

gem_status gem_gguf_writer_str(gem_gguf_writer *w, const char *key, const char *v)
{
    if (!v)
        return GEM_ERR_NULL;
    gem_status st = begin(w, key, GEM_GGUF_V_STRING);
    return st != GEM_OK ? st : putstr(w, v, strlen(v));
}

gem_status gem_gguf_writer_arr(gem_gguf_writer *w, const char *key, gem_gguf_vtype vtype,
                               const void *arr, uint64_t n)
{
    size_t eb;
    switch (vtype) {
    case GEM_GGUF_V_U8:
    case GEM_GGUF_V_I8:
    case GEM_GGUF_V_BOOL: eb = 1; break;
    case GEM_GGUF_V_U16:
    case GEM_GGUF_V_I16: eb = 2; break;
    case GEM_GGUF_V_U32:
    case GEM_GGUF_V_I32:
    case GEM_GGUF_V_F32: eb = 4; break;
    case GEM_GGUF_V_U64:
    case GEM_GGUF_V_I64:
    case GEM_GGUF_V_F64: eb = 8; break;
    default: return GEM_ERR_PARAM;
    }
    if (!arr && n)
        return GEM_ERR_NULL;
    size_t bytes;
    gem_status st = gem_mul_size((size_t)n, eb, &bytes);
    if (st != GEM_OK || (st = begin(w, key, GEM_GGUF_V_ARRAY)) != GEM_OK ||
        (st = put32(w, (uint32_t)vtype)) != GEM_OK || (st = put64(w, n)) != GEM_OK)
        return st;
    /* Host order is little-endian on every machine gem builds for (x86-64, arm64). */
    return put(w, arr, bytes);
}

gem_status gem_gguf_writer_arr_str(gem_gguf_writer *w, const char *key, const char *const *strs,
                                   const uint64_t *lens, uint64_t n)
{
    if ((!strs || !lens) && n)
        return GEM_ERR_NULL;
    gem_status st = begin(w, key, GEM_GGUF_V_ARRAY);
    if (st != GEM_OK || (st = put32(w, GEM_GGUF_V_STRING)) != GEM_OK ||
        (st = put64(w, n)) != GEM_OK)
        return st;
    for (uint64_t i = 0; i < n; i++)
        if ((st = putstr(w, strs[i], lens[i])) != GEM_OK)
            return st;
    return GEM_OK;
}

gem_status gem_gguf_writer_tensor(gem_gguf_writer *w, const char *name, gem_gguf_type type,
                                  uint32_t n_dims, const int64_t *ne)
{
    if (!w || !name || !ne)
        return GEM_ERR_NULL;
    if (!name[0] || strlen(name) >= GEM_GGUF_MAX_NAME || n_dims < 1 || n_dims > GEM_GGUF_MAX_DIMS)
        return GEM_ERR_PARAM;
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return GEM_ERR_PARAM;
    wtensor t = {.type = type, .n_dims = n_dims};
    strcpy(t.name, name);
    size_t rows = 1;
    for (uint32_t j = 0; j < GEM_GGUF_MAX_DIMS; j++) {
        t.ne[j] = j < n_dims ? ne[j] : 1;
        if (t.ne[j] < 1)
            return GEM_ERR_SHAPE;
        if (j > 0 && gem_mul_size(rows, (size_t)t.ne[j], &rows) != GEM_OK)
            return GEM_ERR_OVERFLOW;
    }
    size_t row;
    gem_status st = gem_gguf_row_bytes(type, t.ne[0], &row);
    if (st != GEM_OK || (st = gem_mul_size(rows, row, &t.bytes)) != GEM_OK)
        return st;
    if (w->n_t == w->t_cap) {
        int64_t cap = w->t_cap ? 2 * w->t_cap : 64;
        wtensor *q = realloc(w->t, (size_t)cap * sizeof *q);
        if (!q)
            return GEM_ERR_NOMEM;
        w->t = q;
        w->t_cap = cap;
    }
    w->t[w->n_t++] = t;
    return GEM_OK;
}

static int pad_file(FILE *f, uint64_t pos, uint64_t align)
{
    static const uint8_t zeros[64];
    uint64_t pad = (align - pos % align) % align;
    return pad && fwrite(zeros, 1, (size_t)pad, f) != pad ? -1 : 0;
}

gem_status gem_gguf_writer_hole(gem_gguf_writer *w, int64_t index)
{
    if (!w)
        return GEM_ERR_NULL;
    if (index < 0 || index >= w->n_t)
        return GEM_ERR_RANGE;
    w->t[index].hole = 1;
    return GEM_OK;
}

gem_status gem_gguf_writer_write(gem_gguf_writer *w, const char *path, gem_gguf_fill_fn fill,
                                 void *user, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    if (!w || !path || !fill)
        return GEM_ERR_NULL;
    const uint64_t align = GEM_GGUF_DEFAULT_ALIGNMENT;
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        size_t padded = w->t[i].bytes + (size_t)((align - w->t[i].bytes % align) % align);
        if (padded < w->t[i].bytes || off > UINT64_MAX - padded)
            return GEM_ERR_OVERFLOW;
        off += padded;
    }
    /* Header and tensor records go through the same growable buffer. */
    gem_gguf_writer hdr = {0};
    gem_status st;
    if ((st = put(&hdr, "GGUF", 4)) != GEM_OK || (st = put32(&hdr, 3)) != GEM_OK ||
        (st = put64(&hdr, (uint64_t)w->n_t)) != GEM_OK ||
        (st = put64(&hdr, (uint64_t)w->n_kv)) != GEM_OK ||
        (st = put(&hdr, w->kv, w->kv_len)) != GEM_OK)
        goto out;
    for (int64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        if ((st = putstr(&hdr, t->name, strlen(t->name))) != GEM_OK ||
            (st = put32(&hdr, t->n_dims)) != GEM_OK)
            goto out;
        for (uint32_t j = 0; j < t->n_dims; j++)
            if ((st = put64(&hdr, (uint64_t)t->ne[j])) != GEM_OK)
                goto out;
        if ((st = put32(&hdr, (uint32_t)t->type)) != GEM_OK ||
            (st = put64(&hdr, t->offset)) != GEM_OK)
            goto out;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        if (err && errlen)
            snprintf(err, errlen, "cannot create the file");
        st = GEM_ERR_IO;
        goto out;
    }
    int bad = fwrite(hdr.kv, 1, hdr.kv_len, f) != hdr.kv_len || pad_file(f, hdr.kv_len, align);
    int holes = 0;
    for (int64_t i = 0; i < w->n_t && !bad; i++) {
        if (w->t[i].hole) {
            /* skip the padded bytes; the file is extended to its size at the end.
             * offset + padded fit uint64_t (checked above) and off_t (checked below) */
            const uint64_t padded = i + 1 < w->n_t ? w->t[i + 1].offset - w->t[i].offset
                                                   : off - w->t[i].offset;
            bad = padded > (uint64_t)INT64_MAX || fseeko(f, (off_t)padded, SEEK_CUR) != 0;
            holes = 1;
            continue;
        }
        void *buf = malloc(w->t[i].bytes ? w->t[i].bytes : 1);
        if (!buf) {
            st = GEM_ERR_NOMEM;
            bad = 1;
            break;
        }
        if (fill(user, i, buf, w->t[i].bytes) != 0) {
            if (err && errlen)
                snprintf(err, errlen, "producing tensor '%s' failed", w->t[i].name);
            st = GEM_ERR_PARAM;
            bad = 1;
        } else if (fwrite(buf, 1, w->t[i].bytes, f) != w->t[i].bytes ||
                   pad_file(f, w->t[i].bytes, align)) {
            bad = 1;
        }
        free(buf);
    }
    if (!bad && holes) {
        /* the header's length plus the tensor data, as the reader checks the file size */
        const off_t end = ftello(f);
        bad = end < 0 || fflush(f) != 0 || ftruncate(fileno(f), end) != 0;
    }
    if (fclose(f) != 0)
        bad = 1;
    if (bad && st == GEM_OK) {
        if (err && errlen)
            snprintf(err, errlen, "writing the file failed");
        st = GEM_ERR_IO;
    }
out:
    free(hdr.kv);
    return st;
}
