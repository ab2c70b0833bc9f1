"""tensorvault.Store(codec=4, entropy=True, ecsq=True): weight and embedding tensors at
tiers 2 and 3 as rate-controlled entropy-coded levels: less error than codec 4's
super-blocks within the same slots; other kinds and tier 1 unchanged; the flag needs
codec 4 with entropy and is kept by the collection (geometry["ecsq"])."""

import numpy as np
import pytest

import tensorvault as tv


def _weights():
    # Laplace rows of 384 whose scales span 1/8..8, as trained matrices mix rows of very
    # different energy (one shared step spends the bits where the energy is).
    rng = np.random.default_rng(5)
    scale = 2.0 ** (np.arange(64) % 7 - 3)
    return (rng.laplace(size=(64, 384)) * 0.03 * scale[:, None]).astype(np.float32)


def _store(path, name, ecsq):
    return tv.Store(path, "m", name, codec=4, entropy=True, ecsq=ecsq, durability="os")


@pytest.mark.parametrize("tier", [2, 3])
@pytest.mark.parametrize("kind", ["weight", "embedding"])
def test_less_error_within_the_slots(tmp_path, tier, kind):
    w = _weights()
    out = {}
    for ecsq in (False, True):
        with _store(tmp_path, f"{kind}{tier}{ecsq}", ecsq) as s:
            s.put_tensor("w", w, tier=tier, kind=kind)
            d = np.asarray(s.get_tensor("w"))
            out[ecsq] = (np.linalg.norm(d - w) / np.linalg.norm(w), s.stats()["payload_bytes"][tier])
            assert s.geometry["ecsq"] is ecsq
    assert out[True][0] < 0.97 * out[False][0], out
    slot_bits = {2: 5.25, 3: 3.375}[tier]
    assert out[True][1] * 8 <= slot_bits * w.size, out


def test_other_kinds_and_tier_1_unchanged_and_kept_on_reopen(tmp_path):
    w = _weights()
    got = {}
    for ecsq in (False, True):
        with _store(tmp_path, f"k{ecsq}", ecsq) as s:
            s.put_tensor("g", w, tier=3, kind="generic")
            s.put_tensor("t1", w, tier=1, kind="weight")
            got[ecsq] = (np.asarray(s.get_tensor("g")), np.asarray(s.get_tensor("t1")))
    assert np.array_equal(got[False][0], got[True][0])
    assert np.array_equal(got[False][1], got[True][1])
    with tv.Store(tmp_path, "m", "kTrue", durability="os") as s:  # the header decides
        assert s.geometry["ecsq"] is True


@pytest.mark.parametrize("kw", [dict(codec=4, entropy=False), dict(entropy=True)])
def test_ecsq_needs_codec_4_with_entropy(tmp_path, kw):
    with pytest.raises(tv.InvalidArgumentError, match="ecsq"):
        tv.Store(tmp_path, "m", "bad", ecsq=True, **kw)
