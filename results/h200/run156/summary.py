# summary.py DIR..: per context and route, the medians over an A/B set's processes of each process's
# median whole token (ms), their range, and B over A.
import glob, json, os, statistics, sys
for d in sys.argv[1:]:
    ms = {}
    for f in sorted(glob.glob(os.path.join(d, "[AB]-*-ctx*.json"))):
        who = os.path.basename(f)[0]
        j = json.load(open(f))
        for route, r in j["routes"].items():
            key = (j["context"]["positions"], route, who)
            ms.setdefault(key, []).append(statistics.median(r["whole_token_ms"]))
    print(d)
    for (ctx, route) in sorted({k[:2] for k in ms}):
        a, b = ms[(ctx, route, "A")], ms[(ctx, route, "B")]
        print(f"  ctx {ctx:5} {route:8} A {statistics.median(a):7.2f} [{min(a):.2f}-{max(a):.2f}] n{len(a)}  B {statistics.median(b):7.2f} [{min(b):.2f}-{max(b):.2f}]  B/A {statistics.median(b)/statistics.median(a):.3f}")
