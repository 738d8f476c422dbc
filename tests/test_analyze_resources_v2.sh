#!/usr/bin/env bash
# gem analyze resources on the two receipts besides `gem resources`' old v1:
# gem.resources.v2 (the kernels the library ships) and the design candidate's
# gem.resources.v1 as dev/cuda/fused_decode.cu's version 1 writes it. A good
# hand-made receipt of each passes; one tampered copy per rule that sets the
# schemas apart is rejected with one line: the default partitions for the
# device's SMs, the decode-API geometry keys, two first-pass blocks per SM,
# the twelve first passes (the three that rebuild K from V and the three of
# the sliding-window layers' D256 shape among them) and the reducer by role
# and symbol, receipts of the six- and nine-first-pass libraries, the kernel
# headers bound (.cuh, .h) and complete, the source folder of each tool, and
# the tool that picks among a schema's entries. Then v3-v9, each what sets it
# apart from the one before (v8: the two FP8 first passes after v7's kernels;
# v9: those two in 67,584 dynamic bytes within 96 KiB, their codes FP8 in
# shared memory; v10: the baseline's score and value kernels of BF16, F16 and
# FP8 caches after v9's kernels).
#   usage: bash test_analyze_resources_v2.sh <gem> <source-dir>
set -euo pipefail
GEM="$1"
SRC="$2"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. "$SRC/tests/analyze_lib.sh"
T="python3 $SRC/tests/tamper.py"
python3 "$SRC/tests/gen_records.py" "$GEM" "$WORK" resources-v2 resources-v3 resources-v4 \
  resources-v5 resources-v6 resources-v7 resources-v8 resources-v9 resources-v10 resources-dev
V2="$WORK/resources-v2.json"
V3="$WORK/resources-v3.json"
V4="$WORK/resources-v4.json"
V5="$WORK/resources-v5.json"
V6="$WORK/resources-v6.json"
V7="$WORK/resources-v7.json"
V8="$WORK/resources-v8.json"
V9="$WORK/resources-v9.json"
V10="$WORK/resources-v10.json"
DEV="$WORK/resources-dev.json"
A2() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$@" --root "$WORK/root-v2"; }
A3() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$@" --root "$WORK/root-v3"; }
A4() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$@" --root "$WORK/root-v4"; }
A5() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$@" --root "$WORK/root-v5"; }
A6() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$@" --root "$WORK/root-v6"; }
A7() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$@" --root "$WORK/root-v7"; }
A8() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$@" --root "$WORK/root-v8"; }
A9() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$@" --root "$WORK/root-v9"; }
A10() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$@" --root "$WORK/root-v10"; }
AD() { GEM="$GEM" bash "$SRC/scripts/analyze-fused-split-kv-resources.sh" "$@" --root "$WORK/root-dev"; }

expect_pass v2-good A2 "$V2" --out "$WORK/analysis-v2.json"
check v2-analysis-schema grep -q '"gem.analysis.resources.v2"' "$WORK/analysis-v2.json"
check v2-says-only-launchable grep -q "compilable and launchable" "$WORK/out.txt"
expect_pass dev-good AD "$DEV" --out "$WORK/analysis-dev.json"
check dev-analysis-schema grep -q '"gem.analysis.resources.v1"' "$WORK/analysis-dev.json"

tamper() { # tamper RECEIPT ANALYZER NAME CLASS OP PATH [VALUE]: a tampered copy is rejected
  local src="$1" an="$2" name="$3" cls="$4"
  shift 4
  $T "$src" "$WORK/$name.json" "$@"
  expect_fail "$name" "$cls" "$an" "$WORK/$name.json"
}
t2() { tamper "$V2" A2 "$@"; }  # t2 NAME CLASS OP PATH [VALUE]: the v2 receipt
td() { tamper "$DEV" AD "$@"; } # td ...: the dev receipt
t3() { tamper "$V3" A3 "$@"; }  # t3 ...: the v3 receipt
t4() { tamper "$V4" A4 "$@"; }  # t4 ...: the v4 receipt
t5() { tamper "$V5" A5 "$@"; }  # t5 ...: the v5 receipt
t6() { tamper "$V6" A6 "$@"; }  # t6 ...: the v6 receipt
t7() { tamper "$V7" A7 "$@"; }  # t7 ...: the v7 receipt
t8() { tamper "$V8" A8 "$@"; }  # t8 ...: the v8 receipt
t9() { tamper "$V9" A9 "$@"; }  # t9 ...: the v9 receipt
t10() { tamper "$V10" A10 "$@"; } # t10 ...: the v10 receipt
m10() { # m10 NAME CLASS PYTHON: edit the parsed v10 receipt `d`
  local name="$1" cls="$2" code="$3"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); $code; json.dump(d,open(sys.argv[2],'w'))" \
    "$V10" "$WORK/$name.json"
  expect_fail "$name" "$cls" A10 "$WORK/$name.json"
}
m9() { # m9 NAME CLASS PYTHON: edit the parsed v9 receipt `d`
  local name="$1" cls="$2" code="$3"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); $code; json.dump(d,open(sys.argv[2],'w'))" \
    "$V9" "$WORK/$name.json"
  expect_fail "$name" "$cls" A9 "$WORK/$name.json"
}
m8() { # m8 NAME CLASS PYTHON: edit the parsed v8 receipt `d`
  local name="$1" cls="$2" code="$3"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); $code; json.dump(d,open(sys.argv[2],'w'))" \
    "$V8" "$WORK/$name.json"
  expect_fail "$name" "$cls" A8 "$WORK/$name.json"
}
m2() { # m2 NAME CLASS PYTHON: edit the parsed v2 receipt `d`
  local name="$1" cls="$2" code="$3"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); $code; json.dump(d,open(sys.argv[2],'w'))" \
    "$V2" "$WORK/$name.json"
  expect_fail "$name" "$cls" A2 "$WORK/$name.json"
}

# v2 geometry: P is the decode API's default for the SM count (64 on 132 SMs,
# 32 on 66), tile 8, the context it was chosen for, named "default".
t2 v2-partitions-design "wrong geometry" set geometry.partitions 32
t2 v2-partitions-sms "wrong geometry" set device.sm_count 66
t2 v2-tile4 "wrong geometry" set geometry.tile 4
t2 v2-config "wrong geometry" set geometry.config '"tuned"'
t2 v2-live-zero "figure out of range" set geometry.live 0
t2 v2-live-missing "missing field" del geometry.live
t2 v2-scratch-design "wrong geometry" set scratch.numerators_bytes 2097152
m2 v2-v1-geometry "unexpected field" 'd["geometry"]["extra"]=1'

# v2 kernels: twelve first passes and the reducer in order, no dynamic shared
# memory, two first-pass blocks per SM; the reducer resident.
m2 v2-first-pass-one-block "verdict disagrees with the figures" \
  'd["kernels"][3]["max_active_blocks_per_sm"]=1'
m2 v2-first-pass-one-block-gate "threshold not met" \
  'd["kernels"][3]["max_active_blocks_per_sm"]=1; d["gates"]["first_pass_bf16_strided_two_blocks_per_sm"]=False; d["verdict"]="fail"'
t2 v2-dyn "wrong geometry" set kernels.4.dynamic_shared_bytes 16384
t2 v2-role-order "missing field" set kernels.2.role '"fused_first_pass_f16"'
t2 v2-symbol "wrong value" set kernels.5.name '"gem_fused_first_pass_f16"'
t2 v2-reducer-v1 "wrong value" set kernels.12.name '"gem_fused_reducer_v1"'
t2 v2-kernel-removed "missing field" del kernels.5
t2 v2-gate-v1-name "unexpected field" add gates.first_pass_resident true
t2 v2-gate-removed "missing field" del gates.first_pass_f16_two_blocks_per_sm

# The first passes that rebuild K from V (K = V layers): each is required, in
# its place, with its symbol, its gates, no local memory and two blocks per SM.
m2 v2-six-first-passes "missing field" \
  'd["kernels"]=d["kernels"][:6]+d["kernels"][12:]; d["gates"]={k:v for k,v in d["gates"].items() if "k_from_v" not in k and "d256" not in k}'
check v2-six-first-passes-names-the-kernel \
  grep -qF "the fused_first_pass_k_from_v kernel is missing ('fused_reducer' is in its place)" \
  "$WORK/err.txt"
t2 v2-k-from-v-removed "missing field" del kernels.7
check v2-k-from-v-removed-names-the-kernel \
  grep -qF "the fused_first_pass_k_from_v_bf16 kernel is missing" "$WORK/err.txt"
t2 v2-k-from-v-local "threshold not met" set kernels.6.local_bytes 16
check v2-k-from-v-local-names-the-kernel \
  grep -qF "gem_fused_first_pass_k_from_v: 16 local (spill) bytes" "$WORK/err.txt"
m2 v2-k-from-v-one-block "verdict disagrees with the figures" \
  'd["kernels"][8]["max_active_blocks_per_sm"]=1'
check v2-k-from-v-one-block-names-the-gate \
  grep -qF "first_pass_k_from_v_f16_two_blocks_per_sm is true" "$WORK/err.txt"
m2 v2-k-from-v-one-block-gate "threshold not met" \
  'd["kernels"][8]["max_active_blocks_per_sm"]=1; d["gates"]["first_pass_k_from_v_f16_two_blocks_per_sm"]=False; d["verdict"]="fail"'
t2 v2-k-from-v-symbol "wrong value" set kernels.7.name '"gem_fused_first_pass_bf16"'
t2 v2-k-from-v-order "missing field" set kernels.6.role '"fused_first_pass_k_from_v_bf16"'
t2 v2-k-from-v-dyn "wrong geometry" set kernels.8.dynamic_shared_bytes 16384
t2 v2-k-from-v-gate-removed "missing field" del gates.first_pass_k_from_v_bf16_zero_local_bytes

# The first passes of the sliding-window layers (D256, two query heads per KV
# head): each is required, in its place, with its symbol, its seven gates, no
# spills (local memory), the 32 KiB shared-memory budget and two blocks per SM;
# a receipt of the nine-first-pass library is rejected.
m2 v2-nine-first-passes "missing field" \
  'd["kernels"]=d["kernels"][:9]+d["kernels"][12:]; d["gates"]={k:v for k,v in d["gates"].items() if "d256" not in k}'
check v2-nine-first-passes-names-the-kernel \
  grep -qF "the fused_first_pass_d256 kernel is missing ('fused_reducer' is in its place)" \
  "$WORK/err.txt"
t2 v2-d256-removed "missing field" del kernels.10
check v2-d256-removed-names-the-kernel \
  grep -qF "the fused_first_pass_d256_bf16 kernel is missing" "$WORK/err.txt"
t2 v2-d256-local "threshold not met" set kernels.9.local_bytes 8
check v2-d256-local-names-the-kernel \
  grep -qF "gem_fused_first_pass_d256: 8 local (spill) bytes" "$WORK/err.txt"
t2 v2-d256-shared "threshold not met" set kernels.11.static_shared_bytes 40000
check v2-d256-shared-names-the-kernel \
  grep -qF "gem_fused_first_pass_d256_f16: static + dynamic shared 40000 > 32768 bytes" \
  "$WORK/err.txt"
m2 v2-d256-one-block "verdict disagrees with the figures" \
  'd["kernels"][10]["max_active_blocks_per_sm"]=1'
check v2-d256-one-block-names-the-gate \
  grep -qF "first_pass_d256_bf16_two_blocks_per_sm is true" "$WORK/err.txt"
m2 v2-d256-one-block-gate "threshold not met" \
  'd["kernels"][10]["max_active_blocks_per_sm"]=1; d["gates"]["first_pass_d256_bf16_two_blocks_per_sm"]=False; d["verdict"]="fail"'
t2 v2-d256-symbol "wrong value" set kernels.11.name '"gem_fused_first_pass_f16"'
t2 v2-d256-order "missing field" set kernels.9.role '"fused_first_pass_d256_bf16"'
m2 v2-d256-threads "wrong geometry" \
  'k=d["kernels"][9]; k["threads_dispatched"]=128; k["warps_dispatched"]=4'
t2 v2-d256-dyn "wrong geometry" set kernels.10.dynamic_shared_bytes 16384
t2 v2-d256-gate-removed "missing field" del gates.first_pass_d256_f16_zero_local_bytes
t2 v2-d256-gate-flipped "verdict disagrees with the figures" set gates.first_pass_d256_warp_size_32 false

# v2 sources: the headers are bound, listed and present; v1 binds .cu only.
m2 v2-header-unlisted "missing field" \
  'd["sources"]=[s for s in d["sources"] if not s["path"].endswith(".cuh")]'
t2 v2-header-digest "digest mismatch" set sources.1.sha256 '"'"$(printf 'd%.0s' $(seq 64))"'"'
t2 v2-other-ext "file swapped" set sources.2.path '"src/cuda/notes.txt"'
echo "// another header" >"$WORK/root-v2/src/cuda/extra.cuh"
expect_fail v2-root-header-unlisted "missing field" A2 "$V2"
rm "$WORK/root-v2/src/cuda/extra.cuh"
python3 - "$DEV" "$WORK/dev-header.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["sources"].append({"path": "dev/cuda/zz.cuh", "sha256": "0" * 64})
json.dump(d, open(sys.argv[2], "w"))
PY
expect_fail dev-header "file swapped" AD "$WORK/dev-header.json"

# The dev receipt: its sources are dev/cuda's, all of them; its reducer is the
# dev copy's; the tool picks the entry, so a library path under it is swapped.
td dev-src-library "file swapped" set sources.0.path '"src/cuda/fused_decode.cu"'
m_dev_drop() {
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['sources']=d['sources'][1:]; json.dump(d,open(sys.argv[2],'w'))" \
    "$DEV" "$WORK/dev-drop.json"
  expect_fail dev-source-dropped "missing field" AD "$WORK/dev-drop.json"
}
m_dev_drop
td dev-tool-version2 "file swapped" set tool.name '"dev/cuda/fused_decode version 2"'
td dev-reducer-wide "wrong geometry" set kernels.1.dynamic_shared_bytes 4096
td dev-v2-schema "file swapped" set schema '"gem.resources.v2"'
t2 v2-dev-tool "file swapped" set tool.name '"dev/cuda/fused_decode version 1"'

# gem.resources.v3 (what `gem resources` writes since the BF16 first passes stage their
# tiles in shared memory): the two BF16 first passes are launched with exactly 66,560
# dynamic bytes and stay within 81,920 (80 KiB, the L1's share); every other kernel keeps v2's
# contract; a v2 receipt of today's kernels, or a v3 one with v2's BF16 figures, is refused.
expect_pass v3-good A3 "$V3" --out "$WORK/analysis-v3.json"
check v3-analysis-schema grep -q '"gem.analysis.resources.v3"' "$WORK/analysis-v3.json"
t3 v3-bf16-no-dyn "wrong geometry" set kernels.2.dynamic_shared_bytes 0
check v3-bf16-no-dyn-names-the-kernel \
  grep -qF "gem_fused_first_pass_bf16: 0 dynamic shared bytes, the design fixes 66560" \
  "$WORK/err.txt"
t3 v3-bf16-strided-dyn "wrong geometry" set kernels.3.dynamic_shared_bytes 99840
t3 v3-f32-dyn "wrong geometry" set kernels.0.dynamic_shared_bytes 66560
t3 v3-bf16-over-budget "threshold not met" set kernels.2.static_shared_bytes 16384
check v3-bf16-over-budget-names-the-budget \
  grep -qF "gem_fused_first_pass_bf16: static + dynamic shared 82944 > 81920 bytes" "$WORK/err.txt"
t3 v3-bf16-v2-gate-name "missing field" del gates.first_pass_bf16_dynamic_shared_66560
t3 v3-bf16-gate-flipped "verdict disagrees with the figures" \
  set gates.first_pass_bf16_strided_shared_within_81920 false
t3 v3-as-v2 "wrong geometry" set schema '"gem.resources.v2"'
unstage() { # unstage RECEIPT OUT INDEX...: those first passes carry v2's figures and gates
  python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for i in map(int, sys.argv[3:]):
    k = d["kernels"][i]
    k["dynamic_shared_bytes"] = 0
    fp, g = k["role"][len("fused_"):], d["gates"]
    g[fp + "_no_dynamic_shared"] = g.pop(fp + "_dynamic_shared_66560")
    g[fp + "_shared_within_32768"] = g.pop(fp + "_shared_within_81920")
json.dump(d, open(sys.argv[2], "w"))
PY
}
unstage "$V3" "$WORK/v3-v2-bf16.json" 2 3 # a v3 receipt whose BF16 passes carry v2's figures
expect_fail v3-v2-bf16 "wrong geometry" A3 "$WORK/v3-v2-bf16.json"

# gem.resources.v4 (since the F16 first passes stage their tiles too): the four 16-bit first
# passes under the staged contract; a v3 receipt of today's kernels, or a v4 one with v3's
# F16 figures, is refused.
expect_pass v4-good A4 "$V4" --out "$WORK/analysis-v4.json"
check v4-analysis-schema grep -q '"gem.analysis.resources.v4"' "$WORK/analysis-v4.json"
t4 v4-f16-no-dyn "wrong geometry" set kernels.4.dynamic_shared_bytes 0
check v4-f16-no-dyn-names-the-kernel \
  grep -qF "gem_fused_first_pass_f16: 0 dynamic shared bytes, the design fixes 66560" \
  "$WORK/err.txt"
t4 v4-f16-strided-over-budget "threshold not met" set kernels.5.static_shared_bytes 16384
t4 v4-bf16-no-dyn "wrong geometry" set kernels.2.dynamic_shared_bytes 0
t4 v4-k-from-v-dyn "wrong geometry" set kernels.6.dynamic_shared_bytes 66560
t4 v4-f16-v3-gate-name "missing field" del gates.first_pass_f16_shared_within_81920
t4 v4-as-v3 "wrong geometry" set schema '"gem.resources.v3"'
unstage "$V4" "$WORK/v4-v3-f16.json" 4 5 # a v4 receipt whose F16 passes carry v3's figures
expect_fail v4-v3-f16 "wrong geometry" A4 "$WORK/v4-v3-f16.json"

# gem.resources.v5 (since the BF16 and F16 K-from-V first passes run on tensor cores): those
# two stage their V tiles in exactly 33,280 dynamic bytes within the 80 KiB budget; the F32 one
# keeps v2's contract; a v4 receipt of today's kernels, or a v5 one with v4's K-from-V figures,
# is refused.
expect_pass v5-good A5 "$V5" --out "$WORK/analysis-v5.json"
check v5-analysis-schema grep -q '"gem.analysis.resources.v5"' "$WORK/analysis-v5.json"
t5 v5-kfv-bf16-no-dyn "wrong geometry" set kernels.7.dynamic_shared_bytes 0
check v5-kfv-bf16-no-dyn-names-the-kernel \
  grep -qF "gem_fused_first_pass_k_from_v_bf16: 0 dynamic shared bytes, the design fixes 33280" \
  "$WORK/err.txt"
t5 v5-kfv-f16-wide "wrong geometry" set kernels.8.dynamic_shared_bytes 66560
t5 v5-kfv-f32-dyn "wrong geometry" set kernels.6.dynamic_shared_bytes 33280
t5 v5-kfv-f16-over-budget "threshold not met" set kernels.8.static_shared_bytes 49000
t5 v5-kfv-bf16-v4-gate-name "missing field" del gates.first_pass_k_from_v_bf16_dynamic_shared_33280
t5 v5-kfv-f16-gate-flipped "verdict disagrees with the figures" \
  set gates.first_pass_k_from_v_f16_shared_within_81920 false
t5 v5-as-v4 "wrong geometry" set schema '"gem.resources.v4"'
python3 - "$V5" "$WORK/v5-v4-kfv.json" <<'PY' # a v5 receipt whose K-from-V passes carry v4's figures
import json, sys
d = json.load(open(sys.argv[1]))
for i in (7, 8):
    k = d["kernels"][i]
    k["dynamic_shared_bytes"] = 0
    fp, g = k["role"][len("fused_"):], d["gates"]
    g[fp + "_no_dynamic_shared"] = g.pop(fp + "_dynamic_shared_33280")
    g[fp + "_shared_within_32768"] = g.pop(fp + "_shared_within_81920")
json.dump(d, open(sys.argv[2], "w"))
PY
expect_fail v5-v4-kfv "wrong geometry" A5 "$WORK/v5-v4-kfv.json"

# gem.resources.v6 (since the long BF16 K-from-V first pass ships): v5's kernels, then that
# pass last with its own contract (128 threads, exactly 109,952 dynamic bytes within 112 KiB,
# two blocks an SM) and seven gates; a v5 receipt of today's kernels, a v6 one without the pass,
# with another launch or with its gates missing or flipped, is refused.
expect_pass v6-good A6 "$V6" --out "$WORK/analysis-v6.json"
check v6-analysis-schema grep -q '"gem.analysis.resources.v6"' "$WORK/analysis-v6.json"
t6 v6-long-threads "figures disagree" set kernels.17.threads_dispatched 256
t6 v6-long-no-dyn "wrong geometry" set kernels.17.dynamic_shared_bytes 33280
check v6-long-no-dyn-names-the-kernel \
  grep -qF "gem_fused_first_pass_k_from_v_bf16_long: 33280 dynamic shared bytes, the design fixes 109952" \
  "$WORK/err.txt"
t6 v6-long-over-budget "threshold not met" set kernels.17.static_shared_bytes 5000
t6 v6-long-role "file swapped" set kernels.17.role '"fused_first_pass_k_from_v_bf16"'
t6 v6-long-gate-missing "missing field" del gates.first_pass_kfv_bf16_long_two_blocks_per_sm
t6 v6-long-gate-flipped "verdict disagrees with the figures" \
  set gates.first_pass_kfv_bf16_long_zero_local_bytes false
t6 v6-as-v5 "unexpected field" set schema '"gem.resources.v5"'
python3 - "$V6" "$WORK/v6-no-long.json" <<'PY' # a v6 receipt without the long pass
import json, sys
d = json.load(open(sys.argv[1]))
d["kernels"].pop()
for g in [g for g in d["gates"] if g.startswith("first_pass_kfv_bf16_long_")]:
    del d["gates"][g]
json.dump(d, open(sys.argv[2], "w"))
PY
expect_fail v6-no-long "missing field" A6 "$WORK/v6-no-long.json"


# gem.resources.v7 (since the long F32 K-from-V first pass ships): v6's kernels, then that pass
# last with its own contract (320 threads, exactly 221,696 dynamic bytes within 227 KiB, one block
# an SM) and seven gates; a v6 receipt of today's kernels, a v7 one without the pass, with
# another launch or with its gates missing or flipped, is refused.
expect_pass v7-good A7 "$V7" --out "$WORK/analysis-v7.json"
check v7-analysis-schema grep -q '"gem.analysis.resources.v7"' "$WORK/analysis-v7.json"
t7 v7-long-threads "figures disagree" set kernels.18.threads_dispatched 256
t7 v7-long-no-dyn "wrong geometry" set kernels.18.dynamic_shared_bytes 109952
check v7-long-no-dyn-names-the-kernel \
  grep -qF "gem_fused_first_pass_k_from_v_f32_long: 109952 dynamic shared bytes, the design fixes 221696" \
  "$WORK/err.txt"
t7 v7-long-over-budget "threshold not met" set kernels.18.static_shared_bytes 12000
t7 v7-long-role "file swapped" set kernels.18.role '"fused_first_pass_kfv_bf16_long"'
t7 v7-long-gate-missing "missing field" del gates.first_pass_kfv_f32_long_resident
t7 v7-long-gate-flipped "verdict disagrees with the figures" \
  set gates.first_pass_kfv_f32_long_zero_local_bytes false
t7 v7-as-v6 "unexpected field" set schema '"gem.resources.v6"'
python3 - "$V7" "$WORK/v7-no-long.json" <<'PY' # a v7 receipt without the long F32 pass
import json, sys
d = json.load(open(sys.argv[1]))
d["kernels"].pop()
for g in [g for g in d["gates"] if g.startswith("first_pass_kfv_f32_long_")]:
    del d["gates"][g]
json.dump(d, open(sys.argv[2], "w"))
PY
expect_fail v7-no-long "missing field" A7 "$WORK/v7-no-long.json"

# gem.resources.v8 (since the FP8 E4M3 first passes ship): v7's kernels, then the two D512 FP8
# passes (dense, strided) last, each under the staged BF16 / F16 passes' contract (256 threads,
# exactly 66,560 dynamic bytes within 80 KiB, no local memory, two blocks an SM) with their
# seven gates; a v7 receipt of today's kernels, a v8 one without the passes, with one of them
# missing, out of order, under another symbol, with other figures or with its gates missing or
# flipped, is refused.
expect_pass v8-good A8 "$V8" --out "$WORK/analysis-v8.json"
check v8-analysis-schema grep -q '"gem.analysis.resources.v8"' "$WORK/analysis-v8.json"
check v8-analysis-lists-fp8 grep -q '"fused_first_pass_fp8_strided"' "$WORK/analysis-v8.json"
t8 v8-fp8-no-dyn "wrong geometry" set kernels.19.dynamic_shared_bytes 0
check v8-fp8-no-dyn-names-the-kernel \
  grep -qF "gem_fused_first_pass_fp8: 0 dynamic shared bytes, the design fixes 66560" \
  "$WORK/err.txt"
t8 v8-fp8-strided-kfv-dyn "wrong geometry" set kernels.20.dynamic_shared_bytes 33280
t8 v8-fp8-over-budget "threshold not met" set kernels.19.static_shared_bytes 16384
check v8-fp8-over-budget-names-the-budget \
  grep -qF "gem_fused_first_pass_fp8: static + dynamic shared 82944 > 81920 bytes" "$WORK/err.txt"
m8 v8-fp8-threads "wrong geometry" \
  'k=d["kernels"][20]; k["threads_dispatched"]=128; k["warps_dispatched"]=4'
t8 v8-fp8-launchable "threshold not met" set kernels.19.max_threads_per_block 255
t8 v8-fp8-local "threshold not met" set kernels.20.local_bytes 8
check v8-fp8-local-names-the-kernel \
  grep -qF "gem_fused_first_pass_fp8_strided: 8 local (spill) bytes" "$WORK/err.txt"
t8 v8-fp8-occupancy "figures disagree" set kernels.19.max_active_blocks_per_sm 3
m8 v8-fp8-one-block "verdict disagrees with the figures" \
  'd["kernels"][20]["max_active_blocks_per_sm"]=1'
check v8-fp8-one-block-names-the-gate \
  grep -qF "first_pass_fp8_strided_two_blocks_per_sm is true" "$WORK/err.txt"
m8 v8-fp8-one-block-gate "threshold not met" \
  'd["kernels"][20]["max_active_blocks_per_sm"]=1; d["gates"]["first_pass_fp8_strided_two_blocks_per_sm"]=False; d["verdict"]="fail"'
t8 v8-fp8-symbol "wrong value" set kernels.19.name '"gem_fused_first_pass_f16"'
t8 v8-fp8-role "wrong value" set kernels.20.role '"fused_first_pass_fp8_e4m3"'
m8 v8-fp8-order "file swapped" \
  'd["kernels"][19],d["kernels"][20]=d["kernels"][20],d["kernels"][19]'
check v8-fp8-order-names-the-kernel \
  grep -qF "'fused_first_pass_fp8_strided' where the 'fused_first_pass_fp8' kernel belongs" \
  "$WORK/err.txt"
m8 v8-fp8-twice "file swapped" 'd["kernels"][20]=dict(d["kernels"][19])'
m8 v8-fp8-before-long "file swapped" 'd["kernels"].insert(17, d["kernels"].pop(19))'
t8 v8-fp8-removed "missing field" del kernels.19
check v8-fp8-removed-names-the-kernel \
  grep -qF "the fused_first_pass_fp8 kernel is missing ('fused_first_pass_fp8_strided' is in its place)" \
  "$WORK/err.txt"
t8 v8-fp8-strided-removed "missing field" del kernels.20
check v8-fp8-strided-removed-names-the-kernel \
  grep -qF "the fused_first_pass_fp8_strided kernel is not in the receipt" "$WORK/err.txt"
m8 v8-extra-kernel "unexpected field" 'd["kernels"].append(dict(d["kernels"][20]))'
t8 v8-fp8-gate-missing "missing field" del gates.first_pass_fp8_strided_dynamic_shared_66560
t8 v8-fp8-gate-v2-name "unexpected field" add gates.first_pass_fp8_no_dynamic_shared true
t8 v8-fp8-gate-flipped "verdict disagrees with the figures" \
  set gates.first_pass_fp8_shared_within_81920 false
t8 v8-as-v7 "unexpected field" set schema '"gem.resources.v7"'
unstage "$V8" "$WORK/v8-unstaged-fp8.json" 19 20 # FP8 passes with v2's unstaged figures
expect_fail v8-unstaged-fp8 "wrong geometry" A8 "$WORK/v8-unstaged-fp8.json"
python3 - "$V8" "$WORK/v8-no-fp8.json" <<'PY' # a v8 receipt without the FP8 passes (v7's)
import json, sys
d = json.load(open(sys.argv[1]))
d["kernels"] = d["kernels"][:19]
for g in [g for g in d["gates"] if g.startswith("first_pass_fp8")]:
    del d["gates"][g]
json.dump(d, open(sys.argv[2], "w"))
PY
expect_fail v8-no-fp8 "missing field" A8 "$WORK/v8-no-fp8.json"
check v8-no-fp8-names-the-kernel \
  grep -qF "the fused_first_pass_fp8 kernel is not in the receipt" "$WORK/err.txt"
python3 - "$V8" "$WORK/v7-of-v8.json" <<'PY' # the same receipt as v7 says: still accepted
import json, sys
d = json.load(open(sys.argv[1]))
d["schema"] = "gem.resources.v7"
d["kernels"] = d["kernels"][:19]
for g in [g for g in d["gates"] if g.startswith("first_pass_fp8")]:
    del d["gates"][g]
json.dump(d, open(sys.argv[2], "w"))
PY
expect_pass v7-of-v8-good A8 "$WORK/v7-of-v8.json"

# gem.resources.v9 (since the FP8 first passes keep their codes FP8 in shared memory, 32-token
# tiles): v8's kernels in v8's order, the two FP8 passes with exactly 67,584 dynamic bytes,
# static + dynamic within 96 KiB (98,304), still 256 threads, no local memory and two blocks an
# SM, and their gates renamed for those figures; every other kernel and gate is v8's. A v9
# receipt with v8's FP8 figures, one with the FP8 passes' contract, budget, order or gates
# tampered, or a v8 receipt of v9's figures is refused; v9 cut back to v8 passes only with v8's
# figures.
expect_pass v9-good A9 "$V9" --out "$WORK/analysis-v9.json"
check v9-analysis-schema grep -q '"gem.analysis.resources.v9"' "$WORK/analysis-v9.json"
check v9-analysis-lists-fp8 grep -q '"fused_first_pass_fp8_strided"' "$WORK/analysis-v9.json"
t9 v9-fp8-v8-dyn "wrong geometry" set kernels.19.dynamic_shared_bytes 66560
check v9-fp8-v8-dyn-names-the-kernel \
  grep -qF "gem_fused_first_pass_fp8: 66560 dynamic shared bytes, the design fixes 67584" \
  "$WORK/err.txt"
t9 v9-fp8-strided-v8-dyn "wrong geometry" set kernels.20.dynamic_shared_bytes 66560
t9 v9-fp8-no-dyn "wrong geometry" set kernels.19.dynamic_shared_bytes 0
t9 v9-fp8-over-budget "threshold not met" set kernels.19.static_shared_bytes 30976
check v9-fp8-over-budget-names-the-budget \
  grep -qF "gem_fused_first_pass_fp8: static + dynamic shared 98560 > 98304 bytes" "$WORK/err.txt"
t9 v9-fp8-strided-over-budget "threshold not met" set kernels.20.static_shared_bytes 30721
# the 16-bit staged passes keep v8's 80 KiB: v9's FP8 budget is not theirs
t9 v9-f16-over-v8-budget "threshold not met" set kernels.4.static_shared_bytes 16384
check v9-f16-over-v8-budget-names-the-budget \
  grep -qF "gem_fused_first_pass_f16: static + dynamic shared 82944 > 81920 bytes" "$WORK/err.txt"
t9 v9-bf16-fp8-dyn "wrong geometry" set kernels.2.dynamic_shared_bytes 67584
m9 v9-fp8-threads "wrong geometry" \
  'k=d["kernels"][20]; k["threads_dispatched"]=128; k["warps_dispatched"]=4'
t9 v9-fp8-launchable "threshold not met" set kernels.19.max_threads_per_block 255
t9 v9-fp8-local "threshold not met" set kernels.20.local_bytes 8
t9 v9-fp8-occupancy "figures disagree" set kernels.19.max_active_blocks_per_sm 3
m9 v9-fp8-one-block "verdict disagrees with the figures" \
  'd["kernels"][20]["max_active_blocks_per_sm"]=1'
check v9-fp8-one-block-names-the-gate \
  grep -qF "first_pass_fp8_strided_two_blocks_per_sm is true" "$WORK/err.txt"
t9 v9-fp8-symbol "wrong value" set kernels.19.name '"gem_fused_first_pass_f16"'
t9 v9-fp8-role "wrong value" set kernels.20.role '"fused_first_pass_fp8_e4m3"'
m9 v9-fp8-order "file swapped" \
  'd["kernels"][19],d["kernels"][20]=d["kernels"][20],d["kernels"][19]'
m9 v9-fp8-twice "file swapped" 'd["kernels"][20]=dict(d["kernels"][19])'
t9 v9-fp8-removed "missing field" del kernels.19
m9 v9-extra-kernel "unexpected field" 'd["kernels"].append(dict(d["kernels"][20]))'
t9 v9-fp8-gate-missing "missing field" del gates.first_pass_fp8_strided_dynamic_shared_67584
t9 v9-fp8-gate-v8-name "unexpected field" add gates.first_pass_fp8_dynamic_shared_66560 true
t9 v9-fp8-gate-flipped "verdict disagrees with the figures" \
  set gates.first_pass_fp8_shared_within_98304 false
t9 v9-fp8-budget-gate-flipped "verdict disagrees with the figures" \
  set gates.first_pass_fp8_strided_shared_within_98304 false
t9 v9-as-v8 "wrong geometry" set schema '"gem.resources.v8"'
check v9-as-v8-names-the-kernel \
  grep -qF "gem_fused_first_pass_fp8: 67584 dynamic shared bytes, the design fixes 66560" \
  "$WORK/err.txt"
fp8_as() { # fp8_as SRC OUT SCHEMA DYN STATIC BUDGET: the FP8 passes with those figures and
  # the gates named for them (DYN 0: an unstaged pass's no_dynamic_shared)
  python3 - "$@" <<'PY'
import json, sys
src, out, schema, dyn, stat, budget = sys.argv[1:7]
d = json.load(open(src))
d["schema"] = schema
for k in d["kernels"][19:21]:
    k["dynamic_shared_bytes"], k["static_shared_bytes"] = int(dyn), int(stat)
for fp in ("first_pass_fp8", "first_pass_fp8_strided"):
    for g in [g for g in d["gates"] if g.startswith(fp + "_") and
              g[len(fp) + 1:].startswith(("dynamic_shared_", "shared_within_"))]:
        del d["gates"][g]
    d["gates"][fp + ("_no_dynamic_shared" if dyn == "0" else "_dynamic_shared_" + dyn)] = True
    d["gates"][fp + "_shared_within_" + budget] = True
json.dump(d, open(out, "w"))
PY
}
fp8_as "$V9" "$WORK/v9-unstaged-fp8.json" gem.resources.v9 0 17792 32768 # v2's figures
expect_fail v9-unstaged-fp8 "wrong geometry" A9 "$WORK/v9-unstaged-fp8.json"
# v8's FP8 figures and gates under a v9 label: refused, naming v9's bytes
fp8_as "$V8" "$WORK/v8-figures-as-v9.json" gem.resources.v9 66560 12928 81920
expect_fail v8-figures-as-v9 "wrong geometry" A8 "$WORK/v8-figures-as-v9.json"
check v8-figures-as-v9-names-the-kernel \
  grep -qF "gem_fused_first_pass_fp8: 66560 dynamic shared bytes, the design fixes 67584" \
  "$WORK/err.txt"
t8 v8-as-v9 "wrong geometry" set schema '"gem.resources.v9"' # the v8 receipt relabelled alone
# v9's figures with v8's gate names under a v9 label: the gates must be v9's
fp8_as "$V9" "$WORK/v9-v8-gates.json" gem.resources.v9 67584 17792 98304
python3 - "$WORK/v9-v8-gates.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for fp in ("first_pass_fp8", "first_pass_fp8_strided"):
    d["gates"][fp + "_dynamic_shared_66560"] = d["gates"].pop(fp + "_dynamic_shared_67584")
    d["gates"][fp + "_shared_within_81920"] = d["gates"].pop(fp + "_shared_within_98304")
json.dump(d, open(sys.argv[1], "w"))
PY
expect_fail v9-v8-gates "unexpected field" A9 "$WORK/v9-v8-gates.json"
check v9-v8-gates-names-the-gate \
  grep -qF "'first_pass_fp8_dynamic_shared_66560' is not a gate of gem.resources.v9" \
  "$WORK/err.txt"
# v9 cut back to v8 (label and FP8 gates v8's): refused with v9's figures, accepted with v8's
fp8_as "$V9" "$WORK/v8-of-v9-figures.json" gem.resources.v8 67584 17792 81920
expect_fail v8-of-v9-figures "wrong geometry" A9 "$WORK/v8-of-v9-figures.json"
fp8_as "$V9" "$WORK/v8-of-v9.json" gem.resources.v8 66560 12928 81920
expect_pass v8-of-v9-good A9 "$WORK/v8-of-v9.json" --out "$WORK/analysis-v8-of-v9.json"
check v8-of-v9-analysis-schema grep -q '"gem.analysis.resources.v8"' \
  "$WORK/analysis-v8-of-v9.json"
t9 v9-as-v7 "unexpected field" set schema '"gem.resources.v7"'

# gem.resources.v10 (since the baseline reads BF16, F16 and FP8 caches): v9's kernels in v9's
# order, then the baseline's score for BF16, F16, FP8 and its value stage for the same three
# (indices 21-26), with one gate over the six as the F32 four have one. A v10 receipt missing
# one, with them reordered, renamed, with local memory or no resident block, with the gate
# missing or flipped, or relabelled v9, is refused; cut back to v9 it passes as v9.
expect_pass v10-good A10 "$V10" --out "$WORK/analysis-v10.json"
check v10-analysis-schema grep -q '"gem.analysis.resources.v10"' "$WORK/analysis-v10.json"
check v10-analysis-lists-typed grep -q '"baseline_value_fp8"' "$WORK/analysis-v10.json"
t10 v10-typed-removed "missing field" del kernels.26
t10 v10-typed-first-removed "missing field" del kernels.21
m10 v10-typed-order "file swapped" \
  'd["kernels"][21],d["kernels"][24]=d["kernels"][24],d["kernels"][21]'
t10 v10-typed-symbol "wrong value" set kernels.22.name '"gem_baseline_score"'
t10 v10-typed-role "file swapped" set kernels.23.role '"baseline_score"'
check v10-typed-role-names-the-kernel \
  grep -qF "a second 'baseline_score' kernel where the 'baseline_score_fp8' kernel belongs" \
  "$WORK/err.txt"
t10 v10-typed-local "threshold not met" set kernels.25.local_bytes 16
check v10-typed-local-names-the-kernel \
  grep -qF "gem_baseline_value_f16: 16 local (spill) bytes, must be 0" "$WORK/err.txt"
t10 v10-typed-not-resident "threshold not met" set kernels.21.max_active_blocks_per_sm 0
t10 v10-typed-over-launch "threshold not met" set kernels.24.max_threads_per_block 128
m10 v10-extra-kernel "unexpected field" 'd["kernels"].append(dict(d["kernels"][26]))'
t10 v10-typed-gate-missing "missing field" del gates.baseline_typed_kernels_launchable_no_local
t10 v10-typed-gate-flipped "verdict disagrees with the figures" \
  set gates.baseline_typed_kernels_launchable_no_local false
t10 v10-as-v9 "unexpected field" set schema '"gem.resources.v9"'
m10 v10-gate-as-v9 "unexpected field" \
  'd["gates"]["baseline_kernels_launchable_no_local_typed"]=d["gates"].pop("baseline_typed_kernels_launchable_no_local")'
t9 v9-as-v10 "missing field" set schema '"gem.resources.v10"'
python3 - "$V10" "$WORK/v9-of-v10.json" <<'PY' # v10 cut back to v9: its kernels and gates
import json, sys
d = json.load(open(sys.argv[1]))
d["schema"] = "gem.resources.v9"
d["kernels"] = d["kernels"][:21]
del d["gates"]["baseline_typed_kernels_launchable_no_local"]
json.dump(d, open(sys.argv[2], "w"))
PY
expect_pass v9-of-v10-good A10 "$WORK/v9-of-v10.json" --out "$WORK/analysis-v9-of-v10.json"
check v9-of-v10-analysis-schema grep -q '"gem.analysis.resources.v9"' \
  "$WORK/analysis-v9-of-v10.json"

summary test_analyze_resources_v2
