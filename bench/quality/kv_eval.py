"""KV-cache quality per tier on SmolLM2-135M-Instruct (numpy forward, `smollm.py`).

For one text: a reference pass captures every layer's post-RoPE keys, values (f16, as the
cache holds them) and queries. Then, per tier:

* K and V relative RMSE: every `[tokens, 64]` tensor of the cache (30 layers x 3 KV heads x
  k|v) put into a store at that tier and read back; sqrt(sum err^2 / sum x^2) over the
  whole cache;
* attention-output cosine: each layer's attention with the reference queries over the
  round-tripped K/V against the one over the f16 K/V, cosine per (query head, token),
  mean and 1st percentile over the whole model;
* perplexity with the whole cache at that tier: a forward pass where every layer's
  attention reads its K/V back from the store (later layers see earlier layers' error);
* bits/value: the store's payload bytes (codes plus every side byte) * 8 / values.
"""

from __future__ import annotations

import time
from typing import Dict, List, Optional

import numpy as np

from smollm import SmolLM
from tvstore import roundtrip


def _names(m: SmolLM, layer: int):
    for h in range(m.n_kv):
        yield h, f"L{layer}.H{h}.k", f"L{layer}.H{h}.v"


def cache_arrays(m: SmolLM, layer: int, k: np.ndarray, v: np.ndarray):
    out = []
    for h, kn, vn in _names(m, layer):
        out.append((kn, np.ascontiguousarray(k[h]), "kv_key"))
        out.append((vn, np.ascontiguousarray(v[h]), "kv_value"))
    return out


def store_hook(m: SmolLM, tier: int, acc: Optional[Dict] = None):
    """A kv_hook that sends each layer's cache through a store at `tier`."""

    def hook(layer, k, v):
        dec, stored, values = roundtrip(cache_arrays(m, layer, k, v), tier)
        if acc is not None:
            acc["stored"] = acc.get("stored", 0) + stored
            acc["values"] = acc.get("values", 0) + values
        kk = np.stack([dec[kn] for _, kn, _ in _names(m, layer)])
        vv = np.stack([dec[vn] for _, _, vn in _names(m, layer)])
        return kk.astype(np.float16), vv.astype(np.float16)

    return hook


def nll_ppl(logits: np.ndarray, ids: np.ndarray) -> float:
    lg = logits[:-1].astype(np.float64)
    mx = lg.max(-1, keepdims=True)
    lse = mx[:, 0] + np.log(np.exp(lg - mx).sum(-1))
    return float(np.exp((lse - lg[np.arange(len(ids) - 1), ids[1:]]).mean()))


def _cos_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    num = (a * b).sum(-1)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return num / np.maximum(den, 1e-30)


def evaluate_text(m: SmolLM, ids: np.ndarray, tiers: List[int], ppl: bool = True,
                  compound: bool = True, log=print) -> Dict:
    t0 = time.time()
    K: Dict[int, np.ndarray] = {}
    V: Dict[int, np.ndarray] = {}
    Q: Dict[int, np.ndarray] = {}

    def cap(layer, k, v):
        K[layer], V[layer] = k, v
        return k, v

    def capq(layer, q):
        Q[layer] = q

    ref_ppl = nll_ppl(m.forward(ids, kv_hook=cap, q_hook=capq), ids)
    ref_att = {l: m.attend(Q[l], K[l].astype(np.float32), V[l].astype(np.float32)) for l in K}
    log(f"    reference pass: {len(ids)} tokens, perplexity {ref_ppl:.3f} ({time.time() - t0:.0f}s)")
    res = {"tokens": int(len(ids)), "ppl_ref": ref_ppl, "tiers": {}}

    def static(tier: int, demote_from: Optional[int] = None) -> Dict:
        ek = nk = ev = nv = 0.0
        cos: List[np.ndarray] = []
        stored = values = 0
        for l in sorted(K):
            dec, s, n = roundtrip(cache_arrays(m, l, K[l], V[l]), tier, demote_from)
            stored += s
            values += n
            kh = np.stack([dec[kn] for _, kn, _ in _names(m, l)]).astype(np.float32)
            vh = np.stack([dec[vn] for _, _, vn in _names(m, l)]).astype(np.float32)
            k32, v32 = K[l].astype(np.float32), V[l].astype(np.float32)
            ek += float(((kh - k32) ** 2).sum()); nk += float((k32 ** 2).sum())
            ev += float(((vh - v32) ** 2).sum()); nv += float((v32 ** 2).sum())
            if demote_from is None:
                cos.append(_cos_rows(m.attend(Q[l], kh, vh), ref_att[l]).ravel())
        r = {"k_rrmse": (ek / nk) ** 0.5, "v_rrmse": (ev / nv) ** 0.5,
             "bits": stored * 8.0 / values, "stored": stored, "values": values}
        if cos:
            c = np.concatenate(cos)
            r["attn_cos_mean"] = float(c.mean())
            r["attn_cos_p1"] = float(np.percentile(c, 1))
        return r

    for tier in tiers:
        t1 = time.time()
        r = static(tier)
        if ppl:
            r["ppl"] = nll_ppl(m.forward(ids, kv_hook=store_hook(m, tier)), ids)
            r["ppl_change_pct"] = (r["ppl"] / ref_ppl - 1.0) * 100.0
        res["tiers"][tier] = r
        log(f"    tier {tier}: bits/value {r['bits']:.3f}  K {r['k_rrmse'] * 100:.2f}%  "
            f"V {r['v_rrmse'] * 100:.2f}%  attn cos {r['attn_cos_mean']:.5f}"
            + (f"  ppl {r['ppl']:.3f} ({r['ppl_change_pct']:+.2f}%)" if ppl else "")
            + f"  ({time.time() - t1:.0f}s)")
    if compound and 3 in tiers and 1 in tiers:
        r = static(3, demote_from=1)
        res["demoted_1_to_3"] = r
        log(f"    tier 1 -> 2 -> 3 by migrate_tensor: K {r['k_rrmse'] * 100:.2f}%  V {r['v_rrmse'] * 100:.2f}%")
    return res
