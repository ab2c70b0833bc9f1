"""tensorvault.KvCache(..., keys_ecsq=True, keys_wstep=True): tier 2 key blocks stored as
TQTC version 9 (one step per channel, shaped by the block's RoPE-pair key energy) in
version 8's budget (about 4.95 bits per value for keys); values unchanged; the flag needs keys_ecsq, is kept by the
collection and shows in the geometry."""

import numpy as np
import pytest

import tensorvault as tv


def _cache(path, name, keys_wstep, **kw):
    return tv.KvCache(path, "m", name, 64, codec=4, entropy=True, ecsq=True, ecsq_tier2=True,
                      keys_ecsq=True, keys_wstep=keys_wstep, age_tiers=(0, 0, 1 << 40), **kw)


def _pair_weighted(x, y):
    """Squared error per channel weighted by the energy of its RoPE pair (2i, 2i+1)."""
    e = (x.astype(np.float64) ** 2).sum(0)
    w = np.repeat(e[0::2] + e[1::2], 2)
    return float((w * ((x.astype(np.float64) - y) ** 2).sum(0)).sum())


@pytest.mark.parametrize("allocation", ["slot", "extent"])
def test_tier_2_keys_in_the_same_bytes_with_less_pair_weighted_error(tmp_path, allocation):
    rng = np.random.default_rng(16)
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
            out[on] = (c.read(0, 0, "v"), _pair_weighted(keys, k),
                       sum(st["payload_bytes"]) * 8 / (2 * keys.size))
    assert np.array_equal(out[False][0], out[True][0])  # values unchanged
    assert out[True][1] < 0.9 * out[False][1], (out[True][1], out[False][1])
    assert out[True][2] <= 5.25, out[True][2]
    # Reopened without the option: the collection keeps the flag.
    with _cache(tmp_path, f"{allocation}True", False) as c:
        assert c.read(0, 0, "k").shape == (768, 64)
    with tv.Store(tmp_path, "m", f"{allocation}True") as s:
        assert s.geometry["kv_keys_wstep"] is True


def test_keys_wstep_needs_keys_ecsq(tmp_path):
    with pytest.raises(tv.InvalidArgumentError, match="kv_keys_wstep"):
        tv.KvCache(tmp_path, "m", "bad", 64, codec=4, entropy=True, keys_wstep=True)
