#!/usr/bin/env bash
# run 181 (right after run 180, the same build): compute-sanitizer racecheck over test_decode
# --small, then test_decode's default matrix (CPU and CUDA targets; FP8 on CUDA now runs the
# production shape's fused cases).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r181; mkdir -p $R
save() { (cd $R && tar czf $OUT/run181.tgz .); }
B=build-h200
ls -la $B/test_decode > $R/binary.txt 2>&1 || { echo "no build from run 180"; exit 2; }
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_decode --small \
  > $R/racecheck-decode.txt 2>&1
echo "racecheck rc=$? at $(el) s"; tail -n 3 $R/racecheck-decode.txt
save
timeout 400 $B/test_decode > $R/test_decode.txt 2>&1
echo "test_decode rc=$? at $(el) s"; grep -iE "fail" $R/test_decode.txt | head -20
tail -n 3 $R/test_decode.txt
save; echo "done at $(el) s"
