#!/usr/bin/env bash
# run 94: K rebuilt from V with the F64 tensor cores: dev/cuda/kfv_mma version 4 (BF16 V: the
# rotating dims on mma.m8n8k4.f64, the rest on the BF16 mma) and version 5 (F32 V: every product
# on mma.m8n8k4.f64), each beside the library's K-from-V pass (1) and stored-K pass (2)
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r94; mkdir -p $R
BUILD_TARGETS=dev_kfv_mma PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run94.tgz .); }
for m in "" "--f32"; do
  timeout 60 $K $m --rounds 1 --lengths 1,13,4097,8193 > $R/small$m.txt 2>&1; echo "small$m rc=$?"; grep -E "nmse|INVALID" $R/small$m.txt | sed 's/against.*//' | tr '\n' ';'; echo
  timeout 60 $K $m --rounds 1 --lengths 8193 --pos0 1000000 > $R/pos$m.txt 2>&1; echo "pos$m rc=$?"; grep -E "nmse|INVALID" $R/pos$m.txt | sed 's/against.*//' | tr '\n' ';'; echo
done
save
timeout 150 $K --rounds 10 1 2 4 > $R/bf16.txt 2>&1; echo "bf16 rc=$?"; grep -vE "nmse" $R/bf16.txt
save
timeout 150 $K --f32 --rounds 10 1 2 5 > $R/f32.txt 2>&1; echo "f32 rc=$?"; grep -vE "nmse" $R/f32.txt
save
for m in "4" "--f32 5"; do
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $K $m --rounds 1 --lengths 13,4097 > $R/memcheck-${m// /}.txt 2>&1; echo "memcheck $m rc=$?"; tail -2 $R/memcheck-${m// /}.txt
  timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $K $m --rounds 1 --lengths 4097 > $R/racecheck-${m// /}.txt 2>&1; echo "racecheck $m rc=$?"; tail -2 $R/racecheck-${m// /}.txt
done
save
