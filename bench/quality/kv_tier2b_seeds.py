"""How much of one window's dPPL is the realization of the codes (session 13, kv-tier2b).

    OPENBLAS_NUM_THREADS=1 bench/quality/.venv/bin/python bench/quality/kv_tier2b_seeds.py \
        --text apache2 --offset 0 --seeds 1,2,3,4 [--step 16] [--json out.json]

Keys go through the product (`tensorvault.KvCache`, codec 4 + entropy + ecsq, tier 2:
5-bit per-channel groups, identical with and without `ecsq_tier2`). Values are coded in
numpy the way `ecsq_tier2` codes them (quant.md §10, store.md "Codec 4, KV kinds"): each
token's 64 values rotated by a randomized Hadamard transform, the token's scale = its
RMS after rotation x step/16, rounded to the 2^(1/16) grid of its 256-token block,
nearest of the 64 uniform levels (6-bit table), the block's first row (token 0 only) kept
as f16. Only the rotation's random signs change with the seed: same statistics, another
realization of the errors. Row "product" is the store's own ecsq_tier2 values, for
reference; "groups" (`--groups`) the store's 5-bit groups for keys and values. Besides the
perplexity change, the mean KL divergence per scored token between the f16 cache's
next-token distribution and the quantized one (never negative; less noisy). Errors compound across layers as in `round3.py` (the hook round-trips the
cache each layer computes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import text  # noqa: E402
from round3 import SMOLLM2_GGUF_ROPE, KvCacheConfig, kl_tokens, log_probs, nll_tokens  # noqa: E402

STEP6 = 0.10406303  # UNIFORM_6's spacing (levels_table.rs)
LEVELS6 = (np.arange(64) - 31.5) * STEP6
BLOCK = 256


def hadamard(n: int) -> np.ndarray:
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


def code_values(v: np.ndarray, signs: np.ndarray, step16: int) -> np.ndarray:
    """[T, hd] f16 values -> decoded f32, as ecsq_tier2 with the given rotation signs."""
    x = v.astype(np.float32)
    out = np.empty_like(x)
    H = hadamard(x.shape[1]).astype(np.float32)
    for b0 in range(0, x.shape[0], BLOCK):
        blk = x[b0:b0 + BLOCK]
        y = (blk * signs) @ H.T
        want = np.sqrt((y.astype(np.float64) ** 2).mean(1)) * step16 / 16
        smax = want.max()
        base = smax / (32768.0 * 2 ** (15 / 16))
        with np.errstate(divide="ignore"):
            c = np.clip(np.round(np.log2(np.where(want > 0, want / base, 1.0)) * 16), 1, 255)
        s = np.where(want > 0, base * 2 ** (c / 16), 0.0).astype(np.float32)
        inv = np.where(s > 0, 1 / np.where(s > 0, s, 1), 0)
        q = np.clip(np.round(y * inv[:, None] / STEP6 + 31.5), 0, 63)
        z = LEVELS6[q.astype(int)].astype(np.float32) * s[:, None]
        dec = (z @ H) * signs
        if b0 == 0:
            dec[0] = blk[0].astype(np.float16).astype(np.float32)
        out[b0:b0 + BLOCK] = dec
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", default="apache2")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=1536)
    ap.add_argument("--seeds", default="1,2,3,4")
    ap.add_argument("--step", type=int, default=16)
    ap.add_argument("--groups", action="store_true",
                    help="also the 5-bit groups (the collection without ecsq_tier2), keys and values")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    from smollm import SmolLM
    m = SmolLM()
    ids = m.encode(text(a.text))[a.offset:a.offset + a.tokens]
    ref_logits = m.forward(ids)
    ref = nll_tokens(ref_logits, ids)
    ref_lp = log_probs(ref_logits)
    del ref_logits
    keys = KvCacheConfig("keys", 2, 4, SMOLLM2_GGUF_ROPE, True, "extent", ecsq=True)
    prod = KvCacheConfig("product", 2, 4, SMOLLM2_GGUF_ROPE, True, "extent", ecsq=True, ecsq_tier2=True)
    res = {"text": a.text, "offset": a.offset, "ppl_ref": float(np.exp(ref.mean())), "runs": {}}
    runs = [("product", None)] + [(f"seed {s}", int(s)) for s in a.seeds.split(",") if s]
    if a.groups:
        runs.insert(0, ("groups", -1))
    for label, seed in runs:
        t0 = time.time()
        signs = None if seed is None or seed < 0 else \
            np.random.default_rng(seed).choice([-1.0, 1.0], m.hd).astype(np.float32)

        def hook(layer, k, v, seed=seed, signs=signs):
            c = prod if seed is None else keys
            kh, vh, _, _ = c.roundtrip_layer(m, layer, k, v)
            if signs is not None:
                vh = np.stack([code_values(v[h], signs, a.step) for h in range(m.n_kv)])
            return kh.astype(np.float16), vh.astype(np.float16)

        hook.pre_rope = True
        logits = m.forward(ids, kv_hook=hook)
        nll = nll_tokens(logits, ids)
        kl = float(kl_tokens(ref_lp, logits).mean())
        d = float((np.exp(nll.mean() - ref.mean()) - 1) * 100)
        res["runs"][label] = {"ppl_change_pct": d, "kl": kl}
        print(f"{a.text}@{a.offset} {label:8s}: {d:+.2f}%  KL {kl * 1e3:.3f} mnats/token  ({time.time() - t0:.0f}s)",
              file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
