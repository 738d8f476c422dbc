"""Arrays of the libraries around numpy: ml_dtypes' bfloat16 and float8_e4m3fn numpy arrays
(JAX's element types, which numpy's array interface shows as void), and JAX and torch tensors
through DLPack, bfloat16 included (their buffer protocol refuses it). Each class is skipped
where its library is not installed; CI installs ml_dtypes with the package."""

import unittest

import gem

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None
try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None
try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover
    jax = jnp = None
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

H, G, D, T = 8, 2, 64, 40


def inputs():
    rng = np.random.default_rng(3)
    return (rng.standard_normal((H, D), dtype=np.float32),
            rng.standard_normal((G, T, D), dtype=np.float32),
            rng.standard_normal((G, T, D), dtype=np.float32))


@unittest.skipIf(ml_dtypes is None, "ml_dtypes is not installed")
class MlDtypes(unittest.TestCase):
    def test_bfloat16_and_float8_arrays(self):
        q, k, v = inputs()
        with gem.Decoder(threads=2) as dec:
            kb, vb = k.astype(ml_dtypes.bfloat16), v.astype(ml_dtypes.bfloat16)
            out = dec.decode(q, kb, vb)
            widened = dec.decode(q, kb.astype(np.float32), vb.astype(np.float32))
            self.assertEqual(out.tobytes(), widened.tobytes())
            # uint16 bits with k_dtype give the same
            bits = dec.decode(q, kb.view(np.uint16), vb.view(np.uint16), k_dtype="bf16",
                              v_dtype="bf16")
            self.assertEqual(bits.tobytes(), out.tobytes())
            k8, v8 = k.astype(ml_dtypes.float8_e4m3fn), v.astype(ml_dtypes.float8_e4m3fn)
            out8 = dec.decode(q, k8, v8, k_scale=[0.5, 2.0], v_scale=[1.0, 0.25])
            codes = dec.decode(q, k8.view(np.uint8), v8.view(np.uint8), k_dtype="fp8_e4m3",
                               v_dtype="fp8_e4m3", k_scale=[0.5, 2.0], v_scale=[1.0, 0.25])
            self.assertEqual(out8.tobytes(), codes.tobytes())
            ks = np.array([0.5, 2.0], np.float32)[:, None, None]
            vs = np.array([1.0, 0.25], np.float32)[:, None, None]
            ref = gem.reference(q, k8.astype(np.float32) * ks, v8.astype(np.float32) * vs)
            self.assertLessEqual(float(((out8 - ref) ** 2).sum() / (ref ** 2).sum()), 1e-10)


@unittest.skipIf(jnp is None or np is None, "jax is not installed")
class Jax(unittest.TestCase):
    def test_jax_arrays_through_dlpack(self):
        q, k, v = inputs()
        cpu = jax.devices("cpu")[0]  # JAX's default device is a GPU where it has one

        def host(x, dtype=None):
            return jax.device_put(jnp.asarray(x, dtype), cpu)
        with gem.Decoder(threads=2) as dec:
            want = dec.decode(q, k, v)
            self.assertEqual(dec.decode(host(q), host(k), host(v)).tobytes(), want.tobytes())
            kb, vb = host(k, jnp.bfloat16), host(v, jnp.bfloat16)
            out = dec.decode(q, kb, vb)
            widened = dec.decode(q, np.asarray(kb.astype(jnp.float32)),
                                 np.asarray(vb.astype(jnp.float32)))
            self.assertEqual(out.tobytes(), widened.tobytes())


@unittest.skipIf(torch is None or np is None, "torch is not installed")
class Torch(unittest.TestCase):
    def test_torch_tensors_through_dlpack(self):
        q, k, v = inputs()
        with gem.Decoder(threads=2) as dec:
            tq, tk, tv = torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v)
            want = dec.decode(q, k, v)
            out = torch.empty(H, D)
            dec.decode(tq, tk, tv, out=out)
            self.assertEqual(out.numpy().tobytes(), want.tobytes())
            # a token-major cache seen through a transposed view, in bfloat16
            kt = tk.to(torch.bfloat16).transpose(0, 1).contiguous().transpose(0, 1)
            vt = tv.to(torch.bfloat16).transpose(0, 1).contiguous().transpose(0, 1)
            got = dec.decode(tq, kt, vt)
            widened = dec.decode(q, kt.float().contiguous().numpy(),
                                 vt.float().contiguous().numpy())
            self.assertEqual(got.tobytes(), widened.tobytes())


if __name__ == "__main__":
    unittest.main()
