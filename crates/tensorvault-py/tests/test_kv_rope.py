"""tensorvault.KvCache(rope=..., codec=...): keys stored before RoPE, returned after it;
codec 4's per-kind tier-3 widths."""

import numpy as np
import pytest

import tensorvault as tv

SPEC = (100000.0, 64, "interleaved")


def _rope(x, pos0, theta=1e5, neox=False):
    """numpy RoPE of x [T, 64] at positions pos0.. (float64 angles, float32 rotation)."""
    hd = x.shape[1]
    inv = theta ** (-np.arange(hd // 2, dtype=np.float64) * 2.0 / hd)
    ang = np.arange(pos0, pos0 + x.shape[0], dtype=np.float64)[:, None] * inv[None, :]
    c, s = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    x = x.astype(np.float32)
    out = np.empty_like(x)
    if neox:
        a, b = x[:, : hd // 2], x[:, hd // 2 :]
        out[:, : hd // 2], out[:, hd // 2 :] = a * c - b * s, a * s + b * c
    else:
        a, b = x[:, 0::2], x[:, 1::2]
        out[:, 0::2], out[:, 1::2] = a * c - b * s, a * s + b * c
    return out


@pytest.mark.parametrize("pairing", ["interleaved", "neox"])
def test_reads_are_post_rope(tmp_path, pairing):
    rng = np.random.default_rng(3)
    pre = (rng.standard_normal((300, 64)) * 2).astype(np.float16)
    spec = (100000.0, 64, pairing)
    with tv.KvCache(tmp_path, "m", "kv", 64, rope=spec) as c:
        assert c.rope == spec
        c.append_batch([(0, 0, "k", pre[:200]), (0, 0, "v", pre[:200])])
        c.append(0, 0, "k", pre[200:])
        got = c.read(0, 0, "k", 10, 290).astype(np.float32)
        want = _rope(pre[10:290], 10, neox=pairing == "neox").astype(np.float16).astype(np.float32)
        assert np.abs(got - want).max() <= 2e-3 * max(1.0, np.abs(want).max())
        # Values are returned as appended.
        assert np.array_equal(c.read(0, 0, "v"), pre[:200])
    with tv.KvCache(tmp_path, "m", "kv", 64, create=False, rope=spec) as c:
        assert c.read(0, 0, "k").shape == (300, 64)


def test_another_spec_is_refused(tmp_path):
    with tv.KvCache(tmp_path, "m", "kv", 64, rope=SPEC) as c:
        c.append(0, 0, "k", np.ones((4, 64), np.float16))
    for other in [None, (10000.0, 64, "interleaved"), (100000.0, 64, "neox")]:
        with pytest.raises(tv.InvalidArgumentError, match="RoPE mismatch"):
            tv.KvCache(tmp_path, "m", "kv", 64, create=False, rope=other)
    for bad, what in [((1e4, 64, "halves"), "pairing"), ((1e4, 63, "neox"), "rotary_dims"),
                      ((0.5, 64, "neox"), "theta"), ((1e4, 128, "neox"), "rotary_dims"),
                      ("neox", "rope must be")]:
        with pytest.raises(tv.InvalidArgumentError, match=what):
            tv.KvCache(tmp_path, "m", f"bad{len(what)}", 64, rope=bad)


def test_codec_4_keeps_keys_at_4_bits(tmp_path):
    rng = np.random.default_rng(4)
    # Keys with per-channel offsets (what per-channel groups are for).
    keys = (rng.standard_normal((512, 64)) + np.linspace(-8, 8, 64)).astype(np.float16)
    vals = rng.standard_normal((512, 64)).astype(np.float16)
    errs = {}
    for codec in (2, 4):
        with tv.KvCache(tmp_path, "m", f"c{codec}", 64, codec=codec, age_tiers=(0, 0, 0)) as c:
            c.append_batch([(0, 0, "k", keys), (0, 0, "v", vals)])
            c.maintain()
            assert c.stats()["blocks"] == [0, 0, 0, 4]
            k = c.read(0, 0, "k").astype(np.float32)
            errs[codec] = np.linalg.norm(k - keys) / np.linalg.norm(keys.astype(np.float32))
    assert errs[4] < errs[2] * 0.6, errs
    with pytest.raises(tv.InvalidArgumentError, match="codec 3"):
        tv.KvCache(tmp_path, "m", "c3", 64, codec=3)


def test_entropy_flag_shrinks_the_payload_and_reads_the_same(tmp_path):
    rng = np.random.default_rng(5)
    keys = (rng.standard_normal((512, 64)) + np.linspace(-8, 8, 64)).astype(np.float16)
    vals = rng.standard_normal((512, 64)).astype(np.float16)
    out = {}
    for ent in (False, True):
        with tv.KvCache(tmp_path, "m", f"e{ent}", 64, codec=4, rope=SPEC, entropy=ent,
                        age_tiers=(0, 0, 0)) as c:
            c.append_batch([(0, 0, "k", keys), (0, 0, "v", vals)])
            c.maintain()
            out[ent] = (c.read(0, 0, "k"), c.read(0, 0, "v"), sum(c.stats()["payload_bytes"]))
    assert np.array_equal(out[False][0], out[True][0])
    assert np.array_equal(out[False][1], out[True][1])
    assert out[True][2] < out[False][2], (out[True][2], out[False][2])
