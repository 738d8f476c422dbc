#!/usr/bin/env bash
# plot-h200.sh [OUT.png]: achieved GB/s (K+V bytes read once / median time) vs
# context length for the baseline, the design's fused candidate, the best
# fused variant (run 8's vshare 7), run 4's, run 5's vshare 3 and run 7's vshare 5, against the read bandwidth measured in the same runs, from
# the committed bench receipts under results/h200/. Needs python3 and gnuplot.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
PNG=${1:-$SRC/docs/cuda-gbps.png}
DAT=$(mktemp)
trap 'rm -f "$DAT"' EXIT
python3 - "$SRC/results/h200" >"$DAT" <<'PY'
import json, sys
r = sys.argv[1]
design = json.load(open(r + "/run2/bench-design.json"))   # baseline vs design candidate
best = json.load(open(r + "/run4/bench-final.json"))      # baseline vs best fused variant
quad = json.load(open(r + "/run5/bench-final.json"))      # baseline vs vshare 3 (run 5)
wide = json.load(open(r + "/run7/bench-wide-s0v5-t8-r2.json"))  # baseline vs vshare 5 (run 7)
last = json.load(open(r + "/run8/bench-last-s0v7-t8-r2.json"))  # baseline vs vshare 7 (run 8)
def rows(d, k):
    return {c["live"]: c["gbps"][k] for c in d["cases"]}
base, des, fus, qd = rows(best, "a"), rows(design, "b"), rows(best, "b"), rows(quad, "b")
wd, ls = rows(wide, "b"), rows(last, "b")
ceil = best["read_bandwidth"]["bytes_per_second"] * 1e-9
print("# live_k baseline design_fused run4_fused read_ceiling vshare3_fused vshare5_fused vshare7_fused")
for live in sorted(base):
    print(live // 1024, base[live], des[live], fus[live], ceil, qd[live], wd[live], ls[live])
PY
gnuplot <<GP
set terminal pngcairo size 900,760 font "sans,11"
set output "$PNG"
set title "gem decode attention on NVIDIA H200: achieved bandwidth (K+V read once / median time)"
set xlabel "context (K tokens)"
set ylabel "GB/s"
set logscale x 2
set xrange [6:170]
set xtics ("8K" 8, "64K" 64, "128K" 128)
set yrange [0:5000]
set key below left Left reverse
set grid
plot "$DAT" using 1:5 with lines dt 2 lw 2 lc rgb "black" title "measured read bandwidth (same run)", \
     "$DAT" using 1:(0.9*\$5) with lines dt 3 lw 1 lc rgb "gray40" title "90% of it (target)", \
     "$DAT" using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "baseline (score / normalize / value / reduce)", \
     "$DAT" using 1:3 with linespoints lw 2 pt 5 lc rgb "#ff7f0e" title "fused, design candidate (P32, tile 4)", \
     "$DAT" using 1:4 with linespoints lw 2 pt 9 lc rgb "#2ca02c" title "fused, run 4 (P64, tile 8, 2 dims/thread, 8-byte direct loads)", \
     "$DAT" using 1:6 with linespoints lw 2 pt 11 lc rgb "#9467bd" title "fused, vshare 3 (4 dims/thread, bulk copies), run 5", \
     "$DAT" using 1:7 with linespoints lw 2 pt 13 lc rgb "#8c564b" title "fused, vshare 5 (4 dims/thread, 16-byte direct loads), run 7", \
     "$DAT" using 1:8 with linespoints lw 2 pt 15 lc rgb "#d62728" title "fused, best: vshare 7 (vshare 5 + Q in shared memory, V issued earlier), run 8"
GP
echo "wrote $PNG"
