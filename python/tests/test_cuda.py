"""The package on a CUDA device, with torch's tensors: F32, BF16 and F16 caches against libgem's
double reference on host copies, bitwise repeats, a torch stream of the caller's, token-major
views, bound steps, the cache helper in device memory, K rebuilt from V at Gemma 4's full-layer
shape, the sliding-window shape, the errors of device arrays, and the tiny model's whole token
on the GPU against the CPU's. Skipped where torch sees no
GPU or libgem has no CUDA backend (the pip build is the CPU backend's)."""

import unittest

import gem

try:
    import numpy as np
    import torch
    HAVE_GPU = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    np = torch = None
    HAVE_GPU = False

NMSE_GATE = 1e-10


def nmse(got, want):
    got = got.detach().double().cpu().numpy()
    return float(((got - want) ** 2).sum() / (want ** 2).sum())


def host(t):
    """A host float32 numpy copy (16-bit values widened exactly)."""
    return t.detach().float().cpu().numpy()


@unittest.skipUnless(HAVE_GPU, "torch sees no CUDA device")
class Cuda(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            cls.dec = gem.Decoder(backend="cuda")
        except gem.GemError as e:
            raise unittest.SkipTest(f"libgem has no usable CUDA backend ({e.status})")
        cls.dev = torch.device("cuda", cls.dec.cuda_device)

    @classmethod
    def tearDownClass(cls):
        cls.dec.close()

    def inputs(self, n_q=32, n_kv=4, d=512, t=3000, dtype=None, seed=0):
        g = torch.Generator(device=self.dev).manual_seed(seed)
        q = torch.randn(n_q, d, device=self.dev, generator=g)
        k = torch.randn(n_kv, t, d, device=self.dev, generator=g)
        v = torch.randn(n_kv, t, d, device=self.dev, generator=g)
        if dtype is not None:
            k, v = k.to(dtype), v.to(dtype)
        return q, k, v

    def test_every_dtype_against_the_double_reference(self):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            with self.subTest(dtype=str(dtype)):
                q, k, v = self.inputs(dtype=dtype)
                out = torch.empty(32, 512, device=self.dev)
                self.assertIs(self.dec.decode(q, k, v, out=out, scale=1.0), out)
                torch.cuda.synchronize()
                first = out.clone()
                ref = gem.reference(host(q), host(k), host(v), scale=1.0)
                self.assertLessEqual(nmse(out, ref), NMSE_GATE)
                self.dec.decode(q, k, v, out=out, scale=1.0)
                torch.cuda.synchronize()
                self.assertTrue(torch.equal(out, first))

    def test_on_a_stream_of_the_callers(self):
        q, k, v = self.inputs(seed=1)
        want = torch.empty(32, 512, device=self.dev)
        self.dec.decode(q, k, v, out=want)
        torch.cuda.synchronize()
        s = torch.cuda.Stream(device=self.dev)
        out = torch.empty_like(want)
        with torch.cuda.stream(s):
            k2 = k * 1.0  # produced on s: DLPack asks torch to order it for s
            self.dec.decode(q, k2, v, out=out, stream=s)
        s.synchronize()
        self.assertTrue(torch.equal(out, want))
        self.dec.decode(q, k, v, out=out, stream=s.cuda_stream)  # the handle as an int
        s.synchronize()
        self.assertTrue(torch.equal(out, want))

    def test_token_major_view_and_live(self):
        q, k, v = self.inputs(seed=2, dtype=torch.bfloat16)
        kt = k.transpose(0, 1).contiguous().transpose(0, 1)  # strides (512, 4 * 512, 1)
        vt = v.transpose(0, 1).contiguous().transpose(0, 1)
        out = torch.empty(32, 512, device=self.dev)
        self.dec.decode(q, kt, vt, out=out, live=2049, scale=1.0)
        torch.cuda.synchronize()
        ref = gem.reference(host(q), host(k), host(v), scale=1.0, live=2049)
        self.assertLessEqual(nmse(out, ref), NMSE_GATE)

    def test_bound_step_is_decode(self):
        q, k, v = self.inputs(seed=3)
        out = torch.empty(32, 512, device=self.dev)
        want = torch.empty_like(out)
        with self.dec.bind(q, k, v, out=out, scale=1.0) as step:
            for live in (1, 7, 2048, 3000):
                step(live)
                self.dec.decode(q, k, v, out=want, scale=1.0, live=live)
                torch.cuda.synchronize()
                self.assertTrue(torch.equal(out, want), f"live {live}")

    def test_states_of_pieces_merge_to_the_whole(self):
        """Pieces of a device cache (slices along the rows) give states whose merge is the
        attention over all of them; the whole's one state merges to decode's bits; states
        made on the host merge on the GPU."""
        q, k, v = self.inputs(seed=9, t=3000, dtype=torch.bfloat16)
        n = 32 * (512 + 2)
        whole = torch.empty(32, 512, device=self.dev)
        self.dec.decode(q, k, v, out=whole, scale=1.0)
        one = torch.empty(n, device=self.dev)
        self.dec.state(q, k, v, out=one, scale=1.0)
        merged = torch.empty_like(whole)
        self.dec.merge(one, 32, out=merged)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(merged, whole))
        cuts = [(0, 1000), (1000, 1001), (1001, 3000)]
        states = torch.empty(len(cuts), n, device=self.dev)
        for i, (a, b) in enumerate(cuts):
            self.dec.state(q, k[:, a:b], v[:, a:b], out=states[i], scale=1.0)
        self.dec.merge(states, 32, out=merged)
        torch.cuda.synchronize()
        ref = gem.reference(host(q), host(k), host(v), scale=1.0)
        self.assertLessEqual(nmse(merged, ref), NMSE_GATE)
        with gem.Decoder(threads=2) as cpu:  # the CPU's states, merged on the GPU
            hs = np.stack([cpu.state(host(q), host(k)[:, a:b], host(v)[:, a:b], scale=1.0)
                           for a, b in cuts])
        self.dec.merge(torch.from_numpy(hs).to(self.dev), 32, out=merged)
        torch.cuda.synchronize()
        self.assertLessEqual(nmse(merged, ref), NMSE_GATE)
        with self.assertRaisesRegex(ValueError, "pass out="):
            self.dec.merge(states, 32)

    def test_cache_in_device_memory(self):
        q, k, v = self.inputs(seed=4, t=700)
        dense = torch.empty(32, 512, device=self.dev)
        self.dec.decode(q, k.to(torch.bfloat16), v.to(torch.bfloat16), out=dense)
        out = torch.empty_like(dense)
        with gem.KVCache(4, 512, capacity=1024, dtype="bf16", backend="cuda") as c:
            c.append(k[:, :1].transpose(0, 1).contiguous(), v[:, :1].transpose(0, 1).contiguous())
            c.append(k[:, 1:].transpose(0, 1).contiguous(), v[:, 1:].transpose(0, 1).contiguous())
            self.assertEqual(c.live, 700)
            self.assertTrue(c.check())
            self.dec.decode(q, cache=c, out=out)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(out, dense))
            bad = torch.full((1, 4, 512), float("nan"), device=self.dev)
            c.append(bad, bad)
            self.assertFalse(c.check())
            with self.assertRaisesRegex(ValueError, "host memory"):
                c.append(np.zeros((1, 4, 512), np.float32), np.zeros((1, 4, 512), np.float32))
        with gem.KVCache(4, 512, capacity=16) as host_cache:
            host_cache.append(np.zeros((1, 4, 512), np.float32), np.zeros((1, 4, 512), np.float32))
            with self.assertRaisesRegex(ValueError, "cpu memory"):
                self.dec.decode(q, cache=host_cache, out=out)

    def test_k_rebuilt_from_v(self):
        q, _, v = self.inputs(seed=5)
        w = torch.rand(512, device=self.dev) + 0.5
        inv = [1e6 ** (-2 * j / 512) for j in range(64)]  # Gemma 4: 64 of 256 pairs rotate
        out = torch.empty(32, 512, device=self.dev)
        self.dec.decode(q, v=v, k_from_v=gem.KFromV(w, inv, half=256, pos0=7), out=out,
                        scale=1.0)
        torch.cuda.synchronize()
        ref = gem.reference(host(q), v=host(v), k_from_v=gem.KFromV(host(w), inv, half=256,
                                                                    pos0=7), scale=1.0)
        self.assertLessEqual(nmse(out, ref), NMSE_GATE)

    def test_sliding_window_shape(self):
        q, k, v = self.inputs(n_q=32, n_kv=16, d=256, t=1024, seed=6)
        out = torch.empty(32, 256, device=self.dev)
        self.dec.decode(q, k, v, out=out, scale=1.0)
        torch.cuda.synchronize()
        self.assertLessEqual(nmse(out, gem.reference(host(q), host(k), host(v), scale=1.0)),
                             NMSE_GATE)

    def test_model_on_the_gpu_meets_the_cpu(self):
        """The tiny model's whole token on the GPU: the CPU's greedy tokens and logits within
        1e-4 (the CUDA model issue's agreement gate)."""
        import os
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            path = gem.synth(os.path.join(tmp, "tiny.gguf"), "tiny")
            with gem.Model(path) as m:
                self.assertGreater(m.upload(), 0)
                prompt = m.tokenize("The quick brown fox jumps over the lazy dog.")
                got = {}
                for backend in ("cpu", "cuda"):
                    with m.session(len(prompt) + 12, backend=backend) as s:
                        for t in prompt[:-1]:
                            s.eval(t, logits=False)
                        logits = s.eval(prompt[-1])
                        toks = [int(logits.argmax())]
                        for _ in range(11):
                            toks.append(s.next_token(toks[-1]))
                        got[backend] = (logits, toks)
                self.assertEqual(got["cuda"][1], got["cpu"][1])
                self.assertLess(float(abs(got["cuda"][0] - got["cpu"][0]).max()), 1e-4)

    def test_device_errors(self):
        q, k, v = self.inputs(seed=7, t=64)
        with self.assertRaisesRegex(ValueError, "pass out="):
            self.dec.decode(q, k, v)
        with self.assertRaisesRegex(ValueError, "host memory"):
            self.dec.decode(host(q), k, v, out=torch.empty(32, 512, device=self.dev))
        with self.assertRaisesRegex(TypeError, "stream="):
            self.dec.decode(q, k, v, out=torch.empty(32, 512, device=self.dev), stream="s0")
        with gem.Decoder() as cpu, self.assertRaisesRegex(ValueError, "CUDA memory"):
            cpu.decode(host(q), k, v)
        with self.assertRaises(gem.GemError) as e:  # K's base 4 bytes off 16-byte alignment
            self.dec.decode(q, k.view(-1)[1:1 + 4 * 63 * 512].view(4, 63, 512), v[:, :63],
                            out=torch.empty(32, 512, device=self.dev))
        self.assertEqual(e.exception.status, "align")


if __name__ == "__main__":
    unittest.main()
