"""Helpers shared by the Python API: input arrays, devices, frameworks."""

from __future__ import annotations

import os
from typing import Any, Optional, Union

import numpy as np

from ._errors import FrameworkNotAvailableError, InvalidArgumentError, UnsupportedError

PathLike = Union[str, "os.PathLike[str]"]

_CPU_BACKENDS = ("auto", "cpu", "python", "cpp", "rust")
_GPU_BACKENDS = ("cuda", "triton")
_NO_GPU = (
    "no GPU backend in this build: tensorvault decodes on the CPU only "
    "(use device=\"cpu\"; a GPU backend can be added behind the CVC Backend trait)"
)


def as_f32_rows(vectors: Any, name: str = "vectors") -> np.ndarray:
    """Return ``vectors`` as a C-contiguous 2-D float32 array.

    float32 input that is already C-contiguous is passed through without a copy;
    float64 and float16 input is converted (numpy's rounding), and non-contiguous input
    is copied into a contiguous array. Anything else raises ``InvalidArgumentError``.
    """
    arr = np.asarray(vectors)
    if arr.dtype.kind != "f" or arr.dtype.itemsize not in (2, 4, 8):
        raise InvalidArgumentError(
            f"{name} must be a float32, float64 or float16 array, got dtype {arr.dtype}"
        )
    if arr.ndim != 2:
        raise InvalidArgumentError(
            f"{name} must be 2-D (vectors x dimension), got shape {arr.shape}"
        )
    if arr.shape[1] == 0:
        raise InvalidArgumentError(f"{name} must have at least one column, got shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def check_device(device: str, backend: str = "auto") -> None:
    """Raise ``UnsupportedError`` for a GPU device or backend, ``InvalidArgumentError``
    for names that mean nothing."""
    dev = str(device).lower()
    if dev.startswith("cuda") or dev.startswith("gpu"):
        raise UnsupportedError(f"device={device!r}: {_NO_GPU}")
    if dev != "cpu":
        raise InvalidArgumentError(f"unknown device {device!r}: use \"cpu\"")
    if backend in _GPU_BACKENDS:
        raise UnsupportedError(f"backend={backend!r}: {_NO_GPU}")
    if backend not in _CPU_BACKENDS:
        raise InvalidArgumentError(
            f"unknown backend {backend!r}: use one of {', '.join(_CPU_BACKENDS)}"
        )


def to_framework(arr: np.ndarray, framework: Optional[str]) -> Any:
    """Convert a numpy result for ``framework``.

    ``None`` or ``"numpy"`` returns the array itself; ``"torch"`` returns
    ``torch.from_numpy(arr)`` (sharing memory) when torch is importable and raises
    ``FrameworkNotAvailableError`` otherwise; ``"cupy"`` needs a GPU and raises
    ``UnsupportedError``.
    """
    if framework is None or framework == "numpy":
        return arr
    if framework == "torch":
        try:
            import torch  # type: ignore[import-not-found]
        except ImportError as e:
            raise FrameworkNotAvailableError(
                "framework=\"torch\" needs PyTorch, which is not installed "
                "(pip install torch), or pass framework=\"numpy\" for a numpy array"
            ) from e
        return torch.from_numpy(arr)
    if framework == "cupy":
        raise UnsupportedError(f"framework=\"cupy\" needs a GPU: {_NO_GPU}")
    raise InvalidArgumentError(
        f"unknown framework {framework!r}: use \"numpy\" (default) or \"torch\""
    )


def fspath(path: PathLike) -> str:
    """``os.fspath`` with a clear error for non-path arguments."""
    try:
        return os.fspath(path)
    except TypeError as e:
        raise InvalidArgumentError(f"expected a path, got {type(path).__name__}") from e
