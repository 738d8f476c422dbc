#!/usr/bin/env python3
"""ncu-kernel-sums.py NCU.csv [TOKEN_KERNEL]: the kernels of an `ncu --csv --metrics
gpu__time_duration.sum` log summed by name: launches, total and mean microseconds, and per
token (the tokens counted by the launches of the kernel named TOKEN_KERNEL exactly, default
norm_kernel: the decoder's input norm, once per token). ncu runs every kernel alone, so these
are the kernels' own durations, without the gaps or the overlap of a stream."""
import csv
import re
import sys
from collections import defaultdict

path = sys.argv[1]
token_kernel = sys.argv[2] if len(sys.argv) > 2 else "norm_kernel"
rows = []
with open(path, newline="") as f:
    lines = [l for l in f if l.startswith('"')]  # ncu prints ==PROF== lines before the table
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    unit = r.get("Metric Unit", "")
    v = float(r["Metric Value"].replace(",", ""))
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
             "second": 1e6, "s": 1e6}.get(unit)
    if scale is None:
        sys.exit(f"unknown unit {unit!r}")
    name = r["Kernel Name"]
    name = re.sub(r"\(.*$", "", name)  # the argument list
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"<anonymous namespace>::|\(anonymous namespace\)::", "", name)
    rows.append((name, v * scale))
if not rows:
    sys.exit("no gpu__time_duration.sum rows in " + path)
tot = defaultdict(float)
cnt = defaultdict(int)
for n, us in rows:
    tot[n] += us
    cnt[n] += 1
tokens = cnt.get(token_kernel, 0)
print(f"{len(rows)} launches, {sum(tot.values()):.1f} us in all; tokens (launches of "
      f"{token_kernel}): {tokens}")
print(f"{'kernel':<60} {'launches':>8} {'total_us':>10} {'mean_us':>8} {'us/token':>9}")
for n in sorted(tot, key=lambda k: -tot[k]):
    per = tot[n] / tokens if tokens else float("nan")
    print(f"{n[:60]:<60} {cnt[n]:>8} {tot[n]:>10.1f} {tot[n] / cnt[n]:>8.2f} {per:>9.1f}")
