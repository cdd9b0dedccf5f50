"""The C6 saturation rule m*(n) of crl.experiments.mstar against hand-computed cases, censoring included."""

import math

import numpy as np
import pytest

from crl.experiments.mstar import saturation_interval, saturation_m

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


def test_no_saturation_inside_the_grid_is_right_censored_at_the_third_largest_m() -> None:
    """A curve still rising: m* would be one of the two plateau points -> m* > m_(K-2) = 4."""
    found = saturation_m(GRID, _same_seeds([0.1, 0.2, 0.4, 0.6, 0.8]), level=0.995)
    assert (found.m_star, found.censoring) == (4, "right")


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


def test_agrees_with_the_synthetic_c6_implementation() -> None:
    """A second implementation (crl.claims._c06_mstar, vectorised over bootstrap weights) on random curves: the
    same plateau, tol, censoring and m* (uncensored and left-censored points; a right-censored point carries a
    bound only)."""
    from crl.claims._c06_mstar import LEFT, RIGHT, UNCENSORED, saturations

    rng = np.random.default_rng(7)
    grid = np.array([2.0, 4, 8, 16, 32, 64])
    names = {UNCENSORED: "none", LEFT: "left", RIGHT: "right"}
    for _ in range(200):
        seeds = int(rng.integers(2, 5))
        knee = rng.uniform(0, 6)
        values = np.minimum(np.arange(6), knee)[None, :] * 0.01 + rng.normal(0, 0.004, (seeds, 6)) + 0.5
        ours = saturation_m(grid, values, level=0.9)
        theirs = saturations(grid, values[:, None, :], np.full((1, seeds), 1.0 / seeds), 0.9)
        assert ours.plateau == pytest.approx(float(theirs.plateau[0, 0]), abs=1e-12)
        assert ours.tol == pytest.approx(float(theirs.tol[0, 0]), rel=1e-6)
        assert ours.censoring == names[int(theirs.censor[0, 0])]
        if ours.censoring != "right":
            assert math.log(ours.m_star) == pytest.approx(float(theirs.log_m[0, 0]))
