/*
dev/cpu/prefetch_burst: does a burst of prefetch instructions bring a region into this core's
caches for a later read? One thread: a 64 MiB buffer read (the caches emptied), then 512 KiB
asked for in one burst (mode none, prefetcht1, prefetcht0, or a load of one byte a line), a
wait of --wait-us, then the region read a line at a time, timed; 200 rounds, a new region of
a 32 MiB pool each round. The preload of dev/cpu/token_ahead (mv_ahead_step) is such a burst.

AMD EPYC VM (Zen 4; results/cpu/work-ahead/prefetch_burst-vm.txt), --wait-us 200: the read
took 26.2 us after nothing (20.0 GB/s), 18.5 after prefetcht1, 13.3 after prefetcht0 and 6.9
after the loads (75.5 GB/s); an earlier one-mode-a-process version had the prefetch bursts
no faster than nothing (24.8 / 24.3 against 21.9 us). A burst of prefetches brings part of the
region at best, so mv_ahead_step loads.

Usage: prefetch_burst [--wait-us W]
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    double wait_us = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--wait-us") && i + 1 < argc && atof(argv[i + 1]) >= 0)
            wait_us = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: prefetch_burst [--wait-us W]\n");
            return 2;
        }
    }
    const size_t N = (size_t)512 << 10, E = (size_t)64 << 20, POOL = 64;
    unsigned char *a = aligned_alloc(64, N * POOL), *ev = aligned_alloc(64, E);
    if (!a || !ev) {
        fprintf(stderr, "prefetch_burst: out of memory\n");
        return 1;
    }
    memset(a, 1, N * POOL);
    memset(ev, 2, E);
    static const char *names[4] = {"none", "prefetcht1", "prefetcht0", "loads"};
    enum { ROUNDS = 200 };
    double burst[4] = {0}, readt[4] = {0};
    uint64_t sink = 0;
    for (int r = 0; r < ROUNDS; r++)
        for (int m = 0; m < 4; m++) {
            const unsigned char *p = a + (size_t)((r * 4 + m) % (int)POOL) * N;
            uint64_t s = 0;
            for (size_t i = 0; i < E; i += 64)
                s += ev[i];
            double t0 = now();
            if (m == 1)
                for (size_t o = 0; o < N; o += 64)
                    __builtin_prefetch(p + o, 0, 2);
            else if (m == 2)
                for (size_t o = 0; o < N; o += 64)
                    __builtin_prefetch(p + o, 0, 3);
            else if (m == 3)
                for (size_t o = 0; o < N; o += 64)
                    s += p[o];
            burst[m] += now() - t0;
            for (const double tw = now(); now() - tw < wait_us * 1e-6;)
                ;
            t0 = now();
            for (size_t o = 0; o < N; o += 64)
                s += p[o];
            readt[m] += now() - t0;
            sink += s;
        }
    printf("prefetch_burst: 512 KiB, a wait of %.0f us, %d rounds (check %llu)\n", wait_us,
           ROUNDS, (unsigned long long)(sink & 1));
    for (int m = 0; m < 4; m++)
        printf("  %-10s burst %6.1f us, then the read %6.1f us (%5.1f GB/s)\n", names[m],
               burst[m] / ROUNDS * 1e6, readt[m] / ROUNDS * 1e6,
               (double)N / (readt[m] / ROUNDS) / 1e9);
    free(a);
    free(ev);
    return 0;
}
