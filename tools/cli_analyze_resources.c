/*
 * `gem analyze resources`: the fail-closed consumer of a CUDA compiled-
 * resource receipt (written by `gem resources`). Everything a schema fixes
 * is in one table (res_schema): the geometry, the kernel roles in their
 * order with the symbol each must have and the launch contract of the fused
 * kernels, and the gates by name with the rule that recomputes each one from
 * the receipt's own figures. gem.resources.v1 describes the design's
 * candidate (P = 32, tile 4; written by `gem resources` in runs 1-8 and by
 * dev/cuda/fused_decode.cu's version 1 since, whose sources are dev/cuda's);
 * gem.resources.v2 the kernels the library ships (the fused route's twelve first
 * passes: F32, BF16 and F16 caches with dense and strided rows, the three that
 * rebuild K from V for K = V layers, and the three of the sliding-window layers'
 * D256 / group-2 shape; its reducer at the decode API's default P for the device;
 * the baseline's four kernels); gem.resources.v3 the same kernels with the two BF16 first
 * passes staging their tiles in 66,560 bytes of dynamic shared memory (their launch contract
 * and two of their gates say so); gem.resources.v4 the same with the two F16 first passes
 * staged too; gem.resources.v5 the same with the BF16 and F16 K-from-V first passes on tensor
 * cores, staging their V tiles in 33,280 dynamic bytes; gem.resources.v7 adds the F32 K-from-V
 * first pass of long lengths (320 threads, 221,696 dynamic bytes) after v6's kernels;
 * gem.resources.v6 the same as v5 and the BF16
 * K-from-V first pass of long lengths (128 threads, 109,952 dynamic bytes) after the baseline's;
 * gem.resources.v8 v7's kernels and, after them, the two D512 first passes of FP8 E4M3 caches
 * (dense and strided rows) on the staged body under the staged BF16 / F16 passes' contract;
 * gem.resources.v9 v8's kernels with the two FP8 first passes keeping their codes FP8 in shared
 * memory (67,584 dynamic bytes within 96 KiB); gem.resources.v10 v9's kernels and, after them,
 * the baseline's score and value kernels of BF16, F16 and FP8 E4M3 caches.
 *
 * It checks, in order: schema and tool; the device (compute capability 9.0,
 * warp 32 and the architecture's limits, which bound every figure so no sum
 * can overflow); the geometry and the 2,105,344-byte scratch contract; the
 * kernels (exactly the schema's roles in its order, their symbols, every
 * figure within the architecture's limits, at most as many resident blocks as
 * threads, registers and shared memory allow, no local memory, and the fused
 * kernels' fixed launch contract); the sources (src/cuda/<name>.cu, sorted,
 * unique) and the binary (not a source); the gates (exactly the schema's
 * names, each equal to its recomputation) and the verdict; and finally the
 * files under --root: every listed source and the binary digested inside the
 * root (no symlink out, regular files only, at most GEM_FILE_MAX_DIGEST_BYTES),
 * the source list complete against every src/cuda .cu file there, the binary an ELF
 * file. Passing means only "compilable and launchable".
 */
#define _XOPEN_SOURCE 700 /* realpath */

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "cli.h"
#include "gem/attn.h"
#include "gem/check.h"
#include "gem/file.h"
#include "gem/receipt.h"

#define NKEYS(a) (sizeof(a) / sizeof((a)[0]))
#define RES_MAX_SOURCES 64

/* ---- what a CUDA 9.0 device allows (cannot be exceeded by a true receipt) ---- */
#define SM90_MAX_THREADS_PER_BLOCK 1024
#define SM90_MAX_THREADS_PER_SM 2048
#define SM90_MAX_BLOCKS_PER_SM 32
#define SM90_MAX_REGS_PER_THREAD 255
#define SM90_REGS_PER_SM 65536
#define SM90_REG_ALLOC_UNIT 256      /* registers, allocated per warp */
#define SM90_MAX_STATIC_SHARED 49152 /* per block, without opt-in */
#define SM90_SHARED_PER_SM 233472    /* 228 KiB */
#define SM90_RESERVED_SHARED 1024    /* per resident block */
#define SM90_MAX_SMS 1024

/* The receipt's figures, once their ranges are known. */
typedef struct res_kernel {
    const char *name;
    int64_t max_threads, stat, dyn, regs, local, threads, warps, warp, active;
} res_kernel;

typedef struct res_facts {
    int64_t major, minor, warp, partitions, tile, sm_count;
    res_kernel k[32];
    size_t n;
} res_facts;

/* A kernel role: its symbol, and the launch the design fixes (fused only). */
typedef struct res_role {
    const char *role;
    const char *names[4];  /* accepted symbols; "first_pass" means the first-pass pattern */
    int fused;             /* the design's fixed contract applies */
    int64_t threads;       /* exact threads dispatched (fused) */
    int64_t dynamic;       /* exact dynamic shared bytes (fused) */
    int64_t budget;        /* static + dynamic shared bytes at most (fused; 0: the schema's) */
} res_role;

/* A gate: its name and the rule that recomputes it. */
typedef struct res_gate {
    const char *name;
    int (*holds)(const res_facts *f);
} res_gate;

typedef struct res_schema {
    const char *schema, *tool, *analysis_schema;
    int64_t partitions, tile, budget; /* geometry (partitions 0: the default for the device's
                                         SMs, see default_partitions); shared budget */
    const res_role *roles;
    size_t n_roles;
    const res_gate *gates;
    size_t n_gates;
    const char *src_dir;              /* every .cu file there is bound ("src/cuda") */
    int headers;                      /* and every .cuh and .h file there too (v2) */
    const char *const *geo_keys;      /* the geometry's keys */
    size_t n_geo;
} res_schema;

/* The decode API's default partitions on CUDA for 4 KV heads (src/cuda/cuda_decode.cu,
 * gem_cu_default_partitions): two first-pass blocks per SM, rounded down to a multiple of 32,
 * within [32, 1024]. */
static int64_t default_partitions(int64_t sm_count)
{
    const int64_t p = sm_count * 2 / 4 / 32 * 32;
    return p < 32 ? 32 : (p > 1024 ? 1024 : p);
}

/* ---- gem.resources.v1: the design's candidate --------------------------------- */

static int g_cc(const res_facts *f) { return f->major == 9 && f->minor == 0 && f->warp == 32; }
static int g_geo(const res_facts *f) { return f->partitions == 32 && f->tile == 4; }
static int g_scratch(const res_facts *f)
{
    gem_online_scratch sc;
    return gem_attention_online_scratch_bytes(f->partitions, 32, 512, &sc) == GEM_OK &&
           sc.maxima_bytes == 4096 && sc.denominators_bytes == 4096 &&
           sc.numerators_bytes == 2097152 && sc.total_bytes == 2105344;
}
#define KGATES_COMMON(tag, i)                                                                  \
    static int tag##_warp(const res_facts *f) { return f->k[i].warp == 32; }                  \
    static int tag##_launch(const res_facts *f) { return f->k[i].max_threads >= 256; }         \
    static int tag##_disp(const res_facts *f)                                                  \
    {                                                                                          \
        return f->k[i].threads == 256 && f->k[i].warps == 8;                                   \
    }                                                                                          \
    static int tag##_shared(const res_facts *f) { return f->k[i].stat + f->k[i].dyn <= 32768; } \
    static int tag##_local(const res_facts *f) { return f->k[i].local == 0; }
#define KGATES(tag, i)                                                                         \
    KGATES_COMMON(tag, i)                                                                      \
    static int tag##_resident(const res_facts *f) { return f->k[i].active >= 1; }
KGATES(fp, 0)
KGATES(rd, 1)
static int fp_dyn(const res_facts *f) { return f->k[0].dyn == 16384; }
static int rd_nodyn(const res_facts *f) { return f->k[1].dyn == 0; }
/* The kernels from index `from` on: warp 32, resident, launchable as dispatched, no local. */
static int baseline_ok(const res_facts *f, size_t from)
{
    int ok = 1;
    for (size_t i = from; i < f->n; i++)
        ok &= f->k[i].warp == 32 && f->k[i].active >= 1 && f->k[i].threads <= f->k[i].max_threads &&
              f->k[i].local == 0;
    return ok;
}
static int g_baseline(const res_facts *f) { return baseline_ok(f, 2); }

static const res_role v1_roles[] = {
    {"fused_first_pass", {"first_pass", NULL, NULL}, 1, 256, 16384, 0},
    /* gem_fused_reducer_v1: dev/cuda/fused_decode.cu's copy of the design's reducer */
    {"fused_reducer", {"gem_fused_reducer", "gem_fused_reducer_wide", "gem_fused_reducer_v1", NULL},
     1, 256, 0, 0},
    {"baseline_score", {"gem_baseline_score", NULL, NULL}, 0, 0, 0, 0},
    {"baseline_normalize", {"gem_baseline_normalize", NULL, NULL}, 0, 0, 0, 0},
    {"baseline_value", {"gem_baseline_value", NULL, NULL}, 0, 0, 0, 0},
    {"baseline_reduce", {"gem_baseline_reduce", NULL, NULL}, 0, 0, 0, 0},
};

/* ---- gem.resources.v2: the kernels the library ships -------------------------- */

static int g2_geo(const res_facts *f)
{
    return f->tile == 8 && f->partitions == default_partitions(f->sm_count);
}
static int g2_scratch(const res_facts *f)
{
    gem_online_scratch sc;
    return gem_attention_online_scratch_bytes(f->partitions, 32, 512, &sc) == GEM_OK &&
           sc.maxima_bytes == (size_t)f->partitions * 32 * 4 &&
           sc.denominators_bytes == (size_t)f->partitions * 32 * 4 &&
           sc.numerators_bytes == (size_t)f->partitions * 32 * 512 * 4 &&
           sc.total_bytes == sc.maxima_bytes + sc.denominators_bytes + sc.numerators_bytes;
}
/* The v2 kernel list: the first passes at 0 .. V2_FIRST_PASSES - 1, then the reducer, then
 * the baseline's kernels. */
#define V2_FIRST_PASSES 12
#define V2_REDUCER V2_FIRST_PASSES
#define V2_BASELINE (V2_REDUCER + 1)
/* a first pass: the common gates, no dynamic shared memory, two blocks per SM */
#define KGATES2(tag, i)                                                                        \
    KGATES_COMMON(tag, i)                                                                      \
    static int tag##_nodyn(const res_facts *f) { return f->k[i].dyn == 0; }                    \
    static int tag##_two(const res_facts *f) { return f->k[i].active >= 2; }
KGATES2(p0, 0)
KGATES2(p1, 1)
KGATES2(p2, 2)
KGATES2(p3, 3)
KGATES2(p4, 4)
KGATES2(p5, 5)
KGATES2(p6, 6)
KGATES2(p7, 7)
KGATES2(p8, 8)
KGATES2(p9, 9)
KGATES2(p10, 10)
KGATES2(p11, 11)
KGATES(r2, V2_REDUCER)
static int r2_nodyn(const res_facts *f) { return f->k[V2_REDUCER].dyn == 0; }
static int g2_baseline(const res_facts *f) { return baseline_ok(f, V2_BASELINE); }

#define FUSED_ROLE(r, n) {r, {n, NULL, NULL, NULL}, 1, 256, 0, 0}
/* the roles after the two F16 first passes, the same in v2, v3 and v4 */
#define ROLES_AFTER_F16                                                                        \
    /* K = V layers: K rebuilt from the V cache, one per cache element type */                 \
    FUSED_ROLE("fused_first_pass_k_from_v", "gem_fused_first_pass_k_from_v"),                  \
        FUSED_ROLE("fused_first_pass_k_from_v_bf16", "gem_fused_first_pass_k_from_v_bf16"),    \
        FUSED_ROLE("fused_first_pass_k_from_v_f16", "gem_fused_first_pass_k_from_v_f16"),      \
        ROLES_AFTER_KFV
/* the roles after the three K-from-V first passes, the same in v2-v5 */
#define ROLES_AFTER_KFV                                                                        \
    /* the sliding-window layers: D256, two query heads per KV head, one per cache type */     \
    FUSED_ROLE("fused_first_pass_d256", "gem_fused_first_pass_d256"),                          \
        FUSED_ROLE("fused_first_pass_d256_bf16", "gem_fused_first_pass_d256_bf16"),            \
        FUSED_ROLE("fused_first_pass_d256_f16", "gem_fused_first_pass_d256_f16"),              \
        FUSED_ROLE("fused_reducer", "gem_fused_reducer"),                                      \
        {"baseline_score", {"gem_baseline_score", NULL, NULL, NULL}, 0, 0, 0, 0},              \
        {"baseline_normalize", {"gem_baseline_normalize", NULL, NULL, NULL}, 0, 0, 0, 0},      \
        {"baseline_value", {"gem_baseline_value", NULL, NULL, NULL}, 0, 0, 0, 0},              \
        {"baseline_reduce", {"gem_baseline_reduce", NULL, NULL, NULL}, 0, 0, 0, 0}
/* the roles after the two BF16 first passes, the same in v2 and v3 */
#define ROLES_AFTER_BF16                                                                       \
    FUSED_ROLE("fused_first_pass_f16", "gem_fused_first_pass_f16"),                            \
        FUSED_ROLE("fused_first_pass_f16_strided", "gem_fused_first_pass_f16_strided"),        \
        ROLES_AFTER_F16
static const res_role v2_roles[] = {
    FUSED_ROLE("fused_first_pass", "gem_fused_first_pass"),
    FUSED_ROLE("fused_first_pass_strided", "gem_fused_first_pass_strided"),
    FUSED_ROLE("fused_first_pass_bf16", "gem_fused_first_pass_bf16"),
    FUSED_ROLE("fused_first_pass_bf16_strided", "gem_fused_first_pass_bf16_strided"),
    ROLES_AFTER_BF16,
};
_Static_assert(NKEYS(v2_roles) == V2_BASELINE + 4, "v2: the first passes, the reducer and the "
                                                   "baseline's four kernels");
_Static_assert(NKEYS(v2_roles) <= NKEYS(((res_facts *)0)->k), "res_facts holds every kernel");

/* a first pass's seven gates, named after its role without "fused_" */
#define FP_GATES(pre, tag)                                                                     \
    {pre "_warp_size_32", tag##_warp}, {pre "_launchable_threads_ge_256", tag##_launch},         \
        {pre "_dispatched_256_threads_8_warps", tag##_disp},                                   \
        {pre "_no_dynamic_shared", tag##_nodyn}, {pre "_shared_within_32768", tag##_shared},   \
        {pre "_zero_local_bytes", tag##_local}, {pre "_two_blocks_per_sm", tag##_two}
/* the gates before the first passes' and after the two BF16 ones (after the two F16 ones), the
 * same in v2 and v3 (v2, v3 and v4) */
#define GATES_HEAD                                                                             \
    {"device_compute_capability_9_0", g_cc},                                                   \
        {"geometry_d512_default_fused_tile8_f32_no_window", g2_geo},                           \
        {"scratch_contract", g2_scratch}, FP_GATES("first_pass", p0),                          \
        FP_GATES("first_pass_strided", p1)
#define GATES_AFTER_F16                                                                        \
    FP_GATES("first_pass_k_from_v", p6), FP_GATES("first_pass_k_from_v_bf16", p7),             \
        FP_GATES("first_pass_k_from_v_f16", p8), GATES_AFTER_KFV
/* the gates after the three K-from-V first passes', the same in v2-v5 */
#define GATES_AFTER_KFV                                                                        \
    FP_GATES("first_pass_d256", p9), FP_GATES("first_pass_d256_bf16", p10),                    \
        FP_GATES("first_pass_d256_f16", p11),                                                  \
        {"reducer_warp_size_32", r2_warp}, {"reducer_launchable_threads_ge_256", r2_launch},   \
        {"reducer_dispatched_256_threads_8_warps", r2_disp},                                   \
        {"reducer_no_dynamic_shared", r2_nodyn}, {"reducer_shared_within_32768", r2_shared},   \
        {"reducer_zero_local_bytes", r2_local}, {"reducer_resident", r2_resident},             \
        {"baseline_kernels_launchable_no_local", g2_baseline}
#define GATES_AFTER_BF16                                                                       \
    FP_GATES("first_pass_f16", p4), FP_GATES("first_pass_f16_strided", p5), GATES_AFTER_F16
static const res_gate v2_gates[] = {
    GATES_HEAD,
    FP_GATES("first_pass_bf16", p2),
    FP_GATES("first_pass_bf16_strided", p3),
    GATES_AFTER_BF16,
};
_Static_assert(NKEYS(v2_gates) == 3 + 7 * V2_FIRST_PASSES + 7 + 1,
               "v2: three receipt gates, seven per first pass, seven for the reducer, one for "
               "the baseline");

/* ---- gem.resources.v3: the kernels the library ships since the staged BF16 pass ----- */
/* The v2 list, the two BF16 first passes (indices 2 and 3) staging their tiles in 66,560 bytes
 * of dynamic shared memory (src/cuda/attn_fused_body.cuh, GEM_MMA_STAGED_BYTES): for them the
 * launch contract fixes those bytes, and static + dynamic shared memory stays within 80 KiB in
 * place of the design's 32 KiB. The budget keeps the L1 the pass's loads in flight need: two
 * blocks of at most 80 KiB (+ 1 KiB reserved each) fit the 164 KiB shared-memory carve-out and
 * leave 92 KiB of the SM's 256 KiB to the L1; the same pass with 97.5 KiB of unused shared
 * memory a block took 20% longer (dev/cuda/mma_decode.cu version 26, results/h200/run78). */
#define V3_STAGED_BYTES 66560
#define V3_STAGED_BUDGET 81920
/* a staged first pass's two shared-memory gates: exactly `bytes` dynamic, within the budget */
#define KGATES_STAGED(tag, i, bytes)                                                           \
    static int tag##_staged_dyn(const res_facts *f) { return f->k[i].dyn == (bytes); }         \
    static int tag##_staged_shared(const res_facts *f)                                         \
    {                                                                                          \
        return f->k[i].stat + f->k[i].dyn <= V3_STAGED_BUDGET;                                 \
    }
#define KGATES3(tag, i) KGATES_STAGED(tag, i, V3_STAGED_BYTES)
KGATES3(p2, 2)
KGATES3(p3, 3)
#define STAGED_ROLE_AT(r, n, bytes) {r, {n, NULL, NULL, NULL}, 1, 256, (bytes), V3_STAGED_BUDGET}
#define STAGED_ROLE(r, n) STAGED_ROLE_AT(r, n, V3_STAGED_BYTES)
static const res_role v3_roles[] = {
    FUSED_ROLE("fused_first_pass", "gem_fused_first_pass"),
    FUSED_ROLE("fused_first_pass_strided", "gem_fused_first_pass_strided"),
    STAGED_ROLE("fused_first_pass_bf16", "gem_fused_first_pass_bf16"),
    STAGED_ROLE("fused_first_pass_bf16_strided", "gem_fused_first_pass_bf16_strided"),
    ROLES_AFTER_BF16,
};
_Static_assert(NKEYS(v3_roles) == NKEYS(v2_roles), "v3 has v2's kernels");
/* a staged first pass's seven gates: its dynamic shared bytes and the two-block budget in place
 * of no dynamic shared memory and the 32 KiB */
#define FP_GATES_STAGED_AT(pre, tag, bytes)                                                    \
    {pre "_warp_size_32", tag##_warp}, {pre "_launchable_threads_ge_256", tag##_launch},         \
        {pre "_dispatched_256_threads_8_warps", tag##_disp},                                   \
        {pre "_dynamic_shared_" bytes, tag##_staged_dyn},                                      \
        {pre "_shared_within_81920", tag##_staged_shared}, {pre "_zero_local_bytes", tag##_local}, \
        {pre "_two_blocks_per_sm", tag##_two}
#define FP_GATES_STAGED(pre, tag) FP_GATES_STAGED_AT(pre, tag, "66560")
static const res_gate v3_gates[] = {
    GATES_HEAD,
    FP_GATES_STAGED("first_pass_bf16", p2),
    FP_GATES_STAGED("first_pass_bf16_strided", p3),
    GATES_AFTER_BF16,
};
_Static_assert(NKEYS(v3_gates) == NKEYS(v2_gates), "v3 has v2's number of gates");

/* ---- gem.resources.v4: the kernels the library ships since the staged F16 pass ------ */
/* v3 with the two F16 first passes (indices 4 and 5) on the staged body too, under the same
 * contract and budget as the BF16 ones (dev/cuda/mma_decode.cu version 29, results/h200/run80:
 * 0.2511 ms at 128K against 0.4540 for the CUDA-core F16 pass). */
KGATES3(p4, 4)
KGATES3(p5, 5)
static const res_role v4_roles[] = {
    FUSED_ROLE("fused_first_pass", "gem_fused_first_pass"),
    FUSED_ROLE("fused_first_pass_strided", "gem_fused_first_pass_strided"),
    STAGED_ROLE("fused_first_pass_bf16", "gem_fused_first_pass_bf16"),
    STAGED_ROLE("fused_first_pass_bf16_strided", "gem_fused_first_pass_bf16_strided"),
    STAGED_ROLE("fused_first_pass_f16", "gem_fused_first_pass_f16"),
    STAGED_ROLE("fused_first_pass_f16_strided", "gem_fused_first_pass_f16_strided"),
    ROLES_AFTER_F16,
};
_Static_assert(NKEYS(v4_roles) == NKEYS(v2_roles), "v4 has v2's kernels");
static const res_gate v4_gates[] = {
    GATES_HEAD,
    FP_GATES_STAGED("first_pass_bf16", p2),
    FP_GATES_STAGED("first_pass_bf16_strided", p3),
    FP_GATES_STAGED("first_pass_f16", p4),
    FP_GATES_STAGED("first_pass_f16_strided", p5),
    GATES_AFTER_F16,
};
_Static_assert(NKEYS(v4_gates) == NKEYS(v2_gates), "v4 has v2's number of gates");

/* ---- gem.resources.v5: the kernels the library ships since the tensor-core K-from-V passes -- */
/* v4 with the BF16 and F16 K-from-V first passes (indices 7 and 8) on the tensor cores, their V
 * tiles staged in 33,280 bytes of dynamic shared memory (two buffers of 16 rows;
 * src/cuda/attn_fused_body.cuh, GEM_KFV_STAGED_BYTES; dev/cuda/kfv_mma.cu version 4,
 * results/h200/run94: BF16 0.2432 ms at 128K against 0.5647 for the CUDA-core pass), within the
 * staged passes' 80 KiB budget. */
#define V5_KFV_STAGED_BYTES 33280
KGATES_STAGED(p7, 7, V5_KFV_STAGED_BYTES)
KGATES_STAGED(p8, 8, V5_KFV_STAGED_BYTES)
#define KFV_STAGED_ROLE(r, n) STAGED_ROLE_AT(r, n, V5_KFV_STAGED_BYTES)
static const res_role v5_roles[] = {
    FUSED_ROLE("fused_first_pass", "gem_fused_first_pass"),
    FUSED_ROLE("fused_first_pass_strided", "gem_fused_first_pass_strided"),
    STAGED_ROLE("fused_first_pass_bf16", "gem_fused_first_pass_bf16"),
    STAGED_ROLE("fused_first_pass_bf16_strided", "gem_fused_first_pass_bf16_strided"),
    STAGED_ROLE("fused_first_pass_f16", "gem_fused_first_pass_f16"),
    STAGED_ROLE("fused_first_pass_f16_strided", "gem_fused_first_pass_f16_strided"),
    FUSED_ROLE("fused_first_pass_k_from_v", "gem_fused_first_pass_k_from_v"),
    KFV_STAGED_ROLE("fused_first_pass_k_from_v_bf16", "gem_fused_first_pass_k_from_v_bf16"),
    KFV_STAGED_ROLE("fused_first_pass_k_from_v_f16", "gem_fused_first_pass_k_from_v_f16"),
    ROLES_AFTER_KFV,
};
_Static_assert(NKEYS(v5_roles) == NKEYS(v2_roles), "v5 has v2's kernels");
#define FP_GATES_KFV_STAGED(pre, tag) FP_GATES_STAGED_AT(pre, tag, "33280")
static const res_gate v5_gates[] = {
    GATES_HEAD,
    FP_GATES_STAGED("first_pass_bf16", p2),
    FP_GATES_STAGED("first_pass_bf16_strided", p3),
    FP_GATES_STAGED("first_pass_f16", p4),
    FP_GATES_STAGED("first_pass_f16_strided", p5),
    FP_GATES("first_pass_k_from_v", p6),
    FP_GATES_KFV_STAGED("first_pass_k_from_v_bf16", p7),
    FP_GATES_KFV_STAGED("first_pass_k_from_v_f16", p8),
    GATES_AFTER_KFV,
};
_Static_assert(NKEYS(v5_gates) == NKEYS(v2_gates), "v5 has v2's number of gates");

/* ---- gem.resources.v6: the kernels the library ships since the long BF16 K-from-V pass ---- */
/* v5's seventeen kernels, then the first pass that rebuilds K from a BF16 V cache from 32,768
 * rows on (index 17, after the baseline's four, so v5's order stays a prefix): warps that own
 * whole tiles (src/cuda/attn_fused_body.cuh, gem_fused_first_pass_kfv_warp_body; dev/cuda/
 * kfv_mma.cu version 23, results/h200/run117: 0.1827 ms at 128K against 0.2417 for the staged
 * pass), 128 threads, 109,952 bytes of dynamic shared memory, within 112 KiB so that two blocks
 * share an SM. */
#define V6_LONG 17
#define V6_LONG_BYTES 109952
#define V6_LONG_BUDGET 114688
static int l6_warp(const res_facts *f) { return f->k[V6_LONG].warp == 32; }
static int l6_launch(const res_facts *f) { return f->k[V6_LONG].max_threads >= 128; }
static int l6_disp(const res_facts *f)
{
    return f->k[V6_LONG].threads == 128 && f->k[V6_LONG].warps == 4;
}
static int l6_dyn(const res_facts *f) { return f->k[V6_LONG].dyn == V6_LONG_BYTES; }
static int l6_shared(const res_facts *f)
{
    return f->k[V6_LONG].stat + f->k[V6_LONG].dyn <= V6_LONG_BUDGET;
}
static int l6_local(const res_facts *f) { return f->k[V6_LONG].local == 0; }
static int l6_two(const res_facts *f) { return f->k[V6_LONG].active >= 2; }
/* Kernels [from, from + n) listed, each with warp 32, resident, launchable as dispatched and no
 * local memory (the baseline's rule). */
static int kernels_launchable(const res_facts *f, size_t from, size_t n)
{
    int ok = f->n >= from + n;
    for (size_t i = from; i < from + n && i < f->n; i++)
        ok &= f->k[i].warp == 32 && f->k[i].active >= 1 && f->k[i].threads <= f->k[i].max_threads &&
              f->k[i].local == 0;
    return ok;
}
/* the baseline's four kernels alone (v5's rule reads to the end of the list) */
static int g6_baseline(const res_facts *f) { return kernels_launchable(f, V2_BASELINE, 4); }
static const res_role v6_roles[] = {
    FUSED_ROLE("fused_first_pass", "gem_fused_first_pass"),
    FUSED_ROLE("fused_first_pass_strided", "gem_fused_first_pass_strided"),
    STAGED_ROLE("fused_first_pass_bf16", "gem_fused_first_pass_bf16"),
    STAGED_ROLE("fused_first_pass_bf16_strided", "gem_fused_first_pass_bf16_strided"),
    STAGED_ROLE("fused_first_pass_f16", "gem_fused_first_pass_f16"),
    STAGED_ROLE("fused_first_pass_f16_strided", "gem_fused_first_pass_f16_strided"),
    FUSED_ROLE("fused_first_pass_k_from_v", "gem_fused_first_pass_k_from_v"),
    KFV_STAGED_ROLE("fused_first_pass_k_from_v_bf16", "gem_fused_first_pass_k_from_v_bf16"),
    KFV_STAGED_ROLE("fused_first_pass_k_from_v_f16", "gem_fused_first_pass_k_from_v_f16"),
    ROLES_AFTER_KFV,
    {"fused_first_pass_kfv_bf16_long",
     {"gem_fused_first_pass_k_from_v_bf16_long", NULL, NULL, NULL}, 1, 128, V6_LONG_BYTES,
     V6_LONG_BUDGET},
};
_Static_assert(NKEYS(v6_roles) == NKEYS(v2_roles) + 1 && NKEYS(v6_roles) == V6_LONG + 1,
               "v6 has v5's kernels and the long pass last");
static const res_gate v6_gates[] = {
    GATES_HEAD,
    FP_GATES_STAGED("first_pass_bf16", p2),
    FP_GATES_STAGED("first_pass_bf16_strided", p3),
    FP_GATES_STAGED("first_pass_f16", p4),
    FP_GATES_STAGED("first_pass_f16_strided", p5),
    FP_GATES("first_pass_k_from_v", p6),
    FP_GATES_KFV_STAGED("first_pass_k_from_v_bf16", p7),
    FP_GATES_KFV_STAGED("first_pass_k_from_v_f16", p8),
    FP_GATES("first_pass_d256", p9),
    FP_GATES("first_pass_d256_bf16", p10),
    FP_GATES("first_pass_d256_f16", p11),
    {"reducer_warp_size_32", r2_warp},
    {"reducer_launchable_threads_ge_256", r2_launch},
    {"reducer_dispatched_256_threads_8_warps", r2_disp},
    {"reducer_no_dynamic_shared", r2_nodyn},
    {"reducer_shared_within_32768", r2_shared},
    {"reducer_zero_local_bytes", r2_local},
    {"reducer_resident", r2_resident},
    {"baseline_kernels_launchable_no_local", g6_baseline},
    {"first_pass_kfv_bf16_long_warp_size_32", l6_warp},
    {"first_pass_kfv_bf16_long_launchable_threads_ge_128", l6_launch},
    {"first_pass_kfv_bf16_long_dispatched_128_threads_4_warps", l6_disp},
    {"first_pass_kfv_bf16_long_dynamic_shared_109952", l6_dyn},
    {"first_pass_kfv_bf16_long_shared_within_114688", l6_shared},
    {"first_pass_kfv_bf16_long_zero_local_bytes", l6_local},
    {"first_pass_kfv_bf16_long_two_blocks_per_sm", l6_two},
};
_Static_assert(NKEYS(v6_gates) == NKEYS(v5_gates) + 7,
               "v6: v5's gates and seven for the long pass");

/* ---- gem.resources.v7: the kernels the library ships since the long F32 K-from-V pass ----- */
/* v6's eighteen kernels, then the first pass that rebuilds K from an F32 V cache from 32,768
 * rows on (index 18, so v6's order stays a prefix): pairs of warps that share each tile, every
 * product three TF32 MMAs (src/cuda/attn_fused_body.cuh, gem_fused_first_pass_kfv_pair_body;
 * dev/cuda/kfv_mma.cu version 29, results/h200/run125: 0.3508 ms at 128K against 0.5006 for
 * the CUDA-core pass; version 30's form since run 135, its mbarriers in 128 static bytes), 320
 * threads, 221,696 bytes of dynamic shared memory within the 227 KiB a block may take (static
 * included), one block an SM. */
#define V7_LONG 18
#define V7_LONG_BYTES 221696
#define V7_LONG_BUDGET 232448
static int l7_warp(const res_facts *f) { return f->k[V7_LONG].warp == 32; }
static int l7_launch(const res_facts *f) { return f->k[V7_LONG].max_threads >= 320; }
static int l7_disp(const res_facts *f)
{
    return f->k[V7_LONG].threads == 320 && f->k[V7_LONG].warps == 10;
}
static int l7_dyn(const res_facts *f) { return f->k[V7_LONG].dyn == V7_LONG_BYTES; }
static int l7_shared(const res_facts *f)
{
    return f->k[V7_LONG].stat + f->k[V7_LONG].dyn <= V7_LONG_BUDGET;
}
static int l7_local(const res_facts *f) { return f->k[V7_LONG].local == 0; }
static int l7_resident(const res_facts *f) { return f->k[V7_LONG].active >= 1; }
/* v7's nineteen kernels in v7's order, the same in v8 and v9 */
#define ROLES_V7                                                                                   \
    FUSED_ROLE("fused_first_pass", "gem_fused_first_pass"),                                        \
    FUSED_ROLE("fused_first_pass_strided", "gem_fused_first_pass_strided"),                        \
    STAGED_ROLE("fused_first_pass_bf16", "gem_fused_first_pass_bf16"),                             \
    STAGED_ROLE("fused_first_pass_bf16_strided", "gem_fused_first_pass_bf16_strided"),             \
    STAGED_ROLE("fused_first_pass_f16", "gem_fused_first_pass_f16"),                               \
    STAGED_ROLE("fused_first_pass_f16_strided", "gem_fused_first_pass_f16_strided"),               \
    FUSED_ROLE("fused_first_pass_k_from_v", "gem_fused_first_pass_k_from_v"),                      \
    KFV_STAGED_ROLE("fused_first_pass_k_from_v_bf16", "gem_fused_first_pass_k_from_v_bf16"),       \
    KFV_STAGED_ROLE("fused_first_pass_k_from_v_f16", "gem_fused_first_pass_k_from_v_f16"),         \
    ROLES_AFTER_KFV,                                                                               \
    {"fused_first_pass_kfv_bf16_long",                                                             \
     {"gem_fused_first_pass_k_from_v_bf16_long", NULL, NULL, NULL}, 1, 128, V6_LONG_BYTES,         \
     V6_LONG_BUDGET},                                                                              \
    {"fused_first_pass_kfv_f32_long",                                                              \
     {"gem_fused_first_pass_k_from_v_f32_long", NULL, NULL, NULL}, 1, 320, V7_LONG_BYTES,          \
     V7_LONG_BUDGET}
static const res_role v7_roles[] = {
    ROLES_V7,
};
_Static_assert(NKEYS(v7_roles) == NKEYS(v6_roles) + 1 && NKEYS(v7_roles) == V7_LONG + 1,
               "v7 has v6's kernels and the long F32 pass last");
/* v7's gates in v7's order, the same in v8 and v9 */
#define GATES_V7                                                                                   \
    GATES_HEAD,                                                                                    \
    FP_GATES_STAGED("first_pass_bf16", p2),                                                        \
    FP_GATES_STAGED("first_pass_bf16_strided", p3),                                                \
    FP_GATES_STAGED("first_pass_f16", p4),                                                         \
    FP_GATES_STAGED("first_pass_f16_strided", p5),                                                 \
    FP_GATES("first_pass_k_from_v", p6),                                                           \
    FP_GATES_KFV_STAGED("first_pass_k_from_v_bf16", p7),                                           \
    FP_GATES_KFV_STAGED("first_pass_k_from_v_f16", p8),                                            \
    FP_GATES("first_pass_d256", p9),                                                               \
    FP_GATES("first_pass_d256_bf16", p10),                                                         \
    FP_GATES("first_pass_d256_f16", p11),                                                          \
    {"reducer_warp_size_32", r2_warp},                                                             \
    {"reducer_launchable_threads_ge_256", r2_launch},                                              \
    {"reducer_dispatched_256_threads_8_warps", r2_disp},                                           \
    {"reducer_no_dynamic_shared", r2_nodyn},                                                       \
    {"reducer_shared_within_32768", r2_shared},                                                    \
    {"reducer_zero_local_bytes", r2_local},                                                        \
    {"reducer_resident", r2_resident},                                                             \
    {"baseline_kernels_launchable_no_local", g6_baseline},                                         \
    {"first_pass_kfv_bf16_long_warp_size_32", l6_warp},                                            \
    {"first_pass_kfv_bf16_long_launchable_threads_ge_128", l6_launch},                             \
    {"first_pass_kfv_bf16_long_dispatched_128_threads_4_warps", l6_disp},                          \
    {"first_pass_kfv_bf16_long_dynamic_shared_109952", l6_dyn},                                    \
    {"first_pass_kfv_bf16_long_shared_within_114688", l6_shared},                                  \
    {"first_pass_kfv_bf16_long_zero_local_bytes", l6_local},                                       \
    {"first_pass_kfv_bf16_long_two_blocks_per_sm", l6_two},                                        \
    {"first_pass_kfv_f32_long_warp_size_32", l7_warp},                                             \
    {"first_pass_kfv_f32_long_launchable_threads_ge_320", l7_launch},                              \
    {"first_pass_kfv_f32_long_dispatched_320_threads_10_warps", l7_disp},                          \
    {"first_pass_kfv_f32_long_dynamic_shared_221696", l7_dyn},                                     \
    {"first_pass_kfv_f32_long_shared_within_232448", l7_shared},                                   \
    {"first_pass_kfv_f32_long_zero_local_bytes", l7_local},                                        \
    {"first_pass_kfv_f32_long_resident", l7_resident}
static const res_gate v7_gates[] = {
    GATES_V7,
};
_Static_assert(NKEYS(v7_gates) == NKEYS(v6_gates) + 7,
               "v7: v6's gates and seven for the long F32 pass");

/* ---- gem.resources.v8: the kernels the library ships since the FP8 first passes ---------- */
/* v7's nineteen kernels, then the two D512 first passes of FP8 E4M3 caches (indices 19 and 20:
 * dense head-major rows, then strided; after v7's last so that v7's order stays a prefix): the
 * BF16 and F16 passes' staged tensor-core body with the E4M3 codes widened to F16 as they are
 * staged (src/cuda/attn_fused_body.cuh; dev/cuda/fp8_decode.cu version 3), so under those
 * passes' contract, budget and seven gates: 256 threads, exactly 66,560 dynamic shared bytes,
 * static + dynamic within 80 KiB, no local memory, two blocks an SM (the default P assumes
 * them, as for every first pass). */
#define V8_FP8 19
#define V8_FP8_STRIDED 20
/* a staged first pass's five gates beside its shared-memory ones: a 32-lane warp, 256 threads
 * launchable and launched as 8 warps, no local memory, two blocks an SM */
#define KGATES_STAGED5(tag, i)                                                                 \
    static int tag##_warp(const res_facts *f) { return f->k[i].warp == 32; }                  \
    static int tag##_launch(const res_facts *f) { return f->k[i].max_threads >= 256; }         \
    static int tag##_disp(const res_facts *f)                                                  \
    {                                                                                          \
        return f->k[i].threads == 256 && f->k[i].warps == 8;                                   \
    }                                                                                          \
    static int tag##_local(const res_facts *f) { return f->k[i].local == 0; }                  \
    static int tag##_two(const res_facts *f) { return f->k[i].active >= 2; }
/* a staged first pass past v2's twelve: the common gates but the 32 KiB one, two blocks per
 * SM, and the staged pass's two shared-memory gates */
#define KGATES8(tag, i)                                                                        \
    KGATES_STAGED5(tag, i)                                                                     \
    KGATES3(tag, i)
KGATES8(p19, V8_FP8)
KGATES8(p20, V8_FP8_STRIDED)
static const res_role v8_roles[] = {
    ROLES_V7,
    STAGED_ROLE("fused_first_pass_fp8", "gem_fused_first_pass_fp8"),
    STAGED_ROLE("fused_first_pass_fp8_strided", "gem_fused_first_pass_fp8_strided"),
};
_Static_assert(NKEYS(v8_roles) == NKEYS(v7_roles) + 2 && NKEYS(v8_roles) == V8_FP8_STRIDED + 1,
               "v8 has v7's kernels and the two FP8 passes last");
_Static_assert(NKEYS(v8_roles) <= NKEYS(((res_facts *)0)->k), "res_facts holds every kernel");
static const res_gate v8_gates[] = {
    GATES_V7,
    FP_GATES_STAGED("first_pass_fp8", p19),
    FP_GATES_STAGED("first_pass_fp8_strided", p20),
};
_Static_assert(NKEYS(v8_gates) == NKEYS(v7_gates) + 14,
               "v8: v7's gates and seven for each FP8 pass");

/* ---- gem.resources.v9: the FP8 first passes keep their codes FP8 in shared memory -------- */
/* v8's twenty-one kernels in v8's order; only the two FP8 first passes' (indices 19 and 20)
 * shared-memory contract differs. Their body keeps the E4M3 codes FP8 in shared memory in
 * 32-token tiles and widens the tensor cores' fragments as it reads them (dev/cuda/
 * fp8_decode.cu version 5, results/h200/run182: 0.842 of the staged FP8 pass's time at 128K):
 * exactly 67,584 dynamic shared bytes (two buffers of 2 x 32 rows of 528 bytes) beside about
 * 17,792 static ones, about 85,376 in all, over v8's 80 KiB; so their budget is 96 KiB, and two
 * blocks of at most 96 KiB (+ 1 KiB reserved each) still fit an SM's 228 KiB of shared memory.
 * The other five gates of each (256 threads / 8 warps, no local memory, two blocks an SM, ...)
 * are v8's. */
#define V9_FP8_BYTES 67584
#define V9_FP8_BUDGET 98304
/* an FP8 first pass of v9: v8's gates but its two shared-memory ones, which read v9's bytes and
 * budget */
#define KGATES9(tag, i)                                                                        \
    KGATES_STAGED5(tag, i)                                                                     \
    static int tag##_fp8_dyn(const res_facts *f) { return f->k[i].dyn == V9_FP8_BYTES; }      \
    static int tag##_fp8_shared(const res_facts *f)                                            \
    {                                                                                          \
        return f->k[i].stat + f->k[i].dyn <= V9_FP8_BUDGET;                                    \
    }
KGATES9(q19, V8_FP8)
KGATES9(q20, V8_FP8_STRIDED)
#define FP8_ROLE(r, n) {r, {n, NULL, NULL, NULL}, 1, 256, V9_FP8_BYTES, V9_FP8_BUDGET}
static const res_role v9_roles[] = {
    ROLES_V7,
    FP8_ROLE("fused_first_pass_fp8", "gem_fused_first_pass_fp8"),
    FP8_ROLE("fused_first_pass_fp8_strided", "gem_fused_first_pass_fp8_strided"),
};
_Static_assert(NKEYS(v9_roles) == NKEYS(v8_roles), "v9 has v8's kernels in v8's order");
/* an FP8 first pass's seven gates in v9, named as v8 names them but for its bytes and budget */
#define FP_GATES_FP8(pre, tag)                                                                 \
    {pre "_warp_size_32", tag##_warp}, {pre "_launchable_threads_ge_256", tag##_launch},         \
        {pre "_dispatched_256_threads_8_warps", tag##_disp},                                   \
        {pre "_dynamic_shared_67584", tag##_fp8_dyn},                                          \
        {pre "_shared_within_98304", tag##_fp8_shared}, {pre "_zero_local_bytes", tag##_local}, \
        {pre "_two_blocks_per_sm", tag##_two}
static const res_gate v9_gates[] = {
    GATES_V7,
    FP_GATES_FP8("first_pass_fp8", q19),
    FP_GATES_FP8("first_pass_fp8_strided", q20),
};
_Static_assert(NKEYS(v9_gates) == NKEYS(v8_gates), "v9: v8's gates, two of each FP8 pass renamed");

/* ---- gem.resources.v10: the baseline reads every cache type ------------------------------- */
/* v9's twenty-one kernels in v9's order, then the baseline's score and value kernels of BF16,
 * F16 and FP8 E4M3 caches (indices 21-26, after v9's last so that v9's order stays a prefix):
 * the F32 stages' bodies with each piece widened as it is loaded, in kernels of their own so
 * that the F32 stages' code stays what it was. They share normalize and reduce with F32 and,
 * like the F32 stages, have no fixed launch contract: one gate holds for the six as it holds for
 * the F32 four (32-lane warps, resident, launchable as dispatched, no local memory). */
#define V10_TYPED 21
#define V10_TYPED_N 6
static int g10_baseline_typed(const res_facts *f)
{
    return kernels_launchable(f, V10_TYPED, V10_TYPED_N);
}
#define BASE_ROLE(r, n) {r, {n, NULL, NULL, NULL}, 0, 0, 0, 0}
static const res_role v10_roles[] = {
    ROLES_V7,
    FP8_ROLE("fused_first_pass_fp8", "gem_fused_first_pass_fp8"),
    FP8_ROLE("fused_first_pass_fp8_strided", "gem_fused_first_pass_fp8_strided"),
    BASE_ROLE("baseline_score_bf16", "gem_baseline_score_bf16"),
    BASE_ROLE("baseline_score_f16", "gem_baseline_score_f16"),
    BASE_ROLE("baseline_score_fp8", "gem_baseline_score_fp8"),
    BASE_ROLE("baseline_value_bf16", "gem_baseline_value_bf16"),
    BASE_ROLE("baseline_value_f16", "gem_baseline_value_f16"),
    BASE_ROLE("baseline_value_fp8", "gem_baseline_value_fp8"),
};
_Static_assert(NKEYS(v10_roles) == NKEYS(v9_roles) + V10_TYPED_N &&
                   NKEYS(v9_roles) == V10_TYPED,
               "v10 has v9's kernels and the baseline's six typed kernels last");
_Static_assert(NKEYS(v10_roles) <= NKEYS(((res_facts *)0)->k), "res_facts holds every kernel");
static const res_gate v10_gates[] = {
    GATES_V7,
    FP_GATES_FP8("first_pass_fp8", q19),
    FP_GATES_FP8("first_pass_fp8_strided", q20),
    {"baseline_typed_kernels_launchable_no_local", g10_baseline_typed},
};
_Static_assert(NKEYS(v10_gates) == NKEYS(v9_gates) + 1, "v10: v9's gates and the typed baseline's");

static const res_gate v1_gates[] = {
    {"device_compute_capability_9_0", g_cc},
    {"geometry_d512_p32_tile4_f32_no_window", g_geo},
    {"scratch_contract_2105344", g_scratch},
    {"first_pass_warp_size_32", fp_warp},
    {"first_pass_launchable_threads_ge_256", fp_launch},
    {"first_pass_dispatched_256_threads_8_warps", fp_disp},
    {"first_pass_dynamic_shared_16384", fp_dyn},
    {"first_pass_shared_within_32768", fp_shared},
    {"first_pass_zero_local_bytes", fp_local},
    {"first_pass_resident", fp_resident},
    {"reducer_warp_size_32", rd_warp},
    {"reducer_launchable_threads_ge_256", rd_launch},
    {"reducer_dispatched_256_threads_8_warps", rd_disp},
    {"reducer_no_dynamic_shared", rd_nodyn},
    {"reducer_shared_within_32768", rd_shared},
    {"reducer_zero_local_bytes", rd_local},
    {"reducer_resident", rd_resident},
    {"baseline_kernels_launchable_no_local", g_baseline},
};

static const char *const v1_geo_keys[] = {"n_q_heads",  "n_kv_heads", "dk",    "dv",
                                          "partitions", "tile",       "dtype", "window"};
static const char *const v2_geo_keys[] = {"n_q_heads", "n_kv_heads", "dk",    "dv",    "live",
                                          "config",    "partitions", "tile",  "dtype", "window"};

/* A schema is found by its name and its tool: gem.resources.v1 from `gem resources` (runs
 * 1-8, the design's candidate in the library then) or from dev/cuda/fused_decode.cu's version
 * 1 (the candidate since), gem.resources.v2 (the kernels the library shipped up to the
 * staged BF16 first passes), gem.resources.v3 (up to the staged F16 first passes),
 * gem.resources.v4 (up to the tensor-core K-from-V first passes), gem.resources.v5 (up to the
 * long BF16 K-from-V first pass), gem.resources.v6 (up to the long F32 K-from-V first pass),
 * gem.resources.v7 (up to the FP8 first passes), gem.resources.v8 (up to the FP8 first passes
 * that keep their codes FP8 in shared memory), gem.resources.v9 (up to the baseline's kernels of
 * the other cache types) and gem.resources.v10 (the kernels it ships). */
static const res_schema schemas[] = {
    {"gem.resources.v1", "gem resources", "gem.analysis.resources.v1", 32, 4, 32768, v1_roles,
     NKEYS(v1_roles), v1_gates, NKEYS(v1_gates), "src/cuda", 0, v1_geo_keys, NKEYS(v1_geo_keys)},
    {"gem.resources.v1", "dev/cuda/fused_decode version 1", "gem.analysis.resources.v1", 32, 4,
     32768, v1_roles, NKEYS(v1_roles), v1_gates, NKEYS(v1_gates), "dev/cuda", 0, v1_geo_keys,
     NKEYS(v1_geo_keys)},
    {"gem.resources.v2", "gem resources", "gem.analysis.resources.v2", 0, 8, 32768, v2_roles,
     NKEYS(v2_roles), v2_gates, NKEYS(v2_gates), "src/cuda", 1, v2_geo_keys, NKEYS(v2_geo_keys)},
    {"gem.resources.v3", "gem resources", "gem.analysis.resources.v3", 0, 8, 32768, v3_roles,
     NKEYS(v3_roles), v3_gates, NKEYS(v3_gates), "src/cuda", 1, v2_geo_keys, NKEYS(v2_geo_keys)},
    {"gem.resources.v4", "gem resources", "gem.analysis.resources.v4", 0, 8, 32768, v4_roles,
     NKEYS(v4_roles), v4_gates, NKEYS(v4_gates), "src/cuda", 1, v2_geo_keys, NKEYS(v2_geo_keys)},
    {"gem.resources.v5", "gem resources", "gem.analysis.resources.v5", 0, 8, 32768, v5_roles,
     NKEYS(v5_roles), v5_gates, NKEYS(v5_gates), "src/cuda", 1, v2_geo_keys, NKEYS(v2_geo_keys)},
    {"gem.resources.v6", "gem resources", "gem.analysis.resources.v6", 0, 8, 32768, v6_roles,
     NKEYS(v6_roles), v6_gates, NKEYS(v6_gates), "src/cuda", 1, v2_geo_keys, NKEYS(v2_geo_keys)},
    {"gem.resources.v7", "gem resources", "gem.analysis.resources.v7", 0, 8, 32768, v7_roles,
     NKEYS(v7_roles), v7_gates, NKEYS(v7_gates), "src/cuda", 1, v2_geo_keys, NKEYS(v2_geo_keys)},
    {"gem.resources.v8", "gem resources", "gem.analysis.resources.v8", 0, 8, 32768, v8_roles,
     NKEYS(v8_roles), v8_gates, NKEYS(v8_gates), "src/cuda", 1, v2_geo_keys, NKEYS(v2_geo_keys)},
    {"gem.resources.v9", "gem resources", "gem.analysis.resources.v9", 0, 8, 32768, v9_roles,
     NKEYS(v9_roles), v9_gates, NKEYS(v9_gates), "src/cuda", 1, v2_geo_keys, NKEYS(v2_geo_keys)},
    {"gem.resources.v10", "gem resources", "gem.analysis.resources.v10", 0, 8, 32768, v10_roles,
     NKEYS(v10_roles), v10_gates, NKEYS(v10_gates), "src/cuda", 1, v2_geo_keys,
     NKEYS(v2_geo_keys)},
};

/* ---- checks ------------------------------------------------------------------- */

static const char *const top_keys[] = {"schema",  "tool",    "device", "geometry", "scratch",
                                       "kernels", "sources", "binary", "gates",    "verdict"};
static const char *const dev_keys[] = {"name",
                                       "compute_capability",
                                       "major",
                                       "minor",
                                       "sm_count",
                                       "warp_size",
                                       "shared_mem_per_block",
                                       "shared_mem_per_block_optin",
                                       "shared_mem_per_sm",
                                       "regs_per_sm"};
static const char *const scratch_keys[] = {"maxima_bytes", "denominators_bytes",
                                           "numerators_bytes", "total_bytes"};
static const char *const kern_keys[] = {"name",
                                        "role",
                                        "max_threads_per_block",
                                        "static_shared_bytes",
                                        "dynamic_shared_bytes",
                                        "registers",
                                        "local_bytes",
                                        "threads_dispatched",
                                        "warps_dispatched",
                                        "warp_size",
                                        "max_active_blocks_per_sm"};
static const char *const file_keys[] = {"path", "sha256"};

/* The schema `name` written by `tool` (NULL: the first of that name). */
static const res_schema *find_schema(const char *name, const char *tool)
{
    for (size_t i = 0; i < NKEYS(schemas); i++)
        if (!strcmp(schemas[i].schema, name) && (!tool || !strcmp(schemas[i].tool, tool)))
            return &schemas[i];
    return NULL;
}

/* A C identifier. */
static int identifier(const char *s)
{
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

/* "<prefix><digits>" at *s, advancing it; 0 or -1. */
static int take(const char **s, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(*s, prefix, n) != 0)
        return -1;
    const char *p = *s + n;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
        return -1;
    while (*p >= '0' && *p <= '9')
        p++;
    *s = p;
    return 0;
}

/* The first pass of tile T is gem_fused_first_pass_t<T>_s<S>_v<V>. */
static int first_pass_name(const char *name, int64_t tile)
{
    char want[64];
    snprintf(want, sizeof want, "gem_fused_first_pass_t%" PRId64 "_", tile);
    size_t n = strlen(want);
    if (strncmp(name, want, n) != 0)
        return 0;
    const char *p = name + n;
    return take(&p, "s") == 0 && take(&p, "_v") == 0 && *p == '\0';
}

static int role_name_ok(const res_role *r, const char *name, int64_t tile)
{
    for (size_t i = 0; i < NKEYS(r->names) && r->names[i]; i++) {
        if (!strcmp(r->names[i], "first_pass") ? first_pass_name(name, tile)
                                               : !strcmp(r->names[i], name))
            return 1;
    }
    return 0;
}

/* Registers a block holds: per warp, rounded up to the allocation unit. */
static int64_t block_registers(int64_t regs, int64_t warps)
{
    const int64_t per_warp =
        (regs * 32 + SM90_REG_ALLOC_UNIT - 1) / SM90_REG_ALLOC_UNIT * SM90_REG_ALLOC_UNIT;
    return per_warp * warps;
}

/* Where in the kernels array `role` is, other than at index skip; -1 if nowhere. */
static long role_elsewhere(const json_t *ks, const char *role, size_t skip)
{
    for (size_t j = 0; j < json_array_size(ks); j++) {
        const char *r = json_string_value(json_object_get(json_array_get(ks, j), "role"));
        if (j != skip && r && !strcmp(r, role))
            return (long)j;
    }
    return -1;
}

static int check_kernel(an_ctx *c, const res_schema *sc, const json_t *ks, size_t i,
                        int64_t optin, int64_t smem_sm, int64_t regs_sm, int64_t tile,
                        res_kernel *out)
{
    const json_t *k = json_array_get(ks, i);
    char path[48];
    snprintf(path, sizeof path, "kernels[%zu]", i);
    const char *name = NULL, *role = NULL;
    if (an_keys(c, k, path, kern_keys, NKEYS(kern_keys)) || an_str(c, k, path, "role", &role))
        return -1;
    const res_role *r = &sc->roles[i];
    if (strcmp(role, r->role) != 0) {
        size_t j = 0;
        while (j < sc->n_roles && strcmp(role, sc->roles[j].role) != 0)
            j++;
        if (j == sc->n_roles)
            return an_fail(c, path, AN_VALUE, "role '%.60s' is not a kernel role of %s", role,
                           sc->schema);
        /* The expected kernel elsewhere: out of order. Nowhere, and this one
         * belongs later: missing. Else this is a second copy of an earlier one. */
        if (role_elsewhere(ks, r->role, i) >= 0)
            return an_fail(c, path, AN_SWAPPED,
                           "'%s' where the '%s' kernel belongs (the kernel order is fixed)",
                           role, r->role);
        if (j > i)
            return an_fail(c, path, AN_MISSING, "the %s kernel is missing ('%s' is in its place)",
                           r->role, role);
        return an_fail(c, path, AN_SWAPPED, "a second '%s' kernel where the '%s' kernel belongs",
                       role, r->role);
    }
    if (an_str(c, k, path, "name", &name))
        return -1;
    if (!identifier(name) || !role_name_ok(r, name, tile))
        return an_fail(c, path, AN_VALUE, "'%.80s' is not the symbol of the %s kernel", name,
                       r->role);
    res_kernel x = {.name = name};
    /* Every figure within what the architecture allows, before any arithmetic. */
    if (an_int_in(c, k, path, "warp_size", 1, 1024, &x.warp))
        return -1;
    if (x.warp != 32)
        return an_fail(c, path, AN_GEOMETRY, "%s: warp_size %" PRId64 ", expected 32", name,
                       x.warp);
    if (an_int_in(c, k, path, "max_threads_per_block", 1, SM90_MAX_THREADS_PER_BLOCK,
                  &x.max_threads) ||
        an_int_in(c, k, path, "registers", 1, SM90_MAX_REGS_PER_THREAD, &x.regs) ||
        an_int_in(c, k, path, "static_shared_bytes", 0, SM90_MAX_STATIC_SHARED, &x.stat) ||
        an_int_in(c, k, path, "dynamic_shared_bytes", 0, optin, &x.dyn) ||
        an_int_in(c, k, path, "local_bytes", 0, INT64_MAX, &x.local) ||
        an_int_in(c, k, path, "threads_dispatched", 1, SM90_MAX_THREADS_PER_BLOCK, &x.threads) ||
        an_int_in(c, k, path, "warps_dispatched", 1, SM90_MAX_THREADS_PER_BLOCK / 32, &x.warps) ||
        an_int_in(c, k, path, "max_active_blocks_per_sm", 0, SM90_MAX_BLOCKS_PER_SM, &x.active))
        return -1;
    if (x.threads > x.max_threads)
        return an_fail(c, path, AN_THRESHOLD,
                       "%s: %" PRId64 " threads dispatched but %" PRId64 " launchable", name,
                       x.threads, x.max_threads);
    if (x.threads % 32 != 0 || x.warps != x.threads / 32)
        return an_fail(c, path, AN_INCONSISTENT, "%s: %" PRId64 " warps for %" PRId64 " threads",
                       name, x.warps, x.threads);
    if (x.stat + x.dyn > optin)
        return an_fail(c, path, AN_THRESHOLD,
                       "%s: %" PRId64 " shared bytes exceed the device opt-in %" PRId64, name,
                       x.stat + x.dyn, optin);
    if (x.active < 1)
        return an_fail(c, path, AN_THRESHOLD, "%s: no block can be resident on an SM", name);
    /* Resident blocks cannot exceed what threads, registers and shared memory allow. */
    const int64_t by_threads = SM90_MAX_THREADS_PER_SM / x.threads;
    const int64_t by_regs = regs_sm / block_registers(x.regs, x.warps);
    const int64_t by_smem = smem_sm / (x.stat + x.dyn + SM90_RESERVED_SHARED);
    int64_t most = SM90_MAX_BLOCKS_PER_SM;
    most = by_threads < most ? by_threads : most;
    most = by_regs < most ? by_regs : most;
    most = by_smem < most ? by_smem : most;
    if (x.active > most)
        return an_fail(c, path, AN_INCONSISTENT,
                       "%s: %" PRId64 " resident blocks per SM, but %" PRId64 " threads, %" PRId64
                       " registers and %" PRId64 " shared bytes per block allow at most %" PRId64,
                       name, x.active, x.threads, x.regs, x.stat + x.dyn, most);
    if (x.local != 0)
        return an_fail(c, path, AN_THRESHOLD, "%s: %" PRId64 " local (spill) bytes, must be 0",
                       name, x.local);
    if (r->fused) {
        if (x.max_threads < r->threads)
            return an_fail(c, path, AN_THRESHOLD,
                           "%s: %" PRId64 " launchable threads < %" PRId64, name, x.max_threads,
                           r->threads);
        if (x.threads != r->threads)
            return an_fail(c, path, AN_GEOMETRY,
                           "%s: %" PRId64 " threads / %" PRId64 " warps dispatched, the design "
                           "fixes %" PRId64 " / %" PRId64,
                           name, x.threads, x.warps, r->threads, r->threads / 32);
        if (x.dyn != r->dynamic)
            return an_fail(c, path, AN_GEOMETRY,
                           "%s: %" PRId64 " dynamic shared bytes, the design fixes %" PRId64,
                           name, x.dyn, r->dynamic);
        const int64_t budget = r->budget ? r->budget : sc->budget;
        if (x.stat + x.dyn > budget)
            return an_fail(c, path, AN_THRESHOLD,
                           "%s: static + dynamic shared %" PRId64 " > %" PRId64 " bytes", name,
                           x.stat + x.dyn, budget);
    }
    *out = x;
    return 0;
}

/* <dir>/<name>.cu with a plain file name. */
/* A kernel source by its name: <name>.cu, and with `headers` <name>.cuh or <name>.h. */
static int source_name_ok(const char *name, int headers)
{
    const size_t n = strlen(name);
    return (n > 3 && !strcmp(name + n - 3, ".cu")) ||
           (headers && ((n > 4 && !strcmp(name + n - 4, ".cuh")) ||
                        (n > 2 && !strcmp(name + n - 2, ".h"))));
}

static int source_path_ok(const char *p, const char *dir, int headers)
{
    char pre[64];
    snprintf(pre, sizeof pre, "%s/", dir);
    size_t lp = strlen(pre);
    if (strncmp(p, pre, lp) != 0 || !source_name_ok(p + lp, headers))
        return 0;
    for (const char *s = p + lp; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-' || *s == '.'))
            return 0;
    return p[lp] != '.';
}

/* A relative path with no empty, "." or ".." component. */
static int plain_relative(const char *p)
{
    if (!p[0] || p[0] == '/')
        return 0;
    for (const char *s = p;;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        if (!e)
            return 1;
        s = e + 1;
    }
}

static int file_entry(an_ctx *c, const json_t *o, const char *path, const char **p,
                      const char **sha)
{
    if (an_keys(c, o, path, file_keys, 2) || an_str(c, o, path, "path", p) ||
        an_sha(c, o, path, "sha256", sha))
        return -1;
    if (!plain_relative(*p))
        return an_fail(c, path, AN_PATH,
                       "path '%.200s' must be relative to the root, without '.', '..' or empty "
                       "components",
                       *p);
    return 0;
}

/* The file at rel under root must have the recorded digest. */
static int digest_under(an_ctx *c, const char *path, const char *root, const char *rel,
                        const char *sha, gem_file_digest *d)
{
    char why[512];
    gem_status st = gem_file_digest_under(root, rel, GEM_FILE_MAX_DIGEST_BYTES, d, why,
                                          sizeof why);
    if (st == GEM_ERR_PARAM)
        return an_fail(c, path, AN_PATH, "'%.200s' %s", rel, why);
    if (st != GEM_OK)
        return an_fail(c, path, AN_DIGEST, "'%.200s' under '%.200s' cannot be digested: %s", rel,
                       root, why);
    if (strcmp(d->sha256, sha) != 0)
        return an_fail(c, path, AN_DIGEST, "'%.200s' has sha256 %.12s..., the receipt says "
                       "%.12s...",
                       rel, d->sha256, sha);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every source file of `sdir` under the root (.cu; with `headers` .cuh and .h too) is listed
 * (the producer digests them all). */
static int sources_complete(an_ctx *c, const json_t *srcs, const char *root, const char *sdir,
                            int headers)
{
    char rroot[PATH_MAX], dir[PATH_MAX], rdir[PATH_MAX];
    if (!realpath(root, rroot) ||
        (size_t)snprintf(dir, sizeof dir, "%s/%s", rroot, sdir) >= sizeof dir ||
        !realpath(dir, rdir))
        return an_fail(c, "sources", AN_PATH, "'%.200s/%s' cannot be resolved", root, sdir);
    size_t rl = strlen(rroot);
    if (strncmp(rdir, rroot, rl) != 0 || rdir[rl] != '/')
        return an_fail(c, "sources", AN_PATH, "%s leaves the root through a symlink", sdir);
    DIR *d = opendir(rdir);
    if (!d)
        return an_fail(c, "sources", AN_PATH, "'%.200s' cannot be listed", rdir);
    char *names[RES_MAX_SOURCES + 1];
    size_t n = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !source_name_ok(e->d_name, headers))
            continue;
        if (n == RES_MAX_SOURCES) {
            rc = an_fail(c, "sources", AN_RANGE, "more than %d source files under %s",
                         RES_MAX_SOURCES, sdir);
            break;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = an_io(c, "out of memory");
            break;
        }
        n++;
    }
    closedir(d);
    if (rc == 0) {
        qsort(names, n, sizeof names[0], cmp_str);
        for (size_t i = 0; i < n && rc == 0; i++) {
            char rel[PATH_MAX];
            snprintf(rel, sizeof rel, "%s/%s", sdir, names[i]);
            int listed = 0;
            for (size_t j = 0; j < json_array_size(srcs) && !listed; j++)
                listed = !strcmp(rel, json_string_value(json_object_get(json_array_get(srcs, j),
                                                                        "path")));
            if (!listed)
                rc = an_fail(c, "sources", AN_MISSING,
                             "'%.200s' is under the root but not bound by the receipt", rel);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    return rc;
}

int an_resources_doc(an_ctx *c, const json_t *doc, const an_opts *o)
{
    if (!json_is_object(doc))
        return an_fail(c, "", AN_TYPE, "the document is not a JSON object");
    const char *s = NULL;
    if (an_str(c, doc, "", "schema", &s))
        return -1;
    const res_schema *sc = find_schema(s, NULL);
    if (!sc)
        return an_fail(c, "schema", AN_SWAPPED,
                       "this is a '%.100s' document, expected gem.resources.v1 .. v10", s);
    /* the tool picks among the entries of this schema */
    const char *tn = json_string_value(json_object_get(json_object_get(doc, "tool"), "name"));
    if (tn && find_schema(s, tn))
        sc = find_schema(s, tn);
    if (an_keys(c, doc, "", top_keys, NKEYS(top_keys)) || an_tool(c, doc, sc->tool))
        return -1;

    res_facts f;
    memset(&f, 0, sizeof f);
    const json_t *d = NULL;
    int64_t optin = 0, smem_sm = 0, regs_sm = 0, per_block = 0, sms = 0;
    if (an_obj(c, doc, "", "device", &d) || an_keys(c, d, "device", dev_keys, NKEYS(dev_keys)) ||
        an_str(c, d, "device", "name", &s))
        return -1;
    if (!s[0])
        return an_fail(c, "device.name", AN_VALUE, "empty");
    if (an_str_eq(c, d, "device", "compute_capability", "9.0", AN_GEOMETRY) ||
        an_int_eq(c, d, "device", "major", 9, NULL) || an_int_eq(c, d, "device", "minor", 0, NULL) ||
        an_int_eq(c, d, "device", "warp_size", 32, NULL) ||
        an_int_in(c, d, "device", "sm_count", 1, SM90_MAX_SMS, &sms) ||
        an_int_in(c, d, "device", "regs_per_sm", 1, SM90_REGS_PER_SM, &regs_sm) ||
        an_int_in(c, d, "device", "shared_mem_per_sm", 1, SM90_SHARED_PER_SM, &smem_sm) ||
        an_int_in(c, d, "device", "shared_mem_per_block_optin", 1, smem_sm, &optin) ||
        an_int_in(c, d, "device", "shared_mem_per_block", 1, optin, &per_block))
        return -1;
    if (optin < sc->budget)
        return an_fail(c, "device", AN_THRESHOLD,
                       "shared_mem_per_block_optin %" PRId64 " < %" PRId64, optin, sc->budget);
    f.major = 9;
    f.minor = 0;
    f.warp = 32;
    f.sm_count = sms;
    const int64_t partitions = sc->partitions ? sc->partitions : default_partitions(sms);

    const json_t *g = NULL;
    if (an_obj(c, doc, "", "geometry", &g) || an_keys(c, g, "geometry", sc->geo_keys, sc->n_geo) ||
        an_int_eq(c, g, "geometry", "n_q_heads", 32, NULL) ||
        an_int_eq(c, g, "geometry", "n_kv_heads", 4, NULL) ||
        an_int_eq(c, g, "geometry", "dk", 512, NULL) || an_int_eq(c, g, "geometry", "dv", 512, NULL) ||
        an_int_eq(c, g, "geometry", "partitions", partitions, NULL) ||
        an_int_eq(c, g, "geometry", "tile", sc->tile, NULL) ||
        an_str_eq(c, g, "geometry", "dtype", "f32", NULL) ||
        an_int_eq(c, g, "geometry", "window", 0, NULL))
        return -1;
    if (sc->partitions == 0 && /* v2: the context the default was chosen for, and its name */
        (an_int_in(c, g, "geometry", "live", 1, (int64_t)1 << 40, NULL) ||
         an_str_eq(c, g, "geometry", "config", "default", NULL)))
        return -1;
    f.partitions = partitions;
    f.tile = sc->tile;

    gem_online_scratch want;
    if (gem_attention_online_scratch_bytes(partitions, 32, 512, &want) != GEM_OK)
        return an_fail(c, "scratch", "internal", "the scratch contract cannot be computed");
    const json_t *scr = NULL;
    if (an_obj(c, doc, "", "scratch", &scr) ||
        an_keys(c, scr, "scratch", scratch_keys, NKEYS(scratch_keys)) ||
        an_int_eq(c, scr, "scratch", "maxima_bytes", (int64_t)want.maxima_bytes, NULL) ||
        an_int_eq(c, scr, "scratch", "denominators_bytes", (int64_t)want.denominators_bytes, NULL) ||
        an_int_eq(c, scr, "scratch", "numerators_bytes", (int64_t)want.numerators_bytes, NULL) ||
        an_int_eq(c, scr, "scratch", "total_bytes", (int64_t)want.total_bytes, NULL))
        return -1;

    const json_t *ks = NULL;
    if (an_arr(c, doc, "", "kernels", &ks))
        return -1;
    const size_t nk = json_array_size(ks);
    for (size_t i = 0; i < nk && i < sc->n_roles; i++)
        if (check_kernel(c, sc, ks, i, optin, smem_sm, regs_sm, sc->tile, &f.k[i]))
            return -1;
    if (nk < sc->n_roles)
        return an_fail(c, "kernels", AN_MISSING, "the %s kernel is not in the receipt",
                       sc->roles[nk].role);
    if (nk > sc->n_roles)
        return an_fail(c, "kernels", AN_EXTRA, "%zu kernels, %s has exactly %zu", nk, sc->schema,
                       sc->n_roles);
    f.n = nk;

    const json_t *srcs = NULL, *bin = NULL;
    const char *bp = NULL, *bsha = NULL, *prev = NULL;
    if (an_arr(c, doc, "", "sources", &srcs))
        return -1;
    if (json_array_size(srcs) == 0)
        return an_fail(c, "sources", AN_MISSING, "no source file is bound");
    if (json_array_size(srcs) > RES_MAX_SOURCES)
        return an_fail(c, "sources", AN_RANGE, "more than %d sources", RES_MAX_SOURCES);
    for (size_t i = 0; i < json_array_size(srcs); i++) {
        char p[48];
        const char *sp = NULL, *ss = NULL;
        snprintf(p, sizeof p, "sources[%zu]", i);
        if (file_entry(c, json_array_get(srcs, i), p, &sp, &ss))
            return -1;
        if (!source_path_ok(sp, sc->src_dir, sc->headers))
            return an_fail(c, p, AN_SWAPPED, "'%.200s' is not a %s/<name>.%s file", sp,
                           sc->src_dir, sc->headers ? "cu, .cuh or .h" : "cu");
        if (prev && strcmp(prev, sp) >= 0)
            return an_fail(c, p, AN_VALUE, "'%.200s' is out of order or repeated (the list is "
                           "sorted, one entry per file)", sp);
        prev = sp;
    }
    if (an_obj(c, doc, "", "binary", &bin) || file_entry(c, bin, "binary", &bp, &bsha))
        return -1;
    if (!strncmp(bp, "src/", 4))
        return an_fail(c, "binary", AN_SWAPPED, "'%.200s' is under src/, not a built binary", bp);

    /* Gates: exactly the schema's, each what the figures give. */
    const json_t *gates = NULL;
    if (an_obj(c, doc, "", "gates", &gates))
        return -1;
    const char *gk;
    const json_t *gv;
    json_object_foreach((json_t *)gates, gk, gv) {
        size_t j = 0;
        while (j < sc->n_gates && strcmp(gk, sc->gates[j].name) != 0)
            j++;
        if (j == sc->n_gates)
            return an_fail(c, "gates", AN_EXTRA, "'%.60s' is not a gate of %s", gk, sc->schema);
    }
    int all = 1;
    const char *first_false = NULL;
    for (size_t j = 0; j < sc->n_gates; j++) {
        int rec = 0;
        if (an_bool(c, gates, "gates", sc->gates[j].name, &rec))
            return -1;
        const int got = sc->gates[j].holds(&f);
        if (rec != got)
            return an_fail(c, "gates", AN_VERDICT, "%s is %s but the figures say %s",
                           sc->gates[j].name, rec ? "true" : "false", got ? "true" : "false");
        if (!got && !first_false)
            first_false = sc->gates[j].name;
        all &= got;
    }
    if (an_str(c, doc, "", "verdict", &s))
        return -1;
    if (strcmp(s, "pass") && strcmp(s, "fail"))
        return an_fail(c, "verdict", AN_VALUE, "'%.40s' is neither 'pass' nor 'fail'", s);
    if ((strcmp(s, "pass") == 0) != all)
        return an_fail(c, "verdict", AN_VERDICT, "'%s' but the gates say '%s'", s,
                       all ? "pass" : "fail");
    if (!all)
        return an_fail(c, "gates", AN_THRESHOLD, "the gate '%s' fails", first_false);

    if (!o || !o->recompute)
        return 0;
    /* The files, under the root: digests, completeness, the binary's kind. */
    const char *root = o->root ? o->root : ".";
    gem_file_digest fd;
    for (size_t i = 0; i < json_array_size(srcs); i++) {
        char p[48];
        const json_t *e = json_array_get(srcs, i);
        snprintf(p, sizeof p, "sources[%zu]", i);
        if (digest_under(c, p, root, json_string_value(json_object_get(e, "path")),
                         json_string_value(json_object_get(e, "sha256")), &fd))
            return -1;
    }
    if (sources_complete(c, srcs, root, sc->src_dir, sc->headers))
        return -1;
    if (digest_under(c, "binary", root, bp, bsha, &fd))
        return -1;
    if (fd.head_len < 4 || memcmp(fd.head, "\x7f" "ELF", 4) != 0)
        return an_fail(c, "binary", AN_SWAPPED, "'%.200s' is not an ELF executable", bp);
    return 0;
}

json_t *an_resources_analysis_build(const json_t *doc, const char *path, const char *sha,
                                   const char *commit)
{
    const res_schema *sc = find_schema(json_string_value(json_object_get(doc, "schema")), NULL);
    if (!sc || !path || !sha)
        return NULL;
    json_t *a = gem_receipt_new(sc->analysis_schema, "gem analyze resources",
                                commit ? commit : "unknown");
    json_t *ks = json_array();
    const json_t *d = json_object_get(doc, "device");
    int bad = !a || !ks;
    size_t i;
    const json_t *k;
    json_array_foreach(json_object_get(doc, "kernels"), i, k) {
        if (!bad)
            bad = json_array_append_new(ks, json_pack("{s:O, s:O}", "name",
                                                      json_object_get(k, "name"), "role",
                                                      json_object_get(k, "role"))) != 0;
    }
    json_t *receipt = json_pack("{s:s, s:s}", "path", path, "sha256", sha);
    json_t *dev = json_pack("{s:O, s:O}", "name", json_object_get(d, "name"),
                            "compute_capability", json_object_get(d, "compute_capability"));
    if (bad || !receipt || !dev) {
        bad = 1;
        json_decref(receipt);
        json_decref(dev);
    } else {
        /* set_new takes its value even when it fails */
        bad = json_object_set_new(a, "receipt", receipt) ||
              json_object_set_new(a, "device", dev) ||
              json_object_set_new(a, "kernels", json_incref(ks)) ||
              json_object_set_new(a, "verdict", json_string("pass")) ||
              json_object_set_new(a, "statement",
                                  json_string("compilable and launchable; not an occupancy "
                                              "trace, not correctness, not timing"));
    }
    json_decref(ks);
    if (bad) {
        json_decref(a);
        return NULL;
    }
    return a;
}

int an_resources(an_ctx *c, const char *path, const an_opts *o, json_t **analysis)
{
    json_t *doc = NULL;
    char sha[65];
    c->file = path;
    if (an_load(c, path, &doc, sha))
        return 1;
    int rc = an_resources_doc(c, doc, o) ? 1 : 0;
    if (rc == 0 && analysis) {
        *analysis = o && o->recompute
                        ? an_resources_analysis_build(doc, path, sha, cli_git_commit())
                        : NULL;
        if (!*analysis) {
            an_io(c, "cannot build the analysis (out of memory or files not checked)");
            rc = 1;
        }
    }
    json_decref(doc);
    return rc;
}
