"""The first-passage point m_q and its delete-one-seed jackknife (crl.stats.saturation), against a brute-force
loop, a closed form and a continuity check."""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from crl.stats.saturation import (
    LEFT,
    RIGHT,
    UNCENSORED,
    Passages,
    SlopeBounds,
    combine_slopes,
    first_passage,
    jackknife_bounds,
    jackknife_weights,
    passage_slopes,
    passages_by_n,
)

GRID = 2.0 ** np.arange(1, 9)


def _brute_force(grid: list[float], curve: list[float], q: float) -> tuple[float, int]:
    """m_q by a plain scan: the first grid point (excluding the largest) within q of the plateau, located
    between it and its predecessor where log(relative distance) is linear in log m. Nothing here calls crl."""
    plateau = (curve[-1] + curve[-2]) / 2.0
    gaps = [abs(v - plateau) / abs(plateau) for v in curve]
    for j in range(len(grid) - 1):
        if gaps[j] <= q:
            if j == 0:
                return grid[0], LEFT
            if gaps[j] == 0.0:
                return grid[j - 1], UNCENSORED
            x0, x1 = math.log(grid[j - 1]), math.log(grid[j])
            y0, y1 = math.log(gaps[j - 1]), math.log(gaps[j])
            return math.exp(x0 + (y0 - math.log(q)) / (y0 - y1) * (x1 - x0)), UNCENSORED
    return grid[-2], RIGHT


def test_a_power_law_approach_crosses_where_the_closed_form_says() -> None:
    """If this fails, m_q is not the crossing of the tolerance: a curve P (1 + a m^-r) is exactly log-linear in
    its relative distance a m^-r, so the interpolated crossing must equal (a/q)^(1/r) (the plateau being the
    mean of the last two points shifts P; the closed form below accounts for it)."""
    a, r, q = 3.0, 0.8, 0.05
    grid = 2.0 ** np.arange(1, 16)
    curve = 1.0 + a * grid**-r
    plateau = curve[-2:].mean()
    gap = np.abs(curve - plateau) / plateau
    j = int(np.argmax(gap <= q))
    slope = math.log(gap[j] / gap[j - 1]) / math.log(grid[j] / grid[j - 1])
    expected = grid[j - 1] * (q / gap[j - 1]) ** (1.0 / slope)
    found = first_passage(grid, curve[None, :], q)
    assert found.censor[0] == UNCENSORED
    assert math.exp(found.log_m[0]) == pytest.approx(expected, rel=1e-12)
    assert math.exp(found.log_m[0]) == pytest.approx((a / q) ** (1 / r), rel=0.05)


@pytest.mark.parametrize("q", [0.01, 0.05, 0.2])
def test_first_passage_matches_a_brute_force_scan(q: float) -> None:
    """If this fails, the vectorised first passage (its interpolation, its censoring on either side, or its
    first-not-last choice on curves that dip into the band and leave it) differs from a plain loop."""
    rng = np.random.default_rng(3)
    decay = 1.0 + rng.uniform(0.0, 4.0, (300, 1)) * GRID[None, :] ** -rng.uniform(0.2, 1.5, (300, 1))
    curves = decay * (1.0 + rng.normal(0.0, 0.03, (300, GRID.size)))
    found = first_passage(GRID, curves, q)
    for row, curve in enumerate(curves):
        m_q, censor = _brute_force(GRID.tolist(), curve.tolist(), q)
        assert found.censor[row] == censor
        assert math.exp(found.log_m[row]) == pytest.approx(m_q, rel=1e-12)
    assert UNCENSORED in found.censor and (LEFT in found.censor or RIGHT in found.censor)


def test_m_q_moves_continuously_with_the_curve() -> None:
    """If this fails, m_q jumps by grid steps: sliding a falling curve by small amounts must move m_q by small
    amounts (here the largest move is under 2% of m for 0.2% shifts of the curve's scale), never a doubling."""
    scales = np.linspace(1.0, 4.0, 1500)
    curves = 1.0 + scales[:, None] * GRID[None, :] ** -0.7
    log_m = first_passage(GRID, curves, 0.05).log_m
    steps = np.abs(np.diff(log_m))
    assert steps.max() < 0.02
    assert log_m[-1] - log_m[0] > math.log(2.0)


def test_censoring_is_recorded_at_the_grid_ends() -> None:
    """If this fails, a curve that is already flat is not left-censored at m_1, or one that is still falling
    at the plateau's points is not right-censored at the second-largest m."""
    flat = np.full((1, GRID.size), 2.0)
    falling = 1.0 + 10.0 * GRID[None, :] ** -0.3
    assert first_passage(GRID, flat, 0.05).censor[0] == LEFT
    found = first_passage(GRID, falling, 0.01)
    assert found.censor[0] == RIGHT and math.exp(found.log_m[0]) == pytest.approx(GRID[-2])


@pytest.mark.parametrize(("q", "message"), [(0.0, "q"), (1.0, "q")])
def test_bad_tolerances_are_refused(q: float, message: str) -> None:
    """If this fails, a tolerance outside (0, 1) gives a silent answer instead of an error naming q."""
    with pytest.raises(ValueError, match=message):
        first_passage(GRID, np.ones((1, GRID.size)), q)


def test_a_zero_plateau_is_refused() -> None:
    """If this fails, a relative tolerance of a zero plateau gives NaN instead of an error."""
    with pytest.raises(ValueError, match="plateau"):
        first_passage(GRID, np.zeros((1, GRID.size)), 0.05)


def test_jackknife_slope_interval_matches_a_loop() -> None:
    """If this fails, the jackknife interval of the slope of log m_q on log n differs from a loop that deletes
    each seed, recomputes every seed-mean curve and m_q by the brute-force scan, fits the slope with numpy's
    polyfit, and forms theta -/+ t_{S-1} sqrt((S-1)/S sum (theta_(i) - mean)^2)."""
    rng = np.random.default_rng(5)
    ns = np.array([16.0, 32.0, 64.0, 128.0, 256.0])
    seeds = 12
    values = [
        1.0 / n + (n**0.6) * GRID[None, :] ** -1.0 * (1.0 + rng.normal(0, 0.1, (seeds, GRID.size))) / n
        for n in ns
    ]
    rows = jackknife_weights(seeds)
    passages = passages_by_n([GRID] * ns.size, values, rows, 0.1)
    assert np.all(passages.censor == UNCENSORED)
    found = jackknife_bounds(passage_slopes(np.log(ns), passages), 0.95)

    def slope(keep: list[int]) -> float:
        log_m = [math.log(_brute_force(GRID.tolist(), v[keep].mean(axis=0).tolist(), 0.1)[0]) for v in values]
        return float(np.polyfit(np.log(ns), log_m, 1)[0])

    full = slope(list(range(seeds)))
    deleted = np.array([slope([s for s in range(seeds) if s != i]) for i in range(seeds)])
    se = math.sqrt((seeds - 1) / seeds * np.sum((deleted - deleted.mean()) ** 2))
    t = scipy_stats.t.ppf(0.975, seeds - 1)
    assert found.point == pytest.approx(full, rel=1e-10)
    assert found.se == pytest.approx(se, rel=1e-8)
    assert found.ci_low == pytest.approx(full - t * se, rel=1e-8)
    assert found.ci_high == pytest.approx(full + t * se, rel=1e-8)


def test_a_censored_point_opens_the_side_its_censoring_allows() -> None:
    """If this fails, a right-censored m_q at the largest n (whose true value may be larger, so the slope may be
    larger) does not leave the interval's upper end open, or leaks into its lower end."""
    ns = np.log(np.array([16.0, 32.0, 64.0]))
    log_m = np.tile(np.log([4.0, 8.0, 16.0]), (5, 1)) + np.linspace(0, 0.1, 5)[:, None]
    censor = np.zeros((5, 3), dtype=np.int64)
    censor[:, 2] = RIGHT
    found = jackknife_bounds(passage_slopes(ns, Passages(log_m, censor, log_m)), 0.95)
    assert found.ci_high == math.inf and math.isfinite(found.ci_low)


def test_combined_slopes_use_interval_arithmetic() -> None:
    """If this fails, a difference of slopes takes its lower end from the wrong bounds (a - b has lower end
    low(a) - high(b))."""
    a = SlopeBounds(np.array([1.0]), np.array([0.5]), np.array([1.5]))
    b = SlopeBounds(np.array([0.2]), np.array([0.1]), np.array([0.4]))
    diff = combine_slopes([(1.0, a), (-1.0, b)])
    assert diff.point[0] == pytest.approx(0.8)
    assert diff.low[0] == pytest.approx(0.1) and diff.high[0] == pytest.approx(1.4)


def test_jackknife_weights_leave_one_seed_out() -> None:
    """If this fails, the jackknife rows do not average the other S - 1 seeds."""
    rows = jackknife_weights(4)
    assert np.allclose(rows[0], 0.25)
    assert np.allclose(rows[1:].sum(axis=1), 1.0)
    assert np.all(np.diag(rows[1:]) == 0.0)


def test_a_constant_added_to_every_row_moves_the_interval_by_it() -> None:
    """If this fails, the power gate's shifted truths are wrong: C6's gate sets DD's truth by adding a constant to
    the statistic, which must move every jackknife row, so the interval's ends move by the constant and its width
    and standard error do not change."""
    rows = np.array([0.3, 0.1, 0.5, 0.2, 0.4, 0.35])
    base = jackknife_bounds(SlopeBounds(rows, rows, rows), 0.99)
    moved = jackknife_bounds(SlopeBounds(rows - 0.7, rows - 0.7, rows - 0.7), 0.99)
    assert moved.ci_low == pytest.approx(base.ci_low - 0.7) and moved.ci_high == pytest.approx(
        base.ci_high - 0.7
    )
    assert moved.se == pytest.approx(base.se)
