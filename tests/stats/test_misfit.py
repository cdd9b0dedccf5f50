"""Contract v2 of the verdict statistics (docs/theory.md section 7) on constructed series: a misfit must be
material and significant; an upper-bound rate is judged end to end on its secant; PASS, FAIL and INCONCLUSIVE
are each reachable."""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from crl.claims.verdict import Statistic, Verdict, verdict_at_most
from crl.stats import MISFIT_ALPHA, judge_misfit, secant_rate, seed_rate
from crl.stats.misfit import power_jacobian

X = np.array([256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0])


def _seeds(
    curve: np.ndarray, seeds: int, noise: float, rng: np.random.Generator, shared: float = 0.0
) -> np.ndarray:
    """(seeds, J) values curve * (1 + noise eps), eps correlated across x by a shared per-seed component."""
    common = rng.standard_normal((seeds, 1))
    own = rng.standard_normal((seeds, curve.size))
    eps = math.sqrt(shared) * common + math.sqrt(1.0 - shared) * own
    return curve[None, :] * (1.0 + noise * eps)


def test_the_chi2_statistic_equals_a_direct_quadratic_form() -> None:
    """If this fails, the goodness-of-fit statistic is not r^T Sigma^-1 r on the relative scale."""
    rng = np.random.default_rng(0)
    values = _seeds(X**-1.0, 12, 0.1, rng, shared=0.5)
    means = values.mean(axis=0)
    fitted = np.exp(np.polyval(np.polyfit(np.log(X), np.log(means), 1), np.log(X)))
    jacobian = power_jacobian(X)
    test = judge_misfit(means, fitted, jacobian, seed_values=values)
    sigma = np.cov(values / fitted, rowvar=False) / 12
    residual = means / fitted - 1.0
    inverse = np.linalg.inv(sigma)
    gls = inverse - inverse @ jacobian @ np.linalg.inv(jacobian.T @ inverse @ jacobian) @ jacobian.T @ inverse
    assert test.chi2 == pytest.approx(float(residual @ gls @ residual), rel=1e-8)
    f_value = test.chi2 * (12 - 4) / (4 * 11)
    assert test.p_value == pytest.approx(float(scipy_stats.f.sf(f_value, 4, 8)), rel=1e-9)


def test_noise_only_residuals_do_not_block_a_power_law() -> None:
    """If this fails, seed noise turns a true power law into a misfit more often than the test's level allows."""
    rng = np.random.default_rng(1)
    misfits = significant = 0
    trials = 300
    for _ in range(trials):
        fit = seed_rate(X, _seeds(X**-1.0, 16, 0.25, rng, shared=0.5), 0.99)
        assert fit.power_test is not None
        significant += fit.power_test.significant
        misfits += fit.misfit
    assert significant / trials <= MISFIT_ALPHA + 0.04
    assert misfits / trials <= 0.03


def test_a_material_and_significant_misfit_blocks() -> None:
    """If this fails, a window that bends (a power law to 1024, flat after) passes as a rate."""
    rng = np.random.default_rng(2)
    kink = np.where(X <= 1024.0, X**-1.0, 1024.0**-1.0)
    fit = seed_rate(X, _seeds(kink, 16, 0.02, rng), 0.99)
    assert fit.power_test is not None and fit.power_test.significant and fit.power_test.material
    assert fit.misfit


def test_a_significant_but_immaterial_curvature_does_not_block() -> None:
    """If this fails, precision alone makes a window misfit: a 2% bend measured to 0.1% is still a power law."""
    rng = np.random.default_rng(3)
    curve = X**-1.0 * (1.0 + 0.02 * np.cos(np.log(X)))
    fit = seed_rate(X, _seeds(curve, 40, 0.001, rng), 0.99)
    assert fit.power_test is not None and fit.power_test.significant and not fit.power_test.material
    assert not fit.misfit and fit.model == "power"


def test_exact_values_misfit_on_the_bare_residual() -> None:
    """If this fails, values without standard errors are judged by a test they cannot have."""
    fitted, jacobian = np.ones(5), power_jacobian(np.arange(1.0, 6.0))
    assert not judge_misfit(fitted * 1.04, fitted, jacobian).misfit
    assert judge_misfit(fitted * np.array([1.0, 1.0, 1.06, 1.0, 1.0]), fitted, jacobian).misfit


def test_too_few_degrees_of_freedom_are_refused() -> None:
    with pytest.raises(ValueError, match="degrees of freedom"):
        judge_misfit(np.ones(4), np.ones(4), np.ones((4, 3)), standard_errors=np.ones(4))


def test_a_covariance_from_fewer_seeds_than_points_is_refused() -> None:
    values = np.random.default_rng(4).standard_normal((3, 6)) + 10.0
    with pytest.raises(ValueError, match="positive definite"):
        judge_misfit(values.mean(axis=0), np.full(6, 10.0), power_jacobian(X), seed_values=values)


def test_the_secant_equals_its_definition_and_its_jackknife_a_direct_loop() -> None:
    """If this fails, the end-to-end rate or its delete-one-seed interval is wrong."""
    rng = np.random.default_rng(5)
    values = _seeds(X**-0.5, 10, 0.2, rng, shared=0.3)
    rate = secant_rate(X, values, 0.95)
    means = values.mean(axis=0)
    assert rate.exponent == pytest.approx(math.log(means[-1] / means[0]) / math.log(X[-1] / X[0]), rel=1e-12)
    loo = [
        math.log(np.delete(values, s, 0)[:, -1].mean() / np.delete(values, s, 0)[:, 0].mean())
        / math.log(X[-1] / X[0])
        for s in range(10)
    ]
    se = math.sqrt(9 / 10 * float(np.sum((np.array(loo) - np.mean(loo)) ** 2)))
    assert rate.se == pytest.approx(se, rel=1e-9)
    half = float(scipy_stats.t.ppf(0.975, 9)) * se
    assert (rate.ci_low, rate.ci_high) == pytest.approx((rate.exponent - half, rate.exponent + half))
    assert rate.fitted_slope == pytest.approx(np.polyfit(np.log(X), np.log(means), 1)[0], rel=1e-9)


def test_the_secant_interval_covers_the_true_secant() -> None:
    """If this fails, the jackknife Student-t interval of the secant undercovers at few seeds."""
    rng = np.random.default_rng(6)
    covered, trials = 0, 400
    for _ in range(trials):
        rate = secant_rate(X, _seeds(X**-0.7, 8, 0.3, rng, shared=0.5), 0.9)
        covered += rate.ci_low <= -0.7 <= rate.ci_high
    assert 0.85 <= covered / trials <= 0.95


def _upper_bound_verdict(values: np.ndarray, bound: float) -> Verdict:
    rate = secant_rate(X, values, 0.99)
    return verdict_at_most(Statistic("secant", rate.exponent, rate.ci_low, rate.ci_high, 0.99), bound)


def test_pass_fail_and_inconclusive_are_each_reachable_end_to_end() -> None:
    """If this fails, the upper-bound rule on the secant cannot decide one way or cannot say it cannot."""
    rng = np.random.default_rng(7)
    assert _upper_bound_verdict(_seeds(X**-1.0, 16, 0.1, rng), -0.45) is Verdict.PASS
    assert _upper_bound_verdict(_seeds(X**-0.1, 16, 0.1, rng), -0.45) is Verdict.FAIL
    assert _upper_bound_verdict(_seeds(X**-0.45, 4, 0.6, rng), -0.45) is Verdict.INCONCLUSIVE


def test_a_floor_biases_the_secant_toward_fail_and_the_floor_free_quantity_does_not() -> None:
    """If this fails, the reason C5 judges the floor-free gap is gone: c/n plus a floor of c/1024 reads as a
    slope above -0.45 end to end, while c/n itself PASSes the -0.45 bound."""
    rng = np.random.default_rng(8)
    true = X**-1.0
    floor = 1024.0**-1.0
    noise = 1.0 + 0.05 * rng.standard_normal((16, X.size))
    floor_free = true[None, :] * noise
    with_floor = floor_free + floor
    assert _upper_bound_verdict(floor_free, -0.45) is Verdict.PASS
    assert secant_rate(X, with_floor, 0.99).exponent > -0.45
