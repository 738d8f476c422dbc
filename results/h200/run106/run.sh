#!/usr/bin/env bash
# run 106: dev/cuda/kfv_mma versions 16 and 17 (version 15 with its descriptors made once a
# tile and its copies at constant offsets; three and two stages) against the double reference
# and beside 15; the SASS of version 17. first-try/ and second-try/: two calls whose copies
# stopped on an illegal instruction (see COMMAND.md)
set -u -o pipefail
export GEM_GIT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
R=/tmp/r106; mkdir -p $R
BUILD_TARGETS=dev_kfv_mma PHASES="build" bash scripts/h200-run.sh $R > $R/runner.txt 2>&1; tail -1 $R/runner.txt; rm -f $R/receipts.tar.gz
K=build-h200/dev/kfv_mma
save() { (cd $R && tar czf $OUT/run106.tgz .); }
cuobjdump -sass -fun '_Z27alias_wgmma_lean_first_passILi2EEvPKfPK13__nv_bfloat16llPfS5_S5_lllf' $K > $R/sass-17.txt 2>&1; echo "sass $(wc -l < $R/sass-17.txt) lines"
timeout 40 $K --rounds 1 --partitions 33 --lengths 1,13,64,65,4097,8193 17 16 > $R/small.txt 2>&1; echo "small rc=$?"; grep -E "nmse|INVALID" $R/small.txt | sed 's/against.*//' | tr '\n' ';'; echo
save
timeout 90 $K --rounds 10 --partitions 33 15 17 16 > $R/bf16-p33.txt 2>&1; echo "P 33 rc=$?"; grep -vE "^live|^K rebuilt|nmse" $R/bf16-p33.txt
save
