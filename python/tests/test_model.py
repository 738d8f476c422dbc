"""The model harness from Python (gem.Model, gem.synth) held to transformers' float64 reference
(scripts/reference/gemma4-tiny.expected, made by scripts/reference/gemma4_reference.py): the
synthetic file's digest, the tokenizer on the reference's texts, the last-prompt-position
logits, 20 greedy tokens and every step's top-10; sessions that repeat and copy; one clear
error for every bad input. The standard library alone."""

import hashlib
import math
import os
import tempfile
import unittest

import gem

REFERENCE = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "reference",
                         "gemma4-tiny.expected")
LOGIT_TOL = 1e-3  # the CPU model issue's tolerance against float64


def read_reference():
    ref = {"tokenize": [], "top10": {}}
    with open(REFERENCE) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            if w[0] == "model_sha256":
                ref["sha256"] = w[1]
            elif w[0] == "prompt":
                ref["prompt"] = [int(x) for x in w[2:2 + int(w[1])]]
            elif w[0] == "f64.tokens":
                ref["tokens"] = [int(x) for x in w[2:2 + int(w[1])]]
            elif w[0] == "f64.logits0":
                ref["logits0"] = [float(x) for x in w[2:2 + int(w[1])]]
            elif w[0] == "f64.top10":
                ref["top10"][int(w[1])] = [int(x) for x in w[2::2]]
            elif w[0] == "tokenize":
                ref["tokenize"].append((bytes.fromhex(w[1]).decode(),
                                        [int(x) for x in w[3:3 + int(w[2])]]))
    return ref


def top10(logits):
    return sorted(range(len(logits)), key=lambda i: (-logits[i], i))[:10]


class Model(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.tmp.name, "tiny.gguf")
        gem.synth(cls.path, "tiny")
        cls.ref = read_reference()
        cls.model = gem.Model(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.model.close()
        cls.tmp.cleanup()

    def test_synth_writes_the_reference_file(self):
        with open(self.path, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), self.ref["sha256"])
        hp = self.model.hparams
        self.assertEqual((hp["n_layers"], hp["n_embd"], hp["n_vocab"]), (6, 64, 512))
        self.assertEqual((hp["head_dim_full"], hp["n_full_layers"]), (512, 2))

    def test_tokenizer_meets_the_reference(self):
        self.assertEqual(len(self.ref["tokenize"]), 7)
        for text, ids in self.ref["tokenize"]:
            with self.subTest(text=text):
                self.assertEqual(self.model.tokenize(text), ids)
                # control tokens stand for no text (gem_token_piece); the rest round-trips
                want = text.replace("<|turn>", "").replace("<turn|>", "")
                self.assertEqual(self.model.detokenize(ids), want)
        self.assertNotEqual(self.model.tokenize("The quick", add_bos=False)[0], self.model.bos)
        self.assertEqual(self.model.tokenize("The quick")[0], self.model.bos)

    def test_greedy_tokens_and_logits_meet_float64(self):
        prompt, want = self.ref["prompt"], self.ref["tokens"]
        with self.model.session(len(prompt) + len(want)) as s:
            for t in prompt[:-1]:
                self.assertIsNone(s.eval(t, logits=False))
            logits = s.eval(prompt[-1])
            worst = max(abs(float(a) - b) for a, b in zip(logits, self.ref["logits0"]))
            self.assertLess(worst, LOGIT_TOL)
            got = []
            for step in range(len(want)):
                lg = [float(x) for x in logits]
                self.assertEqual(top10(lg), self.ref["top10"][step], f"step {step}")
                got.append(top10(lg)[0])
                if step + 1 < len(want):
                    logits = s.eval(got[-1])
            self.assertEqual(got, want)
            self.assertEqual(s.pos, len(prompt) + len(want) - 1)

    def test_greedy_in_one_call(self):
        prompt, want = self.ref["prompt"], self.ref["tokens"]
        with self.model.session(64) as s:
            for t in prompt[:-1]:
                s.eval(t, logits=False)
            got = s.greedy(prompt[-1], len(want))
            self.assertEqual(got, want)
            self.assertEqual(s.pos, len(prompt) - 1 + len(want))
        seen = []
        with self.model.session(64) as s:
            for t in prompt[:-1]:
                s.eval(t, logits=False)
            got = s.greedy(prompt[-1], 10, stop=lambda t: seen.append(t) or len(seen) == 3)
            self.assertEqual(got, want[:3])
            self.assertEqual(seen, want[:3])
            self.assertEqual(s.pos, len(prompt) - 1 + 3)

            def boom(t):
                raise KeyError("from stop")
            with self.assertRaises(KeyError):
                s.greedy(got[-1], 4, stop=boom)
            self.assertEqual(s.pos, len(prompt) - 1 + 4)
            with self.assertRaises(ValueError):
                s.greedy(0, 0)
            with self.assertRaises(gem.GemError):
                s.greedy(self.model.n_vocab, 1)

    def test_generate_streams_the_same_tokens(self):
        out = list(self.model.generate(prompt_tokens=self.ref["prompt"], n=20))
        self.assertEqual([t for t, _ in out], self.ref["tokens"])
        self.assertEqual("".join(p for _, p in out),
                         self.model.detokenize(self.ref["tokens"]))
        # a text prompt: its tokens first (BOS included), then greedy tokens; next_token is the
        # argmax of eval's logits
        text_out = [t for t, _ in self.model.generate("The quick brown fox", n=5)]
        with self.model.session(64) as s:
            ids = self.model.tokenize("The quick brown fox")
            for t in ids[:-1]:
                s.eval(t, logits=False)
            lg = s.eval(ids[-1])
            self.assertEqual(text_out[0], top10([float(x) for x in lg])[0])

    def test_sessions_repeat_copy_and_routes(self):
        prompt = self.ref["prompt"]
        with self.model.session(64) as a, self.model.session(64) as b, \
                self.model.session(64, route="baseline", threads=1) as c:
            for t in prompt[:20]:
                a.eval(t, logits=False)
                c.eval(t, logits=False)
            b.copy_from(a)
            self.assertEqual(b.pos, 20)
            la, lb = a.eval(prompt[20]), b.eval(prompt[20])
            self.assertEqual(bytes(memoryview(la)), bytes(memoryview(lb)))
            lc = c.eval(prompt[20])
            self.assertLess(max(abs(float(x) - float(y)) for x, y in zip(la, lc)), 1e-4)
            c.set_route("fused")
            a.reset()
            self.assertEqual(a.pos, 0)

    def test_errors(self):
        with self.assertRaises(gem.GemError) as e:
            gem.Model(os.path.join(self.tmp.name, "missing.gguf"))
        self.assertEqual(e.exception.status, "io")
        self.assertIn("missing.gguf", str(e.exception))
        cut = os.path.join(self.tmp.name, "cut.gguf")
        with open(self.path, "rb") as f, open(cut, "wb") as g:
            g.write(f.read()[:4096])
        with self.assertRaises(gem.GemError) as e:
            gem.Model(cut)
        self.assertEqual(e.exception.status, "format")
        with self.assertRaises(gem.GemError) as e:
            gem.synth(os.path.join(self.tmp.name, "x.gguf"), "70b")
        self.assertEqual(e.exception.status, "param")
        self.assertIn("unknown preset", str(e.exception))
        with self.model.session(2) as s:
            with self.assertRaisesRegex(gem.GemError, "outside the vocabulary of 512"):
                s.eval(512)
            s.eval(2, logits=False)
            s.next_token(3)
            with self.assertRaisesRegex(gem.GemError, r"the session is full \(2 positions\)"):
                s.next_token(4)
            with self.assertRaisesRegex(ValueError, "float32 array of 512"):
                s.eval(2, logits=bytearray(10))
        with self.assertRaisesRegex(ValueError, "kv_dtype='f64'"):
            self.model.session(8, kv_dtype="f64")
        with self.assertRaisesRegex(ValueError, "backend='tpu'"):
            self.model.session(8, backend="tpu")
        with self.assertRaises(gem.GemError) as e:  # CUDA sessions need the weights uploaded
            self.model.session(8, backend="cuda")
        self.assertEqual(e.exception.status, "state")
        try:  # where there is no GPU (or no CUDA in this build), one clear status
            gem.Model(self.path).upload()
        except gem.GemError as e:
            self.assertEqual(e.status, "no_device")
        with self.assertRaisesRegex(ValueError, "prompt or prompt_tokens"):
            next(self.model.generate())
        m = gem.Model(self.path)
        s = m.session(8)
        m.close()  # closes its sessions first
        with self.assertRaisesRegex(ValueError, "Session is closed"):
            s.eval(2)
        with self.assertRaisesRegex(ValueError, "Model is closed"):
            m.tokenize("x")
        self.assertTrue(math.isfinite(float(self.model.session(4).eval(2)[0])))


if __name__ == "__main__":
    unittest.main()
