"""Values the KV cache and the store refuse or hold (issue 25 class 4): dtypes that are
not real floating types, values beyond float16's range (unless clip=True), NaN and
infinity, and tiering that holds a block it cannot quantize instead of stopping."""

import datetime
import re

import numpy as np
import pytest

import tensorvault as tv

HD = 8


def _kv(tmp_path, **kw):
    return tv.KvCache(tmp_path, "m", "kv", HD, durability="os", block_tokens=4, **kw)


def _rows(n, salt=1.0):
    return (np.sin(np.arange(n * HD, dtype=np.float32) * 0.37 + salt) * 3).reshape(n, HD)


REFUSED = {
    "complex": np.ones((2, HD), dtype=np.complex64),
    "object with None": np.array([[1.0] * (HD - 1) + [None]] * 2, dtype=object),
    "datetime64": np.array([[np.datetime64("2026-11-26")] * HD] * 2),
    "timedelta64": np.zeros((2, HD), dtype="m8[s]"),
    "int": np.ones((2, HD), dtype=np.int32),
    "int8": np.ones((2, HD), dtype=np.int8),
    "bool": np.ones((2, HD), dtype=bool),
    "str": np.array([["1.0"] * HD] * 2),
    "python datetimes": [[datetime.datetime(2026, 1, 1)] * HD] * 2,
}


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_kv_append_refuses_dtypes_that_are_not_real_floats(tmp_path, what):
    values = REFUSED[what]
    dtype = np.asarray(values).dtype
    with _kv(tmp_path) as c:
        c.append(0, 0, "k", _rows(1))
        for call in (
            lambda: c.append(0, 0, "k", values),
            lambda: c.append_batch([(0, 0, "v", _rows(2)), (0, 0, "k", values)]),
        ):
            with pytest.raises(TypeError, match=re.escape(f"dtype {dtype}")) as e:
                call()
            assert isinstance(e.value, tv.DTypeError)
            assert isinstance(e.value, tv.InvalidArgumentError)
        # Nothing was appended by either call.
        assert c.tokens(0, 0, "k") == 1 and c.tokens(0, 0, "v") == 0


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_kv_append_takes_real_floats(tmp_path, dtype):
    x = _rows(3).astype(dtype)
    x[0, 1] = 65504.0  # the largest float16 is in range
    x[0, 2] = 1e-8  # rounds to a float16 subnormal / zero as numpy rounds
    with _kv(tmp_path) as c:
        assert c.append(0, 0, "k", x) == 3
        assert c.append(0, 0, "k", x[::-1, ::2].repeat(2, axis=1)) == 6  # non-contiguous
        assert c.append(0, 0, "k", x.astype(x.dtype.newbyteorder(">"))) == 9  # big-endian
        got = c.read(0, 0, "k")
        assert got.tobytes() == np.concatenate(
            [x, x[::-1, ::2].repeat(2, axis=1), x]
        ).astype(np.float16).tobytes()


def test_kv_append_takes_ml_dtypes_bfloat16(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = _rows(2).astype(ml_dtypes.bfloat16)
    with _kv(tmp_path) as c:
        c.append(0, 0, "k", x)
        assert np.array_equal(c.read(0, 0, "k"), x.astype(np.float32).astype(np.float16))
        big = x.copy()
        big[1, 2] = 1e5
        with pytest.raises(ValueError, match=r"\[1, 2\] = 99840(\.0)? is outside the float16 range"):
            c.append(0, 0, "k", big)
        c.append(0, 0, "k", big, clip=True)
        assert c.read(0, 0, "k", 3, 4)[0, 2] == np.float16(65504)


@pytest.mark.parametrize("bad", [70000.0, -65505.0, np.inf, -np.inf])
def test_values_beyond_float16_are_refused_unless_clipped(tmp_path, bad):
    x = _rows(3)
    x[2, 5] = bad
    with _kv(tmp_path) as c:
        with pytest.raises(tv.InvalidArgumentError, match=r"L0\.H0\.v\[2, 5\] = .* clip=True") as e:
            c.append(0, 0, "v", x)
        assert isinstance(e.value, ValueError)
        assert c.tokens(0, 0, "v") == 0
        assert c.append(0, 0, "v", x, clip=True) == 3
        got = c.read(0, 0, "v")
        assert got[2, 5] == np.float16(np.sign(bad) * 65504)
        assert np.array_equal(got[:2], x[:2].astype(np.float16))
        # float64 input too, through append_batch.
        with pytest.raises(ValueError, match=r"\[2, 5\]"):
            c.append_batch([(1, 0, "k", x.astype(np.float64))])
        c.append_batch([(1, 0, "k", x.astype(np.float64))], clip=True)


def test_nan_is_refused_naming_layer_head_and_token(tmp_path):
    with _kv(tmp_path) as c:
        c.append(2, 1, "k", _rows(5))
        x = _rows(3)
        x[1, 0] = np.nan
        for clip in (False, True):
            with pytest.raises(tv.InvalidArgumentError, match="keys: layer 2 head 1 token 6 is not finite"):
                c.append(2, 1, "k", x, clip=clip)
        assert c.tokens(2, 1, "k") == 5
        h = _rows(1).astype(np.float16)
        h[0, 3] = np.float16(np.nan)
        with pytest.raises(ValueError, match="values: layer 0 head 0 token 0"):
            c.append(0, 0, "v", h)


def test_pin_of_a_block_that_does_not_exist(tmp_path):
    with _kv(tmp_path) as c:
        c.append(0, 0, "k", _rows(6))  # blocks 0 and 1 (the pinned tail)
        assert c.pin(0, 0, "k", 0) is True
        assert c.pin(0, 0, "k", 0) is False
        for layer, kind, block in ((0, "k", 2), (0, "v", 0), (5, "k", 0)):
            with pytest.raises(tv.NotFoundError, match="not found"):
                c.pin(layer, 0, kind, block)
            assert c.unpin(layer, 0, kind, block) is False
        assert c.unpin(0, 0, "k", 0) is True


def test_kv_maintain_holds_a_nan_block_written_by_an_older_build(tmp_path):
    # A NaN block as an older build could store it: through the generic store API.
    with tv.Store(tmp_path, "m", "kv", kv_head_dim=HD, durability="os") as s:
        bt = s.geometry["block_elems"] // HD
    k = _rows(2 * bt).astype(np.float16)
    k[1, 3] = np.float16(np.nan)  # block 0, the attention sink's block
    k[bt + 1, 0] = np.float16(np.inf)  # and block 1
    with tv.Store(tmp_path, "m", "kv", durability="os") as s:
        s.put_tensor("L0.H0.k", k, kind="kv_key")
        s.put_tensor("L0.H0.v", _rows(2 * bt).astype(np.float16), kind="kv_value")
    with tv.KvCache(tmp_path, "m", "kv", HD, durability="os", age_tiers=(0, 0, 0)) as c:
        assert c.tokens(0, 0, "k") == 2 * bt
        r = c.maintain()
        # Every block of the values moved to 3 bits; both key blocks stay raw, reported.
        assert r["age_moved"] == [0, 0, 0, 2], r
        held = sorted((h["tensor"], h["block"], h["tier"], h["target_tier"], h["non_finite"]) for h in r["held"])
        assert held == [("L0.H0.k", 0, 0, 3, 1), ("L0.H0.k", 1, 0, 3, 1)], r["held"]
        assert "first at tensor element 11" in r["held"][0]["reason"]
        assert "2 held" in repr(r)
        assert c.stats()["held_blocks"] == 2
        assert c.stats()["blocks"] == [2, 0, 0, 2]
        # The next step does not try them again and still reports them.
        r = c.maintain()
        assert r["moved"] == 0 and len(r["held"]) == 2
        assert np.isnan(c.read(0, 0, "k", 1, 2)[0, 3])


@pytest.mark.parametrize("what", ["complex", "object with None", "datetime64", "bool", "str", "int"])
def test_store_put_refuses_dtypes_it_does_not_keep(tmp_path, what):
    with tv.Store(tmp_path, "t", "c") as s:
        with pytest.raises(tv.DTypeError, match="cannot be stored") as e:
            s.put_tensor("x", REFUSED[what])
        assert isinstance(e.value, TypeError)
        assert "x" not in s


def test_store_float64_beyond_float32_is_refused_unless_clipped(tmp_path):
    x = np.ones(10)
    x[7] = -1e39
    with tv.Store(tmp_path, "t", "c") as s:
        with pytest.raises(ValueError, match=r"'x'\[7\] = -1e\+39 is outside the float32 range"):
            s.put_tensor("x", x)
        s.put_tensor("x", x, clip=True)
        assert s.get_tensor("x")[7] == -np.finfo(np.float32).max


def test_store_bfloat16_from_ml_dtypes(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([1.5, -2.25, np.nan, 3e38], dtype=ml_dtypes.bfloat16)
    with tv.Store(tmp_path, "t", "c") as s:
        info = s.put_tensor("b", x)
        assert info["dtype"] == "bfloat16"
        back = s.get_tensor("b")
        assert back.dtype == np.float32
        assert np.array_equal(back, x.astype(np.float32), equal_nan=True)


def test_store_nan_stays_exact_in_tier0_and_is_held_by_maintain(tmp_path):
    x = np.linspace(-1, 1, 48, dtype=np.float32)
    x[20] = np.frombuffer(np.uint32(0x7FC01234).tobytes(), dtype=np.float32)[0]
    with tv.Store(tmp_path, "t", "c", block_elems=16) as s:
        s.put_tensor("x", x)
        assert s.get_tensor("x").tobytes() == x.tobytes()  # the NaN payload too
        with pytest.raises(tv.InvalidArgumentError, match="1 values are NaN or infinite .*element 20"):
            s.put_tensor("q", x, tier=1)
    # Tier 0 may hold no block in this run: every block is evicted but the NaN one.
    with tv.Store(tmp_path, "t", "c", max_blocks_per_tier=[0, None, None, None]) as s:
        r = s.maintain()
        assert r["moved"] == 2, r
        assert [(h["tensor"], h["block"], h["tier"], h["non_finite"]) for h in r["held"]] == [("x", 1, 0, 1)]
        assert s.stats()["held_blocks"] == 1
        assert s.tensors()[0]["tier_blocks"] == [1, 2, 0, 0]
        back = s.get_tensor("x")
        assert back[16:32].tobytes() == x[16:32].tobytes()
        assert np.allclose(back[:16], x[:16], atol=0.01)


def test_the_shared_kv_helper_applies_the_same_rules():
    # tensorvault._common.as_kv_f16: for KV entry points that convert in Python
    # (the prefix cache); KvCache does the same natively.
    from tensorvault._common import as_kv_f16

    x = _rows(2).astype(np.float64)
    x[1, 4] = -1e6
    x[0, 1] = np.nan
    with pytest.raises(ValueError, match=r"keys\[1, 4\] = -1000000\.0 is outside the float16 range"):
        as_kv_f16(x, "keys")
    h = as_kv_f16(x, "keys", clip=True)
    assert h.dtype == np.dtype("<f2") and h.flags.c_contiguous and h.shape == x.shape
    assert h[1, 4] == np.float16(-65504) and np.isnan(h[0, 1])
    for what in ("complex", "object with None", "datetime64", "int", "bool", "str"):
        with pytest.raises(tv.DTypeError):
            as_kv_f16(REFUSED[what], "keys")


def test_float16_infinities_are_out_of_range_and_clip_saturates_them(tmp_path):
    x = _rows(2).astype(np.float16)
    x[0, 7] = np.float16(-np.inf)
    with _kv(tmp_path) as c:
        with pytest.raises(ValueError, match=r"L0\.H0\.k\[0, 7\] = -inf is outside the float16 range"):
            c.append(0, 0, "k", x)
        c.append(0, 0, "k", x, clip=True)
        got = c.read(0, 0, "k")
        assert got[0, 7] == np.float16(-65504)
        assert np.array_equal(np.delete(got.reshape(-1), 7), np.delete(x.reshape(-1), 7))
