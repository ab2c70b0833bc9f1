"""Exception classes of tensorvault.

Every error raised by the native code is a :class:`TensorvaultError` whose message is
the Rust error's message (naming the file, field and byte offset where that applies).
Each subclass also derives from the builtin exception a Python caller would expect, so
``except ValueError`` or ``except FileNotFoundError`` keep working.
"""

from __future__ import annotations


class TensorvaultError(Exception):
    """Base class of every tensorvault error."""


class NotFoundError(TensorvaultError, FileNotFoundError):
    """A file, version, tensor or record that does not exist."""


class InvalidFormatError(TensorvaultError, ValueError):
    """Bytes that are not a valid file of the format (bad magic, truncation, bad header,
    counts or lengths that do not add up)."""


class UnsupportedFormatError(InvalidFormatError):
    """A valid file of a version or encoding this build does not implement (for example
    decompressed's columnar CVC v2 or its "lossless" chunks)."""


class CorruptionError(TensorvaultError, ValueError):
    """Stored bytes whose checksum does not match (CRC-32, xxh3, SHA-256)."""


#: Name used by the reference package ``decompressed``.
CorruptedChunkError = CorruptionError


class InvalidArgumentError(TensorvaultError, ValueError):
    """A caller-supplied argument that cannot be used (shape, dtype, range, option)."""


class DTypeError(InvalidArgumentError, TypeError):
    """An array whose dtype a call does not take (complex, object, datetime, integer,
    bool, str where real floating values are needed). Both an
    :class:`InvalidArgumentError` and a ``TypeError``; the message names the dtype."""


class StorageError(TensorvaultError, OSError):
    """An I/O error other than a missing file (permissions, disk full, ...)."""


class CapacityError(StorageError):
    """A store tier is full (``max_blocks_per_tier``) and nothing can be moved out of
    it, or a payload does not fit the tier's slot."""


class LockedError(StorageError):
    """A store collection is held by another process: by another writer (opening for
    writing never waits for one), or by readers for longer than the open waited."""


class UnsupportedError(TensorvaultError, NotImplementedError):
    """A feature this build does not have, such as a GPU backend (``device="cuda"``)."""


class FrameworkNotAvailableError(TensorvaultError, ImportError):
    """``framework="torch"`` (or another framework) was asked for but is not installed."""


__all__ = [
    "TensorvaultError",
    "NotFoundError",
    "InvalidFormatError",
    "UnsupportedFormatError",
    "CorruptionError",
    "CorruptedChunkError",
    "InvalidArgumentError",
    "DTypeError",
    "StorageError",
    "CapacityError",
    "UnsupportedError",
    "FrameworkNotAvailableError",
]
