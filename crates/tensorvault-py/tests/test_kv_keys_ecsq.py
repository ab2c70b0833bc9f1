"""tensorvault.KvCache(codec=4, entropy=True, keys_ecsq=True): tier 2 key blocks stored as
channel-centred model-coded ECSQ (TQTC version 8) at about 4.95 bits per value, with less
error than the 5-bit per-channel groups and tier 2 within its 5.25 bits per value; values
unchanged; the flag needs codec 4 and entropy, is kept by the collection and shows in the
geometry."""

import numpy as np
import pytest

import tensorvault as tv


def _cache(path, name, keys_ecsq, **kw):
    return tv.KvCache(path, "m", name, 64, codec=4, entropy=True, ecsq=True, ecsq_tier2=True,
                      keys_ecsq=keys_ecsq, age_tiers=(0, 0, 1 << 40), **kw)


@pytest.mark.parametrize("allocation", ["slot", "extent"])
def test_tier_2_keys_lose_less_within_the_tier(tmp_path, allocation):
    rng = np.random.default_rng(15)
    spread = np.where(np.arange(64) % 13 == 3, 4.0, 0.5)
    keys = (rng.standard_normal((768, 64)) * spread + np.linspace(-20, 20, 64)).astype(np.float16)
    vals = rng.standard_normal((768, 64)).astype(np.float16)
    out = {}
    for on in (False, True):
        with _cache(tmp_path, f"{allocation}{on}", on, allocation=allocation) as c:
            c.append_batch([(0, 0, "k", keys), (0, 0, "v", vals)])
            c.maintain()
            st = c.stats()
            assert st["blocks"] == [0, 0, 6, 0]
            k = c.read(0, 0, "k").astype(np.float32)
            err = np.linalg.norm(k - keys) / np.linalg.norm(keys.astype(np.float32))
            out[on] = (c.read(0, 0, "v"), err, sum(st["payload_bytes"]) * 8 / (2 * keys.size))
    assert np.array_equal(out[False][0], out[True][0])  # values unchanged
    assert out[True][1] < 0.8 * out[False][1], (out[True][1], out[False][1])
    assert out[True][2] <= 5.25, out[True][2]
    # Reopened without the option: the collection keeps the flag.
    with _cache(tmp_path, f"{allocation}True", False) as c:
        assert c.read(0, 0, "k").shape == (768, 64)


def test_keys_ecsq_needs_codec_4_and_entropy(tmp_path):
    with pytest.raises(tv.InvalidArgumentError, match="kv_keys_ecsq"):
        tv.KvCache(tmp_path, "m", "bad", 64, codec=4, keys_ecsq=True)
    with pytest.raises(tv.InvalidArgumentError, match="kv_keys_ecsq"):
        tv.KvCache(tmp_path, "m", "bad2", 64, entropy=True, keys_ecsq=True)


def test_store_geometry_shows_the_flag(tmp_path):
    with _cache(tmp_path, "g", True) as c:
        c.append_batch([(0, 0, "k", np.ones((4, 64), np.float16))])
    with tv.Store(tmp_path, "m", "g") as s:
        assert s.geometry["kv_keys_ecsq"] is True
