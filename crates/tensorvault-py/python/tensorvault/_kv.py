"""An attention KV cache kept in the temporal tensor store, for Python inference loops.

One float16 ``[tokens, head_dim]`` tensor per (layer, KV head, ``"k"`` | ``"v"``), named
``L{layer}.H{head}.{k|v}`` in one store collection created with the KV layout. A decode
step appends every head's new token positions as one store batch; attention reads the
token range it needs; :meth:`KvCache.maintain` runs the store's tiering, which keeps
recently read blocks raw and demotes cold ones to 8, 5 or 3 bits. The partial tail
block of each tensor stays raw and pinned.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

import numpy as np

from . import _tensorvault as _native
from ._common import PathLike, fspath, index_arg as _index, is_bfloat16, real_float_array
from ._errors import InvalidArgumentError
from ._reports import MaintainReport, StoreStats

_F16 = np.dtype("<f2")


def _kind(kind: Any) -> str:
    if kind not in ("k", "v"):
        raise InvalidArgumentError(f"kind must be 'k' (keys) or 'v' (values), got {kind!r}")
    return kind


def _rope(rope: Any) -> Optional[Tuple[float, int, str]]:
    if rope is None:
        return None
    if isinstance(rope, (str, bytes)) or not hasattr(rope, "__len__") or len(rope) != 3:
        raise InvalidArgumentError(
            f"rope must be (theta, rotary_dims, pairing), got {rope!r}"
        )
    theta, dims, pairing = rope
    if isinstance(theta, bool) or not isinstance(theta, (int, float)):
        raise InvalidArgumentError(f"rope theta must be a number, got {theta!r}")
    if pairing not in ("neox", "interleaved"):
        raise InvalidArgumentError(f"rope pairing must be 'neox' or 'interleaved', got {pairing!r}")
    return float(theta), _index(dims, "rope rotary_dims"), pairing


class KvCache:
    """A KV cache in the store collection ``<root>/<tenant>/<collection>``.

    Args:
        root: Store root directory.
        tenant: Tenant name.
        collection: Collection name; created with the KV layout for ``head_dim`` when
            ``create`` and absent.
        head_dim: Values per token position of one head (e.g. 64).
        create: Create the collection if it does not exist.
        durability: ``"os"`` (default): no fsync per decode step; the OS writes back, so
            a killed process loses nothing already appended, a power cut may lose the
            last seconds of the cache (which the model can recompute from the prompt).
            ``"every-write"`` fsyncs data and log on every append: durable against power
            loss, at a cost of ~40x per decode step, measured on the 2-core VM with
            ``bench/python/kv_durability.py`` (4 heads, keys and values per step: 41
            steps/s against 1,683 with ``"os"``; bench/RESULTS.md). Also ``"every-N"``
            or an int N: one sync every N appends. As for :class:`tensorvault.Store`.
        max_blocks_per_tier: Four limits (``None`` = unlimited) on live blocks per tier.
        age_tiers: Age-based tiering applied by :meth:`maintain`, as ``(tier0_tokens,
            tier1_tokens, tier2_tokens)``: a full block whose newest token is fewer than
            ``tier0_tokens`` behind the end of its tensor stays raw, the next
            ``tier1_tokens`` go to 8 bits, the next ``tier2_tokens`` to 5 bits, anything
            older to 3 bits (blocks only move down). Attention reads every block at every
            step, so access statistics cannot tell old blocks from recent ones; age can.
            The first token of each tensor (the attention sink) stays f16 in every tier.
            ``None`` (default): access statistics only.
        block_tokens: Token positions per block when the collection is created (default:
            32 KiB of f16, 256 tokens at head_dim 64). Smaller blocks keep a shorter
            recent window raw; per-channel key groups want at least 128.
        rope: Store keys *before* RoPE and apply it at read: ``(theta, rotary_dims,
            pairing)`` with pairing ``"neox"`` (channel ``i`` with ``i + rotary_dims/2``:
            Hugging Face Llama, Qwen, SmolLM2's HF checkpoint) or ``"interleaved"``
            (channels ``2i``, ``2i+1``: GGUF's permuted Q/K weights as llama.cpp runs
            them, GPT-J), e.g. ``(100000.0, 64, "interleaved")`` for SmolLM2 run from its
            GGUF file. Appends then take pre-RoPE keys and :meth:`read` returns them
            after RoPE for their positions, as a post-RoPE cache would: quantized
            per-channel groups see each channel's own range (KVQuant's pre-RoPE keys).
            Persisted with the collection; reopening with another spec (or none) raises
            :class:`tensorvault.InvalidArgumentError`. ``None`` (default): keys are
            stored and returned as appended.
        codec: Codec of a new collection: 2 (default) or 4 (keys at their own bit
            widths: 8 / 5 / 4 bits at tiers 1 / 2 / 3, values 8 / 5 / 3, 3-bit values
            rotated per token).
        entropy: Create the collection with the entropy flag: quantized blocks are
            stored entropy-coded (lossless, TQTC version 5) where that is shorter. The
            tier slots keep their size; the payload shrinks.
        allocation: ``"slot"`` (default) or ``"extent"``: a new collection whose blocks
            take payload-sized extents of their tier files instead of worst-case slots,
            so the disk follows the (entropy-coded) payload. Older builds refuse it.
        ecsq: With ``codec=4`` and ``entropy=True``: store tier 3 values with
            entropy-coded levels (4-bit uniform codes spaced 1.625x the MSE-optimal
            step, packed by the entropy coder to about the size of the 3-bit codes)
            instead of 3-bit Lloyd-Max codes: less error at about the same payload
            (SmolLM2-135M: bench/RESULTS.md, "Session 11: kv-side"). Persisted with
            the collection (MetaLog header flags bit 2); raises
            :class:`tensorvault.InvalidArgumentError` without codec 4 and entropy.
        ecsq_tier2: With ``ecsq=True``: store tier 2 values with entropy-coded levels
            too (each token's head rotated, 6-bit uniform codes at the finest step
            whose entropy-coded block fits the tier's slot or extent: at the MSE-optimal
            step with ``allocation="extent"``, 1.25x it in a slot) instead of 5-bit
            per-channel groups; blocks that do not fit keep the groups. Within tier 2's
            5.25 bits/value (SmolLM2-135M: value error 4.6% -> 3.1-3.8%,
            bench/RESULTS.md "Session 12: kv-tier2"). Persisted with the collection
            (MetaLog header flags bit 4); raises :class:`tensorvault.InvalidArgumentError`
            without ``ecsq``.
        keys_ecsq: With ``codec=4`` and ``entropy=True``: store tier 2 key blocks as
            channel-centred model-coded ECSQ (TQTC version 8: each channel's mean removed
            and kept as f16, one step per block, each channel's codes priced by a
            Gaussian of its spread) fitted into 4.95 bits/value (or the bytes the 5-bit
            per-channel groups would take, if more), so tier 2 stays within its 5.25
            bits/value next to ``ecsq_tier2`` values; blocks that do not fit keep the
            groups (SmolLM2-135M's keys at the groups' own length: attention-logit error
            1.55% -> 1.12%, bench/RESULTS.md "Session 15: kv-chan"). Persisted with the collection
            (MetaLog header flags2 bit 0, byte 78; builds from before it refuse the
            collection); raises :class:`tensorvault.InvalidArgumentError` without codec
            4 and entropy.
        wide_lanes: With ``entropy=True`` (or ``ecsq=True``): write the entropy-coded
            blocks of KV and generic tensors with 64 interleaved rANS lanes instead of 4;
            reads decode them with AVX-512 or AVX2 about 3x faster (a whole block read
            1.7-2.2x faster; the same values, about
            180 more payload bytes per 16384-value block; bench/RESULTS.md "Session 15:
            rans-wide"). Persisted with the collection (MetaLog header flags2 bit 1:
            builds before session 15 refuse to open it); raises
            :class:`tensorvault.InvalidArgumentError` without entropy coding.
        keys_wstep: With ``keys_ecsq=True``: store those tier 2 key blocks as TQTC
            version 9 instead of 8, in the same bytes, and tier 3 key blocks as version 9
            within the bytes of their 4-bit groups: one quantizer step per channel,
            shaped by the block's own key energy of the channel's RoPE pair (finer where
            attention's queries weigh the keys most, never finer than the channel's
            largest value needs), which cuts the attention-logit error about 25% at the
            same size (bench/RESULTS.md "Session 16: kv-wstep"). Persisted with the
            collection (MetaLog header flags2 bit 2, byte 78; builds from before it
            refuse the collection); raises :class:`tensorvault.InvalidArgumentError`
            without ``keys_ecsq``.
        slot_align: Byte alignment of a new collection's slots and extents, a power of two
            in 8..=2^20 (default 64). With ``allocation="extent"`` each block's payload is
            rounded up to it on disk: 16 rounds a 16384-value block by ~0.004 bits/value
            instead of ~0.016 (bench/RESULTS.md "Session 15: lead, KV tiers 1 and 3").
            Existing collections keep theirs.

    Use it as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        root: PathLike,
        tenant: str,
        collection: str,
        head_dim: int,
        *,
        create: bool = True,
        durability: Any = "os",
        max_blocks_per_tier: Optional[Sequence[Optional[int]]] = None,
        age_tiers: Optional[Sequence[int]] = None,
        block_tokens: Optional[int] = None,
        rope: Optional[Tuple[float, int, str]] = None,
        codec: Optional[int] = None,
        entropy: bool = False,
        allocation: str = "slot",
        ecsq: bool = False,
        ecsq_tier2: bool = False,
        keys_ecsq: bool = False,
        wide_lanes: bool = False,
        slot_align: Optional[int] = None,
        keys_wstep: bool = False,
    ) -> None:
        self._head_dim = _index(head_dim, "head_dim")
        age = None
        if age_tiers is not None:
            if isinstance(age_tiers, (str, bytes)) or len(age_tiers) != 3:
                raise InvalidArgumentError(
                    f"age_tiers must be (tier0_tokens, tier1_tokens, tier2_tokens), got {age_tiers!r}"
                )
            age = tuple(_index(v, "age_tiers") for v in age_tiers)
        self._c = _native.KvCache(
            fspath(root),
            str(tenant),
            str(collection),
            self._head_dim,
            bool(create),
            str(durability),
            None if max_blocks_per_tier is None else list(max_blocks_per_tier),
            age,
            None if block_tokens is None else _index(block_tokens, "block_tokens"),
            _rope(rope),
            None if codec is None else _index(codec, "codec"),
            bool(entropy),
            str(allocation),
            bool(ecsq),
            bool(ecsq_tier2),
            bool(keys_ecsq),
            bool(wide_lanes),
            None if slot_align is None else _index(slot_align, "slot_align"),
            bool(keys_wstep),
        )

    @property
    def rope(self) -> Optional[Tuple[float, int, str]]:
        """The RoPE spec keys are stored under, ``(theta, rotary_dims, pairing)``, or
        None."""
        return self._c.rope

    @property
    def head_dim(self) -> int:
        """Values per token position."""
        return self._c.head_dim

    @property
    def tokens_per_block(self) -> int:
        """Token positions per store block."""
        return self._c.tokens_per_block

    @property
    def path(self) -> str:
        """The collection directory."""
        return str(self._c.path)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._c.closed

    def _bytes(self, values: Any, where: str) -> Tuple[np.ndarray, int]:
        """``(little-endian float bytes, itemsize)`` of a ``[tokens, head_dim]`` array of
        real floats; the native side converts to float16 and checks the range (one pass,
        no numpy temporaries on the decode path)."""
        arr = real_float_array(values, where)
        if is_bfloat16(arr.dtype):
            arr = arr.astype(np.float32)  # exact; the native side rounds to float16
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or arr.shape[1] != self._head_dim or arr.shape[0] == 0:
            raise InvalidArgumentError(
                f"{where}: expected a [tokens, {self._head_dim}] array, got shape {arr.shape}"
            )
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        arr = np.ascontiguousarray(arr)
        return arr.reshape(-1).view(np.uint8), arr.dtype.itemsize

    def append_batch(
        self, items: Iterable[Tuple[int, int, str, Any]], *, clip: bool = False
    ) -> None:
        """Append ``(layer, head, kind, values[tokens, head_dim])`` items as one store
        batch (one log append and, per the durability policy, one sync). All or nothing:
        on any error nothing is appended.

        Values are stored as float16. They must be real floating values (float16,
        float32, float64, or ``ml_dtypes.bfloat16``): any other dtype raises
        :class:`tensorvault.DTypeError` (a ``TypeError``) naming it, since a cast would
        silently drop imaginary parts, turn None into NaN or datetimes into numbers.
        Values beyond float16's ±65504 (infinities included) raise
        :class:`InvalidArgumentError` (a ``ValueError``) naming the first one's index,
        unless ``clip=True``, which saturates them to ±65504. NaN is always refused
        (``InvalidArgumentError`` naming the layer, head and token): a NaN block could
        never be quantized by tiering."""
        native = []
        for layer, head, kind, values in items:
            layer, head, kind = _index(layer, "layer"), _index(head, "head"), _kind(kind)
            where = f"L{layer}.H{head}.{kind}"
            native.append((layer, head, kind, *self._bytes(values, where)))
        if not native:
            raise InvalidArgumentError("append_batch needs at least one item")
        self._c.append_batch(native, bool(clip))

    def append(self, layer: int, head: int, kind: str, values: Any, *, clip: bool = False) -> int:
        """Append token positions to one tensor; returns its token count after. Values
        and ``clip`` as for :meth:`append_batch`."""
        self.append_batch([(layer, head, kind, values)], clip=clip)
        return self.tokens(layer, head, kind)

    def tokens(self, layer: int, head: int, kind: str) -> int:
        """Token positions stored for (layer, head, kind) (0 if none)."""
        return self._c.tokens(_index(layer, "layer"), _index(head, "head"), _kind(kind))

    def read(
        self, layer: int, head: int, kind: str, start: int = 0, end: Optional[int] = None
    ) -> np.ndarray:
        """Token positions ``start:end`` (default: all) as a float16
        ``[end - start, head_dim]`` array, each block decoded from its current tier.
        Counts as an access for tiering."""
        layer, head, kind = _index(layer, "layer"), _index(head, "head"), _kind(kind)
        if end is None:
            end = self._c.tokens(layer, head, kind)
        start, end = _index(start, "start"), _index(end, "end")
        raw = self._c.read(layer, head, kind, start, end)
        return raw.view(_F16).reshape(-1, self._head_dim)

    def pin(self, layer: int, head: int, kind: str, block_index: int) -> bool:
        """Keep one block where it is (tiering skips it); True if newly pinned, False if
        it was pinned already.

        Raises:
            NotFoundError: the tensor has no block ``block_index`` (yet).
        """
        return self._c.pin(
            _index(layer, "layer"), _index(head, "head"), _kind(kind), _index(block_index, "block_index")
        )

    def unpin(self, layer: int, head: int, kind: str, block_index: int) -> bool:
        """Undo :meth:`pin`; True if it was pinned (False for a block that does not
        exist)."""
        return self._c.unpin(
            _index(layer, "layer"), _index(head, "head"), _kind(kind), _index(block_index, "block_index")
        )

    @property
    def age_tiers(self) -> Optional[Tuple[int, int, int]]:
        """The age policy ``(tier0_tokens, tier1_tokens, tier2_tokens)``, or None."""
        return self._c.age_tiers

    def maintain(self, budget: int = 1024) -> Dict[str, Any]:
        """One tiering step: the age policy (if any) demotes full blocks by age, then the
        store's access-based step makes at most ``budget`` block moves. The report's
        ``age_moved`` lists the blocks the age policy moved into tiers 0-3; ``summary``
        has every move of the step in one place (age and access moves) and prints as a
        table. ``held`` lists the blocks left in their tier because a colder tier cannot
        encode their values (NaN or infinity, which appends refuse but an older build may
        have stored): ``{"tensor", "tensor_id", "block", "tier", "target_tier",
        "non_finite", "reason"}``; they never stop the other blocks from moving."""
        return MaintainReport(self._c.maintain(_index(budget, "budget")))

    def stats(self) -> Dict[str, Any]:
        """The store's statistics (blocks, payload bytes and file usage per tier, ...),
        printed as a table per tier; ``held_blocks`` counts blocks tiering leaves in
        their tier because their values cannot be quantized (see :meth:`maintain`)."""
        return StoreStats(self._c.stats())

    def flush(self) -> None:
        """Make everything appended so far durable."""
        self._c.flush()

    def close(self) -> None:
        """Flush and release the collection (idempotent)."""
        self._c.close()

    def __enter__(self) -> "KvCache":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " (closed)" if self.closed else ""
        return f"<tensorvault KvCache head_dim={self._head_dim} at {self.path}{state}>"
