# stages.py DIR: per process of an abba-model.sh set (DIR/*.json), its read probe, the fused
# route's median whole token and the medians of its stages (ms), by context then process.
import glob, json, os, statistics as S, sys

files = glob.glob(os.path.join(sys.argv[1], "*.json"))
key = lambda f: (int(f.split("ctx")[1].split(".")[0]), int(os.path.basename(f).split("-")[1]))
for f in sorted(files, key=key):
    d = json.load(open(f))
    r = d["routes"]["fused"]
    st = {k: S.median(v) for k, v in r["stages_ms"].items() if k != "embedding"}
    print(os.path.basename(f), "probe %.1f GB/s" % (d["machine"]["read_bandwidth_bytes_per_s"] / 1e9),
          "token %.2f" % S.median(r["whole_token_ms"]), " ".join("%s %.2f" % kv for kv in st.items()))
