"""Rates over seeds: the misfit protocol of docs/theory.md section 7 on seed means, with a Student-t interval
from the delete-one-seed jackknife (C10).

Each seed s holds one value at every grid point x_j (``values[s, j]``, a paired design). The rate is fitted on
the seed means ybar_j: first the power law (least squares of log ybar on log x); if its largest relative
residual exceeds 5%, the two-term model ``a x^r + b x^(r-1)`` (r by profile least squares with relative weights
1/ybar^2, :mod:`crl.stats.rates`); if that also exceeds 5%, the fit is a misfit (the verdict is INCONCLUSIVE).
The residual compared with 5% is the bare largest relative residual ``max_j |ybar_j / yhat_j - 1|``, as the
contract states it (an effect size, not a test against the seeds' noise): where the seed means are noisier than
5%, the fit is called a misfit and the part is INCONCLUSIVE, never passed on a noise allowance.
The interval of r: the jackknife standard error over seeds, ``se^2 = (S-1)/S sum_s (r_(-s) - rbar)^2`` with
r_(-s) the same fit on the means without seed s, and ``r -/+ t_{S-1, (1+level)/2} se``.
"""

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as scipy_stats

from crl.stats import MISFIT_TOLERANCE, RateFit, SlopeFit
from crl.stats._validate import FloatArray
from crl.stats.rates import _exponent_grid, _profile_minimisers, _two_term_fitted


class NonPositiveMeanError(ValueError):
    """A seed mean (or a leave-one-seed-out mean) is <= 0, so its logarithm, and the rate, are undefined."""


def _power_slopes(log_x: FloatArray, means: FloatArray) -> FloatArray:
    """Least-squares slopes of log means on log x, one per column of ``means`` (J, C)."""
    centred = log_x - log_x.mean()
    return np.asarray(centred @ np.log(means) / np.sum(centred**2))


def _check_positive(means: FloatArray) -> None:
    if np.any(means <= 0.0):
        raise NonPositiveMeanError("a mean over seeds is <= 0: the log-log rate is undefined")


def seed_rate(x: ArrayLike, values: ArrayLike, level: float) -> RateFit:
    """The rate r of the seed means in x by the misfit protocol, with its jackknife Student-t interval.

    Args:
        x: J >= 4 grid values > 0, increasing.
        values: (S, J) per-seed values, S >= 3.
        level: the confidence level of the interval.

    Raises:
        ValueError: on bad shapes or fewer than 3 seeds or 4 points.
        NonPositiveMeanError: when a mean or leave-one-out mean is <= 0.
    """
    gx = np.asarray(x, dtype=np.float64)
    data = np.asarray(values, dtype=np.float64)
    if data.ndim != 2 or data.shape[1] != gx.size or gx.size < 4 or data.shape[0] < 3:
        raise ValueError(f"values must be (seeds >= 3, {gx.size} >= 4 points); got shape {data.shape}.")
    if not np.all(np.isfinite(data)) or np.any(gx <= 0.0):
        raise ValueError("values must be finite and x > 0.")
    n_seeds = data.shape[0]
    means = data.mean(axis=0)
    loo = (data.sum(axis=0)[None, :] - data) / (n_seeds - 1)
    _check_positive(means)
    _check_positive(loo)
    log_x = np.log(gx)
    slope = float(_power_slopes(log_x, means[:, None])[0])
    intercept = float(np.log(means).mean() - slope * log_x.mean())
    power_fitted = np.exp(intercept + slope * log_x)
    t = float(scipy_stats.t.ppf(0.5 + level / 2.0, n_seeds - 1))
    power_residual = float(np.max(np.abs(means / power_fitted - 1.0)))
    power_se = _jackknife_se(_power_slopes(log_x, loo.T))
    power = SlopeFit(
        slope=slope,
        intercept=intercept,
        ci_low=slope - t * power_se,
        ci_high=slope + t * power_se,
        ci_level=level,
        slope_se=power_se,
        n_points=int(gx.size),
        n_boot=0,
        method="seed-jackknife-t",
        chi2=None,
        dof=int(gx.size) - 2,
        max_relative_residual=power_residual,
    )
    if power_residual <= MISFIT_TOLERANCE:
        return RateFit(
            slope, power.ci_low, power.ci_high, level, "power", power, power_residual, None, False, gx.size
        )
    u = gx / math.exp(float(log_x.mean()))
    weights = 1.0 / means**2
    grid = _exponent_grid(slope)
    exponent = float(_profile_minimisers(u, means[:, None], weights, grid)[0])
    ratio = means / _two_term_fitted(u, means, weights, exponent)
    residual = float(np.max(np.abs(ratio - 1.0)))
    se = _jackknife_se(_profile_minimisers(u, loo.T, weights, grid))
    return RateFit(
        exponent,
        exponent - t * se,
        exponent + t * se,
        level,
        "two-term",
        power,
        residual,
        None,
        residual > MISFIT_TOLERANCE,
        int(gx.size),
    )


def _jackknife_se(estimates: FloatArray) -> float:
    """``sqrt((S-1)/S sum (e_s - mean e)^2)`` of the S leave-one-out estimates."""
    count = estimates.size
    return float(math.sqrt((count - 1) / count * np.sum((estimates - estimates.mean()) ** 2)))
