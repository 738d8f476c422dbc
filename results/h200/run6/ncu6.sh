#!/usr/bin/env bash
# ncu (full set) of three fused first passes at 64K: v3 t8 s3, v3 t8 s2, run-4 best s0 v2 t8
set -u
O=$1; mkdir -p $O
PHASES=build bash scripts/h200-run.sh $O/b >/dev/null 2>&1 || { tail -20 $O/b/log.txt; exit 2; }
G=$PWD/build-h200/gem
for c in "3 3" "2 3" "0 2"; do
  set -- $c
  GEM_QUIET=1 GEM_CUDA_FUSED_STAGES=$1 GEM_CUDA_FUSED_VSHARE=$2 timeout 150 ncu --clock-control none \
    --set full --import-source no -k regex:gem_fused_first_pass --launch-skip 1 --launch-count 1 \
    $G bench --backend cuda --lengths 65536 --b-partitions 64 --b-tile 8 --rounds 1 --warmup 0 \
    --no-double --copies 1 --bw-mib 64 --bw-reps 1 --out /tmp/nb.json >$O/ncu-s$1v$2.txt 2>&1
  echo "s$1v$2 rc=$?"; grep -E "Duration|DRAM Throughput|Issue Slots Busy|Warp Cycles Per Issued|Stall|Registers Per|Achieved Occ" $O/ncu-s$1v$2.txt | head -20
done
rm -rf $O/b
