/*
dev/cpu/stream_probe: how the CPU harness's read-bandwidth probe reads, one axis at a time.

Every CPU figure "x floor" divides by the probe's rate (src/harness_cpu.c: hx_read_bandwidth, a
sum over a 4 GiB buffer in 4 contiguous slices a thread). On the H200 host's Xeon the fused
attention route read 104.7% of the probe at 128K (results/h200/run54), when the probe read with
the hardware prefetchers alone: the probe was the weaker reader, so the floor time it gave was
too long and every ratio too kind. The decoder's products gained most from a software prefetch 4 KiB
ahead (dev/cpu/mv_split, run 49); the attention kernels prefetch too. This program times the
probe's sum by slices a thread, prefetch distance and hint (cpu_stream_sum_ahead, the library's
reader).

H200 host (Intel Xeon, 16 cores, 4 GiB, results/h200/run61): with 4 slices a thread no prefetch
helped (123.7 GB/s without, 122.0-125.6 with t0 / t1, 48-69 with nta); 16 slices a thread read
135.6 without and 137.6-140.8 with t0 / t1 (the threads finish closer together). The library's
probe since: 16 slices a thread, the best of no prefetch, 4 KiB ahead into L2 and 16 KiB into L1.

Versions S:D:H (every triple of --slices, --prefetch and --hint):
  S  contiguous slices a thread (the library: 4), taken in turn from the pool's counter
  D  bytes ahead: each 256-byte step asks for the four lines D bytes on; 0 none
  H  where the prefetches go: t0 (L1), t1 (L2), nta (non-temporal)
Each version is checked first: its total must be the first version's (at the library's fill
every partial sum is exact, so the order of the adds cannot change it). Then rounds of all versions in A B ... B A order; the median
of each version's rounds, its min and max.

usage: stream_probe [--threads N] [--mib M] [--rounds R] [--slices 4,1,16]
                  [--prefetch 0,1024,4096,16384] [--hint t1,t0,nta]
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "cpu_kernels.h"
#include "cpu_memory.h"
#include "cpu_pool.h"
#include "gem/decode.h"

#define MAX_LIST 8

/* the hints by name: t0, t1, nta */
static const cpu_prefetch_hint hint_of[3] = {CPU_PF_L1, CPU_PF_L2, CPU_PF_NTA};
enum { HINT_T0, HINT_T1, HINT_NTA };

typedef struct job {
    const float *buf;
    int64_t n, items, ahead;
    int hint;
    float *sums; /* (items) */
} job;

static void item_fn(void *ctx, int64_t item, int64_t thread)
{
    (void)thread;
    job *j = ctx;
    const int64_t per = (j->n + j->items - 1) / j->items;
    const int64_t b = item * per < j->n ? item * per : j->n;
    const int64_t e = b + per < j->n ? b + per : j->n;
    j->sums[item] = cpu_stream_sum_ahead(j->buf + b, e - b, j->ahead, hint_of[j->hint]);
}

static int parse_list(const char *s, int64_t *out)
{
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t && n < MAX_LIST; t = strtok_r(NULL, ",", &save))
        out[n++] = atoll(t);
    free(copy);
    return n;
}

int main(int argc, char **argv)
{
    int64_t threads = 0, mib = 4096, rounds = 10;
    int64_t slices[MAX_LIST] = {4, 1, 16}, aheads[MAX_LIST] = {0, 1024, 4096, 16384};
    int hints[MAX_LIST] = {HINT_T1, HINT_T0, HINT_NTA};
    int nsl = 3, nah = 4, nhi = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--slices") && i + 1 < argc)
            nsl = parse_list(argv[++i], slices);
        else if (!strcmp(argv[i], "--prefetch") && i + 1 < argc)
            nah = parse_list(argv[++i], aheads);
        else if (!strcmp(argv[i], "--hint") && i + 1 < argc) {
            nhi = 0;
            char *copy = strdup(argv[++i]), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t && nhi < MAX_LIST;
                 t = strtok_r(NULL, ",", &save))
                hints[nhi++] = !strcmp(t, "t0") ? HINT_T0 : !strcmp(t, "nta") ? HINT_NTA : HINT_T1;
            free(copy);
        } else {
            fprintf(stderr, "usage: stream_probe [--threads N] [--mib M] [--rounds R] "
                            "[--slices 4,1,16] [--prefetch 0,1024,4096,16384] "
                            "[--hint t1,t0,nta]\n");
            return 2;
        }
    }
    if (threads < 0 || mib < 1 || rounds < 1 || nsl < 1 || nah < 1 || nhi < 1) {
        fprintf(stderr, "stream_probe: bad argument\n");
        return 2;
    }
    for (int a = 0; a < nsl; a++)
        if (slices[a] < 1 || slices[a] > 64) {
            fprintf(stderr, "stream_probe: 1 to 64 slices a thread\n");
            return 2;
        }
    for (int a = 0; a < nah; a++)
        if (aheads[a] < 0 || aheads[a] > (1 << 24) || aheads[a] % 256 != 0) {
            fprintf(stderr, "stream_probe: a prefetch distance is 0 to 16 MiB, in 256-byte steps\n");
            return 2;
        }
    /* the threads of a decode context (0: one per core) */
    gem_decode_ctx *ctx = NULL;
    if (gem_decode_ctx_create(GEM_BACKEND_CPU, threads, &ctx) != GEM_OK) {
        fprintf(stderr, "stream_probe: no CPU context\n");
        return 1;
    }
    threads = gem_decode_ctx_threads(ctx);
    printf("%s\n", gem_decode_ctx_describe(ctx));
    gem_decode_ctx_destroy(ctx);
    cpu_pool *pool = NULL;
    void *mem = NULL;
    const size_t n = (size_t)mib << 18; /* floats */
    if (cpu_pool_create(threads, &pool) != GEM_OK || cpu_stream_alloc(n * sizeof(float), 0, &mem) !=
                                                          GEM_OK) {
        fprintf(stderr, "stream_probe: no pool or no memory\n");
        return 1;
    }
    float *buf = mem;
    for (size_t i = 0; i < n; i++)
        buf[i] = (float)(i & 7) * 0.125f; /* the library's fill: exact sums */
    /* versions: 4 slices without prefetch first, then every triple with a prefetch */
    struct {
        int64_t slices, ahead;
        int hint;
    } v[1 + MAX_LIST * MAX_LIST * MAX_LIST];
    int nv = 0;
    v[nv].slices = 4;
    v[nv].ahead = 0;
    v[nv++].hint = HINT_T1;
    for (int a = 0; a < nsl; a++)
        for (int b = 0; b < nah; b++)
            for (int c = 0; c < nhi; c++) {
                if (aheads[b] == 0 && (slices[a] == 4 || c > 0))
                    continue; /* one no-prefetch version per split; 4's is the first */
                v[nv].slices = slices[a];
                v[nv].ahead = aheads[b];
                v[nv++].hint = hints[c];
            }
    float *sums = calloc((size_t)(threads * 64), sizeof *sums);
    double *t = calloc((size_t)(nv * rounds * 2), sizeof *t);
    /* checks: every version's total is the first's (values exact in float at this fill) */
    double want = -1.0;
    for (int s = 0; s < nv; s++) {
        job j = {buf, (int64_t)n, threads * v[s].slices, v[s].ahead, v[s].hint, sums};
        cpu_pool_run(pool, j.items, item_fn, &j);
        double tot = 0.0;
        for (int64_t k = 0; k < j.items; k++)
            tot += sums[k];
        if (s == 0)
            want = tot;
        else if (tot != want) {
            fprintf(stderr, "stream_probe: version %d sums to %.17g, the first to %.17g\n", s, tot,
                    want);
            return 1;
        }
    }
    printf("checks: %d versions sum the buffer to the same total\n", nv);
    int64_t *cnt = calloc((size_t)nv, sizeof *cnt);
    for (int64_t r = 0; r < rounds; r++)
        for (int pass = 0; pass < 2; pass++)
            for (int u = 0; u < nv; u++) {
                const int s = pass ? nv - 1 - u : u;
                job j = {buf, (int64_t)n, threads * v[s].slices, v[s].ahead, v[s].hint, sums};
                const double t0 = now_s();
                cpu_pool_run(pool, j.items, item_fn, &j);
                t[s * rounds * 2 + cnt[s]++] = now_s() - t0;
            }
    static const char *hint_name[3] = {"t0", "t1", "nta"};
    printf("%lld MiB, %lld threads, %lld rounds A B .. B A\n", (long long)mib, (long long)threads,
           (long long)rounds);
    printf("S:D:H                median GB/s   min GB/s   max GB/s  of 4:0\n");
    double lib = 0.0;
    for (int s = 0; s < nv; s++) {
        double *u = t + s * rounds * 2;
        qsort(u, (size_t)cnt[s], sizeof *u, cmp_d);
        const double med = 0.5 * (u[cnt[s] / 2 - 1] + u[cnt[s] / 2]);
        const double gbs = (double)(n * sizeof(float)) / med * 1e-9;
        if (s == 0)
            lib = gbs;
        char name[48];
        snprintf(name, sizeof name, "%lld:%lld:%s%s", (long long)v[s].slices,
                 (long long)v[s].ahead, v[s].ahead ? hint_name[v[s].hint] : "-",
                 s == 0 ? " (no prefetch)" : "");
        printf("%-22s %10.2f %10.2f %10.2f %9.1f%%\n", name, gbs,
               (double)(n * sizeof(float)) / u[cnt[s] - 1] * 1e-9,
               (double)(n * sizeof(float)) / u[0] * 1e-9, 100.0 * gbs / lib);
    }
    free(t);
    free(cnt);
    free(sums);
    free(mem);
    cpu_pool_destroy(pool);
    return 0;
}
