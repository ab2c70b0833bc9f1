"""The temporal tensor store: named tensors in one collection directory, each kept raw
(tier 0, bit-exact) or groupwise-quantized (tier 1: 8-bit, tier 2: 5-bit, tier 3: 3-bit)
in fixed-size blocks, with CRC-protected metadata replayed on open and tiering that
moves cold blocks to fewer bits.

A collection lives in ``<root>/<tenant>/<collection>/``; one :class:`Store` (in one
process) holds it at a time. Reads return numpy arrays over the Rust buffer the store
decoded into (no copy); every store call runs with the GIL released.
"""

from __future__ import annotations

import operator
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from . import _tensorvault as _native
from ._common import F32_MAX, PathLike, check_range, fspath, index_arg, is_bfloat16
from ._errors import DTypeError, InvalidArgumentError
from ._reports import MaintainReport, StoreStats

#: Most dimensions a stored tensor may have.
MAX_NDIM = 8

# numpy dtype -> (store dtype name, little-endian numpy dtype the bytes are read as)
_STORED = {
    "float32": np.dtype("<f4"),
    "float16": np.dtype("<f2"),
    "int8": np.dtype("i1"),
    "uint8": np.dtype("u1"),
}


def _tier(tier: Any) -> int:
    if isinstance(tier, bool):
        raise InvalidArgumentError(f"tier must be an int 0..3, got {tier!r}")
    try:
        t = operator.index(tier)
    except TypeError as e:
        raise InvalidArgumentError(f"tier must be an int 0..3, got {tier!r}") from e
    if not 0 <= t <= 3:
        raise InvalidArgumentError(
            f"tier {t} does not exist: 0 (raw, bit-exact), 1 (8-bit), 2 (5-bit) or 3 (3-bit)"
        )
    return t


def _as_stored(array: Any, name: str, clip: bool = False):
    """``(store dtype name, shape, 1-D uint8 view of the little-endian elements)``.

    Real floating dtypes (float16, float32, float64 stored as float32, ml_dtypes'
    bfloat16) and int8 / uint8 are stored; anything else raises :class:`DTypeError`.
    float64 values beyond float32's range raise ``InvalidArgumentError`` unless ``clip``.
    """
    arr = np.asarray(array)
    if arr.ndim == 0:
        raise InvalidArgumentError(
            f"tensor {name!r}: a 0-d array (scalar) cannot be stored; "
            "pass np.atleast_1d(x) or x.reshape(1)"
        )
    if arr.ndim > MAX_NDIM:
        raise InvalidArgumentError(
            f"tensor {name!r}: {arr.ndim} dimensions, the store keeps at most {MAX_NDIM}"
        )
    if arr.size == 0:
        raise InvalidArgumentError(f"tensor {name!r}: shape {arr.shape} has no elements")
    dt = arr.dtype
    if is_bfloat16(dt):
        return "bfloat16", [int(d) for d in arr.shape], np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    if dt.kind == "f" and dt.itemsize == 8:
        kind = "float32"  # float64 is stored as float32 (numpy's rounding)
        arr = check_range(arr, f"tensor {name!r}", F32_MAX, "float32", clip)
    elif dt.kind == "f" and dt.itemsize == 4:
        kind = "float32"
    elif dt.kind == "f" and dt.itemsize == 2:
        kind = "float16"
    elif dt.kind == "i" and dt.itemsize == 1:
        kind = "int8"
    elif dt.kind == "u" and dt.itemsize == 1:
        kind = "uint8"
    else:
        raise DTypeError(
            f"tensor {name!r}: dtype {dt} cannot be stored: use float32, float16, bfloat16 "
            "(ml_dtypes), int8 or uint8 (float64 is converted to float32)"
        )
    # No copy for C-contiguous little-endian input; otherwise numpy copies (and converts).
    arr = np.ascontiguousarray(arr, dtype=_STORED[kind])
    return kind, [int(d) for d in arr.shape], arr.reshape(-1).view(np.uint8)


def _from_stored(info: Dict[str, Any], raw: np.ndarray) -> np.ndarray:
    shape = tuple(info["shape"])
    dtype = info["dtype"]
    if dtype == "bfloat16":
        # numpy has no bfloat16: widen to float32 (exact; this one is a copy).
        wide = raw.view("<u2").astype(np.uint32) << 16
        return wide.view(np.float32).reshape(shape)
    return raw.view(_STORED[dtype]).reshape(shape)


class Store:
    """One collection of the temporal tensor store, opened for reading and writing.

    Args:
        root: Store root directory.
        tenant: Tenant name (1-128 of ``[A-Za-z0-9._-]``, not starting with ``.``).
        collection: Collection name (same rules).
        create: Create the collection if it does not exist (else ``NotFoundError``).
        durability: ``"every-write"`` (fsync before each put returns; default),
            ``"every-N"`` or an int ``N`` (fsync every N writes and on flush/close), or
            ``"os"`` (never fsync explicitly).
        max_blocks_per_tier: Four limits (``None`` = unlimited) on live blocks per tier;
            a put or :meth:`maintain` moves the coldest blocks of a full tier down.
        block_elems: Elements per block when the collection is created (default 4096;
            ignored for an existing collection, whose geometry is fixed).
        kv_head_dim: Create the collection with the KV-cache layout instead: 32 KiB f16
            blocks of whole tokens of this head dimension, room for the first token in
            f16 (the attention sink) in quantized tiers.
        codec: Codec of a new collection's quantized tiers: 2 (default; asymmetric
            groups laid out by ``kind``), 3 (as 2, but ``embedding`` tensors are rotated
            in power-of-two sub-blocks of each row by a seeded randomized Hadamard
            transform and coded with Lloyd-Max levels) or 1 (the symmetric
            codec of collections created before codec v2, for comparisons). Existing
            collections keep theirs.

        read_only: Open a snapshot of an existing collection for reading: no lock is
            taken, so it opens at once while another ``Store`` (in this process or
            another) writes, and nothing is ever written (puts, deletes and
            :meth:`maintain` raise). It sees the collection as of the open; reopen to see
            later writes. ``create`` is ignored.
        entropy: Create the collection with tier 2 and 3 blocks entropy-coded (TQTC
            version 5: lossless rANS over the quantized codes, kept where shorter): the
            same values in about 0.2-0.4 fewer bits per value of payload, read ~5x
            slower than plain codes. Existing collections keep their setting
            (``geometry["entropy"]``).
        allocation: ``"slot"`` (default) or ``"extent"``: with ``"extent"`` a new
            collection gives each block ``roundup(payload, slot_align)`` bytes of its
            tier file instead of a worst-case slot, so entropy-coded and short blocks
            take less disk (``stats()["usage"][t]["live_bytes"]`` /
            ``["allocated_bytes"]``). Older builds refuse such a collection. Existing
            collections keep theirs (``geometry["allocation"]``).
        ecsq: With ``codec=4`` and ``entropy=True``, create the collection with
            ``weight`` and ``embedding`` tensors at tiers 2 and 3 stored as entropy-coded
            uniform levels, the step searched per block so the payload fills the tier's
            slot: less error than codec 4's super-blocks in the same bytes (e.g.
            all-MiniLM-L6-v2's weights 3.7% instead of 4.1% at tier 2, 13.2% instead of
            14.7% at tier 3). Existing collections keep theirs (``geometry["ecsq"]``).
        row_gains: With ``codec=4``, create the collection with every quantized block of
            an ``embedding`` tensor carrying one gain per row (TQTC version 6) that makes
            each row's decoding an unbiased inner-product estimate (``<x, x_hat> =
            |x|^2``), in the same slots: nearest-neighbour recall@10 on SmolLM2's token
            table at tier 3 .815 -> .854 (with ``ecsq=True``). Combines with ``ecsq``.
            Existing collections keep theirs (``geometry["row_gains"]``).
        ecsq_model: With ``ecsq=True``, create the collection with ``weight`` and
            ``embedding`` tensors at tiers 1, 2 and 3 stored as model-coded ECSQ (TQTC
            version 7): the rANS frequencies come from a Gaussian model with one byte per
            rotation block instead of a stored table, so 10 / 7 / 6-bit codes fit the
            slots: less error in the same bytes. Combines with ``row_gains``. Existing
            collections keep theirs (``geometry["ecsq_model"]``).
        centre: With ``codec=4`` and ``row_gains=True``, create the collection with 2-D
            ``embedding`` tensors stored centred: the store computes each table's column
            mean at put, keeps it as the tensor's side record, codes the rows less the
            mean (row gains against the original rows) and adds it back on every read.
            Less error and better recall in the same slots on tables with a large mean
            row (bench/RESULTS.md, "Session 14: emb-centre"). Existing collections keep
            theirs (``geometry["centre"]``).
        wide_lanes: With ``entropy=True``: write the entropy-coded
            blocks of KV and generic tensors with 64 interleaved rANS lanes instead of 4;
            reads decode them with AVX-512 or AVX2 about 3x faster (a whole block read
            1.7-2.2x faster; the same values, about
            180 more payload bytes per 16384-value block; bench/RESULTS.md "Session 15:
            rans-wide"). Persisted with the collection (MetaLog header flags2 bit 1:
            builds before session 15 refuse to open it); raises
            :class:`tensorvault.InvalidArgumentError` without entropy coding. Existing
            collections keep theirs (``geometry["wide_lanes"]``).
        slot_align: Byte alignment of a new collection's slots and extents, a power of two
            in 8..=2^20 (default 64). With ``allocation="extent"`` each block's payload is
            rounded up to it on disk, so a smaller unit wastes less. Existing collections
            keep theirs (``geometry["slot_align"]``).

    Use it as a context manager (``with tv.Store(...) as s:``) or call :meth:`close`;
    a writable collection stays locked until then (a second writable ``Store`` on it, in
    this process or another, raises ``LockedError`` saying which).

    Raises:
        InvalidArgumentError: a bad name or option, or the collection is open elsewhere.
        NotFoundError: ``create=False`` and no such collection.
        CorruptionError / InvalidFormatError: the metadata log cannot be replayed.
    """

    def __init__(
        self,
        root: PathLike,
        tenant: str,
        collection: str,
        create: bool = True,
        durability: Union[str, int] = "every-write",
        *,
        max_blocks_per_tier: Optional[Sequence[Optional[int]]] = None,
        block_elems: Optional[int] = None,
        kv_head_dim: Optional[int] = None,
        codec: Optional[int] = None,
        read_only: bool = False,
        entropy: bool = False,
        allocation: str = "slot",
        ecsq: bool = False,
        row_gains: bool = False,
        ecsq_model: bool = False,
        centre: bool = False,
        wide_lanes: bool = False,
        slot_align: Optional[int] = None,
    ) -> None:
        if isinstance(durability, int) and not isinstance(durability, bool):
            durability = f"every-{durability}"
        if not isinstance(durability, str):
            raise InvalidArgumentError(f"durability must be a str or an int, got {durability!r}")
        limits = None if max_blocks_per_tier is None else list(max_blocks_per_tier)
        self._s = _native.Store(
            fspath(root), str(tenant), str(collection), bool(create), durability, limits,
            block_elems, kv_head_dim, codec, bool(read_only), bool(entropy), str(allocation),
            bool(ecsq), bool(row_gains), bool(ecsq_model), bool(centre), bool(wide_lanes),
            None if slot_align is None else index_arg(slot_align, "slot_align"),
        )

    @property
    def path(self) -> str:
        """The collection directory ``<root>/<tenant>/<collection>``."""
        return str(self._s.path)

    @property
    def tenant(self) -> str:
        """The tenant name."""
        return self._s.tenant

    @property
    def collection(self) -> str:
        """The collection name."""
        return self._s.collection

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._s.closed

    @property
    def geometry(self) -> Dict[str, Any]:
        """The collection's fixed geometry: ``block_elems``, ``tier0_elem_bytes``,
        ``tier_bits`` and ``group_size`` of tiers 1-3, ``slot_align``."""
        return self._s.geometry

    def put_tensor(
        self, name: str, array: Any, tier: int = 0, kind: str = "generic", *, clip: bool = False
    ) -> Dict[str, Any]:
        """Store ``array`` as the tensor ``name`` in ``tier``, replacing any tensor of
        that name. The default, tier 0, is lossless; the quantized tiers are a choice
        made explicitly (``tier=1``, ``2`` or ``3``).

        Accepts float32, float16, ``ml_dtypes.bfloat16``, int8 and uint8 arrays of 1 to 8
        dimensions (float64 is converted to float32: a value beyond float32's range
        raises ``InvalidArgumentError`` unless ``clip=True`` saturates it; non-contiguous
        or big-endian input is copied first). Other dtypes (complex, object, datetime,
        bool, str, wider integers) raise :class:`tensorvault.DTypeError`, a
        ``TypeError``. Tier 0 keeps the elements bit-exact, NaN (payload included) and
        infinities too; tiers 1, 2 and 3 quantize them to 8, 5 and 3 bits per value in
        asymmetric groups (codec v2: a min and a scale per group, the error of an
        element at most half its group's step), and integer dtypes read back rounded to
        the nearest integer. A quantized tier cannot hold NaN or infinity: such a put
        raises ``InvalidArgumentError`` naming the block, the count and the first
        element, and :meth:`maintain` leaves a tier-0 block holding them where it is
        (listed in its report's ``held``).

        ``kind`` says what the tensor holds and picks how the groups are laid out over
        its last dimension (the rows): ``"generic"`` (default): along the rows, min/max
        ranges (fastest); ``"weight"`` and ``"embedding"``: along the rows, with an
        error-minimising clip search (slower encode, lower error); ``"kv_key"``
        (``[tokens, head_dim]``): per channel over groups of tokens; ``"kv_value"``:
        along each token. For KV kinds the first token is kept in f16 when the
        collection was created with the KV layout. Collections created before codec v2
        encode every kind alike.

        Returns:
            The tensor's info dict (see :meth:`tensors`).

        Raises:
            DTypeError: a dtype the store does not keep (also a TypeError).
            InvalidArgumentError: bad name (empty, over 100 bytes, control characters),
                0-d or empty array, more than 8 dimensions, tier not 0-3, NaN/inf in a
                quantized tier, float64 beyond float32's range without ``clip``,
                unknown kind.
            CapacityError: the tier is full and nothing can be moved out of it.
        """
        if not isinstance(name, str):
            raise InvalidArgumentError(f"tensor name must be a str, got {type(name).__name__}")
        if not isinstance(kind, str):
            raise InvalidArgumentError(f"kind must be a str, got {type(kind).__name__}")
        dtype, shape, raw = _as_stored(array, name, bool(clip))
        return self._s.put_tensor(name, dtype, shape, raw, _tier(tier), kind)

    def get_tensor(self, name: str) -> np.ndarray:
        """Read the tensor ``name`` back with its stored dtype and shape.

        The array owns the Rust buffer the store decoded into (no copy; its ``base`` is
        a ``StoreBuffer``) and is writable. bfloat16 tensors (written from Rust or from
        ``ml_dtypes.bfloat16`` arrays) come back widened to float32.

        Raises:
            NotFoundError: no tensor of that name.
            CorruptionError: a block fails its checksum (and cannot be rebuilt) or does
                not decode.
        """
        info, raw = self._s.get_tensor(str(name))
        return _from_stored(info, raw)

    def tensors(self) -> List[Dict[str, Any]]:
        """Every stored tensor, sorted by name: dicts of ``name``, ``tensor_id``,
        ``dtype`` (numpy name), ``shape``, ``blocks``, ``expected_blocks``,
        ``tier_blocks`` (blocks in tiers 0-3), ``stored_bytes``, ``raw_bytes``."""
        return self._s.tensors()

    def delete_tensor(self, name: str) -> int:
        """Delete the tensor ``name``; returns how many blocks it had (0 if none)."""
        return self._s.delete_tensor(str(name))

    def migrate_tensor(self, name: str, tier: int) -> int:
        """Move every block of ``name`` to ``tier`` (re-encoding it); returns how many
        blocks moved. Moving to a colder tier loses precision; moving back does not
        restore it.

        Raises:
            NotFoundError: no tensor of that name.
            InvalidArgumentError: a block holds NaN or infinity and ``tier`` quantizes
                (the error names the block; blocks of the same batch stay where they
                were). :meth:`maintain` holds such blocks instead of failing.
        """
        return self._s.migrate_tensor(str(name), _tier(tier))

    def stats(self) -> Dict[str, Any]:
        """Store-wide numbers: ``tensors``; per tier 0-3 ``blocks``, ``payload_bytes``,
        ``raw_bytes`` and ``usage`` (``slot_len``; ``alloc_unit``, the slot length or,
        with ``allocation="extent"``, 64 bytes; ``slots`` and ``free_slots`` in those
        units; ``live_bytes``, what the live blocks take in the file, their slots or
        extents; ``bytes`` of the tier file and ``allocated_bytes`` on disk);
        ``log_records``; counters since open (``reads``,
        ``writes``, ``migrations``, ``deletes``, ``checksum_failures``); replay numbers
        of the open (``replay_nanos``, ``replay_skipped``, ``replay_ignored``);
        ``held_blocks``, blocks tiering found it cannot move (NaN or infinity, see
        :meth:`maintain`). Prints as a table per tier."""
        return StoreStats(self._s.stats())

    def maintain(self, budget: int = 1024) -> Dict[str, Any]:
        """One tiering step: score every block, then carry out at most ``budget``
        migrations (capacity evictions, cold blocks demoted, hot ones promoted).

        Returns:
            ``{"now", "scored", "moves", "deferred", "over_capacity", "plan_nanos",
            "summary", "moved", "held"}``; each move is ``{"tensor", "tensor_id", "block",
            "from_tier", "to_tier", "score", "reason"}`` with reason ``"capacity"``,
            ``"cold"`` or ``"hot"``; ``summary`` counts them per (from, to, reason) and
            prints as a table (:class:`tensorvault.MaintainReport`). ``held`` lists the
            blocks left in their tier because a colder tier cannot encode their values
            (NaN or infinity in a tier-0 tensor): ``{"tensor", "tensor_id", "block",
            "tier", "target_tier", "non_finite", "reason"}``; the other blocks move as
            usual, and a held block is not tried again until it is rewritten.
        """
        b = operator.index(budget)
        if b < 0:
            raise InvalidArgumentError(f"budget must be >= 0, got {b}")
        return MaintainReport(self._s.maintain(b))

    def verify(self) -> List[Dict[str, Any]]:
        """Read and checksum every block. Returns one dict per defect; an empty list
        means the store is intact. A corrupt or lost block is ``kind="block"``
        (``tensor``, ``tensor_id``, ``block``, ``tier``, ``offset`` in the tier file,
        ``error``); a valid ``meta.log`` record replay could not use (an impossible slot
        or shape, a block that is not live) is ``kind="log_record"`` (``tensor_id``,
        ``block``, ``record``, ``log_offset``, ``error``; ``tier`` and ``offset`` None)."""
        return self._s.verify()

    def flush(self) -> None:
        """Make everything written so far durable (data, log, names, access stats)."""
        self._s.flush()

    def close(self) -> None:
        """Flush and release the collection; later calls raise InvalidArgumentError.
        Closing twice is a no-op."""
        self._s.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __contains__(self, name: object) -> bool:
        return any(t["name"] == name for t in self._s.tensors())

    def __len__(self) -> int:
        return len(self._s.tensors())

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<tensorvault.Store {self.tenant}/{self.collection} at {self.path!r} ({state})>"


__all__ = ["Store", "MAX_NDIM"]
