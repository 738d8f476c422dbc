#!/usr/bin/env bash
# run 82: the long decode matrix on the shipped 16-bit passes; the CPU BF16 route at 16 cores
set -u -o pipefail
export GEM_GIT_COMMIT=730bd7b
R=/tmp/r82; mkdir -p $R
pk() { (cd $R && tar czf $OUT/run82.tgz.tmp . && mv $OUT/run82.tgz.tmp $OUT/run82.tgz); }
PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -3 $R/runner.txt; rm -f $R/receipts.tar.gz
B=build-h200
timeout 300 $B/test_decode --long > $R/test-decode-long.txt 2>&1; echo "test_decode --long rc=$?"; tail -3 $R/test-decode-long.txt; pk
# the CPU kernels before (293e413's cpu_kernels.c, carried in .cpu-old) and now
cp src/cpu_kernels.c /tmp/now.c && cp .cpu-old/cpu_kernels.c src/cpu_kernels.c && cmake --build $B -j16 --target gem >/dev/null && cp $B/gem /tmp/gem-a
cp /tmp/now.c src/cpu_kernels.c && cmake --build $B -j16 --target gem >/dev/null && cp $B/gem /tmp/gem-ps; ls -la /tmp/gem-a /tmp/gem-ps
med() { python3 -c "
import json,statistics,sys
x=[1e3*s for f in sys.argv[1:] for c in json.load(open(f))['cases'] for k in ('a','b') for s in c['timing'][k]['seconds']]
print('median %.3f ms min %.3f max %.3f n %d' % (statistics.median(x), min(x), max(x), len(x)))" "$@"; }
# E1: 16 cores with K and V in the L3 (8K, one copy): the compute rate of each build
for r in 1 2 3; do for v in a ps; do [ $r = 2 ] && v=$([ $v = a ] && echo ps || echo a)
  GEM_QUIET=1 timeout 40 /tmp/gem-$v bench --backend cpu --a fused --b fused --no-double --kv-dtype bf16 --lengths 8192 --copies 1 --rounds 5 --warmup 2 --bw-mib 256 --bw-reps 1 --out $R/l3-t16-$v-$r.json > /dev/null 2>&1 || echo "l3 $v $r failed"
done; done
for v in a ps; do echo "bf16 16 threads 8K in the L3, $v: $(med $R/l3-t16-$v-*.json)"; done | tee $R/l3-t16.txt; pk
# E2: partitions 32 against 64 at 128K, in one process (A B B A)
GEM_QUIET=1 timeout 90 /tmp/gem-ps bench --backend cpu --kv-dtype bf16 --lengths 65536,131072 --a fused --a-partitions 32 --b fused --b-partitions 64 --rounds 8 --bw-mib 4096 --out $R/p32-p64-bf16.json > $R/p32-p64-bf16.txt 2>&1; grep -E "read bandwidth|fused_|ratio" $R/p32-p64-bf16.txt; pk
# E3: 12 threads against 16 at 128K
for r in 1 2; do for n in 12 16; do
  GEM_QUIET=1 timeout 60 /tmp/gem-ps bench --backend cpu --threads $n --a fused --b fused --no-double --kv-dtype bf16 --lengths 131072 --rounds 4 --bw-mib 4096 --out $R/t$n-$r.json > /dev/null 2>&1 || echo "t$n $r failed"
done; done
for n in 12 16; do echo "bf16 128K, $n threads: $(med $R/t$n-*.json)"; done | tee $R/threads.txt; pk
