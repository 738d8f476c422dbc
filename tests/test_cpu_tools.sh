#!/bin/bash
# gem diff / bench / run end to end at small lengths: records are written with
# the documented fields, gates pass, bad usage exits 2.
# usage: bash test_cpu_tools.sh <gem binary> <source dir>
set -u
GEM=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export GEM_QUIET=1
fail=0; pass=0
check() { # description, command...
    local what=$1; shift
    if "$@"; then pass=$((pass + 1)); else echo "FAIL: $what"; fail=$((fail + 1)); fi
}

"$GEM" diff --lengths 1000,1001 --threads 2 --out "$TMP/diff" >"$TMP/diff.txt"
check "diff exits 0" test $? -eq 0
rec="$TMP/diff/diff-cpu-fused_p32_t4-vs-baseline_p16-live1001-f32-seed1.json"
check "diff record named by case id" test -f "$rec"
for key in '"schema": "gem.diff.v1"' '"case_id"' '"reference_route"' '"candidate_route"' \
           '"input_sha256"' '"output_sha256"' '"repeat_deterministic"' '"unwritten"' \
           '"guard_ok"' '"candidate_vs_reference"' '"reference_vs_double"' \
           '"candidate_vs_double"' '"thresholds"' '"verdict": "pass"'; do
    check "diff record has $key" grep -q "$key" "$rec"
done
# the same inputs and routes give the same output digests at another thread count
"$GEM" diff --lengths 1001 --threads 1 --out "$TMP/diff1" >/dev/null
check "diff at 1 thread exits 0" test $? -eq 0
d2=$(grep -A2 '"output_sha256"' "$rec")
d1=$(grep -A2 '"output_sha256"' "$TMP/diff1/$(basename "$rec")")
check "output digests equal at 1 and 2 threads" test "$d1" = "$d2"

"$GEM" bench --lengths 2048 --rounds 2 --warmup 1 --bw-mib 64 --bw-reps 3 \
    --out "$TMP/bench.json" >"$TMP/bench.txt"
check "bench exits 0" test $? -eq 0
for key in '"schema": "gem.bench.v1"' '"read_bandwidth"' '"ratio_a_over_b"' \
           '"fraction_of_read_bandwidth"' '"verdict": "timed"'; do
    check "bench record has $key" grep -q "$key" "$TMP/bench.json"
done
check "bench prints the ratio" grep -q "A/B ratio median" "$TMP/bench.txt"

"$GEM" run --live 3000 --json "$TMP/run.json" >"$TMP/run.txt"
check "run exits 0" test $? -eq 0
check "run prints a verdict" grep -q "verdict      PASS" "$TMP/run.txt"
check "run json pass" grep -q '"verdict": "pass"' "$TMP/run.json"

for bad in "diff --lengths 0" "diff --tile 0" "diff --ref-tile 4" "bench --rounds 0" \
           "bench --a nosuch" "bench --backend tpu" "run --live x" "run --bogus 1" \
           "diff --seed -1"; do
    # shellcheck disable=SC2086
    "$GEM" $bad >/dev/null 2>&1
    check "'gem $bad' exits 2" test $? -eq 2
done
for sub in diff bench run; do
    "$GEM" $sub --help >/dev/null
    check "gem $sub --help" test $? -eq 0
done
echo "test_cpu_tools: $pass passed, $fail failed"
test $fail -eq 0
