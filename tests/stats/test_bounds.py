"""Tests of crl.stats.bounds (counted bound violations) against exact binomial references and simulations."""

import math

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as scipy_stats

from crl.stats import bound_violations


def test_violation_counting_edge_cases() -> None:
    """If this fails, equality, +inf bounds, se-sized excesses or rounding (atol) are miscounted."""
    values = [1.0, 2.0, 3.0, 5.0, 1.0 + 1e-15]
    bounds = [1.0, np.inf, 2.5, 4.0, 1.0]
    se = [0.0, 0.0, 0.2, 0.2, 0.0]
    result = bound_violations(values, bounds, se, k=2.0, atol=1e-12)
    assert result.count == 2  # 3 > 2.5 and 5 > 4; equality and rounding are not violations
    assert result.count_beyond_mc_error == 2  # 0.5 > 0.4 and 1.0 > 0.4
    assert result.max_excess == pytest.approx(1.0)
    assert result.worst_index == 3
    assert result.max_z == pytest.approx(5.0)
    narrower = bound_violations(values, bounds, se, k=3.0, atol=1e-12)
    assert narrower.count_beyond_mc_error == 1  # only 1.0 > 0.6
    strict = bound_violations(values, bounds, None)
    assert strict.count == 3 and strict.count_beyond_mc_error == 3 and strict.max_z is None


def test_default_multiple_is_bonferroni_and_controls_the_family_wise_error() -> None:
    """If this fails, a tight true bound checked at many points would report spurious violations."""
    n = 500
    result = bound_violations(np.zeros(n), np.zeros(n), np.ones(n), alpha=0.05)
    assert result.k == pytest.approx(scipy_stats.norm.ppf(1 - 0.05 / n))
    assert result.expected_false == pytest.approx(0.05, rel=1e-9)
    rng = np.random.default_rng(6)
    trials = 400
    spurious = sum(
        not bound_violations(rng.standard_normal(n), np.zeros(n), np.ones(n)).holds for _ in range(trials)
    )
    assert spurious / trials <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / trials)


@pytest.mark.parametrize(("count", "n"), [(0, 50), (3, 200), (10, 10)])
def test_rate_upper_bound_is_the_exact_clopper_pearson_bound(count: int, n: int) -> None:
    """If this fails, the reported upper bound on the violation rate is not the exact binomial one."""
    values = np.r_[np.ones(count), np.zeros(n - count)]
    result = bound_violations(values, np.zeros(n), None, ci=0.95)
    if count == n:
        assert result.rate_upper == 1.0
        return
    expected = optimize.brentq(lambda p: scipy_stats.binom.cdf(count, n, p) - 0.05, 1e-12, 1 - 1e-12)
    assert result.rate_upper == pytest.approx(expected, rel=1e-6)


def test_bad_violation_input_raises() -> None:
    """If this fails, NaN values, negative errors or mismatched lengths are accepted."""
    with pytest.raises(ValueError, match="NaN"):
        bound_violations([np.nan], [1.0])
    with pytest.raises(ValueError, match="negative"):
        bound_violations([1.0], [1.0], [-0.1])
    with pytest.raises(ValueError, match="one bound per value"):
        bound_violations([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="empty"):
        bound_violations([], [])
