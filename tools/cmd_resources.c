/*
 * gem resources: the compiled-resource receipt of the CUDA kernels
 * (schema gem.resources.v1, docs/receipts-resources.md).
 *
 * For the fused first pass and reducer (at --partitions / --tile and the
 * process's GEM_CUDA_FUSED_STAGES / GEM_CUDA_FUSED_VSHARE variant) and the four
 * baseline kernels it records what the CUDA runtime reports
 * (cudaFuncGetAttributes, the occupancy API) and how the route launches them,
 * binds the design geometry and the P=32 scratch contract, digests every
 * src/cuda .cu source and the running binary, and evaluates the design's
 * fixed receipt gates. Exit 0 when every gate holds, 1 when one fails, 2 for
 * bad usage, no GPU or an I/O error.
 *
 * --ceilings FILE also writes a gem.ceilings.v1 receipt: the device's
 * read-only reduction bandwidth and device-to-device copy bandwidth.
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
#include "gem/attn.h"
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
            "Writes the CUDA kernels' compiled-resource receipt (schema gem.resources.v1):\n"
            "device limits, per-kernel registers / shared memory / local bytes / launch\n"
            "threads / resident blocks, the D512 geometry and P=32 scratch contract,\n"
            "SHA-256 of src/cuda/*.cu and of this binary, and the design's gates.\n"
            "Needs a GPU; exits 2 with a 'no GPU' message without one.\n\n"
            "options:\n"
            "  --out FILE           receipt path (default resources.json)\n"
            "  --partitions P       fused partitions to describe (default 32, the design)\n"
            "  --tile T             fused tile, 4, 8 or 16 (default 4, the design)\n"
            "  --ceilings FILE      also measure read and copy bandwidth into FILE\n"
            "                       (schema gem.ceilings.v1)\n"
            "  --bandwidth-bytes N  bytes per bandwidth pass (default 4294967296)\n"
            "  --reps N             bandwidth repetitions, median reported (default 20)\n"
            "  -h, --help           this text\n\n"
            "The fused variant beyond P and tile follows GEM_CUDA_FUSED_STAGES and\n"
            "GEM_CUDA_FUSED_VSHARE (gem/cuda.h); the design's gates hold only for the\n"
            "defaults (1 stage, V per warp) at P=32, tile 4.\n"
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

/* Every .cu file of src/cuda in the source tree, sorted by name. */
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
        const size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".cu") != 0)
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
        cli_error(CMD, "no .cu file in '%s'", dir);
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

/* The design's fixed checks of one fused pipeline. want_dyn: 16,384 for the
 * first pass at tile 4, 0 for the reducer. */
static void fused_gates(json_t *gates, const char *prefix, const gem_cuda_kernel_info *k,
                        size_t want_dyn)
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
    if (want_dyn)
        GATE("dynamic_shared_16384", k->dynamic_shared_bytes == want_dyn);
    else
        GATE("no_dynamic_shared", k->dynamic_shared_bytes == 0);
    GATE("shared_within_32768", k->static_shared_bytes + k->dynamic_shared_bytes <= 32768);
    GATE("zero_local_bytes", k->local_bytes == 0);
    GATE("resident", k->max_active_blocks_per_sm >= 1);
#undef GATE
}

static int write_ceilings(const char *path, const gem_cuda_device_info *dev, size_t bytes,
                          int64_t reps)
{
    double read_bps = 0, copy_bps = 0;
    cli_progress("measuring read bandwidth over %zu bytes (%" PRId64 " reps)", bytes, reps);
    if (gem_cuda_read_bandwidth(bytes, reps, &read_bps) != GEM_OK) {
        cli_error(CMD, "read bandwidth measurement failed");
        return 2;
    }
    cli_progress("measuring device-to-device copy bandwidth over %zu bytes", bytes);
    if (gem_cuda_copy_bandwidth(bytes, reps, &copy_bps) != GEM_OK) {
        cli_error(CMD, "copy bandwidth measurement failed");
        return 2;
    }
    json_t *doc = gem_receipt_new("gem.ceilings.v1", "gem resources", cli_git_commit());
    if (!doc)
        return 2;
    json_object_set_new(doc, "device", json_pack("{s:s, s:i, s:i, s:i}", "name", dev->name,
                                                 "major", dev->major, "minor", dev->minor,
                                                 "sm_count", dev->sm_count));
    json_object_set_new(
        doc, "read",
        json_pack("{s:s, s:I, s:I, s:o}", "method",
                  "read-only float4 reduction kernel, median after one warm-up", "bytes",
                  (json_int_t)bytes, "reps", (json_int_t)reps, "bytes_per_second",
                  gem_receipt_real(read_bps)));
    json_object_set_new(
        doc, "copy",
        json_pack("{s:s, s:I, s:I, s:o}", "method",
                  "cudaMemcpyAsync device to device, bytes read + written, median", "bytes",
                  (json_int_t)bytes, "reps", (json_int_t)reps, "bytes_per_second",
                  gem_receipt_real(copy_bps)));
    const gem_status st = gem_receipt_write(path, doc);
    json_decref(doc);
    if (st != GEM_OK) {
        cli_error(CMD, "cannot write '%s'", path);
        return 2;
    }
    printf("read bandwidth %.1f GB/s, copy bandwidth %.1f GB/s -> %s\n", read_bps * 1e-9,
           copy_bps * 1e-9, path);
    return 0;
}

int gem_cmd_resources(int argc, char **argv)
{
    const char *out = "resources.json", *ceilings = NULL;
    int64_t partitions = 32, tile = 4, bw_bytes = (int64_t)1 << 32, reps = 20;
    for (int i = 1; i < argc; i++) {
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
        } else if (!strcmp(a, "--partitions")) {
            if (cli_parse_i64(val, 1, 65535, &partitions)) {
                cli_error(CMD, "--partitions wants an integer in [1, 65535], got '%s'", val);
                return 2;
            }
        } else if (!strcmp(a, "--tile")) {
            if (cli_parse_i64(val, 4, 16, &tile) || (tile != 4 && tile != 8 && tile != 16)) {
                cli_error(CMD, "--tile wants 4, 8 or 16, got '%s'", val);
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
        i++;
    }

    gem_cuda_device_info dev;
    if (gem_cuda_device_query(&dev) != GEM_OK) {
        cli_error(CMD, "no GPU: the resource receipt needs a CUDA device (sm_90)");
        return 2;
    }
    gem_cuda_fused_config cfg = {partitions, tile, 1, 0};
    if (gem_cuda_fused_config_from_env(&cfg) != GEM_OK)
        return 2;
    const int64_t n_kv = 4, live = 131072;
    gem_cuda_kernel_info ks[6];
    size_t nk = 0;
    gem_status st = gem_cuda_kernel_query(&cfg, n_kv, live, ks, 6, &nk);
    if (st != GEM_OK) {
        cli_error(CMD, "kernel query failed: %s", gem_status_str(st));
        return 2;
    }
    gem_online_scratch sc;
    st = gem_attention_online_scratch_bytes(partitions, n_kv * 8, 512, &sc);
    if (st != GEM_OK) {
        cli_error(CMD, "scratch contract: %s", gem_status_str(st));
        return 2;
    }

    json_t *doc = gem_receipt_new("gem.resources.v1", "gem resources", cli_git_commit());
    json_t *sources = sources_json();
    json_t *binary = binary_json();
    if (!doc || !sources || !binary) {
        json_decref(doc);
        json_decref(sources);
        json_decref(binary);
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
                        json_pack("{s:I, s:I, s:i, s:i, s:I, s:I, s:s, s:i}", "n_q_heads",
                                  (json_int_t)(n_kv * 8), "n_kv_heads", (json_int_t)n_kv, "dk",
                                  512, "dv", 512, "partitions", (json_int_t)partitions, "tile",
                                  (json_int_t)tile, "dtype", "f32", "window", 0));
    json_object_set_new(doc, "scratch",
                        json_pack("{s:I, s:I, s:I, s:I}", "maxima_bytes",
                                  (json_int_t)sc.maxima_bytes, "denominators_bytes",
                                  (json_int_t)sc.denominators_bytes, "numerators_bytes",
                                  (json_int_t)sc.numerators_bytes, "total_bytes",
                                  (json_int_t)sc.total_bytes));
    json_t *karr = json_array();
    for (size_t i = 0; i < nk; i++) {
        json_array_append_new(karr, kernel_json(&ks[i]));
        cli_progress("%-34s %-18s regs %3d, static %5zu B, dynamic %6zu B, local %zu B, "
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
    json_object_set_new(gates, "geometry_d512_p32_tile4_f32_no_window",
                        json_boolean(partitions == 32 && tile == 4));
    json_object_set_new(gates, "scratch_contract_2105344",
                        json_boolean(sc.maxima_bytes == 4096 && sc.denominators_bytes == 4096 &&
                                     sc.numerators_bytes == 2097152 &&
                                     sc.total_bytes == 2105344));
    fused_gates(gates, "first_pass", &ks[0], 16384);
    fused_gates(gates, "reducer", &ks[1], 0);
    int baseline_ok = 1;
    for (size_t i = 2; i < nk; i++)
        baseline_ok &= ks[i].warp_size == 32 && ks[i].max_active_blocks_per_sm >= 1 &&
                       ks[i].threads_dispatched <= ks[i].max_threads_per_block &&
                       ks[i].local_bytes == 0;
    json_object_set_new(gates, "baseline_kernels_launchable_no_local", json_boolean(baseline_ok));
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
    st = gem_receipt_write(out, doc);
    json_decref(doc);
    if (st != GEM_OK) {
        cli_error(CMD, "cannot write '%s'", out);
        return 2;
    }
    printf("resources: %s (P=%" PRId64 ", tile %" PRId64 ", stages %" PRId64 ", vshare %" PRId64
           ") verdict %s -> %s\n",
           dev.name, partitions, tile, cfg.stages, cfg.vshare, all ? "pass" : "fail", out);
    if (ceilings) {
        const int rc = write_ceilings(ceilings, &dev, (size_t)bw_bytes, reps);
        if (rc)
            return rc;
    }
    return all ? 0 : 1;
}
