"""The real-data m_q tables and [A]'s shape (crl.experiments.mstar.passage) on constructed tables."""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from crl.experiments.mstar.passage import passage_points, passage_slopes_of, shapes

FRACTIONS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0)


def _table(power: float, seeds: int = 5, noise: float = 0.01) -> dict:
    """An in-sample arm whose recall rises as 0.5 - 0.25 min(1, k/m), k = 0.02 n^power 500^(1 - power) for SSCRL
    and the same with power 0.25 for SCRL (so m_q is about 10 k at q = 5%), on m = f n for the grid's fractions,
    with seed noise."""
    rng = np.random.default_rng(2)
    table: dict = {}
    for regime, exponent in (("shared", power), ("independent", 0.25)):
        for n in (500, 1000, 2000, 4000):
            k = 0.02 * n**exponent * 500 ** (1 - exponent)
            by_m: dict = {}
            for f in FRACTIONS:
                m = max(1, round(f * n))
                value = 0.5 - 0.25 * min(1.0, k / m)
                by_m[m] = {s: value * (1 + noise * rng.standard_normal()) for s in range(seeds)}
            table[("in_sample", regime, n)] = by_m
    return table


def test_m_q_and_its_interval_follow_the_jackknife_of_the_first_passage() -> None:
    """If this fails, a table's m_q is not the first passage of the seed-mean curve, or its interval is not the
    delete-one-seed Student-t interval of log m_q (checked here by a loop over deleted seeds)."""
    table = _table(1.0)
    point = next(p for p in passage_points(table, "recall@1", 0.05) if p.regime == "shared" and p.n == 1000)
    by_m = table[("in_sample", "shared", 1000)]
    ms = sorted(by_m)
    values = np.array([[by_m[m][s] for m in ms] for s in range(5)])

    def log_m_q(rows: np.ndarray) -> float:
        mean = rows.mean(axis=0)
        plateau = mean[-2:].mean()
        gap = np.abs(mean - plateau) / plateau
        j = int(np.argmax(gap[:-1] <= 0.05))
        share = (math.log(gap[j - 1]) - math.log(0.05)) / (math.log(gap[j - 1]) - math.log(gap[j]))
        return math.log(ms[j - 1]) + share * (math.log(ms[j]) - math.log(ms[j - 1]))

    full = log_m_q(values)
    deleted = np.array([log_m_q(np.delete(values, i, axis=0)) for i in range(5)])
    se = math.sqrt(4 / 5 * np.sum((deleted - deleted.mean()) ** 2))
    t = scipy_stats.t.ppf(0.975, 4)
    assert point.m_q == pytest.approx(math.exp(full), rel=1e-10)
    assert point.low == pytest.approx(math.exp(full - t * se), rel=1e-8)
    assert point.high == pytest.approx(math.exp(full + t * se), rel=1e-8)
    assert point.censoring == "" and point.seeds == 5


def test_slopes_separate_a_regime_that_scales_with_n_from_one_that_does_not() -> None:
    """If this fails, the slopes of log m_q on log n do not read the curves' scaling: SSCRL's m_q ~ n and
    SCRL's ~ n^0.25 must give slopes near 1 and 0.25 and a difference whose interval excludes 0."""
    slopes = {s.regime: s.statistic for s in passage_slopes_of(_table(1.0), "recall@1", 0.05)}
    assert slopes["SSCRL"].point == pytest.approx(1.0, abs=0.1)
    assert slopes["SCRL"].point == pytest.approx(0.25, abs=0.1)
    assert slopes["SSCRL - SCRL"].ci_low > 0.0


def test_a_regime_missing_an_n_keeps_the_others_slope_and_drops_the_difference() -> None:
    """If this fails, a grid still running in one regime (SCRL without its largest n) hides the complete regime's
    slope, or a difference is taken over two different ranges of n."""
    table = _table(1.0)
    full = {s.regime: s.statistic for s in passage_slopes_of(table, "recall@1", 0.05)}
    del table[("in_sample", "independent", 4000)]
    partial = {s.regime: s.statistic for s in passage_slopes_of(table, "recall@1", 0.05)}
    assert set(partial) == {"SSCRL", "SCRL"}
    assert partial["SSCRL"] == full["SSCRL"]
    assert partial["SCRL"].point == pytest.approx(0.25, abs=0.15)


def test_shares_are_the_means_over_the_plateau_at_the_grid_fractions() -> None:
    """If this fails, [A]'s shape is not mean(m)/P at m/n = 1, 10, 40, 70, 100%, or the steep-then-flat reading
    (share at 40% >= 95%, at 10% <= 80%) changed."""
    table = _table(1.0, noise=0.0)
    shape = next(s for s in shapes(table, "recall@1") if s.regime == "shared" and s.n == 2000)
    by_m = table[("in_sample", "shared", 2000)]
    plateau = (by_m[1400][0] + by_m[2000][0]) / 2
    expected = [by_m[max(1, round(f * 2000))][0] / plateau for f in (0.01, 0.1, 0.4, 0.7, 1.0)]
    assert shape.shares == pytest.approx(tuple(expected), rel=1e-12)
    assert not shape.steep_then_flat
