#!/usr/bin/env bash
# gem analyze resources (analyze-fused-split-kv-resources.sh): a good
# hand-made gem.resources.v1 receipt passes and says only "compilable and
# launchable"; one tampered copy per defect class is rejected with one line:
# structure, the architecture's ranges (so no sum can overflow), the occupancy
# the figures allow, the kernel set and order and their symbols, the exact gate
# names each recomputed, sources sorted and complete, the binary an ELF file,
# and files under --root that are regular and do not leave it.
#   usage: bash test_analyze_resources.sh <gem> <source-dir>
set -euo pipefail
GEM="$1"
SRC="$2"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. "$SRC/tests/analyze_lib.sh"
T="python3 $SRC/tests/tamper.py"
python3 "$SRC/tests/gen_records.py" "$GEM" "$WORK" resources
GOOD="$WORK/resources.json"
ROOT="$WORK/root"
A() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$@" --root "$ROOT"; }

expect_pass good A "$GOOD" --out "$WORK/analysis.json"
check says-only-launchable grep -q "compilable and launchable" "$WORK/out.txt"
check no-promotion-word bash -c "! grep -qi 'promot\|eligib' '$WORK/out.txt' '$WORK/analysis.json'"
check analysis-binds-receipt grep -q "$(sha256sum "$GOOD" | cut -c1-64)" "$WORK/analysis.json"

t() { # t NAME CLASS OP PATH [VALUE]: tamper the good receipt and expect the class
  local name="$1" cls="$2"
  shift 2
  $T "$GOOD" "$WORK/$name.json" "$@"
  expect_fail "$name" "$cls" A "$WORK/$name.json"
}
# multi NAME CLASS PYTHON: edit the parsed receipt `d` with a Python statement
multi() {
  local name="$1" cls="$2" code="$3"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); $code; json.dump(d,open(sys.argv[2],'w'))" \
    "$GOOD" "$WORK/$name.json"
  expect_fail "$name" "$cls" A "$WORK/$name.json"
}

# Structure and types.
t missing "missing field" del scratch.total_bytes
t extra "unexpected field" add device.clock_mhz 1980
t extra-kernel "unexpected field" add kernels.0.occupancy 0.5
t type "wrong type" set kernels.0.threads_dispatched '"256"'
t type-null "wrong type" set device.sm_count null
t type-gate "wrong type" set gates.first_pass_resident '"yes"'
t tool-commit "wrong value" set tool.git_commit '"HEAD\nunknown"'
t tool-version "wrong value" set tool.version '"latest"'
t control-char "wrong value" set device.name '"H200\u001b[2J"'

# Geometry, scratch and the fused launch contract.
t geometry-dk "wrong geometry" set geometry.dk 256
t geometry-p "wrong geometry" set geometry.partitions 64
t geometry-window "wrong geometry" set geometry.window 1024
t geometry-cc "wrong geometry" set device.compute_capability '"8.0"'
t scratch "wrong geometry" set scratch.numerators_bytes 4194304
multi geometry-threads "wrong geometry" \
  'k=d["kernels"][0]; k["threads_dispatched"]=128; k["warps_dispatched"]=4'
t geometry-dyn "wrong geometry" set kernels.0.dynamic_shared_bytes 32768
t geometry-reducer-dyn "wrong geometry" set kernels.1.dynamic_shared_bytes 4096
t geometry-warp "wrong geometry" set kernels.1.warp_size 64
t warps-threads "figures disagree" set kernels.2.warps_dispatched 4

# Every figure within what a CC 9.0 device allows: huge values (which made a
# sum wrap in a release build), negatives, and each kernel field at INT64_MAX.
t overflow-static "figure out of range" set kernels.0.static_shared_bytes 9200000000000000000
t overflow-dynamic "figure out of range" set kernels.2.dynamic_shared_bytes 9223372036854775807
t overflow-warps "figure out of range" set kernels.0.warps_dispatched 576460752303423488
t registers-1e9 "figure out of range" set kernels.0.registers 1000000000
t negative "figure out of range" set kernels.3.static_shared_bytes -1
for f in max_threads_per_block static_shared_bytes dynamic_shared_bytes registers \
         threads_dispatched warps_dispatched max_active_blocks_per_sm; do
  t "max-$f" "figure out of range" set "kernels.4.$f" 9223372036854775807
done
t device-optin "figure out of range" set device.shared_mem_per_block_optin 9223372036854775807
t device-sms "figure out of range" set device.sm_count 0

# Thresholds: local memory in any kernel (baseline ones too), launchable
# threads, the 32 KiB budget, residency.
t threshold-launchable "threshold not met" set kernels.0.max_threads_per_block 128
t threshold-shared "threshold not met" set kernels.0.static_shared_bytes 20000
t threshold-spill "threshold not met" set kernels.1.local_bytes 8
t threshold-spill-baseline "threshold not met" set kernels.4.local_bytes 16
t threshold-resident "threshold not met" set kernels.0.max_active_blocks_per_sm 0
# Residency the figures cannot allow (threads, registers, shared memory).
t occupancy-threads "figures disagree" set kernels.3.max_active_blocks_per_sm 3
t occupancy-registers "figures disagree" set kernels.0.max_active_blocks_per_sm 32
multi occupancy-regs-high "figures disagree" 'd["kernels"][2]["registers"]=255'

# The kernel set and order, and the symbol of each role.
t kernel-removed "missing field" del kernels.1
t kernel-baseline-removed "missing field" del kernels.5
multi kernel-duplicate "file swapped" 'd["kernels"][2]=dict(d["kernels"][0])'
multi kernel-order "file swapped" 'd["kernels"][2],d["kernels"][3]=d["kernels"][3],d["kernels"][2]'
multi kernel-seventh "unexpected field" 'd["kernels"].append(dict(d["kernels"][5]))'
t kernel-role "wrong value" set kernels.2.role '"baseline_softmax"'
t kernel-name "wrong value" set kernels.2.name '"gem_baseline_value"'
t kernel-name-tile "wrong value" set kernels.0.name '"gem_fused_first_pass_t8_s1_v0"'
t kernel-name-junk "wrong value" set kernels.0.name '"gem_fused_first_pass_t4_s1_v0; rm -rf /"'

# Gates: exactly the documented names, each equal to its recomputation.
t gate-invented "unexpected field" add gates.no_spill true
t gate-removed "missing field" del gates.reducer_resident
t gate-flipped "verdict disagrees with the figures" set gates.first_pass_zero_local_bytes false
t verdict-fail "verdict disagrees with the figures" set verdict '"fail"'
t verdict-word "wrong value" set verdict '"passed"'

# Sources and binary entries.
t path-escape "unsafe path" set binary.path '"../etc/passwd"'
t path-absolute "unsafe path" set sources.0.path '"/etc/passwd"'
t path-dot "unsafe path" set binary.path '"build/./gem"'
t swapped-schema "file swapped" set schema '"gem.merge_check.v1"'
t swapped-source "file swapped" set sources.0.path '"src/attn_core.c"'
t binary-under-src "file swapped" set binary.path '"src/cuda/attn_fused.cu"'
multi sources-duplicate "wrong value" 'd["sources"].append(dict(d["sources"][0]))'
multi sources-unsorted "wrong value" \
  'd["sources"].insert(0, {"path": "src/cuda/zz.cu", "sha256": "0"*64})'
t digest-source "digest mismatch" set sources.0.sha256 '"'"$(printf 'b%.0s' $(seq 64))"'"'
t digest-binary "digest mismatch" set binary.sha256 '"'"$(printf 'c%.0s' $(seq 64))"'"'

# Files under --root: a symlink out of it (to a copy with the right digest),
# a device, a FIFO (neither may hang), a source that is not listed, a binary
# that is a source file, and a file changed after the receipt was written.
cp "$ROOT/src/cuda/attn_fused.cu" "$WORK/outside.cu"
mkdir -p "$WORK/r2/src/cuda" "$WORK/r2/build"
cp "$ROOT/build/gem" "$WORK/r2/build/gem"
ln -s "$WORK/outside.cu" "$WORK/r2/src/cuda/attn_fused.cu"
expect_fail root-symlink-out "unsafe path" \
  env GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$GOOD" --root "$WORK/r2"
rm "$WORK/r2/src/cuda/attn_fused.cu"
ln -s /dev/zero "$WORK/r2/src/cuda/attn_fused.cu"
expect_fail root-dev-zero "unsafe path" \
  timeout 20 env GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$GOOD" --root "$WORK/r2"
rm "$WORK/r2/src/cuda/attn_fused.cu"
cp "$ROOT/src/cuda/attn_fused.cu" "$WORK/r2/src/cuda/attn_fused.cu"
rm "$WORK/r2/build/gem"
mkfifo "$WORK/r2/build/gem"
expect_fail root-fifo "not a regular file" \
  timeout 20 env GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$GOOD" --root "$WORK/r2"
rm "$WORK/r2/build/gem"
cp "$ROOT/build/gem" "$WORK/r2/build/gem"
echo "// another kernel file" >"$WORK/r2/src/cuda/extra.cu"
expect_fail root-source-unlisted "missing field" \
  env GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$GOOD" --root "$WORK/r2"
rm "$WORK/r2/src/cuda/extra.cu"
cp "$ROOT/src/cuda/attn_fused.cu" "$WORK/r2/build/gem"
python3 - "$GOOD" "$WORK/src-as-bin.json" "$(sha256sum "$WORK/r2/build/gem" | cut -c1-64)" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["binary"]["sha256"] = sys.argv[3]
json.dump(d, open(sys.argv[2], "w"))
PY
expect_fail binary-is-source "file swapped" \
  env GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$WORK/src-as-bin.json" --root "$WORK/r2"
cp "$GOOD" "$WORK/swap.json"
echo "// changed" >>"$ROOT/src/cuda/attn_fused.cu"
expect_fail swapped-file "digest mismatch" A "$WORK/swap.json"
expect_usage root-missing "is not a directory" \
  "$GEM" analyze resources "$GOOD" --root "$WORK/no-such-root"

summary test_analyze_resources
