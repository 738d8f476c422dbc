/*
 * Internal: the arithmetic of the matrix-vector products of matvec.h, apart from how a product
 * is split over a pool (src/model/matvec.c): the rows by the F32 rule, x's digits and the
 * integer products of packed matrices, in src/model/matvec_kernels.c. That file is built once
 * for the compiler's target, or with GEM_CPU_DISPATCH (a build for other machines) four times,
 * for AVX-512 with VNNI, AVX-512, AVX2 with FMA and F16C, and portable C, its functions renamed
 * by GEM_CPU_VARIANT (below); src/model/matvec_dispatch.c then defines the plain names and
 * calls the widest build that the processor runs. Every build gives the same bits (matvec.h's
 * rules), so the choice changes speed alone.
 */
#ifndef GEM_MODEL_MATVEC_KERNELS_H
#define GEM_MODEL_MATVEC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "matvec.h"

#if defined(GEM_CPU_VARIANT) /* one build of several: its names take the suffix _<variant> */
#define MVK_VARIANT_NAME(n) MVK_VARIANT_NAME_(n, GEM_CPU_VARIANT)
#define MVK_VARIANT_NAME_(n, v) MVK_VARIANT_NAME__(n, v)
#define MVK_VARIANT_NAME__(n, v) n##_##v
#define mvk_isa MVK_VARIANT_NAME(mvk_isa)
#define mvk_init MVK_VARIANT_NAME(mvk_init)
#define mvk_quantize MVK_VARIANT_NAME(mvk_quantize)
#define mvk_spans MVK_VARIANT_NAME(mvk_spans)
#define mvk_span_rows MVK_VARIANT_NAME(mvk_span_rows)
#define mvk_rows MVK_VARIANT_NAME(mvk_rows)
#define mvk_row_f32 MVK_VARIANT_NAME(mvk_row_f32)
#endif

#define GROUP_ROWS 16

/* x's block in integers: digits a_j (j = 0..3) of its 32 elements, their sums (whole, and
 * of each 16-element half), the scales 2^(E - 7j) and the block's sum from its digits, sum_x
 * (matvec.h; NaN when a value of the block is not finite). 208 bytes. */
typedef struct xq_block {
    int8_t dig[4][32];
    int32_t sum[4];
    int32_t half_sum[4][2];
    float scale[4];
    float sum_x;
    float pad[3];
} xq_block;

/* A packed block of 16 rows (matvec.h's layouts): Q8_0 and Q4_0 32 columns, Q4_K and Q6_K
 * 256; 16 times the file's block. */
static inline size_t pack_block_bytes(gem_gguf_type t)
{
    return t == GEM_GGUF_Q8_0   ? 544
           : t == GEM_GGUF_Q4_0 ? 288
           : t == GEM_GGUF_Q4_K ? 2304
                                : 3360;
}

/* Columns of a packed block: 32 for Q8_0 and Q4_0, a 256-column super-block for Q4_K and Q6_K. */
static inline int64_t pack_block_cols(gem_gguf_type t)
{
    return t == GEM_GGUF_Q8_0 || t == GEM_GGUF_Q4_0 ? 32 : 256;
}

/* The packed layout of w (matvec.h, mv_pack): its block's bytes and columns, blocks a row,
 * blocks a chunk, groups, and the span. */
typedef struct pk_geom {
    size_t pb;
    int64_t bc, nb, cb, groups, span;
} pk_geom;

static inline pk_geom geom_of(const gem_matrix *w)
{
    pk_geom g;
    g.pb = pack_block_bytes(w->type);
    g.bc = pack_block_cols(w->type);
    g.nb = w->cols / g.bc;
    g.cb = MV_CHUNK_COLS / g.bc;
    g.groups = w->rows / GROUP_ROWS;
    g.span = w->packed_span < 1 ? 1
             : w->packed_span > MV_SPAN_MAX ? MV_SPAN_MAX
                                           : w->packed_span;
    return g;
}

/* Where group grp's blocks of chunk c begin (bytes from the packed base): its span's groups
 * s0 .. s0 + ss - 1 hold s0 * nb blocks before them, the span's earlier chunks cb blocks a
 * group each, and the chunk's earlier groups its width cw each. Every term is below the
 * matrix's bytes (rows * row_bytes, a size_t). */
static inline size_t pk_offset(const pk_geom *g, int64_t grp, int64_t c)
{
    const int64_t s0 = grp / g->span * g->span;
    const int64_t ss = g->groups - s0 < g->span ? g->groups - s0 : g->span;
    const int64_t cw = g->nb - c * g->cb < g->cb ? g->nb - c * g->cb : g->cb;
    return ((size_t)s0 * (size_t)g->nb + (size_t)c * (size_t)g->cb * (size_t)ss +
            (size_t)(grp - s0) * (size_t)cw) *
           g->pb;
}

/* Which paths the products take (gem_model_cpu_products_isa): "avx512-vnni", "avx512" (the
 * F32 rule's rows with AVX-512F, the integer products with AVX2), "avx2" or "portable". */
const char *mvk_isa(void);

/* Prepares the build's tables (the F16 values); every function below calls it too. To call
 * before a product's items start on several threads. */
void mvk_init(void);

/* x (cols, a multiple of 32) into its blocks' digits (matvec.h). x (cols), out (cols / 32). */
void mvk_quantize(const float *x, int64_t cols, xq_block *out);

/* Spans [s0, s1) of a packed w (mv_pack) into y: rows 16 x span x s0 onward (the last span may
 * be short), xb x's digits (w->cols / 32 blocks); each block of w asked for ahead_bytes ahead
 * (0: none) into the L1 (into 1), the L2 (2) or non-temporally (0). y (w->rows). */
void mvk_spans(const gem_matrix *w, const xq_block *xb, float *y, int64_t s0, int64_t s1,
               int64_t ahead_bytes, int into);

/* Span s of a packed w into out (16 rows a group of the span, the span's rows only), without
 * prefetching. xb (w->cols / 32), out (16 x the span's groups). */
void mvk_span_rows(const gem_matrix *w, const xq_block *xb, int64_t s, float *out);

/* y[r] for r in [r0, r1) by the F32 rule (w as the file holds it), asking before each row for
 * the row `ahead` rows later (0: none) into the place of `into` (mvk_spans). x (w->cols),
 * y (w->rows). */
void mvk_rows(const gem_matrix *w, const float *x, float *y, int64_t r0, int64_t r1,
              int64_t ahead, int into);

/* Row r of w (as the file holds it) dequantized into dst (w->cols). */
void mvk_row_f32(const gem_matrix *w, int64_t r, float *dst);

/* The builds of the products that this library holds and this processor runs, widest first:
 * with GEM_CPU_DISPATCH up to four (mvk_isa's names), else the one build. Writes at most max
 * names (static strings) into names and returns how many there are. names (max). The build
 * chosen by default is the first. */
int mvk_builds(const char **names, int max);

/* Makes `name`, one of mvk_builds' names, the build that every later product runs (the tests
 * hold each build to the rules in one process). Returns 0, or -1 (nothing changed) for another
 * name. Not to be called while products run. */
int mvk_use(const char *name);

#endif
