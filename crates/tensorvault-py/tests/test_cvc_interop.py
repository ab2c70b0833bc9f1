"""Interop with the real reference package, decompressed 2.1.1, both ways."""

import warnings

import numpy as np
import pytest

import tensorvault as tv

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    decompressed = pytest.importorskip("decompressed")


def test_reference_version_is_pinned():
    from importlib.metadata import version
    assert version("decompressed") == "2.1.1"


@pytest.mark.parametrize("compression", ["fp16", "int8"])
def test_ours_load_in_decompressed(tmp_path, vectors, compression):
    p = tmp_path / "ours.cvc"
    tv.pack_cvc(vectors, p, compression=compression, chunk_size=300)
    theirs = decompressed.load_cvc(str(p), device="cpu")
    ours = tv.load_cvc(p)
    assert isinstance(theirs, np.ndarray)
    np.testing.assert_array_equal(theirs, ours)
    info = decompressed.get_cvc_info(str(p))
    assert info["num_vectors"] == 1000 and info["num_chunks"] == 4
    assert decompressed.validate_cvc_integrity(str(p))["valid"]


@pytest.mark.parametrize("compression", ["fp16", "int8"])
def test_theirs_load_in_ours_bit_exact(tmp_path, vectors, compression):
    p = tmp_path / "theirs.cvc"
    decompressed.pack_cvc(vectors, str(p), compression=compression, chunk_size=300)
    np.testing.assert_array_equal(tv.load_cvc(p), decompressed.load_cvc(str(p), device="cpu"))


@pytest.mark.parametrize("compression", ["fp16", "int8"])
def test_same_input_same_bytes(tmp_path, vectors, compression):
    a, b = tmp_path / "a.cvc", tmp_path / "b.cvc"
    meta = [{"part": i, "name": f"p{i}"} for i in range(4)]
    tv.pack_cvc(vectors, a, compression=compression, chunk_size=300, chunk_metadata=meta,
                reference_exact=True)
    decompressed.pack_cvc(vectors, str(b), compression=compression, chunk_size=300,
                          chunk_metadata=meta)
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("compression", ["fp16", "int8"])
def test_header_checksum_by_default_and_decompressed_still_reads(tmp_path, vectors, compression):
    """Our default v1 files carry `tensorvault_header_crc32c` (one extra last JSON member,
    ignored by the reference): decompressed loads them to the same values; a damaged
    `min` is caught by us."""
    import json
    import struct

    a, ref = tmp_path / "a.cvc", tmp_path / "ref.cvc"
    tv.pack_cvc(vectors, a, compression=compression, chunk_size=300)
    tv.pack_cvc(vectors, ref, compression=compression, chunk_size=300, reference_exact=True)
    raw = a.read_bytes()
    (hlen,) = struct.unpack_from("<I", raw, 8)
    header = json.loads(raw[12:12 + hlen])
    assert list(header)[-1] == "tensorvault_header_crc32c"
    assert len(raw) == len(ref.read_bytes()) + len(',"tensorvault_header_crc32c":"00000000"')
    np.testing.assert_array_equal(
        decompressed.load_cvc(str(a), device="cpu"), decompressed.load_cvc(str(ref), device="cpu"))
    np.testing.assert_array_equal(tv.load_cvc(a), tv.load_cvc(ref))
    # One changed digit of a chunk parameter: the reference cannot tell, we refuse.
    text = raw[12:12 + hlen].decode()
    key = '"rows":300' if compression == "fp16" else '"min":'
    i = text.index(key) + len(key)
    j = next(k for k in range(i, len(text)) if text[k].isdigit())
    bad = bytearray(raw)
    bad[12 + j] = ord("1") if text[j] != "1" else ord("2")
    p = tmp_path / "bad.cvc"
    p.write_bytes(bytes(bad))
    with pytest.raises(tv.TensorvaultError, match="checksum"):
        tv.load_cvc(p)


def test_sections_interop(tmp_path, rng):
    s1 = rng.standard_normal((120, 8)).astype(np.float32)
    s2 = rng.standard_normal((50, 8)).astype(np.float32)
    secs = [(s1, {"source": "a"}), (s2, {"source": "b"})]
    a, b = tmp_path / "a.cvc", tmp_path / "b.cvc"
    tv.pack_cvc_sections(secs, a, chunk_size=64, reference_exact=True)
    decompressed.pack_cvc_sections(secs, str(b), chunk_size=64)
    assert a.read_bytes() == b.read_bytes()
    np.testing.assert_array_equal(
        tv.load_cvc_range(b, section_key="source", section_value="b"),
        decompressed.load_cvc_range(str(a), section_key="source", section_value="b", device="cpu"),
    )


def test_info_and_validation_shapes_match(tmp_path, vectors):
    p = tmp_path / "a.cvc"
    tv.pack_cvc(vectors, p, chunk_size=300, chunk_metadata=[{"i": i} for i in range(4)])
    ours, theirs = tv.get_cvc_info(p), decompressed.get_cvc_info(str(p))
    for k, v in theirs.items():
        if k == "chunks":
            for oc, tc in zip(ours["chunks"], v):
                assert {k2: oc[k2] for k2 in tc} == tc
        else:
            assert ours[k] == v, k
    vo, vt = tv.validate_cvc(p), decompressed.validate_cvc(str(p))
    assert set(vt) <= set(vo)
    for k in ("valid", "version", "num_vectors", "dimension", "compression", "num_chunks",
              "size_bytes", "size_mb", "errors", "warnings"):
        assert vo[k] == vt[k], k
    io, it = tv.validate_cvc_integrity(p), decompressed.validate_cvc_integrity(str(p))
    for k in ("valid", "total_chunks", "corrupted_chunks", "corrupted_ranges", "checksum_details"):
        assert io[k] == it[k], k


def test_corruption_reported_like_reference(tmp_path, vectors):
    p = tmp_path / "a.cvc"
    tv.pack_cvc(vectors, p, chunk_size=300)
    data = bytearray(p.read_bytes())
    data[-10] ^= 0xFF  # inside the last chunk's payload
    p.write_bytes(bytes(data))
    io, it = tv.validate_cvc_integrity(p), decompressed.validate_cvc_integrity(str(p))
    assert io["corrupted_chunks"] == it["corrupted_chunks"] == [3]
    assert io["corrupted_ranges"] == [tuple(r) for r in it["corrupted_ranges"]] == [(900, 1000)]


def test_mixed_chunks_the_reference_cannot_load(tmp_path, vectors):
    # The reference decodes every chunk with the file-level compression; we honour each
    # chunk's own. Our reading of such a file equals the per-chunk decode.
    p = tmp_path / "mixed.cvc"
    tv.pack_cvc(vectors, p, chunk_size=500, chunk_compression=["fp16", "int8"])
    out = tv.load_cvc(p)
    np.testing.assert_array_equal(out[:500], vectors[:500].astype(np.float16).astype(np.float32))
