"""GGUF's quantizers as references at comparable bits/value.

* gguf-py (numpy): Q8_0, Q5_1, Q5_0, Q4_1, Q4_0 (`gguf.quants.quantize` / `dequantize`).
* ggml's own C k-quants (Q6_K, Q5_K, Q4_K, Q3_K, Q2_K), through ctypes on `libggml-base.so`
  built from the llama-cpp-python sdist's vendored ggml by `build_ggml.sh` (optional: if
  the library is absent the k-quant rows are reported as not measured). Without an
  importance matrix, as `llama-quantize` does when none is given. K-quants work on
  super-blocks of 256 values along a row; rows whose length is not a multiple of 256
  (all-MiniLM-L6-v2's 384) are quantized as the flattened matrix cut into rows of 256.
"""

from __future__ import annotations

import ctypes
import os
from typing import Callable, Dict, Optional, Tuple

import numpy as np

from common import CACHE

GGUF_PY = ("Q8_0", "Q5_1", "Q5_0", "Q4_1", "Q4_0")
K_QUANTS = {"Q6_K": 14, "Q5_K": 13, "Q4_K": 12, "Q3_K": 11, "Q2_K": 10}


def ggml_lib_path() -> str:
    return os.environ.get("TVQ_GGML_LIB", os.path.join(CACHE, "ggml", "lib", "libggml-base.so"))


class _Traits(ctypes.Structure):
    _fields_ = [
        ("type_name", ctypes.c_char_p),
        ("blck_size", ctypes.c_int64),
        ("blck_size_interleave", ctypes.c_int64),
        ("type_size", ctypes.c_size_t),
        ("is_quantized", ctypes.c_bool),
        ("to_float", ctypes.c_void_p),
        ("from_float_ref", ctypes.c_void_p),
    ]


_TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int64)


class Ggml:
    def __init__(self, path: str) -> None:
        self.lib = ctypes.CDLL(path)
        L = self.lib
        L.ggml_quantize_chunk.restype = ctypes.c_size_t
        L.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_float), ctypes.c_void_p,
                                          ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                          ctypes.POINTER(ctypes.c_float)]
        L.ggml_row_size.restype = ctypes.c_size_t
        L.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
        L.ggml_get_type_traits.restype = ctypes.POINTER(_Traits)
        L.ggml_get_type_traits.argtypes = [ctypes.c_int]

    def roundtrip(self, t: int, x: np.ndarray) -> np.ndarray:
        n_per_row = x.shape[-1] if x.shape[-1] % 256 == 0 else 256
        flat = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
        if flat.size % n_per_row:
            raise ValueError(f"{x.shape} cannot be cut into rows of {n_per_row}")
        nrows = flat.size // n_per_row
        row = self.lib.ggml_row_size(t, n_per_row)
        dst = np.zeros(row * nrows, dtype=np.uint8)
        src = flat.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        self.lib.ggml_quantize_chunk(t, src, dst.ctypes.data, 0, nrows, n_per_row, None)
        tr = self.lib.ggml_get_type_traits(t).contents
        to_float = _TO_FLOAT(tr.to_float)
        out = np.empty(flat.size, dtype=np.float32)
        to_float(dst.ctypes.data, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), flat.size)
        return out.reshape(x.shape)

    def bits(self, t: int) -> float:
        return self.lib.ggml_row_size(t, 256) * 8 / 256.0


def quantizers() -> Tuple[Dict[str, Tuple[float, Callable[[np.ndarray], np.ndarray]]], Optional[str]]:
    """`{name: (bits/value, roundtrip fn)}` and why k-quants are missing (or None)."""
    import gguf
    from gguf.constants import GGML_QUANT_SIZES

    out: Dict[str, Tuple[float, Callable]] = {}
    for name in GGUF_PY:
        qt = gguf.GGMLQuantizationType[name]
        blk, size = GGML_QUANT_SIZES[qt]

        def rt(x, qt=qt):
            return gguf.quants.dequantize(gguf.quants.quantize(np.ascontiguousarray(x, np.float32), qt), qt)

        out[name] = (size * 8.0 / blk, rt)
    why = None
    path = ggml_lib_path()
    if os.path.exists(path):
        try:
            g = Ggml(path)
            for name, t in K_QUANTS.items():
                out[name] = (g.bits(t), lambda x, t=t: g.roundtrip(t, x))
        except OSError as e:
            why = f"{path} does not load: {e}"
    else:
        why = f"{path} not built (bench/quality/build_ggml.sh failed or was skipped)"
    return out, why
