#!/usr/bin/env bash
# h200-run.sh OUT: builds gem on an H200 machine (CMake, Release, sm_90), runs
# the CUDA tests, compute-sanitizer memcheck/racecheck on small shapes,
# `gem resources` (+ read/copy ceilings), `gem diff --backend cuda` at the
# boundary lengths, `gem bench --backend cuda` fused vs baseline with the read
# bandwidth measured in the same run, the one-axis sweeps (P, then tile at the
# winning P, then cp.async staging depth, then V ownership), a final bench of
# the best configuration, and an ncu DRAM-bytes read of both routes at 64K.
#
# Everything lands in OUT: log.txt (the whole console), summary.txt (the table
# printed last), receipts.tar.gz (every JSON receipt, ncu output, command).
#
# Environment:
#   PHASES   space-separated subset of: build test sanitize resources diff
#            bench sweep final extra direct quad wide last ncu (default: all but
#            quad, wide and last, in that order)
#   TEST_SETS     comma-separated "stages vshare" pairs the CUDA tests also run
#                 under (default: the six of run 4)
#   SANITIZE_SETS space-separated tool:stages:vshare triples for compute-sanitizer
#   JOBS     build parallelism (default: nproc)
#   FINAL_P, FINAL_TILE, FINAL_STAGES, FINAL_VSHARE
#            force the final configuration instead of taking the sweep winners
# Needs: nvcc 13 / CUDA 13, cmake, python3; jansson and OpenSSL headers, or the
# static copies under .deps/dist (include/, lib/) carried with the tree.
set -u -o pipefail

OUT=${1:?usage: scripts/h200-run.sh OUT}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build-h200
REC=$OUT/rec # receipts, tarred at the end
mkdir -p "$REC"
PHASES=${PHASES:-"build test sanitize resources diff bench sweep final extra direct ncu"}
JOBS=${JOBS:-$(nproc)}
exec > >(tee -a "$OUT/log.txt") 2>&1
T0=$(date +%s)
step() { echo "== [$(($(date +%s) - T0))s] $*"; }
has() { [[ " $PHASES " == *" $1 "* ]]; }
FAILS=()
BUDGET_S=${BUDGET_S:-480} # optional steps are skipped past this many seconds
late() { [ $(($(date +%s) - T0)) -gt "$BUDGET_S" ]; }
# receipts so far -> OUT/receipts.tar.gz (so a run cut short still returns them)
pack() { tar czf "$OUT/receipts.tar.gz.tmp" -C "$REC" . && mv "$OUT/receipts.tar.gz.tmp" "$OUT/receipts.tar.gz"; }
fail() { FAILS+=("$1"); echo "!! FAILED: $1"; }
export GEM_GIT_COMMIT=${GEM_GIT_COMMIT:-$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)}

echo "command: scripts/h200-run.sh $*  (PHASES='$PHASES')" | tee "$REC/command.txt"
echo "git: $GEM_GIT_COMMIT" | tee -a "$REC/command.txt"
step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1 | tee "$REC/nvidia-smi.txt"
nvcc --version | tail -1
GEM=$BUILD/gem

# ---- build ----------------------------------------------------------------------
if has build; then
    step "build"
    CMAKE_EXTRA=()
    if [ -n "${FORCE_DEPS:-}" ] || ! { command -v pkg-config >/dev/null && pkg-config --exists jansson; } ||
        [ ! -f /usr/include/openssl/sha.h ]; then
        D=$SRC/.deps/dist
        [ -d "$D" ] || { echo "no jansson/OpenSSL development files and no .deps/dist"; exit 2; }
        echo "using the carried static jansson/OpenSSL in $D"
        mkdir -p /tmp/gemdeps
        cat >/tmp/gemdeps/pkg-config <<EOF
#!/bin/sh
# answers CMake's pkg-config questions for the carried static jansson
for a in "\$@"; do
  case "\$a" in
    --version) echo 0.29.2; exit 0;;
    --modversion) echo 2.14; exit 0;;
    --variable=prefix) echo "$D"; exit 0;;
    --variable=includedir) echo "$D/include"; exit 0;;
    --variable=libdir) echo "$D/lib"; exit 0;;
    --cflags|--cflags-only-I) echo "-I$D/include"; exit 0;;
    --cflags-only-other|--libs-only-other) echo; exit 0;;
    --libs) echo "-L$D/lib -ljansson"; exit 0;;
    --libs-only-L) echo "-L$D/lib"; exit 0;;
    --libs-only-l) echo "-ljansson"; exit 0;;
    --variable=*) echo; exit 0;;
  esac
done
exit 0
EOF
        chmod +x /tmp/gemdeps/pkg-config
        CMAKE_EXTRA=(-DPKG_CONFIG_EXECUTABLE=/tmp/gemdeps/pkg-config -DOPENSSL_ROOT_DIR="$D"
            -DOPENSSL_USE_STATIC_LIBS=TRUE -DOPENSSL_INCLUDE_DIR="$D/include"
            -DOPENSSL_CRYPTO_LIBRARY="$D/lib/libcrypto.a" -DOPENSSL_SSL_LIBRARY="$D/lib/libssl.a"
            -DCMAKE_EXE_LINKER_FLAGS="-L$D/lib")
        export LIBRARY_PATH=$D/lib${LIBRARY_PATH:+:$LIBRARY_PATH}
    fi
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        "${CMAKE_EXTRA[@]}" >"$OUT/cmake.txt" 2>&1 || { tail -30 "$OUT/cmake.txt"; exit 2; }
    grep -E "gem: CUDA|jansson|OpenSSL" "$OUT/cmake.txt"
    if ! cmake --build "$BUILD" -j"$JOBS" >"$OUT/build.txt" 2>&1; then
        grep -E -B3 -A10 "error" "$OUT/build.txt" | head -60
        exit 2
    fi
    grep -E "spill|warning" "$OUT/build.txt" | head -20
    "$GEM" --version || exit 2
fi

# ---- tests ------------------------------------------------------------------------
if has test; then
    step "CUDA tests"
    "$BUILD/test_cuda_backend" || fail "test_cuda_backend"
    IFS=, read -r -a TSETS <<<"${TEST_SETS:-2 0,3 1,1 1,2 2,1 2,0 2}"
    for v in "${TSETS[@]}"; do
        set -- $v
        GEM_CUDA_FUSED_STAGES=$1 GEM_CUDA_FUSED_VSHARE=$2 "$BUILD/test_cuda_backend" ||
            fail "test_cuda_backend stages=$1 vshare=$2"
    done
fi

if has sanitize; then
    step "compute-sanitizer on small shapes"
    for tv in ${SANITIZE_SETS:-memcheck:1:0 racecheck:1:0 memcheck:2:2 racecheck:2:2 racecheck:3:1 memcheck:0:2 racecheck:0:2}; do
            IFS=: read -r tool s1 s2 <<<"$tv"
            set -- "$s1" "$s2"
            GEM_CUDA_FUSED_STAGES=$1 GEM_CUDA_FUSED_VSHARE=$2 timeout 120 compute-sanitizer \
                --tool $tool --error-exitcode 9 "$BUILD/test_cuda_backend" --small \
                >"$REC/sanitizer-$tool-s$1v$2.txt" 2>&1 || fail "compute-sanitizer $tool stages=$1 vshare=$2"
            tail -2 "$REC/sanitizer-$tool-s$1v$2.txt"
    done
    pack
fi

# ---- resource receipt and ceilings ---------------------------------------------------
if has resources; then
    step "gem resources"
    (cd "$SRC" && "$GEM" resources --out "$REC/resources.json" --ceilings "$REC/ceilings.json" \
        --bandwidth-bytes 4294967296 --reps 20) || fail "gem resources (design gates)"
    (cd "$SRC" && "$GEM" analyze resources "$REC/resources.json" >"$REC/resources-analysis.txt" 2>&1 ||
        true)
    tail -2 "$REC/resources-analysis.txt"
    for v in "2 0" "2 1" "3 1" "1 1"; do
        set -- $v
        GEM_CUDA_FUSED_STAGES=$1 GEM_CUDA_FUSED_VSHARE=$2 "$GEM" resources --partitions 64 \
            --out "$REC/resources-p64-t4-s$1v$2.json" >/dev/null 2>&1
    done
fi

# ---- differentials ------------------------------------------------------------------
if has diff; then
    step "gem diff --backend cuda: fused P32 tile4 vs baseline vs double"
    "$GEM" diff --backend cuda --lengths 1,13,4097,8191,8192,8193,65536,131072 \
        --out "$REC/diff-design" || fail "gem diff design"
    pack
fi

bench() { # name, env assignments..., -- bench args
    local name=$1
    shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    if late && [ "$name" != final ]; then
        echo "-- skipped bench $name: past the ${BUDGET_S}s budget"
        return 0
    fi
    step "bench $name"
    env "${envs[@]}" "$GEM" bench --backend cuda --out "$REC/bench-$name.json" "$@" ||
        fail "bench $name"
    pack
}

# ---- design candidate vs baseline -------------------------------------------------------
if has bench; then
    bench design GEM_CUDA_FUSED_STAGES=1 GEM_CUDA_FUSED_VSHARE=0 -- --a baseline --b fused \
        --b-partitions 32 --b-tile 4 --lengths 8192,65536,131072 --rounds 20 --bw-mib 4096 --bw-reps 10
fi

# median time of route b (or a) at a length in a bench record
med() { python3 - "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["cases"]:
    if c["live"] == int(sys.argv[3]):
        print(c["timing"][sys.argv[2]]["stats"]["median"])
EOF
}
# the better of two configs by summed median at 64K + 128K: prints "a" or "b"
better() { python3 - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
sa = sum(c["timing"]["a"]["stats"]["median"] for c in d["cases"] if c["live"] >= 65536)
sb = sum(c["timing"]["b"]["stats"]["median"] for c in d["cases"] if c["live"] >= 65536)
print("a" if sa <= sb else "b")
EOF
}

BEST_P=${FINAL_P:-32}
BEST_T=${FINAL_TILE:-4}
BEST_S=${FINAL_STAGES:-1}
BEST_V=${FINAL_VSHARE:-0}
if has sweep; then
    L=65536,131072
    # axis 1: P (design staging, tile 4): 32 vs 64, then the winner vs 128
    bench p32-vs-p64 -- --a fused --a-partitions 32 --a-tile 4 --b fused --b-partitions 64 \
        --b-tile 4 --lengths $L --rounds 10 --no-double --bw-mib 1024
    [ "$(better "$REC/bench-p32-vs-p64.json")" = b ] && BEST_P=64 || BEST_P=32
    bench p$BEST_P-vs-p128 -- --a fused --a-partitions $BEST_P --a-tile 4 --b fused \
        --b-partitions 128 --b-tile 4 --lengths $L --rounds 10 --no-double --bw-mib 1024
    [ "$(better "$REC/bench-p$BEST_P-vs-p128.json")" = b ] && BEST_P=128
    echo "P winner: $BEST_P"
    # axis 2: tile at that P: 4 vs 8, then the winner vs 16
    bench t4-vs-t8 -- --a fused --a-partitions $BEST_P --a-tile 4 --b fused \
        --b-partitions $BEST_P --b-tile 8 --lengths $L --rounds 10 --no-double --bw-mib 1024
    [ "$(better "$REC/bench-t4-vs-t8.json")" = b ] && BEST_T=8 || BEST_T=4
    bench t$BEST_T-vs-t16 -- --a fused --a-partitions $BEST_P --a-tile $BEST_T --b fused \
        --b-partitions $BEST_P --b-tile 16 --lengths $L --rounds 10 --no-double --bw-mib 1024
    [ "$(better "$REC/bench-t$BEST_T-vs-t16.json")" = b ] && BEST_T=16
    echo "tile winner: $BEST_T"
    # axis 3: staging depth (separate processes; the baseline in each is the yardstick)
    declare -A SMED
    for s in 1 2 3; do
        bench stages$s GEM_CUDA_FUSED_STAGES=$s GEM_CUDA_FUSED_VSHARE=0 -- --a baseline --b fused \
            --b-partitions $BEST_P --b-tile $BEST_T --lengths $L --rounds 10 --no-double --bw-mib 1024
        SMED[$s]=$(med "$REC/bench-stages$s.json" b 131072)
    done
    BEST_S=$(for s in 1 2 3; do echo "${SMED[$s]} $s"; done | sort -g | head -1 | cut -d' ' -f2)
    echo "stages winner: $BEST_S"
    # axis 4: V ownership at that depth
    bench vshare1 GEM_CUDA_FUSED_STAGES=$BEST_S GEM_CUDA_FUSED_VSHARE=1 -- --a baseline --b fused \
        --b-partitions $BEST_P --b-tile $BEST_T --lengths $L --rounds 10 --no-double --bw-mib 1024
    v1=$(med "$REC/bench-vshare1.json" b 131072)
    BEST_V=$(python3 -c "print(1 if $v1 < ${SMED[$BEST_S]} else 0)")
    echo "vshare winner: $BEST_V"
    # with V shared, P and tile may move: one more look at each, one axis at a time
    if [ "$BEST_V" = 1 ]; then
        for pp in 64 128 256; do
            [ $pp = $BEST_P ] && continue
            bench v1-p$BEST_P-vs-p$pp GEM_CUDA_FUSED_STAGES=$BEST_S GEM_CUDA_FUSED_VSHARE=1 -- \
                --a fused --a-partitions $BEST_P --a-tile $BEST_T --b fused --b-partitions $pp \
                --b-tile $BEST_T --lengths $L --rounds 10 --no-double --bw-mib 1024
            [ "$(better "$REC/bench-v1-p$BEST_P-vs-p$pp.json")" = b ] && BEST_P=$pp
        done
        for tt in 4 8 16; do
            [ $tt = $BEST_T ] && continue
            bench v1-t$BEST_T-vs-t$tt GEM_CUDA_FUSED_STAGES=$BEST_S GEM_CUDA_FUSED_VSHARE=1 -- \
                --a fused --a-partitions $BEST_P --a-tile $BEST_T --b fused --b-partitions $BEST_P \
                --b-tile $tt --lengths $L --rounds 10 --no-double --bw-mib 1024
            [ "$(better "$REC/bench-v1-t$BEST_T-vs-t$tt.json")" = b ] && BEST_T=$tt
        done
    fi
    BEST_P=${FINAL_P:-$BEST_P}; BEST_T=${FINAL_TILE:-$BEST_T}
    BEST_S=${FINAL_STAGES:-$BEST_S}; BEST_V=${FINAL_VSHARE:-$BEST_V}
fi
echo "best: P=$BEST_P tile=$BEST_T stages=$BEST_S vshare=$BEST_V" | tee "$REC/best.txt"

if has final; then
    bench final GEM_CUDA_FUSED_STAGES=$BEST_S GEM_CUDA_FUSED_VSHARE=$BEST_V -- --a baseline \
        --b fused --b-partitions $BEST_P --b-tile $BEST_T --lengths 8192,65536,131072 --rounds 20 \
        --bw-mib 4096 --bw-reps 10
    step "gem diff --backend cuda: best fused vs baseline vs double"
    GEM_CUDA_FUSED_STAGES=$BEST_S GEM_CUDA_FUSED_VSHARE=$BEST_V "$GEM" diff --backend cuda \
        --partitions $BEST_P --tile $BEST_T --lengths 1,13,4097,8191,8192,8193,65536,131072 \
        --out "$REC/diff-best" || fail "gem diff best"
    GEM_CUDA_FUSED_STAGES=$BEST_S GEM_CUDA_FUSED_VSHARE=$BEST_V "$GEM" resources \
        --partitions $BEST_P --tile $BEST_T --out "$REC/resources-best.json" >/dev/null 2>&1
fi

# ---- extra: the K side per thread too (vshare 2), one axis at a time -------------------------
if has extra; then
    for vv in 1 2; do
        bench kshare-v$vv GEM_CUDA_FUSED_STAGES=2 GEM_CUDA_FUSED_VSHARE=$vv -- --a baseline --b fused \
            --b-partitions 64 --b-tile 8 --lengths 8192,65536,131072 --rounds 20 --bw-mib 4096 --bw-reps 10
    done
    for pt in "128 8" "64 4" "32 8"; do
        set -- $pt
        bench kshare-p$1-t$2 GEM_CUDA_FUSED_STAGES=2 GEM_CUDA_FUSED_VSHARE=2 -- --a fused \
            --a-partitions 64 --a-tile 8 --b fused --b-partitions $1 --b-tile $2 \
            --lengths 8192,65536,131072 --rounds 10 --no-double --bw-mib 1024
    done
    bench kshare-s3 GEM_CUDA_FUSED_STAGES=3 GEM_CUDA_FUSED_VSHARE=2 -- --a baseline --b fused \
        --b-partitions 64 --b-tile 8 --lengths 8192,65536,131072 --rounds 10 --no-double --bw-mib 1024
    pack
fi
# ---- direct register loads (stages 0, vshare 2) against the best staged variant ----------------
if has direct; then
    for tt in 4 8; do
        bench direct-t$tt GEM_CUDA_FUSED_STAGES=0 GEM_CUDA_FUSED_VSHARE=2 -- --a baseline --b fused \
            --b-partitions 64 --b-tile $tt --lengths 8192,65536,131072 --rounds 20 --bw-mib 4096 --bw-reps 10
    done
    for pp in 32 128; do
        bench direct-p$pp GEM_CUDA_FUSED_STAGES=0 GEM_CUDA_FUSED_VSHARE=2 -- --a fused --a-partitions 64 \
            --a-tile 4 --b fused --b-partitions $pp --b-tile 4 --lengths 8192,65536,131072 --rounds 10 \
            --no-double --bw-mib 1024
    done
    bench staged-s3-t8 GEM_CUDA_FUSED_STAGES=3 GEM_CUDA_FUSED_VSHARE=2 -- --a baseline --b fused \
        --b-partitions 64 --b-tile 8 --lengths 8192,65536,131072 --rounds 20 --bw-mib 4096 --bw-reps 10
fi
# ---- four dims per thread with bulk-copied tiles (vshare 3) ---------------------------------
# the run-4 best measured again in the same device run, then the vshare-3 depth / tile / P
# axes one at a time (separate processes: stages and vshare are per-process; the baseline in
# each record is the yardstick)
if has quad; then
    bench quad-cur-s0v2-t8 GEM_CUDA_FUSED_STAGES=0 GEM_CUDA_FUSED_VSHARE=2 -- --a baseline --b fused \
        --b-partitions 64 --b-tile 8 --lengths 8192,65536,131072 --rounds 20 --bw-mib 4096 --bw-reps 10
    for st in "2 8" "2 16" "3 16"; do
        set -- $st
        bench quad-s$1-t$2 GEM_CUDA_FUSED_STAGES=$1 GEM_CUDA_FUSED_VSHARE=3 -- --a baseline --b fused \
            --b-partitions 64 --b-tile $2 --lengths 8192,65536,131072 --rounds 10 --no-double --bw-mib 1024
    done
    for pp in 66 128; do
        bench quad-p64-vs-p$pp GEM_CUDA_FUSED_STAGES=3 GEM_CUDA_FUSED_VSHARE=3 -- --a fused \
            --a-partitions 64 --a-tile 8 --b fused --b-partitions $pp --b-tile 8 \
            --lengths 8192,65536,131072 --rounds 10 --no-double --bw-mib 1024
    done
    pack
fi
# ---- four dims per thread fed by direct 16-byte loads (vshare 4), and with a streaming cache
# hint (vshare 5), against run 4's best: each against the baseline in its own process (stages
# and vshare are per-process), in the process order A B C C B A so drift cancels; the diff of
# vshare 5 (vshare 4's is the final phase's) and one full ncu report per variant at 64K
if has wide; then
    for vv in 2 4 5 5 4 2; do
        r=1
        [ -f "$REC/bench-wide-s0v$vv-t8-r1.json" ] && r=2
        bench wide-s0v$vv-t8-r$r GEM_CUDA_FUSED_STAGES=0 GEM_CUDA_FUSED_VSHARE=$vv -- --a baseline \
            --b fused --b-partitions 64 --b-tile 8 --lengths 8192,65536,131072 --rounds 20 \
            --bw-mib 4096 --bw-reps 10
    done
    step "gem diff --backend cuda: vshare 5 (P64, tile 8) vs baseline vs double"
    GEM_CUDA_FUSED_STAGES=0 GEM_CUDA_FUSED_VSHARE=5 "$GEM" diff --backend cuda --partitions 64 \
        --tile 8 --lengths 1,13,4097,8191,8192,8193,65536,131072 --out "$REC/diff-v5" ||
        fail "gem diff vshare 5"
    pack
    if command -v ncu >/dev/null; then
        for vv in 2 4 5; do
            late && break
            step "ncu s0 v$vv t8 (64K, full set, one first-pass launch)"
            GEM_QUIET=1 GEM_CUDA_FUSED_STAGES=0 GEM_CUDA_FUSED_VSHARE=$vv timeout 60 ncu \
                --clock-control none --set full --import-source no -k regex:gem_fused_first_pass \
                --launch-skip 1 --launch-count 1 "$GEM" bench --backend cuda --lengths 65536 \
                --b-partitions 64 --b-tile 8 --rounds 1 --warmup 0 --no-double --copies 1 \
                --bw-mib 64 --bw-reps 1 --out /tmp/ncu-bench-v$vv.json >"$REC/ncu-s0v$vv.txt" 2>&1 ||
                fail "ncu s0 v$vv"
        done
    fi
    pack
fi
# ---- run 8: vshare 6 (vshare 5 + the one-round reducer) and vshare 7 (6 + Q in shared memory,
# the next tile's V issued after this tile's dots) against vshare 5, each against the baseline in
# its own process, process order 5 6 7 7 6 5; then P 64 against 66, 96 and 128 for 6 and 7 (P is a
# run-time parameter: one process per pair); diffs of 6 and 7; ncu of 7's first pass (full) and
# of both reducers' durations at 64K
if has last; then
    for vv in 5 6 7 7 6 5; do
        r=1
        [ -f "$REC/bench-last-s0v$vv-t8-r1.json" ] && r=2
        bench last-s0v$vv-t8-r$r GEM_CUDA_FUSED_STAGES=0 GEM_CUDA_FUSED_VSHARE=$vv -- --a baseline \
            --b fused --b-partitions 64 --b-tile 8 --lengths 8192,65536,131072 --rounds 20 \
            --bw-mib 4096 --bw-reps 10
    done
    for vv in 6 7; do
        step "gem diff --backend cuda: vshare $vv (P64, tile 8) vs baseline vs double"
        GEM_CUDA_FUSED_STAGES=0 GEM_CUDA_FUSED_VSHARE=$vv "$GEM" diff --backend cuda --partitions 64 \
            --tile 8 --lengths 1,13,4097,8191,8192,8193,65536,131072 --out "$REC/diff-v$vv" ||
            fail "gem diff vshare $vv"
        GEM_CUDA_FUSED_STAGES=0 GEM_CUDA_FUSED_VSHARE=$vv "$GEM" resources --partitions 64 \
            --tile 8 --out "$REC/resources-p64-t8-s0v$vv.json" >/dev/null 2>&1
    done
    pack
    for vv in 7 6; do
        for pp in 66 96 128; do
            bench last-v$vv-p64-vs-p$pp GEM_CUDA_FUSED_STAGES=0 GEM_CUDA_FUSED_VSHARE=$vv -- \
                --a fused --a-partitions 64 --a-tile 8 --b fused --b-partitions $pp --b-tile 8 \
                --lengths 8192,65536,131072 --rounds 10 --no-double --bw-mib 1024
        done
    done
    if command -v ncu >/dev/null; then
        if ! late; then
            step "ncu s0 v7 t8 (64K, full set, one first-pass launch)"
            GEM_QUIET=1 GEM_CUDA_FUSED_STAGES=0 GEM_CUDA_FUSED_VSHARE=7 timeout 60 ncu \
                --clock-control none --set full --import-source no -k regex:gem_fused_first_pass \
                --launch-skip 1 --launch-count 1 "$GEM" bench --backend cuda --lengths 65536 \
                --b-partitions 64 --b-tile 8 --rounds 1 --warmup 0 --no-double --copies 1 \
                --bw-mib 64 --bw-reps 1 --out /tmp/ncu-bench-v7.json >"$REC/ncu-s0v7.txt" 2>&1 ||
                fail "ncu s0 v7"
        fi
        for vv in 5 6; do
            late && break
            step "ncu s0 v$vv (64K, durations of first pass and reducer)"
            GEM_QUIET=1 GEM_CUDA_FUSED_STAGES=0 GEM_CUDA_FUSED_VSHARE=$vv timeout 60 ncu \
                --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum \
                -k regex:gem_fused --launch-skip 2 --launch-count 6 --csv \
                --log-file "$REC/ncu-dur-s0v$vv.csv" "$GEM" bench --backend cuda --lengths 65536 \
                --b-partitions 64 --b-tile 8 --rounds 1 --warmup 0 --no-double --copies 1 \
                --bw-mib 64 --bw-reps 1 --out /tmp/ncu-dur-v$vv.json >/dev/null 2>&1 ||
                fail "ncu durations s0 v$vv"
        done
    fi
    pack
fi
if has extra-old; then
    bench stages3-vshare1 GEM_CUDA_FUSED_STAGES=3 GEM_CUDA_FUSED_VSHARE=1 -- --a baseline --b fused \
        --b-partitions $BEST_P --b-tile $BEST_T --lengths 8192,65536,131072 --rounds 10 --no-double \
        --bw-mib 1024
fi

# ---- ncu: DRAM bytes of both routes at 64K -----------------------------------------------
if has ncu && command -v ncu >/dev/null && ! late; then
    for cfg in "design 1 0 32 4" "best $BEST_S $BEST_V $BEST_P $BEST_T"; do
        set -- $cfg
        step "ncu $1 (DRAM bytes at 64K)"
        GEM_QUIET=1 GEM_CUDA_FUSED_STAGES=$2 GEM_CUDA_FUSED_VSHARE=$3 timeout 180 ncu \
            --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
            -k regex:'gem_(fused|baseline)' --launch-count 12 --csv --log-file "$REC/ncu-$1.csv" \
            "$GEM" bench --backend cuda --lengths 65536 --b-partitions $4 --b-tile $5 --rounds 1 \
            --warmup 0 --no-double --bw-mib 64 --bw-reps 1 --out "$REC/ncu-bench-$1.json" \
            >/dev/null 2>&1 || fail "ncu $1"
    done
fi

# ---- summary --------------------------------------------------------------------------------
step "summary"
python3 - "$REC" >"$OUT/summary.txt" <<'EOF'
import glob, json, os, sys
rec = sys.argv[1]
print("%-22s %-8s %-18s %9s %9s %9s %8s %7s %s" % ("record", "live", "route", "min ms", "med ms",
      "max ms", "GB/s", "of bw", "A/B med [min,max]"))
for f in sorted(glob.glob(os.path.join(rec, "bench-*.json"))):
    d = json.load(open(f))
    name = os.path.basename(f)[6:-5]
    bw = d["read_bandwidth"]["bytes_per_second"]
    ra, rb = d["route_a"], d["route_b"]
    lab = {"a": "%s_p%s_t%s" % (ra["route"], ra["partitions"], ra["tile"]),
           "b": "%s_p%s_t%s" % (rb["route"], rb["partitions"], rb["tile"])}
    for c in d["cases"]:
        t = c.get("timing")
        if not t:
            print("%-22s %-8d validation failed" % (name, c["live"]))
            continue
        for k in "ab":
            s = t[k]["stats"]
            r = t["ratio_a_over_b"]["stats"]
            print("%-22s %-8d %-18s %9.4f %9.4f %9.4f %8.1f %6.1f%% %s" % (
                name, c["live"], lab[k], s["min"] * 1e3, s["median"] * 1e3, s["max"] * 1e3,
                c["gbps"][k], 100 * c["fraction_of_read_bandwidth"][k],
                "%.3f [%.3f,%.3f]" % (r["median"], r["min"], r["max"]) if k == "b" else ""))
    print("%-22s read bandwidth %.1f GB/s (%s)" % (name, bw * 1e-9, d.get("device", "")))
for f in sorted(glob.glob(os.path.join(rec, "ceilings.json"))):
    d = json.load(open(f))
    print("ceilings: read %.1f GB/s, copy %.1f GB/s" % (d["read"]["bytes_per_second"] * 1e-9,
                                                         d["copy"]["bytes_per_second"] * 1e-9))
for f in sorted(glob.glob(os.path.join(rec, "ncu-*.csv"))):
    print("ncu", os.path.basename(f))
    for line in open(f):
        if "dram__bytes" in line or "gpu__time" in line:
            p = [x.strip('"') for x in line.strip().split('","')]
            if len(p) > 14:
                print("   %-40s %-26s %s %s" % (p[4][:40], p[-3], p[-2], p[-1]))
EOF
cat "$OUT/summary.txt"
pack && rm -rf "$REC"
if [ ${#FAILS[@]} -gt 0 ]; then
    echo "FAILED steps: ${FAILS[*]}"
    exit 1
fi
echo "all steps passed ($(($(date +%s) - T0)) s)"
