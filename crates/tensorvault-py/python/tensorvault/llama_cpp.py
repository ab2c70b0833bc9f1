"""A prompt cache for llama-cpp-python backed by :class:`tensorvault.PrefixCache`.

``Llama.set_cache(tensorvault.llama_cpp.PrefixCache.for_llama(llm, root))`` makes every
completion look up the longest stored prefix of its prompt (across requests, processes
and restarts) and store its state afterwards. States are parsed into per-layer f16 K/V
and kept as chunks of the prefix cache (quantized by age with ``maintain()``, evicted
under a byte budget, checksummed); a state this build cannot parse exactly is kept as a
raw blob. This module imports ``llama_cpp`` (not needed by the rest of tensorvault).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Optional, Sequence

import numpy as np

import llama_cpp
from llama_cpp.llama_cache import BaseLlamaCache

from ._common import PathLike
from ._llama_state import LlamaKVStore


def model_identity(model_path: PathLike) -> str:
    """``llama.cpp:`` + the SHA-256 of the GGUF file: two different files never share
    cache entries, the same file under another name does."""
    h = hashlib.sha256()
    with open(os.fspath(model_path), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return f"llama.cpp:{h.hexdigest()}"


class PrefixCache(BaseLlamaCache):
    """A ``BaseLlamaCache`` over a tensorvault prefix cache under ``root``.

    Args:
        root: Store root directory (shared by any number of processes).
        model: Model identity (see :func:`model_identity`).
        layers, kv_heads, head_dim: The model's KV geometry.
        n_vocab: Vocabulary size (the shape of the restored state's scores).
        n_ctx: The context size of the ``Llama`` the states are loaded into (the length
            of ``LlamaState.input_ids``, which ``load_state`` takes over whole).
        chunk_tokens: Tokens per stored chunk (the prefix granularity).
        budget_bytes: Byte budget of the stored chunks (``capacity_bytes`` of
            ``BaseLlamaCache`` too); least recently used suffixes go first.
        age_tiers, read_only, durability: As for :class:`tensorvault.PrefixCache`.

    A hit returns a ``LlamaState`` of the longest stored prefix (a multiple of
    ``chunk_tokens``, or a whole raw state); ``Llama`` then evaluates the rest of the
    prompt.
    """

    def __init__(
        self,
        root: PathLike,
        model: str,
        layers: int,
        kv_heads: int,
        head_dim: int,
        n_vocab: int,
        n_ctx: int,
        *,
        chunk_tokens: int = 64,
        budget_bytes: Optional[int] = None,
        age_tiers: Optional[Sequence[int]] = None,
        read_only: bool = False,
        durability: Any = "every-write",
    ) -> None:
        super().__init__(capacity_bytes=budget_bytes or (2 << 30))
        self._kv = LlamaKVStore(
            root,
            model,
            layers,
            kv_heads,
            head_dim,
            chunk_tokens=chunk_tokens,
            budget_bytes=budget_bytes,
            age_tiers=age_tiers,
            read_only=read_only,
            durability=durability,
        )
        self._n_vocab = n_vocab
        self._n_ctx = n_ctx
        self._seed = 0

    @classmethod
    def for_llama(cls, llm: "llama_cpp.Llama", root: PathLike, **kw: Any) -> "PrefixCache":
        """A cache for ``llm``'s model: identity from its GGUF file, geometry from the
        loaded model (``n_layer``, ``n_head_kv``, ``n_embd / n_head``)."""
        m = llm.model
        n_head = llama_cpp.llama_model_n_head(m)
        return cls(
            root,
            kw.pop("model", None) or model_identity(llm.model_path),
            llama_cpp.llama_model_n_layer(m),
            llama_cpp.llama_model_n_head_kv(m),
            llama_cpp.llama_model_n_embd(m) // n_head,
            llm.n_vocab(),
            llm.n_ctx(),
            **kw,
        )

    @property
    def store(self) -> LlamaKVStore:
        """The token-keyed state store underneath."""
        return self._kv

    @property
    def cache_size(self) -> int:
        return int(self._kv.prefix_cache.stats()["stored_bytes"])

    def __contains__(self, key: Sequence[int]) -> bool:
        return self._kv.lookup(np.asarray(key, dtype=np.int64)) > 0

    def __getitem__(self, key: Sequence[int]) -> "llama_cpp.llama.LlamaState":
        got = self._kv.get(np.asarray(key, dtype=np.int64))
        if got is None:
            raise KeyError("no stored prefix")
        tokens, blob = got
        if len(tokens) > self._n_ctx:
            raise KeyError(f"stored prefix of {len(tokens)} tokens exceeds n_ctx {self._n_ctx}")
        ids = np.zeros(self._n_ctx, dtype=np.intc)
        ids[: len(tokens)] = tokens
        return llama_cpp.llama.LlamaState(
            input_ids=ids,
            # Restored states are always re-evaluated from their last token on (Llama
            # sets _requires_eval), so their scores are not read: one zero row.
            scores=np.zeros((1, self._n_vocab), dtype=np.single),
            n_tokens=len(tokens),
            llama_state=blob,
            llama_state_size=len(blob),
            seed=self._seed,
        )

    def __setitem__(self, key: Sequence[int], value: "llama_cpp.llama.LlamaState") -> None:
        n = int(value.n_tokens)
        evaluated = np.asarray(value.input_ids[:n], dtype=np.int64)
        # Only the evaluated tokens have KV; they must be the key's start.
        if n == 0 or len(key) < n or not np.array_equal(
            np.asarray(key[:n], dtype=np.int64), evaluated
        ):
            return
        self._seed = int(value.seed)
        self._kv.put(evaluated, bytes(value.llama_state[: value.llama_state_size]))

    def close(self) -> None:
        """Close the underlying prefix cache."""
        self._kv.close()
