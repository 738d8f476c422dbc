#!/usr/bin/env python3
"""summary.py BENCH.json...: run 224's table. Each record is one `gem bench --backend cpu` of
the default fused route (A) against a variant (B) in one process. Per (variant, type, length):
the median over the processes of each process's median pair ratio A/B (above 1: B faster),
its min and max, and the medians of A's and B's median time over the process's own floor.
Exits 1 with one line on a record that is not a timed, validated CPU bench of two fused
routes, or a figure that is not finite."""
import json
import math
import statistics
import sys
from collections import defaultdict


def fail(msg):
    sys.stderr.write(f"summary: {msg}\n")
    sys.exit(1)


def fin(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


rows = defaultdict(list)
for path in sys.argv[1:]:
    try:
        d = json.load(open(path))
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if d.get("schema") != "gem.bench.v1" or d.get("backend") != "cpu":
        fail(f"{path}: not a CPU gem.bench.v1 record")
    t = (d.get("kv_dtype") or {}).get("k")
    for c in d.get("cases") or fail(f"{path}: no cases"):
        if c.get("verdict") != "timed" or not (c.get("validation") or {}).get("passed"):
            fail(f"{path}: live {c.get('live')} not timed and validated")
        ra, rb = c["routes"]["a"], c["routes"]["b"]
        if ra["route"] != "fused" or rb["route"] != "fused":
            fail(f"{path}: routes {ra['route']} / {rb['route']}, want fused")
        if (ra["partitions"], ra["tile"]) != (32, 4):
            fail(f"{path}: A is P {ra['partitions']} tile {ra['tile']}, want the default 32 / 4")
        tm = c["timing"]
        r = tm["ratio_a_over_b"]["stats"]["median"]
        fl = c["floor_seconds"]
        ma, mb = tm["a"]["stats"]["median"], tm["b"]["stats"]["median"]
        if not all(fin(x) for x in (r, fl, ma, mb)):
            fail(f"{path}: live {c['live']}: a figure is not finite")
        key = (f"P{rb['partitions']} t{rb['tile']}", t, c["live"])
        rows[key].append((r, ma / fl, mb / fl))
if not rows:
    fail("no records")
print(f"{'B':10} {'KV':5} {'live':>7} {'procs':>5} {'A/B med':>8} {'min':>6} {'max':>6}"
      f" {'A xfloor':>8} {'B xfloor':>8}")
for (v, t, live), xs in sorted(rows.items()):
    rs = [x[0] for x in xs]
    print(f"{v:10} {t:5} {live:7d} {len(xs):5d} {statistics.median(rs):8.4f} {min(rs):6.3f}"
          f" {max(rs):6.3f} {statistics.median(x[1] for x in xs):7.3f}x"
          f" {statistics.median(x[2] for x in xs):7.3f}x")
print("A: the default fused route (P 32, tile 4); A/B: a process's median pair ratio, above 1"
      " when B is faster; xfloor: a route's median time over the process's own floor")
