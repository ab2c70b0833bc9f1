"""The temporal tensor store: tensorvault.Store."""

import os
import threading

import numpy as np
import pytest

import tensorvault as tv

TENANT, COLL = "acme", "weights"


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "store")


@pytest.fixture
def store(root):
    s = tv.Store(root, TENANT, COLL)
    yield s
    s.close()


@pytest.fixture
def store_v1(root):
    """A codec v1 collection: symmetric groups whose per-element bound `_quant_bound`
    states (codec v2's asymmetric, clip-searched groups are tested by RMSE in
    test_codec_v2.py and test_quality_fixtures.py)."""
    s = tv.Store(root, TENANT, COLL, codec=1)
    yield s
    s.close()


def _owner(a):
    """The first non-ndarray object in a's base chain."""
    base = a.base
    while isinstance(base, np.ndarray):
        base = base.base
    return base


def _quant_bound(x, bits, group):
    """Per element: half of its group's f16 scale (rounded up), max|group| / qmax."""
    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    pad = (-flat.size) % group
    groups = np.abs(np.concatenate([flat, np.zeros(pad)])).reshape(-1, group)
    qmax = 2 ** (bits - 1) - 1
    scale = groups.max(axis=1) / qmax * (1 + 2.0 ** -10)
    return np.repeat(scale / 2, group)[: flat.size].reshape(np.shape(x)) * (1 + 1e-6) + 1e-7


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.uint8])
def test_tier0_round_trip_is_bit_exact(store, rng, dtype):
    shape = (3, 5000)  # 15,000 elements: 4 blocks of 4096, the last one partial
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal(shape).astype(dtype)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)
    info = store.put_tensor("t", x, tier=0)
    assert info["name"] == "t" and info["shape"] == [3, 5000]
    assert info["dtype"] == np.dtype(dtype).name
    assert info["blocks"] == info["expected_blocks"] == 4
    assert info["tier_blocks"] == [4, 0, 0, 0]
    y = store.get_tensor("t")
    assert y.dtype == np.dtype(dtype) and y.shape == shape
    assert y.tobytes() == x.tobytes()


def test_tier0_keeps_nan_and_inf_bits(store):
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45], dtype=np.float32)
    store.put_tensor("special", x, tier=0)
    assert store.get_tensor("special").tobytes() == x.tobytes()


@pytest.mark.parametrize("tier", [1, 2, 3])
def test_quantized_tiers_within_codec_bound(store_v1, rng, tier):
    store = store_v1
    x = rng.standard_normal((3, 5000)).astype(np.float32) * np.float32(3.0)
    x[0, :7] = 0.0  # an all-zero stretch inside a group
    store.put_tensor("q", x, tier=tier)
    y = store.get_tensor("q")
    assert y.dtype == np.float32 and y.shape == x.shape
    g = store.geometry
    bits, group = g["tier_bits"][tier - 1], g["group_size"][tier - 1]
    err = np.abs(y.astype(np.float64) - x)
    bound = _quant_bound(x, bits, group)
    assert (err <= bound).all(), f"tier {tier}: max excess {(err - bound).max()}"
    assert not np.array_equal(y, x)  # it really was quantized
    t = store.tensors()[0]
    assert t["tier_blocks"][tier] == 4 and t["stored_bytes"] < t["raw_bytes"]


def test_quantized_integer_and_half_dtypes(store_v1, rng):
    store = store_v1
    i8 = rng.integers(-128, 127, size=2000, endpoint=True).astype(np.int8)
    u8 = rng.integers(0, 255, size=2000, endpoint=True).astype(np.uint8)
    f16 = rng.standard_normal(2000).astype(np.float16)
    for name, x in (("i8", i8), ("u8", u8), ("f16", f16)):
        store.put_tensor(name, x, tier=1)
        y = store.get_tensor(name)
        assert y.dtype == x.dtype and y.shape == x.shape
        err = np.abs(y.astype(np.float64) - x.astype(np.float64))
        bound = _quant_bound(x.astype(np.float32), 8, store.geometry["group_size"][0])
        if x.dtype.kind in "iu":
            assert (err <= np.floor(bound + 0.5)).all()  # then rounded to an integer
        else:
            assert (err <= bound + np.abs(x.astype(np.float64)) * 2.0 ** -11).all()


def test_get_tensor_returns_rust_memory_without_copy(store, rng):
    x = rng.standard_normal((64, 100)).astype(np.float32)
    store.put_tensor("w", x, tier=0)
    y = store.get_tensor("w")
    assert not y.flags.owndata
    owner = _owner(y)
    assert isinstance(owner, tv._tensorvault.StoreBuffer)
    assert owner.nbytes == y.nbytes
    assert y.flags.c_contiguous and y.flags.writeable
    y[0, 0] = 42.0  # the caller's own copy: writing to it does not touch the store
    assert store.get_tensor("w")[0, 0] == x[0, 0]


# ------------------------------------------------------------ dtype/shape edge cases


def test_zero_d_array_is_a_clear_error(store):
    with pytest.raises(tv.InvalidArgumentError, match="0-d"):
        store.put_tensor("s", np.float32(1.5))
    with pytest.raises(tv.InvalidArgumentError, match="0-d"):
        store.put_tensor("s", np.array(2.0, dtype=np.float32), tier=0)


def test_empty_array_is_refused(store):
    with pytest.raises(tv.InvalidArgumentError, match="no elements"):
        store.put_tensor("e", np.zeros((0, 5), dtype=np.float32))


@pytest.mark.parametrize("shape", [(1,), (1, 1, 1), (1, 2, 1, 2, 1, 2, 1, 2), (4097,)])
def test_small_and_many_dimensional_shapes(store, shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    store.put_tensor("x", x, tier=0)
    y = store.get_tensor("x")
    assert y.shape == shape and np.array_equal(x, y)


def test_more_than_eight_dimensions_is_refused(store):
    with pytest.raises(tv.InvalidArgumentError, match="at most 8"):
        store.put_tensor("x", np.zeros((1,) * 9, dtype=np.float32))


def test_float64_is_stored_as_float32(store, rng):
    x = rng.standard_normal((10, 7))
    info = store.put_tensor("d", x, tier=0)
    assert info["dtype"] == "float32"
    y = store.get_tensor("d")
    assert y.dtype == np.float32 and np.array_equal(y, x.astype(np.float32))
    store.put_tensor("list", [[1.0, 2.0], [3.0, 4.0]], tier=0)  # plain lists are float64
    assert store.get_tensor("list").tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_non_contiguous_and_foreign_layouts_are_copied(store, rng):
    base = rng.standard_normal((50, 40)).astype(np.float32)
    cases = {
        "strided": base[:, ::2],
        "transposed": base.T,
        "fortran": np.asfortranarray(base),
        "negative": base[::-1, ::-3],
        "big_endian": base.astype(">f4"),
    }
    for name, view in cases.items():
        store.put_tensor(name, view, tier=0)
        y = store.get_tensor(name)
        assert y.dtype == np.float32 and y.shape == view.shape, name
        assert np.array_equal(y, view), name


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_, np.complex64, np.uint16])
def test_unsupported_dtypes(store, dtype):
    with pytest.raises(tv.InvalidArgumentError, match="cannot be stored"):
        store.put_tensor("x", np.ones(4, dtype=dtype))


def test_non_finite_values_in_a_quantized_tier(store):
    x = np.array([1.0, np.nan, 2.0], dtype=np.float32)
    with pytest.raises(tv.InvalidArgumentError):
        store.put_tensor("nan", x, tier=1)
    assert "nan" not in store


# ----------------------------------------------------------------- bad arguments


@pytest.mark.parametrize("name", ["", "a\nb", "tab\there", "x" * 101])
def test_bad_tensor_names(store, name):
    with pytest.raises(tv.InvalidArgumentError, match="invalid tensor name"):
        store.put_tensor(name, np.ones(3, dtype=np.float32))


def test_tensor_names_may_hold_slashes_and_unicode(store):
    for name in ("layer.0/attn/q_proj", "émbeddings", "x" * 100):
        store.put_tensor(name, np.ones(3, dtype=np.float32), tier=0)
        assert name in store
    assert len(store) == 3


@pytest.mark.parametrize(
    "tenant,collection",
    [("..", "c"), ("t", "../escape"), ("a/b", "c"), ("", "c"), ("t", ".hidden"), ("t", "é")],
)
def test_bad_tenant_and_collection_names(root, tenant, collection):
    with pytest.raises(tv.InvalidArgumentError, match="invalid (tenant|collection) name"):
        tv.Store(root, tenant, collection)
    assert not os.path.exists(os.path.join(root, "escape"))


@pytest.mark.parametrize("tier", [4, -1, 1.5, True, "1", None])
def test_bad_tiers(store, tier):
    with pytest.raises(tv.InvalidArgumentError, match="tier"):
        store.put_tensor("x", np.ones(3, dtype=np.float32), tier=tier)


def test_numpy_integer_tier(store):
    store.put_tensor("x", np.ones(3, dtype=np.float32), tier=np.int64(0))
    assert store.tensors()[0]["tier_blocks"] == [1, 0, 0, 0]


def test_durability_options(root):
    for i, d in enumerate(("every-write", "os", "every-4", 16)):
        with tv.Store(root, TENANT, f"c{i}", durability=d) as s:
            s.put_tensor("x", np.ones(3, dtype=np.float32))
    for bad in ("sometimes", "every-0", "every-x", 2.5):
        with pytest.raises(tv.InvalidArgumentError, match="durability"):
            tv.Store(root, TENANT, "bad", durability=bad)
    with pytest.raises(tv.InvalidArgumentError, match="4 entries"):
        tv.Store(root, TENANT, "bad", max_blocks_per_tier=[1, 2])


# -------------------------------------------------------------------- not found


def test_missing_tensor_is_not_found(store):
    with pytest.raises(tv.NotFoundError, match="nope"):
        store.get_tensor("nope")
    with pytest.raises(FileNotFoundError):
        store.get_tensor("nope")
    with pytest.raises(tv.NotFoundError):
        store.migrate_tensor("nope", 2)
    assert store.delete_tensor("nope") == 0


def test_missing_collection_without_create(root):
    with pytest.raises(tv.NotFoundError, match="no such collection"):
        tv.Store(root, TENANT, "absent", create=False)
    assert not os.path.exists(os.path.join(root, TENANT, "absent", "meta.log"))


# ------------------------------------------------------------------- corruption


def _fresh(root, tier, x):
    with tv.Store(root, TENANT, COLL) as s:
        s.put_tensor("w", x, tier=tier)
    return os.path.join(root, TENANT, COLL)


@pytest.mark.parametrize("tier", [0, 1, 2, 3])
@pytest.mark.parametrize("damage", ["flip", "zero"])
def test_corrupt_tier_file_raises_corruption(root, rng, tier, damage):
    x = rng.standard_normal(6000).astype(np.float32)
    path = os.path.join(_fresh(root, tier, x), f"tier{tier}.dat")
    data = bytearray(open(path, "rb").read())
    if damage == "flip":
        data[100] ^= 0xFF
    else:
        data[:] = bytes(len(data))
    with open(path, "wb") as f:
        f.write(data)
    with tv.Store(root, TENANT, COLL) as s:
        with pytest.raises(tv.CorruptionError, match=f"tier{tier}.*corrupt"):
            s.get_tensor("w")
        problems = s.verify()
        assert len(problems) == (1 if damage == "flip" else 2)
        p = problems[0]
        assert p["tensor"] == "w" and p["tier"] == tier and p["block"] == 0
        assert "crc32c" in p["error"]
        assert s.stats()["checksum_failures"] >= 1


def test_truncated_tier_file_is_not_a_crash(root, rng):
    x = rng.standard_normal(6000).astype(np.float32)
    coll = _fresh(root, 0, x)
    os.truncate(os.path.join(coll, "tier0.dat"), 10)
    with tv.Store(root, TENANT, COLL) as s:
        # Replay ignores records whose slots the file no longer holds.
        assert s.stats()["replay_ignored"] > 0
        with pytest.raises(tv.NotFoundError):
            s.get_tensor("w")
        # ... and verify reports every block the truncation lost (issue 16: it used to
        # say nothing).
        problems = s.verify()
        assert [p["block"] for p in problems] == [0, 1]
        assert all("beyond the end of the tier0 file" in p["error"] for p in problems)


def test_corrupt_and_truncated_metadata_log(root, rng):
    x = rng.standard_normal(100).astype(np.float32)
    log = os.path.join(_fresh(root, 0, x), "meta.log")
    data = bytearray(open(log, "rb").read())
    data[40] ^= 0x01  # inside the CRC-protected header
    with open(log, "wb") as f:
        f.write(data)
    with pytest.raises(tv.CorruptionError, match="meta.log"):
        tv.Store(root, TENANT, COLL)
    os.truncate(log, 5)
    with pytest.raises(tv.InvalidFormatError, match="meta.log"):
        tv.Store(root, TENANT, COLL)


# ---------------------------------------------------- lifecycle, reopen, locking


def test_reopen_from_a_second_store_after_close(root, rng):
    x = rng.standard_normal((20, 300)).astype(np.float32)
    a = tv.Store(root, TENANT, COLL)
    a.put_tensor("raw", x, tier=0)
    a.put_tensor("q", x, tier=2)
    q = a.get_tensor("q")
    a.close()
    assert a.closed
    b = tv.Store(root, TENANT, COLL, create=False)
    try:
        assert [t["name"] for t in b.tensors()] == ["q", "raw"]
        assert np.array_equal(b.get_tensor("raw"), x)
        assert np.array_equal(b.get_tensor("q"), q)
        assert b.stats()["tensors"] == 2
    finally:
        b.close()


def test_collection_is_locked_while_open(root):
    with tv.Store(root, TENANT, COLL):
        with pytest.raises(tv.LockedError, match="already open for writing in this process"):
            tv.Store(root, TENANT, COLL)
    with tv.Store(root, TENANT, COLL):  # released by __exit__
        pass


def test_read_only_store_opens_while_a_writer_holds_the_collection(root):
    x = np.arange(5000, dtype=np.float32).reshape(50, 100)
    with tv.Store(root, TENANT, COLL) as w:
        w.put_tensor("x", x)
        with tv.Store(root, TENANT, COLL, read_only=True) as r:
            assert np.array_equal(r.get_tensor("x"), x)  # tier 0 by default: exact
            assert r.tensors()[0]["tier_blocks"] == [2, 0, 0, 0]
            with pytest.raises(tv.TensorvaultError):
                r.put_tensor("y", x)
        w.put_tensor("z", x, tier=1)
    with tv.Store(root, TENANT, COLL, read_only=True) as r:
        assert sorted(t["name"] for t in r.tensors()) == ["x", "z"]


def test_closed_store_refuses_calls(root):
    s = tv.Store(root, TENANT, COLL)
    with s as same:
        assert same is s
    assert s.closed and "closed" in repr(s)
    s.close()  # idempotent
    for call in (lambda: s.get_tensor("x"), s.stats, s.tensors, s.verify, s.maintain,
                 lambda: s.put_tensor("x", np.ones(2, dtype=np.float32))):
        with pytest.raises(tv.InvalidArgumentError, match="closed"):
            call()


def test_arrays_outlive_the_store(root, rng):
    x = rng.standard_normal(5000).astype(np.float32)
    with tv.Store(root, TENANT, COLL) as s:
        s.put_tensor("w", x, tier=0)
        y = s.get_tensor("w")
    del s
    assert np.array_equal(y, x)


# ------------------------------------------- stats, tensors, maintain, migrate


def test_stats_and_tensors(store, rng):
    x = rng.standard_normal(5000).astype(np.float32)
    store.put_tensor("b", x, tier=0)
    store.put_tensor("a", x, tier=3)
    st = store.stats()
    assert st["tensors"] == 2
    assert st["blocks"] == [2, 0, 0, 2]
    assert st["raw_bytes"][0] == st["raw_bytes"][3] == x.nbytes
    assert st["payload_bytes"][0] == x.nbytes and st["payload_bytes"][3] < x.nbytes / 8
    assert st["writes"] == 4 and len(st["usage"]) == 4
    assert st["usage"][0]["slot_len"] == 4 * store.geometry["block_elems"]
    names = [t["name"] for t in store.tensors()]
    assert names == ["a", "b"]
    # put replaces, delete removes
    store.put_tensor("b", x[:10], tier=0)
    assert store.tensors()[1]["shape"] == [10] and store.tensors()[1]["blocks"] == 1
    assert store.delete_tensor("b") == 1
    assert "b" not in store and len(store) == 1


def test_migrate_tensor(store_v1, rng):
    store = store_v1
    x = rng.standard_normal(9000).astype(np.float32)
    store.put_tensor("w", x, tier=0)
    assert store.migrate_tensor("w", 3) == 3
    assert store.tensors()[0]["tier_blocks"] == [0, 0, 0, 3]
    y = store.get_tensor("w")
    assert (np.abs(y - x) <= _quant_bound(x, 3, store.geometry["group_size"][2])).all()
    assert store.stats()["migrations"] == 3


def test_maintain_reports_moves(root, rng):
    x = rng.standard_normal(4 * 4096).astype(np.float32)
    with tv.Store(root, TENANT, COLL, codec=1) as s:
        s.put_tensor("w", x, tier=1)
        r = s.maintain()
        assert set(r) == {"now", "scored", "moves", "deferred", "over_capacity", "plan_nanos",
                          "summary", "moved", "held"}
        assert r["held"] == []
        assert r["scored"] == 4 and r["moves"] == []  # fresh blocks: nothing to do
    # Reopen with Tier1 capped at 2 blocks: maintain evicts the 2 coldest to Tier2.
    with tv.Store(root, TENANT, COLL, max_blocks_per_tier=[None, 2, None, None]) as s:
        r = s.maintain(budget=1)
        assert len(r["moves"]) == 1 and r["deferred"] == 1
        m = r["moves"][0]
        assert m["tensor"] == "w" and (m["from_tier"], m["to_tier"]) == (1, 2)
        assert m["reason"] == "capacity" and isinstance(m["score"], float)
        r = s.maintain()
        assert len(r["moves"]) == 1 and r["deferred"] == 0
        assert s.tensors()[0]["tier_blocks"] == [0, 2, 2, 0]
        assert s.maintain()["moves"] == []
        # Demotion re-quantizes the 8-bit values: the two codecs' errors add up.
        g = s.geometry["group_size"]
        b1 = _quant_bound(x, 8, g[0])
        bound = b1 + _quant_bound(np.abs(x) + b1, 5, g[1])
        assert (np.abs(s.get_tensor("w") - x) <= bound).all()
    with pytest.raises(tv.InvalidArgumentError):
        tv.Store(root, TENANT, COLL).maintain(budget=-1)


def test_capacity_error_in_the_coldest_tier(root):
    with tv.Store(root, TENANT, COLL, max_blocks_per_tier=[None, None, None, 1]) as s:
        with pytest.raises(tv.CapacityError, match="capacity"):
            s.put_tensor("w", np.ones(2 * 4096, dtype=np.float32), tier=3)
        assert issubclass(tv.CapacityError, tv.StorageError)


def test_block_elems_sets_the_geometry_on_create(root, rng):
    with tv.Store(root, TENANT, COLL, block_elems=1024) as s:
        assert s.geometry["block_elems"] == 1024
        x = rng.standard_normal(5000).astype(np.float32)
        assert s.put_tensor("w", x, tier=1)["blocks"] == 5
    with tv.Store(root, TENANT, COLL, block_elems=4096) as s:  # the persisted one wins
        assert s.geometry["block_elems"] == 1024
        assert s.tensors()[0]["blocks"] == 5


def test_concurrent_readers_and_writer(store, rng):
    xs = {f"t{i}": rng.standard_normal(3000).astype(np.float32) for i in range(8)}
    for k, v in xs.items():
        store.put_tensor(k, v, tier=0)
    errors = []

    def reader():
        try:
            for _ in range(20):
                for k, v in xs.items():
                    assert np.array_equal(store.get_tensor(k), v)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def writer():
        try:
            for i in range(20):
                store.put_tensor(f"w{i}", np.full(100, i, dtype=np.float32), tier=1)
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(3)] + [threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store) == 28
