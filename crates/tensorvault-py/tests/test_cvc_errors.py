"""Bad input raises the right exception class with a useful message; nothing crashes."""

import os

import numpy as np
import pytest

import tensorvault as tv


@pytest.fixture
def good(tmp_path, vectors):
    p = tmp_path / "good.cvc"
    tv.pack_cvc(vectors, p, chunk_size=300)
    return p


def test_missing_file(tmp_path):
    with pytest.raises(tv.NotFoundError, match="nope.cvc") as e:
        tv.load_cvc(tmp_path / "nope.cvc")
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, tv.TensorvaultError)
    with pytest.raises(FileNotFoundError):
        tv.validate_cvc(tmp_path / "nope.cvc")
    with pytest.raises(tv.NotFoundError):
        tv.get_cvc_info(tmp_path / "nope.cvc")


def test_bad_magic(tmp_path):
    p = tmp_path / "x.cvc"
    p.write_bytes(b"NOPE" + b"\0" * 100)
    with pytest.raises(tv.InvalidFormatError, match="bad magic"):
        tv.load_cvc(p)
    r = tv.validate_cvc(p)
    assert r["valid"] is False and "magic" in r["errors"][0]


def test_crc_mismatch_raises_corruption(good):
    data = bytearray(good.read_bytes())
    data[-5] ^= 0x01
    good.write_bytes(bytes(data))
    with pytest.raises(tv.CorruptionError, match="checksum mismatch in chunk 3") as e:
        tv.load_cvc(good)
    assert isinstance(e.value, tv.CorruptedChunkError) and isinstance(e.value, ValueError)
    with pytest.raises(tv.CorruptionError):
        tv.load_cvc(good, rows=(950, 960))
    # Rows outside the corrupt chunk still load.
    assert tv.load_cvc(good, rows=(0, 900)).shape == (900, 24)


def test_on_corruption_skip_and_warn(good, vectors):
    data = bytearray(good.read_bytes())
    data[-5] ^= 0x01
    good.write_bytes(bytes(data))
    out = tv.load_cvc(good, on_corruption="skip", fill_value=-7.0)
    assert (out[900:] == -7.0).all()
    np.testing.assert_array_equal(out[:900], vectors[:900].astype(np.float16).astype(np.float32))
    with pytest.warns(RuntimeWarning, match="chunk 3"):
        tv.load_cvc(good, on_corruption="warn")
    with pytest.raises(tv.InvalidArgumentError):
        tv.load_cvc(good, on_corruption="ignore")


@pytest.mark.parametrize("cut", [0, 3, 7, 11, 40, -1, -300])
def test_truncated_files_raise(good, cut, tmp_path):
    data = good.read_bytes()
    p = tmp_path / "t.cvc"
    p.write_bytes(data[:cut] if cut >= 0 else data[:len(data) + cut])
    with pytest.raises(tv.InvalidFormatError):
        tv.load_cvc(p)
    assert tv.validate_cvc(p)["valid"] is False
    assert tv.validate_cvc_integrity(p)["valid"] is False


def test_truncated_at_chunk_boundary(tmp_path, vectors):
    p = tmp_path / "a.cvc"
    tv.pack_cvc(vectors, p, chunk_size=500)
    info_len = p.stat().st_size - (8 + 500 * 24 * 2)
    p.write_bytes(p.read_bytes()[:info_len])
    with pytest.raises(tv.InvalidFormatError, match="truncated"):
        tv.load_cvc(p)


def test_random_garbage_never_crashes(tmp_path, good):
    rng = np.random.default_rng(7)
    data = good.read_bytes()
    p = tmp_path / "fuzz.cvc"
    for i in range(300):
        b = bytearray(data)
        for _ in range(rng.integers(1, 8)):
            pos = int(rng.integers(0, len(b)))
            b[pos] = int(rng.integers(0, 256))
        if i % 3 == 0:
            b = b[: int(rng.integers(0, len(b)))]
        p.write_bytes(bytes(b))
        try:
            tv.load_cvc(p)
            tv.load_cvc(p, rows=(5, 500))
        except tv.TensorvaultError as e:
            assert str(e)
        tv.validate_cvc(p)
        tv.validate_cvc_integrity(p)


def test_unsupported_versions(tmp_path, good):
    data = bytearray(good.read_bytes())
    data[4:6] = (2).to_bytes(2, "little")  # the reference's columnar major version
    p = tmp_path / "v2.cvc"
    p.write_bytes(bytes(data))
    with pytest.raises(tv.UnsupportedFormatError):
        tv.load_cvc(p)


def test_bad_arguments(tmp_path, vectors):
    p = tmp_path / "x.cvc"
    with pytest.raises(tv.InvalidArgumentError, match="lossless"):
        tv.pack_cvc(vectors, p, compression="lossless")
    with pytest.raises(tv.InvalidArgumentError, match="dtype int64"):
        tv.pack_cvc(np.arange(10).reshape(5, 2), p)
    with pytest.raises(tv.InvalidArgumentError, match="2-D"):
        tv.pack_cvc(np.zeros(10, np.float32), p)
    with pytest.raises(tv.InvalidArgumentError, match="at least one column"):
        tv.pack_cvc(np.zeros((10, 0), np.float32), p)
    with pytest.raises(tv.InvalidArgumentError, match="chunk_size"):
        tv.pack_cvc(vectors, p, chunk_size=0)
    bad = vectors.copy()
    bad[3, 4] = np.nan
    with pytest.raises(tv.InvalidArgumentError, match="not finite"):
        tv.pack_cvc(bad, p, compression="int8")
    with pytest.raises(TypeError):
        tv.pack_cvc(vectors, p, chunk_metadata=[object()] * 1)
    assert not p.exists()
    with pytest.raises(tv.InvalidArgumentError, match="format"):
        tv.pack_cvc(vectors, p, format="v9")


def test_unwritable_destination(tmp_path, vectors):
    d = tmp_path / "missing-dir" / "x.cvc"
    with pytest.raises(tv.TensorvaultError) as e:
        tv.pack_cvc(vectors, d)
    assert isinstance(e.value, OSError)
    assert "missing-dir" in str(e.value)


def test_directory_is_not_a_file(tmp_path):
    with pytest.raises(tv.TensorvaultError):
        tv.load_cvc(tmp_path)
    assert os.path.isdir(tmp_path)
