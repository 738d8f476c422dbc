/*
dev/cpu/mv_wide: the packed Q8_0 product of wide matrices, in the library's layout and with
its columns in chunks.

On the 2-core VM (AMD EPYC Zen 4) the library's packed Q8_0 product read o's shape (1024 x 8192)
from DRAM at 25.5 GB/s on one thread and 8192 x 1024 over the same bytes at 33.5, yet both at
46-48 GB/s from the L3 (dev/cpu/mv_chain's header): wide rows cost per core when the weights
come from memory, not in arithmetic. A group's product (16 rows) runs over every column before
the next group starts, so x's digits (208 bytes a block of 32 columns: 53 KB at 8192 columns,
140 KB at the 31B's 21,504) are read from the L2 once per group, beside the weights. The real
model's matrices are all that wide (5,376 columns and more).

Versions, for each shape asked for:
  library    mv (src/model/matvec.c): an item's groups one after the other, each over all its
             columns
  chunk C    a copy of the same packed blocks laid out chunk-major: every group's first C
             columns, then every group's next C, ...; an item computes its groups chunk by
             chunk, a group's 16 sums carried between chunks in y (stored and reloaded F32: the
             same operations in the same order, so the library's bits), so x's digits for a
             chunk (C / 32 blocks) are reused from the L1 by all the item's groups
The items are the library's: threads x 4 contiguous ranges of groups (--parts-per-thread),
taken from the pool's counter; 2 threads at 32 ranges a thread give o's 64 groups one an item,
as 16 threads do. The chunk versions' kernel is matvec.c's group_int for Q8_0 (AVX-512 VNNI), copied.

Every version is first checked bit for bit against mv_rows on one thread. Then the copies
(enough of each to fill --mib MiB, read in turn so that the caches hold none) are timed in
A B ... B A rounds, on every thread count asked for: median, min and max GB/s, and each
version's time over the library's in the same round (median and range).

This VM (2 threads, A B B A rounds, time / library): o's shape 1024 x 8192, chunk 1024: 0.807 on
one thread (24.9 -> 31.2 GB/s), 0.964 on two; 1024 x 2048: 0.852 / 0.950; the 31B's q (8192 x
5376, chunk 768) 0.781 / 0.786 (two threads 45.9 -> 58.2 GB/s) and down (5376 x 21504) 0.772 /
0.769 (46.2 -> 60.1). Chunks of 2048 columns (13 KB of digits, which fit the 32 KB L1 alone but
not beside 35 KB of a group's weights) gained nothing on o. But with one group an item (o on
2 threads at 32 ranges a thread, as on 16 threads at 4) chunk 1024 took 1.225 the library's
time: each item then reads 8 runs of 17 KB far apart and reuses no digits. By the groups an
item gets (2 threads, --parts-per-thread 8 / 16 / 32): o at 4 / 2 / 1 groups 0.994 / 1.333 /
1.649, the 31B's q at 4 groups (64 ranges a thread) 1.298. So the chunks pay only from about
8 groups an item, which 16 threads at the library's 4 ranges a thread give the 31B's q (512
groups) and not its down (336): the Xeon's figures decide whether a library version is worth
having at all. (Short runs far apart cost more than the digits' L2 reads save: the library's
one contiguous range an item is right for that.)

usage: mv_wide [--threads 0,1] [--shapes 1024x8192,1024x2048] [--chunks 1024,2048]
               [--rounds R] [--mib M] [--parts-per-thread 4]
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#endif

#include "common.h"
#include "cpu_memory.h"
#include "cpu_pool.h"
#include "gem/engine.h"
#include "gem/model.h"
#include "matvec.h"

enum { GROUP = 16, BLOCK = 544, MAX_LIST = 8, MAX_ROUNDS = 16 };

/* matvec.c's x digits of a block (its xq_block), 208 bytes: mv_rows leaves them in its scratch. */
typedef struct xq_block {
    int8_t dig[4][32];
    int32_t sum[4];
    int32_t half_sum[4][2];
    float scale[4];
    float sum_x;
    float pad[3];
} xq_block;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
/* matvec.c's group_int for Q8_0 over blocks [0, n) at p (x's digits xb), from acc. */
static inline __attribute__((always_inline)) __m512 q8_blocks(const uint8_t *p, int64_t n,
                                                               const xq_block *xb, __m512 acc)
{
    for (int64_t b = 0; b < n; b++, p += BLOCK) {
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
        __m512i u[8];
        for (int k = 0; k < 8; k++)
            u[k] = _mm512_loadu_si512((const void *)(p + 32 + 64 * k));
        const xq_block *x = xb + b;
        __m512i s[4];
        for (int j = 0; j < 4; j++)
            s[j] = _mm512_set1_epi32(-128 * x->sum[j]);
        for (int k = 0; k < 8; k++)
            for (int j = 0; j < 4; j++)
                s[j] = _mm512_dpbusd_epi32(
                    s[j], u[k], _mm512_broadcastd_epi32(_mm_loadu_si32(x->dig[j] + 4 * k)));
        for (int j = 0; j < 4; j++) {
            const __m512 sc = _mm512_mul_ps(d, _mm512_set1_ps(x->scale[j]));
            acc = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(s[j]), acc);
        }
    }
    return acc;
}
#endif

typedef struct chunk_job {
    const uint8_t *base; /* the chunk-major copy */
    int64_t groups, nb;  /* groups, blocks a row */
    int64_t chunk;       /* blocks a chunk */
    const xq_block *xb;
    float *y;
    int64_t parts;
} chunk_job;

/* Item `item`: groups [item G / parts, (item + 1) G / parts), chunk by chunk. */
static void chunk_item(void *ctx, int64_t item, int64_t thread)
{
    (void)thread;
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
    const chunk_job *j = ctx;
    const int64_t g0 = item * j->groups / j->parts, g1 = (item + 1) * j->groups / j->parts;
    const size_t cb = (size_t)j->chunk * BLOCK; /* a group's bytes in one chunk */
    for (int64_t c = 0; c < j->nb / j->chunk; c++) {
        const uint8_t *bc = j->base + (size_t)c * (size_t)j->groups * cb;
        for (int64_t g = g0; g < g1; g++) {
            __m512 a = c ? _mm512_loadu_ps(j->y + GROUP * g) : _mm512_setzero_ps();
            a = q8_blocks(bc + (size_t)g * cb, j->chunk, j->xb + c * j->chunk, a);
            _mm512_storeu_ps(j->y + GROUP * g, a);
        }
    }
#else
    (void)ctx, (void)item;
#endif
}

/* The library's packed bytes `src` (groups x nb blocks, group-major) into dst chunk-major. */
static void to_chunks(const uint8_t *src, uint8_t *dst, int64_t groups, int64_t nb, int64_t chunk)
{
    for (int64_t c = 0; c < nb / chunk; c++)
        for (int64_t g = 0; g < groups; g++)
            memcpy(dst + ((size_t)c * (size_t)groups + (size_t)g) * (size_t)chunk * BLOCK,
                   src + ((size_t)g * (size_t)nb + (size_t)c * (size_t)chunk) * BLOCK,
                   (size_t)chunk * BLOCK);
}

static int parse_list(char *s, int64_t *v, int max)
{
    int n = 0;
    for (char *t = strtok(s, ","); t && n < max; t = strtok(NULL, ","))
        v[n++] = atoll(t);
    return n;
}

static int cmp_r(const void *a, const void *b) { return cmp_d(a, b); }

int main(int argc, char **argv)
{
    int64_t threads[MAX_LIST] = {0, 1}, chunks[MAX_LIST] = {1024, 2048};
    int64_t rows[MAX_LIST] = {1024, 1024}, cols[MAX_LIST] = {8192, 2048};
    int nth = 2, nch = 2, nsh = 2;
    int64_t rounds = 8, mib = 512, ppt = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            nth = parse_list(argv[++i], threads, MAX_LIST);
        else if (!strcmp(argv[i], "--chunks") && i + 1 < argc)
            nch = parse_list(argv[++i], chunks, MAX_LIST);
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) {
            nsh = 0;
            for (char *t = strtok(argv[++i], ","); t && nsh < MAX_LIST; t = strtok(NULL, ","))
                if (sscanf(t, "%ldx%ld", (long *)&rows[nsh], (long *)&cols[nsh]) == 2)
                    nsh++;
                else
                    nsh = -100;
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--parts-per-thread") && i + 1 < argc)
            ppt = atoll(argv[++i]);
        else {
            fprintf(stderr, "usage: mv_wide [--threads 0,1] [--shapes 1024x8192,1024x2048] "
                            "[--chunks 1024,2048] [--rounds R] [--mib M] [--parts-per-thread P]\n");
            return 2;
        }
    }
    int ok = nth >= 1 && nch >= 1 && nsh >= 1 && rounds >= 1 && rounds <= MAX_ROUNDS &&
             mib >= 16 && mib <= 16384 && ppt >= 1 && ppt <= 64;
    for (int i = 0; ok && i < nth; i++)
        ok = threads[i] >= 0 && threads[i] <= 1024;
    for (int i = 0; ok && i < nsh; i++)
        ok = rows[i] >= GROUP && rows[i] % GROUP == 0 && rows[i] <= 65536 && cols[i] >= 32 &&
             cols[i] % 32 == 0 && cols[i] <= 65536;
    for (int i = 0; ok && i < nch; i++)
        ok = chunks[i] >= 32 && chunks[i] % 32 == 0;
    if (!ok) {
        fprintf(stderr, "mv_wide: threads 0..1024 (0: one a core), shapes RxC with R a multiple "
                        "of 16 and C of 32 (at most 65536 each), chunks multiples of 32, rounds "
                        "1..%d, mib 16..16384, parts-per-thread 1..64\n",
                MAX_ROUNDS);
        return 2;
    }
#if !(defined(__AVX512F__) && defined(__AVX512VNNI__))
    fprintf(stderr, "mv_wide: the chunk versions need AVX512-VNNI (the library's packed Q8_0 "
                    "kernel); this build has none\n");
    return 2;
#else
    if (mv_xq_bytes(32) != sizeof(xq_block)) {
        fprintf(stderr, "mv_wide: matvec.c's digit block is no longer %zu bytes\n",
                sizeof(xq_block));
        return 1;
    }
    gem_engine *e = NULL;
    if (gem_engine_create(GEM_BACKEND_CPU, 0, &e) != GEM_OK) {
        fprintf(stderr, "mv_wide: no CPU engine\n");
        return 1;
    }
    printf("mv_wide: Q8_0 packed products, %lld rounds A B ... B A, %lld MiB of copies a version\n",
           (long long)rounds, (long long)mib);
    for (int si = 0; si < nsh; si++) {
        const int64_t R = rows[si], Cn = cols[si], nb = Cn / 32, groups = R / GROUP;
        const size_t bytes = (size_t)groups * (size_t)nb * BLOCK;
        int64_t copies = (int64_t)(((size_t)mib << 20) / bytes);
        copies = copies < 2 ? 2 : copies;
        /* the versions: 0 the library, 1.. the chunk sizes that divide the columns */
        int64_t vch[MAX_LIST + 1];
        int nv = 1;
        for (int i = 0; i < nch; i++)
            if (chunks[i] < Cn && Cn % chunks[i] == 0)
                vch[nv++] = chunks[i] / 32;
        uint8_t *mem[MAX_LIST + 1];
        for (int v = 0; v < nv; v++) {
            void *p = NULL;
            if (cpu_stream_alloc(bytes * (size_t)copies, 0, &p) != GEM_OK) {
                fprintf(stderr, "mv_wide: out of memory (%zu bytes)\n", bytes * (size_t)copies);
                return 1;
            }
            mem[v] = p;
        }
        /* random packed blocks: 16 scales in [2^-10, 2^-6), quants q + 128 in [1, 255] */
        for (size_t b = 0; b < bytes * (size_t)copies / BLOCK; b++) {
            uint8_t *p = mem[0] + b * BLOCK;
            for (int r = 0; r < GROUP; r++) {
                const uint16_t h = (uint16_t)(0x1400u + (next_u64() & 0x0FFFu));
                memcpy(p + 2 * r, &h, 2);
            }
            for (int i = 32; i < BLOCK; i += 8) {
                uint64_t u = next_u64();
                for (int k = 0; k < 8; k++, u >>= 8)
                    p[i + k] = (uint8_t)(1 + u % 255);
            }
        }
        for (int v = 1; v < nv; v++)
            for (int64_t c = 0; c < copies; c++)
                to_chunks(mem[0] + (size_t)c * bytes, mem[v] + (size_t)c * bytes, groups, nb,
                          vch[v]);
        float *x = malloc((size_t)Cn * sizeof *x), *y = malloc((size_t)R * sizeof *y);
        float *yr = malloc((size_t)R * sizeof *yr);
        mv_scratch xs = {aligned_alloc(64, mv_xq_bytes(Cn)), mv_xq_bytes(Cn)};
        if (!x || !y || !yr || !xs.buf) {
            fprintf(stderr, "mv_wide: out of memory\n");
            return 1;
        }
        for (int64_t i = 0; i < Cn; i++)
            x[i] = (float)((double)(next_u64() >> 11) * 0x1.0p-53 - 0.5);
        gem_matrix w = {mem[0], GEM_GGUF_Q8_0, R, Cn, (size_t)nb * 34, mem[0]};
        /* the reference bits; mv_rows leaves x's digits in the scratch */
        if (mv_rows(&w, x, &xs, yr, 0, R) != GEM_OK) {
            fprintf(stderr, "mv_wide: mv_rows failed\n");
            return 1;
        }
        printf("\nshape %lld x %lld (%.2f MB a matrix, %lld copies); x's digits %.1f KB\n",
               (long long)R, (long long)Cn, (double)bytes / 1e6, (long long)copies,
               (double)mv_xq_bytes(Cn) / 1e3);
        for (int ti = 0; ti < nth; ti++) {
            cpu_pool *pool = NULL;
            const int64_t nt = threads[ti] ? threads[ti] : gem_engine_threads(e);
            if (cpu_pool_create(nt, &pool) != GEM_OK) {
                fprintf(stderr, "mv_wide: no pool of %lld threads\n", (long long)nt);
                return 1;
            }
            const mv_tuning tune = {ppt, -1, 2}; /* the library's split at ppt ranges a thread */
            /* checks: every version's bits against mv_rows */
            for (int v = 0; v < nv; v++) {
                memset(y, 0xFF, (size_t)R * sizeof *y);
                if (v == 0) {
                    const gem_matrix *wp = &w;
                    const float *xp = x;
                    (void)mv_batch_tuned(pool, 1, &wp, &xp, &xs, &y, &tune);
                }
                else {
                    chunk_job j = {mem[v], groups, nb, vch[v], xs.buf, y, nt * ppt};
                    cpu_pool_run(pool, j.parts, chunk_item, &j);
                }
                if (memcmp(y, yr, (size_t)R * sizeof *y)) {
                    fprintf(stderr, "mv_wide: version %d (%lld threads) differs from mv_rows\n",
                            v, (long long)nt);
                    return 1;
                }
            }
            double t[MAX_LIST + 1][2 * MAX_ROUNDS];
            for (int64_t r = 0; r < rounds; r++)
                for (int h = 0; h < 2; h++)
                    for (int i = 0; i < nv; i++) {
                        const int v = h ? nv - 1 - i : i;
                        const double t0 = now_s();
                        for (int64_t c = 0; c < copies; c++) {
                            if (v == 0) {
                                gem_matrix wc = w;
                                wc.data = wc.packed = mem[0] + (size_t)c * bytes;
                                const gem_matrix *wp = &wc;
                                const float *xp = x;
                                (void)mv_batch_tuned(pool, 1, &wp, &xp, &xs, &y, &tune);
                            } else {
                                chunk_job j = {mem[v] + (size_t)c * bytes, groups, nb, vch[v],
                                               xs.buf, y, nt * ppt};
                                cpu_pool_run(pool, j.parts, chunk_item, &j);
                            }
                        }
                        t[v][2 * r + h] = now_s() - t0;
                    }
            printf("%lld threads (checked: every version the bits of mv_rows)\n", (long long)nt);
            for (int v = 0; v < nv; v++) {
                double g[2 * MAX_ROUNDS], q[2 * MAX_ROUNDS];
                const int64_t n = 2 * rounds;
                for (int64_t k = 0; k < n; k++) {
                    g[k] = (double)bytes * (double)copies / t[v][k] / 1e9;
                    q[k] = t[v][k] / t[0][k];
                }
                qsort(g, (size_t)n, sizeof g[0], cmp_r);
                qsort(q, (size_t)n, sizeof q[0], cmp_r);
                char name[32];
                if (v == 0)
                    snprintf(name, sizeof name, "library");
                else
                    snprintf(name, sizeof name, "chunk %lld", (long long)(vch[v] * 32));
                printf("  %-11s GB/s median %7.2f [%7.2f - %7.2f]   time / library %.3f "
                       "[%.3f - %.3f]\n",
                       name, g[n / 2], g[0], g[n - 1], q[n / 2], q[0], q[n - 1]);
            }
            cpu_pool_destroy(pool);
        }
        for (int v = 0; v < nv; v++)
            free(mem[v]);
        free(x);
        free(y);
        free(yr);
        free(xs.buf);
    }
    return 0;
#endif
}
