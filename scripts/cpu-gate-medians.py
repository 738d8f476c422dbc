#!/usr/bin/env python3
"""cpu-gate-medians.py BENCH.json...: the CPU gate of the KV dtype issue (the fused route at
most 1.2x its floor with F32 K/V, 1.3x with BF16 or F16) judged on many processes at once.

Each argument is one `gem bench --backend cpu` record (gem.bench.v1) of a single KV dtype. A
process's figure for a length is the median of all its timed samples (routes A and B alike:
give the same route twice) over the floor it measured itself (K+V bytes / its own read
bandwidth). The verdict for a dtype and a length is the median of those figures over the
processes, with their min and max and how many processes met the gate on their own. FP8 E4M3
(the issue's stretch, with no gate of its own) is reported the same way with "no gate".

Fails closed (exit 1, one line on stderr) on a record that is not a timed, validated CPU bench
of the fused route, a dtype with K and V of different types, or a figure that is not finite;
exit 0 with the table otherwise (whether or not the gate is met: the table says it)."""
import json
import math
import statistics
import sys

GATE = {"f32": 1.2, "bf16": 1.3, "f16": 1.3, "fp8_e4m3": None}  # None: figures, no verdict


def fail(msg):
    sys.stderr.write(f"cpu-gate-medians: {msg}\n")
    sys.exit(1)


def finite_positive(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def read(path, figures):
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if d.get("schema") != "gem.bench.v1":
        fail(f"{path}: schema {d.get('schema')!r}, want gem.bench.v1")
    if d.get("backend") != "cpu":
        fail(f"{path}: backend {d.get('backend')!r}, want cpu")
    kv = d.get("kv_dtype") or {}
    t = kv.get("k")
    if kv.get("v") != t:
        fail(f"{path}: K {t!r} and V {kv.get('v')!r} differ; the gate is for one type")
    if t not in GATE:
        fail(f"{path}: KV dtype {t!r} is not one of {', '.join(GATE)}")
    for side in ("route_a", "route_b"):
        r = d.get(side) or {}
        if r.get("route") != "fused":
            fail(f"{path}: {side} is {r.get('route')!r}, want fused")
    cases = d.get("cases")
    if not cases:
        fail(f"{path}: no cases")
    for c in cases:
        live = c.get("live")
        if c.get("verdict") != "timed":
            fail(f"{path}: live {live}: verdict {c.get('verdict')!r}, want timed")
        v = c.get("validation") or {}
        if v.get("passed") is not True:
            fail(f"{path}: live {live}: validation did not pass")
        floor = c.get("floor_seconds")
        if not finite_positive(floor):
            fail(f"{path}: live {live}: floor_seconds {floor!r}")
        samples = []
        for side in ("a", "b"):
            s = ((c.get("timing") or {}).get(side) or {}).get("seconds")
            if not s:
                fail(f"{path}: live {live}: no samples for {side}")
            for x in s:
                if not finite_positive(x):
                    fail(f"{path}: live {live}: sample {x!r}")
            samples += s
        figures.setdefault((t, live), []).append((statistics.median(samples) / floor, path))


def main(paths):
    if not paths:
        fail("usage: cpu-gate-medians.py BENCH.json...")
    figures = {}
    for p in paths:
        read(p, figures)
    print(f"{'KV':<8} {'live':>7}  {'procs':>5}  {'median':>7}  {'min':>6}  {'max':>6}  "
          f"{'gate':>5}  {'met by':>7}  verdict")
    for (t, live) in sorted(figures, key=lambda k: (list(GATE).index(k[0]), k[1])):
        xs = [x for x, _ in figures[(t, live)]]
        med = statistics.median(xs)
        gate = GATE[t]
        if gate is None:
            gate_s, met_s, verdict = "-", "-", "no gate"
        else:
            met = sum(1 for x in xs if x <= gate)
            gate_s, met_s = f"{gate:.1f}x", f"{met}/{len(xs)}"
            verdict = "met" if med <= gate else "not met"
        print(f"{t:<8} {live:>7}  {len(xs):>5}  {med:>6.3f}x  {min(xs):>5.3f}x  {max(xs):>5.3f}x  "
              f"{gate_s:>5}  {met_s:>7}  {verdict}")
    print("x: a process's median sample over the floor of its own read bandwidth; median, min "
          "and max over the processes")


if __name__ == "__main__":
    main(sys.argv[1:])
