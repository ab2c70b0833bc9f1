"""tensorvault.KvCache(codec=4, entropy=True, ecsq=True, ecsq_tier2=True): tier 2 values
with entropy-coded 6-bit levels on rotated tokens: less error than the 5-bit per-channel
groups inside the tier's slot; keys unchanged; the flag needs ecsq and is kept by the
collection; stats() keeps its meaning."""

import numpy as np
import pytest

import tensorvault as tv


def _cache(path, name, tier2, **kw):
    return tv.KvCache(path, "m", name, 64, codec=4, entropy=True, ecsq=True, ecsq_tier2=tier2,
                      age_tiers=(0, 0, 1 << 40), **kw)


@pytest.mark.parametrize("allocation", ["slot", "extent"])
def test_tier_2_values_lose_less_within_the_budget(tmp_path, allocation):
    rng = np.random.default_rng(12)
    keys = (rng.standard_normal((768, 64)) + np.linspace(-4, 4, 64)).astype(np.float16)
    vals = (rng.standard_normal((768, 64)) * np.where(np.arange(64) % 13 == 0, 5.0, 1.0)).astype(np.float16)
    out = {}
    for tier2 in (False, True):
        with _cache(tmp_path, f"{allocation}{tier2}", tier2, allocation=allocation) as c:
            c.append_batch([(0, 0, "k", keys), (0, 0, "v", vals)])
            c.maintain()
            st = c.stats()
            assert st["blocks"] == [0, 0, 6, 0]
            v = c.read(0, 0, "v").astype(np.float32)
            err = np.linalg.norm(v - vals) / np.linalg.norm(vals.astype(np.float32))
            out[tier2] = (c.read(0, 0, "k"), err, sum(st["payload_bytes"]) * 8 / (2 * vals.size))
    assert np.array_equal(out[False][0], out[True][0])
    assert out[True][1] < 0.9 * out[False][1], (out[True][1], out[False][1])
    assert out[True][2] <= 5.25, out[True][2]
    with _cache(tmp_path, f"{allocation}True", False) as c:  # reopened: the collection keeps the flag
        assert c.read(0, 0, "v").shape == (768, 64)


def test_ecsq_tier2_needs_ecsq(tmp_path):
    with pytest.raises(tv.InvalidArgumentError, match="kv_ecsq_tier2"):
        tv.KvCache(tmp_path, "m", "bad", 64, codec=4, entropy=True, ecsq_tier2=True)
