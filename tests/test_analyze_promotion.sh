#!/usr/bin/env bash
# gem analyze promotion: the design's promotion decision on whole-token time.
# Hand-made gem.model_profile.v1 records with chosen per-repetition gains give
# a promote, a keep-baseline at a 2% gain, a keep-baseline where the overall
# gain is above 3% but one repetition's is not, a short-context regression, and
# a short-context slowdown inside its spread; the receipt binds every record and
# --check re-derives it (a changed record or an edited receipt fails). Every
# tampered record is rejected with exit 1 and one line naming the defect class;
# a missing file, a wrong number of long records or an output over an input
# exits 2. Real records: gem profile on the tiny synthetic model (small contexts,
# --any-long-contexts) and the committed 64K/128K pair.
#   usage: bash test_analyze_promotion.sh <gem> <source-dir>
set -euo pipefail
GEM="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" # absolute: some checks run elsewhere
SRC="$2"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. "$SRC/tests/analyze_lib.sh"
T="python3 $SRC/tests/tamper.py"
A() { "$GEM" analyze promotion "$@"; }

# gen.py OUT CONTEXT RATIOS [key=value...]: a record at CONTEXT whose fused
# route takes RATIOS[r] (comma-separated) of the baseline's time in repetition
# r. Samples jitter by +-0.4% around each repetition's median, the fused
# samples in another order; drift=D0,D1,.. moves whole repetitions (both routes).
cat >"$WORK/gen.py" <<'EOF'
import json, statistics, sys
out, context, ratios = sys.argv[1], int(sys.argv[2]), [float(x) for x in sys.argv[3].split(",")]
opt = dict(a.split("=", 1) for a in sys.argv[4:])
reps, samples = len(ratios), int(opt.get("samples", 5))
base = float(opt.get("base", 100.0)) * (1 + context / 131072)
drift = [float(x) for x in opt["drift"].split(",")] if "drift" in opt else [0.0] * reps
jit = [(k - (samples - 1) / 2) * 0.002 for k in range(samples)]
b, f = [], []
for r in range(reps):
    for k in range(samples):
        b.append(base * (1 + drift[r]) * (1 + jit[k]))
        f.append(base * (1 + drift[r]) * ratios[r] * (1 + jit[(k + 2) % samples]))
def route(w):
    m = statistics.median(w)
    return {"whole_token_ms": w, "floor_ms": [base * 0.5] * len(w), "whole_token_median_ms": m,
            "tokens_per_s": 1e3 / m, "floor_median_ms": base * 0.5, "x_floor": m / (base * 0.5)}
doc = {
    "schema": "gem.model_profile.v1",
    "tool": {"name": "gem profile", "version": "0.1.0", "git_commit": "unknown"},
    "model": {"path": "m.gguf", "name": opt.get("name", "gem-synth-diff60"), "n_layers": 60,
              "full_layers": 10, "n_embd": 64, "weight_bytes_per_token": 1000000,
              "weights_sha256": opt.get("sha", "ab" * 32)},
    "machine": {"cpu": opt.get("cpu", "Test CPU, 2 threads"), "threads": 2,
                "read_bandwidth_bytes_per_s": 1.7e10 + context},
    "context": {"positions": context, "evaluated": 64, "fill": "repeat (timing only)",
                "kv_dtype": opt.get("kv", "f32"), "k_from_v": False,
                "kv_cache_held_bytes": 4096, "kv_cache_saved_bytes": 0},
    "repetitions": reps, "samples_per_repetition": samples,
    "order": "ABBA over repetitions, consecutive tokens",
    "routes": {"baseline": route(b), "fused": route(f)},
}
if "backend" in opt:
    doc["backend"] = opt["backend"]
if "gpu" in opt:  # gem profile --backend cuda names the GPU and no threads
    doc["machine"] = {"gpu": opt["gpu"], "read_bandwidth_bytes_per_s": 4.1e12 + context}
if "seed" in opt:
    doc["model"]["weights_random_seed"] = int(opt["seed"])
json.dump(doc, open(out, "w"), indent=2)
EOF
G() { python3 "$WORK/gen.py" "$@"; }
# field FILE EXPR: a figure of a receipt, EXPR evaluated on it as d
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

G "$WORK/p64.json" 65536 0.90,0.91,0.89
G "$WORK/p128.json" 131072 0.88,0.89,0.90
G "$WORK/s8.json" 8192 1.01,1.00,1.01
P64="$WORK/p64.json"
P128="$WORK/p128.json"
S8="$WORK/s8.json"

# ---- promote ----
expect_pass promote A --long "$P64" --long "$P128" --short "$S8" --out "$WORK/promote.json"
R="$WORK/promote.json"
check promote-decision [ "$(field "$R" 'd["decision"]')" = promote ]
check promote-no-reasons [ "$(field "$R" 'len(d["reasons"])')" = 0 ]
check promote-schema [ "$(field "$R" 'd["schema"]')" = gem.promotion.v1 ]
check promote-binds-64k grep -q "$(sha256sum "$P64" | cut -c1-64)" "$R"
check promote-binds-128k grep -q "$(sha256sum "$P128" | cut -c1-64)" "$R"
check promote-binds-short grep -q "$(sha256sum "$S8" | cut -c1-64)" "$R"
check promote-roles [ "$(field "$R" '[(b["role"], b["context"]) for b in d["bound_files"]]')" = \
  "[('long', 65536), ('long', 131072), ('short', 8192)]" ]
check promote-gain-64k [ "$(field "$R" '"%.4f" % d["contexts"][0]["gain"]')" = 0.1000 ]
check promote-rep-gains [ "$(field "$R" '["%.4f" % g for g in d["contexts"][0]["repetition_gain"]]')" = \
  "['0.1000', '0.0900', '0.1100']" ]
check promote-gain-range [ "$(field "$R" '"%.4f" % d["contexts"][1]["gain_range"]')" = 0.0200 ]
check promote-short-tolerance [ "$(field "$R" '"%.4f" % d["contexts"][2]["tolerance"]')" = 0.0300 ]
check promote-design [ "$(field "$R" 'd["design_contexts"]')" = True ]
check promote-statement grep -q "whole-token time alone" "$R"
check promote-rule grep -q "G > 0.03 and every g_r > 0.03" "$R"
check promote-printed grep -q "context 65536 (long): .* gain 10.00%" "$WORK/out.txt"
# the same receipt whatever the order of the options
expect_pass promote-reordered A --short "$S8" --long "$P128" --long "$P64" --out "$WORK/reordered.json"
check promote-order-free [ "$(field "$WORK/reordered.json" 'd["contexts"]')" = "$(field "$R" 'd["contexts"]')" ]
# without a short context: still the decision, and the receipt says so
expect_pass promote-no-short A --long "$P64" --long "$P128" --out "$WORK/noshort.json"
check no-short-stated grep -q "short-context regression is unchecked" "$WORK/noshort.json"
# --check re-derives the receipt from the files it binds
expect_pass check-promote A --check "$R"
check check-says-reproduced grep -q "reproduced from its 3 bound files" "$WORK/out.txt"

# ---- keep-baseline ----
# a 2% gain everywhere at 64K
G "$WORK/k64.json" 65536 0.98,0.98,0.98
expect_fail keep-2pct "keep-baseline" A --long "$WORK/k64.json" --long "$P128" --out "$WORK/keep.json"
check keep-2pct-reason grep -q "context 65536: the overall gain, 2.00%, is not above 3%" "$WORK/err.txt"
check keep-2pct-written [ "$(field "$WORK/keep.json" 'd["decision"]')" = keep-baseline ]
check keep-2pct-reasons [ "$(field "$WORK/keep.json" 'len(d["reasons"])')" = 2 ]
check keep-2pct-fails [ "$(field "$WORK/keep.json" '[c["passes"] for c in d["contexts"]]')" = "[False, True]" ]
# a re-check of a keep-baseline receipt reproduces it and still exits 1
expect_fail check-keep "keep-baseline (reproduced" A --check "$WORK/keep.json"
# the overall gain is above 3%, one repetition's is not
G "$WORK/r128.json" 131072 0.90,0.90,0.975
expect_fail keep-one-rep "keep-baseline" A --long "$P64" --long "$WORK/r128.json" --out "$WORK/rep.json"
check one-rep-reason grep -q "repetition 3 of 3, 2.50%, is not above 3%" "$WORK/err.txt"
check one-rep-overall-above [ "$(field "$WORK/rep.json" 'd["contexts"][1]["gain"] > 0.03')" = True ]
check one-rep-one-reason [ "$(field "$WORK/rep.json" 'len(d["reasons"])')" = 1 ]
# a 6% short-context slowdown with no spread: beyond the 3% tolerance
G "$WORK/sbad.json" 8192 1.06,1.06,1.06
expect_fail short-regression "context 8192 (short): the fused median is 6.00% above" \
  A --long "$P64" --long "$P128" --short "$WORK/sbad.json" --out "$WORK/short.json"
check short-regression-written [ "$(field "$WORK/short.json" 'd["decision"]')" = keep-baseline ]
# a 5% slowdown where both routes' repetition medians spread by 8% of the baseline
# repetition (7.98% of the overall median): inside the tolerance
G "$WORK/sdrift.json" 4096 1.05,1.05,1.05 drift=0,0.08,0
expect_pass short-within-spread A --long "$P64" --long "$P128" --short "$WORK/sdrift.json" --out "$WORK/sd.json"
check short-tolerance-is-spread [ "$(field "$WORK/sd.json" '"%.4f" % d["contexts"][2]["tolerance"]')" = 0.0798 ]

# ---- re-check: the bound files and the receipt must be what they were ----
mkdir "$WORK/rel"
cp "$P64" "$P128" "$S8" "$WORK/rel/"
(cd "$WORK/rel" && GEM_QUIET=1 "$GEM" analyze promotion --long p64.json --long p128.json \
  --short s8.json --out receipt.json >/dev/null)
check relative-paths [ "$(field "$WORK/rel/receipt.json" '[b["path"] for b in d["bound_files"]]')" = \
  "['p64.json', 'p128.json', 's8.json']" ]
expect_pass check-relative bash -c "cd '$WORK/rel' && '$GEM' analyze promotion --check receipt.json"
# a field the decision does not read, changed: only the digest sees it
$T "$WORK/rel/p128.json" "$WORK/rel/p128.json" set routes.baseline.floor_ms.0 1.0
expect_fail check-digest "digest mismatch" bash -c "cd '$WORK/rel' && '$GEM' analyze promotion --check receipt.json"
cp "$P128" "$WORK/rel/"
expect_pass check-restored bash -c "cd '$WORK/rel' && '$GEM' analyze promotion --check receipt.json"
rm "$WORK/rel/s8.json"
expect_usage check-missing-file "cannot read the file" bash -c "cd '$WORK/rel' && '$GEM' analyze promotion --check receipt.json"
# edited receipts
$T "$WORK/keep.json" "$WORK/edit1.json" set decision '"promote"'
expect_fail check-edited-decision "wrong value" A --check "$WORK/edit1.json"
$T "$R" "$WORK/edit2.json" set contexts.0.gain 0.2
expect_fail check-edited-gain "wrong value" A --check "$WORK/edit2.json"
$T "$R" "$WORK/edit3.json" set design_contexts false
expect_fail check-edited-design "wrong value" A --check "$WORK/edit3.json"
$T "$R" "$WORK/edit4.json" set bound_files.2.role '"long"'
expect_fail check-edited-role "3 long-context records" A --check "$WORK/edit4.json"
$T "$R" "$WORK/edit5.json" set bound_files.0.sha256 '"'"$(printf '0%.0s' $(seq 64))"'"'
expect_fail check-edited-sha "digest mismatch" A --check "$WORK/edit5.json"
$T "$R" "$WORK/edit6.json" add note '"x"'
expect_fail check-extra-field "unexpected field" A --check "$WORK/edit6.json"
$T "$R" "$WORK/edit7.json" set schema '"gem.ceiling.v1"'
expect_fail check-schema "file swapped" A --check "$WORK/edit7.json"

# ---- fail-closed record checks: exit 1, one line, nothing written ----
t() { # t NAME CLASS OP PATH [VALUE]: tamper the 64K record
  local name="$1" cls="$2"
  shift 2
  $T "$P64" "$WORK/$name.json" "$@"
  expect_fail "$name" "$cls" A --long "$WORK/$name.json" --long "$P128" --short "$S8" --out "$WORK/x.json"
}
t nan "non-finite figure" set routes.fused.whole_token_ms.3 null
t negative "figure out of range" set routes.baseline.whole_token_ms.4 -1.0
t zero "figure out of range" set routes.fused.whole_token_ms.0 0
t huge "figure out of range" set routes.fused.whole_token_ms.0 1e300
t string-time "wrong type" set routes.fused.whole_token_ms.1 '"90.0"'
t short-array "missing field" del routes.baseline.whole_token_ms.14
t reps-2 "threshold not met" set repetitions 2
t samples-0 "figure out of range" set samples_per_repetition 0
t schema "file swapped" set schema '"gem.stage_profile.v1"'
t tool "file swapped" set tool.name '"gem bench"'
t no-fused "missing field" del routes.fused
t extra-route "unexpected field" add routes.other '{}'
t no-series "missing field" del routes.baseline.whole_token_ms
t order "wrong value" set order '"AABB"'
t k-from-v "wrong value" set context.k_from_v true
t median "figures disagree" set routes.baseline.whole_token_median_ms 50.0
t weights "wrong type" set model.weights_sha256 '"unknown"'
t context-type "wrong type" set context.positions '"65536"'
t not-design "wrong geometry" set context.positions 32768
t backend-type "wrong type" add backend 7
t control-char "wrong value" set model.name '"x\u001b[2J"'
G "$WORK/two.json" 65536 0.9,0.9
expect_fail two-repetitions "threshold not met" A --long "$WORK/two.json" --long "$P128"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["routes"]["fused"]["whole_token_ms"].append(90.0); json.dump(d,open(sys.argv[2],"w"))' "$P64" "$WORK/long-array.json"
expect_fail long-array "unexpected field" A --long "$WORK/long-array.json" --long "$P128"
printf '{"schema": ' >"$WORK/broken.json"
expect_fail malformed "malformed document" A --long "$WORK/broken.json" --long "$P128"
check nothing-written-on-defect [ ! -e "$WORK/x.json" ]

# ---- across records ----
G "$WORK/m128.json" 131072 0.88,0.89,0.90 sha="$(printf 'cd%.0s' $(seq 32))"
expect_fail other-weights "file swapped" A --long "$P64" --long "$WORK/m128.json"
check other-weights-field grep -q "model.weights_sha256" "$WORK/err.txt"
G "$WORK/n128.json" 131072 0.88,0.89,0.90 name=other-model
expect_fail other-model "file swapped" A --long "$P64" --long "$WORK/n128.json"
$T "$P128" "$WORK/l128.json" set model.n_layers 12
expect_fail other-layers "file swapped" A --long "$P64" --long "$WORK/l128.json"
G "$WORK/c128.json" 131072 0.88,0.89,0.90 cpu="Other CPU"
expect_fail other-machine "file swapped" A --long "$P64" --long "$WORK/c128.json"
$T "$P128" "$WORK/t128.json" set machine.threads 4
expect_fail other-threads "file swapped" A --long "$P64" --long "$WORK/t128.json"
G "$WORK/b128.json" 131072 0.88,0.89,0.90 kv=bf16
expect_fail other-kv-dtype "file swapped" A --long "$P64" --long "$WORK/b128.json"
cp "$P64" "$WORK/dup.json"
expect_fail duplicate-context "file swapped" A --long "$P64" --long "$WORK/dup.json"
G "$WORK/s64.json" 65536 1.0,1.0,1.0
expect_fail duplicate-short "file swapped" A --long "$P64" --long "$P128" --short "$WORK/s64.json"
G "$WORK/s200k.json" 200000 1.0,1.0,1.0
expect_fail short-above-long "wrong value" A --long "$P64" --long "$P128" --short "$WORK/s200k.json"
# a backend, when recorded, is the same in every record and is reported
# records shaped as gem profile --backend cuda writes them: the GPU named, no threads
GPU="NVIDIA H200, 132 SMs"
G "$WORK/cu-p64.json" 65536 0.90,0.91,0.89 backend=cuda gpu="$GPU"
G "$WORK/cu-p128.json" 131072 0.88,0.89,0.90 backend=cuda gpu="$GPU"
G "$WORK/cpu-p128.json" 131072 0.88,0.89,0.90 backend=cpu gpu="$GPU"
expect_pass backend-cuda A --long "$WORK/cu-p64.json" --long "$WORK/cu-p128.json" --out "$WORK/cu.json"
check backend-reported [ "$(field "$WORK/cu.json" 'd["backend"]')" = cuda ]
check gpu-reported [ "$(field "$WORK/cu.json" 'd["machine"]')" = "{'gpu': '$GPU'}" ]
G "$WORK/cu2-p128.json" 131072 0.88,0.89,0.90 backend=cuda gpu="NVIDIA H100"
expect_fail other-gpu "file swapped" A --long "$WORK/cu-p64.json" --long "$WORK/cu2-p128.json"
$T "$WORK/cu-p64.json" "$WORK/nogpu.json" del machine.gpu
expect_fail no-machine-name "missing field" A --long "$WORK/nogpu.json" --long "$WORK/cu-p128.json"
G "$WORK/rs-p128.json" 131072 0.88,0.89,0.90 backend=cuda gpu="$GPU" seed=7
expect_fail other-random-seed "file swapped" A --long "$WORK/cu-p64.json" --long "$WORK/rs-p128.json"
check backend-unrecorded [ "$(field "$R" 'd["backend"]')" = unrecorded ]
expect_fail backend-mixed "file swapped" A --long "$WORK/cu-p64.json" --long "$WORK/cpu-p128.json"
expect_fail backend-partial "file swapped" A --long "$WORK/cu-p64.json" --long "$P128"
# measurements (reals) of the machine may differ between runs; identities may not
$T "$P128" "$WORK/bw128.json" set machine.read_bandwidth_bytes_per_s 1.0e9
expect_pass bandwidth-may-differ A --long "$P64" --long "$WORK/bw128.json"

# ---- usage, input and I/O: exit 2 ----
expect_usage missing-file "cannot read the file" A --long "$WORK/none.json" --long "$P128"
expect_usage one-long "1 --long records given" A --long "$P64" --short "$S8"
expect_usage three-long "too many --long" A --long "$P64" --long "$P128" --long "$S8"
expect_usage out-is-input "same file as the input" A --long "$P64" --long "$P128" --out "$P64"
expect_usage check-with-inputs "takes no other option" A --check "$R" --long "$P64"
expect_usage unknown-option "unknown option" A --long "$P64" --long "$P128" --bogus x
expect_usage no-value "needs a value" A --long "$P64" --long

# ---- small contexts: refused by default, allowed and stated with --any-long-contexts ----
G "$WORK/a1k.json" 1024 0.9,0.9,0.9
G "$WORK/a2k.json" 2048 0.9,0.9,0.9
expect_fail small-default "wrong geometry" A --long "$WORK/a1k.json" --long "$WORK/a2k.json"
expect_pass small-allowed A --long "$WORK/a1k.json" --long "$WORK/a2k.json" --any-long-contexts --out "$WORK/small.json"
check small-not-design [ "$(field "$WORK/small.json" 'd["design_contexts"]')" = False ]
check small-statement grep -q "not the design's promotion gate" "$WORK/small.json"
check small-pass-line grep -q "NOT the design's long contexts" "$WORK/out.txt"
expect_pass small-check A --check "$WORK/small.json"

# ---- real records ----
# gem profile on the tiny synthetic model at small contexts: the records it writes
# today are read, decided and re-derived (either decision; CPU timing is noisy).
GEM_QUIET=1 "$GEM" synth --preset tiny --out "$WORK/tiny.gguf" >/dev/null
for ctx in 24 48 64; do
  GEM_QUIET=1 "$GEM" profile --model "$WORK/tiny.gguf" --context "$ctx" --prompt 16 --reps 3 \
    --samples 2 --bw-mib 16 --threads 2 --out "$WORK/tiny-$ctx.json" >/dev/null
done
expect_fail tiny-default "wrong geometry" A --long "$WORK/tiny-48.json" --long "$WORK/tiny-64.json"
rc=0
GEM_QUIET=1 "$GEM" analyze promotion --long "$WORK/tiny-48.json" --long "$WORK/tiny-64.json" \
  --short "$WORK/tiny-24.json" --any-long-contexts --out "$WORK/tiny.json" \
  >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
check tiny-decided [ "$rc" -le 1 ] && [ -s "$WORK/tiny.json" ]
check tiny-roles [ "$(field "$WORK/tiny.json" '[c["context"] for c in d["contexts"]]')" = "[48, 64, 24]" ]
check tiny-model [ "$(field "$WORK/tiny.json" 'd["model"]["weights_sha256"]')" = "$(sha256sum "$WORK/tiny.gguf" | cut -c1-64)" ]
rc2=0
GEM_QUIET=1 "$GEM" analyze promotion --check "$WORK/tiny.json" >/dev/null 2>&1 || rc2=$?
check tiny-check-same-exit [ "$rc2" = "$rc" ]
# the committed 64K/128K pair of the 60-layer synthetic model (BF16 caches), strict contexts
M64="$SRC/results/cpu/model/stage-profile/model-profile-64k.json"
M128="$SRC/results/cpu/model/stage-profile/model-profile-128k.json"
expect_pass committed-pair A --long "$M64" --long "$M128" --out "$WORK/committed.json"
check committed-kv-dtype [ "$(field "$WORK/committed.json" 'd["kv_dtype"]')" = bf16 ]
expect_pass committed-check A --check "$WORK/committed.json"

summary test_analyze_promotion
