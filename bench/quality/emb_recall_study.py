"""numpy study (session 13, emb-recall): what limits raw recall@10 of quantized embedding
tables at the store's tier budgets, and which scalar-code change could move it.

Sets (the same rows, queries and recall code as `emb_eval.py`): SmolLM2's token table
(48,152 x 576 database rows, L2-normalised) and all-MiniLM-L6-v2's word table (29,522 x
384, held out). Each database is flattened and cut into the store's 4096-value blocks.

Model of the bytes (as `ecsq_study.py`, one rANS lane as the store writes): per block 43
header/side bytes + the scale side data + the frequency table (one varint per symbol: 1
byte below a count of 128, else 2) + 4 state bytes + the order-0 entropy of the codes
rounded up to 16-bit words. Rate control: per block, bisection on the step for the
finest step whose bytes fit the slot (4224 / 2688 / 1728 bytes: 8.25 / 5.25 / 3.375 b/v;
`--slot3 1792` for 3.5).

Candidates (`--configs`, comma-separated):
* `blk`: the product's ECSQ (session 12): rotated blocks of 1024, one step per 4096-value
  block, k-bit alphabet (6 at tier 2, 5 at tier 3, 8 at tier 1), 1 scale byte per 1024;
* `row`: one step per row (step = c x the RMS of the row's part inside the block),
  rotated per row in blocks of 64 (token rows of 576) / 128 (word rows of 384); side data
  2 bytes (f16) per row part;
* `rowg`: `row`, then each row part's decoding rescaled so <x, x_hat> = |x|^2 (the
  RaBitQ-style unbiased inner-product estimator, folded into the stored RMS);
* `cblk` / `crow`: `blk` / `row` on the rows minus the table's mean row (stored once per
  tensor: 576 f32, +0.0001 b/v), the mean added back on decode;
* `noise`: no code: isotropic Gaussian noise of relative RMSE `--noise` per row, the
  recall any code with noise-like error reaches at that error.

    OPENBLAS_NUM_THREADS=1 bench/quality/.venv/bin/python bench/quality/emb_recall_study.py \
        [--sets tokens,words] [--tiers 1,2,3] [--configs blk,row,rowg,cblk,crow]
"""
from __future__ import annotations

import argparse
import sys
import time
import types

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
try:  # the study needs only numpy; emb_eval/round3 import the package at top level
    import tensorvault  # noqa: F401
except ImportError:
    sys.modules["tensorvault"] = types.ModuleType("tensorvault")
from emb_eval import recall, token_embeddings, word_embeddings  # noqa: E402
from round3 import _hadamard, _signs  # noqa: E402

BLOCK = 4096
SLOT = {1: 4224, 2: 2688, 3: 1728}
BITS = {1: 8, 2: 6, 3: 5}
GAIN_HEADER = 0  # bytes of the gain envelope's header (--gain-header)
GAIN_BYTES = 2  # bytes per gain (--gain-bytes: 2 = f16, 1 = 1 + (c - 128) / 2048)
SEED = 0x54565133


def rot_matrix(b: int) -> np.ndarray:
    return ((_hadamard(b) * _signs(SEED, b)[None, :]) / np.sqrt(b)).astype(np.float32)


def rotate(flat: np.ndarray, b: int, inverse: bool = False) -> np.ndarray:
    h = rot_matrix(b)
    y = flat.reshape(-1, b)
    return (y @ h if inverse else y @ h.T).reshape(flat.shape)


def code_bytes(u: np.ndarray, k: int) -> np.ndarray:
    """Table + state + stream bytes of each block's codes (rows of `u`)."""
    nb = len(u)
    idx = (u + (np.arange(nb) << k)[:, None]).reshape(-1)
    cnt = np.bincount(idx, minlength=nb << k).reshape(nb, 2 ** k).astype(np.float64)
    p = cnt / u.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -(np.where(cnt > 0, cnt * np.log2(p), 0)).sum(1)
    table = np.where(cnt >= 128, 2, 1).sum(1)
    return 43 + table + 4 + np.ceil(ent / 16) * 2


def ecsq(y: np.ndarray, ref: np.ndarray, side: np.ndarray, k: int, slot: int, it: int = 24):
    """Mid-rise uniform k-bit levels, step = ref * 2^t, t bisected per block (row of `y`)
    for the finest step whose bytes (side + code_bytes) fit `slot`."""
    half = (2 ** k - 1) / 2
    ref = np.maximum(ref, 1e-30)

    def q(t):
        s = ref * 2.0 ** t
        u = np.clip(np.floor(y / s + half + 0.5), 0, 2 ** k - 1)
        return u.astype(np.int64), (u - half) * s

    # never finer than the step at which nothing clips (finer only clips more: with an
    # 8-bit alphabet a step that clips everything is "cheap" but useless)
    top = (np.abs(y) / ref).max(1, keepdims=True)
    lo = np.log2(np.maximum(top / half, 1e-30))
    u, _ = q(lo)
    ok_lo = (side + code_bytes(u, k) <= slot)[:, None]
    hi = np.maximum(lo, 6.0)
    for _ in range(it):
        mid = (lo + hi) / 2
        u, _ = q(mid)
        ok = (side + code_bytes(u, k) <= slot)[:, None]
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    hi = np.where(ok_lo, lo * 0 + np.log2(np.maximum(top / half, 1e-30)), hi)
    u, yq = q(hi)
    return yq, side + code_bytes(u, k)


def parts_of(nb: int, d: int) -> np.ndarray:
    """Row parts (rows or pieces of rows) in each 4096-value block."""
    first = np.arange(nb) * BLOCK // d
    last = (np.arange(nb) * BLOCK + BLOCK - 1) // d
    return (last - first + 1).astype(np.float64)


def apply_gains(ref: np.ndarray, target: np.ndarray, out: np.ndarray, nb: int, d: int, gain_bytes: int) -> np.ndarray:
    """`out` (the decoding of `target`, both flat over `nb` blocks of rows of `d`) with each
    row part rescaled by the gain g that makes `<ref, g out> = <ref, target>`: the v6
    envelope's unbiased gain when `ref` is `target` (`<x, g x_hat> = |x|^2`); with `ref` the
    original rows and `target` the centred ones, the gain against the original row."""
    rid = np.arange(nb * BLOCK) // d
    part = rid - rid.reshape(nb, BLOCK)[:, :1].repeat(BLOCK, 1).reshape(-1)
    key = (np.arange(nb * BLOCK) // BLOCK) * (BLOCK // d + 2) + part
    r = ref.astype(np.float64)
    dot = np.bincount(key, weights=r * out)
    nx = np.bincount(key, weights=r * target.astype(np.float64))
    g = np.where(dot > 0, nx / np.maximum(dot, 1e-300), 1.0)
    if gain_bytes == 2:
        g = g.astype(np.float16).astype(np.float64)  # an f16 gain per row part
    else:  # one byte: g = 1 + (c - 128) / 2048
        g = 1 + np.clip(np.round((g - 1) * 2048), -128, 127) / 2048
    return (out * g[key]).astype(np.float32)


def run_config(cfg: str, db: np.ndarray, tier: int, slot: int, mean: np.ndarray, noise: float, rng):
    n, d = db.shape
    k = BITS[tier]
    if cfg == "noise":
        e = rng.standard_normal(db.shape).astype(np.float32) * (noise / np.sqrt(d))
        return db + e, float("nan")
    centered = cfg.startswith("c")
    x = db - mean if centered else db
    flat = x.reshape(-1)
    pad = (-len(flat)) % BLOCK
    flat = np.concatenate([flat, np.zeros(pad, np.float32)])
    nb = len(flat) // BLOCK
    base = cfg[1:] if centered else cfg
    gain = base.endswith("g") or base.endswith("gv3")
    if base in ("blk", "blkg"):
        b = 1024
        y = rotate(flat, b).reshape(nb, BLOCK)
        ref = np.sqrt((y ** 2).mean(1, keepdims=True))
        side = np.full(nb, BLOCK // b, np.float64)
        if gain:  # the gain envelope: header + one gain per row part
            side = side + GAIN_HEADER + GAIN_BYTES * parts_of(nb, d)
        yq, by = ecsq(y, ref, side, k, slot)
        out = rotate(yq.reshape(-1), b, inverse=True)
    else:
        b = 64 if d % 128 else 128
        y = rotate(flat, b).reshape(nb, BLOCK)
        # row parts: value i of block j belongs to row (j*BLOCK + i) // d
        rid = np.arange(nb * BLOCK) // d
        part = rid - rid.reshape(nb, BLOCK)[:, :1].repeat(BLOCK, 1).reshape(-1)  # row within block
        key = (np.arange(nb * BLOCK) // BLOCK) * (BLOCK // d + 2) + part
        cnt = np.bincount(key)
        ss = np.bincount(key, weights=(y.reshape(-1).astype(np.float64)) ** 2)
        rms = np.sqrt(ss / np.maximum(cnt, 1))
        ref = rms[key].reshape(nb, BLOCK)
        # f16 per row part, or (`gv3`) a v3 segment's wide scales: f16 per rotation block
        side = np.full(nb, 2.0 * BLOCK / b) if base.endswith("v3") else 2.0 * parts_of(nb, d)
        yq, by = ecsq(y, ref, side, k, slot)
        out = rotate(yq.reshape(-1), b, inverse=True)
    if gain:
        out = apply_gains(flat, flat, out, nb, d, GAIN_BYTES)
    dec = out[: n * d].reshape(n, d)
    if centered:
        dec = dec + mean
    return dec, float(by.sum() * 8 / (n * d))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="tokens,words")
    ap.add_argument("--tiers", default="1,2,3")
    ap.add_argument("--configs", default="blk,row,rowg,cblk,crow")
    ap.add_argument("--noise", type=float, default=0.1, help="relative RMSE of the `noise` config")
    ap.add_argument("--slot3", type=int, default=1728)
    ap.add_argument("--gain-header", type=int, default=0)
    ap.add_argument("--gain-bytes", type=int, default=2, choices=(1, 2))
    a = ap.parse_args()
    SLOT[3] = a.slot3
    global GAIN_HEADER, GAIN_BYTES
    GAIN_HEADER, GAIN_BYTES = a.gain_header, a.gain_bytes
    rng = np.random.default_rng(1)
    for s in a.sets.split(","):
        e = token_embeddings() if s == "tokens" else word_embeddings()
        q, db = e[:1000], np.ascontiguousarray(e[1000:])
        exact = q @ db.T
        mean = db.mean(0).astype(np.float32)
        print(f"{s}: {db.shape}, mean row carries {float(mean @ mean) / float((db * db).sum(1).mean()):.1%} of the energy", flush=True)
        for tier in [int(t) for t in a.tiers.split(",")]:
            for c in a.configs.split(","):
                t0 = time.time()
                dec, bv = run_config(c, db, tier, SLOT[tier], mean, a.noise, rng)
                err = float(np.linalg.norm(dec - db) / np.linalg.norm(db))
                r0, r4 = recall(q, exact, dec)
                print(f"  {s} tier {tier} {c:5s}: b/v {bv:.3f} rel RMSE {err * 100:.3f}% recall@10 {r0:.4f} 4x {r4:.4f} ({time.time() - t0:.0f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
