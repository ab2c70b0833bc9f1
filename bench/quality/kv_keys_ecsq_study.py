"""numpy study (session 14): could tier-2 keys use model-coded ECSQ (TQTC v7's idea)
instead of 5-bit per-channel groups? One window of one text, every layer's pre-RoPE keys
(SmolLM2-135M-Instruct in numpy, as `round3.py` captures them), cut into the KV store's
blocks of 256 tokens x 64 channels per KV head.

Per block, compared at the same key bits per value:

* `groups`: per channel over the block's 256 tokens, asymmetric uniform levels of `--bits`
  bits between the channel's min and max (the shape of today's tier-2 keys; side data, a
  u8 scale and min code per channel, is not counted, so this row flatters the groups);
* `ecsq`: per block one uniform step for every channel; each channel's codes priced by a
  discretised Gaussian of that channel's std (one side byte per channel) and, with
  `centred`, each channel's mean over the block removed first (an f16 per channel); the
  step is bisected so that codes + side bytes meet the groups' bits per value.

Errors are relative RMSE of the keys (K) and of the attention logits q.k (the queries of
the window, every head), the quantity the keys' error moves.

    OPENBLAS_NUM_THREADS=1 bench/quality/.venv/bin/python bench/quality/kv_keys_ecsq_study.py \
        --text apache2 --offset 0 [--tokens 1536] [--bits 5]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import text  # noqa: E402
from round3 import unrope  # noqa: E402

BLOCK_T = 256


def _ndtr(x: np.ndarray) -> np.ndarray:
    z = np.abs(x) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-z * z)
    return 0.5 * (1.0 + np.sign(x) * y)


def groups(k: np.ndarray, bits: int) -> np.ndarray:
    """k [T, C]: per channel min/max levels."""
    lo, hi = k.min(0, keepdims=True), k.max(0, keepdims=True)
    s = np.maximum(hi - lo, 1e-30) / (2 ** bits - 1)
    return np.round((k - lo) / s) * s + lo


def ecsq_bits(k: np.ndarray, step: float, centred: bool):
    """(decoded, code bits per value) with one step; Gaussian model per channel."""
    mu = k.mean(0, keepdims=True) if centred else np.zeros((1, k.shape[1]))
    c = k - mu
    if centred:
        mu = mu.astype(np.float16).astype(np.float64)
    sd = np.maximum(c.std(0, keepdims=True), 1e-12)
    u = np.round(c / step)
    lo = _ndtr((u - 0.5) * step / sd)
    hi = _ndtr((u + 0.5) * step / sd)
    p = np.maximum(hi - lo, 2.0 ** -15)
    return u * step + mu, float(-np.log2(p).mean())


def ecsq(k: np.ndarray, bits_budget: float, centred: bool) -> np.ndarray:
    side = (8 + (16 if centred else 0)) / k.shape[0]  # per channel: sd byte (+ f16 mean) over T values
    target = bits_budget - side
    lo_s, hi_s = 1e-6 * (np.abs(k).max() + 1e-12), 4.0 * (np.abs(k).max() + 1e-12)
    for _ in range(40):
        mid = np.sqrt(lo_s * hi_s)
        _, b = ecsq_bits(k, mid, centred)
        if b > target:
            lo_s = mid
        else:
            hi_s = mid
    return ecsq_bits(k, hi_s, centred)[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", default="apache2")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=1536)
    ap.add_argument("--bits", type=int, default=5)
    a = ap.parse_args()
    from smollm import SmolLM
    m = SmolLM()
    ids = m.encode(text(a.text))[a.offset:a.offset + a.tokens]
    K, Q = {}, {}

    def cap(layer, k, v):
        K[layer] = k
        return k, v

    def capq(layer, q):
        Q[layer] = q

    t0 = time.time()
    m.forward(ids, kv_hook=cap, q_hook=capq)
    print(f"reference forward {time.time() - t0:.0f}s", file=sys.stderr)
    g = m.n_head // m.n_kv
    acc = {n: [0.0, 0.0, 0.0, 0.0] for n in ("groups", "ecsq", "ecsq centred")}
    for l in sorted(K):
        kpre = unrope(m, K[l].astype(np.float32)).astype(np.float64)  # [heads, T, hd]
        out = {n: np.empty_like(kpre) for n in acc}
        for h in range(kpre.shape[0]):
            for t in range(0, kpre.shape[1], BLOCK_T):
                blk = kpre[h, t:t + BLOCK_T]
                out["groups"][h, t:t + BLOCK_T] = groups(blk, a.bits)
                out["ecsq"][h, t:t + BLOCK_T] = ecsq(blk, a.bits, False)
                out["ecsq centred"][h, t:t + BLOCK_T] = ecsq(blk, a.bits, True)
        ref_post = K[l].astype(np.float64)
        for n, kh in out.items():
            kh_post = m.rope(kh.astype(np.float32)).astype(np.float64)
            acc[n][0] += float(((kh_post - ref_post) ** 2).sum())
            acc[n][1] += float((ref_post ** 2).sum())
            for hq in range(m.n_head):
                q = Q[l][hq].astype(np.float64)
                s_ref = q @ ref_post[hq // g].T
                s_q = q @ kh_post[hq // g].T
                acc[n][2] += float(((s_q - s_ref) ** 2).sum())
                acc[n][3] += float((s_ref ** 2).sum())
    print(f"{a.text} @{a.offset}, {len(ids)} tokens, keys at {a.bits} b/v (groups' side data not counted):")
    for n, (e, s, el, sl) in acc.items():
        print(f"  {n:14s} K rel. RMSE {np.sqrt(e / s) * 100:.3f}%   logits rel. RMSE {np.sqrt(el / sl) * 100:.3f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
