"""MobiModel.run: the reference runtime from Python (dict or single array in, dict of
numpy arrays out), equal to numpy computations; bad inputs raise InvalidArgumentError."""

import numpy as np
import pytest

import tensorvault as tv


def _tiny(w, b, op="Relu"):
    """x [N, 3] -> FullyConnected(w [2, 3], b [2]) -> op -> y."""
    return tv.MobiModel(
        name="tiny",
        inputs=[tv.IoSpec("x", "f32", [1, 3])],
        outputs=[tv.IoSpec("y", "f32", [1, 2])],
        tensors=[tv.Tensor(id=2, values=w), tv.Tensor(id=3, values=b)],
        operators=[
            tv.Operator("FullyConnected", [0, 2, 3], [4]),
            tv.Operator(op, [4], [1]),
        ],
    )


def test_single_array_and_dict_inputs_match_numpy(rng):
    w = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    m = _tiny(w, b)
    x = rng.standard_normal((5, 3)).astype(np.float32)  # batch 5, declared 1
    want = np.maximum(x @ w.T + b, 0)
    out = m.run(x)
    assert list(out) == ["y"]
    np.testing.assert_allclose(out["y"], want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(m.run({"x": x.astype(np.float64)})["y"], want, rtol=1e-6, atol=1e-6)


def test_lenet5_example_and_saved_quantized_file(tmp_path):
    m = tv.example_model("lenet5", seed=2)
    x = np.linspace(0, 1, 3 * 784, dtype=np.float32).reshape(3, 1, 28, 28)
    p = m.run(x)["probabilities"]
    assert p.shape == (3, 10) and p.dtype == np.float32
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)
    path = tmp_path / "l8.mobi"
    m.save(path, quantize="int8")
    q = tv.read_mobi(path).run(x)["probabilities"]
    assert np.abs(q - p).max() < 0.05
    assert (q.argmax(axis=1) == p.argmax(axis=1)).all()


def test_session_is_reused_and_refreshed_after_edits(rng):
    w = np.eye(2, 3, dtype=np.float32)
    m = _tiny(w, np.zeros(2, np.float32), op="Identity")
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    np.testing.assert_array_equal(m.run(x)["y"], [[1.0, 2.0]])
    s = m.__dict__["_run_session"][1]
    m.run(x)
    assert m.__dict__["_run_session"][1] is s
    m.tensors[1] = tv.Tensor(id=3, values=np.array([10.0, 20.0], np.float32))
    np.testing.assert_array_equal(m.run(x)["y"], [[11.0, 22.0]])
    sess = m.session()
    assert sess.input_names == ["x"] and sess.output_names == ["y"]


def test_integer_constants_and_inputs():
    # Gather with an int64 constant index and with an int64 graph input.
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = tv.MobiModel(
        name="gather",
        inputs=[tv.IoSpec("x", "f32", [2, 3])],
        outputs=[tv.IoSpec("y", "f32", [2])],
        tensors=[tv.Tensor(id=2, values=np.array(-1, np.float32), dtype="i64")],
        operators=[tv.Operator("Gather", [0, 2], [1], {"axis": 1})],
    )
    np.testing.assert_array_equal(m.run(data)["y"], [2.0, 5.0])
    m2 = tv.MobiModel(
        name="gather2",
        inputs=[tv.IoSpec("x", "f32", [2, 3]), tv.IoSpec("i", "i64", [2])],
        outputs=[tv.IoSpec("y", "f32", [2, 2])],
        operators=[tv.Operator("Gather", [0, 1], [2], {"axis": 0})],
    )
    y = m2.run({"x": data, "i": np.array([1, 0])})["y"]
    np.testing.assert_array_equal(y, data[[1, 0]])


def test_bad_inputs_raise(rng):
    m = _tiny(np.ones((2, 3), np.float32), np.zeros(2, np.float32))
    with pytest.raises(tv.InvalidArgumentError, match="missing input"):
        m.run({})
    with pytest.raises(tv.InvalidArgumentError, match="unknown input"):
        m.run({"x": np.zeros((1, 3), np.float32), "z": np.zeros(1, np.float32)})
    with pytest.raises(tv.InvalidArgumentError, match=r"shape \[1, 4\]"):
        m.run(np.zeros((1, 4), np.float32))
    with pytest.raises(tv.InvalidArgumentError, match="is i64"):
        m.run(np.zeros((1, 3), np.int64))
    y = m.run(np.array([[np.nan, 0, 0]], np.float32))["y"]
    assert np.isnan(y).all()
    bad = _tiny(np.ones((2, 4), np.float32), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match=r"operator 0 \(FullyConnected\)"):
        bad.run(np.zeros((1, 3), np.float32))
    two = tv.MobiModel(name="two", inputs=[tv.IoSpec("a", "f32", [1]), tv.IoSpec("b", "f32", [1])],
                       outputs=[tv.IoSpec("c", "f32", [1])],
                       operators=[tv.Operator("Add", [0, 1], [2])])
    with pytest.raises(tv.InvalidArgumentError, match="pass a dict"):
        two.run(np.zeros(1, np.float32))
    np.testing.assert_array_equal(two.run({"a": np.ones(1), "b": np.ones(1)})["c"], [2.0])


def test_open_mobi_session_maps_f32_weights_and_matches_read_mobi(tmp_path):
    m = tv.example_model("lenet5", seed=3)
    x = np.linspace(0, 1, 2 * 784, dtype=np.float32).reshape(2, 1, 28, 28)
    f32 = tmp_path / "f32.mobi"
    m.save(f32)
    s = tv.open_mobi_session(f32)
    mem = s.constant_memory
    # LeNet-5's weights are all f32: every byte is used in place from the map.
    assert mem["mapped"] == mem["in_place"] == 4 * m.parameter_count
    assert mem["converted"] == 0
    want = tv.read_mobi(f32).run(x)["probabilities"]
    np.testing.assert_array_equal(s.run({"image": x})["probabilities"], want)
    q = tmp_path / "int8.mobi"
    m.save(q, quantize="int8")
    sq = tv.open_mobi_session(q)
    mq = sq.constant_memory  # int8 weights: dequantized (kept) or packed (dropped)
    assert mq["converted"] + mq["dropped"] > 0 and mq["packed"] > 0
    np.testing.assert_array_equal(sq.run({"image": x})["probabilities"],
                                  tv.read_mobi(q).run(x)["probabilities"])
    with pytest.raises(tv.NotFoundError):
        tv.open_mobi_session(tmp_path / "missing.mobi")
