#!/usr/bin/env bash
# abba-model.sh A_GEM B_GEM MODEL OUT [ROUNDS] [CONTEXTS] [THREADS]: times the CPU decoder of
# two gem builds (say the landed main and this tree) on one GGUF file, process by process in
# the order A B B A for ROUNDS rounds (default 2), each process a `gem profile` at each context
# of CONTEXTS (default 64; prompt 16, 3 interleaved repetitions of 4 steps per route) on
# THREADS threads (default 0: one per core). Writes OUT/A-<i>-ctxC.json, OUT/B-<i>-ctxC.json
# and OUT/summary.txt: per context and route the median, min and max whole-token time of each
# build, the ratio of the medians (B over A) and the median floor ratio.
set -euo pipefail
a=${1:?usage: abba-model.sh A_GEM B_GEM MODEL OUT [ROUNDS] [CONTEXTS] [THREADS]}
b=${2:?}
model=${3:?}
out=${4:?}
rounds=${5:-2}
contexts=${6:-64}
threads=${7:-0}
mkdir -p "$out"
i=0
for r in $(seq 1 "$rounds"); do
    for who in A B B A; do
        i=$((i + 1))
        bin=$a; [ "$who" = B ] && bin=$b
        for c in ${contexts//,/ }; do
            GEM_QUIET=1 "$bin" profile --model "$model" --context "$c" --prompt 16 --reps 3 \
                --samples 4 --threads "$threads" --out "$out/$who-$i-ctx$c.json" >/dev/null
        done
    done
done
python3 - "$out" "$a" "$b" <<'PY' | tee "$out/summary.txt"
import glob, json, os, statistics, sys
out, a, b = sys.argv[1:4]
ms, fl = {}, {}
for f in sorted(glob.glob(os.path.join(out, "[AB]-*-ctx*.json"))):
    who = os.path.basename(f)[0]
    d = json.load(open(f))
    for route, r in d["routes"].items():
        key = (d["context"]["positions"], route, who)
        ms.setdefault(key, []).extend(r["whole_token_ms"])
        fl.setdefault(key, []).extend(t / f for t, f in zip(r["whole_token_ms"], r["floor_ms"]))
print(f"A = {a}\nB = {b}\nwhole-token ms, processes in A B B A order; x floor: median of time / floor")
for (ctx, route) in sorted({k[:2] for k in ms}):
    row = []
    for who in "AB":
        s = ms[(ctx, route, who)]
        row.append(f"{who} {statistics.median(s):8.2f} [{min(s):.2f}-{max(s):.2f}] "
                   f"x{statistics.median(fl[(ctx, route, who)]):.2f}")
    ratio = statistics.median(ms[(ctx, route, "B")]) / statistics.median(ms[(ctx, route, "A")])
    print(f"ctx {ctx:>6} {route:9} " + "  ".join(row) + f"  B/A {ratio:.3f}")
PY
