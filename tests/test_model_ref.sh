#!/bin/bash
# The Gemma 4 decoder against transformers' Gemma 4 model: regenerate the tiny
# synthetic GGUF with `gem synth`, check it is byte for byte the file the
# reference was made from (scripts/reference/gemma4-tiny.expected records its
# SHA-256), then hold gem to the reference with both full-attention routes and
# two thread counts: the same greedy tokens (20 steps), the same top-10 sets,
# last-prompt-position logits within 1e-3 of float64, and seven texts tokenized
# to the ids of a `tokenizers` BPE with byte fallback on the same vocabulary. Also gem generate end to
# end and bad model files / bad usage exiting 2 with one line.
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
"$GEM" generate --model "$TMP/tiny.gguf" --prompt "The quick brown fox" -n 8 --threads 2 >"$TMP/text.txt"
check "generate from text exits 0" test $? -eq 0
check "generate prints text" test -s "$TMP/text.txt"

# gem model-diff at small contexts: both routes agree, records carry the documented fields
"$GEM" model-diff --model "$TMP/tiny.gguf" --contexts 30,31 --steps 8 --threads 2 \
    --out "$TMP/md" >"$TMP/md.txt"
check "model-diff exits 0" test $? -eq 0
rec="$TMP/md/model-diff-gem-synth-tiny-ctx31-seed1.json"
check "model-diff record named by context" test -f "$rec"
for key in '"schema": "gem.model_diff.v1"' '"name": "gem model-diff"' '"global_layers"' \
           '"weights_sha256"' '"context_tokens": 31' '"production_before": "baseline"' \
           '"candidate_route": "fused"' '"logits_sha256_repeat"' '"baseline_tokens"' \
           '"candidate_tokens"' '"steps": 8' '"verdict": "pass"'; do
    check "model-diff record has $key" grep -q "$key" "$rec"
done
check "model-diff prints a pass per context" test "$(grep -c ': pass (' "$TMP/md.txt")" -eq 2

# gem profile: stages and the floor
"$GEM" profile --model "$TMP/tiny.gguf" --context 40 --prompt 20 --reps 3 --samples 2 \
    --bw-mib 64 --out "$TMP/profile.json" >"$TMP/profile.txt"
check "profile exits 0" test $? -eq 0
for key in '"schema": "gem.model_profile.v1"' '"full_attention"' '"sliding_attention"' \
           '"projections"' '"x_floor"' '"read_bandwidth_bytes_per_s"' '"repeat (timing only)"'; do
    check "profile record has $key" grep -q "$key" "$TMP/profile.json"
done

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
bad "no prompt" "$GEM" generate --model "$TMP/tiny.gguf"
bad "synth without --out" "$GEM" synth --preset tiny

echo "test_model_ref: $pass passed, $fail failed"
test $fail -eq 0
