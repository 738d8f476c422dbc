#!/usr/bin/env bash
# gem profile --stage-profile: the ceiling screen's gem.stage_profile.v1 from a
# real run. On the 60-layer synthetic model (the 31B layer pattern and the real
# full-attention shape) at a short context, with F32 and with BF16 caches, the
# profile meets every rule of the screen at its context (gem analyze
# stage-profile); its samples digest is the one an independent implementation
# (Python) computes; the attention total is the sum of the four stages, the
# whole-token stages add up to the whole token and hold the ten calls. On the
# tiny model (6 layers) the same profile is refused as a wrong geometry.
# --stage-profile with --k-from-v or --fused-only (no baseline route) or over
# the model file exits 2; --fused-only writes a record of the fused route alone.
#   usage: bash test_stage_profile.sh <gem> <source-dir>
set -euo pipefail
GEM="$1"
SRC="$2"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. "$SRC/tests/analyze_lib.sh"
export GEM_QUIET=1

"$GEM" synth --preset tiny --out "$WORK/tiny.gguf" >/dev/null
"$GEM" synth --preset diff --out "$WORK/diff60.gguf" >/dev/null
P() { "$GEM" profile --reps 3 --samples 2 --bw-mib 16 --threads 2 "$@"; }
S() { "$GEM" analyze stage-profile "$@"; }

# The 60-layer model, F32 caches: both records, the stage profile accepted.
check profile-f32 P --model "$WORK/diff60.gguf" --context 300 --prompt 40 \
  --out "$WORK/model.json" --stage-profile "$WORK/stage.json" >"$WORK/profile.txt"
check model-profile-written grep -q '"schema": "gem.model_profile.v1"' "$WORK/model.json"
check stage-profile-written grep -q '"schema": "gem.stage_profile.v1"' "$WORK/stage.json"
check coverage-printed grep -q "the four stages cover" "$WORK/profile.txt"
expect_pass stage-profile-f32 S "$WORK/stage.json"
check figures-printed grep -q "context 300 (f32 KV, 6 samples): global attention" "$WORK/out.txt"
# The digest, the totals and the series recomputed independently.
check independent-digest python3 - "$WORK/stage.json" <<'EOF'
import hashlib, json, sys
d = json.load(open(sys.argv[1]))
sm = d["stages_ms"]
series = [("score", sm["score"]), ("normalize", sm["normalize"]), ("value", sm["value"]),
          ("reduce", sm["reduce"]), ("attention_total_ms", d["attention_total_ms"]),
          ("whole_token_ms", d["whole_token_ms"])]
whole_names = ["embedding", "norms", "projections", "sliding_attention", "full_attention",
               "mlp", "logits"]
ws = d["whole_token_stages_ms"]
assert sorted(ws) == sorted(whole_names)
series += [("whole_token_stages_ms." + k, ws[k]) for k in whole_names]
text = "".join("%s:%s\n" % (n, ",".join("%.17g" % float(x) for x in v)) for n, v in series)
assert hashlib.sha256(text.encode()).hexdigest() == d["samples_sha256"]
n = d["repetitions"] * d["samples_per_repetition"]
assert n == 6 and all(len(v) == n for _, v in series)
for i in range(n):
    # the same additions in the same order: exactly equal
    assert sm["score"][i] + sm["normalize"][i] + sm["value"][i] + sm["reduce"][i] == \
        d["attention_total_ms"][i]
    assert sm["score"][i] > 0 and sm["value"][i] > 0
    assert d["whole_token_ms"][i] > 10 * d["attention_total_ms"][i]
    parts = sum(ws[k][i] for k in whole_names)
    assert abs(parts - d["whole_token_ms"][i]) <= 1e-9 * d["whole_token_ms"][i]
    # the ten calls' stages were timed inside the full-attention stage
    assert 10 * d["attention_total_ms"][i] <= ws["full_attention"][i]
assert d["geometry"] == {"n_q_heads": 32, "n_kv_heads": 4, "dk": 512, "dv": 512,
                         "dtype": "f32", "window": 0}
assert d["model"] == {"n_layers": 60, "global_attention_calls": 10}
assert d["selector"] == "baseline" and d["context"] == 300
# whole_token_ms and its stages are the baseline route's steps timed per stage in the model
# profile (its whole_token_ms are the steps timed whole, one before each of these)
base = json.load(open(sys.argv[1].replace("stage", "model")))["routes"]["baseline"]
assert d["whole_token_ms"] == base["staged_whole_token_ms"] and ws == base["stages_ms"]
assert len(base["whole_token_ms"]) == n and all(v > 0 for v in base["whole_token_ms"])
EOF

# BF16 caches: the type is recorded; the screen takes it only when asked for.
check profile-bf16 P --model "$WORK/diff60.gguf" --context 300 --prompt 40 --kv-dtype bf16 \
  --stage-profile "$WORK/stage-bf16.json" >/dev/null
check bf16-recorded grep -q '"dtype": "bf16"' "$WORK/stage-bf16.json"
expect_pass stage-profile-bf16 S "$WORK/stage-bf16.json" --kv-dtype bf16
expect_fail stage-profile-bf16-as-f32 "wrong geometry" S "$WORK/stage-bf16.json"

# The tiny model has 6 layers with 2 full ones: not the design's 60 / 10.
check profile-tiny P --model "$WORK/tiny.gguf" --context 40 --prompt 20 \
  --stage-profile "$WORK/tiny.json" >/dev/null
check tiny-written grep -q '"global_attention_calls": 2' "$WORK/tiny.json"
expect_fail tiny-refused "wrong geometry" S "$WORK/tiny.json"

# --fused-only: the fused route alone, K stored (for caches the baseline does not read): the
# record holds that route alone.
check profile-fused-only P --model "$WORK/tiny.gguf" --context 40 --prompt 20 --kv-dtype bf16 \
  --fused-only --reps 2 --out "$WORK/fused-only.json" >"$WORK/fused-only.txt"
check fused-only-record python3 - "$WORK/fused-only.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert sorted(d["routes"]) == ["fused"], d["routes"].keys()
assert d["context"]["kv_dtype"] == "bf16" and d["context"]["k_from_v"] is False
assert len(d["routes"]["fused"]["whole_token_ms"]) == 4
EOF
check fused-only-no-baseline-line sh -c "! grep -q '^baseline' '$WORK/fused-only.txt'"

# --greedy: greedy decoding as an application runs it, after the repetitions, on the last route
# timed: four runs of its tokens (A B B A), the positions they take counted in the capacity and
# in the spacing of the contexts.
check profile-greedy P --model "$WORK/tiny.gguf" --context 40,90 --prompt 20 --reps 1 \
  --greedy 6 --out "$WORK/greedy.json" >"$WORK/greedy.txt"
check greedy-record python3 - "$WORK/greedy-ctx40.json" "$WORK/greedy-ctx90.json" <<'EOF'
import json, math, sys
for path in sys.argv[1:]:
    g = json.load(open(path))["greedy"]
    assert g["route"] == "fused" and g["tokens_per_call"] == 6, g
    for k in ("greedy_ms_per_token", "token_by_token_ms_per_token"):
        assert len(g[k]) == 2 and all(math.isfinite(x) and x > 0 for x in g[k]), g
    assert math.isfinite(g["floor_ms"]) and g["floor_ms"] > 0, g
EOF
check greedy-lines test "$(grep -c '^fused .*greedy decoding, 6 tokens a call' "$WORK/greedy.txt")" = 2
# (4 x 1 x 2 + 2 steps of the repetitions and warm-up, 4 x 6 of --greedy)
expect_usage greedy-contexts "must be at least 34" \
  P --model "$WORK/tiny.gguf" --context 40,67 --prompt 20 --reps 1 --greedy 6
expect_usage greedy-range "--greedy '-1' is not an integer" \
  P --model "$WORK/tiny.gguf" --context 40 --prompt 20 --greedy -1

# Usage.
expect_usage no-baseline-with-fused-only "--fused-only leaves out" \
  P --model "$WORK/tiny.gguf" --context 40 --prompt 20 --fused-only --stage-profile "$WORK/x.json"
expect_usage no-baseline-with-k-from-v "--k-from-v leaves out" \
  P --model "$WORK/tiny.gguf" --context 40 --prompt 20 --k-from-v --stage-profile "$WORK/x.json"
expect_usage not-over-the-model "same file as the input" \
  P --model "$WORK/tiny.gguf" --context 40 --prompt 20 --stage-profile "$WORK/tiny.gguf"
expect_usage not-both-outputs "name the same file" \
  P --model "$WORK/tiny.gguf" --context 40 --prompt 20 --stage-profile "$WORK/y.json" \
  --out "$WORK/y.json"
expect_usage too-many-samples "at most 100000 samples" \
  P --model "$WORK/tiny.gguf" --reps 1000 --samples 101 --stage-profile "$WORK/x.json"
check nothing-written test ! -e "$WORK/x.json" -a ! -e "$WORK/y.json"

summary test_stage_profile
