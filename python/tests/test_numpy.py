"""The package with numpy arrays, as most callers hold their caches: outputs as numpy arrays,
token-major caches through a transposed view (no copy), float16 arrays, the DLPack path on
the same memory, and the results held to a float64 attention computed by numpy. Skipped where
numpy is not installed (CI installs it with the package)."""

import unittest

import gem

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None

NMSE_GATE = 1e-10


def attention64(q, k, v, scale, live):
    """q (H, D), k (G, T, D), v (G, T, Dv) -> (H, Dv), all in float64."""
    H, G = q.shape[0], k.shape[0]
    qg = q.astype(np.float64).reshape(G, H // G, -1)
    s = np.einsum("ghd,gtd->ght", qg, k[:, :live].astype(np.float64)) * scale
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    o = np.einsum("ght,gtd->ghd", w, v[:, :live].astype(np.float64)) / w.sum(-1, keepdims=True)
    return o.reshape(H, -1)


def nmse(got, want):
    return float(((got.astype(np.float64) - want) ** 2).sum() / (want ** 2).sum())


class OnlyDLPack:
    """Hides a numpy array's buffer protocol, so gem takes the DLPack path."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


@unittest.skipIf(np is None, "numpy is not installed")
class WithNumpy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dec = gem.Decoder(threads=2)
        rng = np.random.default_rng(1)
        cls.H, cls.G, cls.D, cls.T = 32, 4, 512, 300
        cls.q = rng.standard_normal((cls.H, cls.D), dtype=np.float32)
        cls.k = rng.standard_normal((cls.G, cls.T, cls.D), dtype=np.float32)
        cls.v = rng.standard_normal((cls.G, cls.T, cls.D), dtype=np.float32)

    @classmethod
    def tearDownClass(cls):
        cls.dec.close()

    def test_head_major_and_token_major(self):
        out = self.dec.decode(self.q, self.k, self.v, scale=1.0)
        self.assertIsInstance(out, np.ndarray)
        self.assertEqual((out.shape, out.dtype), ((self.H, self.D), np.float32))
        want = attention64(self.q, self.k, self.v, 1.0, self.T)
        self.assertLessEqual(nmse(out, want), NMSE_GATE)
        # the same rows in a token-major cache (capacity, n_kv_heads, d), seen through a view
        k_tm = np.ascontiguousarray(self.k.transpose(1, 0, 2))
        v_tm = np.ascontiguousarray(self.v.transpose(1, 0, 2))
        out_tm = self.dec.decode(self.q, k_tm.transpose(1, 0, 2), v_tm.transpose(1, 0, 2),
                                 scale=1.0)
        self.assertEqual(out_tm.tobytes(), out.tobytes())
        # a preallocated cache with 100 spare rows of garbage past live
        k_big = np.full((self.G, self.T + 100, self.D), np.nan, dtype=np.float32)
        v_big = np.full_like(k_big, np.inf)
        k_big[:, :self.T], v_big[:, :self.T] = self.k, self.v
        out_big = self.dec.decode(self.q, k_big, v_big, live=self.T, scale=1.0)
        self.assertEqual(out_big.tobytes(), out.tobytes())

    def test_dlpack_path_gives_the_buffer_paths_bits(self):
        out = self.dec.decode(self.q, self.k, self.v)
        via = self.dec.decode(OnlyDLPack(self.q), OnlyDLPack(self.k), OnlyDLPack(self.v))
        self.assertEqual(via.tobytes(), out.tobytes())
        strided = self.dec.decode(self.q, OnlyDLPack(self.k[:, ::2]), OnlyDLPack(self.v[:, ::2]))
        self.assertEqual(strided.tobytes(),
                         self.dec.decode(self.q, self.k[:, ::2].copy(),
                                         self.v[:, ::2].copy()).tobytes())

    def test_float16_and_bfloat16_bits(self):
        k16, v16 = self.k.astype(np.float16), self.v.astype(np.float16)
        out = self.dec.decode(self.q, k16, v16)
        widened = self.dec.decode(self.q, k16.astype(np.float32), v16.astype(np.float32))
        self.assertEqual(out.tobytes(), widened.tobytes())

        # bfloat16 as uint16 bits (numpy has no bfloat16): round to nearest even by hand
        def bf16(a):
            u = a.view(np.uint32)
            return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        kb, vb = bf16(self.k), bf16(self.v)
        out_b = self.dec.decode(self.q, kb, vb, k_dtype="bf16", v_dtype="bf16")
        wid_b = self.dec.decode(self.q, (kb.astype(np.uint32) << 16).view(np.float32),
                                (vb.astype(np.uint32) << 16).view(np.float32))
        self.assertEqual(out_b.tobytes(), wid_b.tobytes())
        self.assertLessEqual(nmse(out_b, attention64(self.q, (kb.astype(np.uint32) << 16).view(
            np.float32), (vb.astype(np.uint32) << 16).view(np.float32), self.D ** -0.5, self.T)),
            NMSE_GATE)

    def test_bad_numpy_arrays(self):
        with self.assertRaisesRegex(ValueError, "row-major"):
            self.dec.decode(self.q[:, ::2], self.k[:, :, ::2], self.v)
        with self.assertRaisesRegex(ValueError, "unit stride"):
            self.dec.decode(np.ascontiguousarray(self.q[:, :256]), self.k[:, :, ::2], self.v)
        with self.assertRaisesRegex(ValueError, "negative stride"):
            self.dec.decode(self.q, self.k[:, ::-1], self.v[:, ::-1])
        ro = np.empty((self.H, self.D), dtype=np.float32)
        ro.flags.writeable = False
        with self.assertRaisesRegex(ValueError, "read-only"):
            self.dec.decode(self.q, self.k, self.v, out=ro)
        with self.assertRaisesRegex(ValueError, "float64"):
            self.dec.decode(self.q, self.k.astype(np.float64), self.v)
        with self.assertRaisesRegex(ValueError, "big-endian"):
            self.dec.decode(self.q, self.k.astype(">f4"), self.v)

    def test_reference_is_float64(self):
        ref = gem.reference(self.q, self.k, self.v, scale=1.0, live=50)
        self.assertEqual(ref.dtype, np.float64)
        want = attention64(self.q, self.k, self.v, 1.0, 50)
        self.assertLess(np.abs(ref - want).max(), 1e-12)


if __name__ == "__main__":
    unittest.main()
