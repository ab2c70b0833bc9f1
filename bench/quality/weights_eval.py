"""Weight quality per tier: every 2-D weight matrix of all-MiniLM-L6-v2 (real f32; the
three embedding tables, the attention/MLP dense weights of its 6 layers and the pooler,
22.7M values) through the store at each tier (kind="weight" when the binding has
kinds), next to GGUF's quantizers of the nearest bits/value.

Relative RMSE = sqrt(sum err^2 / sum w^2) over all matrices together ("overall"), plus
the median of the per-matrix figures.
"""

from __future__ import annotations

import time
from typing import Dict, List

import numpy as np

from ggml_ref import quantizers
from minilm import load_weights, weight_matrices
from tvstore import roundtrip


def _agg(errs: List[float], norms: List[float]) -> Dict:
    per = [(e / n) ** 0.5 for e, n in zip(errs, norms)]
    return {"rrmse": (sum(errs) / sum(norms)) ** 0.5, "rrmse_median": float(np.median(per))}


def evaluate(tiers: List[int], log=print) -> Dict:
    mats = weight_matrices(load_weights())
    n = sum(m.size for m in mats.values())
    log(f"    {len(mats)} matrices, {n / 1e6:.1f}M values")
    norms = [float((m.astype(np.float64) ** 2).sum()) for m in mats.values()]
    res: Dict = {"matrices": len(mats), "values": n, "tiers": {}, "gguf": {}}
    for tier in tiers:
        t0 = time.time()
        dec, stored, values = roundtrip([(k, v, "weight") for k, v in mats.items()], tier)
        errs = [float(((dec[k].astype(np.float64) - v) ** 2).sum()) for k, v in mats.items()]
        r = _agg(errs, norms)
        r["bits"] = stored * 8.0 / values
        res["tiers"][tier] = r
        log(f"    tier {tier}: bits/value {r['bits']:.3f}  rel RMSE {r['rrmse'] * 100:.3f}% "
            f"(median matrix {r['rrmse_median'] * 100:.3f}%)  ({time.time() - t0:.0f}s)")
    qs, why = quantizers()
    res["kquant_missing"] = why
    for name, (bits, rt) in qs.items():
        t0 = time.time()
        errs = [float(((rt(v).astype(np.float64) - v) ** 2).sum()) for v in mats.values()]
        r = _agg(errs, norms)
        r["bits"] = bits
        res["gguf"][name] = r
        log(f"    GGUF {name}: bits/value {bits:.4f}  rel RMSE {r['rrmse'] * 100:.3f}%  ({time.time() - t0:.0f}s)")
    if why:
        log(f"    k-quants not measured: {why}")
    return res
