/*
 * GGUF v3 reader: maps the file, validates the whole header against the file
 * size with checked arithmetic, and answers metadata and tensor look-ups from
 * sorted indexes. See include/gem/gguf.h for the format and the contract.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gem/gguf.h"

struct gem_gguf {
    const uint8_t *base; /* the file's bytes */
    size_t size;
    int mapped; /* 1: munmap on close */
    int64_t n_kv, n_tensors;
    gem_gguf_kv *kv;    /* (n_kv) in file order */
    gem_gguf_tensor *t; /* (n_tensors) in file order */
    int64_t *kv_sorted; /* (n_kv) indexes sorted by key */
    int64_t *t_sorted;  /* (n_tensors) indexes sorted by name */
    uint64_t alignment;
    uint64_t data_offset; /* file offset of the data section */
};

/* A bounded cursor over the file. Every read checks the remaining bytes. */
typedef struct cursor {
    const uint8_t *p;
    size_t size, off;
    char *err;
    size_t errlen;
} cursor;

static gem_status fail(cursor *c, gem_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static gem_status fail(cursor *c, gem_status st, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

static gem_status take(cursor *c, size_t n, const uint8_t **out, const char *what)
{
    *out = NULL;
    if (n > c->size - c->off)
        return fail(c, GEM_ERR_FORMAT,
                    "truncated: %s needs %zu bytes at offset %zu, the file has %zu", what, n,
                    c->off, c->size);
    *out = c->p + c->off;
    c->off += n;
    return GEM_OK;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

static gem_status rd_u32(cursor *c, uint32_t *v, const char *what)
{
    const uint8_t *p;
    gem_status st = take(c, 4, &p, what);
    if (st == GEM_OK)
        *v = le32(p);
    return st;
}
static gem_status rd_u64(cursor *c, uint64_t *v, const char *what)
{
    const uint8_t *p;
    gem_status st = take(c, 8, &p, what);
    if (st == GEM_OK)
        *v = le64(p);
    return st;
}
static gem_status rd_str(cursor *c, gem_gguf_str *s, const char *what)
{
    uint64_t len;
    const uint8_t *p;
    gem_status st = rd_u64(c, &len, what);
    if (st != GEM_OK)
        return st;
    if (len > c->size - c->off)
        return fail(c, GEM_ERR_FORMAT,
                    "truncated: %s of %" PRIu64 " bytes at offset %zu, the file has %zu", what, len,
                    c->off, c->size);
    st = take(c, (size_t)len, &p, what);
    if (st != GEM_OK)
        return st;
    s->ptr = (const char *)p;
    s->len = len;
    return GEM_OK;
}

static size_t scalar_bytes(uint32_t t)
{
    switch (t) {
    case GEM_GGUF_V_U8:
    case GEM_GGUF_V_I8:
    case GEM_GGUF_V_BOOL: return 1;
    case GEM_GGUF_V_U16:
    case GEM_GGUF_V_I16: return 2;
    case GEM_GGUF_V_U32:
    case GEM_GGUF_V_I32:
    case GEM_GGUF_V_F32: return 4;
    case GEM_GGUF_V_U64:
    case GEM_GGUF_V_I64:
    case GEM_GGUF_V_F64: return 8;
    default: return 0;
    }
}

/* Prints at most 40 bytes of a string from the file, replacing non-printable bytes. */
static const char *printable(gem_gguf_str s, char buf[48])
{
    size_t n = s.len < 40 ? (size_t)s.len : 40, j = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        buf[j++] = (ch >= 32 && ch < 127) ? (char)ch : '?';
    }
    if (s.len > 40) {
        buf[j++] = '.';
        buf[j++] = '.';
    }
    buf[j] = 0;
    return buf;
}

/* One value of type t (not an array) at the cursor. */
static gem_status rd_scalar(cursor *c, uint32_t t, const char *key)
{
    const uint8_t *p;
    if (t == GEM_GGUF_V_STRING) {
        gem_gguf_str s;
        return rd_str(c, &s, "a string value");
    }
    size_t n = scalar_bytes(t);
    if (n == 0)
        return fail(c, GEM_ERR_FORMAT, "key '%s': unknown value type %" PRIu32, key, t);
    gem_status st = take(c, n, &p, "a value");
    if (st != GEM_OK)
        return st;
    if (t == GEM_GGUF_V_BOOL && p[0] > 1)
        return fail(c, GEM_ERR_FORMAT, "key '%s': boolean byte %u is neither 0 nor 1", key, p[0]);
    return GEM_OK;
}

static gem_status rd_kv(cursor *c, gem_gguf_kv *kv, int64_t index)
{
    char kb[48];
    gem_status st = rd_str(c, &kv->key, "a key");
    if (st != GEM_OK)
        return st;
    if (kv->key.len == 0)
        return fail(c, GEM_ERR_FORMAT, "metadata pair %" PRId64 " has an empty key", index);
    printable(kv->key, kb);
    uint32_t t;
    if ((st = rd_u32(c, &t, "a value type")) != GEM_OK)
        return st;
    if (t >= GEM_GGUF_V_COUNT)
        return fail(c, GEM_ERR_FORMAT, "key '%s': unknown value type %" PRIu32, kb, t);
    kv->type = (gem_gguf_vtype)t;
    if (t != GEM_GGUF_V_ARRAY) {
        kv->arr_type = kv->type;
        kv->n = 1;
        size_t at = c->off;
        if ((st = rd_scalar(c, t, kb)) != GEM_OK)
            return st;
        kv->data = c->p + at;
        kv->data_bytes = c->off - at;
        return GEM_OK;
    }
    uint32_t et;
    uint64_t n;
    if ((st = rd_u32(c, &et, "an array element type")) != GEM_OK ||
        (st = rd_u64(c, &n, "an array length")) != GEM_OK)
        return st;
    if (et == GEM_GGUF_V_ARRAY)
        return fail(c, GEM_ERR_FORMAT, "key '%s': arrays of arrays are not supported", kb);
    if (et >= GEM_GGUF_V_COUNT)
        return fail(c, GEM_ERR_FORMAT, "key '%s': unknown array element type %" PRIu32, kb, et);
    kv->arr_type = (gem_gguf_vtype)et;
    kv->n = n;
    const size_t at = c->off, left = c->size - c->off;
    if (et == GEM_GGUF_V_STRING) {
        if (n > left / 8)
            return fail(c, GEM_ERR_FORMAT,
                        "truncated: key '%s' declares %" PRIu64
                        " strings, the file has %zu bytes left",
                        kb, n, left);
        for (uint64_t i = 0; i < n; i++) {
            gem_gguf_str s;
            if ((st = rd_str(c, &s, "an array string")) != GEM_OK)
                return st;
        }
    } else {
        const size_t eb = scalar_bytes(et);
        if (n > left / eb)
            return fail(c, GEM_ERR_FORMAT,
                        "truncated: key '%s' declares %" PRIu64
                        " elements of %zu bytes, the file has "
                        "%zu bytes left",
                        kb, n, eb, left);
        const uint8_t *p;
        if ((st = take(c, (size_t)n * eb, &p, "array elements")) != GEM_OK)
            return st;
        if (et == GEM_GGUF_V_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (p[i] > 1)
                    return fail(c, GEM_ERR_FORMAT,
                                "key '%s': boolean element %" PRIu64 " is %u, neither 0 nor 1", kb,
                                i, p[i]);
    }
    kv->data = c->p + at;
    kv->data_bytes = c->off - at;
    return GEM_OK;
}

static int str_cmp(gem_gguf_str a, gem_gguf_str b)
{
    uint64_t n = a.len < b.len ? a.len : b.len;
    int r = n ? memcmp(a.ptr, b.ptr, (size_t)n) : 0;
    if (r)
        return r;
    return (a.len > b.len) - (a.len < b.len);
}

/* qsort has no context argument in C11: the table being sorted is set here. */
static const gem_gguf *sort_g;
static int kv_order(const void *a, const void *b)
{
    return str_cmp(sort_g->kv[*(const int64_t *)a].key, sort_g->kv[*(const int64_t *)b].key);
}
static int t_order(const void *a, const void *b)
{
    return strcmp(sort_g->t[*(const int64_t *)a].name, sort_g->t[*(const int64_t *)b].name);
}
static int off_order(const void *a, const void *b)
{
    uint64_t x = sort_g->t[*(const int64_t *)a].offset, y = sort_g->t[*(const int64_t *)b].offset;
    return (x > y) - (x < y);
}

static gem_status rd_tensor(cursor *c, gem_gguf_tensor *t, int64_t index)
{
    gem_gguf_str name;
    char nb[48];
    gem_status st = rd_str(c, &name, "a tensor name");
    if (st != GEM_OK)
        return st;
    printable(name, nb);
    if (name.len == 0 || name.len >= GEM_GGUF_MAX_NAME)
        return fail(c, GEM_ERR_FORMAT,
                    "tensor %" PRId64 " '%s': name length %" PRIu64 " (1..%d allowed)", index, nb,
                    name.len, GEM_GGUF_MAX_NAME - 1);
    for (uint64_t i = 0; i < name.len; i++)
        if ((unsigned char)name.ptr[i] < 32 || name.ptr[i] == 127)
            return fail(c, GEM_ERR_FORMAT, "tensor %" PRId64 " '%s': the name holds a control byte",
                        index, nb);
    memcpy(t->name, name.ptr, (size_t)name.len);
    t->name[name.len] = 0;
    if ((st = rd_u32(c, &t->n_dims, "a dimension count")) != GEM_OK)
        return st;
    if (t->n_dims < 1 || t->n_dims > GEM_GGUF_MAX_DIMS)
        return fail(c, GEM_ERR_FORMAT, "tensor '%s': %" PRIu32 " dimensions (1..4 allowed)",
                    t->name, t->n_dims);
    int64_t elems = 1;
    for (uint32_t j = 0; j < GEM_GGUF_MAX_DIMS; j++) {
        uint64_t v = 1;
        if (j < t->n_dims && (st = rd_u64(c, &v, "a dimension")) != GEM_OK)
            return st;
        if (v < 1 || v > (uint64_t)INT64_MAX)
            return fail(c, GEM_ERR_FORMAT,
                        "tensor '%s': dimension %" PRIu32 " is %" PRIu64 " (1 or more needed)",
                        t->name, j, v);
        t->ne[j] = (int64_t)v;
        if (elems > INT64_MAX / t->ne[j])
            return fail(c, GEM_ERR_FORMAT, "tensor '%s': the element count overflows", t->name);
        elems *= t->ne[j];
    }
    uint32_t type;
    if ((st = rd_u32(c, &type, "a tensor type")) != GEM_OK ||
        (st = rd_u64(c, &t->offset, "a tensor offset")) != GEM_OK)
        return st;
    int64_t be;
    size_t bb;
    if (gem_gguf_type_block(type, &be, &bb) != GEM_OK)
        return fail(c, GEM_ERR_UNSUPPORTED,
                    "tensor '%s' has element type %" PRIu32 ", which gem does not read (f32, f16, "
                    "bf16, q8_0, q4_0, q4_k, q6_k)",
                    t->name, type);
    t->type = (gem_gguf_type)type;
    if (t->ne[0] % be != 0)
        return fail(c, GEM_ERR_FORMAT,
                    "tensor '%s': row length %" PRId64
                    " is not a multiple of the %s block (%" PRId64 ")",
                    t->name, t->ne[0], gem_gguf_type_name(type), be);
    if (gem_mul_size((size_t)(elems / be), bb, &t->bytes) != GEM_OK)
        return fail(c, GEM_ERR_FORMAT, "tensor '%s': the byte size overflows", t->name);
    (void)index;
    return GEM_OK;
}

static gem_status parse(gem_gguf *g, char *err, size_t errlen)
{
    cursor c = {g->base, g->size, 0, err, errlen};
    const uint8_t *p;
    gem_status st;
    if ((st = take(&c, 4, &p, "the magic")) != GEM_OK)
        return st;
    if (memcmp(p, "GGUF", 4) != 0)
        return fail(&c, GEM_ERR_FORMAT, "not a GGUF file (the magic is not 'GGUF')");
    uint32_t version;
    if ((st = rd_u32(&c, &version, "the version")) != GEM_OK)
        return st;
    if (version == 0x03000000u || version == 0x02000000u)
        return fail(&c, GEM_ERR_UNSUPPORTED,
                    "a big-endian GGUF file, gem reads little-endian ones");
    if (version != 3)
        return fail(&c, version == 2 ? GEM_ERR_UNSUPPORTED : GEM_ERR_FORMAT,
                    "GGUF version %" PRIu32 ", gem reads version 3", version);
    uint64_t nt, nkv;
    if ((st = rd_u64(&c, &nt, "the tensor count")) != GEM_OK ||
        (st = rd_u64(&c, &nkv, "the metadata count")) != GEM_OK)
        return st;
    /* Every pair takes at least 13 bytes and every tensor record at least 29. */
    const size_t left = c.size - c.off;
    if (nkv > left / 13)
        return fail(&c, GEM_ERR_FORMAT,
                    "truncated: %" PRIu64 " metadata pairs cannot fit in %zu bytes", nkv, left);
    if (nt > left / 29)
        return fail(&c, GEM_ERR_FORMAT,
                    "truncated: %" PRIu64 " tensor records cannot fit in %zu bytes", nt, left);
    g->n_kv = (int64_t)nkv;
    g->n_tensors = (int64_t)nt;
    g->kv = calloc(nkv ? (size_t)nkv : 1, sizeof *g->kv);
    g->kv_sorted = calloc(nkv ? (size_t)nkv : 1, sizeof *g->kv_sorted);
    g->t = calloc(nt ? (size_t)nt : 1, sizeof *g->t);
    g->t_sorted = calloc(nt ? (size_t)nt : 1, sizeof *g->t_sorted);
    if (!g->kv || !g->kv_sorted || !g->t || !g->t_sorted)
        return fail(&c, GEM_ERR_NOMEM,
                    "out of memory for %" PRIu64 " pairs and %" PRIu64 " tensors", nkv, nt);
    for (int64_t i = 0; i < g->n_kv; i++) {
        if ((st = rd_kv(&c, &g->kv[i], i)) != GEM_OK)
            return st;
        g->kv_sorted[i] = i;
    }
    sort_g = g;
    qsort(g->kv_sorted, (size_t)g->n_kv, sizeof *g->kv_sorted, kv_order);
    for (int64_t i = 1; i < g->n_kv; i++) {
        const gem_gguf_kv *a = &g->kv[g->kv_sorted[i - 1]], *b = &g->kv[g->kv_sorted[i]];
        if (str_cmp(a->key, b->key) == 0) {
            char kb[48];
            return fail(&c, GEM_ERR_FORMAT, "duplicate key '%s'", printable(a->key, kb));
        }
    }
    g->alignment = GEM_GGUF_DEFAULT_ALIGNMENT;
    const gem_gguf_kv *al = gem_gguf_find(g, "general.alignment");
    if (al) {
        if (al->type != GEM_GGUF_V_U32)
            return fail(&c, GEM_ERR_FORMAT, "general.alignment is not a u32");
        uint32_t a = le32(al->data);
        if (a == 0 || (a & (a - 1)) != 0)
            return fail(&c, GEM_ERR_FORMAT, "general.alignment %" PRIu32 " is not a power of two",
                        a);
        g->alignment = a;
    }
    for (int64_t i = 0; i < g->n_tensors; i++) {
        if ((st = rd_tensor(&c, &g->t[i], i)) != GEM_OK)
            return st;
        if (g->t[i].offset % g->alignment != 0)
            return fail(&c, GEM_ERR_FORMAT,
                        "tensor '%s': offset %" PRIu64
                        " is not a multiple of the alignment %" PRIu64,
                        g->t[i].name, g->t[i].offset, g->alignment);
        g->t_sorted[i] = i;
    }
    sort_g = g;
    qsort(g->t_sorted, (size_t)g->n_tensors, sizeof *g->t_sorted, t_order);
    for (int64_t i = 1; i < g->n_tensors; i++)
        if (!strcmp(g->t[g->t_sorted[i - 1]].name, g->t[g->t_sorted[i]].name))
            return fail(&c, GEM_ERR_FORMAT, "duplicate tensor name '%s'",
                        g->t[g->t_sorted[i]].name);
    /* The data section starts at the next multiple of the alignment. */
    uint64_t data = c.off;
    uint64_t pad = (g->alignment - data % g->alignment) % g->alignment;
    if (g->n_tensors > 0 && pad > g->size - data)
        return fail(&c, GEM_ERR_FORMAT,
                    "truncated: the data section would start past the end of "
                    "the file (%zu bytes)",
                    g->size);
    g->data_offset = data + pad;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        gem_gguf_tensor *t = &g->t[i];
        const uint64_t room = g->size - g->data_offset;
        if (t->offset > room || t->bytes > room - t->offset)
            return fail(&c, GEM_ERR_FORMAT,
                        "tensor '%s': bytes [%" PRIu64 ", %" PRIu64
                        ") of the data section lie past the end of the file (%" PRIu64 " bytes)",
                        t->name, t->offset, t->offset + (uint64_t)t->bytes, room);
        t->data = g->base + g->data_offset + t->offset;
    }
    /* No two tensors may share bytes. Reuse t_sorted as scratch, then restore it. */
    int64_t *by_off = malloc((g->n_tensors ? (size_t)g->n_tensors : 1) * sizeof *by_off);
    if (!by_off)
        return fail(&c, GEM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < g->n_tensors; i++)
        by_off[i] = i;
    qsort(by_off, (size_t)g->n_tensors, sizeof *by_off, off_order);
    for (int64_t i = 1; i < g->n_tensors; i++) {
        const gem_gguf_tensor *a = &g->t[by_off[i - 1]], *b = &g->t[by_off[i]];
        if (a->offset + a->bytes > b->offset) {
            free(by_off);
            return fail(&c, GEM_ERR_FORMAT, "tensors '%s' and '%s' overlap in the data section",
                        a->name, b->name);
        }
    }
    free(by_off);
    return GEM_OK;
}

static gem_status open_common(gem_gguf *g, gem_gguf **out, char *err, size_t errlen)
{
    gem_status st = parse(g, err, errlen);
    if (st != GEM_OK) {
        gem_gguf_close(g);
        return st;
    }
    *out = g;
    return GEM_OK;
}

gem_status gem_gguf_open_buffer(const void *buf, size_t bytes, gem_gguf **out, char *err,
                                size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    if (!out)
        return GEM_ERR_NULL;
    *out = NULL;
    if (!buf && bytes)
        return GEM_ERR_NULL;
    gem_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return GEM_ERR_NOMEM;
    g->base = buf ? buf : (const uint8_t *)"";
    g->size = bytes;
    return open_common(g, out, err, errlen);
}

gem_status gem_gguf_open(const char *path, gem_gguf **out, char *err, size_t errlen)
{
    cursor c = {NULL, 0, 0, err, errlen};
    if (err && errlen)
        err[0] = 0;
    if (!path || !out)
        return GEM_ERR_NULL;
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return fail(&c, GEM_ERR_IO, "cannot open the file");
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return fail(&c, GEM_ERR_IO, "not a regular file");
    }
    if (sb.st_size < 4) {
        close(fd);
        return fail(&c, GEM_ERR_FORMAT, "truncated: %lld bytes, not a GGUF file",
                    (long long)sb.st_size);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return fail(&c, GEM_ERR_IO, "the file does not fit the address space");
    }
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return fail(&c, GEM_ERR_IO, "cannot map the file");
    gem_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        munmap(m, (size_t)sb.st_size);
        return GEM_ERR_NOMEM;
    }
    g->base = m;
    g->size = (size_t)sb.st_size;
    g->mapped = 1;
    return open_common(g, out, err, errlen);
}

void gem_gguf_close(gem_gguf *g)
{
    if (!g)
        return;
    if (g->mapped)
        munmap((void *)g->base, g->size);
    free(g->kv);
    free(g->kv_sorted);
    free(g->t);
    free(g->t_sorted);
    free(g);
}

int64_t gem_gguf_n_kv(const gem_gguf *g) { return g ? g->n_kv : 0; }
int64_t gem_gguf_n_tensors(const gem_gguf *g) { return g ? g->n_tensors : 0; }
uint64_t gem_gguf_alignment(const gem_gguf *g) { return g ? g->alignment : 0; }
size_t gem_gguf_file_bytes(const gem_gguf *g) { return g ? g->size : 0; }
const void *gem_gguf_file_data(const gem_gguf *g) { return g ? g->base : NULL; }

const gem_gguf_kv *gem_gguf_kv_at(const gem_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const gem_gguf_tensor *gem_gguf_tensor_at(const gem_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_tensors ? &g->t[i] : NULL;
}

int gem_gguf_str_eq(gem_gguf_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

const gem_gguf_kv *gem_gguf_find(const gem_gguf *g, const char *key)
{
    if (!g || !key)
        return NULL;
    gem_gguf_str k = {key, strlen(key)};
    int64_t lo = 0, hi = g->n_kv;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int r = str_cmp(g->kv[g->kv_sorted[mid]].key, k);
        if (r == 0)
            return &g->kv[g->kv_sorted[mid]];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const gem_gguf_tensor *gem_gguf_find_tensor(const gem_gguf *g, const char *name)
{
    if (!g || !name)
        return NULL;
    int64_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int r = strcmp(g->t[g->t_sorted[mid]].name, name);
        if (r == 0)
            return &g->t[g->t_sorted[mid]];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- typed access -------------------------------------------------------------------- */

static gem_status int_at(gem_gguf_vtype t, const uint8_t *p, int64_t *out)
{
    switch (t) {
    case GEM_GGUF_V_U8:
    case GEM_GGUF_V_BOOL: *out = p[0]; return GEM_OK;
    case GEM_GGUF_V_I8: *out = (int8_t)p[0]; return GEM_OK;
    case GEM_GGUF_V_U16: *out = (uint16_t)(p[0] | p[1] << 8); return GEM_OK;
    case GEM_GGUF_V_I16: *out = (int16_t)(uint16_t)(p[0] | p[1] << 8); return GEM_OK;
    case GEM_GGUF_V_U32: *out = le32(p); return GEM_OK;
    case GEM_GGUF_V_I32: *out = (int32_t)le32(p); return GEM_OK;
    case GEM_GGUF_V_I64: *out = (int64_t)le64(p); return GEM_OK;
    case GEM_GGUF_V_U64: {
        uint64_t v = le64(p);
        if (v > (uint64_t)INT64_MAX)
            return GEM_ERR_FORMAT;
        *out = (int64_t)v;
        return GEM_OK;
    }
    default: return GEM_ERR_FORMAT;
    }
}

static gem_status real_at(gem_gguf_vtype t, const uint8_t *p, double *out)
{
    if (t == GEM_GGUF_V_F32) {
        uint32_t b = le32(p);
        float f;
        memcpy(&f, &b, 4);
        *out = f;
        return GEM_OK;
    }
    if (t == GEM_GGUF_V_F64) {
        uint64_t b = le64(p);
        memcpy(out, &b, 8);
        return GEM_OK;
    }
    return GEM_ERR_FORMAT;
}

static void say(char *err, size_t errlen, const char *fmt, const char *key, const char *what)
{
    if (err && errlen)
        snprintf(err, errlen, fmt, key, what);
}

static const gem_gguf_kv *scalar(const gem_gguf *g, const char *key, gem_status *st, char *err,
                                 size_t errlen)
{
    const gem_gguf_kv *kv = gem_gguf_find(g, key);
    if (!kv) {
        say(err, errlen, "metadata key '%s' is %s", key, "missing");
        *st = GEM_ERR_RANGE;
        return NULL;
    }
    if (kv->type == GEM_GGUF_V_ARRAY) {
        say(err, errlen, "metadata key '%s' is %s", key, "an array where a single value belongs");
        *st = GEM_ERR_FORMAT;
        return NULL;
    }
    *st = GEM_OK;
    return kv;
}

gem_status gem_gguf_get_i64(const gem_gguf *g, const char *key, int64_t *out, char *err,
                            size_t errlen)
{
    gem_status st;
    const gem_gguf_kv *kv = scalar(g, key, &st, err, errlen);
    if (!kv)
        return st;
    if (int_at(kv->type, kv->data, out) != GEM_OK) {
        say(err, errlen, "metadata key '%s' is %s", key, "not an integer (or too large)");
        return GEM_ERR_FORMAT;
    }
    return GEM_OK;
}

gem_status gem_gguf_get_f64(const gem_gguf *g, const char *key, double *out, char *err,
                            size_t errlen)
{
    gem_status st;
    const gem_gguf_kv *kv = scalar(g, key, &st, err, errlen);
    if (!kv)
        return st;
    if (real_at(kv->type, kv->data, out) != GEM_OK) {
        say(err, errlen, "metadata key '%s' is %s", key, "not a real number");
        return GEM_ERR_FORMAT;
    }
    return GEM_OK;
}

gem_status gem_gguf_get_bool(const gem_gguf *g, const char *key, int *out, char *err, size_t errlen)
{
    gem_status st;
    const gem_gguf_kv *kv = scalar(g, key, &st, err, errlen);
    if (!kv)
        return st;
    if (kv->type != GEM_GGUF_V_BOOL) {
        say(err, errlen, "metadata key '%s' is %s", key, "not a boolean");
        return GEM_ERR_FORMAT;
    }
    *out = kv->data[0];
    return GEM_OK;
}

gem_status gem_gguf_get_str(const gem_gguf *g, const char *key, gem_gguf_str *out, char *err,
                            size_t errlen)
{
    gem_status st;
    const gem_gguf_kv *kv = scalar(g, key, &st, err, errlen);
    if (!kv)
        return st;
    if (kv->type != GEM_GGUF_V_STRING) {
        say(err, errlen, "metadata key '%s' is %s", key, "not a string");
        return GEM_ERR_FORMAT;
    }
    out->len = le64(kv->data);
    out->ptr = (const char *)kv->data + 8;
    return GEM_OK;
}

gem_status gem_gguf_arr_i64(const gem_gguf_kv *kv, uint64_t i, int64_t *out)
{
    if (!kv || !out)
        return GEM_ERR_NULL;
    if (kv->type != GEM_GGUF_V_ARRAY)
        return GEM_ERR_FORMAT;
    if (i >= kv->n)
        return GEM_ERR_RANGE;
    size_t eb = scalar_bytes(kv->arr_type);
    if (eb == 0)
        return GEM_ERR_FORMAT;
    return int_at(kv->arr_type, kv->data + i * eb, out);
}

gem_status gem_gguf_arr_f64(const gem_gguf_kv *kv, uint64_t i, double *out)
{
    if (!kv || !out)
        return GEM_ERR_NULL;
    if (kv->type != GEM_GGUF_V_ARRAY)
        return GEM_ERR_FORMAT;
    if (i >= kv->n)
        return GEM_ERR_RANGE;
    size_t eb = scalar_bytes(kv->arr_type);
    if (eb == 0)
        return GEM_ERR_FORMAT;
    return real_at(kv->arr_type, kv->data + i * eb, out);
}

gem_status gem_gguf_arr_strings(const gem_gguf_kv *kv, gem_gguf_str *out, uint64_t n)
{
    if (!kv || (!out && kv->n))
        return GEM_ERR_NULL;
    if (kv->type != GEM_GGUF_V_ARRAY || kv->arr_type != GEM_GGUF_V_STRING)
        return GEM_ERR_FORMAT;
    if (n < kv->n)
        return GEM_ERR_RANGE;
    /* Already validated at open: every string lies inside data_bytes. */
    const uint8_t *p = kv->data;
    for (uint64_t i = 0; i < kv->n; i++) {
        out[i].len = le64(p);
        out[i].ptr = (const char *)p + 8;
        p += 8 + out[i].len;
    }
    return GEM_OK;
}
