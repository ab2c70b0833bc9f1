"""Hostile registry inputs through the Python API (issue 25 class 2): ``registry.json``
files that are well-formed and validly sealed but inconsistent are refused by both
registries with a typed error naming the field, and nothing on disk changes."""

import json
import os

import pytest

import tensorvault as tv


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _forge(root, edit):
    """Rewrite registry.json as ``edit(dict)`` makes it and seal it with a valid CRC-32C
    (the compact serialization without the checksum member, docs/formats/registry.md)."""
    path = os.path.join(root, "registry.json")
    with open(path, "rb") as f:
        m = json.load(f)
    del m["manifest_crc32c"]
    edit(m)
    body = json.dumps(m, separators=(",", ":"), ensure_ascii=False)
    m["manifest_crc32c"] = f"{_crc32c(body.encode()):08x}"
    data = json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode()
    with open(path, "wb") as f:
        f.write(data)
    return data


def _registry(root):
    reg = tv.Registry(root, config="tiny")
    for i, v in enumerate(["1.0.0", "1.0.1", "1.0.2"]):
        reg.save_checkpoint(reg.initialize(seed=i), version=v)
    reg.load_checkpoint("1.0.2")
    reg.set_golden("1.0.0")


def _dirs(root):
    return sorted(os.listdir(os.path.join(root, "versions")))


def _dup(m):
    m["versions"].insert(0, dict(m["versions"][2]))


def _unlisted_golden(m):
    m["golden"] = "7.7.7"


def _unlisted_current(m):
    m["current"] = "7.7.7"


def _newer(m):
    m["format_version"] = 3


@pytest.mark.parametrize(
    "edit, exc, needle",
    [
        (_dup, tv.InvalidFormatError, 'versions[3] repeats version "1.0.2" of versions[0]'),
        (_unlisted_golden, tv.InvalidFormatError, 'field golden names version "7.7.7"'),
        (_unlisted_current, tv.InvalidFormatError, 'field current names version "7.7.7"'),
        (_newer, tv.UnsupportedFormatError, "field format_version is 3"),
    ],
)
def test_inconsistent_manifest_is_refused(tmp_path, edit, exc, needle):
    root = str(tmp_path / "reg")
    _registry(root)
    sealed = _forge(root, edit)
    before = _dirs(root)
    for open_ in (lambda: tv.Registry(root, config="tiny"), lambda: tv.ModelRegistry(root)):
        with pytest.raises(exc) as e:
            open_()
        assert needle in str(e.value)
    assert _dirs(root) == before
    with open(os.path.join(root, "registry.json"), "rb") as f:
        assert f.read() == sealed


def test_unedited_reseal_opens(tmp_path):
    root = str(tmp_path / "reg")
    _registry(root)
    _forge(root, lambda m: None)
    reg = tv.Registry(root, config="tiny")
    assert [v["version"] for v in reg.list_versions()] == ["1.0.0", "1.0.1", "1.0.2"]
    assert reg.golden == "1.0.0"
