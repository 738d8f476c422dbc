#!/usr/bin/env python3
"""The rotating dims of dev/cuda/kfv_mma.cu versions 18 and 19, lane by lane, on the host.

Each warp's mma.m8n8k4.f64 takes A = RoPE_u(w V) (8 tokens x 4 pairs: a = A[grp][tig]) and
B = RoPE_{-P}(q) (4 pairs x 8 heads: b = B[tig][grp]); D[grp][2 tig + e] is token 8 tg + grp,
head 2 tig + e. This builds those fragments with the kernels' maps from (warp, lane, k-step) to
(token, pair, head) and checks the warps' summed partial scores against q . RoPE_{P + u}(w V)
over the 128 rotating dims, in double. A map that drops, repeats or swaps a pair or a token
fails by far more than rounding. Needs numpy (not a dependency of gem):

    python3 dev/cuda/kfv_wgmma_rotation.py       # prints one line a version, exit 1 on a mismatch
"""
import sys

import numpy as np

T, H, D, PAIRS, HALF = 64, 8, 512, 64, 256


def pair_v18(w, tig, kk):  # 4 warps, 16 pairs each, k-steps 0 .. 3
    return 16 * w + 8 * (kk >> 1) + 2 * tig + (kk & 1)


def pair_v19(w, tig, kk):  # 8 warps, 8 pairs each, k-steps 0 .. 1
    return 8 * w + 2 * tig + kk


def simulate(pair, warps, ksteps, q, kw, V, inv, P0):
    srot = np.zeros((warps, T, H))
    for w in range(warps):
        for tg in range(T // 8):
            P = P0 + 8 * tg
            d = np.zeros((8, 8))
            for kk in range(ksteps):
                Al, Bl, Ah, Bh = (np.zeros((8, 4)), np.zeros((4, 8)), np.zeros((8, 4)),
                                  np.zeros((4, 8)))
                for grp in range(8):
                    for tig in range(4):
                        j, t, u = pair(w, tig, kk), 8 * tg + grp, grp
                        c, s = np.cos(u * inv[j]), np.sin(u * inv[j])
                        vl, vh = V[t, j], V[t, HALF + j]
                        Al[grp, tig] = kw[j] * c * vl - kw[HALF + j] * s * vh
                        Ah[grp, tig] = kw[j] * s * vl + kw[HALF + j] * c * vh
                        cp, sp = np.cos(P * inv[j]), np.sin(P * inv[j])
                        Bl[tig, grp] = q[grp, j] * cp + q[grp, HALF + j] * sp
                        Bh[tig, grp] = q[grp, HALF + j] * cp - q[grp, j] * sp
                d += Al @ Bl + Ah @ Bh
            srot[w, 8 * tg:8 * tg + 8] = d
    return srot.sum(0)


def main():
    rng = np.random.default_rng(1)
    inv = 1e6 ** (-2.0 * np.arange(PAIRS) / D)
    q = rng.uniform(-1.7, 1.7, (H, D))
    kw = rng.uniform(0.5, 1.5, D)
    V = rng.uniform(-1.7, 1.7, (T, D))
    P0 = 1_000_000 + 192
    ref = np.zeros((T, H))
    for t in range(T):
        th = (P0 + t) * inv
        k = kw * V[t]
        a, b = k[:PAIRS], k[HALF:HALF + PAIRS]
        ref[t] = q[:, :PAIRS] @ (a * np.cos(th) - b * np.sin(th)) + \
            q[:, HALF:HALF + PAIRS] @ (a * np.sin(th) + b * np.cos(th))
    bad = 0
    for name, pair, warps, ksteps in (("18", pair_v18, 4, 4), ("19", pair_v19, 8, 2)):
        got = simulate(pair, warps, ksteps, q, kw, V, inv, P0)
        err = np.abs(got - ref).max() / np.abs(ref).max()
        ok = err < 1e-9
        bad |= not ok
        print(f"version {name}: max relative error {err:.2e} ({'ok' if ok else 'MISMATCH'})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
