#!/usr/bin/env python3
"""bench-summary.py DIR: one table of every gem.bench.v1 record (bench-*.json) and the ncu
CSV files (ncu-*.csv) in DIR, as scripts/h200-run.sh prints it last."""
import glob
import json
import os
import sys


def main(rec):
    for f in sorted(glob.glob(os.path.join(rec, "bench-*.json"))):
        d = json.load(open(f))
        bw = d["read_bandwidth"]["bytes_per_second"]
        nom = d.get("nominal_bandwidth_bytes_per_second")
        extra = f", nominal {nom / 1e9:.1f}" if nom else ""
        calls = d["cases"][0]["timing"].get("calls_per_sample", 1) if d["cases"] and \
            "timing" in d["cases"][0] else 1
        per = f", {calls} calls a sample" if calls != 1 else ""
        print(f"{os.path.basename(f)}: read bw {bw / 1e9:.1f} GB/s{extra}{per}")
        for c in d["cases"]:
            if c.get("verdict") != "timed":
                print(f"  {c['live']:>7}  {c.get('verdict')}")
                continue
            ta, tb = c["timing"]["a"]["stats"], c["timing"]["b"]["stats"]
            r = c["timing"]["ratio_a_over_b"]["stats"]
            fa, fb = c["fraction_of_read_bandwidth"]["a"], c["fraction_of_read_bandwidth"]["b"]
            ra, rb = c["routes"]["a"], c["routes"]["b"]
            la = f"{ra['route']}_p{ra['partitions']}_t{ra['tile']}"
            lb = f"{rb['route']}_p{rb['partitions']}_t{rb['tile']}"
            print(f"  {c['live']:>7}  A {la} {ta['median'] * 1e3:.4f} ms ({fa * 100:.1f}%)  "
                  f"B {lb} {tb['median'] * 1e3:.4f} ms ({fb * 100:.1f}%)  "
                  f"A/B {r['median']:.3f} [{r['min']:.3f}-{r['max']:.3f}]")
    for f in sorted(glob.glob(os.path.join(rec, "ncu-*.csv"))):
        print("ncu", os.path.basename(f))
        for line in open(f):
            if "dram__bytes_read" in line or "gpu__time_duration" in line or \
                    "dram__bytes_write" in line:
                parts = [p.strip('"') for p in line.strip().split('","')]
                if len(parts) > 14:
                    print("   ", parts[4][:40], parts[-3], parts[-2], parts[-1])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bench-summary.py DIR")
    main(sys.argv[1])
