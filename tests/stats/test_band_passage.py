"""The band form of the first-passage point (crl.stats.saturation.band_passage) against a brute-force average of
the fixed-q m_q over a fine grid of q, its continuity where the fixed-q m_q jumps, its censoring, and the
stability test (crl.stats.influence_ratio) that tells the two apart."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crl.stats import INFLUENCE_BOUND, influence_ratio
from crl.stats.saturation import (
    BOTH,
    LEFT,
    RIGHT,
    UNCENSORED,
    QBand,
    band_passage,
    first_passage,
    jackknife_weights,
    passage_interval,
    passages_by_n,
)

GRID = 2.0 ** np.arange(1, 11)
BAND = QBand(0.05, 0.3)


def _brute_force_band(curve: np.ndarray, band: QBand, points: int = 40001) -> float:
    """The mean of log m_q over log q uniform on the band, by the midpoint rule on ``points`` values of q: each
    m_q by :func:`first_passage` on its own (the fixed-q statistic, itself checked against a plain loop)."""
    edges = np.linspace(math.log(band.low), math.log(band.high), points)
    middles = np.exp((edges[:-1] + edges[1:]) / 2.0)
    return float(np.mean([first_passage(GRID, curve[None, :], q).log_m[0] for q in middles]))


@settings(max_examples=12, deadline=None)
@given(
    scale=st.floats(0.5, 5.0),
    rate=st.floats(0.2, 1.5),
    noise=st.floats(0.0, 0.2),
    seed=st.integers(0, 2**31 - 1),
)
def test_the_band_is_the_average_of_the_fixed_q_statistic(
    scale: float, rate: float, noise: float, seed: int
) -> None:
    """If this fails, band_passage is not the average of log m_q over the band: the exact piecewise integral
    must equal a fine midpoint average of the fixed-q first passage (error of the midpoint rule ~1e-4 where the
    fixed-q statistic jumps), on curves that cross the band once or several times and on censored ones."""
    rng = np.random.default_rng(seed)
    curve = (1.0 + scale * GRID**-rate) * (1.0 + noise * rng.standard_normal(GRID.size))
    found = band_passage(GRID, curve[None, :], BAND)
    assert found.log_m[0] == pytest.approx(_brute_force_band(curve, BAND, 4001), abs=2e-3)


def test_a_narrow_band_is_the_fixed_q_statistic() -> None:
    """If this fails, the band's integrand is not the fixed-q m_q: a band of width 1e-6 around q must give m_q."""
    curves = 1.0 + np.linspace(0.5, 4.0, 50)[:, None] * GRID[None, :] ** -0.7
    narrow = band_passage(GRID, curves, QBand(0.1 * (1 - 1e-6), 0.1 * (1 + 1e-6)))
    fixed = first_passage(GRID, curves, 0.1)
    assert narrow.log_m == pytest.approx(fixed.log_m, abs=1e-5)
    assert np.array_equal(narrow.censor, fixed.censor)


def _crossing_curves(dip: np.ndarray) -> np.ndarray:
    """Curves 1 + g over GRID with plateau exactly 1 (the last two points 1 +/- 0.002), so g is the relative
    distance: it dips to ``dip`` at m = 8 and rises to 0.25 at m = 16 before falling for good, so for q between the
    dip and 0.25 it crosses q three times (down, up, down again)."""
    gap = 0.6 * (GRID / 2.0) ** -0.9
    gap[3] = 0.25
    gap[-2:] = (0.002, -0.002)
    curves = np.tile(1.0 + gap, (dip.size, 1))
    curves[:, 2] = 1.0 + dip
    return curves


def test_the_band_moves_continuously_where_the_fixed_q_statistic_jumps() -> None:
    """If this fails, the band form jumps with the curve: as the dip at m = 8 deepens through q = 0.12 the fixed-q
    m_q jumps from beyond m = 16 back to m = 8 (over a whole grid step) within one step of the dip, while the band's
    log m moves by at most a small multiple of that step."""
    dip = np.linspace(0.2, 0.06, 2001)
    curves = _crossing_curves(dip)
    fixed = first_passage(GRID, curves, 0.12).log_m
    band = band_passage(GRID, curves, QBand(0.08, 0.18)).log_m
    assert np.abs(np.diff(fixed)).max() > math.log(2.0)
    assert np.abs(np.diff(band)).max() < 0.01
    assert band[0] - band[-1] > 0.3


def test_the_stability_test_fails_a_jumping_statistic_and_passes_the_band() -> None:
    """If this fails, the stability test (largest delete-one move <= 4 x the root mean square move) cannot tell a
    jump from noise: 64 seeds whose dips at m = 8 scatter normally, their mean just above q = 0.12 by half-way
    between what deleting the largest and the second-largest seed would take off it, so deleting the largest alone
    drops the mean dip below q: the fixed-q m_q moves a grid step for that seed only (about sqrt(64) = 8 root mean
    square moves), while the band's moves follow the seeds' normal scatter."""
    z = np.sort(np.random.default_rng(7).standard_normal(64))
    sigma = 0.01
    lift = sigma * (z[-1] + z[-2]) / 2.0 / 63.0
    dips = 0.12 + lift + sigma * (z - z.mean())
    seeds = _crossing_curves(dips)
    rows = jackknife_weights(64)
    for tolerance, passes in ((0.12, False), (QBand(0.08, 0.18), True)):
        log_m = passages_by_n([GRID.tolist()], [seeds], rows, tolerance).log_m[:, 0]
        ratio = influence_ratio(float(log_m[0]), log_m[1:])
        assert (ratio <= INFLUENCE_BOUND) is passes, (tolerance, ratio)


def test_normal_influence_passes_the_stability_test() -> None:
    """If this fails, c = 4 rejects plain noise: a mean of 64 normal seeds has a largest delete-one move below
    4 root mean square moves (a 0.4% tail)."""
    values = np.random.default_rng(11).standard_normal(64)
    rows = (values.sum() - values) / 63
    assert influence_ratio(float(values.mean()), rows) < INFLUENCE_BOUND
    with pytest.raises(ValueError, match="at least 3"):
        influence_ratio(0.0, np.array([1.0, np.nan, 2.0]))


def test_censoring_of_a_band_names_the_sides_it_leaves_open() -> None:
    """If this fails, a band that reaches past the grid's ends is not recorded as a bound: a curve already within
    the band's top at m_1 is left-censored, one not within its bottom by m_(K-1) right-censored, one reaching
    both both, and a band inside the crossing range uncensored."""
    curve = (1.0 + 0.35 * (GRID / 2.0) ** -0.5)[None, :]
    gap = np.abs(curve[0] - curve[0, -2:].mean()) / curve[0, -2:].mean()
    inside = band_passage(GRID, curve, QBand(0.1, 0.2))
    assert inside.censor[0] == UNCENSORED
    assert band_passage(GRID, curve, QBand(0.1, 0.9)).censor[0] == LEFT
    assert band_passage(GRID, curve, QBand(gap[-2] / 2, 0.2)).censor[0] == RIGHT
    both = band_passage(GRID, curve, QBand(gap[-2] / 2, 0.9))
    assert both.censor[0] == BOTH
    found = passage_interval(
        passages_by_n(
            [GRID.tolist()], [np.tile(curve, (5, 1))], jackknife_weights(5), QBand(gap[-2] / 2, 0.9)
        ),
        0,
        0.9,
    )
    assert found.ci_low == -math.inf and found.ci_high == math.inf


@pytest.mark.parametrize(
    ("low", "high", "message"), [(0.0, 0.1, "band low"), (0.1, 1.0, "band high"), (0.2, 0.1, "low < high")]
)
def test_bad_bands_are_refused(low: float, high: float, message: str) -> None:
    """If this fails, a band outside (0, 1) or upside down gives a silent answer instead of an error naming it."""
    with pytest.raises(ValueError, match=message):
        QBand(low, high)
