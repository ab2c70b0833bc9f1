"""MOBI: read a model into Python objects, write it back, bad input raises."""

import numpy as np
import pytest

import tensorvault as tv


def test_example_round_trip(tmp_path):
    m = tv.example_model("lenet5", seed=3)
    assert m.parameter_count == 61706
    assert m.inputs[0].dtype == "f32" and m.operators[0].op == "Conv2D"
    p = tmp_path / "lenet.mobi"
    n = m.save(p)
    assert n == p.stat().st_size and p.read_bytes()[:4] == b"MOBI"
    back = tv.read_mobi(p)
    assert back.name == m.name and back.inputs == m.inputs and back.outputs == m.outputs
    assert back.operators == m.operators
    for a, b in zip(m.tensors, back.tensors):
        assert a.id == b.id
        np.testing.assert_array_equal(a.values, b.values)
    assert tv.read_mobi(p.read_bytes()).parameter_count == 61706


@pytest.mark.parametrize("q", ["fp16", "int8", "int8-per-tensor", "uint8", "int16"])
def test_quantized_write(tmp_path, q):
    m = tv.example_model("lenet5")
    data = m.to_bytes(quantize=q, gzip=(q == "int8"))
    back = tv.read_mobi(data)
    assert back.format_version == 2
    # conv2's weights [16, 6, 5, 5]; conv1's 150 weights are quantized too (>= 32 values),
    # the biases stay f32 under integer targets.
    t2, b2 = m.tensors[2], back.tensors[2]
    assert b2.dtype == q.split("-")[0] and b2.values.dtype == np.float32 and b2.shape == t2.shape
    if q == "fp16":
        np.testing.assert_array_equal(b2.values, t2.values.astype(np.float16).astype(np.float32))
        assert b2.quantization == "none" and b2.scale is None
        assert back.tensors[0].dtype == "fp16"
    elif q == "int8":
        assert b2.quantization == "per-axis" and b2.axis == 0
        assert len(b2.scales) == 16 and b2.zero_points == [0] * 16
        err = np.abs(b2.values - t2.values).reshape(16, -1).max(axis=1)
        assert (err <= np.asarray(b2.scales) * 0.5001).all()
        assert back.tensors[0].quantization == "per-axis" and len(back.tensors[0].scales) == 6
        assert back.tensors[1].dtype == "f32" and back.tensors[1].quantization == "none"
    else:
        assert b2.quantization == "per-tensor"
        assert np.abs(b2.values - t2.values).max() <= b2.scale * 0.5001 + 1e-7
        assert back.tensors[1].dtype == "f32"
    assert back.tensors[0].gzip == (q == "int8")


def test_v2_fields_symbolic_batch_and_value_names(tmp_path, rng):
    w = rng.standard_normal((3, 4)).astype(np.float32)
    m = tv.MobiModel(
        name="batched",
        inputs=[tv.IoSpec("x", "f32", ["N", 4])],
        outputs=[tv.IoSpec("y", "f32", [-1, 3])],
        tensors=[tv.Tensor(id=2, values=w)],
        operators=[tv.Operator("MatMul", [0, 2], [3]), tv.Operator("Relu", [3], [1])],
        value_names={2: "fc.weight", 3: "fc/matmul:0"},
    )
    p = tmp_path / "b.mobi"
    m.save(p)
    back = tv.read_mobi(p)
    assert back.inputs[0].shape == ["N", 4] and back.outputs[0].shape == ["", 3]
    assert back.value_names == {2: "fc.weight", 3: "fc/matmul:0"}
    with pytest.raises(tv.InvalidArgumentError, match="value id 77"):
        tv.MobiModel(name="x", inputs=[tv.IoSpec("x", "f32", [1])],
                     outputs=[tv.IoSpec("y", "f32", [1])],
                     operators=[tv.Operator("Relu", [0], [1])],
                     value_names={77: "nowhere"}).save(tmp_path / "x.mobi")


def test_build_model_from_python(tmp_path, rng):
    w = rng.standard_normal((3, 4)).astype(np.float32)  # FC weights [out, in]
    m = tv.MobiModel(
        name="tiny-fc",
        framework_version=2,
        created_unix=1700000000,
        inputs=[tv.IoSpec("x", "f32", [1, 4])],
        outputs=[tv.IoSpec("y", "f32", [1, 3])],
        tensors=[tv.Tensor(id=2, values=w), tv.Tensor(id=3, values=np.zeros(3, np.float64))],
        # The reader checks parameters against the operator table (docs/formats/mobi.md).
        operators=[tv.Operator("FullyConnected", [0, 2, 3], [4]),
                   tv.Operator("Softmax", [4], [1], {"axis": -1, "beta": 0.5})],
    )
    p = tmp_path / "fc.mobi"
    m.save(p)
    back = tv.read_mobi(p)
    assert back.created_unix == 1700000000 and back.framework_version == 2
    assert back.operators[1].params == m.operators[1].params
    np.testing.assert_array_equal(back.tensor(2).values, w)
    assert back.tensor(3).values.dtype == np.float32
    with pytest.raises(tv.InvalidArgumentError, match="unknown operator"):
        tv.MobiModel(name="x", operators=[tv.Operator("Warp", [], [])]).save(tmp_path / "x.mobi")


def test_bad_files(tmp_path):
    data = bytearray(tv.example_model("lenet5").to_bytes())
    with pytest.raises(tv.InvalidFormatError):
        tv.read_mobi(b"NOPE" + bytes(data[4:]))
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0x55
    with pytest.raises(tv.CorruptionError):
        tv.read_mobi(bytes(flipped))
    with pytest.raises(tv.InvalidFormatError):
        tv.read_mobi(bytes(data[:100]))
    with pytest.raises(tv.NotFoundError):
        tv.read_mobi(tmp_path / "missing.mobi")
    rng = np.random.default_rng(5)
    for _ in range(200):
        b = bytearray(data)
        for _ in range(4):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        try:
            tv.read_mobi(bytes(b[: int(rng.integers(1, len(b) + 1))]))
        except tv.TensorvaultError:
            pass
