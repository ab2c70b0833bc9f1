"""tensorvault.Store(codec=4, row_gains=True, centre=True): a 2-D embedding table is
stored centred on its column mean (the store's side record for the tensor), so a table
with a large mean row decodes with less error in the same slots; reads add the mean back;
the flag needs row gains and is kept by the collection (geometry["centre"])."""

import numpy as np
import pytest

import tensorvault as tv


def _table():
    # Unit rows of 576 around a large shared row, as a token-embedding table.
    rng = np.random.default_rng(11)
    e = 3.0 * rng.standard_normal(576) + rng.standard_normal((48, 576)) ** 3
    return (e / np.linalg.norm(e, axis=1, keepdims=True)).astype(np.float32)


def _rel(x, y):
    return float(np.sqrt(((x - y) ** 2).mean() / (x ** 2).mean()))


@pytest.mark.parametrize("tier", [1, 2, 3])
def test_centring_lowers_the_error_in_the_same_slots(tmp_path, tier):
    x = _table()
    out = {}
    for centre in (False, True):
        with tv.Store(tmp_path, "m", f"e{tier}{centre}", codec=4, entropy=True, ecsq=True,
                      row_gains=True, centre=centre, durability="os") as s:
            s.put_tensor("e", x, tier=tier, kind="embedding")
            y = np.asarray(s.get_tensor("e"))
            out[centre] = (_rel(x, y), s.stats()["payload_bytes"])
            assert s.geometry["centre"] is centre
    assert out[True][0] < 0.8 * out[False][0], out
    # The side record: 576 f32 at tier 0.
    assert out[True][1][0] == 4 * 576 and out[False][1][0] == 0, out


def test_kept_on_reopen_and_tier0_is_exact(tmp_path):
    x = _table()
    with tv.Store(tmp_path, "m", "c", codec=4, row_gains=True, centre=True, durability="os") as s:
        s.put_tensor("raw", x, tier=0, kind="embedding")
        s.put_tensor("q", x, tier=2, kind="embedding")
        q = np.asarray(s.get_tensor("q"))
    with tv.Store(tmp_path, "m", "c", durability="os") as s:  # the header decides
        assert s.geometry["centre"] is True
        assert np.array_equal(np.asarray(s.get_tensor("raw")), x)
        assert np.array_equal(np.asarray(s.get_tensor("q")), q)


def test_the_flag_needs_row_gains(tmp_path):
    with pytest.raises(Exception, match="centre"):
        tv.Store(tmp_path, "m", "bad", codec=4, centre=True, durability="os")
