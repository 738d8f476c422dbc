/*
 * The decode API's test matrix (ggml test-backend-ops style): one table of
 * cases (route, config, heads, dims, live, capacity, layout, scale, K = V
 * aliasing, K and V element types), each run on every backend this machine has
 * (the CPU at 1 and 3 threads; CUDA when a GPU is present) through gem_decode
 * exactly as a caller would, and checked against the double reference on the
 * same view (for 16-bit K or V: the same rounded values):
 *   - NMSE <= 1e-10 against the double reference, no NaN or infinity;
 *   - every output element written (the output is poisoned first) and the guard
 *     bytes after it intact; the workspace is poisoned before each call;
 *   - bitwise repeats (a second call, and on the CPU the other thread count);
 *   - on the CPU, and on CUDA for the baseline route, a 16-bit cache gives bit
 *     for bit the output of the same call on its exact F32 widening (the kernels
 *     convert exactly, then run the F32 rule), which catches a conversion error
 *     far below the NMSE gate;
 *   - every byte of the cache outside rows [0, live) and between rows is NaN
 *     (F32 0x7FC00000, BF16 0x7FC0, F16 0x7E00), so a kernel that reads past
 *     live or into row padding fails the NMSE check;
 *   - what a backend runs is what gem_decode_supports and the config check say:
 *     a case it supports must pass all of the above, any other must answer
 *     exactly that status (GEM_ERR_PARAM for a config, else GEM_ERR_UNSUPPORTED)
 *     and write nothing (the poisoned output is read back whole). The CPU must
 *     support every case; CUDA at least the production shape with F32 K and V
 *     and Gemma 4's sliding-window shape (32 query heads over 16 KV heads, D256)
 *     with K and V both F32, both BF16 and both F16.
 * The sliding-window shape runs every element type at live 1, 13, 63, 64, 65,
 * 1,000, 1,023, 1,024 and 4,097 (and 8,193; 65,536 and 131,072 with --long),
 * capacity > live, scales 1.0 and 1/16, head-major and token-major layouts
 * (padded too), explicit partition counts (P > live among them), K = V in one
 * buffer; its neighbours that the CUDA kernels do not cover (four query heads per
 * KV head at D256, D128, dk != dv, K and V of two types, the baseline route) run
 * on the CPU and must be refused by CUDA.
 * Cases with K rebuilt from V (gem_k_from_v) hold V alone and check against the
 * reference's K built in double from the same V; Gemma 4's rotation (half 256, 64
 * rotated pairs, base 1e6) at row-0 positions 0 and 1,000,000 (large angles), and a
 * general rotation on CPU-only shapes.
 * Then a 200-step append-then-attend loop through the KV cache helper (and a
 * ring of 64 rows), for an F32 cache and 16-bit caches, on every backend, each
 * step against the reference, and the cache's bytes against rows rounded here
 * independently of the library (24 and 80 steps with --small); the ring also at
 * the sliding-window shape.
 *
 * No environment variable changes what runs. Options:
 *   --small   short lengths only (the sanitizer build's ctest; compute-sanitizer memcheck
 *             and racecheck)
 *   --long    also 65,536 and 131,072 tokens (minutes on the CPU reference)
 *   --shard I/N  only the table's cases i with i % N == I (0 <= I < N <= 16), and the
 *             CUDA pieces and the cache loops in shard 0 alone: N processes together run
 *             exactly what one runs, so ctest runs the matrix as two tests side by side
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gem/check.h"
#include "gem/decode.h"
#include "harness.h"
#include "tcheck.h"
#include "tdtype.h"

#define MAX_NMSE 1e-10

typedef enum layout {
    HEAD_MAJOR,        /* (heads, capacity, d), dense */
    HEAD_MAJOR_PADDED, /* (heads, capacity, d + 64 bytes) rows, 32 spare rows between heads */
    TOKEN_MAJOR,       /* (capacity, heads, d), as a projection writes rows */
    TOKEN_MAJOR_PADDED /* (capacity, heads * (d + 32 bytes) + 16 bytes): padding after heads
                          and tokens */
} layout;

static const char *layout_name[] = {"head-major", "head-major-padded", "token-major",
                                    "token-major-padded"};

typedef struct dcase {
    gem_route route; /* GEM_ROUTE_COUNT = the default config (cfg NULL) */
    int64_t partitions, tile;
    int64_t nq, nkv, dk, dv, live, capacity;
    layout lay;
    float scale;     /* 0 = 1/sqrt(dk) */
    int alias;       /* K and V the same buffer (dk == dv, kt == vt) */
    int size;        /* 0 small, 1 normal, 2 long */
    gem_dtype kt, vt;
    int kfv;         /* K rebuilt from V: 0 no; KFV_GEMMA / KFV_GEMMA_FAR: Gemma 4's
                        rotation with row 0 at position 0 / 1,000,000; KFV_ODD: half dk/2 - 1,
                        n_pairs half - 2, positions from 17 (kt must equal vt) */
} dcase;

#define KFV_GEMMA 1
#define KFV_GEMMA_FAR 2
#define KFV_ODD 3

#define DEF GEM_ROUTE_COUNT
#define F GEM_ROUTE_FUSED
#define B GEM_ROUTE_BASELINE

/* The production full-attention shape: 32 query heads, 4 KV heads, D512. */
#define PROD 32, 4, 512, 512
/* Gemma 4's sliding-window shape: 32 query heads, 16 KV heads, D256. */
#define SWA_NQ 32
#define SWA_NKV 16
#define SWA SWA_NQ, SWA_NKV, 256, 256
/* Gemma's QK-normed scale (0 in a case = 1/sqrt(dk)). */
#define QKN 1.0f

/* K and V element types (and no K-from-V rotation) */
#define KV_F32 GEM_DTYPE_F32, GEM_DTYPE_F32, 0
#define KV_BF16 GEM_DTYPE_BF16, GEM_DTYPE_BF16, 0
#define KV_F16 GEM_DTYPE_F16, GEM_DTYPE_F16, 0
#define K_BF16_V_F16 GEM_DTYPE_BF16, GEM_DTYPE_F16, 0
#define K_F16_V_BF16 GEM_DTYPE_F16, GEM_DTYPE_BF16, 0
#define K_F32_V_BF16 GEM_DTYPE_F32, GEM_DTYPE_BF16, 0
#define K_BF16_V_F32 GEM_DTYPE_BF16, GEM_DTYPE_F32, 0
#define K_F16_V_F32 GEM_DTYPE_F16, GEM_DTYPE_F32, 0
#define KV_FP8 GEM_DTYPE_FP8_E4M3, GEM_DTYPE_FP8_E4M3, 0
#define K_FP8_V_BF16 GEM_DTYPE_FP8_E4M3, GEM_DTYPE_BF16, 0
#define K_F32_V_FP8 GEM_DTYPE_F32, GEM_DTYPE_FP8_E4M3, 0

/* The design's lengths for one pair of element types: 1 and 13 (small), 4097
 * and 8191-8193 (normal), 65,536 and 131,072 (long); capacity > live; both
 * scales; fused (the default config) and baseline; all four layouts. */
#define DTYPE_LENGTHS(kv)                                                         \
    {DEF, 0, 0, PROD, 1, 4, HEAD_MAJOR, 0, 0, 0, kv},                             \
    {B, 0, 0, PROD, 13, 20, TOKEN_MAJOR, QKN, 0, 0, kv},                          \
    {DEF, 0, 0, PROD, 13, 17, HEAD_MAJOR_PADDED, QKN, 0, 0, kv},                  \
    {DEF, 0, 0, PROD, 4097, 4100, TOKEN_MAJOR_PADDED, 0, 0, 1, kv},               \
    {DEF, 0, 0, PROD, 8191, 8200, HEAD_MAJOR, QKN, 0, 1, kv},                     \
    {B, 0, 0, PROD, 8192, 8195, TOKEN_MAJOR, 0, 0, 1, kv},                        \
    {DEF, 0, 0, PROD, 8193, 8200, HEAD_MAJOR_PADDED, QKN, 0, 1, kv},              \
    {DEF, 0, 0, PROD, 65536, 65540, HEAD_MAJOR, 0, 0, 2, kv},                     \
    {DEF, 0, 0, PROD, 131072, 131080, TOKEN_MAJOR, QKN, 0, 2, kv}

/* K rebuilt from V for one element type: the design's lengths, both scales, layouts. */
#define KFV_LENGTHS(t)                                                                      \
    {DEF, 0, 0, PROD, 1, 4, HEAD_MAJOR, 0, 0, 0, t, t, KFV_GEMMA},                            \
    {DEF, 0, 0, PROD, 13, 17, TOKEN_MAJOR, QKN, 0, 0, t, t, KFV_GEMMA_FAR},                   \
    {DEF, 0, 0, PROD, 4097, 4100, TOKEN_MAJOR_PADDED, 0, 0, 1, t, t, KFV_GEMMA},              \
    {DEF, 0, 0, PROD, 8191, 8200, HEAD_MAJOR, QKN, 0, 1, t, t, KFV_GEMMA},                    \
    {F, 64, 0, PROD, 8192, 8195, TOKEN_MAJOR, QKN, 0, 1, t, t, KFV_GEMMA_FAR},                \
    {DEF, 0, 0, PROD, 8193, 8200, HEAD_MAJOR_PADDED, QKN, 0, 1, t, t, KFV_GEMMA},             \
    {DEF, 0, 0, PROD, 65536, 65540, HEAD_MAJOR, 0, 0, 2, t, t, KFV_GEMMA},                    \
    {DEF, 0, 0, PROD, 131072, 131080, TOKEN_MAJOR, QKN, 0, 2, t, t, KFV_GEMMA}

/* The sliding-window shape for one pair of element types: the lengths around a block step
 * (8 rows), a partition (live / P) and the window (1,024), capacity > live (a ring with spare
 * rows; one full ring), both scales (0: 1/sqrt(256) = 1/16), all four layouts, the default
 * config and explicit partition counts; 4,097 and 8,193 (normal), 65,536 and 131,072 (long). */
#define SWA_LENGTHS(kv)                                                           \
    {DEF, 0, 0, SWA, 1, 4, HEAD_MAJOR, 0, 0, 0, kv},                              \
    {DEF, 0, 0, SWA, 1, 1024, TOKEN_MAJOR, QKN, 0, 0, kv},                        \
    {DEF, 0, 0, SWA, 13, 20, TOKEN_MAJOR, QKN, 0, 0, kv},                         \
    {DEF, 0, 0, SWA, 63, 64, HEAD_MAJOR_PADDED, 0, 0, 0, kv},                     \
    {DEF, 0, 0, SWA, 64, 1024, TOKEN_MAJOR, QKN, 0, 0, kv},                       \
    {DEF, 0, 0, SWA, 65, 70, TOKEN_MAJOR_PADDED, 0, 0, 0, kv},                    \
    {F, 1, 0, SWA, 65, 66, HEAD_MAJOR, QKN, 0, 0, kv},                            \
    {F, 7, 0, SWA, 64, 1024, TOKEN_MAJOR, 0, 0, 0, kv},                           \
    {F, 300, 0, SWA, 13, 16, TOKEN_MAJOR_PADDED, QKN, 0, 0, kv},                  \
    {DEF, 0, 0, SWA, 1000, 1024, TOKEN_MAJOR, QKN, 0, 1, kv},                     \
    {DEF, 0, 0, SWA, 1023, 1024, HEAD_MAJOR, 0, 0, 1, kv},                        \
    {DEF, 0, 0, SWA, 1024, 1030, TOKEN_MAJOR, QKN, 0, 1, kv},                     \
    {DEF, 0, 0, SWA, 1024, 1025, HEAD_MAJOR_PADDED, 0, 0, 1, kv},                 \
    {F, 13, 8, SWA, 1000, 1024, TOKEN_MAJOR_PADDED, 0, 0, 1, kv},                 \
    {DEF, 0, 0, SWA, 4097, 4100, TOKEN_MAJOR, QKN, 0, 1, kv},                     \
    {F, 64, 0, SWA, 4097, 4200, HEAD_MAJOR, 0, 0, 1, kv},                         \
    {DEF, 0, 0, SWA, 8193, 8200, TOKEN_MAJOR_PADDED, QKN, 0, 1, kv},              \
    {DEF, 0, 0, SWA, 65536, 65540, TOKEN_MAJOR, QKN, 0, 2, kv},                   \
    {DEF, 0, 0, SWA, 131072, 131080, HEAD_MAJOR, 0, 0, 2, kv}

static const dcase cases[] = {
    /* production shape, F32: every route and config the backends compile */
    {DEF, 0, 0, PROD, 1, 1, HEAD_MAJOR, 0, 0, 0, KV_F32},
    {DEF, 0, 0, PROD, 13, 20, HEAD_MAJOR, 0, 0, 0, KV_F32},
    {B, 0, 0, PROD, 13, 20, HEAD_MAJOR, 0, 0, 0, KV_F32},
    {F, 1, 0, PROD, 13, 13, TOKEN_MAJOR, 0, 0, 0, KV_F32},
    {F, 7, 0, PROD, 300, 301, HEAD_MAJOR_PADDED, 0, 0, 0, KV_F32},
    {F, 32, 0, PROD, 5, 9, TOKEN_MAJOR_PADDED, 0, 0, 0, KV_F32},  /* P > live: empty partitions */
    {B, 3, 0, PROD, 300, 310, TOKEN_MAJOR_PADDED, QKN, 0, 0, KV_F32},
    {DEF, 0, 0, PROD, 300, 300, TOKEN_MAJOR, 0, 1, 0, KV_F32},     /* K = V, one buffer */
    {B, 0, 0, PROD, 300, 300, HEAD_MAJOR, 0, 1, 0, KV_F32},
    {DEF, 0, 0, PROD, 4097, 5000, HEAD_MAJOR_PADDED, 0, 0, 1, KV_F32},
    {B, 16, 0, PROD, 4097, 5000, HEAD_MAJOR_PADDED, 0, 0, 1, KV_F32},
    {DEF, 0, 0, PROD, 8191, 8200, TOKEN_MAJOR, 0, 0, 1, KV_F32},
    {DEF, 0, 0, PROD, 8192, 8192, HEAD_MAJOR, QKN, 0, 1, KV_F32},
    {DEF, 0, 0, PROD, 8193, 9000, TOKEN_MAJOR_PADDED, 0, 0, 1, KV_F32},
    {B, 0, 0, PROD, 8193, 9000, TOKEN_MAJOR_PADDED, 0, 0, 1, KV_F32},
    {F, 300, 0, PROD, 8192, 8192, HEAD_MAJOR, 0, 1, 1, KV_F32},
    {DEF, 0, 0, PROD, 65536, 65536, HEAD_MAJOR, 0, 0, 2, KV_F32},
    {B, 0, 0, PROD, 65536, 65536, HEAD_MAJOR, 0, 0, 2, KV_F32},
    {DEF, 0, 0, PROD, 131072, 131072, HEAD_MAJOR, 0, 0, 2, KV_F32},
    {DEF, 0, 0, PROD, 131072, 131075, TOKEN_MAJOR_PADDED, QKN, 0, 2, KV_F32},
    /* production shape, 16-bit and mixed caches at the design's lengths */
    DTYPE_LENGTHS(KV_BF16),
    DTYPE_LENGTHS(KV_F16),
    DTYPE_LENGTHS(K_BF16_V_F16),
    DTYPE_LENGTHS(K_F16_V_BF16),
    {DEF, 0, 0, PROD, 300, 300, TOKEN_MAJOR, 0, 1, 0, KV_BF16},    /* K = V, one buffer */
    {B, 0, 0, PROD, 300, 300, HEAD_MAJOR, QKN, 1, 0, KV_F16},
    {F, 32, 0, PROD, 5, 9, TOKEN_MAJOR_PADDED, 0, 0, 0, K_F32_V_BF16}, /* P > live */
    {F, 7, 0, PROD, 300, 301, HEAD_MAJOR_PADDED, QKN, 0, 0, K_BF16_V_F32},
    {B, 3, 0, PROD, 300, 310, TOKEN_MAJOR_PADDED, 0, 0, 0, K_F16_V_F32},
    {F, 300, 0, PROD, 8192, 8193, HEAD_MAJOR, 0, 0, 1, K_F32_V_BF16},
    /* FP8 E4M3 with a scale per KV head (fp8_scales): the CPU runs all of it, CUDA the fused
     * route at the production shape with K and V both FP8 and K stored */
    DTYPE_LENGTHS(KV_FP8),
    {DEF, 0, 0, PROD, 300, 300, TOKEN_MAJOR, 0, 1, 0, KV_FP8},     /* K = V, one buffer */
    {F, 7, 0, PROD, 300, 301, HEAD_MAJOR_PADDED, QKN, 0, 0, K_FP8_V_BF16},
    {B, 3, 0, PROD, 300, 310, TOKEN_MAJOR_PADDED, 0, 0, 0, K_F32_V_FP8},
    {DEF, 0, 0, SWA, 1000, 1024, TOKEN_MAJOR, QKN, 0, 1, KV_FP8},
    {F, 5, 3, 6, 3, 40, 24, 77, 100, HEAD_MAJOR_PADDED, 0, 0, 0, KV_FP8}, /* odd dims */
    {B, 5, 0, 6, 3, 40, 24, 77, 100, TOKEN_MAJOR, 0, 0, 0, K_FP8_V_BF16},
    {DEF, 0, 0, PROD, 4097, 4100, TOKEN_MAJOR_PADDED, 0, 0, 1, GEM_DTYPE_FP8_E4M3,
     GEM_DTYPE_FP8_E4M3, KFV_GEMMA},
    {F, 7, 0, PROD, 300, 301, HEAD_MAJOR_PADDED, QKN, 0, 0, GEM_DTYPE_FP8_E4M3,
     GEM_DTYPE_FP8_E4M3, KFV_GEMMA_FAR},
    /* Gemma 4's sliding-window shape (D256, two query heads per KV head) */
    SWA_LENGTHS(KV_F32),
    SWA_LENGTHS(KV_BF16),
    SWA_LENGTHS(KV_F16),
    {DEF, 0, 0, SWA, 300, 300, TOKEN_MAJOR, QKN, 1, 0, KV_F32},  /* K = V, one buffer */
    {F, 16, 0, SWA, 1000, 1024, HEAD_MAJOR, QKN, 1, 1, KV_BF16},
    {DEF, 0, 0, 2, 1, 256, 256, 777, 800, TOKEN_MAJOR, QKN, 0, 1, KV_F16}, /* one KV head */
    {DEF, 0, 0, 64, 32, 256, 256, 1024, 1024, TOKEN_MAJOR, QKN, 0, 1, KV_F32}, /* 32 KV heads */
    /* its neighbours the CUDA kernels do not cover: the CPU runs them, CUDA refuses them */
    {DEF, 0, 0, 32, 8, 256, 256, 1000, 1024, TOKEN_MAJOR, QKN, 0, 0, KV_F32},   /* group 4 */
    {DEF, 0, 0, 32, 16, 128, 128, 1000, 1024, TOKEN_MAJOR, QKN, 0, 0, KV_F32},  /* D128 */
    {DEF, 0, 0, 32, 16, 256, 128, 300, 310, HEAD_MAJOR, QKN, 0, 0, KV_BF16},    /* dk != dv */
    {DEF, 0, 0, SWA, 1000, 1024, TOKEN_MAJOR, QKN, 0, 0, K_BF16_V_F16},         /* K, V types */
    {DEF, 0, 0, SWA, 64, 70, HEAD_MAJOR, 0, 0, 0, K_F32_V_BF16},
    {B, 0, 0, SWA, 1000, 1024, TOKEN_MAJOR, QKN, 0, 0, KV_F32},                 /* baseline */
    /* CPU-only shapes: the CUDA kernels cover D512 / group 8 and D256 / group 2 */
    {F, 5, 3, 6, 3, 40, 24, 77, 100, HEAD_MAJOR_PADDED, 0, 0, 0, KV_F32},
    {B, 5, 0, 6, 3, 40, 24, 77, 100, TOKEN_MAJOR, 0, 0, 0, KV_F32},
    {F, 2, 1, 1, 1, 17, 17, 33, 40, HEAD_MAJOR, 0, 1, 0, KV_F32},
    {F, 8, 16, 8, 2, 64, 64, 1000, 1000, TOKEN_MAJOR_PADDED, 0.5f, 0, 0, KV_F32},
    {F, 5, 3, 6, 3, 40, 24, 77, 100, HEAD_MAJOR_PADDED, 0, 0, 0, K_BF16_V_F16}, /* odd dims */
    {B, 5, 0, 6, 3, 40, 24, 77, 100, TOKEN_MAJOR, 0, 0, 0, K_F16_V_BF16},
    {F, 2, 1, 1, 1, 17, 17, 33, 40, HEAD_MAJOR, 0, 1, 0, KV_F16},
    {B, 4, 0, 8, 2, 64, 64, 1000, 1003, HEAD_MAJOR, QKN, 0, 0, KV_F16},
    {F, 8, 16, 8, 2, 64, 64, 1000, 1000, TOKEN_MAJOR_PADDED, 0.5f, 0, 0, K_BF16_V_F16},
    /* K rebuilt from V (Gemma 4's full layers hold V alone) */
    KFV_LENGTHS(GEM_DTYPE_F32),
    KFV_LENGTHS(GEM_DTYPE_BF16),
    KFV_LENGTHS(GEM_DTYPE_F16),
    /* BF16 from 32,768 rows on: the long K-from-V first pass (four warps a block, each its own
     * tiles), at the boundary, past it with an odd partition count and a partial last tile, and
     * with fewer partitions than SMs */
    {DEF, 0, 0, PROD, 32768, 32772, TOKEN_MAJOR_PADDED, QKN, 0, 1, GEM_DTYPE_BF16, GEM_DTYPE_BF16, KFV_GEMMA_FAR},
    {F, 7, 0, PROD, 40001, 40008, HEAD_MAJOR, 0, 0, 1, GEM_DTYPE_BF16, GEM_DTYPE_BF16, KFV_GEMMA},
    /* F32: the long K-from-V first pass (pairs of warps, TF32 pieces) from 20,480 rows at any
     * partition count (64: at the boundary and just below it), from 12,288 at one block an SM
     * (the default's one wave at 12,288 and 33 partitions just below it on 132 SMs), past them
     * with an odd partition count and a partial last tile */
    {F, 64, 0, PROD, 20480, 20484, TOKEN_MAJOR_PADDED, QKN, 0, 1, GEM_DTYPE_F32, GEM_DTYPE_F32, KFV_GEMMA_FAR},
    {F, 64, 0, PROD, 20479, 20480, HEAD_MAJOR, 0, 0, 1, GEM_DTYPE_F32, GEM_DTYPE_F32, KFV_GEMMA},
    {DEF, 0, 0, PROD, 12288, 12296, TOKEN_MAJOR, QKN, 0, 1, GEM_DTYPE_F32, GEM_DTYPE_F32, KFV_GEMMA_FAR},
    {F, 33, 0, PROD, 12287, 12290, HEAD_MAJOR_PADDED, 0, 0, 1, GEM_DTYPE_F32, GEM_DTYPE_F32, KFV_GEMMA},
    {DEF, 0, 0, PROD, 20480, 20484, HEAD_MAJOR_PADDED, 0, 0, 1, GEM_DTYPE_F32, GEM_DTYPE_F32, KFV_GEMMA},
    {F, 7, 0, PROD, 40001, 40008, HEAD_MAJOR, 0, 0, 1, GEM_DTYPE_F32, GEM_DTYPE_F32, KFV_GEMMA},
    {F, 7, 0, PROD, 300, 301, HEAD_MAJOR_PADDED, 0, 0, 0, GEM_DTYPE_F32, GEM_DTYPE_F32, KFV_GEMMA_FAR},
    {F, 32, 0, PROD, 5, 9, TOKEN_MAJOR_PADDED, QKN, 0, 0, GEM_DTYPE_BF16, GEM_DTYPE_BF16, KFV_GEMMA}, /* P > live */
    {B, 0, 0, PROD, 300, 300, HEAD_MAJOR, QKN, 0, 0, GEM_DTYPE_F32, GEM_DTYPE_F32, KFV_GEMMA}, /* baseline: refused */
    {F, 5, 3, 6, 3, 40, 40, 77, 100, HEAD_MAJOR_PADDED, 0, 0, 0, GEM_DTYPE_F32, GEM_DTYPE_F32, KFV_ODD},
    {F, 2, 1, 8, 2, 64, 64, 1000, 1003, TOKEN_MAJOR, QKN, 0, 0, GEM_DTYPE_BF16, GEM_DTYPE_BF16, KFV_ODD},
    {DEF, 0, 0, 8, 8, 512, 512, 300, 300, TOKEN_MAJOR, QKN, 0, 0, GEM_DTYPE_F16, GEM_DTYPE_F16, KFV_GEMMA}, /* group 1 */
    {DEF, 0, 0, SWA, 300, 300, TOKEN_MAJOR, QKN, 0, 0, GEM_DTYPE_BF16, GEM_DTYPE_BF16, KFV_GEMMA}, /* D256: CPU only */
};

/* The rotation of a K-from-V case (inv_freq host memory of kfv_inv_freq's size). */
#define KFV_MAX_PAIRS 256
static gem_k_from_v kfv_of(const dcase *c, double *inv_freq)
{
    gem_k_from_v r;
    memset(&r, 0, sizeof r);
    if (c->kfv == KFV_ODD) {
        r.half = c->dk / 2 - 1;
        r.n_pairs = r.half - 2;
        r.pos0 = 17;
        for (int64_t j = 0; j < r.n_pairs; j++)
            inv_freq[j] = pow(1e4, -2.0 * (double)j / (double)(2 * r.half));
    } else {
        r.half = c->dk / 2;
        r.n_pairs = r.half < 64 ? r.half : 64;
        r.pos0 = c->kfv == KFV_GEMMA_FAR ? 1000000 : 0;
        for (int64_t j = 0; j < r.n_pairs; j++)
            inv_freq[j] = pow(1e6, -2.0 * (double)j / (double)c->dk);
    }
    r.inv_freq = inv_freq;
    return r;
}

/* ---- memory of a backend -------------------------------------------------------- */

typedef struct backend_mem {
    gem_backend backend;
    const gem_harness_ops *ops;
    void *hx;
} backend_mem;

/* A copy of host bytes in the backend's memory (NULL on failure, reported). */
static void *put(const backend_mem *m, const void *src, size_t bytes)
{
    void *p = NULL;
    if (!TCHECK(m->ops->alloc(bytes, &p) == GEM_OK))
        return NULL;
    if (src && !TCHECK(m->ops->upload(p, src, bytes) == GEM_OK)) {
        m->ops->free(p);
        return NULL;
    }
    return p;
}

/* ---- building one case's cache ----------------------------------------------------- */

typedef struct strides {
    int64_t hs, ts, elems; /* head stride, token stride, extent in elements */
} strides;

/* Strides of a tensor of `es`-byte elements; the padding is in bytes (16, 32,
 * 64: a multiple of 16, so a backend that wants 16-byte rows runs every layout),
 * F32: d + 16, d + 8 and 4 elements. */
static strides layout_strides(layout l, int64_t heads, int64_t cap, int64_t d, int64_t es)
{
    strides s;
    switch (l) {
    case HEAD_MAJOR: s.ts = d; s.hs = cap * d; break;
    case HEAD_MAJOR_PADDED: s.ts = d + 64 / es; s.hs = (cap + 32) * s.ts; break;
    case TOKEN_MAJOR: s.hs = d; s.ts = heads * d; break;
    default: s.hs = d + 32 / es; s.ts = heads * s.hs + 16 / es; break;
    }
    s.elems = (heads - 1) * s.hs + (cap - 1) * s.ts + d;
    return s;
}

/* A host tensor of type t: NaN everywhere, then seeded values (uniform in
 * [-1, 1), rounded to nearest even for 16-bit types) in rows [0, live).
 * NULL when out of memory. */
static void *make_tensor(strides s, int64_t heads, int64_t live, int64_t d, uint64_t seed,
                         gem_dtype t)
{
    void *p = malloc((size_t)s.elems * gem_dtype_size(t));
    float *row = malloc((size_t)d * sizeof(float));
    if (!p || !row) {
        free(p);
        free(row);
        return NULL;
    }
    for (int64_t i = 0; i < s.elems; i++)
        tdt_store_nan(p, t, i);
    for (int64_t g = 0; g < heads; g++)
        for (int64_t r = 0; r < live; r++) {
            gem_fill_uniform(seed + (uint64_t)(g * 1000003 + r), -1.0f, 1.0f, row, (size_t)d);
            for (int64_t i = 0; i < d; i++)
                tdt_store(p, t, g * s.hs + r * s.ts + i, row[i]);
        }
    free(row);
    return p;
}

/* The F32 tensor holding the exact values of tensor p (type t, `elems` elements),
 * NaN where p holds NaN. */
static float *widen_tensor(const void *p, gem_dtype t, int64_t elems)
{
    float *w = malloc((size_t)elems * sizeof(float));
    for (int64_t i = 0; w && i < elems; i++)
        w[i] = tdt_load(p, t, i);
    return w;
}

/* The scales of an FP8 tensor's heads (n <= MAX_FP8_HEADS): not powers of two, from 2^-6 to
 * 2^4, different per head and between K (which = 0) and V (which = 1). */
#define MAX_FP8_HEADS 64
static void fp8_scales(int64_t n, int which, float *out)
{
    for (int64_t g = 0; g < n && g < MAX_FP8_HEADS; g++)
        out[g] = ldexpf(1.0f + 0.37f * (float)(g % 3) + 0.0123f * (float)g,
                        (int)((g * 7 + which * 3) % 11) - 6);
}

/* ---- one case on one backend ---------------------------------------------------------- */

typedef struct case_out {
    float *out; /* (n_q_heads, dv) host copy of the first call's output */
    gem_status status;
} case_out;

/* Runs case c twice on ctx with the host inputs placed in the backend's memory;
 * checks audit, repeat and the reference. Returns the first output (caller frees). */
static case_out run_case(const dcase *c, gem_decode_ctx *ctx, const backend_mem *m,
                         const float *q, const void *k, const void *v, strides sk, strides sv,
                         const float *k_weight, const double *ref, const char *what)
{
    case_out r = {NULL, GEM_OK};
    const gem_decode_shape shape = {c->nq, c->nkv, c->dk, c->dv,
                                    c->scale != 0 ? c->scale : 1.0f / sqrtf((float)c->dk)};
    const gem_decode_config cfg = {c->route, c->partitions, c->tile};
    const gem_decode_config *pc = c->route == DEF ? NULL : &cfg;
    const size_t nq = (size_t)(c->nq * c->dk), no = (size_t)(c->nq * c->dv);
    size_t ws_bytes = 0;
    r.status = gem_decode_workspace_bytes(ctx, &shape, c->live, pc, &ws_bytes);
    if (r.status != GEM_OK)
        return r;
    float *dq = put(m, q, nq * sizeof(float));
    double inv_freq[KFV_MAX_PAIRS];
    gem_k_from_v kfv = kfv_of(c, inv_freq);
    float *dw = c->kfv ? put(m, k_weight, (size_t)c->dk * sizeof(float)) : NULL;
    kfv.k_weight = dw;
    void *dk = c->kfv ? NULL : put(m, k, (size_t)sk.elems * gem_dtype_size(c->kt));
    void *dv = c->alias ? dk : put(m, v, (size_t)sv.elems * gem_dtype_size(c->vt));
    float *dout = put(m, NULL, no * sizeof(float) + GEM_GUARD_BYTES);
    /* the workspace from the context's own allocator (device memory on CUDA), aligned */
    void *ws = NULL;
    TCHECK_STATUS(gem_decode_workspace_alloc(ctx, ws_bytes ? ws_bytes : 1, &ws), GEM_OK);
    TCHECK(ws && (uintptr_t)ws % GEM_DECODE_WORKSPACE_ALIGN == 0);
    float *host = gem_guard_alloc(no);
    float *first = malloc(no * sizeof(float));
    if (!dq || (!dk && !c->kfv) || (!dw && c->kfv) || !dv || !dout || !ws || !host || !first) {
        r.status = GEM_ERR_NOMEM;
        goto done;
    }
    gem_kv_view kv;
    memset(&kv, 0, sizeof kv);
    kv.k = dk;
    kv.v = dv;
    kv.k_dtype = c->kt;
    kv.v_dtype = c->vt;
    kv.k_head_stride = sk.hs;
    kv.k_token_stride = sk.ts;
    kv.v_head_stride = sv.hs;
    kv.v_token_stride = sv.ts;
    kv.live = c->live;
    kv.capacity = c->capacity;
    if (c->kfv) {
        kv.k_head_stride = kv.k_token_stride = 0;
        kv.k_from_v = &kfv;
    }
    float ksc[MAX_FP8_HEADS], vsc[MAX_FP8_HEADS]; /* host memory on either backend */
    fp8_scales(c->nkv, 0, ksc);
    fp8_scales(c->nkv, 1, vsc);
    kv.k_scale = c->kt == GEM_DTYPE_FP8_E4M3 && !c->kfv ? ksc : NULL;
    kv.v_scale = c->vt == GEM_DTYPE_FP8_E4M3 ? vsc : NULL;
    void *stream = m->ops->stream(m->hx);
    for (int rep = 0; rep < 2; rep++) {
        TCHECK(m->ops->poison(m->hx, dout, no, GEM_POISON_BITS, GEM_GUARD_BYTES) == GEM_OK);
        TCHECK(m->ops->poison(m->hx, ws, ws_bytes / 4, GEM_POISON_BITS, 0) == GEM_OK);
        const gem_status vs = gem_decode_validate(ctx, &shape, dq, &kv, dout, ws, ws_bytes, pc,
                                                 stream);
        r.status = gem_decode(ctx, &shape, dq, &kv, dout, ws, ws_bytes, pc, stream);
        if (!TCHECK(vs == r.status)) /* validate answers what decode answers */
            fprintf(stderr, "     %s: validate %s, decode %s\n", what, gem_status_name(vs),
                    gem_status_name(r.status));
        double sec = 0;
        TCHECK(m->ops->timer_start(m->hx) == GEM_OK && m->ops->timer_stop(m->hx, &sec) == GEM_OK);
        if (r.status != GEM_OK) { /* a refused call writes nothing: the output is all poison */
            size_t unwritten = 0;
            int guard_ok = 0;
            TCHECK(m->ops->download(host, dout, no * sizeof(float) + GEM_GUARD_BYTES) == GEM_OK);
            gem_guard_check(host, no, &unwritten, &guard_ok);
            if (!TCHECK(unwritten == no && guard_ok))
                fprintf(stderr, "     %s: refused (%s) but %zu of %zu outputs written, guard %s\n",
                        what, gem_status_name(r.status), no - unwritten, no,
                        guard_ok ? "ok" : "damaged");
            goto done;
        }
        TCHECK(m->ops->download(host, dout, no * sizeof(float) + GEM_GUARD_BYTES) == GEM_OK);
        size_t unwritten = 0;
        int guard_ok = 0;
        gem_guard_check(host, no, &unwritten, &guard_ok);
        if (!TCHECK(unwritten == 0 && guard_ok))
            fprintf(stderr, "     %s: %zu unwritten, guard %s\n", what, unwritten,
                    guard_ok ? "ok" : "damaged");
        if (rep == 0) {
            memcpy(first, host, no * sizeof(float));
            gem_compare cmp;
            TCHECK_STATUS(gem_compare_f32_f64(host, ref, no, &cmp), GEM_OK);
            if (!TCHECK(cmp.nonfinite == 0 && cmp.nmse <= MAX_NMSE))
                fprintf(stderr, "     %s: nmse %.3g max_abs %.3g nonfinite %zu\n", what,
                        cmp.nmse, cmp.max_abs, cmp.nonfinite);
        } else if (!TCHECK(memcmp(first, host, no * sizeof(float)) == 0)) {
            fprintf(stderr, "     %s: the repeat differs\n", what);
        }
    }
    r.out = first;
    first = NULL;
done:
    if (!c->alias)
        m->ops->free(dv);
    m->ops->free(dq);
    if (dk)
        m->ops->free(dk);
    if (dw)
        m->ops->free(dw);
    m->ops->free(dout);
    gem_decode_workspace_free(ctx, ws);
    gem_guard_free(host);
    free(first);
    return r;
}

/* What gem_decode must answer for case c on ctx, from the backend's own
 * answers: the config's status (gem_decode_workspace_bytes resolves and checks
 * it: GEM_ERR_PARAM for a config the backend has no kernel for), then
 * gem_decode_supports_route for the shape, the K/V types and the route. */
static gem_status expected_status(const dcase *c, const gem_decode_ctx *ctx)
{
    const gem_decode_shape shape = {c->nq, c->nkv, c->dk, c->dv,
                                    c->scale != 0 ? c->scale : 1.0f / sqrtf((float)c->dk)};
    const gem_decode_config cfg = {c->route, c->partitions, c->tile};
    size_t ws = 0;
    gem_status st =
        gem_decode_workspace_bytes(ctx, &shape, c->live, c->route == DEF ? NULL : &cfg, &ws);
    gem_decode_config used;
    if (st == GEM_OK)
        st = gem_decode_config_default(ctx, &shape, c->live, &used);
    const gem_route route = c->route == DEF ? used.route : c->route;
    if (st == GEM_OK)
        st = gem_decode_supports_route(ctx, &shape, c->kt, c->vt, route);
    if (st == GEM_OK && c->kfv) {
        /* K rebuilt from V: the fused route, where the backend has the kernel */
        double inv_freq[KFV_MAX_PAIRS];
        const gem_k_from_v kfv = kfv_of(c, inv_freq);
        st = route != GEM_ROUTE_FUSED ? GEM_ERR_UNSUPPORTED
                                      : gem_decode_supports_k_from_v(ctx, &shape, c->vt, &kfv);
    }
    return st;
}

typedef struct target {
    const char *name;
    gem_decode_ctx *ctx;
    backend_mem mem;
} target;

/* Case c run again on target tg with K and V widened to F32 (wk, wv: the widened tensors,
 * strides sk, sv in elements as for the 16-bit ones) must give out's bits exactly.
 * out (c->nq * c->dv). */
static void check_widened(const dcase *c, target *tg, const float *q, const float *wk,
                          const float *wv, strides sk, strides sv, const float *k_weight,
                          const double *ref, const char *what, const float *out)
{
    dcase cw = *c;
    cw.kt = cw.vt = GEM_DTYPE_F32;
    case_out rw = run_case(&cw, tg->ctx, &tg->mem, q, wk, wv, sk, sv, k_weight, ref, what);
    if (!TCHECK(rw.status == GEM_OK &&
                memcmp(rw.out, out, (size_t)(c->nq * c->dv) * sizeof(float)) == 0))
        fprintf(stderr, "     %s: differs from the call on the F32 widening (%s)\n", what,
                gem_status_name(rw.status));
    free(rw.out);
}

static void check_case(const dcase *c, target *targets, int nt, size_t index)
{
    const strides sk =
        layout_strides(c->lay, c->nkv, c->capacity, c->dk, (int64_t)gem_dtype_size(c->kt));
    const strides sv =
        layout_strides(c->lay, c->nkv, c->capacity, c->dv, (int64_t)gem_dtype_size(c->vt));
    const uint64_t seed = 7000 + (uint64_t)index * 131;
    const size_t no = (size_t)(c->nq * c->dv);
    /* a 16-bit cache against its F32 widening (FP8's scales apply per head, so not FP8) */
    const int wide = (c->kt != GEM_DTYPE_F32 || c->vt != GEM_DTYPE_F32) &&
                     c->kt != GEM_DTYPE_FP8_E4M3 && c->vt != GEM_DTYPE_FP8_E4M3;
    if (!TCHECK(c->nkv <= MAX_FP8_HEADS)) /* a bad table entry */
        return;
    float *q = malloc((size_t)(c->nq * c->dk) * sizeof(float));
    float *k_weight = c->kfv ? malloc((size_t)c->dk * sizeof(float)) : NULL;
    double inv_freq[KFV_MAX_PAIRS];
    gem_k_from_v kfv = kfv_of(c, inv_freq);
    if (k_weight) /* a k_norm weight around 1, as trained ones are */
        gem_fill_uniform(seed + 9, 0.5f, 1.5f, k_weight, (size_t)c->dk);
    kfv.k_weight = k_weight;
    /* K rebuilt from V: no K tensor */
    void *k = c->kfv ? NULL : make_tensor(sk, c->nkv, c->live, c->dk, seed, c->kt);
    void *v = c->alias ? k : make_tensor(sv, c->nkv, c->live, c->dv, seed + 77, c->vt);
    double *ref = malloc(no * sizeof(double));
    /* the F32 widening of a 16-bit cache, for the bitwise check on the CPU */
    float *wk = NULL, *wv = NULL;
    if (wide) {
        wk = c->kfv ? NULL : widen_tensor(k, c->kt, sk.elems);
        wv = c->alias ? wk : widen_tensor(v, c->vt, sv.elems);
    }
    if (!TCHECK(q && (k || c->kfv) && v && ref && (!wide || ((wk || c->kfv) && wv)) &&
                (k_weight || !c->kfv)))
        goto done;
    if (!TCHECK(!c->alias || (c->dk == c->dv && c->kt == c->vt))) /* a bad table entry */
        goto done;
    if (!TCHECK(!c->kfv || (!c->alias && c->dk == c->dv && c->kt == c->vt)))
        goto done;
    gem_fill_uniform(seed + 5, -1.0f, 1.0f, q, (size_t)(c->nq * c->dk));
    const gem_decode_shape shape = {c->nq, c->nkv, c->dk, c->dv,
                                    c->scale != 0 ? c->scale : 1.0f / sqrtf((float)c->dk)};
    gem_kv_view hv;
    memset(&hv, 0, sizeof hv);
    hv.k = k;
    hv.v = v;
    hv.k_dtype = c->kt;
    hv.v_dtype = c->vt;
    hv.k_head_stride = sk.hs;
    hv.k_token_stride = sk.ts;
    hv.v_head_stride = sv.hs;
    hv.v_token_stride = sv.ts;
    hv.live = c->live;
    hv.capacity = c->capacity;
    if (c->kfv) {
        hv.k_head_stride = hv.k_token_stride = 0;
        hv.k_from_v = &kfv;
    }
    float ksc[MAX_FP8_HEADS], vsc[MAX_FP8_HEADS]; /* the scales run_case gives the view */
    fp8_scales(c->nkv, 0, ksc);
    fp8_scales(c->nkv, 1, vsc);
    hv.k_scale = c->kt == GEM_DTYPE_FP8_E4M3 && !c->kfv ? ksc : NULL;
    hv.v_scale = c->vt == GEM_DTYPE_FP8_E4M3 ? vsc : NULL;
    TCHECK_STATUS(gem_attn_reference_kv(&shape, q, &hv, ref, no), GEM_OK);
    float *prev = NULL;
    const char *prev_name = NULL;
    for (int t = 0; t < nt; t++) {
        char what[320];
        snprintf(what, sizeof what,
                 "case %zu %s: %s P%lld t%lld, %lld/%lld heads, dk %lld dv %lld, "
                 "live %lld cap %lld, %s%s%s, K %s V %s", index, targets[t].name,
                 c->route == DEF ? "default" : gem_route_name(c->route), (long long)c->partitions,
                 (long long)c->tile, (long long)c->nq, (long long)c->nkv, (long long)c->dk,
                 (long long)c->dv, (long long)c->live, (long long)c->capacity,
                 layout_name[c->lay], c->alias ? ", K = V" : "",
                 c->kfv ? ", K from V" : "", gem_dtype_name(c->kt),
                 gem_dtype_name(c->vt));
        const gem_backend b = targets[t].mem.backend;
        const gem_status want = expected_status(c, targets[t].ctx);
        /* the CPU runs every case but the baseline on a view without K */
        const gem_status cpu_want =
            c->kfv && c->route == GEM_ROUTE_BASELINE ? GEM_ERR_UNSUPPORTED : GEM_OK;
        if (b == GEM_BACKEND_CPU && !TCHECK(want == cpu_want))
            fprintf(stderr, "     %s: the CPU answers %s\n", what, gem_status_name(want));
        if (!TCHECK(want == GEM_OK || want == GEM_ERR_UNSUPPORTED || want == GEM_ERR_PARAM))
            fprintf(stderr, "     %s: supports/config answer %s\n", what, gem_status_name(want));
        case_out r =
            run_case(c, targets[t].ctx, &targets[t].mem, q, k, v, sk, sv, k_weight, ref, what);
        if (want != GEM_OK) {
            if (!TCHECK(r.status == want))
                fprintf(stderr, "     %s: want %s, got %s\n", what, gem_status_name(want),
                        gem_status_name(r.status));
            free(r.out);
            continue;
        }
        if (!TCHECK(r.status == GEM_OK)) {
            fprintf(stderr, "     %s: %s\n", what, gem_status_str(r.status));
            free(r.out);
            continue;
        }
        if (b != GEM_BACKEND_CPU) {
            /* the CUDA baseline widens each piece of a 16-bit cache as it loads it and runs
             * the F32 kernels' arithmetic: the bits of the same call on the F32 widening */
            if (wide && c->route == GEM_ROUTE_BASELINE)
                check_widened(c, &targets[t], q, wk, wv, sk, sv, k_weight, ref, what, r.out);
            free(r.out);
            continue;
        }
        /* the CPU at 1 and 3 threads: the same bits */
        if (prev && !TCHECK(memcmp(prev, r.out, no * sizeof(float)) == 0))
            fprintf(stderr, "     %s: differs from %s\n", what, prev_name);
        /* a 16-bit cache: the bits of the same call on its F32 widening */
        if (wide && !prev)
            check_widened(c, &targets[t], q, wk, wv, sk, sv, k_weight, ref, what, r.out);
        free(prev);
        prev = r.out;
        prev_name = targets[t].name;
    }
    free(prev);
done:
    free(q);
    free(k);
    free(k_weight);
    if (!c->alias)
        free(v);
    free(wk);
    if (!c->alias)
        free(wv);
    free(ref);
}

/* ---- CUDA: rows read in pieces ------------------------------------------------------------- */

/* The CUDA kernels read rows in pieces of 16 bytes: 4 elements of F32, 8 of BF16 or F16. A
 * token-major view whose base pointers and strides are multiples of the piece runs wherever it
 * sits: here K and V start one piece into their allocations and rows are one piece longer than
 * the head, checked against the reference like the matrix. Half a piece off, in the base or in
 * a stride, answers GEM_ERR_ALIGN and writes nothing. At the sliding-window shape for every
 * type, and at the production shape for F16. */
static void check_cuda_pieces(target *tg)
{
    const backend_mem *m = &tg->mem;
    static const struct {
        int64_t nq, nkv, d;
        gem_dtype t;
    } shapes[] = {{SWA_NQ, SWA_NKV, 256, GEM_DTYPE_F32},
                  {SWA_NQ, SWA_NKV, 256, GEM_DTYPE_BF16},
                  {SWA_NQ, SWA_NKV, 256, GEM_DTYPE_F16},
                  {32, 4, 512, GEM_DTYPE_F16}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t nq = shapes[si].nq, nkv = shapes[si].nkv, d = shapes[si].d;
        const gem_dtype t = shapes[si].t;
        const size_t es = gem_dtype_size(t);
        const int64_t piece = t == GEM_DTYPE_F32 ? 4 : 8, live = 100, cap = 128;
        strides st;
        st.hs = d + piece;
        st.ts = nkv * st.hs + piece;
        st.elems = (nkv - 1) * st.hs + (cap - 1) * st.ts + d;
        const gem_decode_shape shape = {nq, nkv, d, d, 1.0f};
        const size_t no = (size_t)(nq * d);
        char what[128];
        snprintf(what, sizeof what, "cuda pieces: %lld/%lld heads, D%lld, %s", (long long)nq,
                 (long long)nkv, (long long)d, gem_dtype_name(t));
        const uint64_t seed = 555 + si;
        void *hk = make_tensor(st, nkv, live, d, seed, t);
        void *hvv = make_tensor(st, nkv, live, d, seed + 1, t);
        float *q = malloc((size_t)(nq * d) * sizeof(float));
        double *ref = malloc(no * sizeof(double));
        float *host = gem_guard_alloc(no), *first = malloc(no * sizeof(float));
        size_t ws_bytes = 0;
        TCHECK_STATUS(gem_decode_workspace_bytes(tg->ctx, &shape, live, NULL, &ws_bytes), GEM_OK);
        /* each tensor 2 pieces of slack in front: it starts at 1 piece (aligned) or at half a
         * piece (misaligned) */
        const size_t bytes = ((size_t)st.elems + 2 * (size_t)piece) * es;
        char *dkb = put(m, NULL, bytes), *dvb = put(m, NULL, bytes);
        float *dq = put(m, NULL, (size_t)(nq * d) * sizeof(float));
        float *dout = put(m, NULL, no * sizeof(float) + GEM_GUARD_BYTES);
        void *ws = put(m, NULL, ws_bytes);
        if (!TCHECK(hk && hvv && q && ref && host && first && dkb && dvb && dq && dout && ws))
            goto next;
        gem_fill_uniform(seed + 2, -1.0f, 1.0f, q, (size_t)(nq * d));
        gem_kv_view kv;
        memset(&kv, 0, sizeof kv);
        kv.k = hk;
        kv.v = hvv;
        kv.k_dtype = kv.v_dtype = t;
        kv.k_head_stride = kv.v_head_stride = st.hs;
        kv.k_token_stride = kv.v_token_stride = st.ts;
        kv.live = live;
        kv.capacity = cap;
        TCHECK_STATUS(gem_attn_reference_kv(&shape, q, &kv, ref, no), GEM_OK);
        const size_t one = (size_t)piece * es, tensor = (size_t)st.elems * es;
        TCHECK(m->ops->upload(dkb + one, hk, tensor) == GEM_OK &&
               m->ops->upload(dvb + one, hvv, tensor) == GEM_OK &&
               m->ops->upload(dq, q, no * sizeof(float)) == GEM_OK);
        kv.k = dkb + one;
        kv.v = dvb + one;
        void *stream = m->ops->stream(m->hx);
        for (int rep = 0; rep < 2; rep++) {
            TCHECK(m->ops->poison(m->hx, dout, no, GEM_POISON_BITS, GEM_GUARD_BYTES) == GEM_OK);
            const gem_status r = gem_decode(tg->ctx, &shape, dq, &kv, dout, ws, ws_bytes, NULL,
                                            stream);
            if (!TCHECK(r == GEM_OK)) {
                fprintf(stderr, "     %s, one piece in: %s\n", what, gem_status_name(r));
                break;
            }
            TCHECK(m->ops->download(host, dout, no * sizeof(float) + GEM_GUARD_BYTES) == GEM_OK);
            size_t unwritten = 0;
            int guard_ok = 0;
            gem_guard_check(host, no, &unwritten, &guard_ok);
            TCHECK(unwritten == 0 && guard_ok);
            if (rep == 0) {
                gem_compare cmp;
                TCHECK_STATUS(gem_compare_f32_f64(host, ref, no, &cmp), GEM_OK);
                if (!TCHECK(cmp.nonfinite == 0 && cmp.nmse <= MAX_NMSE))
                    fprintf(stderr, "     %s, one piece in: nmse %.3g nonfinite %zu\n", what,
                            cmp.nmse, cmp.nonfinite);
                memcpy(first, host, no * sizeof(float));
            } else if (!TCHECK(memcmp(first, host, no * sizeof(float)) == 0)) {
                fprintf(stderr, "     %s, one piece in: the repeat differs\n", what);
            }
        }
        /* half a piece off: the base of K, the base of V, a token stride, a head stride */
        for (int bad = 0; bad < 4; bad++) {
            gem_kv_view kb = kv;
            const size_t half = one / 2;
            if (bad == 0)
                kb.k = dkb + half;
            else if (bad == 1)
                kb.v = dvb + half;
            else if (bad == 2)
                kb.k_token_stride = st.ts + piece / 2;
            else { /* the token stride grows with it, by whole pieces (nkv is even) */
                kb.v_head_stride = st.hs + piece / 2;
                kb.v_token_stride = nkv * kb.v_head_stride + piece;
            }
            if (bad >= 2) /* the longer stride still fits the allocation: fewer rows */
                kb.capacity = live;
            TCHECK(m->ops->poison(m->hx, dout, no, GEM_POISON_BITS, GEM_GUARD_BYTES) == GEM_OK);
            const gem_status r = gem_decode(tg->ctx, &shape, dq, &kb, dout, ws, ws_bytes, NULL,
                                            stream);
            TCHECK(m->ops->download(host, dout, no * sizeof(float) + GEM_GUARD_BYTES) == GEM_OK);
            size_t unwritten = 0;
            int guard_ok = 0;
            gem_guard_check(host, no, &unwritten, &guard_ok);
            if (!TCHECK(r == GEM_ERR_ALIGN && unwritten == no && guard_ok))
                fprintf(stderr, "     %s, misaligned %d: %s, %zu outputs written\n", what, bad,
                        gem_status_name(r), no - unwritten);
        }
    next:
        free(hk);
        free(hvv);
        free(q);
        free(ref);
        gem_guard_free(host);
        free(first);
        m->ops->free(dkb);
        m->ops->free(dvb);
        m->ops->free(dq);
        m->ops->free(dout);
        m->ops->free(ws);
    }
}

/* ---- the KV cache helper: append then attend, 200 steps ------------------------------------ */

/* The loop on a cache of `steps` rows or, with `ring`, a ring of 64 rows; `sliding`: Gemma 4's
 * sliding-window shape (on CUDA 32 query heads over 16 KV heads, D256), else the production
 * full-attention shape (32 over 4, D512); the CPU runs smaller shapes of the same groups. */
static void check_cache_loop(target *tg, int ring, int64_t steps, gem_dtype kt, gem_dtype vt,
                             int sliding)
{
    const gem_backend b = tg->mem.backend;
    /* the production shapes on CUDA; smaller GQA shapes on the CPU keep the loop fast */
    const int cuda = b == GEM_BACKEND_CUDA;
    const int64_t nq = cuda ? 32 : 8, nkv = sliding ? nq / 2 : (cuda ? 4 : 2);
    const int64_t d = cuda ? (sliding ? 256 : 512) : 64;
    const int64_t cap = ring ? 64 : steps;
    const size_t kes = gem_dtype_size(kt), ves = gem_dtype_size(vt);
    const size_t cache_elems = (size_t)(nkv * cap * d);
    const gem_decode_shape shape = {nq, nkv, d, d, 1.0f / sqrtf((float)d)};
    const gem_kv_cache_desc desc = {b, nkv, d, d, cap, kt, vt, ring};
    char what[96];
    snprintf(what, sizeof what, "%s cache loop%s%s, K %s V %s", tg->name,
             sliding ? " (sliding shape)" : "", ring ? " (ring)" : "", gem_dtype_name(kt),
             gem_dtype_name(vt));
    gem_kv_cache *cache = NULL;
    if (!TCHECK(gem_kv_cache_create(&desc, &cache) == GEM_OK))
        return;
    const backend_mem *m = &tg->mem;
    void *stream = m->ops->stream(m->hx);
    /* what gem_decode must answer on this cache (CUDA without 16-bit kernels: unsupported) */
    const gem_status want = gem_decode_supports(tg->ctx, &shape, kt, vt);
    if (b == GEM_BACKEND_CPU)
        TCHECK_STATUS(want, GEM_OK);
    size_t ws_bytes = 0;
    TCHECK_STATUS(gem_decode_workspace_bytes(tg->ctx, &shape, cap, NULL, &ws_bytes), GEM_OK);
    /* host mirror of the cache, head-major (nkv, cap, d), rounded here */
    void *hk = calloc(cache_elems, kes), *hv = calloc(cache_elems, ves);
    void *ck = malloc(cache_elems * kes), *cv = malloc(cache_elems * ves);
    float *row_k = malloc((size_t)(nkv * d) * sizeof(float));
    float *row_v = malloc((size_t)(nkv * d) * sizeof(float));
    float *q = malloc((size_t)(nq * d) * sizeof(float));
    float *out = malloc((size_t)(nq * d) * sizeof(float)), *again = malloc((size_t)(nq * d) * 4);
    double *ref = malloc((size_t)(nq * d) * sizeof(double));
    float *dk = put(m, NULL, (size_t)(nkv * d) * 4), *dvv = put(m, NULL, (size_t)(nkv * d) * 4);
    float *dq = put(m, NULL, (size_t)(nq * d) * 4), *dout = put(m, NULL, (size_t)(nq * d) * 4);
    void *ws = put(m, NULL, ws_bytes);
    int bad_steps = 0;
    if (!TCHECK(hk && hv && ck && cv && row_k && row_v && q && out && again && ref && dk && dvv &&
                dq && dout && ws))
        goto done;
    for (int64_t step = 0; step < steps; step++) {
        gem_fill_uniform(900 + (uint64_t)step, -1.0f, 1.0f, row_k, (size_t)(nkv * d));
        gem_fill_uniform(5900 + (uint64_t)step, -1.0f, 1.0f, row_v, (size_t)(nkv * d));
        gem_fill_uniform(9900 + (uint64_t)step, -1.0f, 1.0f, q, (size_t)(nq * d));
        TCHECK(m->ops->upload(dk, row_k, (size_t)(nkv * d) * 4) == GEM_OK);
        TCHECK(m->ops->upload(dvv, row_v, (size_t)(nkv * d) * 4) == GEM_OK);
        TCHECK(m->ops->upload(dq, q, (size_t)(nq * d) * 4) == GEM_OK);
        gem_status st = gem_kv_cache_append(cache, dk, dvv, 1, stream);
        if (st != GEM_OK) {
            TCHECK_STATUS(st, GEM_OK);
            break;
        }
        const int64_t row = step % cap;
        for (int64_t g = 0; g < nkv; g++)
            for (int64_t i = 0; i < d; i++) {
                tdt_store(hk, kt, (g * cap + row) * d + i, row_k[g * d + i]);
                tdt_store(hv, vt, (g * cap + row) * d + i, row_v[g * d + i]);
            }
        gem_kv_view view;
        TCHECK_STATUS(gem_kv_cache_view(cache, &view), GEM_OK);
        const int64_t live = step + 1 < cap ? step + 1 : cap;
        TCHECK_EQ_I64(view.live, live);
        TCHECK(view.k_dtype == kt && view.v_dtype == vt);
        gem_kv_view hview = view;
        hview.k = hk;
        hview.v = hv;
        TCHECK_STATUS(gem_attn_reference_kv(&shape, q, &hview, ref, (size_t)(nq * d)), GEM_OK);
        for (int rep = 0; rep < 2; rep++) {
            st = gem_decode(tg->ctx, &shape, dq, &view, dout, ws, ws_bytes, NULL, stream);
            if (st == GEM_OK)
                st = m->ops->download(rep ? again : out, dout, (size_t)(nq * d) * 4);
            if (st != GEM_OK)
                break;
        }
        if (want != GEM_OK) { /* a cache this backend cannot attend to yet */
            if (st != want && bad_steps++ == 0)
                fprintf(stderr, "     %s: step %lld answers %s, want %s\n", what,
                        (long long)step, gem_status_name(st), gem_status_name(want));
            continue;
        }
        gem_compare cmp;
        if (st != GEM_OK || gem_compare_f32_f64(out, ref, (size_t)(nq * d), &cmp) != GEM_OK ||
            cmp.nonfinite || !(cmp.nmse <= MAX_NMSE) ||
            memcmp(out, again, (size_t)(nq * d) * 4) != 0) {
            if (bad_steps++ == 0)
                fprintf(stderr, "     %s: step %lld fails (%s)\n", what, (long long)step,
                        gem_status_name(st));
        }
    }
    TCHECK_EQ_I64(bad_steps, 0);
    TCHECK_EQ_I64(gem_kv_cache_appended(cache), steps);
    TCHECK_STATUS(gem_kv_cache_check(cache, stream), GEM_OK);
    /* the cache holds exactly the rows rounded here (rows never appended: zero) */
    {
        gem_kv_view view;
        TCHECK_STATUS(gem_kv_cache_view(cache, &view), GEM_OK);
        TCHECK(m->ops->download(ck, view.k, cache_elems * kes) == GEM_OK &&
               m->ops->download(cv, view.v, cache_elems * ves) == GEM_OK);
        if (!TCHECK(memcmp(ck, hk, cache_elems * kes) == 0 &&
                    memcmp(cv, hv, cache_elems * ves) == 0))
            fprintf(stderr, "     %s: the cache's bytes differ from the rows rounded here\n", what);
    }
    if (!ring) /* full: one more row does not fit, and nothing changes */
        TCHECK_STATUS(gem_kv_cache_append(cache, dk, dvv, 1, stream), GEM_ERR_RANGE);
    TCHECK_EQ_I64(gem_kv_cache_appended(cache), steps);
done:
    free(hk);
    free(hv);
    free(ck);
    free(cv);
    free(row_k);
    free(row_v);
    free(q);
    free(out);
    free(again);
    free(ref);
    m->ops->free(dk);
    m->ops->free(dvv);
    m->ops->free(dq);
    m->ops->free(dout);
    m->ops->free(ws);
    gem_kv_cache_destroy(cache);
}

int main(int argc, char **argv)
{
    int max_size = 1, shard = 0, shards = 1;
    for (int i = 1; i < argc; i++) {
        int used = 0;
        if (!strcmp(argv[i], "--small"))
            max_size = 0;
        else if (!strcmp(argv[i], "--long"))
            max_size = 2;
        else if (!strcmp(argv[i], "--shard") && i + 1 < argc &&
                 sscanf(argv[i + 1], "%d/%d%n", &shard, &shards, &used) == 2 &&
                 argv[i + 1][used] == '\0' && shards >= 1 && shards <= 16 && shard >= 0 &&
                 shard < shards)
            i++;
        else {
            fprintf(stderr, "usage: test_decode [--small | --long] [--shard I/N]\n");
            return 2;
        }
    }
    target targets[3];
    int nt = 0;
    const int64_t cpu_threads[2] = {1, 3};
    for (int i = 0; i < 2; i++) {
        target *t = &targets[nt];
        t->name = i == 0 ? "cpu1" : "cpu3";
        t->mem.backend = GEM_BACKEND_CPU;
        t->mem.ops = &gem_harness_cpu_ops;
        if (TCHECK(gem_decode_ctx_create(GEM_BACKEND_CPU, cpu_threads[i], &t->ctx) == GEM_OK &&
                   t->mem.ops->open(&t->mem.hx) == GEM_OK))
            nt++;
    }
    {
        target *t = &targets[nt];
        t->name = "cuda";
        t->mem.backend = GEM_BACKEND_CUDA;
        t->mem.ops = &gem_harness_cuda_ops;
        const gem_status st = gem_decode_ctx_create(GEM_BACKEND_CUDA, 0, &t->ctx);
        if (st == GEM_OK && TCHECK(t->mem.ops->open(&t->mem.hx) == GEM_OK)) {
            /* the matrix trusts the backend's supports answers; it must at least claim
             * the production shape with F32 K and V, so a backend that claimed nothing
             * cannot pass by refusing everything */
            const gem_decode_shape prod = {PROD, 1.0f}, swa = {SWA, 1.0f};
            TCHECK_STATUS(gem_decode_supports(t->ctx, &prod, GEM_DTYPE_F32, GEM_DTYPE_F32),
                          GEM_OK);
            /* and the sliding-window shape with each element type for K and V both, but FP8,
             * which the CUDA backend refuses until it has kernels for it */
            for (int dt = 0; dt < GEM_DTYPE_COUNT; dt++)
                TCHECK_STATUS(gem_decode_supports(t->ctx, &swa, (gem_dtype)dt, (gem_dtype)dt),
                              dt == GEM_DTYPE_FP8_E4M3 ? GEM_ERR_UNSUPPORTED : GEM_OK);
            nt++;
        } else {
            TCHECK_STATUS(st, GEM_ERR_NO_DEVICE); /* no GPU: the only acceptable answer */
            printf("test_decode: no CUDA device here; the CUDA cases did not run\n");
        }
    }
    size_t ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].size > max_size || i % (size_t)shards != (size_t)shard)
            continue;
        check_case(&cases[i], targets, nt, i);
        ran++;
    }
    for (int t = 0; t < nt && shard == 0; t++)
        if (targets[t].mem.backend == GEM_BACKEND_CUDA)
            check_cuda_pieces(&targets[t]);
    for (int t = 0; t < nt && shard == 0; t++)
        if (t != 1) { /* the CPU loop once (1 thread), and the CUDA one */
            const int64_t flat = max_size == 0 ? 24 : 200, wrap = max_size == 0 ? 80 : 200;
            check_cache_loop(&targets[t], 0, flat, GEM_DTYPE_F32, GEM_DTYPE_F32, 0);
            check_cache_loop(&targets[t], 1, wrap, GEM_DTYPE_F32, GEM_DTYPE_F32, 0);
            check_cache_loop(&targets[t], 0, flat, GEM_DTYPE_BF16, GEM_DTYPE_BF16, 0);
            check_cache_loop(&targets[t], 1, wrap, GEM_DTYPE_F16, GEM_DTYPE_F16, 0);
            check_cache_loop(&targets[t], 0, flat, GEM_DTYPE_BF16, GEM_DTYPE_F16, 0);
            /* the sliding-window layers: a ring, as the model keeps their window */
            check_cache_loop(&targets[t], 1, wrap, GEM_DTYPE_F32, GEM_DTYPE_F32, 1);
            check_cache_loop(&targets[t], 1, wrap, GEM_DTYPE_BF16, GEM_DTYPE_BF16, 1);
        }
    printf("test_decode: %zu cases on %d targets (%s", ran, nt,
           max_size == 0 ? "small" : (max_size == 2 ? "long" : "normal"));
    if (shards > 1)
        printf(", shard %d of %d", shard, shards);
    printf(")\n");
    for (int t = 0; t < nt; t++) {
        targets[t].mem.ops->close(targets[t].mem.hx);
        gem_decode_ctx_destroy(targets[t].ctx);
    }
    return tcheck_summary("test_decode");
}
