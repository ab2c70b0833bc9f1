"""Weight registry: versions, checkpoints as numpy dicts (zero copy), save, rollback,
init, and interop with Python's safetensors both ways."""

import hashlib
import json
import os

import numpy as np
import pytest

import tensorvault as tv

safetensors_numpy = pytest.importorskip("safetensors.numpy")

TINY = {"input_dim": 24, "num_experts": 3, "expert_hidden_dim": 16,
        "expert_output_dim": 8, "output_dim": 12}


@pytest.fixture
def reg(tmp_path):
    return tv.Registry(tmp_path / "reg", config="tiny", seed=7)


def test_initialize_is_deterministic_per_seed(reg):
    a = reg.initialize("kaiming_uniform")
    b = reg.initialize("kaiming_uniform")
    c = reg.initialize("kaiming_uniform", seed=8)
    assert set(a) == set(b) and len(a) == 3 + 3 * 3 + 1
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.array_equal(a["gating.linear.weight"], c["gating.linear.weight"])
    # Separate streams per expert: experts do not come out identical.
    assert not np.array_equal(a["experts.0.hidden.weight"], a["experts.1.hidden.weight"])
    w = a["experts.0.input_proj.weight"]
    assert w.shape == (24, 16) and w.dtype == np.float32
    bound = np.sqrt(2.0) * np.sqrt(3.0 / 24)
    assert np.abs(w).max() <= bound
    z = reg.initialize("zeros")
    assert all((v == 0).all() for k, v in z.items() if k != "gating.temperature")
    o = reg.initialize("orthogonal", gain=1.0)["experts.1.hidden.weight"]
    np.testing.assert_allclose(o @ o.T, np.eye(16), atol=1e-5)
    with pytest.raises(tv.InvalidArgumentError, match="unknown strategy"):
        reg.initialize("magic")


def test_save_list_load_rollback(reg):
    w1 = reg.initialize("xavier_uniform")
    v1 = reg.save_checkpoint(w1, version="1.0.0", metrics={"epoch": 1, "loss": 0.5, "learning_rate": 1e-3, "acc": 0.9})
    assert v1["version"] == "1.0.0" and v1["checksum"].startswith("sha256:")
    w2 = {k: np.asarray(v) * 2 for k, v in w1.items()}
    v2 = reg.save_checkpoint(w2)
    assert v2["version"] == "1.0.1"
    assert [v["version"] for v in reg.list_versions()] == ["1.0.0", "1.0.1"]
    assert reg.list_versions()[0]["metrics"]["acc"] == 0.9
    got = reg.load_checkpoint("1.0.1")
    assert got.version["version"] == "1.0.1" and reg.current_version == "1.0.1"
    for k in w2:
        np.testing.assert_array_equal(got[k], w2[k])
    back = reg.rollback("1.0.0")
    np.testing.assert_array_equal(back["output.projection.weight"], w1["output.projection.weight"])
    assert reg.current_version == "1.0.0"
    reg.set_golden("1.0.0")
    assert reg.golden == "1.0.0"
    assert reg.verify("1.0.1")["version"] == "1.0.1"
    # A new Registry object on the same root infers the shapes from the saved versions.
    again = tv.Registry(reg.root)
    assert again.config == TINY
    assert [v["version"] for v in again.list_versions()] == ["1.0.0", "1.0.1"]


def test_loaded_arrays_are_zero_copy_views(reg):
    reg.save_checkpoint(reg.initialize(), version="0.1.0")
    w = reg.load_checkpoint("0.1.0")
    a = w["experts.2.hidden.weight"]
    assert not a.flags.writeable
    assert isinstance(a.base, tv._tensorvault.LoadedWeightsOwner)
    assert a.base.all_mapped  # every tensor is a view of the mapped safetensors file
    with pytest.raises(ValueError):
        a[0, 0] = 1.0
    c = reg.load_checkpoint("0.1.0", copy=True)["experts.2.hidden.weight"]
    assert c.flags.writeable and c.base is None or c.base is not a.base
    del w, reg
    assert float(a.sum()) == float(c.sum())  # the view keeps the map alive


def test_ours_read_by_safetensors(reg):
    w = reg.initialize("kaiming_normal")
    v = reg.save_checkpoint(w, version="2.0.0")
    path = os.path.join(reg.version_dir("2.0.0"), "weights.safetensors")
    theirs = safetensors_numpy.load_file(path)
    assert set(theirs) == set(w)
    for k in w:
        assert theirs[k].dtype == np.float32
        np.testing.assert_array_equal(theirs[k], w[k])
    raw = open(path, "rb").read()
    assert v["checksum"] == "sha256:" + hashlib.sha256(raw).hexdigest()


def _write_checkpoint_with_python(d, tensors, dtype):
    os.makedirs(d)
    st = os.path.join(d, "weights.safetensors")
    safetensors_numpy.save_file({k: np.asarray(v).astype(dtype) for k, v in tensors.items()}, st)
    digest = hashlib.sha256(open(st, "rb").read()).hexdigest()
    meta = {"format": "tensorvault-registry-checkpoint", "format_version": 1,
            "version": "3.0.0", "source_id": "python-safetensors",
            "created_at": "2026-01-01T00:00:00Z", "checksum": "sha256:" + digest,
            "metrics": None, "config": TINY}
    json.dump(meta, open(os.path.join(d, "metadata.json"), "w"))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_safetensors_written_by_python_load_in_ours(tmp_path, reg, dtype):
    src = reg.initialize("xavier_normal")
    d = tmp_path / f"ckpt-{np.dtype(dtype).name}"
    _write_checkpoint_with_python(str(d), src, dtype)
    got = tv.load_checkpoint(d)
    assert got.version["source_id"] == "python-safetensors"
    for k, v in src.items():
        np.testing.assert_array_equal(got[k], np.asarray(v).astype(dtype).astype(np.float32))


def test_registry_errors(tmp_path, reg):
    with pytest.raises(tv.NotFoundError, match="9.9.9"):
        reg.load_checkpoint("9.9.9")
    with pytest.raises(tv.InvalidArgumentError):
        reg.load_checkpoint("../../etc")
    w = dict(reg.initialize())
    bad = dict(w)
    bad["gating.linear.weight"] = np.zeros((2, 2), np.float32)
    with pytest.raises(tv.InvalidArgumentError, match="shape"):
        reg.save_checkpoint(bad)
    missing = dict(w)
    del missing["output.projection.weight"]
    with pytest.raises(tv.InvalidArgumentError, match="missing"):
        reg.save_checkpoint(missing)
    with pytest.raises(tv.InvalidArgumentError, match="unexpected"):
        reg.save_checkpoint({**w, "extra": np.zeros(1, np.float32)})
    with pytest.raises(tv.UnsupportedError, match="no GPU backend"):
        tv.Registry(tmp_path / "r2", device="cuda")
    with pytest.raises(tv.InvalidArgumentError):
        tv.Registry(tmp_path / "r3", config="huge")
    reg.save_checkpoint(w, version="1.2.3")
    st = os.path.join(reg.version_dir("1.2.3"), "weights.safetensors")
    data = bytearray(open(st, "rb").read())
    data[-3] ^= 0xFF
    open(st, "wb").write(bytes(data))
    with pytest.raises(tv.CorruptionError, match="checksum mismatch"):
        reg.load_checkpoint("1.2.3")
    assert tv.load_checkpoint(reg.version_dir("1.2.3"), verify=False)["gating.temperature"].shape == ()
    open(st, "wb").write(bytes(data[:100]))
    with pytest.raises(tv.TensorvaultError):
        tv.load_checkpoint(reg.version_dir("1.2.3"), verify=False)
    with pytest.raises(tv.NotFoundError):
        tv.load_checkpoint(tmp_path / "nowhere")
