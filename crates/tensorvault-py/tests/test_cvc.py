"""CVC round trips, edge cases and the extras the reference lacks."""

import numpy as np
import pytest

import tensorvault as tv

FP16_TOL = 1e-3  # relative, for N(0,1) data


def test_fp16_round_trip_matches_numpy_cast(tmp_path, vectors):
    p = tmp_path / "a.cvc"
    summary = tv.pack_cvc(vectors, p, compression="fp16", chunk_size=300)
    assert summary["rows"] == 1000 and summary["chunks"] == 4
    assert summary["bytes"] == p.stat().st_size
    out = tv.load_cvc(p)
    assert out.shape == (1000, 24) and out.dtype == np.float32
    np.testing.assert_array_equal(out, vectors.astype(np.float16).astype(np.float32))


def test_int8_round_trip_within_half_step(tmp_path, vectors):
    p = tmp_path / "a.cvc"
    tv.pack_cvc(vectors, str(p), compression="int8", chunk_size=256)
    out = tv.load_cvc(p)
    for start in range(0, 1000, 256):
        chunk = vectors[start:start + 256]
        step = (chunk.max() - chunk.min()) / 255
        assert np.abs(out[start:start + 256] - chunk).max() <= step * 0.5001


def test_bf16_round_trip(tmp_path, vectors):
    p = tmp_path / "a.cvc"
    tv.pack_cvc(vectors, p, compression="bf16")
    out = tv.load_cvc(p)
    assert np.abs(out - vectors).max() <= np.abs(vectors).max() * 2**-8


def test_result_owns_rust_memory(tmp_path, vectors):
    p = tmp_path / "a.cvc"
    tv.pack_cvc(vectors, p)
    out = tv.load_cvc(p)
    assert isinstance(out.base, tv._tensorvault.RustBuffer)
    assert out.base.nbytes == out.nbytes
    assert out.flags.c_contiguous and out.flags.writeable and out.flags.aligned
    out[0, 0] = 42.0  # writable, and ours alone
    assert out[0, 0] == 42.0
    assert out.ctypes.data % 64 == 0


def test_float64_and_float16_input_are_converted(tmp_path, vectors):
    for dt in (np.float64, np.float16):
        p = tmp_path / f"{np.dtype(dt).name}.cvc"
        tv.pack_cvc(vectors.astype(dt), p)
        ref = vectors.astype(dt).astype(np.float32).astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(tv.load_cvc(p), ref)


def test_non_contiguous_input(tmp_path, rng):
    base = rng.standard_normal((200, 48)).astype(np.float32)
    for view in (base[:, ::2], base.T[:24].T, base[::3]):
        assert not view.flags.c_contiguous
        p = tmp_path / "nc.cvc"
        tv.pack_cvc(view, p, chunk_size=64)
        np.testing.assert_array_equal(tv.load_cvc(p), view.astype(np.float16).astype(np.float32))


def test_fortran_order_input(tmp_path, vectors):
    f = np.asfortranarray(vectors)
    p = tmp_path / "f.cvc"
    tv.pack_cvc(f, p)
    np.testing.assert_array_equal(tv.load_cvc(p), vectors.astype(np.float16).astype(np.float32))


def test_zero_rows(tmp_path):
    p = tmp_path / "empty.cvc"
    tv.pack_cvc(np.zeros((0, 8), np.float32), p)
    out = tv.load_cvc(p)
    assert out.shape == (0, 8) and out.dtype == np.float32
    assert tv.get_cvc_info(p)["num_vectors"] == 0


def test_one_column(tmp_path, rng):
    v = rng.standard_normal((50, 1)).astype(np.float32)
    p = tmp_path / "one.cvc"
    tv.pack_cvc(v, p, compression="int8", chunk_size=7)
    out = tv.load_cvc(p)
    assert out.shape == (50, 1)
    assert np.abs(out - v).max() < (v.max() - v.min()) / 255


def test_rows_range_reads_exact_rows(tmp_path, vectors):
    p = tmp_path / "a.cvc"
    tv.pack_cvc(vectors, p, chunk_size=100)
    full = tv.load_cvc(p)
    for a, b in [(0, 0), (0, 1), (150, 420), (999, 1000), (0, 1000), (100, 200)]:
        np.testing.assert_array_equal(tv.load_cvc(p, rows=(a, b)), full[a:b])
    with pytest.raises(tv.InvalidArgumentError, match="not within"):
        tv.load_cvc(p, rows=(10, 1001))
    with pytest.raises(tv.InvalidArgumentError):
        tv.load_cvc(p, rows=(20, 10))


def test_chunk_metadata_and_range_filters(tmp_path, vectors):
    p = tmp_path / "m.cvc"
    meta = [{"source": "a"}, {"source": "b"}, {"source": "a"}, {"source": "c", "n": 1.5}]
    tv.pack_cvc(vectors, p, chunk_size=250, chunk_metadata=meta)
    info = tv.get_cvc_info(p)
    assert [c["metadata"] for c in info["chunks"]] == meta
    assert [c["rows"] for c in info["chunks"]] == [250] * 4
    full = tv.load_cvc(p)
    a = tv.load_cvc_range(p, metadata_key="source", metadata_value="a")
    np.testing.assert_array_equal(a, np.concatenate([full[:250], full[500:750]]))
    np.testing.assert_array_equal(tv.load_cvc_range(p, chunk_indices=[3, 1]),
                                  np.concatenate([full[750:], full[250:500]]))
    np.testing.assert_array_equal(tv.load_cvc_range(p), full)
    with pytest.raises(tv.InvalidArgumentError, match="No chunks found"):
        tv.load_cvc_range(p, metadata_key="source", metadata_value="zzz")
    with pytest.raises(tv.InvalidArgumentError, match="Cannot specify"):
        tv.load_cvc_range(p, chunk_indices=[0], metadata_key="source", metadata_value="a")
    with pytest.raises(tv.InvalidArgumentError, match="Invalid chunk index 4"):
        tv.load_cvc_range(p, chunk_indices=[4])
    with pytest.raises(tv.InvalidArgumentError):
        tv.pack_cvc(vectors, tmp_path / "bad.cvc", chunk_size=250, chunk_metadata=meta[:3])


def test_chunked_iterates_one_chunk_at_a_time(tmp_path, vectors):
    p = tmp_path / "c.cvc"
    tv.pack_cvc(vectors, p, chunk_size=300)
    full = tv.load_cvc(p)
    got = list(tv.load_cvc_chunked(p))
    assert [i for i, _ in got] == [0, 1, 2, 3]
    np.testing.assert_array_equal(np.concatenate([a for _, a in got]), full)
    got = list(tv.load_cvc_chunked(p, chunk_indices=[2, 0]))
    assert [i for i, _ in got] == [2, 0]
    np.testing.assert_array_equal(got[0][1], full[600:900])
    with pytest.raises(tv.InvalidArgumentError):
        tv.load_cvc_chunked(p, chunk_indices=[9])


def test_sections(tmp_path, rng):
    w = rng.standard_normal((130, 16)).astype(np.float32)
    x = rng.standard_normal((70, 16)).astype(np.float64)
    g = rng.standard_normal((45, 16)).astype(np.float32)
    p = tmp_path / "s.cvc"
    tv.pack_cvc_sections([(w, {"source": "wiki"}), (x, {"source": "arxiv", "q": "hi"}),
                          (g, {"source": "wiki", "part": 2})], p, chunk_size=50)
    info = tv.get_cvc_info(p)
    assert [(s["start_index"], s["end_index"]) for s in info["sections"]] == [(0, 130), (130, 200), (200, 245)]
    assert info["num_vectors"] == 245
    arx = tv.load_cvc_range(p, section_key="source", section_value="arxiv")
    np.testing.assert_array_equal(arx, x.astype(np.float32).astype(np.float16).astype(np.float32))
    wiki = tv.load_cvc_range(p, section_key="source", section_value="wiki")
    assert wiki.shape == (175, 16)
    with pytest.raises(tv.InvalidArgumentError, match="no sections found"):
        tv.load_cvc_range(p, section_key="source", section_value="nope")
    with pytest.raises(tv.InvalidArgumentError, match="same dimension"):
        tv.pack_cvc_sections([(w, {}), (w[:, :8], {})], tmp_path / "bad.cvc")
    with pytest.raises(tv.InvalidArgumentError):
        tv.pack_cvc_sections([], tmp_path / "bad.cvc")


def test_streaming_writer_equals_pack(tmp_path, vectors):
    a, b = tmp_path / "a.cvc", tmp_path / "b.cvc"
    tv.pack_cvc(vectors, a, compression="int8", chunk_size=128)
    with tv.CvcWriter(b, 24, compression="int8", chunk_size=128) as w:
        for start in range(0, 1000, 77):
            w.write(vectors[start:start + 77])
        assert w.rows == 1000
    assert w.summary["rows"] == 1000
    assert a.read_bytes() == b.read_bytes()


def test_streaming_writer_chunks_and_abort(tmp_path, vectors):
    p = tmp_path / "w.cvc"
    w = tv.CvcWriter(p, 24)
    w.write_chunk(vectors[:10], compression="int8", metadata={"k": 1})
    w.write_chunk(vectors[10:30])
    summary = w.close()
    assert summary["chunks"] == 2
    info = tv.get_cvc_info(p)
    assert [c["compression"] for c in info["chunks"]] == ["int8", "fp16"]
    assert info["chunks"][0]["metadata"] == {"k": 1}
    with pytest.raises(tv.InvalidArgumentError, match="closed"):
        w.write(vectors[:1])
    q = tmp_path / "aborted.cvc"
    with pytest.raises(RuntimeError):
        with tv.CvcWriter(q, 24) as w2:
            w2.write(vectors)
            raise RuntimeError("boom")
    assert not q.exists()
    with pytest.raises(tv.InvalidArgumentError, match="dimension"):
        tv.CvcWriter(tmp_path / "d.cvc", 24).write(vectors[:, :3])


def test_mixed_compression_file(tmp_path, vectors):
    p = tmp_path / "mixed.cvc"
    tv.pack_cvc(vectors, p, chunk_size=500, chunk_compression=["int8", "fp16"])
    out = tv.load_cvc(p)
    np.testing.assert_array_equal(out[500:], vectors[500:].astype(np.float16).astype(np.float32))
    assert np.abs(out[:500] - vectors[:500]).max() < 0.05


def test_mmap_optimized_and_v0(tmp_path, vectors):
    p = tmp_path / "mm.cvc"
    tv.pack_cvc(vectors, p, chunk_size=100, mmap_optimized=True)
    np.testing.assert_array_equal(tv.load_cvc(p), vectors.astype(np.float16).astype(np.float32))
    q = tmp_path / "v0.cvc"
    tv.pack_cvc(vectors, q, format="v0")
    assert tv.detect_version(q) == (0, 1) and tv.detect_version(p) == (1, 0)
    np.testing.assert_array_equal(tv.load_cvc(q), tv.load_cvc(p))
    assert [i for i, _ in tv.load_cvc_chunked(q)] == [0]
    v = tv.validate_cvc(q)
    assert v["valid"] and v["version"] == "v0.1" and v["warnings"]
    assert tv.validate_cvc_integrity(q)["valid"] is False


def test_validate_reports(tmp_path, vectors):
    p = tmp_path / "a.cvc"
    tv.pack_cvc(vectors, p, chunk_size=400)
    r = tv.validate_cvc(p)
    assert r["valid"] and r["version"] == "v1.0" and r["num_vectors"] == 1000
    assert r["num_chunks"] == 3 and r["errors"] == [] and r["size_bytes"] == p.stat().st_size
    i = tv.validate_cvc_integrity(p, verbose=True)
    assert i["valid"] and i["total_chunks"] == 3 and i["corrupted_chunks"] == []
    assert [d["vector_range"] for d in i["checksum_details"]] == [(0, 400), (400, 800), (800, 1000)]
    assert tv.validate_cvc_integrity(p)["checksum_details"] is None


def test_framework_and_device_arguments(tmp_path, vectors):
    p = tmp_path / "a.cvc"
    tv.pack_cvc(vectors, p)
    assert isinstance(tv.load_cvc(p, framework="numpy"), np.ndarray)
    try:
        import torch  # noqa: F401
        has_torch = True
    except ImportError:
        has_torch = False
    if has_torch:
        t = tv.load_cvc(p, framework="torch")
        assert tuple(t.shape) == (1000, 24)
    else:
        with pytest.raises(tv.FrameworkNotAvailableError, match="PyTorch"):
            tv.load_cvc(p, framework="torch")
        with pytest.raises(ImportError):
            tv.load_cvc_range(p, framework="torch")
    with pytest.raises(tv.UnsupportedError, match="no GPU backend in this build"):
        tv.load_cvc(p, device="cuda")
    with pytest.raises(tv.UnsupportedError, match="no GPU backend"):
        tv.load_cvc(p, backend="triton")
    with pytest.raises(tv.UnsupportedError):
        tv.load_cvc(p, framework="cupy")
    with pytest.raises(tv.InvalidArgumentError):
        tv.load_cvc(p, device="tpu")
    with pytest.raises(NotImplementedError):
        list(tv.load_cvc_chunked(p, device="cuda:0"))


def test_loads_release_the_gil(tmp_path, rng):
    import threading
    v = rng.standard_normal((20000, 64)).astype(np.float32)
    p = tmp_path / "g.cvc"
    tv.pack_cvc(v, p, compression="int8")
    results = []
    threads = [threading.Thread(target=lambda: results.append(tv.load_cvc(p).shape)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [(20000, 64)] * 4
