"""What the KV value rules (issue 25 class 4) cost per appended item on the Python side.

    python bench/python/kv_value_checks.py [N]

`KvCache.append*` now refuses non-float dtypes and values beyond float16's range. The
dtype test runs in Python; the float16 conversion and the range check run natively in
one pass over the bytes (`crates/tensorvault-py/src/kv.rs`, `to_f16`). This times the
Python layer of one item, a `[1, 64]` token of one head as a decode step appends it, as
it was before (numpy cast to float16, no checks) and as it is now (`KvCache._bytes`), for
float16 and float32 input: median of 7 runs of N calls each, microseconds per item.
"""

import statistics
import sys
import timeit

import numpy as np
import tensorvault as tv

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
HEAD_DIM = 64


def before(x, head_dim=HEAD_DIM):
    """The former `KvCache._bytes`: any dtype cast to float16, no checks."""
    arr = np.asarray(x)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[1] != head_dim or arr.shape[0] == 0:
        raise ValueError(arr.shape)
    return np.ascontiguousarray(arr, dtype=np.dtype("<f2")).reshape(-1).view(np.uint8)


class _Cache:
    _head_dim = HEAD_DIM


def after(x):
    return tv.KvCache._bytes(_Cache, x, "L0.H0.k")


def per_call(f, x) -> float:
    return statistics.median(timeit.repeat(lambda: f(x), number=N, repeat=7)) / N * 1e6


print(f"{'input':<16}{'before us':>10}{'after us':>10}{'ratio':>8}")
for dt in (np.float16, np.float32):
    x = np.random.default_rng(0).standard_normal((1, HEAD_DIM)).astype(dt)
    b, a = per_call(before, x), per_call(after, x)
    print(f"{np.dtype(dt).name + ' [1, 64]':<16}{b:>10.2f}{a:>10.2f}{a / b:>8.2f}")
