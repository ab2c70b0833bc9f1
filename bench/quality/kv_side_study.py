"""Issue 23 items 2/3 (session 11): how KV side data (each group's min and scale) should be
coded. A numpy study, not the product: every layer's keys (before RoPE) and values go
through a transcription of the store's KV layouts with the side data coded each way,
then the model reads them back (perplexity on held-out texts).

    bench/quality/.venv/bin/python bench/quality/kv_side_study.py \
        [--texts compound,formatstrings] [--tokens 1536] [--configs NAME,...]
        [--rmse [--ecsq]]

`--rmse`: K/V relative RMSE only (one forward pass per text, no perplexity); with
`--ecsq`, the entropy-coded size (order-0 entropy of each segment's codes) and error of
value and key codings with wider-than-optimal uniform steps (bench/RESULTS.md, "Session
11: kv-side").

Layouts (blocks of 256 tokens x 64 channels, token 0 of block 0 kept as f16):
* tier 2: keys and values 5-bit, per channel over 128 tokens (codec 2);
* tier 3: keys 4-bit per channel over 128 tokens, values rotated per token, 3-bit
  Lloyd-Max with a log-coded RMS scale (codec 4).
Side-data codings (per block segment):
* `v2`: scale and min as one byte each against segment-wide units (TQTC v2);
* `exact`: f32 min and scale;
* `f16`: f16 min (rounded down) and f16 scale (rounded up): 32 bits a group;
* `linN`: v2 with N-bit codes instead of 8;
* `f16m+logN`: f16 min, scale as an N-bit log code (2^(1/32) steps) against the segment's
  largest scale;
* `chN`: per-channel f16 units (the channel's smallest min, largest scale) with N-bit
  linear codes per group.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import types  # noqa: E402
sys.modules.setdefault("tensorvault", types.ModuleType("tensorvault"))  # the study needs no package
from common import text  # noqa: E402
from kv_eval import nll_ppl  # noqa: E402
from round3 import rotated_np  # noqa: E402

BLOCK_TOKENS = 256


def f16_down(x):
    h = x.astype(np.float16)
    bad = h.astype(np.float32) > x
    h[bad] = np.nextafter(h[bad], np.float16(-np.inf))
    return h.astype(np.float32)


def f16_up(x):
    h = x.astype(np.float16)
    bad = h.astype(np.float32) < x
    h[bad] = np.nextafter(h[bad], np.float16(np.inf))
    return h.astype(np.float32)


def code_side(lo, hi, levels, side):
    """Decoded (min, scale) of groups with ranges [lo, hi] (1-D arrays of one segment),
    and the side bits per group."""
    if side == "exact":
        return lo, (hi - lo) / levels, 64
    if side == "f16":
        m = f16_down(lo)
        return m, f16_up((hi - m) / levels), 32
    if side.startswith("lin"):
        nb = int(side[3:])
        top = (1 << nb) - 1
        base, unit = lo.min(), (lo.max() - lo.min()) / top
        mc = np.floor((lo - base) / unit) if unit > 0 else np.zeros_like(lo)
        m = base + unit * np.clip(mc, 0, top)
        need = (hi - m) / levels
        su = need.max() / top
        sc = np.ceil(need / su) if su > 0 else np.zeros_like(need)
        return m, su * np.clip(sc, 0, top), 2 * nb
    if side.startswith("f16m+log"):
        nb = int(side[8:])
        top = (1 << nb) - 1
        m = f16_down(lo)
        need = (hi - m) / levels
        smax = need.max()
        # s = smax * 2^((c - top) / 32), c rounded up; c = 0 means 0.
        c = np.ceil(top + 32 * np.log2(np.maximum(need, 1e-30) / smax))
        c = np.clip(c, 1, top)
        s = np.where(need > 0, smax * 2.0 ** ((c - top) / 32), 0.0)
        return m, s, 16 + nb
    raise ValueError(side)


def columns(x, bits, g, side, sink):
    """Round-trip one block [t, hd] per channel over g tokens."""
    levels = (1 << bits) - 1
    out = x.copy()
    start = 1 if sink else 0
    q = x[start:]
    n = q.shape[0]
    lo_l, hi_l, sl = [], [], []
    for r in range(0, n, g):
        blk = q[r:r + g]
        lo_l.append(blk.min(0))
        hi_l.append(blk.max(0))
        sl.append(slice(r, r + g))
    lo, hi = np.concatenate(lo_l), np.concatenate(hi_l)
    if side.startswith("ch"):
        # Per-channel f16 units, N-bit codes per group.
        nb = int(side[2:])
        top = (1 << nb) - 1
        hd = x.shape[1]
        L, H = lo.reshape(-1, hd), hi.reshape(-1, hd)
        mlo = f16_down(L.min(0))
        mhi = f16_up(L.max(0))
        mu = (mhi - mlo) / top
        mc = np.where(mu > 0, np.floor((L - mlo) / np.where(mu > 0, mu, 1)), 0)
        M = mlo + mu * np.clip(mc, 0, top)
        need = (H - M) / levels
        su = f16_up(need.max(0) / top)
        sc = np.where(su > 0, np.ceil(need / np.where(su > 0, su, 1)), 0)
        S = su * np.clip(sc, 0, top)
        m, s = M.reshape(-1), S.reshape(-1)
    else:
        m, s, _ = code_side(lo, hi, levels, side)
    hd = x.shape[1]
    for i, sli in enumerate(sl):
        mm, ss = m[i * hd:(i + 1) * hd], s[i * hd:(i + 1) * hd]
        inv = np.where(ss > 0, 1 / np.where(ss > 0, ss, 1), 0)
        u = np.clip(np.round((q[sli] - mm) * inv), 0, levels)
        out[start:][sli] = mm + ss * u
    if sink:
        out[0] = x[0].astype(np.float16).astype(np.float32)
    return out


def tensor_columns(x, bits, g, side):
    out = np.empty_like(x)
    for b0 in range(0, x.shape[0], BLOCK_TOKENS):
        out[b0:b0 + BLOCK_TOKENS] = columns(x[b0:b0 + BLOCK_TOKENS], bits, g, side, b0 == 0)
    return out


def values_rot(x, wide):
    out = np.empty_like(x)
    for b0 in range(0, x.shape[0], BLOCK_TOKENS):
        blk = x[b0:b0 + BLOCK_TOKENS]
        out[b0:b0 + BLOCK_TOKENS] = rotated_np(blk, 3, True, False, True, sink=b0 == 0) if not wide \
            else rotated_wide(blk, b0 == 0)
    return out


def rotated_wide(x, sink):
    """rotated_np with an f16 RMS scale per token instead of the log byte."""
    from round3 import _hadamard, _levels, _signs
    b = x.shape[1]
    out = x.copy()
    start = 1 if sink else 0
    out[:start] = x[:start].astype(np.float16).astype(np.float32)
    m = (_hadamard(b) * _signs(0x54565133, b)[None, :]) / np.sqrt(b)
    y = x[start:] @ m.T
    lv = _levels(3, False)
    s = np.sqrt((y ** 2).mean(1)).astype(np.float16).astype(np.float32)
    mids = (lv[1:] + lv[:-1]) / 2
    inv = np.where(s > 0, 1 / np.maximum(s, 1e-38), 0.0)[:, None]
    z = lv[np.searchsorted(mids, y * inv, side="right")] * s[:, None]
    out[start:] = z @ m
    return out


CONFIGS = {
    # name: (key bits, key group, key side, value mode, value side)
    "t2 v2": (5, 128, "v2", "cols5", "v2"),
    "t2 exact": (5, 128, "exact", "cols5", "exact"),
    "t2 f16": (5, 128, "f16", "cols5", "f16"),
    "t2 lin10": (5, 128, "lin10", "cols5", "lin10"),
    "t2 lin11": (5, 128, "lin11", "cols5", "lin11"),
    "t2 f16m+log8": (5, 128, "f16m+log8", "cols5", "f16m+log8"),
    "t2 ch8": (5, 128, "ch8", "cols5", "ch8"),
    "t2 k256 f16": (5, 256, "f16", "cols5", "f16"),
    "t2 k256 f16 v256 f16": (5, 256, "f16", "cols5-256", "f16"),
    "t3 v2": (4, 128, "v2", "rot", None),
    "t3 exact keys": (4, 128, "exact", "rot", None),
    "t3 f16 keys": (4, 128, "f16", "rot", None),
    "t3 lin11 keys": (4, 128, "lin11", "rot", None),
    "t3 f16 keys, wide V": (4, 128, "f16", "rotwide", None),
    "t3 exact keys, wide V": (4, 128, "exact", "rotwide", None),
    "t3 V uniform 4-bit x1.55": (4, 128, "v2", "ecsq4x1.55", None),
    "t3 V uniform 4-bit x1.4": (4, 128, "v2", "ecsq4x1.4", None),
}


def make_hook(m, cfg, rope=True):
    kb, kg, kside, vmode, vside = cfg

    def q(x, side):
        return np.stack([tensor_columns(x[h].astype(np.float32), kb, kg, side) for h in range(x.shape[0])])

    def hook(layer, k, v):
        kk = q(k, kside) if kside != "v2" else np.stack(
            [tensor_columns(k[h].astype(np.float32), kb, kg, "lin8") for h in range(k.shape[0])])
        if vmode.startswith("cols"):
            g = 256 if vmode.endswith("-256") else 128
            vs = "lin8" if vside == "v2" else vside
            vv = np.stack([tensor_columns(v[h].astype(np.float32), 5, g, vs) for h in range(v.shape[0])])
        elif vmode.startswith("ecsq"):
            bits, mult = int(vmode[4]), float(vmode[6:])
            vv = np.stack([values_ecsq_tensor(v[h].astype(np.float32), bits, mult) for h in range(v.shape[0])])
        else:
            vv = np.stack([values_rot(v[h].astype(np.float32), vmode == "rotwide") for h in range(v.shape[0])])
        if rope:
            kk = m.rope(kk.astype(np.float32), 0)
        return kk.astype(np.float16), vv.astype(np.float16)

    hook.pre_rope = True
    return hook


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", default="compound,formatstrings")
    ap.add_argument("--tokens", type=int, default=1536)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--rmse", action="store_true",
                    help="only K/V relative RMSE (keys before RoPE) over the whole cache: no perplexity")
    ap.add_argument("--ecsq", action="store_true", help="with --rmse: the entropy-coded level table")
    a = ap.parse_args()
    from smollm import SmolLM
    m = SmolLM()
    if a.rmse:
        for name in a.texts.split(","):
            ids = m.encode(text(name))[:a.tokens]
            K, V = {}, {}

            def cap(layer, k, v):
                K[layer], V[layer] = k, v
                return m.rope(k.astype(np.float32), 0).astype(np.float16), v

            cap.pre_rope = True
            m.forward(ids, kv_hook=cap)
            print(f"== {name}: relative RMSE of pre-RoPE K / V", flush=True)
            if a.ecsq:
                ecsq_table(K, V)
                continue
            for c in a.configs.split(","):
                hook = make_hook(m, CONFIGS[c], rope=False)
                ek = nk = ev = nv = 0.0
                for layer in K:
                    kk, vv = hook(layer, K[layer], V[layer])
                    k32, v32 = K[layer].astype(np.float32), V[layer].astype(np.float32)
                    ek += float(((kk.astype(np.float32) - k32) ** 2).sum())
                    nk += float((k32 ** 2).sum())
                    ev += float(((vv.astype(np.float32) - v32) ** 2).sum())
                    nv += float((v32 ** 2).sum())
                print(f"   {c:28s} K {100 * (ek / nk) ** 0.5:6.3f}%  V {100 * (ev / nv) ** 0.5:6.3f}%", flush=True)
        return
    for name in a.texts.split(","):
        ids = m.encode(text(name))[:a.tokens]
        ref = nll_ppl(m.forward(ids), ids)
        print(f"== {name}: ref ppl {ref:.4f}", flush=True)
        for c in a.configs.split(","):
            t0 = time.time()
            ppl = nll_ppl(m.forward(ids, kv_hook=make_hook(m, CONFIGS[c])), ids)
            print(f"   {c:28s} {100 * (ppl / ref - 1):+.2f}%  ({time.time() - t0:.0f}s)", flush=True)



# ---- entropy-coded levels (ECSQ): more codes, a coarser step, rANS does the rest ----

def values_ecsq_tensor(x, bits, mult):
    out = np.empty_like(x)
    for b0 in range(0, x.shape[0], BLOCK_TOKENS):
        out[b0:b0 + BLOCK_TOKENS] = values_ecsq(x[b0:b0 + BLOCK_TOKENS], bits, mult, b0 == 0)[0]
    return out


def entropy_bits(codes: np.ndarray) -> float:
    """Order-0 entropy (bits) of one segment's codes: what a static per-segment rANS
    table reaches, before its table bytes."""
    _, counts = np.unique(codes, return_counts=True)
    p = counts / counts.sum()
    return float(-(counts * np.log2(p)).sum())


def values_ecsq(x, bits, mult, sink, levelset="uniform"):
    """Rotated per token, scale = mult * RMS (log byte), nearest of the 2^bits uniform
    (or Lloyd-Max) levels. Returns (decoded, payload bits: entropy + scales + sink)."""
    from round3 import _hadamard, _levels, _signs
    b = x.shape[1]
    out = x.copy()
    start = 1 if sink else 0
    out[:start] = x[:start].astype(np.float16).astype(np.float32)
    m = (_hadamard(b) * _signs(0x54565133, b)[None, :]) / np.sqrt(b)
    y = x[start:] @ m.T
    lv = _levels(bits, levelset == "uniform")
    want = np.sqrt((y ** 2).mean(1)) * mult
    base = want.max() / 2 ** (255 / 16)
    code = np.clip(np.round(16 * np.log2(np.maximum(want, 1e-38) / base)), 1, 255)
    s = np.where(want > 0, base * 2 ** (code / 16), 0.0).astype(np.float32)
    mids = (lv[1:] + lv[:-1]) / 2
    inv = np.where(s > 0, 1 / np.maximum(s, 1e-38), 0.0)[:, None]
    c = np.searchsorted(mids, y * inv, side="right")
    out[start:] = (lv[c] * s[:, None]) @ m
    return out, entropy_bits(c) + 8 * len(s) + 16 * start * b + 32 * 8


def keys_ecsq(x, bits, g, span, sink):
    """Per channel over g tokens (v2 asymmetric), but the scale is range / span with
    `span` <= 2^bits - 1 (a coarser step; codes clamp at 2^bits - 1): (decoded, bits)."""
    out = x.copy()
    start = 1 if sink else 0
    q = x[start:]
    top = (1 << bits) - 1
    allc = []
    for r in range(0, q.shape[0], g):
        blk = q[r:r + g]
        lo, hi = blk.min(0), blk.max(0)
        s = (hi - lo) / span
        inv = np.where(s > 0, 1 / np.where(s > 0, s, 1), 0)
        # centre the span in the range: min = mid - s * span / 2
        mn = (lo + hi) / 2 - s * span / 2
        u = np.clip(np.round((blk - mn) * inv), 0, top)
        out[start:][r:r + g] = mn + s * u
        allc.append(u)
    if sink:
        out[0] = x[0].astype(np.float16).astype(np.float32)
    ngroups = sum(a.shape[1] for a in allc)
    return out, entropy_bits(np.concatenate([a.ravel() for a in allc])) + 32 * ngroups + 16 * start * x.shape[1] + 256


def ecsq_table(K, V):
    """Rate (bits/value, entropy-coded) and relative RMSE of each value / key coding."""
    def run(fn, T):
        e = n = bits = vals = 0.0
        for layer in T:
            for h in range(T[layer].shape[0]):
                x = T[layer][h].astype(np.float32)
                for b0 in range(0, x.shape[0], BLOCK_TOKENS):
                    blk = x[b0:b0 + BLOCK_TOKENS]
                    d, bb = fn(blk, b0 == 0)
                    e += float(((d - blk) ** 2).sum())
                    n += float((blk ** 2).sum())
                    bits += bb
                    vals += blk.size
        return bits / vals, (e / n) ** 0.5
    rows = [("V LM 3-bit", lambda b, s: values_ecsq(b, 3, 1.0, s, "lm"), V)]
    for bits, mults in ((4, (1.0, 1.6, 1.9, 2.2, 2.5)), (5, (3.0, 4.0, 5.0))):
        for mu in mults:
            rows.append((f"V uniform {bits}-bit x{mu}", lambda b, s, bits=bits, mu=mu: values_ecsq(b, bits, mu, s), V))
    rows.append(("V LM 4-bit", lambda b, s: values_ecsq(b, 4, 1.0, s, "lm"), V))
    rows.append(("V LM 5-bit", lambda b, s: values_ecsq(b, 5, 1.0, s, "lm"), V))
    for bits, span in ((4, 15), (5, 31), (5, 24), (5, 20), (6, 40)):
        rows.append((f"K {bits}-bit span {span} g128", lambda b, s, bits=bits, span=span: keys_ecsq(b, bits, 128, span, s), K))
    for label, fn, T in rows:
        r, e = run(fn, T)
        print(f"   {label:28s} {r:6.3f} b/v (entropy-coded)  rel RMSE {100 * e:6.3f}%", flush=True)


if __name__ == "__main__":
    main()
