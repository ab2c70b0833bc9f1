"""The entropy flag from Python (issue 23 item 3): `Store(entropy=True)` keeps quantized
blocks as TQTC version 5 envelopes (lossless rANS over the codes) where shorter: the same
values as without the flag, fewer payload bytes, and the flag is the collection's (kept in
its header, reported by `geometry`)."""

import numpy as np
import pytest

import tensorvault as tv


def _kv(tokens=512, dim=64, seed=0):
    """Bell-shaped values with a few large channels, like a KV head."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(tokens, dim)) * np.where(np.arange(dim) % 13 == 0, 6.0, 1.0)
    return x.astype(np.float16)


def _put_get(path, entropy, x, tier, kind):
    name = f"e{int(entropy)}"
    with tv.Store(path, "t", name, durability="os", kv_head_dim=64, entropy=entropy) as s:
        assert s.geometry["entropy"] is entropy
        s.put_tensor("x", x, tier=tier, kind=kind)
        return np.asarray(s.get_tensor("x")), s.stats()["payload_bytes"][tier]


@pytest.mark.parametrize("tier", [1, 2, 3])
@pytest.mark.parametrize("kind", ["kv_key", "kv_value"])
def test_entropy_is_lossless_and_smaller(tmp_path, kind, tier):
    x = _kv()
    a, plain = _put_get(tmp_path, False, x, tier, kind)
    b, coded = _put_get(tmp_path, True, x, tier, kind)
    assert np.array_equal(a, b)
    assert coded < plain


def test_the_flag_belongs_to_the_collection(tmp_path):
    x = _kv(256)
    _put_get(tmp_path, True, x, 3, "kv_key")
    # Reopened without the option: the header keeps the flag.
    with tv.Store(tmp_path, "t", "e1", durability="os", create=False) as s:
        assert s.geometry["entropy"] is True
        assert np.array_equal(np.asarray(s.get_tensor("x")).shape, x.shape)


def test_codec_1_with_entropy_is_refused(tmp_path):
    with pytest.raises(tv.InvalidArgumentError, match="entropy"):
        tv.Store(tmp_path, "t", "c", codec=1, entropy=True)
