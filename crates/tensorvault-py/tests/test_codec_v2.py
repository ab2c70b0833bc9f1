"""Codec v2 from Python (issue 14): `put_tensor(kind=...)`, the KV layout, codec v1
collections still written on request, `KvCache` age tiering with small blocks."""

import numpy as np
import pytest

import tensorvault as tv


def _keys(tokens, hd=64, seed=0):
    """Key-like f16 rows: per-channel offsets and a few 8x channels."""
    rng = np.random.default_rng(seed)
    c = np.arange(hd)
    mag = np.where(c % 9 == 0, 8.0, 1.0)
    x = (c - 30) * 0.2 + mag * rng.standard_normal((tokens, hd))
    return x.astype(np.float16)


def _rrmse(a, b):
    a = np.asarray(a, np.float64)
    return float(np.linalg.norm(np.asarray(b, np.float64) - a) / np.linalg.norm(a))


def test_kind_picks_the_layout_and_keys_per_channel_win(tmp_path):
    k = _keys(1024)
    with tv.Store(tmp_path, "t", "kv", durability="os", kv_head_dim=64) as s:
        assert s.geometry["codec"] == 2 and s.geometry["sink_values"] == 64
        s.put_tensor("generic", k, tier=3)
        s.put_tensor("key", k, tier=3, kind="kv_key")
        g, kk = s.get_tensor("generic"), s.get_tensor("key")
    assert kk.dtype == np.float16 and kk.shape == k.shape
    np.testing.assert_array_equal(kk[0], k[0])  # the sink token is kept in f16
    assert _rrmse(k, kk) < 0.6 * _rrmse(k, g)


def test_bad_kind_is_a_typed_error(tmp_path):
    with tv.Store(tmp_path, "t", "c", durability="os") as s:
        with pytest.raises(tv.InvalidArgumentError, match="kind"):
            s.put_tensor("x", np.ones((4, 4), np.float32), tier=1, kind="kv")
        with pytest.raises(tv.InvalidArgumentError, match="kind"):
            s.put_tensor("x", np.ones((4, 4), np.float32), tier=1, kind=3)


def test_codec_v1_collections_are_still_written_on_request(tmp_path):
    w = np.random.default_rng(1).standard_normal((256, 384)).astype(np.float32)
    errs = {}
    for codec in (1, 2):
        with tv.Store(tmp_path / f"c{codec}", "t", "c", durability="os", codec=codec) as s:
            assert s.geometry["codec"] == codec
            s.put_tensor("w", w, tier=2, kind="weight")
            errs[codec] = _rrmse(w, s.get_tensor("w"))
    # Asymmetric groups with a clip search beat the symmetric f16-scaled v1 groups.
    assert errs[2] < 0.8 * errs[1], errs
    with pytest.raises(tv.InvalidArgumentError, match="codec"):
        tv.Store(tmp_path / "c4", "t", "c", codec=9)


def test_kv_cache_demotes_by_age_and_keeps_recent_tokens_exact(tmp_path):
    hd, tpb = 64, 128
    with tv.KvCache(tmp_path, "t", "kv", head_dim=hd, durability="os", block_tokens=tpb,
                    age_tiers=(0, 0, 256)) as kv:
        assert kv.tokens_per_block == tpb and kv.age_tiers == (0, 0, 256)
        k = _keys(5 * tpb + 7)
        for s in range(0, len(k), 64):
            kv.append(0, 0, "k", k[s:s + 64])
            r = kv.maintain()
        assert "age_moved" in r
        blocks = kv.stats()["blocks"]
        # 5 sealed blocks: the newest two (age < 256) at 5 bits, three at 3 bits; the
        # partial tail raw.
        assert list(blocks) == [1, 0, 2, 3], blocks
        back = kv.read(0, 0, "k", 0, len(k))
        np.testing.assert_array_equal(back[0], k[0])  # sink
        np.testing.assert_array_equal(back[5 * tpb:], k[5 * tpb:])  # the raw tail
        assert _rrmse(k[3 * tpb:5 * tpb], back[3 * tpb:5 * tpb]) < 0.04
        assert _rrmse(k[1:3 * tpb], back[1:3 * tpb]) < 0.15
    with pytest.raises(tv.InvalidArgumentError, match="age_tiers"):
        tv.KvCache(tmp_path, "t", "kv2", head_dim=hd, age_tiers=(1, 2))


# Standard-normal data, groups of 64-128 values spanning ~5 sigma: one step is about
# 5/(2^bits - 1) sigma and the RMS error a step / sqrt(12) (8 bits 0.6%, 5 bits 5%, 3 bits
# 19%), less where the clip search or per-channel groups narrow the ranges.
@pytest.mark.parametrize("tier,ceiling", [(1, 0.008), (2, 0.06), (3, 0.21)])
@pytest.mark.parametrize("kind", ["generic", "weight", "embedding", "kv_key", "kv_value"])
def test_every_kind_round_trips_within_its_tier(tmp_path, rng, tier, ceiling, kind):
    x = rng.standard_normal((300, 64)).astype(np.float32)
    with tv.Store(tmp_path, "t", "c", durability="os") as s:
        info = s.put_tensor("x", x, tier=tier, kind=kind)
        assert info["tier_blocks"][tier] == info["blocks"] == 5
        y = s.get_tensor("x")
    assert y.dtype == np.float32 and y.shape == x.shape
    assert 0 < _rrmse(x, y) < ceiling
