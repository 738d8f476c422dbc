#!/usr/bin/env bash
# The analyzer tests that rerun the merge check, before (A) and after (B) the oracle's and the
# merge check's dot products ran eight tokens side by side: test_analyze_merge in processes
# A B B A, then test_analyze_correctness A B; wall and user seconds of each (one process at a
# time, on this machine's 2 cores). A_GEM, B_GEM: each build's gem; SRC: the tree the tests
# and committed receipts come from (the same for both).
#   A_GEM=.../gem B_GEM=.../gem SRC=/path/to/tree bash results/cpu/oracle-chains/run.sh
set -u -o pipefail
cd "$(dirname "$0")"
A=${A_GEM:?A_GEM: gem before}; B=${B_GEM:?B_GEM: gem after}; S=${SRC:?SRC: the source tree}
lscpu > lscpu.txt
one() { # X test
  local G=$A; [ "$1" = B ] && G=$B
  /usr/bin/time -f "%e %U" -o time.tmp bash "$S/tests/$2.sh" "$G" "$S" > "$2-$1-$i.txt" 2>&1
  echo "$i $1 $2 rc=$? wall_s user_s $(cat time.tmp) | $(tail -1 "$2-$1-$i.txt")"
  rm -f time.tmp
  i=$((i + 1))
}
i=0
for X in A B B A; do one $X test_analyze_merge; done
for X in A B; do one $X test_analyze_correctness; done
