"""tensorvault.KvCache(codec=4, entropy=True, ecsq=True): tier 3 values with entropy-coded
levels: less error than codec 4's 3-bit Lloyd-Max codes at about the same payload; keys
unchanged; the flag needs codec 4 with entropy and is kept by the collection."""

import numpy as np
import pytest

import tensorvault as tv


def _cache(path, name, ecsq):
    return tv.KvCache(path, "m", name, 64, codec=4, entropy=True, ecsq=ecsq, age_tiers=(0, 0, 0))


def test_values_lose_less_at_about_the_same_payload(tmp_path):
    rng = np.random.default_rng(11)
    keys = (rng.standard_normal((768, 64)) + np.linspace(-4, 4, 64)).astype(np.float16)
    vals = (rng.standard_normal((768, 64)) * np.where(np.arange(64) % 13 == 0, 5.0, 1.0)).astype(np.float16)
    out = {}
    for ecsq in (False, True):
        with _cache(tmp_path, f"e{ecsq}", ecsq) as c:
            c.append_batch([(0, 0, "k", keys), (0, 0, "v", vals)])
            c.maintain()
            assert c.stats()["blocks"] == [0, 0, 0, 6]
            v = c.read(0, 0, "v").astype(np.float32)
            err = np.linalg.norm(v - vals) / np.linalg.norm(vals.astype(np.float32))
            out[ecsq] = (c.read(0, 0, "k"), err, sum(c.stats()["payload_bytes"]))
    assert np.array_equal(out[False][0], out[True][0])
    assert out[True][1] < 0.9 * out[False][1], (out[True][1], out[False][1])
    assert out[True][2] < 1.06 * out[False][2], (out[True][2], out[False][2])
    with _cache(tmp_path, "eTrue", False) as c:  # reopened: the collection keeps the flag
        assert c.read(0, 0, "v").shape == (768, 64)


@pytest.mark.parametrize("kw", [dict(codec=4, entropy=False), dict(entropy=True)])
def test_ecsq_needs_codec_4_with_entropy(tmp_path, kw):
    with pytest.raises(tv.InvalidArgumentError, match="kv_ecsq"):
        tv.KvCache(tmp_path, "m", "bad", 64, ecsq=True, **kw)
