/*
 * Matrix-vector products on GGUF weights (see matvec.h): how a product, or a batch of them,
 * is split into items over a pool, x's digits computed by the items, the packed layout and
 * the preloads ahead of a product. The arithmetic is matvec_kernels.c's (matvec_kernels.h),
 * in one build or in several chosen at run time.
 */
#define _DEFAULT_SOURCE 1 /* sysconf(_SC_LEVEL2_CACHE_SIZE) */
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "matvec_kernels.h"

#define MV_INLINE_BYTES (256u << 10) /* weights below this run on the calling thread */
/* The library's mv_tuning, from dev/cpu/mv_split on the H200 host's 16-core Xeon (run 49, a
 * token of the 2gb preset's products, 2.0 GB of Q8_0): 4 ranges a thread, each thread asking
 * for the row 4 KiB ahead into L2: 23.7 ms against 33.6 for one range and no prefetch (71%
 * against 50% of the probe). One core from DRAM: 347 -> 254 ms at 16 KiB (run 48).
 * Q8_0 on AMD processors takes no prefetch (mv_prefetch_bytes): on the AMD EPYC (Zen 4)
 * development VM's 2 cores, whose integer Q8_0 product computes 37 GB/s in the L2 and so waits
 * on memory, the same program read 35.2 GB/s without it against 33.0 with it, and whole tokens
 * of the 2gb preset took 0.78-0.99 of the time (processes A B B A, contexts 64 and 1,024, both
 * routes, five sets; a process's products took 32-35 ms, or 46-49 while the shared host was
 * busy, against 44-52 for every process with the prefetch); the arithmetic-heavier types lost
 * without it, Q4_0 1.05, Q4_K 1.13-1.14, Q6_K 1.83-1.89 (results/cpu/model/speed/prefetch-amd). */
#define MV_PARTS_PER_THREAD 4
/* The split is tapered (mv_tuning): 6 levels, ranges of 1/2, 1/4, .., 1/32, 1/32 of a thread's
 * share. Run 154 (dev/cpu/mv_chain on the Xeon) found each dispatch of 4 equal ranges a thread
 * ending ragged: threads busy 79-85% of it, the last ending 37 us after the median one in
 * q/k/v's 154 us, about one range's time. */
#define MV_TAPER_LEVELS 6
/* The first 2 levels (3/4 of the bytes) of a product's split have owners, so that a thread can
 * preload its items into its L2 while it waits (mv_ahead_step). Run 160 (dev/cpu/token_ahead
 * on the Xeon host, 16 threads, the 2gb preset): owned items alone 0.98-1.03 of the plain split,
 * owned and preloaded 0.92-0.94 in one process; whole tokens (processes A B B A x 3) 19.7
 * against 22.4 ms at context 64 and 33.9 against 36.0 at 1,024 (results/h200/run160). */
#define MV_OWNED_LEVELS 2
#define MV_PREFETCH_BYTES 4096
#define MV_PREFETCH_INTO 2
/* x's digits by the items from this many columns (mv_tuning's xq_items_cols; 0 would leave them
 * to the caller). The caller's serial digits of 8,192 columns take about 5 us on the AMD EPYC
 * VM while the other threads wait. dev/cpu/mv_split on the Xeon host's 16 threads (a token of
 * the 2gb preset's products, run 177): by the items from 2,048 columns 0.956-1.004 of the
 * caller's time in seven processes (median 0.983, six below 1). Below 2,048 the caller's
 * quantization takes about a microsecond. */
#define MV_XQ_ITEMS_COLS 2048

/* The library's tuning (mv_batch, mv_batch_then, mv_pair). */
static const mv_tuning library_tuning = {MV_PARTS_PER_THREAD, -1, MV_PREFETCH_INTO,
                                         MV_TAPER_LEVELS, MV_OWNED_LEVELS, MV_XQ_ITEMS_COLS};

/* 1 on a processor whose CPUID vendor is AuthenticAMD, else 0; asked once (CPUID traps to the
 * hypervisor on a virtual machine). Two threads that ask at once store the same answer. */
static int mv_amd(void)
{
    static int known = -1;
    int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (v >= 0)
        return v;
    v = 0;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0, &a, &b, &c, &d))
        v = b == 0x68747541u && d == 0x69746E65u && c == 0x444D4163u; /* "Auth" "enti" "cAMD" */
#endif
    __atomic_store_n(&known, v, __ATOMIC_RELAXED);
    return v;
}

/* The default prefetch distance of a product of type t on this processor (bytes; 0: none). */
static int64_t mv_prefetch_bytes(gem_gguf_type t)
{
    return t == GEM_GGUF_Q8_0 && mv_amd() ? 0 : MV_PREFETCH_BYTES;
}

size_t mv_xq_bytes(int64_t cols) { return cols < 0 ? 0 : (size_t)(cols / 32) * sizeof(xq_block); }

/* Block b of group grp in the packed copy at dst. */
static uint8_t *pk_block(void *dst, const pk_geom *g, int64_t grp, int64_t b)
{
    return (uint8_t *)dst + pk_offset(g, grp, b / g->cb) + (size_t)(b % g->cb) * g->pb;
}


int mv_packable(const gem_matrix *w)
{
    const gem_gguf_type t = w->type;
    if (t != GEM_GGUF_Q8_0 && t != GEM_GGUF_Q4_0 && t != GEM_GGUF_Q4_K && t != GEM_GGUF_Q6_K)
        return 0;
    const int64_t be = t == GEM_GGUF_Q8_0 || t == GEM_GGUF_Q4_0 ? 32 : 256; /* a file block */
    return w->rows > 0 && w->rows % GROUP_ROWS == 0 && w->cols > 0 && w->cols % be == 0 &&
           w->row_bytes == (size_t)(w->cols / be) * (pack_block_bytes(t) / GROUP_ROWS);
}

/* Q6_K: the 16 rows' super-block sb into o (3360 bytes). */
static void pack_q6_k(const uint8_t *rows, size_t rb, int64_t sb, uint8_t *o)
{
    for (int r = 0; r < GROUP_ROWS; r++) {
        const uint8_t *blk = rows + (size_t)r * rb + (size_t)sb * 210;
        memcpy(o + 2 * r, blk + 208, 2);   /* d */
        for (int i = 0; i < 16; i++)       /* the 16 scales, scale i of every row */
            o[32 + 16 * i + r] = blk[192 + i];
        for (int h = 0; h < 2; h++) {      /* ql and qh of each 128-element half, 4 a row a vector */
            for (int m = 0; m < 16; m++)
                memcpy(o + 288 + 1024 * h + 64 * m + 4 * r, blk + 64 * h + 4 * m, 4);
            for (int t = 0; t < 8; t++)
                memcpy(o + 2336 + 512 * h + 64 * t + 4 * r, blk + 128 + 32 * h + 4 * t, 4);
        }
    }
}

/* Q4_K: the 16 rows' super-block sb into o (2304 bytes). */
static void pack_q4_k(const uint8_t *rows, size_t rb, int64_t sb, uint8_t *o)
{
    for (int r = 0; r < GROUP_ROWS; r++) {
        const uint8_t *blk = rows + (size_t)r * rb + (size_t)sb * 144;
        memcpy(o + 2 * r, blk, 2);           /* d */
        memcpy(o + 32 + 2 * r, blk + 2, 2);  /* dmin */
        for (int i = 0; i < 12; i++)         /* the packed scales, byte i of every row */
            o[64 + 16 * i + r] = blk[4 + i];
        for (int i = 0; i < 4; i++)          /* qs: pair i's 32 bytes, 4 a row a vector */
            for (int k = 0; k < 8; k++)
                memcpy(o + 256 + 512 * i + 64 * k + 4 * r, blk + 16 + 32 * i + 4 * k, 4);
    }
}

void mv_pack(const gem_matrix *w, void *dst)
{
    const size_t rb = w->row_bytes;
    const pk_geom geo = geom_of(w);
    if (w->type == GEM_GGUF_Q4_K || w->type == GEM_GGUF_Q6_K) {
        const int64_t nsb = w->cols / 256;
        for (int64_t g = 0; g < w->rows / GROUP_ROWS; g++)
            for (int64_t sb = 0; sb < nsb; sb++) {
                const uint8_t *rows = (const uint8_t *)w->data + (size_t)g * GROUP_ROWS * rb;
                uint8_t *o = pk_block(dst, &geo, g, sb);
                if (w->type == GEM_GGUF_Q4_K)
                    pack_q4_k(rows, rb, sb, o);
                else
                    pack_q6_k(rows, rb, sb, o);
            }
        return;
    }
    const int64_t nb = w->cols / 32;
    const int q8 = w->type == GEM_GGUF_Q8_0, nk = q8 ? 8 : 4;
    const size_t bb = q8 ? 34 : 18;
    for (int64_t g = 0; g < w->rows / GROUP_ROWS; g++) {
        const uint8_t *rows = (const uint8_t *)w->data + (size_t)g * GROUP_ROWS * rb;
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *o = pk_block(dst, &geo, g, b);
            for (int r = 0; r < GROUP_ROWS; r++) {
                const uint8_t *blk = rows + (size_t)r * rb + (size_t)b * bb;
                memcpy(o + 2 * r, blk, 2);
                /* Q8_0: q + 128 as a byte; Q4_0: the bytes as they are (low nibble element
                 * 4k + e, high nibble 16 + 4k + e) */
                for (int k = 0; k < nk; k++)
                    for (int e = 0; e < 4; e++)
                        o[32 + 64 * k + 4 * r + e] =
                            (uint8_t)(blk[2 + 4 * k + e] ^ (q8 ? 0x80 : 0x00));
            }
        }
    }
}

/* From dev/cpu/mv_wide and whole tokens on the 2-core AMD EPYC VM (results/cpu/model/speed/
 * spans): one thread, Q8_0 at the 31B's q shape (8192 x 5376) and o's (1024 x 8192), spans of
 * 2 / 4 / 8 took 0.91-0.92 / 0.88 / 0.80-0.82 of span 1's time; two threads 0.86-0.97 at 8 while
 * the host read fast, 1.0 while it read slowly (then its memory bounds every product); six
 * layers of the 31B's dimensions in Q8_0, whole tokens 0.80 (fused) / 0.84 (baseline). The
 * span's groups must not starve the split: a copy of the kernel over whole-matrix column chunks
 * (each range's groups chunk by chunk, its bytes then short runs far apart) took 1.22-1.65 the
 * time once a range held 1-4 groups, so a span never leaves a range without one. */
int64_t mv_span_for(const gem_matrix *w, int64_t threads)
{
    /* Intel's Xeon (the H200 host, results/h200 runs 154-155): a core reads 10.6-11.4 GB/s at
     * any span, and whole tokens of six layers of the 31B's dimensions in Q8_0 took 1.05 of
     * span 1's time on 16 threads (every product stage 3-8% slower, A B B A A B B A): spans
     * only on AMD processors, as the products' prefetch choice is made. */
    if (!mv_amd() || !mv_packable(w) || w->cols <= MV_CHUNK_COLS)
        return 1;
    const int64_t groups = w->rows / GROUP_ROWS;
    const int64_t cap = (int64_t)1 << 20; /* keeps threads x 4 far from overflow */
    const int64_t t = threads < 1 ? 1 : (threads > cap ? cap : threads);
    const int64_t items = t * MV_PARTS_PER_THREAD;
    for (int64_t s = MV_SPAN_MAX; s > 1; s /= 2)
        if ((groups + s - 1) / s >= items)
            return s;
    return 1;
}

/* Rows ahead for a prefetch distance in bytes: the row that starts at least that far on. */
static int64_t rows_ahead(const gem_matrix *w, int64_t bytes)
{
    return bytes <= 0 ? 0 : (int64_t)(((size_t)bytes + w->row_bytes - 1) / w->row_bytes);
}

/* How a batch's bytes are split into items. */
typedef struct mv_split {
    int64_t parts;   /* items: contiguous byte ranges of the batch */
    int64_t threads; /* the pool's, for a tapered split */
    int64_t taper;   /* 0: parts equal ranges; else levels of a tapered split */
} mv_split;

typedef struct mv_job {
    int n;
    const gem_matrix *const *w;
    const float *const *x;
    const xq_block *xq[8]; /* x's digits for packed w[k] */
    float *const *y;
    /* where product k's rows start in the split's bytes; [n] = the bytes split. Laid end to
     * end (mv_batch), or all at 0 with [n] = w[0]'s bytes when the products share one split
     * (mv_pair: an item computes the same units of every product) */
    size_t first_byte[9];
    mv_split sp;
    int64_t prefetch_bytes; /* -1: each matrix mv_prefetch_bytes of its type */
    int prefetch_into;
    /* x's digits the items compute (mv_tuning's xq_items_cols): xq_sets sets, set i the
     * digits of xq_x[i] into xq_dst[i]; their 32-column blocks numbered end to end
     * (xq_block0[i] the first of set i, xq_block0[i + 1] its end, xq_blocks in all), claimed
     * XQ_CLAIM at a time from xq_next; xq_done counts the blocks written */
    int xq_sets;
    const float *xq_x[8];
    xq_block *xq_dst[8];
    int64_t xq_block0[9], xq_blocks, xq_next, xq_done;
    /* mv_pair's shared split (first_byte above) when set: called on the rows of every product
     * an item computed */
    mv_rows_fn pair_done;
    mv_batch_rows_fn rows_done; /* else NULL, or called on each product's rows an item computed */
    void *done_ctx;
} mv_job;

/* The rows of w that units [u0, u1) hold (16-row groups in spans when packed, else rows). */
static void unit_rows(const gem_matrix *w, int packed, int64_t u0, int64_t u1, int64_t *r0,
                      int64_t *r1)
{
    const int64_t rpu = packed ? geom_of(w).span * GROUP_ROWS : 1;
    *r0 = u0 * rpu;
    *r1 = u1 * rpu < w->rows ? u1 * rpu : w->rows;
}

/* Where range `item` of a split of B bytes starts, in units of B / den: equal ranges
 * (item of parts), or the tapered split of mv_tuning: T ranges of 2^(L-2) units, T of
 * 2^(L-3), ..., two levels of 1 unit, with den = T * 2^(L-1). item in [0, parts]. */
static size_t split_start(const mv_split *j, int64_t item, size_t *den)
{
    if (!j->taper) {
        *den = (size_t)j->parts;
        return (size_t)item;
    }
    const int64_t T = j->threads, L = j->taper;
    const int64_t level = item / T, k = item % T;
    *den = (size_t)T << (L - 1);
    if (level >= L - 1) /* the last level, or item == parts (level L, k 0) */
        return *den - (size_t)T + (size_t)(item - (L - 1) * T);
    /* levels before `level` hold T * (2^(L-1) - 2^(L-1-level)) units */
    return *den - ((size_t)T << (L - 1 - level)) +
           (size_t)k * ((size_t)1 << (L - 2 - level));
}

/* The bytes [*b0, *b1) of a batch of B bytes that item `item` of the split covers. */
static void item_bytes(const mv_split *sp, size_t B, int64_t item, size_t *b0, size_t *b1)
{
    /* floor(s * B / den) as s * (B / den) + floor(s * (B % den) / den), which cannot overflow:
     * s <= den <= 4096 threads x 128, so s * (B % den) < 2^38, and s * (B / den) <= B */
    size_t den = 1;
    const size_t s0 = split_start(sp, item, &den), s1 = split_start(sp, item + 1, &den);
    const size_t bq = B / den, br = B % den;
    *b0 = s0 * bq + s0 * br / den;
    *b1 = s1 * bq + s1 * br / den;
}

/* The units [*u0, *u1) of w (rows, or spans of 16-row groups when packed; the last span may
 * hold fewer groups) whose first byte lies in [b0, b1) of the batch, w's rows starting at
 * byte `start`; *ub the bytes of a unit. */
static void range_units(const gem_matrix *w, int packed, size_t start, size_t b0, size_t b1,
                        int64_t *u0, int64_t *u1, size_t *ub)
{
    const int64_t span = packed ? geom_of(w).span : 1;
    *ub = packed ? (size_t)span * GROUP_ROWS * w->row_bytes : w->row_bytes;
    const int64_t units = packed ? (w->rows / GROUP_ROWS + span - 1) / span : w->rows;
    /* units u with start + u * ub in [b0, b1): u in [ceil((b0 - start) / ub), ...) */
    *u0 = b0 <= start ? 0 : (int64_t)((b0 - start + *ub - 1) / *ub);
    *u1 = b1 <= start ? 0 : (int64_t)((b1 - start + *ub - 1) / *ub);
    *u1 = *u1 < units ? *u1 : units;
}

/* Blocks of x's digits an item claims at a time (about 0.3 us of work). */
#define XQ_CLAIM 8

/* The items' share of x's digits: claim blocks and compute them until none are left, then wait
 * until every claimed block is written (only by threads inside this run, each computing what it
 * claimed, so the wait ends). The counters' acquire and release order the digits' writes
 * before any item's reads. */
static void xq_help(mv_job *j)
{
    int64_t b0;
    while ((b0 = __atomic_fetch_add(&j->xq_next, XQ_CLAIM, __ATOMIC_RELAXED)) < j->xq_blocks) {
        const int64_t b1 = b0 + XQ_CLAIM < j->xq_blocks ? b0 + XQ_CLAIM : j->xq_blocks;
        for (int i = 0; i < j->xq_sets; i++) { /* the part of each set in [b0, b1) */
            const int64_t lo = b0 > j->xq_block0[i] ? b0 : j->xq_block0[i];
            const int64_t hi = b1 < j->xq_block0[i + 1] ? b1 : j->xq_block0[i + 1];
            if (lo < hi) {
                const int64_t o = lo - j->xq_block0[i];
                mvk_quantize(j->xq_x[i] + 32 * o, 32 * (hi - lo), j->xq_dst[i] + o);
            }
        }
        __atomic_fetch_add(&j->xq_done, b1 - b0, __ATOMIC_RELEASE);
    }
    for (unsigned spin = 0; __atomic_load_n(&j->xq_done, __ATOMIC_ACQUIRE) < j->xq_blocks;
         spin++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if (spin >= 4096) /* a claimer without a core of its own (more threads than cores) */
            sched_yield();
    }
}

/* Item `item` of the batch: first its share of x's digits (xq_help), then the units (rows, or
 * 16-row groups of a packed matrix) whose first byte lies in [start(item) * B / den,
 * start(item + 1) * B / den) of the products' units laid end to end (B bytes; split_start), so
 * every unit is computed by exactly one item, whole, and each item streams one contiguous range;
 * rows_done on each product's rows. With a shared split (mv_pair) the same units of every
 * product, then pair_done on their rows. */
static void mv_item(void *ctx, int64_t item, int64_t thread)
{
    (void)thread;
    mv_job *j = ctx;
    if (j->xq_sets)
        xq_help(j);
    size_t b0, b1;
    item_bytes(&j->sp, j->first_byte[j->n], item, &b0, &b1);
    if (j->pair_done) { /* rows [r0, r1) of every product, then pair_done on them */
        const gem_matrix *w = j->w[0];
        int64_t u0, u1, r0, r1;
        size_t ub;
        range_units(w, j->xq[0] != NULL, 0, b0, b1, &u0, &u1, &ub);
        unit_rows(w, j->xq[0] != NULL, u0, u1, &r0, &r1);
        if (r0 >= r1)
            return;
        for (int k = 0; k < j->n; k++) {
            const gem_matrix *wk = j->w[k];
            const int64_t pf =
                j->prefetch_bytes < 0 ? mv_prefetch_bytes(wk->type) : j->prefetch_bytes;
            if (j->xq[k])
                mvk_spans(wk, j->xq[k], j->y[k], u0, u1, pf, j->prefetch_into);
            else
                mvk_rows(wk, j->x[k], j->y[k], r0, r1, rows_ahead(wk, pf), j->prefetch_into);
        }
        j->pair_done(j->done_ctx, r0, r1);
        return;
    }
    for (int k = 0; k < j->n; k++) {
        const gem_matrix *w = j->w[k];
        const int packed = j->xq[k] != NULL;
        int64_t u0, u1;
        size_t ub;
        range_units(w, packed, j->first_byte[k], b0, b1, &u0, &u1, &ub);
        if (u0 >= u1)
            continue;
        const int64_t pf = j->prefetch_bytes < 0 ? mv_prefetch_bytes(w->type) : j->prefetch_bytes;
        if (packed)
            mvk_spans(w, j->xq[k], j->y[k], u0, u1, pf, j->prefetch_into);
        else
            mvk_rows(w, j->x[k], j->y[k], u0, u1, rows_ahead(w, pf), j->prefetch_into);
        if (j->rows_done) {
            int64_t r0, r1;
            unit_rows(w, packed, u0, u1, &r0, &r1);
            j->rows_done(j->done_ctx, k, r0, r1);
        }
    }
}

/* x's digits for each packed product of the batch into the scratch, one set per distinct
 * (x, cols): xq (n). A set of at least items_cols columns is left to the run's items (j, when
 * not NULL: its xq_ fields), the others computed here. GEM_ERR_RANGE when the scratch is short
 * (nothing computed). */
static gem_status quantize_batch(int n, const gem_matrix *const *w, const float *const *x,
                                 const mv_scratch *s, const xq_block **xq, mv_job *j,
                                 int64_t items_cols)
{
    xq_block *dst_of[8];
    int defer[8];
    if (j) {
        j->xq_sets = 0;
        j->xq_blocks = j->xq_next = j->xq_done = 0;
    }
    size_t used = 0;
    for (int k = 0; k < n; k++) {
        xq[k] = NULL;
        dst_of[k] = NULL;
        defer[k] = 0;
        if (!w[k]->packed)
            continue;
        for (int e = 0; e < k && !xq[k]; e++)
            if (xq[e] && x[e] == x[k] && w[e]->cols == w[k]->cols)
                xq[k] = xq[e];
        if (xq[k])
            continue;
        const size_t need = mv_xq_bytes(w[k]->cols);
        if (!s || !s->buf || s->bytes < used || s->bytes - used < need)
            return GEM_ERR_RANGE;
        dst_of[k] = (xq_block *)(void *)((unsigned char *)s->buf + used);
        defer[k] = j && items_cols > 0 && w[k]->cols >= items_cols;
        xq[k] = dst_of[k];
        used += need;
    }
    for (int k = 0; k < n; k++) { /* the sets, each once (xq[k] is its own only for the first) */
        if (!xq[k] || xq[k] != dst_of[k])
            continue;
        if (!defer[k]) {
            mvk_quantize(x[k], w[k]->cols, dst_of[k]);
            continue;
        }
        const int i = j->xq_sets++;
        j->xq_x[i] = x[k];
        j->xq_dst[i] = dst_of[k];
        j->xq_block0[i] = j->xq_blocks;
        j->xq_blocks += w[k]->cols / 32;
        j->xq_block0[i + 1] = j->xq_blocks;
    }
    return GEM_OK;
}

gem_status mv_rows(const gem_matrix *w, const float *x, const mv_scratch *s, float *y, int64_t r0,
                   int64_t r1)
{
    if (r0 >= r1)
        return GEM_OK;
    if (!w->packed) {
        mvk_rows(w, x, y, r0, r1, rows_ahead(w, mv_prefetch_bytes(w->type)),
                      MV_PREFETCH_INTO);
        return GEM_OK;
    }
    const xq_block *xq;
    gem_status st = quantize_batch(1, &w, &x, s, &xq, NULL, 0);
    if (st != GEM_OK)
        return st;
    /* whole spans in place; a span cut by r0 or r1 through a buffer (a row's bits do not
     * depend on the other rows of its span) */
    mvk_init();
    const pk_geom g = geom_of(w);
    const int64_t span_rows = g.span * GROUP_ROWS;
    const int64_t s0 = r0 / span_rows, s1 = (r1 + span_rows - 1) / span_rows;
    for (int64_t sp = s0; sp < s1; sp++) {
        const int64_t lo = sp * span_rows, hi = lo + span_rows < w->rows ? lo + span_rows : w->rows;
        if (lo >= r0 && hi <= r1) {
            mvk_spans(w, xq, y, sp, sp + 1, mv_prefetch_bytes(w->type), MV_PREFETCH_INTO);
            continue;
        }
        float tmp[MV_SPAN_MAX * GROUP_ROWS];
        mvk_span_rows(w, xq, sp, tmp);
        for (int64_t r = lo > r0 ? lo : r0; r < hi && r < r1; r++)
            y[r] = tmp[r - lo];
    }
    return GEM_OK;
}

gem_status mv_batch(cpu_pool *p, int n, const gem_matrix *const *w, const float *const *x,
                    const mv_scratch *s, float *const *y)
{
    return mv_batch_tuned(p, n, w, x, s, y, &library_tuning);
}

/* mv_batch_tuned with rows_done (NULL: none) called on each product's rows an item computed;
 * or with pair_done set the products of mv_pair (one split for all, pair_done on each item's
 * rows). */
static gem_status batch_run(cpu_pool *p, int n, const gem_matrix *const *w, const float *const *x,
                            const mv_scratch *s, float *const *y, const mv_tuning *t,
                            mv_rows_fn pair_done, mv_batch_rows_fn rows_done, void *done_ctx)
{
    if (n < 1 || n > 8)
        return GEM_ERR_PARAM;
    mvk_init(); /* before the pool's threads share the tables */
    const int64_t pf_max = (int64_t)1 << 30;
    const int64_t pf = t->prefetch_bytes < 0 ? -1 /* each matrix its default */
                                             : (t->prefetch_bytes > pf_max ? pf_max
                                                                           : t->prefetch_bytes);
    mv_job j = {.n = n, .w = w, .x = x, .y = y, .prefetch_bytes = pf,
                .prefetch_into = t->prefetch_into, .pair_done = pair_done, .rows_done = pair_done ? NULL : rows_done,
                .done_ctx = done_ctx};
    gem_status st = quantize_batch(n, w, x, s, j.xq, &j, t->xq_items_cols);
    if (st != GEM_OK)
        return st;
    size_t all = 0; /* the batch's bytes */
    for (int k = 0; k < n; k++)
        all += (size_t)w[k]->rows * w[k]->row_bytes;
    if (pair_done)
        j.first_byte[n] = (size_t)w[0]->rows * w[0]->row_bytes;
    else
        for (int k = 0; k < n; k++)
            j.first_byte[k + 1] = j.first_byte[k] + (size_t)w[k]->rows * w[k]->row_bytes;
    /* Small products are not worth waking the pool for (the same bits either way). */
    if (all < MV_INLINE_BYTES || cpu_pool_threads(p) == 1) {
        j.sp.parts = 1;
        mv_item(&j, 0, 0);
        return GEM_OK;
    }
    /* Contiguous ranges, a few per thread: each core streams its rows in order (16-row items
     * taken in turn from a shared counter left each core a stream with gaps and ran at about
     * 60% of the read bandwidth), and one that finishes early takes the next range. */
    const int64_t ppt =
        t->parts_per_thread < 1 ? 1 : (t->parts_per_thread > 64 ? 64 : t->parts_per_thread);
    j.sp.threads = cpu_pool_threads(p);
    j.sp.taper = t->taper_levels < 2 ? 0 : (t->taper_levels > 8 ? 8 : t->taper_levels);
    j.sp.parts = j.sp.threads * (j.sp.taper ? j.sp.taper : ppt);
    const int64_t owned_levels =
        !j.sp.taper || t->owned_levels < 0
            ? 0
            : (t->owned_levels > j.sp.taper ? j.sp.taper : t->owned_levels);
    cpu_pool_run_owned(p, j.sp.parts, owned_levels * j.sp.threads, mv_item, &j);
    return GEM_OK;
}

gem_status mv_batch_tuned(cpu_pool *p, int n, const gem_matrix *const *w, const float *const *x,
                          const mv_scratch *s, float *const *y, const mv_tuning *t)
{
    return batch_run(p, n, w, x, s, y, t, NULL, NULL, NULL);
}

gem_status mv_batch_then(cpu_pool *p, int n, const gem_matrix *const *w, const float *const *x,
                         const mv_scratch *s, float *const *y, mv_batch_rows_fn done,
                         void *done_ctx)
{
    if (!done)
        return GEM_ERR_PARAM;
    return batch_run(p, n, w, x, s, y, &library_tuning, NULL, done, done_ctx);
}

int mv_pairable(const gem_matrix *a, const gem_matrix *b)
{
    if (!a || !b || a->rows != b->rows || a->cols != b->cols || a->type != b->type ||
        a->row_bytes != b->row_bytes || (a->packed == NULL) != (b->packed == NULL))
        return 0;
    return !a->packed || geom_of(a).span == geom_of(b).span;
}

gem_status mv_pair(cpu_pool *p, const gem_matrix *a, const gem_matrix *b, const float *x,
                   const mv_scratch *s, float *ya, float *yb, mv_rows_fn done, void *done_ctx)
{
    if (!done || !mv_pairable(a, b))
        return GEM_ERR_PARAM;
    const gem_matrix *w[2] = {a, b};
    const float *xs[2] = {x, x};
    float *ys[2] = {ya, yb};
    return batch_run(p, 2, w, xs, s, ys, &library_tuning, done, NULL, done_ctx);
}

/* Half of a core's L2 (sysconf), 512 KiB where the system does not say; the rest holds what
 * the thread computes meanwhile. */
static size_t ahead_budget(void)
{
    static size_t known;
    size_t b = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (b)
        return b;
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    b = l2 >= (64 << 10) && l2 <= (64 << 20) ? (size_t)l2 / 2 : (size_t)512 << 10;
    __atomic_store_n(&known, b, __ATOMIC_RELAXED);
    return b;
}

/* mv_ahead_plan; shared: the split of mv_pair (every product's units from byte 0) */
static gem_status ahead_plan(mv_ahead *a, int n, const gem_matrix *const *w, int64_t threads,
                             int shared)
{
    if (!a || !w || n < 1 || n > 8 || threads < 1)
        return GEM_ERR_PARAM;
    memset(a, 0, sizeof *a);
    a->n = n;
    a->threads = threads;
    size_t all = 0;
    for (int k = 0; k < n; k++) {
        a->w[k] = w[k];
        all += (size_t)w[k]->rows * w[k]->row_bytes;
        if (!shared)
            a->first_byte[k + 1] = a->first_byte[k] + (size_t)w[k]->rows * w[k]->row_bytes;
    }
    if (shared)
        a->first_byte[n] = (size_t)w[0]->rows * w[0]->row_bytes;
    /* as mv_batch and mv_pair run it: inline (nothing to preload) or the library's tapered
     * split */
    if (all < MV_INLINE_BYTES || threads == 1)
        return GEM_OK;
    a->taper = MV_TAPER_LEVELS;
    a->owned_levels = MV_OWNED_LEVELS;
    a->budget = ahead_budget();
    return GEM_OK;
}

gem_status mv_ahead_plan(mv_ahead *a, int n, const gem_matrix *const *w, int64_t threads)
{
    return ahead_plan(a, n, w, threads, 0);
}

gem_status mv_ahead_plan_pair(mv_ahead *a, const gem_matrix *wa, const gem_matrix *wb,
                              int64_t threads)
{
    if (!mv_pairable(wa, wb))
        return GEM_ERR_PARAM;
    const gem_matrix *w[2] = {wa, wb};
    return ahead_plan(a, 2, w, threads, 1);
}

size_t mv_ahead_step(const mv_ahead *a, int64_t thread, size_t *done, size_t step)
{
    if (!a || thread < 0 || thread >= a->threads || *done >= a->budget)
        return 0;
    const size_t before = *done;
    const mv_split sp = {a->threads * a->taper, a->threads, a->taper};
    size_t skip = *done; /* bytes of the thread's owned items already asked for */
    size_t left = step < a->budget - *done ? step : a->budget - *done;
    for (int64_t lv = 0; lv < a->owned_levels && left > 0; lv++) {
        size_t b0, b1;
        item_bytes(&sp, a->first_byte[a->n], lv * a->threads + thread, &b0, &b1);
        for (int k = 0; k < a->n && left > 0; k++) {
            const gem_matrix *w = a->w[k];
            const int packed = w->packed != NULL;
            int64_t u0, u1;
            size_t ub;
            range_units(w, packed, a->first_byte[k], b0, b1, &u0, &u1, &ub);
            if (u0 >= u1)
                continue;
            /* the units' bytes: spans lie one after another in the packed copy, rows in the
             * file's order; the last span may be short */
            const size_t total = (size_t)w->rows * w->row_bytes;
            const size_t lo = (size_t)u0 * ub;
            const size_t hi = (size_t)u1 * ub < total ? (size_t)u1 * ub : total;
            if (skip >= hi - lo) {
                skip -= hi - lo;
                continue;
            }
            const uint8_t *base = (const uint8_t *)(packed ? w->packed : w->data) + lo + skip;
            const size_t n = hi - lo - skip < left ? hi - lo - skip : left;
            /* a load a line, kept by the empty asm: on the AMD EPYC VM a later read of 512 KiB
             * took 18.5 us after a burst of prefetcht1 over it, 13.3 after prefetcht0, 6.9
             * after the loads and 26.2 after nothing (dev/cpu/prefetch_burst) */
            unsigned acc = 0;
            for (size_t o = 0; o < n; o += 64)
                acc += base[o];
            __asm__ __volatile__("" : : "r"(acc));
            *done += n;
            left -= n;
            skip = 0;
        }
    }
    return *done - before;
}

gem_status mv(cpu_pool *p, const gem_matrix *w, const float *x, const mv_scratch *s, float *y)
{
    return mv_batch(p, 1, &w, &x, s, &y);
}

void mv_row_f32(const gem_matrix *w, int64_t r, float *dst) { mvk_row_f32(w, r, dst); }

const char *gem_model_cpu_products_isa(void) { return mvk_isa(); }
