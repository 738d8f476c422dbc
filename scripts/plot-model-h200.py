#!/usr/bin/env python3
"""plot-model-h200.py [--out OUT.png] [LABEL=DIR ...]: tokens per second of the Gemma 4
decoder on the GPU against context length, both full-layer routes and the floor ((weights +
KV bytes read per token) / read bandwidth measured in the same run), one panel per LABEL=DIR
(LABEL names the weights, say Q4_0; DIR holds the gem.model_profile.v1 records of one run,
one per context). Default: Q4_0=results/h200/run168/out/gate into docs/model-h200-tokens.png.
Needs matplotlib (a virtual environment outside the repository: python3 -m venv V &&
V/bin/pip install matplotlib)."""
import argparse
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--out", default=os.path.join(src, "docs/model-h200-tokens.png"))
ap.add_argument("panels", nargs="*", metavar="LABEL=DIR",
                default=["Q4_0=" + os.path.join(src, "results/h200/run168/out/gate")])
args = ap.parse_args()


def records(run):
    """The run's gem.model_profile.v1 records, by context; one per context."""
    recs = {}
    for p in glob.glob(os.path.join(run, "*.json")):
        try:
            d = json.load(open(p))
        except (OSError, ValueError) as e:
            sys.exit(f"{p}: not JSON: {e}")
        if not isinstance(d, dict) or d.get("schema") != "gem.model_profile.v1":
            continue
        n = d["context"]["positions"]
        if n in recs:
            sys.exit(f"{run}: two records at context {n}")
        recs[n] = d
    if not recs:
        sys.exit(f"no gem.model_profile.v1 records in {run}")
    return [recs[n] for n in sorted(recs)]


panels = []
for arg in args.panels:
    label, sep, run = arg.partition("=")
    if not sep or not label or not run:
        sys.exit(f"{arg}: expected LABEL=DIR")
    panels.append((label, records(run)))

fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 5.5), squeeze=False)
for ax, (label, recs) in zip(axes[0], panels):
    ctx = [d["context"]["positions"] / 1024 for d in recs]
    for route, style in (("baseline", "o-"), ("fused", "s-")):
        ax.plot(ctx, [d["routes"][route]["tokens_per_s"] for d in recs], style,
                label=f"{route} route on the full layers (median of {recs[0]['repetitions']} x "
                      f"{recs[0]['samples_per_repetition']} tokens)")
    ax.plot(ctx, [1e3 / d["routes"]["fused"]["floor_median_ms"] for d in recs], "k--",
            label="floor: (weights + KV read per token) / measured read bandwidth")
    for c, d in zip(ctx, recs):
        ax.annotate(f"{100 / d['routes']['fused']['x_floor']:.1f}%", (c, d["routes"]["fused"][
            "tokens_per_s"]), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8)
    m = recs[0]["model"]
    gpu = recs[0]["machine"]["gpu"].split(",")[0].replace("NVIDIA ", "")
    kv = recs[0]["context"].get("kv_dtype", "f32").upper()
    ax.set_title(f"{m['name']} ({m['n_layers']} layers, {label} weights, {kv} KV) on one {gpu}",
                 fontsize=10)
    ax.set_xlabel("context (K tokens); the fused route's share of the floor marked")
    ax.set_ylabel("tokens per second")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ctx)
    ax.set_xticklabels([f"{int(c)}K" for c in ctx])
    ax.set_ylim(0, None)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
fig.tight_layout()
fig.savefig(args.out, dpi=110)
print(args.out)
