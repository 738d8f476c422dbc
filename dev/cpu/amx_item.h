/*
dev/cpu/amx_item.h: the fused work item of 8 query heads over BF16 K and V rows of 512 on
Intel's tile unit (AMX-BF16), exact to F32 the way the CUDA staged pass is.

On the H200 host (Xeon, family 6 model 207: AMX-BF16, AVX512-BF16) the library's BF16 item
takes 336 ns a token a thread on 16 threads with its rows in L2 (results/h200/run84): the
scores and the V update are 512 FMA instructions a token, which the 16 cores issue at 2.8-3.0
G a second each (run 83). The memory floor at 128K needs 235 ns. TDPBF16PS forms a 16 x 16
block of F32 sums of 32 BF16 products each (8,192 products) in one instruction.

The item (one KV head, rows [0, n), 8 query heads), chunk by chunk of CHUNK tokens:
  scores  dot[t][h] = (d0 + d1) + d2, d_i = sum_j K[t][j] q_i[h][j] on the tile unit, where
          q = q_0 + q_1 + q_2 is q split into three BF16 pieces (q_0 = bf16(q), q_1 =
          bf16(q - q_0), q_2 = q - q_0 - q_1, all exact: F32's 24 bits in three of 8): each
          product of a BF16 K element and a piece is exact in F32, as on the CUDA cores.
          A = 16 K rows x 32 elements, straight from the cache (row stride = the cache's);
          B = the pieces in the tile unit's pair layout, columns (piece, head): a tile of 16
          columns for pieces 0 and 1, one of 8 for piece 2.
  softmax cpu_online_tile over the chunk (the library's rule: scale, maxima, alpha, p, S).
          The numerator accumulators are rescaled by alpha when some alpha is not 1.
  value   O_i[h][d] += sum_t p_i[h][t] V[t][d], p = p_0 + p_1 + p_2 split like q, on the
          tile unit: A = the p pieces (rows (piece, head), 32 tokens; 16 rows for pieces 0
          and 1, 8 for piece 2), B = 32 V rows x 16 dims in the pair layout (rows of V
          interleaved two by two, a 32-dim slice of the chunk's rows at a time), C = the
          accumulators of 16 dims, loaded and stored once a chunk and slice.
  end     O[h][d] = (O_0[h][d] + O_1[h][d]) + O_2[h][d].
Every product is exact; the additions are F32 in the tile unit's order (the SDM's: pairs in
order over k), so the item is deterministic. The tile unit treats BF16 subnormal inputs as zero
and flushes subnormal F32 results: a piece or a row element below 2^-126 is lost. That is not
the library's rule (which widens every element exactly), so this is a different route, held to
the double softmax like every other.

Where the compiler has no AMX (the development VM, the CI machine), the tile operations are
emulated in C with the SDM's order, so that the item's logic is checked everywhere; only the
H200 host times the real one (dev/cpu/fused_parts, parts "amx" and "amx-pipe", BF16;
results/h200/run85-93).

Prediction before run 85: 4 TDPs a token (2 for the scores, 2 for the V update) at 16 cycles
each, about 16 cycles of V relayout and 10 of softmax: 50-80 ns a token on one thread, so the
16-thread route would be bound by memory (235 ns a token a thread at 139 GB/s).

Measured on the H200 host, ns a token a thread, the tile item against the library's item in the
same process (rows in L2, 256 tokens a thread; DRAM: 16,384 tokens a thread, neither item
prefetching):
  run 85  one tile shape (16 x 64 bytes) everywhere, V pairs by vpermt2w per 32 rows, the
          accumulators loaded and stored every 32 rows: L2 455 vs 193 (1 thread), 524 vs 281
          (16); DRAM 345 vs 290 (1), 661 vs 557 (16). Exact: every check passed.
  run 86  8-row and 8-column tiles for the third piece (two tile configurations a chunk), V
          unpacked in 128-bit lanes (amx_dim), the accumulators once a chunk, q split by
          vectors: L2 306 vs 238 (1), 539 vs 437 (16); DRAM 243 vs 257 (1), 515 vs 568 (16).
          TSC cycles a token (L2): score tiles 166, softmax and split 74, V pairs 87, value
          tiles 153, q and ends 109 (a 256-row item).
  run 87  the value update slice by slice (32 dims of a chunk of 256 rows, 8 KiB in L1) and the
          K and V slices prefetched into L1 two ahead: L2 290 vs 236 (1), 362 vs 341 (16);
          DRAM 298 vs 366 (1), 599 vs 553 (16).
  run 88  amx_tdp_probe: a TDPBF16PS of full tiles takes 15.0 TSC cycles with its operands
          fixed, 46.8 when the four operand tiles are reloaded from L1 before every four TDPs
          (the item's loops reload one operand tile per TDP). The item, same code as run 87 on
          another host: score tiles 68, softmax and split 33, V pairs 76, value tiles 83, q
          and ends 70 cycles a token; 221 vs 200 ns (1 thread), 306 vs 266 (16).
  run 90  pipe = 1 (each operand tile reloaded as soon as its last TDP is issued, the next V
          slice relaid behind the TDPs): the same bits (checked), no faster: L2 259.9 (amx
          253.1, the FMA item 204.9) on one thread, 356.8 (331.3, 295.0) on 16; DRAM 335.4
          (291.2, 315.8) and 572.8 (599.8, 539.4). The probe on that host: 18.2 fixed, 15.1
          reloaded before each step, 20.0 reloaded early.
  run 91  the probe with the item's own tile shapes, in three processes one after the other:
          15.5 / 34.4 / 33.3 cycles a TDP with fixed operands (full tiles), 15.4 / 29.9 / 30.7
          with the score shapes, 15.6 / 29.2 / 32.5 with the value shapes; reloaded 11-27 in
          the first process, 44-52 in the others. The item (one thread) 560 / 261 / 188 ns a
          token at 32 / 256 / 2,048 rows against 190 / 225 / 181 for the FMA item.
  run 92  the probe with the item's two load patterns, three processes one after the other:
          in the first the unit ran 14.9 cycles a TDP (fixed operands) and 15.0 reloaded, then
          dropped within the process to 29; in the other two it held 29.2-29.6 fixed, 41.8-42.3
          reloaded from L1, 42.1 with A from rows 1 KiB apart, 46.2-46.7 with B just written
          by vector stores. Item phases at that rate: score tiles 141, value tiles 155-163, V
          pairs 81-83, softmax and split 38-41 cycles a token.
  run 93  amx-score (fused_parts): the library's item with only its scores on the tile unit
          (amx_scores; no V relayout, no weight splits): L2 191.9 ns against the FMA item's
          201.2 on one thread, 340.0 against 335.9 on 16; DRAM 267.3 against 293.6 and 533.6
          against 544.4. The probe in that run: 30.5-36.6 cycles a TDP with fixed operands,
          47.5-49.1 reloaded.
So on this host the tile unit runs a TDP in 15 cycles for a while and in 29 once it has worked
for some milliseconds (the TSC does not slow: the unit's clock or share does); the item's loads
add about 13 cycles a TDP, whatever their pattern. At 42 cycles a TDP the item's 4 TDPs a token
take 168 cycles, against 256 for the FMA item's 512 FMAs at full issue (it issues at about 60%),
but the V rows' relayout into the pair layout (80 cycles a token) and the softmax and splits (40)
take back the difference. Not in the library: on this host the tile item is no faster than the
AVX-512 one, in L1, L2 or from DRAM, at 1 or 16 threads, with either load order, nor are the
FMA item's steps with the scores alone on the unit (2-9%, inside this host's noise).
*/
#ifndef GEM_DEV_CPU_AMX_ITEM_H
#define GEM_DEV_CPU_AMX_ITEM_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define AMX_REAL 1
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define AMX_REAL 0
#endif
#if defined(__AVX512BW__)
#include <immintrin.h>
#endif

#define AMX_NH 8
#define AMX_D 512
#define AMX_KK (AMX_D / 32) /* 32-element steps of a row */
#define AMX_BT (AMX_D / 16) /* value B tiles a block of 32 rows (16 dims each) */
#ifndef AMX_CHUNK
#define AMX_CHUNK 256 /* tokens a softmax step (one alpha); a multiple of 32 */
#endif
#ifndef AMX_PF
#define AMX_PF 2 /* slices ahead that the score and value loops bring into L1 */
#endif
#define AMX_NB (AMX_CHUNK / 32)

/*
 * Dims of the value tiles. A block of 32 V rows becomes 32 B tiles of 16 rows (token pairs)
 * x 16 columns, each row the 64 bytes that unpacking two V rows' 32-element slice j gives
 * (vpunpcklwd / vpunpckhwd, in 128-bit lanes): tile 2j + hi, column c holds dim
 *   32 j + 8 (c / 4) + 4 hi + c % 4.
 * The accumulator of tile bt, column c is that dim's numerator.
 */
static inline int amx_dim(int bt, int c) { return 32 * (bt / 2) + 8 * (c / 4) + 4 * (bt % 2) + c % 4; }

typedef struct amx_ws {
    uint16_t qb1[AMX_KK][16][32]; /* B: pieces 0, 1 of q, pair layout, cols (piece, head) */
    uint16_t qb2[AMX_KK][16][16]; /* B: piece 2, cols (head) */
    float c0[AMX_CHUNK][16];      /* scores: C tiles of pieces 0, 1 */
    float c1[AMX_CHUNK][8];       /* scores: piece 2 */
    float sc[AMX_CHUNK * AMX_NH]; /* dots, then weights, (t, h) */
    float st[AMX_NH][AMX_CHUNK];  /* weights, (h, t) */
    uint16_t pa[AMX_NB][16][32];  /* A: p pieces 0, 1, rows (piece, head), 32 tokens */
    uint16_t pb[AMX_NB][8][32];   /* A: p piece 2, rows (head) */
    uint16_t vb[2][AMX_NB][2][16][32]; /* B: a 32-dim slice of the chunk's V rows, pair layout
                                          (two slices: pipe relays the next during the TDPs) */
    float oa[AMX_BT][16][16];     /* C: numerators of pieces 0, 1, rows (piece, head) */
    float ob[AMX_BT][8][16];      /* C: piece 2, rows (head) */
    float alpha[AMX_NH];
    uint16_t kpad[32][AMX_D], vpad[32][AMX_D]; /* a short last block, zero filled */
} amx_ws;

/* gem_f32_to_bf16's rounding (to nearest even) for finite values, inline so that the splits
 * vectorize; and the exact widening back */
static inline uint16_t amx_bf16_rne(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u); /* finite inputs only */
    return (uint16_t)(u >> 16);
}

static inline float amx_bf16_f(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* x = pieces[0] + pieces[1] + pieces[2] exactly (x finite, normal) */
static inline void amx_split3(float x, uint16_t *p0, uint16_t *p1, uint16_t *p2)
{
    *p0 = amx_bf16_rne(x);
    const float r1 = x - amx_bf16_f(*p0);
    *p1 = amx_bf16_rne(r1);
    *p2 = amx_bf16_rne(r1 - amx_bf16_f(*p1));
}

/* ---- the tile operations: real, or emulated in the SDM's order ----
 * Two configurations: the scores' (C0 16x16, C1 16x8 for two 16-row blocks; A 16x32 BF16;
 * B1 16 pair rows x 16 cols, B2 x 8) and the value update's (Ca 16x16, Cb 8x16 for two
 * 16-dim tiles; Pa 16 rows, Pb 8 rows of 32 tokens; two V tiles of 16 pair rows x 16). */
static const uint8_t amx_rows_sc[8] = {16, 16, 16, 16, 16, 16, 16, 16};
static const uint16_t amx_colsb_sc[8] = {64, 32, 64, 32, 64, 64, 64, 32};
static const uint8_t amx_rows_v[8] = {16, 8, 16, 8, 16, 8, 16, 16};
static const uint16_t amx_colsb_v[8] = {64, 64, 64, 64, 64, 64, 64, 64};

#if AMX_REAL
typedef struct __attribute__((aligned(64))) amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;
#define TLOAD(i, p, stride) _tile_loadd(i, p, stride)
#define TSTORE(i, p, stride) _tile_stored(i, p, stride)
#define TZERO(i) _tile_zero(i)
#define TDP(c, a, b) _tile_dpbf16ps(c, a, b)

long syscall(long number, ...); /* unistd.h declares it only with _GNU_SOURCE */

/* Ask the kernel for the tile state (once a process); 0 when granted. */
static int amx_enable(void)
{
    return (int)syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */);
}

static void amx_config(const uint8_t *rows, const uint16_t *colsb)
{
    amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.colsb[i] = colsb[i];
        c.rows[i] = rows[i];
    }
    _tile_loadconfig(&c);
}
static void amx_unconfigure(void) { _tile_release(); }
#else
static _Thread_local uint8_t amx_emu[8][16 * 64];
static _Thread_local uint8_t amx_emu_rows[8];
static _Thread_local uint16_t amx_emu_colsb[8];
static inline void amx_emu_load(int i, const void *p, int64_t stride)
{
    memset(amx_emu[i], 0, sizeof amx_emu[i]);
    for (int r = 0; r < amx_emu_rows[i]; r++)
        memcpy(amx_emu[i] + 64 * r, (const char *)p + r * stride, amx_emu_colsb[i]);
}
static inline void amx_emu_store(int i, void *p, int64_t stride)
{
    for (int r = 0; r < amx_emu_rows[i]; r++)
        memcpy((char *)p + r * stride, amx_emu[i] + 64 * r, amx_emu_colsb[i]);
}
static inline void amx_emu_dp(int c, int a, int b)
{
    float C[16][16];
    uint16_t A[16][32], B[16][32];
    memcpy(C, amx_emu[c], sizeof C);
    memcpy(A, amx_emu[a], sizeof A);
    memcpy(B, amx_emu[b], sizeof B);
    for (int m = 0; m < amx_emu_rows[c]; m++)
        for (int k = 0; k < amx_emu_colsb[a] / 4; k++)
            for (int n = 0; n < amx_emu_colsb[c] / 4; n++) {
                C[m][n] += amx_bf16_f(A[m][2 * k]) * amx_bf16_f(B[k][2 * n]);
                C[m][n] += amx_bf16_f(A[m][2 * k + 1]) * amx_bf16_f(B[k][2 * n + 1]);
            }
    memcpy(amx_emu[c], C, sizeof C);
}
#define TLOAD(i, p, stride) amx_emu_load(i, p, stride)
#define TSTORE(i, p, stride) amx_emu_store(i, p, stride)
#define TZERO(i) memset(amx_emu[i], 0, sizeof amx_emu[i])
#define TDP(c, a, b) amx_emu_dp(c, a, b)
static int amx_enable(void) { return 0; }
static void amx_config(const uint8_t *rows, const uint16_t *colsb)
{
    memcpy(amx_emu_rows, rows, 8);
    memcpy(amx_emu_colsb, colsb, 8 * sizeof *colsb);
}
static void amx_unconfigure(void) {}
#endif

static const char *amx_kind(void) { return AMX_REAL ? "amx-bf16" : "amx-bf16 emulated in C"; }

/* q (8, 512) F32 -> the score B tiles of w. In the pair layout a B row holds, per column,
 * two consecutive elements of one piece: one 32-bit word of the piece as an array. */
static void amx_q_tiles(amx_ws *w, const float *q)
{
    uint16_t pc[3][AMX_D];
    for (int h = 0; h < AMX_NH; h++) {
        for (int j = 0; j < AMX_D; j++)
            amx_split3(q[h * AMX_D + j], &pc[0][j], &pc[1][j], &pc[2][j]);
        for (int x = 0; x < AMX_D / 2; x++) { /* element pair x: row x % 16 of step x / 16 */
            memcpy(&w->qb1[x / 16][x % 16][2 * h], &pc[0][2 * x], 4);
            memcpy(&w->qb1[x / 16][x % 16][2 * (8 + h)], &pc[1][2 * x], 4);
            memcpy(&w->qb2[x / 16][x % 16][2 * h], &pc[2][2 * x], 4);
        }
    }
}

/* ---- phase clock (the device run's breakdown; off unless amx_clock_on) ---- */
enum { AMX_PH_SCORE, AMX_PH_SOFTMAX, AMX_PH_VPAIRS, AMX_PH_VALUE, AMX_PH_OTHER, AMX_NPH };
static const char *amx_ph_name[AMX_NPH] = {"score tiles", "softmax+split", "V pairs",
                                           "value tiles", "q, ends"};
static int amx_clock_on;
static _Thread_local uint64_t amx_ph_cycles[AMX_NPH];
static _Thread_local uint64_t amx_ph_last;
#if defined(__x86_64__)
#include <x86intrin.h>
static inline void amx_ph(int ph)
{
    if (!amx_clock_on)
        return;
    const uint64_t t = __rdtsc();
    if (ph >= 0)
        amx_ph_cycles[ph] += t - amx_ph_last;
    amx_ph_last = t;
}
#else
static inline void amx_ph(int ph) { (void)ph; }
#endif

/* Slice j (dims 32 j .. 32 j + 31) of 32 rows (v, stride bytes) into the pair layout of the
 * two B tiles vb[0], vb[1] (amx_dim: tile 2 j + hi). */
static inline void amx_v_slice(uint16_t (*vb)[16][32], const uint16_t *v, int64_t stride, int j)
{
    for (int r = 0; r < 16; r++) {
        const uint16_t *a = (const uint16_t *)((const char *)v + (2 * r) * stride) + 32 * j;
        const uint16_t *b = (const uint16_t *)((const char *)v + (2 * r + 1) * stride) + 32 * j;
#if defined(__AVX512BW__)
        const __m512i x = _mm512_loadu_si512(a), y = _mm512_loadu_si512(b);
        _mm512_store_si512(vb[0][r], _mm512_unpacklo_epi16(x, y));
        _mm512_store_si512(vb[1][r], _mm512_unpackhi_epi16(x, y));
#else
        for (int hi = 0; hi < 2; hi++)
            for (int c = 0; c < 16; c++) {
                vb[hi][r][2 * c] = a[amx_dim(hi, c)];
                vb[hi][r][2 * c + 1] = b[amx_dim(hi, c)];
            }
#endif
    }
}

/* the lines of slice j of 32 rows into L1 */
static inline void amx_prefetch_slice(const char *rows, int64_t stride, int j)
{
#if defined(__x86_64__)
    for (int r = 0; r < 32; r++)
        _mm_prefetch(rows + r * stride + 64 * j, _MM_HINT_T0);
#else
    (void)rows, (void)stride, (void)j;
#endif
}

/* The chunk's weights st (h, t) split into the A tiles; tokens nc.. of the last block 0. */
static void amx_p_tiles(amx_ws *w, int64_t nc)
{
    for (int b = 0; b < AMX_NB; b++)
        for (int h = 0; h < AMX_NH; h++) {
            const float *x = w->st[h] + 32 * b;
            uint16_t *p0 = w->pa[b][h], *p1 = w->pa[b][8 + h], *p2 = w->pb[b][h];
            for (int u = 0; u < 32; u++) {
                const float f = 32 * b + u < nc ? x[u] : 0.0f;
                amx_split3(f, &p0[u], &p1[u], &p2[u]);
            }
        }
}

/*
 * What the tile unit gives one thread: TSC cycles per TDPBF16PS of full tiles (16 x 16 x 32)
 * over iters steps of four TDPs into four accumulators, with the four operand tiles fixed
 * (reload 0), reloaded from L1 before every step (reload 1), or each reloaded as soon as its
 * last TDP of the step is issued (reload 2), or reloaded before every step with A from rows
 * 1 KiB apart (reload 3, the score loop's K) or B just written by stores (reload 4, the value
 * loop's V pairs); buf: 64 KiB. shapes 0: every tile 16 rows x 64 bytes, 1: the
 * item's score configuration (three tiles of 8 columns), 2: its value configuration (three
 * tiles of 8 rows), with the same tile numbers in the TDPs.
 * buf: 64-byte aligned, of finite BF16 values. Returns cycles a TDP (0 without a TSC).
 */
static double amx_tdp_probe(int64_t iters, int reload, uint16_t *buf, int shapes)
{
    static const uint8_t rows[8] = {16, 16, 16, 16, 16, 16, 16, 16};
    static const uint16_t colsb[8] = {64, 64, 64, 64, 64, 64, 64, 64};
    if (shapes == 1)
        amx_config(amx_rows_sc, amx_colsb_sc);
    else if (shapes == 2)
        amx_config(amx_rows_v, amx_colsb_v);
    else
        amx_config(rows, colsb);
    TZERO(0);
    TZERO(1);
    TZERO(2);
    TZERO(3);
    TLOAD(4, buf, 64);
    TLOAD(5, buf + 512, 64);
    TLOAD(6, buf + 1024, 64);
    TLOAD(7, buf + 1536, 64);
#if defined(__x86_64__)
    const uint64_t t0 = __rdtsc();
#endif
    for (int64_t i = 0; i < iters; i++) {
        const uint16_t *b = buf + (i & 1) * 2048;
        if (reload == 3) { /* A tiles as the score loop reads K: 16 rows 1 KiB apart */
            const uint16_t *k = buf + 4096 + (i & 15) * 32;
            TLOAD(4, k, 1024);
            TLOAD(5, k + 16 * 512, 1024);
            TLOAD(6, b + 1024, 64);
            TLOAD(7, b + 1536, 64);
        }
        if (reload == 4) { /* B tiles just written by vector stores, as the V relayout does */
            uint16_t *wb = buf + 4096 + (i & 1) * 1024;
            memcpy(wb, b + 1024, 2048);
            TLOAD(4, b, 64);
            TLOAD(5, b + 512, 64);
            TLOAD(6, wb, 64);
            TLOAD(7, wb + 512, 64);
        }
        if (reload == 1) {
            TLOAD(4, b, 64);
            TLOAD(5, b + 512, 64);
            TLOAD(6, b + 1024, 64);
            TLOAD(7, b + 1536, 64);
        }
        if (shapes == 1) { /* the score loop's pairs: tile 7 is the 8-column B of C1, C3 */
            TDP(0, 4, 6);
            TDP(1, 4, 7);
            if (reload == 2) /* tile 4's last reader issued: reload it behind the next TDPs */
                TLOAD(4, b, 64);
            TDP(2, 5, 6);
            if (reload == 2)
                TLOAD(6, b + 1024, 64);
            TDP(3, 5, 7);
        } else { /* the value loop's pairs: tile 5 is the 8-row A of C1, C3 */
            TDP(0, 4, 6);
            TDP(2, 4, 7);
            if (reload == 2)
                TLOAD(4, b, 64);
            TDP(1, 5, 6);
            if (reload == 2)
                TLOAD(6, b + 1024, 64);
            TDP(3, 5, 7);
        }
        if (reload == 2) {
            TLOAD(5, b + 512, 64);
            TLOAD(7, b + 1536, 64);
        }
    }
#if defined(__x86_64__)
    const uint64_t t1 = __rdtsc();
    float sink[16 * 16];
    TSTORE(0, sink, 64); /* the result is used */
    return sink[0] == sink[0] ? (double)(t1 - t0) / (double)(4 * iters) : -1.0;
#else
    return 0.0;
#endif
}

/*
 * The dots of 32 K rows (kr, ks bytes apart; rows live.. read as zeros) with the q pieces of w
 * (amx_q_tiles): c0 (32, 16) pieces 0 and 1, c1 (32, 8) piece 2, as the item's score step.
 * The score configuration is loaded on this thread. pipe: as amx_item_bf16's.
 */
static void amx_score_block(amx_ws *w, const char *kr, int64_t ks, int64_t live, int pipe,
                            float (*c0)[16], float (*c1)[8])
{
    if (live < 32) { /* the last rows, zero padded */
        memset(w->kpad, 0, sizeof w->kpad);
        for (int64_t u = 0; u < live; u++)
            memcpy(w->kpad[u], kr + u * ks, AMX_D * 2);
        kr = (const char *)w->kpad;
        ks = AMX_D * 2;
    }
    TZERO(0);
    TZERO(1);
    TZERO(2);
    TZERO(3);
    if (pipe) {
        TLOAD(4, kr, ks);
        TLOAD(6, w->qb1[0], 64);
        TLOAD(5, kr + 16 * ks, ks);
        TLOAD(7, w->qb2[0], 32);
    }
    for (int kk = 0; kk < AMX_KK; kk++) {
        if (kk + AMX_PF < AMX_KK)
            amx_prefetch_slice(kr, ks, kk + AMX_PF);
        if (!pipe) {
            TLOAD(4, kr + kk * 64, ks);
            TLOAD(5, kr + 16 * ks + kk * 64, ks);
            TLOAD(6, w->qb1[kk], 64);
            TLOAD(7, w->qb2[kk], 32);
        }
        const int nx = pipe && kk + 1 < AMX_KK;
        TDP(0, 4, 6);
        TDP(1, 4, 7);
        if (nx)
            TLOAD(4, kr + (kk + 1) * 64, ks);
        TDP(2, 5, 6);
        if (nx)
            TLOAD(6, w->qb1[kk + 1], 64);
        TDP(3, 5, 7);
        if (nx) {
            TLOAD(5, kr + 16 * ks + (kk + 1) * 64, ks);
            TLOAD(7, w->qb2[kk + 1], 32);
        }
    }
    TSTORE(0, c0, 64);
    TSTORE(1, c1, 32);
    TSTORE(2, c0[16], 64);
    TSTORE(3, c1[16], 32);
}

/*
 * The scores alone on the tile unit (the item's other steps on the FMA kernels): dot (n, 8) of
 * n <= 32 K rows (k, ks bytes apart) with q, token-major as cpu_dot_tile_tm writes them, each
 * (d0 + d1) + d2 of the three pieces. q's tiles built by amx_q_tiles(w, q) and the score
 * configuration loaded on this thread beforehand.
 */
static void amx_scores(amx_ws *w, const char *k, int64_t ks, int64_t n, float *dot)
{
    amx_score_block(w, k, ks, n, 0, w->c0, w->c1);
    for (int64_t t = 0; t < n; t++)
        for (int h = 0; h < AMX_NH; h++)
            dot[t * AMX_NH + h] = (w->c0[t][h] + w->c0[t][8 + h]) + w->c1[t][h];
}

/*
 * The item: rows [0, n) of K and V (BF16, row stride `stride` elements, dims 512), 8 query
 * heads q (8, 512) F32, scale. Writes the partial state m (8), s (8), o (8, 512) as the
 * library's item does (o: numerators; O/S is the attention). w: this thread's workspace, on a
 * thread that may use the tile unit. pipe: 0 loads a step's four operand tiles before its four
 * TDPs; 1 reloads each tile for the next step as soon as its last TDP of this step is issued
 * (the same operations on the same values: the same bits). Returns 0, or 1 when a scaled score
 * is not finite.
 */
static int amx_item_bf16(amx_ws *w, const float *q, const uint16_t *k, const uint16_t *v,
                         int64_t n, int64_t stride, float scale, float *m, float *s, float *o,
                         int pipe)
{
    const int64_t rb = stride * 2; /* bytes a row */
    amx_ph(-1);
    amx_q_tiles(w, q);
    memset(w->oa, 0, sizeof w->oa);
    memset(w->ob, 0, sizeof w->ob);
    for (int h = 0; h < AMX_NH; h++) {
        m[h] = -INFINITY;
        s[h] = 0.0f;
    }
    for (int64_t t0 = 0; t0 < n; t0 += AMX_CHUNK) {
        const int64_t nc = n - t0 < AMX_CHUNK ? n - t0 : AMX_CHUNK;
        const int nb = (int)((nc + 31) / 32);
        /* scores, 32 tokens a step: C0a C1a for rows 0..15, C0b C1b for 16..31 */
        amx_ph(AMX_PH_OTHER);
        amx_config(amx_rows_sc, amx_colsb_sc);
        for (int b = 0; b < nb; b++) {
            const int64_t tb = t0 + 32 * b, live = n - tb < 32 ? n - tb : 32;
            amx_score_block(w, (const char *)k + tb * rb, rb, live, pipe, &w->c0[32 * b],
                            &w->c1[32 * b]);
        }
        amx_ph(AMX_PH_SCORE);
        for (int64_t t = 0; t < nc; t++)
            for (int h = 0; h < AMX_NH; h++)
                w->sc[t * AMX_NH + h] = (w->c0[t][h] + w->c0[t][8 + h]) + w->c1[t][h];
        if (cpu_online_tile(w->sc, nc, AMX_NH, scale, m, s, w->alpha) != 0)
            return 1;
        for (int64_t t = 0; t < nc; t++)
            for (int h = 0; h < AMX_NH; h++)
                w->st[h][t] = w->sc[t * AMX_NH + h];
        int rescale = 0;
        for (int h = 0; h < AMX_NH; h++)
            rescale |= w->alpha[h] != 1.0f;
        if (rescale)
            for (int bt = 0; bt < AMX_BT; bt++)
                for (int r = 0; r < 16; r++)
                    for (int c = 0; c < 16; c++) {
                        w->oa[bt][r][c] *= w->alpha[r % 8];
                        if (r < 8)
                            w->ob[bt][r][c] *= w->alpha[r];
                    }
        amx_p_tiles(w, nc);
        /* slice by slice (32 dims, two B tiles a block): the chunk's rows of the slice in
         * the pair layout (8 KiB, in L1), then the slice's accumulators over the chunk */
        const uint16_t *vsrc[AMX_NB];
        int64_t vstr[AMX_NB];
        for (int b = 0; b < nb; b++) {
            const int64_t tb = t0 + 32 * b, live = n - tb < 32 ? n - tb : 32;
            vsrc[b] = (const uint16_t *)((const char *)v + tb * rb);
            vstr[b] = rb;
            if (live < 32) {
                memset(w->vpad, 0, sizeof w->vpad);
                for (int64_t u = 0; u < live; u++)
                    memcpy(w->vpad[u], (const char *)vsrc[b] + u * rb, AMX_D * 2);
                vsrc[b] = w->vpad[0];
                vstr[b] = AMX_D * 2;
            }
        }
        amx_config(amx_rows_v, amx_colsb_v);
        amx_ph(AMX_PH_SOFTMAX);
        if (pipe) /* slice 0 now; slice j + 1 behind slice j's TDPs */
            for (int b = 0; b < nb; b++)
                amx_v_slice(w->vb[0][b], vsrc[b], vstr[b], 0);
        for (int j = 0; j < AMX_D / 32; j++) {
            const int bt = 2 * j;
            uint16_t (*vb)[2][16][32] = w->vb[pipe ? j % 2 : 0];
            if (!pipe) {
                amx_ph(AMX_PH_VALUE);
                for (int b = 0; b < nb; b++) {
                    if (j + AMX_PF < AMX_D / 32)
                        amx_prefetch_slice((const char *)vsrc[b], vstr[b], j + AMX_PF);
                    amx_v_slice(vb[b], vsrc[b], vstr[b], j);
                }
                amx_ph(AMX_PH_VPAIRS);
            }
            TLOAD(0, w->oa[bt], 64);
            TLOAD(1, w->ob[bt], 64);
            TLOAD(2, w->oa[bt + 1], 64);
            TLOAD(3, w->ob[bt + 1], 64);
            if (pipe) {
                TLOAD(4, w->pa[0], 64);
                TLOAD(6, vb[0][0], 64);
                TLOAD(5, w->pb[0], 64);
                TLOAD(7, vb[0][1], 64);
            }
            for (int b = 0; b < nb; b++) {
                if (!pipe) {
                    TLOAD(4, w->pa[b], 64);
                    TLOAD(5, w->pb[b], 64);
                    TLOAD(6, vb[b][0], 64);
                    TLOAD(7, vb[b][1], 64);
                }
                const int nx = pipe && b + 1 < nb;
                TDP(0, 4, 6);
                TDP(2, 4, 7);
                if (nx)
                    TLOAD(4, w->pa[b + 1], 64);
                TDP(1, 5, 6);
                if (nx)
                    TLOAD(6, vb[b + 1][0], 64);
                TDP(3, 5, 7);
                if (nx) {
                    TLOAD(5, w->pb[b + 1], 64);
                    TLOAD(7, vb[b + 1][1], 64);
                }
            }
            if (pipe && j + 1 < AMX_D / 32) /* vector work while the tile unit computes */
                for (int b = 0; b < nb; b++) {
                    if (j + 1 + AMX_PF < AMX_D / 32)
                        amx_prefetch_slice((const char *)vsrc[b], vstr[b], j + 1 + AMX_PF);
                    amx_v_slice(w->vb[(j + 1) % 2][b], vsrc[b], vstr[b], j + 1);
                }
            TSTORE(0, w->oa[bt], 64);
            TSTORE(1, w->ob[bt], 64);
            TSTORE(2, w->oa[bt + 1], 64);
            TSTORE(3, w->ob[bt + 1], 64);
        }
        amx_ph(AMX_PH_VALUE);
    }
    for (int bt = 0; bt < AMX_BT; bt++)
        for (int h = 0; h < AMX_NH; h++)
            for (int c = 0; c < 16; c++)
                o[h * AMX_D + amx_dim(bt, c)] = (w->oa[bt][h][c] + w->oa[bt][8 + h][c]) +
                                                w->ob[bt][h][c];
    amx_ph(AMX_PH_OTHER);
    return 0;
}

#endif
