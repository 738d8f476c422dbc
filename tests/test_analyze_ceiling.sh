#!/usr/bin/env bash
# gem analyze ceiling (analyze-fused-split-kv-ceiling.sh): hand-made profiles
# built from the design's stage figures reproduce its attribution (global
# attention 33.11% / 43.73% of whole-token time -> 9.06% / 6.86% required
# reduction); one tampered copy per defect class is rejected with one line,
# samples beyond any real time included; a wrong number of profiles, a
# missing file or an output over an input exit 2. The KV cache type is F32
# unless --kv-dtype names another type that every profile records; gem
# analyze stage-profile applies the same rules to one profile at its context.
#   usage: bash test_analyze_ceiling.sh <gem> <source-dir>
set -euo pipefail
GEM="$1"
SRC="$2"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. "$SRC/tests/analyze_lib.sh"
T="python3 $SRC/tests/tamper.py"
python3 "$SRC/tests/gen_records.py" "$GEM" "$WORK" profiles
P64="$WORK/profile-64k.json"
P128="$WORK/profile-128k.json"
A() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-ceiling.sh" "$@"; }

expect_pass good A "$P64" "$P128" --out "$WORK/fused-split-kv-ceiling.json"
fig() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=[x for x in d["contexts"] if x["context"]==int(sys.argv[2])][0]; print("%.2f" % c[sys.argv[3]])' "$WORK/fused-split-kv-ceiling.json" "$1" "$2"; }
check share-64k [ "$(fig 65536 global_attention_share_pct)" = "33.11" ]
check share-128k [ "$(fig 131072 global_attention_share_pct)" = "43.73" ]
check required-64k [ "$(fig 65536 required_reduction_pct)" = "9.06" ]
check required-128k [ "$(fig 131072 required_reduction_pct)" = "6.86" ]
check not-promotion grep -q '"promotion_claim": false' "$WORK/fused-split-kv-ceiling.json"
check binds-inputs grep -q "$(sha256sum "$P64" | cut -c1-64)" "$WORK/fused-split-kv-ceiling.json"
# The order of the profiles does not matter.
expect_pass reversed A "$P128" "$P64" --out "$WORK/rev.json"

t() { # t NAME CLASS OP PATH [VALUE]: tamper the 64K profile
  local name="$1" cls="$2"
  shift 2
  $T "$P64" "$WORK/$name.json" "$@"
  expect_fail "$name" "$cls" A "$WORK/$name.json" "$P128" --out "$WORK/x.json"
}
t missing "missing field" del repetitions
t extra "unexpected field" add note '"x"'
t type "wrong type" set context '"65536"'
t type-sample "wrong type" set stages_ms.score.3 '"3.12"'
t selector "wrong value" set selector '"fused"'
t geometry "wrong geometry" set geometry.dv 256
t geometry-calls "wrong geometry" set model.global_attention_calls 60
t context "wrong geometry" set context 32768
t nonfinite "non-finite figure" set whole_token_ms.2 null
t reps "threshold not met" set repetitions 2
t coverage "missing field" del stages_ms.value.14
t totals "wrong value" set attention_total_ms.0 9.0
# A sample changed consistently (stages still add up): only the digest sees it.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["stages_ms"]["score"][0]+=0.5; d["attention_total_ms"][0]+=0.5; json.dump(d,open(sys.argv[2],"w"))' "$P64" "$WORK/dg.json"
expect_fail digest "digest mismatch" A "$WORK/dg.json" "$P128"
t swapped-schema "file swapped" set schema '"gem.resources.v1"'
expect_fail swapped-context "file swapped" A "$P64" "$P64"
expect_usage one-profile "1 stage profiles given" A "$P64"
expect_usage three-profiles "3 stage profiles given" A "$P64" "$P128" "$P64"
# Samples beyond any real time (1e308 ms overflowed the figures to inf and the
# attribution was written without that context): refused, nothing written.
t huge-sample "figure out of range" set whole_token_ms.0 1e308
t huge-stage "figure out of range" set stages_ms.value.1 2e9
t negative-sample "figure out of range" set stages_ms.score.2 -0.5
check nothing-written-on-failure [ ! -e "$WORK/x.json" ]
t tool-commit "wrong value" set tool.git_commit '"HEAD\nunknown"'
t control-char "wrong value" set provenance '"made by hand\u001b[2J"'
expect_usage missing-file "No such file" A "$WORK/none.json" "$P128"
expect_usage out-is-input "same file as the input" A "$P64" "$P128" --out "$P64"

# KV cache type: F32 unless --kv-dtype names another, and then every profile must
# record exactly that type; the output states it.
check kv-dtype-default grep -q '"kv_dtype": "f32"' "$WORK/fused-split-kv-ceiling.json"
$T "$P64" "$WORK/b64.json" set geometry.dtype '"bf16"'
$T "$P128" "$WORK/b128.json" set geometry.dtype '"bf16"'
expect_fail bf16-without-flag "wrong geometry" A "$WORK/b64.json" "$WORK/b128.json" --out "$WORK/x.json"
expect_pass bf16-with-flag A "$WORK/b64.json" "$WORK/b128.json" --kv-dtype bf16 --out "$WORK/b.json"
check kv-dtype-bf16 grep -q '"kv_dtype": "bf16"' "$WORK/b.json"
check bf16-printed grep -q "context 65536 (bf16 KV): global attention 33.11%" "$WORK/out.txt"
check bf16-same-figures [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["contexts"] == json.load(open(sys.argv[2]))["contexts"])' "$WORK/b.json" "$WORK/fused-split-kv-ceiling.json")" = True ]
expect_fail f32-with-bf16-flag "wrong geometry" A "$P64" "$P128" --kv-dtype bf16 --out "$WORK/x.json"
expect_fail mixed-dtypes "wrong geometry" A "$WORK/b64.json" "$P128" --kv-dtype bf16 --out "$WORK/x.json"
expect_pass f32-flag A "$P64" "$P128" --kv-dtype f32 --out "$WORK/f.json"
expect_usage bad-kv-dtype "is not f32, bf16 or f16" A "$P64" "$P128" --kv-dtype f64
check nothing-written-on-dtype-failure [ ! -e "$WORK/x.json" ]

# The whole-token breakdown (optional; gem profile writes it): the measured BF16
# pair of results/cpu/model/stage-profile passes and the output gives its medians;
# stages that do not add up, calls that do not fit in the full-attention stage, an
# extra or a missing stage, a sample missing and a breakdown removed are refused.
M64="$SRC/results/cpu/model/stage-profile/stage-profile-64k.json"
M128="$SRC/results/cpu/model/stage-profile/stage-profile-128k.json"
expect_pass measured-pair A "$M64" "$M128" --kv-dtype bf16 --out "$WORK/m.json"
check measured-medians grep -q '"whole_token_stage_median_ms"' "$WORK/m.json"
check handmade-no-medians bash -c "! grep -q whole_token_stage_median_ms '$WORK/b.json'"
w() { # w NAME CLASS OP PATH [VALUE]: tamper the measured 64K profile
  local name="$1" cls="$2"
  shift 2
  $T "$M64" "$WORK/$name.json" "$@"
  expect_fail "$name" "$cls" A "$WORK/$name.json" "$M128" --kv-dtype bf16 --out "$WORK/x.json"
}
w whole-extra "unexpected field" add whole_token_stages_ms.other 1.0
w whole-missing-stage "missing field" del whole_token_stages_ms.mlp
w whole-coverage "missing field" del whole_token_stages_ms.logits.3
w whole-null "non-finite figure" set whole_token_stages_ms.norms.1 null
w whole-sum "wrong value" set whole_token_stages_ms.mlp.0 500.0
w whole-removed "digest mismatch" del whole_token_stages_ms
# Time moved from full attention to the MLP (the sum still holds): the ten calls no
# longer fit in the full-attention stage.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); w=d["whole_token_stages_ms"]; x=w["full_attention"][0]*0.5; w["full_attention"][0]-=x; w["mlp"][0]+=x; json.dump(d,open(sys.argv[2],"w"))' "$M64" "$WORK/wfit.json"
expect_fail whole-calls-fit "figures disagree" A "$WORK/wfit.json" "$M128" --kv-dtype bf16 --out "$WORK/x.json"
check nothing-written-on-breakdown-failure [ ! -e "$WORK/x.json" ]

# One profile at the context it records: every rule but the two contexts.
S() { GEM_QUIET=1 "$GEM" analyze stage-profile "$@"; }
expect_pass stage-profile-64k S "$P64"
check stage-profile-figures grep -q "context 65536 (f32 KV, 15 samples): global attention 33.11%" "$WORK/out.txt"
expect_pass stage-profile-128k S "$P128"
expect_pass stage-profile-bf16 S "$WORK/b64.json" --kv-dtype bf16
expect_fail stage-profile-bf16-without-flag "wrong geometry" S "$WORK/b64.json"
$T "$P64" "$WORK/c1000.json" set context 1000
expect_pass stage-profile-any-context S "$WORK/c1000.json"
$T "$P64" "$WORK/c0.json" set context 0
expect_fail stage-profile-context-0 "wrong geometry" S "$WORK/c0.json"
$T "$P64" "$WORK/cs.json" set context '"65536"'
expect_fail stage-profile-context-type "wrong type" S "$WORK/cs.json"
expect_fail stage-profile-digest "digest mismatch" S "$WORK/dg.json"
expect_fail stage-profile-reps "threshold not met" S "$WORK/reps.json"
expect_fail stage-profile-geometry "wrong geometry" S "$WORK/geometry.json"
$T "$P64" "$WORK/l6.json" set model.n_layers 6
expect_fail stage-profile-layers "wrong geometry" S "$WORK/l6.json"
expect_usage stage-profile-none "no stage profile given" S
expect_usage stage-profile-two "unexpected argument" S "$P64" "$P128"
expect_usage stage-profile-missing "No such file" S "$WORK/none.json"

summary test_analyze_ceiling
