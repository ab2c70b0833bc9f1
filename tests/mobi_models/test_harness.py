"""The harness itself: the conformance comparison and pre-processing, and the legacy
torch reader on crafted files (each kind of bad input refused with its reason)."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import torch_legacy
from conformance import close, constant_weights


def test_close_uses_backend_tolerances():
    exp = np.array([1.0, 2.0, np.nan], np.float32)
    assert close(exp, exp.copy(), 1e-3, 1e-7) is None
    assert close(exp, exp * (1 + 5e-4), 1e-3, 1e-7) is None
    assert "values differ" in close(exp, exp * (1 + 5e-3), 1e-3, 1e-7)
    assert "shape" in close(exp, exp[:2], 1e-3, 1e-7)
    assert close(np.array([3, 4], np.int64), np.array([3.0, 4.0], np.float32), 1e-3, 1e-7) is None
    assert "integer" in close(np.array([3, 4], np.int64), np.array([3.0, 4.5], np.float32), 1e-3, 1e-7)


def test_constant_weights_keeps_first_input_only():
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"])
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("x", "w", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph)
    model.ir_version = 3
    x, w, b = np.ones((1, 1, 3, 3), np.float32), np.full((2, 1, 1, 1), 2.0, np.float32), np.zeros(2, np.float32)
    m, feeds = constant_weights(model, [x, w, b])
    assert [i.name for i in m.graph.input] == ["x"]
    assert list(feeds) == ["x"] and feeds["x"] is x
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    np.testing.assert_array_equal(inits["w"], w)
    np.testing.assert_array_equal(inits["b"], b)
    assert m.ir_version >= 4
    assert [i.name for i in model.graph.input] == ["x", "w", "b"], "the case's own model is left alone"


def _legacy_file(tmp_path, obj_pickle: bytes, keys, storages: bytes, magic=torch_legacy.MAGIC):
    p = tmp_path / "m.pth"
    p.write_bytes(
        pickle.dumps(magic, protocol=2)
        + pickle.dumps(torch_legacy.PROTOCOL, protocol=2)
        + pickle.dumps({"little_endian": True}, protocol=2)
        + obj_pickle
        + pickle.dumps(keys, protocol=2)
        + storages
    )
    return p


def _pickle_state(entries) -> bytes:
    """A pickle of {name: _rebuild_tensor_v2(storage, offset, size, stride)} written by hand
    with the opcodes torch's legacy saver emits."""
    import io

    buf = io.BytesIO()
    w = buf.write
    w(b"\x80\x02}q\x00(")  # PROTO 2, EMPTY_DICT, MARK
    for name, (key, numel, offset, size, stride) in entries.items():
        w(pickle.dumps(name, protocol=2)[2:-1])  # the string opcode only
        w(b"ctorch._utils\n_rebuild_tensor_v2\n(")
        w(b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\n")
        w(pickle.dumps(key, protocol=2)[2:-1])
        w(b"X\x03\x00\x00\x00cpu")
        w(pickle.dumps(numel, protocol=2)[2:-1])
        w(b"Nt")  # view metadata None, TUPLE
        w(b"Q")  # BINPERSID
        w(pickle.dumps(offset, protocol=2)[2:-1])
        w(pickle.dumps(tuple(size), protocol=2)[2:-1])
        w(pickle.dumps(tuple(stride), protocol=2)[2:-1])
        w(b"tR")  # TUPLE, REDUCE
    w(b"u.")  # SETITEMS, STOP
    return buf.getvalue()


def _storage_bytes(values: np.ndarray) -> bytes:
    return struct.pack("<Q", values.size) + values.astype("<f4").tobytes()


def test_legacy_reads_strided_tensor(tmp_path):
    data = np.arange(6, dtype=np.float32)
    state = _pickle_state({"w": ("0", 6, 0, (2, 3), (1, 2))})  # a transposed (column-major) view
    p = _legacy_file(tmp_path, state, ["0"], _storage_bytes(data))
    sd = torch_legacy.load_state_dict(str(p))
    np.testing.assert_array_equal(sd["w"], data.reshape(3, 2).T)
    assert sd["w"].flags.c_contiguous


def test_legacy_refuses_bad_magic(tmp_path):
    p = _legacy_file(tmp_path, _pickle_state({}), [], b"", magic=1234)
    with pytest.raises(torch_legacy.LegacyTorchError, match="magic"):
        torch_legacy.load_state_dict(str(p))


def test_legacy_refuses_other_classes(tmp_path):
    evil = b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00truex\x85R."  # os.system('true')
    p = _legacy_file(tmp_path, evil, [], b"")
    with pytest.raises(torch_legacy.LegacyTorchError, match="os.system is not allowed"):
        torch_legacy.load_state_dict(str(p))


def test_legacy_refuses_lying_storage_size(tmp_path):
    state = _pickle_state({"w": ("0", 6, 0, (6,), (1,))})
    short = struct.pack("<Q", 6) + np.zeros(5, "<f4").tobytes()  # claims 6, holds 5
    p = _legacy_file(tmp_path, state, ["0"], short)
    with pytest.raises(torch_legacy.LegacyTorchError, match="does not fit"):
        torch_legacy.load_state_dict(str(p))


def test_legacy_refuses_view_outside_storage(tmp_path):
    state = _pickle_state({"w": ("0", 6, 2, (2, 3), (3, 1))})  # needs 8 elements
    p = _legacy_file(tmp_path, state, ["0"], _storage_bytes(np.zeros(6, np.float32)))
    with pytest.raises(torch_legacy.LegacyTorchError, match="outside storage"):
        torch_legacy.load_state_dict(str(p))


def test_legacy_refuses_trailing_bytes(tmp_path):
    state = _pickle_state({"w": ("0", 2, 0, (2,), (1,))})
    p = _legacy_file(tmp_path, state, ["0"], _storage_bytes(np.zeros(2, np.float32)) + b"junk")
    with pytest.raises(torch_legacy.LegacyTorchError, match="trailing"):
        torch_legacy.load_state_dict(str(p))
