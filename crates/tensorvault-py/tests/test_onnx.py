"""ONNX import: the committed ONNX fixtures (tests/fixtures/onnx/, checked against
onnxruntime by make_fixtures.py) convert to MOBI graphs that compute the reference
output; bad input raises the right exception and writes nothing."""

import os

import numpy as np
import pytest

import tensorvault as tv

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "fixtures", "onnx")


def fixture(name):
    return os.path.join(FIXTURES, name)


def run(m, x):
    """Evaluate the ops the fixtures use, in numpy (NCHW)."""
    vals = {0: x}
    for t in m.tensors:
        vals[t.id] = t.values
    for o in m.operators:
        a = vals[o.inputs[0]]
        p = o.params
        if o.op == "Conv2D":
            w, b = vals[o.inputs[1]], vals[o.inputs[2]]
            top, left, bottom, right = p["padding"]
            xp = np.pad(a, ((0, 0), (0, 0), (top, bottom), (left, right)))
            kh, kw = w.shape[2:]
            oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
            y = np.zeros((a.shape[0], w.shape[0], oh, ow), np.float32)
            for i in range(kh):
                for j in range(kw):
                    y += np.einsum("nchw,mc->nmhw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
            y += b[None, :, None, None]
        elif o.op == "Relu":
            y = np.maximum(a, 0)
        elif o.op == "MaxPool2D":
            assert p["kernel"] == [2, 2] and p["stride"] == [2, 2]
            n, c, h, w_ = a.shape
            y = a.reshape(n, c, h // 2, 2, w_ // 2, 2).max(axis=(3, 5))
        elif o.op == "Flatten":
            y = a.reshape(a.shape[0], -1)
        elif o.op == "Reshape":
            y = a.reshape(p["shape"])
        elif o.op == "FullyConnected":
            y = a @ vals[o.inputs[1]].T + vals[o.inputs[2]]
        elif o.op == "Softmax":
            e = np.exp(a - a.max(axis=p["axis"], keepdims=True))
            y = e / e.sum(axis=p["axis"], keepdims=True)
        else:
            raise AssertionError(f"evaluator lacks {o.op}")
        vals[o.outputs[0]] = y
    return vals[len(m.inputs)]


@pytest.mark.parametrize("name", ["tiny_cnn_opset11.onnx", "tiny_cnn_opset13.onnx"])
def test_fixture_converts_and_computes_the_reference(tmp_path, name):
    dst = tmp_path / "cnn.mobi"
    m = tv.convert_onnx(fixture(name), dst, batch=2)
    assert dst.read_bytes()[:4] == b"MOBI"
    ops = [o.op for o in m.operators]
    assert ops[:3] == ["Conv2D", "Relu", "MaxPool2D"] and ops[-2:] == ["FullyConnected", "Softmax"]
    assert m.inputs[0].shape == [2, 1, 8, 8] and m.outputs[0].name == "probs"
    assert m.optimized
    x = np.load(fixture("tiny_cnn.input.npy"))
    want = np.load(fixture("tiny_cnn.output.npy"))
    np.testing.assert_allclose(run(m, x), want, atol=1e-5)


@pytest.mark.parametrize("weights,dtype,atol", [("fp16", "fp16", 1e-3), ("int16", "int16", 1e-3), ("int8", "int8", 5e-2)])
def test_weight_modes(tmp_path, weights, dtype, atol):
    m = tv.convert_onnx(fixture("tiny_cnn_opset13.onnx"), tmp_path / "q.mobi", weights=weights, gzip=True, batch=2)
    conv = m.operators[0]
    assert m.tensor(conv.inputs[1]).dtype == dtype
    # fp16 halves biases too; the integer modes keep them f32.
    assert m.tensor(conv.inputs[2]).dtype == ("fp16" if weights == "fp16" else "f32")
    assert all(t.gzip for t in m.tensors)
    x = np.load(fixture("tiny_cnn.input.npy"))
    np.testing.assert_allclose(run(m, x), np.load(fixture("tiny_cnn.output.npy")), atol=atol)


def test_symbolic_batch_is_kept_without_batch(tmp_path):
    m = tv.convert_onnx(fixture("tiny_cnn_opset13.onnx"), tmp_path / "n.mobi")
    assert m.inputs[0].shape[0] == "N" and m.outputs[0].shape[0] == "N"
    reshape = next(o for o in m.operators if o.op == "Reshape")
    assert reshape.params["shape"] == [-1, 64]


def test_errors_name_the_problem_and_write_nothing(tmp_path):
    dst = tmp_path / "out.mobi"
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff\xff\xff not protobuf")
    with pytest.raises(tv.InvalidFormatError, match="protobuf"):
        tv.convert_onnx(garbage, dst)
    with pytest.raises(tv.NotFoundError):
        tv.convert_onnx(tmp_path / "missing.onnx", dst)
    with pytest.raises(tv.InvalidArgumentError, match="weights"):
        tv.convert_onnx(fixture("tiny_cnn_opset13.onnx"), dst, weights="int4", batch=1)
    assert not dst.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["garbage.onnx"]


# The real digits models of tests/mobi_models (trained on scikit-learn's load_digits,
# exported with onnx) and onnxruntime's outputs on the held-out digits, committed there.
DIGITS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "mobi_models", "fixtures")


def _lenet_input(images):
    x = images.astype(np.float32) / 16.0
    return np.ascontiguousarray(np.kron(x, np.ones((4, 4), np.float32))[:, None])


def _cifar_input(images):
    x = _lenet_input(images)[:, 0]
    return np.ascontiguousarray(x[:, None] * np.array([1.0, 0.75, 0.5], np.float32)[None, :, None, None] - 0.25)


def _mlp_input(images):
    return np.ascontiguousarray(images.reshape(len(images), 64).astype(np.float32) / 16.0)


@pytest.mark.parametrize("name,fname,to_input", [
    ("lenet5", "lenet5_digits.onnx", _lenet_input),
    ("cifar", "cifar_digits.onnx", _cifar_input),
    ("mlp", "mlp_digits.onnx", _mlp_input),
])
@pytest.mark.parametrize("weights,tol", [("f32", 1e-5), ("fp16", 5e-3), ("int16", 1e-3), ("int8", 1e-1)])
def test_real_digits_models_match_onnxruntime(tmp_path, name, fname, to_input, weights, tol):
    digits = np.load(os.path.join(DIGITS, "digits_test.npz"))
    ref = np.load(os.path.join(DIGITS, f"{name}_reference.npy"))
    m = tv.convert_onnx(os.path.join(DIGITS, fname), tmp_path / "m.mobi", weights=weights)
    y = run(m, to_input(digits["images"]))
    assert np.abs(y - ref).max() <= tol * max(1.0, np.abs(ref).max())
    assert np.mean(y.argmax(1) == ref.argmax(1)) >= 0.99
