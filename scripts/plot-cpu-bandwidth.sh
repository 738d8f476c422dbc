#!/usr/bin/env bash
# Plots effective GB/s against context length for both routes of a gem.bench.v1
# record, with the read bandwidth measured in the same run as the ceiling.
#
#   scripts/plot-cpu-bandwidth.sh [RECORD.json] [OUT.png]
#
# Defaults: results/cpu/bench-baseline_p16-vs-fused_p32_t4.json -> docs/cpu-bandwidth.png.
# Needs jq and gnuplot (Debian: jq, gnuplot-nox). Fails on a record whose
# cases were not all timed.
set -euo pipefail
cd "$(dirname "$0")/.."
rec=${1:-results/cpu/bench-baseline_p16-vs-fused_p32_t4.json}
out=${2:-docs/cpu-bandwidth.png}
for tool in jq gnuplot; do
  command -v "$tool" >/dev/null || { echo "plot-cpu-bandwidth: $tool is not installed" >&2; exit 2; }
done
[ -f "$rec" ] || { echo "plot-cpu-bandwidth: no record $rec" >&2; exit 2; }
jq -e '.schema == "gem.bench.v1" and .verdict == "timed"' "$rec" >/dev/null ||
  { echo "plot-cpu-bandwidth: $rec is not a fully timed gem.bench.v1 record" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# live, GB/s of A, GB/s of B, ceiling GB/s
jq -r '.read_bandwidth.bytes_per_second as $bw
       | .cases[] | [.live, .gbps.a, .gbps.b, ($bw / 1e9)] | @tsv' "$rec" > "$tmp/data.tsv"
label() { jq -r ".$1 | .route + \"_p\" + (.partitions|tostring) + (if .tile > 0 then \"_t\" + (.tile|tostring) else \"\" end)" "$rec"; }
la=$(label route_a); lb=$(label route_b)
device=$(jq -r '.device' "$rec")

gnuplot <<GP
set terminal pngcairo size 900,560 noenhanced font ",11"
set output "$out"
set title "gem CPU decode attention: ${device}"
set xlabel "context length (tokens)"
set ylabel "effective GB/s (K+V bytes read once / median time)"
set logscale x 2
set format x "%.0f"
set key bottom right opaque box
set grid
set yrange [0:*]
set offsets 0, 0, graph 0.1, 0
plot "$tmp/data.tsv" using 1:4 with linespoints lw 2 dt 2 title "measured read bandwidth (same run)", \
     "$tmp/data.tsv" using 1:3 with linespoints lw 2 pt 7 title "$lb", \
     "$tmp/data.tsv" using 1:2 with linespoints lw 2 pt 5 title "$la"
GP
echo "wrote $out from $rec"
