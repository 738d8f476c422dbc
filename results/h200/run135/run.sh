#!/usr/bin/env bash
# run 135: the library's long F32 K-from-V pass on version 30's form (each pair at an mbarrier
# of its own, in static shared memory; the loop over the quads that do not rotate unrolled by
# 6, without spills): the whole test suite and gem resources (gem.resources.v7); the pass
# through gem_decode (kfv_mma version 1, 64 partitions) beside versions 29 and 30 at 64
# partitions, bits compared; the crossover with the CUDA-core pass (version 1 below 32K)
# against version 30; the four sanitizers over the pass; gem bench --k-from-v.
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r135; mkdir -p $R
save() { (cd $R && tar czf $OUT/run135.tgz .); }
BUDGET_S=200 PHASES="build resources" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1
echo "runner rc=$?"; grep -E "^== |FAIL|verdict" $R/runner.txt | tail -4
save
B=build-h200; K=$B/dev/kfv_mma
(cd $B && GEM_QUIET=1 timeout 120 ctest --output-on-failure -j8) > $R/ctest.txt 2>&1; echo "ctest rc=$?"; tail -3 $R/ctest.txt
grep -E "FAIL|failed" $R/ctest.txt | head -5
save
timeout 120 $K --f32 --rounds 10 --partitions 64 --lengths 32768,65536,131072 1 29 30 > $R/lib-vs-29-30.txt 2>&1; echo "lib rc=$?"; grep -vE "^live|^K rebuilt" $R/lib-vs-29-30.txt | sed 's/against.*//'
save
timeout 80 $K --f32 --rounds 10 --partitions 64 --lengths 16384,24576 1 30 > $R/cross.txt 2>&1; echo "cross rc=$?"; grep -vE "^live|^K rebuilt|nmse|bits" $R/cross.txt
save
for T in memcheck racecheck synccheck initcheck; do
  timeout 80 compute-sanitizer --tool $T --error-exitcode 9 --kernel-name kns=k_from_v_f32_long $K --f32 1 --rounds 1 --lengths 32768,40001 > $R/$T-f32-long.txt 2>&1; echo "$T rc=$?"; tail -1 $R/$T-f32-long.txt
done
save
timeout 60 $B/gem bench --backend cuda --a fused --b fused --k-from-v --kv-dtype f32 --lengths 32768,65536,131072 --rounds 10 --bw-mib 4096 --bw-reps 10 --out $R/bench-kfv-f32.json > $R/bench-kfv-f32.txt 2>&1; echo "bench rc=$?"; tail -6 $R/bench-kfv-f32.txt
save
