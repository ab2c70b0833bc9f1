"""Would tier 2 do better spending its bits on keys? (session 13, kv-tier2b; numpy keys,
product values)

    OPENBLAS_NUM_THREADS=1 bench/quality/.venv/bin/python bench/quality/kv_tier2b_rebalance.py \
        --text apache2 --offset 0 [--divisors 31,40] [--json out.json]

Values come from the product: `KvCache(..., ecsq=True, ecsq_tier2=True)` at tier 2, in
slots (each token's step 20/16 of the optimal: ~5.14 b/v) or with extents (16/16: ~5.45).
Keys are coded in numpy like the store's tier 2 keys (before RoPE, per channel over
groups of 128 tokens inside 256-token blocks, the block-0 sink row as f16, min + code x
step) but with the step = range / D and a 6-bit alphabet: D = 31 is the store's 5-bit
step (a control), D = 40 a finer step whose codes the v5 envelope would entropy-code
(session 12's study: ~5.37 b/v). Key bits/value here = the order-0 entropy of each
256-token block's codes + 16 bits per group (the store's u8 min + u8 scale). Reported per
configuration: the perplexity change and the mean KL divergence per scored token from the
f16 cache (the lower-noise figure).
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

BLOCK, GROUP = 256, 128


def code_keys(k: np.ndarray, divisor: int):
    """[T, hd] pre-RoPE f16 keys -> (decoded f32, bits)."""
    x = k.astype(np.float32)
    out = x.copy()
    bits = 0.0
    for b0 in range(0, x.shape[0], BLOCK):
        codes = []
        for g0 in range(b0, min(b0 + BLOCK, x.shape[0]), GROUP):
            lo = g0 + 1 if g0 == 0 else g0  # the sink row stays f16
            grp = x[lo:g0 + GROUP]
            mn, mx = grp.min(0), grp.max(0)
            step = np.where(mx > mn, (mx - mn) / divisor, 1.0)
            c = np.clip(np.round((grp - mn) / step), 0, divisor)
            out[lo:g0 + GROUP] = mn + c * step
            codes.append(c.ravel())
            bits += 16 * x.shape[1]
        c = np.concatenate(codes)
        _, n = np.unique(c, return_counts=True)
        bits += float(-(n * np.log2(n / n.sum())).sum())
    bits += 16 * x.shape[1]  # the sink row
    return out, bits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", default="apache2")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=1536)
    ap.add_argument("--divisors", default="31,40")
    ap.add_argument("--allocs", default="slot,extent",
                    help="value layouts: slot (ecsq_tier2's 20/16 step), extent (16/16)")
    ap.add_argument("--offsets", default="", help="several windows (comma-separated) instead of --offset")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    from smollm import SmolLM
    m = SmolLM()
    res = {"text": a.text, "windows": {}}
    for off in ([int(x) for x in a.offsets.split(",")] if a.offsets else [a.offset]):
        res["windows"][off] = run_window(m, a, off)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


def run_window(m, a, offset: int):
    ids = m.encode(text(a.text))[offset:offset + a.tokens]
    ref_logits = m.forward(ids)
    ref = nll_tokens(ref_logits, ids)
    ref_lp = log_probs(ref_logits)
    del ref_logits
    res = {"offset": offset, "nll_ref_sum": float(ref.sum()), "scored": int(ref.size), "runs": {}}
    steps = {"slot": "20/16", "extent": "16/16"}
    for alloc in a.allocs.split(","):
        vstep = steps[alloc]
        vals = KvCacheConfig("v", 2, 4, SMOLLM2_GGUF_ROPE, True, alloc, ecsq=True, ecsq_tier2=True)
        for d in [int(x) for x in a.divisors.split(",")]:
            t0 = time.time()
            acc = {"kbits": 0.0, "kvals": 0}

            def hook(layer, k, v, d=d, vals=vals, acc=acc):
                _, vh, _, _ = vals.roundtrip_layer(m, layer, k, v)
                ks = []
                for h in range(m.n_kv):
                    kd, b = code_keys(k[h], d)
                    ks.append(kd)
                    acc["kbits"] += b
                    acc["kvals"] += k[h].size
                kh = m.rope(np.stack(ks)).astype(np.float16)
                return kh, vh.astype(np.float16)

            hook.pre_rope = True
            logits = m.forward(ids, kv_hook=hook)
            nll = nll_tokens(logits, ids)
            kl = float(kl_tokens(ref_lp, logits).mean())
            dp = float((np.exp(nll.mean() - ref.mean()) - 1) * 100)
            label = f"V {vstep} ({alloc}), K 6-bit range/{d}" if d != 31 else f"V {vstep} ({alloc}), K range/31"
            res["runs"][label] = {"ppl_change_pct": dp, "kl": kl, "k_bits": acc["kbits"] / acc["kvals"],
                                  "nll_sum": float(nll.sum())}
            print(f"{a.text}@{offset} {label:36s}: K {acc['kbits'] / acc['kvals']:.3f} b/v  {dp:+.2f}%  "
                  f"KL {kl * 1e3:.3f} mnats/token  ({time.time() - t0:.0f}s)", file=sys.stderr)
    return res


if __name__ == "__main__":
    sys.exit(main())
