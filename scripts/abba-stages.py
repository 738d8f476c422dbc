#!/usr/bin/env python3
"""abba-stages.py DIR: the stage times of an A B B A run of scripts/abba-model.sh.

Reads DIR/[AB]-*-ctx*.json (gem.model_profile.v1 records) and prints, per context, route and
stage, the median of the A processes' stage times, the B processes' and their ratio (B / A);
the row "whole token" holds the tokens timed whole (two events a token, no stage events).
"""
import glob
import json
import os
import statistics
import sys

if len(sys.argv) != 2:
    sys.exit("usage: abba-stages.py DIR")
res = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "[AB]-*-ctx*.json"))):
    who = os.path.basename(f)[0]
    d = json.load(open(f))
    c = d["context"]["positions"]
    for route, r in d["routes"].items():
        for stage, v in r["stages_ms"].items():
            if isinstance(v, list):
                res.setdefault((c, route, stage, who), []).extend(v)
        res.setdefault((c, route, "whole token", who), []).extend(r["whole_token_ms"])
if not res:
    sys.exit("abba-stages.py: no records in " + sys.argv[1])
print("context route     stage               A ms      B ms    B/A")
for c, route, stage in sorted({k[:3] for k in res}):
    a, b = res.get((c, route, stage, "A")), res.get((c, route, stage, "B"))
    if not a or not b:
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    ratio = f"{mb / ma:6.3f}" if ma > 0 else "     -"
    print(f"{c:7d} {route:9s} {stage:18s} {ma:8.3f}  {mb:8.3f} {ratio}")
