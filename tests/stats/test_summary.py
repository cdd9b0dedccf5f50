"""Tests of crl.stats.summary (replicate means and the delete-one-seed jackknife) against scipy."""

import numpy as np
import pytest
from scipy import stats as scipy_stats

from crl.stats import jackknife_t, mean_se


def test_mean_se_and_t_interval_match_scipy() -> None:
    """If this fails, the replicate mean's standard error or its t interval are off."""
    values = np.random.default_rng(7).normal(2.0, 3.0, size=12)
    estimate = mean_se(values)
    assert estimate.se == pytest.approx(scipy_stats.sem(values), rel=1e-12)
    low, high = estimate.t_ci(0.9)
    ref = scipy_stats.t.interval(0.9, df=11, loc=values.mean(), scale=scipy_stats.sem(values))
    assert (low, high) == pytest.approx(ref, rel=1e-12)
    with pytest.raises(ValueError, match="at least 2"):
        mean_se([1.0])


def test_jackknife_t_of_a_mean_is_the_student_t_interval() -> None:
    """If this fails, the jackknife interval of a plain mean differs from the textbook Student-t interval."""
    values = np.random.default_rng(0).normal(size=(9, 1))
    interval = jackknife_t(lambda means: float(means[0]), values, 0.99)
    se = values.std(ddof=1) / 3.0
    half = scipy_stats.t.ppf(0.995, 8) * se
    assert interval.se == pytest.approx(se)
    assert (interval.ci_low, interval.ci_high) == pytest.approx((values.mean() - half, values.mean() + half))
    with pytest.raises(ValueError, match="at least 3 seeds"):
        jackknife_t(lambda means: float(means[0]), values[:2], 0.99)
