#!/usr/bin/env bash
# gem analyze correctness (analyze-fused-split-kv-correctness.sh): the
# committed CPU gate, a hand-made resource receipt, five hand-made operator
# records whose input digests are the real seeded-input digests, and three
# hand-made model records pass; without model records it says "model records
# missing"; one tampered copy per defect class is rejected with one line; it
# never reports promotion eligibility.
#   usage: bash test_analyze_correctness.sh <gem> <source-dir>
set -euo pipefail
GEM="$1"
SRC="$2"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. "$SRC/tests/analyze_lib.sh"
T="python3 $SRC/tests/tamper.py"
python3 "$SRC/tests/gen_records.py" "$GEM" "$WORK" resources diffs models
GEM_QUIET=1 "$GEM" analyze resources "$WORK/resources.json" --root "$WORK/root" \
  --out "$WORK/resources-analysis.json" >/dev/null
MR="$SRC/results/cpu/merge-check.json"
MA="$SRC/results/cpu/merge-boundary-analysis.json"
A() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-correctness.sh" "$@"; }
# run DIFF0 MODEL0 [extra args]: the 8191 diff and model records replaced.
run() {
  local d0="$1" m0="$2"
  shift 2
  A --merge "$MR" --merge-analysis "$MA" --resources "$WORK/resources.json" \
    --resources-analysis "$WORK/resources-analysis.json" \
    --diff "$d0" --diff "$WORK/diff-8192.json" --diff "$WORK/diff-8193.json" \
    --diff "$WORK/diff-65536.json" --diff "$WORK/diff-131072.json" \
    --model "$m0" --model "$WORK/model-8192.json" --model "$WORK/model-8193.json" "$@"
}
D0="$WORK/diff-8191.json"
M0="$WORK/model-8191.json"

expect_pass good run "$D0" "$M0" --out "$WORK/analysis.json"
check never-promotion bash -c "! grep -qi 'eligib' '$WORK/out.txt' '$WORK/analysis.json'"
check binds-every-file [ "$(grep -c '"sha256"' "$WORK/analysis.json")" -eq 12 ]

expect_fail no-models "model records missing" \
  A --merge "$MR" --merge-analysis "$MA" --resources "$WORK/resources.json" \
  --resources-analysis "$WORK/resources-analysis.json" \
  --diff "$D0" --diff "$WORK/diff-8192.json" --diff "$WORK/diff-8193.json" \
  --diff "$WORK/diff-65536.json" --diff "$WORK/diff-131072.json"

d() { # d NAME CLASS OP PATH [VALUE]: tamper the 8191 operator record
  local name="$1" cls="$2"
  shift 2
  $T "$D0" "$WORK/$name.json" "$@"
  expect_fail "$name" "$cls" run "$WORK/$name.json" "$M0"
}
d diff-missing "missing field" del finite.candidate
d diff-extra "unexpected field" add notes '"x"'
d diff-type "wrong type" set threads '"2"'
d diff-geometry "wrong geometry" set geometry.n_kv_heads 8
d diff-route "wrong geometry" set candidate_route.tile 8
d diff-reference-route "wrong geometry" set reference_route.route '"online"'
d diff-nonfinite "non-finite figure" set candidate_vs_reference.nmse null
d diff-verdict "verdict disagrees with the figures" set candidate_vs_reference.nmse 0.001
d diff-threshold-loosened "wrong value" set thresholds.max_nmse 0.01
d diff-digest "digest mismatch" set input_sha256.v '"'"$(printf 'd%.0s' $(seq 64))"'"'
d diff-swapped "file swapped" set schema '"gem.model_diff.v1"'
$T "$D0" "$WORK/th1.json" set candidate_vs_reference.correlation 0.99
$T "$WORK/th1.json" "$WORK/th2.json" set verdict '"fail"'
expect_fail diff-threshold "threshold not met" run "$WORK/th2.json" "$M0"
expect_fail diff-duplicate "file swapped" run "$WORK/diff-8192.json" "$M0"

m() { # m NAME CLASS OP PATH [VALUE]: tamper the 8191 model record
  local name="$1" cls="$2"
  shift 2
  $T "$M0" "$WORK/$name.json" "$@"
  expect_fail "$name" "$cls" run "$D0" "$WORK/$name.json"
}
m model-missing "missing field" del greedy.candidate_tokens
m model-extra "unexpected field" add candidate.temperature 0.7
m model-type "wrong type" set baseline.argmax '"1000"'
m model-layers "wrong geometry" set model.n_layers 48
m model-global "wrong geometry" set model.global_layers.3 24
m model-geometry "wrong geometry" set model.global_geometry.dk 256
m model-selection "wrong value" set selection.production_after '"fused"'
m model-verdict-top10 "verdict disagrees with the figures" set candidate.top10.5 99
m model-verdict-greedy "verdict disagrees with the figures" set greedy.candidate_tokens.9 7
m model-verdict-repeat "verdict disagrees with the figures" set candidate.logits_sha256_repeat '"'"$(printf 'e%.0s' $(seq 64))"'"'
m model-swapped "file swapped" set schema '"gem.diff.v1"'
m model-context "wrong geometry" set prompt.context_tokens 4096
# Fewer than eight greedy tokens, verdict consistent: threshold.
python3 - "$M0" "$WORK/short.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["greedy"]["steps"] = 7
d["greedy"]["baseline_tokens"] = d["greedy"]["baseline_tokens"][:7]
d["greedy"]["candidate_tokens"] = d["greedy"]["candidate_tokens"][:7]
d["verdict"] = "fail"
json.dump(d, open(sys.argv[2], "w"), indent=2)
PY
expect_fail model-threshold-greedy "threshold not met" run "$D0" "$WORK/short.json"

# The CPU gate and resource analysis: swapped or altered files.
expect_fail merge-analysis-swapped "file swapped" \
  A --merge "$MR" --merge-analysis "$WORK/resources-analysis.json" \
  --resources "$WORK/resources.json" --resources-analysis "$WORK/resources-analysis.json" \
  --diff "$D0" --diff "$WORK/diff-8192.json" --diff "$WORK/diff-8193.json" \
  --diff "$WORK/diff-65536.json" --diff "$WORK/diff-131072.json" \
  --model "$M0" --model "$WORK/model-8192.json" --model "$WORK/model-8193.json"
$T "$MR" "$WORK/mr.json" set tool.git_commit '"edited"'
expect_fail merge-receipt-altered "file swapped" \
  A --merge "$WORK/mr.json" --merge-analysis "$MA" \
  --resources "$WORK/resources.json" --resources-analysis "$WORK/resources-analysis.json" \
  --diff "$D0" --diff "$WORK/diff-8192.json" --diff "$WORK/diff-8193.json" \
  --diff "$WORK/diff-65536.json" --diff "$WORK/diff-131072.json" \
  --model "$M0" --model "$WORK/model-8192.json" --model "$WORK/model-8193.json"
$T "$WORK/resources.json" "$WORK/r2.json" set device.sm_count 114
expect_fail resources-altered "file swapped" \
  A --merge "$MR" --merge-analysis "$MA" \
  --resources "$WORK/r2.json" --resources-analysis "$WORK/resources-analysis.json" \
  --diff "$D0" --diff "$WORK/diff-8192.json" --diff "$WORK/diff-8193.json" \
  --diff "$WORK/diff-65536.json" --diff "$WORK/diff-131072.json" \
  --model "$M0" --model "$WORK/model-8192.json" --model "$WORK/model-8193.json"
expect_fail four-diffs "missing field" \
  A --merge "$MR" --merge-analysis "$MA" \
  --resources "$WORK/resources.json" --resources-analysis "$WORK/resources-analysis.json" \
  --diff "$D0" --diff "$WORK/diff-8192.json" --diff "$WORK/diff-8193.json" \
  --diff "$WORK/diff-65536.json" \
  --model "$M0" --model "$WORK/model-8192.json" --model "$WORK/model-8193.json"

summary test_analyze_correctness
