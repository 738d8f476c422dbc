#!/usr/bin/env bash
# run 81, part 2: the CPU fused route's kernels on the Xeon host, three builds rotated
set -u -o pipefail
R=/tmp/r81b; mkdir -p $R
pk() { (cd $R && tar czf $OUT/run81b.tgz.tmp . && mv $OUT/run81b.tgz.tmp $OUT/run81b.tgz); }
ls /tmp/gem-a /tmp/gem-p /tmp/gem-ps || exit 2
one() { # one NAME ROUNDS ARGS...: per round the three builds in rotated order, one process each
  local name=$1 rounds=$2; shift 2
  for r in $(seq 1 $rounds); do
    case $((r % 3)) in 1) o="a p ps";; 2) o="ps a p";; 0) o="p ps a";; esac
    for v in $o; do
      GEM_QUIET=1 timeout 120 /tmp/gem-$v bench --backend cpu --a fused --b fused --no-double "$@" --out $R/$name-$v-$r.json > $R/$name-$v-$r.txt 2>&1 || echo "$name $v $r failed"
    done
  done
  python3 - $R $name <<'PY'
import glob, json, os, statistics, sys
R, name = sys.argv[1:3]
digests = {}
for v in ("a", "p", "ps"):
    by, bw = {}, []
    for f in sorted(glob.glob(os.path.join(R, "%s-%s-*.json" % (name, v)))):
        d = json.load(open(f))
        bw.append(d["read_bandwidth"]["bytes_per_second"] / 1e9)
        for c in d["cases"]:
            by.setdefault(c["live"], []).extend(
                1e3 * x for k in ("a", "b") for x in c["timing"][k]["seconds"])
            digests.setdefault(c["live"], set()).add(c["validation"]["a"]["output_sha256"])
    for live in sorted(by):
        x = by[live]
        print("%-10s %-3s live %-7s median %.3f ms  min %.3f  max %.3f  n %d  probe median %.1f GB/s"
              % (name, v, live, statistics.median(x), min(x), max(x), len(x),
                 statistics.median(bw) if bw else 0))
for live, s in sorted(digests.items()):
    print("%-10s live %-7s output digests: %s" % (name, live, "one (all builds agree)" if len(s) == 1 else "%d DIFFER" % len(s)))
PY
  pk
}
one bf16-l3-t1 4 --threads 1 --kv-dtype bf16 --lengths 8192 --copies 1 --rounds 5 --warmup 2 --bw-mib 256 --bw-reps 1
one bf16-t16 4 --kv-dtype bf16 --lengths 65536,131072 --rounds 5 --bw-mib 4096
one f16-t16 3 --kv-dtype f16 --lengths 65536,131072 --rounds 5 --bw-mib 4096
one f32-t16 3 --kv-dtype f32 --lengths 65536,131072 --rounds 5 --bw-mib 4096
one f16-l3-t1 3 --threads 1 --kv-dtype f16 --lengths 8192 --copies 1 --rounds 5 --warmup 2 --bw-mib 256 --bw-reps 1
