"""CGEB: one record to/from bytes, batch files, zero-copy views."""

import numpy as np
import pytest

import tensorvault as tv


def make(rng, dim=1536, experts=8, k=2):
    v = rng.standard_normal(dim).astype(np.float32)
    w = rng.random(experts).astype(np.float32)
    s = np.array(sorted(rng.choice(experts, k, replace=False)), dtype=np.uint8)
    return v, w, s


def test_seed_record_size_and_round_trip(rng):
    v, w, s = make(rng)
    data = tv.encode_embedding(v, w, s, pipeline_latency_us=1234)
    assert isinstance(data, bytes) and len(data) == 6242 and data[:4] == b"CGEB"
    e = tv.decode_embedding(data)
    np.testing.assert_array_equal(e.vector, v)
    np.testing.assert_array_equal(e.expert_weights, w)
    np.testing.assert_array_equal(e.selected_experts, s)
    assert e.pipeline_latency_us == 1234 and e.content_hash != 0 and e.aux_data is None
    assert e.vector.dtype == np.float32 and e.vector.flags.writeable


@pytest.mark.parametrize("comp", [None, "lz4", "zstd"])
def test_aux_data_and_little_endian(rng, comp):
    v, w, s = make(rng, dim=64, experts=4, k=1)
    aux = bytes(range(256)) * 20
    data = tv.encode_embedding(v, w, s, aux_data=aux, aux_compression=comp, little_endian=True)
    e = tv.decode_embedding(data)
    assert e.aux_data == aux
    np.testing.assert_array_equal(e.vector, v)


def test_float64_and_list_input(rng):
    v, w, s = make(rng, dim=10, experts=3, k=2)
    data = tv.encode_embedding(v.astype(np.float64), w.tolist(), s.tolist())
    np.testing.assert_array_equal(tv.decode_embedding(data).vector, v)


def test_decode_errors(rng):
    v, w, s = make(rng, dim=32, experts=4, k=2)
    data = bytearray(tv.encode_embedding(v, w, s))
    with pytest.raises(tv.InvalidFormatError):
        tv.decode_embedding(bytes(data[:50]))
    with pytest.raises(tv.InvalidFormatError):
        tv.decode_embedding(b"XXXX" + bytes(data[4:]))
    data[100] ^= 0xFF
    with pytest.raises(tv.CorruptionError, match="hash"):
        tv.decode_embedding(bytes(data))
    assert tv.decode_embedding(bytes(data), verify=False).vector.shape == (32,)
    with pytest.raises(tv.InvalidArgumentError):
        tv.encode_embedding(v, w, np.array([9, 1], np.uint8))  # index >= num_experts
    with pytest.raises(tv.InvalidArgumentError):
        tv.encode_embedding(v, w, s, aux_compression="brotli")
    rng2 = np.random.default_rng(3)
    for _ in range(200):
        b = bytearray(tv.encode_embedding(v, w, s))
        for _ in range(3):
            b[int(rng2.integers(0, len(b)))] = int(rng2.integers(0, 256))
        try:
            tv.decode_embedding(bytes(b[: int(rng2.integers(0, len(b) + 1))]))
        except tv.TensorvaultError:
            pass


@pytest.fixture
def batch(tmp_path, rng):
    n, dim = 6, 96
    v = rng.standard_normal((n, dim)).astype(np.float32)
    w = rng.random((n, 4)).astype(np.float32)
    s = np.tile(np.array([0, 3], np.uint8), (n, 1))
    paths = tv.write_batch(tmp_path / "emb", v, w, s, pipeline_latency_us=range(n))
    return tmp_path / "emb", paths, v, w, s


def test_batch_reader_views_share_the_map(batch):
    path, (dpath, ipath), v, w, s = batch
    assert dpath.endswith("emb.cgeb") and ipath.endswith("emb.cgei")
    r = tv.BatchReader(path)
    assert len(r) == 6 and r.offsets == [i * 4096 for i in range(6)]
    a = r[2]
    np.testing.assert_array_equal(a, v[2])
    assert a.dtype == np.dtype(">f4") and a.shape == (96,)
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 1.0
    start, length = r._r._data_span
    addr = a.__array_interface__["data"][0]
    assert start <= addr < start + length  # the view points into the mapped file
    assert addr == start + 2 * 4096 + 64  # record 2, after its 64-byte header
    base = a.base
    while getattr(base, "base", None) is not None and not isinstance(base, tv._tensorvault.BatchReader):
        base = base.base
    assert isinstance(base, tv._tensorvault.BatchReader)
    del r
    np.testing.assert_array_equal(a, v[2])  # the view keeps the map alive
    np.testing.assert_array_equal(tv.BatchReader(path)[-1], v[5])


def test_batch_iteration_record_and_vectors(batch):
    path, _, v, w, s = batch
    r = tv.BatchReader(str(path) + ".cgeb")
    got = list(r)
    assert len(got) == 6
    np.testing.assert_array_equal(np.stack(got), v)
    e = r.record(4)
    np.testing.assert_array_equal(e.expert_weights, w[4])
    np.testing.assert_array_equal(e.selected_experts, s[4])
    assert e.pipeline_latency_us == 4
    all_v = r.vectors()
    assert all_v.dtype == np.float32 and all_v.flags.writeable
    np.testing.assert_array_equal(all_v, v)
    assert r.verify()["valid"]
    with pytest.raises(IndexError):
        r[6]


def test_batch_little_endian_and_dense(tmp_path, rng):
    v = rng.standard_normal((3, 16)).astype(np.float32)
    w = rng.random((3, 2)).astype(np.float32)
    s = np.zeros((3, 1), np.uint8)
    tv.write_batch(tmp_path / "le", v, w, s, alignment=64, little_endian=True)
    r = tv.BatchReader(tmp_path / "le")
    assert r[1].dtype == np.dtype("<f4")
    np.testing.assert_array_equal(r[1], v[1])


def test_batch_corruption_detected(batch):
    path, (dpath, ipath), *_ = batch
    data = bytearray(open(dpath, "rb").read())
    data[4096 + 70] ^= 0x10
    open(dpath, "wb").write(bytes(data))
    with pytest.raises(tv.CorruptionError):
        tv.BatchReader(path)
    r = tv.BatchReader(path, verify_data_hash=False)
    with pytest.raises(tv.CorruptionError):
        r[1]
    r[0]  # other records are fine
    assert not r.verify()["valid"]
    with pytest.raises(tv.NotFoundError):
        tv.BatchReader(path.parent / "missing")
    open(ipath, "wb").write(b"CGEI" + b"\xff" * 40)
    with pytest.raises(tv.InvalidFormatError):
        tv.BatchReader(path)
