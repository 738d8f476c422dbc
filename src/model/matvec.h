/*
 * Internal: matrix-vector products of GGUF weight matrices with F32 vectors.
 * A matrix as the file holds it (packed NULL): each output row is one dot product
 * of the row's exactly dequantized weights (gem_gguf_dequant's values) with x,
 * accumulated by fused multiply-adds in 64 float lanes in element order and summed
 * by a fixed tree. A packed Q8_0 matrix: the integer products below. Either way the
 * same bits on every call and for any thread count (a row is never split between
 * threads).
 */
#ifndef GEM_MODEL_MATVEC_H
#define GEM_MODEL_MATVEC_H

#include <stdint.h>

#include "gem/model.h"
#include "cpu_pool.h"

/*
 * Integer products (a Q8_0, Q4_0, Q4_K or Q6_K matrix with `packed` set, see mv_pack): the
 * rows in groups of 16 and x as integers. Each 32-element block of x gets an exponent E (its largest
 * |x| / 2^E in [32, 64)) and four signed 8-bit digits per element, x = 2^E (a0 + a1 / 128 +
 * a2 / 128^2 + a3 / 128^3) + r with |r| <= 2^-27 of the block's largest |x| (the digits of
 * the CUDA tile product, src/model/cuda/tiles_arith.cuh), and sum_x = float(A) 2^(E - 21),
 * A = ((A_0 128 + A_1) 128 + A_2) 128 + A_3 the exact combination of the digit sums A_j.
 * Per row and 32-element block the four sums S_j = sum_k q_k a_jk are exact integers (q the
 * Q8_0 quant, n - 8 for the Q4_0 nibble n, the Q4_K nibble n itself, u - 32 for the Q6_K
 * 6-bit u, over each 16-element half), and the row's one F32 accumulator takes, block by block
 * in element order:
 *   Q8_0, Q4_0: acc = fmaf(d * 2^(E - 7j), S_j, acc) for j = 0..3;
 *   Q4_K (weight d1 n - dm1 in its sub-block, d1 = d * sc, dm1 = dmin * m as gem_gguf_dequant
 *         computes them): acc = fmaf(d1 * 2^(E - 7j), S_j, acc) for j = 0..3, then
 *         acc = fmaf(-dm1, sum_x, acc);
 *   Q6_K (weight (d * sc) (u - 32), sc per 16 elements): for each half e, its ds = d * sc:
 *         acc = fmaf(ds * 2^(E - 7j), S_je, acc) for j = 0..3.
 * The products d * 2^(E - 7j) are exact, and so is each one with S_j inside its fma: the
 * roundings are the fma additions (and sum_x's one) and the digits' 2^-27. A block of x with
 * a value that is not finite makes every row NaN. Q4_K's two terms are each larger than their
 * sum where d1 n and dm1 nearly cancel, so with |x| near the largest float they can overflow
 * where the F32 rule's d1 n - dm1 would not. The same bits on every call, for any thread
 * count and any split of the rows, with or without AVX512-VNNI.
 */

/* Scratch of the integer products: the digits of one x of `cols` columns (a multiple of
 * 32), 208 bytes a block. */
size_t mv_xq_bytes(int64_t cols);

/* Caller-owned scratch for the products: `bytes` at `buf` (64-byte aligned). A product of a
 * packed matrix needs mv_xq_bytes(cols) of it (a batch, that much per distinct x); a batch of
 * unpacked matrices needs none (buf may be NULL). */
typedef struct mv_scratch {
    void *buf;
    size_t bytes;
} mv_scratch;

/* 1 when w can be packed for the integer products: Q8_0, Q4_0, Q4_K or Q6_K, rows a multiple
 * of 16. */
int mv_packable(const gem_matrix *w);

/* The packed layout of a packable w into dst (w->rows * w->row_bytes bytes, 64-byte aligned),
 * its span S = w->packed_span (0 taken as 1, at most MV_SPAN_MAX): the groups of 16 rows lie
 * in spans of S (the last may hold fewer), span after span; within a span, the columns in
 * chunks of MV_CHUNK_COLS (the last may be narrower), chunk after chunk, and within a chunk
 * the span's groups one after another, each its blocks of the chunk in column order. A
 * product then reads a span's bytes in order while each chunk of x's digits (6.5 KB) serves
 * every group of the span from the L1. With S = 1, or at most MV_CHUNK_COLS columns, group g
 * (rows 16g .. 16g + 15), block b (columns 32b .. 32b + 31) lies at byte (g * cols / 32 + b) *
 * B. A block: the 16 rows' f16 scales d (32 bytes, row order), then vectors of
 * 64 bytes, vector k holding at bytes 4r .. 4r + 3 row r's bytes 4k .. 4k + 3 of the block's
 * quants. Q8_0 (B = 544): 8 vectors, each quant plus 128 as an unsigned byte. Q4_0 (B = 288):
 * 4 vectors of the file's bytes (low nibbles elements 4k .. 4k + 3, high nibbles 16 + 4k ..
 * 16 + 4k + 3). Q4_K, per super-block of 256 columns (2304 bytes): the 16 rows' d (32 bytes)
 * and dmin (32), their 12 bytes of packed scales byte by byte (byte i of row r at 64 + 16i +
 * r), then for each pair i of sub-blocks 8 vectors of the 32 bytes of qs that hold them (low
 * nibbles sub-block 2i, high 2i + 1). Q6_K, per super-block (3360 bytes): d (32), the 16
 * scales byte by byte (scale i of row r at 32 + 16i + r), then for each 128-element half h the
 * 64 bytes of ql (16 vectors at 288 + 1024h) and the 32 of qh (8 vectors at 2336 + 512h). The
 * caller then sets w->packed = dst. */
void mv_pack(const gem_matrix *w, void *dst);

/* Spans of groups (mv_pack) and chunks of columns of the packed layout. */
#define MV_SPAN_MAX 8
#define MV_CHUNK_COLS 1024

/* The span to pack w with when its products run on a pool of `threads` threads: on an AMD
 * processor (CPUID vendor AuthenticAMD) the widest of 8, 4, 2 and 1 that still gives every range
 * of the product's split (threads x the library's ranges a thread) a span of its own; 1 when w
 * has at most MV_CHUNK_COLS columns (one chunk: the spans change nothing) and on every other
 * processor (measured slower on the Intel Xeon). Any span gives the same bits. */
int64_t mv_span_for(const gem_matrix *w, int64_t threads);

/* y[r] = sum_i W[r, i] * x[i] for r in [r0, r1).  x (w->cols), y (w->rows). GEM_ERR_RANGE
 * when w is packed and s holds less than mv_xq_bytes(w->cols) (nothing written). */
gem_status mv_rows(const gem_matrix *w, const float *x, const mv_scratch *s, float *y, int64_t r0,
                   int64_t r1);

/* The whole product on the pool (a row, or a group of 16 rows of a packed matrix, is
 * computed whole by one item). Scratch and status as mv_rows. */
gem_status mv(cpu_pool *p, const gem_matrix *w, const float *x, const mv_scratch *s, float *y);

/* Several products that share nothing but the pool, run as one batch of items
 * (e.g. the gate and up projections). w (n <= 8), x (n), y (n). GEM_ERR_RANGE when the
 * scratch is short for the packed matrices' distinct x (nothing written). */
gem_status mv_batch(cpu_pool *p, int n, const gem_matrix *const *w, const float *const *x,
                    const mv_scratch *s, float *const *y);

/* Called by the item that computed rows [r0, r1) of a shared split (mv_pair), on the thread
 * that computed them, once those rows of every product are written. */
typedef void (*mv_rows_fn)(void *ctx, int64_t r0, int64_t r1);

/* Called by the item that computed rows [r0, r1) of product k of a batch (mv_batch_then), on the
 * thread that computed them, once they are written. */
typedef void (*mv_batch_rows_fn)(void *ctx, int k, int64_t r0, int64_t r1);

/* mv_batch whose items call done(done_ctx, k, r0, r1) on the rows of product k they computed,
 * right after them (a product's rows are handed over in ranges of whole rows, or whole 16-row
 * groups when packed; every row of every product exactly once, from the thread that computed
 * it), so that a step on groups of rows (the per-head norms after q, k and v) runs as soon as
 * its rows are there, inside the products' run. The bits of mv_batch; GEM_ERR_PARAM when done
 * is NULL; scratch as mv_batch. */
gem_status mv_batch_then(cpu_pool *p, int n, const gem_matrix *const *w, const float *const *x,
                         const mv_scratch *s, float *const *y, mv_batch_rows_fn done,
                         void *done_ctx);

/* 1 when a and b have one shape, type and layout (rows, cols, type, row bytes, packed or not,
 * the packed span), so that mv_pair can split them together. */
int mv_pairable(const gem_matrix *a, const gem_matrix *b);

/* ya = a x and yb = b x (x (a->cols), ya and yb (a->rows)) as one run of items over a split of
 * a's bytes: each item computes the same rows of both products (whole groups of 16 rows when
 * packed), then calls done(done_ctx, r0, r1) on them, so that an elementwise step on the two
 * results (GeGLU's activation) runs on the item's rows while other items still stream. Every
 * row's bits are those of mv_batch of the two; done sees each row exactly once, from one
 * thread. GEM_ERR_PARAM when done is NULL or a and b are not pairable; scratch as mv_batch. */
gem_status mv_pair(cpu_pool *p, const gem_matrix *a, const gem_matrix *b, const float *x,
                   const mv_scratch *s, float *ya, float *yb, mv_rows_fn done, void *done_ctx);

/* How a batch runs (dev/cpu/mv_split measures these; none changes a bit of the result):
 * its bytes split into threads * parts_per_thread contiguous ranges (items taken in turn
 * from the pool's counter), and each thread asking for the rows that start prefetch_bytes
 * past the row it computes (0: no prefetch; negative: the library's default for each
 * matrix's type on this processor, what mv_batch takes). */
typedef struct mv_tuning {
    int64_t parts_per_thread; /* [1, 64] */
    int64_t prefetch_bytes;   /* [0, 2^30], or negative for the default */
    int prefetch_into;        /* 1: L1 (prefetcht0), 2: L2 (prefetcht1), 0: non-temporal */
    /* 0: the parts_per_thread equal ranges. L in [2, 8]: a tapered split of threads * L
     * ranges instead, taken in this order: threads ranges of half a thread's share, threads of
     * a quarter, ..., the last two levels equal (a share / 2^(L-1) each), so the ranges left
     * when the counter runs out are short and the threads end together. */
    int64_t taper_levels;
    /* With a tapered split, its first owned_levels levels (0 to the taper's levels) have
     * owners: thread t computes items t, T + t, .. of them first (cpu_pool_run_owned), the
     * bytes mv_ahead_step preloads into thread t's cache while it waits. */
    int64_t owned_levels;
    /* x's digits of a packed product with at least this many columns are computed by the
     * run's items (each claims blocks of them, computes them and waits for the rest, before
     * its rows), not by the caller before the run; 0: always by the caller. */
    int64_t xq_items_cols;
} mv_tuning;

/* mv_batch under the tuning t (clamped to the ranges above). */
gem_status mv_batch_tuned(cpu_pool *p, int n, const gem_matrix *const *w, const float *const *x,
                          const mv_scratch *s, float *const *y, const mv_tuning *t);

/* Which bytes of a batch each thread's owned items read (mv_batch or mv_pair on a pool of
 * `threads` threads with the library's tuning): the preload plan of the batch, filled by
 * mv_ahead_plan or mv_ahead_plan_pair. */
typedef struct mv_ahead {
    int n;
    const gem_matrix *w[8];
    /* where product k's rows start in the split's bytes, [n] = the bytes split: laid end to
     * end (mv_batch), or all at 0 with [n] = w[0]'s bytes (mv_pair's shared split) */
    size_t first_byte[9];
    int64_t threads, taper, owned_levels;
    size_t budget; /* the most bytes a thread preloads */
} mv_ahead;

/* The plan of the batch w (n in [1, 8]) for a pool of `threads` threads; GEM_ERR_PARAM for
 * a bad n or threads < 1. A batch that mv_batch runs on the calling thread (small, or one
 * thread) gets an empty plan. */
gem_status mv_ahead_plan(mv_ahead *a, int n, const gem_matrix *const *w, int64_t threads);

/* The plan of mv_pair(wa, wb) for a pool of `threads` threads; GEM_ERR_PARAM when the two are
 * not pairable or threads < 1. */
gem_status mv_ahead_plan_pair(mv_ahead *a, const gem_matrix *wa, const gem_matrix *wb,
                              int64_t threads);

/* Asks for the next at most `step` bytes that thread's owned items of the batch read (their
 * units' bytes, item after item, in memory order), from byte *done of them on and below the
 * plan's budget, into the core's caches (a load of one byte a line; reads and writes nothing
 * else) and adds them to *done. Returns the bytes asked for: 0 when none are left. */
size_t mv_ahead_step(const mv_ahead *a, int64_t thread, size_t *done, size_t step);

/* Row r of w dequantized into dst (w->cols). */
void mv_row_f32(const gem_matrix *w, int64_t r, float *dst);

#endif /* GEM_MODEL_MATVEC_H */
