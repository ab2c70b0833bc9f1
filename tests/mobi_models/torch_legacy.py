"""Read a legacy (pre-1.6, non-zip) PyTorch ``torch.save`` file with Python's pickle only.

The legacy layout is a sequence of pickles followed by raw storage bytes:

1. the magic number ``0x1950a86a20f9469cfc6c``, 2. the protocol version (1001),
3. a sys-info dict (``little_endian``, type sizes), 4. the object itself (here a state
dict) whose tensors reference storages through ``persistent_load`` ids
``("storage", StorageType, key, location, numel, view_metadata)`` and are rebuilt by
``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)``, 5. a pickled
list of storage keys, then for each key in that order: ``numel`` as a little-endian
u64 and ``numel * element_size`` bytes of data.

Only what a plain state dict of float/int tensors needs is accepted: any other class in
the pickle is refused (no arbitrary code runs), and every size is checked against the
bytes present.
"""

from __future__ import annotations

import collections
import io
import pickle
import struct
from typing import BinaryIO, Dict, Tuple

import numpy as np

MAGIC = 0x1950A86A20F9469CFC6C
PROTOCOL = 1001
_STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class LegacyTorchError(ValueError):
    """The file is not a legacy torch save of a plain tensor dict."""


class _TensorRef:
    """A tensor not yet materialized: its storage key and view geometry."""

    def __init__(self, key: str, offset: int, size: Tuple[int, ...], stride: Tuple[int, ...]):
        self.key, self.offset, self.size, self.stride = key, offset, tuple(size), tuple(stride)


def _rebuild_tensor_v2(storage, offset, size, stride, *_rest):
    return _TensorRef(storage, offset, size, stride)


class _Unpickler(pickle.Unpickler):
    def __init__(self, f: BinaryIO):
        super().__init__(f)
        self.storages: Dict[str, Tuple[type, int]] = {}

    def find_class(self, module: str, name: str):
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor_v2
        if module == "torch" and name in _STORAGE_DTYPES:
            return name
        raise LegacyTorchError(f"class {module}.{name} is not allowed in a state dict")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage"):
            raise LegacyTorchError(f"unknown persistent id {pid!r:.80}")
        _, stype, key, _location, numel, view = pid
        if view is not None:
            raise LegacyTorchError(f"storage {key}: storage views are not supported")
        if stype not in _STORAGE_DTYPES or not isinstance(numel, int) or numel < 0:
            raise LegacyTorchError(f"storage {key}: bad type {stype!r} or size {numel!r}")
        self.storages[key] = (_STORAGE_DTYPES[stype], numel)
        return key


def load_state_dict(path: str) -> "collections.OrderedDict[str, np.ndarray]":
    """The state dict of a legacy torch save as numpy arrays (C-contiguous copies).

    Raises LegacyTorchError for anything but a legacy save of a tensor dict, and for
    sizes, offsets or strides that do not fit the storage bytes present.
    """
    with open(path, "rb") as f:
        data = f.read()
    view = memoryview(data)
    f = io.BytesIO(data)
    if pickle.load(f) != MAGIC:
        raise LegacyTorchError("not a legacy torch file (magic number)")
    if pickle.load(f) != PROTOCOL:
        raise LegacyTorchError("unsupported legacy protocol version")
    sys_info = pickle.load(f)
    if not isinstance(sys_info, dict) or not sys_info.get("little_endian", False):
        raise LegacyTorchError("only little-endian saves are supported")
    unp = _Unpickler(f)
    obj = unp.load()
    keys = pickle.load(f)
    if not isinstance(obj, dict) or not isinstance(keys, list):
        raise LegacyTorchError("the saved object is not a state dict")
    pos = f.tell()
    arrays: Dict[str, np.ndarray] = {}
    for key in keys:
        if key not in unp.storages:
            raise LegacyTorchError(f"storage {key} is listed but never referenced")
        dtype, numel = unp.storages[key]
        if pos + 8 > len(data):
            raise LegacyTorchError(f"storage {key}: truncated size field at offset {pos}")
        (stored,) = struct.unpack_from("<Q", data, pos)
        itemsize = np.dtype(dtype).itemsize
        if stored != numel or pos + 8 + stored * itemsize > len(data):
            raise LegacyTorchError(f"storage {key}: size {stored} at offset {pos} does not fit")
        arrays[key] = np.frombuffer(view[pos + 8 : pos + 8 + stored * itemsize], dtype=dtype)
        pos += 8 + stored * itemsize
    if pos != len(data):
        raise LegacyTorchError(f"{len(data) - pos} trailing bytes after the last storage")
    out: "collections.OrderedDict[str, np.ndarray]" = collections.OrderedDict()
    for name, ref in obj.items():
        if not isinstance(ref, _TensorRef):
            raise LegacyTorchError(f"{name}: not a tensor")
        if ref.key not in arrays:
            raise LegacyTorchError(f"{name}: storage {ref.key} has no data")
        storage = arrays[ref.key]
        span = 1 + sum((s - 1) * st for s, st in zip(ref.size, ref.stride) if s > 0)
        if any(s == 0 for s in ref.size):
            span = 0
        if ref.offset < 0 or min(ref.stride, default=1) < 0 or ref.offset + span > storage.size:
            raise LegacyTorchError(f"{name}: view outside storage {ref.key}")
        item = storage.itemsize
        t = np.lib.stride_tricks.as_strided(
            storage[ref.offset :],
            shape=ref.size,
            strides=tuple(st * item for st in ref.stride),
            writeable=False,
        )
        out[name] = np.ascontiguousarray(t)
    return out
