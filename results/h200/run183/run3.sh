#!/usr/bin/env bash
# run 183, third call (the host's CPUs, the first call's build kept): issue 11's CPU gate at
# more partitions. The fused route's default (32 partitions, 128 items at 4 KV heads: 8 a
# thread on 16 cores) against 64 and 128 partitions (16 and 32 items a thread, the last items
# ending closer together), F32 then BF16, 64K and 128K, in one process each (A and B rounds
# interleaved A B B A), each against the read bandwidth it measured itself.
set -u -o pipefail
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=/tmp/r183c; mkdir -p $R
save() { (cd $R && tar czf $OUT/run183c.tgz .); }
lscpu > $R/lscpu.txt 2>&1; grep -E "Model name|^CPU\(s\)|^Model:" $R/lscpu.txt
B=build-h200
[ -x $B/gem ] || { GEM_GIT_COMMIT=$(cat results/h200/run183/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1; }
echo "build at $(el) s"
for T in f32 bf16; do
  for P in 64 128; do
    [ $(el) -gt 130 ] && { echo "stop at $(el) s"; break 2; }
    GEM_QUIET=1 timeout $(( 165 - $(el) )) $B/gem bench --backend cpu --a fused \
      --a-partitions 32 --b fused --b-partitions $P --lengths 65536,131072 --kv-dtype $T \
      --rounds 6 --out $R/bench-$T-p32-p$P.json > $R/bench-$T-p32-p$P.txt 2>&1
    echo "$T P32 vs P$P rc=$? at $(el) s"
    grep -E "^[0-9]+ |x floor|ratio|read bandwidth" $R/bench-$T-p32-p$P.txt | head -12
    save
  done
done
echo "done at $(el) s"
