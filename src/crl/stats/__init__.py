"""Statistics behind the claims' verdicts: log-log slopes with bootstrap CIs, bound violations, plateaus.

Every claim of docs/theory.md section 7 reduces its measurements to one of three questions:

- **a rate** (C3, C4, C7, C8, C10; C5/C6 vs n): the exponent r of y ~ x^r, e.g. the SCRL inner error
  ``L(s) - E L_hat(s) ~ C / m`` ([A] Thm 4.5) has r = -1; the rule is an equivalence ("the CI of r lies in
  [r - 0.1, r + 0.1]"), with a misfit that must be material and significant (:mod:`crl.stats.misfit`) and a
  two-term fallback (:func:`rate_fit`, over
  :func:`loglog_slope` and :func:`loglog_slope_from_replicates`);
- **a bound** (C1, C2, C7, C9): how many measured values exceed their bound by more than their Monte-Carlo
  error (:func:`bound_violations`), e.g. C2's ``E* - E(s) <= sqrt((2/tau)(L(s) - L*))`` ([A] Thm 3.4);
- **a saturation point** (C6 and the Fashion-MNIST m*(n) experiment): the smallest grid m from which on the
  metric stays within a Student-t tolerance of its plateau, with censoring (:mod:`crl.stats.saturation`).

Over few seeds, intervals are Student-t by the delete-one-seed jackknife (:func:`jackknife_t`; the rate of seed
means by the misfit protocol, :func:`seed_rate`; an upper-bound rate end to end, :func:`secant_rate`).

All randomness comes from a ``numpy.random.Generator`` passed in; every function is float64 and raises
``ValueError`` naming the argument on bad input (never a silent NaN).
"""

from crl._vocab import Estimate
from crl.stats.bounds import INFORMATIVE_SLACK, ViolationCount, bound_violations
from crl.stats.misfit import MISFIT_ALPHA, Misfit, judge_misfit
from crl.stats.rates import (
    MISFIT_TOLERANCE,
    FewSeedsError,
    NonPositiveMeanError,
    RateFit,
    SecantRate,
    rate_fit,
    secant_rate,
    seed_rate,
)
from crl.stats.slopes import SlopeFit, loglog_slope, loglog_slope_from_replicates
from crl.stats.summary import (
    INFLUENCE_BOUND,
    JackknifeInterval,
    influence_ratio,
    jackknife_se,
    jackknife_t,
    mean_se,
)

__all__ = [
    "INFLUENCE_BOUND",
    "INFORMATIVE_SLACK",
    "MISFIT_ALPHA",
    "MISFIT_TOLERANCE",
    "Estimate",
    "FewSeedsError",
    "JackknifeInterval",
    "Misfit",
    "NonPositiveMeanError",
    "RateFit",
    "SecantRate",
    "SlopeFit",
    "ViolationCount",
    "bound_violations",
    "influence_ratio",
    "jackknife_se",
    "jackknife_t",
    "judge_misfit",
    "loglog_slope",
    "loglog_slope_from_replicates",
    "mean_se",
    "rate_fit",
    "secant_rate",
    "seed_rate",
]
