"""rate_fit on the inputs that gave a wrong rate with full confidence, and on a tolerance that meant nothing."""

import numpy as np
import pytest

from crl.claims.verdict import Verdict, verdict_rate
from crl.stats import rate_fit


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
