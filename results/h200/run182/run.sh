#!/usr/bin/env bash
# run 182: (1) dev/cuda/fp8_decode versions 0, 3 and 5 (the codes kept FP8 in shared memory,
# 32-token tiles) at 8K / 64K / 128K, memcheck and racecheck over version 5; (2) issue 10's CPU
# target on the Xeon host: gem profile of this tree's CPU decoder, the 2gb preset, contexts 64
# and 1,024 alternating, all cores, as many processes as time allows, each against its own read
# probe; (3) if time is left, ncu over version 3 at 128K (one launch).
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r182; mkdir -p $R/profiles
save() { (cd $R && tar czf $OUT/run182.tgz .); }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
lscpu > $R/lscpu.txt 2>&1; grep -E "Model name|^CPU\(s\)" $R/lscpu.txt
GEM_GIT_COMMIT=$(cat results/h200/run182/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem dev_fp8_decode" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
B=build-h200
timeout 100 $B/dev/fp8_decode --rounds 10 0 3 5 > $R/fp8_decode.txt 2>&1
echo "fp8_decode rc=$? at $(el) s"; grep -E "nmse|median|INVALID|checked|FAILED" $R/fp8_decode.txt
save
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/dev/fp8_decode \
  --lengths 100,4097 --rounds 1 5 > $R/memcheck-v5.txt 2>&1
echo "memcheck v5 rc=$? at $(el) s"; tail -n 1 $R/memcheck-v5.txt
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/dev/fp8_decode \
  --lengths 100,4097 --rounds 1 5 > $R/racecheck-v5.txt 2>&1
echo "racecheck v5 rc=$? at $(el) s"; tail -n 1 $R/racecheck-v5.txt
save
$B/gem synth --preset 2gb --out /tmp/synth-2gb.gguf > $R/synth-2gb.txt 2>&1
echo "synth rc=$? at $(el) s"
for i in 1 2 3 4 5 6 7 8; do
  for c in 64 1024; do
    [ $(el) -gt 215 ] && break 2
    GEM_QUIET=1 timeout 30 $B/gem profile --model /tmp/synth-2gb.gguf --context $c --prompt 16 \
      --reps 3 --samples 4 --threads 0 --out $R/profiles/p$i-ctx$c.json \
      > $R/profiles/p$i-ctx$c.txt 2>&1
    echo "process $i ctx $c rc=$? at $(el) s:" \
      "$(grep -E 'fused +whole token' $R/profiles/p$i-ctx$c.txt | head -1 | cut -c1-100)"
  done
  save
done
if [ $(el) -lt 225 ]; then
  timeout 40 ncu --kernel-name regex:fp8_mma_first_pass --launch-count 1 \
    --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
    --section Occupancy $B/dev/fp8_decode --lengths 131072 --rounds 1 3 > $R/ncu-fp8.txt 2>&1
  echo "ncu rc=$? at $(el) s"
  grep -E "Duration|Throughput|Issue|Eligible|Active Warps|No Eligible|Warp Cycles" \
    $R/ncu-fp8.txt | head -20
fi
save; echo "done at $(el) s"
