"""numpy study (session 12, quant-ecsq): entropy-coded uniform scalar quantization (ECSQ)
of embeddings and weights inside the store's 4096-value blocks, against the tier slots.

Model of the bytes = a TQTC v3 segment (rotated blocks of b, uniform levels of k bits,
one byte scale per block) wrapped by the v5 rANS envelope (quant.md §12): 43 header/side
bytes + m/b scale bytes + the frequency table (one varint per symbol: 1 byte below 128,
else 2) + 16 state bytes + the ideal stream (order-0 entropy, rounded up to 16-bit words).
Rate control: per block, bisection on the step (one step for the whole block, or
t x each sub-block's RMS) for the smallest error whose bytes fit the slot.

    python bench/quality/ecsq_study.py [--sets tokens,words,weights] [--tiers 2,3]
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
try:  # the study needs only numpy; emb_eval/round3 import the package at top level
    import tensorvault  # noqa: F401
except ImportError:
    import types
    sys.modules["tensorvault"] = types.ModuleType("tensorvault")
from round3 import _hadamard, _signs  # noqa: E402

BLOCK = 4096
SLOT = {1: 4224, 2: 2688, 3: 1728, 35: 1792}


def blocks_of(x: np.ndarray) -> np.ndarray:
    f = x.reshape(-1).astype(np.float32)
    pad = (-len(f)) % BLOCK
    return np.concatenate([f, np.zeros(pad, np.float32)]).reshape(-1, BLOCK)


def rotate(bl: np.ndarray, b: int, inverse: bool = False) -> np.ndarray:
    h = (_hadamard(b) * _signs(0x54565133, b)[None, :]) / np.sqrt(b)
    y = bl.reshape(-1, b)
    y = y @ h if inverse else y @ h.T
    return y.reshape(bl.shape)


def quant(y, step, k):
    """Mid-rise uniform levels (v3 `levels = 1`): codes 0..2^k-1, value (u - (2^k-1)/2) * step."""
    half = (2 ** k - 1) / 2
    u = np.clip(np.floor(y / step + half + 0.5), 0, 2 ** k - 1)
    return u.astype(np.int64), (u - half) * step


def cost(u, k, b):
    nb, n = u.shape
    idx = (u + (np.arange(nb) << k)[:, None]).reshape(-1)
    cnt = np.bincount(idx, minlength=nb << k).reshape(nb, 2 ** k).astype(np.float64)
    p = cnt / n
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -(np.where(cnt > 0, cnt * np.log2(p), 0)).sum(1)
    table = np.where(cnt >= 128, 2, 1).sum(1)
    stream = np.ceil(ent / 16) * 2
    return 43 + n // b + table + 16 + stream


def ecsq(bl, k, b, slot, rot, mode="blk", it=22):
    """Rate-controlled uniform levels. mode blk: one step for the whole 4096 block; sub: t x
    each sub-block's RMS; hyb: one step, raised in a sub-block where it would clip."""
    y = rotate(bl, b) if rot else bl
    nb = len(y)
    sub = y.reshape(nb, -1, b)
    top = 2 ** (k - 1) - 0.5  # largest level in steps
    noclip = np.abs(sub).max(2) / top  # per sub-block step that clips nothing
    if mode == "sub":
        ref = np.maximum(np.sqrt((sub ** 2).mean(2)), 1e-30)
    else:
        ref = np.maximum(np.repeat(np.sqrt((y ** 2).mean(1, keepdims=True)), sub.shape[1], axis=1), 1e-30)

    def steps(t):
        s = ref * 2 ** t
        if mode == "hyb":
            s = np.maximum(s, noclip)
        return np.repeat(np.maximum(s, 1e-30), b, axis=1)

    # never finer than the step at which the block's largest sub-block clips nothing
    # (finer only clips: the budget is not binding there)
    floor_t = np.log2(np.maximum(noclip.max(1, keepdims=True), 1e-30) / ref.max(1, keepdims=True)) if mode != "sub" \
        else np.log2(np.maximum((noclip / ref).max(1, keepdims=True), 1e-30))
    lo = floor_t - 1e-9
    hi = np.maximum(floor_t, 4.0) + 0.0
    u, _ = quant(y, steps(lo), k)
    ok_lo = (cost(u, k, b) <= slot)[:, None]
    for _ in range(it):
        mid = (lo + hi) / 2
        u, _ = quant(y, steps(mid), k)
        ok = (cost(u, k, b) <= slot)[:, None]
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    hi = np.where(ok_lo, floor_t, hi)
    u, yq = quant(y, steps(hi), k)
    by = cost(u, k, b)
    out = rotate(yq, b, inverse=True) if rot else yq
    return out, by


def rust_sweep(binary, bl, slot, bits, block_log2, rotate="1", lanes="2"):
    import json
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        bl.astype("<f4").tofile(f"{d}/in.f32")
        r = subprocess.run([binary, f"{d}/in.f32", f"{d}/out.f32", str(slot), bits, block_log2, rotate, lanes],
                           check=True, capture_output=True, text=True)
        out = np.fromfile(f"{d}/out.f32", "<f4").reshape(bl.shape)
    return out, json.loads(r.stdout)


def recall(q, exact, dec):
    from emb_eval import recall as r
    return r(q, exact, dec)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="tokens,words,weights")
    ap.add_argument("--tiers", default="2,3")
    ap.add_argument("--configs", default="6:64:r:blk,6:1024:r:blk,6:64:r:sub,5:64:r:blk,6:1024:u:blk")
    ap.add_argument("--rust", default="", help="the ecsq_sweep example: run the real encoder "
                    "(configs BITS:BLOCK_LOG2) instead of the numpy model")
    a = ap.parse_args()
    for s in a.sets.split(","):
        if s == "tokens":
            from emb_eval import token_embeddings
            e = token_embeddings()
        elif s == "words":
            from minilm import load_weights
            w = load_weights()
            e = next(v for kk, v in w.items() if "word_embeddings" in kk).astype(np.float32)
            e /= np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
            e = e[np.random.default_rng(14).permutation(len(e))]
        else:
            from minilm import load_weights, weight_matrices
            mats = weight_matrices(load_weights())
            e = None
        if e is not None:
            q, db = e[:1000], np.ascontiguousarray(e[1000:])
            exact = q @ db.T
            bl = blocks_of(db)
        else:
            bl = np.concatenate([blocks_of(m) for m in mats.values()])
        for tier in [int(t) for t in a.tiers.split(",")]:
            for c in a.configs.split(","):
                if a.rust:
                    out, bv = rust_sweep(a.rust, bl, SLOT[tier], *c.split(":"))
                    err = np.linalg.norm(out - bl) / np.linalg.norm(bl)
                    line = f"{s} tier {tier} rust k={c}: b/v {bv['bits_per_value']:.3f} missed {bv['missed']} ({bv['seconds']:.0f}s) rel RMSE {err * 100:.3f}%"
                    if e is not None:
                        d = out.reshape(-1)[:db.size].reshape(db.shape)
                        r0, r4 = recall(q, exact, d)
                        line += f" recall@10 {r0:.4f} 4x {r4:.4f}"
                    print(line, flush=True)
                    continue
                k, b, r, mode = c.split(":")
                k, b = int(k), int(b)
                out, by = ecsq(bl, k, b, SLOT[tier], r == "r", mode)
                bv = by.sum() * 8 / bl.size
                err = np.linalg.norm(out - bl) / np.linalg.norm(bl)
                line = f"{s} tier {tier} k={k} b={b} {'rot' if r == 'r' else 'unrot'} {mode}: b/v {bv:.3f} rel RMSE {err * 100:.3f}%"
                if e is not None:
                    d = out.reshape(-1)[:db.size].reshape(db.shape)
                    r0, r4 = recall(q, exact, d)
                    line += f" recall@10 {r0:.4f} 4x {r4:.4f}"
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
