#!/usr/bin/env bash
# abba-binaries.sh A_GEM B_GEM OUT [ROUNDS] [LENGTHS]: times the CPU fused route of two gem
# builds (say the landed main and this tree) against each other, process by process in the
# order A B B A for ROUNDS rounds (default 3), each process a `gem bench` of the fused route
# P32 tile 4 against itself at LENGTHS (default 65536,131072; every sample of both columns
# counts for that build). Writes OUT/A-<i>.json, OUT/B-<i>.json and OUT/summary.txt: per length
# the median, min and max of each build and the ratio of the medians (B over A).
set -euo pipefail
a=${1:?usage: abba-binaries.sh A_GEM B_GEM OUT [ROUNDS] [LENGTHS]}
b=${2:?}
out=${3:?}
rounds=${4:-3}
lengths=${5:-65536,131072}
mkdir -p "$out"
args=(bench --a fused --a-partitions 32 --a-tile 4 --b fused --b-partitions 32 --b-tile 4
      --lengths "$lengths" --rounds 3 --warmup 1 --no-double --bw-mib 256 --bw-reps 3)
i=0
for r in $(seq 1 "$rounds"); do
    for who in A B B A; do
        i=$((i + 1))
        bin=$a; [ "$who" = B ] && bin=$b
        GEM_QUIET=1 "$bin" "${args[@]}" --out "$out/$who-$i.json" >/dev/null
    done
done
python3 - "$out" "$a" "$b" <<'PY' | tee "$out/summary.txt"
import glob, json, os, statistics, sys
out, a, b = sys.argv[1:4]
samples = {}
for f in sorted(glob.glob(os.path.join(out, "[AB]-*.json"))):
    who = os.path.basename(f)[0]
    for c in json.load(open(f))["cases"]:
        s = c["timing"]["a"]["seconds"] + c["timing"]["b"]["seconds"]
        samples.setdefault((c["live"], who), []).extend(s)
print(f"A = {a}\nB = {b}\nCPU fused P32 tile 4, processes in A B B A order; ms")
for live in sorted({k[0] for k in samples}):
    ma = statistics.median(samples[(live, "A")]) * 1e3
    mb = statistics.median(samples[(live, "B")]) * 1e3
    print(f"{live:>8}  A {ma:8.2f} [{min(samples[(live, 'A')]) * 1e3:.2f}-{max(samples[(live, 'A')]) * 1e3:.2f}]"
          f"  B {mb:8.2f} [{min(samples[(live, 'B')]) * 1e3:.2f}-{max(samples[(live, 'B')]) * 1e3:.2f}]"
          f"  B/A {mb / ma:.3f}")
PY
