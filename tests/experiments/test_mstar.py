"""The tolerance-band saturation rule m*(n) of one curve (crl.stats.saturation.saturation_m) against
hand-computed cases, censoring included, and against the vectorised rule it wraps (saturations)."""

import math

import numpy as np
import pytest
from scipy import stats

from crl.stats.saturation import (
    LEFT,
    RIGHT,
    UNCENSORED,
    saturation_interval,
    saturation_m,
    saturations,
    seed_weights,
)

GRID = [1, 2, 4, 8, 16]


def _same_seeds(means: list[float]) -> np.ndarray:
    """Two identical seeds: no spread, so tol = 1% of the plateau."""
    return np.array([means, means])


def test_first_m_within_tol_from_which_all_stay() -> None:
    """plateau 0.8, tol 0.008: 0.5 is out, 0.795 and the rest are in -> m* = 2, not censored."""
    found = saturation_m(GRID, _same_seeds([0.5, 0.795, 0.8, 0.8, 0.8]), level=0.995)
    assert found.plateau == pytest.approx(0.8) and found.tol == pytest.approx(0.008)
    assert (found.m_star, found.censoring) == (2, "none")


def test_a_late_excursion_moves_m_star_past_it() -> None:
    """0.79 at m = 4 is out (|0.79 - 0.8| > 0.008) although m = 2 is in: m* is the m after the last excursion."""
    found = saturation_m([*GRID, 32], _same_seeds([0.5, 0.8, 0.79, 0.8, 0.8, 0.8]), level=0.995)
    assert (found.m_star, found.censoring) == (8, "none")


def test_no_saturation_inside_the_grid_is_right_censored_at_the_second_largest_m() -> None:
    """A curve still rising: m* would be one of the two plateau points. The bound recorded is m_(K-1) = 8, the
    second-largest grid m (m* >= 8, i.e. m* > m_(K-2) = 4), as in the synthetic C6 (crl.stats.saturation); it
    was m_(K-2) = 4 before the two implementations were made one, with the same meaning m* > 4."""
    found = saturation_m(GRID, _same_seeds([0.1, 0.2, 0.4, 0.6, 0.8]), level=0.995)
    assert (found.m_star, found.censoring) == (8, "right")


def test_flat_from_the_first_m_is_left_censored() -> None:
    found = saturation_m(GRID, _same_seeds([0.801, 0.8, 0.799, 0.8, 0.8]), level=0.995)
    assert (found.m_star, found.censoring) == (1, "left")


def test_tol_is_the_student_t_half_width_of_the_plateau_when_larger() -> None:
    """Per-seed plateaus 0.81 and 0.82: h = t_{0.95, 1} * sd / sqrt(2) = 6.3137515 * 0.005 at level 0.9.

    Means 0.5, 0.71, 0.80, 0.82, 0.81, plateau 0.815: 0.5 and 0.71 are out, 0.80 is in -> m* = 4.
    """
    values = np.array([[0.5, 0.70, 0.80, 0.80, 0.82], [0.5, 0.72, 0.80, 0.84, 0.80]])
    found = saturation_m(GRID, values, level=0.9)
    assert found.plateau == pytest.approx(0.815)
    assert found.tol == pytest.approx(6.313751514675 * 0.005, rel=1e-9)
    assert (found.m_star, found.censoring) == (4, "none")
    assert found.means == pytest.approx((0.5, 0.71, 0.80, 0.82, 0.81))


def test_lower_is_better_metrics_use_the_same_distances() -> None:
    found = saturation_m(GRID, _same_seeds([2.0, 1.0, 0.5, 0.5, 0.5]), level=0.995)
    assert (found.m_star, found.censoring) == (4, "none")


def test_interval_over_seed_resamples() -> None:
    """Identical seeds: every resample gives the same m*; a right-censored curve gives an infinite upper end."""
    rng = np.random.default_rng(0)
    same = saturation_interval(
        GRID, _same_seeds([0.5, 0.795, 0.8, 0.8, 0.8]), level=0.995, n_resamples=50, rng=rng
    )
    assert (same.low, same.high) == (2, 2)
    rising = saturation_interval(
        GRID, _same_seeds([0.1, 0.2, 0.4, 0.6, 0.8]), level=0.995, n_resamples=50, rng=rng
    )
    assert rising.saturation.censoring == "right" and math.isinf(rising.low) and math.isinf(rising.high)


@pytest.mark.parametrize(
    ("grid", "values", "match"),
    [
        ([1, 4, 2], np.ones((2, 3)), "strictly increasing"),
        ([1, 2], np.ones((2, 2)), "at least 3"),
        (GRID, np.ones((1, 5)), "at least 2 seeds"),
        (GRID, np.ones((2, 4)), r"\(seeds, 5\)"),
        (GRID, np.array([[1.0, 1, 1, 1, math.nan], [1.0, 1, 1, 1, 1]]), "NaN"),
    ],
)
def test_bad_input_is_named(grid: list[int], values: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        saturation_m(grid, values, level=0.995)
    with pytest.raises(ValueError, match="level"):
        saturation_m(GRID, np.ones((2, 5)), level=1.5)


def _reference(grid: np.ndarray, values: np.ndarray, level: float) -> tuple[float, str, float, float]:
    """The rule as a plain loop (float64, sd with ddof=1): (m*, censoring, plateau, tol)."""
    seeds = values.shape[0]
    means = values.mean(axis=0)
    plateau = float(means[-2:].mean())
    sd = float(values[:, -2:].mean(axis=1).std(ddof=1))
    tol = max(float(stats.t.ppf(0.5 + level / 2, seeds - 1)) * sd / math.sqrt(seeds), 0.01 * abs(plateau))
    first = len(grid)
    while first > 0 and abs(means[first - 1] - plateau) <= tol:
        first -= 1
    if first >= len(grid) - 2:
        return float(grid[-2]), "right", plateau, tol
    return float(grid[first]), "left" if first == 0 else "none", plateau, tol


def _random_curve(rng: np.random.Generator, seeds: int, k: int) -> np.ndarray:
    """A rising, flat or knee-shaped curve on a grid of 1/8 (exact means with 2 or 4 seeds; ties and flat
    stretches are common)."""
    kind = int(rng.integers(0, 3))
    if kind == 0:
        return np.full((seeds, k), float(rng.integers(1, 9)))
    steps = np.arange(k) if kind == 1 else np.minimum(np.arange(k), rng.integers(0, k))
    noise = rng.integers(-1, 2, (seeds, k)) / 8
    return 4.0 + steps[None, :] * float(rng.integers(1, 5)) / 4 + noise


def test_agrees_with_row_0_of_the_vectorised_rule_and_a_plain_loop() -> None:
    """saturation_m against row 0 (weights 1/S) of crl.stats.saturation.saturations, which the synthetic C6
    uses, and against the rule as a plain loop: same m* (censored: the recorded bound), censoring, plateau, tol,
    on random curves of several shapes where all three censoring states occur."""
    rng = np.random.default_rng(7)
    names = {UNCENSORED: "none", LEFT: "left", RIGHT: "right"}
    seen = set()
    for _ in range(300):
        seeds, k = int(rng.choice([2, 4])), int(rng.integers(3, 9))
        grid = np.cumsum(rng.integers(1, 5, k)).astype(float)
        values = _random_curve(rng, seeds, k)
        ours = saturation_m(grid, values, level=0.9)
        theirs = saturations(grid, values[:, None, :], seed_weights(seeds, None, 0), 0.9)
        assert ours.censoring == names[int(theirs.censor[0, 0])]
        assert math.log(ours.m_star) == float(theirs.log_m[0, 0])
        assert (ours.plateau, ours.tol) == (float(theirs.plateau[0, 0]), float(theirs.tol[0, 0]))
        m_star, censoring, plateau, tol = _reference(grid, values, 0.9)
        assert (ours.m_star, ours.censoring) == (m_star, censoring)
        assert ours.plateau == pytest.approx(plateau, abs=1e-12) and ours.tol == pytest.approx(tol, rel=1e-9)
        seen.add(ours.censoring)
    assert seen == {"none", "left", "right"}


def test_interval_is_reproducible_with_a_fixed_generator() -> None:
    """The same generator seed gives the same interval; the seeds' spread makes resamples differ."""
    values = np.random.default_rng(3).normal(0.0, 0.02, (6, 5)) + np.array([0.5, 0.7, 0.78, 0.8, 0.8])
    first, second = (
        saturation_interval(GRID, values, level=0.9, n_resamples=200, rng=np.random.default_rng(11))
        for _ in range(2)
    )
    assert first == second
    assert first.low <= first.saturation.m_star <= first.high
