#!/bin/bash
# gem diff / bench / run end to end at small lengths, F32 and 16-bit caches:
# records are written with the documented fields, gates pass, bad usage exits 2.
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
rec="$TMP/diff/diff-cpu-fused_p4_t4-vs-baseline_p16-live1001-f32-seed1.json"
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
check "an F32 diff record has no kv_dtype field" bash -c "! grep -q '\"kv_dtype\"' '$rec'"

# 16-bit caches: the dtype in the case id, the geometry and a kv_dtype field
"$GEM" diff --lengths 1001 --threads 2 --kv-dtype bf16 --out "$TMP/diff16" >/dev/null
check "diff bf16 exits 0" test $? -eq 0
rec16="$TMP/diff16/diff-cpu-fused_p4_t4-vs-baseline_p16-live1001-bf16-seed1.json"
check "bf16 diff record named by case id" test -f "$rec16"
check "bf16 diff record geometry dtype" grep -q '"dtype": "bf16"' "$rec16"
check "bf16 diff record kv_dtype" grep -q '"kv_dtype"' "$rec16"
check "bf16 diff record passes" grep -q '"verdict": "pass"' "$rec16"
"$GEM" diff --lengths 1001 --threads 1 --k-dtype f16 --v-dtype bf16 --out "$TMP/diff16" >/dev/null
check "diff f16/bf16 exits 0" test $? -eq 0
check "mixed diff record named by case id" \
    test -f "$TMP/diff16/diff-cpu-fused_p4_t4-vs-baseline_p16-live1001-kf16_vbf16-seed1.json"
# the same inputs give different outputs once rounded: the record binds the dtype
o32=$(grep -A1 '"output_sha256"' "$rec" | tail -1)
o16=$(grep -A1 '"output_sha256"' "$rec16" | tail -1)
check "bf16 and f32 outputs differ" test "$o32" != "$o16"

# --design: the operator gate's routes (fused P 32 tile 4, baseline P 16) where the tuned
# default differs (P 31 at 8,191 rows); refused with the route options and on CUDA
"$GEM" diff --lengths 8191 --threads 2 --out "$TMP/diffd0" >/dev/null
check "diff default at 8191 is the tuned P 31" \
    test -f "$TMP/diffd0/diff-cpu-fused_p31_t4-vs-baseline_p16-live8191-f32-seed1.json"
"$GEM" diff --design --lengths 8191 --threads 2 --out "$TMP/diffd" >/dev/null
check "diff --design exits 0" test $? -eq 0
check "diff --design record is the design's geometry" \
    grep -q '"verdict": "pass"' "$TMP/diffd/diff-cpu-fused_p32_t4-vs-baseline_p16-live8191-f32-seed1.json"
"$GEM" diff --design --partitions 8 --lengths 1001 --out "$TMP/diffd2" 2>"$TMP/dd.err" >/dev/null
check "diff --design with --partitions exits 2" test $? -eq 2
check "diff --design with --partitions says why" grep -q "fixes both routes" "$TMP/dd.err"
"$GEM" diff --backend cuda --design --lengths 1001 --out "$TMP/diffd3" 2>"$TMP/dd.err" >/dev/null
check "diff --design on cuda exits 2" test $? -eq 2
check "diff --design on cuda says why" grep -q "runs on the CPU only" "$TMP/dd.err"

"$GEM" bench --lengths 2048 --rounds 2 --warmup 1 --bw-mib 64 --bw-reps 3 \
    --out "$TMP/bench.json" >"$TMP/bench.txt"
check "bench exits 0" test $? -eq 0
for key in '"schema": "gem.bench.v1"' '"read_bandwidth"' '"ratio_a_over_b"' \
           '"fraction_of_read_bandwidth"' '"verdict": "timed"'; do
    check "bench record has $key" grep -q "$key" "$TMP/bench.json"
done
check "bench prints the ratio" grep -q "A/B ratio median" "$TMP/bench.txt"
check "bench record: one call a sample by default" grep -q '"calls_per_sample": 1' "$TMP/bench.json"
"$GEM" bench --lengths 2048 --rounds 1 --warmup 0 --calls 3 --bw-mib 64 --bw-reps 1 \
    --out "$TMP/bench3.json" >"$TMP/bench3.txt"
check "bench --calls 3 exits 0" test $? -eq 0
check "bench --calls 3 says how it times" grep -q "3 calls queued back to back" "$TMP/bench3.txt"
check "bench --calls 3 record" grep -q '"calls_per_sample": 3' "$TMP/bench3.json"
check "bench record kv_dtype f32" grep -q '"k": "f32"' "$TMP/bench.json"
"$GEM" bench --lengths 2048 --rounds 1 --warmup 0 --bw-mib 64 --bw-reps 1 --kv-dtype f16 \
    --out "$TMP/bench16.json" >/dev/null
check "bench f16 exits 0" test $? -eq 0
check "bench f16 record verdict" grep -q '"verdict": "timed"' "$TMP/bench16.json"
check "bench f16 record kv_dtype" grep -q '"v": "f16"' "$TMP/bench16.json"
check "bench f16 kv_bytes are 2-byte elements" grep -q '"kv_bytes": 16777216' "$TMP/bench16.json"

"$GEM" run --live 3000 --json "$TMP/run.json" >"$TMP/run.txt"
check "run exits 0" test $? -eq 0
check "run prints a verdict" grep -q "verdict      PASS" "$TMP/run.txt"
check "run json pass" grep -q '"verdict": "pass"' "$TMP/run.json"
"$GEM" run --live 3000 --kv-dtype bf16 --v-dtype f16 --json "$TMP/run16.json" >"$TMP/run16.txt"
check "run bf16/f16 exits 0" test $? -eq 0
check "run bf16/f16 prints its types" grep -q "bf16 K / f16 V" "$TMP/run16.txt"
check "run bf16/f16 json kv_dtype" grep -q '"dtype": "kbf16_vf16"' "$TMP/run16.json"

for bad in "diff --lengths 0" "diff --tile 0" "diff --ref-tile 4" "bench --rounds 0" \
           "bench --a nosuch" "bench --backend tpu" "bench --calls 0" "bench --calls 65" \
           "run --live x" "run --bogus 1" \
           "diff --seed -1" "diff --kv-dtype f8" "bench --k-dtype F32" "run --v-dtype" \
           "run --kv-dtype fp16"; do
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
