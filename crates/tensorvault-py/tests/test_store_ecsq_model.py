"""tensorvault.Store(codec=4, entropy=True, ecsq=True, ecsq_model=True): weight and
embedding tensors at tiers 1, 2 and 3 are stored as model-coded ECSQ (TQTC version 7:
rANS frequencies from a Gaussian model, one side byte per rotation block, 10 / 7 / 6-bit
codes), with less error than ecsq alone in the same slots; combines with row_gains; the
flag needs ecsq and is kept by the collection (geometry["ecsq_model"])."""

import numpy as np
import pytest

import tensorvault as tv


def _table():
    rng = np.random.default_rng(7)
    e = rng.standard_normal(576) + rng.standard_normal((48, 576)) ** 3
    return (e / np.linalg.norm(e, axis=1, keepdims=True)).astype(np.float32)


def _rel(x, y):
    return float(np.linalg.norm(x - y) / np.linalg.norm(x))


@pytest.mark.parametrize("tier", [1, 2, 3])
@pytest.mark.parametrize("gains", [False, True])
def test_less_error_in_the_same_slots(tmp_path, tier, gains):
    x = _table()
    out = {}
    for model in (False, True):
        with tv.Store(tmp_path, "m", f"e{tier}{gains}{model}", codec=4, entropy=True, ecsq=True,
                      ecsq_model=model, row_gains=gains, durability="os") as s:
            s.put_tensor("e", x, tier=tier, kind="embedding")
            y = np.asarray(s.get_tensor("e"))
            out[model] = (_rel(x, y), s.stats()["payload_bytes"][tier])
            assert s.geometry["ecsq_model"] is model
    assert out[True][0] < out[False][0], out
    slot = {1: 4224, 2: 2688, 3: 1728}[tier]
    assert out[True][1] <= 7 * slot, out


def test_kept_on_reopen_and_needs_ecsq(tmp_path):
    x = _table()
    with tv.Store(tmp_path, "m", "k", codec=4, entropy=True, ecsq=True, ecsq_model=True,
                  durability="os") as s:
        s.put_tensor("w", x, tier=2, kind="weight")
        w = np.asarray(s.get_tensor("w"))
    with tv.Store(tmp_path, "m", "k", durability="os") as s:  # the header decides
        assert s.geometry["ecsq_model"] is True
        assert np.array_equal(np.asarray(s.get_tensor("w")), w)
    with pytest.raises(Exception, match="ecsq_model"):
        tv.Store(tmp_path, "m", "bad", codec=4, ecsq_model=True, durability="os")
