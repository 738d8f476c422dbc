#!/usr/bin/env bash
# gem analyze merge-boundary (analyze-online-merge-boundary.sh): the committed
# CPU receipt passes; one tampered copy per defect class is rejected with one
# line naming it; merge-check itself refuses bad usage, writes a receipt for
# other lengths that the analyzer rejects, and gives identical output digests
# for one and two threads.
#   usage: bash test_analyze_merge.sh <gem> <source-dir>
set -euo pipefail
GEM="$1"
SRC="$2"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. "$SRC/tests/analyze_lib.sh"
T="python3 $SRC/tests/tamper.py"
GOOD="$SRC/results/cpu/merge-check.json"
A() { GEM="$GEM" bash "$SRC/scripts/analyze-online-merge-boundary.sh" "$@"; }

# Good: the committed receipt, digests recomputed from the seeds.
expect_pass good A "$GOOD" --out "$WORK/analysis.json"
check analysis-binds-receipt grep -q "$(sha256sum "$GOOD" | cut -c1-64)" "$WORK/analysis.json"

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
t geometry-position "wrong geometry" set positions.4 131073
t geometry-kv "wrong geometry" set cases.3.geometry.n_kv_heads 8
t geometry-dk "wrong geometry" set cases.0.geometry.dk 256
t geometry-p "wrong geometry" set partitions 64
t geometry-scale "wrong geometry" set inputs.scale 1.0
t geometry-cases "wrong geometry" del cases.4
t nonfinite "non-finite figure" set cases.4.online_vs_reference.nmse null
t nonfinite-score "non-finite figure" set cases.0.scores.std null
t threshold-loosened "wrong value" set thresholds.max_nmse 1e-6
t verdict-figure "verdict disagrees with the figures" set cases.4.online_vs_reference.nmse 2e-11
t verdict-top "verdict disagrees with the figures" set verdict '"fail"'
t verdict-case "verdict disagrees with the figures" set cases.1.verdict '"fail"'
t verdict-determinism "verdict disagrees with the figures" set cases.2.output_sha256.online_repeat '"0000000000000000000000000000000000000000000000000000000000000000"'
t seeds-not-derived "wrong value" set cases.0.seeds.k '"1"'
t digest-k "digest mismatch" set cases.3.input_sha256.k '"'"$(printf 'a%.0s' $(seq 64))"'"'
t swapped-schema "file swapped" set schema '"gem.diff.v1"'
t swapped-tool "file swapped" set tool.name '"gem diff"'

# Threshold not met, with gates and verdicts made consistent with the figure.
$T "$GOOD" "$WORK/th1.json" set cases.4.online_vs_reference.nmse 2e-11
$T "$WORK/th1.json" "$WORK/th2.json" set cases.4.gates.nmse false
$T "$WORK/th2.json" "$WORK/th3.json" set cases.4.verdict '"fail"'
$T "$WORK/th3.json" "$WORK/th4.json" set verdict '"fail"'
expect_fail threshold "threshold not met" A "$WORK/th4.json"

# A different seed with the digests left alone: the recomputation catches it.
$T "$GOOD" "$WORK/s1.json" set seed '"7"'
for i in 0 1 2 3 4; do
  $T "$WORK/s1.json" "$WORK/s1.json" set cases.$i.seeds.run '"7"'
  $T "$WORK/s1.json" "$WORK/s1.json" set cases.$i.seeds.q '"86"'   # 7 ^ 0x51
  $T "$WORK/s1.json" "$WORK/s1.json" set cases.$i.seeds.k '"76"'   # 7 ^ 0x4B
  $T "$WORK/s1.json" "$WORK/s1.json" set cases.$i.seeds.v '"81"'   # 7 ^ 0x56
done
expect_fail digest-seed "digest mismatch" A "$WORK/s1.json"

# Not JSON, not an object, no file.
printf '{"schema": ' >"$WORK/trunc.json"
expect_fail truncated "unreadable" A "$WORK/trunc.json"
echo '[1,2]' >"$WORK/array.json"
expect_fail array "wrong type" A "$WORK/array.json"
expect_fail nofile "unreadable" A "$WORK/does-not-exist.json"

# merge-check: usage errors exit 2; an experiment at other lengths is rejected.
rc=0; "$GEM" merge-check --lengths 0 --out "$WORK/x.json" 2>/dev/null || rc=$?
check usage-lengths [ "$rc" -eq 2 ]
rc=0; "$GEM" merge-check --bogus 2>/dev/null || rc=$?
check usage-unknown [ "$rc" -eq 2 ]
"$GEM" merge-check --help | grep -q "8,191" && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL help" >&2; }
GEM_QUIET=1 "$GEM" merge-check --lengths 1000,1001 --threads 1 --out "$WORK/t1.json" >/dev/null
GEM_QUIET=1 "$GEM" merge-check --lengths 1000,1001 --threads 2 --out "$WORK/t2.json" >/dev/null
get() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([c["output_sha256"]["online"] for c in d["cases"]], [c["output_sha256"]["reference"] for c in d["cases"]])' "$1"; }
check threads-identical [ "$(get "$WORK/t1.json")" = "$(get "$WORK/t2.json")" ]
expect_fail other-lengths "wrong geometry" A "$WORK/t1.json"

summary test_analyze_merge
