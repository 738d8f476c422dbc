"""generate.py: greedy text generation with the Gemma 4 model harness from Python (what
`gem generate` does), streaming the text as it comes.

    pip install .                                   # from the repository root
    python examples/generate.py --model M.gguf --prompt "The quick brown fox" -n 32
    python examples/generate.py                     # a seeded random-weight tiny model

Without --model it writes the tiny test model (gem.synth) to a temporary file: random weights
speak no language, but every step runs the real decoder.
"""

import argparse
import os
import sys
import tempfile
import time

import gem


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a Gemma 4 GGUF file (default: the tiny synthetic model)")
    ap.add_argument("--prompt", default="The quick brown fox")
    ap.add_argument("-n", type=int, default=32, help="tokens to generate (default 32)")
    ap.add_argument("--threads", type=int, default=0, help="0: one per core")
    args = ap.parse_args()
    if args.n < 1:
        ap.error(f"-n {args.n}: at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or gem.synth(os.path.join(tmp, "tiny.gguf"), "tiny")
        try:
            model = gem.Model(path)
        except gem.GemError as e:
            print(f"generate.py: {e}", file=sys.stderr)
            return 2
        with model:
            prompt = model.tokenize(args.prompt)
            print(f"generate.py: {model}; prompt {len(prompt)} tokens", file=sys.stderr)
            with model.session(len(prompt) + args.n, threads=args.threads) as s:
                t0 = time.perf_counter()
                n = 0
                sys.stdout.write(args.prompt)
                for _, text in model.generate(prompt_tokens=prompt, n=args.n, session=s):
                    sys.stdout.write(text)
                    sys.stdout.flush()
                    n += 1
                dt = time.perf_counter() - t0
                print(f"\ngenerate.py: {n} tokens after the prompt in {dt:.3f} s "
                      f"({s.description})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
