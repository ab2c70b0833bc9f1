"""tensorvault.KvCache: the store's KV-cache API from Python."""

import numpy as np
import pytest

import tensorvault as tv


def _kv(rng, tokens, head_dim=64):
    return (rng.standard_normal((tokens, head_dim)) * 3).astype(np.float16)


def test_append_read_reopen(tmp_path):
    rng = np.random.default_rng(1)
    k0, v0 = _kv(rng, 70), _kv(rng, 70)
    with tv.KvCache(tmp_path, "m", "kv", 64) as c:
        assert c.head_dim == 64 and c.tokens_per_block == 256
        c.append_batch([(0, 0, "k", k0), (0, 0, "v", v0)])
        step = _kv(rng, 1)
        assert c.append(0, 0, "k", step) == 71
        assert c.tokens(0, 0, "v") == 70
        got = c.read(0, 0, "k")
        assert got.dtype == np.float16 and got.shape == (71, 64)
        assert np.array_equal(got[:70], k0) and np.array_equal(got[70:], step)
        assert np.array_equal(c.read(0, 0, "v", 10, 20), v0[10:20])
    # Reopen: tokens and tails come back bit-exact.
    with tv.KvCache(tmp_path, "m", "kv", 64, create=False) as c:
        assert c.tokens(0, 0, "k") == 71
        assert np.array_equal(c.read(0, 0, "v"), v0)


def test_tiering_demotes_old_blocks_and_pins_hold(tmp_path):
    rng = np.random.default_rng(2)
    keys = _kv(rng, 256 * 6)
    with tv.KvCache(
        tmp_path, "m", "kv", 64, durability="os", max_blocks_per_tier=[3, None, None, None]
    ) as c:
        c.append_batch([(3, 1, "k", keys[:256])])
        assert c.pin(3, 1, "k", 0)
        for i in range(256, len(keys), 128):
            c.append_batch([(3, 1, "k", keys[i : i + 128])])
        c.maintain()
        s = c.stats()
        # Tier 0 holds at most 3 blocks; the rest were demoted to quantized tiers.
        assert s["blocks"][0] <= 3 and sum(s["blocks"][1:]) >= 3, s["blocks"]
        got = c.read(3, 1, "k").astype(np.float32)
        ref = keys.astype(np.float32)
        # Pinned block 0 stays raw, bit-exact; demoted blocks are close, not exact.
        assert np.array_equal(got[:256], ref[:256])
        rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        assert 0 < rel < 0.5, rel


def test_bad_input_is_typed(tmp_path):
    with tv.KvCache(tmp_path, "m", "kv", 64) as c:
        with pytest.raises(tv.InvalidArgumentError):
            c.append(0, 0, "q", np.zeros((1, 64), np.float16))
        with pytest.raises(tv.InvalidArgumentError):
            c.append(0, 0, "k", np.zeros((1, 63), np.float16))
        with pytest.raises(tv.InvalidArgumentError):
            c.append(-1, 0, "k", np.zeros((1, 64), np.float16))
        with pytest.raises(tv.TensorvaultError):
            c.read(0, 0, "k", 0, 5)  # nothing stored yet
    with pytest.raises(tv.InvalidArgumentError):
        c.tokens(0, 0, "k")  # closed
    with pytest.raises(tv.TensorvaultError):
        tv.KvCache(tmp_path, "m", "kv", 0)
