"""The rate of a measured quantity, y ~ x^r, by the misfit protocol of docs/theory.md section 7 (contract v2).

A claimed rate (C3: the SCRL inner error ~ m^-1; C7, C8: ~ k^-1) is tested on a finite window, where an exact
power law is only the leading term: the exact SCRL inner gap is c1/m + c2/m^2 + ..., whose log-log slope over
m = 4..1024 is -1.0045 with a half-width of 0.004. The protocol, fixed before data:

1. Fit the power law y = A x^r (:mod:`crl.stats.slopes`) and judge its misfit by :func:`crl.stats.misfit.judge_misfit`:
   the window misfits only when a chi^2 goodness-of-fit test on the means' covariance rejects at the fixed
   level 0.05 (at least 2 degrees of freedom) AND the misfit is material (some point's relative residual
   exceeds 5% beyond t of its standard errors). A residual the noise explains leaves the power law standing:
   r and its CI are the rate.
2. Otherwise fit the two-term model y = a x^r + b x^(r-1) (the leading term and its first correction), judge
   its misfit the same way, and test its leading exponent r; its CI comes from the same kind of bootstrap as
   the power law's.
3. If the two-term model misfits too, the window is not described by either model: :attr:`RateFit.misfit` is
   set and the verdict is INCONCLUSIVE. No interval is widened to rescue a misfit.

An exponent interval is never narrower than +-:data:`RESOLUTION` (0.002, the profile grid's step) around its
exponent: a bootstrap of noise-free values, or a jackknife of seeds that agree exactly, has no spread, and an
interval of zero width would claim a certainty no fit of a finite window has.

The two-term model describes a rate only where its leading term leads: a > 0 and the model positive at every
x of the window (y > 0 there). An r whose least-squares (a, b) break this is not a candidate: 4, 3, 2, 1 over
x = 1..4 is fitted exactly by a x + b with a = -1, whose "rate" +1 describes a curve that falls. The exponent
is not identified, and the window misfits (with the reason in :attr:`RateFit.reason`), when no candidate r
remains, when the best one lies on the edge of the searched range, when fewer than 5 points leave the model
less than 2 degrees of freedom to show misfit, when more than 1% of the bootstrap resamples are not identified
either, or when the series moves the same way at every step and the exponent says the other (a falling series
never gets a rising rate: y = 0.05 x^0.5 + 20 x^-0.5 falls from 7.21 to 2.05 over x = 8..256 and is fitted
exactly with r = +0.5, a leading term that leads only beyond the window).

Rates over seeds (:func:`seed_rate`, C10's k part): each seed s holds one value at every grid point x_j
(``values[s, j]``, a paired design), and the protocol runs on the seed means ybar_j, their covariance the seeds'
sample covariance / S (Hotelling's F in the test, Student-t on S - 1 in the materiality margin): the power law
by least squares of log ybar on log x, then the two-term model with relative weights 1/ybar^2 if the power law
misfits. The interval of r is the delete-one-seed jackknife's (:func:`crl.stats.summary.jackknife_se`: r_(-s)
the same fit on the means without seed s), ``r -/+ t_{S-1, (1+level)/2} se``.

Upper-bound rates end to end (:func:`secant_rate`, C5's and C10's n parts): a part that claims "falls at least
as fast as x^r" is judged on the secant slope between the window's ends, ``log(ybar_hi / ybar_lo) /
log(x_hi / x_lo)``, with the delete-one-seed jackknife Student-t interval; the fitted slope is reported beside
it. No model is fitted, so no misfit is judged.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as scipy_stats

from crl.stats._validate import FloatArray, as_finite_1d, check_boot
from crl.stats.misfit import (
    MATERIAL_TOLERANCE,
    MIN_MISFIT_DOF,
    Misfit,
    judge_misfit,
    power_jacobian,
    two_term_jacobian,
)
from crl.stats.slopes import SlopeFit, loglog_slope, loglog_slope_from_replicates
from crl.stats.summary import jackknife_se, jackknife_t

MISFIT_TOLERANCE = MATERIAL_TOLERANCE
"""Relative residual, beyond t standard errors, above which a significant misfit is material (5%)."""

_GRID_STEP = 0.002
"""Spacing of the profile grid over the leading exponent r (refined by a parabola through the minimum)."""

TWO_TERM_PARAMETERS = 3
"""Free parameters of the two-term model: a, b and r."""

MAX_UNIDENTIFIED_SHARE = 0.01
"""Largest share of bootstrap resamples whose exponent may be unidentified before the window misfits."""

RESOLUTION = _GRID_STEP
"""The half-width below which no exponent interval is reported (module docstring)."""


def _resolved(exponent: float, low: float, high: float) -> tuple[float, float]:
    """The interval [low, high] of ``exponent``, at least +-:data:`RESOLUTION` around it."""
    return min(low, exponent - RESOLUTION), max(high, exponent + RESOLUTION)


def _against_trend(means: FloatArray, exponent: float) -> str:
    """Why ``exponent`` contradicts a series that moves one way at every step ('' when it does not)."""
    steps = np.diff(means)
    falls, rises = bool(np.all(steps < 0.0)), bool(np.all(steps > 0.0))
    if (falls and exponent > 0.0) or (rises and exponent < 0.0):
        way = "falls" if falls else "rises"
        return (
            f"the series {way} at every step ({means[0]:.4g} -> {means[-1]:.4g}) but the two-term leading "
            f"exponent is {exponent:+.4g}: its leading term leads only beyond the window"
        )
    return ""


@dataclass(frozen=True)
class RateFit:
    """The leading exponent r of y ~ x^r on a window, with its CI, by the misfit protocol (module docstring).

    Attributes:
        exponent: the estimated rate r (the power law's slope, or the two-term model's leading exponent).
        ci_low: lower end of r's confidence interval.
        ci_high: upper end of r's confidence interval.
        ci_level: nominal coverage of the interval.
        model: ``"power"`` (y = A x^r) or ``"two-term"`` (y = a x^r + b x^(r-1)).
        power: the power-law fit, always reported (its slope, CI and misfit).
        max_relative_residual: ``max_i |y_i / yhat_i - 1|`` of the model used.
        chi2_per_dof: the goodness-of-fit chi^2 per degree of freedom of the model used (``None`` for exact
            values or an unidentified exponent).
        misfit: True when even the model used misfits, material and significant
            (:func:`crl.stats.misfit.judge_misfit`), or its exponent is not identified (the verdict is then
            INCONCLUSIVE).
        n_points: number of x values.
        reason: why the two-term model could not describe the window (``""`` when it could or was not
            needed).
        power_test: the power law's misfit judgement.
        test: the misfit judgement of the model used (``None`` when its exponent is not identified).
    """

    exponent: float
    ci_low: float
    ci_high: float
    ci_level: float
    model: Literal["power", "two-term"]
    power: SlopeFit
    max_relative_residual: float
    chi2_per_dof: float | None
    misfit: bool
    n_points: int
    reason: str = ""
    power_test: Misfit | None = None
    test: Misfit | None = None

    def describe(self) -> str:
        """One line for a report: the model used and its misfit judgement, and the power law's when it was not
        used."""
        power = self.power_test.describe() if self.power_test is not None else "no test"
        power_misfit = f"power law (slope {self.power.slope:.4g}): {power}"
        if self.reason:
            return f"{power_misfit}; two-term exponent not identified: {self.reason}: INCONCLUSIVE"
        text = f"{self.model} model: {self.test.describe() if self.test is not None else 'no test'}"
        if self.model == "two-term":
            text += f"; {power_misfit}"
        if self.misfit:
            text += "; neither model fits (misfit material and significant): INCONCLUSIVE"
        return text


def rate_fit(
    x: ArrayLike,
    y: ArrayLike | None = None,
    y_se: ArrayLike | None = None,
    *,
    replicates: Sequence[ArrayLike] | None = None,
    rng: np.random.Generator,
    ci: float,
    n_boot: int = 2000,
    tolerance: float = MISFIT_TOLERANCE,
) -> RateFit:
    """The rate r of y ~ x^r with its CI by the misfit protocol (module docstring).

    Give either measured means ``y`` (with standard errors ``y_se``, or none for noise-free or unknown
    errors) or ``replicates`` (one array of independent replicates per x; the bootstrap resamples within
    each x).

    Args:
        x: the x values (e.g. m or k), at least 4, > 0, strictly increasing. The two-term fallback needs
            at least 5 (2 degrees of freedom beside its 3 parameters); with 4 a misfitting power law leaves
            the window misfit.
        y: the measured values (> 0), or ``None`` with ``replicates``.
        y_se: standard errors of ``y`` (> 0), or ``None``.
        replicates: one 1-D array of at least 2 replicates per x, or ``None`` with ``y``.
        rng: the generator of the bootstrap resamples.
        ci: confidence level of the interval, in (0, 1) (a claim passes its per-part level).
        n_boot: bootstrap resamples (>= 100).
        tolerance: the materiality margin of a misfit, in (0, 1) (docs/theory.md: 5%); a misfit counts only
            when it is also significant (:func:`crl.stats.misfit.judge_misfit`).

    Raises:
        ValueError: on fewer than 4 points, x not strictly increasing, a tolerance outside (0, 1), both or
            neither of ``y`` and ``replicates``, or the errors of :func:`crl.stats.loglog_slope` /
            :func:`crl.stats.loglog_slope_from_replicates`.
    """
    if (y is None) == (replicates is None):
        raise ValueError("pass either y (with optional y_se) or replicates, not both and not neither.")
    gx = as_finite_1d("x", x)
    if gx.size < 4:
        raise ValueError(f"x has {gx.size} points; a rate with its two-term fallback needs at least 4.")
    if np.any(np.diff(gx) <= 0.0):
        raise ValueError(f"x must be strictly increasing (got {gx[:6].tolist()}...); sort the points by x.")
    if not 0.0 < tolerance < 1.0:
        raise ValueError(
            f"tolerance={tolerance!r} must be a relative residual in (0, 1); the protocol's is "
            f"{MISFIT_TOLERANCE:g}."
        )
    check_boot(n_boot, ci)
    groups: list[FloatArray] | None = None
    se: FloatArray | None = None
    if replicates is not None:
        power = loglog_slope_from_replicates(gx, replicates, rng=rng, n_boot=n_boot, ci=ci)
        groups = [as_finite_1d(f"replicates[{i}]", r) for i, r in enumerate(replicates)]
        means = np.array([g.mean() for g in groups])
        se = np.array([g.std(ddof=1) / math.sqrt(g.size) for g in groups])
    else:
        values = as_finite_1d("y", y if y is not None else [])
        power = loglog_slope(gx, values, y_se, rng=rng, n_boot=n_boot, ci=ci)
        means = values
        se = None if y_se is None else as_finite_1d("y_se", y_se)
    power_test = judge_misfit(
        means, power.predict(gx), power_jacobian(gx), standard_errors=se, tolerance=tolerance
    )
    if not power_test.misfit:
        low, high = _resolved(power.slope, power.ci_low, power.ci_high)
        return RateFit(
            exponent=power.slope,
            ci_low=low,
            ci_high=high,
            ci_level=ci,
            model="power",
            power=power,
            max_relative_residual=power.max_relative_residual,
            chi2_per_dof=_chi2_per_dof(power_test),
            misfit=False,
            n_points=int(gx.size),
            power_test=power_test,
            test=power_test,
        )
    return _two_term_rate(gx, means, se, groups, power, power_test, rng, ci, n_boot, tolerance)


def _chi2_per_dof(test: Misfit) -> float | None:
    """chi^2 / dof of a misfit judgement (``None`` for exact values)."""
    return None if test.chi2 is None else test.chi2 / test.dof


class NonPositiveMeanError(ValueError):
    """A seed mean (or a leave-one-seed-out mean) is <= 0, so its logarithm, and the rate, are undefined."""


class FewSeedsError(ValueError):
    """No more seeds than window points: the seeds' covariance of the means, which the misfit test needs, is
    singular."""


def _power_slopes(log_x: FloatArray, means: FloatArray) -> FloatArray:
    """Least-squares slopes of log means on log x, one per column of ``means`` (J, C)."""
    centred = log_x - log_x.mean()
    return np.asarray(centred @ np.log(means) / np.sum(centred**2))


def _check_positive(means: FloatArray) -> None:
    if np.any(means <= 0.0):
        raise NonPositiveMeanError("a mean over seeds is <= 0: the log-log rate is undefined")


def seed_rate(x: ArrayLike, values: ArrayLike, level: float) -> RateFit:
    """The rate r of the seed means in x by the misfit protocol, with its jackknife Student-t interval
    (module docstring, rates over seeds).

    Args:
        x: J >= 4 grid values > 0, increasing.
        values: (S, J) per-seed values, S >= 3.
        level: the confidence level of the interval.

    Raises:
        ValueError: on bad shapes or fewer than 3 seeds or 4 points.
        FewSeedsError: with no more seeds than points.
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
    if n_seeds <= gx.size:
        raise FewSeedsError(
            f"{n_seeds} seeds for {gx.size} points: the misfit test needs more seeds than window points (their "
            "covariance is singular otherwise)."
        )
    log_x = np.log(gx)
    slope = float(_power_slopes(log_x, means[:, None])[0])
    intercept = float(np.log(means).mean() - slope * log_x.mean())
    power_fitted = np.exp(intercept + slope * log_x)
    t = float(scipy_stats.t.ppf(0.5 + level / 2.0, n_seeds - 1))
    power_test = judge_misfit(means, power_fitted, power_jacobian(gx), seed_values=data)
    power_residual = power_test.max_relative_residual
    power_se = jackknife_se(_power_slopes(log_x, loo.T))
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
    if not power_test.misfit:
        return RateFit(
            slope,
            *_resolved(slope, power.ci_low, power.ci_high),
            level,
            "power",
            power,
            power_residual,
            _chi2_per_dof(power_test),
            False,
            int(gx.size),
            power_test=power_test,
            test=power_test,
        )
    if gx.size - TWO_TERM_PARAMETERS < MIN_MISFIT_DOF:
        reason = (
            f"{gx.size} points leave the two-term model {gx.size - TWO_TERM_PARAMETERS} degree of freedom; its "
            f"misfit needs at least {MIN_MISFIT_DOF}"
        )
        return _unidentified(power, level, gx.size, reason, power_test=power_test)
    u = gx / math.exp(float(log_x.mean()))
    weights = 1.0 / means**2
    grid = _exponent_grid(slope)
    exponent = float(_profile_minimisers(u, means[:, None], weights, grid)[0])
    if math.isnan(exponent):
        reason = "no exponent has an interior best fit with a leading term a > 0 and a positive model"
        return _unidentified(power, level, gx.size, reason, power_test=power_test)
    if reason := _against_trend(means, exponent):
        return _unidentified(power, level, gx.size, reason, exponent, power_test=power_test)
    fitted, jacobian = _two_term_fitted(u, means, weights, exponent)
    test = judge_misfit(means, fitted, jacobian, seed_values=data)
    residual = test.max_relative_residual
    leave_one_out = _profile_minimisers(u, loo.T, weights, grid)
    if np.any(np.isnan(leave_one_out)):
        reason = (
            f"{int(np.sum(np.isnan(leave_one_out)))} of {n_seeds} leave-one-seed-out fits have no exponent"
        )
        return _unidentified(power, level, gx.size, reason, exponent, residual, power_test)
    se = jackknife_se(leave_one_out)
    return RateFit(
        exponent,
        *_resolved(exponent, exponent - t * se, exponent + t * se),
        level,
        "two-term",
        power,
        residual,
        _chi2_per_dof(test),
        test.misfit,
        int(gx.size),
        power_test=power_test,
        test=test,
    )


@dataclass(frozen=True)
class SecantRate:
    """An end-to-end rate: the secant slope of the seed means between a window's ends (module docstring).

    Attributes:
        exponent: ``log(ybar_hi / ybar_lo) / log(x_hi / x_lo)``.
        ci_low, ci_high: its delete-one-seed jackknife Student-t interval at ``ci_level``.
        ci_level: the interval's level.
        se: the jackknife standard error.
        seeds: S.
        fitted_slope: the least-squares log-log slope over the whole window (reported, not judged).
        x: the window's x values.
        means: the seed means at each x.
    """

    exponent: float
    ci_low: float
    ci_high: float
    ci_level: float
    se: float
    seeds: int
    fitted_slope: float
    x: tuple[float, ...]
    means: tuple[float, ...]

    def describe(self) -> str:
        """One line for a report: the ends, the jackknife, and the fitted slope beside."""
        return (
            f"secant between x = {self.x[0]:g} and {self.x[-1]:g} (means {self.means[0]:.4g} -> "
            f"{self.means[-1]:.4g}), jackknife se {self.se:.3g} over {self.seeds} seeds; fitted slope over "
            f"{len(self.x)} points {self.fitted_slope:.3g} (reported, not judged)"
        )


def secant_rate(x: ArrayLike, values: ArrayLike, level: float) -> SecantRate:
    """The secant slope of the seed means between the window's ends, with its jackknife Student-t interval.

    Args:
        x: J >= 2 grid values > 0, strictly increasing.
        values: (S, J) per-seed values, S >= 3 (seed s holds one value at every x).
        level: the confidence level.

    Raises:
        ValueError: on bad shapes, fewer than 3 seeds, non-finite values or x not increasing.
        NonPositiveMeanError: when an end's mean, or a leave-one-seed-out mean there, is <= 0.
    """
    gx = as_finite_1d("x", x)
    data = np.asarray(values, dtype=np.float64)
    if gx.size < 2 or np.any(gx <= 0.0) or np.any(np.diff(gx) <= 0.0):
        raise ValueError(f"x must hold at least 2 increasing values > 0; got {gx.tolist()}.")
    if data.ndim != 2 or data.shape[1] != gx.size or data.shape[0] < 3:
        raise ValueError(f"values must be (seeds >= 3, {gx.size}); got shape {data.shape}.")
    ends = data[:, [0, -1]]
    n_seeds = data.shape[0]
    _check_positive(ends.mean(axis=0))
    _check_positive((ends.sum(axis=0)[None, :] - ends) / (n_seeds - 1))
    span = math.log(gx[-1] / gx[0])
    interval = jackknife_t(lambda means: math.log(means[1] / means[0]) / span, ends, level)
    means = data.mean(axis=0)
    fitted = (
        float(_power_slopes(np.log(gx), means[:, None])[0])
        if np.all(means > 0.0) and gx.size > 2
        else math.nan
    )
    return SecantRate(
        interval.value,
        *_resolved(interval.value, interval.ci_low, interval.ci_high),
        level,
        interval.se,
        n_seeds,
        fitted,
        tuple(map(float, gx)),
        tuple(map(float, means)),
    )


def _two_term_rate(
    x: FloatArray,
    y: FloatArray,
    se: FloatArray | None,
    groups: list[FloatArray] | None,
    power: SlopeFit,
    power_test: Misfit,
    rng: np.random.Generator,
    ci: float,
    n_boot: int,
    tolerance: float,
) -> RateFit:
    """The two-term fallback: fit y = a x^r + b x^(r-1) with a > 0 and a positive model, bootstrap r, report
    the model's misfit; a window whose r is not identified (module docstring) misfits with its reason."""
    scale = math.exp(float(np.mean(np.log(y))))
    y, se = y / scale, None if se is None else se / scale
    groups = None if groups is None else [g / scale for g in groups]
    dof = x.size - TWO_TERM_PARAMETERS
    if dof < MIN_MISFIT_DOF:
        reason = (
            f"{x.size} points leave the two-term model {dof} degree of freedom; its misfit needs at least "
            f"{MIN_MISFIT_DOF} (at least {TWO_TERM_PARAMETERS + MIN_MISFIT_DOF} points)"
        )
        return _unidentified(power, ci, x.size, reason, power_test=power_test)
    weights = 1.0 / (se**2 if se is not None else y**2)
    grid = _exponent_grid(power.slope)
    u = x / math.exp(float(np.mean(np.log(x))))
    exponent = float(_profile_minimisers(u, y[:, None], weights, grid)[0])
    if math.isnan(exponent):
        reason = (
            f"no exponent in [{grid[0]:.3g}, {grid[-1]:.3g}] has an interior best fit with a leading term "
            "a > 0 and a positive model over the window"
        )
        return _unidentified(power, ci, x.size, reason, power_test=power_test)
    if reason := _against_trend(y * scale, exponent):
        return _unidentified(power, ci, x.size, reason, exponent, power_test=power_test)
    fitted, jacobian = _two_term_fitted(u, y, weights, exponent)
    test = judge_misfit(y, fitted, jacobian, standard_errors=se, tolerance=tolerance)
    residual = test.max_relative_residual
    boot = _bootstrap_samples(y, fitted, se, groups, rng, n_boot)
    boot_exponents = _profile_minimisers(u, boot, weights, grid)
    identified = boot_exponents[~np.isnan(boot_exponents)]
    unidentified = n_boot - identified.size
    if unidentified > MAX_UNIDENTIFIED_SHARE * n_boot:
        reason = f"{unidentified} of {n_boot} bootstrap resamples have no identified exponent"
        return _unidentified(power, ci, x.size, reason, exponent, residual, power_test)
    low, high = _resolved(exponent, *map(float, np.quantile(identified, [0.5 - ci / 2.0, 0.5 + ci / 2.0])))
    return RateFit(
        exponent=exponent,
        ci_low=low,
        ci_high=high,
        ci_level=ci,
        model="two-term",
        power=power,
        max_relative_residual=residual,
        chi2_per_dof=_chi2_per_dof(test),
        misfit=test.misfit,
        n_points=int(x.size),
        power_test=power_test,
        test=test,
    )


def _unidentified(
    power: SlopeFit,
    ci: float,
    n_points: int,
    reason: str,
    exponent: float = math.nan,
    residual: float = math.inf,
    power_test: Misfit | None = None,
) -> RateFit:
    """A two-term fit whose exponent is not identified: misfit, with an unbounded interval and the reason."""
    return RateFit(
        exponent=exponent,
        ci_low=-math.inf,
        ci_high=math.inf,
        ci_level=ci,
        model="two-term",
        power=power,
        max_relative_residual=residual,
        chi2_per_dof=None,
        misfit=True,
        n_points=n_points,
        reason=reason,
        power_test=power_test,
    )


def _exponent_grid(slope: float) -> FloatArray:
    """Candidate leading exponents: a window of +-1.5 around the power law's slope, at least [-3, 1]."""
    low, high = min(-3.0, slope - 1.5), max(1.0, slope + 1.5)
    return np.arange(low, high + _GRID_STEP / 2.0, _GRID_STEP)


def _design(u: FloatArray, exponent: float) -> FloatArray:
    """The (n, 2) design [u^r, u^(r-1)] of the two-term model at the rescaled x values u."""
    return np.column_stack([u**exponent, u ** (exponent - 1.0)])


def _profile_minimisers(u: FloatArray, ys: FloatArray, weights: FloatArray, grid: FloatArray) -> FloatArray:
    """For each column of ``ys`` (n, B), the r minimising the weighted residual sum of squares of
    y = a u^r + b u^(r-1) over the admissible r, with (a, b) profiled out by weighted least squares; NaN where
    the exponent is not identified (no admissible r, or the best one on the grid's edge).

    For every grid r at once: with c1 = sqrt(w) u^r and c2 = sqrt(w) u^(r-1), g = c1.c2/|c1|^2 and
    c2' = c2 - g c1 (Gram-Schmidt), alpha = c1.sqrt(w)y/|c1|^2 and beta = c2'.sqrt(w)y/|c2'|^2 give
    RSS(r) = |sqrt(w) y|^2 - alpha^2 |c1|^2 - beta^2 |c2'|^2 and the coefficients b = beta, a = alpha - beta g.
    r is admissible when a > 0 and a u_i + b > 0 at every u_i (the model u^(r-1) (a u + b) is then positive).
    A parabola through the grid minimum and its neighbours refines r below the grid step.
    """
    sqrt_w = np.sqrt(weights)
    wy = sqrt_w[:, None] * ys
    c1 = sqrt_w * u ** grid[:, None]
    c2 = c1 / u
    c1c1 = np.sum(c1 * c1, axis=1)
    g = np.sum(c1 * c2, axis=1) / c1c1
    c2 = c2 - g[:, None] * c1
    c2c2 = np.sum(c2 * c2, axis=1)
    alpha, beta = (c1 @ wy) / c1c1[:, None], (c2 @ wy) / c2c2[:, None]
    a = alpha - beta * g[:, None]
    admissible = (a > 0.0) & (a * np.min(u) + beta > 0.0)
    rss = np.sum(wy * wy, axis=0)[None, :] - alpha**2 * c1c1[:, None] - beta**2 * c2c2[:, None]
    rss = np.where(admissible, rss, np.inf)
    best = np.argmin(rss, axis=0)
    cols = np.arange(ys.shape[1])
    interior = (best > 0) & (best < grid.size - 1) & np.isfinite(rss[best, cols])
    inner = np.clip(best, 1, grid.size - 2)
    left, mid, right = rss[inner - 1, cols], rss[inner, cols], rss[inner + 1, cols]
    finite = np.isfinite(left) & np.isfinite(mid) & np.isfinite(right)
    left, mid, right = (np.where(finite, v, 0.0) for v in (left, mid, right))
    curvature = left - 2.0 * mid + right
    smooth = finite & (curvature > 0.0)
    shift = np.where(smooth, 0.5 * (left - right) / np.where(smooth, curvature, 1.0), 0.0)
    refined = grid[inner] + np.clip(shift, -1.0, 1.0) * _GRID_STEP
    return np.asarray(np.where(interior, refined, np.nan))


def _two_term_fitted(
    u: FloatArray, y: FloatArray, weights: FloatArray, exponent: float
) -> tuple[FloatArray, FloatArray]:
    """The fitted values of y = a u^r + b u^(r-1) at the given r (a, b by weighted least squares), and the
    Jacobian of their logarithm in (a, b, r) (:func:`crl.stats.misfit.two_term_jacobian`)."""
    design = _design(u, exponent)
    sqrt_w = np.sqrt(weights)
    coef, *_ = np.linalg.lstsq(sqrt_w[:, None] * design, sqrt_w * y, rcond=None)
    return np.asarray(design @ coef), two_term_jacobian(u, float(coef[0]), float(coef[1]), exponent)


def _bootstrap_samples(
    y: FloatArray,
    fitted: FloatArray,
    se: FloatArray | None,
    groups: list[FloatArray] | None,
    rng: np.random.Generator,
    n_boot: int,
) -> FloatArray:
    """(n, B) resampled data: replicate means resampled within each x; else the fit plus normal errors of
    the given se; else the fit times resampled relative residuals, rescaled by sqrt(n / (n - 3)) for the
    three fitted parameters (a residual bootstrap)."""
    if groups is not None:
        return np.vstack([g[rng.integers(0, g.size, size=(n_boot, g.size))].mean(axis=1) for g in groups])
    if se is not None:
        return fitted[:, None] + se[:, None] * rng.standard_normal((y.size, n_boot))
    relative = (y / fitted - 1.0) * math.sqrt(y.size / (y.size - TWO_TERM_PARAMETERS))
    return fitted[:, None] * (1.0 + relative[rng.integers(0, y.size, size=(y.size, n_boot))])
