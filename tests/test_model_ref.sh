#!/bin/bash
# The Gemma 4 decoder against transformers' Gemma 4 model: regenerate the tiny
# synthetic GGUF with `gem synth`, check it is byte for byte the file the
# reference was made from (scripts/reference/gemma4-tiny.expected records its
# SHA-256), then hold gem to the reference with both full-attention routes and
# two thread counts: the same greedy tokens (20 steps), the same top-10 sets,
# last-prompt-position logits within 1e-3 of float64, and seven texts tokenized
# to the ids of a `tokenizers` BPE with byte fallback on the same vocabulary; the
# same with K rebuilt from V (--k-from-v). Also gem generate end to end (also with
# --k-from-v: the reference's tokens, half the full layers' cache bytes), gem
# model-diff both ways, gem profile, gem synth --type q4_k_m, and bad model files / bad usage
# exiting 2 with one line.
# usage: bash test_model_ref.sh <gem binary> <source dir>
set -u
GEM=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export GEM_QUIET=1
fail=0; pass=0
check() { # description, command...
    local what=$1; shift
    if "$@"; then pass=$((pass + 1)); else echo "FAIL: $what"; fail=$((fail + 1)); fi
}
EXP="$SRC/scripts/reference/gemma4-tiny.expected"

"$GEM" synth --preset tiny --out "$TMP/tiny.gguf" >"$TMP/synth.txt"
check "synth exits 0" test $? -eq 0
want=$(awk '$1 == "model_sha256" {print $2}' "$EXP")
got=$(cut -d' ' -f1 "$TMP/synth.txt")
check "gem synth regenerates the reference's file (sha256 $want)" test "$got" = "$want"

for attn in fused baseline; do
    for t in 1 2; do
        "$GEM" model-check --model "$TMP/tiny.gguf" --expected "$EXP" --attn $attn --threads $t \
            >"$TMP/check.txt"
        check "model-check $attn, $t threads passes" test $? -eq 0
        check "model-check $attn, $t threads reports 20/20 tokens" grep -q "greedy tokens 20/20" "$TMP/check.txt"
        check "model-check $attn, $t threads tokenizes 7/7 texts" grep -q "as the reference 7/7" "$TMP/check.txt"
    done
done
for t in 1 2; do
    "$GEM" model-check --model "$TMP/tiny.gguf" --expected "$EXP" --k-from-v --threads $t \
        >"$TMP/check.txt"
    check "model-check --k-from-v, $t threads passes" test $? -eq 0
    check "model-check --k-from-v, $t threads reports 20/20 tokens" grep -q "greedy tokens 20/20" "$TMP/check.txt"
    check "model-check --k-from-v, $t threads says so" grep -q "attn fused (K from V)" "$TMP/check.txt"
done

# gem generate: streaming text, --json with the documented fields, same tokens as the reference
prompt=$(awk '$1 == "prompt" {for (i = 3; i <= NF; i++) printf "%s%s", $i, (i < NF ? "," : "")}' "$EXP")
ref_tokens=$(awk '$1 == "f64.tokens" {for (i = 3; i <= NF; i++) printf "%s%s", $i, (i < NF ? "," : "")}' "$EXP")
"$GEM" generate --model "$TMP/tiny.gguf" --prompt-tokens "$prompt" -n 20 --ignore-eos \
    --json "$TMP/gen.json" >"$TMP/gen.txt"
check "generate exits 0" test $? -eq 0
for key in '"prompt_tokens"' '"tokens"' '"steps"' '"top10"' '"token"'; do
    check "generate json has $key" grep -q "$key" "$TMP/gen.json"
done
gen_tokens=$(tr -d ' \n' <"$TMP/gen.json" | sed 's/.*"tokens":\[\([0-9,]*\)\].*/\1/')
check "generate's tokens are the reference's" test "$gen_tokens" = "$ref_tokens"
# --k-from-v: the same tokens; the two full layers (4 KV heads x 512, 44 + 20 rows, F32)
# hold V alone: 2 x 64 x 4 x 512 x 4 = 1048576 bytes saved, half of their caches
"$GEM" generate --model "$TMP/tiny.gguf" --prompt-tokens "$prompt" -n 20 --ignore-eos \
    --k-from-v --json "$TMP/gen-kfv.json" >"$TMP/gen-kfv.txt"
check "generate --k-from-v exits 0" test $? -eq 0
kfv_tokens=$(tr -d ' \n' <"$TMP/gen-kfv.json" | sed 's/.*"tokens":\[\([0-9,]*\)\].*/\1/')
check "generate --k-from-v's tokens are the reference's" test "$kfv_tokens" = "$ref_tokens"
kv_of() { # json file, key: an integer of the kv_cache object
    tr -d ' \n' <"$1" | sed "s/.*\"kv_cache\":{[^}]*\"$2\":\([0-9]*\).*/\1/"
}
check "generate --k-from-v reports V-only layers" grep -q '"k_from_v": true' "$TMP/gen-kfv.json"
check "generate --k-from-v saves the full layers' K" test "$(kv_of "$TMP/gen-kfv.json" saved_bytes)" = 1048576
check "generate saves nothing without --k-from-v" test "$(kv_of "$TMP/gen.json" saved_bytes)" = 0
check "generate --k-from-v holds what it saves less" \
    test $(($(kv_of "$TMP/gen.json" held_bytes) - $(kv_of "$TMP/gen-kfv.json" held_bytes))) = 1048576
"$GEM" generate --model "$TMP/tiny.gguf" --prompt "The quick brown fox" -n 8 --threads 2 >"$TMP/text.txt"
check "generate from text exits 0" test $? -eq 0
check "generate prints text" test -s "$TMP/text.txt"
env -u GEM_QUIET "$GEM" generate --model "$TMP/tiny.gguf" --prompt-tokens "$prompt" -n 1 \
    >/dev/null 2>"$TMP/gen1.err"
check "generate -n 1 exits 0" test $? -eq 0
check "generate -n 1 times no decode step" grep -q "no decode step to time" "$TMP/gen1.err"
env -u GEM_QUIET "$GEM" generate --model "$TMP/tiny.gguf" --prompt-tokens "$prompt" -n 4 --ignore-eos \
    >/dev/null 2>"$TMP/gen4.err"
check "generate -n 4 counts 3 decode steps" grep -q "generated 4 tokens, 3 decode steps" "$TMP/gen4.err"

# gem model-diff at small contexts: both routes agree, records carry the documented fields and
# the case id the correctness gate rebuilds, model-<model.name>-<prompt.id>-ctx<context_tokens>
# (the gate's own record check on model-diff's records: test_model_diff_records.c)
"$GEM" model-diff --model "$TMP/tiny.gguf" --contexts 30,31 --steps 8 --threads 2 \
    --out "$TMP/md" >"$TMP/md.txt"
check "model-diff exits 0" test $? -eq 0
rec="$TMP/md/model-diff-gem-synth-tiny-ctx31-seed1.json"
check "model-diff record named by context" test -f "$rec"
for key in '"schema": "gem.model_diff.v1"' '"name": "gem model-diff"' '"global_layers"' \
           '"weights_sha256"' '"context_tokens": 31' '"production_before": "baseline"' \
           '"candidate_route": "fused"' '"logits_sha256_repeat"' '"baseline_tokens"' \
           '"candidate_tokens"' '"steps": 8' '"verdict": "pass"' \
           '"id": "synthetic-seed1-len31"' \
           '"case_id": "model-gem-synth-tiny-synthetic-seed1-len31-ctx31"'; do
    check "model-diff record has $key" grep -q "$key" "$rec"
done
check "model-diff prints a pass per context" test "$(grep -c ': pass (' "$TMP/md.txt")" -eq 2
check "model-diff records carry no comparison field" bash -c "! grep -q '\"comparison\"' '$rec'"
# --compare k-from-v: explicit K against K rebuilt from V, both fused, records of their own
"$GEM" model-diff --model "$TMP/tiny.gguf" --contexts 30,31 --steps 8 --threads 2 \
    --compare k-from-v --out "$TMP/md" >"$TMP/md-kfv.txt"
check "model-diff --compare k-from-v exits 0" test $? -eq 0
rec_kfv="$TMP/md/model-diff-gem-synth-tiny-ctx31-seed1-k-from-v.json"
check "model-diff --compare k-from-v record named apart" test -f "$rec_kfv"
for key in '"schema": "gem.model_diff.v1"' '"comparison": "k-from-v"' \
           '"case_id": "model-gem-synth-tiny-ctx31-explicit-vs-k-from-v-seed1"' \
           '"baseline_route": "fused"' '"candidate_route": "fused"' '"steps": 8' \
           '"verdict": "pass"'; do
    check "model-diff k-from-v record has $key" grep -q "$key" "$rec_kfv"
done
check "model-diff --compare k-from-v prints a pass per context" \
    test "$(grep -c ': pass (' "$TMP/md-kfv.txt")" -eq 2
check "model-diff --compare k-from-v prints the saving" grep -q "K rebuilt from V in 2 full layers" "$TMP/md-kfv.txt"

# gem profile: stages and the floor
"$GEM" profile --model "$TMP/tiny.gguf" --context 40 --prompt 20 --reps 3 --samples 2 \
    --bw-mib 64 --out "$TMP/profile.json" >"$TMP/profile.txt"
check "profile exits 0" test $? -eq 0
for key in '"schema": "gem.model_profile.v1"' '"full_attention"' '"sliding_attention"' \
           '"projections"' '"x_floor"' '"read_bandwidth_bytes_per_s"' '"repeat (timing only)"'; do
    check "profile record has $key" grep -q "$key" "$TMP/profile.json"
done
# several contexts on one session: one record per context, named by it
"$GEM" profile --model "$TMP/tiny.gguf" --context 40,70 --prompt 20 --reps 3 --samples 2 \
    --bw-mib 64 --out "$TMP/profile-multi.json" >"$TMP/profile-multi.txt"
check "profile --context 40,70 exits 0" test $? -eq 0
check "profile --context 40,70 writes a record per context" \
    test -f "$TMP/profile-multi-ctx40.json" -a -f "$TMP/profile-multi-ctx70.json"
check "profile --context 40,70: the second record is at 70 positions" \
    grep -q '"positions": 70' "$TMP/profile-multi-ctx70.json"
# gem synth --no-matrices: the same length, the matrices read as zero weights, a model that loads
"$GEM" synth --preset tiny --no-matrices --out "$TMP/tiny-nm.gguf" >/dev/null
check "synth --no-matrices exits 0" test $? -eq 0
check "synth --no-matrices: the same length as the full file" \
    test "$(stat -c %s "$TMP/tiny-nm.gguf")" -eq "$(stat -c %s "$TMP/tiny.gguf")"
"$GEM" generate --model "$TMP/tiny-nm.gguf" --prompt-tokens 2,317 -n 2 >/dev/null 2>&1
check "a file without its matrices loads and runs" test $? -eq 0
"$GEM" profile --model "$TMP/tiny.gguf" --context 40 --prompt 20 --reps 3 --samples 2 \
    --bw-mib 64 --k-from-v --out "$TMP/profile-kfv.json" >"$TMP/profile-kfv.txt"
check "profile --k-from-v exits 0" test $? -eq 0
check "profile --k-from-v records it" grep -q '"k_from_v": true' "$TMP/profile-kfv.json"
check "profile --k-from-v times the fused route alone" bash -c "! grep -q '\"baseline\"' '$TMP/profile-kfv.json'"
check "profile --k-from-v prints the saving" grep -q "K rebuilt from V in 2 full layers" "$TMP/profile-kfv.txt"

# bad input: one line on stderr, exit 2
bad() { # description, command...
    local what=$1; shift
    "$@" >/dev/null 2>"$TMP/err.txt"
    local rc=$?
    check "$what exits 2" test $rc -eq 2
    check "$what says why in one line" test "$(wc -l <"$TMP/err.txt")" -eq 1
}
head -c 100000 "$TMP/tiny.gguf" >"$TMP/trunc.gguf"
bad "truncated model" "$GEM" generate --model "$TMP/trunc.gguf" --prompt x
printf 'not a gguf file at all' >"$TMP/junk.gguf"
bad "not a GGUF file" "$GEM" generate --model "$TMP/junk.gguf" --prompt x
bad "missing model" "$GEM" generate --model "$TMP/none.gguf" --prompt x
sed 's/blk\.3\.ffn_up\.weight/blk.3.ffn_uX.weight/' "$TMP/tiny.gguf" >"$TMP/missing.gguf"
bad "missing tensor" "$GEM" generate --model "$TMP/missing.gguf" --prompt x
check "missing tensor is named" grep -q "blk.3.ffn_up.weight" "$TMP/err.txt"
bad "token id outside the vocabulary" "$GEM" generate --model "$TMP/tiny.gguf" --prompt-tokens 2,512
bad "unknown route" "$GEM" generate --model "$TMP/tiny.gguf" --prompt x --attn other
bad "K from V on the baseline route" "$GEM" generate --model "$TMP/tiny.gguf" --prompt x --k-from-v --attn baseline
check "K from V on the baseline route says why" grep -q "fused route" "$TMP/err.txt"
bad "model-check K from V on the baseline route" "$GEM" model-check --model "$TMP/tiny.gguf" --expected "$EXP" --k-from-v --attn baseline
bad "unknown model-diff comparison" "$GEM" model-diff --model "$TMP/tiny.gguf" --compare other
bad "no prompt" "$GEM" generate --model "$TMP/tiny.gguf"
bad "synth without --out" "$GEM" synth --preset tiny
bad "synth --type q5_k_m" "$GEM" synth --preset tiny --type q5_k_m --out "$TMP/bad-type.gguf"
check "synth --type q5_k_m names the valid types, q4_k_m among them" \
    grep -q "'q5_k_m' is not one of .*mixed, q4_k_m" "$TMP/err.txt"
# gem synth --type q4_k_m: its help line, and a tiny model with Q4_K_M's types (hidden 256, so
# that Q4_K and Q6_K fit the rows) that generates
"$GEM" synth --help | grep -q "q4_k_m"
check "synth --help lists q4_k_m" test $? -eq 0
"$GEM" synth --preset tiny --type q4_k_m --embd 256 --out "$TMP/tiny-q4km.gguf" >/dev/null
check "synth --type q4_k_m exits 0" test $? -eq 0
"$GEM" generate --model "$TMP/tiny-q4km.gguf" --prompt-tokens 2,317,362 -n 4 >/dev/null 2>&1
check "a q4_k_m model loads and generates" test $? -eq 0

# The decoder on the GPU against the same reference, and against the CPU decoder
# (model-diff --compare backends). Without a GPU (or CUDA in the build) each exits 2
# with one line saying so, and the GPU checks are reported as not run.
"$GEM" model-check --model "$TMP/tiny.gguf" --expected "$EXP" --backend cuda >"$TMP/check-cuda.txt" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -qE "no CUDA backend|no usable CUDA device" "$TMP/check-cuda.txt"; then
    check "model-check --backend cuda without a GPU: one line" test "$(wc -l <"$TMP/check-cuda.txt")" -le 2
    echo "test_model_ref: no CUDA device here; the GPU model checks did not run"
else
    check "model-check --backend cuda passes" test $rc -eq 0
    check "model-check --backend cuda reports 20/20 tokens" grep -q "greedy tokens 20/20" "$TMP/check-cuda.txt"
    "$GEM" model-check --model "$TMP/tiny.gguf" --expected "$EXP" --backend cuda --attn baseline \
        >"$TMP/check-cuda-b.txt" 2>&1
    check "model-check --backend cuda --attn baseline passes" test $? -eq 0
    "$GEM" model-check --model "$TMP/tiny.gguf" --expected "$EXP" --backend cuda --k-from-v \
        >"$TMP/check-cuda-kfv.txt" 2>&1
    check "model-check --backend cuda --k-from-v passes" test $? -eq 0
    "$GEM" model-diff --model "$TMP/tiny.gguf" --contexts 30,31 --steps 8 --compare backends \
        --out "$TMP/md" >"$TMP/md-backends.txt" 2>&1
    check "model-diff --compare backends exits 0" test $? -eq 0
    rec_b="$TMP/md/model-diff-gem-synth-tiny-ctx31-seed1-backends.json"
    for key in '"comparison": "backends"' '"logits_max_abs_diff"' '"logits_tolerance"'; do
        check "model-diff backends record has $key" grep -q "$key" "$rec_b"
    done
    check "model-diff --compare backends prints a pass per context" \
        test "$(grep -c ': pass (' "$TMP/md-backends.txt")" -eq 2
    "$GEM" model-diff --model "$TMP/tiny.gguf" --contexts 30,31 --steps 8 --backend cuda \
        --out "$TMP/md-cuda" >"$TMP/md-cuda.txt" 2>&1
    check "model-diff --backend cuda (routes) exits 0" test $? -eq 0
    "$GEM" generate --model "$TMP/tiny.gguf" --prompt-tokens 2,317,362 -n 6 --backend cuda \
        --json "$TMP/gen-cuda.json" >/dev/null 2>"$TMP/gen-cuda.txt"
    check "generate --backend cuda exits 0" test $? -eq 0
fi
bad "profile contexts closer than the steps timed" "$GEM" profile --model "$TMP/tiny.gguf" \
    --context 40,45 --prompt 20 --reps 3 --samples 2
bad "--random-weights without --backend cuda" "$GEM" profile --model "$TMP/tiny.gguf" --random-weights 3
bad "--backend other" "$GEM" generate --model "$TMP/tiny.gguf" --prompt x --backend tpu
bad "--compare backends with --backend" "$GEM" model-diff --model "$TMP/tiny.gguf" --compare backends --backend cuda

echo "test_model_ref: $pass passed, $fail failed"
test $fail -eq 0
