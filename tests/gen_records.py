#!/usr/bin/env python3
"""Writes good, hand-made input records for the analyzer tests.

usage: gen_records.py GEM OUTDIR [what ...]
  what: resources, resources-v2, resources-v3, resources-v4, resources-v5, resources-v6,
        resources-v7, resources-v8, resources-v9, resources-v10,
        resources-dev, diffs,
        models, profiles (default: all)

resources  OUTDIR/root/src/cuda/attn_fused.cu, OUTDIR/root/build/gem (stand-in
           files) and OUTDIR/resources.json, a gem.resources.v1 receipt that
           meets every rule of docs/gates.md, bound to those files' digests.
resources-v2   OUTDIR/root-v2/src/cuda/{attn_fused.cu, attn_fused_body.cuh,
           gem_cuda_internal.h}, OUTDIR/root-v2/build/gem and
           OUTDIR/resources-v2.json: a gem.resources.v2 receipt (the kernels the
           library ships: twelve first passes at two blocks per SM - F32, BF16 and
           F16 caches with dense and strided rows, the three that rebuild K from
           V, and the three D256 ones of the sliding-window layers - the reducer,
           the baseline's four) at the default P of a 132-SM device (64).
resources-v3   the same under root-v3/ and OUTDIR/resources-v3.json, a
           gem.resources.v3 receipt: the two BF16 first passes with 66,560 bytes
           of dynamic shared memory (their tiles staged there) and their gates.
resources-v4   the same under root-v4/ and OUTDIR/resources-v4.json, a
           gem.resources.v4 receipt: the two F16 first passes staged too.
resources-v5   the same under root-v5/ and OUTDIR/resources-v5.json, a
           gem.resources.v5 receipt: the BF16 and F16 K-from-V first passes staged
           in 33,280 bytes too.
resources-v6   the same under root-v6/ and OUTDIR/resources-v6.json, a
           gem.resources.v6 receipt: and the long BF16 K-from-V first pass last.
resources-v7   the same under root-v7/ and OUTDIR/resources-v7.json, a
           gem.resources.v7 receipt: and the long F32 K-from-V first pass after it.
resources-v8   the same under root-v8/ and OUTDIR/resources-v8.json, a
           gem.resources.v8 receipt: and the two FP8 first passes (dense, strided)
           after it, staged in 66,560 bytes like the BF16 and F16 ones.
resources-v9   the same under root-v9/ and OUTDIR/resources-v9.json, a
           gem.resources.v9 receipt: v8's kernels, the two FP8 first passes
           keeping their codes FP8 in shared memory (67,584 dynamic bytes beside
           17,792 static ones, within 98,304).
resources-v10  the same under root-v10/ and OUTDIR/resources-v10.json, a
           gem.resources.v10 receipt: v9's kernels, then the baseline's score and
           value kernels of BF16, F16 and FP8 E4M3 caches and their one gate.
resources-dev  OUTDIR/root-dev/dev/cuda/fused_decode.cu, OUTDIR/root-dev/
           build/fused_decode and OUTDIR/resources-dev.json: the design
           candidate's gem.resources.v1 receipt as dev/cuda/fused_decode.cu's
           version 1 writes it.
diffs      OUTDIR/diff-<L>.json, gem.diff.v1 records at the five positions; the
           input digests come from `GEM analyze input-digests`, so they are the
           real digests of the seeded inputs.
models     OUTDIR/model-<C>.json, gem.model_diff.v1 records at 8191/8192/8193.
profiles   OUTDIR/profile-64k.json, profile-128k.json: gem.stage_profile.v1
           built from the design's stage figures (64K: score 3.12, normalize
           0.11, value 2.65 ms; 128K: 6.20, 0.33, 5.38 ms; reduce folded into
           value, so 0 ms) with a whole-token time chosen so that the ten
           global-attention calls take 33.11% / 43.73% of it. Three
           repetitions of five samples, jittered by a fixed +-1% pattern whose
           median is the design figure.
Figures in these records are invented to be consistent; only the digests of
seeded inputs and files are real.
"""
import hashlib
import json
import os
import struct
import subprocess
import sys

TOOL = {"version": "0.1.0", "git_commit": "0" * 40}
POSITIONS = [8191, 8192, 8193, 65536, 131072]


def write(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def sha_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tool(name):
    return dict(name=name, **TOOL)


def stand_in_tree(root, src_dir, sources, binary):
    """Stand-in sources and an ELF-headed binary under root; their entries."""
    os.makedirs(os.path.join(root, src_dir), exist_ok=True)
    os.makedirs(os.path.join(root, os.path.dirname(binary)), exist_ok=True)
    entries = []
    for name in sorted(sources):
        rel = src_dir + "/" + name
        with open(os.path.join(root, rel), "w") as f:
            f.write("// stand-in " + name + " for the resource analyzer tests\n")
        entries.append({"path": rel, "sha256": sha_file(os.path.join(root, rel))})
    with open(os.path.join(root, binary), "wb") as f:
        f.write(b"\x7fELF stand-in binary\n")
    return entries, {"path": binary, "sha256": sha_file(os.path.join(root, binary))}


def kernel(name, role, threads, dyn, static=1024, regs=64):
    # max_active_blocks_per_sm as a CC 9.0 device computes it: the least of
    # 32 blocks, 2048 threads, the registers (per warp, in units of 256) and
    # the shared memory (plus 1 KiB reserved per block) of an SM.
    warps = threads // 32
    per_warp = -(-regs * 32 // 256) * 256
    active = min(32, 2048 // threads, 65536 // (warps * per_warp),
                 233472 // (static + dyn + 1024))
    return {"name": name, "role": role, "max_threads_per_block": 1024,
            "static_shared_bytes": static, "dynamic_shared_bytes": dyn,
            "registers": regs, "local_bytes": 0, "threads_dispatched": threads,
            "warps_dispatched": warps, "warp_size": 32,
            "max_active_blocks_per_sm": active}


DEVICE = {"name": "NVIDIA H200", "compute_capability": "9.0", "major": 9, "minor": 0,
          "sm_count": 132, "warp_size": 32, "shared_mem_per_block": 49152,
          "shared_mem_per_block_optin": 232448, "shared_mem_per_sm": 233472,
          "regs_per_sm": 65536}
BASELINE = [kernel("gem_baseline_score", "baseline_score", 256, 0),
            kernel("gem_baseline_normalize", "baseline_normalize", 1024, 0, regs=32),
            kernel("gem_baseline_value", "baseline_value", 256, 0),
            kernel("gem_baseline_reduce", "baseline_reduce", 256, 0)]


def kernel_gates(prefix, dyn_gate, resident_gate, shared_gate="shared_within_32768"):
    """A fused kernel's seven gate names, as the producers spell them."""
    return [prefix + "_" + g for g in ("warp_size_32", "launchable_threads_ge_256",
                                       "dispatched_256_threads_8_warps", dyn_gate,
                                       shared_gate, "zero_local_bytes",
                                       resident_gate)]


def resources_v1_doc(tool_name, reducer, sources, binary):
    gates = ["device_compute_capability_9_0", "geometry_d512_p32_tile4_f32_no_window",
             "scratch_contract_2105344"]
    gates += kernel_gates("first_pass", "dynamic_shared_16384", "resident")
    gates += kernel_gates("reducer", "no_dynamic_shared", "resident")
    gates.append("baseline_kernels_launchable_no_local")
    return {
        "schema": "gem.resources.v1", "tool": tool(tool_name), "device": DEVICE,
        "geometry": {"n_q_heads": 32, "n_kv_heads": 4, "dk": 512, "dv": 512,
                     "partitions": 32, "tile": 4, "dtype": "f32", "window": 0},
        "scratch": {"maxima_bytes": 4096, "denominators_bytes": 4096,
                    "numerators_bytes": 2097152, "total_bytes": 2105344},
        "kernels": [kernel("gem_fused_first_pass_t4_s1_v0", "fused_first_pass", 256, 16384),
                    kernel(reducer, "fused_reducer", 256, 0)] + BASELINE,
        "sources": sources, "binary": binary,
        "gates": {g: True for g in gates}, "verdict": "pass",
    }


def resources_dev(out):
    sources, binary = stand_in_tree(os.path.join(out, "root-dev"), "dev/cuda",
                                    ["fused_decode.cu", "kv_dtypes.cu", "read_probe.cu"],
                                    "build/fused_decode")
    write(os.path.join(out, "resources-dev.json"),
          resources_v1_doc("dev/cuda/fused_decode version 1", "gem_fused_reducer_v1",
                           sources, binary))


# the first passes staged in 66,560 dynamic bytes of shared memory, by schema version
STAGED = {2: (), 3: ("first_pass_bf16", "first_pass_bf16_strided"),
          4: ("first_pass_bf16", "first_pass_bf16_strided", "first_pass_f16",
              "first_pass_f16_strided")}
STAGED[5] = STAGED[4]
STAGED[6] = STAGED[4]
STAGED[7] = STAGED[4]
# the K-from-V first passes staged in 33,280 dynamic bytes (V tiles alone), by schema version
KFV_STAGED = {5: ("first_pass_k_from_v_bf16", "first_pass_k_from_v_f16")}
KFV_STAGED[6] = KFV_STAGED[5]
KFV_STAGED[7] = KFV_STAGED[5]
LONG_GATES = ["first_pass_kfv_bf16_long_" + g for g in (
    "warp_size_32", "launchable_threads_ge_128", "dispatched_128_threads_4_warps",
    "dynamic_shared_109952", "shared_within_114688", "zero_local_bytes", "two_blocks_per_sm")]
F32_LONG_GATES = ["first_pass_kfv_f32_long_" + g for g in (
    "warp_size_32", "launchable_threads_ge_320", "dispatched_320_threads_10_warps",
    "dynamic_shared_221696", "shared_within_232448", "zero_local_bytes", "resident")]
# the FP8 E4M3 first passes (v8, after the long ones): the staged body, its contract and gates
FP8_PASSES = ["first_pass_fp8", "first_pass_fp8_strided"]
STAGED[8] = STAGED[4]
KFV_STAGED[8] = KFV_STAGED[5]
# v9: v8's kernels; the FP8 passes keep their codes FP8 in shared memory, 32-token tiles
STAGED[9] = STAGED[4]
KFV_STAGED[9] = KFV_STAGED[5]
# the FP8 passes' dynamic bytes, static bytes and budget, by schema version (v8 or v9)
FP8_SHARED = {8: (66560, 12928, 81920), 9: (67584, 17792, 98304)}
# v10: v9's kernels, then the baseline's score and value kernels of the other cache types
STAGED[10] = STAGED[4]
KFV_STAGED[10] = KFV_STAGED[5]
FP8_SHARED[10] = FP8_SHARED[9]
BASELINE_TYPED = [kernel("gem_baseline_%s_%s" % (stage, t), "baseline_%s_%s" % (stage, t), 256, 0)
                  for stage in ("score", "value") for t in ("bf16", "f16", "fp8")]


def resources_v2(out, version=2):
    """gem.resources.v2, v3 (the two BF16 first passes staged in shared memory), v4 (the
    two F16 ones too), v5 (and the BF16 and F16 K-from-V ones in 33,280 bytes), v6 (and the
    long BF16 K-from-V one after the baseline's kernels: 128 threads, 109,952 bytes), v7 (and
    the long F32 K-from-V one after it: 320 threads, 221,696 bytes), v8 (and the two FP8
    first passes after it, staged in 66,560 bytes), v9 (the FP8 passes in 67,584 bytes
    within 98,304) or v10 (and the baseline's six kernels of the other cache types last)."""
    root = "root-v%d" % version
    sources, binary = stand_in_tree(os.path.join(out, root), "src/cuda",
                                    ["attn_fused.cu", "attn_fused_body.cuh",
                                     "gem_cuda_internal.h"], "build/gem")
    passes = ["first_pass", "first_pass_strided", "first_pass_bf16", "first_pass_bf16_strided",
              "first_pass_f16", "first_pass_f16_strided", "first_pass_k_from_v",
              "first_pass_k_from_v_bf16", "first_pass_k_from_v_f16", "first_pass_d256",
              "first_pass_d256_bf16", "first_pass_d256_f16"]
    gates = ["device_compute_capability_9_0",
             "geometry_d512_default_fused_tile8_f32_no_window", "scratch_contract"]
    for fp in passes:
        if fp in STAGED[version]:
            gates += kernel_gates(fp, "dynamic_shared_66560", "two_blocks_per_sm",
                                  "shared_within_81920")
        elif fp in KFV_STAGED.get(version, ()):
            gates += kernel_gates(fp, "dynamic_shared_33280", "two_blocks_per_sm",
                                  "shared_within_81920")
        else:
            gates += kernel_gates(fp, "no_dynamic_shared", "two_blocks_per_sm")
    gates += kernel_gates("reducer", "no_dynamic_shared", "resident")
    gates.append("baseline_kernels_launchable_no_local")
    if version >= 6:
        gates += LONG_GATES
    if version >= 7:
        gates += F32_LONG_GATES
    if version >= 8:
        fp8_dyn, fp8_static, fp8_budget = FP8_SHARED[version]
        for fp in FP8_PASSES:
            gates += kernel_gates(fp, "dynamic_shared_%d" % fp8_dyn, "two_blocks_per_sm",
                                  "shared_within_%d" % fp8_budget)
    if version >= 10:
        gates.append("baseline_typed_kernels_launchable_no_local")
    # P = 64 on 132 SMs: two blocks per SM over 4 KV heads, down to a multiple of 32
    doc = {
        "schema": "gem.resources.v%d" % version, "tool": tool("gem resources"), "device": DEVICE,
        "geometry": {"n_q_heads": 32, "n_kv_heads": 4, "dk": 512, "dv": 512, "live": 131072,
                     "config": "default", "partitions": 64, "tile": 8, "dtype": "f32",
                     "window": 0},
        "scratch": {"maxima_bytes": 8192, "denominators_bytes": 8192,
                    "numerators_bytes": 4194304, "total_bytes": 4210688},
        "kernels": [kernel("gem_" + "fused_" + fp, "fused_" + fp, 256, 66560, static=12928,
                           regs=128) if fp in STAGED[version] else
                    kernel("gem_" + "fused_" + fp, "fused_" + fp, 256, 33280, static=27264,
                           regs=128) if fp in KFV_STAGED.get(version, ()) else
                    kernel("gem_" + "fused_" + fp, "fused_" + fp, 256, 0, static=17696,
                           regs=127) for fp in passes] +
                   [kernel("gem_fused_reducer", "fused_reducer", 256, 0)] + BASELINE +
                   ([kernel("gem_fused_first_pass_k_from_v_bf16_long",
                            "fused_first_pass_kfv_bf16_long", 128, 109952, static=1024,
                            regs=254)] if version >= 6 else []) +
                   ([kernel("gem_fused_first_pass_k_from_v_f32_long",
                            "fused_first_pass_kfv_f32_long", 320, 221696, static=1024,
                            regs=168)] if version >= 7 else []) +
                   ([kernel("gem_fused_" + fp, "fused_" + fp, 256, fp8_dyn, static=fp8_static,
                            regs=128) for fp in FP8_PASSES] if version >= 8 else []) +
                   (BASELINE_TYPED if version >= 10 else []),
        "sources": sources, "binary": binary,
        "gates": {g: True for g in gates}, "verdict": "pass",
    }
    write(os.path.join(out, "resources-v%d.json" % version), doc)


def resources(out):
    root = os.path.join(out, "root")
    sources, binary = stand_in_tree(root, "src/cuda", ["attn_fused.cu"], "build/gem")
    write(os.path.join(out, "resources.json"),
          resources_v1_doc("gem resources", "gem_fused_reducer", sources, binary))


def compare(corr, nmse, max_abs):
    return {"n": 16384, "nonfinite": 0, "correlation": corr, "nmse": nmse, "max_abs": max_abs}


# 1/sqrt(512) rounded to float, as a double: the scale of the design's differentials.
DESIGN_SCALE = struct.unpack("f", struct.pack("f", 512 ** -0.5))[0]


def diffs(gem, out, seed=1, scale=DESIGN_SCALE):
    for live in POSITIONS:
        dig = json.loads(subprocess.check_output(
            [gem, "analyze", "input-digests", "--live", str(live), "--seed", str(seed),
             "--scale", repr(scale)]))
        doc = {
            "schema": "gem.diff.v1", "tool": tool("gem diff"),
            "case_id": "diff-cpu-fused_p32_t4-vs-baseline_p16-live%d-f32-seed%d" % (live, seed),
            "backend": "cpu", "device": "test CPU, 2 threads", "threads": 2,
            "geometry": {"n_q_heads": 32, "n_kv_heads": 4, "dk": 512, "dv": 512,
                         "live": live, "capacity": live, "scale": scale, "dtype": "f32",
                         "window": 0},
            "reference_route": {"route": "baseline", "partitions": 16, "tile": 0},
            "candidate_route": {"route": "fused", "partitions": 32, "tile": 4},
            "seeds": {"run": str(seed), "q": str(seed ^ 0x51), "k": str(seed ^ 0x4B),
                      "v": str(seed ^ 0x56)},
            "input_sha256": dig,
            "output_sha256": {"reference": "1" * 64, "candidate": "2" * 64},
            "repeat_deterministic": {"reference": True, "candidate": True},
            "finite": {"reference": True, "candidate": True},
            "unwritten": {"reference": 0, "candidate": 0},
            "guard_ok": {"reference": True, "candidate": True},
            "candidate_vs_reference": compare(0.9999999999, 2e-12, 3e-7),
            "reference_vs_double": compare(0.9999999999, 1e-12, 2e-7),
            "candidate_vs_double": compare(0.9999999999, 1e-12, 2e-7),
            "thresholds": {"min_correlation": 0.9999, "max_nmse": 1e-4},
            "verdict": "pass",
        }
        write(os.path.join(out, "diff-%d.json" % live), doc)


def models(out):
    for i, ctx in enumerate([8191, 8192, 8193]):
        top = [1000 + 7 * i + j for j in range(10)]
        greedy = [2000 + 3 * j + i for j in range(12)]
        doc = {
            "schema": "gem.model_diff.v1", "tool": tool("gem model-diff"),
            "case_id": "model-gemma-4-31b-q4-boundary-%d-ctx%d" % (i, ctx),
            "model": {"name": "gemma-4-31b-q4", "n_layers": 60,
                      "global_layers": [6 * k + 5 for k in range(10)],
                      "global_geometry": {"n_q_heads": 32, "n_kv_heads": 4, "dk": 512,
                                          "dv": 512, "dtype": "f32", "window": 0},
                      "weights_sha256": "3" * 64},
            "prompt": {"id": "boundary-%d" % i, "sha256": "%064x" % (i + 10),
                       "context_tokens": ctx},
            "selection": {"production_before": "baseline", "production_after": "baseline",
                          "baseline_route": "baseline", "candidate_route": "fused"},
            "baseline": {"argmax": top[0], "top10": top, "logits_sha256": "4" * 64},
            "candidate": {"argmax": top[0], "top10": top, "logits_sha256": "5" * 64,
                          "logits_sha256_repeat": "5" * 64},
            "greedy": {"steps": 12, "baseline_tokens": greedy, "candidate_tokens": greedy},
            "verdict": "pass",
        }
        write(os.path.join(out, "model-%d.json" % ctx), doc)


JITTER = [0.99, 1.0, 1.01, 0.995, 1.005]   # median 1.0 over any whole number of repetitions


def samples_text(doc):
    series = [("score", doc["stages_ms"]["score"]), ("normalize", doc["stages_ms"]["normalize"]),
              ("value", doc["stages_ms"]["value"]), ("reduce", doc["stages_ms"]["reduce"]),
              ("attention_total_ms", doc["attention_total_ms"]),
              ("whole_token_ms", doc["whole_token_ms"])]
    return "".join("%s:%s\n" % (n, ",".join("%.17g" % float(x) for x in v)) for n, v in series)


def profile(out, name, context, stages, share):
    reps, per = 3, 5
    attn = stages[0] + stages[1] + stages[2] + stages[3]
    whole = 10.0 * attn / share
    st = {k: [] for k in ("score", "normalize", "value", "reduce")}
    tot, wt = [], []
    for _ in range(reps):
        for j in JITTER:
            vals = [s * j for s in stages]
            for k, v in zip(("score", "normalize", "value", "reduce"), vals):
                st[k].append(v)
            tot.append(vals[0] + vals[1] + vals[2] + vals[3])
            wt.append(whole * j)
    doc = {
        "schema": "gem.stage_profile.v1", "tool": tool("gem profile"),
        "selector": "baseline",
        "geometry": {"n_q_heads": 32, "n_kv_heads": 4, "dk": 512, "dv": 512, "dtype": "f32",
                     "window": 0},
        "model": {"n_layers": 60, "global_attention_calls": 10},
        "context": context, "repetitions": reps, "samples_per_repetition": per,
        "stages_ms": st, "attention_total_ms": tot, "whole_token_ms": wt,
        "samples_sha256": "",
        "provenance": "hand-made from the design's exact-shape stage figures; whole-token "
                      "time chosen so global attention is %.2f%% of it" % (100 * share),
    }
    doc["samples_sha256"] = hashlib.sha256(samples_text(doc).encode()).hexdigest()
    write(os.path.join(out, name), doc)


def profiles(out):
    profile(out, "profile-64k.json", 65536, [3.12, 0.11, 2.65, 0.0], 0.3311)
    profile(out, "profile-128k.json", 131072, [6.20, 0.33, 5.38, 0.0], 0.4373)


def main():
    gem, out = sys.argv[1], sys.argv[2]
    what = sys.argv[3:] or ["resources", "resources-v2", "resources-v3", "resources-v4",
                            "resources-v5", "resources-v6", "resources-v7",
                            "resources-v8", "resources-v9", "resources-v10", "resources-dev",
                            "diffs", "models", "profiles"]
    os.makedirs(out, exist_ok=True)
    for w in what:
        if w == "resources":
            resources(out)
        elif w == "resources-v2":
            resources_v2(out)
        elif w == "resources-v3":
            resources_v2(out, 3)
        elif w == "resources-v4":
            resources_v2(out, 4)
        elif w == "resources-v5":
            resources_v2(out, 5)
        elif w == "resources-v6":
            resources_v2(out, 6)
        elif w == "resources-v7":
            resources_v2(out, 7)
        elif w == "resources-v8":
            resources_v2(out, 8)
        elif w == "resources-v9":
            resources_v2(out, 9)
        elif w == "resources-v10":
            resources_v2(out, 10)
        elif w == "resources-dev":
            resources_dev(out)
        elif w == "diffs":
            diffs(gem, out)
        elif w == "models":
            models(out)
        elif w == "profiles":
            profiles(out)
        else:
            sys.exit("gen_records.py: unknown record kind " + w)


if __name__ == "__main__":
    main()
