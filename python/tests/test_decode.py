"""The Python package against its contract, with the standard library alone: results held to
a float64 attention written here (and to libgem's double reference), the same bits on
repeats, for any thread count and for any layout, 16-bit and FP8 caches, K rebuilt from V,
the cache helper, and one clear error for every bad input."""

import array
import math
import os
import re
import threading
import unittest

import gem
from helpers import (KDL_BFLOAT, KDL_CUDA, KDL_FLOAT, DLPackTensor, attention64, bf16_bits,
                     bf16_value, f16_bits, f16_value, flat, floats, fp8_e4m3_value, head_major,
                     nmse, seeded, shaped)

NMSE_GATE = 1e-10  # the design's gate for every route against the double reference

H, G, D, T = 8, 2, 64, 37  # query heads, KV heads, head dimension, rows


def problem(seed, n_q_heads=H, n_kv_heads=G, dk=D, dv=D, capacity=T):
    rng = seeded(seed)
    q = floats(rng, n_q_heads * dk)
    k = floats(rng, n_kv_heads * capacity * dk)
    v = floats(rng, n_kv_heads * capacity * dv)
    return q, k, v


def views(q, k, v, n_q_heads=H, n_kv_heads=G, dk=D, dv=D, capacity=T):
    return (shaped(q, (n_q_heads, dk)), shaped(k, (n_kv_heads, capacity, dk)),
            shaped(v, (n_kv_heads, capacity, dv)))


def bits(out):
    return bytes(memoryview(out).cast("B"))


class Decode(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dec = gem.Decoder(threads=2)

    @classmethod
    def tearDownClass(cls):
        cls.dec.close()

    def test_version_is_the_headers(self):
        header = os.path.join(os.path.dirname(__file__), "..", "..", "include", "gem", "attn.h")
        with open(header) as f:
            want = re.search(r'#define GEM_VERSION "([^"]+)"', f.read()).group(1)
        self.assertEqual(gem.__version__, want)

    def test_default_route_meets_float64(self):
        q, k, v = problem(1)
        out = self.dec.decode(*views(q, k, v))
        try:  # a numpy array where numpy is installed, else an array.array
            import numpy
            self.assertIsInstance(out, numpy.ndarray)
            self.assertEqual(out.shape, (H, D))
        except ImportError:
            self.assertIsInstance(out, array.array)
            self.assertEqual(len(out), H * D)
        want = attention64(q, head_major(k, G, T, D), head_major(v, G, T, D), H, G, D, D, T,
                           1 / math.sqrt(D))
        self.assertLessEqual(nmse(out, want), NMSE_GATE)
        # libgem's oracle on the same arrays agrees with the plain-Python one
        ref = gem.reference(*views(q, k, v))
        self.assertLess(max(abs(a - b) for a, b in zip(flat(ref), want)), 1e-13)

    def test_every_route_and_explicit_configs(self):
        q, k, v = problem(2)
        want = gem.reference(*views(q, k, v), scale=1.0)
        for kwargs in ({"route": "fused"}, {"route": "baseline"},
                       {"route": "fused", "partitions": 3, "tile": 8},
                       {"partitions": 64, "tile": 1}, {"route": "baseline", "partitions": 5}):
            with self.subTest(**kwargs):
                out = self.dec.decode(*views(q, k, v), scale=1.0, **kwargs)
                self.assertLessEqual(nmse(out, want), NMSE_GATE)
        plan = self.dec.plan(*views(q, k, v))
        self.assertEqual(plan["route"], "fused")
        self.assertGreater(plan["partitions"], 0)
        self.assertGreater(plan["workspace_bytes"], 0)

    def test_same_bits_on_repeats_and_for_any_thread_count(self):
        q, k, v = problem(3)
        first = bits(self.dec.decode(*views(q, k, v)))
        self.assertEqual(bits(self.dec.decode(*views(q, k, v))), first)
        for threads in (1, 3, 5):
            with gem.Decoder(threads=threads) as d:
                self.assertEqual(d.threads, threads)
                self.assertEqual(bits(d.decode(*views(q, k, v))), first)

    def test_layout_does_not_change_the_bits(self):
        """The same rows head-major, token-major (a strided DLPack view), with padded rows and
        inside a larger cache (live < capacity, rows past live NaN) give the same bits."""
        q, k, v = problem(4)
        first = bits(self.dec.decode(*views(q, k, v)))
        # token-major (capacity, n_kv_heads, d) seen as (g, t, i): strides (d, n_kv_heads*d, 1)
        kt = array.array("f", bytes(4 * len(k)))
        vt = array.array("f", bytes(4 * len(v)))
        for g in range(G):
            for t in range(T):
                for i in range(D):
                    kt[(t * G + g) * D + i] = k[(g * T + t) * D + i]
                    vt[(t * G + g) * D + i] = v[(g * T + t) * D + i]
        ktm = DLPackTensor(kt, (G, T, D), (D, G * D, 1), KDL_FLOAT, 32)
        vtm = DLPackTensor(vt, (G, T, D), (D, G * D, 1), KDL_FLOAT, 32)
        self.assertEqual(bits(self.dec.decode(shaped(q, (H, D)), ktm, vtm)), first)
        self.assertEqual((ktm.exports, vtm.exports), (1, 1))
        # rows padded to 80 elements, capacity 50 of which 37 live; the rest NaN
        cap, pad = 50, 80
        kp = array.array("f", [math.nan]) * (G * cap * pad)
        vp = array.array("f", [math.nan]) * (G * cap * pad)
        for g in range(G):
            for t in range(T):
                for i in range(D):
                    kp[(g * cap + t) * pad + i] = k[(g * T + t) * D + i]
                    vp[(g * cap + t) * pad + i] = v[(g * T + t) * D + i]
        kpv = DLPackTensor(kp, (G, cap, D), (cap * pad, pad, 1), KDL_FLOAT, 32)
        vpv = DLPackTensor(vp, (G, cap, D), (cap * pad, pad, 1), KDL_FLOAT, 32)
        self.assertEqual(bits(self.dec.decode(shaped(q, (H, D)), kpv, vpv, live=T)), first)
        # one tensor for both K and V
        same = bits(self.dec.decode(*views(q, k, k)))
        self.assertEqual(bits(self.dec.decode(shaped(q, (H, D)), shaped(k, (G, T, D)),
                                              shaped(k, (G, T, D)))), same)

    def test_sixteen_bit_caches_read_as_their_widening(self):
        """A BF16 or F16 cache gives the bits of the same call on its F32 widening, whether it
        arrives as raw bits (uint16 with k_dtype) or as a typed DLPack tensor."""
        q, k, v = problem(5)
        for name, enc, dec_, code in (("bf16", bf16_bits, bf16_value, KDL_BFLOAT),
                                      ("f16", f16_bits, f16_value, KDL_FLOAT)):
            with self.subTest(dtype=name):
                kb = array.array("H", (enc(x) for x in k))
                vb = array.array("H", (enc(x) for x in v))
                kw = array.array("f", (dec_(b) for b in kb))
                vw = array.array("f", (dec_(b) for b in vb))
                widened = bits(self.dec.decode(*views(q, kw, vw)))
                raw = self.dec.decode(shaped(q, (H, D)), shaped(kb, (G, T, D)),
                                      shaped(vb, (G, T, D)), k_dtype=name, v_dtype=name)
                self.assertEqual(bits(raw), widened)
                typed = self.dec.decode(shaped(q, (H, D)),
                                        DLPackTensor(kb, (G, T, D), None, code, 16),
                                        DLPackTensor(vb, (G, T, D), None, code, 16))
                self.assertEqual(bits(typed), widened)
                want = attention64(q, head_major(kw, G, T, D), head_major(vw, G, T, D), H, G, D,
                                   D, T, 1 / math.sqrt(D))
                self.assertLessEqual(nmse(raw, want), NMSE_GATE)
        # K in BF16, V in F32
        kb = array.array("H", (bf16_bits(x) for x in k))
        kw = array.array("f", (bf16_value(b) for b in kb))
        mixed = self.dec.decode(shaped(q, (H, D)), shaped(kb, (G, T, D)), shaped(v, (G, T, D)),
                                k_dtype="bf16")
        self.assertEqual(bits(mixed), bits(self.dec.decode(*views(q, kw, v))))

    def test_fp8_caches_with_scales(self):
        rng = seeded(6)
        codes = [c for c in range(256) if c not in (0x7F, 0xFF)]  # every code but the NaNs
        q = floats(rng, H * D)
        kc = array.array("B", (rng.choice(codes) for _ in range(G * T * D)))
        vc = array.array("B", (rng.choice(codes) for _ in range(G * T * D)))
        ks, vs = [0.01, 0.02], [0.5, 0.25]
        args = (shaped(q, (H, D)), shaped(kc, (G, T, D)), shaped(vc, (G, T, D)))
        opts = dict(k_dtype="fp8_e4m3", v_dtype="fp8_e4m3", k_scale=ks, v_scale=vs)
        out = self.dec.decode(*args, **opts)
        want = attention64(q, lambda g, t, i: fp8_e4m3_value(kc[(g * T + t) * D + i]) * ks[g],
                           lambda g, t, j: fp8_e4m3_value(vc[(g * T + t) * D + j]) * vs[g],
                           H, G, D, D, T, 1 / math.sqrt(D))
        self.assertLessEqual(nmse(out, want), NMSE_GATE)
        self.assertLessEqual(nmse(out, gem.reference(*args, **opts)), NMSE_GATE)
        with self.assertRaises(gem.GemError) as e:  # FP8 without its scales
            self.dec.decode(*args, k_dtype="fp8_e4m3", v_dtype="fp8_e4m3")
        self.assertEqual(e.exception.status, "param")
        with self.assertRaisesRegex(ValueError, "2 KV heads"):
            self.dec.decode(*args, **dict(opts, k_scale=[1.0]))

    def test_k_rebuilt_from_v(self):
        """Gemma 4's K = V: K(g, t) = RoPE_{pos0+t}(w * V(g, t)) on pairs j, j + half."""
        rng = seeded(7)
        q, _, v = problem(7)
        w = floats(rng, D, 0.5, 1.5)
        half, pos0 = D // 2, 11
        inv_freq = [10000.0 ** (-2 * j / D) for j in range(8)]  # 8 of the 32 pairs rotate

        def kget(g, t, i):
            a = [w[x] * v[(g * T + t) * D + x] for x in range(D)]
            j = i if i < half else i - half
            if j >= len(inv_freq):
                return a[i]
            th = (pos0 + t) * inv_freq[j]
            c, s = math.cos(th), math.sin(th)
            return a[j] * c - a[j + half] * s if i < half else a[j] * s + a[j + half] * c

        kfv = gem.KFromV(w, inv_freq, half=half, pos0=pos0)
        out = self.dec.decode(shaped(q, (H, D)), v=shaped(v, (G, T, D)), k_from_v=kfv, scale=1.0)
        want = attention64(q, kget, head_major(v, G, T, D), H, G, D, D, T, 1.0)
        self.assertLessEqual(nmse(out, want), NMSE_GATE)
        ref = gem.reference(shaped(q, (H, D)), v=shaped(v, (G, T, D)), k_from_v=kfv, scale=1.0)
        self.assertLessEqual(nmse(out, ref), NMSE_GATE)
        with self.assertRaisesRegex(ValueError, "V alone"):
            self.dec.decode(*views(q, v, v), k_from_v=kfv)
        with self.assertRaises(gem.GemError) as e:  # pairs past half
            self.dec.decode(shaped(q, (H, D)), v=shaped(v, (G, T, D)),
                            k_from_v=gem.KFromV(w, inv_freq * 5, half=half))
        self.assertEqual(e.exception.status, "param")

    def test_kv_cache_helper(self):
        q, k, v = problem(8)
        dense = bits(self.dec.decode(*views(q, k, v)))
        with gem.KVCache(G, D, capacity=64) as c:
            self.assertEqual((c.live, c.appended), (0, 0))

            # token-major rows as a projection writes them: one token, then 36 at once
            def rows(buf, t0, n):
                out = array.array("f")
                for t in range(t0, t0 + n):
                    for g in range(G):
                        out.extend(buf[(g * T + t) * D:(g * T + t + 1) * D])
                return out
            c.append(shaped(rows(k, 0, 1), (G, D)), shaped(rows(v, 0, 1), (G, D)))
            c.append(shaped(rows(k, 1, T - 1), (T - 1, G, D)),
                     shaped(rows(v, 1, T - 1), (T - 1, G, D)))
            self.assertEqual((c.live, c.appended), (T, T))
            self.assertEqual(bits(self.dec.decode(shaped(q, (H, D)), cache=c)), dense)
            # a non-finite row: refused, nothing written
            bad = rows(k, 0, 1)
            bad[5] = math.inf
            with self.assertRaises(gem.GemError) as e:
                c.append(shaped(bad, (G, D)), shaped(rows(v, 0, 1), (G, D)))
            self.assertEqual(e.exception.status, "nonfinite")
            self.assertEqual(c.live, T)
            with self.assertRaises(gem.GemError) as e:  # past capacity
                c.append(shaped(rows(k, 0, T), (T, G, D)), shaped(rows(v, 0, T), (T, G, D)))
            self.assertEqual(e.exception.status, "range")
            with self.assertRaisesRegex(ValueError, "cache describes itself"):
                self.dec.decode(shaped(q, (H, D)), cache=c, live=3)
            c.reset()
            self.assertEqual(c.live, 0)
            with self.assertRaisesRegex(ValueError, "no rows"):
                self.dec.decode(shaped(q, (H, D)), cache=c)
        # BF16 storage: the bits of a BF16 array of the rounded rows
        kb = array.array("H", (bf16_bits(x) for x in k))
        vb = array.array("H", (bf16_bits(x) for x in v))
        want = bits(self.dec.decode(shaped(q, (H, D)), shaped(kb, (G, T, D)),
                                    shaped(vb, (G, T, D)), k_dtype="bf16", v_dtype="bf16"))
        with gem.KVCache(G, D, capacity=T, dtype="bf16") as c:
            c.append(shaped(rows(k, 0, T), (T, G, D)), shaped(rows(v, 0, T), (T, G, D)))
            self.assertEqual(bits(self.dec.decode(shaped(q, (H, D)), cache=c)), want)
        # a ring keeps the last `capacity` rows
        with gem.KVCache(G, D, capacity=8, ring=True) as c:
            for t in range(T):
                c.append(shaped(rows(k, t, 1), (G, D)), shaped(rows(v, t, 1), (G, D)))
            self.assertEqual((c.live, c.appended), (8, T))
            out = self.dec.decode(shaped(q, (H, D)), cache=c)
            last = attention64(q, lambda g, t, i: k[(g * T + T - 8 + t) * D + i],
                               lambda g, t, j: v[(g * T + T - 8 + t) * D + j], H, G, D, D, 8,
                               1 / math.sqrt(D))
            self.assertLessEqual(nmse(out, last), NMSE_GATE)
        with self.assertRaisesRegex(ValueError, "f32, bf16 or f16"):
            gem.KVCache(G, D, capacity=8, dtype="fp8_e4m3")

    def test_check_finite(self):
        q, k, v = problem(9, capacity=T + 3)
        kv = views(q, k, v, capacity=T + 3)
        self.assertTrue(self.dec.check_finite(*kv))
        k[(1 * (T + 3) + T + 1) * D + 3] = math.nan  # past live: never read
        self.assertTrue(self.dec.check_finite(*kv, live=T))
        self.assertFalse(self.dec.check_finite(*kv))
        v[(0 * (T + 3) + 2) * D] = math.inf
        self.assertFalse(self.dec.check_finite(*kv, live=T))

    def test_gemma4_full_layer_shape(self):
        """32 query heads over 4 KV heads of 512 at 1,000 rows, scale 1: the tuned route against
        libgem's double reference."""
        n_q, n_kv, d, live = 32, 4, 512, 1000
        rng = seeded(10)
        q = floats(rng, n_q * d, -0.1, 0.1)
        # cheap seeded values: int16 codes as floats (exact), small enough after the scale
        k = array.array("f", array.array("h", rng.randbytes(2 * n_kv * live * d)))
        v = array.array("f", array.array("h", rng.randbytes(2 * n_kv * live * d)))
        kv = views(q, k, v, n_q, n_kv, d, d, live)
        out = self.dec.decode(*kv, scale=1e-4)
        self.assertLessEqual(nmse(out, gem.reference(*kv, scale=1e-4)), NMSE_GATE)
        plan = self.dec.plan(*kv)
        self.assertEqual(plan["route"], "fused")

    def test_one_context_from_many_threads(self):
        q, k, v = problem(11)
        want = bits(self.dec.decode(*views(q, k, v)))
        got = []

        def run():
            for _ in range(20):
                got.append(bits(self.dec.decode(*views(q, k, v))))

        workers = [threading.Thread(target=run) for _ in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        self.assertEqual(len(got), 80)
        self.assertTrue(all(g == want for g in got))

    def test_states_of_pieces_merge_to_the_whole(self):
        """Decoder.state over pieces of a cache (byte-offset views of its rows), merged, is the
        attention over all of them; the one state of the whole merges to decode's bits; an
        empty state changes no bit; invalid states and arrays are refused."""
        q, k, v = problem(12)
        n = H * (D + 2)
        whole = self.dec.decode(*views(q, k, v))
        one = self.dec.state(*views(q, k, v))
        self.assertEqual(len(flat(one)), n)
        self.assertEqual(bits(self.dec.merge(one, H)), bits(whole))
        cuts = [(0, 10), (10, 11), (11, T)]
        states = array.array("f", bytes(4 * n * len(cuts)))
        for i, (a, b) in enumerate(cuts):
            kp = DLPackTensor(k, (G, b - a, D), (T * D, D, 1), KDL_FLOAT, 32, byte_offset=4 * a * D)
            vp = DLPackTensor(v, (G, b - a, D), (T * D, D, 1), KDL_FLOAT, 32, byte_offset=4 * a * D)
            got = self.dec.state(shaped(q, (H, D)), kp, vp,
                                 out=memoryview(states)[i * n:(i + 1) * n])
            self.assertEqual(len(got), n)
        merged = self.dec.merge(shaped(states, (len(cuts), n)), H)
        want = attention64(q, head_major(k, G, T, D), head_major(v, G, T, D), H, G, D, D, T,
                           1 / math.sqrt(D))
        self.assertLessEqual(nmse(merged, want), NMSE_GATE)
        empty = array.array("f", [-math.inf] * H + [0.0] * (n - H))
        self.assertEqual(bits(self.dec.merge(shaped(empty + states, (4, n)), H)), bits(merged))
        # the same bits on a repeat and with another thread count
        with gem.Decoder(threads=3) as other:
            again = array.array("f", bytes(4 * n))
            a, b = cuts[2]
            kp = DLPackTensor(k, (G, b - a, D), (T * D, D, 1), KDL_FLOAT, 32, byte_offset=4 * a * D)
            vp = DLPackTensor(v, (G, b - a, D), (T * D, D, 1), KDL_FLOAT, 32, byte_offset=4 * a * D)
            other.state(shaped(q, (H, D)), kp, vp, out=again)
            self.assertEqual(bits(again), bits(memoryview(states)[2 * n:]))
            self.assertEqual(bits(other.merge(shaped(states, (3, n)), H)), bits(merged))
        # refusals
        bad = array.array("f", states)
        bad[n + 1] = math.nan  # M of head 1 in the second state
        with self.assertRaises(gem.GemError) as e:
            self.dec.merge(shaped(bad, (3, n)), H)
        self.assertEqual(e.exception.status, "state")
        with self.assertRaises(gem.GemError) as e:
            self.dec.merge(empty, H)  # an empty state alone has no softmax
        self.assertEqual(e.exception.status, "state")
        with self.assertRaisesRegex(ValueError, "do not hold states of 7"):
            self.dec.merge(states, 7)
        with self.assertRaisesRegex(ValueError, "contiguous float32"):
            self.dec.merge(array.array("d", [0.0] * n), H)
        with self.assertRaisesRegex(ValueError, r"n_q_heads \* \(dv \+ 2\)"):
            self.dec.state(*views(q, k, v), out=array.array("f", bytes(4 * (n - 1))))
        with self.assertRaisesRegex(ValueError, "read-only"):
            self.dec.merge(states, H, out=bytes(4 * H * D))

    def test_bound_step_is_decode(self):
        """A step bound once gives, at every live length, decode's bits on what the arrays hold
        at the call; it holds the arrays until it is closed."""
        q, k, v = problem(13)
        out = array.array("f", bytes(4 * H * D))
        qv, kv_, vv = views(q, k, v)
        with self.dec.bind(qv, kv_, vv, out=out, scale=0.5) as step:
            for live in (1, 2, 17, T, None):
                self.assertIs(step(live), out)
                self.assertEqual(bits(out), bits(self.dec.decode(qv, kv_, vv, scale=0.5,
                                                                 live=live)))
            q[3] = 7.0  # the arrays in place: the next step reads the new value
            k[(1 * T + 5) * D + 9] = -3.0
            step(T)
            self.assertEqual(bits(out), bits(self.dec.decode(qv, kv_, vv, scale=0.5)))
            with self.assertRaisesRegex(ValueError, f"live={T + 1}"):
                step(T + 1)
        with self.assertRaisesRegex(ValueError, "closed"):
            step(3)
        # the step holds what it borrowed (array.array cannot move its memory), until closed
        k2 = array.array("f", k)
        step = self.dec.bind(qv, shaped(k2, (G, T, D)), vv)
        with self.assertRaises(BufferError):
            k2.append(0.0)
        step.close()
        k2.append(0.0)
        # bound to routes and to a cache that grows between steps
        with gem.KVCache(G, D, capacity=T) as c, \
                self.dec.bind(qv, cache=c, route="baseline", partitions=3) as step:
            with self.assertRaisesRegex(ValueError, "no rows"):
                step()
            for t in range(4):
                rows_k = array.array("f", [float(t + 1)] * (G * D))
                c.append(shaped(rows_k, (G, D)), shaped(rows_k, (G, D)))
                got = bits(step())
                self.assertEqual(got, bits(self.dec.decode(qv, cache=c, route="baseline",
                                                           partitions=3)))
            with self.assertRaisesRegex(ValueError, "from the cache"):
                step(2)
        # the arrays stay alive with the step alone holding them
        step = self.dec.bind(shaped(array.array("f", q), (H, D)),
                             shaped(array.array("f", k[:G * T * D]), (G, T, D)),
                             shaped(array.array("f", v), (G, T, D)))
        again = bits(step(T))
        for _ in range(3):
            self.assertEqual(bits(step(T)), again)
        step.close()

    def test_output_in_place(self):
        q, k, v = problem(12)
        out = array.array("f", bytes(4 * H * D))
        self.assertIs(self.dec.decode(*views(q, k, v), out=out), out)
        self.assertEqual(bits(out), bits(self.dec.decode(*views(q, k, v))))
        out2d = shaped(array.array("f", bytes(4 * H * D)), (H, D))
        self.dec.decode(*views(q, k, v), out=out2d)
        self.assertEqual(bytes(out2d.cast("B")), bits(out))
        ref = array.array("d", bytes(8 * H * D))
        self.assertIs(gem.reference(*views(q, k, v), out=ref), ref)


class Errors(unittest.TestCase):
    """Every bad input: one exception whose message says what is wrong; nothing crashes."""

    @classmethod
    def setUpClass(cls):
        cls.dec = gem.Decoder(threads=2)
        cls.q, cls.k, cls.v = problem(20)
        cls.qv, cls.kv_, cls.vv = views(cls.q, cls.k, cls.v)

    @classmethod
    def tearDownClass(cls):
        cls.dec.close()

    def test_arrays_of_the_wrong_kind(self):
        dec, qv, kv_, vv = self.dec, self.qv, self.kv_, self.vv
        with self.assertRaisesRegex(TypeError, "neither a buffer"):
            dec.decode([[0.0] * D] * H, kv_, vv)
        with self.assertRaisesRegex(ValueError, "q must be a row-major float32"):
            dec.decode(shaped(array.array("d", [0.0] * H * D), (H, D)), kv_, vv)
        with self.assertRaisesRegex(ValueError, "q must be a row-major float32"):
            dec.decode(self.q, kv_, vv)  # 1-D
        with self.assertRaisesRegex(ValueError, "k must be 3-D"):
            dec.decode(qv, self.k, vv)
        with self.assertRaisesRegex(ValueError, "uint16"):
            dec.decode(qv, shaped(array.array("H", [0] * G * T * D), (G, T, D)), vv)
        with self.assertRaisesRegex(ValueError, "cannot be read as bf16"):
            dec.decode(qv, kv_, vv, k_dtype="bf16")
        with self.assertRaisesRegex(ValueError, "k_dtype='int4'"):
            dec.decode(qv, kv_, vv, k_dtype="int4")
        with self.assertRaisesRegex(ValueError, "CUDA memory"):
            dec.decode(qv, DLPackTensor(self.k, (G, T, D), None, KDL_FLOAT, 32, KDL_CUDA), vv)
        with self.assertRaisesRegex(ValueError, "unit stride"):
            dec.decode(qv, DLPackTensor(self.k, (G, T, D // 2), (T * D, D, 2), KDL_FLOAT, 32),
                       vv)

    def test_shapes_that_disagree(self):
        dec, qv, kv_, vv = self.dec, self.qv, self.kv_, self.vv
        with self.assertRaisesRegex(ValueError, "same KV heads and capacity"):
            dec.decode(qv, kv_, shaped(self.v, (G * T, 1, D)))
        with self.assertRaisesRegex(ValueError, "q has 32 elements a head and K 64"):
            dec.decode(shaped(self.q, (2 * H, D // 2)), kv_, vv)
        with self.assertRaisesRegex(ValueError, "cannot share"):
            dec.decode(shaped(self.q[:3 * D], (3, D)), kv_, vv)
        for live in (0, T + 1):
            with self.assertRaisesRegex(ValueError, f"live={live}"):
                dec.decode(qv, kv_, vv, live=live)
        with self.assertRaisesRegex(ValueError, "finite"):
            dec.decode(qv, kv_, vv, scale=math.inf)
        with self.assertRaisesRegex(ValueError, "route='flash'"):
            dec.decode(qv, kv_, vv, route="flash")

    def test_outputs_that_cannot_take_the_result(self):
        dec, qv, kv_, vv = self.dec, self.qv, self.kv_, self.vv
        with self.assertRaisesRegex(ValueError, "read-only"):
            dec.decode(qv, kv_, vv, out=bytes(4 * H * D))
        with self.assertRaisesRegex(ValueError, "out must be a writable row-major float32"):
            dec.decode(qv, kv_, vv, out=array.array("f", bytes(4 * (H * D - 1))))
        with self.assertRaisesRegex(ValueError, "out must be"):
            dec.decode(qv, kv_, vv, out=array.array("d", bytes(8 * H * D)))
        with self.assertRaisesRegex(ValueError, r"of shape \(8, 64\) or \(512,\)"):
            dec.decode(qv, kv_, vv, out=shaped(array.array("f", bytes(4 * H * D)), (D, H)))
        with self.assertRaises(gem.GemError) as e:  # out on top of q
            q = array.array("f", self.q)
            dec.decode(shaped(q, (H, D)), kv_, vv, out=q)
        self.assertEqual(e.exception.status, "overlap")
        self.assertRegex(str(e.exception), r"^gem_decode: .+ \(overlap\)$")

    def test_what_libgem_refuses(self):
        dec, qv, kv_, vv = self.dec, self.qv, self.kv_, self.vv
        # K two bytes off its float alignment
        raw = bytearray(4 * G * T * D + 2)
        mis = memoryview(raw)[2:].cast("f", (G, T, D))
        with self.assertRaises(gem.GemError) as e:
            dec.decode(qv, mis, vv)
        self.assertEqual(e.exception.status, "align")
        # a NaN behind a score
        k = array.array("f", self.k)
        k[(1 * T + 4) * D + 7] = math.nan
        with self.assertRaises(gem.GemError) as e:
            dec.decode(qv, shaped(k, (G, T, D)), vv)
        self.assertEqual(e.exception.status, "nonfinite")
        # a score past float's range although every input is finite
        big = array.array("f", [1e30] * (H * D))
        with self.assertRaises(gem.GemError) as e:
            dec.decode(shaped(big, (H, D)), kv_, vv, scale=1e10)
        self.assertEqual(e.exception.status, "score")
        # parameters used as given or refused: the baseline takes no tile, P has a bound
        for kwargs in ({"route": "baseline", "tile": 4}, {"partitions": 5000}):
            with self.subTest(**kwargs), self.assertRaises(gem.GemError) as e:
                dec.decode(qv, kv_, vv, **kwargs)
            self.assertEqual(e.exception.status, "param")
        with self.assertRaises(gem.GemError) as e:
            gem.Decoder(threads=-1)
        self.assertEqual(e.exception.status, "param")
        self.assertRegex(str(e.exception), r"^gem_decode_ctx_create: ")

    def test_backends_and_streams(self):
        with self.assertRaisesRegex(ValueError, "backend='tpu'"):
            gem.Decoder(backend="tpu")
        with self.assertRaisesRegex(ValueError, "backend='tpu'"):
            gem.KVCache(G, D, capacity=4, backend="tpu")
        with self.assertRaisesRegex(ValueError, "stream= is for a CUDA Decoder"):
            self.dec.decode(self.qv, self.kv_, self.vv, stream=1)
        with self.assertRaisesRegex(ValueError, "stream= is for a CUDA Decoder"):
            self.dec.bind(self.qv, self.kv_, self.vv, stream=1)
        try:  # where there is no GPU (or no CUDA in this libgem), one clear status
            gem.Decoder(backend="cuda").close()
        except gem.GemError as e:
            self.assertEqual(e.status, "no_device")

    def test_closed_objects(self):
        d = gem.Decoder(threads=1)
        d.close()
        d.close()  # twice is fine
        with self.assertRaisesRegex(ValueError, "closed"):
            d.decode(self.qv, self.kv_, self.vv)
        self.assertEqual(repr(d), "Decoder(closed)")
        c = gem.KVCache(G, D, capacity=4)
        c.close()
        with self.assertRaisesRegex(ValueError, "closed"):
            c.live


if __name__ == "__main__":
    unittest.main()
