/*
dev/cpu/mv_chain: where the CPU decoder's products lose to the read probe, by taking a token's
chain of products apart.

On the H200 host's Xeon (16 cores) the products of the 2gb preset (60 layers, hidden 1024, Q8_0)
read 101 GB/s, 66-71% of the read probe (results/h200/run64-66), and neither their split, their
prefetch distance nor reading several streams at once moved that. A token runs them as 240
dispatches on the pool of 2.2 to 17.8 MB each (15 to 120 us at the probe's rate), so what each
dispatch costs beside its bytes (waking the workers, the ramp of every range's stream, the last
range's tail, the return) is a candidate the single-product figures cannot show. This program
times the same bytes under different structures:

  products   the decoder's four products a layer: mv_batch of q, k, v (8192, 4096, 4096 x 1024),
             mv of o (1024 x 8192), mv_batch of gate and up (2048 x 1024 each), mv of down
             (1024 x 2048); 33.4 MB a layer, the library's split, prefetch and span
             (mv_span_for: o and down in spans of 8 on 2 threads, 1 on 16)
  layer      the same bytes as one product a layer (a 30,720 x 1,024 packed matrix over the
             layer's region): one dispatch a layer
  flat       the same bytes as one product (30,720 L x 1,024): one dispatch
  read       the products' bytes read with no arithmetic (64-bit integer sums, the four lines
             --ahead bytes on asked for into L2 at every 256-byte step, as the products ask on
             an Intel processor), split as the products were split up to run 156: 4
             dispatches a layer, threads x 4 equal contiguous ranges a dispatch, 16-row groups
             whole (the products' split is tapered since: mv_tuning)
  read-flat  the whole region read in one dispatch of threads x 4 ranges
  empty      4 L dispatches of threads x 4 items that do nothing

The layers lie end to end in one region (2 MiB aligned, as the probe and the caches get), in
the decoder's order. A packed Q8_0 block is the 16 rows' scales then their quants (matvec.h), so
any run of whole 544-byte blocks is a valid packed matrix: "layer" and "flat" read the very
bytes "products" reads, with real scales (F16 in [2^-10, 2^-6)).

Check first: every version that computes (products, layer, flat) gives the bits of mv_rows on
one thread; the read versions' sums equal a serial sum. Then rounds of the versions in
A B ... B A order; the median, min and max of each and its rate against the library's probe
(gem_engine_read_bandwidth) in the same process. Then, per kind of dispatch (q/k/v, o,
gate/up, down), the caller's time of one call of "products" and "read" (medians over every
layer and round), and from the read's stamps (every item's start and end on the monotonic
clock): the wake (dispatch to the first item's start), the busy share (items' time over threads
x the dispatch's time), the tail (the last thread's end after the median thread's end) and the
return (the last item's end to the caller's return).

Reading it: if "flat" runs near the probe and "products" not, the dispatches cost the
difference, and "read" against "read-flat" says whether the bytes alone pay it too; if "flat"
is as slow as "products", the products' own loop is what holds them.

This VM (AMD EPYC Zen 4, 2 threads, probe 65.4 GB/s in a quiet spell; 60 layers, 5 rounds;
before the spans):
products 39.7 ms (77% of the probe), layer 31.5 (97%), flat 30.6 (100%), read 54.8 (56%: the
4 KiB prefetch, which this processor's products no longer ask for, and the integer sum), empty
0.8 us a dispatch; per call q/k/v 64 GB/s, o 39, gate/up 56, down 37. Here the dispatches cost
nothing and the wide matrices do: o (1024 x 8192) and down (1024 x 2048) read far slower than
the same bytes as 1024-column rows. A one-off test of o's shape against 8192 x 1024 over the
same region, cold: 38-39 against 59-61 GB/s on 2 threads, 25.5 against 33.5 on one, yet equal
on one thread from the L3 (46 against 47.7): the wide shape is capped per core, not by its
arithmetic. Not the L1's room for x's digits (208 bytes a block, 53 KB at 8192 columns, which
do not stay in the L1 while a group's 139 KB of weights pass): 2 or 4 groups computed a column
chunk of 512 or 1024 at a time (the same bits; each chunk's digits reused from the L1) took
1.01-1.07 the time of the library's order on one thread, 8 groups 1.26 (A B B A, 8 rounds).
Left there: the 2gb preset is a test shape, and the Xeon's own figures come first.

usage: mv_chain [--threads N] [--layers L] [--rounds R] [--ahead BYTES]
*/
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "cpu_memory.h"
#include "cpu_pool.h"
#include "gem/engine.h"
#include "gem/model.h"
#include "matvec.h"

enum { GROUP = 16, PARTS = 4, COLS = 1024, KINDS = 4, NV = 6, MAX_ROUNDS = 16 };
static const char *const version_name[NV] = {"products", "layer", "flat",
                                             "read", "read-flat", "empty"};
static const char *const kind_name[KINDS] = {"q/k/v", "o", "gate/up", "down"};

/* A layer's matrices in the decoder's order: rows x cols. */
static const int64_t shape[7][2] = {{8192, 1024}, {4096, 1024}, {4096, 1024}, {1024, 8192},
                                    {2048, 1024}, {2048, 1024}, {1024, 2048}};
/* Dispatch kind k covers the layer's matrices [first[k], first[k + 1]). */
static const int first_matrix[KINDS + 1] = {0, 3, 4, 6, 7};

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) { return dev_xorshift(&rng); }

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static size_t matrix_bytes(int m) { return (size_t)shape[m][0] * (size_t)(shape[m][1] / 32) * 34; }

/* The packed matrix of shape `m` at p (its bytes already in the packed layout). */
static gem_matrix packed_at(const uint8_t *p, int64_t rows, int64_t cols)
{
    return (gem_matrix){p, GEM_GGUF_Q8_0, rows, cols, (size_t)(cols / 32) * 34, p, 0};
}

/* ---- the read: the products' ranges with no arithmetic ------------------------------- */

typedef struct stamp {
    int64_t t0, t1;
    int64_t thread;
} stamp;

typedef struct read_job {
    const uint8_t *base;
    size_t bytes;    /* the dispatch's bytes */
    size_t unit;     /* a 16-row group's bytes (every matrix of a dispatch has 1024 columns or
                        is alone in it, so one unit serves the whole dispatch) */
    int64_t parts;
    size_t ahead;
    uint64_t *sums;  /* (parts) */
    stamp *stamps;   /* (parts) or NULL */
} read_job;

/* Sums the 64-bit words of [p, p + n) (n a multiple of 256), asking at every 256-byte step for
 * the four lines `ahead` bytes on while they lie before end. */
static uint64_t read_range(const uint8_t *p, size_t n, size_t ahead, const uint8_t *end)
{
    uint64_t s[8] = {0};
    for (size_t i = 0; i < n; i += 256) {
        if (ahead && p + i + ahead + 256 <= end)
            for (int l = 0; l < 4; l++)
                __builtin_prefetch(p + i + ahead + 64 * l, 0, 2);
        const uint64_t *w = (const uint64_t *)(const void *)(p + i);
        for (int k = 0; k < 32; k++)
            s[k & 7] += w[k];
    }
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

/* Item `item`: the whole units whose first byte lies in [item B / parts, (item + 1) B / parts),
 * as mv_item splits a batch. */
static void read_item(void *ctx, int64_t item, int64_t thread)
{
    const read_job *j = ctx;
    const int64_t t0 = j->stamps ? now_ns() : 0;
    const size_t b0 = (size_t)item * j->bytes / (size_t)j->parts;
    const size_t b1 = (size_t)(item + 1) * j->bytes / (size_t)j->parts;
    const size_t u0 = (b0 + j->unit - 1) / j->unit, u1 = (b1 + j->unit - 1) / j->unit;
    size_t e0 = u0 * j->unit, e1 = u1 * j->unit;
    e1 = e1 < j->bytes ? e1 : j->bytes;
    j->sums[item] = e0 < e1 ? read_range(j->base + e0, e1 - e0, j->ahead, j->base + j->bytes) : 0;
    if (j->stamps)
        j->stamps[item] = (stamp){t0, now_ns(), thread};
}

static void empty_item(void *ctx, int64_t item, int64_t thread)
{
    (void)ctx;
    (void)item;
    (void)thread;
}

/* ---- the chain ----------------------------------------------------------------------- */

typedef struct chain {
    cpu_pool *pool;
    int64_t threads, layers;
    uint8_t *region;
    size_t layer_bytes, region_bytes;
    size_t offset[7];  /* a matrix's bytes from its layer's start */
    gem_matrix (*m)[7]; /* (layers) */
    gem_matrix *layer; /* (layers): a layer's bytes as one 30,720 x 1,024 product */
    gem_matrix flat;
    mv_scratch xq;
    const float *x;    /* (8192) */
    float *y;          /* (30,720 layers) */
    size_t ahead;
    uint64_t *sums;    /* (threads x PARTS) */
    stamp *stamps;     /* (layers x KINDS x threads x PARTS) of the last read token */
    int64_t *call_t0, *call_t1; /* (layers x KINDS) each call's start and return (caller) */
} chain;

/* One dispatch of the read over kind k of layer l; stamps s (threads x PARTS) or NULL. */
static uint64_t read_dispatch(chain *c, int64_t l, int k, stamp *s)
{
    const size_t start = c->offset[first_matrix[k]];
    const size_t end = first_matrix[k + 1] < 7 ? c->offset[first_matrix[k + 1]] : c->layer_bytes;
    const int m = first_matrix[k];
    read_job j = {c->region + (size_t)l * c->layer_bytes + start, end - start,
                  (size_t)GROUP * (size_t)(shape[m][1] / 32) * 34, c->threads * PARTS, c->ahead,
                  c->sums, s};
    cpu_pool_run(c->pool, j.parts, read_item, &j);
    uint64_t t = 0;
    for (int64_t i = 0; i < j.parts; i++)
        t += c->sums[i];
    return t;
}

/* One token of version v; stamps and call times recorded when `record`. Returns a checksum of
 * the read versions (0 for the others). */
static uint64_t token(chain *c, int v, int record)
{
    uint64_t sum = 0;
    float *y = c->y;
    if (v == 2) {
        (void)mv(c->pool, &c->flat, c->x, &c->xq, y);
        return 0;
    }
    if (v == 4) {
        read_job j = {c->region, c->region_bytes, (size_t)GROUP * 32 * 34, c->threads * PARTS,
                      c->ahead, c->sums, NULL};
        cpu_pool_run(c->pool, j.parts, read_item, &j);
        for (int64_t i = 0; i < j.parts; i++)
            sum += c->sums[i];
        return sum;
    }
    for (int64_t l = 0; l < c->layers; l++) {
        if (v == 1) {
            (void)mv(c->pool, &c->layer[l], c->x, &c->xq, y);
            continue;
        }
        for (int k = 0; k < KINDS; k++) {
            const int64_t t0 = record ? now_ns() : 0;
            if (v == 0) {
                const gem_matrix *w[3];
                const float *xs[3];
                float *ys[3];
                float *yy = y;
                const int n = first_matrix[k + 1] - first_matrix[k];
                for (int i = 0; i < n; i++) {
                    w[i] = &c->m[l][first_matrix[k] + i];
                    xs[i] = c->x;
                    ys[i] = yy;
                    yy += w[i]->rows;
                }
                (void)mv_batch(c->pool, n, w, xs, &c->xq, ys);
            } else if (v == 3) {
                stamp *s = record ? c->stamps + (l * KINDS + k) * c->threads * PARTS : NULL;
                sum += read_dispatch(c, l, k, s);
            } else {
                cpu_pool_run(c->pool, c->threads * PARTS, empty_item, NULL);
            }
            if (record) {
                c->call_t0[l * KINDS + k] = t0;
                c->call_t1[l * KINDS + k] = now_ns();
            }
        }
    }
    return sum;
}

/* ---- checks -------------------------------------------------------------------------- */

/* w on the pool against mv_rows on one thread, bit for bit; 0 when equal. */
static int check_product(chain *c, const gem_matrix *w)
{
    float *a = malloc((size_t)w->rows * sizeof *a), *b = malloc((size_t)w->rows * sizeof *b);
    if (!a || !b) {
        fprintf(stderr, "mv_chain: out of memory\n");
        exit(1);
    }
    int bad = mv(c->pool, w, c->x, &c->xq, a) != GEM_OK ||
              mv_rows(w, c->x, &c->xq, b, 0, w->rows) != GEM_OK ||
              memcmp(a, b, (size_t)w->rows * sizeof *a) != 0;
    free(a);
    free(b);
    return bad;
}

static uint64_t serial_sum(const uint8_t *p, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        s += w;
    }
    return s;
}

/* ---- report -------------------------------------------------------------------------- */

static double median(double *v, int64_t n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Per kind: the medians over every layer and round of the read's stamps. */
typedef struct kind_stats {
    double *products_us, *read_us, *wake_us, *busy, *tail_us, *ret_us;
    int64_t n;
} kind_stats;

static void add_read_stats(const chain *c, kind_stats *ks)
{
    const int64_t items = c->threads * PARTS;
    int64_t *last_end = malloc((size_t)c->threads * sizeof *last_end);
    double *ends = malloc((size_t)c->threads * sizeof *ends);
    if (!last_end || !ends)
        exit(1);
    for (int64_t l = 0; l < c->layers; l++)
        for (int k = 0; k < KINDS; k++) {
            const stamp *s = c->stamps + (l * KINDS + k) * items;
            const int64_t t0 = c->call_t0[l * KINDS + k], t1 = c->call_t1[l * KINDS + k];
            int64_t first = INT64_MAX, last = INT64_MIN;
            double busy = 0.0;
            for (int64_t t = 0; t < c->threads; t++)
                last_end[t] = INT64_MIN;
            for (int64_t i = 0; i < items; i++) {
                first = s[i].t0 < first ? s[i].t0 : first;
                last = s[i].t1 > last ? s[i].t1 : last;
                busy += (double)(s[i].t1 - s[i].t0);
                if (s[i].t1 > last_end[s[i].thread])
                    last_end[s[i].thread] = s[i].t1;
            }
            int64_t nt = 0;
            for (int64_t t = 0; t < c->threads; t++)
                if (last_end[t] != INT64_MIN)
                    ends[nt++] = (double)last_end[t];
            const double med_end = median(ends, nt);
            kind_stats *q = &ks[k];
            q->wake_us[q->n] = (double)(first - t0) * 1e-3;
            q->busy[q->n] = busy / ((double)c->threads * (double)(t1 - t0));
            q->tail_us[q->n] = ((double)last - med_end) * 1e-3;
            q->ret_us[q->n] = (double)(t1 - last) * 1e-3;
            q->read_us[q->n] = (double)(t1 - t0) * 1e-3;
            q->n++;
        }
    free(last_end);
    free(ends);
}

int main(int argc, char **argv)
{
    int64_t threads = 0, layers = 60, rounds = 5, ahead = 4096;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            layers = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--ahead") && i + 1 < argc)
            ahead = atoll(argv[++i]);
        else {
            fprintf(stderr, "usage: mv_chain [--threads N] [--layers L] [--rounds R] "
                            "[--ahead BYTES]\n");
            return 2;
        }
    }
    if (threads < 0 || threads > 1024 || layers < 1 || layers > 240 || rounds < 1 ||
        rounds > MAX_ROUNDS || ahead < 0 || ahead > (1 << 20) || ahead % 256) {
        fprintf(stderr, "mv_chain: threads 0..1024, layers 1..240, rounds 1..%d, ahead 0..1 MiB "
                        "in steps of 256\n", MAX_ROUNDS);
        return 2;
    }
    gem_engine *e = NULL;
    if (gem_engine_create(GEM_BACKEND_CPU, threads, &e) != GEM_OK) {
        fprintf(stderr, "mv_chain: no CPU engine\n");
        return 1;
    }
    chain c = {0};
    c.threads = gem_engine_threads(e);
    c.layers = layers;
    c.ahead = (size_t)ahead;
    if (cpu_pool_create(c.threads, &c.pool) != GEM_OK) {
        fprintf(stderr, "mv_chain: no pool\n");
        return 1;
    }
    for (int m = 1; m < 7; m++)
        c.offset[m] = c.offset[m - 1] + matrix_bytes(m - 1);
    c.layer_bytes = c.offset[6] + matrix_bytes(6);
    c.region_bytes = c.layer_bytes * (size_t)layers;
    void *mem = NULL;
    if (cpu_stream_alloc(c.region_bytes, 0, &mem) != GEM_OK) {
        fprintf(stderr, "mv_chain: out of memory (%zu bytes)\n", c.region_bytes);
        return 1;
    }
    c.region = mem;
    dev_fill_packed_q8_0(c.region, c.region_bytes, &rng); /* scales in [2^-10, 2^-6) */
    c.m = malloc((size_t)layers * sizeof *c.m);
    c.layer = malloc((size_t)layers * sizeof *c.layer);
    const int64_t layer_rows = (int64_t)(c.layer_bytes / ((size_t)(COLS / 32) * 34));
    for (int64_t l = 0; l < layers; l++) {
        const uint8_t *lb = c.region + (size_t)l * c.layer_bytes;
        for (int m = 0; m < 7; m++) {
            c.m[l][m] = packed_at(lb + c.offset[m], shape[m][0], shape[m][1]);
            /* the span the decoder packs with (random blocks read as any span are valid) */
            c.m[l][m].packed_span = mv_span_for(&c.m[l][m], c.threads);
        }
        c.layer[l] = packed_at(lb, layer_rows, COLS);
    }
    c.flat = packed_at(c.region, layer_rows * layers, COLS);
    c.xq.bytes = mv_xq_bytes(8192) * 3;
    c.xq.buf = aligned_alloc(64, c.xq.bytes);
    float *x = malloc(8192 * sizeof *x);
    c.y = malloc((size_t)(layer_rows * layers) * sizeof *c.y);
    c.sums = malloc((size_t)(c.threads * PARTS) * sizeof *c.sums);
    c.stamps = malloc((size_t)(layers * KINDS * c.threads * PARTS) * sizeof *c.stamps);
    c.call_t0 = malloc((size_t)(layers * KINDS) * sizeof *c.call_t0);
    c.call_t1 = malloc((size_t)(layers * KINDS) * sizeof *c.call_t1);
    if (!c.m || !c.layer || !c.xq.buf || !x || !c.y || !c.sums || !c.stamps || !c.call_t0 ||
        !c.call_t1) {
        fprintf(stderr, "mv_chain: out of memory\n");
        return 1;
    }
    for (int i = 0; i < 8192; i++)
        x[i] = (float)((double)(next_u64() >> 11) * 0x1.0p-53 - 0.5);
    c.x = x;

    /* checks: the computing versions against mv_rows, the reads against a serial sum */
    int bad = 0;
    for (int m = 0; m < 7; m++)
        bad += check_product(&c, &c.m[0][m]);
    bad += check_product(&c, &c.layer[layers - 1]);
    bad += check_product(&c, &c.flat);
    const uint64_t want = serial_sum(c.region, c.region_bytes);
    bad += token(&c, 3, 0) != want;
    bad += token(&c, 4, 0) != want;
    if (bad) {
        fprintf(stderr, "mv_chain: %d checks failed\n", bad);
        return 1;
    }
    double bw = 0.0;
    if (gem_engine_read_bandwidth(e, (size_t)1 << 30, 5, &bw) != GEM_OK) {
        fprintf(stderr, "mv_chain: the read probe failed\n");
        return 1;
    }
    printf("mv_chain: %lld layers of Q8_0 (packed), %.3f GB, %lld threads, %d ranges a thread, "
           "reads ask %lld bytes ahead\n",
           (long long)layers, (double)c.region_bytes / 1e9, (long long)c.threads, PARTS,
           (long long)ahead);
    printf("checks: the products of the 7 shapes, a layer and the flat matrix: the bits of "
           "mv_rows on one thread; both reads' sums the serial sum\n");
    printf("read bandwidth %.2f GB/s (the library's probe, 1 GiB); floor of these bytes %.3f ms\n",
           bw / 1e9, (double)c.region_bytes / bw * 1e3);

    /* rounds: versions 0..NV-1 then back, A B ... B A */
    double (*t)[2 * MAX_ROUNDS] = calloc(NV, sizeof *t);
    kind_stats ks[KINDS];
    const int64_t per_kind = layers * rounds * 2;
    for (int k = 0; k < KINDS; k++) {
        ks[k] = (kind_stats){.n = 0};
        ks[k].products_us = malloc((size_t)per_kind * sizeof(double));
        ks[k].read_us = malloc((size_t)per_kind * sizeof(double));
        ks[k].wake_us = malloc((size_t)per_kind * sizeof(double));
        ks[k].busy = malloc((size_t)per_kind * sizeof(double));
        ks[k].tail_us = malloc((size_t)per_kind * sizeof(double));
        ks[k].ret_us = malloc((size_t)per_kind * sizeof(double));
    }
    int64_t np = 0;
    for (int v = 0; v < NV; v++)
        (void)token(&c, v, 0); /* warm-up */
    for (int64_t r = 0; r < rounds; r++)
        for (int half = 0; half < 2; half++)
            for (int i = 0; i < NV; i++) {
                const int v = half ? NV - 1 - i : i;
                const double t0 = now_s();
                (void)token(&c, v, 1);
                t[v][2 * r + half] = now_s() - t0;
                if (v == 0) {
                    for (int64_t l = 0; l < layers; l++)
                        for (int k = 0; k < KINDS; k++)
                            ks[k].products_us[np + l] =
                                (double)(c.call_t1[l * KINDS + k] - c.call_t0[l * KINDS + k]) *
                                1e-3;
                    np += layers;
                } else if (v == 3) {
                    add_read_stats(&c, ks);
                }
            }
    printf("\nversion      median ms    min ms    max ms     GB/s  of the probe  (%lld rounds, "
           "A B ... B A)\n",
           (long long)rounds);
    for (int v = 0; v < NV; v++) {
        double s[2 * MAX_ROUNDS];
        memcpy(s, t[v], sizeof s);
        const double med = median(s, 2 * rounds);
        if (v == NV - 1)
            printf("%-10s %10.3f %9.3f %9.3f   %lld dispatches, %.2f us each\n", version_name[v],
                   med * 1e3, s[0] * 1e3, s[2 * rounds - 1] * 1e3, (long long)(4 * layers),
                   med * 1e6 / (double)(4 * layers));
        else
            printf("%-10s %10.3f %9.3f %9.3f  %7.2f  %6.1f%%\n", version_name[v], med * 1e3,
                   s[0] * 1e3, s[2 * rounds - 1] * 1e3, (double)c.region_bytes / med / 1e9,
                   100.0 * (double)c.region_bytes / med / bw);
    }
    printf("\nper dispatch, medians over %lld calls (us; GB/s of the dispatch's bytes):\n",
           (long long)(layers * rounds * 2));
    printf("kind       MB     products (GB/s)    read (GB/s)   wake   busy share   tail  "
           "return\n");
    for (int k = 0; k < KINDS; k++) {
        const size_t start = c.offset[first_matrix[k]];
        const size_t end = first_matrix[k + 1] < 7 ? c.offset[first_matrix[k + 1]] : c.layer_bytes;
        const double mb = (double)(end - start) / 1e6;
        const double pu = median(ks[k].products_us, np), ru = median(ks[k].read_us, ks[k].n);
        printf("%-8s %6.2f  %8.2f (%6.1f)  %8.2f (%6.1f)  %5.2f  %9.1f%%  %5.2f  %6.2f\n",
               kind_name[k], mb, pu, mb / pu * 1e3, ru, mb / ru * 1e3,
               median(ks[k].wake_us, ks[k].n), 100.0 * median(ks[k].busy, ks[k].n),
               median(ks[k].tail_us, ks[k].n), median(ks[k].ret_us, ks[k].n));
    }
    return 0;
}
