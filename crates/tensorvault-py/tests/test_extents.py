"""Extent allocation from Python (issue 23 item 3): `Store(allocation="extent")` and
`KvCache(allocation="extent")` create collections whose blocks take payload-sized extents
of their tier files; `stats()` reports the payload bytes, the bytes the blocks take
(`usage[t]["live_bytes"]`) and the disk (`allocated_bytes`); the choice is the
collection's (kept in its header, reported by `geometry["allocation"]`)."""

import numpy as np
import pytest

import tensorvault as tv


def _kv(tokens=512, dim=64, seed=0):
    """Bell-shaped values with a few large channels, like a KV head."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(tokens, dim)) * np.where(np.arange(dim) % 13 == 0, 6.0, 1.0)
    return x.astype(np.float16)


def _store(path, name, allocation):
    return tv.Store(path, "t", name, durability="os", kv_head_dim=64, entropy=True,
                    allocation=allocation)


def test_extents_take_what_the_payload_needs(tmp_path):
    x = _kv(1024)
    got = {}
    for allocation in ("slot", "extent"):
        with _store(tmp_path, allocation, allocation) as s:
            assert s.geometry["allocation"] == allocation
            s.put_tensor("x", x, tier=3, kind="kv_value")
            st = s.stats()
            u = st["usage"][3]
            got[allocation] = (np.asarray(s.get_tensor("x")), st["payload_bytes"][3], u["live_bytes"])
            assert u["live_bytes"] >= st["payload_bytes"][3]
            assert u["alloc_unit"] == (64 if allocation == "extent" else u["slot_len"])
    (a, pay_s, live_s), (b, pay_e, live_e) = got["slot"], got["extent"]
    assert np.array_equal(a, b)  # the same codes either way
    assert pay_s == pay_e
    assert live_e < live_s  # entropy-coded blocks no longer sit in worst-case slots
    assert live_e - pay_e < 64 * 8  # at most one unit of rounding per block


def test_the_choice_belongs_to_the_collection(tmp_path):
    with _store(tmp_path, "c", "extent") as s:
        s.put_tensor("x", _kv(256), tier=3, kind="kv_key")
    with tv.Store(tmp_path, "t", "c", durability="os", create=False) as s:
        assert s.geometry["allocation"] == "extent"
        assert s.verify() == []


def test_kv_cache_takes_the_option(tmp_path):
    c = tv.KvCache(tmp_path, "t", "kv", head_dim=64, entropy=True, allocation="extent",
                   age_tiers=(0, 0, 0), block_tokens=64)
    x = _kv(256)
    c.append(0, 0, "k", x)
    c.append(0, 0, "v", x)
    c.maintain()
    st = c.stats()
    assert st["usage"][3]["alloc_unit"] == 64
    assert sum(u["live_bytes"] for u in st["usage"]) >= sum(st["payload_bytes"])
    c.close()


def test_a_bad_allocation_is_refused(tmp_path):
    with pytest.raises(tv.InvalidArgumentError, match="allocation"):
        tv.Store(tmp_path, "t", "c", allocation="buddy")
    with pytest.raises(tv.InvalidArgumentError, match="extents"):
        tv.Store(tmp_path, "t", "d", codec=1, allocation="extent")


def test_a_finer_slot_align_rounds_extents_less(tmp_path):
    """`slot_align=16` (session 15): each extent is rounded up to 16 bytes, not 64, so the
    disk follows the payload closer; the values are the same."""
    x = _kv(1024)
    got = {}
    for align in (64, 16):
        c = tv.KvCache(tmp_path / str(align), "t", "kv", head_dim=64, codec=4, entropy=True,
                       ecsq=True, allocation="extent", age_tiers=(0, 0, 0), slot_align=align)
        c.append(0, 0, "k", x)
        c.append(0, 0, "v", x)
        c.maintain()
        st = c.stats()
        u = st["usage"][3]
        assert u["alloc_unit"] == align
        got[align] = (c.read(0, 0, "v"), st["payload_bytes"][3], u["live_bytes"], st["blocks"][3])
        c.close()
    (v64, p64, l64, n), (v16, p16, l16, _) = got[64], got[16]
    assert np.array_equal(v64, v16) and p64 == p16
    assert p16 <= l16 < p16 + 16 * n  # at most one 16-byte unit of rounding per block
    assert l16 < l64


@pytest.mark.parametrize("align", [0, 4, 48, 2 ** 21])
def test_a_bad_slot_align_is_a_value_error(tmp_path, align):
    with pytest.raises(ValueError, match="slot_align"):
        tv.Store(tmp_path, "t", f"c{align}", durability="os", slot_align=align)
