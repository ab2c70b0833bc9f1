"""Codec v4 from Python (issue 23 item 4): `Store(codec=4)` stores weight and embedding
tensors as TQTC version 4 super-block segments in the same slots as codecs 2 and 3, with
lower error than codec v3 at every tier; other kinds keep codec v3's bytes."""

import numpy as np
import pytest

import tensorvault as tv


def _weights(rows=96, cols=384, seed=0):
    """Laplace rows of different scales with a few outliers, like trained matrices."""
    rng = np.random.default_rng(seed)
    x = rng.laplace(size=(rows, cols)) * (0.02 * (1 + np.arange(rows) % 5))[:, None]
    x[rng.random(x.shape) < 0.001] *= 8
    return x.astype(np.float32)


def _rrmse(a, b):
    return float(np.linalg.norm(np.asarray(b, np.float64) - a) / np.linalg.norm(a))


def _round_trip(path, codec, x, tier, kind):
    with tv.Store(path, "t", f"c{codec}", durability="os", codec=codec) as s:
        assert s.geometry["codec"] == codec
        info = s.put_tensor("x", x, tier=tier, kind=kind)
        slot = s.geometry  # same geometry for both codecs
        return np.asarray(s.get_tensor("x")), info, slot


@pytest.mark.parametrize("kind", ["weight", "embedding"])
@pytest.mark.parametrize("tier", [1, 2, 3])
def test_codec_4_beats_codec_3_in_the_same_slots(tmp_path, kind, tier):
    x = _weights()
    v3, i3, g3 = _round_trip(tmp_path, 3, x, tier, kind)
    v4, i4, g4 = _round_trip(tmp_path, 4, x, tier, kind)
    assert {k: v for k, v in g3.items() if k != "codec"} == {k: v for k, v in g4.items() if k != "codec"}
    assert _rrmse(x, v4) < _rrmse(x, v3)
    # Never more than the tier's slot: 8.25 / 5.25 / 3.375 bits per value.
    assert i4["stored_bytes"] * 8 / x.size <= [8.25, 5.25, 3.375][tier - 1] + 1e-9


def test_codec_4_keeps_codec_3_bytes_for_other_kinds(tmp_path):
    x = _weights(64, 64)
    for kind in ("generic", "kv_key", "kv_value"):
        a, _, _ = _round_trip(tmp_path / kind, 3, x, 3, kind)
        b, _, _ = _round_trip(tmp_path / kind, 4, x, 3, kind)
        assert np.array_equal(a, b), kind
