"""Tier 2 values: what removing each block's per-channel mean before the rotation would
save (session 13, kv-tier2b; a numpy model, not a product path).

    OPENBLAS_NUM_THREADS=1 bench/quality/.venv/bin/python bench/quality/kv_tier2b_meanrm.py \
        [--text apache2] [--ratios 1.0,1.25,1.5]

The values of the first 1536 tokens (every layer and KV head) are cut into the KV
collection's 256-token blocks. Each token's 64 values are rotated (randomized Hadamard,
fixed random signs) and coded on uniform midrise levels spaced ratio x the 6-bit table's
MSE-optimal step times the token's RMS (as `ecsq_tier2` does, without the scale byte's
rounding). With `meanrm`, the block's per-channel mean (f16, 64 x 16 bits per block) is
subtracted first and added back after decoding. Rate = the order-0 entropy of each block's
codes + 8 bits per token (scale) + the means + 8 bits per level (table), per value.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import text  # noqa: E402
from kv_tier2b_seeds import STEP6, hadamard  # noqa: E402

BLOCK = 256


def code(x: np.ndarray, h: np.ndarray, signs: np.ndarray, ratio: float, meanrm: bool):
    """(bits, squared error) of one [256, 64] block."""
    mu = (x.mean(0) if meanrm else np.zeros(x.shape[1])).astype(np.float16).astype(np.float64)
    y = ((x - mu) * signs) @ h.T
    s = np.sqrt((y ** 2).mean(1)) * ratio * STEP6
    s = np.where(s > 0, s, 1)
    q = np.clip(np.round(y / s[:, None] - 0.5) + 0.5, -31.5, 31.5)
    d = ((q * s[:, None]) @ h) * signs + mu
    _, cnt = np.unique(q, return_counts=True)
    bits = -(cnt * np.log2(cnt / cnt.sum())).sum() + 8 * x.shape[0] + 64 * 8 + (64 * 16 if meanrm else 0)
    return bits, ((d - x) ** 2).sum()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", default="apache2")
    ap.add_argument("--tokens", type=int, default=1536)
    ap.add_argument("--ratios", default="1.0,1.25,1.5")
    a = ap.parse_args()
    from smollm import SmolLM
    m = SmolLM()
    ids = m.encode(text(a.text))[:a.tokens]
    V = {}

    def cap(layer, k, v):
        V[layer] = v
        return k, v

    m.forward(ids, kv_hook=cap)
    h = hadamard(m.hd)
    signs = np.random.default_rng(7).choice([-1.0, 1.0], m.hd)
    share = [np.mean([(x.mean(0) ** 2).sum() * len(x) / (x ** 2).sum()
                      for v in [V[l].astype(np.float64)] for hh in range(v.shape[0])
                      for x in [v[hh, b:b + BLOCK] for b in range(0, v.shape[1], BLOCK)]])
             for l in sorted(V)]
    print("share of each layer's value energy in the blocks' per-channel means: "
          + " ".join(f"{s:.2f}" for s in share))
    for meanrm in (False, True):
        for ratio in (float(r) for r in a.ratios.split(",")):
            bits = err = norm = n = 0.0
            for l in sorted(V):
                v = V[l].astype(np.float64)
                for hh in range(v.shape[0]):
                    for b in range(0, v.shape[1], BLOCK):
                        x = v[hh, b:b + BLOCK]
                        bb, ee = code(x, h, signs, ratio, meanrm)
                        bits += bb
                        err += ee
                        norm += (x ** 2).sum()
                        n += x.size
            print(f"meanrm={meanrm!s:5s} step x{ratio}: {bits / n:.3f} b/v  V rel err {np.sqrt(err / norm) * 100:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
