"""Issue 26 item 1 through Python: a version is what the caller asked for (a taken one or
an invalid string raises, nothing is written; only ``None`` picks the next patch number),
saving never makes a version current, and ``activate`` does, forward and back."""

import os

import numpy as np
import pytest

import tensorvault as tv


def _dirs(root):
    return sorted(os.listdir(os.path.join(root, "versions")))


def _manifest(root):
    with open(os.path.join(root, "registry.json"), "rb") as f:
        return f.read()


def test_model_registry_versions(tmp_path):
    root = str(tmp_path / "reg")
    reg = tv.ModelRegistry(root)
    a = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    b = {"w": np.full((2, 3), 7, dtype=np.float32)}
    assert reg.save_tensors(a, version="1.0.0")["version"] == "1.0.0"
    assert reg.current_version is None, "a save is not an activation"
    before = (_manifest(root), _dirs(root))
    # The case: 1.0.0 exists; it used to be saved silently as another version.
    with pytest.raises(tv.InvalidArgumentError, match="version 1.0.0 already exists"):
        reg.save_tensors(b, version="1.0.0")
    for bad in ["../../etc", "bad version", "", "1.0"]:
        with pytest.raises(tv.InvalidArgumentError, match="invalid version string"):
            reg.save_tensors(b, version=bad)
    # The same through save(path).
    src = tmp_path / "m.safetensors"
    from safetensors.numpy import save_file

    save_file(b, str(src))
    with pytest.raises(tv.InvalidArgumentError, match="already exists"):
        reg.save(src, version="1.0.0")
    with pytest.raises(tv.InvalidArgumentError, match="invalid version string"):
        reg.save(src, version="../../etc")
    assert (_manifest(root), _dirs(root)) == before
    assert not (tmp_path / "etc").exists()
    # No version: the next patch number; still not current.
    assert reg.save(src)["version"] == "1.0.1"
    assert reg.current_version is None
    # activate: forward, back; the held model survives the swap.
    m = reg.activate("1.0.1")
    assert reg.current_version == "1.0.1"
    np.testing.assert_array_equal(m["w"], b["w"])
    back = reg.activate("1.0.0")
    np.testing.assert_array_equal(back["w"], a["w"])
    np.testing.assert_array_equal(m["w"], b["w"])
    assert tv.ModelRegistry(root).current_version == "1.0.0"
    with pytest.raises(tv.NotFoundError):
        reg.activate("9.9.9")
    with pytest.raises(tv.InvalidArgumentError):
        reg.activate("../x")
    assert reg.current_version == "1.0.0"


def test_weight_registry_versions(tmp_path):
    root = str(tmp_path / "reg")
    reg = tv.Registry(root, config="tiny")
    w = reg.initialize(seed=1)
    assert reg.save_checkpoint(w, version="1.0.0")["version"] == "1.0.0"
    with pytest.raises(tv.InvalidArgumentError, match="already exists"):
        reg.save_checkpoint(w, version="1.0.0")
    with pytest.raises(tv.InvalidArgumentError, match="invalid version string"):
        reg.save_checkpoint(w, version="../../etc")
    assert reg.save_checkpoint(w)["version"] == "1.0.1"
    assert reg.current_version is None
    reg.activate("1.0.1")
    assert reg.current_version == "1.0.1"
    reg.activate("1.0.0")
    assert tv.Registry(root).current_version == "1.0.0"
    assert _dirs(root) == ["1.0.0", "1.0.1"]
