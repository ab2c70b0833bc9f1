"""tensorvault.Store(codec=4, row_gains=True): every quantized block of an embedding
tensor carries one gain per row (TQTC version 6) so that each row's decoding is an
unbiased inner-product estimate, <x, x_hat> = |x|^2, within the same slots; other kinds
are unchanged; the flag needs codec 4 and is kept by the collection
(geometry["row_gains"])."""

import numpy as np
import pytest

import tensorvault as tv


def _table():
    # Unit rows of 576 around a shared direction, as a token-embedding table.
    rng = np.random.default_rng(7)
    e = rng.standard_normal(576) + rng.standard_normal((48, 576)) ** 3
    return (e / np.linalg.norm(e, axis=1, keepdims=True)).astype(np.float32)


def _bias(x, y):
    return np.abs((x * y).sum(1) / (x * x).sum(1) - 1.0)


@pytest.mark.parametrize("tier,ecsq", [(2, False), (3, False), (2, True), (3, True)])
def test_rows_are_unbiased_within_the_slots(tmp_path, tier, ecsq):
    x = _table()
    out = {}
    for gains in (False, True):
        with tv.Store(tmp_path, "m", f"e{tier}{ecsq}{gains}", codec=4, entropy=ecsq, ecsq=ecsq,
                      row_gains=gains, durability="os") as s:
            s.put_tensor("e", x, tier=tier, kind="embedding")
            y = np.asarray(s.get_tensor("e"))
            out[gains] = (_bias(x, y).mean(), s.stats()["payload_bytes"][tier])
            assert s.geometry["row_gains"] is gains
    assert out[True][0] < 3e-4 and out[True][0] < out[False][0] / 3, out
    # Every block within its slot (7 blocks of 4096; a short last block may use a whole
    # slot, as without gains).
    slot = {2: 2688, 3: 1728}[tier]
    assert out[True][1] <= 7 * slot, out


def test_other_kinds_unchanged_and_kept_on_reopen(tmp_path):
    x = _table()
    got = {}
    for gains in (False, True):
        with tv.Store(tmp_path, "m", f"k{gains}", codec=4, row_gains=gains, durability="os") as s:
            s.put_tensor("w", x, tier=3, kind="weight")
            s.put_tensor("e", x, tier=3, kind="embedding")
            got[gains] = (np.asarray(s.get_tensor("w")), np.asarray(s.get_tensor("e")))
    assert np.array_equal(got[False][0], got[True][0])
    assert not np.array_equal(got[False][1], got[True][1])
    with tv.Store(tmp_path, "m", "kTrue", durability="os") as s:  # the header decides
        assert s.geometry["row_gains"] is True
        assert np.array_equal(np.asarray(s.get_tensor("e")), got[True][1])


def test_the_flag_needs_codec_4(tmp_path):
    with pytest.raises(Exception, match="row_gains"):
        tv.Store(tmp_path, "m", "bad", codec=2, row_gains=True, durability="os")
