"""rate_fit on the inputs that gave a wrong rate with full confidence, and on a tolerance that meant nothing."""

import numpy as np
import pytest

from crl.claims.verdict import Verdict, verdict_rate
from crl.stats import rate_fit
from crl.stats.rates import RESOLUTION, secant_rate


def test_a_falling_curve_gets_no_rising_rate() -> None:
    """[4, 3, 2, 1] was exponent +1.0 with a zero-width CI, misfit False; now misfit with its reason."""
    fit = rate_fit([1, 2, 3, 4], [4, 3, 2, 1], rng=np.random.default_rng(0), ci=0.95)
    assert fit.misfit
    assert "degree of freedom" in fit.reason
    assert (fit.ci_low, fit.ci_high) == (-np.inf, np.inf)
    assert verdict_rate(fit, 1.0)[0] is Verdict.INCONCLUSIVE


def test_a_negative_tolerance_is_refused() -> None:
    with pytest.raises(ValueError, match=r"tolerance=-1\.0 must be a relative residual in \(0, 1\)"):
        rate_fit([1, 2, 3, 4], [1.0, 0.5, 0.33, 0.25], rng=np.random.default_rng(0), ci=0.95, tolerance=-1.0)


def test_a_strictly_falling_two_term_series_gets_no_positive_rate() -> None:
    """y = 0.05 x^0.5 + 20 x^-0.5 falls from 7.21 to 2.05 over x = 8..256, yet got +0.5000 [0.5000, 0.5000],
    two-term, misfit False: a confident rising rate for a falling curve."""
    x = 2.0 ** np.arange(3, 9)
    y = 0.05 * x**0.5 + 20 * x**-0.5
    assert np.all(np.diff(y) < 0)
    fit = rate_fit(x, y, rng=np.random.default_rng(0), ci=0.95)
    assert fit.misfit and "falls at every step" in fit.reason and "7.21" in fit.reason
    assert not fit.ci_low > 0
    assert verdict_rate(fit, 0.5)[0] is Verdict.INCONCLUSIVE


@pytest.mark.parametrize(
    "y",
    [
        2.0 ** -np.arange(3, 9, dtype=float),
        2.0 * (2.0 ** np.arange(3, 9)) ** -0.7 + 3.0 * (2.0 ** np.arange(3, 9)) ** -1.7,
    ],
    ids=["exact power law", "exact two-term"],
)
def test_noise_free_values_get_an_interval_of_nonzero_width(y: np.ndarray) -> None:
    """Noise-free values gave a bootstrap with no spread and an interval of zero width, claiming a certainty no
    fit of six points has."""
    fit = rate_fit(2.0 ** np.arange(3, 9), y, rng=np.random.default_rng(0), ci=0.95)
    assert not fit.misfit
    assert fit.ci_high - fit.ci_low >= 2 * RESOLUTION - 1e-12
    assert fit.ci_low < fit.exponent < fit.ci_high


def test_seeds_that_agree_exactly_get_a_secant_interval_of_nonzero_width() -> None:
    """A jackknife over identical seeds has zero spread; secant_rate reported an interval of zero width."""
    x = np.array([8.0, 16.0, 32.0, 64.0])
    fit = secant_rate(x, np.tile(x**-1.0, (6, 1)), 0.95)
    assert fit.ci_high - fit.ci_low >= 2 * RESOLUTION - 1e-12
    assert fit.ci_low < -1.0 < fit.ci_high
