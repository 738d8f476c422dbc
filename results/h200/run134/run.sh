#!/usr/bin/env bash
# run 134: racecheck of run 133's minimal kernel in version 30's layout (stages by cp.async, the
# table of 1,024 float4, the mbarriers right after it): with cp.async (7), with plain stores (8),
# with the mbarriers at the start of shared memory (9); 0 again as the control.
set -u -o pipefail
R=/tmp/r134; mkdir -p $R
save() { (cd $R && tar czf $OUT/run134.tgz .); }
nvcc -arch=sm_90 -lineinfo -o $R/mbr results/h200/run134/mbarrier_racecheck.cu > $R/nvcc.txt 2>&1 || { echo nvcc failed; cat $R/nvcc.txt; exit 1; }
for V in 0 7 8 9; do
  timeout 60 $R/mbr $V > $R/mbr-run-$V.txt 2>&1; echo "minimal $V run rc=$? $(cat $R/mbr-run-$V.txt)"
  timeout 90 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 6 --error-exitcode 9 $R/mbr $V > $R/mbr-racecheck-$V.txt 2>&1; echo "minimal $V racecheck rc=$?"; grep -E "SUMMARY" $R/mbr-racecheck-$V.txt
  grep -E "hazard detected" $R/mbr-racecheck-$V.txt | head -2
  save
done
for V in 7 9; do
  timeout 60 compute-sanitizer --tool synccheck --num-cuda-barriers 64 --error-exitcode 9 $R/mbr $V > $R/mbr-synccheck-$V.txt 2>&1; echo "minimal $V synccheck rc=$?"; tail -1 $R/mbr-synccheck-$V.txt
done
save
