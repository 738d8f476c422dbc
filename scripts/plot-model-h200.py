#!/usr/bin/env python3
"""plot-model-h200.py [RUN_DIR] [OUT.png]: tokens per second of the Gemma 4 decoder on the
GPU against context length, both full-layer routes and the floor ((weights + KV bytes read
per token) / read bandwidth measured in the same run), from the gem.model_profile.v1
records of one H200 run (default results/h200/run168/out/gate). Needs matplotlib (a virtual
environment outside the repository: python3 -m venv V && V/bin/pip install matplotlib)."""
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
run = sys.argv[1] if len(sys.argv) > 1 else os.path.join(src, "results/h200/run168/out/gate")
out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(src, "docs/model-h200-tokens.png")
recs = []
for p in glob.glob(os.path.join(run, "profile-*.json")):
    d = json.load(open(p))
    if d.get("schema") != "gem.model_profile.v1":
        continue
    recs.append(d)
if not recs:
    sys.exit("no gem.model_profile.v1 records in " + run)
recs.sort(key=lambda d: d["context"]["positions"])
ctx = [d["context"]["positions"] / 1024 for d in recs]
fig, ax = plt.subplots(figsize=(8, 5.5))
for route, style in (("baseline", "o-"), ("fused", "s-")):
    ax.plot(ctx, [d["routes"][route]["tokens_per_s"] for d in recs], style,
            label=f"{route} route on the full layers (median of {recs[0]['repetitions']} x "
                  f"{recs[0]['samples_per_repetition']} tokens)")
ax.plot(ctx, [1e3 / d["routes"]["fused"]["floor_median_ms"] for d in recs], "k--",
        label="floor: (weights + KV read per token) / measured read bandwidth")
m = recs[0]["model"]
ax.set_title(f"{m['name']} ({m['n_layers']} layers, Q4_0 weights, F32 KV) on one H200")
ax.set_xlabel("context (K tokens)")
ax.set_ylabel("tokens per second")
ax.set_xscale("log", base=2)
ax.set_xticks(ctx)
ax.set_xticklabels([f"{int(c)}K" for c in ctx])
ax.set_ylim(0, None)
ax.grid(True, alpha=0.3)
ax.legend(loc="lower left", fontsize=9)
fig.tight_layout()
fig.savefig(out, dpi=110)
print(out)
