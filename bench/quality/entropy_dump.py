"""Dump real tensors for the entropy-coding measurement (issue 23 item 3).

    bench/quality/.venv/bin/python bench/quality/entropy_dump.py OUT_DIR [--texts apache2,compound,mpl2] [--tokens 1536]

Writes, per text, `kv_<text>.f32`: SmolLM2-135M's post-RoPE K and V cache (the numpy
forward of `smollm.py`, f16 as the cache keeps it, widened to f32) as
`[layers * kv_heads * 2, tokens, 64]` little-endian f32, tensors in the order layer, head,
k then v; and `tokens.f32`: SmolLM2's token-embedding table `[49152, 576]`. A JSON
manifest `manifest.json` gives the shapes. `tensorvault-bench`'s `entropy_gain` example
reads them and codes every block as the store does (`cargo run -p tensorvault-bench
--release --example entropy_gain -- OUT_DIR`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import text  # noqa: E402


def token_embeddings() -> np.ndarray:
    """SmolLM2's token table as `emb_eval.token_embeddings` builds it (dequantized,
    L2-normalised rows, seeded row order); inlined so this script needs no tensorvault."""
    import gguf

    from smollm import model_path

    r = gguf.GGUFReader(model_path())
    t = next(t for t in r.tensors if t.name == "token_embd.weight")
    e = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
    e /= np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    perm = np.random.default_rng(14).permutation(len(e))
    return np.ascontiguousarray(e[perm])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--texts", default="apache2,compound,mpl2")
    ap.add_argument("--tokens", type=int, default=1536)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    from smollm import SmolLM

    m = SmolLM()
    man = {"kv": {}, "tokens": None}
    for name in a.texts.split(","):
        ids = m.encode(text(name))[: a.tokens]
        if len(ids) < a.tokens:
            raise SystemExit(f"text {name} has only {len(ids)} tokens, need {a.tokens}")
        cache = {}

        def cap(layer, k, v):
            cache[layer] = (k, v)
            return k, v

        m.forward(ids, kv_hook=cap)
        parts = []
        for layer in sorted(cache):
            k, v = cache[layer]
            for h in range(k.shape[0]):
                parts.append(k[h].astype(np.float32))
                parts.append(v[h].astype(np.float32))
        arr = np.stack(parts).astype("<f4")
        arr.tofile(os.path.join(a.out, f"kv_{name}.f32"))
        man["kv"][name] = list(arr.shape)
        print(f"{name}: {arr.shape}", file=sys.stderr, flush=True)
    t = token_embeddings().astype("<f4")
    t.tofile(os.path.join(a.out, "tokens.f32"))
    man["tokens"] = list(t.shape)
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(man, f, indent=1)
    print(json.dumps(man), file=sys.stderr)


if __name__ == "__main__":
    main()
