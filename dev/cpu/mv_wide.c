/*
dev/cpu/mv_wide: the packed products of wide matrices, by the span of their layout.

On the 2-core VM (AMD EPYC Zen 4) the packed Q8_0 product read o's shape (1024 x 8192) from DRAM
at 25.5 GB/s on one thread and 8192 x 1024 over the same bytes at 33.5, yet both at 46-48 GB/s
from the L3 (dev/cpu/mv_chain's header): wide rows cost per core when the weights come from
memory, not in arithmetic. With the groups of 16 rows laid out one after another, a group runs
over every column before the next starts, so x's digits (208 bytes a block of 32 columns: 53 KB
at 8192 columns, 140 KB at the 31B's 21,504) come from the L2 once per group, beside the
weights. The real model's matrices are all that wide (5,376 columns and more).

Versions, for each shape asked for: the library's product (mv_batch_tuned) on the matrix packed
with span S for every S of --spans (mv_pack: S groups together in chunks of 1,024 columns, so
that a chunk's digits serve the span's S groups from the L1 while the bytes are still read in
order), and "default", the span mv_span_for gives for the thread count (what the decoder packs).
The items are the library's: threads x --parts-per-thread contiguous ranges of spans.

Every version is first checked bit for bit against mv_rows on one thread of span 1. Then the
copies (enough of each to fill --mib MiB, read in turn so that the caches hold none) are timed
in A B ... B A rounds on every thread count asked for: median, min and max GB/s, and each
version's time over span 1's in the same round (median and range).

What led to the spans (the program's earlier form, a copy of the Q8_0 kernel on a chunk-major
copy of the whole matrix, every group's first chunk, then every group's second, ...): on this
VM the 31B's q (8192 x 5376) and down (5376 x 21504) took 0.77-0.79 of the time on one and two
threads, o 0.81 on one; but once an item held 1-4 groups it took 1.22-1.65, the item's chunks
then short runs far apart. A span keeps an item's bytes one run: 8192 x 5376 at 8 groups an item
(2 threads, 32 ranges a thread, as 16 threads at 4) span 2 / 4 / 8: 0.887 / 0.858 / 0.803; o
at 8 groups an item 0.710 / 0.688 / 0.641 (a copy of the kernel, A B B A, 5 rounds).

usage: mv_wide [--threads 0,1] [--shapes 1024x8192,8192x5376] [--spans 2,4,8]
               [--type q8_0|q4_0|q4_k|q6_k] [--rounds R] [--mib M] [--parts-per-thread 4]
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu_memory.h"
#include "cpu_pool.h"
#include "gem/engine.h"
#include "gem/model.h"
#include "matvec.h"

enum { MAX_LIST = 8, MAX_ROUNDS = 16 };

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) { return dev_xorshift(&rng); }

/* A file block of type t: its bytes, and where its f16 scales lie (-1: none). */
static void block_shape(gem_gguf_type t, size_t *bytes, int *f16a, int *f16b)
{
    *f16b = -1;
    if (t == GEM_GGUF_Q8_0)
        *bytes = 34, *f16a = 0;
    else if (t == GEM_GGUF_Q4_0)
        *bytes = 18, *f16a = 0;
    else if (t == GEM_GGUF_Q4_K)
        *bytes = 144, *f16a = 0, *f16b = 2; /* d, dmin */
    else
        *bytes = 210, *f16a = 208; /* Q6_K: d last */
}

/* n blocks of type t at p: random quants and scales, the f16 scales in [2^-10, 2^-6). */
static void fill_blocks(gem_gguf_type t, uint8_t *p, size_t n)
{
    size_t bb;
    int fa, fb;
    block_shape(t, &bb, &fa, &fb);
    for (size_t b = 0; b < n; b++, p += bb) {
        for (size_t i = 0; i < bb; i += 8) {
            uint64_t u = next_u64();
            for (size_t k = 0; k < 8 && i + k < bb; k++, u >>= 8)
                p[i + k] = (uint8_t)u;
        }
        if (t == GEM_GGUF_Q8_0)
            for (size_t i = 2; i < bb; i++)
                p[i] = p[i] == 0x80 ? 0x81 : p[i]; /* quants in [-127, 127] */
        const int at[2] = {fa, fb};
        for (int k = 0; k < 2; k++)
            if (at[k] >= 0) {
                const uint16_t h = (uint16_t)(0x1400u + (next_u64() & 0x0FFFu));
                memcpy(p + at[k], &h, 2);
            }
    }
}

static int parse_list(char *s, int64_t *v, int max)
{
    int n = 0;
    for (char *t = strtok(s, ","); t && n < max; t = strtok(NULL, ","))
        v[n++] = atoll(t);
    return n;
}

int main(int argc, char **argv)
{
    int64_t threads[MAX_LIST] = {0, 1}, spans[MAX_LIST] = {2, 4, 8};
    int64_t rows[MAX_LIST] = {1024, 8192}, cols[MAX_LIST] = {8192, 5376};
    int nth = 2, nsp = 3, nsh = 2;
    int64_t rounds = 8, mib = 512, ppt = 4;
    gem_gguf_type type = GEM_GGUF_Q8_0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            nth = parse_list(argv[++i], threads, MAX_LIST);
        else if (!strcmp(argv[i], "--spans") && i + 1 < argc)
            nsp = parse_list(argv[++i], spans, MAX_LIST);
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) {
            nsh = 0;
            for (char *t = strtok(argv[++i], ","); t && nsh < MAX_LIST; t = strtok(NULL, ","))
                if (sscanf(t, "%ldx%ld", (long *)&rows[nsh], (long *)&cols[nsh]) == 2)
                    nsh++;
                else
                    nsh = -100;
        } else if (!strcmp(argv[i], "--type") && i + 1 < argc) {
            const char *t = argv[++i];
            type = !strcmp(t, "q8_0")   ? GEM_GGUF_Q8_0
                   : !strcmp(t, "q4_0") ? GEM_GGUF_Q4_0
                   : !strcmp(t, "q4_k") ? GEM_GGUF_Q4_K
                   : !strcmp(t, "q6_k") ? GEM_GGUF_Q6_K
                                        : GEM_GGUF_F32;
            if (type == GEM_GGUF_F32) {
                fprintf(stderr, "mv_wide: --type is q8_0, q4_0, q4_k or q6_k\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--parts-per-thread") && i + 1 < argc)
            ppt = atoll(argv[++i]);
        else {
            fprintf(stderr, "usage: mv_wide [--threads 0,1] [--shapes 1024x8192,8192x5376] "
                            "[--spans 2,4,8] [--type q8_0|q4_0|q4_k|q6_k] [--rounds R] [--mib M] "
                            "[--parts-per-thread P]\n");
            return 2;
        }
    }
    const int64_t be = type == GEM_GGUF_Q8_0 || type == GEM_GGUF_Q4_0 ? 32 : 256;
    int ok = nth >= 1 && nsp >= 1 && nsh >= 1 && rounds >= 1 && rounds <= MAX_ROUNDS &&
             mib >= 16 && mib <= 16384 && ppt >= 1 && ppt <= 64;
    for (int i = 0; ok && i < nth; i++)
        ok = threads[i] >= 0 && threads[i] <= 1024;
    for (int i = 0; ok && i < nsh; i++)
        ok = rows[i] >= 16 && rows[i] % 16 == 0 && rows[i] <= 65536 && cols[i] >= be &&
             cols[i] % be == 0 && cols[i] <= 65536;
    for (int i = 0; ok && i < nsp; i++)
        ok = spans[i] >= 1 && spans[i] <= MV_SPAN_MAX;
    if (!ok) {
        fprintf(stderr, "mv_wide: threads 0..1024 (0: one a core), shapes RxC with R a multiple "
                        "of 16 and C of the type's block (at most 65536 each), spans 1..%d, "
                        "rounds 1..%d, mib 16..16384, parts-per-thread 1..64\n",
                MV_SPAN_MAX, MAX_ROUNDS);
        return 2;
    }
    gem_engine *e = NULL;
    if (gem_engine_create(GEM_BACKEND_CPU, 0, &e) != GEM_OK) {
        fprintf(stderr, "mv_wide: no CPU engine\n");
        return 1;
    }
    printf("mv_wide: %s packed products, %lld rounds A B ... B A, %lld MiB of copies a version, "
           "%lld ranges a thread\n",
           gem_gguf_type_name(type), (long long)rounds, (long long)mib, (long long)ppt);
    for (int si = 0; si < nsh; si++) {
        const int64_t R = rows[si], C = cols[si];
        size_t rb = 0;
        if (gem_gguf_row_bytes(type, C, &rb) != GEM_OK)
            return 1;
        const size_t bytes = rb * (size_t)R;
        int64_t copies = (int64_t)(((size_t)mib << 20) / bytes);
        copies = copies < 2 ? 2 : copies;
        uint8_t *file = malloc(bytes * (size_t)copies);
        float *x = malloc((size_t)C * sizeof *x), *y = malloc((size_t)R * sizeof *y);
        float *yr = malloc((size_t)R * sizeof *yr);
        mv_scratch xs = {aligned_alloc(64, (mv_xq_bytes(C) + 63) / 64 * 64), mv_xq_bytes(C)};
        if (!file || !x || !y || !yr || !xs.buf) {
            fprintf(stderr, "mv_wide: out of memory\n");
            return 1;
        }
        size_t bb;
        int fa, fb;
        block_shape(type, &bb, &fa, &fb);
        fill_blocks(type, file, bytes * (size_t)copies / bb);
        for (int64_t i = 0; i < C; i++)
            x[i] = (float)((double)(next_u64() >> 11) * 0x1.0p-53 - 0.5);
        printf("\nshape %lld x %lld (%.2f MB a matrix, %lld copies); x's digits %.1f KB\n",
               (long long)R, (long long)C, (double)bytes / 1e6, (long long)copies,
               (double)mv_xq_bytes(C) / 1e3);
        for (int ti = 0; ti < nth; ti++) {
            cpu_pool *pool = NULL;
            const int64_t nt = threads[ti] ? threads[ti] : gem_engine_threads(e);
            if (cpu_pool_create(nt, &pool) != GEM_OK) {
                fprintf(stderr, "mv_wide: no pool of %lld threads\n", (long long)nt);
                return 1;
            }
            /* the versions' spans: 1, those asked for, and the default for nt threads */
            gem_matrix proto = {file, type, R, C, rb, NULL, 0};
            int64_t vspan[MAX_LIST + 2];
            int nv = 0;
            vspan[nv++] = 1;
            for (int i = 0; i < nsp; i++)
                if (spans[i] > 1)
                    vspan[nv++] = spans[i];
            const int64_t dflt = mv_span_for(&proto, nt);
            vspan[nv++] = -dflt; /* negative: the default */
            uint8_t *mem[MAX_LIST + 2];
            for (int v = 0; v < nv; v++) {
                void *p = NULL;
                if (cpu_stream_alloc(bytes * (size_t)copies, 0, &p) != GEM_OK) {
                    fprintf(stderr, "mv_wide: out of memory (%zu bytes)\n",
                            bytes * (size_t)copies);
                    return 1;
                }
                mem[v] = p;
                for (int64_t c = 0; c < copies; c++) {
                    gem_matrix w = proto;
                    w.data = file + (size_t)c * bytes;
                    w.packed_span = vspan[v] < 0 ? -vspan[v] : vspan[v];
                    mv_pack(&w, mem[v] + (size_t)c * bytes);
                }
            }
            const mv_tuning tune = {ppt, -1, 2, 0, 0, 0}; /* the library's split at ppt ranges a thread */
            /* checks: every version's bits against mv_rows of span 1 on the first copy */
            gem_matrix w1 = proto;
            w1.packed = mem[0];
            w1.packed_span = 1;
            if (mv_rows(&w1, x, &xs, yr, 0, R) != GEM_OK) {
                fprintf(stderr, "mv_wide: mv_rows failed\n");
                return 1;
            }
            for (int v = 0; v < nv; v++) {
                gem_matrix w = proto;
                w.packed = mem[v];
                w.packed_span = vspan[v] < 0 ? -vspan[v] : vspan[v];
                const gem_matrix *wp = &w;
                const float *xp = x;
                memset(y, 0xFF, (size_t)R * sizeof *y);
                (void)mv_batch_tuned(pool, 1, &wp, &xp, &xs, &y, &tune);
                if (memcmp(y, yr, (size_t)R * sizeof *y)) {
                    fprintf(stderr, "mv_wide: span %lld (%lld threads) differs from span 1\n",
                            (long long)w.packed_span, (long long)nt);
                    return 1;
                }
            }
            double t[MAX_LIST + 2][2 * MAX_ROUNDS];
            for (int64_t r = 0; r < rounds; r++)
                for (int h = 0; h < 2; h++)
                    for (int i = 0; i < nv; i++) {
                        const int v = h ? nv - 1 - i : i;
                        gem_matrix w = proto;
                        w.packed_span = vspan[v] < 0 ? -vspan[v] : vspan[v];
                        const gem_matrix *wp = &w;
                        const float *xp = x;
                        const double t0 = now_s();
                        for (int64_t c = 0; c < copies; c++) {
                            w.data = w.packed = mem[v] + (size_t)c * bytes;
                            (void)mv_batch_tuned(pool, 1, &wp, &xp, &xs, &y, &tune);
                        }
                        t[v][2 * r + h] = now_s() - t0;
                    }
            printf("%lld threads, %lld ranges, %.1f groups a range (checked: every span the bits "
                   "of span 1)\n",
                   (long long)nt, (long long)(nt * ppt), (double)(R / 16) / (double)(nt * ppt));
            for (int v = 0; v < nv; v++) {
                double g[2 * MAX_ROUNDS], q[2 * MAX_ROUNDS];
                const int64_t n = 2 * rounds;
                for (int64_t k = 0; k < n; k++) {
                    g[k] = (double)bytes * (double)copies / t[v][k] / 1e9;
                    q[k] = t[v][k] / t[0][k];
                }
                qsort(g, (size_t)n, sizeof g[0], cmp_d);
                qsort(q, (size_t)n, sizeof q[0], cmp_d);
                char name[32];
                if (vspan[v] < 0)
                    snprintf(name, sizeof name, "default (%lld)", (long long)-vspan[v]);
                else
                    snprintf(name, sizeof name, "span %lld", (long long)vspan[v]);
                printf("  %-12s GB/s median %7.2f [%7.2f - %7.2f]   time / span 1 %.3f "
                       "[%.3f - %.3f]\n",
                       name, g[n / 2], g[0], g[n - 1], q[n / 2], q[0], q[n - 1]);
            }
            for (int v = 0; v < nv; v++)
                free(mem[v]);
            cpu_pool_destroy(pool);
        }
        free(file);
        free(x);
        free(y);
        free(yr);
        free(xs.buf);
    }
    return 0;
}
