/* dev/cpu/common.h: what every dev/cpu program times with. */
#ifndef GEM_DEV_CPU_COMMON_H
#define GEM_DEV_CPU_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
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

/* Random valid packed Q8_0 blocks (matvec.h's layout, 544 bytes a block of 16 rows) over
 * [p, p + bytes), bytes a multiple of 544: each block's 16 F16 scales in [2^-10, 2^-6), then its
 * 512 quant bytes in [1, 255] (q + 128, q in [-127, 127]), drawn from *state in that order. */
static inline void dev_fill_packed_q8_0(uint8_t *p, size_t bytes, uint64_t *state)
{
    for (size_t b = 0; b < bytes / 544; b++, p += 544) {
        for (int r = 0; r < 16; r++) {
            const uint16_t h = (uint16_t)(0x1400u + (dev_xorshift(state) & 0x0FFFu));
            memcpy(p + 2 * r, &h, 2);
        }
        for (int i = 32; i < 544; i += 8) {
            uint64_t v = dev_xorshift(state);
            for (int k = 0; k < 8; k++, v >>= 8)
                p[i + k] = (uint8_t)(1 + v % 255);
        }
    }
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
