/*
 * The CPU kernels' entry points when src/cpu_kernels.c is built three times (GEM_CPU_DISPATCH:
 * for AVX-512, for AVX2 with FMA and F16C, and portable; cpu_kernels_variant.h names them):
 * each function of cpu_kernels.h calls the build chosen once per process, the widest that
 * the processor and the operating system support. All three give the same bits (the rules of
 * cpu_kernels.h), so the choice changes speed alone; cpu_kernels_use lets the tests hold every
 * build to the rules in one process.
 */
#include <pthread.h>
#include <string.h>

#include "cpu_kernels.h"

#if !defined(__x86_64__) && !defined(_M_X64)
#error "cpu_dispatch.c: the dispatched CPU kernels are for x86-64 (GEM_CPU_DISPATCH=OFF elsewhere)"
#endif
#include <cpuid.h>

/* The functions of cpu_kernels.h with a value (XR) and without one (XV): return type, name,
 * parameters, arguments. Keep the list that of cpu_kernels_variant.h. */
#define CPU_KERNELS_RETURNING(XR)                                                                 \
    XR(const char *, cpu_kernels_isa, (void), ())                                                 \
    XR(float, cpu_dot_portable, (const float *q, const float *k, int64_t n), (q, k, n))           \
    XR(float, cpu_sum, (const float *x, int64_t n), (x, n))                                       \
    XR(float, cpu_max, (const float *x, int64_t n), (x, n))                                       \
    XR(int, cpu_online_tile,                                                                      \
       (float *sc, int64_t nt, int64_t nh, float scale, float *m, float *s, float *alpha),        \
       (sc, nt, nh, scale, m, s, alpha))                                                          \
    XR(float, cpu_stream_sum_ahead,                                                               \
       (const float *x, int64_t n, int64_t ahead, cpu_prefetch_hint hint), (x, n, ahead, hint))   \
    XR(float, cpu_stream_sum, (const float *x, int64_t n), (x, n))                                \
    XR(gem_status, cpu_score_status,                                                              \
       (const float *q, int64_t nh, const void *k, gem_dtype kt, int64_t ks, int64_t nt,          \
        int64_t n),                                                                               \
       (q, nh, k, kt, ks, nt, n))
#define CPU_KERNELS_VOID(XV)                                                                      \
    XV(cpu_widen, (const void *src, gem_dtype t, int64_t n, float *dst), (src, t, n, dst))        \
    XV(cpu_dot_tile,                                                                              \
       (const float *q, int64_t nh, const void *k, gem_dtype kt, int64_t ks, int64_t nt,          \
        int64_t n, float *out, int64_t out_stride),                                               \
       (q, nh, k, kt, ks, nt, n, out, out_stride))                                                \
    XV(cpu_dot_tile_tm,                                                                           \
       (const float *q, int64_t nh, const void *k, gem_dtype kt, int64_t ks, int64_t nt,          \
        int64_t n, float *out, int64_t out_stride, const void *pf, int64_t pf_nt),                \
       (q, nh, k, kt, ks, nt, n, out, out_stride, pf, pf_nt))                                     \
    XV(cpu_exp, (const float *x, float *y, int64_t n), (x, y, n))                                 \
    XV(cpu_rescale_accumulate,                                                                    \
       (float *o, int64_t n, float alpha, const float *p, const float *v, int64_t nt,             \
        int64_t v_stride),                                                                        \
       (o, n, alpha, p, v, nt, v_stride))                                                         \
    XV(cpu_value_tile,                                                                            \
       (float *o, int64_t nh, int64_t n, int64_t tile, const float *alpha, const float *p,        \
        const void *v, gem_dtype vt, int64_t nt, int64_t v_stride, const void *pf,               \
        int64_t pf_nt),                                                                           \
       (o, nh, n, tile, alpha, p, v, vt, nt, v_stride, pf, pf_nt))                                \
    XV(cpu_weighted_rows,                                                                         \
       (const float *p, int64_t p_stride, int64_t nh, const void *v, gem_dtype vt,                \
        int64_t v_stride, int64_t nt, int64_t w, float *acc),                                     \
       (p, p_stride, nh, v, vt, v_stride, nt, w, acc))

/* each build's functions, declared */
#define DECLARE_R(ret, name, params, args)                                                        \
    ret name##_avx512 params;                                                                     \
    ret name##_avx2 params;                                                                       \
    ret name##_portable params;
#define DECLARE_V(name, params, args) DECLARE_R(void, name, params, args)
CPU_KERNELS_RETURNING(DECLARE_R)
CPU_KERNELS_VOID(DECLARE_V)

/* one build's entry points */
typedef struct cpu_kernel_table {
#define FIELD_R(ret, name, params, args) ret(*name) params;
#define FIELD_V(name, params, args) FIELD_R(void, name, params, args)
    CPU_KERNELS_RETURNING(FIELD_R)
    CPU_KERNELS_VOID(FIELD_V)
} cpu_kernel_table;

#define ENTRY_R(ret, name, params, args) name##_avx512,
#define ENTRY_V(name, params, args) ENTRY_R(void, name, params, args)
static const cpu_kernel_table table_avx512 = {CPU_KERNELS_RETURNING(ENTRY_R)
                                                  CPU_KERNELS_VOID(ENTRY_V)};
#undef ENTRY_R
#define ENTRY_R(ret, name, params, args) name##_avx2,
static const cpu_kernel_table table_avx2 = {CPU_KERNELS_RETURNING(ENTRY_R)
                                                CPU_KERNELS_VOID(ENTRY_V)};
#undef ENTRY_R
#define ENTRY_R(ret, name, params, args) name##_portable,
static const cpu_kernel_table table_portable = {CPU_KERNELS_RETURNING(ENTRY_R)
                                                    CPU_KERNELS_VOID(ENTRY_V)};
#undef ENTRY_R

/* XCR0, the register state the operating system saves (xgetbv 0). */
static unsigned long long xcr0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

int cpu_isa_level(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    const int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1,
              f16c = (c >> 29) & 1;
    if (!(fma && osxsave && avx && f16c) || (xcr0() & 0x6) != 0x6)
        return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((b >> 5) & 1)) /* AVX2 */
        return 0;
    const int avx512 = ((b >> 16) & 1) && ((b >> 17) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1);
    if (!avx512 || (xcr0() & 0xE0) != 0xE0)
        return 1;
    return (c >> 11) & 1 ? 3 : 2; /* AVX512_VNNI */
}

static const cpu_kernel_table *const tables[3] = {&table_portable, &table_avx2, &table_avx512};

static int level;                     /* cpu_level(), read once */
static const cpu_kernel_table *chosen; /* the build that runs */
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    const int l = cpu_isa_level();
    level = l < 2 ? l : 2; /* VNNI adds nothing to these kernels */
    chosen = tables[level];
}

static const cpu_kernel_table *kernels(void)
{
    pthread_once(&chosen_once, choose);
    return chosen;
}

int cpu_kernels_builds(const char **names, int max)
{
    kernels(); /* level read */
    for (int i = 0; i <= level && i < max; i++)
        names[i] = tables[level - i]->cpu_kernels_isa();
    return level + 1;
}

int cpu_kernels_use(const char *name)
{
    kernels(); /* level read */
    for (int i = 0; i <= level; i++)
        if (strcmp(name, tables[i]->cpu_kernels_isa()) == 0) {
            chosen = tables[i];
            return 0;
        }
    return -1;
}

#define FORWARD_R(ret, name, params, args)                                                        \
    ret name params { return kernels()->name args; }
#define FORWARD_V(name, params, args)                                                             \
    void name params { kernels()->name args; }
CPU_KERNELS_RETURNING(FORWARD_R)
CPU_KERNELS_VOID(FORWARD_V)
