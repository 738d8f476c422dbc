#!/usr/bin/env bash
# gem analyze correctness (analyze-fused-split-kv-correctness.sh): the
# committed CPU gate, a hand-made resource receipt, five hand-made operator
# records whose input digests are the real seeded-input digests, and three
# hand-made model records pass (both receipts re-analyzed, the merge check
# rerun from its seed); without model records it says "model records
# missing"; a wrong command line exits 2; one tampered copy per defect class
# is rejected with one line: figures out of range or contradicting each
# other, case ids that do not match their parameters, seeds that are not
# decimal strings, model records of another comparison (K from V), and
# analyses that are not exactly the re-derived ones (hand-written, edited, or
# of another receipt). The committed model differentials of
# results/cpu/model/model-diff/ pass the model-record checks (gem model-diff's
# own records against the same checks: test_model_diff_records.c), and run 168's
# committed operator and 31B model records pass the whole gate while the CUDA
# route's records of that run are refused for their geometry. It never
# reports promotion eligibility.
#   usage: bash test_analyze_correctness.sh <gem> <source-dir> [sanitize]
# With "sanitize" (the sanitizer build's ctest) run 168's records are held to every check
# before the merge check's rerun but do not pass the whole gate: that rerun is the good case's
# (the same receipt, seeds and code), 2-3 minutes a time under ASan and UBSan, and the release
# build's ctest runs both.
set -euo pipefail
GEM="$1"
SRC="$2"
SCALE="${3:-full}"
case "$SCALE" in
  full|sanitize) ;;
  *) echo "test_analyze_correctness: the third argument is 'sanitize' or nothing" >&2; exit 2 ;;
esac
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
    --model "$m0" --model "$WORK/model-8192.json" --model "$WORK/model-8193.json" \
    --root "$WORK/root" "$@"
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
  --diff "$WORK/diff-65536.json" --diff "$WORK/diff-131072.json" --root "$WORK/root"

d() { # d NAME CLASS OP PATH [VALUE]: tamper the 8191 operator record
  local name="$1" cls="$2"
  shift 2
  $T "$D0" "$WORK/$name.json" "$@"
  expect_fail "$name" "$cls" run "$WORK/$name.json" "$M0"
}
d diff-missing "missing field" del finite.candidate
d diff-correlation-5 "figure out of range" set candidate_vs_reference.correlation 5.0
d diff-nmse-negative "figure out of range" set reference_vs_double.nmse -1e-12
d diff-max-abs-1e30 "figures disagree" set candidate_vs_reference.max_abs 1e30
d diff-triangle "figures disagree" set candidate_vs_reference.max_abs 5e-7
d diff-zero-nmse "figures disagree" set candidate_vs_double.nmse 0.0
d diff-same-outputs "figures disagree" set output_sha256.candidate '"'"$(printf '1%.0s' $(seq 64))"'"'
d diff-finite-flag "figures disagree" set finite.reference false
d diff-unwritten "figure out of range" set unwritten.candidate -1
d diff-case-backend "wrong value" set case_id '"diff-cuda-fused_p32_t4-vs-baseline_p16-live8191-f32-seed1"'
d diff-case-length "wrong value" set case_id '"diff-cpu-fused_p32_t4-vs-baseline_p16-live8192-f32-seed1"'
d diff-seed-integer "wrong type" set seeds.run 1
d diff-seed-integers "wrong type" set seeds.q 80
d diff-scale "wrong geometry" set geometry.scale 1.0
d diff-threads "figure out of range" set threads 0
d diff-tool-commit "wrong value" set tool.git_commit '"HEAD\nunknown"'
d diff-control-char "wrong value" set device '"cpu\u001b]0;pwned\u0007"'
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
m model-case-id "wrong value" set case_id '"model-gemma-4-31b-q4-boundary-0-ctx8192"'
m model-top10-repeat "figures disagree" set baseline.top10.4 1000
m model-token-range "figure out of range" set candidate.top10.3 -5
m model-steps-range "figure out of range" set greedy.steps 5000
# Identical logits (equal digests) cannot give a different top-10.
$T "$M0" "$WORK/same-logits.json" set baseline.logits_sha256 '"'"$(printf '5%.0s' $(seq 64))"'"'
$T "$WORK/same-logits.json" "$WORK/same-logits.json" set candidate.top10.9 99
expect_fail model-logits-same "figures disagree" run "$D0" "$WORK/same-logits.json"
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
# gem model-diff --compare k-from-v: the same schema with "comparison": "k-from-v" (explicit
# K against K rebuilt from V, both fused) is another comparison, never one of the three.
m model-comparison-other "file swapped" add comparison '"routes"'
$T "$M0" "$WORK/kfv.json" add comparison '"k-from-v"'
$T "$WORK/kfv.json" "$WORK/kfv.json" set selection.baseline_route '"fused"'
expect_fail model-k-from-v "file swapped" run "$D0" "$WORK/kfv.json"
check model-k-from-v-named grep -q "K-from-V comparison" "$WORK/err.txt"
$T "$M0" "$WORK/kfv-only-field.json" add comparison '"k-from-v"'
expect_fail model-k-from-v-field "file swapped" run "$D0" "$WORK/kfv-only-field.json"
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

# The CPU gate and resource analysis: swapped, altered, hand-written files.
# full ARGS...: the good command line with some files replaced, by role.
full() {
  local mr="$MR" ma="$MA" rr="$WORK/resources.json" ra="$WORK/resources-analysis.json"
  while [ $# -gt 0 ]; do
    case "$1" in
      mr) mr="$2" ;; ma) ma="$2" ;; rr) rr="$2" ;; ra) ra="$2" ;;
    esac
    shift 2
  done
  A --merge "$mr" --merge-analysis "$ma" --resources "$rr" --resources-analysis "$ra" \
    --diff "$D0" --diff "$WORK/diff-8192.json" --diff "$WORK/diff-8193.json" \
    --diff "$WORK/diff-65536.json" --diff "$WORK/diff-131072.json" \
    --model "$M0" --model "$WORK/model-8192.json" --model "$WORK/model-8193.json" \
    --root "$WORK/root"
}
expect_fail merge-analysis-swapped "file swapped" full ma "$WORK/resources-analysis.json"
$T "$MR" "$WORK/mr.json" set tool.git_commit '"abcdef0"'
expect_fail merge-receipt-altered "file swapped" full mr "$WORK/mr.json"
$T "$WORK/resources.json" "$WORK/r2.json" set device.sm_count 114
expect_fail resources-altered "file swapped" full rr "$WORK/r2.json"
# A hand-written analysis: right schema, "pass", the receipt's digest.
python3 - "$MR" "$WORK/hand.json" <<'PY'
import hashlib, json, sys
sha = hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()
json.dump({"schema": "gem.analysis.merge_boundary.v1", "verdict": "pass",
           "receipt": {"sha256": sha}}, open(sys.argv[2], "w"))
PY
expect_fail merge-analysis-handwritten "missing field" full ma "$WORK/hand.json"
python3 - "$MR" "$MA" "$WORK/hand2.json" <<'PY'
import hashlib, json, sys
a = json.load(open(sys.argv[2]))
json.dump({"schema": a["schema"], "tool": a["tool"], "verdict": "pass",
           "receipt": a["receipt"]}, open(sys.argv[3], "w"))
PY
expect_fail merge-analysis-three-fields "missing field" full ma "$WORK/hand2.json"
$T "$MA" "$WORK/ma-statement.json" set statement '"all good"'
expect_fail merge-analysis-statement "wrong value" full ma "$WORK/ma-statement.json"
$T "$MA" "$WORK/ma-recomputed.json" set digests_recomputed false
expect_fail merge-analysis-not-recomputed "wrong value" full ma "$WORK/ma-recomputed.json"
$T "$MA" "$WORK/ma-extra.json" add promotion '"eligible"'
expect_fail merge-analysis-extra "unexpected field" full ma "$WORK/ma-extra.json"
$T "$WORK/resources-analysis.json" "$WORK/ra-kernels.json" set kernels.0.name '"gem_other"'
expect_fail resources-analysis-edited "wrong value" full ra "$WORK/ra-kernels.json"
$T "$WORK/resources-analysis.json" "$WORK/ra-verdict.json" set verdict '"fail"'
expect_fail resources-analysis-verdict "wrong value" full ra "$WORK/ra-verdict.json"
# The receipt path an analysis names may differ (files move), and so may the
# analyzer's own commit: such an analysis is accepted, and the gate goes on to
# the records (here to a record whose input digest is wrong, so that the test
# stops before the rerun of the merge check that the good case above pays).
$T "$MA" "$WORK/ma-moved.json" set receipt.path '"elsewhere/merge-check.json"'
$T "$WORK/ma-moved.json" "$WORK/ma-moved.json" set tool.git_commit '"0000000"'
$T "$D0" "$WORK/d0-digest.json" set input_sha256.q '"'"$(printf 'd%.0s' $(seq 64))"'"'
expect_fail merge-analysis-moved "digest mismatch" \
  A --merge "$MR" --merge-analysis "$WORK/ma-moved.json" --resources "$WORK/resources.json" \
  --resources-analysis "$WORK/resources-analysis.json" \
  --diff "$WORK/d0-digest.json" --diff "$WORK/diff-8192.json" --diff "$WORK/diff-8193.json" \
  --diff "$WORK/diff-65536.json" --diff "$WORK/diff-131072.json" \
  --model "$M0" --model "$WORK/model-8192.json" --model "$WORK/model-8193.json" \
  --root "$WORK/root"
check merge-analysis-moved-reached-records grep -q "d0-digest.json: input_sha256" "$WORK/err.txt"
# The committed model differentials (results/cpu/model/model-diff/, written by gem model-diff)
# pass every model-record check, their case ids rebuilt from their own fields: the gate goes on
# past them to the operator records' inputs (stopping at the same wrong digest).
CM="$SRC/results/cpu/model/model-diff/model-diff-gem-synth-diff60"
expect_fail committed-model-records "digest mismatch" \
  A --merge "$MR" --merge-analysis "$MA" --resources "$WORK/resources.json" \
  --resources-analysis "$WORK/resources-analysis.json" \
  --diff "$WORK/d0-digest.json" --diff "$WORK/diff-8192.json" --diff "$WORK/diff-8193.json" \
  --diff "$WORK/diff-65536.json" --diff "$WORK/diff-131072.json" \
  --model "$CM-ctx8191-seed1.json" --model "$CM-ctx8192-seed1.json" \
  --model "$CM-ctx8193-seed1.json" --root "$WORK/root"
check committed-model-records-pass grep -q "d0-digest.json: input_sha256" "$WORK/err.txt"
# Run 168's committed records (results/h200/run168/out/gate: the design's operator records,
# written by gem diff on the H200 machine's CPU, and the 31B model records written on its GPU)
# pass the whole gate beside the hand-made resource receipt (the committed one binds that
# machine's gem binary); the CUDA route's own operator records of the same run are refused for
# their geometry.
R168="$SRC/results/h200/run168/out/gate"
RD="$R168/diff-cpu/diff-cpu-fused_p32_t4-vs-baseline_p16-live"
RC="$R168/diff-cuda/diff-cuda-fused_p64_t8-vs-baseline_p16-live"
RM="$R168/model-diff-31b-q4_0/model-diff-gem-synth-31b"
# gate168 MERGE ANALYSIS DIFFS: the gate on run 168's model records and its operator records
# DIFFS<live>-f32-seed1.json, beside the hand-made resource receipt
gate168() {
  A --merge "$1" --merge-analysis "$2" --resources "$WORK/resources.json" \
    --resources-analysis "$WORK/resources-analysis.json" \
    --diff "${3}8191-f32-seed1.json" --diff "${3}8192-f32-seed1.json" \
    --diff "${3}8193-f32-seed1.json" --diff "${3}65536-f32-seed1.json" \
    --diff "${3}131072-f32-seed1.json" --model "$RM-ctx8191-seed1.json" \
    --model "$RM-ctx8192-seed1.json" --model "$RM-ctx8193-seed1.json" --root "$WORK/root"
}
if [ "$SCALE" = full ]; then
  expect_pass committed-run168 gate168 "$MR" "$MA" "$RD"
else # every check before the rerun: the receipt's shortest case carries a wrong output
  # digest, its analysis binds the edited receipt, and the gate stops at that case's rerun
  $T "$MR" "$WORK/mr-edited.json" set cases.0.output_sha256.reference \
    '"'"$(printf 'e%.0s' $(seq 64))"'"'
  $T "$MA" "$WORK/ma-edited.json" set receipt.sha256 \
    '"'"$(sha256sum "$WORK/mr-edited.json" | cut -c1-64)"'"'
  expect_fail committed-run168-to-rerun "digest mismatch" \
    gate168 "$WORK/mr-edited.json" "$WORK/ma-edited.json" "$RD"
  check committed-run168-reached-rerun grep -q "mr-edited.json" "$WORK/err.txt"
fi
expect_fail committed-run168-cuda-geometry "wrong geometry: 64, the design fixes 32" \
  gate168 "$MR" "$MA" "$RC"

# The command line: missing inputs and wrong counts are usage errors (exit 2).
expect_usage no-merge "--merge is required" \
  A --merge-analysis "$MA" --resources "$WORK/resources.json" \
  --resources-analysis "$WORK/resources-analysis.json" \
  --diff "$D0" --diff "$WORK/diff-8192.json" --diff "$WORK/diff-8193.json" \
  --diff "$WORK/diff-65536.json" --diff "$WORK/diff-131072.json" --root "$WORK/root"
expect_usage four-diffs "4 --diff records given" \
  A --merge "$MR" --merge-analysis "$MA" \
  --resources "$WORK/resources.json" --resources-analysis "$WORK/resources-analysis.json" \
  --diff "$D0" --diff "$WORK/diff-8192.json" --diff "$WORK/diff-8193.json" \
  --diff "$WORK/diff-65536.json" \
  --model "$M0" --model "$WORK/model-8192.json" --model "$WORK/model-8193.json" \
  --root "$WORK/root"
expect_usage two-models "2 --model records given" \
  A --merge "$MR" --merge-analysis "$MA" \
  --resources "$WORK/resources.json" --resources-analysis "$WORK/resources-analysis.json" \
  --diff "$D0" --diff "$WORK/diff-8192.json" --diff "$WORK/diff-8193.json" \
  --diff "$WORK/diff-65536.json" --diff "$WORK/diff-131072.json" \
  --model "$M0" --model "$WORK/model-8192.json" --root "$WORK/root"
expect_usage missing-diff-file "cannot read the file" run "$WORK/no-such-diff.json" "$M0"
expect_usage out-is-input "same file as the input" run "$D0" "$M0" --out "$WORK/diff-8192.json"
check out-is-input-untouched grep -q '"gem.diff.v1"' "$WORK/diff-8192.json"

summary test_analyze_correctness
