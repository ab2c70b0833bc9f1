"""Codec v3 from Python (issue 23): `Store(codec=3)` rotates embedding tensors at tier 3
(TQTC version 3 segments), keeps every other kind as codec v2, and refuses unknown codecs."""

import numpy as np
import pytest

import tensorvault as tv


def _rows(n=512, dim=576, seed=0):
    """Unit-norm rows with a few large channels, like a real embedding table."""
    rng = np.random.default_rng(seed)
    x = rng.laplace(size=(n, dim)) * np.where(np.arange(dim) % 97 == 5, 6.0, 1.0)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _rrmse(a, b):
    return float(np.linalg.norm(np.asarray(b, np.float64) - a) / np.linalg.norm(a))


def _round_trip(path, codec, name, x, tier, kind):
    with tv.Store(path, "t", f"c{codec}", durability="os", codec=codec) as s:
        assert s.geometry["codec"] == codec
        info = s.put_tensor(name, x, tier=tier, kind=kind)
        return np.asarray(s.get_tensor(name)), info


def test_codec_3_rotates_embeddings_at_tier_3(tmp_path):
    x = _rows()
    v2, i2 = _round_trip(tmp_path, 2, "e", x, 3, "embedding")
    v3, i3 = _round_trip(tmp_path, 3, "e", x, 3, "embedding")
    assert i3["stored_bytes"] <= i2["stored_bytes"]
    assert _rrmse(x, v3) < _rrmse(x, v2)
    # Rotation with norm-matched scales keeps each row's norm within a few per cent.
    norms = np.linalg.norm(v3, axis=1)
    assert np.all(np.abs(norms - 1.0) < 0.05), norms.min()


@pytest.mark.parametrize("kind,tier", [("embedding", 1), ("embedding", 2), ("kv_value", 3), ("weight", 3)])
def test_codec_3_keeps_v2_bytes_elsewhere(tmp_path, kind, tier):
    x = _rows(128, 64)
    a, _ = _round_trip(tmp_path, 2, "x", x, tier, kind)
    b, _ = _round_trip(tmp_path, 3, "x", x, tier, kind)
    assert np.array_equal(a, b)


def test_unknown_codec_is_refused(tmp_path):
    with pytest.raises(tv.InvalidArgumentError, match="1, 2, 3 or 4"):
        tv.Store(tmp_path, "t", "c", codec=9)
