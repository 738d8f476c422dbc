/*
 * gem resources: the compiled-resource receipt of the CUDA kernels the library
 * ships (schema gem.resources.v10, docs/receipts-resources.md).
 *
 * For the fused first passes (the full-attention layers' D512 ones, the long BF16 and F32
 * K-from-V ones, the sliding-window layers' D256 ones and the D512 FP8 E4M3 ones) and the
 * reducer at the decode API's tuned
 * default for the production shape, and the baseline's kernels (its four F32 stages and the
 * score and value stages of BF16, F16 and FP8 E4M3 caches), it records what the
 * CUDA runtime reports (cudaFuncGetAttributes, the occupancy API) and how the
 * routes launch them, binds the geometry and the scratch contract, digests
 * every kernel source of src/cuda (.cu, .cuh, .h) and the running binary, and
 * evaluates the gates.
 * Exit 0 when every gate holds, 1 when one fails, 2 for bad usage, no GPU or an
 * I/O error. (The design candidate's gem.resources.v1 receipt is made by
 * dev/cuda/fused_decode.cu, its version 1.)
 *
 * --ceilings FILE also writes a gem.ceilings.v2 receipt: the read probe's
 * bandwidth, the device-to-device copy bandwidth and the nominal bandwidth.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_routes.h"
#include "gem/attn.h"
#include "gem/decode.h"
#include "gem/engine.h"
#include "gem/check.h"
#include "gem/cuda.h"
#include "gem/receipt.h"

#ifndef GEM_SOURCE_DIR
#define GEM_SOURCE_DIR "."
#endif

#define CMD "resources"
#define RES_MAX_SOURCES 64

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gem resources [options]\n\n"
            "Writes the compiled-resource receipt of the CUDA kernels the library ships\n"
            "(schema gem.resources.v10): device limits, per-kernel registers / shared memory /\n"
            "local bytes / launch threads / resident blocks for the fused route's first\n"
            "passes (D512 for the full-attention layers, FP8 E4M3 caches among them, D256\n"
            "for the sliding-window ones)\n"
            "and reducer (at the tuned default for the production shape, 32 query heads,\n"
            "4 KV heads, D512) and the baseline's kernels (F32, and the score and value of\n"
            "BF16, F16 and FP8 caches), the scratch contract,\n"
            "SHA-256 of src/cuda's .cu, .cuh and .h files and of this binary, and the gates.\n"
            "Needs a GPU; exits 2 with a 'no GPU' message without one.\n\n"
            "options:\n"
            "  --out FILE           receipt path (default resources.json)\n"
            "  --live N             context the default config is chosen for (default 131072)\n"
            "  --ceilings FILE      also measure read, copy and nominal bandwidth into FILE\n"
            "                       (schema gem.ceilings.v2)\n"
            "  --bandwidth-bytes N  bytes per bandwidth pass (default 4294967296)\n"
            "  --reps N             bandwidth repetitions, median reported (default 20)\n"
            "  -h, --help           this text\n\n"
            "exit: 0 all gates hold, 1 a gate failed, 2 usage / no GPU / I/O error\n");
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* {"path": rel, "sha256": hex} appended to arr; -1 when the file cannot be read. */
static int add_file(json_t *arr, const char *rel, const char *full)
{
    char hex[65];
    if (gem_sha256_file_hex(full, hex) != GEM_OK) {
        cli_error(CMD, "cannot read '%s' to digest it", full);
        return -1;
    }
    return json_array_append_new(arr, json_pack("{s:s, s:s}", "path", rel, "sha256", hex));
}

/* The kernels' sources: every .cu, .cuh and .h file of src/cuda, sorted by name. */
static int kernel_source_name(const char *name)
{
    const size_t len = strlen(name);
    return name[0] != '.' && ((len > 3 && !strcmp(name + len - 3, ".cu")) ||
                              (len > 4 && !strcmp(name + len - 4, ".cuh")) ||
                              (len > 2 && !strcmp(name + len - 2, ".h")));
}

static json_t *sources_json(void)
{
    const char *dir = GEM_SOURCE_DIR "/src/cuda";
    DIR *d = opendir(dir);
    if (!d) {
        cli_error(CMD, "cannot open '%s' to digest the kernel sources", dir);
        return NULL;
    }
    char *names[RES_MAX_SOURCES];
    size_t n = 0;
    struct dirent *e;
    int bad = 0;
    while ((e = readdir(d)) != NULL) {
        if (!kernel_source_name(e->d_name))
            continue;
        if (n == RES_MAX_SOURCES) {
            bad = 1;
            break;
        }
        names[n] = strdup(e->d_name);
        if (!names[n]) {
            bad = 1;
            break;
        }
        n++;
    }
    closedir(d);
    json_t *arr = bad || n == 0 ? NULL : json_array();
    if (n == 0)
        cli_error(CMD, "no kernel source in '%s'", dir);
    if (arr) {
        qsort(names, n, sizeof names[0], cmp_str);
        for (size_t i = 0; i < n; i++) {
            char rel[512], full[PATH_MAX];
            snprintf(rel, sizeof rel, "src/cuda/%s", names[i]);
            snprintf(full, sizeof full, "%s/%s", GEM_SOURCE_DIR, rel);
            if (add_file(arr, rel, full)) {
                json_decref(arr);
                arr = NULL;
                break;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    return arr;
}

/* The running binary, its path relative to the source tree when inside it. */
static json_t *binary_json(void)
{
    char exe[PATH_MAX], src[PATH_MAX];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        cli_error(CMD, "cannot find the running binary (/proc/self/exe)");
        return NULL;
    }
    exe[len] = '\0';
    const char *rel = exe;
    if (realpath(GEM_SOURCE_DIR, src)) {
        const size_t sl = strlen(src);
        if (strncmp(exe, src, sl) == 0 && exe[sl] == '/')
            rel = exe + sl + 1;
    }
    json_t *arr = json_array();
    if (!arr || add_file(arr, rel, exe)) {
        json_decref(arr);
        return NULL;
    }
    json_t *b = json_incref(json_array_get(arr, 0));
    json_decref(arr);
    return b;
}

static json_t *kernel_json(const gem_cuda_kernel_info *k)
{
    return json_pack("{s:s, s:s, s:i, s:I, s:I, s:i, s:I, s:I, s:I, s:i, s:i}", "name", k->name,
                     "role", k->role, "max_threads_per_block", k->max_threads_per_block,
                     "static_shared_bytes", (json_int_t)k->static_shared_bytes,
                     "dynamic_shared_bytes", (json_int_t)k->dynamic_shared_bytes, "registers",
                     k->registers, "local_bytes", (json_int_t)k->local_bytes,
                     "threads_dispatched", (json_int_t)k->threads_dispatched,
                     "warps_dispatched", (json_int_t)k->warps_dispatched, "warp_size",
                     k->warp_size, "max_active_blocks_per_sm", k->max_active_blocks_per_sm);
}

/* The BF16 and F16 first passes stage their tiles in shared memory (src/cuda/
 * attn_fused_body.cuh): launched with these dynamic bytes, and within this budget (80 KiB),
 * which leaves the L1 the loads in flight need at two blocks an SM
 * (docs/receipts-resources.md). */
#define STAGED_DYNAMIC_SHARED 66560
#define STAGED_SHARED_BUDGET 81920
/* The FP8 first passes keep the E4M3 codes FP8 in shared memory, in 32-token tiles (two
 * buffers of 2 x 32 rows of 528 bytes), and widen them as the tensor cores read them: these
 * dynamic bytes beside about 17,792 static ones, within this budget (96 KiB), which still lets
 * two blocks share an SM (2 x (96 KiB + 1 KiB reserved) of the 228 KiB). */
#define FP8_DYNAMIC_SHARED 67584
#define FP8_SHARED_BUDGET 98304
/* The BF16 and F16 K-from-V first passes stage their V tiles alone: these dynamic bytes, within
 * the same budget. */
#define KFV_STAGED_DYNAMIC_SHARED 33280
/* The long BF16 K-from-V first pass (warps that own whole tiles): 128 threads, these dynamic
 * bytes, within this budget, which still lets two blocks share an SM (2 x (112 KiB + 1 KiB
 * reserved) of the 228 KiB); it copies its tiles by cp.async, past the L1. */
#define KFV_LONG_DYNAMIC_SHARED 109952
#define KFV_LONG_SHARED_BUDGET 114688
/* The long F32 K-from-V first pass (pairs of warps, TF32 pieces): 320 threads, these dynamic
 * bytes, within the 227 KiB a block may take; one block an SM. */
#define KFV_F32_LONG_DYNAMIC_SHARED 221696
#define KFV_F32_LONG_SHARED_BUDGET 232448

/* The kernels a gem.resources.v10 receipt lists, in gem_cuda_kernel_query's order: the
 * GEM_CUDA_FIRST_PASSES first passes, the reducer, the baseline's F32 kernels, the long BF16 and
 * F32 K-from-V first passes, the two FP8 first passes (dense rows, strided rows), then the
 * baseline's score and value kernels of the other cache types (v9's list, then those six). */
#define RES_LONG_BF16 (GEM_CUDA_FIRST_PASSES + 1 + GEM_CUDA_BASELINE_KERNELS)
#define RES_LONG_F32 (RES_LONG_BF16 + 1)
#define RES_FP8 (RES_LONG_F32 + 1)
#define RES_BASELINE_TYPED (RES_FP8 + 2)
#define RES_KERNELS (RES_BASELINE_TYPED + GEM_CUDA_BASELINE_TYPED_KERNELS)
_Static_assert(GEM_CUDA_KERNELS == RES_KERNELS, "a kernel the library adds needs a new schema");

/* Whether a role is one of the two FP8 first passes (dense rows, strided rows). */
static int fp8_role(const char *role)
{
    return !strcmp(role, "fused_first_pass_fp8") || !strcmp(role, "fused_first_pass_fp8_strided");
}

/* The dynamic shared bytes a first pass is staged in, by its role; 0: not staged. */
static int64_t staged_bytes(const char *role)
{
    static const char *const staged[] = {"fused_first_pass_bf16", "fused_first_pass_bf16_strided",
                                         "fused_first_pass_f16", "fused_first_pass_f16_strided"};
    for (size_t i = 0; i < sizeof staged / sizeof staged[0]; i++)
        if (!strcmp(role, staged[i]))
            return STAGED_DYNAMIC_SHARED;
    if (fp8_role(role))
        return FP8_DYNAMIC_SHARED;
    if (!strcmp(role, "fused_first_pass_k_from_v_bf16") ||
        !strcmp(role, "fused_first_pass_k_from_v_f16"))
        return KFV_STAGED_DYNAMIC_SHARED;
    return 0;
}

/* The static + dynamic shared bytes a staged first pass must stay within, by its role. */
static int64_t staged_budget(const char *role)
{
    return fp8_role(role) ? FP8_SHARED_BUDGET : STAGED_SHARED_BUDGET;
}

/* The checks of one fused kernel: launched as the route says (256 threads, 8 warps,
 * no dynamic shared memory), within the design's 32 KiB shared-memory budget, no
 * local memory, and at least `want_blocks` resident blocks per SM; a staged pass (`staged`
 * dynamic bytes, staged_bytes of its role; 0: not staged) with exactly those dynamic bytes,
 * static + dynamic within `budget` (staged_budget of its role; read only when staged). */
static void fused_gates(json_t *gates, const char *prefix, const gem_cuda_kernel_info *k,
                        int want_blocks, int64_t staged, int64_t budget)
{
    char key[96];
#define GATE(suffix, cond)                                                                     \
    do {                                                                                       \
        snprintf(key, sizeof key, "%s_%s", prefix, suffix);                                    \
        json_object_set_new(gates, key, json_boolean(cond));                                   \
    } while (0)
    GATE("warp_size_32", k->warp_size == 32);
    GATE("launchable_threads_ge_256", k->max_threads_per_block >= 256);
    GATE("dispatched_256_threads_8_warps", k->threads_dispatched == 256 && k->warps_dispatched == 8);
    if (staged) {
        char dyn[48];
        snprintf(dyn, sizeof dyn, "dynamic_shared_%" PRId64, staged);
        GATE(dyn, (int64_t)k->dynamic_shared_bytes == staged);
        char within[48];
        snprintf(within, sizeof within, "shared_within_%" PRId64, budget);
        GATE(within,
             (int64_t)k->static_shared_bytes + (int64_t)k->dynamic_shared_bytes <= budget);
    } else {
        GATE("no_dynamic_shared", k->dynamic_shared_bytes == 0);
        GATE("shared_within_32768", k->static_shared_bytes + k->dynamic_shared_bytes <= 32768);
    }
    GATE("zero_local_bytes", k->local_bytes == 0);
    if (want_blocks > 1)
        GATE("two_blocks_per_sm", k->max_active_blocks_per_sm >= want_blocks);
    else
        GATE("resident", k->max_active_blocks_per_sm >= 1);
#undef GATE
}

/* Whether kernels [from, from + n) have 32-lane warps, a resident block, a launch within what
 * they can take, and no local memory (the baseline's gate). ks (from + n). */
static int launchable_no_local(const gem_cuda_kernel_info *ks, size_t from, size_t n)
{
    int ok = 1;
    for (size_t i = from; i < from + n; i++)
        ok &= ks[i].warp_size == 32 && ks[i].max_active_blocks_per_sm >= 1 &&
              ks[i].threads_dispatched <= ks[i].max_threads_per_block && ks[i].local_bytes == 0;
    return ok;
}

static int write_ceilings(const char *path, gem_engine *e, const gem_cuda_device_info *dev,
                          size_t bytes, int64_t reps)
{
    double read_bps = 0, copy_bps = 0, nominal = 0;
    cli_progress("measuring read bandwidth over %zu bytes (%" PRId64 " reps)", bytes, reps);
    if (gem_engine_read_bandwidth(e, bytes, reps, &read_bps) != GEM_OK) {
        cli_error(CMD, "read bandwidth measurement failed");
        return 2;
    }
    cli_progress("measuring device-to-device copy bandwidth over %zu bytes", bytes);
    if (gem_engine_copy_bandwidth(e, bytes, reps, &copy_bps) != GEM_OK ||
        gem_engine_nominal_bandwidth(e, &nominal) != GEM_OK) {
        cli_error(CMD, "copy or nominal bandwidth measurement failed");
        return 2;
    }
    json_t *doc = gem_receipt_new("gem.ceilings.v2", "gem resources", cli_git_commit());
    if (!doc)
        return 2;
    json_object_set_new(doc, "device",
                        json_pack("{s:s, s:i, s:i, s:i, s:i, s:i}", "name", dev->name, "major",
                                  dev->major, "minor", dev->minor, "sm_count", dev->sm_count,
                                  "memory_clock_khz", dev->memory_clock_khz, "memory_bus_bits",
                                  dev->memory_bus_bits));
    json_object_set_new(
        doc, "read",
        json_pack("{s:s, s:I, s:I, s:o}", "method",
                  "best of the read-probe configurations (16-byte loads in flight per thread x "
                  "blocks per SM), each a median after one warm-up",
                  "bytes", (json_int_t)bytes, "reps", (json_int_t)reps, "bytes_per_second",
                  gem_receipt_real(read_bps)));
    json_object_set_new(
        doc, "copy",
        json_pack("{s:s, s:I, s:I, s:o}", "method",
                  "cudaMemcpyAsync device to device, bytes read + written, median", "bytes",
                  (json_int_t)bytes, "reps", (json_int_t)reps, "bytes_per_second",
                  gem_receipt_real(copy_bps)));
    json_object_set_new(doc, "nominal",
                        json_pack("{s:s, s:o}", "method",
                                  "2 x memory clock x bus width / 8 (cudaDeviceGetAttribute)",
                                  "bytes_per_second", gem_receipt_real(nominal)));
    char why[256];
    const gem_status st = gem_receipt_save(path, doc, why, sizeof why);
    json_decref(doc);
    if (st != GEM_OK) {
        cli_error(CMD, "cannot write '%s': %s", path, why);
        return 2;
    }
    printf("read bandwidth %.1f GB/s (%.1f%% of the nominal %.1f GB/s), copy bandwidth %.1f GB/s "
           "-> %s\n",
           read_bps * 1e-9, 100.0 * read_bps / nominal, nominal * 1e-9, copy_bps * 1e-9, path);
    return 0;
}

int gem_cmd_resources(int argc, char **argv)
{
    const char *out = "resources.json", *ceilings = NULL;
    int64_t live = 131072, bw_bytes = (int64_t)1 << 32, reps = 20;
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!val) {
            cli_error(CMD, "'%s' is unknown or needs a value (see --help)", a);
            return 2;
        }
        if (!strcmp(a, "--out")) {
            out = val;
        } else if (!strcmp(a, "--ceilings")) {
            ceilings = val;
        } else if (!strcmp(a, "--live")) {
            if (cli_parse_i64_list(val, 1, (int64_t)1 << 24, &live, 1, &(size_t){0})) {
                cli_error(CMD, "--live wants a token count in [1, 16M], got '%s'", val);
                return 2;
            }
        } else if (!strcmp(a, "--bandwidth-bytes")) {
            if (cli_parse_i64(val, (int64_t)1 << 20, (int64_t)1 << 40, &bw_bytes)) {
                cli_error(CMD, "--bandwidth-bytes wants an integer in [2^20, 2^40], got '%s'",
                          val);
                return 2;
            }
        } else if (!strcmp(a, "--reps")) {
            if (cli_parse_i64(val, 1, 1000, &reps)) {
                cli_error(CMD, "--reps wants an integer in [1, 1000], got '%s'", val);
                return 2;
            }
        } else {
            cli_error(CMD, "unknown option '%s' (see --help)", a);
            return 2;
        }
    }
    /* outputs checked before any work; the two receipts must be two files */
    if (cli_check_output(CMD, "--out", out, NULL, 0) ||
        (ceilings && cli_check_output(CMD, "--ceilings", ceilings, &out, 1)))
        return 2;

    gem_cuda_device_info dev;
    gem_engine *e = NULL;
    if (gem_cuda_device_query(&dev) != GEM_OK ||
        gem_engine_create(GEM_BACKEND_CUDA, 0, &e) != GEM_OK) {
        cli_error(CMD, "no GPU: the resource receipt needs a CUDA device (sm_90)");
        return 2;
    }
    const int64_t n_kv = CLI_NKV;
    const gem_decode_shape shape = {CLI_NQ, CLI_NKV, CLI_D, CLI_D, 1.0f};
    gem_decode_config cfg;
    gem_status st = gem_decode_config_default(gem_engine_ctx(e), &shape, live, &cfg);
    gem_cuda_kernel_info ks[RES_KERNELS];
    size_t nk = 0;
    gem_online_scratch sc;
    if (st == GEM_OK)
        st = gem_cuda_kernel_query(n_kv, live, cfg.partitions, 16, ks, RES_KERNELS, &nk);
    if (st == GEM_OK)
        st = gem_attention_online_scratch_bytes(cfg.partitions, CLI_NQ, CLI_D, &sc);
    if (st != GEM_OK) {
        cli_error(CMD, "kernel query failed: %s", gem_status_str(st));
        gem_engine_destroy(e);
        return 2;
    }
    /* every gate below reads its kernel by its place in the v10 list */
    if (nk != RES_KERNELS) {
        cli_error(CMD, "the library lists %zu kernels, gem.resources.v10 describes %d", nk,
                  RES_KERNELS);
        gem_engine_destroy(e);
        return 2;
    }

    json_t *doc = gem_receipt_new("gem.resources.v10", "gem resources", cli_git_commit());
    json_t *sources = sources_json();
    json_t *binary = binary_json();
    if (!doc || !sources || !binary) {
        json_decref(doc);
        json_decref(sources);
        json_decref(binary);
        gem_engine_destroy(e);
        return 2;
    }
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", dev.major, dev.minor);
    json_object_set_new(
        doc, "device",
        json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:i}", "name", dev.name,
                  "compute_capability", cc, "major", dev.major, "minor", dev.minor, "sm_count",
                  dev.sm_count, "warp_size", dev.warp_size, "shared_mem_per_block",
                  (json_int_t)dev.shared_mem_per_block, "shared_mem_per_block_optin",
                  (json_int_t)dev.shared_mem_per_block_optin, "shared_mem_per_sm",
                  (json_int_t)dev.shared_mem_per_sm, "regs_per_sm", dev.regs_per_sm));
    json_object_set_new(doc, "geometry",
                        json_pack("{s:I, s:I, s:i, s:i, s:I, s:s, s:I, s:I, s:s, s:i}",
                                  "n_q_heads", (json_int_t)CLI_NQ, "n_kv_heads", (json_int_t)n_kv,
                                  "dk", CLI_D, "dv", CLI_D, "live", (json_int_t)live, "config",
                                  "default", "partitions", (json_int_t)cfg.partitions, "tile",
                                  (json_int_t)cfg.tile, "dtype", "f32", "window", 0));
    json_object_set_new(doc, "scratch",
                        json_pack("{s:I, s:I, s:I, s:I}", "maxima_bytes",
                                  (json_int_t)sc.maxima_bytes, "denominators_bytes",
                                  (json_int_t)sc.denominators_bytes, "numerators_bytes",
                                  (json_int_t)sc.numerators_bytes, "total_bytes",
                                  (json_int_t)sc.total_bytes));
    json_t *karr = json_array();
    for (size_t i = 0; i < nk; i++) {
        json_array_append_new(karr, kernel_json(&ks[i]));
        cli_progress("%-24s %-18s regs %3d, static %5zu B, dynamic %6zu B, local %zu B, "
                     "%d blocks/SM, grid %" PRId64,
                     ks[i].name, ks[i].role, ks[i].registers, ks[i].static_shared_bytes,
                     ks[i].dynamic_shared_bytes, ks[i].local_bytes, ks[i].max_active_blocks_per_sm,
                     ks[i].grid_blocks);
    }
    json_object_set_new(doc, "kernels", karr);
    json_object_set_new(doc, "sources", sources);
    json_object_set_new(doc, "binary", binary);

    json_t *gates = json_object();
    json_object_set_new(gates, "device_compute_capability_9_0",
                        json_boolean(dev.major == 9 && dev.minor == 0 && dev.warp_size == 32));
    json_object_set_new(gates, "geometry_d512_default_fused_tile8_f32_no_window",
                        json_boolean(cfg.route == GEM_ROUTE_FUSED && cfg.tile == 8));
    json_object_set_new(gates, "scratch_contract",
                        json_boolean(sc.maxima_bytes == (size_t)cfg.partitions * CLI_NQ * 4 &&
                                     sc.denominators_bytes == (size_t)cfg.partitions * CLI_NQ * 4 &&
                                     sc.numerators_bytes ==
                                         (size_t)cfg.partitions * CLI_NQ * CLI_D * 4 &&
                                     sc.total_bytes == sc.maxima_bytes + sc.denominators_bytes +
                                                           sc.numerators_bytes));
    /* every first pass (D512 per element type, dense and strided rows, K from V; D256 per
     * element type): the default P of each shape assumes two resident blocks per SM */
    for (size_t i = 0; i < GEM_CUDA_FIRST_PASSES; i++)
        fused_gates(gates, ks[i].role + strlen("fused_"), &ks[i], 2, staged_bytes(ks[i].role),
                    staged_budget(ks[i].role));
    fused_gates(gates, "reducer", &ks[GEM_CUDA_FIRST_PASSES], 1, 0, 0);
    json_object_set_new(gates, "baseline_kernels_launchable_no_local",
                        json_boolean(launchable_no_local(ks, GEM_CUDA_FIRST_PASSES + 1,
                                                         GEM_CUDA_BASELINE_KERNELS)));
    {
        /* the long BF16 K-from-V first pass: its own launch and budget, two blocks an SM */
        const gem_cuda_kernel_info *k = &ks[RES_LONG_BF16];
        json_object_set_new(gates, "first_pass_kfv_bf16_long_warp_size_32",
                            json_boolean(k->warp_size == 32));
        json_object_set_new(gates, "first_pass_kfv_bf16_long_launchable_threads_ge_128",
                            json_boolean(k->max_threads_per_block >= 128));
        json_object_set_new(gates, "first_pass_kfv_bf16_long_dispatched_128_threads_4_warps",
                            json_boolean(k->threads_dispatched == 128 && k->warps_dispatched == 4));
        json_object_set_new(gates, "first_pass_kfv_bf16_long_dynamic_shared_109952",
                            json_boolean(k->dynamic_shared_bytes == KFV_LONG_DYNAMIC_SHARED));
        json_object_set_new(gates, "first_pass_kfv_bf16_long_shared_within_114688",
                            json_boolean(k->static_shared_bytes + k->dynamic_shared_bytes <=
                                         KFV_LONG_SHARED_BUDGET));
        json_object_set_new(gates, "first_pass_kfv_bf16_long_zero_local_bytes",
                            json_boolean(k->local_bytes == 0));
        json_object_set_new(gates, "first_pass_kfv_bf16_long_two_blocks_per_sm",
                            json_boolean(k->max_active_blocks_per_sm >= 2));
    }
    {
        /* the long F32 K-from-V first pass: its own launch and budget, resident */
        const gem_cuda_kernel_info *k = &ks[RES_LONG_F32];
        json_object_set_new(gates, "first_pass_kfv_f32_long_warp_size_32",
                            json_boolean(k->warp_size == 32));
        json_object_set_new(gates, "first_pass_kfv_f32_long_launchable_threads_ge_320",
                            json_boolean(k->max_threads_per_block >= 320));
        json_object_set_new(gates, "first_pass_kfv_f32_long_dispatched_320_threads_10_warps",
                            json_boolean(k->threads_dispatched == 320 && k->warps_dispatched == 10));
        json_object_set_new(gates, "first_pass_kfv_f32_long_dynamic_shared_221696",
                            json_boolean(k->dynamic_shared_bytes == KFV_F32_LONG_DYNAMIC_SHARED));
        json_object_set_new(gates, "first_pass_kfv_f32_long_shared_within_232448",
                            json_boolean(k->static_shared_bytes + k->dynamic_shared_bytes <=
                                         KFV_F32_LONG_SHARED_BUDGET));
        json_object_set_new(gates, "first_pass_kfv_f32_long_zero_local_bytes",
                            json_boolean(k->local_bytes == 0));
        json_object_set_new(gates, "first_pass_kfv_f32_long_resident",
                            json_boolean(k->max_active_blocks_per_sm >= 1));
    }
    /* the FP8 first passes (D512, E4M3 codes kept FP8 in shared memory): the staged BF16 / F16
     * passes' launch, their own bytes and budget, two blocks an SM like every first pass */
    for (size_t i = RES_FP8; i < RES_BASELINE_TYPED; i++)
        fused_gates(gates, ks[i].role + strlen("fused_"), &ks[i], 2, staged_bytes(ks[i].role),
                    staged_budget(ks[i].role));
    /* the baseline's score and value of BF16, F16 and FP8 caches: the F32 stages' gate */
    json_object_set_new(gates, "baseline_typed_kernels_launchable_no_local",
                        json_boolean(launchable_no_local(ks, RES_BASELINE_TYPED,
                                                         GEM_CUDA_BASELINE_TYPED_KERNELS)));
    int all = 1;
    const char *k;
    json_t *v;
    json_object_foreach(gates, k, v)
    {
        if (!json_is_true(v)) {
            all = 0;
            fprintf(stderr, "gem resources: gate %s failed\n", k);
        }
    }
    json_object_set_new(doc, "gates", gates);
    json_object_set_new(doc, "verdict", json_string(all ? "pass" : "fail"));
    char why[256];
    st = gem_receipt_save(out, doc, why, sizeof why);
    json_decref(doc);
    if (st != GEM_OK) {
        cli_error(CMD, "cannot write '%s': %s", out, why);
        gem_engine_destroy(e);
        return 2;
    }
    printf("resources: %s, default at %" PRId64 " tokens: fused P=%" PRId64 ", tile %" PRId64
           "; verdict %s -> %s\n",
           dev.name, live, cfg.partitions, cfg.tile, all ? "pass" : "fail", out);
    int rc = all ? 0 : 1;
    if (ceilings) {
        const int crc = write_ceilings(ceilings, e, &dev, (size_t)bw_bytes, reps);
        if (crc)
            rc = crc;
    }
    gem_engine_destroy(e);
    return rc;
}
