"""Write the real tensors `v7_vs_v5` (crates/tensorvault-quant/examples/v7_vs_v5.rs) reads:
SmolLM2's token table (`emb_eval.token_embeddings()`: rows L2-normalised, seeded order)
as OUT/tokens.npy, and every 2-D f32 weight matrix of all-MiniLM-L6-v2
(`minilm.load_weights()`) as OUT/minilm/NAME.npy (one file per tensor: the store cuts
blocks per tensor).

    bench/quality/.venv/bin/python bench/quality/v7_dump.py OUT_DIR
"""
import os
import sys
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.modules.setdefault("tensorvault", types.ModuleType("tensorvault"))
from emb_eval import token_embeddings  # noqa: E402
from minilm import load_weights, weight_matrices  # noqa: E402


def main(out: str) -> None:
    os.makedirs(os.path.join(out, "minilm"), exist_ok=True)
    t = token_embeddings().astype("<f4")
    np.save(os.path.join(out, "tokens.npy"), t)
    print("tokens", t.shape)
    for name, w in weight_matrices(load_weights()).items():
        np.save(os.path.join(out, "minilm", name + ".npy"), np.ascontiguousarray(w, dtype="<f4"))
    print("minilm", len(os.listdir(os.path.join(out, "minilm"))), "matrices")


if __name__ == "__main__":
    main(sys.argv[1])
