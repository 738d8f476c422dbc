"""decode_loop.py: a small decode loop on the gem Python package (examples/decode_loop.c in
Python).

One attention layer of the Gemma 4 full-attention shape (32 query heads over 4 KV heads, head
dimension 512, scale 1.0) decodes `steps` tokens: each step appends the new token's K and V
rows to a gem.KVCache, writes the new query into q, then runs a step bound once to q, the cache
and out (Decoder.bind: the arrays in place, the tuned default route), and every 16th step
checks the output against gem.reference (float64).

    pip install .[numpy]                 # from the repository root
    python examples/decode_loop.py [steps] [--threads N]

Exit status 0 when every checked step agrees with the reference (NMSE <= 1e-10).
"""

import argparse
import sys
import time

import numpy as np

import gem

NQ, NKV, D = 32, 4, 512


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("steps", type=int, nargs="?", default=64, help="tokens to decode (1..65536)")
    ap.add_argument("--threads", type=int, default=0, help="worker threads (0: one per core)")
    args = ap.parse_args()
    if not 1 <= args.steps <= 65536:
        ap.error(f"steps {args.steps}: between 1 and 65536")

    rng = np.random.default_rng(1)
    worst, times = 0.0, []
    with gem.Decoder(threads=args.threads) as dec, \
            gem.KVCache(NKV, D, capacity=args.steps) as cache:
        print(f"decode_loop: {dec.description}")
        q = np.empty((NQ, D), dtype=np.float32)
        out = np.empty((NQ, D), dtype=np.float32)
        decode = dec.bind(q, cache=cache, out=out, scale=1.0)
        for step in range(1, args.steps + 1):
            # the new token's rows, token-major as a projection writes them, and its query
            cache.append(rng.uniform(-1, 1, (1, NKV, D)).astype(np.float32),
                         rng.uniform(-1, 1, (1, NKV, D)).astype(np.float32))
            q[:] = rng.uniform(-1, 1, (NQ, D))
            t0 = time.perf_counter()
            decode()
            times.append(time.perf_counter() - t0)
            if step % 16 == 0 or step == args.steps:
                ref = gem.reference(q, cache=cache, scale=1.0)
                err = float(((out - ref) ** 2).sum() / (ref ** 2).sum())
                worst = max(worst, err)
                print(f"step {step:5d}: {cache.live} tokens in the cache, NMSE against double "
                      f"{err:.2e}, decode {np.median(times[-16:]) * 1e3:.3f} ms (median of the "
                      "last 16)")
        decode.close()  # lets q, out and the cache go
    ok = worst <= 1e-10
    print(f"decode_loop: {args.steps} steps, worst NMSE {worst:.2e}: "
          f"{'agree' if ok else 'DISAGREE'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
