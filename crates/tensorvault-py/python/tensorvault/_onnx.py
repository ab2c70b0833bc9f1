"""ONNX import: convert an ONNX model file to a MOBI file.

Each ONNX op is mapped with the semantics of the model's opset; BatchNormalization is
folded into the preceding Conv, Gemm becomes FullyConnected, constants, Shape of static
shapes, Identity/Dropout/same-type Cast are folded away and ``auto_pad`` becomes explicit
pads. The op table, folds and weight modes: docs/onnx-import.md.
"""

from __future__ import annotations

from typing import Optional

from . import _tensorvault as _native
from ._common import PathLike, fspath
from ._mobi import MobiModel, read_mobi


def convert_onnx(
    src: PathLike,
    dst: PathLike,
    weights: str = "f32",
    gzip: bool = False,
    batch: Optional[int] = None,
) -> MobiModel:
    """Convert the ONNX model ``src`` to MOBI at ``dst`` and return the written model.

    Args:
        src: the ``.onnx`` file (weights inside it: external data is refused).
        dst: the ``.mobi`` file, written atomically; nothing is written on error.
        weights: ``"f32"``, ``"fp16"``, ``"int16"`` or ``"int8"`` (conv, fully-connected
            and MatMul weights; biases and small vectors stay f32).
        gzip: gzip every tensor payload.
        batch: pin every symbolic input dimension (e.g. a batch ``N``) to this size;
            MOBI v1 has fixed dimensions only.

    Raises:
        NotFoundError: ``src`` does not exist.
        InvalidFormatError: not a valid ONNX model (bad protobuf, dangling values,
            cycles, shapes that do not fit).
        UnsupportedFormatError: valid ONNX that MOBI cannot express (the message names
            the op, the node and why), a symbolic dimension without ``batch``.
        InvalidArgumentError: an unknown ``weights`` mode.
    """
    _native.onnx_convert(
        fspath(src), fspath(dst), weights, bool(gzip), None if batch is None else int(batch)
    )
    return read_mobi(dst)


__all__ = ["convert_onnx"]
