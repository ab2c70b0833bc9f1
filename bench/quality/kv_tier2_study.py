"""Issue 23 items 2, 3, 6 (session 12, kv-tier2): what takes KV tier 2 to <= +0.5% and
tier 1 to <= +0.1% within their budgets. A numpy study, not the product: every layer's
keys (before RoPE) and values go through a transcription of candidate layouts, the model
reads them back (perplexity on held-out texts), and each candidate's size is the
entropy-coded size of its codes (order-0 entropy per 256-token segment, what the v5
envelope's static rANS reaches before its table) plus its side data.

    bench/quality/.venv/bin/python bench/quality/kv_tier2_study.py \
        [--texts apache2,compound,formatstrings,mpl2] [--tokens 1536] [--configs NAME,...]
        [--rmse]

`--rmse`: rate (bits/value) and K/V relative RMSE of every config over the whole cache
(one forward pass per text); otherwise perplexity change per config and text. The
perplexity hook hands every layer the codes of the clean forward's cache, so errors do
not compound across layers as in `round3.py` (whose hook quantizes what each layer
computes): its perplexity changes are lower bounds, for ranking only; the product's
(`round3.py --sections kvcache`) are the ones to quote (bench/RESULTS.md, "Session 12:
kv-tier2").

Candidates (blocks of 256 tokens x 64 channels, token 0 of block 0 kept as f16):
* `t2 today`: keys and values 5-bit per channel over 128 tokens (codec 2/4 tier 2);
* `t2 V ecsq6 xC`: values rotated per token (seeded Hadamard, as codec 4 tier 3), 6-bit
  uniform levels, step = C x the 6-bit table's step x the token's RMS (a log-coded byte),
  entropy-coded; keys as today;
* `t2 K6 spanS`: keys per channel over 128 tokens, 6-bit codes with step = range / S
  (entropy-coded); values as named;
* `t1 today`: keys and values 8-bit per channel over 128 tokens (tier 1, not entropy-coded);
* `t1 V rot8`: values rotated per token, 8-bit uniform levels at the MSE step.
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
from kv_side_study import BLOCK_TOKENS, columns, entropy_bits, keys_ecsq, values_ecsq  # noqa: E402


def cols(bits, g=128):
    """Today's v2 per-channel groups (u8 side data): (decode fn, rate fn)."""
    def fn(blk, sink):
        d = columns(blk, bits, g, "lin8", sink)
        # codes as the segment holds them, for the entropy-coded size
        start = 1 if sink else 0
        q = blk[start:]
        cs = []
        for r in range(0, q.shape[0], g):
            b = q[r:r + g]
            lo, hi = b.min(0), b.max(0)
            s = (hi - lo) / ((1 << bits) - 1)
            inv = np.where(s > 0, 1 / np.where(s > 0, s, 1), 0)
            cs.append(np.clip(np.round((b - lo) * inv), 0, (1 << bits) - 1).ravel())
        groups = -(-q.shape[0] // g) * blk.shape[1]
        side = 16 * groups + 16 * start * blk.shape[1] + 256
        return d, entropy_bits(np.concatenate(cs)) + side, q.size * bits + side
    return fn


def ecsq_v(bits, mult):
    def fn(blk, sink):
        d, b = values_ecsq(blk, bits, mult, sink)
        n = blk.shape[0] - (1 if sink else 0)
        raw = bits * n * blk.shape[1] + 8 * n + 16 * (blk.shape[1] if sink else 0) + 256
        return d, b, raw
    return fn


def rot_plain(bits):
    """Rotated per token, uniform levels at the MSE step, not entropy-coded (tier 1)."""
    def fn(blk, sink):
        d, b = values_ecsq(blk, bits, 1.0, sink)
        n = blk.shape[0] - (1 if sink else 0)
        raw = bits * n * blk.shape[1] + 8 * n + 16 * (blk.shape[1] if sink else 0) + 256
        return d, raw, raw
    return fn


def kspan(bits, span):
    def fn(blk, sink):
        d, b = keys_ecsq(blk, bits, 128, span, sink)
        return d, b, b  # raw size not used (always entropy-coded)
    return fn


CONFIGS = {
    # name: (key fn, value fn)
    "t2 today": (cols(5), cols(5)),
    "t2 V ecsq6 x1.0": (cols(5), ecsq_v(6, 1.0)),
    "t2 V ecsq6 x1.25": (cols(5), ecsq_v(6, 1.25)),
    "t2 V ecsq6 x1.3": (cols(5), ecsq_v(6, 1.3)),
    "t2 V ecsq6 x1.6": (cols(5), ecsq_v(6, 1.6)),
    "t2 V ecsq6 x2.0": (cols(5), ecsq_v(6, 2.0)),
    "t2 V ecsq7 x2.6": (cols(5), ecsq_v(7, 2.6)),
    "t2 V ecsq7 x3.2": (cols(5), ecsq_v(7, 3.2)),
    "t2 K6 span40 V ecsq6 x1.6": (kspan(6, 40), ecsq_v(6, 1.6)),
    "t2 K6 span48 V ecsq6 x1.6": (kspan(6, 48), ecsq_v(6, 1.6)),
    "t2 K6 span40 V today": (kspan(6, 40), cols(5)),
    "t1 today": (cols(8), cols(8)),
    "t1 V rot8": (cols(8), rot_plain(8)),
}


def run_tensor(fn, x):
    """Round-trip one head [T, hd]: (decoded, entropy-coded bits, raw bits)."""
    out = np.empty_like(x)
    eb = rb = 0.0
    for b0 in range(0, x.shape[0], BLOCK_TOKENS):
        blk = x[b0:b0 + BLOCK_TOKENS]
        d, e, r = fn(blk, b0 == 0)
        out[b0:b0 + BLOCK_TOKENS] = d
        eb += e
        rb += r
    return out, eb, rb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", default="apache2,compound,formatstrings,mpl2")
    ap.add_argument("--tokens", type=int, default=1536)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--rmse", action="store_true")
    a = ap.parse_args()
    from smollm import SmolLM
    m = SmolLM()
    names = a.configs.split(",")
    for tname in a.texts.split(","):
        ids = m.encode(text(tname))[:a.tokens]
        K, V = {}, {}

        def cap(layer, k, v):
            K[layer], V[layer] = k, v
            return m.rope(k.astype(np.float32), 0).astype(np.float16), v

        cap.pre_rope = True
        ref = nll_ppl(m.forward(ids, kv_hook=cap), ids)
        print(f"== {tname}: ref ppl {ref:.4f}", flush=True)
        for c in names:
            kf, vf = CONFIGS[c]
            t0 = time.time()
            dec = {}
            ek = nk = ev = nv = 0.0
            kbits = vbits = kraw = vraw = 0.0
            nvals = 0
            for layer in K:
                kk, vv = [], []
                for h in range(K[layer].shape[0]):
                    k32 = K[layer][h].astype(np.float32)
                    v32 = V[layer][h].astype(np.float32)
                    dk, e1, r1 = run_tensor(kf, k32)
                    dv, e2, r2 = run_tensor(vf, v32)
                    kbits += e1; kraw += r1; vbits += e2; vraw += r2
                    nvals += k32.size
                    ek += float(((dk - k32) ** 2).sum()); nk += float((k32 ** 2).sum())
                    ev += float(((dv - v32) ** 2).sum()); nv += float((v32 ** 2).sum())
                    kk.append(dk); vv.append(dv)
                dec[layer] = (np.stack(kk), np.stack(vv))
            line = (f"   {c:28s} K {kbits / nvals:5.3f} V {vbits / nvals:5.3f} b/v (ent; raw K {kraw / nvals:5.3f} "
                    f"V {vraw / nvals:5.3f})  all {(kbits + vbits) / 2 / nvals:5.3f}  "
                    f"K {100 * (ek / nk) ** 0.5:6.3f}%  V {100 * (ev / nv) ** 0.5:6.3f}%")
            if not a.rmse:
                def hook(layer, k, v):
                    kk, vv = dec[layer]
                    return m.rope(kk.astype(np.float32), 0).astype(np.float16), vv.astype(np.float16)
                hook.pre_rope = True
                ppl = nll_ppl(m.forward(ids, kv_hook=hook), ids)
                line += f"  ppl {100 * (ppl / ref - 1):+.3f}%"
            print(line + f"  ({time.time() - t0:.0f}s)", flush=True)


if __name__ == "__main__":
    main()
