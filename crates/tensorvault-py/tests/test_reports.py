"""Results people can read (issue 26 item 7): stats() and maintain() are dicts that print
as tables, and maintain() reports every move of a step in one place."""

import numpy as np

import tensorvault as tv


def test_store_stats_prints_a_table_per_tier(tmp_path):
    x = np.arange(3 * 4096, dtype=np.float32)
    with tv.Store(tmp_path, "t", "c") as s:
        s.put_tensor("raw", x)
        s.put_tensor("q", x, tier=3)
        st = s.stats()
        assert isinstance(st, dict) and isinstance(st, tv.StoreStats)
        assert st["tensors"] == 2 and st["blocks"] == [3, 0, 0, 3]
        text = repr(st)
    lines = text.splitlines()
    assert lines[0].startswith("<tensorvault stats: 2 tensors, 6 blocks"), text
    assert lines[1].split() == ["tier", "blocks", "stored", "as", "raw", "ratio", "file"]
    row0 = next(line for line in lines if line.startswith("tier 0 (raw)"))
    assert row0.split()[3] == "3" and "1.00x" in row0, text
    row3 = next(line for line in lines if line.startswith("tier 3 (3-bit)"))
    ratio = float(row3.split()[-3].rstrip("x"))
    assert 8 < ratio < 12, text  # 3 bits per value plus group side data vs f32
    assert "tier 1 (8-bit)" in text and "-" in next(line for line in lines if line.startswith("tier 1"))


def test_maintain_reports_moves_in_one_place(tmp_path):
    x = np.ones(4 * 4096, dtype=np.float32)
    with tv.Store(tmp_path, "t", "c") as s:
        s.put_tensor("x", x, tier=1)
    with tv.Store(tmp_path, "t", "c", max_blocks_per_tier=[None, 1, None, None]) as s:
        r = s.maintain()
    assert isinstance(r, tv.MaintainReport)
    assert r["moved"] == 3 == len(r["moves"])
    assert r["summary"] == [{"from_tier": 1, "to_tier": 2, "reason": "capacity", "blocks": 3}]
    text = repr(r)
    assert "3 moved" in text and text.splitlines()[-1].split() == ["capacity", "tier", "1", "tier", "2", "3"], text


def test_kv_cache_maintain_counts_age_moves_with_the_others(tmp_path):
    rng = np.random.default_rng(0)
    with tv.KvCache(tmp_path, "m", "kv", 64, block_tokens=64, age_tiers=(64, 64, 64)) as c:
        c.append(0, 0, "k", rng.standard_normal((64 * 6, 64)).astype(np.float16))
        r = c.maintain()
        st = c.stats()
    age = [s for s in r["summary"] if s["reason"] == "age"]
    assert sum(s["blocks"] for s in age) == sum(r["age_moved"]) > 0, r
    assert r["moved"] == sum(r["age_moved"]) + len(r["moves"])
    assert "age" in repr(r) and repr(st).startswith("<tensorvault stats: 1 tensors")
