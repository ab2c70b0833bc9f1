"""A KV prefix cache: reuse a prompt's attention KV across requests and processes.

A prompt's token ids are cut into chunks of ``chunk_tokens``; each full chunk is named by
a BLAKE3 hash chain over the model identity, the chunk size and every token up to and
including it, so a chunk is found only after exactly the same prefix. Chunks live in the
temporal tensor store (one collection per model under ``<root>/prefix/``), so they are
checksummed, survive crashes and restarts, move to 8, 5 and 3 bits as they sit idle
(:meth:`PrefixCache.maintain`) and are evicted least recently used, suffixes first, under a
byte budget. A damaged chunk is a miss (the load stops before it), never wrong data.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _tensorvault as _native
from ._common import F16_MAX, PathLike, check_range, fspath, index_arg
from ._errors import InvalidArgumentError

_U32_MAX = 2**32 - 1


def _count(v: Any, what: str, minimum: int = 1) -> int:
    return index_arg(v, what, minimum)


def _tokens(token_ids: Any) -> np.ndarray:
    arr = np.asarray(token_ids)
    if arr.ndim != 1:
        raise InvalidArgumentError(f"token_ids must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype="<u4")
    if arr.dtype.kind not in "iu":
        raise InvalidArgumentError(f"token_ids must be integers, got dtype {arr.dtype}")
    bad = np.flatnonzero((arr < 0) | (arr > _U32_MAX))
    if bad.size:
        i = int(bad[0])
        raise InvalidArgumentError(
            f"token_ids[{i}] = {int(arr[i])} is outside the uint32 range 0..{_U32_MAX}"
        )
    return np.ascontiguousarray(arr, dtype="<u4")


class PrefixCache:
    """The prefix cache of one model under a store root.

    Args:
        root: Store root directory (the model's chunks go to ``root/prefix/m<hash>/``).
        model: Model identity string; two models never share chunks. Reopening a model
            with other ``layers``, ``kv_heads``, ``head_dim`` or ``chunk_tokens`` raises
            :class:`InvalidArgumentError`.
        layers: Transformer layers.
        kv_heads: KV heads per layer.
        head_dim: Values per head and token.
        chunk_tokens: Tokens per chunk (fixed when the model's cache is created).
        age_tiers: ``(tier0_s, tier1_s, tier2_s)``: a chunk idle for less than ``tier0_s``
            seconds stays raw f16, the next ``tier1_s`` at 8 bits, the next ``tier2_s`` at
            5 bits, then 3 bits, applied by :meth:`maintain`. Default (600, 3000, 82800).
        budget_bytes: Most bytes the model's chunks may take; ``store`` and ``maintain``
            evict the least recently used chunks that no stored chunk extends.
        read_only: Only read (lock-free snapshots, nothing written); writes raise. Any
            number of processes, readers and writers, may use one root at once: readers
            never wait, and each write is a short commit under the collection's lock.
        durability: As for :class:`tensorvault.Store`.

    Use it as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        root: PathLike,
        model: str,
        layers: int,
        kv_heads: int,
        head_dim: int,
        *,
        chunk_tokens: int = 256,
        age_tiers: Optional[Sequence[int]] = None,
        budget_bytes: Optional[int] = None,
        read_only: bool = False,
        durability: Any = "every-write",
    ) -> None:
        if not isinstance(model, str):
            raise InvalidArgumentError(f"model must be a str, got {type(model).__name__}")
        self._layers = _count(layers, "layers")
        self._kv_heads = _count(kv_heads, "kv_heads")
        self._head_dim = _count(head_dim, "head_dim")
        age = None
        if age_tiers is not None:
            if isinstance(age_tiers, (str, bytes)) or len(age_tiers) != 3:
                raise InvalidArgumentError(
                    f"age_tiers must be (tier0_s, tier1_s, tier2_s), got {age_tiers!r}"
                )
            age = tuple(_count(v, "age_tiers", 0) for v in age_tiers)
        self._c = _native.PrefixCache(
            fspath(root),
            model,
            self._layers,
            self._kv_heads,
            self._head_dim,
            _count(chunk_tokens, "chunk_tokens"),
            age,
            None if budget_bytes is None else _count(budget_bytes, "budget_bytes", 0),
            bool(read_only),
            str(durability),
        )

    @property
    def chunk_tokens(self) -> int:
        """Tokens per chunk."""
        return self._c.chunk_tokens

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._c.closed

    def _arrays(
        self, arrays: Any, what: str, tokens: int, clip: bool = False
    ) -> Tuple[List[np.ndarray], str]:
        if isinstance(arrays, np.ndarray) and arrays.ndim == 4:
            arrays = list(arrays)
        if not isinstance(arrays, (list, tuple)) or len(arrays) != self._layers:
            n = len(arrays) if isinstance(arrays, (list, tuple)) else type(arrays).__name__
            raise InvalidArgumentError(
                f"{what} must be a list of {self._layers} per-layer arrays, got {n}"
            )
        want = (self._kv_heads, tokens, self._head_dim)
        out, dtypes = [], set()
        for i, a in enumerate(arrays):
            a = np.asarray(a)
            if a.dtype not in (np.float16, np.float32):
                raise InvalidArgumentError(
                    f"{what}[{i}] must be float16 or float32, got {a.dtype}"
                )
            if a.shape != want:
                raise InvalidArgumentError(
                    f"{what}[{i}] must have shape [kv_heads, tokens, head_dim] = {want}, got {a.shape}"
                )
            if a.dtype == np.float32:
                # The KV policy (issue 25): values beyond float16's range are refused
                # with their index, not stored as infinity; NaN is refused by the store.
                a = check_range(a, f"{what}[{i}]", F16_MAX, "float16", clip=clip)
            dtypes.add(a.dtype)
            a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
            out.append(a.reshape(-1).view(np.uint8))
        if len(dtypes) > 1:
            raise InvalidArgumentError(f"{what}: mixed dtypes {sorted(map(str, dtypes))}")
        return out, (str(dtypes.pop()) if dtypes else "float32")

    def store(self, token_ids: Any, keys: Any, values: Any, clip: bool = False) -> int:
        """Store the KV of ``token_ids``; returns the tokens newly stored.

        ``keys`` and ``values`` are lists (one per layer) of ``[kv_heads, T, head_dim]``
        float16 or float32 arrays for the ``T = len(token_ids)`` tokens. Every full chunk
        not yet stored is written (float32 is rounded to float16); a trailing partial chunk
        is not. NaN or infinite values raise :class:`InvalidArgumentError` naming the
        layer, head and token; float32 values beyond float16's ±65504 raise naming their
        index, or saturate to ±65504 with ``clip=True``.
        """
        t = _tokens(token_ids)
        k, kd = self._arrays(keys, "keys", len(t), clip)
        v, vd = self._arrays(values, "values", len(t), clip)
        if kd != vd:
            raise InvalidArgumentError(f"keys are {kd} but values are {vd}")
        return self._c.store(t, k, v, kd)

    def lookup(self, token_ids: Any) -> int:
        """The longest stored prefix of ``token_ids``, in tokens (a multiple of
        ``chunk_tokens``), without reading any KV data."""
        return self._c.lookup(_tokens(token_ids))

    def load(
        self, token_ids: Any, n: Optional[int] = None, dtype: Any = np.float32
    ) -> Tuple[List[np.ndarray], List[np.ndarray]]:
        """The KV of the first ``n`` tokens (default: :meth:`lookup`).

        Returns ``(keys, values)``, lists of ``[kv_heads, n', head_dim]`` arrays of
        ``dtype`` (float32 or float16) in the layout of :meth:`store`. ``n'`` is ``n``
        unless a chunk turned out damaged: the load then stops before it (counted in
        ``stats()["damaged_chunks"]``). Asking for more than is stored raises.
        """
        dt = np.dtype(dtype)
        if dt not in (np.float16, np.float32):
            raise InvalidArgumentError(f"dtype must be float16 or float32, got {dt}")
        nn = None if n is None else _count(n, "n", 0)
        got, kb, vb = self._c.load(_tokens(token_ids), nn)
        shape = (self._kv_heads, got, self._head_dim)

        def conv(b: np.ndarray) -> np.ndarray:
            a = b.view("<f2").reshape(shape)
            return a if dt == np.float16 else a.astype(np.float32)

        return [conv(b) for b in kb], [conv(b) for b in vb]

    def stats(self) -> Dict[str, Any]:
        """Chunks, tokens, bytes (stored, as f16, per tier) and this handle's counters:
        ``lookups``, ``hit_chunks``, ``miss_chunks``, ``damaged_chunks``,
        ``stored_chunks``, ``evicted_chunks``."""
        return self._c.stats()

    def verify(self) -> Dict[str, Any]:
        """Check every block of every chunk (checksum and decode; not counted as a use).
        Returns ``{"chunks", "blocks", "damaged": [chunk ids in hex], "dropped"}``; a
        writable cache drops each damaged chunk and every chunk extending it."""
        return self._c.verify()

    def maintain(self) -> Dict[str, Any]:
        """Demote idle chunks by ``age_tiers``, then evict down to ``budget_bytes``;
        returns ``{"demoted": [chunks into tier 0..3], "evicted": n}``."""
        return self._c.maintain()

    def model_counts(self) -> Dict[str, int]:
        """The model's use counters summed over every writable handle of every process
        (``lookups``, ``hit_chunks``, ``miss_chunks``, ``damaged_chunks``,
        ``stored_chunks``, ``evicted_chunks``), as of their last commits."""
        return self._c.model_counts()

    def evict_to_bytes(self, n_bytes: int) -> int:
        """Evict least recently used chunks (suffixes first) until the model's chunks
        take at most ``n_bytes`` (0: all); returns the chunks evicted."""
        return self._c.evict_to_bytes(_count(n_bytes, "n_bytes", 0))

    def close(self) -> None:
        """Commit this handle's pending uses and counters (writable) and release the
        store (idempotent)."""
        self._c.close()

    def __enter__(self) -> "PrefixCache":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"chunk_tokens={self.chunk_tokens}"
        return f"PrefixCache(layers={self._layers}, kv_heads={self._kv_heads}, head_dim={self._head_dim}, {state})"
