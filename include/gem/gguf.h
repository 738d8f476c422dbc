/*
 * gem gguf: a reader for GGUF version 3 model files (and a small writer).
 *
 * The reader maps the file read-only and validates the whole header before it
 * answers anything: magic, version, every key/value pair (types, lengths,
 * UTF-8-free byte strings, nested arrays refused), every tensor record (name
 * length, at most four dimensions, positive extents, a known element type, the
 * row length a multiple of the type's block), the alignment, and that every
 * tensor's bytes lie inside the file without overlapping another tensor. Every
 * size and offset is computed with checked arithmetic against the file size,
 * so a truncated or hostile file answers GEM_ERR_FORMAT with one line, never a
 * crash. Pointers handed out (strings, arrays, tensor data) point into the
 * mapping and live until gem_gguf_close.
 *
 * Layout of a GGUF file (little-endian):
 *   "GGUF" u32 version=3, i64 n_tensors, i64 n_kv,
 *   n_kv x (string key, u32 type, value), n_tensors x (string name, u32 n_dims,
 *   i64 ne[n_dims], u32 type, u64 offset), padding to `general.alignment`
 *   (default 32), then the data section; tensor offsets are relative to it and
 *   multiples of the alignment. A string is u64 length + bytes (no NUL).
 *
 * Element types and their blocks, as ggml defines them (GEM_GGUF_*):
 *   F32 1x4 B, F16 1x2 B, BF16 1x2 B,
 *   Q8_0 32 elements in 34 B: f16 d, i8 q[32];            x = q * d
 *   Q4_0 32 elements in 18 B: f16 d, u8 q[16];            x[j] = (lo(q[j]) - 8) * d,
 *                                                         x[j+16] = (hi(q[j]) - 8) * d
 *   Q4_K 256 elements in 144 B: f16 d, f16 dmin, u8 scales[12] (8 six-bit scale/min
 *        pairs), u8 q[128]; x = d*sc * q - dmin*m per 32-element sub-block
 *   Q6_K 256 elements in 210 B: u8 ql[128], u8 qh[64], i8 scales[16], f16 d;
 *        x = d * scale * (q6 - 32) per 16-element group
 */
#ifndef GEM_GGUF_H
#define GEM_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "gem/attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Value types of metadata (the GGUF numbering). */
typedef enum gem_gguf_vtype {
    GEM_GGUF_V_U8 = 0,
    GEM_GGUF_V_I8 = 1,
    GEM_GGUF_V_U16 = 2,
    GEM_GGUF_V_I16 = 3,
    GEM_GGUF_V_U32 = 4,
    GEM_GGUF_V_I32 = 5,
    GEM_GGUF_V_F32 = 6,
    GEM_GGUF_V_BOOL = 7,
    GEM_GGUF_V_STRING = 8,
    GEM_GGUF_V_ARRAY = 9,
    GEM_GGUF_V_U64 = 10,
    GEM_GGUF_V_I64 = 11,
    GEM_GGUF_V_F64 = 12,
    GEM_GGUF_V_COUNT
} gem_gguf_vtype;

/* Tensor element types gem reads (the ggml numbering); others are refused. */
typedef enum gem_gguf_type {
    GEM_GGUF_F32 = 0,
    GEM_GGUF_F16 = 1,
    GEM_GGUF_Q4_0 = 2,
    GEM_GGUF_Q8_0 = 8,
    GEM_GGUF_Q4_K = 12,
    GEM_GGUF_Q6_K = 14,
    GEM_GGUF_BF16 = 30
} gem_gguf_type;

#define GEM_GGUF_MAX_DIMS 4
#define GEM_GGUF_MAX_NAME 64 /* tensor names are shorter than this (ggml's limit) */
#define GEM_GGUF_DEFAULT_ALIGNMENT 32
#define GEM_GGUF_ERR_LEN 256

/* A byte string inside the mapping; not NUL-terminated. */
typedef struct gem_gguf_str {
    const char *ptr;
    uint64_t len;
} gem_gguf_str;

/* One metadata pair. For arrays, `arr_type` is the element type, `n` the count
 * and `data` the first element; for scalars n = 1 and `data` the value. Strings
 * of a string array are reached with gem_gguf_arr_strings. */
typedef struct gem_gguf_kv {
    gem_gguf_str key;
    gem_gguf_vtype type;
    gem_gguf_vtype arr_type; /* element type when type == ARRAY, else == type */
    uint64_t n;
    const uint8_t *data;
    uint64_t data_bytes; /* bytes of the value (or of all elements) in the file */
} gem_gguf_kv;

/* One tensor record, validated. */
typedef struct gem_gguf_tensor {
    char name[GEM_GGUF_MAX_NAME];
    uint32_t n_dims;
    int64_t ne[GEM_GGUF_MAX_DIMS]; /* ne[0] is the row length (contiguous); unused dims are 1 */
    gem_gguf_type type;
    uint64_t offset;     /* from the start of the data section */
    size_t bytes;        /* ggml_nbytes: rows * row bytes */
    const void *data;    /* in the mapping */
} gem_gguf_tensor;

typedef struct gem_gguf gem_gguf;

/* Opens and validates `path` (mapped read-only). On error returns
 * GEM_ERR_IO (cannot open/map), GEM_ERR_FORMAT (malformed: err says where and
 * what), GEM_ERR_UNSUPPORTED (a valid file using an element type or version
 * gem does not read) or GEM_ERR_NOMEM; *out is NULL and err (errlen bytes, may
 * be NULL) holds one line without a newline. */
gem_status gem_gguf_open(const char *path, gem_gguf **out, char *err, size_t errlen);

/* The same on a caller's buffer (not copied; must outlive the handle). */
gem_status gem_gguf_open_buffer(const void *buf, size_t bytes, gem_gguf **out, char *err,
                                size_t errlen);

/* Unmaps and frees; NULL is fine. */
void gem_gguf_close(gem_gguf *g);

/* Counts, the alignment, the file's bytes and its base address. */
int64_t gem_gguf_n_kv(const gem_gguf *g);
int64_t gem_gguf_n_tensors(const gem_gguf *g);
uint64_t gem_gguf_alignment(const gem_gguf *g);
size_t gem_gguf_file_bytes(const gem_gguf *g);
const void *gem_gguf_file_data(const gem_gguf *g);

/* Pair i (0 <= i < n_kv) or NULL; the pair named `key` or NULL. */
const gem_gguf_kv *gem_gguf_kv_at(const gem_gguf *g, int64_t i);
const gem_gguf_kv *gem_gguf_find(const gem_gguf *g, const char *key);

/* Tensor i or NULL; the tensor named `name` or NULL. */
const gem_gguf_tensor *gem_gguf_tensor_at(const gem_gguf *g, int64_t i);
const gem_gguf_tensor *gem_gguf_find_tensor(const gem_gguf *g, const char *name);

/* Typed reads of a scalar pair, converting between integer widths (and from
 * BOOL) when the value fits, and F32 <-> F64 for reals. GEM_ERR_RANGE when
 * `key` is absent, GEM_ERR_FORMAT for a wrong type or a value that does not fit
 * (err, errlen: one line, may be NULL). */
gem_status gem_gguf_get_i64(const gem_gguf *g, const char *key, int64_t *out, char *err,
                            size_t errlen);
gem_status gem_gguf_get_f64(const gem_gguf *g, const char *key, double *out, char *err,
                            size_t errlen);
gem_status gem_gguf_get_bool(const gem_gguf *g, const char *key, int *out, char *err,
                             size_t errlen);
gem_status gem_gguf_get_str(const gem_gguf *g, const char *key, gem_gguf_str *out, char *err,
                            size_t errlen);

/* Integer (or BOOL) element i of an array pair as int64 (checked, exact);
 * real element i as double. GEM_ERR_FORMAT / GEM_ERR_RANGE as above. */
gem_status gem_gguf_arr_i64(const gem_gguf_kv *kv, uint64_t i, int64_t *out);
gem_status gem_gguf_arr_f64(const gem_gguf_kv *kv, uint64_t i, double *out);

/* The strings of a string-array pair: out (n) receives kv->n entries.
 * GEM_ERR_FORMAT when kv is not a string array, GEM_ERR_RANGE when n < kv->n. */
gem_status gem_gguf_arr_strings(const gem_gguf_kv *kv, gem_gguf_str *out, uint64_t n);

/* 1 when s equals the NUL-terminated c. */
int gem_gguf_str_eq(gem_gguf_str s, const char *c);

/* ---- element types and dequantization --------------------------------------- */

/* Name ("f32", "q4_k", ...) of a type gem reads; NULL otherwise. */
const char *gem_gguf_type_name(uint32_t type);
/* Parses a name as printed by gem_gguf_type_name. GEM_ERR_PARAM if unknown. */
gem_status gem_gguf_type_parse(const char *name, gem_gguf_type *out);
/* Elements per block and bytes per block of a type gem reads: GEM_OK, or
 * GEM_ERR_UNSUPPORTED for any other value. */
gem_status gem_gguf_type_block(uint32_t type, int64_t *block_elems, size_t *block_bytes);
/* Bytes of a row of n elements (n a multiple of the block; GEM_ERR_SHAPE
 * otherwise), checked (GEM_ERR_OVERFLOW). */
gem_status gem_gguf_row_bytes(uint32_t type, int64_t n, size_t *bytes);

/* IEEE half and bfloat16 to float, exactly. */
float gem_gguf_f16_to_f32(uint16_t h);
float gem_gguf_bf16_to_f32(uint16_t b);
/* Float to half (round to nearest even, overflow to infinity) and to bfloat16
 * (round to nearest even; NaN stays NaN). */
uint16_t gem_gguf_f32_to_f16(float f);
uint16_t gem_gguf_f32_to_bf16(float f);

/* Dequantizes n elements (a multiple of the block) of `type` from src
 * (row bytes as gem_gguf_row_bytes) into dst (n floats), with ggml's float
 * arithmetic operation for operation, so the values are bit-identical to
 * ggml's dequantize_row_*. GEM_ERR_UNSUPPORTED / GEM_ERR_SHAPE. */
gem_status gem_gguf_dequant(uint32_t type, const void *src, float *dst, int64_t n);

/* Quantizes n floats (a multiple of the block) into dst (row bytes) with a
 * simple round-to-nearest scheme: valid blocks of `type`, meant for synthetic
 * files and tests, not for quality. Q6_K is written too. */
gem_status gem_gguf_quantize(uint32_t type, const float *src, void *dst, int64_t n);

/* ---- writer -------------------------------------------------------------------
 * Builds a GGUF v3 file: add metadata and tensor records, then write. Tensor data
 * is produced by a callback at write time, one tensor at a time, so files larger
 * than memory can be written. */

typedef struct gem_gguf_writer gem_gguf_writer;

/* Produces tensor `index`'s bytes (`bytes` of them) into dst. Returns 0 on success. */
typedef int (*gem_gguf_fill_fn)(void *user, int64_t index, void *dst, size_t bytes);

gem_status gem_gguf_writer_create(gem_gguf_writer **out);
void gem_gguf_writer_free(gem_gguf_writer *w);

/* Scalars and arrays (copied). Keys must be unique (GEM_ERR_PARAM otherwise). */
gem_status gem_gguf_writer_u32(gem_gguf_writer *w, const char *key, uint32_t v);
gem_status gem_gguf_writer_i32(gem_gguf_writer *w, const char *key, int32_t v);
gem_status gem_gguf_writer_f32(gem_gguf_writer *w, const char *key, float v);
gem_status gem_gguf_writer_bool(gem_gguf_writer *w, const char *key, int v);
gem_status gem_gguf_writer_str(gem_gguf_writer *w, const char *key, const char *v);
/* arr (n) elements of vtype U8..F64 except STRING/ARRAY; BOOL elements are bytes. */
gem_status gem_gguf_writer_arr(gem_gguf_writer *w, const char *key, gem_gguf_vtype vtype,
                               const void *arr, uint64_t n);
/* strs (n) byte strings with lens (n) lengths. */
gem_status gem_gguf_writer_arr_str(gem_gguf_writer *w, const char *key, const char *const *strs,
                                   const uint64_t *lens, uint64_t n);
/* A tensor record: ne (n_dims) extents, ne[0] the row length. */
gem_status gem_gguf_writer_tensor(gem_gguf_writer *w, const char *name, gem_gguf_type type,
                                  uint32_t n_dims, const int64_t *ne);
/* Leaves tensor `index` (record order) out: fill is not called for it and its bytes are a
 * hole in the file (zeros when read, no disk space where the file system keeps sparse
 * files). GEM_ERR_RANGE for an index without a record. */
gem_status gem_gguf_writer_hole(gem_gguf_writer *w, int64_t index);
/* Writes the file (alignment 32); fill is called once per tensor in record order, holes
 * excepted. */
gem_status gem_gguf_writer_write(gem_gguf_writer *w, const char *path, gem_gguf_fill_fn fill,
                                 void *user, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* GEM_GGUF_H */
