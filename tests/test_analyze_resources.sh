#!/usr/bin/env bash
# gem analyze resources (analyze-fused-split-kv-resources.sh): a good
# hand-made gem.resources.v1 receipt passes and says only "compilable and
# launchable"; one tampered copy per defect class is rejected with one line.
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
A() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$@" --root "$WORK/root"; }

expect_pass good A "$GOOD" --out "$WORK/analysis.json"
check says-only-launchable grep -q "compilable and launchable" "$WORK/out.txt"
check no-promotion-word bash -c "! grep -qi 'promot\|eligib' '$WORK/out.txt' '$WORK/analysis.json'"

t() {
  local name="$1" cls="$2"
  shift 2
  $T "$GOOD" "$WORK/$name.json" "$@"
  expect_fail "$name" "$cls" A "$WORK/$name.json"
}
t missing "missing field" del scratch.total_bytes
t missing-kernel "missing field" del kernels.1
t extra "unexpected field" add device.clock_mhz 1980
t extra-kernel "unexpected field" add kernels.0.occupancy 0.5
t type "wrong type" set kernels.0.threads_dispatched '"256"'
t type-gate "wrong type" set gates.no_spill '"yes"'
t geometry-dk "wrong geometry" set geometry.dk 256
t geometry-p "wrong geometry" set geometry.partitions 64
t geometry-window "wrong geometry" set geometry.window 1024
t geometry-cc "wrong geometry" set device.compute_capability '"8.0"'
$T "$GOOD" "$WORK/th128.json" set kernels.0.threads_dispatched 128
$T "$WORK/th128.json" "$WORK/th128.json" set kernels.0.warps_dispatched 4
expect_fail geometry-threads "wrong geometry" A "$WORK/th128.json"
t geometry-dyn "wrong geometry" set kernels.0.dynamic_shared_bytes 32768
t geometry-reducer-dyn "wrong geometry" set kernels.1.dynamic_shared_bytes 4096
t geometry-warp "wrong geometry" set kernels.1.warp_size 64
t scratch "wrong geometry" set scratch.numerators_bytes 4194304
t nonfinite "wrong type" set device.sm_count null
t threshold-launchable "threshold not met" set kernels.0.max_threads_per_block 128
t threshold-shared "threshold not met" set kernels.0.static_shared_bytes 20000
t threshold-spill "threshold not met" set kernels.1.local_bytes 8
t threshold-resident "threshold not met" set kernels.0.max_active_blocks_per_sm 0
t verdict "verdict disagrees with the figures" set gates.no_spill false
t verdict-fail "verdict disagrees with the figures" set verdict '"fail"'
t digest-source "digest mismatch" set sources.0.sha256 '"'"$(printf 'b%.0s' $(seq 64))"'"'
t digest-binary "digest mismatch" set binary.sha256 '"'"$(printf 'c%.0s' $(seq 64))"'"'
t path-escape "wrong value" set binary.path '"../etc/passwd"'
t swapped-schema "file swapped" set schema '"gem.merge_check.v1"'
t swapped-source "file swapped" set sources.0.path '"src/attn_core.c"'
# A second first-pass kernel in place of a baseline one.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["kernels"][2]=dict(d["kernels"][0]); json.dump(d,open(sys.argv[2],"w"))' "$GOOD" "$WORK/dup.json"
expect_fail swapped-role "file swapped" A "$WORK/dup.json"

# The producer's own failed gate, with a consistent verdict.
$T "$GOOD" "$WORK/g1.json" set gates.no_spill false
$T "$WORK/g1.json" "$WORK/g2.json" set verdict '"fail"'
expect_fail threshold-gate "threshold not met" A "$WORK/g2.json"

# A file swapped on disk after the receipt was written.
cp "$GOOD" "$WORK/swap.json"
echo "// changed" >>"$WORK/root/src/cuda/attn_fused.cu"
expect_fail swapped-file "digest mismatch" A "$WORK/swap.json"

summary test_analyze_resources
