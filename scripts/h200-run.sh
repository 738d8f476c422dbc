#!/usr/bin/env bash
# h200-run.sh OUT: builds what ships on an H200 machine (CMake, Release, sm_90,
# with the dev/cuda experiments), runs the whole test suite and the decode test
# matrix with the long lengths, compute-sanitizer memcheck, racecheck,
# synccheck and initcheck over the matrix's small cases, `gem resources` (+ read, copy and nominal
# bandwidth), `gem diff --backend cuda` at the boundary lengths, `gem bench
# --backend cuda` of the default (the tuned fused route) against the baseline
# with the read bandwidth measured in the same run, the dev/cuda programs
# (read probes; the fused kernel's versions), and an ncu read of the DRAM bytes
# and durations of both routes at 64K.
#
# OUT gets five files: log.txt (the whole console), summary.txt (the table printed
# last), receipts.tar.gz (every JSON receipt, ncu output, command), cmake.txt and
# build.txt. The receipts themselves and the model files the phases write live in
# WORK (default: a new folder under /tmp), so that a device call, which returns at
# most 8 files, always returns the tarball.
#
# Environment:
#   PHASES   space-separated subset of: build test sanitize resources diff
#            bench kfv kfv-ncu peers dev sanitize sweep ncu model31 model model-tests
#            model-dev model31-bf16 model-sanitize tiles-bulk cublas model-ncu model-norms
#            tiles-q4k tiles-ring mma cpu cpu-abba cpu-dev cpu-int8 cpu-small cpu-perf cpu-parts
#            (default: all but kfv-ncu, the model phases, the five after model-sanitize, cpu and
#            cpu-parts, in that order)
#   CPU_LENGTHS  live lengths of the cpu phase's attention benches (default 8192,65536,131072)
#   CPU_THREAD_SWEEP  thread counts of the cpu phase's per-core benches (default "1 4 8"; "" skips)
#   CPU_DEV_ARGS  arguments of dev/cpu/mv_split in the cpu-dev phase (default: its own)
#   SMALL_LIVE_ARGS  arguments of dev/cpu/small_live in the cpu-small phase (default: its own)
#   A_GEM    cpu-abba, cpu-int8: the other build's gem (say the landed main's), timed against this one
#   MODEL_CONTEXTS  contexts of the 31B profile (default 8192,65536,131072)
#   MODEL_REPS / MODEL_SAMPLES  its repetitions and steps per route (default 3 / 5)
#   MATVEC_ARGS arguments of dev/cuda/model_matvec (default: every type)
#   MODEL31_DIFF 0 skips the 31B model differentials (the profile alone; default 1)
#   BENCH_ARGS  extra arguments of the default-vs-baseline bench
#   DEV_ARGS    arguments of dev/cuda/fused_decode (default: every version)
#   MMA_ARGS    arguments of dev/cuda/mma_decode (default: every version)
#   KV_ARGS     arguments of dev/cuda/kv_dtypes (default: every version)
#   JOBS     build parallelism (default: nproc)
#   BUILD_TARGETS  build only these CMake targets (e.g. dev_mma_decode; default: all)
# Needs: nvcc 13 / CUDA 13, cmake, python3; jansson and OpenSSL headers, or the
# static copies under .deps/dist (include/, lib/) carried with the tree.
set -u -o pipefail

OUT=${1:?usage: scripts/h200-run.sh OUT}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build-h200
WORK=${WORK:-$(mktemp -d /tmp/h200-run.XXXXXX)}
mkdir -p "$WORK"
REC=$WORK/rec # receipts, tarred into OUT/receipts.tar.gz
mkdir -p "$REC"
PHASES=${PHASES:-"build test resources diff bench kfv peers dev sanitize sweep ncu"}
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
    . "$SRC/scripts/deps-cmake.sh" || exit 2 # CMAKE_EXTRA: jansson and OpenSSL
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        "${CMAKE_EXTRA[@]}" >"$OUT/cmake.txt" 2>&1 || { tail -30 "$OUT/cmake.txt"; exit 2; }
    grep -E "gem: CUDA|jansson|OpenSSL" "$OUT/cmake.txt"
    if ! cmake --build "$BUILD" -j"$JOBS" ${BUILD_TARGETS:+--target $BUILD_TARGETS} \
        >"$OUT/build.txt" 2>&1; then
        grep -E -B3 -A10 "error" "$OUT/build.txt" | head -60
        exit 2
    fi
    grep -E "spill|warning" "$OUT/build.txt" | head -20
    [ -n "${BUILD_TARGETS:-}" ] || "$GEM" --version || exit 2
fi

# ---- tests ------------------------------------------------------------------------
if has test; then
    step "the test suite (ctest)"
    (cd "$BUILD" && GEM_QUIET=1 ctest --output-on-failure -j4) >"$REC/ctest.txt" 2>&1 ||
        fail "ctest"
    tail -3 "$REC/ctest.txt"
    step "the decode test matrix with the long lengths"
    "$BUILD/test_decode" --long >"$REC/test-decode-long.txt" 2>&1 || fail "test_decode --long"
    tail -2 "$REC/test-decode-long.txt"
fi

# ---- resource receipts and ceilings ---------------------------------------------------
if has resources; then
    step "gem resources (the kernels that ship) and the ceilings"
    (cd "$SRC" && "$GEM" resources --out "$REC/resources.json" --ceilings "$REC/ceilings.json" \
        --bandwidth-bytes 4294967296 --reps 20) || fail "gem resources"
    (cd "$SRC" && "$GEM" analyze resources "$REC/resources.json" --out "$REC/resources-analysis.json" \
        >"$REC/resources-analysis.txt" 2>&1) || { cat "$REC/resources-analysis.txt"; fail "analyze resources"; }
    tail -2 "$REC/resources-analysis.txt"
    step "the design candidate's resource receipt (dev/cuda/fused_decode version 1)"
    (cd "$SRC" && "$BUILD/dev/fused_decode" --resources-v1 "$REC/resources-design-v1.json") ||
        fail "version 1 resources"
    (cd "$SRC" && "$GEM" analyze resources "$REC/resources-design-v1.json" \
        >"$REC/resources-design-v1-analysis.txt" 2>&1) ||
        { cat "$REC/resources-design-v1-analysis.txt"; fail "analyze version 1 resources"; }
fi

# ---- differentials ------------------------------------------------------------------
if has diff; then
    step "gem diff --backend cuda: the default vs the baseline vs double"
    "$GEM" diff --backend cuda --lengths 1,13,4097,8191,8192,8193,65536,131072 \
        --out "$REC/diff-default" || fail "gem diff default"
    pack
fi

bench() { # name, bench args...
    local name=$1
    shift
    if late && [ "$name" != default ]; then
        echo "-- skipped bench $name: past the ${BUDGET_S}s budget"
        return 0
    fi
    step "bench $name"
    "$GEM" bench --backend cuda --out "$REC/bench-$name.json" "$@" || fail "bench $name"
    pack
}

# ---- the default against the baseline --------------------------------------------------
if has bench; then
    bench default --a baseline --b fused --lengths 8192,65536,131072 --rounds 20 \
        --bw-mib 4096 --bw-reps 10 ${BENCH_ARGS:-}
    # eight calls queued back to back a sample: the call inside a decode loop
    bench calls8 --a baseline --b fused --calls 8 --lengths 8192,65536,131072 --rounds 20 \
        --bw-mib 4096 --bw-reps 10 ${BENCH_ARGS:-}
    # the BF16 cache (the baseline reads F32 only: the default against itself)
    bench calls8-bf16 --a fused --b fused --calls 8 --kv-dtype bf16 \
        --lengths 8192,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10 ${BENCH_ARGS:-}
fi

# ---- K rebuilt from V (Gemma 4's K = V layers): V alone against the stored K and V -----------
if has kfv; then
    bench kfv-f32 --a fused --b fused --k-from-v --lengths 8192,65536,131072 --rounds 10 \
        --bw-mib 4096 --bw-reps 10
    bench kfv-bf16 --a fused --b fused --k-from-v --kv-dtype bf16 \
        --lengths 8192,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10
    bench kfv-f16 --a fused --b fused --k-from-v --kv-dtype f16 \
        --lengths 8192,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10
fi
if has kfv-ncu && command -v ncu >/dev/null; then
    step "ncu of the K-from-V first pass at 128K (F32 and BF16): what limits it"
    for dt in f32 bf16; do
        GEM_QUIET=1 timeout 150 ncu --clock-control none --section SpeedOfLight \
            --section Occupancy --section LaunchStats --section WarpStateStats \
            -k regex:'gem_fused_first_pass' --launch-skip 4 --launch-count 2 \
            --log-file "$REC/ncu-kfv-$dt.txt" \
            "$GEM" bench --backend cuda --a fused --b fused --k-from-v --kv-dtype $dt \
            --lengths 131072 --rounds 1 --warmup 0 --bw-mib 64 --bw-reps 1 \
            --out "$REC/ncu-kfv-bench-$dt.json" >/dev/null 2>&1 || fail "ncu kfv $dt"
    done
    pack
fi

# ---- experiments ----------------------------------------------------------------------
if has dev; then
    step "dev/cuda/read_probe: the read probes, one axis at a time"
    "$BUILD/dev/read_probe" --bytes 4294967296 --reps 20 >"$REC/dev-read-probe.txt" 2>&1 ||
        fail "read_probe"
    cat "$REC/dev-read-probe.txt"
    step "dev/cuda/fused_decode: the fused kernel's versions, validated then timed"
    "$BUILD/dev/fused_decode" ${DEV_ARGS:-} >"$REC/dev-fused-decode.txt" 2>&1 ||
        fail "fused_decode"
    cat "$REC/dev-fused-decode.txt"
    step "dev/cuda/kv_dtypes: F32, BF16 and F16 caches through gem_decode"
    "$BUILD/dev/kv_dtypes" ${KV_ARGS:-} >"$REC/dev-kv-dtypes.txt" 2>&1 || fail "kv_dtypes"
    cat "$REC/dev-kv-dtypes.txt"
    pack
fi

# ---- peers: torch and FlashInfer beside gem in one process (scripts/peers) ------------------
if has peers; then
    step "peers: gem, torch and FlashInfer on the same inputs (scripts/peers/decode_peers.py)"
    if [ -f "$SRC/.peers/env.sh" ]; then
        ( . "$SRC/.peers/env.sh" && python3 "$SRC/scripts/peers/check_carry.py" ) \
            >"$REC/peers-check.txt" 2>&1 || echo "-- the FlashInfer carry folder did not check (see peers-check.txt)"
        tail -3 "$REC/peers-check.txt"
    else
        echo "-- no .peers folder: FlashInfer is not measured"
    fi
    ( [ -f "$SRC/.peers/env.sh" ] && . "$SRC/.peers/env.sh"; PYTHONUNBUFFERED=1 \
        python3 "$SRC/scripts/peers/decode_peers.py" --lib "$BUILD/libgem.so" \
        --out "$REC/peers.json" ${PEERS_ARGS:-} ) 2>&1 | tee "$REC/peers.txt" || fail "peers"
    pack
fi

if has sanitize; then  # after the timed phases, so a slow sanitizer cannot cut them short
    step "compute-sanitizer over the matrix's small cases"
    for tool in memcheck racecheck synccheck initcheck; do
        timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD/test_decode" --small \
            >"$REC/sanitizer-$tool.txt" 2>&1 || fail "compute-sanitizer $tool"
        tail -2 "$REC/sanitizer-$tool.txt"
        # the states, their merge and the split across devices (gem_decode_across)
        timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD/test_decode_states" \
            >"$REC/sanitizer-states-$tool.txt" 2>&1 || fail "compute-sanitizer $tool (states)"
        tail -1 "$REC/sanitizer-states-$tool.txt"
    done
    pack
fi

# ---- partitions at short contexts (the default's P against its neighbours) ------------------
if has sweep; then
    bench p64-vs-p32 --a fused --a-partitions 64 --b fused --b-partitions 32 \
        --lengths 8192,16384,32768 --rounds 10 --no-double --bw-mib 1024
    bench p64-vs-p128 --a fused --a-partitions 64 --b fused --b-partitions 128 \
        --lengths 8192,16384,32768 --rounds 10 --no-double --bw-mib 1024
fi

# ---- ncu: DRAM bytes and durations of both routes at 64K -------------------------------------
if has ncu && command -v ncu >/dev/null && ! late; then
    step "ncu (DRAM bytes and durations at 64K)"
    GEM_QUIET=1 timeout 180 ncu --clock-control none \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
        -k regex:'gem_(fused|baseline)' --launch-count 12 --csv --log-file "$REC/ncu-64k.csv" \
        "$GEM" bench --backend cuda --lengths 65536 --rounds 1 --warmup 0 --no-double \
        --bw-mib 64 --bw-reps 1 --out "$REC/ncu-bench.json" >/dev/null 2>&1 || fail "ncu"
fi

# ---- the Gemma 4 decoder on the GPU ----------------------------------------------------------
model31() { # weight type
    local ty=$1 f="$WORK/m31-$1.gguf" ctxs=${MODEL_CONTEXTS:-8192,65536,131072}
    step "Gemma 4 31B dimensions, $ty weights generated on the GPU: model differentials"
    # 262144 positions: Gemma 4 31B's context, room for the steps timed past 128K
    "$GEM" synth --preset 31b --type "$ty" --no-matrices --context-length 262144 --out "$f" |
        tee "$REC/synth-31b-$ty.txt"
    if [ "${MODEL31_DIFF:-1}" = 1 ]; then
        timeout 240 "$GEM" model-diff --model "$f" --backend cuda --random-weights 1 --fill 256 \
            --contexts 8191,8192,8193 --steps 8 --out "$REC/model-diff-31b-$ty" 2>&1 |
            tee "$REC/model-diff-31b-$ty.txt" || fail "model-diff 31b $ty"
    fi
    step "Gemma 4 31B dimensions, $ty weights: whole-token profile at $ctxs"
    timeout 300 "$GEM" profile --model "$f" --backend cuda --random-weights 1 --context "$ctxs" \
        --reps "${MODEL_REPS:-3}" --samples "${MODEL_SAMPLES:-5}" --bw-mib 4096 \
        --out "$REC/profile-31b-$ty.json" --stage-profile "$REC/stage-profile-31b-$ty.json" \
        2>&1 | tee "$REC/profile-31b-$ty.txt" || fail "profile 31b $ty"
    rm -f "$f"
    pack
}
if has model31; then model31 q4_0; fi
if has model; then
    step "the CUDA decoder on the tiny fixture: its tests, the transformers reference, the CPU decoder"
    timeout 120 "$BUILD/test_model_cuda" 2>&1 | tee "$REC/test-model-cuda.txt" || fail "test_model_cuda"
    "$GEM" synth --preset tiny --out "$WORK/tiny.gguf" >/dev/null
    for attn in fused baseline; do
        "$GEM" model-check --model "$WORK/tiny.gguf" --expected "$SRC/scripts/reference/gemma4-tiny.expected" \
            --backend cuda --attn $attn >"$REC/model-check-cuda-$attn.txt" 2>&1 || fail "model-check cuda $attn"
        tail -3 "$REC/model-check-cuda-$attn.txt"
    done
    "$GEM" model-diff --model "$WORK/tiny.gguf" --compare backends --contexts 30,31,64 --steps 8 \
        --out "$REC/model-diff-tiny-backends" 2>&1 | tee "$REC/model-diff-tiny-backends.txt" ||
        fail "model-diff backends"
    # widths that tile (every row count a multiple of 8, every input a multiple of 128): the
    # GPU's Q4_0 products run on the tensor cores, the CPU's in F32
    "$GEM" synth --preset tiny --type q4_0 --embd 256 --ff 512 --vocab 1024 --out "$WORK/tiles.gguf" >/dev/null
    "$GEM" model-diff --model "$WORK/tiles.gguf" --compare backends --contexts 30,31,64 --steps 8 \
        --out "$REC/model-diff-tiles-q4_0-backends" 2>&1 | tee "$REC/model-diff-tiles-q4_0-backends.txt" ||
        fail "model-diff backends (Q4_0 tiles)"
    pack
fi
if has model-tests; then
    step "the device kernels' tests: matrix products, queries, the decode matrix"
    for t in test_cuda_matvec test_cuda_queries test_decode test_decode_states; do
        # test_decode's default matrix takes about 280 s (its CPU reference at 8,193 rows)
        timeout 400 "$BUILD/$t" >"$REC/$t.txt" 2>&1 || fail "$t"
        tail -2 "$REC/$t.txt"
    done
    pack
fi
if has model-ncu && command -v ncu >/dev/null; then
    step "ncu: the duration of every kernel of a 31B token (Q4_0 tiles, weights of zeros)"
    f="$WORK/m31-ncu.gguf"
    "$GEM" synth --preset 31b --type q4_0 --no-matrices --context-length 4096 --out "$f" >/dev/null
    # 411 tile kernels while the weights go up, then the tokens of the two prompt positions
    GEM_QUIET=1 timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum \
        --launch-skip 411 --launch-count 1700 --csv --log-file "$REC/ncu-31b-token.csv" \
        "$GEM" generate --model "$f" --backend cuda --prompt-tokens 2,3 -n 1 \
        >"$REC/ncu-31b-generate.txt" 2>&1 || fail "ncu 31b token"
    python3 "$SRC/scripts/ncu-kernel-sums.py" "$REC/ncu-31b-token.csv" \
        >"$REC/ncu-31b-token-sums.txt" 2>&1 || fail "ncu sums"
    cat "$REC/ncu-31b-token-sums.txt"
    rm -f "$f"
    pack
fi
if has tiles-q4k; then
    step "dev/cuda/tiles_q4k: Q4_K products on the tensor cores against the library's"
    timeout 180 "$BUILD/dev/tiles_q4k" >"$REC/dev-tiles-q4k.txt" 2>&1 || fail "tiles_q4k"
    cat "$REC/dev-tiles-q4k.txt"
    pack
fi
if has mma; then
    step "dev/cuda/mma_decode: the BF16 tensor-core first pass, L2 prefetches ahead"
    timeout 240 "$BUILD/dev/mma_decode" ${MMA_ARGS:-} >"$REC/dev-mma-decode.txt" 2>&1 || fail "mma_decode"
    cat "$REC/dev-mma-decode.txt"
    pack
fi
if has tiles-ring; then
    step "dev/cuda/tiles_ring: the Q4_0 tile product through a cp.async ring against the library's"
    timeout 240 "$BUILD/dev/tiles_ring" >"$REC/dev-tiles-ring.txt" 2>&1 || fail "tiles_ring"
    cat "$REC/dev-tiles-ring.txt"
    if command -v ncu >/dev/null; then
        # --once: per shape, copies 0 and 1, each variant after the library (8 launches);
        # q is launches 0-3, gate+up 32-35, down 40-43
        for s in "q 0" "gate-up 32" "down 40"; do
            set -- $s
            timeout 150 ncu --clock-control none --section SpeedOfLight --section Occupancy \
                --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
                -k regex:'q4t_kernel|ring_kernel' --launch-skip "$2" --launch-count 4 \
                --log-file "$REC/ncu-tiles-ring-$1.txt" "$BUILD/dev/tiles_ring" --once \
                >/dev/null 2>&1 || fail "ncu tiles_ring $1"
        done
    fi
    pack
fi
if has model-norms; then
    step "dev/cuda/model_norms: the post-MLP norm kernel, loops against registers"
    timeout 60 "$BUILD/dev/model_norms" >"$REC/dev-model-norms.txt" 2>&1 || fail "model_norms"
    cat "$REC/dev-model-norms.txt"
    pack
fi
if has cublas; then
    step "dev/cuda/cublas_matvec: cuBLAS beside gem's BF16 products"
    timeout 180 "$BUILD/dev/cublas_matvec" >"$REC/dev-cublas-matvec.txt" 2>&1 || fail "cublas_matvec"
    cat "$REC/dev-cublas-matvec.txt"
    pack
fi
if has tiles-bulk; then
    step "dev/cuda/tiles_bulk: the Q4_0 tile product with bulk copies against the library's"
    timeout 180 "$BUILD/dev/tiles_bulk" >"$REC/dev-tiles-bulk.txt" 2>&1 || fail "tiles_bulk"
    cat "$REC/dev-tiles-bulk.txt"
    timeout 150 "$BUILD/test_cuda_matvec" >"$REC/test_cuda_matvec.txt" 2>&1 || fail "test_cuda_matvec"
    tail -1 "$REC/test_cuda_matvec.txt"
    pack
fi
if has model-dev && ! late; then
    step "dev/cuda/model_matvec and dev/cuda/sliding_decode"
    timeout 120 "$BUILD/dev/model_matvec" ${MATVEC_ARGS:-} >"$REC/dev-model-matvec.txt" 2>&1 ||
        fail "model_matvec"
    cat "$REC/dev-model-matvec.txt"
    timeout 60 "$BUILD/dev/sliding_decode" >"$REC/dev-sliding-decode.txt" 2>&1 || fail "sliding_decode"
    cat "$REC/dev-sliding-decode.txt"
    pack
fi
if has model31-bf16 && ! late; then model31 bf16; fi
# ---- the host's CPU (the CPU backend on this machine's processor) ------------------
if has cpu; then
    step "the CPU backend on the host's processor: attention benches and the 2gb model"
    { lscpu; echo; grep -m1 -o -w -E "amx_bf16|avx512_bf16|avx512f" /proc/cpuinfo | sort -u;
      free -g; } >"$REC/cpu-host.txt" 2>&1
    grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node\(|MHz|L3" "$REC/cpu-host.txt"
    CPU_LENGTHS=${CPU_LENGTHS:-8192,65536,131072}
    for t in f32 bf16 f16; do
        (cd "$WORK" && timeout 300 "$GEM" bench --backend cpu --kv-dtype $t --lengths "$CPU_LENGTHS" \
            --rounds 5 --bw-mib 4096 --out "$REC/cpu-bench-$t.json" >"$REC/cpu-bench-$t.txt" 2>&1) ||
            fail "cpu bench $t"
        grep -E "read bandwidth|baseline_|fused_|ratio" "$REC/cpu-bench-$t.txt"
    done
    for n in ${CPU_THREAD_SWEEP-1 4 8}; do # per-core rate: the fused route at 64K on n threads
        (cd "$WORK" && timeout 200 "$GEM" bench --backend cpu --threads $n --lengths 65536 --rounds 3 \
            --a fused --b fused --b-partitions 64 --bw-mib 4096 --out "$REC/cpu-bench-f32-t$n.json" \
            >"$REC/cpu-bench-f32-t$n.txt" 2>&1) || fail "cpu bench threads $n"
        grep -E "read bandwidth|fused_" "$REC/cpu-bench-f32-t$n.txt"
    done
    f="$WORK/synth-2gb.gguf"
    (cd "$WORK" && timeout 300 "$GEM" synth --preset 2gb --out "$f" >"$REC/cpu-synth-2gb.txt" 2>&1) ||
        fail "synth 2gb"
    for c in 64 1024; do
        (cd "$WORK" && timeout 300 "$GEM" profile --model "$f" --context $c --prompt 16 --reps 5 \
            --samples 4 --out "$REC/cpu-profile-2gb-ctx$c.json" >"$REC/cpu-profile-2gb-ctx$c.txt" 2>&1) ||
            fail "cpu profile 2gb ctx $c"
        tail -12 "$REC/cpu-profile-2gb-ctx$c.txt"
    done
    rm -f "$f"
    pack
fi
if has cpu-abba; then
    step "the host's CPU: this build against A_GEM, A B B A (the 2gb model, then attention)"
    [ -x "${A_GEM:-}" ] || { echo "cpu-abba needs A_GEM, the other build's gem"; exit 2; }
    f="$WORK/synth-2gb.gguf"
    (cd "$WORK" && timeout 300 "$GEM" synth --preset 2gb --out "$f" >/dev/null 2>&1) || fail "synth 2gb"
    timeout 400 "$SRC/scripts/abba-model.sh" "$A_GEM" "$GEM" "$f" "$REC/cpu-abba-2gb" 1 64,1024 ||
        fail "abba model"
    rm -f "$f"
    (cd "$WORK" && timeout 200 "$SRC/scripts/abba-binaries.sh" "$A_GEM" "$GEM" "$REC/cpu-abba-attn" 1 \
        8192,65536) || fail "abba attention"
    (cd "$WORK" && timeout 200 "$GEM" bench --backend cpu --kv-dtype bf16 --lengths 65536,131072 \
        --rounds 5 --bw-mib 4096 --out "$REC/cpu-bench-bf16.json" >"$REC/cpu-bench-bf16.txt" 2>&1) ||
        fail "cpu bench bf16"
    grep -E "read bandwidth|baseline_|fused_|ratio" "$REC/cpu-bench-bf16.txt"
    pack
fi
if has cpu-dev; then
    step "dev/cpu/mv_split: the split of a matrix product among the host's cores"
    timeout 300 "$BUILD/dev/mv_split" ${CPU_DEV_ARGS:-} >"$REC/dev-mv-split.txt" 2>&1 || fail "mv_split"
    cat "$REC/dev-mv-split.txt"
    pack
fi
if has cpu-int8; then
    step "dev/cpu/mv_int8: the integer products against the F32 rule, each packed type; Q4_K ABBA"
    for t in q8_0 q4_0 q4_k q6_k; do
        timeout 200 "$BUILD/dev/mv_int8" --type $t --rounds 5 --mib 1024 --layers 16 \
            >"$REC/dev-mv-int8-$t.txt" 2>&1 || fail "mv_int8 $t"
        grep -E "read bandwidth|int8 /|GB/s|floor" "$REC/dev-mv-int8-$t.txt"
    done
    if [ -x "${A_GEM:-}" ]; then
        f="$WORK/synth-2gb-q4k.gguf"
        (cd "$WORK" && timeout 300 "$GEM" synth --preset 2gb --type q4_k --out "$f" >/dev/null 2>&1) ||
            fail "synth 2gb q4_k"
        timeout 300 "$SRC/scripts/abba-model.sh" "$A_GEM" "$GEM" "$f" "$REC/cpu-abba-2gb-q4k" 1 64 ||
            fail "abba model q4_k"
        rm -f "$f"
    fi
    pack
fi
if has cpu-parts; then
    step "dev/cpu/core_probe and fused_parts: the host's FMA rate and the fused item's kernels by thread count"
    timeout 120 "$BUILD/dev/core_probe" --rounds 5 >"$REC/dev-core-probe.txt" 2>&1 || fail "core_probe"
    cat "$REC/dev-core-probe.txt"
    for t in bf16 f32; do
        timeout 120 "$BUILD/dev/fused_parts" --dtype $t --reps 400 --rounds 5 --threads 1,8,16 \
            >"$REC/dev-fused-parts-$t.txt" 2>&1 || fail "fused_parts $t"
        cat "$REC/dev-fused-parts-$t.txt"
    done
    pack
fi
if has cpu-small; then
    step "dev/cpu/small_live: the CPU fused route at a token's short contexts, by partitions"
    timeout 300 "$BUILD/dev/small_live" ${SMALL_LIVE_ARGS:-} >"$REC/dev-small-live.txt" 2>&1 ||
        fail "small_live"
    cat "$REC/dev-small-live.txt"
    pack
fi
if has cpu-perf; then
    step "perf: where a 2gb token's time goes on the host's CPU (context 64, fused)"
    if command -v perf >/dev/null; then
        f="$WORK/synth-2gb.gguf"
        (cd "$WORK" && timeout 300 "$GEM" synth --preset 2gb --out "$f" >/dev/null 2>&1) || fail "synth 2gb"
        (cd "$WORK" && timeout 200 perf record -F 4999 -g -o "$WORK/perf.data" "$GEM" profile \
            --model "$f" --context 64 --prompt 16 --reps 2 --samples 8 \
            --out "$REC/cpu-perf-profile.json" >"$REC/cpu-perf-profile.txt" 2>&1) || fail "perf record"
        perf report -i "$WORK/perf.data" --stdio --no-children --sort symbol 2>/dev/null |
            grep -v "^$" | head -150 >"$REC/cpu-perf-symbols.txt"
        perf report -i "$WORK/perf.data" --stdio --no-children --sort symbol -g caller,0.5,callee \
            --percent-limit 2 2>/dev/null | head -400 >"$REC/cpu-perf-callers.txt"
        grep -E "^ +[0-9]" "$REC/cpu-perf-symbols.txt" | head -40
        rm -f "$f" "$WORK/perf.data"
    else
        echo "-- no perf on this machine"
    fi
    pack
fi
if has model-sanitize && ! late; then
    step "compute-sanitizer over the CUDA decoder (tiny fixture), the Q4_0 tiles and the argmax"
    # racecheck over the whole decoder test runs past 4 minutes: the other tools there, every
    # tool over the tiles' own test (the kernel with shared memory of its own)
    for tool in memcheck synccheck initcheck; do
        timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD/test_model_cuda" \
            >"$REC/sanitizer-model-$tool.txt" 2>&1 || fail "compute-sanitizer model $tool"
        tail -2 "$REC/sanitizer-model-$tool.txt"
    done
    for tool in memcheck racecheck synccheck initcheck; do
        timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD/test_cuda_matvec" \
            --tiles >"$REC/sanitizer-tiles-$tool.txt" 2>&1 || fail "compute-sanitizer tiles $tool"
        tail -2 "$REC/sanitizer-tiles-$tool.txt"
    done
    pack
fi

# ---- summary --------------------------------------------------------------------------------
if ls "$REC"/bench-*.json >/dev/null 2>&1; then
    step "summary"
    python3 "$SRC/scripts/bench-summary.py" "$REC" >"$OUT/summary.txt" || fail "summary"
    cat "$OUT/summary.txt"
fi
pack
echo "== done in $(($(date +%s) - T0))s; failures: ${#FAILS[@]} ${FAILS[*]:-}"
[ ${#FAILS[@]} -eq 0 ]
