/*
 * The products' arithmetic when src/model/matvec_kernels.c is built four times
 * (GEM_CPU_DISPATCH: for AVX-512 with VNNI, AVX-512, AVX2 with FMA and F16C, and portable;
 * matvec_kernels.h names them): each function of matvec_kernels.h calls the build chosen once
 * per process, the widest that the processor and the operating system run (cpu_isa_level).
 * All four give the same bits (matvec.h's rules), so the choice changes speed alone; mvk_use
 * lets the tests hold every build to the rules in one process.
 */
#include <pthread.h>
#include <string.h>

#include "cpu_kernels.h"
#include "matvec_kernels.h"

/* The functions of matvec_kernels.h that each build defines, with a value (XR) and without
 * one (XV): return type, name, parameters, arguments. Keep the list that of the renames in
 * matvec_kernels.h. */
#define MVK_RETURNING(XR) XR(const char *, mvk_isa, (void), ())
#define MVK_VOID(XV)                                                                              \
    XV(mvk_init, (void), ())                                                                      \
    XV(mvk_quantize, (const float *x, int64_t cols, xq_block *out), (x, cols, out))              \
    XV(mvk_spans,                                                                                 \
       (const gem_matrix *w, const xq_block *xb, float *y, int64_t s0, int64_t s1,               \
        int64_t ahead_bytes, int into),                                                           \
       (w, xb, y, s0, s1, ahead_bytes, into))                                                     \
    XV(mvk_span_rows, (const gem_matrix *w, const xq_block *xb, int64_t s, float *out),          \
       (w, xb, s, out))                                                                           \
    XV(mvk_rows,                                                                                  \
       (const gem_matrix *w, const float *x, float *y, int64_t r0, int64_t r1, int64_t ahead,    \
        int into),                                                                                \
       (w, x, y, r0, r1, ahead, into))                                                            \
    XV(mvk_row_f32, (const gem_matrix *w, int64_t r, float *dst), (w, r, dst))

/* each build's functions, declared */
#define DECLARE_R(ret, name, params, args)                                                        \
    ret name##_avx512vnni params;                                                                 \
    ret name##_avx512 params;                                                                     \
    ret name##_avx2 params;                                                                       \
    ret name##_portable params;
#define DECLARE_V(name, params, args) DECLARE_R(void, name, params, args)
MVK_RETURNING(DECLARE_R)
MVK_VOID(DECLARE_V)

/* one build's entry points */
typedef struct mvk_table {
#define FIELD_R(ret, name, params, args) ret(*name) params;
#define FIELD_V(name, params, args) FIELD_R(void, name, params, args)
    MVK_RETURNING(FIELD_R)
    MVK_VOID(FIELD_V)
} mvk_table;

#define ENTRY_V(name, params, args) ENTRY_R(void, name, params, args)
#define ENTRY_R(ret, name, params, args) name##_avx512vnni,
static const mvk_table table_avx512vnni = {MVK_RETURNING(ENTRY_R) MVK_VOID(ENTRY_V)};
#undef ENTRY_R
#define ENTRY_R(ret, name, params, args) name##_avx512,
static const mvk_table table_avx512 = {MVK_RETURNING(ENTRY_R) MVK_VOID(ENTRY_V)};
#undef ENTRY_R
#define ENTRY_R(ret, name, params, args) name##_avx2,
static const mvk_table table_avx2 = {MVK_RETURNING(ENTRY_R) MVK_VOID(ENTRY_V)};
#undef ENTRY_R
#define ENTRY_R(ret, name, params, args) name##_portable,
static const mvk_table table_portable = {MVK_RETURNING(ENTRY_R) MVK_VOID(ENTRY_V)};
#undef ENTRY_R

/* by cpu_isa_level */
static const mvk_table *const tables[4] = {&table_portable, &table_avx2, &table_avx512,
                                           &table_avx512vnni};

static int level;               /* cpu_isa_level(), read once */
static const mvk_table *chosen; /* the build that runs */
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    level = cpu_isa_level();
    chosen = tables[level];
}

static const mvk_table *products(void)
{
    pthread_once(&chosen_once, choose);
    return chosen;
}

int mvk_builds(const char **names, int max)
{
    products(); /* level read */
    for (int i = 0; i <= level && i < max; i++)
        names[i] = tables[level - i]->mvk_isa();
    return level + 1;
}

int mvk_use(const char *name)
{
    products(); /* level read */
    for (int i = 0; i <= level; i++)
        if (strcmp(name, tables[i]->mvk_isa()) == 0) {
            chosen = tables[i];
            return 0;
        }
    return -1;
}

#define FORWARD_R(ret, name, params, args)                                                        \
    ret name params { return products()->name args; }
#define FORWARD_V(name, params, args)                                                             \
    void name params { products()->name args; }
MVK_RETURNING(FORWARD_R)
MVK_VOID(FORWARD_V)
