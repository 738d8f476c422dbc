#!/usr/bin/env python3
"""Run 169's ncu table of the library's Q4_0 tile products (out/ncu-tiles/ncu-tiles.csv): per
launch shape the medians of duration, DRAM bytes read, L2 bytes the L1 asked for, the L1 hit
rate and the warp instructions, and the instructions per 576-byte chunk."""
import collections, csv, io, sys

path = sys.argv[1] if len(sys.argv) > 1 else "results/h200/run169/out/ncu-tiles/ncu-tiles.csv"
lines = open(path).read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
launches = collections.OrderedDict()
for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
    launches.setdefault(r["ID"], {"name": r["Kernel Name"]})[r["Metric Name"]] = float(
        r["Metric Value"].replace(",", ""))
groups = collections.defaultdict(list)
for v in launches.values():
    # o-full and down share a grid and a block: the shapes apart by their bytes (to 10 MB)
    groups[(v["name"].split("(")[0], int(v["launch__grid_size"]), int(v["launch__block_size"]),
            round(v["dram__bytes_read.sum"] / 1e7))].append(v)
print("| kernel | grid x block | launches | us | DRAM MB | L2 MB from L1 | L1 hit % | M warp instr | instr a chunk |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for (name, grid, block, _), vs in groups.items():
    med = lambda m: sorted(x[m] for x in vs)[len(vs) // 2]
    # chunks a launch: the DRAM bytes over 576 (every weight byte read once)
    chunks = med("dram__bytes_read.sum") / 576
    print(f"| {name} | {grid} x {block} | {len(vs)} | {med('gpu__time_duration.sum') / 1e3:.1f} | "
          f"{med('dram__bytes_read.sum') / 1e6:.1f} | {med('lts__t_sectors_srcunit_tex_op_read.sum') * 32 / 1e6:.1f} | "
          f"{med('l1tex__t_sector_hit_rate.pct'):.1f} | {med('smsp__inst_executed.sum') / 1e6:.2f} | "
          f"{med('smsp__inst_executed.sum') / chunks:.0f} |")
