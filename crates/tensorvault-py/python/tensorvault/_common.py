"""Helpers shared by the Python API: input arrays, devices, frameworks."""

from __future__ import annotations

import operator
import os
from typing import Any, Optional, Union

import numpy as np

from ._errors import DTypeError, FrameworkNotAvailableError, InvalidArgumentError, UnsupportedError

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


#: Largest finite float16 magnitude: a value beyond it becomes infinite when cast.
F16_MAX = 65504.0
#: Largest finite float32 magnitude (float64 input stored as float32).
F32_MAX = float(np.finfo(np.float32).max)

_REAL_FLOATS = "float16, float32, float64 or bfloat16 (ml_dtypes)"


def is_bfloat16(dt: np.dtype) -> bool:
    """Whether ``dt`` is ml_dtypes' ``bfloat16`` (numpy itself has none). ``dt.name``
    costs ~14 us in numpy 2, so the cheap ``kind`` test goes first (decode path)."""
    return dt.kind == "V" and dt.itemsize == 2 and dt.name == "bfloat16"


def real_float_array(values: Any, name: str) -> np.ndarray:
    """``np.asarray(values)`` if it holds real floating values: float16, float32,
    float64, or ``ml_dtypes.bfloat16``. Anything else (complex, object arrays such as
    lists holding None, datetime64, timedelta64, integers, bool, str, float128) raises
    :class:`DTypeError` naming the dtype: a silent cast would drop imaginary parts, turn
    None into NaN and datetimes into numbers."""
    arr = np.asarray(values)
    dt = arr.dtype
    if (dt.kind == "f" and dt.itemsize in (2, 4, 8)) or is_bfloat16(dt):
        return arr
    raise DTypeError(f"{name}: dtype {dt} is not a real floating type: use {_REAL_FLOATS}")


def check_range(arr: np.ndarray, name: str, limit: float, target: str, clip: bool) -> np.ndarray:
    """Values of the floating array ``arr`` beyond ``±limit`` (infinities included) raise
    ``InvalidArgumentError`` (a ``ValueError``) naming the first one's index, unless
    ``clip``: then they saturate to ``±limit``. NaN passes through unchanged (the callee
    decides: the KV cache refuses it, a tier-0 tensor keeps it)."""
    if is_bfloat16(arr.dtype):
        arr = arr.astype(np.float32)
    if arr.size == 0:
        return arr
    # Two reductions that skip NaN (fmax/fmin), no temporary the size of the input.
    hi, lo = np.fmax.reduce(arr, axis=None), np.fmin.reduce(arr, axis=None)
    if not (hi > limit or lo < -limit):
        return arr
    if clip:
        return np.clip(arr, -limit, limit)
    with np.errstate(invalid="ignore"):
        over = np.abs(arr) > limit
    i = np.unravel_index(int(np.argmax(over)), arr.shape)
    where = ", ".join(str(int(k)) for k in i)
    raise InvalidArgumentError(
        f"{name}[{where}] = {float(arr[i])!r} is outside the {target} range ±{limit:g}: it would be "
        f"stored as infinity; pass clip=True to saturate such values to ±{limit:g}"
    )


def as_kv_f16(values: Any, name: str, clip: bool = False) -> np.ndarray:
    """KV values as a C-contiguous little-endian float16 array of the same shape, for KV
    entry points that convert in Python (``PrefixCache.store`` may call it). Accepts
    real floating dtypes only (:func:`real_float_array`), refuses values beyond float16's
    ±65504 unless ``clip`` (:func:`check_range`). NaN is refused by the store with the
    layer, head and token. ``KvCache.append*`` applies the same rules natively in one
    pass (no numpy temporaries on the decode path: ``src/kv.rs``, ``to_f16``)."""
    arr = check_range(real_float_array(values, name), name, F16_MAX, "float16", clip)
    return np.ascontiguousarray(arr, dtype="<f2")


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


def index_arg(v: Any, what: str, minimum: int = 0) -> int:
    """`v` as an int >= `minimum` (anything with ``__index__`` but a bool), else
    :class:`InvalidArgumentError` naming `what`."""
    if isinstance(v, bool):
        raise InvalidArgumentError(f"{what} must be an int, got {v!r}")
    try:
        i = operator.index(v)
    except TypeError as e:
        raise InvalidArgumentError(f"{what} must be an int, got {v!r}") from e
    if i < minimum:
        raise InvalidArgumentError(f"{what} must be >= {minimum}, got {i}")
    return i
