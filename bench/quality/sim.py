"""Reference numpy quantizers of the KV cache, for comparison with the store's codec.

    bench/quality/.venv/bin/python bench/quality/sim.py [--tokens 1536] [--texts gpl3,execmodel]

Not the product: these are textbook versions of the techniques issue 14 names, run on the
same cache and the same "whole cache at one tier" perplexity as kv_eval.py, so the store's
figures can be set against what the method itself gives at the same bits/value:

* `asym-kivi`: asymmetric (scale and zero-point, both f16) round-to-nearest; keys grouped
  per channel over blocks of G tokens, values per token over the 64 channels (KIVI);
* `+clip`: the same with the clipping range searched per group (shrink the [min, max]
  range by 0..25% in 5% steps, keep the lowest squared error);
* `+sink`: token 0 kept in f16;
* `+Hadamard(V)`: values rotated by a randomized 64x64 Hadamard before the per-token
  quantization (and back after), QuaRot's trick (orthogonal: no bits, a fixed seed).

bits/value = code bits + 32 (f16 scale + zero) / group + the sink's extra bits spread over
the cache.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import TEXTS, text  # noqa: E402
from kv_eval import nll_ppl  # noqa: E402
from smollm import SmolLM  # noqa: E402


def quant_groups(x: np.ndarray, bits: int, clip: bool) -> np.ndarray:
    """Asymmetric RTN of each row of x [groups, n] with an f16 scale and zero-point."""
    x = x.astype(np.float32)
    qmax = 2 ** bits - 1
    lo0, hi0 = x.min(1, keepdims=True), x.max(1, keepdims=True)
    best, best_err = None, None
    for shrink in ((0.0, 0.05, 0.1, 0.15, 0.2, 0.25) if clip else (0.0,)):  # noqa: B007
        mid = (lo0 + hi0) / 2
        lo = mid + (lo0 - mid) * (1 - shrink)
        hi = mid + (hi0 - mid) * (1 - shrink)
        scale = ((hi - lo) / qmax).astype(np.float16).astype(np.float32)
        scale = np.where(scale > 0, scale, 1.0)
        zero = lo.astype(np.float16).astype(np.float32)
        q = np.clip(np.rint((x - zero) / scale), 0, qmax)
        y = q * scale + zero
        err = ((y - x) ** 2).sum(1, keepdims=True)
        if best is None:
            best, best_err = y, err
        else:
            better = err < best_err
            best = np.where(better, y, best)
            best_err = np.minimum(err, best_err)
    return best


def hadamard(d: int = 64, seed: int = 14) -> np.ndarray:
    """A randomized orthonormal Hadamard matrix: diag(random signs) @ H_d / sqrt(d)."""
    h = np.array([[1.0]])
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], d)
    return (signs[:, None] * h / np.sqrt(d)).astype(np.float32)


def quant_kv(k: np.ndarray, v: np.ndarray, bits: int, group: int, clip: bool, sink: bool,
             rot_v: bool = False, vbits: int = 0):
    """k, v: f16 [heads, T, 64] -> quantized f16 (keys per channel over `group` tokens,
    values per token; with rot_v, values rotated by a randomized Hadamard first)."""
    if rot_v:
        R = hadamard(v.shape[-1])
        kq, vq = quant_kv(k, (v.astype(np.float32) @ R), bits, group, clip, sink, vbits=vbits)
        return kq, (vq.astype(np.float32) @ R.T).astype(np.float16)
    H, T, D = k.shape
    start = 1 if sink else 0
    kq, vq = k.astype(np.float32).copy(), v.astype(np.float32).copy()
    body = T - start
    if body > 0:
        pad = (-body) % group
        kk = k[:, start:].astype(np.float32)
        kk = np.concatenate([kk, np.repeat(kk[:, -1:], pad, 1)], 1) if pad else kk
        g = kk.reshape(H, -1, group, D).transpose(0, 1, 3, 2).reshape(-1, group)
        y = quant_groups(g, bits, clip).reshape(H, -1, D, group).transpose(0, 1, 3, 2).reshape(H, -1, D)
        kq[:, start:] = y[:, :body]
        vq[:, start:] = quant_groups(v[:, start:].reshape(-1, D), vbits or bits, clip).reshape(H, body, D)
    return kq.astype(np.float16), vq.astype(np.float16)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=1536)
    ap.add_argument("--texts", default=",".join(TEXTS))
    ap.add_argument("--only", default="", help="run the configs whose name contains this")
    a = ap.parse_args()
    m = SmolLM()
    configs = [
        # (name, bits, key group in tokens) -> bits/value = bits + 32 / group (value groups are 64)
        ("8-bit asym, K groups of 128 tokens", 8, 128, False, False),
        ("5-bit asym, K groups of 128", 5, 128, False, False),
        ("5-bit asym +clip", 5, 128, True, False),
        ("3-bit asym, K groups of 64", 3, 64, False, False),
        ("3-bit asym +clip", 3, 64, True, False),
        ("3-bit asym +clip +sink", 3, 64, True, True),
        ("3-bit asym +sink", 3, 64, False, True),
        ("3-bit asym +sink +Hadamard(V)", 3, 64, False, True, True),
        ("4-bit asym +sink +Hadamard(V)", 4, 64, False, True, True),
        ("K 2-bit (groups of 64) / V 4-bit +sink +Hadamard(V)", 2, 64, False, True, True, 4),
        ("K 2-bit (groups of 128) / V 4-bit +sink", 2, 128, False, True, False, 4),
    ]
    print("| text | config | bits/value | K rel. RMSE | V rel. RMSE | perplexity | change |")
    print("|---|---|---|---|---|---|---|")
    for name in a.texts.split(","):
        ids = m.encode(text(name))[: a.tokens]
        ref = nll_ppl(m.forward(ids), ids)
        for cname, bits, group, clip, sink, *rot in configs:
            if a.only and a.only not in cname:
                continue
            t0 = time.time()
            err = {"k": [0.0, 0.0], "v": [0.0, 0.0]}

            def hook(layer, k, v):
                vbits = rot[1] if len(rot) > 1 else bits
                kq, vq = quant_kv(k, v, bits, group, clip, sink, bool(rot and rot[0]), vbits)
                for key, x, y in (("k", k, kq), ("v", v, vq)):
                    x = x.astype(np.float64)
                    err[key][0] += float(((y - x) ** 2).sum())
                    err[key][1] += float((x ** 2).sum())
                return kq, vq

            p = nll_ppl(m.forward(ids, kv_hook=hook), ids)
            T = len(ids)
            side = 32 / group / 2 + 32 / 64 / 2  # keys and values, half the cache each
            vbits = rot[1] if len(rot) > 1 else bits
            sink_bits = (32 - bits - vbits) / 2 / T if sink else 0.0
            bpv = (bits + vbits) / 2 + side + sink_bits
            print(f"| {name} | {cname} | {bpv:.3f} | {(err['k'][0] / err['k'][1]) ** .5 * 100:.2f}% | "
                  f"{(err['v'][0] / err['v'][1]) ** .5 * 100:.2f}% | {p:.3f} | {(p / ref - 1) * 100:+.2f}% |",
                  flush=True)
            print(f"  ({time.time() - t0:.0f}s)", file=sys.stderr)


if __name__ == "__main__":
    main()
