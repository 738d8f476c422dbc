#!/usr/bin/env bash
# run 160 (from a checkout of the branch cpu-work-ahead): the owned items and the next
# product's preload on the Xeon host, 16 threads. dev/cpu/token_ahead switches plain / owned /
# ahead inside one process (A B C C B A blocks of 4 whole tokens), the 2gb preset at contexts
# 64 and 1,024, after the product check (o of layer 0 cold against its owned items preloaded).
set -u -o pipefail
T0=$(date +%s)
R=/tmp/r160; mkdir -p $R
save() { (cd $R && tar czf $OUT/run160.tgz .); }
el() { echo $(( $(date +%s) - T0 )); }
GEM_GIT_COMMIT=$(cat results/h200/run160/commit) PHASES=build JOBS=16 \
  BUILD_TARGETS="gem dev_token_ahead" bash scripts/h200-run.sh /tmp/b-out > $R/build.txt 2>&1
tail -n 1 $R/build.txt; echo "build done at $(el) s"
build-h200/gem synth --preset 2gb --out /tmp/synth-2gb.gguf > $R/synth.txt 2>&1
echo "synth rc=$? at $(el) s"
for C in 64 1024 64 1024; do
  [ $(el) -gt 420 ] && { echo "stop before context $C"; break; }
  timeout $(( 560 - $(el) )) build-h200/dev/token_ahead --model /tmp/synth-2gb.gguf \
    --context $C --rounds 10 --steps 4 --product >> $R/token_ahead.txt 2>&1
  echo "context $C rc=$? at $(el) s"; tail -n 7 $R/token_ahead.txt; save
done
