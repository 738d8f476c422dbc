#!/usr/bin/env bash
# gem analyze ceiling (analyze-fused-split-kv-ceiling.sh): hand-made profiles
# built from the design's stage figures reproduce its attribution (global
# attention 33.11% / 43.73% of whole-token time -> 9.06% / 6.86% required
# reduction); one tampered copy per defect class is rejected with one line,
# samples beyond any real time included; a wrong number of profiles, a
# missing file or an output over an input exit 2.
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

summary test_analyze_ceiling
