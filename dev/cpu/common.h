/* dev/cpu/common.h: what every dev/cpu program times with. */
#ifndef GEM_DEV_CPU_COMMON_H
#define GEM_DEV_CPU_COMMON_H

#include <stdint.h>
#include <time.h>

/* xorshift64 (shifts 13, 7, 17): advances *state (non-zero) and returns it. */
static inline uint64_t dev_xorshift(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* Seconds on the monotonic clock. */
static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* qsort order of doubles, ascending. a, b: one double each. */
static inline int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
