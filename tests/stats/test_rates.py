"""The rate of y ~ x^r by the misfit protocol: power law, two-term fallback, misfit as INCONCLUSIVE.

If these fail, a true O(1/m) rate measured precisely on a finite window (where 1/m^2 corrections bend the
log-log line) would be judged false, a window that no model describes would still get a verdict, or the
two-term interval would not cover the true leading exponent at its nominal rate.
"""

import math

import numpy as np
import pytest
from scipy.optimize import curve_fit

from crl.claims.verdict import Verdict, verdict_rate
from crl.stats import MISFIT_TOLERANCE, NonPositiveMeanError, rate_fit, seed_rate

GRID = 2.0 ** np.arange(2, 11)


def _noisy(truth: np.ndarray, relative: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    se = relative * truth
    return truth + se * np.random.default_rng(seed).standard_normal(truth.size), se


def test_a_power_law_window_uses_the_power_law() -> None:
    y, se = _noisy(3.0 / GRID, 0.002, 0)
    fit = rate_fit(GRID, y, se, rng=np.random.default_rng(1), ci=0.99)
    assert fit.model == "power" and not fit.misfit
    assert fit.exponent == fit.power.slope and fit.ci_low < -1.0 < fit.ci_high
    assert verdict_rate(fit, -1.0) == (Verdict.PASS, "")


def test_a_first_order_correction_falls_back_to_the_two_term_model() -> None:
    """1/x + 5/x^2 bends the log-log line by 29% at x = 4: the power law misfits, the two-term model does not."""
    y, se = _noisy(1.0 / GRID + 5.0 / GRID**2, 0.002, 2)
    fit = rate_fit(GRID, y, se, rng=np.random.default_rng(3), ci=0.99)
    assert fit.power.max_relative_residual > MISFIT_TOLERANCE
    assert fit.model == "two-term" and not fit.misfit
    assert fit.ci_low < -1.0 < fit.ci_high and fit.ci_high - fit.ci_low < 0.05
    assert verdict_rate(fit, -1.0)[0] is Verdict.PASS
    assert verdict_rate(fit, -0.5)[0] is Verdict.FAIL


def test_a_window_no_model_describes_is_inconclusive() -> None:
    y, se = _noisy((1.0 + 0.2 * np.sin(3.0 * np.log(GRID))) / GRID, 0.002, 4)
    fit = rate_fit(GRID, y, se, rng=np.random.default_rng(5), ci=0.99)
    assert fit.misfit and fit.max_relative_residual > MISFIT_TOLERANCE
    verdict, reason = verdict_rate(fit, -1.0)
    assert verdict is Verdict.INCONCLUSIVE and reason.startswith("misfit")


def test_replicates_and_noise_free_points_take_the_same_protocol() -> None:
    rng = np.random.default_rng(6)
    truth = 1.0 / GRID + 5.0 / GRID**2
    replicates = [t * (1.0 + 0.01 * rng.standard_normal(50)) for t in truth]
    by_replicates = rate_fit(GRID, replicates=replicates, rng=np.random.default_rng(7), ci=0.99)
    exact = rate_fit(GRID, truth, rng=np.random.default_rng(8), ci=0.99)
    assert by_replicates.model == exact.model == "two-term"
    assert exact.exponent == pytest.approx(-1.0, abs=2e-3)
    assert by_replicates.ci_low < -1.0 < by_replicates.ci_high


def test_the_two_term_interval_covers_the_leading_exponent_at_about_its_level() -> None:
    """60 noisy windows of x^-0.5 + 2 x^-1.5 at 90%: coverage within the binomial range of 0.9."""
    truth = GRID**-0.5 + 2.0 * GRID**-1.5
    hits = 0
    for seed in range(60):
        y, se = _noisy(truth, 0.01, 100 + seed)
        fit = rate_fit(GRID, y, se, rng=np.random.default_rng(seed), ci=0.9, n_boot=400)
        assert fit.model == "two-term"
        hits += fit.ci_low <= -0.5 <= fit.ci_high
    assert 0.75 <= hits / 60 <= 0.99


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "either y"),
        ({"y": 1.0 / GRID, "replicates": [np.ones(3)] * GRID.size}, "either y"),
    ],
)
def test_bad_arguments_name_the_fix(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rate_fit(GRID, rng=np.random.default_rng(0), ci=0.9, **kwargs)  # type: ignore[arg-type]


def test_too_few_points_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 4"):
        rate_fit(GRID[:3], 1.0 / GRID[:3], rng=np.random.default_rng(0), ci=0.9)


def _curve_fit_exponent(
    x: np.ndarray, y: np.ndarray, se: np.ndarray, start: tuple[float, float, float]
) -> float:
    """The leading exponent of y = a x^r + b x^(r-1) by scipy's curve_fit (Levenberg-Marquardt, weighted by
    se), started at the truth: an optimiser independent of rate_fit's profile grid."""
    (a, _b, r), _ = curve_fit(
        lambda t, a, b, r: a * t**r + b * t ** (r - 1.0), x, y, p0=start, sigma=se, maxfev=20000
    )
    assert a > 0.0
    return float(r)


@pytest.mark.parametrize("seed", range(12))
def test_the_two_term_exponent_equals_curve_fits_on_random_series(seed: int) -> None:
    """Random leading exponents, corrections and 0.5% noise: rate_fit's exponent is scipy's within 2e-3."""
    rng = np.random.default_rng(1000 + seed)
    r, a, b = rng.uniform(-2.0, -0.3), rng.uniform(0.5, 2.0), rng.uniform(2.0, 8.0)
    truth = a * GRID**r + b * GRID ** (r - 1.0)
    y, se = _noisy(truth, 0.005, seed)
    fit = rate_fit(GRID, y, se, rng=np.random.default_rng(seed), ci=0.95, n_boot=200)
    assert fit.model == "two-term" and not fit.reason
    assert fit.exponent == pytest.approx(_curve_fit_exponent(GRID, y, se, (a, b, r)), abs=2e-3)


@pytest.mark.parametrize("seed", range(12))
def test_the_power_slope_equals_least_squares_on_the_logs(seed: int) -> None:
    """The power-law path's exponent is numpy's weighted straight line through (log x, log y)."""
    rng = np.random.default_rng(2000 + seed)
    r = rng.uniform(-2.0, 0.5)
    y, se = _noisy(rng.uniform(0.1, 10.0) * GRID**r, 0.003, seed)
    fit = rate_fit(GRID, y, se, rng=np.random.default_rng(seed), ci=0.95, n_boot=200)
    slope = np.polyfit(np.log(GRID), np.log(y), 1, w=y / se)[0]
    assert fit.model == "power" and fit.exponent == pytest.approx(slope, abs=1e-10)


def test_a_falling_line_is_not_a_rising_rate() -> None:
    """5, 4, 3, 2, 1 is fitted exactly by a x + b with a = -1, inadmissible: the best admissible two-term fit
    falls and leaves a residual far above 5%, so the window misfits."""
    fit = rate_fit([1, 2, 3, 4, 5], [5.0, 4.0, 3.0, 2.0, 1.0], rng=np.random.default_rng(0), ci=0.95)
    assert fit.misfit and fit.exponent < 0.0 and fit.max_relative_residual > MISFIT_TOLERANCE
    assert verdict_rate(fit, 1.0)[0] is Verdict.INCONCLUSIVE
    assert verdict_rate(fit, -1.0)[0] is Verdict.INCONCLUSIVE


def test_four_points_leave_the_two_term_model_no_room_to_misfit() -> None:
    fit = rate_fit([1, 2, 3, 4], [4.0, 3.0, 2.0, 1.0], rng=np.random.default_rng(0), ci=0.95)
    assert fit.misfit and "degree of freedom" in fit.reason
    assert verdict_rate(fit, 1.0)[0] is Verdict.INCONCLUSIVE


@pytest.mark.parametrize(
    "y",
    [
        [1.0, 3.0, 1.0, 3.0, 1.0, 3.0, 1.0, 3.0, 1.0],
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0],
        [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 1e6],
    ],
)
def test_degenerate_series_get_no_confident_rate(y: list[float]) -> None:
    """A zigzag, a lone jump and an explosion are no rate: misfit, never a tight CI on a wrong exponent."""
    fit = rate_fit(GRID, y, rng=np.random.default_rng(0), ci=0.95, n_boot=400)
    assert fit.misfit
    assert verdict_rate(fit, -1.0)[0] is Verdict.INCONCLUSIVE


def test_the_exponent_does_not_depend_on_the_scale_of_y() -> None:
    """y and y x 1e-200 (weights 1/y^2 would overflow) give the same fit."""
    y, se = _noisy(1.0 / GRID + 5.0 / GRID**2, 0.002, 2)
    fits = [
        rate_fit(GRID, c * y, c * se, rng=np.random.default_rng(3), ci=0.99, n_boot=300)
        for c in (1.0, 1e-200)
    ]
    assert fits[0].model == fits[1].model == "two-term"
    assert fits[1].exponent == pytest.approx(fits[0].exponent, abs=1e-12)
    assert fits[1].ci_low == pytest.approx(fits[0].ci_low, abs=1e-9)


def test_a_noise_free_exact_two_term_series_is_recovered() -> None:
    truth = 2.0 * GRID**-0.7 + 3.0 * GRID**-1.7
    fit = rate_fit(GRID, truth, rng=np.random.default_rng(0), ci=0.95)
    assert fit.model == "two-term" and not fit.misfit
    assert fit.exponent == pytest.approx(-0.7, abs=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tolerance": -1.0}, "tolerance"),
        ({"tolerance": 0.0}, "tolerance"),
        ({"tolerance": 1.5}, "tolerance"),
        ({"tolerance": float("nan")}, "tolerance"),
    ],
)
def test_a_tolerance_outside_the_unit_interval_is_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rate_fit(GRID, 1.0 / GRID, rng=np.random.default_rng(0), ci=0.9, **kwargs)


def test_unsorted_or_repeated_x_is_refused() -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        rate_fit(GRID[::-1], 1.0 / GRID[::-1], rng=np.random.default_rng(0), ci=0.9)
    with pytest.raises(ValueError, match="strictly increasing"):
        rate_fit([1, 2, 2, 3, 4], [1.0, 0.5, 0.5, 0.3, 0.25], rng=np.random.default_rng(0), ci=0.9)


SEED_X = np.array([256.0, 512.0, 1024.0, 2048.0, 4096.0])


def _seed_values(rate: float, seeds: int, noise: float, rng: np.random.Generator) -> np.ndarray:
    """(seeds, 5) values c x^rate times independent lognormal noise of relative sd ``noise``."""
    return (SEED_X**rate)[None, :] * np.exp(noise * rng.standard_normal((seeds, SEED_X.size)))


def test_seed_rate_recovers_a_power_law_and_its_jackknife_matches_a_direct_loop() -> None:
    """If this fails, the rate of the seed means or its delete-one-seed jackknife standard error is wrong."""
    values = _seed_values(-1.0, 40, 0.05, np.random.default_rng(1))
    fit = seed_rate(SEED_X, values, 0.99)
    assert fit.model == "power" and not fit.misfit
    assert fit.ci_low < -1.0 < fit.ci_high and fit.exponent == pytest.approx(-1.0, abs=0.03)
    loo = [
        np.polyfit(np.log(SEED_X), np.log(np.delete(values, s, axis=0).mean(axis=0)), 1)[0] for s in range(40)
    ]
    se = math.sqrt(39 / 40 * np.sum((np.asarray(loo) - np.mean(loo)) ** 2))
    assert fit.power.slope_se == pytest.approx(se, rel=1e-9)


def test_seed_noise_above_five_percent_is_not_misfit_but_a_kink_is() -> None:
    """If this fails, seed noise blocks a true power law (contract v1's precision requirement) or a kinked
    window passes as a power law."""
    noisy = _seed_values(-1.0, 8, 0.3, np.random.default_rng(3))
    means = noisy.mean(axis=0)
    slope, intercept = np.polyfit(np.log(SEED_X), np.log(means), 1)
    bare = float(np.max(np.abs(means / np.exp(intercept + slope * np.log(SEED_X)) - 1.0)))
    fit = seed_rate(SEED_X, noisy, 0.99)
    assert fit.power.max_relative_residual == pytest.approx(bare, rel=1e-9)
    assert bare > 0.05 and fit.model == "power" and not fit.misfit
    assert fit.power_test is not None and not fit.power_test.material
    kinked = np.tile(np.array([1.0, 0.5, 0.25, 0.25, 0.25]), (10, 1)) * (1 + 0.001 * np.arange(10))[:, None]
    kinked = kinked * np.exp(0.002 * np.random.default_rng(4).standard_normal(kinked.shape))
    assert seed_rate(SEED_X, kinked, 0.99).misfit


def test_non_positive_means_are_refused_by_name() -> None:
    """If this fails, a negative mean gap reaches a logarithm (a silent NaN) instead of an INCONCLUSIVE part."""
    values = np.ones((4, 5))
    values[:, 2] = -1.0
    with pytest.raises(NonPositiveMeanError, match="<= 0"):
        seed_rate(SEED_X, values, 0.99)
