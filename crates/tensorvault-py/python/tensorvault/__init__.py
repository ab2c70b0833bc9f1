"""tensorvault: embeddings and model weights on disk, small, fast to load and verifiable.

numpy in, numpy out. Decoding and I/O run in Rust with the GIL released, and returned
arrays own their Rust-allocated memory (no copy after decoding) or are read-only views
of a memory map kept alive by the array.

* CVC compressed vector collections, a drop-in for ``decompressed`` 2.1.1:
  :func:`pack_cvc`, :func:`pack_cvc_sections`, :func:`load_cvc` (plus ``rows=(a, b)``),
  :func:`load_cvc_chunked`, :func:`load_cvc_range`, :func:`get_cvc_info`,
  :func:`validate_cvc`, :func:`validate_cvc_integrity`, :class:`CvcWriter` (streaming).

* CGEB fused-embedding records: :func:`encode_embedding`, :func:`decode_embedding`,
  :func:`write_batch` and :class:`BatchReader` (read-only numpy views into the map).

* The weight registry: :class:`Registry` (versions, checkpoints as dicts of numpy
  views into the mapped safetensors file, save, rollback, deterministic init) and
  :func:`load_checkpoint` for one checkpoint directory; :class:`ModelRegistry` for any
  safetensors checkpoint (single file or sharded Hugging Face directory, any dtype).

* The temporal tensor store: :class:`Store` (named tensors kept raw or quantized to
  8/5/3 bits in tiers; ``put_tensor``, ``get_tensor`` as numpy over Rust memory,
  ``stats``, ``maintain`` for tiering, ``verify``).

* MOBI model files: :func:`read_mobi` into a :class:`MobiModel` (metadata, I/O specs,
  tensors as numpy, operators) and :meth:`MobiModel.save` back; :func:`convert_onnx`
  converts an ONNX model to MOBI; :func:`open_mobi_session` opens a file straight into
  a runtime session (f32 weights used in place from the memory map).

Errors are :class:`TensorvaultError` subclasses carrying the Rust error's message.
"""

from __future__ import annotations

from . import _tensorvault
from ._cgeb import BatchReader, Embedding, decode_embedding, encode_embedding, write_batch
from ._cvc import (
    CvcFile,
    CvcWriter,
    detect_version,
    get_cvc_info,
    load_cvc,
    load_cvc_chunked,
    load_cvc_range,
    pack_cvc,
    pack_cvc_sections,
    validate_cvc,
    validate_cvc_integrity,
)
from ._mobi import IoSpec, MobiModel, Operator, Tensor, example_model, open_mobi_session, read_mobi
from ._onnx import convert_onnx
from ._registry import Model, ModelRegistry, Registry, Weights, bf16_to_f32, load_checkpoint
from ._store import Store
from ._reports import MaintainReport, StoreStats
from ._kv import KvCache
from ._prefix import PrefixCache
from ._errors import (
    CapacityError,
    LockedError,
    CorruptedChunkError,
    CorruptionError,
    DTypeError,
    FrameworkNotAvailableError,
    InvalidArgumentError,
    InvalidFormatError,
    NotFoundError,
    StorageError,
    TensorvaultError,
    UnsupportedError,
    UnsupportedFormatError,
)

__version__: str = _tensorvault.__version__

__all__ = [
    "MaintainReport",
    "StoreStats",
    "pack_cvc",
    "pack_cvc_sections",
    "load_cvc",
    "load_cvc_chunked",
    "load_cvc_range",
    "get_cvc_info",
    "detect_version",
    "validate_cvc",
    "validate_cvc_integrity",
    "CvcWriter",
    "CvcFile",
    "Embedding",
    "encode_embedding",
    "decode_embedding",
    "write_batch",
    "BatchReader",
    "Registry",
    "ModelRegistry",
    "Model",
    "bf16_to_f32",
    "Store",
    "KvCache",
    "PrefixCache",
    "MobiModel",
    "IoSpec",
    "Tensor",
    "Operator",
    "read_mobi",
    "open_mobi_session",
    "example_model",
    "convert_onnx",
    "Weights",
    "load_checkpoint",
    "TensorvaultError",
    "NotFoundError",
    "InvalidFormatError",
    "UnsupportedFormatError",
    "CorruptionError",
    "CorruptedChunkError",
    "DTypeError",
    "InvalidArgumentError",
    "StorageError",
    "CapacityError",
    "LockedError",
    "UnsupportedError",
    "FrameworkNotAvailableError",
    "__version__",
]
