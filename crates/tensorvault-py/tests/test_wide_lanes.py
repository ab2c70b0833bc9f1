"""tensorvault.Store / KvCache(..., entropy=True, wide_lanes=True): KV and generic blocks
are entropy-coded with 64 rANS lanes (decoded with AVX-512 / AVX2 where the CPU has them)
and read back exactly the values a 4-lane collection gives; the flag needs entropy coding
and is kept by the collection (geometry["wide_lanes"])."""

import numpy as np
import pytest

import tensorvault as tv


def _cache(path, name, wide, **kw):
    return tv.KvCache(path, "m", name, 64, codec=4, entropy=True, ecsq=True, ecsq_tier2=True,
                      wide_lanes=wide, age_tiers=(0, 0, 1 << 40), **kw)


@pytest.mark.parametrize("allocation", ["slot", "extent"])
def test_kv_reads_the_same_values_with_wide_lanes(tmp_path, allocation):
    rng = np.random.default_rng(15)
    keys = (rng.standard_normal((768, 64)) + np.linspace(-4, 4, 64)).astype(np.float16)
    vals = (rng.standard_normal((768, 64)) * np.where(np.arange(64) % 13 == 0, 5.0, 1.0)).astype(np.float16)
    out = {}
    for wide in (False, True):
        with _cache(tmp_path, f"c{wide}", wide, allocation=allocation) as c:
            c.append_batch([(0, 0, "k", keys), (0, 0, "v", vals)])
            c.maintain()
            st = c.stats()
            assert st["blocks"] == [0, 0, 6, 0]
            out[wide] = (c.read(0, 0, "k"), c.read(0, 0, "v"), sum(st["payload_bytes"]))
    # The very same keys and values: entropy coding is lossless, and the rate-controlled
    # tier 2 values keep their step (4 lanes where 64 would not fit it).
    assert np.array_equal(out[False][0], out[True][0])
    assert np.array_equal(out[False][1], out[True][1])
    # 64 lanes hold 240 more state bytes per envelope than 4.
    assert out[False][2] < out[True][2] <= out[False][2] + 6 * 260, (out[False][2], out[True][2])


def test_store_keeps_the_flag_and_generic_values(tmp_path):
    x = np.random.default_rng(3).standard_normal((256, 64)).astype(np.float32)
    got = {}
    for wide in (False, True):
        with tv.Store(tmp_path, "t", f"s{wide}", entropy=True, wide_lanes=wide) as s:
            assert s.geometry["wide_lanes"] is wide
            s.put_tensor("x", x, tier=3)
            got[wide] = s.get_tensor("x")
    assert np.array_equal(got[False], got[True])
    with tv.Store(tmp_path, "t", "sTrue", create=False) as s:  # reopened: the header keeps it
        assert s.geometry["wide_lanes"] is True
        assert np.array_equal(s.get_tensor("x"), got[True])


def test_wide_lanes_need_entropy(tmp_path):
    with pytest.raises(tv.InvalidArgumentError, match="wide_lanes"):
        tv.Store(tmp_path, "t", "bad", wide_lanes=True)
    with pytest.raises(tv.InvalidArgumentError, match="wide_lanes"):
        tv.KvCache(tmp_path, "m", "bad2", 64, wide_lanes=True)
