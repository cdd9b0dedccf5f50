"""Tests of crl.stats.slopes (log-log slopes and their bootstrap intervals) against closed forms, scipy/numpy
references and small coverage simulations."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from crl.stats import loglog_slope, loglog_slope_from_replicates

GRID = np.geomspace(4.0, 512.0, 8)


@settings(max_examples=30, deadline=None)
@given(
    slope=st.floats(-2.0, 2.0),
    log_prefactor=st.floats(-3.0, 3.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_ols_point_estimate_equals_scipy_linregress_on_the_logs(
    slope: float, log_prefactor: float, seed: int
) -> None:
    """If this fails, the unweighted log-log point estimate is not ordinary least squares on (log x, log y)."""
    rng = np.random.default_rng(seed)
    y = np.exp(log_prefactor) * GRID**slope * np.exp(0.2 * rng.standard_normal(GRID.size))
    fit = loglog_slope(GRID, y, rng=rng, n_boot=100)
    reference = scipy_stats.linregress(np.log(GRID), np.log(y))
    assert fit.slope == pytest.approx(reference.slope, abs=1e-10)
    assert fit.intercept == pytest.approx(reference.intercept, abs=1e-10)
    assert fit.slope_se == pytest.approx(reference.stderr, rel=1e-9)
    assert fit.ci_low <= fit.slope <= fit.ci_high


def test_weighted_point_estimate_equals_numpy_polyfit_with_delta_method_weights() -> None:
    """If this fails, the y_se path does not weight log y by 1/sd(log y) = y/y_se (the delta method)."""
    rng = np.random.default_rng(0)
    se = 0.02 * GRID**-0.5 * rng.uniform(0.5, 2.0, GRID.size)
    y = GRID**-0.5 + se * rng.standard_normal(GRID.size)
    fit = loglog_slope(GRID, y, se, rng=rng, n_boot=100)
    slope, intercept = np.polyfit(np.log(GRID), np.log(y), 1, w=y / se)
    assert fit.slope == pytest.approx(slope, abs=1e-10)
    assert fit.intercept == pytest.approx(intercept, abs=1e-10)


def test_parametric_interval_matches_the_closed_form_weighted_least_squares_error() -> None:
    """If this fails, the parametric bootstrap does not reproduce Var(b) = 1 / sum w (lx - xbar_w)^2 of WLS."""
    rng = np.random.default_rng(1)
    se = 0.03 * GRID**-1.0
    y = GRID**-1.0 + se * rng.standard_normal(GRID.size)
    fit = loglog_slope(GRID, y, se, rng=rng, n_boot=20000)
    w = (y / se) ** 2
    lx = np.log(GRID)
    centred = lx - np.sum(w * lx) / np.sum(w)
    closed_se = 1.0 / math.sqrt(np.sum(w * centred**2))
    z = scipy_stats.norm.ppf(0.975)
    assert fit.slope_se == pytest.approx(closed_se, rel=0.03)
    assert fit.ci_low == pytest.approx(fit.slope - z * closed_se, abs=0.05 * z * closed_se)
    assert fit.ci_high == pytest.approx(fit.slope + z * closed_se, abs=0.05 * z * closed_se)
    chi2 = float(np.sum(w * (np.log(y) - fit.intercept - fit.slope * lx) ** 2))
    assert fit.chi2 == pytest.approx(chi2, rel=1e-9)


def _coverage(method: str, trials: int, seed: int) -> float:
    """Fraction of simulated 1/x power laws whose 95% slope interval contains the true slope -1."""
    rng = np.random.default_rng(seed)
    truth = 3.0 / GRID
    hits = 0
    for _ in range(trials):
        if method == "residual":
            fit = loglog_slope(
                GRID, truth * np.exp(0.1 * rng.standard_normal(GRID.size)), rng=rng, n_boot=400
            )
        elif method == "parametric":
            se = 0.05 * truth
            y = truth + se * rng.standard_normal(GRID.size)
            fit = loglog_slope(GRID, y, se, rng=rng, n_boot=400)
        else:
            replicates = [t * rng.exponential(size=60) for t in truth]
            fit = loglog_slope_from_replicates(GRID, replicates, rng=rng, n_boot=400)
        hits += fit.contains(-1.0)
    return hits / trials


@pytest.mark.parametrize("method", ["residual", "parametric", "replicates"])
def test_interval_covers_the_true_slope_at_about_the_nominal_rate(method: str) -> None:
    """If this fails, the 95% bootstrap interval is badly calibrated (300 trials: binomial sd ~ 1.3%)."""
    coverage = _coverage(method, trials=300, seed=11)
    assert 0.90 <= coverage <= 0.99


def test_interval_excludes_a_different_true_rate() -> None:
    """If this fails, the slope test has no power: a 1/sqrt(x) law (a C3-style control) would pass as 1/x."""
    rng = np.random.default_rng(2)
    truth = GRID**-0.5
    se = 0.05 * truth
    fit = loglog_slope(GRID, truth + se * rng.standard_normal(GRID.size), se, rng=rng, n_boot=2000)
    assert not fit.contains(-1.0)
    assert fit.contains(-0.5) or abs(fit.slope + 0.5) < 0.05


def test_exact_power_law_gives_the_exact_slope_and_a_degenerate_interval() -> None:
    """If this fails, noiseless data y = 2 x^-1.5 are not fitted exactly."""
    fit = loglog_slope(GRID, 2.0 * GRID**-1.5, rng=np.random.default_rng(0), n_boot=200)
    assert fit.slope == pytest.approx(-1.5, abs=1e-12)
    assert math.exp(fit.intercept) == pytest.approx(2.0, rel=1e-12)
    assert fit.ci_low == pytest.approx(-1.5, abs=1e-12)
    assert fit.ci_high == pytest.approx(-1.5, abs=1e-12)
    np.testing.assert_allclose(fit.predict(GRID), 2.0 * GRID**-1.5, rtol=1e-12)


def test_misfit_is_reported_as_an_effect_size_and_never_widens_the_interval() -> None:
    """If this fails, curvature (1/x + 5/x^2) is hidden by a wider interval instead of being reported as misfit."""
    truth = 1.0 / GRID + 5.0 / GRID**2
    se = 0.01 * truth
    fit = loglog_slope(GRID, truth, se, rng=np.random.default_rng(3), n_boot=2000)
    lx, ly, w = np.log(GRID), np.log(truth), (truth / se) ** 2
    coef = np.polyfit(lx, ly, 1, w=np.sqrt(w))
    chi2 = float(np.sum(w * (ly - np.polyval(coef, lx)) ** 2))
    assert fit.chi2_per_dof == pytest.approx(chi2 / (GRID.size - 2), rel=1e-9)
    expected = float(np.max(np.abs(truth / np.exp(np.polyval(coef, lx)) - 1.0)))
    assert fit.max_relative_residual == pytest.approx(expected, rel=1e-9)
    assert fit.max_relative_residual > 0.05
    boot_se = float(np.sqrt(1.0 / np.sum(w * (lx - np.sum(w * lx) / np.sum(w)) ** 2)))
    assert fit.ci_width < 5.0 * boot_se, "the interval must stay the plain bootstrap interval"


def test_replicate_point_estimate_is_ols_on_the_replicate_means() -> None:
    """If this fails, the replicate fit is not linregress on (log x, log mean)."""
    rng = np.random.default_rng(4)
    replicates = [rng.exponential(1.0 / x, size=30) for x in GRID]
    fit = loglog_slope_from_replicates(GRID, replicates, rng=rng, n_boot=200)
    reference = scipy_stats.linregress(np.log(GRID), np.log([r.mean() for r in replicates]))
    assert fit.slope == pytest.approx(reference.slope, abs=1e-10)
    assert fit.method == "replicate-bootstrap"


def test_replicates_whose_mean_is_not_resolved_from_zero_raise() -> None:
    """If this fails, resamples with a mean <= 0 are silently dropped en masse and bias the interval."""
    rng = np.random.default_rng(5)
    replicates = [rng.exponential(1.0 / x, size=20) for x in GRID[:-1]] + [
        rng.normal(1e-4, 1.0, size=20) + 0.2
    ]
    with pytest.raises(ValueError, match="not resolved"):
        loglog_slope_from_replicates(GRID, replicates, rng=rng, n_boot=200)


@pytest.mark.parametrize(
    ("x", "y", "y_se", "match"),
    [
        ([1.0, 2.0], [1.0, 0.5], None, "at least 3"),
        ([1.0, 2.0, 4.0], [1.0, 0.0, 0.25], None, "y has entries <= 0"),
        ([0.0, 2.0, 4.0], [1.0, 0.5, 0.25], None, "x has entries <= 0"),
        ([1.0, 2.0, 4.0], [1.0, 0.5], None, "one y per x"),
        ([2.0, 2.0, 2.0], [1.0, 0.5, 0.25], None, "distinct"),
        ([1.0, 2.0, 4.0], [1.0, np.nan, 0.25], None, "NaN"),
        ([1.0, 2.0, 4.0], [1.0, 0.5, 0.25], [0.1, 0.0, 0.1], "y_se has entries <= 0"),
        ([1.0, 2.0, 4.0], [1.0, 0.5, 0.25], [0.1, 0.1], "one standard error per point"),
    ],
)
def test_bad_slope_input_raises_a_value_error_naming_the_problem(
    x: list[float], y: list[float], y_se: list[float] | None, match: str
) -> None:
    """If this fails, bad input would surface as a NaN slope or a numpy traceback."""
    with pytest.raises(ValueError, match=match):
        loglog_slope(x, y, y_se, rng=np.random.default_rng(0), n_boot=100)


@pytest.mark.parametrize(("n_boot", "ci"), [(50, 0.95), (1000, 1.0), (1000, 0.0)])
def test_bad_bootstrap_settings_raise(n_boot: int, ci: float) -> None:
    """If this fails, a too-small bootstrap or a meaningless level slips through."""
    with pytest.raises(ValueError):
        loglog_slope(GRID, 1.0 / GRID, rng=np.random.default_rng(0), n_boot=n_boot, ci=ci)
