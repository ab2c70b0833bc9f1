"""Hostile inputs through the Python API, issue 25 classes 3 and 5: verification that
vouches only for what it checked, and errors that name what failed.

* a FuseMoE registry version whose directory was replaced by another self-consistent one
  fails ``verify`` (its checksum is not the one registry.json lists);
* a bad source file at ``ModelRegistry.save`` is named by its own path with the field
  and offset, never under the version directory that is never made;
* a CGEB index rewritten with an entry removed (re-sealed with a valid checksum) no
  longer reads as a smaller valid batch; a batch data file without its index is named;
  a version-2 record's reserved bytes are refused naming version 2;
* a ``meta.log`` record with a valid CRC that replay cannot use is a defect ``verify``
  reports with its log offset, and ``tensors()`` and ``get_tensor`` agree the tensor is
  incomplete."""

import os
import shutil
import struct

import numpy as np
import pytest

import tensorvault as tv


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


# --- registry -------------------------------------------------------------------------


def test_fusemoe_verify_compares_the_listed_checksum(tmp_path):
    root = str(tmp_path / "reg")
    reg = tv.Registry(root, config="tiny")
    reg.save_checkpoint(reg.initialize(seed=1), version="1.0.0")
    reg.save_checkpoint(reg.initialize(seed=2), version="1.0.1")
    listed = {v["version"]: v["checksum"] for v in reg.list_versions()}
    assert listed["1.0.0"] != listed["1.0.1"]
    reg.verify("1.0.1")
    src, dst = reg.version_dir("1.0.0"), reg.version_dir("1.0.1")
    for name in os.listdir(src):
        shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
    with pytest.raises(tv.CorruptionError) as e:
        tv.Registry(root, config="tiny").verify("1.0.1")
    msg = str(e.value)
    assert msg.startswith("version 1.0.1: ") and "metadata.json" in msg
    assert f"checksum {listed['1.0.0']} differs from {listed['1.0.1']} listed in registry.json" in msg
    reg.verify("1.0.0")


def test_unreadable_metadata_is_reported_not_defaulted(tmp_path):
    root = str(tmp_path / "reg")
    reg = tv.Registry(root, config="tiny")
    reg.save_checkpoint(reg.initialize(seed=1), version="1.0.0")
    assert tv.Registry(root).config == reg.config
    meta = os.path.join(reg.version_dir("1.0.0"), "metadata.json")
    with open(meta, "w") as f:
        f.write('{"format": 7')
    with pytest.raises(tv.InvalidFormatError) as e:
        tv.Registry(root)
    assert str(e.value).startswith(f"JSON error in {meta}")


def test_a_bad_source_file_is_named_with_field_and_offset(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 1_000_000) + b"{}")
    reg = tv.ModelRegistry(str(tmp_path / "reg"))
    with pytest.raises(tv.InvalidFormatError) as e:
        reg.save(str(bad), version="1.0.0")
    msg = str(e.value)
    assert msg.startswith(f"invalid safetensors file {bad}: field header length at offset 0"), msg
    assert "versions" not in msg
    assert reg.list_versions() == []
    assert not (tmp_path / "reg" / "versions" / "1.0.0").exists()


# --- CGEB -----------------------------------------------------------------------------


def _batch(tmp_path):
    rng = np.random.default_rng(3)
    data, index = tv.write_batch(
        str(tmp_path / "emb"),
        rng.standard_normal((4, 16)).astype(np.float32),
        rng.random((4, 4)).astype(np.float32),
        np.array([[0, 1]] * 4, dtype=np.uint8),
        alignment=64,
    )
    return data, index


def _drop_entry(index_path, drop):
    """Rewrite a version-2 .cgei without entry ``drop``, sealed with a valid CRC-32C
    (docs/formats/cgeb.md section 3)."""
    b = open(index_path, "rb").read()
    magic, version, flags, count, data_hash, align, _crc = struct.unpack(">4sHHQQII", b[:32])
    offsets = list(struct.unpack(f">{count}Q", b[32:]))
    removed = offsets.pop(drop)
    head = struct.pack(">4sHHQQI", magic, version, flags, len(offsets), data_hash, align)
    body = struct.pack(f">{len(offsets)}Q", *offsets)
    crc = _crc32c(head + body)
    open(index_path, "wb").write(head + struct.pack(">I", crc) + body)
    return offsets, removed


def test_cgeb_index_with_an_entry_removed_does_not_verify(tmp_path):
    data, index = _batch(tmp_path)
    offsets, removed = _drop_entry(index, 2)
    r = tv.BatchReader(data)
    assert len(r) == 3
    r[0]
    with pytest.raises(tv.InvalidFormatError) as e:
        r[1]
    assert str(e.value).startswith("cgeb: record 1 ends at offset")
    assert f"first non-zero byte at offset {removed}" in str(e.value)
    rep = r.verify()
    assert not rep["valid"]
    assert [b[0] for b in rep["bad_records"]] == [1], rep


def test_cgeb_index_with_the_last_entry_removed_does_not_verify(tmp_path):
    data, index = _batch(tmp_path)
    _drop_entry(index, 3)
    r = tv.BatchReader(data)
    with pytest.raises(tv.InvalidFormatError, match=r"its last record \(record 2\) ends at offset"):
        r[2]
    assert not r.verify()["valid"]


def test_cgeb_batch_without_its_index_is_named(tmp_path):
    data, index = _batch(tmp_path)
    os.remove(index)
    with pytest.raises(tv.NotFoundError) as e:
        tv.BatchReader(data)
    assert index in str(e.value)


def test_cgeb_v2_reserved_bytes_name_version_2():
    rec = bytearray(
        tv.encode_embedding(np.ones(8, np.float32), np.ones(2, np.float32), np.array([1], np.uint8))
    )
    assert rec[4:6] == b"\x00\x02"
    rec[14] = 1
    with pytest.raises(tv.InvalidFormatError) as e:
        tv.decode_embedding(bytes(rec), verify=False)
    assert str(e.value) == "cgeb: invalid reserved at offset 14: must be zero in version 2"


# --- store ----------------------------------------------------------------------------


def _forge_create(log_path, block):
    """Give block ``block``'s Create record an impossible data_len (u32 LE at byte 46 of
    the 128-byte record) and re-seal its CRC-32C (bytes 120..124 over 0..120)."""
    b = bytearray(open(log_path, "rb").read())
    at_forged = None
    for at in range(128, len(b) - 127, 128):
        rec = b[at : at + 128]
        if rec[0] == 0 and struct.unpack_from("<I", rec, 17)[0] == block:
            struct.pack_into("<I", rec, 46, 1 << 30)
            struct.pack_into("<I", rec, 120, _crc32c(bytes(rec[:120])))
            b[at : at + 128] = rec
            at_forged = at
    open(log_path, "wb").write(bytes(b))
    assert at_forged is not None
    return at_forged


@pytest.mark.parametrize("block", [0, 2])
def test_store_unusable_record_is_a_defect_and_get_agrees_with_ls(tmp_path, block):
    root = str(tmp_path / "root")
    with tv.Store(root, "t", "c", block_elems=256) as s:
        s.put_tensor("x", np.arange(3 * 256, dtype=np.float32), tier=0)
    at = _forge_create(os.path.join(root, "t", "c", "meta.log"), block)
    with tv.Store(root, "t", "c", read_only=True) as s:
        problems = s.verify()
        assert len(problems) == 1, problems
        p = problems[0]
        assert (p["kind"], p["record"], p["log_offset"], p["block"]) == ("log_record", "create", at, block)
        assert p["error"].startswith("impossible slot: data_len 1073741824")
        (t,) = s.tensors()
        assert (t["name"], t["blocks"], t["expected_blocks"]) == ("x", 2, 3)
        with pytest.raises(tv.CorruptionError, match=r'tensor "x" is incomplete: 2 of its 3 blocks'):
            s.get_tensor("x")


def test_store_untouched_verify_is_empty(tmp_path):
    root = str(tmp_path / "root")
    with tv.Store(root, "t", "c", block_elems=256) as s:
        s.put_tensor("x", np.arange(3 * 256, dtype=np.float32), tier=0)
        assert s.verify() == []
