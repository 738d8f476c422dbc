#!/usr/bin/env bash
# gem analyze merge-boundary (analyze-online-merge-boundary.sh): the committed
# CPU receipt passes, with every case rerun from its seed; one tampered copy
# per defect class is rejected with one line naming it: structure, geometry,
# every figure's range, figures that contradict each other, gates and
# verdicts, and figures, input digests and output digests that the rerun does
# not reproduce (edited shortest case first, so the rerun stops early).
# merge-check itself refuses bad usage, writes a receipt for other lengths
# that the analyzer rejects, and gives identical digests for 1 and 2 threads.
#   usage: bash test_analyze_merge.sh <gem> <source-dir> [sanitize]
# With "sanitize" (the sanitizer build's ctest) the committed receipt's whole rerun is left to
# test_analyze_correctness, whose gate reruns the same receipt through the same code (2-3
# minutes a time under ASan and UBSan); the edits below that only the rerun sees still run it
# up to their case. The release build's ctest runs both.
set -euo pipefail
GEM="$1"
SRC="$2"
SCALE="${3:-full}"
case "$SCALE" in
  full|sanitize) ;;
  *) echo "test_analyze_merge: the third argument is 'sanitize' or nothing" >&2; exit 2 ;;
esac
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. "$SRC/tests/analyze_lib.sh"
T="python3 $SRC/tests/tamper.py"
GOOD="$SRC/results/cpu/merge-check.json"
A() { GEM="$GEM" bash "$SRC/scripts/analyze-online-merge-boundary.sh" "$@"; }

# Good: the committed receipt, digests recomputed from the seeds.
if [ "$SCALE" = full ]; then
  expect_pass good A "$GOOD" --out "$WORK/analysis.json"
  check analysis-binds-receipt grep -q "$(sha256sum "$GOOD" | cut -c1-64)" "$WORK/analysis.json"
fi

t() { # t NAME CLASS OP PATH [VALUE]: tamper and expect the class
  local name="$1" cls="$2"
  shift 2
  $T "$GOOD" "$WORK/$name.json" "$@"
  expect_fail "$name" "$cls" A "$WORK/$name.json"
}
t missing-top "missing field" del thresholds
t missing-case-field "missing field" del cases.2.online_vs_reference.nmse
t extra-top "unexpected field" add comment '"hand-edited"'
t extra-case "unexpected field" add cases.0.gates.bonus true
t type-int "wrong type" set partitions '"32"'
t type-real "wrong type" set cases.1.online_vs_reference.correlation '"1"'
t type-bool "wrong type" set cases.0.finite 1
t type-seed "wrong type" set seed 20260501
t type-case-seed "wrong type" set cases.0.seeds.q 80
t seed-leading-zero "wrong type" set seed '"020260501"'
t geometry-position "wrong geometry" set positions.4 131073
t geometry-kv "wrong geometry" set cases.3.geometry.n_kv_heads 8
t geometry-dk "wrong geometry" set cases.0.geometry.dk 256
t geometry-p "wrong geometry" set partitions 64
t geometry-scale "wrong geometry" set inputs.scale 1.0
t geometry-cases "wrong geometry" del cases.4
t nonfinite "non-finite figure" set cases.4.online_vs_reference.nmse null
t nonfinite-score "non-finite figure" set cases.0.scores.std null
t nonfinite-count "non-finite figure" set cases.0.online_vs_reference.nonfinite 3
t threshold-loosened "wrong value" set thresholds.max_nmse 1e-6
t tool-commit "wrong value" set tool.git_commit '"HEAD\nunknown"'

# Every figure within its mathematical range.
t range-correlation "figure out of range" set cases.0.online_vs_reference.correlation 5.0
t range-correlation-low "figure out of range" set cases.1.online_vs_reference.correlation -1.5
t range-nmse "figure out of range" set cases.0.online_vs_reference.nmse -1e-13
t range-max-abs "figure out of range" set cases.0.online_vs_reference.max_abs -1e-9
t range-max-abs-high "figure out of range" set cases.0.online_vs_reference.max_abs 1e30
t range-std "figure out of range" set cases.0.scores.std -0.1
t range-min-max "figure out of range" set cases.0.scores.min 5.0
t range-mean "figure out of range" set cases.0.scores.mean 3.0
t range-score-bound "figure out of range" set cases.0.scores.min -1000.0
t range-weight "figure out of range" set cases.0.scores.max_softmax_weight 5.0
t range-weight-low "figure out of range" set cases.0.scores.max_softmax_weight 1e-6
t range-eff "figure out of range" set cases.0.scores.min_effective_tokens 0.5
t range-eff-high "figure out of range" set cases.0.scores.min_effective_tokens 1e9
t range-unwritten "figure out of range" set cases.0.unwritten.online -1
t range-unwritten-high "figure out of range" set cases.0.unwritten.online_repeat 20000

# Figures that cannot all hold at once.
t zero-nmse-with-error "figures disagree" set cases.0.online_vs_reference.nmse 0.0
t max-abs-vs-nmse "figures disagree" set cases.0.online_vs_reference.max_abs 0.01
t std-vs-range "figures disagree" set cases.0.scores.std 10.0
t weight-vs-range "figures disagree" set cases.0.scores.max_softmax_weight 0.5
t eff-vs-weight "figures disagree" set cases.0.scores.min_effective_tokens 1.5
t finite-flag "figures disagree" set cases.0.finite false

t verdict-figure "verdict disagrees with the figures" set cases.4.online_vs_reference.nmse 2e-11
t verdict-top "verdict disagrees with the figures" set verdict '"fail"'
t verdict-case "verdict disagrees with the figures" set cases.1.verdict '"fail"'
t verdict-determinism "verdict disagrees with the figures" set cases.2.output_sha256.online_repeat '"0000000000000000000000000000000000000000000000000000000000000000"'
t seeds-not-derived "wrong value" set cases.0.seeds.k '"1"'
t swapped-schema "file swapped" set schema '"gem.diff.v1"'
t swapped-tool "file swapped" set tool.name '"gem diff"'

# Edits that keep every range and every relation intact: only the rerun from
# the seed sees them (case 0, the shortest, so the rerun stops early).
t digest-k "digest mismatch" set cases.0.input_sha256.k '"'"$(printf 'a%.0s' $(seq 64))"'"'
t digest-reference-output "digest mismatch" set cases.0.output_sha256.reference '"'"$(printf 'e%.0s' $(seq 64))"'"'
python3 - "$GOOD" "$WORK/both-outputs.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["cases"][0]["output_sha256"]["online"] = "f" * 64
d["cases"][0]["output_sha256"]["online_repeat"] = "f" * 64
json.dump(d, open(sys.argv[2], "w"), indent=2)
PY
expect_fail digest-any-output "digest mismatch" A "$WORK/both-outputs.json"
python3 - "$GOOD" "$WORK/perfect.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["cases"][0]["online_vs_reference"].update(correlation=1.0, nmse=0.0, max_abs=0.0)
json.dump(d, open(sys.argv[2], "w"), indent=2)
PY
expect_fail perfect-figures "not reproduced" A "$WORK/perfect.json"
t figure-nmse "not reproduced" set cases.0.online_vs_reference.nmse 1e-12
t figure-score-mean "not reproduced" set cases.0.scores.mean 0.001

# Not JSON, not an object: a defect of the receipt. No file: an input problem.
printf '{"schema": ' >"$WORK/trunc.json"
expect_fail truncated "malformed document" A "$WORK/trunc.json"
echo '[1,2]' >"$WORK/array.json"
expect_fail array "malformed document" A "$WORK/array.json"
printf '{"schema": "a", "schema": "b"}' >"$WORK/dup-key.json"
expect_fail duplicate-key "malformed document" A "$WORK/dup-key.json"
expect_usage nofile "No such file" A "$WORK/does-not-exist.json"

# merge-check: usage errors exit 2; an experiment at other lengths is rejected.
rc=0; "$GEM" merge-check --lengths 0 --out "$WORK/x.json" 2>/dev/null || rc=$?
check usage-lengths [ "$rc" -eq 2 ]
rc=0; "$GEM" merge-check --bogus 2>/dev/null || rc=$?
check usage-unknown [ "$rc" -eq 2 ]
for bad in "--seed 010" "--seed 0x10" "--seed -1" "--scale 1e-50" "--scale 0x1p-3" \
           "--scale inf" "--threads 0" "--lengths 64K,0"; do
  # shellcheck disable=SC2086
  expect_usage "merge-check $bad" "gem merge-check:" "$GEM" merge-check $bad --out "$WORK/u.json"
done
check usage-writes-nothing [ ! -e "$WORK/u.json" ]
expect_usage merge-check-out-dev "character device" "$GEM" merge-check --out /dev/null
# A length whose inputs do not fit in the memory available is refused before
# any work, with both figures (16 KiB of K and V per token).
avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
big=$(( (avail_kib / 16 / 1024 + 1) * 2 ))  # in Ki tokens, twice what fits
if [ "$big" -le 16384 ]; then
  expect_usage merge-check-memory "GiB are available" \
    "$GEM" merge-check --lengths "${big}K" --out "$WORK/m.json"
  expect_usage input-digests-memory "GiB are available" \
    "$GEM" analyze input-digests --live "${big}K" --seed 1
fi
"$GEM" merge-check --help | grep -q "8,191" && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL help" >&2; }
GEM_QUIET=1 "$GEM" merge-check --lengths 1000,1001 --threads 1 --out "$WORK/t1.json" >/dev/null
GEM_QUIET=1 "$GEM" merge-check --lengths 1000,1001 --threads 2 --out "$WORK/t2.json" >/dev/null
get() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([c["output_sha256"]["online"] for c in d["cases"]], [c["output_sha256"]["reference"] for c in d["cases"]])' "$1"; }
check threads-identical [ "$(get "$WORK/t1.json")" = "$(get "$WORK/t2.json")" ]
expect_fail other-lengths "wrong geometry" A "$WORK/t1.json"

summary test_analyze_merge
