"""Hostile inputs through the Python API (issue 16): damaged CVC, MOBI and CGEB bytes
must raise a TensorvaultError subclass (never a PanicException or another exception
type), or load."""

import os
import random

import numpy as np
import pytest

import tensorvault as tv

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "fixtures", "cvc")


def _variants(data: bytes, seed: int, flips: int = 40):
    rng = random.Random(seed)
    n = len(data)
    for cut in (0, 1, 8, 12, n // 2, n - 1):
        yield data[:cut]
    for _ in range(flips):
        b = bytearray(data)
        pos = rng.randrange(min(n, 512)) if rng.random() < 0.6 else rng.randrange(n)
        b[pos] ^= 1 << rng.randrange(8)
        yield bytes(b)
    for pos in (0, 4, 6, 8, 12, 16, 24, 32):
        for val in (0xFFFFFFFF, 0x7FFFFFFF, 0):
            b = bytearray(data)
            b[pos:pos + 4] = val.to_bytes(4, "little")
            yield bytes(b)


def _only_typed(fn):
    try:
        fn()
    except tv.TensorvaultError:
        pass


@pytest.mark.parametrize(
    "name", ["c_tiny_fp16.cvc", "d_mixed_fp16_int8.cvc", "i_sections_int8.cvc", "e_legacy_v010_int8_cs4.cvc"]
)
def test_damaged_cvc(tmp_path, name):
    data = open(os.path.join(FIXTURES, name), "rb").read()
    path = tmp_path / "x.cvc"
    for i, bad in enumerate(_variants(data, seed=len(name))):
        path.write_bytes(bad)
        _only_typed(lambda: tv.load_cvc(path))
        _only_typed(lambda: tv.get_cvc_info(path))
        _only_typed(lambda: tv.validate_cvc_integrity(path))


def test_damaged_mobi():
    data = tv.example_model("lenet5").to_bytes()
    for bad in _variants(data, seed=7):
        _only_typed(lambda: tv.read_mobi(bad))


def test_damaged_cgeb_record():
    data = tv.encode_embedding(
        np.arange(32, dtype=np.float32), np.full(8, 0.125, np.float32), [1, 2], aux_data=b"aux" * 20
    )
    for bad in _variants(bytes(data), seed=3):
        _only_typed(lambda: tv.decode_embedding(bad))
