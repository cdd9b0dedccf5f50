"""The rate of y ~ x^r by the misfit protocol: power law, two-term fallback, misfit as INCONCLUSIVE.

If these fail, a true O(1/m) rate measured precisely on a finite window (where 1/m^2 corrections bend the
log-log line) would be judged false, a window that no model describes would still get a verdict, or the
two-term interval would not cover the true leading exponent at its nominal rate.
"""

import numpy as np
import pytest

from crl.claims.verdict import Verdict, verdict_rate
from crl.stats import MISFIT_TOLERANCE, rate_fit

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
