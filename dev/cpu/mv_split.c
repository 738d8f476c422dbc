/*
dev/cpu/mv_split: how the CPU decoder's matrix products split a product among the threads.

A token of the 2gb preset (gem synth --preset 2gb: 60 layers, hidden 1024, Q8_0) streams about
1.7 GB of projection and 0.4 GB of MLP weights through products of 2.2 to 17.8 MB, each run on
the decode context's pool. This program builds L layers of random Q8_0 matrices of the preset's
sliding-layer shapes (q, k, v: 8192, 4096, 4096 x 1024 as one batch; o: 1024 x 8192; gate and up:
2048 x 1024 as one batch; down: 1024 x 2048: 33.4 MB a layer, 2.0 GB for 60), runs a "token" (every
layer's four products in the model's order) with each split of the batch's bytes into
threads x S contiguous ranges (S = 1, the library's, and the others asked for), and reports the
median token time and its rate against a streaming read of as many bytes on as many threads.

Versions (S:D:I, every triple of --splits S, --prefetch D and --into I):
  S  the contiguous ranges a thread's share is cut into: 1, one range per thread (each core
     streams its rows in order); 2, 4, 8 ranges taken in turn from the pool's counter (a thread
     that finishes early takes the next, at the cost of a stream that restarts more often);
     tL a tapered split of L levels (mv_tuning's taper_levels: ranges of half a thread's share,
     then a quarter, ..., so that the ranges left at the end are short)
  D  bytes ahead: before each row a thread asks (prefetcht1) for the lines of the row that
     starts D bytes on; 0 none. In L3 one core computes the Q8_0 product at 18 GB/s; from DRAM
     it streams 6-7 GB/s against the probe's 15-17 (run 46): compute and loads do not overlap.
  I  where the prefetches go: 1 L1 (prefetcht0), 2 L2 (prefetcht1), 0 non-temporal
--xq C,..: x's digits by the run's items for products of at least C columns (mv_tuning's
xq_items_cols; 0, the default, by the caller before the run): each version's name then ends in
:xC. On 16 threads the caller's serial digits of o's 8,192 columns leave 15 threads waiting.

Memory (--alloc): the weights in malloc's memory (4 KiB pages, as a file's mmap gives the
decoder) or in cpu_stream_alloc's (2 MiB-aligned, madvise(MADV_HUGEPAGE), as the probe and the
K/V caches get): the hardware prefetchers stop at page boundaries.

Serial gaps (--gap-us G,..): in the decoder the caller runs serial work (norms, checks) for
some microseconds between the products, while the workers poll. A gap G spins the caller for G
us before each product, and the table reports the token's time without the gaps, so a pool that
pays for the caller's absence shows up as a slower product. With --alloc file the weights are
written to a file and mapped read-only and private, as the decoder maps a GGUF file.

Layout (--layout): packed (the default, as the decoder runs Q8_0 matrices whose rows are a
multiple of 16: a copy in 16-row groups and the integer products of matvec.h) or file (the
matrices as the file holds them: the F32 rule). Every run up to b01df54 measured the file
layout, the only one then.

Every split is checked first: its outputs must be the bits of mv_rows on one thread (a row is
always computed whole by one item). Then rounds of all versions in A B ... B A order.

usage: mv_split [--threads N] [--layers L] [--rounds R] [--splits 1,4,t6] [--prefetch 0,4096]
                [--into 2] [--alloc malloc|huge|file] [--gap-us 0,10] [--layout packed|file]
H200 host (Intel Xeon, 16 cores), results/h200/run46: see that run's COMMAND.md.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/mman.h>
#include <unistd.h>

#include "common.h"
#include "cpu_memory.h"
#include "cpu_pool.h"
#include "gem/engine.h"
#include "gem/model.h"
#include "matvec.h"

#define MAX_LIST 8

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) { return dev_xorshift(&rng); }

static int huge_pages; /* --alloc huge */
static int packed = 1; /* --layout packed (the library's for these shapes) or file */
static mv_scratch xq;  /* the integer products' scratch */
static int file_map;   /* --alloc file */

/* rows x cols of random Q8_0: scales in [2^-10, 2^-6), quants in [-127, 127]. */
static gem_matrix q8_matrix(int64_t rows, int64_t cols)
{
    const size_t rb = (size_t)(cols / 32) * 34;
    void *mem = NULL;
    if (huge_pages) {
        if (cpu_stream_alloc(rb * (size_t)rows, 0, &mem) != GEM_OK)
            mem = NULL;
    } else {
        mem = malloc(rb * (size_t)rows);
    }
    uint8_t *d = mem;
    if (!d) {
        fprintf(stderr, "mv_split: out of memory\n");
        exit(1);
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < cols / 32; b++) {
            uint8_t *blk = d + (size_t)r * rb + (size_t)b * 34;
            const uint64_t u = next_u64();
            const uint16_t h = (uint16_t)(0x1400u + (u & 0x0FFFu)); /* f16 in [2^-10, 2^-6) */
            blk[0] = (uint8_t)(h & 0xFF);
            blk[1] = (uint8_t)(h >> 8);
            for (int j = 0; j < 32; j += 8) {
                uint64_t v = next_u64();
                for (int k = 0; k < 8; k++, v >>= 8)
                    blk[2 + j + k] = (uint8_t)((int)(v % 255) - 127);
            }
        }
    return (gem_matrix){d, GEM_GGUF_Q8_0, rows, cols, rb, NULL, 0};
}

typedef struct layer {
    gem_matrix q, k, v, o, gate, up, down;
} layer;

typedef struct bufs {
    float *xn, *q, *k, *v, *att, *o, *gate, *up;
} bufs;

/* Spins the calling thread for `us` microseconds (the decoder's serial work between products). */
static void spin_us(double us)
{
    if (us <= 0.0)
        return;
    const double t0 = now_s();
    while ((now_s() - t0) * 1e6 < us) {
    }
}

/* One token's products over every layer under the tuning S, the caller away for gap_us before
 * each product. */
static void token(cpu_pool *pool, const layer *L, int64_t nl, const bufs *b, const mv_tuning *S,
                  double gap_us)
{
    for (int64_t i = 0; i < nl; i++) {
        spin_us(gap_us);
        const gem_matrix *w3[3] = {&L[i].q, &L[i].k, &L[i].v};
        const float *x3[3] = {b->xn, b->xn, b->xn};
        float *y3[3] = {b->q, b->k, b->v};
        mv_batch_tuned(pool, 3, w3, x3, &xq, y3, S);
        spin_us(gap_us);
        const gem_matrix *wo = &L[i].o;
        mv_batch_tuned(pool, 1, &wo, (const float *const *)&b->att, &xq, &b->o, S);
        spin_us(gap_us);
        const gem_matrix *w2[2] = {&L[i].gate, &L[i].up};
        const float *x2[2] = {b->xn, b->xn};
        float *y2[2] = {b->gate, b->up};
        mv_batch_tuned(pool, 2, w2, x2, &xq, y2, S);
        spin_us(gap_us);
        const gem_matrix *wd = &L[i].down;
        mv_batch_tuned(pool, 1, &wd, (const float *const *)&b->gate, &xq, &b->o, S);
    }
}

/* Moves every layer's weights into one file in $TMPDIR (or /tmp), maps it read-only and private
 * and points the matrices into the mapping (the file is unlinked; the mapping stays). */
static void map_into_file(layer *L, int64_t nl)
{
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char path[4096];
    snprintf(path, sizeof path, "%s/mv_split.XXXXXX", dir);
    const int fd = mkstemp(path);
    if (fd < 0) {
        fprintf(stderr, "mv_split: cannot create a file in %s\n", dir);
        exit(1);
    }
    size_t off = 0;
    for (int64_t i = 0; i < nl; i++) {
        gem_matrix *m[7] = {&L[i].q, &L[i].k, &L[i].v, &L[i].o, &L[i].gate, &L[i].up, &L[i].down};
        for (int k = 0; k < 7; k++) {
            const size_t n = (size_t)m[k]->rows * m[k]->row_bytes;
            if (pwrite(fd, m[k]->data, n, (off_t)off) != (ssize_t)n) {
                fprintf(stderr, "mv_split: cannot write %s\n", path);
                exit(1);
            }
            off += (n + 31) / 32 * 32; /* GGUF's alignment */
        }
    }
    uint8_t *map = mmap(NULL, off, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    unlink(path);
    if (map == MAP_FAILED) {
        fprintf(stderr, "mv_split: cannot map the weights\n");
        exit(1);
    }
    off = 0;
    for (int64_t i = 0; i < nl; i++) {
        gem_matrix *m[7] = {&L[i].q, &L[i].k, &L[i].v, &L[i].o, &L[i].gate, &L[i].up, &L[i].down};
        for (int k = 0; k < 7; k++) {
            const size_t n = (size_t)m[k]->rows * m[k]->row_bytes;
            free((void *)m[k]->data);
            m[k]->data = map + off;
            off += (n + 31) / 32 * 32;
        }
    }
}

/* "S:D:I:gap", S a count of ranges a thread or tL, then ":xC" when the items compute x's digits
 * from C columns */
static void version_name(const mv_tuning *v, double gap, char *name, size_t size)
{
    char split[24], xcols[32] = "";
    if (v->taper_levels)
        snprintf(split, sizeof split, "t%lld", (long long)v->taper_levels);
    else
        snprintf(split, sizeof split, "%lld", (long long)v->parts_per_thread);
    if (v->xq_items_cols)
        snprintf(xcols, sizeof xcols, ":x%lld", (long long)v->xq_items_cols);
    snprintf(name, size, "%s:%lld:%d:%g%s", split, (long long)v->prefetch_bytes, v->prefetch_into,
             gap, xcols);
}

int main(int argc, char **argv)
{
    int64_t threads = 0, nl = 60, rounds = 7;
    int64_t splits[MAX_LIST] = {1, 4}, pfs[MAX_LIST] = {0, 4096}, intos[MAX_LIST] = {2};
    int64_t xqs[MAX_LIST] = {0};
    int nsp = 2, npf = 2, nin = 1, ngap = 1, nxq = 1;
    double gaps[MAX_LIST] = {0.0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            nl = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--splits") && i + 1 < argc) {
            nsp = 0;
            for (char *t = strtok(argv[++i], ","); t && nsp < MAX_LIST; t = strtok(NULL, ","))
                splits[nsp++] = t[0] == 't' ? -atoll(t + 1) : atoll(t); /* tL: -L */
        } else if (!strcmp(argv[i], "--into") && i + 1 < argc) {
            nin = 0;
            for (char *t = strtok(argv[++i], ","); t && nin < MAX_LIST; t = strtok(NULL, ","))
                intos[nin++] = atoll(t);
        } else if (!strcmp(argv[i], "--prefetch") && i + 1 < argc) {
            npf = 0;
            for (char *t = strtok(argv[++i], ","); t && npf < MAX_LIST; t = strtok(NULL, ","))
                pfs[npf++] = atoll(t);
        } else if (!strcmp(argv[i], "--xq") && i + 1 < argc) {
            nxq = 0;
            for (char *t = strtok(argv[++i], ","); t && nxq < MAX_LIST; t = strtok(NULL, ","))
                xqs[nxq++] = atoll(t);
        } else if (!strcmp(argv[i], "--gap-us") && i + 1 < argc) {
            ngap = 0;
            for (char *t = strtok(argv[++i], ","); t && ngap < MAX_LIST; t = strtok(NULL, ","))
                gaps[ngap++] = atof(t);
        } else if (!strcmp(argv[i], "--alloc") && i + 1 < argc &&
                   (!strcmp(argv[i + 1], "malloc") || !strcmp(argv[i + 1], "huge") ||
                    !strcmp(argv[i + 1], "file"))) {
            huge_pages = !strcmp(argv[++i], "huge");
            file_map = !strcmp(argv[i], "file");
        } else if (!strcmp(argv[i], "--layout") && i + 1 < argc &&
                   (!strcmp(argv[i + 1], "packed") || !strcmp(argv[i + 1], "file"))) {
            packed = !strcmp(argv[++i], "packed");
        } else {
            fprintf(stderr, "usage: mv_split [--threads N] [--layers L] [--rounds R] "
                            "[--splits 1,4,t6] [--prefetch 0,4096] [--into 2] [--xq 0,2048] "
                            "[--alloc malloc|huge|file] [--gap-us 0,10] "
                            "[--layout packed|file]\n");
            return 2;
        }
    }
    for (int g = 0; g < ngap; g++)
        if (!(gaps[g] >= 0.0 && gaps[g] <= 1e4)) {
            fprintf(stderr, "mv_split: a gap is 0 to 10000 us\n");
            return 2;
        }
    if (nl < 1 || rounds < 1 || threads < 0 || nsp < 1 || npf < 1 || nin < 1 || ngap < 1 ||
        nxq < 1) {
        fprintf(stderr, "mv_split: layers and rounds >= 1, threads >= 0\n");
        return 2;
    }
    for (int x = 0; x < nxq; x++)
        if (xqs[x] < 0 || xqs[x] > ((int64_t)1 << 30)) {
            fprintf(stderr, "mv_split: --xq takes column counts from 0 to 2^30\n");
            return 2;
        }
    if (ngap * nsp * npf * nin * nxq > MAX_LIST * MAX_LIST * MAX_LIST * MAX_LIST) {
        fprintf(stderr, "mv_split: at most %d versions\n",
                MAX_LIST * MAX_LIST * MAX_LIST * MAX_LIST);
        return 2;
    }
    mv_tuning v[MAX_LIST * MAX_LIST * MAX_LIST * MAX_LIST];
    double vgap[MAX_LIST * MAX_LIST * MAX_LIST * MAX_LIST];
    int ns = 0;
    for (int g = 0; g < ngap; g++)
    for (int xi = 0; xi < nxq; xi++)
    for (int a = 0; a < nsp; a++)
        for (int c = 0; c < npf; c++)
            for (int d = 0; d < nin; d++) {
                if (splits[a] == 0 || splits[a] > 64 || splits[a] < -8 || splits[a] == -1 ||
                    pfs[c] < 0 ||
                    pfs[c] > ((int64_t)1 << 30) || intos[d] < 0 || intos[d] > 2) {
                    fprintf(stderr, "mv_split: a split is 1 to 64 ranges a thread or t2 to t8 "
                                    "levels, a prefetch 0 to 2^30 bytes, into 0, 1 or 2\n");
                    return 2;
                }
                vgap[ns] = gaps[g];
                v[ns++] = splits[a] > 0
                              ? (mv_tuning){splits[a], pfs[c], (int)intos[d], 0, 0, xqs[xi]}
                              : (mv_tuning){1, pfs[c], (int)intos[d], -splits[a], 0, xqs[xi]};
            }
    /* the pool and the probe of a decode context's size */
    gem_engine *e = NULL;
    if (gem_engine_create(GEM_BACKEND_CPU, threads, &e) != GEM_OK) {
        fprintf(stderr, "mv_split: no CPU engine\n");
        return 1;
    }
    threads = gem_engine_threads(e);
    cpu_pool *pool = NULL;
    if (cpu_pool_create(threads, &pool) != GEM_OK) {
        fprintf(stderr, "mv_split: no pool\n");
        return 1;
    }
    fprintf(stderr, "mv_split: %lld layers of Q8_0 weights on %lld threads\n", (long long)nl,
            (long long)threads);
    printf("weights in %s\n", file_map     ? "a file mapped read-only and private"
                              : huge_pages ? "cpu_stream_alloc's memory (2 MiB pages advised)"
                                           : "malloc's memory (4 KiB pages)");
    layer *L = calloc((size_t)nl, sizeof *L);
    size_t bytes = 0;
    for (int64_t i = 0; i < nl; i++) {
        L[i] = (layer){q8_matrix(8192, 1024), q8_matrix(4096, 1024), q8_matrix(4096, 1024),
                       q8_matrix(1024, 8192), q8_matrix(2048, 1024), q8_matrix(2048, 1024),
                       q8_matrix(1024, 2048)};
        const gem_matrix *m[7] = {&L[i].q, &L[i].k, &L[i].v, &L[i].o, &L[i].gate, &L[i].up,
                                  &L[i].down};
        for (int k = 0; k < 7; k++)
            bytes += (size_t)m[k]->rows * m[k]->row_bytes;
    }
    if (file_map)
        map_into_file(L, nl);
    if (packed) /* as the model packs them: a copy in 16-row groups (matvec.h) */
        for (int64_t i = 0; i < nl; i++) {
            gem_matrix *m[7] = {&L[i].q, &L[i].k, &L[i].v, &L[i].o, &L[i].gate, &L[i].up,
                                &L[i].down};
            for (int k = 0; k < 7; k++) {
                void *dst = NULL;
                if (!mv_packable(m[k]) ||
                    cpu_stream_alloc((size_t)m[k]->rows * m[k]->row_bytes, 0, &dst) != GEM_OK) {
                    fprintf(stderr, "mv_split: cannot pack\n");
                    return 1;
                }
                mv_pack(m[k], dst);
                m[k]->packed = dst;
            }
        }
    xq.bytes = mv_xq_bytes(8192);
    xq.buf = aligned_alloc(64, xq.bytes);
    printf("layout: %s\n", packed ? "packed (16-row groups, integer products)"
                                  : "the file's (the F32 rule)");
    bufs b;
    float **all[8] = {&b.xn, &b.q, &b.k, &b.v, &b.att, &b.o, &b.gate, &b.up};
    for (int k = 0; k < 8; k++) {
        *all[k] = malloc(8192 * sizeof(float));
        for (int i = 0; i < 8192; i++)
            (*all[k])[i] = (float)sin(0.37 * i + k);
    }
    /* checks: every split gives mv_rows' bits on each of layer 0's matrices */
    float *want = malloc(8192 * sizeof(float)), *got = malloc(8192 * sizeof(float));
    const gem_matrix *m0[7] = {&L[0].q, &L[0].k, &L[0].v, &L[0].o, &L[0].gate, &L[0].up,
                               &L[0].down};
    for (int k = 0; k < 7; k++) {
        const float *x = m0[k]->cols == 1024 ? b.xn : b.att;
        if (mv_rows(m0[k], x, &xq, want, 0, m0[k]->rows) != GEM_OK) {
            fprintf(stderr, "mv_split: mv_rows failed\n");
            return 1;
        }
        for (int s = 0; s < ns; s++) {
            memset(got, 0xFF, 8192 * sizeof(float));
            mv_batch_tuned(pool, 1, &m0[k], &x, &xq, &got, &v[s]);
            if (memcmp(want, got, (size_t)m0[k]->rows * sizeof(float)) != 0) {
                char name[48];
                version_name(&v[s], 0.0, name, sizeof name);
                fprintf(stderr, "mv_split: version %s differs from mv_rows on matrix %d\n", name,
                        k);
                return 1;
            }
        }
    }
    printf("checks: %d versions x 7 matrices, the bits of mv_rows\n", ns);
    double bw = 0.0;
    if (gem_engine_read_bandwidth(e, (size_t)1 << 30, 5, &bw) != GEM_OK) {
        fprintf(stderr, "mv_split: the read probe failed\n");
        return 1;
    }
    double *t = calloc((size_t)(ns * rounds * 2), sizeof *t);
    int64_t *cnt = calloc((size_t)ns, sizeof *cnt);
    for (int s = 0; s < ns; s++)
        token(pool, L, nl, &b, &v[s], vgap[s]); /* warm-up */
    for (int64_t r = 0; r < rounds; r++)
        for (int pass = 0; pass < 2; pass++) /* A B .. then .. B A */
            for (int u = 0; u < ns; u++) {
                const int s = pass ? ns - 1 - u : u;
                const double t0 = now_s();
                token(pool, L, nl, &b, &v[s], vgap[s]);
                /* the products' time: the gaps' (4 a layer) taken out */
                t[s * rounds * 2 + cnt[s]++] = now_s() - t0 - 4.0 * (double)nl * vgap[s] * 1e-6;
            }
    printf("read bandwidth %.2f GB/s (1 GiB streaming read, %lld threads); weights %.3f GB a "
           "token, floor %.3f ms\n",
           bw * 1e-9, (long long)threads, (double)bytes * 1e-9, (double)bytes / bw * 1e3);
    printf("S:D:I:gap[:xC]      median ms   min ms   max ms    GB/s  of the probe  (gaps taken out)\n");
    for (int s = 0; s < ns; s++) {
        double *u = t + s * rounds * 2;
        qsort(u, (size_t)cnt[s], sizeof *u, cmp_d);
        const double med = cnt[s] % 2 ? u[cnt[s] / 2] : 0.5 * (u[cnt[s] / 2 - 1] + u[cnt[s] / 2]);
        char name[48];
        version_name(&v[s], vgap[s], name, sizeof name);
        printf("%-19s  %9.3f  %7.3f  %7.3f  %6.2f  %5.1f%%\n", name, med * 1e3, u[0] * 1e3,
               u[cnt[s] - 1] * 1e3, (double)bytes / med * 1e-9, 100.0 * (double)bytes / med / bw);
    }
    cpu_pool_destroy(pool);
    gem_engine_destroy(e);
    return 0;
}
