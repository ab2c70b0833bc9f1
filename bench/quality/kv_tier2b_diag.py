"""Where tier 2's perplexity loss sits (session 13, kv-tier2b): numpy on the product's
round trips, one window of one text.

    OPENBLAS_NUM_THREADS=1 bench/quality/.venv/bin/python bench/quality/kv_tier2b_diag.py \
        --text apache2 --offset 0 [--configs groups,tier2] [--json out.json]

The reference forward captures every layer's queries, post-RoPE keys and values (f16).
Each configuration round-trips every layer's cache through `tensorvault.KvCache` (keys
before RoPE, the age policy moving every block to tier 2; `round3.KvCacheConfig`). Then,
per layer, without running the model again (so errors do not compound: a ranking, not a
perplexity):

* K and V relative RMSE;
* the attention output's relative error with quantized V over exact K ("V part") and with
  quantized K over exact V ("K part"), over every query head and token;
* for values: the error of the tokens attention weighs most (the top 1% of tokens by the
  attention mass the layer's queries put on them), of the first rows of each block, and by
  token-RMS decile; and per channel, the error relative to the channel's spread.
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
from round3 import SMOLLM2_GGUF_ROPE, KvCacheConfig, unrope  # noqa: E402

CONFIGS = {
    "groups": lambda: KvCacheConfig("5-bit groups (ecsq)", 2, 4, SMOLLM2_GGUF_ROPE, True, "extent", ecsq=True),
    "tier2": lambda: KvCacheConfig("ecsq_tier2", 2, 4, SMOLLM2_GGUF_ROPE, True, "extent", ecsq=True,
                                   ecsq_tier2=True),
}


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def attn_probs(m, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """[n_head, T, T] causal softmax."""
    T = k.shape[1]
    g = m.n_head // m.n_kv
    mask = np.triu(np.full((T, T), -np.inf, dtype=np.float32), 1)
    out = np.empty((m.n_head, T, T), dtype=np.float32)
    for h in range(m.n_head):
        s = (q[h] @ k[h // g].T) / np.sqrt(m.hd) + mask
        s -= s.max(-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(-1, keepdims=True)
        out[h] = s
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", default="apache2")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=1536)
    ap.add_argument("--configs", default="groups,tier2")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    from smollm import SmolLM
    m = SmolLM()
    ids = m.encode(text(a.text))[a.offset:a.offset + a.tokens]
    K, V, Q = {}, {}, {}

    def cap(layer, k, v):
        K[layer], V[layer] = k, v
        return k, v

    def capq(layer, q):
        Q[layer] = q

    t0 = time.time()
    m.forward(ids, kv_hook=cap, q_hook=capq)
    print(f"reference forward {time.time() - t0:.0f}s", file=sys.stderr)
    res = {"text": a.text, "offset": a.offset, "tokens": len(ids), "configs": {}}
    g = m.n_head // m.n_kv
    for name in a.configs.split(","):
        c = CONFIGS[name]()
        per_layer = []
        tok_rows = []
        for l in sorted(K):
            kin = unrope(m, K[l].astype(np.float32)).astype(np.float16)
            kh, vh, _, _ = c.roundtrip_layer(m, l, kin, V[l])
            k32, v32 = K[l].astype(np.float32), V[l].astype(np.float32)
            kh, vh = kh.astype(np.float32), vh.astype(np.float32)
            p = attn_probs(m, Q[l], k32)
            ref = np.stack([p[h] @ v32[h // g] for h in range(m.n_head)])
            o_v = np.stack([p[h] @ vh[h // g] for h in range(m.n_head)])
            pk = attn_probs(m, Q[l], kh)
            o_k = np.stack([pk[h] @ v32[h // g] for h in range(m.n_head)])
            # attention mass each token receives (mean over query heads and queries)
            mass = np.stack([p[h * g:(h + 1) * g].sum(1).mean(0) for h in range(m.n_kv)])  # [n_kv, T]
            e = vh - v32  # [n_kv, T, hd]
            tok_err = np.linalg.norm(e, axis=-1)
            tok_norm = np.linalg.norm(v32, axis=-1)
            top = mass >= np.quantile(mass, 0.99)
            first_rows = np.zeros_like(top)
            first_rows[:, ::256] = True
            first_rows[:, 0] = False
            ch_spread = v32.std(axis=1)  # [n_kv, hd]
            ch_err = np.sqrt((e ** 2).mean(axis=1))
            per_layer.append({
                "layer": l, "k": rel(kh, k32), "v": rel(vh, v32),
                "attn_v_part": rel(o_v, ref), "attn_k_part": rel(o_k, ref),
                "v_top_mass_tok_rel": float(np.linalg.norm(e[top]) / max(np.linalg.norm(v32[top]), 1e-30)),
                "v_top_mass_share": float(mass[top].sum() / mass.sum()),
                "v_first_rows_rel": float(np.linalg.norm(e[first_rows]) / np.linalg.norm(v32[first_rows])),
                "v_err_over_ch_spread_max": float((ch_err / np.maximum(ch_spread, 1e-30)).max()),
                "v_err_over_ch_spread_med": float(np.median(ch_err / np.maximum(ch_spread, 1e-30))),
                "v_tok0_err": float(tok_err[:, 0].max()),
            })
            tok_rows.append(np.stack([tok_norm.ravel(), tok_err.ravel(), mass.ravel()], 1))
            r = per_layer[-1]
            print(f"{name:7s} L{l:2d} K {r['k']*100:5.2f}% V {r['v']*100:5.2f}%  attn(V) {r['attn_v_part']*100:5.2f}%  "
                  f"attn(K) {r['attn_k_part']*100:5.2f}%  top-mass V {r['v_top_mass_tok_rel']*100:6.2f}% "
                  f"(mass {r['v_top_mass_share']:.2f})  rows@256 {r['v_first_rows_rel']*100:5.2f}%  "
                  f"ch err/spread med {r['v_err_over_ch_spread_med']:.3f} max {r['v_err_over_ch_spread_max']:.3f}",
                  file=sys.stderr)
        t = np.concatenate(tok_rows)
        dec = np.quantile(t[:, 0], np.linspace(0, 1, 11))
        by_dec = []
        for i in range(10):
            s = (t[:, 0] >= dec[i]) & (t[:, 0] <= dec[i + 1])
            by_dec.append({"norm_lo": float(dec[i]), "norm_hi": float(dec[i + 1]),
                           "rel_err": float(np.sqrt((t[s, 1] ** 2).sum() / (t[s, 0] ** 2).sum())),
                           "mass": float(t[s, 2].sum() / t[:, 2].sum())})
        res["configs"][name] = {"layers": per_layer, "by_token_norm_decile": by_dec}
        for d in by_dec:
            print(f"{name:7s} token-norm {d['norm_lo']:8.3f}..{d['norm_hi']:8.3f}: V rel err {d['rel_err']*100:6.2f}%"
                  f"  attention mass {d['mass']:.3f}", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
