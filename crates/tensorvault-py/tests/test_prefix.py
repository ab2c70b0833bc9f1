"""tensorvault.PrefixCache: reuse a prompt's KV by its tokens."""

import os

import numpy as np
import pytest

import tensorvault as tv

L, H, D = 3, 2, 16


def _kv(rng, t, dtype=np.float16):
    k = [(rng.standard_normal((H, t, D)) * 2).astype(dtype) for _ in range(L)]
    v = [(rng.standard_normal((H, t, D)) * 2).astype(dtype) for _ in range(L)]
    return k, v


def test_round_trip_prefix_semantics_and_reopen(tmp_path):
    rng = np.random.default_rng(7)
    tokens = rng.integers(0, 50_000, 100)
    k, v = _kv(rng, 100)
    with tv.PrefixCache(tmp_path, "smol", L, H, D, chunk_tokens=16) as c:
        assert c.lookup(tokens) == 0
        assert c.store(tokens, k, v) == 96  # 6 full chunks
        assert c.store(tokens, k, v) == 0
        assert c.lookup(tokens) == 96
        gk, gv = c.load(tokens, dtype=np.float16)
        assert len(gk) == L and gk[0].shape == (H, 96, D) and gk[0].dtype == np.float16
        for layer in range(L):
            assert np.array_equal(gk[layer], k[layer][:, :96])
            assert np.array_equal(gv[layer], v[layer][:, :96])
        fk, _ = c.load(tokens, n=40)
        assert fk[1].dtype == np.float32 and fk[1].shape == (H, 40, D)
        assert np.array_equal(fk[1], k[1][:, :40].astype(np.float32))
        changed = tokens.copy()
        changed[37] += 1
        assert c.lookup(changed) == 32
        s = c.stats()
        assert s["chunks"] == 6 and s["tokens"] == 96 and s["tier_chunks"] == [6, 0, 0, 0]
        assert s["hit_chunks"] > 0 and s["miss_chunks"] > 0
        with pytest.raises(tv.InvalidArgumentError, match="n"):
            c.load(tokens, n=97)
    assert c.closed
    with tv.PrefixCache(tmp_path, "smol", L, H, D, chunk_tokens=16, read_only=True) as r:
        assert r.lookup(list(tokens)) == 96
        with pytest.raises(tv.InvalidArgumentError, match="read-only"):
            r.store(tokens, k, v)
    # Another model sees nothing; the same model with another geometry is refused.
    with tv.PrefixCache(tmp_path, "other", L, H, D, chunk_tokens=16) as o:
        assert o.lookup(tokens) == 0
    with pytest.raises(tv.InvalidArgumentError, match="kv_heads"):
        tv.PrefixCache(tmp_path, "smol", L, H + 1, D, chunk_tokens=16)


def test_float32_input_is_rounded_to_float16(tmp_path):
    rng = np.random.default_rng(3)
    tokens = np.arange(32)
    k, v = _kv(rng, 32, np.float32)
    with tv.PrefixCache(tmp_path, "m", L, H, D, chunk_tokens=16) as c:
        assert c.store(tokens, k, v) == 32
        gk, gv = c.load(tokens)
        assert np.array_equal(gk[2], k[2].astype(np.float16).astype(np.float32))
        assert np.array_equal(gv[0], v[0].astype(np.float16).astype(np.float32))


def test_bad_inputs_raise_clear_errors(tmp_path):
    rng = np.random.default_rng(5)
    tokens = np.arange(16)
    k, v = _kv(rng, 16)
    with tv.PrefixCache(tmp_path, "m", L, H, D, chunk_tokens=16) as c:
        with pytest.raises(tv.InvalidArgumentError, match=r"token_ids\[3\]"):
            c.lookup([0, 1, 2, -1])
        with pytest.raises(tv.InvalidArgumentError, match=r"token_ids\[1\] = 4294967296"):
            c.store(np.array([1, 2**32] + [0] * 14), k, v)
        with pytest.raises(tv.InvalidArgumentError, match="integers"):
            c.lookup([0.5, 1.0])
        with pytest.raises(tv.InvalidArgumentError, match="3 per-layer"):
            c.store(tokens, k[:2], v)
        with pytest.raises(tv.InvalidArgumentError, match="shape"):
            c.store(tokens, [a[:, :8] for a in k], v)
        with pytest.raises(tv.InvalidArgumentError, match="float16 or float32"):
            c.store(tokens, [a.astype(np.float64) for a in k], v)
        bad = [a.copy() for a in v]
        bad[2][1, 9, 4] = np.nan
        with pytest.raises(tv.InvalidArgumentError, match="layer 2 head 1 token 9"):
            c.store(tokens, k, bad)
        assert c.stats()["chunks"] == 0


def test_a_flipped_byte_is_a_miss(tmp_path):
    rng = np.random.default_rng(9)
    tokens = np.arange(64)
    k, v = _kv(rng, 64)
    with tv.PrefixCache(tmp_path, "m", L, H, D, chunk_tokens=16) as c:
        c.store(tokens, k, v)
    (coll,) = os.listdir(tmp_path / "prefix")
    tier0 = tmp_path / "prefix" / coll / "tier0.dat"
    data = bytearray(tier0.read_bytes())
    # Slots are 16 tokens x 16 values x 2 bytes = 512 bytes: damage the first one (a block
    # of chunk 0), so nothing of the prompt can be loaded.
    data[100] ^= 0x10
    tier0.write_bytes(bytes(data))
    with tv.PrefixCache(tmp_path, "m", L, H, D, chunk_tokens=16, read_only=True) as r:
        rep = r.verify()
        assert rep["chunks"] == 4 and len(rep["damaged"]) == 1 and rep["dropped"] == 0
        assert len(rep["damaged"][0]) == 32
        assert r.lookup(tokens) == 64
    with tv.PrefixCache(tmp_path, "m", L, H, D, chunk_tokens=16) as c:
        gk, gv = c.load(tokens, dtype=np.float16)
        n = gk[0].shape[1]
        assert n == 0
        for layer in range(L):
            assert np.array_equal(gk[layer], k[layer][:, :n])
            assert np.array_equal(gv[layer], v[layer][:, :n])
        assert c.stats()["damaged_chunks"] == 1


def test_budget_and_maintain(tmp_path):
    rng = np.random.default_rng(11)
    chunk_bytes = 2 * L * H * 16 * D * 2
    with tv.PrefixCache(
        tmp_path, "m", L, H, D, chunk_tokens=16, budget_bytes=4 * chunk_bytes, age_tiers=(0, 0, 0)
    ) as c:
        for i in range(3):
            t = np.arange(32) + 1000 * i
            k, v = _kv(rng, 32)
            c.store(t, k, v)
        s = c.stats()
        assert s["chunks"] == 4 and s["evicted_chunks"] == 2
        assert s["stored_bytes"] <= 4 * chunk_bytes
        r = c.maintain()  # every chunk is "idle" at once with zero windows: 3 bits
        assert r["demoted"][3] == 4
        assert c.stats()["tier_chunks"] == [0, 0, 0, 4]
        assert c.stats()["stored_bytes"] < 4 * chunk_bytes // 3


def test_another_process_stores_and_this_open_handle_loads_it(tmp_path):
    import subprocess
    import sys

    tokens = np.arange(40)
    reader = tv.PrefixCache(tmp_path, "procs", L, H, D, chunk_tokens=8, read_only=False)
    assert reader.lookup(tokens) == 0
    code = (
        "import numpy as np, tensorvault as tv\n"
        "rng = np.random.default_rng(5)\n"
        f"k = [rng.standard_normal(({H}, 40, {D})).astype(np.float16) for _ in range({L})]\n"
        f"with tv.PrefixCache({str(tmp_path)!r}, 'procs', {L}, {H}, {D}, chunk_tokens=8) as c:\n"
        "    assert c.store(np.arange(40), k, k) == 40\n"
        "    assert c.lookup(np.arange(40)) == 40\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert reader.lookup(tokens) == 40
    rng = np.random.default_rng(5)
    k = [rng.standard_normal((H, 40, D)).astype(np.float16) for _ in range(L)]
    gk, gv = reader.load(tokens, dtype=np.float16)
    assert all(np.array_equal(a, b) for a, b in zip(gk + gv, k + k))
    counts = reader.model_counts()
    assert counts["stored_chunks"] == 5 and counts["hit_chunks"] == 5, counts
    assert reader.evict_to_bytes(0) == 5
    reader.close()
    with tv.PrefixCache(tmp_path, "procs", L, H, D, chunk_tokens=8, read_only=True) as r:
        assert r.lookup(tokens) == 0
        assert r.model_counts()["evicted_chunks"] == 5


def test_float32_beyond_float16_is_refused_or_clipped(tmp_path):
    k = [np.ones((H, 16, D), dtype=np.float32) for _ in range(L)]
    k[1][0, 3, 5] = 1e6
    with tv.PrefixCache(tmp_path, "range", L, H, D, chunk_tokens=8) as c:
        with pytest.raises(tv.InvalidArgumentError, match=r"keys\[1\]\[0, 3, 5\].*float16"):
            c.store(np.arange(16), k, k)
        assert c.lookup(np.arange(16)) == 0, "nothing stored"
        assert c.store(np.arange(16), k, k, clip=True) == 16
        gk, _ = c.load(np.arange(16))
        assert gk[1][0, 3, 5] == 65504.0
