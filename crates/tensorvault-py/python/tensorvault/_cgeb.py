"""CGEB fused-embedding records: one record to/from bytes, and batch files.

A record is a 64-byte header, the vector, the expert weights, the selected experts and
optional aux data, hashed with xxh3-64. Batch files (``NAME.cgeb`` + ``NAME.cgei``) put
records at 4096-byte multiples for direct-to-GPU reads; :class:`BatchReader` maps them
and hands out read-only numpy views (no copy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence, Tuple

import numpy as np

from . import _tensorvault as _native
from ._common import PathLike, fspath
from ._errors import InvalidArgumentError


@dataclass(frozen=True)
class Embedding:
    """One fused embedding.

    Attributes:
        vector: float32 array (``dimension`` values). From a :class:`BatchReader` it is a
            read-only view into the mapped file (dtype ``>f4`` for big-endian records).
        expert_weights: float32 array (one weight per expert).
        selected_experts: uint8 array (indices of the top-k experts).
        pipeline_latency_us: Pipeline latency in microseconds.
        content_hash: xxh3-64 of the stored bytes after the header (0 before encoding).
        aux_data: Optional aux bytes (decompressed).
    """

    vector: np.ndarray
    expert_weights: np.ndarray
    selected_experts: np.ndarray
    pipeline_latency_us: int = 0
    content_hash: int = 0
    aux_data: Optional[bytes] = None


def _f32_1d(a: Any, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind != "f":
        raise InvalidArgumentError(f"{name} must be a float array, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise InvalidArgumentError(f"{name} must be 1-D, got shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def _u8(a: Any, name: str, ndim: int) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{name} must be an integer array, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise InvalidArgumentError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() > 255):
        raise InvalidArgumentError(f"{name} values must be in 0..255")
    return np.ascontiguousarray(arr, dtype=np.uint8)


def encode_embedding(
    vector: Any,
    expert_weights: Any,
    selected_experts: Any,
    pipeline_latency_us: int = 0,
    aux_data: Optional[bytes] = None,
    *,
    aux_compression: Optional[str] = None,
    little_endian: bool = False,
) -> bytes:
    """Encode one embedding as a CGEB record (big-endian payload unless
    ``little_endian``; aux data stored as is, or ``"lz4"``/``"zstd"`` compressed).

    Raises:
        InvalidArgumentError: bad shapes, more than 255 experts, top-k above the expert
            count, a selected index out of range.
    """
    return _native.cgeb_encode(
        _f32_1d(vector, "vector"),
        _f32_1d(expert_weights, "expert_weights"),
        _u8(selected_experts, "selected_experts", 1),
        int(pipeline_latency_us),
        None if aux_data is None else bytes(aux_data),
        aux_compression,
        bool(little_endian),
    )


def decode_embedding(data: bytes, verify: bool = True) -> Embedding:
    """Decode one CGEB record into an :class:`Embedding` of native float32 arrays.

    Raises:
        InvalidFormatError: bad magic, truncation, unknown flags, out-of-range fields.
        CorruptionError: the content hash does not match (when ``verify``).
    """
    return Embedding(*_native.cgeb_decode(bytes(data), bool(verify)))


def write_batch(
    path: PathLike,
    vectors: Any,
    expert_weights: Any,
    selected_experts: Any,
    pipeline_latency_us: Optional[Sequence[int]] = None,
    *,
    alignment: int = 4096,
    little_endian: bool = False,
) -> Tuple[str, str]:
    """Write ``n`` records as a batch: ``NAME.cgeb`` (records at multiples of
    ``alignment``, 4096 or 64) and ``NAME.cgei`` (index). Returns both paths.

    Args:
        vectors: ``(n, dimension)`` floats.
        expert_weights: ``(n, num_experts)`` floats.
        selected_experts: ``(n, top_k)`` integers in ``0..num_experts``.
        pipeline_latency_us: ``n`` latencies (zeros by default).
    """
    v = np.asarray(vectors)
    w = np.asarray(expert_weights)
    if v.ndim != 2 or w.ndim != 2:
        raise InvalidArgumentError("vectors and expert_weights must be 2-D")
    d, i = _native.cgeb_write_batch(
        fspath(path),
        np.ascontiguousarray(v, dtype=np.float32),
        np.ascontiguousarray(w, dtype=np.float32),
        _u8(selected_experts, "selected_experts", 2),
        None if pipeline_latency_us is None else [int(x) for x in pipeline_latency_us],
        int(alignment),
        bool(little_endian),
    )
    return str(d), str(i)


class BatchReader:
    """A CGEB batch opened through a read-only memory map.

    ``len(reader)`` records; ``reader[i]`` is record ``i``'s vector as a read-only numpy
    view into the map (no copy; the view keeps the map alive); iterating yields every
    vector. :meth:`record` gives every field.
    """

    def __init__(
        self, path: PathLike, verify_data_hash: bool = True, verify_records: bool = True
    ) -> None:
        """Open ``path`` (``NAME``, ``NAME.cgeb`` or ``NAME.cgei``).

        Raises:
            NotFoundError: a file of the pair is missing.
            InvalidFormatError: a malformed index or record.
            CorruptionError: the data file's hash does not match the index.
        """
        self._r = _native.BatchReader(fspath(path), bool(verify_data_hash), bool(verify_records))

    def __len__(self) -> int:
        return len(self._r)

    def __getitem__(self, i: int) -> np.ndarray:
        return self._r[i]

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(len(self._r)):
            yield self._r[i]

    def record(self, i: int) -> Embedding:
        """Record ``i`` with every field (arrays are read-only views into the map)."""
        return Embedding(*self._r.record_fields(i))

    def vectors(self) -> np.ndarray:
        """Every vector as one ``(n, dimension)`` native float32 array (decoded copy)."""
        return self._r.vectors()

    def verify(self) -> dict:
        """Check the data-file hash, every record, the batch layout (zero bytes between a
        record's end and the next offset, the file ending at the last record's end) and
        the vectors' 64-byte alignment: ``valid``, ``records``, ``bad_records``,
        ``misaligned_vectors``, hashes. Reading a record (``reader[i]``) enforces the
        same layout rules (``InvalidFormatError`` naming the record and offset)."""
        return self._r.verify()

    @property
    def offsets(self) -> list:
        """Record offsets in the data file."""
        return self._r.offsets

    def __repr__(self) -> str:
        return repr(self._r)


__all__ = ["Embedding", "encode_embedding", "decode_embedding", "write_batch", "BatchReader"]
