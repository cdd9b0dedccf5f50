"""The fixed pool's cliff study (studies/fixed_pool_cliff.py): m_cliff is the right end of the largest drop, and
each registered prediction can fail."""

import pytest

from studies import fixed_pool_cliff as cliff


def _curve(
    peak_at: int, ms: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4000)
) -> dict:
    """An error that rises from 0.8 at m = 1 to 0.95 at ``peak_at``, falls to 0.6 at the next m, then stays."""
    curve = {}
    for m in ms:
        if m <= peak_at:
            curve[m] = 0.8 + 0.15 * (ms.index(m) / max(ms.index(peak_at), 1))
        else:
            curve[m] = 0.6 - 0.001 * ms.index(m)
    return curve


def test_m_cliff_is_the_right_end_of_the_largest_drop_in_a_plain_loop() -> None:
    curve = _curve(256)
    found = cliff.cliff_of(128, curve)
    ms = sorted(curve)
    best = max(range(len(ms) - 1), key=lambda i: curve[ms[i]] - curve[ms[i + 1]])
    assert found.m_cliff == ms[best + 1] == 512
    assert found.depth == pytest.approx(curve[256] - curve[512])
    assert found.before == curve[256] and found.at_one == curve[1]
    assert found.in_band and found.rises


def test_the_predictions_hold_when_the_cliff_moves_with_d() -> None:
    cliffs = [cliff.cliff_of(d, _curve(2 * d)) for d in (32, 64, 128, 256)]
    v = cliff.verdicts(cliffs)
    assert [c.m_cliff for c in cliffs] == [128, 256, 512, 1024]
    assert v.band and v.rise and v.growth == 8 and v.growth_met


def test_a_cliff_fixed_at_the_batch_fails_prediction_1_and_2() -> None:
    """The alternative: the cliff at m = 512 whatever d is. Prediction 2's ratio is 1 and d = 32 leaves the band."""
    cliffs = [cliff.cliff_of(d, _curve(256)) for d in (32, 64, 128, 256)]
    v = cliff.verdicts(cliffs)
    assert v.growth == 1 and not v.growth_met
    assert not v.band


def test_a_curve_without_a_rise_fails_prediction_3() -> None:
    falling = {m: 0.9 - 0.01 * i for i, m in enumerate((1, 2, 4, 8, 16, 32, 64, 128, 256, 512))}
    falling[512] = 0.5
    found = cliff.cliff_of(64, falling)
    assert found.m_cliff == 512 and not found.rises


def test_a_curve_of_one_m_is_refused_by_width() -> None:
    with pytest.raises(ValueError, match="d = 32"):
        cliff.cliff_of(32, {1: 0.5})


def test_the_batch_predictions_read_a_cliff_at_2b_as_moved_and_one_at_512_as_not() -> None:
    """A cliff at 2b meets 4 and 5; the alternative (the cliff at 512 whatever b) fails 5 and, at b = 64, 4."""
    ms = sorted(_curve(128))
    moved = {b: cliff.cliff_of(b, _curve(b)) for b in (64, 128, 256)}
    lines, document = cliff.batch_lines(moved, ms)
    assert document["band_met"] and document["moved"]
    stuck = {b: cliff.cliff_of(b, _curve(256)) for b in (64, 128, 256)}
    lines, document = cliff.batch_lines(stuck, ms)
    assert not document["band_met"] and document["moved"] is False
    assert "5. m_cliff(128) < 512: 512, **FAILED**." in lines


def test_a_batch_not_yet_run_is_not_measured() -> None:
    ms = sorted(_curve(128))
    lines, document = cliff.batch_lines({128: None, 64: None, 256: cliff.cliff_of(256, _curve(256))}, ms)
    assert document["moved"] is None and "5. m_cliff(128) < 512: not measured." in lines
