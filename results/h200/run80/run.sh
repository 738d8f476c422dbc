#!/usr/bin/env bash
# run 80: peers beside the staged BF16 pass; the F16 staged candidate; the host CPU's BF16 bound
set -u -o pipefail
export GEM_GIT_COMMIT=fbb0498
R=/tmp/r80; mkdir -p $R
pk() { (cd $R && tar czf $OUT/run80.tgz.tmp --exclude=receipts.tar.gz . && mv $OUT/run80.tgz.tmp $OUT/run80.tgz); }
PHASES="build peers" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -30 $R/runner.txt; pk
B=build-h200; G=$B/gem
tar xzf $R/receipts.tar.gz -C $R ./peers.json ./peers.txt ./peers-check.txt 2>/dev/null; pk
timeout 90 $B/dev/mma_decode --f16 --lengths 8193,65536,131072 --rounds 8 1 29 > $R/mma-decode-f16.txt 2>&1; tail -14 $R/mma-decode-f16.txt; pk
for s in 1e-20 1e4; do timeout 40 $B/dev/mma_decode --f16 --q-scale $s --lengths 8193,131072 --rounds 2 29 > $R/mma-decode-f16-q$s.txt 2>&1; echo "q-scale $s rc=$?"; tail -4 $R/mma-decode-f16-q$s.txt; done; pk
lscpu > $R/cpu-host.txt 2>&1
# per-core rate of the fused route on a BF16 cache, from DRAM (64K) and from the L3 (8K, one copy)
for n in 1 4 8 16; do
  timeout 60 $G bench --backend cpu --threads $n --kv-dtype bf16 --a fused --b fused --lengths 65536 --rounds 3 --no-double --bw-mib 4096 --out $R/cpu-bf16-64k-t$n.json > $R/cpu-bf16-64k-t$n.txt 2>&1; echo "bf16 64K t$n rc=$?"; grep -E "read bandwidth|fused_" $R/cpu-bf16-64k-t$n.txt | tail -3
done; pk
for t in f32 bf16 f16; do for n in 1 16; do
  timeout 60 $G bench --backend cpu --threads $n --kv-dtype $t --a fused --b fused --lengths 8192 --copies 1 --rounds 5 --warmup 2 --no-double --bw-mib 4096 --out $R/cpu-$t-8k-l3-t$n.json > $R/cpu-$t-8k-l3-t$n.txt 2>&1; echo "$t 8K L3 t$n rc=$?"; grep -E "fused_" $R/cpu-$t-8k-l3-t$n.txt | tail -2
done; done; pk
cp $R/receipts.tar.gz $OUT/ 2>/dev/null; true
