"""MOBI compact model files: read a model into Python objects and write one back.

A model is its metadata, input/output specs, constant tensors (numpy float32, already
dequantized; the stored dtype and quantization are kept as attributes) and operators
with typed parameters. Every read validates the whole file (CRC32s included).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Union

import numpy as np

from . import _errors
from . import _tensorvault as _native
from ._common import PathLike, fspath


@dataclass
class IoSpec:
    """A graph input or output: name, dtype name (``"f32"``, ``"int8"``, ...), shape.
    A shape entry is a size, or (format v2) a symbolic dimension's name such as ``"N"``
    (``""`` for an unnamed dynamic one; ``-1`` is accepted on write)."""

    name: str
    dtype: str
    shape: List[Union[int, str]]


@dataclass
class Tensor:
    """A constant tensor. ``values`` is float32 (dequantized); the other fields describe
    how it was stored: ``dtype``, ``quantization`` (``"none"``, ``"per-tensor"`` with
    ``scale``/``zero_point``, or ``"per-axis"`` with ``axis``, ``scales`` and
    ``zero_points``, one per slice along the axis) and ``gzip``."""

    id: int
    values: np.ndarray
    dtype: str = "f32"
    scale: Optional[float] = None
    zero_point: Optional[int] = None
    gzip: bool = False
    quantization: str = "none"
    axis: Optional[int] = None
    scales: Optional[List[float]] = None
    zero_points: Optional[List[int]] = None

    @property
    def shape(self) -> tuple:
        """The tensor's shape."""
        return tuple(self.values.shape)


@dataclass
class Operator:
    """One graph node: operator type name (``"Conv2D"``, ``"Relu"``, ...), input and
    output tensor ids, and parameters (int, float, str, or lists of ints/floats)."""

    op: str
    inputs: List[int]
    outputs: List[int]
    params: Dict[str, Any] = field(default_factory=dict)


@dataclass
class MobiModel:
    """A MOBI model: metadata, I/O specs, constant tensors and the operator graph."""

    name: str
    framework_version: int = 1
    created_unix: int = 0
    inputs: List[IoSpec] = field(default_factory=list)
    outputs: List[IoSpec] = field(default_factory=list)
    tensors: List[Tensor] = field(default_factory=list)
    operators: List[Operator] = field(default_factory=list)
    optimized: bool = False
    value_names: Dict[int, str] = field(default_factory=dict)
    format_version: int = 2

    def tensor(self, id: int) -> Tensor:
        """The constant tensor with ``id`` (KeyError if absent)."""
        for t in self.tensors:
            if t.id == id:
                return t
        raise KeyError(id)

    @property
    def parameter_count(self) -> int:
        """Values in all constant tensors."""
        return int(sum(t.values.size for t in self.tensors))

    def _to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["tensors"] = [
            {"id": t.id, "values": np.require(t.values, dtype=np.float32, requirements="C")}
            for t in self.tensors
        ]
        return d

    def save(self, path: PathLike, quantize: Optional[str] = None, gzip: bool = False) -> int:
        """Write the model atomically (format v2); ``quantize`` f32 tensors as ``"fp16"``
        (all of them), ``"int8"`` (per output channel for conv/FC weights),
        ``"int8-per-tensor"``, ``"uint8"`` or ``"int16"`` (one affine scale per tensor);
        integer targets leave 1-D and small (< 32 values) tensors in f32. ``gzip``
        payloads. Returns the bytes written."""
        return _native.mobi_write(fspath(path), self._to_dict(), quantize, bool(gzip))

    def to_bytes(self, quantize: Optional[str] = None, gzip: bool = False) -> bytes:
        """Encode the model as ``.mobi`` bytes (options as :meth:`save`)."""
        return _native.mobi_to_bytes(self._to_dict(), quantize, bool(gzip))

    def session(self) -> "_native.MobiSession":
        """Prepare the model for the reference runtime (weights as float32, every
        operator checked against the op table) and return the reusable session; its
        ``run(dict)`` takes C-contiguous float32/int64 arrays. The session is a snapshot:
        later edits to this model do not reach it.

        Raises:
            InvalidArgumentError: an operator the op table refuses.
        """
        ints = {
            t.id: np.array(t.values, dtype=np.int64, order="C")
            for t in self.tensors
            if t.dtype in ("i64", "i32")
        }
        return _native.MobiSession(self._to_dict(), ints)

    def _cache_key(self) -> tuple:
        return (
            tuple((t.id, id(t.values), t.values.shape, t.dtype) for t in self.tensors),
            repr(self.operators),
            repr(self.inputs),
            repr(self.outputs),
        )

    def run(self, inputs: Union[np.ndarray, Dict[str, np.ndarray]]) -> Dict[str, np.ndarray]:
        """Run the model with the reference runtime and return ``{output name: array}``
        for every graph output, in graph order.

        ``inputs`` is a dict ``{input name: array}``, or one array for a one-input model.
        Float arrays are computed as float32, integer arrays as int64; the first axis
        (batch) may differ from the declared input shape. NaN inputs propagate.

        The model is prepared (weights dequantized) at the first call and reused while
        its tensors, operators and I/O specs are the same objects; after editing a
        tensor's array in place, use :meth:`session` for a fresh snapshot.

        Raises:
            InvalidArgumentError: a missing or unknown input name, a wrong dtype or
                shape, or a shape mismatch inside the graph (naming the operator index
                and value id).
        """
        if not isinstance(inputs, dict):
            if len(self.inputs) != 1:
                raise _errors.InvalidArgumentError(
                    f"the model has {len(self.inputs)} inputs "
                    f"{[s.name for s in self.inputs]}: pass a dict name -> array"
                )
            inputs = {self.inputs[0].name: inputs}
        feeds = {}
        for name, a in inputs.items():
            # np.asarray keeps 0-d arrays 0-d (np.ascontiguousarray would make them 1-d).
            a = np.asarray(a)
            dtype = np.int64 if a.dtype.kind in "iub" else np.float32
            feeds[name] = np.asarray(a, dtype=dtype, order="C")
        key = self._cache_key()
        cached = self.__dict__.get("_run_session")
        if cached is None or cached[0] != key:
            cached = (key, self.session())
            self.__dict__["_run_session"] = cached
        return cached[1].run(feeds)


def _model(d: Dict[str, Any]) -> MobiModel:
    return MobiModel(
        name=d["name"],
        framework_version=d["framework_version"],
        created_unix=d["created_unix"],
        inputs=[IoSpec(**s) for s in d["inputs"]],
        outputs=[IoSpec(**s) for s in d["outputs"]],
        tensors=[
            Tensor(id=t["id"], values=t["values"], dtype=t["dtype"], scale=t.get("scale"),
                   zero_point=t.get("zero_point"), gzip=t["gzip"],
                   quantization=t["quantization"], axis=t.get("axis"),
                   scales=t.get("scales"), zero_points=t.get("zero_points"))
            for t in d["tensors"]
        ],
        operators=[Operator(**o) for o in d["operators"]],
        optimized=d["optimized"],
        value_names=dict(d["value_names"]),
        format_version=d["format_version"],
    )


def read_mobi(source: Union[PathLike, bytes, bytearray, memoryview]) -> MobiModel:
    """Read and validate a ``.mobi`` file (a path) or its bytes.

    Raises:
        NotFoundError, InvalidFormatError (bad magic, truncation, bad fields),
        CorruptionError (header or file CRC32), UnsupportedFormatError.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _model(_native.mobi_from_bytes(bytes(source)))
    return _model(_native.mobi_read(fspath(source)))


def open_mobi_session(path: PathLike) -> "_native.MobiSession":
    """Open a ``.mobi`` file straight into a runtime session, ready to ``run(dict)``.

    Faster and lighter than ``read_mobi(path).session()``: no Python objects are made
    for the tensors, the file is memory-mapped and validated (CRC32s included), its f32
    weights are used in place from the map (not copied) and other weights (fp16, int8,
    int16) are dequantized once, the convolution and fully-connected ones straight into
    their packed copy (no dequantized copy kept). ``session.constant_memory`` tells how
    many bytes are mapped, in place, converted, dropped or packed. The file must not be truncated while the session
    lives (the usual memory-map caveat).

    Raises:
        NotFoundError, InvalidFormatError, CorruptionError, UnsupportedFormatError as
        :func:`read_mobi`; InvalidArgumentError for an operator the op table refuses.
    """
    return _native.MobiSession.open(fspath(path))


def example_model(name: str = "lenet5", seed: int = 1) -> MobiModel:
    """A built-in example: ``"lenet5"`` (61,706 parameters) or ``"cifar10"``."""
    return _model(_native.mobi_example(name, int(seed)))


__all__ = ["MobiModel", "IoSpec", "Tensor", "Operator", "read_mobi", "open_mobi_session", "example_model"]
